/*
 * trace.c - records op calls into a trace (see trace.h). Used by graph and
 * static mode to build their graph, and by ft_model_macs to count a forward's
 * work without running it.
 */
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 256;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

ft_status ft_trace_begin(ft_ctx *ctx, ft_trace *tr) {
    if (ctx->exec == FT_EXEC_TRACE)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "nested traces are not supported");
    tr->saved_exec = ctx->exec;
    tr->saved_trace = ctx->trace;
    ctx->exec = FT_EXEC_TRACE;
    ctx->trace = tr;
    return FT_OK;
}

void ft_trace_end(ft_ctx *ctx, ft_trace *tr) {
    ctx->exec = tr->saved_exec;
    ctx->trace = tr->saved_trace;
}

void ft_trace_free(ft_trace *tr) {
    if (!tr) return;
    for (int i = 0; i < tr->n_host; i++) free(tr->host_data[i]);
    free(tr->host_data);
    free(tr->nodes);
    memset(tr, 0, sizeof *tr);
}

ft_status ft_trace_record(ft_ctx *ctx, ft_tensor *node) {
    ft_trace *tr = ctx->trace;
    if (!tr) return ft_set_error(ctx, FT_ERR_INTERNAL, "tracing without a trace");
    if (grow((void **)&tr->nodes, &tr->cap_nodes, tr->n_nodes + 1, sizeof *tr->nodes))
        return ft_set_error(ctx, FT_ERR_OOM, "out of host memory while tracing");
    node->id = tr->n_nodes;
    tr->nodes[tr->n_nodes++] = node;
    return FT_OK;
}

static ft_tensor *leaf(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape, uint32_t flags) {
    ft_tensor *t = ft_tensor_alloc_header(ctx);
    if (!t) return NULL;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->ne[i] = shape[i];
    ft_tensor_set_contiguous_strides(t);
    t->flags = flags;
    if (ft_trace_record(ctx, t) != FT_OK) return NULL;
    return t;
}

ft_tensor *ft_trace_input(ft_ctx *ctx, const char *name, ft_dtype dtype, int ndim,
                          const int64_t *shape) {
    ft_tensor *t = leaf(ctx, dtype, ndim, shape, FT_TF_INPUT);
    if (t) snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

ft_tensor *ft_trace_constant(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape,
                             const void *data) {
    ft_trace *tr = ctx->trace;
    ft_tensor *t = leaf(ctx, dtype, ndim, shape, FT_TF_CONST);
    if (!t) return NULL;
    size_t bytes = ft_nbytes(t);
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy || grow((void **)&tr->host_data, &tr->cap_host, tr->n_host + 1, sizeof(void *))) {
        free(copy);
        ft_set_error(ctx, FT_ERR_OOM, "out of host memory while tracing");
        return NULL;
    }
    memcpy(copy, data, bytes);
    tr->host_data[tr->n_host++] = copy;
    t->extra = copy; /* host data until a plan uploads it */
    return t;
}

const void *ft_trace_constant_data(const ft_tensor *leaf) {
    return (leaf->flags & FT_TF_CONST) && leaf->op == FT_OP_NONE ? leaf->extra : NULL;
}

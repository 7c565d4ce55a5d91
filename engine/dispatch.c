/*
 * dispatch.c - the eager dispatcher: the one path every op call takes.
 *
 *   build node -> CHECK -> INFER -> ALLOC -> SELECT -> LAUNCH
 *
 * Each phase is a separate step bracketed by the context's hooks, so the
 * instrumentation (phase timers, NVTX ranges, CUPTI correlation) can time
 * them one by one. In trace mode the node is recorded after INFER and nothing
 * is allocated or run: graph mode replays the recorded nodes through a plan
 * (graph/) that resolved ALLOC and SELECT once, ahead of time.
 */
#include "ft_internal.h"
#include "cuda_backend.h"
#include "../graph/trace.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define HOOK(fn, ...)                                                      \
    do {                                                                   \
        if (ctx->hooks && ctx->hooks->fn) ctx->hooks->fn(ctx->hooks->user, __VA_ARGS__); \
    } while (0)

const char *ft_node_describe(const ft_tensor *node, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "%s(", ft_op_name(node->op));
    for (int i = 0; i < FT_MAX_SRC && n < size; i++) {
        const ft_tensor *s = node->src[i];
        if (!s) {
            /* print holes only when a later source exists */
            int later = 0;
            for (int j = i + 1; j < FT_MAX_SRC; j++) later |= node->src[j] != NULL;
            if (!later) break;
            n += (size_t)snprintf(buf + n, size - n, "%s-", i ? ", " : "");
            continue;
        }
        char sh[96];
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "", ft_shape_str(s, sh, sizeof sh));
    }
    if (n < size) snprintf(buf + n, size - n, ")");
    return buf;
}

/* Adds the node's description in front of the pending error message. */
static ft_tensor *fail(ft_ctx *ctx, ft_tensor *node) {
    char d[512];
    ft_error_prefix(ctx, "op %s", ft_node_describe(node, d, sizeof d));
    HOOK(op_end, node, ctx->status);
    ft_tensor_drop_storage(node);
    return NULL;
}

ft_kernel_fn ft_select_kernel(const ft_ctx *ctx, const ft_tensor *node) {
    const ft_op_def *def = &ft_op_table[node->op];
    return ctx->device == FT_DEVICE_CUDA ? def->cuda : def->cpu;
}

/* The emulated per-op host cost (FT_OP_HOST_COST_US): a busy wait, as a slower
 * framework's bookkeeping would be. Spent in the SELECT phase of ft_dispatch,
 * where a real framework resolves dispatch keys and kernels, so profiles
 * charge it to the host and not to LAUNCH (the CPU device's busy time). */
static void spin_us(double us) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) * 1e6 + (double)(t.tv_nsec - t0.tv_nsec) * 1e-3 < us);
}

ft_status ft_node_launch(ft_ctx *ctx, ft_tensor *node) {
    ft_kernel_fn fn = ft_select_kernel(ctx, node);
    if (!fn)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "no %s kernel for this op",
                            ft_device_name(ctx->device));
    ft_status st = (ft_status)fn(ctx, node);
#ifdef FT_WITH_CUDA
    if (st == FT_OK && ctx->device == FT_DEVICE_CUDA) st = ft_cuda_after_launch(ctx, ft_op_name(node->op));
#endif
    if (st != FT_OK && ctx->status == FT_OK)
        ft_set_error(ctx, st, "kernel failed with %s", ft_status_str(st));
    ctx->counters[node->op].launches++;
    return st != FT_OK ? st : ctx->status;
}

ft_tensor *ft_dispatch(ft_ctx *ctx, ft_op op, ft_tensor *const *src, int n_src,
                       const void *params, size_t params_size) {
    if (!ctx || ctx->status != FT_OK) return NULL;
    if ((unsigned)op >= FT_OP_COUNT || n_src > FT_MAX_SRC || params_size > FT_MAX_OP_PARAMS) {
        ft_set_error(ctx, FT_ERR_INTERNAL, "dispatch: invalid op %d", (int)op);
        return NULL;
    }
    const ft_op_def *def = &ft_op_table[op];
    ft_tensor *node = ft_tensor_alloc_header(ctx);
    if (!node) return NULL;
    node->op = op;
    for (int i = 0; i < n_src; i++) node->src[i] = src[i];
    if (params_size) memcpy(node->op_params, params, params_size);
    ctx->counters[op].calls++;
    HOOK(op_begin, node);

    /* CHECK: arity, devices, then the op's own rules */
    HOOK(phase_begin, FT_PHASE_CHECK, node);
    if (n_src < def->min_src || n_src > def->max_src) {
        ft_set_error(ctx, FT_ERR_INTERNAL, "takes %d to %d inputs, got %d", def->min_src,
                     def->max_src, n_src);
        return fail(ctx, node);
    }
    for (int i = 0; i < n_src; i++) {
        if (!src[i]) {
            if (i < def->min_src) {
                ft_set_error(ctx, FT_ERR_INVALID_ARG, "input %d is NULL", i);
                return fail(ctx, node);
            }
            continue;
        }
        if (src[i]->device != ctx->device) {
            ft_set_error(ctx, FT_ERR_INVALID_ARG, "input %d is on %s, the context on %s", i,
                         ft_device_name(src[i]->device), ft_device_name(ctx->device));
            return fail(ctx, node);
        }
        if (ctx->exec == FT_EXEC_EAGER && !src[i]->data && ft_numel(src[i]) > 0) {
            ft_set_error(ctx, FT_ERR_INVALID_ARG, "input %d has no data (released?)", i);
            return fail(ctx, node);
        }
    }
    if (def->check && def->check(ctx, node) != FT_OK) return fail(ctx, node);
    HOOK(phase_end, FT_PHASE_CHECK, node);

    /* INFER: output dtype and shape */
    HOOK(phase_begin, FT_PHASE_INFER, node);
    if (!def->infer || def->infer(ctx, node) != FT_OK || ft_tensor_check_size(ctx, node) != FT_OK) {
        if (!def->infer) ft_set_error(ctx, FT_ERR_INTERNAL, "op has no shape inference");
        return fail(ctx, node);
    }
    HOOK(phase_end, FT_PHASE_INFER, node);

    if (ctx->exec == FT_EXEC_TRACE) {
        if (ft_trace_record(ctx, node) != FT_OK) return fail(ctx, node);
        HOOK(op_end, node, FT_OK);
        return node;
    }

    /* ALLOC: output storage from the caching allocator */
    HOOK(phase_begin, FT_PHASE_ALLOC, node);
    if (ft_tensor_alloc_storage(ctx, node) != FT_OK) return fail(ctx, node);
    HOOK(phase_end, FT_PHASE_ALLOC, node);

    /* SELECT: the backend's kernel (and the emulated framework cost, if any) */
    HOOK(phase_begin, FT_PHASE_SELECT, node);
    if (ctx->extra_op_cost_us > 0) spin_us(ctx->extra_op_cost_us);
    ft_kernel_fn fn = ft_select_kernel(ctx, node);
    HOOK(phase_end, FT_PHASE_SELECT, node);
    if (!fn) {
        ft_set_error(ctx, FT_ERR_UNSUPPORTED, "no %s kernel for this op", ft_device_name(ctx->device));
        return fail(ctx, node);
    }

    /* LAUNCH */
    HOOK(phase_begin, FT_PHASE_LAUNCH, node);
    ft_status st = ft_node_launch(ctx, node);
    HOOK(phase_end, FT_PHASE_LAUNCH, node);
    if (st != FT_OK) return fail(ctx, node);
    HOOK(op_end, node, FT_OK);
    return node;
}

ft_tensor *ft_dispatch_view(ft_ctx *ctx, ft_tensor *x, int ndim, const int64_t *ne,
                            const int64_t *nb, int64_t offs) {
    if (!ctx || ctx->status != FT_OK || !x) return NULL;
    ft_tensor *node = ft_tensor_alloc_header(ctx);
    if (!node) return NULL;
    node->op = FT_OP_VIEW;
    node->src[0] = x;
    node->dtype = x->dtype;
    node->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        node->ne[i] = ne[i];
        node->nb[i] = nb[i];
    }
    node->flags = FT_TF_VIEW;
    node->view_src = x->view_src ? x->view_src : x;
    node->view_offs = x->view_offs + offs;
    ctx->counters[FT_OP_VIEW].calls++;
    if (x->data) node->data = (char *)x->data + offs * (int64_t)ft_dtype_size(x->dtype);
    if (ctx->exec == FT_EXEC_TRACE) {
        if (ft_trace_record(ctx, node) != FT_OK) return NULL;
        return node;
    }
    node->block = x->block;
    if (node->block) node->block->refs++;
    return node;
}

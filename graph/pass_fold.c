/*
 * pass_fold.c - constant folding: a node computed from weights and constants
 * only (WavLM's weight norm, Funnel's positional projections, a constant mask)
 * is evaluated once at plan time with the backend's own kernel and becomes a
 * constant leaf owned by the graph, so a forward never recomputes it.
 *
 * A node computed from model weights alone (WavLM's weight norm) gives the same
 * value for every input shape: it goes into the model's constant cache, keyed
 * by its op, parameters and shapes and by the memory of its sources, so the
 * next plan takes it from there instead of computing and storing it again.
 * Nodes that read constants made during the trace (position tables, masks)
 * depend on the input shape and stay the plan's own.
 */
#include "graph.h"

#include <string.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* What t's value depends on besides its sources' memory: the op, its parameters,
 * its dtype and shape, and each source's dtype, shape and strides. */
static uint64_t fold_tag(const ft_tensor *t) {
    uint64_t h = 1469598103934665603ull;
    h = fnv(h, &t->op, sizeof t->op);
    h = fnv(h, t->op_params, sizeof t->op_params);
    h = fnv(h, &t->dtype, sizeof t->dtype);
    h = fnv(h, &t->ndim, sizeof t->ndim);
    h = fnv(h, t->ne, sizeof t->ne);
    for (int k = 0; k < FT_MAX_SRC; k++) {
        const ft_tensor *s = t->src[k];
        if (!s) continue;
        h = fnv(h, &k, sizeof k);
        h = fnv(h, &s->dtype, sizeof s->dtype);
        h = fnv(h, &s->ndim, sizeof s->ndim);
        h = fnv(h, s->ne, sizeof s->ne);
        h = fnv(h, s->nb, sizeof s->nb);
    }
    return h;
}

/* Gives t (a constant leaf or a view of one) its device data. */
static ft_status materialise(ft_graph *g, ft_tensor *t) {
    if (t->data || ft_numel(t) == 0) return FT_OK;
    ft_tensor *root = t->op == FT_OP_VIEW ? t->view_src : t;
    if (!root->data && root->op == FT_OP_NONE && (root->flags & FT_TF_CONST) && root->extra) {
        if (ft_tensor_alloc_storage(g->ctx, root) != FT_OK) return g->ctx->status;
        ft_status st = ft_copy_to_device(g->ctx, root->data, root->extra, ft_nbytes(root));
        if (st != FT_OK) return st;
    }
    if (!root->data)
        return ft_set_error(g->ctx, FT_ERR_INTERNAL, "constant folding: a constant has no data");
    if (t != root) t->data = (char *)root->data + t->view_offs * (int64_t)ft_dtype_size(t->dtype);
    return FT_OK;
}

int ft_pass_fold(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *t = g->nodes[i];
        if (t->op == FT_OP_NONE || t->op == FT_OP_VIEW || (t->flags & FT_GF_DEAD)) continue;
        bool all_const = true;
        for (int k = 0; k < FT_MAX_SRC && all_const; k++)
            if (t->src[k] && !ft_graph_is_const(t->src[k])) all_const = false;
        if (!all_const) continue;
        ft_kernel_fn fn = ft_select_kernel(g->ctx, t);
        if (!fn) continue; /* the planner names the missing kernel */
        for (int k = 0; k < FT_MAX_SRC; k++)
            if (t->src[k] && materialise(g, t->src[k]) != FT_OK) return -1;
        /* shape-independent (weights only): look in, or add to, the model's cache */
        bool share = g->cache != NULL && !(t->flags & FT_TF_OUTPUT);
        const void *key[FT_MAX_SRC];
        for (int k = 0; k < FT_MAX_SRC; k++) {
            key[k] = t->src[k] ? t->src[k]->data : NULL;
            if (t->src[k] && !ft_graph_const_shared(t->src[k])) share = false;
        }
        uint64_t tag = share ? fold_tag(t) : 0;
        ft_tensor *hit = share ? ft_const_cache_get(g->cache, FT_CONST_FOLD, tag, key, FT_MAX_SRC) : NULL;
        if (hit) {
            t->data = hit->data;
            t->block = hit->block;
            t->block->refs++;
        } else {
            if (ft_tensor_alloc_storage(g->ctx, t) != FT_OK) return -1;
            ft_status st = (ft_status)fn(g->ctx, t);
            if (st != FT_OK) {
                char d[256];
                if (g->ctx->status == FT_OK) ft_set_error(g->ctx, st, "kernel failed");
                ft_error_prefix(g->ctx, "constant folding of %s", ft_node_describe(t, d, sizeof d));
                return -1;
            }
            if (share && ft_const_cache_put(g->ctx, g->cache, FT_CONST_FOLD, tag, key, FT_MAX_SRC, t) != FT_OK)
                return -1;
        }
        for (int k = 0; k < FT_MAX_SRC; k++) t->src[k] = NULL;
        t->op = FT_OP_NONE;
        t->flags |= FT_GF_FOLDED | FT_TF_WEIGHT | (share ? FT_GF_SHARED : 0);
        n++;
    }
    g->passes.folded += n;
    return n;
}

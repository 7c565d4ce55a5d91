/*
 * pass_fold.c - constant folding: a node computed from weights and constants
 * only (WavLM's weight norm, Funnel's positional projections, a constant mask)
 * is evaluated once at plan time with the backend's own kernel and becomes a
 * constant leaf owned by the graph, so a forward never recomputes it.
 */
#include "graph.h"

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
        if (ft_tensor_alloc_storage(g->ctx, t) != FT_OK) return -1;
        ft_status st = (ft_status)fn(g->ctx, t);
        if (st != FT_OK) {
            char d[256];
            if (g->ctx->status == FT_OK) ft_set_error(g->ctx, st, "kernel failed");
            ft_error_prefix(g->ctx, "constant folding of %s", ft_node_describe(t, d, sizeof d));
            return -1;
        }
        for (int k = 0; k < FT_MAX_SRC; k++) t->src[k] = NULL;
        t->op = FT_OP_NONE;
        t->flags |= FT_GF_FOLDED | FT_TF_WEIGHT;
        n++;
    }
    g->passes.folded += n;
    return n;
}

/*
 * pass_ln_residual.c - residual add + LayerNorm: layernorm(a + b) becomes
 * layernorm(a, residual = b), one kernel that adds while it loads (the
 * LayerNorm kernels' src[3] contract). Only when both operands have the
 * add's full shape (no broadcast) and row layout, as the kernel reads them.
 */
#include "graph.h"

int ft_pass_ln_residual(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *ln = g->nodes[i];
        if (ln->op != FT_OP_LAYERNORM || (ln->flags & FT_GF_DEAD) || ln->src[3]) continue;
        ft_tensor *add = ln->src[0];
        if (!add || add->op != FT_OP_ADD || !ft_graph_fusable(g, add)) continue;
        ft_tensor *a = add->src[0], *b = add->src[1];
        if (!ft_shape_equal(a, add) || !ft_shape_equal(b, add) || a->dtype != ln->dtype ||
            b->dtype != ln->dtype || !ft_tensor_contiguous(a) || !ft_tensor_contiguous(b))
            continue;
        ln->src[0] = a;
        ln->src[3] = b;
        add->flags |= FT_GF_DEAD;
        n++;
    }
    g->passes.ln_residual += n;
    return n;
}

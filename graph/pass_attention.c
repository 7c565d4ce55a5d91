/*
 * pass_attention.c - whole-attention fusion: the eager pattern
 *
 *   scores = matmul(q, k^T, a)        [B, H, Sq, Sk]
 *   probs  = softmax(scores, mask, s)
 *   ctx    = matmul(probs, v)         [B, H, Sq, D]
 *
 * becomes one attention(q, k, v, mask, a * s) node, which never writes the
 * [B, H, Sq, Sk] scores. The op API may have made q, k^T or v contiguous with
 * a copy (a permuted head view is not a batched GEMM operand); the attention
 * kernels only need a unit inner stride, so those copies are bypassed and k^T
 * is turned back into k by a view. The copies die in dead-node elimination.
 */
#include "graph.h"

#include <string.h>

/* The view under a same-dtype contiguous copy, if the copy is only a layout fix. */
static ft_tensor *under_copy(ft_tensor *t) {
    if (t->op == FT_OP_COPY && t->src[0] && t->src[0]->dtype == t->dtype) return t->src[0];
    return t;
}

static bool inner_unit(const ft_tensor *t) {
    return t->ndim == 4 && (t->nb[3] == 1 || t->ne[3] == 1);
}

/* Rewrites kt ([.., D, Sk], one user) into a view k [.., Sk, D] of the same data. */
static bool untranspose(ft_graph *g, ft_tensor *kt) {
    ft_tensor *base = under_copy(kt);
    if (base->ndim != 4) return false;
    int64_t ne[4], nb[4];
    memcpy(ne, base->ne, sizeof ne);
    memcpy(nb, base->nb, sizeof nb);
    int64_t t = ne[2];
    ne[2] = ne[3];
    ne[3] = t;
    t = nb[2];
    nb[2] = nb[3];
    nb[3] = t;
    if (!(nb[3] == 1 || ne[3] == 1)) return false;
    ft_tensor *root = base->op == FT_OP_VIEW ? base->view_src : base;
    int64_t offs = base->op == FT_OP_VIEW ? base->view_offs : 0;
    if (!root) return false;
    ft_tensor *src = base == kt ? kt->src[0] : base;
    (void)g;
    kt->op = FT_OP_VIEW;
    memset(kt->op_params, 0, sizeof kt->op_params);
    memset(kt->src, 0, sizeof kt->src);
    kt->src[0] = src;
    kt->view_src = root;
    kt->view_offs = offs;
    kt->flags |= FT_TF_VIEW;
    memcpy(kt->ne, ne, sizeof ne);
    memcpy(kt->nb, nb, sizeof nb);
    kt->data = NULL;
    return true;
}

int ft_pass_attention(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *mm2 = g->nodes[i];
        if (mm2->op != FT_OP_MATMUL || (mm2->flags & FT_GF_DEAD) || mm2->ndim != 4) continue;
        if (FT_PARAMS(mm2, ft_params_matmul)->alpha != 1.0f) continue;
        ft_tensor *probs = mm2->src[0], *v = mm2->src[1];
        if (probs->op != FT_OP_SOFTMAX || !ft_graph_fusable(g, probs)) continue;
        ft_tensor *scores = probs->src[0], *mask = probs->src[1];
        if (scores->op != FT_OP_MATMUL || !ft_graph_fusable(g, scores) || scores->ndim != 4) continue;
        ft_tensor *q = under_copy(scores->src[0]), *kt = scores->src[1], *vv = under_copy(v);
        if (!inner_unit(q) || !inner_unit(vv) || kt->ndim != 4 || !ft_graph_fusable(g, kt)) continue;
        if (kt->op != FT_OP_VIEW && !(kt->op == FT_OP_COPY && kt->src[0]->dtype == kt->dtype))
            continue;
        if (q->dtype != mm2->dtype || vv->dtype != mm2->dtype) continue;
        float scale = FT_PARAMS(scores, ft_params_matmul)->alpha * FT_PARAMS(probs, ft_params_softmax)->scale;
        if (!untranspose(g, kt)) continue;
        ft_params_attention p = {scale};
        mm2->op = FT_OP_ATTENTION;
        memset(mm2->op_params, 0, sizeof mm2->op_params);
        memcpy(mm2->op_params, &p, sizeof p);
        memset(mm2->src, 0, sizeof mm2->src);
        mm2->src[0] = q;
        mm2->src[1] = kt;
        mm2->src[2] = vv;
        mm2->src[3] = mask;
        probs->flags |= FT_GF_DEAD;
        scores->flags |= FT_GF_DEAD;
        n++;
    }
    g->passes.attention += n;
    return n;
}

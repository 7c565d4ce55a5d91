/*
 * pass_affine.c - constant affine maps of a linear's output folded into GEMMs.
 * Funnel's attention scales q and then adds three bias vectors to it
 * (q + r_w_bias, q + r_r_bias, q + r_s_bias): one GEMM and four elementwise
 * kernels, which become three GEMMs with biases that the QKV merge (run after
 * this pass) stacks with K and V into one launch.
 *
 * - bias-free linear -> scale(alpha, 0): alpha becomes the GEMM's own scale
 *   (act(alpha x W^T + b + r), applied to the fp32 accumulator before the
 *   output is rounded): no weight is copied, and for a power of two, as
 *   Funnel's 1/8, the result is the same number, barring underflow.
 * - linear -> reshape [..., G, q] -> sum_last (WavLM's gate): q rows of the
 *   weights summed per group at plan time, the same sums in another order.
 * - a bias-free linear every user of which adds a constant [N] vector c_i:
 *   each add becomes linear(x, W, c_i), alpha kept. alpha x W^T + c_i is the
 *   same sum, rounded once where eager mode rounds the product first. With one
 *   user that is a bias epilogue and always pays. With k > 1 users the GEMM
 *   runs k times (stacked, in one launch): on CUDA that trades k elementwise
 *   kernels over [M, N] for (k - 1) M N K more tensor-core MACs, about H / 4
 *   flops per byte saved (below the H100's ~300 ridge, so a win at any batch,
 *   and k - 1 launches fewer); on the CPU, where every flop is paid, it is not
 *   made.
 */
#include "graph.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_USERS 8

/* A linear whose weights (and bias) are constants and which has no epilogue. */
static bool plain_linear(const ft_tensor *l) {
    return l->op == FT_OP_LINEAR && !(l->flags & FT_GF_DEAD) && !l->src[3] &&
           FT_PARAMS(l, ft_params_linear)->act == FT_ACT_NONE && ft_graph_is_const(l->src[1]) &&
           (!l->src[2] || ft_graph_is_const(l->src[2]));
}

/* bias-free linear -> scale(alpha, 0): the scale becomes the GEMM's alpha. */
static int fold_scales(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *s = g->nodes[i];
        if (s->op != FT_OP_SCALE || (s->flags & FT_GF_DEAD)) continue;
        const ft_params_scale *p = FT_PARAMS(s, ft_params_scale);
        ft_tensor *l = s->src[0];
        if (p->beta != 0.0f || !plain_linear(l) || l->src[2] || !ft_graph_fusable(g, l) ||
            l->dtype != s->dtype || !ft_shape_equal(l, s))
            continue;
        ft_params_linear *lp = (ft_params_linear *)(void *)l->op_params;
        float alpha = lp->alpha * p->alpha;
        if (!isfinite(alpha) || alpha == 0.0f) continue;
        lp->alpha = alpha;
        int pos = s->id;
        ft_graph_replace_uses(g, s, l);
        s->flags |= FT_GF_DEAD;
        ft_graph_move_later(g, l, pos);
        n++;
    }
    return n;
}

/* The constant [N] vector that add `a` adds to `y`, or NULL. */
static ft_tensor *added_vector(const ft_tensor *a, const ft_tensor *y) {
    if (a->op != FT_OP_ADD || (a->flags & FT_GF_DEAD) || !ft_shape_equal(a, y) || a->dtype != y->dtype)
        return NULL;
    ft_tensor *c = a->src[0] == y ? a->src[1] : a->src[1] == y ? a->src[0] : NULL;
    int64_t n = y->ne[y->ndim - 1];
    if (!c || c == y || !ft_graph_is_const(c) || c->ndim != 1 || c->ne[0] != n || c->dtype != y->dtype ||
        !ft_tensor_contiguous(c))
        return NULL;
    return c;
}

/* bias-free linear whose every user adds a constant vector: each add becomes a
 * linear with that bias. */
static int biases_into_gemms(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *l = g->nodes[i];
        if (!plain_linear(l) || l->src[2] || ft_graph_is_output(g, l) || (l->flags & FT_TF_OUTPUT))
            continue;
        ft_tensor *users[MAX_USERS];
        ft_tensor *vec[MAX_USERS];
        int k = 0, others = 0;
        for (int j = i + 1; j < g->n_nodes && !others; j++) {
            ft_tensor *u = g->nodes[j];
            if (u->flags & FT_GF_DEAD) continue;
            bool reads = u->view_src == l;
            for (int s = 0; s < FT_MAX_SRC; s++) reads = reads || u->src[s] == l;
            if (!reads) continue;
            ft_tensor *c = added_vector(u, l);
            if (!c || k == MAX_USERS) others = 1;
            else {
                users[k] = u;
                vec[k++] = c;
            }
        }
        /* every user accounted for: no view, no other reader */
        if (others || k == 0 || k != ft_graph_uses(g, l)) continue;
        if (k > 1 && g->ctx->device != FT_DEVICE_CUDA) continue;
        for (int u = 0; u < k; u++) {
            ft_tensor *a = users[u];
            ft_params_linear lp = {FT_ACT_NONE, FT_PARAMS(l, ft_params_linear)->alpha};
            a->op = FT_OP_LINEAR;
            memset(a->op_params, 0, sizeof a->op_params);
            memcpy(a->op_params, &lp, sizeof lp);
            memset(a->src, 0, sizeof a->src);
            a->src[0] = l->src[0];
            a->src[1] = l->src[1];
            a->src[2] = vec[u];
        }
        l->flags |= FT_GF_DEAD;
        n += k;
    }
    return n;
}

/* out [G, K] = sums of q consecutive rows of w [G * q, K] (a bias: K = 1). */
static bool sum_rows(const float *const *h, const ft_tensor *const *src, float *out, const void *user) {
    const float *w = h[0];
    const ft_tensor *t = src[0];
    int64_t q = *(const int64_t *)user, k = t->ndim == 2 ? t->ne[1] : 1, rows = t->ne[0] / q;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < k; c++) {
            float s = 0.0f;
            for (int64_t j = 0; j < q; j++) s += w[(r * q + j) * k + c];
            out[r * k + c] = s;
        }
    return true;
}

/* linear [..., G * q] -> reshape [..., G, q] -> sum_last -> [..., G, 1] (WavLM's
 * gate: two sums of 4 projections): the linear's rows summed per group at plan
 * time, W'[g] = sum_j W[g q + j] (the same sum in another order), and the sum
 * becomes a view of the narrower GEMM's output. */
static int fold_group_sums(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *s = g->nodes[i], *v = s->src[0];
        if (s->op != FT_OP_SUM_LAST || (s->flags & FT_GF_DEAD) || !v || v->op != FT_OP_VIEW) continue;
        ft_tensor *l = v->view_src;
        if (!l || !plain_linear(l) || l->src[3] || !ft_graph_fusable(g, l) || ft_graph_uses(g, v) != 1 ||
            v->view_offs != 0 || !ft_tensor_contiguous(v) || v->ndim != l->ndim + 1 || s->dtype != l->dtype)
            continue;
        int nd = l->ndim;
        int64_t q = v->ne[nd], groups = v->ne[nd - 1];
        bool fits = q > 1 && groups * q == l->ne[nd - 1];
        for (int d = 0; d < nd - 1 && fits; d++) fits = v->ne[d] == l->ne[d];
        if (!fits) continue;
        ft_tensor *w = l->src[1], *b = l->src[2];
        int fail = 0;
        int64_t wne[2] = {groups, w->ne[1]};
        ft_tensor *w2 = ft_graph_const_derived(g, FT_CONST_GROUP_SUM, (uint64_t)q, &w, 1, 2, wne, sum_rows, &q,
                                               &fail);
        ft_tensor *b2 = w2 && b ? ft_graph_const_derived(g, FT_CONST_GROUP_SUM, (uint64_t)q, &b, 1, 1, &groups,
                                                          sum_rows, &q, &fail)
                                : NULL;
        if (fail) return -1;
        if (!w2 || (b && !b2)) continue;
        l->src[1] = w2;
        l->src[2] = b2;
        l->ne[nd - 1] = groups;
        ft_tensor_set_contiguous_strides(l);
        /* the sum, [..., G, 1], is now the GEMM's output seen through a view */
        ft_graph_make_view(s, l, l, 0);
        ft_tensor_set_contiguous_strides(s);
        v->flags |= FT_GF_DEAD;
        n++;
    }
    return n;
}

int ft_pass_affine(ft_graph *g) {
    int a = fold_scales(g);
    int c = a < 0 ? -1 : fold_group_sums(g);
    if (c < 0) return -1;
    int b = biases_into_gemms(g);
    g->passes.affine += a + b + c;
    return a + b + c;
}

/*
 * pass_nonorm.c - MobileBERT's NoNorm (x * gamma + beta, per feature) after a
 * linear folded into the linear's weights at plan time:
 *   W'[n, :] = W[n, :] * gamma[n],  b'[n] = b[n] * gamma[n] + beta[n].
 * The same arithmetic in a different order, so equal to eager within rounding.
 * Only when the linear and the multiply feed nothing else. The folded weights
 * go into the model's constant cache: every plan (input shape) shares them.
 */
#include "graph.h"

#include <stdlib.h>

/* The operand of binary node t that is not `x`, if it is a constant [N] vector. */
static ft_tensor *const_vec(ft_tensor *t, ft_tensor *x, int64_t n) {
    ft_tensor *o = t->src[0] == x ? t->src[1] : t->src[1] == x ? t->src[0] : NULL;
    if (!o || !ft_graph_is_const(o) || o->ndim != 1 || o->ne[0] != n) return NULL;
    return o;
}

/* h: W [N, K], gamma [N] -> W * gamma per row */
static bool scaled_rows(const float *const *h, const ft_tensor *const *src, float *out, const void *user) {
    (void)user;
    int64_t n = src[0]->ne[0], k = src[0]->ne[1];
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) out[r * k + c] = h[0][r * k + c] * h[1][r];
    return true;
}

/* h: gamma, beta [, b] -> b * gamma + beta (b = 0 when absent) */
static bool folded_bias(const float *const *h, const ft_tensor *const *src, float *out, const void *user) {
    bool has_b = *(const bool *)user;
    for (int64_t r = 0, n = src[0]->ne[0]; r < n; r++) out[r] = (has_b ? h[2][r] : 0.0f) * h[0][r] + h[1][r];
    return true;
}

int ft_pass_nonorm(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *add = g->nodes[i];
        if (add->op != FT_OP_ADD || (add->flags & FT_GF_DEAD)) continue;
        for (int side = 0; side < 2; side++) {
            ft_tensor *mul = add->src[side];
            if (mul->op != FT_OP_MUL || !ft_graph_fusable(g, mul)) continue;
            ft_tensor *lin = mul->src[0]->op == FT_OP_LINEAR ? mul->src[0] : mul->src[1];
            if (lin->op != FT_OP_LINEAR || lin->src[3] || !ft_graph_fusable(g, lin) ||
                FT_PARAMS(lin, ft_params_linear)->act != FT_ACT_NONE || !ft_graph_is_const(lin->src[1]) ||
                (lin->src[2] && !ft_graph_is_const(lin->src[2])))
                continue;
            int64_t N = lin->ne[lin->ndim - 1];
            ft_tensor *gamma = const_vec(mul, lin, N), *beta = const_vec(add, mul, N);
            if (!gamma || !beta || !ft_shape_equal(add, lin)) continue;
            int fail = 0;
            ft_tensor *wsrc[2] = {lin->src[1], gamma}, *bsrc[3] = {gamma, beta, lin->src[2]};
            bool has_b = lin->src[2] != NULL;
            ft_tensor *w2 = ft_graph_const_derived(g, FT_CONST_NONORM_W, 0, wsrc, 2, 2, lin->src[1]->ne,
                                                   scaled_rows, NULL, &fail);
            ft_tensor *b2 = w2 ? ft_graph_const_derived(g, FT_CONST_NONORM_B, has_b, bsrc, has_b ? 3 : 2, 1, &N,
                                                        folded_bias, &has_b, &fail)
                               : NULL;
            if (!b2) return -1;
            lin->src[1] = w2;
            lin->src[2] = b2;
            int pos = add->id;
            ft_graph_replace_uses(g, add, lin);
            add->flags |= FT_GF_DEAD;
            mul->flags |= FT_GF_DEAD;
            ft_graph_move_later(g, lin, pos);
            n++;
            break;
        }
    }
    g->passes.nonorm += n;
    return n;
}

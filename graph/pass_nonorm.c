/*
 * pass_nonorm.c - MobileBERT's NoNorm (x * gamma + beta, per feature) after a
 * linear folded into the linear's weights at plan time:
 *   W'[n, :] = W[n, :] * gamma[n],  b'[n] = b[n] * gamma[n] + beta[n].
 * The same arithmetic in a different order, so equal to eager within rounding.
 * Only when the linear and the multiply feed nothing else.
 */
#include "graph.h"

#include <stdlib.h>

/* The operand of binary node t that is not `x`, if it is a constant [N] vector. */
static ft_tensor *const_vec(ft_tensor *t, ft_tensor *x, int64_t n) {
    ft_tensor *o = t->src[0] == x ? t->src[1] : t->src[1] == x ? t->src[0] : NULL;
    if (!o || !ft_graph_is_const(o) || o->ndim != 1 || o->ne[0] != n) return NULL;
    return o;
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
            int64_t N = lin->ne[lin->ndim - 1], K = lin->src[1]->ne[1];
            ft_tensor *gamma = const_vec(mul, lin, N), *beta = const_vec(add, mul, N);
            if (!gamma || !beta || !ft_shape_equal(add, lin)) continue;
            float *w = ft_graph_const_to_host(g, lin->src[1]);
            float *b = lin->src[2] ? ft_graph_const_to_host(g, lin->src[2]) : NULL;
            float *ga = ft_graph_const_to_host(g, gamma), *be = ft_graph_const_to_host(g, beta);
            float *nb = (float *)malloc((size_t)N * sizeof *nb);
            ft_tensor *w2 = NULL, *b2 = NULL;
            if (w && ga && be && nb && (b || !lin->src[2])) {
                for (int64_t r = 0; r < N; r++) {
                    for (int64_t k = 0; k < K; k++) w[r * K + k] *= ga[r];
                    nb[r] = (b ? b[r] : 0.0f) * ga[r] + be[r];
                }
                w2 = ft_graph_const_from_host(g, lin->src[1]->dtype, 2, lin->src[1]->ne, w);
                b2 = w2 ? ft_graph_const_from_host(g, lin->src[1]->dtype, 1, &N, nb) : NULL;
            }
            free(w);
            free(b);
            free(ga);
            free(be);
            free(nb);
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

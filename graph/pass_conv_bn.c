/*
 * pass_conv_bn.c - convolution + inference batch norm folded into the
 * convolution (ResNet): with s = gamma / sqrt(var + eps),
 *   W' = W * s (per output channel),  b' = (b - mean) * s + beta,
 * computed at plan time on the host in f32 (double for s), once per model: the
 * folded weights are shared through the model's constant cache by every plan
 * (every input shape). Only when the convolution feeds nothing but the batch
 * norm and all statistics are constant.
 */
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The convolution takes the folded weights; the batch norm disappears. */
static int rewrite(ft_graph *g, ft_tensor *bn, ft_tensor *conv, ft_tensor *w2, ft_tensor *b2) {
    conv->src[1] = w2;
    conv->src[2] = b2;
    int pos = bn->id;
    ft_graph_replace_uses(g, bn, conv);
    bn->flags |= FT_GF_DEAD;
    ft_graph_move_later(g, conv, pos);
    return 1;
}

static int fold_one(ft_graph *g, ft_tensor *bn, ft_tensor *conv) {
    ft_tensor *w = conv->src[1], *b = conv->src[2];
    const void *key[6] = {w, b, bn->src[1], bn->src[2], bn->src[3], bn->src[4]};
    float eps_f = FT_PARAMS(bn, ft_params_norm)->eps;
    uint32_t eps_bits;
    memcpy(&eps_bits, &eps_f, sizeof eps_bits);
    if (g->cache) {
        ft_tensor *cw = ft_const_cache_get(g->cache, FT_CONST_CONV_BN_W, eps_bits, key, 6);
        ft_tensor *cb = ft_const_cache_get(g->cache, FT_CONST_CONV_BN_B, eps_bits, key, 6);
        if (cw && cb) return rewrite(g, bn, conv, cw, cb);
    }
    int64_t cout = w->ne[0], per = ft_numel(w) / (cout ? cout : 1);
    float *hw = ft_graph_const_to_host(g, w);
    float *hb = b ? ft_graph_const_to_host(g, b) : NULL;
    float *st[4] = {NULL, NULL, NULL, NULL};
    int ok = hw && (!b || hb);
    for (int k = 0; k < 4 && ok; k++) {
        st[k] = ft_graph_const_to_host(g, bn->src[1 + k]);
        ok = st[k] != NULL;
    }
    float *nb = ok ? (float *)malloc((size_t)cout * sizeof *nb) : NULL;
    ft_tensor *w2 = NULL, *b2 = NULL;
    if (nb) {
        float eps = FT_PARAMS(bn, ft_params_norm)->eps;
        for (int64_t c = 0; c < cout; c++) {
            double s = (double)st[2][c] / sqrt((double)st[1][c] + (double)eps);
            for (int64_t i = 0; i < per; i++) hw[c * per + i] = (float)(hw[c * per + i] * s);
            nb[c] = (float)(((hb ? hb[c] : 0.0) - st[0][c]) * s + st[3][c]);
        }
        w2 = ft_graph_const_from_host(g, w->dtype, w->ndim, w->ne, hw);
        b2 = w2 ? ft_graph_const_from_host(g, w->dtype, 1, &cout, nb) : NULL;
    }
    free(hw);
    free(hb);
    free(nb);
    for (int k = 0; k < 4; k++) free(st[k]);
    if (!b2) return -1;
    if (g->cache && (ft_const_cache_put(g->ctx, g->cache, FT_CONST_CONV_BN_W, eps_bits, key, 6, w2) != FT_OK ||
                     ft_const_cache_put(g->ctx, g->cache, FT_CONST_CONV_BN_B, eps_bits, key, 6, b2) != FT_OK))
        return -1;
    return rewrite(g, bn, conv, w2, b2);
}

int ft_pass_conv_bn(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *bn = g->nodes[i];
        if (bn->op != FT_OP_BATCHNORM || (bn->flags & FT_GF_DEAD)) continue;
        ft_tensor *conv = bn->src[0];
        if ((conv->op != FT_OP_CONV2D && conv->op != FT_OP_CONV1D) || conv->src[3] ||
            FT_PARAMS(conv, ft_params_conv)->act != FT_ACT_NONE || !ft_graph_fusable(g, conv))
            continue;
        bool consts = ft_graph_is_const(conv->src[1]) && (!conv->src[2] || ft_graph_is_const(conv->src[2]));
        for (int k = 1; k <= 4; k++) consts = consts && bn->src[k] && ft_graph_is_const(bn->src[k]);
        if (!consts) continue;
        int r = fold_one(g, bn, conv);
        if (r < 0) return -1;
        n += r;
    }
    g->passes.conv_bn += n;
    return n;
}

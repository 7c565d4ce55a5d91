/*
 * pass_conv_bn.c - convolution + inference batch norm folded into the
 * convolution (ResNet; the depthwise ones of MobileNetV2 and EfficientNet too:
 * a [C, 1, KH, KW] filter is scaled per output channel the same way): with
 * s = gamma / sqrt(var + eps),
 *   W' = W * s (per output channel),  b' = (b - mean) * s + beta,
 * computed at plan time on the host in f32 (double for s), once per model: the
 * folded weights are shared through the model's constant cache by every plan
 * (every input shape), and so are the constants later passes make of them. Only
 * when the convolution feeds nothing but the batch norm and all statistics are
 * constant.
 */
#include "graph.h"

#include <math.h>
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

/* h: w [Cout, ...], var, gamma -> w * s per output channel (user: eps) */
static bool bn_weight(const float *const *h, const ft_tensor *const *src, float *out, const void *user) {
    float eps = *(const float *)user;
    int64_t cout = src[0]->ne[0], per = ft_numel(src[0]) / (cout ? cout : 1);
    for (int64_t c = 0; c < cout; c++) {
        double sc = (double)h[2][c] / sqrt((double)h[1][c] + (double)eps);
        for (int64_t i = 0; i < per; i++) out[c * per + i] = (float)(h[0][c * per + i] * sc);
    }
    return true;
}

/* h: mean, var, gamma, beta [, b] -> (b - mean) * s + beta (b = 0 when absent) */
static bool bn_bias(const float *const *h, const ft_tensor *const *src, float *out, const void *user) {
    float eps = *(const float *)user;
    bool has_b = src[4] != NULL;
    for (int64_t c = 0, n = src[0]->ne[0]; c < n; c++) {
        double sc = (double)h[2][c] / sqrt((double)h[1][c] + (double)eps);
        out[c] = (float)(((has_b ? h[4][c] : 0.0) - h[0][c]) * sc + h[3][c]);
    }
    return true;
}

/* The folded weights come from the model's cache (made by the first plan, shared
 * by every later one) whenever the sources are the model's own. */
static int fold_one(ft_graph *g, ft_tensor *bn, ft_tensor *conv) {
    ft_tensor *w = conv->src[1], *b = conv->src[2];
    float eps = FT_PARAMS(bn, ft_params_norm)->eps;
    uint32_t eps_bits;
    memcpy(&eps_bits, &eps, sizeof eps_bits);
    int64_t cout = w->ne[0];
    int fail = 0;
    ft_tensor *wsrc[3] = {w, bn->src[2], bn->src[3]};
    ft_tensor *bsrc[5] = {bn->src[1], bn->src[2], bn->src[3], bn->src[4], b};
    ft_tensor *w2 = ft_graph_const_derived(g, FT_CONST_CONV_BN_W, eps_bits, wsrc, 3, w->ndim, w->ne, bn_weight, &eps,
                                           &fail);
    ft_tensor *b2 = w2 ? ft_graph_const_derived(g, FT_CONST_CONV_BN_B, eps_bits, bsrc, b ? 5 : 4, 1, &cout, bn_bias,
                                                &eps, &fail)
                       : NULL;
    if (!b2) return -1;
    return rewrite(g, bn, conv, w2, b2);
}

int ft_pass_conv_bn(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *bn = g->nodes[i];
        if (bn->op != FT_OP_BATCHNORM || (bn->flags & FT_GF_DEAD)) continue;
        ft_tensor *conv = bn->src[0];
        if ((conv->op != FT_OP_CONV2D && conv->op != FT_OP_CONV1D && conv->op != FT_OP_DWCONV2D) || conv->src[3] ||
            conv->src[5] ||
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

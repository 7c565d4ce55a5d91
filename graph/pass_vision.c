/*
 * pass_vision.c - two fusions of the efficient vision models.
 *
 * Squeeze-excitation (EfficientNet): the six ops Hugging Face runs,
 *   g = sigmoid(conv1x1(act(conv1x1(global_avgpool(x), w1, b1)), w2, b2));  y = x * g
 * become one FT_OP_SE_GATE node (one CPU kernel; two CUDA launches: the channel
 * means, then the gate and the scaling). Matched before the epilogue pass, on
 * the ops as traced; every intermediate must be read only by the next one.
 *
 * Layer scale (ConvNeXt): a linear with constant weights followed by a product
 * with a constant per-output vector, (x W^T + b) * l, becomes the linear with
 * W' = diag(l) W and b' = l * b, computed at plan time once per model (the
 * model's constant cache), one launch fewer per block.
 */
#include "graph.h"

#include <string.h>

/* a 1x1, stride-1, unpadded, ungrouped convolution with constant weights and bias,
 * no epilogue, read only by its one user */
static bool plain_1x1(const ft_graph *g, const ft_tensor *c) {
    if (c->op != FT_OP_CONV2D || !ft_graph_fusable(g, c) || c->src[3] || c->src[4] || c->src[5]) return false;
    const ft_params_conv *p = FT_PARAMS(c, ft_params_conv);
    const ft_tensor *w = c->src[1];
    return p->stride == 1 && p->padding == 0 && !p->asym && p->groups == 1 && p->act == FT_ACT_NONE &&
           p->act_in == FT_ACT_NONE && w->ndim == 4 && w->ne[2] == 1 && w->ne[3] == 1 && c->src[2] &&
           ft_graph_is_const(w) && ft_graph_is_const(c->src[2]) && ft_tensor_contiguous(w);
}

static void kill(ft_tensor *t) {
    t->flags |= FT_GF_DEAD;
    t->flags &= ~(uint32_t)FT_TF_OUTPUT;
}

/* mul(x, sig) with sig = sigmoid(conv(act(conv(pool(x))))): the SE gate node's sources, or false */
static bool match_se(const ft_graph *g, ft_tensor *mul, int side, ft_tensor **parts, int *act) {
    ft_tensor *x = mul->src[1 - side], *sig = mul->src[side];
    if (!x || !sig || sig->op != FT_OP_SIGMOID || !ft_graph_fusable(g, sig)) return false;
    ft_tensor *c2 = sig->src[0];
    if (!plain_1x1(g, c2)) return false;
    ft_tensor *a = c2->src[0], *c1 = a;
    *act = ft_op_act(a->op);
    if (*act != FT_ACT_NONE) {
        if (!ft_graph_fusable(g, a)) return false;
        c1 = a->src[0];
    }
    if (!plain_1x1(g, c1)) return false;
    ft_tensor *pool = c1->src[0];
    if (pool->op != FT_OP_GLOBAL_AVGPOOL || pool->src[0] != x || !ft_graph_fusable(g, pool)) return false;
    /* shapes: x [B, C, H, W], the gate [B, C, 1, 1], everything of x's dtype */
    if (x->ndim != 4 || !ft_shape_equal(mul, x) || !ft_shape_equal(sig, pool) || !ft_tensor_contiguous(x))
        return false;
    ft_tensor *ops[] = {sig, c2, a, c1, pool, c1->src[1], c1->src[2], c2->src[1], c2->src[2]};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i]->dtype != x->dtype) return false;
    parts[0] = x, parts[1] = c1->src[1], parts[2] = c1->src[2], parts[3] = c2->src[1], parts[4] = c2->src[2];
    parts[5] = sig, parts[6] = c2, parts[7] = a != c1 ? a : NULL, parts[8] = c1, parts[9] = pool;
    return true;
}

int ft_pass_se(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *mul = g->nodes[i];
        if (mul->op != FT_OP_MUL || (mul->flags & FT_GF_DEAD)) continue;
        ft_tensor *parts[10];
        int act = FT_ACT_NONE;
        bool ok = false;
        for (int side = 0; side < 2 && !ok; side++) ok = match_se(g, mul, side, parts, &act);
        if (!ok) continue;
        /* the product becomes the gate: same output, new sources */
        mul->op = FT_OP_SE_GATE;
        memset(mul->src, 0, sizeof mul->src);
        for (int k = 0; k < 5; k++) mul->src[k] = parts[k];
        memset(mul->op_params, 0, sizeof mul->op_params);
        ft_params_se p = {act};
        memcpy(mul->op_params, &p, sizeof p);
        for (int k = 5; k < 10; k++)
            if (parts[k]) kill(parts[k]);
        n++;
    }
    g->passes.se += n;
    return n;
}

/* h: w [N, K], l [N] -> l[i] * w[i, :] */
static bool scale_rows(const float *const *h, const ft_tensor *const *src, float *out, const void *user) {
    (void)user;
    int64_t rows = src[0]->ne[0], k = ft_numel(src[0]) / (rows ? rows : 1);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < k; c++) out[r * k + c] = h[0][r * k + c] * h[1][r];
    return true;
}

/* l, the constant factor of mul (the other source is lin): a vector of lin's width
 * broadcast along its last dim ([N], or [1, ..., 1, N]) */
static ft_tensor *channel_factor(ft_tensor *mul, ft_tensor *lin) {
    ft_tensor *l = mul->src[0] == lin ? mul->src[1] : mul->src[0];
    int64_t nout = lin->ne[lin->ndim - 1];
    if (!l || !ft_graph_is_const(l) || l->ndim < 1 || l->ne[l->ndim - 1] != nout || ft_numel(l) != nout ||
        !ft_tensor_contiguous(l) || l->dtype != lin->dtype || l->ndim > lin->ndim)
        return NULL;
    return l;
}

int ft_pass_layer_scale(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *mul = g->nodes[i];
        if (mul->op != FT_OP_MUL || (mul->flags & FT_GF_DEAD)) continue;
        for (int side = 0; side < 2; side++) {
            ft_tensor *lin = mul->src[side];
            if (!lin || lin->op != FT_OP_LINEAR || !ft_graph_fusable(g, lin) || lin->src[3] ||
                !ft_shape_equal(lin, mul))
                continue;
            const ft_params_linear *p = FT_PARAMS(lin, ft_params_linear);
            ft_tensor *w = lin->src[1], *b = lin->src[2], *l = channel_factor(mul, lin);
            if (!l || p->act != FT_ACT_NONE || !ft_graph_is_const(w) || (b && !ft_graph_is_const(b)) ||
                !ft_tensor_contiguous(w) || (b && !ft_tensor_contiguous(b)))
                continue;
            int fail = 0;
            ft_tensor *ws[2] = {w, l}, *bs[2] = {b, l};
            ft_tensor *w2 = ft_graph_const_derived(g, FT_CONST_LAYER_SCALE, 0, ws, 2, w->ndim, w->ne, scale_rows,
                                                   NULL, &fail);
            ft_tensor *b2 = w2 && b ? ft_graph_const_derived(g, FT_CONST_LAYER_SCALE, 1, bs, 2, 1, b->ne, scale_rows,
                                                             NULL, &fail)
                                    : NULL;
            if (fail) return -1;
            if (!w2 || (b && !b2)) continue;
            lin->src[1] = w2;
            lin->src[2] = b2;
            int pos = mul->id;
            ft_graph_replace_uses(g, mul, lin);
            kill(mul);
            ft_graph_move_later(g, lin, pos);
            n++;
            break;
        }
    }
    g->passes.layer_scale += n;
    return n;
}

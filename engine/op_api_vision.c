/*
 * op_api_vision.c - the public functions of the efficient vision models' ops
 * (include/ftengine_ops.h): ReLU6, SiLU, convolutions with per-side padding
 * and the direct depthwise convolution they route to, the channels-first
 * LayerNorm and the squeeze-excitation gate. Layout rules as in op_api.c: the
 * kernels read contiguous NCHW, so a view is copied first by an explicit
 * ft_contiguous the tracer records.
 */
#include "ft_internal.h"

#include <string.h>

#define ALIVE(ctx) ((ctx) && (ctx)->status == FT_OK)

static bool is_depthwise(const ft_tensor *x, const ft_tensor *w, int groups) {
    return groups > 1 && x->ndim == 4 && w->ndim == 4 && x->ne[1] == groups && w->ne[0] == groups &&
           w->ne[1] == 1;
}

ft_tensor *ft_conv2d_ex(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, const ft_conv2d_opts *o) {
    if (!ALIVE(ctx)) return NULL;
    if (!x || !w || !o) {
        ft_set_error(ctx, FT_ERR_INVALID_ARG, "conv2d: NULL input, weight or options");
        return NULL;
    }
    ft_params_conv p;
    memset(&p, 0, sizeof p);
    p.stride = o->stride == 0 ? 1 : o->stride;
    p.groups = o->groups == 0 ? 1 : o->groups;
    p.dilation = o->dilation;
    p.act = p.act_in = FT_ACT_NONE;
    if (o->pad_top == o->pad_bottom && o->pad_top == o->pad_left && o->pad_top == o->pad_right) {
        p.padding = o->pad_top; /* the symmetric form every backend path knows */
    } else {
        p.asym = 1;
        p.pad_t = o->pad_top, p.pad_b = o->pad_bottom, p.pad_l = o->pad_left, p.pad_r = o->pad_right;
    }
    ft_op op = is_depthwise(x, w, p.groups) ? FT_OP_DWCONV2D : FT_OP_CONV2D;
    ft_tensor *s[3] = {ft_contiguous(ctx, x), ft_contiguous(ctx, w), bias};
    if (!ALIVE(ctx)) return NULL;
    return ft_dispatch(ctx, op, s, 3, &p, sizeof p);
}

ft_status ft_tf_same_padding(int64_t n, int k, int s, int d, int *before, int *after) {
    if (!before || !after || n < 0 || k < 1 || s < 1 || d < 1) return FT_ERR_INVALID_ARG;
    int64_t total = n % s == 0 ? k - s : k - n % s;
    if (total < 0) total = 0;
    *before = (int)(total / 2) * d;
    *after = (int)(total - total / 2) * d;
    return FT_OK;
}

ft_tensor *ft_relu6(ft_ctx *ctx, ft_tensor *x) {
    if (!ALIVE(ctx)) return NULL;
    return ft_dispatch(ctx, FT_OP_RELU6, &x, 1, NULL, 0);
}

ft_tensor *ft_silu(ft_ctx *ctx, ft_tensor *x) {
    if (!ALIVE(ctx)) return NULL;
    return ft_dispatch(ctx, FT_OP_SILU, &x, 1, NULL, 0);
}

ft_tensor *ft_channel_norm(ft_ctx *ctx, ft_tensor *x, ft_tensor *gamma, ft_tensor *beta, float eps) {
    if (!ALIVE(ctx)) return NULL;
    ft_params_norm p = {eps, 0};
    ft_tensor *s[3] = {ft_contiguous(ctx, x), gamma, beta};
    if (!ALIVE(ctx)) return NULL;
    return ft_dispatch(ctx, FT_OP_CHANNEL_NORM, s, 3, &p, sizeof p);
}

ft_tensor *ft_se_gate(ft_ctx *ctx, ft_tensor *x, ft_tensor *w1, ft_tensor *b1, ft_tensor *w2, ft_tensor *b2,
                      int act) {
    if (!ALIVE(ctx)) return NULL;
    ft_params_se p = {act};
    ft_tensor *s[5] = {ft_contiguous(ctx, x), ft_contiguous(ctx, w1), b1, ft_contiguous(ctx, w2), b2};
    if (!ALIVE(ctx)) return NULL;
    return ft_dispatch(ctx, FT_OP_SE_GATE, s, 5, &p, sizeof p);
}

/*
 * op_infer_vision.c - shape inference, checks and MAC counts of the ops the
 * efficient vision models brought (MobileNetV2, EfficientNet, ConvNeXt): the
 * direct depthwise convolution and the squeeze-excitation gate. The unary
 * activations and the channel LayerNorm reuse op_infer.c's generic functions.
 */
#include "op_infer.h"

#include "ft_internal.h"

static int vec_of(ft_ctx *ctx, const ft_tensor *t, int64_t n, const char *what) {
    if (t && (t->ndim != 1 || t->ne[0] != n))
        return ft_set_error(ctx, FT_ERR_SHAPE, "%s must have shape [%lld]", what, (long long)n);
    return FT_OK;
}

int ft_infer_dwconv(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1];
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    if (x->ndim != 4 || w->ndim != 4 || w->ne[1] != 1 || w->ne[0] != x->ne[1])
        return ft_set_error(ctx, FT_ERR_SHAPE, "depthwise conv expects x [B, C, H, W] and w [C, 1, KH, KW]");
    if (w->ne[2] < 1 || w->ne[3] < 1) return ft_set_error(ctx, FT_ERR_SHAPE, "empty depthwise kernel");
    if (dst->src[4]) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "depthwise conv takes no weights-with-bias");
    int64_t pads[4], ne[4] = {x->ne[0], x->ne[1], 0, 0}, d = ft_conv_dilation(p);
    ft_conv_pads(p, pads);
    for (int i = 0; i < 2; i++) {
        int64_t span = d * (w->ne[2 + i] - 1) + 1, in = x->ne[2 + i] + pads[2 * i] + pads[2 * i + 1];
        if (in < span)
            return ft_set_error(ctx, FT_ERR_SHAPE, "input %lld (padded %lld) smaller than the kernel span %lld",
                                (long long)x->ne[2 + i], (long long)in, (long long)span);
        ne[2 + i] = (in - span) / p->stride + 1;
    }
    int st;
    if ((st = vec_of(ctx, dst->src[2], x->ne[1], "bias")) || (st = vec_of(ctx, dst->src[5], x->ne[1], "input bias")))
        return st;
    if (p->act_in < FT_ACT_NONE || p->act_in > FT_ACT_LAST)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "input activation %d", p->act_in);
    dst->dtype = x->dtype;
    dst->ndim = 4;
    for (int i = 0; i < 4; i++) dst->ne[i] = ne[i];
    ft_tensor_set_contiguous_strides(dst);
    if (dst->src[3] && !ft_shape_equal(dst->src[3], dst))
        return ft_set_error(ctx, FT_ERR_SHAPE, "residual shape differs from the output");
    return FT_OK;
}

/* w: [rows, cols] or [rows, cols, 1, 1] (a 1x1 convolution's weight) */
static bool se_matrix(const ft_tensor *w, int64_t rows, int64_t cols) {
    if (w->ndim != 2 && w->ndim != 4) return false;
    if (w->ndim == 4 && (w->ne[2] != 1 || w->ne[3] != 1)) return false;
    return w->ne[0] == rows && w->ne[1] == cols && ft_tensor_contiguous(w);
}

int ft_check_se_gate(ft_ctx *ctx, const ft_tensor *dst) {
    int act = FT_PARAMS(dst, ft_params_se)->act;
    if (act < FT_ACT_NONE || act > FT_ACT_LAST)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "squeeze-excitation activation %d", act);
    return ft_check_float_same(ctx, dst);
}

int ft_infer_se_gate(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0], *w1 = dst->src[1], *w2 = dst->src[3];
    if (x->ndim < 3) return ft_set_error(ctx, FT_ERR_SHAPE, "squeeze-excitation expects x [B, C, ...]");
    int64_t c = x->ne[1], r = w1->ne[0];
    if (!se_matrix(w1, r, c) || !se_matrix(w2, c, r))
        return ft_set_error(ctx, FT_ERR_SHAPE,
                            "squeeze-excitation expects contiguous w1 [R, %lld(, 1, 1)] and w2 [%lld, R(, 1, 1)]",
                            (long long)c, (long long)c);
    int st;
    if ((st = vec_of(ctx, dst->src[2], r, "reduce bias")) || (st = vec_of(ctx, dst->src[4], c, "expand bias")))
        return st;
    return ft_infer_same(ctx, dst);
}

int64_t ft_macs_se_gate(const ft_tensor *dst) {
    /* the two 1x1 convolutions on the pooled vector, as the unfused ops count them */
    return 2 * dst->ne[0] * dst->ne[1] * dst->src[1]->ne[0];
}

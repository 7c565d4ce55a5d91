/*
 * ftengine_vision.h - the ops the efficient vision models brought (MobileNetV2,
 * EfficientNet, ConvNeXt): ReLU6 and SiLU, convolutions with per-side padding
 * (TensorFlow "SAME", EfficientNet's fixed asymmetric padding) and a direct
 * depthwise convolution, the channels-first LayerNorm and the squeeze-excitation
 * gate. Part of the public API: included by ftengine.h, not on its own.
 */
#ifndef FTENGINE_VISION_H
#define FTENGINE_VISION_H

/** min(max(x, 0), 6) (NaN stays NaN). */
ft_tensor *ft_relu6(ft_ctx *ctx, ft_tensor *x);
/** x * sigmoid(x) ("swish"). */
ft_tensor *ft_silu(ft_ctx *ctx, ft_tensor *x);

/** How ft_conv2d_ex convolves: the stride, the groups, the zero padding of each
 *  side and the dilation (spacing of the kernel taps; depthwise convolutions only).
 *  Zero-initialised options are a stride-1 valid convolution with one group. */
typedef struct ft_conv2d_opts {
    int stride;   /* 0 or 1: unit stride */
    int groups;   /* 0 or 1: a dense convolution */
    int dilation; /* 0 or 1: none */
    int pad_top, pad_bottom, pad_left, pad_right;
} ft_conv2d_opts;
/** x [B, Cin, H, W], w [Cout, Cin/groups, KH, KW], bias [Cout] or NULL, with per-side
 *  padding: output H' = (H + top + bottom - dilation (KH - 1) - 1) / stride + 1.
 *  groups == Cin == Cout (w [C, 1, KH, KW]) is a depthwise convolution, computed
 *  directly rather than as a GEMM (ft_conv2d routes those there too). */
ft_tensor *ft_conv2d_ex(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, const ft_conv2d_opts *o);
/** TensorFlow's "SAME" padding of one axis of size n for kernel k, stride s and
 *  dilation d, as Hugging Face's apply_tf_padding computes it: total = max(k - s, 0)
 *  when n % s == 0, else max(k - n % s, 0); before = total / 2, after the rest; both
 *  times d. */
void ft_tf_same_padding(int64_t n, int k, int s, int d, int *before, int *after);

/** LayerNorm over dim 1 of x [B, C, ...] at every other position (ConvNeXt's
 *  channels-first LayerNorm), statistics in f32; gamma, beta [C] or NULL. */
ft_tensor *ft_channel_norm(ft_ctx *ctx, ft_tensor *x, ft_tensor *gamma, ft_tensor *beta, float eps);

/** Squeeze-excitation, one op: x [B, C, H, W] times
 *  sigmoid(w2 act(w1 mean_hw(x) + b1) + b2) per (batch, channel), with w1 [R, C]
 *  and w2 [C, R] (or 1x1 convolution weights [R, C, 1, 1], [C, R, 1, 1]) and act an
 *  ft_act value (0 none, 3 relu, 5 sigmoid, 6 relu6, 7 silu, ...). Graph mode makes it
 *  from the unfused ops (pool, convolution, activation, convolution, sigmoid, mul). */
ft_tensor *ft_se_gate(ft_ctx *ctx, ft_tensor *x, ft_tensor *w1, ft_tensor *b1, ft_tensor *w2, ft_tensor *b2,
                      int act);

#endif /* FTENGINE_VISION_H */

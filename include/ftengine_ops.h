/*
 * ftengine_ops.h - the op API of ftengine: the part of include/ftengine.h that
 * models and users call to compute. ftengine.h includes it (include ftengine.h
 * alone); it is a file of its own so each half stays readable.
 */
#ifndef FTENGINE_OPS_H
#define FTENGINE_OPS_H

#include "ftengine.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Every op goes through the dispatcher. Shapes follow PyTorch: dimension 0 is the
 * outermost, negative dims count from the end. Elementwise binary ops broadcast
 * like NumPy. Floating ops accept f32, f16 and bf16 and accumulate in f32; both
 * operands of a binary op must have the same dtype, except masks, which are f32.
 * An op whose inputs are NULL returns NULL (the earlier error stays recorded).
 */

/* Views (no copy, no kernel) */
ft_tensor *ft_reshape(ft_ctx *ctx, ft_tensor *x, int ndim, const int64_t *shape); /* one -1 allowed; copies first if x cannot be viewed */
ft_tensor *ft_permute(ft_ctx *ctx, ft_tensor *x, const int *perm);
ft_tensor *ft_transpose(ft_ctx *ctx, ft_tensor *x, int dim0, int dim1);
ft_tensor *ft_slice(ft_ctx *ctx, ft_tensor *x, int dim, int64_t start, int64_t length);
/** Selects index `index` of `dim` and drops that dimension. */
ft_tensor *ft_select(ft_ctx *ctx, ft_tensor *x, int dim, int64_t index);
/** Broadcasts size-1 dims to `shape` (stride 0); ndim may add leading dims. */
ft_tensor *ft_expand(ft_ctx *ctx, ft_tensor *x, int ndim, const int64_t *shape);
/** Inserts a size-1 dimension at `dim`. */
ft_tensor *ft_unsqueeze(ft_ctx *ctx, ft_tensor *x, int dim);

/* Copies */
ft_tensor *ft_contiguous(ft_ctx *ctx, ft_tensor *x); /* returns x itself if already contiguous */
ft_tensor *ft_cast(ft_ctx *ctx, ft_tensor *x, ft_dtype dtype);
ft_tensor *ft_concat(ft_ctx *ctx, ft_tensor *a, ft_tensor *b, int dim);
/** Pads dimension `dim` with `before` and `after` elements of `value`. */
ft_tensor *ft_pad(ft_ctx *ctx, ft_tensor *x, int dim, int64_t before, int64_t after, float value);

/* Gathers */
/** Rows of `table` [V, D] picked by integer `ids` [...]: result [..., D].
 *  Ids outside [0, V) are an error. */
ft_tensor *ft_embedding(ft_ctx *ctx, ft_tensor *table, ft_tensor *ids);
/** RoBERTa's positions (HF create_position_ids_from_input_ids) over the last dim of integer ids, as i64:
 *  cumsum(ids != pad) * (ids != pad) + pad: real tokens get pad + 1, + 2, ..., padding keeps pad. */
ft_tensor *ft_position_ids(ft_ctx *ctx, ft_tensor *ids, int64_t padding_idx);
/** out[..., i, j] = x[..., i, idx[i, j]]; idx is an integer [I, J] tensor, x is [..., I, T]. */
ft_tensor *ft_gather_last(ft_ctx *ctx, ft_tensor *x, ft_tensor *idx);

/* Elementwise */
ft_tensor *ft_add(ft_ctx *ctx, ft_tensor *a, ft_tensor *b);
ft_tensor *ft_sub(ft_ctx *ctx, ft_tensor *a, ft_tensor *b);
ft_tensor *ft_mul(ft_ctx *ctx, ft_tensor *a, ft_tensor *b);
ft_tensor *ft_div(ft_ctx *ctx, ft_tensor *a, ft_tensor *b);
/** y = x * alpha + beta. */
ft_tensor *ft_scale(ft_ctx *ctx, ft_tensor *x, float alpha, float beta);
ft_tensor *ft_gelu(ft_ctx *ctx, ft_tensor *x);      /* exact: 0.5x(1+erf(x/sqrt2)) */
ft_tensor *ft_gelu_tanh(ft_ctx *ctx, ft_tensor *x); /* "gelu_new": tanh approximation */
ft_tensor *ft_tanh(ft_ctx *ctx, ft_tensor *x);
ft_tensor *ft_relu(ft_ctx *ctx, ft_tensor *x);
ft_tensor *ft_sigmoid(ft_ctx *ctx, ft_tensor *x);

/* Reductions and normalisations */
/** Sum over the last dimension, kept as size 1. */
ft_tensor *ft_sum_last(ft_ctx *ctx, ft_tensor *x);
/** softmax over the last dim of (x * scale + mask); mask (f32, broadcastable to x) may be NULL.
 *  _causal, as HF GPT-2: x * scale at key j > i + Sk - Sq of scores [..., Sq, Sk] is first replaced
 *  by finfo(float32).min (under a padding mask min + min = -inf). */
ft_tensor *ft_softmax(ft_ctx *ctx, ft_tensor *x, ft_tensor *mask, float scale);
ft_tensor *ft_softmax_causal(ft_ctx *ctx, ft_tensor *x, ft_tensor *mask, float scale);
/** LayerNorm over the last dim; gamma and beta ([D]) may be NULL. */
ft_tensor *ft_layernorm(ft_ctx *ctx, ft_tensor *x, ft_tensor *gamma, ft_tensor *beta, float eps);
/** GroupNorm of x [B, C, ...] with `groups` groups; gamma/beta [C] may be NULL. */
ft_tensor *ft_groupnorm(ft_ctx *ctx, ft_tensor *x, int groups, ft_tensor *gamma, ft_tensor *beta, float eps);
/** Inference batch norm of x [B, C, ...] with running statistics ([C] each). */
ft_tensor *ft_batchnorm(ft_ctx *ctx, ft_tensor *x, ft_tensor *mean, ft_tensor *var,
                        ft_tensor *gamma, ft_tensor *beta, float eps);
/** Pools along `dim` with windows of `kernel` every `stride` (ceil mode: a partial
 *  tail window pools what it holds). kind: 0 mean, 1 max, 2 min. */
ft_tensor *ft_pool_dim(ft_ctx *ctx, ft_tensor *x, int dim, int kind, int kernel, int stride);

/* Linear algebra */
/** y = x W^T + b: x [..., K], w [N, K], bias [N] or NULL. */
ft_tensor *ft_linear(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias);
/** Batched a [..., M, K] x b [..., K, N] * alpha; batch dims must match. */
ft_tensor *ft_matmul(ft_ctx *ctx, ft_tensor *a, ft_tensor *b, float alpha);
/** softmax(q k^T * scale + mask) v for q [B, H, Sq, D], k/v [B, H, Sk, D];
 *  mask f32 broadcastable to [B, H, Sq, Sk] or NULL. _causal: ft_softmax_causal's mask (none made). */
ft_tensor *ft_attention(ft_ctx *ctx, ft_tensor *q, ft_tensor *k, ft_tensor *v, ft_tensor *mask, float scale);
ft_tensor *ft_attention_causal(ft_ctx *ctx, ft_tensor *q, ft_tensor *k, ft_tensor *v, ft_tensor *mask, float scale);

/* Convolutions and pooling (NCHW / NCL) */
/** x [B, Cin, L], w [Cout, Cin/groups, K], bias [Cout] or NULL. */
ft_tensor *ft_conv1d(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, int stride, int padding, int groups);
/** x [B, Cin, H, W], w [Cout, Cin/groups, KH, KW], bias [Cout] or NULL. */
ft_tensor *ft_conv2d(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, int stride, int padding, int groups);
/** Max pool over H, W of x [B, C, H, W]; padding acts as -inf. */
ft_tensor *ft_maxpool2d(ft_ctx *ctx, ft_tensor *x, int kernel, int stride, int padding);
/** Mean over all dims after the first two: [B, C, ...] -> [B, C, 1, ...]. */
ft_tensor *ft_global_avgpool(ft_ctx *ctx, ft_tensor *x);
/** Weight norm W = g * v / ||v||, the norm taken over every dim except `dim`. */
ft_tensor *ft_weight_norm(ft_ctx *ctx, ft_tensor *g, ft_tensor *v, int dim);

/** Grouped linear, a grouped 1x1 convolution over channels-last rows: x [..., K],
 *  w [N, K/groups], bias [N] or NULL; output columns g*N/groups ... (g+1)*N/groups-1
 *  read input channels g*K/groups ... (g+1)*K/groups-1 only (SqueezeBERT's Conv1d).
 *  groups 1 is ft_linear. */
ft_tensor *ft_linear_grouped(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, int groups);

/** Disentangled (DeBERTa) attention: with d(i, j) = clamp(i - j + span, 0, 2 span - 1),
 *  out[b,h,i] = row_scale[b,h,i] * sum_j softmax_j(q_i k_j^T * scale + c2p[b,h,i,d(i,j)]
 *  + p2c[b,h,j,d(i,j)] + mask[b,h,i,j]) v_j. q [B,H,Sq,D], k [B,H,Sk,D], v [B,H,Sk,Dv];
 *  c2p [B,H,Sq,2 span], p2c [B,H,Sk,2 span] (q's dtype, any strides, either may be NULL);
 *  mask f32 broadcastable to [B,H,Sq,Sk] or NULL; row_scale (q's dtype) broadcastable to
 *  [B,H,Sq,1] or NULL. The relative terms are gathered in the kernel, never written as
 *  [B,H,Sq,Sk] tensors. Graph mode makes it from DeBERTa's unfused ops. */
ft_tensor *ft_attention_rel(ft_ctx *ctx, ft_tensor *q, ft_tensor *k, ft_tensor *v, ft_tensor *mask,
                            ft_tensor *c2p, ft_tensor *p2c, ft_tensor *row_scale, float scale,
                            int64_t span);


/* The efficient vision models (MobileNetV2, EfficientNet, ConvNeXt): ReLU6 and SiLU,
 * convolutions with per-side padding, a direct depthwise convolution, the channels-first
 * LayerNorm and the squeeze-excitation gate. */
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
 *  times d. FT_ERR_INVALID_ARG for NULL outputs, n < 0 or k, s, d < 1. */
ft_status ft_tf_same_padding(int64_t n, int k, int s, int d, int *before, int *after);

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

#ifdef __cplusplus
}
#endif

#endif /* FTENGINE_OPS_H */

/*
 * vision_common.h - what MobileNetV2, EfficientNet and ConvNeXt share
 * (models/vision_common.c): the pixel_values input (checks and example
 * images), a convolution followed by an inference BatchNorm and an optional
 * activation with per-side padding, and random initialisation at a scale that
 * keeps activations O(1) through deep stacks (presets are latency studies:
 * values that decay into denormals would time something else).
 */
#ifndef FT_VISION_COMMON_H
#define FT_VISION_COMMON_H

#include "model.h"

/* A bias-free convolution + inference BatchNorm (+ activation). */
typedef struct ft_vconv {
    ft_tensor *w;                         /* [Cout, Cin/groups, K, K] */
    ft_tensor *mean, *var, *gamma, *beta; /* [Cout] */
    int k, stride, dil, groups;
    float eps;
} ft_vconv;

/* Loads `conv`.weight [cout, cin/groups, k, k] and the BatchNorm `bn`.{weight, bias,
 * running_mean, running_var} [cout] (full HF names); num_batches_tracked is never read. */
void ft_vconv_load(ft_model *m, ft_vconv *c, const char *conv, const char *bn, int64_t cout, int64_t cin, int k,
                   int stride, int groups, float eps);
/* A convolution weight: random init (presets) with He's std sqrt(2 / fan_in). */
ft_tensor *ft_vision_conv_weight(ft_model *m, int64_t cout, int64_t cin_g, int64_t kh, int64_t kw,
                                 const char *name);
/* act(BN(conv(x))) with zero padding pads = (top, bottom, left, right); act LINEAR: none. */
ft_tensor *ft_vconv_fwd(ft_ctx *ctx, const ft_vconv *c, ft_tensor *x, const int pads[4], ft_act_kind act);

/* validate(): pixel_values is a float [B, channels, H, W] with H, W >= min_side. */
ft_status ft_vision_check_pixels(ft_model *m, const char *arch, int64_t channels, int64_t min_side);
/* example_inputs(): pixel_values [batch, channels, length, length] uniform in [0, 1)
 * (length <= 0: 224). */
ft_status ft_vision_example_inputs(ft_model *m, int64_t channels, int64_t batch, int64_t length,
                                   ft_host_tensor *in, int *n_in, void **owned);
/* x [B, C, 1, 1] (a global pool) as [B, C], the pooler_output of these models */
ft_tensor *ft_vision_flatten_pool(ft_ctx *ctx, ft_tensor *pooled);
/* Registers hidden_states.<i> for i < n (when hidden states were asked for). */
void ft_vision_add_hidden(ft_model *m, ft_tensor *const *states, int n);

#endif /* FT_VISION_COMMON_H */

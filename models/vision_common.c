/*
 * vision_common.c - helpers MobileNetV2, EfficientNet and ConvNeXt share
 * (models/vision_common.h).
 */
#include "vision_common.h"
#include "../engine/ft_checked.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ft_tensor *ft_vision_conv_weight(ft_model *m, int64_t cout, int64_t cin_g, int64_t kh, int64_t kw,
                                 const char *name) {
    /* a checkpoint's values are what they are; random ones keep the variance (He) */
    float keep = m->init_std;
    int64_t fan_in = cin_g * kh * kw;
    if (!m->st && fan_in > 0) m->init_std = (float)sqrt(2.0 / (double)fan_in);
    ft_tensor *w = ft_weight(m, FT_W_SHAPE(cout, cin_g, kh, kw), "%s", name);
    m->init_std = keep;
    return w;
}

void ft_vconv_load(ft_model *m, ft_vconv *c, const char *conv, const char *bn, int64_t cout, int64_t cin, int k,
                   int stride, int groups, float eps) {
    char name[256];
    snprintf(name, sizeof name, "%s.weight", conv);
    c->w = ft_vision_conv_weight(m, cout, cin / groups, k, k, name);
    c->gamma = ft_weight(m, FT_W_SHAPE(cout), "%s.weight", bn);
    c->beta = ft_weight(m, FT_W_SHAPE(cout), "%s.bias", bn);
    c->mean = ft_weight(m, FT_W_SHAPE(cout), "%s.running_mean", bn);
    c->var = ft_weight(m, FT_W_SHAPE(cout), "%s.running_var", bn);
    c->k = k;
    c->stride = stride;
    c->dil = 1;
    c->groups = groups;
    c->eps = eps;
}

ft_tensor *ft_vconv_fwd(ft_ctx *ctx, const ft_vconv *c, ft_tensor *x, const int pads[4], ft_act_kind act) {
    ft_conv2d_opts o = {c->stride, c->groups, c->dil, pads[0], pads[1], pads[2], pads[3]};
    ft_tensor *y = ft_conv2d_ex(ctx, x, c->w, NULL, &o);
    ft_tensor *n = ft_batchnorm(ctx, y, c->mean, c->var, c->gamma, c->beta, c->eps);
    ft_tensor_release(ctx, y);
    if (act == FT_ACTK_LINEAR) return n;
    ft_tensor *a = ft_model_act(ctx, act, n);
    ft_tensor_release(ctx, n);
    return a;
}

ft_status ft_vision_check_pixels(ft_model *m, const char *arch, int64_t channels, int64_t min_side) {
    const ft_host_tensor *px = ft_model_host_input(m, "pixel_values");
    if (!px) return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "%s needs input 'pixel_values'", arch);
    if (!ft_dtype_is_float(px->dtype))
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "input 'pixel_values' must be a float tensor, got %s",
                            ft_dtype_name(px->dtype));
    if (px->ndim != 4)
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "input 'pixel_values' must be [batch, channels, height, width], got rank %d", px->ndim);
    if (px->shape[1] != channels)
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "input 'pixel_values' has %lld channels, but the config's num_channels is %lld",
                            (long long)px->shape[1], (long long)channels);
    if (px->shape[0] < 1 || px->shape[2] < min_side || px->shape[3] < min_side)
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "input 'pixel_values' is %lld x %lld pixels (batch %lld): %s needs at least %lld x %lld "
                            "and a batch of one or more",
                            (long long)px->shape[2], (long long)px->shape[3], (long long)px->shape[0], arch,
                            (long long)min_side, (long long)min_side);
    return ft_check_host_size(m->ctx, "pixel_values", px->ndim, px->shape, sizeof(float));
}

ft_status ft_vision_example_inputs(ft_model *m, int64_t channels, int64_t batch, int64_t length,
                                   ft_host_tensor *in, int *n_in, void **owned) {
    if (length <= 0) length = 224;
    return ft_example_image_inputs(m, batch, channels, length, length, in, n_in, owned);
}

ft_tensor *ft_vision_flatten_pool(ft_ctx *ctx, ft_tensor *pooled) {
    if (!pooled) return NULL;
    return ft_reshape(ctx, pooled, 2, FT_SHAPE(ft_tensor_dim(pooled, 0), ft_tensor_dim(pooled, 1)));
}

void ft_vision_add_hidden(ft_model *m, ft_tensor *const *states, int n) {
    if (!ft_model_want_hidden_states(m)) return;
    for (int i = 0; i < n; i++) ft_model_add_hidden_state(m, i, states[i]);
}

/*
 * mobilenet_v2.c - MobileNetV2Model as Hugging Face transformers 4.36.2 defines
 * it (tests/golden/README-zoo.md, MobileNetV2Model): a 3x3/2 stem convolution,
 * a depthwise 3x3 and a 1x1 reduction; 16 inverted residual layers (1x1
 * expansion, depthwise 3x3 with the layer's stride, 1x1 projection, a residual
 * when the stride is 1 and the width is kept); a 1x1 head to 1280 channels; the
 * global mean as a [B, 1280] pooler output. Every convolution is bias-free and
 * followed by an inference BatchNorm whose eps is the config's layer_norm_eps
 * (1e-3).
 *
 * Padding: with tf_padding (the default) each convolution's input is padded as
 * TensorFlow's "SAME" does, from the size of the map it actually sees (stride 2
 * on an even size pads one row and column at the bottom and right only); the
 * padding goes into the convolution itself (per-side padding), not a separate
 * op. Without it, PyTorch's symmetric k/2. output_stride 8 or 16 turns the later
 * strides into dilations as HF does.
 *
 * Channels: apply_depth_multiplier(c) = make_divisible(round(c * depth_multiplier))
 * (Python's round: half to even), expanded widths make_divisible(round(in *
 * expand_ratio)); with finegrained_output and a multiplier below 1 the head
 * keeps 1280 channels.
 */
#include "vision_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MNV2_LAYERS 16

typedef struct mnv2_layer {
    ft_vconv expand, dw, reduce;
    bool residual;
} mnv2_layer;

typedef struct mnv2 {
    int64_t channels, divisor, min_depth, output_stride, image_size;
    double multiplier, expand_ratio;
    bool tf_padding, first_is_expansion, finegrained;
    float eps;
    ft_act_kind act;
    int64_t width[MNV2_LAYERS + 1], stem_width, head_width;
    ft_vconv stem_conv, stem_expand, stem_dw, stem_reduce, head;
    mnv2_layer layer[MNV2_LAYERS];
} mnv2;

static const int64_t base_width[MNV2_LAYERS + 1] = {16, 24, 24, 32, 32, 32, 64, 64, 64,
                                                    64, 96, 96, 96, 160, 160, 160, 320};
static const int layer_stride[MNV2_LAYERS] = {2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1};

/* HF's make_divisible(value, divisor, min_value) */
static int64_t make_divisible(const mnv2 *r, double value) {
    int64_t d = r->divisor;
    int64_t v = (int64_t)(value + (double)d / 2.0) / d * d;
    if (v < r->min_depth) v = r->min_depth;
    if ((double)v < 0.9 * value) v += d;
    return v;
}

/* apply_depth_multiplier: make_divisible(int(round(c * multiplier))) */
static int64_t scaled(const mnv2 *r, int64_t c) { return make_divisible(r, nearbyint((double)c * r->multiplier)); }

static ft_status read_config(mnv2 *r, ft_config *c) {
    double eps = 1e-3;
    ft_status st;
    if ((st = ft_config_int(c, "num_channels", 3, &r->channels)) ||
        (st = ft_config_int(c, "image_size", 224, &r->image_size)) ||
        (st = ft_config_float(c, "depth_multiplier", 1.0, &r->multiplier)) ||
        (st = ft_config_int(c, "depth_divisible_by", 8, &r->divisor)) ||
        (st = ft_config_int(c, "min_depth", 8, &r->min_depth)) ||
        (st = ft_config_float(c, "expand_ratio", 6.0, &r->expand_ratio)) ||
        (st = ft_config_int(c, "output_stride", 32, &r->output_stride)) ||
        (st = ft_config_bool(c, "first_layer_is_expansion", true, &r->first_is_expansion)) ||
        (st = ft_config_bool(c, "finegrained_output", true, &r->finegrained)) ||
        (st = ft_model_act_parse(c, "hidden_act", "relu6", &r->act)) ||
        (st = ft_config_bool(c, "tf_padding", true, &r->tf_padding)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-3, &eps)))
        return st;
    if (r->channels < 1) return ft_config_error(c, "num_channels must be positive, got %lld", (long long)r->channels);
    if (!(r->multiplier > 0.0) || r->multiplier > 1e4)
        return ft_config_error(c, "depth_multiplier must be positive (and sane), got %g", r->multiplier);
    if (r->divisor < 1 || r->divisor > 1 << 16)
        return ft_config_error(c, "depth_divisible_by must be positive, got %lld", (long long)r->divisor);
    if (r->min_depth < 1 || r->min_depth > 1 << 20)
        return ft_config_error(c, "min_depth must be positive, got %lld", (long long)r->min_depth);
    if (!(r->expand_ratio > 0.0) || r->expand_ratio > 1e4)
        return ft_config_error(c, "expand_ratio must be positive, got %g", r->expand_ratio);
    if (r->image_size < 1) return ft_config_error(c, "image_size must be positive, got %lld", (long long)r->image_size);
    if (r->output_stride < 1)
        return ft_config_error(c, "output_stride must be positive, got %lld", (long long)r->output_stride);
    if (!(eps > 0.0)) return ft_config_error(c, "layer_norm_eps must be positive, got %g", eps);
    r->eps = (float)eps;
    for (int i = 0; i <= MNV2_LAYERS; i++) r->width[i] = scaled(r, base_width[i]);
    r->stem_width = scaled(r, 32);
    r->head_width = r->finegrained && r->multiplier < 1.0 ? 1280 : scaled(r, 1280);
    return FT_OK;
}

static void layer_name(char *conv, char *bn, size_t n, const char *stem) {
    snprintf(conv, n, "%s.convolution", stem);
    snprintf(bn, n, "%s.normalization", stem);
}

static void load_cl(ft_model *m, const mnv2 *r, ft_vconv *c, const char *stem, int64_t cout, int64_t cin, int k,
                    int stride, int groups) {
    char conv[160], bn[160];
    layer_name(conv, bn, sizeof conv, stem);
    ft_vconv_load(m, c, conv, bn, cout, cin, k, stride, groups, r->eps);
}

static ft_status load_weights(ft_model *m, mnv2 *r) {
    int64_t s32 = r->stem_width;
    load_cl(m, r, &r->stem_conv, "conv_stem.first_conv", s32, r->channels, 3, 2, 1);
    if (!r->first_is_expansion) load_cl(m, r, &r->stem_expand, "conv_stem.expand_1x1", s32, s32, 1, 1, 1);
    load_cl(m, r, &r->stem_dw, "conv_stem.conv_3x3", s32, s32, 3, 1, (int)s32);
    load_cl(m, r, &r->stem_reduce, "conv_stem.reduce_1x1", r->width[0], s32, 1, 1, 1);
    /* HF's output_stride: once the running stride reaches it, strides become dilations */
    int64_t current = 2, dilation = 1;
    char stem[64];
    for (int i = 0; i < MNV2_LAYERS; i++) {
        mnv2_layer *L = &r->layer[i];
        int stride = layer_stride[i], dil = 1;
        if (current == r->output_stride) {
            dil = (int)dilation;
            dilation *= stride;
            stride = 1;
        } else {
            current *= stride;
        }
        int64_t in = r->width[i], out = r->width[i + 1];
        int64_t e = make_divisible(r, nearbyint((double)in * r->expand_ratio));
        L->residual = stride == 1 && in == out;
        snprintf(stem, sizeof stem, "layer.%d.expand_1x1", i);
        load_cl(m, r, &L->expand, stem, e, in, 1, 1, 1);
        snprintf(stem, sizeof stem, "layer.%d.conv_3x3", i);
        load_cl(m, r, &L->dw, stem, e, e, 3, stride, (int)e);
        L->dw.dil = dil;
        snprintf(stem, sizeof stem, "layer.%d.reduce_1x1", i);
        load_cl(m, r, &L->reduce, stem, out, e, 1, 1, 1);
        if (m->ctx->status != FT_OK) return m->ctx->status;
    }
    load_cl(m, r, &r->head, "conv_1x1", r->head_width, r->width[MNV2_LAYERS], 1, 1, 1);
    return m->ctx->status;
}

static ft_status mnv2_load(ft_model *m, ft_config *cfg) {
    mnv2 *r = (mnv2 *)calloc(1, sizeof *r);
    if (!r) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = r;
    snprintf(m->arch_name, sizeof m->arch_name, "MobileNetV2Model");
    ft_status st = read_config(r, cfg);
    if (st) return st;
    return load_weights(m, r);
}

static void mnv2_destroy(ft_model *m) {
    free(m->priv);
    m->priv = NULL;
}

static ft_status mnv2_validate(ft_model *m) {
    const mnv2 *r = (const mnv2 *)m->priv;
    /* TF-SAME and k/2 padding both keep every map at least 1 x 1 */
    return ft_vision_check_pixels(m, "MobileNetV2Model", r->channels, 1);
}

/* A conv layer: TF-SAME padding from the size of the map it sees, or k/2 (times the dilation) */
static ft_tensor *cl(ft_ctx *ctx, const mnv2 *r, const ft_vconv *c, ft_tensor *x, bool act) {
    int pads[4];
    if (r->tf_padding && x) {
        /* kernel, stride and dilation are positive (checked at load): these cannot fail */
        (void)ft_tf_same_padding(ft_tensor_dim(x, 2), c->k, c->stride, c->dil, &pads[0], &pads[1]);
        (void)ft_tf_same_padding(ft_tensor_dim(x, 3), c->k, c->stride, c->dil, &pads[2], &pads[3]);
    } else {
        pads[0] = pads[1] = pads[2] = pads[3] = (c->k - 1) / 2 * c->dil;
    }
    return ft_vconv_fwd(ctx, c, x, pads, act ? r->act : FT_ACTK_LINEAR);
}

static ft_status mnv2_forward(ft_model *m, ft_ctx *ctx) {
    const mnv2 *r = (const mnv2 *)m->priv;
    bool hs = ft_model_want_hidden_states(m);
    ft_tensor *states[MNV2_LAYERS];
    ft_tensor *x = ft_model_input(m, "pixel_values"); /* [B, C, H, W] */
    ft_tensor *h = cl(ctx, r, &r->stem_conv, x, true);   /* [B, 32a, H/2, W/2] */
    if (!r->first_is_expansion) {
        ft_tensor *e = cl(ctx, r, &r->stem_expand, h, true);
        ft_tensor_release(ctx, h);
        h = e;
    }
    ft_tensor *d = cl(ctx, r, &r->stem_dw, h, true);
    ft_tensor_release(ctx, h);
    h = cl(ctx, r, &r->stem_reduce, d, false);           /* [B, 16a, H/2, W/2] */
    ft_tensor_release(ctx, d);
    for (int i = 0; i < MNV2_LAYERS; i++) {
        const mnv2_layer *L = &r->layer[i];
        ft_tensor *e = cl(ctx, r, &L->expand, h, true);  /* [B, E, h, w] */
        ft_tensor *dw = cl(ctx, r, &L->dw, e, true);     /* [B, E, h/s, w/s] */
        ft_tensor_release(ctx, e);
        ft_tensor *y = cl(ctx, r, &L->reduce, dw, false); /* [B, out, h/s, w/s] */
        ft_tensor_release(ctx, dw);
        if (L->residual) {
            ft_tensor *sum = ft_add(ctx, h, y);
            ft_tensor_release(ctx, y);
            y = sum;
        }
        if (!hs || i == 0) ft_tensor_release(ctx, h); /* the stem's output, or a state nobody keeps */
        h = y;
        states[i] = h;
    }
    ft_tensor *last = cl(ctx, r, &r->head, h, true);     /* [B, 1280, h, w] */
    if (!hs) ft_tensor_release(ctx, h);
    ft_model_add_output(m, "last_hidden_state", last);
    ft_tensor *pooled = ft_global_avgpool(ctx, last);    /* [B, 1280, 1, 1] */
    ft_model_add_output(m, "pooler_output", ft_vision_flatten_pool(ctx, pooled)); /* [B, 1280] */
    ft_vision_add_hidden(m, states, MNV2_LAYERS);
    return ctx->status;
}

static ft_status mnv2_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in, int *n_in,
                                     void **owned) {
    const mnv2 *r = (const mnv2 *)m->priv;
    /* the default side is the config's image_size (what its image processor resizes to) */
    return ft_vision_example_inputs(m, r->channels, batch, length > 0 ? length : r->image_size, in, n_in, owned);
}

static const char *const mnv2_prefixes[] = {"mobilenet_v2.", NULL};
static const char *const mnv2_inputs[] = {"pixel_values", NULL};

/* google/mobilenet_v2_{1.4,1.0,0.75,0.5,0.35}_224 (the Hub configs set depth_multiplier) */
static const ft_preset mnv2_presets[] = {
    {"mobilenet_v2_1.0_224", "{\"model_type\": \"mobilenet_v2\"}"},
    {"mobilenet_v2_1.4_224", "{\"model_type\": \"mobilenet_v2\", \"depth_multiplier\": 1.4}"},
    {"mobilenet_v2_0.75_160", "{\"model_type\": \"mobilenet_v2\", \"depth_multiplier\": 0.75, \"image_size\": 160}"},
    {"mobilenet_v2_0.35_96", "{\"model_type\": \"mobilenet_v2\", \"depth_multiplier\": 0.35, \"image_size\": 96}"},
    {NULL, NULL},
};

const ft_arch ft_arch_mobilenet_v2 = {
    .model_type = "mobilenet_v2",
    .prefixes = mnv2_prefixes,
    .inputs = mnv2_inputs,
    .load = mnv2_load,
    .validate = mnv2_validate,
    .forward = mnv2_forward,
    .destroy = mnv2_destroy,
    .example_inputs = mnv2_example_inputs,
    .presets = mnv2_presets,
};

/*
 * resnet.c - ResNetModel as Hugging Face defines it (tests/golden/README.md,
 * ResNetModel), loadable from HF-named or torchvision-named checkpoints.
 *
 * Stem (conv 7x7/2 + BN + act, max-pool 3x3/2/1), then stages of basic or
 * bottleneck layers whose first layer carries the stride and a 1x1 conv + BN
 * projection shortcut when the width or the resolution changes, then a global
 * average pool kept 4-D ([B, C, 1, 1]) as HF returns it.
 *
 * Every conv is bias-free and followed by an inference BatchNorm (eps 1e-5).
 * Eager mode runs the BN as its own op, exactly as PyTorch eval does; folding
 * it into the conv weights is a graph-mode pass.
 *
 * Checkpoint naming: a checkpoint holding "conv1.weight" uses torchvision's
 * names (conv1/bn1, layer{s+1}.{l}.conv{j}/bn{j}, downsample.{0,1}; fc.* is
 * ignored); anything else uses HF's (embedder.embedder.*, encoder.stages.*).
 * The forward is the same: torchvision's ResNet is "v1.5" like HF's default.
 *
 * Config keys beyond HF's ResNetConfig:
 *   "width_multiplier" (int, default 1): the bottleneck's inner width is
 *   hidden_size / 4 * width_multiplier. 2 gives Wide ResNet-50-2/101-2
 *   (torchvision's width_per_group = 128). Basic layers ignore it.
 */
#include "model.h"
#include "../engine/ft_checked.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESNET_MAX_STAGES 8
#define RESNET_BN_EPS 1e-5f

/* A bias-free conv followed by inference BatchNorm. */
typedef struct conv_bn {
    ft_tensor *w;                   /* [Cout, Cin, K, K] */
    ft_tensor *mean, *var, *gamma, *beta; /* [Cout] each */
    int stride, pad;
} conv_bn;

typedef struct resnet_layer {
    conv_bn conv[3];   /* main path: 2 (basic) or 3 (bottleneck) */
    int n_conv;
    bool has_shortcut; /* projection shortcut; identity otherwise */
    conv_bn shortcut;
} resnet_layer;

typedef struct resnet {
    int64_t channels, embed;
    int n_stages;
    int64_t hidden[RESNET_MAX_STAGES], depth[RESNET_MAX_STAGES];
    bool bottleneck, down_first, down_in_bottleneck, torchvision;
    int64_t width_mult;
    ft_act_kind act;
    conv_bn stem;
    resnet_layer *layers[RESNET_MAX_STAGES];
} resnet;

static ft_status read_config(resnet *r, ft_config *c) {
    static const int64_t def_hidden[4] = {256, 512, 1024, 2048};
    static const int64_t def_depth[4] = {3, 4, 6, 3};
    const char *lt = NULL;
    int nh = 0, nd = 0;
    ft_status st;
    if ((st = ft_config_int(c, "num_channels", 3, &r->channels)) ||
        (st = ft_config_int(c, "embedding_size", 64, &r->embed)) ||
        (st = ft_config_int_array(c, "hidden_sizes", def_hidden, 4, r->hidden, RESNET_MAX_STAGES, &nh)) ||
        (st = ft_config_int_array(c, "depths", def_depth, 4, r->depth, RESNET_MAX_STAGES, &nd)) ||
        (st = ft_config_string(c, "layer_type", "bottleneck", &lt)) ||
        (st = ft_model_act_parse(c, "hidden_act", "relu", &r->act)) ||
        (st = ft_config_bool(c, "downsample_in_first_stage", false, &r->down_first)) ||
        (st = ft_config_bool(c, "downsample_in_bottleneck", false, &r->down_in_bottleneck)) ||
        (st = ft_config_int(c, "width_multiplier", 1, &r->width_mult)))
        return st;
    if (!strcmp(lt, "bottleneck")) r->bottleneck = true;
    else if (!strcmp(lt, "basic")) r->bottleneck = false;
    else return ft_config_error(c, "layer_type '%s' is not supported (basic, bottleneck)", lt);
    if (nh != nd || nh < 1)
        return ft_config_error(c, "hidden_sizes (%d values) and depths (%d values) must have the same, "
                               "non-zero length", nh, nd);
    r->n_stages = nh;
    if (r->channels < 1 || r->embed < 1 || r->width_mult < 1)
        return ft_config_error(c, "num_channels, embedding_size and width_multiplier must be positive");
    for (int s = 0; s < nh; s++) {
        if (r->hidden[s] < 1 || r->depth[s] < 1)
            return ft_config_error(c, "stage %d: hidden size %lld and depth %lld must be positive", s,
                                   (long long)r->hidden[s], (long long)r->depth[s]);
        if (r->bottleneck && r->hidden[s] % 4)
            return ft_config_error(c, "stage %d: bottleneck width %lld is not a multiple of 4", s,
                                   (long long)r->hidden[s]);
    }
    return FT_OK;
}

/* Fetches one conv + BN pair under either naming (conv and bn are full name stems). */
static void load_conv_bn(ft_model *m, conv_bn *cb, const char *conv, const char *bn, int64_t cout,
                         int64_t cin, int64_t k, int stride) {
    cb->w = ft_weight(m, FT_W_SHAPE(cout, cin, k, k), "%s.weight", conv);
    cb->gamma = ft_weight(m, FT_W_SHAPE(cout), "%s.weight", bn);
    cb->beta = ft_weight(m, FT_W_SHAPE(cout), "%s.bias", bn);
    cb->mean = ft_weight(m, FT_W_SHAPE(cout), "%s.running_mean", bn);
    cb->var = ft_weight(m, FT_W_SHAPE(cout), "%s.running_var", bn);
    cb->stride = stride;
    cb->pad = (int)(k / 2);
}

/* Names of main-path conv j (0-based) of layer l of stage s, or of the shortcut (j < 0). */
static void layer_names(const resnet *r, int s, int l, int j, char *conv, char *bn, size_t size) {
    if (r->torchvision) {
        if (j < 0) {
            snprintf(conv, size, "layer%d.%d.downsample.0", s + 1, l);
            snprintf(bn, size, "layer%d.%d.downsample.1", s + 1, l);
        } else {
            snprintf(conv, size, "layer%d.%d.conv%d", s + 1, l, j + 1);
            snprintf(bn, size, "layer%d.%d.bn%d", s + 1, l, j + 1);
        }
    } else if (j < 0) {
        snprintf(conv, size, "encoder.stages.%d.layers.%d.shortcut.convolution", s, l);
        snprintf(bn, size, "encoder.stages.%d.layers.%d.shortcut.normalization", s, l);
    } else {
        snprintf(conv, size, "encoder.stages.%d.layers.%d.layer.%d.convolution", s, l, j);
        snprintf(bn, size, "encoder.stages.%d.layers.%d.layer.%d.normalization", s, l, j);
    }
}

static ft_status load_weights(ft_model *m, resnet *r) {
    char conv[128], bn[128];
    if (r->torchvision) load_conv_bn(m, &r->stem, "conv1", "bn1", r->embed, r->channels, 7, 2);
    else
        load_conv_bn(m, &r->stem, "embedder.embedder.convolution", "embedder.embedder.normalization",
                     r->embed, r->channels, 7, 2);
    int64_t cin = r->embed;
    for (int s = 0; s < r->n_stages; s++) {
        int64_t c = r->hidden[s];
        r->layers[s] = (resnet_layer *)calloc((size_t)r->depth[s], sizeof(resnet_layer));
        if (!r->layers[s]) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
        for (int l = 0; l < (int)r->depth[s]; l++) {
            resnet_layer *L = &r->layers[s][l];
            int stride = l > 0 ? 1 : (s > 0 || r->down_first) ? 2 : 1;
            int64_t in = l == 0 ? cin : c;
            L->has_shortcut = in != c || stride != 1;
            if (L->has_shortcut) {
                layer_names(r, s, l, -1, conv, bn, sizeof conv);
                load_conv_bn(m, &L->shortcut, conv, bn, c, in, 1, stride);
            }
            if (r->bottleneck) {
                int64_t inner = c / 4 * r->width_mult;
                L->n_conv = 3;
                layer_names(r, s, l, 0, conv, bn, sizeof conv);
                load_conv_bn(m, &L->conv[0], conv, bn, inner, in, 1, r->down_in_bottleneck ? stride : 1);
                layer_names(r, s, l, 1, conv, bn, sizeof conv);
                load_conv_bn(m, &L->conv[1], conv, bn, inner, inner, 3, r->down_in_bottleneck ? 1 : stride);
                layer_names(r, s, l, 2, conv, bn, sizeof conv);
                load_conv_bn(m, &L->conv[2], conv, bn, c, inner, 1, 1);
            } else {
                L->n_conv = 2;
                layer_names(r, s, l, 0, conv, bn, sizeof conv);
                load_conv_bn(m, &L->conv[0], conv, bn, c, in, 3, stride);
                layer_names(r, s, l, 1, conv, bn, sizeof conv);
                load_conv_bn(m, &L->conv[1], conv, bn, c, c, 3, 1);
            }
            if (m->ctx->status != FT_OK) return m->ctx->status;
        }
        cin = c;
    }
    return m->ctx->status;
}

static ft_status resnet_load(ft_model *m, ft_config *cfg) {
    resnet *r = (resnet *)calloc(1, sizeof *r);
    if (!r) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = r;
    snprintf(m->arch_name, sizeof m->arch_name, "ResNetModel");
    ft_status st = read_config(r, cfg);
    if (st) return st;
    r->torchvision = ft_weight_exists(m, "conv1.weight");
    return load_weights(m, r);
}

static void resnet_destroy(ft_model *m) {
    resnet *r = (resnet *)m->priv;
    if (r)
        for (int s = 0; s < RESNET_MAX_STAGES; s++) free(r->layers[s]);
    free(r);
    m->priv = NULL;
}

static ft_status resnet_validate(ft_model *m) {
    const resnet *r = (const resnet *)m->priv;
    const ft_host_tensor *px = ft_model_host_input(m, "pixel_values");
    if (!px) return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "ResNetModel needs input 'pixel_values'");
    if (!ft_dtype_is_float(px->dtype))
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "input 'pixel_values' must be a float tensor, got %s",
                            ft_dtype_name(px->dtype));
    if (px->ndim != 4)
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "input 'pixel_values' must be [batch, channels, height, width], got rank %d",
                            px->ndim);
    if (px->shape[1] != r->channels)
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "input 'pixel_values' has %lld channels, but the config's num_channels is %lld",
                            (long long)px->shape[1], (long long)r->channels);
    return FT_OK;
}

/* conv -> BN -> optional activation (act == FT_ACTK_LINEAR: none) */
static ft_tensor *conv_bn_fwd(ft_ctx *ctx, const conv_bn *cb, ft_tensor *x, ft_act_kind act) {
    ft_tensor *y = ft_conv2d(ctx, x, cb->w, NULL, cb->stride, cb->pad, 1);
    ft_tensor *n = ft_batchnorm(ctx, y, cb->mean, cb->var, cb->gamma, cb->beta, RESNET_BN_EPS);
    ft_tensor_release(ctx, y);
    if (act == FT_ACTK_LINEAR) return n;
    ft_tensor *a = ft_model_act(ctx, act, n);
    ft_tensor_release(ctx, n);
    return a;
}

static ft_tensor *layer_fwd(ft_ctx *ctx, const resnet *r, const resnet_layer *L, ft_tensor *x) {
    ft_tensor *h = x;
    for (int j = 0; j < L->n_conv; j++) {
        ft_tensor *next = conv_bn_fwd(ctx, &L->conv[j], h, j + 1 < L->n_conv ? r->act : FT_ACTK_LINEAR);
        if (h != x) ft_tensor_release(ctx, h);
        h = next;
    }
    ft_tensor *sc = L->has_shortcut ? conv_bn_fwd(ctx, &L->shortcut, x, FT_ACTK_LINEAR) : x;
    ft_tensor *sum = ft_add(ctx, h, sc);
    ft_tensor_release(ctx, h);
    if (sc != x) ft_tensor_release(ctx, sc);
    ft_tensor *y = ft_model_act(ctx, r->act, sum);
    ft_tensor_release(ctx, sum);
    return y;
}

static ft_status resnet_forward(ft_model *m, ft_ctx *ctx) {
    const resnet *r = (const resnet *)m->priv;
    bool hs = ft_model_want_hidden_states(m);
    ft_tensor *states[RESNET_MAX_STAGES + 1];
    ft_tensor *x = ft_model_input(m, "pixel_values"); /* [B, C, H, W] */
    ft_tensor *stem = conv_bn_fwd(ctx, &r->stem, x, r->act); /* [B, E, H/2, W/2] */
    ft_tensor *h = ft_maxpool2d(ctx, stem, 3, 2, 1);         /* [B, E, H/4, W/4] */
    ft_tensor_release(ctx, stem);
    states[0] = h;
    for (int s = 0; s < r->n_stages; s++) {
        ft_tensor *in = h;
        for (int l = 0; l < (int)r->depth[s]; l++) {
            ft_tensor *next = layer_fwd(ctx, r, &r->layers[s][l], h);
            /* keep stage boundaries when hidden states are returned */
            if (h != in || !hs) ft_tensor_release(ctx, h);
            h = next;
        }
        states[s + 1] = h;
    }
    ft_model_add_output(m, "last_hidden_state", h);
    ft_model_add_output(m, "pooler_output", ft_global_avgpool(ctx, h)); /* [B, C, 1, 1] */
    if (hs) {
        char name[48];
        for (int s = 0; s <= r->n_stages; s++) {
            snprintf(name, sizeof name, "hidden_states.%d", s);
            ft_model_add_output(m, name, states[s]);
        }
    }
    return ctx->status;
}

/* A deterministic pseudo-image in [0, 1) (the paper fed uninitialised memory). */
static ft_status resnet_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                                       int *n_in, void **owned) {
    const resnet *r = (const resnet *)m->priv;
    if (length <= 0) length = 224;
    return ft_example_image_inputs(m, batch, r->channels, length, length, in, n_in, owned);
}

static const char *const resnet_prefixes[] = {"resnet.", NULL};
static const char *const resnet_inputs[] = {"pixel_values", NULL};

/* microsoft/resnet-{18,34,50,101,152} and torchvision wide_resnet50_2 */
static const ft_preset resnet_presets[] = {
    {"resnet-18", "{\"model_type\": \"resnet\", \"layer_type\": \"basic\", \"depths\": [2, 2, 2, 2],"
                  " \"hidden_sizes\": [64, 128, 256, 512]}"},
    {"resnet-34", "{\"model_type\": \"resnet\", \"layer_type\": \"basic\", \"depths\": [3, 4, 6, 3],"
                  " \"hidden_sizes\": [64, 128, 256, 512]}"},
    {"resnet-50", "{\"model_type\": \"resnet\"}"},
    {"resnet-101", "{\"model_type\": \"resnet\", \"depths\": [3, 4, 23, 3]}"},
    {"resnet-152", "{\"model_type\": \"resnet\", \"depths\": [3, 8, 36, 3]}"},
    {"wide-resnet-50-2", "{\"model_type\": \"resnet\", \"width_multiplier\": 2}"},
    {NULL, NULL},
};

const ft_arch ft_arch_resnet = {
    .model_type = "resnet",
    .prefixes = resnet_prefixes,
    .inputs = resnet_inputs,
    .load = resnet_load,
    .validate = resnet_validate,
    .forward = resnet_forward,
    .destroy = resnet_destroy,
    .example_inputs = resnet_example_inputs,
    .presets = resnet_presets,
};

/*
 * convnext.c - ConvNextModel as Hugging Face transformers 4.36.2 defines it
 * (tests/golden/README-zoo.md, ConvNextModel): a patchify stem (conv with
 * kernel = stride = patch_size, bias) and a channels-first LayerNorm; stages
 * that begin, after the first, with a channels-first LayerNorm and a 2x2/2
 * convolution; blocks of a depthwise 7x7 convolution (with bias), a LayerNorm
 * over channels in NHWC, Linear C -> 4C, the activation, Linear 4C -> C, the
 * layer scale, and the residual add back in NCHW. last_hidden_state is the last
 * stage's output, not normalised; pooler_output is LayerNorm(mean over H, W)
 * with eps = layer_norm_eps, [B, C].
 *
 * Every LayerNorm but the pooled one has eps 1e-6 (hard-coded by HF). The
 * channels-first ones are one op (FT_OP_CHANNEL_NORM, f32 statistics as HF's
 * float32 computation); the block's NHWC LayerNorm runs on the permuted view (a
 * copy, then the last-dim LayerNorm), as the linears need rows.
 */
#include "vision_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CNX_MAX_STAGES 8
#define CNX_LN_EPS 1e-6f

typedef struct cnx_layer {
    ft_tensor *dw_w, *dw_b;      /* [C, 1, 7, 7], [C] */
    ft_tensor *ln_g, *ln_b;      /* [C] */
    ft_tensor *w1, *b1, *w2, *b2; /* [4C, C], [4C], [C, 4C], [C] */
    ft_tensor *scale;            /* [C] or NULL */
} cnx_layer;

typedef struct cnx_stage {
    bool down;
    ft_tensor *down_g, *down_b, *down_w, *down_bias; /* [Cin], [Cin], [C, Cin, 2, 2], [C] */
    cnx_layer *layers;
} cnx_stage;

typedef struct convnext {
    int64_t channels, patch, n_stages, image_size;
    int64_t hidden[CNX_MAX_STAGES], depth[CNX_MAX_STAGES];
    double eps, layer_scale;
    ft_act_kind act;
    ft_tensor *stem_w, *stem_b, *stem_g, *stem_beta;
    cnx_stage stage[CNX_MAX_STAGES];
    ft_tensor *pool_g, *pool_b;
} convnext;

static ft_status read_config(convnext *r, ft_config *c) {
    static const int64_t def_hidden[4] = {96, 192, 384, 768}, def_depth[4] = {3, 3, 9, 3};
    int nh = 0, nd = 0;
    ft_status st;
    if ((st = ft_config_int(c, "num_channels", 3, &r->channels)) ||
        (st = ft_config_int(c, "patch_size", 4, &r->patch)) ||
        (st = ft_config_int(c, "num_stages", 4, &r->n_stages)) ||
        (st = ft_config_int(c, "image_size", 224, &r->image_size)) ||
        (st = ft_config_int_array(c, "hidden_sizes", def_hidden, 4, r->hidden, CNX_MAX_STAGES, &nh)) ||
        (st = ft_config_int_array(c, "depths", def_depth, 4, r->depth, CNX_MAX_STAGES, &nd)) ||
        (st = ft_model_act_parse(c, "hidden_act", "gelu", &r->act)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-12, &r->eps)) ||
        (st = ft_config_float(c, "layer_scale_init_value", 1e-6, &r->layer_scale)))
        return st;
    if (r->channels < 1 || r->patch < 1 || r->image_size < 1)
        return ft_config_error(c, "num_channels (%lld), patch_size (%lld) and image_size (%lld) must be positive",
                               (long long)r->channels, (long long)r->patch, (long long)r->image_size);
    if (r->n_stages < 1 || r->n_stages > nh || r->n_stages > nd)
        return ft_config_error(c, "num_stages is %lld, but hidden_sizes has %d values and depths %d (one per stage)",
                               (long long)r->n_stages, nh, nd);
    /* HF's final LayerNorm is hidden_sizes[-1] wide, whatever num_stages says */
    if (r->hidden[r->n_stages - 1] != r->hidden[nh - 1])
        return ft_config_error(c, "num_stages %lld leaves the last stage %lld wide, but the final layernorm takes "
                                  "hidden_sizes[-1] = %lld",
                               (long long)r->n_stages, (long long)r->hidden[r->n_stages - 1],
                               (long long)r->hidden[nh - 1]);
    for (int s = 0; s < r->n_stages; s++)
        if (r->hidden[s] < 1 || r->depth[s] < 0)
            return ft_config_error(c, "stage %d: hidden size %lld and depth %lld must be positive", s,
                                   (long long)r->hidden[s], (long long)r->depth[s]);
    if (!(r->eps > 0.0)) return ft_config_error(c, "layer_norm_eps must be positive, got %g", r->eps);
    return FT_OK;
}

static ft_status load_weights(ft_model *m, convnext *r) {
    int64_t c0 = r->hidden[0];
    char name[160];
    r->stem_w = ft_vision_conv_weight(m, c0, r->channels, r->patch, r->patch, "embeddings.patch_embeddings.weight");
    r->stem_b = ft_weight(m, FT_W_SHAPE(c0), "embeddings.patch_embeddings.bias");
    r->stem_g = ft_weight(m, FT_W_SHAPE(c0), "embeddings.layernorm.weight");
    r->stem_beta = ft_weight(m, FT_W_SHAPE(c0), "embeddings.layernorm.bias");
    int64_t prev = c0;
    for (int s = 0; s < r->n_stages; s++) {
        cnx_stage *S = &r->stage[s];
        int64_t c = r->hidden[s];
        S->down = s > 0; /* HF: in != out or stride > 1; stage 0 keeps the stem's width at stride 1 */
        if (S->down) {
            S->down_g = ft_weight(m, FT_W_SHAPE(prev), "encoder.stages.%d.downsampling_layer.0.weight", s);
            S->down_b = ft_weight(m, FT_W_SHAPE(prev), "encoder.stages.%d.downsampling_layer.0.bias", s);
            int k = s > 0 ? 2 : 1;
            snprintf(name, sizeof name, "encoder.stages.%d.downsampling_layer.1.weight", s);
            S->down_w = ft_vision_conv_weight(m, c, prev, k, k, name);
            S->down_bias = ft_weight(m, FT_W_SHAPE(c), "encoder.stages.%d.downsampling_layer.1.bias", s);
        }
        S->layers = (cnx_layer *)calloc((size_t)(r->depth[s] ? r->depth[s] : 1), sizeof *S->layers);
        if (!S->layers) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
        for (int l = 0; l < (int)r->depth[s]; l++) {
            cnx_layer *L = &S->layers[l];
            const char *p = name;
            snprintf(name, sizeof name, "encoder.stages.%d.layers.%d", s, l);
            char w[200];
            snprintf(w, sizeof w, "%s.dwconv.weight", p);
            L->dw_w = ft_vision_conv_weight(m, c, 1, 7, 7, w);
            L->dw_b = ft_weight(m, FT_W_SHAPE(c), "%s.dwconv.bias", p);
            L->ln_g = ft_weight(m, FT_W_SHAPE(c), "%s.layernorm.weight", p);
            L->ln_b = ft_weight(m, FT_W_SHAPE(c), "%s.layernorm.bias", p);
            L->w1 = ft_weight(m, FT_W_SHAPE(4 * c, c), "%s.pwconv1.weight", p);
            L->b1 = ft_weight(m, FT_W_SHAPE(4 * c), "%s.pwconv1.bias", p);
            L->w2 = ft_weight(m, FT_W_SHAPE(c, 4 * c), "%s.pwconv2.weight", p);
            L->b2 = ft_weight(m, FT_W_SHAPE(c), "%s.pwconv2.bias", p);
            L->scale = r->layer_scale > 0.0 ? ft_weight(m, FT_W_SHAPE(c), "%s.layer_scale_parameter", p) : NULL;
            if (m->ctx->status != FT_OK) return m->ctx->status;
        }
        prev = c;
    }
    r->pool_g = ft_weight(m, FT_W_SHAPE(prev), "layernorm.weight");
    r->pool_b = ft_weight(m, FT_W_SHAPE(prev), "layernorm.bias");
    return m->ctx->status;
}

static ft_status cnx_load(ft_model *m, ft_config *cfg) {
    convnext *r = (convnext *)calloc(1, sizeof *r);
    if (!r) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = r;
    snprintf(m->arch_name, sizeof m->arch_name, "ConvNextModel");
    ft_status st = read_config(r, cfg);
    if (st) return st;
    return load_weights(m, r);
}

static void cnx_destroy(ft_model *m) {
    convnext *r = (convnext *)m->priv;
    if (r)
        for (int s = 0; s < CNX_MAX_STAGES; s++) free(r->stage[s].layers);
    free(r);
    m->priv = NULL;
}

static ft_status cnx_validate(ft_model *m) {
    const convnext *r = (const convnext *)m->priv;
    ft_status st = ft_vision_check_pixels(m, "ConvNextModel", r->channels, r->patch);
    if (st) return st;
    const ft_host_tensor *px = ft_model_host_input(m, "pixel_values");
    for (int axis = 0; axis < 2; axis++) {
        int64_t n = px->shape[2 + axis] / r->patch;
        for (int s = 1; s < r->n_stages; s++) {
            if (n < 2)
                return ft_set_error(m->ctx, FT_ERR_SHAPE,
                                    "input 'pixel_values' is %lld x %lld pixels: too small for ConvNextModel (stage "
                                    "%d's 2x2 downsampling sees a map of %lld)",
                                    (long long)px->shape[2], (long long)px->shape[3], s, (long long)n);
            n /= 2;
        }
    }
    return FT_OK;
}

/* x + scale * pwconv2(act(pwconv1(LN(dwconv(x)) in NHWC))) back in NCHW */
static ft_tensor *layer_fwd(ft_ctx *ctx, const convnext *r, const cnx_layer *L, ft_tensor *x, int64_t c) {
    ft_tensor *d = ft_conv2d(ctx, x, L->dw_w, L->dw_b, 1, 3, (int)c);          /* [B, C, H, W] */
    ft_tensor *t = ft_permute(ctx, d, (const int[]){0, 2, 3, 1});              /* [B, H, W, C] view */
    ft_tensor *n = ft_layernorm(ctx, t, L->ln_g, L->ln_b, CNX_LN_EPS);
    ft_tensor_release(ctx, t);
    ft_tensor_release(ctx, d);
    ft_tensor *h = ft_linear(ctx, n, L->w1, L->b1);                            /* [B, H, W, 4C] */
    ft_tensor_release(ctx, n);
    ft_tensor *a = ft_model_act(ctx, r->act, h);
    ft_tensor_release(ctx, h);
    ft_tensor *o = ft_linear(ctx, a, L->w2, L->b2);                            /* [B, H, W, C] */
    ft_tensor_release(ctx, a);
    if (L->scale) {
        ft_tensor *s = ft_mul(ctx, o, L->scale);
        ft_tensor_release(ctx, o);
        o = s;
    }
    ft_tensor *back = ft_permute(ctx, o, (const int[]){0, 3, 1, 2});          /* [B, C, H, W] view */
    ft_tensor *y = ft_add(ctx, x, back);
    ft_tensor_release(ctx, back);
    ft_tensor_release(ctx, o);
    return y;
}

static ft_status cnx_forward(ft_model *m, ft_ctx *ctx) {
    const convnext *r = (const convnext *)m->priv;
    bool hs = ft_model_want_hidden_states(m);
    ft_tensor *states[CNX_MAX_STAGES + 1];
    ft_tensor *x = ft_model_input(m, "pixel_values");                      /* [B, C, H, W] */
    ft_tensor *p = ft_conv2d(ctx, x, r->stem_w, r->stem_b, (int)r->patch, 0, 1); /* [B, C0, H/P, W/P] */
    ft_tensor *h = ft_channel_norm(ctx, p, r->stem_g, r->stem_beta, CNX_LN_EPS);
    ft_tensor_release(ctx, p);
    states[0] = h;
    for (int s = 0; s < r->n_stages; s++) {
        const cnx_stage *S = &r->stage[s];
        ft_tensor *in = h;
        if (S->down) {
            int k = s > 0 ? 2 : 1;
            ft_tensor *n = ft_channel_norm(ctx, h, S->down_g, S->down_b, CNX_LN_EPS);
            h = ft_conv2d(ctx, n, S->down_w, S->down_bias, k, 0, 1);       /* [B, C, h/2, w/2] */
            ft_tensor_release(ctx, n);
        }
        for (int l = 0; l < (int)r->depth[s]; l++) {
            ft_tensor *y = layer_fwd(ctx, r, &S->layers[l], h, r->hidden[s]);
            if (h != in) ft_tensor_release(ctx, h); /* the stage input is states[s] */
            h = y;
        }
        if (h != in && !hs) ft_tensor_release(ctx, in);
        states[s + 1] = h;
    }
    ft_model_add_output(m, "last_hidden_state", h);
    ft_tensor *mean = ft_vision_flatten_pool(ctx, ft_global_avgpool(ctx, h)); /* [B, C] */
    ft_model_add_output(m, "pooler_output", ft_layernorm(ctx, mean, r->pool_g, r->pool_b, (float)r->eps));
    ft_vision_add_hidden(m, states, (int)r->n_stages + 1);
    return ctx->status;
}

static ft_status cnx_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in, int *n_in,
                                    void **owned) {
    const convnext *r = (const convnext *)m->priv;
    return ft_vision_example_inputs(m, r->channels, batch, length > 0 ? length : r->image_size, in, n_in, owned);
}

static const char *const cnx_prefixes[] = {"convnext.", NULL};
static const char *const cnx_inputs[] = {"pixel_values", NULL};

/* facebook/convnext-{tiny,small,base,large}-224 */
static const ft_preset cnx_presets[] = {
    {"convnext-tiny-224", "{\"model_type\": \"convnext\"}"},
    {"convnext-small-224", "{\"model_type\": \"convnext\", \"depths\": [3, 3, 27, 3]}"},
    {"convnext-base-224", "{\"model_type\": \"convnext\", \"depths\": [3, 3, 27, 3], "
                          "\"hidden_sizes\": [128, 256, 512, 1024]}"},
    {"convnext-large-224", "{\"model_type\": \"convnext\", \"depths\": [3, 3, 27, 3], "
                           "\"hidden_sizes\": [192, 384, 768, 1536]}"},
    {NULL, NULL},
};

const ft_arch ft_arch_convnext = {
    .model_type = "convnext",
    .prefixes = cnx_prefixes,
    .inputs = cnx_inputs,
    .load = cnx_load,
    .validate = cnx_validate,
    .forward = cnx_forward,
    .destroy = cnx_destroy,
    .example_inputs = cnx_example_inputs,
    .presets = cnx_presets,
};

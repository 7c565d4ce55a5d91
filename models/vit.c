/*
 * vit.c - ViTModel as Hugging Face 4.36.2 defines it (tests/golden/README-zoo.md,
 * ViTModel): a patchify conv (kernel = stride = patch_size, no padding, so
 * trailing pixels are dropped), the CLS token prepended, learned position
 * embeddings added, pre-LN encoder layers, a final LayerNorm, and the tanh
 * pooler on the CLS row when the checkpoint has one (google/vit-base-patch16-224
 * is saved without it: then there is no pooler_output, as HF builds that model
 * with add_pooling_layer=False).
 *
 * The input must be exactly config.image_size: HF refuses other sizes unless
 * interpolate_pos_encoding resizes the position table, which is not
 * implemented here. image_size may be one integer or [height, width];
 * patch_size one integer (or a pair of equal values).
 *
 * The embedding is assembled channels-first: conv output [B, D, Np] and the CLS
 * column [B, D, 1] concatenated along the patch axis, then read transposed by
 * the position add, which writes [B, Np + 1, D] (one copy fewer than
 * transposing the patches first).
 */
#include "model.h"
#include "../engine/ft_checked.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct vit_layer {
    ft_tensor *ln1_w, *ln1_b;                         /* layernorm_before [D] */
    ft_tensor *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo; /* [D, D], [D] (q/k/v biases NULL without qkv_bias) */
    ft_tensor *ln2_w, *ln2_b;                         /* layernorm_after [D] */
    ft_tensor *wi, *bi, *wo2, *bo2;                   /* [I, D], [I], [D, I], [D] */
} vit_layer;

typedef struct vit {
    int64_t d, layers, heads, inter, channels, image_h, image_w, patch, grid_h, grid_w, n_patches;
    bool qkv_bias;
    float eps;
    ft_act_kind act;
    ft_tensor *cls, *pos;           /* [1, 1, D], [1, Np + 1, D] */
    ft_tensor *patch_w, *patch_b;   /* [D, C, P, P], [D] */
    ft_tensor *ln_w, *ln_b;         /* final layernorm [D] */
    ft_tensor *pool_w, *pool_b;     /* [D, D], [D]; NULL without a pooler */
    vit_layer *layer;
} vit;

/* An integer, or a 2-element integer array (HF accepts both for image_size and
 * patch_size); absent: def for both. */
static ft_status read_pair(ft_config *c, const char *key, int64_t def, int64_t out[2]) {
    const ft_json *v = c->root ? ft_json_get(c->root, key) : NULL;
    if (v && ft_json_type_of(v) == FT_JSON_ARRAY) {
        int n = 0;
        ft_status st = ft_config_int_array(c, key, NULL, 0, out, 2, &n);
        if (st) return st;
        if (n != 2) return ft_config_error(c, "'%s' must be an integer or [height, width], got %d values", key, n);
        return FT_OK;
    }
    ft_status st = ft_config_int(c, key, def, &out[0]);
    out[1] = out[0];
    return st;
}

static ft_status read_config(vit *v, ft_config *c) {
    double eps = 1e-12;
    int64_t image[2], patch[2];
    ft_status st;
    if ((st = ft_config_int(c, "hidden_size", 768, &v->d)) ||
        (st = ft_config_int(c, "num_hidden_layers", 12, &v->layers)) ||
        (st = ft_config_int(c, "num_attention_heads", 12, &v->heads)) ||
        (st = ft_config_int(c, "intermediate_size", 3072, &v->inter)) ||
        (st = ft_model_act_parse(c, "hidden_act", "gelu", &v->act)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-12, &eps)) ||
        (st = read_pair(c, "image_size", 224, image)) ||
        (st = read_pair(c, "patch_size", 16, patch)) ||
        (st = ft_config_int(c, "num_channels", 3, &v->channels)) ||
        (st = ft_config_bool(c, "qkv_bias", true, &v->qkv_bias)))
        return st;
    if (v->d < 1) return ft_config_error(c, "hidden_size must be positive, got %lld", (long long)v->d);
    if (v->layers < 0)
        return ft_config_error(c, "num_hidden_layers must not be negative, got %lld", (long long)v->layers);
    if (v->heads < 1)
        return ft_config_error(c, "num_attention_heads must be positive, got %lld", (long long)v->heads);
    if (v->inter < 1)
        return ft_config_error(c, "intermediate_size must be positive, got %lld", (long long)v->inter);
    if (v->channels < 1)
        return ft_config_error(c, "num_channels must be positive, got %lld", (long long)v->channels);
    if (v->d % v->heads)
        return ft_config_error(c, "hidden_size %lld is not a multiple of num_attention_heads %lld",
                               (long long)v->d, (long long)v->heads);
    if (patch[0] != patch[1])
        return ft_config_error(c, "patch_size [%lld, %lld]: only square patches are supported",
                               (long long)patch[0], (long long)patch[1]);
    if (patch[0] < 1) return ft_config_error(c, "patch_size must be positive, got %lld", (long long)patch[0]);
    if (image[0] < patch[0] || image[1] < patch[0])
        return ft_config_error(c, "image_size %lldx%lld is smaller than one %lldx%lld patch (patch_size)",
                               (long long)image[0], (long long)image[1], (long long)patch[0], (long long)patch[0]);
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive, got %g", eps);
    v->eps = (float)eps;
    v->image_h = image[0];
    v->image_w = image[1];
    v->patch = patch[0];
    v->grid_h = image[0] / patch[0];
    v->grid_w = image[1] / patch[0];
    v->n_patches = v->grid_h * v->grid_w;
    return FT_OK;
}

static ft_status load_weights(ft_model *m, vit *v) {
    int64_t D = v->d, I = v->inter, P = v->patch;
    v->cls = ft_weight(m, FT_W_SHAPE(1, 1, D), "embeddings.cls_token");
    v->pos = ft_weight(m, FT_W_SHAPE(1, v->n_patches + 1, D), "embeddings.position_embeddings");
    v->patch_w = ft_weight(m, FT_W_SHAPE(D, v->channels, P, P), "embeddings.patch_embeddings.projection.weight");
    v->patch_b = ft_weight(m, FT_W_SHAPE(D), "embeddings.patch_embeddings.projection.bias");
    const char *p = "encoder.layer";
    for (int i = 0; i < (int)v->layers; i++) {
        vit_layer *l = &v->layer[i];
        l->ln1_w = ft_weight(m, FT_W_SHAPE(D), "%s.%d.layernorm_before.weight", p, i);
        l->ln1_b = ft_weight(m, FT_W_SHAPE(D), "%s.%d.layernorm_before.bias", p, i);
        l->wq = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.attention.query.weight", p, i);
        l->wk = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.attention.key.weight", p, i);
        l->wv = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.attention.value.weight", p, i);
        ft_weights_pack(m, (ft_tensor *[]){l->wq, l->wk, l->wv}, 3);
        if (v->qkv_bias) {
            l->bq = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.attention.query.bias", p, i);
            l->bk = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.attention.key.bias", p, i);
            l->bv = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.attention.value.bias", p, i);
            ft_weights_pack(m, (ft_tensor *[]){l->bq, l->bk, l->bv}, 3);
        }
        l->wo = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.output.dense.weight", p, i);
        l->bo = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.output.dense.bias", p, i);
        l->ln2_w = ft_weight(m, FT_W_SHAPE(D), "%s.%d.layernorm_after.weight", p, i);
        l->ln2_b = ft_weight(m, FT_W_SHAPE(D), "%s.%d.layernorm_after.bias", p, i);
        l->wi = ft_weight(m, FT_W_SHAPE(I, D), "%s.%d.intermediate.dense.weight", p, i);
        l->bi = ft_weight(m, FT_W_SHAPE(I), "%s.%d.intermediate.dense.bias", p, i);
        l->wo2 = ft_weight(m, FT_W_SHAPE(D, I), "%s.%d.output.dense.weight", p, i);
        l->bo2 = ft_weight(m, FT_W_SHAPE(D), "%s.%d.output.dense.bias", p, i);
        if (m->ctx->status != FT_OK) return m->ctx->status;
    }
    v->ln_w = ft_weight(m, FT_W_SHAPE(D), "layernorm.weight");
    v->ln_b = ft_weight(m, FT_W_SHAPE(D), "layernorm.bias");
    /* a preset has the pooler (ViTModel's default); a checkpoint has it if it was saved
     * with one: either half present makes the other required */
    if (!m->st || ft_weight_exists(m, "pooler.dense.weight") || ft_weight_exists(m, "pooler.dense.bias")) {
        v->pool_w = ft_weight(m, FT_W_SHAPE(D, D), "pooler.dense.weight");
        v->pool_b = ft_weight(m, FT_W_SHAPE(D), "pooler.dense.bias");
    }
    return m->ctx->status;
}

static ft_status vit_load(ft_model *m, ft_config *cfg) {
    vit *v = (vit *)calloc(1, sizeof *v);
    if (!v) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = v;
    snprintf(m->arch_name, sizeof m->arch_name, "ViTModel");
    ft_status st = read_config(v, cfg);
    if (st) return st;
    v->layer = (vit_layer *)calloc((size_t)(v->layers ? v->layers : 1), sizeof *v->layer);
    if (!v->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    return load_weights(m, v);
}

static void vit_destroy(ft_model *m) {
    vit *v = (vit *)m->priv;
    if (v) free(v->layer);
    free(v);
    m->priv = NULL;
}

static ft_status vit_validate(ft_model *m) {
    const vit *v = (const vit *)m->priv;
    const ft_host_tensor *px = ft_model_host_input(m, "pixel_values");
    if (!px) return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "ViTModel needs input 'pixel_values'");
    if (!ft_dtype_is_float(px->dtype))
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "input 'pixel_values' must be a float tensor, got %s",
                            ft_dtype_name(px->dtype));
    if (px->ndim != 4)
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "input 'pixel_values' must be [batch, channels, height, width], got rank %d", px->ndim);
    if (px->shape[1] != v->channels)
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "input 'pixel_values' has %lld channels, but the config's num_channels is %lld",
                            (long long)px->shape[1], (long long)v->channels);
    if (px->shape[2] != v->image_h || px->shape[3] != v->image_w)
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "input 'pixel_values' is %lldx%lld, but the model takes %lldx%lld images (config "
                            "image_size; HF refuses other sizes without interpolate_pos_encoding, which is not "
                            "supported)", (long long)px->shape[2], (long long)px->shape[3], (long long)v->image_h,
                            (long long)v->image_w);
    return FT_OK;
}

/* ---- forward ---- */

/* Patch embeddings + CLS + positions: pixels [B, C, H, W] -> [B, Np + 1, D]. */
static ft_tensor *embeddings(ft_ctx *ctx, const vit *v, ft_tensor *px) {
    int64_t B = ft_tensor_dim(px, 0), D = v->d;
    ft_tensor *pe = ft_conv2d(ctx, px, v->patch_w, v->patch_b, (int)v->patch, 0, 1); /* [B, D, Hp, Wp] */
    ft_tensor *pf = ft_reshape(ctx, pe, 3, FT_SHAPE(B, D, v->n_patches)); /* row-major patch index */
    ft_tensor *cls = ft_expand(ctx, ft_reshape(ctx, v->cls, 3, FT_SHAPE(1, D, 1)), 3, FT_SHAPE(B, D, 1));
    ft_tensor *e = ft_concat(ctx, cls, pf, 2); /* [B, D, Np + 1], CLS first */
    ft_tensor_release(ctx, pe);
    ft_tensor *h = ft_add(ctx, ft_transpose(ctx, e, 1, 2), v->pos); /* [B, Np + 1, D] */
    ft_tensor_release(ctx, e);
    return h;
}

static ft_tensor *attention(ft_ctx *ctx, const vit *v, const vit_layer *l, ft_tensor *x) {
    int64_t B = ft_tensor_dim(x, 0), S = ft_tensor_dim(x, 1), H = v->heads, dh = v->d / H;
    ft_tensor *q = ft_split_heads(ctx, ft_linear(ctx, x, l->wq, l->bq), H); /* [B, H, S, Dh] */
    ft_tensor *k = ft_split_heads(ctx, ft_linear(ctx, x, l->wk, l->bk), H);
    ft_tensor *vv = ft_split_heads(ctx, ft_linear(ctx, x, l->wv, l->bv), H);
    /* HF divides the scores by sqrt(Dh); the reciprocal is the same number for Dh = 4^k */
    ft_tensor *scores = ft_matmul(ctx, q, ft_transpose(ctx, k, -1, -2), 1.0f / sqrtf((float)dh)); /* [B, H, S, S] */
    ft_tensor *probs = ft_softmax(ctx, scores, NULL, 1.0f); /* no mask */
    ft_tensor_release(ctx, scores);
    ft_tensor *c = ft_matmul(ctx, probs, vv, 1.0f); /* [B, H, S, Dh] */
    ft_tensor_release(ctx, probs);
    c = ft_reshape(ctx, ft_permute(ctx, c, (const int[]){0, 2, 1, 3}), 3, FT_SHAPE(B, S, v->d));
    return ft_linear(ctx, c, l->wo, l->bo);
}

/* Pre-LN: h + attn(LN(h)); a + FFN(LN(a)). */
static ft_tensor *encoder_layer(ft_ctx *ctx, const vit *v, const vit_layer *l, ft_tensor *h) {
    ft_tensor *n1 = ft_layernorm(ctx, h, l->ln1_w, l->ln1_b, v->eps);
    ft_tensor *a = ft_add(ctx, attention(ctx, v, l, n1), h);
    ft_tensor_release(ctx, n1);
    ft_tensor *n2 = ft_layernorm(ctx, a, l->ln2_w, l->ln2_b, v->eps);
    ft_tensor *f = ft_linear(ctx, n2, l->wi, l->bi); /* [B, S, I] */
    ft_tensor_release(ctx, n2);
    ft_tensor *fa = ft_model_act(ctx, v->act, f);
    ft_tensor_release(ctx, f);
    ft_tensor *y = ft_add(ctx, ft_linear(ctx, fa, l->wo2, l->bo2), a);
    ft_tensor_release(ctx, fa);
    ft_tensor_release(ctx, a);
    return y;
}

static ft_status vit_forward(ft_model *m, ft_ctx *ctx) {
    const vit *v = (const vit *)m->priv;
    ft_tensor *h = embeddings(ctx, v, ft_model_input(m, "pixel_values")); /* [B, Np + 1, D] */
    if (!h) return ctx->status;
    /* hidden_states: the embeddings and each layer's output, before the final LayerNorm */
    bool hs = ft_model_want_hidden_states(m);
    for (int64_t i = 0; i < v->layers; i++) {
        ft_model_add_hidden_state(m, i, h);
        ft_tensor *next = encoder_layer(ctx, v, &v->layer[i], h);
        if (!hs) ft_tensor_release(ctx, h);
        h = next;
    }
    ft_model_add_hidden_state(m, v->layers, h);
    ft_tensor *out = ft_layernorm(ctx, h, v->ln_w, v->ln_b, v->eps);
    if (!hs) ft_tensor_release(ctx, h);
    ft_model_add_output(m, "last_hidden_state", out);
    if (v->pool_w) /* tanh(dense(CLS row)) [B, D] */
        ft_model_add_output(m, "pooler_output", ft_tanh(ctx, ft_linear(ctx, ft_select(ctx, out, 1, 0), v->pool_w,
                                                                       v->pool_b)));
    return ctx->status;
}

/* A deterministic pseudo-image in [0, 1) of the config's size; `length`, when given,
 * must be that size (the model takes no other). */
static ft_status vit_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in, int *n_in,
                                    void **owned) {
    const vit *v = (const vit *)m->priv;
    if (length > 0 && (length != v->image_h || length != v->image_w))
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "ViTModel takes %lldx%lld images only (config image_size), "
                            "not %lld", (long long)v->image_h, (long long)v->image_w, (long long)length);
    return ft_example_image_inputs(m, batch, v->channels, v->image_h, v->image_w, in, n_in, owned);
}

static const char *const vit_prefixes[] = {"vit.", NULL};
static const char *const vit_inputs[] = {"pixel_values", NULL};

/* google/vit-base-patch16-224 (the class defaults, with the pooler ViTModel builds) and
 * google/vit-base-patch32-224-in21k */
static const ft_preset vit_presets[] = {
    {"vit-base-patch16-224", "{\"model_type\": \"vit\"}"},
    {"vit-base-patch32-224", "{\"model_type\": \"vit\", \"patch_size\": 32}"},
    {NULL, NULL},
};

const ft_arch ft_arch_vit = {
    .model_type = "vit",
    .prefixes = vit_prefixes,
    .inputs = vit_inputs,
    .load = vit_load,
    .validate = vit_validate,
    .forward = vit_forward,
    .destroy = vit_destroy,
    .example_inputs = vit_example_inputs,
    .presets = vit_presets,
};

/*
 * wavlm.c - WavLMModel as Hugging Face defines it (tests/golden/README.md,
 * WavLMModel): the audio front end of wav2vec2 (audio_frontend.c: conv feature
 * encoder "group" = wavlm-base or "layer" = wavlm-large, feature projection,
 * weight-normed positional conv, frame mask) and a transformer encoder with
 * gated relative position bias, post-LN (base) or pre-LN ("stable", large).
 *
 * The relative-position bucket table depends only on the frame count: it is
 * computed on the host in forward() and uploaded with ft_tensor_from_host,
 * which graph mode records as a constant of the plan for that input shape.
 */
#include "audio_frontend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct wavlm_layer {
    ft_tensor *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo; /* [D, D], [D] */
    ft_tensor *gru_const;          /* [1, H, 1, 1] */
    ft_tensor *gru_w, *gru_b;      /* [8, Dh], [8] */
    ft_tensor *rel_embed;          /* [num_buckets, H], layer 0 only */
    ft_tensor *ln1_w, *ln1_b;      /* layer_norm [D] */
    ft_tensor *wi, *bi, *wo2, *bo2; /* [I, D], [I], [D, I], [D] */
    ft_tensor *ln2_w, *ln2_b;      /* final_layer_norm [D] */
} wavlm_layer;

typedef struct wavlm {
    ft_audio_frontend fe;
    bool stable;
    ft_act_kind act;
    int64_t d, layers, heads, inter, num_buckets, max_distance;
    float eps;
    ft_tensor *enc_ln_w, *enc_ln_b;
    wavlm_layer *layer;
} wavlm;

static ft_status read_config(wavlm *w, ft_config *c) {
    double eps = 1e-5;
    bool adapter = false;
    ft_status st;
    if ((st = ft_model_act_parse(c, "hidden_act", "gelu", &w->act)) ||
        (st = ft_config_int(c, "hidden_size", 768, &w->d)) ||
        (st = ft_config_int(c, "num_hidden_layers", 12, &w->layers)) ||
        (st = ft_config_int(c, "num_attention_heads", 12, &w->heads)) ||
        (st = ft_config_int(c, "intermediate_size", 3072, &w->inter)) ||
        (st = ft_config_int(c, "num_buckets", 320, &w->num_buckets)) ||
        (st = ft_config_int(c, "max_bucket_distance", 800, &w->max_distance)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-5, &eps)) ||
        (st = ft_config_bool(c, "do_stable_layer_norm", false, &w->stable)) ||
        (st = ft_config_bool(c, "add_adapter", false, &adapter)))
        return st;
    if (adapter) return ft_config_error(c, "add_adapter true is not supported");
    if (w->d < 1 || w->layers < 0 || w->heads < 1 || w->inter < 1)
        return ft_config_error(c, "sizes must be positive (hidden %lld, layers %lld, heads %lld, "
                               "intermediate %lld)", (long long)w->d, (long long)w->layers, (long long)w->heads,
                               (long long)w->inter);
    if (w->d % w->heads)
        return ft_config_error(c, "hidden_size %lld is not a multiple of num_attention_heads %lld",
                               (long long)w->d, (long long)w->heads);
    if (w->num_buckets < 4 || w->max_distance < 1)
        return ft_config_error(c, "num_buckets (%lld) must be at least 4 and max_bucket_distance positive",
                               (long long)w->num_buckets);
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive");
    w->eps = (float)eps;
    w->fe.proj_ln = true;
    return ft_audio_frontend_config(&w->fe, c, w->d, w->eps);
}

static ft_status load_weights(ft_model *m, wavlm *w, ft_config *cfg) {
    int64_t D = w->d, I = w->inter, H = w->heads, dh = D / H;
    ft_status st = ft_audio_frontend_load(m, &w->fe, cfg);
    if (st) return st;
    w->enc_ln_w = ft_weight(m, FT_W_SHAPE(D), "encoder.layer_norm.weight");
    w->enc_ln_b = ft_weight(m, FT_W_SHAPE(D), "encoder.layer_norm.bias");
    for (int i = 0; i < (int)w->layers; i++) {
        wavlm_layer *l = &w->layer[i];
        const char *p = "encoder.layers";
        l->wq = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.q_proj.weight", p, i);
        l->bq = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.q_proj.bias", p, i);
        l->wk = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.k_proj.weight", p, i);
        l->bk = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.k_proj.bias", p, i);
        l->wv = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.v_proj.weight", p, i);
        l->bv = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.v_proj.bias", p, i);
        ft_weights_pack(m, (ft_tensor *[]){l->wq, l->wk, l->wv}, 3);
        ft_weights_pack(m, (ft_tensor *[]){l->bq, l->bk, l->bv}, 3);
        l->wo = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.out_proj.weight", p, i);
        l->bo = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.out_proj.bias", p, i);
        l->gru_const = ft_weight(m, FT_W_SHAPE(1, H, 1, 1), "%s.%d.attention.gru_rel_pos_const", p, i);
        l->gru_w = ft_weight(m, FT_W_SHAPE(8, dh), "%s.%d.attention.gru_rel_pos_linear.weight", p, i);
        l->gru_b = ft_weight(m, FT_W_SHAPE(8), "%s.%d.attention.gru_rel_pos_linear.bias", p, i);
        if (i == 0)
            l->rel_embed = ft_weight(m, FT_W_SHAPE(w->num_buckets, H), "%s.0.attention.rel_attn_embed.weight", p);
        l->ln1_w = ft_weight(m, FT_W_SHAPE(D), "%s.%d.layer_norm.weight", p, i);
        l->ln1_b = ft_weight(m, FT_W_SHAPE(D), "%s.%d.layer_norm.bias", p, i);
        l->wi = ft_weight(m, FT_W_SHAPE(I, D), "%s.%d.feed_forward.intermediate_dense.weight", p, i);
        l->bi = ft_weight(m, FT_W_SHAPE(I), "%s.%d.feed_forward.intermediate_dense.bias", p, i);
        l->wo2 = ft_weight(m, FT_W_SHAPE(D, I), "%s.%d.feed_forward.output_dense.weight", p, i);
        l->bo2 = ft_weight(m, FT_W_SHAPE(D), "%s.%d.feed_forward.output_dense.bias", p, i);
        l->ln2_w = ft_weight(m, FT_W_SHAPE(D), "%s.%d.final_layer_norm.weight", p, i);
        l->ln2_b = ft_weight(m, FT_W_SHAPE(D), "%s.%d.final_layer_norm.bias", p, i);
        if (m->ctx->status != FT_OK) return m->ctx->status;
    }
    return m->ctx->status;
}

static ft_status wavlm_load(ft_model *m, ft_config *cfg) {
    wavlm *w = (wavlm *)calloc(1, sizeof *w);
    if (!w) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = w;
    snprintf(m->arch_name, sizeof m->arch_name, "WavLMModel");
    ft_status st = read_config(w, cfg);
    if (st) return st;
    w->layer = (wavlm_layer *)calloc((size_t)(w->layers ? w->layers : 1), sizeof *w->layer);
    if (!w->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    return load_weights(m, w, cfg);
}

static void wavlm_destroy(ft_model *m) {
    wavlm *w = (wavlm *)m->priv;
    if (w) free(w->layer);
    free(w);
    m->priv = NULL;
}

static ft_status wavlm_validate(ft_model *m) {
    return ft_audio_validate(m, &((const wavlm *)m->priv)->fe);
}

/* ---- forward ---- */

/* Bucket of relative offset r = key - query, in float32 exactly as HF computes it.
 * Not static: tests/test_resnet_wavlm.c checks it against the spec's examples. */
int64_t ft_wavlm_rel_bucket(int64_t r, int64_t num_buckets, int64_t max_distance);
int64_t ft_wavlm_rel_bucket(int64_t r, int64_t num_buckets, int64_t max_distance) {
    int64_t half = num_buckets / 2, max_exact = half / 2;
    int64_t bucket = r > 0 ? half : 0;
    int64_t a = r < 0 ? -r : r;
    if (a < max_exact) return bucket + a;
    float v = logf((float)a / (float)max_exact);
    v = v / (float)log((double)max_distance / (double)max_exact);
    v = v * (float)(half - max_exact);
    int64_t large = (int64_t)((float)max_exact + v);
    if (large > half - 1) large = half - 1;
    return bucket + large;
}

/* Ungated relative position bias [H, T, T] from layer 0's embedding. */
static ft_tensor *position_bias(ft_ctx *ctx, const wavlm *w, int64_t T) {
    int64_t *idx = (int64_t *)malloc((size_t)(T * T) * sizeof *idx);
    if (!idx) {
        ft_set_error(ctx, FT_ERR_OOM, "out of host memory for the %lldx%lld bucket table", (long long)T,
                     (long long)T);
        return NULL;
    }
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++) idx[i * T + j] = ft_wavlm_rel_bucket(j - i, w->num_buckets, w->max_distance);
    ft_tensor *ids = ft_tensor_from_host(ctx, FT_DTYPE_I64, 2, FT_SHAPE(T, T), idx); /* [T, T] */
    free(idx);
    ft_tensor *e = ft_embedding(ctx, w->layer[0].rel_embed, ids);             /* [T, T, H] */
    return ft_contiguous(ctx, ft_permute(ctx, e, (const int[]){2, 0, 1}));    /* [H, T, T] */
}

/* Self-attention with the gated relative bias; x [B, T, D] is the attention input. */
static ft_tensor *attention(ft_ctx *ctx, const wavlm *w, const wavlm_layer *l, ft_tensor *x,
                            ft_tensor *bias0, ft_tensor *key_mask) {
    int64_t B = ft_tensor_dim(x, 0), T = ft_tensor_dim(x, 1), H = w->heads, dh = w->d / H;
    /* gate from the layer input per head: sigmoid of two sums of 4 projections */
    ft_tensor *xh = ft_reshape(ctx, x, 4, FT_SHAPE(B, T, H, dh));
    ft_tensor *z = ft_linear(ctx, xh, l->gru_w, l->gru_b);                 /* [B, T, H, 8] */
    ft_tensor *zs = ft_sum_last(ctx, ft_reshape(ctx, z, 5, FT_SHAPE(B, T, H, 2, 4))); /* [B, T, H, 2, 1] */
    ft_tensor *sg = ft_sigmoid(ctx, zs);
    ft_tensor *ga = ft_select(ctx, sg, 3, 0), *gb = ft_select(ctx, sg, 3, 1); /* [B, T, H, 1] */
    ft_tensor *c = ft_reshape(ctx, l->gru_const, 2, FT_SHAPE(H, 1));
    ft_tensor *gate = ft_scale(ctx, ft_mul(ctx, ga, ft_scale(ctx, ft_mul(ctx, gb, c), 1.0f, -1.0f)), 1.0f, 2.0f);
    gate = ft_permute(ctx, gate, (const int[]){0, 2, 1, 3});             /* [B, H, T, 1] */
    ft_tensor *bias = ft_mul(ctx, gate, bias0);                          /* [B, H, T, T] */

    ft_tensor *q = ft_split_heads(ctx, ft_linear(ctx, x, l->wq, l->bq), H);
    ft_tensor *k = ft_split_heads(ctx, ft_linear(ctx, x, l->wk, l->bk), H);
    ft_tensor *v = ft_split_heads(ctx, ft_linear(ctx, x, l->wv, l->bv), H);
    ft_tensor *scores = ft_matmul(ctx, q, ft_transpose(ctx, k, -1, -2), 1.0f / sqrtf((float)dh));
    ft_tensor *biased = ft_add(ctx, scores, bias); /* the bias is not scaled */
    ft_tensor_release(ctx, scores);
    ft_tensor_release(ctx, bias);
    ft_tensor *probs = ft_softmax(ctx, biased, key_mask, 1.0f);
    ft_tensor_release(ctx, biased);
    ft_tensor *ctxv = ft_matmul(ctx, probs, v, 1.0f); /* [B, H, T, Dh] */
    ft_tensor_release(ctx, probs);
    ctxv = ft_reshape(ctx, ft_permute(ctx, ctxv, (const int[]){0, 2, 1, 3}), 3, FT_SHAPE(B, T, w->d));
    return ft_linear(ctx, ctxv, l->wo, l->bo);
}

static ft_tensor *feed_forward(ft_ctx *ctx, const wavlm *w, const wavlm_layer *l, ft_tensor *x) {
    ft_tensor *f = ft_linear(ctx, x, l->wi, l->bi); /* [B, T, I] */
    ft_tensor *fa = ft_model_act(ctx, w->act, f);
    ft_tensor_release(ctx, f);
    ft_tensor *o = ft_linear(ctx, fa, l->wo2, l->bo2);
    ft_tensor_release(ctx, fa);
    return o;
}

static ft_tensor *encoder_layer(ft_ctx *ctx, const wavlm *w, const wavlm_layer *l, ft_tensor *x,
                                ft_tensor *bias0, ft_tensor *key_mask) {
    if (w->stable) { /* pre-LN: x + attn(LN(x)); x + FFN(LN(x)) */
        ft_tensor *n1 = ft_layernorm(ctx, x, l->ln1_w, l->ln1_b, w->eps);
        ft_tensor *a = ft_add(ctx, x, attention(ctx, w, l, n1, bias0, key_mask));
        ft_tensor_release(ctx, n1);
        ft_tensor *n2 = ft_layernorm(ctx, a, l->ln2_w, l->ln2_b, w->eps);
        ft_tensor *y = ft_add(ctx, a, feed_forward(ctx, w, l, n2));
        ft_tensor_release(ctx, n2);
        ft_tensor_release(ctx, a);
        return y;
    }
    /* post-LN: LN(x + attn(x)); LN(a + FFN(a)) */
    ft_tensor *a = ft_layernorm(ctx, ft_add(ctx, x, attention(ctx, w, l, x, bias0, key_mask)), l->ln1_w,
                                l->ln1_b, w->eps);
    ft_tensor *y = ft_layernorm(ctx, ft_add(ctx, a, feed_forward(ctx, w, l, a)), l->ln2_w, l->ln2_b, w->eps);
    ft_tensor_release(ctx, a);
    return y;
}

static ft_status wavlm_forward(ft_model *m, ft_ctx *ctx) {
    const wavlm *w = (const wavlm *)m->priv;
    ft_tensor *input = ft_model_input(m, "input_values"); /* [B, T] */
    ft_tensor *mask = ft_model_input(m, "attention_mask");
    ft_tensor *feat = ft_audio_features(ctx, &w->fe, input); /* [B, C, T'] */
    if (!feat) return ctx->status;
    int64_t frames = ft_tensor_dim(feat, 2);
    ft_tensor *ef = NULL; /* [B, T', C] */
    ft_tensor *x = ft_audio_project(ctx, &w->fe, feat, &ef); /* [B, T', D] */
    ft_tensor_release(ctx, feat);
    ft_model_add_output(m, "extract_features", ef);
    ft_tensor *key_mask = NULL; /* [B, 1, 1, T'] */
    ft_tensor *h = ft_audio_encoder_input(m, ctx, &w->fe, x, mask, &key_mask);
    if (!h) return ctx->status;
    if (!w->stable) {
        ft_tensor *n = ft_layernorm(ctx, h, w->enc_ln_w, w->enc_ln_b, w->eps);
        ft_tensor_release(ctx, h);
        h = n;
    }
    ft_tensor *bias0 = w->layers > 0 ? position_bias(ctx, w, frames) : NULL; /* [H, T', T'] */
    bool hs = ft_model_want_hidden_states(m);
    char name[48];
    for (int64_t i = 0; i < w->layers; i++) {
        if (hs) {
            snprintf(name, sizeof name, "hidden_states.%lld", (long long)i);
            ft_model_add_output(m, name, h);
        }
        ft_tensor *next = encoder_layer(ctx, w, &w->layer[i], h, bias0, key_mask);
        if (!hs) ft_tensor_release(ctx, h);
        h = next;
    }
    if (w->stable) {
        ft_tensor *n = ft_layernorm(ctx, h, w->enc_ln_w, w->enc_ln_b, w->eps);
        if (!hs) ft_tensor_release(ctx, h);
        h = n;
    }
    if (hs) {
        snprintf(name, sizeof name, "hidden_states.%lld", (long long)w->layers);
        ft_model_add_output(m, name, h);
    }
    ft_model_add_output(m, "last_hidden_state", h);
    return ctx->status;
}

/* Uniform [0, 1) audio, as the paper fed torch.rand; 2 s at 16 kHz by default. */
static ft_status wavlm_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                                      int *n_in, void **owned) {
    return ft_audio_example_inputs(m, &((const wavlm *)m->priv)->fe, batch, length, 32000, in, n_in, owned);
}

static const char *const wavlm_prefixes[] = {"wavlm.", NULL};
static const char *const wavlm_inputs[] = {"input_values", "attention_mask", NULL};

static const ft_preset wavlm_presets[] = {
    {"wavlm-base", "{\"model_type\": \"wavlm\"}"},
    {"wavlm-large", "{\"model_type\": \"wavlm\", \"hidden_size\": 1024, \"num_hidden_layers\": 24,"
                    " \"num_attention_heads\": 16, \"intermediate_size\": 4096,"
                    " \"feat_extract_norm\": \"layer\", \"do_stable_layer_norm\": true, \"conv_bias\": true}"},
    {NULL, NULL},
};

const ft_arch ft_arch_wavlm = {
    .model_type = "wavlm",
    .prefixes = wavlm_prefixes,
    .inputs = wavlm_inputs,
    .load = wavlm_load,
    .validate = wavlm_validate,
    .forward = wavlm_forward,
    .destroy = wavlm_destroy,
    .example_inputs = wavlm_example_inputs,
    .presets = wavlm_presets,
};

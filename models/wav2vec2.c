/*
 * wav2vec2.c - Wav2Vec2Model (and, through hubert.c, HubertModel) as Hugging
 * Face 4.36.2 defines it (tests/golden/README-zoo.md, Wav2Vec2Model): WavLM's
 * audio front end (audio_frontend.c) without the gated relative position bias,
 * then plain multi-head self-attention layers, post-LN (base: LayerNorm after
 * the positional add and after each sublayer) or stable-LN (large: pre-LN
 * layers, the encoder LayerNorm after the last one).
 *
 * HF scales q by Dh^-1/2 after its bias; here the scale rides on the q k^T
 * product (the same number for the power-of-two scale of Dh = 64, within an
 * ulp otherwise), the pattern graph mode's attention fusion recognises.
 *
 * wav2vec2 returns the LayerNormed conv features as extract_features; HuBERT
 * has no such output and its feature-projection LayerNorm is optional
 * (feat_proj_layer_norm).
 */
#include "wav2vec2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ft_status read_config(ft_w2v *w, ft_config *c) {
    double eps = 1e-5;
    ft_status st;
    if ((st = ft_model_act_parse(c, "hidden_act", "gelu", &w->act)) ||
        (st = ft_config_int(c, "hidden_size", 768, &w->d)) ||
        (st = ft_config_int(c, "num_hidden_layers", 12, &w->layers)) ||
        (st = ft_config_int(c, "num_attention_heads", 12, &w->heads)) ||
        (st = ft_config_int(c, "intermediate_size", 3072, &w->inter)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-5, &eps)) ||
        (st = ft_config_bool(c, "do_stable_layer_norm", false, &w->stable)))
        return st;
    w->fe.proj_ln = true;
    if (w->hubert) {
        bool bn = false;
        if ((st = ft_config_bool(c, "feat_proj_layer_norm", true, &w->fe.proj_ln)) ||
            (st = ft_config_bool(c, "conv_pos_batch_norm", false, &bn)))
            return st;
        /* a later transformers option (BatchNorm instead of weight norm in the
         * positional conv) that 4.36.2 does not have */
        if (bn) return ft_config_error(c, "conv_pos_batch_norm true is not supported (transformers 4.36.2 has no "
                                          "such option: the positional conv is weight-normed)");
    } else {
        bool adapter = false;
        if ((st = ft_config_bool(c, "add_adapter", false, &adapter))) return st;
        if (adapter) return ft_config_error(c, "add_adapter true is not supported (no adapter modules)");
        /* HF builds attention adapters into the stable-LN layers only (when not null) */
        if (w->stable && ft_config_has(c, "adapter_attn_dim"))
            return ft_config_error(c, "adapter_attn_dim is not supported with do_stable_layer_norm (no "
                                      "attention adapters); leave it null");
    }
    if (w->d < 1)
        return ft_config_error(c, "hidden_size must be positive, got %lld", (long long)w->d);
    if (w->layers < 0)
        return ft_config_error(c, "num_hidden_layers must not be negative, got %lld", (long long)w->layers);
    if (w->heads < 1)
        return ft_config_error(c, "num_attention_heads must be positive, got %lld", (long long)w->heads);
    if (w->inter < 1)
        return ft_config_error(c, "intermediate_size must be positive, got %lld", (long long)w->inter);
    if (w->d % w->heads)
        return ft_config_error(c, "hidden_size %lld is not a multiple of num_attention_heads %lld",
                               (long long)w->d, (long long)w->heads);
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive, got %g", eps);
    w->eps = (float)eps;
    return ft_audio_frontend_config(&w->fe, c, w->d, w->eps);
}

static ft_status load_weights(ft_model *m, ft_w2v *w, ft_config *cfg) {
    int64_t D = w->d, I = w->inter;
    ft_status st = ft_audio_frontend_load(m, &w->fe, cfg);
    if (st) return st;
    w->enc_ln_w = ft_weight(m, FT_W_SHAPE(D), "encoder.layer_norm.weight");
    w->enc_ln_b = ft_weight(m, FT_W_SHAPE(D), "encoder.layer_norm.bias");
    const char *p = "encoder.layers";
    for (int i = 0; i < (int)w->layers; i++) {
        ft_w2v_layer *l = &w->layer[i];
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

ft_status ft_w2v_load(ft_model *m, ft_config *cfg, bool hubert) {
    ft_w2v *w = (ft_w2v *)calloc(1, sizeof *w);
    if (!w) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = w;
    w->hubert = hubert;
    snprintf(m->arch_name, sizeof m->arch_name, "%s", hubert ? "HubertModel" : "Wav2Vec2Model");
    ft_status st = read_config(w, cfg);
    if (st) return st;
    w->layer = (ft_w2v_layer *)calloc((size_t)(w->layers ? w->layers : 1), sizeof *w->layer);
    if (!w->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    return load_weights(m, w, cfg);
}

void ft_w2v_destroy(ft_model *m) {
    ft_w2v *w = (ft_w2v *)m->priv;
    if (w) free(w->layer);
    free(w);
    m->priv = NULL;
}

ft_status ft_w2v_validate(ft_model *m) { return ft_audio_validate(m, &((const ft_w2v *)m->priv)->fe); }

/* ---- forward ---- */

/* Plain multi-head self-attention of x [B, T, D] with the additive key mask (or NULL). */
static ft_tensor *attention(ft_ctx *ctx, const ft_w2v *w, const ft_w2v_layer *l, ft_tensor *x,
                            ft_tensor *key_mask) {
    int64_t B = ft_tensor_dim(x, 0), T = ft_tensor_dim(x, 1), H = w->heads, dh = w->d / H;
    float scale = (float)pow((double)dh, -0.5); /* HF's head_dim ** -0.5, rounded to f32 */
    ft_tensor *q = ft_split_heads(ctx, ft_linear(ctx, x, l->wq, l->bq), H); /* [B, H, T, Dh] */
    ft_tensor *k = ft_split_heads(ctx, ft_linear(ctx, x, l->wk, l->bk), H);
    ft_tensor *v = ft_split_heads(ctx, ft_linear(ctx, x, l->wv, l->bv), H);
    ft_tensor *scores = ft_matmul(ctx, q, ft_transpose(ctx, k, -1, -2), scale); /* [B, H, T, T] */
    ft_tensor *probs = ft_softmax(ctx, scores, key_mask, 1.0f);
    ft_tensor_release(ctx, scores);
    ft_tensor *ctxv = ft_matmul(ctx, probs, v, 1.0f); /* [B, H, T, Dh] */
    ft_tensor_release(ctx, probs);
    ctxv = ft_reshape(ctx, ft_permute(ctx, ctxv, (const int[]){0, 2, 1, 3}), 3, FT_SHAPE(B, T, w->d));
    return ft_linear(ctx, ctxv, l->wo, l->bo);
}

static ft_tensor *feed_forward(ft_ctx *ctx, const ft_w2v *w, const ft_w2v_layer *l, ft_tensor *x) {
    ft_tensor *f = ft_linear(ctx, x, l->wi, l->bi); /* [B, T, I] */
    ft_tensor *fa = ft_model_act(ctx, w->act, f);
    ft_tensor_release(ctx, f);
    ft_tensor *o = ft_linear(ctx, fa, l->wo2, l->bo2);
    ft_tensor_release(ctx, fa);
    return o;
}

static ft_tensor *encoder_layer(ft_ctx *ctx, const ft_w2v *w, const ft_w2v_layer *l, ft_tensor *x,
                                ft_tensor *key_mask) {
    if (w->stable) { /* pre-LN: x + attn(LN(x)); a + FFN(final_LN(a)) */
        ft_tensor *n1 = ft_layernorm(ctx, x, l->ln1_w, l->ln1_b, w->eps);
        ft_tensor *a = ft_add(ctx, x, attention(ctx, w, l, n1, key_mask));
        ft_tensor_release(ctx, n1);
        ft_tensor *n2 = ft_layernorm(ctx, a, l->ln2_w, l->ln2_b, w->eps);
        ft_tensor *y = ft_add(ctx, a, feed_forward(ctx, w, l, n2));
        ft_tensor_release(ctx, n2);
        ft_tensor_release(ctx, a);
        return y;
    }
    /* post-LN: LN(x + attn(x)); final_LN(a + FFN(a)) */
    ft_tensor *a = ft_layernorm(ctx, ft_add(ctx, x, attention(ctx, w, l, x, key_mask)), l->ln1_w, l->ln1_b, w->eps);
    ft_tensor *y = ft_layernorm(ctx, ft_add(ctx, a, feed_forward(ctx, w, l, a)), l->ln2_w, l->ln2_b, w->eps);
    ft_tensor_release(ctx, a);
    return y;
}

ft_status ft_w2v_forward(ft_model *m, ft_ctx *ctx) {
    const ft_w2v *w = (const ft_w2v *)m->priv;
    ft_tensor *input = ft_model_input(m, "input_values"); /* [B, T] */
    ft_tensor *mask = ft_model_input(m, "attention_mask"); /* [B, T] or NULL */
    ft_tensor *feat = ft_audio_features(ctx, &w->fe, input); /* [B, C, T'] */
    if (!feat) return ctx->status;
    ft_tensor *ef = NULL; /* [B, T', C] */
    ft_tensor *x = ft_audio_project(ctx, &w->fe, feat, &ef); /* [B, T', D] */
    ft_tensor_release(ctx, feat);
    if (!w->hubert) ft_model_add_output(m, "extract_features", ef);
    ft_tensor *key_mask = NULL; /* [B, 1, 1, T'] */
    ft_tensor *h = ft_audio_encoder_input(m, ctx, &w->fe, x, mask, &key_mask); /* x + pos */
    if (!h) return ctx->status;
    if (!w->stable) {
        ft_tensor *n = ft_layernorm(ctx, h, w->enc_ln_w, w->enc_ln_b, w->eps);
        ft_tensor_release(ctx, h);
        h = n;
    }
    /* hidden_states: each layer's input, then the encoder output (stable: after its LN) */
    bool hs = ft_model_want_hidden_states(m);
    for (int64_t i = 0; i < w->layers; i++) {
        ft_model_add_hidden_state(m, i, h);
        ft_tensor *next = encoder_layer(ctx, w, &w->layer[i], h, key_mask);
        if (!hs) ft_tensor_release(ctx, h);
        h = next;
    }
    if (w->stable) {
        ft_tensor *n = ft_layernorm(ctx, h, w->enc_ln_w, w->enc_ln_b, w->eps);
        if (!hs) ft_tensor_release(ctx, h);
        h = n;
    }
    ft_model_add_hidden_state(m, w->layers, h);
    ft_model_add_output(m, "last_hidden_state", h);
    return ctx->status;
}

ft_status ft_w2v_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in, int *n_in,
                                void **owned) {
    return ft_audio_example_inputs(m, &((const ft_w2v *)m->priv)->fe, batch, length, 16000, in, n_in, owned);
}

static const char *const w2v_prefixes[] = {"wav2vec2.", NULL};
static const char *const w2v_inputs[] = {"input_values", "attention_mask", NULL};

static ft_status w2v_load(ft_model *m, ft_config *cfg) { return ft_w2v_load(m, cfg, false); }

/* facebook/wav2vec2-base (the class defaults) and the large-lv60 layout */
static const ft_preset w2v_presets[] = {
    {"wav2vec2-base", "{\"model_type\": \"wav2vec2\"}"},
    {"wav2vec2-large-lv60", "{\"model_type\": \"wav2vec2\", \"hidden_size\": 1024, \"num_hidden_layers\": 24,"
                            " \"num_attention_heads\": 16, \"intermediate_size\": 4096,"
                            " \"feat_extract_norm\": \"layer\", \"do_stable_layer_norm\": true,"
                            " \"conv_bias\": true}"},
    {NULL, NULL},
};

const ft_arch ft_arch_wav2vec2 = {
    .model_type = "wav2vec2",
    .prefixes = w2v_prefixes,
    .inputs = w2v_inputs,
    .load = w2v_load,
    .validate = ft_w2v_validate,
    .forward = ft_w2v_forward,
    .destroy = ft_w2v_destroy,
    .example_inputs = ft_w2v_example_inputs,
    .presets = w2v_presets,
};

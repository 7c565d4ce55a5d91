/*
 * squeezebert.c - SqueezeBertModel as Hugging Face transformers 4.36.2 defines it
 * (tests/golden/README-zoo.md, SqueezeBertModel).
 *
 * BERT's embeddings and attention, but every projection (q, k, v, the attention
 * output, both FFN layers) is a grouped 1x1 Conv1d over channels-first [B, C, S]
 * activations. A 1x1 convolution is a per-position linear map over channels, so
 * this file keeps activations channels last, [B, S, C] like BERT, and runs each
 * projection as a grouped linear (ft_linear_grouped: one GEMM per group, output
 * group g reading input channels g C/groups ...; groups 1 is a plain linear).
 * Heads are contiguous channel blocks, as in BERT; HF's q k product over its
 * [B, N, Dh, S] key layout is the same q k^T. Both encoder LayerNorms are over
 * channels with eps 1e-12 whatever the config says (only the embedding
 * LayerNorm reads layer_norm_eps). Checkpoint weights are [Cout, Cin/groups, 1]
 * and are held as [Cout, Cin/groups] (the same memory).
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sq_layer {
    ft_tensor *wq, *bq, *wk, *bk, *wv, *bv; /* [C, C/g], [C] */
    ft_tensor *wpost, *bpost;                /* [C, C/post_g] */
    ft_tensor *ln1_w, *ln1_b;
    ft_tensor *wi, *bi;                      /* [I, C/inter_g] */
    ft_tensor *wo, *bo;                      /* [C, I/out_g] */
    ft_tensor *ln2_w, *ln2_b;
} sq_layer;

typedef struct squeezebert {
    int64_t vocab, d, layers, heads, inter, max_pos, type_vocab;
    int64_t gq, gk, gv, gpost, ginter, gout;
    float eps; /* embedding LayerNorm only */
    ft_act_kind act;
    ft_tensor *word, *pos, *type, *emb_ln_w, *emb_ln_b;
    sq_layer *layer;
    ft_tensor *pool_w, *pool_b; /* NULL when the checkpoint has no pooler */
} squeezebert;

/* HF builds the two encoder LayerNorms with SqueezeBertLayerNorm's default eps. */
#define SQ_ENCODER_LN_EPS 1e-12f

static ft_status need_groups(ft_config *c, const char *key, int64_t g, int64_t cin, int64_t cout) {
    if (g < 1) return ft_config_error(c, "%s must be at least 1, got %lld", key, (long long)g);
    if (cin % g || cout % g)
        return ft_config_error(c, "%s %lld does not divide the convolution's %lld input and %lld output channels",
                               key, (long long)g, (long long)cin, (long long)cout);
    return FT_OK;
}

static ft_status read_config(squeezebert *s, ft_config *c) {
    ft_status st;
    double eps = 1e-12;
    int64_t emb = 0;
    if ((st = ft_config_int(c, "vocab_size", 30522, &s->vocab)) ||
        (st = ft_config_int(c, "hidden_size", 768, &s->d)) ||
        (st = ft_config_int(c, "embedding_size", s->d, &emb)) ||
        (st = ft_config_int(c, "num_hidden_layers", 12, &s->layers)) ||
        (st = ft_config_int(c, "num_attention_heads", 12, &s->heads)) ||
        (st = ft_config_int(c, "intermediate_size", 3072, &s->inter)) ||
        (st = ft_config_int(c, "max_position_embeddings", 512, &s->max_pos)) ||
        (st = ft_config_int(c, "type_vocab_size", 2, &s->type_vocab)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-12, &eps)) ||
        (st = ft_config_int(c, "q_groups", 4, &s->gq)) || (st = ft_config_int(c, "k_groups", 4, &s->gk)) ||
        (st = ft_config_int(c, "v_groups", 4, &s->gv)) ||
        (st = ft_config_int(c, "post_attention_groups", 1, &s->gpost)) ||
        (st = ft_config_int(c, "intermediate_groups", 4, &s->ginter)) ||
        (st = ft_config_int(c, "output_groups", 4, &s->gout)) ||
        (st = ft_model_act_parse(c, "hidden_act", "gelu", &s->act)))
        return st;
    if (s->vocab < 1 || s->d < 1 || s->layers < 0 || s->heads < 1 || s->inter < 1 || s->max_pos < 1 ||
        s->type_vocab < 1)
        return ft_config_error(c, "sizes must be positive (vocab_size %lld, hidden_size %lld, num_hidden_layers "
                                  "%lld, num_attention_heads %lld, intermediate_size %lld, type_vocab_size %lld)",
                               (long long)s->vocab, (long long)s->d, (long long)s->layers, (long long)s->heads,
                               (long long)s->inter, (long long)s->type_vocab);
    if (emb != s->d)
        return ft_config_error(c, "embedding_size %lld differs from hidden_size %lld (SqueezeBERT needs them equal)",
                               (long long)emb, (long long)s->d);
    if (s->d % s->heads)
        return ft_config_error(c, "hidden_size %lld is not a multiple of num_attention_heads %lld",
                               (long long)s->d, (long long)s->heads);
    if ((st = need_groups(c, "q_groups", s->gq, s->d, s->d)) || (st = need_groups(c, "k_groups", s->gk, s->d, s->d)) ||
        (st = need_groups(c, "v_groups", s->gv, s->d, s->d)) ||
        (st = need_groups(c, "post_attention_groups", s->gpost, s->d, s->d)) ||
        (st = need_groups(c, "intermediate_groups", s->ginter, s->d, s->inter)) ||
        (st = need_groups(c, "output_groups", s->gout, s->inter, s->d)))
        return st;
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive");
    s->eps = (float)eps;
    return FT_OK;
}

/* A Conv1d(cin, cout, 1, groups) weight [cout, cin/groups, 1], held as [cout, cin/groups]. */
static ft_tensor *conv_weight(ft_model *m, int64_t cout, int64_t cin, int64_t groups, const char *name) {
    ft_tensor *w = ft_weight(m, FT_W_SHAPE(cout, cin / groups, 1), "%s", name);
    if (w) {
        w->ndim = 2;
        ft_tensor_set_contiguous_strides(w);
    }
    return w;
}

static ft_status load_weights(ft_model *m, squeezebert *s) {
    int64_t D = s->d, I = s->inter;
    s->word = ft_weight(m, FT_W_SHAPE(s->vocab, D), "embeddings.word_embeddings.weight");
    s->pos = ft_weight(m, FT_W_SHAPE(s->max_pos, D), "embeddings.position_embeddings.weight");
    s->type = ft_weight(m, FT_W_SHAPE(s->type_vocab, D), "embeddings.token_type_embeddings.weight");
    s->emb_ln_w = ft_weight(m, FT_W_SHAPE(D), "embeddings.LayerNorm.weight");
    s->emb_ln_b = ft_weight(m, FT_W_SHAPE(D), "embeddings.LayerNorm.bias");
    for (int64_t i = 0; i < s->layers && m->ctx->status == FT_OK; i++) {
        sq_layer *l = &s->layer[i];
        char n[160];
#define SQ_NAME(fmt) (snprintf(n, sizeof n, "encoder.layers.%d." fmt, (int)i), n)
        l->wq = conv_weight(m, D, D, s->gq, SQ_NAME("attention.query.weight"));
        l->bq = ft_weight(m, FT_W_SHAPE(D), "%s", SQ_NAME("attention.query.bias"));
        l->wk = conv_weight(m, D, D, s->gk, SQ_NAME("attention.key.weight"));
        l->bk = ft_weight(m, FT_W_SHAPE(D), "%s", SQ_NAME("attention.key.bias"));
        l->wv = conv_weight(m, D, D, s->gv, SQ_NAME("attention.value.weight"));
        l->bv = ft_weight(m, FT_W_SHAPE(D), "%s", SQ_NAME("attention.value.bias"));
        l->wpost = conv_weight(m, D, D, s->gpost, SQ_NAME("post_attention.conv1d.weight"));
        l->bpost = ft_weight(m, FT_W_SHAPE(D), "%s", SQ_NAME("post_attention.conv1d.bias"));
        l->ln1_w = ft_weight(m, FT_W_SHAPE(D), "%s", SQ_NAME("post_attention.layernorm.weight"));
        l->ln1_b = ft_weight(m, FT_W_SHAPE(D), "%s", SQ_NAME("post_attention.layernorm.bias"));
        l->wi = conv_weight(m, I, D, s->ginter, SQ_NAME("intermediate.conv1d.weight"));
        l->bi = ft_weight(m, FT_W_SHAPE(I), "%s", SQ_NAME("intermediate.conv1d.bias"));
        l->wo = conv_weight(m, D, I, s->gout, SQ_NAME("output.conv1d.weight"));
        l->bo = ft_weight(m, FT_W_SHAPE(D), "%s", SQ_NAME("output.conv1d.bias"));
        l->ln2_w = ft_weight(m, FT_W_SHAPE(D), "%s", SQ_NAME("output.layernorm.weight"));
        l->ln2_b = ft_weight(m, FT_W_SHAPE(D), "%s", SQ_NAME("output.layernorm.bias"));
#undef SQ_NAME
        /* q, k, v back to back when they have one shape: graph mode's QKV merge then
         * stacks them without a copy (a no-op in eager mode) */
        if (s->gq == s->gk && s->gq == s->gv) {
            ft_weights_pack(m, (ft_tensor *[]){l->wq, l->wk, l->wv}, 3);
            ft_weights_pack(m, (ft_tensor *[]){l->bq, l->bk, l->bv}, 3);
        }
    }
    /* a checkpoint without the pooler (a task model built without it) has no pooler_output */
    if (m->ctx->status == FT_OK && (!m->st || ft_weight_exists(m, "pooler.dense.weight"))) {
        s->pool_w = ft_weight(m, FT_W_SHAPE(D, D), "pooler.dense.weight");
        s->pool_b = ft_weight(m, FT_W_SHAPE(D), "pooler.dense.bias");
    }
    return m->ctx->status;
}

static ft_status sq_load(ft_model *m, ft_config *cfg) {
    squeezebert *s = (squeezebert *)calloc(1, sizeof *s);
    if (!s) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = s;
    snprintf(m->arch_name, sizeof m->arch_name, "SqueezeBertModel");
    ft_status st = read_config(s, cfg);
    if (st) return st;
    s->layer = (sq_layer *)calloc((size_t)(s->layers ? s->layers : 1), sizeof *s->layer);
    if (!s->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    return load_weights(m, s);
}

static void sq_destroy(ft_model *m) {
    squeezebert *s = (squeezebert *)m->priv;
    if (s) free(s->layer);
    free(s);
    m->priv = NULL;
}

static ft_status sq_validate(ft_model *m) {
    const squeezebert *s = (const squeezebert *)m->priv;
    ft_status st = ft_validate_text_inputs(m, s->max_pos, s->vocab, s->type_vocab);
    return st ? st : ft_check_mask_values(m, "attention_mask", FT_F32_MIN);
}

static ft_tensor *sq_layer_forward(ft_ctx *ctx, const squeezebert *s, const sq_layer *l, ft_tensor *h,
                                   ft_tensor *mask) {
    int64_t dh = s->d / s->heads;
    ft_tensor *q = ft_split_heads(ctx, ft_linear_grouped(ctx, h, l->wq, l->bq, (int)s->gq), s->heads);
    ft_tensor *k = ft_split_heads(ctx, ft_linear_grouped(ctx, h, l->wk, l->bk, (int)s->gk), s->heads);
    ft_tensor *v = ft_split_heads(ctx, ft_linear_grouped(ctx, h, l->wv, l->bv, (int)s->gv), s->heads);
    ft_tensor *scores = ft_matmul(ctx, q, ft_transpose(ctx, k, -1, -2), 1.0f); /* [B, N, S, S] */
    ft_tensor *probs = ft_softmax(ctx, scores, mask, 1.0f / sqrtf((float)dh));
    ft_tensor_release(ctx, scores);
    ft_tensor *c = ft_matmul(ctx, probs, v, 1.0f); /* [B, N, S, Dh] */
    ft_tensor_release(ctx, probs);
    c = ft_permute(ctx, c, (const int[]){0, 2, 1, 3});
    c = ft_reshape(ctx, c, 3, FT_SHAPE(ft_tensor_dim(h, 0), ft_tensor_dim(h, 1), s->d)); /* [B, S, C] */
    ft_tensor *p = ft_layernorm(ctx, ft_add(ctx, ft_linear_grouped(ctx, c, l->wpost, l->bpost, (int)s->gpost), h),
                                l->ln1_w, l->ln1_b, SQ_ENCODER_LN_EPS);
    ft_tensor *f = ft_linear_grouped(ctx, p, l->wi, l->bi, (int)s->ginter); /* [B, S, I] */
    ft_tensor *fa = ft_model_act(ctx, s->act, f);
    ft_tensor_release(ctx, f);
    ft_tensor *o = ft_add(ctx, ft_linear_grouped(ctx, fa, l->wo, l->bo, (int)s->gout), p);
    ft_tensor_release(ctx, fa);
    return ft_layernorm(ctx, o, l->ln2_w, l->ln2_b, SQ_ENCODER_LN_EPS);
}

static ft_status sq_forward(ft_model *m, ft_ctx *ctx) {
    const squeezebert *s = (const squeezebert *)m->priv;
    ft_tensor *ids = ft_model_input(m, "input_ids");
    ft_tensor *tt = ft_model_input(m, "token_type_ids");
    int64_t S = ft_tensor_dim(ids, 1);
    ft_tensor *e = ft_embedding(ctx, s->word, ids); /* [B, S, C] */
    e = ft_add(ctx, e, ft_slice(ctx, s->pos, 0, 0, S));
    /* absent token types are all zeros: row 0, broadcast */
    e = ft_add(ctx, e, tt ? ft_embedding(ctx, s->type, tt) : ft_slice(ctx, s->type, 0, 0, 1));
    ft_tensor *h = ft_layernorm(ctx, e, s->emb_ln_w, s->emb_ln_b, s->eps);
    ft_tensor *mask = ft_additive_mask(ctx, ft_model_input(m, "attention_mask"), FT_F32_MIN);
    bool hs = ft_model_want_hidden_states(m);
    ft_model_add_hidden_state(m, 0, h);
    for (int64_t i = 0; i < s->layers; i++) {
        ft_tensor *next = sq_layer_forward(ctx, s, &s->layer[i], h, mask);
        ft_model_add_hidden_state(m, i + 1, next);
        if (!hs) ft_tensor_release(ctx, h); /* an output stays alive */
        h = next;
    }
    ft_model_add_output(m, "last_hidden_state", h);
    if (s->pool_w) {
        ft_tensor *first = ft_select(ctx, h, 1, 0); /* [B, C] */
        ft_model_add_output(m, "pooler_output", ft_tanh(ctx, ft_linear(ctx, first, s->pool_w, s->pool_b)));
    }
    return ctx->status;
}

static ft_status sq_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in, int *n_in,
                                   void **owned) {
    const squeezebert *s = (const squeezebert *)m->priv;
    if (length > s->max_pos) /* before allocating length x batch ids */
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "sequence length %lld exceeds max_position_embeddings %lld",
                            (long long)length, (long long)s->max_pos);
    return ft_example_text_inputs(m, batch, length, s->vocab, in, n_in, owned);
}

static const char *const sq_prefixes[] = {"transformer.", NULL};
static const char *const sq_inputs[] = {"input_ids", "attention_mask", "token_type_ids", NULL};

/* squeezebert/squeezebert-uncased (its Hub config: vocab 30528, the class defaults otherwise);
 * squeezebert-mnli and -mnli-headless share the encoder's shape */
static const ft_preset sq_presets[] = {
    {"squeezebert-uncased", "{\"model_type\": \"squeezebert\", \"vocab_size\": 30528}"},
    {NULL, NULL},
};

const ft_arch ft_arch_squeezebert = {
    .model_type = "squeezebert",
    .prefixes = sq_prefixes,
    .inputs = sq_inputs,
    .load = sq_load,
    .validate = sq_validate,
    .forward = sq_forward,
    .destroy = sq_destroy,
    .example_inputs = sq_example_inputs,
    .presets = sq_presets,
};

/*
 * bert.c - BertModel and DistilBertModel, as Hugging Face defines them
 * (tests/golden/README.md, BertModel; docs/models.md).
 *
 * Both are the same post-LN encoder: embeddings (+ LayerNorm), then per layer
 * self-attention -> dense -> add & LayerNorm -> FFN -> add & LayerNorm. They
 * differ in parameter names, config field names, token-type embeddings (BERT
 * only), the pooler (BERT only) and DistilBERT's fixed LayerNorm eps 1e-12.
 * DistilBERT scales q by 1/sqrt(d) before q k^T and BERT scales the scores;
 * for d a power of four the two are the same floating-point numbers.
 *
 * The layer itself (bert.h) is shared with RoBERTa and ALBERT.
 */
#include "bert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bert {
    bool distil;
    int64_t vocab, d, layers, heads, inter, max_pos, type_vocab;
    float eps;
    ft_act_kind act;
    ft_tensor *word, *pos, *type; /* [V, D], [P, D], [T, D] (type: BERT only) */
    ft_tensor *emb_ln_w, *emb_ln_b;
    ft_bert_layer *layer;
    ft_tensor *pool_w, *pool_b; /* BERT pooler [D, D], [D]; NULL if absent */
} bert;

static ft_status read_config(bert *b, ft_config *c) {
    ft_status st;
    double eps = 1e-12;
    if (b->distil) {
        if ((st = ft_config_int(c, "vocab_size", 30522, &b->vocab)) ||
            (st = ft_config_int(c, "dim|hidden_size", 768, &b->d)) ||
            (st = ft_config_int(c, "n_layers|num_hidden_layers", 6, &b->layers)) ||
            (st = ft_config_int(c, "n_heads|num_attention_heads", 12, &b->heads)) ||
            (st = ft_config_int(c, "hidden_dim|intermediate_size", 3072, &b->inter)) ||
            (st = ft_config_int(c, "max_position_embeddings", 512, &b->max_pos)) ||
            (st = ft_model_act_parse(c, "activation", "gelu", &b->act)))
            return st;
        b->type_vocab = 0;
    } else {
        const char *pet = NULL;
        if ((st = ft_config_int(c, "vocab_size", 30522, &b->vocab)) ||
            (st = ft_config_int(c, "hidden_size", 768, &b->d)) ||
            (st = ft_config_int(c, "num_hidden_layers", 12, &b->layers)) ||
            (st = ft_config_int(c, "num_attention_heads", 12, &b->heads)) ||
            (st = ft_config_int(c, "intermediate_size", 3072, &b->inter)) ||
            (st = ft_config_int(c, "max_position_embeddings", 512, &b->max_pos)) ||
            (st = ft_config_int(c, "type_vocab_size", 2, &b->type_vocab)) ||
            (st = ft_config_float(c, "layer_norm_eps", 1e-12, &eps)) ||
            (st = ft_config_string(c, "position_embedding_type", "absolute", &pet)) ||
            (st = ft_model_act_parse(c, "hidden_act", "gelu", &b->act)))
            return st;
        if (strcmp(pet, "absolute"))
            return ft_config_error(c, "position_embedding_type '%s' is not supported (absolute only)", pet);
        bool dec = false, cross = false;
        if ((st = ft_config_bool(c, "is_decoder", false, &dec)) ||
            (st = ft_config_bool(c, "add_cross_attention", false, &cross)))
            return st;
        if (dec || cross) return ft_config_error(c, "decoder BERT configurations are not supported");
    }
    b->eps = (float)eps;
    if (b->vocab < 1 || b->d < 1 || b->layers < 0 || b->heads < 1 || b->inter < 1 || b->max_pos < 1 ||
        b->type_vocab < 0)
        return ft_config_error(c, "sizes must be positive (vocab %lld, hidden %lld, layers %lld, heads %lld)",
                               (long long)b->vocab, (long long)b->d, (long long)b->layers,
                               (long long)b->heads);
    if (b->d % b->heads)
        return ft_config_error(c, "%s %lld is not a multiple of %s %lld", b->distil ? "dim" : "hidden_size",
                               (long long)b->d, b->distil ? "n_heads" : "num_attention_heads", (long long)b->heads);
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive");
    return FT_OK;
}

static const ft_bert_layer_names bert_names = {
    "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
    "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"};
static const ft_bert_layer_names distil_names = {
    "attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
    "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm"};

ft_status ft_bert_layer_load(ft_model *m, ft_bert_layer *l, const char *prefix, const ft_bert_layer_names names,
                             int64_t D, int64_t I) {
    const char *p = prefix;
    l->wq = ft_weight(m, FT_W_SHAPE(D, D), "%s.%s.weight", p, names[0]);
    l->bq = ft_weight(m, FT_W_SHAPE(D), "%s.%s.bias", p, names[0]);
    l->wk = ft_weight(m, FT_W_SHAPE(D, D), "%s.%s.weight", p, names[1]);
    l->bk = ft_weight(m, FT_W_SHAPE(D), "%s.%s.bias", p, names[1]);
    l->wv = ft_weight(m, FT_W_SHAPE(D, D), "%s.%s.weight", p, names[2]);
    l->bv = ft_weight(m, FT_W_SHAPE(D), "%s.%s.bias", p, names[2]);
    l->wo = ft_weight(m, FT_W_SHAPE(D, D), "%s.%s.weight", p, names[3]);
    l->bo = ft_weight(m, FT_W_SHAPE(D), "%s.%s.bias", p, names[3]);
    l->ln1_w = ft_weight(m, FT_W_SHAPE(D), "%s.%s.weight", p, names[4]);
    l->ln1_b = ft_weight(m, FT_W_SHAPE(D), "%s.%s.bias", p, names[4]);
    l->wi = ft_weight(m, FT_W_SHAPE(I, D), "%s.%s.weight", p, names[5]);
    l->bi = ft_weight(m, FT_W_SHAPE(I), "%s.%s.bias", p, names[5]);
    l->wo2 = ft_weight(m, FT_W_SHAPE(D, I), "%s.%s.weight", p, names[6]);
    l->bo2 = ft_weight(m, FT_W_SHAPE(D), "%s.%s.bias", p, names[6]);
    l->ln2_w = ft_weight(m, FT_W_SHAPE(D), "%s.%s.weight", p, names[7]);
    l->ln2_b = ft_weight(m, FT_W_SHAPE(D), "%s.%s.bias", p, names[7]);
    ft_weights_pack(m, (ft_tensor *[]){l->wq, l->wk, l->wv}, 3);
    ft_weights_pack(m, (ft_tensor *[]){l->bq, l->bk, l->bv}, 3);
    return m->ctx->status;
}

static ft_status load_weights(ft_model *m, bert *b) {
    int64_t D = b->d, I = b->inter;
    b->word = ft_weight(m, FT_W_SHAPE(b->vocab, D), "embeddings.word_embeddings.weight");
    b->pos = ft_weight(m, FT_W_SHAPE(b->max_pos, D), "embeddings.position_embeddings.weight");
    if (!b->distil)
        b->type = ft_weight(m, FT_W_SHAPE(b->type_vocab, D), "embeddings.token_type_embeddings.weight");
    b->emb_ln_w = ft_weight(m, FT_W_SHAPE(D), "embeddings.LayerNorm.weight");
    b->emb_ln_b = ft_weight(m, FT_W_SHAPE(D), "embeddings.LayerNorm.bias");
    for (int64_t i = 0; i < b->layers; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s.%d", b->distil ? "transformer.layer" : "encoder.layer", (int)i);
        if (ft_bert_layer_load(m, &b->layer[i], prefix, b->distil ? distil_names : bert_names, D, I))
            return m->ctx->status;
    }
    /* A checkpoint saved without the pooler (HF add_pooling_layer=False, or a token
     * classification model) simply has no pooler_output. */
    if (!b->distil && (!m->st || ft_weight_exists(m, "pooler.dense.weight"))) {
        b->pool_w = ft_weight(m, FT_W_SHAPE(D, D), "pooler.dense.weight");
        b->pool_b = ft_weight(m, FT_W_SHAPE(D), "pooler.dense.bias");
    }
    return m->ctx->status;
}

static ft_status bert_load_common(ft_model *m, ft_config *cfg, bool distil) {
    bert *b = (bert *)calloc(1, sizeof *b);
    if (!b) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = b;
    b->distil = distil;
    snprintf(m->arch_name, sizeof m->arch_name, "%s", distil ? "DistilBertModel" : "BertModel");
    ft_status st = read_config(b, cfg);
    if (st) return st;
    b->layer = (ft_bert_layer *)calloc((size_t)(b->layers ? b->layers : 1), sizeof *b->layer);
    if (!b->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    return load_weights(m, b);
}

static ft_status bert_load(ft_model *m, ft_config *cfg) { return bert_load_common(m, cfg, false); }
static ft_status distilbert_load(ft_model *m, ft_config *cfg) { return bert_load_common(m, cfg, true); }

static void bert_destroy(ft_model *m) {
    bert *b = (bert *)m->priv;
    if (b) free(b->layer);
    free(b);
    m->priv = NULL;
}

static ft_status bert_validate(ft_model *m) {
    const bert *b = (const bert *)m->priv;
    ft_status st = ft_validate_text_inputs(m, b->max_pos, b->vocab, b->type_vocab);
    return st ? st : ft_check_mask_values(m, "attention_mask", FT_F32_MIN);
}

ft_tensor *ft_bert_layer_forward(ft_ctx *ctx, const ft_bert_layer *l, ft_tensor *h, ft_tensor *mask,
                                 int64_t heads, float eps, ft_act_kind act) {
    int64_t d = ft_tensor_dim(h, 2), dh = d / heads;
    ft_tensor *q = ft_split_heads(ctx, ft_linear(ctx, h, l->wq, l->bq), heads);
    ft_tensor *k = ft_split_heads(ctx, ft_linear(ctx, h, l->wk, l->bk), heads);
    ft_tensor *v = ft_split_heads(ctx, ft_linear(ctx, h, l->wv, l->bv), heads);
    ft_tensor *scores = ft_matmul(ctx, q, ft_transpose(ctx, k, -1, -2), 1.0f); /* [B, H, S, S] */
    ft_tensor *probs = ft_softmax(ctx, scores, mask, 1.0f / sqrtf((float)dh));
    ft_tensor_release(ctx, scores);
    ft_tensor *c = ft_matmul(ctx, probs, v, 1.0f); /* [B, H, S, Dh] */
    ft_tensor_release(ctx, probs);
    c = ft_permute(ctx, c, (const int[]){0, 2, 1, 3});
    c = ft_reshape(ctx, c, 3, FT_SHAPE(ft_tensor_dim(h, 0), ft_tensor_dim(h, 1), d)); /* [B, S, D] */
    ft_tensor *a = ft_layernorm(ctx, ft_add(ctx, ft_linear(ctx, c, l->wo, l->bo), h), l->ln1_w, l->ln1_b, eps);
    ft_tensor *f = ft_linear(ctx, a, l->wi, l->bi); /* [B, S, I] */
    ft_tensor *fa = ft_model_act(ctx, act, f);
    ft_tensor_release(ctx, f);
    ft_tensor *o = ft_add(ctx, ft_linear(ctx, fa, l->wo2, l->bo2), a);
    ft_tensor_release(ctx, fa);
    return ft_layernorm(ctx, o, l->ln2_w, l->ln2_b, eps);
}

static ft_status bert_forward(ft_model *m, ft_ctx *ctx) {
    const bert *b = (const bert *)m->priv;
    ft_tensor *ids = ft_model_input(m, "input_ids");
    ft_tensor *tt = ft_model_input(m, "token_type_ids");
    int64_t S = ft_tensor_dim(ids, 1);
    ft_tensor *e = ft_embedding(ctx, b->word, ids); /* [B, S, D] */
    e = ft_add(ctx, e, ft_slice(ctx, b->pos, 0, 0, S));
    if (!b->distil) /* absent token types are all zeros: row 0, broadcast */
        e = ft_add(ctx, e, tt ? ft_embedding(ctx, b->type, tt) : ft_slice(ctx, b->type, 0, 0, 1));
    ft_tensor *h = ft_layernorm(ctx, e, b->emb_ln_w, b->emb_ln_b, b->eps);
    ft_tensor *mask = ft_additive_mask(ctx, ft_model_input(m, "attention_mask"), FT_F32_MIN);
    bool hs = ft_model_want_hidden_states(m);
    ft_model_add_hidden_state(m, 0, h);
    for (int64_t i = 0; i < b->layers; i++) {
        ft_tensor *next = ft_bert_layer_forward(ctx, &b->layer[i], h, mask, b->heads, b->eps, b->act);
        ft_model_add_hidden_state(m, i + 1, next);
        if (!hs) ft_tensor_release(ctx, h); /* an output stays alive */
        h = next;
    }
    ft_model_add_output(m, "last_hidden_state", h);
    if (b->pool_w) {
        ft_tensor *first = ft_select(ctx, h, 1, 0); /* [B, D] */
        ft_model_add_output(m, "pooler_output", ft_tanh(ctx, ft_linear(ctx, first, b->pool_w, b->pool_b)));
    }
    return ctx->status;
}

static ft_status bert_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                    int *n_in, void **owned) {
    const bert *b = (const bert *)m->priv;
    if (b->max_pos > 0 && length > b->max_pos) /* before allocating length x batch ids */
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "sequence length %lld exceeds max_position_embeddings %lld",
                            (long long)length, (long long)b->max_pos);
    return ft_example_text_inputs(m, batch, length, b->vocab, in, n_in, owned);
}

static const char *const bert_prefixes[] = {"bert.", NULL};
static const char *const bert_inputs[] = {"input_ids", "attention_mask", "token_type_ids", NULL};
static const char *const distil_prefixes[] = {"distilbert.", NULL};
static const char *const distil_inputs[] = {"input_ids", "attention_mask", NULL};

/* Google's BERT miniatures (Turc et al.) and the two original sizes. */
static const ft_preset bert_presets[] = {
    {"bert-base", "{\"model_type\": \"bert\"}"},
    {"bert-large", "{\"model_type\": \"bert\", \"hidden_size\": 1024, \"num_hidden_layers\": 24,"
                   " \"num_attention_heads\": 16, \"intermediate_size\": 4096}"},
    {"bert-tiny", "{\"model_type\": \"bert\", \"hidden_size\": 128, \"num_hidden_layers\": 2,"
                  " \"num_attention_heads\": 2, \"intermediate_size\": 512}"},
    {"bert-mini", "{\"model_type\": \"bert\", \"hidden_size\": 256, \"num_hidden_layers\": 4,"
                  " \"num_attention_heads\": 4, \"intermediate_size\": 1024}"},
    {"bert-small", "{\"model_type\": \"bert\", \"hidden_size\": 512, \"num_hidden_layers\": 4,"
                   " \"num_attention_heads\": 8, \"intermediate_size\": 2048}"},
    {"bert-medium", "{\"model_type\": \"bert\", \"hidden_size\": 512, \"num_hidden_layers\": 8,"
                    " \"num_attention_heads\": 8, \"intermediate_size\": 2048}"},
    /* the framework-tax study's width and depth variants of bert-base (docs/report.md):
     * doubled width keeps the head size at 64 (24 heads), depth varies alone */
    {"bert-base-w2", "{\"model_type\": \"bert\", \"hidden_size\": 1536, \"num_attention_heads\": 24,"
                     " \"intermediate_size\": 6144}"},
    {"bert-base-L2", "{\"model_type\": \"bert\", \"num_hidden_layers\": 2}"},
    {"bert-base-L4", "{\"model_type\": \"bert\", \"num_hidden_layers\": 4}"},
    {"bert-base-L8", "{\"model_type\": \"bert\", \"num_hidden_layers\": 8}"},
    {"bert-base-L24", "{\"model_type\": \"bert\", \"num_hidden_layers\": 24}"},
    {NULL, NULL},
};

static const ft_preset distil_presets[] = {
    {"distilbert-base", "{\"model_type\": \"distilbert\"}"},
    {NULL, NULL},
};

const ft_arch ft_arch_bert = {
    .model_type = "bert",
    .prefixes = bert_prefixes,
    .inputs = bert_inputs,
    .load = bert_load,
    .validate = bert_validate,
    .forward = bert_forward,
    .destroy = bert_destroy,
    .example_inputs = bert_example_inputs,
    .presets = bert_presets,
};

const ft_arch ft_arch_distilbert = {
    .model_type = "distilbert",
    .prefixes = distil_prefixes,
    .inputs = distil_inputs,
    .load = distilbert_load,
    .validate = bert_validate,
    .forward = bert_forward,
    .destroy = bert_destroy,
    .example_inputs = bert_example_inputs,
    .presets = distil_presets,
};

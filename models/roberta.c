/*
 * roberta.c - RobertaModel as Hugging Face defines it (tests/golden/README-zoo.md,
 * RobertaModel): BERT's encoder (bert.h) under BERT's names, with RoBERTa's
 * positions and defaults.
 *
 * Positions are counted from the token ids, not from the attention mask: a
 * token that is not pad_token_id gets pad + (its rank among the row's non-pad
 * tokens), every pad token gets pad itself (HF's
 * create_position_ids_from_input_ids). They are computed on the device by the
 * position_ids op, so the forward reads no tensor data on the host; validate()
 * counts them on the host only to refuse rows whose positions would run past
 * the table. Explicit position_ids and token_type_ids are taken as HF takes
 * them; absent token types add row 0 of the (usually one-row) type table.
 * Checkpoints such as roberta-base have no pooler: then there is no
 * pooler_output (HF's would be random).
 */
#include "bert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct roberta {
    int64_t vocab, d, layers, heads, inter, max_pos, type_vocab, pad;
    float eps;
    ft_act_kind act;
    ft_tensor *word, *pos, *type; /* [V, D], [P, D], [T, D] */
    ft_tensor *emb_ln_w, *emb_ln_b;
    ft_bert_layer *layer;
    ft_tensor *pool_w, *pool_b; /* [D, D], [D]; NULL without a pooler */
} roberta;

/* RobertaConfig's class defaults (transformers 4.36); roberta-base overrides
 * max_position_embeddings (514), type_vocab_size (1) and layer_norm_eps (1e-5). */
static ft_status read_config(roberta *r, ft_config *c) {
    ft_status st;
    double eps = 1e-12;
    const char *pet = NULL;
    bool dec = false, cross = false;
    if ((st = ft_config_int(c, "vocab_size", 50265, &r->vocab)) ||
        (st = ft_config_int(c, "hidden_size", 768, &r->d)) ||
        (st = ft_config_int(c, "num_hidden_layers", 12, &r->layers)) ||
        (st = ft_config_int(c, "num_attention_heads", 12, &r->heads)) ||
        (st = ft_config_int(c, "intermediate_size", 3072, &r->inter)) ||
        (st = ft_config_int(c, "max_position_embeddings", 512, &r->max_pos)) ||
        (st = ft_config_int(c, "type_vocab_size", 2, &r->type_vocab)) ||
        (st = ft_config_int(c, "pad_token_id", 1, &r->pad)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-12, &eps)) ||
        (st = ft_config_string(c, "position_embedding_type", "absolute", &pet)) ||
        (st = ft_model_act_parse(c, "hidden_act", "gelu", &r->act)) ||
        (st = ft_config_bool(c, "is_decoder", false, &dec)) ||
        (st = ft_config_bool(c, "add_cross_attention", false, &cross)))
        return st;
    if (strcmp(pet, "absolute"))
        return ft_config_error(c, "position_embedding_type '%s' is not supported (absolute only)", pet);
    if (dec || cross) return ft_config_error(c, "decoder RoBERTa configurations are not supported");
    if (r->vocab < 1 || r->d < 1 || r->layers < 0 || r->heads < 1 || r->inter < 1 || r->max_pos < 1 ||
        r->type_vocab < 1)
        return ft_config_error(c, "sizes must be positive (vocab_size %lld, hidden_size %lld, num_hidden_layers "
                               "%lld, num_attention_heads %lld, intermediate_size %lld, "
                               "max_position_embeddings %lld, type_vocab_size %lld)",
                               (long long)r->vocab, (long long)r->d, (long long)r->layers,
                               (long long)r->heads, (long long)r->inter, (long long)r->max_pos,
                               (long long)r->type_vocab);
    if (r->d % r->heads)
        return ft_config_error(c, "hidden_size %lld is not a multiple of num_attention_heads %lld",
                               (long long)r->d, (long long)r->heads);
    if (r->pad < 0 || r->pad >= r->max_pos || r->pad >= r->vocab)
        return ft_config_error(c, "pad_token_id %lld must index both the word table (vocab_size %lld) and the "
                               "position table (max_position_embeddings %lld)",
                               (long long)r->pad, (long long)r->vocab, (long long)r->max_pos);
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive");
    r->eps = (float)eps;
    return FT_OK;
}

static const ft_bert_layer_names roberta_names = {
    "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
    "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"};

static ft_status load_weights(ft_model *m, roberta *r) {
    int64_t D = r->d;
    r->word = ft_weight(m, FT_W_SHAPE(r->vocab, D), "embeddings.word_embeddings.weight");
    r->pos = ft_weight(m, FT_W_SHAPE(r->max_pos, D), "embeddings.position_embeddings.weight");
    r->type = ft_weight(m, FT_W_SHAPE(r->type_vocab, D), "embeddings.token_type_embeddings.weight");
    r->emb_ln_w = ft_weight(m, FT_W_SHAPE(D), "embeddings.LayerNorm.weight");
    r->emb_ln_b = ft_weight(m, FT_W_SHAPE(D), "embeddings.LayerNorm.bias");
    for (int64_t i = 0; i < r->layers; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "encoder.layer.%d", (int)i);
        if (ft_bert_layer_load(m, &r->layer[i], prefix, roberta_names, D, r->inter)) return m->ctx->status;
    }
    /* roberta-base (RobertaForMaskedLM) has no pooler; a random one would mean nothing */
    if (!m->st || ft_weight_exists(m, "pooler.dense.weight")) {
        r->pool_w = ft_weight(m, FT_W_SHAPE(D, D), "pooler.dense.weight");
        r->pool_b = ft_weight(m, FT_W_SHAPE(D), "pooler.dense.bias");
    }
    return m->ctx->status;
}

static ft_status roberta_load(ft_model *m, ft_config *cfg) {
    roberta *r = (roberta *)calloc(1, sizeof *r);
    if (!r) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = r;
    snprintf(m->arch_name, sizeof m->arch_name, "RobertaModel");
    ft_status st = read_config(r, cfg);
    if (st) return st;
    r->layer = (ft_bert_layer *)calloc((size_t)(r->layers ? r->layers : 1), sizeof *r->layer);
    if (!r->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    return load_weights(m, r);
}

static void roberta_destroy(ft_model *m) {
    roberta *r = (roberta *)m->priv;
    if (r) free(r->layer);
    free(r);
    m->priv = NULL;
}

/* position_ids as HF takes them: [batch, seq] or [1, seq] (broadcast), ids into the table. */
static ft_status check_position_ids(ft_model *m, const ft_host_tensor *ids, int64_t max_pos) {
    const ft_host_tensor *p = ft_model_host_input(m, "position_ids");
    if (!p) return FT_OK;
    if (p->ndim != 2 || (p->shape[0] != ids->shape[0] && p->shape[0] != 1) || p->shape[1] != ids->shape[1])
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "input 'position_ids' must be [%lld, %lld] or [1, %lld]",
                            (long long)ids->shape[0], (long long)ids->shape[1], (long long)ids->shape[1]);
    return ft_check_ids(m, "position_ids", 0, max_pos);
}

static ft_status roberta_validate(ft_model *m) {
    const roberta *r = (const roberta *)m->priv;
    ft_status st = ft_validate_text_inputs(m, 0, r->vocab, r->type_vocab);
    if (st) return st;
    const ft_host_tensor *ids = ft_model_host_input(m, "input_ids");
    if ((st = check_position_ids(m, ids, r->max_pos))) return st;
    if (!ft_model_host_input(m, "position_ids") && ids->data) { /* no data: shapes only (info, MACs) */
        /* the largest position of a row is pad + its count of non-pad tokens */
        for (int64_t b = 0; b < ids->shape[0]; b++) {
            int64_t n = 0;
            for (int64_t s = 0; s < ids->shape[1]; s++) n += ft_host_int_at(ids, b * ids->shape[1] + s) != r->pad;
            if (r->pad + n >= r->max_pos)
                return ft_set_error(m->ctx, FT_ERR_SHAPE,
                                    "input_ids row %lld has %lld tokens other than padding (%lld): RoBERTa "
                                    "positions run from %lld to %lld, past max_position_embeddings %lld "
                                    "(at most %lld such tokens per row)",
                                    (long long)b, (long long)n, (long long)r->pad, (long long)r->pad + 1,
                                    (long long)(r->pad + n), (long long)r->max_pos,
                                    (long long)(r->max_pos - r->pad - 1));
        }
    }
    return ft_check_mask_values(m, "attention_mask", FT_F32_MIN);
}

static ft_status roberta_forward(ft_model *m, ft_ctx *ctx) {
    const roberta *r = (const roberta *)m->priv;
    ft_tensor *ids = ft_model_input(m, "input_ids");
    ft_tensor *tt = ft_model_input(m, "token_type_ids");
    ft_tensor *pid = ft_model_input(m, "position_ids");
    if (!pid) pid = ft_position_ids(ctx, ids, r->pad); /* [B, S] i64 */
    /* HF's order: word + token type, then + position */
    ft_tensor *e = ft_embedding(ctx, r->word, ids); /* [B, S, D] */
    e = ft_add(ctx, e, tt ? ft_embedding(ctx, r->type, tt) : ft_slice(ctx, r->type, 0, 0, 1));
    e = ft_add(ctx, e, ft_embedding(ctx, r->pos, pid)); /* [B or 1, S, D] */
    ft_tensor *h = ft_layernorm(ctx, e, r->emb_ln_w, r->emb_ln_b, r->eps);
    ft_tensor *mask = ft_additive_mask(ctx, ft_model_input(m, "attention_mask"), FT_F32_MIN);
    bool hs = ft_model_want_hidden_states(m);
    ft_model_add_hidden_state(m, 0, h);
    for (int64_t i = 0; i < r->layers; i++) {
        ft_tensor *next = ft_bert_layer_forward(ctx, &r->layer[i], h, mask, r->heads, r->eps, r->act);
        ft_model_add_hidden_state(m, i + 1, next);
        if (!hs) ft_tensor_release(ctx, h);
        h = next;
    }
    ft_model_add_output(m, "last_hidden_state", h);
    if (r->pool_w) {
        ft_tensor *first = ft_select(ctx, h, 1, 0); /* [B, D] */
        ft_model_add_output(m, "pooler_output", ft_tanh(ctx, ft_linear(ctx, first, r->pool_w, r->pool_b)));
    }
    return ctx->status;
}

static ft_status roberta_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                                        int *n_in, void **owned) {
    const roberta *r = (const roberta *)m->priv;
    if (length > r->max_pos - r->pad - 1) /* before allocating length x batch ids */
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "sequence length %lld exceeds the %lld tokens RoBERTa's positions allow "
                            "(max_position_embeddings %lld - pad_token_id %lld - 1)",
                            (long long)length, (long long)(r->max_pos - r->pad - 1), (long long)r->max_pos,
                            (long long)r->pad);
    return ft_example_text_inputs(m, batch, length, r->vocab, in, n_in, owned);
}

static const char *const roberta_prefixes[] = {"roberta.", NULL};
static const char *const roberta_inputs[] = {"input_ids", "attention_mask", "token_type_ids", "position_ids",
                                             NULL};

static const ft_preset roberta_presets[] = {
    {"roberta-base", "{\"model_type\": \"roberta\", \"max_position_embeddings\": 514, \"type_vocab_size\": 1,"
                     " \"layer_norm_eps\": 1e-05}"},
    {NULL, NULL},
};

const ft_arch ft_arch_roberta = {
    .model_type = "roberta",
    .prefixes = roberta_prefixes,
    .inputs = roberta_inputs,
    .load = roberta_load,
    .validate = roberta_validate,
    .forward = roberta_forward,
    .destroy = roberta_destroy,
    .example_inputs = roberta_example_inputs,
    .presets = roberta_presets,
};

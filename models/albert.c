/*
 * albert.c - AlbertModel as Hugging Face defines it (tests/golden/README-zoo.md,
 * AlbertModel): embeddings embedding_size wide (LayerNorm over them), a Linear
 * E -> H projection, then num_hidden_layers applications of shared layer
 * groups, and a tanh pooler.
 *
 * Weight sharing is load once, run many times: num_hidden_groups groups of
 * inner_group_num BERT-style layers (bert.h, under ALBERT's names) are loaded
 * once; application i runs every inner layer of group int(i / (L / G)), that
 * expression in double precision as HF evaluates it (it is one less than
 * floor(i G / L) for some layouts, e.g. L 18, G 14, i 9). So a forward calls
 * the same weight tensors from several layers: graph mode's Q/K/V merge and
 * packed-weight caches are keyed by the weights' memory and hold one copy per
 * group layer, not one per application (tests/test_zoo_text_a.c checks it).
 */
#include "bert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct albert {
    int64_t vocab, emb, d, layers, groups, inner, heads, inter, max_pos, type_vocab;
    float eps;
    ft_act_kind act;
    ft_tensor *word, *pos, *type;   /* [V, E], [P, E], [T, E] */
    ft_tensor *emb_ln_w, *emb_ln_b; /* [E] */
    ft_tensor *map_w, *map_b;       /* embedding_hidden_mapping_in [D, E], [D] */
    ft_bert_layer *layer;           /* [groups * inner]: group g's layer j at g * inner + j */
    ft_tensor *pool_w, *pool_b;     /* pooler [D, D], [D]; NULL without one */
} albert;

/* AlbertConfig's class defaults (transformers 4.36) are ALBERT-xxlarge's sizes;
 * albert-base-v2 sets hidden_size 768, num_attention_heads 12 and
 * intermediate_size 3072. */
static ft_status read_config(albert *a, ft_config *c) {
    ft_status st;
    double eps = 1e-12;
    const char *pet = NULL;
    if ((st = ft_config_int(c, "vocab_size", 30000, &a->vocab)) ||
        (st = ft_config_int(c, "embedding_size", 128, &a->emb)) ||
        (st = ft_config_int(c, "hidden_size", 4096, &a->d)) ||
        (st = ft_config_int(c, "num_hidden_layers", 12, &a->layers)) ||
        (st = ft_config_int(c, "num_hidden_groups", 1, &a->groups)) ||
        (st = ft_config_int(c, "inner_group_num", 1, &a->inner)) ||
        (st = ft_config_int(c, "num_attention_heads", 64, &a->heads)) ||
        (st = ft_config_int(c, "intermediate_size", 16384, &a->inter)) ||
        (st = ft_config_int(c, "max_position_embeddings", 512, &a->max_pos)) ||
        (st = ft_config_int(c, "type_vocab_size", 2, &a->type_vocab)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-12, &eps)) ||
        (st = ft_config_string(c, "position_embedding_type", "absolute", &pet)) ||
        (st = ft_model_act_parse(c, "hidden_act", "gelu_new", &a->act)))
        return st;
    if (strcmp(pet, "absolute"))
        return ft_config_error(c, "position_embedding_type '%s' is not supported (absolute only)", pet);
    if (a->vocab < 1 || a->emb < 1 || a->d < 1 || a->layers < 0 || a->heads < 1 || a->inter < 1 ||
        a->max_pos < 1 || a->type_vocab < 1)
        return ft_config_error(c, "sizes must be positive (vocab_size %lld, embedding_size %lld, hidden_size "
                               "%lld, num_hidden_layers %lld, num_attention_heads %lld, intermediate_size "
                               "%lld, max_position_embeddings %lld, type_vocab_size %lld)",
                               (long long)a->vocab, (long long)a->emb, (long long)a->d, (long long)a->layers,
                               (long long)a->heads, (long long)a->inter, (long long)a->max_pos,
                               (long long)a->type_vocab);
    if (a->d % a->heads)
        return ft_config_error(c, "hidden_size %lld is not a multiple of num_attention_heads %lld",
                               (long long)a->d, (long long)a->heads);
    /* HF divides num_hidden_layers by num_hidden_groups; each group holds inner_group_num layers */
    if (a->groups < 1 || a->groups > 4096)
        return ft_config_error(c, "num_hidden_groups %lld must be between 1 and 4096", (long long)a->groups);
    if (a->inner < 0 || a->inner > 4096)
        return ft_config_error(c, "inner_group_num %lld must be between 0 and 4096", (long long)a->inner);
    if (a->layers > 100000) return ft_config_error(c, "num_hidden_layers %lld is too large", (long long)a->layers);
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive");
    a->eps = (float)eps;
    return FT_OK;
}

/* The group layer application i runs, as HF computes it: int(i / (L / G)) in doubles. */
static int64_t group_of(const albert *a, int64_t i) {
    return (int64_t)((double)i / ((double)a->layers / (double)a->groups));
}

static const ft_bert_layer_names albert_names = {
    "attention.query", "attention.key", "attention.value", "attention.dense",
    "attention.LayerNorm", "ffn", "ffn_output", "full_layer_layer_norm"};

#define GROUP_FMT "encoder.albert_layer_groups.%d.albert_layers.%d"

/* A checkpoint with more groups or inner layers than the config says was made for
 * another configuration: refused, naming both (HF would warn and drop them). */
static ft_status check_layout(ft_model *m, const albert *a) {
    if (!m->st) return FT_OK;
    if (ft_weight_exists(m, GROUP_FMT ".attention.query.weight", (int)a->groups, 0))
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "%s: the checkpoint holds layer group %lld (encoder.albert_layer_groups.%lld.*), but "
                            "num_hidden_groups is %lld: config and checkpoint disagree on the group layout",
                            m->source, (long long)a->groups, (long long)a->groups, (long long)a->groups);
    if (ft_weight_exists(m, GROUP_FMT ".attention.query.weight", 0, (int)a->inner))
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "%s: the checkpoint holds layer %lld of group 0 (encoder.albert_layer_groups.0."
                            "albert_layers.%lld.*), but inner_group_num is %lld: config and checkpoint disagree "
                            "on the group layout",
                            m->source, (long long)a->inner, (long long)a->inner, (long long)a->inner);
    return FT_OK;
}

static ft_status load_weights(ft_model *m, albert *a) {
    int64_t E = a->emb, D = a->d;
    a->word = ft_weight(m, FT_W_SHAPE(a->vocab, E), "embeddings.word_embeddings.weight");
    a->pos = ft_weight(m, FT_W_SHAPE(a->max_pos, E), "embeddings.position_embeddings.weight");
    a->type = ft_weight(m, FT_W_SHAPE(a->type_vocab, E), "embeddings.token_type_embeddings.weight");
    a->emb_ln_w = ft_weight(m, FT_W_SHAPE(E), "embeddings.LayerNorm.weight");
    a->emb_ln_b = ft_weight(m, FT_W_SHAPE(E), "embeddings.LayerNorm.bias");
    a->map_w = ft_weight(m, FT_W_SHAPE(D, E), "encoder.embedding_hidden_mapping_in.weight");
    a->map_b = ft_weight(m, FT_W_SHAPE(D), "encoder.embedding_hidden_mapping_in.bias");
    for (int64_t g = 0; g < a->groups; g++)
        for (int64_t j = 0; j < a->inner; j++) {
            char prefix[96];
            snprintf(prefix, sizeof prefix, GROUP_FMT, (int)g, (int)j);
            if (ft_bert_layer_load(m, &a->layer[g * a->inner + j], prefix, albert_names, D, a->inter))
                return m->ctx->status;
        }
    if (check_layout(m, a)) return m->ctx->status;
    /* the pooler is a bare Linear named "pooler"; a checkpoint without it has no pooler_output */
    if (!m->st || ft_weight_exists(m, "pooler.weight")) {
        a->pool_w = ft_weight(m, FT_W_SHAPE(D, D), "pooler.weight");
        a->pool_b = ft_weight(m, FT_W_SHAPE(D), "pooler.bias");
    }
    return m->ctx->status;
}

static ft_status albert_load(ft_model *m, ft_config *cfg) {
    albert *a = (albert *)calloc(1, sizeof *a);
    if (!a) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = a;
    snprintf(m->arch_name, sizeof m->arch_name, "AlbertModel");
    ft_status st = read_config(a, cfg);
    if (st) return st;
    int64_t n = a->groups * a->inner;
    a->layer = (ft_bert_layer *)calloc((size_t)(n ? n : 1), sizeof *a->layer);
    if (!a->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    return load_weights(m, a);
}

static void albert_destroy(ft_model *m) {
    albert *a = (albert *)m->priv;
    if (a) free(a->layer);
    free(a);
    m->priv = NULL;
}

static ft_status albert_validate(ft_model *m) {
    const albert *a = (const albert *)m->priv;
    const ft_host_tensor *p = ft_model_host_input(m, "position_ids");
    /* without explicit positions they are 0 .. S - 1, so S is bounded by the table */
    ft_status st = ft_validate_text_inputs(m, p ? 0 : a->max_pos, a->vocab, a->type_vocab);
    if (st) return st;
    if (p) {
        const ft_host_tensor *ids = ft_model_host_input(m, "input_ids");
        if (p->ndim != 2 || (p->shape[0] != ids->shape[0] && p->shape[0] != 1) || p->shape[1] != ids->shape[1])
            return ft_set_error(m->ctx, FT_ERR_SHAPE, "input 'position_ids' must be [%lld, %lld] or [1, %lld]",
                                (long long)ids->shape[0], (long long)ids->shape[1], (long long)ids->shape[1]);
        if ((st = ft_check_ids(m, "position_ids", 0, a->max_pos))) return st;
    }
    return ft_check_mask_values(m, "attention_mask", FT_F32_MIN);
}

static ft_status albert_forward(ft_model *m, ft_ctx *ctx) {
    const albert *a = (const albert *)m->priv;
    ft_tensor *ids = ft_model_input(m, "input_ids");
    ft_tensor *tt = ft_model_input(m, "token_type_ids");
    ft_tensor *pid = ft_model_input(m, "position_ids");
    int64_t S = ft_tensor_dim(ids, 1);
    /* HF's order: word + token type, then + position; all embedding_size wide */
    ft_tensor *e = ft_embedding(ctx, a->word, ids); /* [B, S, E] */
    e = ft_add(ctx, e, tt ? ft_embedding(ctx, a->type, tt) : ft_slice(ctx, a->type, 0, 0, 1));
    e = ft_add(ctx, e, pid ? ft_embedding(ctx, a->pos, pid) : ft_slice(ctx, a->pos, 0, 0, S));
    e = ft_layernorm(ctx, e, a->emb_ln_w, a->emb_ln_b, a->eps);
    ft_tensor *h = ft_linear(ctx, e, a->map_w, a->map_b); /* [B, S, D] */
    ft_tensor_release(ctx, e);
    ft_tensor *mask = ft_additive_mask(ctx, ft_model_input(m, "attention_mask"), FT_F32_MIN);
    bool hs = ft_model_want_hidden_states(m);
    ft_model_add_hidden_state(m, 0, h);
    for (int64_t i = 0; i < a->layers; i++) {
        const ft_bert_layer *grp = &a->layer[group_of(a, i) * a->inner];
        for (int64_t j = 0; j < a->inner; j++) {
            ft_tensor *next = ft_bert_layer_forward(ctx, &grp[j], h, mask, a->heads, a->eps, a->act);
            /* h is kept while it is a reported hidden state (the input of this application) */
            if (!hs || j > 0) ft_tensor_release(ctx, h);
            h = next;
        }
        ft_model_add_hidden_state(m, i + 1, h);
    }
    ft_model_add_output(m, "last_hidden_state", h);
    if (a->pool_w) {
        ft_tensor *first = ft_select(ctx, h, 1, 0); /* [B, D] */
        ft_model_add_output(m, "pooler_output", ft_tanh(ctx, ft_linear(ctx, first, a->pool_w, a->pool_b)));
    }
    return ctx->status;
}

static ft_status albert_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                                       int *n_in, void **owned) {
    const albert *a = (const albert *)m->priv;
    if (length > a->max_pos) /* before allocating length x batch ids */
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "sequence length %lld exceeds max_position_embeddings %lld",
                            (long long)length, (long long)a->max_pos);
    return ft_example_text_inputs(m, batch, length, a->vocab, in, n_in, owned);
}

static const char *const albert_prefixes[] = {"albert.", NULL};
static const char *const albert_inputs[] = {"input_ids", "attention_mask", "token_type_ids", "position_ids",
                                            NULL};

static const ft_preset albert_presets[] = {
    {"albert-base-v2", "{\"model_type\": \"albert\", \"hidden_size\": 768, \"num_attention_heads\": 12,"
                       " \"intermediate_size\": 3072}"},
    {"albert-large-v2", "{\"model_type\": \"albert\", \"hidden_size\": 1024, \"num_hidden_layers\": 24,"
                        " \"num_attention_heads\": 16, \"intermediate_size\": 4096}"},
    {NULL, NULL},
};

const ft_arch ft_arch_albert = {
    .model_type = "albert",
    .prefixes = albert_prefixes,
    .inputs = albert_inputs,
    .load = albert_load,
    .validate = albert_validate,
    .forward = albert_forward,
    .destroy = albert_destroy,
    .example_inputs = albert_example_inputs,
    .presets = albert_presets,
};

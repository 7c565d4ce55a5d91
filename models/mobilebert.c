/*
 * mobilebert.c - MobileBertModel, as Hugging Face defines it
 * (tests/golden/README.md, MobileBertModel).
 *
 * A narrow-body BERT: trigram word embeddings projected to the inter-block
 * width, then per layer a bottleneck down to true_hidden_size, attention whose
 * query/key come from a shared bottleneck and value from the full-width input,
 * num_feedforward_networks stacked FFNs, and a bottleneck back up. Norms are
 * NoNorm (x * gamma + beta, no statistics) or LayerNorm; with LayerNorm, HF
 * builds the embedding and MobileBertOutput norms without eps (PyTorch's 1e-5).
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TORCH_LN_EPS 1e-5f /* nn.LayerNorm's default, used where HF passes no eps */

typedef struct mb_norm {
    ft_tensor *w, *b; /* NoNorm / LayerNorm gamma, beta */
    float eps;
} mb_norm;

typedef struct mb_ffn {
    ft_tensor *wi, *bi, *wo, *bo; /* [I, Dt], [I], [Dt, I], [Dt] */
    mb_norm n;
} mb_ffn;

typedef struct mb_layer {
    ft_tensor *in_w, *in_b;     /* bottleneck.input.dense [Dt, D] */
    mb_norm in_n;
    ft_tensor *att_w, *att_b;   /* bottleneck.attention.dense [Dt, D] (key_query_shared) */
    mb_norm att_n;
    ft_tensor *wq, *bq, *wk, *bk, *wv, *bv; /* [H, Dt] ([H, D] for the value unless bottleneck attention) */
    ft_tensor *ao_w, *ao_b;     /* attention.output.dense [Dt, Dt] */
    mb_norm ao_n;
    mb_ffn *ffn;                /* num_feedforward_networks - 1 */
    ft_tensor *inter_w, *inter_b; /* [I, Dt] */
    ft_tensor *out_w, *out_b;   /* output.dense [Dt, I] */
    mb_norm out_n;
    ft_tensor *ob_w, *ob_b;     /* output.bottleneck.dense [D, Dt] */
    mb_norm ob_n;
} mb_layer;

typedef struct mobilebert {
    int64_t vocab, d, e, dt, layers, heads, inter, max_pos, type_vocab, n_ffn;
    bool trigram, use_bottleneck, bottleneck_attention, kq_shared, layer_norm, classifier_act;
    float eps;
    ft_act_kind act;
    ft_tensor *word, *pos, *type;  /* [V, E], [P, D], [T, D] */
    ft_tensor *et_w, *et_b;        /* embedding_transformation [D, E*k], [D] */
    mb_norm emb_n;
    mb_layer *layer;
    ft_tensor *pool_w, *pool_b;    /* [D, D] when classifier_activation */
} mobilebert;

static ft_status read_config(mobilebert *b, ft_config *c) {
    ft_status st;
    double eps = 1e-12;
    const char *norm = NULL;
    int64_t intra = 128;
    if ((st = ft_config_int(c, "vocab_size", 30522, &b->vocab)) ||
        (st = ft_config_int(c, "hidden_size", 512, &b->d)) ||
        (st = ft_config_int(c, "embedding_size", 128, &b->e)) ||
        (st = ft_config_int(c, "num_hidden_layers", 24, &b->layers)) ||
        (st = ft_config_int(c, "num_attention_heads", 4, &b->heads)) ||
        (st = ft_config_int(c, "intermediate_size", 512, &b->inter)) ||
        (st = ft_config_int(c, "max_position_embeddings", 512, &b->max_pos)) ||
        (st = ft_config_int(c, "type_vocab_size", 2, &b->type_vocab)) ||
        (st = ft_config_int(c, "intra_bottleneck_size", 128, &intra)) ||
        (st = ft_config_int(c, "num_feedforward_networks", 4, &b->n_ffn)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-12, &eps)) ||
        (st = ft_config_bool(c, "trigram_input", true, &b->trigram)) ||
        (st = ft_config_bool(c, "use_bottleneck", true, &b->use_bottleneck)) ||
        (st = ft_config_bool(c, "use_bottleneck_attention", false, &b->bottleneck_attention)) ||
        (st = ft_config_bool(c, "key_query_shared_bottleneck", true, &b->kq_shared)) ||
        (st = ft_config_bool(c, "classifier_activation", true, &b->classifier_act)) ||
        (st = ft_config_string(c, "normalization_type", "no_norm", &norm)) || (st = ft_model_act_parse(c, "hidden_act", "relu", &b->act)))
        return st;
    if (!strcmp(norm, "no_norm")) b->layer_norm = false;
    else if (!strcmp(norm, "layer_norm")) b->layer_norm = true;
    else return ft_config_error(c, "normalization_type '%s' is not supported (no_norm, layer_norm)", norm);
    /* true_hidden_size is derived, whatever the config file says */
    b->dt = b->use_bottleneck ? intra : b->d;
    b->eps = (float)eps;
    if (b->vocab < 1 || b->d < 1 || b->e < 1 || b->dt < 1 || b->layers < 0 || b->heads < 1 || b->inter < 1 ||
        b->max_pos < 1 || b->type_vocab < 1 || b->n_ffn < 1)
        return ft_config_error(c, "sizes must be positive (vocab %lld, hidden %lld, embedding %lld, bottleneck %lld, "
                               "heads %lld, intermediate %lld, feedforward networks %lld)",
                               (long long)b->vocab, (long long)b->d, (long long)b->e, (long long)b->dt,
                               (long long)b->heads, (long long)b->inter, (long long)b->n_ffn);
    if (b->dt % b->heads)
        return ft_config_error(c, "%s %lld is not a multiple of num_attention_heads %lld",
                               b->use_bottleneck ? "intra_bottleneck_size" : "hidden_size", (long long)b->dt,
                               (long long)b->heads);
    /* q/k read the full-width input when neither shared nor bottleneck attention is used */
    if (b->use_bottleneck && !b->bottleneck_attention && !b->kq_shared && b->dt != b->d)
        return ft_config_error(c, "key_query_shared_bottleneck false needs intra_bottleneck_size (%lld) equal to "
                               "hidden_size (%lld): HF's query/key read the %lld-wide input with %lld-wide weights",
                               (long long)b->dt, (long long)b->d, (long long)b->d, (long long)b->dt);
    if (b->layer_norm && !(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive");
    return FT_OK;
}

static void load_norm(ft_model *m, mb_norm *n, int64_t size, float eps, const char *name) {
    n->w = ft_weight(m, FT_W_SHAPE(size), "%s.weight", name);
    n->b = ft_weight(m, FT_W_SHAPE(size), "%s.bias", name);
    n->eps = eps;
}

static ft_status load_weights(ft_model *m, mobilebert *b) {
    int64_t D = b->d, Dt = b->dt, I = b->inter, H = b->dt; /* heads * head size */
    char nm[128];
    b->word = ft_weight(m, FT_W_SHAPE(b->vocab, b->e), "embeddings.word_embeddings.weight");
    b->pos = ft_weight(m, FT_W_SHAPE(b->max_pos, D), "embeddings.position_embeddings.weight");
    b->type = ft_weight(m, FT_W_SHAPE(b->type_vocab, D), "embeddings.token_type_embeddings.weight");
    /* the transformation exists even when HF does not apply it (no trigram, E == D) */
    b->et_w = ft_weight(m, FT_W_SHAPE(D, b->e * (b->trigram ? 3 : 1)), "embeddings.embedding_transformation.weight");
    b->et_b = ft_weight(m, FT_W_SHAPE(D), "embeddings.embedding_transformation.bias");
    load_norm(m, &b->emb_n, D, TORCH_LN_EPS, "embeddings.LayerNorm");
    for (int i = 0; i < (int)b->layers; i++) {
        mb_layer *l = &b->layer[i];
        const char *p = "encoder.layer";
        if (b->use_bottleneck) {
            l->in_w = ft_weight(m, FT_W_SHAPE(Dt, D), "%s.%d.bottleneck.input.dense.weight", p, i);
            l->in_b = ft_weight(m, FT_W_SHAPE(Dt), "%s.%d.bottleneck.input.dense.bias", p, i);
            snprintf(nm, sizeof nm, "encoder.layer.%d.bottleneck.input.LayerNorm", i);
            load_norm(m, &l->in_n, Dt, b->eps, nm);
            if (b->kq_shared) {
                l->att_w = ft_weight(m, FT_W_SHAPE(Dt, D), "%s.%d.bottleneck.attention.dense.weight", p, i);
                l->att_b = ft_weight(m, FT_W_SHAPE(Dt), "%s.%d.bottleneck.attention.dense.bias", p, i);
                snprintf(nm, sizeof nm, "encoder.layer.%d.bottleneck.attention.LayerNorm", i);
                load_norm(m, &l->att_n, Dt, b->eps, nm);
            }
        }
        int64_t vin = b->bottleneck_attention ? Dt : D;
        l->wq = ft_weight(m, FT_W_SHAPE(H, Dt), "%s.%d.attention.self.query.weight", p, i);
        l->bq = ft_weight(m, FT_W_SHAPE(H), "%s.%d.attention.self.query.bias", p, i);
        l->wk = ft_weight(m, FT_W_SHAPE(H, Dt), "%s.%d.attention.self.key.weight", p, i);
        l->bk = ft_weight(m, FT_W_SHAPE(H), "%s.%d.attention.self.key.bias", p, i);
        l->wv = ft_weight(m, FT_W_SHAPE(H, vin), "%s.%d.attention.self.value.weight", p, i);
        l->bv = ft_weight(m, FT_W_SHAPE(H), "%s.%d.attention.self.value.bias", p, i);
        l->ao_w = ft_weight(m, FT_W_SHAPE(Dt, Dt), "%s.%d.attention.output.dense.weight", p, i);
        l->ao_b = ft_weight(m, FT_W_SHAPE(Dt), "%s.%d.attention.output.dense.bias", p, i);
        snprintf(nm, sizeof nm, "encoder.layer.%d.attention.output.LayerNorm", i);
        load_norm(m, &l->ao_n, Dt, b->eps, nm);
        for (int k = 0; k < (int)b->n_ffn - 1; k++) {
            mb_ffn *fn = &l->ffn[k];
            fn->wi = ft_weight(m, FT_W_SHAPE(I, Dt), "%s.%d.ffn.%d.intermediate.dense.weight", p, i, k);
            fn->bi = ft_weight(m, FT_W_SHAPE(I), "%s.%d.ffn.%d.intermediate.dense.bias", p, i, k);
            fn->wo = ft_weight(m, FT_W_SHAPE(Dt, I), "%s.%d.ffn.%d.output.dense.weight", p, i, k);
            fn->bo = ft_weight(m, FT_W_SHAPE(Dt), "%s.%d.ffn.%d.output.dense.bias", p, i, k);
            snprintf(nm, sizeof nm, "%s.%d.ffn.%d.output.LayerNorm", p, i, k);
            load_norm(m, &fn->n, Dt, b->eps, nm);
        }
        l->inter_w = ft_weight(m, FT_W_SHAPE(I, Dt), "%s.%d.intermediate.dense.weight", p, i);
        l->inter_b = ft_weight(m, FT_W_SHAPE(I), "%s.%d.intermediate.dense.bias", p, i);
        l->out_w = ft_weight(m, FT_W_SHAPE(Dt, I), "%s.%d.output.dense.weight", p, i);
        l->out_b = ft_weight(m, FT_W_SHAPE(Dt), "%s.%d.output.dense.bias", p, i);
        snprintf(nm, sizeof nm, "encoder.layer.%d.output.LayerNorm", i);
        load_norm(m, &l->out_n, Dt, TORCH_LN_EPS, nm);
        if (b->use_bottleneck) {
            l->ob_w = ft_weight(m, FT_W_SHAPE(D, Dt), "%s.%d.output.bottleneck.dense.weight", p, i);
            l->ob_b = ft_weight(m, FT_W_SHAPE(D), "%s.%d.output.bottleneck.dense.bias", p, i);
            snprintf(nm, sizeof nm, "encoder.layer.%d.output.bottleneck.LayerNorm", i);
            load_norm(m, &l->ob_n, D, b->eps, nm);
        }
        if (m->ctx->status != FT_OK) return m->ctx->status;
    }
    if (b->classifier_act) {
        b->pool_w = ft_weight(m, FT_W_SHAPE(D, D), "pooler.dense.weight");
        b->pool_b = ft_weight(m, FT_W_SHAPE(D), "pooler.dense.bias");
    }
    return m->ctx->status;
}

static ft_status mobilebert_load(ft_model *m, ft_config *cfg) {
    mobilebert *b = (mobilebert *)calloc(1, sizeof *b);
    if (!b) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = b;
    snprintf(m->arch_name, sizeof m->arch_name, "MobileBertModel");
    ft_status st = read_config(b, cfg);
    if (st) return st;
    b->layer = (mb_layer *)calloc((size_t)(b->layers ? b->layers : 1), sizeof *b->layer);
    if (!b->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    for (int64_t i = 0; i < b->layers; i++) {
        b->layer[i].ffn = (mb_ffn *)calloc((size_t)b->n_ffn, sizeof(mb_ffn));
        if (!b->layer[i].ffn) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    }
    return load_weights(m, b);
}

static void mobilebert_destroy(ft_model *m) {
    mobilebert *b = (mobilebert *)m->priv;
    if (b && b->layer)
        for (int64_t i = 0; i < b->layers; i++) free(b->layer[i].ffn);
    if (b) free(b->layer);
    free(b);
    m->priv = NULL;
}

static ft_status mobilebert_validate(ft_model *m) {
    const mobilebert *b = (const mobilebert *)m->priv;
    ft_status st = ft_validate_text_inputs(m, b->max_pos, b->vocab, b->type_vocab);
    return st ? st : ft_check_mask_values(m, "attention_mask", FT_F32_MIN);
}

/* ---- forward ---- */

static ft_tensor *norm(ft_ctx *ctx, const mobilebert *b, const mb_norm *n, ft_tensor *x) {
    if (b->layer_norm) return ft_layernorm(ctx, x, n->w, n->b, n->eps);
    return ft_add(ctx, ft_mul(ctx, x, n->w), n->b); /* NoNorm */
}

/* dense -> residual -> norm */
static ft_tensor *dense_add_norm(ft_ctx *ctx, const mobilebert *b, ft_tensor *x, ft_tensor *w, ft_tensor *bias,
                                 ft_tensor *res, const mb_norm *n) {
    ft_tensor *y = ft_linear(ctx, x, w, bias);
    ft_tensor *s = ft_add(ctx, y, res);
    ft_tensor_release(ctx, y);
    ft_tensor *o = norm(ctx, b, n, s);
    ft_tensor_release(ctx, s);
    return o;
}

static ft_tensor *ffn(ft_ctx *ctx, const mobilebert *b, ft_tensor *x, ft_tensor *wi, ft_tensor *bi) {
    ft_tensor *h = ft_linear(ctx, x, wi, bi);
    ft_tensor *a = ft_model_act(ctx, b->act, h);
    ft_tensor_release(ctx, h);
    return a;
}

static ft_tensor *mb_layer_forward(ft_ctx *ctx, const mobilebert *b, const mb_layer *l, ft_tensor *h,
                                   ft_tensor *mask) {
    ft_tensor *qk_in = h, *v_in = h, *li = h;
    if (b->use_bottleneck) {
        li = norm(ctx, b, &l->in_n, ft_linear(ctx, h, l->in_w, l->in_b)); /* [B, S, Dt] */
        if (b->bottleneck_attention) {
            qk_in = v_in = li;
        } else if (b->kq_shared) {
            qk_in = norm(ctx, b, &l->att_n, ft_linear(ctx, h, l->att_w, l->att_b));
        }
    }
    int64_t N = b->heads, Dh = b->dt / b->heads, B = ft_tensor_dim(h, 0), S = ft_tensor_dim(h, 1);
    ft_tensor *q = ft_split_heads(ctx, ft_linear(ctx, qk_in, l->wq, l->bq), N);
    ft_tensor *k = ft_split_heads(ctx, ft_linear(ctx, qk_in, l->wk, l->bk), N);
    ft_tensor *v = ft_split_heads(ctx, ft_linear(ctx, v_in, l->wv, l->bv), N);
    ft_tensor *scores = ft_matmul(ctx, q, ft_transpose(ctx, k, -1, -2), 1.0f); /* [B, N, S, S] */
    ft_tensor *probs = ft_softmax(ctx, scores, mask, 1.0f / sqrtf((float)Dh));
    ft_tensor_release(ctx, scores);
    ft_tensor *c = ft_matmul(ctx, probs, v, 1.0f); /* [B, N, S, Dh] */
    ft_tensor_release(ctx, probs);
    c = ft_reshape(ctx, ft_permute(ctx, c, (const int[]){0, 2, 1, 3}), 3, FT_SHAPE(B, S, N * Dh));
    ft_tensor *a = dense_add_norm(ctx, b, c, l->ao_w, l->ao_b, li, &l->ao_n); /* [B, S, Dt] */
    ft_tensor_release(ctx, c);
    for (int64_t k2 = 0; k2 < b->n_ffn - 1; k2++) {
        const mb_ffn *fn = &l->ffn[k2];
        ft_tensor *m = ffn(ctx, b, a, fn->wi, fn->bi);
        ft_tensor *next = dense_add_norm(ctx, b, m, fn->wo, fn->bo, a, &fn->n);
        ft_tensor_release(ctx, m);
        ft_tensor_release(ctx, a);
        a = next;
    }
    ft_tensor *m = ffn(ctx, b, a, l->inter_w, l->inter_b); /* [B, S, I] */
    ft_tensor *o = dense_add_norm(ctx, b, m, l->out_w, l->out_b, a, &l->out_n);
    ft_tensor_release(ctx, m);
    ft_tensor_release(ctx, a);
    if (!b->use_bottleneck) return o;
    ft_tensor *y = dense_add_norm(ctx, b, o, l->ob_w, l->ob_b, h, &l->ob_n); /* [B, S, D] */
    ft_tensor_release(ctx, o);
    return y;
}

static ft_status mobilebert_forward(ft_model *m, ft_ctx *ctx) {
    const mobilebert *b = (const mobilebert *)m->priv;
    ft_tensor *ids = ft_model_input(m, "input_ids");
    ft_tensor *tt = ft_model_input(m, "token_type_ids");
    ft_tensor *mask_in = ft_model_input(m, "attention_mask");
    if (!ids) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s needs input 'input_ids'", m->arch_name);
    int64_t S = ft_tensor_dim(ids, 1);
    ft_tensor *e = ft_embedding(ctx, b->word, ids); /* [B, S, E] */
    if (b->trigram) {
        /* concat(e[s+1], e[s], e[s-1]) with zero rows past either end */
        ft_tensor *next, *prev;
        if (S > 1) {
            next = ft_pad(ctx, ft_slice(ctx, e, 1, 1, S - 1), 1, 0, 1, 0.0f);
            prev = ft_pad(ctx, ft_slice(ctx, e, 1, 0, S - 1), 1, 1, 0, 0.0f);
        } else {
            next = prev = ft_scale(ctx, e, 0.0f, 0.0f);
        }
        e = ft_concat(ctx, ft_concat(ctx, next, e, 2), prev, 2); /* [B, S, 3E] */
    }
    if (b->trigram || b->e != b->d) e = ft_linear(ctx, e, b->et_w, b->et_b); /* [B, S, D] */
    e = ft_add(ctx, e, ft_slice(ctx, b->pos, 0, 0, S));
    e = ft_add(ctx, e, tt ? ft_embedding(ctx, b->type, tt) : ft_slice(ctx, b->type, 0, 0, 1));
    ft_tensor *h = norm(ctx, b, &b->emb_n, e);

    ft_tensor *mask = ft_additive_mask(ctx, mask_in, FT_F32_MIN); /* (1 - m) * finfo.min, [B, 1, 1, S] */
    bool hs = ft_model_want_hidden_states(m);
    ft_model_add_hidden_state(m, 0, h);
    for (int64_t i = 0; i < b->layers; i++) {
        ft_tensor *next = mb_layer_forward(ctx, b, &b->layer[i], h, mask);
        ft_model_add_hidden_state(m, i + 1, next);
        if (!hs) ft_tensor_release(ctx, h); /* an output stays alive */
        h = next;
    }
    ft_model_add_output(m, "last_hidden_state", h);
    ft_tensor *first = ft_select(ctx, h, 1, 0); /* [B, D] */
    if (b->pool_w) first = ft_tanh(ctx, ft_linear(ctx, first, b->pool_w, b->pool_b));
    else first = ft_contiguous(ctx, first);
    ft_model_add_output(m, "pooler_output", first);
    return ctx->status;
}

static ft_status mobilebert_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                    int *n_in, void **owned) {
    const mobilebert *b = (const mobilebert *)m->priv;
    if (b->max_pos > 0 && length > b->max_pos) /* before allocating length x batch ids */
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "sequence length %lld exceeds max_position_embeddings %lld",
                            (long long)length, (long long)b->max_pos);
    return ft_example_text_inputs(m, batch, length, b->vocab, in, n_in, owned);
}

static const char *const mb_prefixes[] = {"mobilebert.", NULL};
static const char *const mb_inputs[] = {"input_ids", "attention_mask", "token_type_ids", NULL};

/* google/mobilebert-uncased: the class defaults except classifier_activation */
static const ft_preset mb_presets[] = {
    {"mobilebert-uncased", "{\"model_type\": \"mobilebert\", \"classifier_activation\": false}"},
    {NULL, NULL},
};

const ft_arch ft_arch_mobilebert = {
    .model_type = "mobilebert",
    .prefixes = mb_prefixes,
    .inputs = mb_inputs,
    .load = mobilebert_load,
    .validate = mobilebert_validate,
    .forward = mobilebert_forward,
    .destroy = mobilebert_destroy,
    .example_inputs = mobilebert_example_inputs,
    .presets = mb_presets,
};

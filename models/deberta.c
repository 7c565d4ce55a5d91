/*
 * deberta.c - DebertaModel (v1) as Hugging Face transformers 4.36.2 defines it
 * (tests/golden/README-zoo.md, DebertaModel).
 *
 * A post-LN encoder whose attention is disentangled: besides q k^T the scores
 * carry a content-to-position term q . PK[d(i, j)] and a position-to-content
 * term k_j . PQ[d(i, j)], where PK and PQ are per-layer projections of one
 * shared relative-position table and d(i, j) = clamp(i - j + span, 0, 2 span - 1)
 * with span = min(S, max_relative_positions). Eager mode computes them as HF
 * does: q PK^T [.., S, 2 span] once, then a gather along the last dim (and for
 * p2c a transpose), added to the scores; graph mode's attention_rel pass fuses
 * the gathers into the attention kernel (graph/pass_attention_rel.c).
 *
 * Other differences from BERT: in_proj is one bias-free Linear whose output is
 * interleaved per head (q, k, v of head 0, then of head 1, ...), with separate q
 * and v biases (here one [3D] bias with zeros for k, built by ops from the two,
 * which graph mode folds at plan time); q is scaled by 1/sqrt(Dh (1 + number of
 * pos_att_type entries)) computed in f32; the mask is pairwise, and HF's XSoftmax
 * replaces masked scores by finfo.min and then zeroes masked probabilities, so a
 * padded query row has context 0. For 0/1 masks that is the additive key mask
 * (finfo.min + score rounds to finfo.min) followed by a multiply of each row by
 * its query's mask value. The embeddings have no position table unless
 * position_biased_input, are LayerNorm'ed and then multiplied by the mask.
 * Talking heads (a per-position Linear across heads before and after the
 * softmax) run unfused.
 */
#include "model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct db_layer {
    ft_tensor *w_in;                 /* in_proj [3D, D], rows interleaved per head */
    ft_tensor *q_bias, *v_bias;      /* [D] */
    ft_tensor *w_pos;                /* pos_proj [D, D] (c2p) */
    ft_tensor *w_posq, *b_posq;      /* pos_q_proj [D, D], [D] (p2c) */
    ft_tensor *w_logits, *w_weights; /* talking heads [N, N] */
    ft_tensor *wo, *bo, *ln1_w, *ln1_b;
    ft_tensor *wi, *bi, *wo2, *bo2, *ln2_w, *ln2_b;
} db_layer;

typedef struct deberta {
    int64_t vocab, d, emb, layers, heads, inter, max_pos, type_vocab;
    int64_t max_rel; /* relative table half-size (max_relative_positions, or max_position_embeddings) */
    bool rel, c2p, p2c, pos_input, talking;
    int n_pos_att;   /* entries of pos_att_type: the scale is 1/sqrt(Dh (1 + n)) */
    float eps;
    ft_act_kind act;
    ft_tensor *word, *pos, *type, *embed_proj, *emb_ln_w, *emb_ln_b, *rel_emb;
    db_layer *layer;
} deberta;

/* pos_att_type: a list of strings, or one string "c2p|p2c" that HF lower-cases,
 * splits on '|' and strips. Every entry counts in the scale; c2p and p2c switch
 * the two terms on. */
static ft_status read_pos_att_type(deberta *b, ft_config *c) {
    const ft_json *v = ft_json_get(c->root, "pos_att_type");
    if (!v || ft_json_type_of(v) == FT_JSON_NULL) return FT_OK;
    if (ft_json_type_of(v) == FT_JSON_ARRAY) {
        for (int i = 0; i < ft_json_len(v); i++) {
            const ft_json *e = ft_json_at(v, i);
            if (ft_json_type_of(e) != FT_JSON_STRING)
                return ft_config_error(c, "pos_att_type[%d] must be a string, got %s", i,
                                       ft_json_type_name(ft_json_type_of(e)));
            const char *s = ft_json_string(e);
            b->c2p |= !strcmp(s, "c2p");
            b->p2c |= !strcmp(s, "p2c");
            b->n_pos_att++;
        }
        return FT_OK;
    }
    if (ft_json_type_of(v) != FT_JSON_STRING)
        return ft_config_error(c, "pos_att_type must be a string or a list of strings, got %s",
                               ft_json_type_name(ft_json_type_of(v)));
    const char *s = ft_json_string(v);
    for (const char *p = s;; p++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++, len--;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '\n' || p[len - 1] == '\r')) len--;
        char tok[8] = "";
        if (len < sizeof tok) {
            for (size_t i = 0; i < len; i++) tok[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] - 'A' + 'a' : p[i]);
            tok[len] = 0;
        }
        b->c2p |= !strcmp(tok, "c2p");
        b->p2c |= !strcmp(tok, "p2c");
        b->n_pos_att++;
        if (!bar) break;
        p = bar;
    }
    return FT_OK;
}

static ft_status read_config(deberta *b, ft_config *c) {
    ft_status st;
    double eps = 1e-7;
    if ((st = ft_config_int(c, "vocab_size", 50265, &b->vocab)) ||
        (st = ft_config_int(c, "hidden_size", 768, &b->d)) ||
        (st = ft_config_int(c, "embedding_size", b->d, &b->emb)) ||
        (st = ft_config_int(c, "num_hidden_layers", 12, &b->layers)) ||
        (st = ft_config_int(c, "num_attention_heads", 12, &b->heads)) ||
        (st = ft_config_int(c, "intermediate_size", 3072, &b->inter)) ||
        (st = ft_config_int(c, "max_position_embeddings", 512, &b->max_pos)) ||
        (st = ft_config_int(c, "type_vocab_size", 0, &b->type_vocab)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-7, &eps)) ||
        (st = ft_config_bool(c, "relative_attention", false, &b->rel)) ||
        (st = ft_config_int(c, "max_relative_positions", -1, &b->max_rel)) ||
        (st = ft_config_bool(c, "position_biased_input", true, &b->pos_input)) ||
        (st = ft_config_bool(c, "talking_head", false, &b->talking)) ||
        (st = ft_model_act_parse(c, "hidden_act", "gelu", &b->act)) || (st = read_pos_att_type(b, c)))
        return st;
    if (b->vocab < 1 || b->d < 1 || b->emb < 1 || b->layers < 0 || b->heads < 1 || b->inter < 1 ||
        b->max_pos < 1 || b->type_vocab < 0)
        return ft_config_error(c, "sizes must be positive (vocab_size %lld, hidden_size %lld, embedding_size %lld, "
                                  "num_hidden_layers %lld, num_attention_heads %lld, intermediate_size %lld, "
                                  "max_position_embeddings %lld, type_vocab_size %lld)",
                               (long long)b->vocab, (long long)b->d, (long long)b->emb, (long long)b->layers,
                               (long long)b->heads, (long long)b->inter, (long long)b->max_pos,
                               (long long)b->type_vocab);
    if (b->d % b->heads)
        return ft_config_error(c, "hidden_size %lld is not a multiple of num_attention_heads %lld",
                               (long long)b->d, (long long)b->heads);
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive");
    if (b->max_rel < 1) b->max_rel = b->max_pos;
    if (b->max_rel > ((int64_t)1 << 30))
        return ft_config_error(c, "max_relative_positions %lld is too large", (long long)b->max_rel);
    if (!b->rel) b->c2p = b->p2c = false; /* the terms need the relative table; the scale still counts */
    b->eps = (float)eps;
    return FT_OK;
}

static ft_status load_weights(ft_model *m, deberta *b) {
    int64_t D = b->d, E = b->emb, I = b->inter, N = b->heads;
    b->word = ft_weight(m, FT_W_SHAPE(b->vocab, E), "embeddings.word_embeddings.weight");
    if (b->pos_input)
        b->pos = ft_weight(m, FT_W_SHAPE(b->max_pos, E), "embeddings.position_embeddings.weight");
    if (b->type_vocab > 0)
        b->type = ft_weight(m, FT_W_SHAPE(b->type_vocab, E), "embeddings.token_type_embeddings.weight");
    if (E != D) b->embed_proj = ft_weight(m, FT_W_SHAPE(D, E), "embeddings.embed_proj.weight");
    b->emb_ln_w = ft_weight(m, FT_W_SHAPE(D), "embeddings.LayerNorm.weight");
    b->emb_ln_b = ft_weight(m, FT_W_SHAPE(D), "embeddings.LayerNorm.bias");
    if (b->rel) b->rel_emb = ft_weight(m, FT_W_SHAPE(2 * b->max_rel, D), "encoder.rel_embeddings.weight");
    for (int64_t i = 0; i < b->layers && m->ctx->status == FT_OK; i++) {
        db_layer *l = &b->layer[i];
        int li = (int)i;
        const char *p = "encoder.layer";
        l->w_in = ft_weight(m, FT_W_SHAPE(3 * D, D), "%s.%d.attention.self.in_proj.weight", p, li);
        l->q_bias = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.self.q_bias", p, li);
        l->v_bias = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.self.v_bias", p, li);
        if (b->c2p) l->w_pos = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.self.pos_proj.weight", p, li);
        if (b->p2c) {
            l->w_posq = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.self.pos_q_proj.weight", p, li);
            l->b_posq = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.self.pos_q_proj.bias", p, li);
        }
        if (b->talking) {
            l->w_logits = ft_weight(m, FT_W_SHAPE(N, N), "%s.%d.attention.self.head_logits_proj.weight", p, li);
            l->w_weights = ft_weight(m, FT_W_SHAPE(N, N), "%s.%d.attention.self.head_weights_proj.weight", p, li);
        }
        l->wo = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.output.dense.weight", p, li);
        l->bo = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.output.dense.bias", p, li);
        l->ln1_w = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.output.LayerNorm.weight", p, li);
        l->ln1_b = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.output.LayerNorm.bias", p, li);
        l->wi = ft_weight(m, FT_W_SHAPE(I, D), "%s.%d.intermediate.dense.weight", p, li);
        l->bi = ft_weight(m, FT_W_SHAPE(I), "%s.%d.intermediate.dense.bias", p, li);
        l->wo2 = ft_weight(m, FT_W_SHAPE(D, I), "%s.%d.output.dense.weight", p, li);
        l->bo2 = ft_weight(m, FT_W_SHAPE(D), "%s.%d.output.dense.bias", p, li);
        l->ln2_w = ft_weight(m, FT_W_SHAPE(D), "%s.%d.output.LayerNorm.weight", p, li);
        l->ln2_b = ft_weight(m, FT_W_SHAPE(D), "%s.%d.output.LayerNorm.bias", p, li);
    }
    return m->ctx->status;
}

static ft_status db_load(ft_model *m, ft_config *cfg) {
    deberta *b = (deberta *)calloc(1, sizeof *b);
    if (!b) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = b;
    snprintf(m->arch_name, sizeof m->arch_name, "DebertaModel");
    ft_status st = read_config(b, cfg);
    if (st) return st;
    b->layer = (db_layer *)calloc((size_t)(b->layers ? b->layers : 1), sizeof *b->layer);
    if (!b->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    return load_weights(m, b);
}

static void db_destroy(ft_model *m) {
    deberta *b = (deberta *)m->priv;
    if (b) free(b->layer);
    free(b);
    m->priv = NULL;
}

/* HF multiplies the embeddings by the mask value and keeps a score where the
 * product of two mask values, cast to uint8, is nonzero: 0/1 masks are the only
 * ones for which that is a padding mask, and the only ones taken. */
static ft_status db_validate(ft_model *m) {
    const deberta *b = (const deberta *)m->priv;
    /* without a token-type table HF never reads token_type_ids */
    ft_status st = ft_validate_text_inputs(m, b->pos_input ? b->max_pos : 0, b->vocab,
                                           b->type_vocab > 0 ? b->type_vocab : INT64_MAX);
    if (st) return st;
    const ft_host_tensor *t = ft_model_host_input(m, "attention_mask");
    if (!t) return FT_OK;
    int64_t n = ft_host_numel(t), cols = t->shape[t->ndim - 1];
    for (int64_t i = 0; i < n; i++) {
        double v = ft_host_value_at(t, i);
        if (v != 0.0 && v != 1.0)
            return ft_set_error(m->ctx, FT_ERR_INVALID_ARG,
                                "input 'attention_mask' holds %g at [%lld, %lld]: DeBERTa takes a 0/1 mask "
                                "(1 keeps a position, 0 masks it)",
                                v, (long long)(i / cols), (long long)(i % cols));
    }
    return FT_OK;
}

/* idx [S, S] for the gathers: c2p rows i, columns j: clamp(i - j + span); p2c is
 * gathered from k's rows a at columns b with clamp(b - a + span), then transposed. */
static ft_tensor *rel_index(ft_ctx *ctx, int64_t s, int64_t span, bool p2c) {
    int64_t n = s * s;
    int64_t *h = (int64_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    if (!h) {
        ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
        return NULL;
    }
    for (int64_t i = 0; i < s; i++)
        for (int64_t j = 0; j < s; j++) {
            int64_t d = (p2c ? j - i : i - j) + span;
            h[i * s + j] = d < 0 ? 0 : d > 2 * span - 1 ? 2 * span - 1 : d;
        }
    ft_tensor *t = ft_tensor_from_host(ctx, FT_DTYPE_I64, 2, FT_SHAPE(s, s), h);
    free(h);
    return t;
}

/* [2 span, D] relative rows projected and split into heads as [N, 2 span, Dh]^T = [N, Dh, 2 span] */
static ft_tensor *rel_proj_t(ft_ctx *ctx, ft_tensor *r, ft_tensor *w, ft_tensor *bias, int64_t heads) {
    ft_tensor *p = ft_linear(ctx, r, w, bias); /* [2 span, D] */
    if (!p) return NULL;
    int64_t rows = ft_tensor_dim(p, 0), dh = ft_tensor_dim(p, 1) / heads;
    p = ft_reshape(ctx, p, 3, FT_SHAPE(rows, heads, dh));
    return ft_permute(ctx, p, (const int[]){1, 2, 0});
}

/* Head-major rows of q or k straight from in_proj's output, qkv3 [B*S, N, 3 Dh]
 * (columns `off` ... of each head): [N, B*S, Dh] with row stride 3D, a GEMM operand
 * as is. Times pt [N, Dh, 2 span], scaled: [N, B, S, 2 span], the relative product
 * of every (head, batch, row). */
static ft_tensor *rel_product(ft_ctx *ctx, ft_tensor *qkv3, int64_t off, int64_t B, ft_tensor *pt, float alpha) {
    if (!qkv3 || !pt) return NULL;
    int64_t dh = ft_tensor_dim(pt, 1);
    ft_tensor *xn = ft_permute(ctx, ft_slice(ctx, qkv3, 2, off, dh), (const int[]){1, 0, 2});
    ft_tensor *p = ft_matmul(ctx, xn, pt, alpha); /* [N, B*S, 2 span] */
    if (!p) return NULL;
    return ft_reshape(ctx, p, 4, FT_SHAPE(ft_tensor_dim(p, 0), B, ft_tensor_dim(p, 1) / B, ft_tensor_dim(p, 2)));
}

/* scores [B, N, S, S] -> across heads by a bias-free Linear(N, N) at each (i, j) */
static ft_tensor *mix_heads(ft_ctx *ctx, ft_tensor *x, ft_tensor *w) {
    ft_tensor *t = ft_linear(ctx, ft_permute(ctx, x, (const int[]){0, 2, 3, 1}), w, NULL); /* [B, S, S, N] */
    return ft_permute(ctx, t, (const int[]){0, 3, 1, 2});
}

typedef struct db_step {
    ft_tensor *key_mask; /* f32 [B, 1, 1, S]: (1 - m) finfo.min */
    ft_tensor *row_mask; /* model dtype [B, 1, S, 1]: m */
    ft_tensor *rel;      /* [2 span, D] rows of the relative table */
    ft_tensor *idx_c2p, *idx_p2c;
    ft_tensor *zeros;    /* [N, Dh]: k's part of in_proj's bias */
    float alpha;         /* 1 / sqrt(Dh (1 + n_pos_att)) */
} db_step;

static ft_tensor *db_layer_forward(ft_ctx *ctx, const deberta *b, const db_layer *l, ft_tensor *h,
                                   const db_step *st) {
    int64_t B = ft_tensor_dim(h, 0), S = ft_tensor_dim(h, 1), N = b->heads, dh = b->d / N;
    /* in_proj's bias: q_bias, zeros, v_bias per head, matching its interleaved columns
     * (weights only: folded once per plan in graph mode) */
    ft_tensor *qb = ft_reshape(ctx, l->q_bias, 2, FT_SHAPE(N, dh));
    ft_tensor *vb = ft_reshape(ctx, l->v_bias, 2, FT_SHAPE(N, dh));
    ft_tensor *zb = st->zeros;
    ft_tensor *bias3 = ft_reshape(ctx, ft_concat(ctx, ft_concat(ctx, qb, zb, 1), vb, 1), 1, FT_SHAPE(3 * b->d));
    ft_tensor *qkv = ft_linear(ctx, h, l->w_in, bias3); /* [B, S, 3D] */
    ft_tensor *qkv3 = ft_reshape(ctx, qkv, 3, FT_SHAPE(B * S, N, 3 * dh));
    ft_tensor *t = ft_permute(ctx, ft_reshape(ctx, qkv, 4, FT_SHAPE(B, S, N, 3 * dh)), (const int[]){0, 2, 1, 3});
    ft_tensor *q = ft_slice(ctx, t, 3, 0, dh), *k = ft_slice(ctx, t, 3, dh, dh), *v = ft_slice(ctx, t, 3, 2 * dh, dh);

    ft_tensor *s = ft_matmul(ctx, q, ft_transpose(ctx, k, -1, -2), st->alpha); /* [B, N, S, S] */
    if (b->c2p) {
        ft_tensor *c = rel_product(ctx, qkv3, 0, B, rel_proj_t(ctx, st->rel, l->w_pos, NULL, N), st->alpha);
        c = ft_gather_last(ctx, c, st->idx_c2p);                      /* [N, B, S, S] */
        s = ft_add(ctx, s, ft_permute(ctx, c, (const int[]){1, 0, 2, 3}));
    }
    if (b->p2c) {
        ft_tensor *p = rel_product(ctx, qkv3, dh, B, rel_proj_t(ctx, st->rel, l->w_posq, l->b_posq, N), st->alpha);
        p = ft_gather_last(ctx, p, st->idx_p2c);                      /* [N, B, S(key), S(query)] */
        s = ft_add(ctx, s, ft_permute(ctx, p, (const int[]){1, 0, 3, 2}));
    }
    if (b->talking) s = mix_heads(ctx, s, l->w_logits);
    ft_tensor *probs = ft_softmax(ctx, s, st->key_mask, 1.0f);
    if (st->row_mask) probs = ft_mul(ctx, probs, st->row_mask); /* XSoftmax: masked rows are 0 */
    if (b->talking) probs = mix_heads(ctx, probs, l->w_weights);
    ft_tensor *c = ft_matmul(ctx, probs, v, 1.0f); /* [B, N, S, Dh] */
    c = ft_reshape(ctx, ft_permute(ctx, c, (const int[]){0, 2, 1, 3}), 3, FT_SHAPE(B, S, b->d));
    ft_tensor *a = ft_layernorm(ctx, ft_add(ctx, ft_linear(ctx, c, l->wo, l->bo), h), l->ln1_w, l->ln1_b, b->eps);
    ft_tensor *f = ft_linear(ctx, a, l->wi, l->bi); /* [B, S, I] */
    ft_tensor *fa = ft_model_act(ctx, b->act, f);
    ft_tensor_release(ctx, f);
    ft_tensor *o = ft_add(ctx, ft_linear(ctx, fa, l->wo2, l->bo2), a);
    ft_tensor_release(ctx, fa);
    return ft_layernorm(ctx, o, l->ln2_w, l->ln2_b, b->eps);
}

static ft_status db_forward(ft_model *m, ft_ctx *ctx) {
    const deberta *b = (const deberta *)m->priv;
    ft_tensor *ids = ft_model_input(m, "input_ids");
    ft_tensor *tt = ft_model_input(m, "token_type_ids");
    ft_tensor *mask = ft_model_input(m, "attention_mask");
    int64_t S = ft_tensor_dim(ids, 1);
    ft_tensor *e = ft_embedding(ctx, b->word, ids); /* [B, S, E] */
    if (b->pos) e = ft_add(ctx, e, ft_slice(ctx, b->pos, 0, 0, S));
    if (b->type) e = ft_add(ctx, e, tt ? ft_embedding(ctx, b->type, tt) : ft_slice(ctx, b->type, 0, 0, 1));
    if (b->embed_proj) e = ft_linear(ctx, e, b->embed_proj, NULL);
    ft_tensor *h = ft_layernorm(ctx, e, b->emb_ln_w, b->emb_ln_b, b->eps);

    db_step st;
    memset(&st, 0, sizeof st);
    int64_t dh = b->d / b->heads;
    void *z = calloc((size_t)b->d, sizeof(float));
    if (!z) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    st.zeros = ft_tensor_from_host(ctx, m->dtype, 2, FT_SHAPE(b->heads, dh), z); /* 0 bits: 0 in every float dtype */
    free(z);
    float sf = (float)(1 + b->n_pos_att);
    st.alpha = 1.0f / sqrtf((float)dh * sf);
    if (mask) {
        ft_tensor *mv = ft_cast(ctx, mask, m->dtype); /* [B, S] */
        h = ft_mul(ctx, h, ft_unsqueeze(ctx, mv, 2));  /* padded tokens' embeddings are 0 */
        st.row_mask = ft_unsqueeze(ctx, ft_unsqueeze(ctx, mv, 1), 3); /* [B, 1, S, 1] */
        st.key_mask = ft_additive_mask(ctx, mask, FT_F32_MIN);
    }
    if (b->c2p || b->p2c) {
        int64_t span = S < b->max_rel ? S : b->max_rel;
        st.rel = ft_slice(ctx, b->rel_emb, 0, b->max_rel - span, 2 * span);
        if (b->c2p) st.idx_c2p = rel_index(ctx, S, span, false);
        if (b->p2c) st.idx_p2c = rel_index(ctx, S, span, true);
    }
    bool hs = ft_model_want_hidden_states(m);
    ft_model_add_hidden_state(m, 0, h);
    for (int64_t i = 0; i < b->layers; i++) {
        ft_tensor *next = db_layer_forward(ctx, b, &b->layer[i], h, &st);
        ft_model_add_hidden_state(m, i + 1, next);
        if (!hs) ft_tensor_release(ctx, h); /* an output stays alive */
        h = next;
    }
    ft_model_add_output(m, "last_hidden_state", h);
    return ctx->status;
}

static ft_status db_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in, int *n_in,
                                   void **owned) {
    const deberta *b = (const deberta *)m->priv;
    if (b->pos_input && length > b->max_pos) /* before allocating length x batch ids */
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "sequence length %lld exceeds max_position_embeddings %lld",
                            (long long)length, (long long)b->max_pos);
    return ft_example_text_inputs(m, batch, length, b->vocab, in, n_in, owned);
}

static const char *const db_prefixes[] = {"deberta.", NULL};
static const char *const db_inputs[] = {"input_ids", "attention_mask", "token_type_ids", NULL};

/* microsoft/deberta-base and -large (their Hub configs over the class defaults) */
#define DB_V1 "\"model_type\": \"deberta\", \"relative_attention\": true, \"pos_att_type\": \"c2p|p2c\"," \
              " \"position_biased_input\": false, \"max_relative_positions\": -1"
static const ft_preset db_presets[] = {
    {"deberta-base", "{" DB_V1 "}"},
    {"deberta-large", "{" DB_V1 ", \"hidden_size\": 1024, \"num_hidden_layers\": 24,"
                      " \"num_attention_heads\": 16, \"intermediate_size\": 4096}"},
    {NULL, NULL},
};

const ft_arch ft_arch_deberta = {
    .model_type = "deberta",
    .prefixes = db_prefixes,
    .inputs = db_inputs,
    .load = db_load,
    .validate = db_validate,
    .forward = db_forward,
    .destroy = db_destroy,
    .example_inputs = db_example_inputs,
    .presets = db_presets,
};

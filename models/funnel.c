/*
 * funnel.c - FunnelModel (encoder + decoder) and FunnelBaseModel (encoder
 * only), as Hugging Face defines them (tests/golden/README.md, FunnelModel).
 *
 * The model is a post-LN encoder whose blocks after the first mean-pool the
 * query of their first layer, with Transformer-XL style relative attention:
 * content, positional (sinusoids projected by r_kernel, "relative_shift") and
 * token-type (seg_embed) score terms ("factorized" positional terms instead:
 * funnel_factorized.c). Everything that depends only on the
 * sequence length - the length schedule, the relative-distance sinusoids and
 * their r_kernel projections, the gather tables of the relative shift, the CLS
 * masks - is worked out on the host (funnel_sched.c) and uploaded once per
 * length: in eager mode it is kept in a small per-model cache keyed by S, while
 * tracing it is rebuilt as constants that graph mode folds at plan time.
 */
#include "funnel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* HF's INF: masked keys get score - 1e6 */
#define FN_MASK_INF 1e6f

static ft_status read_config(funnel *f, ft_config *c) {
    ft_status st;
    double eps = 1e-9;
    const char *pool = NULL, *att = NULL;
    int64_t def_blocks[3] = {4, 4, 4};
    if ((st = ft_config_int(c, "vocab_size", 30522, &f->vocab)) ||
        (st = ft_config_int_array(c, "block_sizes", def_blocks, 3, f->block_sizes, FN_MAX_BLOCKS,
                                  &f->n_blocks)) ||
        (st = ft_config_int(c, "num_decoder_layers", 2, &f->n_dec)) ||
        (st = ft_config_int(c, "d_model|hidden_size", 768, &f->d)) ||
        (st = ft_config_int(c, "n_head|num_attention_heads", 12, &f->heads)) ||
        (st = ft_config_int(c, "d_head", 64, &f->dh)) ||
        (st = ft_config_int(c, "d_inner", 3072, &f->inner)) ||
        (st = ft_config_int(c, "type_vocab_size", 3, &f->type_vocab)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-9, &eps)) ||
        (st = ft_config_string(c, "pooling_type", "mean", &pool)) ||
        (st = ft_config_string(c, "attention_type", "relative_shift", &att)) ||
        (st = ft_config_bool(c, "separate_cls", true, &f->separate_cls)) ||
        (st = ft_config_bool(c, "truncate_seq", true, &f->truncate_seq)) ||
        (st = ft_config_bool(c, "pool_q_only", true, &f->pool_q_only)) || (st = ft_model_act_parse(c, "hidden_act", "gelu_new", &f->act)))
        return st;
    if (f->n_blocks < 1) return ft_config_error(c, "block_sizes must list at least one block");
    int64_t ones[FN_MAX_BLOCKS];
    for (int i = 0; i < FN_MAX_BLOCKS; i++) ones[i] = 1;
    int nrep = 0;
    if ((st = ft_config_int_array(c, "block_repeats", ones, f->n_blocks, f->block_repeats, FN_MAX_BLOCKS,
                                  &nrep)))
        return st;
    if (nrep != f->n_blocks)
        return ft_config_error(c, "block_repeats has %d entries but block_sizes has %d", nrep, f->n_blocks);
    f->n_enc = 0;
    for (int b = 0; b < f->n_blocks; b++) {
        if (f->block_sizes[b] < 1 || f->block_repeats[b] < 1)
            return ft_config_error(c, "block_sizes and block_repeats entries must be positive (block %d: %lld, %lld)",
                                   b, (long long)f->block_sizes[b], (long long)f->block_repeats[b]);
        f->block_first[b] = f->n_enc;
        f->n_enc += f->block_sizes[b];
    }
    if (f->vocab < 1 || f->d < 2 || f->heads < 1 || f->dh < 1 || f->inner < 1 || f->n_dec < 0)
        return ft_config_error(c, "sizes must be positive (vocab %lld, d_model %lld, n_head %lld, d_head %lld, d_inner %lld)",
                               (long long)f->vocab, (long long)f->d, (long long)f->heads, (long long)f->dh,
                               (long long)f->inner);
    if (f->d % 2)
        return ft_config_error(c, "d_model %lld must be even (sin and cos halves of the relative sinusoids)",
                               (long long)f->d);
    if (!strcmp(pool, "mean")) f->pool_kind = 0;
    else if (!strcmp(pool, "max")) f->pool_kind = 1;
    else return ft_config_error(c, "pooling_type '%s' is not supported (mean, max)", pool);
    f->factorized = !strcmp(att, "factorized");
    if (!f->factorized && strcmp(att, "relative_shift"))
        return ft_config_error(c, "attention_type '%s' is not supported (relative_shift, factorized)", att);
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive");
    f->eps = (float)eps;
    if (f->type_vocab < 3) f->type_vocab = 3; /* type 2 always means <cls> */
    return FT_OK;
}

static void load_layer(ft_model *m, const funnel *f, fn_layer *l, const char *p) {
    int64_t D = f->d, H = f->heads * f->dh, N = f->heads, Dh = f->dh, I = f->inner;
    l->wq = ft_weight(m, FT_W_SHAPE(H, D), "%s.attention.q_head.weight", p);
    l->wk = ft_weight(m, FT_W_SHAPE(H, D), "%s.attention.k_head.weight", p);
    l->bk = ft_weight(m, FT_W_SHAPE(H), "%s.attention.k_head.bias", p);
    l->wv = ft_weight(m, FT_W_SHAPE(H, D), "%s.attention.v_head.weight", p);
    l->bv = ft_weight(m, FT_W_SHAPE(H), "%s.attention.v_head.bias", p);
    l->rwb = ft_weight(m, FT_W_SHAPE(N, Dh), "%s.attention.r_w_bias", p);
    l->rrb = ft_weight(m, FT_W_SHAPE(N, Dh), "%s.attention.r_r_bias", p);
    l->rk = ft_weight(m, FT_W_SHAPE(D, N, Dh), "%s.attention.r_kernel", p);
    l->rsb = ft_weight(m, FT_W_SHAPE(N, Dh), "%s.attention.r_s_bias", p);
    l->seg = ft_weight(m, FT_W_SHAPE(2, N, Dh), "%s.attention.seg_embed", p);
    l->wo = ft_weight(m, FT_W_SHAPE(D, H), "%s.attention.post_proj.weight", p);
    l->bo = ft_weight(m, FT_W_SHAPE(D), "%s.attention.post_proj.bias", p);
    l->ln1_w = ft_weight(m, FT_W_SHAPE(D), "%s.attention.layer_norm.weight", p);
    l->ln1_b = ft_weight(m, FT_W_SHAPE(D), "%s.attention.layer_norm.bias", p);
    l->w1 = ft_weight(m, FT_W_SHAPE(I, D), "%s.ffn.linear_1.weight", p);
    l->b1 = ft_weight(m, FT_W_SHAPE(I), "%s.ffn.linear_1.bias", p);
    l->w2 = ft_weight(m, FT_W_SHAPE(D, I), "%s.ffn.linear_2.weight", p);
    l->b2 = ft_weight(m, FT_W_SHAPE(D), "%s.ffn.linear_2.bias", p);
    l->ln2_w = ft_weight(m, FT_W_SHAPE(D), "%s.ffn.layer_norm.weight", p);
    l->ln2_b = ft_weight(m, FT_W_SHAPE(D), "%s.ffn.layer_norm.bias", p);
}

static ft_status funnel_load(ft_model *m, ft_config *cfg) {
    funnel *f = (funnel *)calloc(1, sizeof *f);
    if (!f) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = f;
    /* AutoModel maps "funnel" to (FunnelModel, FunnelBaseModel): the one named in
     * architectures if it is either, else the first */
    const char *arch = ft_config_architecture(cfg);
    f->base = arch && !strcmp(arch, "FunnelBaseModel");
    snprintf(m->arch_name, sizeof m->arch_name, "%s", f->base ? "FunnelBaseModel" : "FunnelModel");
    ft_status st = read_config(f, cfg);
    if (st) return st;
    if (f->base) f->n_dec = 0;
    int64_t n = f->n_enc + f->n_dec;
    f->layer = (fn_layer *)calloc((size_t)(n ? n : 1), sizeof *f->layer);
    if (!f->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    f->word = ft_weight(m, FT_W_SHAPE(f->vocab, f->d), "embeddings.word_embeddings.weight");
    f->emb_ln_w = ft_weight(m, FT_W_SHAPE(f->d), "embeddings.layer_norm.weight");
    f->emb_ln_b = ft_weight(m, FT_W_SHAPE(f->d), "embeddings.layer_norm.bias");
    char p[96];
    for (int b = 0; b < f->n_blocks; b++)
        for (int64_t l = 0; l < f->block_sizes[b]; l++) {
            snprintf(p, sizeof p, "encoder.blocks.%d.%lld", b, (long long)l);
            load_layer(m, f, &f->layer[f->block_first[b] + l], p);
            if (m->ctx->status) return m->ctx->status;
        }
    for (int64_t l = 0; l < f->n_dec; l++) {
        snprintf(p, sizeof p, "decoder.layers.%lld", (long long)l);
        load_layer(m, f, &f->layer[f->n_enc + l], p);
        if (m->ctx->status) return m->ctx->status;
    }
    return m->ctx->status;
}

static void funnel_destroy(ft_model *m) {
    funnel *f = (funnel *)m->priv;
    if (f) {
        for (int i = 0; i < FN_CACHE; i++) fn_consts_free(&f->cache[i]);
        free(f->layer);
    }
    free(f);
    m->priv = NULL;
}

static ft_status funnel_validate(ft_model *m) {
    funnel *f = (funnel *)m->priv;
    ft_status st = ft_validate_text_inputs(m, 0, f->vocab, f->type_vocab); /* relative positions: no limit */
    if (!st) st = ft_check_mask_values(m, "attention_mask", -FN_MASK_INF);
    if (st) return st;
    const ft_host_tensor *ids = ft_model_host_input(m, "input_ids");
    fn_sched s;
    st = fn_sched_build(m->ctx, f, ids->shape[1], &s);
    fn_sched_free(&s);
    return st;
}

/* ---- layers ---- */

/* [B, L, N*Dh] -> [N, B*L, Dh] view: a GEMM operand without a copy (rows N*Dh apart) */
static ft_tensor *head_major(ft_ctx *ctx, ft_tensor *x, int64_t heads) {
    if (!x) return NULL;
    ft_tensor *v = ft_reshape(ctx, x, 3, FT_SHAPE(ft_tensor_dim(x, 0) * ft_tensor_dim(x, 1), heads, ft_tensor_dim(x, 2) / heads));
    return ft_permute(ctx, v, (const int[]){1, 0, 2});
}

/* What one attention call needs besides the layer's weights. */
typedef struct fn_att_in {
    ft_tensor *rk;       /* [T, N*Dh] relative sinusoids projected by r_kernel */
    ft_tensor *idx;      /* [1, Lq*Lk] flat relative-shift gather of [Lq, T] */
    ft_tensor *fq, *fk;  /* factorized instead of rk/idx: [Lq, 2, D] phi, pi; [2D, Lk] psi, omega */
    ft_tensor *cls;      /* [Lq, Lk] CLS mask (separate_cls), or NULL */
    ft_tensor *ct1, *ct0; /* [B, 1, Lq, Lk] cls * same-segment / cls * other-segment; NULL = cls / 0 */
    ft_tensor *madd;     /* [B, 1, 1, Lk] f32 additive key mask, or NULL */
    int64_t T;
} fn_att_in;

/* FunnelRelMultiheadAttention + FunnelPositionwiseFFN on query xq [B, Lq, D] and keys xk [B, Lk, D]. */
static ft_tensor *fn_layer_forward(ft_ctx *ctx, const funnel *f, const fn_layer *L, ft_tensor *xq,
                                   ft_tensor *xk, const fn_att_in *a) {
    if (!xq || !xk) return NULL;
    int64_t B = ft_tensor_dim(xq, 0), Lq = ft_tensor_dim(xq, 1), Lk = ft_tensor_dim(xk, 1), N = f->heads, Dh = f->dh, H = N * Dh;
    float s = 1.0f / sqrtf((float)Dh);
    ft_tensor *q = ft_linear(ctx, xq, L->wq, NULL); /* [B, Lq, H] */
    ft_tensor *k = ft_linear(ctx, xk, L->wk, L->bk); /* [B, Lk, H] */
    ft_tensor *v = ft_linear(ctx, xk, L->wv, L->bv); /* [B, Lk, H] */
    ft_tensor *qh = ft_scale(ctx, q, s, 0.0f);
    ft_tensor_release(ctx, q);
    /* the biases are scaled like q itself, as HF does (r_w_bias * scale) */
    ft_tensor *rw = ft_scale(ctx, ft_reshape(ctx, L->rwb, 1, FT_SHAPE(H)), s, 0.0f);
    ft_tensor *rr = ft_scale(ctx, ft_reshape(ctx, L->rrb, 1, FT_SHAPE(H)), s, 0.0f);
    ft_tensor *rs = ft_scale(ctx, ft_reshape(ctx, L->rsb, 1, FT_SHAPE(H)), s, 0.0f);

    /* content: (q + r_w_bias) . k -> [B, N, Lq, Lk] */
    ft_tensor *qw = ft_add(ctx, qh, rw);
    ft_tensor *score = ft_matmul(ctx, ft_split_heads(ctx, qw, N), ft_transpose(ctx, ft_split_heads(ctx, k, N), -1, -2), 1.0f);
    ft_tensor_release(ctx, qw);
    ft_tensor_release(ctx, k);

    /* positional [B, N, Lq, Lk], a view of pg */
    ft_tensor *qr = ft_add(ctx, qh, rr), *pg = NULL, *pos;
    if (a->fq) {
        pos = fn_fz_positional(ctx, f, L, head_major(ctx, qr, N), B, a->fq, a->fk, &pg);
    } else {
        /* (q + r_r_bias) . Rk[t] for every tabulated distance t, then the relative
         * shift picks t(i, j) per query/key pair */
        ft_tensor *rkt = ft_permute(ctx, ft_reshape(ctx, a->rk, 3, FT_SHAPE(a->T, N, Dh)), (const int[]){1, 2, 0});
        ft_tensor *pf = ft_matmul(ctx, head_major(ctx, qr, N), rkt, 1.0f); /* [N, B*Lq, T] */
        pg = ft_gather_last(ctx, ft_reshape(ctx, pf, 4, FT_SHAPE(N, B, 1, Lq * a->T)), a->idx);
        ft_tensor_release(ctx, pf);
        pos = ft_permute(ctx, ft_reshape(ctx, pg, 4, FT_SHAPE(N, B, Lq, Lk)), (const int[]){1, 0, 2, 3});
    }
    ft_tensor_release(ctx, qr);
    ft_tensor *posm = a->cls ? ft_mul(ctx, pos, a->cls) : pos;
    ft_tensor *sum = ft_add(ctx, score, posm);
    ft_tensor_release(ctx, score);
    if (posm != pos) ft_tensor_release(ctx, posm);
    ft_tensor_release(ctx, pos);
    ft_tensor_release(ctx, pg);
    score = sum;

    /* token type: u[.., s] = (q + r_s_bias) . seg_embed[s], s = 0 other / 1 same segment */
    ft_tensor *qs = ft_add(ctx, qh, rs);
    ft_tensor *segt = ft_permute(ctx, L->seg, (const int[]){1, 2, 0}); /* [N, Dh, 2] */
    ft_tensor *u = ft_matmul(ctx, head_major(ctx, qs, N), segt, 1.0f); /* [N, B*Lq, 2] */
    ft_tensor_release(ctx, qs);
    u = ft_permute(ctx, ft_reshape(ctx, u, 4, FT_SHAPE(N, B, Lq, 2)), (const int[]){1, 0, 2, 3});
    ft_tensor *u1 = ft_slice(ctx, u, 3, 1, 1), *u0 = ft_slice(ctx, u, 3, 0, 1); /* [B, N, Lq, 1] */
    /* products with the 0/1 matrices are exact: the same numbers as HF's torch.where */
    ft_tensor *tok = a->ct1 ? ft_mul(ctx, u1, a->ct1) : (a->cls ? ft_mul(ctx, u1, a->cls) : u1);
    if (a->ct0) tok = ft_add(ctx, tok, ft_mul(ctx, u0, a->ct0));
    sum = ft_add(ctx, score, tok);
    ft_tensor_release(ctx, score);
    ft_tensor_release(ctx, tok);
    ft_tensor_release(ctx, qh);

    ft_tensor *probs = ft_softmax(ctx, sum, a->madd, 1.0f);
    ft_tensor_release(ctx, sum);
    ft_tensor *c = ft_matmul(ctx, probs, ft_split_heads(ctx, v, N), 1.0f); /* [B, N, Lq, Dh] */
    ft_tensor_release(ctx, probs);
    ft_tensor_release(ctx, v);
    c = ft_reshape(ctx, ft_permute(ctx, c, (const int[]){0, 2, 1, 3}), 3, FT_SHAPE(B, Lq, H));
    ft_tensor *o = ft_linear(ctx, c, L->wo, L->bo);
    ft_tensor_release(ctx, c);
    ft_tensor *y = ft_layernorm(ctx, ft_add(ctx, xq, o), L->ln1_w, L->ln1_b, f->eps);
    ft_tensor_release(ctx, o);

    ft_tensor *h1 = ft_linear(ctx, y, L->w1, L->b1); /* [B, Lq, I] */
    ft_tensor *h1a = ft_model_act(ctx, f->act, h1);
    ft_tensor_release(ctx, h1);
    ft_tensor *h2 = ft_linear(ctx, h1a, L->w2, L->b2);
    ft_tensor_release(ctx, h1a);
    ft_tensor *z = ft_layernorm(ctx, ft_add(ctx, y, h2), L->ln2_w, L->ln2_b, f->eps);
    ft_tensor_release(ctx, h2);
    ft_tensor_release(ctx, y);
    return z;
}

/* HF pool_tensor along dim 1 of x [B, L, ...]: <cls> kept apart (prepended once
 * more), the last token dropped with truncate_seq, then windows of 2 in ceil mode. */
static ft_tensor *fn_pool(ft_ctx *ctx, const funnel *f, ft_tensor *x, int kind) {
    if (!x) return NULL;
    if (f->separate_cls) {
        int64_t L = ft_tensor_dim(x, 1);
        ft_tensor *rest = f->truncate_seq ? ft_slice(ctx, x, 1, 0, L - 1) : x;
        x = ft_concat(ctx, ft_slice(ctx, x, 1, 0, 1), rest, 1);
    }
    return ft_pool_dim(ctx, x, 1, kind, 2, 2);
}

/* HF upsample: repeat every non-cls row `stride` times, pad, cut to S, re-attach cls. */
static ft_tensor *fn_upsample(ft_ctx *ctx, const funnel *f, ft_tensor *x, int64_t stride, int64_t S) {
    if (!x || stride == 1 || S == 1) return x; /* S == 1: only <cls>, which HF keeps */
    int64_t B = ft_tensor_dim(x, 0), Lf = ft_tensor_dim(x, 1), D = ft_tensor_dim(x, 2);
    ft_tensor *cls = NULL, *rest = x;
    if (f->separate_cls) {
        cls = ft_slice(ctx, x, 1, 0, 1);
        rest = ft_slice(ctx, x, 1, 1, Lf - 1);
    }
    int64_t n = rest ? ft_tensor_dim(rest, 1) : 0;
    ft_tensor *rep = ft_expand(ctx, ft_unsqueeze(ctx, rest, 2), 4, FT_SHAPE(B, n, stride, D));
    rep = ft_reshape(ctx, ft_contiguous(ctx, rep), 3, FT_SHAPE(B, n * stride, D)); /* [B, n*stride, D] */
    if (!f->separate_cls) return ft_slice(ctx, rep, 1, 0, S);
    if (f->truncate_seq) rep = ft_pad(ctx, rep, 1, 0, stride - 1, 0.0f);
    return ft_concat(ctx, cls, ft_slice(ctx, rep, 1, 0, S - 1), 1);
}

/* Per forward: same-segment matrices of each geometry (they depend on token_type_ids). */
typedef struct fn_seg {
    ft_tensor *vt, *wt;                      /* [B, K+1, S] token-type codes */
    ft_tensor *ct1[FN_MAX_GEOM], *ct0[FN_MAX_GEOM];
    bool done[FN_MAX_GEOM];
} fn_seg;

/* Token-type codes at the rows of one level: [B, K+1, L] */
static ft_tensor *fn_codes_at(ft_ctx *ctx, ft_tensor *codes, ft_tensor *sel) {
    return sel ? ft_gather_last(ctx, codes, sel) : codes;
}

static void fn_seg_geom(ft_ctx *ctx, const fn_sched *s, fn_consts *c, fn_seg *sg, int g) {
    if (sg->done[g] || !sg->vt) return;
    sg->done[g] = true;
    const fn_geom *ge = &s->geom[g];
    ft_tensor *vq = fn_codes_at(ctx, sg->vt, c->sel[ge->qlev]); /* [B, K+1, Lq] */
    ft_tensor *wk = fn_codes_at(ctx, sg->wt, c->sel[ge->klev]); /* [B, K+1, Lk] */
    ft_tensor *tt = ft_matmul(ctx, ft_transpose(ctx, vq, 1, 2), wk, 1.0f); /* [B, Lq, Lk] 1 = same segment */
    ft_tensor *ct1 = c->cls[g] ? ft_mul(ctx, tt, c->cls[g]) : tt;
    ft_tensor *ct0 = c->cls[g] ? ft_sub(ctx, c->cls[g], ct1) : ft_scale(ctx, tt, -1.0f, 1.0f);
    sg->ct1[g] = ft_unsqueeze(ctx, ct1, 1);
    sg->ct0[g] = ft_unsqueeze(ctx, ct0, 1);
}

/* The additive key mask of a pooled f32 mask [B, L]: HF's score - INF * (1 - m) */
static ft_tensor *fn_mask_add(ft_ctx *ctx, ft_tensor *m) {
    return ft_additive_mask(ctx, m, -FN_MASK_INF);
}

static ft_status fn_run_layer(ft_model *m, funnel *f, const fn_sched *s, fn_consts *c, fn_seg *sg,
                              int64_t li, int g, ft_tensor *xq, ft_tensor *xk, ft_tensor *madd,
                              ft_tensor **out) {
    ft_ctx *ctx = m->ctx;
    fn_seg_geom(ctx, s, c, sg, g);
    fn_att_in a;
    memset(&a, 0, sizeof a);
    if (f->factorized) {
        a.fq = c->fq[g];
        a.fk = c->fk[g];
    } else {
        a.rk = fn_consts_rk(ctx, f, c, li, g);
        a.idx = c->idx[g];
    }
    a.cls = c->cls[g];
    a.ct1 = sg->ct1[g];
    a.ct0 = sg->ct0[g];
    a.madd = madd;
    a.T = s->geom[g].T;
    *out = fn_layer_forward(ctx, f, &f->layer[li], xq, xk, &a);
    return ctx->status;
}

static void add_hidden(ft_model *m, int *k, ft_tensor *h) {
    if (!ft_model_want_hidden_states(m)) return;
    char name[48];
    snprintf(name, sizeof name, "hidden_states.%d", (*k)++);
    ft_model_add_output(m, name, h);
}

static ft_status funnel_forward(ft_model *m, ft_ctx *ctx) {
    funnel *f = (funnel *)m->priv;
    ft_tensor *ids = ft_model_input(m, "input_ids");
    ft_tensor *mask = ft_model_input(m, "attention_mask");
    ft_tensor *tt = ft_model_input(m, "token_type_ids");
    if (!ids) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s needs input 'input_ids'", m->arch_name);
    int64_t S = ft_tensor_dim(ids, 1);
    fn_sched s;
    ft_status st = fn_sched_build(ctx, f, S, &s);
    if (st) return st;
    fn_consts local, *c = fn_consts_get(ctx, f, &s, m->dtype, &local);
    if (!c) {
        fn_sched_free(&s);
        return ctx->status;
    }

    ft_tensor *h = ft_layernorm(ctx, ft_embedding(ctx, f->word, ids), f->emb_ln_w, f->emb_ln_b, f->eps);
    int hk = 0;
    add_hidden(m, &hk, h);

    fn_seg sg;
    memset(&sg, 0, sizeof sg);
    if (tt) { /* absent token types are all 0: every pair is "same segment" */
        sg.vt = ft_contiguous(ctx, ft_transpose(ctx, ft_embedding(ctx, c->tt_v, tt), 1, 2));
        sg.wt = ft_contiguous(ctx, ft_transpose(ctx, ft_embedding(ctx, c->tt_w, tt), 1, 2));
    }
    ft_tensor *mk = mask ? ft_cast(ctx, mask, FT_DTYPE_F32) : NULL; /* [B, L] at the key level */
    ft_tensor *madd = fn_mask_add(ctx, mk), *madd0 = madd;

    ft_tensor *first = NULL;
    int64_t apps = 0;
    for (int b = 0; b < f->n_blocks && ctx->status == FT_OK; b++) {
        ft_tensor *hp = NULL;
        if (s.pooled[b]) {
            hp = fn_pool(ctx, f, h, f->pool_kind);
            if (!f->pool_q_only && mk) {
                mk = fn_pool(ctx, f, mk, 2);
                madd = fn_mask_add(ctx, mk);
            }
        }
        for (int64_t l = 0; l < f->block_sizes[b]; l++) {
            for (int64_t r = 0; r < f->block_repeats[b]; r++) {
                bool pooling = s.pooled[b] && l == 0 && r == 0;
                ft_tensor *xq = pooling ? hp : h, *xk = pooling && !f->pool_q_only ? hp : h;
                int g = FN_GEOM(b, pooling && f->pool_q_only);
                ft_tensor *next = NULL;
                st = fn_run_layer(m, f, &s, c, &sg, f->block_first[b] + l, g, xq, xk, madd, &next);
                if (st) goto done;
                if (pooling && f->pool_q_only && mk) {
                    mk = fn_pool(ctx, f, mk, 2);
                    madd = fn_mask_add(ctx, mk);
                }
                h = next;
                add_hidden(m, &hk, h);
                if (++apps == f->block_sizes[0]) first = h;
            }
        }
    }
    if (ctx->status == FT_OK && ft_model_want_hidden_states(m) && first)
        ft_model_add_output(m, "first_block_hidden_state", first);
    if (!f->base && ctx->status == FT_OK) {
        if (ft_model_want_hidden_states(m)) ft_model_add_output(m, "encoder_last_hidden_state", h);
        ft_tensor *x = ft_add(ctx, fn_upsample(ctx, f, h, s.up_stride, S), first);
        add_hidden(m, &hk, x);
        for (int64_t l = 0; l < f->n_dec; l++) {
            ft_tensor *next = NULL;
            st = fn_run_layer(m, f, &s, c, &sg, f->n_enc + l, FN_GEOM(0, 0), x, x, madd0, &next);
            if (st) goto done;
            x = next;
            add_hidden(m, &hk, x);
        }
        h = x;
    }
    ft_model_add_output(m, "last_hidden_state", h);
done:
    fn_consts_put(f, c, &local);
    fn_sched_free(&s);
    return ctx->status;
}

static ft_status funnel_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                    int *n_in, void **owned) {
    return ft_example_text_inputs(m, batch, length, ((const funnel *)m->priv)->vocab, in, n_in, owned);
}

static const char *const funnel_prefixes[] = {"funnel.", NULL};
static const char *const funnel_inputs[] = {"input_ids", "attention_mask", "token_type_ids", NULL};

/* funnel-transformer/{small,intermediate}[-base]: the config class defaults are "small" */
static const ft_preset funnel_presets[] = {
    {"funnel-small", "{\"model_type\": \"funnel\", \"architectures\": [\"FunnelModel\"]}"},
    {"funnel-small-base", "{\"model_type\": \"funnel\", \"architectures\": [\"FunnelBaseModel\"]}"},
    {"funnel-intermediate",
     "{\"model_type\": \"funnel\", \"architectures\": [\"FunnelModel\"], \"block_sizes\": [6, 6, 6]}"},
    {"funnel-intermediate-base",
     "{\"model_type\": \"funnel\", \"architectures\": [\"FunnelBaseModel\"], \"block_sizes\": [6, 6, 6]}"},
    {NULL, NULL},
};

const ft_arch ft_arch_funnel = {
    .model_type = "funnel",
    .prefixes = funnel_prefixes,
    .inputs = funnel_inputs,
    .load = funnel_load,
    .validate = funnel_validate,
    .forward = funnel_forward,
    .destroy = funnel_destroy,
    .example_inputs = funnel_example_inputs,
    .presets = funnel_presets,
};

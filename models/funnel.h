/*
 * funnel.h - shared between funnel.c (load, forward), funnel_sched.c (the
 * host-side length schedule and the per-length device constants) and
 * funnel_factorized.c (attention_type "factorized": its tables and score).
 */
#ifndef FT_FUNNEL_H
#define FT_FUNNEL_H

#include "model.h"

#define FN_MAX_BLOCKS 16
/* attention geometries: FN_GEOM(b, 0) = queries and keys at block b's length,
 * FN_GEOM(b, 1) = pooled queries of block b against block b-1's keys */
#define FN_MAX_GEOM (2 * FN_MAX_BLOCKS)
#define FN_GEOM(b, pooled) (2 * (b) + (pooled))
#define FN_CACHE 4 /* sequence lengths whose constants an eager model keeps */

typedef struct fn_layer {
    ft_tensor *wq;                     /* q_head [N*Dh, D], no bias */
    ft_tensor *wk, *bk, *wv, *bv;      /* [N*Dh, D], [N*Dh] */
    ft_tensor *rwb, *rrb, *rsb;        /* [N, Dh] */
    ft_tensor *rk;                     /* r_kernel [D, N, Dh] */
    ft_tensor *seg;                    /* seg_embed [2, N, Dh] */
    ft_tensor *wo, *bo;                /* post_proj [D, N*Dh], [D] */
    ft_tensor *ln1_w, *ln1_b;          /* [D] */
    ft_tensor *w1, *b1, *w2, *b2;      /* [I, D], [I], [D, I], [D] */
    ft_tensor *ln2_w, *ln2_b;
} fn_layer;

/* Device constants of one sequence length (persistent when cached). */
typedef struct fn_consts {
    int64_t S;                   /* 0: empty slot */
    bool kept;                   /* persistent tensors owned by the cache */
    ft_tensor *idx[FN_MAX_GEOM]; /* [1, Lq*Lk] i64 flat relative-shift gather of [Lq, T] */
    ft_tensor *cls[FN_MAX_GEOM]; /* [Lq, Lk] CLS mask, NULL without separate_cls */
    ft_tensor *R[FN_MAX_GEOM];   /* [T, D] sinusoids of the tabulated distances */
    ft_tensor *fq[FN_MAX_GEOM];  /* factorized: [Lq, 2, D] phi, pi at the query rows */
    ft_tensor *fk[FN_MAX_GEOM];  /* factorized: [2*D, Lk] psi^T over omega^T at the key rows */
    ft_tensor *sel[FN_MAX_BLOCKS]; /* [K+1, L] i64 original row of each row, NULL at block 0 */
    ft_tensor *tt_v, *tt_w;      /* [K, K+1] token-type codes: v(a) . w(b) = same segment */
    ft_tensor **rk;              /* [layers * 2] R . r_kernel per layer and geometry kind */
    int64_t n_rk;
} fn_consts;

typedef struct funnel {
    bool base; /* FunnelBaseModel: no decoder */
    int64_t vocab, d, heads, dh, inner, type_vocab, n_dec, n_enc;
    int n_blocks;
    int64_t block_sizes[FN_MAX_BLOCKS], block_repeats[FN_MAX_BLOCKS], block_first[FN_MAX_BLOCKS];
    float eps;
    int pool_kind; /* ft_pool_dim kind: 0 mean, 1 max */
    bool separate_cls, truncate_seq, pool_q_only;
    bool factorized; /* attention_type "factorized" instead of "relative_shift" */
    ft_act_kind act;
    ft_tensor *word, *emb_ln_w, *emb_ln_b; /* [V, D], [D] */
    fn_layer *layer; /* encoder layers (block by block), then decoder layers */
    fn_consts cache[FN_CACHE];
    int cache_next;
} funnel;

typedef struct fn_geom {
    bool used;
    int qlev, klev, shift;
    int64_t lq, lk, T, stride, max_dist;
    int64_t cols; /* key columns HF's shift leaves: lk, or 1 (broadcast over keys, short inputs) */
} fn_geom;

/* The host schedule of one input length: per block the hidden length, the
 * original row of every row, whether the block pooled, and the positions HF's
 * tables assume (which stop matching the rows once a too-short block skips
 * pooling; HF computes that case anyway and so do we); the attention geometries. */
typedef struct fn_sched {
    int64_t S;
    int64_t len[FN_MAX_BLOCKS], npos[FN_MAX_BLOCKS];
    bool pooled[FN_MAX_BLOCKS];
    int64_t *pos[FN_MAX_BLOCKS], *orig[FN_MAX_BLOCKS];
    fn_geom geom[FN_MAX_GEOM];
    int64_t up_stride; /* decoder upsampling factor 2^(blocks-1) */
} fn_sched;

/* Builds the schedule; a clear FT_ERR_SHAPE for lengths HF cannot pool. */
ft_status fn_sched_build(ft_ctx *ctx, const funnel *f, int64_t S, fn_sched *s);
void fn_sched_free(fn_sched *s);

/* The constants for s->S: cached (eager) or built into *local (tracing); NULL on error. */
fn_consts *fn_consts_get(ft_ctx *ctx, funnel *f, const fn_sched *s, ft_dtype dtype, fn_consts *local);
/* Ends a forward's use of c (frees *local's bookkeeping when c is local). */
void fn_consts_put(funnel *f, fn_consts *c, fn_consts *local);
void fn_consts_free(fn_consts *c);
/* R . r_kernel [T, N*Dh] of layer li for geometry g, computed once per length. */
ft_tensor *fn_consts_rk(ft_ctx *ctx, const funnel *f, fn_consts *c, int64_t li, int g);
/* f32 host values as a constant of dtype dt (persistent when c is a kept cache slot). */
ft_tensor *fn_upload_float(ft_ctx *ctx, fn_consts *c, ft_dtype dt, int ndim, const int64_t *shape,
                           float *data, int64_t n);

/* ---- attention_type "factorized" (funnel_factorized.c) ---- */

/* c->fq[g] and c->fk[g]: HF's phi, pi (query rows) and psi, omega (key rows). */
ft_status fn_fz_build_geom(ft_ctx *ctx, const funnel *f, const fn_sched *s, fn_consts *c, int g, ft_dtype dt);
/* The positional score [B, N, Lq, Lk] (before the CLS mask) of qr = q + r_r_bias
 * given head-major [N, B*Lq, Dh]; *base gets the tensor the result views. */
ft_tensor *fn_fz_positional(ft_ctx *ctx, const funnel *f, const fn_layer *L, ft_tensor *qr, int64_t B,
                            ft_tensor *fq, ft_tensor *fk, ft_tensor **base);

#endif /* FT_FUNNEL_H */

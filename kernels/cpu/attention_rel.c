/*
 * attention_rel.c - CPU kernel of the disentangled (DeBERTa) attention
 * (engine/ops.h, FT_OP_ATTENTION_REL): per (batch, head, block of query rows)
 * the scores scale q k^T go into a scratch block by SGEMM, the two relative
 * terms are gathered into them row by row from the [.., S, 2 span] products
 * (c2p[i, d(i, j)] and p2c[j, d(i, j)], d = clamp(i - j + span)), then the mask,
 * a softmax, the product with v and the row scale. Neither the gathered
 * [B, H, Sq, Sk] terms nor the scores of more than one block are ever stored.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "gemm.h"
#include "vrow.h"

#include <omp.h>
#include <string.h>

/* Rows of the score matrix handled at once, so the scratch stays ~4 MiB. */
static int64_t score_rows(int64_t sq, int64_t sk) {
    int64_t r = (int64_t)1 << 20;
    r = sk > 0 ? r / sk : sq;
    if (r < 1) r = 1;
    return r < sq ? r : sq;
}

/* A float operand as f32: element (b, h, i, j) at p[b s0 + h s1 + i s2 + j s3]. */
typedef struct rel_op {
    const float *p;
    int64_t s[4];
} rel_op;

typedef struct rel_args {
    rel_op q, k, v, c2p, p2c, mask, rs;
    float *out;      /* [B, H, Sq, Dv] through os */
    int64_t os[3];   /* strides over B, H, Sq (the last is 1) */
    int64_t h, sq, sk, d, dv, span;
    float scale;
} rel_args;

/* f32 view of t: in place (any strides) when it is f32, else a contiguous staged copy.
 * Strides broadcast to 4 dims (0 where t lacks a dim or has size 1). -1 on OOM. */
static int rel_get(const ft_tensor *t, ft_cpu_f32 *f, rel_op *o) {
    memset(o, 0, sizeof *o);
    if (!t) return 0;
    if (ft_cpu_f32_get(t, t->dtype == FT_DTYPE_F32, f)) return -1;
    o->p = f->p;
    int64_t cs[FT_MAX_DIMS], acc = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        cs[d] = f->owned ? acc : t->nb[d];
        acc *= t->ne[d];
    }
    for (int d = 0; d < 4; d++) {
        int td = d - (4 - t->ndim);
        o->s[d] = td >= 0 && t->ne[td] != 1 ? cs[td] : 0;
    }
    return 0;
}

static inline int64_t rel_idx(int64_t i, int64_t j, int64_t span) {
    int64_t d = i - j + span;
    return d < 0 ? 0 : d > 2 * span - 1 ? 2 * span - 1 : d;
}

/* rows [i0, i0+ni) of head (b, hh); s is scratch [ni, Sk]. 0 or -1 (OOM). */
static int rel_block(const rel_args *A, int64_t b, int64_t hh, int64_t i0, int64_t ni, float *s) {
    const float *q = A->q.p + b * A->q.s[0] + hh * A->q.s[1] + i0 * A->q.s[2];
    const float *k = A->k.p + b * A->k.s[0] + hh * A->k.s[1];
    const float *v = A->v.p + b * A->v.s[0] + hh * A->v.s[1];
    float *o = A->out + b * A->os[0] + hh * A->os[1] + i0 * A->os[2];
    if (ft_cpu_sgemm(false, true, ni, A->sk, A->d, A->scale, q, A->q.s[2], k, A->k.s[2], 0.0f, s, A->sk))
        return -1;
    const rel_op *c = &A->c2p, *p = &A->p2c, *m = &A->mask;
    for (int64_t r = 0; r < ni; r++) {
        int64_t i = i0 + r;
        float *row = s + r * A->sk;
        if (c->p) {
            const float *cr = c->p + b * c->s[0] + hh * c->s[1] + i * c->s[2];
            for (int64_t j = 0; j < A->sk; j++) row[j] += cr[rel_idx(i, j, A->span) * c->s[3]];
        }
        if (p->p) {
            const float *pb = p->p + b * p->s[0] + hh * p->s[1];
            for (int64_t j = 0; j < A->sk; j++) row[j] += pb[j * p->s[2] + rel_idx(i, j, A->span) * p->s[3]];
        }
        if (m->p) {
            const float *mr = m->p + b * m->s[0] + hh * m->s[1] + i * m->s[2];
            for (int64_t j = 0; j < A->sk; j++) row[j] += mr[j * m->s[3]];
        }
        ft_cpu_row_softmax(row, A->sk);
    }
    /* o [ni, Dv] = s [ni, Sk] v [Sk, Dv] */
    if (ft_cpu_sgemm(false, false, ni, A->dv, A->sk, 1.0f, s, A->sk, v, A->v.s[2], 0.0f, o, A->os[2]))
        return -1;
    if (A->rs.p) {
        const float *rb = A->rs.p + b * A->rs.s[0] + hh * A->rs.s[1];
        for (int64_t r = 0; r < ni; r++) ft_cpu_row_scale(o + r * A->os[2], A->dv, rb[(i0 + r) * A->rs.s[2]], 0.0f);
    }
    return 0;
}

FT_CPU_KERNEL_DEF(attention_rel) {
    const ft_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
    rel_args A;
    memset(&A, 0, sizeof A);
    int64_t nb_ = q->ne[0];
    A.h = q->ne[1];
    A.sq = q->ne[2];
    A.sk = k->ne[2];
    A.d = q->ne[3];
    A.dv = v->ne[3];
    A.scale = FT_PARAMS(dst, ft_params_attention_rel)->scale;
    A.span = FT_PARAMS(dst, ft_params_attention_rel)->span;

    /* q, k, v need unit inner strides as GEMM operands: staged when not f32 or not unit */
    ft_cpu_f32 f[7];
    memset(f, 0, sizeof f);
    rel_op *ops[7] = {&A.q, &A.k, &A.v, &A.mask, &A.c2p, &A.p2c, &A.rs};
    ft_cpu_buf yb = {0}, sb = {0};
    int st = FT_OK;
    bool in_place = dst->dtype == FT_DTYPE_F32 && (dst->nb[3] == 1 || A.dv <= 1);
    float *y = in_place ? (float *)dst->data
                        : ft_cpu_buf_get(&yb, ft_cpu_scratch_cur(), FT_SCR_OUT,
                                         (size_t)(ft_numel(dst) > 0 ? ft_numel(dst) : 1) * sizeof(float));
    for (int i = 0; i < 7 && st == FT_OK && y; i++) {
        const ft_tensor *t = dst->src[i];
        if (i < 3 && t && t->dtype == FT_DTYPE_F32 && t->nb[3] != 1 && t->ne[3] != 1) {
            /* a GEMM operand with a strided last dim: staged contiguous */
            if (ft_cpu_f32_get(t, false, &f[i])) st = FT_ERR_OOM;
            else {
                memset(ops[i], 0, sizeof *ops[i]);
                ops[i]->p = f[i].p;
                ops[i]->s[3] = 1;
                ops[i]->s[2] = t->ne[3];
                ops[i]->s[1] = t->ne[2] * t->ne[3];
                ops[i]->s[0] = t->ne[1] * t->ne[2] * t->ne[3];
            }
        } else if (rel_get(t, &f[i], ops[i])) {
            st = FT_ERR_OOM;
        }
    }
    if (!y || st != FT_OK) {
        st = ft_set_error(ctx, FT_ERR_OOM, "attention_rel: out of host memory for f32 staging");
        goto done;
    }
    /* size-1 head or row dims keep a usable stride for the GEMMs */
    if (A.q.s[2] == 0) A.q.s[2] = A.d;
    if (A.k.s[2] == 0) A.k.s[2] = A.d;
    if (A.v.s[2] == 0) A.v.s[2] = A.dv;
    A.out = y;
    A.os[2] = in_place && A.sq > 1 ? dst->nb[2] : A.dv;
    A.os[1] = in_place && A.h > 1 ? dst->nb[1] : A.sq * A.dv;
    A.os[0] = in_place ? dst->nb[0] : A.h * A.sq * A.dv;

    int64_t rb = score_rows(A.sq, A.sk);
    int64_t nblk = A.sq > 0 ? (A.sq + rb - 1) / rb : 0;
    int64_t tasks = nb_ * A.h * nblk;
    int nt = ft_cpu_gemm_threads();
    size_t sbytes = (size_t)(rb * (A.sk > 0 ? A.sk : 1)) * sizeof(float);
    if (tasks <= 0) goto done;
    if (nt > 1 && tasks >= nt) {
        int failed = 0;
        ft_cpu_scratch *sc = ft_cpu_scratch_cur();
#pragma omp parallel num_threads(nt) reduction(| : failed)
        {
            if (omp_get_thread_num() == 0) ft_cpu_team_note(omp_get_num_threads());
            ft_cpu_scratch *prev = ft_cpu_scratch_swap(sc);
            ft_cpu_buf tb;
            float *s = ft_cpu_buf_get(&tb, sc, FT_SCR_ATTN, sbytes);
            if (!s) failed = 1;
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = 0; t < tasks; t++) {
                if (!s) continue;
                int64_t blk = t % nblk, bh = t / nblk;
                int64_t i0 = blk * rb, ni = A.sq - i0 < rb ? A.sq - i0 : rb;
                if (rel_block(&A, bh / A.h, bh % A.h, i0, ni, s)) failed = 1;
            }
            ft_cpu_buf_put(&tb);
            ft_cpu_scratch_swap(prev);
        }
        if (failed) st = ft_set_error(ctx, FT_ERR_OOM, "attention_rel: out of host memory for scores");
    } else {
        float *s = ft_cpu_buf_get(&sb, ft_cpu_scratch_cur(), FT_SCR_ATTN, sbytes);
        if (!s) st = ft_set_error(ctx, FT_ERR_OOM, "attention_rel: out of host memory for scores");
        for (int64_t t = 0; s && t < tasks && st == FT_OK; t++) {
            int64_t blk = t % nblk, bh = t / nblk;
            int64_t i0 = blk * rb, ni = A.sq - i0 < rb ? A.sq - i0 : rb;
            if (rel_block(&A, bh / A.h, bh % A.h, i0, ni, s))
                st = ft_set_error(ctx, FT_ERR_OOM, "attention_rel: out of host memory for scores");
        }
    }
done:
    if (st == FT_OK && y && !in_place) {
        /* [B, H, Sq, Dv] f32 into dst's layout and dtype */
        int64_t n = ft_numel(dst);
        for (int64_t e = 0; e < n; e++) {
            int64_t rem = e, off = 0;
            for (int d = 3; d >= 0; d--) {
                off += (rem % dst->ne[d]) * dst->nb[d];
                rem /= dst->ne[d];
            }
            ft_cpu_store(dst->data, dst->dtype, off, y[e]);
        }
    }
    ft_cpu_buf_put(&sb);
    ft_cpu_buf_put(&yb);
    for (int i = 0; i < 7; i++) ft_cpu_f32_release(&f[i]);
    return st;
}

/*
 * linear.c - CPU kernels of linear, matmul and attention, all on the blocked
 * SGEMM of gemm.c. f32 operands are used in place whenever their layout is a
 * GEMM operand; f16/bf16 operands are staged into f32 buffers, computed in f32
 * and rounded once on store.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "gemm.h"
#include "gemm_micro.h"
#include "nchwc.h"
#include "pack_cache.h"
#include "vrow.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static int oom(ft_ctx *ctx, const char *op) {
    return ft_set_error(ctx, FT_ERR_OOM, "%s: out of host memory for f32 staging or GEMM packing scratch", op);
}

/* The output in f32: dst's own storage when it is f32, else a scratch buffer
 * (*ob, given back by out_done / out_drop). */
static float *out_f32(ft_tensor *dst, ft_cpu_buf *ob) {
    memset(ob, 0, sizeof *ob);
    if (dst->dtype == FT_DTYPE_F32) return (float *)dst->data;
    int64_t n = ft_numel(dst);
    return ft_cpu_buf_get(ob, ft_cpu_scratch_cur(), FT_SCR_OUT, (size_t)(n > 0 ? n : 1) * sizeof(float));
}

/* Gives a scratch output back unstored (an error). */
static void out_drop(ft_cpu_buf *ob) { ft_cpu_buf_put(ob); }

/* Contiguous f32 values y of dst's shape stored into dst's strides and dtype. */
static void strided_store(ft_tensor *dst, const float *y) {
    int64_t n = ft_numel(dst);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = 0;
        for (int d = dst->ndim - 1; d >= 0; d--) {
            off += (rem % dst->ne[d]) * dst->nb[d];
            rem /= dst->ne[d];
        }
        ft_cpu_store(dst->data, dst->dtype, off, y[i]);
    }
}

static void out_done(ft_tensor *dst, float *y, ft_cpu_buf *ob) {
    if ((void *)y == dst->data) return;
    ft_cpu_f32_store(dst, y, ft_numel(dst));
    ft_cpu_buf_put(ob);
}

/* ------------------------------------------------------------------------- */
/* linear                                                                    */
/* ------------------------------------------------------------------------- */

/* ---- weights packed at plan time ---- */

static int prepacks_made; /* test hook (ft_cpu_prepack_count) */

int ft_cpu_prepack_count(void) {
    int n;
#pragma omp atomic read
    n = prepacks_made;
    return n;
}

/* The packed weight a plan left in a linear node, if it still matches it. */
static const ft_cpu_packed_b *node_packed(const ft_tensor *dst) {
    const ft_cpu_packed_b *p = (const ft_cpu_packed_b *)dst->extra;
    const ft_tensor *w = dst->src[1];
    if (!p || dst->op != FT_OP_LINEAR || dst->device != FT_DEVICE_CPU) return NULL;
    return p->src == w->data && p->mr == 0 && p->n == w->ne[0] && p->k == w->ne[1] ? p : NULL;
}

int ft_cpu_prepack(ft_ctx *ctx, ft_tensor *n) {
    const ft_tensor *w = n->src[1];
    if (n->device != FT_DEVICE_CPU || n->extra || !w || !w->data || !(w->flags & FT_TF_WEIGHT) ||
        !ft_dtype_is_float(w->dtype))
        return FT_OK;
    if (n->op == FT_OP_DWCONV2D) { /* only the blocked kernel packs its depthwise weights */
        ft_cpu_set_threads(ctx->cpu_threads);
        if ((n->flags & FT_TF_NCHWC) && ft_cpu_nchwc_conv_prepack(n)) {
#pragma omp atomic
            prepacks_made++;
        }
        return FT_OK;
    }
    if (n->op == FT_OP_CONV1D || n->op == FT_OP_CONV2D) {
        ft_cpu_set_threads(ctx->cpu_threads);
        bool done = (n->flags & FT_TF_NCHWC) ? ft_cpu_nchwc_conv_prepack(n) : ft_cpu_conv_prepack(ctx, n);
        if (done) {
#pragma omp atomic
            prepacks_made++;
        }
        return FT_OK;
    }
    if (n->op == FT_OP_LINEAR_GROUPED) {
        if (ft_cpu_linear_grouped_prepack(ctx, n)) {
#pragma omp atomic
            prepacks_made++;
        }
        return FT_OK;
    }
    if (n->op != FT_OP_LINEAR || w->ndim != 2) return FT_OK;
    ft_cpu_set_threads(ctx->cpu_threads);
    ft_cpu_f32 fw = {0};
    if (ft_cpu_f32_get(w, ft_tensor_contiguous(w), &fw)) return FT_OK; /* packs per call instead */
    /* W [N, K] is op(B) = W^T */
    ft_cpu_packed_b *p = ft_cpu_pack_b(true, w->ne[1], w->ne[0], fw.p, w->ne[1]);
    ft_cpu_f32_release(&fw);
    if (!p) return FT_OK;
    p->src = w->data;
    n->extra = p;
#pragma omp atomic
    prepacks_made++;
    return FT_OK;
}

int ft_cpu_prepack_shared(ft_ctx *ctx, ft_tensor *n, ft_tensor *const *done, int n_done) {
    const ft_tensor *w = n->src[1];
    /* SGEMM panels only: a blocked-channel convolution's weight (ft_cpu_nchwc_w)
     * has no reference count, and is packed per node */
    bool packable = n->device == FT_DEVICE_CPU && !n->extra && w && w->data && !(n->flags & FT_TF_NCHWC) &&
                    (n->op == FT_OP_LINEAR || n->op == FT_OP_CONV1D || n->op == FT_OP_CONV2D);
    for (int i = 0; packable && i < n_done; i++) {
        const ft_tensor *o = done[i], *ow = o->src[1];
        if (o == n || o->op != n->op || !o->extra || (o->flags & FT_TF_NCHWC) ||
            *(const uint32_t *)o->extra == FT_CPU_NCHWC_W_MAGIC || !ow || ow->data != w->data || ow->dtype != w->dtype ||
            ow->ndim != w->ndim || memcmp(ow->ne, w->ne, sizeof w->ne[0] * (size_t)w->ndim))
            continue;
        if (n->op != FT_OP_LINEAR &&
            FT_PARAMS(o, ft_params_conv)->groups != FT_PARAMS(n, ft_params_conv)->groups)
            continue;
        ft_cpu_packed_b *p = (ft_cpu_packed_b *)o->extra;
        if (p->src != w->data) continue;
        p->refs++;
        n->extra = p;
        return FT_OK;
    }
    return ft_cpu_prepack(ctx, n);
}

void ft_cpu_unpack(ft_tensor *n) {
    if (!n || n->device != FT_DEVICE_CPU || !n->extra) return;
    if (n->op != FT_OP_LINEAR && n->op != FT_OP_LINEAR_GROUPED && n->op != FT_OP_CONV1D && n->op != FT_OP_CONV2D &&
        n->op != FT_OP_DWCONV2D)
        return;
    /* a blocked-channel convolution's weight (ft_cpu_nchwc_w) or SGEMM panels */
    if (*(const uint32_t *)n->extra == FT_CPU_NCHWC_W_MAGIC) ft_cpu_nchwc_w_free((ft_cpu_nchwc_w *)n->extra);
    else ft_cpu_packed_b_free((ft_cpu_packed_b *)n->extra);
    n->extra = NULL;
}

FT_CPU_KERNEL_DEF(linear) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1], *bias = dst->src[2], *res = dst->src[3];
    int act = FT_PARAMS(dst, ft_params_linear)->act;
    float alpha = FT_PARAMS(dst, ft_params_linear)->alpha;
    int64_t k = w->ne[1], n = w->ne[0];
    int64_t rows = 0, rs = 0;
    bool x_rows = ft_tensor_rows_layout(x, &rows, &rs);
    if (!x_rows) {
        rows = k > 0 ? ft_numel(x) / k : 0;
        rs = k;
    }
    if (k == 0) rows = ft_numel(dst) / (n > 0 ? n : 1);
    if (rows == 1) rs = k; /* a single row's stride is never used, keep it sane */

    ft_cpu_f32 fx = {0}, fw = {0}, fb = {0}, fr = {0};
    ft_cpu_buf yb;
    float *y = out_f32(dst, &yb); /* [rows, N] */
    /* an f32 residual is accumulated by the GEMM itself (beta = 1), which also
     * keeps a residual that shares the output's storage correct */
    bool res_in_c = res && y == dst->data && res->dtype == FT_DTYPE_F32 && ft_tensor_contiguous(res);
    const ft_cpu_packed_b *pk = k > 0 && n > 0 ? node_packed(dst) : NULL;
    /* eager mode (no plan panels): a model parameter's panels from the context's cache */
    if (!pk && k > 0 && n > 0 && !dst->extra) pk = ft_cpu_pack_cache_linear(ctx, w);
    int st = FT_OK;
    if (!y || ft_cpu_f32_get(x, x_rows, &fx) || (!pk && ft_cpu_f32_get(w, ft_tensor_contiguous(w), &fw)) ||
        (bias && ft_cpu_f32_get(bias, bias->nb[0] == 1 || bias->ne[0] == 1, &fb)) ||
        (res && !res_in_c && ft_cpu_f32_get(res, ft_tensor_contiguous(res), &fr))) {
        st = oom(ctx, "linear");
        goto done;
    }
    if (fx.owned) rs = k; /* the staged copy is contiguous */
    if (res_in_c && res->data != (void *)y)
        memmove(y, res->data, (size_t)(rows * n) * sizeof(float));
    /* y [rows, N] = alpha x [rows, K] * W^T (+ y holding the residual), W [N, K];
     * bias and activation fused into the GEMM's tile stores unless a residual that
     * is not in y must come before the activation */
    ft_cpu_gemm_ep ep = {fb.p, false, act};
    int gst = pk ? ft_cpu_sgemm_packed(false, rows, alpha, fx.p, rs, pk, res_in_c ? 1.0f : 0.0f, y, n,
                                       fr.p ? NULL : &ep)
                 : ft_cpu_sgemm_ep(false, true, rows, n, k, alpha, fx.p, rs, fw.p, k,
                                   res_in_c ? 1.0f : 0.0f, y, n, fr.p ? NULL : &ep);
    if (gst) {
        st = oom(ctx, "linear");
        goto done;
    }
    if (fr.p) ft_cpu_epilogue(y, rows, n, 1, fb.p, fr.p, act);
done:
    ft_cpu_f32_release(&fx);
    ft_cpu_f32_release(&fw);
    ft_cpu_f32_release(&fb);
    ft_cpu_f32_release(&fr);
    if (y && st == FT_OK) out_done(dst, y, &yb);
    else out_drop(&yb);
    return st;
}

/* ------------------------------------------------------------------------- */
/* matmul                                                                    */
/* ------------------------------------------------------------------------- */

/* One GEMM operand as f32: in place when possible, otherwise a contiguous copy. */
typedef struct operand {
    ft_cpu_f32 f;
    int64_t batch, bstride, ld;
    bool trans;
} operand;

static int operand_get(const ft_tensor *t, operand *o) {
    int n = t->ndim;
    bool ok = ft_gemm_operand(t, &o->batch, &o->bstride, &o->trans, &o->ld);
    if (ft_cpu_f32_get(t, ok, &o->f)) return -1;
    if (o->f.owned) {
        int64_t r = t->ne[n - 2], c = t->ne[n - 1];
        o->batch = r * c > 0 ? ft_numel(t) / (r * c) : 1;
        o->bstride = o->batch > 1 ? r * c : 0;
        o->trans = false;
        o->ld = c > 0 ? c : 1;
    }
    return 0;
}

FT_CPU_KERNEL_DEF(matmul) {
    const ft_tensor *a = dst->src[0], *b = dst->src[1];
    float alpha = FT_PARAMS(dst, ft_params_matmul)->alpha;
    int nd = dst->ndim;
    int64_t m = dst->ne[nd - 2], n = dst->ne[nd - 1], k = a->ne[nd - 1];
    int64_t batch = 1;
    for (int i = 0; i < nd - 2; i++) batch *= dst->ne[i];

    operand oa = {0}, ob = {0};
    ft_cpu_buf yb;
    float *y = out_f32(dst, &yb); /* [batch, M, N] */
    int st = FT_OK;
    if (!y || operand_get(a, &oa) || operand_get(b, &ob)) {
        st = oom(ctx, "matmul");
        goto done;
    }
    /* an operand with a single matrix broadcasts over the batch */
    if (oa.batch == 1) oa.bstride = 0;
    if (ob.batch == 1) ob.bstride = 0;
    if (ft_cpu_sgemm_batched(oa.trans, ob.trans, m, n, k, alpha, oa.f.p, oa.ld, oa.bstride, ob.f.p,
                             ob.ld, ob.bstride, 0.0f, y, n, m * n, batch))
        st = oom(ctx, "matmul");
done:
    ft_cpu_f32_release(&oa.f);
    ft_cpu_f32_release(&ob.f);
    if (y && st == FT_OK) out_done(dst, y, &yb);
    else out_drop(&yb);
    return st;
}

/* ------------------------------------------------------------------------- */
/* attention                                                                 */
/* ------------------------------------------------------------------------- */

typedef struct attn_args {
    const float *q, *k, *v;  /* f32 bases */
    int64_t qs[3], ks[3], vs[3]; /* element strides of B, H, S */
    const float *mask;
    int64_t ms[4];           /* mask strides over [B, H, Sq, Sk], 0 = broadcast */
    float *out;              /* [B, H, Sq, Dv] */
    int64_t os[3];           /* its strides over B, H, Sq (the last is 1) */
    int64_t h, sq, sk, d, dv;
    float scale;
    int64_t qb;              /* query rows per block (a multiple of the micro-tile's rows) */
    int causal;              /* HF GPT-2's causal replacement (ft_params_attention) */
} attn_args;

/* max-subtracted softmax of one score row, mask added first; every key masked
 * gives NaN, as the softmax op and PyTorch give (HF WavLM's all-padding rows), so
 * graph mode's fused attention agrees with eager */
static void softmax_row(float *s, int64_t sk, const float *m, int64_t mstride) {
    if (m) {
        if (mstride == 1) {
            ft_cpu_row_binary(FT_OP_ADD, s, m, sk, 0);
        } else {
            float mb[FT_CPU_CHUNK];
            for (int64_t j0 = 0; j0 < sk; j0 += FT_CPU_CHUNK) {
                int64_t len = sk - j0 < FT_CPU_CHUNK ? sk - j0 : FT_CPU_CHUNK;
                ft_cpu_row_load(m, FT_DTYPE_F32, j0 * mstride, mstride, len, mb);
                ft_cpu_row_binary(FT_OP_ADD, s + j0, mb, len, 0);
            }
        }
    }
    ft_cpu_row_softmax(s, sk);
}

static int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Floats of one thread's attention scratch: K^T and V packed for a head, then a
 * query block's Q slivers, scores [qb, Sk] and probability slivers. */
static int64_t attn_floats(const attn_args *A, int mr) {
    int64_t skp = rup(A->sk, FT_CPU_GEMM_NR), qbp = rup(A->qb, mr);
    return A->d * skp + A->sk * rup(A->dv, FT_CPU_GEMM_NR) + qbp * A->d + 2 * qbp * A->sk;
}

/*
 * Rows [i0, i1) of head (b, hh), one query block of A->qb rows at a time, all on
 * the SGEMM's micro-kernels: K^T and V are packed once for the head, then per
 * block S [qb, Sk] = scale Q K^T, the masked softmax of each row, O = P V written
 * straight into the output. Only a [qb, Sk] block of scores exists (cache
 * resident), never [Sq, Sk]. The products are summed in the order the blocked
 * SGEMM sums them: V and P in depth blocks of its kc, each block's sum added to
 * the output, so P V is the unfused path's to the bit, and so is Q K^T for D
 * within one depth block.
 *
 * Causal (HF GPT-2): the scores of query i at keys j > i + (Sk - Sq) are replaced
 * by finfo(float32).min before the mask is added (ft_cpu_causal_row), so their
 * products are not computed (a block computes the tiles of keys below its last
 * row's limit); P V stops at the last key with a nonzero probability in any row
 * of the block, rounded up to a depth block (the keys skipped add exact zeros).
 */
static void attn_rows(const attn_args *A, int64_t b, int64_t hh, int64_t i0, int64_t i1, float *buf) {
    const ft_cpu_gemm_kern *kr = ft_cpu_gemm_kern_get();
    const int mr = kr->mr;
    const int64_t NR = FT_CPU_GEMM_NR, TW = kr->ncols, KC = kr->kc, sk = A->sk, d = A->d, dv = A->dv;
    const int64_t skp = rup(sk, NR), dvp = rup(dv, NR), qbp = rup(A->qb, mr), off = sk - A->sq;
    const float *q = A->q + b * A->qs[0] + hh * A->qs[1];
    const float *k = A->k + b * A->ks[0] + hh * A->ks[1];
    const float *v = A->v + b * A->vs[0] + hh * A->vs[1];
    float *o = A->out + b * A->os[0] + hh * A->os[1];
    /* kt: K^T slivers [D][NR] per NR keys; vp: V [Sk][Dv] in depth blocks of KC keys,
     * block c at c * KC * Dvp holding slivers [kcc][NR]; pp likewise for P, per row sliver */
    float *kt = buf, *vp = kt + d * skp, *qp = vp + sk * dvp, *s = qp + qbp * d, *pp = s + qbp * sk;
    /* causal: the keys any of the rows [i0, i1) sees, to whole tiles (a tile reads
     * all its slivers) */
    int64_t kmax = A->causal ? rup(i1 + off, TW) : sk;
    kmax = kmax < 0 ? 0 : kmax > sk ? sk : kmax;
    if (kmax > 0) ft_cpu_gemm_pack_b(true, k, A->ks[2], 0, 0, d, kmax, kt);
    int64_t vdone = 0; /* V's depth blocks packed so far (on first use) */
    for (int64_t r0 = i0; r0 < i1; r0 += A->qb) {
        const int64_t nq = i1 - r0 < A->qb ? i1 - r0 : A->qb;
        /* S [nq, kend) = scale Q K^T (the scale folded into Q's slivers, as the SGEMM
         * folds alpha); causal: the keys past the block's last row's limit are left
         * for ft_cpu_causal_row */
        int64_t kend = A->causal ? r0 + nq + off : sk;
        kend = kend < 0 ? 0 : kend > sk ? sk : kend;
        if (kend > 0) {
            ft_cpu_gemm_pack_a(false, q, A->qs[2], r0, 0, nq, d, A->scale, mr, qp);
            for (int64_t jr = 0; jr < kend; jr += TW) {
                const int nr = (int)(sk - jr < TW ? sk - jr : TW);
                for (int64_t ir = 0; ir < nq; ir += mr)
                    (nr > NR ? kr->fn : kr->fn16)(d, qp + ir * d, kt + jr * d, s + ir * sk + jr, sk, 0.0f,
                                                  (int)(nq - ir < mr ? nq - ir : mr), nr);
            }
        }
        int64_t kz = A->causal ? 0 : sk; /* keys up to the last nonzero probability */
        for (int64_t i = 0; i < nq; i++) {
            const float *m = A->mask ? A->mask + b * A->ms[0] + hh * A->ms[1] + (r0 + i) * A->ms[2] : NULL;
            float *row = s + i * sk;
            if (A->causal) ft_cpu_causal_row(row, sk, r0 + i, off);
            softmax_row(row, sk, m, A->ms[3]);
            if (A->causal) { /* NaN rows (every key masked) keep all keys */
                int64_t j = sk;
                while (j > kz && row[j - 1] == 0.0f) j--;
                kz = j;
            }
        }
        /* O [nq, Dv] = P [nq, Sk] V, into the output rows, one depth block at a time
         * (at least one: a row of zeros still writes its output) */
        const int64_t nkb = kz > 0 ? (kz + KC - 1) / KC : 1;
        for (int64_t c = 0; c < nkb; c++) {
            const int64_t p0 = c * KC, kcc = sk - p0 < KC ? sk - p0 : KC;
            float *vc = vp + p0 * dvp, *pc = pp + p0 * qbp;
            for (; vdone <= c; vdone++) {
                const int64_t q0 = vdone * KC;
                ft_cpu_gemm_pack_b(false, v, A->vs[2], q0, 0, sk - q0 < KC ? sk - q0 : KC, dv, vp + q0 * dvp);
            }
            ft_cpu_gemm_pack_a(false, s, sk, 0, p0, nq, kcc, 1.0f, mr, pc);
            for (int64_t jr = 0; jr < dv; jr += TW) {
                const int nr = (int)(dv - jr < TW ? dv - jr : TW);
                for (int64_t ir = 0; ir < nq; ir += mr)
                    (nr > NR ? kr->fn : kr->fn16)(kcc, pc + ir * kcc, vc + jr * kcc, o + (r0 + ir) * A->os[2] + jr,
                                                  A->os[2], c ? 1.0f : 0.0f, (int)(nq - ir < mr ? nq - ir : mr), nr);
            }
        }
    }
}

FT_CPU_KERNEL_DEF(attention) {
    const ft_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
    attn_args A;
    memset(&A, 0, sizeof A);
    int64_t nb_ = q->ne[0];
    A.h = q->ne[1];
    A.sq = q->ne[2];
    A.sk = k->ne[2];
    A.d = q->ne[3];
    A.dv = v->ne[3];
    A.scale = FT_PARAMS(dst, ft_params_attention)->scale;
    A.causal = FT_PARAMS(dst, ft_params_attention)->causal;

    /* f32 q/k/v with a unit inner stride are read in place through their strides */
    ft_cpu_f32 fq = {0}, fk = {0}, fv = {0};
    const ft_tensor *qkv[3] = {q, k, v};
    ft_cpu_f32 *f[3] = {&fq, &fk, &fv};
    int64_t *strides[3] = {A.qs, A.ks, A.vs};
    ft_cpu_buf yb;
    float *y = out_f32(dst, &yb);
    int st = FT_OK;
    if (!y) {
        st = oom(ctx, "attention");
        goto done;
    }
    for (int i = 0; i < 3; i++) {
        const ft_tensor *t = qkv[i];
        bool unit = t->nb[3] == 1 || t->ne[3] == 1;
        if (ft_cpu_f32_get(t, unit, f[i])) {
            st = oom(ctx, "attention");
            goto done;
        }
        if (f[i]->owned) {
            /* a staged copy is contiguous [B, H, S, D] */
            strides[i][2] = t->ne[3];
            strides[i][1] = t->ne[2] * t->ne[3];
            strides[i][0] = t->ne[1] * t->ne[2] * t->ne[3];
        } else {
            for (int d = 0; d < 3; d++) strides[i][d] = t->nb[d];
        }
    }
    A.q = fq.p;
    A.k = fk.p;
    A.v = fv.p;
    A.out = y;
    /* f32 output is written in place through its strides (graph mode may lay it out
     * as [B, S, H, Dv]); other dtypes go through a contiguous f32 buffer */
    bool in_place = (void *)y == dst->data;
    A.os[2] = in_place && A.sq > 1 ? dst->nb[2] : A.dv;
    A.os[1] = in_place && A.h > 1 ? dst->nb[1] : A.sq * A.dv;
    A.os[0] = in_place ? dst->nb[0] : A.h * A.sq * A.dv;
    if (in_place && dst->nb[3] != 1 && A.dv > 1) {
        st = ft_set_error(ctx, FT_ERR_INTERNAL, "attention: the output has a non-unit last stride");
        goto done;
    }
    if (mask) {
        A.mask = (const float *)mask->data;
        for (int d = 0; d < 4; d++) {
            int md = d - (4 - mask->ndim);
            A.ms[d] = md >= 0 && mask->ne[md] != 1 ? mask->nb[md] : 0;
        }
    }

    /* query blocks whose scores [qb, Sk] stay within ~64 KiB (causal: blocks of
     * rows also let the later keys of early rows be skipped) */
    const int mr = ft_cpu_gemm_kern_get()->mr;
    A.qb = (16384 / (A.sk > 0 ? A.sk : 1)) / mr * mr;
    A.qb = A.qb < mr ? mr : A.qb > 64 ? 64 : A.qb;
    const int64_t heads = nb_ * A.h, nqb = A.sq > 0 ? (A.sq + A.qb - 1) / A.qb : 0;
    int nt = ft_cpu_gemm_threads();
    if (heads <= 0 || nqb <= 0 || A.sk <= 0) {
        /* no keys: an empty weighted sum, zeros (as PyTorch's softmax-then-matmul gives) */
        if (heads > 0 && nqb > 0)
            for (int64_t bh = 0; bh < heads; bh++)
                for (int64_t i = 0; i < A.sq; i++)
                    for (int64_t j = 0; j < A.dv; j++)
                        A.out[(bh / A.h) * A.os[0] + (bh % A.h) * A.os[1] + i * A.os[2] + j] = 0.0f;
        goto done;
    }
    /* one task per head (K and V packed once), or per query block of a head when
     * there are too few heads for the team (each packs its head's K and V) */
    const int64_t split = nt > 1 && heads < 2 * nt ? nqb : 1, tasks = heads * split;
    const size_t bytes = (size_t)attn_floats(&A, mr) * sizeof(float);
    ft_cpu_scratch *sc = ft_cpu_scratch_cur();
    int failed = 0;
#pragma omp parallel num_threads(nt) if (nt > 1 && tasks > 1) reduction(| : failed)
    {
        if (omp_get_thread_num() == 0) ft_cpu_team_note(omp_get_num_threads());
        ft_cpu_buf tb;
        float *buf = ft_cpu_buf_get(&tb, sc, FT_SCR_ATTN, bytes);
        if (!buf) failed = 1;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tasks; t++) {
            if (!buf) continue;
            const int64_t bh = t / split, blk = t % split;
            const int64_t i0 = split > 1 ? blk * A.qb : 0, i1 = split > 1 ? (i0 + A.qb < A.sq ? i0 + A.qb : A.sq) : A.sq;
            attn_rows(&A, bh / A.h, bh % A.h, i0, i1, buf);
        }
        ft_cpu_buf_put(&tb);
    }
    if (failed) st = oom(ctx, "attention");
done:
    ft_cpu_f32_release(&fq);
    ft_cpu_f32_release(&fk);
    ft_cpu_f32_release(&fv);
    if (y && st == FT_OK && (void *)y != dst->data && !ft_tensor_contiguous(dst)) {
        strided_store(dst, y); /* [B, H, Sq, Dv] f32 into dst's layout and dtype */
        out_drop(&yb);
    } else if (y && st == FT_OK) {
        out_done(dst, y, &yb);
    } else {
        out_drop(&yb);
    }
    return st;
}

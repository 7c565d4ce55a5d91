/*
 * norm.c - CPU reference kernels for reductions and normalisations: sum over the
 * last dim, masked scaled softmax, LayerNorm (with an optional fused residual),
 * GroupNorm and inference BatchNorm.
 *
 * Each row (a LayerNorm row, a GroupNorm group, a softmax row) is converted to
 * f32 once into a per-thread buffer that stays in cache, and every pass over it
 * is a vectorised row map (vrow.c). Statistics are taken in double with two
 * passes over that buffer (mean, then the centred sum of squares): LayerNorm
 * eps can be 1e-12 and WavLM's GroupNorm input carries a large DC offset,
 * where a one-pass E[x^2] - E[x]^2 in f32 cancels badly.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "vrow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

FT_CPU_KERNEL_DEF(sum_last) {
    const ft_tensor *x = dst->src[0];
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    const int nd = x->ndim;
    const int64_t rows = ft_cpu_rows(nd, x->ne), cols = ft_cpu_cols(nd, x->ne);
    const int64_t xin = nd > 0 ? x->nb[nd - 1] : 1;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (rows * cols >= FT_CPU_PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++) {
        int64_t xo = ft_cpu_row_offset(nd, x->ne, x->nb, r);
        double s = 0.0;
        for (int64_t j = 0; j < cols; j++) s += ft_cpu_load(x->data, x->dtype, xo + j * xin);
        ft_cpu_store(dst->data, dst->dtype, r, (float)s);
    }
    return FT_OK;
}

/* Per-thread f32 row scratch of n floats: on the stack up to 4096, else malloc'd
 * (NULL when that fails). */
#define ROWBUF_STACK 4096
static float *rowbuf(float *stack, int64_t n) {
    return n <= ROWBUF_STACK ? stack : malloc((size_t)n * sizeof(float));
}
static void rowbuf_free(float *stack, float *b) {
    if (b != stack) free(b);
}

FT_CPU_KERNEL_DEF(softmax) {
    const ft_tensor *x = dst->src[0], *m = dst->src[1];
    const float scale = FT_PARAMS(dst, ft_params_softmax)->scale;
    const int causal = FT_PARAMS(dst, ft_params_softmax)->causal;
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    const int nd = x->ndim;
    if (m && (m->dtype != FT_DTYPE_F32 || !ft_cpu_bcast_ok(m, nd, x->ne)))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "mask must be f32 and broadcast to x");
    int64_t mnb[FT_MAX_DIMS] = {0};
    if (m) ft_cpu_bcast_strides(m, nd, mnb);
    const int64_t rows = ft_cpu_rows(nd, x->ne), cols = ft_cpu_cols(nd, x->ne);
    const int64_t xin = nd > 0 ? x->nb[nd - 1] : 1, min = nd > 0 ? mnb[nd - 1] : 0;
    if (rows == 0 || cols == 0) return FT_OK;
    int failed = 0;

#pragma omp parallel num_threads(ft_cpu_threads()) if (rows * cols >= FT_CPU_PAR_MIN / 4 && rows > 1) reduction(| : failed)
    {
        float stack[2 * ROWBUF_STACK];
        float *s = rowbuf(stack, 2 * cols), *mb = s ? s + cols : NULL;
        if (!s) failed = 1;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!s) continue;
            /* logits in f32, as x * scale + mask is computed there before softmax */
            ft_cpu_row_load(x->data, x->dtype, ft_cpu_row_offset(nd, x->ne, x->nb, r), xin, cols, s);
            if (scale != 1.0f) ft_cpu_row_scale(s, cols, scale, 0.0f);
            if (causal) ft_cpu_causal_row(s, cols, r % x->ne[nd - 2], cols - x->ne[nd - 2]);
            if (m) {
                ft_cpu_row_load(m->data, FT_DTYPE_F32, ft_cpu_row_offset(nd, x->ne, mnb, r), min, cols, mb);
                ft_cpu_row_binary(FT_OP_ADD, s, mb, cols, 0);
            }
            ft_cpu_row_softmax(s, cols);
            ft_cpu_row_store(dst->data, dst->dtype, r * cols, cols, s);
        }
        if (s) rowbuf_free(stack, s);
    }
    if (failed) return ft_set_error(ctx, FT_ERR_OOM, "softmax: out of host memory for a row of %lld", (long long)cols);
    return FT_OK;
}

/* An optional [d] f32 parameter row: in place when f32 with unit stride, else a
 * converted copy in a staging buffer of the kernel's scratch, *owned (given back
 * by the caller). -1 when out of memory. */
static int param_row(const ft_tensor *t, int64_t d, const float **out, ft_cpu_buf *owned) {
    *out = NULL;
    memset(owned, 0, sizeof *owned);
    if (!t) return 0;
    if (t->dtype == FT_DTYPE_F32 && (t->nb[0] == 1 || d == 1)) {
        *out = (const float *)t->data;
        return 0;
    }
    float *row = ft_cpu_buf_get(owned, ft_cpu_scratch_cur(), FT_SCR_STAGE, (size_t)(d > 0 ? d : 1) * sizeof(float));
    if (!row) return -1;
    ft_cpu_row_load(t->data, t->dtype, 0, t->nb[0], d, row);
    *out = row;
    return 0;
}

FT_CPU_KERNEL_DEF(layernorm) {
    const ft_tensor *x = dst->src[0], *g = dst->src[1], *b = dst->src[2], *res = dst->src[3];
    const double eps = FT_PARAMS(dst, ft_params_norm)->eps;
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    const int nd = x->ndim;
    const int64_t rows = ft_cpu_rows(nd, x->ne), d = ft_cpu_cols(nd, x->ne);
    const int64_t xin = nd > 0 ? x->nb[nd - 1] : 1;
    const int64_t rin = res && nd > 0 ? res->nb[nd - 1] : 1;
    const ft_dtype dt = x->dtype;
    if (rows == 0 || d == 0) return FT_OK;
    const float *gp, *bp;
    ft_cpu_buf go = {0}, bo = {0};
    int failed = param_row(g, d, &gp, &go) || param_row(b, d, &bp, &bo);

#pragma omp parallel num_threads(ft_cpu_threads()) if (!failed && rows * d >= FT_CPU_PAR_MIN / 4 && rows > 1) reduction(| : failed)
    {
        float stack[2 * ROWBUF_STACK];
        float *h = failed ? NULL : rowbuf(stack, 2 * d), *rb = h ? h + d : NULL;
        if (!h) failed = 1;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!h) continue;
            ft_cpu_row_load(x->data, dt, ft_cpu_row_offset(nd, x->ne, x->nb, r), xin, d, h);
            if (res) {
                /* h = x + residual, rounded to the storage dtype as the unfused add would */
                ft_cpu_row_load(res->data, res->dtype, ft_cpu_row_offset(nd, res->ne, res->nb, r), rin, d, rb);
                ft_cpu_row_binary(FT_OP_ADD, h, rb, d, 0);
                if (dt != FT_DTYPE_F32)
                    for (int64_t j = 0; j < d; j++) h[j] = ft_cpu_round(dt, h[j]);
            }
            ft_cpu_row_norm(h, d, eps, gp, bp);
            ft_cpu_row_store(dst->data, dst->dtype, r * d, d, h);
        }
        if (h) rowbuf_free(stack, h);
    }
    ft_cpu_buf_put(&go);
    ft_cpu_buf_put(&bo);
    if (failed) return ft_set_error(ctx, FT_ERR_OOM, "layernorm: out of host memory for a row of %lld", (long long)d);
    return FT_OK;
}

/* Per-channel parameter c of an optional [C] tensor (any stride), or dflt. */
static double chan(const ft_tensor *t, int64_t c, double dflt) {
    return t ? ft_cpu_load(t->data, t->dtype, c * t->nb[0]) : dflt;
}

FT_CPU_KERNEL_DEF(groupnorm) {
    const ft_tensor *x = dst->src[0], *g = dst->src[1], *b = dst->src[2];
    const ft_params_norm *p = FT_PARAMS(dst, ft_params_norm);
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if ((st = ft_cpu_need_contiguous(ctx, x, "x"))) return st;
    const int64_t nb_ = x->ne[0], c = x->ne[1], groups = p->groups;
    if (groups < 1 || c % groups)
        return ft_set_error(ctx, FT_ERR_SHAPE, "%lld channels do not split into %lld groups",
                            (long long)c, (long long)groups);
    const int64_t n = ft_numel(x);
    if (n == 0) return FT_OK;
    const int64_t sp = n / (nb_ * c), cpg = c / groups, per = cpg * sp; /* x [B, C, sp] */
    const double eps = p->eps;
    const ft_dtype dt = x->dtype;
    int failed = 0;

#pragma omp parallel num_threads(ft_cpu_threads()) if (n >= FT_CPU_PAR_MIN / 4 && nb_ * groups > 1) reduction(| : failed)
    {
        float stack[ROWBUF_STACK];
        float *h = rowbuf(stack, per);
        if (!h) failed = 1;
#pragma omp for schedule(static)
        for (int64_t bg = 0; bg < nb_ * groups; bg++) {
            if (!h) continue;
            const int64_t base = bg * per, c0 = (bg % groups) * cpg; /* group bg: [cpg, sp] */
            ft_cpu_row_load(x->data, dt, base, 1, per, h);
            ft_cpu_row_norm(h, per, eps, NULL, NULL);
            for (int64_t ci = 0; ci < cpg; ci++)
                ft_cpu_row_scale(h + ci * sp, sp, (float)chan(g, c0 + ci, 1.0), (float)chan(b, c0 + ci, 0.0));
            ft_cpu_row_store(dst->data, dt, base, per, h);
        }
        if (h) rowbuf_free(stack, h);
    }
    if (failed) return ft_set_error(ctx, FT_ERR_OOM, "groupnorm: out of host memory for a group of %lld", (long long)per);
    return FT_OK;
}

FT_CPU_KERNEL_DEF(batchnorm) {
    const ft_tensor *x = dst->src[0], *mean = dst->src[1], *var = dst->src[2];
    const ft_tensor *g = dst->src[3], *b = dst->src[4];
    const double eps = FT_PARAMS(dst, ft_params_norm)->eps;
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if ((st = ft_cpu_need_contiguous(ctx, x, "x"))) return st;
    if (!mean || !var)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "batchnorm needs running mean and var");
    const int64_t n = ft_numel(x), c = x->ne[1];
    if (n == 0) return FT_OK;
    const int64_t bc = x->ne[0] * c, sp = n / bc; /* x [B, C, sp] */
    const int64_t nchunk = (sp + FT_CPU_CHUNK - 1) / FT_CPU_CHUNK, tasks = bc * nchunk;
    const ft_dtype dt = x->dtype;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (n >= FT_CPU_PAR_MIN && tasks > 1)
    for (int64_t t = 0; t < tasks; t++) {
        float h[FT_CPU_CHUNK];
        const int64_t i = t / nchunk, k0 = (t % nchunk) * FT_CPU_CHUNK, ch = i % c;
        const int64_t len = sp - k0 < FT_CPU_CHUNK ? sp - k0 : FT_CPU_CHUNK;
        const double mu = chan(mean, ch, 0.0);
        const double ga = chan(g, ch, 1.0) / sqrt(chan(var, ch, 1.0) + eps), be = chan(b, ch, 0.0);
        /* (x - mu) * ga + be, the subtraction first as the reference formula */
        ft_cpu_row_load(x->data, dt, i * sp + k0, 1, len, h);
        ft_cpu_row_scale(h, len, 1.0f, (float)-mu);
        ft_cpu_row_scale(h, len, (float)ga, (float)be);
        ft_cpu_row_store(dst->data, dt, i * sp + k0, len, h);
    }
    return FT_OK;
}

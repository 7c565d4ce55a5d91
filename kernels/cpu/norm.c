/*
 * norm.c - CPU reference kernels for reductions and normalisations: sum over the
 * last dim, masked scaled softmax, LayerNorm (with an optional fused residual),
 * GroupNorm and inference BatchNorm.
 *
 * Statistics are taken in double with two passes (mean, then the centred sum of
 * squares): LayerNorm eps can be 1e-12 and WavLM's GroupNorm input carries a
 * large DC offset, where a one-pass E[x^2] - E[x]^2 in f32 cancels badly.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"

#include <math.h>

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

FT_CPU_KERNEL_DEF(softmax) {
    const ft_tensor *x = dst->src[0], *m = dst->src[1];
    const float scale = FT_PARAMS(dst, ft_params_softmax)->scale;
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    const int nd = x->ndim;
    if (m && (m->dtype != FT_DTYPE_F32 || !ft_cpu_bcast_ok(m, nd, x->ne)))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "mask must be f32 and broadcast to x");
    int64_t mnb[FT_MAX_DIMS] = {0};
    if (m) ft_cpu_bcast_strides(m, nd, mnb);
    const int64_t rows = ft_cpu_rows(nd, x->ne), cols = ft_cpu_cols(nd, x->ne);
    const int64_t xin = nd > 0 ? x->nb[nd - 1] : 1, min = nd > 0 ? mnb[nd - 1] : 0;
    const float *md = m ? (const float *)m->data : NULL;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (rows * cols >= FT_CPU_PAR_MIN / 4 && rows > 1)
    for (int64_t r = 0; r < rows; r++) {
        int64_t xo = ft_cpu_row_offset(nd, x->ne, x->nb, r);
        int64_t mo = m ? ft_cpu_row_offset(nd, x->ne, mnb, r) : 0;
        /* logits in f32, as x * scale + mask is computed there before softmax */
#define LOGIT(j) (ft_cpu_load(x->data, x->dtype, xo + (j) * xin) * scale + (md ? md[mo + (j) * min] : 0.0f))
        float mx = -INFINITY;
        for (int64_t j = 0; j < cols; j++) {
            float v = LOGIT(j);
            if (v > mx || v != v) mx = v; /* a NaN propagates, as in PyTorch */
        }
        /* exp(v - mx): v = -inf gives 0; mx = -inf (all -inf) gives NaN, as PyTorch does */
        double sum = 0.0;
        for (int64_t j = 0; j < cols; j++) sum += exp((double)(LOGIT(j) - mx));
        double inv = 1.0 / sum;
        for (int64_t j = 0; j < cols; j++)
            ft_cpu_store(dst->data, dst->dtype, r * cols + j,
                         (float)(exp((double)(LOGIT(j) - mx)) * inv));
#undef LOGIT
    }
    return FT_OK;
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

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (rows * d >= FT_CPU_PAR_MIN / 4 && rows > 1)
    for (int64_t r = 0; r < rows; r++) {
        int64_t xo = ft_cpu_row_offset(nd, x->ne, x->nb, r);
        int64_t ro = res ? ft_cpu_row_offset(nd, res->ne, res->nb, r) : 0;
        /* h = x + residual, rounded to the storage dtype as the unfused add would */
#define H(j) (res ? ft_cpu_round(dt, ft_cpu_load(x->data, dt, xo + (j) * xin) + \
                                         ft_cpu_load(res->data, res->dtype, ro + (j) * rin)) \
                  : ft_cpu_load(x->data, dt, xo + (j) * xin))
        double s = 0.0;
        for (int64_t j = 0; j < d; j++) s += H(j);
        const double mean = s / (double)d;
        double ss = 0.0;
        for (int64_t j = 0; j < d; j++) {
            double c = H(j) - mean;
            ss += c * c;
        }
        const double rstd = 1.0 / sqrt(ss / (double)d + eps);
        for (int64_t j = 0; j < d; j++) {
            double y = (H(j) - mean) * rstd;
            if (g) y *= ft_cpu_load(g->data, g->dtype, j * g->nb[0]);
            if (b) y += ft_cpu_load(b->data, b->dtype, j * b->nb[0]);
            ft_cpu_store(dst->data, dst->dtype, r * d + j, (float)y);
        }
#undef H
    }
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

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (n >= FT_CPU_PAR_MIN / 4 && nb_ * groups > 1)
    for (int64_t bg = 0; bg < nb_ * groups; bg++) {
        const int64_t base = bg * per, c0 = (bg % groups) * cpg; /* group bg: [cpg, sp] */
        double s = 0.0;
        for (int64_t i = 0; i < per; i++) s += ft_cpu_load(x->data, dt, base + i);
        const double mean = s / (double)per;
        double ss = 0.0;
        for (int64_t i = 0; i < per; i++) {
            double v = ft_cpu_load(x->data, dt, base + i) - mean;
            ss += v * v;
        }
        const double rstd = 1.0 / sqrt(ss / (double)per + eps);
        for (int64_t ci = 0; ci < cpg; ci++) {
            const double ga = chan(g, c0 + ci, 1.0) * rstd, be = chan(b, c0 + ci, 0.0);
            const int64_t o = base + ci * sp;
            for (int64_t i = 0; i < sp; i++)
                ft_cpu_store(dst->data, dt, o + i,
                             (float)((ft_cpu_load(x->data, dt, o + i) - mean) * ga + be));
        }
    }
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
    const ft_dtype dt = x->dtype;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (n >= FT_CPU_PAR_MIN && bc > 1)
    for (int64_t i = 0; i < bc; i++) {
        const int64_t ch = i % c;
        const double mu = chan(mean, ch, 0.0);
        const double ga = chan(g, ch, 1.0) / sqrt(chan(var, ch, 1.0) + eps), be = chan(b, ch, 0.0);
        for (int64_t k = 0; k < sp; k++)
            ft_cpu_store(dst->data, dt, i * sp + k,
                         (float)((ft_cpu_load(x->data, dt, i * sp + k) - mu) * ga + be));
    }
    return FT_OK;
}

/*
 * pool.c - CPU reference kernels for pooling and weight transforms: 1-d pooling
 * along one dim (mean/max/min, ceil mode), 2-d max pooling, global average
 * pooling and weight norm. Inputs are contiguous (the op API copies them).
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "nchwc.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

/* Sizes of x around dim d: x viewed as [outer, ne[d], inner]. */
static void split_at(const ft_tensor *x, int d, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < d; i++) *outer *= x->ne[i];
    for (int i = d + 1; i < x->ndim; i++) *inner *= x->ne[i];
}

FT_CPU_KERNEL_DEF(pool_dim) {
    const ft_tensor *x = dst->src[0];
    const ft_params_pool_dim *p = FT_PARAMS(dst, ft_params_pool_dim);
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if ((st = ft_cpu_need_contiguous(ctx, x, "x"))) return st;
    int64_t outer, inner;
    split_at(x, p->dim, &outer, &inner);
    const int64_t l = x->ne[p->dim], lo = dst->ne[p->dim]; /* x [outer, l, inner] */
    /* with stride > kernel the last window can start past the end: nothing to pool */
    if (lo > 0 && (lo - 1) * (int64_t)p->stride >= l)
        return ft_set_error(ctx, FT_ERR_SHAPE, "window %lld starts at %lld, past the %lld inputs",
                            (long long)(lo - 1), (long long)((lo - 1) * p->stride), (long long)l);
    const int64_t n = outer * lo * inner;
    if (n == 0) return FT_OK;
    const ft_dtype dt = x->dtype;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (n >= FT_CPU_PAR_MIN / 4 && outer * lo > 1)
    for (int64_t ow = 0; ow < outer * lo; ow++) {
        const int64_t o = ow / lo, w = ow % lo;
        const int64_t s = w * p->stride, e = s + p->kernel < l ? s + p->kernel : l; /* [s, e) */
        for (int64_t i = 0; i < inner; i++) {
            const int64_t base = o * l * inner + i;
            double acc = p->kind == 0 ? 0.0 : ft_cpu_load(x->data, dt, base + s * inner);
            for (int64_t k = s; k < e; k++) {
                double v = ft_cpu_load(x->data, dt, base + k * inner);
                if (p->kind == 0) acc += v;
                else if (p->kind == 1 ? (v > acc || v != v) : (v < acc || v != v)) acc = v;
            }
            if (p->kind == 0) acc /= (double)(e - s);
            ft_cpu_store(dst->data, dt, (o * lo + w) * inner + i, (float)acc);
        }
    }
    return FT_OK;
}

/*
 * f32 max pooling one output row at a time: for each tap (ky, kx) of the
 * window, in the reference's order, one pass over the row's outputs, so the
 * columns whose windows lie inside the input (all but the padded edges) take a
 * branch-free max that vectorises; the edges keep the bounds checks. A NaN wins
 * and stays, as in the per-element loop below.
 */
static void maxpool2d_f32(const float *restrict x, float *restrict y, int64_t planes, int64_t h,
                          int64_t w, int64_t ho, int64_t wo, const ft_params_maxpool *p) {
    const int64_t k = p->kernel, s = p->stride, pd = p->padding;
    /* outputs [oxa, oxb) read columns ox * s - pd + kx inside [0, w) for every kx */
    int64_t oxa = (pd + s - 1) / s, oxb = w - k + pd >= 0 ? (w - k + pd) / s + 1 : 0;
    if (oxb > wo) oxb = wo;
    if (oxa > oxb) oxa = oxb;
#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (planes * ho * wo >= FT_CPU_PAR_MIN / 4 && planes * ho > 1)
    for (int64_t ph = 0; ph < planes * ho; ph++) {
        const int64_t pl = ph / ho, oy = ph % ho;
        float *restrict yr = y + ph * wo;
        for (int64_t ox = 0; ox < wo; ox++) yr[ox] = -INFINITY; /* padding never wins */
        for (int64_t ky = 0; ky < k; ky++) {
            const int64_t iy = oy * s - pd + ky;
            if (iy < 0 || iy >= h) continue;
            const float *xr = x + (pl * h + iy) * w;
            for (int64_t kx = 0; kx < k; kx++) {
                for (int64_t ox = 0; ox < oxa; ox++) {
                    const int64_t ix = ox * s - pd + kx;
                    if (ix < 0 || ix >= w) continue;
                    const float v = xr[ix];
                    if (v > yr[ox] || v != v) yr[ox] = v;
                }
                for (int64_t ox = oxa; ox < oxb; ox++) {
                    const float v = xr[ox * s - pd + kx], m = yr[ox];
                    yr[ox] = v > m || v != v ? v : m;
                }
                for (int64_t ox = oxb; ox < wo; ox++) {
                    const int64_t ix = ox * s - pd + kx;
                    if (ix < 0 || ix >= w) continue;
                    const float v = xr[ix];
                    if (v > yr[ox] || v != v) yr[ox] = v;
                }
            }
        }
    }
}

FT_CPU_KERNEL_DEF(maxpool2d) {
    if (dst->flags & FT_TF_NCHWC) return ft_cpu_nchwc_maxpool2d(ctx, dst); /* a graph plan's blocked node */
    const ft_tensor *x = dst->src[0];
    const ft_params_maxpool *p = FT_PARAMS(dst, ft_params_maxpool);
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if ((st = ft_cpu_need_contiguous(ctx, x, "x"))) return st;
    const int64_t planes = x->ne[0] * x->ne[1], h = x->ne[2], w = x->ne[3];
    const int64_t ho = dst->ne[2], wo = dst->ne[3]; /* x [B*C, H, W] -> [B*C, HO, WO] */
    const int64_t n = planes * ho * wo;
    if (n == 0) return FT_OK;
    const ft_dtype dt = x->dtype;
    if (dt == FT_DTYPE_F32) {
        maxpool2d_f32(x->data, dst->data, planes, h, w, ho, wo, p);
        return FT_OK;
    }

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (n >= FT_CPU_PAR_MIN / 4 && planes * ho > 1)
    for (int64_t ph = 0; ph < planes * ho; ph++) {
        const int64_t pl = ph / ho, oy = ph % ho;
        const int64_t y0 = oy * p->stride - p->padding;
        for (int64_t ox = 0; ox < wo; ox++) {
            const int64_t x0 = ox * p->stride - p->padding;
            float m = -INFINITY; /* padding never wins: it acts as -inf */
            for (int64_t ky = 0; ky < p->kernel; ky++) {
                const int64_t iy = y0 + ky;
                if (iy < 0 || iy >= h) continue;
                for (int64_t kx = 0; kx < p->kernel; kx++) {
                    const int64_t ix = x0 + kx;
                    if (ix < 0 || ix >= w) continue;
                    float v = ft_cpu_load(x->data, dt, (pl * h + iy) * w + ix);
                    if (v > m || v != v) m = v;
                }
            }
            ft_cpu_store(dst->data, dt, (pl * ho + oy) * wo + ox, m);
        }
    }
    return FT_OK;
}

FT_CPU_KERNEL_DEF(global_avgpool) {
    const ft_tensor *x = dst->src[0];
    if (x->flags & FT_TF_NCHWC) return ft_cpu_nchwc_global_avgpool(ctx, dst); /* a blocked input */
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if ((st = ft_cpu_need_contiguous(ctx, x, "x"))) return st;
    const int64_t planes = x->ne[0] * x->ne[1], n = ft_numel(x);
    if (planes == 0) return FT_OK;
    const int64_t sp = n / planes; /* x [B*C, sp] */
    const ft_dtype dt = x->dtype;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (n >= FT_CPU_PAR_MIN && planes > 1)
    for (int64_t pl = 0; pl < planes; pl++) {
        double s = 0.0;
        for (int64_t i = 0; i < sp; i++) s += ft_cpu_load(x->data, dt, pl * sp + i);
        ft_cpu_store(dst->data, dt, pl, sp > 0 ? (float)(s / (double)sp) : NAN);
    }
    return FT_OK;
}

FT_CPU_KERNEL_DEF(weight_norm) {
    const ft_tensor *g = dst->src[0], *v = dst->src[1];
    const int d = FT_PARAMS(dst, ft_params_weight_norm)->dim;
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if ((st = ft_cpu_need_contiguous(ctx, v, "v"))) return st;
    if ((st = ft_cpu_need_contiguous(ctx, g, "g"))) return st;
    int64_t outer, inner;
    split_at(v, d, &outer, &inner);
    const int64_t l = v->ne[d], n = ft_numel(v); /* v [outer, l, inner] */
    if (n == 0) return FT_OK;
    const ft_dtype dt = v->dtype;

    /* squared norms per index of dim d: each thread sums its share of `outer`
     * into its own row of `part`, then the rows are added */
    const int nt = n >= FT_CPU_PAR_MIN ? ft_cpu_threads() : 1;
    double *part = calloc((size_t)nt * (size_t)l, sizeof *part); /* [nt, l] */
    if (!part) return ft_set_error(ctx, FT_ERR_OOM, "weight_norm: no memory for %lld norms",
                                   (long long)l);
#pragma omp parallel num_threads(nt)
    {
        double *acc = part + (size_t)omp_get_thread_num() * (size_t)l;
#pragma omp for schedule(static)
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < l; k++)
                for (int64_t i = 0; i < inner; i++) {
                    double x = ft_cpu_load(v->data, dt, (o * l + k) * inner + i);
                    acc[k] += x * x;
                }
    }
    /* part row 0 becomes the per-index factor g / ||v|| */
    for (int64_t k = 0; k < l; k++) {
        double s = 0.0;
        for (int t = 0; t < nt; t++) s += part[(size_t)t * (size_t)l + (size_t)k];
        part[k] = ft_cpu_load(g->data, g->dtype, k) / sqrt(s);
    }

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (n >= FT_CPU_PAR_MIN && outer > 1)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < l; k++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t e = (o * l + k) * inner + i;
                ft_cpu_store(dst->data, dt, e, (float)(ft_cpu_load(v->data, dt, e) * part[k]));
            }
    free(part);
    return FT_OK;
}

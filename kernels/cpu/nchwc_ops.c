/*
 * nchwc_ops.c - the blocked-channel layout's other kernels (kernels/cpu/nchwc.h):
 * max pooling and global average pooling, vectorised across the 16 channels of
 * a block, the reorders between NCHW and NCHWc that the layout pass puts at
 * the edges of a blocked region, and the direct convolution's staging of an
 * NCHW input.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "nchwc.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#define C16 FT_NCHWC

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 11 && \
    !defined(__SANITIZE_THREAD__)
#define NC_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NC_CLONES
#endif

/* One output row (image-block plane pl, row oy) of a max pool: y[ox][c] = max over
 * the window of x[iy][ix][c]; a NaN wins and stays, padding never wins. */
NC_CLONES
static void maxpool_row(const float *restrict x, float *restrict y, int64_t h, int64_t w, int64_t wo,
                        int64_t oy, int64_t k, int64_t s, int64_t pd, bool pf) {
    /* with pf, the input rows the next output row adds, prefetched a pixel column
     * at a time as this row walks: at batch 8 a stem's output (26 MB) comes from
     * memory, and the pool took 2.6x ORT's time without (3.5 -> 1.3 ms); from
     * cache (batch 1) the prefetches cost about 10% */
    const int64_t nr0 = (oy + 1) * s - pd + (k > s ? k - s : 0), nr1 = pf ? (oy + 1) * s - pd + k : 0;
    for (int64_t ox = 0; ox < wo; ox++) {
        for (int64_t iy = nr0 > 0 ? nr0 : 0; iy < nr1 && iy < h; iy++)
            for (int64_t ix = ox * s; ix < ox * s + s && ix < w; ix++) __builtin_prefetch(x + (iy * w + ix) * C16, 0, 3);
        float m[C16];
        for (int c = 0; c < C16; c++) m[c] = -INFINITY;
        for (int64_t ky = 0; ky < k; ky++) {
            const int64_t iy = oy * s - pd + ky;
            if (iy < 0 || iy >= h) continue;
            for (int64_t kx = 0; kx < k; kx++) {
                const int64_t ix = ox * s - pd + kx;
                if (ix < 0 || ix >= w) continue;
                const float *v = x + (iy * w + ix) * C16;
#pragma omp simd
                for (int c = 0; c < C16; c++) m[c] = v[c] > m[c] || v[c] != v[c] ? v[c] : m[c];
            }
        }
        memcpy(y + ox * C16, m, sizeof m);
    }
}

int ft_cpu_nchwc_maxpool2d(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0];
    const ft_params_maxpool *p = FT_PARAMS(dst, ft_params_maxpool);
    if (x->dtype != FT_DTYPE_F32 || dst->dtype != FT_DTYPE_F32 || !(x->flags & FT_TF_NCHWC) ||
        x->ne[1] % C16 || !ft_tensor_contiguous(x) || !ft_tensor_contiguous(dst))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "maxpool2d: a blocked-channel (NCHWc) plan node the kernel "
                                                  "cannot run (%s)", dst->name);
    const int64_t planes = x->ne[0] * x->ne[1] / C16, h = x->ne[2], w = x->ne[3];
    const int64_t ho = dst->ne[2], wo = dst->ne[3];
    const float *xd = x->data;
    float *yd = dst->data;
    const bool pf = (double)(planes * h * w * C16) * sizeof(float) > 8e6; /* past a quarter of a typical L3 */
#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (planes * ho * wo * C16 >= FT_CPU_PAR_MIN / 4 && planes * ho > 1)
    for (int64_t ph = 0; ph < planes * ho; ph++) {
        const int64_t pl = ph / ho, oy = ph % ho;
        maxpool_row(xd + pl * h * w * C16, yd + (pl * ho + oy) * wo * C16, h, w, wo, oy, p->kernel, p->stride,
                    p->padding, pf);
    }
    return FT_OK;
}

/* The mean over the plane of each of a block's 16 channels, in double as the NCHW kernel sums. */
NC_CLONES
static void mean_block(const float *restrict x, int64_t sp, float *restrict out) {
    double s[C16] = {0};
    for (int64_t i = 0; i < sp; i++)
#pragma omp simd
        for (int c = 0; c < C16; c++) s[c] += (double)x[i * C16 + c];
    for (int c = 0; c < C16; c++) out[c] = sp > 0 ? (float)(s[c] / (double)sp) : NAN;
}

int ft_cpu_nchwc_global_avgpool(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0];
    if (x->dtype != FT_DTYPE_F32 || dst->dtype != FT_DTYPE_F32 || !(x->flags & FT_TF_NCHWC) ||
        x->ndim != 4 || x->ne[1] % C16 || !ft_tensor_contiguous(x) || !ft_tensor_contiguous(dst))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "global_avgpool: a blocked-channel (NCHWc) plan node the "
                                                  "kernel cannot run (%s)", dst->name);
    const int64_t blocks = x->ne[0] * x->ne[1] / C16, sp = x->ne[2] * x->ne[3];
    const float *xd = x->data;
    float *yd = dst->data; /* [N, C]: block b's channels are y[b * 16 ..] in either layout */
#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (blocks * sp * C16 >= FT_CPU_PAR_MIN && blocks > 1)
    for (int64_t b = 0; b < blocks; b++) mean_block(xd + b * sp * C16, sp, yd + b * C16);
    return FT_OK;
}

NC_CLONES
static void reorder_block(const float *restrict src, float *restrict dst, int64_t hw, bool to_blocked) {
    /* src/dst: one image-block, NCHW [16][hw] <-> NCHWc [hw][16] */
    if (to_blocked) {
        for (int64_t p = 0; p < hw; p++)
            for (int c = 0; c < C16; c++) dst[p * C16 + c] = src[c * hw + p];
    } else {
        for (int c = 0; c < C16; c++)
            for (int64_t p = 0; p < hw; p++) dst[c * hw + p] = src[p * C16 + c];
    }
}

void ft_cpu_nchwc_reorder(const float *src, float *dst, int64_t n, int64_t c, int64_t hw, bool to_blocked) {
    const int64_t blocks = n * (c / C16);
#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (blocks * hw * C16 >= FT_CPU_PAR_MIN && blocks > 1 && !omp_in_parallel())
    for (int64_t b = 0; b < blocks; b++) reorder_block(src + b * hw * C16, dst + b * hw * C16, hw, to_blocked);
}

/* x NCHW [N, C, HW] -> blocks of 16 channels [N][ceil(C/16)][HW][bw] (bw = the
 * block's width: 16, or C % 16 in a last partial block). */
void ft_cpu_nchwc_stage_blocks(const float *x, float *out, int64_t n, int64_t c, int64_t hw) {
    const int64_t cib = (c + C16 - 1) / C16;
#pragma omp parallel for num_threads(ft_cpu_threads()) if (n * c * hw >= FT_CPU_PAR_MIN && !omp_in_parallel())
    for (int64_t nb = 0; nb < n * cib; nb++) {
        const int64_t b = nb % cib, i = nb / cib, bw = c - b * C16 < C16 ? c - b * C16 : C16;
        const float *xs = x + (i * c + b * C16) * hw;
        float *o = out + nb * hw * C16;
        for (int64_t p = 0; p < hw; p++)
            for (int64_t q = 0; q < bw; q++) o[p * bw + q] = xs[q * hw + p];
    }
}

/* x NCHW [N, C, H, W] -> zero-padded HWC [N][H+2p][W+2p][C]. */
void ft_cpu_nchwc_stage_hwc(const float *x, float *out, int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad) {
    const int64_t hp = h + 2 * pad, wp = w + 2 * pad;
#pragma omp parallel for num_threads(ft_cpu_threads()) if (n * c * hp * wp >= FT_CPU_PAR_MIN && !omp_in_parallel())
    for (int64_t row = 0; row < n * hp; row++) {
        const int64_t i = row / hp, iy = row % hp - pad;
        float *o = out + row * wp * c;
        if (iy < 0 || iy >= h) {
            memset(o, 0, (size_t)(wp * c) * sizeof(float));
            continue;
        }
        /* the borders zero, the interior one channel at a time (a strided store of
         * a contiguous row: no bounds check per element) */
        memset(o, 0, (size_t)(pad * c) * sizeof(float));
        memset(o + (pad + w) * c, 0, (size_t)(pad * c) * sizeof(float));
        for (int64_t ch = 0; ch < c; ch++) {
            const float *xr = x + ((i * c + ch) * h + iy) * w;
            float *oc = o + pad * c + ch;
            for (int64_t ix = 0; ix < w; ix++) oc[ix * c] = xr[ix];
        }
    }
}

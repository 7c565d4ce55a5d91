/*
 * layernorm.cu - LayerNorm over the last dim: y = (h - mean) / sqrt(var + eps)
 * * gamma + beta with h = x + residual (residual, gamma, beta optional).
 *
 * Rows of up to 1024 elements (2048 for 16-bit types) go one warp per row with
 * the row held in registers: one read of x, two-pass statistics in f32 (mean,
 * then the sum of squared deviations: no cancellation even with eps = 1e-12),
 * one write. Where the row length and every pointer allow, lanes move 16 bytes
 * at a time. Longer rows take one block per row and read x three times.
 * Not here: Welford merging, fused dropout.
 */
#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"
#include "../../engine/cuda_backend_internal.h"

#define LN_WARPS 4 /* rows per block in the warp-per-row kernel */

/* Loads/stores W consecutive elements as f32; W * sizeof(T) is 16 bytes when
 * vectorized, else W is 1. */
template <typename T, int W> struct ln_io {
    static __device__ __forceinline__ void load(const T *p, float *v) {
        if (W == 1) {
            v[0] = ft_ld(p);
        } else {
            uint4 u = *(const uint4 *)p;
            const T *e = (const T *)&u;
#pragma unroll
            for (int i = 0; i < W; i++) v[i] = ft_ld(e + i);
        }
    }
    static __device__ __forceinline__ void store(T *p, const float *v) {
        if (W == 1) {
            ft_st(p, v[0]);
        } else {
            uint4 u;
            T *e = (T *)&u;
#pragma unroll
            for (int i = 0; i < W; i++) ft_st(e + i, v[i]);
            *(uint4 *)p = u;
        }
    }
};

/* x + residual rounded to the storage type, as the unfused add would store it
 * (what the CPU reference does) */
template <typename T> __device__ __forceinline__ float ln_round(float v) {
    T t;
    ft_st(&t, v);
    return ft_ld(&t);
}

__device__ __forceinline__ float ln_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* One warp per row; each lane holds CH chunks of W elements: chunk c of the
 * lane covers elements ((c * 32 + lane) * W ...). gamma/beta/residual are read
 * with the same chunking (unit stride, checked by the launcher when W > 1). */
template <typename T, int CH, int W>
__global__ void ln_warp_kernel(T *y, const T *x, int64_t x_rs, const T *res, int64_t res_rs,
                               const T *gamma, int64_t g_st, const T *beta, int64_t b_st,
                               int64_t rows, int d, float eps) {
    FT_KERNEL_PROLOGUE();
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
    if (row >= rows) return;
    const T *xr = x + row * x_rs;
    const T *rr = res ? res + row * res_rs : nullptr;
    float v[CH * W];
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        int e0 = (c * 32 + lane) * W;
        if (e0 < d) {
            ln_io<T, W>::load(xr + e0, v + c * W);
            if (rr) {
                float r[W];
                ln_io<T, W>::load(rr + e0, r);
#pragma unroll
                for (int i = 0; i < W; i++) v[c * W + i] = ln_round<T>(v[c * W + i] + r[i]);
            }
#pragma unroll
            for (int i = 0; i < W; i++) sum += v[c * W + i];
        }
    }
    float mean = ln_warp_sum(sum) / (float)d;
    float sq = 0.0f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        int e0 = (c * 32 + lane) * W;
        if (e0 < d) {
#pragma unroll
            for (int i = 0; i < W; i++) {
                float t = v[c * W + i] - mean;
                sq += t * t;
            }
        }
    }
    float rstd = 1.0f / sqrtf(ln_warp_sum(sq) / (float)d + eps);
    T *yr = y + row * (int64_t)d;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        int e0 = (c * 32 + lane) * W;
        if (e0 < d) {
            float g[W], b[W], o[W];
            if (gamma) {
                if (W > 1) ln_io<T, W>::load(gamma + e0, g);
                else g[0] = ft_ld(gamma + e0 * g_st);
            }
            if (beta) {
                if (W > 1) ln_io<T, W>::load(beta + e0, b);
                else b[0] = ft_ld(beta + e0 * b_st);
            }
#pragma unroll
            for (int i = 0; i < W; i++) {
                float t = (v[c * W + i] - mean) * rstd;
                if (gamma) t *= g[i];
                if (beta) t += b[i];
                o[i] = t;
            }
            ln_io<T, W>::store(yr + e0, o);
        }
    }
}

template <typename T> __device__ __forceinline__ float ln_h(const T *xr, const T *rr, int i) {
    return rr ? ln_round<T>(ft_ld(xr + i) + ft_ld(rr + i)) : ft_ld(xr + i);
}

/* Block per row for long rows: three passes over global memory. */
template <typename T>
__global__ void ln_block_kernel(T *y, const T *x, int64_t x_rs, const T *res, int64_t res_rs,
                                const T *gamma, int64_t g_st, const T *beta, int64_t b_st, int d,
                                float eps) {
    FT_KERNEL_PROLOGUE();
    __shared__ float part[32];
    __shared__ float bcast;
    int64_t row = blockIdx.x;
    const T *xr = x + row * x_rs;
    const T *rr = res ? res + row * res_rs : nullptr;
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;

    float s = 0.0f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) s += ln_h(xr, rr, i);
    s = ln_warp_sum(s);
    if (lane == 0) part[wid] = s;
    __syncthreads();
    if (wid == 0) {
        float t = lane < nw ? part[lane] : 0.0f;
        t = ln_warp_sum(t);
        if (lane == 0) bcast = t / (float)d;
    }
    __syncthreads();
    float mean = bcast;
    __syncthreads();

    float q = 0.0f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float t = ln_h(xr, rr, i) - mean;
        q += t * t;
    }
    q = ln_warp_sum(q);
    if (lane == 0) part[wid] = q;
    __syncthreads();
    if (wid == 0) {
        float t = lane < nw ? part[lane] : 0.0f;
        t = ln_warp_sum(t);
        if (lane == 0) bcast = 1.0f / sqrtf(t / (float)d + eps);
    }
    __syncthreads();
    float rstd = bcast;

    T *yr = y + row * (int64_t)d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float t = (ln_h(xr, rr, i) - mean) * rstd;
        if (gamma) t *= ft_ld(gamma + i * g_st);
        if (beta) t += ft_ld(beta + i * b_st);
        ft_st(yr + i, t);
    }
}

namespace {
struct ln_run {
    ft_ctx *ctx;
    ft_tensor *dst;
    const ft_tensor *x, *gamma, *beta;
    const void *res;
    int64_t rows, x_rs, res_rs;
    int d;
    float eps;

    template <typename T, int CH, int W> int warp() {
        unsigned blocks = (unsigned)((rows + LN_WARPS - 1) / LN_WARPS);
        FT_LAUNCH(ctx, blocks, 32 * LN_WARPS, 0, ft_cuda_stream(ctx), ln_warp_kernel<T, CH, W>)(
            (T *)dst->data, (const T *)x->data, x_rs, (const T *)res, res_rs,
            gamma ? (const T *)gamma->data : nullptr, gamma ? gamma->nb[0] : 0,
            beta ? (const T *)beta->data : nullptr, beta ? beta->nb[0] : 0, rows, d, eps);
        FT_CUDA_LAUNCH_CHECK(ctx, "layernorm");
        return FT_OK;
    }

    template <typename T> bool vec_ok() const {
        const int w = 16 / (int)sizeof(T);
        if (d % w) return false;
        uintptr_t mis = (uintptr_t)x->data | (uintptr_t)dst->data;
        mis |= (uintptr_t)((rows > 1 ? x_rs : 0) * (int64_t)sizeof(T));
        if (res) mis |= (uintptr_t)res | (uintptr_t)((rows > 1 ? res_rs : 0) * (int64_t)sizeof(T));
        if (gamma) {
            if (gamma->nb[0] != 1 && d > 1) return false;
            mis |= (uintptr_t)gamma->data;
        }
        if (beta) {
            if (beta->nb[0] != 1 && d > 1) return false;
            mis |= (uintptr_t)beta->data;
        }
        return (mis & 15) == 0;
    }

    template <typename T> int run() {
        if (rows == 0 || d == 0) return FT_OK;
        const int w = 16 / (int)sizeof(T);
        if (vec_ok<T>()) {
            int ch = (d / w + 31) / 32;
            /* 3 and 6: BERT's 768 in 16-bit and f32 types, no idle chunk */
            if (ch <= 1) return warp<T, 1, 16 / sizeof(T)>();
            if (ch <= 2) return warp<T, 2, 16 / sizeof(T)>();
            if (ch <= 3) return warp<T, 3, 16 / sizeof(T)>();
            if (ch <= 4) return warp<T, 4, 16 / sizeof(T)>();
            if (ch <= 6) return warp<T, 6, 16 / sizeof(T)>();
            if (ch <= 8) return warp<T, 8, 16 / sizeof(T)>();
        } else {
            int ch = (d + 31) / 32;
            if (ch <= 1) return warp<T, 1, 1>();
            if (ch <= 4) return warp<T, 4, 1>();
            if (ch <= 8) return warp<T, 8, 1>();
            if (ch <= 16) return warp<T, 16, 1>();
            if (ch <= 32) return warp<T, 32, 1>();
        }
        if (rows > INT32_MAX) return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "layernorm: too many rows");
        FT_LAUNCH(ctx, (unsigned)rows, 256, 0, ft_cuda_stream(ctx), ln_block_kernel<T>)(
            (T *)dst->data, (const T *)x->data, x_rs, (const T *)res, res_rs,
            gamma ? (const T *)gamma->data : nullptr, gamma ? gamma->nb[0] : 0,
            beta ? (const T *)beta->data : nullptr, beta ? beta->nb[0] : 0, d, eps);
        FT_CUDA_LAUNCH_CHECK(ctx, "layernorm (block per row)");
        return FT_OK;
    }
};
} // namespace

FT_CUDA_KERNEL(layernorm) {
    const ft_tensor *x = dst->src[0], *res = dst->src[3];
    ln_run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.dst = dst;
    r.x = x;
    r.gamma = dst->src[1];
    r.beta = dst->src[2];
    r.eps = FT_PARAMS(dst, ft_params_norm)->eps;
    int64_t d = x->ne[x->ndim - 1];
    if (d > INT32_MAX) return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "layernorm: row too long");
    r.d = (int)d;
    if (!ft_tensor_rows_layout(x, &r.rows, &r.x_rs))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "layernorm: x is not in rows layout");
    if (r.rows <= 1) r.x_rs = d;

    ft_block *blk = NULL;
    if (res) {
        int64_t rr = 0;
        if (ft_tensor_rows_layout(res, &rr, &r.res_rs) && rr == r.rows) {
            r.res = res->data;
            if (rr <= 1) r.res_rs = d;
        } else {
            void *p = ft_cuda_scratch(ctx, ft_nbytes(res), &blk);
            if (!p) return ctx->status;
            ft_status st = ft_cuda_gather_contiguous(ctx, res, p);
            if (st) {
                ft_block_unref(blk);
                return st;
            }
            r.res = p;
            r.res_rs = d;
        }
    }
    ft_status st = (ft_status)FT_DISPATCH_FLOAT(ctx, dst->dtype, r);
    ft_block_unref(blk);
    return st;
}

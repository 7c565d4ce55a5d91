/*
 * pool.cu - CUDA pooling and weight transforms: 1-d pooling along one dim
 * (ceil mode), 2-d max pooling, global average pooling, and weight norm
 * (W = g * v / ||v||, the norm taken over every dim except one).
 */
#include "strided.cuh"

#include <math.h>

/* ------------------------------------------------------------------------- */
/* pool_dim                                                                   */
/* ------------------------------------------------------------------------- */

/* out [outer, lout, inner] from x [outer, len, inner]: window w covers
 * [w * stride, min(w * stride + kernel, len)); a mean divides by the elements
 * actually in the window (the last one may be short in ceil mode). */
template <typename T, typename I>
__global__ void ft_k_pool_dim(T *__restrict__ out, const T *__restrict__ x, int64_t n, int64_t len,
                              int64_t lout, int64_t inner, int kind, int kernel, int stride) {
    FT_KERNEL_PROLOGUE();
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < n;
         o += (int64_t)gridDim.x * blockDim.x) {
        I in = (I)o % (I)inner, t = (I)o / (I)inner;
        I w = t % (I)lout, outer = t / (I)lout;
        I start = w * (I)stride, end = start + (I)kernel;
        if (end > (I)len) end = (I)len;
        const T *p = x + ((int64_t)outer * len) * inner + in;
        float acc = ft_ld(p + (int64_t)start * inner);
        for (I l = start + 1; l < end; l++) {
            float v = ft_ld(p + (int64_t)l * inner);
            if (kind == 0) acc += v;
            else if (kind == 1 ? (v > acc || v != v) : (v < acc || v != v)) acc = v; /* NaN wins */
        }
        if (kind == 0) acc /= (float)(end - start);
        ft_st(out + o, acc);
    }
}

struct ft_pool_dim_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    template <typename T> int run() {
        const ft_tensor *x = dst->src[0];
        const ft_params_pool_dim *p = FT_PARAMS(dst, ft_params_pool_dim);
        int64_t inner = 1, n = ft_numel(dst);
        for (int i = p->dim + 1; i < x->ndim; i++) inner *= x->ne[i];
        unsigned blocks = ft_cuda_blocks(n, FT_EW_THREADS);
        cudaStream_t st = ft_cuda_stream(ctx);
        if (ft_numel(x) <= INT32_MAX)
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_pool_dim<T, int32_t>)((T *)dst->data,
                (const T *)x->data, n, x->ne[p->dim], dst->ne[p->dim], inner, p->kind, p->kernel,
                p->stride);
        else
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_pool_dim<T, int64_t>)((T *)dst->data,
                (const T *)x->data, n, x->ne[p->dim], dst->ne[p->dim], inner, p->kind, p->kernel,
                p->stride);
        FT_CUDA_LAUNCH_CHECK(ctx, "pool_dim");
        return FT_OK;
    }
};

FT_CUDA_KERNEL(pool_dim) {
    const ft_tensor *x = dst->src[0];
    const ft_params_pool_dim *p = FT_PARAMS(dst, ft_params_pool_dim);
    if (ft_numel(dst) == 0) return FT_OK;
    if (p->dim < 0 || p->dim >= x->ndim || p->kind < 0 || p->kind > 2 || p->kernel < 1 ||
        p->stride < 1)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "pool_dim: invalid dim %d, kind %d, kernel %d "
                            "or stride %d", p->dim, p->kind, p->kernel, p->stride);
    if (!ft_tensor_contiguous(x))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "pool_dim expects a contiguous input");
    /* every window must start inside the input (ceil mode never starts past the end) */
    if ((dst->ne[p->dim] - 1) * (int64_t)p->stride >= x->ne[p->dim])
        return ft_set_error(ctx, FT_ERR_SHAPE, "pool_dim: %lld windows of stride %d do not fit %lld "
                            "elements", (long long)dst->ne[p->dim], p->stride,
                            (long long)x->ne[p->dim]);
    ft_pool_dim_fn f = {ctx, dst};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

/* ------------------------------------------------------------------------- */
/* maxpool2d                                                                  */
/* ------------------------------------------------------------------------- */

/* out [B*C, oh, ow] from x [B*C, h, w]; padded positions count as -inf, so
 * they are simply skipped (every window holds at least one real element
 * because 2 * padding <= kernel). */
template <typename T, typename I>
__global__ void ft_k_maxpool2d(T *__restrict__ out, const T *__restrict__ x, int64_t n, int64_t h,
                               int64_t w, int64_t oh, int64_t ow, int kernel, int stride, int pad) {
    FT_KERNEL_PROLOGUE();
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < n;
         o += (int64_t)gridDim.x * blockDim.x) {
        I ox = (I)o % (I)ow, t = (I)o / (I)ow;
        I oy = t % (I)oh, plane = t / (I)oh;
        const T *p = x + (int64_t)plane * h * w;
        I y0 = oy * (I)stride - (I)pad, x0 = ox * (I)stride - (I)pad;
        float m = -INFINITY;
        for (int ky = 0; ky < kernel; ky++) {
            I yy = y0 + ky;
            if (yy < 0 || yy >= (I)h) continue;
            for (int kx = 0; kx < kernel; kx++) {
                I xx = x0 + kx;
                if (xx < 0 || xx >= (I)w) continue;
                float v = ft_ld(p + (int64_t)yy * w + xx);
                if (v > m || v != v) m = v; /* a NaN propagates, as in PyTorch */
            }
        }
        ft_st(out + o, m);
    }
}

struct ft_maxpool2d_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    template <typename T> int run() {
        const ft_tensor *x = dst->src[0];
        const ft_params_maxpool *p = FT_PARAMS(dst, ft_params_maxpool);
        int64_t n = ft_numel(dst);
        unsigned blocks = ft_cuda_blocks(n, FT_EW_THREADS);
        cudaStream_t st = ft_cuda_stream(ctx);
        if (ft_numel(x) <= INT32_MAX && n <= INT32_MAX)
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_maxpool2d<T, int32_t>)((T *)dst->data,
                (const T *)x->data, n, x->ne[2], x->ne[3], dst->ne[2], dst->ne[3], p->kernel,
                p->stride, p->padding);
        else
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_maxpool2d<T, int64_t>)((T *)dst->data,
                (const T *)x->data, n, x->ne[2], x->ne[3], dst->ne[2], dst->ne[3], p->kernel,
                p->stride, p->padding);
        FT_CUDA_LAUNCH_CHECK(ctx, "maxpool2d");
        return FT_OK;
    }
};

FT_CUDA_KERNEL(maxpool2d) {
    const ft_tensor *x = dst->src[0];
    const ft_params_maxpool *p = FT_PARAMS(dst, ft_params_maxpool);
    if (ft_numel(dst) == 0) return FT_OK;
    if (x->ndim != 4 || !ft_tensor_contiguous(x))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "maxpool2d expects a contiguous x [B, C, H, W]");
    if (p->kernel < 1 || p->stride < 1 || p->padding < 0 || 2 * p->padding > p->kernel)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "maxpool2d: invalid window %d/%d/%d", p->kernel,
                            p->stride, p->padding);
    ft_maxpool2d_fn f = {ctx, dst};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

/* ------------------------------------------------------------------------- */
/* global_avgpool                                                             */
/* ------------------------------------------------------------------------- */

struct ft_gap_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    template <typename T> int run() {
        const ft_tensor *x = dst->src[0];
        int64_t s = 1;
        for (int i = 2; i < x->ndim; i++) s *= x->ne[i];
        /* s == 0 gives 0 * inf = NaN, as a mean over nothing is in PyTorch */
        return ft_rows_sum_launch<T>(ctx, (const T *)x->data, (T *)dst->data, x->ne[0] * x->ne[1],
                                     s, s, 1.0f / (float)s, "global_avgpool");
    }
};

FT_CUDA_KERNEL(global_avgpool) {
    const ft_tensor *x = dst->src[0];
    if (ft_numel(dst) == 0) return FT_OK;
    if (x->ndim < 3 || !ft_tensor_contiguous(x))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "global_avgpool expects a contiguous x [B, C, ...]");
    ft_gap_fn f = {ctx, dst};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

/* ------------------------------------------------------------------------- */
/* weight_norm                                                                */
/* ------------------------------------------------------------------------- */

/* v viewed as [outer, nd, inner]; one block per slice j along the kept dim:
 * out[:, j, :] = v[:, j, :] * g[j] / ||v[:, j, :]||. */
template <typename T>
__global__ void ft_k_weight_norm(T *__restrict__ out, const T *__restrict__ v,
                                 const T *__restrict__ g, int64_t outer, int64_t nd, int64_t inner) {
    FT_KERNEL_PROLOGUE();
    __shared__ float red[32];
    int64_t m = outer * inner;
    for (int64_t j = blockIdx.x; j < nd; j += gridDim.x) {
        float sq = 0.0f;
        for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
            int64_t o = e / inner, i = e - o * inner;
            float a = ft_ld(v + (o * nd + j) * inner + i);
            sq += a * a;
        }
        float scale = ft_ld(g + j) / sqrtf(ft_block_sum(sq, red));
        for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
            int64_t o = e / inner, i = e - o * inner, k = (o * nd + j) * inner + i;
            ft_st(out + k, ft_ld(v + k) * scale);
        }
    }
}

struct ft_weight_norm_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    template <typename T> int run() {
        const ft_tensor *g = dst->src[0], *v = dst->src[1];
        int d = FT_PARAMS(dst, ft_params_weight_norm)->dim;
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < d; i++) outer *= v->ne[i];
        for (int i = d + 1; i < v->ndim; i++) inner *= v->ne[i];
        FT_LAUNCH(ctx, ft_cuda_blocks(v->ne[d], 1), 256, 0, ft_cuda_stream(ctx), ft_k_weight_norm<T>)(
            (T *)dst->data, (const T *)v->data, (const T *)g->data, outer, v->ne[d], inner);
        FT_CUDA_LAUNCH_CHECK(ctx, "weight_norm");
        return FT_OK;
    }
};

FT_CUDA_KERNEL(weight_norm) {
    const ft_tensor *g = dst->src[0], *v = dst->src[1];
    int d = FT_PARAMS(dst, ft_params_weight_norm)->dim;
    if (ft_numel(dst) == 0) return FT_OK;
    if (d < 0 || d >= v->ndim || ft_numel(g) != v->ne[d])
        return ft_set_error(ctx, FT_ERR_SHAPE, "weight_norm: g must hold one value per index of dim %d", d);
    if (!ft_tensor_contiguous(g) || !ft_tensor_contiguous(v))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "weight_norm expects contiguous g and v");
    ft_weight_norm_fn f = {ctx, dst};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

/*
 * vision.cu - CUDA kernels of the channels-first LayerNorm (FT_OP_CHANNEL_NORM,
 * ConvNeXt) and of the squeeze-excitation gate (FT_OP_SE_GATE, EfficientNet).
 * f32 accumulation throughout.
 */
#include "strided.cuh"

/* ------------------------------------------------------------------------- */
/* channel_norm                                                               */
/* ------------------------------------------------------------------------- */

/*
 * x [B, C, P]: one thread per (image, position) normalises the C values of its
 * position; a warp reads 32 neighbouring positions of one channel (coalesced).
 * Mean first, then the mean of squared deviations; the normalised value is
 * rounded to T before gamma and beta, as Hugging Face's ConvNextLayerNorm does.
 */
template <typename T>
__global__ void ft_k_channel_norm(T *__restrict__ y, const T *__restrict__ x, const T *__restrict__ gamma,
                                  const T *__restrict__ beta, int64_t batch, int64_t c, int64_t pos, float eps) {
    FT_KERNEL_PROLOGUE();
    const int64_t total = batch * pos;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / pos, p = e - b * pos;
        const T *xp = x + b * c * pos + p;
        T *yp = y + b * c * pos + p;
        float s = 0.0f;
        for (int64_t ci = 0; ci < c; ci++) s += ft_ld(xp + ci * pos);
        const float mean = s / (float)c;
        float sq = 0.0f;
        for (int64_t ci = 0; ci < c; ci++) {
            float d = ft_ld(xp + ci * pos) - mean;
            sq += d * d;
        }
        const float rstd = 1.0f / sqrtf(sq / (float)c + eps);
        for (int64_t ci = 0; ci < c; ci++) {
            T nv;
            ft_st(&nv, (ft_ld(xp + ci * pos) - mean) * rstd);
            float v = ft_ld(&nv);
            if (gamma) v *= ft_ld(gamma + ci);
            if (beta) v += ft_ld(beta + ci);
            ft_st(yp + ci * pos, v);
        }
    }
}

struct ft_channel_norm_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    template <typename T> int run() {
        const ft_tensor *x = dst->src[0], *g = dst->src[1], *b = dst->src[2];
        const int64_t batch = x->ne[0], c = x->ne[1], pos = ft_numel(x) / (batch * c);
        unsigned blocks = ft_cuda_blocks(batch * pos, FT_EW_THREADS);
        FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, ft_cuda_stream(ctx), ft_k_channel_norm<T>)(
            (T *)dst->data, (const T *)x->data, g ? (const T *)g->data : NULL, b ? (const T *)b->data : NULL,
            batch, c, pos, FT_PARAMS(dst, ft_params_norm)->eps);
        FT_CUDA_LAUNCH_CHECK(ctx, "channel_norm");
        return FT_OK;
    }
};

FT_CUDA_KERNEL(channel_norm) {
    const ft_tensor *x = dst->src[0], *g = dst->src[1], *b = dst->src[2];
    if (ft_numel(dst) == 0) return FT_OK;
    if (x->ndim < 2 || !ft_tensor_contiguous(x) || !ft_tensor_contiguous(dst))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "channel_norm expects a contiguous x [B, C, ...]");
    if ((g && (g->nb[0] != 1 || g->dtype != dst->dtype)) || (b && (b->nb[0] != 1 || b->dtype != dst->dtype)))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "channel_norm expects contiguous gamma and beta of x's dtype");
    ft_channel_norm_fn f = {ctx, dst};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

/* ------------------------------------------------------------------------- */
/* se_gate                                                                    */
/* ------------------------------------------------------------------------- */

#define FT_SE_THREADS 256
#define FT_SE_CHANNELS 8 /* channels gated and scaled per block of the second kernel */

/* mean[plane] over the P positions of each (image, channel) plane: a block per plane */
template <typename T>
__global__ void __launch_bounds__(FT_SE_THREADS)
ft_k_se_mean(float *__restrict__ mean, const T *__restrict__ x, int64_t planes, int64_t pos) {
    FT_KERNEL_PROLOGUE();
    __shared__ float red[32];
    for (int64_t pl = blockIdx.x; pl < planes; pl += gridDim.x) {
        const T *p = x + pl * pos;
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < pos; j += blockDim.x) s += ft_ld(p + j);
        s = ft_block_sum(s, red);
        if (threadIdx.x == 0) mean[pl] = s / (float)pos;
    }
}

/*
 * A block per (image, group of FT_SE_CHANNELS channels): the reduced vector
 * z = act(w1 mean + b1) of its image (R values, each a dot product over C: every
 * block of the image recomputes it, R * C multiply-adds, cheaper than a launch),
 * then the gates of its channels, then x * gate over those channels' planes.
 */
template <typename T>
__global__ void __launch_bounds__(FT_SE_THREADS)
ft_k_se_scale(T *__restrict__ y, const T *__restrict__ x, const float *__restrict__ mean, const T *__restrict__ w1,
              const T *__restrict__ b1, const T *__restrict__ w2, const T *__restrict__ b2, int64_t c, int64_t r,
              int64_t pos, int64_t groups, int act) {
    FT_KERNEL_PROLOGUE();
    FT_DYN_SMEM(float, z); /* [r] */
    __shared__ float gate[FT_SE_CHANNELS];
    const int64_t b = blockIdx.x / groups, c0 = (blockIdx.x % groups) * FT_SE_CHANNELS;
    const int64_t nc = c - c0 < FT_SE_CHANNELS ? c - c0 : FT_SE_CHANNELS;
    const float *m = mean + b * c;
    for (int64_t ri = threadIdx.x; ri < r; ri += blockDim.x) {
        float a = ft_ld(b1 + ri);
        for (int64_t ci = 0; ci < c; ci++) a += ft_ld(w1 + ri * c + ci) * m[ci];
        z[ri] = ft_act_apply(act, a);
    }
    __syncthreads();
    if (threadIdx.x < nc) {
        const int64_t ci = c0 + threadIdx.x;
        float a = ft_ld(b2 + ci);
        for (int64_t ri = 0; ri < r; ri++) a += ft_ld(w2 + ci * r + ri) * z[ri];
        gate[threadIdx.x] = ft_sigmoid(a);
    }
    __syncthreads();
    for (int64_t cc = 0; cc < nc; cc++) { /* plane by plane: no 64-bit division per element */
        const int64_t base = (b * c + c0 + cc) * pos;
        const float g = gate[cc];
        for (int64_t j = threadIdx.x; j < pos; j += blockDim.x) ft_st(y + base + j, ft_ld(x + base + j) * g);
    }
}

struct ft_se_gate_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    template <typename T> int run() {
        const ft_tensor *x = dst->src[0];
        const int64_t batch = x->ne[0], c = x->ne[1], r = dst->src[1]->ne[0], pos = ft_numel(x) / (batch * c);
        const int64_t groups = (c + FT_SE_CHANNELS - 1) / FT_SE_CHANNELS;
        if ((size_t)r * sizeof(float) > 48 * 1024 || batch * groups > INT32_MAX)
            return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "se_gate: %lld reduced channels or %lld blocks is too many",
                                (long long)r, (long long)(batch * groups));
        ft_block *blk = NULL;
        float *mean = (float *)ft_cuda_scratch(ctx, (size_t)(batch * c) * sizeof(float), &blk);
        if (!mean) return ctx->status ? ctx->status : FT_ERR_OOM;
        cudaStream_t st = ft_cuda_stream(ctx);
        FT_LAUNCH(ctx, ft_cuda_blocks(batch * c, 1), FT_SE_THREADS, 0, st, ft_k_se_mean<T>)(
            mean, (const T *)x->data, batch * c, pos);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) {
            FT_LAUNCH(ctx, (unsigned)(batch * groups), FT_SE_THREADS, (size_t)r * sizeof(float), st, ft_k_se_scale<T>)(
                (T *)dst->data, (const T *)x->data, mean, (const T *)dst->src[1]->data,
                (const T *)dst->src[2]->data, (const T *)dst->src[3]->data, (const T *)dst->src[4]->data, c, r, pos,
                groups, FT_PARAMS(dst, ft_params_se)->act);
            e = cudaGetLastError();
        }
        /* stream-ordered: whoever takes the scratch next queues behind these kernels */
        ft_block_unref(blk);
        if (e != cudaSuccess)
            return ft_set_error(ctx, FT_ERR_CUDA, "launch of se_gate failed: %s", cudaGetErrorString(e));
        return FT_OK;
    }
};

FT_CUDA_KERNEL(se_gate) {
    const ft_tensor *x = dst->src[0];
    if (ft_numel(dst) == 0) return FT_OK;
    if (x->ndim < 3 || !ft_tensor_contiguous(x) || !ft_tensor_contiguous(dst))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "se_gate expects a contiguous x [B, C, ...]");
    for (int i = 1; i <= 4; i++) {
        const ft_tensor *t = dst->src[i];
        if (!t || t->dtype != dst->dtype || !ft_tensor_contiguous(t))
            return ft_set_error(ctx, FT_ERR_INTERNAL, "se_gate expects contiguous weights and biases of x's dtype");
    }
    ft_se_gate_fn f = {ctx, dst};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

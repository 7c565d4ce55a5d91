/*
 * norm.cu - CUDA reductions and channel normalisations: sum over the last
 * dim, group norm (statistics per (batch, group)) and inference batch norm
 * (per-channel running statistics). f32 accumulation throughout.
 */
#include "strided.cuh"

/* ------------------------------------------------------------------------- */
/* sum_last                                                                   */
/* ------------------------------------------------------------------------- */

struct ft_sum_last_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    int64_t rows, row_stride;
    template <typename T> int run() {
        const ft_tensor *x = dst->src[0];
        return ft_rows_sum_launch<T>(ctx, (const T *)x->data, (T *)dst->data, rows,
                                     x->ne[x->ndim - 1], row_stride, 1.0f, "sum_last");
    }
};

FT_CUDA_KERNEL(sum_last) {
    const ft_tensor *x = dst->src[0];
    int64_t rows = 0, rs = 0;
    if (ft_numel(dst) == 0) return FT_OK;
    if (x->ndim < 1 || !ft_tensor_rows_layout(x, &rows, &rs))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "sum_last expects a rows layout (unit inner stride)");
    ft_sum_last_fn f = {ctx, dst, rows, rs};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

/* ------------------------------------------------------------------------- */
/* groupnorm                                                                  */
/* ------------------------------------------------------------------------- */

#define FT_GN_THREADS 512

/*
 * One block per (batch, group): the group is a contiguous run of m = cg * s
 * elements (cg channels of s positions). Mean first, then the variance as the
 * mean of squared deviations: inputs with large DC offsets (raw audio conv
 * features) lose everything to cancellation with E[x^2] - E[x]^2.
 */
template <typename T>
__global__ void __launch_bounds__(FT_GN_THREADS)
ft_k_groupnorm(T *__restrict__ out, const T *__restrict__ x, const T *__restrict__ gamma,
               int64_t gstride, const T *__restrict__ beta, int64_t bstride, int64_t n_groups_total,
               int groups, int64_t cg, int64_t s, float eps) {
    FT_KERNEL_PROLOGUE();
    __shared__ float red[32];
    int64_t m = cg * s;
    for (int64_t bg = blockIdx.x; bg < n_groups_total; bg += gridDim.x) {
        const T *px = x + bg * m;
        T *po = out + bg * m;
        int64_t c0 = (bg % groups) * cg;
        float sum = 0.0f;
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x) sum += ft_ld(px + j);
        float mean = ft_block_sum(sum, red) / (float)m;
        float sq = 0.0f;
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
            float d = ft_ld(px + j) - mean;
            sq += d * d;
        }
        float var = ft_block_sum(sq, red) / (float)m;
        float rstd = 1.0f / sqrtf(var + eps);
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
            int64_t c = c0 + j / s;
            float y = (ft_ld(px + j) - mean) * rstd;
            if (gamma) y *= ft_ld(gamma + c * gstride);
            if (beta) y += ft_ld(beta + c * bstride);
            ft_st(po + j, y);
        }
    }
}

struct ft_groupnorm_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    template <typename T> int run() {
        const ft_tensor *x = dst->src[0], *g = dst->src[1], *b = dst->src[2];
        const ft_params_norm *p = FT_PARAMS(dst, ft_params_norm);
        int64_t s = 1;
        for (int i = 2; i < x->ndim; i++) s *= x->ne[i];
        int64_t total = x->ne[0] * p->groups, cg = x->ne[1] / p->groups;
        FT_LAUNCH(ctx, ft_cuda_blocks(total, 1), FT_GN_THREADS, 0, ft_cuda_stream(ctx), ft_k_groupnorm<T>)(
            (T *)dst->data, (const T *)x->data, g ? (const T *)g->data : NULL, g ? g->nb[0] : 0,
            b ? (const T *)b->data : NULL, b ? b->nb[0] : 0, total, p->groups, cg, s, p->eps);
        FT_CUDA_LAUNCH_CHECK(ctx, "groupnorm");
        return FT_OK;
    }
};

FT_CUDA_KERNEL(groupnorm) {
    const ft_tensor *x = dst->src[0];
    const ft_params_norm *p = FT_PARAMS(dst, ft_params_norm);
    if (ft_numel(dst) == 0) return FT_OK;
    if (x->ndim < 2 || p->groups < 1 || x->ne[1] % p->groups)
        return ft_set_error(ctx, FT_ERR_SHAPE, "groupnorm: %lld channels do not split into %d groups",
                            x->ndim < 2 ? 0LL : (long long)x->ne[1], p->groups);
    if (!ft_tensor_contiguous(x))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "groupnorm expects a contiguous input");
    ft_groupnorm_fn f = {ctx, dst};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

/* ------------------------------------------------------------------------- */
/* batchnorm (inference: running mean and variance)                          */
/* ------------------------------------------------------------------------- */

/* Per-channel vectors [C] with their element strides. */
template <typename T> struct ft_bn_params {
    const T *mean, *var, *gamma, *beta;
    int64_t sm, sv, sg, sb;
};

/* y = (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c], c = (i / s) % C. */
template <typename T, typename I>
__global__ void ft_k_batchnorm(T *__restrict__ out, const T *__restrict__ x, ft_bn_params<T> q,
                               int64_t n, int64_t ch, int64_t s, float eps) {
    FT_KERNEL_PROLOGUE();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        I c = ((I)i / (I)s) % (I)ch;
        float rstd = 1.0f / sqrtf(ft_ld(q.var + c * q.sv) + eps);
        float y = (ft_ld(x + i) - ft_ld(q.mean + c * q.sm)) * rstd;
        ft_st(out + i, y * ft_ld(q.gamma + c * q.sg) + ft_ld(q.beta + c * q.sb));
    }
}

struct ft_batchnorm_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    template <typename T> int run() {
        const ft_tensor *x = dst->src[0];
        const ft_params_norm *p = FT_PARAMS(dst, ft_params_norm);
        ft_bn_params<T> q;
        q.mean = (const T *)dst->src[1]->data;
        q.var = (const T *)dst->src[2]->data;
        q.gamma = (const T *)dst->src[3]->data;
        q.beta = (const T *)dst->src[4]->data;
        q.sm = dst->src[1]->nb[0];
        q.sv = dst->src[2]->nb[0];
        q.sg = dst->src[3]->nb[0];
        q.sb = dst->src[4]->nb[0];
        int64_t s = 1, n = ft_numel(x);
        for (int i = 2; i < x->ndim; i++) s *= x->ne[i];
        unsigned blocks = ft_cuda_blocks(n, FT_EW_THREADS);
        cudaStream_t st = ft_cuda_stream(ctx);
        if (n <= INT32_MAX)
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_batchnorm<T, int32_t>)((T *)dst->data,
                (const T *)x->data, q, n, x->ne[1], s, p->eps);
        else
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_batchnorm<T, int64_t>)((T *)dst->data,
                (const T *)x->data, q, n, x->ne[1], s, p->eps);
        FT_CUDA_LAUNCH_CHECK(ctx, "batchnorm");
        return FT_OK;
    }
};

FT_CUDA_KERNEL(batchnorm) {
    const ft_tensor *x = dst->src[0];
    if (ft_numel(dst) == 0) return FT_OK;
    if (x->ndim < 2 || !ft_tensor_contiguous(x))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "batchnorm expects a contiguous x [B, C, ...]");
    for (int i = 1; i <= 4; i++)
        if (!dst->src[i] || dst->src[i]->ndim != 1 || dst->src[i]->ne[0] != x->ne[1])
            return ft_set_error(ctx, FT_ERR_SHAPE, "batchnorm parameter %d must have shape [%lld]",
                                i, (long long)x->ne[1]);
    ft_batchnorm_fn f = {ctx, dst};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

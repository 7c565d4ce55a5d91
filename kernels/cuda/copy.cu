/*
 * copy.cu - CUDA data movement: copy (any source strides into a contiguous
 * destination, with dtype conversion float<->float, int<->int, int->float),
 * concat and constant pad of contiguous inputs.
 */
#include "strided.cuh"

#include <type_traits>

/* ------------------------------------------------------------------------- */
/* element conversion                                                         */
/* ------------------------------------------------------------------------- */

template <typename T> struct ft_is_int { static const bool value = std::is_integral<T>::value; };

/* *dst = *src converted: floats through f32, ints by value, ints to floats via f32. */
template <typename To, typename Ti>
__device__ __forceinline__ void ft_cvt(To *dst, const Ti *src) {
    if constexpr (ft_is_int<To>::value && ft_is_int<Ti>::value) {
        *dst = (To)*src;
    } else if constexpr (ft_is_int<Ti>::value) {
        ft_st(dst, (float)*src);
    } else if constexpr (ft_is_int<To>::value) {
        *dst = (To)ft_ld(src); /* instantiated only: the host refuses float -> int */
    } else if constexpr (std::is_same<To, Ti>::value) {
        *dst = *src; /* exact, also keeps NaN payloads */
    } else {
        ft_st(dst, ft_ld(src));
    }
}

/* ------------------------------------------------------------------------- */
/* copy                                                                       */
/* ------------------------------------------------------------------------- */

/* Dense source: V elements per aligned vector, then the tail one by one. */
template <typename To, typename Ti, int V>
__global__ void ft_k_copy_dense(To *__restrict__ dst, const Ti *__restrict__ src, int64_t n,
                                int vec) {
    FT_KERNEL_PROLOGUE();
    int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t nv = vec ? n / V : 0;
    if (vec) {
        const ft_vec<Ti, V> *s = reinterpret_cast<const ft_vec<Ti, V> *>(src);
        ft_vec<To, V> *d = reinterpret_cast<ft_vec<To, V> *>(dst);
        for (int64_t i = tid; i < nv; i += step) {
            ft_vec<Ti, V> a = s[i];
            ft_vec<To, V> b;
#pragma unroll
            for (int j = 0; j < V; j++) ft_cvt(&b.v[j], &a.v[j]);
            d[i] = b;
        }
    }
    for (int64_t i = nv * V + tid; i < n; i += step) ft_cvt(dst + i, src + i);
}

/* Strided source: dst[i] = src[offset of i], I the index type. */
template <typename To, typename Ti, typename I>
__global__ void ft_k_copy_nd(To *__restrict__ dst, const Ti *__restrict__ src,
                             const __grid_constant__ ft_nd<1> d,
                             int64_t n) {
    FT_KERNEL_PROLOGUE();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        I off[1];
        ft_nd_offsets<1, I>(d, (I)i, off);
        ft_cvt(dst + i, src + off[0]);
    }
}

template <typename To, typename Ti> static int ft_copy_run(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0];
    int64_t n = ft_numel(dst);
    To *out = (To *)dst->data;
    const Ti *in = (const Ti *)x->data;
    cudaStream_t st = ft_cuda_stream(ctx);
    unsigned blocks = ft_cuda_blocks(n, FT_EW_THREADS);
    if (ft_tensor_contiguous(x)) {
        constexpr int SZ = sizeof(To) > sizeof(Ti) ? sizeof(To) : sizeof(Ti);
        constexpr int V = 16 / SZ;
        int vec = ft_cu_aligned(out, sizeof(To) * V) && ft_cu_aligned(in, sizeof(Ti) * V);
        if (vec) blocks = ft_cuda_blocks(n / V + 1, FT_EW_THREADS);
        FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_copy_dense<To, Ti, V>)(out, in, n, vec);
        FT_CUDA_LAUNCH_CHECK(ctx, "copy (dense)");
        return FT_OK;
    }
    ft_nd<1> d;
    d.ndim = x->ndim;
    for (int i = 0; i < x->ndim; i++) d.ne[i] = x->ne[i];
    ft_nd_set_operand(&d, 0, x, x->ndim);
    ft_nd_collapse(&d);
    if (ft_nd_fits_i32(&d, n))
        FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_copy_nd<To, Ti, int32_t>)(out, in, d, n);
    else
        FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_copy_nd<To, Ti, int64_t>)(out, in, d, n);
    FT_CUDA_LAUNCH_CHECK(ctx, "copy (strided)");
    return FT_OK;
}

template <typename Ti> static int ft_copy_from(ft_ctx *ctx, ft_tensor *dst) {
    switch (dst->dtype) {
    case FT_DTYPE_F32: return ft_copy_run<float, Ti>(ctx, dst);
    case FT_DTYPE_F16: return ft_copy_run<__half, Ti>(ctx, dst);
    case FT_DTYPE_BF16: return ft_copy_run<__nv_bfloat16, Ti>(ctx, dst);
    case FT_DTYPE_I64: return ft_copy_run<int64_t, Ti>(ctx, dst);
    case FT_DTYPE_I32: return ft_copy_run<int32_t, Ti>(ctx, dst);
    default: break;
    }
    return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "copy to dtype %s not supported",
                        ft_dtype_name(dst->dtype));
}

FT_CUDA_KERNEL(copy) {
    const ft_tensor *x = dst->src[0];
    int64_t n = ft_numel(dst);
    if (n == 0) return FT_OK;
    bool fi = ft_dtype_is_float(x->dtype), fo = ft_dtype_is_float(dst->dtype);
    if (fi && !fo)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "copy from %s to %s is not supported "
                            "(float to integer)", ft_dtype_name(x->dtype), ft_dtype_name(dst->dtype));
    if (x->dtype == dst->dtype && ft_tensor_contiguous(x)) {
        /* same bytes: a device-to-device copy on the stream (capturable as a memcpy node) */
        FT_CUDA_TRY(ctx, cudaMemcpyAsync(dst->data, x->data, ft_nbytes(dst),
                                         cudaMemcpyDeviceToDevice, ft_cuda_stream(ctx)));
        return FT_OK;
    }
    switch (x->dtype) {
    case FT_DTYPE_F32: return ft_copy_from<float>(ctx, dst);
    case FT_DTYPE_F16: return ft_copy_from<__half>(ctx, dst);
    case FT_DTYPE_BF16: return ft_copy_from<__nv_bfloat16>(ctx, dst);
    case FT_DTYPE_I64: return ft_copy_from<int64_t>(ctx, dst);
    case FT_DTYPE_I32: return ft_copy_from<int32_t>(ctx, dst);
    default: break;
    }
    return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "copy from dtype %s not supported",
                        ft_dtype_name(x->dtype));
}

/* ------------------------------------------------------------------------- */
/* concat and pad: pure data movement, typed by element size                  */
/* ------------------------------------------------------------------------- */

/* out [outer, ca + cb] = a [outer, ca] ++ b [outer, cb] (ca, cb: the concat
 * dim times everything inside it). */
template <typename U>
__global__ void ft_k_concat(U *__restrict__ out, const U *__restrict__ a, const U *__restrict__ b,
                            int64_t outer, int64_t ca, int64_t cb) {
    FT_KERNEL_PROLOGUE();
    int64_t row = ca + cb, n = outer * row;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / row, c = i - r * row;
        out[i] = c < ca ? a[r * ca + c] : b[r * cb + (c - ca)];
    }
}

template <typename U>
static int ft_concat_launch(ft_ctx *ctx, ft_tensor *dst, int64_t outer, int64_t ca, int64_t cb) {
    int64_t n = outer * (ca + cb);
    FT_LAUNCH(ctx, ft_cuda_blocks(n, FT_EW_THREADS), FT_EW_THREADS, 0, ft_cuda_stream(ctx), ft_k_concat<U>)(
        (U *)dst->data, (const U *)dst->src[0]->data, (const U *)dst->src[1]->data, outer, ca, cb);
    FT_CUDA_LAUNCH_CHECK(ctx, "concat");
    return FT_OK;
}

FT_CUDA_KERNEL(concat) {
    const ft_tensor *a = dst->src[0], *b = dst->src[1];
    int d = FT_PARAMS(dst, ft_params_concat)->dim;
    if (ft_numel(dst) == 0) return FT_OK;
    if (!ft_tensor_contiguous(a) || !ft_tensor_contiguous(b))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "concat expects contiguous inputs");
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++) outer *= dst->ne[i];
    for (int i = d + 1; i < dst->ndim; i++) inner *= dst->ne[i];
    int64_t ca = a->ne[d] * inner, cb = b->ne[d] * inner;
    switch (ft_dtype_size(dst->dtype)) {
    case 2: return ft_concat_launch<uint16_t>(ctx, dst, outer, ca, cb);
    case 4: return ft_concat_launch<uint32_t>(ctx, dst, outer, ca, cb);
    case 8: return ft_concat_launch<uint64_t>(ctx, dst, outer, ca, cb);
    default: break;
    }
    return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "concat of dtype %s not supported",
                        ft_dtype_name(dst->dtype));
}

/* out [outer, before + L + after, inner] from x [outer, L, inner], `value` outside. */
template <typename T>
__global__ void ft_k_pad(T *__restrict__ out, const T *__restrict__ x, int64_t outer, int64_t len,
                         int64_t inner, int64_t before, int64_t olen, T value) {
    FT_KERNEL_PROLOGUE();
    int64_t n = outer * olen * inner;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t in = i % inner, t = i / inner;
        int64_t l = t % olen - before, o = t / olen;
        out[i] = (l >= 0 && l < len) ? x[(o * len + l) * inner + in] : value;
    }
}

template <typename T> static int ft_pad_run(ft_ctx *ctx, ft_tensor *dst, T value) {
    const ft_tensor *x = dst->src[0];
    const ft_params_pad *p = FT_PARAMS(dst, ft_params_pad);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < p->dim; i++) outer *= dst->ne[i];
    for (int i = p->dim + 1; i < dst->ndim; i++) inner *= dst->ne[i];
    int64_t n = ft_numel(dst);
    FT_LAUNCH(ctx, ft_cuda_blocks(n, FT_EW_THREADS), FT_EW_THREADS, 0, ft_cuda_stream(ctx), ft_k_pad<T>)(
        (T *)dst->data, (const T *)x->data, outer, x->ne[p->dim], inner, p->before,
        dst->ne[p->dim], value);
    FT_CUDA_LAUNCH_CHECK(ctx, "pad");
    return FT_OK;
}

/* An integer padding value: truncated, NaN -> 0, saturated to the i32 range so
 * the conversion is defined for both integer dtypes. */
static double ft_pad_int_value(float v) {
    if (v != v) return 0.0;
    if (v > 2147483647.0f) return 2147483647.0;
    if (v < -2147483648.0f) return -2147483648.0;
    return (double)(int64_t)v;
}

FT_CUDA_KERNEL(pad) {
    const ft_tensor *x = dst->src[0];
    float v = FT_PARAMS(dst, ft_params_pad)->value;
    if (ft_numel(dst) == 0) return FT_OK;
    if (!ft_tensor_contiguous(x))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "pad expects a contiguous input");
    /* the padding value is converted on the host once (same rounding as ft_st) */
    switch (dst->dtype) {
    case FT_DTYPE_F32: return ft_pad_run<float>(ctx, dst, v);
    case FT_DTYPE_F16: return ft_pad_run<__half>(ctx, dst, __float2half_rn(v));
    case FT_DTYPE_BF16: return ft_pad_run<__nv_bfloat16>(ctx, dst, __float2bfloat16_rn(v));
    case FT_DTYPE_I64: return ft_pad_run<int64_t>(ctx, dst, (int64_t)ft_pad_int_value(v));
    case FT_DTYPE_I32: return ft_pad_run<int32_t>(ctx, dst, (int32_t)ft_pad_int_value(v));
    default: break;
    }
    return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "pad of dtype %s not supported",
                        ft_dtype_name(dst->dtype));
}

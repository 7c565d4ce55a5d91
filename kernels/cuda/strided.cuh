/*
 * strided.cuh - helpers private to the elementwise-style CUDA kernels (copy,
 * eltwise, gather, norm, pool, conv): N-d strided/broadcast index descriptors
 * with dimension collapsing, activations, warp/block sums and a row-sum kernel.
 * Everything here is header-only (templates, static inline) so each .cu file
 * stays a self-contained translation unit.
 */
#ifndef FT_CUDA_STRIDED_CUH
#define FT_CUDA_STRIDED_CUH

#include "cuda_common.cuh"

#include <stdint.h>

/* "#pragma unroll" for functions compiled for the host too (gcc warns about it). */
#ifdef __CUDA_ARCH__
#define FT_UNROLL _Pragma("unroll")
#else
#define FT_UNROLL
#endif

/* Threads per block of the elementwise kernels. */
#define FT_EW_THREADS 256

/* ------------------------------------------------------------------------- */
/* N-d descriptors                                                            */
/* ------------------------------------------------------------------------- */

/*
 * The iteration space of a contiguous output (ne, collapsed) and, for each of
 * K operands, the element strides that reach it (0 on broadcast dims). Passed
 * to kernels by value.
 */
template <int K> struct ft_nd {
    int ndim;
    int64_t ne[FT_MAX_DIMS];
    int64_t nb[K][FT_MAX_DIMS];
};

/* Fills operand k of d for tensor t broadcast (right-aligned, NumPy rules) to
 * the output shape out_ne[out_nd]. The caller has checked broadcastability. */
template <int K>
static inline void ft_nd_set_operand(ft_nd<K> *d, int k, const ft_tensor *t, int out_nd) {
    for (int i = 0; i < out_nd; i++) {
        int j = i - (out_nd - t->ndim);
        d->nb[k][i] = (j >= 0 && t->ne[j] != 1) ? t->nb[j] : 0;
    }
}

/* Drops size-1 dims and merges neighbours that every operand walks as one
 * (stride[i] == stride[i+1] * ne[i+1]): a [B,S,D] + [D] add becomes 2-d and a
 * contiguous copy 1-d, which keeps the per-element index math short. */
template <int K> static inline void ft_nd_collapse(ft_nd<K> *d) {
    int n = 0;
    for (int i = 0; i < d->ndim; i++) {
        if (d->ne[i] == 1) continue;
        d->ne[n] = d->ne[i];
        for (int k = 0; k < K; k++) d->nb[k][n] = d->nb[k][i];
        n++;
    }
    if (n == 0) { /* a single element */
        d->ne[0] = 1;
        for (int k = 0; k < K; k++) d->nb[k][0] = 0;
        n = 1;
    }
    int m = n - 1; /* index of the innermost kept dim, built outward */
    int64_t ne[FT_MAX_DIMS], nb[K][FT_MAX_DIMS];
    int out = FT_MAX_DIMS - 1;
    ne[out] = d->ne[m];
    for (int k = 0; k < K; k++) nb[k][out] = d->nb[k][m];
    for (int i = m - 1; i >= 0; i--) {
        bool merge = true;
        for (int k = 0; k < K; k++)
            if (d->nb[k][i] != nb[k][out] * ne[out]) merge = false;
        if (merge) {
            ne[out] *= d->ne[i];
        } else {
            out--;
            ne[out] = d->ne[i];
            for (int k = 0; k < K; k++) nb[k][out] = d->nb[k][i];
        }
    }
    d->ndim = FT_MAX_DIMS - out;
    for (int i = 0; i < d->ndim; i++) {
        d->ne[i] = ne[out + i];
        for (int k = 0; k < K; k++) d->nb[k][i] = nb[k][out + i];
    }
}

/* Whether every offset the descriptor can produce, and n, fit in int32: the
 * 32-bit index path divides several times faster than the 64-bit one. */
template <int K> static inline bool ft_nd_fits_i32(const ft_nd<K> *d, int64_t n) {
    if (n > INT32_MAX) return false;
    for (int k = 0; k < K; k++) {
        int64_t span = 0;
        for (int i = 0; i < d->ndim; i++)
            span += (d->ne[i] - 1) * (d->nb[k][i] < 0 ? -d->nb[k][i] : d->nb[k][i]);
        if (span > INT32_MAX) return false;
    }
    return true;
}

/* Offsets of output element i in each operand (I = int32_t or int64_t). Also
 * a host function, so the index math can be checked without a GPU. */
template <int K, typename I>
__host__ __device__ __forceinline__ void ft_nd_offsets(const ft_nd<K> &d, I i, I off[K]) {
    FT_UNROLL
    for (int k = 0; k < K; k++) off[k] = 0;
    for (int dim = d.ndim - 1; dim >= 0; dim--) {
        I n = (I)d.ne[dim];
        I c = i % n;
        i /= n;
        FT_UNROLL
        for (int k = 0; k < K; k++) off[k] += c * (I)d.nb[k][dim];
    }
}

static inline bool ft_cu_aligned(const void *p, size_t bytes) { return ((uintptr_t)p % bytes) == 0; }

/* V elements of T moved as one aligned load/store (16 bytes for 4 f32 or 8 f16). */
template <typename T, int V> struct alignas(sizeof(T) * V) ft_vec {
    T v[V];
};

/* ------------------------------------------------------------------------- */
/* activations                                                                */
/* ------------------------------------------------------------------------- */

/* ft_act / unary op math in f32; the exact (erf) GELU, the tanh GELU of "gelu_new". */
__device__ __forceinline__ float ft_gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float ft_gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float ft_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
/* NaN stays NaN, as torch.relu and the CPU reference (fused or not) */
__device__ __forceinline__ float ft_relu(float x) { return x > 0.0f || x != x ? x : 0.0f; }
/* min(max(x, 0), 6), NaN kept */
__device__ __forceinline__ float ft_relu6(float x) { return x != x ? x : fminf(fmaxf(x, 0.0f), 6.0f); }
__device__ __forceinline__ float ft_silu(float x) { return x / (1.0f + expf(-x)); }

__device__ __forceinline__ float ft_act_apply(int act, float x) {
    switch (act) {
    case FT_ACT_GELU: return ft_gelu_erf(x);
    case FT_ACT_GELU_TANH: return ft_gelu_tanh(x);
    case FT_ACT_RELU: return ft_relu(x);
    case FT_ACT_TANH: return tanhf(x);
    case FT_ACT_SIGMOID: return ft_sigmoid(x);
    case FT_ACT_RELU6: return ft_relu6(x);
    case FT_ACT_SILU: return ft_silu(x);
    default: return x;
    }
}

/* The ft_act of a unary op, -1 when op is not one (host and device: the
 * fused chains carry ft_op values). */
__host__ __device__ static inline int ft_unary_act(int op) {
    switch (op) {
    case FT_OP_GELU: return FT_ACT_GELU;
    case FT_OP_GELU_TANH: return FT_ACT_GELU_TANH;
    case FT_OP_RELU: return FT_ACT_RELU;
    case FT_OP_TANH: return FT_ACT_TANH;
    case FT_OP_SIGMOID: return FT_ACT_SIGMOID;
    case FT_OP_RELU6: return FT_ACT_RELU6;
    case FT_OP_SILU: return FT_ACT_SILU;
    default: return -1;
    }
}

/* ------------------------------------------------------------------------- */
/* reductions                                                                 */
/* ------------------------------------------------------------------------- */

__device__ __forceinline__ float ft_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over the block, returned to every thread. blockDim.x is a multiple of 32
 * (at most 1024); `red` is 32 floats of shared memory. Two barriers, so calls
 * may follow each other with the same buffer. */
__device__ __forceinline__ float ft_block_sum(float v, float *red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ft_warp_sum(v);
    __syncthreads(); /* red may still be read by a previous call */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0f;
    return ft_warp_sum(v);
}

/*
 * out[r] = scale * sum_c x[r * row_stride + c] for r < rows: one warp per row
 * when rows are short, one block per row when long (block size tells which:
 * warp_per_row). f32 accumulation; grid-stride over rows.
 */
template <typename T>
__global__ void ft_k_rows_sum(const T *__restrict__ x, T *__restrict__ out, int64_t rows,
                              int64_t cols, int64_t row_stride, float scale, int warp_per_row) {
    FT_KERNEL_PROLOGUE();
    __shared__ float red[32];
    if (warp_per_row) {
        int lane = threadIdx.x & 31;
        int64_t wpb = blockDim.x >> 5;
        for (int64_t r = (int64_t)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows;
             r += (int64_t)gridDim.x * wpb) {
            const T *p = x + r * row_stride;
            float s = 0.0f;
            for (int64_t c = lane; c < cols; c += 32) s += ft_ld(p + c);
            s = ft_warp_sum(s);
            if (lane == 0) ft_st(out + r, s * scale);
        }
    } else {
        for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
            const T *p = x + r * row_stride;
            float s = 0.0f;
            for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += ft_ld(p + c);
            s = ft_block_sum(s, red);
            if (threadIdx.x == 0) ft_st(out + r, s * scale);
        }
    }
}

/* Launches ft_k_rows_sum on the context stream with a geometry fitted to cols. */
template <typename T>
static inline int ft_rows_sum_launch(ft_ctx *ctx, const T *x, T *out, int64_t rows, int64_t cols,
                                     int64_t row_stride, float scale, const char *what) {
    if (rows <= 0) return FT_OK;
    int warp_per_row = cols <= 1024;
    unsigned blocks = warp_per_row ? ft_cuda_blocks(rows, 8) : ft_cuda_blocks(rows, 1);
    FT_LAUNCH(ctx, blocks, 256, 0, ft_cuda_stream(ctx), ft_k_rows_sum<T>)(x, out, rows, cols, row_stride,
                                                                    scale, warp_per_row);
    FT_CUDA_LAUNCH_CHECK(ctx, what);
    return FT_OK;
}

#endif /* FT_CUDA_STRIDED_CUH */

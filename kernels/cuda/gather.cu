/*
 * gather.cu - CUDA gathers: embedding (rows of a table picked by integer ids)
 * and gather_last (per-row picks along the last dim); position_ids (the
 * positions RoBERTa gathers: a prefix count of non-pad ids per row).
 *
 * Index policy: ids live on the device, so the host cannot validate them
 * before the launch. An out-of-range index is clamped in the kernel (never an
 * out-of-bounds read); with ctx->sync_debug (FT_SYNC_DEBUG=1, not capturing)
 * a device flag records it and the op reports FT_ERR_INVALID_ARG after a
 * synchronization. Otherwise clamping is silent: the models validate their
 * integer inputs on the host before upload (validate() in models/).
 */
#include "strided.cuh"

#include "cuda_backend_internal.h"

/* Clamps index v into [0, n); sets *bad when it had to. */
__device__ __forceinline__ int64_t ft_clamp_index(int64_t v, int64_t n, int *bad) {
    if (v < 0 || v >= n) {
        if (bad) *bad = 1; /* benign race: every writer stores the same value */
        v = v < 0 ? 0 : n - 1;
    }
    return v;
}

/* The optional out-of-range flag of one launch (see the header comment). */
typedef struct ft_index_check {
    int *flag;     /* device int, NULL when not checking */
    ft_block *blk; /* its scratch block */
} ft_index_check;

static int ft_index_check_begin(ft_ctx *ctx, ft_index_check *c) {
    c->flag = NULL;
    c->blk = NULL;
    if (!ctx->sync_debug || ft_cuda_capturing(ctx)) return FT_OK;
    c->flag = (int *)ft_cuda_scratch(ctx, sizeof(int), &c->blk);
    if (!c->flag) return ctx->status ? ctx->status : FT_ERR_OOM;
    cudaError_t e = cudaMemsetAsync(c->flag, 0, sizeof(int), ft_cuda_stream(ctx));
    if (e != cudaSuccess) {
        ft_block_unref(c->blk);
        c->flag = NULL;
        return ft_set_error(ctx, FT_ERR_CUDA, "cudaMemsetAsync failed: %s", cudaGetErrorString(e));
    }
    return FT_OK;
}

/* Reads the flag back (debug only: this synchronizes) and releases it. */
static int ft_index_check_end(ft_ctx *ctx, ft_index_check *c, int launch_st, const char *what,
                              int64_t limit) {
    if (!c->flag) return launch_st;
    int h = 0;
    cudaError_t e = cudaSuccess;
    if (launch_st == FT_OK) {
        e = cudaMemcpyAsync(&h, c->flag, sizeof(int), cudaMemcpyDeviceToHost, ft_cuda_stream(ctx));
        if (e == cudaSuccess) e = cudaStreamSynchronize(ft_cuda_stream(ctx));
    }
    /* after the synchronization nothing on the stream uses the flag any more */
    ft_block_unref(c->blk);
    c->flag = NULL;
    if (launch_st != FT_OK) return launch_st;
    if (e != cudaSuccess)
        return ft_set_error(ctx, FT_ERR_CUDA, "%s: reading the index check failed: %s", what,
                            cudaGetErrorString(e));
    if (h)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG,
                            "%s: an index is outside [0, %lld) (clamped on the device)", what,
                            (long long)limit);
    return FT_OK;
}

/* ------------------------------------------------------------------------- */
/* embedding                                                                  */
/* ------------------------------------------------------------------------- */

/* out [N, row] = table [V, row][ids[n]], moved in units U (row counted in U). */
template <typename U, typename Id>
__global__ void ft_k_embedding(U *__restrict__ out, const U *__restrict__ table,
                               const Id *__restrict__ ids, int64_t n_ids, int64_t row, int64_t vocab,
                               int *bad) {
    FT_KERNEL_PROLOGUE();
    int64_t n = n_ids * row;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / row, c = i - r * row;
        int64_t id = ft_clamp_index((int64_t)ids[r], vocab, bad);
        out[i] = table[id * row + c];
    }
}

template <typename U, typename Id>
static int ft_embedding_launch(ft_ctx *ctx, ft_tensor *dst, int64_t row_bytes, int *bad) {
    const ft_tensor *tab = dst->src[0], *ids = dst->src[1];
    int64_t n_ids = ft_numel(ids), row = row_bytes / (int64_t)sizeof(U);
    FT_LAUNCH(ctx, ft_cuda_blocks(n_ids * row, FT_EW_THREADS), FT_EW_THREADS, 0, ft_cuda_stream(ctx),
              ft_k_embedding<U, Id>)((U *)dst->data, (const U *)tab->data, (const Id *)ids->data,
                                     n_ids, row, tab->ne[0], bad);
    FT_CUDA_LAUNCH_CHECK(ctx, "embedding");
    return FT_OK;
}

/* Picks the widest unit that divides the row and the pointers' alignment. */
template <typename Id>
static int ft_embedding_by_unit(ft_ctx *ctx, ft_tensor *dst, int *bad) {
    const ft_tensor *tab = dst->src[0];
    int64_t rb = tab->ne[1] * (int64_t)ft_dtype_size(tab->dtype);
    uintptr_t al = (uintptr_t)dst->data | (uintptr_t)tab->data | (uintptr_t)rb;
    if (al % 16 == 0) return ft_embedding_launch<uint4, Id>(ctx, dst, rb, bad);
    if (al % 8 == 0) return ft_embedding_launch<uint2, Id>(ctx, dst, rb, bad);
    if (al % 4 == 0) return ft_embedding_launch<uint32_t, Id>(ctx, dst, rb, bad);
    return ft_embedding_launch<uint16_t, Id>(ctx, dst, rb, bad);
}

FT_CUDA_KERNEL(embedding) {
    const ft_tensor *tab = dst->src[0], *ids = dst->src[1];
    if (ft_numel(dst) == 0) return FT_OK;
    if (!ft_tensor_contiguous(tab) || !ft_tensor_contiguous(ids))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "embedding expects contiguous inputs");
    if (tab->ne[0] < 1)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "embedding table has no rows");
    ft_index_check chk;
    int st = ft_index_check_begin(ctx, &chk);
    if (st) return st;
    if (ids->dtype == FT_DTYPE_I64)
        st = ft_embedding_by_unit<int64_t>(ctx, dst, chk.flag);
    else
        st = ft_embedding_by_unit<int32_t>(ctx, dst, chk.flag);
    return ft_index_check_end(ctx, &chk, st, "embedding", tab->ne[0]);
}

/* ------------------------------------------------------------------------- */
/* gather_last                                                                */
/* ------------------------------------------------------------------------- */

/* out [R, J] (R = rows of x [..., I, T]) = x[r, idx[r % I, j]]. */
template <typename U, typename Id>
__global__ void ft_k_gather_last(U *__restrict__ out, const U *__restrict__ x,
                                 const Id *__restrict__ idx, int64_t rows, int64_t ni, int64_t nt,
                                 int64_t nj, int *bad) {
    FT_KERNEL_PROLOGUE();
    int64_t n = rows * nj;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < n;
         o += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = o / nj, j = o - r * nj, i = r % ni;
        int64_t t = ft_clamp_index((int64_t)idx[i * nj + j], nt, bad);
        out[o] = x[r * nt + t];
    }
}

template <typename U, typename Id> static int ft_gather_last_launch(ft_ctx *ctx, ft_tensor *dst, int *bad) {
    const ft_tensor *x = dst->src[0], *idx = dst->src[1];
    int64_t nt = x->ne[x->ndim - 1], ni = x->ne[x->ndim - 2], nj = idx->ne[1];
    int64_t rows = ft_numel(x) / nt;
    FT_LAUNCH(ctx, ft_cuda_blocks(rows * nj, FT_EW_THREADS), FT_EW_THREADS, 0, ft_cuda_stream(ctx),
              ft_k_gather_last<U, Id>)((U *)dst->data, (const U *)x->data, (const Id *)idx->data,
                                       rows, ni, nt, nj, bad);
    FT_CUDA_LAUNCH_CHECK(ctx, "gather_last");
    return FT_OK;
}

template <typename Id> static int ft_gather_last_by_size(ft_ctx *ctx, ft_tensor *dst, int *bad) {
    switch (ft_dtype_size(dst->dtype)) {
    case 2: return ft_gather_last_launch<uint16_t, Id>(ctx, dst, bad);
    case 4: return ft_gather_last_launch<uint32_t, Id>(ctx, dst, bad);
    case 8: return ft_gather_last_launch<uint64_t, Id>(ctx, dst, bad);
    default: break;
    }
    return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "gather_last of dtype %s not supported",
                        ft_dtype_name(dst->dtype));
}

FT_CUDA_KERNEL(gather_last) {
    const ft_tensor *x = dst->src[0], *idx = dst->src[1];
    if (ft_numel(dst) == 0) return FT_OK;
    if (!ft_tensor_contiguous(x) || !ft_tensor_contiguous(idx))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "gather_last expects contiguous inputs");
    int64_t nt = x->ne[x->ndim - 1];
    if (nt < 1)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "gather_last from an empty last dim");
    ft_index_check chk;
    int st = ft_index_check_begin(ctx, &chk);
    if (st) return st;
    if (idx->dtype == FT_DTYPE_I64)
        st = ft_gather_last_by_size<int64_t>(ctx, dst, chk.flag);
    else
        st = ft_gather_last_by_size<int32_t>(ctx, dst, chk.flag);
    return ft_index_check_end(ctx, &chk, st, "gather_last", nt);
}

/* ------------------------------------------------------------------------- */
/* position_ids                                                               */
/* ------------------------------------------------------------------------- */

#define FT_POS_WARPS 4

/* pos [rows, n] = cumsum(ids != pad) * (ids != pad) + pad per row: one warp per
 * row walks it in chunks of 32, an inclusive warp scan per chunk. */
template <typename Id>
__global__ void ft_k_position_ids(int64_t *__restrict__ out, const Id *__restrict__ ids, int64_t rows,
                                  int64_t n, int64_t pad) {
    FT_KERNEL_PROLOGUE();
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * FT_POS_WARPS + (threadIdx.x >> 5);
    if (row >= rows) return;
    const Id *x = ids + row * n;
    int64_t *o = out + row * n, base = 0;
    for (int64_t j0 = 0; j0 < n; j0 += 32) {
        const int64_t j = j0 + lane;
        const int real = j < n && (int64_t)x[j] != pad;
        int c = real;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int up = __shfl_up_sync(0xffffffffu, c, d);
            if (lane >= d) c += up;
        }
        if (j < n) o[j] = (real ? base + c : 0) + pad;
        base += __shfl_sync(0xffffffffu, c, 31);
    }
}

template <typename Id> static int ft_position_ids_launch(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *ids = dst->src[0];
    const int64_t n = ids->ne[ids->ndim - 1], rows = ft_numel(ids) / n;
    const unsigned blocks = (unsigned)((rows + FT_POS_WARPS - 1) / FT_POS_WARPS);
    FT_LAUNCH(ctx, blocks, 32 * FT_POS_WARPS, 0, ft_cuda_stream(ctx), ft_k_position_ids<Id>)(
        (int64_t *)dst->data, (const Id *)ids->data, rows, n,
        FT_PARAMS(dst, ft_params_position_ids)->padding_idx);
    FT_CUDA_LAUNCH_CHECK(ctx, "position_ids");
    return FT_OK;
}

FT_CUDA_KERNEL(position_ids) {
    const ft_tensor *ids = dst->src[0];
    if (ft_numel(dst) == 0) return FT_OK;
    if (!ft_tensor_contiguous(ids) || !ft_tensor_contiguous(dst))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "position_ids expects contiguous tensors");
    const int64_t rows = ft_numel(ids) / ids->ne[ids->ndim - 1];
    if ((rows + FT_POS_WARPS - 1) / FT_POS_WARPS > INT32_MAX)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "position_ids: too many rows");
    if (ids->dtype == FT_DTYPE_I64) return ft_position_ids_launch<int64_t>(ctx, dst);
    return ft_position_ids_launch<int32_t>(ctx, dst);
}

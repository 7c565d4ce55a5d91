/*
 * attention.cu - the fused attention kernel softmax(q k^T * scale + mask) v and
 * the scaled, masked softmax over the last dim (the unfused GEMM-softmax-GEMM
 * path and models that call ft_softmax).
 *
 * Attention is flash-style: one block per (batch, head, tile of 16 query
 * rows), four warps of four rows each; key/value tiles are staged in shared
 * memory as f32 and an online softmax (running max and sum, f32) keeps the
 * scores out of device memory, so any key length works. Head dims up to 128
 * (q/k and v); beyond that the op reports FT_ERR_UNSUPPORTED. q/k/v need a
 * unit stride in the last dim (the op API copies otherwise); all other strides
 * are free. The mask is f32, broadcast with any strides (0 too).
 *
 * Both the softmax and the attention take Hugging Face GPT-2's causal mask as a
 * flag (no [Sq, Sk] mask in memory): the scaled score of a key past its query
 * is replaced by finfo(float32).min before the mask is added, so a padded row
 * whose every key is masked attends exactly as HF's does. The attention stops
 * at the first key tile past the block's rows once those keys provably get
 * probability 0 (every row of a causal block without padding does).
 *
 * Two kernels: v2 (attention_kernel, the default: 64-key tiles, float4 shared
 * reads, 16-byte pipelined tile loads where aligned; see above it) and v1
 * (attention_v1_kernel, the first one), which FT_ATTN_KERNEL=v1 selects so the
 * two can be timed against each other on a GPU.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "cuda_common.cuh"

/* ------------------------------------------------------------------------- */
/* shared helpers                                                             */
/* ------------------------------------------------------------------------- */

__device__ __forceinline__ float at_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float at_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* ------------------------------------------------------------------------- */
/* softmax                                                                    */
/* ------------------------------------------------------------------------- */

#define SM_WARPS 4

/* Mask strides aligned to x's dims (0 where the mask is absent or size 1). */
struct sm_shape {
    int nd;
    int64_t ne[FT_MAX_DIMS];
    int64_t mst[FT_MAX_DIMS];
    int causal; /* HF GPT-2's causal replacement: key j > i + off of query row i gets FT_CU_F32_MIN */
};

#define FT_CU_F32_MIN (-3.4028234663852886e38f) /* finfo(float32).min */

/* Whether key j of score row `row` is past its query's causal limit ([..., Sq, Sk] rows). */
__device__ __forceinline__ bool sm_causal_masked(const sm_shape &s, int64_t row, int64_t j) {
    const int64_t sq = s.ne[s.nd - 2], sk = s.ne[s.nd - 1];
    return s.causal && j > row % sq + (sk - sq);
}

__device__ __forceinline__ int64_t sm_mask_row(const sm_shape &s, int64_t row) {
    int64_t off = 0;
    for (int d = s.nd - 2; d >= 0; d--) {
        off += (row % s.ne[d]) * s.mst[d];
        row /= s.ne[d];
    }
    return off;
}

/* One warp per row, the row held in registers (n <= 32 * NPL). */
template <typename T, int NPL>
__global__ void softmax_warp_kernel(T *y, const T *x, int64_t rs, const float *mask,
                                    const __grid_constant__ sm_shape s,
                                    int64_t rows, int n, float scale) {
    FT_KERNEL_PROLOGUE();
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    if (row >= rows) return;
    const T *xr = x + row * rs;
    const float *mr = mask ? mask + sm_mask_row(s, row) : nullptr;
    int64_t mk = s.mst[s.nd - 1];
    float v[NPL];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        int j = lane + 32 * i;
        v[i] = -INFINITY;
        if (j < n) {
            v[i] = sm_causal_masked(s, row, j) ? FT_CU_F32_MIN : ft_ld(xr + j) * scale;
            if (mr) v[i] += mr[j * mk];
            mx = fmaxf(mx, v[i]);
        }
    }
    mx = at_warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        int j = lane + 32 * i;
        if (j < n) {
            v[i] = expf(v[i] - mx);
            sum += v[i];
        }
    }
    float inv = 1.0f / at_warp_sum(sum);
    T *yr = y + row * (int64_t)n;
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        int j = lane + 32 * i;
        if (j < n) ft_st(yr + j, v[i] * inv);
    }
}

/* One warp per row for long rows: three passes over x. */
template <typename T>
__global__ void softmax_loop_kernel(T *y, const T *x, int64_t rs, const float *mask,
                                    const __grid_constant__ sm_shape s,
                                    int64_t rows, int64_t n, float scale) {
    FT_KERNEL_PROLOGUE();
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    if (row >= rows) return;
    const T *xr = x + row * rs;
    const float *mr = mask ? mask + sm_mask_row(s, row) : nullptr;
    int64_t mk = s.mst[s.nd - 1];
    /* the logit of key j, as the warp kernel computes it */
    auto logit = [&](int64_t j) {
        float v = sm_causal_masked(s, row, j) ? FT_CU_F32_MIN : ft_ld(xr + j) * scale;
        return mr ? v + mr[j * mk] : v;
    };
    float mx = -INFINITY;
    for (int64_t j = lane; j < n; j += 32) mx = fmaxf(mx, logit(j));
    mx = at_warp_max(mx);
    float sum = 0.0f;
    for (int64_t j = lane; j < n; j += 32) sum += expf(logit(j) - mx);
    float inv = 1.0f / at_warp_sum(sum);
    T *yr = y + row * n;
    for (int64_t j = lane; j < n; j += 32) ft_st(yr + j, expf(logit(j) - mx) * inv);
}

namespace {
struct softmax_run {
    ft_ctx *ctx;
    ft_tensor *dst;
    const ft_tensor *x;
    const float *mask;
    sm_shape s;
    int64_t rows, rs, n;
    float scale;

    template <typename T, int NPL> int warp() {
        unsigned blocks = (unsigned)((rows + SM_WARPS - 1) / SM_WARPS);
        FT_LAUNCH(ctx, blocks, 32 * SM_WARPS, 0, ft_cuda_stream(ctx), softmax_warp_kernel<T, NPL>)(
            (T *)dst->data, (const T *)x->data, rs, mask, s, rows, (int)n, scale);
        FT_CUDA_LAUNCH_CHECK(ctx, "softmax");
        return FT_OK;
    }
    template <typename T> int run() {
        if (rows == 0 || n == 0) return FT_OK;
        if (n <= 32) return warp<T, 1>();
        if (n <= 128) return warp<T, 4>();
        if (n <= 256) return warp<T, 8>();
        if (n <= 512) return warp<T, 16>();
        if (n <= 1024) return warp<T, 32>();
        unsigned blocks = (unsigned)((rows + SM_WARPS - 1) / SM_WARPS);
        FT_LAUNCH(ctx, blocks, 32 * SM_WARPS, 0, ft_cuda_stream(ctx), softmax_loop_kernel<T>)(
            (T *)dst->data, (const T *)x->data, rs, mask, s, rows, n, scale);
        FT_CUDA_LAUNCH_CHECK(ctx, "softmax (long rows)");
        return FT_OK;
    }
};
} // namespace

FT_CUDA_KERNEL(softmax) {
    const ft_tensor *x = dst->src[0], *m = dst->src[1];
    softmax_run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.dst = dst;
    r.x = x;
    r.scale = FT_PARAMS(dst, ft_params_softmax)->scale;
    r.s.causal = FT_PARAMS(dst, ft_params_softmax)->causal;
    if (r.s.causal && x->ndim < 2)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "softmax: a causal softmax needs 2-d scores");
    r.n = x->ne[x->ndim - 1];
    if (!ft_tensor_rows_layout(x, &r.rows, &r.rs))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "softmax: x is not in rows layout");
    if (r.rows <= 1) r.rs = r.n;
    if ((r.rows + SM_WARPS - 1) / SM_WARPS > INT32_MAX)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "softmax: too many rows");
    r.s.nd = x->ndim;
    for (int i = 0; i < x->ndim; i++) r.s.ne[i] = x->ne[i];
    if (m) {
        if (m->dtype != FT_DTYPE_F32 || m->ndim > x->ndim)
            return ft_set_error(ctx, FT_ERR_INTERNAL, "softmax: mask must be f32 and broadcastable");
        r.mask = (const float *)m->data;
        for (int i = 0; i < x->ndim; i++) {
            int j = i - (x->ndim - m->ndim);
            r.s.mst[i] = (j >= 0 && m->ne[j] != 1) ? m->nb[j] : 0;
        }
    }
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, r);
}

/* ------------------------------------------------------------------------- */
/* fused attention                                                            */
/* ------------------------------------------------------------------------- */

#define AT_WARPS 4
#define AT_ROWS 4 /* query rows per warp */
#define AT_THREADS (32 * AT_WARPS)

struct at_params {
    int64_t B, H, Sq, Sk, D, Dv;
    int64_t qb, qh, qs, kb, kh, ks, vb, vh, vs;
    int64_t mb, mh, mq, mk; /* mask strides, 0 = broadcast */
    int64_t ob, oh, os;     /* output strides (unit last): [B, H, S, Dv] or the graph's [B, S, H, Dv] */
    float scale;
    int causal;             /* key j > i + (Sk - Sq) of query i scores FT_CU_F32_MIN (+ mask) */
};

/* The logit of key kj for query qi: the scaled score, or under a causal mask past
 * the query the replacement value; then the mask value (0 without a mask). */
__device__ __forceinline__ float at_logit(const at_params &p, float s, int64_t qi, int64_t kj, float mv) {
    return (p.causal && kj > qi + (p.Sk - p.Sq) ? FT_CU_F32_MIN : s * p.scale) + mv;
}

/* ---- v1: the first kernel, kept for A/B timing (FT_ATTN_KERNEL=v1) ---- */

#define AT1_KT 32 /* keys per shared-memory tile: one per lane when scoring */

template <int DPL> constexpr int at1_smem_floats() {
    return AT1_KT * (32 * DPL + 1) + AT1_KT * 32 * DPL + AT_WARPS * AT_ROWS * 32 * DPL;
}

template <typename T, int DPL>
__global__ void __launch_bounds__(AT_THREADS)
attention_v1_kernel(T *out, const T *q, const T *k, const T *v, const float *mask, at_params p) {
    FT_KERNEL_PROLOGUE();
    constexpr int DM = 32 * DPL; /* head dims held per row: lane + 32 * i */
    FT_DYN_SMEM(float, at_smem);
    float *Ks = at_smem;                      /* [KT][DM + 1], padded: lane j reads row j */
    float *Vs = Ks + AT1_KT * (DM + 1);       /* [KT][DM] */
    float *Qs = Vs + AT1_KT * DM;             /* [WARPS][ROWS][DM] */

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t b = blockIdx.z, h = blockIdx.y;
    const int64_t q0 = (int64_t)blockIdx.x * (AT_WARPS * AT_ROWS) + warp * AT_ROWS;
    const T *qbh = q + b * p.qb + h * p.qh;
    const T *kbh = k + b * p.kb + h * p.kh;
    const T *vbh = v + b * p.vb + h * p.vh;
    const float *mbh = mask ? mask + b * p.mb + h * p.mh : nullptr;
    const int D = (int)p.D, Dv = (int)p.Dv;

    float *qw = Qs + warp * AT_ROWS * DM;
#pragma unroll
    for (int r = 0; r < AT_ROWS; r++) {
        int64_t qi = q0 + r;
        for (int d = lane; d < DM; d += 32)
            qw[r * DM + d] = (qi < p.Sq && d < D) ? ft_ld(qbh + qi * p.qs + d) : 0.0f;
    }

    float m[AT_ROWS], l[AT_ROWS], acc[AT_ROWS][DPL];
#pragma unroll
    for (int r = 0; r < AT_ROWS; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; i++) acc[r][i] = 0.0f;
    }

    for (int64_t kt0 = 0; kt0 < p.Sk; kt0 += AT1_KT) {
        __syncthreads(); /* the previous tile has been consumed (and Qs is written) */
        for (int idx = threadIdx.x; idx < AT1_KT * DM; idx += blockDim.x) {
            int j = idx / DM, d = idx % DM;
            int64_t kj = kt0 + j;
            bool in = kj < p.Sk;
            Ks[j * (DM + 1) + d] = (in && d < D) ? ft_ld(kbh + kj * p.ks + d) : 0.0f;
            Vs[j * DM + d] = (in && d < Dv) ? ft_ld(vbh + kj * p.vs + d) : 0.0f;
        }
        __syncthreads();

        /* scores: lane j scores key kt0 + j against this warp's rows */
        const int64_t kj = kt0 + lane;
        float s[AT_ROWS];
#pragma unroll
        for (int r = 0; r < AT_ROWS; r++) s[r] = 0.0f;
        const float *kr = Ks + lane * (DM + 1);
        for (int d = 0; d < D; d++) {
            float kd = kr[d];
#pragma unroll
            for (int r = 0; r < AT_ROWS; r++) s[r] += qw[r * DM + d] * kd;
        }
        float pr[AT_ROWS];
#pragma unroll
        for (int r = 0; r < AT_ROWS; r++) {
            int64_t qi = q0 + r;
            float sc = -INFINITY;
            if (kj < p.Sk) sc = at_logit(p, s[r], qi, kj, (mbh && qi < p.Sq) ? mbh[qi * p.mq + kj * p.mk] : 0.0f);
            float mnew = fmaxf(m[r], at_warp_max(sc));
            /* a row masked to -inf so far keeps contributing nothing, not NaN */
            float msafe = mnew == -INFINITY ? 0.0f : mnew;
            float corr = expf(m[r] - msafe);
            pr[r] = expf(sc - msafe);
            l[r] = l[r] * corr + at_warp_sum(pr[r]);
#pragma unroll
            for (int i = 0; i < DPL; i++) acc[r][i] *= corr;
            m[r] = mnew;
        }

        /* acc += p v over this tile's keys (p broadcast from the lane that owns it) */
        int nk = p.Sk - kt0 < AT1_KT ? (int)(p.Sk - kt0) : AT1_KT;
        for (int j = 0; j < nk; j++) {
            float vv[DPL];
#pragma unroll
            for (int i = 0; i < DPL; i++) vv[i] = Vs[j * DM + lane + 32 * i];
#pragma unroll
            for (int r = 0; r < AT_ROWS; r++) {
                float pj = __shfl_sync(0xffffffffu, pr[r], j);
#pragma unroll
                for (int i = 0; i < DPL; i++) acc[r][i] += pj * vv[i];
            }
        }
    }

#pragma unroll
    for (int r = 0; r < AT_ROWS; r++) {
        int64_t qi = q0 + r;
        if (qi >= p.Sq) continue;
        /* every key masked: NaN, as the softmax op, the CPU reference and PyTorch */
        float inv = l[r] > 0.0f ? 1.0f / l[r] : __int_as_float(0x7fc00000);
        T *o = out + b * p.ob + h * p.oh + qi * p.os;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            int d = lane + 32 * i;
            if (d < Dv) ft_st(o + d, acc[r][i] * inv);
        }
    }
}

/* ---- v2: the default ----
 *
 * Same blocks as v1 (16 query rows, 4 warps of 4 rows, online softmax in f32),
 * reworked so that each shared-memory load feeds several FMAs and the tile
 * loads overlap the math:
 *  - tiles of 64 keys (32 for head dims over 64, to stay in 48 KB): each lane
 *    scores 2 keys, so the per-tile max reduction and barriers are halved;
 *  - scores read K as float4 from rows padded to DM + 4 floats (the 8 lanes of
 *    a quarter-warp hit distinct banks) and Q as float4 broadcasts: per 4 dims,
 *    2 + 4 loads feed 32 FMAs (v1 as compiled: 4 + 4 loads per 16 FMAs, plus
 *    loop overhead, as its d loop has a run-time trip count);
 *  - PV: each lane owns 4 consecutive output dims of a group of DM / 4 lanes;
 *    the 32 / (DM / 4) groups take different keys and are summed once at the
 *    end. Probabilities go through a per-warp shared row and are read as
 *    float4 broadcasts: per key 1 V load + 1 p load (4 rows) for 16 FMAs
 *    (v1: 2 V loads + 4 shuffles for 8 FMAs);
 *  - the softmax denominator is kept per lane and reduced once at the end
 *    (the per-tile correction factor is warp-uniform, so this is exact up to
 *    summation order);
 *  - K/V tiles are loaded with compile-time trip counts into registers (16
 *    bytes per load when every row start is 16-byte aligned, checked at launch;
 *    one element per load otherwise), all loads of a tile issued before any
 *    shared store, and the next tile's loads (and its mask values) are issued
 *    before this tile's math, so only the first tile's load latency shows.
 * Head dims are padded with zeros to DM (32, 64 or 128) in shared memory, so
 * every inner loop has a compile-time trip count.
 */

/* keys per tile: 64 while K, V, Q and P fit 48 KB, 32 for head dims over 64 */
template <int DM> __host__ __device__ constexpr int at_kt() { return DM <= 64 ? 64 : 32; }

template <int DM> constexpr int at_smem_floats() {
    return at_kt<DM>() * (DM + 4)            /* Ks [KT][DM + 4] */
           + at_kt<DM>() * DM                /* Vs [KT][DM] */
           + AT_WARPS * AT_ROWS * DM         /* Qs [WARPS * ROWS][DM] */
           + AT_WARPS * AT_ROWS * at_kt<DM>(); /* Ps [WARPS][ROWS][KT] */
}

/* A tile of ROWS rows x DM columns (row r at src + r * rs; rows >= nrows and
 * columns >= ncols read as 0) moved to f32 shared memory in two steps: load(),
 * store() into shared rows of stride ld floats. VEC: 16 bytes per load, which
 * needs src, rs * sizeof(T) and ncols * sizeof(T) multiples of 16 (the
 * launcher checks); load() puts all of a thread's loads in flight into
 * registers before the first store. Otherwise (misaligned rows, one element
 * per load) load() only notes the source and store() loads as it stores: held
 * in registers, the 32 elements per thread of each of the next K and V tiles
 * pushed the kernel to 255 registers and spills (ptxas, sm_90). */
template <typename T, bool VEC, int ROWS, int DM> struct at_tile {
    static constexpr int W = VEC ? 16 / (int)sizeof(T) : 1; /* elements per load */
    static constexpr int CPR = DM / W;                       /* loads per row */
    static constexpr int TOTAL = ROWS * CPR;
    static constexpr int N = (TOTAL + AT_THREADS - 1) / AT_THREADS; /* loads per thread */
    uint4 raw[VEC ? N : 1];
    const T *src_;
    int64_t rs_, nrows_;
    int ncols_;

    __device__ __forceinline__ void load(const T *src, int64_t rs, int64_t nrows, int ncols) {
        if constexpr (VEC) {
#pragma unroll
            for (int i = 0; i < N; i++) {
                const int idx = threadIdx.x + i * AT_THREADS, r = idx / CPR, c = (idx % CPR) * W;
                const bool in = (TOTAL % AT_THREADS == 0 || idx < TOTAL) && r < nrows && c < ncols;
                raw[i] = in ? *(const uint4 *)(src + r * rs + c) : make_uint4(0, 0, 0, 0);
            }
        } else {
            src_ = src, rs_ = rs, nrows_ = nrows, ncols_ = ncols;
        }
    }
    __device__ __forceinline__ void store(float *dst, int ld) const {
#pragma unroll
        for (int i = 0; i < N; i++) {
            const int idx = threadIdx.x + i * AT_THREADS, r = idx / CPR, c = (idx % CPR) * W;
            if (TOTAL % AT_THREADS != 0 && idx >= TOTAL) break;
            float *d = dst + r * ld + c;
            if constexpr (VEC) {
                const T *e = (const T *)&raw[i];
#pragma unroll
                for (int j = 0; j < W; j += 4) {
                    const T *f = e + j;
                    *(float4 *)(d + j) =
                        make_float4(ft_ld(f), ft_ld(f + 1), ft_ld(f + 2), ft_ld(f + 3));
                }
            } else {
                *d = r < nrows_ && c < ncols_ ? ft_ld(src_ + r * rs_ + c) : 0.0f;
            }
        }
    }
};

/* This lane's mask values for keys kt0 + lane + 32 * kk of the warp's rows from
 * q0 (0 without a mask, and for rows or keys out of range). */
template <int KPL>
__device__ __forceinline__ void at_load_mask(float (&mv)[AT_ROWS][KPL], const float *mbh,
                                             const at_params &p, int64_t q0, int64_t kt0,
                                             int lane) {
#pragma unroll
    for (int r = 0; r < AT_ROWS; r++)
#pragma unroll
        for (int kk = 0; kk < KPL; kk++) {
            const int64_t qi = q0 + r, kj = kt0 + lane + 32 * kk;
            mv[r][kk] = (mbh && qi < p.Sq && kj < p.Sk) ? mbh[qi * p.mq + kj * p.mk] : 0.0f;
        }
}

/* Whether keys kt0 .. Sk - 1, all past the causal limit of the block's rows, get
 * probability 0 in every row of the block: their logit FT_CU_F32_MIN + mask lies
 * more than 110 below the row's running maximum m (expf gives 0 below -104).
 * Block-wide (barriers inside): every thread of the block must call it. */
__device__ __forceinline__ bool at_causal_rest_zero(const at_params &p, const float *mbh, int64_t q0,
                                                 int64_t kt0, const float (&m)[AT_ROWS], int lane) {
    __shared__ int contributes;
    if (threadIdx.x == 0) contributes = 0;
    __syncthreads();
    bool any = false;
#pragma unroll
    for (int r = 0; r < AT_ROWS; r++) {
        const int64_t qi = q0 + r;
        if (qi >= p.Sq) continue;
        for (int64_t kj = kt0 + lane; kj < p.Sk && !any; kj += 32) {
            const float c = FT_CU_F32_MIN + (mbh ? mbh[qi * p.mq + kj * p.mk] : 0.0f);
            any = !(c - m[r] < -110.0f); /* NaN (m = -inf rows) counts */
        }
    }
    if (any) contributes = 1; /* benign race: every writer stores 1 */
    __syncthreads();
    const bool zero = contributes == 0;
    __syncthreads(); /* everyone has read it before anyone could write it again */
    return zero;
}

__device__ __forceinline__ float at_f4(const float4 &v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <typename T, int DM, bool VEC>
__global__ void __launch_bounds__(AT_THREADS)
attention_kernel(T *out, const T *q, const T *k, const T *v, const float *mask, at_params p) {
    FT_KERNEL_PROLOGUE();
    constexpr int KT = at_kt<DM>();
    constexpr int KPL = KT / 32; /* keys scored per lane */
    constexpr int KLD = DM + 4;  /* K row stride: a quarter-warp's float4 reads on distinct banks */
    constexpr int G = DM / 4;    /* lanes per PV group, 4 output dims each */
    constexpr int NG = 32 / G;   /* PV groups: group g takes keys 4g..4g+3 of every 4 * NG */
    constexpr int R = AT_ROWS;
    FT_DYN_SMEM(float, at_smem);
    float *Ks = at_smem;                /* [KT][KLD] */
    float *Vs = Ks + KT * KLD;          /* [KT][DM] */
    float *Qs = Vs + KT * DM;           /* [WARPS * R][DM] */
    float *Ps = Qs + AT_WARPS * R * DM; /* [WARPS][R][KT] */

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane / G, gl = lane % G;
    const int64_t b = blockIdx.z, h = blockIdx.y;
    const int64_t qblk = (int64_t)blockIdx.x * (AT_WARPS * R), q0 = qblk + warp * R;
    const T *kbh = k + b * p.kb + h * p.kh;
    const T *vbh = v + b * p.vb + h * p.vh;
    const float *mbh = mask ? mask + b * p.mb + h * p.mh : nullptr;
    const int D = (int)p.D, Dv = (int)p.Dv;
    const float *qw = Qs + warp * R * DM;
    float *pw = Ps + warp * R * KT;

    /* the block's query rows, the first K/V tile and its mask values all in
     * flight at once; the first barrier of the loop publishes Qs */
    at_tile<T, VEC, AT_WARPS * R, DM> qt;
    qt.load(q + b * p.qb + h * p.qh + qblk * p.qs, p.qs, p.Sq - qblk, D);
    at_tile<T, VEC, KT, DM> kn, vn; /* the next K/V tile, in flight in registers */
    kn.load(kbh, p.ks, p.Sk, D);
    vn.load(vbh, p.vs, p.Sk, Dv);
    float mn[R][KPL]; /* the next tile's mask values */
    at_load_mask(mn, mbh, p, q0, 0, lane);
    qt.store(Qs, DM);

    float m[R], l[R], acc[R][4];
#pragma unroll
    for (int r = 0; r < R; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f; /* this lane's share of the denominator, at the running max m */
#pragma unroll
        for (int i = 0; i < 4; i++) acc[r][i] = 0.0f;
    }

    bool rest_checked = false;
    for (int64_t kt0 = 0; kt0 < p.Sk; kt0 += KT) {
        /* causal: from the first tile past every row's limit on, the keys hold the
         * replaced value; once their probabilities are 0 at the running maxima they
         * stay 0 (the maxima only grow) and the remaining tiles change nothing */
        if (p.causal && !rest_checked && kt0 > qblk + AT_WARPS * R - 1 + (p.Sk - p.Sq)) {
            rest_checked = true; /* block-uniform */
            if (at_causal_rest_zero(p, mbh, q0, kt0, m, lane)) break;
        }
        __syncthreads(); /* the previous tile has been consumed */
        kn.store(Ks, KLD);
        vn.store(Vs, DM);
        float mv[R][KPL];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int kk = 0; kk < KPL; kk++) mv[r][kk] = mn[r][kk];
        __syncthreads();
        const int64_t nxt = kt0 + KT;
        if (nxt < p.Sk) { /* block-uniform: the next tile's loads fly during this tile's math */
            kn.load(kbh + nxt * p.ks, p.ks, p.Sk - nxt, D);
            vn.load(vbh + nxt * p.vs, p.vs, p.Sk - nxt, Dv);
            at_load_mask(mn, mbh, p, q0, nxt, lane);
        }

        /* scores: lane scores keys lane + 32 * kk of the tile against the warp's rows,
         * summing over d in order as v1 and the CPU reference do */
        float s[R][KPL];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int kk = 0; kk < KPL; kk++) s[r][kk] = 0.0f;
#pragma unroll
        for (int c = 0; c < DM; c += 4) {
            float4 kv[KPL];
#pragma unroll
            for (int kk = 0; kk < KPL; kk++)
                kv[kk] = *(const float4 *)(Ks + (lane + 32 * kk) * KLD + c);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float4 qv = *(const float4 *)(qw + r * DM + c);
#pragma unroll
                for (int kk = 0; kk < KPL; kk++) {
                    float a = s[r][kk];
                    a += qv.x * kv[kk].x;
                    a += qv.y * kv[kk].y;
                    a += qv.z * kv[kk].z;
                    a += qv.w * kv[kk].w;
                    s[r][kk] = a;
                }
            }
        }

        /* online softmax; the probabilities go to the warp's P rows */
#pragma unroll
        for (int r = 0; r < R; r++) {
            float sc[KPL], tmax = -INFINITY;
#pragma unroll
            for (int kk = 0; kk < KPL; kk++) {
                const int64_t kj = kt0 + lane + 32 * kk;
                sc[kk] = kj < p.Sk ? at_logit(p, s[r][kk], q0 + r, kj, mv[r][kk]) : -INFINITY;
                tmax = fmaxf(tmax, sc[kk]);
            }
            const float mnew = fmaxf(m[r], at_warp_max(tmax));
            /* a row masked to -inf so far keeps contributing nothing, not NaN */
            const float msafe = mnew == -INFINITY ? 0.0f : mnew;
            const float corr = expf(m[r] - msafe);
            float ps = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KPL; kk++) {
                const float pj = expf(sc[kk] - msafe);
                ps += pj;
                pw[r * KT + lane + 32 * kk] = pj;
            }
            l[r] = l[r] * corr + ps;
#pragma unroll
            for (int i = 0; i < 4; i++) acc[r][i] *= corr;
            m[r] = mnew;
        }
        __syncwarp(); /* P rows written by every lane of the warp */

        /* acc += p v: group g takes keys j0 + 4g .. j0 + 4g + 3; keys past Sk have
         * p = 0 and zero V rows */
        const int nk = p.Sk - kt0 < KT ? (int)(p.Sk - kt0) : KT;
#pragma unroll
        for (int j0 = 0; j0 < KT; j0 += 4 * NG) {
            if (j0 >= nk) break;
            const int jb = j0 + 4 * g;
            float4 p4[R];
#pragma unroll
            for (int r = 0; r < R; r++) p4[r] = *(const float4 *)(pw + r * KT + jb);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float4 vv = *(const float4 *)(Vs + (jb + u) * DM + 4 * gl);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float pj = at_f4(p4[r], u);
                    acc[r][0] += pj * vv.x;
                    acc[r][1] += pj * vv.y;
                    acc[r][2] += pj * vv.z;
                    acc[r][3] += pj * vv.w;
                }
            }
        }
        /* Ps is rewritten only after the next tile's first barrier */
    }

#pragma unroll
    for (int r = 0; r < R; r++) {
        const float lsum = at_warp_sum(l[r]);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int o = G; o < 32; o <<= 1)
                acc[r][i] += __shfl_xor_sync(0xffffffffu, acc[r][i], o);
        const int64_t qi = q0 + r;
        /* every group holds the sums now: the groups take turns writing rows */
        if (qi >= p.Sq || g != r % NG) continue;
        /* every key masked: NaN, as the softmax op, the CPU reference and PyTorch */
        const float inv = lsum > 0.0f ? 1.0f / lsum : __int_as_float(0x7fc00000);
        T *o = out + b * p.ob + h * p.oh + qi * p.os;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int d = 4 * gl + i;
            if (d < Dv) ft_st(o + d, acc[r][i] * inv);
        }
    }
}

namespace {
/* FT_ATTN_KERNEL=v1 runs the first kernel instead (read once per process) */
bool at_use_v1() {
    static const bool v1 = [] {
        const char *e = ft_env_str(FT_ENV_ATTN_KERNEL);
        return e && strcmp(e, "v1") == 0;
    }();
    return v1;
}

/* Rows of n elements at ptr + i * strides all start 16-byte aligned and end on a
 * 16-byte boundary: the condition of at_tile's 16-byte loads. */
bool at_rows_aligned16(const void *ptr, int64_t n, int64_t s0, int64_t s1, int64_t s2, size_t es) {
    const int64_t e = (int64_t)es;
    return (uintptr_t)ptr % 16 == 0 && n * e % 16 == 0 && s0 * e % 16 == 0 && s1 * e % 16 == 0 &&
           s2 * e % 16 == 0;
}

struct attention_run {
    ft_ctx *ctx;
    ft_tensor *dst;
    const ft_tensor *q, *k, *v;
    const float *mask;
    at_params p;

    dim3 grid() const {
        unsigned row_blocks = (unsigned)((p.Sq + AT_WARPS * AT_ROWS - 1) / (AT_WARPS * AT_ROWS));
        return dim3(row_blocks, (unsigned)p.H, (unsigned)p.B);
    }
    template <typename T, int DPL> int launch_v1() {
        size_t smem = (size_t)at1_smem_floats<DPL>() * sizeof(float);
        static_assert(at1_smem_floats<DPL>() * sizeof(float) <= 48 * 1024, "attention v1 smem");
        FT_LAUNCH(ctx, grid(), AT_THREADS, smem, ft_cuda_stream(ctx), attention_v1_kernel<T, DPL>)(
            (T *)dst->data, (const T *)q->data, (const T *)k->data, (const T *)v->data, mask, p);
        FT_CUDA_LAUNCH_CHECK(ctx, "attention (v1)");
        return FT_OK;
    }
    template <typename T, int DM, bool VEC> int launch() {
        size_t smem = (size_t)at_smem_floats<DM>() * sizeof(float);
        /* sizes stay under the default 48 KB dynamic limit: no attribute call,
         * so nothing to do before a CUDA graph capture */
        static_assert(at_smem_floats<DM>() * sizeof(float) <= 48 * 1024, "attention smem");
        FT_LAUNCH(ctx, grid(), AT_THREADS, smem, ft_cuda_stream(ctx), attention_kernel<T, DM, VEC>)(
            (T *)dst->data, (const T *)q->data, (const T *)k->data, (const T *)v->data, mask, p);
        FT_CUDA_LAUNCH_CHECK(ctx, "attention");
        return FT_OK;
    }
    template <typename T, int DM> int pick_io() {
        const size_t es = sizeof(T);
        bool vec = at_rows_aligned16(q->data, p.D, p.qb, p.qh, p.qs, es) &&
                   at_rows_aligned16(k->data, p.D, p.kb, p.kh, p.ks, es) &&
                   at_rows_aligned16(v->data, p.Dv, p.vb, p.vh, p.vs, es);
        return vec ? launch<T, DM, true>() : launch<T, DM, false>();
    }
    template <typename T> int run() {
        int64_t dm = p.D > p.Dv ? p.D : p.Dv;
        if (at_use_v1()) {
            if (dm <= 32) return launch_v1<T, 1>();
            if (dm <= 64) return launch_v1<T, 2>();
            return launch_v1<T, 4>();
        }
        if (dm <= 32) return pick_io<T, 32>();
        if (dm <= 64) return pick_io<T, 64>();
        return pick_io<T, 128>();
    }
};
} // namespace

FT_CUDA_KERNEL(attention) {
    const ft_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *m = dst->src[3];
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "attention: q, k, v must be 4-d");
    for (int i = 0; i < 3; i++) {
        const ft_tensor *t = dst->src[i];
        if (t->nb[3] != 1 && t->ne[3] != 1)
            return ft_set_error(ctx, FT_ERR_INTERNAL, "attention: input %d has a non-unit last stride", i);
    }
    attention_run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.dst = dst;
    r.q = q;
    r.k = k;
    r.v = v;
    at_params &p = r.p;
    p.B = q->ne[0];
    p.H = q->ne[1];
    p.Sq = q->ne[2];
    p.Sk = k->ne[2];
    p.D = q->ne[3];
    p.Dv = v->ne[3];
    p.scale = FT_PARAMS(dst, ft_params_attention)->scale;
    p.causal = FT_PARAMS(dst, ft_params_attention)->causal;
    if (p.B == 0 || p.H == 0 || p.Sq == 0 || p.Dv == 0) return FT_OK;
    if (p.D > 128 || p.Dv > 128)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED,
                            "attention: head dims q/k %lld, v %lld exceed the fused kernel's 128",
                            (long long)p.D, (long long)p.Dv);
    if (p.H > 65535 || p.B > 65535 || (p.Sq + 15) / 16 > INT32_MAX)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "attention: grid too large (B %lld, H %lld)",
                            (long long)p.B, (long long)p.H);
    /* size-1 dims may carry any stride; never index them */
    p.qb = q->ne[0] > 1 ? q->nb[0] : 0;
    p.qh = q->ne[1] > 1 ? q->nb[1] : 0;
    p.qs = q->ne[2] > 1 ? q->nb[2] : 0;
    p.kb = k->ne[0] > 1 ? k->nb[0] : 0;
    p.kh = k->ne[1] > 1 ? k->nb[1] : 0;
    p.ks = k->ne[2] > 1 ? k->nb[2] : 0;
    p.vb = v->ne[0] > 1 ? v->nb[0] : 0;
    p.vh = v->ne[1] > 1 ? v->nb[1] : 0;
    p.vs = v->ne[2] > 1 ? v->nb[2] : 0;
    if (dst->nb[3] != 1 && dst->ne[3] != 1)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "attention: the output has a non-unit last stride");
    p.ob = dst->nb[0];
    p.oh = dst->nb[1];
    p.os = dst->nb[2];
    if (m) {
        if (m->dtype != FT_DTYPE_F32 || m->ndim > 4)
            return ft_set_error(ctx, FT_ERR_INTERNAL, "attention: mask must be f32 of rank <= 4");
        r.mask = (const float *)m->data;
        int64_t st[4];
        for (int i = 0; i < 4; i++) {
            int j = i - (4 - m->ndim);
            st[i] = (j >= 0 && m->ne[j] != 1) ? m->nb[j] : 0;
        }
        p.mb = st[0];
        p.mh = st[1];
        p.mq = st[2];
        p.mk = st[3];
    }
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, r);
}

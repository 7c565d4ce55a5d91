/*
 * attention.cu - the fused attention kernel softmax(q k^T * scale + mask) v and
 * the scaled, masked softmax over the last dim (the unfused GEMM-softmax-GEMM
 * path and models that call ft_softmax).
 *
 * Attention is flash-style: one block per (batch, head, tile of 16 query
 * rows), four warps of four rows each; key/value tiles of 32 rows are staged
 * in shared memory as f32 and an online softmax (running max and sum, f32)
 * keeps the scores out of device memory, so any key length works. Head dims
 * up to 128 (q/k and v); beyond that the op reports FT_ERR_UNSUPPORTED.
 * q/k/v need a unit stride in the last dim (the op API copies otherwise); all
 * other strides are free. The mask is f32, broadcast with any strides (0 too).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

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
};

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
__global__ void softmax_warp_kernel(T *y, const T *x, int64_t rs, const float *mask, sm_shape s,
                                    int64_t rows, int n, float scale) {
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
            v[i] = ft_ld(xr + j) * scale;
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
__global__ void softmax_loop_kernel(T *y, const T *x, int64_t rs, const float *mask, sm_shape s,
                                    int64_t rows, int64_t n, float scale) {
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    if (row >= rows) return;
    const T *xr = x + row * rs;
    const float *mr = mask ? mask + sm_mask_row(s, row) : nullptr;
    int64_t mk = s.mst[s.nd - 1];
    float mx = -INFINITY;
    for (int64_t j = lane; j < n; j += 32)
        mx = fmaxf(mx, ft_ld(xr + j) * scale + (mr ? mr[j * mk] : 0.0f));
    mx = at_warp_max(mx);
    float sum = 0.0f;
    for (int64_t j = lane; j < n; j += 32)
        sum += expf(ft_ld(xr + j) * scale + (mr ? mr[j * mk] : 0.0f) - mx);
    float inv = 1.0f / at_warp_sum(sum);
    T *yr = y + row * n;
    for (int64_t j = lane; j < n; j += 32)
        ft_st(yr + j, expf(ft_ld(xr + j) * scale + (mr ? mr[j * mk] : 0.0f) - mx) * inv);
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
        FT_LAUNCH(blocks, 32 * SM_WARPS, 0, ft_cuda_stream(ctx), softmax_warp_kernel<T, NPL>)(
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
        FT_LAUNCH(blocks, 32 * SM_WARPS, 0, ft_cuda_stream(ctx), softmax_loop_kernel<T>)(
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
#define AT_KT 32  /* keys per shared-memory tile: one per lane when scoring */

struct at_params {
    int64_t B, H, Sq, Sk, D, Dv;
    int64_t qb, qh, qs, kb, kh, ks, vb, vh, vs;
    int64_t mb, mh, mq, mk; /* mask strides, 0 = broadcast */
    int64_t ob, oh, os;     /* output strides (unit last): [B, H, S, Dv] or the graph's [B, S, H, Dv] */
    float scale;
};

template <int DPL> constexpr int at_smem_floats() {
    return AT_KT * (32 * DPL + 1) + AT_KT * 32 * DPL + AT_WARPS * AT_ROWS * 32 * DPL;
}

template <typename T, int DPL>
__global__ void __launch_bounds__(32 * AT_WARPS)
attention_kernel(T *out, const T *q, const T *k, const T *v, const float *mask, at_params p) {
    constexpr int DM = 32 * DPL; /* head dims held per row: lane + 32 * i */
    FT_DYN_SMEM(float, at_smem);
    float *Ks = at_smem;                      /* [KT][DM + 1], padded: lane j reads row j */
    float *Vs = Ks + AT_KT * (DM + 1);        /* [KT][DM] */
    float *Qs = Vs + AT_KT * DM;              /* [WARPS][ROWS][DM] */

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

    for (int64_t kt0 = 0; kt0 < p.Sk; kt0 += AT_KT) {
        __syncthreads(); /* the previous tile has been consumed (and Qs is written) */
        for (int idx = threadIdx.x; idx < AT_KT * DM; idx += blockDim.x) {
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
            if (kj < p.Sk) {
                sc = s[r] * p.scale;
                if (mbh && qi < p.Sq) sc += mbh[qi * p.mq + kj * p.mk];
            }
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
        int nk = p.Sk - kt0 < AT_KT ? (int)(p.Sk - kt0) : AT_KT;
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

namespace {
struct attention_run {
    ft_ctx *ctx;
    ft_tensor *dst;
    const ft_tensor *q, *k, *v;
    const float *mask;
    at_params p;

    template <typename T, int DPL> int launch() {
        size_t smem = (size_t)at_smem_floats<DPL>() * sizeof(float);
        /* sizes stay under the default 48 KB dynamic limit: no attribute call,
         * so nothing to do before a CUDA graph capture */
        static_assert(at_smem_floats<DPL>() * sizeof(float) <= 48 * 1024, "attention smem");
        dim3 grid((unsigned)((p.Sq + AT_WARPS * AT_ROWS - 1) / (AT_WARPS * AT_ROWS)), (unsigned)p.H,
                  (unsigned)p.B);
        FT_LAUNCH(grid, 32 * AT_WARPS, smem, ft_cuda_stream(ctx), attention_kernel<T, DPL>)(
            (T *)dst->data, (const T *)q->data, (const T *)k->data, (const T *)v->data, mask, p);
        FT_CUDA_LAUNCH_CHECK(ctx, "attention");
        return FT_OK;
    }
    template <typename T> int run() {
        int64_t dm = p.D > p.Dv ? p.D : p.Dv;
        if (dm <= 32) return launch<T, 1>();
        if (dm <= 64) return launch<T, 2>();
        return launch<T, 4>();
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

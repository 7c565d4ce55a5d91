/*
 * attention_rel.cu - the fused disentangled (DeBERTa) attention
 * (engine/ops.h, FT_OP_ATTENTION_REL): softmax(scale q k^T + c2p[i, d(i, j)] +
 * p2c[j, d(i, j)] + mask) v, times a row scale, d(i, j) = clamp(i - j + span).
 *
 * Flash-style like attention.cu's first kernel: one block per (batch, head,
 * tile of 16 query rows), four warps of four rows, 32-key tiles staged in
 * shared memory as f32, one key per lane when scoring, an online softmax in f32,
 * so neither the scores nor the gathered [B, H, Sq, Sk] relative terms are
 * ever written. The relative terms are read from the [.., S, 2 span] products:
 * c2p straight from global memory (the lanes of a warp read one query row at
 * consecutive indices), p2c through shared memory: for a 16-row query tile and
 * a 32-key tile the indices d(i, j) span 47 consecutive values, so each key's
 * 47 values are staged once per tile (Ps [32][48]) instead of 16 scattered
 * reads per key. Head dims up to 128; the relative products and the row scale
 * may have any strides.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"

#define AR_WARPS 4
#define AR_ROWS 4                        /* query rows per warp */
#define AR_THREADS (32 * AR_WARPS)
#define AR_QT (AR_WARPS * AR_ROWS)       /* query rows per block */
#define AR_KT 32                         /* keys per tile: one per lane */
#define AR_PW (AR_KT + AR_QT)            /* relative-index window per tile pair (47 used) */

struct ar_params {
    int64_t Sq, Sk, D, Dv, span;
    int64_t qb, qh, qs, kb, kh, ks, vb, vh, vs;
    int64_t mb, mh, mq, mk; /* mask strides, 0 = broadcast */
    int64_t cb, ch, cq, cr; /* c2p [B, H, Sq, 2 span] */
    int64_t pb, ph, pk, pr; /* p2c [B, H, Sk, 2 span] */
    int64_t rb, rh, rq;     /* row scale, broadcast over [B, H, Sq] */
    int64_t ob, oh, os;     /* output (unit last): [B, H, S, Dv] or the graph's [B, S, H, Dv] */
    float scale;
};

__device__ __forceinline__ float ar_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float ar_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ int64_t ar_clamp(int64_t d, int64_t span) {
    return d < 0 ? 0 : d > 2 * span - 1 ? 2 * span - 1 : d;
}

template <int DPL> constexpr int ar_smem_floats() {
    return AR_KT * (32 * DPL + 1) + AR_KT * 32 * DPL + AR_QT * 32 * DPL + AR_KT * AR_PW;
}

template <typename T, int DPL>
__global__ void __launch_bounds__(AR_THREADS)
attention_rel_kernel(T *out, const T *q, const T *k, const T *v, const float *mask, const T *c2p,
                     const T *p2c, const T *rs, ar_params p) {
    FT_KERNEL_PROLOGUE();
    constexpr int DM = 32 * DPL; /* head dims held per row: lane + 32 * i */
    FT_DYN_SMEM(float, ar_smem);
    float *Ks = ar_smem;                /* [KT][DM + 1], padded: lane j reads row j */
    float *Vs = Ks + AR_KT * (DM + 1);  /* [KT][DM] */
    float *Qs = Vs + AR_KT * DM;        /* [QT][DM] */
    float *Ps = Qs + AR_QT * DM;        /* [KT][PW]: p2c of each key over the tile's index window */

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t b = blockIdx.z, h = blockIdx.y;
    const int64_t qt0 = (int64_t)blockIdx.x * AR_QT, q0 = qt0 + warp * AR_ROWS;
    const T *qbh = q + b * p.qb + h * p.qh;
    const T *kbh = k + b * p.kb + h * p.kh;
    const T *vbh = v + b * p.vb + h * p.vh;
    const float *mbh = mask ? mask + b * p.mb + h * p.mh : nullptr;
    const T *cbh = c2p ? c2p + b * p.cb + h * p.ch : nullptr;
    const T *pbh = p2c ? p2c + b * p.pb + h * p.ph : nullptr;
    const int D = (int)p.D, Dv = (int)p.Dv;

    float *qw = Qs + warp * AR_ROWS * DM;
#pragma unroll
    for (int r = 0; r < AR_ROWS; r++) {
        int64_t qi = q0 + r;
        for (int d = lane; d < DM; d += 32)
            qw[r * DM + d] = (qi < p.Sq && d < D) ? ft_ld(qbh + qi * p.qs + d) : 0.0f;
    }

    float m[AR_ROWS], l[AR_ROWS], acc[AR_ROWS][DPL];
#pragma unroll
    for (int r = 0; r < AR_ROWS; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; i++) acc[r][i] = 0.0f;
    }

    for (int64_t kt0 = 0; kt0 < p.Sk; kt0 += AR_KT) {
        __syncthreads(); /* the previous tile has been consumed (and Qs is written) */
        for (int idx = threadIdx.x; idx < AR_KT * DM; idx += blockDim.x) {
            int j = idx / DM, d = idx % DM;
            int64_t kj = kt0 + j;
            bool in = kj < p.Sk;
            Ks[j * (DM + 1) + d] = (in && d < D) ? ft_ld(kbh + kj * p.ks + d) : 0.0f;
            Vs[j * DM + d] = (in && d < Dv) ? ft_ld(vbh + kj * p.vs + d) : 0.0f;
        }
        if (pbh) {
            /* key kt0 + j, window slot t: relative index qt0 - kt0 - (KT - 1) + span + t */
            int64_t base = qt0 - kt0 - (AR_KT - 1) + p.span;
            for (int idx = threadIdx.x; idx < AR_KT * AR_PW; idx += blockDim.x) {
                int j = idx / AR_PW, t = idx % AR_PW;
                int64_t kj = kt0 + j;
                Ps[idx] = kj < p.Sk && t < AR_PW - 1 ? ft_ld(pbh + kj * p.pk + ar_clamp(base + t, p.span) * p.pr)
                                                     : 0.0f;
            }
        }
        __syncthreads();

        /* scores: lane j scores key kt0 + j against this warp's rows */
        const int64_t kj = kt0 + lane;
        float s[AR_ROWS];
#pragma unroll
        for (int r = 0; r < AR_ROWS; r++) s[r] = 0.0f;
        const float *kr = Ks + lane * (DM + 1);
        for (int d = 0; d < D; d++) {
            float kd = kr[d];
#pragma unroll
            for (int r = 0; r < AR_ROWS; r++) s[r] += qw[r * DM + d] * kd;
        }
        float pr[AR_ROWS];
#pragma unroll
        for (int r = 0; r < AR_ROWS; r++) {
            int64_t qi = q0 + r;
            float sc = -INFINITY;
            if (kj < p.Sk) {
                sc = s[r] * p.scale;
                if (qi < p.Sq) {
                    if (cbh) sc += ft_ld(cbh + qi * p.cq + ar_clamp(qi - kj + p.span, p.span) * p.cr);
                    if (pbh) sc += Ps[lane * AR_PW + (AR_KT - 1) + (int)(qi - qt0) - lane];
                    if (mbh) sc += mbh[qi * p.mq + kj * p.mk];
                }
            }
            float mnew = fmaxf(m[r], ar_warp_max(sc));
            /* a row masked to -inf so far keeps contributing nothing, not NaN */
            float msafe = mnew == -INFINITY ? 0.0f : mnew;
            float corr = expf(m[r] - msafe);
            pr[r] = expf(sc - msafe);
            l[r] = l[r] * corr + ar_warp_sum(pr[r]);
#pragma unroll
            for (int i = 0; i < DPL; i++) acc[r][i] *= corr;
            m[r] = mnew;
        }

        /* acc += p v over this tile's keys (p broadcast from the lane that owns it) */
        int nk = p.Sk - kt0 < AR_KT ? (int)(p.Sk - kt0) : AR_KT;
        for (int j = 0; j < nk; j++) {
            float vv[DPL];
#pragma unroll
            for (int i = 0; i < DPL; i++) vv[i] = Vs[j * DM + lane + 32 * i];
#pragma unroll
            for (int r = 0; r < AR_ROWS; r++) {
                float pj = __shfl_sync(0xffffffffu, pr[r], j);
#pragma unroll
                for (int i = 0; i < DPL; i++) acc[r][i] += pj * vv[i];
            }
        }
    }

#pragma unroll
    for (int r = 0; r < AR_ROWS; r++) {
        int64_t qi = q0 + r;
        if (qi >= p.Sq) continue;
        /* every key masked: NaN, as the softmax op, the CPU reference and PyTorch */
        float inv = l[r] > 0.0f ? 1.0f / l[r] : __int_as_float(0x7fc00000);
        float sr = rs ? ft_ld(rs + b * p.rb + h * p.rh + qi * p.rq) : 1.0f;
        T *o = out + b * p.ob + h * p.oh + qi * p.os;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            int d = lane + 32 * i;
            if (d < Dv) ft_st(o + d, acc[r][i] * inv * sr);
        }
    }
}

namespace {
struct attention_rel_run {
    ft_ctx *ctx;
    ft_tensor *dst;
    const ft_tensor *q, *k, *v, *c2p, *p2c, *rs;
    const float *mask;
    ar_params p;
    int64_t B, H;

    template <typename T, int DPL> int launch() {
        size_t smem = (size_t)ar_smem_floats<DPL>() * sizeof(float);
        /* under the default 48 KB dynamic limit: no attribute call before a capture */
        static_assert(ar_smem_floats<DPL>() * sizeof(float) <= 48 * 1024, "attention_rel smem");
        dim3 grid((unsigned)((p.Sq + AR_QT - 1) / AR_QT), (unsigned)H, (unsigned)B);
        FT_LAUNCH(ctx, grid, AR_THREADS, smem, ft_cuda_stream(ctx), attention_rel_kernel<T, DPL>)(
            (T *)dst->data, (const T *)q->data, (const T *)k->data, (const T *)v->data, mask,
            c2p ? (const T *)c2p->data : nullptr, p2c ? (const T *)p2c->data : nullptr,
            rs ? (const T *)rs->data : nullptr, p);
        FT_CUDA_LAUNCH_CHECK(ctx, "attention_rel");
        return FT_OK;
    }
    template <typename T> int run() {
        int64_t dm = p.D > p.Dv ? p.D : p.Dv;
        if (dm <= 32) return launch<T, 1>();
        if (dm <= 64) return launch<T, 2>();
        return launch<T, 4>();
    }
};

/* Strides of t broadcast over 4 dims (0 where t lacks the dim or has size 1). */
void ar_strides(const ft_tensor *t, int64_t *st) {
    for (int i = 0; i < 4; i++) {
        int j = i - (4 - t->ndim);
        st[i] = (j >= 0 && t->ne[j] != 1) ? t->nb[j] : 0;
    }
}
} // namespace

FT_CUDA_KERNEL(attention_rel) {
    const ft_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *m = dst->src[3];
    attention_rel_run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.dst = dst;
    r.q = q;
    r.k = k;
    r.v = v;
    r.c2p = dst->src[4];
    r.p2c = dst->src[5];
    r.rs = dst->src[6];
    for (int i = 0; i < 3; i++) {
        const ft_tensor *t = dst->src[i];
        if (t->ndim != 4 || (t->nb[3] != 1 && t->ne[3] != 1))
            return ft_set_error(ctx, FT_ERR_INTERNAL, "attention_rel: input %d is not 4-d with a unit last stride", i);
    }
    ar_params &p = r.p;
    r.B = q->ne[0];
    r.H = q->ne[1];
    p.Sq = q->ne[2];
    p.Sk = k->ne[2];
    p.D = q->ne[3];
    p.Dv = v->ne[3];
    p.span = FT_PARAMS(dst, ft_params_attention_rel)->span;
    p.scale = FT_PARAMS(dst, ft_params_attention_rel)->scale;
    if (r.B == 0 || r.H == 0 || p.Sq == 0 || p.Dv == 0) return FT_OK;
    if (p.D > 128 || p.Dv > 128)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED,
                            "attention_rel: head dims q/k %lld, v %lld exceed the fused kernel's 128",
                            (long long)p.D, (long long)p.Dv);
    if (r.H > 65535 || r.B > 65535 || (p.Sq + AR_QT - 1) / AR_QT > INT32_MAX)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "attention_rel: grid too large (B %lld, H %lld)",
                            (long long)r.B, (long long)r.H);
    if (dst->nb[3] != 1 && dst->ne[3] != 1)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "attention_rel: the output has a non-unit last stride");
    int64_t st[4];
    ar_strides(q, st);
    p.qb = st[0], p.qh = st[1], p.qs = st[2];
    ar_strides(k, st);
    p.kb = st[0], p.kh = st[1], p.ks = st[2];
    ar_strides(v, st);
    p.vb = st[0], p.vh = st[1], p.vs = st[2];
    p.ob = dst->nb[0], p.oh = dst->nb[1], p.os = dst->nb[2];
    if (m) {
        if (m->dtype != FT_DTYPE_F32 || m->ndim > 4)
            return ft_set_error(ctx, FT_ERR_INTERNAL, "attention_rel: mask must be f32 of rank <= 4");
        r.mask = (const float *)m->data;
        ar_strides(m, st);
        p.mb = st[0], p.mh = st[1], p.mq = st[2], p.mk = st[3];
    }
    if (r.c2p) {
        ar_strides(r.c2p, st);
        p.cb = st[0], p.ch = st[1], p.cq = st[2], p.cr = st[3];
    }
    if (r.p2c) {
        ar_strides(r.p2c, st);
        p.pb = st[0], p.ph = st[1], p.pk = st[2], p.pr = st[3];
    }
    if (r.rs) {
        if (r.rs->ndim > 4)
            return ft_set_error(ctx, FT_ERR_INTERNAL, "attention_rel: row scale of rank > 4");
        ar_strides(r.rs, st);
        p.rb = st[0], p.rh = st[1], p.rq = st[2];
    }
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, r);
}

/*
 * dwconv.c - the CPU depthwise convolution (FT_OP_DWCONV2D), computed directly:
 * one KH x KW filter per channel plane, no im2col and no GEMM (a depthwise
 * filter is K^2 multiply-adds per output, far too few to amortise packing).
 *
 * Per (image, channel) plane, on one thread:
 *  1. the input plane is copied, converted to f32, through the input prologue
 *     act_in(x + bin[c]) and surrounded by the zero padding (per side), into
 *     s^2 "phase" buffers for stride s: phase (a, b) holds the padded pixels at
 *     rows = a, columns = b (mod s), so every tap of a strided convolution reads
 *     consecutive floats (stride 1: one buffer, the padded plane);
 *  2. the outputs are computed over the flattened phase buffer: output (oy, ox)
 *     sits at flat index oy * Wq + ox and tap (ky, kx) reads at a fixed offset
 *     from it, so one unit-stride pass per tap covers whole rows at once (the
 *     few columns past OW in each row are computed and dropped: a 7x7 map is
 *     then 5 vectors instead of 7 one-third-full ones). Rows are taken in blocks
 *     whose accumulators stay in L1, 64 outputs at a time in registers;
 *  3. each finished row gets the epilogue act(acc + bias[c] + residual) and is
 *     stored in the output dtype.
 * Planes are spread over the OpenMP team; each thread keeps its buffers in its
 * slot of the context's scratch.
 *
 * Interface: ft_cpu_dwconv2d (the op) over ft_cpu_dw_plane (one plane; kept
 * separate so a blocked-channel layout can reuse the arithmetic).
 */
#include "cpu_kernels.h"
#include "dwconv.h"
#include "nchwc.h"
#include "gemm.h"
#include "vmath.h"
#include "vrow.h"

#include <omp.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 11 && \
    !defined(__SANITIZE_THREAD__)
#define DW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DW_CLONES
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "fp-contract=fast")
#endif

/* 16 floats; loads and stores through the unaligned variant */
typedef float dw_v16 __attribute__((vector_size(64)));
typedef float dw_v16u __attribute__((vector_size(64), aligned(4)));

#define DW_ACC_FLOATS 2048 /* accumulators of one row block: 8 KiB, in L1 */

bool ft_cpu_dw_prepare(ft_cpu_dw_geom *g) {
    const int64_t s = g->stride, d = g->dil;
    if (g->kh * g->kw > FT_CPU_DW_MAX_TAPS || s < 1 || s > 16) return false;
    g->hq = g->oh + (g->kh - 1) * d / s + 1; /* (one slack row: the flat passes run past the last row) */
    g->wq = g->ow + (g->kw - 1) * d / s;
    g->rb = DW_ACC_FLOATS / g->wq > 0 ? DW_ACC_FLOATS / g->wq : 1;
    for (int64_t b = 0; b < s; b++) {
        /* columns j whose input column j*s + b - pl lies in [0, w) */
        int64_t j0 = g->pl - b > 0 ? (g->pl - b + s - 1) / s : 0;
        int64_t j1 = (g->w + g->pl - b + s - 1) / s;
        if (j1 > g->wq) j1 = g->wq;
        if (j1 < j0) j1 = j0;
        g->j0[b] = j0, g->j1[b] = j1;
    }
    for (int64_t ky = 0; ky < g->kh; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++) {
            int64_t ay = ky * d, ax = kx * d;
            g->toff[ky * g->kw + kx] = ((ay % s) * s + ax % s) * g->hq * g->wq + (ay / s) * g->wq + ax / s;
        }
    return true;
}

int64_t ft_cpu_dw_plane_floats(const ft_cpu_dw_geom *g) {
    /* the phase buffers, the accumulators, and slack for the last vector's lanes past the end */
    return g->stride * g->stride * g->hq * g->wq + g->rb * g->wq + 64;
}

/* y = act(y) inline for the activations these models fuse (the clone's vector width);
 * others through the row primitive */
static inline __attribute__((always_inline)) void dw_act(int act, float *y, int64_t n) {
    switch (act) {
    case FT_ACT_NONE: break;
    case FT_ACT_RELU:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = ft_vreluf(y[j]);
        break;
    case FT_ACT_RELU6:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = ft_vrelu6f(y[j]);
        break;
    case FT_ACT_SILU:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = ft_vsiluf(y[j]);
        break;
    default: ft_cpu_row_act(act, y, n);
    }
}

/* acc[0..n) = sum over taps t of tw[t] * q[toff[t] + i]: 128 outputs at a time in eight
 * registers, enough independent chains to keep both FMA pipes busy */
static inline __attribute__((always_inline)) void dw_accumulate(const float *q, const int64_t *toff,
                                                                const float *tw, int ntaps, int64_t n,
                                                                float *acc) {
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        dw_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
        for (int t = 0; t < ntaps; t++) {
            const float *p = q + toff[t] + i;
            dw_v16 w = {0};
            w += tw[t];
            a0 += w * *(const dw_v16u *)(p);
            a1 += w * *(const dw_v16u *)(p + 16);
            a2 += w * *(const dw_v16u *)(p + 32);
            a3 += w * *(const dw_v16u *)(p + 48);
            a4 += w * *(const dw_v16u *)(p + 64);
            a5 += w * *(const dw_v16u *)(p + 80);
            a6 += w * *(const dw_v16u *)(p + 96);
            a7 += w * *(const dw_v16u *)(p + 112);
        }
        *(dw_v16u *)(acc + i) = a0;
        *(dw_v16u *)(acc + i + 16) = a1;
        *(dw_v16u *)(acc + i + 32) = a2;
        *(dw_v16u *)(acc + i + 48) = a3;
        *(dw_v16u *)(acc + i + 64) = a4;
        *(dw_v16u *)(acc + i + 80) = a5;
        *(dw_v16u *)(acc + i + 96) = a6;
        *(dw_v16u *)(acc + i + 112) = a7;
    }
    for (; i + 32 <= n; i += 32) {
        dw_v16 a0 = {0}, a1 = {0};
        for (int t = 0; t < ntaps; t++) {
            const float *p = q + toff[t] + i;
            dw_v16 w = {0};
            w += tw[t];
            a0 += w * *(const dw_v16u *)(p);
            a1 += w * *(const dw_v16u *)(p + 16);
        }
        *(dw_v16u *)(acc + i) = a0;
        *(dw_v16u *)(acc + i + 16) = a1;
    }
    /* the last vectors whole: lanes past n read the buffer's slack (and past the phase
     * buffers the accumulators) and are never stored to the output */
    for (; i < n; i += 16) {
        dw_v16 a0 = {0};
        for (int t = 0; t < ntaps; t++) {
            dw_v16 w = {0};
            w += tw[t];
            a0 += w * *(const dw_v16u *)(q + toff[t] + i);
        }
        *(dw_v16u *)(acc + i) = a0;
    }
}

/* n values of an f32 row read with stride s into out */
static inline __attribute__((always_inline)) void dw_gather(const float *src, int64_t s, int64_t n, float *out) {
    if (s == 1) {
        memcpy(out, src, (size_t)n * sizeof(float));
    } else if (s == 2) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) out[j] = src[2 * j];
    } else {
        for (int64_t j = 0; j < n; j++) out[j] = src[j * s];
    }
}

/* The phase buffers of one input plane (see the top of the file). */
static inline __attribute__((always_inline)) void dw_fill(const ft_cpu_dw_geom *g, const ft_cpu_dw_io *io,
                                                          int64_t hq, int64_t wq, float *buf) {
    const int64_t s = g->stride, h = g->h, w = g->w;
    const bool prologue = io->bin_set || io->act_in != FT_ACT_NONE;
    for (int64_t a = 0; a < s; a++)
        for (int64_t b = 0; b < s; b++) {
            float *ph = buf + (a * s + b) * hq * wq;
            const int64_t j0 = g->j0[b], j1 = g->j1[b];
            for (int64_t i = 0; i < hq; i++) {
                float *row = ph + i * wq;
                int64_t r = i * s + a - g->pt;
                if (r < 0 || r >= h || j1 == j0) {
                    memset(row, 0, (size_t)wq * sizeof(float));
                    continue;
                }
                for (int64_t j = 0; j < j0; j++) row[j] = 0.0f;
                int64_t off = io->x_off + r * w + j0 * s + b - g->pl;
                if (io->xt == FT_DTYPE_F32) dw_gather((const float *)io->x + off, s, j1 - j0, row + j0);
                else ft_cpu_row_load(io->x, io->xt, off, s, j1 - j0, row + j0);
                if (prologue) {
                    float *v = row + j0;
                    const float bc = io->bin;
#pragma omp simd
                    for (int64_t j = 0; j < j1 - j0; j++) v[j] += bc;
                    dw_act(io->act_in, v, j1 - j0);
                }
                for (int64_t j = j1; j < wq; j++) row[j] = 0.0f;
            }
        }
}

/* y[j] = act(a[j] + bias (+ res[j])) for j < n, f32, for the activations fused here */
#define DW_EPI_LOOP(ACT)                                                                        \
    do {                                                                                        \
        if (res) {                                                                              \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) y[j] = ACT(a[j] + res[j] + bias); \
        } else {                                                                                \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) y[j] = ACT(a[j] + bias);        \
        }                                                                                       \
    } while (0)
#define DW_ID(v) (v)

static inline __attribute__((always_inline)) bool dw_epi_inline(int act) {
    return act == FT_ACT_NONE || act == FT_ACT_RELU6 || act == FT_ACT_SILU || act == FT_ACT_RELU;
}

static inline __attribute__((always_inline)) void dw_epi_f32(int act, const float *a, const float *res, float bias,
                                                             float *y, int64_t n) {
    if (act == FT_ACT_RELU6) DW_EPI_LOOP(ft_vrelu6f);
    else if (act == FT_ACT_SILU) DW_EPI_LOOP(ft_vsiluf);
    else if (act == FT_ACT_RELU) DW_EPI_LOOP(ft_vreluf);
    else DW_EPI_LOOP(DW_ID);
}

DW_CLONES
void ft_cpu_dw_plane(const ft_cpu_dw_geom *g, const ft_cpu_dw_io *io, float *buf) {
    const int64_t s = g->stride, oh = g->oh, ow = g->ow, hq = g->hq, wq = g->wq, rb = g->rb;
    float *acc = buf + s * s * hq * wq;
    dw_fill(g, io, hq, wq, buf);
    const int ntaps = (int)(g->kh * g->kw);
    const float bias = io->bias;
    const bool f32 = io->yt == FT_DTYPE_F32;
    const int act = io->act;
    for (int64_t r0 = 0; r0 < oh; r0 += rb) {
        int64_t rows = oh - r0 < rb ? oh - r0 : rb;
        dw_accumulate(buf + r0 * wq, g->toff, io->w, ntaps, rows * wq, acc);
        if (f32 && !io->res && dw_epi_inline(act)) {
            /* the epilogue over the whole block in full vectors (the columns past ow and the
             * slack included: no scalar tail per short row), then the rows out */
            dw_epi_f32(act, acc, NULL, bias, acc, (rows * wq + 15) / 16 * 16);
            for (int64_t r = 0; r < rows; r++) {
                float *y = (float *)io->y + io->y_off + (r0 + r) * ow;
                const float *src = acc + r * wq;
                for (int64_t j = 0; j < ow; j++) y[j] = src[j];
            }
            continue;
        }
        for (int64_t r = 0; r < rows; r++) {
            float *ar = acc + r * wq;
            const float *rr = io->res ? io->res + (r0 + r) * ow : NULL;
            int64_t o = io->y_off + (r0 + r) * ow;
            if (f32 && dw_epi_inline(act)) {
                dw_epi_f32(act, ar, rr, bias, (float *)io->y + o, ow);
                continue;
            }
            if (rr) {
#pragma omp simd
                for (int64_t j = 0; j < ow; j++) ar[j] += rr[j] + bias;
            } else {
#pragma omp simd
                for (int64_t j = 0; j < ow; j++) ar[j] += bias;
            }
            dw_act(act, ar, ow);
            ft_cpu_row_store(io->y, io->yt, o, ow, ar);
        }
    }
}

FT_CPU_KERNEL_DEF(dwconv2d) {
    /* a graph plan's blocked-channel node: the NCHWc depthwise kernel (nchwc_conv.c) */
    if (dst->flags & FT_TF_NCHWC) return ft_cpu_nchwc_conv2d(ctx, dst);
    const ft_tensor *x = dst->src[0], *wt = dst->src[1], *bias = dst->src[2], *res = dst->src[3],
                    *bin = dst->src[5];
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    int64_t pads[4];
    ft_conv_pads(p, pads);
    ft_cpu_dw_geom g = {.h = x->ne[2], .w = x->ne[3], .kh = wt->ne[2], .kw = wt->ne[3], .oh = dst->ne[2],
                        .ow = dst->ne[3], .stride = p->stride, .dil = ft_conv_dilation(p), .pt = pads[0],
                        .pl = pads[2]};
    const int64_t batch = x->ne[0], c = x->ne[1], taps = g.kh * g.kw;
    if (ft_numel(dst) == 0) return FT_OK;
    if (!ft_cpu_dw_prepare(&g))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "dwconv2d: a %lldx%lld kernel (stride %lld) is past the direct "
                            "kernel's %d taps or stride 16",
                            (long long)g.kh, (long long)g.kw, (long long)g.stride, FT_CPU_DW_MAX_TAPS);
    if (!ft_tensor_contiguous(x) || !ft_tensor_contiguous(dst))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "dwconv2d expects contiguous x and output");
    ft_cpu_f32 fw = {0}, fb = {0}, fr = {0}, fbin = {0};
    int st = FT_OK;
    if (ft_cpu_f32_get(wt, ft_tensor_contiguous(wt), &fw) ||
        (bias && ft_cpu_f32_get(bias, bias->nb[0] == 1, &fb)) ||
        (bin && ft_cpu_f32_get(bin, bin->nb[0] == 1, &fbin)) ||
        (res && ft_cpu_f32_get(res, ft_tensor_contiguous(res), &fr))) {
        st = ft_set_error(ctx, FT_ERR_OOM, "dwconv2d: out of host memory for staging");
        goto done;
    }
    const int64_t planes = batch * c, plane_in = g.h * g.w, plane_out = g.oh * g.ow;
    const size_t need = (size_t)ft_cpu_dw_plane_floats(&g) * sizeof(float);
    ft_cpu_scratch *sc = ft_cpu_scratch_cur();
    int failed = 0;
    /* below the GEMM's bar (64^3 multiply-adds, tens of microseconds) waking the team costs
     * more than it saves: with the tool's short OpenMP spin the workers sleep between kernels */
    bool par = planes > 1 && planes * plane_out * taps >= 64 * 64 * 64 && ft_cpu_threads() > 1;
#pragma omp parallel num_threads(ft_cpu_threads()) if (par) reduction(| : failed)
    {
        ft_cpu_buf b;
        float *buf = ft_cpu_buf_get(&b, sc, FT_SCR_GEMM_B, need);
        if (!buf) failed = 1;
#pragma omp for schedule(static)
        for (int64_t pi = 0; pi < planes; pi++) {
            if (!buf) continue;
            int64_t ch = pi % c;
            ft_cpu_dw_io io = {.x = x->data, .xt = x->dtype, .x_off = pi * plane_in, .w = fw.p + ch * taps,
                               .bias = fb.p ? fb.p[ch] : 0.0f, .bin = fbin.p ? fbin.p[ch] : 0.0f,
                               .bin_set = fbin.p != NULL, .act_in = p->act_in, .act = p->act,
                               .res = fr.p ? fr.p + pi * plane_out : NULL, .y = dst->data, .yt = dst->dtype,
                               .y_off = pi * plane_out};
            ft_cpu_dw_plane(&g, &io, buf);
        }
        ft_cpu_buf_put(&b);
    }
    if (failed) st = ft_set_error(ctx, FT_ERR_OOM, "dwconv2d: out of host memory for its plane buffers");
done:
    ft_cpu_f32_release(&fw);
    ft_cpu_f32_release(&fb);
    ft_cpu_f32_release(&fbin);
    ft_cpu_f32_release(&fr);
    return st;
}

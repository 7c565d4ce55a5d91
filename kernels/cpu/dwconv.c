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
#include "gemm.h"
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

int64_t ft_cpu_dw_plane_floats(const ft_cpu_dw_geom *g) {
    int64_t s = g->stride, d = g->dil;
    int64_t hq = g->oh + (g->kh - 1) * d / s + 1, wq = g->ow + (g->kw - 1) * d / s;
    int64_t rb = DW_ACC_FLOATS / wq;
    if (rb < 1) rb = 1;
    return s * s * hq * wq + rb * wq + 64;
}

/* acc[0..n) = sum over taps t of tw[t] * q[toff[t] + i] */
DW_CLONES
static void dw_accumulate(const float *q, const int64_t *toff, const float *tw, int ntaps, int64_t n,
                          float *acc) {
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        dw_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (int t = 0; t < ntaps; t++) {
            const float *p = q + toff[t] + i;
            dw_v16 w = {0};
            w += tw[t];
            a0 += w * *(const dw_v16u *)(p);
            a1 += w * *(const dw_v16u *)(p + 16);
            a2 += w * *(const dw_v16u *)(p + 32);
            a3 += w * *(const dw_v16u *)(p + 48);
        }
        *(dw_v16u *)(acc + i) = a0;
        *(dw_v16u *)(acc + i + 16) = a1;
        *(dw_v16u *)(acc + i + 32) = a2;
        *(dw_v16u *)(acc + i + 48) = a3;
    }
    for (; i + 16 <= n; i += 16) {
        dw_v16 a0 = {0};
        for (int t = 0; t < ntaps; t++) {
            dw_v16 w = {0};
            w += tw[t];
            a0 += w * *(const dw_v16u *)(q + toff[t] + i);
        }
        *(dw_v16u *)(acc + i) = a0;
    }
    for (; i < n; i++) {
        float a = 0.0f;
        for (int t = 0; t < ntaps; t++) a += tw[t] * q[toff[t] + i];
        acc[i] = a;
    }
}

/* The phase buffers of one input plane (see the top of the file). */
static void dw_fill(const ft_cpu_dw_geom *g, const ft_cpu_dw_io *io, int64_t hq, int64_t wq, float *buf) {
    const int64_t s = g->stride, h = g->h, w = g->w;
    for (int64_t a = 0; a < s; a++)
        for (int64_t b = 0; b < s; b++) {
            float *ph = buf + (a * s + b) * hq * wq;
            /* columns j whose input column j*s + b - pl lies in [0, w) */
            int64_t j0 = g->pl - b > 0 ? (g->pl - b + s - 1) / s : 0;
            int64_t j1 = (w + g->pl - b + s - 1) / s; /* first j past the input */
            if (j1 > wq) j1 = wq;
            if (j1 < j0) j1 = j0;
            for (int64_t i = 0; i < hq; i++) {
                float *row = ph + i * wq;
                int64_t r = i * s + a - g->pt;
                if (r < 0 || r >= h || j1 == j0) {
                    memset(row, 0, (size_t)wq * sizeof(float));
                    continue;
                }
                if (j0 > 0) memset(row, 0, (size_t)j0 * sizeof(float));
                ft_cpu_row_load(io->x, io->xt, io->x_off + r * w + j0 * s + b - g->pl, s, j1 - j0, row + j0);
                if (io->bin_set || io->act_in != FT_ACT_NONE)
                    ft_cpu_row_bias_act(row + j0, j1 - j0, NULL, io->bin, io->act_in);
                if (j1 < wq) memset(row + j1, 0, (size_t)(wq - j1) * sizeof(float));
            }
        }
}

void ft_cpu_dw_plane(const ft_cpu_dw_geom *g, const ft_cpu_dw_io *io, float *buf) {
    const int64_t s = g->stride, d = g->dil, oh = g->oh, ow = g->ow;
    const int64_t hq = g->oh + (g->kh - 1) * d / s + 1, wq = g->ow + (g->kw - 1) * d / s;
    int64_t rb = DW_ACC_FLOATS / wq;
    if (rb < 1) rb = 1;
    float *acc = buf + s * s * hq * wq;
    dw_fill(g, io, hq, wq, buf);
    int ntaps = (int)(g->kh * g->kw);
    int64_t toff[FT_CPU_DW_MAX_TAPS];
    for (int64_t ky = 0; ky < g->kh; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++) {
            int64_t ay = ky * d, ax = kx * d;
            toff[ky * g->kw + kx] = ((ay % s) * s + ax % s) * hq * wq + (ay / s) * wq + ax / s;
        }
    for (int64_t r0 = 0; r0 < oh; r0 += rb) {
        int64_t rows = oh - r0 < rb ? oh - r0 : rb;
        dw_accumulate(buf + r0 * wq, toff, io->w, ntaps, rows * wq, acc);
        for (int64_t r = 0; r < rows; r++) {
            float *ar = acc + r * wq;
            int64_t o = io->y_off + (r0 + r) * ow;
            if (io->res) ft_cpu_row_binary(FT_OP_ADD, ar, io->res + (r0 + r) * ow, ow, 0);
            ft_cpu_row_bias_act(ar, ow, NULL, io->bias, io->act);
            ft_cpu_row_store(io->y, io->yt, o, ow, ar);
        }
    }
}

FT_CPU_KERNEL_DEF(dwconv2d) {
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
    if (taps > FT_CPU_DW_MAX_TAPS)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "dwconv2d: a %lldx%lld kernel has more than %d taps",
                            (long long)g.kh, (long long)g.kw, FT_CPU_DW_MAX_TAPS);
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
    /* below ~32k multiply-adds the fork costs more than it saves */
    bool par = planes > 1 && planes * plane_out * taps >= 32768 && ft_cpu_threads() > 1;
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

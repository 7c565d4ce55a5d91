/*
 * nchwc_conv.c - the direct convolution of the blocked-channel layout
 * (kernels/cpu/nchwc.h): output NCHWc, weights packed once per plan.
 *
 * A micro-kernel computes NPX consecutive output pixels (in raster order over
 * the whole OH x OW plane, so a tile may wrap to the next row and a 7 x 7 plane
 * wastes no half-empty tiles) times up to 64 output channels: 6 x 64 with
 * AVX-512 (24 zmm accumulators; per input channel 6 broadcasts and 4 weight
 * vectors feed 24 FMAs), 6 x 16 with AVX2. Its inner loop runs over the taps
 * (input channel block, ky, kx) of a table the driver builds per tile: for each
 * tap one pointer per pixel to the 16 input channels of the pixel it reads, or
 * to a block of zeros where the window is in the padding, and the tap's weight
 * block [16 ci][64 co]. Padding, strides and 1x1 / 3x3 / 7x7 kernels are all the
 * same loop, and nothing is packed from the input: in NCHWc the channels a tap
 * reads are already contiguous. (A 1x1 convolution is thus a GEMM whose B
 * operand is read in place.)
 *
 * Cache blocking: the taps are cut into chunks whose weights (chunk x 16 x 64
 * floats) fit half of L2, and every tile of a (image, 64-channel group) task
 * runs through a chunk before the next one, accumulating in the output. The
 * epilogue (bias, residual, ReLU; other activations right after) is applied with
 * the last chunk while the tile is in L1.
 *
 * An NCHW input (the image, or a tensor whose channel count is not a multiple of
 * 16) is first reordered into blocks of 16 channels (the last one narrower,
 * holding the remainder: a 3-channel image becomes HWC) in the kernel's scratch.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "gemm_micro.h"
#include "nchwc.h"
#include "scratch.h"
#include "vrow.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define C16 FT_NCHWC
#define CG FT_NCHWC_CG
#define NPX_MAX 6
#define TAPS_MAX 256 /* taps per chunk: the tables stay on the stack */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 11
#define DC_X86 1
#endif
#if defined(DC_X86) && !defined(__SANITIZE_THREAD__)
#define DC_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define DC_CLONES
#endif
#if defined(__GNUC__)
#define DC_INLINE static inline __attribute__((always_inline))
#else
#define DC_INLINE static inline
#endif

enum { DC_FIRST = FT_DC_FIRST, DC_LAST = FT_DC_LAST, DC_RELU = FT_DC_RELU };

static const float dc_zeros[C16] __attribute__((aligned(64)));

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O3", "fp-contract=fast")
#endif

typedef ft_cpu_dc_taps dc_taps; /* nchwc.h says what a call reads */

#define DC_PX(k) (pp[NPX > (k) ? (k) : 0] == dc_zeros ? dc_zeros : pp[NPX > (k) ? (k) : 0] + xo)

/*
 * y[b][j][c] (+)= sum over taps t and input channels ci < nci of
 * xp[t][j][ci] * wp[t][ci * 64 + wo + b * 16 + c], for NPX pixels j and NCB
 * blocks b of 16 output channels; block b of y at y + b * ys. mode: DC_FIRST
 * (y not read), DC_LAST (then + bias[b*16 + c] + res[b * ys + j * 16 + c], and
 * ReLU with DC_RELU; NaN stays NaN).
 */
DC_INLINE void dc_body(const int NPX, const int NCB, const dc_taps *tp, int64_t wo, float *restrict y, int64_t ys,
                       const float *restrict bias, const float *restrict res, int mode) {
    float acc[NPX_MAX][4 * C16];
    for (int j = 0; j < NPX; j++)
        for (int c = 0; c < NCB * C16; c++) acc[j][c] = 0.0f;
    const float *pf = tp->pf;
    const int pfn = tp->pfn, nci = tp->nci, ntaps = tp->ntaps, nblk = tp->nblk, xqn = tp->xqn;
    const float *xq = tp->xq;
    const int64_t xqs = tp->xqs, xql = tp->xql;
    for (int blk = 0; blk < nblk; blk++)
    for (int t = 0; t < ntaps; t++) {
        const int64_t xo = blk * tp->xbs;
        const float *const *pp = tp->xp + t * NPX;
        const float *w = tp->wp[t] + wo + blk * tp->wbs;
        const float *x0 = DC_PX(0), *x1 = DC_PX(1), *x2 = DC_PX(2), *x3 = DC_PX(3), *x4 = DC_PX(4), *x5 = DC_PX(5);
        for (int k = 0; k < pfn; k++, pf += 16) __builtin_prefetch(pf, 0, 2);
        for (int k = 0; k < xqn; k++) __builtin_prefetch(xq + k * xql, 0, 3);
        xq += xqs;
        for (int ci = 0; ci < nci; ci++) {
            const float *wc = w + ci * CG;
            const float a[NPX_MAX] = {x0[ci], x1[ci], x2[ci], x3[ci], x4[ci], x5[ci]};
#if defined(__GNUC__)
#pragma GCC unroll 6
#endif
            for (int j = 0; j < NPX; j++) {
#if defined(__GNUC__)
#pragma GCC unroll 4
#endif
                for (int b = 0; b < NCB; b++) {
#pragma omp simd
                    for (int c = 0; c < C16; c++) acc[j][b * C16 + c] += a[j] * wc[b * C16 + c];
                }
            }
        }
    }
    /* the store, one straight vector path per case */
    if (!(mode & DC_FIRST))
        for (int b = 0; b < NCB; b++)
            for (int j = 0; j < NPX; j++)
#pragma omp simd
                for (int c = 0; c < C16; c++) acc[j][b * C16 + c] += y[b * ys + j * C16 + c];
    if (mode & DC_LAST) {
        if (bias)
            for (int b = 0; b < NCB; b++)
                for (int j = 0; j < NPX; j++)
#pragma omp simd
                    for (int c = 0; c < C16; c++) acc[j][b * C16 + c] += bias[b * C16 + c];
        if (res)
            for (int b = 0; b < NCB; b++)
                for (int j = 0; j < NPX; j++)
#pragma omp simd
                    for (int c = 0; c < C16; c++) acc[j][b * C16 + c] += res[b * ys + j * C16 + c];
        if (mode & DC_RELU)
            for (int j = 0; j < NPX; j++)
#pragma omp simd
                for (int c = 0; c < NCB * C16; c++) {
                    const float v = acc[j][c];
                    acc[j][c] = v > 0.0f || v != v ? v : 0.0f;
                }
    }
    for (int b = 0; b < NCB; b++)
        for (int j = 0; j < NPX; j++)
#pragma omp simd
            for (int c = 0; c < C16; c++) y[b * ys + j * C16 + c] = acc[j][b * C16 + c];
}

typedef void (*dc_fn)(const dc_taps *tp, int64_t wo, float *y, int64_t ys, const float *bias, const float *res,
                      int mode);

/* AVX2 and baseline: 16 output channels at a time */
#define DC_DEF16(P)                                                                                    \
    DC_CLONES static void dc16_##P(const dc_taps *tp, int64_t wo, float *y, int64_t ys, const float *bias, \
                                   const float *res, int mode) {                                       \
        dc_body(P, 1, tp, wo, y, ys, bias, res, mode);                                                 \
    }
DC_DEF16(1)
DC_DEF16(2)
DC_DEF16(3)
DC_DEF16(4)
DC_DEF16(5)
DC_DEF16(6)
static const dc_fn dc16[NPX_MAX] = {dc16_1, dc16_2, dc16_3, dc16_4, dc16_5, dc16_6};

#ifdef DC_X86
/*
 * The AVX-512 body: dc_body's sums in the same order, written on gcc's generic
 * vectors (one 16-float vector per accumulator, every index a constant after
 * unrolling) so the 24 accumulators live in registers from the zeroing to the
 * store. dc_body's float arrays were zeroed in memory (a rep stos per call),
 * loaded, and spilled again for the epilogue: about a quarter of a depth-64
 * 1x1 convolution's time (ResNet-50's 64 -> 256 layers at 56 x 56).
 */
typedef float dc_v16 __attribute__((vector_size(64)));
typedef float dc_v16u __attribute__((vector_size(64), aligned(4)));
typedef int dc_i16 __attribute__((vector_size(64)));
#define DC_LD(p) (*(const dc_v16u *)(p))
#define DC_BC(s) ((dc_v16){s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s})

DC_INLINE void dc_body512(const int NPX, const int NCB, const dc_taps *tp,
                          int64_t wo, float *restrict y, int64_t ys, const float *restrict bias,
                          const float *restrict res, int mode) {
    dc_v16 acc[NPX_MAX][4];
#pragma GCC unroll 6
    for (int j = 0; j < NPX; j++)
#pragma GCC unroll 4
        for (int b = 0; b < NCB; b++) acc[j][b] = (dc_v16){0};
    const float *pf = tp->pf;
    const int pfn = tp->pfn, nci = tp->nci, ntaps = tp->ntaps, nblk = tp->nblk, xqn = tp->xqn;
    const float *xq = tp->xq;
    const int64_t xqs = tp->xqs, xql = tp->xql;
    for (int blk = 0; blk < nblk; blk++)
    for (int t = 0; t < ntaps; t++) {
        const int64_t xo = blk * tp->xbs;
        const float *const *pp = tp->xp + t * NPX;
        const float *w = tp->wp[t] + wo + blk * tp->wbs;
        const float *x0 = DC_PX(0), *x1 = DC_PX(1), *x2 = DC_PX(2), *x3 = DC_PX(3), *x4 = DC_PX(4), *x5 = DC_PX(5);
        for (int k = 0; k < pfn; k++, pf += 16) __builtin_prefetch(pf, 0, 2);
        for (int k = 0; k < xqn; k++) __builtin_prefetch(xq + k * xql, 0, 3);
        xq += xqs;
        /* two channels per trip: ~1% off ResNet-50's forward (loop overhead) */
#pragma GCC unroll 2
        for (int ci = 0; ci < nci; ci++) {
            const float *wc = w + ci * CG;
            dc_v16 wv[4];
#pragma GCC unroll 4
            for (int b = 0; b < NCB; b++) wv[b] = DC_LD(wc + b * C16);
            const float a[NPX_MAX] = {x0[ci], x1[ci], x2[ci], x3[ci], x4[ci], x5[ci]};
#pragma GCC unroll 6
            for (int j = 0; j < NPX; j++) {
                const dc_v16 av = DC_BC(a[j]);
#pragma GCC unroll 4
                for (int b = 0; b < NCB; b++) acc[j][b] += av * wv[b];
            }
        }
    }
    const bool first = (mode & DC_FIRST) != 0, relu = (mode & DC_LAST) && (mode & DC_RELU);
    const float *bo = (mode & DC_LAST) ? bias : NULL, *ro = (mode & DC_LAST) ? res : NULL;
#pragma GCC unroll 4
    for (int b = 0; b < NCB; b++)
#pragma GCC unroll 6
        for (int j = 0; j < NPX; j++) {
            /* y + acc, + bias, + residual, ReLU (NaN stays NaN, -0 becomes +0) */
            dc_v16 v = acc[j][b];
            float *yo = y + b * ys + j * C16;
            if (!first) v = DC_LD(yo) + v;
            if (bo) v += DC_LD(bo + b * C16);
            if (ro) v += DC_LD(ro + b * ys + j * C16);
            if (relu) {
                /* zero where v <= 0 (-0 too); a NaN compares false and stays: one
                 * compare and a masked move (v > 0 || v != v scalarised here) */
                v = (dc_v16)((dc_i16)v & ~(v <= 0.0f));
            }
            *(dc_v16u *)yo = v;
        }
}

/* AVX-512: up to 64 output channels at a time */
#define DC_DEF64(P, B)                                                                                  \
    __attribute__((target("arch=x86-64-v4"))) static void dc64_##P##_##B(                              \
        const dc_taps *tp, int64_t wo, float *y, int64_t ys, const float *bias, const float *res,      \
        int mode) {                                                                                    \
        dc_body512(P, B, tp, wo, y, ys, bias, res, mode);                                              \
    }
#define DC_DEF64_ROW(P) DC_DEF64(P, 1) DC_DEF64(P, 2) DC_DEF64(P, 3) DC_DEF64(P, 4)
DC_DEF64_ROW(1)
DC_DEF64_ROW(2)
DC_DEF64_ROW(3)
DC_DEF64_ROW(4)
DC_DEF64_ROW(5)
DC_DEF64_ROW(6)
#define DC_ROW(P) {dc64_##P##_1, dc64_##P##_2, dc64_##P##_3, dc64_##P##_4}
static const dc_fn dc64[NPX_MAX][4] = {DC_ROW(1), DC_ROW(2), DC_ROW(3), DC_ROW(4), DC_ROW(5), DC_ROW(6)};
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

void ft_cpu_dc_call(bool wide, int npx, int ncb, const ft_cpu_dc_taps *tp, int64_t wo, float *y, int64_t ys,
                    const float *bias, const float *res, int mode) {
#ifdef DC_X86
    if (wide) {
        dc64[npx - 1][ncb - 1](tp, wo, y, ys, bias, res, mode);
        return;
    }
#else
    (void)wide;
#endif
    /* the prefetches once, with the first block */
    dc_taps t = *tp;
    for (int b = 0; b < ncb; b++) {
        dc16[npx - 1](&t, wo + b * C16, y + b * ys, ys, bias ? bias + b * C16 : NULL, res ? res + b * ys : NULL,
                      mode);
        t.pfn = 0;
        t.xqn = 0;
    }
}

/* ------------------------------------------------------------------------- */
/* weights                                                                   */
/* ------------------------------------------------------------------------- */

/* The geometry of a conv2d node. */
typedef struct dc_geom {
    int64_t n, cin, cout, groups, h, w, kh, kw, oh, ow, s, pad;
    int64_t pt, pl; /* top and left padding: `pad` but for a depthwise node's per-side (TF SAME) one */
} dc_geom;

static dc_geom geom_of(const ft_tensor *dst) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1];
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    int64_t pads[4];
    ft_conv_pads(p, pads); /* top, bottom, left, right */
    return (dc_geom){x->ne[0], x->ne[1], w->ne[0], p->groups, x->ne[2], x->ne[3], w->ne[2], w->ne[3],
                     dst->ne[2], dst->ne[3], p->stride, p->padding, pads[0], pads[2]};
}

static bool is_depthwise(const dc_geom *g) { return g->groups > 1 && g->groups == g->cin && g->cout == g->cin; }

/*
 * How the weights are laid out, which follows from the input's layout:
 *  - DENSE: [cog][cib][kh][kw][16 ci][64 co]: a tap is (input block, ky, kx);
 *  - ROWS (an NCHW input of fewer than 16 channels, the image): the input is
 *    staged as zero-padded HWC, so the KW x Cin values a window row reads are
 *    contiguous and a tap is a whole row ky: [cog][kh][kw * Cin + ci][64 co]
 *    (7 taps of 21 channels for ResNet's stem, not 49 of 3);
 *  - DW (depthwise): [C/16][kh][kw][16].
 */
enum { DC_DENSE = 0, DC_ROWS = 1, DC_DW = 2, DC_WINO = FT_CPU_NCHWC_MODE_WINO };

/* A convolution Winograd F(2x2, 3x3) can run (whether it should: ft_cpu_wino_use). */
static bool wino_geom(const dc_geom *g, bool x_blocked) {
    return x_blocked && g->groups == 1 && g->kh == 3 && g->kw == 3 && g->s == 1 && g->pad == 1 && g->cin % C16 == 0;
}

/* The layout the geometry asks for, Winograd left aside. */
static int base_mode(const dc_geom *g, bool x_blocked) {
    if (is_depthwise(g)) return DC_DW;
    return !x_blocked && g->cin < C16 ? DC_ROWS : DC_DENSE;
}

/*  - WINO: a 3x3 stride-1 convolution that Winograd's transforms serve
 *    (nchwc_wino.c), its weights [16 positions][cog][cib][16 ci][64 co]; whether
 *    they pay (the environment and the cost model) is asked when weights are
 *    packed, never per call of a plan. */
static int pack_mode(const dc_geom *g, bool x_blocked) {
    const int mode = base_mode(g, x_blocked);
    if (mode == DC_DENSE && wino_geom(g, x_blocked) &&
        ft_cpu_wino_use(g->n, g->cin, g->cout, g->h, g->w, ft_cpu_threads()))
        return DC_WINO;
    return mode;
}

bool ft_cpu_nchwc_conv_ok(const ft_tensor *conv) {
    if ((conv->op != FT_OP_CONV2D && conv->op != FT_OP_DWCONV2D) || conv->dtype != FT_DTYPE_F32 || conv->ndim != 4)
        return false;
    const ft_params_conv *p = FT_PARAMS(conv, ft_params_conv);
    if (conv->src[4] || conv->src[5] || p->act_in != FT_ACT_NONE || p->dilation > 1) return false;
    for (int i = 0; i < 4; i++)
        if (conv->src[i] && conv->src[i]->dtype != FT_DTYPE_F32) return false;
    dc_geom g = geom_of(conv);
    /* per-side padding (TF SAME) is in the depthwise kernel's geometry only */
    if (p->asym && !is_depthwise(&g)) return false;
    if (conv->op == FT_OP_DWCONV2D && !is_depthwise(&g)) return false;
    if (g.cout % C16 || g.cout == 0 || g.oh * g.ow == 0 || g.cin == 0) return false;
    return g.groups == 1 || (is_depthwise(&g) && g.cin % C16 == 0);
}

static int64_t packed_floats(const dc_geom *g, int mode) {
    int64_t ncg = (g->cout + CG - 1) / CG, kk = g->kh * g->kw;
    if (mode == DC_DW) return g->cin * kk;
    if (mode == DC_WINO) return ft_cpu_wino_packed_floats(g->cin, g->cout);
    if (mode == DC_ROWS) return ncg * kk * g->cin * CG;
    return ncg * ((g->cin + C16 - 1) / C16) * kk * C16 * CG;
}

/* w [Cout, Cin, KH, KW] (f32, contiguous) into the kernel's layout at out. */
static void pack_weights(const dc_geom *g, int mode, const float *w, float *out) {
    const int64_t kk = g->kh * g->kw, cib = (g->cin + C16 - 1) / C16;
    if (mode == DC_DW) {
        for (int64_t c = 0; c < g->cout; c++)
            for (int64_t t = 0; t < kk; t++) out[((c / C16) * kk + t) * C16 + c % C16] = w[c * kk + t];
        return;
    }
    if (mode == DC_WINO) {
        ft_cpu_wino_pack(g->cin, g->cout, w, out);
        return;
    }
    memset(out, 0, (size_t)packed_floats(g, mode) * sizeof(float));
    for (int64_t co = 0; co < g->cout; co++)
        for (int64_t ci = 0; ci < g->cin; ci++)
            for (int64_t ky = 0; ky < g->kh; ky++)
                for (int64_t kx = 0; kx < g->kw; kx++) {
                    int64_t row = mode == DC_ROWS
                                      ? ((co / CG) * g->kh + ky) * g->kw * g->cin + kx * g->cin + ci
                                      : (((co / CG) * cib + ci / C16) * kk + ky * g->kw + kx) * C16 + ci % C16;
                    out[row * CG + co % CG] = w[((co * g->cin + ci) * g->kh + ky) * g->kw + kx];
                }
}

static ft_cpu_nchwc_w *packed_make(const ft_tensor *node, const float *w, int mode) {
    dc_geom g = geom_of(node);
    ft_cpu_nchwc_w *p = calloc(1, sizeof *p);
    float *d = malloc((size_t)packed_floats(&g, mode) * sizeof(float));
    if (!p || !d) {
        free(p);
        free(d);
        return NULL;
    }
    pack_weights(&g, mode, w, d);
    *p = (ft_cpu_nchwc_w){FT_CPU_NCHWC_W_MAGIC, g.cout, g.cin, g.kh, g.kw, g.groups, mode, node->src[1]->data, d};
    return p;
}

bool ft_cpu_nchwc_conv_prepack(ft_tensor *node) {
    ft_cpu_f32 fw = {0};
    const ft_tensor *w = node->src[1];
    if (!ft_cpu_nchwc_conv_ok(node) || ft_cpu_f32_get(w, ft_tensor_contiguous(w), &fw)) return false;
    const dc_geom g = geom_of(node);
    ft_cpu_nchwc_w *p = packed_make(node, fw.p, pack_mode(&g, (node->src[0]->flags & FT_TF_NCHWC) != 0));
    ft_cpu_f32_release(&fw);
    if (!p) return false;
    node->extra = p;
    return true;
}

bool ft_cpu_nchwc_conv_is_wino(const ft_tensor *node) {
    const ft_cpu_nchwc_w *w = node && node->op == FT_OP_CONV2D && (node->flags & FT_TF_NCHWC) ? node->extra : NULL;
    return w && w->magic == FT_CPU_NCHWC_W_MAGIC && w->mode == DC_WINO;
}

void ft_cpu_nchwc_w_free(ft_cpu_nchwc_w *w) {
    if (!w || w->magic != FT_CPU_NCHWC_W_MAGIC) return;
    w->magic = 0;
    free(w->data);
    free(w);
}

/* ------------------------------------------------------------------------- */
/* the driver                                                                */
/* ------------------------------------------------------------------------- */

typedef struct dc_run {
    dc_geom g;
    int mode;         /* DC_DENSE, DC_ROWS, DC_DW */
    const float *x;   /* DENSE: blocks [N][CIB][H][W][bw] (bw = 16, or Cin % 16 in a last
                       * partial block); ROWS: zero-padded HWC [N][H+2p][W+2p][Cin]; DW: NCHWc */
    const float *w;   /* packed weights */
    const float *bias, *res;
    float *y;         /* [N][Cout/16][OH*OW][16] */
    int act;
    int64_t cib, ncg, tiles;
    int64_t chunk;    /* DENSE: input blocks per weight chunk */
    int64_t gcogs;    /* channel groups whose chunk of weights is read together */
    int64_t cog_stride; /* floats from one 64-channel group's weights to the next */
    bool wide;        /* AVX-512 kernels */
    bool pfw;         /* prefetch each task's next weight chunk (DENSE) */
    bool acc;         /* y holds the residual (in place): no chunk overwrites it */
} dc_run;

/* Taps of input block b0 (DENSE; the kernel steps them over the chunk's later
 * blocks) or of the window rows (ROWS) for pixels p0 .. p0+npx-1 of image n:
 * xp[t][j] and wp[t] (group 0's weights); DENSE taps whose every pixel reads
 * padding are left out. Returns the count. */
static int build_taps(const dc_run *r, int64_t n, int64_t b0, int64_t p0, int npx, const float **xp,
                      const float **wp) {
    const dc_geom *g = &r->g;
    int64_t ih0[NPX_MAX], iw0[NPX_MAX];
    /* one division per tile: the next pixels step along the row and wrap */
    for (int64_t j = 0, oy = p0 / g->ow, ox = p0 % g->ow; j < npx; j++) {
        ih0[j] = oy * g->s - g->pad;
        iw0[j] = ox * g->s - g->pad;
        if (++ox == g->ow) {
            ox = 0;
            oy++;
        }
    }
    int nt = 0;
    if (r->mode == DC_ROWS) {
        /* padded HWC: window row ky of pixel j starts at (ih0 + pad + ky, iw0 + pad) */
        const int64_t wp_ = g->w + 2 * g->pad, hp = g->h + 2 * g->pad;
        const float *xb = r->x + n * hp * wp_ * g->cin;
        /* row ky = 0 only: the kernel steps the window's rows as blocks */
        for (int j = 0; j < npx; j++) xp[j] = xb + ((ih0[j] + g->pad) * wp_ + iw0[j] + g->pad) * g->cin;
        wp[0] = r->w;
        return 1;
    }
    const int64_t plane = g->h * g->w, kk = g->kh * g->kw;
    const int64_t bw0 = g->cin - b0 * C16 < C16 ? g->cin - b0 * C16 : C16;
    const float *xb = r->x + (n * r->cib + b0) * plane * C16;
    /* every pixel's whole window inside the input (most tiles): pointers without
     * bounds checks (ResNet-50's 3x3s 1.5-2.8% faster hot) */
    bool inner = true;
    for (int j = 0; j < npx; j++)
        inner &= ih0[j] >= 0 && ih0[j] + g->kh <= g->h && iw0[j] >= 0 && iw0[j] + g->kw <= g->w;
    if (inner) {
        const float *base[NPX_MAX];
        for (int j = 0; j < npx; j++) base[j] = xb + (ih0[j] * g->w + iw0[j]) * bw0;
        for (int64_t ky = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++, nt++) {
                const int64_t off = (ky * g->w + kx) * bw0;
                for (int j = 0; j < npx; j++) xp[nt * npx + j] = base[j] + off;
                wp[nt] = r->w + (b0 * kk + ky * g->kw + kx) * C16 * CG;
            }
        return nt;
    }
    int64_t tap[TAPS_MAX];
    for (int64_t ky = 0; ky < g->kh; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++) {
            bool any = false;
            for (int j = 0; j < npx; j++) {
                int64_t ih = ih0[j] + ky, iw = iw0[j] + kx;
                bool in = ih >= 0 && ih < g->h && iw >= 0 && iw < g->w;
                xp[nt * npx + j] = in ? xb + (ih * g->w + iw) * bw0 : dc_zeros;
                any |= in;
            }
            if (any) tap[nt++] = ky * g->kw + kx;
        }
    for (int t = 0; t < nt; t++) wp[t] = r->w + (b0 * kk + tap[t]) * C16 * CG;
    return nt;
}

/* Task: image n, 64-channel groups [c0, c1), pixel tiles [t0, t1). Per weight
 * chunk, every tile of the task; per tile, the taps once and every group. */
static void dc_task(const dc_run *r, int64_t n, int64_t c0, int64_t c1, int64_t t0, int64_t t1) {
    const dc_geom *g = &r->g;
    const float *xp[TAPS_MAX * NPX_MAX];
    const float *wp[TAPS_MAX];
    const int64_t P = g->oh * g->ow, cob = g->cout / C16, ys = P * C16;
    const int64_t nb = r->mode == DC_ROWS ? 1 : r->cib, chunk = r->mode == DC_ROWS ? 1 : r->chunk;
    /* measured: 12-16% off ResNet-50's large 1x1 reductions at batch 8, whose input
     * (25 MB) streams from memory; strided ones too (the downsampling branches) */
    const bool pf = r->mode == DC_DENSE && g->kh == 1 && g->kw == 1 && g->pad == 0;
    /* an output (and residual) of a few times L2 comes from L3 or memory:
     * prefetch its lines too (ResNet-50 at batch 8: 2-4% off the forward with
     * outputs past 16 MB, 4% more past 3 MB with the input prefetched per tap) */
    const bool pfo = (double)(g->n * g->cout * P) * sizeof(float) >= 3.0 * (double)ft_cpu_gemm_kern_get()->l2;
    for (int64_t g0 = c0; g0 < c1; g0 += r->gcogs) {
    const int64_t g1 = g0 + r->gcogs < c1 ? g0 + r->gcogs : c1;
    for (int64_t b0 = 0; b0 < nb; b0 += chunk) {
        const int64_t b1 = b0 + chunk < nb ? b0 + chunk : nb;
        const int mode = (b0 == 0 && !r->acc ? DC_FIRST : 0) | (b1 == nb ? DC_LAST : 0) |
                         (r->act == FT_ACT_RELU ? DC_RELU : 0);
        /* channels per tap: a window row (ROWS), else the block's width (a
         * narrower last block is a chunk of its own) */
        const int nci = r->mode == DC_ROWS ? (int)(g->kw * g->cin)
                                           : (int)(g->cin - b0 * C16 < C16 ? g->cin - b0 * C16 : C16);
        /* the chunk after this one (the next input blocks, else the next groups:
         * one contiguous range of the packed weights either way, as a chunk of
         * several groups covers their whole depth), prefetched to L2 a few lines
         * per tap over this chunk's tiles: otherwise the first tile of each chunk
         * waits for its weights from memory (ResNet-50's stage 4 at batch 1: 9
         * tiles a plane, its 3x3 convolutions 30% slower than with hot weights) */
        int64_t pf_lines = 0;
        const float *pw = NULL;
        if (r->pfw && r->mode == DC_DENSE) {
            int64_t ng0 = g0, ng1 = g1, nb0 = b1, nb1 = b1 + chunk < nb ? b1 + chunk : nb;
            if (b1 == nb) {
                ng0 = g1;
                ng1 = g1 + r->gcogs < c1 ? g1 + r->gcogs : c1;
                nb0 = 0;
                nb1 = chunk < nb ? chunk : nb;
            }
            if (ng0 < ng1) {
                const int64_t blk = g->kh * g->kw * C16 * CG;
                pw = r->w + ng0 * r->cog_stride + nb0 * blk;
                pf_lines = ((ng1 - ng0 - 1) * r->cog_stride + (nb1 - nb0) * blk) / 16;
            }
        }
        const int64_t calls = (t1 - t0) * (g1 - g0);
        for (int64_t t = t0; t < t1; t++) {
            /* tiles as even as their count allows (49 pixels: 6,6,6,6,5,5,5,5,5,
             * not eight 6s and a lone pixel) */
            const int64_t p0 = t * P / r->tiles;
            const int npx = (int)((t + 1) * P / r->tiles - p0);
            dc_taps tp = {build_taps(r, n, b0, p0, npx, xp, wp), (int)(b1 - b0), nci, 0, 0, xp, wp,
                          g->h * g->w * C16, g->kh * g->kw * C16 * CG, g->h * g->w * C16, g->s * C16,
                          NULL, NULL};
            /* a 1x1 convolution streams its input: the micro-kernel prefetches
             * the pixels of the tile after next, one block per tap (a burst of
             * every block's lines here stalled on the miss queue; 16+ streams
             * are more than the hardware follows; strided ones, ResNet's
             * downsampling 1x1s, read every other line, 1.2-1.35x ORT's time at
             * batch 8 without) */
            if (pf && t + 2 < t1) {
                const int64_t q = p0 + 2 * NPX_MAX, qy = q / g->ow * g->s, qx = q % g->ow * g->s;
                tp.xq = r->x + (n * r->cib + b0) * g->h * g->w * C16 + (qy * g->w + qx) * C16;
                tp.xqn = NPX_MAX;
            }
            if (r->mode == DC_ROWS) { /* window rows as blocks: one padded input row, one kernel row on */
                tp.nblk = (int)g->kh;
                tp.xbs = (g->w + 2 * g->pad) * g->cin;
                tp.wbs = g->kw * g->cin * CG;
            }
            const int nt = tp.ntaps * tp.nblk;
            for (int64_t cog = g0; cog < g1; cog++) {
                const int ncb = (int)(cob - cog * 4 < 4 ? cob - cog * 4 : 4);
                const int64_t wo = cog * r->cog_stride;
                float *yt = r->y + ((n * cob + cog * 4) * P + p0) * C16;
                const float *rt = r->res ? r->res + ((n * cob + cog * 4) * P + p0) * C16 : NULL;
                const float *bt = r->bias ? r->bias + cog * CG : NULL;
                if (pfo && t + 2 < t1) {
                    /* the output (and residual) lines of the tile after next: at batch 8
                     * a 56 x 56 stage's activations (25 MB) stream from memory */
                    for (int b = 0; b < ncb; b++)
                        for (int l = 0; l < NPX_MAX * C16; l += 16) {
                            if (b0 == 0) __builtin_prefetch(yt + b * ys + 2 * NPX_MAX * C16 + l, 1, 3);
                            if (rt && (mode & DC_LAST)) __builtin_prefetch(rt + b * ys + 2 * NPX_MAX * C16 + l, 0, 3);
                        }
                }
                /* this call's share of the prefetch, spread over its taps */
                const int64_t call = (t - t0) * (g1 - g0) + (cog - g0);
                const int64_t l0 = call * pf_lines / calls, l1 = (call + 1) * pf_lines / calls;
                tp.pfn = pf_lines && nt ? (int)((l1 - l0 + nt - 1) / nt) : 0;
                tp.pf = pw ? pw + l0 * 16 : NULL;
                ft_cpu_dc_call(r->wide, npx, ncb, &tp, wo, yt, ys, bt, rt, mode);
                tp.xqn = 0;
                if ((mode & DC_LAST) && r->act != FT_ACT_NONE && r->act != FT_ACT_RELU)
                    for (int b = 0; b < ncb; b++) ft_cpu_row_act(r->act, yt + b * ys, (int64_t)npx * C16);
            }
        }
    }
    }
}

/* Depthwise: y[n][cb][p][c] = sum over taps of x[n][cb][tap(p)][c] * w[cb][tap][c],
 * one 16-channel vector per pixel, the window clipped to the input once per
 * pixel (no test per tap). Cloned per ISA and at O3 like the micro-kernels: at
 * the baseline's SSE width it ran 2.3x slower than the NCHW kernel. */
#if defined(DC_X86) && !defined(__SANITIZE_THREAD__)
#define DW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("O3")))
#else
#define DW_CLONES
#endif
DW_CLONES static void dw_task(const dc_run *r, int64_t n, int64_t cb, int64_t t0, int64_t t1) {
    const dc_geom *g = &r->g;
    const int64_t P = g->oh * g->ow, plane = g->h * g->w, kk = g->kh * g->kw, nb = g->cout / C16;
    const float *xb = r->x + (n * nb + cb) * plane * C16, *wb = r->w + cb * kk * C16;
    float *yb = r->y + (n * nb + cb) * P * C16;
    const float *rb = r->res ? r->res + (n * nb + cb) * P * C16 : NULL;
    float bias[C16] = {0};
    if (r->bias)
        for (int c = 0; c < C16; c++) bias[c] = r->bias[cb * C16 + c];
    const bool relu = r->act == FT_ACT_RELU;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t p0 = t * NPX_MAX;
        const int npx = (int)(P - p0 < NPX_MAX ? P - p0 : NPX_MAX);
        for (int j = 0; j < npx; j++) {
            const int64_t p = p0 + j, ih0 = (p / g->ow) * g->s - g->pt, iw0 = (p % g->ow) * g->s - g->pl;
            const int64_t ky0 = ih0 < 0 ? -ih0 : 0, ky1 = g->h - ih0 < g->kh ? g->h - ih0 : g->kh;
            const int64_t kx0 = iw0 < 0 ? -iw0 : 0, kx1 = g->w - iw0 < g->kw ? g->w - iw0 : g->kw;
            float acc[C16];
#pragma omp simd
            for (int c = 0; c < C16; c++) acc[c] = bias[c];
            for (int64_t ky = ky0; ky < ky1; ky++) {
                const float *xr = xb + ((ih0 + ky) * g->w + iw0) * C16, *wr = wb + ky * g->kw * C16;
                for (int64_t kx = kx0; kx < kx1; kx++)
#pragma omp simd
                    for (int c = 0; c < C16; c++) acc[c] += xr[kx * C16 + c] * wr[kx * C16 + c];
            }
            float *yo = yb + p * C16;
            if (rb)
#pragma omp simd
                for (int c = 0; c < C16; c++) acc[c] += rb[p * C16 + c];
#pragma omp simd
            for (int c = 0; c < C16; c++) yo[c] = relu ? (acc[c] > 0.0f || acc[c] != acc[c] ? acc[c] : 0.0f) : acc[c];
        }
        if (r->act != FT_ACT_NONE && !relu) ft_cpu_row_act(r->act, yb + p0 * C16, (int64_t)npx * C16);
    }
}

/* How a product of groups x tiles is cut into tasks for nt threads: per image,
 * rc ranges of channel groups times rt ranges of tiles. Each tile range reads
 * all the weights of its groups, each group range all the input pixels of its
 * tiles: the cut reading fewer bytes wins. */
static void choose_split(const dc_run *r, int nt, int64_t *rc, int64_t *rt) {
    *rc = *rt = 1;
    if (nt <= 1 || r->g.n >= 2 * nt) return;
    const int64_t want = (2 * nt + r->g.n - 1) / r->g.n;
    const double wbytes = (double)r->cog_stride * (double)r->ncg, xbytes = (double)(r->g.h * r->g.w * r->g.cin);
    int64_t c_only = want < r->ncg ? want : r->ncg, t_only = want < r->tiles ? want : r->tiles;
    double cost_c = wbytes + (double)c_only * xbytes, cost_t = (double)t_only * wbytes + xbytes;
    if (c_only >= want && cost_c <= cost_t) *rc = c_only;
    else if (t_only >= want && cost_t < cost_c) *rt = t_only;
    else {
        *rc = c_only;
        *rt = (want + c_only - 1) / c_only < r->tiles ? (want + c_only - 1) / c_only : r->tiles;
    }
}

int ft_cpu_nchwc_conv2d(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0], *res = dst->src[3];
    dc_run r;
    memset(&r, 0, sizeof r);
    r.g = geom_of(dst);
    const dc_geom *g = &r.g;
    const bool xb_in = (x->flags & FT_TF_NCHWC) != 0;
    const ft_cpu_nchwc_w *pk = dst->extra;
    const bool pk_ok = pk && pk->magic == FT_CPU_NCHWC_W_MAGIC && pk->src == dst->src[1]->data;
    /* the plan's choice between the direct kernel and Winograd (made for the
     * thread count it was packed with) stands when the count changes later;
     * weights packed per call choose as a plan would */
    r.mode = base_mode(g, xb_in);
    if (pk_ok && pk->mode == DC_WINO && r.mode == DC_DENSE && wino_geom(g, xb_in)) r.mode = DC_WINO;
    else if (!(pk_ok && pk->mode == r.mode)) r.mode = pack_mode(g, xb_in);
    if (!ft_cpu_nchwc_conv_ok(dst) || (res && !(res->flags & FT_TF_NCHWC)) || (r.mode == DC_DW && !xb_in) ||
        !ft_tensor_contiguous(x) || !ft_tensor_contiguous(dst) || (res && !ft_tensor_contiguous(res)))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "conv2d: a blocked-channel (NCHWc) plan node the direct "
                                                  "kernel cannot run (%s)", dst->name);
    r.act = FT_PARAMS(dst, ft_params_conv)->act;
    r.cib = (g->cin + C16 - 1) / C16;
    r.ncg = (g->cout + CG - 1) / CG;
    r.tiles = (g->oh * g->ow + NPX_MAX - 1) / NPX_MAX;
    r.wide = !strcmp(ft_cpu_gemm_kern_get()->isa, "avx512");
    r.y = dst->data;
    /* the plan may give the output the residual's buffer (graph/planner.c, when
     * the residual dies here): then y starts as the residual and every chunk
     * accumulates into it. Depthwise reads each residual pixel just before
     * writing it, so it keeps its residual pointer. */
    r.acc = res && res->data == dst->data && r.mode != DC_DW;
    r.res = res && !r.acc ? res->data : NULL;
    const int64_t kk = g->kh * g->kw;
    r.cog_stride = r.mode == DC_ROWS ? kk * g->cin * CG : r.cib * kk * C16 * CG;
    ft_cpu_f32 fb = {0};
    ft_cpu_buf xbuf = {0};
    int st = FT_OK;
    ft_cpu_nchwc_w *own = NULL;
    if (!pk_ok || pk->mode != r.mode) {
        /* not packed at plan time (or for another input layout): per call */
        ft_cpu_f32 fw = {0};
        if (ft_cpu_f32_get(dst->src[1], ft_tensor_contiguous(dst->src[1]), &fw)) goto oom;
        own = packed_make(dst, fw.p, r.mode);
        ft_cpu_f32_release(&fw);
        if (!own) goto oom;
        pk = own;
    }
    r.w = pk->data;
    if (r.mode == DC_WINO) {
        if (dst->src[2] && ft_cpu_f32_get(dst->src[2], dst->src[2]->nb[0] == 1 || dst->src[2]->ne[0] == 1, &fb))
            goto oom;
        const ft_cpu_wino a = {g->n, g->cin, g->cout, g->h, g->w, x->data, r.w, fb.p, r.res, r.y, r.acc, r.act, r.wide};
        st = ft_cpu_wino_run(ctx, &a);
        goto done;
    }
    if (dst->src[2] && ft_cpu_f32_get(dst->src[2], dst->src[2]->nb[0] == 1 || dst->src[2]->ne[0] == 1, &fb))
        goto oom;
    r.bias = fb.p;
    if (xb_in) {
        r.x = x->data;
    } else {
        /* blocks: every block (a partial last one too) takes a whole 16-wide
         * plane, so an image's blocks start 16 x its planes apart (sizing this
         * as the input's numel overran it for a batch of channels off 16) */
        int64_t nx = r.mode == DC_ROWS ? g->n * (g->h + 2 * g->pad) * (g->w + 2 * g->pad) * g->cin
                                       : g->n * r.cib * g->h * g->w * C16;
        float *xs = ft_cpu_buf_get(&xbuf, ft_cpu_scratch_cur(), FT_SCR_STAGE, (size_t)(nx > 0 ? nx : 1) * sizeof(float));
        if (!xs) goto oom;
        if (r.mode == DC_ROWS) ft_cpu_nchwc_stage_hwc(x->data, xs, g->n, g->cin, g->h, g->w, g->pad);
        else ft_cpu_nchwc_stage_blocks(x->data, xs, g->n, g->cin, g->h * g->w);
        r.x = xs;
    }
    /* the weights a tile loop reads in half of L2: all groups over every input
     * block when they fit; else groups over every block (the output of a tile is
     * then written once, and the input re-read per group, the cheaper when the
     * output is the larger); else one group over chunks of blocks (at most
     * TAPS_MAX taps). A narrower last input block is a chunk of its own. */
    const int64_t half_l2 = ft_cpu_gemm_kern_get()->l2 / 2, blk_bytes = kk * C16 * CG * (int64_t)sizeof(float);
    int64_t chunk = r.cib, gc = r.ncg;
    if (blk_bytes * r.cib * r.ncg > half_l2) {
        gc = half_l2 / (blk_bytes * r.cib);
        if (gc < 1) {
            gc = 1;
            chunk = half_l2 / blk_bytes;
        }
    }
    if (chunk * kk > TAPS_MAX) chunk = TAPS_MAX / kk;
    r.chunk = chunk < 1 ? 1 : chunk;
    r.gcogs = gc;
    r.pfw = r.mode == DC_DENSE;
    if (g->cin % C16 && r.cib > 1) {
        r.chunk = r.chunk < r.cib - 1 ? r.chunk : r.cib - 1;
        while ((r.cib - 1) % r.chunk) r.chunk--;
    }
    const bool dw = r.mode == DC_DW;
    const int nt = omp_in_parallel() ? 1 : ft_cpu_threads();
    int64_t rc = 1, rt = 1;
    if (dw) { /* channel blocks are independent: split them, then the tiles */
        const int64_t blocks = g->n * (g->cout / C16);
        rc = 1;
        rt = nt > 1 && blocks < 2 * nt ? (2 * nt + blocks - 1) / blocks : 1;
        if (rt > r.tiles) rt = r.tiles;
    } else {
        choose_split(&r, nt, &rc, &rt);
    }
    const int64_t outer = dw ? g->n * (g->cout / C16) : g->n, tasks = outer * rc * rt;
    const double flops = 2.0 * (double)(g->n * g->oh * g->ow) * (double)g->cout * (double)(dw ? 1 : g->cin) * (double)kk;
#pragma omp parallel num_threads(nt) if (nt > 1 && tasks > 1 && flops > 4e6)
    {
        if (omp_get_thread_num() == 0) ft_cpu_team_note(omp_get_num_threads());
        /* dynamic: on a busy host a descheduled thread's tasks go to the other */
#pragma omp for schedule(dynamic, 1)
        for (int64_t tk = 0; tk < tasks; tk++) {
            const int64_t o = tk / (rc * rt), ci = tk / rt % rc, ti = tk % rt;
            const int64_t t0 = ti * r.tiles / rt, t1 = (ti + 1) * r.tiles / rt;
            if (dw) dw_task(&r, o / (g->cout / C16), o % (g->cout / C16), t0, t1);
            else dc_task(&r, o, ci * r.ncg / rc, (ci + 1) * r.ncg / rc, t0, t1);
        }
    }
    goto done;
oom:
    st = ft_set_error(ctx, FT_ERR_OOM, "conv2d: out of host memory for the blocked-channel kernel's buffers");
done:
    ft_cpu_buf_put(&xbuf);
    ft_cpu_f32_release(&fb);
    ft_cpu_nchwc_w_free(own);
    return st;
}

/*
 * conv_pack.c - the implicit im2col of the CPU convolutions: the GEMM's B
 * slivers ([kc][NR] column slivers, gemm.c) built straight from a
 * convolution's NCHW input (ft_cpu_conv_view), so no K x N column matrix is
 * ever written. Called by the blocked loop of gemm.c once per depth block and
 * column panel.
 */
#include "gemm.h"

#include <string.h>

/* The next row p = (channel, ky, kx) of im2col's K order. */
static inline void next_tap(int64_t *ci, int64_t *ky, int64_t *kx, int64_t kh, int64_t kw) {
    if (++*kx == kw) {
        *kx = 0;
        if (++*ky == kh) {
            *ky = 0;
            ++*ci;
        }
    }
}

#define NR FT_CPU_GEMM_NR

#if defined(__GNUC__) && !defined(__clang__)
/* the fixed-count copies below want the vectoriser */
#pragma GCC optimize("O3")
#endif

/*
 * The implicit im2col: rows p0.. and columns j0.. (global: image j / (OH*OW))
 * of a convolution's op(B) read straight from x into [kc][NR] slivers. A sliver's
 * columns are cut into runs that sit on one output row of one image; on row p
 * (channel, ky, kx) a run reads x with the convolution's stride, a run wholly
 * inside the image is a plain strided copy, one touching the padding is
 * checked element by element. Indices stay integers until they are in range.
 */
void ft_cpu_pack_b_conv(const ft_cpu_conv_view *v, int64_t p0, int64_t j0, int64_t kc, int64_t nc,
                        float *restrict pb) {
    /* the geometry in locals: the float stores below could otherwise alias *v
     * (the build has -fno-strict-aliasing) and force a reload per element */
    const float *restrict x = v->x;
    const int64_t h = v->h, w = v->w, kh = v->kh, kw = v->kw, sw = v->sw, ow = v->ow;
    const int64_t khw = kh * kw, npi = v->oh * ow, hw = h * w;
    for (int64_t s = 0; s < nc; s += NR) {
        int cols = (int)(nc - s < NR ? nc - s : NR);
        float *restrict dst = pb + s * kc;
        int64_t rbase[NR], riy[NR], rix[NR];
        int rc0[NR], rlen[NR], nrun = 0;
        for (int c = 0; c < cols;) {
            int64_t jj = j0 + s + c, b = jj / npi, pos = jj % npi, oy = pos / ow, ox = pos % ow;
            int len = (int)(ow - ox < cols - c ? ow - ox : cols - c);
            riy[nrun] = oy * v->sh - v->ph;
            rix[nrun] = ox * sw - v->pw;
            rbase[nrun] = b * v->x_bstride + riy[nrun] * w + rix[nrun];
            rc0[nrun] = c;
            rlen[nrun++] = len;
            c += len;
        }
        int64_t ci = p0 / khw, ky = (p0 % khw) / kw, kx = p0 % kw;
        if (v->ph == 0 && v->pw == 0 && (v->oh - 1) * v->sh + kh <= h && (ow - 1) * sw + kw <= w) {
            /* no padding (none after either: asymmetric padding can pad only the bottom
             * and right): every tap of every window is inside x, so a row is a
             * gather at fixed offsets from the sliver's window corners (a copy when
             * they are consecutive) */
            int64_t off[NR];
            bool even = cols == NR; /* NR columns at one stride: a strided copy */
            for (int u = 0; u < nrun; u++)
                for (int t = 0; t < rlen[u]; t++) off[rc0[u] + t] = rbase[u] + t * sw;
            for (int c = 1; c < cols; c++) even = even && off[c] == off[0] + c * sw;
            for (int64_t q = 0; q < kc; q++) {
                float *restrict d = dst + q * NR;
                int64_t coff = ci * hw + ky * w + kx;
                if (even && sw == 1) {
                    memcpy(d, x + off[0] + coff, NR * sizeof(float));
                } else if (even && sw == 2) {
                    const float *src = x + off[0] + coff;
                    for (int t = 0; t < NR; t++) d[t] = src[2 * t];
                } else if (even) {
                    const float *src = x + off[0] + coff;
                    for (int t = 0; t < NR; t++) d[t] = src[t * sw];
                } else {
                    int c = 0;
                    for (; c < cols; c++) d[c] = x[off[c] + coff];
                    for (; c < NR; c++) d[c] = 0.0f;
                }
                next_tap(&ci, &ky, &kx, kh, kw);
            }
            continue;
        }
        if (nrun == 1 && cols == NR) {
            /* one run of NR columns: whole slivers copied in the common case */
            const int64_t iy0 = riy[0], ix0 = rix[0], base = rbase[0];
            for (int64_t q = 0; q < kc; q++) {
                float *restrict d = dst + q * NR;
                int64_t iy = iy0 + ky, ix = ix0 + kx, o = base + ci * hw + ky * w + kx;
                if (iy < 0 || iy >= h) {
                    for (int t = 0; t < NR; t++) d[t] = 0.0f;
                } else if (ix >= 0 && ix + (NR - 1) * sw < w) {
                    if (sw == 1) memcpy(d, x + o, NR * sizeof(float));
                    else
                        for (int t = 0; t < NR; t++) d[t] = x[o + t * sw];
                } else {
                    for (int t = 0; t < NR; t++) {
                        int64_t it = ix + t * sw;
                        d[t] = it >= 0 && it < w ? x[o + t * sw] : 0.0f;
                    }
                }
                next_tap(&ci, &ky, &kx, kh, kw);
            }
            continue;
        }
        for (int64_t q = 0; q < kc; q++) {
            float *restrict d = dst + q * NR;
            int64_t coff = ci * hw + ky * w + kx;
            for (int u = 0; u < nrun; u++) {
                float *restrict du = d + rc0[u];
                int len = rlen[u];
                int64_t iy = riy[u] + ky, ix = rix[u] + kx, o = rbase[u] + coff;
                if (iy < 0 || iy >= h) {
                    for (int t = 0; t < len; t++) du[t] = 0.0f;
                } else if (ix >= 0 && ix + (len - 1) * sw < w) {
                    for (int t = 0; t < len; t++) du[t] = x[o + t * sw];
                } else {
                    for (int t = 0; t < len; t++) {
                        int64_t it = ix + t * sw;
                        du[t] = it >= 0 && it < w ? x[o + t * sw] : 0.0f;
                    }
                }
            }
            for (int c = cols; c < NR; c++) d[c] = 0.0f;
            next_tap(&ci, &ky, &kx, kh, kw);
        }
    }
}


/*
 * nchwc_wino.c - Winograd F(2x2, 3x3) for the blocked-channel layout's 3x3,
 * stride 1, padding 1 convolutions (kernels/cpu/nchwc.h).
 *
 * Each 2x2 block of output pixels (a tile) comes from a 4x4 input window d:
 * Y = A^T [ (G g G^T) (.) (B^T d B) ] A. The 16 products (.) of a tile are one
 * GEMM per position p: M[p][tile][co] = sum over ci of V[p][tile][ci] U[p][ci][co],
 * 16 x Cin x Cout multiply-adds for 4 pixels where the direct kernel does
 * 36 x Cin x Cout: 2.25x fewer. The transforms are adds over the 16 channels of
 * a block, one vector in NCHWc, and the GEMMs run on the direct kernel's
 * micro-kernel (ft_cpu_dc_call), with the tiles as its pixels and one input
 * block per tap.
 *
 * Tiles are done in chunks whose V [16][Cin/16][TC][16] and M
 * [16][Cout/16][TC][16] fit twice L2; per chunk three phases, each split over
 * the team: the input transform, the 16 x ceil(Cout/64) GEMM tasks (in the
 * order of the packed weights, so a thread streams one contiguous range of them
 * and prefetches the next task's), and the output transform with the bias,
 * residual and activation.
 *
 * The weights are transformed once per plan (U = G g G^T in double); they take
 * 16/9 of the 3x3 kernel's bytes, which is why a convolution of few tiles and
 * large weights on several threads stays on the direct kernel: there the GEMMs
 * would wait on memory for U (ft_cpu_wino_use's cost model).
 * Rounding differs from the direct sum by a few ulps times the input's
 * magnitude (the transforms add before they multiply); FT_CPU_WINOGRAD=0 turns
 * it off.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "gemm_micro.h"
#include "nchwc.h"
#include "scratch.h"
#include "vrow.h"
#include "../../engine/env.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#define C16 FT_NCHWC
#define CG FT_NCHWC_CG
#define NPX 6 /* tiles per micro-kernel call */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 11 && !defined(__SANITIZE_THREAD__)
#define WI_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WI_CLONES
#endif

/* Below this many tiles a plane is left to the direct kernel outright. */
#define WINO_MIN_TILES 16
/* Where Winograd pays is a cost model of a forward: a convolution takes the
 * longer of reading its weights from memory (U is 16/9 of the direct kernel's
 * weights; counted only past L2, where a forward of a large model finds them
 * cold) and its multiply-adds on `threads` threads (2.25x fewer). On the dev
 * host (AMD EPYC Zen 5) a forward's weights streamed at ~24 GB/s while a
 * thread's GEMMs ran at ~200 GFLOP/s: 0.12 bytes per flop and thread.
 * ResNet-50's batch-1 7 x 7 stage (16 tiles, U 16.8 MB) ran 0.75 ms with it
 * against 1.1 ms direct on 1 thread, but 0.69 against 0.56 ms on 2, where the
 * GEMMs wait on memory; the model picks each (the forward 30.2 -> 29.9 ms on
 * 1 thread with that stage on Winograd, docs/results/2026-11-26-cpu-winograd.md). */
#define WI_BYTES_PER_FLOP 0.12

bool ft_cpu_wino_use(int64_t n, int64_t cin, int64_t cout, int64_t h, int64_t w, int threads) {
    if (cin % C16 || cout % C16 || cin == 0 || cout == 0 || h < 2 || w < 2) return false;
    const int64_t tiles = n * ((h + 1) / 2) * ((w + 1) / 2);
    if (tiles < WINO_MIN_TILES || !ft_env_flag(FT_ENV_CPU_WINOGRAD, true)) return false;
    const double l2 = (double)ft_cpu_gemm_kern_get()->l2, per = WI_BYTES_PER_FLOP / (threads > 0 ? threads : 1);
    const double wb = 16.0 * (double)cin * (double)cout * 4, db = 9.0 * (double)cin * (double)cout * 4;
    const double wf = 2.0 * 16 * (double)tiles * (double)cin * (double)cout;
    const double df = 2.0 * 9 * (double)(n * h * w) * (double)cin * (double)cout;
    const double t_wino = fmax(wb > l2 ? wb : 0, wf * per), t_direct = fmax(db > l2 ? db : 0, df * per);
    return t_wino < t_direct;
}

int64_t ft_cpu_wino_packed_floats(int64_t cin, int64_t cout) {
    return 16 * ((cout + CG - 1) / CG) * (cin / C16) * C16 * CG;
}

void ft_cpu_wino_pack(int64_t cin, int64_t cout, const float *w, float *out) {
    static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    const int64_t cib = cin / C16, ncg = (cout + CG - 1) / CG, cog_stride = cib * C16 * CG;
    memset(out, 0, (size_t)ft_cpu_wino_packed_floats(cin, cout) * sizeof(float));
    for (int64_t co = 0; co < cout; co++)
        for (int64_t ci = 0; ci < cin; ci++) {
            const float *g = w + (co * cin + ci) * 9;
            double t[4][3]; /* G g */
            for (int i = 0; i < 4; i++)
                for (int k = 0; k < 3; k++) t[i][k] = G[i][0] * g[k] + G[i][1] * g[3 + k] + G[i][2] * g[6 + k];
            for (int i = 0; i < 4; i++)
                for (int l = 0; l < 4; l++) {
                    const double u = t[i][0] * G[l][0] + t[i][1] * G[l][1] + t[i][2] * G[l][2];
                    const int64_t p = i * 4 + l;
                    out[(p * ncg + co / CG) * cog_stride + ci * CG + co % CG] = (float)u;
                }
        }
}

typedef struct wi_run {
    const ft_cpu_wino *a;
    int64_t cib, cob, ncg, th, tw, tiles; /* tiles per image: th x tw */
    int64_t tc;                            /* tiles per chunk */
    float *v, *m;                          /* V [16][cib][tc][16], M [16][cob][tc][16] */
} wi_run;

/* The transforms on gcc's generic vectors, one per 16 channels and every index
 * a constant after unrolling, so a tile's 16 values stay in registers: written
 * on float arrays (memcpy in, loops of 16 out) they went through the stack
 * twice and took 30% of a 64-channel 56 x 56 convolution. */
typedef float wi_v __attribute__((vector_size(64), aligned(4)));
#define WI_LD(p) (*(const wi_v *)(p))
#define WI_ST(p, v) (*(wi_v *)(p) = (v))
#define WI_BC(s) ((wi_v){s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s})

/* B^T d B for tile gt (global: image gt / tiles) and input block cb, into
 * V[p][cb][j] (j: the tile's place in its chunk). */
WI_CLONES static void wi_input(const wi_run *r, int64_t gt, int64_t j, int64_t cb) {
    const ft_cpu_wino *a = r->a;
    const int64_t n = gt / r->tiles, t = gt % r->tiles, y0 = t / r->tw * 2 - 1, x0 = t % r->tw * 2 - 1;
    const float *xb = a->x + (n * r->cib + cb) * a->h * a->w * C16;
    wi_v d[4][4];
    if (y0 >= 0 && x0 >= 0 && y0 + 4 <= a->h && x0 + 4 <= a->w) {
        const float *x = xb + (y0 * a->w + x0) * C16;
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) d[i][k] = WI_LD(x + (i * a->w + k) * C16);
    } else {
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const int64_t iy = y0 + i, ix = x0 + k;
                d[i][k] = iy >= 0 && iy < a->h && ix >= 0 && ix < a->w ? WI_LD(xb + (iy * a->w + ix) * C16)
                                                                         : (wi_v){0};
            }
    }
    const int64_t ps = r->cib * r->tc * C16;
    float *v = r->v + (cb * r->tc + j) * C16;
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const wi_v u0 = d[0][k] - d[2][k], u1 = d[1][k] + d[2][k], u2 = d[2][k] - d[1][k], u3 = d[1][k] - d[3][k];
        d[0][k] = u0;
        d[1][k] = u1;
        d[2][k] = u2;
        d[3][k] = u3;
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        float *vi = v + i * 4 * ps;
        WI_ST(vi, d[i][0] - d[i][2]);
        WI_ST(vi + ps, d[i][1] + d[i][2]);
        WI_ST(vi + 2 * ps, d[i][2] - d[i][1]);
        WI_ST(vi + 3 * ps, d[i][1] - d[i][3]);
    }
}

/* A^T M A for tile gt and output block ob, + bias, + residual, activation, into
 * the pixels of y the tile covers. */
WI_CLONES static void wi_output(const wi_run *r, int64_t gt, int64_t j, int64_t ob) {
    const ft_cpu_wino *a = r->a;
    const int64_t n = gt / r->tiles, t = gt % r->tiles, y0 = t / r->tw * 2, x0 = t % r->tw * 2;
    const int64_t ps = r->cob * r->tc * C16;
    const float *m = r->m + (ob * r->tc + j) * C16;
    wi_v s0[4], s1[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const wi_v m0 = WI_LD(m + k * ps), m1 = WI_LD(m + (4 + k) * ps), m2 = WI_LD(m + (8 + k) * ps),
                   m3 = WI_LD(m + (12 + k) * ps);
        s0[k] = m0 + m1 + m2;
        s1[k] = m1 - m2 - m3;
    }
    const wi_v b = a->bias ? WI_LD(a->bias + ob * C16) : (wi_v){0};
    wi_v o[2][2] = {{s0[0] + s0[1] + s0[2] + b, s0[1] - s0[2] - s0[3] + b},
                    {s1[0] + s1[1] + s1[2] + b, s1[1] - s1[2] - s1[3] + b}};
    const int64_t plane = (n * r->cob + ob) * a->h * a->w;
    const bool relu = a->act == FT_ACT_RELU;
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
#pragma GCC unroll 2
        for (int k = 0; k < 2; k++) {
            const int64_t oy = y0 + i, ox = x0 + k;
            if (oy >= a->h || ox >= a->w) continue;
            const int64_t off = (plane + oy * a->w + ox) * C16;
            float *yo = a->y + off;
            const float *ro = a->acc ? yo : a->res ? a->res + off : NULL;
            wi_v v = o[i][k];
            if (ro) v += WI_LD(ro);
            /* zero where v <= 0 (-0 too); a NaN compares false and stays */
            if (relu) v = (wi_v)((__typeof__(v <= 0.0f))v & ~(v <= 0.0f));
            WI_ST(yo, v);
            if (a->act != FT_ACT_NONE && !relu) ft_cpu_row_act(a->act, yo, C16);
        }
}

/* GEMM task k = p * ncg + cog: M[p][cog's blocks][0 .. nt) = V[p] x U[p][cog],
 * NPX tiles a call; its share of the next task's weights (the next range of U)
 * prefetched to L2 over the calls. */
static void wi_gemm(const wi_run *r, int64_t k, int64_t ntl) {
    const ft_cpu_wino *a = r->a;
    const int64_t p = k / r->ncg, cog = k % r->ncg, cog_stride = r->cib * C16 * CG;
    const int ncb = (int)(r->cob - cog * 4 < 4 ? r->cob - cog * 4 : 4);
    const float *wp[1] = {a->u + p * r->ncg * cog_stride};
    const float *next = a->u + (k + 1) * cog_stride, *uend = a->u + 16 * r->ncg * cog_stride;
    const int64_t calls = (ntl + NPX - 1) / NPX, pfn = (CG + calls - 1) / calls; /* lines per tap */
    for (int64_t j0 = 0, c = 0; j0 < ntl; j0 += NPX, c++) {
        const int npx = (int)(ntl - j0 < NPX ? ntl - j0 : NPX);
        const float *xp[NPX];
        for (int j = 0; j < npx; j++) xp[j] = r->v + ((p * r->cib) * r->tc + j0 + j) * C16;
        const float *pf = next + c * pfn * r->cib * 16;
        const bool dopf = pf < uend && pf < next + cog_stride;
        ft_cpu_dc_taps tp = {1, (int)r->cib, C16, dopf ? (int)pfn : 0, 0, xp, wp, r->tc * C16, C16 * CG, 0, 0,
                             dopf ? pf : NULL, NULL};
        float *y = r->m + ((p * r->cob + cog * 4) * r->tc + j0) * C16;
        ft_cpu_dc_call(a->wide, npx, ncb, &tp, cog * cog_stride, y, r->tc * C16, NULL, NULL,
                       FT_DC_FIRST | FT_DC_LAST);
    }
}

int ft_cpu_wino_run(ft_ctx *ctx, const ft_cpu_wino *a) {
    wi_run r = {.a = a, .cib = a->cin / C16, .cob = a->cout / C16, .ncg = (a->cout + CG - 1) / CG,
                .th = (a->h + 1) / 2, .tw = (a->w + 1) / 2};
    r.tiles = r.th * r.tw;
    const int64_t total = a->n * r.tiles, per_tile = 16 * C16 * (r.cib + r.cob) * (int64_t)sizeof(float);
    /* V and M of a chunk in twice L2; but every chunk reads all of U, so a U
     * larger than that (stage 4: 16.7 MB) takes chunks as large as U instead */
    const int64_t ubytes = ft_cpu_wino_packed_floats(a->cin, a->cout) * (int64_t)sizeof(float),
                  l2x2 = 2 * ft_cpu_gemm_kern_get()->l2;
    int64_t tcmax = (ubytes > l2x2 ? ubytes : l2x2) / per_tile;
    if (tcmax < NPX) tcmax = NPX;
    const int64_t chunks = (total + tcmax - 1) / tcmax;
    r.tc = (total + chunks - 1) / chunks;
    if (chunks > 1) r.tc = (r.tc + NPX - 1) / NPX * NPX; /* whole micro-kernel calls */
    ft_cpu_buf buf = {0};
    float *s = ft_cpu_buf_get(&buf, ft_cpu_scratch_cur(), FT_SCR_STAGE, (size_t)(r.tc * per_tile));
    if (!s) return ft_set_error(ctx, FT_ERR_OOM, "conv2d: out of host memory for the Winograd kernel's buffers");
    r.v = s;
    r.m = s + 16 * r.cib * r.tc * C16;
    const int nt = omp_in_parallel() ? 1 : ft_cpu_threads();
    const int64_t gemms = 16 * r.ncg;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        if (omp_get_thread_num() == 0) ft_cpu_team_note(omp_get_num_threads());
        for (int64_t c0 = 0; c0 < total; c0 += r.tc) {
            const int64_t ntl = total - c0 < r.tc ? total - c0 : r.tc;
#pragma omp for schedule(static)
            for (int64_t q = 0; q < ntl * r.cib; q++) wi_input(&r, c0 + q / r.cib, q / r.cib, q % r.cib);
#pragma omp for schedule(static)
            for (int64_t k = 0; k < gemms; k++) wi_gemm(&r, k, ntl);
#pragma omp for schedule(static)
            for (int64_t q = 0; q < ntl * r.cob; q++) wi_output(&r, c0 + q / r.cob, q / r.cob, q % r.cob);
        }
    }
    ft_cpu_buf_put(&buf);
    return FT_OK;
}

/*
 * nchwc.h - the CPU backend's blocked-channel layout (NCHWc) and its kernels
 * (kernels/cpu/nchwc_conv.c, nchwc_wino.c, nchwc_ops.c). Internal to kernels/cpu.
 *
 * A tensor of logical shape [N, C, H, W] (C a multiple of 16) flagged
 * FT_TF_NCHWC holds its data as [N, C/16, H, W, 16]: the 16 channels of a pixel
 * side by side, one AVX-512 vector (two AVX2 ones). Same element count and
 * bytes as NCHW, so the memory plan does not change; the shape and strides
 * still describe NCHW, and only the kernels below (and the copy kernel, which
 * reorders between the two) may read or write such a tensor. Only graph and
 * static plans on the CPU make them (graph/pass_nchwc.c); eager mode and CUDA
 * never see one.
 */
#ifndef FT_CPU_NCHWC_H
#define FT_CPU_NCHWC_H

#include "../../engine/ft_internal.h"

#include <stdbool.h>
#include <stdint.h>

#define FT_NCHWC 16    /* channels per block */
#define FT_NCHWC_CG 64 /* output channels per group of the direct convolution's weights */

/* A convolution weight packed for the direct NCHWc kernel (node->extra):
 * dense: [ceil(Cout/64)][ceil(Cin/16)][KH][KW][16 ci][64 co], zero-padded;
 * window rows (an NCHW input of under 16 channels): [ceil(Cout/64)][KH][KW * Cin][64];
 * depthwise: [C/16][KH][KW][16]. */
typedef struct ft_cpu_nchwc_w {
    uint32_t magic;
    int64_t cout, cin, kh, kw, groups;
    int mode;        /* the layout (nchwc_conv.c: dense, window rows, depthwise) */
    const void *src; /* the weight data it was packed from (a consistency check) */
    float *data;
} ft_cpu_nchwc_w;

#define FT_CPU_NCHWC_W_MAGIC 0x4357434eu /* "NCWC" */
#define FT_CPU_NCHWC_MODE_WINO 3         /* ft_cpu_nchwc_w.mode of Winograd's weights */

/* What one call of the direct convolution's micro-kernel (nchwc_conv.c) reads,
 * shared with the Winograd convolution's GEMMs (nchwc_wino.c): ntaps window taps
 * (per tap NPX pixel pointers xp[t][j] into input block 0 of the chunk, or a
 * block of zeros in the padding, and the tap's weights wp[t]) repeated for nblk
 * input blocks, block k's pixels xbs floats on from block 0's (the zero block
 * stays) and its weights wbs floats on; per tap, pfn lines prefetched from pf on
 * (weights, to L2) and xqn lines xql floats apart from xq, which then steps xqs
 * floats (a 1x1 convolution's input for the tile after next, one block per tap,
 * to L1). Working the blocks out in the kernel, not in a table per block, took a
 * tile's table building (5-8% of a convolution) to one window. */
typedef struct ft_cpu_dc_taps {
    int ntaps, nblk, nci, pfn, xqn;
    const float *const *xp, *const *wp;
    int64_t xbs, wbs, xqs, xql;
    const float *pf, *xq;
} ft_cpu_dc_taps;

enum { FT_DC_FIRST = 1, FT_DC_LAST = 2, FT_DC_RELU = 4 };

/* y[b][j][c] (+)= sum over taps t and input channels ci < nci of
 * xp[t][j][ci] * wp[t][ci * 64 + wo + b * 16 + c], for npx <= 6 pixels j and
 * ncb <= 4 blocks b of 16 output channels; block b of y at y + b * ys. mode:
 * FT_DC_FIRST (y not read), FT_DC_LAST (then + bias[b*16 + c] +
 * res[b * ys + j * 16 + c], and ReLU with FT_DC_RELU). wide: the AVX-512 kernels
 * (64 channels a call), else 16 at a time. */
void ft_cpu_dc_call(bool wide, int npx, int ncb, const ft_cpu_dc_taps *tp, int64_t wo, float *y, int64_t ys,
                    const float *bias, const float *res, int mode);

/* Winograd F(2x2, 3x3) (nchwc_wino.c) for a 3x3, stride 1, padding 1, groups 1
 * convolution of an NCHWc input: 16 GEMMs over 2x2-pixel output tiles, 2.25x
 * fewer multiply-adds than the direct kernel, for 16/9 of its weight bytes:
 * whether it is the faster for a convolution run by `threads` threads (a cost
 * model, nchwc_wino.c). FT_CPU_WINOGRAD=0 in the environment turns it off
 * (read when a plan packs its weights; the direct kernel then runs every
 * convolution). */
bool ft_cpu_wino_use(int64_t n, int64_t cin, int64_t cout, int64_t h, int64_t w, int threads);
/* floats of the transformed weights: [16 positions][ceil(Cout/64)][Cin/16][16 ci][64 co] */
int64_t ft_cpu_wino_packed_floats(int64_t cin, int64_t cout);
/* w [Cout, Cin, 3, 3] -> out (the layout above, zero-padded to 64 output channels) */
void ft_cpu_wino_pack(int64_t cin, int64_t cout, const float *w, float *out);
typedef struct ft_cpu_wino {
    int64_t n, cin, cout, h, w; /* the output is h x w, as the input */
    const float *x;             /* NCHWc [N][Cin/16][H][W][16] */
    const float *u;             /* ft_cpu_wino_pack's weights */
    const float *bias, *res;    /* bias [Cout] or NULL; residual NCHWc or NULL */
    float *y;                   /* NCHWc [N][Cout/16][H][W][16] */
    bool acc;                   /* y holds the residual (the planner's in-place output) */
    int act;
    bool wide;
} ft_cpu_wino;
/* FT_OK, or FT_ERR_OOM (set on ctx) when its buffers cannot be had. */
int ft_cpu_wino_run(ft_ctx *ctx, const ft_cpu_wino *a);

/* Whether the direct NCHWc convolution runs this conv2d node (the layout pass
 * asks before flagging it): f32, groups 1 (Cout a multiple of 16) or depthwise
 * (groups = Cin = Cout, a multiple of 16), no input prologue or weight-with-bias
 * operand. */
bool ft_cpu_nchwc_conv_ok(const ft_tensor *conv);
/* Packs node's weight for the direct kernel into node->extra; false when it
 * could not (then the kernel packs per call). */
bool ft_cpu_nchwc_conv_prepack(ft_tensor *node);
void ft_cpu_nchwc_w_free(ft_cpu_nchwc_w *w);
/* Whether node's plan-time weights are Winograd's (ftengine plan marks the step,
 * ft_graph_stats.winograd_convs counts them). */
bool ft_cpu_nchwc_conv_is_wino(const ft_tensor *node);

/* conv2d whose output is NCHWc (dst flagged); the input may be either layout,
 * the residual (src[3]) has the output's. */
int ft_cpu_nchwc_conv2d(ft_ctx *ctx, ft_tensor *dst);
/* maxpool2d, NCHWc in and out. */
int ft_cpu_nchwc_maxpool2d(ft_ctx *ctx, ft_tensor *dst);
/* global_avgpool of an NCHWc input; the output [N, C, 1, 1] is the same in both layouts. */
int ft_cpu_nchwc_global_avgpool(ft_ctx *ctx, ft_tensor *dst);
/* The direct convolution's staging of an NCHW input: blocks of 16 channels
 * [N][ceil(C/16)][HW][bw] (bw = 16, or C % 16 in a last partial block, each
 * block a whole 16-wide plane apart), or zero-padded HWC [N][H+2p][W+2p][C]. */
void ft_cpu_nchwc_stage_blocks(const float *x, float *out, int64_t n, int64_t c, int64_t hw);
void ft_cpu_nchwc_stage_hwc(const float *x, float *out, int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad);
/* f32 [N, C, H, W] between layouts: to_blocked NCHW -> NCHWc, else back. */
void ft_cpu_nchwc_reorder(const float *src, float *dst, int64_t n, int64_t c, int64_t hw, bool to_blocked);

#endif /* FT_CPU_NCHWC_H */

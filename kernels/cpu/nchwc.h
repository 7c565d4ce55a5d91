/*
 * nchwc.h - the CPU backend's blocked-channel layout (NCHWc) and its kernels
 * (kernels/cpu/nchwc_conv.c, nchwc_ops.c). Internal to kernels/cpu.
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

/* Whether the direct NCHWc convolution runs this conv2d node (the layout pass
 * asks before flagging it): f32, groups 1 (Cout a multiple of 16) or depthwise
 * (groups = Cin = Cout, a multiple of 16), no input prologue or weight-with-bias
 * operand. */
bool ft_cpu_nchwc_conv_ok(const ft_tensor *conv);
/* Packs node's weight for the direct kernel into node->extra; false when it
 * could not (then the kernel packs per call). */
bool ft_cpu_nchwc_conv_prepack(ft_tensor *node);
void ft_cpu_nchwc_w_free(ft_cpu_nchwc_w *w);

/* conv2d whose output is NCHWc (dst flagged); the input may be either layout,
 * the residual (src[3]) has the output's. */
int ft_cpu_nchwc_conv2d(ft_ctx *ctx, ft_tensor *dst);
/* maxpool2d, NCHWc in and out. */
int ft_cpu_nchwc_maxpool2d(ft_ctx *ctx, ft_tensor *dst);
/* global_avgpool of an NCHWc input; the output [N, C, 1, 1] is the same in both layouts. */
int ft_cpu_nchwc_global_avgpool(ft_ctx *ctx, ft_tensor *dst);
/* f32 [N, C, H, W] between layouts: to_blocked NCHW -> NCHWc, else back. */
void ft_cpu_nchwc_reorder(const float *src, float *dst, int64_t n, int64_t c, int64_t hw, bool to_blocked);

#endif /* FT_CPU_NCHWC_H */

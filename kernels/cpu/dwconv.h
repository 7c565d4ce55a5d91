/*
 * dwconv.h - the CPU depthwise convolution's plane interface (kernels/cpu/dwconv.c):
 * one channel plane of one image, through a caller-supplied f32 buffer. The op
 * (ft_cpu_dwconv2d) spreads planes over threads; another layout (blocked
 * channels) can call the plane routine on its own planes. Internal to kernels/cpu.
 */
#ifndef FT_CPU_DWCONV_H
#define FT_CPU_DWCONV_H

#include "../../engine/ft_internal.h"

#include <stdbool.h>
#include <stdint.h>

/* the largest filter the plane routine takes (15 x 15) */
#define FT_CPU_DW_MAX_TAPS 225

/* the geometry shared by every plane of a call: the first block is the caller's,
 * the rest ft_cpu_dw_prepare derives from it (once per call, not per plane) */
typedef struct ft_cpu_dw_geom {
    int64_t h, w;     /* input plane */
    int64_t kh, kw;   /* filter */
    int64_t oh, ow;   /* output plane */
    int64_t stride, dil;
    int64_t pt, pl;   /* zero padding before the first row / column (the bottom and right
                         padding follow from oh, ow) */
    /* derived */
    int64_t hq, wq;   /* rows and columns of each phase buffer */
    int64_t rb;       /* output rows per accumulator block */
    int64_t j0[16], j1[16]; /* per column phase: its columns [j0, j1) that lie inside x (stride <= 16) */
    int64_t toff[FT_CPU_DW_MAX_TAPS]; /* per tap: its offset in the phase buffers */
} ft_cpu_dw_geom;

/* one plane: where its input, filter, epilogue operands and output are */
typedef struct ft_cpu_dw_io {
    const void *x;      /* input tensor data, dtype xt; the plane starts at element x_off, rows of w */
    ft_dtype xt;
    int64_t x_off;
    const float *w;     /* [kh * kw] filter, f32 */
    float bias;         /* output bias */
    float bin;          /* input prologue: x read as act_in(x + bin) where bin_set or act_in */
    bool bin_set;
    int act_in, act;    /* ft_act of the prologue and of the epilogue */
    const float *res;   /* residual plane [oh * ow] (f32) or NULL */
    void *y;            /* output tensor data, dtype yt; the plane starts at element y_off */
    ft_dtype yt;
    int64_t y_off;
} ft_cpu_dw_io;

/* Fills g's derived fields; false when the geometry is out of the routine's range
 * (more than FT_CPU_DW_MAX_TAPS taps, a stride over 16). */
bool ft_cpu_dw_prepare(ft_cpu_dw_geom *g);
/* floats of the buffer ft_cpu_dw_plane needs for a prepared geometry g */
int64_t ft_cpu_dw_plane_floats(const ft_cpu_dw_geom *g);
/* y = act(dwconv(act_in(x + bin)) + bias + res) for one plane; buf holds
 * ft_cpu_dw_plane_floats(g) floats */
void ft_cpu_dw_plane(const ft_cpu_dw_geom *g, const ft_cpu_dw_io *io, float *buf);

#endif /* FT_CPU_DWCONV_H */

/*
 * cpu_common.h - helpers shared by the CPU reference kernels of data movement,
 * elementwise ops, reductions and normalisations: typed element loads and
 * rounding stores, N-d row/offset arithmetic for strided and broadcast
 * operands, and the scalar activation functions. Internal to kernels/cpu.
 *
 * The kernels walk their output as "rows" (every dim but the last) and each
 * operand as a row offset plus an inner stride, so any stride pattern (views,
 * broadcasts with stride 0) costs one offset computation per row, not per
 * element.
 */
#ifndef FT_CPU_COMMON_H
#define FT_CPU_COMMON_H

#include "../../engine/ft_internal.h"

#include <math.h>
#include <stdint.h>

/* Parallelise a loop only when it has at least this many elements of work:
 * below it the OpenMP fork costs more than it saves. */
#define FT_CPU_PAR_MIN 32768

/* Element i (in elements from base) of a tensor of dtype t, as f32. Integer
 * dtypes are converted (used by COPY from ints to floats). */
static inline float ft_cpu_load(const void *base, ft_dtype t, int64_t i) {
    switch (t) {
    case FT_DTYPE_F32: return ((const float *)base)[i];
    case FT_DTYPE_F16: return ft_f16_to_f32(((const uint16_t *)base)[i]);
    case FT_DTYPE_BF16: return ft_bf16_to_f32(((const uint16_t *)base)[i]);
    case FT_DTYPE_I64: return (float)((const int64_t *)base)[i];
    case FT_DTYPE_I32: return (float)((const int32_t *)base)[i];
    default: return 0.0f;
    }
}

/* Stores v rounded to dtype t (round to nearest even for f16/bf16). */
static inline void ft_cpu_store(void *base, ft_dtype t, int64_t i, float v) {
    switch (t) {
    case FT_DTYPE_F32: ((float *)base)[i] = v; break;
    case FT_DTYPE_F16: ((uint16_t *)base)[i] = ft_f32_to_f16(v); break;
    case FT_DTYPE_BF16: ((uint16_t *)base)[i] = ft_f32_to_bf16(v); break;
    default: break;
    }
}

/* v as it would read back after a store in dtype t: the rounding an unfused
 * op applies to its output. */
static inline float ft_cpu_round(ft_dtype t, float v) {
    switch (t) {
    case FT_DTYPE_F16: return ft_f16_to_f32(ft_f32_to_f16(v));
    case FT_DTYPE_BF16: return ft_bf16_to_f32(ft_f32_to_bf16(v));
    default: return v;
    }
}

/* Integer element i of an i64 or i32 tensor. */
static inline int64_t ft_cpu_load_int(const void *base, ft_dtype t, int64_t i) {
    return t == FT_DTYPE_I64 ? ((const int64_t *)base)[i] : (int64_t)((const int32_t *)base)[i];
}

/* Length of the last dim (1 for a 0-d tensor) and the number of rows. */
static inline int64_t ft_cpu_cols(int ndim, const int64_t *ne) { return ndim > 0 ? ne[ndim - 1] : 1; }

static inline int64_t ft_cpu_rows(int ndim, const int64_t *ne) {
    int64_t r = 1;
    for (int i = 0; i + 1 < ndim; i++) r *= ne[i];
    return r;
}

/* Offset in elements of row `row` (row-major over dims 0..ndim-2 of ne) for a
 * tensor with strides nb. */
static inline int64_t ft_cpu_row_offset(int ndim, const int64_t *ne, const int64_t *nb, int64_t row) {
    int64_t off = 0;
    for (int i = ndim - 2; i >= 0; i--) {
        off += (row % ne[i]) * nb[i];
        row /= ne[i];
    }
    return off;
}

/* Strides of t seen through a broadcast to a shape of `ndim` dims (aligned on
 * the right): 0 for dims t lacks or holds with size 1. */
static inline void ft_cpu_bcast_strides(const ft_tensor *t, int ndim, int64_t *nb) {
    for (int i = 0; i < ndim; i++) {
        int j = i - (ndim - t->ndim);
        nb[i] = (j >= 0 && t->ne[j] != 1) ? t->nb[j] : 0;
    }
}

/* True if t's shape broadcasts to the ndim/ne shape (right-aligned). */
static inline int ft_cpu_bcast_ok(const ft_tensor *t, int ndim, const int64_t *ne) {
    if (t->ndim > ndim) return 0;
    for (int i = 0; i < t->ndim; i++) {
        int64_t a = t->ne[t->ndim - 1 - i], b = ne[ndim - 1 - i];
        if (a != b && a != 1) return 0;
    }
    return 1;
}

/* The unary activations, by op (FT_OP_GELU ... FT_OP_SIGMOID, RELU6, SILU), in double so
 * the reference is exact to f32 rounding. */
static inline float ft_cpu_unary_op(int op, float xf) {
    double x = xf;
    switch (op) {
    case FT_OP_GELU: return (float)(0.5 * x * (1.0 + erf(x * 0.70710678118654752440)));
    case FT_OP_GELU_TANH: {
        const double k = 0.79788456080286535588; /* sqrt(2/pi) */
        return (float)(0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x))));
    }
    case FT_OP_TANH: return (float)tanh(x);
    case FT_OP_RELU: return xf > 0.0f ? xf : (xf == xf ? 0.0f : xf); /* NaN stays NaN */
    case FT_OP_SIGMOID: return (float)(1.0 / (1.0 + exp(-x)));
    case FT_OP_RELU6: return xf != xf ? xf : xf < 0.0f ? 0.0f : xf > 6.0f ? 6.0f : xf; /* NaN stays NaN */
    case FT_OP_SILU: return (float)(x / (1.0 + exp(-x)));
    default: return xf;
    }
}

/* a (op) b for FT_OP_ADD/SUB/MUL/DIV. */
static inline float ft_cpu_binary_op(int op, float a, float b) {
    switch (op) {
    case FT_OP_ADD: return a + b;
    case FT_OP_SUB: return a - b;
    case FT_OP_MUL: return a * b;
    case FT_OP_DIV: return a / b;
    default: return a;
    }
}

/* A kernel's output must be the contiguous tensor shape inference made. */
static inline int ft_cpu_need_contiguous(ft_ctx *ctx, const ft_tensor *t, const char *what) {
    if (!ft_tensor_contiguous(t))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "%s is not contiguous", what);
    return FT_OK;
}

#endif /* FT_CPU_COMMON_H */

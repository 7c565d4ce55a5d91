/*
 * vrow.h - the vectorised row primitives of the CPU backend (kernels/cpu/vrow.c):
 * dtype-specialised row loads/stores (a row of f16/bf16/int is converted to
 * f32 once, by a loop chosen per dtype, never by a per-element switch) and
 * f32 row maps (activations, binary ops, scale, softmax, normalisation) built
 * on vmath.h. Each is compiled for AVX-512, AVX2+FMA and baseline x86-64 and
 * the widest the CPU has is picked at load time, like the GEMM micro-kernel.
 * Internal to kernels/cpu.
 */
#ifndef FT_CPU_VROW_H
#define FT_CPU_VROW_H

#include "../../engine/ft_internal.h"

#include <float.h>
#include <stdint.h>

/* Elements per row chunk of the elementwise kernels: the f32 staging of a chunk
 * of every operand stays in L1. */
#define FT_CPU_CHUNK 1024

/* out[j] = element off + j*stride of a tensor of dtype t, as f32, j < n. */
void ft_cpu_row_load(const void *base, ft_dtype t, int64_t off, int64_t stride, int64_t n,
                     float *out);
/* elements off .. off+n-1 of a float tensor of dtype t = in, rounded to t. */
void ft_cpu_row_store(void *base, ft_dtype t, int64_t off, int64_t n, const float *in);

/* y = act(y) for an ft_act (FT_ACT_NONE: nothing). */
void ft_cpu_row_act(int act, float *y, int64_t n);
/* acc = acc (op) v, or v (op) acc when swap; op is FT_OP_ADD/SUB/MUL/DIV. */
void ft_cpu_row_binary(int op, float *acc, const float *v, int64_t n, int swap);
/* y = y * alpha + beta */
void ft_cpu_row_scale(float *y, int64_t n, float alpha, float beta);
/* y = act(y + bias[j] + bs) (bias may be NULL) */
void ft_cpu_row_bias_act(float *y, int64_t n, const float *bias, float bs, int act);
/* s = softmax(s) in place, max-subtracted; a NaN or +inf anywhere, or a row all
 * -inf, gives a row of NaN (as PyTorch). */
void ft_cpu_row_softmax(float *s, int64_t n);
/* h = (h - mean) / sqrt(var + eps) * g + b in place (g, b may be NULL), the
 * statistics in double over the row (two passes over the cache-resident row). */
void ft_cpu_row_norm(float *h, int64_t d, double eps, const float *g, const float *b);

/* The causal replacement of Hugging Face's GPT-2 on the score row of query i
 * (scores [..., Sq, Sk], off = Sk - Sq): keys j > i + off get finfo(float32).min,
 * before any mask is added. */
static inline void ft_cpu_causal_row(float *s, int64_t n, int64_t i, int64_t off) {
    int64_t j0 = i + off + 1;
    for (int64_t j = j0 < 0 ? 0 : j0; j < n; j++) s[j] = -FLT_MAX;
}

#endif /* FT_CPU_VROW_H */

/*
 * vrow.c - the vectorised row primitives of the CPU backend (see vrow.h).
 *
 * Plain C loops under `#pragma omp simd` over the branch-free math of vmath.h;
 * gcc vectorises them at -O2 with the optimisation pragma below. On x86-64
 * each entry point is cloned for x86-64-v4 (AVX-512) and x86-64-v3 (AVX2+FMA)
 * and the loader's ifunc resolver picks the widest the CPU has, the scheme
 * gemm.c uses for its micro-kernel; other targets get the portable build.
 */
#include "vrow.h"

#include "vmath.h"

#include <math.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 11 && \
    !defined(__SANITIZE_THREAD__)
/* (not under ThreadSanitizer: it instruments the clones' ifunc resolver, which
 * the dynamic loader runs before the sanitizer's runtime is up) */
#define FT_VCLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FT_VCLONES
#endif

#if defined(__GNUC__) && !defined(__clang__)
/* -std=c11 turns FMA contraction off; the polynomials want it. No trapping math:
 * the branch-free selects may then be if-converted (nothing here reads the FP
 * exception flags; NaN and inf still propagate as IEEE says) */
#pragma GCC optimize("O3", "fp-contract=fast", "no-trapping-math")
#endif

/* f16 bits to f32 without a branch: the magnitude shifted into an f32 and scaled by
 * 2^112 is exact for normals and subnormals; inf/NaN keep their payload. */
static inline float f16_to_f32(uint16_t h) {
    uint32_t mag = (uint32_t)(h & 0x7fffu) << 13;
    float v = ft_vm_from_bits(mag) * 5.192296858534828e+33f; /* 2^112 */
    uint32_t bits = (h & 0x7c00u) == 0x7c00u ? (0x7f800000u | mag) : ft_vm_to_bits(v);
    return ft_vm_from_bits(bits | (uint32_t)(h & 0x8000u) << 16);
}

/* f32 to bf16, nearest even, NaN kept quiet (as ft_f32_to_bf16) */
static inline uint16_t f32_to_bf16(float f) {
    uint32_t x = ft_vm_to_bits(f);
    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t q = (x >> 16) | 0x40u;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? q : r);
}

FT_VCLONES
void ft_cpu_row_load(const void *base, ft_dtype t, int64_t off, int64_t stride, int64_t n,
                     float *out) {
    switch (t) {
    case FT_DTYPE_F32: {
        const float *s = (const float *)base + off;
        if (stride == 1) {
            memcpy(out, s, (size_t)n * sizeof(float));
        } else if (stride == 0) {
            float v = s[0];
#pragma omp simd
            for (int64_t j = 0; j < n; j++) out[j] = v;
        } else {
            for (int64_t j = 0; j < n; j++) out[j] = s[j * stride];
        }
        break;
    }
    case FT_DTYPE_F16: {
        const uint16_t *s = (const uint16_t *)base + off;
#pragma omp simd
        for (int64_t j = 0; j < n; j++) out[j] = f16_to_f32(s[j * stride]);
        break;
    }
    case FT_DTYPE_BF16: {
        const uint16_t *s = (const uint16_t *)base + off;
#pragma omp simd
        for (int64_t j = 0; j < n; j++) out[j] = ft_vm_from_bits((uint32_t)s[j * stride] << 16);
        break;
    }
    case FT_DTYPE_I64: {
        const int64_t *s = (const int64_t *)base + off;
        for (int64_t j = 0; j < n; j++) out[j] = (float)s[j * stride];
        break;
    }
    case FT_DTYPE_I32: {
        const int32_t *s = (const int32_t *)base + off;
        for (int64_t j = 0; j < n; j++) out[j] = (float)s[j * stride];
        break;
    }
    default:
        for (int64_t j = 0; j < n; j++) out[j] = 0.0f;
    }
}

FT_VCLONES
void ft_cpu_row_store(void *base, ft_dtype t, int64_t off, int64_t n, const float *in) {
    switch (t) {
    case FT_DTYPE_F32:
        if ((const float *)base + off != in) memcpy((float *)base + off, in, (size_t)n * sizeof(float));
        break;
    case FT_DTYPE_F16: {
        uint16_t *d = (uint16_t *)base + off;
        for (int64_t j = 0; j < n; j++) d[j] = ft_f32_to_f16(in[j]);
        break;
    }
    case FT_DTYPE_BF16: {
        uint16_t *d = (uint16_t *)base + off;
#pragma omp simd
        for (int64_t j = 0; j < n; j++) d[j] = f32_to_bf16(in[j]);
        break;
    }
    default: break;
    }
}

FT_VCLONES
void ft_cpu_row_act(int act, float *y, int64_t n) {
    switch (act) {
    case FT_ACT_GELU:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = ft_vgeluf(y[j]);
        break;
    case FT_ACT_GELU_TANH:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = ft_vgelu_tanhf(y[j]);
        break;
    case FT_ACT_RELU:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = ft_vreluf(y[j]);
        break;
    case FT_ACT_TANH:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = ft_vtanhf(y[j]);
        break;
    case FT_ACT_SIGMOID:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = ft_vsigmoidf(y[j]);
        break;
    case FT_ACT_RELU6:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = ft_vrelu6f(y[j]);
        break;
    case FT_ACT_SILU:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = ft_vsiluf(y[j]);
        break;
    default: break;
    }
}

FT_VCLONES
void ft_cpu_row_binary(int op, float *acc, const float *v, int64_t n, int swap) {
    switch (op) {
    case FT_OP_ADD:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) acc[j] = acc[j] + v[j];
        break;
    case FT_OP_MUL:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) acc[j] = acc[j] * v[j];
        break;
    case FT_OP_SUB:
        if (swap) {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) acc[j] = v[j] - acc[j];
        } else {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) acc[j] = acc[j] - v[j];
        }
        break;
    case FT_OP_DIV:
        if (swap) {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) acc[j] = v[j] / acc[j];
        } else {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) acc[j] = acc[j] / v[j];
        }
        break;
    default: break;
    }
}

FT_VCLONES
void ft_cpu_row_scale(float *y, int64_t n, float alpha, float beta) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) y[j] = y[j] * alpha + beta;
}

FT_VCLONES
void ft_cpu_row_bias_act(float *y, int64_t n, const float *bias, float bs, int act) {
    if (bias) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = y[j] + bias[j] + bs;
    } else if (bs != 0.0f) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = y[j] + bs;
    }
    ft_cpu_row_act(act, y, n);
}

FT_VCLONES
void ft_cpu_row_softmax(float *s, int64_t n) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    /* exp(NaN) and exp(inf - inf) are NaN and make the sum NaN, so a NaN or +inf
     * logit, or a row all -inf (mx = -inf), gives a row of NaN */
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; j++) {
        float e = ft_vexpf(s[j] - mx);
        s[j] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = 0; j < n; j++) s[j] *= inv;
}

FT_VCLONES
void ft_cpu_row_norm(float *h, int64_t d, double eps, const float *g, const float *b) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < d; j++) s += (double)h[j];
    const double mean = s / (double)d;
    double ss = 0.0;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < d; j++) {
        double c = (double)h[j] - mean;
        ss += c * c;
    }
    const float rstd = (float)(1.0 / sqrt(ss / (double)d + eps)), mf = (float)mean;
    /* h - mean in f32 as (h - mf) - ml, mean = mf + ml: mf alone is off by up to half
     * an ulp of the mean, which a large DC offset makes large next to h - mean */
    const float ml = (float)(mean - (double)mf);
    if (g && b) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++) h[j] = (h[j] - mf - ml) * rstd * g[j] + b[j];
    } else if (g) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++) h[j] = (h[j] - mf - ml) * rstd * g[j];
    } else if (b) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++) h[j] = (h[j] - mf - ml) * rstd + b[j];
    } else {
#pragma omp simd
        for (int64_t j = 0; j < d; j++) h[j] = (h[j] - mf - ml) * rstd;
    }
}

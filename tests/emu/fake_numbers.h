/*
 * fake_numbers.h - the number formats of the fake cuBLAS / cuBLASLt
 * (fake_cublas.c): f16, bf16 and TF32 from and to f32, rounding to nearest
 * even as the hardware does, NaN kept NaN; element loads and stores by CUDA
 * data type. Included by fake_cublas.c only.
 */
#ifndef FT_FAKE_NUMBERS_H
#define FT_FAKE_NUMBERS_H

#include <stddef.h>
#include <stdint.h>

#include <library_types.h>

typedef union {
    float f;
    uint32_t u;
} fbits;

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    if (e == 0x1F) return (fbits){.u = sign | 0x7F800000 | (m << 13)}.f;
    if (e == 0) return sign ? -(float)m * 0x1p-24f : (float)m * 0x1p-24f; /* exact */
    return (fbits){.u = sign | ((e + 112) << 23) | (m << 13)}.f;
}

static uint16_t f32_to_f16(float f) {
    uint32_t x = (fbits){.f = f}.u, sign = (x >> 16) & 0x8000, ax = x & 0x7FFFFFFF, e = ax >> 23;
    if (ax > 0x7F800000) return (uint16_t)(sign | 0x7E00 | ((ax >> 13) & 0x3FF)); /* quiet NaN */
    if (ax >= 0x477FF000) return (uint16_t)(sign | 0x7C00); /* from 65520 on: inf */
    if (e >= 113) { /* normal: a carry out of the mantissa bumps the exponent, as it should */
        uint32_t h = ((e - 112) << 10) | ((ax >> 13) & 0x3FF), rem = ax & 0x1FFF;
        return (uint16_t)(sign | (h + (rem > 0x1000 || (rem == 0x1000 && (h & 1)))));
    }
    if (ax < 0x33000000) return (uint16_t)sign;                  /* below 2^-25: zero */
    uint32_t mant = (ax & 0x7FFFFF) | 0x800000, shift = 126 - e; /* subnormal: 14..24 */
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    return (uint16_t)(sign | (q + (rem > half || (rem == half && (q & 1)))));
}

static float bf16_to_f32(uint16_t b) {
    return (fbits){.u = (uint32_t)b << 16}.f;
}

static uint16_t f32_to_bf16(float f) {
    uint32_t x = (fbits){.f = f}.u;
    if ((x & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

/* TF32, what tensor cores read of an f32: 10 explicit mantissa bits */
static float tf32_round(float f) {
    uint32_t x = (fbits){.f = f}.u;
    if ((x & 0x7F800000) == 0x7F800000) return f;
    return (fbits){.u = (x + 0xFFF + ((x >> 13) & 1)) & 0xFFFFE000u}.f;
}

static size_t type_size(int t) {
    return t == CUDA_R_32F ? 4 : 2;
}

static float ld_elem(const void *p, int t, int64_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return t == CUDA_R_16F ? f16_to_f32(h) : bf16_to_f32(h);
}

static void st_elem(void *p, int t, int64_t i, float v) {
    if (t == CUDA_R_32F)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = t == CUDA_R_16F ? f32_to_f16(v) : f32_to_bf16(v);
}

#endif /* FT_FAKE_NUMBERS_H */

/*
 * dtype.c - dtype names and sizes, and host conversions between f32, f16 and
 * bf16 (round to nearest even, as PyTorch's .half() / .bfloat16() do).
 */
#include "ft_internal.h"

#include <math.h>
#include <string.h>

static const char *const dtype_names[FT_DTYPE_COUNT] = {"f32", "f16", "bf16", "i64", "i32"};
static const size_t dtype_sizes[FT_DTYPE_COUNT] = {4, 2, 2, 8, 4};

const char *ft_dtype_name(ft_dtype t) {
    return (unsigned)t < FT_DTYPE_COUNT ? dtype_names[t] : "?";
}

size_t ft_dtype_size(ft_dtype t) { return (unsigned)t < FT_DTYPE_COUNT ? dtype_sizes[t] : 0; }

bool ft_dtype_is_float(ft_dtype t) {
    return t == FT_DTYPE_F32 || t == FT_DTYPE_F16 || t == FT_DTYPE_BF16;
}

ft_status ft_dtype_parse(const char *s, ft_dtype *out) {
    static const struct { const char *name; ft_dtype t; } names[] = {
        {"f32", FT_DTYPE_F32},  {"fp32", FT_DTYPE_F32},  {"float32", FT_DTYPE_F32},
        {"f16", FT_DTYPE_F16},  {"fp16", FT_DTYPE_F16},  {"float16", FT_DTYPE_F16},
        {"bf16", FT_DTYPE_BF16}, {"bfloat16", FT_DTYPE_BF16},
    };
    if (!out) return FT_ERR_INVALID_ARG;
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) {
            *out = names[i].t;
            return FT_OK;
        }
    return FT_ERR_INVALID_ARG;
}

float ft_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            bits = sign | (uint32_t)(112 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 112) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ft_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds past 65504 */
    if (ax < 0x38800000u) { /* subnormal or zero in f16 */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t e = ax >> 23, man = (ax & 0x7fffff) | 0x800000;
        int shift = (int)(126 - e); /* value / 2^-24 = man >> shift */
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((ax >> 13) - (112u << 10));
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

float ft_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ft_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* memcpy loads: host data (a safetensors file without padding, a caller's buffer)
 * need not be aligned to its element size */
static double load_elem(ft_dtype t, const void *p, int64_t i) {
    const char *b = (const char *)p;
    float f;
    uint16_t h;
    int64_t l;
    int32_t w;
    switch (t) {
    case FT_DTYPE_F32: memcpy(&f, b + i * 4, 4); return f;
    case FT_DTYPE_F16: memcpy(&h, b + i * 2, 2); return ft_f16_to_f32(h);
    case FT_DTYPE_BF16: memcpy(&h, b + i * 2, 2); return ft_bf16_to_f32(h);
    case FT_DTYPE_I64: memcpy(&l, b + i * 8, 8); return (double)l;
    case FT_DTYPE_I32: memcpy(&w, b + i * 4, 4); return w;
    default: return 0;
    }
}

ft_status ft_convert_host(ft_dtype dt, void *dst, ft_dtype st, const void *src, int64_t n) {
    if (dt == st) {
        memcpy(dst, src, (size_t)n * ft_dtype_size(dt));
        return FT_OK;
    }
    if (ft_dtype_is_float(dt) != ft_dtype_is_float(st)) return FT_ERR_INVALID_ARG;
    if (dt == FT_DTYPE_I64 && st == FT_DTYPE_I32) {
        for (int64_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, (const char *)src + i * 4, 4);
            ((int64_t *)dst)[i] = v;
        }
        return FT_OK;
    }
    if (dt == FT_DTYPE_I32 && st == FT_DTYPE_I64) {
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, (const char *)src + i * 8, 8);
            ((int32_t *)dst)[i] = (int32_t)v;
        }
        return FT_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        float v = (float)load_elem(st, src, i);
        switch (dt) {
        case FT_DTYPE_F32: ((float *)dst)[i] = v; break;
        case FT_DTYPE_F16: ((uint16_t *)dst)[i] = ft_f32_to_f16(v); break;
        case FT_DTYPE_BF16: ((uint16_t *)dst)[i] = ft_f32_to_bf16(v); break;
        default: return FT_ERR_INVALID_ARG;
        }
    }
    return FT_OK;
}

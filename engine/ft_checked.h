/*
 * ft_checked.h - overflow-checked size arithmetic, the one place every size
 * computed from user numbers (input shapes, batch and sequence arguments,
 * config values) goes through before it reaches malloc or a kernel's index
 * math.
 *
 * A tensor is representable when its byte size is at most FT_MAX_BYTES
 * (2^48 bytes, 256 TiB, beyond any host or GPU memory): every element offset
 * a kernel computes then fits in int64 with room to spare, and so do the sums
 * of many such sizes (the graph memory planner adds the sizes of every live
 * buffer; 32768 of them at the cap stay below 2^63). Sizes past the cap are
 * refused with FT_ERR_SHAPE before anything is allocated; sizes below it that
 * the machine cannot hold end in FT_ERR_OOM from the allocator.
 */
#ifndef FT_CHECKED_H
#define FT_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest byte size of one tensor or host buffer made from user sizes. */
#define FT_MAX_BYTES ((int64_t)1 << 48)

/* *out = a * b; false (and *out = INT64_MAX) when it overflows int64 or either
 * factor is negative. */
static inline bool ft_mul_ok(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) {
        *out = INT64_MAX;
        return false;
    }
    *out = r;
    return true;
}

/* *out = a + b for sizes; false (and *out = INT64_MAX) on overflow or a negative term. */
static inline bool ft_add_ok(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) {
        *out = INT64_MAX;
        return false;
    }
    *out = r;
    return true;
}

/* The element count of a shape, false when a dim is negative, the product
 * overflows int64 or its byte size at `elem` bytes per element (elem 0: one
 * byte) passes FT_MAX_BYTES. *numel gets the count, or INT64_MAX when false. */
static inline bool ft_shape_numel_ok(int ndim, const int64_t *shape, size_t elem, int64_t *numel) {
    int64_t n = 1, bytes;
    for (int i = 0; i < ndim; i++)
        if (!ft_mul_ok(n, shape[i], &n)) {
            *numel = INT64_MAX;
            return false;
        }
    if (!ft_mul_ok(n, elem ? (int64_t)elem : 1, &bytes) || bytes > FT_MAX_BYTES) {
        *numel = INT64_MAX;
        return false;
    }
    *numel = n;
    return true;
}

/* A byte count for malloc: n elements of `elem` bytes, false past FT_MAX_BYTES. */
static inline bool ft_bytes_ok(int64_t n, size_t elem, size_t *bytes) {
    int64_t b;
    if (!ft_mul_ok(n, (int64_t)elem, &b) || b > FT_MAX_BYTES) {
        *bytes = SIZE_MAX;
        return false;
    }
    *bytes = (size_t)b;
    return true;
}

#endif /* FT_CHECKED_H */

/*
 * gather.c - CPU reference kernels for index gathers: embedding (rows of a
 * table picked by integer ids) and gather_last (per-row picks along the last
 * dim), and position_ids (RoBERTa's positions counted over non-pad ids, the
 * indices its position embedding gathers). Every index is checked before
 * anything is read, so a bad id is an error naming it, never an out-of-bounds
 * read.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"

#include <string.h>

/* Finds the first index of an int tensor (any strides) outside [0, n). Returns
 * its flat position or -1. */
static int64_t first_bad_index(const ft_tensor *idx, int64_t n, int64_t *bad) {
    const int nd = idx->ndim;
    const int64_t rows = ft_cpu_rows(nd, idx->ne), cols = ft_cpu_cols(nd, idx->ne);
    const int64_t in = nd > 0 ? idx->nb[nd - 1] : 1;
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = ft_cpu_row_offset(nd, idx->ne, idx->nb, r);
        for (int64_t j = 0; j < cols; j++) {
            int64_t v = ft_cpu_load_int(idx->data, idx->dtype, off + j * in);
            if (v < 0 || v >= n) {
                *bad = v;
                return r * cols + j;
            }
        }
    }
    return -1;
}

FT_CPU_KERNEL_DEF(embedding) {
    const ft_tensor *tab = dst->src[0], *ids = dst->src[1];
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if ((st = ft_cpu_need_contiguous(ctx, ids, "ids"))) return st;
    const int64_t v = tab->ne[0], d = tab->ne[1], n = ft_numel(ids);
    int64_t bad = 0, pos = first_bad_index(ids, v, &bad);
    if (pos >= 0)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "id %lld at position %lld is outside [0, %lld)",
                            (long long)bad, (long long)pos, (long long)v);
    if (n == 0 || d == 0) return FT_OK;
    const size_t es = ft_dtype_size(tab->dtype);
    const bool packed = tab->nb[1] == 1 || d == 1;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (n * d >= FT_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        int64_t id = ft_cpu_load_int(ids->data, ids->dtype, i);
        const char *row = (const char *)tab->data + (size_t)(id * tab->nb[0]) * es;
        char *out = (char *)dst->data + (size_t)(i * d) * es; /* [..., D] */
        if (packed) {
            memcpy(out, row, (size_t)d * es);
        } else {
            for (int64_t j = 0; j < d; j++)
                memcpy(out + (size_t)j * es, row + (size_t)(j * tab->nb[1]) * es, es);
        }
    }
    return FT_OK;
}

FT_CPU_KERNEL_DEF(gather_last) {
    const ft_tensor *x = dst->src[0], *idx = dst->src[1];
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if ((st = ft_cpu_need_contiguous(ctx, idx, "idx"))) return st;
    const int nd = x->ndim;
    const int64_t ni = x->ne[nd - 2], t = x->ne[nd - 1], nj = idx->ne[1];
    int64_t bad = 0, pos = first_bad_index(idx, t, &bad);
    if (pos >= 0)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG,
                            "index %lld at [%lld, %lld] is outside [0, %lld)", (long long)bad,
                            (long long)(pos / (nj ? nj : 1)), (long long)(pos % (nj ? nj : 1)),
                            (long long)t);
    const int64_t rows = ft_cpu_rows(nd, x->ne); /* (..., i) pairs */
    if (rows == 0 || nj == 0) return FT_OK;
    const size_t es = ft_dtype_size(x->dtype);
    const int64_t xin = x->nb[nd - 1];

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (rows * nj >= FT_CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = r % ni;
        const char *xr = (const char *)x->data + (size_t)ft_cpu_row_offset(nd, x->ne, x->nb, r) * es;
        char *out = (char *)dst->data + (size_t)(r * nj) * es; /* [..., i, :] */
        for (int64_t j = 0; j < nj; j++) {
            int64_t k = ft_cpu_load_int(idx->data, idx->dtype, i * nj + j);
            memcpy(out + (size_t)j * es, xr + (size_t)(k * xin) * es, es);
        }
    }
    return FT_OK;
}

/* Hugging Face's create_position_ids_from_input_ids along the last dim:
 * pos = cumsum(ids != pad) * (ids != pad) + pad, i64 like torch's long. */
FT_CPU_KERNEL_DEF(position_ids) {
    const ft_tensor *ids = dst->src[0];
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    const int nd = ids->ndim;
    const int64_t rows = ft_cpu_rows(nd, ids->ne), cols = ft_cpu_cols(nd, ids->ne);
    const int64_t in = ids->nb[nd - 1], pad = FT_PARAMS(dst, ft_params_position_ids)->padding_idx;
    int64_t *out = (int64_t *)dst->data; /* [rows, cols] */
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = ft_cpu_row_offset(nd, ids->ne, ids->nb, r), count = 0;
        for (int64_t j = 0; j < cols; j++) {
            bool real = ft_cpu_load_int(ids->data, ids->dtype, off + j * in) != pad;
            count += real;
            out[r * cols + j] = (real ? count : 0) + pad;
        }
    }
    return FT_OK;
}

/*
 * copy.c - CPU reference kernels for data movement: copy/cast (any strides into
 * a contiguous tensor, between float dtypes, between int dtypes, ints to
 * floats), concat and constant pad. All three are one strided copy of a source
 * into a region of the output.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "nchwc.h"

#include <stdint.h>
#include <string.h>

/* A transposing copy in 16 x 16 tiles: element (i, j) of every 2-D slice, at
 * s[i + j * sj] (i along the source's unit-stride dim k, j along the last),
 * goes to d[i * di + j * dj]; the other dims index the slices. A row-by-row
 * copy reads one element per cache line there: ConvNeXt's NCHW -> NHWC copy
 * of each block's depthwise output ran at a few GB/s that way. */
#define TP_TILE 16
#define TP_BODY(T)                                                                                         \
    for (int64_t i = i0; i < i1; i++)                                                                      \
        for (int64_t j = j0; j < j1; j++) ((T *)d)[doff + i * di + j * dj] = ((const T *)s)[so + i + j * sj];
static bool copy_transposed(const ft_tensor *src, void *dst, const int64_t *dnb, size_t es) {
    const int nd = src->ndim;
    int k = -1;
    for (int q = nd - 2; q >= 0 && k < 0; q--)
        if (src->nb[q] == 1 && src->ne[q] > 1) k = q;
    if (k < 0 || (es != 4 && es != 2)) return false;
    const int64_t ni = src->ne[k], nj = src->ne[nd - 1], sj = src->nb[nd - 1], di = dnb[k], dj = dnb[nd - 1];
    int64_t outer = 1;
    for (int q = 0; q < nd - 1; q++)
        if (q != k) outer *= src->ne[q];
    const int64_t ib = (ni + TP_TILE - 1) / TP_TILE, tasks = outer * ib;
    const char *s = (const char *)src->data;
    char *d = (char *)dst;
#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (outer * ni * nj >= FT_CPU_PAR_MIN && tasks > 1)
    for (int64_t t = 0; t < tasks; t++) {
        /* the slice's offsets: the other dims, row-major, k left out */
        int64_t o = t / ib, so = 0, doff = 0;
        for (int q = nd - 2; q >= 0; q--) {
            if (q == k) continue;
            so += (o % src->ne[q]) * src->nb[q];
            doff += (o % src->ne[q]) * dnb[q];
            o /= src->ne[q];
        }
        const int64_t i0 = t % ib * TP_TILE, i1 = i0 + TP_TILE < ni ? i0 + TP_TILE : ni;
        for (int64_t j0 = 0; j0 < nj; j0 += TP_TILE) {
            const int64_t j1 = j0 + TP_TILE < nj ? j0 + TP_TILE : nj;
            if (es == 4) {
                TP_BODY(uint32_t)
            } else {
                TP_BODY(uint16_t)
            }
        }
    }
    return true;
}

/* Copies every element of src (any strides) to dst + sum(i_k * dnb[k]) (in
 * elements of dt), converting the dtype. The caller has checked that the
 * conversion is one COPY supports. */
static void copy_into(const ft_tensor *src, void *dst, ft_dtype dt, const int64_t *dnb) {
    const int nd = src->ndim;
    const int64_t rows = ft_cpu_rows(nd, src->ne), cols = ft_cpu_cols(nd, src->ne);
    const int64_t sin = nd > 0 ? src->nb[nd - 1] : 1, din = nd > 0 ? dnb[nd - 1] : 1;
    const ft_dtype st = src->dtype;
    const size_t es = ft_dtype_size(st);
    const bool same = st == dt, to_float = ft_dtype_is_float(dt);
    if (rows == 0 || cols == 0) return;
    /* the last dim strided and another one unit-stride: a transpose */
    if (same && sin != 1 && cols > 1 && copy_transposed(src, dst, dnb, es)) return;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (rows * cols >= FT_CPU_PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++) {
        int64_t so = ft_cpu_row_offset(nd, src->ne, src->nb, r);
        int64_t doff = ft_cpu_row_offset(nd, src->ne, dnb, r);
        const char *s = (const char *)src->data;
        char *d = (char *)dst;
        if (same && sin == 1 && din == 1) {
            memcpy(d + doff * es, s + so * es, (size_t)cols * es);
        } else if (same) {
            for (int64_t j = 0; j < cols; j++)
                memcpy(d + (doff + j * din) * es, s + (so + j * sin) * es, es);
        } else if (to_float) {
            for (int64_t j = 0; j < cols; j++)
                ft_cpu_store(dst, dt, doff + j * din, ft_cpu_load(src->data, st, so + j * sin));
        } else { /* int -> int */
            for (int64_t j = 0; j < cols; j++) {
                int64_t v = ft_cpu_load_int(src->data, st, so + j * sin);
                if (dt == FT_DTYPE_I64) ((int64_t *)dst)[doff + j * din] = v;
                else ((int32_t *)dst)[doff + j * din] = (int32_t)v;
            }
        }
    }
}

/* The conversions COPY supports: float <-> float, int <-> int, int -> float. */
static int check_conversion(ft_ctx *ctx, ft_dtype from, ft_dtype to) {
    if (from == to) return FT_OK;
    if (ft_dtype_is_float(to) || !ft_dtype_is_float(from)) return FT_OK;
    return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "cannot convert %s to %s", ft_dtype_name(from),
                        ft_dtype_name(to));
}

FT_CPU_KERNEL_DEF(copy) {
    const ft_tensor *x = dst->src[0];
    int st = check_conversion(ctx, x->dtype, dst->dtype);
    if (st) return st;
    if ((x->flags ^ dst->flags) & FT_TF_NCHWC) {
        /* a graph plan's reorder at the edge of a blocked-channel region (graph/pass_nchwc.c) */
        if (x->dtype != FT_DTYPE_F32 || dst->dtype != FT_DTYPE_F32 || x->ndim != 4 || x->ne[1] % FT_NCHWC ||
            !ft_tensor_contiguous(x) || !ft_tensor_contiguous(dst) || ft_numel(x) != ft_numel(dst))
            return ft_set_error(ctx, FT_ERR_INTERNAL, "copy: a blocked-channel reorder of an unsupported "
                                                      "tensor (%s)", dst->name);
        ft_cpu_nchwc_reorder(x->data, dst->data, x->ne[0], x->ne[1], x->ne[2] * x->ne[3],
                             (dst->flags & FT_TF_NCHWC) != 0);
        return FT_OK;
    }
    if ((st = ft_cpu_need_contiguous(ctx, dst, "output"))) return st;
    if (ft_numel(dst) == 0) return FT_OK;
    copy_into(x, dst->data, dst->dtype, dst->nb);
    return FT_OK;
}

FT_CPU_KERNEL_DEF(concat) {
    const ft_tensor *a = dst->src[0], *b = dst->src[1];
    const int d = FT_PARAMS(dst, ft_params_concat)->dim;
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if (a->dtype != dst->dtype || b->dtype != dst->dtype)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "inputs must have the output's dtype");
    if (ft_numel(dst) == 0) return FT_OK;
    const size_t es = ft_dtype_size(dst->dtype);
    copy_into(a, dst->data, dst->dtype, dst->nb);
    /* b lands right after a along dim d */
    copy_into(b, (char *)dst->data + (size_t)(a->ne[d] * dst->nb[d]) * es, dst->dtype, dst->nb);
    return FT_OK;
}

FT_CPU_KERNEL_DEF(pad) {
    const ft_tensor *x = dst->src[0];
    const ft_params_pad *p = FT_PARAMS(dst, ft_params_pad);
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if (!ft_dtype_is_float(dst->dtype) || x->dtype != dst->dtype)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "pad needs a float input, got %s",
                            ft_dtype_name(x->dtype));
    const int64_t n = ft_numel(dst);
    if (n == 0) return FT_OK;
#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (n >= FT_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) ft_cpu_store(dst->data, dst->dtype, i, p->value);
    const size_t es = ft_dtype_size(dst->dtype);
    copy_into(x, (char *)dst->data + (size_t)(p->before * dst->nb[p->dim]) * es, dst->dtype, dst->nb);
    return FT_OK;
}

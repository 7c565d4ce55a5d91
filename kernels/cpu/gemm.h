/*
 * gemm.h - the CPU GEMM core (kernels/cpu/gemm.c) and the helpers the GEMM
 * family (linear, matmul, attention, conv1d, conv2d) shares: f32 staging of
 * f16/bf16 operands, rounding stores, and the bias/residual/activation epilogue.
 * Internal to kernels/cpu.
 */
#ifndef FT_CPU_GEMM_H
#define FT_CPU_GEMM_H

#include "../../engine/ft_internal.h"
#include "scratch.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Row-major SGEMM: C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C.
 * op(A) = A (element (i,k) at a[i*lda + k]) or, when ta, A^T (at a[k*lda + i]);
 * likewise for B with tb. beta == 0 means C is not read (it may hold garbage).
 * Multithreaded with OpenMP unless already inside a parallel region.
 * Returns 0, or -1 when the packing buffers could not be allocated.
 */
int ft_cpu_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                 int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/*
 * An epilogue fused into the SGEMM's store: C = act(C + bias) applied to each
 * micro-tile right after its last depth block is stored (the tile is still in
 * L1), instead of a separate pass over C. bias (may be NULL) is indexed by
 * column ([n], linear) or, with bias_per_row, by row ([m], convolutions). A
 * residual is added through beta = 1 with C holding it beforehand.
 */
typedef struct ft_cpu_gemm_ep {
    const float *bias;
    bool bias_per_row;
    int act; /* ft_act */
} ft_cpu_gemm_ep;

/* ft_cpu_sgemm then the epilogue ep (NULL: none), fused per tile. */
int ft_cpu_sgemm_ep(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc,
                    const ft_cpu_gemm_ep *ep);

/*
 * op(B) [K, N] packed once in the SGEMM's panel layout (depth blocks of KC rows,
 * each NR-column slivers [kc][NR], zero-padded to a multiple of NR columns), for
 * an operand that does not change between calls: a weight, packed at plan time
 * (ft_cpu_prepack). Every thread of a product reads the same panels.
 * ft_cpu_pack_b returns NULL when out of memory (callers then pack per call).
 */
typedef struct ft_cpu_packed_b {
    uint32_t magic;
    int64_t k, n, npad;
    float *data;
    const void *src; /* the tensor data it was packed from (a consistency check) */
    int mr;          /* 0: op(B) panels ([K, N], n = N); else op(A) panels of mr rows
                      * (A [M, K] row-major, n = M, npad = M rounded up to mr) */
    int64_t groups;  /* op(A) of a grouped convolution: `groups` panel sets of n rows
                      * each, set g at data + g * npad * k; op(B) of a grouped linear:
                      * `groups` sets of n columns each, likewise (1 otherwise) */
    int refs;        /* plan steps sharing it (one weight run by several layers, ALBERT) */
} ft_cpu_packed_b;
ft_cpu_packed_b *ft_cpu_pack_b(bool tb, int64_t k, int64_t n, const float *b, int64_t ldb);
/* `groups` op(B) panel sets of k x n each (a grouped linear's weight), set g packed
 * from b + g * group_stride, at data + g * npad * k; NULL when out of memory. */
ft_cpu_packed_b *ft_cpu_pack_b_groups(int64_t groups, bool tb, int64_t k, int64_t n, const float *b,
                                      int64_t ldb, int64_t group_stride);
/* Set g of a grouped op(B) as a packed operand of its own (shares p's data). */
ft_cpu_packed_b ft_cpu_packed_b_group(const ft_cpu_packed_b *p, int64_t g);
void ft_cpu_packed_b_free(ft_cpu_packed_b *p);
/* ft_cpu_sgemm_ep with op(B) = pb (K and N from it). */
int ft_cpu_sgemm_packed(bool ta, int64_t m, float alpha, const float *a, int64_t lda,
                        const ft_cpu_packed_b *pb, float beta, float *c, int64_t ldc,
                        const ft_cpu_gemm_ep *ep);

/* A [M, K] (row-major, lda) packed once as the SGEMM's A panels (alpha 1): a
 * convolution weight. NULL when out of memory. */
ft_cpu_packed_b *ft_cpu_pack_a(int64_t m, int64_t k, const float *a, int64_t lda);
/* C [M, N] = A (packed) * B [K, N] (+ beta C), epilogue ep; -1 on OOM. */
int ft_cpu_sgemm_packed_a(const ft_cpu_packed_b *pa, int64_t n, const float *b, int64_t ldb,
                          float beta, float *c, int64_t ldc, const ft_cpu_gemm_ep *ep);

/* `groups` row blocks of A, block g = m rows at a + g * m * lda, each packed as
 * its own A panels (a grouped convolution weight); NULL when out of memory. */
ft_cpu_packed_b *ft_cpu_pack_a_groups(int64_t groups, int64_t m, int64_t k, const float *a,
                                      int64_t lda);

/*
 * op(B) of a convolution read in place from its NCHW input, the implicit
 * im2col: row p = (channel c, ky, kx) of K = cin_g * kh * kw, column j = (image
 * b, oy, ox) of N = batch * oh * ow, value x[b][c][oy*sh + ky - ph][ox*sw + kx - pw]
 * or 0 in the padding. The GEMM packs its slivers straight from x; nothing of
 * size K x N is ever written.
 */
typedef struct ft_cpu_conv_view {
    const float *x;          /* channel 0 of the group, image 0 */
    int64_t cin_g, h, w, kh, kw, oh, ow, sh, sw, ph, pw;
    int64_t x_bstride;       /* elements from one image of x to the next */
    int64_t c_bstride;       /* elements from one image of C to the next */
} ft_cpu_conv_view;

/* Columns of a packed B sliver (a micro-tile spans one or two, gemm_micro.c). */
#define FT_CPU_GEMM_NR 16

/* conv_pack.c: rows p0.. and columns j0.. (global over the batch) of v's op(B)
 * as nc / NR slivers [kc][NR] at pb (the last one zero-filled past nc). */
void ft_cpu_pack_b_conv(const ft_cpu_conv_view *v, int64_t p0, int64_t j0, int64_t kc, int64_t nc,
                        float *pb);

/*
 * C = A * im2col(x) (+ beta C), epilogue ep (bias per row), for all `batch`
 * images in one product: image b's [M, oh*ow] block of C at c + b * c_bstride,
 * row stride oh*ow. A is pa (ft_cpu_pack_a / one group of ft_cpu_pack_a_groups,
 * K must match) or, when pa is NULL, a [M, K] row-major with lda.
 * 0, or -1 on OOM or a pa cut for another micro-kernel.
 */
int ft_cpu_sgemm_conv(const ft_cpu_packed_b *pa, const float *a, int64_t lda, int64_t m,
                      const ft_cpu_conv_view *v, int64_t batch, float beta, float *c,
                      const ft_cpu_gemm_ep *ep);

/* conv.c: packs a convolution node's weight (per group) as A panels into
 * node->extra; true when it did. */
bool ft_cpu_conv_prepack(ft_ctx *ctx, ft_tensor *node);
/* linear_grouped.c: packs a grouped linear node's weight (per output group) as B
 * panels into node->extra; true when it did. */
bool ft_cpu_linear_grouped_prepack(ft_ctx *ctx, ft_tensor *node);

/* `batch` independent SGEMMs, item i at a + i*stride_a, b + i*stride_b,
 * c + i*stride_c (a stride of 0 broadcasts an operand). Parallel over the
 * batch when it is large enough, otherwise over each product. 0 or -1 (OOM). */
int ft_cpu_sgemm_batched(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, int64_t stride_a, const float *b,
                         int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                         int64_t stride_c, int64_t batch);

/* Threads the GEMM family may use here (1 inside a parallel region). */
int ft_cpu_gemm_threads(void);

/*
 * An f32 view of a float tensor. If t is f32 and `ok_as_is` says its layout
 * can be used in place, *out points at t's data and nothing is allocated;
 * otherwise *out is a contiguous f32 copy (any strides, any float dtype) in a
 * staging buffer of the current kernel's scratch (malloc'd without one) that
 * the caller gives back with ft_cpu_f32_release. Returns 0, or -1 when out of
 * memory.
 */
typedef struct ft_cpu_f32 {
    float *p;
    bool owned;
    ft_cpu_buf buf; /* where an owned p came from (scratch.h); p alone, when it is not
                     * buf.p, was malloc'd by the caller and is freed */
} ft_cpu_f32;
int ft_cpu_f32_get(const ft_tensor *t, bool ok_as_is, ft_cpu_f32 *out);
void ft_cpu_f32_release(ft_cpu_f32 *f);

/* Writes n f32 values into the contiguous float tensor dst, rounding to its dtype
 * (a no-op when src already is dst's f32 storage). */
void ft_cpu_f32_store(ft_tensor *dst, const float *src, int64_t n);

/* act(x) for an ft_act epilogue. */
float ft_cpu_act(int act, float x);

/*
 * y viewed as [outer, ch, inner]: y = act(y + bias[ch] + res), in place.
 * bias ([ch]) and res (same layout as y) may be NULL; nothing runs when neither
 * they nor an activation is present.
 */
void ft_cpu_epilogue(float *y, int64_t outer, int64_t ch, int64_t inner, const float *bias,
                     const float *res, int act);

#ifdef __cplusplus
}
#endif

#endif /* FT_CPU_GEMM_H */

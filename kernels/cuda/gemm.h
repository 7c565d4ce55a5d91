/*
 * gemm.h - the internal GEMM entry of the CUDA backend (kernels/cuda/gemm.cu),
 * used by linear, matmul and the convolutions. cuBLASLt with the matmul
 * descriptor, layouts and chosen algorithm cached per shape, so a repeated
 * call does no heuristic query (the algorithm: the fastest of the heuristic's
 * candidates, timed once per shape, kernels/cuda/gemm_tune.cu); fp32
 * accumulation, TF32 off unless the context asks for it; epilogues bias,
 * bias+GELU, bias+residual.
 */
#ifndef FT_CUDA_GEMM_H
#define FT_CUDA_GEMM_H

#include "../../engine/ft_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Row-major batched GEMM: for each of `batch` items,
 *   C[M,N] = act(alpha * op(A)[M,K] * op(B)[K,N] + bias[N] + residual[M,N])
 * op(X) = X^T when trans; lda/ldb/ldc are row strides (elements) of the stored
 * matrices; stride_* are batch strides (0 = broadcast). bias and residual may be
 * NULL; residual has leading dimension ldc and batch stride stride_c; item i's bias
 * starts at bias + i * stride_bias.
 * All of A, B, C, bias, residual share `dtype`. */
typedef struct ft_gemm_desc {
    ft_dtype dtype;
    bool trans_a, trans_b;
    int64_t m, n, k, batch;
    const void *a; int64_t lda, stride_a;
    const void *b; int64_t ldb, stride_b;
    void *c; int64_t ldc, stride_c;
    const void *bias; int64_t stride_bias; /* bias batch stride (0: one bias for every item) */
    const void *residual;
    float alpha;
    int act; /* ft_act */
} ft_gemm_desc;

ft_status ft_cuda_gemm(ft_ctx *ctx, const ft_gemm_desc *g);

#ifdef __cplusplus
}
#endif

#endif /* FT_CUDA_GEMM_H */

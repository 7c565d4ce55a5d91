/*
 * cuda_backend_internal.h - the CUDA backend's per-context state (ctx->cuda),
 * shared by engine/cuda_backend.c (C) and the kernels that need more than the
 * stream: the GEMM (cuBLASLt handle, workspace, plan cache) and the tests and
 * benches that look at device facts. Only compiled with FT_WITH_CUDA.
 */
#ifndef FT_CUDA_BACKEND_INTERNAL_H
#define FT_CUDA_BACKEND_INTERNAL_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "ft_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything that decides which cuBLASLt plan a GEMM needs. Pointers are not
 * part of it (they are passed per call), their alignments are: the heuristic's
 * choice depends on them. Zeroed before filling so it can be memcmp'd. */
typedef struct ft_gemm_key {
    int32_t dtype, trans_a, trans_b, epilogue, has_c, tf32;
    int32_t align_a, align_b, align_c; /* bytes, power of two, capped at 256 */
    int32_t align_bias; /* the bias pointer's alignment (0 without bias): the heuristic
                         * reads it from CUBLASLT_MATMUL_DESC_BIAS_POINTER */
    int64_t m, n, k, batch;
    int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
    int64_t stride_bias; /* CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE (batched grouped linears) */
} ft_gemm_key;

/* A cached GEMM plan: descriptors and the algorithm the heuristic chose. */
typedef struct ft_gemm_plan {
    ft_gemm_key key;
    int used;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our B), B (our A), C = D */
    cublasLtMatmulAlgo_t algo;
    int epi_fallback; /* the epilogue had no algorithm: bias and act run as a separate pass */
    int choice;       /* which of the heuristic's answers algo is (0: its first guess) */
    int no_algo;      /* cuBLASLt has no algorithm at all: the cuBLAS path, without asking again */
} ft_gemm_plan;

#define FT_GEMM_CACHE_SLOTS 512 /* power of two; a full table evicts by overwriting */

typedef struct ft_cuda_state {
    ft_ctx *ctx;
    int device;
    int sm_major, sm_minor, n_sm;
    size_t smem_per_block_optin;
    char name[256];

    cudaStream_t stream; /* cudaStreamNonBlocking: every launch and copy goes here */

    /* pinned host staging for h2d/d2h, grown as needed, reused */
    void *pinned;
    size_t pinned_size;
    cudaEvent_t pinned_done; /* recorded after the last h2d out of `pinned` */
    int pinned_pending;      /* h2d copies may still be reading pinned[0, pinned_used) */
    size_t pinned_used;

    cublasHandle_t blas;
    void *blas_ws;
    size_t blas_ws_size;
    cublasLtHandle_t lt;
    void *lt_ws;
    size_t lt_ws_size;
    int allow_tf32; /* FT_ALLOW_TF32=1 or ft_cuda_set_allow_tf32() */
    int fast_gelu;  /* FT_FAST_GELU=1: exact GELU after a GEMM may use cuBLASLt's tanh epilogue */
    int pdl;        /* kernels launch with programmatic dependent launch (ft_cuda_pdl) */
    char pdl_note[128]; /* why not, when pdl is 0 */

    /* device frees asked for while the stream was capturing, done afterwards */
    void **deferred;
    int n_deferred, cap_deferred;

    ft_gemm_plan *gemm_cache; /* FT_GEMM_CACHE_SLOTS entries */
    uint64_t gemm_cache_hits, gemm_cache_misses;
    int gemm_tune; /* time the heuristic's candidates once per GEMM shape (FT_GEMM_AUTOTUNE) */
    uint64_t gemm_tuned;   /* plans whose algorithm this context chose by timing */
    uint64_t gemm_reused;  /* plans that took a choice timed earlier in the process */
    uint64_t gemm_changed; /* of gemm_tuned, those where timing overruled the first guess */
    cudaEvent_t tune_ev[2]; /* created at the first tuning */
} ft_cuda_state;

static inline ft_cuda_state *ft_cuda_state_of(ft_ctx *ctx) {
    return ctx ? (ft_cuda_state *)ctx->cuda : NULL;
}

/* Records a cuBLAS/cuBLASLt failure as FT_ERR_CUBLAS naming the call. */
ft_status ft_cublas_error(ft_ctx *ctx, cublasStatus_t st, const char *what);
/* 1 when the context's stream is being captured into a CUDA graph. */
int ft_cuda_capturing(ft_ctx *ctx);
/* Enables TF32 for f32 GEMMs on this context (off by default; results change). */
void ft_cuda_set_allow_tf32(ft_ctx *ctx, int on);
/* 1 when the context launches its kernels with programmatic dependent launch:
 * sm_90 or newer, kernels compiled from sm_90+ PTX (their prologue waits),
 * FT_DISABLE_PDL unset, and the probe below passed. */
int ft_cuda_pdl(ft_ctx *ctx);
/* Runs the launches programmatic dependent launch will make, once, on the
 * context's stream (kernels/cuda/copy.cu): a memset then two dependent PDL
 * kernels, directly and captured into a graph, checking the result. FT_OK, or
 * an error that says which step the driver refused. Uses cudaMalloc: never
 * call it while the stream is capturing. */
ft_status ft_cuda_pdl_probe(ft_ctx *ctx);
/* The code the device runs for the engine's kernels (kernels/cuda/pdl.cu asks
 * about its probe kernel, built like all the others): *ptx the PTX virtual
 * architecture it was compiled from, *bin the binary's, both as major * 10 +
 * minor (cudaFuncGetAttributes). A build for an older architecture run on a
 * Hopper GPU is JIT-compiled from compute_80 PTX, say: binary 90, PTX 80, and
 * its FT_KERNEL_PROLOGUE is empty (no griddepcontrol.wait before sm_90), so
 * PDL launches of it would race. */
ft_status ft_cuda_kernel_arch(ft_ctx *ctx, int *ptx, int *bin);
/* The operands of the GEMM a plan is being built for, as cublasLtMatmul takes
 * them (cuBLASLt's A is our B): the autotuner times the candidates on them. */
typedef struct ft_gemm_tune_call {
    const void *lt_a, *lt_b, *c_in; /* c_in: NULL when beta is 0 */
    void *d;
    const void *bias;
    size_t bytes_a, bytes_b, bytes_c, bytes_bias; /* extents, for the aliasing check */
    float alpha, beta;
} ft_gemm_tune_call;

#define FT_GEMM_TUNE_CANDIDATES 8

/* Sets p->algo (and p->choice) from the heuristic's n candidates, best guess
 * first (kernels/cuda/gemm_tune.cu): the choice made earlier in this process
 * for the same key on the same device if there is one; else, when the context
 * tunes (FT_GEMM_AUTOTUNE, on by default), the fastest by timing them on the
 * call's operands, then remembered process-wide, so every context and mode
 * runs the same algorithm. Not timed (the first guess stays, not remembered):
 * while the stream captures, or when D overlaps an operand (a rerun would
 * read its own output). FT_OK, or the error of a failing timed run. */
ft_status ft_cuda_gemm_choose(ft_ctx *ctx, ft_cuda_state *s, ft_gemm_plan *p,
                              const cublasLtMatmulHeuristicResult_t *cand, int n,
                              const ft_gemm_tune_call *call);
/* Destroys the cached GEMM plans (kernels/cuda/gemm.cu). */
void ft_cuda_gemm_cache_free(ft_cuda_state *s);
/* Copies a float tensor of any strides into a contiguous device buffer of the
 * same dtype (kernels/cuda/gemm.cu): the fallback for operands whose layout a
 * kernel cannot read directly (a strided bias or residual). */
ft_status ft_cuda_gather_contiguous(ft_ctx *ctx, const ft_tensor *src, void *dst);

#ifdef __cplusplus
}
#endif

#endif /* FT_CUDA_BACKEND_INTERNAL_H */

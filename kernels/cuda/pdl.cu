/*
 * pdl.cu - the start-up probe of programmatic dependent launch (PDL): before a
 * context launches its kernels with PDL it runs, once, the situations the
 * engine puts PDL launches in (after a memset, after another PDL kernel,
 * after an upload and an event record, inside a captured graph) and checks
 * the value they compute. A driver that refuses any of them turns PDL off for
 * the context instead of failing ops later (engine/cuda_backend.c, pdl_init).
 * Before that, pdl_init asks which PTX this kernel was compiled from
 * (ft_cuda_kernel_arch): only sm_90+ PTX has a prologue that waits.
 */
#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"
#include "../../engine/cuda_backend_internal.h"

/* v[0] = v[0] * 2 + 1: after a memset to 0 and two launches, v[0] == 3 only
 * if each launch saw the one before it finished. */
__global__ void ft_k_pdl_probe(unsigned *v) {
    FT_KERNEL_PROLOGUE();
    if (blockIdx.x == 0 && threadIdx.x == 0) v[0] = v[0] * 2u + 1u;
}

namespace {
/* memset, two dependent kernels; the caller checks v[0] == 3 */
ft_status probe_chain(ft_ctx *ctx, cudaStream_t st, unsigned *v) {
    FT_CUDA_TRY(ctx, cudaMemsetAsync(v, 0, sizeof *v, st));
    for (int i = 0; i < 2; i++) {
        FT_LAUNCH(ctx, 1, 32, 0, st, ft_k_pdl_probe)(v);
        FT_CUDA_LAUNCH_CHECK(ctx, "the PDL probe kernel");
    }
    return FT_OK;
}

ft_status probe_read(ft_ctx *ctx, cudaStream_t st, unsigned *v, unsigned *host, const char *how) {
    *host = 0;
    FT_CUDA_TRY(ctx, cudaMemcpyAsync(host, v, sizeof *v, cudaMemcpyDeviceToHost, st));
    FT_CUDA_TRY(ctx, cudaStreamSynchronize(st));
    if (*host != 3u)
        return ft_set_error(ctx, FT_ERR_CUDA, "PDL probe %s computed %u, expected 3", how, *host);
    return FT_OK;
}

ft_status probe_graph(ft_ctx *ctx, cudaStream_t st, unsigned *v, unsigned *host) {
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    FT_CUDA_TRY(ctx, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    ft_status rc = probe_chain(ctx, st, v);
    cudaError_t e = cudaStreamEndCapture(st, &g); /* always ends the capture, even after a failure */
    if (rc == FT_OK && e != cudaSuccess)
        rc = ft_set_error(ctx, FT_ERR_CUDA, "PDL probe: cudaStreamEndCapture failed: %s",
                          cudaGetErrorString(e));
    if (rc == FT_OK && (e = cudaGraphInstantiate(&ge, g, 0)) != cudaSuccess)
        rc = ft_set_error(ctx, FT_ERR_CUDA, "PDL probe: cudaGraphInstantiate failed: %s",
                          cudaGetErrorString(e));
    for (int rep = 0; rep < 2 && rc == FT_OK; rep++) { /* a replay starts from the memset again */
        if ((e = cudaGraphLaunch(ge, st)) != cudaSuccess)
            rc = ft_set_error(ctx, FT_ERR_CUDA, "PDL probe: cudaGraphLaunch failed: %s",
                              cudaGetErrorString(e));
        else
            rc = probe_read(ctx, st, v, host, "in a CUDA graph");
    }
    if (ge) (void)cudaGraphExecDestroy(ge);
    if (g) (void)cudaGraphDestroy(g);
    return rc;
}
} // namespace

extern "C" ft_status ft_cuda_kernel_arch(ft_ctx *ctx, int *ptx, int *bin) {
    cudaFuncAttributes a;
    memset(&a, 0, sizeof a);
    *ptx = *bin = 0;
    FT_CUDA_TRY(ctx, cudaFuncGetAttributes(&a, reinterpret_cast<const void *>(ft_k_pdl_probe)));
    *ptx = a.ptxVersion;
    *bin = a.binaryVersion;
    return FT_OK;
}

extern "C" ft_status ft_cuda_pdl_probe(ft_ctx *ctx) {
    cudaStream_t st = ft_cuda_stream(ctx);
    unsigned *v = NULL, *host = NULL;
    FT_CUDA_TRY(ctx, cudaMalloc((void **)&v, sizeof *v));
    cudaError_t e = cudaMallocHost((void **)&host, sizeof *host);
    if (e != cudaSuccess) {
        (void)cudaFree(v);
        return ft_set_error(ctx, FT_ERR_CUDA, "PDL probe: cudaMallocHost failed: %s", cudaGetErrorString(e));
    }
    /* on the stream as eager mode does it: an upload and an event (the pinned
     * ring's) before the first kernel, then the memset chain */
    cudaEvent_t ev = NULL;
    ft_status rc = FT_OK;
    *host = 0;
    e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMemcpyAsync(v, host, sizeof *v, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess) e = cudaEventRecord(ev, st);
    if (e != cudaSuccess)
        rc = ft_set_error(ctx, FT_ERR_CUDA, "PDL probe: upload failed: %s", cudaGetErrorString(e));
    for (int i = 0; i < 2 && rc == FT_OK; i++) {
        FT_LAUNCH(ctx, 1, 32, 0, st, ft_k_pdl_probe)(v);
        e = cudaGetLastError();
        if (e != cudaSuccess)
            rc = ft_set_error(ctx, FT_ERR_CUDA, "PDL probe: launch after an upload failed: %s",
                              cudaGetErrorString(e));
    }
    if (rc == FT_OK) rc = probe_read(ctx, st, v, host, "after an upload");
    if (rc == FT_OK) rc = probe_chain(ctx, st, v);
    if (rc == FT_OK) rc = probe_read(ctx, st, v, host, "on the stream");
    if (rc == FT_OK) rc = probe_graph(ctx, st, v, host);
    (void)cudaStreamSynchronize(st);
    if (ev) (void)cudaEventDestroy(ev);
    (void)cudaFreeHost(host);
    (void)cudaFree(v);
    return rc;
}

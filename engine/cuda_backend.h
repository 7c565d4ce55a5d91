/*
 * cuda_backend.h - what the engine core needs from the CUDA backend
 * (engine/cuda_backend.c, compiled only with FT_WITH_CUDA). The backend owns
 * the context's stream (non-blocking, never the legacy default stream), the
 * device caching allocator's cudaMalloc/cudaFree, pinned staging buffers,
 * the cuBLAS/cuBLASLt handles and their workspace.
 */
#ifndef FT_CUDA_BACKEND_H
#define FT_CUDA_BACKEND_H

#include "ft_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets up ctx->cuda and ctx->alloc for device ctx->device_index. */
ft_status ft_cuda_ctx_init(ft_ctx *ctx);
/* Waits for the stream, frees every CUDA resource of the context. */
void ft_cuda_ctx_destroy(ft_ctx *ctx);
/* Host -> device copy of `bytes` (through pinned staging, on the context stream). */
ft_status ft_cuda_h2d(ft_ctx *ctx, void *dst, const void *src, size_t bytes);
/* Device -> host copy; waits for the stream. */
ft_status ft_cuda_d2h(ft_ctx *ctx, void *dst, const void *src, size_t bytes);
ft_status ft_cuda_sync(ft_ctx *ctx);
/* cudaProfilerStart (on) / cudaProfilerStop; FT_ERR_CUDA (no sticky error) if refused. */
ft_status ft_cuda_profiler_range(ft_ctx *ctx, int on);
/* After a kernel launch: turns cudaGetLastError into an ft_status naming `what`;
 * with ctx->sync_debug also synchronizes so a fault is pinned to its op. */
ft_status ft_cuda_after_launch(ft_ctx *ctx, const char *what);
/* Runtime facts for ftengine version / ft_cuda_device_count. */
int ft_cuda_devices(void);
/* "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" for the context's device. */
void ft_cuda_device_label(const ft_ctx *ctx, char *buf, size_t size);
/* The context's GEMM plan counters (ft_ctx_gemm_stats). */
void ft_cuda_gemm_stats(const ft_ctx *ctx, ft_gemm_stats *out);
int ft_cuda_build_version(void);  /* CUDART_VERSION */
/* Why no CUDA device can be used, from cudaGetDeviceCount's error `err` (a
 * cudaError_t) and cudaDriverGetVersion's answer (0: no driver installed). With no
 * driver at all the runtime says "driver version is insufficient", which sends a
 * user to update a driver they do not have: this says "no NVIDIA driver found". */
void ft_cuda_no_device_message(int err, int driver_version, char *buf, size_t size);
int ft_cupti_linked_version(void); /* cuptiGetVersion, 0 if unavailable */

#ifdef __cplusplus
}
#endif

#endif /* FT_CUDA_BACKEND_H */

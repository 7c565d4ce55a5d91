/*
 * cuda_backend.c - the CUDA backend core (C11 on the CUDA runtime API): device
 * selection, the context's non-blocking stream, the device caching allocator
 * (engine/alloc.c with cudaMalloc/cudaFree behind it), pinned host staging for
 * transfers, the cuBLAS and cuBLASLt handles with workspaces allocated once,
 * and the error plumbing that turns every CUDA/cuBLAS status into an ft_status
 * with a message. Kernels live in kernels/cuda/; this file owns no kernel.
 *
 * Invariants: nothing here uses the legacy default stream; nothing allocates
 * device memory while the stream is being captured into a CUDA graph (the
 * allocator refuses, frees are deferred until the capture has ended).
 */
#include "cuda_backend.h"
#include "cuda_backend_internal.h"
#include "nvtx.h"

#include <cuda_profiler_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FT_WITH_CUPTI
#include <cupti_version.h>
#endif

#define MIB ((size_t)1 << 20)
#define PINNED_MAX_CHUNK (64 * MIB) /* staging never grows past this; larger copies go in chunks */

/* Checks a CUDA runtime call inside a function returning ft_status. */
#define CU_TRY(ctx, expr)                                                                    \
    do {                                                                                     \
        cudaError_t e_ = (expr);                                                             \
        if (e_ != cudaSuccess)                                                               \
            return ft_set_error((ctx), FT_ERR_CUDA, "%s failed: %s (%s)", #expr,             \
                                cudaGetErrorString(e_), cudaGetErrorName(e_));               \
    } while (0)

#define BLAS_TRY(ctx, expr)                                                                  \
    do {                                                                                     \
        cublasStatus_t s_ = (expr);                                                          \
        if (s_ != CUBLAS_STATUS_SUCCESS) return ft_cublas_error((ctx), s_, #expr);           \
    } while (0)

/* ------------------------------------------------------------------------- */
/* runtime facts                                                              */
/* ------------------------------------------------------------------------- */

int ft_cuda_devices(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver / no device: not an error worth keeping */
        return 0;
    }
    return n < 0 ? 0 : n;
}

int ft_cuda_build_version(void) { return CUDART_VERSION; }

void ft_cuda_device_label(const ft_ctx *ctx, char *buf, size_t size) {
    const ft_cuda_state *s = ctx->cuda;
    if (!s) {
        snprintf(buf, size, "cuda (not initialised)");
        return;
    }
    snprintf(buf, size, "%s (device %d, sm_%d%d, %d SMs, PDL %s%s)", s->name, s->device, s->sm_major,
             s->sm_minor, s->n_sm, s->pdl ? "on" : "off: ", s->pdl ? "" : s->pdl_note);
}

void ft_cuda_gemm_stats(const ft_ctx *ctx, ft_gemm_stats *out) {
    const ft_cuda_state *s = ctx->cuda;
    if (!s) return;
    out->plans = s->gemm_cache_misses;
    out->hits = s->gemm_cache_hits;
    out->tuned = s->gemm_tuned;
    out->changed = s->gemm_changed;
    out->reused = s->gemm_reused;
    out->autotune = s->gemm_tune;
}

int ft_cuda_pdl(ft_ctx *ctx) {
    const ft_cuda_state *s = ctx ? ctx->cuda : NULL;
    return s ? s->pdl : 0;
}

int ft_cupti_linked_version(void) {
#ifdef FT_WITH_CUPTI
    uint32_t v = 0;
    if (cuptiGetVersion(&v) != CUPTI_SUCCESS) return 0;
    return (int)v;
#else
    return 0;
#endif
}

ft_status ft_cublas_error(ft_ctx *ctx, cublasStatus_t st, const char *what) {
    ft_status code = st == CUBLAS_STATUS_ALLOC_FAILED ? FT_ERR_OOM : FT_ERR_CUBLAS;
    return ft_set_error(ctx, code, "%s failed: %s (cuBLAS status %d)", what,
                        cublasGetStatusString(st), (int)st);
}

int ft_cuda_capturing(ft_ctx *ctx) {
    ft_cuda_state *s = ft_cuda_state_of(ctx);
    if (!s || !s->stream) return 0;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s->stream, &cs) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return cs != cudaStreamCaptureStatusNone;
}

void ft_cuda_set_allow_tf32(ft_ctx *ctx, int on) {
    ft_cuda_state *s = ft_cuda_state_of(ctx);
    if (!s) return;
    s->allow_tf32 = on != 0;
    /* the cuBLAS handle's math mode was set from FT_ALLOW_TF32 at init; keep it in
     * step, or the cuBLAS fallback (gemm_cublas) could still round f32 to TF32 after
     * TF32 was turned off here (cuBLASLt plans key on allow_tf32 themselves) */
    if (s->blas)
        (void)cublasSetMathMode(s->blas, s->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
}

/* ------------------------------------------------------------------------- */
/* stream and scratch (the contract of kernels/cuda/cuda_common.cuh)           */
/* ------------------------------------------------------------------------- */

cudaStream_t ft_cuda_stream(ft_ctx *ctx) {
    ft_cuda_state *s = ft_cuda_state_of(ctx);
    /* a NULL state would silently mean the legacy stream; callers only reach
     * here on a CUDA context, whose state always holds a created stream */
    return s ? s->stream : (cudaStream_t)0;
}

void *ft_cuda_scratch(ft_ctx *ctx, size_t bytes, ft_block **block) {
    if (!block) {
        ft_set_error(ctx, FT_ERR_INTERNAL, "ft_cuda_scratch: block is NULL");
        return NULL;
    }
    *block = NULL;
    if (!ctx || ctx->device != FT_DEVICE_CUDA) {
        ft_set_error(ctx, FT_ERR_INTERNAL, "ft_cuda_scratch on a non-CUDA context");
        return NULL;
    }
    if (!bytes) bytes = 1;
    ft_scratch_pool *pool = ctx->scratch_pool;
    ft_block *b = pool ? ft_scratch_pool_take(pool, bytes) : NULL;
    if (!b && pool && ft_cuda_capturing(ctx)) {
        /* the warm-up run before capture asks for the same scratch in the same
         * order, so this means a kernel's scratch depends on more than shapes */
        ft_set_error(ctx, FT_ERR_CAPTURE,
                     "scratch of %zu bytes asked for during CUDA graph capture that the warm-up "
                     "run did not ask for", bytes);
        return NULL;
    }
    if (!b) {
        b = ft_allocator_alloc(&ctx->alloc, ctx, bytes);
        if (!b) return NULL;
        if (pool && ft_scratch_pool_add(pool, b) != 0) {
            ft_block_unref(b);
            ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
            return NULL;
        }
    }
    *block = b;
    return b->ptr;
}

/* ------------------------------------------------------------------------- */
/* device allocator: cudaMalloc / cudaFree behind the generic caching allocator */
/* ------------------------------------------------------------------------- */

static void flush_deferred(ft_cuda_state *s) {
    for (int i = 0; i < s->n_deferred; i++) cudaFree(s->deferred[i]);
    s->n_deferred = 0;
}

static void *cuda_sys_alloc(ft_allocator *a, size_t bytes, char *err, size_t errsize) {
    ft_cuda_state *s = (ft_cuda_state *)a->impl;
    if (ft_cuda_capturing(s->ctx)) {
        /* cudaMalloc is not recorded by stream capture: a graph would replay
         * without it. Record the precise cause before the allocator's OOM. */
        ft_set_error(s->ctx, FT_ERR_CAPTURE,
                     "allocation during CUDA graph capture (%zu bytes): every buffer must be "
                     "allocated before the capture starts", bytes);
        snprintf(err, errsize, "allocation during CUDA graph capture");
        return NULL;
    }
    flush_deferred(s);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* an OOM must not look like a failed launch later */
        snprintf(err, errsize, "cudaMalloc(%zu bytes) on device %d failed: %s", bytes, s->device,
                 cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

static void cuda_sys_free(ft_allocator *a, void *p) {
    ft_cuda_state *s = (ft_cuda_state *)a->impl;
    if (!p) return;
    if (ft_cuda_capturing(s->ctx)) {
        /* cudaFree would synchronize and break the capture: free afterwards */
        if (s->n_deferred == s->cap_deferred) {
            int cap = s->cap_deferred ? 2 * s->cap_deferred : 16;
            void **d = (void **)realloc(s->deferred, (size_t)cap * sizeof *d);
            if (!d) return; /* leak one buffer rather than break the capture */
            s->deferred = d;
            s->cap_deferred = cap;
        }
        s->deferred[s->n_deferred++] = p;
        return;
    }
    cudaFree(p);
}

/* ------------------------------------------------------------------------- */
/* context                                                                    */
/* ------------------------------------------------------------------------- */


/* Programmatic dependent launch: on for sm_90+ running kernels built from
 * sm_90+ PTX, unless FT_DISABLE_PDL is set or the probe finds the driver
 * refusing it (then off, with the reason in the device label; the context
 * still works). */
static ft_status pdl_init(ft_ctx *ctx, ft_cuda_state *s) {
    s->pdl = 0;
    if (ctx->opt_pdl == FT_OPT_OFF) {
        snprintf(s->pdl_note, sizeof s->pdl_note, "ft_ctx_options.pdl is FT_OPT_OFF");
        return FT_OK;
    }
    if (ctx->opt_pdl != FT_OPT_ON && ft_env_flag(FT_ENV_DISABLE_PDL, false)) {
        snprintf(s->pdl_note, sizeof s->pdl_note, "FT_DISABLE_PDL is set");
        return FT_OK;
    }
    if (s->sm_major < 9) {
        snprintf(s->pdl_note, sizeof s->pdl_note, "needs sm_90 or newer");
        return FT_OK;
    }
    /* The device is not enough: the kernels must wait in their prologue, which
     * only code compiled from sm_90+ PTX does (a CUDA_ARCH=80 build JIT-ed on
     * an H100 runs with an empty prologue, and PDL would let it race). */
    int ptx = 0, bin = 0;
    if (ft_cuda_kernel_arch(ctx, &ptx, &bin) != FT_OK) {
        snprintf(s->pdl_note, sizeof s->pdl_note, "cannot tell which code the kernels run: %s",
                 ft_ctx_errmsg(ctx));
        (void)cudaGetLastError();
        ft_ctx_clear_error(ctx);
        return FT_OK;
    }
    if (ptx < 90 || bin < 90) {
        snprintf(s->pdl_note, sizeof s->pdl_note,
                 "kernels compiled from compute_%d PTX (sm_%d code): no griddepcontrol.wait in their prologue",
                 ptx, bin);
        return FT_OK;
    }
    s->pdl = 1;
    if (ft_cuda_pdl_probe(ctx) == FT_OK) return FT_OK;
    s->pdl = 0;
    snprintf(s->pdl_note, sizeof s->pdl_note, "probe failed: %s", ft_ctx_errmsg(ctx));
    (void)cudaGetLastError();
    ft_ctx_clear_error(ctx);
    /* a refused capture can leave the stream unusable: start over with a new one */
    cudaStream_t old = s->stream;
    s->stream = NULL;
    if (old) (void)cudaStreamDestroy(old);
    CU_TRY(ctx, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    if (ctx->nvtx) ft_nvtx_name_stream(s->stream, "ftengine compute");
    BLAS_TRY(ctx, cublasSetStream(s->blas, s->stream));
    BLAS_TRY(ctx, cublasSetWorkspace(s->blas, s->blas_ws, s->blas_ws_size));
    return FT_OK;
}

void ft_cuda_no_device_message(int err, int driver_version, char *buf, size_t size) {
    cudaError_t e = (cudaError_t)err;
    int rt = CUDART_VERSION;
    if (driver_version <= 0)
        snprintf(buf, size, "no NVIDIA driver found (libcuda.so.1 is not installed or not loadable; "
                            "cudaGetDeviceCount: %s)", cudaGetErrorString(e));
    else if (e == cudaErrorInsufficientDriver)
        snprintf(buf, size, "the NVIDIA driver supports CUDA %d.%d, older than this build's runtime "
                            "(CUDA %d.%d): update the driver",
                 driver_version / 1000, (driver_version % 1000) / 10, rt / 1000, (rt % 1000) / 10);
    else if (e == cudaErrorNoDevice || e == cudaSuccess)
        snprintf(buf, size, "no CUDA device found (NVIDIA driver for CUDA %d.%d present)",
                 driver_version / 1000, (driver_version % 1000) / 10);
    else
        snprintf(buf, size, "no usable CUDA device: cudaGetDeviceCount failed: %s", cudaGetErrorString(e));
}

ft_status ft_cuda_ctx_init(ft_ctx *ctx) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        (void)cudaGetLastError();
        int drv = 0;
        if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0; /* 0 as well when no driver is installed */
        char why[256];
        ft_cuda_no_device_message((int)e, drv, why, sizeof why);
        return ft_set_error(ctx, FT_ERR_CUDA, "%s", why);
    }
    if (ctx->device_index < 0 || ctx->device_index >= n)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG,
                            "CUDA device index %d out of range (%d device%s visible)",
                            ctx->device_index, n, n == 1 ? "" : "s");

    ft_cuda_state *s = (ft_cuda_state *)calloc(1, sizeof *s);
    if (!s) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory for the CUDA state");
    ctx->cuda = s;
    s->ctx = ctx;
    s->device = ctx->device_index;
    s->allow_tf32 = ft_env_flag(FT_ENV_ALLOW_TF32, false);
    s->fast_gelu = ft_env_flag(FT_ENV_FAST_GELU, false);
    s->gemm_tune = ctx->opt_gemm_autotune == FT_OPT_DEFAULT ? ft_env_flag(FT_ENV_GEMM_AUTOTUNE, true)
                                                            : ctx->opt_gemm_autotune == FT_OPT_ON;

    CU_TRY(ctx, cudaSetDevice(s->device));
    struct cudaDeviceProp prop;
    CU_TRY(ctx, cudaGetDeviceProperties(&prop, s->device));
    s->sm_major = prop.major;
    s->sm_minor = prop.minor;
    s->n_sm = prop.multiProcessorCount;
    s->smem_per_block_optin = prop.sharedMemPerBlockOptin;
    snprintf(s->name, sizeof s->name, "%s", prop.name);

    CU_TRY(ctx, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    /* the one stream: kernels and copies alike (there is no separate copy stream) */
    if (ctx->nvtx) ft_nvtx_name_stream(s->stream, "ftengine compute");
    CU_TRY(ctx, cudaEventCreateWithFlags(&s->pinned_done, cudaEventDisableTiming));

    s->gemm_cache = (ft_gemm_plan *)calloc(FT_GEMM_CACHE_SLOTS, sizeof *s->gemm_cache);
    if (!s->gemm_cache) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory for the GEMM cache");

    /* Hopper kernels want the larger workspace (as ggml and llm.c size it) */
    size_t ws = s->sm_major >= 9 ? 32 * MIB : 4 * MIB;
    e = cudaMalloc(&s->blas_ws, ws);
    if (e == cudaSuccess) e = cudaMalloc(&s->lt_ws, ws);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ft_set_error(ctx, FT_ERR_OOM, "cudaMalloc of the %zu MiB cuBLAS workspaces failed: %s",
                            ws / MIB, cudaGetErrorString(e));
    }
    s->blas_ws_size = s->lt_ws_size = ws;

    BLAS_TRY(ctx, cublasCreate(&s->blas));
    /* cublasSetStream resets the workspace to the default pool: stream first */
    BLAS_TRY(ctx, cublasSetStream(s->blas, s->stream));
    BLAS_TRY(ctx, cublasSetWorkspace(s->blas, s->blas_ws, s->blas_ws_size));
    BLAS_TRY(ctx, cublasSetMathMode(s->blas, s->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                              : CUBLAS_DEFAULT_MATH));
    BLAS_TRY(ctx, cublasLtCreate(&s->lt));

    ft_allocator_init(&ctx->alloc, FT_DEVICE_CUDA, "cuda allocator");
    ctx->alloc.sys_alloc = cuda_sys_alloc;
    ctx->alloc.sys_free = cuda_sys_free;
    ctx->alloc.impl = s;
    return pdl_init(ctx, s);
}

void ft_cuda_ctx_destroy(ft_ctx *ctx) {
    ft_cuda_state *s = ft_cuda_state_of(ctx);
    if (!s) return;
    if (s->stream) cudaStreamSynchronize(s->stream);
    flush_deferred(s);
    free(s->deferred);
    if (s->gemm_cache) {
        ft_cuda_gemm_cache_free(s);
        free(s->gemm_cache);
    }
    if (s->lt) cublasLtDestroy(s->lt);
    if (s->blas) cublasDestroy(s->blas);
    if (s->lt_ws) cudaFree(s->lt_ws);
    if (s->blas_ws) cudaFree(s->blas_ws);
    if (s->pinned) cudaFreeHost(s->pinned);
    if (s->pinned_done) cudaEventDestroy(s->pinned_done);
    for (int i = 0; i < 2; i++)
        if (s->tune_ev[i]) cudaEventDestroy(s->tune_ev[i]);
    if (s->stream) cudaStreamDestroy(s->stream);
    (void)cudaGetLastError();
    /* the allocator's cached blocks were given back by ft_allocator_destroy
     * (ft_ctx_free); keep it from calling into a freed state afterwards */
    if (ctx->alloc.impl == s) ctx->alloc.sys_free = NULL;
    free(s);
    ctx->cuda = NULL;
}

ft_status ft_cuda_profiler_range(ft_ctx *ctx, int on) {
    (void)ctx;
    cudaError_t e = on ? cudaProfilerStart() : cudaProfilerStop();
    if (e == cudaSuccess) return FT_OK;
    (void)cudaGetLastError(); /* a profiler API refusal must not fail the next launch */
    return FT_ERR_CUDA;
}

ft_status ft_cuda_sync(ft_ctx *ctx) {
    ft_cuda_state *s = ft_cuda_state_of(ctx);
    if (!s) return ft_set_error(ctx, FT_ERR_INTERNAL, "CUDA context has no backend state");
    if (ft_cuda_capturing(ctx))
        return ft_set_error(ctx, FT_ERR_CAPTURE, "synchronize requested during CUDA graph capture");
    CU_TRY(ctx, cudaStreamSynchronize(s->stream));
    s->pinned_pending = 0;
    s->pinned_used = 0;
    flush_deferred(s);
    return FT_OK;
}

ft_status ft_cuda_after_launch(ft_ctx *ctx, const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return ft_set_error(ctx, FT_ERR_CUDA, "CUDA error after op %s: %s (%s)", what,
                            cudaGetErrorString(e), cudaGetErrorName(e));
    if (ctx->sync_debug && !ft_cuda_capturing(ctx)) {
        ft_cuda_state *s = ft_cuda_state_of(ctx);
        e = cudaStreamSynchronize(s->stream);
        if (e != cudaSuccess)
            return ft_set_error(ctx, FT_ERR_CUDA, "op %s failed on the device (FT_SYNC_DEBUG=1): %s (%s)",
                                what, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return FT_OK;
}

/* ------------------------------------------------------------------------- */
/* transfers through pinned staging                                           */
/* ------------------------------------------------------------------------- */

/* Makes the staging buffer at least `want` bytes (up to PINNED_MAX_CHUNK);
 * replacing it first waits for any copy still reading the old one. */
static ft_status staging_reserve(ft_ctx *ctx, ft_cuda_state *s, size_t want) {
    if (want > PINNED_MAX_CHUNK) want = PINNED_MAX_CHUNK;
    if (s->pinned && s->pinned_size >= want) return FT_OK;
    if (s->pinned_pending) {
        CU_TRY(ctx, cudaEventSynchronize(s->pinned_done));
        s->pinned_pending = 0;
        s->pinned_used = 0;
    }
    size_t sz = s->pinned_size ? s->pinned_size : MIB;
    while (sz < want) sz *= 2;
    if (sz > PINNED_MAX_CHUNK) sz = PINNED_MAX_CHUNK;
    if (s->pinned) cudaFreeHost(s->pinned);
    s->pinned = NULL;
    s->pinned_size = 0;
    cudaError_t e = cudaMallocHost(&s->pinned, sz);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        s->pinned = NULL;
        return ft_set_error(ctx, FT_ERR_OOM, "cudaMallocHost of %zu bytes of pinned staging failed: %s",
                            sz, cudaGetErrorString(e));
    }
    s->pinned_size = sz;
    return FT_OK;
}

ft_status ft_cuda_h2d(ft_ctx *ctx, void *dst, const void *src, size_t bytes) {
    ft_cuda_state *s = ft_cuda_state_of(ctx);
    if (!s) return ft_set_error(ctx, FT_ERR_INTERNAL, "CUDA context has no backend state");
    if (!bytes) return FT_OK;
    if (!dst || !src) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "host-to-device copy with a NULL pointer");
    if (ft_cuda_capturing(ctx))
        return ft_set_error(ctx, FT_ERR_CAPTURE, "host-to-device copy of %zu bytes during CUDA graph "
                            "capture (stage inputs before capturing)", bytes);
    ft_status st = staging_reserve(ctx, s, bytes);
    if (st) return st;
    for (size_t off = 0; off < bytes;) {
        size_t chunk = bytes - off < s->pinned_size ? bytes - off : s->pinned_size;
        /* the buffer is a ring: copies still in flight read [0, pinned_used), so a
         * new one takes the space after them and the host waits only when that is
         * too short. Several inputs in a row (every forward) then wait for nothing. */
        size_t at = s->pinned_pending ? (s->pinned_used + 255) & ~(size_t)255 : 0;
        if (at + chunk > s->pinned_size) {
            CU_TRY(ctx, cudaEventSynchronize(s->pinned_done)); /* covers every earlier copy */
            s->pinned_pending = 0;
            at = 0;
        }
        memcpy((char *)s->pinned + at, (const char *)src + off, chunk);
        CU_TRY(ctx, cudaMemcpyAsync((char *)dst + off, (char *)s->pinned + at, chunk,
                                    cudaMemcpyHostToDevice, s->stream));
        CU_TRY(ctx, cudaEventRecord(s->pinned_done, s->stream));
        s->pinned_pending = 1;
        s->pinned_used = at + chunk;
        off += chunk;
    }
    return FT_OK;
}

ft_status ft_cuda_d2h(ft_ctx *ctx, void *dst, const void *src, size_t bytes) {
    ft_cuda_state *s = ft_cuda_state_of(ctx);
    if (!s) return ft_set_error(ctx, FT_ERR_INTERNAL, "CUDA context has no backend state");
    if (!bytes) return ft_cuda_sync(ctx);
    if (!dst || !src) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "device-to-host copy with a NULL pointer");
    if (ft_cuda_capturing(ctx))
        return ft_set_error(ctx, FT_ERR_CAPTURE, "device-to-host copy during CUDA graph capture");
    ft_status st = staging_reserve(ctx, s, bytes);
    if (st) return st;
    for (size_t off = 0; off < bytes;) {
        size_t chunk = bytes - off < s->pinned_size ? bytes - off : s->pinned_size;
        CU_TRY(ctx, cudaMemcpyAsync(s->pinned, (const char *)src + off, chunk, cudaMemcpyDeviceToHost,
                                    s->stream));
        /* a kernel fault before this copy surfaces here, named as such */
        cudaError_t e = cudaStreamSynchronize(s->stream);
        if (e != cudaSuccess)
            return ft_set_error(ctx, FT_ERR_CUDA,
                                "device-to-host copy: the stream failed: %s (%s); run with "
                                "FT_SYNC_DEBUG=1 to name the op", cudaGetErrorString(e),
                                cudaGetErrorName(e));
        memcpy((char *)dst + off, s->pinned, chunk);
        off += chunk;
    }
    s->pinned_pending = 0; /* the stream is idle: nothing reads the buffer */
    s->pinned_used = 0;
    return FT_OK;
}

/*
 * cuda_common.cuh - what every kernels/cuda/ .cu file shares: the context's
 * stream, checked CUDA calls that turn into ft_status, dtype load/store
 * helpers (f32 / f16 / bf16 storage, f32 math) and launch geometry.
 */
#ifndef FT_CUDA_COMMON_CUH
#define FT_CUDA_COMMON_CUH

#ifdef FT_CUDA_EMU
/* the host emulation build (tests/emu/): device code compiled as host C++ */
#include "emu.cuh"
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <utility>

#include "cuda_kernels.h"

extern "C" {
/* The context's non-blocking stream (engine/cuda_backend.c). */
cudaStream_t ft_cuda_stream(ft_ctx *ctx);
/* Scratch device memory valid until the op returns (from the caching allocator;
 * never cudaMalloc inside a captured region). NULL + error on failure. */
void *ft_cuda_scratch(ft_ctx *ctx, size_t bytes, ft_block **block);
/* 1 when this context launches its kernels with programmatic dependent launch
 * (engine/cuda_backend.c decides once, at context creation). */
int ft_cuda_pdl(ft_ctx *ctx);
}

/* Checks a CUDA runtime call; on failure records "<expr>: <cuda error>" and returns it. */
#define FT_CUDA_TRY(ctx, expr)                                                            \
    do {                                                                                  \
        cudaError_t e_ = (expr);                                                          \
        if (e_ != cudaSuccess)                                                            \
            return ft_set_error((ctx), FT_ERR_CUDA, "%s failed: %s (%s:%d)", #expr,       \
                                cudaGetErrorString(e_), __FILE__, __LINE__);              \
    } while (0)

/* After a launch: the launch itself can fail (bad configuration, no kernel image). */
#define FT_CUDA_LAUNCH_CHECK(ctx, what)                                                   \
    do {                                                                                  \
        cudaError_t e_ = cudaGetLastError();                                              \
        if (e_ != cudaSuccess)                                                            \
            return ft_set_error((ctx), FT_ERR_CUDA, "launch of %s failed: %s", (what),    \
                                cudaGetErrorString(e_));                                  \
    } while (0)

/* Every kernel launch: FT_LAUNCH(ctx, grid, block, smem, stream, kernel<T...>)(args...).
 * One spelling for the device build and the host emulator's launcher (emu.cuh).
 *
 * Programmatic dependent launch (PDL, sm_90+): when the context allows it, the
 * launch carries cudaLaunchAttributeProgrammaticStreamSerialization, so the
 * driver may start this grid while the kernel before it in the stream is still
 * draining; the grid's launch latency and block scheduling then hide behind
 * that kernel's tail. It is safe because every kernel of this directory opens
 * with FT_KERNEL_PROLOGUE, whose griddepcontrol.wait holds each thread until
 * the grids it depends on have completed and their writes are visible: no
 * kernel reads or writes global memory before it (tests/lint.sh checks the
 * prologue comes first; the emulator checks every thread of a PDL launch ran
 * it). A launch that fails sets the error cudaGetLastError returns, which
 * FT_CUDA_LAUNCH_CHECK reads, as for <<< >>>. */
#ifndef FT_CUDA_EMU
namespace ft_launch {
template <typename... P> struct bound {
    void (*kernel)(P...);
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[1];
    template <typename... A> void operator()(A &&...a) {
        cfg.attrs = cfg.numAttrs ? attr : NULL;
        (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(a)...);
    }
};
template <typename... P>
static inline bound<P...> make(int pdl, dim3 g, dim3 b, size_t smem, cudaStream_t s, void (*k)(P...)) {
    bound<P...> l;
    l.kernel = k;
    l.cfg = cudaLaunchConfig_t{};
    l.cfg.gridDim = g;
    l.cfg.blockDim = b;
    l.cfg.dynamicSmemBytes = smem;
    l.cfg.stream = s;
    l.attr[0] = cudaLaunchAttribute{};
    l.attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    l.attr[0].val.programmaticStreamSerializationAllowed = 1;
    l.cfg.numAttrs = pdl ? 1 : 0;
    return l;
}
} // namespace ft_launch
#define FT_LAUNCH(ctx, grid, block, smem, stream, ...)                                     \
    ::ft_launch::make(ft_cuda_pdl(ctx), dim3(grid), dim3(block), (size_t)(smem), (stream), &__VA_ARGS__)

/* The first statement of every kernel: wait for the grids this one depends on
 * (a no-op unless it was launched with PDL), then let the next grid in the
 * stream launch early (a hint; that grid waits for this one in its own prologue). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FT_KERNEL_PROLOGUE()                                                               \
    do {                                                                                   \
        asm volatile("griddepcontrol.wait;" ::: "memory");                                 \
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");                    \
    } while (0)
#else
#define FT_KERNEL_PROLOGUE() do { } while (0)
#endif

/* the block's dynamic shared memory as `type *name`, 16-byte aligned: kernels read it
 * as float4 / uint4 (tests/lint.sh refuses an extern __shared__ without __align__) */
#define FT_DYN_SMEM(type, name) extern __shared__ __align__(16) type name[]
#endif

/* ---- storage <-> f32 ---- */
__device__ __forceinline__ float ft_ld(const float *p) { return *p; }
__device__ __forceinline__ float ft_ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float ft_ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void ft_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void ft_st(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void ft_st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* Calls F.run<T>() (a member template returning int) with T the storage type of
 * dtype; returns its status. */
#define FT_DISPATCH_FLOAT(ctx, dtype, F)                                                  \
    ((dtype) == FT_DTYPE_F32    ? (F).template run<float>()                               \
     : (dtype) == FT_DTYPE_F16  ? (F).template run<__half>()                              \
     : (dtype) == FT_DTYPE_BF16 ? (F).template run<__nv_bfloat16>()                       \
                                : ft_set_error((ctx), FT_ERR_UNSUPPORTED, "dtype %s not supported", \
                                               ft_dtype_name(dtype)))

static inline unsigned ft_cuda_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535 * 16 ? 65535 * 16 : (b < 1 ? 1 : b));
}

#endif /* FT_CUDA_COMMON_CUH */

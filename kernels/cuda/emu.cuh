/*
 * emu.cuh - lets the kernels of this directory compile as plain host C++ for
 * the CUDA emulator of the tests (tests/emu/emu.h): included first by
 * cuda_common.cuh when FT_CUDA_EMU is defined, never in a real CUDA build.
 *
 * Device qualifiers become nothing, __shared__ variables become function
 * statics (blocks run one at a time, so a static is exactly one block's shared
 * memory), the built-in indices read the running fiber, barriers and warp
 * intrinsics go through the scheduler, and FT_LAUNCH hands a closure of the
 * kernel and its arguments to the fake runtime's ft_emu_launch, with the
 * context's programmatic-dependent-launch choice.
 */
#ifndef FT_EMU_CUH
#define FT_EMU_CUH

/* before the CUDA headers, which keep qualifiers already defined */
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __launch_bounds__(...) /* not enforced here: tests/ptxas_check.sh checks the bounds on sm_90 */
#define __grid_constant__      /* parameters are per-thread copies here (closure below) */

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "../../tests/emu/emu.h"

#define threadIdx (ft_emu_self->thread_idx)
#define blockIdx (ft_emu_self->block_idx)
#define blockDim (ft_emu_self->block_dim)
#define gridDim (ft_emu_self->grid_dim)
#define warpSize 32

#define FT_DYN_SMEM(type, name) type *name = (type *)ft_emu_dyn_smem()

static inline void __syncthreads(void) { ft_emu_syncthreads(); }
static inline void __threadfence(void) {}
static inline void __threadfence_block(void) {}

static inline float __int_as_float(int i) { float f; memcpy(&f, &i, sizeof f); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, sizeof i); return i; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, sizeof u); return u; }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
template <typename T> static inline T __ldg(const T *p) { return *p; }

/* Fibers switch only at barriers, so read-modify-write is atomic by construction. */
template <typename T> static inline T atomicAdd(T *p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> static inline T atomicExch(T *p, T v) { T o = *p; *p = v; return o; }
template <typename T> static inline T atomicMax(T *p, T v) { T o = *p; if (v > o) *p = v; return o; }
template <typename T> static inline T atomicMin(T *p, T v) { T o = *p; if (v < o) *p = v; return o; }
template <typename T> static inline T atomicCAS(T *p, T cmp, T v) {
    T o = *p;
    if (o == cmp) *p = v;
    return o;
}

namespace ft_emu {
/* Exchanges one value across the warp; returns the value of lane src (own
 * value when src lies outside the mask, as the hardware leaves it). */
template <typename T> static inline T exchange(unsigned mask, T v, int src) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a big type");
    uint64_t in = 0, all[32];
    memcpy(&in, &v, sizeof v);
    ft_emu_warp_exchange(mask, in, all);
    if (src < 0 || src > 31 || !((mask >> src) & 1u)) return v;
    T r;
    memcpy(&r, &all[src], sizeof r);
    return r;
}
static inline int seg_base(int width) { return (int)(ft_emu_self->lane & ~(unsigned)(width - 1)); }
} // namespace ft_emu

template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    return ft_emu::exchange(mask, v, ft_emu::seg_base(width) + (src & (width - 1)));
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int lm, int width = 32) {
    int lane = (int)ft_emu_self->lane, src = lane ^ lm;
    if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane; /* outside the segment */
    return ft_emu::exchange(mask, v, src);
}
template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
    int lane = (int)ft_emu_self->lane, src = lane + (int)d;
    if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
    return ft_emu::exchange(mask, v, src);
}
template <typename T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
    int lane = (int)ft_emu_self->lane, src = lane - (int)d;
    if (src < ft_emu::seg_base(width)) src = lane;
    return ft_emu::exchange(mask, v, src);
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    uint64_t all[32];
    ft_emu_warp_exchange(mask, pred ? 1u : 0u, all);
    unsigned r = 0;
    for (int l = 0; l < 32; l++)
        if (((mask >> l) & 1u) && all[l]) r |= 1u << l;
    return r;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    uint64_t all[32];
    ft_emu_warp_exchange(mask, 0, all);
}

namespace ft_emu {
template <typename... P> struct closure {
    void (*kernel)(P...);
    std::tuple<typename std::decay<P>::type...> args;
    static void thread(void *c) {
        closure *cl = (closure *)c;
        std::apply(cl->kernel, cl->args); /* each thread gets its own copy of the parameters */
    }
    static void release(void *c) { delete (closure *)c; }
};

template <typename... P> struct bound {
    void (*kernel)(P...);
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    const char *name;
    int pdl;
    template <typename... A> void operator()(A &&...a) const {
        static_assert(sizeof...(A) == sizeof...(P), "kernel argument count");
        closure<P...> *c = new closure<P...>{kernel, std::tuple<typename std::decay<P>::type...>(
                                                         std::forward<A>(a)...)};
        (void)ft_emu_launch(stream, grid, block, smem, &closure<P...>::thread, c,
                            &closure<P...>::release, name, pdl);
    }
};

template <typename... P>
static inline bound<P...> launch(int pdl, dim3 g, dim3 b, size_t smem, cudaStream_t s,
                                 const char *name, void (*k)(P...)) {
    return bound<P...>{k, g, b, smem, s, name, pdl};
}
} // namespace ft_emu

#define FT_LAUNCH(ctx, grid, block, smem, stream, ...)                                     \
    ::ft_emu::launch(ft_cuda_pdl(ctx), dim3(grid), dim3(block), (size_t)(smem), (stream),       \
                     #__VA_ARGS__, &__VA_ARGS__)

/* griddepcontrol.wait is recorded per thread: a PDL launch whose thread ends
 * without it stops the emulator (emu_sched.c); launch_dependents is a hint. */
#define FT_KERNEL_PROLOGUE() ft_emu_gdc_wait()

#endif /* FT_EMU_CUH */

/*
 * emu.h - the host emulation of the CUDA device that lets CI run the CUDA
 * backend's logic without a GPU: the .cu kernels compiled as host C++ (see
 * kernels/cuda/emu.cuh), run thread by thread as fibers (emu_sched.c), beside a
 * fake CUDA runtime (fake_cudart.c, fake_graph.c) and fake cuBLAS / cuBLASLt
 * (fake_cublas.c) that implement the documented semantics of the calls the
 * engine makes.
 *
 * It proves indexing, launch geometry, barriers, shuffles, stream capture rules
 * and host/device bookkeeping; it proves nothing about speed, memory ordering
 * between real SMs, or the real libraries' corner cases. A real GPU run stays
 * the authority (tests/gpu_session.sh).
 *
 * Execution model: every stream runs its work at once, in submission order
 * (the host waits for nothing because nothing is pending). With FT_EMU_LAZY=1
 * the work waits instead in the stream's FIFO queue, which runs only when the
 * host synchronises with the stream (fake_graph.c lists the sync points), so
 * the host sees what it would see on a device that has not got there yet.
 * While a stream is being captured, work submitted to it is recorded into the
 * capture's graph instead, and runs each time an instance of that graph is
 * launched.
 */
#ifndef FT_EMU_H
#define FT_EMU_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fake_cudart.c, fake_graph.c: streams, capture, device memory -------- */

/* One unit of stream work: run(arg) performs it; release(arg) (may be NULL)
 * frees arg once no stream, graph or graph instance refers to it any more. */
typedef struct ft_emu_work {
    void (*run)(void *arg);
    void (*release)(void *arg);
    void *arg;
    const char *what; /* for error messages: "kernel softmax_warp_kernel", "cublasLtMatmul" */
    size_t bytes;     /* copies and memsets: for their CUPTI records */
    int copy_dir;     /* copies: CUPTI's memcpy kind (1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH) */
    int pdl;          /* kernels: launched with programmatic stream serialization */
} ft_emu_work;

/* Runs w now on stream s (queues it in lazy mode), or records it if s is being
 * captured. On error the work is released at once. Stream 0 (legacy default)
 * is refused with cudaErrorInvalidResourceHandle: the engine must never use it. */
cudaError_t ft_emu_submit(cudaStream_t s, ft_emu_work w);

/* Device work items (kernels, GEMMs, copies, memsets) submitted so far,
 * whether run, queued or captured; graph launches are not counted. Lets a test
 * count what each op launches. */
unsigned long long ft_emu_work_submitted(void);

/* A kernel launch: checks the configuration as the driver would (block at most
 * 1024 threads and 1024 x 1024 x 64, grid y/z at most 65535, dynamic shared
 * memory at most 48 KiB, no zero dims; programmatic dependent launch only on a
 * device of compute capability 9.0 or newer), sets the sticky launch error that
 * cudaGetLastError returns, and submits a work item that runs the grid with
 * ft_emu_run_grid. closure is released with release_closure. pdl: the launch
 * carries cudaLaunchAttributeProgrammaticStreamSerialization. */
cudaError_t ft_emu_launch(cudaStream_t s, dim3 grid, dim3 block, size_t dyn_smem,
                          void (*thread_fn)(void *closure), void *closure,
                          void (*release_closure)(void *closure), const char *name, int pdl);

/* Kernel launches submitted so far with programmatic dependent launch. */
unsigned long long ft_emu_pdl_launches(void);

/* The PTX architecture the kernels count as compiled from (FT_EMU_PTX_ARCH,
 * default 90; fake_func.c): below 90 their FT_KERNEL_PROLOGUE is empty, as a
 * GPU build for an older architecture has no griddepcontrol.wait. */
int ft_emu_ptx_arch(void);

/* 1 when p lies inside a live cudaMalloc allocation (n bytes from p too). */
int ft_emu_is_device_ptr(const void *p, size_t n);

/* ---- emu_sched.c: running a grid ------------------------------------------ */

/* The running emulated thread. */
typedef struct ft_emu_thread {
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
    unsigned lane, warp;   /* lane in warp, warp in block */
    int gdc_waited;        /* the thread ran griddepcontrol.wait (FT_KERNEL_PROLOGUE) */
} ft_emu_thread;

/* Runs thread_fn(closure) once per thread of the grid, blocks one after the
 * other, the threads of a block as cooperative fibers that switch only at
 * barriers (__syncthreads, warp shuffles). A barrier that can never complete
 * (a thread exited or waits elsewhere) aborts the process with a message that
 * names the kernel: on a GPU that is a hang or undefined behaviour. */
void ft_emu_run_grid(dim3 grid, dim3 block, size_t dyn_smem, void (*thread_fn)(void *),
                     void *closure, const char *name, int pdl);

/* griddepcontrol.wait. In a grid launched with PDL (pdl above) every thread
 * must run it before it ends, or the emulator stops naming the kernel: on a GPU
 * such a thread could read what the previous kernel has not written yet, or
 * overwrite what it still reads. Kernels run it first (FT_KERNEL_PROLOGUE);
 * with ft_emu_ptx_arch() below 90 it does nothing (compiled out). */
void ft_emu_gdc_wait(void);

extern ft_emu_thread *ft_emu_self; /* valid inside thread_fn */

/* __syncthreads(): every thread of the block that has not exited. */
void ft_emu_syncthreads(void);

/* Warp exchange for shuffles and votes: each lane in mask gives v; on return
 * out[l] holds lane l's value for every lane l in mask. All lanes in mask must
 * call it (with the same mask), as __shfl_sync requires. */
void ft_emu_warp_exchange(unsigned mask, uint64_t v, uint64_t out[32]);

/* The block's dynamic shared memory (extern __shared__), 16-byte aligned. */
void *ft_emu_dyn_smem(void);

/* ---- fake_cublas.c: what cublasLtMatmul was given ------------------------ */

/* One accepted cublasLtMatmul call as the library saw it (column-major A, B,
 * C, D): the layouts' types and leading dimensions, the pointers, the epilogue.
 * On a GPU a 16-bit operand whose rows (ld x element size) or pointer are not
 * 16-byte aligned rules out the fast kernels; tests check the engine's layouts
 * through this (tests/test_cuda_ops.c). */
typedef struct ft_emu_lt_call {
    int type[4];           /* cudaDataType of A, B, C, D */
    int64_t ld[4], stride[4];
    const void *ptr[4];
    uint32_t epilogue;     /* cublasLtEpilogue_t */
    unsigned long long n;  /* accepted cublasLtMatmul calls so far, this one included */
    unsigned long long unaligned16[4]; /* so far: calls whose operand i had 16-bit elements
                                          and rows or pointer not 16-byte aligned */
} ft_emu_lt_call;

/* The last accepted call, with the running counts (n 0: none yet). */
ft_emu_lt_call ft_emu_lt_last(void);

#ifdef __cplusplus
}
#endif

#endif /* FT_EMU_H */

/*
 * gemm_tune.cu - which of cuBLASLt's candidate algorithms a GEMM plan runs.
 *
 * The heuristic ranks algorithms by a model of the GPU; for the small-M GEMMs
 * of batch-1 inference its first guess is often not the fastest. So, as
 * TensorRT picks tactics and PyTorch's TunableOp does on request, a new GEMM
 * shape times the heuristic's first FT_GEMM_TUNE_CANDIDATES answers on the
 * call's own operands and keeps the fastest. That happens once per shape and
 * process: the choice is remembered process-wide (per device and plan key), so
 * eager, graph and static mode, and every context, run the same algorithm,
 * and a comparison between them is not also a comparison of GEMM kernels.
 * FT_GEMM_AUTOTUNE=0 keeps the heuristic's first guess everywhere.
 *
 * What is timed is the GEMM, not its launch: at batch 1 a GEMM takes a few
 * microseconds, about what the host takes to enqueue it, so events recorded
 * around a run on an idle device measure the host's cublasLtMatmul call. Each
 * timed batch is therefore queued behind a spin kernel (TUNE_SPIN_US of device
 * time, much longer than the host needs to enqueue the batch): the start event
 * and the runs wait in the stream while it spins, and then run back to back,
 * so the events bracket device time only. A candidate that fails at the call
 * (any status: NOT_SUPPORTED, or a launch failure) is skipped and the next
 * one timed; the op fails only if the device itself is left in error.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"
#include "../../engine/cuda_backend_internal.h"

#define TUNE_REPS 5        /* timed runs per candidate, after one untimed */
#define TUNE_LONG_MS 0.25f /* a run this long is timed once: event resolution is ~0.5 us */
#define TUNED_SLOTS 1024   /* process-wide choices; past that, shapes are timed per context */
#define TUNE_SPIN_US 200   /* device time ahead of each timed batch: >> the host's enqueue time */

#ifdef FT_CUDA_EMU
#include <time.h>
#endif

/* Keeps the device busy for `ns` nanoseconds (one thread; the clock is the
 * device's global timer), so that the work queued behind it starts back to back. */
__global__ void ft_k_tune_spin(unsigned long long ns) {
    FT_KERNEL_PROLOGUE();
#if defined(__CUDA_ARCH__)
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
#elif defined(FT_CUDA_EMU)
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((unsigned long long)((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec)) < ns);
#endif
}

namespace {
struct tuned {
    int used, device;
    ft_gemm_key key;
    cublasLtMatmulAlgo_t algo;
    int choice;
};
tuned g_tuned[TUNED_SLOTS];
pthread_mutex_t g_tuned_mu = PTHREAD_MUTEX_INITIALIZER;

int find(int device, const ft_gemm_key *k, cublasLtMatmulAlgo_t *algo, int *choice) {
    int found = 0;
    pthread_mutex_lock(&g_tuned_mu);
    for (int i = 0; i < TUNED_SLOTS && g_tuned[i].used && !found; i++)
        if (g_tuned[i].device == device && !memcmp(&g_tuned[i].key, k, sizeof *k)) {
            *algo = g_tuned[i].algo;
            *choice = g_tuned[i].choice;
            found = 1;
        }
    pthread_mutex_unlock(&g_tuned_mu);
    return found;
}

void remember(int device, const ft_gemm_key *k, const cublasLtMatmulAlgo_t *algo, int choice) {
    pthread_mutex_lock(&g_tuned_mu);
    for (int i = 0; i < TUNED_SLOTS; i++) {
        if (g_tuned[i].used && (g_tuned[i].device != device || memcmp(&g_tuned[i].key, k, sizeof *k)))
            continue;
        /* a free slot, or another context's choice for the same shape: the first one stays */
        if (!g_tuned[i].used) {
            g_tuned[i].key = *k;
            g_tuned[i].device = device;
            g_tuned[i].algo = *algo;
            g_tuned[i].choice = choice;
            g_tuned[i].used = 1;
        }
        break;
    }
    pthread_mutex_unlock(&g_tuned_mu);
}

int overlaps(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return a && b && na && nb && x < y + nb && y < x + na;
}

/* One run of candidate algo: the status cuBLASLt gives at the call. */
cublasStatus_t run(ft_ctx *ctx, ft_cuda_state *s, ft_gemm_plan *p, const cublasLtMatmulAlgo_t *algo,
                   const ft_gemm_tune_call *c) {
    return cublasLtMatmul(s->lt, p->op, &c->alpha, c->lt_a, p->la, c->lt_b, p->lb, &c->beta,
                          c->c_in ? c->c_in : c->d, p->lc, c->d, p->lc, algo, s->lt_ws, s->lt_ws_size,
                          ft_cuda_stream(ctx));
}

/* A candidate that failed at the call: whatever it left is cleared so the
 * next one can run; FT_OK unless the device itself is left in error (a
 * sticky error: the context is unusable, and that is the op's failure). */
ft_status skip_failed(ft_ctx *ctx, cudaStream_t st, cublasStatus_t bs) {
    (void)cudaGetLastError(); /* a launch error the call left behind */
    cudaError_t e = cudaStreamSynchronize(st);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if ((e = cudaStreamSynchronize(st)) != cudaSuccess)
            return ft_set_error(ctx, FT_ERR_CUDA,
                                "cublasLtMatmul (autotuning) failed (cuBLAS status %d) and left the device "
                                "in error: %s", (int)bs, cudaGetErrorString(e));
    }
    return FT_OK;
}

/* Mean milliseconds per run of cand, or < 0 when cuBLASLt refuses it at the
 * call (NOT_SUPPORTED or any other failure: the candidate is skipped). */
ft_status time_one(ft_ctx *ctx, ft_cuda_state *s, ft_gemm_plan *p, const cublasLtMatmulAlgo_t *algo,
                   const ft_gemm_tune_call *c, float *ms) {
    *ms = -1.0f;
    cudaStream_t st = ft_cuda_stream(ctx);
    cublasStatus_t bs = run(ctx, s, p, algo, c); /* untimed: first-launch costs */
    if (bs == CUBLAS_STATUS_NOT_SUPPORTED) return FT_OK;
    if (bs != CUBLAS_STATUS_SUCCESS) return skip_failed(ctx, st, bs);
    /* one timed run; a GEMM long enough to time alone (large batches) stops
     * there, a short one is timed over TUNE_REPS - 1 more */
    float total = 0.0f;
    int done = 0;
    for (int batch = 1; done < TUNE_REPS; batch = TUNE_REPS - 1) {
        /* the device spins while the host queues the start event and the runs */
        FT_LAUNCH(ctx, 1, 32, 0, st, ft_k_tune_spin)((unsigned long long)TUNE_SPIN_US * 1000ull);
        FT_CUDA_LAUNCH_CHECK(ctx, "the autotuner's spin kernel");
        FT_CUDA_TRY(ctx, cudaEventRecord(s->tune_ev[0], st));
        for (int r = 0; r < batch; r++)
            if ((bs = run(ctx, s, p, algo, c)) != CUBLAS_STATUS_SUCCESS) return skip_failed(ctx, st, bs);
        FT_CUDA_TRY(ctx, cudaEventRecord(s->tune_ev[1], st));
        FT_CUDA_TRY(ctx, cudaEventSynchronize(s->tune_ev[1]));
        float t = 0.0f;
        FT_CUDA_TRY(ctx, cudaEventElapsedTime(&t, s->tune_ev[0], s->tune_ev[1]));
        total += t;
        done += batch;
        if (t >= TUNE_LONG_MS) break;
    }
    *ms = total / (float)done;
    return FT_OK;
}
} // namespace

extern "C" ft_status ft_cuda_gemm_choose(ft_ctx *ctx, ft_cuda_state *s, ft_gemm_plan *p,
                                         const cublasLtMatmulHeuristicResult_t *cand, int n,
                                         const ft_gemm_tune_call *c) {
    if (n <= 1 || !s->gemm_tune) return FT_OK;
    cublasLtMatmulAlgo_t algo;
    int choice = 0;
    if (find(s->device, &p->key, &algo, &choice)) {
        p->algo = algo;
        p->choice = choice;
        s->gemm_reused++;
        return FT_OK;
    }
    /* timing synchronises: never inside a capture (the static plan's warm-up
     * run, before capture, is where its shapes get tuned) */
    if (ft_cuda_capturing(ctx)) return FT_OK;
    if (overlaps(c->d, c->bytes_c, c->lt_a, c->bytes_a) || overlaps(c->d, c->bytes_c, c->lt_b, c->bytes_b) ||
        overlaps(c->d, c->bytes_c, c->bias, c->bytes_bias) || overlaps(c->d, c->bytes_c, c->c_in, c->bytes_c))
        return FT_OK;
    for (int i = 0; i < 2; i++)
        if (!s->tune_ev[i]) FT_CUDA_TRY(ctx, cudaEventCreate(&s->tune_ev[i]));
    int best = -1;
    float best_ms = 0.0f;
    for (int i = 0; i < n && i < FT_GEMM_TUNE_CANDIDATES; i++) {
        if (cand[i].state != CUBLAS_STATUS_SUCCESS || cand[i].workspaceSize > s->lt_ws_size) continue;
        float ms;
        ft_status st = time_one(ctx, s, p, &cand[i].algo, c, &ms);
        if (st != FT_OK) return st;
        if (ms >= 0.0f && (best < 0 || ms < best_ms)) {
            best = i;
            best_ms = ms;
        }
    }
    if (best < 0) return FT_OK; /* none ran: the first guess, left to fail or not at the real call */
    p->algo = cand[best].algo;
    p->choice = best;
    s->gemm_tuned++;
    if (best != 0) s->gemm_changed++;
    remember(s->device, &p->key, &p->algo, best);
    /* another context may have remembered a choice meanwhile: take that one */
    if (find(s->device, &p->key, &algo, &choice)) {
        p->algo = algo;
        p->choice = choice;
    }
    return FT_OK;
}

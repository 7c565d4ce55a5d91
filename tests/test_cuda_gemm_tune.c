/*
 * test_cuda_gemm_tune.c - the GEMM autotuner (kernels/cuda/gemm_tune.cu): a
 * new GEMM shape times cuBLASLt's candidates and keeps the fastest, once per
 * process; never while a stream captures, never when the output overlaps an
 * operand; FT_GEMM_AUTOTUNE=0 keeps the heuristic's first guess.
 *
 * On the emulator the fake heuristic gives three candidates that compute the
 * same (FT_EMU_LT_ALGOS=3), and FT_EMU_LT_SLOW_ALGO=0 makes the first one 2 ms slower, so the
 * tuner must be seen to measure: it has to leave the first guess. On a GPU the
 * same tests check the bookkeeping and the results (the timings are real).
 * Every test uses GEMM shapes of its own: choices are remembered process-wide.
 */
#include "ft_test.h"
#include "ft_test_env.h"
#include "ftengine.h"
#include "ft_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef FT_WITH_CUDA
#include "cuda_backend_internal.h"
#include "../kernels/cuda/gemm.h"

static int emulated(void) {
#ifdef FT_CUDA_EMU
    return 1;
#else
    return 0;
#endif
}

/* The cached plan of ctx for an m x n x k GEMM, or NULL. */
static const ft_gemm_plan *plan_of(ft_ctx *ctx, int64_t m, int64_t n, int64_t k) {
    const ft_cuda_state *s = ft_cuda_state_of(ctx);
    for (int i = 0; i < FT_GEMM_CACHE_SLOTS; i++) {
        const ft_gemm_plan *p = &s->gemm_cache[i];
        if (p->used && !p->no_algo && p->key.m == m && p->key.n == n && p->key.k == k) return p;
    }
    return NULL;
}

/* y = x w^T (+ y when in_place) for x [m,k], w [n,k] of small integers (exact
 * in f32), through ft_cuda_gemm on ctx; checks every element against a host
 * product. 1 when it ran and matched. */
static int gemm_check(ft_ctx *ctx, int64_t m, int64_t n, int64_t k, int in_place) {
    float *x = malloc((size_t)(m * k) * 4), *w = malloc((size_t)(n * k) * 4), *y0 = malloc((size_t)(m * n) * 4),
          *y = malloc((size_t)(m * n) * 4);
    int ok = x && w && y0 && y;
    for (int64_t i = 0; ok && i < m * k; i++) x[i] = (float)((i * 7) % 5) - 2.0f;
    for (int64_t i = 0; ok && i < n * k; i++) w[i] = (float)((i * 3) % 7) - 3.0f;
    for (int64_t i = 0; ok && i < m * n; i++) y0[i] = (float)(i % 3);
    int64_t mark = ft_arena_mark(ctx), xs[2] = {m, k}, ws[2] = {n, k}, ys[2] = {m, n};
    ft_tensor *tx = ok ? ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, xs, x) : NULL;
    ft_tensor *tw = ok ? ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, ws, w) : NULL;
    ft_tensor *ty = ok ? ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, ys, y0) : NULL;
    ok = tx && tw && ty;
    if (ok) {
        ft_gemm_desc g;
        memset(&g, 0, sizeof g);
        g.dtype = FT_DTYPE_F32;
        g.trans_b = true;
        g.m = m, g.n = n, g.k = k, g.batch = 1;
        g.a = tx->data, g.lda = k;
        g.b = tw->data, g.ldb = k;
        g.c = ty->data, g.ldc = n;
        g.residual = in_place ? ty->data : NULL;
        g.alpha = 1.0f;
        ok = ft_cuda_gemm(ctx, &g) == FT_OK &&
             ft_tensor_to_host(ctx, ty, FT_DTYPE_F32, y, (size_t)(m * n) * 4) == FT_OK;
        CHECK(ok, "GEMM %lldx%lldx%lld: %s", (long long)m, (long long)n, (long long)k, ft_ctx_errmsg(ctx));
    }
    int64_t bad = 0;
    for (int64_t i = 0; ok && i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float r = in_place ? y0[i * n + j] : 0.0f;
            for (int64_t q = 0; q < k; q++) r += x[i * k + q] * w[j * k + q];
            bad += y[i * n + j] != r;
        }
    CHECK(!ok || !bad, "GEMM %lldx%lldx%lld: %lld wrong elements", (long long)m, (long long)n, (long long)k,
          (long long)bad);
    ft_arena_release_to(ctx, mark);
    free(x), free(w), free(y0), free(y);
    return ok && !bad;
}

static void set_slow(const char *v) {
    if (v) setenv("FT_EMU_LT_SLOW_ALGO", v, 1);
    else unsetenv("FT_EMU_LT_SLOW_ALGO");
}

/* A new shape is timed once; a second context takes the same choice. */
static void test_cuda_gemm_tune_measures_and_shares(void) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
    set_slow("0");
    ft_ctx *a = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_GEMM_AUTOTUNE", NULL);
    ft_ctx *b = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_GEMM_AUTOTUNE", NULL);
    if (a && b) {
        ft_cuda_state *sa = ft_cuda_state_of(a), *sb = ft_cuda_state_of(b);
        gemm_check(a, 37, 53, 29, 0);
        const ft_gemm_plan *pa = plan_of(a, 37, 53, 29);
        CHECK(pa && sa->gemm_tuned + sa->gemm_reused <= 1, "plan %p, tuned %llu reused %llu", (const void *)pa,
              (unsigned long long)sa->gemm_tuned, (unsigned long long)sa->gemm_reused);
        if (emulated())
            CHECK(sa->gemm_tuned == 1 && sa->gemm_changed == 1 && pa && pa->choice != 0,
                  "the slow first guess was kept: tuned %llu changed %llu choice %d",
                  (unsigned long long)sa->gemm_tuned, (unsigned long long)sa->gemm_changed, pa ? pa->choice : -1);
        /* the second context: no timing, the first one's choice */
        gemm_check(b, 37, 53, 29, 0);
        const ft_gemm_plan *pb = plan_of(b, 37, 53, 29);
        CHECK(sb->gemm_tuned == 0 && pb && pa && pb->choice == pa->choice &&
                  !memcmp(&pb->algo, &pa->algo, sizeof pa->algo),
              "second context: tuned %llu, choice %d vs %d", (unsigned long long)sb->gemm_tuned,
              pb ? pb->choice : -1, pa ? pa->choice : -1);
        if (emulated()) CHECK(sb->gemm_reused == 1, "reused %llu", (unsigned long long)sb->gemm_reused);
        ft_gemm_stats ga = ft_ctx_gemm_stats(a), gb = ft_ctx_gemm_stats(b);
        CHECK(ga.autotune == 1 && ga.plans == 1 && ga.tuned == sa->gemm_tuned && ga.changed == sa->gemm_changed &&
                  gb.reused == sb->gemm_reused && gb.tuned == 0,
              "ft_ctx_gemm_stats: plans %llu tuned %llu changed %llu / reused %llu",
              (unsigned long long)ga.plans, (unsigned long long)ga.tuned, (unsigned long long)ga.changed,
              (unsigned long long)gb.reused);
    }
    set_slow(NULL);
    ft_ctx_free(a);
    ft_ctx_free(b);
}

/* FT_GEMM_AUTOTUNE=0: the heuristic's first guess, untimed. */
static void test_cuda_gemm_tune_off(void) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
    set_slow("0");
    ft_ctx *c = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_GEMM_AUTOTUNE", "0");
    if (c) {
        ft_cuda_state *s = ft_cuda_state_of(c);
        gemm_check(c, 41, 19, 23, 0);
        const ft_gemm_plan *p = plan_of(c, 41, 19, 23);
        CHECK(s->gemm_tune == 0 && s->gemm_tuned == 0 && s->gemm_reused == 0 && p && p->choice == 0,
              "autotune off: tuned %llu reused %llu choice %d", (unsigned long long)s->gemm_tuned,
              (unsigned long long)s->gemm_reused, p ? p->choice : -1);
        CHECK(ft_ctx_gemm_stats(c).autotune == 0, "ft_ctx_gemm_stats says autotune is on");
    }
    set_slow(NULL);
    ft_ctx_free(c);
}

/* ft_ctx_options.gemm_autotune overrides FT_GEMM_AUTOTUNE both ways. */
static void test_cuda_gemm_tune_option(void) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
    ft_ctx_options o = ft_ctx_options_default();
    o.device = FT_DEVICE_CUDA;
    o.gemm_autotune = FT_OPT_OFF;
    ft_ctx *off = NULL, *on = NULL;
    CHECK_OK(off, ft_ctx_create_ex(&o, &off));
    setenv("FT_GEMM_AUTOTUNE", "0", 1);
    o.gemm_autotune = FT_OPT_ON;
    CHECK_OK(on, ft_ctx_create_ex(&o, &on));
    unsetenv("FT_GEMM_AUTOTUNE");
    CHECK(off && on && ft_ctx_gemm_stats(off).autotune == 0 && ft_ctx_gemm_stats(on).autotune == 1,
          "autotune: option off gives %d, option on under FT_GEMM_AUTOTUNE=0 gives %d",
          off ? ft_ctx_gemm_stats(off).autotune : -1, on ? ft_ctx_gemm_stats(on).autotune : -1);
    ft_ctx_free(off);
    ft_ctx_free(on);
}

/* An output that is also an input (C == D, in place) is not rerun: each run
 * would add the product again. */
static void test_cuda_gemm_tune_skips_in_place(void) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
    ft_ctx *c = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_GEMM_AUTOTUNE", NULL);
    if (c) {
        ft_cuda_state *s = ft_cuda_state_of(c);
        CHECK(gemm_check(c, 13, 31, 47, 1), "in-place GEMM");
        const ft_gemm_plan *p = plan_of(c, 13, 31, 47);
        CHECK(s->gemm_tuned == 0 && p && p->choice == 0, "in place: tuned %llu, choice %d",
              (unsigned long long)s->gemm_tuned, p ? p->choice : -1);
    }
    ft_ctx_free(c);
}

/* A shape first seen while the stream captures keeps the first guess: timing
 * would synchronise, which invalidates a capture. */
static void test_cuda_gemm_tune_not_in_capture(void) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
    ft_ctx *c = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_GEMM_AUTOTUNE", NULL);
    if (!c) return;
    ft_cuda_state *s = ft_cuda_state_of(c);
    int64_t m = 11, n = 59, k = 17, mark = ft_arena_mark(c), xs[2] = {m, k}, ws[2] = {n, k}, ys[2] = {m, n};
    float *h = calloc((size_t)(n * k + m * n), sizeof(float));
    ft_tensor *tx = h ? ft_tensor_from_host(c, FT_DTYPE_F32, 2, xs, h) : NULL;
    ft_tensor *tw = h ? ft_tensor_from_host(c, FT_DTYPE_F32, 2, ws, h) : NULL;
    ft_tensor *ty = h ? ft_tensor_from_host(c, FT_DTYPE_F32, 2, ys, h) : NULL;
    CHECK(tx && tw && ty && ft_ctx_sync(c) == FT_OK, "setup: %s", ft_ctx_errmsg(c));
    if (tx && tw && ty) {
        ft_gemm_desc g;
        memset(&g, 0, sizeof g);
        g.dtype = FT_DTYPE_F32;
        g.trans_b = true;
        g.m = m, g.n = n, g.k = k, g.batch = 1;
        g.a = tx->data, g.lda = k, g.b = tw->data, g.ldb = k, g.c = ty->data, g.ldc = n;
        g.alpha = 1.0f;
        cudaGraph_t graph = NULL;
        CHECK(cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin");
        ft_status st = ft_cuda_gemm(c, &g);
        cudaError_t e = cudaStreamEndCapture(s->stream, &graph);
        if (graph) cudaGraphDestroy(graph);
        CHECK(st == FT_OK && e == cudaSuccess, "GEMM in a capture: %s / %s", ft_ctx_errmsg(c),
              cudaGetErrorString(e));
        const ft_gemm_plan *p = plan_of(c, m, n, k);
        CHECK(s->gemm_tuned == 0 && p && p->choice == 0, "in a capture: tuned %llu, choice %d",
              (unsigned long long)s->gemm_tuned, p ? p->choice : -1);
    }
    (void)cudaGetLastError();
    ft_ctx_clear_error(c);
    ft_arena_release_to(c, mark);
    free(h);
    ft_ctx_free(c);
}
/* A candidate that fails at the call (not NOT_SUPPORTED: EXECUTION_FAILED,
 * FT_EMU_LT_FAIL_ALGO=1 on the emulator) is skipped: the GEMM runs, no error is
 * left in the context, and the choice is a candidate that ran (the slow first
 * guess loses to the third). */
static void test_cuda_gemm_tune_skips_failing_candidate(void) {
    if (!emulated()) {
        SKIP("needs the emulator's fake heuristic to make a candidate fail");
        return;
    }
    set_slow("0");
    setenv("FT_EMU_LT_FAIL_ALGO", "1", 1);
    ft_ctx *c = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_GEMM_AUTOTUNE", NULL);
    if (c) {
        ft_cuda_state *s = ft_cuda_state_of(c);
        CHECK(gemm_check(c, 19, 43, 31, 0), "GEMM with a failing candidate");
        const ft_gemm_plan *p = plan_of(c, 19, 43, 31);
        CHECK(s->gemm_tuned == 1 && p && p->choice == 2, "tuned %llu, choice %d (candidate 1 fails, 0 is slow)",
              (unsigned long long)s->gemm_tuned, p ? p->choice : -1);
        CHECK(ft_ctx_status(c) == FT_OK, "an error was left in the context: %s", ft_ctx_errmsg(c));
    }
    unsetenv("FT_EMU_LT_FAIL_ALGO");
    set_slow(NULL);
    ft_ctx_free(c);
}

/* Every timed batch of a candidate is queued behind the spin kernel, so the
 * events bracket device time, not the host's launch calls: in the device
 * records of a tuning (fake CUPTI), each candidate's timed GEMMs follow a spin. */
#if defined(FT_CUDA_EMU) && defined(FT_WITH_CUPTI)
#include "../engine/profiler.h"
static void test_cuda_gemm_tune_spins_ahead(void) {
    set_slow(NULL);
    ft_ctx *c = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_GEMM_AUTOTUNE", NULL);
    ft_profiler *prof = NULL;
    if (!c || ft_profiler_create(c, NULL, &prof) != FT_OK) {
        CHECK(0, "context or profiler: %s", c ? ft_ctx_errmsg(c) : "none");
        ft_ctx_free(c);
        return;
    }
    CHECK_OK(c, ft_profiler_start(prof));
    CHECK(gemm_check(c, 23, 37, 53, 0), "GEMM");
    CHECK_OK(c, ft_profiler_stop(prof));
    ft_profile_summary sum;
    ft_profiler_summary(prof, &sum);
    int spins = 0, gemms_after_spin = 0, bad = 0;
    for (size_t i = 0; i < prof->n_gpu; i++) {
        const ft_gpu_rec *g = &prof->gpu[i];
        if (g->kind != FT_GPU_KERNEL) continue;
        const char *name = ft_cupti_string(g->name);
        if (strstr(name, "tune_spin")) {
            spins++;
            /* the next device work on the stream is a GEMM of the candidate */
            const ft_gpu_rec *n = NULL;
            for (size_t j = i + 1; j < prof->n_gpu && !n; j++)
                if (prof->gpu[j].kind == FT_GPU_KERNEL) n = &prof->gpu[j];
            if (n && !strstr(ft_cupti_string(n->name), "tune_spin")) gemms_after_spin++;
            else bad++;
        }
    }
    /* 3 candidates, each timed in two batches (1 run, then TUNE_REPS - 1) */
    CHECK(sum.cupti && spins == 6 && gemms_after_spin == 6 && !bad,
          "CUPTI %d: %d spins, %d followed by a GEMM, %d not", sum.cupti, spins, gemms_after_spin, bad);
    ft_profiler_free(prof);
    ft_ctx_free(c);
}
#else
static void test_cuda_gemm_tune_spins_ahead(void) { SKIP("needs the emulator's fake CUPTI"); }
#endif
#else
static void test_cuda_gemm_tune_unbuilt(void) { SKIP("built without CUDA"); }
#endif

int main(void) {
#ifdef FT_CUDA_EMU
    setenv("FT_EMU_LT_ALGOS", "3", 0); /* the fake heuristic's candidates (tests/emu/fake_cublas.c) */
#endif
#ifdef FT_WITH_CUDA
    RUN(test_cuda_gemm_tune_measures_and_shares);
    RUN(test_cuda_gemm_tune_off);
    RUN(test_cuda_gemm_tune_option);
    RUN(test_cuda_gemm_tune_skips_in_place);
    RUN(test_cuda_gemm_tune_not_in_capture);
    RUN(test_cuda_gemm_tune_skips_failing_candidate);
    RUN(test_cuda_gemm_tune_spins_ahead);
#else
    RUN(test_cuda_gemm_tune_unbuilt);
#endif
    return ft_test_finish();
}

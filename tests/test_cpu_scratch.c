/*
 * test_cpu_scratch.c - the CPU backend's per-context scratch and eager pack
 * cache (kernels/cpu/scratch.c, pack_cache.c): repeated forwards of every golden
 * model allocate no kernel scratch once warm, in every mode, with 1 and 2
 * threads, and give the same outputs each time; two 2-thread contexts on two
 * host threads at once give what each gives alone; a scratch that cannot grow ends
 * a forward with FT_ERR_OOM and a message, never a crash; the pack cache hits on
 * a second eager forward, gives exactly what per-call packing gives, stays
 * under its cap, forgets a freed model, and never serves panels of data that
 * was rewritten (a parameter store renews its version) or of another tensor
 * that reuses the address (the allocator clears a reused block's version).
 */
#include "ft_golden.h"
#include "ft_test.h"
#include "ft_internal.h"
#include "../kernels/cpu/cpu_kernels.h"
#include "../kernels/cpu/pack_cache.h"
#include "../kernels/cpu/scratch.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *const cases[] = {"bert", "funnel", "mobilebert", "resnet", "wavlm"};

static ft_ctx *new_ctx(int threads) {
    ft_ctx_options o = ft_ctx_options_default();
    o.cpu_threads = threads;
    ft_ctx *ctx = NULL;
    return ft_ctx_create_ex(&o, &ctx) == FT_OK ? ctx : NULL;
}

/* The model's last_hidden_state as f32 (malloc'd), or NULL. */
static float *output_of(ft_ctx *ctx, ft_model *m, int64_t *n) {
    ft_tensor *h = ft_model_output_find(m, "last_hidden_state");
    if (!h) return NULL;
    *n = ft_tensor_numel(h);
    float *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(float));
    if (ft_tensor_to_host(ctx, h, FT_DTYPE_F32, v, (size_t)*n * sizeof(float)) != FT_OK) {
        free(v);
        return NULL;
    }
    return v;
}

/* One warm-up forward, then two more: those allocate no scratch, fall back to
 * malloc nowhere, and reproduce the first forward's output bit for bit. */
static void steady(const char *name, ft_mode mode, int threads) {
    ft_ctx *ctx = new_ctx(threads);
    golden_case gc;
    ft_model *m = NULL;
    if (!ctx || golden_open(ctx, name, &gc) != 0) {
        CHECK(0, "%s: no context or golden case", name);
        ft_ctx_free(ctx);
        return;
    }
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    int64_t n = 0, n2 = 0;
    float *first = NULL;
    if (ft_model_load(ctx, gc.dir, &o, &m) == FT_OK && ft_model_forward(m, gc.in, gc.n_in) == FT_OK)
        first = output_of(ctx, m, &n);
    CHECK(first != NULL, "%s %s: first forward: %s", name, ft_mode_name(mode), ft_ctx_errmsg(ctx));
    CHECK(ft_ctx_mem_stats(ctx).cpu_scratch > 0, "%s %s: no scratch after a forward", name, ft_mode_name(mode));
    int64_t a0 = ft_cpu_scratch_allocs(), f0 = ft_cpu_scratch_fallbacks();
    for (int r = 0; r < 2 && first; r++) {
        float *again = NULL;
        if (ft_model_forward(m, gc.in, gc.n_in) == FT_OK) again = output_of(ctx, m, &n2);
        CHECK(again && n2 == n, "%s %s: forward %d: %s", name, ft_mode_name(mode), r + 2, ft_ctx_errmsg(ctx));
        if (again && n2 == n)
            CHECK(memcmp(first, again, (size_t)n * sizeof(float)) == 0, "%s %s %d threads: forward %d differs",
                  name, ft_mode_name(mode), threads, r + 2);
        free(again);
    }
    int64_t da = ft_cpu_scratch_allocs() - a0, df = ft_cpu_scratch_fallbacks() - f0;
    CHECK(da == 0 && df == 0, "%s %s %d threads: %lld scratch allocations and %lld malloc fallbacks in "
          "steady state", name, ft_mode_name(mode), threads, (long long)da, (long long)df);
    free(first);
    ft_model_free(m);
    golden_close(&gc);
    ft_ctx_free(ctx);
}

static void test_scratch_steady_state(void) {
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int mode = FT_MODE_EAGER; mode <= FT_MODE_STATIC; mode++)
            for (int th = 1; th <= 2; th++) steady(cases[c], (ft_mode)mode, th);
}

/* Forwards of `name` in `mode` on a fresh 2-thread context: the output of the
 * last of `reps` (malloc'd) or NULL. */
static float *run_case(const char *name, ft_mode mode, int reps, int64_t *n) {
    ft_ctx *ctx = new_ctx(2);
    golden_case gc;
    ft_model *m = NULL;
    float *out = NULL;
    if (ctx && golden_open(ctx, name, &gc) == 0) {
        ft_model_options o = ft_model_options_default();
        o.mode = mode;
        bool ok = ft_model_load(ctx, gc.dir, &o, &m) == FT_OK;
        for (int r = 0; r < reps && ok; r++) ok = ft_model_forward(m, gc.in, gc.n_in) == FT_OK;
        if (ok) out = output_of(ctx, m, n);
        ft_model_free(m);
        golden_close(&gc);
    }
    ft_ctx_free(ctx);
    return out;
}

typedef struct pair_job {
    const char *name;
    ft_mode mode;
    float *out;
    int64_t n;
} pair_job;

static void *pair_worker(void *arg) {
    pair_job *j = arg;
    j->out = run_case(j->name, j->mode, 3, &j->n);
    return NULL;
}

/* Two contexts of 2 OpenMP threads each, on two host threads at once (each with
 * its own team, its own scratch): the outputs equal those of a run alone. */
static void test_two_contexts_at_once(void) {
    pair_job jobs[2] = {{"wavlm", FT_MODE_EAGER, NULL, 0}, {"bert", FT_MODE_GRAPH, NULL, 0}};
    float *ref[2];
    int64_t rn[2] = {0, 0};
    for (int i = 0; i < 2; i++) ref[i] = run_case(jobs[i].name, jobs[i].mode, 1, &rn[i]);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, pair_worker, &jobs[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        CHECK(ref[i] && jobs[i].out && jobs[i].n == rn[i] &&
                  !memcmp(ref[i], jobs[i].out, (size_t)rn[i] * sizeof(float)),
              "%s %s: concurrent output differs from the run alone", jobs[i].name, ft_mode_name(jobs[i].mode));
        free(ref[i]);
        free(jobs[i].out);
    }
}

/* A scratch capped below what a forward needs: a clean FT_ERR_OOM naming the
 * memory, then (the cap lifted, the error cleared) the same context runs. */
static void test_scratch_oom(void) {
    const ft_mode modes[] = {FT_MODE_EAGER, FT_MODE_GRAPH};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int mi = 0; mi < 2; mi++) {
            ft_ctx *ctx = new_ctx(2);
            golden_case gc;
            ft_model *m = NULL;
            if (!ctx || golden_open(ctx, cases[c], &gc) != 0) {
                CHECK(0, "%s: no context or golden case", cases[c]);
                ft_ctx_free(ctx);
                continue;
            }
            ft_model_options o = ft_model_options_default();
            o.mode = modes[mi];
            ft_status st = ft_model_load(ctx, gc.dir, &o, &m);
            CHECK(st == FT_OK, "%s: load: %s", cases[c], ft_ctx_errmsg(ctx));
            if (st == FT_OK) {
                ft_cpu_scratch_set_limit(ctx, 4096);
                st = ft_model_forward(m, gc.in, gc.n_in);
                CHECK(st == FT_ERR_OOM && strstr(ft_ctx_errmsg(ctx), "memory"),
                      "%s %s under a 4 KiB scratch: %s: %s", cases[c], ft_mode_name(modes[mi]), ft_status_str(st),
                      ft_ctx_errmsg(ctx));
                CHECK(ft_ctx_mem_stats(ctx).cpu_scratch <= 4096, "%s: scratch %zu B past its cap", cases[c],
                      ft_ctx_mem_stats(ctx).cpu_scratch);
                ft_ctx_clear_error(ctx);
                ft_cpu_scratch_set_limit(ctx, 0);
                st = ft_model_forward(m, gc.in, gc.n_in);
                CHECK(st == FT_OK, "%s %s after the cap is lifted: %s", cases[c], ft_mode_name(modes[mi]),
                      ft_ctx_errmsg(ctx));
            }
            ft_model_free(m);
            golden_close(&gc);
            ft_ctx_free(ctx);
        }
}

/* Eager bert (f32 and bf16), resnet and wavlm (convolution weights, wavlm's
 * grouped positional one): the second forward finds every linear and
 * convolution weight packed, misses none, and equals a run with the cache off
 * bit for bit; a cap keeps the cache under it; freeing the model empties it. */
static void test_pack_cache_eager(void) {
    const ft_dtype dts[] = {FT_DTYPE_F32, FT_DTYPE_BF16, FT_DTYPE_F32, FT_DTYPE_F32};
    const char *models[] = {"bert", "bert", "resnet", "wavlm"};
    for (int d = 0; d < 4; d++) {
        float *out[3] = {NULL, NULL, NULL};
        int64_t n[3] = {0, 0, 0};
        for (int run = 0; run < 3; run++) { /* 0: cache off; 1: cache on; 2: capped */
            ft_ctx *ctx = new_ctx(2);
            golden_case gc;
            ft_model *m = NULL;
            if (!ctx || golden_open(ctx, models[d], &gc) != 0) {
                CHECK(0, "%s: no context or golden case", models[d]);
                ft_ctx_free(ctx);
                continue;
            }
            if (run == 0) ft_cpu_pack_cache_set_limit(ctx, 0);
            if (run == 2) ft_cpu_pack_cache_set_limit(ctx, 64 * 1024);
            ft_model_options o = ft_model_options_default();
            o.dtype = dts[d];
            int64_t h0 = ft_cpu_pack_cache_hits(), m0 = ft_cpu_pack_cache_misses();
            CHECK_OK(ctx, ft_model_load(ctx, gc.dir, &o, &m));
            CHECK_OK(ctx, ft_model_forward(m, gc.in, gc.n_in));
            int64_t h1 = ft_cpu_pack_cache_hits(), m1 = ft_cpu_pack_cache_misses();
            CHECK_OK(ctx, ft_model_forward(m, gc.in, gc.n_in));
            int64_t h2 = ft_cpu_pack_cache_hits(), m2 = ft_cpu_pack_cache_misses();
            size_t bytes = ft_ctx_mem_stats(ctx).cpu_pack_cache;
            if (run == 0) {
                CHECK(bytes == 0 && h2 == h0, "cache off: %zu B, %lld hits", bytes, (long long)(h2 - h0));
            } else if (run == 1) {
                CHECK(m1 - m0 > 0 && h1 == h0, "first forward: %lld misses, %lld hits", (long long)(m1 - m0),
                      (long long)(h1 - h0));
                CHECK(h2 - h1 == m1 - m0 && m2 == m1, "second forward: %lld hits, %lld misses (first: %lld misses)",
                      (long long)(h2 - h1), (long long)(m2 - m1), (long long)(m1 - m0));
                CHECK(bytes > 0, "no packed bytes reported");
            } else {
                /* full: the rest packed per call, the cached ones still hit */
                CHECK(bytes > 0 && bytes <= 64 * 1024, "capped cache holds %zu B", bytes);
                CHECK(h2 > h1 && m2 > m1, "capped cache: %lld hits, %lld misses on the second forward",
                      (long long)(h2 - h1), (long long)(m2 - m1));
            }
            out[run] = output_of(ctx, m, &n[run]);
            ft_model_free(m);
            CHECK(ft_ctx_mem_stats(ctx).cpu_pack_cache == 0, "model freed, cache still holds %zu B",
                  ft_ctx_mem_stats(ctx).cpu_pack_cache);
            golden_close(&gc);
            ft_ctx_free(ctx);
        }
        for (int run = 1; run < 3; run++)
            CHECK(out[0] && out[run] && n[run] == n[0] && !memcmp(out[0], out[run], (size_t)n[0] * sizeof(float)),
                  "%s %s run %d: output differs from per-call packing", models[d], ft_dtype_name(dts[d]), run);
        for (int run = 0; run < 3; run++) free(out[run]);
    }
}

/* y = x W^T on the host, in double. */
static void ref_linear(const float *x, const float *w, int64_t r, int64_t n, int64_t k, float *y) {
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++) acc += (double)x[i * k + p] * w[j * k + p];
            y[i * n + j] = (float)acc;
        }
}

static int close_to(ft_ctx *ctx, ft_tensor *y, const float *ref, int64_t cnt) {
    float *got = malloc((size_t)cnt * sizeof(float));
    int ok = y && ft_tensor_to_host(ctx, y, FT_DTYPE_F32, got, (size_t)cnt * sizeof(float)) == FT_OK;
    for (int64_t i = 0; ok && i < cnt; i++) ok = fabsf(got[i] - ref[i]) <= 1e-4f * (1.0f + fabsf(ref[i]));
    free(got);
    return ok;
}

/* A parameter rewritten through the store the loader uses is repacked, not
 * served stale; a new parameter at a released one's address is not confused
 * with it. */
static void test_pack_cache_invalidation(void) {
    ft_ctx *ctx = new_ctx(2);
    if (!ctx) {
        CHECK(0, "no context");
        return;
    }
    enum { R = 5, N = 37, K = 70 };
    int64_t xs[2] = {R, K}, ws[2] = {N, K};
    float x[R * K], w1[N * K], w2[N * K], ref[R * N];
    for (int i = 0; i < R * K; i++) x[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (int i = 0; i < N * K; i++) {
        w1[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
        w2[i] = (float)((i * 3) % 17) / 17.0f - 0.25f;
    }
    ft_tensor *xt = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, xs, x);
    ft_tensor *wt = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, ws, w1);
    if (!xt || !wt) {
        CHECK(0, "tensors: %s", ft_ctx_errmsg(ctx));
        ft_ctx_free(ctx);
        return;
    }
    /* from the API, a tensor is not a parameter: never cached */
    int64_t h0 = ft_cpu_pack_cache_hits(), m0 = ft_cpu_pack_cache_misses();
    ft_linear(ctx, xt, wt, NULL);
    CHECK(ft_cpu_pack_cache_hits() == h0 && ft_cpu_pack_cache_misses() == m0, "an unmarked tensor was looked up");
    /* made a parameter the way the loader makes one */
    wt->flags |= FT_TF_WEIGHT;
    CHECK_OK(ctx, ft_weight_store(ctx, wt, w1, sizeof w1));
    ref_linear(x, w1, R, N, K, ref);
    CHECK(close_to(ctx, ft_linear(ctx, xt, wt, NULL), ref, R * N), "first call (a miss)");
    int64_t h1 = ft_cpu_pack_cache_hits();
    CHECK(close_to(ctx, ft_linear(ctx, xt, wt, NULL), ref, R * N), "second call (a hit)");
    CHECK(ft_cpu_pack_cache_hits() == h1 + 1, "the second call did not hit the cache");
    /* the same storage rewritten: the stale panels must not be used */
    CHECK_OK(ctx, ft_weight_store(ctx, wt, w2, sizeof w2));
    ref_linear(x, w2, R, N, K, ref);
    CHECK(close_to(ctx, ft_linear(ctx, xt, wt, NULL), ref, R * N), "after a store: stale packed weight used");
    /* a released parameter's block comes back for another one */
    ft_tensor_release(ctx, wt);
    ft_ctx_reset(ctx);
    xt = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, xs, x);
    ft_tensor *w3 = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, ws, w1);
    if (xt && w3) {
        w3->flags |= FT_TF_WEIGHT;
        CHECK_OK(ctx, ft_weight_store(ctx, w3, w1, sizeof w1));
        ref_linear(x, w1, R, N, K, ref);
        CHECK(close_to(ctx, ft_linear(ctx, xt, w3, NULL), ref, R * N), "a new parameter at a reused address");
        /* and once more, written without a store (as a plan writes its folded
         * constants): the reused block must not keep w3's stamp */
        ft_tensor_release(ctx, w3);
        ft_ctx_reset(ctx);
        xt = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, xs, x);
        ft_tensor *w4 = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, ws, w2);
        if (xt && w4) {
            w4->flags |= FT_TF_WEIGHT;
            ref_linear(x, w2, R, N, K, ref);
            CHECK(close_to(ctx, ft_linear(ctx, xt, w4, NULL), ref, R * N), "an unstamped tensor at a reused address");
        }
    }
    ft_ctx_free(ctx);
}

int main(void) {
    RUN(test_scratch_steady_state);
    RUN(test_two_contexts_at_once);
    RUN(test_scratch_oom);
    RUN(test_pack_cache_eager);
    RUN(test_pack_cache_invalidation);
    return ft_test_finish();
}

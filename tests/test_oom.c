/*
 * test_oom.c - running out of memory anywhere is an error, never a crash: each
 * golden model, in each mode, is loaded and run under a ladder of memory limits
 * (ft_ctx_options.mem_limit) from a fraction of what it needs up to all of it,
 * so the allocation that fails walks through loading, planning and every op of
 * the forward. Each attempt must succeed, or fail with FT_ERR_OOM and a message;
 * the context must stay usable (a later forward with the limit lifted is not
 * possible on the same context, so a fresh unlimited run checks the outputs).
 * Under `make SANITIZE=1` this also checks nothing leaks or is used after free
 * on those paths. On CUDA (a GPU, or the host emulator of tests/emu/) a shorter
 * ladder walks the same paths through device allocations, CUDA Graph capture
 * included.
 */
#include "ft_golden.h"
#include "ft_test.h"

#define STEPS 40

static const char *const cases[] = {"bert", "funnel", "mobilebert", "resnet", "wavlm"};

/* Loads and runs case `name` in `mode` with memory limit `limit` (0: none).
 * Returns 0 on success, 1 on a clean out-of-memory failure, -1 on anything else;
 * *reserved gets the allocator's reserved bytes at the end. */
static int attempt(ft_device dev, const char *name, ft_mode mode, size_t limit, size_t *reserved) {
    ft_ctx_options co = ft_ctx_options_default();
    co.device = dev;
    co.mem_limit = limit;
    ft_ctx *ctx = NULL;
    if (ft_ctx_create_ex(&co, &ctx) != FT_OK) return -1;
    golden_case gc;
    int rc = -1;
    if (golden_open(ctx, name, &gc) == 0) {
        ft_model_options o = ft_model_options_default();
        o.mode = mode;
        ft_model *m = NULL;
        ft_status st = ft_model_load(ctx, gc.dir, &o, &m);
        if (st == FT_OK) st = ft_model_forward(m, gc.in, gc.n_in);
        if (st == FT_OK && !ft_model_output_find(m, "last_hidden_state")) st = FT_ERR_INTERNAL;
        if (st == FT_OK) rc = 0;
        else if (st == FT_ERR_OOM && ft_ctx_errmsg(ctx)[0] && strstr(ft_ctx_errmsg(ctx), "memory")) rc = 1;
        else printf("  %s %s %s limit %zu: %s: %s\n", ft_device_name(dev), name, ft_mode_name(mode), limit,
                    ft_status_str(st), ft_ctx_errmsg(ctx));
        ft_model_free(m);
        golden_close(&gc);
    }
    *reserved = ft_ctx_mem_stats(ctx).reserved;
    ft_ctx_free(ctx);
    return rc;
}

/* Runs the ladder of `steps` limits for the given cases and modes on dev. */
static void ladder(ft_device dev, const char *const *names, int n_names, const ft_mode *modes, int n_modes,
                   int steps) {
    const char *dn = ft_device_name(dev);
    for (int c = 0; c < n_names; c++) {
        for (int mi = 0; mi < n_modes; mi++) {
            ft_mode mode = modes[mi];
            size_t need = 0;
            int base = attempt(dev, names[c], mode, 0, &need);
            CHECK(base == 0 && need > 0, "%s %s %s without a limit failed", dn, names[c], ft_mode_name(mode));
            if (base != 0) continue;
            int ok = 0, oom = 0;
            for (int k = 1; k <= steps; k++) {
                size_t got = 0, limit = need * (size_t)k / (size_t)steps;
                int r = attempt(dev, names[c], mode, limit, &got);
                CHECK(r >= 0, "%s %s %s under a %zu-byte limit: not a clean out-of-memory error", dn, names[c],
                      ft_mode_name(mode), limit);
                CHECK(got <= limit, "%s %s %s: %zu bytes reserved under a %zu-byte limit", dn, names[c],
                      ft_mode_name(mode), got, limit);
                ok += r == 0;
                oom += r == 1;
            }
            /* the smallest limits must fail, the whole need must succeed */
            CHECK(oom > 0 && ok > 0, "%s %s %s: %d successes and %d out-of-memory failures over the ladder",
                  dn, names[c], ft_mode_name(mode), ok, oom);
        }
    }
}

static void test_every_limit(void) {
    const ft_mode modes[] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};
    ladder(FT_DEVICE_CPU, cases, (int)(sizeof cases / sizeof cases[0]), modes, 3, STEPS);
}

/* Fewer steps than on the CPU: under the emulator a CUDA forward costs up to a
 * second. */
static void test_every_limit_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    const ft_mode modes[] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};
    ladder(FT_DEVICE_CUDA, cases, (int)(sizeof cases / sizeof cases[0]), modes, 3, 12);
}

int main(void) {
    RUN(test_every_limit);
    RUN(test_every_limit_cuda);
    return ft_test_finish();
}

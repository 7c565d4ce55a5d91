/*
 * test_cupti_attach.c - the profiler's CUPTI layer (engine/cupti.c) on the
 * emulator's fake CUPTI (tests/emu/fake_cupti.c), which can say whether a
 * subscriber exists and which API calls were traced: CUPTI is in the process
 * only while a profiler window is open, so the timed loops of bench, sweep and
 * framework_tax (profiler created, not started) carry none of it. On the CPU
 * build and on a GPU it skips: a process cannot see CUPTI's subscribers there.
 */
#include "ft_golden.h"
#include "ft_test.h"
#include "ftengine.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* CUPTI is in the process only while a window is open: a created profiler
 * that is not started leaves forwards untraced (no subscriber, no API call
 * traced), start attaches, stop detaches; only the launch/copy API records are
 * enabled (never the whole RUNTIME or DRIVER kind) and GEMM kernels, launched
 * through the driver, are still linked; a second window works too; and a
 * buffer request CUPTI makes from inside an enable does not stall on the
 * profiler's locks. Needs the fake CUPTI (the emulator build): on a GPU the
 * process cannot see CUPTI's subscribers. */
#if defined(FT_CUDA_EMU) && defined(FT_WITH_CUPTI)
#include <cupti.h>
int ft_emu_cupti_subscribed(void);
uint64_t ft_emu_cupti_traced_calls(void);
unsigned long long ft_emu_cupti_kinds_ever(void);
int ft_emu_cupti_stalls(void);

static void test_cuda_cupti_attach_per_window(void) {
    const char *busy = getenv("FT_EMU_CUPTI_BUSY");
    if (busy && atoi(busy)) {
        SKIP("another CUPTI client is emulated (FT_EMU_CUPTI_BUSY)");
        return;
    }
    ft_ctx *ctx = NULL;
    ft_model *m = NULL;
    ft_profiler *p = NULL;
    golden_case g;
    memset(&g, 0, sizeof g);
    if (ft_ctx_create(FT_DEVICE_CUDA, &ctx) != FT_OK) {
        CHECK(0, "no CUDA context");
        return;
    }
    CHECK_OK(ctx, ft_profiler_create(ctx, NULL, &p));
    CHECK(!ft_emu_cupti_subscribed(), "a created profiler subscribed to CUPTI before its start");
    ft_model_options opt = ft_model_options_default();
    if (!p || golden_open(ctx, "bert", &g) != 0 || ft_model_load(ctx, g.dir, &opt, &m) != FT_OK) {
        CHECK(0, "golden bert on CUDA: %s", ft_ctx_errmsg(ctx));
        goto out;
    }
    /* the timed loop of bench / sweep / framework_tax: profiler made, not started */
    uint64_t before = ft_emu_cupti_traced_calls();
    for (int i = 0; i < 2; i++) CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
    CHECK_OK(ctx, ft_ctx_sync(ctx));
    CHECK(ft_emu_cupti_traced_calls() == before && !ft_emu_cupti_subscribed(),
          "%llu API calls traced outside a window", (unsigned long long)(ft_emu_cupti_traced_calls() - before));
    for (int w = 0; w < 2; w++) {
        if (w == 0) setenv("FT_EMU_CUPTI_REQ_IN_ENABLE", "1", 1);
        CHECK_OK(ctx, ft_profiler_start(p));
        unsetenv("FT_EMU_CUPTI_REQ_IN_ENABLE");
        CHECK(ft_emu_cupti_subscribed(), "window %d: no subscriber while started", w);
        CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
        CHECK_OK(ctx, ft_profiler_stop(p));
        CHECK(!ft_emu_cupti_subscribed(), "window %d: still subscribed after stop", w);
        ft_profile_summary s;
        ft_profiler_summary(p, &s);
        CHECK(s.cupti && s.kernels > 0 && s.kernels_unlinked == 0 && s.correlation_errors == 0 && s.launches > 0,
              "window %d: CUPTI %d, %lld kernels, %lld unlinked, %lld launches (%s)", w, s.cupti,
              (long long)s.kernels, (long long)s.kernels_unlinked, (long long)s.launches, s.cupti_note);
    }
    CHECK(ft_emu_cupti_stalls() == 0, "%d buffer requests stalled inside cuptiActivityEnable", ft_emu_cupti_stalls());
    unsigned long long ever = ft_emu_cupti_kinds_ever();
    CHECK(!(ever & (1ull << CUPTI_ACTIVITY_KIND_DRIVER)) && !(ever & (1ull << CUPTI_ACTIVITY_KIND_RUNTIME)) &&
              (ever & (1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)),
          "kinds enabled: %#llx (the whole RUNTIME/DRIVER kind, or no kernels)", ever);
    before = ft_emu_cupti_traced_calls();
    CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
    CHECK_OK(ctx, ft_ctx_sync(ctx));
    CHECK(ft_emu_cupti_traced_calls() == before, "API calls traced after the windows closed");
    /* a CUPTI without per-API control: the whole kinds instead, GEMMs still linked */
    setenv("FT_EMU_CUPTI_NO_API_ENABLE", "1", 1);
    CHECK_OK(ctx, ft_profiler_start(p));
    CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
    CHECK_OK(ctx, ft_profiler_stop(p));
    unsetenv("FT_EMU_CUPTI_NO_API_ENABLE");
    ft_profile_summary s;
    ft_profiler_summary(p, &s);
    CHECK(s.cupti && s.kernels > 0 && s.kernels_unlinked == 0 && s.launches > 0,
          "without per-API control: CUPTI %d, %lld kernels, %lld unlinked (%s)", s.cupti, (long long)s.kernels,
          (long long)s.kernels_unlinked, s.cupti_note);
    CHECK(!ft_emu_cupti_subscribed(), "still subscribed after stop");
    before = ft_emu_cupti_traced_calls();
    CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
    CHECK_OK(ctx, ft_ctx_sync(ctx));
    CHECK(ft_emu_cupti_traced_calls() == before, "API calls traced after the fallback window closed");
out:
    ft_profiler_free(p);
    ft_model_free(m);
    golden_close(&g);
    ft_ctx_free(ctx);
}
#else
static void test_cuda_cupti_attach_per_window(void) { SKIP("needs the emulator's fake CUPTI"); }
#endif

int main(void) {
    RUN(test_cuda_cupti_attach_per_window);
    return ft_test_finish();
}

/*
 * test_cupti_attach.c - the profiler's CUPTI session rule (engine/cupti.c) on
 * the emulator's fake CUPTI (tests/emu/fake_cupti.c), which plays CUPTI 13.0:
 * it counts sessions and, in every session after the first, gives the kernels
 * of a CUDA graph replay the correlation id of the previous graph launch, as
 * the real one does before 13.1 Update 1. The engine's rule: nothing touches
 * CUPTI before the first profiler window, that window opens the process's one
 * session, and later windows keep it (filtering by window). On the CPU build
 * and on a GPU it skips: a process cannot see CUPTI's sessions there.
 *
 * Cases that need a fresh process (CUPTI state is process-wide) run in a
 * forked child that reports back through a pipe.
 */
#include "ft_golden.h"
#include "ft_test.h"
#include "ftengine.h"
#include "profiler.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(FT_CUDA_EMU) && defined(FT_WITH_CUPTI)
#include <cupti.h>
int ft_emu_cupti_subscribed(void);
int ft_emu_cupti_sessions(void);
uint64_t ft_emu_cupti_traced_calls(void);
unsigned long long ft_emu_cupti_kinds_ever(void);
int ft_emu_cupti_stalls(void);

#define WINDOWS 3
#define REPLAYS 2 /* static forwards per window: CUDA graph replays */

/* What one process saw: per window, and the session at the end. */
typedef struct run_result {
    int setup_ok;
    int subscribed_before;          /* after ft_profiler_create, before any window */
    uint64_t traced_before;         /* API calls traced in the timed loop before the first window */
    int cupti[WINDOWS], subscribed_after[WINDOWS];
    int64_t kernels[WINDOWS], unlinked[WINDOWS], replays[WINDOWS], attributed[WINDOWS];
    int64_t corr_errors[WINDOWS];
    char note[WINDOWS][160];
    int sessions, per_window;
    uint32_t version;
    int stalls;
    unsigned long long kinds_ever;
} run_result;

/* A golden BERT in static mode, a timed loop, then WINDOWS profiler windows of
 * REPLAYS forwards each with one unprofiled forward between them. */
static void run_windows(run_result *r) {
    memset(r, 0, sizeof *r);
    ft_ctx *ctx = NULL;
    ft_model *m = NULL;
    ft_profiler *p = NULL;
    golden_case g;
    memset(&g, 0, sizeof g);
    if (ft_ctx_create(FT_DEVICE_CUDA, &ctx) != FT_OK) return;
    ft_model_options opt = ft_model_options_default();
    opt.mode = FT_MODE_STATIC;
    if (ft_profiler_create(ctx, NULL, &p) != FT_OK || golden_open(ctx, "bert", &g) != 0 ||
        ft_model_load(ctx, g.dir, &opt, &m) != FT_OK)
        goto out;
    r->subscribed_before = ft_emu_cupti_subscribed() || ft_emu_cupti_sessions() > 0;
    /* the timed loop of bench / sweep / framework_tax: profiler made, not started */
    uint64_t before = ft_emu_cupti_traced_calls();
    for (int i = 0; i < 3; i++)
        if (ft_model_forward(m, g.in, g.n_in) != FT_OK) goto out;
    if (ft_ctx_sync(ctx) != FT_OK) goto out;
    r->traced_before = ft_emu_cupti_traced_calls() - before;
    for (int w = 0; w < WINDOWS; w++) {
        if (w == 0) setenv("FT_EMU_CUPTI_REQ_IN_ENABLE", "1", 1);
        ft_status st = ft_profiler_start(p);
        unsetenv("FT_EMU_CUPTI_REQ_IN_ENABLE");
        if (st != FT_OK) goto out;
        for (int i = 0; i < REPLAYS; i++)
            if (ft_model_forward(m, g.in, g.n_in) != FT_OK) goto out;
        if (ft_profiler_stop(p) != FT_OK) goto out;
        r->subscribed_after[w] = ft_emu_cupti_subscribed();
        ft_profile_summary s;
        ft_profiler_summary(p, &s);
        r->cupti[w] = s.cupti;
        r->kernels[w] = s.kernels;
        r->unlinked[w] = s.kernels_unlinked;
        r->replays[w] = s.graph_replays;
        r->attributed[w] = s.graph_replays_attributed;
        r->corr_errors[w] = s.correlation_errors;
        snprintf(r->note[w], sizeof r->note[w], "%s", s.cupti_note);
        /* between windows: work the next window must not count */
        if (ft_model_forward(m, g.in, g.n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) goto out;
    }
    ft_cupti_session info;
    ft_cupti_session_info(&info);
    r->sessions = ft_emu_cupti_sessions();
    r->per_window = info.per_window;
    r->version = info.version;
    r->stalls = ft_emu_cupti_stalls();
    r->kinds_ever = ft_emu_cupti_kinds_ever();
    r->setup_ok = 1;
out:
    ft_profiler_free(p);
    ft_model_free(m);
    golden_close(&g);
    ft_ctx_free(ctx);
}

/* run_windows in a fresh process (this program run again with --child, the
 * environment plus env's NAME=VALUE strings): a fork would inherit this
 * process's CUPTI session. 0 when the child reported back. */
static int run_in_child(const char *const *env, run_result *r) {
    int fd[2];
    memset(r, 0, sizeof *r);
    if (pipe(fd) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        char fdv[16];
        snprintf(fdv, sizeof fdv, "%d", fd[1]);
        setenv("FT_CUPTI_TEST_CHILD_FD", fdv, 1);
        for (const char *const *e = env; e && *e; e++) putenv((char *)*e);
        execl("/proc/self/exe", "test_cupti_attach", "--child", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t got = 0;
    while (got < sizeof *r) {
        ssize_t n = read(fd[0], (char *)r + got, sizeof *r - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return got == sizeof *r && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The child's side: run and write the result to the pipe. */
static int child_main(void) {
    const char *v = getenv("FT_CUPTI_TEST_CHILD_FD");
    int fd = v ? atoi(v) : -1;
    if (fd < 0) return 2;
    run_result r;
    run_windows(&r);
    return write(fd, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1;
}

/* Every window: CUPTI on, kernels linked, each replay given to its plan steps. */
static int windows_clean(const run_result *r, const char *what) {
    int ok = 1;
    for (int w = 0; w < WINDOWS; w++) {
        int good = r->cupti[w] && r->kernels[w] > 0 && r->unlinked[w] == 0 && r->corr_errors[w] == 0 &&
                   r->replays[w] == REPLAYS && r->attributed[w] == REPLAYS;
        CHECK(good, "%s, window %d: CUPTI %d, %lld kernels, %lld unlinked, %lld of %lld replays attributed (%s)",
              what, w, r->cupti[w], (long long)r->kernels[w], (long long)r->unlinked[w],
              (long long)r->attributed[w], (long long)r->replays[w], r->note[w]);
        ok &= good;
    }
    /* the forward between windows is not in the next window: every window the same */
    CHECK(r->kernels[1] == r->kernels[0] && r->kernels[2] == r->kernels[0],
          "%s: kernels per window %lld %lld %lld (work between windows counted?)", what, (long long)r->kernels[0],
          (long long)r->kernels[1], (long long)r->kernels[2]);
    return ok;
}

static int skip_if_busy(void) {
    const char *busy = getenv("FT_EMU_CUPTI_BUSY");
    if (busy && atoi(busy)) {
        SKIP("another CUPTI client is emulated (FT_EMU_CUPTI_BUSY)");
        return 1;
    }
    return 0;
}

/* The rule, on the emulated CUPTI 13.0: no CUPTI before the first window (no
 * probe subscription in ft_profiler_create, nothing traced in the timed loop),
 * one session for all windows, kept after stop, and every replay of every
 * window attributed. Only the launch/copy API records are enabled (never the
 * whole RUNTIME or DRIVER kind); a buffer request CUPTI makes from inside an
 * enable does not stall on the profiler's locks. */
static void test_cuda_cupti_one_session(void) {
    if (skip_if_busy()) return;
    run_result r;
    run_windows(&r);
    if (!r.setup_ok) {
        CHECK(0, "golden bert, static, profiled on CUDA: setup failed");
        return;
    }
    CHECK(!r.subscribed_before, "ft_profiler_create touched CUPTI (a probe subscription opens a session)");
    CHECK(r.traced_before == 0, "%llu API calls traced in the timed loop before the first window",
          (unsigned long long)r.traced_before);
    windows_clean(&r, "one session");
    CHECK(r.sessions == 1 && r.subscribed_after[0] && r.subscribed_after[WINDOWS - 1] && !r.per_window,
          "%d sessions (want 1), subscribed after the windows: %d %d", r.sessions, r.subscribed_after[0],
          r.subscribed_after[WINDOWS - 1]);
    CHECK(r.version == CUPTI_API_VERSION && !ft_cupti_session_per_window_ok(r.version),
          "CUPTI version %u (the fake plays %u, below the fix)", r.version, (unsigned)CUPTI_API_VERSION);
    CHECK(r.stalls == 0, "%d buffer requests stalled inside cuptiActivityEnable", r.stalls);
    CHECK(!(r.kinds_ever & (1ull << CUPTI_ACTIVITY_KIND_DRIVER)) &&
              !(r.kinds_ever & (1ull << CUPTI_ACTIVITY_KIND_RUNTIME)) &&
              (r.kinds_ever & (1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)),
          "kinds enabled: %#llx (the whole RUNTIME/DRIVER kind, or no kernels)", r.kinds_ever);
}

/* FT_CUPTI_SESSION=window on CUPTI 13.0 is refused: still one session. */
static void test_cuda_cupti_window_request_refused_below_fix(void) {
    if (skip_if_busy()) return;
    const char *env[] = {"FT_CUPTI_SESSION=window", NULL};
    run_result r;
    CHECK(run_in_child(env, &r) == 0 && r.setup_ok, "child process failed");
    if (!r.setup_ok) return;
    windows_clean(&r, "window asked, CUPTI 13.0");
    CHECK(r.sessions == 1 && !r.per_window && r.subscribed_after[WINDOWS - 1],
          "FT_CUPTI_SESSION=window on CUPTI %u: %d sessions, per-window %d", r.version, r.sessions, r.per_window);
}

/* On a CUPTI past the fix the request is honoured: a session per window, each
 * detached at stop, and (the fake being fixed too) every replay attributed. */
static void test_cuda_cupti_window_sessions_on_fixed_cupti(void) {
    if (skip_if_busy()) return;
    const char *env[] = {"FT_CUPTI_SESSION=window", "FT_EMU_CUPTI_VERSION=130101", NULL};
    run_result r;
    CHECK(run_in_child(env, &r) == 0 && r.setup_ok, "child process failed");
    if (!r.setup_ok) return;
    windows_clean(&r, "window sessions, CUPTI 13.1 Update 1");
    CHECK(r.sessions == WINDOWS && r.per_window && !r.subscribed_after[0] && r.version == 130101,
          "%d sessions (want %d), per-window %d, subscribed after stop %d, version %u", r.sessions, WINDOWS,
          r.per_window, r.subscribed_after[0], r.version);
}

/* What the rule avoids, and proof that the checks above can fail: a second
 * session on a CUPTI with the 13.0 bug (a fake that claims the fix but keeps
 * the bug makes the engine open one) misattributes the replays of every window
 * after the first, and the summary shows it. */
static void test_cuda_cupti_second_session_misattributes(void) {
    if (skip_if_busy()) return;
    const char *env[] = {"FT_CUPTI_SESSION=window", "FT_EMU_CUPTI_VERSION=130101", "FT_EMU_CUPTI_GRAPH_BUG=1",
                         NULL};
    run_result r;
    CHECK(run_in_child(env, &r) == 0 && r.setup_ok, "child process failed");
    if (!r.setup_ok) return;
    CHECK(r.sessions == WINDOWS, "%d sessions (want %d)", r.sessions, WINDOWS);
    CHECK(r.attributed[0] == REPLAYS && r.unlinked[0] == 0, "window 0 (the first session) should be right: %lld/%lld",
          (long long)r.attributed[0], (long long)r.replays[0]);
    for (int w = 1; w < WINDOWS; w++)
        CHECK(r.replays[w] == REPLAYS && r.attributed[w] < REPLAYS && r.unlinked[w] > 0,
              "window %d (session %d): %lld of %lld replays attributed, %lld kernels unlinked: the emulated "
              "13.0 bug did not show", w, w + 1, (long long)r.attributed[w], (long long)r.replays[w],
              (long long)r.unlinked[w]);
}

/* A CUPTI without per-API control: the whole RUNTIME and DRIVER kinds instead,
 * GEMMs (launched through the driver) still linked, still one session. */
static void test_cuda_cupti_no_per_api_control(void) {
    if (skip_if_busy()) return;
    const char *env[] = {"FT_EMU_CUPTI_NO_API_ENABLE=1", NULL};
    run_result r;
    CHECK(run_in_child(env, &r) == 0 && r.setup_ok, "child process failed");
    if (!r.setup_ok) return;
    windows_clean(&r, "without per-API control");
    CHECK(r.sessions == 1 && (r.kinds_ever & (1ull << CUPTI_ACTIVITY_KIND_DRIVER)),
          "%d sessions, kinds %#llx", r.sessions, r.kinds_ever);
}
/* A tool that holds CUPTI (nsys, ncu, compute-sanitizer) is injected through
 * CUDA_INJECTION64_PATH: the profiler says so when it is made, without a CUPTI
 * call, and runs its windows on host timers. */
static void test_cuda_cupti_injected_tool(void) {
    ft_ctx *ctx = NULL;
    ft_profiler *p = NULL;
    if (ft_ctx_create(FT_DEVICE_CUDA, &ctx) != FT_OK) {
        CHECK(0, "no CUDA context");
        return;
    }
    int sessions = ft_emu_cupti_sessions();
    setenv("CUDA_INJECTION64_PATH", "libToolsInjection64.so", 1);
    CHECK_OK(ctx, ft_profiler_create(ctx, NULL, &p));
    unsetenv("CUDA_INJECTION64_PATH");
    const char *note = p ? ft_profiler_cupti_note(p) : "";
    CHECK(strstr(note, "another CUPTI client") && strstr(note, "CUDA_INJECTION64_PATH"), "note: '%s'", note);
    if (p) {
        CHECK_OK(ctx, ft_profiler_start(p));
        CHECK_OK(ctx, ft_profiler_stop(p));
        ft_profile_summary s;
        ft_profiler_summary(p, &s);
        CHECK(!s.cupti && s.cupti_note[0], "CUPTI %d with a tool injected", s.cupti);
    }
    CHECK(ft_emu_cupti_sessions() == sessions, "a CUPTI session was opened with a tool injected");
    ft_profiler_free(p);
    ft_ctx_free(ctx);
}
#else
static void test_cuda_cupti_one_session(void) { SKIP("needs the emulator's fake CUPTI"); }
#endif

/* The version rule itself (no CUPTI needed). */
static void test_cupti_fixed_version(void) {
    CHECK(!ft_cupti_session_per_window_ok(130000) && !ft_cupti_session_per_window_ok(130001) &&
              !ft_cupti_session_per_window_ok(130100) && !ft_cupti_session_per_window_ok(28) &&
              ft_cupti_session_per_window_ok(130101) && ft_cupti_session_per_window_ok(130200) &&
              ft_cupti_session_per_window_ok(140000),
          "CUPTI versions that may open a second session: only 13.1 Update 1 (130101) and later");
}

int main(int argc, char **argv) {
#if defined(FT_CUDA_EMU) && defined(FT_WITH_CUPTI)
    if (argc == 2 && !strcmp(argv[1], "--child")) return child_main();
#else
    (void)argc;
    (void)argv;
#endif
    RUN(test_cupti_fixed_version);
    RUN(test_cuda_cupti_one_session);
#if defined(FT_CUDA_EMU) && defined(FT_WITH_CUPTI)
    RUN(test_cuda_cupti_window_request_refused_below_fix);
    RUN(test_cuda_cupti_window_sessions_on_fixed_cupti);
    RUN(test_cuda_cupti_second_session_misattributes);
    RUN(test_cuda_cupti_no_per_api_control);
    RUN(test_cuda_cupti_injected_tool);
#endif
    return ft_test_finish();
}

/*
 * framework_tax.c - the experiment ftengine exists for, written the way a user
 * would write it against ftengine.h alone: one model in eager, graph and static
 * mode, with and without an emulated slower framework (a fixed host cost per
 * dispatched op), each run profiled to split its wall time into device-busy
 * time and framework overhead, and where the host time went.
 *
 *   build/examples/framework_tax [MODEL_DIR_OR_PRESET] [cpu|cuda] [batch]
 *
 * Without a model it takes $FT_GOLDEN_DIR/bert, else tests/golden/bert when run
 * from the repository root, else the bert-tiny preset: it works from any directory.
 *
 * On the CPU device the "device" is the CPU itself, so busy time is the time
 * spent inside kernels; on CUDA with CUPTI it is the union of GPU kernel time.
 *
 * The wall times are taken first, for every mode and host cost, before any
 * profiler window opens: on CUDA the library keeps CUPTI attached from the first
 * window to the end of the process (docs/instrumentation.md), so a point timed
 * after any profiled one would carry CUPTI's cost. Busy time, the op count and
 * the top host op come from a second, profiled pass over the same points, and
 * the difference between the two passes' wall times is printed as the
 * observer's cost. The overhead share is 1 - busy / wall with the unprofiled wall.
 */
#define _POSIX_C_SOURCE 200809L
#include <ftengine.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int forwards(ft_ctx *ctx, ft_model *m, const ft_host_tensor *in, int n_in, int n) {
    for (int i = 0; i < n; i++)
        if (ft_model_forward(m, in, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) return 1;
    return 0;
}

#define N_COSTS 2
/* a native engine's dispatch, then one as slow per op as an eager framework */
static const double op_costs_us[N_COSTS] = {0.0, 20.0};

/* Mean wall ms of `iters` forwards at a host cost per op, after a warm-up that
 * builds the plan (graph/static) and fills the allocator's cache; -1 on error. */
static double time_point(ft_ctx *ctx, ft_model *m, const ft_host_tensor *in, int n_in, int iters,
                         double op_cost_us) {
    if (ft_ctx_set_op_host_cost(ctx, op_cost_us) != FT_OK || forwards(ctx, m, in, n_in, 2)) return -1.0;
    double t0 = now_ms();
    if (forwards(ctx, m, in, n_in, iters)) return -1.0;
    return (now_ms() - t0) / iters;
}

/* The profiled pass of one point, printed beside its unprofiled wall; 0 or 1. */
static int profile_point(ft_ctx *ctx, ft_profiler *prof, ft_model *m, const ft_host_tensor *in, int n_in,
                         int iters, double op_cost_us, double wall) {
    if (ft_ctx_set_op_host_cost(ctx, op_cost_us) != FT_OK || forwards(ctx, m, in, n_in, 2)) return 1;
    if (ft_profiler_start(prof) != FT_OK) return 1;
    if (forwards(ctx, m, in, n_in, iters)) return 1;
    ft_profile_summary s;
    if (ft_profiler_stop(prof) != FT_OK || ft_profiler_summary(prof, &s) != FT_OK) return 1;
    double traced = s.wall_us / iters / 1e3, busy = s.busy_us / iters / 1e3;
    char share[16] = "n/a"; /* CUDA without CUPTI cannot tell busy time */
    if (s.busy_source != FT_BUSY_NONE && wall > 0)
        snprintf(share, sizeof share, "%.1f%%", busy < wall ? 100.0 * (wall - busy) / wall : 0.0);
    /* the op that took the most host time */
    ft_profile_op_stats top;
    memset(&top, 0, sizeof top);
    if (ft_profiler_op_stats_count(prof) > 0) ft_profiler_op_stats(prof, 0, &top);
    printf("%-7s %8.1f %10.3f %10.3f %10s %11.3f %10.1f   %s\n", ft_mode_name(ft_model_mode(m)), op_cost_us,
           wall, busy, share, traced - wall, (double)s.ops / iters, top.name ? top.name : "-");
    return 0;
}

/* Loads `path` in `mode` with its example inputs; 0 or 1 (the context says why). */
static int load(ft_ctx *ctx, const char *path, ft_mode mode, int64_t batch, ft_model **m, ft_host_tensor *in,
                int *n_in, void **owned) {
    ft_model_options opt = ft_model_options_default();
    opt.mode = mode;
    *m = NULL;
    *owned = NULL;
    return ft_model_load(ctx, path, &opt, m) != FT_OK || ft_model_example_inputs(*m, batch, 0, in, n_in, owned) != FT_OK;
}

/* The small golden BERT where it can be found, else a preset that needs no file. */
static const char *default_model(char *buf, size_t size) {
    const char *dir = getenv("FT_GOLDEN_DIR");
    snprintf(buf, size, "%s/bert/config.json", dir && *dir ? dir : "tests/golden");
    FILE *f = fopen(buf, "r");
    if (!f) return "bert-tiny";
    fclose(f);
    buf[strlen(buf) - strlen("/config.json")] = '\0';
    return buf;
}

int main(int argc, char **argv) {
    char found[1024];
    const char *path = argc > 1 ? argv[1] : default_model(found, sizeof found);
    ft_device dev = argc > 2 && !strcmp(argv[2], "cuda") ? FT_DEVICE_CUDA : FT_DEVICE_CPU;
    int64_t batch = argc > 3 ? atoll(argv[3]) : 1;
    ft_ctx *ctx = NULL;
    ft_profiler *prof = NULL;
    char why[512] = "";
    ft_ctx_options co = ft_ctx_options_default();
    co.device = dev;
    co.errbuf = why; /* the reason, since there is no context to ask */
    co.errbuf_size = sizeof why;
    if (ft_ctx_create_ex(&co, &ctx) != FT_OK) {
        fprintf(stderr, "framework_tax: cannot create a %s context: %s\n", ft_device_name(dev),
                why[0] ? why : "unknown reason");
        return 1;
    }
    /* made once; CUPTI is attached only between its start and stop */
    ft_profiler_options po = ft_profiler_options_default();
    if (ft_profiler_create(ctx, &po, &prof) != FT_OK) {
        fprintf(stderr, "framework_tax: %s\n", ft_ctx_errmsg(ctx));
        ft_ctx_free(ctx);
        return 1;
    }
    printf("%s on %s (%s), batch %lld\n", path, ft_device_name(dev), ft_ctx_device_label(ctx), (long long)batch);
    printf("%-7s %8s %10s %10s %10s %11s %10s   %s\n", "mode", "cost us", "wall ms", "busy ms", "overhead",
           "observer ms", "ops/fwd", "top host op");
    int rc = 0;
    const ft_mode modes[3] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};
    double wall[3][N_COSTS];
    /* pass 1: every point's wall time, no profiler yet; pass 2: the profiled runs */
    for (int pass = 0; pass < 2 && !rc; pass++) {
        for (int k = 0; k < 3 && !rc; k++) {
            ft_model *m = NULL;
            ft_host_tensor in[8];
            int n_in = 0;
            void *owned = NULL;
            rc = load(ctx, path, modes[k], batch, &m, in, &n_in, &owned);
            for (int c = 0; c < N_COSTS && !rc; c++) {
                if (pass == 0) rc = (wall[k][c] = time_point(ctx, m, in, n_in, 10, op_costs_us[c])) < 0;
                else rc = profile_point(ctx, prof, m, in, n_in, 10, op_costs_us[c], wall[k][c]);
            }
            if (rc) fprintf(stderr, "framework_tax: %s\n", ft_ctx_errmsg(ctx));
            free(owned);
            ft_model_free(m);
        }
    }
    ft_profiler_free(prof);
    ft_ctx_free(ctx);
    return rc;
}

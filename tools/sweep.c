/*
 * sweep.c - `ftengine sweep`: the framework-tax curve of one model, latency
 * against batch size for each execution mode (the paper's Figure 2 and its
 * framework-overhead figure), as a table and optionally a CSV file.
 *
 * Each mode loads the model once and runs every batch size on it (a new batch
 * size is a new plan in graph and static mode, built during the untimed first
 * forward). With --overhead a second, profiled pass per point measures the
 * framework overhead (wall time not covered by device work) with ft_profiler.
 * --protocol paper times as Fernandez et al.'s harness does (back-to-back
 * forwards, one sync, mean); the default times each forward synchronized.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SWEEP_MAX 32

static int parse_modes(const char *s, ft_mode *out) {
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (n == SWEEP_MAX || ft_mode_parse(tok, &out[n]) != FT_OK) return -1;
        n++;
    }
    return n;
}

static int parse_batches(const char *s, long long *out) {
    int n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *end = NULL;
        long long v = strtoll(tok, &end, 10);
        if (n == SWEEP_MAX || *end || v < 1 || v > 1000000) return -1;
        out[n++] = v;
    }
    return n;
}

/* A profiled pass of `iters` synchronized forwards; the overhead share of its wall time. */
static int overhead_pass(ft_ctx *ctx, ft_profiler *p, ft_model *m, const ft_host_tensor *in,
                         int n_in, int iters, double *share, double *overhead_ms, int *ops) {
    if (ft_profiler_start(p) != FT_OK) return fail("profiler: %s", ft_ctx_errmsg(ctx));
    for (int i = 0; i < iters; i++)
        if (ft_model_forward(m, in, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) {
            ft_profiler_stop(p);
            return fail("%s", ft_ctx_errmsg(ctx));
        }
    ft_profile_summary s;
    if (ft_profiler_stop(p) != FT_OK || ft_profiler_summary(p, &s) != FT_OK)
        return fail("profiler: %s", ft_ctx_errmsg(ctx));
    *ops = (int)((s.ops + s.ops_dropped) / iters); /* op records: the launches of eager mode */
    if (s.busy_source == FT_BUSY_NONE || !(s.wall_us > 0)) {
        *share = -1;
        *overhead_ms = -1;
    } else {
        *share = s.overhead_us / s.wall_us;
        *overhead_ms = s.overhead_us / 1e3 / iters;
    }
    return 0;
}

int cmd_sweep(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.model) return usage("sweep needs a MODEL");
    ft_mode modes[SWEEP_MAX];
    long long batches[SWEEP_MAX];
    int n_modes = parse_modes(a.modes ? a.modes : "eager,graph,static", modes);
    int n_batches = parse_batches(a.batches ? a.batches : "1,2,4,8,16,32,64,128", batches);
    if (n_modes < 1) return usage("--modes needs a comma-separated list of eager, graph, static");
    if (n_batches < 1) return usage("--batches needs a comma-separated list of positive integers");
    ft_ctx *ctx = make_ctx(&a, a.device, &rc);
    if (!ctx) return rc;
    printf("device: %s\n", ft_ctx_device_label(ctx));
    ft_profiler *prof = NULL;
    FILE *csv = NULL;
    char tmp[1100] = "";
    double *times = (double *)calloc((size_t)a.iters, sizeof(double));
    if (!times) rc = fail("out of host memory");
    if (!rc && a.op_cost_us >= 0 && ft_ctx_set_op_host_cost(ctx, a.op_cost_us) != FT_OK)
        rc = fail("%s", ft_ctx_errmsg(ctx));
    if (!rc && a.overhead) {
        ft_profiler_options po = ft_profiler_options_default();
        po.max_ops = (int64_t)a.iters * 4096 < (1 << 21) ? (int64_t)a.iters * 4096 : (1 << 21);
        if (ft_profiler_create(ctx, &po, &prof) != FT_OK) rc = fail("profiler: %s", ft_ctx_errmsg(ctx));
    }
    if (prof && ft_profiler_cupti_note(prof)[0]) printf("profiler: %s\n", ft_profiler_cupti_note(prof));
    if (!rc && a.csv) {
        snprintf(tmp, sizeof tmp, "%s.tmp%ld", a.csv, (long)getpid());
        if (!(csv = fopen(tmp, "w"))) rc = fail("cannot write %s", tmp);
        else
            fprintf(csv, "model,arch,device,dtype,mode,batch,length,protocol,iters,mean_ms,median_ms,"
                         "min_ms,first_ms,kernels_per_forward,overhead_ms,overhead_share\n");
    }
    printf("%-7s %-7s %10s %10s %10s %9s %12s\n", "batch", "mode", "mean ms", "median ms", "min ms",
           "kernels", "overhead");
    for (int mi = 0; !rc && mi < n_modes; mi++) {
        a.mode = modes[mi];
        ft_model *m = load(ctx, &a, &rc);
        for (int bi = 0; m && !rc && bi < n_batches; bi++) {
            ft_host_tensor in[8];
            int n_in = 0;
            void *owned = NULL;
            if (ft_model_example_inputs(m, batches[bi], a.seq, in, &n_in, &owned) != FT_OK) {
                rc = fail("%s", ft_ctx_errmsg(ctx));
                break;
            }
            double first = 0, mean = 0, share = -1, over = -1;
            int ops = -1;
            rc = time_forwards(ctx, m, in, n_in, a.warmup, a.iters, a.paper, times, &first, &mean);
            if (!rc && prof) rc = overhead_pass(ctx, prof, m, in, n_in, a.iters, &share, &over, &ops);
            /* tokens, image side or samples: the last dim of the first input */
            long long len = in[0].ndim > 1 ? (long long)in[0].shape[in[0].ndim - 1] : 0;
            free(owned);
            if (rc) break;
            ft_graph_stats gs;
            /* a plan's kernels; in eager mode the profiled pass's op count, when there is one */
            int kernels = ft_model_graph_stats(m, &gs) == FT_OK && gs.valid ? gs.kernels_per_forward : ops;
            double med = a.paper ? -1 : times[a.iters / 2], mn = a.paper ? -1 : times[0];
            char ov[32] = "-";
            if (share >= 0) snprintf(ov, sizeof ov, "%.1f%%", 100 * share);
            char kn[16] = "-", md[32] = "-", mi_s[32] = "-";
            if (kernels >= 0) snprintf(kn, sizeof kn, "%d", kernels);
            if (!a.paper) { /* the paper's protocol has only the mean */
                snprintf(md, sizeof md, "%.4f", med);
                snprintf(mi_s, sizeof mi_s, "%.4f", mn);
            }
            printf("%-7lld %-7s %10.4f %10s %10s %9s %12s\n", batches[bi], ft_mode_name(a.mode), mean, md,
                   mi_s, kn, ov);
            fflush(stdout);
            if (csv)
                fprintf(csv, "%s,%s,%s,%s,%s,%lld,%lld,%s,%d,%.6f,%.6f,%.6f,%.6f,%d,%.6f,%.6f\n", a.model,
                        ft_model_arch(m), ft_device_name(a.device), ft_dtype_name(a.dtype),
                        ft_mode_name(a.mode), batches[bi], len, a.paper ? "paper" : "sync", a.iters,
                        mean, med, mn, first, kernels, over, share);
        }
        ft_model_free(m);
    }
    if (csv && fclose(csv) != 0 && !rc) rc = fail("cannot write %s", tmp);
    if (tmp[0]) {
        if (!rc && rename(tmp, a.csv) != 0) rc = fail("cannot write %s", a.csv);
        if (rc) unlink(tmp);
    }
    free(times);
    ft_profiler_free(prof);
    ft_ctx_free(ctx);
    return rc;
}

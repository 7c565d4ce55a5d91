/*
 * sweep.c - `ftengine sweep`: the framework-tax curve of one model (or several,
 * --models), latency against batch size for each execution mode (the paper's
 * Figure 2 and its framework-overhead figure), at one or more emulated framework
 * costs, as a table, a CSV file and a JSON summary.
 *
 * Interleaved rounds: every point (model, cost, mode, batch) is measured once per
 * round, --rounds times, and each round visits the points in its own order (a
 * shuffle seeded by --seed and the round number, recorded in every row). A change
 * of host load during the sweep so lands on every mode and batch alike instead of
 * on whichever ran at that moment, and the spread of a point over its rounds is its
 * confidence interval (tools/stats.h). Every model (each mode of it) stays loaded
 * for the whole sweep, one context per model; a new batch size is a new plan in
 * graph and static mode, kept in the model's plan cache from the first round on.
 * A visit runs one untimed forward, --warmup more, then --iters timed ones; with
 * --overhead a second, profiled pass of --iters forwards in the same visit gives
 * the split of the forward into kernel time and dispatch/host time, as medians over
 * its forwards like the latency (the timed pass comes first, so the latency carries
 * no observer). Where profiling loads CUPTI (a CUDA build with CUPTI, device cuda),
 * CUPTI stays in the process from the first profiled window on (engine/cupti.c:
 * CUPTI 13.0's graph-launch correlation bug), so every timed visit of every round
 * runs first and the profiled passes after them, one per point and round in the
 * rounds' own orders, each written as a row of its own (tools/sweep_csv.c).
 * --protocol paper times as
 * Fernandez et al.'s harness does (back-to-back forwards, one sync, mean); the
 * default times each forward synchronized.
 *
 * The CSV (docs/benchmarking.md) holds one row per (point, round) (and one per
 * deferred profiled pass), written in place and flushed as it is measured, so an
 * interrupted sweep keeps what it measured. A point that fails (out of memory, any error) is a row with status
 * "oom" or "error" and the message, is not visited again, and the sweep goes on;
 * the exit status is 1 when any point failed. --resume keeps the rows measured
 * ("ok") by this commit on this device with the same settings and measures only the
 * (point, round) pairs still missing, saying which rows it kept and why it dropped
 * the others. A model that cannot be described at all (wrong path, bad config) is
 * an error before any CSV is written.
 */
#include "sweep.h"
#include "outfiles.h"
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --modes and --batches (tools/cli.c: ft_cli_list_*): the count, or -1 after the
 * usage error was printed (empty, unknown, repeated or too many elements) */
static int parse_modes(const char *s, ft_mode *out) { return ft_cli_list_modes("--modes", s, SWEEP_MAX, out); }

static int parse_batches(const char *s, long long *out) {
    return ft_cli_list_ints("--batches", s, SWEEP_MAX, 1, 1000000, out);
}

/* --models A,B@16,...; or the MODEL argument. Returns the count, or -1 (message in why). */
static int parse_entries(const args *a, sweep_entry *out, char *why, size_t wn) {
    if (!a->models) {
        snprintf(out[0].name, sizeof out[0].name, "%s", a->model);
        out[0].seq = a->seq;
        return 1;
    }
    int n = 0;
    for (const char *p = a->models; *p;) {
        size_t len = strcspn(p, ",");
        if (n == SWEEP_MAX || len == 0 || len >= sizeof out[0].name) {
            snprintf(why, wn, "--models needs a comma-separated list of at most %d MODEL or MODEL@LENGTH", SWEEP_MAX);
            return -1;
        }
        sweep_entry *e = &out[n];
        snprintf(e->name, sizeof e->name, "%.*s", (int)len, p);
        e->seq = a->seq;
        char *at = strrchr(e->name, '@');
        if (at) {
            char *end = NULL;
            long long v = strtoll(at + 1, &end, 10);
            if (!at[1] || *end || v < 1 || v > 1000000000LL || at == e->name) {
                snprintf(why, wn, "--models: '%s' is not MODEL or MODEL@LENGTH (a positive length)", e->name);
                return -1;
            }
            e->seq = v;
            *at = 0;
        }
        for (int i = 0; i < n; i++)
            if (!strcmp(out[i].name, e->name) && out[i].seq == e->seq) {
                snprintf(why, wn, "--models names %s twice", e->name);
                return -1;
            }
        n++;
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

/* The emulated-cost settings: --op-cost-us and --step-cost-us lists side by side
 * (a single value goes with every value of the other list). */
static int parse_costs(const args *a, sweep_cost *out, char *why, size_t wn) {
    int n = a->n_op_costs > a->n_step_costs ? a->n_op_costs : a->n_step_costs;
    if (n == 0) {
        out[0].op = out[0].step = -1;
        return 1;
    }
    if ((a->n_op_costs > 1 && a->n_step_costs > 1 && a->n_op_costs != a->n_step_costs) || n > SWEEP_MAX) {
        snprintf(why, wn, "--op-cost-us and --step-cost-us lists go side by side: the same length (at most %d), "
                          "or one value for all", SWEEP_MAX);
        return -1;
    }
    const char *lists[2] = {a->op_costs, a->step_costs};
    int counts[2] = {a->n_op_costs, a->n_step_costs};
    for (int k = 0; k < 2; k++) {
        const char *p = lists[k];
        for (int i = 0; i < n; i++) {
            double v = -1;
            if (counts[k]) {
                v = strtod(p, NULL);
                if (counts[k] > 1) p = strchr(p, ',') ? strchr(p, ',') + 1 : p;
            }
            if (k == 0) out[i].op = v;
            else out[i].step = v;
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (out[i].op == out[j].op && out[i].step == out[j].step) {
                snprintf(why, wn, "the cost setting %g/%g us is given twice", out[i].op, out[i].step);
                return -1;
            }
    return n;
}

void sweep_cost_text(double us, char *buf, size_t n) {
    buf[0] = 0;
    if (us >= 0) snprintf(buf, n, "%g", us);
}

void sweep_point_label(const sweep *w, int p, char *buf, size_t n) {
    int e, c, m, b;
    sweep_axes(w, p, &e, &c, &m, &b);
    size_t k = 0;
    if (w->n_entries > 1) k += (size_t)snprintf(buf + k, n - k, "%s ", w->entries[e].name);
    if (k < n && w->costs[c].op >= 0) k += (size_t)snprintf(buf + k, n - k, "op %gus ", w->costs[c].op);
    if (k < n && w->costs[c].step >= 0) k += (size_t)snprintf(buf + k, n - k, "step %gus ", w->costs[c].step);
    if (k < n) snprintf(buf + k, n - k, "%s b%lld", ft_mode_name(w->modes[m]), w->batches[b]);
}

void sweep_sample_init(sample *s, int round) {
    memset(s, 0, sizeof *s);
    s->round = round;
    s->order = -1;
    s->length = s->kernels = s->params = s->macs = -1;
    s->mean = s->median = s->min = s->p90 = s->max = s->first = NAN;
    s->overhead_ms = s->share = s->profiled_ms = s->busy_ms = s->dispatch_ms = NAN;
    snprintf(s->status, sizeof s->status, "ok");
}

/* ---- measuring ---- */

/* A model of the sweep in its context: the modes loaded in it, its profiler. */
typedef struct slot {
    ft_ctx *ctx;
    ft_profiler *prof;
    ft_model *m[SWEEP_MAX]; /* per mode index; NULL: not loaded (yet, or after a failure) */
} slot;

/* A profiled pass of `iters` synchronized forwards, one profiler window each, so
 * every number is a median over forwards like the latency's (a forward disturbed by
 * the host does not move it): wall time, kernel (device-busy) time, host time and
 * the dispatcher's phases per forward. */
static int overhead_pass(ft_ctx *ctx, ft_profiler *prof, ft_model *m, const ft_host_tensor *in,
                         int n_in, int iters, sample *p, long long *ops) {
    double *v = (double *)calloc((size_t)iters * 4, sizeof(double));
    if (!v) return fail("out of host memory");
    double *wall = v, *busy = v + iters, *over = v + 2 * iters, *disp = v + 3 * iters;
    int known = 1;
    long long n_ops = 0;
    for (int i = 0; i < iters; i++) {
        if (ft_profiler_start(prof) != FT_OK) {
            free(v);
            return fail("profiler: %s", ft_ctx_errmsg(ctx));
        }
        if (ft_model_forward(m, in, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) {
            ft_profiler_stop(prof);
            free(v);
            return fail("%s", ft_ctx_errmsg(ctx));
        }
        ft_profile_summary s;
        if (ft_profiler_stop(prof) != FT_OK || ft_profiler_summary(prof, &s) != FT_OK) {
            free(v);
            return fail("profiler: %s", ft_ctx_errmsg(ctx));
        }
        n_ops += (long long)(s.ops + s.ops_dropped); /* op records: the launches of eager mode */
        wall[i] = s.wall_us / 1e3;
        busy[i] = s.busy_us / 1e3;
        over[i] = s.overhead_us / 1e3;
        disp[i] = 0; /* the dispatcher's own phases (the emulated costs are spent in SELECT) */
        for (int k = 0; k < FT_PROFILE_LAUNCH; k++) disp[i] += s.phase_us[k] / 1e3;
        known &= s.busy_source != FT_BUSY_NONE;
    }
    *ops = n_ops / iters;
    for (int k = 0; k < 4; k++) ft_cli_sort(v + k * iters, iters);
    p->profiled_ms = ft_stats_median(wall, iters);
    p->dispatch_ms = ft_stats_median(disp, iters);
    if (known && p->profiled_ms > 0) {
        p->busy_ms = ft_stats_median(busy, iters);
        p->overhead_ms = ft_stats_median(over, iters);
        p->share = p->overhead_ms / p->profiled_ms;
    }
    free(v);
    return 0;
}

/* Measures one point on model m; returns 0, or fail()'s code with the message in cli_last_error. */
static int measure(ft_ctx *ctx, ft_model *m, ft_profiler *prof, const args *a, long long batch,
                   long long seq, double *times, sample *p) {
    ft_host_tensor in[8];
    int n_in = 0;
    void *owned = NULL;
    if (ft_model_example_inputs(m, batch, seq, in, &n_in, &owned) != FT_OK) {
        free(owned);
        return fail("%s", ft_ctx_errmsg(ctx));
    }
    /* tokens, image side or samples: the last dim of the first input */
    p->length = in[0].ndim > 1 ? (long long)in[0].shape[in[0].ndim - 1] : -1;
    long long ops = -1;
    int rc = time_forwards(ctx, m, in, n_in, a->warmup, a->iters, a->paper, times, &p->first, &p->mean);
    if (!rc && !a->paper) {
        ft_cli_sort(times, a->iters);
        p->median = ft_stats_median(times, a->iters);
        p->min = times[0];
        p->p90 = times[(int)(a->iters * 0.9)];
        p->max = times[a->iters - 1];
    }
    if (!rc && prof) rc = overhead_pass(ctx, prof, m, in, n_in, a->iters, p, &ops);
    free(owned);
    if (rc) return rc;
    ft_graph_stats gs;
    /* a plan's kernels; in eager mode the profiled pass's op count, when there is one */
    p->kernels = ft_model_graph_stats(m, &gs) == FT_OK && gs.valid ? gs.kernels_per_forward : ops;
    p->params = ft_model_param_count(m);
    int64_t macs = 0;
    if (ft_model_macs(m, batch, seq, &macs) == FT_OK) p->macs = macs;
    else ft_ctx_clear_error(ctx); /* MACs are a by-product: a model without them still has its latency */
    return 0;
}

/* A deferred profiled pass of one point: one untimed forward (the point's plan and
 * caches after the other points ran), then the profiled pass into p. 0 or fail()'s code. */
static int profile_point(ft_ctx *ctx, ft_model *m, ft_profiler *prof, const args *a, long long batch,
                         long long seq, sample *p) {
    ft_host_tensor in[8];
    int n_in = 0;
    void *owned = NULL;
    if (ft_model_example_inputs(m, batch, seq, in, &n_in, &owned) != FT_OK) {
        free(owned);
        return fail("%s", ft_ctx_errmsg(ctx));
    }
    long long ops = -1;
    int rc = ft_model_forward(m, in, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK ? fail("%s", ft_ctx_errmsg(ctx)) : 0;
    if (!rc) rc = overhead_pass(ctx, prof, m, in, n_in, a->iters, p, &ops);
    free(owned);
    ft_graph_stats gs;
    if (!rc) p->kernels = ft_model_graph_stats(m, &gs) == FT_OK && gs.valid ? gs.kernels_per_forward : ops;
    return rc;
}

static void record_failure(ft_ctx *ctx, sample *p, const char *prefix) {
    long long length = p->length;
    char arch[sizeof p->arch];
    snprintf(arch, sizeof arch, "%s", p->arch);
    int round = p->round, order = p->order;
    sweep_sample_init(p, round); /* no half-measured numbers in a failed row */
    p->order = order;
    p->length = length;
    snprintf(p->arch, sizeof p->arch, "%s", arch);
    snprintf(p->status, sizeof p->status, "%s", ctx && ft_ctx_status(ctx) == FT_ERR_OOM ? "oom" : "error");
    snprintf(p->error, sizeof p->error, "%s%.560s", prefix, cli_last_error);
    if (ctx) ft_ctx_clear_error(ctx);
}

/* The table: a point's batch and mode first (then its model and emulated costs when
 * the sweep has several), its round, then the visit's numbers. */
void sweep_print_header(void) {
    printf("%-7s %-7s %-5s %-26s %10s %10s %10s %9s %12s\n", "batch", "mode", "round", "model / cost", "mean ms",
           "median ms", "min ms", "kernels", "overhead");
}

static void other_axes(const sweep *w, int p, char *buf, size_t n) {
    int e, c, m, b;
    sweep_axes(w, p, &e, &c, &m, &b);
    size_t k = 0;
    buf[0] = 0;
    if (w->n_entries > 1) k += (size_t)snprintf(buf, n, "%s", w->entries[e].name);
    if (k < n && w->costs[c].op >= 0) k += (size_t)snprintf(buf + k, n - k, "%sop %gus", k ? " " : "", w->costs[c].op);
    if (k < n && w->costs[c].step >= 0) snprintf(buf + k, n - k, "%sstep %gus", k ? " " : "", w->costs[c].step);
    if (!buf[0]) snprintf(buf, n, "-");
}

void sweep_print_row(const sweep *w, int p, const sample *s) {
    char other[256], md[32] = "-", mn[32] = "-", kn[24] = "-", ov[32] = "-";
    int e, c, m, b;
    sweep_axes(w, p, &e, &c, &m, &b);
    other_axes(w, p, other, sizeof other);
    if (strcmp(s->status, "ok")) {
        printf("%-7lld %-7s %-5d %-26s FAILED (%s): %s\n", w->batches[b], ft_mode_name(w->modes[m]), s->round, other,
               s->status, s->error);
        fflush(stdout);
        return;
    }
    if (!isnan(s->median)) snprintf(md, sizeof md, "%.4f", s->median);
    if (!isnan(s->min)) snprintf(mn, sizeof mn, "%.4f", s->min);
    if (s->kernels >= 0) snprintf(kn, sizeof kn, "%lld", s->kernels);
    if (!isnan(s->share)) snprintf(ov, sizeof ov, "%.1f%%", 100 * s->share);
    printf("%-7lld %-7s %-5d %-26s %10.4f %10s %10s %9s %12s\n", w->batches[b], ft_mode_name(w->modes[m]), s->round,
           other, s->mean, md, mn, kn, ov);
    fflush(stdout);
}

/* Every model must at least be described (config, checkpoint index): a wrong path or
 * config is an error before any CSV is written. A shapes-only load: no weight. */
static int check_models(const sweep *w, ft_ctx *ctx) {
    args b = *w->a;
    b.weights = FT_WEIGHTS_NONE;
    b.mode = FT_MODE_EAGER;
    for (int e = 0; e < w->n_entries; e++) {
        int rc = 0;
        b.model = w->entries[e].name;
        ft_model *m = load(ctx, &b, &rc);
        if (!m) return rc;
        ft_model_free(m);
    }
    return 0;
}

/* Makes sure the slot's model of mode mi is loaded; 0, or fail()'s code. */
static int slot_load(const sweep *w, slot *sl, int e, int mi, int *rc_out) {
    if (sl->m[mi]) return 0;
    args b = *w->a;
    b.model = w->entries[e].name;
    b.mode = w->modes[mi];
    int rc = 0;
    sl->m[mi] = load(sl->ctx, &b, &rc);
    *rc_out = rc;
    return sl->m[mi] ? 0 : rc;
}

/* The model's context (and profiler); on failure nothing is left open. */
static int slot_open(const sweep *w, slot *sl) {
    int rc = 0;
    ft_ctx *ctx = make_ctx(w->a, w->a->device, &rc);
    if (!ctx) return rc;
    if (w->a->overhead) {
        ft_profiler_options po = ft_profiler_options_default();
        po.max_ops = (int64_t)w->a->iters * 4096 < (1 << 21) ? (int64_t)w->a->iters * 4096 : (1 << 21);
        if (ft_profiler_create(ctx, &po, &sl->prof) != FT_OK) {
            rc = fail("profiler: %s", ft_ctx_errmsg(ctx));
            ft_ctx_free(ctx);
            return rc;
        }
    }
    sl->ctx = ctx;
    return 0;
}

static void slot_close(slot *sl, int n_modes) {
    for (int i = 0; i < n_modes; i++) ft_model_free(sl->m[i]);
    ft_profiler_free(sl->prof);
    ft_ctx_free(sl->ctx);
}

/* One visit of point p in round r: a row in the CSV and on stdout. A failed point is
 * not visited again. Returns 1 when the CSV could not take the row (the sweep ends). */
static int visit(sweep *w, slot *slots, int p, int r, int order, double *times, int csv) {
    const args *a = w->a;
    int e, c, mi, bi;
    sweep_axes(w, p, &e, &c, &mi, &bi);
    slot *sl = &slots[e];
    sample *s = sweep_sample(w, p, r);
    sweep_sample_init(s, r);
    s->order = order;
    cli_errors_quiet = 1;
    int rc = 0;
    if (!sl->ctx && (rc = slot_open(w, sl)) != 0) {
        record_failure(sl->ctx, s, "");
    } else if (slot_load(w, sl, e, mi, &rc) != 0) {
        record_failure(sl->ctx, s, "loading the model: ");
    } else {
        ft_model *m = sl->m[mi];
        snprintf(s->arch, sizeof s->arch, "%s", ft_model_arch(m));
        const sweep_cost *k = &w->costs[c];
        if ((k->op >= 0 && ft_ctx_set_op_host_cost(sl->ctx, k->op) != FT_OK) ||
            (k->step >= 0 && ft_ctx_set_step_host_cost(sl->ctx, k->step) != FT_OK))
            rc = fail("%s", ft_ctx_errmsg(sl->ctx));
        if (rc || measure(sl->ctx, m, w->defer ? NULL : sl->prof, a, w->batches[bi], w->entries[e].seq, times, s)) {
            record_failure(sl->ctx, s, "");
            /* the model may hold half-built state: the next point starts afresh */
            ft_model_free(m);
            sl->m[mi] = NULL;
        }
    }
    cli_errors_quiet = 0;
    prov_date(s->date, sizeof s->date);
    s->have = 1;
    s->prof = !w->defer && a->overhead && !strcmp(s->status, "ok");
    sweep_print_row(w, p, s);
    if (strcmp(s->status, "ok")) w->dead[p] = 1;
    return csv ? sweep_csv_row(w, p, s, SWEEP_ROW_VISIT) : 0;
}

static void print_profiled_row(const sweep *w, int p, const sample *q) {
    char other[256], bz[32] = "-", sh[32] = "-";
    int e, c, m, b;
    sweep_axes(w, p, &e, &c, &m, &b);
    other_axes(w, p, other, sizeof other);
    if (strcmp(q->status, "ok")) {
        printf("%-7lld %-7s %-5d profiled pass FAILED (%s): %s\n", w->batches[b], ft_mode_name(w->modes[m]), q->round,
               q->status, q->error);
    } else {
        if (!isnan(q->busy_ms)) snprintf(bz, sizeof bz, "%.4f", q->busy_ms);
        if (!isnan(q->share)) snprintf(sh, sizeof sh, "%.1f%%", 100 * q->share);
        printf("%-7lld %-7s %-5d %-26s profiled: wall %.4f ms, kernel %s ms, overhead %s\n", w->batches[b],
               ft_mode_name(w->modes[m]), q->round, other, q->profiled_ms, bz, sh);
    }
    fflush(stdout);
}

/* The deferred profiled pass of point p in round r (its visit's row is written): a row
 * of its own in the CSV, its numbers joined to the visit's sample. A failure is that
 * row with its status and message; the point is not profiled again. Returns 1 when
 * the CSV could not take the row. */
static int visit_profiled(sweep *w, slot *slots, int p, int r, int csv) {
    const args *a = w->a;
    int e, c, mi, bi;
    sweep_axes(w, p, &e, &c, &mi, &bi);
    slot *sl = &slots[e];
    sample *s = sweep_sample(w, p, r), q;
    sweep_sample_init(&q, r);
    q.order = s->order;
    q.length = s->length;
    snprintf(q.arch, sizeof q.arch, "%s", s->arch);
    cli_errors_quiet = 1;
    int rc = 0;
    if (!sl->ctx && (rc = slot_open(w, sl)) != 0) {
        record_failure(sl->ctx, &q, "profiled pass: ");
    } else if (slot_load(w, sl, e, mi, &rc) != 0) {
        record_failure(sl->ctx, &q, "profiled pass, loading the model: ");
    } else {
        ft_model *m = sl->m[mi];
        const sweep_cost *k = &w->costs[c];
        if ((k->op >= 0 && ft_ctx_set_op_host_cost(sl->ctx, k->op) != FT_OK) ||
            (k->step >= 0 && ft_ctx_set_step_host_cost(sl->ctx, k->step) != FT_OK))
            rc = fail("%s", ft_ctx_errmsg(sl->ctx));
        if (rc || profile_point(sl->ctx, m, sl->prof, a, w->batches[bi], w->entries[e].seq, &q)) {
            record_failure(sl->ctx, &q, "profiled pass: ");
            ft_model_free(m);
            sl->m[mi] = NULL;
        }
    }
    cli_errors_quiet = 0;
    prov_date(q.date, sizeof q.date);
    q.params = s->params;
    q.macs = s->macs;
    if (!strcmp(q.status, "ok")) {
        s->profiled_ms = q.profiled_ms;
        s->busy_ms = q.busy_ms;
        s->overhead_ms = q.overhead_ms;
        s->share = q.share;
        s->dispatch_ms = q.dispatch_ms;
        if (s->kernels < 0) s->kernels = q.kernels;
        s->prof = 1;
    } else {
        s->prof = -1;
        w->prof_dead[p] = 1;
    }
    print_profiled_row(w, p, &q);
    return csv ? sweep_csv_row(w, p, &q, SWEEP_ROW_PROFILED) : 0;
}

/* Whether (p, r) still needs its deferred profiled pass. */
static int needs_profile(const sweep *w, int p, int r) {
    const sample *s = sweep_sample(w, p, r);
    return w->defer && s->have && !strcmp(s->status, "ok") && !s->prof && !w->dead[p] && !w->prof_dead[p];
}

int cmd_sweep(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.model && !a.models) return usage("sweep needs a MODEL (or --models LIST)");
    if (a.model && a.models) return usage("sweep takes a MODEL or --models LIST, not both");
    if (a.resume && !a.csv) return usage("--resume needs --csv FILE (the sweep to resume)");
    if (a.ops_csv) return usage("--ops-csv belongs to bench and run; sweep writes its points with --csv");
    static sweep w;
    memset(&w, 0, sizeof w);
    w.a = &a;
    char why[256] = "";
    if ((w.n_modes = parse_modes(a.modes ? a.modes : "eager,graph,static", w.modes)) < 1 ||
        (w.n_batches = parse_batches(a.batches ? a.batches : "1,2,4,8,16,32,64,128", w.batches)) < 1)
        return 2; /* the usage error is printed */
    if ((w.n_entries = parse_entries(&a, w.entries, why, sizeof why)) < 1) return usage("%s", why);
    if ((w.n_costs = parse_costs(&a, w.costs, why, sizeof why)) < 1) return usage("%s", why);
    w.rounds = a.rounds ? a.rounds : 3;
    w.n_points = w.n_entries * w.n_costs * w.n_modes * w.n_batches;
    /* CUPTI stays loaded once a process profiles (engine/cupti.c): profile last */
    w.defer = a.overhead && a.device == FT_DEVICE_CUDA && ft_build_info_get().cupti;
    if ((long long)w.n_points * w.rounds > 1000000)
        return usage("%d points x %d rounds is too many (at most 1000000 rows)", w.n_points, w.rounds);
    /* tools/outfiles.c: the CSV grows in place (checked now: never a special file);
     * the JSON summary is written beside its target and renamed at the end */
    const char *json_tmp = NULL;
    /* the models' files are inputs: no output may be one of them (tools/outfiles.c) */
    for (int e = 0; e < w.n_entries; e++)
        if ((rc = outfile_input_model(w.entries[e].name))) return rc;
    if (a.csv && (rc = ft_out_csv_open("--csv", a.csv))) return rc; /* locked from here on */
    if (a.json && (rc = outfile_add("--json", a.json, &json_tmp))) return rc;
    ft_ctx *ctx = make_ctx(&a, a.device, &rc); /* the provenance and the models' descriptions */
    if (!ctx) return rc;
    prov_fill(&w.pv, ctx, &a);
    char date[32];
    prov_date(date, sizeof date);
    printf("device: %s\n", w.pv.device_label);
    prov_print(stdout, &w.pv, date);
    rc = check_models(&w, ctx);
    ft_ctx_free(ctx);
    if (rc) return rc;
    w.s = (sample *)calloc((size_t)w.n_points * (size_t)w.rounds, sizeof *w.s);
    w.dead = (char *)calloc((size_t)w.n_points, 1);
    w.prof_dead = (char *)calloc((size_t)w.n_points, 1);
    slot *slots = (slot *)calloc((size_t)w.n_entries, sizeof *slots);
    int *order = (int *)calloc((size_t)w.n_points, sizeof *order);
    double *times = (double *)calloc((size_t)a.iters, sizeof(double));
    int csv = 0; /* the CSV is started */
    if (!w.s || !w.dead || !w.prof_dead || !slots || !order || !times) rc = fail("out of host memory");
    printf("rounds: %d, each visiting the %d point%s in an order shuffled by --seed %llu and the round; per visit "
           "1 untimed + %d warm-up + %d timed forwards%s\n",
           w.rounds, w.n_points, w.n_points == 1 ? "" : "s", a.seed, a.warmup, a.iters,
           !a.overhead ? "" : w.defer ? "; then, after every timed visit of every round, 1 untimed + the same number "
                                        "profiled per point and round (CUPTI stays loaded once a process profiles)"
                                      : " + the same number profiled");
    /* every model's context (and profiler) now, so a profiler's note (another CUPTI
     * client attached: host timers only) is in the header; one that cannot be made
     * is tried again at its first visit, whose rows then say why it failed */
    for (int e = 0; !rc && e < w.n_entries; e++) {
        cli_errors_quiet = 1;
        (void)slot_open(&w, &slots[e]);
        cli_errors_quiet = 0;
        if (e == 0 && slots[e].prof && ft_profiler_cupti_note(slots[e].prof)[0])
            printf("profiler: %s\n", ft_profiler_cupti_note(slots[e].prof));
    }
    int n_kept = 0;
    if (!rc && a.csv) csv = !(rc = sweep_csv_open(&w, &n_kept));
    int todo = 0, to_profile = 0;
    for (size_t i = 0; i < (size_t)w.n_points * (size_t)w.rounds; i++) todo += !w.s[i].have;
    for (int p = 0; p < w.n_points; p++)
        for (int r = 0; r < w.rounds; r++) to_profile += needs_profile(&w, p, r);
    if (!rc && n_kept) printf("resumed: %d of %d rows already in %s; measuring %d\n", n_kept, todo + n_kept, a.csv, todo);
    if (!rc && w.defer && n_kept) printf("resumed: %d kept row%s still without a profiled pass\n", to_profile,
                                         to_profile == 1 ? "" : "s");
    if (!rc) sweep_print_header();
    progress pr;
    progress_begin(&pr, "sweep", todo + (w.defer ? todo + to_profile : 0));
    for (int r = 0; !rc && r < w.rounds; r++) {
        int n = 0;
        for (int p = 0; p < w.n_points; p++)
            if (!sweep_sample(&w, p, r)->have && !w.dead[p]) order[n++] = p;
        ft_stats_shuffle(order, n, a.seed, r);
        for (int k = 0; k < n; k++) {
            char label[300], step[320];
            sweep_point_label(&w, order[k], label, sizeof label);
            progress_clear(&pr);
            if ((rc = visit(&w, slots, order[k], r, k, times, csv))) break; /* the CSV is full */
            snprintf(step, sizeof step, "round %d, %s", r, label);
            progress_step(&pr, 1, step);
        }
    }
    /* deferred profiling: every round's profiled passes in that round's visiting order */
    for (int r = 0; !rc && w.defer && r < w.rounds; r++) {
        int n = 0;
        for (int p = 0; p < w.n_points; p++)
            if (needs_profile(&w, p, r)) order[n++] = p;
        for (int i = 1; i < n; i++) /* by the visit's position in the round (its order column) */
            for (int j = i; j > 0 && sweep_sample(&w, order[j - 1], r)->order > sweep_sample(&w, order[j], r)->order;
                 j--) {
                int t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
        if (r == 0) {
            progress_clear(&pr);
            printf("profiled passes, after every timed visit:\n");
        }
        for (int k = 0; k < n; k++) {
            char label[300], step[340];
            sweep_point_label(&w, order[k], label, sizeof label);
            progress_clear(&pr);
            if ((rc = visit_profiled(&w, slots, order[k], r, csv))) break; /* the CSV is full */
            snprintf(step, sizeof step, "profiled, round %d, %s", r, label);
            progress_step(&pr, 1, step);
        }
    }
    progress_end(&pr);
    for (int e = 0; slots && e < w.n_entries; e++) slot_close(&slots[e], w.n_modes);
    if (a.csv && ft_out_csv_close() && !rc) rc = 1;
    if (!rc) sweep_print_summary(&w);
    int dead = 0;
    for (int p = 0; w.dead && w.prof_dead && p < w.n_points; p++) dead += w.dead[p] || w.prof_dead[p];
    if (!rc && a.json) rc = sweep_write_json(&w, json_tmp, dead);
    if (!rc) rc = outfiles_commit();
    if (!rc && dead)
        rc = fail("%d of %d points failed%s%s%s", dead, w.n_points, a.csv ? " (status and error columns of " : "",
                  a.csv ? a.csv : "", a.csv ? ")" : "");
    free(w.s);
    free(w.dead);
    free(w.prof_dead);
    free(slots);
    free(order);
    free(times);
    return rc;
}

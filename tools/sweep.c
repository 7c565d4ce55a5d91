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
 * no observer). --protocol paper times as
 * Fernandez et al.'s harness does (back-to-back forwards, one sync, mean); the
 * default times each forward synchronized.
 *
 * The CSV (docs/benchmarking.md) holds one row per (point, round), written in
 * place and flushed as it is measured, so an interrupted sweep keeps what it
 * measured. A point that fails (out of memory, any error) is a row with status
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

static void sample_init(sample *s, int round) {
    memset(s, 0, sizeof *s);
    s->round = round;
    s->order = -1;
    s->length = s->kernels = s->params = s->macs = -1;
    s->mean = s->median = s->min = s->p90 = s->max = s->first = NAN;
    s->overhead_ms = s->share = s->profiled_ms = s->busy_ms = s->dispatch_ms = NAN;
    snprintf(s->status, sizeof s->status, "ok");
}

/* ---- the CSV: one small set of functions, so output handling lives in one place ---- */

static const char *const csv_cols[] = {
    "model", "arch", "device", "dtype", "mode", "batch", "length", "protocol", "iters", "mean_ms",
    "median_ms", "min_ms", "first_ms", "kernels_per_forward", "overhead_ms", "overhead_share", "status",
    "error", "p90_ms", "max_ms", "profiled_ms", "busy_ms", "warmup", "op_cost_us", "params", "macs",
    "threads", "ftengine_version", "commit", "date", "host", "device_label", "cuda_version", "round",
    "rounds", "seed", "order", "step_cost_us", "dispatch_ms", NULL};
enum { C_MODEL, C_ARCH, C_DEVICE, C_DTYPE, C_MODE, C_BATCH, C_LENGTH, C_PROTOCOL, C_ITERS, C_MEAN,
       C_MEDIAN, C_MIN, C_FIRST, C_KERNELS, C_OVER, C_SHARE, C_STATUS, C_ERROR, C_P90, C_MAX,
       C_PROFILED, C_BUSY, C_WARMUP, C_OPCOST, C_PARAMS, C_MACS, C_THREADS, C_VERSION, C_COMMIT,
       C_DATE, C_HOST, C_LABEL, C_CUDA, C_ROUND, C_ROUNDS, C_SEED, C_ORDER, C_STEPCOST, C_DISPATCH,
       C_N };

static void int_or_empty(FILE *f, long long v) {
    if (v >= 0) fprintf(f, "%lld", v);
}

/* The header line (with its '\n'), in a static buffer. */
static const char *csv_header(void) {
    static char h[1024];
    size_t n = 0;
    for (int i = 0; csv_cols[i]; i++) n += (size_t)snprintf(h + n, sizeof h - n, "%s%s", i ? "," : "", csv_cols[i]);
    snprintf(h + n, sizeof h - n, "\n");
    return h;
}

static void csv_row_text(FILE *f, const sweep *w, int p, const sample *s) {
    const args *a = w->a;
    const prov *pv = &w->pv;
    int e, c, m, b;
    sweep_axes(w, p, &e, &c, &m, &b);
    char oc[32], sc[32];
    sweep_cost_text(w->costs[c].op, oc, sizeof oc);
    sweep_cost_text(w->costs[c].step, sc, sizeof sc);
    csv_field(f, w->entries[e].name);
    fputc(',', f); csv_field(f, s->arch);
    fprintf(f, ",%s,%s,%s,%lld,", ft_device_name(a->device), ft_dtype_name(a->dtype), ft_mode_name(w->modes[m]),
            w->batches[b]);
    int_or_empty(f, s->length);
    fprintf(f, ",%s,%d,", a->paper ? "paper" : "sync", a->iters);
    csv_num(f, s->mean); fputc(',', f);
    csv_num(f, s->median); fputc(',', f);
    csv_num(f, s->min); fputc(',', f);
    csv_num(f, s->first); fputc(',', f);
    int_or_empty(f, s->kernels); fputc(',', f);
    csv_num(f, s->overhead_ms); fputc(',', f);
    csv_num(f, s->share);
    fprintf(f, ",%s,", s->status);
    csv_field(f, s->error); fputc(',', f);
    csv_num(f, s->p90); fputc(',', f);
    csv_num(f, s->max); fputc(',', f);
    csv_num(f, s->profiled_ms); fputc(',', f);
    csv_num(f, s->busy_ms);
    fprintf(f, ",%d,%s,", a->warmup, oc);
    int_or_empty(f, s->params); fputc(',', f);
    int_or_empty(f, s->macs);
    const char *tail[] = {pv->threads, pv->version, pv->commit, s->date, pv->host, pv->device_label, pv->cuda};
    for (int i = 0; i < 7; i++) {
        fputc(',', f);
        csv_field(f, tail[i]);
    }
    fprintf(f, ",%d,%d,%llu,", s->round, w->rounds, a->seed);
    int_or_empty(f, s->order);
    fprintf(f, ",%s,", sc);
    csv_num(f, s->dispatch_ms);
    fputc('\n', f);
}

/* One (point, round) row, appended whole (tools/outfiles.c: never a partial row); 0 or 1. */
static int csv_row(const sweep *w, int p, const sample *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return fail("out of host memory");
    csv_row_text(f, w, p, s);
    int rc = fclose(f) != 0 ? fail("out of host memory") : ft_out_csv_append_row(buf);
    free(buf);
    return rc;
}

static double num_or_nan(const char *s) {
    char *end = NULL;
    double v = strtod(s, &end);
    return *s && !*end ? v : NAN;
}

/* Why --resume does not keep a row: counted per reason, one example each. */
typedef struct drops {
    int n, count[8];
    char why[8][160];
} drops;

static void drop(drops *d, const char *why) {
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->why[i], why)) {
            d->count[i]++;
            return;
        }
    if (d->n == 7) snprintf(d->why[d->n++], sizeof d->why[0], "other reasons");
    if (d->n == 8) {
        d->count[7]++;
        return;
    }
    snprintf(d->why[d->n], sizeof d->why[0], "%s", why);
    d->count[d->n++] = 1;
}

/* The point of a row of an earlier run, if it is one of this sweep's; else -1 and
 * which axis it is off in why. */
static int row_point(char **c, const sweep *w, char *why, size_t wn) {
    ft_mode mode;
    long long batch = atoll(c[C_BATCH]), length = c[C_LENGTH][0] ? atoll(c[C_LENGTH]) : -1;
    int e = -1, k = -1, m = -1, b = -1, named = 0;
    for (int i = 0; i < w->n_entries && e < 0; i++) {
        named |= !strcmp(c[C_MODEL], w->entries[i].name);
        if (!strcmp(c[C_MODEL], w->entries[i].name) && (!w->entries[i].seq || length == w->entries[i].seq)) e = i;
    }
    for (int i = 0; i < w->n_costs && k < 0; i++) {
        char oc[32], sc[32];
        sweep_cost_text(w->costs[i].op, oc, sizeof oc);
        sweep_cost_text(w->costs[i].step, sc, sizeof sc);
        if (!strcmp(c[C_OPCOST], oc) && !strcmp(c[C_STEPCOST], sc)) k = i;
    }
    int mode_ok = ft_mode_parse(c[C_MODE], &mode) == FT_OK;
    for (int i = 0; mode_ok && i < w->n_modes; i++) if (w->modes[i] == mode) m = i;
    for (int i = 0; i < w->n_batches; i++) if (w->batches[i] == batch) b = i;
    if (e < 0 && !named) snprintf(why, wn, "model %.60s is not in this sweep", c[C_MODEL]);
    else if (e < 0) snprintf(why, wn, "%.60s at length %.12s (this sweep: another length)", c[C_MODEL], c[C_LENGTH]);
    else if (k < 0) snprintf(why, wn, "emulated cost op %.12s us / step %.12s us (not among this sweep's costs)",
                             c[C_OPCOST][0] ? c[C_OPCOST] : "-", c[C_STEPCOST][0] ? c[C_STEPCOST] : "-");
    else if (m < 0) snprintf(why, wn, "mode %.12s is not in --modes", c[C_MODE]);
    else if (b < 0) snprintf(why, wn, "batch %.12s is not in --batches", c[C_BATCH]);
    else return sweep_point(w, e, k, m, b);
    return -1;
}

/* A row of an earlier run of this very sweep (same commit, device and settings) that
 * measured its point in a round this sweep has: kept by --resume (fills *s, *point).
 * Otherwise the reason goes to d. */
static int row_reusable(char **c, int nc, const sweep *w, int *point, sample *s, drops *d) {
    const args *a = w->a;
    const prov *pv = &w->pv;
    char why[160], num[32];
    if (nc != C_N) return drop(d, "a malformed row"), 0;
    if (strcmp(c[C_STATUS], "ok")) {
        snprintf(why, sizeof why, "a failed point (%s), measured again", c[C_STATUS]);
        return drop(d, why), 0;
    }
    if (strcmp(c[C_COMMIT], pv->commit)) {
        snprintf(why, sizeof why, "measured by commit %.40s (this tool: %.40s)", c[C_COMMIT], pv->commit);
        return drop(d, why), 0;
    }
    if (strcmp(c[C_DEVICE], ft_device_name(a->device)) || strcmp(c[C_LABEL], pv->device_label) ||
        strcmp(c[C_THREADS], pv->threads) || strcmp(c[C_CUDA], pv->cuda)) {
        snprintf(why, sizeof why, "measured on %.100s (threads %.8s)", c[C_LABEL], c[C_THREADS]);
        return drop(d, why), 0;
    }
    const char *mine[] = {ft_dtype_name(a->dtype), a->paper ? "paper" : "sync", NULL, NULL};
    snprintf(num, sizeof num, "%d", a->iters);
    mine[2] = num;
    char wu[32];
    snprintf(wu, sizeof wu, "%d", a->warmup);
    mine[3] = wu;
    const int cols[] = {C_DTYPE, C_PROTOCOL, C_ITERS, C_WARMUP};
    const char *names[] = {"--dtype", "--protocol", "--iters", "--warmup"};
    for (int i = 0; i < 4; i++)
        if (strcmp(c[cols[i]], mine[i])) {
            snprintf(why, sizeof why, "measured with %s %.20s (this sweep: %s)", names[i], c[cols[i]], mine[i]);
            return drop(d, why), 0;
        }
    if (a->overhead && !c[C_PROFILED][0]) return drop(d, "no profiled pass (this sweep has --overhead)"), 0;
    int p = row_point(c, w, why, sizeof why);
    if (p < 0) return drop(d, why), 0;
    int round = atoi(c[C_ROUND]);
    if (!c[C_ROUND][0] || round < 0) return drop(d, "a malformed row"), 0;
    if (round >= w->rounds) {
        snprintf(why, sizeof why, "a round past --rounds %d", w->rounds);
        return drop(d, why), 0;
    }
    if (sweep_sample(w, p, round)->have) return drop(d, "a second row of the same point and round"), 0;
    sample_init(s, round);
    *point = p;
    snprintf(s->arch, sizeof s->arch, "%s", c[C_ARCH]);
    snprintf(s->date, sizeof s->date, "%s", c[C_DATE]);
    s->order = c[C_ORDER][0] ? atoi(c[C_ORDER]) : -1;
    s->length = c[C_LENGTH][0] ? atoll(c[C_LENGTH]) : -1;
    s->kernels = c[C_KERNELS][0] ? atoll(c[C_KERNELS]) : -1;
    s->params = c[C_PARAMS][0] ? atoll(c[C_PARAMS]) : -1;
    s->macs = c[C_MACS][0] ? atoll(c[C_MACS]) : -1;
    double *dst[] = {&s->mean, &s->median, &s->min, &s->first, &s->overhead_ms, &s->share, &s->p90,
                     &s->max, &s->profiled_ms, &s->busy_ms, &s->dispatch_ms};
    int col[] = {C_MEAN, C_MEDIAN, C_MIN, C_FIRST, C_OVER, C_SHARE, C_P90, C_MAX, C_PROFILED, C_BUSY, C_DISPATCH};
    for (int i = 0; i < 11; i++) *dst[i] = num_or_nan(c[col[i]]);
    s->have = 1;
    return 1;
}

static void print_header(void);
static void print_row(const sweep *w, int p, const sample *s);

/* --resume: each line of the old CSV (tools/outfiles.c passes them), kept when
 * reusable; the reasons for the others are counted. */
typedef struct resume_state {
    sweep *w;
    drops d;
    int kept;
} resume_state;

static int keep_row(void *user, const char *line) {
    resume_state *r = (resume_state *)user;
    char copy[8192], *c[C_N + 1];
    if (strlen(line) >= sizeof copy) {
        drop(&r->d, "a line too long to be a sweep row");
        return 0;
    }
    snprintf(copy, sizeof copy, "%s", line);
    int nc = csv_split(copy, c, C_N + 1), p;
    sample s;
    if (!row_reusable(c, nc, r->w, &p, &s, &r->d)) return 0;
    *sweep_sample(r->w, p, s.round) = s;
    return 1;
}

/* Starts the CSV opened (and locked) by ft_out_csv_open. Without --resume it is
 * (re)written with the header. With --resume the reusable rows of an existing file
 * are kept (rewritten beside it and renamed over it, so a kill leaves either file
 * whole), marked in w's samples, and listed; the rest of the old file is dropped,
 * and why is said. 0 or 1. */
static int csv_open(sweep *w, int *n_kept) {
    const args *a = w->a;
    *n_kept = 0;
    if (a->resume && access(a->csv, F_OK) != 0)
        printf("resume: %s does not exist yet: every point is measured\n", a->csv);
    resume_state r;
    memset(&r, 0, sizeof r);
    r.w = w;
    int rc = ft_out_csv_start(csv_header(), a->resume, keep_row, &r, n_kept);
    if (rc || !a->resume) return rc;
    int dropped = 0;
    for (int i = 0; i < r.d.n; i++) dropped += r.d.count[i];
    printf("resume: %s: kept %d row%s (point x round), dropped %d\n", a->csv, *n_kept, *n_kept == 1 ? "" : "s",
           dropped);
    for (int i = 0; i < r.d.n; i++) printf("resume: dropped %d: %s\n", r.d.count[i], r.d.why[i]);
    if (*n_kept) { /* the kept rows, as this sweep would have printed them */
        printf("resume: the kept rows:\n");
        print_header();
        for (int k = 0; k < w->rounds; k++)
            for (int p = 0; p < w->n_points; p++)
                if (sweep_sample(w, p, k)->have) print_row(w, p, sweep_sample(w, p, k));
    }
    return 0;
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

static void record_failure(ft_ctx *ctx, sample *p, const char *prefix) {
    long long length = p->length;
    char arch[sizeof p->arch];
    snprintf(arch, sizeof arch, "%s", p->arch);
    int round = p->round, order = p->order;
    sample_init(p, round); /* no half-measured numbers in a failed row */
    p->order = order;
    p->length = length;
    snprintf(p->arch, sizeof p->arch, "%s", arch);
    snprintf(p->status, sizeof p->status, "%s", ctx && ft_ctx_status(ctx) == FT_ERR_OOM ? "oom" : "error");
    snprintf(p->error, sizeof p->error, "%s%.560s", prefix, cli_last_error);
    if (ctx) ft_ctx_clear_error(ctx);
}

/* The table: a point's batch and mode first (then its model and emulated costs when
 * the sweep has several), its round, then the visit's numbers. */
static void print_header(void) {
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

static void print_row(const sweep *w, int p, const sample *s) {
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
    sample_init(s, r);
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
        if (rc || measure(sl->ctx, m, sl->prof, a, w->batches[bi], w->entries[e].seq, times, s)) {
            record_failure(sl->ctx, s, "");
            /* the model may hold half-built state: the next point starts afresh */
            ft_model_free(m);
            sl->m[mi] = NULL;
        }
    }
    cli_errors_quiet = 0;
    prov_date(s->date, sizeof s->date);
    s->have = 1;
    print_row(w, p, s);
    if (strcmp(s->status, "ok")) w->dead[p] = 1;
    return csv ? csv_row(w, p, s) : 0;
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
    slot *slots = (slot *)calloc((size_t)w.n_entries, sizeof *slots);
    int *order = (int *)calloc((size_t)w.n_points, sizeof *order);
    double *times = (double *)calloc((size_t)a.iters, sizeof(double));
    int csv = 0; /* the CSV is started */
    if (!w.s || !w.dead || !slots || !order || !times) rc = fail("out of host memory");
    printf("rounds: %d, each visiting the %d point%s in an order shuffled by --seed %llu and the round; per visit "
           "1 untimed + %d warm-up + %d timed forwards%s\n",
           w.rounds, w.n_points, w.n_points == 1 ? "" : "s", a.seed, a.warmup, a.iters,
           a.overhead ? " + the same number profiled" : "");
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
    if (!rc && a.csv) csv = !(rc = csv_open(&w, &n_kept));
    int todo = 0;
    for (size_t i = 0; i < (size_t)w.n_points * (size_t)w.rounds; i++) todo += !w.s[i].have;
    if (!rc && n_kept) printf("resumed: %d of %d rows already in %s; measuring %d\n", n_kept, todo + n_kept, a.csv, todo);
    if (!rc) print_header();
    progress pr;
    progress_begin(&pr, "sweep", todo);
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
    progress_end(&pr);
    for (int e = 0; slots && e < w.n_entries; e++) slot_close(&slots[e], w.n_modes);
    if (a.csv && ft_out_csv_close() && !rc) rc = 1;
    if (!rc) sweep_print_summary(&w);
    int dead = 0;
    for (int p = 0; w.dead && p < w.n_points; p++) dead += w.dead[p];
    if (!rc && a.json) rc = sweep_write_json(&w, json_tmp, dead);
    if (!rc) rc = outfiles_commit();
    if (!rc && dead)
        rc = fail("%d of %d points failed%s%s%s", dead, w.n_points, a.csv ? " (status and error columns of " : "",
                  a.csv ? a.csv : "", a.csv ? ")" : "");
    free(w.s);
    free(w.dead);
    free(slots);
    free(order);
    free(times);
    return rc;
}

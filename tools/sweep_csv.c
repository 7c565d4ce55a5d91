/*
 * sweep_csv.c - the CSV of `ftengine sweep` (tools/sweep.h): one row per (point,
 * round), appended whole as it is measured (tools/outfiles.c), and --resume, which
 * keeps the rows of an earlier run of the same sweep and says why it drops the others.
 *
 * Two row kinds share the columns (docs/benchmarking.md). A visit's row holds the
 * timed forwards and, with --overhead, the profiled pass of the same visit. Where
 * profiling loads CUPTI (CUDA builds with CUPTI, device cuda: it stays loaded for the
 * rest of the process, engine/cupti.c) the profiled passes run after every timed
 * visit instead, and each writes a second row for its (point, round) with protocol
 * "profiled": the overhead columns, no latency. Readers join the two
 * (bench/studydata.py); a reader that does not know the kind sees rows without a
 * latency, which it skips. So an interrupted sweep keeps every timed row.
 */
#include "sweep.h"
#include "outfiles.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static void csv_row_text(FILE *f, const sweep *w, int p, const sample *s, int kind) {
    const args *a = w->a;
    const prov *pv = &w->pv;
    const int pk = kind == SWEEP_ROW_PROFILED; /* the latency columns stay empty */
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
    fprintf(f, ",%s,%d,", pk ? SWEEP_PROFILED_PROTOCOL : a->paper ? "paper" : "sync", a->iters);
    csv_num(f, pk ? NAN : s->mean); fputc(',', f);
    csv_num(f, pk ? NAN : s->median); fputc(',', f);
    csv_num(f, pk ? NAN : s->min); fputc(',', f);
    csv_num(f, pk ? NAN : s->first); fputc(',', f);
    int_or_empty(f, s->kernels); fputc(',', f);
    csv_num(f, s->overhead_ms); fputc(',', f);
    csv_num(f, s->share);
    fprintf(f, ",%s,", s->status);
    csv_field(f, s->error); fputc(',', f);
    csv_num(f, pk ? NAN : s->p90); fputc(',', f);
    csv_num(f, pk ? NAN : s->max); fputc(',', f);
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

int sweep_csv_row(const sweep *w, int p, const sample *s, int kind) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return fail("out of host memory");
    csv_row_text(f, w, p, s, kind);
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
 * measured its point in a round this sweep has: kept by --resume. A visit's row fills
 * *s and *point and gives 1; a profiled-pass row (deferred profiling) is joined to
 * the visit's row kept before it, in place, and gives 2. Otherwise 0, and the reason
 * goes to d. */
static int row_reusable(char **c, int nc, sweep *w, int *point, sample *s, drops *d) {
    const args *a = w->a;
    const prov *pv = &w->pv;
    char why[160], num[32];
    if (nc != C_N) return drop(d, "a malformed row"), 0;
    if (strcmp(c[C_STATUS], "ok")) {
        snprintf(why, sizeof why, "a failed %s (%s), measured again",
                 strcmp(c[C_PROTOCOL], SWEEP_PROFILED_PROTOCOL) ? "point" : "profiled pass", c[C_STATUS]);
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
    int profiled = !strcmp(c[C_PROTOCOL], SWEEP_PROFILED_PROTOCOL);
    if (profiled && !w->defer)
        return drop(d, a->overhead ? "a profiled-pass row (this sweep profiles within each visit)"
                                   : "a profiled-pass row (this sweep has no --overhead)"), 0;
    const char *mine[] = {ft_dtype_name(a->dtype), a->paper ? "paper" : "sync", NULL, NULL};
    if (profiled) mine[1] = SWEEP_PROFILED_PROTOCOL;
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
    /* deferred profiling: a visit's row has no profiled columns; its profiled row follows */
    if (a->overhead && !w->defer && !c[C_PROFILED][0]) return drop(d, "no profiled pass (this sweep has --overhead)"), 0;
    int p = row_point(c, w, why, sizeof why);
    if (p < 0) return drop(d, why), 0;
    int round = atoi(c[C_ROUND]);
    if (!c[C_ROUND][0] || round < 0) return drop(d, "a malformed row"), 0;
    if (round >= w->rounds) {
        snprintf(why, sizeof why, "a round past --rounds %d", w->rounds);
        return drop(d, why), 0;
    }
    sample *have = sweep_sample(w, p, round);
    if (profiled) {
        if (!have->have) return drop(d, "a profiled pass without its visit's row"), 0;
        if (have->prof) return drop(d, "a second profiled pass of the same point and round"), 0;
        have->overhead_ms = num_or_nan(c[C_OVER]);
        have->share = num_or_nan(c[C_SHARE]);
        have->profiled_ms = num_or_nan(c[C_PROFILED]);
        have->busy_ms = num_or_nan(c[C_BUSY]);
        have->dispatch_ms = num_or_nan(c[C_DISPATCH]);
        if (have->kernels < 0 && c[C_KERNELS][0]) have->kernels = atoll(c[C_KERNELS]);
        have->prof = 1;
        return 2;
    }
    if (have->have) return drop(d, "a second row of the same point and round"), 0;
    sweep_sample_init(s, round);
    *point = p;
    snprintf(s->arch, sizeof s->arch, "%s", c[C_ARCH]);
    snprintf(s->date, sizeof s->date, "%s", c[C_DATE]);
    s->order = c[C_ORDER][0] ? atoi(c[C_ORDER]) : -1;
    s->length = c[C_LENGTH][0] ? atoll(c[C_LENGTH]) : -1;
    s->kernels = c[C_KERNELS][0] ? atoll(c[C_KERNELS]) : -1;
    s->params = c[C_PARAMS][0] ? atoll(c[C_PARAMS]) : -1;
    s->macs = c[C_MACS][0] ? atoll(c[C_MACS]) : -1;
    double *dst[] = {&s->mean, &s->median, &s->min, &s->first, &s->p90, &s->max,
                     &s->overhead_ms, &s->share, &s->profiled_ms, &s->busy_ms, &s->dispatch_ms};
    int col[] = {C_MEAN, C_MEDIAN, C_MIN, C_FIRST, C_P90, C_MAX, C_OVER, C_SHARE, C_PROFILED, C_BUSY, C_DISPATCH};
    for (int i = 0; i < 11; i++) *dst[i] = num_or_nan(c[col[i]]);
    s->prof = !isnan(s->profiled_ms); /* deferred: 0 until its profiled row */
    s->have = 1;
    return 1;
}

/* --resume: each line of the old CSV (tools/outfiles.c passes them), kept when
 * reusable; the reasons for the others are counted. */
typedef struct resume_state {
    sweep *w;
    drops d;
    int kept, kept_profiled;
} resume_state;

static int keep_row(void *user, const char *line) {
    resume_state *r = (resume_state *)user;
    char copy[8192], *c[C_N + 1];
    if (strlen(line) >= sizeof copy) {
        drop(&r->d, "a line too long to be a sweep row");
        return 0;
    }
    snprintf(copy, sizeof copy, "%s", line);
    int nc = csv_split(copy, c, C_N + 1), p = -1;
    sample s;
    int kind = row_reusable(c, nc, r->w, &p, &s, &r->d);
    if (kind == 1) *sweep_sample(r->w, p, s.round) = s;
    if (kind == 2) r->kept_profiled++;
    return kind != 0;
}

/* Starts the CSV opened (and locked) by ft_out_csv_open. Without --resume it is
 * (re)written with the header. With --resume the reusable rows of an existing file
 * are kept (rewritten beside it and renamed over it, so a kill leaves either file
 * whole), marked in w's samples, and listed; the rest of the old file is dropped,
 * and why is said. *n_kept: the visits' rows kept (profiled-pass rows not counted).
 * 0 or 1. */
int sweep_csv_open(sweep *w, int *n_kept) {
    const args *a = w->a;
    *n_kept = 0;
    if (a->resume && access(a->csv, F_OK) != 0)
        printf("resume: %s does not exist yet: every point is measured\n", a->csv);
    resume_state r;
    memset(&r, 0, sizeof r);
    r.w = w;
    int rc = ft_out_csv_start(csv_header(), a->resume, keep_row, &r, n_kept);
    if (rc || !a->resume) return rc;
    *n_kept -= r.kept_profiled;
    int dropped = 0;
    for (int i = 0; i < r.d.n; i++) dropped += r.d.count[i];
    printf("resume: %s: kept %d row%s (point x round)", a->csv, *n_kept, *n_kept == 1 ? "" : "s");
    if (w->defer) printf(" and %d profiled-pass row%s", r.kept_profiled, r.kept_profiled == 1 ? "" : "s");
    printf(", dropped %d\n", dropped);
    for (int i = 0; i < r.d.n; i++) printf("resume: dropped %d: %s\n", r.d.count[i], r.d.why[i]);
    if (*n_kept) { /* the kept rows, as this sweep would have printed them */
        printf("resume: the kept rows:\n");
        sweep_print_header();
        for (int k = 0; k < w->rounds; k++)
            for (int p = 0; p < w->n_points; p++)
                if (sweep_sample(w, p, k)->have) sweep_print_row(w, p, sweep_sample(w, p, k));
    }
    return 0;
}

/*
 * sweep.c - `ftengine sweep`: the framework-tax curve of one model, latency
 * against batch size for each execution mode (the paper's Figure 2 and its
 * framework-overhead figure), as a table, a CSV file and a JSON summary.
 *
 * Each mode loads the model once and runs every batch size on it (a new batch
 * size is a new plan in graph and static mode, built during the untimed first
 * forward). Per point the timed pass comes first; with --overhead a second,
 * profiled pass measures the framework overhead (wall time not covered by
 * device work) with ft_profiler, so the headline latency carries no observer.
 * --protocol paper times as Fernandez et al.'s harness does (back-to-back
 * forwards, one sync, mean); the default times each forward synchronized.
 *
 * The CSV (docs/benchmarking.md) is written in place, one flushed row per point
 * as the point finishes, so an interrupted sweep keeps what it measured. A point
 * that fails (out of memory, any error) is a row with status "oom" or "error"
 * and the message, and the sweep goes on; the exit status is 1 when any point
 * failed. --resume keeps the rows of points already measured ("ok") by this
 * commit on this device with the same settings and measures only the others.
 * A model that cannot be loaded at all is an error before any CSV is written.
 */
#include "cli.h"
#include "provenance.h"
#include "outfiles.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SWEEP_MAX 32

/* --modes and --batches (tools/cli.c: ft_cli_list_*): the count, or -1 after the
 * usage error was printed */
static int parse_modes(const char *s, ft_mode *out) { return ft_cli_list_modes("--modes", s, SWEEP_MAX, out); }

static int parse_batches(const char *s, long long *out) {
    return ft_cli_list_ints("--batches", s, SWEEP_MAX, 1, 1000000, out);
}

/* One measured (or failed) point. Numbers are NaN / -1 when not measured. */
typedef struct point {
    ft_mode mode;
    long long batch, length, kernels, params, macs;
    char status[8], error[600], arch[64], date[32];
    double mean, median, min, p90, max, first, overhead_ms, share, profiled_ms, busy_ms;
} point;

static void point_init(point *p, ft_mode mode, long long batch) {
    memset(p, 0, sizeof *p);
    p->mode = mode;
    p->batch = batch;
    p->length = p->kernels = p->params = p->macs = -1;
    p->mean = p->median = p->min = p->p90 = p->max = p->first = NAN;
    p->overhead_ms = p->share = p->profiled_ms = p->busy_ms = NAN;
    snprintf(p->status, sizeof p->status, "ok");
}

/* ---- the CSV: one small set of functions, so output handling lives in one place ---- */

static const char *const csv_cols[] = {
    "model", "arch", "device", "dtype", "mode", "batch", "length", "protocol", "iters", "mean_ms",
    "median_ms", "min_ms", "first_ms", "kernels_per_forward", "overhead_ms", "overhead_share", "status",
    "error", "p90_ms", "max_ms", "profiled_ms", "busy_ms", "warmup", "op_cost_us", "params", "macs",
    "threads", "ftengine_version", "commit", "date", "host", "device_label", "cuda_version", NULL};
enum { C_MODEL, C_ARCH, C_DEVICE, C_DTYPE, C_MODE, C_BATCH, C_LENGTH, C_PROTOCOL, C_ITERS, C_MEAN,
       C_MEDIAN, C_MIN, C_FIRST, C_KERNELS, C_OVER, C_SHARE, C_STATUS, C_ERROR, C_P90, C_MAX,
       C_PROFILED, C_BUSY, C_WARMUP, C_OPCOST, C_PARAMS, C_MACS, C_THREADS, C_VERSION, C_COMMIT,
       C_DATE, C_HOST, C_LABEL, C_CUDA, C_N };

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

static void op_cost_text(const args *a, char *buf, size_t n) {
    buf[0] = 0;
    if (a->op_cost_us >= 0) snprintf(buf, n, "%g", a->op_cost_us);
}

static void csv_row_text(FILE *f, const args *a, const prov *pv, const point *p) {
    char oc[32];
    op_cost_text(a, oc, sizeof oc);
    csv_field(f, a->model);
    fputc(',', f); csv_field(f, p->arch);
    fprintf(f, ",%s,%s,%s,%lld,", ft_device_name(a->device), ft_dtype_name(a->dtype), ft_mode_name(p->mode),
            p->batch);
    int_or_empty(f, p->length);
    fprintf(f, ",%s,%d,", a->paper ? "paper" : "sync", a->iters);
    csv_num(f, p->mean); fputc(',', f);
    csv_num(f, p->median); fputc(',', f);
    csv_num(f, p->min); fputc(',', f);
    csv_num(f, p->first); fputc(',', f);
    int_or_empty(f, p->kernels); fputc(',', f);
    csv_num(f, p->overhead_ms); fputc(',', f);
    csv_num(f, p->share);
    fprintf(f, ",%s,", p->status);
    csv_field(f, p->error); fputc(',', f);
    csv_num(f, p->p90); fputc(',', f);
    csv_num(f, p->max); fputc(',', f);
    csv_num(f, p->profiled_ms); fputc(',', f);
    csv_num(f, p->busy_ms);
    fprintf(f, ",%d,%s,", a->warmup, oc);
    int_or_empty(f, p->params); fputc(',', f);
    int_or_empty(f, p->macs);
    const char *tail[] = {pv->threads, pv->version, pv->commit, p->date, pv->host, pv->device_label, pv->cuda};
    for (int i = 0; i < 7; i++) {
        fputc(',', f);
        csv_field(f, tail[i]);
    }
    fputc('\n', f);
}

/* One point's row, appended whole (tools/outfiles.c: never a partial row); 0 or 1. */
static int csv_row(const args *a, const prov *pv, const point *p) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return fail("out of host memory");
    csv_row_text(f, a, pv, p);
    int rc = fclose(f) != 0 ? fail("out of host memory") : ft_out_csv_append_row(buf);
    free(buf);
    return rc;
}

static double num_or_nan(const char *s) {
    char *end = NULL;
    double v = strtod(s, &end);
    return *s && !*end ? v : NAN;
}

/* A row of an earlier run of this very sweep (same commit, device and settings)
 * that measured its point: kept by --resume. Fills *p from it. */
static int row_reusable(char **c, int nc, const args *a, const prov *pv, const ft_mode *modes,
                        int n_modes, const long long *batches, int n_batches, int *mi, int *bi,
                        point *p) {
    char oc[32], num[32];
    op_cost_text(a, oc, sizeof oc);
    if (nc != C_N || strcmp(c[C_STATUS], "ok") || strcmp(c[C_MODEL], a->model) ||
        strcmp(c[C_DEVICE], ft_device_name(a->device)) || strcmp(c[C_DTYPE], ft_dtype_name(a->dtype)) ||
        strcmp(c[C_PROTOCOL], a->paper ? "paper" : "sync") || strcmp(c[C_OPCOST], oc) ||
        strcmp(c[C_COMMIT], pv->commit) || strcmp(c[C_LABEL], pv->device_label) ||
        strcmp(c[C_THREADS], pv->threads) || strcmp(c[C_CUDA], pv->cuda))
        return 0;
    snprintf(num, sizeof num, "%d", a->iters);
    if (strcmp(c[C_ITERS], num)) return 0;
    snprintf(num, sizeof num, "%d", a->warmup);
    if (strcmp(c[C_WARMUP], num)) return 0;
    if (a->seq && atoll(c[C_LENGTH]) != a->seq) return 0;
    if (a->overhead && !c[C_PROFILED][0]) return 0;
    ft_mode mode;
    if (ft_mode_parse(c[C_MODE], &mode) != FT_OK) return 0;
    long long batch = atoll(c[C_BATCH]);
    *mi = *bi = -1;
    for (int i = 0; i < n_modes; i++) if (modes[i] == mode) *mi = i;
    for (int i = 0; i < n_batches; i++) if (batches[i] == batch) *bi = i;
    if (*mi < 0 || *bi < 0) return 0;
    point_init(p, mode, batch);
    snprintf(p->arch, sizeof p->arch, "%s", c[C_ARCH]);
    snprintf(p->date, sizeof p->date, "%s", c[C_DATE]);
    p->length = c[C_LENGTH][0] ? atoll(c[C_LENGTH]) : -1;
    p->kernels = c[C_KERNELS][0] ? atoll(c[C_KERNELS]) : -1;
    p->params = c[C_PARAMS][0] ? atoll(c[C_PARAMS]) : -1;
    p->macs = c[C_MACS][0] ? atoll(c[C_MACS]) : -1;
    double *d[] = {&p->mean, &p->median, &p->min, &p->first, &p->overhead_ms, &p->share, &p->p90,
                   &p->max, &p->profiled_ms, &p->busy_ms};
    int col[] = {C_MEAN, C_MEDIAN, C_MIN, C_FIRST, C_OVER, C_SHARE, C_P90, C_MAX, C_PROFILED, C_BUSY};
    for (int i = 0; i < 10; i++) *d[i] = num_or_nan(c[col[i]]);
    return 1;
}

/* --resume: what the kept rows of the old CSV say (tools/outfiles.c passes each line). */
typedef struct resume_state {
    const args *a;
    const prov *pv;
    const ft_mode *modes;
    const long long *batches;
    int n_modes, n_batches;
    int (*done)[SWEEP_MAX];
    point *pts;
} resume_state;

static int keep_row(void *user, const char *line) {
    resume_state *r = (resume_state *)user;
    char copy[8192], *c[C_N + 1];
    if (strlen(line) >= sizeof copy) return 0;
    snprintf(copy, sizeof copy, "%s", line);
    int nc = csv_split(copy, c, C_N + 1), mi, bi;
    point p;
    if (!row_reusable(c, nc, r->a, r->pv, r->modes, r->n_modes, r->batches, r->n_batches, &mi, &bi, &p) ||
        r->done[mi][bi])
        return 0;
    r->done[mi][bi] = 1;
    r->pts[mi * r->n_batches + bi] = p;
    return 1;
}

/* Starts the CSV opened by ft_out_csv_open. Without --resume it is (re)written with
 * the header. With --resume the reusable rows of an existing file are kept (rewritten
 * beside it and renamed over it, so a kill leaves either file whole), their points
 * marked in done[][] and copied to pts[]; the rest of the old file is dropped. */
static int csv_open(const args *a, const prov *pv, const ft_mode *modes, int n_modes, const long long *batches,
                    int n_batches, int done[][SWEEP_MAX], point *pts, int *n_done) {
    resume_state r = {a, pv, modes, batches, n_modes, n_batches, done, pts};
    return ft_out_csv_start(csv_header(), a->resume, keep_row, &r, n_done);
}

/* ---- the JSON summary ---- */

static void json_point(FILE *f, const point *p) {
    fprintf(f, "    {\"mode\": \"%s\", \"batch\": %lld, \"length\": ", ft_mode_name(p->mode), p->batch);
    json_num(f, p->length >= 0 ? (double)p->length : NAN);
    fprintf(f, ", \"status\": \"%s\", \"error\": ", p->status);
    json_str(f, p->error);
    fputs(", \"arch\": ", f);
    json_str(f, p->arch);
    fputs(", \"date\": ", f);
    json_str(f, p->date);
    const char *k[] = {"mean_ms", "median_ms", "min_ms", "p90_ms", "max_ms", "first_ms", "overhead_ms",
                       "overhead_share", "profiled_ms", "busy_ms"};
    double v[] = {p->mean, p->median, p->min, p->p90, p->max, p->first, p->overhead_ms, p->share,
                  p->profiled_ms, p->busy_ms};
    for (int i = 0; i < 10; i++) {
        fprintf(f, ", \"%s\": ", k[i]);
        json_num(f, v[i]);
    }
    const char *ki[] = {"kernels_per_forward", "params", "macs"};
    long long vi[] = {p->kernels, p->params, p->macs};
    for (int i = 0; i < 3; i++) {
        fprintf(f, ", \"%s\": ", ki[i]);
        if (vi[i] >= 0) fprintf(f, "%lld", vi[i]);
        else fputs("null", f);
    }
    fputc('}', f);
}

/* Written to the temporary of tools/outfiles.c (tmp), committed by the caller. */
static int write_json(const args *a, const char *tmp, const prov *pv, const point *pts, const int *have,
                      int n, int failed) {
    char date[32];
    prov_date(date, sizeof date);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len); /* written whole, every write checked (tools/outfiles.c) */
    if (!f) return fail("out of host memory");
    char oc[32];
    op_cost_text(a, oc, sizeof oc);
    fputs("{\n  \"schema\": \"ftengine-sweep/1\",\n  \"provenance\": {\n", f);
    prov_json(f, pv, date, "    ");
    fputs("\n  },\n  \"config\": {\"model\": ", f);
    json_str(f, a->model);
    fprintf(f, ", \"device\": \"%s\", \"dtype\": \"%s\", \"protocol\": \"%s\", \"iters\": %d, "
               "\"warmup\": %d, \"seq\": ",
            ft_device_name(a->device), ft_dtype_name(a->dtype), a->paper ? "paper" : "sync", a->iters,
            a->warmup);
    if (a->seq) fprintf(f, "%lld", a->seq);
    else fputs("null", f);
    fprintf(f, ", \"op_cost_us\": %s, \"overhead\": %s, \"mem_limit\": ", oc[0] ? oc : "null",
            a->overhead ? "true" : "false");
    if (a->mem_limit) fprintf(f, "%zu", a->mem_limit);
    else fputs("null", f);
    fprintf(f, "},\n  \"failed\": %d,\n  \"points\": [\n", failed);
    int first = 1;
    for (int i = 0; i < n; i++) {
        if (!have[i]) continue;
        if (!first) fputs(",\n", f);
        first = 0;
        json_point(f, &pts[i]);
    }
    fputs("\n  ]\n}\n", f);
    int rc = fclose(f) != 0 ? fail("out of host memory") : outfile_write(tmp, buf, len);
    free(buf);
    return rc;
}

/* ---- measuring ---- */

/* A profiled pass of `iters` synchronized forwards: the overhead of its wall time. */
static int overhead_pass(ft_ctx *ctx, ft_profiler *prof, ft_model *m, const ft_host_tensor *in,
                         int n_in, int iters, point *p, long long *ops) {
    if (ft_profiler_start(prof) != FT_OK) return fail("profiler: %s", ft_ctx_errmsg(ctx));
    for (int i = 0; i < iters; i++)
        if (ft_model_forward(m, in, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) {
            ft_profiler_stop(prof);
            return fail("%s", ft_ctx_errmsg(ctx));
        }
    ft_profile_summary s;
    if (ft_profiler_stop(prof) != FT_OK || ft_profiler_summary(prof, &s) != FT_OK)
        return fail("profiler: %s", ft_ctx_errmsg(ctx));
    *ops = (long long)((s.ops + s.ops_dropped) / iters); /* op records: the launches of eager mode */
    if (s.wall_us > 0) p->profiled_ms = s.wall_us / 1e3 / iters;
    if (s.busy_source != FT_BUSY_NONE && s.wall_us > 0) {
        p->share = s.overhead_us / s.wall_us;
        p->overhead_ms = s.overhead_us / 1e3 / iters;
        p->busy_ms = s.busy_us / 1e3 / iters;
    }
    return 0;
}

/* Measures one point on model m; returns 0, or fail()'s code with the message in cli_last_error. */
static int measure(ft_ctx *ctx, ft_model *m, ft_profiler *prof, const args *a, double *times, point *p) {
    ft_host_tensor in[8];
    int n_in = 0;
    void *owned = NULL;
    if (ft_model_example_inputs(m, p->batch, a->seq, in, &n_in, &owned) != FT_OK) {
        free(owned);
        return fail("%s", ft_ctx_errmsg(ctx));
    }
    /* tokens, image side or samples: the last dim of the first input */
    p->length = in[0].ndim > 1 ? (long long)in[0].shape[in[0].ndim - 1] : -1;
    long long ops = -1;
    int rc = time_forwards(ctx, m, in, n_in, a->warmup, a->iters, a->paper, times, &p->first, &p->mean);
    if (!rc && !a->paper) { /* times[] is sorted */
        p->median = times[a->iters / 2];
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
    if (ft_model_macs(m, p->batch, a->seq, &macs) == FT_OK) p->macs = macs;
    else ft_ctx_clear_error(ctx); /* MACs are a by-product: a model without them still has its latency */
    return 0;
}

static void record_failure(ft_ctx *ctx, point *p) {
    long long length = p->length;
    char arch[sizeof p->arch];
    snprintf(arch, sizeof arch, "%s", p->arch);
    point_init(p, p->mode, p->batch); /* no half-measured numbers in a failed row */
    p->length = length;
    snprintf(p->arch, sizeof p->arch, "%s", arch);
    snprintf(p->status, sizeof p->status, "%s", ft_ctx_status(ctx) == FT_ERR_OOM ? "oom" : "error");
    snprintf(p->error, sizeof p->error, "%.590s", cli_last_error);
    ft_ctx_clear_error(ctx);
}

static void print_row(const args *a, const point *p) {
    char md[32] = "-", mn[32] = "-", kn[24] = "-", ov[32] = "-";
    if (strcmp(p->status, "ok")) {
        printf("%-7lld %-7s FAILED (%s): %s\n", p->batch, ft_mode_name(p->mode), p->status, p->error);
        fflush(stdout);
        return;
    }
    if (!isnan(p->median)) snprintf(md, sizeof md, "%.4f", p->median);
    if (!isnan(p->min)) snprintf(mn, sizeof mn, "%.4f", p->min);
    if (p->kernels >= 0) snprintf(kn, sizeof kn, "%lld", p->kernels);
    if (!isnan(p->share)) snprintf(ov, sizeof ov, "%.1f%%", 100 * p->share);
    printf("%-7lld %-7s %10.4f %10s %10s %9s %12s\n", p->batch, ft_mode_name(p->mode), p->mean, md, mn, kn,
           ov);
    fflush(stdout);
}

int cmd_sweep(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.model) return usage("sweep needs a MODEL");
    if (a.resume && !a.csv) return usage("--resume needs --csv FILE (the sweep to resume)");
    if (a.ops_csv) return usage("--ops-csv belongs to bench and run; sweep writes its points with --csv");
    ft_mode modes[SWEEP_MAX];
    long long batches[SWEEP_MAX];
    int n_modes = parse_modes(a.modes ? a.modes : "eager,graph,static", modes), n_batches = 0;
    if (n_modes < 1 || (n_batches = parse_batches(a.batches ? a.batches : "1,2,4,8,16,32,64,128", batches)) < 1)
        return 2; /* the usage error is printed */
    /* tools/outfiles.c: the CSV grows in place (checked now: never a special file);
     * the JSON summary is written beside its target and renamed at the end */
    const char *json_tmp = NULL;
    /* the model's files are inputs: no output may be one of them (tools/outfiles.c) */
    if ((rc = outfile_input_model(a.model))) return rc;
    if (a.csv && (rc = ft_out_csv_open("--csv", a.csv))) return rc; /* locked from here on */
    if (a.json && (rc = outfile_add("--json", a.json, &json_tmp))) return rc;
    ft_ctx *ctx = make_ctx(&a, a.device, &rc);
    if (!ctx) return rc;
    prov pv;
    prov_fill(&pv, ctx, &a);
    char date[32];
    prov_date(date, sizeof date);
    printf("device: %s\n", pv.device_label);
    prov_print(stdout, &pv, date);
    int n = n_modes * n_batches, failed = 0, n_done = 0;
    static int done[SWEEP_MAX][SWEEP_MAX];
    memset(done, 0, sizeof done);
    point *pts = (point *)calloc((size_t)n, sizeof *pts);
    int *have = (int *)calloc((size_t)n, sizeof *have);
    double *times = (double *)calloc((size_t)a.iters, sizeof(double));
    ft_profiler *prof = NULL;
    int csv = 0; /* the CSV is started */
    ft_model *m = NULL;
    if (!pts || !have || !times) rc = fail("out of host memory");
    if (!rc && a.op_cost_us >= 0 && ft_ctx_set_op_host_cost(ctx, a.op_cost_us) != FT_OK)
        rc = fail("%s", ft_ctx_errmsg(ctx));
    if (!rc && a.overhead) {
        ft_profiler_options po = ft_profiler_options_default();
        po.max_ops = (int64_t)a.iters * 4096 < (1 << 21) ? (int64_t)a.iters * 4096 : (1 << 21);
        if (ft_profiler_create(ctx, &po, &prof) != FT_OK) rc = fail("profiler: %s", ft_ctx_errmsg(ctx));
    }
    if (prof && ft_profiler_cupti_note(prof)[0]) printf("profiler: %s\n", ft_profiler_cupti_note(prof));
    /* the model must load at all (a wrong path or config is an error, not a row) */
    if (!rc) {
        a.mode = modes[0];
        cli_errors_quiet = 1;
        m = load(ctx, &a, &rc);
        cli_errors_quiet = 0;
        if (!m && ft_ctx_status(ctx) == FT_ERR_OOM) { /* too big for --mem-limit: the rows say so */
            rc = 0;
            ft_ctx_clear_error(ctx);
        } else if (!m) {
            char msg[sizeof cli_last_error];
            snprintf(msg, sizeof msg, "%s", cli_last_error);
            rc = fail("%s", msg);
        }
    }
    if (!rc && a.csv) csv = !(rc = csv_open(&a, &pv, modes, n_modes, batches, n_batches, done, pts, &n_done));
    if (!rc && n_done) {
        for (int i = 0; i < n; i++) have[i] = done[i / n_batches][i % n_batches];
        printf("resumed: %d of %d points already in %s\n", n_done, n, a.csv);
    }
    if (!rc)
        printf("%-7s %-7s %10s %10s %10s %9s %12s\n", "batch", "mode", "mean ms", "median ms", "min ms",
               "kernels", "overhead");
    progress pr;
    progress_begin(&pr, "sweep", n);
    pr.done = n_done;
    for (int mi = 0; !rc && mi < n_modes; mi++) {
        a.mode = modes[mi];
        if (m && mi > 0) {
            ft_model_free(m);
            m = NULL;
        }
        int load_failed = 0; /* this mode's model could not be loaded: every point says why */
        char load_status[8] = "", load_error[600] = "";
        for (int bi = 0; bi < n_batches; bi++) {
            if (done[mi][bi]) continue;
            point *p = &pts[mi * n_batches + bi];
            point_init(p, modes[mi], batches[bi]);
            cli_errors_quiet = 1;
            if (!m && !load_failed && !(m = load(ctx, &a, &rc))) {
                record_failure(ctx, p);
                load_failed = 1;
                snprintf(load_status, sizeof load_status, "%s", p->status);
                snprintf(load_error, sizeof load_error, "loading the model: %.560s", p->error);
            }
            if (load_failed) {
                snprintf(p->status, sizeof p->status, "%s", load_status);
                snprintf(p->error, sizeof p->error, "%s", load_error);
            } else {
                snprintf(p->arch, sizeof p->arch, "%s", ft_model_arch(m));
                if (measure(ctx, m, prof, &a, times, p)) {
                    record_failure(ctx, p);
                    /* the model may hold half-built state: the next point starts afresh */
                    ft_model_free(m);
                    m = NULL;
                }
            }
            cli_errors_quiet = 0;
            rc = 0;
            prov_date(p->date, sizeof p->date);
            failed += strcmp(p->status, "ok") != 0;
            have[mi * n_batches + bi] = 1;
            progress_clear(&pr);
            print_row(&a, p);
            if (csv && (rc = csv_row(&a, &pv, p))) break; /* a CSV that cannot take its rows ends the sweep */
            char label[64];
            snprintf(label, sizeof label, "%s, batch %lld", ft_mode_name(modes[mi]), batches[bi]);
            progress_step(&pr, 1, label);
        }
    }
    progress_end(&pr);
    ft_model_free(m);
    if (csv && ft_out_csv_close() && !rc) rc = 1;
    if (!rc && a.json) rc = write_json(&a, json_tmp, &pv, pts, have, n, failed);
    if (!rc) rc = outfiles_commit();
    if (!rc && failed)
        rc = fail("%d of %d points failed%s%s%s", failed, n, a.csv ? " (status and error columns of " : "",
                  a.csv ? a.csv : "", a.csv ? ")" : "");
    free(pts);
    free(have);
    free(times);
    ft_profiler_free(prof);
    ft_ctx_free(ctx);
    return rc;
}

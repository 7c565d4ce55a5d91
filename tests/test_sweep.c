/*
 * test_sweep.c - the study's data contract of build/ftengine (docs/benchmarking.md,
 * docs/report.md): the sweep CSV's columns and provenance, a failed point kept as a
 * row with its status while the sweep goes on (exit 1), --resume keeping measured
 * points, the JSON summaries of bench and sweep, `version`'s commit, bench's
 * provenance header and --ops-csv, `info --presets` counting without weights, and
 * the OpenMP wait policy the header names.
 */
#include "ft_test.h"
#include "ft_tool.h"
#include "ftengine.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tool[512], model[512];

typedef struct result {
    int code;
    char out[16384], err[8192];
} result;

/* Runs the tool with a NULL-terminated argument list; captures stdout/stderr. */
static result run_tool(const char *const *args) {
    static result r;
    memset(&r, 0, sizeof r);
    r.code = ft_tool_exec(tool, tmpdir, args, r.out, sizeof r.out, r.err, sizeof r.err, NULL);
    return r;
}

static int read_file(const char *path, char *buf, size_t size) {
    if (access(path, R_OK) != 0) return -1;
    ft_tool_slurp(path, buf, size);
    return 0;
}

/* Splits one CSV line (quoted fields allowed) in place; returns the field count. */
static int split(char *line, char **f, int max) {
    int n = 0;
    char *r = line;
    line[strcspn(line, "\n")] = 0;
    while (n < max) {
        char *w = r, *start = r;
        if (*r == '"') {
            start = w = ++r;
            while (*r && !(*r == '"' && r[1] != '"')) {
                if (*r == '"') r++;
                *w++ = *r++;
            }
            if (*r) r++;
        } else {
            while (*r && *r != ',') r++;
            w = r;
        }
        char end = *r;
        *w = 0;
        f[n++] = start;
        if (end != ',') break;
        r++;
    }
    return n;
}

static const char *const cols[] = {
    "model", "arch", "device", "dtype", "mode", "batch", "length", "protocol", "iters", "mean_ms",
    "median_ms", "min_ms", "first_ms", "kernels_per_forward", "overhead_ms", "overhead_share", "status",
    "error", "p90_ms", "max_ms", "profiled_ms", "busy_ms", "warmup", "op_cost_us", "params", "macs",
    "threads", "ftengine_version", "commit", "date", "host", "device_label", "cuda_version", NULL};

static int col(const char *name) {
    for (int i = 0; cols[i]; i++)
        if (!strcmp(cols[i], name)) return i;
    return -1;
}

typedef struct csv {
    int rows;
    char lines[16][2048];
    char *f[16][40];
    int nf[16];
} csv;

static void load_csv(const char *path, csv *c) {
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (c->rows < 16 && fgets(c->lines[c->rows], sizeof c->lines[0], f)) {
        c->nf[c->rows] = split(c->lines[c->rows], c->f[c->rows], 40);
        c->rows++;
    }
    fclose(f);
}

static const char *cell(const csv *c, int row, const char *name) {
    int k = col(name);
    return k >= 0 && k < c->nf[row] ? c->f[row][k] : "<missing>";
}

/* The header is exactly the documented one; every row carries provenance, an ISO
 * UTC date, the threads asked for, and empty fields (never -1) for what was not
 * measured; the JSON summary names the schema and every point. */
static void test_csv_schema(void) {
    char path[400], json[400];
    snprintf(path, sizeof path, "%s/schema.csv", tmpdir);
    snprintf(json, sizeof json, "%s/schema.json", tmpdir);
    const char *a[] = {"sweep", model, "--modes", "eager,graph", "--batches", "1,2", "--iters", "3", "--warmup",
                       "0", "--threads", "1", "--protocol", "paper", "--csv", path, "--json", json, NULL};
    result r = run_tool(a);
    CHECK(r.code == 0, "sweep exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "threads: 1 (--threads)") && strstr(r.out, "provenance: ftengine "), "header: %s", r.out);
    CHECK(strstr(r.err, "sweep: point 4 of 4"), "no progress line: %s", r.err);
    csv c;
    load_csv(path, &c);
    CHECK(c.rows == 5, "CSV has %d lines, want 5", c.rows);
    int n = 0;
    while (cols[n]) n++;
    CHECK(c.nf[0] == n, "header has %d columns, want %d", c.nf[0], n);
    for (int i = 0; i < n && i < c.nf[0]; i++) CHECK(!strcmp(c.f[0][i], cols[i]), "column %d is %s, want %s", i, c.f[0][i], cols[i]);
    for (int row = 1; row < c.rows; row++) {
        CHECK(c.nf[row] == n, "row %d has %d fields", row, c.nf[row]);
        CHECK(!strcmp(cell(&c, row, "status"), "ok") && !*cell(&c, row, "error"), "row %d status", row);
        CHECK(!strcmp(cell(&c, row, "threads"), "1"), "row %d threads '%s'", row, cell(&c, row, "threads"));
        const char *commit = cell(&c, row, "commit"), *date = cell(&c, row, "date");
        CHECK(*commit && strlen(date) == 20 && date[4] == '-' && date[10] == 'T' && date[19] == 'Z',
              "row %d commit '%s' date '%s'", row, commit, date);
        CHECK(*cell(&c, row, "host") && *cell(&c, row, "device_label") && *cell(&c, row, "ftengine_version"),
              "row %d provenance empty", row);
        /* the paper protocol has no median: empty, not -1 */
        CHECK(!*cell(&c, row, "median_ms") && !*cell(&c, row, "overhead_share"), "row %d: unmeasured not empty", row);
        CHECK(atoll(cell(&c, row, "params")) > 0 && atoll(cell(&c, row, "macs")) > 0, "row %d params/macs", row);
        for (int k = 0; k < c.nf[row]; k++) CHECK(strcmp(c.f[row][k], "-1"), "row %d column %s is -1", row, cols[k]);
    }
    char *buf = (char *)malloc(1 << 16);
    CHECK(buf && read_file(json, buf, 1 << 16) == 0, "no JSON summary");
    if (buf) {
        CHECK(strstr(buf, "\"schema\": \"ftengine-sweep/1\"") && strstr(buf, "\"commit\": ") &&
              strstr(buf, "\"failed\": 0"), "sweep JSON: %.300s", buf);
        int points = 0;
        for (const char *p = buf; (p = strstr(p, "\"mode\": ")); p++) points++;
        CHECK(points == 4, "JSON has %d points, want 4", points);
    }
    free(buf);
}

/* --mem-limit too small for the largest batch: that point is a row with status oom
 * and the allocator's message, every other point (the next mode's too) is kept, and
 * the sweep exits 1 with one summary line. */
static void test_failed_point(void) {
    char path[400];
    snprintf(path, sizeof path, "%s/oom.csv", tmpdir);
    const char *a[] = {"sweep", model, "--modes", "eager,graph", "--batches", "1,2,100000", "--iters", "2",
                       "--warmup", "0", "--mem-limit", "64M", "--csv", path, NULL};
    result r = run_tool(a);
    CHECK(r.code == 1, "sweep with an impossible point exit %d, want 1: %s", r.code, r.err);
    CHECK(strstr(r.err, "ftengine: error: 2 of 6 points failed"), "summary line: %s", r.err);
    csv c;
    load_csv(path, &c);
    CHECK(c.rows == 7, "CSV has %d lines, want 1 + 6", c.rows);
    int ok = 0, oom = 0;
    for (int row = 1; row < c.rows; row++) {
        const char *st = cell(&c, row, "status");
        if (!strcmp(st, "ok")) {
            ok++;
            CHECK(atof(cell(&c, row, "mean_ms")) > 0, "ok row without latency");
        } else {
            oom += !strcmp(st, "oom");
            CHECK(!strcmp(cell(&c, row, "batch"), "100000"), "failed row at batch %s", cell(&c, row, "batch"));
            CHECK(strstr(cell(&c, row, "error"), "memory") != NULL, "error column: '%s'", cell(&c, row, "error"));
            CHECK(!*cell(&c, row, "mean_ms"), "a failed row has a latency");
        }
    }
    CHECK(ok == 4 && oom == 2, "%d ok and %d oom rows, want 4 and 2", ok, oom);
}

/* --resume keeps the points this commit measured with the same settings (their rows
 * unchanged) and measures only the others; a CSV of another layout is refused and left alone. */
static void test_resume(void) {
    char path[400];
    snprintf(path, sizeof path, "%s/resume.csv", tmpdir);
    const char *a[] = {"sweep", model, "--modes", "eager", "--batches", "1,2", "--iters", "2", "--warmup", "0",
                       "--csv", path, NULL};
    result r = run_tool(a);
    CHECK(r.code == 0, "first sweep exit %d: %s", r.code, r.err);
    csv before, after;
    load_csv(path, &before);
    const char *b[] = {"sweep", model, "--modes", "eager", "--batches", "1,2,3", "--iters", "2", "--warmup", "0",
                       "--csv", path, "--resume", NULL};
    r = run_tool(b);
    CHECK(r.code == 0, "resumed sweep exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "resumed: 2 of 3 points"), "resume message: %s", r.out);
    load_csv(path, &after);
    CHECK(after.rows == 4, "resumed CSV has %d lines, want 4", after.rows);
    for (int row = 1; row < 3 && row < before.rows; row++)
        CHECK(!strcmp(cell(&before, row, "date"), cell(&after, row, "date")) &&
              !strcmp(cell(&before, row, "mean_ms"), cell(&after, row, "mean_ms")), "row %d was re-measured", row);
    CHECK(!strcmp(cell(&after, 3, "batch"), "3"), "new row: batch %s", cell(&after, 3, "batch"));
    /* other settings (iterations) are not the same measurement: nothing is kept */
    const char *c[] = {"sweep", model, "--modes", "eager", "--batches", "1", "--iters", "3", "--warmup", "0",
                       "--csv", path, "--resume", NULL};
    r = run_tool(c);
    CHECK(r.code == 0 && !strstr(r.out, "resumed:"), "resume with other iters kept rows: %s", r.out);
    load_csv(path, &after);
    CHECK(after.rows == 2, "CSV has %d lines after a resume with other settings, want 2", after.rows);
    /* not a sweep CSV */
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("name,value\nx,1\n", f);
        fclose(f);
    }
    r = run_tool(b);
    CHECK(r.code == 1 && strstr(r.err, "is not a sweep CSV"), "foreign CSV: %d %s", r.code, r.err);
    char buf[256] = "";
    read_file(path, buf, sizeof buf);
    CHECK(!strcmp(buf, "name,value\nx,1\n"), "a foreign CSV was rewritten: %s", buf);
}

/* bench: the provenance header, --json with the statistics, --ops-csv and the old
 * --csv spelling (with a note); `version` names the commit. */
static void test_bench_outputs(void) {
    char json[400], ops[400], ops2[400];
    snprintf(json, sizeof json, "%s/bench.json", tmpdir);
    snprintf(ops, sizeof ops, "%s/ops.csv", tmpdir);
    snprintf(ops2, sizeof ops2, "%s/ops2.csv", tmpdir);
    const char *a[] = {"bench", model, "--iters", "3", "--warmup", "0", "--threads", "1", "--json", json,
                       "--ops-csv", ops, NULL};
    result r = run_tool(a);
    CHECK(r.code == 0, "bench exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "provenance: ftengine ") && strstr(r.out, "host: ") && strstr(r.out, "threads: 1 (--threads)") &&
          strstr(r.out, "build: CUDA "), "bench header: %s", r.out);
    char *buf = (char *)malloc(1 << 16);
    CHECK(buf && read_file(json, buf, 1 << 16) == 0, "no bench JSON");
    if (buf) {
        const char *keys[] = {"\"schema\": \"ftengine-bench/1\"", "\"commit\": ", "\"median\": ", "\"p90\": ",
                              "\"stdev\": ", "\"kernels_per_forward\"", "\"overhead\": {", "\"busy_ms\": ",
                              "\"threads\": \"1\"", "\"protocol\": \"sync\""};
        for (int i = 0; i < 10; i++) CHECK(strstr(buf, keys[i]) != NULL, "bench JSON lacks %s", keys[i]);
    }
    free(buf);
    struct stat st;
    CHECK(stat(ops, &st) == 0 && st.st_size > 0, "--ops-csv wrote nothing");
    const char *b[] = {"bench", model, "--iters", "2", "--warmup", "0", "--csv", ops2, NULL};
    r = run_tool(b);
    CHECK(r.code == 0 && strstr(r.err, "--ops-csv") && stat(ops2, &st) == 0, "bench --csv alias: %d %s", r.code, r.err);
    const char *misplaced[][6] = {{"bench", model, "--resume", NULL}, {"sweep", model, "--resume", NULL},
                                  {"sweep", model, "--ops-csv", ops, NULL}};
    for (int i = 0; i < 3; i++) CHECK(run_tool(misplaced[i]).code == 2, "misplaced option %d is not a usage error", i);
    const char *v[] = {"version", NULL};
    r = run_tool(v);
    CHECK(r.code == 0 && strstr(r.out, "\ncommit: "), "version: %s", r.out);
}

/* info --presets: the study's presets with parameters and MACs, counted on a
 * shapes-only load that allocates no weight; such a model refuses to run. */
static void test_presets(void) {
    const char *a[] = {"info", "--presets", NULL};
    result r = run_tool(a);
    CHECK(r.code == 0, "info --presets exit %d: %s", r.code, r.err);
    const char *want[] = {"\nbert-base-w2 ", "\nbert-base-L2 ", "\nbert-base-L4 ", "\nbert-base-L8 ", "\nbert-base-L24 "};
    for (int i = 0; i < 5; i++) CHECK(strstr(r.out, want[i]) != NULL, "presets lack %s", want[i] + 1);
    /* bert-base: 109.5M parameters (HF's count), as a loaded model counts them */
    const char *l = strstr(r.out, "\nbert-base ");
    CHECK(l && strstr(l, "109.5M") && strstr(l, "109.5M") < strchr(l + 1, '\n'), "bert-base line: %.100s", l ? l : "");
    ft_ctx *ctx = NULL;
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    ft_model_options o = ft_model_options_default();
    o.weights = FT_WEIGHTS_NONE;
    ft_model *m = NULL;
    CHECK_OK(ctx, ft_model_load(ctx, "bert-base-L2", &o, &m));
    ft_mem_stats ms = ft_ctx_mem_stats(ctx);
    CHECK(ms.peak_allocated < (1u << 20), "a shapes-only load allocated %zu B", ms.peak_allocated);
    CHECK(m && ft_model_param_count(m) == 38603520, "bert-base-L2 parameters %lld", m ? (long long)ft_model_param_count(m) : -1LL);
    int64_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ft_host_tensor in[] = {{"input_ids", FT_DTYPE_I64, 2, {1, 8}, ids}};
    CHECK(m && ft_model_forward(m, in, 1) != FT_OK && strstr(ft_ctx_errmsg(ctx), "FT_WEIGHTS_NONE"),
          "a shapes-only model ran: %s", ft_ctx_errmsg(ctx));
    ft_model_free(m);
    ft_ctx_free(ctx);
}

/* The header names the OpenMP wait policy: the tool's short spin when the user set
 * none (it re-executes itself with GOMP_SPINCOUNT, and the marker it uses for that
 * does not leak), else the user's variables, untouched. */
static void test_wait_policy(void) {
    char *pol = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    char keep_pol[64] = "", keep_spin[64] = "";
    if (pol) snprintf(keep_pol, sizeof keep_pol, "%s", pol);
    if (spin) snprintf(keep_spin, sizeof keep_spin, "%s", spin);
    const char *a[] = {"bench", model, "--iters", "1", "--warmup", "0", "--threads", "1", NULL};
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
    result r = run_tool(a);
    CHECK(r.code == 0 && strstr(r.out, "OpenMP wait: GOMP_SPINCOUNT=1000 (the tool's default)"),
          "no policy set: exit %d, header: %.600s", r.code, r.out);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    r = run_tool(a);
    CHECK(r.code == 0 && strstr(r.out, "OpenMP wait: OMP_WAIT_POLICY=passive (environment)"),
          "user's policy: exit %d, header: %.600s", r.code, r.out);
    unsetenv("OMP_WAIT_POLICY");
    setenv("GOMP_SPINCOUNT", "7", 1);
    r = run_tool(a);
    CHECK(r.code == 0 && strstr(r.out, "OpenMP wait: GOMP_SPINCOUNT=7 (environment)"),
          "user's spin count: exit %d, header: %.600s", r.code, r.out);
    unsetenv("GOMP_SPINCOUNT");
    if (keep_pol[0]) setenv("OMP_WAIT_POLICY", keep_pol, 1);
    if (keep_spin[0]) setenv("GOMP_SPINCOUNT", keep_spin, 1);
}

int main(void) {
    const char *b = getenv("FT_BUILD");
    snprintf(tool, sizeof tool, "%s/ftengine", b && *b ? b : "build");
    snprintf(model, sizeof model, "%s/bert", ft_test_golden_dir());
    ft_test_tmpdir_make("sweep");
    if (!tmpdir[0] || access(tool, X_OK) != 0) {
        printf("cannot set up (tool %s)\n", tool);
        return 1;
    }
    RUN(test_csv_schema);
    RUN(test_failed_point);
    RUN(test_resume);
    RUN(test_bench_outputs);
    RUN(test_presets);
    RUN(test_wait_policy);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

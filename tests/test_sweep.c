/*
 * test_sweep.c - the study's data contract of build/ftengine (docs/benchmarking.md,
 * docs/report.md): the sweep CSV's columns and provenance, one row per point and
 * round with every round a shuffled visit of every point (the same --seed, the same
 * order), a failed point kept as a row with its status while the sweep goes on (exit
 * 1), --resume keeping measured rows and saying which it dropped and why, several
 * models and emulated costs in one sweep, the JSON summaries of bench (every timed
 * forward) and sweep (every round), the graph-mode interpreter cost
 * (--step-cost-us, FT_STEP_HOST_COST_US) and bench --phases' kernel/host split,
 * `version`'s commit, bench's provenance header and --ops-csv, `info` from a
 * config.json alone and `info --presets` counting without weights, the thread-count
 * source and the OpenMP wait policy the header names, the CPU half-precision warning.
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
    "threads", "ftengine_version", "commit", "date", "host", "device_label", "cuda_version", "round",
    "rounds", "seed", "order", "step_cost_us", "dispatch_ms", NULL};

static int col(const char *name) {
    for (int i = 0; cols[i]; i++)
        if (!strcmp(cols[i], name)) return i;
    return -1;
}

#define CSV_ROWS 40
typedef struct csv {
    int rows;
    char lines[CSV_ROWS][2048];
    char *f[CSV_ROWS][48];
    int nf[CSV_ROWS];
} csv;

static void load_csv(const char *path, csv *c) {
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (c->rows < CSV_ROWS && fgets(c->lines[c->rows], sizeof c->lines[0], f)) {
        c->nf[c->rows] = split(c->lines[c->rows], c->f[c->rows], 48);
        c->rows++;
    }
    fclose(f);
}

static const char *cell(const csv *c, int row, const char *name) {
    int k = col(name);
    return k >= 0 && k < c->nf[row] ? c->f[row][k] : "<missing>";
}

/* The header is exactly the documented one; one row per point and round, each round
 * visiting every point once (its `order` a permutation), every row carrying
 * provenance, an ISO UTC date, the threads asked for, the seed, and empty fields
 * (never -1) for what was not measured; the JSON summary names the schema, every
 * point with its rounds and its interval. */
static void test_csv_schema(void) {
    char path[400], json[400];
    snprintf(path, sizeof path, "%s/schema.csv", tmpdir);
    snprintf(json, sizeof json, "%s/schema.json", tmpdir);
    const char *a[] = {"sweep", model, "--modes", "eager,graph", "--batches", "1,2", "--iters", "3", "--warmup",
                       "0", "--threads", "1", "--protocol", "paper", "--rounds", "2", "--seed", "7", "--csv", path,
                       "--json", json, NULL};
    result r = run_tool(a);
    CHECK(r.code == 0, "sweep exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "threads: 1 (--threads)") && strstr(r.out, "provenance: ftengine "), "header: %s", r.out);
    CHECK(strstr(r.err, "sweep: point 8 of 8"), "no progress line: %s", r.err);
    CHECK(strstr(r.out, "summary: latency = median over rounds") && strstr(r.out, "graph b2"), "summary: %s", r.out);
    csv c;
    load_csv(path, &c);
    CHECK(c.rows == 9, "CSV has %d lines, want 1 + 4 points x 2 rounds", c.rows);
    int n = 0;
    while (cols[n]) n++;
    CHECK(c.nf[0] == n, "header has %d columns, want %d", c.nf[0], n);
    for (int i = 0; i < n && i < c.nf[0]; i++) CHECK(!strcmp(c.f[0][i], cols[i]), "column %d is %s, want %s", i, c.f[0][i], cols[i]);
    int seen[2][4] = {{0}};
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
        CHECK(!strcmp(cell(&c, row, "seed"), "7") && !strcmp(cell(&c, row, "rounds"), "2"), "row %d seed/rounds", row);
        int rd = atoi(cell(&c, row, "round")), ord = atoi(cell(&c, row, "order"));
        CHECK(rd >= 0 && rd < 2 && ord >= 0 && ord < 4, "row %d round %d order %d", row, rd, ord);
        if (rd >= 0 && rd < 2 && ord >= 0 && ord < 4) seen[rd][ord]++;
    }
    for (int rd = 0; rd < 2; rd++)
        for (int k = 0; k < 4; k++) CHECK(seen[rd][k] == 1, "round %d: position %d taken %d times", rd, k, seen[rd][k]);
    char *buf = (char *)malloc(1 << 16);
    CHECK(buf && read_file(json, buf, 1 << 16) == 0, "no JSON summary");
    if (buf) {
        CHECK(strstr(buf, "\"schema\": \"ftengine-sweep/2\"") && strstr(buf, "\"commit\": ") &&
              strstr(buf, "\"failed\": 0") && strstr(buf, "\"rounds\": 2") && strstr(buf, "\"seed\": 7"),
              "sweep JSON: %.300s", buf);
        int points = 0, rounds = 0;
        for (const char *p = buf; (p = strstr(p, "\"latency_ms\": ")); p++) points++;
        for (const char *p = buf; (p = strstr(p, "{\"round\": ")); p++) rounds++;
        CHECK(points == 4 && rounds == 8, "JSON has %d points and %d rounds, want 4 and 8", points, rounds);
        CHECK(strstr(buf, "\"ci_lo_ms\": ") && strstr(buf, "\"ci_level\": 0.5"), "JSON interval: %.600s", buf);
    }
    free(buf);
}

/* Rounds: the order is a function of --seed and the round (the same seed, the same
 * order), each round its own; several models (MODEL@LENGTH) and emulated-cost
 * settings are axes of the same rounds. */
static void orders(const char *path, char *buf, size_t n) {
    csv c;
    load_csv(path, &c);
    buf[0] = 0;
    for (int row = 1; row < c.rows; row++) {
        size_t k = strlen(buf);
        snprintf(buf + k, n - k, "%s/%s/%s/%s ", cell(&c, row, "round"), cell(&c, row, "mode"), cell(&c, row, "batch"),
                 cell(&c, row, "order"));
    }
}

static void test_rounds(void) {
    char p1[400], p2[400], p3[400], o1[2048], o2[2048], o3[2048];
    snprintf(p1, sizeof p1, "%s/r1.csv", tmpdir);
    snprintf(p2, sizeof p2, "%s/r2.csv", tmpdir);
    snprintf(p3, sizeof p3, "%s/r3.csv", tmpdir);
    const char *paths[] = {p1, p2, p3}, *seeds[] = {"5", "5", "6"};
    for (int i = 0; i < 3; i++) {
        const char *a[] = {"sweep", model, "--modes", "eager,graph,static", "--batches", "1,2", "--iters", "1",
                           "--warmup", "0", "--rounds", "2", "--seed", seeds[i], "--csv", paths[i], NULL};
        result r = run_tool(a);
        CHECK(r.code == 0, "sweep %d exit %d: %s", i, r.code, r.err);
    }
    orders(p1, o1, sizeof o1);
    orders(p2, o2, sizeof o2);
    orders(p3, o3, sizeof o3);
    CHECK(o1[0] && !strcmp(o1, o2), "the same seed gave other orders:\n%s\n%s", o1, o2);
    CHECK(strcmp(o1, o3), "seeds 5 and 6 gave the same orders: %s", o1);
    /* round 0 and round 1 of one sweep are not visited in the same order */
    csv c;
    load_csv(p1, &c);
    char r0[6][32] = {{0}}, r1[6][32] = {{0}};
    for (int row = 1; row < c.rows; row++) {
        int ord = atoi(cell(&c, row, "order"));
        if (ord < 0 || ord > 5) continue;
        snprintf(atoi(cell(&c, row, "round")) ? r1[ord] : r0[ord], 32, "%s%s", cell(&c, row, "mode"), cell(&c, row, "batch"));
    }
    int same = 1;
    for (int k = 0; k < 6; k++) same &= !strcmp(r0[k], r1[k]);
    CHECK(!same, "rounds 0 and 1 visited the points in the same order");
    /* two models by length and two cost settings: 2 x 2 x 2 modes x 1 batch points */
    char m8[1100];
    snprintf(m8, sizeof m8, "%s@8,%s@16", model, model);
    const char *b[] = {"sweep", "--models", m8, "--modes", "eager,graph", "--batches", "1", "--iters", "1",
                       "--warmup", "0", "--rounds", "1", "--op-cost-us", "0,50", "--step-cost-us", "0,50",
                       "--csv", p1, NULL};
    result r = run_tool(b);
    CHECK(r.code == 0, "multi-model sweep exit %d: %s", r.code, r.err);
    load_csv(p1, &c);
    CHECK(c.rows == 9, "multi-model CSV has %d lines, want 1 + 8", c.rows);
    int len8 = 0, cost50 = 0;
    for (int row = 1; row < c.rows; row++) {
        len8 += !strcmp(cell(&c, row, "length"), "8");
        cost50 += !strcmp(cell(&c, row, "op_cost_us"), "50") && !strcmp(cell(&c, row, "step_cost_us"), "50");
    }
    CHECK(len8 == 4 && cost50 == 4, "%d rows at length 8 and %d at cost 50, want 4 and 4", len8, cost50);
    const char *bad[][12] = {{"sweep", model, "--models", m8, NULL},
                             {"sweep", "--models", "x@0", NULL},
                             {"sweep", model, "--rounds", "0", NULL},
                             {"sweep", model, "--seed", "-1", NULL},
                             {"sweep", model, "--op-cost-us", "1,2,3", "--step-cost-us", "1,2", NULL},
                             {"sweep", model, "--batches", "1,1", NULL},
                             {"bench", model, "--op-cost-us", "1,2", NULL},
                             {"bench", model, "--step-cost-us", "-1", NULL}};
    for (int i = 0; i < 8; i++) CHECK(run_tool(bad[i]).code == 2, "bad rounds/models/costs %d is not a usage error", i);
}

/* --mem-limit too small for the largest batch: that point is a row with status oom
 * and the allocator's message, every other point (the next mode's too) is kept, and
 * the sweep exits 1 with one summary line. */
static void test_failed_point(void) {
    char path[400];
    snprintf(path, sizeof path, "%s/oom.csv", tmpdir);
    const char *a[] = {"sweep", model, "--modes", "eager,graph", "--batches", "1,2,100000", "--iters", "2",
                       "--warmup", "0", "--mem-limit", "64M", "--rounds", "2", "--csv", path, NULL};
    result r = run_tool(a);
    CHECK(r.code == 1, "sweep with an impossible point exit %d, want 1: %s", r.code, r.err);
    CHECK(strstr(r.err, "ftengine: error: 2 of 6 points failed"), "summary line: %s", r.err);
    csv c;
    load_csv(path, &c);
    /* a failed point is one row (it is not visited in the next round) */
    CHECK(c.rows == 11, "CSV has %d lines, want 1 + 4 x 2 + 2", c.rows);
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
    CHECK(ok == 8 && oom == 2, "%d ok and %d oom rows, want 8 and 2", ok, oom);
}

/* --resume keeps the rows this commit measured with the same settings (unchanged),
 * reprints them, says why it dropped the others, and measures only the missing
 * (point, round) pairs; a CSV of another layout is refused and left alone. */
static void test_resume(void) {
    char path[400];
    snprintf(path, sizeof path, "%s/resume.csv", tmpdir);
    const char *a[] = {"sweep", model, "--modes", "eager", "--batches", "1,2", "--iters", "2", "--warmup", "0",
                       "--rounds", "2", "--csv", path, NULL};
    result r = run_tool(a);
    CHECK(r.code == 0, "first sweep exit %d: %s", r.code, r.err);
    csv before, after;
    load_csv(path, &before);
    /* one more batch, one more round, one batch less */
    const char *b[] = {"sweep", model, "--modes", "eager", "--batches", "2,3", "--iters", "2", "--warmup", "0",
                       "--rounds", "3", "--csv", path, "--resume", NULL};
    r = run_tool(b);
    CHECK(r.code == 0, "resumed sweep exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "kept 2 rows") && strstr(r.out, "dropped 2: batch 1 is not in --batches") &&
          strstr(r.out, "resume: the kept rows:") && strstr(r.out, "resumed: 2 of 6 rows"),
          "resume messages: %s", r.out);
    load_csv(path, &after);
    CHECK(after.rows == 7, "resumed CSV has %d lines, want 1 + 2 kept + 4 new", after.rows);
    int kept = 0;
    for (int row = 1; row < before.rows; row++)
        for (int k = 1; k < 3 && k < after.rows; k++)
            kept += !strcmp(cell(&before, row, "date"), cell(&after, k, "date")) &&
                    !strcmp(cell(&before, row, "mean_ms"), cell(&after, k, "mean_ms")) &&
                    !strcmp(cell(&after, k, "batch"), "2");
    CHECK(kept == 2, "the batch-2 rows were re-measured (%d kept)", kept);
    int b3 = 0, r2 = 0;
    for (int row = 3; row < after.rows; row++) {
        b3 += !strcmp(cell(&after, row, "batch"), "3");
        r2 += !strcmp(cell(&after, row, "round"), "2");
    }
    CHECK(b3 == 3 && r2 == 2, "new rows: %d at batch 3 (want 3), %d in round 2 (want 2)", b3, r2);
    /* other settings (iterations) are not the same measurement: nothing is kept, and it says so */
    const char *c[] = {"sweep", model, "--modes", "eager", "--batches", "1", "--iters", "3", "--warmup", "0",
                       "--rounds", "1", "--csv", path, "--resume", NULL};
    r = run_tool(c);
    CHECK(r.code == 0 && strstr(r.out, "kept 0 rows") && strstr(r.out, "dropped 6: measured with --iters 2 (this sweep: 3)"),
          "resume with other iters: %s", r.out);
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
                              "\"threads\": \"1\"", "\"protocol\": \"sync\"", "\"times\": ["};
        for (int i = 0; i < 11; i++) CHECK(strstr(buf, keys[i]) != NULL, "bench JSON lacks %s", keys[i]);
        /* every timed forward, raw: --iters 3 numbers */
        const char *t = strstr(buf, "\"times\": [");
        int commas = 0;
        for (const char *q = t ? t : ""; *q && *q != ']'; q++) commas += *q == ',';
        CHECK(t && commas == 2, "bench JSON times: %.200s", t ? t : "(none)");
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

/* The graph-mode interpreter cost: --step-cost-us N spends N us in a SELECT phase
 * before each plan step (so a profile charges it to the host, not to the kernels);
 * static mode does not pay it; FT_STEP_HOST_COST_US sets it, range-checked. bench
 * --phases prints the kernel vs dispatch/host split of the report. */
static double select_us(const char *out) {
    const char *p = strstr(out, "host time per iteration (us): ");
    const char *s = p ? strstr(p, " select ") : NULL;
    return s ? atof(s + 8) : -1;
}

static void test_step_cost(void) {
    const char *g0[] = {"bench", model, "--mode", "graph", "--iters", "2", "--warmup", "0", "--threads", "1",
                        "--phases", NULL};
    const char *g1[] = {"bench", model, "--mode", "graph", "--iters", "2", "--warmup", "0", "--threads", "1",
                        "--phases", "--step-cost-us", "300", NULL};
    const char *s1[] = {"bench", model, "--mode", "static", "--iters", "2", "--warmup", "0", "--threads", "1",
                        "--phases", "--step-cost-us", "300", NULL};
    result r = run_tool(g0);
    CHECK(r.code == 0 && select_us(r.out) >= 0 && select_us(r.out) < 100, "graph without a cost: select %.1f us: %s",
          select_us(r.out), r.out);
    CHECK(strstr(r.out, "split: mean forward ") && strstr(r.out, " = kernel time ") &&
          strstr(r.out, "+ dispatch/host time "), "bench --phases split: %s", r.out);
    r = run_tool(g1);
    const char *k = strstr(r.out, "kernels per forward ");
    int steps = k ? atoi(k + 20) : 0;
    CHECK(r.code == 0 && steps > 0 && select_us(r.out) >= 300.0 * steps,
          "graph at 300 us per step: select %.1f us for %d steps: %s", select_us(r.out), steps, r.out);
    CHECK(strstr(r.out, "emulated interpreter cost: 300.0 us per graph-mode step"), "no cost line: %s", r.out);
    r = run_tool(s1);
    CHECK(r.code == 0 && select_us(r.out) >= 0 && select_us(r.out) < 300, "static paid the step cost: %.1f us",
          select_us(r.out));
    setenv("FT_STEP_HOST_COST_US", "300", 1);
    r = run_tool(g0);
    CHECK(r.code == 0 && select_us(r.out) >= 300.0 * steps, "FT_STEP_HOST_COST_US=300: select %.1f us", select_us(r.out));
    setenv("FT_STEP_HOST_COST_US", "lots", 1);
    r = run_tool(g0);
    CHECK(r.code == 1 && strstr(r.err, "FT_STEP_HOST_COST_US='lots'") && strstr(r.err, "[0, 1e6]"),
          "a bad FT_STEP_HOST_COST_US: exit %d %s", r.code, r.err);
    unsetenv("FT_STEP_HOST_COST_US");
}

/* info from a directory holding only config.json (the docs promise it); the thread
 * count's source; half precision on the CPU warns that it is slower. */
static void test_info_threads_half(void) {
    char dir[400], cmd[2400];
    snprintf(dir, sizeof dir, "%s/config_only", tmpdir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/config.json' '%s/'", dir, model, dir);
    CHECK(system(cmd) == 0, "setup failed");
    const char *a[] = {"info", dir, NULL};
    result r = run_tool(a);
    CHECK(r.code == 0 && strstr(r.out, "parameters: 145344") && strstr(r.out, "config.json alone"),
          "info on config.json alone: exit %d %s %s", r.code, r.out, r.err);
    const char *b[] = {"bench", model, "--iters", "1", "--warmup", "0", NULL};
    char *keep = getenv("OMP_NUM_THREADS");
    char saved[32] = "";
    if (keep) snprintf(saved, sizeof saved, "%s", keep);
    setenv("OMP_NUM_THREADS", "1", 1);
    r = run_tool(b);
    CHECK(r.code == 0 && strstr(r.out, "threads: 1 (OMP_NUM_THREADS)"), "OMP_NUM_THREADS source: %s", r.out);
    unsetenv("OMP_NUM_THREADS");
    r = run_tool(b);
    CHECK(r.code == 0 && strstr(r.out, "(OpenMP default)"), "default source: %s", r.out);
    if (saved[0]) setenv("OMP_NUM_THREADS", saved, 1);
    const char *h[] = {"bench", model, "--iters", "1", "--warmup", "0", "--dtype", "bf16", NULL};
    r = run_tool(h);
    CHECK(r.code == 0 && strstr(r.err, "warning: bf16 on the CPU is slower than fp32"), "no half warning: %s", r.err);
    const char *f32[] = {"bench", model, "--iters", "1", "--warmup", "0", NULL};
    r = run_tool(f32);
    CHECK(r.code == 0 && !strstr(r.err, "slower than fp32"), "fp32 warned: %s", r.err);
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
    RUN(test_rounds);
    RUN(test_failed_point);
    RUN(test_resume);
    RUN(test_bench_outputs);
    RUN(test_presets);
    RUN(test_wait_policy);
    RUN(test_step_cost);
    RUN(test_info_threads_half);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

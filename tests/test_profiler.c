/*
 * test_profiler.c - the instrumentation layer (engine/profiler.c) on the CPU:
 * every dispatched op of the golden tiny BERT gets a record with its five
 * phases, phases nest inside their op, record counts agree with the
 * dispatcher's counters, graph mode records fewer ops than eager and static
 * mode one, the overhead metrics add up, the Chrome trace parses with the
 * engine's own JSON parser and holds the expected event kinds, the emulated
 * framework cost shows up in the SELECT phase, hooks chain with what was
 * installed before, storage is bounded, misuse is an error, and the CLI
 * options work. The CUPTI part (eager and graph mode linked, a store too small,
 * the fallback when another client holds CUPTI) runs on a GPU, or in the emulator
 * build against its fake CUPTI (tests/emu/fake_cupti.c); the plain CPU build skips it.
 */
#include "ft_golden.h"
#include "ft_test.h"

#include "../engine/json.h"
#include "../engine/profiler.h"
#include "ftengine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


/* A context with the golden BERT loaded in `mode` and warmed up once (the
 * plan is built, the allocator's cache is filled). */
typedef struct fixture {
    ft_ctx *ctx;
    ft_model *m;
    golden_case g;
} fixture;

static int fixture_open(fixture *f, ft_mode mode, double host_cost_us) {
    memset(f, 0, sizeof *f);
    if (ft_ctx_create(FT_DEVICE_CPU, &f->ctx) != FT_OK) {
        CHECK(0, "cannot create a CPU context");
        return -1;
    }
    if (host_cost_us > 0) CHECK_OK(f->ctx, ft_ctx_set_op_host_cost(f->ctx, host_cost_us));
    ft_model_options opt = ft_model_options_default();
    opt.mode = mode;
    if (golden_open(f->ctx, "bert", &f->g) != 0 || ft_model_load(f->ctx, f->g.dir, &opt, &f->m) != FT_OK ||
        ft_model_forward(f->m, f->g.in, f->g.n_in) != FT_OK) {
        CHECK(0, "golden bert (%s): %s", ft_mode_name(mode), ft_ctx_errmsg(f->ctx));
        return -1;
    }
    return 0;
}

static void fixture_close(fixture *f) {
    ft_model_free(f->m);
    golden_close(&f->g);
    ft_ctx_free(f->ctx);
}

/* One profiled forward; returns the profiler (the caller frees it) or NULL. */
static ft_profiler *profile_forward(fixture *f, const ft_profiler_options *po) {
    ft_profiler *p = NULL;
    if (ft_profiler_create(f->ctx, po, &p) != FT_OK) {
        CHECK(0, "ft_profiler_create: %s", ft_ctx_errmsg(f->ctx));
        return NULL;
    }
    CHECK_OK(f->ctx, ft_profiler_start(p));
    CHECK_OK(f->ctx, ft_model_forward(f->m, f->g.in, f->g.n_in));
    CHECK_OK(f->ctx, ft_profiler_stop(p));
    return p;
}

/* Op calls that went through ft_dispatch's hooks since `before` (views are
 * made by ft_dispatch_view, which has no phases and no hooks). */
static uint64_t hooked_calls(const ft_ctx *ctx, const ft_op_counter *before) {
    uint64_t n = 0;
    for (int op = 0; op < FT_OP_COUNT; op++)
        if (op != FT_OP_VIEW) n += ctx->counters[op].calls - before[op].calls;
    return n;
}

static void test_eager_records_every_op(void) {
    fixture f;
    if (fixture_open(&f, FT_MODE_EAGER, 0) != 0) goto out;
    ft_op_counter before[FT_OP_COUNT];
    memcpy(before, f.ctx->counters, sizeof before);
    ft_profiler *p = profile_forward(&f, NULL);
    if (!p) goto out;
    uint64_t calls = hooked_calls(f.ctx, before);
    int64_t n = ft_profiler_op_count(p);
    CHECK(calls > 20, "only %llu dispatched ops", (unsigned long long)calls);
    CHECK((uint64_t)n == calls, "%lld records for %llu dispatched ops", (long long)n, (unsigned long long)calls);
    ft_profile_summary s;
    CHECK_OK(f.ctx, ft_profiler_summary(p, &s));
    CHECK(s.valid && s.ops == n && s.ops_dropped == 0 && s.ops_failed == 0,
          "summary: valid %d ops %lld dropped %lld failed %lld", s.valid, (long long)s.ops,
          (long long)s.ops_dropped, (long long)s.ops_failed);
    double phase_total[FT_PROFILE_PHASES] = {0}, host = 0;
    int bad_phases = 0, bad_sum = 0, bad_order = 0;
    for (int64_t i = 0; i < n; i++) {
        ft_profile_op o;
        CHECK_OK(f.ctx, ft_profiler_op(p, i, &o));
        double sum = 0;
        for (int k = 0; k < FT_PROFILE_PHASES; k++) {
            sum += o.phase_us[k];
            phase_total[k] += o.phase_us[k];
        }
        host += o.dur_us;
        bad_sum += sum > o.dur_us + 1e-9;
        /* internal view: every phase entered, in order, inside the op */
        const ft_prof_op *r = &p->ops[i];
        uint64_t t = r->begin;
        for (int k = 0; k < FT_PHASE_COUNT; k++) {
            bad_phases += !r->ph[k][0] || !r->ph[k][1];
            bad_order += r->ph[k][0] < t || r->ph[k][1] < r->ph[k][0];
            t = r->ph[k][1];
        }
        bad_order += r->end < t;
        if (i == 0) CHECK(o.node_id == -1 && o.shape[0] == '[', "eager record: node %d shape '%s'", o.node_id, o.shape);
    }
    CHECK(!bad_phases, "%d phase stamps missing", bad_phases);
    CHECK(!bad_sum, "%d records whose phases add up to more than the op", bad_sum);
    CHECK(!bad_order, "%d records with phases out of order or outside the op", bad_order);
    for (int k = 0; k < FT_PROFILE_PHASES; k++)
        CHECK(fabs(phase_total[k] - s.phase_us[k]) < 1e-3 * (1 + s.phase_us[k]), "phase %d total %g vs %g", k,
              phase_total[k], s.phase_us[k]);
    CHECK(fabs(host - s.op_host_us) < 1e-3 * (1 + host), "op host %g vs %g", host, s.op_host_us);
    /* per-name totals cover every record */
    int64_t named = 0;
    for (int i = 0; i < ft_profiler_op_stats_count(p); i++) {
        ft_profile_op_stats st;
        CHECK_OK(f.ctx, ft_profiler_op_stats(p, i, &st));
        named += st.calls;
        if (i > 0) {
            ft_profile_op_stats prev;
            ft_profiler_op_stats(p, i - 1, &prev);
            CHECK(prev.host_us >= st.host_us, "op stats not sorted by host time");
        }
    }
    CHECK(named == n, "op stats count %lld calls, records %lld", (long long)named, (long long)n);
    /* the metrics add up: CPU busy time = launch phases; gaps = overhead */
    CHECK(s.busy_source == FT_BUSY_CPU_LAUNCH, "busy source %d", (int)s.busy_source);
    CHECK(s.wall_us >= s.op_host_us && s.busy_us > 0 && s.busy_us <= s.wall_us, "wall %g busy %g host %g",
          s.wall_us, s.busy_us, s.op_host_us);
    CHECK(fabs(s.busy_us - s.phase_us[FT_PROFILE_LAUNCH]) < 1e-3 * (1 + s.busy_us),
          "busy %g vs launch phases %g (launches do not overlap on one thread)", s.busy_us,
          s.phase_us[FT_PROFILE_LAUNCH]);
    CHECK(fabs(s.overhead_us - (s.wall_us - s.busy_us)) < 1e-6 * (1 + s.wall_us), "overhead formula");
    double gaps = s.gap_leading_us + s.gap_internal_us + s.gap_trailing_us;
    CHECK(fabs(gaps - s.overhead_us) < 0.01, "gaps %g != overhead %g", gaps, s.overhead_us);
    CHECK(s.gap_count == n - 1 || s.gap_count == n, "%lld internal gaps for %lld launches", (long long)s.gap_count,
          (long long)n);
    CHECK(s.utilization > 0 && s.utilization <= 1, "utilization %g", s.utilization);
    CHECK(!s.cupti && s.kernels == 0, "CUPTI data on the CPU device");
    ft_profiler_free(p);
out:
    fixture_close(&f);
}

static int64_t records_in_mode(ft_mode mode, char *first_name, size_t name_size, int *only_launch) {
    fixture f;
    int64_t n = -1;
    if (fixture_open(&f, mode, 0) == 0) {
        ft_profiler *p = profile_forward(&f, NULL);
        if (p) {
            n = ft_profiler_op_count(p);
            *only_launch = 1;
            for (int64_t i = 0; i < n; i++) {
                ft_profile_op o;
                ft_profiler_op(p, i, &o);
                if (i == 0) snprintf(first_name, name_size, "%s", o.name); /* dies with the profiler */
                for (int k = 0; k < FT_PROFILE_LAUNCH; k++) *only_launch &= o.phase_us[k] == 0;
                *only_launch &= o.phase_us[FT_PROFILE_LAUNCH] > 0;
                if (mode == FT_MODE_GRAPH) CHECK(o.node_id >= 0, "graph record %lld has node %d", (long long)i, o.node_id);
            }
            if (mode == FT_MODE_GRAPH) {
                ft_graph_stats gs;
                ft_model_graph_stats(f.m, &gs);
                CHECK(n == gs.kernels_per_forward, "graph: %lld records, plan has %d kernels", (long long)n,
                      gs.kernels_per_forward);
            }
            ft_profiler_free(p);
        }
    }
    fixture_close(&f);
    return n;
}

static void test_graph_and_static_modes(void) {
    char name[32] = "", sname[32] = "";
    int launch_only = 0, s_launch_only = 0, e_launch_only = 0;
    int64_t eager = records_in_mode(FT_MODE_EAGER, name, sizeof name, &e_launch_only);
    int64_t graph = records_in_mode(FT_MODE_GRAPH, name, sizeof name, &launch_only);
    int64_t stat = records_in_mode(FT_MODE_STATIC, sname, sizeof sname, &s_launch_only);
    /* fewer with fusion; as many with FT_DISABLE_FUSION=1 (dead-node elimination only) */
    const char *nofuse = getenv("FT_DISABLE_FUSION");
    bool fusing = !(nofuse && *nofuse && strcmp(nofuse, "0"));
    CHECK(graph > 0 && (fusing ? graph < eager : graph <= eager), "graph mode %lld records, eager %lld",
          (long long)graph, (long long)eager);
    CHECK(launch_only, "graph-mode records should have the launch phase only");
    CHECK(!e_launch_only, "eager records should have every phase");
    CHECK(stat == 1 && !strcmp(sname, "static_plan") && s_launch_only,
          "static mode on CPU: %lld records, first '%s'", (long long)stat, sname);
}

static int count_lines(const char *path) {
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    int n = 0, c;
    while ((c = fgetc(fp)) != EOF) n += c == '\n';
    fclose(fp);
    return n;
}

/* Checks the trace file against the profiler it came from. */
static void check_trace(ft_ctx *ctx, ft_profiler *p, const char *path) {
    ft_json *j = NULL;
    if (ft_json_parse_file(ctx, path, &j) != FT_OK) {
        CHECK(0, "trace is not valid JSON: %s", ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
        return;
    }
    const ft_json *ev = ft_json_get(j, "traceEvents");
    const ft_json *other = ft_json_get(j, "otherData");
    CHECK(ev && ft_json_type_of(ev) == FT_JSON_ARRAY, "no traceEvents array");
    CHECK(other && ft_json_get(other, "wall_us"), "no otherData.wall_us");
    CHECK(ft_json_get(j, "displayTimeUnit") != NULL, "no displayTimeUnit");
    int64_t ops = 0, phases = 0, meta = 0, named_proc = 0, named_thread = 0, bad = 0, max_ts_bad = 0;
    ft_profile_summary s;
    ft_profiler_summary(p, &s);
    for (int i = 0; ev && i < ft_json_len(ev); i++) {
        const ft_json *e = ft_json_at(ev, i);
        const ft_json *ph = ft_json_get(e, "ph"), *cat = ft_json_get(e, "cat"), *nm = ft_json_get(e, "name");
        if (!ph || !nm || !ft_json_get(e, "pid") || !ft_json_get(e, "tid")) {
            bad++;
            continue;
        }
        if (!strcmp(ft_json_string(ph), "M")) {
            meta++;
            named_proc += !strcmp(ft_json_string(nm), "process_name");
            named_thread += !strcmp(ft_json_string(nm), "thread_name");
            continue;
        }
        if (strcmp(ft_json_string(ph), "X") != 0) continue;
        const ft_json *ts = ft_json_get(e, "ts"), *dur = ft_json_get(e, "dur");
        if (!ts || !dur || !cat || ft_json_number(dur) < 0) {
            bad++;
            continue;
        }
        /* relative microseconds: everything inside the window */
        max_ts_bad += ft_json_number(ts) < 0 || ft_json_number(ts) + ft_json_number(dur) > s.wall_us + 0.002;
        if (!strcmp(ft_json_string(cat), "op")) {
            ops++;
            CHECK(ft_json_get(ft_json_get(e, "args"), "shape") != NULL, "op event without args.shape");
        } else if (!strcmp(ft_json_string(cat), "phase")) {
            phases++;
        }
    }
    int64_t want_phases = 0;
    for (int64_t i = 0; i < p->n_ops; i++)
        for (int k = 0; k < FT_PHASE_COUNT; k++) want_phases += p->ops[i].ph[k][0] != 0;
    CHECK(!bad, "%lld malformed events", (long long)bad);
    CHECK(!max_ts_bad, "%lld slices outside the window", (long long)max_ts_bad);
    CHECK(ops == ft_profiler_op_count(p), "%lld op slices for %lld records", (long long)ops,
          (long long)ft_profiler_op_count(p));
    CHECK(phases == want_phases, "%lld phase slices, want %lld", (long long)phases, (long long)want_phases);
    CHECK(meta >= 2 && named_proc >= 1 && named_thread >= 1, "metadata events: %lld", (long long)meta);
    ft_json_free(j);
}

static void test_chrome_trace_and_csv(void) {
    fixture f;
    char path[300], csv[300];
    snprintf(path, sizeof path, "%s/trace.json", tmpdir);
    snprintf(csv, sizeof csv, "%s/ops.csv", tmpdir);
    if (fixture_open(&f, FT_MODE_EAGER, 0) == 0) {
        ft_profiler *p = profile_forward(&f, NULL);
        if (p) {
            CHECK_OK(f.ctx, ft_profiler_write_chrome_trace(p, path));
            check_trace(f.ctx, p, path);
            CHECK_OK(f.ctx, ft_profiler_write_csv(p, csv));
            CHECK(count_lines(csv) == ft_profiler_op_count(p) + 1, "csv: %d lines for %lld records",
                  count_lines(csv), (long long)ft_profiler_op_count(p));
            /* an unwritable path is an FT_ERR_IO naming it, and leaves nothing */
            ft_status st = ft_profiler_write_chrome_trace(p, "/nonexistent-dir/trace.json");
            CHECK(st == FT_ERR_IO && strstr(ft_ctx_errmsg(f.ctx), "/nonexistent-dir/trace.json"),
                  "unwritable trace: %s %s", ft_status_str(st), ft_ctx_errmsg(f.ctx));
            ft_ctx_clear_error(f.ctx);
            ft_profiler_free(p);
        }
    }
    fixture_close(&f);
    /* graph and static traces are valid too */
    for (int mode = FT_MODE_GRAPH; mode <= FT_MODE_STATIC; mode++) {
        if (fixture_open(&f, (ft_mode)mode, 0) == 0) {
            ft_profiler *p = profile_forward(&f, NULL);
            if (p) {
                CHECK_OK(f.ctx, ft_profiler_write_chrome_trace(p, path));
                check_trace(f.ctx, p, path);
                ft_profiler_free(p);
            }
        }
        fixture_close(&f);
    }
}

/* CUDA graph replays, on synthetic device records (the CUPTI side needs a GPU):
 * the hooks keep a reference on each replayed plan's map; a replay whose
 * record count matches its map is given to the plan steps by start time, one
 * with records missing or with an unusable map stays whole; device time
 * moves from the graph_launch row to the steps' op rows; the trace names
 * each replayed kernel's op and step. */
static void test_replay_attribution(void) {
    ft_ctx *ctx = NULL;
    ft_profiler *p = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (ctx) CHECK_OK(ctx, ft_profiler_create(ctx, NULL, &p));
    ft_replay_map *a = ft_replay_map_new(3), *b = ft_replay_map_new(2);
    if (!p || !a || !b) {
        CHECK(0, "setup failed");
        goto out;
    }
    /* a: linear (2 nodes), attention (1), layernorm (1); b: a graph with a node
     * that leaves no record, so its order cannot be trusted */
    const int ops_a[3] = {FT_OP_LINEAR, FT_OP_ATTENTION, FT_OP_LAYERNORM}, ends_a[3] = {2, 3, 4};
    for (int i = 0; i < 3; i++) a->step[i] = (ft_replay_step){ends_a[i], 10 + i, ops_a[i]};
    a->n_nodes = a->n_work = 4;
    a->usable = 1;
    b->step[0] = (ft_replay_step){1, 0, FT_OP_LINEAR};
    b->step[1] = (ft_replay_step){3, 1, FT_OP_GELU};
    b->n_nodes = 3;
    b->n_work = 2;
    ft_tensor la = {.op = FT_OP_NONE, .id = -1, .flags = FT_TF_REPLAY, .extra = a, .name = "graph_launch"};
    ft_tensor lb = la, gelu = {.op = FT_OP_GELU, .id = -1};
    lb.extra = b;
    const ft_tensor *calls[4] = {&la, &la, &lb, &gelu};
    CHECK_OK(ctx, ft_profiler_start(p));
    for (int i = 0; i < 4; i++) {
        p->hooks.op_begin(p->hooks.user, calls[i]);
        p->hooks.op_end(p->hooks.user, calls[i], FT_OK);
    }
    CHECK_OK(ctx, ft_profiler_stop(p));
    CHECK(p->n_ops == 4 && p->n_replays == 2 && a->refs == 2 && b->refs == 2,
          "%lld records, %d maps kept, refs %d %d", (long long)p->n_ops, p->n_replays, a->refs, b->refs);
    /* op 0: a's replay, records out of array order; op 1: a's with one record
     * dropped; op 2: b's; op 3: eager gelu; plus a runtime call */
    uint64_t t = p->t0;
    ft_gpu_rec r[12];
    const struct { int64_t op; uint64_t start, dur; } spec[11] = {
        {0, 400, 40}, {0, 100, 10}, {0, 300, 30}, {0, 200, 20}, {1, 500, 5}, {1, 510, 5}, {1, 520, 5},
        {2, 600, 7},  {2, 610, 7},  {3, 700, 9}, {0, 90, 1}};
    for (int i = 0; i < 11; i++)
        r[i] = (ft_gpu_rec){.start = t + spec[i].start, .end = t + spec[i].start + spec[i].dur,
                            .op = spec[i].op, .correlation = (uint32_t)(1 + spec[i].op),
                            .kind = i == 10 ? FT_GPU_RUNTIME : FT_GPU_KERNEL};
    free(p->gpu);
    p->gpu = (ft_gpu_rec *)calloc(16, sizeof *p->gpu);
    p->cap_gpu = p->gpu ? 16 : 0;
    p->cupti_window = 1;
    p->t1 = t + 1000000;
    CHECK_OK(ctx, ft_prof_finish(p, r, 11, 0));
    const int want_step[11] = {2, 0, 1, 0, -1, -1, -1, -1, -1, -1, -1};
    for (int i = 0; i < 11 && p->n_gpu == 11; i++)
        CHECK(p->gpu[i].step == want_step[i], "record %d: step %d, want %d", i, p->gpu[i].step, want_step[i]);
    ft_profile_summary s;
    ft_profiler_summary(p, &s);
    CHECK(s.graph_replays == 3 && s.graph_replays_attributed == 1, "replays %lld, attributed %lld",
          (long long)s.graph_replays, (long long)s.graph_replays_attributed);
    /* name -> {replayed, kernels, gpu ns}; graph_launch keeps the two unattributed replays */
    const struct { int op; const char *label; int64_t replayed, kernels, ns; } want[5] = {
        {FT_OP_LINEAR, NULL, 1, 2, 30}, {FT_OP_ATTENTION, NULL, 1, 1, 30}, {FT_OP_LAYERNORM, NULL, 1, 1, 40},
        {FT_OP_GELU, NULL, 0, 1, 9},     {-1, "graph_launch", 0, 5, 29}};
    for (int w = 0; w < 5; w++) {
        const char *name = want[w].label ? want[w].label : ft_op_name((ft_op)want[w].op);
        int found = 0;
        for (int i = 0; i < ft_profiler_op_stats_count(p); i++) {
            ft_profile_op_stats o;
            ft_profiler_op_stats(p, i, &o);
            if (strcmp(o.name, name)) continue;
            found = 1;
            CHECK(o.replayed == want[w].replayed && o.kernels == want[w].kernels &&
                      fabs(o.gpu_us * 1e3 - (double)want[w].ns) < 1e-6,
                  "%s: replayed %lld kernels %lld gpu %.3f us, want %lld %lld %.3f", name,
                  (long long)o.replayed, (long long)o.kernels, o.gpu_us, (long long)want[w].replayed,
                  (long long)want[w].kernels, want[w].ns * 1e-3);
        }
        CHECK(found, "no row for %s", name);
    }
    char path[300];
    snprintf(path, sizeof path, "%s/replay.json", tmpdir);
    CHECK_OK(ctx, ft_profiler_write_chrome_trace(p, path));
    check_trace(ctx, p, path);
    ft_json *j = NULL;
    int tagged = 0, steps = 0, step0 = 0;
    if (ft_json_parse_file(ctx, path, &j) == FT_OK) {
        const ft_json *ev = ft_json_get(j, "traceEvents");
        for (int i = 0; ev && i < ft_json_len(ev); i++) {
            const ft_json *args = ft_json_get(ft_json_at(ev, i), "args");
            const ft_json *st = ft_json_get(args, "plan_step"), *op = ft_json_get(args, "op");
            if (st && op && ft_json_number(st) == 2 && !strcmp(ft_json_string(op), ft_op_name(FT_OP_LAYERNORM)) &&
                ft_json_number(ft_json_get(args, "node")) == 12)
                tagged++;
            /* the step slices: step 0 spans its two kernels, 100 to 220 ns */
            const ft_json *e = ft_json_at(ev, i), *cat = ft_json_get(e, "cat");
            if (cat && !strcmp(ft_json_string(cat), "replayed_op")) {
                steps++;
                if (ft_json_number(st) == 0)
                    step0 = fabs(ft_json_number(ft_json_get(e, "ts")) - 0.100) < 1e-9 &&
                            fabs(ft_json_number(ft_json_get(e, "dur")) - 0.120) < 1e-9 &&
                            !strcmp(ft_json_string(ft_json_get(e, "name")), ft_op_name(FT_OP_LINEAR));
            }
        }
        ft_json_free(j);
    }
    CHECK(tagged == 1, "%d device slices tagged as step 2 (layernorm, node 12)", tagged);
    CHECK(steps == 3 && step0, "%d replayed step slices (want 3), step 0 right: %d", steps, step0);
    /* the maps outlive a plan only as long as the profiler's records */
    CHECK_OK(ctx, ft_profiler_start(p));
    CHECK(a->refs == 1 && b->refs == 1, "refs after a new window: %d %d", a->refs, b->refs);
    CHECK_OK(ctx, ft_profiler_stop(p));
out:
    ft_replay_map_unref(a);
    ft_replay_map_unref(b);
    ft_profiler_free(p);
    ft_ctx_free(ctx);
}

/* Mean SELECT phase and mean host time outside LAUNCH per record (the part of
 * an op's span that is framework work: on a loaded machine the kernel time in
 * LAUNCH varies far more than the 200 us we look for, so it is left out). */
static void mean_select_and_span(ft_profiler *p, double *sel, double *span) {
    int64_t n = ft_profiler_op_count(p);
    *sel = *span = 0;
    for (int64_t i = 0; i < n; i++) {
        ft_profile_op o;
        ft_profiler_op(p, i, &o);
        *sel += o.phase_us[FT_PROFILE_SELECT];
        *span += o.dur_us - o.phase_us[FT_PROFILE_LAUNCH];
    }
    if (n) {
        *sel /= (double)n;
        *span /= (double)n;
    }
}

static void test_host_cost_shows_in_select(void) {
    fixture f;
    double sel0 = 0, span0 = 0, sel1 = 0, span1 = 0, sel2 = 0, span2 = 0;
    double overhead1 = 0;
    int64_t n1 = 0;
    if (fixture_open(&f, FT_MODE_EAGER, 0) == 0) {
        ft_profiler *p = profile_forward(&f, NULL);
        if (p) {
            mean_select_and_span(p, &sel0, &span0);
            ft_profiler_free(p);
        }
    }
    fixture_close(&f);
    /* the ctx setter */
    if (fixture_open(&f, FT_MODE_EAGER, 200) == 0) {
        ft_profiler *p = profile_forward(&f, NULL);
        if (p) {
            mean_select_and_span(p, &sel1, &span1);
            ft_profile_summary s;
            ft_profiler_summary(p, &s);
            overhead1 = s.overhead_us;
            n1 = s.ops;
            ft_profiler_free(p);
        }
    }
    fixture_close(&f);
    /* the environment variable, read at context creation */
    setenv("FT_OP_HOST_COST_US", "200", 1);
    int ok = fixture_open(&f, FT_MODE_EAGER, 0);
    unsetenv("FT_OP_HOST_COST_US");
    if (ok == 0) {
        ft_profiler *p = profile_forward(&f, NULL);
        if (p) {
            mean_select_and_span(p, &sel2, &span2);
            ft_profiler_free(p);
        }
    }
    fixture_close(&f);
    /* lower bounds only, no comparison of timings between runs: a busy wait of
     * 200 us lasts at least that long, whatever the machine's load */
    CHECK(sel1 >= 190 && sel2 >= 190, "select phase with 200 us cost: %g / %g us (without: %g)", sel1, sel2, sel0);
    CHECK(span1 >= 190 && span2 >= 190, "op host time outside launch %g / %g us (without: %g)", span1, span2, span0);
    /* select never overlaps launch (the CPU busy time), so it is all overhead */
    CHECK(n1 > 0 && overhead1 >= 190.0 * (double)n1, "framework overhead %g us over %lld ops", overhead1,
          (long long)n1);
    /* graph mode resolved the framework work at plan time: no cost there */
    if (fixture_open(&f, FT_MODE_GRAPH, 200) == 0) {
        ft_profiler *p = profile_forward(&f, NULL);
        if (p) {
            double sel = 0, span = 0;
            mean_select_and_span(p, &sel, &span);
            CHECK(sel == 0, "graph mode select phase %g us", sel);
            ft_profiler_free(p);
        }
    }
    fixture_close(&f);
}

/* Hooks installed before the profiler (NVTX's, here a counting stand-in) keep
 * being called while it runs, and are put back afterwards. */
static int prev_calls[4];
static void c_op_begin(void *u, const ft_tensor *n) { (void)u, (void)n, prev_calls[0]++; }
static void c_phase_begin(void *u, ft_phase ph, const ft_tensor *n) { (void)u, (void)ph, (void)n, prev_calls[1]++; }
static void c_phase_end(void *u, ft_phase ph, const ft_tensor *n) { (void)u, (void)ph, (void)n, prev_calls[2]++; }
static void c_op_end(void *u, const ft_tensor *n, ft_status st) { (void)u, (void)n, (void)st, prev_calls[3]++; }

static void test_hooks_chain(void) {
    static const ft_dispatch_hooks counting = {c_op_begin, c_phase_begin, c_phase_end, c_op_end, NULL};
    fixture f;
    if (fixture_open(&f, FT_MODE_EAGER, 0) == 0) {
        memset(prev_calls, 0, sizeof prev_calls);
        f.ctx->hooks = &counting;
        ft_profiler *p = profile_forward(&f, NULL);
        if (p) {
            int64_t n = ft_profiler_op_count(p);
            CHECK(prev_calls[0] == n && prev_calls[3] == n, "chained op hooks called %d/%d times for %lld ops",
                  prev_calls[0], prev_calls[3], (long long)n);
            CHECK(prev_calls[1] == 5 * n && prev_calls[2] == 5 * n, "chained phase hooks %d/%d for %lld ops",
                  prev_calls[1], prev_calls[2], (long long)n);
            CHECK(f.ctx->hooks == &counting, "previous hooks not restored after stop");
            ft_profiler_free(p);
        }
        f.ctx->hooks = NULL;
    }
    fixture_close(&f);
}

static void test_bounded_storage(void) {
    fixture f;
    if (fixture_open(&f, FT_MODE_EAGER, 0) == 0) {
        ft_op_counter before[FT_OP_COUNT];
        memcpy(before, f.ctx->counters, sizeof before);
        ft_profiler_options po = ft_profiler_options_default();
        po.max_ops = 5;
        ft_profiler *p = profile_forward(&f, &po);
        if (p) {
            ft_profile_summary s;
            ft_profiler_summary(p, &s);
            uint64_t calls = hooked_calls(f.ctx, before);
            CHECK(s.ops == 5 && (uint64_t)(s.ops + s.ops_dropped) == calls, "kept %lld, dropped %lld of %llu",
                  (long long)s.ops, (long long)s.ops_dropped, (unsigned long long)calls);
            ft_profiler_free(p);
        }
    }
    fixture_close(&f);
}

static void test_misuse(void) {
    ft_profiler_free(NULL); /* a no-op */
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) {
        CHECK(0, "no context");
        return;
    }
    ft_profiler *p = NULL, *q = NULL;
    CHECK(ft_profiler_create(NULL, NULL, &p) == FT_ERR_INVALID_ARG && !p, "create without a context");
    CHECK(ft_profiler_start(NULL) == FT_ERR_INVALID_ARG && ft_profiler_stop(NULL) == FT_ERR_INVALID_ARG,
          "NULL profiler");
    CHECK_OK(ctx, ft_profiler_create(ctx, NULL, &p));
    CHECK(ft_profiler_create(ctx, NULL, &q) == FT_ERR_INVALID_ARG && !q, "second profiler on one context");
    ft_ctx_clear_error(ctx);
    ft_profile_summary s;
    CHECK(ft_profiler_summary(p, &s) == FT_OK && !s.valid, "summary before any window");
    CHECK(ft_profiler_op_count(p) == 0, "records before any window");
    CHECK(ft_profiler_stop(p) == FT_ERR_INVALID_ARG, "stop without start");
    CHECK(strstr(ft_ctx_errmsg(ctx), "no window") != NULL, "message: %s", ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    char path[300];
    snprintf(path, sizeof path, "%s/never.json", tmpdir);
    CHECK(ft_profiler_write_chrome_trace(p, path) == FT_ERR_INVALID_ARG && access(path, F_OK) != 0,
          "trace written before any window");
    ft_ctx_clear_error(ctx);
    CHECK_OK(ctx, ft_profiler_start(p));
    CHECK(ft_profiler_start(p) == FT_ERR_INVALID_ARG, "start twice");
    ft_ctx_clear_error(ctx);
    CHECK_OK(ctx, ft_profiler_stop(p));
    CHECK(ft_profiler_stop(p) == FT_ERR_INVALID_ARG, "stop twice");
    ft_ctx_clear_error(ctx);
    ft_profile_op o;
    CHECK(ft_profiler_op(p, 0, &o) == FT_ERR_INVALID_ARG, "record 0 of an empty window");
    ft_ctx_clear_error(ctx);
    CHECK(ft_profiler_summary(p, &s) == FT_OK && s.valid && s.ops == 0, "empty window summary");
    /* free with a window open: its hooks go away with it (NVTX's, if FT_NVTX=1, stay) */
    const ft_dispatch_hooks *before = ctx->hooks;
    CHECK_OK(ctx, ft_profiler_start(p));
    ft_profiler_free(p);
    CHECK(ctx->hooks == before && ctx->profiler == NULL, "free left hooks behind");
    /* a new profiler can be made once the old one is gone */
    CHECK_OK(ctx, ft_profiler_create(ctx, NULL, &q));
    ft_profiler_free(q);
    CHECK(ft_ctx_set_op_host_cost(ctx, -1) == FT_ERR_INVALID_ARG, "negative host cost accepted");
    ft_ctx_free(ctx);
}

/* ---- the CLI: ftengine bench/run --trace --csv --phases --op-cost-us ---- */

static int run_cli(const char *args, const char *out_name) {
    const char *b = getenv("FT_BUILD");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/ftengine' %s >'%s/%s.out' 2>'%s/%s.err'", b && *b ? b : "build", args, tmpdir,
             out_name, tmpdir, out_name);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int file_has(const char *name, const char *needle) {
    char path[400], buf[16384];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *fp = fopen(path, "r");
    if (!fp) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}

static void test_cli(void) {
    char args[2048], trace[300], csv[300], in[400], golden[300];
    snprintf(golden, sizeof golden, "%s/bert", ft_test_golden_dir());
    snprintf(trace, sizeof trace, "%s/cli.json", tmpdir);
    snprintf(csv, sizeof csv, "%s/cli.csv", tmpdir);
    snprintf(args, sizeof args, "bench '%s' --iters 2 --warmup 1 --seq 8 --phases --op-cost-us 50 --trace '%s' --csv '%s'",
             golden, trace, csv);
    int rc = run_cli(args, "bench");
    CHECK(rc == 0, "bench --trace exited %d", rc);
    CHECK(file_has("bench.out", "framework overhead") && file_has("bench.out", "select") &&
              file_has("bench.out", "emulated framework cost: 50.0"),
          "bench --phases printed no table");
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) == FT_OK) {
        ft_json *j = NULL;
        CHECK(ft_json_parse_file(ctx, trace, &j) == FT_OK, "bench trace: %s", ft_ctx_errmsg(ctx));
        ft_json_free(j);
        ft_ctx_free(ctx);
    }
    CHECK(count_lines(csv) > 1, "bench csv has %d lines", count_lines(csv));
    /* run --trace on the golden inputs, graph mode */
    snprintf(in, sizeof in, "%s/inputs.safetensors", golden);
    snprintf(args, sizeof args, "run '%s' --inputs '%s' --out '%s/o.safetensors' --mode graph --trace '%s' --phases",
             golden, in, tmpdir, trace);
    remove(trace);
    rc = run_cli(args, "run");
    CHECK(rc == 0 && access(trace, F_OK) == 0, "run --trace exited %d, trace %s", rc,
          access(trace, F_OK) == 0 ? "written" : "missing");
    CHECK(file_has("run.err", "profile: "), "run --phases printed nothing on stderr");
    /* usage errors exit 2; an unwritable trace is one error line and exit 1 */
    snprintf(args, sizeof args, "bench '%s' --op-cost-us -3", golden);
    CHECK(run_cli(args, "u1") == 2, "--op-cost-us -3 should be a usage error");
    snprintf(args, sizeof args, "bench '%s' --trace", golden);
    CHECK(run_cli(args, "u2") == 2, "--trace without a value should be a usage error");
    snprintf(args, sizeof args, "bench '%s' --iters 1 --warmup 0 --seq 8 --trace /nonexistent-dir/t.json", golden);
    rc = run_cli(args, "e1");
    CHECK(rc == 1 && file_has("e1.err", "ftengine: error: ") && file_has("e1.err", "/nonexistent-dir/t.json"),
          "unwritable trace: exit %d", rc);
    char e1[400];
    snprintf(e1, sizeof e1, "%s/e1.err", tmpdir);
    CHECK(count_lines(e1) == 1, "error output is %d lines", count_lines(e1));
}

/* ---- CUDA + CUPTI (needs a GPU) ---- */

static void test_cuda_cupti(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    ft_ctx *ctx = NULL;
    ft_model *m = NULL, *gm = NULL;
    ft_profiler *p = NULL;
    golden_case g;
    memset(&g, 0, sizeof g);
    if (ft_ctx_create(FT_DEVICE_CUDA, &ctx) != FT_OK) {
        CHECK(0, "no CUDA context");
        return;
    }
    CHECK_OK(ctx, ft_profiler_create(ctx, NULL, &p)); /* before the model: CUPTI first */
    ft_model_options opt = ft_model_options_default();
    if (golden_open(ctx, "bert", &g) != 0 || ft_model_load(ctx, g.dir, &opt, &m) != FT_OK ||
        ft_model_forward(m, g.in, g.n_in) != FT_OK) {
        CHECK(0, "golden bert on CUDA: %s", ft_ctx_errmsg(ctx));
        goto out;
    }
    CHECK_OK(ctx, ft_profiler_start(p));
    CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
    CHECK_OK(ctx, ft_profiler_stop(p));
    ft_profile_summary s;
    ft_profiler_summary(p, &s);
    const char *busy = getenv("FT_EMU_CUPTI_BUSY"); /* the emulator's stand-in for nsys */
    if (!s.cupti) {
        /* another CUPTI client (compute-sanitizer, nsys) or a CPU-only CUPTI build */
        CHECK(s.busy_source == FT_BUSY_NONE && s.cupti_note[0], "CUPTI off without a reason");
        if (busy && atoi(busy)) /* the fallback under test: host timers, and why */
            CHECK(strstr(s.cupti_note, "another CUPTI client") && s.ops > 0, "fallback: %s", s.cupti_note);
        else
            SKIP("CUPTI unavailable: %s", s.cupti_note);
        goto out;
    }
    CHECK(!(busy && atoi(busy)), "CUPTI collected with another client attached");
    CHECK(s.busy_source == FT_BUSY_CUPTI && s.kernels >= s.ops / 2, "%lld kernels for %lld ops", (long long)s.kernels,
          (long long)s.ops);
    CHECK(s.kernels_unlinked == 0 && s.correlation_errors == 0, "unlinked kernels %lld, correlation errors %lld",
          (long long)s.kernels_unlinked, (long long)s.correlation_errors);
    CHECK(s.busy_us > 0 && s.busy_us <= s.wall_us && s.kernels_before_api == 0, "busy %g wall %g before-api %lld",
          s.busy_us, s.wall_us, (long long)s.kernels_before_api);
    CHECK(s.launches > 0 && s.launch_latency_mean_us > 0, "no launch latency");
    char path[300];
    snprintf(path, sizeof path, "%s/cuda.json", tmpdir);
    CHECK_OK(ctx, ft_profiler_write_chrome_trace(p, path));
    check_trace(ctx, p, path);
    /* graph mode: a record per plan step, every kernel linked to one */
    opt.mode = FT_MODE_GRAPH;
    if (ft_model_load(ctx, g.dir, &opt, &gm) == FT_OK && ft_model_forward(gm, g.in, g.n_in) == FT_OK) {
        CHECK_OK(ctx, ft_profiler_start(p));
        CHECK_OK(ctx, ft_model_forward(gm, g.in, g.n_in));
        CHECK_OK(ctx, ft_profiler_stop(p));
        ft_profiler_summary(p, &s);
        ft_graph_stats gs;
        ft_model_graph_stats(gm, &gs);
        CHECK(s.cupti && s.ops == gs.kernels_per_forward && s.kernels >= s.ops && s.kernels_unlinked == 0,
              "graph mode: %lld records for %d steps, %lld kernels, %lld unlinked", (long long)s.ops,
              gs.kernels_per_forward, (long long)s.kernels, (long long)s.kernels_unlinked);
    } else {
        CHECK(0, "golden bert in graph mode on CUDA: %s", ft_ctx_errmsg(ctx));
    }
    /* a record store smaller than the window: the rest is counted as dropped */
    ft_profiler_free(p);
    ft_profiler_options po = ft_profiler_options_default();
    po.max_gpu_records = 8;
    p = NULL;
    CHECK_OK(ctx, ft_profiler_create(ctx, &po, &p));
    if (p) {
        CHECK_OK(ctx, ft_profiler_start(p));
        CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
        CHECK_OK(ctx, ft_profiler_stop(p));
        ft_profiler_summary(p, &s);
        CHECK(s.cupti && s.gpu_records_dropped > 0 && s.kernels + s.memcpys + s.memsets + s.runtime_calls <= 8,
              "store of 8: %lld dropped, %lld kernels kept", (long long)s.gpu_records_dropped,
              (long long)s.kernels);
    }
out:
    ft_profiler_free(p);
    ft_model_free(gm);
    ft_model_free(m);
    golden_close(&g);
    ft_ctx_free(ctx);
}

int main(void) {
    ft_test_tmpdir_make("prof");
    if (!tmpdir[0]) {
        printf("cannot make a temporary directory\n");
        return 1;
    }
    RUN(test_eager_records_every_op);
    RUN(test_graph_and_static_modes);
    RUN(test_chrome_trace_and_csv);
    RUN(test_replay_attribution);
    RUN(test_host_cost_shows_in_select);
    RUN(test_hooks_chain);
    RUN(test_bounded_storage);
    RUN(test_misuse);
    RUN(test_cli);
    RUN(test_cuda_cupti);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

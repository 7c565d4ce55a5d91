/*
 * ftengine.c - the command-line tool.
 *
 *   ftengine run MODEL --inputs IN.safetensors --out OUT.safetensors
 *                [--device cpu|cuda] [--mode eager|graph|static]
 *                [--dtype fp32|fp16|bf16] [--hidden-states] [--profile]
 *                [--trace FILE.json] [--csv FILE.csv] [--phases]
 *   ftengine info MODEL [--batch B] [--seq S]
 *   ftengine bench MODEL [--device D] [--mode M] [--dtype T] [--batch B] [--seq S]
 *                [--warmup N] [--iters N] [--protocol paper|sync] [--op-cost-us N]
 *                [--mem-limit BYTES] [--trace FILE.json] [--csv FILE.csv] [--phases]
 *   ftengine plan MODEL [--device D] [--mode graph|static] [--dtype T] [--batch B] [--seq S]
 *   ftengine sweep MODEL ...   (tools/sweep.c)
 *   ftengine version
 *
 * Which options each command takes, their defaults and the --help texts are the
 * tables of tools/help.c (main() checks argv against them before a command runs);
 * option parsing shared by the commands is in tools/cli.c. Reports go to stdout,
 * errors and warnings to stderr.
 * --trace / --csv / --phases profile with ft_profiler (docs/instrumentation.md):
 * `run` profiles its one forward, `bench` a second pass of --iters forwards
 * after the timed (unprofiled) ones, so the headline latency carries no
 * observer cost and the difference is printed.
 *
 * MODEL is a directory with config.json and model.safetensors, or a preset name.
 * Contract: exit 0 on success; any error exits 1 with one line
 * "ftengine: error: <what and where>" on stderr and leaves no output file behind;
 * usage errors (an empty path among them) exit 2. Output files (--out, --trace,
 * --csv) are handled by tools/outfiles.c: each is checked before the work starts
 * and written to a temporary beside its target, and all of a command's files are
 * renamed into place only once every one was written, so a failure or a
 * SIGINT/SIGTERM/SIGHUP leaves no new file and every older one untouched. An
 * existing target must be a regular file: a directory, FIFO, socket or device is
 * refused (exit 1), never replaced. A symbolic link to a regular file is written
 * through (the file it points to is replaced, the link stays); a link to anything
 * else, or a dangling one, is refused.
 */
#include "cli.h"
#include "provenance.h"
#include "outfiles.h"
#include "stats.h"
#include "../engine/safetensors.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- profiling (--trace, --csv, --phases) ---- */

static int wants_profile(const args *a) { return a->trace || a->ops_csv || a->phases; }

/* `--csv` of run and bench was renamed `--ops-csv` (one row per op call), which
 * says what it holds and keeps it apart from sweep's --csv (one row per point). */
static void csv_alias(args *a, const char *cmd) {
    if (!a->csv) return;
    fprintf(stderr, "ftengine: note: %s --csv is deprecated, it is now --ops-csv (one row per op call)\n", cmd);
    if (!a->ops_csv) a->ops_csv = a->csv;
    a->csv = NULL;
}

/* Made before the model loads; CUPTI is attached only between ft_profiler_start
 * and ft_profiler_stop, so the timed (unprofiled) forwards run without it. */
static ft_profiler *make_profiler(ft_ctx *ctx, int64_t max_ops, int *rc) {
    ft_profiler_options po = ft_profiler_options_default();
    if (max_ops > po.max_ops) po.max_ops = max_ops;
    ft_profiler *p = NULL;
    if (ft_profiler_create(ctx, &po, &p) != FT_OK) {
        *rc = fail("profiler: %s", ft_ctx_errmsg(ctx));
        return NULL;
    }
    return p;
}

static const char *busy_source_text(ft_busy_source b) {
    return b == FT_BUSY_CUPTI ? "kernels+copies (CUPTI)"
           : b == FT_BUSY_CPU_LAUNCH ? "launch phases (CPU device)" : "unknown";
}

/* The overhead metrics and the per-phase / per-op tables, per iteration. */
static void print_phases(FILE *f, const ft_profiler *p, int iters) {
    ft_profile_summary s;
    if (ft_profiler_summary(p, &s) != FT_OK || !s.valid) return;
    double k = iters > 0 ? 1.0 / iters : 1.0;
    const char *pre = "profile: ";
    fprintf(f, "%swindow %.3f ms for %d iteration%s (%.4f ms each), %lld op records (%lld dropped, "
               "%lld failed)\n",
            pre, s.wall_us * 1e-3, iters, iters == 1 ? "" : "s", s.wall_us * 1e-3 * k,
            (long long)s.ops, (long long)s.ops_dropped, (long long)s.ops_failed);
    if (s.busy_source == FT_BUSY_NONE) {
        fprintf(f, "%sdevice busy time unknown (no CUPTI: %s)\n", pre, s.cupti_note);
    } else {
        fprintf(f, "%sper iteration: busy %.4f ms [%s], framework overhead %.4f ms, utilization %.1f%%\n",
                pre, s.busy_us * 1e-3 * k, busy_source_text(s.busy_source), s.overhead_us * 1e-3 * k,
                100.0 * s.utilization);
        fprintf(f, "%sidle gaps: %lld internal totalling %.3f ms (largest %.1f us), leading %.1f us, "
                   "trailing %.1f us (whole window)\n",
                pre, (long long)s.gap_count, s.gap_internal_us * 1e-3, s.gap_max_us, s.gap_leading_us,
                s.gap_trailing_us);
    }
    fprintf(f, "%shost time per iteration (us): ops %.1f =", pre, s.op_host_us * k);
    for (int i = 0; i < FT_PROFILE_PHASES; i++)
        fprintf(f, " %s %.1f +", ft_profile_phase_name(i), s.phase_us[i] * k);
    fprintf(f, " untimed %.1f\n", s.untimed_us * k);
    if (s.cupti)
        fprintf(f, "%scupti: %lld kernels, %lld memcpy, %lld memset, %lld runtime calls; launch latency "
                   "mean %.1f us (max %.1f), queue mean %.1f us, launch API mean %.1f us; dropped %lld, "
                   "unlinked kernels %lld, zero timestamps %lld, kernel before API %lld, correlation "
                   "errors %lld, CUPTI overhead %.1f us\n",
                pre, (long long)s.kernels, (long long)s.memcpys, (long long)s.memsets,
                (long long)s.runtime_calls, s.launch_latency_mean_us, s.launch_latency_max_us,
                s.queue_mean_us, s.api_mean_us, (long long)s.gpu_records_dropped,
                (long long)s.kernels_unlinked, (long long)s.kernels_zero_ts,
                (long long)s.kernels_before_api, (long long)s.correlation_errors, s.cupti_overhead_us);
    else if (s.device == FT_DEVICE_CUDA)
        fprintf(f, "%scupti: off (%s)\n", pre, s.cupti_note);
    if (s.cupti && s.overlap_us > 0)
        fprintf(f, "%sdevice overlap (PDL early starts) per iteration: %.1f us, counted once in the "
                   "per-op device time\n",
                pre, s.overlap_us * k);
    if (s.graph_replays)
        fprintf(f, "%sCUDA graph replays: %lld, %lld with their device work given to the plan steps%s\n",
                pre, (long long)s.graph_replays, (long long)s.graph_replays_attributed,
                !s.cupti ? " (that needs CUPTI)"
                : s.graph_replays_attributed < s.graph_replays
                    ? " (the others' device records did not match their graphs: see docs/instrumentation.md)"
                    : " (the 'in graph' column)");
    int replayed = s.graph_replays_attributed > 0;
    fprintf(f, "%s%-16s %8s %10s %9s", pre, "op (per iter)", "calls", "host us", "us/call");
    for (int i = 0; i < FT_PROFILE_PHASES; i++) fprintf(f, " %8s", ft_profile_phase_name(i));
    fprintf(f, " %10s%s\n", s.cupti ? "gpu us" : "", replayed ? "   in graph" : "");
    for (int i = 0, n = ft_profiler_op_stats_count(p); i < n; i++) {
        ft_profile_op_stats o;
        if (ft_profiler_op_stats(p, i, &o) != FT_OK) break;
        fprintf(f, "%s%-16s %8.1f %10.1f %9.2f", pre, o.name, (double)o.calls * k, o.host_us * k,
                o.calls ? o.host_us / (double)o.calls : 0.0);
        for (int j = 0; j < FT_PROFILE_PHASES; j++) fprintf(f, " %8.1f", o.phase_us[j] * k);
        if (s.cupti) fprintf(f, " %10.1f", o.gpu_us * k);
        if (replayed) fprintf(f, " %10.1f", (double)o.replayed * k);
        fputc('\n', f);
    }
}

/* bench --phases: the forward's latency split as the report splits every mode gap
 * (docs/report.md): kernel time is the profiled pass's device-busy time per forward,
 * dispatch/host time is the rest of the (unprofiled) latency. Both are means here (the
 * profiled pass is one window); `sweep --overhead` takes medians over forwards. */
static void print_split(FILE *f, const ft_profiler *p, int iters, double latency_ms) {
    const char *stat = "mean";
    ft_profile_summary s;
    if (ft_profiler_summary(p, &s) != FT_OK || !s.valid || iters < 1) return;
    if (s.busy_source == FT_BUSY_NONE) {
        fprintf(f, "split: kernel time unknown (no CUPTI: %s), so no split of the %s %.4f ms\n", s.cupti_note,
                stat, latency_ms);
        return;
    }
    double kern = s.busy_us * 1e-3 / iters, host = latency_ms - kern, disp = 0;
    for (int i = 0; i < FT_PROFILE_LAUNCH; i++) disp += s.phase_us[i];
    disp *= 1e-3 / iters;
    fprintf(f, "split: %s forward %.4f ms = kernel time %.4f ms [%s] + dispatch/host time %.4f ms (%.1f%%); "
               "the dispatcher's check/infer/alloc/select phases %.4f ms of it (profiled pass)\n",
            stat, latency_ms, kern, busy_source_text(s.busy_source), host,
            latency_ms > 0 ? 100.0 * host / latency_ms : 0.0, disp);
}

/* The profiler's files go to the temporaries of tools/outfiles.c. */
static int write_profile(ft_ctx *ctx, const args *a, const ft_profiler *p, const char *trace_tmp,
                         const char *csv_tmp) {
    if (trace_tmp && ft_profiler_write_chrome_trace(p, trace_tmp) != FT_OK)
        return fail("--trace %s: %s", a->trace, ft_ctx_errmsg(ctx));
    if (csv_tmp && ft_profiler_write_csv(p, csv_tmp) != FT_OK)
        return fail("--ops-csv %s: %s", a->ops_csv, ft_ctx_errmsg(ctx));
    return 0;
}

/* Registers --trace and --csv before any work, so a bad path fails at once. */
static int add_profile_outputs(const args *a, const char **trace_tmp, const char **csv_tmp) {
    int rc = 0;
    if (a->trace) rc = outfile_add("--trace", a->trace, trace_tmp);
    if (!rc && a->ops_csv) rc = outfile_add("--ops-csv", a->ops_csv, csv_tmp);
    return rc;
}

/* The emulated costs of --op-cost-us and --step-cost-us (one value each here). */
static int set_costs(ft_ctx *ctx, const args *a) {
    if ((a->op_cost_us >= 0 && ft_ctx_set_op_host_cost(ctx, a->op_cost_us) != FT_OK) ||
        (a->step_cost_us >= 0 && ft_ctx_set_step_host_cost(ctx, a->step_cost_us) != FT_OK))
        return fail("%s", ft_ctx_errmsg(ctx));
    return 0;
}

static int one_cost_each(const args *a) {
    return a->n_op_costs <= 1 && a->n_step_costs <= 1;
}

/* A CPU run in half precision: the CPU kernels compute in f32 and convert at every
 * op's edges (docs/cpu_backend.md), so it is slower than fp32, not faster as on a GPU. */
static void warn_cpu_half(const args *a) {
    if (a->device == FT_DEVICE_CPU && a->dtype != FT_DTYPE_F32)
        fprintf(stderr, "ftengine: warning: %s on the CPU is slower than fp32: the CPU kernels compute in "
                        "f32 and convert %s at each op's inputs and outputs (it saves memory, not time); "
                        "--dtype fp32 for CPU timings\n",
                ft_dtype_name(a->dtype), ft_dtype_name(a->dtype));
}

/* ---- run ---- */

static int write_outputs(ft_ctx *ctx, ft_model *m, const char *path, const char *given) {
    int n = ft_model_output_count(m);
    ft_st_tensor *ts = (ft_st_tensor *)calloc((size_t)(n ? n : 1), sizeof *ts);
    float **bufs = (float **)calloc((size_t)(n ? n : 1), sizeof *bufs);
    int rc = 0;
    if (!ts || !bufs) rc = fail("out of host memory");
    for (int i = 0; !rc && i < n; i++) {
        ft_tensor *t = ft_model_output(m, i);
        int64_t numel = ft_tensor_numel(t);
        bufs[i] = (float *)malloc((size_t)(numel ? numel : 1) * sizeof(float));
        if (!bufs[i]) {
            rc = fail("out of host memory");
            break;
        }
        if (ft_tensor_to_host(ctx, t, FT_DTYPE_F32, bufs[i], (size_t)numel * sizeof(float)) != FT_OK) {
            rc = fail("reading output '%s': %s", ft_model_output_name(m, i), ft_ctx_errmsg(ctx));
            break;
        }
        ts[i].name = ft_model_output_name(m, i);
        ts[i].dtype = FT_DTYPE_F32;
        ts[i].ndim = ft_tensor_ndim(t);
        for (int d = 0; d < ts[i].ndim; d++) ts[i].shape[d] = ft_tensor_dim(t, d);
        ts[i].data = bufs[i];
        ts[i].nbytes = (size_t)numel * sizeof(float);
    }
    /* path is the temporary of tools/outfiles.c, renamed when every output was written */
    if (!rc && ft_st_write(ctx, path, ts, n) != FT_OK) rc = fail("--out %s: %s", given, ft_ctx_errmsg(ctx));
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(ts);
    return rc;
}

/* The one-time and per-forward costs of graph/static mode (nothing in eager). */
static void print_graph_stats(FILE *f, const char *prefix, const ft_model *m) {
    ft_graph_stats g;
    if (ft_model_graph_stats(m, &g) != FT_OK || !g.valid) return;
    fprintf(f, "%strace %.2f ms, passes %.2f ms, plan %.2f ms (total %.2f ms); capture %.2f ms, "
               "instantiate %.2f ms%s\n",
            prefix, g.trace_ms, g.passes_ms, g.plan_ms, g.trace_ms + g.passes_ms + g.plan_ms,
            g.capture_ms, g.instantiate_ms, g.captured ? "" : " (no CUDA graph)");
    char nodes[48] = "";
    if (g.captured) snprintf(nodes, sizeof nodes, " (%d CUDA graph nodes)", g.graph_nodes);
    fprintf(f, "%skernels per forward %d (eager %d), graph launches %d%s, input uploads %d; arena %zu B "
               "(peak-live bound %zu B, no reuse %zu B), constants %zu B (+ %zu B shared by the model's "
               "plans), scratch %zu B\n",
            prefix, g.kernels_per_forward, g.traced_kernels, g.graph_launches, nodes, g.input_uploads,
            g.arena_bytes,
            g.peak_live_bytes, g.sum_intermediate_bytes, g.const_bytes, g.shared_const_bytes,
            g.scratch_bytes);
    fprintf(f, "%spasses: dce %d, folded %d, qkv %d, epilogues %d, ln+residual %d, attention %d, "
               "eltwise %d, nonorm %d, conv+bn %d, affine %d, nchwc %d (+%d reorders, %d Winograd); "
               "plans cached %d (hits %llu, misses %llu)\n",
            prefix, g.dce_removed, g.folded, g.qkv_merged, g.epilogues, g.ln_residual,
            g.attention_fused, g.eltwise_fused, g.nonorm_folded, g.conv_bn_folded, g.affine_folded,
            g.nchwc_nodes, g.nchwc_reorders, g.winograd_convs,
            g.plans_cached,
            (unsigned long long)g.plan_hits, (unsigned long long)g.plan_misses);
}

static int cmd_run(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.model) return usage("run needs a MODEL");
    if (!a.inputs) return usage("run needs --inputs IN.safetensors");
    if (!a.out) return usage("run needs --out OUT.safetensors");
    if (a.resume || a.json) return usage("%s belongs to bench or sweep", a.resume ? "--resume" : "--json");
    if (!one_cost_each(&a)) return usage("--op-cost-us and --step-cost-us take one value here (sweep takes lists)");
    csv_alias(&a, "run");
    const char *out_tmp = NULL, *trace_tmp = NULL, *csv_tmp = NULL;
    /* inputs first: no output may be one of them (tools/outfiles.c) */
    if ((rc = outfile_input_model(a.model)) || (rc = outfile_input("--inputs", a.inputs)) ||
        (rc = outfile_add("--out", a.out, &out_tmp)) || (rc = add_profile_outputs(&a, &trace_tmp, &csv_tmp)))
        return rc;
    ft_ctx *ctx = make_ctx(&a, a.device, &rc);
    if (!ctx) return rc;
    ft_model *m = NULL;
    ft_st_file *in = NULL;
    ft_host_tensor hin[8];
    ft_profiler *prof = NULL;
    if (wants_profile(&a) && !(prof = make_profiler(ctx, 0, &rc))) goto done;
    if (ft_st_open(ctx, a.inputs, &in) != FT_OK) {
        rc = fail("%s", ft_ctx_errmsg(ctx));
        goto done;
    }
    int n_in = ft_st_count(in);
    if (n_in > 8) {
        rc = fail("%s: too many tensors (%d) for model inputs", a.inputs, n_in);
        goto done;
    }
    for (int i = 0; i < n_in; i++) {
        const ft_st_tensor *t = ft_st_get(in, i);
        memset(&hin[i], 0, sizeof hin[i]);
        hin[i].name = t->name;
        hin[i].dtype = t->dtype;
        hin[i].ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) hin[i].shape[d] = t->shape[d];
        hin[i].data = t->data;
    }
    m = load(ctx, &a, &rc);
    if (!m) goto done;
    if ((rc = set_costs(ctx, &a))) goto done;
    if (prof && ft_profiler_start(prof) != FT_OK) {
        rc = fail("profiler: %s", ft_ctx_errmsg(ctx));
        goto done;
    }
    double t0 = now_ms();
    if (ft_model_forward(m, hin, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) {
        rc = fail("%s", ft_ctx_errmsg(ctx));
        goto done;
    }
    double t1 = now_ms();
    if (prof && ft_profiler_stop(prof) != FT_OK) {
        rc = fail("profiler: %s", ft_ctx_errmsg(ctx));
        goto done;
    }
    rc = write_outputs(ctx, m, out_tmp, a.out);
    if (!rc && prof) rc = write_profile(ctx, &a, prof, trace_tmp, csv_tmp);
    if (!rc) rc = outfiles_commit();
    /* reports go to stdout, as bench's do; stderr carries errors and warnings only */
    if (!rc && a.phases) print_phases(stdout, prof, 1);
    if (!rc && a.profile) {
        printf("profile: %s %s %s on %s (%s): forward %.3f ms (first call, includes planning)\n",
                ft_model_arch(m), ft_mode_name(a.mode), ft_dtype_name(a.dtype),
                ft_device_name(a.device), ft_ctx_device_label(ctx), t1 - t0);
        ft_mem_stats ms = ft_ctx_mem_stats(ctx);
        printf("profile: memory allocated %zu B, reserved %zu B, peak %zu B, %llu system allocations\n",
               ms.allocated, ms.reserved, ms.peak_allocated, (unsigned long long)ms.n_sys_alloc);
        print_graph_stats(stdout, "profile: ", m);
    }
done:
    ft_profiler_free(prof);
    ft_model_free(m);
    ft_st_close(in);
    ft_ctx_free(ctx);
    return rc;
}

/* ---- info ---- */

/* `info --presets`: each preset with its parameters and MACs at batch 1 and the
 * default input size, counted on a shapes-only load (no weight is allocated). */
static int list_presets(const args *a) {
    int rc = 0;
    ft_ctx *ctx = make_ctx(a, FT_DEVICE_CPU, &rc);
    if (!ctx) return rc;
    printf("%-25s %-16s %11s %11s  %s\n", "preset", "architecture", "parameters", "MACs", "(batch 1, default input)");
    ft_model_options o = ft_model_options_default();
    o.weights = FT_WEIGHTS_NONE;
    for (int i = 0; !rc && ft_preset_name(i); i++) {
        ft_model *m = NULL;
        int64_t macs = 0;
        if (ft_model_load(ctx, ft_preset_name(i), &o, &m) != FT_OK || ft_model_macs(m, 1, 0, &macs) != FT_OK)
            rc = fail("preset %s: %s", ft_preset_name(i), ft_ctx_errmsg(ctx));
        else
            printf("%-25s %-16s %10.1fM %10.2fG\n", ft_preset_name(i), ft_model_arch(m),
                   (double)ft_model_param_count(m) / 1e6, (double)macs / 1e9);
        ft_model_free(m);
    }
    ft_ctx_free(ctx);
    return rc;
}

static int cmd_info(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (a.list_presets) return list_presets(&a);
    if (!a.model) return usage("info needs a MODEL");
    ft_ctx *ctx = make_ctx(&a, FT_DEVICE_CPU, &rc);
    if (!ctx) return rc;
    a.weights = FT_WEIGHTS_NONE; /* the config and shapes tell all info prints */
    ft_model *m = load(ctx, &a, &rc);
    if (m) {
        int64_t macs = 0;
        if (ft_model_macs(m, a.batch, a.seq, &macs) != FT_OK) {
            rc = fail("%s", ft_ctx_errmsg(ctx));
        } else {
            /* the length the MACs were counted at, the architecture's default when no --seq */
            ft_host_tensor in[8];
            int n_in = 0;
            const char *unit = "length";
            long long len = a.seq;
            /* owned NULL: the shapes only, no example tensor is built */
            if (ft_model_example_inputs(m, a.batch, a.seq, in, &n_in, NULL) == FT_OK)
                len = input_length(in, n_in, &unit);
            printf("architecture: %s\n", ft_model_arch(m));
            struct stat sb;
            char ck[1100];
            snprintf(ck, sizeof ck, "%s/model.safetensors", a.model);
            if (stat(a.model, &sb) == 0 && S_ISDIR(sb.st_mode))
                printf("source: %s/config.json%s\n", a.model,
                       access(ck, F_OK) == 0 ? ", every weight shape checked against model.safetensors"
                                             : " alone (no model.safetensors: shapes from the config)");
            else
                printf("source: preset %s (no weights are loaded to describe it)\n", a.model);
            printf("parameters: %lld\n", (long long)ft_model_param_count(m));
            printf("macs: %lld (batch %lld, length %lld (%s)%s)\n", (long long)macs, a.batch, len, unit,
                   a.seq ? "" : ", the default");
        }
    }
    ft_model_free(m);
    ft_ctx_free(ctx);
    return rc;
}

/* ---- bench ---- */

typedef struct bench_result {
    const prov *pv;
    const char *date;
    long long length;
    double mean, first, profiled_ms;
    const double *times;  /* synchronized protocol only: sorted */
    const double *raw;    /* the same in the order they ran */
    ft_mem_stats mem;
} bench_result;

/* `bench --json FILE`: every statistic, the config, provenance, the plan's counts
 * and the overhead metrics of the profiled pass when there was one. Written beside
 * the target by tools/outfiles.c, committed with the command's other files. */
static int bench_json(const args *a, const char *tmp, ft_ctx *ctx, const ft_model *m,
                      const ft_profiler *prof, const bench_result *r) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len); /* written whole, every write checked (tools/outfiles.c) */
    if (!f) return fail("out of host memory");
    fputs("{\n  \"schema\": \"ftengine-bench/1\",\n  \"provenance\": {\n", f);
    prov_json(f, r->pv, r->date, "    ");
    fputs("\n  },\n  \"config\": {\"model\": ", f);
    json_str(f, a->model);
    fputs(", \"arch\": ", f);
    json_str(f, ft_model_arch(m));
    fprintf(f, ", \"device\": \"%s\", \"mode\": \"%s\", \"dtype\": \"%s\", \"batch\": %lld, "
               "\"length\": %lld, \"protocol\": \"%s\", \"iters\": %d, \"warmup\": %d, \"op_cost_us\": ",
            ft_device_name(a->device), ft_mode_name(a->mode), ft_dtype_name(a->dtype), a->batch, r->length,
            a->paper ? "paper" : "sync", a->iters, a->warmup);
    json_num(f, a->op_cost_us >= 0 ? a->op_cost_us : NAN);
    fputs(", \"step_cost_us\": ", f);
    json_num(f, a->step_cost_us >= 0 ? a->step_cost_us : NAN);
    fputs(", \"mem_limit\": ", f);
    json_num(f, a->mem_limit ? (double)a->mem_limit : NAN);
    fprintf(f, ", \"params\": %lld},\n  \"latency_ms\": {\"mean\": ", (long long)ft_model_param_count(m));
    json_num(f, r->mean);
    fputs(", \"first\": ", f);
    json_num(f, r->first);
    if (!a->paper) {
        const double *t = r->times;
        int n = a->iters;
        double var = 0;
        for (int i = 0; i < n; i++) var += (t[i] - r->mean) * (t[i] - r->mean);
        const char *k[] = {"median", "min", "p90", "max", "stdev"};
        double v[] = {ft_stats_median(t, n), t[0], t[(int)(n * 0.9)], t[n - 1], n > 1 ? sqrt(var / (n - 1)) : 0};
        for (int i = 0; i < 5; i++) {
            fprintf(f, ", \"%s\": ", k[i]);
            json_num(f, v[i]);
        }
        /* every timed forward, in the order run: a reader can test for drift or
         * compute its own statistic */
        fputs(", \"times\": [", f);
        for (int i = 0; i < n; i++) {
            if (i) fputs(", ", f);
            json_num(f, r->raw[i]);
        }
        fputc(']', f);
    }
    fprintf(f, "},\n  \"memory\": {\"peak_bytes\": %zu, \"reserved_bytes\": %zu, \"system_allocations\": "
               "%llu, \"cpu_scratch_bytes\": %zu, \"cpu_pack_cache_bytes\": %zu},\n  \"graph\": ",
            r->mem.peak_allocated, r->mem.reserved, (unsigned long long)r->mem.n_sys_alloc, r->mem.cpu_scratch,
            r->mem.cpu_pack_cache);
    ft_graph_stats g;
    if (ft_model_graph_stats(m, &g) == FT_OK && g.valid)
        fprintf(f, "{\"kernels_per_forward\": %d, \"eager_kernels\": %d, \"graph_launches\": %d, "
                   "\"captured\": %s, \"graph_nodes\": %d, \"arena_bytes\": %zu, \"trace_ms\": %.4f, "
                   "\"passes_ms\": %.4f, \"plan_ms\": %.4f, \"capture_ms\": %.4f, \"instantiate_ms\": %.4f}",
                g.kernels_per_forward, g.traced_kernels, g.graph_launches, g.captured ? "true" : "false",
                g.graph_nodes, g.arena_bytes, g.trace_ms, g.passes_ms, g.plan_ms, g.capture_ms,
                g.instantiate_ms);
    else
        fputs("null", f);
    /* kernels per forward: the plan's in graph/static mode, else the profiled pass's launches */
    ft_profile_summary s;
    int have_s = prof && ft_profiler_summary(prof, &s) == FT_OK && s.valid;
    fputs(",\n  \"kernels_per_forward\": ", f);
    if (ft_model_graph_stats(m, &g) == FT_OK && g.valid) fprintf(f, "%d", g.kernels_per_forward);
    else if (have_s) json_num(f, (double)(s.ops + s.ops_dropped) / a->iters);
    else fputs("null", f);
    fputs(",\n  \"overhead\": ", f);
    if (have_s) {
        double k = 1.0 / a->iters;
        fputs("{\"profiled_ms\": ", f);
        json_num(f, r->profiled_ms);
        fputs(", \"observer_cost_ms\": ", f);
        json_num(f, r->profiled_ms - r->mean);
        fprintf(f, ", \"ops_per_forward\": %.1f, \"busy_source\": \"%s\", \"busy_ms\": ",
                (double)(s.ops + s.ops_dropped) * k, busy_source_text(s.busy_source));
        int busy = s.busy_source != FT_BUSY_NONE;
        json_num(f, busy ? s.busy_us * 1e-3 * k : NAN);
        fputs(", \"overhead_ms\": ", f);
        json_num(f, busy ? s.overhead_us * 1e-3 * k : NAN);
        fputs(", \"overhead_share\": ", f);
        json_num(f, busy && s.wall_us > 0 ? s.overhead_us / s.wall_us : NAN);
        fputs(", \"utilization\": ", f);
        json_num(f, busy ? s.utilization : NAN);
        fputs(", \"kernels\": ", f);
        json_num(f, s.cupti ? (double)s.kernels * k : NAN);
        fputs("}", f);
    } else {
        fputs("null", f);
    }
    fputs("\n}\n", f);
    (void)ctx;
    int rc = fclose(f) != 0 ? fail("out of host memory") : outfile_write(tmp, buf, len);
    free(buf);
    return rc;
}


static int cmd_bench(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.model) return usage("bench needs a MODEL");
    if (a.resume) return usage("--resume belongs to sweep");
    if (!one_cost_each(&a)) return usage("--op-cost-us and --step-cost-us take one value here (sweep takes lists)");
    csv_alias(&a, "bench");
    const char *trace_tmp = NULL, *csv_tmp = NULL, *json_tmp = NULL;
    if ((rc = outfile_input_model(a.model)) || (rc = add_profile_outputs(&a, &trace_tmp, &csv_tmp))) return rc;
    if (a.json && (rc = outfile_add("--json", a.json, &json_tmp))) return rc;
    ft_ctx *ctx = make_ctx(&a, a.device, &rc);
    if (!ctx) return rc;
    ft_profiler *prof = NULL;
    ft_model *m = NULL;
    /* room for every op of the profiled pass (a large model runs ~1000 ops a forward) */
    int64_t max_ops = (int64_t)a.iters * 2048;
    if (wants_profile(&a) && !(prof = make_profiler(ctx, max_ops < (1 << 20) ? max_ops : (1 << 20), &rc))) {
        ft_ctx_free(ctx);
        return rc;
    }
    if ((rc = set_costs(ctx, &a))) {
        ft_profiler_free(prof);
        ft_ctx_free(ctx);
        return rc;
    }
    warn_cpu_half(&a);
    /* big presets take a while to initialise and time: say so on a terminal (only there:
     * logs of scripted benches stay as they were) */
    int tty = isatty(2);
    double t_load = now_ms();
    if (tty) fprintf(stderr, "bench: loading %s ...", a.model);
    m = load(ctx, &a, &rc);
    if (tty)
        fprintf(stderr, m ? "\r\033[Kbench: loaded in %.1f s; timing %d forwards after %d warm-up ..."
                          : "\r\033[K", (now_ms() - t_load) / 1e3, a.iters, a.warmup);
    if (!m) {
        ft_profiler_free(prof);
        ft_ctx_free(ctx);
        return rc;
    }
    /* the architecture's typical inputs at this size (random ids, images, audio) */
    ft_host_tensor in[8];
    int n_in = 0;
    void *owned = NULL;
    double *raw = (double *)calloc((size_t)a.iters * 2, sizeof(double)), *times = raw ? raw + a.iters : NULL;
    if (!raw || ft_model_example_inputs(m, a.batch, a.seq, in, &n_in, &owned) != FT_OK) {
        rc = fail("%s", raw ? ft_ctx_errmsg(ctx) : "out of host memory");
        goto done;
    }
    double first = 0, mean = 0, profiled_ms = NAN;
    rc = time_forwards(ctx, m, in, n_in, a.warmup, a.iters, a.paper, raw, &first, &mean);
    if (tty) fputs("\r\033[K", stderr);
    if (rc) goto done;
    memcpy(times, raw, (size_t)a.iters * sizeof(double));
    ft_cli_sort(times, a.iters);
    double median = ft_stats_median(times, a.iters);
    ft_mem_stats ms = ft_ctx_mem_stats(ctx);
    prov pv;
    prov_fill(&pv, ctx, &a);
    char date[32];
    prov_date(date, sizeof date);
    const char *unit;
    long long length = input_length(in, n_in, &unit);
    printf("model: %s (%s), device %s, mode %s, dtype %s, batch %lld, length %lld (%s)\n", a.model,
           ft_model_arch(m), ft_device_name(a.device), ft_mode_name(a.mode), ft_dtype_name(a.dtype),
           a.batch, length, unit);
    printf("device: %s\n", ft_ctx_device_label(ctx));
    prov_print(stdout, &pv, date);
    if (prof && ft_profiler_cupti_note(prof)[0]) printf("profiler: %s\n", ft_profiler_cupti_note(prof));
    if (a.paper)
        printf("latency ms: mean %.4f over %d back-to-back forwards (paper protocol; first call %.3f, "
               "%d warmup)\n", mean, a.iters, first, a.warmup);
    else
        printf("latency ms: median %.4f  mean %.4f  min %.4f  p90 %.4f  (first call %.3f, %d iters, %d warmup)\n",
               median, mean, times[0], times[(int)(a.iters * 0.9)], first, a.iters, a.warmup);
    char warn[512];
    if (!a.paper && ft_cli_noise_warning(median, times[(int)(a.iters * 0.9)], warn, sizeof warn))
        fprintf(stderr, "ftengine: warning: %s\n", warn);
    printf("memory: peak %zu B, reserved %zu B, system allocations %llu\n", ms.peak_allocated,
           ms.reserved, (unsigned long long)ms.n_sys_alloc);
    if (a.device == FT_DEVICE_CPU) /* host memory the CPU kernels keep outside the allocator */
        printf("memory: cpu scratch %zu B, eager pack cache %zu B\n", ms.cpu_scratch, ms.cpu_pack_cache);
    if (a.op_cost_us >= 0) printf("emulated framework cost: %.1f us per eager op\n", a.op_cost_us);
    if (a.step_cost_us >= 0)
        printf("emulated interpreter cost: %.1f us per graph-mode step (static mode does not pay it)\n",
               a.step_cost_us);
    if (a.device == FT_DEVICE_CUDA) {
        ft_gemm_stats gs = ft_ctx_gemm_stats(ctx);
        if (gs.autotune)
            printf("gemm: %llu shapes; %llu algorithms chosen by timing (%llu other than cuBLASLt's first "
                   "guess), %llu taken from earlier timing\n",
                   (unsigned long long)gs.plans, (unsigned long long)gs.tuned, (unsigned long long)gs.changed,
                   (unsigned long long)gs.reused);
        else
            printf("gemm: %llu shapes; cuBLASLt's first guess for each (FT_GEMM_AUTOTUNE=0)\n",
                   (unsigned long long)gs.plans);
    }
    print_graph_stats(stdout, "graph: ", m);
    if (prof) {
        /* a second pass of the same iterations, profiled */
        if (ft_profiler_start(prof) != FT_OK) {
            rc = fail("profiler: %s", ft_ctx_errmsg(ctx));
            goto done;
        }
        double s = now_ms();
        for (int i = 0; i < a.iters; i++)
            if (ft_model_forward(m, in, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) {
                rc = fail("%s", ft_ctx_errmsg(ctx));
                goto done;
            }
        if (ft_profiler_stop(prof) != FT_OK) {
            rc = fail("profiler: %s", ft_ctx_errmsg(ctx));
            goto done;
        }
        double traced = (now_ms() - s) / a.iters, plain = mean;
        profiled_ms = traced;
        char cost[256];
        ft_cli_observer_cost(traced, plain, cost, sizeof cost);
        printf("profile: profiled pass %.4f ms per iteration, unprofiled mean %.4f ms: %s\n", traced,
               plain, cost);
        if (a.phases) {
            print_phases(stdout, prof, a.iters);
            print_split(stdout, prof, a.iters, mean);
        }
        rc = write_profile(ctx, &a, prof, trace_tmp, csv_tmp);
    }
    if (!rc && a.json) {
        bench_result br = {&pv, date, length, mean, first, profiled_ms, times, raw, ms};
        rc = bench_json(&a, json_tmp, ctx, m, prof, &br);
    }
    if (!rc) rc = outfiles_commit();
done:
    free(owned);
    free(raw);
    ft_profiler_free(prof);
    ft_model_free(m);
    ft_ctx_free(ctx);
    return rc;
}

/* ---- plan ---- */

static void shape_text(const ft_plan_step_info *s, char *buf, size_t n) {
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < s->ndim && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? "," : "", (long long)s->shape[d]);
    if (len < n) snprintf(buf + len, n - len, "]");
}

static void sources_text(const ft_plan_step_info *s, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < s->n_src && len < n; k++) {
        const char *sep = k ? "," : "";
        if (s->src_step[k] == FT_PLAN_SRC_INPUT) len += (size_t)snprintf(buf + len, n - len, "%sin", sep);
        else if (s->src_step[k] == FT_PLAN_SRC_CONST) len += (size_t)snprintf(buf + len, n - len, "%sw", sep);
        else len += (size_t)snprintf(buf + len, n - len, "%s%d", sep, s->src_step[k]);
    }
}

/* One forward on the architecture's example inputs, then its plan step by step. */
static int cmd_plan(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.model) return usage("plan needs a MODEL");
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--mode") && !strcmp(argv[i + 1], "eager"))
            return usage("eager mode has no plan: --mode graph or static");
    if (a.mode == FT_MODE_EAGER) a.mode = FT_MODE_GRAPH; /* the default */
    ft_ctx *ctx = make_ctx(&a, a.device, &rc);
    if (!ctx) return rc;
    ft_model *m = load(ctx, &a, &rc);
    ft_host_tensor in[8];
    int n_in = 0;
    void *owned = NULL;
    if (!m) goto done;
    if (ft_model_example_inputs(m, a.batch, a.seq, in, &n_in, &owned) != FT_OK ||
        ft_model_forward(m, in, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) {
        rc = fail("%s", ft_ctx_errmsg(ctx));
        goto done;
    }
    int n = ft_model_plan_length(m);
    const char *unit;
    long long len = input_length(in, n_in, &unit);
    printf("plan: %s (%s), device %s, mode %s, dtype %s, batch %lld, length %lld (%s): %d steps\n",
           a.model, ft_model_arch(m), ft_device_name(a.device), ft_mode_name(a.mode),
           ft_dtype_name(a.dtype), a.batch, len, unit, n);
    printf("%5s  %-14s %-20s %-5s %12s %12s %-3s %-14s %5s  %s\n", "step", "op", "output", "dtype",
           "arena offset", "bytes", "out", "sources", "nodes", "fused in");
    for (int i = 0; i < n; i++) {
        ft_plan_step_info s;
        if (ft_model_plan_step(m, i, &s) != FT_OK) {
            rc = fail("plan step %d could not be read", i);
            goto done;
        }
        char sh[96], src[64], nodes[16];
        shape_text(&s, sh, sizeof sh);
        sources_text(&s, src, sizeof src);
        if (s.graph_nodes > 0) snprintf(nodes, sizeof nodes, "%d", s.graph_nodes);
        else snprintf(nodes, sizeof nodes, "%s", s.graph_nodes < 0 ? "?" : "-");
        printf("%5d  %-14s %-20s %-5s %12zu %12zu %-3s %-14s %5s  %s\n", i, s.op, sh,
               ft_dtype_name(s.dtype), s.arena_offset, s.bytes, s.is_output ? "yes" : "", src, nodes,
               s.detail);
    }
    printf("sources: step numbers, in = a model input, w = a weight or plan-time constant\n");
    print_graph_stats(stdout, "graph: ", m);
done:
    free(owned);
    ft_model_free(m);
    ft_ctx_free(ctx);
    return rc;
}

/* ---- version ---- */

static int cmd_version(void) {
    ft_build_info b = ft_build_info_get();
    printf("ftengine %s\n", b.version);
    printf("commit: %s\n", prov_commit());
    if (b.cuda)
        printf("cuda: yes (%d.%d)\n", b.cuda_version / 1000, (b.cuda_version % 1000) / 10);
    else
        printf("cuda: no\n");
    printf("cublaslt: %s\n", b.cublaslt ? "yes" : "no");
    printf("cupti: %s\n", b.cupti ? "yes" : "no");
    printf("nvtx: %s\n", b.nvtx ? "yes" : "no");
    printf("cuda devices: %d\n", ft_cuda_device_count());
    return 0;
}

static int command(int argc, char **argv) {
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h"))
        return ft_cli_help(argc - 2, argv + 2);
    if (!strcmp(cmd, "--version")) cmd = "version";
    /* the command's own options only, --flag=value split, --help answered (tools/help.c) */
    int n = argc - 2;
    char **v = argv + 2;
    int rc = ft_cli_prepare(cmd, &n, &v);
    if (rc) return rc < 0 ? 0 : rc;
    if (!strcmp(cmd, "run")) rc = cmd_run(n, v);
    else if (!strcmp(cmd, "info")) rc = cmd_info(n, v);
    else if (!strcmp(cmd, "bench")) rc = cmd_bench(n, v);
    else if (!strcmp(cmd, "sweep")) rc = cmd_sweep(n, v);
    else if (!strcmp(cmd, "plan")) rc = cmd_plan(n, v);
    else rc = cmd_version();
    free(v);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage(NULL);
    outfiles_begin();
    int rc = command(argc, argv);
    outfiles_abort(); /* a command that did not commit its outputs leaves none */
    /* the report on stdout is an output too: a full disk or a closed pipe is an error */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno;
        if (!rc) rc = fail("writing the standard output: %s", strerror(e ? e : EIO));
    }
    return rc;
}

/*
 * ftengine.c - the command-line tool.
 *
 *   ftengine run MODEL --inputs IN.safetensors --out OUT.safetensors
 *                [--device cpu|cuda] [--mode eager|graph|static]
 *                [--dtype fp32|fp16|bf16] [--hidden-states] [--profile]
 *   ftengine info MODEL [--batch B] [--seq S]
 *   ftengine bench MODEL [--device D] [--mode M] [--dtype T] [--batch B] [--seq S]
 *                [--warmup N] [--iters N]
 *   ftengine version
 *
 * MODEL is a directory with config.json and model.safetensors, or a preset name.
 * Contract: exit 0 on success; any error exits 1 with one line
 * "ftengine: error: <what and where>" on stderr and leaves no output file behind
 * (outputs are written to a temporary name and renamed on success); usage errors
 * exit 2.
 */
#include "ftengine.h"
#include "../engine/safetensors.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *usage_text =
    "usage:\n"
    "  ftengine run MODEL --inputs IN.safetensors --out OUT.safetensors\n"
    "               [--device cpu|cuda] [--mode eager|graph|static] [--dtype fp32|fp16|bf16]\n"
    "               [--hidden-states] [--profile]\n"
    "  ftengine info MODEL [--batch B] [--seq S]\n"
    "  ftengine bench MODEL [--device cpu|cuda] [--mode eager|graph|static] [--dtype fp32|fp16|bf16]\n"
    "               [--batch B] [--seq S] [--warmup N] [--iters N]\n"
    "  ftengine version\n"
    "MODEL is a directory holding config.json and model.safetensors, or a preset name\n"
    "(ftengine info --presets lists them).\n";

static int usage(const char *fmt, ...) {
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "ftengine: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    fputs(usage_text, stderr);
    return 2;
}

static int fail(const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* exactly one line */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fprintf(stderr, "ftengine: error: %s\n", msg);
    return 1;
}

typedef struct args {
    const char *model, *inputs, *out;
    ft_device device;
    ft_mode mode;
    ft_dtype dtype;
    int hidden_states, profile, list_presets;
    long long batch, seq;
    int warmup, iters;
} args;

/* Parses options shared by the commands; returns 0, or the usage exit code. */
static int parse(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->device = FT_DEVICE_CPU;
    a->mode = FT_MODE_EAGER;
    a->dtype = FT_DTYPE_F32;
    a->batch = 1;
    a->seq = 0;
    a->warmup = 5;
    a->iters = 20;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() \
    do { if (!v) return usage("option %s needs a value", o); i++; } while (0)
        if (!strcmp(o, "--inputs")) { NEED_VALUE(); a->inputs = v; }
        else if (!strcmp(o, "--out")) { NEED_VALUE(); a->out = v; }
        else if (!strcmp(o, "--device")) {
            NEED_VALUE();
            if (!strcmp(v, "cpu")) a->device = FT_DEVICE_CPU;
            else if (!strcmp(v, "cuda")) a->device = FT_DEVICE_CUDA;
            else return usage("unknown device '%s' (cpu, cuda)", v);
        } else if (!strcmp(o, "--mode")) {
            NEED_VALUE();
            if (ft_mode_parse(v, &a->mode)) return usage("unknown mode '%s' (eager, graph, static)", v);
        } else if (!strcmp(o, "--dtype")) {
            NEED_VALUE();
            if (ft_dtype_parse(v, &a->dtype)) return usage("unknown dtype '%s' (fp32, fp16, bf16)", v);
        } else if (!strcmp(o, "--batch") || !strcmp(o, "--seq") || !strcmp(o, "--warmup") ||
                   !strcmp(o, "--iters")) {
            NEED_VALUE();
            char *end = NULL;
            long long n = strtoll(v, &end, 10);
            if (!*v || *end || n < (strcmp(o, "--warmup") ? 1 : 0) || n > 1000000000LL)
                return usage("%s needs a positive integer, got '%s'", o, v);
            if (!strcmp(o, "--batch")) a->batch = n;
            else if (!strcmp(o, "--seq")) a->seq = n;
            else if (!strcmp(o, "--warmup")) a->warmup = (int)n;
            else a->iters = (int)n;
        } else if (!strcmp(o, "--hidden-states")) a->hidden_states = 1;
        else if (!strcmp(o, "--profile")) a->profile = 1;
        else if (!strcmp(o, "--presets")) a->list_presets = 1;
        else if (o[0] == '-' && o[1]) return usage("unknown option '%s'", o);
        else if (!a->model) a->model = o;
        else return usage("unexpected argument '%s'", o);
#undef NEED_VALUE
    }
    return 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Creates the context; the error (no CUDA backend, no device) becomes one line. */
static ft_ctx *make_ctx(ft_device dev, int *rc) {
    char err[512] = "";
    ft_ctx_options o = ft_ctx_options_default();
    o.device = dev;
    o.errbuf = err;
    o.errbuf_size = sizeof err;
    ft_ctx *ctx = NULL;
    ft_status st = ft_ctx_create_ex(&o, &ctx);
    if (st != FT_OK) {
        *rc = fail("cannot use device %s: %s", ft_device_name(dev), err[0] ? err : ft_status_str(st));
        return NULL;
    }
    return ctx;
}

static ft_model *load(ft_ctx *ctx, const args *a, int *rc) {
    ft_model_options opt = ft_model_options_default();
    opt.mode = a->mode;
    opt.dtype = a->dtype;
    opt.output_hidden_states = a->hidden_states;
    ft_model *m = NULL;
    if (ft_model_load(ctx, a->model, &opt, &m) != FT_OK) {
        *rc = fail("%s", ft_ctx_errmsg(ctx));
        return NULL;
    }
    return m;
}

/* ---- run ---- */

static int write_outputs(ft_ctx *ctx, ft_model *m, const char *path) {
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
    if (!rc) {
        /* write beside the target, rename on success: no partial file is ever left */
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
        if (ft_st_write(ctx, tmp, ts, n) != FT_OK) {
            rc = fail("%s", ft_ctx_errmsg(ctx));
            remove(tmp);
        } else if (rename(tmp, path) != 0) {
            rc = fail("cannot write %s", path);
            remove(tmp);
        }
    }
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
    fprintf(f, "%skernels per forward %d (eager %d), graph launches %d; arena %zu B (peak-live bound "
               "%zu B, no reuse %zu B), constants %zu B, scratch %zu B\n",
            prefix, g.kernels_per_forward, g.traced_kernels, g.graph_launches, g.arena_bytes,
            g.peak_live_bytes, g.sum_intermediate_bytes, g.const_bytes, g.scratch_bytes);
    fprintf(f, "%spasses: dce %d, folded %d, qkv %d, epilogues %d, ln+residual %d, attention %d, "
               "eltwise %d, nonorm %d, conv+bn %d; plans cached %d (hits %llu, misses %llu)\n",
            prefix, g.dce_removed, g.folded, g.qkv_merged, g.epilogues, g.ln_residual,
            g.attention_fused, g.eltwise_fused, g.nonorm_folded, g.conv_bn_folded, g.plans_cached,
            (unsigned long long)g.plan_hits, (unsigned long long)g.plan_misses);
}

static int cmd_run(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.model) return usage("run needs a MODEL");
    if (!a.inputs) return usage("run needs --inputs IN.safetensors");
    if (!a.out) return usage("run needs --out OUT.safetensors");
    ft_ctx *ctx = make_ctx(a.device, &rc);
    if (!ctx) return rc;
    ft_model *m = NULL;
    ft_st_file *in = NULL;
    ft_host_tensor hin[8];
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
    double t0 = now_ms();
    if (ft_model_forward(m, hin, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) {
        rc = fail("%s", ft_ctx_errmsg(ctx));
        goto done;
    }
    double t1 = now_ms();
    rc = write_outputs(ctx, m, a.out);
    if (!rc && a.profile) {
        fprintf(stderr, "profile: %s %s %s on %s: forward %.3f ms (first call, includes planning)\n",
                ft_model_arch(m), ft_mode_name(a.mode), ft_dtype_name(a.dtype),
                ft_device_name(a.device), t1 - t0);
        ft_mem_stats ms = ft_ctx_mem_stats(ctx);
        fprintf(stderr, "profile: memory allocated %zu B, reserved %zu B, peak %zu B, %llu system allocations\n",
                ms.allocated, ms.reserved, ms.peak_allocated, (unsigned long long)ms.n_sys_alloc);
        print_graph_stats(stderr, "profile: ", m);
    }
done:
    ft_model_free(m);
    ft_st_close(in);
    ft_ctx_free(ctx);
    return rc;
}

/* ---- info ---- */

static int cmd_info(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (a.list_presets) {
        for (int i = 0; ft_preset_name(i); i++) printf("%s\n", ft_preset_name(i));
        return 0;
    }
    if (!a.model) return usage("info needs a MODEL");
    ft_ctx *ctx = make_ctx(FT_DEVICE_CPU, &rc);
    if (!ctx) return rc;
    ft_model *m = load(ctx, &a, &rc);
    if (m) {
        int64_t macs = 0;
        if (ft_model_macs(m, a.batch, a.seq, &macs) != FT_OK) {
            rc = fail("%s", ft_ctx_errmsg(ctx));
        } else {
            printf("architecture: %s\n", ft_model_arch(m));
            printf("parameters: %lld\n", (long long)ft_model_param_count(m));
            if (a.seq)
                printf("macs: %lld (batch %lld, length %lld)\n", (long long)macs, a.batch, a.seq);
            else
                printf("macs: %lld (batch %lld, default length)\n", (long long)macs, a.batch);
        }
    }
    ft_model_free(m);
    ft_ctx_free(ctx);
    return rc;
}

/* ---- bench ---- */

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int cmd_bench(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.model) return usage("bench needs a MODEL");
    ft_ctx *ctx = make_ctx(a.device, &rc);
    if (!ctx) return rc;
    ft_model *m = load(ctx, &a, &rc);
    if (!m) {
        ft_ctx_free(ctx);
        return rc;
    }
    /* the architecture's typical inputs at this size (random ids, images, audio) */
    ft_host_tensor in[8];
    int n_in = 0;
    void *owned = NULL;
    double *times = (double *)calloc((size_t)a.iters, sizeof(double));
    if (!times || ft_model_example_inputs(m, a.batch, a.seq, in, &n_in, &owned) != FT_OK) {
        rc = fail("%s", times ? ft_ctx_errmsg(ctx) : "out of host memory");
        goto done;
    }
    double t0 = now_ms();
    if (ft_model_forward(m, in, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) {
        rc = fail("%s", ft_ctx_errmsg(ctx));
        goto done;
    }
    double first = now_ms() - t0;
    for (int i = 0; i < a.warmup; i++)
        if (ft_model_forward(m, in, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) {
            rc = fail("%s", ft_ctx_errmsg(ctx));
            goto done;
        }
    for (int i = 0; i < a.iters; i++) {
        double s = now_ms();
        if (ft_model_forward(m, in, n_in) != FT_OK || ft_ctx_sync(ctx) != FT_OK) {
            rc = fail("%s", ft_ctx_errmsg(ctx));
            goto done;
        }
        times[i] = now_ms() - s;
    }
    qsort(times, (size_t)a.iters, sizeof(double), cmp_double);
    double sum = 0;
    for (int i = 0; i < a.iters; i++) sum += times[i];
    ft_mem_stats ms = ft_ctx_mem_stats(ctx);
    printf("model: %s (%s), device %s, mode %s, dtype %s, batch %lld, length %lld\n", a.model,
           ft_model_arch(m), ft_device_name(a.device), ft_mode_name(a.mode), ft_dtype_name(a.dtype),
           a.batch, (long long)in[0].shape[n_in && in[0].ndim > 1 ? 1 : 0]);
    printf("latency ms: median %.4f  mean %.4f  min %.4f  p90 %.4f  (first call %.3f, %d iters, %d warmup)\n",
           times[a.iters / 2], sum / a.iters, times[0], times[(int)(a.iters * 0.9)], first, a.iters,
           a.warmup);
    printf("memory: peak %zu B, reserved %zu B, system allocations %llu\n", ms.peak_allocated,
           ms.reserved, (unsigned long long)ms.n_sys_alloc);
    print_graph_stats(stdout, "graph: ", m);
done:
    free(owned);
    free(times);
    ft_model_free(m);
    ft_ctx_free(ctx);
    return rc;
}

/* ---- version ---- */

static int cmd_version(void) {
    ft_build_info b = ft_build_info_get();
    printf("ftengine %s\n", b.version);
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

int main(int argc, char **argv) {
    if (argc < 2) return usage(NULL);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 2, argv + 2);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 2, argv + 2);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) return cmd_version();
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage_text, stdout);
        return 0;
    }
    return usage("unknown command '%s'", cmd);
}

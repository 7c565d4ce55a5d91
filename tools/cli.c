/*
 * cli.c - the parts of the ftengine tool its commands share (see cli.h).
 */
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *ft_cli_usage_text =
    "usage:\n"
    "  ftengine run MODEL --inputs IN.safetensors --out OUT.safetensors\n"
    "               [--device cpu|cuda] [--mode eager|graph|static] [--dtype fp32|fp16|bf16]\n"
    "               [--hidden-states] [--profile] [--trace FILE.json] [--csv FILE.csv] [--phases]\n"
    "  ftengine info MODEL [--batch B] [--seq S]\n"
    "  ftengine bench MODEL [--device cpu|cuda] [--mode eager|graph|static] [--dtype fp32|fp16|bf16]\n"
    "               [--batch B] [--seq S] [--warmup N] [--iters N] [--protocol paper|sync]\n"
    "               [--op-cost-us N] [--mem-limit BYTES[K|M|G]] [--trace FILE.json] [--csv FILE.csv] [--phases]\n"
    "               [--threads N]   (run, bench, sweep: CPU threads of the context)\n"
    "  ftengine sweep MODEL [--device cpu|cuda] [--dtype fp32|fp16|bf16] [--modes eager,graph,static]\n"
    "               [--batches 1,2,4,...] [--seq S] [--protocol paper|sync] [--warmup N] [--iters N]\n"
    "               [--overhead] [--op-cost-us N] [--mem-limit BYTES[K|M|G]] [--csv FILE.csv]\n"
    "  ftengine plan MODEL [--device cpu|cuda] [--mode graph|static] [--dtype fp32|fp16|bf16]\n"
    "               [--batch B] [--seq S]\n"
    "  ftengine version\n"
    "MODEL is a directory holding config.json and model.safetensors, or a preset name\n"
    "(ftengine info --presets lists them).\n";

int usage(const char *fmt, ...) {
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "ftengine: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    fputs(ft_cli_usage_text, stderr);
    return 2;
}

int fail(const char *fmt, ...) {
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


/* Parses options shared by the commands; returns 0, or the usage exit code. */
int parse(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->device = FT_DEVICE_CPU;
    a->mode = FT_MODE_EAGER;
    a->dtype = FT_DTYPE_F32;
    a->batch = 1;
    a->seq = 0;
    a->warmup = 5;
    a->iters = 20;
    a->op_cost_us = -1;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() \
    do { if (!v) return usage("option %s needs a value", o); i++; } while (0)
        if (!strcmp(o, "--inputs")) { NEED_VALUE(); a->inputs = v; }
        else if (!strcmp(o, "--out")) { NEED_VALUE(); a->out = v; }
        else if (!strcmp(o, "--trace")) { NEED_VALUE(); a->trace = v; }
        else if (!strcmp(o, "--csv")) { NEED_VALUE(); a->csv = v; }
        else if (!strcmp(o, "--phases")) a->phases = 1;
        else if (!strcmp(o, "--overhead")) a->overhead = 1;
        else if (!strcmp(o, "--mem-limit")) { /* bytes, or with a K/M/G suffix (powers of 1024) */
            NEED_VALUE();
            char *end = NULL;
            double n = strtod(v, &end);
            double mul = !*end ? 1 : !strcmp(end, "K") ? 1024.0 : !strcmp(end, "M") ? 1048576.0
                       : !strcmp(end, "G") ? 1073741824.0 : -1;
            if (!*v || mul < 0 || !(n * mul >= 1 && n * mul < 1e18))
                return usage("--mem-limit needs a size in bytes (suffix K, M or G allowed), got '%s'", v);
            a->mem_limit = (size_t)(n * mul);
        }
        else if (!strcmp(o, "--modes")) { NEED_VALUE(); a->modes = v; }
        else if (!strcmp(o, "--batches")) { NEED_VALUE(); a->batches = v; }
        else if (!strcmp(o, "--protocol")) {
            NEED_VALUE();
            if (!strcmp(v, "paper")) a->paper = 1;
            else if (!strcmp(v, "sync")) a->paper = 0;
            else return usage("unknown protocol '%s' (paper, sync)", v);
        }
        else if (!strcmp(o, "--op-cost-us")) {
            NEED_VALUE();
            char *end = NULL;
            double us = strtod(v, &end);
            if (!*v || *end || !(us >= 0 && us <= 1e6))
                return usage("--op-cost-us needs a number of microseconds in [0, 1e6], got '%s'", v);
            a->op_cost_us = us;
        }
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
                   !strcmp(o, "--iters") || !strcmp(o, "--threads")) {
            NEED_VALUE();
            char *end = NULL;
            long long n = strtoll(v, &end, 10);
            if (!*v || *end || n < (strcmp(o, "--warmup") ? 1 : 0) || n > 1000000000LL)
                return usage("%s needs a positive integer, got '%s'", o, v);
            if (!strcmp(o, "--threads") && n > 4096)
                return usage("--threads needs a number of CPU threads in [1, 4096], got '%s'", v);
            if (!strcmp(o, "--batch")) a->batch = n;
            else if (!strcmp(o, "--threads")) a->threads = (int)n;
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

double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Creates the context; the error (no CUDA backend, no device) becomes one line. */
ft_ctx *make_ctx(const args *a, ft_device dev, int *rc) {
    char err[512] = "";
    ft_ctx_options o = ft_ctx_options_default();
    o.device = dev;
    o.mem_limit = a->mem_limit;
    o.cpu_threads = a->threads; /* 0: OMP_NUM_THREADS or the core count */
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

ft_model *load(ft_ctx *ctx, const args *a, int *rc) {
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

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int forward(ft_ctx *ctx, ft_model *m, const ft_host_tensor *in, int n_in, int sync) {
    if (ft_model_forward(m, in, n_in) != FT_OK || (sync && ft_ctx_sync(ctx) != FT_OK))
        return fail("%s", ft_ctx_errmsg(ctx));
    return 0;
}

int time_forwards(ft_ctx *ctx, ft_model *m, const ft_host_tensor *in, int n_in, int warmup,
                  int iters, int paper, double *times, double *first_ms, double *mean_ms) {
    double t0 = now_ms();
    int rc = forward(ctx, m, in, n_in, 1);
    *first_ms = now_ms() - t0;
    for (int i = 0; !rc && i < warmup; i++) rc = forward(ctx, m, in, n_in, 1);
    if (rc) return rc;
    if (paper) {
        double s = now_ms();
        for (int i = 0; !rc && i < iters; i++) rc = forward(ctx, m, in, n_in, 0);
        if (!rc && ft_ctx_sync(ctx) != FT_OK) rc = fail("%s", ft_ctx_errmsg(ctx));
        *mean_ms = (now_ms() - s) / iters;
        return rc;
    }
    double sum = 0;
    for (int i = 0; !rc && i < iters; i++) {
        double s = now_ms();
        rc = forward(ctx, m, in, n_in, 1);
        times[i] = now_ms() - s;
        sum += times[i];
    }
    qsort(times, (size_t)iters, sizeof(double), cmp_double);
    *mean_ms = sum / iters;
    return rc;
}

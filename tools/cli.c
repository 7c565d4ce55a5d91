/*
 * cli.c - the parts of the ftengine tool its commands share (see cli.h).
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int usage(const char *fmt, ...) {
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "ftengine: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    ft_cli_print_usage_line(stderr); /* the command's own line (tools/help.c) */
    return 2;
}

int cli_errors_quiet;
char cli_last_error[2048];

int fail(const char *fmt, ...) {
    char *msg = cli_last_error;
    size_t msg_size = sizeof cli_last_error;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msg_size, fmt, ap);
    va_end(ap);
    /* exactly one line */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    if (!cli_errors_quiet) fprintf(stderr, "ftengine: error: %s\n", msg);
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
    a->step_cost_us = -1;
    a->seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() \
    do { if (!v) return usage("option %s needs a value", o); \
         if (!*v) return usage("option %s needs a value, got an empty one", o); \
         i++; } while (0)
        if (!strcmp(o, "--inputs")) { NEED_VALUE(); a->inputs = v; }
        else if (!strcmp(o, "--out")) { NEED_VALUE(); a->out = v; }
        else if (!strcmp(o, "--trace")) { NEED_VALUE(); a->trace = v; }
        else if (!strcmp(o, "--csv")) { NEED_VALUE(); a->csv = v; }
        else if (!strcmp(o, "--ops-csv")) { NEED_VALUE(); a->ops_csv = v; }
        else if (!strcmp(o, "--json")) { NEED_VALUE(); a->json = v; }
        else if (!strcmp(o, "--resume")) a->resume = 1;
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
        else if (!strcmp(o, "--op-cost-us") || !strcmp(o, "--step-cost-us")) {
            /* one number of microseconds, or (sweep) a comma-separated list of them */
            NEED_VALUE();
            int n = 0;
            double first = -1;
            for (const char *p = v;; n++) {
                char *end = NULL;
                double us = strtod(p, &end);
                if (end == p || (*end && *end != ',') || !(us >= 0 && us <= 1e6))
                    return usage("%s needs a number of microseconds in [0, 1e6] (sweep: a comma-separated "
                                 "list), got '%s'", o, v);
                if (!n) first = us;
                if (!*end) break;
                p = end + 1;
            }
            if (o[2] == 'o') { a->op_cost_us = first; a->op_costs = v; a->n_op_costs = n + 1; }
            else { a->step_cost_us = first; a->step_costs = v; a->n_step_costs = n + 1; }
        }
        else if (!strcmp(o, "--models")) { NEED_VALUE(); a->models = v; }
        else if (!strcmp(o, "--seed")) {
            NEED_VALUE();
            char *end = NULL;
            unsigned long long n = strtoull(v, &end, 10);
            if (!*v || *end || *v == '-') return usage("--seed needs a non-negative integer, got '%s'", v);
            a->seed = n;
            a->seed_given = 1;
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
                   !strcmp(o, "--iters") || !strcmp(o, "--threads") || !strcmp(o, "--rounds")) {
            NEED_VALUE();
            char *end = NULL;
            long long n = strtoll(v, &end, 10);
            if (!*v || *end || n < (strcmp(o, "--warmup") ? 1 : 0) || n > 1000000000LL)
                return usage("%s needs an integer in [%d, 1000000000], got '%s'", o,
                             strcmp(o, "--warmup") ? 1 : 0, v);
            if (!strcmp(o, "--batch")) a->batch = n;
            else if (!strcmp(o, "--seq")) a->seq = n;
            else if (!strcmp(o, "--warmup")) a->warmup = (int)n;
            else if (!strcmp(o, "--threads")) {
                if (n > 4096) return usage("--threads needs an integer in [1, 4096], got '%s'", v);
                a->threads = (int)n;
            } else if (!strcmp(o, "--rounds")) {
                if (n > 1000) return usage("--rounds needs an integer in [1, 1000], got '%s'", v);
                a->rounds = (int)n;
            }
            else a->iters = (int)n;
        } else if (!strcmp(o, "--hidden-states")) a->hidden_states = 1;
        else if (!strcmp(o, "--profile")) a->profile = 1;
        else if (!strcmp(o, "--presets")) a->list_presets = 1;
        else if (o[0] == '-' && o[1]) return usage("unknown option '%s'", o);
        else if (!a->model && !*o) return usage("the MODEL argument is empty");
        else if (!a->model) a->model = o;
        else return usage("unexpected argument '%s'", o);
#undef NEED_VALUE
    }
    return 0;
}

/* Walks the elements of a list value: calls fn(element, index) for each; -1 at the
 * first bad one (usage printed). */
static int list_walk(const char *opt, const char *value, int max, int (*fn)(const char *, int, void *),
                     void *user) {
    if (!value || !*value) return usage("%s needs a comma-separated list, got an empty one", opt), -1;
    int n = 0;
    for (const char *p = value;; n++) {
        size_t len = strcspn(p, ",");
        if (!len)
            return usage("%s '%s': element %d is empty (write the list without stray commas)", opt, value, n + 1),
                   -1;
        if (n == max) return usage("%s '%s': more than %d elements", opt, value, max), -1;
        char el[64];
        if (len >= sizeof el) return usage("%s: element '%.*s...' is too long", opt, 40, p), -1;
        memcpy(el, p, len);
        el[len] = 0;
        if (fn(el, n, user)) return -1;
        if (!p[len]) return n + 1;
        p += len + 1;
    }
}

typedef struct list_out {
    const char *opt;
    ft_mode *modes;
    long long *ints, lo, hi;
} list_out;

static int one_mode(const char *el, int i, void *user) {
    list_out *o = (list_out *)user;
    if (ft_mode_parse(el, &o->modes[i]) != FT_OK)
        return usage("%s: unknown mode '%s' (eager, graph, static)", o->opt, el);
    for (int j = 0; j < i; j++)
        if (o->modes[j] == o->modes[i]) return usage("%s: mode '%s' is given twice", o->opt, el);
    return 0;
}

static int one_int(const char *el, int i, void *user) {
    list_out *o = (list_out *)user;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(el, &end, 10);
    if (!isdigit((unsigned char)el[0]) || *end || errno || v < o->lo || v > o->hi)
        return usage("%s: '%s' is not an integer in [%lld, %lld]", o->opt, el, o->lo, o->hi);
    for (int j = 0; j < i; j++)
        if (o->ints[j] == v) return usage("%s: %lld is given twice", o->opt, v);
    o->ints[i] = v;
    return 0;
}

int ft_cli_list_modes(const char *opt, const char *value, int max, ft_mode *out) {
    list_out o = {opt, out, NULL, 0, 0};
    return list_walk(opt, value, max, one_mode, &o);
}

int ft_cli_list_ints(const char *opt, const char *value, int max, long long lo, long long hi, long long *out) {
    list_out o = {opt, NULL, out, lo, hi};
    return list_walk(opt, value, max, one_int, &o);
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
    o.cpu_threads = a->threads;
    o.errbuf = err;
    o.errbuf_size = sizeof err;
    ft_ctx *ctx = NULL;
    ft_status st = ft_ctx_create_ex(&o, &ctx);
    if (st == FT_ERR_INVALID_ARG && err[0]) { /* a bad FT_* environment variable (engine/env.c) */
        *rc = fail("%s", err);
        return NULL;
    }
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
    opt.weights = a->weights;
    ft_model *m = NULL;
    if (ft_model_load(ctx, a->model, &opt, &m) != FT_OK) {
        char near[1100];
        struct stat st;
        /* a suggestion only for a name that does not exist: not for a dangling link, a
         * folder it may not read, a file that is there but is no model */
        if (lstat(a->model, &st) != 0 && (errno == ENOENT || errno == ENOTDIR) &&
            ft_cli_suggest_model(a->model, near, sizeof near))
            *rc = fail("%s: did you mean %s?", ft_ctx_errmsg(ctx), near);
        else
            *rc = fail("%s", ft_ctx_errmsg(ctx));
        return NULL;
    }
    return m;
}

long long input_length(const ft_host_tensor *in, int n_in, const char **unit) {
    *unit = "length";
    if (n_in < 1 || in[0].ndim < 2) return 0;
    /* [batch, tokens], [batch, samples], [batch, channels, height, width]: the last dim */
    const char *n = in[0].name ? in[0].name : "";
    *unit = !strcmp(n, "pixel_values") ? "image side" : !strcmp(n, "input_values") ? "samples" : "tokens";
    return (long long)in[0].shape[in[0].ndim - 1];
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

void ft_cli_sort(double *v, int n) {
    if (n > 1) qsort(v, (size_t)n, sizeof(double), cmp_double);
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
    /* the timed iterations, and only they, in a profiler capture range (CUDA:
     * cudaProfilerStart/Stop for nsys --capture-range=cudaProfilerApi); a refusal
     * changes nothing measured, so it is ignored */
    (void)ft_ctx_profiler_range(ctx, 1);
    if (paper) {
        double s = now_ms();
        for (int i = 0; !rc && i < iters; i++) rc = forward(ctx, m, in, n_in, 0);
        if (!rc && ft_ctx_sync(ctx) != FT_OK) rc = fail("%s", ft_ctx_errmsg(ctx));
        *mean_ms = (now_ms() - s) / iters;
        (void)ft_ctx_profiler_range(ctx, 0);
        return rc;
    }
    double sum = 0;
    for (int i = 0; !rc && i < iters; i++) {
        double s = now_ms();
        rc = forward(ctx, m, in, n_in, 1);
        times[i] = now_ms() - s;
        sum += times[i];
    }
    (void)ft_ctx_profiler_range(ctx, 0);
    *mean_ms = sum / iters;
    return rc;
}

/* ---- how much a measurement can be trusted (bench) ---- */

int ft_cli_noise_warning(double median_ms, double p90_ms, char *buf, size_t size) {
    if (!(median_ms > 0) || !(p90_ms > FT_CLI_NOISY_P90 * median_ms)) return 0;
    snprintf(buf, size, "p90 %.4f ms is %.1fx the median %.4f ms: the host is noisy (other load, or "
                        "OpenMP threads competing for cores); try --threads 1 or OMP_NUM_THREADS=1, "
                        "or a quieter host",
             p90_ms, p90_ms / median_ms, median_ms);
    return 1;
}

void ft_cli_observer_cost(double profiled_ms, double plain_ms, char *buf, size_t size) {
    double d = profiled_ms - plain_ms;
    if (d >= 0 && plain_ms > 0)
        snprintf(buf, size, "observer cost %.4f ms (%.1f%%)", d, 100.0 * d / plain_ms);
    else /* noise larger than the profiler's own cost: a percentage would mislead */
        snprintf(buf, size, "observer cost not measurable: the profiled pass ran %.4f ms faster, "
                            "run-to-run noise exceeds the profiler's cost on this host", -d);
}

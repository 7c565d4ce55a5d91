/*
 * ctx.c - contexts, errors and build information.
 *
 * Errors are sticky: the first error recorded in a context stays until
 * ft_ctx_clear_error(), and ops called meanwhile return NULL without running,
 * so model code reads as straight-line code checked once at the end.
 */
#include "ft_internal.h"
#include "cuda_backend.h"
#include "nvtx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

const char *ft_status_str(ft_status s) {
    static const char *const names[] = {
        "FT_OK", "FT_ERR_INVALID_ARG", "FT_ERR_SHAPE", "FT_ERR_OOM", "FT_ERR_IO",
        "FT_ERR_FORMAT", "FT_ERR_UNSUPPORTED", "FT_ERR_CUDA", "FT_ERR_CUBLAS",
        "FT_ERR_NOT_FOUND", "FT_ERR_PLAN_MISMATCH", "FT_ERR_CAPTURE", "FT_ERR_INTERNAL", "FT_ERR_BUSY"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "FT_ERR_UNKNOWN";
}

const char *ft_device_name(ft_device d) { return d == FT_DEVICE_CUDA ? "cuda" : "cpu"; }

const char *ft_mode_name(ft_mode m) {
    switch (m) {
    case FT_MODE_EAGER: return "eager";
    case FT_MODE_GRAPH: return "graph";
    case FT_MODE_STATIC: return "static";
    }
    return "?";
}

ft_status ft_mode_parse(const char *s, ft_mode *out) {
    if (!s || !out) return FT_ERR_INVALID_ARG;
    if (!strcmp(s, "eager")) *out = FT_MODE_EAGER;
    else if (!strcmp(s, "graph")) *out = FT_MODE_GRAPH;
    else if (!strcmp(s, "static")) *out = FT_MODE_STATIC;
    else return FT_ERR_INVALID_ARG;
    return FT_OK;
}

ft_status ft_set_errorv(ft_ctx *ctx, ft_status st, const char *fmt, va_list ap) {
    if (!ctx || st == FT_OK) return st;
    if (ctx->status == FT_OK) {
        vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
        ctx->status = st;
    }
    return st;
}

ft_status ft_set_error(ft_ctx *ctx, ft_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ft_set_errorv(ctx, st, fmt, ap);
    va_end(ap);
    return st;
}

void ft_error_prefix(ft_ctx *ctx, const char *fmt, ...) {
    if (!ctx || ctx->status == FT_OK) return;
    char buf[2 * sizeof ctx->errmsg];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof buf - 3) n = (int)sizeof buf - 3;
    buf[n++] = ':';
    buf[n++] = ' ';
    size_t rest = sizeof buf - (size_t)n - 1, len = strlen(ctx->errmsg);
    memcpy(buf + n, ctx->errmsg, len < rest ? len : rest);
    buf[n + (len < rest ? len : rest)] = 0;
    memcpy(ctx->errmsg, buf, sizeof ctx->errmsg - 1);
    ctx->errmsg[sizeof ctx->errmsg - 1] = 0;
}

ft_ctx_options ft_ctx_options_default(void) {
    ft_ctx_options o;
    memset(&o, 0, sizeof o);
    o.device = FT_DEVICE_CPU;
    return o;
}

/* ---- public API guards (ft_internal.h) ---- */

ft_status ft_api_null(ft_ctx *ctx, const char *fn, const char *arg) {
    /* "ft_reshape: argument shape is NULL"; a pending error stays (sticky errors: a
     * NULL tensor is what a failed op returned) */
    return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s: argument '%s' is NULL", fn, arg);
}

bool ft_tensor_of_ctx(ft_ctx *ctx, const ft_tensor *t, const char *fn, const char *arg) {
    if (!t->ctx || t->ctx == ctx) return true;
    ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s: tensor '%s' belongs to another context", fn, arg);
    return false;
}

/* The calling thread's identity (the address of its own variable) and the refusal it
 * got last, which only it sees. initial-exec: one instruction, not a TLS lookup call,
 * since an op of a forward enters the context on every call. */
static _Thread_local char tls_self __attribute__((tls_model("initial-exec")));
static _Thread_local const ft_ctx *tls_busy_ctx __attribute__((tls_model("initial-exec")));
static _Thread_local char tls_busy_msg[256];

ft_status ft_ctx_enter(ft_ctx *ctx, const char *fn) {
    void *me = &tls_self, *none = NULL;
    if (__atomic_load_n(&ctx->busy_owner, __ATOMIC_RELAXED) == me) { /* nested, same thread */
        ctx->busy_depth++;
        return FT_OK;
    }
    if (__atomic_compare_exchange_n(&ctx->busy_owner, &none, me, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        ctx->busy_depth = 1;
        if (tls_busy_ctx == ctx) tls_busy_ctx = NULL;
        return FT_OK;
    }
    tls_busy_ctx = ctx;
    snprintf(tls_busy_msg, sizeof tls_busy_msg,
             "%s: the context is in use by another thread (a context and its models and tensors "
             "must be used by one thread at a time)", fn);
    return FT_ERR_BUSY;
}

void ft_ctx_leave(ft_ctx *ctx) {
    if (--ctx->busy_depth == 0) __atomic_store_n(&ctx->busy_owner, NULL, __ATOMIC_RELEASE);
}

ft_status ft_ctx_create_ex(const ft_ctx_options *opt, ft_ctx **out) {
    if (!out) return FT_ERR_INVALID_ARG;
    *out = NULL;
    ft_ctx_options o = opt ? *opt : ft_ctx_options_default();
    if (o.errbuf && o.errbuf_size) o.errbuf[0] = 0;
    /* every FT_* knob holds a value its row accepts (engine/env.c), or no context */
    if (ft_env_check(o.errbuf, o.errbuf_size) != FT_OK) return FT_ERR_INVALID_ARG;
    if (o.device != FT_DEVICE_CPU && o.device != FT_DEVICE_CUDA) {
        if (o.errbuf && o.errbuf_size)
            snprintf(o.errbuf, o.errbuf_size, "ft_ctx_options: device %d is neither FT_DEVICE_CPU nor "
                     "FT_DEVICE_CUDA", (int)o.device);
        return FT_ERR_INVALID_ARG;
    }
    if (o.cpu_threads < 0 || o.cpu_threads > 4096 || o.device_index < 0) {
        if (o.errbuf && o.errbuf_size)
            snprintf(o.errbuf, o.errbuf_size, "ft_ctx_options: cpu_threads %d must be in [0, 4096] and "
                     "device_index %d not negative", o.cpu_threads, o.device_index);
        return FT_ERR_INVALID_ARG;
    }
    if (o.pdl < FT_OPT_OFF || o.pdl > FT_OPT_ON || o.gemm_autotune < FT_OPT_OFF ||
        o.gemm_autotune > FT_OPT_ON) {
        if (o.errbuf && o.errbuf_size)
            snprintf(o.errbuf, o.errbuf_size, "ft_ctx_options: pdl %d, gemm_autotune %d: each must be "
                     "FT_OPT_OFF (-1), FT_OPT_DEFAULT (0) or FT_OPT_ON (1)", o.pdl, o.gemm_autotune);
        return FT_ERR_INVALID_ARG;
    }
    ft_ctx *ctx = (ft_ctx *)calloc(1, sizeof *ctx);
    if (!ctx) return FT_ERR_OOM;
    ctx->device = o.device;
    ctx->device_index = o.device_index;
    ctx->opt_pdl = o.pdl;
    ctx->opt_gemm_autotune = o.gemm_autotune;
    /* the context's own team size for every CPU parallel region it runs (set at each
     * kernel entry, kernels/cpu/cpu_kernels.h): never the calling thread's OpenMP
     * default, which omp_set_num_threads elsewhere could change */
#ifdef _OPENMP
    ctx->cpu_threads = o.cpu_threads > 0 ? o.cpu_threads : omp_get_max_threads();
#else
    ctx->cpu_threads = 1;
#endif
    ctx->sync_debug = ft_env_flag(FT_ENV_SYNC_DEBUG, false);
    ctx->extra_op_cost_us = ft_env_num(FT_ENV_OP_HOST_COST_US, 0);
    ctx->extra_step_cost_us = ft_env_num(FT_ENV_STEP_HOST_COST_US, 0);
    ft_nvtx_ctx_init(ctx); /* after the team size is known: it names the workers */
    if (o.device == FT_DEVICE_CPU) {
        ft_allocator_init_cpu(&ctx->alloc);
    } else {
#ifdef FT_WITH_CUDA
        ft_status st = ft_cuda_ctx_init(ctx);
        if (st != FT_OK) {
            if (o.errbuf && o.errbuf_size) snprintf(o.errbuf, o.errbuf_size, "%s", ctx->errmsg);
            ft_cuda_ctx_destroy(ctx);
            free(ctx);
            return st;
        }
#else
        if (o.errbuf && o.errbuf_size)
            snprintf(o.errbuf, o.errbuf_size, "this build of ftengine has no CUDA backend");
        free(ctx);
        return FT_ERR_UNSUPPORTED;
#endif
    }
    ctx->alloc.limit = o.mem_limit;
    *out = ctx;
    return FT_OK;
}

ft_status ft_ctx_create(ft_device device, ft_ctx **out) {
    ft_ctx_options o = ft_ctx_options_default();
    o.device = device;
    return ft_ctx_create_ex(&o, out);
}

void ft_ctx_free(ft_ctx *ctx) {
    /* not under another thread's call: leaking it beats freeing what runs */
    if (!ctx || ft_ctx_enter(ctx, __func__) != FT_OK) return;
    ft_arena_release_to(ctx, 0);
    for (ft_arena_chunk *c = ctx->arena.head; c;) {
        ft_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
#ifdef FT_WITH_CUDA
    if (ctx->device == FT_DEVICE_CUDA) ft_cuda_sync(ctx);
#endif
    ft_cpu_ctx_release(ctx);
    ft_allocator_destroy(&ctx->alloc);
#ifdef FT_WITH_CUDA
    if (ctx->device == FT_DEVICE_CUDA) ft_cuda_ctx_destroy(ctx);
#endif
    free(ctx);
}

ft_status ft_ctx_set_op_host_cost(ft_ctx *ctx, double us) {
    if (!ctx) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(ctx, __func__);
    if (st != FT_OK) return st;
    if (!(us >= 0 && us <= 1e6)) /* also refuses NaN */
        st = ft_set_error(ctx, FT_ERR_INVALID_ARG, "op host cost %g us: must be in [0, 1e6]", us);
    else
        ctx->extra_op_cost_us = us;
    ft_ctx_leave(ctx);
    return st;
}

ft_status ft_ctx_set_step_host_cost(ft_ctx *ctx, double us) {
    if (!ctx) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(ctx, __func__);
    if (st != FT_OK) return st;
    if (!(us >= 0 && us <= 1e6)) /* also refuses NaN */
        st = ft_set_error(ctx, FT_ERR_INVALID_ARG, "step host cost %g us: must be in [0, 1e6]", us);
    else
        ctx->extra_step_cost_us = us;
    ft_ctx_leave(ctx);
    return st;
}

ft_device ft_ctx_device(const ft_ctx *ctx) { return ctx ? ctx->device : FT_DEVICE_CPU; }

/* The CPU's model name from /proc/cpuinfo, or "" where there is none. */
static void cpu_model(char *buf, size_t size) {
    buf[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !c) continue;
        c += 1 + strspn(c + 1, " \t");
        c[strcspn(c, "\n")] = 0;
        snprintf(buf, size, "%s", c);
        break;
    }
    fclose(f);
}

const char *ft_ctx_device_label(ft_ctx *ctx) {
    if (!ctx) return "no context";
    if (ctx->device_label[0]) return ctx->device_label;
#ifdef FT_WITH_CUDA
    if (ctx->device == FT_DEVICE_CUDA) {
        ft_cuda_device_label(ctx, ctx->device_label, sizeof ctx->device_label);
        return ctx->device_label;
    }
#endif
    char model[96];
    cpu_model(model, sizeof model);
    snprintf(ctx->device_label, sizeof ctx->device_label, "%s%s%d OpenMP threads", model,
             model[0] ? ", " : "", ctx->cpu_threads);
    return ctx->device_label;
}
ft_status ft_ctx_status(const ft_ctx *ctx) {
    if (!ctx) return FT_ERR_INVALID_ARG;
    return tls_busy_ctx == ctx ? FT_ERR_BUSY : ctx->status;
}
const char *ft_ctx_errmsg(const ft_ctx *ctx) {
    if (!ctx) return "no context";
    return tls_busy_ctx == ctx ? tls_busy_msg : ctx->errmsg;
}

void ft_ctx_clear_error(ft_ctx *ctx) {
    if (!ctx) return;
    if (tls_busy_ctx == ctx) tls_busy_ctx = NULL; /* this thread's refusal */
    if (ft_ctx_enter(ctx, __func__) != FT_OK) return; /* the error belongs to the thread at work */
    ctx->status = FT_OK;
    ctx->errmsg[0] = 0;
    ft_ctx_leave(ctx);
}

ft_status ft_ctx_profiler_range(ft_ctx *ctx, int on) {
    if (!ctx) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(ctx, __func__);
    if (st != FT_OK) return st;
#ifdef FT_WITH_CUDA
    if (ctx->device == FT_DEVICE_CUDA) st = ft_cuda_profiler_range(ctx, on);
#endif
    (void)on;
    ft_ctx_leave(ctx);
    return st;
}

ft_status ft_ctx_sync(ft_ctx *ctx) {
    if (!ctx) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(ctx, __func__);
    if (st != FT_OK) return st;
#ifdef FT_WITH_CUDA
    if (ctx->device == FT_DEVICE_CUDA) st = ft_cuda_sync(ctx);
#endif
    ft_ctx_leave(ctx);
    return st;
}

void ft_ctx_reset(ft_ctx *ctx) {
    if (!ctx || ft_ctx_enter(ctx, __func__) != FT_OK) return; /* never under a working thread */
    ft_arena_release_to(ctx, 0);
    ft_ctx_leave(ctx);
}

ft_mem_stats ft_ctx_mem_stats(const ft_ctx *ctx) {
    ft_mem_stats s;
    memset(&s, 0, sizeof s);
    if (!ctx) return s;
    s = ctx->alloc.stats;
    s.cpu_scratch = ft_cpu_scratch_bytes(ctx);
    s.cpu_pack_cache = ft_cpu_pack_cache_bytes(ctx);
    return s;
}

ft_gemm_stats ft_ctx_gemm_stats(const ft_ctx *ctx) {
    ft_gemm_stats s;
    memset(&s, 0, sizeof s);
#ifdef FT_WITH_CUDA
    if (ctx && ctx->device == FT_DEVICE_CUDA) ft_cuda_gemm_stats(ctx, &s);
#else
    (void)ctx;
#endif
    return s;
}

ft_build_info ft_build_info_get(void) {
    ft_build_info b;
    memset(&b, 0, sizeof b);
    b.version = FT_VERSION_STRING;
#ifdef FT_WITH_CUDA
    b.cuda = 1;
    b.cuda_version = ft_cuda_build_version();
    b.cublaslt = 1;
#endif
#ifdef FT_WITH_CUPTI
    b.cupti = 1;
#endif
#ifdef FT_WITH_NVTX
    b.nvtx = 1;
#endif
    return b;
}

int ft_cuda_device_count(void) {
#ifdef FT_WITH_CUDA
    return ft_cuda_devices();
#else
    return 0;
#endif
}

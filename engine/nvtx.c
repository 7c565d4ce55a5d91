/*
 * nvtx.c - ftengine's NVTX ranges (see nvtx.h for the tree a tool sees).
 *
 * Cost model: with no tool attached nothing here runs at all (ctx->nvtx is 0,
 * the dispatcher's hooks stay NULL), so the per-op cost is the dispatcher's
 * own. With a tool, a push is one nvtxDomainRangePushEx with a prebuilt
 * attribute: the name is a handle registered once (or a constant string when
 * the tool registers none), so no string is built or copied per op.
 * NVTX v3 is header-only: the first NVTX call loads the tool named by
 * NVTX_INJECTION64_PATH (nvtxDetail/nvtxInit.h); we make that call once, in
 * ft_nvtx_wanted, and look at what the tool installed.
 */
#include "ft_internal.h"
#include "nvtx.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef FT_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#ifdef FT_WITH_CUDA
#include <nvtx3/nvToolsExtCudaRt.h>
#endif
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static const char *const kind_names[FT_NVTX_KIND_COUNT] = {
    "forward", "op", "phase", "plan step", "plan build", "capture", "replay"};
/* ARGB; phases get shades of their own so the five read apart when stacked */
static const uint32_t kind_colors[FT_NVTX_KIND_COUNT] = {
    0xFF2E5EAA, 0xFF3FA34D, 0xFF9E9E9E, 0xFF8E44AD, 0xFFE08E0B, 0xFFC0392B, 0xFF16A085};
static const char *const phase_names[FT_PHASE_COUNT] = {"check", "infer", "alloc", "select", "launch"};
static const uint32_t phase_colors[FT_PHASE_COUNT] = {0xFFB0BEC5, 0xFF90A4AE, 0xFFFFB74D,
                                                      0xFFBA68C8, 0xFF4FC3F7};
static const char *const fixed_names[FT_NVTX_FIXED_COUNT] = {
    "trace", "passes", "plan", "warmup", "capture", "instantiate", "replay"};
static const ft_nvtx_kind fixed_kinds[FT_NVTX_FIXED_COUNT] = {
    FT_NVTX_BUILD, FT_NVTX_BUILD, FT_NVTX_BUILD, FT_NVTX_CAPTURE, FT_NVTX_CAPTURE, FT_NVTX_CAPTURE,
    FT_NVTX_REPLAY};

/* Categories: 1.. per kind, 16.. per phase ("phase/check", ...). */
#define CAT_KIND(k) ((uint32_t)(k) + 1u)
#define CAT_PHASE(p) ((uint32_t)(p) + 16u)

static struct {
    pthread_once_t once;
    int on;
    nvtxDomainHandle_t dom;
    nvtxEventAttributes_t op_attr[FT_OP_COUNT];       /* payload filled per push */
    nvtxEventAttributes_t phase_attr[FT_PHASE_COUNT];
    ft_nvtx_name fixed[FT_NVTX_FIXED_COUNT];
    /* names registered since: text -> handle, for the process's lifetime */
    pthread_mutex_t mu;
    struct name_entry { char *text; nvtxStringHandle_t h; } *names;
    int n_names, cap_names;
} G = {PTHREAD_ONCE_INIT, 0, NULL, {{0}}, {{0}}, {{0}}, PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

/* Beyond this many distinct names (plan steps, forward shapes) new ones are not
 * kept: they are pushed as the op's name instead (see ft_nvtx_name_of). */
#define MAX_NAMES 8192

static void set_message(nvtxEventAttributes_t *a, const ft_nvtx_name *n) {
    if (n->handle) {
        a->messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a->message.registered = (nvtxStringHandle_t)n->handle;
    } else {
        a->messageType = NVTX_MESSAGE_TYPE_ASCII;
        a->message.ascii = n->text;
    }
}

static ft_nvtx_name make_name(const char *text) {
    ft_nvtx_name n = {NULL, text};
    n.handle = (void *)nvtxDomainRegisterStringA(G.dom, text);
    return n;
}

static void attr_init(nvtxEventAttributes_t *a, uint32_t color, uint32_t category) {
    memset(a, 0, sizeof *a);
    a->version = NVTX_VERSION;
    a->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a->category = category;
    a->colorType = NVTX_COLOR_ARGB;
    a->color = color;
}

/* Whether the tool installed a domain range push: the NVTX init code sets every
 * entry point the tool did not take to NULL (nvtxInitOnce), and all of them to
 * NULL when no tool loaded or its initialisation returned 0. */
static int tool_listens(void) {
    return NVTX_VERSIONED_IDENTIFIER(nvtxGlobals).nvtxDomainRangePushEx_impl_fnptr != NULL;
}

static void decide(void) {
    if (ft_env_str(FT_ENV_NVTX)) {
        G.on = ft_env_flag(FT_ENV_NVTX, false);
    } else {
        nvtxInitialize(NULL); /* loads and initialises the tool, if one is named */
        G.on = tool_listens();
    }
    if (!G.on) return;
    G.dom = nvtxDomainCreateA("ftengine");
    for (int k = 0; k < FT_NVTX_KIND_COUNT; k++)
        nvtxDomainNameCategoryA(G.dom, CAT_KIND(k), kind_names[k]);
    char buf[32];
    for (int p = 0; p < FT_PHASE_COUNT; p++) {
        snprintf(buf, sizeof buf, "phase/%s", phase_names[p]);
        nvtxDomainNameCategoryA(G.dom, CAT_PHASE(p), buf);
        attr_init(&G.phase_attr[p], phase_colors[p], CAT_PHASE(p));
        ft_nvtx_name n = make_name(phase_names[p]);
        set_message(&G.phase_attr[p], &n);
    }
    for (int o = 0; o < FT_OP_COUNT; o++) {
        attr_init(&G.op_attr[o], kind_colors[FT_NVTX_OP], CAT_KIND(FT_NVTX_OP));
        ft_nvtx_name n = make_name(ft_op_name((ft_op)o));
        set_message(&G.op_attr[o], &n);
        G.op_attr[o].payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    }
    for (int f = 0; f < FT_NVTX_FIXED_COUNT; f++) G.fixed[f] = make_name(fixed_names[f]);
}

int ft_nvtx_wanted(void) {
    pthread_once(&G.once, decide);
    return G.on;
}

ft_nvtx_name ft_nvtx_name_of(const char *s) {
    ft_nvtx_name n = {NULL, "?"};
    if (!ft_nvtx_wanted() || !s) return n;
    pthread_mutex_lock(&G.mu);
    for (int i = G.n_names - 1; i >= 0; i--)
        if (!strcmp(G.names[i].text, s)) {
            n.handle = (void *)G.names[i].h;
            n.text = G.names[i].text;
            pthread_mutex_unlock(&G.mu);
            return n;
        }
    if (G.n_names == G.cap_names && G.cap_names < MAX_NAMES) {
        int cap = G.cap_names ? 2 * G.cap_names : 64;
        struct name_entry *e = (struct name_entry *)realloc(G.names, (size_t)cap * sizeof *e);
        if (e) {
            G.names = e;
            G.cap_names = cap;
        }
    }
    char *copy = G.n_names < G.cap_names ? strdup(s) : NULL;
    if (copy) {
        n = make_name(copy);
        G.names[G.n_names].text = copy;
        G.names[G.n_names].h = (nvtxStringHandle_t)n.handle;
        G.n_names++;
    }
    pthread_mutex_unlock(&G.mu);
    return n;
}

void ft_nvtx_push(const ft_nvtx_name *name, ft_nvtx_kind kind, int64_t payload) {
    nvtxEventAttributes_t a;
    attr_init(&a, kind_colors[kind], CAT_KIND(kind));
    set_message(&a, name);
    if (payload >= 0) {
        a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
        a.payload.ullValue = (uint64_t)payload;
    }
    nvtxDomainRangePushEx(G.dom, &a);
}

void ft_nvtx_push_fixed(ft_nvtx_fixed which, int64_t payload) {
    ft_nvtx_push(&G.fixed[which], fixed_kinds[which], payload);
}

void ft_nvtx_pop(void) { nvtxDomainRangePop(G.dom); }

void ft_nvtx_forward_push(ft_ctx *ctx, const char *model, const char *mode, int ndim,
                          const int64_t *shape) {
    char buf[160];
    size_t n = (size_t)snprintf(buf, sizeof buf, "forward %s %s ", model, mode);
    for (int d = 0; d < ndim && n < sizeof buf; d++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%lld", d ? "x" : "", (long long)shape[d]);
    if (ndim <= 0 && n < sizeof buf) snprintf(buf + n, sizeof buf - n, "-");
    ft_nvtx_name nm = ft_nvtx_name_of(buf);
    ctx->nvtx_seq = 0;
    ft_nvtx_push(&nm, FT_NVTX_FORWARD, (int64_t)ctx->nvtx_forwards++);
}

/* ---- the dispatcher's hooks (user = the context) ---- */

/* Ops that get no range of their own: those recorded while tracing (the trace
 * range covers them), those of a plan run (its steps have ranges), and whole-plan
 * pseudo ops (FT_OP_NONE: the executor pushes replay / warmup itself). The same
 * answer at an op's begin and end, so pushes and pops pair up. */
static int quiet(const ft_ctx *ctx, const ft_tensor *node) {
    return ctx->exec == FT_EXEC_TRACE || ctx->nvtx_quiet || (unsigned)node->op >= FT_OP_COUNT ||
           node->op == FT_OP_NONE;
}

static void op_begin(void *user, const ft_tensor *node) {
    ft_ctx *ctx = (ft_ctx *)user;
    if (quiet(ctx, node)) return;
    nvtxEventAttributes_t a = G.op_attr[node->op];
    a.payload.ullValue = (uint64_t)ctx->nvtx_seq++;
    nvtxDomainRangePushEx(G.dom, &a);
    ctx->nvtx_phase_open = 0;
}
static void phase_begin(void *user, ft_phase ph, const ft_tensor *node) {
    ft_ctx *ctx = (ft_ctx *)user;
    if (quiet(ctx, node)) return;
    nvtxDomainRangePushEx(G.dom, &G.phase_attr[ph]);
    ctx->nvtx_phase_open = 1;
}
static void phase_end(void *user, ft_phase ph, const ft_tensor *node) {
    ft_ctx *ctx = (ft_ctx *)user;
    (void)ph;
    if (quiet(ctx, node) || !ctx->nvtx_phase_open) return;
    nvtxDomainRangePop(G.dom);
    ctx->nvtx_phase_open = 0;
}
/* A failing op ends inside a phase (the dispatcher's fail() goes straight to
 * op_end): that phase is closed first, so the tool's stack stays balanced. */
static void op_end(void *user, const ft_tensor *node, ft_status st) {
    ft_ctx *ctx = (ft_ctx *)user;
    (void)st;
    if (quiet(ctx, node)) return;
    if (ctx->nvtx_phase_open) nvtxDomainRangePop(G.dom);
    ctx->nvtx_phase_open = 0;
    nvtxDomainRangePop(G.dom);
}

/* OpenMP's workers are the only threads ftengine's code runs on besides the
 * caller's (which is the user's to name): named per context, as the context may
 * have resized the team. */
static void name_omp_threads(int threads) {
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num();
        if (t > 0) {
            char nm[48];
            snprintf(nm, sizeof nm, "ftengine omp worker %d", t);
            nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), nm);
        }
    }
#endif
}

void ft_nvtx_ctx_init(ft_ctx *ctx) {
    ctx->nvtx = ft_nvtx_wanted();
    if (!ctx->nvtx) return;
    ctx->nvtx_hooks.op_begin = op_begin;
    ctx->nvtx_hooks.phase_begin = phase_begin;
    ctx->nvtx_hooks.phase_end = phase_end;
    ctx->nvtx_hooks.op_end = op_end;
    ctx->nvtx_hooks.user = ctx;
    ctx->hooks = &ctx->nvtx_hooks;
    if (ctx->device == FT_DEVICE_CPU) name_omp_threads(ctx->cpu_threads > 0 ? ctx->cpu_threads : 1);
}

void ft_nvtx_name_stream(void *stream, const char *name) {
#ifdef FT_WITH_CUDA
    if (ft_nvtx_wanted()) nvtxNameCudaStreamA((cudaStream_t)stream, name);
#else
    (void)stream;
    (void)name;
#endif
}

#else /* no NVTX headers at build time: nothing is ever pushed */

int ft_nvtx_wanted(void) { return 0; }
void ft_nvtx_ctx_init(ft_ctx *ctx) { ctx->nvtx = 0; }
ft_nvtx_name ft_nvtx_name_of(const char *s) {
    ft_nvtx_name n = {NULL, s ? s : "?"};
    return n;
}
void ft_nvtx_push(const ft_nvtx_name *name, ft_nvtx_kind kind, int64_t payload) {
    (void)name;
    (void)kind;
    (void)payload;
}
void ft_nvtx_push_fixed(ft_nvtx_fixed which, int64_t payload) {
    (void)which;
    (void)payload;
}
void ft_nvtx_pop(void) {}
void ft_nvtx_forward_push(ft_ctx *ctx, const char *model, const char *mode, int ndim,
                          const int64_t *shape) {
    (void)ctx;
    (void)model;
    (void)mode;
    (void)ndim;
    (void)shape;
}
void ft_nvtx_name_stream(void *stream, const char *name) {
    (void)stream;
    (void)name;
}
#endif

/*
 * cupti.c - the profiler's CUPTI layer: kernel, memcpy, memset and runtime-API
 * activity records, linked to the dispatcher's op records through external
 * correlation ids (see profiler.h for the interface, docs/instrumentation.md
 * for what is measured).
 *
 * Design choices (CUPTI's activity and callback APIs):
 * - One time domain: a timestamp callback returning ft_prof_now_ns() is
 *   registered before any activity kind is enabled.
 * - One CUPTI session per process, as CUPTI 13.0 needs it: the first
 *   profiler window subscribes and enables the activity kinds, and they stay
 *   on for the rest of the process; later windows only flush, drop what came
 *   between windows and collect again. Release notes: CUPTI before 13.1
 *   Update 1 gives cudaGraphLaunch calls and their kernels wrong correlation
 *   ids in every session after the first (so a re-attach per window would
 *   misattribute every replay of a later window), and 13.0 Update 1 fixes a
 *   deadlock when CONCURRENT_KERNEL is disabled; PyTorch measured a 10-20%
 *   slowdown of later work that stays until cuptiFinalize. Hence: nothing
 *   touches CUPTI before the first window (no probe subscription at profiler
 *   creation), and a process that opened a window must not time anything
 *   afterwards (bench, the GPU session: headline numbers in processes that
 *   never profile; docs/gpu_session.md). Never finalized (cuptiFinalize and
 *   graphs crashed before CUDA 12.6). On a CUPTI at or past the fix
 *   (cuptiGetVersion >= FT_CUPTI_GRAPH_CORR_FIXED), FT_CUPTI_SESSION=window
 *   restores the older attach-per-window behaviour (subscribe at start,
 *   unsubscribe at stop); below it that request is refused and said so.
 * - cuptiSubscribe first: if another CUPTI client (Nsight Systems/Compute,
 *   compute-sanitizer) is attached it fails, and the profiler goes on with
 *   its host timers only. Those tools set CUDA_INJECTION64_PATH, which a
 *   profiler checks when it is made (no CUPTI call), so a tool can say so in
 *   its header.
 * - API records only of the calls that launch or copy (launch, memcpy,
 *   memset, graph launch; runtime and driver), enabled per callback id, not
 *   the whole RUNTIME and DRIVER kinds: every other API call of the process
 *   stays untraced.
 * - Two locks: `life` serialises attach/detach (it is held across CUPTI
 *   calls); `mu` guards the buffer pool and the record store and is the only
 *   one CUPTI's buffer callbacks take, so a callback CUPTI makes from inside
 *   cuptiSubscribe / cuptiActivityEnable cannot deadlock on it.
 * - Buffers come from a pool allocated up front; when it is empty CUPTI gets
 *   NULL and counts the records it drops. Records are copied out of the
 *   buffers into a store sized by the profiler; a full store counts drops too.
 * - KERNEL (serializing) and GRAPH_TRACE (collapses graph kernels) are not
 *   enabled.
 * Unverified without a GPU: compiled and reviewed only (see the doc).
 */
#include "profiler.h"
#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ft_cupti_session_per_window_ok(uint32_t version) { return version >= FT_CUPTI_GRAPH_CORR_FIXED; }

#ifdef FT_WITH_CUPTI
#include <cupti.h>
#include <pthread.h>

#define BUF_BYTES ((size_t)4 << 20) /* Kineto's size; NVIDIA's samples use 8 MB */
#define POOL_PREFILL 4
#define POOL_MAX 32 /* 128 MB of buffers at most */
#define STR_BYTES ((size_t)1 << 20)
#define NAME_SLOTS 4096 /* interned kernel-name pointers (open addressing) */
#define CBID_SLOTS 1024 /* runtime callback ids with a cached name */

typedef struct ext_pair {
    uint32_t corr;
    uint32_t pad;
    uint64_t ext;
} ext_pair;

static struct {
    pthread_mutex_t life; /* attach / detach; never taken by CUPTI's callbacks */
    pthread_mutex_t mu;   /* pool and store; the buffer callbacks take it */
    int state;            /* 0 not set up, 1 set up, -1 unusable */
    int attached;         /* subscribed and enabled: the process's CUPTI session */
    int window;           /* a profiler window is open (collecting) */
    int per_window;       /* FT_CUPTI_SESSION=window honoured: detach at each window end */
    int sessions;         /* sessions this process opened (subscribe + enable) */
    uint32_t version;     /* cuptiGetVersion, read at the first window; 0 unknown */
    int registered;       /* buffer and timestamp callbacks registered (once) */
    int api_kinds;        /* API records by whole kinds (no per-API control here) */
    uint8_t rt_on[16], drv_on[32]; /* which of runtime_cbids / driver_cbids are on */
    char why[192];
    CUpti_SubscriberHandle sub;
    /* buffer pool */
    uint8_t *free_buf[POOL_MAX];
    int n_free, n_bufs;
    /* the store of the current or last window */
    int collecting;
    ft_gpu_rec *rec;
    size_t n_rec, cap_rec;
    ext_pair *ext;
    size_t n_ext, cap_ext;
    char *str;
    size_t n_str;
    const char *name_key[NAME_SLOTS];
    uint32_t name_off[NAME_SLOTS];
    uint32_t cbid_off[2][CBID_SLOTS]; /* runtime, driver; 0: not cached (offset 0 is "?") */
    uint64_t dropped, overhead_ns;
} g = {.life = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER};

static void set_msg(char *msg, size_t n, const char *fmt, const char *what, CUptiResult r) {
    const char *rs = NULL;
    if (cuptiGetResultString(r, &rs) != CUPTI_SUCCESS || !rs) rs = "unknown CUPTI error";
    if (msg && n) snprintf(msg, n, fmt, what, rs, (int)r);
}

static uint64_t CUPTIAPI timestamp_cb(void) { return ft_prof_now_ns(); }

/* The subscription only claims CUPTI (and detects other clients); no callback
 * domain is enabled, so this is never called. */
static void CUPTIAPI noop_cb(void *user, CUpti_CallbackDomain dom, CUpti_CallbackId id,
                             const void *data) {
    (void)user;
    (void)dom;
    (void)id;
    (void)data;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    uint8_t *b = NULL;
    pthread_mutex_lock(&g.mu);
    if (g.n_free > 0) {
        b = g.free_buf[--g.n_free];
    } else if (g.n_bufs < POOL_MAX) {
        /* the prefilled pool ran dry: grow it (rare; CUPTI's own thread mostly) */
        b = (uint8_t *)aligned_alloc(8, BUF_BYTES);
        if (b) g.n_bufs++;
    }
    pthread_mutex_unlock(&g.mu);
    *buffer = b; /* NULL: CUPTI drops records and counts them */
    *size = b ? BUF_BYTES : 0;
    *max_records = 0; /* as many as fit */
}

/* Copies a name into the string pool; offset 0 ("?") when the pool is full. */
static uint32_t pool_str(const char *s) {
    if (!s) return 0;
    size_t len = strlen(s) + 1;
    if (g.n_str + len > STR_BYTES) return 0;
    uint32_t off = (uint32_t)g.n_str;
    memcpy(g.str + off, s, len);
    g.n_str += len;
    return off;
}

/* Kernel names are CUPTI-owned strings shared by every record of a kernel:
 * intern by pointer so each is copied once. */
static uint32_t kernel_name(const char *s) {
    if (!s) return 0;
    size_t h = ((uintptr_t)s >> 3) * 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < NAME_SLOTS; i++) {
        size_t k = (h + i) & (NAME_SLOTS - 1);
        if (g.name_key[k] == s) return g.name_off[k];
        if (!g.name_key[k]) {
            g.name_key[k] = s;
            g.name_off[k] = pool_str(s);
            return g.name_off[k];
        }
    }
    return pool_str(s);
}

static uint32_t api_name(int driver, CUpti_CallbackId cbid) {
    if (cbid < CBID_SLOTS && g.cbid_off[driver][cbid]) return g.cbid_off[driver][cbid];
    const char *name = NULL;
    if (cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid,
                             &name) != CUPTI_SUCCESS)
        name = NULL;
    uint32_t off = pool_str(name ? name : driver ? "cuDriverCall" : "cudaRuntimeCall");
    if (cbid < CBID_SLOTS) g.cbid_off[driver][cbid] = off;
    return off;
}

static ft_gpu_rec *new_rec(ft_gpu_kind kind) {
    if (g.n_rec == g.cap_rec) {
        g.dropped++;
        return NULL;
    }
    ft_gpu_rec *r = &g.rec[g.n_rec++];
    memset(r, 0, sizeof *r);
    r->kind = (uint8_t)kind;
    r->op = -1;
    r->step = -1;
    return r;
}

/* Called with g.mu held. */
static void take_record(const CUpti_Activity *a) {
    ft_gpu_rec *r;
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)(const void *)a;
        if (!(r = new_rec(FT_GPU_KERNEL))) return;
        r->start = k->start;
        r->end = k->end;
        r->correlation = k->correlationId;
        r->stream = k->streamId;
        r->device = k->deviceId;
        r->graph_node = k->graphNodeId;
        r->name = kernel_name(k->name);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)(const void *)a;
        if (!(r = new_rec(FT_GPU_MEMCPY))) return;
        static const char *const kinds[] = {"memcpy", "memcpy HtoD", "memcpy DtoH", "memcpy HtoA",
                                            "memcpy AtoH", "memcpy AtoA", "memcpy AtoD",
                                            "memcpy DtoA", "memcpy DtoD", "memcpy HtoH",
                                            "memcpy PtoP"};
        const char *kn = m->copyKind < sizeof kinds / sizeof kinds[0] ? kinds[m->copyKind] : "memcpy";
        r->start = m->start;
        r->end = m->end;
        r->bytes = m->bytes;
        r->correlation = m->correlationId;
        r->stream = m->streamId;
        r->device = m->deviceId;
        r->graph_node = m->graphNodeId;
        r->name = kernel_name(kn); /* static strings: interned by pointer too */
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)(const void *)a;
        if (!(r = new_rec(FT_GPU_MEMSET))) return;
        static const char *const memset_name = "memset";
        r->start = m->start;
        r->end = m->end;
        r->bytes = m->bytes;
        r->correlation = m->correlationId;
        r->stream = m->streamId;
        r->device = m->deviceId;
        r->graph_node = m->graphNodeId;
        r->name = kernel_name(memset_name);
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *api = (const CUpti_ActivityAPI *)(const void *)a;
        if (!(r = new_rec(FT_GPU_RUNTIME))) return;
        r->start = api->start;
        r->end = api->end;
        r->correlation = api->correlationId;
        r->stream = api->threadId; /* the OS tid (cuptiSetThreadIdType SYSTEM) */
        r->name = api_name(a->kind == CUPTI_ACTIVITY_KIND_DRIVER, api->cbid);
        break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *e =
            (const CUpti_ActivityExternalCorrelation *)(const void *)a;
        if (e->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) return;
        if (g.n_ext == g.cap_ext) {
            g.dropped++;
            return;
        }
        g.ext[g.n_ext].corr = e->correlationId;
        g.ext[g.n_ext].pad = 0;
        g.ext[g.n_ext].ext = e->externalId;
        g.n_ext++;
        break;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        const CUpti_ActivityOverhead3 *o = (const CUpti_ActivityOverhead3 *)(const void *)a;
        if (o->end > o->start) g.overhead_ns += o->end - o->start;
        break;
    }
    default:
        break;
    }
}

static void CUPTIAPI buffer_completed(CUcontext cctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)size;
    if (!buffer) return;
    pthread_mutex_lock(&g.mu);
    if (g.collecting) {
        CUpti_Activity *a = NULL;
        while (cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) take_record(a);
        size_t lost = 0;
        if (cuptiActivityGetNumDroppedRecords(cctx, stream, &lost) == CUPTI_SUCCESS)
            g.dropped += lost;
    }
    if (g.n_free < POOL_MAX) g.free_buf[g.n_free++] = buffer;
    else free(buffer);
    pthread_mutex_unlock(&g.mu);
}

/* Grows the store to hold `n` records (outside a window only). Called with g.mu held. */
static int reserve(size_t n) {
    if (n <= g.cap_rec) return 0;
    ft_gpu_rec *r = (ft_gpu_rec *)realloc(g.rec, n * sizeof *r);
    if (!r) return -1;
    g.rec = r;
    g.cap_rec = n;
    ext_pair *e = (ext_pair *)realloc(g.ext, n * sizeof *e);
    if (!e) return -1;
    g.ext = e;
    g.cap_ext = n;
    return 0;
}

/* Device work and its links; the API records come per callback id (below). */
static const CUpti_ActivityKind kinds_enabled[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD};

/* The API calls whose records carry the external correlation to device work:
 * the engine's launches and copies (runtime API), and the driver API's, as
 * cuBLAS(Lt) launches its kernels through the driver (without those every
 * GEMM kernel would be left unlinked, as flashinfer#2145 hit with
 * torch.matmul). Nothing else is recorded. */
static const CUpti_CallbackId runtime_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,       CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,   CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,        CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,       CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000};
static const CUpti_CallbackId driver_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,            CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,            CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,     CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,     CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,     CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,          CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async,         CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,         CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(N_OF(runtime_cbids) <= sizeof g.rt_on && N_OF(driver_cbids) <= sizeof g.drv_on,
               "room for the callback ids' flags");

/* Turns off what attach() turned on (the first n_kinds kinds, the API records)
 * and unsubscribes; errors here change nothing more. g.life held. */
static void detach(size_t n_kinds) {
    if (g.api_kinds) {
        (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
        (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
    } else {
        for (size_t i = 0; i < N_OF(driver_cbids); i++)
            if (g.drv_on[i]) (void)cuptiActivityEnableDriverApi(driver_cbids[i], 0);
        for (size_t i = 0; i < N_OF(runtime_cbids); i++)
            if (g.rt_on[i]) (void)cuptiActivityEnableRuntimeApi(runtime_cbids[i], 0);
    }
    memset(g.rt_on, 0, sizeof g.rt_on);
    memset(g.drv_on, 0, sizeof g.drv_on);
    g.api_kinds = 0;
    for (size_t i = 0; i < n_kinds; i++) (void)cuptiActivityDisable(kinds_enabled[i]);
    (void)cuptiUnsubscribe(g.sub);
    g.attached = 0;
}

/* API records of the launch/copy calls, per callback id; a callback id this
 * CUPTI refuses is left out. If it refuses all of them (a CUPTI without
 * per-API control), the whole RUNTIME and DRIVER kinds instead: more records,
 * but no GEMM left unlinked. g.life held. */
static CUptiResult enable_api_records(void) {
    size_t on = 0;
    for (size_t i = 0; i < N_OF(runtime_cbids); i++)
        on += (g.rt_on[i] = cuptiActivityEnableRuntimeApi(runtime_cbids[i], 1) == CUPTI_SUCCESS);
    for (size_t i = 0; i < N_OF(driver_cbids); i++)
        on += (g.drv_on[i] = cuptiActivityEnableDriverApi(driver_cbids[i], 1) == CUPTI_SUCCESS);
    if (on) return CUPTI_SUCCESS;
    CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (r == CUPTI_SUCCESS && (r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER)) != CUPTI_SUCCESS)
        (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
    g.api_kinds = r == CUPTI_SUCCESS;
    return r;
}

/* Whether this process may attach per window (FT_CUPTI_SESSION=window) rather
 * than keep its one session: only asked for, and only on a CUPTI whose later
 * sessions get graph launches right. g.life held. */
static void choose_session_policy(void) {
    const char *e = ft_env_str(FT_ENV_CUPTI_SESSION);
    uint32_t v = 0;
    if (cuptiGetVersion(&v) != CUPTI_SUCCESS) v = 0;
    g.version = v;
    g.per_window = e && !strcmp(e, "window") && ft_cupti_session_per_window_ok(v);
}

/* Subscribes and enables collection: the process's CUPTI session; g.life held,
 * g.mu not (CUPTI may ask for a buffer from inside these calls). Fills msg on
 * failure. */
static ft_status attach(char *msg, size_t msg_size) {
    CUptiResult r = cuptiSubscribe(&g.sub, (CUpti_CallbackFunc)noop_cb, NULL);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        if (msg && msg_size)
            snprintf(msg, msg_size, "another CUPTI client is attached (Nsight Systems/Compute, "
                                    "compute-sanitizer?): CUPTI off, host timers only");
        return FT_ERR_UNSUPPORTED;
    }
    if (r != CUPTI_SUCCESS) {
        set_msg(msg, msg_size, "%s failed: %s (%d): CUPTI off, host timers only", "cuptiSubscribe", r);
        return FT_ERR_UNSUPPORTED;
    }
    const char *step = "cuptiActivityRegisterCallbacks";
    if (!g.registered) {
        /* process-wide, once: the timestamp callback is never registered again */
        r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        if (r == CUPTI_SUCCESS) {
            step = "cuptiActivityRegisterTimestampCallback";
            r = cuptiActivityRegisterTimestampCallback(timestamp_cb);
        }
        if (r == CUPTI_SUCCESS) {
            step = "cuptiSetThreadIdType";
            r = cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
        }
        g.registered = r == CUPTI_SUCCESS;
    }
    size_t n_kinds = 0;
    for (; r == CUPTI_SUCCESS && n_kinds < N_OF(kinds_enabled); n_kinds++) {
        step = "cuptiActivityEnable";
        if ((r = cuptiActivityEnable(kinds_enabled[n_kinds])) != CUPTI_SUCCESS) break;
    }
    if (r == CUPTI_SUCCESS) {
        step = "cuptiActivityEnableRuntimeApi/DriverApi";
        r = enable_api_records();
    }
    g.attached = 1;
    g.sessions++;
    if (r != CUPTI_SUCCESS) {
        set_msg(msg, msg_size, "%s failed: %s (%d): CUPTI off, host timers only", step, r);
        detach(n_kinds);
        /* a second try would be a second session (CUPTI < 13.1 Update 1 mislabels
         * graph launches there): CUPTI stays off for the process */
        snprintf(g.why, sizeof g.why, "%s", msg && msg_size ? msg : "CUPTI could not be enabled");
        g.state = -1;
        return FT_ERR_UNSUPPORTED;
    }
    return FT_OK;
}

/* The one-time set-up of what does not touch CUPTI: names, buffers. g.life held. */
static int setup(void) {
    pthread_mutex_lock(&g.mu);
    g.str = (char *)malloc(STR_BYTES);
    if (g.str) {
        memcpy(g.str, "?", 2);
        g.n_str = 2;
        for (int i = 0; i < POOL_PREFILL; i++) {
            uint8_t *b = (uint8_t *)aligned_alloc(8, BUF_BYTES);
            if (!b) break;
            g.free_buf[g.n_free++] = b;
            g.n_bufs++;
        }
    }
    pthread_mutex_unlock(&g.mu);
    if (!g.str) {
        snprintf(g.why, sizeof g.why, "out of host memory for CUPTI names");
        return -1;
    }
    return 0;
}

ft_status ft_cupti_acquire(size_t max_records, char *msg, size_t msg_size) {
    pthread_mutex_lock(&g.life);
    if (g.state == 0) g.state = setup() == 0 ? 1 : -1;
    ft_status st = FT_OK;
    if (g.state < 0) {
        if (msg && msg_size) snprintf(msg, msg_size, "%s", g.why);
        st = FT_ERR_UNSUPPORTED;
    } else {
        pthread_mutex_lock(&g.mu);
        int bad = !g.collecting && reserve(max_records ? max_records : 1) != 0;
        pthread_mutex_unlock(&g.mu);
        if (bad) {
            if (msg && msg_size) snprintf(msg, msg_size, "out of host memory for %zu CUPTI records", max_records);
            st = FT_ERR_OOM;
        }
        /* No probe subscription here: under CUPTI 13.0 even a subscription
         * dropped at once may count as the process's first session, and this
         * runs before the timed loops. The tools that hold CUPTI (Nsight
         * Systems/Compute, compute-sanitizer) are injected through
         * CUDA_INJECTION64_PATH, which says so up front at no cost; anything
         * else shows at the first window, when cuptiSubscribe is refused. */
        const char *inj = getenv("CUDA_INJECTION64_PATH");
        if (st == FT_OK && inj && *inj) {
            if (msg && msg_size)
                snprintf(msg, msg_size, "another CUPTI client is attached (CUDA_INJECTION64_PATH=%.60s: Nsight "
                                        "Systems/Compute, compute-sanitizer?): CUPTI off, host timers only", inj);
            st = FT_ERR_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&g.life);
    return st;
}

static ft_status flush(const char *when, char *msg, size_t msg_size) {
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS) {
        set_msg(msg, msg_size, "cuptiActivityFlushAll (%s) failed: %s (%d)", when, r);
        return FT_ERR_CUDA;
    }
    return FT_OK;
}

ft_status ft_cupti_window_begin(char *msg, size_t msg_size) {
    pthread_mutex_lock(&g.life);
    ft_status st = FT_OK;
    if (g.state <= 0) {
        if (msg && msg_size) snprintf(msg, msg_size, "%s", g.state < 0 ? g.why : "CUPTI is not set up");
        st = FT_ERR_UNSUPPORTED;
    } else if (g.window) {
        if (msg && msg_size) snprintf(msg, msg_size, "another profiler window is open in this process");
        st = FT_ERR_INVALID_ARG;
    } else if (!g.attached) {
        if (!g.sessions) choose_session_policy();
        st = attach(msg, msg_size);
    }
    if (st == FT_OK) {
        /* anything delivered from before the window (or between windows: the
         * session stays enabled) is dropped, not counted */
        st = flush("window start", msg, msg_size);
        if (st != FT_OK && g.per_window) detach(N_OF(kinds_enabled));
    }
    if (st == FT_OK) {
        size_t lost = 0;
        (void)cuptiActivityGetNumDroppedRecords(NULL, 0, &lost); /* reset the counter */
        pthread_mutex_lock(&g.mu);
        g.n_rec = g.n_ext = 0;
        g.dropped = g.overhead_ns = 0;
        g.collecting = 1;
        pthread_mutex_unlock(&g.mu);
        g.window = 1;
    }
    pthread_mutex_unlock(&g.life);
    return st;
}

static int cmp_ext(const void *a, const void *b) {
    uint32_t x = ((const ext_pair *)a)->corr, y = ((const ext_pair *)b)->corr;
    return (x > y) - (x < y);
}

ft_status ft_cupti_window_end(char *msg, size_t msg_size) {
    pthread_mutex_lock(&g.life);
    if (!g.window) {
        pthread_mutex_unlock(&g.life);
        if (msg && msg_size) snprintf(msg, msg_size, "no CUPTI window is open");
        return FT_ERR_INVALID_ARG;
    }
    ft_status st = flush("window end", msg, msg_size);
    /* the session stays (see the top of this file) unless per-window attaching
     * was asked for on a CUPTI where that is safe */
    if (g.per_window) detach(N_OF(kinds_enabled));
    g.window = 0;
    pthread_mutex_lock(&g.mu);
    g.collecting = 0; /* what arrives from now on is dropped at its buffer's completion */
    pthread_mutex_unlock(&g.mu);
    pthread_mutex_unlock(&g.life);
    pthread_mutex_lock(&g.mu);
    /* join: runtime call, kernels, copies share a correlation id; the external
     * correlation record maps it to the op record index pushed by the profiler */
    qsort(g.ext, g.n_ext, sizeof *g.ext, cmp_ext);
    for (size_t i = 0; i < g.n_rec; i++) {
        size_t lo = 0, hi = g.n_ext;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (g.ext[mid].corr < g.rec[i].correlation) lo = mid + 1;
            else hi = mid;
        }
        if (lo < g.n_ext && g.ext[lo].corr == g.rec[i].correlation && g.ext[lo].ext > 0)
            g.rec[i].op = (int64_t)(g.ext[lo].ext - 1);
    }
    pthread_mutex_unlock(&g.mu);
    return st;
}

/* The external id is op + 1, so that 0 never names an op. */
int ft_cupti_push(int64_t op) {
    return cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                                  (uint64_t)op + 1) == CUPTI_SUCCESS ? 0 : -1;
}

int ft_cupti_pop(void) {
    uint64_t last = 0;
    return cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last) ==
                   CUPTI_SUCCESS ? 0 : -1;
}

const ft_gpu_rec *ft_cupti_records(size_t *n) {
    *n = g.collecting ? 0 : g.n_rec;
    return g.rec;
}

const char *ft_cupti_string(uint32_t offset) {
    return g.str && offset < g.n_str ? g.str + offset : "?";
}

uint64_t ft_cupti_dropped(void) { return g.dropped; }
uint64_t ft_cupti_overhead_ns(void) { return g.overhead_ns; }

void ft_cupti_session_info(ft_cupti_session *s) {
    pthread_mutex_lock(&g.life);
    s->sessions = g.sessions;
    s->attached = g.attached;
    s->per_window = g.per_window;
    s->version = g.version;
    pthread_mutex_unlock(&g.life);
}

#else /* !FT_WITH_CUPTI */

static ft_status no_cupti(char *msg, size_t msg_size) {
    if (msg && msg_size) snprintf(msg, msg_size, "this build has no CUPTI: host timers only");
    return FT_ERR_UNSUPPORTED;
}

ft_status ft_cupti_acquire(size_t max_records, char *msg, size_t msg_size) {
    (void)max_records;
    return no_cupti(msg, msg_size);
}
ft_status ft_cupti_window_begin(char *msg, size_t msg_size) { return no_cupti(msg, msg_size); }
ft_status ft_cupti_window_end(char *msg, size_t msg_size) { return no_cupti(msg, msg_size); }
int ft_cupti_push(int64_t op) {
    (void)op;
    return -1;
}
int ft_cupti_pop(void) { return -1; }
const ft_gpu_rec *ft_cupti_records(size_t *n) {
    *n = 0;
    return NULL;
}
const char *ft_cupti_string(uint32_t offset) {
    (void)offset;
    return "?";
}
uint64_t ft_cupti_dropped(void) { return 0; }
uint64_t ft_cupti_overhead_ns(void) { return 0; }
void ft_cupti_session_info(ft_cupti_session *s) { memset(s, 0, sizeof *s); }

#endif

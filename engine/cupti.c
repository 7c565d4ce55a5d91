/*
 * cupti.c - the profiler's CUPTI layer: kernel, memcpy, memset and runtime-API
 * activity records, linked to the dispatcher's op records through external
 * correlation ids (see profiler.h for the interface, docs/instrumentation.md
 * for what is measured).
 *
 * Design choices, after the CUPTI notes in shared/specs/tracing.md:
 * - One time domain: a timestamp callback returning ft_prof_now_ns() is
 *   registered before any activity kind is enabled.
 * - Enabled once per process and never disabled or finalized (toggling and
 *   teardown are where CUPTI's graph and session bugs live); windows are
 *   separated by a `collecting` flag, records outside a window are discarded.
 * - cuptiSubscribe first: if another CUPTI client (Nsight Systems/Compute,
 *   compute-sanitizer) is attached it fails, and the profiler goes on with
 *   its host timers only.
 * - Buffers come from a pool allocated up front; when it is empty CUPTI gets
 *   NULL and counts the records it drops. Records are copied out of the
 *   buffers into a store sized by the profiler; a full store counts drops too.
 * - KERNEL (serializing) and GRAPH_TRACE (collapses graph kernels) are not
 *   enabled.
 * Unverified without a GPU: compiled and reviewed only (see the doc).
 */
#include "profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    pthread_mutex_t mu;
    int state; /* 0 not tried, 1 enabled, -1 unusable */
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
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

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

/* DRIVER as well as RUNTIME: an external correlation record is written only
 * beside an API record, and cuBLAS(Lt) launches its kernels through the driver
 * API, so without driver records every GEMM kernel would be left unlinked
 * (flashinfer#2145 hit exactly this with torch.matmul). */
static const CUpti_ActivityKind kinds_enabled[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,            CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_OVERHEAD};

/* The one-time set-up; g.mu held. Fills g.why and returns -1 on failure. */
static int enable(void) {
    CUptiResult r = cuptiSubscribe(&g.sub, (CUpti_CallbackFunc)noop_cb, NULL);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        snprintf(g.why, sizeof g.why,
                 "another CUPTI client is attached (Nsight Systems/Compute, compute-sanitizer?): "
                 "CUPTI off, host timers only");
        return -1;
    }
    if (r != CUPTI_SUCCESS) {
        set_msg(g.why, sizeof g.why, "%s failed: %s (%d)", "cuptiSubscribe", r);
        return -1;
    }
    g.str = (char *)malloc(STR_BYTES);
    if (!g.str) {
        snprintf(g.why, sizeof g.why, "out of host memory for CUPTI names");
        cuptiUnsubscribe(g.sub);
        return -1;
    }
    memcpy(g.str, "?", 2);
    g.n_str = 2;
    for (int i = 0; i < POOL_PREFILL; i++) {
        uint8_t *b = (uint8_t *)aligned_alloc(8, BUF_BYTES);
        if (!b) break;
        g.free_buf[g.n_free++] = b;
        g.n_bufs++;
    }
    const char *step = "cuptiActivityRegisterCallbacks";
    r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r == CUPTI_SUCCESS) {
        step = "cuptiActivityRegisterTimestampCallback";
        r = cuptiActivityRegisterTimestampCallback(timestamp_cb);
    }
    if (r == CUPTI_SUCCESS) {
        step = "cuptiSetThreadIdType";
        r = cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    }
    size_t n_on = 0;
    for (; r == CUPTI_SUCCESS && n_on < sizeof kinds_enabled / sizeof kinds_enabled[0]; n_on++) {
        step = "cuptiActivityEnable";
        r = cuptiActivityEnable(kinds_enabled[n_on]);
        if (r != CUPTI_SUCCESS) break;
    }
    if (r != CUPTI_SUCCESS) {
        set_msg(g.why, sizeof g.why, "%s failed: %s (%d): CUPTI off, host timers only", step, r);
        /* undo what was turned on; errors here change nothing more */
        for (size_t i = 0; i < n_on; i++) (void)cuptiActivityDisable(kinds_enabled[i]);
        (void)cuptiUnsubscribe(g.sub);
        return -1;
    }
    return 0;
}

ft_status ft_cupti_acquire(size_t max_records, char *msg, size_t msg_size) {
    pthread_mutex_lock(&g.mu);
    if (g.state == 0) g.state = enable() == 0 ? 1 : -1;
    ft_status st = FT_OK;
    if (g.state < 0) {
        if (msg && msg_size) snprintf(msg, msg_size, "%s", g.why);
        st = FT_ERR_UNSUPPORTED;
    } else if (!g.collecting && reserve(max_records ? max_records : 1) != 0) {
        if (msg && msg_size) snprintf(msg, msg_size, "out of host memory for %zu CUPTI records", max_records);
        st = FT_ERR_OOM;
    }
    pthread_mutex_unlock(&g.mu);
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
    pthread_mutex_lock(&g.mu);
    int busy = g.collecting, on = g.state > 0;
    pthread_mutex_unlock(&g.mu);
    if (!on) {
        if (msg && msg_size) snprintf(msg, msg_size, "CUPTI is not enabled");
        return FT_ERR_UNSUPPORTED;
    }
    if (busy) {
        if (msg && msg_size) snprintf(msg, msg_size, "another profiler window is open in this process");
        return FT_ERR_INVALID_ARG;
    }
    /* records of work done before the window arrive now, while not collecting */
    ft_status st = flush("window start", msg, msg_size);
    if (st != FT_OK) return st;
    size_t lost = 0;
    (void)cuptiActivityGetNumDroppedRecords(NULL, 0, &lost); /* reset the counter */
    pthread_mutex_lock(&g.mu);
    g.n_rec = g.n_ext = 0;
    g.dropped = g.overhead_ns = 0;
    g.collecting = 1;
    pthread_mutex_unlock(&g.mu);
    return FT_OK;
}

static int cmp_ext(const void *a, const void *b) {
    uint32_t x = ((const ext_pair *)a)->corr, y = ((const ext_pair *)b)->corr;
    return (x > y) - (x < y);
}

ft_status ft_cupti_window_end(char *msg, size_t msg_size) {
    pthread_mutex_lock(&g.mu);
    int open = g.collecting;
    pthread_mutex_unlock(&g.mu);
    if (!open) {
        if (msg && msg_size) snprintf(msg, msg_size, "no CUPTI window is open");
        return FT_ERR_INVALID_ARG;
    }
    ft_status st = flush("window end", msg, msg_size);
    pthread_mutex_lock(&g.mu);
    g.collecting = 0;
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

#endif

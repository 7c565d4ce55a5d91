/*
 * fake_cupti.c - the CUPTI Activity API, as far as engine/cupti.c uses it,
 * for the host emulator: the engine's CUPTI layer, the profiler's joins and
 * the graph-replay attribution then run in CI. Written from the CUDA 13.0
 * headers (cupti_activity.h): records are the real structs, delivered only in
 * buffers the client hands out, at a flush; a NULL buffer drops and counts them.
 *
 * What a call produces, as the headers and CUPTI's users describe it:
 * - every stream-work call (ft_emu_submit) is one API record with a new
 *   correlation id: runtime (cudaLaunchKernelExC, as the engine launches
 *   every kernel through cudaLaunchKernelEx, cudaMemcpyAsync,
 *   cudaMemsetAsync, cudaGraphLaunch), or driver (cuLaunchKernelEx) for the
 *   library GEMMs, which cuBLAS launches through the driver API;
 * - an API record made while external ids are pushed on the thread is
 *   preceded by one external correlation record per pushed kind; an API
 *   record of a kind not enabled is not made, and takes its external
 *   correlation with it;
 * - running device work makes a kernel, memcpy or memset record with the
 *   correlation id of the call that submitted it; inside a graph replay, the
 *   launch's id and the node's graphNodeId (its position + 1);
 * - timestamps come from the registered timestamp callback.
 * FT_EMU_CUPTI_BUSY=1 makes cuptiSubscribe fail as with another client attached.
 * API records per callback id (cuptiActivityEnableRuntimeApi/DriverApi) as well
 * as per kind (FT_EMU_CUPTI_NO_API_ENABLE=1 refuses the per-id calls, as a
 * CUPTI without them would). FT_EMU_CUPTI_REQ_IN_ENABLE=1 makes cuptiActivityEnable ask the
 * client for a buffer from inside the call (another thread, waited for up to
 * 2 s: a client holding its buffer lock across the enable stalls there, and
 * the stall is counted). What a test can ask (ft_emu_cupti_*, below): whether
 * a subscriber exists, how many API calls were traced, which kinds were ever
 * enabled, how many buffer requests stalled, how many sessions were opened.
 *
 * Sessions, as CUPTI 13.0 gets them wrong: a session starts at each
 * cuptiSubscribe, and again when something is enabled after everything was
 * disabled. cuptiGetVersion reports the headers' CUPTI_API_VERSION (130001,
 * CUDA 13.0 Update 1) or FT_EMU_CUPTI_VERSION. Below 13.1 Update 1 (taken as
 * 130101), whose release notes fix "incorrect correlation IDs for
 * cudaGraphLaunch API calls and their associated kernel launches in profiling
 * sessions after the first session", every session after the first gives the
 * device records of a graph launch the correlation id of the process's
 * previous graph launch (0 for the first): the replay's kernels land on
 * another op, or on none. FT_EMU_CUPTI_GRAPH_BUG=1 keeps that bug whatever
 * the version says (=0 removes it), so a test can show what a second session
 * does to an engine that opens one.
 */
#include "fake_cudart_internal.h"

#ifdef FT_WITH_CUPTI
#include <cupti.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t cu_mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
    int subscribed;
    CUpti_BuffersCallbackRequestFunc req;
    CUpti_BuffersCallbackCompleteFunc done;
    CUpti_TimestampCallbackFunc clock;
    unsigned long long enabled; /* 1 << CUpti_ActivityKind */
    uint32_t next_corr;
    uint8_t *pend;              /* records waiting for a flush, each 8-aligned */
    size_t n_pend, cap_pend;
    size_t dropped;
    char **names;               /* kernel names: CUPTI's strings outlive the records */
    size_t n_names, cap_names;
    uint8_t api_on[2][1024];    /* per callback id: [0] runtime, [1] driver */
    unsigned long long ever;    /* kinds ever enabled */
    uint64_t traced, untraced;  /* stream-work API calls made with / without tracing on */
    uint64_t untraced_early;    /* of those untraced: made before the first session */
    int stalls;                 /* buffer requests that did not return within 2 s */
    int subscriptions;          /* successful cuptiSubscribe calls */
    int sessions, in_session;   /* sessions opened; one is open now */
    int session_enabled;        /* the open session has had something enabled */
    uint32_t last_graph_corr;   /* the previous cudaGraphLaunch's correlation id */
} C;

#define FIXED_GRAPH_CORR 130101u /* CUPTI 13.1 Update 1 (see the top) */

static uint32_t version(void) {
    const char *v = getenv("FT_EMU_CUPTI_VERSION");
    long n = v ? strtol(v, NULL, 10) : 0;
    return n > 0 ? (uint32_t)n : (uint32_t)CUPTI_API_VERSION;
}

/* cu_mu held. Whether the open session mislabels graph launches. */
static int graph_corr_bug(void) {
    const char *b = getenv("FT_EMU_CUPTI_GRAPH_BUG");
    int buggy = b && *b ? atoi(b) != 0 : version() < FIXED_GRAPH_CORR;
    return buggy && C.sessions > 1;
}

static int any_api_on(void) {
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 1024; i++)
            if (C.api_on[d][i]) return 1;
    return 0;
}

/* cu_mu held, after an enable or disable: enabling after everything was
 * disabled opens a new session; disabling everything closes the open one. */
static void session_after_change(void) {
    int on = C.enabled || any_api_on();
    if (!C.subscribed) return;
    if (on && !C.in_session) {
        C.sessions++;
        C.in_session = 1;
    }
    if (on) C.session_enabled = 1;
    else if (C.session_enabled) C.in_session = C.session_enabled = 0;
}

/* FT_EMU_CUPTI_REPORT=1: one line on stderr at exit, for tests of whole
 * programs (tests/emu/test_cupti_timed_loops.sh). */
__attribute__((destructor)) static void report(void) {
    const char *e = getenv("FT_EMU_CUPTI_REPORT");
    if (e && atoi(e))
        fprintf(stderr, "fake CUPTI: %d subscriptions, %d sessions, %llu API calls traced, %llu untraced, "
                        "%llu untraced before the first session\n",
                C.subscriptions, C.sessions, (unsigned long long)C.traced, (unsigned long long)C.untraced,
                (unsigned long long)C.untraced_early);
}

int ft_emu_cupti_subscribed(void) {
    pthread_mutex_lock(&cu_mu);
    int r = C.subscribed;
    pthread_mutex_unlock(&cu_mu);
    return r;
}
uint64_t ft_emu_cupti_traced_calls(void) {
    pthread_mutex_lock(&cu_mu);
    uint64_t r = C.traced;
    pthread_mutex_unlock(&cu_mu);
    return r;
}
int ft_emu_cupti_sessions(void) {
    pthread_mutex_lock(&cu_mu);
    int r = C.sessions;
    pthread_mutex_unlock(&cu_mu);
    return r;
}
unsigned long long ft_emu_cupti_kinds_ever(void) {
    pthread_mutex_lock(&cu_mu);
    unsigned long long r = C.ever;
    pthread_mutex_unlock(&cu_mu);
    return r;
}
int ft_emu_cupti_stalls(void) {
    pthread_mutex_lock(&cu_mu);
    int r = C.stalls;
    pthread_mutex_unlock(&cu_mu);
    return r;
}

/* The thread's pushed external ids (CUSTOM0..2, each a stack). */
#define EXT_KINDS 8
#define EXT_DEPTH 16
static _Thread_local uint64_t t_ext[EXT_KINDS][EXT_DEPTH];
static _Thread_local int t_ext_n[EXT_KINDS];

/* A graph replay running on this thread: its launch's id and the node running. */
static _Thread_local int t_replay;
static _Thread_local uint32_t t_replay_corr, t_replay_stream;

static int is_on(CUpti_ActivityKind k) { return C.subscribed && (C.enabled >> k & 1ull); }

/* cu_mu held. An API record for this call: its kind enabled, or its callback id. */
static int api_on(int driver, uint32_t cbid) {
    CUpti_ActivityKind k = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
    return is_on(k) || (C.subscribed && cbid < 1024 && C.api_on[driver][cbid]);
}

static uint64_t now_ns(void) {
    if (C.clock) return C.clock();
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static size_t rec_size(CUpti_ActivityKind k) {
    switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    default: return 0;
    }
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* cu_mu held. Appends a record of kind k; NULL when out of memory (dropped). */
static void *append(CUpti_ActivityKind k) {
    size_t n = align8(rec_size(k));
    if (C.n_pend + n > C.cap_pend) {
        size_t cap = C.cap_pend ? 2 * C.cap_pend : 1 << 16;
        while (cap < C.n_pend + n) cap *= 2;
        uint8_t *p = (uint8_t *)realloc(C.pend, cap);
        if (!p) { C.dropped++; return NULL; }
        C.pend = p;
        C.cap_pend = cap;
    }
    void *r = C.pend + C.n_pend;
    memset(r, 0, n);
    C.n_pend += n;
    ((CUpti_Activity *)r)->kind = k;
    return r;
}

/* cu_mu held. A stable copy of name (interned: equal names, one pointer). */
static const char *intern(const char *name) {
    for (size_t i = 0; i < C.n_names; i++)
        if (!strcmp(C.names[i], name)) return C.names[i];
    char *s = strdup(name);
    char **v = s ? (char **)fk_grow(C.names, &C.cap_names, C.n_names, sizeof *v) : NULL;
    if (!v) { free(s); return "?"; }
    (C.names = v)[C.n_names++] = s;
    return s;
}

/* ---- the API-call side (ft_emu_submit) ----------------------------------- */

typedef struct traced {
    ft_emu_work inner;
    uint32_t corr, stream;
    int graph_launch;
} traced;

/* Runs w and writes its device record: kernel, memcpy or memset. */
static void run_traced(const ft_emu_work *work, uint32_t corr, uint32_t stream, uint64_t node) {
    uint64_t start = now_ns();
    work->run(work->arg);
    uint64_t end = now_ns();
    const char *w = work->what;
    int is_copy = !strncmp(w, "cudaMemcpy", 10), is_set = !strncmp(w, "cudaMemset", 10);
    CUpti_ActivityKind k = is_copy ? CUPTI_ACTIVITY_KIND_MEMCPY
                         : is_set  ? CUPTI_ACTIVITY_KIND_MEMSET
                                   : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    pthread_mutex_lock(&cu_mu);
    if (is_on(k)) {
        if (is_copy) {
            CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)append(k);
            if (m) {
                m->copyKind = (uint8_t)work->copy_dir;
                m->bytes = work->bytes;
                m->start = start; m->end = end;
                m->contextId = 1; m->streamId = stream;
                m->correlationId = corr; m->graphNodeId = node; m->graphId = node ? 1 : 0;
            }
        } else if (is_set) {
            CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)append(k);
            if (m) {
                m->bytes = work->bytes;
                m->start = start; m->end = end;
                m->contextId = 1; m->streamId = stream;
                m->correlationId = corr; m->graphNodeId = node; m->graphId = node ? 1 : 0;
            }
        } else {
            CUpti_ActivityKernel10 *r = (CUpti_ActivityKernel10 *)append(k);
            if (r) {
                r->start = start; r->end = end;
                r->contextId = 1; r->streamId = stream;
                r->correlationId = corr; r->graphNodeId = node; r->graphId = node ? 1 : 0;
                r->name = intern(!strncmp(w, "kernel ", 7) ? w + 7 : w);
            }
        }
    }
    pthread_mutex_unlock(&cu_mu);
}

static void traced_run(void *arg) {
    traced *t = (traced *)arg;
    if (!t->graph_launch) {
        run_traced(&t->inner, t->corr, t->stream, 0);
        return;
    }
    /* its nodes run inside (fk_cupti_run_node): they take this launch's id */
    int was = t_replay;
    uint32_t was_corr = t_replay_corr, was_stream = t_replay_stream;
    t_replay = 1;
    t_replay_corr = t->corr;
    t_replay_stream = t->stream;
    t->inner.run(t->inner.arg);
    t_replay = was;
    t_replay_corr = was_corr;
    t_replay_stream = was_stream;
}

void fk_cupti_run_node(const ft_emu_work *w, size_t i) {
    if (t_replay) run_traced(w, t_replay_corr, t_replay_stream, i + 1);
    else w->run(w->arg);
}

static void traced_release(void *arg) {
    traced *t = (traced *)arg;
    if (t->inner.release) t->inner.release(t->inner.arg);
    free(t);
}

fk_api fk_cupti_api_begin(cudaStream_t s, const ft_emu_work *w) {
    fk_api a = {0};
    pthread_mutex_lock(&cu_mu);
    int any_api = any_api_on();
    if (C.subscribed && (C.enabled || any_api)) C.traced++;
    else if (++C.untraced && !C.sessions) C.untraced_early++;
    if (C.subscribed && (C.enabled || any_api)) {
        a.on = 1;
        a.corr = ++C.next_corr;
        a.stream = (uint32_t)(((uintptr_t)s >> 4) & 0x7fffffff);
        a.driver = !strncmp(w->what, "cublas", 6);
        a.cbid = a.driver                                 ? CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx
                 : !strcmp(w->what, "cudaGraphLaunch")    ? CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000
                 : !strncmp(w->what, "cudaMemcpy", 10)    ? CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020
                 : !strncmp(w->what, "cudaMemset", 10)    ? CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020
                                                          : CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060;
        a.dev_corr = a.corr;
        if (a.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 && !a.driver) {
            if (graph_corr_bug()) a.dev_corr = C.last_graph_corr;
            C.last_graph_corr = a.corr;
        }
        a.start = now_ns();
    }
    pthread_mutex_unlock(&cu_mu);
    return a;
}

int fk_cupti_wrap(ft_emu_work *w, const fk_api *a) {
    if (!a->on) return 0;
    traced *t = (traced *)malloc(sizeof *t);
    if (!t) return -1;
    *t = (traced){*w, a->dev_corr, a->stream, !strcmp(w->what, "cudaGraphLaunch")};
    *w = (ft_emu_work){traced_run, traced_release, t, t->inner.what, 0, 0, t->inner.pdl};
    return 0;
}

void fk_cupti_api_end(const fk_api *a) {
    if (!a->on) return;
    uint64_t end = now_ns();
    CUpti_ActivityKind k = a->driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
    pthread_mutex_lock(&cu_mu);
    if (api_on(a->driver, a->cbid)) {
        if (is_on(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION))
            for (int x = 0; x < EXT_KINDS; x++) {
                if (!t_ext_n[x]) continue;
                CUpti_ActivityExternalCorrelation *e =
                    (CUpti_ActivityExternalCorrelation *)append(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
                if (!e) continue;
                e->externalKind = (CUpti_ExternalCorrelationKind)x;
                e->externalId = t_ext[x][t_ext_n[x] - 1];
                e->correlationId = a->corr;
            }
        CUpti_ActivityAPI *r = (CUpti_ActivityAPI *)append(k);
        if (r) {
            r->cbid = a->cbid;
            r->start = a->start;
            r->end = end;
            r->processId = (uint32_t)getpid();
            r->threadId = (uint32_t)syscall(SYS_gettid);
            r->correlationId = a->corr;
        }
    }
    pthread_mutex_unlock(&cu_mu);
}

/* ---- the CUPTI entry points ---------------------------------------------- */

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *user) {
    (void)cb;
    (void)user;
    if (!sub) return CUPTI_ERROR_INVALID_PARAMETER;
    const char *busy = getenv("FT_EMU_CUPTI_BUSY");
    pthread_mutex_lock(&cu_mu);
    CUptiResult r = C.subscribed || (busy && atoi(busy)) ? CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                                                          : CUPTI_SUCCESS;
    if (r == CUPTI_SUCCESS) {
        C.subscribed = 1;
        C.subscriptions++;
        C.sessions++;
        C.in_session = 1;
        C.session_enabled = C.enabled || any_api_on();
        *sub = (CUpti_SubscriberHandle)&C;
    }
    pthread_mutex_unlock(&cu_mu);
    return r;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle sub) {
    pthread_mutex_lock(&cu_mu);
    CUptiResult r = sub == (CUpti_SubscriberHandle)&C && C.subscribed ? CUPTI_SUCCESS
                                                                     : CUPTI_ERROR_INVALID_PARAMETER;
    if (r == CUPTI_SUCCESS) C.subscribed = C.in_session = C.session_enabled = 0;
    pthread_mutex_unlock(&cu_mu);
    return r;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *v) {
    if (!v) return CUPTI_ERROR_INVALID_PARAMETER;
    *v = version();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str) {
    if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name) {
    if (!name) return CUPTI_ERROR_INVALID_PARAMETER;
    *name = NULL;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)
        *name = "cuLaunchKernelEx";
    else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060)
        *name = "cudaLaunchKernelExC_v11060";
    else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020)
        *name = "cudaMemcpyAsync_v3020";
    else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020)
        *name = "cudaMemsetAsync_v3020";
    else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000)
        *name = "cudaGraphLaunch_v10000";
    return *name ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc done) {
    if (!req || !done) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&cu_mu);
    C.req = req;
    C.done = done;
    pthread_mutex_unlock(&cu_mu);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
    if (!f) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&cu_mu);
    C.clock = f;
    pthread_mutex_unlock(&cu_mu);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
    return type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM || type == CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT
               ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

static CUptiResult set_kind(CUpti_ActivityKind k, int on) {
    if (!rec_size(k) && k != CUPTI_ACTIVITY_KIND_OVERHEAD) return CUPTI_ERROR_INVALID_KIND;
    pthread_mutex_lock(&cu_mu);
    if (on) C.enabled |= 1ull << k;
    else C.enabled &= ~(1ull << k);
    session_after_change();
    pthread_mutex_unlock(&cu_mu);
    return CUPTI_SUCCESS;
}

/* A buffer request made while the enabling thread waits, as CUPTI may make one
 * from inside its calls; a client that holds its buffer lock across the call
 * would deadlock: after 2 s the wait gives up and counts a stall (the request
 * completes when the lock is let go). */
typedef struct req_call {
    CUpti_BuffersCallbackRequestFunc req;
    CUpti_BuffersCallbackCompleteFunc done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int finished, abandoned;
} req_call;

static void *req_thread(void *arg) {
    req_call *c = (req_call *)arg;
    uint8_t *buf = NULL;
    size_t size = 0, max_records = 0;
    c->req(&buf, &size, &max_records);
    if (buf) c->done(NULL, 0, buf, size, 0); /* handed back empty */
    pthread_mutex_lock(&c->mu);
    c->finished = 1;
    int abandoned = c->abandoned;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (abandoned) free(c);
    return NULL;
}

static void request_buffer_now(void) {
    pthread_mutex_lock(&cu_mu);
    CUpti_BuffersCallbackRequestFunc req = C.req;
    CUpti_BuffersCallbackCompleteFunc done = C.done;
    pthread_mutex_unlock(&cu_mu);
    req_call *c = req && done ? (req_call *)calloc(1, sizeof *c) : NULL;
    if (!c) return;
    c->req = req;
    c->done = done;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, req_thread, c) != 0) {
        free(c);
        return;
    }
    pthread_detach(t);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    pthread_mutex_lock(&c->mu);
    while (!c->finished)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &until) != 0) break;
    int finished = c->finished;
    if (!finished) c->abandoned = 1; /* the thread frees it */
    pthread_mutex_unlock(&c->mu);
    if (finished) free(c);
    else {
        pthread_mutex_lock(&cu_mu);
        C.stalls++;
        pthread_mutex_unlock(&cu_mu);
    }
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind k) {
    CUptiResult r = set_kind(k, 1);
    if (r == CUPTI_SUCCESS) {
        pthread_mutex_lock(&cu_mu);
        C.ever |= 1ull << k;
        pthread_mutex_unlock(&cu_mu);
        const char *e = getenv("FT_EMU_CUPTI_REQ_IN_ENABLE");
        if (e && atoi(e)) request_buffer_now();
    }
    return r;
}
CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind k) { return set_kind(k, 0); }

/* FT_EMU_CUPTI_NO_API_ENABLE=1: a CUPTI without per-API control */
static CUptiResult set_api(int driver, CUpti_CallbackId cbid, uint8_t on) {
    const char *no = getenv("FT_EMU_CUPTI_NO_API_ENABLE");
    if (no && atoi(no)) return CUPTI_ERROR_NOT_SUPPORTED;
    if (cbid >= 1024) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&cu_mu);
    C.api_on[driver][cbid] = on ? 1 : 0;
    session_after_change();
    pthread_mutex_unlock(&cu_mu);
    return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
    return set_api(0, cbid, enable);
}
CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
    return set_api(1, cbid, enable);
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
    if ((unsigned)kind >= EXT_KINDS || kind == CUPTI_EXTERNAL_CORRELATION_KIND_INVALID ||
        t_ext_n[kind] == EXT_DEPTH)
        return CUPTI_ERROR_INVALID_PARAMETER;
    t_ext[kind][t_ext_n[kind]++] = id;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *last) {
    if ((unsigned)kind >= EXT_KINDS || !t_ext_n[kind]) return CUPTI_ERROR_QUEUE_EMPTY;
    uint64_t id = t_ext[kind][--t_ext_n[kind]];
    if (last) *last = id;
    return CUPTI_SUCCESS;
}

/* Hands every pending record to the client, in buffers it provides. The
 * device is always idle here: the emulator has run what the host waited for. */
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
    (void)flag;
    pthread_mutex_lock(&cu_mu);
    uint8_t *pend = C.pend;
    size_t n = C.n_pend;
    C.pend = NULL;
    C.n_pend = C.cap_pend = 0;
    CUpti_BuffersCallbackRequestFunc req = C.req;
    CUpti_BuffersCallbackCompleteFunc done = C.done;
    pthread_mutex_unlock(&cu_mu);
    for (size_t off = 0; off < n && req && done;) {
        uint8_t *buf = NULL;
        size_t size = 0, max_records = 0;
        req(&buf, &size, &max_records);
        size_t used = 0, count = 0;
        while (buf && off + used < n) {
            size_t r = align8(rec_size(((CUpti_Activity *)(void *)(pend + off + used))->kind));
            if (used + r > size || (max_records && count == max_records)) break;
            used += r;
            count++;
        }
        if (!buf || !used) { /* no room given: the rest is lost */
            size_t lost = 0;
            for (size_t o = off; o < n; lost++)
                o += align8(rec_size(((CUpti_Activity *)(void *)(pend + o))->kind));
            pthread_mutex_lock(&cu_mu);
            C.dropped += lost;
            pthread_mutex_unlock(&cu_mu);
            if (buf) done(NULL, 0, buf, size, 0);
            break;
        }
        memcpy(buf, pend + off, used);
        off += used;
        done(NULL, 0, buf, size, used);
    }
    free(pend);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
    if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
    size_t off = 0;
    if (*record) {
        size_t n = rec_size((*record)->kind);
        if (!n) return CUPTI_ERROR_INVALID_KIND;
        off = (size_t)((uint8_t *)*record - buffer) + align8(n);
    }
    if (off >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)(void *)(buffer + off);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped) {
    (void)ctx;
    (void)stream;
    if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&cu_mu);
    *dropped = C.dropped;
    C.dropped = 0;
    pthread_mutex_unlock(&cu_mu);
    return CUPTI_SUCCESS;
}

#else /* no CUPTI headers: nothing is traced */

fk_api fk_cupti_api_begin(cudaStream_t s, const ft_emu_work *w) {
    (void)s;
    (void)w;
    return (fk_api){0};
}
int fk_cupti_wrap(ft_emu_work *w, const fk_api *a) {
    (void)w;
    (void)a;
    return 0;
}
void fk_cupti_api_end(const fk_api *a) { (void)a; }
void fk_cupti_run_node(const ft_emu_work *w, size_t i) {
    (void)i;
    w->run(w->arg);
}

#endif

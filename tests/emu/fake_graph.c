/*
 * fake_graph.c - the stream half of the fake CUDA runtime (see emu.h and
 * fake_cudart_internal.h): stream, event, graph and graph-instance handles,
 * ft_emu_submit, stream capture under the real capture rules, events, graph
 * instantiation and replay, and the lazy mode. By default a stream runs its
 * work at submit time; with FT_EMU_LAZY=1 work waits in the stream's FIFO
 * queue and runs only when the host synchronises with the stream (stream /
 * event / device sync or query, synchronous copies, cudaFree, stream destroy,
 * begin capture), so host code that reuses a pinned buffer or reads a result
 * before synchronising sees what it would see on a GPU that has not got there yet.
 */
#include "fake_cudart_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* ---- handles and refcounted work ----------------------------------------- */

/* Destroyed handles stay allocated as tombstones (live = 0): a later malloc
 * can then never hand out the same address, so use-after-destroy is always
 * reported instead of silently hitting a newer object. They are tiny. */
enum { K_STREAM, K_EVENT, K_GRAPH, K_EXEC, K_N };
typedef struct handle { struct handle *next; int live; unsigned flags; } handle;
static handle *g_handles[K_N];

static void *h_new(int kind, size_t size) { /* lock held */
    handle *h = (handle *)calloc(1, size);
    if (!h) return NULL;
    *h = (handle){g_handles[kind], 1, 0};
    return g_handles[kind] = h;
}

static void *h_create(int kind, size_t size, unsigned flags) { /* takes the lock */
    LOCK();
    handle *h = (handle *)h_new(kind, size);
    if (h) h->flags = flags;
    UNLOCK();
    return h;
}

static void *h_get(int kind, const void *p) { /* lock held; NULL unless live */
    for (handle *h = g_handles[kind]; h && p; h = h->next)
        if ((const void *)h == p) return h->live ? h : NULL;
    return NULL;
}

/* A work item shared by a capture, graphs, instances and pending launches. */
typedef struct wref { ft_emu_work w; atomic_int refs; } wref;
typedef struct wlist { wref **v; size_t n, cap; } wlist;

static void w_release(ft_emu_work *w) { if (w->release) w->release(w->arg); }

static int wl_copy(wlist *dst, const wlist *src) { /* takes a reference on each item */
    *dst = (wlist){0};
    if (src->n && !(dst->v = (wref **)malloc(src->n * sizeof *dst->v))) return -1;
    for (size_t i = 0; i < src->n; i++) atomic_fetch_add(&(dst->v[i] = src->v[i])->refs, 1);
    dst->n = dst->cap = src->n;
    return 0;
}

static void wl_put_all(wlist *l) { /* without the lock: release() is the caller's code */
    for (size_t i = 0; i < l->n; i++)
        if (atomic_fetch_sub(&l->v[i]->refs, 1) == 1) { w_release(&l->v[i]->w); free(l->v[i]); }
    free(l->v);
    *l = (wlist){0};
}

/* ---- streams, captures, events, graphs ----------------------------------- */

typedef struct capture {
    enum cudaStreamCaptureMode mode;
    pthread_t owner;          /* the thread that began it */
    int invalidated;
    unsigned long long id;    /* unique over the process, as cudaStreamGetCaptureInfo's */
    wlist items;              /* the work recorded so far, in order */
    struct fk_graph *graph;   /* handed out by EndCapture (and GetCaptureInfo before) */
} capture;

/* Lazy mode's pending work, oldest first: v[head .. n). */
typedef struct wqueue { ft_emu_work *v; size_t head, n, cap; } wqueue;

/* cap is non-NULL from BeginCapture to EndCapture; q is empty outside lazy mode */
struct fk_stream { handle h; capture *cap; wqueue q; };

enum { EV_NEVER, EV_DONE, EV_CAPTURED, EV_PENDING };
/* ms: the host time of an EV_DONE record; capture: the id of an EV_CAPTURED
 * one's capture; on / seq: the stream whose queue holds an EV_PENDING one's
 * marker, and the number of that record (a marker of an older record is void) */
typedef struct fk_event {
    handle h;
    int state;
    double ms;
    unsigned long long capture, seq;
    fk_stream *on;
} fk_event;

/* cudaGraph_t, cudaGraphExec_t. A capture's graph exists from BeginCapture (as
 * cudaStreamGetCaptureInfo hands it out); until EndCapture its nodes are the
 * capture's items (cap). Node handles are the items' addresses. */
typedef struct fk_graph { handle h; wlist items; capture *cap; } fk_graph;

static const wlist *graph_items(const fk_graph *g) { /* lock held */
    return g->cap ? &g->cap->items : &g->items;
}

static unsigned long long g_next_capture_id = 1;

static int is_legacy(cudaStream_t s) {
    return !s || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

/* The rule of cudaThreadExchangeStreamCaptureMode for a thread in the default
 * (Global) interaction mode: a potentially unsafe call is refused while this
 * thread has a non-relaxed capture or any thread a Global one, and the
 * refusal invalidates those captures. */
cudaError_t fk_unsafe_call(void) {
    pthread_t self = pthread_self();
    int hit = 0;
    LOCK();
    for (handle *h = g_handles[K_STREAM]; h; h = h->next) {
        capture *c = ((fk_stream *)h)->cap;
        if (h->live && c && (c->mode == cudaStreamCaptureModeGlobal ||
                             (c->mode == cudaStreamCaptureModeThreadLocal &&
                              pthread_equal(c->owner, self))))
            hit = c->invalidated = 1;
    }
    UNLOCK();
    return hit ? err(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

/* Lock held. The stream that stream work goes to (*out is set whenever the
 * handle is live, so a failing operation can invalidate its capture). */
cudaError_t fk_stream_for_work(cudaStream_t s, fk_stream **out) {
    fk_stream *st = *out = is_legacy(s) ? NULL : (fk_stream *)h_get(K_STREAM, s);
    if (!st) return cudaErrorInvalidResourceHandle; /* dead, unknown, or the legacy stream */
    return st->cap && st->cap->invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
}

void fk_invalidate(fk_stream *st) { if (st && st->cap) st->cap->invalidated = 1; }

int fk_capturing(const fk_stream *st) { return st && st->cap; }

static int record(capture *c, ft_emu_work w) { /* lock held; 0, or -1 out of memory */
    wref *r = (wref *)malloc(sizeof *r);
    wref **v = r ? (wref **)fk_grow(c->items.v, &c->items.cap, c->items.n, sizeof *v) : NULL;
    if (!v) { free(r); return -1; }
    r->w = w;
    atomic_init(&r->refs, 1);
    (c->items.v = v)[c->items.n++] = r;
    return 0;
}

/* ---- lazy mode: per-stream queues --------------------------------------- */

int fk_lazy(void) {
    static atomic_int lazy = -1;
    int v = atomic_load(&lazy);
    if (v < 0) {
        const char *e = getenv("FT_EMU_LAZY");
        atomic_store(&lazy, v = e && atoi(e) != 0);
    }
    return v;
}

static int q_push(wqueue *q, ft_emu_work w) { /* lock held; 0, or -1 out of memory */
    if (q->n == q->cap && q->head > 0) { /* reuse the room of what already ran */
        memmove(q->v, q->v + q->head, (q->n - q->head) * sizeof *q->v);
        q->n -= q->head;
        q->head = 0;
    }
    ft_emu_work *v = (ft_emu_work *)fk_grow(q->v, &q->cap, q->n, sizeof *v);
    if (!v) return -1;
    (q->v = v)[q->n++] = w;
    return 0;
}

/* Queued work runs under this lock, so two host threads syncing at once still
 * run a queue in order and one item at a time (recursive: an item that syncs
 * would otherwise deadlock; none does). */
static pthread_mutex_t g_run_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void fk_run_stream(fk_stream *st) {
    if (!fk_lazy() || !st) return;
    pthread_mutex_lock(&g_run_mu);
    for (;;) {
        ft_emu_work w = {0};
        LOCK();
        int have = st->q.head < st->q.n;
        if (have) w = st->q.v[st->q.head++];
        if (st->q.head == st->q.n) st->q.head = st->q.n = 0;
        UNLOCK();
        if (!have) break;
        w.run(w.arg);
        w_release(&w);
    }
    pthread_mutex_unlock(&g_run_mu);
}

void fk_run_all(void) {
    if (!fk_lazy()) return;
    for (;;) {
        fk_stream *st = NULL;
        LOCK();
        for (handle *h = g_handles[K_STREAM]; h && !st; h = h->next)
            if (((fk_stream *)h)->q.head < ((fk_stream *)h)->q.n) st = (fk_stream *)h;
        UNLOCK();
        if (!st) return;
        fk_run_stream(st);
    }
}

/* ---- submitting work ------------------------------------------------------ */

static atomic_ullong g_submitted;

unsigned long long ft_emu_work_submitted(void) { return atomic_load(&g_submitted); }

static cudaError_t submit(cudaStream_t s, ft_emu_work w, const fk_api *api);

/* Every stream-work call is one traced API call (fake_cupti.c). */
cudaError_t ft_emu_submit(cudaStream_t s, ft_emu_work w) {
    if (strcmp(w.what, "cudaGraphLaunch") != 0) atomic_fetch_add(&g_submitted, 1);
    fk_api api = fk_cupti_api_begin(s, &w);
    cudaError_t e = submit(s, w, &api);
    fk_cupti_api_end(&api);
    return e;
}

/* Work recorded into a capture stays bare: a replay traces its nodes as they
 * run (glaunch_run), whenever the capture was made. */
static cudaError_t submit(cudaStream_t s, ft_emu_work w, const fk_api *api) {
    cudaError_t e = cudaErrorNoDevice;
    int kept = 0; /* recorded into a capture or queued */
    if (!fk_no_device()) {
        LOCK();
        fk_stream *st;
        e = fk_stream_for_work(s, &st);
        if (e == cudaSuccess && !st->cap && fk_cupti_wrap(&w, api) != 0)
            e = cudaErrorMemoryAllocation;
        else if (e == cudaSuccess && st->cap && !(kept = record(st->cap, w) == 0)) {
            fk_invalidate(st);
            e = cudaErrorMemoryAllocation;
        } else if (e == cudaSuccess && !st->cap && fk_lazy() && !(kept = q_push(&st->q, w) == 0)) {
            e = cudaErrorMemoryAllocation;
        }
        UNLOCK();
    }
    if (kept) return cudaSuccess;
    if (e == cudaSuccess) w.run(w.arg); /* not capturing, not lazy: run it now */
    w_release(&w);
    return err(e);
}

/* ---- streams and capture -------------------------------------------------- */

/* Event, graph and instance destroy (streams have their own rules, below). */
static cudaError_t h_destroy(int kind, const void *p) {
    ENTER();
    LOCK();
    handle *h = (handle *)h_get(kind, p);
    if (!h) UNLOCK_RETURN(kind == K_EVENT ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue);
    if (kind == K_GRAPH && ((fk_graph *)h)->cap) /* "destroy ... not permitted" while capturing */
        UNLOCK_RETURN(cudaErrorIllegalState);
    h->live = 0;
    wlist items = {0};
    if (kind != K_EVENT) { items = ((fk_graph *)h)->items; ((fk_graph *)h)->items = (wlist){0}; }
    UNLOCK();
    wl_put_all(&items);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
    ENTER();
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking)) return err(cudaErrorInvalidValue);
    *pStream = (cudaStream_t)h_create(K_STREAM, sizeof(fk_stream), flags);
    return *pStream ? cudaSuccess : err(cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

/* Destroy, Synchronize and Query are refused on a capturing stream (and
 * invalidate its capture); wait == 1 on the legacy stream is a device sync.
 * Each runs the stream's queue first (lazy mode; Query then reports success:
 * the emulated device is infinitely fast, only observed at sync points). */
static cudaError_t stream_op(cudaStream_t s, int wait) {
    ENTER();
    if (wait && is_legacy(s)) {
        cudaError_t u = fk_unsafe_call();
        if (u == cudaSuccess) fk_run_all();
        return u;
    }
    LOCK();
    fk_stream *st = is_legacy(s) ? NULL : (fk_stream *)h_get(K_STREAM, s);
    if (!st) UNLOCK_RETURN(cudaErrorInvalidResourceHandle);
    if (st->cap) { fk_invalidate(st); UNLOCK_RETURN(cudaErrorStreamCaptureUnsupported); }
    int lazy = fk_lazy();
    if (!wait && !lazy) st->h.live = 0;
    UNLOCK();
    if (!lazy) return cudaSuccess; /* nothing is ever pending */
    fk_run_stream(st);
    if (!wait) {
        LOCK();
        st->h.live = 0;
        free(st->q.v);
        st->q = (wqueue){0};
        UNLOCK();
    }
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) { return stream_op(s, 0); }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return stream_op(s, 1); }
cudaError_t cudaStreamQuery(cudaStream_t s) { return stream_op(s, 1); }

cudaError_t cudaDeviceSynchronize(void) { ENTER_UNSAFE(); fk_run_all(); return cudaSuccess; }

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    ENTER();
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return err(cudaErrorInvalidValue);
    if (is_legacy(s)) return err(cudaErrorStreamCaptureUnsupported);
    if (fk_lazy()) { /* what was queued before the capture runs now, not in the graph */
        LOCK();
        fk_stream *q = (fk_stream *)h_get(K_STREAM, s);
        int run = q && !q->cap;
        UNLOCK();
        if (run) fk_run_stream(q);
    }
    LOCK();
    fk_stream *st = (fk_stream *)h_get(K_STREAM, s);
    if (!st) UNLOCK_RETURN(cudaErrorInvalidResourceHandle);
    if (st->cap) UNLOCK_RETURN(cudaErrorIllegalState);
    capture *c = (capture *)malloc(sizeof *c);
    fk_graph *g = c ? (fk_graph *)h_new(K_GRAPH, sizeof *g) : NULL;
    if (!g) { free(c); UNLOCK_RETURN(cudaErrorMemoryAllocation); }
    *c = (capture){mode, pthread_self(), 0, g_next_capture_id++, {0}, g};
    g->cap = c;
    st->cap = c;
    UNLOCK();
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *pGraph) {
    ENTER();
    if (!pGraph) return err(cudaErrorInvalidValue);
    *pGraph = NULL;
    if (is_legacy(s)) return err(cudaErrorIllegalState);
    LOCK();
    fk_stream *st = (fk_stream *)h_get(K_STREAM, s);
    if (!st) UNLOCK_RETURN(cudaErrorInvalidResourceHandle);
    capture *c = st->cap;
    if (!c) UNLOCK_RETURN(cudaErrorIllegalState);
    if (c->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(c->owner, pthread_self()))
        UNLOCK_RETURN(cudaErrorStreamCaptureWrongThread);
    fk_graph *g = c->graph;
    cudaError_t e = c->invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
    st->cap = NULL; /* the capture ends whatever happened */
    g->cap = NULL;
    if (e == cudaSuccess) { g->items = c->items; c->items = (wlist){0}; }
    else { g->h.live = 0; g = NULL; }
    UNLOCK();
    wl_put_all(&c->items); /* a failed capture's recorded work is dropped */
    free(c);
    *pGraph = (cudaGraph_t)g;
    return err(e);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *pCaptureStatus) {
    ENTER();
    if (!pCaptureStatus) return err(cudaErrorInvalidValue);
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    LOCK();
    if (s == NULL || s == cudaStreamLegacy) {
        /* the legacy stream would depend on any capturing blocking stream */
        for (handle *h = g_handles[K_STREAM]; h; h = h->next)
            if (h->live && ((fk_stream *)h)->cap && !(h->flags & cudaStreamNonBlocking))
                UNLOCK_RETURN(cudaErrorStreamCaptureImplicit);
    } else if (s != cudaStreamPerThread) {
        fk_stream *st = (fk_stream *)h_get(K_STREAM, s);
        if (!st) UNLOCK_RETURN(cudaErrorInvalidResourceHandle);
        if (st->cap)
            cs = st->cap->invalidated ? cudaStreamCaptureStatusInvalidated
                                      : cudaStreamCaptureStatusActive;
    }
    UNLOCK();
    *pCaptureStatus = cs;
    return cudaSuccess;
}

/* Only the capture status and the graph are answered: the engine's capture is
 * one stream, so dependency sets are never asked for. */
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *n_deps) {
    ENTER();
    if (!status || deps || edges || n_deps) return err(cudaErrorInvalidValue);
    cudaError_t e = cudaStreamIsCapturing(s, status);
    if (e != cudaSuccess || *status != cudaStreamCaptureStatusActive) return e;
    LOCK();
    fk_stream *st = (fk_stream *)h_get(K_STREAM, s);
    if (id) *id = st->cap->id;
    if (graph) *graph = (cudaGraph_t)st->cap->graph;
    UNLOCK();
    return cudaSuccess;
}

/* ---- events --------------------------------------------------------------- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    ENTER();
    unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!event || (flags & ~known) ||
        ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)))
        return err(cudaErrorInvalidValue);
    *event = (cudaEvent_t)h_create(K_EVENT, sizeof(fk_event), flags);
    return *event ? cudaSuccess : err(cudaErrorMemoryAllocation);
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e) { return h_destroy(K_EVENT, e); }

/* Lazy mode: the marker an event record leaves in its stream's queue. */
typedef struct marker { fk_event *ev; unsigned long long seq; } marker;

static void marker_run(void *arg) {
    marker *m = (marker *)arg;
    LOCK(); /* events are tombstoned, never freed: m->ev stays valid */
    if (m->ev->state == EV_PENDING && m->ev->seq == m->seq) {
        m->ev->state = EV_DONE;
        m->ev->ms = now_ms();
    }
    UNLOCK();
}

/* A capture records no node for the event: it only orders work inside the
 * graph, so the host never sees it complete. In lazy mode the record is a
 * marker in the stream's queue and the event completes (and takes its time)
 * when the marker runs. */
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    ENTER();
    marker *m = fk_lazy() ? (marker *)malloc(sizeof *m) : NULL;
    if (fk_lazy() && !m) return err(cudaErrorMemoryAllocation);
    LOCK();
    fk_event *ev = (fk_event *)h_get(K_EVENT, e);
    fk_stream *st = NULL;
    cudaError_t r = ev ? fk_stream_for_work(s, &st) : cudaErrorInvalidResourceHandle;
    if (r != cudaSuccess) fk_invalidate(st);
    else if (st->cap) { ev->state = EV_CAPTURED; ev->capture = st->cap->id; }
    else if (!m) { ev->state = EV_DONE; ev->ms = now_ms(); }
    else {
        *m = (marker){ev, ev->seq + 1};
        if (q_push(&st->q, (ft_emu_work){marker_run, free, m, "cudaEventRecord", 0, 0, 0}) != 0)
            r = cudaErrorMemoryAllocation;
        else { ev->state = EV_PENDING; ev->seq++; ev->on = st; m = NULL; }
    }
    UNLOCK();
    free(m); /* not queued */
    return err(r);
}

/* Lazy mode: runs the queue that holds e's pending marker, if any. */
static void settle(cudaEvent_t e) {
    LOCK();
    fk_event *ev = (fk_event *)h_get(K_EVENT, e);
    fk_stream *on = ev && ev->state == EV_PENDING ? ev->on : NULL;
    UNLOCK();
    fk_run_stream(on);
}

/* Lock held. The host may not wait on an event last recorded inside a
 * capture; while that capture goes on, the attempt invalidates it too. */
static cudaError_t event_for_host(cudaEvent_t e, fk_event **out) {
    fk_event *ev = *out = (fk_event *)h_get(K_EVENT, e);
    if (!ev) return cudaErrorInvalidResourceHandle;
    if (ev->state != EV_CAPTURED) return cudaSuccess;
    for (handle *h = g_handles[K_STREAM]; h; h = h->next) {
        capture *c = ((fk_stream *)h)->cap;
        if (h->live && c && c->id == ev->capture) c->invalidated = 1;
    }
    return cudaErrorCapturedEvent;
}

static cudaError_t event_wait(cudaEvent_t e) {
    ENTER();
    settle(e);
    fk_event *ev;
    LOCK();
    UNLOCK_RETURN(event_for_host(e, &ev)); /* never pending: recorded work ran (or settle ran it) */
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) { return event_wait(e); }
cudaError_t cudaEventQuery(cudaEvent_t e) { return event_wait(e); }

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    ENTER();
    if (!ms) return err(cudaErrorInvalidValue);
    settle(start);
    settle(end);
    fk_event *a = NULL, *b = NULL;
    LOCK();
    cudaError_t r = event_for_host(start, &a);
    if (r == cudaSuccess) r = event_for_host(end, &b);
    if (r == cudaSuccess && (((a->h.flags | b->h.flags) & cudaEventDisableTiming) ||
                             a->state != EV_DONE || b->state != EV_DONE))
        r = cudaErrorInvalidResourceHandle;
    if (r == cudaSuccess) *ms = (float)(b->ms - a->ms);
    UNLOCK_RETURN(r);
}

/* ---- graphs --------------------------------------------------------------- */

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t g,
                                 unsigned long long flags) {
    ENTER();
    if (!pGraphExec || (flags & ~15ull)) return err(cudaErrorInvalidValue);
    *pGraphExec = NULL;
    LOCK();
    fk_graph *src = (fk_graph *)h_get(K_GRAPH, g);
    if (!src) UNLOCK_RETURN(cudaErrorInvalidValue);
    fk_graph *x = (fk_graph *)h_new(K_EXEC, sizeof *x); /* a copy: it outlives the graph */
    if (!x || wl_copy(&x->items, graph_items(src)) != 0) {
        if (x) x->h.live = 0;
        UNLOCK_RETURN(cudaErrorMemoryAllocation);
    }
    UNLOCK();
    *pGraphExec = (cudaGraphExec_t)x;
    return cudaSuccess;
}

cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t s) {
    ENTER();
    fk_stream *st;
    LOCK();
    UNLOCK_RETURN(h_get(K_EXEC, exec) ? fk_stream_for_work(s, &st) : cudaErrorInvalidValue);
}

/* A launch is one work item that runs the instance's list in order, holding
 * its own references, so it survives cudaGraphExecDestroy while captured. */
static void glaunch_run(void *arg) {
    wlist *l = (wlist *)arg;
    for (size_t i = 0; i < l->n; i++) fk_cupti_run_node(&l->v[i]->w, i);
}

static void glaunch_release(void *arg) { wl_put_all((wlist *)arg); free(arg); }

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    ENTER();
    wlist *l = (wlist *)malloc(sizeof *l);
    if (!l) return err(cudaErrorMemoryAllocation);
    LOCK();
    fk_graph *x = (fk_graph *)h_get(K_EXEC, exec);
    cudaError_t e = !x ? cudaErrorInvalidValue
                       : wl_copy(l, &x->items) ? cudaErrorMemoryAllocation : cudaSuccess;
    UNLOCK();
    if (e != cudaSuccess) { free(l); return err(e); }
    return ft_emu_submit(s, (ft_emu_work){glaunch_run, glaunch_release, l, "cudaGraphLaunch", 0, 0, 0});
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes) {
    ENTER();
    if (!numNodes) return err(cudaErrorInvalidValue);
    LOCK();
    fk_graph *g = (fk_graph *)h_get(K_GRAPH, graph);
    if (!g) UNLOCK_RETURN(cudaErrorInvalidValue);
    const wlist *l = graph_items(g);
    if (nodes) {
        size_t i = 0;
        for (; i < *numNodes && i < l->n; i++) nodes[i] = (cudaGraphNode_t)l->v[i];
        for (size_t j = i; j < *numNodes; j++) nodes[j] = NULL;
        *numNodes = i;
    } else {
        *numNodes = l->n;
    }
    UNLOCK();
    return cudaSuccess;
}

/* The kind of node a work item stands for, by what submitted it. */
static enum cudaGraphNodeType node_type(const ft_emu_work *w) {
    if (!strncmp(w->what, "cudaMemcpy", 10)) return cudaGraphNodeTypeMemcpy;
    if (!strncmp(w->what, "cudaMemset", 10)) return cudaGraphNodeTypeMemset;
    return cudaGraphNodeTypeKernel; /* kernels and library GEMMs */
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType) {
    ENTER();
    if (!node || !pType) return err(cudaErrorInvalidValue);
    LOCK();
    for (handle *h = g_handles[K_GRAPH]; h; h = h->next) {
        if (!h->live) continue;
        const wlist *l = graph_items((fk_graph *)h);
        for (size_t i = 0; i < l->n; i++)
            if ((const void *)l->v[i] == (const void *)node) {
                *pType = node_type(&l->v[i]->w);
                UNLOCK_RETURN(cudaSuccess);
            }
    }
    UNLOCK_RETURN(cudaErrorInvalidValue);
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) { return h_destroy(K_GRAPH, g); }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) { return h_destroy(K_EXEC, x); }

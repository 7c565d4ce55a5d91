/*
 * fake_cudart.c - the CUDA runtime of the host emulation (see emu.h), linked in
 * place of libcudart: device memory is 0xFF-filled host memory in a registry,
 * streams run their work at submit time, stream capture records it into graphs
 * under the real capture rules, and there is one emulated sm_90 device. The
 * signatures come from <cuda_runtime_api.h>, so the names and types match.
 * Strict on purpose: what real CUDA refuses is refused here, with the same
 * error code where known, since the point is to catch engine bugs in CI; the
 * legacy default stream is refused outright (the project forbids it).
 * Not emulated: asynchrony, sticky device errors, several devices, peer copies.
 */
#include "emu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EMU_VERSION 13000 /* what cudaRuntimeGetVersion / cudaDriverGetVersion report */

/* One lock for every registry below. Never held while work runs: kernels run
 * inside run() and may call back into ft_emu_is_device_ptr. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&g_mu)
#define UNLOCK() pthread_mutex_unlock(&g_mu)

/* The last error is per host thread, as in the real runtime. */
static _Thread_local cudaError_t t_last = cudaSuccess;

static cudaError_t err(cudaError_t e) { return e != cudaSuccess ? (t_last = e) : e; }

#define UNLOCK_RETURN(e) do { cudaError_t r_ = (e); UNLOCK(); return err(r_); } while (0)

/* Read at every call, so a test can flip them with setenv between cases. */
static int no_device(void) {
    const char *v = getenv("FT_EMU_NO_DEVICE");
    return v && atoi(v) != 0;
}

static size_t budget_bytes(void) {
    const char *v = getenv("FT_EMU_DEVICE_MB");
    char *end = NULL;
    unsigned long long mb = v ? strtoull(v, &end, 10) : 0;
    if (!v || end == v || mb == 0) mb = 8192;
    return (size_t)mb << 20;
}

/* Without a device every device call fails, as the real runtime's lazy init does. */
#define ENTER() do { if (no_device()) return err(cudaErrorNoDevice); } while (0)

/* ENTER, then refuse a call that is potentially unsafe during stream capture. */
static cudaError_t unsafe_call(void);
#define ENTER_UNSAFE() do { ENTER(); cudaError_t u_ = unsafe_call(); if (u_) return u_; } while (0)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The array v (n items of elem bytes, room for *cap) with room for one more,
 * possibly moved; NULL when out of memory (v is then left as it was). */
static void *grow(void *v, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return v;
    size_t c = *cap ? *cap * 2 : 32;
    void *p = realloc(v, c * elem);
    if (p) *cap = c;
    return p;
}

/* ---- address ranges: live device allocations, pinned host allocations ---- */

typedef struct range { uintptr_t base; size_t size; } range;
typedef struct range_set { range *v; size_t n, cap; } range_set; /* sorted, never overlapping */

static range_set g_dev, g_pinned;
static size_t g_dev_used; /* bytes charged against the budget */

static size_t charge(size_t size) { return (size + 255) & ~(size_t)255; }

static ptrdiff_t rs_find(const range_set *s, const void *p) { /* range holding p, or -1 */
    uintptr_t a = (uintptr_t)p;
    size_t lo = 0, hi = s->n; /* first range with base > a */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid].base <= a) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0 || a - s->v[lo - 1].base >= s->v[lo - 1].size) return -1;
    return (ptrdiff_t)(lo - 1);
}

/* 1 when [p, p+n) lies inside one range (n == 0: p inside one) */
static int rs_covers(const range_set *s, const void *p, size_t n) {
    ptrdiff_t i = rs_find(s, p);
    return i >= 0 && n <= s->v[i].size - ((uintptr_t)p - s->v[i].base);
}

static int rs_insert(range_set *s, void *base, size_t size) {
    range *v = (range *)grow(s->v, &s->cap, s->n, sizeof *v);
    if (!v) return -1;
    s->v = v;
    size_t i = s->n;
    while (i > 0 && v[i - 1].base > (uintptr_t)base) i--;
    memmove(&v[i + 1], &v[i], (s->n - i) * sizeof *v);
    v[i] = (range){(uintptr_t)base, size};
    s->n++;
    return 0;
}

/* Removes the range that starts exactly at p: 0, or -1 when there is none. */
static int rs_remove(range_set *s, void *p, size_t *size) {
    ptrdiff_t i = rs_find(s, p);
    if (i < 0 || s->v[i].base != (uintptr_t)p) return -1;
    *size = s->v[i].size;
    memmove(&s->v[i], &s->v[i + 1], (s->n - (size_t)i - 1) * sizeof *s->v);
    s->n--;
    return 0;
}

int ft_emu_is_device_ptr(const void *p, size_t n) {
    LOCK();
    int ok = rs_covers(&g_dev, p, n);
    UNLOCK();
    return ok;
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
} capture;

/* cap is non-NULL from BeginCapture to EndCapture */
typedef struct fk_stream { handle h; capture *cap; } fk_stream;

enum { EV_NEVER, EV_DONE, EV_CAPTURED };
/* ms: the host time of an EV_DONE record; capture: the id of an EV_CAPTURED one's capture */
typedef struct fk_event { handle h; int state; double ms; unsigned long long capture; } fk_event;

typedef struct fk_graph { handle h; wlist items; } fk_graph; /* cudaGraph_t, cudaGraphExec_t */

static unsigned long long g_next_capture_id = 1;

static int is_legacy(cudaStream_t s) {
    return !s || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

/* The rule of cudaThreadExchangeStreamCaptureMode for a thread in the default
 * (Global) interaction mode: a potentially unsafe call is refused while this
 * thread has a non-relaxed capture or any thread a Global one, and the
 * refusal invalidates those captures. */
static cudaError_t unsafe_call(void) {
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
static cudaError_t stream_for_work(cudaStream_t s, fk_stream **out) {
    fk_stream *st = *out = is_legacy(s) ? NULL : (fk_stream *)h_get(K_STREAM, s);
    if (!st) return cudaErrorInvalidResourceHandle; /* dead, unknown, or the legacy stream */
    return st->cap && st->cap->invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
}

static void invalidate(fk_stream *st) { if (st && st->cap) st->cap->invalidated = 1; } /* locked */

static int record(capture *c, ft_emu_work w) { /* lock held; 0, or -1 out of memory */
    wref *r = (wref *)malloc(sizeof *r);
    wref **v = r ? (wref **)grow(c->items.v, &c->items.cap, c->items.n, sizeof *v) : NULL;
    if (!v) { free(r); return -1; }
    r->w = w;
    atomic_init(&r->refs, 1);
    (c->items.v = v)[c->items.n++] = r;
    return 0;
}

cudaError_t ft_emu_submit(cudaStream_t s, ft_emu_work w) {
    cudaError_t e = cudaErrorNoDevice;
    int recorded = 0;
    if (!no_device()) {
        LOCK();
        fk_stream *st;
        e = stream_for_work(s, &st);
        if (e == cudaSuccess && st->cap && !(recorded = record(st->cap, w) == 0)) {
            invalidate(st);
            e = cudaErrorMemoryAllocation;
        }
        UNLOCK();
    }
    if (recorded) return cudaSuccess;
    if (e == cudaSuccess) w.run(w.arg); /* not capturing: run it now */
    w_release(&w);
    return err(e);
}

/* ---- kernel launches ------------------------------------------------------ */

#define LAUNCH_PREFIX "kernel "

typedef struct launch {
    dim3 grid, block;
    size_t smem;
    void (*fn)(void *), *closure, (*release)(void *);
    char what[160]; /* "kernel NAME", a copy: the caller's string may not outlive a graph */
} launch;

static void launch_run(void *arg) {
    launch *l = (launch *)arg;
    ft_emu_run_grid(l->grid, l->block, l->smem, l->fn, l->closure, l->what + strlen(LAUNCH_PREFIX));
}

static void launch_release(void *arg) {
    launch *l = (launch *)arg;
    if (l->release) l->release(l->closure);
    free(l);
}

static cudaError_t check_launch(dim3 g, dim3 b, size_t smem) {
    if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z) return cudaErrorInvalidConfiguration;
    if (b.x > 1024 || b.y > 1024 || b.z > 64 || (uint64_t)b.x * b.y * b.z > 1024)
        return cudaErrorInvalidConfiguration;
    if (g.x > 2147483647u || g.y > 65535 || g.z > 65535) return cudaErrorInvalidConfiguration;
    if (smem > 48 * 1024) return cudaErrorInvalidValue; /* no opt-in attribute here */
    return cudaSuccess;
}

cudaError_t ft_emu_launch(cudaStream_t s, dim3 grid, dim3 block, size_t dyn_smem,
                          void (*thread_fn)(void *closure), void *closure,
                          void (*release_closure)(void *closure), const char *name) {
    cudaError_t e = no_device() ? cudaErrorNoDevice : check_launch(grid, block, dyn_smem);
    if (e == cudaSuccess && !thread_fn) e = cudaErrorInvalidDeviceFunction;
    launch *l = e == cudaSuccess ? (launch *)malloc(sizeof *l) : NULL;
    if (e == cudaSuccess && !l) e = cudaErrorMemoryAllocation;
    if (e != cudaSuccess) {
        LOCK(); /* a launch that fails while its stream captures breaks the capture too */
        fk_stream *st;
        (void)stream_for_work(s, &st);
        invalidate(st);
        UNLOCK();
        if (release_closure) release_closure(closure);
        return err(e);
    }
    *l = (launch){grid, block, dyn_smem, thread_fn, closure, release_closure, {0}};
    snprintf(l->what, sizeof l->what, LAUNCH_PREFIX "%s", name ? name : "(unnamed)");
    return ft_emu_submit(s, (ft_emu_work){launch_run, launch_release, l, l->what});
}

/* ---- device and pinned memory --------------------------------------------- */

/* cudaMalloc (device: budgeted, 256-aligned) and cudaMallocHost alike. The
 * fill is 0xFF because neither is initialised for real, and 0xFF bytes read as
 * NaN in f32 / f16 / bf16: a kernel that reads what nobody wrote shows up. */
static cudaError_t alloc_in(range_set *set, void **out, size_t size, int device) {
    ENTER_UNSAFE();
    if (!out) return err(cudaErrorInvalidValue);
    *out = NULL;
    if (size == 0) return cudaSuccess;
    size_t charged = device ? charge(size) : 0, budget = budget_bytes();
    if (device && charged < size) return err(cudaErrorMemoryAllocation);
    LOCK();
    if (device && (g_dev_used > budget || charged > budget - g_dev_used))
        UNLOCK_RETURN(cudaErrorMemoryAllocation);
    g_dev_used += charged; /* reserved first, so the lock is not held over the fill */
    UNLOCK();
    void *p = NULL;
    if (posix_memalign(&p, device ? 256 : 4096, size) != 0) p = NULL;
    if (p) memset(p, 0xFF, size);
    LOCK();
    if (!p || rs_insert(set, p, size) != 0) {
        g_dev_used -= charged;
        free(p);
        UNLOCK_RETURN(cudaErrorMemoryAllocation);
    }
    UNLOCK();
    *out = p;
    return cudaSuccess;
}

static cudaError_t free_in(range_set *set, void *p, int device) {
    ENTER_UNSAFE();
    if (!p) return cudaSuccess;
    size_t size;
    LOCK();
    if (rs_remove(set, p, &size) != 0) UNLOCK_RETURN(cudaErrorInvalidValue); /* not a start */
    if (device) g_dev_used -= charge(size);
    UNLOCK();
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **devPtr, size_t size) { return alloc_in(&g_dev, devPtr, size, 1); }
cudaError_t cudaFree(void *devPtr) { return free_in(&g_dev, devPtr, 1); }
cudaError_t cudaMallocHost(void **ptr, size_t size) { return alloc_in(&g_pinned, ptr, size, 0); }
cudaError_t cudaFreeHost(void *ptr) { return free_in(&g_pinned, ptr, 0); }

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    ENTER();
    if (!free_bytes || !total) return err(cudaErrorInvalidValue);
    size_t b = budget_bytes();
    LOCK();
    *free_bytes = g_dev_used < b ? b - g_dev_used : 0;
    UNLOCK();
    *total = b;
    return cudaSuccess;
}

/* ---- copies and memset ---------------------------------------------------- */

/* One 2D copy (height 1 for 1D) or memset (value >= 0). The device sides are
 * checked again when it runs: a graph replayed after cudaFree would touch
 * freed memory, on a GPU an illegal address or silent garbage. */
typedef struct copy {
    char *dst;
    const char *src;
    size_t dpitch, spitch, width, height;
    int value, dst_dev, src_dev; /* *_dev: that side is device memory */
} copy;

#define COPY1(dst, src, n, v) ((copy){(char *)(dst), (const char *)(src), n, n, n, 1, v, 0, 0})

static size_t span(size_t pitch, size_t width, size_t height) { /* SIZE_MAX on overflow */
    if (height == 0 || width == 0) return 0;
    if (pitch && height - 1 > (SIZE_MAX - width) / pitch) return SIZE_MAX;
    return pitch * (height - 1) + width;
}

static void copy_run(void *arg) {
    copy *c = (copy *)arg;
    if ((c->dst_dev && !ft_emu_is_device_ptr(c->dst, span(c->dpitch, c->width, c->height))) ||
        (c->src_dev && !ft_emu_is_device_ptr(c->src, span(c->spitch, c->width, c->height)))) {
        fprintf(stderr, "ftengine emu: a captured %s touches device memory freed since "
                        "(an illegal address on a GPU)\n", c->value >= 0 ? "memset" : "memcpy");
        abort();
    }
    for (size_t r = 0; r < c->height; r++) {
        if (c->value >= 0) memset(c->dst + r * c->dpitch, c->value, c->width);
        else memmove(c->dst + r * c->dpitch, c->src + r * c->spitch, c->width);
    }
}

/* Lock held. Checks c against the registries for kind; pinned_only: every
 * host side must be pinned (an async copy that a capture records). */
static cudaError_t check_copy(copy *c, enum cudaMemcpyKind kind, int pinned_only) {
    if ((int)kind < (int)cudaMemcpyHostToHost || (int)kind > (int)cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    int set = c->value >= 0;
    if (c->width > c->dpitch || (!set && c->width > c->spitch)) return cudaErrorInvalidPitchValue;
    if (c->width == 0 || c->height == 0) return cudaSuccess; /* nothing to touch */
    if (!c->dst || (!set && !c->src)) return cudaErrorInvalidValue;
    size_t dn = span(c->dpitch, c->width, c->height), sn = span(c->spitch, c->width, c->height);
    c->dst_dev = rs_find(&g_dev, c->dst) >= 0;
    c->src_dev = !set && rs_find(&g_dev, c->src) >= 0;
    int want_dst = -1, want_src = -1; /* -1: either (cudaMemcpyDefault infers) */
    if (set) want_dst = 1;
    else if (kind != cudaMemcpyDefault) {
        want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
        want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    }
    if ((want_dst >= 0 && want_dst != c->dst_dev) || (want_src >= 0 && want_src != c->src_dev))
        return cudaErrorInvalidValue;
    if ((c->dst_dev && !rs_covers(&g_dev, c->dst, dn)) ||
        (c->src_dev && !rs_covers(&g_dev, c->src, sn)))
        return cudaErrorInvalidValue;
    if (pinned_only && ((!c->dst_dev && !rs_covers(&g_pinned, c->dst, dn)) ||
                        (!set && !c->src_dev && !rs_covers(&g_pinned, c->src, sn))))
        return cudaErrorStreamCaptureUnsupported; /* a pageable copy is synchronous */
    return cudaSuccess;
}

/* sync: cudaMemcpy / cudaMemset, potentially unsafe under capture and done at
 * once; otherwise stream work (recorded, and checked as such, under capture). */
static cudaError_t do_copy(copy c, enum cudaMemcpyKind kind, cudaStream_t s, int sync) {
    if (sync) ENTER_UNSAFE();
    else ENTER();
    fk_stream *st = NULL;
    LOCK();
    cudaError_t e = sync ? cudaSuccess : stream_for_work(s, &st);
    if (e == cudaSuccess) e = check_copy(&c, kind, st && st->cap);
    if (e != cudaSuccess) invalidate(st);
    UNLOCK();
    if (e != cudaSuccess || c.width == 0 || c.height == 0) return err(e);
    if (sync) { copy_run(&c); return cudaSuccess; }
    copy *p = (copy *)malloc(sizeof *p);
    if (!p) return err(cudaErrorMemoryAllocation);
    *p = c;
    return ft_emu_submit(s, (ft_emu_work){copy_run, free, p,
                                          c.value >= 0 ? "cudaMemsetAsync" : "cudaMemcpyAsync"});
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
    return do_copy(COPY1(dst, src, count, -1), kind, stream, 0);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream) {
    copy c = {(char *)dst, (const char *)src, dpitch, spitch, width, height, -1, 0, 0};
    return do_copy(c, kind, stream, 0);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
    return do_copy(COPY1(devPtr, NULL, count, (unsigned char)value), cudaMemcpyDefault, stream, 0);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    return do_copy(COPY1(dst, src, count, -1), kind, NULL, 1);
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
    return do_copy(COPY1(devPtr, NULL, count, (unsigned char)value), cudaMemcpyDefault, NULL, 1);
}

/* ---- streams and capture -------------------------------------------------- */

/* Event, graph and instance destroy (streams have their own rules, below). */
static cudaError_t h_destroy(int kind, const void *p) {
    ENTER();
    LOCK();
    handle *h = (handle *)h_get(kind, p);
    if (!h) UNLOCK_RETURN(kind == K_EVENT ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue);
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
 * invalidate its capture); wait == 1 on the legacy stream is a device sync. */
static cudaError_t stream_op(cudaStream_t s, int wait) {
    ENTER();
    if (wait && is_legacy(s)) return unsafe_call();
    LOCK();
    fk_stream *st = is_legacy(s) ? NULL : (fk_stream *)h_get(K_STREAM, s);
    if (!st) UNLOCK_RETURN(cudaErrorInvalidResourceHandle);
    if (st->cap) { invalidate(st); UNLOCK_RETURN(cudaErrorStreamCaptureUnsupported); }
    if (!wait) st->h.live = 0;
    UNLOCK();
    return cudaSuccess; /* nothing is ever pending */
}

cudaError_t cudaStreamDestroy(cudaStream_t s) { return stream_op(s, 0); }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return stream_op(s, 1); }
cudaError_t cudaStreamQuery(cudaStream_t s) { return stream_op(s, 1); }

cudaError_t cudaDeviceSynchronize(void) { ENTER_UNSAFE(); return cudaSuccess; }

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    ENTER();
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return err(cudaErrorInvalidValue);
    if (is_legacy(s)) return err(cudaErrorStreamCaptureUnsupported);
    LOCK();
    fk_stream *st = (fk_stream *)h_get(K_STREAM, s);
    if (!st) UNLOCK_RETURN(cudaErrorInvalidResourceHandle);
    if (st->cap) UNLOCK_RETURN(cudaErrorIllegalState);
    capture *c = st->cap = (capture *)malloc(sizeof *c);
    if (!c) UNLOCK_RETURN(cudaErrorMemoryAllocation);
    *c = (capture){mode, pthread_self(), 0, g_next_capture_id++, {0}};
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
    fk_graph *g = c->invalidated ? NULL : (fk_graph *)h_new(K_GRAPH, sizeof *g);
    cudaError_t e = c->invalidated ? cudaErrorStreamCaptureInvalidated
                                   : g ? cudaSuccess : cudaErrorMemoryAllocation;
    st->cap = NULL; /* the capture ends whatever happened */
    if (g) { g->items = c->items; c->items = (wlist){0}; }
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

/* A capture records no node for the event: it only orders work inside the
 * graph, so the host never sees it complete. */
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    ENTER();
    LOCK();
    fk_event *ev = (fk_event *)h_get(K_EVENT, e);
    if (!ev) UNLOCK_RETURN(cudaErrorInvalidResourceHandle);
    fk_stream *st;
    cudaError_t r = stream_for_work(s, &st);
    if (r != cudaSuccess) { invalidate(st); UNLOCK_RETURN(r); }
    if (st->cap) { ev->state = EV_CAPTURED; ev->capture = st->cap->id; }
    else { ev->state = EV_DONE; ev->ms = now_ms(); }
    UNLOCK();
    return cudaSuccess;
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
    fk_event *ev;
    LOCK();
    UNLOCK_RETURN(event_for_host(e, &ev)); /* never pending: recorded work already ran */
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) { return event_wait(e); }
cudaError_t cudaEventQuery(cudaEvent_t e) { return event_wait(e); }

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    ENTER();
    if (!ms) return err(cudaErrorInvalidValue);
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
    if (!x || wl_copy(&x->items, &src->items) != 0) {
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
    UNLOCK_RETURN(h_get(K_EXEC, exec) ? stream_for_work(s, &st) : cudaErrorInvalidValue);
}

/* A launch is one work item that runs the instance's list in order, holding
 * its own references, so it survives cudaGraphExecDestroy while captured. */
static void glaunch_run(void *arg) {
    wlist *l = (wlist *)arg;
    for (size_t i = 0; i < l->n; i++) l->v[i]->w.run(l->v[i]->w.arg);
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
    return ft_emu_submit(s, (ft_emu_work){glaunch_run, glaunch_release, l, "cudaGraphLaunch"});
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) { return h_destroy(K_GRAPH, g); }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) { return h_destroy(K_EXEC, x); }

/* ---- device, versions, errors --------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return err(cudaErrorInvalidValue);
    return (*count = !no_device()) ? cudaSuccess : err(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) { ENTER(); return err(device ? cudaErrorInvalidDevice : 0); }

cudaError_t cudaGetDevice(int *device) {
    ENTER();
    return device ? (*device = 0, cudaSuccess) : err(cudaErrorInvalidValue);
}

/* An H100 SXM as far as the engine asks; the name says what it really is. */
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    ENTER();
    if (!prop) return err(cudaErrorInvalidValue);
    if (device != 0) return err(cudaErrorInvalidDevice);
    *prop = (struct cudaDeviceProp){
        .major = 9, .minor = 0, .multiProcessorCount = 132, .totalGlobalMem = budget_bytes(),
        .sharedMemPerBlock = 49152, .sharedMemPerBlockOptin = 232448,
        .sharedMemPerMultiprocessor = 233472, .reservedSharedMemPerBlock = 1024,
        .regsPerBlock = 65536, .regsPerMultiprocessor = 65536, .warpSize = 32,
        .memPitch = 2147483647, .maxThreadsPerBlock = 1024, .maxThreadsDim = {1024, 1024, 64},
        .maxGridSize = {2147483647, 65535, 65535}, .l2CacheSize = 52428800,
        .memoryBusWidth = 5120, .maxThreadsPerMultiProcessor = 2048,
        .maxBlocksPerMultiProcessor = 32, .totalConstMem = 65536, .textureAlignment = 512,
        .concurrentKernels = 1, .asyncEngineCount = 2, .unifiedAddressing = 1,
        .canMapHostMemory = 1, .managedMemory = 1, .cooperativeLaunch = 1,
        .streamPrioritiesSupported = 1, .pciBusID = 0};
    snprintf(prop->name, sizeof prop->name, "ftengine emulated device (host CPU)");
    return cudaSuccess;
}

static cudaError_t version(int *v) {
    return v ? (*v = EMU_VERSION, cudaSuccess) : err(cudaErrorInvalidValue);
}
cudaError_t cudaRuntimeGetVersion(int *runtimeVersion) { return version(runtimeVersion); }
cudaError_t cudaDriverGetVersion(int *driverVersion) { return version(driverVersion); }

cudaError_t cudaGetLastError(void) { cudaError_t e = t_last; t_last = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError(void) { return t_last; }

/* The real runtime's names and strings for every code this file returns,
 * plus the kernel faults a test may want printed. */
static const struct { cudaError_t code; const char *name, *str; } k_errors[] = {
#define E(code, str) {code, #code, str}
    E(cudaSuccess, "no error"),
    E(cudaErrorInvalidValue, "invalid argument"),
    E(cudaErrorMemoryAllocation, "out of memory"),
    E(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    E(cudaErrorInvalidPitchValue, "invalid pitch argument"),
    E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    E(cudaErrorInvalidDeviceFunction, "invalid device function"),
    E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    E(cudaErrorInvalidDevice, "invalid device ordinal"),
    E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    E(cudaErrorIllegalState, "the operation cannot be performed in the present state"),
    E(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    E(cudaErrorLaunchFailure, "unspecified launch failure"),
    E(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing"),
    E(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture"),
    E(cudaErrorStreamCaptureImplicit,
      "operation would make the legacy stream depend on a capturing blocking stream"),
    E(cudaErrorCapturedEvent,
      "operation not permitted on an event last recorded in a capturing stream"),
    E(cudaErrorStreamCaptureWrongThread,
      "attempt to terminate a thread-local capture sequence from another thread"),
    E(cudaErrorUnknown, "unknown error"),
#undef E
};

static int error_index(cudaError_t e) {
    for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++)
        if (k_errors[i].code == e) return (int)i;
    return -1;
}

const char *cudaGetErrorName(cudaError_t error) {
    int i = error_index(error);
    return i < 0 ? "unrecognized error code" : k_errors[i].name;
}

const char *cudaGetErrorString(cudaError_t error) {
    int i = error_index(error);
    return i < 0 ? "unknown error" : k_errors[i].str;
}

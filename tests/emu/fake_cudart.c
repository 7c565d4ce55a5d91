/*
 * fake_cudart.c - the CUDA runtime of the host emulation (see emu.h), linked in
 * place of libcudart: device memory is 0xFF-filled host memory in a registry,
 * copies, memsets and kernel launches go to streams as work items, and there is
 * one emulated sm_90 device. Streams, stream capture, the FT_EMU_LAZY queues,
 * events and graphs are in fake_graph.c (shared declarations in
 * fake_cudart_internal.h). The signatures come from <cuda_runtime_api.h>, so
 * the names and types match. Strict on purpose: what real CUDA refuses is
 * refused here, with the same error code where known, since the point is to
 * catch engine bugs in CI; the legacy default stream is refused outright (the
 * project forbids it). Not emulated: concurrency, sticky device errors, several
 * devices, peer copies.
 */
#include "fake_cudart_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMU_VERSION 13000 /* what cudaRuntimeGetVersion / cudaDriverGetVersion report */

pthread_mutex_t fk_mu = PTHREAD_MUTEX_INITIALIZER;
_Thread_local cudaError_t fk_last = cudaSuccess;

/* Read at every call, so a test can flip them with setenv between cases. */
int fk_no_device(void) {
    const char *v = getenv("FT_EMU_NO_DEVICE");
    return v && atoi(v) != 0;
}

/* FT_EMU_CC=80 makes the device an sm_80 one (default 90), so a test can see
 * what the engine does on a GPU without Hopper's features. */
static int cc(void) {
    const char *v = getenv("FT_EMU_CC");
    int c = v ? atoi(v) : 0;
    return c >= 10 && c < 1000 ? c : 90;
}
int fk_cc_major(void) { return cc() / 10; }

static size_t budget_bytes(void) {
    const char *v = getenv("FT_EMU_DEVICE_MB");
    char *end = NULL;
    unsigned long long mb = v ? strtoull(v, &end, 10) : 0;
    if (!v || end == v || mb == 0) mb = 8192;
    return (size_t)mb << 20;
}

void *fk_grow(void *v, size_t *cap, size_t n, size_t elem) {
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
    range *v = (range *)fk_grow(s->v, &s->cap, s->n, sizeof *v);
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

/* ---- kernel launches ------------------------------------------------------ */

#define LAUNCH_PREFIX "kernel "

typedef struct launch {
    dim3 grid, block;
    size_t smem;
    void (*fn)(void *), *closure, (*release)(void *);
    int pdl;
    char what[160]; /* "kernel NAME", a copy: the caller's string may not outlive a graph */
} launch;

static void launch_run(void *arg) {
    launch *l = (launch *)arg;
    ft_emu_run_grid(l->grid, l->block, l->smem, l->fn, l->closure, l->what + strlen(LAUNCH_PREFIX),
                    l->pdl);
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

static atomic_ullong g_pdl_launches;

/* cudaProfilerStart/Stop: the launches between them are counted, and each Stop
 * appends "window N" to the file FT_EMU_PROFILER_LOG names, so a test can see
 * which work a `nsys --capture-range=cudaProfilerApi` run would record. */
static atomic_int g_prof_on;
static atomic_ullong g_prof_launches;

cudaError_t cudaProfilerStart(void) {
    atomic_store(&g_prof_launches, 0);
    atomic_store(&g_prof_on, 1);
    return cudaSuccess;
}

cudaError_t cudaProfilerStop(void) {
    if (!atomic_exchange(&g_prof_on, 0)) return cudaSuccess;
    const char *path = getenv("FT_EMU_PROFILER_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "window %llu\n", (unsigned long long)atomic_load(&g_prof_launches));
        fclose(f);
    }
    return cudaSuccess;
}

unsigned long long ft_emu_pdl_launches(void) { return atomic_load(&g_pdl_launches); }

cudaError_t ft_emu_launch(cudaStream_t s, dim3 grid, dim3 block, size_t dyn_smem,
                          void (*thread_fn)(void *closure), void *closure,
                          void (*release_closure)(void *closure), const char *name, int pdl) {
    cudaError_t e = fk_no_device() ? cudaErrorNoDevice : check_launch(grid, block, dyn_smem);
    if (e == cudaSuccess && pdl && fk_cc_major() < 9) e = cudaErrorNotSupported;
    if (e == cudaSuccess && !thread_fn) e = cudaErrorInvalidDeviceFunction;
    launch *l = e == cudaSuccess ? (launch *)malloc(sizeof *l) : NULL;
    if (e == cudaSuccess && !l) e = cudaErrorMemoryAllocation;
    if (e != cudaSuccess) {
        LOCK(); /* a launch that fails while its stream captures breaks the capture too */
        fk_stream *st;
        (void)fk_stream_for_work(s, &st);
        fk_invalidate(st);
        UNLOCK();
        if (release_closure) release_closure(closure);
        return err(e);
    }
    *l = (launch){grid, block, dyn_smem, thread_fn, closure, release_closure, pdl ? 1 : 0, {0}};
    snprintf(l->what, sizeof l->what, LAUNCH_PREFIX "%s", name ? name : "(unnamed)");
    e = ft_emu_submit(s, (ft_emu_work){launch_run, launch_release, l, l->what, 0, 0, l->pdl});
    if (e == cudaSuccess && pdl) atomic_fetch_add(&g_pdl_launches, 1);
    if (e == cudaSuccess && atomic_load(&g_prof_on)) atomic_fetch_add(&g_prof_launches, 1);
    return e;
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
    fk_run_all(); /* the real ones synchronise the device */
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

/* Lock held, c checked. 1 when a host side of c is pageable (not pinned). */
static int host_pageable(const copy *c) {
    size_t dn = span(c->dpitch, c->width, c->height), sn = span(c->spitch, c->width, c->height);
    return (!c->dst_dev && !rs_covers(&g_pinned, c->dst, dn)) ||
           (c->value < 0 && !c->src_dev && !rs_covers(&g_pinned, c->src, sn));
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
    if (pinned_only && host_pageable(c))
        return cudaErrorStreamCaptureUnsupported; /* a pageable copy is synchronous */
    return cudaSuccess;
}

/* sync: cudaMemcpy / cudaMemset, potentially unsafe under capture and done at
 * once (after every queue in lazy mode); otherwise stream work (recorded, and
 * checked as such, under capture). In lazy mode an async copy with a pageable
 * host side is done at once after the stream's queue, as the driver does it
 * (staged before the call returns, or synchronous); only pinned copies wait. */
static cudaError_t do_copy(copy c, enum cudaMemcpyKind kind, cudaStream_t s, int sync) {
    if (sync) ENTER_UNSAFE();
    else ENTER();
    if (sync) fk_run_all();
    fk_stream *st = NULL;
    LOCK();
    cudaError_t e = sync ? cudaSuccess : fk_stream_for_work(s, &st);
    if (e == cudaSuccess) e = check_copy(&c, kind, fk_capturing(st));
    if (e != cudaSuccess) fk_invalidate(st);
    int now = e == cudaSuccess && !sync && fk_lazy() && !fk_capturing(st) &&
              c.width && c.height && host_pageable(&c);
    UNLOCK();
    if (e != cudaSuccess || c.width == 0 || c.height == 0) return err(e);
    if (now) fk_run_stream(st);
    if (sync || now) { copy_run(&c); return cudaSuccess; }
    copy *p = (copy *)malloc(sizeof *p);
    if (!p) return err(cudaErrorMemoryAllocation);
    *p = c;
    int dir = c.src_dev ? (c.dst_dev ? 8 : 2) : (c.dst_dev ? 1 : 9); /* CUPTI's memcpy kinds */
    return ft_emu_submit(s, (ft_emu_work){copy_run, free, p,
                                          c.value >= 0 ? "cudaMemsetAsync" : "cudaMemcpyAsync",
                                          c.width * c.height, c.value >= 0 ? 0 : dir, 0});
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

/* ---- device, versions, errors --------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return err(cudaErrorInvalidValue);
    return (*count = !fk_no_device()) ? cudaSuccess : err(cudaErrorNoDevice);
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
        .major = cc() / 10, .minor = cc() % 10, .multiProcessorCount = 132, .totalGlobalMem = budget_bytes(),
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

cudaError_t cudaGetLastError(void) { cudaError_t e = fk_last; fk_last = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError(void) { return fk_last; }

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

/*
 * fake_cudart_internal.h - what the two halves of the fake CUDA runtime share
 * (not part of emu.h's interface): fake_cudart.c (device and pinned memory,
 * copies, launches, device queries, errors) and fake_graph.c (handles, streams,
 * stream capture, the FT_EMU_LAZY queues, events, graphs).
 */
#ifndef FT_FAKE_CUDART_INTERNAL_H
#define FT_FAKE_CUDART_INTERNAL_H

#include "emu.h"

#include <pthread.h>
#include <stdint.h>

/* One lock for every registry of both files. Never held while work runs:
 * kernels run inside run() and may call back into ft_emu_is_device_ptr. */
extern pthread_mutex_t fk_mu;
#define LOCK() pthread_mutex_lock(&fk_mu)
#define UNLOCK() pthread_mutex_unlock(&fk_mu)

/* The last error is per host thread, as in the real runtime. */
extern _Thread_local cudaError_t fk_last;

static inline cudaError_t err(cudaError_t e) { return e != cudaSuccess ? (fk_last = e) : e; }

#define UNLOCK_RETURN(e) do { cudaError_t r_ = (e); UNLOCK(); return err(r_); } while (0)

/* FT_EMU_NO_DEVICE, read at every call (a test flips it with setenv). */
int fk_no_device(void);

/* The emulated device's compute capability major (FT_EMU_CC, read at every call). */
int fk_cc_major(void);

/* Without a device every device call fails, as the real runtime's lazy init does. */
#define ENTER() do { if (fk_no_device()) return err(cudaErrorNoDevice); } while (0)

/* The rule of cudaThreadExchangeStreamCaptureMode for the default (Global)
 * interaction mode: cudaSuccess, or the refusal of a potentially unsafe call
 * (which invalidates the captures concerned). Takes the lock. */
cudaError_t fk_unsafe_call(void);

/* ENTER, then refuse a call that is potentially unsafe during stream capture. */
#define ENTER_UNSAFE() \
    do { ENTER(); cudaError_t u_ = fk_unsafe_call(); if (u_) return u_; } while (0)

/* The array v (n items of elem bytes, room for *cap) with room for one more,
 * possibly moved; NULL when out of memory (v is then left as it was). */
void *fk_grow(void *v, size_t *cap, size_t n, size_t elem);

/* ---- streams (fake_graph.c) ---------------------------------------------- */

typedef struct fk_stream fk_stream;

/* Lock held. The stream that stream work goes to (*out is set whenever the
 * handle is live, so a failing operation can invalidate its capture). */
cudaError_t fk_stream_for_work(cudaStream_t s, fk_stream **out);

void fk_invalidate(fk_stream *st); /* lock held; st may be NULL */
int fk_capturing(const fk_stream *st); /* lock held; st may be NULL */

/* FT_EMU_LAZY=1 (read once): work submitted to a stream that is not capturing
 * waits in the stream's FIFO queue until the host synchronises with it. */
int fk_lazy(void);

/* Lock not held: run st's queue / every stream's queue, in order, until empty.
 * Nothing to do (and nothing done) outside lazy mode. */
void fk_run_stream(fk_stream *st);
void fk_run_all(void);

/* ---- fake_cupti.c: what the runtime tells the fake CUPTI ------------------ */

/* One stream-work call being traced (on = 0: CUPTI collects nothing). */
typedef struct fk_api {
    int on, driver;
    uint32_t corr, cbid, stream;
    uint32_t dev_corr; /* the id its device records carry (corr, unless the
                          emulated CUPTI 13.0 mislabels a graph launch) */
    uint64_t start;
} fk_api;

/* Around ft_emu_submit: the call's correlation id and start; wrap makes w
 * write its device record when it runs (0, or -1 out of memory); end writes
 * the API record and the external correlations pushed on this thread. */
fk_api fk_cupti_api_begin(cudaStream_t s, const ft_emu_work *w);
int fk_cupti_wrap(ft_emu_work *w, const fk_api *a);
void fk_cupti_api_end(const fk_api *a);
/* Runs node i of a graph replay; inside a traced launch it writes the node's
 * device record with the launch's correlation id and graphNodeId i + 1. */
void fk_cupti_run_node(const ft_emu_work *w, size_t i);

#endif /* FT_FAKE_CUDART_INTERNAL_H */

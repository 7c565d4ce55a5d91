/*
 * profiler.h - internals shared by the profiler (engine/profiler.c, the op
 * records, metrics and writers) and its CUPTI layer (engine/cupti.c): the one
 * clock and the device-activity record both sides use.
 *
 * Everything that goes into one window's numbers is read from
 * ft_prof_now_ns(): the dispatcher phase timers directly, and CUPTI through
 * its timestamp callback, so host and device events can be subtracted from
 * each other without any clock translation.
 */
#ifndef FT_PROFILER_H
#define FT_PROFILER_H

#include "ft_internal.h"
#include "replay_map.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC_RAW: not slewed by NTP, so intervals are true durations; a
 * vDSO call on Linux (tens of nanoseconds). */
static inline uint64_t ft_prof_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_RAW, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* What a device-activity record describes. */
typedef enum ft_gpu_kind {
    FT_GPU_KERNEL = 0,
    FT_GPU_MEMCPY,
    FT_GPU_MEMSET,
    FT_GPU_RUNTIME, /* a CUDA runtime or driver API call, on a host thread */
    FT_GPU_KIND_COUNT
} ft_gpu_kind;

/* One CUPTI record, flattened. Times in ft_prof_now_ns() nanoseconds. */
typedef struct ft_gpu_rec {
    uint64_t start, end;
    uint64_t bytes;       /* memcpy / memset */
    uint64_t graph_node;  /* kernel inside a CUDA graph replay: the node id, else 0 */
    int64_t op;           /* op record index from the external correlation, -1 if none */
    uint32_t correlation; /* CUPTI correlation id (launch call <-> device work) */
    uint32_t stream;      /* device work: CUPTI stream id; runtime: OS thread id */
    uint32_t device;
    uint32_t name;        /* offset of the name in the string pool */
    uint8_t kind;         /* ft_gpu_kind */
    uint8_t pad[3];
    int32_t step;         /* device work of a CUDA graph replay: the plan step that captured
                             it (ft_prof_attribute_replays), else -1 */
    uint64_t own_start;   /* device work: where its own time starts, past the end of all
                             earlier work on its stream (set by the summary; differs from
                             start when a PDL launch started beside its predecessor) */
} ft_gpu_rec;

/* ---- CUPTI layer (engine/cupti.c) ----
 * CUPTI is process-wide: one subscriber, one set of enabled kinds, one window
 * collecting at a time. Without FT_WITH_CUPTI every call reports
 * FT_ERR_UNSUPPORTED and nothing else happens. Messages go to `msg`, never to
 * a stream: the library does not print. */

/* Enables CUPTI activity tracing for the process (once; later calls only make
 * sure `max_records` fit). FT_ERR_UNSUPPORTED with the reason when CUPTI cannot
 * be used (not compiled in, another CUPTI client attached, an enable failed). */
ft_status ft_cupti_acquire(size_t max_records, char *msg, size_t msg_size);
/* Opens a collecting window: flushes and discards older records. Call with
 * the device idle. FT_ERR_INVALID_ARG if a window is already open. */
ft_status ft_cupti_window_begin(char *msg, size_t msg_size);
/* Closes the window: flushes (call after the device has finished), stops
 * collecting and joins records to op indices through the external
 * correlation records. */
ft_status ft_cupti_window_end(char *msg, size_t msg_size);
/* Around an op's launch phase: device work launched in between is tagged with
 * op index `op`. 0 on success, -1 if CUPTI refused (counted by the caller). */
int ft_cupti_push(int64_t op);
int ft_cupti_pop(void);
/* The closed window's records (valid until the next window_begin). */
const ft_gpu_rec *ft_cupti_records(size_t *n);
const char *ft_cupti_string(uint32_t offset);
/* Records lost in the closed window: CUPTI's count (no buffer) plus ours (store full). */
uint64_t ft_cupti_dropped(void);
/* Nanoseconds of CUPTI OVERHEAD records in the closed window. */
uint64_t ft_cupti_overhead_ns(void);

/* The first CUPTI whose later sessions give cudaGraphLaunch calls and their
 * kernels the right correlation ids (13.1 Update 1, by its release notes). Its
 * cuptiGetVersion number is not known here: 13.1's first number (1301zz,
 * zz = 01 for its first update, as 13.0 Update 1 is 130001) is taken, so a
 * CUPTI that numbers its update otherwise errs on the safe side (one session). */
#define FT_CUPTI_GRAPH_CORR_FIXED 130101u
/* 1 if a CUPTI of this cuptiGetVersion may open more than one session per
 * process (FT_CUPTI_SESSION=window is honoured only then). */
int ft_cupti_session_per_window_ok(uint32_t version);
/* The process's CUPTI sessions so far (engine/cupti.c keeps one, see there). */
typedef struct ft_cupti_session {
    int sessions;     /* subscribe + enable cycles this process made */
    int attached;     /* the session is on now */
    int per_window;   /* FT_CUPTI_SESSION=window honoured */
    uint32_t version; /* cuptiGetVersion at the first window; 0 before it or unknown */
} ft_cupti_session;
void ft_cupti_session_info(ft_cupti_session *s);


/* ---- the profiler object (engine/profiler.c; written out by profiler_trace.c) ---- */

#define FT_PROF_MAX_DEPTH 8  /* nested op calls tracked (dispatch inside a kernel) */
#define FT_PROF_MAX_NAMES (FT_OP_COUNT + 8)
#define FT_PROF_MAX_REPLAY_MAPS 32 /* distinct captured plans replayed in one window */

/* One op call inside the window. Filled by the hooks: nothing here is formatted
 * or allocated on the hot path. */
typedef struct ft_prof_op {
    uint64_t begin, end;                 /* op_begin / op_end */
    uint64_t ph[FT_PHASE_COUNT][2];      /* phase begin / end; 0 if not entered */
    int64_t ne[FT_MAX_DIMS];             /* output shape at op_end */
    uint64_t gpu_ns;                     /* linked device time (CUPTI) */
    int32_t node_id;
    int32_t status;
    int32_t n_gpu;                       /* linked device records */
    int16_t op;                          /* ft_op, or -1 for a pseudo op named by label */
    int8_t ndim, dtype;
    uint8_t pushed;                      /* an external correlation id is pushed */
    uint8_t attributed;                  /* a replay whose device work went to its plan steps */
    int16_t replay;                      /* a CUDA graph replay: 1 + its map's index in
                                            ft_profiler.replays, else 0 */
    char label[15];                      /* pseudo ops: "graph_launch", "static_plan" */
} ft_prof_op;

/* Totals per op name. */
typedef struct ft_prof_name {
    const char *name;
    int64_t calls, kernels, replayed;
    uint64_t host_ns, gpu_ns, phase_ns[FT_PHASE_COUNT];
} ft_prof_name;

struct ft_profiler {
    ft_ctx *ctx;
    ft_profiler_options opt;
    ft_dispatch_hooks hooks;        /* ours, user = this profiler */
    const ft_dispatch_hooks *prev;  /* what was installed before (NVTX): chained */
    int open;                       /* a window is open */
    int cupti_ok;                   /* CUPTI acquired for this profiler */
    int cupti_window;               /* the current/last window collects CUPTI records */
    char cupti_note[160];
    uint64_t t0, t1;
    long tid;                       /* OS thread that opened the window */

    ft_prof_op *ops;
    int64_t n_ops, cap_ops;
    uint64_t ops_dropped;
    int64_t stack[FT_PROF_MAX_DEPTH];
    int depth;
    uint64_t corr_errors;

    ft_replay_map *replays[FT_PROF_MAX_REPLAY_MAPS]; /* referenced until the next start or free */
    int n_replays;
    int64_t graph_replays;          /* op records of CUDA graph replays (with a map or not) */

    ft_gpu_rec *gpu;                /* copied out of the CUPTI store at stop */
    size_t n_gpu, cap_gpu;
    uint64_t gpu_dropped;

    ft_prof_name names[FT_PROF_MAX_NAMES];
    int n_names;
    ft_profile_summary sum;
};

/* Name of an op record ("matmul", "graph_launch"). */
const char *ft_prof_op_name(const ft_prof_op *r);

/* The plan step a device record of an attributed replay belongs to (g->step >= 0). */
static inline const ft_replay_step *ft_prof_replay_step(const ft_profiler *p, const ft_gpu_rec *g) {
    return &p->replays[p->ops[g->op].replay - 1]->step[g->step];
}

/* Closes the window's numbers from its device records (at most cap_gpu of
 * them are kept, the rest count as dropped): CUPTI's, from ft_profiler_stop,
 * or a test's. */
ft_status ft_prof_finish(ft_profiler *p, const ft_gpu_rec *recs, size_t n, uint64_t dropped);

/* Gives the device work of each CUDA graph replay in recs to the plan steps
 * that captured it (sets rec.step, and ops[i].attributed for the replays
 * done): the replay of op record i has map maps[ops[i].replay - 1], and is
 * attributed only when its records all have timestamps and number exactly
 * the map's device-work nodes. Returns the replays attributed, or -1 out of
 * host memory. (engine/profiler_replay.c) */
int64_t ft_prof_attribute_replays(ft_gpu_rec *recs, size_t n, ft_prof_op *ops, int64_t n_ops,
                                  ft_replay_map *const *maps, int n_maps);

#ifdef __cplusplus
}
#endif

#endif /* FT_PROFILER_H */

/*
 * ft_internal.h - engine internals shared by the core, the kernels, the graph
 * machinery and the models. Not installed. Included from C and from CUDA C++.
 *
 * The central object is `struct ft_tensor`. The same struct is both an eager
 * tensor (data allocated, kernel already run) and a node of the graph IR (op,
 * sources and parameters recorded, data assigned later by the memory planner),
 * which is what lets one model definition run in every execution mode.
 */
#ifndef FT_INTERNAL_H
#define FT_INTERNAL_H

#include "ftengine.h"
#include "ops.h"
#include "env.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FT_MAX_SRC 8 /* attention_rel takes 7 */
#define FT_MAX_OP_PARAMS 64 /* bytes */
#define FT_MAX_NAME 64

/* Tensor flags */
enum {
    FT_TF_INPUT = 1u << 0,      /* a model input (graph placeholder) */
    FT_TF_OUTPUT = 1u << 1,     /* a model output: never fused away, never reused */
    FT_TF_WEIGHT = 1u << 2,     /* a model parameter (constant for the graph) */
    FT_TF_CONST = 1u << 3,      /* a constant made from host data during the forward */
    FT_TF_VIEW = 1u << 4,       /* aliases view_src's storage */
    FT_TF_PERSISTENT = 1u << 5, /* header malloc'd, not in the context's tensor arena */
    FT_TF_RELEASED = 1u << 6,   /* storage reference given back */
    FT_TF_REPLAY = 1u << 7,     /* a whole-plan pseudo op (no op, named) whose extra is the
                                   ft_replay_map of the CUDA graph it launches */
    FT_TF_NCHWC = 1u << 8       /* CPU graph plans: data in the blocked-channel order
                                   [N, C/16, H, W, 16] of a logical [N, C, H, W] (C a multiple
                                   of 16; shape and strides still NCHW's): only the kernels of
                                   kernels/cpu/nchwc.h read or write it (graph/pass_nchwc.c) */
};

/* A block of device or host memory handed out by an allocator. */
typedef struct ft_block {
    void *ptr;
    size_t size;     /* bytes usable (the size class) */
    int refs;        /* tensors referencing this block */
    int size_class;  /* index of the free list it returns to */
    struct ft_allocator *owner;
    struct ft_block *next; /* free-list link */
    /* model parameters: a process-wide stamp renewed at every write of the data
     * (ft_tensor_mark_written), 0 when handed out; every header sharing the
     * storage sees it. Keys the CPU eager pack cache (kernels/cpu/pack_cache.c) */
    uint64_t version;
} ft_block;

/*
 * struct ft_tensor: shape in PyTorch order (ne[0] outermost); strides nb[] in
 * elements; element (i0, ..., in) lives at data + sum(ik * nb[k]) * dtype size.
 * `data` already includes a view's offset. A view's storage belongs to view_src
 * (always a non-view root) at element offset view_offs.
 */
struct ft_tensor {
    ft_dtype dtype;
    int ndim;
    int64_t ne[FT_MAX_DIMS];
    int64_t nb[FT_MAX_DIMS];
    void *data;
    ft_device device;

    ft_op op;
    int64_t op_params[FT_MAX_OP_PARAMS / 8]; /* per-op struct from ops.h, memcpy'd */
    struct ft_tensor *src[FT_MAX_SRC];       /* inputs; unused slots NULL */
    struct ft_tensor *view_src;
    int64_t view_offs;

    ft_block *block;  /* storage this tensor holds a reference on (roots and views) */
    uint32_t flags;
    int32_t id;       /* position in a trace or graph; -1 otherwise */
    void *extra;      /* backend data resolved at plan time (e.g. a GEMM algorithm) */
    char name[FT_MAX_NAME];
    struct ft_ctx *ctx; /* the context that made it (NULL: a graph's own node) */
};

/* ------------------------------------------------------------------------- */
/* Allocators: one caching allocator per device, sys_alloc/sys_free pluggable   */
/* ------------------------------------------------------------------------- */

#define FT_ALLOC_NUM_CLASSES 160

typedef struct ft_allocator {
    ft_device device;
    const char *name;
    /* system allocation: returns NULL and fills err (bytes wanted, reason) on failure */
    void *(*sys_alloc)(struct ft_allocator *a, size_t bytes, char *err, size_t errsize);
    void (*sys_free)(struct ft_allocator *a, void *ptr);
    void *impl;                               /* backend data (e.g. the CUDA device) */
    ft_block *free_list[FT_ALLOC_NUM_CLASSES]; /* cached blocks per size class */
    ft_mem_stats stats;
    int caching; /* 0 disables reuse (every free goes back to the system) */
    size_t limit; /* most bytes reserved from the system at once; 0 = no limit */
} ft_allocator;

/* size class for a request; returns the class index and its byte size */
int ft_alloc_size_class(size_t bytes, size_t *class_bytes);
void ft_allocator_init(ft_allocator *a, ft_device dev, const char *name);
/* Takes a block of at least `bytes`; on failure records FT_ERR_OOM in ctx, returns NULL. */
ft_block *ft_allocator_alloc(ft_allocator *a, ft_ctx *ctx, size_t bytes);
/* Drops one reference; the block returns to its free list at zero. */
void ft_block_unref(ft_block *b);
/* Gives every cached block back to the system. */
void ft_allocator_trim(ft_allocator *a);

/* Scratch blocks owned by a captured plan. A CUDA graph replays with the
 * addresses it saw during capture, so scratch a kernel takes while the plan is
 * warmed up and captured must not go back to the allocator (where eager ops or
 * another plan would get it) but stay with the plan until it is freed. While
 * ctx->scratch_pool is set, ft_cuda_scratch serves requests from the pool,
 * growing it outside capture only. */
typedef struct ft_scratch_pool {
    ft_block **blk; /* each holds one reference of the pool's own */
    int n, cap;
    size_t bytes;   /* sum of the blocks' sizes */
} ft_scratch_pool;

/* A block of at least `bytes` from the pool that no kernel holds (smallest fit),
 * with one more reference for the caller; NULL when none fits. */
ft_block *ft_scratch_pool_take(ft_scratch_pool *p, size_t bytes);
/* Adds a freshly allocated block (the caller's reference stays the caller's). 0 or -1. */
int ft_scratch_pool_add(ft_scratch_pool *p, ft_block *b);
/* Drops the pool's references and empties it. */
void ft_scratch_pool_release(ft_scratch_pool *p);
void ft_allocator_destroy(ft_allocator *a);
/* The plain CPU allocator (64-byte aligned). */
void ft_allocator_init_cpu(ft_allocator *a);

/* ------------------------------------------------------------------------- */
/* Context                                                                    */
/* ------------------------------------------------------------------------- */

/* How the dispatcher treats an op call. */
typedef enum ft_exec_kind {
    FT_EXEC_EAGER = 0, /* check, infer, allocate, select, launch now */
    FT_EXEC_TRACE = 1  /* check, infer and record the node; nothing allocated or run */
} ft_exec_kind;

/* Per-op counters kept by the dispatcher (instrumentation builds on these). */
typedef struct ft_op_counter {
    uint64_t calls;
    uint64_t launches;
} ft_op_counter;

/* Tensor headers created by ops live in chunks that are recycled by scope. */
#define FT_ARENA_CHUNK 256
typedef struct ft_arena_chunk {
    struct ft_arena_chunk *next;
    struct ft_tensor t[FT_ARENA_CHUNK];
} ft_arena_chunk;

typedef struct ft_arena {
    ft_arena_chunk *head;   /* first chunk */
    ft_arena_chunk *cur;    /* chunk holding the next free slot */
    int cur_used;           /* slots used in cur */
    int64_t count;          /* tensors handed out since the arena was empty */
} ft_arena;

/* Hooks around the dispatcher phases (NVTX, timers; see engine/dispatch.c). */
typedef enum ft_phase {
    FT_PHASE_CHECK = 0,
    FT_PHASE_INFER,
    FT_PHASE_ALLOC,
    FT_PHASE_SELECT,
    FT_PHASE_LAUNCH,
    FT_PHASE_COUNT
} ft_phase;

typedef struct ft_dispatch_hooks {
    void (*op_begin)(void *user, const ft_tensor *node);
    void (*phase_begin)(void *user, ft_phase phase, const ft_tensor *node);
    void (*phase_end)(void *user, ft_phase phase, const ft_tensor *node);
    void (*op_end)(void *user, const ft_tensor *node, ft_status st);
    void *user;
} ft_dispatch_hooks;


struct ft_trace; /* graph/trace.h */

struct ft_ctx {
    ft_device device;
    int device_index;
    int opt_pdl, opt_gemm_autotune; /* ft_ctx_options.pdl / .gemm_autotune (FT_OPT_*) */
    int cpu_threads;
    char device_label[320]; /* ft_ctx_device_label, filled on first use */

    ft_status status;
    char errmsg[1024];

    ft_allocator alloc;   /* the device's caching allocator */
    void *cuda;           /* struct ft_cuda_state * (engine/cuda_backend.c), NULL on CPU */

    ft_arena arena;       /* headers of tensors created by ops */
    ft_exec_kind exec;
    struct ft_trace *trace; /* recording target while exec == FT_EXEC_TRACE */

    const ft_dispatch_hooks *hooks; /* NULL: no instrumentation */
    /* NVTX (engine/nvtx.h): on when a tool listens; its hooks (user = this context) */
    int nvtx;
    int nvtx_quiet;       /* set by the executor around a plan run: its steps push ranges */
    int nvtx_phase_open;  /* a phase range is open (a failing op closes it) */
    int64_t nvtx_seq, nvtx_forwards; /* payloads: op index in the forward, forward index */
    ft_dispatch_hooks nvtx_hooks;
    ft_op_counter counters[FT_OP_COUNT];
    int sync_debug;       /* FT_SYNC_DEBUG=1: synchronize after every op (CUDA) */
    double extra_op_cost_us; /* emulated per-op host cost (FT_OP_HOST_COST_US) */
    double extra_step_cost_us; /* emulated per-step host cost of graph mode (FT_STEP_HOST_COST_US) */
    ft_scratch_pool *scratch_pool; /* set by the executor around warm-up and capture */
    struct ft_profiler *profiler;  /* the profiler made for this context, if any (engine/profiler.c) */
    struct ft_cpu_scratch *cpu_scratch;       /* CPU kernels' scratch (kernels/cpu/scratch.c) */
    struct ft_cpu_pack_cache *cpu_pack_cache; /* eager packed weights (kernels/cpu/pack_cache.c) */
    /* the thread inside a public call (ft_ctx_enter), NULL when none; atomic */
    void *busy_owner;
    int busy_depth; /* nested entries of that thread (a forward's ops) */
};

/* ------------------------------------------------------------------------- */
/* Public API guards (engine/ctx.c)                                           */
/* ------------------------------------------------------------------------- */

/* Every public function checks its pointer arguments with these, so a NULL is
 * FT_ERR_INVALID_ARG naming the function and the argument, never a crash:
 *     if (!FT_ARG_OK(ctx, x) || !FT_ARG_OK(ctx, shape)) return NULL;
 * The message is recorded in ctx (when there is one and no error is pending). */
ft_status ft_api_null(ft_ctx *ctx, const char *fn, const char *arg);
#define FT_ARG_OK(ctx, ptr) ((ptr) != NULL || (ft_api_null((ctx), __func__, #ptr), 0))
/* A tensor of another context: FT_ERR_INVALID_ARG naming fn and the argument. */
bool ft_tensor_of_ctx(ft_ctx *ctx, const ft_tensor *t, const char *fn, const char *arg);
#define FT_TENSOR_OK(ctx, t) (FT_ARG_OK(ctx, t) && ft_tensor_of_ctx((ctx), (t), __func__, #t))

/* One thread at a time per context: a public call that mutates the context enters
 * it first and leaves it on return. Entering again from the thread inside (an op
 * of a model's forward) nests; from another thread it fails with FT_ERR_BUSY,
 * reported to that thread only (ft_ctx_status/ft_ctx_errmsg called from it), so
 * the working thread's state is never written by the refused one. */
ft_status ft_ctx_enter(ft_ctx *ctx, const char *fn);
void ft_ctx_leave(ft_ctx *ctx);

/* kernels/cpu: frees the context's CPU scratch and pack cache (ft_ctx_free);
 * drops a tensor's packed panels from the cache (ft_tensor_free_persistent). */
void ft_cpu_ctx_release(ft_ctx *ctx);
void ft_cpu_pack_cache_free(ft_ctx *ctx);
void ft_cpu_pack_cache_drop(ft_ctx *ctx, const ft_tensor *w);
/* Bytes of the CPU scratch and of the pack cache (ft_ctx_mem_stats). */
size_t ft_cpu_scratch_bytes(const ft_ctx *ctx);
size_t ft_cpu_pack_cache_bytes(const ft_ctx *ctx);

/* Records an error in the context (keeps the first one while an error is pending,
 * unless `force`); returns `st` so callers can `return ft_set_error(...)`. */
ft_status ft_set_error(ft_ctx *ctx, ft_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
ft_status ft_set_errorv(ft_ctx *ctx, ft_status st, const char *fmt, va_list ap);
/* Prefixes the pending message with more context: "<prefix>: <old message>". */
void ft_error_prefix(ft_ctx *ctx, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ------------------------------------------------------------------------- */
/* Tensors (engine/tensor.c)                                                  */
/* ------------------------------------------------------------------------- */

/* A fresh zeroed header from the context arena (eager temporaries, trace nodes). */
ft_tensor *ft_tensor_alloc_header(ft_ctx *ctx);
/* Gives t's storage a fresh version stamp: every write of a model parameter's
 * data calls it (or ft_weight_store), so caches keyed on the stamp see it. */
void ft_tensor_mark_written(ft_tensor *t);
/* Copies `bytes` of host data into parameter t's storage and stamps it. */
ft_status ft_weight_store(ft_ctx *ctx, ft_tensor *t, const void *src, size_t bytes);
/* A fresh zeroed malloc'd header, flagged PERSISTENT (weights, outputs, caches). */
ft_tensor *ft_tensor_new_persistent(ft_ctx *ctx);
/* Frees a persistent header and drops its storage reference. */
void ft_tensor_free_persistent(ft_tensor *t);
/* A persistent header that shares t's storage (adds a reference). */
ft_tensor *ft_tensor_keep(ft_ctx *ctx, const ft_tensor *t);

/* Marks and releases of the arena (model forwards are scopes). */
int64_t ft_arena_mark(const ft_ctx *ctx);
void ft_arena_release_to(ft_ctx *ctx, int64_t mark);

void ft_tensor_set_contiguous_strides(ft_tensor *t);
bool ft_tensor_contiguous(const ft_tensor *t);
int64_t ft_numel(const ft_tensor *t);
size_t ft_nbytes(const ft_tensor *t); /* numel * element size (contiguous extent) */
/* The last dim has stride 1 and the leading dims collapse into one row stride. */
bool ft_tensor_rows_layout(const ft_tensor *t, int64_t *rows, int64_t *row_stride);
/* How a GEMM operand t [..., R, C] sits in memory: its batch dims collapse into
 * `batch` matrices `batch_stride` apart (0 when batch == 1 or broadcast), each
 * row-major (trans = false, rows ld apart) or column-major (trans = true, columns
 * ld apart). False if the layout is none of these (the op API copies it first).
 * Shared by the op API, the CPU kernels and the CUDA kernels. */
bool ft_gemm_operand(const ft_tensor *t, int64_t *batch, int64_t *batch_stride, bool *trans,
                     int64_t *ld);
/* Normalises a possibly negative dim; returns -1 if out of range. */
int ft_norm_dim(int dim, int ndim);
bool ft_shape_equal(const ft_tensor *a, const ft_tensor *b);
/* Writes "[2,16,64] f32" */
const char *ft_shape_str(const ft_tensor *t, char *buf, size_t size);
/* Allocates storage for a root tensor from the context allocator (eager). */
ft_status ft_tensor_alloc_storage(ft_ctx *ctx, ft_tensor *t);
/* FT_ERR_SHAPE with a message when t's shape overflows or passes FT_MAX_BYTES
 * (engine/ft_checked.h); checked on every op output, constant and input. */
ft_status ft_tensor_check_size(ft_ctx *ctx, const ft_tensor *t);
void ft_tensor_drop_storage(ft_tensor *t);
/* Copies src (any strides) into `dst`, a contiguous buffer of src's shape and dtype
 * on the context's device, with the device's COPY kernel (no separate device-to-
 * device API path to keep in step with the kernels). */
ft_status ft_tensor_copy_raw(ft_ctx *ctx, void *dst, const ft_tensor *src);
/* Whether a dtype is floating point (f32, f16, bf16). */
bool ft_dtype_is_float(ft_dtype t);

/* Host copies: device-aware (CUDA copies go through the CUDA backend). */
ft_status ft_copy_to_device(ft_ctx *ctx, void *dst, const void *src, size_t bytes);
ft_status ft_copy_to_host(ft_ctx *ctx, void *dst, const void *src, size_t bytes);

/* fp16 / bf16 <-> f32 conversions (engine/dtype.c; round to nearest even). */
float ft_f16_to_f32(uint16_t h);
uint16_t ft_f32_to_f16(float f);
float ft_bf16_to_f32(uint16_t h);
uint16_t ft_f32_to_bf16(float f);
/* Converts n elements between host arrays of any two float dtypes or any two int dtypes. */
ft_status ft_convert_host(ft_dtype dst_t, void *dst, ft_dtype src_t, const void *src, int64_t n);

/* ------------------------------------------------------------------------- */
/* Dispatcher (engine/dispatch.c)                                             */
/* ------------------------------------------------------------------------- */

/*
 * The one entry point of every op call. Builds the node (op, sources, params),
 * then: check arguments -> infer shape -> allocate output -> select kernel ->
 * launch (eager), or stops after infer and records the node (trace).
 * Returns the node, or NULL with the error recorded in ctx.
 */
ft_tensor *ft_dispatch(ft_ctx *ctx, ft_op op, ft_tensor *const *src, int n_src,
                       const void *params, size_t params_size);
/* Creates a view node of x with the given shape, strides and element offset
 * (relative to x's first element). */
ft_tensor *ft_dispatch_view(ft_ctx *ctx, ft_tensor *x, int ndim, const int64_t *ne,
                            const int64_t *nb, int64_t offs);
/* Runs an already checked, inferred and allocated node (the executor's path). */
ft_status ft_node_launch(ft_ctx *ctx, ft_tensor *node);
/* The kernel the dispatcher would pick for node on ctx's device, or NULL. */
ft_kernel_fn ft_select_kernel(const ft_ctx *ctx, const ft_tensor *node);
/* "layernorm(x=[2,16,64] f32, gamma=[64] f32, beta=[64] f32)" */
const char *ft_node_describe(const ft_tensor *node, char *buf, size_t size);

/* Typed access to op parameters. */
#define FT_PARAMS(t, type) ((const type *)(const void *)(t)->op_params)

#ifdef __cplusplus
}
#endif

#endif /* FT_INTERNAL_H */

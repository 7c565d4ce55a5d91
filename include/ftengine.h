/*
 * ftengine.h - the public API of ftengine, and its manual.
 *
 * ftengine is a small CUDA inference engine in C whose dispatcher is instrumented
 * end to end. It exists to measure the "framework tax": at small batch sizes a
 * model's latency is set by the host-side cost of dispatching ops, not by FLOPs.
 *
 * ---------------------------------------------------------------------------
 * Quick start
 * ---------------------------------------------------------------------------
 *
 *     ft_ctx *ctx = NULL;
 *     ft_model *model = NULL;
 *     if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) return 1;
 *     ft_model_options opt = ft_model_options_default();
 *     if (ft_model_load(ctx, "tests/golden/bert", &opt, &model) != FT_OK) {
 *         fprintf(stderr, "%s\n", ft_ctx_errmsg(ctx));
 *         ...
 *     }
 *     int64_t ids[2 * 16] = {...};
 *     ft_host_tensor in[] = {{ "input_ids", FT_DTYPE_I64, 2, {2, 16}, ids }};
 *     if (ft_model_forward(model, in, 1) != FT_OK) ...;
 *     ft_tensor *h = ft_model_output_find(model, "last_hidden_state");
 *     float *buf = malloc(ft_tensor_numel(h) * sizeof(float));
 *     ft_tensor_to_host(ctx, h, FT_DTYPE_F32, buf, ft_tensor_numel(h) * sizeof(float));
 *     ft_model_free(model);
 *     ft_ctx_free(ctx);
 *
 * ---------------------------------------------------------------------------
 * Objects and ownership
 * ---------------------------------------------------------------------------
 *
 * - ft_ctx: one execution context on one device (CPU, or one CUDA device with one
 *   non-blocking stream). It owns the caching allocator, the library handles, the
 *   last error message, and every tensor created by ops called on it.
 * - ft_model: a loaded model (weights on the context's device, an architecture, an
 *   execution mode). It belongs to the context it was loaded on; free the model
 *   before the context.
 * - ft_tensor: an n-d array (up to FT_MAX_DIMS dims) on the context's device, with
 *   a dtype, a shape and strides (in elements). A view shares its storage with the
 *   tensor it was made from. Tensors returned by ops are owned by the context:
 *   call ft_tensor_release() to give their memory back early (like `del x` in
 *   PyTorch); otherwise they live until ft_ctx_reset() or ft_ctx_free().
 *   Model outputs are owned by the model and stay valid until its next forward.
 *
 * Constructors have the shape `ft_status ft_X_create(..., ft_X **out)`: on failure
 * *out is NULL and nothing needs freeing. Every `ft_X_free(NULL)` is a no-op.
 *
 * ---------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------------
 *
 * Functions return ft_status (FT_OK = 0). A readable message naming what failed
 * (op, shapes and dtypes; file and tensor or key; CUDA call and its error) is kept
 * in the context: ft_ctx_errmsg(). Functions that return a tensor return NULL on
 * error and record the error in the context. Errors are sticky: once a context
 * holds an error, further ops return NULL without running, so a model's forward can
 * be written as straight-line code and checked once at the end with
 * ft_ctx_status(). ft_ctx_clear_error() clears it. The library never prints and
 * never exits.
 *
 * ---------------------------------------------------------------------------
 * Execution modes
 * ---------------------------------------------------------------------------
 *
 * The same model code runs in three modes (ft_mode):
 * - FT_MODE_EAGER: each op goes through the dispatcher at once: argument checks,
 *   shape inference, output allocation from the caching allocator, kernel selection,
 *   launch (what PyTorch eager does).
 * - FT_MODE_GRAPH: the model is traced once per input signature into a graph;
 *   passes fuse ops, drop dead nodes and plan memory; the plan then runs op by op
 *   with everything resolved at plan time.
 * - FT_MODE_STATIC: the graph-mode plan captured into a CUDA Graph per input shape
 *   and replayed with one launch (on CPU: the plan run with no per-op dispatch).
 * A mode that is not available in this build is refused with FT_ERR_UNSUPPORTED.
 *
 * ---------------------------------------------------------------------------
 * Threading
 * ---------------------------------------------------------------------------
 *
 * A context and everything made from it must be used by one thread at a time
 * (FT_ERR_BUSY otherwise); different contexts may be used from different threads
 * concurrently. On CUDA, work is enqueued asynchronously on the context's stream;
 * ft_tensor_to_host() and ft_ctx_sync() wait for it.
 */
#ifndef FTENGINE_H
#define FTENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FT_VERSION_MAJOR 0
#define FT_VERSION_MINOR 1
#define FT_VERSION_PATCH 0
#define FT_VERSION_STRING "0.1.0"

/** Most dimensions a tensor may have. */
#define FT_MAX_DIMS 6

/* ------------------------------------------------------------------------- */
/* Status codes                                                               */
/* ------------------------------------------------------------------------- */

typedef enum ft_status {
    FT_OK = 0,
    FT_ERR_INVALID_ARG = 1, /* a bad argument: NULL, another context's tensor, out-of-range value */
    FT_ERR_SHAPE = 2,       /* shapes that do not fit the op or the model */
    FT_ERR_OOM = 3,         /* host or device memory exhausted */
    FT_ERR_IO = 4,          /* a file could not be opened, read or written */
    FT_ERR_FORMAT = 5,      /* a malformed file: safetensors, JSON, config */
    FT_ERR_UNSUPPORTED = 6, /* a mode, device, dtype or option not available */
    FT_ERR_CUDA = 7,        /* a CUDA runtime call failed */
    FT_ERR_CUBLAS = 8,      /* a cuBLAS or cuBLASLt call failed */
    FT_ERR_NOT_FOUND = 9,   /* a tensor, key, preset or output that does not exist */
    FT_ERR_PLAN_MISMATCH = 10, /* a graph plan run with inputs it was not built for */
    FT_ERR_CAPTURE = 11,    /* CUDA graph capture or instantiation failed */
    FT_ERR_INTERNAL = 12,   /* a broken invariant inside the engine (a bug) */
    FT_ERR_BUSY = 13        /* another thread is inside the context: the call did nothing */
} ft_status;

/** A short fixed name for a status ("FT_ERR_SHAPE"). Never NULL. */
const char *ft_status_str(ft_status s);

/* ------------------------------------------------------------------------- */
/* Devices, dtypes, modes                                                     */
/* ------------------------------------------------------------------------- */

typedef enum ft_device {
    FT_DEVICE_CPU = 0,
    FT_DEVICE_CUDA = 1
} ft_device;

typedef enum ft_dtype {
    FT_DTYPE_F32 = 0,
    FT_DTYPE_F16 = 1,
    FT_DTYPE_BF16 = 2,
    FT_DTYPE_I64 = 3,
    FT_DTYPE_I32 = 4,
    FT_DTYPE_COUNT
} ft_dtype;

/** "f32", "f16", "bf16", "i64", "i32". */
const char *ft_dtype_name(ft_dtype t);
/** Bytes per element. */
size_t ft_dtype_size(ft_dtype t);
/** Parses "f32"/"fp32"/"float32", "f16"/"fp16"/"float16", "bf16"/"bfloat16";
 *  returns FT_ERR_INVALID_ARG for anything else. */
ft_status ft_dtype_parse(const char *s, ft_dtype *out);

const char *ft_device_name(ft_device d);

typedef enum ft_mode {
    FT_MODE_EAGER = 0,
    FT_MODE_GRAPH = 1,
    FT_MODE_STATIC = 2
} ft_mode;

const char *ft_mode_name(ft_mode m);
ft_status ft_mode_parse(const char *s, ft_mode *out);

/* ------------------------------------------------------------------------- */
/* Build features                                                             */
/* ------------------------------------------------------------------------- */

typedef struct ft_build_info {
    const char *version;     /* FT_VERSION_STRING */
    int cuda;                /* 1 if the CUDA backend is compiled in */
    int cuda_version;        /* CUDART_VERSION at build time, e.g. 13000; 0 without CUDA */
    int cublaslt;            /* 1 if cuBLASLt is linked */
    int cupti;               /* 1 if CUPTI is linked */
    int nvtx;                /* 1 if NVTX ranges are compiled in */
} ft_build_info;

/** What this build of the library contains. */
ft_build_info ft_build_info_get(void);

/** Number of CUDA devices visible at run time (0 without CUDA or without a GPU). */
int ft_cuda_device_count(void);

/* ------------------------------------------------------------------------- */
/* Context                                                                    */
/* ------------------------------------------------------------------------- */

typedef struct ft_ctx ft_ctx;

typedef struct ft_ctx_options {
    ft_device device;  /* FT_DEVICE_CPU or FT_DEVICE_CUDA */
    int device_index;  /* CUDA device ordinal (0) */
    int cpu_threads;   /* OpenMP threads of this context's CPU kernels, whichever thread
                        * calls it (each parallel region takes num_threads from the
                        * context; the calling thread's OpenMP settings are left alone);
                        * 0 = omp_get_max_threads() when the context is made
                        * (OMP_NUM_THREADS, else the CPUs the process may use) */
    char *errbuf;      /* optional: why creation failed (no context exists to ask) */
    size_t errbuf_size;
    /* 0: none. Otherwise the context's caching allocator never holds more than this
     * many bytes of the device's memory (weights, activations, plans): emulates a
     * smaller device, and makes every out-of-memory path reachable in tests. Library
     * workspaces made at context creation are not counted. */
    size_t mem_limit;
    /* CUDA launch choices, for A/B runs inside one process: FT_OPT_DEFAULT (0) is on,
     * unless the environment switch in brackets turns it off; FT_OPT_ON / FT_OPT_OFF
     * override the environment. Programmatic dependent launch needs sm_90 or newer:
     * the device label says whether a context uses it, and why not. */
    int pdl;           /* launch kernels with programmatic dependent launch [FT_DISABLE_PDL=1] */
    int gemm_autotune; /* time cuBLASLt's candidates once per GEMM shape [FT_GEMM_AUTOTUNE=0] */
} ft_ctx_options;

enum { FT_OPT_OFF = -1, FT_OPT_DEFAULT = 0, FT_OPT_ON = 1 };

ft_ctx_options ft_ctx_options_default(void);

/** Creates a context on a device with default options. */
ft_status ft_ctx_create(ft_device device, ft_ctx **out);
ft_status ft_ctx_create_ex(const ft_ctx_options *opt, ft_ctx **out);
void ft_ctx_free(ft_ctx *ctx);

ft_device ft_ctx_device(const ft_ctx *ctx);
/** What the context runs on, for reports: the GPU's name, ordinal, architecture, SM
 *  count and whether kernels use programmatic dependent launch ("NVIDIA H100 80GB HBM3
 *  (device 0, sm_90, 132 SMs, PDL on)", or "PDL off: " and why), or the CPU's model
 *  and OpenMP thread count. Valid as long as the context. */
const char *ft_ctx_device_label(ft_ctx *ctx);
/** The sticky status of the context (FT_OK if no error is recorded). */
ft_status ft_ctx_status(const ft_ctx *ctx);
/** The message of the last error ("" if none). Valid until the next error or clear. */
const char *ft_ctx_errmsg(const ft_ctx *ctx);
void ft_ctx_clear_error(ft_ctx *ctx);
/** Waits until all work enqueued on the context has finished. */
ft_status ft_ctx_sync(ft_ctx *ctx);
/** Opens (on = 1) or closes (on = 0) a window for an attached profiler: on a CUDA
 *  context cudaProfilerStart / cudaProfilerStop, so `nsys profile
 *  --capture-range=cudaProfilerApi` records exactly what runs in between (sync the
 *  context before closing it); nothing on the CPU. Records no error in the context:
 *  FT_ERR_CUDA only says the runtime refused. `ftengine bench` and `sweep` put each
 *  timed loop in one (docs/nsight.md). */
ft_status ft_ctx_profiler_range(ft_ctx *ctx, int on);
/** Releases every tensor created by ops on this context (not model weights or outputs). */
void ft_ctx_reset(ft_ctx *ctx);

/** Allocator counters (bytes) for the context's device. */
typedef struct ft_mem_stats {
    size_t allocated;      /* bytes in live blocks handed out */
    size_t reserved;       /* bytes obtained from the system (live + cached) */
    size_t peak_allocated; /* high-water mark of `allocated` */
    uint64_t n_sys_alloc;  /* calls to the system allocator (malloc / cudaMalloc) */
    uint64_t n_alloc;      /* allocations served (cache hits included) */
    /* CPU host memory outside the allocator and mem_limit: kernel scratch (kept until
     * ft_ctx_free) and eager mode's packed-weight cache (FT_CPU_PACK_CACHE_MB, default 1024) */
    size_t cpu_scratch, cpu_pack_cache;
} ft_mem_stats;

ft_mem_stats ft_ctx_mem_stats(const ft_ctx *ctx);

/** GEMM plan counters of a CUDA context (all 0 elsewhere). A plan is built per
 *  GEMM shape; its cuBLASLt algorithm is the fastest of the heuristic's
 *  candidates, timed once per shape and process (FT_GEMM_AUTOTUNE=0: the
 *  heuristic's first guess). */
typedef struct ft_gemm_stats {
    uint64_t plans;   /* plans built: GEMM shapes this context has run */
    uint64_t hits;    /* calls served by a cached plan */
    uint64_t tuned;   /* plans whose algorithm this context chose by timing */
    uint64_t changed; /* of those, where the fastest was not the heuristic's first guess */
    uint64_t reused;  /* plans that took a choice timed earlier in the process */
    int autotune;     /* 1 unless FT_GEMM_AUTOTUNE=0 */
} ft_gemm_stats;

ft_gemm_stats ft_ctx_gemm_stats(const ft_ctx *ctx);

/* ------------------------------------------------------------------------- */
/* Tensors                                                                    */
/* ------------------------------------------------------------------------- */

typedef struct ft_tensor ft_tensor;

int ft_tensor_ndim(const ft_tensor *t);
/** Size of dimension `dim` (negative counts from the end). */
int64_t ft_tensor_dim(const ft_tensor *t, int dim);
/** Stride of dimension `dim` in elements. */
int64_t ft_tensor_stride(const ft_tensor *t, int dim);
int64_t ft_tensor_numel(const ft_tensor *t);
ft_dtype ft_tensor_dtype(const ft_tensor *t);
ft_device ft_tensor_device(const ft_tensor *t);
int ft_tensor_is_contiguous(const ft_tensor *t);
/** "[2,16,64] f32" into buf; returns buf. */
const char *ft_tensor_describe(const ft_tensor *t, char *buf, size_t size);

/** A new tensor on the context's device holding a copy of host data. */
ft_tensor *ft_tensor_from_host(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape, const void *data);
/** A new uninitialised contiguous tensor. */
ft_tensor *ft_tensor_empty(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape);
/** Copies a tensor (any strides) to host memory as a contiguous array of `dtype`,
 *  converting between floating dtypes (f32/f16/bf16) or between integer dtypes.
 *  `size` is the byte size of `out` and must be at least numel * dtype size.
 *  Waits for pending work on CUDA. */
ft_status ft_tensor_to_host(ft_ctx *ctx, const ft_tensor *t, ft_dtype dtype, void *out, size_t size);
/** Gives the tensor's memory back to the caching allocator once no view of it is
 *  alive. The handle must not be used afterwards. NULL is a no-op. */
void ft_tensor_release(ft_ctx *ctx, ft_tensor *t);

/* ------------------------------------------------------------------------- */
/* Ops                                                                        */
/* ------------------------------------------------------------------------- */
/* The op API (views, elementwise, norms, linear algebra, attention, convolution,
 * pooling) is in ftengine_ops.h, part of this header. */
#include "ftengine_ops.h"

/* ------------------------------------------------------------------------- */
/* Models                                                                     */
/* ------------------------------------------------------------------------- */

typedef struct ft_model ft_model;

/**
 * What ft_model_load does with the weights. FT_WEIGHTS_NONE describes the model
 * without its weights: the config is read (and a checkpoint's tensor index, every
 * shape checked against it) but no weight is allocated, read or initialised, so
 * describing bert-large costs kilobytes and milliseconds (`ftengine info`).
 * ft_model_arch, ft_model_param_count, ft_model_macs and ft_model_example_inputs
 * work on such a model; ft_model_forward refuses it (FT_ERR_UNSUPPORTED). It
 * implies eager mode.
 */
typedef enum ft_weights { FT_WEIGHTS_LOAD = 0, FT_WEIGHTS_NONE = 1 } ft_weights;

typedef struct ft_model_options {
    ft_mode mode;             /* FT_MODE_EAGER */
    ft_dtype dtype;           /* compute/storage dtype of weights and activations: F32 */
    int output_hidden_states; /* also return hidden_states.N */
    uint64_t seed;            /* random initialisation of presets */
    ft_weights weights;       /* FT_WEIGHTS_LOAD; FT_WEIGHTS_NONE: shapes only (see above) */
} ft_model_options;

ft_model_options ft_model_options_default(void);

/**
 * Loads a model onto the context's device. `path` is either a directory holding a
 * Hugging Face `config.json` and `model.safetensors`, or the name of a built-in
 * preset ("bert-base", ...; see ft_preset_name) which is random-initialised at the
 * real sizes. Strict: a malformed file, a missing tensor or a shape that disagrees
 * with the config is an error naming the file and the tensor or key.
 */
ft_status ft_model_load(ft_ctx *ctx, const char *path, const ft_model_options *opt, ft_model **out);
void ft_model_free(ft_model *m);

/** A model input given in host memory, by Hugging Face argument name
 *  ("input_ids", "attention_mask", "token_type_ids", "pixel_values", "input_values"). */
typedef struct ft_host_tensor {
    const char *name;
    ft_dtype dtype;
    int ndim;
    int64_t shape[FT_MAX_DIMS];
    const void *data;
} ft_host_tensor;

/**
 * Runs the model on host inputs. Inputs are validated (names, dtypes, shapes, id
 * ranges) before anything runs. Outputs stay valid until the next forward or free.
 * A shape whose size overflows or passes 2^48 bytes is FT_ERR_SHAPE ("... is too
 * large"). An attention_mask m becomes Hugging Face's additive mask (1 - m) * min
 * in f32 (min = finfo(float32).min; Funnel: -1e6); a value for which that is not
 * finite (BERT family: m outside [0, 2]) is FT_ERR_INVALID_ARG, as is anything but
 * 0 or 1 in WavLM's sample mask. Host data need not be aligned.
 */
ft_status ft_model_forward(ft_model *m, const ft_host_tensor *inputs, int n_inputs);
int ft_model_output_count(const ft_model *m);
/** Name of output i ("last_hidden_state", "pooler_output", "hidden_states.3", ...). */
const char *ft_model_output_name(const ft_model *m, int i);
ft_tensor *ft_model_output(const ft_model *m, int i);
/** The output of that name, or NULL. */
ft_tensor *ft_model_output_find(const ft_model *m, const char *name);

/**
 * The costs of graph and static mode (what `ftengine run --profile` and `ftengine
 * bench` print). Everything but the cache counters describes the plan used by the
 * model's last forward.
 */
typedef struct ft_graph_stats {
    int valid;                 /* 0 until a graph or static forward has run */
    /* the plan */
    int traced_kernels;        /* kernel nodes recorded by the trace (= eager launches) */
    int kernels_per_forward;   /* kernel nodes after the passes */
    int graph_launches;        /* CUDA graph launches per forward (static on CUDA: 1) */
    int captured;              /* 1 if the plan runs as a CUDA Graph */
    int graph_nodes;           /* nodes of that CUDA Graph, the device launches per forward (a
                                  step may launch more than one kernel); 0 when not captured,
                                  -1 if the graph could not be listed */
    int input_uploads;         /* host-to-device copies of the inputs per forward (1 when the
                                  planner put them side by side, else one per input) */
    /* what the passes did */
    int dce_removed, folded, qkv_merged, epilogues, ln_residual, attention_fused,
        eltwise_fused, nonorm_folded, conv_bn_folded, nchwc_nodes /* CPU: blocked-channel layout */,
        nchwc_reorders, affine_folded; /* scales and bias adds after a linear taken into GEMMs */
    /* memory (bytes) */
    size_t arena_bytes;        /* the one arena of intermediates, inputs and outputs */
    size_t sum_intermediate_bytes; /* the same buffers without any reuse */
    size_t peak_live_bytes;    /* lower bound: most bytes live at any one step */
    size_t const_bytes;        /* this plan's own constants: tables and masks made during the
                                  trace, and what was folded from them (shape-dependent) */
    size_t shared_const_bytes; /* stacked and folded weights the model keeps once for all its
                                  plans (a Q/K/V stack packed at load costs nothing) */
    size_t scratch_bytes;      /* kernel scratch (im2col...) a captured plan keeps for its replays */
    int residual_in_place;     /* CPU: blocked convolutions whose output took the buffer of their
                                  residual (its last use; the kernel accumulates into it) */
    int winograd_convs;        /* CPU: blocked 3x3 convolutions run as Winograd F(2x2, 3x3), their
                                  weights transformed at plan time (docs/cpu_backend.md) */
    /* one-time costs of this plan (milliseconds) */
    double trace_ms, passes_ms, plan_ms; /* plan_ms: memory plan, uploads, kernel resolution */
    double capture_ms, instantiate_ms;   /* CUDA Graph, per input shape (0 when not captured) */
    /* cache */
    int plans_cached;
    uint64_t plan_hits, plan_misses, plan_evictions;
} ft_graph_stats;

/**
 * Fills *out for a model run in graph or static mode (zeros with valid = 0 before
 * its first forward, and always in eager mode). FT_ERR_INVALID_ARG for NULL arguments.
 */
ft_status ft_model_graph_stats(const ft_model *m, ft_graph_stats *out);

/**
 * The plan of the model's last graph or static forward, step by step (what
 * `ftengine plan` prints): one step per kernel node left after the passes, in
 * the order they run. Use it to see what the passes fused and where each buffer
 * lives in the arena.
 */
#define FT_PLAN_SRC_INPUT (-1) /* ft_plan_step_info.src_step: a model input */
#define FT_PLAN_SRC_CONST (-2) /* a weight, or a constant made or folded at plan time */
typedef struct ft_plan_step_info {
    const char *op;           /* op name: "linear", "attention", "fused_eltwise", ... */
    char detail[96];          /* what the step computes beyond its op, as the passes left it:
                                 a GEMM or conv epilogue ("bias+residual+gelu", a folded
                                 scale "alpha 0.125"), an
                                 elementwise chain ("mul>scale>add"), "residual" for a layer
                                 norm of x + r, "mask" for an attention; "" when nothing */
    ft_dtype dtype;           /* of the output */
    int ndim;
    int64_t shape[FT_MAX_DIMS];
    size_t bytes;             /* of the output */
    size_t arena_offset;      /* byte offset of the output in the plan's arena */
    int is_output;            /* the output is (or a view of it is) a model output */
    int n_src;                /* sources present (an absent optional one is skipped) */
    int src_step[8];          /* per source: the step that computes it (through views), or
                                 FT_PLAN_SRC_INPUT / FT_PLAN_SRC_CONST */
    int graph_nodes;          /* CUDA Graph nodes this step captured (a step may launch more
                                 than one kernel); 0 when the plan is not captured, -1 when
                                 the capture could not be counted */
} ft_plan_step_info;

/** Steps of the model's last plan: 0 before a graph or static forward and in eager mode. */
int ft_model_plan_length(const ft_model *m);
/**
 * Fills *out for step i of the last plan. FT_ERR_INVALID_ARG for NULL arguments
 * or i outside [0, ft_model_plan_length(m)).
 */
ft_status ft_model_plan_step(const ft_model *m, int i, ft_plan_step_info *out);

/** Architecture class name ("BertModel", "DistilBertModel", ...). */
const char *ft_model_arch(const ft_model *m);
ft_mode ft_model_mode(const ft_model *m);
/** Number of parameters (elements of every weight tensor the model uses). */
int64_t ft_model_param_count(const ft_model *m);
/**
 * Multiply-accumulates of one forward for the given input size (batch, and the
 * sequence length for text, image side for vision, audio samples for speech),
 * counted from the traced ops (linear, matmul, conv, attention).
 */
ft_status ft_model_macs(ft_model *m, int64_t batch, int64_t length, int64_t *macs);

/**
 * Inputs of a typical forward at this size, filled with deterministic pseudo-random data
 * (token ids uniform over the vocabulary, pixels and audio uniform in [0, 1), as the
 * Framework Tax harness feeds them): `length` is the sequence length for text, the image
 * side for vision and the number of samples for speech; 0 takes the default (128 tokens,
 * 224 pixels, 32000 samples). Writes up to 8 inputs into `in`; the data lives in *owned,
 * which the caller frees with free() (owned NULL: shapes only, data NULL, no allocation).
 * A batch x length product that overflows or passes 2^48 bytes is FT_ERR_SHAPE
 * ("batch 64 x 536870912^2 x 3 elements is too large"), one the host cannot
 * allocate FT_ERR_OOM; ft_model_macs returns the same errors.
 */
ft_status ft_model_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                                  int *n_in, void **owned);

/** Built-in presets: returns the i-th name, or NULL past the end. */
const char *ft_preset_name(int i);

/* ------------------------------------------------------------------------- */
/* Profiler: per-op phase timers, CUPTI kernel records, overhead metrics      */
/* ------------------------------------------------------------------------- */
/*
 * An ft_profiler attributes the host time of a measured window to ops and to the
 * dispatcher's phases, and (CUDA builds with CUPTI) the device time to kernels,
 * copies and memsets linked back to the op that launched them. It answers the
 * framework-tax question: of the window's wall time, how much had the device
 * busy, and where did the rest go?
 *
 *     ft_profiler *p = NULL;
 *     ft_profiler_options po = ft_profiler_options_default();
 *     ft_profiler_create(ctx, &po, &p);        // CUPTI is not attached yet
 *     ... load, warm up ...
 *     ft_profiler_start(p);
 *     for (i = 0; i < iters; i++) ft_model_forward(m, in, n);
 *     ft_profiler_stop(p);                     // waits for the device, then computes
 *     ft_profile_summary s;
 *     ft_profiler_summary(p, &s);
 *     ft_profiler_write_chrome_trace(p, "trace.json");   // Perfetto / chrome://tracing
 *     ft_profiler_free(p);
 *
 * What is recorded, per op call inside the window: the op name, its node id (the
 * position in the graph in graph mode, -1 in eager), its output shape and dtype,
 * its status, its host span (dispatcher entry to return) and the span of each
 * phase it went through (check, infer, alloc, select, launch). Graph mode records
 * one op per plan step (launch phase only: the rest was resolved at plan time);
 * static mode records the whole plan as one op, "graph_launch" (one CUDA Graph
 * replay) or "static_plan" (the plan walked without a graph). With CUPTI the
 * kernels of a CUDA Graph replay are still given to the ops that captured them
 * (ft_profile_op_stats.replayed, the trace's "op" and "plan_step" arguments). All
 * times come from one clock, CLOCK_MONOTONIC_RAW in nanoseconds; CUPTI is told to
 * use it too.
 *
 * The emulated host costs (ft_ctx_set_op_host_cost: eager ops; ft_ctx_set_step_host_cost:
 * graph-mode plan steps) are spent in SELECT phases; static mode pays neither.
 *
 * Device busy time: on CUDA with CUPTI, the union of kernel, memcpy and memset
 * intervals inside the window; on the CPU device, where kernels run inside the
 * dispatcher, the union of LAUNCH phases; on CUDA without CUPTI it is unknown
 * (busy_source = FT_BUSY_NONE, busy and overhead stay 0).
 *
 * Costs: with no profiler window open the dispatcher pays nothing (the hooks are
 * installed by start and removed by stop). Inside a window each op pays about a
 * dozen clock reads, plus an external-correlation push/pop with CUPTI. Record
 * storage is allocated by create (max_ops records); ops past it are counted in
 * ops_dropped, never allocated on the fly. CUPTI: the process's first start
 * subscribes and enables it (kernel/copy/memset records, launch/copy API records
 * only) and it stays on (CUPTI 13.0 mislabels graph launches in later sessions):
 * time nothing in a process after its first profiler start.
 *
 * One profiler per context; free it before the context. With CUPTI on, one window
 * may be open at a time in the process (CUPTI state is process-wide). Misuse
 * (start twice, stop without start) is FT_ERR_INVALID_ARG recorded in the context
 * like any other error. The library never prints: results come from the getters
 * and the writers below; names and records stay valid until the next start or free.
 */

typedef struct ft_profiler ft_profiler;

/** Dispatcher phases as the profiler reports them (the order of the phases). */
#define FT_PROFILE_PHASES 5
typedef enum ft_profile_phase {
    FT_PROFILE_CHECK = 0,
    FT_PROFILE_INFER = 1,
    FT_PROFILE_ALLOC = 2,
    FT_PROFILE_SELECT = 3,
    FT_PROFILE_LAUNCH = 4
} ft_profile_phase;

/** "check", "infer", "alloc", "select", "launch" ("?" out of range). */
const char *ft_profile_phase_name(int phase);

typedef struct ft_profiler_options {
    int64_t max_ops;         /* op records kept per window (0: 65536); more are counted as dropped */
    int64_t max_gpu_records; /* CUPTI records kept per window (0: 262144) */
    int cupti;               /* 1 (default): collect CUPTI records on CUDA when compiled in */
} ft_profiler_options;

ft_profiler_options ft_profiler_options_default(void);

/**
 * Creates a profiler for ctx (no window open yet). On a CUDA context it also enables
 * CUPTI if this build has it and no other CUPTI client (Nsight, compute-sanitizer) is
 * attached; if CUPTI cannot be used the profiler still works with host timers only,
 * and ft_profile_summary.cupti_note says why. FT_ERR_INVALID_ARG if ctx already has a
 * profiler, FT_ERR_OOM if the record storage cannot be allocated.
 */
ft_status ft_profiler_create(ft_ctx *ctx, const ft_profiler_options *opt, ft_profiler **out);
/** Frees the profiler (closing an open window first). NULL is a no-op. */
void ft_profiler_free(ft_profiler *p);

/** Opens a measured window: waits for the device, clears the previous window's
 *  results and starts recording. FT_ERR_INVALID_ARG if a window is already open
 *  (here or, with CUPTI, on another profiler of the process). */
ft_status ft_profiler_start(ft_profiler *p);
/** Closes the window: waits for the device (the window's end is that wait's return),
 *  collects CUPTI records and computes the summary. FT_ERR_INVALID_ARG if no window
 *  is open. */
ft_status ft_profiler_stop(ft_profiler *p);

/** Where ft_profile_summary.busy_us comes from. */
typedef enum ft_busy_source {
    FT_BUSY_NONE = 0,   /* unknown (CUDA without CUPTI): busy, overhead, gaps are 0 */
    FT_BUSY_CPU_LAUNCH, /* CPU device: the union of LAUNCH phases (kernels run there) */
    FT_BUSY_CUPTI       /* CUDA: the union of CUPTI kernel, memcpy and memset intervals */
} ft_busy_source;

/**
 * The metrics of the last closed window (microseconds unless named otherwise).
 * wall = stop - start; busy = |union of device intervals within the window|;
 * overhead = wall - busy (the framework tax); utilization = busy / wall;
 * gaps are the pieces of the window the device was idle: leading (start to the
 * first busy interval), internal (between busy intervals), trailing (last busy
 * interval to stop); leading + internal + trailing = overhead.
 */
typedef struct ft_profile_summary {
    int valid;                  /* 1 once a window has been closed */
    ft_device device;
    ft_busy_source busy_source;
    double wall_us, busy_us, busy_sum_us, overhead_us, utilization;
    /* host time of the op records */
    int64_t ops;                /* op records kept */
    int64_t ops_dropped;        /* op calls past max_ops (not recorded) */
    int64_t ops_failed;         /* records whose status was not FT_OK */
    double op_host_us;          /* sum of op spans (dispatcher entry to return) */
    double phase_us[FT_PROFILE_PHASES]; /* sum per phase over all ops */
    double untimed_us;          /* op spans minus their phases: hook calls, code between phases */
    /* device idle time */
    int64_t gap_count;          /* internal gaps */
    double gap_internal_us, gap_max_us, gap_leading_us, gap_trailing_us;
    /* CUPTI (all 0 without it) */
    int cupti;                  /* 1 if CUPTI records were collected in this window */
    char cupti_note[160];       /* why CUPTI is off, or "" */
    int64_t kernels, memcpys, memsets, runtime_calls; /* runtime_calls: runtime and driver API */
    int64_t gpu_records_dropped;/* by CUPTI (no buffer) or past max_gpu_records */
    int64_t kernels_unlinked;   /* kernels with no op (launched outside the dispatcher hooks) */
    int64_t kernels_zero_ts;    /* kernels reported with start == end == 0 (left out of busy) */
    int64_t kernels_before_api; /* linked kernels starting before their launch call (clock trouble) */
    int64_t correlation_errors; /* external-correlation push/pop calls that failed */
    int64_t launches;           /* launch calls joined to their first kernel */
    double launch_latency_mean_us, launch_latency_max_us; /* kernel start - launch API start */
    double queue_mean_us;       /* mean of max(0, kernel start - launch API end) */
    double api_mean_us;         /* mean launch API duration */
    double cupti_overhead_us;   /* CUPTI's own OVERHEAD records within the window */
    /* CUDA graph replays (static mode): every kernel of one replay shares its launch's
       correlation, so they are given to the plan steps that captured them by their
       order (the captured graph is a chain); a replay whose record count differs from
       its graph's node count (dropped records) stays whole under "graph_launch" */
    int64_t graph_replays;      /* graph_launch records in the window */
    int64_t graph_replays_attributed; /* of which the device work went to plan steps */
    /* device time that ran beside earlier work of the same stream: kernels launched
       with programmatic dependent launch start while their predecessor drains, and
       wait in their prologue. Per-op gpu_us counts each record from the end of the
       work before it, so this time is counted once, for the earlier op; busy_us
       (a union) is unaffected, busy_sum_us includes it. */
    double overlap_us;
} ft_profile_summary;

/** The last window's summary. FT_ERR_INVALID_ARG for NULL arguments; valid = 0 before
 *  the first stop. */
ft_status ft_profiler_summary(const ft_profiler *p, ft_profile_summary *out);
/** Why this profiler collects no CUPTI records on its CUDA context (known from create,
 *  or from the process's first start: e.g. another CUPTI client such as Nsight Systems
 *  is attached, then host timers only); "" when it collects them, or on the CPU. */
const char *ft_profiler_cupti_note(const ft_profiler *p);

/** One op record of the last window. */
typedef struct ft_profile_op {
    const char *name;           /* op name, or "graph_launch" / "static_plan" / (a static
                                   plan's first forward on CUDA) "capture_warmup" (valid
                                   until the next ft_profiler_start or free) */
    int32_t node_id;            /* graph node id, -1 in eager */
    ft_status status;
    char shape[96];             /* output "[2,16,64] f32" ("" if none) */
    double start_us, dur_us;    /* relative to the window's start */
    double phase_us[FT_PROFILE_PHASES]; /* 0 for phases the op did not go through */
    double gpu_us;              /* sum of the device intervals linked to it (CUPTI) */
    int kernels;                /* kernels, copies and memsets linked to it */
} ft_profile_op;

/** Number of op records of the last window (0 before the first stop). */
int64_t ft_profiler_op_count(const ft_profiler *p);
/** Record i (0-based, in call order). FT_ERR_INVALID_ARG if out of range. */
ft_status ft_profiler_op(const ft_profiler *p, int64_t i, ft_profile_op *out);

/** Per-op-name totals of the last window. */
typedef struct ft_profile_op_stats {
    const char *name;           /* valid until the next ft_profiler_start or free */
    int64_t calls;
    double host_us;             /* sum of op spans */
    double phase_us[FT_PROFILE_PHASES];
    double gpu_us;              /* linked device time (CUPTI), replayed steps' included */
    int64_t kernels;
    int64_t replayed;           /* plan steps of this op run inside attributed CUDA graph
                                   replays: their device time is in gpu_us, their host
                                   time in the "graph_launch" row */
} ft_profile_op_stats;

/** Number of distinct op names in the last window. */
int ft_profiler_op_stats_count(const ft_profiler *p);
/** Totals of name i, sorted by descending host time, then descending device time. */
ft_status ft_profiler_op_stats(const ft_profiler *p, int i, ft_profile_op_stats *out);

/**
 * Writes the last window as Chrome trace-event JSON (opens in https://ui.perfetto.dev
 * and chrome://tracing): timestamps in microseconds relative to the window's start
 * (3 decimals), one host process with a slice per op and nested slices per phase
 * (and per CUDA runtime call with CUPTI), one GPU process per device with a track
 * per stream and a slice per kernel, copy and memset, and flow arrows from each op
 * to the device work it launched. Written to a temporary name and renamed, so no
 * partial file is left on error. FT_ERR_INVALID_ARG before the first stop, FT_ERR_IO
 * if the file cannot be written.
 */
ft_status ft_profiler_write_chrome_trace(const ft_profiler *p, const char *path);
/** Writes one CSV row per op record (name, node, shape, status, start, duration,
 *  phases, gpu time, kernels; microseconds). Same errors as the trace writer. */
ft_status ft_profiler_write_csv(const ft_profiler *p, const char *path);

/** Emulated host costs (env FT_OP_HOST_COST_US / FT_STEP_HOST_COST_US): `us` of busy waiting per eager op
 *  (a slower framework) / before each graph-mode plan step (an interpreter); 0 off; [0, 1e6]. */
ft_status ft_ctx_set_op_host_cost(ft_ctx *ctx, double us);
ft_status ft_ctx_set_step_host_cost(ft_ctx *ctx, double us);
#ifdef __cplusplus
}
#endif

#endif /* FTENGINE_H */

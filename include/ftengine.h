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
 * A context and everything made from it must be used by one thread at a time.
 * Different contexts may be used from different threads concurrently. On CUDA, work
 * is enqueued asynchronously on the context's stream; ft_tensor_to_host() and
 * ft_ctx_sync() wait for it.
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
    FT_ERR_INVALID_ARG = 1, /* a bad argument: NULL, wrong dtype, out-of-range value */
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
    FT_ERR_INTERNAL = 12    /* a broken invariant inside the engine (a bug) */
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
    int cpu_threads;   /* OpenMP threads for CPU kernels; 0 = the OpenMP default */
    char *errbuf;      /* optional: why creation failed (no context exists to ask) */
    size_t errbuf_size;
} ft_ctx_options;

ft_ctx_options ft_ctx_options_default(void);

/** Creates a context on a device with default options. */
ft_status ft_ctx_create(ft_device device, ft_ctx **out);
ft_status ft_ctx_create_ex(const ft_ctx_options *opt, ft_ctx **out);
void ft_ctx_free(ft_ctx *ctx);

ft_device ft_ctx_device(const ft_ctx *ctx);
/** The sticky status of the context (FT_OK if no error is recorded). */
ft_status ft_ctx_status(const ft_ctx *ctx);
/** The message of the last error ("" if none). Valid until the next error or clear. */
const char *ft_ctx_errmsg(const ft_ctx *ctx);
void ft_ctx_clear_error(ft_ctx *ctx);
/** Waits until all work enqueued on the context has finished. */
ft_status ft_ctx_sync(ft_ctx *ctx);
/** Releases every tensor created by ops on this context (not model weights or outputs). */
void ft_ctx_reset(ft_ctx *ctx);

/** Allocator counters (bytes) for the context's device. */
typedef struct ft_mem_stats {
    size_t allocated;      /* bytes in live blocks handed out */
    size_t reserved;       /* bytes obtained from the system (live + cached) */
    size_t peak_allocated; /* high-water mark of `allocated` */
    uint64_t n_sys_alloc;  /* calls to the system allocator (malloc / cudaMalloc) */
    uint64_t n_alloc;      /* allocations served (cache hits included) */
} ft_mem_stats;

ft_mem_stats ft_ctx_mem_stats(const ft_ctx *ctx);

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
ft_tensor *ft_tensor_from_host(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape,
                               const void *data);
/** A new uninitialised contiguous tensor. */
ft_tensor *ft_tensor_empty(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape);
/** Copies a tensor (any strides) to host memory as a contiguous array of `dtype`,
 *  converting between floating dtypes (f32/f16/bf16) or between integer dtypes.
 *  `size` is the byte size of `out` and must be at least numel * dtype size.
 *  Waits for pending work on CUDA. */
ft_status ft_tensor_to_host(ft_ctx *ctx, const ft_tensor *t, ft_dtype dtype, void *out,
                            size_t size);
/** Gives the tensor's memory back to the caching allocator once no view of it is
 *  alive. The handle must not be used afterwards. NULL is a no-op. */
void ft_tensor_release(ft_ctx *ctx, ft_tensor *t);

/* ------------------------------------------------------------------------- */
/* Ops                                                                        */
/* ------------------------------------------------------------------------- */
/*
 * Every op goes through the dispatcher. Shapes follow PyTorch: dimension 0 is the
 * outermost, negative dims count from the end. Elementwise binary ops broadcast
 * like NumPy. Floating ops accept f32, f16 and bf16 and accumulate in f32; both
 * operands of a binary op must have the same dtype, except masks, which are f32.
 * An op whose inputs are NULL returns NULL (the earlier error stays recorded).
 */

/* Views (no copy, no kernel) */
ft_tensor *ft_reshape(ft_ctx *ctx, ft_tensor *x, int ndim, const int64_t *shape); /* one -1 allowed; copies first if x cannot be viewed */
ft_tensor *ft_permute(ft_ctx *ctx, ft_tensor *x, const int *perm);
ft_tensor *ft_transpose(ft_ctx *ctx, ft_tensor *x, int dim0, int dim1);
ft_tensor *ft_slice(ft_ctx *ctx, ft_tensor *x, int dim, int64_t start, int64_t length);
/** Selects index `index` of `dim` and drops that dimension. */
ft_tensor *ft_select(ft_ctx *ctx, ft_tensor *x, int dim, int64_t index);
/** Broadcasts size-1 dims to `shape` (stride 0); ndim may add leading dims. */
ft_tensor *ft_expand(ft_ctx *ctx, ft_tensor *x, int ndim, const int64_t *shape);
/** Inserts a size-1 dimension at `dim`. */
ft_tensor *ft_unsqueeze(ft_ctx *ctx, ft_tensor *x, int dim);

/* Copies */
ft_tensor *ft_contiguous(ft_ctx *ctx, ft_tensor *x); /* returns x itself if already contiguous */
ft_tensor *ft_cast(ft_ctx *ctx, ft_tensor *x, ft_dtype dtype);
ft_tensor *ft_concat(ft_ctx *ctx, ft_tensor *a, ft_tensor *b, int dim);
/** Pads dimension `dim` with `before` and `after` elements of `value`. */
ft_tensor *ft_pad(ft_ctx *ctx, ft_tensor *x, int dim, int64_t before, int64_t after, float value);

/* Gathers */
/** Rows of `table` [V, D] picked by integer `ids` [...]: result [..., D].
 *  Ids outside [0, V) are an error. */
ft_tensor *ft_embedding(ft_ctx *ctx, ft_tensor *table, ft_tensor *ids);
/** out[..., i, j] = x[..., i, idx[i, j]]; idx is an integer [I, J] tensor, x is [..., I, T]. */
ft_tensor *ft_gather_last(ft_ctx *ctx, ft_tensor *x, ft_tensor *idx);

/* Elementwise */
ft_tensor *ft_add(ft_ctx *ctx, ft_tensor *a, ft_tensor *b);
ft_tensor *ft_sub(ft_ctx *ctx, ft_tensor *a, ft_tensor *b);
ft_tensor *ft_mul(ft_ctx *ctx, ft_tensor *a, ft_tensor *b);
ft_tensor *ft_div(ft_ctx *ctx, ft_tensor *a, ft_tensor *b);
/** y = x * alpha + beta. */
ft_tensor *ft_scale(ft_ctx *ctx, ft_tensor *x, float alpha, float beta);
ft_tensor *ft_gelu(ft_ctx *ctx, ft_tensor *x);      /* exact: 0.5x(1+erf(x/sqrt2)) */
ft_tensor *ft_gelu_tanh(ft_ctx *ctx, ft_tensor *x); /* "gelu_new": tanh approximation */
ft_tensor *ft_tanh(ft_ctx *ctx, ft_tensor *x);
ft_tensor *ft_relu(ft_ctx *ctx, ft_tensor *x);
ft_tensor *ft_sigmoid(ft_ctx *ctx, ft_tensor *x);

/* Reductions and normalisations */
/** Sum over the last dimension, kept as size 1. */
ft_tensor *ft_sum_last(ft_ctx *ctx, ft_tensor *x);
/** softmax over the last dim of (x * scale + mask); mask (f32, broadcastable to x) may be NULL. */
ft_tensor *ft_softmax(ft_ctx *ctx, ft_tensor *x, ft_tensor *mask, float scale);
/** LayerNorm over the last dim; gamma and beta ([D]) may be NULL. */
ft_tensor *ft_layernorm(ft_ctx *ctx, ft_tensor *x, ft_tensor *gamma, ft_tensor *beta, float eps);
/** GroupNorm of x [B, C, ...] with `groups` groups; gamma/beta [C] may be NULL. */
ft_tensor *ft_groupnorm(ft_ctx *ctx, ft_tensor *x, int groups, ft_tensor *gamma, ft_tensor *beta,
                        float eps);
/** Inference batch norm of x [B, C, ...] with running statistics ([C] each). */
ft_tensor *ft_batchnorm(ft_ctx *ctx, ft_tensor *x, ft_tensor *mean, ft_tensor *var,
                        ft_tensor *gamma, ft_tensor *beta, float eps);
/** Pools along `dim` with windows of `kernel` every `stride` (ceil mode: a partial
 *  tail window pools what it holds). kind: 0 mean, 1 max, 2 min. */
ft_tensor *ft_pool_dim(ft_ctx *ctx, ft_tensor *x, int dim, int kind, int kernel, int stride);

/* Linear algebra */
/** y = x W^T + b: x [..., K], w [N, K], bias [N] or NULL. */
ft_tensor *ft_linear(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias);
/** Batched a [..., M, K] x b [..., K, N] * alpha; batch dims must match. */
ft_tensor *ft_matmul(ft_ctx *ctx, ft_tensor *a, ft_tensor *b, float alpha);
/** softmax(q k^T * scale + mask) v for q [B, H, Sq, D], k/v [B, H, Sk, D];
 *  mask f32 broadcastable to [B, H, Sq, Sk] or NULL. */
ft_tensor *ft_attention(ft_ctx *ctx, ft_tensor *q, ft_tensor *k, ft_tensor *v, ft_tensor *mask,
                        float scale);

/* Convolutions and pooling (NCHW / NCL) */
/** x [B, Cin, L], w [Cout, Cin/groups, K], bias [Cout] or NULL. */
ft_tensor *ft_conv1d(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, int stride,
                     int padding, int groups);
/** x [B, Cin, H, W], w [Cout, Cin/groups, KH, KW], bias [Cout] or NULL. */
ft_tensor *ft_conv2d(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, int stride,
                     int padding, int groups);
/** Max pool over H, W of x [B, C, H, W]; padding acts as -inf. */
ft_tensor *ft_maxpool2d(ft_ctx *ctx, ft_tensor *x, int kernel, int stride, int padding);
/** Mean over all dims after the first two: [B, C, ...] -> [B, C, 1, ...]. */
ft_tensor *ft_global_avgpool(ft_ctx *ctx, ft_tensor *x);
/** Weight norm W = g * v / ||v||, the norm taken over every dim except `dim`. */
ft_tensor *ft_weight_norm(ft_ctx *ctx, ft_tensor *g, ft_tensor *v, int dim);

/* ------------------------------------------------------------------------- */
/* Models                                                                     */
/* ------------------------------------------------------------------------- */

typedef struct ft_model ft_model;

typedef struct ft_model_options {
    ft_mode mode;             /* FT_MODE_EAGER */
    ft_dtype dtype;           /* compute/storage dtype of weights and activations: F32 */
    int output_hidden_states; /* also return hidden_states.N */
    uint64_t seed;            /* random initialisation of presets */
} ft_model_options;

ft_model_options ft_model_options_default(void);

/**
 * Loads a model onto the context's device. `path` is either a directory holding a
 * Hugging Face `config.json` and `model.safetensors`, or the name of a built-in
 * preset ("bert-base", ...; see ft_preset_name) which is random-initialised at the
 * real sizes. Strict: a malformed file, a missing tensor or a shape that disagrees
 * with the config is an error naming the file and the tensor or key.
 */
ft_status ft_model_load(ft_ctx *ctx, const char *path, const ft_model_options *opt,
                        ft_model **out);
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
    /* what the passes did */
    int dce_removed, folded, qkv_merged, epilogues, ln_residual, attention_fused,
        eltwise_fused, nonorm_folded, conv_bn_folded;
    /* memory (bytes) */
    size_t arena_bytes;        /* the one arena of intermediates, inputs and outputs */
    size_t sum_intermediate_bytes; /* the same buffers without any reuse */
    size_t peak_live_bytes;    /* lower bound: most bytes live at any one step */
    size_t const_bytes;        /* plan-time constants and folded/stacked weights beyond the
                                  model's own weights (stacks shared by the model's plans count) */
    size_t scratch_bytes;      /* kernel scratch (im2col...) a captured plan keeps for its replays */
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
 * Inputs of a typical forward at this size, filled with deterministic pseudo-random
 * data (token ids uniform over the vocabulary, pixels and audio uniform in [0, 1),
 * as the Framework Tax harness feeds them): `length` is the sequence length for
 * text, the image side for vision and the number of samples for speech; 0 takes the
 * architecture's default (128 tokens, 224 pixels, 32000 samples). Writes up to 8
 * inputs into `in`; the data lives in *owned, which the caller frees with free().
 */
ft_status ft_model_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                                  int *n_in, void **owned);

/** Built-in presets: returns the i-th name, or NULL past the end. */
const char *ft_preset_name(int i);

#ifdef __cplusplus
}
#endif

#endif /* FTENGINE_H */

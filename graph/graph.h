/*
 * graph.h - the graph IR of graph and static mode, its passes, its memory
 * planner and its plans.
 *
 * A graph is built from a trace (graph/trace.h): the traced nodes it keeps are
 * copied out of the context's arena into headers the graph owns, so the trace's
 * arena scope can be recycled. Nodes are plain struct ft_tensor (op, sources,
 * parameters, inferred shape), in topological order. Weights stay the model's
 * tensors and are referenced, never copied; tensors that passes make at plan
 * time (merged or folded weights) are owned by the graph.
 */
#ifndef FT_GRAPH_H
#define FT_GRAPH_H

#include "../engine/ft_internal.h"
#include "trace.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_GRAPH_MAX_IN 8
#define FT_GRAPH_MAX_OUT 96

/* Graph-private node flags, above the engine's FT_TF_* bits. */
enum {
    FT_GF_DEAD = 1u << 20,   /* removed by a pass; dropped by ft_graph_compact */
    FT_GF_FOLDED = 1u << 21, /* a constant computed at plan time (owned storage) */
    FT_GF_SHARED = 1u << 22  /* a folded constant whose storage the model's cache shares */
};

typedef struct ft_graph_io {
    char name[48];
    ft_tensor *t;
} ft_graph_io;

/* What each pass did, for the tests and the --profile report. */
typedef struct ft_pass_counts {
    int dce, folded, qkv, epilogue, ln_residual, attention, eltwise, nonorm, conv_bn, affine;
    int se, layer_scale; /* pass_vision.c */
    int nchwc, nchwc_reorders; /* nodes made blocked-channel, reorders at the region edges */
} ft_pass_counts;

/* Weights made at plan time (stacked QKV weights, conv+BN folded weights)
 * shared by every plan of a model, so a new input shape neither rebuilds them
 * nor holds them twice. Keyed by what they were made from (kind, tag, parts).
 * Owned by the model's graph state (graph/executor.c). */
#define FT_STACK_MAX 8
enum { FT_CONST_STACK = 0, FT_CONST_CONV_BN_W, FT_CONST_CONV_BN_B, FT_CONST_FOLD, FT_CONST_SCALED,
       FT_CONST_GROUP_SUM, FT_CONST_NONORM_W, FT_CONST_NONORM_B, FT_CONST_BIAS_COLUMN,
       FT_CONST_LAYER_SCALE };
typedef struct ft_const_entry {
    int kind;
    uint64_t tag;  /* what else the value depends on (e.g. the batch norm's eps) */
    /* what it was made from: tensor headers (conv+BN), or the data pointers of the
     * sources (stack, fold, derived: the headers differ per plan, the memory does not) */
    const void *parts[FT_STACK_MAX];
    int n;
    ft_tensor *t; /* persistent header holding the storage */
} ft_const_entry;

typedef struct ft_const_cache {
    ft_const_entry *e;
    int n, cap;
} ft_const_cache;

/* parts[0..n) stacked along dim 0 (contiguous, same dtype and trailing dims),
 * from the cache or made with the backend's copy kernel. NULL + error on failure.
 * Keyed by the parts' memory: a cache that outlives the graph (the model's) may
 * only be given parts whose memory outlives it too (ft_graph_const_shared). */
ft_tensor *ft_const_cache_stack(ft_ctx *ctx, ft_const_cache *c, ft_tensor *const *parts, int n);
void ft_const_cache_free(ft_const_cache *c);
/* The cached constant made as (kind, tag) from parts[0..n) (entries may be NULL), or NULL. */
ft_tensor *ft_const_cache_get(ft_const_cache *c, int kind, uint64_t tag, const void *const *parts, int n);
/* Caches t (the cache keeps its own reference to t's storage). */
ft_status ft_const_cache_put(ft_ctx *ctx, ft_const_cache *c, int kind, uint64_t tag,
                             const void *const *parts, int n, const ft_tensor *t);

typedef struct ft_graph {
    ft_ctx *ctx;
    ft_const_cache *cache;    /* the model's, or NULL (then nothing is shared) */
    ft_tensor **nodes;        /* topological order; headers owned (calloc'd) */
    int n_nodes, cap_nodes;
    ft_tensor **owned;        /* headers made by passes, kept until the graph is freed */
    int n_owned, cap_owned;
    void **host;              /* host data of constant leaves (owned) */
    int n_host, cap_host;
    ft_graph_io in[FT_GRAPH_MAX_IN];
    int n_in;
    ft_graph_io out[FT_GRAPH_MAX_OUT];
    int n_out;
    ft_pass_counts passes;
} ft_graph;

/* Builds a graph from a finished trace whose outputs are outs[0..n_out) (named).
 * Every traced node is copied; ft_pass_dce drops those no output needs. */
ft_status ft_graph_from_trace(ft_ctx *ctx, const ft_trace *tr, const ft_graph_io *outs, int n_out,
                              ft_graph **out);
void ft_graph_destroy(ft_graph *g);
/* Traces m's forward (architecture callbacks) on placeholder inputs shaped like
 * the host inputs in m->in[] into a graph; nothing runs (graph/executor.c). */
struct ft_model;
ft_status ft_graph_trace_model(struct ft_model *m, ft_graph **out);

/* A new zeroed header owned by the graph (not in the node list). */
ft_tensor *ft_graph_new_tensor(ft_graph *g);
/* A new graph-owned constant with device storage, contiguous, of that shape. */
ft_tensor *ft_graph_new_const(ft_graph *g, ft_dtype dtype, int ndim, const int64_t *shape);
/* A constant (weight or folded) copied to a new malloc'd f32 host array (NULL + error). */
float *ft_graph_const_to_host(ft_graph *g, ft_tensor *t);
/* A new graph-owned constant of dtype holding the f32 host values given. */
ft_tensor *ft_graph_const_from_host(ft_graph *g, ft_dtype dtype, int ndim, const int64_t *shape,
                                    const float *data);
/* A constant computed on the host from constants src[0..n_src) (their values as
 * f32 in h[], in each one's order) by make, which fills out (ndim / ne, src[0]'s
 * dtype) and returns false to decline. Through the model's cache under (kind,
 * tag) when every source's memory is the model's, so every plan shares one copy.
 * NULL when declined, or on an error (then *fail = 1 and the context holds the
 * message). */
typedef bool (*ft_const_make_fn)(const float *const *h, const ft_tensor *const *src, float *out,
                                 const void *user);
ft_tensor *ft_graph_const_derived(ft_graph *g, int kind, uint64_t tag, ft_tensor *const *src, int n_src,
                                  int ndim, const int64_t *ne, ft_const_make_fn make, const void *user,
                                  int *fail);
/* Turns node t into a view of root (offset offs elements, t's own shape and
 * strides kept), read through src (root or a view of it). */
void ft_graph_make_view(ft_tensor *t, ft_tensor *src, ft_tensor *root, int64_t offs);
/* Inserts node at position pos of the node list. */
ft_status ft_graph_insert(ft_graph *g, int pos, ft_tensor *node);
/* Drops nodes flagged FT_GF_DEAD from the node list and renumbers ids. */
void ft_graph_compact(ft_graph *g);
/* Every reference to `old` (sources, view roots, outputs) now names `repl`. */
void ft_graph_replace_uses(ft_graph *g, ft_tensor *old, ft_tensor *repl);
/* uses[i]: how many sources and outputs reference node i (ids must be current). */
void ft_graph_count_uses(const ft_graph *g, int *uses);
/* How many sources and outputs reference t (views count as users). */
int ft_graph_uses(const ft_graph *g, const ft_tensor *t);
/* Moves node to position pos (later than its own), keeping the others' order. */
void ft_graph_move_later(ft_graph *g, ft_tensor *node, int pos);
/* Whether a node can be absorbed by a fusion: one user, not an output. */
bool ft_graph_fusable(const ft_graph *g, const ft_tensor *t);
/* The one node reading a fusable t (as a source, views included), or NULL. */
ft_tensor *ft_graph_sole_user(const ft_graph *g, const ft_tensor *t);
/* Whether t is computed from weights and constants only (no input reaches it). */
bool ft_graph_is_const(const ft_tensor *t);
/* Whether constant t's memory lives as long as the model: a weight, or a folded
 * constant held by the model's cache (not one of a plan's own constants). */
bool ft_graph_const_shared(const ft_tensor *t);
/* Whether t is a model output. */
bool ft_graph_is_output(const ft_graph *g, const ft_tensor *t);
/* Number of nodes that launch a kernel (not views or leaves). */
int ft_graph_kernel_count(const ft_graph *g);

/* ---- passes (graph/pass_*.c); each returns how many rewrites it made, or <0 on error ---- */
int ft_pass_dce(ft_graph *g);
int ft_pass_fold(ft_graph *g);          /* weight-only subgraphs evaluated at plan time */
int ft_pass_nonorm(ft_graph *g);        /* linear -> x*gamma+beta folded into the linear */
int ft_pass_conv_bn(ft_graph *g);       /* conv -> batchnorm folded into the conv */
int ft_pass_affine(ft_graph *g);        /* scale / bias adds after a linear into GEMMs */
int ft_pass_qkv(ft_graph *g);           /* sibling linears on one input merged into one GEMM */
int ft_pass_attention_rel(ft_graph *g); /* DeBERTa's scores + gathered relative terms -> attention_rel */
int ft_pass_attention(ft_graph *g);     /* matmul -> softmax -> matmul into one attention */
/* pass_attention.c's pieces, shared with pass_attention_rel.c: the view under a same-dtype
 * layout copy; a 4-d tensor with a unit inner stride; k^T (one user) rewritten as a view
 * k of the same data; an attention-like node's output laid out [B, S, H, Dv] when a
 * permute + contiguous copy merges its heads (1 if rewritten). */
ft_tensor *ft_attn_under_copy(ft_tensor *t);
bool ft_attn_inner_unit(const ft_tensor *t);
bool ft_attn_untranspose(ft_graph *g, ft_tensor *kt);
int ft_attn_heads_merged_in_place(ft_graph *g, ft_tensor *a);
int ft_pass_epilogue(ft_graph *g);      /* linear + residual add, linear + activation */
int ft_pass_ln_residual(ft_graph *g);   /* add -> layernorm into layernorm(x, residual) */
int ft_pass_eltwise(ft_graph *g);       /* chains of elementwise ops into one kernel */
int ft_pass_se(ft_graph *g);            /* pool -> conv -> act -> conv -> sigmoid -> mul into one SE gate */
int ft_pass_layer_scale(ft_graph *g);   /* linear -> * constant vector folded into the linear */
int ft_pass_nchwc(ft_graph *g);         /* CPU: CNN activations in the blocked-channel layout */

/* Runs every pass in order (unless FT_DISABLE_FUSION=1: DCE only). */
ft_status ft_graph_optimize(ft_graph *g);

/* ---- memory plan (graph/planner.c) ---- */

typedef struct ft_mem_plan {
    size_t arena_bytes;   /* the one arena every intermediate lives in */
    size_t sum_bytes;     /* all intermediates side by side (no reuse) */
    size_t lower_bound;   /* the most bytes live at any one step */
    int n_buffers;
    int n_in_place;       /* CPU blocked convolutions writing over their residual */
} ft_mem_plan;

#define FT_NO_OFFSET ((size_t)-1)

/* Gives every kernel node and each input leaf a byte offset in one arena from
 * liveness: buffers whose lifetimes do not overlap share bytes; inputs and
 * outputs live for the whole forward. offs[n_nodes] receives the offsets
 * (FT_NO_OFFSET for views, weights and constants). */
ft_status ft_plan_memory(ft_graph *g, ft_mem_plan *mp, size_t *offs);
/* Points every planned node at base + its offset and every view at its root. */
void ft_plan_bind_memory(ft_graph *g, const size_t *offs, void *base);

#ifdef __cplusplus
}
#endif

#endif /* FT_GRAPH_H */

/*
 * graph_api.h - what the model framework (models/model.c) and the tool call for
 * the graph and static execution modes (implemented in graph/).
 */
#ifndef FT_GRAPH_API_H
#define FT_GRAPH_API_H

#include "../models/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs one forward of m in m->opt.mode (FT_MODE_GRAPH or FT_MODE_STATIC) on the
 * host inputs in m->in[] (names and .host set, .t NULL), registering the outputs
 * with ft_model_add_output. Plans are built on first use per input signature
 * (names, dtypes, shapes) and kept in a bounded LRU cache (FT_GRAPH_CACHE_SIZE).
 * Switches: FT_DISABLE_FUSION=1 runs no pass but dead-node elimination;
 * FT_DISABLE_CUDA_GRAPHS=1 makes static mode run the plan without a CUDA Graph. */
ft_status ft_graph_forward(ft_model *m);
/* Frees m->graph (plans, captured graphs, arenas). NULL-safe. */
void ft_graph_free(ft_model *m);

#define FT_GRAPH_CACHE_SIZE 8

/* The costs of graph/static mode, for `ftengine run --profile`. Everything but the
 * cache counters describes the plan used by the model's last forward. */
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
    size_t const_bytes;        /* constants and folded/merged weights owned by the plan */
    /* one-time costs of this plan (milliseconds) */
    double trace_ms, passes_ms, plan_ms; /* plan_ms: memory plan, uploads, kernel resolution */
    double capture_ms, instantiate_ms;   /* CUDA Graph, per input shape (0 when not captured) */
    /* cache */
    int plans_cached;
    uint64_t plan_hits, plan_misses, plan_evictions;
} ft_graph_stats;

/* Fills *out for a model run in graph or static mode (zeros with valid = 0 before
 * its first forward). FT_ERR_INVALID_ARG for NULL arguments. */
ft_status ft_graph_stats_get(const ft_model *m, ft_graph_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* FT_GRAPH_API_H */

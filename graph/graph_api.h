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


#ifdef __cplusplus
}
#endif

#endif /* FT_GRAPH_API_H */

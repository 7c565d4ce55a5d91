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
 * FT_DISABLE_PASSES=name,... skips the passes named (graph/graph.c lists them);
 * FT_DISABLE_CUDA_GRAPHS=1 makes static mode run the plan without a CUDA Graph. */
ft_status ft_graph_forward(ft_model *m);
/* Frees m->graph (plans, captured graphs, arenas). NULL-safe. */
void ft_graph_free(ft_model *m);

#define FT_GRAPH_CACHE_SIZE 8

/* The plan of m's last graph or static forward, as ft_model_plan_step reads it
 * (graph/plan_info.c). */
struct ft_graph;
struct ft_replay_map;
typedef struct ft_plan_view {
    const struct ft_graph *g;
    struct ft_tensor *const *nodes; /* [n_steps] the node of each step */
    int n_steps;
    const char *arena;              /* base address of the arena (device memory on CUDA) */
    int captured;                   /* the plan runs as a CUDA Graph */
    const struct ft_replay_map *map; /* graph nodes per step (NULL: not counted) */
} ft_plan_view;
/* Fills *v (zeros and false when m has no plan). v->nodes stays valid until the
 * next forward of m. */
bool ft_graph_last_plan(const ft_model *m, ft_plan_view *v);
/* What a plan step computes beyond its op ("bias+gelu"), as ft_plan_step_info.detail
 * says it (graph/plan_info.c); "" when nothing was fused into it. */
void ft_plan_step_detail(const ft_tensor *t, char *d, size_t n);


#ifdef __cplusplus
}
#endif

#endif /* FT_GRAPH_API_H */

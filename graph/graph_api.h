/*
 * graph_api.h - what the model framework (models/model.c) calls for the graph
 * and static execution modes (implemented in graph/).
 */
#ifndef FT_GRAPH_API_H
#define FT_GRAPH_API_H

#include "../models/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs one forward of m in m->opt.mode (FT_MODE_GRAPH or FT_MODE_STATIC) on the
 * host inputs in m->in[] (names and .host set, .t NULL), registering the outputs
 * with ft_model_add_output. Plans are built on first use per input signature. */
ft_status ft_graph_forward(ft_model *m);
/* Frees m->graph (plans, captured graphs, arenas). NULL-safe. */
void ft_graph_free(ft_model *m);

#ifdef __cplusplus
}
#endif

#endif /* FT_GRAPH_API_H */

/*
 * trace.h - recording a model's op calls instead of running them.
 *
 * Between ft_trace_begin and ft_trace_end the context is in FT_EXEC_TRACE:
 * the dispatcher checks each call and infers its shape, then hands the node
 * to ft_trace_record instead of allocating and launching. Model inputs are
 * placeholder leaves (FT_TF_INPUT), constants made from host data are copied
 * into the trace (FT_TF_CONST), weights are referenced as they are
 * (FT_TF_WEIGHT, data already on the device). Nodes stay in the context's
 * arena; a graph built from the trace (graph/graph.c) copies what it keeps.
 */
#ifndef FT_TRACE_H
#define FT_TRACE_H

#include "../engine/ft_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_trace {
    ft_tensor **nodes;  /* every node and leaf created while tracing, in call order */
    int n_nodes, cap_nodes;
    void **host_data;   /* host copies of constants (owned) */
    int n_host, cap_host;
    ft_exec_kind saved_exec;
    struct ft_trace *saved_trace;
} ft_trace;

/* Puts ctx in trace mode recording into `tr` (zero it first). */
ft_status ft_trace_begin(ft_ctx *ctx, ft_trace *tr);
/* Leaves trace mode (the recorded nodes stay valid until the arena scope ends). */
void ft_trace_end(ft_ctx *ctx, ft_trace *tr);
/* Frees what the trace owns (not the nodes: they live in the arena). */
void ft_trace_free(ft_trace *tr);
/* Appends a node (called by the dispatcher). */
ft_status ft_trace_record(ft_ctx *ctx, ft_tensor *node);
/* A placeholder leaf for a model input of that shape. */
ft_tensor *ft_trace_input(ft_ctx *ctx, const char *name, ft_dtype dtype, int ndim,
                          const int64_t *shape);
/* A constant leaf holding a copy of host data (ft_tensor_from_host while tracing). */
ft_tensor *ft_trace_constant(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape,
                             const void *data);
/* Host data of a constant leaf made by ft_trace_constant (else NULL). */
const void *ft_trace_constant_data(const ft_tensor *leaf);

#ifdef __cplusplus
}
#endif

#endif /* FT_TRACE_H */

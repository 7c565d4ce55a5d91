/*
 * cuda_graph.h - capturing a plan into a CUDA Graph and replaying it
 * (graph/cuda_graph.c, compiled only when nvcc is found). Kept behind this
 * small interface so graph/executor.c builds without the CUDA toolkit.
 */
#ifndef FT_CUDA_GRAPH_H
#define FT_CUDA_GRAPH_H

#include "../engine/ft_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_cuda_graph ft_cuda_graph;

/* Captures what run(user) enqueues on the context's stream (strict, thread-local
 * capture mode: a stray synchronizing call or legacy-stream use fails the capture
 * instead of being silently recorded) and instantiates it. Reports the capture and
 * instantiation times in milliseconds. */
ft_status ft_cuda_graph_capture(ft_ctx *ctx, ft_status (*run)(void *user), void *user,
                                ft_cuda_graph **out, double *capture_ms, double *instantiate_ms);
/* During a capture on the context's stream: the nodes it holds so far (the
 * executor's replay map counts them after each step). 0, or -1 when the capture
 * cannot be queried (no error is recorded: the map is instrumentation only). */
int ft_cuda_capture_node_count(ft_ctx *ctx, int64_t *n);
/* A captured graph's nodes: all of them, and those that leave a device activity
 * record when replayed (kernel, memcpy, memset); -1 if they could not be listed. */
void ft_cuda_graph_node_counts(const ft_cuda_graph *g, int64_t *all, int64_t *work);
/* One cudaGraphLaunch on the context's stream. */
ft_status ft_cuda_graph_launch(ft_ctx *ctx, ft_cuda_graph *g);
void ft_cuda_graph_free(ft_cuda_graph *g);

#ifdef __cplusplus
}
#endif

#endif /* FT_CUDA_GRAPH_H */

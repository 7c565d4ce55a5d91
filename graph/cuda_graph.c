/*
 * cuda_graph.c - CUDA Graph capture and replay of a plan (see cuda_graph.h).
 * Everything a captured plan touches (arena, constants, library workspaces)
 * is allocated before capture by the executor's warm-up run.
 */
#include "cuda_graph.h"
#include "../engine/nvtx.h"

#include <cuda_runtime.h>
#include <stdlib.h>
#include <time.h>

cudaStream_t ft_cuda_stream(ft_ctx *ctx); /* engine/cuda_backend.c */

struct ft_cuda_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int64_t nodes, work_nodes; /* -1: not known */
};

/* Counts the graph's nodes and those of a kind that leaves a CUPTI record. */
static void count_nodes(ft_cuda_graph *g) {
    g->nodes = g->work_nodes = -1;
    size_t n = 0;
    if (cudaGraphGetNodes(g->graph, NULL, &n) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    cudaGraphNode_t *v = (cudaGraphNode_t *)malloc((n ? n : 1) * sizeof *v);
    if (!v) return;
    int64_t work = 0;
    if (cudaGraphGetNodes(g->graph, v, &n) == cudaSuccess) {
        for (size_t i = 0; i < n && work >= 0; i++) {
            enum cudaGraphNodeType t;
            if (cudaGraphNodeGetType(v[i], &t) != cudaSuccess) work = -1;
            else if (t == cudaGraphNodeTypeKernel || t == cudaGraphNodeTypeMemcpy ||
                     t == cudaGraphNodeTypeMemset)
                work++;
        }
        if (work >= 0) {
            g->nodes = (int64_t)n;
            g->work_nodes = work;
        }
    }
    (void)cudaGetLastError();
    free(v);
}

int ft_cuda_capture_node_count(ft_ctx *ctx, int64_t *n) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = NULL;
    size_t count = 0;
    cudaError_t e = cudaStreamGetCaptureInfo(ft_cuda_stream(ctx), &cs, NULL, &graph, NULL, NULL, NULL);
    if (e == cudaSuccess && cs == cudaStreamCaptureStatusActive && graph)
        e = cudaGraphGetNodes(graph, NULL, &count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    if (cs != cudaStreamCaptureStatusActive || !graph) return -1;
    *n = (int64_t)count;
    return 0;
}

void ft_cuda_graph_node_counts(const ft_cuda_graph *g, int64_t *all, int64_t *work) {
    *all = g ? g->nodes : -1;
    *work = g ? g->work_nodes : -1;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

ft_status ft_cuda_graph_capture(ft_ctx *ctx, ft_status (*run)(void *user), void *user,
                                ft_cuda_graph **out, double *capture_ms, double *instantiate_ms) {
    *out = NULL;
    cudaStream_t s = ft_cuda_stream(ctx);
    if (!s)
        return ft_set_error(ctx, FT_ERR_CAPTURE,
                            "CUDA graph capture needs the context's non-blocking stream");
    double t0 = now_ms();
    /* NVTX: "capture" from begin to end capture, "instantiate" over instantiate + upload */
    if (ctx->nvtx) ft_nvtx_push_fixed(FT_NVTX_CAPTURE_RANGE, -1);
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    /* every failure below also clears the runtime's last error: left set, the next
     * FT_CUDA_LAUNCH_CHECK (cudaGetLastError) would blame an unrelated kernel */
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (ctx->nvtx) ft_nvtx_pop();
        return ft_set_error(ctx, FT_ERR_CAPTURE, "cudaStreamBeginCapture failed: %s",
                            cudaGetErrorString(e));
    }
    ft_status st = run(user);
    cudaGraph_t graph = NULL;
    e = cudaStreamEndCapture(s, &graph);
    if (ctx->nvtx) ft_nvtx_pop();
    if (st != FT_OK || e != cudaSuccess || !graph) {
        if (graph) cudaGraphDestroy(graph);
        (void)cudaGetLastError(); /* a failed capture leaves a sticky launch error behind */
        if (st != FT_OK) {
            ft_error_prefix(ctx, "during CUDA graph capture");
            return st;
        }
        return ft_set_error(ctx, FT_ERR_CAPTURE, "cudaStreamEndCapture failed: %s",
                            cudaGetErrorString(e));
    }
    double t1 = now_ms();
    cudaGraphExec_t exec = NULL;
    if (ctx->nvtx) ft_nvtx_push_fixed(FT_NVTX_INSTANTIATE, -1);
    e = cudaGraphInstantiate(&exec, graph, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cudaGraphDestroy(graph);
        if (ctx->nvtx) ft_nvtx_pop();
        return ft_set_error(ctx, FT_ERR_CAPTURE, "cudaGraphInstantiate failed: %s",
                            cudaGetErrorString(e));
    }
    /* upload now so the first replay does not pay for it */
    e = cudaGraphUpload(exec, s);
    if (ctx->nvtx) ft_nvtx_pop();
    double t2 = now_ms();
    ft_cuda_graph *g = (ft_cuda_graph *)calloc(1, sizeof *g);
    if (!g || e != cudaSuccess) {
        (void)cudaGetLastError();
        free(g);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        if (e != cudaSuccess)
            return ft_set_error(ctx, FT_ERR_CAPTURE, "cudaGraphUpload failed: %s",
                                cudaGetErrorString(e));
        return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    }
    g->graph = graph;
    g->exec = exec;
    count_nodes(g);
    if (capture_ms) *capture_ms = t1 - t0;
    if (instantiate_ms) *instantiate_ms = t2 - t1;
    *out = g;
    return FT_OK;
}

ft_status ft_cuda_graph_launch(ft_ctx *ctx, ft_cuda_graph *g) {
    cudaError_t e = cudaGraphLaunch(g->exec, ft_cuda_stream(ctx));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ft_set_error(ctx, FT_ERR_CUDA, "cudaGraphLaunch failed: %s", cudaGetErrorString(e));
    }
    return FT_OK;
}

void ft_cuda_graph_free(ft_cuda_graph *g) {
    if (!g) return;
    if (g->exec) cudaGraphExecDestroy(g->exec);
    if (g->graph) cudaGraphDestroy(g->graph);
    free(g);
}

/*
 * nvtx.h - ftengine's NVTX ranges (engine/nvtx.c): what Nsight Systems (or any
 * NVTX tool) shows on the host timeline. Everything goes to one NVTX domain,
 * "ftengine", with names registered once, a colour per kind of range and a
 * category per kind and per dispatcher phase:
 *
 *   forward <model> <mode> <shape>        every ft_model_forward
 *     trace / passes / plan               a plan being built (graph, static)
 *     warmup / capture / instantiate      a CUDA Graph being made (static, CUDA)
 *     <op>                                eager: one per dispatched op, holding
 *       check / infer / alloc / select / launch
 *     <op>+<what was fused>               graph: one per plan step
 *     replay                              static: the whole plan at once
 *
 * Off with no tool attached (then every entry point here is one predictable
 * branch on ctx->nvtx by the caller); see ft_nvtx_wanted for the switch.
 * Without the NVTX headers at build time this compiles to stubs.
 */
#ifndef FT_NVTX_H
#define FT_NVTX_H

#include <stdint.h>

struct ft_ctx;

/* Kinds of range: each has its colour and its category. */
typedef enum ft_nvtx_kind {
    FT_NVTX_FORWARD = 0,
    FT_NVTX_OP,
    FT_NVTX_PHASE,
    FT_NVTX_STEP,    /* a graph-mode plan step */
    FT_NVTX_BUILD,   /* trace, passes, plan */
    FT_NVTX_CAPTURE, /* warmup, capture, instantiate */
    FT_NVTX_REPLAY,
    FT_NVTX_KIND_COUNT
} ft_nvtx_kind;

/* The ranges with a fixed name. */
typedef enum ft_nvtx_fixed {
    FT_NVTX_TRACE = 0,
    FT_NVTX_PASSES,
    FT_NVTX_PLAN,
    FT_NVTX_WARMUP,
    FT_NVTX_CAPTURE_RANGE,
    FT_NVTX_INSTANTIATE,
    FT_NVTX_REPLAY_RANGE,
    FT_NVTX_FIXED_COUNT
} ft_nvtx_fixed;

/* A name ready to push: the tool's registered handle, else the text itself
 * (a tool that does not register strings still sees the name). */
typedef struct ft_nvtx_name {
    void *handle;     /* nvtxStringHandle_t, or NULL */
    const char *text; /* lives as long as the process */
} ft_nvtx_name;

/* Whether NVTX ranges are wanted, decided once per process: FT_NVTX=0 off,
 * FT_NVTX=1 (any other non-empty value) on; unset, on exactly when an NVTX
 * tool attached itself (NVTX_INJECTION64_PATH loaded, or a static injection)
 * and listens to domain ranges. Creates the domain and registers the names. */
int ft_nvtx_wanted(void);
/* Sets the context's NVTX state (ctx->nvtx, its hooks) from ft_nvtx_wanted and
 * names the OpenMP worker threads; called by ft_ctx_create_ex. */
void ft_nvtx_ctx_init(struct ft_ctx *ctx);

/* The registered name of s (copied, registered once, kept for the process). */
ft_nvtx_name ft_nvtx_name_of(const char *s);

void ft_nvtx_push(const ft_nvtx_name *name, ft_nvtx_kind kind, int64_t payload);
void ft_nvtx_push_fixed(ft_nvtx_fixed which, int64_t payload);
void ft_nvtx_pop(void);

/* The top-level range of one forward: "forward <model> <mode> <d0>x<d1>...".
 * Resets the per-forward op counter used as the op ranges' payload. */
void ft_nvtx_forward_push(struct ft_ctx *ctx, const char *model, const char *mode, int ndim,
                          const int64_t *shape);

/* Names a CUDA stream (cudaStream_t) for the tool. */
void ft_nvtx_name_stream(void *stream, const char *name);

#endif /* FT_NVTX_H */

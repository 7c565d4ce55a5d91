/*
 * nvtx.c - NVTX ranges around every dispatched op and each of its phases, so
 * Nsight Systems shows "layernorm > check / infer / alloc / select / launch"
 * on the host timeline above the kernels. Off unless FT_NVTX=1 (a range push
 * costs a few hundred nanoseconds even with no tool attached). Compiled to
 * nothing without the CUDA toolkit (NVTX v3 is header-only).
 */
#include "ft_internal.h"

#ifdef FT_WITH_NVTX
#include <nvtx3/nvToolsExt.h>

static const char *const phase_names[FT_PHASE_COUNT] = {"check", "infer", "alloc", "select", "launch"};

static void op_begin(void *user, const ft_tensor *node) {
    (void)user;
    /* a leaf with a name is a whole-plan pseudo op (static mode's graph_launch) */
    nvtxRangePushA(node->op == FT_OP_NONE && node->name[0] ? node->name : ft_op_name(node->op));
}
static void phase_begin(void *user, ft_phase ph, const ft_tensor *node) {
    (void)user;
    (void)node;
    nvtxRangePushA(phase_names[ph]);
}
static void phase_end(void *user, ft_phase ph, const ft_tensor *node) {
    (void)user;
    (void)ph;
    (void)node;
    nvtxRangePop();
}
/* A failed op leaves its phase range open: pop to the op's depth is not known,
 * so only the op range is closed; failures end the forward anyway. */
static void op_end(void *user, const ft_tensor *node, ft_status st) {
    (void)user;
    (void)node;
    (void)st;
    nvtxRangePop();
}

static const ft_dispatch_hooks nvtx_hooks = {op_begin, phase_begin, phase_end, op_end, NULL};

const ft_dispatch_hooks *ft_nvtx_hooks(void) { return &nvtx_hooks; }
#else
const ft_dispatch_hooks *ft_nvtx_hooks(void) { return NULL; }
#endif

/*
 * cpu_kernels.h - the CPU reference kernels, one per op (kernels/cpu/ files).
 * Each reads its sources from dst->src[], its parameters from dst->op_params,
 * writes dst, and returns an ft_status. Plain stride-aware C with f32
 * accumulation: this backend is the oracle every other path is tested against.
 */
#ifndef FT_CPU_KERNELS_H
#define FT_CPU_KERNELS_H

#include "../../engine/ft_internal.h"
#include "scratch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The OpenMP team size of the calling thread's current kernel: every parallel
 * region of the CPU backend takes num_threads(ft_cpu_threads()). Each kernel
 * entry sets it from its context (ctx->cpu_threads), so a context's thread count
 * holds whichever thread runs it, and two contexts never share one. */
int ft_cpu_threads(void);
void ft_cpu_set_threads(int n);
/* Test hook: the largest team the calling thread has led in a GEMM or an
 * elementwise region since the last reset (omp_get_num_threads() inside). */
int ft_cpu_team_seen(void);
void ft_cpu_team_reset(void);
void ft_cpu_team_note(int n);

/* Plan-time packing of a node's weight (src[1], a model parameter) into the
 * GEMM's panel layout, kept in node->extra for the plan's life: linear weights
 * as B panels, ungrouped convolution weights as A panels. The kernel then skips
 * packing (and f16/bf16 conversion of) the weight. Never fails the plan:
 * without memory the kernel packs per call as in eager mode. unpack frees it
 * (plan teardown); both ignore other nodes. */
int ft_cpu_prepack(ft_ctx *ctx, ft_tensor *node);
/* ft_cpu_prepack, but a node whose weight one of the steps `done` already packed
 * (the same op, weight memory, shape and dtype: a layer run several times, as
 * ALBERT's shared groups) shares that packed copy instead of making another. */
int ft_cpu_prepack_shared(ft_ctx *ctx, ft_tensor *node, ft_tensor *const *done, int n_done);
void ft_cpu_unpack(ft_tensor *node);
int ft_cpu_prepack_count(void); /* test hook: weights packed so far in this process */

/* Declares kernel `name`; a definition FT_CPU_KERNEL_DEF(name) { body } gets a
 * wrapper that sets the team size and the current scratch (scratch.h) from ctx
 * before the body runs, and clears the scratch after. */
#define FT_CPU_KERNEL(name) int ft_cpu_##name(ft_ctx *ctx, ft_tensor *dst)
#define FT_CPU_KERNEL_DEF(name)                                   \
    static int ft_cpu_##name##_body(ft_ctx *ctx, ft_tensor *dst); \
    FT_CPU_KERNEL(name) {                                         \
        ft_cpu_set_threads(ctx->cpu_threads);                     \
        ft_cpu_scratch_enter(ctx);                                \
        int st_ = ft_cpu_##name##_body(ctx, dst);                 \
        ft_cpu_scratch_leave();                                   \
        return st_;                                               \
    }                                                             \
    static int ft_cpu_##name##_body(ft_ctx *ctx, ft_tensor *dst)

FT_CPU_KERNEL(copy);
FT_CPU_KERNEL(concat);
FT_CPU_KERNEL(pad);
FT_CPU_KERNEL(embedding);
FT_CPU_KERNEL(gather_last);
FT_CPU_KERNEL(binary);      /* add, sub, mul, div (dst->op tells which) */
FT_CPU_KERNEL(scale);
FT_CPU_KERNEL(unary);       /* gelu, gelu_tanh, tanh, relu, sigmoid, relu6, silu */
FT_CPU_KERNEL(sum_last);
FT_CPU_KERNEL(softmax);
FT_CPU_KERNEL(layernorm);
FT_CPU_KERNEL(groupnorm);
FT_CPU_KERNEL(batchnorm);
FT_CPU_KERNEL(pool_dim);
FT_CPU_KERNEL(linear);
FT_CPU_KERNEL(matmul);
FT_CPU_KERNEL(attention);
FT_CPU_KERNEL(conv1d);
FT_CPU_KERNEL(conv2d);
FT_CPU_KERNEL(maxpool2d);
FT_CPU_KERNEL(global_avgpool);
FT_CPU_KERNEL(weight_norm);
FT_CPU_KERNEL(fused_eltwise);
FT_CPU_KERNEL(linear_grouped);  /* linear_grouped.c */
FT_CPU_KERNEL(attention_rel);   /* attention_rel.c */
FT_CPU_KERNEL(dwconv2d);     /* kernels/cpu/dwconv.c */
FT_CPU_KERNEL(channel_norm); /* kernels/cpu/vision.c */
FT_CPU_KERNEL(se_gate);      /* kernels/cpu/vision.c */
FT_CPU_KERNEL(position_ids);

#ifdef __cplusplus
}
#endif

#endif /* FT_CPU_KERNELS_H */

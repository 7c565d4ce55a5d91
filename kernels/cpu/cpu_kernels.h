/*
 * cpu_kernels.h - the CPU reference kernels, one per op (kernels/cpu/ files).
 * Each reads its sources from dst->src[], its parameters from dst->op_params,
 * writes dst, and returns an ft_status. Plain stride-aware C with f32
 * accumulation: this backend is the oracle every other path is tested against.
 */
#ifndef FT_CPU_KERNELS_H
#define FT_CPU_KERNELS_H

#include "../../engine/ft_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_CPU_KERNEL(name) int ft_cpu_##name(ft_ctx *ctx, ft_tensor *dst)

FT_CPU_KERNEL(copy);
FT_CPU_KERNEL(concat);
FT_CPU_KERNEL(pad);
FT_CPU_KERNEL(embedding);
FT_CPU_KERNEL(gather_last);
FT_CPU_KERNEL(binary);      /* add, sub, mul, div (dst->op tells which) */
FT_CPU_KERNEL(scale);
FT_CPU_KERNEL(unary);       /* gelu, gelu_tanh, tanh, relu, sigmoid */
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

#ifdef __cplusplus
}
#endif

#endif /* FT_CPU_KERNELS_H */

/*
 * cuda_kernels.h - the CUDA kernels, one entry per op (kernels/cuda/ files).
 * Each reads its sources from dst->src[], its parameters from dst->op_params,
 * writes dst, and returns an ft_status. Launches go on the context's stream
 * with f32 accumulation; every launch is checked. Compiled only when nvcc is found.
 */
#ifndef FT_CUDA_KERNELS_H
#define FT_CUDA_KERNELS_H

#include "../../engine/ft_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_CUDA_KERNEL(name) int ft_cuda_##name(ft_ctx *ctx, ft_tensor *dst)

FT_CUDA_KERNEL(copy);
FT_CUDA_KERNEL(concat);
FT_CUDA_KERNEL(pad);
FT_CUDA_KERNEL(embedding);
FT_CUDA_KERNEL(gather_last);
FT_CUDA_KERNEL(binary);      /* add, sub, mul, div (dst->op tells which) */
FT_CUDA_KERNEL(scale);
FT_CUDA_KERNEL(unary);       /* gelu, gelu_tanh, tanh, relu, sigmoid, relu6, silu */
FT_CUDA_KERNEL(sum_last);
FT_CUDA_KERNEL(softmax);
FT_CUDA_KERNEL(layernorm);
FT_CUDA_KERNEL(groupnorm);
FT_CUDA_KERNEL(batchnorm);
FT_CUDA_KERNEL(pool_dim);
FT_CUDA_KERNEL(linear);
FT_CUDA_KERNEL(matmul);
FT_CUDA_KERNEL(attention);
FT_CUDA_KERNEL(conv1d);
FT_CUDA_KERNEL(conv2d);
FT_CUDA_KERNEL(maxpool2d);
FT_CUDA_KERNEL(global_avgpool);
FT_CUDA_KERNEL(weight_norm);
FT_CUDA_KERNEL(fused_eltwise);
FT_CUDA_KERNEL(linear_grouped); /* linear_grouped.cu */
FT_CUDA_KERNEL(attention_rel);  /* attention_rel.cu */
FT_CUDA_KERNEL(dwconv2d);     /* kernels/cuda/dwconv.cu */
FT_CUDA_KERNEL(channel_norm); /* kernels/cuda/vision.cu */
FT_CUDA_KERNEL(se_gate);      /* kernels/cuda/vision.cu */
FT_CUDA_KERNEL(position_ids);

#ifdef __cplusplus
}
#endif

#endif /* FT_CUDA_KERNELS_H */

/*
 * pending.c - CPU kernels not written yet. Each returns FT_ERR_UNSUPPORTED with
 * the op's name, so a missing kernel is a clear error, never a crash. A kernel
 * file that implements an op deletes its line here. This file goes away once empty.
 */
#include "cpu_kernels.h"

#define PENDING(name)                                                                   \
    FT_CPU_KERNEL(name) {                                                               \
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "op %s has no CPU kernel yet",       \
                            ft_op_name(dst->op));                                        \
    }

PENDING(copy)
PENDING(concat)
PENDING(pad)
PENDING(embedding)
PENDING(gather_last)
PENDING(binary)
PENDING(scale)
PENDING(unary)
PENDING(sum_last)
PENDING(softmax)
PENDING(layernorm)
PENDING(groupnorm)
PENDING(batchnorm)
PENDING(pool_dim)
PENDING(linear)
PENDING(matmul)
PENDING(attention)
PENDING(conv1d)
PENDING(conv2d)
PENDING(maxpool2d)
PENDING(global_avgpool)
PENDING(weight_norm)
PENDING(fused_eltwise)

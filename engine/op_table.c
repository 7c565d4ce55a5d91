/*
 * op_table.c - the op table: one row per op saying what the op is (name,
 * arity, flags), how its arguments are checked and its shape inferred, and
 * which CPU and CUDA kernels run it. The dispatcher, the tracer, the graph
 * passes and the MAC counter all read this table; nothing else lists ops.
 * A NULL kernel means "not available on that backend" and is reported by the
 * dispatcher (eager) or the planner (graph), never hit halfway through a run.
 */
#include "ft_internal.h"
#include "op_infer.h"

#include "../kernels/cpu/cpu_kernels.h"
#ifdef FT_WITH_CUDA
#include "../kernels/cuda/cuda_kernels.h"
#define CUDA(fn) fn
#else
#define CUDA(fn) NULL
#endif

#define CAP FT_OPF_CAPTURABLE
#define EW (FT_OPF_ELEMENTWISE | FT_OPF_CAPTURABLE)

const ft_op_def ft_op_table[FT_OP_COUNT] = {
    [FT_OP_NONE] = {.name = "leaf"},
    [FT_OP_VIEW] = {.name = "view", .min_src = 1, .max_src = 1, .flags = FT_OPF_VIEW | CAP},
    [FT_OP_COPY] = {.name = "copy", .min_src = 1, .max_src = 1, .flags = CAP,
                    .check = ft_check_copy, .infer = ft_infer_copy,
                    .cpu = ft_cpu_copy, .cuda = CUDA(ft_cuda_copy)},
    [FT_OP_CONCAT] = {.name = "concat", .min_src = 2, .max_src = 2, .flags = CAP,
                      .infer = ft_infer_concat,
                      .cpu = ft_cpu_concat, .cuda = CUDA(ft_cuda_concat)},
    [FT_OP_PAD] = {.name = "pad", .min_src = 1, .max_src = 1, .flags = CAP,
                   .infer = ft_infer_pad,
                   .cpu = ft_cpu_pad, .cuda = CUDA(ft_cuda_pad)},
    [FT_OP_EMBEDDING] = {.name = "embedding", .min_src = 2, .max_src = 2, .flags = CAP,
                         .check = ft_check_embedding, .infer = ft_infer_embedding,
                         .cpu = ft_cpu_embedding, .cuda = CUDA(ft_cuda_embedding)},
    [FT_OP_GATHER_LAST] = {.name = "gather_last", .min_src = 2, .max_src = 2, .flags = CAP,
                           .check = ft_check_gather_last, .infer = ft_infer_gather_last,
                           .cpu = ft_cpu_gather_last, .cuda = CUDA(ft_cuda_gather_last)},

    [FT_OP_ADD] = {.name = "add", .min_src = 2, .max_src = 2, .flags = EW,
                   .check = ft_check_binary, .infer = ft_infer_binary,
                   .cpu = ft_cpu_binary, .cuda = CUDA(ft_cuda_binary)},
    [FT_OP_SUB] = {.name = "sub", .min_src = 2, .max_src = 2, .flags = EW,
                   .check = ft_check_binary, .infer = ft_infer_binary,
                   .cpu = ft_cpu_binary, .cuda = CUDA(ft_cuda_binary)},
    [FT_OP_MUL] = {.name = "mul", .min_src = 2, .max_src = 2, .flags = EW,
                   .check = ft_check_binary, .infer = ft_infer_binary,
                   .cpu = ft_cpu_binary, .cuda = CUDA(ft_cuda_binary)},
    [FT_OP_DIV] = {.name = "div", .min_src = 2, .max_src = 2, .flags = EW,
                   .check = ft_check_binary, .infer = ft_infer_binary,
                   .cpu = ft_cpu_binary, .cuda = CUDA(ft_cuda_binary)},
    [FT_OP_SCALE] = {.name = "scale", .min_src = 1, .max_src = 1, .flags = EW,
                     .check = ft_check_float_src0, .infer = ft_infer_same,
                     .cpu = ft_cpu_scale, .cuda = CUDA(ft_cuda_scale)},
    [FT_OP_GELU] = {.name = "gelu", .min_src = 1, .max_src = 1, .flags = EW,
                    .check = ft_check_float_src0, .infer = ft_infer_same,
                    .cpu = ft_cpu_unary, .cuda = CUDA(ft_cuda_unary)},
    [FT_OP_GELU_TANH] = {.name = "gelu_tanh", .min_src = 1, .max_src = 1, .flags = EW,
                         .check = ft_check_float_src0, .infer = ft_infer_same,
                         .cpu = ft_cpu_unary, .cuda = CUDA(ft_cuda_unary)},
    [FT_OP_TANH] = {.name = "tanh", .min_src = 1, .max_src = 1, .flags = EW,
                    .check = ft_check_float_src0, .infer = ft_infer_same,
                    .cpu = ft_cpu_unary, .cuda = CUDA(ft_cuda_unary)},
    [FT_OP_RELU] = {.name = "relu", .min_src = 1, .max_src = 1, .flags = EW,
                    .check = ft_check_float_src0, .infer = ft_infer_same,
                    .cpu = ft_cpu_unary, .cuda = CUDA(ft_cuda_unary)},
    [FT_OP_SIGMOID] = {.name = "sigmoid", .min_src = 1, .max_src = 1, .flags = EW,
                       .check = ft_check_float_src0, .infer = ft_infer_same,
                       .cpu = ft_cpu_unary, .cuda = CUDA(ft_cuda_unary)},

    [FT_OP_SUM_LAST] = {.name = "sum_last", .min_src = 1, .max_src = 1, .flags = CAP,
                        .check = ft_check_float_src0, .infer = ft_infer_sum_last,
                        .cpu = ft_cpu_sum_last, .cuda = CUDA(ft_cuda_sum_last)},
    [FT_OP_SOFTMAX] = {.name = "softmax", .min_src = 1, .max_src = 2, .flags = CAP,
                       .check = ft_check_softmax, .infer = ft_infer_softmax,
                       .cpu = ft_cpu_softmax, .cuda = CUDA(ft_cuda_softmax)},
    [FT_OP_LAYERNORM] = {.name = "layernorm", .min_src = 1, .max_src = 4, .flags = CAP,
                         .check = ft_check_float_same, .infer = ft_infer_layernorm,
                         .cpu = ft_cpu_layernorm, .cuda = CUDA(ft_cuda_layernorm)},
    [FT_OP_GROUPNORM] = {.name = "groupnorm", .min_src = 1, .max_src = 3, .flags = CAP,
                         .check = ft_check_float_same, .infer = ft_infer_channel_norm,
                         .cpu = ft_cpu_groupnorm, .cuda = CUDA(ft_cuda_groupnorm)},
    [FT_OP_BATCHNORM] = {.name = "batchnorm", .min_src = 5, .max_src = 5, .flags = CAP,
                         .check = ft_check_float_same, .infer = ft_infer_channel_norm,
                         .cpu = ft_cpu_batchnorm, .cuda = CUDA(ft_cuda_batchnorm)},
    [FT_OP_POOL_DIM] = {.name = "pool_dim", .min_src = 1, .max_src = 1, .flags = CAP,
                        .check = ft_check_pool_dim, .infer = ft_infer_pool_dim,
                        .cpu = ft_cpu_pool_dim, .cuda = CUDA(ft_cuda_pool_dim)},

    [FT_OP_LINEAR] = {.name = "linear", .min_src = 2, .max_src = 4, .flags = FT_OPF_GEMM | CAP,
                      .check = ft_check_float_same, .infer = ft_infer_linear,
                      .cpu = ft_cpu_linear, .cuda = CUDA(ft_cuda_linear), .macs = ft_macs_linear},
    [FT_OP_MATMUL] = {.name = "matmul", .min_src = 2, .max_src = 2, .flags = FT_OPF_GEMM | CAP,
                      .check = ft_check_float_same, .infer = ft_infer_matmul,
                      .cpu = ft_cpu_matmul, .cuda = CUDA(ft_cuda_matmul), .macs = ft_macs_matmul},
    [FT_OP_ATTENTION] = {.name = "attention", .min_src = 3, .max_src = 4, .flags = CAP,
                         .check = ft_check_attention, .infer = ft_infer_attention,
                         .cpu = ft_cpu_attention, .cuda = CUDA(ft_cuda_attention),
                         .macs = ft_macs_attention},

    [FT_OP_CONV1D] = {.name = "conv1d", .min_src = 2, .max_src = 6, .flags = FT_OPF_GEMM | CAP,
                      .check = ft_check_conv, .infer = ft_infer_conv,
                      .cpu = ft_cpu_conv1d, .cuda = CUDA(ft_cuda_conv1d), .macs = ft_macs_conv},
    [FT_OP_CONV2D] = {.name = "conv2d", .min_src = 2, .max_src = 6, .flags = FT_OPF_GEMM | CAP,
                      .check = ft_check_conv, .infer = ft_infer_conv,
                      .cpu = ft_cpu_conv2d, .cuda = CUDA(ft_cuda_conv2d), .macs = ft_macs_conv},
    [FT_OP_MAXPOOL2D] = {.name = "maxpool2d", .min_src = 1, .max_src = 1, .flags = CAP,
                         .check = ft_check_float_src0, .infer = ft_infer_maxpool2d,
                         .cpu = ft_cpu_maxpool2d, .cuda = CUDA(ft_cuda_maxpool2d)},
    [FT_OP_GLOBAL_AVGPOOL] = {.name = "global_avgpool", .min_src = 1, .max_src = 1, .flags = CAP,
                              .check = ft_check_float_src0, .infer = ft_infer_global_avgpool,
                              .cpu = ft_cpu_global_avgpool, .cuda = CUDA(ft_cuda_global_avgpool)},
    [FT_OP_WEIGHT_NORM] = {.name = "weight_norm", .min_src = 2, .max_src = 2, .flags = CAP,
                           .check = ft_check_float_same, .infer = ft_infer_weight_norm,
                           .cpu = ft_cpu_weight_norm, .cuda = CUDA(ft_cuda_weight_norm)},

    [FT_OP_FUSED_ELTWISE] = {.name = "fused_eltwise", .min_src = 1, .max_src = FT_MAX_SRC,
                             .flags = EW, .check = ft_check_float_same,
                             .cpu = ft_cpu_fused_eltwise, .cuda = CUDA(ft_cuda_fused_eltwise)},

    [FT_OP_LINEAR_GROUPED] = {.name = "linear_grouped", .min_src = 2, .max_src = 4, .flags = FT_OPF_GEMM | CAP,
                              .check = ft_check_float_same, .infer = ft_infer_linear_grouped,
                              .cpu = ft_cpu_linear_grouped, .cuda = CUDA(ft_cuda_linear_grouped),
                              .macs = ft_macs_linear},
    [FT_OP_ATTENTION_REL] = {.name = "attention_rel", .min_src = 3, .max_src = 7, .flags = CAP,
                             .check = ft_check_attention_rel, .infer = ft_infer_attention_rel,
                             .cpu = ft_cpu_attention_rel, .cuda = CUDA(ft_cuda_attention_rel),
                             .macs = ft_macs_attention_rel},
    [FT_OP_RELU6] = {.name = "relu6", .min_src = 1, .max_src = 1, .flags = EW,
                     .check = ft_check_float_src0, .infer = ft_infer_same,
                     .cpu = ft_cpu_unary, .cuda = CUDA(ft_cuda_unary)},
    [FT_OP_SILU] = {.name = "silu", .min_src = 1, .max_src = 1, .flags = EW,
                    .check = ft_check_float_src0, .infer = ft_infer_same,
                    .cpu = ft_cpu_unary, .cuda = CUDA(ft_cuda_unary)},
    [FT_OP_DWCONV2D] = {.name = "dwconv2d", .min_src = 2, .max_src = 6, .flags = CAP,
                        .check = ft_check_conv, .infer = ft_infer_dwconv,
                        .cpu = ft_cpu_dwconv2d, .cuda = CUDA(ft_cuda_dwconv2d), .macs = ft_macs_conv},
    [FT_OP_CHANNEL_NORM] = {.name = "channel_norm", .min_src = 1, .max_src = 3, .flags = CAP,
                            .check = ft_check_float_same, .infer = ft_infer_channel_norm,
                            .cpu = ft_cpu_channel_norm, .cuda = CUDA(ft_cuda_channel_norm)},
    [FT_OP_SE_GATE] = {.name = "se_gate", .min_src = 5, .max_src = 5, .flags = CAP,
                       .check = ft_check_se_gate, .infer = ft_infer_se_gate,
                       .cpu = ft_cpu_se_gate, .cuda = CUDA(ft_cuda_se_gate), .macs = ft_macs_se_gate},
    [FT_OP_POSITION_IDS] = {.name = "position_ids", .min_src = 1, .max_src = 1, .flags = CAP,
                            .check = ft_check_position_ids, .infer = ft_infer_position_ids,
                            .cpu = ft_cpu_position_ids, .cuda = CUDA(ft_cuda_position_ids)},
};

#ifndef __cplusplus
_Static_assert(sizeof ft_op_table / sizeof ft_op_table[0] == FT_OP_COUNT,
               "every op needs a row in ft_op_table");
#endif

const char *ft_op_name(ft_op op) {
    if ((int)op < 0 || op >= FT_OP_COUNT || !ft_op_table[op].name) return "?";
    return ft_op_table[op].name;
}

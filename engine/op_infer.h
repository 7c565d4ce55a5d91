/*
 * op_infer.h - check, infer and MAC-count functions used by the op table
 * (engine/op_table.c); defined in engine/op_infer.c.
 */
#ifndef FT_OP_INFER_H
#define FT_OP_INFER_H

#include "ft_internal.h"

/* broadcasting helpers shared with kernels and graph passes */
bool ft_broadcastable_to(const ft_tensor *m, const ft_tensor *x);
int ft_broadcast_shape(const ft_tensor *a, const ft_tensor *b, int *ndim, int64_t *ne);

int ft_check_float_src0(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_binary(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_copy(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_same_dtype_all(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_float_same(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_embedding(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_gather_last(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_softmax(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_attention(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_position_ids(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_pool_dim(ft_ctx *ctx, const ft_tensor *dst);
int ft_check_conv(ft_ctx *ctx, const ft_tensor *dst);

int ft_infer_same(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_copy(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_binary(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_concat(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_pad(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_embedding(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_gather_last(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_sum_last(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_softmax(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_position_ids(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_layernorm(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_channel_norm(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_pool_dim(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_linear(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_matmul(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_attention(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_conv(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_maxpool2d(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_global_avgpool(ft_ctx *ctx, ft_tensor *dst);
int ft_infer_weight_norm(ft_ctx *ctx, ft_tensor *dst);

int64_t ft_macs_linear(const ft_tensor *dst);
int64_t ft_macs_matmul(const ft_tensor *dst);
int64_t ft_macs_attention(const ft_tensor *dst);
int64_t ft_macs_conv(const ft_tensor *dst);

/* engine/op_infer_rel.c: the grouped linear and the disentangled attention */
int ft_infer_linear_grouped(ft_ctx *ctx, ft_tensor *dst);
int ft_check_attention_rel(ft_ctx *ctx, const ft_tensor *dst);
int ft_infer_attention_rel(ft_ctx *ctx, ft_tensor *dst);
int64_t ft_macs_attention_rel(const ft_tensor *dst);

/* engine/op_infer_vision.c: the ops of the efficient vision models */
int ft_infer_dwconv(ft_ctx *ctx, ft_tensor *dst);
int ft_check_se_gate(ft_ctx *ctx, const ft_tensor *dst);
int ft_infer_se_gate(ft_ctx *ctx, ft_tensor *dst);
int64_t ft_macs_se_gate(const ft_tensor *dst);

#endif /* FT_OP_INFER_H */

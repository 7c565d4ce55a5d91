/*
 * ftengine_ops_ext.h - public ops added after include/ftengine.h reached its
 * size budget; ftengine.h includes it at its end, so users include ftengine.h
 * alone. Conventions as in ftengine.h's "Ops" section: every op goes through the
 * dispatcher, shapes follow PyTorch, f32/f16/bf16 with f32 accumulation, and an
 * op whose inputs are NULL returns NULL (the earlier error stays recorded).
 */
#ifndef FTENGINE_OPS_EXT_H
#define FTENGINE_OPS_EXT_H

#include "ftengine.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Grouped linear, a grouped 1x1 convolution over channels-last rows: x [..., K],
 *  w [N, K/groups], bias [N] or NULL; output columns g*N/groups ... (g+1)*N/groups-1
 *  read input channels g*K/groups ... (g+1)*K/groups-1 only (SqueezeBERT's Conv1d).
 *  groups 1 is ft_linear. */
ft_tensor *ft_linear_grouped(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, int groups);

/** Disentangled (DeBERTa) attention: with d(i, j) = clamp(i - j + span, 0, 2 span - 1),
 *  out[b,h,i] = row_scale[b,h,i] * sum_j softmax_j(q_i k_j^T * scale + c2p[b,h,i,d(i,j)]
 *  + p2c[b,h,j,d(i,j)] + mask[b,h,i,j]) v_j. q [B,H,Sq,D], k [B,H,Sk,D], v [B,H,Sk,Dv];
 *  c2p [B,H,Sq,2 span], p2c [B,H,Sk,2 span] (q's dtype, any strides, either may be NULL);
 *  mask f32 broadcastable to [B,H,Sq,Sk] or NULL; row_scale (q's dtype) broadcastable to
 *  [B,H,Sq,1] or NULL. The relative terms are gathered in the kernel, never written as
 *  [B,H,Sq,Sk] tensors. Graph mode makes it from DeBERTa's unfused ops. */
ft_tensor *ft_attention_rel(ft_ctx *ctx, ft_tensor *q, ft_tensor *k, ft_tensor *v, ft_tensor *mask,
                            ft_tensor *c2p, ft_tensor *p2c, ft_tensor *row_scale, float scale,
                            int64_t span);

#ifdef __cplusplus
}
#endif

#endif /* FTENGINE_OPS_EXT_H */

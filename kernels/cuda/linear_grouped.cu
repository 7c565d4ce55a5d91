/*
 * linear_grouped.cu - the grouped linear (engine/ops.h, SqueezeBERT's grouped
 * 1x1 convolutions over channels-last rows) as strided-batched cuBLASLt GEMMs
 * (gemm.cu): the batch runs over the input groups, item g reading x's columns
 * g Kg ... in place (batch stride Kg, row stride the row's), its weight block
 * and writing its column block of y (batch stride Ng, row stride N), with the
 * bias (batch stride Ng), residual and activation in the epilogue. A weight
 * stacked by the QKV merge (groups a multiple R of in_groups) is R such
 * batched GEMMs, one per stacked member.
 */
#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"
#include "gemm.h"
#include "../../engine/cuda_backend_internal.h"

FT_CUDA_KERNEL(linear_grouped) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1], *bias = dst->src[2], *res = dst->src[3];
    const ft_params_linear_grouped *p = FT_PARAMS(dst, ft_params_linear_grouped);
    int64_t rows = 0, rs = 0;
    if (!ft_tensor_rows_layout(x, &rows, &rs))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "linear_grouped: x is not in rows layout");
    if (!ft_tensor_contiguous(w) || w->ndim != 2)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "linear_grouped: w is not a contiguous matrix");
    if (!ft_tensor_contiguous(dst))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "linear_grouped: the output is not contiguous");
    int64_t gi = p->in_groups, reps = p->groups / gi, n = w->ne[0], kg = w->ne[1], ng = n / p->groups;
    size_t es = ft_dtype_size(dst->dtype);
    if (rows <= 1) rs = x->ne[x->ndim - 1];

    ft_block *bias_blk = NULL;
    const char *b = bias ? (const char *)bias->data : NULL;
    ft_status st = FT_OK;
    if (bias && !ft_tensor_contiguous(bias)) {
        void *tmp = ft_cuda_scratch(ctx, ft_nbytes(bias), &bias_blk);
        if (!tmp) return ctx->status;
        st = ft_cuda_gather_contiguous(ctx, bias, tmp);
        b = (const char *)tmp;
    }
    const char *r = res ? (const char *)res->data : NULL;
    if (st == FT_OK && res && !ft_tensor_contiguous(res)) {
        /* C may alias D in cuBLASLt: gather the residual into the output */
        st = ft_cuda_gather_contiguous(ctx, res, dst->data);
        r = (const char *)dst->data;
    }
    for (int64_t m = 0; m < reps && st == FT_OK; m++) {
        /* stacked member m: output groups m gi ... (m + 1) gi - 1, reading input groups 0 .. gi - 1 */
        int64_t col = m * gi * ng;
        ft_gemm_desc g;
        memset(&g, 0, sizeof g);
        g.dtype = dst->dtype;
        g.m = rows;
        g.n = ng;
        g.k = kg;
        g.batch = gi;
        g.a = x->data;
        g.lda = rs;
        g.stride_a = kg;
        g.b = (const char *)w->data + (size_t)(col * kg) * es;
        g.trans_b = true; /* w rows [Ng, Kg] per group: op(B) = W^T */
        g.ldb = kg;
        g.stride_b = ng * kg;
        g.c = (char *)dst->data + (size_t)col * es;
        g.ldc = n;
        g.stride_c = ng;
        g.bias = b ? b + (size_t)col * es : NULL;
        g.stride_bias = ng;
        g.residual = r ? r + (size_t)col * es : NULL;
        g.alpha = p->alpha;
        g.act = p->act;
        st = ft_cuda_gemm(ctx, &g);
    }
    ft_block_unref(bias_blk);
    return st;
}

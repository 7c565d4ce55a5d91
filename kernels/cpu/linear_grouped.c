/*
 * linear_grouped.c - CPU kernel of the grouped linear (engine/ops.h): a
 * block-diagonal weight run as one SGEMM per output group on the blocked GEMM of
 * gemm.c, each reading its input group's columns of x in place and writing its
 * column block of y. SqueezeBERT's grouped 1x1 convolutions, channels last.
 *
 * Weights are packed per group (ft_cpu_pack_b_groups): once per plan in graph and
 * static mode (node->extra, ft_cpu_linear_grouped_prepack), from the context's
 * pack cache in eager mode. With at least as many groups as threads (and a
 * multiple of them) each thread takes whole groups, single-threaded GEMMs, one
 * parallel region per call; otherwise the groups run one after the other, each
 * GEMM split over the team.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "gemm.h"
#include "pack_cache.h"

#include <omp.h>
#include <string.h>

/* The prepacked panels a plan left in node n, if they still match its weight. */
static const ft_cpu_packed_b *node_packed(const ft_tensor *n) {
    const ft_cpu_packed_b *p = (const ft_cpu_packed_b *)n->extra;
    const ft_tensor *w = n->src[1];
    int64_t g = FT_PARAMS(n, ft_params_linear_grouped)->groups;
    if (!p || n->op != FT_OP_LINEAR_GROUPED || n->device != FT_DEVICE_CPU || g < 1) return NULL;
    return p->src == w->data && p->mr == 0 && p->groups == g && p->n * g == w->ne[0] && p->k == w->ne[1] ? p
                                                                                                       : NULL;
}

bool ft_cpu_linear_grouped_prepack(ft_ctx *ctx, ft_tensor *n) {
    const ft_tensor *w = n->src[1];
    int64_t g = FT_PARAMS(n, ft_params_linear_grouped)->groups;
    if (w->ndim != 2 || g < 1 || w->ne[0] % g || w->ne[0] == 0 || w->ne[1] == 0) return false;
    ft_cpu_set_threads(ctx->cpu_threads);
    ft_cpu_f32 fw = {0};
    if (ft_cpu_f32_get(w, ft_tensor_contiguous(w), &fw)) return false; /* packs per call instead */
    int64_t ng = w->ne[0] / g, kg = w->ne[1];
    ft_cpu_packed_b *p = ft_cpu_pack_b_groups(g, true, kg, ng, fw.p, kg, ng * kg);
    ft_cpu_f32_release(&fw);
    if (!p) return false;
    p->src = w->data;
    n->extra = p;
    return true;
}

typedef struct lg_args {
    const float *x;   /* rows of K, row stride rs */
    int64_t rows, rs, kg, ng, n, in_groups;
    const float *w;   /* [N, Kg] unpacked, or NULL with pk */
    const ft_cpu_packed_b *pk;
    const float *bias;
    float alpha, beta;
    int act;          /* fused into the tiles unless a residual comes after */
    bool ep;
    float *y;         /* [rows, N] */
} lg_args;

/* Output group j: y[:, j Ng ...] = alpha x[:, (j % in_groups) Kg ...] W_j^T (+ beta y), epilogue. */
static int lg_group(const lg_args *A, int64_t j) {
    const float *xg = A->x + (j % A->in_groups) * A->kg;
    float *yg = A->y + j * A->ng;
    ft_cpu_gemm_ep ep = {A->bias ? A->bias + j * A->ng : NULL, false, A->act};
    const ft_cpu_gemm_ep *epp = A->ep ? &ep : NULL;
    if (A->pk) {
        ft_cpu_packed_b pj = ft_cpu_packed_b_group(A->pk, j);
        return ft_cpu_sgemm_packed(false, A->rows, A->alpha, xg, A->rs, &pj, A->beta, yg, A->n, epp);
    }
    return ft_cpu_sgemm_ep(false, true, A->rows, A->ng, A->kg, A->alpha, xg, A->rs, A->w + j * A->ng * A->kg,
                           A->kg, A->beta, yg, A->n, epp);
}

FT_CPU_KERNEL_DEF(linear_grouped) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1], *bias = dst->src[2], *res = dst->src[3];
    const ft_params_linear_grouped *p = FT_PARAMS(dst, ft_params_linear_grouped);
    int64_t groups = p->groups, kg = w->ne[1], n = w->ne[0], ng = n / groups;
    int64_t rows = 0, rs = 0;
    bool x_rows = ft_tensor_rows_layout(x, &rows, &rs);
    if (!x_rows) rows = ft_numel(dst) / (n > 0 ? n : 1);
    if (rows <= 1) rs = x->ne[x->ndim - 1];

    ft_cpu_f32 fx = {0}, fw = {0}, fb = {0}, fr = {0};
    ft_cpu_buf yb = {0};
    int st = FT_OK;
    float *y = dst->dtype == FT_DTYPE_F32 ? (float *)dst->data
                                          : ft_cpu_buf_get(&yb, ft_cpu_scratch_cur(), FT_SCR_OUT,
                                                           (size_t)(rows * n > 0 ? rows * n : 1) * sizeof(float));
    bool res_in_c = res && y == dst->data && res->dtype == FT_DTYPE_F32 && ft_tensor_contiguous(res);
    const ft_cpu_packed_b *pk = kg > 0 && ng > 0 ? node_packed(dst) : NULL;
    if (!pk && kg > 0 && ng > 0 && !dst->extra) pk = ft_cpu_pack_cache_linear_groups(ctx, w, groups);
    if (!y || ft_cpu_f32_get(x, x_rows, &fx) || (!pk && ft_cpu_f32_get(w, ft_tensor_contiguous(w), &fw)) ||
        (bias && ft_cpu_f32_get(bias, bias->nb[0] == 1 || bias->ne[0] == 1, &fb)) ||
        (res && !res_in_c && ft_cpu_f32_get(res, ft_tensor_contiguous(res), &fr))) {
        st = ft_set_error(ctx, FT_ERR_OOM, "linear_grouped: out of host memory for f32 staging");
        goto done;
    }
    if (fx.owned) rs = x->ne[x->ndim - 1];
    if (rows == 0 || n == 0) goto done;
    if (res_in_c && res->data != (void *)y) memmove(y, res->data, (size_t)(rows * n) * sizeof(float));
    if (kg == 0) { /* no input channels: bias (and residual) only */
        if (!res_in_c) memset(y, 0, (size_t)(rows * n) * sizeof(float));
        ft_cpu_epilogue(y, rows, n, 1, fb.p, fr.p, p->act);
        goto done;
    }

    lg_args A = {fx.p, rows, rs, kg, ng, n, p->in_groups, fw.p, pk, fb.p, p->alpha, res_in_c ? 1.0f : 0.0f,
                 p->act, !fr.p, y};
    int nt = ft_cpu_gemm_threads();
    if (nt > 1 && groups >= nt && groups % nt == 0) {
        int failed = 0;
        ft_cpu_scratch *sc = ft_cpu_scratch_cur();
#pragma omp parallel for num_threads(nt) schedule(static) reduction(| : failed)
        for (int64_t j = 0; j < groups; j++) {
            if (omp_get_thread_num() == 0) ft_cpu_team_note(omp_get_num_threads());
            ft_cpu_scratch *prev = ft_cpu_scratch_swap(sc);
            if (lg_group(&A, j)) failed = 1;
            ft_cpu_scratch_swap(prev);
        }
        if (failed) st = FT_ERR_OOM;
    } else {
        for (int64_t j = 0; j < groups && st == FT_OK; j++)
            if (lg_group(&A, j)) st = FT_ERR_OOM;
    }
    if (st != FT_OK) {
        st = ft_set_error(ctx, FT_ERR_OOM, "linear_grouped: out of host memory for GEMM packing scratch");
        goto done;
    }
    if (fr.p) ft_cpu_epilogue(y, rows, n, 1, fb.p, fr.p, p->act);
done:
    if (st == FT_OK && y && (void *)y != dst->data) ft_cpu_f32_store(dst, y, ft_numel(dst));
    ft_cpu_buf_put(&yb);
    ft_cpu_f32_release(&fx);
    ft_cpu_f32_release(&fw);
    ft_cpu_f32_release(&fb);
    ft_cpu_f32_release(&fr);
    return st;
}

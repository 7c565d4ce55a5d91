/*
 * op_infer_rel.c - checks, shape inference and MAC counts of the two ops the
 * zoo's text models added (engine/ops.h): the grouped linear (SqueezeBERT's
 * grouped 1x1 convolutions) and the disentangled attention of DeBERTa. Kept
 * apart from op_infer.c only to keep that file short.
 */
#include "op_infer.h"

#include <math.h>
#include <string.h>

static int set_out(ft_tensor *dst, ft_dtype dt, int ndim, const int64_t *ne) {
    dst->dtype = dt;
    dst->ndim = ndim;
    for (int i = 0; i < ndim; i++) dst->ne[i] = ne[i];
    ft_tensor_set_contiguous_strides(dst);
    return FT_OK;
}

int ft_infer_linear_grouped(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1], *b = dst->src[2];
    const ft_params_linear_grouped *p = FT_PARAMS(dst, ft_params_linear_grouped);
    if (!isfinite(p->alpha) || p->alpha == 0.0f)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "linear_grouped: alpha %g (finite and nonzero)",
                            (double)p->alpha);
    if (p->in_groups < 1 || p->groups < 1 || p->groups % p->in_groups)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG,
                            "linear_grouped: %d output groups over %d input groups (a positive multiple)",
                            p->groups, p->in_groups);
    if (x->ndim < 1 || w->ndim != 2)
        return ft_set_error(ctx, FT_ERR_SHAPE, "linear_grouped: expected x [..., K] and w [N, K/groups]");
    int64_t k = x->ne[x->ndim - 1], n = w->ne[0];
    if (k % p->in_groups || n % p->groups || w->ne[1] != k / p->in_groups)
        return ft_set_error(ctx, FT_ERR_SHAPE,
                            "linear_grouped: x [..., %lld] and w [%lld, %lld] do not fit %d groups "
                            "(w must be [N, K/groups], N and K multiples of groups)",
                            (long long)k, (long long)n, (long long)w->ne[1], p->in_groups);
    if (p->act < FT_ACT_NONE || p->act > FT_ACT_SIGMOID)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "linear_grouped: activation %d", p->act);
    if (b && (b->ndim != 1 || b->ne[0] != n))
        return ft_set_error(ctx, FT_ERR_SHAPE, "bias must have shape [%lld]", (long long)n);
    int64_t ne[FT_MAX_DIMS];
    memcpy(ne, x->ne, sizeof ne);
    ne[x->ndim - 1] = n;
    set_out(dst, x->dtype, x->ndim, ne);
    if (dst->src[3] && !ft_shape_equal(dst->src[3], dst))
        return ft_set_error(ctx, FT_ERR_SHAPE, "residual shape differs from the output");
    return FT_OK;
}

int ft_check_attention_rel(ft_ctx *ctx, const ft_tensor *dst) {
    const ft_tensor *q = dst->src[0];
    if (!ft_dtype_is_float(q->dtype))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "q must be a float tensor, got %s", ft_dtype_name(q->dtype));
    static const char *const what[7] = {"q", "k", "v", "mask", "c2p", "p2c", "row_scale"};
    for (int i = 1; i < 7; i++) {
        const ft_tensor *t = dst->src[i];
        if (!t) continue;
        ft_dtype want = i == 3 ? FT_DTYPE_F32 : q->dtype;
        if (t->dtype != want)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s has dtype %s, expected %s", what[i],
                                ft_dtype_name(t->dtype), ft_dtype_name(want));
    }
    const ft_params_attention_rel *p = FT_PARAMS(dst, ft_params_attention_rel);
    if (p->span < 1 || !isfinite(p->scale))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "attention_rel: span %d, scale %g", p->span,
                            (double)p->scale);
    return FT_OK;
}

/* t is [B, H, rows, cols] exactly (the relative products) */
static bool rel_shape(const ft_tensor *t, const ft_tensor *q, int64_t rows, int64_t cols) {
    return t->ndim == 4 && t->ne[0] == q->ne[0] && t->ne[1] == q->ne[1] && t->ne[2] == rows && t->ne[3] == cols;
}

int ft_infer_attention_rel(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *m = dst->src[3];
    const ft_tensor *c2p = dst->src[4], *p2c = dst->src[5], *rs = dst->src[6];
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || q->ne[0] != k->ne[0] || q->ne[1] != k->ne[1] ||
        q->ne[3] != k->ne[3] || v->ne[0] != k->ne[0] || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2])
        return ft_set_error(ctx, FT_ERR_SHAPE, "expected q [B,H,Sq,D], k [B,H,Sk,D], v [B,H,Sk,Dv]");
    int64_t two_span = 2 * (int64_t)FT_PARAMS(dst, ft_params_attention_rel)->span;
    if (c2p && !rel_shape(c2p, q, q->ne[2], two_span))
        return ft_set_error(ctx, FT_ERR_SHAPE, "c2p must be [B,H,Sq,2 span] = [%lld,%lld,%lld,%lld]",
                            (long long)q->ne[0], (long long)q->ne[1], (long long)q->ne[2], (long long)two_span);
    if (p2c && !rel_shape(p2c, q, k->ne[2], two_span))
        return ft_set_error(ctx, FT_ERR_SHAPE, "p2c must be [B,H,Sk,2 span] = [%lld,%lld,%lld,%lld]",
                            (long long)q->ne[0], (long long)q->ne[1], (long long)k->ne[2], (long long)two_span);
    int64_t ne[4] = {q->ne[0], q->ne[1], q->ne[2], v->ne[3]};
    set_out(dst, q->dtype, 4, ne);
    ft_tensor s = *dst;
    s.ne[3] = k->ne[2];
    if (m && !ft_broadcastable_to(m, &s))
        return ft_set_error(ctx, FT_ERR_SHAPE, "mask is not broadcastable to [B,H,Sq,Sk]");
    s.ne[3] = 1;
    if (rs && !ft_broadcastable_to(rs, &s))
        return ft_set_error(ctx, FT_ERR_SHAPE, "row_scale is not broadcastable to [B,H,Sq,1]");
    return FT_OK;
}

int64_t ft_macs_attention_rel(const ft_tensor *dst) {
    const ft_tensor *q = dst->src[0], *k = dst->src[1];
    /* q k^T and p v; the relative products are their own matmuls */
    return q->ne[0] * q->ne[1] * q->ne[2] * k->ne[2] * (q->ne[3] + dst->ne[3]);
}

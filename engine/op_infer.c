/*
 * op_infer.c - argument checks, shape inference and MAC counts of every op.
 * These are backend-independent: they run in the dispatcher's "check" and
 * "infer" phases in eager mode and while tracing, so an ill-shaped call fails
 * the same way in every mode, before anything is allocated.
 */
#include "op_infer.h"

#include "ft_internal.h"

#include <math.h>
#include <string.h>

/* ---- helpers ---- */

static int set_out(ft_tensor *dst, ft_dtype dt, int ndim, const int64_t *ne) {
    dst->dtype = dt;
    dst->ndim = ndim;
    for (int i = 0; i < ndim; i++) dst->ne[i] = ne[i];
    ft_tensor_set_contiguous_strides(dst);
    return FT_OK;
}

static int need_float(ft_ctx *ctx, const ft_tensor *t, const char *what) {
    if (!ft_dtype_is_float(t->dtype))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s must be a float tensor, got %s", what,
                            ft_dtype_name(t->dtype));
    return FT_OK;
}

static int need_int(ft_ctx *ctx, const ft_tensor *t, const char *what) {
    if (t->dtype != FT_DTYPE_I64 && t->dtype != FT_DTYPE_I32)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s must be an i64 or i32 tensor, got %s",
                            what, ft_dtype_name(t->dtype));
    return FT_OK;
}

static int need_same_dtype(ft_ctx *ctx, const ft_tensor *a, const ft_tensor *b, const char *what) {
    if (a->dtype != b->dtype)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s has dtype %s, expected %s", what,
                            ft_dtype_name(b->dtype), ft_dtype_name(a->dtype));
    return FT_OK;
}

/* A 1-d tensor of n elements (per-channel parameters). */
static int need_vec(ft_ctx *ctx, const ft_tensor *t, int64_t n, const char *what) {
    if (t->ndim != 1 || t->ne[0] != n)
        return ft_set_error(ctx, FT_ERR_SHAPE, "%s must have shape [%lld]", what, (long long)n);
    return FT_OK;
}

bool ft_broadcastable_to(const ft_tensor *m, const ft_tensor *x) {
    if (m->ndim > x->ndim) return false;
    for (int i = 0; i < m->ndim; i++) {
        int64_t a = m->ne[m->ndim - 1 - i], b = x->ne[x->ndim - 1 - i];
        if (a != b && a != 1) return false;
    }
    return true;
}

int ft_broadcast_shape(const ft_tensor *a, const ft_tensor *b, int *ndim, int64_t *ne) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = a->ndim - n + i, ib = b->ndim - n + i;
        int64_t da = ia >= 0 ? a->ne[ia] : 1, db = ib >= 0 ? b->ne[ib] : 1;
        if (da != db && da != 1 && db != 1) return -1;
        ne[i] = da == 1 ? db : da;
    }
    *ndim = n;
    return 0;
}

/* ---- checks ---- */

int ft_check_float_src0(ft_ctx *ctx, const ft_tensor *dst) {
    return need_float(ctx, dst->src[0], "input");
}

int ft_check_binary(ft_ctx *ctx, const ft_tensor *dst) {
    int st = need_float(ctx, dst->src[0], "a");
    if (st) return st;
    return need_same_dtype(ctx, dst->src[0], dst->src[1], "b");
}

int ft_check_copy(ft_ctx *ctx, const ft_tensor *dst) {
    const ft_params_copy *p = FT_PARAMS(dst, ft_params_copy);
    if (p->dtype < 0 || p->dtype >= FT_DTYPE_COUNT)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "invalid target dtype %d", p->dtype);
    return FT_OK;
}

int ft_check_same_dtype_all(ft_ctx *ctx, const ft_tensor *dst) {
    for (int i = 1; i < FT_MAX_SRC; i++)
        if (dst->src[i] && dst->src[i]->dtype != dst->src[0]->dtype)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "input %d has dtype %s, expected %s", i,
                                ft_dtype_name(dst->src[i]->dtype), ft_dtype_name(dst->src[0]->dtype));
    return FT_OK;
}

int ft_check_float_same(ft_ctx *ctx, const ft_tensor *dst) {
    int st = need_float(ctx, dst->src[0], "input");
    if (st) return st;
    return ft_check_same_dtype_all(ctx, dst);
}

int ft_check_embedding(ft_ctx *ctx, const ft_tensor *dst) {
    int st = need_float(ctx, dst->src[0], "table");
    if (st) return st;
    return need_int(ctx, dst->src[1], "ids");
}

int ft_check_gather_last(ft_ctx *ctx, const ft_tensor *dst) {
    return need_int(ctx, dst->src[1], "idx");
}

int ft_check_softmax(ft_ctx *ctx, const ft_tensor *dst) {
    int st = need_float(ctx, dst->src[0], "x");
    if (st) return st;
    if (FT_PARAMS(dst, ft_params_softmax)->causal && dst->src[0]->ndim < 2)
        return ft_set_error(ctx, FT_ERR_SHAPE, "a causal softmax needs [..., Sq, Sk] scores, got rank %d",
                            dst->src[0]->ndim);
    if (dst->src[1] && dst->src[1]->dtype != FT_DTYPE_F32)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "mask must be f32, got %s",
                            ft_dtype_name(dst->src[1]->dtype));
    return FT_OK;
}

int ft_check_attention(ft_ctx *ctx, const ft_tensor *dst) {
    int st = need_float(ctx, dst->src[0], "q");
    if (st) return st;
    if ((st = need_same_dtype(ctx, dst->src[0], dst->src[1], "k"))) return st;
    if ((st = need_same_dtype(ctx, dst->src[0], dst->src[2], "v"))) return st;
    if (dst->src[3] && dst->src[3]->dtype != FT_DTYPE_F32)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "mask must be f32, got %s",
                            ft_dtype_name(dst->src[3]->dtype));
    return FT_OK;
}

int ft_check_position_ids(ft_ctx *ctx, const ft_tensor *dst) {
    if (dst->src[0]->ndim < 1) return ft_set_error(ctx, FT_ERR_SHAPE, "ids must have at least one dim");
    return need_int(ctx, dst->src[0], "ids");
}

int ft_check_pool_dim(ft_ctx *ctx, const ft_tensor *dst) {
    const ft_params_pool_dim *p = FT_PARAMS(dst, ft_params_pool_dim);
    if (p->kind < 0 || p->kind > 2 || p->kernel < 1 || p->stride < 1)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "invalid pooling kind %d kernel %d stride %d",
                            p->kind, p->kernel, p->stride);
    return need_float(ctx, dst->src[0], "x");
}

int ft_check_conv(ft_ctx *ctx, const ft_tensor *dst) {
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    if (p->stride < 1 || p->padding < 0 || p->groups < 1)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "invalid stride %d, padding %d or groups %d",
                            p->stride, p->padding, p->groups);
    if (p->asym && (dst->op == FT_OP_CONV1D || p->pad_t < 0 || p->pad_b < 0 || p->pad_l < 0 || p->pad_r < 0))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "invalid per-side padding (%d, %d, %d, %d)%s", p->pad_t,
                            p->pad_b, p->pad_l, p->pad_r, dst->op == FT_OP_CONV1D ? " on a conv1d" : "");
    if (p->dilation < 0 || (p->dilation > 1 && dst->op != FT_OP_DWCONV2D))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "dilation %d (only depthwise convolutions dilate)",
                            p->dilation);
    if (p->act < FT_ACT_NONE || p->act > FT_ACT_LAST)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "activation %d", p->act);
    return ft_check_float_same(ctx, dst);
}

/* ---- shape inference ---- */

int ft_infer_same(ft_ctx *ctx, ft_tensor *dst) {
    (void)ctx;
    const ft_tensor *x = dst->src[0];
    return set_out(dst, x->dtype, x->ndim, x->ne);
}

int ft_infer_copy(ft_ctx *ctx, ft_tensor *dst) {
    (void)ctx;
    const ft_tensor *x = dst->src[0];
    return set_out(dst, (ft_dtype)FT_PARAMS(dst, ft_params_copy)->dtype, x->ndim, x->ne);
}

int ft_infer_binary(ft_ctx *ctx, ft_tensor *dst) {
    int nd;
    int64_t ne[FT_MAX_DIMS];
    if (ft_broadcast_shape(dst->src[0], dst->src[1], &nd, ne))
        return ft_set_error(ctx, FT_ERR_SHAPE, "shapes cannot be broadcast together");
    return set_out(dst, dst->src[0]->dtype, nd, ne);
}

int ft_infer_concat(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *a = dst->src[0], *b = dst->src[1];
    int d = FT_PARAMS(dst, ft_params_concat)->dim;
    if (a->dtype != b->dtype)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "dtypes differ");
    if (a->ndim != b->ndim || d < 0 || d >= a->ndim)
        return ft_set_error(ctx, FT_ERR_SHAPE, "ranks differ or dim %d out of range", d);
    int64_t ne[FT_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) {
        if (i != d && a->ne[i] != b->ne[i])
            return ft_set_error(ctx, FT_ERR_SHAPE, "sizes differ in dim %d", i);
        ne[i] = i == d ? a->ne[i] + b->ne[i] : a->ne[i];
    }
    return set_out(dst, a->dtype, a->ndim, ne);
}

int ft_infer_pad(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0];
    const ft_params_pad *p = FT_PARAMS(dst, ft_params_pad);
    if (p->dim < 0 || p->dim >= x->ndim || p->before < 0 || p->after < 0)
        return ft_set_error(ctx, FT_ERR_SHAPE, "invalid pad dim %d (%lld, %lld)", p->dim,
                            (long long)p->before, (long long)p->after);
    int64_t ne[FT_MAX_DIMS];
    memcpy(ne, x->ne, sizeof ne);
    ne[p->dim] += p->before + p->after;
    return set_out(dst, x->dtype, x->ndim, ne);
}

int ft_infer_embedding(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *tab = dst->src[0], *ids = dst->src[1];
    if (tab->ndim != 2) return ft_set_error(ctx, FT_ERR_SHAPE, "table must be 2-d [V, D]");
    if (ids->ndim + 1 > FT_MAX_DIMS) return ft_set_error(ctx, FT_ERR_SHAPE, "ids have too many dims");
    int64_t ne[FT_MAX_DIMS];
    for (int i = 0; i < ids->ndim; i++) ne[i] = ids->ne[i];
    ne[ids->ndim] = tab->ne[1];
    return set_out(dst, tab->dtype, ids->ndim + 1, ne);
}

int ft_infer_gather_last(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0], *idx = dst->src[1];
    if (x->ndim < 2 || idx->ndim != 2 || idx->ne[0] != x->ne[x->ndim - 2])
        return ft_set_error(ctx, FT_ERR_SHAPE, "expected x [..., I, T] and idx [I, J]");
    int64_t ne[FT_MAX_DIMS];
    memcpy(ne, x->ne, sizeof ne);
    ne[x->ndim - 1] = idx->ne[1];
    return set_out(dst, x->dtype, x->ndim, ne);
}

int ft_infer_sum_last(ft_ctx *ctx, ft_tensor *dst) {
    (void)ctx;
    const ft_tensor *x = dst->src[0];
    int64_t ne[FT_MAX_DIMS];
    memcpy(ne, x->ne, sizeof ne);
    ne[x->ndim - 1] = 1;
    return set_out(dst, x->dtype, x->ndim, ne);
}

int ft_infer_softmax(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0], *m = dst->src[1];
    if (m && !ft_broadcastable_to(m, x))
        return ft_set_error(ctx, FT_ERR_SHAPE, "mask is not broadcastable to x");
    return ft_infer_same(ctx, dst);
}

int ft_infer_position_ids(ft_ctx *ctx, ft_tensor *dst) {
    (void)ctx;
    const ft_tensor *x = dst->src[0];
    return set_out(dst, FT_DTYPE_I64, x->ndim, x->ne);
}

int ft_infer_layernorm(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0];
    int64_t d = x->ne[x->ndim - 1];
    int st;
    if (dst->src[1] && (st = need_vec(ctx, dst->src[1], d, "gamma"))) return st;
    if (dst->src[2] && (st = need_vec(ctx, dst->src[2], d, "beta"))) return st;
    if (dst->src[3] && !ft_shape_equal(dst->src[3], x))
        return ft_set_error(ctx, FT_ERR_SHAPE, "residual shape differs from x");
    return ft_infer_same(ctx, dst);
}

int ft_infer_channel_norm(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0];
    if (x->ndim < 2) return ft_set_error(ctx, FT_ERR_SHAPE, "x must be [B, C, ...]");
    int64_t c = x->ne[1];
    if (dst->op == FT_OP_GROUPNORM) {
        int g = FT_PARAMS(dst, ft_params_norm)->groups;
        if (g < 1 || c % g)
            return ft_set_error(ctx, FT_ERR_SHAPE, "%lld channels do not split into %d groups",
                                (long long)c, g);
    }
    for (int i = 1; i < FT_MAX_SRC; i++) {
        int st;
        if (dst->src[i] && (st = need_vec(ctx, dst->src[i], c, "per-channel parameter"))) return st;
    }
    return ft_infer_same(ctx, dst);
}

int ft_infer_pool_dim(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0];
    const ft_params_pool_dim *p = FT_PARAMS(dst, ft_params_pool_dim);
    if (p->dim < 0 || p->dim >= x->ndim) return ft_set_error(ctx, FT_ERR_SHAPE, "dim out of range");
    int64_t l = x->ne[p->dim];
    if (l < 1) return ft_set_error(ctx, FT_ERR_SHAPE, "empty pooling dim");
    int64_t ne[FT_MAX_DIMS];
    memcpy(ne, x->ne, sizeof ne);
    ne[p->dim] = l <= p->kernel ? 1 : (l - p->kernel + p->stride - 1) / p->stride + 1;
    /* PyTorch's ceil mode drops a last window that would start past the input */
    if ((ne[p->dim] - 1) * p->stride >= l) ne[p->dim]--;
    return set_out(dst, x->dtype, x->ndim, ne);
}

int ft_infer_linear(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1];
    if (w->ndim != 2 || x->ne[x->ndim - 1] != w->ne[1])
        return ft_set_error(ctx, FT_ERR_SHAPE, "x [..., K] and w [N, K] do not fit");
    float alpha = FT_PARAMS(dst, ft_params_linear)->alpha;
    if (!isfinite(alpha) || alpha == 0.0f) /* also catches parameters left zeroed */
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "linear: alpha %g (finite and nonzero)", (double)alpha);
    int64_t ne[FT_MAX_DIMS];
    memcpy(ne, x->ne, sizeof ne);
    ne[x->ndim - 1] = w->ne[0];
    int st;
    if (dst->src[2] && (st = need_vec(ctx, dst->src[2], w->ne[0], "bias"))) return st;
    set_out(dst, x->dtype, x->ndim, ne);
    if (dst->src[3] && !ft_shape_equal(dst->src[3], dst))
        return ft_set_error(ctx, FT_ERR_SHAPE, "residual shape differs from the output");
    return FT_OK;
}

int ft_infer_matmul(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *a = dst->src[0], *b = dst->src[1];
    int n = a->ndim;
    if (n < 2 || b->ndim != n || a->ne[n - 1] != b->ne[n - 2])
        return ft_set_error(ctx, FT_ERR_SHAPE, "expected a [..., M, K] and b [..., K, N]");
    for (int i = 0; i < n - 2; i++)
        if (a->ne[i] != b->ne[i]) return ft_set_error(ctx, FT_ERR_SHAPE, "batch dims differ");
    int64_t ne[FT_MAX_DIMS];
    memcpy(ne, a->ne, sizeof ne);
    ne[n - 1] = b->ne[n - 1];
    return set_out(dst, a->dtype, n, ne);
}

int ft_infer_attention(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *m = dst->src[3];
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || q->ne[0] != k->ne[0] ||
        q->ne[1] != k->ne[1] || q->ne[3] != k->ne[3] || v->ne[0] != k->ne[0] ||
        v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2])
        return ft_set_error(ctx, FT_ERR_SHAPE, "expected q [B,H,Sq,D], k [B,H,Sk,D], v [B,H,Sk,Dv]");
    int64_t ne[4] = {q->ne[0], q->ne[1], q->ne[2], v->ne[3]};
    set_out(dst, q->dtype, 4, ne);
    if (m) {
        ft_tensor s = *dst;
        s.ne[3] = k->ne[2];
        if (!ft_broadcastable_to(m, &s))
            return ft_set_error(ctx, FT_ERR_SHAPE, "mask is not broadcastable to [B,H,Sq,Sk]");
    }
    return FT_OK;
}

static int64_t conv_out(int64_t l, int k, int s, int p) { return (l + 2 * p - k) / s + 1; }

int ft_infer_conv(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1];
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    int sp = dst->op == FT_OP_CONV2D ? 2 : 1;
    if (x->ndim != 2 + sp || w->ndim != 2 + sp)
        return ft_set_error(ctx, FT_ERR_SHAPE, "expected x and w of rank %d", 2 + sp);
    int64_t cin = x->ne[1], cout = w->ne[0];
    if (cin % p->groups || cout % p->groups || w->ne[1] != cin / p->groups)
        return ft_set_error(ctx, FT_ERR_SHAPE, "channels (in %lld, out %lld) do not fit groups %d",
                            (long long)cin, (long long)cout, p->groups);
    int64_t ne[4] = {x->ne[0], cout, 0, 0}, pads[4];
    ft_conv_pads(p, pads);
    for (int i = 0; i < sp; i++) {
        /* conv1d pads its one axis with `padding` on both sides */
        int64_t before = sp == 1 ? p->padding : pads[2 * i], after = sp == 1 ? p->padding : pads[2 * i + 1];
        if (x->ne[2 + i] + before + after < w->ne[2 + i])
            return ft_set_error(ctx, FT_ERR_SHAPE, "input smaller than the kernel");
        ne[2 + i] = (x->ne[2 + i] + before + after - w->ne[2 + i]) / p->stride + 1;
    }
    int st;
    if (dst->src[2] && (st = need_vec(ctx, dst->src[2], cout, "bias"))) return st;
    set_out(dst, x->dtype, 2 + sp, ne);
    if (dst->src[3] && !ft_shape_equal(dst->src[3], dst))
        return ft_set_error(ctx, FT_ERR_SHAPE, "residual shape differs from the output");
    const ft_tensor *wb = dst->src[4];
    int64_t k = w->ne[1] * w->ne[2] * (sp == 2 ? w->ne[3] : 1);
    if (wb && (p->groups != 1 || !dst->src[2] || wb->ndim != 2 || wb->ne[0] != cout ||
               wb->ne[1] != ft_conv_wb_cols(k) || wb->dtype != w->dtype || !ft_tensor_contiguous(wb)))
        return ft_set_error(ctx, FT_ERR_SHAPE,
                            "weights with bias must be [%lld, %lld] (k + 1 padded to 8) beside a bias, groups 1",
                            (long long)cout, (long long)ft_conv_wb_cols(k));
    int st2;
    if (dst->src[5] && (st2 = need_vec(ctx, dst->src[5], cin, "input bias"))) return st2;
    if (p->act_in < FT_ACT_NONE || p->act_in > FT_ACT_LAST)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "input activation %d", p->act_in);
    return FT_OK;
}

int ft_infer_maxpool2d(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0];
    const ft_params_maxpool *p = FT_PARAMS(dst, ft_params_maxpool);
    if (x->ndim != 4) return ft_set_error(ctx, FT_ERR_SHAPE, "expected x [B, C, H, W]");
    if (p->kernel < 1 || p->stride < 1 || p->padding < 0 || 2 * p->padding > p->kernel ||
        x->ne[2] + 2 * p->padding < p->kernel || x->ne[3] + 2 * p->padding < p->kernel)
        return ft_set_error(ctx, FT_ERR_SHAPE, "invalid pooling window %d/%d/%d", p->kernel,
                            p->stride, p->padding);
    int64_t ne[4] = {x->ne[0], x->ne[1], conv_out(x->ne[2], p->kernel, p->stride, p->padding),
                     conv_out(x->ne[3], p->kernel, p->stride, p->padding)};
    return set_out(dst, x->dtype, 4, ne);
}

int ft_infer_global_avgpool(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *x = dst->src[0];
    if (x->ndim < 3) return ft_set_error(ctx, FT_ERR_SHAPE, "expected x [B, C, ...]");
    int64_t ne[FT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) ne[i] = i < 2 ? x->ne[i] : 1;
    return set_out(dst, x->dtype, x->ndim, ne);
}

int ft_infer_weight_norm(ft_ctx *ctx, ft_tensor *dst) {
    const ft_tensor *g = dst->src[0], *v = dst->src[1];
    int d = FT_PARAMS(dst, ft_params_weight_norm)->dim;
    if (d < 0 || d >= v->ndim) return ft_set_error(ctx, FT_ERR_SHAPE, "dim out of range");
    if (ft_numel(g) != v->ne[d])
        return ft_set_error(ctx, FT_ERR_SHAPE, "g must hold %lld elements", (long long)v->ne[d]);
    return set_out(dst, v->dtype, v->ndim, v->ne);
}

/* ---- MAC counts ---- */

int64_t ft_macs_linear(const ft_tensor *dst) {
    const ft_tensor *w = dst->src[1];
    return ft_numel(dst) * w->ne[1];
}

int64_t ft_macs_matmul(const ft_tensor *dst) {
    const ft_tensor *a = dst->src[0];
    return ft_numel(dst) * a->ne[a->ndim - 1];
}

int64_t ft_macs_attention(const ft_tensor *dst) {
    const ft_tensor *q = dst->src[0], *k = dst->src[1];
    /* q k^T and p v */
    return q->ne[0] * q->ne[1] * q->ne[2] * k->ne[2] * (q->ne[3] + dst->ne[3]);
}

int64_t ft_macs_conv(const ft_tensor *dst) {
    const ft_tensor *w = dst->src[1];
    int64_t per = 1;
    for (int i = 1; i < w->ndim; i++) per *= w->ne[i];
    return ft_numel(dst) * per;
}

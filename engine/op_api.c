/*
 * op_api.c - the public op functions (ftengine.h). Each one packs its
 * parameters and calls the dispatcher; views are made here directly.
 *
 * Layout rules live here, once, for every backend: an op whose kernels need a
 * layout (rows with unit inner stride, a GEMM operand, contiguous) gets its
 * input copied first by an explicit ft_contiguous call, which the dispatcher
 * sees and the tracer records as its own node, as torch.matmul does inside.
 *
 * Argument rules, for every op here and every one added: kernels and views run
 * through dispatch() / view() below, which enter the context (one thread at a
 * time: another thread's call gets FT_ERR_BUSY) and refuse a tensor of another
 * context; a NULL tensor is refused by the dispatcher (an optional one, such as
 * a bias, may be NULL). Any other pointer argument (a shape, a permutation) is
 * checked with FT_ARG_OK(ctx, ptr) before use, and an op that reads a tensor's
 * fields itself first checks it with FT_TENSOR_OK(ctx, x): both record
 * FT_ERR_INVALID_ARG naming the function and the argument.
 */
#include "ft_internal.h"

#include <stdint.h>
#include <string.h>

#define ALIVE(ctx) ((ctx) && (ctx)->status == FT_OK)

static ft_tensor *dispatch(ft_ctx *ctx, ft_op op, ft_tensor *const *src, int n,
                           const void *p, size_t ps) {
    if (!ctx || ft_ctx_enter(ctx, ft_op_name(op)) != FT_OK) return NULL;
    ft_tensor *t = NULL;
    bool ok = ALIVE(ctx);
    for (int i = 0; ok && i < n; i++)
        if (src[i] && src[i]->ctx && src[i]->ctx != ctx) {
            ft_set_error(ctx, FT_ERR_INVALID_ARG, "op %s: input %d is a tensor of another context",
                         ft_op_name(op), i);
            ok = false;
        }
    if (ok) t = ft_dispatch(ctx, op, src, n, p, ps);
    ft_ctx_leave(ctx);
    return t;
}

static ft_tensor *view(ft_ctx *ctx, ft_tensor *x, int ndim, const int64_t *ne, const int64_t *nb,
                       int64_t offs) {
    if (!ctx || ft_ctx_enter(ctx, "view") != FT_OK) return NULL;
    ft_tensor *t = ALIVE(ctx) ? ft_dispatch_view(ctx, x, ndim, ne, nb, offs) : NULL;
    ft_ctx_leave(ctx);
    return t;
}

/* The start of an op that reads x's fields before dispatching: the context healthy,
 * x present and of this context. */
#define X_OK(ctx, x) (ALIVE(ctx) && FT_TENSOR_OK(ctx, x))

static ft_tensor *view_error(ft_ctx *ctx, const char *op, const ft_tensor *x, const char *why) {
    char sh[96];
    ft_set_error(ctx, FT_ERR_SHAPE, "op %s(%s): %s", op, ft_shape_str(x, sh, sizeof sh), why);
    return NULL;
}

/* ------------------------------------------------------------------------- */
/* copies and layout                                                          */
/* ------------------------------------------------------------------------- */

ft_tensor *ft_cast(ft_ctx *ctx, ft_tensor *x, ft_dtype dtype) {
    ft_params_copy p = {(int32_t)dtype};
    return dispatch(ctx, FT_OP_COPY, &x, 1, &p, sizeof p);
}

ft_tensor *ft_contiguous(ft_ctx *ctx, ft_tensor *x) {
    if (!X_OK(ctx, x)) return NULL;
    if (ft_tensor_contiguous(x)) return x;
    return ft_cast(ctx, x, x->dtype);
}

static ft_tensor *rows_or_copy(ft_ctx *ctx, ft_tensor *x) {
    if (!x || ft_tensor_rows_layout(x, NULL, NULL)) return x;
    return ft_contiguous(ctx, x);
}

static ft_tensor *gemm_or_copy(ft_ctx *ctx, ft_tensor *x) {
    int64_t b, bs, ld;
    bool tr;
    if (!x || ft_gemm_operand(x, &b, &bs, &tr, &ld)) return x;
    return ft_contiguous(ctx, x);
}

static ft_tensor *inner_unit_or_copy(ft_ctx *ctx, ft_tensor *x) {
    if (!x || x->ndim == 0 || x->nb[x->ndim - 1] == 1 || x->ne[x->ndim - 1] == 1) return x;
    return ft_contiguous(ctx, x);
}

ft_tensor *ft_concat(ft_ctx *ctx, ft_tensor *a, ft_tensor *b, int dim) {
    if (!X_OK(ctx, a) || !FT_TENSOR_OK(ctx, b)) return NULL;
    ft_params_concat p = {ft_norm_dim(dim, a->ndim)};
    ft_tensor *s[2] = {ft_contiguous(ctx, a), ft_contiguous(ctx, b)};
    return dispatch(ctx, FT_OP_CONCAT, s, 2, &p, sizeof p);
}

ft_tensor *ft_pad(ft_ctx *ctx, ft_tensor *x, int dim, int64_t before, int64_t after, float value) {
    if (!X_OK(ctx, x)) return NULL;
    ft_params_pad p;
    memset(&p, 0, sizeof p);
    p.dim = ft_norm_dim(dim, x->ndim);
    p.before = before;
    p.after = after;
    p.value = value;
    x = ft_contiguous(ctx, x);
    return dispatch(ctx, FT_OP_PAD, &x, 1, &p, sizeof p);
}

/* ------------------------------------------------------------------------- */
/* views                                                                      */
/* ------------------------------------------------------------------------- */

ft_tensor *ft_reshape(ft_ctx *ctx, ft_tensor *x, int ndim, const int64_t *shape) {
    if (!X_OK(ctx, x) || (ndim > 0 && !FT_ARG_OK(ctx, shape))) return NULL;
    if (ndim < 0 || ndim > FT_MAX_DIMS) return view_error(ctx, "reshape", x, "invalid rank");
    int64_t ne[FT_MAX_DIMS], known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        ne[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) return view_error(ctx, "reshape", x, "more than one -1");
            infer = i;
        } else if (shape[i] < 0) {
            return view_error(ctx, "reshape", x, "negative size");
        } else {
            known *= shape[i];
        }
    }
    int64_t n = ft_numel(x);
    if (infer >= 0) {
        if (known == 0 || n % known) return view_error(ctx, "reshape", x, "size does not divide");
        ne[infer] = n / known;
        known *= ne[infer];
    }
    if (known != n) return view_error(ctx, "reshape", x, "element count differs");
    x = ft_contiguous(ctx, x);
    if (!x) return NULL;
    int64_t nb[FT_MAX_DIMS], s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        nb[i] = s;
        s *= ne[i];
    }
    return view(ctx, x, ndim, ne, nb, 0);
}

ft_tensor *ft_permute(ft_ctx *ctx, ft_tensor *x, const int *perm) {
    if (!X_OK(ctx, x) || (x->ndim > 0 && !FT_ARG_OK(ctx, perm))) return NULL;
    int64_t ne[FT_MAX_DIMS], nb[FT_MAX_DIMS];
    int seen = 0;
    for (int i = 0; i < x->ndim; i++) {
        int d = ft_norm_dim(perm[i], x->ndim);
        if (d < 0 || (seen & (1 << d))) return view_error(ctx, "permute", x, "invalid permutation");
        seen |= 1 << d;
        ne[i] = x->ne[d];
        nb[i] = x->nb[d];
    }
    return view(ctx, x, x->ndim, ne, nb, 0);
}

ft_tensor *ft_transpose(ft_ctx *ctx, ft_tensor *x, int d0, int d1) {
    if (!X_OK(ctx, x)) return NULL;
    int a = ft_norm_dim(d0, x->ndim), b = ft_norm_dim(d1, x->ndim);
    if (a < 0 || b < 0) return view_error(ctx, "transpose", x, "dim out of range");
    int perm[FT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return ft_permute(ctx, x, perm);
}

ft_tensor *ft_slice(ft_ctx *ctx, ft_tensor *x, int dim, int64_t start, int64_t length) {
    if (!X_OK(ctx, x)) return NULL;
    int d = ft_norm_dim(dim, x->ndim);
    if (d < 0) return view_error(ctx, "slice", x, "dim out of range");
    if (start < 0 || length < 0 || start + length > x->ne[d])
        return view_error(ctx, "slice", x, "range out of bounds");
    int64_t ne[FT_MAX_DIMS];
    memcpy(ne, x->ne, sizeof ne);
    ne[d] = length;
    return view(ctx, x, x->ndim, ne, x->nb, start * x->nb[d]);
}

ft_tensor *ft_select(ft_ctx *ctx, ft_tensor *x, int dim, int64_t index) {
    if (!X_OK(ctx, x)) return NULL;
    int d = ft_norm_dim(dim, x->ndim);
    if (d < 0 || index < 0 || index >= x->ne[d])
        return view_error(ctx, "select", x, "index out of range");
    int64_t ne[FT_MAX_DIMS], nb[FT_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i == d) continue;
        ne[k] = x->ne[i];
        nb[k++] = x->nb[i];
    }
    return view(ctx, x, x->ndim - 1, ne, nb, index * x->nb[d]);
}

ft_tensor *ft_expand(ft_ctx *ctx, ft_tensor *x, int ndim, const int64_t *shape) {
    if (!X_OK(ctx, x) || (ndim > 0 && !FT_ARG_OK(ctx, shape))) return NULL;
    if (ndim < x->ndim || ndim > FT_MAX_DIMS) return view_error(ctx, "expand", x, "invalid rank");
    int64_t ne[FT_MAX_DIMS], nb[FT_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        int j = i - (ndim - x->ndim);
        int64_t have = j >= 0 ? x->ne[j] : 1, want = shape[i] == -1 ? have : shape[i];
        if (want < 0) return view_error(ctx, "expand", x, "negative size");
        if (have != want && have != 1) return view_error(ctx, "expand", x, "dim is not 1 or equal");
        ne[i] = want;
        nb[i] = (j >= 0 && have == want) ? x->nb[j] : 0;
    }
    return view(ctx, x, ndim, ne, nb, 0);
}

ft_tensor *ft_unsqueeze(ft_ctx *ctx, ft_tensor *x, int dim) {
    if (!X_OK(ctx, x)) return NULL;
    if (dim < 0) dim += x->ndim + 1;
    if (dim < 0 || dim > x->ndim || x->ndim == FT_MAX_DIMS)
        return view_error(ctx, "unsqueeze", x, "dim out of range");
    int64_t ne[FT_MAX_DIMS], nb[FT_MAX_DIMS];
    for (int i = 0, k = 0; i <= x->ndim; i++) {
        if (i == dim) {
            ne[i] = 1;
            nb[i] = dim < x->ndim ? x->nb[dim] * x->ne[dim] : 1;
        } else {
            ne[i] = x->ne[k];
            nb[i] = x->nb[k++];
        }
    }
    return view(ctx, x, x->ndim + 1, ne, nb, 0);
}

/* ------------------------------------------------------------------------- */
/* gathers                                                                    */
/* ------------------------------------------------------------------------- */

ft_tensor *ft_embedding(ft_ctx *ctx, ft_tensor *table, ft_tensor *ids) {
    if (!X_OK(ctx, table) || !FT_TENSOR_OK(ctx, ids)) return NULL;
    ft_tensor *s[2] = {ft_contiguous(ctx, table), ft_contiguous(ctx, ids)};
    return dispatch(ctx, FT_OP_EMBEDDING, s, 2, NULL, 0);
}

ft_tensor *ft_position_ids(ft_ctx *ctx, ft_tensor *ids, int64_t padding_idx) {
    if (!X_OK(ctx, ids)) return NULL;
    ft_params_position_ids p = {padding_idx};
    ids = ft_contiguous(ctx, ids);
    return dispatch(ctx, FT_OP_POSITION_IDS, &ids, 1, &p, sizeof p);
}

ft_tensor *ft_gather_last(ft_ctx *ctx, ft_tensor *x, ft_tensor *idx) {
    if (!X_OK(ctx, x) || !FT_TENSOR_OK(ctx, idx)) return NULL;
    ft_tensor *s[2] = {ft_contiguous(ctx, x), ft_contiguous(ctx, idx)};
    return dispatch(ctx, FT_OP_GATHER_LAST, s, 2, NULL, 0);
}

/* ------------------------------------------------------------------------- */
/* elementwise                                                                */
/* ------------------------------------------------------------------------- */

static ft_tensor *binary(ft_ctx *ctx, ft_op op, ft_tensor *a, ft_tensor *b) {
    ft_tensor *s[2] = {a, b};
    return dispatch(ctx, op, s, 2, NULL, 0);
}

ft_tensor *ft_add(ft_ctx *ctx, ft_tensor *a, ft_tensor *b) { return binary(ctx, FT_OP_ADD, a, b); }
ft_tensor *ft_sub(ft_ctx *ctx, ft_tensor *a, ft_tensor *b) { return binary(ctx, FT_OP_SUB, a, b); }
ft_tensor *ft_mul(ft_ctx *ctx, ft_tensor *a, ft_tensor *b) { return binary(ctx, FT_OP_MUL, a, b); }
ft_tensor *ft_div(ft_ctx *ctx, ft_tensor *a, ft_tensor *b) { return binary(ctx, FT_OP_DIV, a, b); }

ft_tensor *ft_scale(ft_ctx *ctx, ft_tensor *x, float alpha, float beta) {
    ft_params_scale p = {alpha, beta};
    return dispatch(ctx, FT_OP_SCALE, &x, 1, &p, sizeof p);
}

ft_tensor *ft_gelu(ft_ctx *ctx, ft_tensor *x) { return dispatch(ctx, FT_OP_GELU, &x, 1, NULL, 0); }
ft_tensor *ft_gelu_tanh(ft_ctx *ctx, ft_tensor *x) {
    return dispatch(ctx, FT_OP_GELU_TANH, &x, 1, NULL, 0);
}
ft_tensor *ft_tanh(ft_ctx *ctx, ft_tensor *x) { return dispatch(ctx, FT_OP_TANH, &x, 1, NULL, 0); }
ft_tensor *ft_relu(ft_ctx *ctx, ft_tensor *x) { return dispatch(ctx, FT_OP_RELU, &x, 1, NULL, 0); }
ft_tensor *ft_sigmoid(ft_ctx *ctx, ft_tensor *x) {
    return dispatch(ctx, FT_OP_SIGMOID, &x, 1, NULL, 0);
}

/* ------------------------------------------------------------------------- */
/* reductions and normalisations                                             */
/* ------------------------------------------------------------------------- */

ft_tensor *ft_sum_last(ft_ctx *ctx, ft_tensor *x) {
    x = rows_or_copy(ctx, x);
    return dispatch(ctx, FT_OP_SUM_LAST, &x, 1, NULL, 0);
}

static ft_tensor *softmax(ft_ctx *ctx, ft_tensor *x, ft_tensor *mask, float scale, int causal) {
    ft_params_softmax p = {scale, causal};
    ft_tensor *s[2] = {rows_or_copy(ctx, x), mask};
    return dispatch(ctx, FT_OP_SOFTMAX, s, mask ? 2 : 1, &p, sizeof p);
}

ft_tensor *ft_softmax(ft_ctx *ctx, ft_tensor *x, ft_tensor *mask, float scale) {
    return softmax(ctx, x, mask, scale, 0);
}

ft_tensor *ft_softmax_causal(ft_ctx *ctx, ft_tensor *x, ft_tensor *mask, float scale) {
    return softmax(ctx, x, mask, scale, 1);
}

ft_tensor *ft_layernorm(ft_ctx *ctx, ft_tensor *x, ft_tensor *gamma, ft_tensor *beta, float eps) {
    ft_params_norm p = {eps, 0};
    ft_tensor *s[3] = {rows_or_copy(ctx, x), gamma, beta};
    return dispatch(ctx, FT_OP_LAYERNORM, s, 3, &p, sizeof p);
}

ft_tensor *ft_groupnorm(ft_ctx *ctx, ft_tensor *x, int groups, ft_tensor *gamma, ft_tensor *beta,
                        float eps) {
    ft_params_norm p = {eps, groups};
    ft_tensor *s[3] = {ft_contiguous(ctx, x), gamma, beta};
    return dispatch(ctx, FT_OP_GROUPNORM, s, 3, &p, sizeof p);
}

ft_tensor *ft_batchnorm(ft_ctx *ctx, ft_tensor *x, ft_tensor *mean, ft_tensor *var,
                        ft_tensor *gamma, ft_tensor *beta, float eps) {
    ft_params_norm p = {eps, 0};
    ft_tensor *s[5] = {ft_contiguous(ctx, x), mean, var, gamma, beta};
    return dispatch(ctx, FT_OP_BATCHNORM, s, 5, &p, sizeof p);
}

ft_tensor *ft_pool_dim(ft_ctx *ctx, ft_tensor *x, int dim, int kind, int kernel, int stride) {
    if (!X_OK(ctx, x)) return NULL;
    ft_params_pool_dim p = {ft_norm_dim(dim, x->ndim), kind, kernel, stride};
    x = ft_contiguous(ctx, x);
    return dispatch(ctx, FT_OP_POOL_DIM, &x, 1, &p, sizeof p);
}

/* ------------------------------------------------------------------------- */
/* linear algebra                                                             */
/* ------------------------------------------------------------------------- */

ft_tensor *ft_linear(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias) {
    ft_params_linear p = {FT_ACT_NONE, 1.0f};
    ft_tensor *s[3] = {rows_or_copy(ctx, x), ft_contiguous(ctx, w), bias};
    return dispatch(ctx, FT_OP_LINEAR, s, 3, &p, sizeof p);
}

ft_tensor *ft_matmul(ft_ctx *ctx, ft_tensor *a, ft_tensor *b, float alpha) {
    ft_params_matmul p = {alpha};
    ft_tensor *s[2] = {gemm_or_copy(ctx, a), gemm_or_copy(ctx, b)};
    return dispatch(ctx, FT_OP_MATMUL, s, 2, &p, sizeof p);
}

static ft_tensor *attention(ft_ctx *ctx, ft_tensor *q, ft_tensor *k, ft_tensor *v, ft_tensor *mask,
                            float scale, int causal) {
    ft_params_attention p = {scale, causal};
    ft_tensor *s[4] = {inner_unit_or_copy(ctx, q), inner_unit_or_copy(ctx, k),
                       inner_unit_or_copy(ctx, v), mask};
    return dispatch(ctx, FT_OP_ATTENTION, s, mask ? 4 : 3, &p, sizeof p);
}

ft_tensor *ft_linear_grouped(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, int groups) {
    if (groups == 1) return ft_linear(ctx, x, w, bias);
    ft_params_linear_grouped p = {FT_ACT_NONE, 1.0f, groups, groups};
    ft_tensor *s[3] = {rows_or_copy(ctx, x), ft_contiguous(ctx, w), bias};
    return dispatch(ctx, FT_OP_LINEAR_GROUPED, s, 3, &p, sizeof p);
}

ft_tensor *ft_attention_rel(ft_ctx *ctx, ft_tensor *q, ft_tensor *k, ft_tensor *v, ft_tensor *mask,
                            ft_tensor *c2p, ft_tensor *p2c, ft_tensor *row_scale, float scale,
                            int64_t span) {
    if (span < 1 || span > INT32_MAX / 2) {
        if (ALIVE(ctx)) ft_set_error(ctx, FT_ERR_INVALID_ARG, "attention_rel: span %lld", (long long)span);
        return NULL;
    }
    ft_params_attention_rel p = {scale, (int32_t)span};
    ft_tensor *s[7] = {inner_unit_or_copy(ctx, q), inner_unit_or_copy(ctx, k), inner_unit_or_copy(ctx, v),
                       mask, c2p, p2c, row_scale};
    return dispatch(ctx, FT_OP_ATTENTION_REL, s, 7, &p, sizeof p);
}

ft_tensor *ft_attention(ft_ctx *ctx, ft_tensor *q, ft_tensor *k, ft_tensor *v, ft_tensor *mask,
                        float scale) {
    return attention(ctx, q, k, v, mask, scale, 0);
}

ft_tensor *ft_attention_causal(ft_ctx *ctx, ft_tensor *q, ft_tensor *k, ft_tensor *v, ft_tensor *mask,
                               float scale) {
    return attention(ctx, q, k, v, mask, scale, 1);
}

/* ------------------------------------------------------------------------- */
/* convolutions and pooling                                                   */
/* ------------------------------------------------------------------------- */

static ft_tensor *conv(ft_ctx *ctx, ft_op op, ft_tensor *x, ft_tensor *w, ft_tensor *bias,
                       int stride, int padding, int groups) {
    ft_params_conv p;
    memset(&p, 0, sizeof p);
    p.stride = stride, p.padding = padding, p.groups = groups, p.act = p.act_in = FT_ACT_NONE;
    ft_tensor *s[3] = {ft_contiguous(ctx, x), ft_contiguous(ctx, w), bias};
    return dispatch(ctx, op, s, 3, &p, sizeof p);
}

ft_tensor *ft_conv1d(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, int stride,
                     int padding, int groups) {
    return conv(ctx, FT_OP_CONV1D, x, w, bias, stride, padding, groups);
}

ft_tensor *ft_conv2d(ft_ctx *ctx, ft_tensor *x, ft_tensor *w, ft_tensor *bias, int stride,
                     int padding, int groups) {
    /* a depthwise convolution goes to the direct kernel (op_api_vision.c) */
    if (ALIVE(ctx) && x && w && groups > 1 && x->ndim == 4 && w->ndim == 4 && x->ne[1] == groups &&
        w->ne[0] == groups && w->ne[1] == 1 && stride > 0) {
        ft_conv2d_opts o = {stride, groups, 1, padding, padding, padding, padding};
        return ft_conv2d_ex(ctx, x, w, bias, &o);
    }
    return conv(ctx, FT_OP_CONV2D, x, w, bias, stride, padding, groups);
}

ft_tensor *ft_maxpool2d(ft_ctx *ctx, ft_tensor *x, int kernel, int stride, int padding) {
    ft_params_maxpool p = {kernel, stride, padding};
    x = ft_contiguous(ctx, x);
    return dispatch(ctx, FT_OP_MAXPOOL2D, &x, 1, &p, sizeof p);
}

ft_tensor *ft_global_avgpool(ft_ctx *ctx, ft_tensor *x) {
    x = ft_contiguous(ctx, x);
    return dispatch(ctx, FT_OP_GLOBAL_AVGPOOL, &x, 1, NULL, 0);
}

ft_tensor *ft_weight_norm(ft_ctx *ctx, ft_tensor *g, ft_tensor *v, int dim) {
    if (!X_OK(ctx, g) || !FT_TENSOR_OK(ctx, v)) return NULL;
    ft_params_weight_norm p = {ft_norm_dim(dim, v->ndim)};
    ft_tensor *s[2] = {ft_contiguous(ctx, g), ft_contiguous(ctx, v)};
    return dispatch(ctx, FT_OP_WEIGHT_NORM, s, 2, &p, sizeof p);
}

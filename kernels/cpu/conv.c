/*
 * conv.c - CPU kernels of conv1d and conv2d: im2col per (batch, group) into a
 * [Cin/g * KH * KW, OH * OW] column matrix, then one SGEMM with the group's
 * weights [Cout/g, Cin/g * KH * KW], then the bias/residual/activation
 * epilogue. A 1x1 stride-1 unpadded convolution is already a GEMM on x and
 * skips im2col. conv1d is conv2d with H = KH = 1 and padding along W only.
 */
#include "cpu_kernels.h"
#include "gemm.h"
#include "../../engine/ft_checked.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct conv_geom {
    int64_t batch, cin, cout, groups;
    int64_t h, w, kh, kw, oh, ow;
    int64_t sh, sw, ph, pw; /* strides and paddings per spatial dim */
} conv_geom;

/* col [cin_g * kh * kw, oh * ow] from x_bg [cin_g, h, w] with zero padding. */
static void im2col(const conv_geom *g, const float *x, float *col, bool parallel) {
    int64_t cin_g = g->cin / g->groups, rows = cin_g * g->kh * g->kw, n = g->oh * g->ow;
#pragma omp parallel for num_threads(ft_cpu_threads()) if (parallel && rows * n > 32768)
    for (int64_t r = 0; r < rows; r++) {
        int64_t c = r / (g->kh * g->kw), kh = (r / g->kw) % g->kh, kw = r % g->kw;
        const float *xc = x + c * g->h * g->w;
        float *dst = col + r * n;
        for (int64_t oh = 0; oh < g->oh; oh++) {
            int64_t ih = oh * g->sh + kh - g->ph;
            float *d = dst + oh * g->ow;
            if (ih < 0 || ih >= g->h) {
                memset(d, 0, (size_t)g->ow * sizeof(float));
                continue;
            }
            const float *xr = xc + ih * g->w;
            for (int64_t ow = 0; ow < g->ow; ow++) {
                int64_t iw = ow * g->sw + kw - g->pw;
                d[ow] = iw >= 0 && iw < g->w ? xr[iw] : 0.0f;
            }
        }
    }
}

bool ft_cpu_conv_prepack(ft_ctx *ctx, ft_tensor *n) {
    const ft_tensor *w = n->src[1];
    if (FT_PARAMS(n, ft_params_conv)->groups != 1 || w->ndim < 3 || ft_numel(w) == 0) return false;
    int64_t cout = w->ne[0], kk = ft_numel(w) / cout;
    ft_cpu_set_threads(ctx->cpu_threads);
    ft_cpu_f32 fw = {0};
    if (ft_cpu_f32_get(w, ft_tensor_contiguous(w), &fw)) return false;
    ft_cpu_packed_b *p = ft_cpu_pack_a(cout, kk, fw.p, kk);
    ft_cpu_f32_release(&fw);
    if (!p) return false;
    p->src = w->data;
    n->extra = p;
    return true;
}

/* The weight panels a plan left in this conv node, if they still match it. */
static const ft_cpu_packed_b *conv_packed(const ft_tensor *dst, const conv_geom *g) {
    const ft_cpu_packed_b *p = (const ft_cpu_packed_b *)dst->extra;
    if (!p || g->groups != 1 || dst->device != FT_DEVICE_CPU) return NULL;
    return p->src == dst->src[1]->data && p->mr > 0 && p->n == g->cout &&
                   p->k == g->cin * g->kh * g->kw
               ? p
               : NULL;
}

/* out_bg [cout_g, oh*ow] = w_g [cout_g, K] * col [K, oh*ow]; 0 or -1 (OOM).
 * pk: the whole weight packed at plan time (groups == 1), else NULL. */
static int conv_item(const conv_geom *g, const float *x, const float *w, float *y, int64_t item,
                     float *col, bool direct, bool parallel, float beta, const ft_cpu_gemm_ep *ep,
                     const ft_cpu_packed_b *pk) {
    int64_t b = item / g->groups, gi = item % g->groups;
    int64_t cin_g = g->cin / g->groups, cout_g = g->cout / g->groups;
    int64_t kk = cin_g * g->kh * g->kw, n = g->oh * g->ow;
    const float *xb = x + (b * g->cin + gi * cin_g) * g->h * g->w;
    const float *wg = w ? w + gi * cout_g * kk : NULL; /* NULL: packed (pk) */
    float *yb = y + (b * g->cout + gi * cout_g) * n;
    const float *bm = xb; /* [kk, n] */
    if (!direct) {
        im2col(g, xb, col, parallel);
        bm = col;
    }
    ft_cpu_gemm_ep e; /* the bias rows of this group */
    if (ep) {
        e = *ep;
        if (e.bias) e.bias += gi * cout_g;
    }
    if (pk) return ft_cpu_sgemm_packed_a(pk, n, bm, n, beta, yb, n, ep ? &e : NULL);
    return ft_cpu_sgemm_ep(false, false, cout_g, n, kk, 1.0f, wg, kk, bm, n, beta, yb, n, ep ? &e : NULL);
}

static int conv_run(ft_ctx *ctx, ft_tensor *dst, const conv_geom *g, const char *name) {
    const ft_tensor *xt = dst->src[0], *wt = dst->src[1], *bias = dst->src[2], *res = dst->src[3];
    int act = FT_PARAMS(dst, ft_params_conv)->act;
    int64_t cin_g = g->cin / g->groups;
    int64_t kk = cin_g * g->kh * g->kw, n = g->oh * g->ow;
    bool direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    int64_t items = g->batch * g->groups;

    ft_cpu_f32 fx = {0}, fw = {0}, fb = {0}, fr = {0};
    const ft_cpu_packed_b *pk = conv_packed(dst, g);
    float *y = dst->dtype == FT_DTYPE_F32 ? (float *)dst->data
                                          : malloc((size_t)(ft_numel(dst) > 0 ? ft_numel(dst) : 1) *
                                                   sizeof(float)); /* [B, Cout, OH*OW] */
    /* an f32 residual is accumulated by the GEMMs (beta = 1), which also keeps a
     * residual that shares the output's storage correct */
    bool res_in_c = res && y == dst->data && res->dtype == FT_DTYPE_F32 && ft_tensor_contiguous(res);
    float *col = NULL;
    int st = FT_OK;
    if (!y || ft_cpu_f32_get(xt, ft_tensor_contiguous(xt), &fx) ||
        (!pk && ft_cpu_f32_get(wt, ft_tensor_contiguous(wt), &fw)) ||
        (bias && ft_cpu_f32_get(bias, bias->nb[0] == 1 || bias->ne[0] == 1, &fb)) ||
        (res && !res_in_c && ft_cpu_f32_get(res, ft_tensor_contiguous(res), &fr)))
        goto oom;
    if (ft_numel(dst) == 0) goto done;
    if (dst->src[5] || FT_PARAMS(dst, ft_params_conv)->act_in != FT_ACT_NONE) {
        /* the input prologue on a copy of x: act_in(x + bin[c]); padding is added later, as zeros */
        const ft_tensor *bin = dst->src[5];
        ft_cpu_f32 fbin = {0};
        float *xt2 = malloc((size_t)(ft_numel(xt) > 0 ? ft_numel(xt) : 1) * sizeof(float));
        if (!xt2 || (bin && ft_cpu_f32_get(bin, bin->nb[0] == 1 || bin->ne[0] == 1, &fbin))) {
            free(xt2);
            goto oom;
        }
        memcpy(xt2, fx.p, (size_t)ft_numel(xt) * sizeof(float));
        ft_cpu_epilogue(xt2, g->batch, g->cin, g->h * g->w, fbin.p, NULL, FT_PARAMS(dst, ft_params_conv)->act_in);
        ft_cpu_f32_release(&fbin);
        ft_cpu_f32_release(&fx);
        fx.p = xt2;
        fx.owned = true;
    }
    if (res_in_c && res->data != (void *)y)
        memmove(y, res->data, (size_t)ft_numel(dst) * sizeof(float));

    float beta = res_in_c ? 1.0f : 0.0f;
    /* bias and activation fused into the GEMM's tile stores, unless a residual
     * that is not in y must be added before the activation */
    ft_cpu_gemm_ep ep = {fb.p, true, act};
    const ft_cpu_gemm_ep *epp = fr.p ? NULL : &ep;
    int64_t col_n;
    size_t col_bytes;
    if (!ft_mul_ok(direct ? 1 : kk, direct ? 1 : n, &col_n) || !ft_bytes_ok(col_n, sizeof(float), &col_bytes)) {
        st = ft_set_error(ctx, FT_ERR_SHAPE, "%s: its im2col buffer of %lld x %lld elements is too large", name,
                          (long long)kk, (long long)n);
        goto done;
    }
    int nt = ft_cpu_gemm_threads();
    if (nt > 1 && items >= nt && g->groups > 1) {
        /* many small grouped products: one (batch, group) per thread */
        int failed = 0;
#pragma omp parallel num_threads(ft_cpu_threads()) reduction(| : failed)
        {
            float *c = malloc(col_bytes);
            if (!c) failed = 1;
#pragma omp for schedule(dynamic, 1)
            for (int64_t i = 0; i < items; i++)
                if (c && conv_item(g, fx.p, fw.p, y, i, c, direct, false, beta, epp, pk)) failed = 1;
            free(c);
        }
        if (failed) goto oom;
    } else {
        col = malloc(col_bytes);
        if (!col) goto oom;
        for (int64_t i = 0; i < items; i++)
            if (conv_item(g, fx.p, fw.p, y, i, col, direct, true, beta, epp, pk)) goto oom;
    }
    if (!epp) ft_cpu_epilogue(y, g->batch, g->cout, n, fb.p, fr.p, act);
    goto done;
oom:
    st = ft_set_error(ctx, FT_ERR_OOM, "%s: out of host memory for its im2col or staging buffers",
                      name);
done:
    free(col);
    ft_cpu_f32_release(&fx);
    ft_cpu_f32_release(&fw);
    ft_cpu_f32_release(&fb);
    ft_cpu_f32_release(&fr);
    if (y && (void *)y != dst->data) {
        if (st == FT_OK) ft_cpu_f32_store(dst, y, ft_numel(dst));
        free(y);
    }
    return st;
}

FT_CPU_KERNEL_DEF(conv1d) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1];
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    conv_geom g = {.batch = x->ne[0], .cin = x->ne[1], .cout = w->ne[0], .groups = p->groups,
                   .h = 1, .w = x->ne[2], .kh = 1, .kw = w->ne[2], .oh = 1, .ow = dst->ne[2],
                   .sh = 1, .sw = p->stride, .ph = 0, .pw = p->padding};
    return conv_run(ctx, dst, &g, "conv1d");
}

FT_CPU_KERNEL_DEF(conv2d) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1];
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    conv_geom g = {.batch = x->ne[0], .cin = x->ne[1], .cout = w->ne[0], .groups = p->groups,
                   .h = x->ne[2], .w = x->ne[3], .kh = w->ne[2], .kw = w->ne[3],
                   .oh = dst->ne[2], .ow = dst->ne[3], .sh = p->stride, .sw = p->stride,
                   .ph = p->padding, .pw = p->padding};
    return conv_run(ctx, dst, &g, "conv2d");
}

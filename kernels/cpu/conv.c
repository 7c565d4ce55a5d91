/*
 * conv.c - CPU kernels of conv1d and conv2d as implicit GEMMs: per group,
 * Y[cout_g, batch * OH * OW] = W_g[cout_g, Cin/g * KH * KW] * im2col(x), where
 * the GEMM packs im2col's slivers straight from the NCHW input
 * (ft_cpu_conv_view, kernels/cpu/conv_pack.c): no column matrix is written, the
 * whole batch is one product (the weights stream once per forward, not once per
 * image) and the bias/residual/activation epilogue is fused into the tile
 * stores. Plans pack each weight (per group) once (ft_cpu_conv_prepack). conv1d
 * is conv2d with H = KH = 1 and padding along W only; a 1x1 stride-1 unpadded
 * convolution is described as one flat row per channel (whole slivers copied).
 */
#include "cpu_kernels.h"
#include "gemm.h"
#include "nchwc.h"
#include "pack_cache.h"
#include "scratch.h"
#include "../../engine/ft_checked.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct conv_geom {
    int64_t batch, cin, cout, groups;
    int64_t h, w, kh, kw, oh, ow;
    int64_t sh, sw, ph, pw; /* strides and paddings per spatial dim */
} conv_geom;

bool ft_cpu_conv_prepack(ft_ctx *ctx, ft_tensor *n) {
    const ft_tensor *w = n->src[1];
    int64_t groups = FT_PARAMS(n, ft_params_conv)->groups;
    if (groups < 1 || w->ndim < 3 || ft_numel(w) == 0 || w->ne[0] % groups) return false;
    int64_t cout = w->ne[0], kk = ft_numel(w) / cout, cout_g = cout / groups;
    ft_cpu_set_threads(ctx->cpu_threads);
    ft_cpu_f32 fw = {0};
    if (ft_cpu_f32_get(w, ft_tensor_contiguous(w), &fw)) return false;
    ft_cpu_packed_b *p = ft_cpu_pack_a_groups(groups, cout_g, kk, fw.p, kk);
    ft_cpu_f32_release(&fw);
    if (!p) return false;
    p->src = w->data;
    n->extra = p;
    return true;
}

/* The weight panels a plan left in this conv node, or eager mode's cached ones
 * (kernels/cpu/pack_cache.c), if they match it. */
static const ft_cpu_packed_b *conv_packed(ft_ctx *ctx, const ft_tensor *dst, const conv_geom *g) {
    const ft_cpu_packed_b *p = (const ft_cpu_packed_b *)dst->extra;
    if (dst->device != FT_DEVICE_CPU) return NULL;
    if (!p && !dst->extra) p = ft_cpu_pack_cache_conv(ctx, dst->src[1], g->groups);
    if (!p) return NULL;
    return p->src == dst->src[1]->data && p->mr > 0 && p->groups == g->groups &&
                   p->n == g->cout / g->groups && p->k == g->cin / g->groups * g->kh * g->kw
               ? p
               : NULL;
}

/* Y's group gi for all images: one implicit GEMM; 0 or -1 (OOM). */
static int conv_group(const conv_geom *g, const float *x, const float *w, float *y, int64_t gi,
                      float beta, const ft_cpu_gemm_ep *ep, const ft_cpu_packed_b *pk) {
    int64_t cin_g = g->cin / g->groups, cout_g = g->cout / g->groups;
    int64_t kk = cin_g * g->kh * g->kw, n = g->oh * g->ow;
    ft_cpu_conv_view v = {x + gi * cin_g * g->h * g->w, cin_g, g->h, g->w, g->kh, g->kw, g->oh, g->ow,
                          g->sh, g->sw, g->ph, g->pw, g->cin * g->h * g->w, g->cout * n};
    if (g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->oh == g->h &&
        g->ow == g->w) {
        /* a channel of x is already a row of op(B): one flat row per image */
        v.h = v.oh = 1;
        v.w = v.ow = n;
    }
    ft_cpu_gemm_ep e; /* the bias rows of this group */
    if (ep) {
        e = *ep;
        if (e.bias) e.bias += gi * cout_g;
    }
    ft_cpu_packed_b gp;
    if (pk) {
        gp = *pk;
        gp.data += gi * pk->npad * pk->k;
        gp.groups = 1;
    }
    return ft_cpu_sgemm_conv(pk ? &gp : NULL, w ? w + gi * cout_g * kk : NULL, kk, cout_g, &v, g->batch,
                             beta, y + gi * cout_g * n, ep ? &e : NULL);
}

static int conv_run(ft_ctx *ctx, ft_tensor *dst, const conv_geom *g, const char *name) {
    const ft_tensor *xt = dst->src[0], *wt = dst->src[1], *bias = dst->src[2], *res = dst->src[3];
    int act = FT_PARAMS(dst, ft_params_conv)->act;
    int64_t cin_g = g->cin / g->groups;
    int64_t kk = cin_g * g->kh * g->kw, n = g->oh * g->ow;

    ft_cpu_f32 fx = {0}, fw = {0}, fb = {0}, fr = {0};
    const ft_cpu_packed_b *pk = conv_packed(ctx, dst, g);
    float *y = dst->dtype == FT_DTYPE_F32 ? (float *)dst->data
                                          : malloc((size_t)(ft_numel(dst) > 0 ? ft_numel(dst) : 1) *
                                                   sizeof(float)); /* [B, Cout, OH*OW] */
    /* an f32 residual is accumulated by the GEMMs (beta = 1), which also keeps a
     * residual that shares the output's storage correct */
    bool res_in_c = res && y == dst->data && res->dtype == FT_DTYPE_F32 && ft_tensor_contiguous(res);
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
    if (kk == 0) {
        /* no input channels: the output is the bias (and residual) alone */
        if (!res_in_c) memset(y, 0, (size_t)ft_numel(dst) * sizeof(float));
        epp = NULL;
    } else if (ft_cpu_gemm_threads() > 1 && g->groups >= ft_cpu_gemm_threads()) {
        /* many small grouped products: one group (all images) per thread */
        int failed = 0;
        ft_cpu_scratch *sc = ft_cpu_scratch_cur();
#pragma omp parallel num_threads(ft_cpu_threads()) reduction(| : failed)
        {
            /* each thread's serial GEMMs take its own slot of the kernel's scratch */
            ft_cpu_scratch *prev = ft_cpu_scratch_swap(sc);
#pragma omp for schedule(dynamic, 1)
            for (int64_t gi = 0; gi < g->groups; gi++)
                if (conv_group(g, fx.p, fw.p, y, gi, beta, epp, pk)) failed = 1;
            ft_cpu_scratch_swap(prev);
        }
        if (failed) goto oom;
    } else {
        for (int64_t gi = 0; gi < g->groups; gi++)
            if (conv_group(g, fx.p, fw.p, y, gi, beta, epp, pk)) goto oom;
    }
    if (!epp) ft_cpu_epilogue(y, g->batch, g->cout, n, fb.p, fr.p, act);
    goto done;
oom:
    st = ft_set_error(ctx, FT_ERR_OOM, "%s: out of host memory for its packing or staging buffers",
                      name);
done:
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
    /* a graph plan's blocked-channel node: the direct kernel (nchwc_conv.c) */
    if (dst->flags & FT_TF_NCHWC) return ft_cpu_nchwc_conv2d(ctx, dst);
    const ft_tensor *x = dst->src[0], *w = dst->src[1];
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    int64_t pads[4]; /* top, bottom, left, right: the bottom and right ones show in oh, ow */
    ft_conv_pads(p, pads);
    conv_geom g = {.batch = x->ne[0], .cin = x->ne[1], .cout = w->ne[0], .groups = p->groups,
                   .h = x->ne[2], .w = x->ne[3], .kh = w->ne[2], .kw = w->ne[3],
                   .oh = dst->ne[2], .ow = dst->ne[3], .sh = p->stride, .sw = p->stride,
                   .ph = pads[0], .pw = pads[2]};
    return conv_run(ctx, dst, &g, "conv2d");
}

/*
 * conv.cu - CUDA conv1d / conv2d (NCL / NCHW, weights [Cout, Cin/groups, (KH,) KW]):
 * out = act(conv(x, w) + bias + residual).
 *
 * A 1x1 stride-1 unpadded convolution is already a GEMM on x:
 *   out[b] [Cout, HW] = W [Cout, Cin] x X[b] [Cin, HW]   (per group).
 * Anything else goes through an im2col kernel into scratch memory,
 *   col [G, Cin/G * KH * KW, OH * OW] per batch item,
 * then one strided-batched GEMM over the groups (or over the batch when there
 * is one group). The bias is per output row (Cout) here, while the GEMM's
 * epilogue bias is per column, so bias, residual and activation run as one
 * small elementwise pass afterwards. conv1d is conv2d with H = KH = 1.
 */
#include "strided.cuh"

#include "gemm.h"

#include <string.h>

/* im2col scratch is capped; bigger problems are cut into column chunks. */
#define FT_CONV_SCRATCH_MAX ((int64_t)256 << 20)

typedef struct ft_conv_geom {
    int64_t batch, cin, cout, groups;
    int64_t h, w, kh, kw, oh, ow;
    int64_t sh, sw, ph, pw;
} ft_conv_geom;

/* ------------------------------------------------------------------------- */
/* im2col                                                                     */
/* ------------------------------------------------------------------------- */

/*
 * col [nb, G, K + extra, nc] (K = cin_g * kh * kw) for batch items b0.. and output
 * columns n0..n0+nc of x [B, Cin, H, W], zeros where the window hangs over
 * the padding; with `extra` rows (augmented weights), row K is ones, which
 * multiplies the bias column, and the rest are zeros against the weights' zero
 * padding (rows of a multiple of 8 elements: ft_conv_wb_cols); with a
 * prologue (act_in, bin) the values read are act_in(x + bin[c]), the padding
 * still zero. The fastest index is the output
 * column, so writes coalesce.
 */
template <typename T, typename I>
__global__ void ft_k_im2col(T *__restrict__ col, const T *__restrict__ x, ft_conv_geom g,
                            int64_t b0, int64_t nb, int64_t n0, int64_t nc, int extra,
                            const T *__restrict__ bin, int act_in) {
    FT_KERNEL_PROLOGUE();
    const I cin_g = (I)(g.cin / g.groups), kk = (I)(g.kh * g.kw), kdata = cin_g * kk,
            krows = kdata + (I)extra;
    const int64_t total = nb * g.groups * (int64_t)krows * nc;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        I j = (I)(e % nc);
        int64_t t = e / nc;
        I r = (I)(t % krows);
        int64_t bg = t / krows; /* (batch item, group) */
        I gi = (I)(bg % g.groups);
        int64_t b = b0 + bg / g.groups;
        I ci = r / kk, kr = r - ci * kk;
        I ky = kr / (I)g.kw, kx = kr - ky * (I)g.kw;
        I n = (I)n0 + j;
        I oy = n / (I)g.ow, ox = n - oy * (I)g.ow;
        I iy = oy * (I)g.sh - (I)g.ph + ky, ix = ox * (I)g.sw - (I)g.pw + kx;
        float v = 0.0f;
        T out;
        if (r >= kdata) {
            ft_st(&out, r == kdata ? 1.0f : 0.0f);
        } else if (iy >= 0 && iy < (I)g.h && ix >= 0 && ix < (I)g.w) {
            int64_t c = (int64_t)gi * cin_g + ci;
            out = x[((b * g.cin + c) * g.h + iy) * g.w + ix];
            if (bin || act_in != FT_ACT_NONE)
                ft_st(&out, ft_act_apply(act_in, ft_ld(&out) + (bin ? ft_ld(bin + c) : 0.0f)));
        } else {
            ft_st(&out, v);
        }
        col[e] = out;
    }
}

/* ------------------------------------------------------------------------- */
/* epilogue: y = act(y + bias[c] + residual)                                  */
/* ------------------------------------------------------------------------- */

template <typename T, typename I>
__global__ void ft_k_conv_epilogue(T *__restrict__ y, int64_t n, int64_t cout, int64_t plane,
                                   const T *__restrict__ bias, int64_t bstride,
                                   const T *__restrict__ res,
                                   const __grid_constant__ ft_nd<1> rd, int act) {
    FT_KERNEL_PROLOGUE();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = ft_ld(y + i);
        if (bias) {
            I c = ((I)i / (I)plane) % (I)cout;
            v += ft_ld(bias + (int64_t)c * bstride);
        }
        if (res) {
            I off[1];
            ft_nd_offsets<1, I>(rd, (I)i, off);
            v += ft_ld(res + off[0]);
        }
        ft_st(y + i, ft_act_apply(act, v));
    }
}

/* ------------------------------------------------------------------------- */
/* driver                                                                     */
/* ------------------------------------------------------------------------- */

static ft_gemm_desc ft_conv_gemm_desc(ft_dtype dt) {
    ft_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = dt;
    d.alpha = 1.0f;
    d.act = FT_ACT_NONE;
    return d;
}

struct ft_conv_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    ft_conv_geom g;

    /* out[b] = W x X[b] directly: no im2col needed. */
    template <typename T> int direct() {
        const ft_tensor *x = dst->src[0], *w = dst->src[1];
        int64_t cin_g = g.cin / g.groups, cout_g = g.cout / g.groups, n = g.oh * g.ow;
        ft_gemm_desc d = ft_conv_gemm_desc(dst->dtype);
        d.m = cout_g;
        d.n = n;
        d.k = cin_g;
        d.a = w->data;
        d.lda = cin_g;
        d.ldb = n;
        d.ldc = n;
        if (g.groups == 1) { /* every batch item in one call, W broadcast */
            d.batch = g.batch;
            d.stride_a = 0;
            d.b = x->data;
            d.stride_b = g.cin * n;
            d.c = dst->data;
            d.stride_c = g.cout * n;
            return ft_cuda_gemm(ctx, &d);
        }
        d.batch = g.groups;
        d.stride_a = cout_g * cin_g;
        d.stride_b = cin_g * n;
        d.stride_c = cout_g * n;
        for (int64_t b = 0; b < g.batch; b++) {
            d.b = (const T *)x->data + b * g.cin * n;
            d.c = (T *)dst->data + b * g.cout * n;
            int st = ft_cuda_gemm(ctx, &d);
            if (st) return st;
        }
        return FT_OK;
    }

    /* aug: the weights with the bias column (src[4]) against a row of ones, and
     * the activation and residual in the GEMM's own epilogue (groups 1) */
    template <typename T> int with_im2col(bool aug) {
        const ft_tensor *x = dst->src[0], *w = aug ? dst->src[4] : dst->src[1], *res = dst->src[3];
        const T *bin = dst->src[5] ? (const T *)dst->src[5]->data : NULL;
        int act_in = FT_PARAMS(dst, ft_params_conv)->act_in;
        int64_t cin_g = g.cin / g.groups, cout_g = g.cout / g.groups, n = g.oh * g.ow;
        /* aug: K + 1 padded to the weights' row length, a multiple of 8 (16-byte rows in fp16) */
        int64_t kdata = cin_g * g.kh * g.kw, krows = aug ? w->ne[1] : kdata, es = (int64_t)sizeof(T);
        if (aug && (w->ndim != 2 || krows != ft_conv_wb_cols(kdata)))
            return ft_set_error(ctx, FT_ERR_INTERNAL, "conv weights with bias: %lld columns for K = %lld",
                                (long long)krows, (long long)kdata);
        int64_t per_item = g.groups * krows * n * es;
        int64_t nb = 1, nc = n;
        if (per_item <= FT_CONV_SCRATCH_MAX) {
            nb = FT_CONV_SCRATCH_MAX / per_item;
            if (nb > g.batch) nb = g.batch;
        } else {
            nc = FT_CONV_SCRATCH_MAX / (g.groups * krows * es);
            if (nc > 8) nc -= nc % 8; /* keeps column offsets of the output 16-byte friendly */
            if (nc < 1) nc = 1;
        }
        ft_block *blk = NULL;
        T *col = (T *)ft_cuda_scratch(ctx, (size_t)(nb * g.groups * krows * nc * es), &blk);
        if (!col) return ctx->status ? ctx->status : FT_ERR_OOM;
        int st = FT_OK;
        cudaStream_t stream = ft_cuda_stream(ctx);
        bool i32 = ft_numel(x) <= INT32_MAX && n <= INT32_MAX && krows <= INT32_MAX;
        for (int64_t b0 = 0; b0 < g.batch && st == FT_OK; b0 += nb) {
            int64_t bn = g.batch - b0 < nb ? g.batch - b0 : nb;
            for (int64_t n0 = 0; n0 < n && st == FT_OK; n0 += nc) {
                int64_t cn = n - n0 < nc ? n - n0 : nc;
                int64_t total = bn * g.groups * krows * cn;
                unsigned blocks = ft_cuda_blocks(total, FT_EW_THREADS);
                if (i32)
                    FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, stream, ft_k_im2col<T, int32_t>)(
                        col, (const T *)x->data, g, b0, bn, n0, cn, (int)(krows - kdata), bin, act_in);
                else
                    FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, stream, ft_k_im2col<T, int64_t>)(
                        col, (const T *)x->data, g, b0, bn, n0, cn, (int)(krows - kdata), bin, act_in);
                /* FT_CUDA_LAUNCH_CHECK's check, spelled out: the scratch must go back first */
                cudaError_t e = cudaGetLastError();
                if (e != cudaSuccess) {
                    st = ft_set_error(ctx, FT_ERR_CUDA, "launch of im2col failed: %s",
                                      cudaGetErrorString(e));
                    break;
                }
                ft_gemm_desc d = ft_conv_gemm_desc(dst->dtype);
                d.m = cout_g;
                d.n = cn;
                d.k = krows;
                d.a = w->data;
                d.lda = krows;
                d.ldb = cn;
                d.ldc = n;
                if (aug) {
                    d.act = FT_PARAMS(dst, ft_params_conv)->act;
                    d.residual = res ? (const T *)res->data + b0 * g.cout * n + n0 : NULL;
                }
                if (g.groups == 1) { /* the chunk's batch items in one call, W broadcast */
                    d.batch = bn;
                    d.stride_a = 0;
                    d.b = col;
                    d.stride_b = krows * cn;
                    d.c = (T *)dst->data + b0 * g.cout * n + n0;
                    d.stride_c = g.cout * n;
                    st = ft_cuda_gemm(ctx, &d);
                    continue;
                }
                d.batch = g.groups;
                d.stride_a = cout_g * krows;
                d.stride_b = krows * cn;
                d.stride_c = cout_g * n;
                for (int64_t bb = 0; bb < bn && st == FT_OK; bb++) {
                    d.b = col + bb * g.groups * krows * cn;
                    d.c = (T *)dst->data + (b0 + bb) * g.cout * n + n0;
                    st = ft_cuda_gemm(ctx, &d);
                }
            }
        }
        /* Giving the scratch back while the GEMMs may still run is safe: every
         * kernel runs in order on the one context stream, so whoever gets the
         * block next enqueues its work behind ours (the chunks above reuse it
         * the same way). */
        ft_block_unref(blk);
        return st;
    }

    template <typename T> int epilogue() {
        const ft_tensor *bias = dst->src[2], *res = dst->src[3];
        int act = FT_PARAMS(dst, ft_params_conv)->act;
        if (!bias && !res && act == FT_ACT_NONE) return FT_OK;
        int64_t n = ft_numel(dst), plane = g.oh * g.ow;
        ft_nd<1> rd;
        rd.ndim = dst->ndim;
        for (int i = 0; i < dst->ndim; i++) rd.ne[i] = dst->ne[i];
        if (res) ft_nd_set_operand(&rd, 0, res, dst->ndim);
        else
            for (int i = 0; i < dst->ndim; i++) rd.nb[0][i] = 0;
        ft_nd_collapse(&rd);
        unsigned blocks = ft_cuda_blocks(n, FT_EW_THREADS);
        cudaStream_t st = ft_cuda_stream(ctx);
        const T *bp = bias ? (const T *)bias->data : NULL, *rp = res ? (const T *)res->data : NULL;
        int64_t bs = bias ? bias->nb[0] : 0;
        if (ft_nd_fits_i32(&rd, n))
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_conv_epilogue<T, int32_t>)(
                (T *)dst->data, n, g.cout, plane, bp, bs, rp, rd, act);
        else
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_conv_epilogue<T, int64_t>)(
                (T *)dst->data, n, g.cout, plane, bp, bs, rp, rd, act);
        FT_CUDA_LAUNCH_CHECK(ctx, "conv epilogue");
        return FT_OK;
    }

    template <typename T> int run() {
        bool is_direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 &&
                         g.oh == g.h && g.ow == g.w; /* (asymmetric padding may pad only after) */
        const ft_tensor *res = dst->src[3];
        int act = FT_PARAMS(dst, ft_params_conv)->act;
        /* the bias inside the GEMM: one launch fewer (the residual must be in the
         * output's layout, and the activation one cuBLASLt applies) */
        bool aug = !is_direct && dst->src[4] && g.groups == 1 && (!res || ft_tensor_contiguous(res)) &&
                   (act == FT_ACT_NONE || act == FT_ACT_RELU || act == FT_ACT_GELU_TANH);
        /* the input prologue is applied while gathering: im2col only (a direct
         * GEMM reads x as it is, and the graph never asks for it there) */
        bool prologue = dst->src[5] || FT_PARAMS(dst, ft_params_conv)->act_in != FT_ACT_NONE;
        if (prologue && is_direct) return ft_set_error(ctx, FT_ERR_INTERNAL, "input prologue on a direct convolution");
        int st = is_direct ? direct<T>() : with_im2col<T>(aug);
        if (st || aug) return st;
        return epilogue<T>();
    }
};

static int ft_conv_run(ft_ctx *ctx, ft_tensor *dst, const ft_conv_geom *g, const char *name) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1], *bias = dst->src[2], *res = dst->src[3];
    if (ft_numel(dst) == 0) return FT_OK;
    if (!ft_tensor_contiguous(x) || !ft_tensor_contiguous(w))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "%s expects contiguous x and w", name);
    if (g->groups < 1 || g->cin % g->groups || g->cout % g->groups ||
        w->ne[1] != g->cin / g->groups)
        return ft_set_error(ctx, FT_ERR_SHAPE, "%s: channels (in %lld, out %lld) do not fit groups %lld",
                            name, (long long)g->cin, (long long)g->cout, (long long)g->groups);
    if (w->dtype != dst->dtype || x->dtype != dst->dtype || (bias && bias->dtype != dst->dtype) ||
        (res && res->dtype != dst->dtype))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s: inputs must share the output dtype", name);
    if (dst->src[5] && dst->src[5]->dtype != dst->dtype)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s: input bias must share the output dtype", name);
    if (bias && (bias->ndim != 1 || bias->ne[0] != g->cout))
        return ft_set_error(ctx, FT_ERR_SHAPE, "%s: bias must have shape [%lld]", name,
                            (long long)g->cout);
    if (res && !ft_shape_equal(res, dst))
        return ft_set_error(ctx, FT_ERR_SHAPE, "%s: residual shape differs from the output", name);
    if (g->cin == 0 || g->kh * g->kw == 0) /* an empty sum: the GEMM has K = 0 */
        return ft_set_error(ctx, FT_ERR_SHAPE, "%s: empty kernel or no input channels", name);
    ft_conv_fn f = {ctx, dst, *g};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

FT_CUDA_KERNEL(conv1d) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1];
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    if (x->ndim != 3 || w->ndim != 3 || dst->ndim != 3)
        return ft_set_error(ctx, FT_ERR_SHAPE, "conv1d expects x [B, C, L] and w [Cout, Cin/g, K]");
    ft_conv_geom g = {x->ne[0], x->ne[1], w->ne[0], p->groups, 1, x->ne[2], 1, w->ne[2],
                      1, dst->ne[2], 1, p->stride, 0, p->padding};
    return ft_conv_run(ctx, dst, &g, "conv1d");
}

FT_CUDA_KERNEL(conv2d) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1];
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    if (x->ndim != 4 || w->ndim != 4 || dst->ndim != 4)
        return ft_set_error(ctx, FT_ERR_SHAPE, "conv2d expects x [B, C, H, W] and w [Cout, Cin/g, KH, KW]");
    int64_t pads[4]; /* top, bottom, left, right: the bottom and right ones show in oh, ow */
    ft_conv_pads(p, pads);
    ft_conv_geom g = {x->ne[0], x->ne[1], w->ne[0], p->groups, x->ne[2], x->ne[3], w->ne[2],
                      w->ne[3], dst->ne[2], dst->ne[3], p->stride, p->stride, pads[0], pads[2]};
    return ft_conv_run(ctx, dst, &g, "conv2d");
}

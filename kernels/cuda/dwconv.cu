/*
 * dwconv.cu - the CUDA depthwise convolution (FT_OP_DWCONV2D), computed
 * directly: one thread per output element sums its KH x KW taps of its own
 * channel, reading the input through the implicit zero padding (per side) and
 * the dilation, then applies the epilogue act(acc + bias[c] + residual) and
 * stores. No im2col buffer, no GEMM, one launch, f32 accumulation. The input
 * prologue act_in(x + bin[c]) (the bias and activation of the 1x1 convolution
 * that made x, moved here by the graph) is applied to every tap read; the
 * padding stays zero. Consecutive threads take consecutive output columns, so
 * the loads of a warp coalesce along a row and neighbouring taps hit L1.
 */
#include "strided.cuh"

typedef struct ft_dw_geom {
    int64_t batch, c, h, w, kh, kw, oh, ow;
    int64_t stride, dil, pt, pl;
} ft_dw_geom;

template <typename T, typename I>
__global__ void ft_k_dwconv(T *__restrict__ y, const T *__restrict__ x, const T *__restrict__ w,
                            const T *__restrict__ bias, const T *__restrict__ res, const T *__restrict__ bin,
                            ft_dw_geom g, int act, int act_in) {
    FT_KERNEL_PROLOGUE();
    const int64_t total = g.batch * g.c * g.oh * g.ow;
    const I oh = (I)g.oh, ow = (I)g.ow, h = (I)g.h, wd = (I)g.w, c = (I)g.c, kh = (I)g.kh, kw = (I)g.kw;
    const I s = (I)g.stride, d = (I)g.dil;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        I ox = (I)(e % ow);
        int64_t t = e / ow;
        I oy = (I)(t % oh);
        int64_t plane = t / oh; /* image * C + channel */
        I ch = (I)(plane % c);
        const T *xp = x + plane * g.h * g.w;
        const T *wp = w + (int64_t)ch * kh * kw;
        const float bc = bin ? ft_ld(bin + ch) : 0.0f;
        const I iy0 = oy * s - (I)g.pt, ix0 = ox * s - (I)g.pl;
        float acc = 0.0f;
        for (I ky = 0; ky < kh; ky++) {
            const I iy = iy0 + ky * d;
            if (iy < 0 || iy >= h) continue;
            for (I kx = 0; kx < kw; kx++) {
                const I ix = ix0 + kx * d;
                if (ix < 0 || ix >= wd) continue;
                float v = ft_ld(xp + (int64_t)iy * wd + ix);
                if (bin || act_in != FT_ACT_NONE) v = ft_act_apply(act_in, v + bc);
                acc += ft_ld(wp + ky * kw + kx) * v;
            }
        }
        if (bias) acc += ft_ld(bias + ch);
        if (res) acc += ft_ld(res + e);
        ft_st(y + e, ft_act_apply(act, acc));
    }
}

struct ft_dwconv_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    ft_dw_geom g;
    template <typename T> int run() {
        const ft_tensor *x = dst->src[0], *w = dst->src[1], *b = dst->src[2], *r = dst->src[3], *bin = dst->src[5];
        const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
        int64_t total = ft_numel(dst);
        unsigned blocks = ft_cuda_blocks(total, FT_EW_THREADS);
        cudaStream_t st = ft_cuda_stream(ctx);
        const T *bp = b ? (const T *)b->data : NULL, *rp = r ? (const T *)r->data : NULL;
        const T *binp = bin ? (const T *)bin->data : NULL;
        if (total <= INT32_MAX && ft_numel(x) <= INT32_MAX)
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_dwconv<T, int32_t>)(
                (T *)dst->data, (const T *)x->data, (const T *)w->data, bp, rp, binp, g, p->act, p->act_in);
        else
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_dwconv<T, int64_t>)(
                (T *)dst->data, (const T *)x->data, (const T *)w->data, bp, rp, binp, g, p->act, p->act_in);
        FT_CUDA_LAUNCH_CHECK(ctx, "dwconv2d");
        return FT_OK;
    }
};

FT_CUDA_KERNEL(dwconv2d) {
    const ft_tensor *x = dst->src[0], *w = dst->src[1], *b = dst->src[2], *r = dst->src[3], *bin = dst->src[5];
    const ft_params_conv *p = FT_PARAMS(dst, ft_params_conv);
    if (ft_numel(dst) == 0) return FT_OK;
    if (x->ndim != 4 || w->ndim != 4 || dst->ndim != 4 || w->ne[1] != 1 || w->ne[0] != x->ne[1])
        return ft_set_error(ctx, FT_ERR_SHAPE, "dwconv2d expects x [B, C, H, W] and w [C, 1, KH, KW]");
    if (!ft_tensor_contiguous(x) || !ft_tensor_contiguous(w) || !ft_tensor_contiguous(dst) ||
        (r && !ft_tensor_contiguous(r)))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "dwconv2d expects contiguous x, w, residual and output");
    const ft_tensor *ops[4] = {w, b, r, bin};
    for (int i = 0; i < 4; i++)
        if (ops[i] && ops[i]->dtype != dst->dtype)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "dwconv2d: inputs must share the output dtype");
    if ((b && b->nb[0] != 1) || (bin && bin->nb[0] != 1))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "dwconv2d expects contiguous biases");
    int64_t pads[4];
    ft_conv_pads(p, pads);
    ft_dw_geom g = {x->ne[0], x->ne[1], x->ne[2], x->ne[3], w->ne[2], w->ne[3], dst->ne[2], dst->ne[3],
                    p->stride, ft_conv_dilation(p), pads[0], pads[2]};
    ft_dwconv_fn f = {ctx, dst, g};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

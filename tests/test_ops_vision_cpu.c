/*
 * test_ops_vision_cpu.c - the CPU kernels of the efficient vision models' ops
 * against naive double-precision formulas written here: ReLU6 and SiLU, the
 * direct depthwise convolution (every padding style the models use, strides 1-3,
 * dilation, odd sizes, batch 3, the graph's epilogue and input prologue, views,
 * the multi-threaded plane split), dense convolutions with per-side padding,
 * TensorFlow's "SAME" padding arithmetic, the channels-first LayerNorm and the
 * squeeze-excitation gate, in f32, f16 and bf16; and their argument errors. Also the
 * NCHW -> NHWC copy ConvNeXt makes of each block (the copy kernel's tiled transpose).
 */
#include "ft_ops_ref.h"

#include <math.h>

static double act_ref(int act, double x) {
    switch (act) {
    case FT_ACT_RELU6: return x != x ? x : x < 0 ? 0 : x > 6 ? 6 : x;
    case FT_ACT_SILU: return x / (1.0 + exp(-x));
    case FT_ACT_RELU: return x > 0 || x != x ? x : 0;
    case FT_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    default: return x;
    }
}

static void test_relu6_silu(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t ne[2] = {129, 17}, n1[1] = {1};
        hv xs[2] = {hv_transpose(mk(dt, 2, ne, -10, 10), 0, 1), mk(dt, 1, n1, -10, 10)};
        for (int v = 0; v < 2; v++)
            for (int w = 0; w < 2; w++) {
                hv x = xs[v];
                int64_t n = numel_of(x.nd, x.ne);
                double *ref = dense(x);
                for (int64_t i = 0; i < n; i++) ref[i] = act_ref(w ? FT_ACT_SILU : FT_ACT_RELU6, ref[i]);
                expect(w ? "silu" : "relu6", w ? ft_silu(ctx, x.t) : ft_relu6(ctx, x.t), x.nd, x.ne, ref, dt);
            }
    }
    /* NaN passes ReLU6, as torch.nn.ReLU6; the clamp is exact at both ends */
    double vals[5] = {NAN, -1e30, 6.0, 6.5, 1e30};
    int64_t n5[1] = {5};
    hv x = mk_vals(FT_DTYPE_F32, 1, n5, vals, 0, 0);
    double ref[5] = {NAN, 0, 6, 6, 6};
    expect("relu6 edges", ft_relu6(ctx, x.t), 1, n5, ref, FT_DTYPE_F32);
    int64_t n[1] = {3};
    hv i = mk(FT_DTYPE_I32, 1, n, 0, 5);
    expect_error("silu of ints", ft_silu(ctx, i.t), "silu", "i32");
    end_test();
}

/* ---- depthwise convolution ---- */

typedef struct dwc {
    int64_t b, c, h, w, kh, kw;
    int stride, dil, pads[4], act, act_in, bias, res, bin, view;
} dwc;

/* y = act(sum_taps w * act_in(x + bin) + bias + res) with the padding zero */
static double *dw_ref(const dwc *t, const double *x, const double *w, const double *bias, const double *res,
                      const double *bin, int64_t oh, int64_t ow, ft_dtype dt) {
    double *y = keep(malloc(sizeof(double) * (size_t)(t->b * t->c * oh * ow)));
    for (int64_t b = 0; b < t->b; b++)
        for (int64_t c = 0; c < t->c; c++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    double acc = 0;
                    for (int64_t ky = 0; ky < t->kh; ky++)
                        for (int64_t kx = 0; kx < t->kw; kx++) {
                            int64_t iy = oy * t->stride - t->pads[0] + ky * t->dil;
                            int64_t ix = ox * t->stride - t->pads[2] + kx * t->dil;
                            if (iy < 0 || iy >= t->h || ix < 0 || ix >= t->w) continue;
                            double v = x[((b * t->c + c) * t->h + iy) * t->w + ix];
                            if (bin || t->act_in) v = act_ref(t->act_in, v + (bin ? bin[c] : 0));
                            acc += w[(c * t->kh + ky) * t->kw + kx] * v;
                        }
                    int64_t o = ((b * t->c + c) * oh + oy) * ow + ox;
                    acc += (bias ? bias[c] : 0) + (res ? res[o] : 0);
                    y[o] = act_ref(t->act, acc);
                    (void)dt;
                }
    return y;
}

static void check_dw(const char *what, const dwc *t, ft_dtype dt) {
    int64_t nx[4] = {t->b, t->c, t->h, t->w}, nxt[4] = {t->b, t->c, t->w, t->h};
    int64_t nw[4] = {t->c, 1, t->kh, t->kw}, nc[1] = {t->c};
    /* the view case: a transposed tensor viewed back as [B, C, H, W] */
    hv x = t->view ? hv_transpose(mk(dt, 4, nxt, -2, 2), 2, 3) : mk(dt, 4, nx, -2, 2);
    /* filters scaled so sums of many taps stay O(1): f32 round-off is then within 1e-6 absolute */
    double wr = t->kh * t->kw > 9 ? 3.0 / sqrt((double)(t->kh * t->kw)) : 1.0;
    hv w = mk(dt, 4, nw, -wr, wr), bias = mk(dt, 1, nc, -1, 1), bin = mk(dt, 1, nc, -0.5, 0.5);
    int64_t oh = (t->h + t->pads[0] + t->pads[1] - t->dil * (t->kh - 1) - 1) / t->stride + 1;
    int64_t ow = (t->w + t->pads[2] + t->pads[3] - t->dil * (t->kw - 1) - 1) / t->stride + 1;
    int64_t ny[4] = {t->b, t->c, oh, ow};
    hv res = mk(dt, 4, ny, -1, 1);
    double *ref = dw_ref(t, dense(x), w.base, t->bias ? bias.base : NULL, t->res ? res.base : NULL,
                         t->bin ? bin.base : NULL, oh, ow, dt);
    ft_tensor *y;
    if (t->act || t->act_in || t->res || t->bin) { /* the graph's fused form, through the dispatcher */
        ft_params_conv p;
        memset(&p, 0, sizeof p);
        p.stride = t->stride, p.groups = (int32_t)t->c, p.dilation = t->dil, p.asym = 1;
        p.pad_t = t->pads[0], p.pad_b = t->pads[1], p.pad_l = t->pads[2], p.pad_r = t->pads[3];
        p.act = t->act, p.act_in = t->act_in;
        ft_tensor *s[6] = {ft_contiguous(ctx, x.t), w.t, t->bias ? bias.t : NULL, t->res ? res.t : NULL, NULL,
                           t->bin ? bin.t : NULL};
        y = ft_dispatch(ctx, FT_OP_DWCONV2D, s, 6, &p, sizeof p);
    } else {
        ft_conv2d_opts o = {t->stride, (int)t->c, t->dil, t->pads[0], t->pads[1], t->pads[2], t->pads[3]};
        y = ft_conv2d_ex(ctx, x.t, w.t, t->bias ? bias.t : NULL, &o);
    }
    CHECK(!y || y->op == FT_OP_DWCONV2D, "%s: ran as %s, not the direct depthwise op", what, ft_op_name(y->op));
    expect(what, y, 4, ny, ref, dt);
}

static void test_dwconv(void) {
    static const dwc cases[] = {
        {1, 2, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0, 0, 0, 0, 0},                    /* 1x1 on one pixel */
        {2, 17, 9, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 0, 0, 1, 0, 0, 0},                  /* "same" */
        {3, 5, 10, 12, 3, 3, 2, 1, {0, 1, 0, 1}, 0, 0, 1, 0, 0, 0},                  /* TF-SAME, even, batch 3 */
        {1, 7, 9, 13, 3, 3, 2, 1, {1, 1, 1, 1}, 0, 0, 0, 0, 0, 1},                   /* TF-SAME, odd, a view */
        {2, 6, 11, 8, 5, 5, 2, 1, {1, 2, 1, 2}, FT_ACT_SILU, 0, 1, 0, 0, 0},         /* EfficientNet 5x5/2 */
        {2, 6, 11, 8, 5, 5, 2, 1, {2, 2, 2, 2}, FT_ACT_SILU, 0, 1, 0, 0, 0},         /* depthwise_padding */
        {2, 16, 7, 9, 7, 7, 1, 1, {3, 3, 3, 3}, 0, 0, 1, 0, 0, 0},                   /* ConvNeXt 7x7 */
        {1, 5, 9, 7, 3, 3, 1, 2, {2, 2, 2, 2}, FT_ACT_RELU6, 0, 1, 0, 0, 0},         /* dilation 2 */
        {1, 5, 9, 7, 3, 3, 1, 4, {4, 4, 4, 4}, 0, 0, 1, 0, 0, 0},                    /* dilation 4 */
        {3, 4, 5, 6, 3, 3, 1, 1, {1, 1, 1, 1}, FT_ACT_RELU6, 0, 1, 1, 0, 0},         /* + residual + relu6 */
        {2, 3, 6, 5, 3, 3, 1, 1, {1, 1, 1, 1}, FT_ACT_SILU, FT_ACT_RELU6, 1, 0, 1, 0}, /* input prologue */
        {1, 3, 10, 11, 4, 2, 3, 1, {0, 2, 1, 0}, 0, 0, 1, 0, 0, 0},                  /* stride 3, even kernel */
        {1, 2, 3, 2, 3, 3, 2, 1, {1, 1, 1, 1}, 0, 0, 1, 0, 0, 0},                    /* map smaller than K */
        {2, 37, 33, 29, 3, 3, 1, 1, {1, 1, 1, 1}, FT_ACT_RELU6, 0, 1, 0, 0, 0},      /* planes split on threads */
        {1, 3, 40, 37, 15, 15, 2, 1, {7, 7, 7, 7}, 0, 0, 1, 0, 0, 0},                /* the largest kernel */
    };
    char what[64];
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            snprintf(what, sizeof what, "dwconv case %zu", i);
            check_dw(what, &cases[i], float_dtypes[k]);
            ft_ctx_reset(ctx);
        }
    /* 16 x 16 taps is past the direct kernel's table: an error, not a wrong answer */
    int64_t nx[4] = {1, 2, 20, 20}, nw[4] = {2, 1, 16, 16}, nw2[4] = {3, 1, 3, 3};
    hv x = mk(FT_DTYPE_F32, 4, nx, -1, 1), w = mk(FT_DTYPE_F32, 4, nw, -1, 1), w2 = mk(FT_DTYPE_F32, 4, nw2, -1, 1);
    ft_conv2d_opts o = {1, 2, 1, 0, 0, 0, 0};
    ft_tensor *y = ft_conv2d_ex(ctx, x.t, w.t, NULL, &o);
    CHECK(y == NULL && strstr(ft_ctx_errmsg(ctx), "taps"), "16x16 depthwise: %s", ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    ft_params_conv p;
    memset(&p, 0, sizeof p);
    p.stride = 1, p.groups = 2;
    ft_tensor *s[2] = {x.t, w2.t};
    expect_error("dwconv weight of 3 channels", ft_dispatch(ctx, FT_OP_DWCONV2D, s, 2, &p, sizeof p), "dwconv2d",
                 "w [C, 1, KH, KW]");
    end_test();
}

/* ---- dense convolutions with per-side padding, and the TF "SAME" arithmetic ---- */

static void test_conv2d_asym(void) {
    static const struct {
        int64_t b, cin, cout, h, w, k;
        int stride, groups, pads[4];
    } cases[] = {
        {2, 3, 8, 12, 10, 3, 2, 1, {0, 1, 0, 1}}, /* EfficientNet's stem; TF-SAME on even sizes */
        {3, 3, 5, 11, 10, 3, 2, 1, {1, 1, 0, 1}}, /* odd height, even width */
        {1, 4, 6, 7, 9, 3, 1, 2, {0, 2, 1, 0}},   /* lopsided, two groups */
        {2, 4, 6, 5, 3, 1, 1, 1, {0, 1, 0, 1}},   /* 1x1 with padding after: not a plain GEMM */
    };
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            int64_t cin_g = cases[i].cin / cases[i].groups, cout_g = cases[i].cout / cases[i].groups;
            int64_t nx[4] = {cases[i].b, cases[i].cin, cases[i].h, cases[i].w};
            int64_t nw[4] = {cases[i].cout, cin_g, cases[i].k, cases[i].k}, nb[1] = {cases[i].cout};
            hv x = mk(dt, 4, nx, -1, 1), w = mk(dt, 4, nw, -1, 1), b = mk(dt, 1, nb, -1, 1);
            const int *pd = cases[i].pads;
            int64_t s = cases[i].stride, kk = cases[i].k;
            int64_t oh = (cases[i].h + pd[0] + pd[1] - kk) / s + 1, ow = (cases[i].w + pd[2] + pd[3] - kk) / s + 1;
            int64_t ny[4] = {cases[i].b, cases[i].cout, oh, ow};
            double *ref = keep(malloc(sizeof(double) * (size_t)numel_of(4, ny)));
            for (int64_t bi = 0; bi < ny[0]; bi++)
                for (int64_t o = 0; o < ny[1]; o++)
                    for (int64_t oy = 0; oy < oh; oy++)
                        for (int64_t ox = 0; ox < ow; ox++) {
                            double acc = b.base[o];
                            int64_t g = o / cout_g;
                            for (int64_t ci = 0; ci < cin_g; ci++)
                                for (int64_t ky = 0; ky < kk; ky++)
                                    for (int64_t kx = 0; kx < kk; kx++) {
                                        int64_t iy = oy * s - pd[0] + ky, ix = ox * s - pd[2] + kx;
                                        if (iy < 0 || iy >= nx[2] || ix < 0 || ix >= nx[3]) continue;
                                        acc += w.base[((o * cin_g + ci) * kk + ky) * kk + kx] *
                                               x.base[((bi * nx[1] + g * cin_g + ci) * nx[2] + iy) * nx[3] + ix];
                                    }
                            ref[((bi * ny[1] + o) * oh + oy) * ow + ox] = acc;
                        }
            ft_conv2d_opts op = {cases[i].stride, cases[i].groups, 1, pd[0], pd[1], pd[2], pd[3]};
            char what[48];
            snprintf(what, sizeof what, "conv2d per-side padding %zu", i);
            expect(what, ft_conv2d_ex(ctx, x.t, w.t, b.t, &op), 4, ny, ref, dt);
        }
    }
    /* TensorFlow "SAME" as HF's apply_tf_padding: (size, kernel, stride, dilation) -> (before, after) */
    static const int tf[][6] = {{224, 3, 2, 1, 0, 1}, {225, 3, 2, 1, 1, 1}, {7, 3, 1, 1, 1, 1}, {7, 1, 1, 1, 0, 0},
                                {8, 1, 2, 1, 0, 0},   {9, 1, 2, 1, 0, 0},   {14, 3, 1, 2, 2, 2}, {1, 3, 2, 1, 1, 1},
                                {10, 5, 2, 1, 1, 2},  {11, 5, 2, 1, 2, 2}};
    for (size_t i = 0; i < sizeof tf / sizeof tf[0]; i++) {
        int before = -1, after = -1;
        ft_status st = ft_tf_same_padding(tf[i][0], tf[i][1], tf[i][2], tf[i][3], &before, &after);
        CHECK(st == FT_OK && before == tf[i][4] && after == tf[i][5], "tf same n=%d k=%d s=%d d=%d: (%d, %d), expected (%d, %d)",
              tf[i][0], tf[i][1], tf[i][2], tf[i][3], before, after, tf[i][4], tf[i][5]);
    }
    int b0, a0;
    CHECK(ft_tf_same_padding(8, 3, 0, 1, &b0, &a0) == FT_ERR_INVALID_ARG &&
              ft_tf_same_padding(8, 0, 1, 1, &b0, &a0) == FT_ERR_INVALID_ARG &&
              ft_tf_same_padding(8, 3, 1, 1, NULL, &a0) == FT_ERR_INVALID_ARG,
          "tf same padding takes a zero stride, a zero kernel or a NULL output");
    int64_t nx[4] = {1, 2, 5, 5}, nw[4] = {2, 2, 3, 3};
    hv x = mk(FT_DTYPE_F32, 4, nx, -1, 1), w = mk(FT_DTYPE_F32, 4, nw, -1, 1);
    ft_conv2d_opts dil = {1, 1, 2, 2, 2, 2, 2}, neg = {1, 1, 1, 0, -1, 0, 0};
    expect_error("dilated dense conv", ft_conv2d_ex(ctx, x.t, w.t, NULL, &dil), "conv2d", "dilation");
    expect_error("negative padding", ft_conv2d_ex(ctx, x.t, w.t, NULL, &neg), "conv2d", "padding");
    end_test();
}

/* ---- channels-first LayerNorm ---- */

static void test_channel_norm(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        /* [3, 17, 5, 7] around a DC offset of 500, and a transposed [2, 33, 40] */
        int64_t n4[4] = {3, 17, 5, 7}, n3t[3] = {2, 40, 33}, nc[1] = {17}, nc3[1] = {33};
        /* (the transposed one also sliced: a view with an offset) */
        hv xs[2] = {mk(dt, 4, n4, 499, 501), hv_slice(hv_transpose(mk(dt, 3, n3t, -3, 3), 1, 2), 2, 1, 38)};
        hv gs[2] = {mk(dt, 1, nc, 0.5, 1.5), mk(dt, 1, nc3, 0.5, 1.5)};
        hv bs[2] = {mk(dt, 1, nc, -1, 1), mk(dt, 1, nc3, -1, 1)};
        for (int v = 0; v < 2; v++)
            for (int affine = 0; affine < 2; affine++) {
                hv x = xs[v];
                double *dx = dense(x);
                int64_t c = x.ne[1], pos = numel_of(x.nd, x.ne) / (x.ne[0] * c);
                double *ref = keep(malloc(sizeof(double) * (size_t)numel_of(x.nd, x.ne)));
                for (int64_t b = 0; b < x.ne[0]; b++)
                    for (int64_t p = 0; p < pos; p++) {
                        double mean = 0, var = 0;
                        for (int64_t ci = 0; ci < c; ci++) mean += dx[(b * c + ci) * pos + p] / (double)c;
                        for (int64_t ci = 0; ci < c; ci++) var += pow(dx[(b * c + ci) * pos + p] - mean, 2) / (double)c;
                        for (int64_t ci = 0; ci < c; ci++) {
                            int64_t o = (b * c + ci) * pos + p;
                            /* HF rounds the normalised value to the dtype before the affine */
                            double nv = round_to(dt, (dx[o] - mean) / sqrt(var + 1e-6));
                            ref[o] = affine ? nv * gs[v].base[ci] + bs[v].base[ci] : nv;
                        }
                    }
                ft_tensor *y = ft_channel_norm(ctx, x.t, affine ? gs[v].t : NULL, affine ? bs[v].t : NULL, 1e-6f);
                expect("channel_norm", y, x.nd, x.ne, ref, dt);
            }
    }
    /* one channel: the variance is 0, the output is beta */
    int64_t n1[4] = {2, 1, 3, 3}, c1[1] = {1};
    hv x = mk(FT_DTYPE_F32, 4, n1, -1, 1), b = mk(FT_DTYPE_F32, 1, c1, 0.25, 0.25);
    double ref[18];
    for (int i = 0; i < 18; i++) ref[i] = 0.25;
    expect("channel_norm one channel", ft_channel_norm(ctx, x.t, NULL, b.t, 1e-6f), 4, n1, ref, FT_DTYPE_F32);
    int64_t n5[1] = {5};
    hv g5 = mk(FT_DTYPE_F32, 1, n5, 0, 1);
    expect_error("channel_norm gamma", ft_channel_norm(ctx, x.t, g5.t, NULL, 1e-6f), "channel_norm", "[1]");
    end_test();
}

/* ---- squeeze-excitation gate ---- */

static void check_se(const char *what, ft_dtype dt, int64_t b, int64_t c, int64_t r, int64_t h, int64_t w, int act,
                     int four_d) {
    int64_t nx[4] = {b, c, h, w}, n1[4] = {r, c, 1, 1}, n2[4] = {c, r, 1, 1}, nr[1] = {r}, nc[1] = {c};
    hv x = mk(dt, 4, nx, -3, 3), w1 = mk(dt, four_d ? 4 : 2, n1, -1, 1), w2 = mk(dt, four_d ? 4 : 2, n2, -1, 1);
    hv b1 = mk(dt, 1, nr, -1, 1), b2 = mk(dt, 1, nc, -1, 1);
    int64_t pos = h * w;
    double *ref = keep(malloc(sizeof(double) * (size_t)(b * c * pos)));
    double *z = keep(malloc(sizeof(double) * (size_t)(r + c)));
    for (int64_t bi = 0; bi < b; bi++) {
        double *m = z + r;
        for (int64_t ci = 0; ci < c; ci++) {
            m[ci] = 0;
            for (int64_t p = 0; p < pos; p++) m[ci] += x.base[(bi * c + ci) * pos + p] / (double)pos;
        }
        for (int64_t ri = 0; ri < r; ri++) {
            double a = b1.base[ri];
            for (int64_t ci = 0; ci < c; ci++) a += w1.base[ri * c + ci] * m[ci];
            z[ri] = act_ref(act, a);
        }
        for (int64_t ci = 0; ci < c; ci++) {
            double a = b2.base[ci];
            for (int64_t ri = 0; ri < r; ri++) a += w2.base[ci * r + ri] * z[ri];
            double g = 1.0 / (1.0 + exp(-a));
            for (int64_t p = 0; p < pos; p++) ref[(bi * c + ci) * pos + p] = x.base[(bi * c + ci) * pos + p] * g;
        }
    }
    expect(what, ft_se_gate(ctx, x.t, w1.t, b1.t, w2.t, b2.t, act), 4, nx, ref, dt);
}

static void test_se_gate(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        check_se("se_gate silu", dt, 3, 17, 4, 5, 7, FT_ACT_SILU, 1);
        check_se("se_gate relu 2-d", dt, 2, 9, 1, 1, 3, FT_ACT_RELU, 0);
        check_se("se_gate none", dt, 1, 5, 2, 2, 2, FT_ACT_NONE, 1);
        check_se("se_gate parallel", dt, 2, 48, 12, 29, 31, FT_ACT_SILU, 1);
    }
    int64_t nx[4] = {1, 6, 2, 2}, n1[2] = {3, 6}, n2[2] = {5, 3}, n3[1] = {3}, n6[1] = {6};
    hv x = mk(FT_DTYPE_F32, 4, nx, -1, 1), w1 = mk(FT_DTYPE_F32, 2, n1, -1, 1), w2 = mk(FT_DTYPE_F32, 2, n2, -1, 1);
    hv b1 = mk(FT_DTYPE_F32, 1, n3, -1, 1), b2 = mk(FT_DTYPE_F32, 1, n6, -1, 1);
    expect_error("se_gate w2", ft_se_gate(ctx, x.t, w1.t, b1.t, w2.t, b2.t, FT_ACT_SILU), "se_gate", "w2");
    expect_error("se_gate act", ft_se_gate(ctx, x.t, w1.t, b1.t, w2.t, b2.t, 99), "se_gate", "activation");
    end_test();
}

/* NCHW -> NHWC as ConvNeXt permutes (the copy kernel's tiled transpose): tiles off
 * 16 on both sides, a batch of 2, and a slice of it (an offset, a strided row) */
static void test_permute_copy(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t ne4[4] = {2, 19, 5, 7};
        hv p4 = hv_transpose(hv_transpose(mk(dt, 4, ne4, -3, 3), 1, 2), 2, 3); /* [2, 5, 7, 19] */
        expect("contiguous(permute 0,2,3,1)", ft_contiguous(ctx, p4.t), 4, p4.ne, dense(p4), dt);
        hv q4 = hv_slice(p4, 1, 1, 4); /* [2, 3, 7, 19] */
        expect("contiguous(slice of the permute)", ft_contiguous(ctx, q4.t), 4, q4.ne, dense(q4), dt);
    }
}

int main(void) {
    (void)bidx, (void)hv_expand; /* ft_ops_ref.h helpers this file has no use for */
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return ft_test_finish();
    RUN(test_relu6_silu);
    RUN(test_dwconv);
    RUN(test_conv2d_asym);
    RUN(test_channel_norm);
    RUN(test_se_gate);
    RUN(test_permute_copy);
    ft_ctx_free(ctx);
    return ft_test_finish();
}

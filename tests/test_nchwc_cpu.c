/*
 * test_nchwc_cpu.c - the blocked-channel (NCHWc) kernels of kernels/cpu/nchwc*.c
 * against naive double-precision formulas written here, the layouts converted
 * by the test's own index arithmetic: the direct convolution (kernels 1/3/5/7,
 * strides 1/2, paddings 0..3, input channels 3..48 with a partial last block,
 * output channels 16..144 off the 64-channel groups, NCHW or NCHWc input,
 * plane sizes off the 6-pixel tiles, batch 1 and 2, bias, a residual, ReLU or
 * GELU, weights packed per call and at plan time, the output over its
 * residual as a plan may place it, weights past half of L2 in chunks, 1 and 2
 * threads; ReLU on NaN and infinities), its Winograd form and when it is chosen,
 * dwconv2d nodes with per-side padding and the SE gate on the blocked layout
 * (against their NCHW kernels), the
 * depthwise convolution, max pooling (a NaN wins), global average pooling and
 * the reorders of the copy kernel. Rerun under the AVX2 micro-kernel.
 */
#include "gemm_test_util.h"
#include "../kernels/cpu/nchwc.h"

#include <string.h>

#define C16 FT_NCHWC

/* NCHW [n, c, hw] -> NCHWc [n, c/16, hw, 16] (c a multiple of 16) */
static void to_blocked(const float *src, float *dst, int64_t n, int64_t c, int64_t hw) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t p = 0; p < hw; p++)
                dst[((i * (c / C16) + ch / C16) * hw + p) * C16 + ch % C16] = src[(i * c + ch) * hw + p];
}

static void from_blocked(const float *src, float *dst, int64_t n, int64_t c, int64_t hw) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t p = 0; p < hw; p++)
                dst[(i * c + ch) * hw + p] = src[((i * (c / C16) + ch / C16) * hw + p) * C16 + ch % C16];
}

typedef struct dcase {
    int64_t b, cin, h, w, cout, k;
    int stride, pad, groups;
} dcase;

/* act(conv(x, w) + bias + res), NCHW, groups 1 or depthwise */
static double *ref_conv(const dcase *c, const float *x, const float *w, const float *bias, const float *res,
                        int act, int64_t oh, int64_t ow) {
    int64_t cin_g = c->cin / c->groups, cout_g = c->cout / c->groups;
    double *r = malloc((size_t)(c->b * c->cout * oh * ow) * sizeof(double));
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t o = 0; o < c->cout; o++)
            for (int64_t y = 0; y < oh; y++)
                for (int64_t xx = 0; xx < ow; xx++) {
                    double acc = bias ? bias[o] : 0.0;
                    for (int64_t ci = 0; ci < cin_g; ci++)
                        for (int64_t ky = 0; ky < c->k; ky++)
                            for (int64_t kx = 0; kx < c->k; kx++) {
                                int64_t iy = y * c->stride + ky - c->pad, ix = xx * c->stride + kx - c->pad;
                                if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w) continue;
                                int64_t xc = b * c->cin + o / cout_g * cin_g + ci;
                                acc += (double)x[(xc * c->h + iy) * c->w + ix] *
                                       w[((o * cin_g + ci) * c->k + ky) * c->k + kx];
                            }
                    int64_t idx = ((b * c->cout + o) * oh + y) * ow + xx;
                    if (res) acc += res[idx];
                    r[idx] = act_ref(act, acc);
                }
    return r;
}

/* The direct kernel on c (input blocked or not), per-call and plan-packed weights;
 * returns the number of mismatching runs. */
static int run_conv(const dcase *c, bool x_blocked, bool with_res, int act, int threads) {
    int64_t oh = (c->h + 2 * c->pad - c->k) / c->stride + 1, ow = (c->w + 2 * c->pad - c->k) / c->stride + 1;
    int64_t cin_g = c->cin / c->groups, nx = c->b * c->cin * c->h * c->w, ny = c->b * c->cout * oh * ow;
    float *x = rvals(nx, FT_DTYPE_F32), *w = rvals(c->cout * cin_g * c->k * c->k, FT_DTYPE_F32);
    float *bias = rvals(c->cout, FT_DTYPE_F32), *res = rvals(ny, FT_DTYPE_F32);
    double *ref = ref_conv(c, x, w, bias, with_res ? res : NULL, act, oh, ow);
    int64_t xs[4] = {c->b, c->cin, c->h, c->w}, ws[4] = {c->cout, cin_g, c->k, c->k};
    int64_t ys[4] = {c->b, c->cout, oh, ow}, bs[1] = {c->cout};
    ctx->cpu_threads = threads;
    ft_tensor *src[4] = {ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, xs, x), ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, ws, w),
                         ft_tensor_from_host(ctx, FT_DTYPE_F32, 1, bs, bias),
                         with_res ? ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, ys, res) : NULL};
    ft_params_conv p = {.stride = c->stride, .padding = c->pad, .groups = c->groups, .act = act, .act_in = FT_ACT_NONE};
    ft_tensor *y = ft_dispatch(ctx, FT_OP_CONV2D, src, 4, &p, sizeof p); /* eager: NCHW */
    char what[200];
    snprintf(what, sizeof what, "nchwc conv b%lld cin%lld %lldx%lld cout%lld k%lld s%d p%d g%d x_%s res %d act %d t%d",
             (long long)c->b, (long long)c->cin, (long long)c->h, (long long)c->w, (long long)c->cout,
             (long long)c->k, c->stride, c->pad, c->groups, x_blocked ? "nchwc" : "nchw", with_res, act, threads);
    int bad = 0;
    CHECK(y && ft_cpu_nchwc_conv_ok(y), "%s: not a direct-kernel node", what);
    float *got = malloc((size_t)ny * sizeof(float));
    for (int pass = 0; y && pass < 2; pass++) { /* 0: packed per call, 1: at plan time */
        if (x_blocked) {
            to_blocked(x, src[0]->data, c->b, c->cin, c->h * c->w);
            src[0]->flags |= FT_TF_NCHWC;
        }
        if (with_res) {
            to_blocked(res, src[3]->data, c->b, c->cout, oh * ow);
            src[3]->flags |= FT_TF_NCHWC;
        }
        y->flags |= FT_TF_NCHWC;
        if (pass == 1) {
            CHECK(ft_cpu_nchwc_conv_prepack(y), "%s: not prepacked", what);
            /* the packed weights, not the tensor, are what the kernel reads now */
            for (int64_t i = 0; i < c->cout * cin_g * c->k * c->k; i++) ((float *)src[1]->data)[i] = NAN;
        }
        for (int64_t i = 0; i < ny; i++) ((float *)y->data)[i] = 1e30f;
        int st = ft_cpu_conv2d(ctx, y);
        CHECK(st == FT_OK, "%s: %s", what, ft_ctx_errmsg(ctx));
        from_blocked(y->data, got, c->b, c->cout, oh * ow);
        memcpy(y->data, got, (size_t)ny * sizeof(float));
        y->flags &= ~FT_TF_NCHWC;
        char w2[220];
        snprintf(w2, sizeof w2, "%s %s", what, pass ? "prepacked" : "per call");
        bad += cmp(y, ref, ny, 2e-4, w2) != 0;
        if (pass == 1 && with_res) {
            /* the output over its residual, as a plan places it when the residual
             * dies here: the kernel must accumulate into it, every weight chunk */
            y->flags |= FT_TF_NCHWC;
            memcpy(y->data, src[3]->data, (size_t)ny * sizeof(float));
            void *keep = src[3]->data;
            src[3]->data = y->data;
            st = ft_cpu_conv2d(ctx, y);
            src[3]->data = keep;
            CHECK(st == FT_OK, "%s in place: %s", what, ft_ctx_errmsg(ctx));
            from_blocked(y->data, got, c->b, c->cout, oh * ow);
            memcpy(y->data, got, (size_t)ny * sizeof(float));
            y->flags &= ~FT_TF_NCHWC;
            snprintf(w2, sizeof w2, "%s in place", what);
            bad += cmp(y, ref, ny, 2e-4, w2) != 0;
        }
        if (pass == 1) ft_cpu_unpack(y);
    }
    free(got);
    free(x);
    free(w);
    free(bias);
    free(res);
    free(ref);
    ft_ctx_reset(ctx);
    ctx->cpu_threads = 0;
    return bad;
}

static void test_nchwc_conv(void) {
    static const dcase cases[] = {
        {1, 3, 23, 21, 64, 7, 2, 3, 1},   /* a stem: 3 channels, HWC staging */
        {2, 16, 9, 11, 32, 3, 1, 1, 1},   {1, 32, 7, 7, 48, 3, 1, 1, 1},  {1, 48, 13, 5, 80, 1, 1, 0, 1},
        {2, 32, 14, 14, 16, 1, 2, 0, 1},  {1, 19, 10, 9, 144, 3, 2, 1, 1}, {1, 8, 6, 6, 16, 5, 1, 2, 1},
        {1, 64, 7, 7, 128, 3, 1, 1, 1},   {1, 16, 4, 3, 64, 3, 1, 3, 1},  {2, 35, 5, 8, 16, 1, 1, 0, 1},
        /* weights past half of a 1 MiB L2: the depth in chunks (14 + 2 blocks), each
         * next chunk prefetched while one computes; with a partial last block, stride
         * 2 and padding; and channel groups in chunks (3 + 2 of 64) over the whole
         * depth, the last block partial (520 = 32.5 x 16) */
        {1, 256, 8, 7, 128, 3, 1, 1, 1}, {2, 232, 9, 9, 64, 3, 2, 1, 1}, {1, 520, 5, 6, 320, 1, 1, 0, 1},
        /* Winograd F(2x2, 3x3) (3x3, stride 1, padding 1, an NCHWc input, 40+ tiles):
         * odd planes (a last half tile), output channels off the 64-channel groups,
         * batch 2, and 360 tiles of 16 channels in two chunks; the 7 x 7 planes
         * above too (16 tiles) */
        {1, 32, 13, 15, 80, 3, 1, 1, 1}, {2, 48, 9, 11, 144, 3, 1, 1, 1}, {1, 16, 40, 35, 16, 3, 1, 1, 1},
        {1, 64, 16, 16, 64, 3, 1, 1, 1},
        /* depthwise */
        {1, 32, 9, 11, 32, 3, 1, 1, 32},  {2, 16, 8, 7, 16, 5, 2, 2, 16}, {1, 48, 7, 7, 48, 3, 2, 1, 48},
    };
    int bad = 0, runs = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const dcase *c = &cases[i];
        for (int xb = 0; xb < 2; xb++) {
            if (xb && c->cin % C16) continue;
            if (!xb && c->groups > 1) continue; /* depthwise reads blocked inputs only */
            for (int v = 0; v < 3; v++) {
                int act = v == 0 ? FT_ACT_NONE : v == 1 ? FT_ACT_RELU : FT_ACT_GELU;
                bad += run_conv(c, xb, v != 0, act, 1 + (int)((i + v) % 2));
                runs += 2;
            }
        }
    }
    printf("  %d direct-convolution runs, %d mismatching\n", runs, bad);
}

/* The packing a conv2d node of case c gets at plan time (its ft_cpu_nchwc_w mode),
 * -1 when it was not packed. */
static int packed_mode(const dcase *c, int threads) {
    int64_t xs[4] = {c->b, c->cin, c->h, c->w}, ws[4] = {c->cout, c->cin / c->groups, c->k, c->k};
    float *x = rvals(c->b * c->cin * c->h * c->w, FT_DTYPE_F32), *w = rvals(ws[0] * ws[1] * c->k * c->k, FT_DTYPE_F32);
    ft_tensor *src[2] = {ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, xs, x), ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, ws, w)};
    ft_params_conv p = {.stride = c->stride, .padding = c->pad, .groups = c->groups, .act = FT_ACT_NONE, .act_in = FT_ACT_NONE};
    ft_tensor *y = ft_dispatch(ctx, FT_OP_CONV2D, src, 2, &p, sizeof p);
    int mode = -1;
    if (y) {
        src[0]->flags |= FT_TF_NCHWC;
        y->flags |= FT_TF_NCHWC;
        ft_cpu_set_threads(threads); /* as ft_cpu_prepack does for a plan (the eager call above reset it) */
        if (ft_cpu_nchwc_conv_prepack(y)) mode = ((const ft_cpu_nchwc_w *)y->extra)->mode;
        ft_cpu_unpack(y);
    }
    free(x);
    free(w);
    ft_ctx_reset(ctx);
    ft_cpu_set_threads(0);
    return mode;
}

/* Whether a node of case c packed at plan time with pack_threads threads runs
 * on those packed weights with run_threads: the weight tensor is NaN by then,
 * so a kernel that packed again per call would write NaN. */
static bool runs_on_plan_weights(const dcase *c, int pack_threads, int run_threads, int *mode) {
    int64_t xs[4] = {c->b, c->cin, c->h, c->w}, ws[4] = {c->cout, c->cin, c->k, c->k};
    int64_t nw = ws[0] * ws[1] * c->k * c->k;
    float *x = rvals(c->b * c->cin * c->h * c->w, FT_DTYPE_F32), *w = rvals(nw, FT_DTYPE_F32);
    ft_tensor *src[2] = {ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, xs, x), ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, ws, w)};
    ft_params_conv p = {.stride = c->stride, .padding = c->pad, .groups = 1, .act = FT_ACT_NONE, .act_in = FT_ACT_NONE};
    ft_tensor *y = ft_dispatch(ctx, FT_OP_CONV2D, src, 2, &p, sizeof p);
    bool finite = false;
    *mode = -1;
    if (y) {
        src[0]->flags |= FT_TF_NCHWC;
        y->flags |= FT_TF_NCHWC;
        ft_cpu_set_threads(pack_threads);
        if (ft_cpu_nchwc_conv_prepack(y)) {
            *mode = ((const ft_cpu_nchwc_w *)y->extra)->mode;
            for (int64_t i = 0; i < nw; i++) ((float *)src[1]->data)[i] = NAN;
            ctx->cpu_threads = run_threads;
            finite = ft_cpu_conv2d(ctx, y) == FT_OK;
            for (int64_t i = 0; finite && i < ft_tensor_numel(y); i++) finite = isfinite(((float *)y->data)[i]);
            ctx->cpu_threads = 0;
        }
        ft_cpu_unpack(y);
    }
    free(x);
    free(w);
    ft_ctx_reset(ctx);
    ft_cpu_set_threads(0);
    return finite;
}

/* Which convolutions Winograd takes (the cases above check its results): 3x3,
 * stride 1, padding 1 with 16+ tiles (a batch-1 7 x 7 plane has 16); not a
 * batch-1 5 x 5 plane (9 tiles), a stride 2, a 5x5 kernel, a depthwise one;
 * ResNet-50's batch-1 7 x 7 stage (512 channels, its transformed weights 16.8
 * MB) on 1 thread but not on 2, where the cost model has its GEMMs wait on
 * memory; and none with FT_CPU_WINOGRAD=0. */
static void test_nchwc_winograd_choice(void) {
    static const dcase yes = {1, 32, 13, 15, 80, 3, 1, 1, 1}, p7 = {1, 64, 7, 7, 64, 3, 1, 1, 1},
                       s4 = {1, 512, 7, 7, 512, 3, 1, 1, 1}, s4b8 = {8, 512, 7, 7, 512, 3, 1, 1, 1};
    static const dcase no[] = {{1, 64, 5, 5, 128, 3, 1, 1, 1}, {1, 32, 26, 26, 32, 3, 2, 1, 1},
                               {1, 16, 20, 20, 16, 5, 1, 2, 1}, {1, 32, 20, 20, 32, 3, 1, 1, 32}};
    for (int th = 1; th <= 2; th++) {
        CHECK(packed_mode(&yes, th) == FT_CPU_NCHWC_MODE_WINO, "13x15 3x3, %d threads: not Winograd", th);
        CHECK(packed_mode(&p7, th) == FT_CPU_NCHWC_MODE_WINO, "7x7 plane, %d threads: not Winograd", th);
        CHECK(packed_mode(&s4b8, th) == FT_CPU_NCHWC_MODE_WINO, "512 channels, batch 8, %d threads: not Winograd",
              th);
        for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
            CHECK(packed_mode(&no[i], th) != FT_CPU_NCHWC_MODE_WINO, "case %zu, %d threads: Winograd", i, th);
    }
    CHECK(packed_mode(&s4, 1) == FT_CPU_NCHWC_MODE_WINO, "512 channels 7x7, 1 thread: not Winograd");
    CHECK(packed_mode(&s4, 2) != FT_CPU_NCHWC_MODE_WINO, "512 channels 7x7, 2 threads: Winograd");
    /* the plan's choice stands when the thread count changes after it */
    int m1 = -1, m2 = -1;
    CHECK(runs_on_plan_weights(&s4, 1, 2, &m1) && m1 == FT_CPU_NCHWC_MODE_WINO,
          "packed for 1 thread (mode %d), run on 2: not on the plan's Winograd weights", m1);
    CHECK(runs_on_plan_weights(&s4, 2, 1, &m2) && m2 != FT_CPU_NCHWC_MODE_WINO,
          "packed for 2 threads (mode %d), run on 1: not on the plan's direct weights", m2);
    setenv("FT_CPU_WINOGRAD", "0", 1);
    CHECK(packed_mode(&yes, 1) != FT_CPU_NCHWC_MODE_WINO, "FT_CPU_WINOGRAD=0: still Winograd");
    unsetenv("FT_CPU_WINOGRAD");
    CHECK(packed_mode(&yes, 1) == FT_CPU_NCHWC_MODE_WINO, "FT_CPU_WINOGRAD unset again: not Winograd");
}

/* Runs dst's CPU kernel on the blocked layout: its x (src[0]) reordered to NCHWc,
 * dst flagged; returns the NCHW result in got (the node left as it was). */
static int run_blocked(ft_tensor *dst, int (*kern)(ft_ctx *, ft_tensor *), float *got, const float *x_nchw) {
    ft_tensor *x = dst->src[0];
    const int64_t n = x->ne[0], c = x->ne[1], hw = x->ne[2] * x->ne[3], ny = ft_tensor_numel(dst);
    to_blocked(x_nchw, x->data, n, c, hw);
    x->flags |= FT_TF_NCHWC;
    dst->flags |= FT_TF_NCHWC;
    int st = kern(ctx, dst);
    from_blocked(dst->data, got, dst->ne[0], dst->ne[1], dst->ne[2] * dst->ne[3]);
    memcpy(x->data, x_nchw, (size_t)(n * c * hw) * sizeof(float));
    x->flags &= ~FT_TF_NCHWC;
    dst->flags &= ~FT_TF_NCHWC;
    (void)ny;
    return st;
}

/* Largest |a - b| / (1 + |b|) over n values. */
static double max_rel(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
        if (!(d <= m)) m = d; /* NaN wins */
    }
    return m;
}

/* dwconv2d nodes (the op depthwise convolutions dispatch to, EfficientNet's with
 * TF-SAME per-side padding) on the blocked depthwise kernel against the NCHW
 * kernel: odd planes, strides 1 and 2, 3x3 and 5x5, padding only at the bottom
 * and right, SiLU and ReLU, per-call and plan-packed weights, 1 and 2 threads. */
static void test_nchwc_dwconv_asym(void) {
    static const struct { int64_t b, c, h, w, k; int s, pt, pb, pl, pr, act; } cases[] = {
        {1, 32, 13, 11, 3, 2, 0, 1, 0, 1, FT_ACT_SILU}, {2, 16, 9, 10, 5, 2, 1, 2, 2, 1, FT_ACT_RELU},
        {1, 48, 7, 7, 5, 1, 2, 2, 2, 2, FT_ACT_SILU},   {1, 16, 6, 8, 3, 1, 1, 1, 0, 2, FT_ACT_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const __typeof__(cases[0]) *c = &cases[i];
        int64_t xs[4] = {c->b, c->c, c->h, c->w}, ws[4] = {c->c, 1, c->k, c->k}, bs[1] = {c->c};
        float *x = rvals(c->b * c->c * c->h * c->w, FT_DTYPE_F32), *w = rvals(c->c * c->k * c->k, FT_DTYPE_F32);
        float *bias = rvals(c->c, FT_DTYPE_F32);
        ft_tensor *src[3] = {ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, xs, x),
                             ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, ws, w),
                             ft_tensor_from_host(ctx, FT_DTYPE_F32, 1, bs, bias)};
        ft_params_conv p = {.stride = c->s, .groups = (int32_t)c->c, .act = c->act, .act_in = FT_ACT_NONE,
                            .asym = 1, .pad_t = c->pt, .pad_b = c->pb, .pad_l = c->pl, .pad_r = c->pr};
        ft_tensor *y = ft_dispatch(ctx, FT_OP_DWCONV2D, src, 3, &p, sizeof p); /* eager: the NCHW kernel */
        CHECK(y && ft_cpu_nchwc_conv_ok(y), "case %zu: not a blocked-kernel node (%s)", i, ft_ctx_errmsg(ctx));
        if (y) {
            const int64_t ny = ft_tensor_numel(y);
            float *ref = malloc((size_t)ny * sizeof(float)), *got = malloc((size_t)ny * sizeof(float));
            memcpy(ref, y->data, (size_t)ny * sizeof(float));
            for (int pass = 0; pass < 2; pass++) {
                ctx->cpu_threads = 1 + pass;
                if (pass == 1) CHECK(ft_cpu_nchwc_conv_prepack(y), "case %zu: not prepacked", i);
                CHECK(run_blocked(y, ft_cpu_dwconv2d, got, x) == FT_OK, "case %zu: %s", i, ft_ctx_errmsg(ctx));
                double e = max_rel(got, ref, ny);
                CHECK(e <= 1e-5, "case %zu (%s): blocked vs NCHW depthwise %.3g", i, pass ? "prepacked" : "per call", e);
                if (pass == 1) ft_cpu_unpack(y);
            }
            ctx->cpu_threads = 0;
            free(ref);
            free(got);
        }
        free(x);
        free(w);
        free(bias);
        ft_ctx_reset(ctx);
    }
}

/* The squeeze-excitation gate on blocked x against its NCHW kernel. */
static void test_nchwc_se_gate(void) {
    const int64_t b = 2, c = 48, h = 5, w = 7, r = 12;
    int64_t xs[4] = {b, c, h, w}, w1s[2] = {r, c}, b1s[1] = {r}, w2s[2] = {c, r}, b2s[1] = {c};
    float *x = rvals(b * c * h * w, FT_DTYPE_F32), *w1 = rvals(r * c, FT_DTYPE_F32), *b1 = rvals(r, FT_DTYPE_F32);
    float *w2 = rvals(c * r, FT_DTYPE_F32), *b2 = rvals(c, FT_DTYPE_F32);
    ft_tensor *src[5] = {ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, xs, x), ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, w1s, w1),
                         ft_tensor_from_host(ctx, FT_DTYPE_F32, 1, b1s, b1), ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, w2s, w2),
                         ft_tensor_from_host(ctx, FT_DTYPE_F32, 1, b2s, b2)};
    ft_params_se p = {FT_ACT_SILU};
    ft_tensor *y = ft_dispatch(ctx, FT_OP_SE_GATE, src, 5, &p, sizeof p);
    CHECK(y != NULL, "se_gate: %s", ft_ctx_errmsg(ctx));
    if (y) {
        const int64_t ny = ft_tensor_numel(y);
        float *ref = malloc((size_t)ny * sizeof(float)), *got = malloc((size_t)ny * sizeof(float));
        memcpy(ref, y->data, (size_t)ny * sizeof(float));
        for (int th = 1; th <= 2; th++) {
            ctx->cpu_threads = th;
            CHECK(run_blocked(y, ft_cpu_se_gate, got, x) == FT_OK, "se_gate blocked: %s", ft_ctx_errmsg(ctx));
            double e = max_rel(got, ref, ny);
            CHECK(e <= 1e-6, "se_gate, %d threads: blocked vs NCHW %.3g", th, e);
        }
        ctx->cpu_threads = 0;
        free(ref);
        free(got);
    }
    free(x);
    free(w1);
    free(b1);
    free(w2);
    free(b2);
    ft_ctx_reset(ctx);
}

/* The copy kernel's reorders, both ways, against the test's own. */
static void test_nchwc_reorder(void) {
    int64_t s[4] = {2, 48, 5, 7}, n = 2 * 48 * 35;
    float *x = rvals(n, FT_DTYPE_F32), *want = malloc((size_t)n * sizeof(float));
    ft_tensor *xt = ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, s, x);
    ft_params_copy p = {FT_DTYPE_F32};
    ft_tensor *src[1] = {xt};
    ft_tensor *y = ft_dispatch(ctx, FT_OP_COPY, src, 1, &p, sizeof p);
    CHECK(y != NULL, "copy: %s", ft_ctx_errmsg(ctx));
    if (y) {
        y->flags |= FT_TF_NCHWC;
        CHECK(ft_cpu_copy(ctx, y) == FT_OK, "reorder to NCHWc: %s", ft_ctx_errmsg(ctx));
        to_blocked(x, want, 2, 48, 35);
        CHECK(!memcmp(y->data, want, (size_t)n * sizeof(float)), "NCHW -> NCHWc differs");
        /* back: the blocked tensor as the source of an unflagged copy */
        ft_tensor *src2[1] = {y};
        ft_tensor *z = ft_dispatch(ctx, FT_OP_COPY, src2, 1, &p, sizeof p);
        CHECK(z && ft_cpu_copy(ctx, z) == FT_OK, "reorder back: %s", ft_ctx_errmsg(ctx));
        CHECK(z && !memcmp(z->data, x, (size_t)n * sizeof(float)), "NCHWc -> NCHW differs");
    }
    free(x);
    free(want);
    ft_ctx_reset(ctx);
}

/* Max pooling (3x3/2 pad 1 and 2x2/2, a NaN and a -inf in the input) and global
 * average pooling of blocked inputs against the NCHW formulas. */
static void test_nchwc_pools(void) {
    static const int64_t shapes[][4] = {{1, 16, 11, 9}, {2, 32, 8, 8}, {1, 64, 3, 5}};
    for (size_t si = 0; si < 3; si++) {
        int64_t b = shapes[si][0], c = shapes[si][1], h = shapes[si][2], w = shapes[si][3], n = b * c * h * w;
        float *x = rvals(n, FT_DTYPE_F32);
        x[5] = NAN;
        x[n / 2] = -INFINITY;
        for (int kind = 0; kind < 3; kind++) {
            ft_tensor *xt = ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, shapes[si], x);
            ft_tensor *src[1] = {xt};
            ft_params_maxpool mp = {kind == 0 ? 3 : 2, 2, kind == 0 ? 1 : 0};
            ft_tensor *y = kind < 2 ? ft_dispatch(ctx, FT_OP_MAXPOOL2D, src, 1, &mp, sizeof mp)
                                    : ft_dispatch(ctx, FT_OP_GLOBAL_AVGPOOL, src, 1, NULL, 0);
            CHECK(y != NULL, "pool: %s", ft_ctx_errmsg(ctx));
            if (!y) continue;
            int64_t oh = y->ne[2], ow = y->ne[3], ny = b * c * oh * ow;
            double *ref = malloc((size_t)ny * sizeof(double));
            for (int64_t pl = 0; pl < b * c; pl++)
                for (int64_t oy = 0; oy < oh; oy++)
                    for (int64_t ox = 0; ox < ow; ox++) {
                        double m = kind < 2 ? -INFINITY : 0.0;
                        int64_t ky0 = kind < 2 ? oy * 2 - mp.padding : 0, kx0 = kind < 2 ? ox * 2 - mp.padding : 0;
                        int64_t kh = kind < 2 ? mp.kernel : h, kw = kind < 2 ? mp.kernel : w;
                        for (int64_t iy = ky0; iy < ky0 + kh; iy++)
                            for (int64_t ix = kx0; ix < kx0 + kw; ix++) {
                                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                                double v = x[(pl * h + iy) * w + ix];
                                if (kind == 2) m += v;
                                else if (v > m || v != v) m = v;
                            }
                        ref[(pl * oh + oy) * ow + ox] = kind == 2 ? m / (double)(h * w) : m;
                    }
            to_blocked(x, xt->data, b, c, h * w);
            xt->flags |= FT_TF_NCHWC;
            if (kind < 2) y->flags |= FT_TF_NCHWC;
            int st = kind < 2 ? ft_cpu_maxpool2d(ctx, y) : ft_cpu_global_avgpool(ctx, y);
            CHECK(st == FT_OK, "nchwc pool %d: %s", kind, ft_ctx_errmsg(ctx));
            if (kind < 2) {
                float *t = malloc((size_t)ny * sizeof(float));
                from_blocked(y->data, t, b, c, oh * ow);
                memcpy(y->data, t, (size_t)ny * sizeof(float));
                free(t);
                y->flags &= ~FT_TF_NCHWC;
            }
            int bad = 0;
            for (int64_t i = 0; i < ny && !bad; i++) {
                double g = ((float *)y->data)[i];
                bool ok = isnan(ref[i]) ? isnan(g) : isinf(ref[i]) ? g == ref[i] : fabs(g - ref[i]) <= 1e-6 * (1 + fabs(ref[i]));
                if (!ok) {
                    CHECK(0, "nchwc pool %d shape %zu [%lld]: %g, expected %g", kind, si, (long long)i, g, ref[i]);
                    bad = 1;
                }
            }
            free(ref);
            ft_ctx_reset(ctx);
        }
        free(x);
    }
}

/* The fused ReLU on special values, through the AVX-512 store (integer masks)
 * and the others: NaN of either sign stays NaN, -inf and negatives give +0, +inf
 * stays. A 1x1 convolution of one channel with unit weights, no bias: y = relu(x). */
static void test_nchwc_relu_special(void) {
    static const float xv[8] = {NAN, -NAN, -INFINITY, INFINITY, -0.0f, 0.0f, -2.5f, 3.0f};
    int64_t xs[4] = {1, 1, 2, 4}, ws[4] = {64, 1, 1, 1};
    float *x = malloc(sizeof xv), *w = malloc(64 * sizeof(float));
    memcpy(x, xv, sizeof xv);
    for (int i = 0; i < 64; i++) w[i] = 1.0f;
    ft_tensor *src[2] = {ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, xs, x), ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, ws, w)};
    ft_params_conv p = {.stride = 1, .padding = 0, .groups = 1, .act = FT_ACT_RELU, .act_in = FT_ACT_NONE};
    ft_tensor *y = ft_dispatch(ctx, FT_OP_CONV2D, src, 2, &p, sizeof p);
    CHECK(y && ft_cpu_nchwc_conv_ok(y), "relu special: not a direct-kernel node");
    if (y) {
        y->flags |= FT_TF_NCHWC;
        CHECK(ft_cpu_conv2d(ctx, y) == FT_OK, "relu special: %s", ft_ctx_errmsg(ctx));
        const float *yd = y->data; /* [1][4 blocks][8 pixels][16] */
        int bad = 0;
        for (int b = 0; b < 4; b++)
            for (int j = 0; j < 8; j++)
                for (int c = 0; c < C16; c++) {
                    float g = yd[(b * 8 + j) * C16 + c], v = xv[j];
                    bool ok = isnan(v) ? isnan(g) : v > 0 ? g == v : g == 0.0f && !signbit(g);
                    bad += !ok;
                }
        CHECK(bad == 0, "relu special: %d outputs wrong", bad);
    }
    free(x);
    free(w);
    ft_ctx_reset(ctx);
}

/* A node the direct kernel cannot run, flagged anyway, is an error, not a wrong answer. */
static void test_nchwc_refuses(void) {
    int64_t xs[4] = {1, 8, 5, 5}, ws[4] = {12, 8, 3, 3};
    float *x = rvals(200, FT_DTYPE_F32), *w = rvals(12 * 72, FT_DTYPE_F32);
    ft_tensor *src[2] = {ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, xs, x), ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, ws, w)};
    ft_params_conv p = {.stride = 1, .padding = 1, .groups = 1, .act = FT_ACT_NONE, .act_in = FT_ACT_NONE};
    ft_tensor *y = ft_dispatch(ctx, FT_OP_CONV2D, src, 2, &p, sizeof p);
    CHECK(y && !ft_cpu_nchwc_conv_ok(y), "12 output channels are not a blocked-layout conv");
    if (y) {
        y->flags |= FT_TF_NCHWC;
        CHECK(ft_cpu_conv2d(ctx, y) != FT_OK && strstr(ft_ctx_errmsg(ctx), "NCHWc"), "no error: %s",
              ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
    }
    free(x);
    free(w);
    ft_ctx_reset(ctx);
}

int main(int argc, char **argv) {
    (void)ft_test_golden_dir;
    (void)odd;
    (void)dtypes;
    (void)argc;
    if (gemm_test_select() != 0) return 1; /* before anything packs or multiplies */
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) {
        printf("cannot create a CPU context\n");
        return 1;
    }
    RUN(test_nchwc_conv);
    RUN(test_nchwc_winograd_choice);
    RUN(test_nchwc_dwconv_asym);
    RUN(test_nchwc_se_gate);
    RUN(test_nchwc_relu_special);
    RUN(test_nchwc_reorder);
    RUN(test_nchwc_pools);
    RUN(test_nchwc_refuses);
    if (!is_test_child()) {
        gemm_test_self = argv[0];
        RUN(test_other_kernels);
    }
    ft_ctx_free(ctx);
    return ft_test_finish();
}

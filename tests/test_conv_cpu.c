/*
 * test_conv_cpu.c - the CPU convolutions as implicit GEMMs (kernels/cpu/conv.c,
 * kernels/cpu/conv_pack.c) against a naive double-precision convolution written
 * here: kernels 1/3/7, strides 1/2, paddings 0/1/3, groups 1/2/3, conv1d and
 * conv2d, batch 1 and 3 (micro-tiles that straddle two images), channel counts
 * and output widths off the 12/16 tile sizes, bias + activation or a residual
 * in the epilogue, the weights packed per call (eager) and at plan time
 * (ft_cpu_conv_prepack, grouped too), 1 and 2 threads (both thread splits);
 * and the f32 max pooling that follows ResNet's stem.
 */
#include "gemm_test_util.h"
#include "../kernels/cpu/cpu_kernels.h"

typedef struct cc {
    int64_t b, cin, h, w, cout, k;
    int stride, pad, groups;
    bool is2d;
} cc;

/* conv of x (NCHW; conv1d: h = 1) + bias, + res, act; [b, cout, oh, ow] */
static double *ref_conv(const cc *c, const float *x, const float *w, const float *bias,
                        const float *res, int act, int64_t *oh, int64_t *ow) {
    int64_t kh = c->is2d ? c->k : 1, ph = c->is2d ? c->pad : 0, sh = c->is2d ? c->stride : 1;
    *oh = (c->h + 2 * ph - kh) / sh + 1;
    *ow = (c->w + 2 * c->pad - c->k) / c->stride + 1;
    int64_t cin_g = c->cin / c->groups, cout_g = c->cout / c->groups, n = *oh * *ow;
    double *r = malloc((size_t)(c->b * c->cout * n) * sizeof(double));
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t o = 0; o < c->cout; o++)
            for (int64_t y = 0; y < *oh; y++)
                for (int64_t xx = 0; xx < *ow; xx++) {
                    double acc = bias ? bias[o] : 0.0;
                    for (int64_t ci = 0; ci < cin_g; ci++)
                        for (int64_t ky = 0; ky < kh; ky++)
                            for (int64_t kx = 0; kx < c->k; kx++) {
                                int64_t iy = y * sh + ky - ph, ix = xx * c->stride + kx - c->pad;
                                if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w) continue;
                                int64_t xc = b * c->cin + o / cout_g * cin_g + ci;
                                acc += (double)x[(xc * c->h + iy) * c->w + ix] *
                                       w[((o * cin_g + ci) * kh + ky) * c->k + kx];
                            }
                    int64_t idx = (b * c->cout + o) * n + y * *ow + xx;
                    if (res) acc += res[idx];
                    r[idx] = act_ref(act, acc);
                }
    return r;
}

/* Runs c eagerly, then again with its weight packed as a plan packs it; both
 * against the reference. Returns the number of mismatching runs. */
static int run_case(const cc *c, int threads, int act, bool with_res) {
    int64_t cin_g = c->cin / c->groups, kh = c->is2d ? c->k : 1, oh, ow;
    float *x = rvals(c->b * c->cin * c->h * c->w, FT_DTYPE_F32);
    float *w = rvals(c->cout * cin_g * kh * c->k, FT_DTYPE_F32), *bias = rvals(c->cout, FT_DTYPE_F32);
    double *r0 = ref_conv(c, x, w, NULL, NULL, FT_ACT_NONE, &oh, &ow);
    free(r0);
    int64_t n = c->b * c->cout * oh * ow;
    float *res = rvals(n, FT_DTYPE_F32);
    double *ref = ref_conv(c, x, w, bias, with_res ? res : NULL, act, &oh, &ow);
    int64_t xs[4] = {c->b, c->cin, c->h, c->w}, ws[4] = {c->cout, cin_g, kh, c->k};
    int64_t ys[4] = {c->b, c->cout, oh, ow}, bs[1] = {c->cout};
    if (!c->is2d) {
        xs[2] = c->w;
        ws[2] = c->k;
        ys[2] = ow;
    }
    int nd = c->is2d ? 4 : 3;
    ctx->cpu_threads = threads;
    ft_tensor *src[4] = {ft_tensor_from_host(ctx, FT_DTYPE_F32, nd, xs, x),
                         ft_tensor_from_host(ctx, FT_DTYPE_F32, nd, ws, w),
                         ft_tensor_from_host(ctx, FT_DTYPE_F32, 1, bs, bias),
                         with_res ? ft_tensor_from_host(ctx, FT_DTYPE_F32, nd, ys, res) : NULL};
    src[1]->flags |= FT_TF_WEIGHT;
    ft_params_conv p = {.stride = c->stride, .padding = c->pad, .groups = c->groups,
                        .act = act, .act_in = FT_ACT_NONE};
    ft_tensor *y = ft_dispatch(ctx, c->is2d ? FT_OP_CONV2D : FT_OP_CONV1D, src, 4, &p, sizeof p);
    char what[160];
    snprintf(what, sizeof what, "conv%dd b%lld cin%lld %lldx%lld cout%lld k%lld s%d p%d g%d act %d res %d threads %d",
             c->is2d ? 2 : 1, (long long)c->b, (long long)c->cin, (long long)c->h, (long long)c->w,
             (long long)c->cout, (long long)c->k, c->stride, c->pad, c->groups, act, with_res, threads);
    int bad = cmp(y, ref, n, 2e-4, what) != 0;
    if (y) {
        /* the plan's packing: per group since this change (grouped weights were
         * packed per call before) */
        bool packed = ft_cpu_conv_prepack(ctx, y);
        CHECK(packed, "%s: the weight was not prepacked", what);
        float *yd = y->data, *wd = src[1]->data;
        for (int64_t i = 0; i < n; i++) yd[i] = 1e30f; /* stale output must not leak through */
        /* the panels, not the weight tensor, are what the kernel multiplies now */
        for (int64_t i = 0; packed && i < c->cout * cin_g * kh * c->k; i++) wd[i] = NAN;
        int st = c->is2d ? ft_cpu_conv2d(ctx, y) : ft_cpu_conv1d(ctx, y);
        CHECK(st == FT_OK, "%s prepacked: %s", what, ft_ctx_errmsg(ctx));
        char w2[180];
        snprintf(w2, sizeof w2, "%s prepacked", what);
        bad += cmp(y, ref, n, 2e-4, w2) != 0;
        ft_cpu_unpack(y);
    }
    free(x);
    free(w);
    free(bias);
    free(res);
    free(ref);
    ft_ctx_reset(ctx);
    ctx->cpu_threads = 0;
    return bad;
}

/* Every combination that matters of kernel, stride, padding, groups, 1D/2D and
 * batch on small odd shapes (cout 13 per group, output widths 5..37). */
static void test_conv_sweep(void) {
    static const int ks[] = {1, 3, 7}, strides[] = {1, 2}, pads[] = {0, 1, 3}, groups[] = {1, 2, 3};
    int cases = 0, bad = 0;
    for (int d = 0; d < 2; d++)
        for (size_t ki = 0; ki < 3; ki++)
            for (size_t si = 0; si < 2; si++)
                for (size_t pi = 0; pi < 3; pi++)
                    for (size_t gi = 0; gi < 3; gi++)
                        for (int64_t b = 1; b <= 3; b += 2) {
                            int g = groups[gi];
                            cc c = {b, 2 * g + (g == 1 ? 3 : 0), d ? 11 : 1, d ? 19 : 37, 13 * g,
                                    ks[ki], strides[si], pads[pi], g, d == 1};
                            int v = cases++;
                            bad += run_case(&c, 1 + v % 2, v % 3 == 0 ? FT_ACT_RELU : FT_ACT_NONE, v % 4 == 1);
                        }
    CHECK(bad == 0, "%d of %d sweep cases differ", bad, cases);
}

/* Products large enough for the 2-thread splits: columns split (the batch is
 * one product, tiles straddle images), rows split (one column tile: a 4x4
 * output), groups one per thread, the stem-like 7x7 stride 2, WavLM's grouped
 * positional conv shape (scaled down), each with 1 and 2 threads. */
static void test_conv_threads(void) {
    static const cc big[] = {
        {3, 40, 15, 23, 70, 3, 1, 1, 1, true},   /* N = 3 x 345 */
        {1, 64, 4, 4, 100, 3, 1, 1, 1, true},    /* N = 16: split by rows */
        {2, 3, 45, 45, 20, 7, 2, 3, 1, true},    /* the stem */
        {2, 96, 9, 9, 200, 1, 2, 0, 1, true},    /* strided 1x1 */
        {1, 48, 1, 75, 48, 32, 1, 16, 4, false}, /* grouped positional conv */
        {3, 30, 1, 101, 34, 3, 2, 0, 2, false},  /* feature-extractor-like, 2 groups */
        {2, 1, 1, 403, 20, 10, 5, 0, 1, false},  /* WavLM's first layer: 1 channel, stride 5 */
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        for (int th = 1; th <= 2; th++) run_case(&big[i], th, i % 2 ? FT_ACT_RELU : FT_ACT_GELU, i % 3 == 2);
}

/* ResNet's max pooling (between the stem and the first stage), whose f32 path
 * takes a branch-free max on the columns whose windows lie inside the input:
 * windows cut by the padding on every side, output rows wider than a vector,
 * NaNs that must win, against a scalar reference (exact: a max rounds nothing). */
static void test_maxpool_f32(void) {
    static const int cfg[][3] = {{3, 2, 1}, {2, 2, 0}, {3, 1, 1}, {5, 3, 2}, {1, 1, 0}};
    const int64_t pl = 6, h = 13, w = 37;
    float *x = rvals(pl * h * w, FT_DTYPE_F32);
    for (int64_t i = 0; i < pl * h * w; i += 97) x[i] = NAN;
    int64_t xs[4] = {2, 3, h, w};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        int k = cfg[c][0], st = cfg[c][1], pd = cfg[c][2];
        int64_t ho = (h + 2 * pd - k) / st + 1, wo = (w + 2 * pd - k) / st + 1;
        ft_tensor *y = ft_maxpool2d(ctx, ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, xs, x), k, st, pd);
        CHECK(y != NULL, "maxpool2d k%d s%d p%d: %s", k, st, pd, ft_ctx_errmsg(ctx));
        if (!y) continue;
        float *got = malloc((size_t)(pl * ho * wo) * sizeof(float));
        CHECK_OK(ctx, ft_tensor_to_host(ctx, y, FT_DTYPE_F32, got, (size_t)(pl * ho * wo) * sizeof(float)));
        int bad = 0;
        for (int64_t p = 0; p < pl; p++)
            for (int64_t oy = 0; oy < ho; oy++)
                for (int64_t ox = 0; ox < wo; ox++) {
                    float m = -INFINITY;
                    for (int a = 0; a < k; a++)
                        for (int bq = 0; bq < k; bq++) {
                            int64_t iy = oy * st - pd + a, ix = ox * st - pd + bq;
                            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                            float v = x[(p * h + iy) * w + ix];
                            if (v > m || v != v) m = v;
                        }
                    float g = got[(p * ho + oy) * wo + ox];
                    if (!(g == m || (g != g && m != m)) && !bad++)
                        CHECK(0, "maxpool2d k%d s%d p%d [%lld,%lld,%lld] = %g, expected %g", k, st, pd,
                              (long long)p, (long long)oy, (long long)ox, g, m);
                }
        free(got);
        ft_ctx_reset(ctx);
    }
    free(x);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)ft_test_golden_dir;
    (void)odd;
    (void)dtypes;
    if (gemm_test_select() != 0) return 1; /* before anything packs or multiplies */
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) {
        printf("cannot create a CPU context\n");
        return 1;
    }
    RUN(test_conv_sweep);
    RUN(test_conv_threads);
    RUN(test_maxpool_f32);
    if (!is_test_child()) {
        gemm_test_self = argv[0];
        RUN(test_other_kernels);
    }
    ft_ctx_free(ctx);
    return ft_test_finish();
}

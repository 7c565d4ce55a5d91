/*
 * test_vmath_cpu.c - the vectorised float math of the CPU backend
 * (kernels/cpu/vmath.h through the row primitives of kernels/cpu/vrow.c, i.e.
 * the clone the CPU runs) against double-precision libm over dense grids:
 * exp (via softmax) within 3 ulp, tanh/sigmoid/tanh-GELU within 4e-7 relative, erf-GELU
 * within 8e-7 (both times the GELU's conditioning for negative x) (plus 1e-30
 * absolute for values in the subnormal range), softmax and the row norm against
 * double formulas, NaN/inf at the limits, and every row length 1..67 so the
 * vector tails are covered.
 */
#include "ft_test.h"

#include "../kernels/cpu/vrow.h"

#include <math.h>

#define NGRID 200001

static float *grid(float lo, float hi, int n) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)i / (float)(n - 1);
    return x;
}

static double ref_act(int act, double x) {
    switch (act) {
    case FT_ACT_GELU: return 0.5 * x * erfc(-x * 0.70710678118654752440);
    /* x/2 (1 + tanh u) as x / (1 + e^-2u): the same in exact arithmetic, no cancellation in double */
    case FT_ACT_GELU_TANH: return x / (1.0 + exp(-2.0 * 0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    case FT_ACT_TANH: return tanh(x);
    case FT_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case FT_ACT_RELU: return x > 0 || x != x ? x : 0.0;
    default: return x;
    }
}

/* max relative error of act over [lo, hi], in units of the error bound: 4e-7
 * relative times the condition of the exp argument for the GELUs (an ulp of x
 * moves x Phi(x) by ~x^2/2 ulps for negative x: no float formula does better) */
static double act_err(int act, float lo, float hi) {
    float *x = grid(lo, hi, NGRID), *y = malloc(sizeof(float) * NGRID);
    memcpy(y, x, sizeof(float) * NGRID);
    ft_cpu_row_act(act, y, NGRID);
    double worst = 0;
    for (int i = 0; i < NGRID; i++) {
        double r = ref_act(act, x[i]), e = fabs(y[i] - r);
        if (fabs(r) < 1e-30) continue; /* subnormal results: absolute below */
        double cond = act == FT_ACT_GELU || act == FT_ACT_GELU_TANH ? fmax(1.0, x[i] * (double)x[i] / 2) : 1.0;
        if (e / fabs(r) / cond > worst) worst = e / fabs(r) / cond;
    }
    free(x);
    free(y);
    return worst;
}

static void test_activations(void) {
    static const char *names[6] = {"none", "gelu", "gelu_tanh", "relu", "tanh", "sigmoid"};
    for (int act = FT_ACT_GELU; act <= FT_ACT_SIGMOID; act++) {
        /* the GELUs: where x Phi(x) is representable and not subnormal */
        float lo = act == FT_ACT_GELU ? -12.0f : act == FT_ACT_GELU_TANH ? -9.0f : -30.0f;
        double e = act_err(act, lo, 30.0f);
        double e0 = act_err(act, -1.0f, 1.0f);
        printf("  %-9s max rel err / cond %.3g (|x|<1: %.3g)\n", names[act], e, e0);
        double bound = act == FT_ACT_GELU ? 8e-7 : 4e-7; /* erfc's exp(-a^2) rounds a^2 */
        CHECK(e <= bound && e0 <= bound, "%s: relative error %.3g / %.3g", names[act], e, e0);
    }
}

static void test_exp_softmax(void) {
    /* exp through a 2-element softmax: [x, 0] gives e^x / (e^x + 1) */
    float *x = grid(-87.0f, 87.0f, NGRID);
    double worst = 0;
    for (int i = 0; i < NGRID; i += 7) {
        float s[2] = {x[i], 0.0f};
        ft_cpu_row_softmax(s, 2);
        double r = 1.0 / (1.0 + exp(-(double)x[i]));
        double e = fabs(s[0] - r) / r;
        if (r > 1e-30 && e > worst) worst = e;
    }
    printf("  softmax2 max rel err %.3g\n", worst);
    CHECK(worst <= 5e-7, "2-way softmax: relative error %.3g", worst);
    free(x);
    /* every length 1..67 (vector bodies and tails), against a double softmax */
    for (int n = 1; n <= 67; n++) {
        float s[67];
        double ref[67], mx = -INFINITY, sum = 0;
        for (int j = 0; j < n; j++) {
            s[j] = (float)sin(j * 1.7 + n) * 9.0f;
            if (s[j] > mx) mx = s[j];
        }
        for (int j = 0; j < n; j++) sum += (ref[j] = exp(s[j] - mx));
        ft_cpu_row_softmax(s, n);
        for (int j = 0; j < n; j++)
            CHECK(fabs(s[j] - ref[j] / sum) <= 1e-7 + 5e-7 * ref[j] / sum, "softmax n=%d [%d]: %.9g vs %.9g", n, j,
                  s[j], ref[j] / sum);
    }
    /* NaN or +inf anywhere, or all -inf: a row of NaN; -inf entries alone give 0 */
    float a[19], b[19], c[19], d[19];
    for (int j = 0; j < 19; j++) a[j] = b[j] = c[j] = d[j] = (float)j;
    a[17] = NAN;
    b[3] = INFINITY;
    for (int j = 0; j < 19; j++) c[j] = -INFINITY;
    d[5] = -INFINITY;
    ft_cpu_row_softmax(a, 19);
    ft_cpu_row_softmax(b, 19);
    ft_cpu_row_softmax(c, 19);
    ft_cpu_row_softmax(d, 19);
    for (int j = 0; j < 19; j++) {
        CHECK(isnan(a[j]) && isnan(b[j]) && isnan(c[j]), "softmax nan/inf row [%d]: %g %g %g", j, a[j], b[j], c[j]);
        CHECK(j == 5 ? d[j] == 0.0f : d[j] > 0.0f, "softmax with one -inf [%d] = %g", j, d[j]);
    }
}

static void test_limits(void) {
    float v[6] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-30f};
    for (int act = FT_ACT_GELU; act <= FT_ACT_SIGMOID; act++) {
        float y[6];
        memcpy(y, v, sizeof y);
        ft_cpu_row_act(act, y, 6);
        for (int i = 0; i < 6; i++) {
            double r = ref_act(act, v[i]);
            int ok = isnan(r) ? isnan(y[i]) : (y[i] == (float)r || fabs(y[i] - r) <= 4e-7 * fabs(r));
            CHECK(ok, "act %d of %g: %g, expected %g", act, v[i], y[i], r);
        }
    }
    /* relu keeps NaN (torch.relu) */
    float r[2] = {NAN, -3.0f};
    ft_cpu_row_act(FT_ACT_RELU, r, 2);
    CHECK(isnan(r[0]) && r[1] == 0.0f, "relu: %g %g", r[0], r[1]);
}

static void test_norm_rows(void) {
    /* a large DC offset, every length 1..67 and one long row */
    for (int n = 1; n <= 80; n += (n < 67 ? 1 : 13)) {
        float h[80], g[80], b[80];
        double ref[80], s = 0, ss = 0;
        for (int j = 0; j < n; j++) {
            h[j] = 1000.0f + (float)cos(j * 0.9 + n);
            g[j] = 0.5f + 0.01f * (float)j;
            b[j] = -0.25f + 0.003f * (float)j;
            s += h[j];
        }
        double mean = s / n;
        for (int j = 0; j < n; j++) ss += (h[j] - mean) * (h[j] - mean);
        double rstd = 1.0 / sqrt(ss / n + 1e-12);
        for (int j = 0; j < n; j++) ref[j] = (h[j] - mean) * rstd * g[j] + b[j];
        ft_cpu_row_norm(h, n, 1e-12, g, b);
        for (int j = 0; j < n; j++)
            CHECK(fabs(h[j] - ref[j]) <= 2e-6 + 2e-6 * fabs(ref[j]), "norm n=%d [%d]: %.9g vs %.9g", n, j, h[j],
                  ref[j]);
    }
}

static void test_loads_stores(void) {
    /* f16/bf16 through the row loads/stores = the engine's scalar conversions */
    uint16_t h[4096], back[4096];
    float f[4096];
    for (int i = 0; i < 4096; i++) h[i] = (uint16_t)(i * 16 + (i & 15));
    for (int t = 0; t < 2; t++) {
        ft_dtype dt = t ? FT_DTYPE_BF16 : FT_DTYPE_F16;
        ft_cpu_row_load(h, dt, 0, 1, 4096, f);
        int bad = 0;
        for (int i = 0; i < 4096; i++) {
            float r = t ? ft_bf16_to_f32(h[i]) : ft_f16_to_f32(h[i]);
            if (!(r == f[i] || (isnan(r) && isnan(f[i])))) bad++;
        }
        CHECK(!bad, "%s load: %d mismatches", ft_dtype_name(dt), bad);
        for (int i = 0; i < 4096; i++) f[i] = (float)sin(i) * powf(2.0f, (float)(i % 40 - 20));
        f[7] = NAN;
        ft_cpu_row_store(back, dt, 0, 4096, f);
        bad = 0;
        for (int i = 0; i < 4096; i++) bad += back[i] != (t ? ft_f32_to_bf16(f[i]) : ft_f32_to_f16(f[i]));
        CHECK(!bad, "%s store: %d mismatches", ft_dtype_name(dt), bad);
    }
    /* strided and broadcast f32 */
    float src[30], out[10];
    for (int i = 0; i < 30; i++) src[i] = (float)i;
    ft_cpu_row_load(src, FT_DTYPE_F32, 1, 3, 10, out);
    for (int i = 0; i < 10; i++) CHECK(out[i] == 1.0f + 3.0f * i, "strided load [%d] = %g", i, out[i]);
    ft_cpu_row_load(src, FT_DTYPE_F32, 4, 0, 10, out);
    for (int i = 0; i < 10; i++) CHECK(out[i] == 4.0f, "broadcast load [%d] = %g", i, out[i]);
}

int main(void) {
    RUN(test_activations);
    RUN(test_exp_softmax);
    RUN(test_limits);
    RUN(test_norm_rows);
    RUN(test_loads_stores);
    return ft_test_finish();
}

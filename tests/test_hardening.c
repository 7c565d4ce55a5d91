/*
 * test_hardening.c - the library's answers to hostile numbers and files
 * (issue 13): sizes whose products overflow, attention masks holding values
 * other than 0 and 1, NaN and Inf through every fused pattern, FIFOs given as
 * model or input files, a context's OpenMP thread count used from other
 * threads, and I64 inputs read from unaligned memory. Every model, every mode,
 * on the CPU and on CUDA (the *_cuda tests; the host emulator in `make test`).
 *
 * UBSan and ASan (make SANITIZE=1): the defaults below make undefined
 * behaviour stop the program (so a misaligned load or a signed overflow fails
 * the run instead of printing a line), and let malloc return NULL for sizes
 * ASan refuses (a refused huge size must end in FT_ERR_OOM, as in a plain build).
 */
#include "ft_test.h"
#include "ft_golden.h"

#include "../engine/ft_checked.h"
#include "../kernels/cpu/cpu_kernels.h"
#include "../models/model.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>

const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

static const char *const cases[] = {"bert", "funnel", "mobilebert", "resnet", "wavlm"};
#define N_CASES (int)(sizeof cases / sizeof cases[0])
static const ft_mode modes[] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};

static bool have_cuda(void) {
    if (ft_cuda_device_count() > 0) return true;
    SKIP("no CUDA device");
    return false;
}

static ft_model *load(ft_ctx *ctx, const char *path, ft_mode mode) {
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    ft_model *m = NULL;
    if (ft_model_load(ctx, path, &o, &m) != FT_OK) {
        CHECK(0, "loading %s (%s): %s", path, ft_mode_name(mode), ft_ctx_errmsg(ctx));
        return NULL;
    }
    return m;
}

/* ---- 1. sizes ---- */

#define P2(k) ((int64_t)1 << (k))

/* shapes whose element count or byte size is past what a tensor may hold */
static const struct {
    int ndim;
    int64_t shape[4];
} huge[] = {
    {2, {P2(62), 4}},            /* 2^64 elements: wraps to 0 */
    {2, {INT64_MAX, 2}},         /* wraps to -2 */
    {3, {P2(31), P2(31), 4}},    /* 2^64 */
    {4, {64, 3, 536870912, 536870912}}, /* the CLI's --batch 64 --seq 536870912 */
    {2, {P2(61), 1}},            /* fits int64 as a count, 2^64 bytes at 8 each */
    {2, {P2(45), 3}},            /* 2^46.6 elements: past 2^48 bytes at 4 or 8 each */
    {1, {INT64_MAX}},
};
#define N_HUGE (int)(sizeof huge / sizeof huge[0])

static void sizes_tensor_api(ft_device dev) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(dev, &ctx));
    if (!ctx) return;
    static char small[64];
    for (int i = 0; i < N_HUGE; i++) {
        for (int k = 0; k < 2; k++) {
            ft_tensor *t = k ? ft_tensor_from_host(ctx, FT_DTYPE_I64, huge[i].ndim, huge[i].shape, small)
                             : ft_tensor_empty(ctx, FT_DTYPE_F32, huge[i].ndim, huge[i].shape);
            CHECK(!t && ft_ctx_status(ctx) == FT_ERR_SHAPE && strstr(ft_ctx_errmsg(ctx), "too large"),
                  "shape %d (%s): status %s, '%s'", i, k ? "from_host" : "empty",
                  ft_status_str(ft_ctx_status(ctx)), ft_ctx_errmsg(ctx));
            ft_ctx_clear_error(ctx);
        }
    }
    /* an op whose output would pass the limit: a broadcast view of 2^40 x 2^20 elements
     * (no storage) made contiguous */
    ft_tensor *one = ft_tensor_empty(ctx, FT_DTYPE_F32, 2, FT_SHAPE(1, 1));
    ft_tensor *big = ft_expand(ctx, one, 2, FT_SHAPE(P2(40), P2(20)));
    ft_tensor *c = ft_contiguous(ctx, big);
    CHECK(one && big && !c && ft_ctx_status(ctx) == FT_ERR_SHAPE && strstr(ft_ctx_errmsg(ctx), "too large"),
          "contiguous of a 2^60-element view: %s '%s'", ft_status_str(ft_ctx_status(ctx)), ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    ft_ctx_free(ctx);
}

static void test_sizes_tensor_api_cpu(void) { sizes_tensor_api(FT_DEVICE_CPU); }
static void test_sizes_tensor_api_cuda(void) {
    if (have_cuda()) sizes_tensor_api(FT_DEVICE_CUDA);
}

/* Every model's first input with a huge shape: refused before anything is read. */
static void sizes_model_inputs(ft_device dev) {
    static char small[64];
    for (int c = 0; c < N_CASES; c++) {
        for (int mi = 0; mi < 3; mi++) {
            ft_ctx *ctx = NULL;
            golden_case g;
            if (golden_open_on(dev, cases[c], &ctx, &g)) return;
            char path[600];
            snprintf(path, sizeof path, "%s", g.dir);
            ft_model *m = load(ctx, path, modes[mi]);
            /* the model's main input alone (the others are optional) */
            int pi = 0;
            for (int k = 0; k < g.n_in; k++)
                if (!strcmp(g.in[k].name, "input_ids")) pi = k;
            for (int i = 0; m && i < N_HUGE; i++) {
                ft_host_tensor in = g.in[pi];
                in.ndim = huge[i].ndim;
                memcpy(in.shape, huge[i].shape, sizeof huge[i].shape);
                in.data = small;
                ft_status st = ft_model_forward(m, &in, 1);
                CHECK(st == FT_ERR_SHAPE && strstr(ft_ctx_errmsg(ctx), "too large") &&
                          strstr(ft_ctx_errmsg(ctx), in.name),
                      "%s %s input %s shape %d: %s '%s'", cases[c], ft_mode_name(modes[mi]), in.name, i,
                      ft_status_str(st), ft_ctx_errmsg(ctx));
                ft_ctx_clear_error(ctx);
            }
            /* and the model still runs its real inputs */
            if (m) CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
            ft_model_free(m);
            golden_close(&g);
            ft_ctx_free(ctx);
        }
    }
}

static void test_sizes_model_inputs_cpu(void) { sizes_model_inputs(FT_DEVICE_CPU); }
static void test_sizes_model_inputs_cuda(void) {
    if (have_cuda()) sizes_model_inputs(FT_DEVICE_CUDA);
}

/* ft_model_example_inputs and ft_model_macs with batch x length products near and
 * past INT64_MAX and SIZE_MAX: FT_ERR_SHAPE (too large) or FT_ERR_OOM (a size
 * that fits but that no machine holds), never a crash or a wrapped size. */
static void test_sizes_example_inputs(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    static const int64_t bl[][2] = {
        {64, 536870912}, {INT64_MAX, 2}, {2, INT64_MAX}, {P2(32), P2(32)}, {P2(31), P2(31)},
        {P2(22), P2(23)},     /* 2^45 ids x 8 bytes: exactly 2^48 bytes, allowed, then OOM */
        {P2(22), P2(23) + 1}, /* one past */
        {INT64_MAX, INT64_MAX}, {3, (int64_t)(SIZE_MAX / 12)},
    };
    for (int c = 0; c < N_CASES; c++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", ft_test_golden_dir(), cases[c]);
        ft_model *m = load(ctx, path, FT_MODE_EAGER);
        for (size_t i = 0; m && i < sizeof bl / sizeof bl[0]; i++) {
            ft_host_tensor in[8];
            int n = 0;
            void *owned = NULL;
            ft_status st = ft_model_example_inputs(m, bl[i][0], bl[i][1], in, &n, &owned);
            free(owned);
            bool short_audio = st == FT_ERR_INVALID_ARG && strstr(ft_ctx_errmsg(ctx), "fewer than"); /* wavlm, 2 samples */
            bool too_long = st == FT_ERR_SHAPE && strstr(ft_ctx_errmsg(ctx), "exceeds max_position_embeddings");
            CHECK((st == FT_ERR_SHAPE && strstr(ft_ctx_errmsg(ctx), "too large")) || st == FT_ERR_OOM || short_audio ||
                      too_long,
                  "%s example inputs %lld x %lld: %s '%s'", cases[c], (long long)bl[i][0], (long long)bl[i][1],
                  ft_status_str(st), ft_ctx_errmsg(ctx));
            ft_ctx_clear_error(ctx);
            int64_t macs = -1;
            st = ft_model_macs(m, bl[i][0], bl[i][1], &macs);
            CHECK(st == FT_ERR_SHAPE || st == FT_ERR_OOM || short_audio || too_long, "%s macs %lld x %lld: %s '%s'", cases[c],
                  (long long)bl[i][0], (long long)bl[i][1], ft_status_str(st), ft_ctx_errmsg(ctx));
            ft_ctx_clear_error(ctx);
        }
        if (m && !strcmp(cases[c], "resnet")) {
            ft_host_tensor in[8];
            int n = 0;
            void *owned = NULL;
            ft_status st = ft_model_example_inputs(m, 64, 536870912, in, &n, &owned);
            free(owned);
            CHECK(st == FT_ERR_SHAPE && !strcmp(ft_ctx_errmsg(ctx), "batch 64 x 3 x 536870912x536870912 pixels is too large"),
                  "resnet 64 x 536870912: '%s'", ft_ctx_errmsg(ctx));
            ft_ctx_clear_error(ctx);
        }
        /* a normal size still works after the refusals */
        int64_t macs = 0;
        if (m) CHECK_OK(ctx, ft_model_macs(m, 1, 0, &macs));
        ft_model_free(m);
    }
    ft_ctx_free(ctx);
}

/* the checked helpers themselves, at the edges */
static void test_sizes_checked_helpers(void) {
    int64_t r;
    size_t b;
    CHECK(ft_mul_ok(P2(31), P2(31), &r) && r == P2(62), "2^31 * 2^31");
    CHECK(!ft_mul_ok(P2(32), P2(31), &r) && r == INT64_MAX, "2^63 overflows");
    CHECK(!ft_mul_ok(-1, 5, &r), "negative factor");
    CHECK(!ft_add_ok(INT64_MAX, 1, &r), "INT64_MAX + 1");
    CHECK(ft_bytes_ok(P2(46), 4, &b) && b == (size_t)P2(48), "2^48 bytes allowed");
    CHECK(!ft_bytes_ok(P2(46) + 1, 4, &b) && b == SIZE_MAX, "past 2^48 bytes");
    CHECK(!ft_shape_numel_ok(2, FT_SHAPE(P2(62), 4), 0, &r), "[2^62, 4]");
    CHECK(ft_shape_numel_ok(2, FT_SHAPE(0, INT64_MAX), 4, &r) && r == 0, "an empty dim");
}

/* ---- 2. attention masks ---- */

static float hf_mask(float m, float min_value) {
    volatile float d = 1.0f - m; /* HF: (1.0 - m) then * min, two f32 roundings */
    return d * min_value;
}

/* ft_additive_mask equals HF's formula bit for bit, on each device and in a traced plan */
static void mask_formula(ft_device dev) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(dev, &ctx));
    if (!ctx) return;
    const float vals[] = {0.0f, 1.0f, 2.0f, 0.5f, 1.5f, 0.25f, 0.3f, 1.75f, 0.999f, 1e-8f, 1.9999999f};
    const int n = (int)(sizeof vals / sizeof vals[0]);
    const float mins[] = {FT_F32_MIN, -1e6f};
    for (int k = 0; k < 2; k++) {
        ft_tensor *m = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, FT_SHAPE(1, n), vals);
        ft_tensor *a = ft_additive_mask(ctx, m, mins[k]);
        float got[16];
        CHECK(a && ft_tensor_dim(a, 3) == n, "mask shape");
        if (a) CHECK_OK(ctx, ft_tensor_to_host(ctx, a, FT_DTYPE_F32, got, sizeof got));
        for (int i = 0; a && i < n; i++) {
            float want = hf_mask(vals[i], mins[k]);
            CHECK(memcmp(&got[i], &want, 4) == 0 && isfinite(got[i]), "m=%g min=%g: got %a want %a", vals[i],
                  mins[k], got[i], want);
        }
    }
    ft_ctx_free(ctx);
}

static void test_mask_formula_cpu(void) { mask_formula(FT_DEVICE_CPU); }
static void test_mask_formula_cuda(void) {
    if (have_cuda()) mask_formula(FT_DEVICE_CUDA);
}

/* Output i of model m, as f32 on the host (malloc'd); n gets its count. */
static float *output_f32(ft_ctx *ctx, ft_model *m, const char *name, int64_t *n) {
    ft_tensor *t = ft_model_output_find(m, name);
    *n = t ? ft_tensor_numel(t) : 0;
    if (!t) return NULL;
    float *p = malloc((size_t)*n * sizeof *p);
    if (p && ft_tensor_to_host(ctx, t, FT_DTYPE_F32, p, (size_t)*n * sizeof *p) != FT_OK) {
        free(p);
        return NULL;
    }
    return p;
}

/* Forward of case g with input `name` replaced by `repl` (when non-NULL); the
 * first output as f32 (NULL, with the status in *st, when the forward fails). */
static float *forward_with(ft_ctx *ctx, ft_model *m, golden_case *g, const ft_host_tensor *repl, const char *out,
                           int64_t *n, ft_status *st) {
    ft_host_tensor in[8];
    for (int i = 0; i < g->n_in; i++) in[i] = repl && !strcmp(g->in[i].name, repl->name) ? *repl : g->in[i];
    *st = ft_model_forward(m, in, g->n_in);
    if (*st != FT_OK) return NULL;
    return output_f32(ctx, m, out, n);
}

static int count_nonfinite(const float *p, int64_t n) {
    int k = 0;
    for (int64_t i = 0; i < n; i++) k += !isfinite(p[i]);
    return k;
}

/* mask values other than 0/1 in every text model and mode: finite outputs, eager ==
 * graph == static; values where HF's formula overflows refused with a message */
static void masks_models(ft_device dev) {
    const char *text[] = {"bert", "mobilebert", "funnel"};
    for (int c = 0; c < 3; c++) {
        /* accepted values (HF-finite), spread over the keys of both rows */
        const float ok_vals[][4] = {{2.0f, 1.0f, 0.0f, 2.0f}, {0.5f, 1.0f, 0.5f, 0.0f}, {1.5f, 0.25f, 2.0f, 1.0f}};
        float *ref[3] = {NULL, NULL, NULL};
        int64_t nref = 0;
        for (int mi = 0; mi < 3; mi++) {
            ft_ctx *ctx = NULL;
            golden_case g;
            if (golden_open_on(dev, text[c], &ctx, &g)) return;
            ft_model *m = load(ctx, g.dir, modes[mi]);
            float mask[2 * 16];
            ft_host_tensor mt = {"attention_mask", FT_DTYPE_F32, 2, {2, 16}, mask};
            for (int v = 0; m && v < 3; v++) {
                for (int i = 0; i < 32; i++) mask[i] = ok_vals[v][i % 4];
                mask[0] = 1.0f;
                int64_t n = 0;
                ft_status st;
                float *o = forward_with(ctx, m, &g, &mt, "last_hidden_state", &n, &st);
                CHECK(o && count_nonfinite(o, n) == 0, "%s %s mask set %d: %s, %d non-finite", text[c],
                      ft_mode_name(modes[mi]), v, o ? "ran" : ft_ctx_errmsg(ctx), o ? count_nonfinite(o, n) : -1);
                if (o && v == 1 && strcmp(text[c], "funnel")) {
                    /* HF's formula: 0.5 * finfo.min is as good as finfo.min wherever a row keeps
                     * a key, so set 1 must give what the same mask with 0 for 0.5 gives (the 0/1
                     * path the golden cases check against HF) */
                    float m01[32];
                    for (int i = 0; i < 32; i++) m01[i] = mask[i] == 0.5f ? 0.0f : mask[i];
                    ft_host_tensor t01 = mt;
                    t01.data = m01;
                    int64_t n01 = 0;
                    float *r01 = forward_with(ctx, m, &g, &t01, "last_hidden_state", &n01, &st);
                    double worst = 0;
                    for (int64_t i = 0; r01 && n01 == n && i < n; i++) {
                        double d = fabs((double)o[i] - r01[i]);
                        if (d > worst) worst = d;
                    }
                    CHECK(r01 && n01 == n && worst <= 1e-5, "%s %s: mask 0.5 differs from mask 0 by %g",
                          text[c], ft_mode_name(modes[mi]), worst);
                    free(r01);
                }
                if (o && mi == 0) {
                    if (v == 0) nref = n;
                    free(ref[v]);
                    ref[v] = o;
                    o = NULL;
                } else if (o && ref[v] && n == nref) {
                    /* Funnel adds HF's +-1e6 (INF * (1 - m)) to its logits, where f32 keeps 1/16:
                     * a key raised by m = 2, or a pooled row left with masked keys only, has its
                     * logit rounded there, and graph mode sums the score terms in another order
                     * than eager (bias + mask first): the two agree to ~1e-2, not 1e-4 */
                    double tol = !strcmp(text[c], "funnel") ? 1e-1 : 1e-4;
                    double worst = 0;
                    for (int64_t i = 0; i < n; i++) {
                        double d = fabs((double)o[i] - ref[v][i]) / (tol + tol * fabs(ref[v][i]));
                        if (d > worst) worst = d;
                    }
                    CHECK(worst <= 1.0, "%s %s mask set %d differs from eager (%.2f x the tolerance %g)", text[c],
                          ft_mode_name(modes[mi]), v, worst, tol);
                }
                free(o);
                ft_ctx_clear_error(ctx);
            }
            /* refused values: where (1 - m) * min is not finite in f32 */
            bool funnel = !strcmp(text[c], "funnel");
            const float bad[] = {funnel ? 1e33f : -1.0f, funnel ? -1e33f : 1e30f, funnel ? 1e38f : 2.5f, NAN,
                                 INFINITY};
            for (int b = 0; m && b < 5; b++) {
                for (int i = 0; i < 32; i++) mask[i] = 1.0f;
                mask[21] = bad[b];
                int64_t n;
                ft_status st;
                float *o = forward_with(ctx, m, &g, &mt, "last_hidden_state", &n, &st);
                CHECK(!o && st == FT_ERR_INVALID_ARG && strstr(ft_ctx_errmsg(ctx), "attention_mask") &&
                          strstr(ft_ctx_errmsg(ctx), "[1, 5]") && strstr(ft_ctx_errmsg(ctx), "not finite"),
                      "%s %s mask value %g: %s '%s'", text[c], ft_mode_name(modes[mi]), bad[b], ft_status_str(st),
                      ft_ctx_errmsg(ctx));
                free(o);
                ft_ctx_clear_error(ctx);
            }
            if (funnel && m) { /* HF-finite for Funnel's INF = 1e6: accepted */
                for (int i = 0; i < 32; i++) mask[i] = 1.0f;
                mask[21] = -1.0f;
                mask[22] = 1e30f;
                int64_t n;
                ft_status st;
                float *o = forward_with(ctx, m, &g, &mt, "last_hidden_state", &n, &st);
                CHECK(o && count_nonfinite(o, n) == 0, "funnel mask -1 / 1e30: %s", ft_ctx_errmsg(ctx));
                free(o);
                ft_ctx_clear_error(ctx);
            }
            ft_model_free(m);
            golden_close(&g);
            ft_ctx_free(ctx);
        }
        for (int v = 0; v < 3; v++) free(ref[v]);
    }
    /* WavLM: an audio mask is 0 or 1; anything else is refused, in every mode */
    for (int mi = 0; mi < 3; mi++) {
        ft_ctx *ctx = NULL;
        golden_case g;
        if (golden_open_on(dev, "wavlm", &ctx, &g)) return;
        ft_model *m = load(ctx, g.dir, modes[mi]);
        int64_t S = g.in[0].shape[1];
        float *mask = malloc((size_t)(2 * S) * sizeof *mask);
        ft_host_tensor in[2] = {g.in[0], {"attention_mask", FT_DTYPE_F32, 2, {2, S}, mask}};
        const float vals[] = {2.0f, 0.5f, -1.0f, 1e30f, NAN};
        for (int v = 0; m && mask && v < 5; v++) {
            for (int64_t i = 0; i < 2 * S; i++) mask[i] = 1.0f;
            mask[S + 7] = vals[v];
            ft_status st = ft_model_forward(m, in, 2);
            CHECK(st == FT_ERR_INVALID_ARG && strstr(ft_ctx_errmsg(ctx), "[1, 7]"), "wavlm %s mask %g: %s '%s'",
                  ft_mode_name(modes[mi]), vals[v], ft_status_str(st), ft_ctx_errmsg(ctx));
            ft_ctx_clear_error(ctx);
        }
        free(mask);
        ft_model_free(m);
        golden_close(&g);
        ft_ctx_free(ctx);
    }
}

static void test_mask_values_cpu(void) { masks_models(FT_DEVICE_CPU); }
static void test_mask_values_cuda(void) {
    if (have_cuda()) masks_models(FT_DEVICE_CUDA);
}

/* DistilBERT shares BERT's formula: a random-init preset at 2 x 8 tokens */
static void test_mask_values_distilbert_cpu(void) {
    float *ref[2] = {NULL, NULL};
    int64_t nref = 0;
    for (int mi = 0; mi < 3; mi++) {
        ft_ctx *ctx = NULL;
        CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
        if (!ctx) return;
        ft_model *m = load(ctx, "distilbert-base", modes[mi]);
        int64_t ids[16];
        float mask[16];
        for (int i = 0; i < 16; i++) ids[i] = 100 + 37 * i;
        ft_host_tensor in[2] = {{"input_ids", FT_DTYPE_I64, 2, {2, 8}, ids},
                                {"attention_mask", FT_DTYPE_F32, 2, {2, 8}, mask}};
        const float sets[2][4] = {{2.0f, 1.0f, 0.0f, 1.0f}, {0.5f, 1.0f, 1.5f, 0.0f}};
        for (int v = 0; m && v < 2; v++) {
            for (int i = 0; i < 16; i++) mask[i] = sets[v][i % 4];
            CHECK_OK(ctx, ft_model_forward(m, in, 2));
            int64_t n = 0;
            float *o = output_f32(ctx, m, "last_hidden_state", &n);
            CHECK(o && count_nonfinite(o, n) == 0, "distilbert %s set %d", ft_mode_name(modes[mi]), v);
            if (o && mi == 0) {
                ref[v] = o;
                nref = n;
                o = NULL;
            } else if (o && ref[v] && n == nref) {
                double worst = 0;
                for (int64_t i = 0; i < n; i++) {
                    double d = fabs((double)o[i] - ref[v][i]) / (1e-4 + 1e-4 * fabs(ref[v][i]));
                    if (d > worst) worst = d;
                }
                CHECK(worst <= 1.0, "distilbert %s set %d differs from eager (%.2f x tol)", ft_mode_name(modes[mi]),
                      v, worst);
            }
            free(o);
        }
        mask[3] = -1.0f;
        if (m) {
            ft_status st = ft_model_forward(m, in, 2);
            CHECK(st == FT_ERR_INVALID_ARG && strstr(ft_ctx_errmsg(ctx), "not finite"), "distilbert -1: %s",
                  ft_ctx_errmsg(ctx));
        }
        ft_model_free(m);
        ft_ctx_free(ctx);
    }
    free(ref[0]);
    free(ref[1]);
}

/* ---- 3. NaN and Inf through the fused patterns ---- */

/* NaN/Inf at a few input positions: the positions of non-finite outputs in graph and
 * static mode are those of eager mode, for every output (ResNet: conv + BN + ReLU
 * epilogues, input prologues, residuals; WavLM: GELU epilogues, group norm, LN +
 * residual, attention, elementwise chains). */
static void nonfinite_models(ft_device dev) {
    const char *which[] = {"resnet", "wavlm"};
    const float poison[] = {NAN, INFINITY, -INFINITY};
    for (int c = 0; c < 2; c++) {
        for (int p = 0; p < 3; p++) {
            unsigned char *ref_mask[FT_MODEL_MAX_OUTPUTS] = {0};
            int64_t ref_n[FT_MODEL_MAX_OUTPUTS] = {0};
            int ref_bad = 0;
            for (int mi = 0; mi < 3; mi++) {
                ft_ctx *ctx = NULL;
                golden_case g;
                if (golden_open_on(dev, which[c], &ctx, &g)) return;
                ft_model *m = load(ctx, g.dir, modes[mi]);
                int64_t n = ft_host_numel(&g.in[0]);
                float *x = malloc((size_t)n * sizeof *x);
                if (!m || !x) {
                    free(x);
                    ft_model_free(m);
                    golden_close(&g);
                    ft_ctx_free(ctx);
                    continue;
                }
                memcpy(x, g.in[0].data, (size_t)n * sizeof *x);
                x[n / 3 + 17] = poison[p]; /* one pixel / sample of the first image, row 0 */
                if (!strcmp(which[c], "resnet")) x[n / 2 + 4 * 64 + 9] = poison[p]; /* and one in image 1 */
                ft_host_tensor in = g.in[0];
                in.data = x;
                CHECK_OK(ctx, ft_model_forward(m, &in, 1));
                int total_bad = 0;
                for (int o = 0; o < ft_model_output_count(m) && o < FT_MODEL_MAX_OUTPUTS; o++) {
                    int64_t k = 0;
                    float *v = output_f32(ctx, m, ft_model_output_name(m, o), &k);
                    if (!v) continue;
                    unsigned char *mk = malloc((size_t)(k ? k : 1));
                    for (int64_t i = 0; i < k; i++) mk[i] = isnan(v[i]) ? 1 : isinf(v[i]) ? (v[i] > 0 ? 2 : 3) : 0;
                    for (int64_t i = 0; i < k; i++) total_bad += mk[i] != 0;
                    if (mi == 0) {
                        ref_mask[o] = mk;
                        ref_n[o] = k;
                        mk = NULL;
                    } else if (ref_mask[o] && ref_n[o] == k) {
                        int64_t diff = 0, first = -1;
                        for (int64_t i = 0; i < k; i++)
                            if ((mk[i] != 0) != (ref_mask[o][i] != 0) || (mk[i] == 1) != (ref_mask[o][i] == 1)) {
                                diff++;
                                if (first < 0) first = i;
                            }
                        CHECK(diff == 0, "%s %s %g: output %s: %lld positions differ from eager in finiteness "
                              "(first at %lld)", which[c], ft_mode_name(modes[mi]), poison[p],
                              ft_model_output_name(m, o), (long long)diff, (long long)first);
                    }
                    free(mk);
                    free(v);
                }
                if (mi == 0) ref_bad = total_bad;
                else
                    CHECK(total_bad == ref_bad, "%s %s %g: %d non-finite values, eager %d", which[c],
                          ft_mode_name(modes[mi]), poison[p], total_bad, ref_bad);
                if (mi == 0) CHECK(total_bad > 0, "%s eager: the %g input reached no output", which[c], poison[p]);
                free(x);
                ft_model_free(m);
                golden_close(&g);
                ft_ctx_free(ctx);
            }
            for (int o = 0; o < FT_MODEL_MAX_OUTPUTS; o++) free(ref_mask[o]);
        }
    }
}

static void test_nonfinite_fused_cpu(void) { nonfinite_models(FT_DEVICE_CPU); }
static void test_nonfinite_fused_cuda(void) {
    if (have_cuda()) nonfinite_models(FT_DEVICE_CUDA);
}

/* the ReLU op on NaN and +-Inf: NaN stays NaN (torch.relu) */
static void relu_ops(ft_device dev) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(dev, &ctx));
    if (!ctx) return;
    float x[8] = {NAN, -NAN, INFINITY, -INFINITY, -1.0f, 2.0f, 0.0f, -0.0f};
    ft_tensor *xt = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, FT_SHAPE(1, 8), x);
    ft_tensor *r = ft_relu(ctx, xt);
    float got[8];
    if (r) CHECK_OK(ctx, ft_tensor_to_host(ctx, r, FT_DTYPE_F32, got, sizeof got));
    for (int i = 0; r && i < 8; i++) {
        float want = isnan(x[i]) ? x[i] : x[i] > 0 ? x[i] : 0.0f;
        CHECK(isnan(want) ? isnan(got[i]) : got[i] == want, "relu(%g) = %g", x[i], got[i]);
    }
    ft_ctx_free(ctx);
}

static void test_relu_nan_cpu(void) { relu_ops(FT_DEVICE_CPU); }
static void test_relu_nan_cuda(void) {
    if (have_cuda()) relu_ops(FT_DEVICE_CUDA);
}

/* ---- 4. special files ---- */

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "  FAIL test_fifo_loaders: a loader blocked on a FIFO for 20 s\n";
    if (write(1, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

static void test_fifo_loaders(void) {
    ft_test_tmpdir_make("fifo");
    if (!tmpdir[0]) {
        CHECK(0, "no temp dir");
        return;
    }
    signal(SIGALRM, on_alarm);
    alarm(20); /* a regression hangs in open(): fail instead */
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    char fifo[400], dir[400], path[500];
    snprintf(fifo, sizeof fifo, "%s/in.safetensors", tmpdir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    ft_st_file *f = NULL;
    ft_status st = ft_st_open(ctx, fifo, &f);
    CHECK(st == FT_ERR_IO && strstr(ft_ctx_errmsg(ctx), "FIFO") && strstr(ft_ctx_errmsg(ctx), fifo),
          "safetensors FIFO: %s '%s'", ft_status_str(st), ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    ft_st_close(f);
    /* a model directory whose config.json, then model.safetensors, is a FIFO */
    for (int k = 0; k < 2; k++) {
        snprintf(dir, sizeof dir, "%s/model%d", tmpdir, k);
        CHECK(mkdir(dir, 0700) == 0, "mkdir");
        snprintf(path, sizeof path, "%s/config.json", dir);
        if (k == 0) {
            CHECK(mkfifo(path, 0600) == 0, "mkfifo");
        } else {
            FILE *cf = fopen(path, "w");
            if (cf) {
                fputs("{\"model_type\": \"bert\", \"hidden_size\": 8, \"num_attention_heads\": 2, "
                      "\"intermediate_size\": 8, \"num_hidden_layers\": 1, \"vocab_size\": 10}\n", cf);
                fclose(cf);
            }
            snprintf(path, sizeof path, "%s/model.safetensors", dir);
            CHECK(mkfifo(path, 0600) == 0, "mkfifo");
        }
        ft_model *m = NULL;
        st = ft_model_load(ctx, dir, NULL, &m);
        CHECK(st == FT_ERR_IO && !m && strstr(ft_ctx_errmsg(ctx), "FIFO") && strstr(ft_ctx_errmsg(ctx), path),
              "model dir %d: %s '%s'", k, ft_status_str(st), ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
        ft_model_free(m);
    }
    /* and a directory or a socket-less special name is refused the same way */
    ft_json *j = NULL;
    st = ft_json_parse_file(ctx, tmpdir, &j);
    CHECK(st == FT_ERR_IO && strstr(ft_ctx_errmsg(ctx), "directory"), "json on a directory: '%s'",
          ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    ft_ctx_free(ctx);
    ft_test_tmpdir_remove();
}

/* ---- 5. threads per context, unaligned inputs ---- */

typedef struct {
    ft_ctx *ctx;
    int seen;
    ft_status st;
} team_job;

static void *team_worker(void *arg) {
    team_job *j = (team_job *)arg;
    ft_cpu_team_reset();
    ft_tensor *a = ft_tensor_empty(j->ctx, FT_DTYPE_F32, 2, FT_SHAPE(384, 384));
    ft_tensor *b = ft_tensor_empty(j->ctx, FT_DTYPE_F32, 2, FT_SHAPE(384, 384));
    ft_tensor *c = ft_matmul(j->ctx, a, b, 1.0f);
    ft_tensor *d = ft_add(j->ctx, c, a);
    j->st = d ? FT_OK : ft_ctx_status(j->ctx);
    j->seen = ft_cpu_team_seen();
    return NULL;
}

/* Two contexts of 1 and 3 threads, made on this thread and used from two others at
 * once: each region of each sees its own context's count. */
static void test_ctx_threads_per_context(void) {
    int before = omp_get_max_threads();
    ft_ctx_options o1 = ft_ctx_options_default(), o3 = ft_ctx_options_default();
    o1.cpu_threads = 1;
    o3.cpu_threads = 3;
    ft_ctx *c1 = NULL, *c3 = NULL;
    CHECK_OK(c1, ft_ctx_create_ex(&o1, &c1));
    CHECK_OK(c3, ft_ctx_create_ex(&o3, &c3));
    CHECK(omp_get_max_threads() == before, "making a context changed this thread's OpenMP default (%d -> %d)",
          before, omp_get_max_threads());
    if (!c1 || !c3) return;
    for (int round = 0; round < 2; round++) {
        team_job j1 = {c1, 0, FT_OK}, j3 = {c3, 0, FT_OK};
        pthread_t t1, t3;
        pthread_create(&t1, NULL, team_worker, &j1);
        pthread_create(&t3, NULL, team_worker, &j3);
        pthread_join(t1, NULL);
        pthread_join(t3, NULL);
        CHECK(j1.st == FT_OK && j3.st == FT_OK, "ops failed");
        CHECK(j1.seen == 1, "round %d: the 1-thread context ran a team of %d", round, j1.seen);
        CHECK(j3.seen == 3, "round %d: the 3-thread context ran a team of %d", round, j3.seen);
    }
    ft_ctx_free(c1);
    ft_ctx_free(c3);
}

/* I64 ids at an odd address (as in a safetensors file without header padding):
 * the same outputs as aligned ones, and no misaligned load (UBSan stops on one). */
static void test_unaligned_i64_inputs(void) {
    ft_ctx *ctx = NULL;
    golden_case g;
    if (golden_open_on(FT_DEVICE_CPU, "bert", &ctx, &g)) return;
    ft_model *m = load(ctx, g.dir, FT_MODE_EAGER);
    int64_t n0 = 0, n1 = 0;
    ft_status st;
    float *a = m ? forward_with(ctx, m, &g, NULL, "last_hidden_state", &n0, &st) : NULL;
    ft_host_tensor shifted[8];
    char *blocks[8] = {0};
    for (int i = 0; i < g.n_in; i++) {
        shifted[i] = g.in[i];
        size_t bytes = (size_t)ft_host_numel(&g.in[i]) * 8;
        blocks[i] = malloc(bytes + 8);
        if (blocks[i]) {
            memcpy(blocks[i] + 3, g.in[i].data, bytes);
            shifted[i].data = blocks[i] + 3;
        }
    }
    float *b = NULL;
    if (m && ft_model_forward(m, shifted, g.n_in) == FT_OK) b = output_f32(ctx, m, "last_hidden_state", &n1);
    CHECK(a && b && n0 == n1 && !memcmp(a, b, (size_t)n0 * sizeof *a), "unaligned inputs: %s", ft_ctx_errmsg(ctx));
    for (int i = 0; i < 8; i++) free(blocks[i]);
    free(a);
    free(b);
    ft_model_free(m);
    golden_close(&g);
    ft_ctx_free(ctx);
}

int main(void) {
    RUN(test_sizes_checked_helpers);
    RUN(test_sizes_tensor_api_cpu);
    RUN(test_sizes_tensor_api_cuda);
    RUN(test_sizes_model_inputs_cpu);
    RUN(test_sizes_model_inputs_cuda);
    RUN(test_sizes_example_inputs);
    RUN(test_mask_formula_cpu);
    RUN(test_mask_formula_cuda);
    RUN(test_mask_values_cpu);
    RUN(test_mask_values_cuda);
    RUN(test_mask_values_distilbert_cpu);
    RUN(test_relu_nan_cpu);
    RUN(test_relu_nan_cuda);
    RUN(test_nonfinite_fused_cpu);
    RUN(test_nonfinite_fused_cuda);
    RUN(test_fifo_loaders);
    RUN(test_ctx_threads_per_context);
    RUN(test_unaligned_i64_inputs);
    return ft_test_finish();
}

/*
 * test_resnet_wavlm.c - ResNetModel and WavLMModel end to end: the HF golden
 * cases on CPU (fp32, golden criterion, intermediates included) and on CUDA
 * (skipped without a device); torchvision-named ResNet checkpoints; ResNet
 * configurations the golden case does not cover (basic blocks, other depths,
 * stride placement, non-square images, batch 3) against a naive double
 * precision reference written here; WavLM audio masks (an unpadded row equals
 * itself run alone; with the "layer" encoder a padded row's valid frames equal
 * the truncated audio run alone), long audio (log-spaced buckets), the stable
 * pre-LN layout; preset parameter counts, input errors, and ResNet-50 speed.
 */
#include "ft_golden.h"
#include "ft_test.h"
#include "resnet_ref.h"

#include "../engine/safetensors.h"
#include "ftengine.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* models/wavlm.c */
int64_t ft_wavlm_rel_bucket(int64_t r, int64_t num_buckets, int64_t max_distance);

static const char *const resnet_required[] = {"last_hidden_state", "pooler_output", "hidden_states.0",
                                              "hidden_states.4", NULL};
static const char *const wavlm_required[] = {"last_hidden_state", "extract_features", "hidden_states.0",
                                             "hidden_states.2", NULL};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- golden cases ---- */

static void test_resnet_golden_cpu(void) {
    golden_run_check("resnet", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F32, resnet_required, GOLDEN_FP32);
}

static void test_wavlm_golden_cpu(void) {
    golden_run_check("wavlm", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F32, wavlm_required, GOLDEN_FP32);
}

/* Graph and static modes trace forward() once per input shape: same numbers. */
static void test_golden_graph_modes(void) {
    golden_run_check("resnet", FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F32, resnet_required, GOLDEN_FP32);
    golden_run_check("wavlm", FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F32, wavlm_required, GOLDEN_FP32);
    golden_run_check("resnet", FT_DEVICE_CPU, FT_MODE_STATIC, FT_DTYPE_F32, resnet_required, GOLDEN_FP32);
    golden_run_check("wavlm", FT_DEVICE_CPU, FT_MODE_STATIC, FT_DTYPE_F32, wavlm_required, GOLDEN_FP32);
}

static void test_golden_cpu_reduced_precision(void) {
    golden_run_check("resnet", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F16, resnet_required, GOLDEN_FP16);
    golden_run_check("wavlm", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F16, wavlm_required, GOLDEN_FP16);
    /* graph mode in f16: the fused attention takes the f16 position bias as an f32 mask */
    golden_run_check("wavlm", FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F16, wavlm_required, GOLDEN_FP16);
    /* bf16 keeps 8 mantissa bits (the audio itself is rounded to them): ~1.2e-2 rel L2 */
    golden_run_check("wavlm", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_BF16, wavlm_required,
                     (golden_tol){1e-1, 5e-2, 3e-2});
}

static void test_golden_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    golden_run_check("resnet", FT_DEVICE_CUDA, FT_MODE_EAGER, FT_DTYPE_F32, resnet_required, GOLDEN_FP32);
    golden_run_check("resnet", FT_DEVICE_CUDA, FT_MODE_EAGER, FT_DTYPE_F16, resnet_required, GOLDEN_FP16);
    golden_run_check("wavlm", FT_DEVICE_CUDA, FT_MODE_EAGER, FT_DTYPE_F32, wavlm_required, GOLDEN_FP32);
    golden_run_check("wavlm", FT_DEVICE_CUDA, FT_MODE_EAGER, FT_DTYPE_F16, wavlm_required, GOLDEN_FP16);
}

/* ---- temporary checkpoints ---- */


/* Creates tmpdir/<sub>/ with config.json = cfg; returns the path in out. */
static int make_model_dir(const char *sub, const char *cfg, char *out, size_t size) {
    snprintf(out, size, "%s/%s", tmpdir, sub);
    if (mkdir(out, 0700) != 0) return -1;
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", out);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(cfg, f);
    return fclose(f);
}

static int copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int rc = a && b ? 0 : -1;
    char buf[65536];
    size_t n;
    while (!rc && (n = fread(buf, 1, sizeof buf, a)) > 0) rc = fwrite(buf, 1, n, b) == n ? 0 : -1;
    if (a) fclose(a);
    if (b && fclose(b)) rc = -1;
    return rc;
}

/* Output `name` of m as a malloc'd f32 array (NULL + failed CHECK if absent). */
static float *output_f32(ft_ctx *ctx, ft_model *m, const char *name, int64_t *n_out) {
    ft_tensor *t = ft_model_output_find(m, name);
    CHECK(t != NULL, "output '%s' missing", name);
    if (!t) return NULL;
    int64_t n = ft_tensor_numel(t);
    float *buf = (float *)malloc((size_t)n * sizeof *buf);
    if (!buf || ft_tensor_to_host(ctx, t, FT_DTYPE_F32, buf, (size_t)n * sizeof *buf) != FT_OK) {
        CHECK(0, "reading '%s': %s", name, ft_ctx_errmsg(ctx));
        free(buf);
        return NULL;
    }
    if (n_out) *n_out = n;
    return buf;
}

/* Every element within atol + rtol * |ref|, and all finite; returns max abs error. */
static double check_close(const char *what, const float *got, const double *ref, int64_t n, double atol,
                          double rtol) {
    double max_err = 0, err2 = 0, ref2 = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[i] - ref[i]);
        if (!isfinite(got[i]) || !(d <= atol + rtol * fabs(ref[i]))) {
            if (!bad) printf("    %s[%lld]: got %.7g expected %.7g\n", what, (long long)i, got[i], ref[i]);
            bad++;
        }
        if (d > max_err) max_err = d;
        err2 += d * d;
        ref2 += ref[i] * ref[i];
    }
    double rel = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
    CHECK(bad == 0 && rel <= 1e-5, "%s: %lld of %lld elements out of tolerance, max abs err %.3g, rel L2 %.3g",
          what, (long long)bad, (long long)n, max_err, rel);
    return max_err;
}

static double *to_double(const float *x, int64_t n) {
    double *d = (double *)malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; d && i < n; i++) d[i] = x[i];
    return d;
}

/* ---- torchvision naming ---- */

/* HF ResNet name -> torchvision name ("" when it has no counterpart). */
static void tv_name(const char *hf, char *out, size_t size) {
    int s, l, j;
    char rest[100];
    if (sscanf(hf, "embedder.embedder.convolution.%99s", rest) == 1) snprintf(out, size, "conv1.%s", rest);
    else if (sscanf(hf, "embedder.embedder.normalization.%99s", rest) == 1) snprintf(out, size, "bn1.%s", rest);
    else if (sscanf(hf, "encoder.stages.%d.layers.%d.layer.%d.convolution.%99s", &s, &l, &j, rest) == 4)
        snprintf(out, size, "layer%d.%d.conv%d.%s", s + 1, l, j + 1, rest);
    else if (sscanf(hf, "encoder.stages.%d.layers.%d.layer.%d.normalization.%99s", &s, &l, &j, rest) == 4)
        snprintf(out, size, "layer%d.%d.bn%d.%s", s + 1, l, j + 1, rest);
    else if (sscanf(hf, "encoder.stages.%d.layers.%d.shortcut.convolution.%99s", &s, &l, rest) == 3)
        snprintf(out, size, "layer%d.%d.downsample.0.%s", s + 1, l, rest);
    else if (sscanf(hf, "encoder.stages.%d.layers.%d.shortcut.normalization.%99s", &s, &l, rest) == 3)
        snprintf(out, size, "layer%d.%d.downsample.1.%s", s + 1, l, rest);
    else out[0] = 0;
}

static void test_resnet_torchvision_names(void) {
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK || !tmpdir[0]) {
        CHECK(0, "setup");
        ft_ctx_free(ctx);
        return;
    }
    char src[600], dir[600], path[700];
    snprintf(src, sizeof src, "%s/resnet/model.safetensors", ft_test_golden_dir());
    ft_st_file *f = NULL;
    CHECK_OK(ctx, ft_st_open(ctx, src, &f));
    int n = f ? ft_st_count(f) : 0;
    ft_st_tensor *ts = (ft_st_tensor *)calloc((size_t)n + 2, sizeof *ts);
    char(*names)[160] = calloc((size_t)n + 2, sizeof *names);
    int k = 0, fails = 0;
    for (int i = 0; i < n; i++) {
        const ft_st_tensor *t = ft_st_get(f, i);
        tv_name(t->name, names[k], sizeof names[k]);
        if (!names[k][0]) {
            fails++;
            continue;
        }
        ts[k] = *t;
        ts[k].name = names[k];
        k++;
    }
    CHECK(fails == 0, "%d golden tensors have no torchvision name", fails);
    /* a classifier the base model must ignore */
    static const float fc_w[3 * 256], fc_b[3];
    ts[k] = (ft_st_tensor){.name = "fc.weight", .dtype = FT_DTYPE_F32, .ndim = 2, .shape = {3, 256},
                           .data = fc_w, .nbytes = sizeof fc_w};
    ts[k + 1] = (ft_st_tensor){.name = "fc.bias", .dtype = FT_DTYPE_F32, .ndim = 1, .shape = {3},
                               .data = fc_b, .nbytes = sizeof fc_b};
    snprintf(src, sizeof src, "%s/resnet/config.json", ft_test_golden_dir());
    CHECK(make_model_dir("tv", "", dir, sizeof dir) == 0, "mkdir");
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(copy_file(src, path) == 0, "copy config");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK_OK(ctx, ft_st_write(ctx, path, ts, k + 2));
    ft_st_close(f);
    free(ts);
    free(names);

    golden_case g;
    ft_model *hf = NULL, *tv = NULL;
    ft_model_options opt = ft_model_options_default();
    opt.output_hidden_states = 1;
    if (golden_open(ctx, "resnet", &g) == 0 && ft_model_load(ctx, g.dir, &opt, &hf) == FT_OK &&
        ft_model_load(ctx, dir, &opt, &tv) == FT_OK) {
        CHECK(ft_model_param_count(hf) == ft_model_param_count(tv), "param counts differ: %lld vs %lld",
              (long long)ft_model_param_count(hf), (long long)ft_model_param_count(tv));
        CHECK_OK(ctx, ft_model_forward(hf, g.in, g.n_in));
        CHECK_OK(ctx, ft_model_forward(tv, g.in, g.n_in));
        CHECK(ft_model_output_count(hf) == ft_model_output_count(tv), "output counts differ");
        for (int i = 0; i < ft_model_output_count(hf); i++) {
            const char *name = ft_model_output_name(hf, i);
            int64_t na = 0, nb = 0;
            float *a = output_f32(ctx, hf, name, &na), *b = output_f32(ctx, tv, name, &nb);
            CHECK(a && b && na == nb && !memcmp(a, b, (size_t)na * sizeof *a),
                  "torchvision-named output '%s' differs from the HF-named one", name);
            const ft_st_tensor *e = ft_st_find(g.expected, name);
            char msg[512];
            if (e) CHECK(golden_compare(ctx, ft_model_output_find(tv, name), e, GOLDEN_FP32, msg, sizeof msg) == 0,
                         "%s", msg);
            free(a);
            free(b);
        }
    } else {
        CHECK(0, "loading: %s", ft_ctx_errmsg(ctx));
    }
    ft_model_free(hf);
    ft_model_free(tv);
    golden_close(&g);
    ft_ctx_free(ctx);
}

/* ---- ResNet against a naive reference (resnet_ref.h) ---- */

static void run_resnet_case(const char *sub, const rcfg *cfg, int64_t B, int64_t H, int64_t W) {
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK || !tmpdir[0]) {
        CHECK(0, "setup");
        ft_ctx_free(ctx);
        return;
    }
    char json[1024], dir[600], path[700];
    snprintf(json, sizeof json,
             "{\"model_type\": \"resnet\", \"layer_type\": \"%s\", \"embedding_size\": %lld,"
             " \"downsample_in_first_stage\": %s, \"downsample_in_bottleneck\": %s, \"width_multiplier\": %d,"
             " \"hidden_sizes\": [%lld, %lld, %lld, %lld], \"depths\": [%lld, %lld, %lld, %lld]}",
             cfg->bottleneck ? "bottleneck" : "basic", (long long)cfg->embed, cfg->down_first ? "true" : "false",
             cfg->down_bottleneck ? "true" : "false", cfg->width_mult, (long long)cfg->hidden[0],
             (long long)cfg->hidden[1], (long long)cfg->hidden[2], (long long)cfg->hidden[3],
             (long long)cfg->depth[0], (long long)cfg->depth[1], (long long)cfg->depth[2], (long long)cfg->depth[3]);
    /* fewer stages: cut the arrays */
    if (cfg->n_stages < 4) {
        char *hs = strstr(json, "\"hidden_sizes\"");
        snprintf(hs, sizeof json - (size_t)(hs - json), "\"hidden_sizes\": [%lld, %lld], \"depths\": [%lld, %lld]}",
                 (long long)cfg->hidden[0], (long long)cfg->hidden[1], (long long)cfg->depth[0],
                 (long long)cfg->depth[1]);
    }
    CHECK(make_model_dir(sub, json, dir, sizeof dir) == 0, "mkdir %s", sub);
    static wbag bag;
    memset(&bag, 0, sizeof bag);
    bag.rng = 42 + (uint64_t)B * 7 + (uint64_t)H;
    img x = img_new(B, 3, H, W);
    float *xf = (float *)malloc((size_t)(B * 3 * H * W) * sizeof *xf);
    for (int64_t i = 0; i < B * 3 * H * W; i++) x.d[i] = xf[i] = (float)(urand(&bag.rng) * 2 - 1);
    img pooled;
    img ref = ref_resnet(&bag, cfg, x, &pooled);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK_OK(ctx, ft_st_write(ctx, path, bag.t, bag.n));
    ft_model *m = NULL;
    if (ft_model_load(ctx, dir, NULL, &m) == FT_OK) {
        ft_host_tensor in = {"pixel_values", FT_DTYPE_F32, 4, {B, 3, H, W}, xf};
        CHECK_OK(ctx, ft_model_forward(m, &in, 1));
        ft_tensor *lh = ft_model_output_find(m, "last_hidden_state");
        CHECK(lh && ft_tensor_dim(lh, 0) == ref.b && ft_tensor_dim(lh, 1) == ref.c &&
                  ft_tensor_dim(lh, 2) == ref.h && ft_tensor_dim(lh, 3) == ref.w,
              "%s: last_hidden_state shape", sub);
        ft_tensor *po = ft_model_output_find(m, "pooler_output");
        CHECK(po && ft_tensor_ndim(po) == 4 && ft_tensor_dim(po, 2) == 1 && ft_tensor_dim(po, 3) == 1,
              "%s: pooler_output must be [B, C, 1, 1]", sub);
        int64_t n = 0;
        float *got = output_f32(ctx, m, "last_hidden_state", &n);
        char what[96];
        snprintf(what, sizeof what, "%s last_hidden_state", sub);
        if (got && n == ref.b * ref.c * ref.h * ref.w) check_close(what, got, ref.d, n, 1e-4, 1e-4);
        free(got);
        got = output_f32(ctx, m, "pooler_output", &n);
        snprintf(what, sizeof what, "%s pooler_output", sub);
        if (got && n == pooled.b * pooled.c) check_close(what, got, pooled.d, n, 1e-4, 1e-4);
        free(got);
    } else {
        CHECK(0, "%s: loading: %s", sub, ft_ctx_errmsg(ctx));
    }
    ft_model_free(m);
    free(x.d);
    free(xf);
    free(ref.d);
    free(pooled.d);
    bag_free(&bag);
    ft_ctx_free(ctx);
}

static void test_resnet_basic_blocks(void) {
    rcfg c = {.bottleneck = 0, .n_stages = 4, .width_mult = 1, .embed = 8, .hidden = {8, 12, 16, 20},
              .depth = {2, 1, 2, 1}};
    run_resnet_case("basic", &c, 2, 33, 47); /* non-square, odd sizes */
}

static void test_resnet_other_depths_batch3(void) {
    rcfg c = {.bottleneck = 1, .n_stages = 2, .width_mult = 1, .embed = 8, .hidden = {16, 24},
              .depth = {3, 2}};
    run_resnet_case("bottleneck_2stages", &c, 3, 40, 24);
}

static void test_resnet_stride_placement(void) {
    rcfg c = {.bottleneck = 1, .down_first = 1, .down_bottleneck = 1, .n_stages = 2, .width_mult = 2,
              .embed = 8, .hidden = {8, 16}, .depth = {2, 2}};
    run_resnet_case("downsample_flags_wide", &c, 1, 37, 37);
}

/* ---- WavLM ---- */

static void test_wavlm_buckets(void) {
    static const int64_t cases[][2] = {{0, 0},     {5, 165},   {-5, 5},    {79, 239},   {-79, 79},
                                       {80, 240},  {-98, 87},  {98, 247},  {799, 319},  {800, 319},
                                       {-800, 159}, {-5000, 159}, {160, 264}, {-400, 135}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t b = ft_wavlm_rel_bucket(cases[i][0], 320, 800);
        CHECK(b == cases[i][1], "bucket(%lld) = %lld, expected %lld", (long long)cases[i][0], (long long)b,
              (long long)cases[i][1]);
    }
}

/* Runs m on audio [B, T] (+ mask if given); returns last_hidden_state (malloc'd) and its dims. */
static float *run_wavlm(ft_ctx *ctx, ft_model *m, const float *audio, const int64_t *mask, int64_t B, int64_t T,
                        int64_t *frames, int64_t *dim) {
    ft_host_tensor in[2] = {{"input_values", FT_DTYPE_F32, 2, {B, T}, audio},
                            {"attention_mask", FT_DTYPE_I64, 2, {B, T}, mask}};
    ft_status st = ft_model_forward(m, in, mask ? 2 : 1);
    CHECK(st == FT_OK, "wavlm forward [%lld, %lld]%s: %s", (long long)B, (long long)T, mask ? " masked" : "",
          ft_ctx_errmsg(ctx));
    if (st != FT_OK) return NULL;
    ft_tensor *h = ft_model_output_find(m, "last_hidden_state");
    if (frames) *frames = ft_tensor_dim(h, 1);
    if (dim) *dim = ft_tensor_dim(h, 2);
    return output_f32(ctx, m, "last_hidden_state", NULL);
}

static int all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* Row 0 unpadded, row 1 padded after `len` samples (garbage in the padding). Checks that
 * row 0 equals itself run alone; with `local` (layer-norm encoder: frames depend only on
 * their own samples) also that row 1's valid frames equal the truncated audio run alone. */
static void wavlm_mask_case(ft_ctx *ctx, ft_model *m, int64_t T, int64_t len, int local) {
    float *audio = (float *)malloc((size_t)(2 * T) * sizeof *audio);
    int64_t *mask = (int64_t *)malloc((size_t)(2 * T) * sizeof *mask);
    uint64_t s = 99;
    for (int64_t i = 0; i < 2 * T; i++) audio[i] = (float)(urand(&s) - 0.5);
    for (int64_t t = 0; t < T; t++) {
        mask[t] = 1;
        mask[T + t] = t < len;
        if (t >= len) audio[T + t] = (float)(3 * urand(&s));
    }
    int64_t F = 0, D = 0, F0 = 0, Ft = 0;
    float *both = run_wavlm(ctx, m, audio, mask, 2, T, &F, &D);
    float *alone = run_wavlm(ctx, m, audio, NULL, 1, T, &F0, NULL);
    if (both && alone) {
        CHECK(all_finite(both, 2 * F * D), "masked batch has non-finite values");
        double *r = to_double(alone, F * D);
        check_close("unpadded row vs alone", both, r, F * D, 1e-5, 1e-5);
        free(r);
    }
    if (local && both) {
        float *trunc = run_wavlm(ctx, m, audio + T, NULL, 1, len, &Ft, NULL);
        CHECK(Ft < F, "truncated audio should have fewer frames (%lld vs %lld)", (long long)Ft, (long long)F);
        if (trunc) {
            double *r = to_double(trunc, Ft * D);
            check_close("padded row valid frames vs truncated", both + F * D, r, Ft * D, 1e-4, 1e-4);
            free(r);
        }
        free(trunc);
    }
    free(both);
    free(alone);
    free(audio);
    free(mask);
}

static void test_wavlm_mask_group(void) {
    ft_ctx *ctx = NULL;
    ft_model *m = NULL;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/wavlm", ft_test_golden_dir());
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) == FT_OK && ft_model_load(ctx, dir, NULL, &m) == FT_OK)
        wavlm_mask_case(ctx, m, 16000, 9000, 0);
    else
        CHECK(0, "loading %s: %s", dir, ft_ctx_errmsg(ctx));
    ft_model_free(m);
    ft_ctx_free(ctx);
}

static void test_wavlm_long_audio(void) {
    ft_ctx *ctx = NULL;
    ft_model *m = NULL;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/wavlm", ft_test_golden_dir());
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK || ft_model_load(ctx, dir, NULL, &m) != FT_OK) {
        CHECK(0, "loading %s: %s", dir, ft_ctx_errmsg(ctx));
    } else {
        int64_t T = 32000 + 7 * 320 + 123, F = 0, D = 0;
        float *audio = (float *)malloc((size_t)T * sizeof *audio);
        uint64_t s = 5;
        for (int64_t i = 0; i < T; i++) audio[i] = (float)urand(&s); /* rand in [0, 1) like the paper */
        float *h = run_wavlm(ctx, m, audio, NULL, 1, T, &F, &D);
        CHECK(F == 107 && D == 64, "long audio: %lld frames x %lld, expected 107 x 64", (long long)F, (long long)D);
        CHECK(h && all_finite(h, F * D), "long audio: non-finite output");
        free(h);
        free(audio);
    }
    ft_model_free(m);
    ft_ctx_free(ctx);
}

/* The golden weights plus per-layer conv LayerNorms and conv biases: the wavlm-large
 * layout ("layer" encoder, stable pre-LN encoder) at the golden case's sizes. */
static int write_large_layout(ft_ctx *ctx, char *dir, size_t size) {
    char src[600], path[700];
    static const char cfg[] =
        "{\"model_type\": \"wavlm\", \"architectures\": [\"WavLMModel\"], \"conv_bias\": true,"
        " \"conv_dim\": [32, 32, 32, 32, 32, 32, 32], \"conv_kernel\": [10, 3, 3, 3, 3, 2, 2],"
        " \"conv_stride\": [5, 2, 2, 2, 2, 2, 2], \"do_stable_layer_norm\": true,"
        " \"feat_extract_norm\": \"layer\", \"hidden_size\": 64, \"intermediate_size\": 256,"
        " \"num_attention_heads\": 4, \"num_conv_pos_embedding_groups\": 4, \"num_conv_pos_embeddings\": 16,"
        " \"num_hidden_layers\": 2, \"layer_norm_eps\": 1e-05}";
    if (make_model_dir("large", cfg, dir, size) != 0) return -1;
    snprintf(src, sizeof src, "%s/wavlm/model.safetensors", ft_test_golden_dir());
    ft_st_file *f = NULL;
    if (ft_st_open(ctx, src, &f) != FT_OK) return -1;
    int n = ft_st_count(f);
    static ft_st_tensor ts[256];
    static char names[32][96];
    static float extra[32][32];
    int k = 0, e = 0;
    for (int i = 0; i < n && k < 200; i++) ts[k++] = *ft_st_get(f, i);
    uint64_t s = 11;
    for (int l = 0; l < 7; l++) {
        const char *kinds[3] = {"layer_norm.weight", "layer_norm.bias", "conv.bias"};
        for (int j = 0; j < 3; j++) {
            if (l == 0 && j < 2) continue; /* the golden GroupNorm weights serve as layer 0's LayerNorm */
            snprintf(names[e], sizeof names[e], "feature_extractor.conv_layers.%d.%s", l, kinds[j]);
            for (int c = 0; c < 32; c++) extra[e][c] = (float)(j == 0 ? 1 + 0.3 * (urand(&s) - 0.5) : 0.2 * (urand(&s) - 0.5));
            ts[k] = (ft_st_tensor){.name = names[e], .dtype = FT_DTYPE_F32, .ndim = 1, .shape = {32},
                                   .data = extra[e], .nbytes = sizeof extra[e]};
            k++;
            e++;
        }
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ft_status st = ft_st_write(ctx, path, ts, k);
    ft_st_close(f);
    return st == FT_OK ? 0 : -1;
}

static void test_wavlm_large_layout(void) {
    ft_ctx *ctx = NULL;
    ft_model *m = NULL;
    char dir[600];
    ft_model_options opt = ft_model_options_default();
    opt.output_hidden_states = 1;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK || !tmpdir[0] || write_large_layout(ctx, dir, sizeof dir) ||
        ft_model_load(ctx, dir, &opt, &m) != FT_OK) {
        CHECK(0, "stable layout checkpoint: %s", ft_ctx_errmsg(ctx));
    } else {
        int64_t T = 16000, F = 0, D = 0;
        float *audio = (float *)malloc((size_t)T * sizeof *audio);
        uint64_t s = 3;
        for (int64_t i = 0; i < T; i++) audio[i] = (float)(urand(&s) - 0.5);
        float *h = run_wavlm(ctx, m, audio, NULL, 1, T, &F, &D);
        CHECK(F == 49 && D == 64, "stable layout: %lld x %lld, expected 49 x 64", (long long)F, (long long)D);
        CHECK(h && all_finite(h, F * D), "stable layout: non-finite output");
        const char *outs[] = {"extract_features", "hidden_states.0", "hidden_states.1", "hidden_states.2"};
        for (int i = 0; i < 4; i++) CHECK(ft_model_output_find(m, outs[i]) != NULL, "missing %s", outs[i]);
        /* the last hidden state is after the final LayerNorm, and it is hidden_states.2 */
        int64_t n2 = 0;
        float *h2 = output_f32(ctx, m, "hidden_states.2", &n2);
        CHECK(h && h2 && n2 == F * D && !memcmp(h, h2, (size_t)n2 * sizeof *h), "hidden_states.2 != last");
        free(h2);
        free(h);
        free(audio);
        wavlm_mask_case(ctx, m, 12000, 7000, 1);
    }
    ft_model_free(m);
    ft_ctx_free(ctx);
}

/* The frame mask depends on mask values: a graph plan built for one mask must
 * give eager's numbers for another of the same shape. */
static void test_wavlm_mask_graph(void) {
    ft_ctx *ctx = NULL;
    ft_model *e = NULL, *g = NULL;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/wavlm", ft_test_golden_dir());
    ft_model_options opt = ft_model_options_default();
    opt.mode = FT_MODE_GRAPH;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK || ft_model_load(ctx, dir, NULL, &e) != FT_OK ||
        ft_model_load(ctx, dir, &opt, &g) != FT_OK) {
        CHECK(0, "loading %s: %s", dir, ft_ctx_errmsg(ctx));
    } else {
        int64_t T = 8000;
        float *audio = (float *)malloc((size_t)(2 * T) * sizeof *audio);
        int64_t *mask = (int64_t *)malloc((size_t)(2 * T) * sizeof *mask);
        uint64_t s = 17;
        for (int64_t i = 0; i < 2 * T; i++) audio[i] = (float)(urand(&s) - 0.5);
        const int64_t lens[3] = {5000, 7321, 2100};
        for (int r = 0; r < 3; r++) {
            for (int64_t t = 0; t < 2 * T; t++) mask[t] = t < T ? (t < lens[(r + 1) % 3]) : (t - T < lens[r]);
            int64_t F = 0, D = 0;
            float *a = run_wavlm(ctx, e, audio, mask, 2, T, &F, &D);
            float *b = run_wavlm(ctx, g, audio, mask, 2, T, NULL, NULL);
            if (a && b) {
                double *ref = to_double(a, 2 * F * D);
                check_close("graph vs eager with a mask", b, ref, 2 * F * D, 1e-5, 1e-5);
                free(ref);
            }
            free(a);
            free(b);
        }
        free(audio);
        free(mask);
    }
    ft_model_free(e);
    ft_model_free(g);
    ft_ctx_free(ctx);
}

/* ---- presets, errors, speed ---- */

/* The parameter count of a golden model equals the elements of its checkpoint's
 * tensors, BatchNorm buffers excepted (the structure behind the preset counts). */
static void test_golden_param_counts(void) {
    const char *cases[2] = {"resnet", "wavlm"};
    for (int c = 0; c < 2; c++) {
        ft_ctx *ctx = NULL;
        ft_model *m = NULL;
        ft_st_file *f = NULL;
        char dir[600], path[700];
        snprintf(dir, sizeof dir, "%s/%s", ft_test_golden_dir(), cases[c]);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK || ft_model_load(ctx, dir, NULL, &m) != FT_OK ||
            ft_st_open(ctx, path, &f) != FT_OK) {
            CHECK(0, "%s: %s", cases[c], ft_ctx_errmsg(ctx));
        } else {
            int64_t want = 0;
            for (int i = 0; i < ft_st_count(f); i++) {
                const ft_st_tensor *t = ft_st_get(f, i);
                if (strstr(t->name, "running_") || strstr(t->name, "num_batches_tracked")) continue;
                int64_t n = 1;
                for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
                want += n;
            }
            CHECK(ft_model_param_count(m) == want, "%s: %lld parameters, the checkpoint holds %lld", cases[c],
                  (long long)ft_model_param_count(m), (long long)want);
        }
        ft_st_close(f);
        ft_model_free(m);
        ft_ctx_free(ctx);
    }
}

static void check_preset(const char *name, int64_t params) {
    ft_ctx *ctx = NULL;
    ft_model *m = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK || ft_model_load(ctx, name, NULL, &m) != FT_OK) {
        CHECK(0, "preset %s: %s", name, ft_ctx_errmsg(ctx));
    } else {
        CHECK(ft_model_param_count(m) == params, "%s: %lld parameters, expected %lld", name,
              (long long)ft_model_param_count(m), (long long)params);
    }
    ft_model_free(m);
    ft_ctx_free(ctx);
}

static void test_preset_param_counts(void) {
    check_preset("resnet-18", 11176512); /* resnet-50 is counted by test_resnet50_speed */
    if (getenv("FT_TEST_SLOW")) { /* random init of ~250 M parameters; torchvision counts minus fc */
        check_preset("wavlm-base", 94381936);
        check_preset("resnet-34", 21284672);
        check_preset("resnet-101", 42500160);
        check_preset("resnet-152", 58143808);
        check_preset("wide-resnet-50-2", 66834240);
    }
}

static void test_input_errors(void) {
    ft_ctx *ctx = NULL;
    ft_model *r = NULL, *w = NULL;
    char dir[600];
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    snprintf(dir, sizeof dir, "%s/resnet", ft_test_golden_dir());
    CHECK_OK(ctx, ft_model_load(ctx, dir, NULL, &r));
    snprintf(dir, sizeof dir, "%s/wavlm", ft_test_golden_dir());
    CHECK_OK(ctx, ft_model_load(ctx, dir, NULL, &w));
    if (r && w) {
        static float buf[2 * 4 * 16 * 16];
        int64_t mask[2 * 500] = {0};
        ft_host_tensor px = {"pixel_values", FT_DTYPE_F32, 4, {2, 4, 16, 16}, buf};
        CHECK(ft_model_forward(r, &px, 1) == FT_ERR_SHAPE && strstr(ft_ctx_errmsg(ctx), "channels"),
              "4-channel image: %s", ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
        ft_host_tensor flat = {"pixel_values", FT_DTYPE_F32, 2, {2, 3}, buf};
        CHECK(ft_model_forward(r, &flat, 1) == FT_ERR_SHAPE, "rank-2 image accepted");
        ft_ctx_clear_error(ctx);
        ft_host_tensor shortin = {"input_values", FT_DTYPE_F32, 2, {1, 399}, buf};
        CHECK(ft_model_forward(w, &shortin, 1) == FT_ERR_SHAPE && strstr(ft_ctx_errmsg(ctx), "400"),
              "399 samples: %s", ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
        ft_host_tensor in[2] = {{"input_values", FT_DTYPE_F32, 2, {2, 500}, buf},
                                {"attention_mask", FT_DTYPE_I64, 2, {2, 500}, mask}};
        CHECK(ft_model_forward(w, in, 2) == FT_ERR_INVALID_ARG, "all-zero mask row accepted");
        ft_ctx_clear_error(ctx);
        for (int i = 0; i < 1000; i++) mask[i] = i % 500 < 450 ? 1 : 0;
        mask[3] = 2;
        CHECK(ft_model_forward(w, in, 2) == FT_ERR_INVALID_ARG, "mask value 2 accepted");
        ft_ctx_clear_error(ctx);
        in[1].shape[1] = 499;
        CHECK(ft_model_forward(w, in, 2) == FT_ERR_SHAPE, "mis-shaped mask accepted");
        ft_ctx_clear_error(ctx);
        mask[3] = 1;
        in[1].shape[1] = 500;
        CHECK_OK(ctx, ft_model_forward(w, in, 2));
    }
    ft_model_free(r);
    ft_model_free(w);
    ft_ctx_free(ctx);
}

static void test_resnet50_speed(void) {
    ft_ctx *ctx = NULL;
    ft_model *m = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK || ft_model_load(ctx, "resnet-50", NULL, &m) != FT_OK) {
        CHECK(0, "resnet-50: %s", ft_ctx_errmsg(ctx));
    } else {
        int64_t n = 3 * 224 * 224;
        float *px = (float *)malloc((size_t)n * sizeof *px);
        uint64_t s = 1;
        for (int64_t i = 0; i < n; i++) px[i] = (float)(urand(&s) * 2 - 1);
        ft_host_tensor in = {"pixel_values", FT_DTYPE_F32, 4, {1, 3, 224, 224}, px};
        double t0 = now_s();
        CHECK_OK(ctx, ft_model_forward(m, &in, 1));
        double t1 = now_s();
        ft_tensor *h = ft_model_output_find(m, "last_hidden_state");
        CHECK(h && ft_tensor_dim(h, 1) == 2048 && ft_tensor_dim(h, 2) == 7 && ft_tensor_dim(h, 3) == 7,
              "resnet-50 output shape");
        printf("  resnet-50 224x224 batch 1, CPU eager fp32: %.3f s\n", t1 - t0);
        CHECK(ft_model_param_count(m) == 23508032, "resnet-50: %lld parameters, expected 23508032",
              (long long)ft_model_param_count(m));
        int64_t macs = 0;
        CHECK_OK(ctx, ft_model_macs(m, 1, 224, &macs));
        CHECK(macs == 4087136256LL, "resnet-50 MACs %lld, expected 4087136256", (long long)macs);
        free(px);
    }
    ft_model_free(m);
    ft_ctx_free(ctx);
}

int main(void) {
    ft_test_tmpdir_make("resnet_wavlm");
    RUN(test_resnet_golden_cpu);
    RUN(test_wavlm_golden_cpu);
    RUN(test_golden_graph_modes);
    RUN(test_golden_cpu_reduced_precision);
    RUN(test_wavlm_mask_graph);
    RUN(test_golden_cuda);
    RUN(test_resnet_torchvision_names);
    RUN(test_resnet_basic_blocks);
    RUN(test_resnet_other_depths_batch3);
    RUN(test_resnet_stride_placement);
    RUN(test_wavlm_buckets);
    RUN(test_wavlm_mask_group);
    RUN(test_wavlm_long_audio);
    RUN(test_wavlm_large_layout);
    RUN(test_golden_param_counts);
    RUN(test_preset_param_counts);
    RUN(test_input_errors);
    RUN(test_resnet50_speed);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

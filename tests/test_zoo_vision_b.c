/*
 * test_zoo_vision_b.c - MobileNetV2, EfficientNet and ConvNeXt end to end: the
 * Hugging Face golden cases (tests/golden/<arch>/, intermediates included) in
 * eager, graph and static mode on the CPU at the fp32 criterion and in f16/bf16
 * at looser bounds, and on CUDA (the host emulator in `make test`); proof that
 * each graph pass fired (depthwise conv+BN folds and epilogues, the fused
 * squeeze-excitation, the folded layer scale, CUDA's input prologues) with the
 * kernels per forward of eager and graph mode; checkpoints with the base-model
 * prefix, a head, BatchNorm counters and legacy gamma/beta names; bad
 * checkpoints, bad configs and bad inputs ending in one clear error; and the
 * published presets' parameter and MAC counts.
 */
#include "ft_golden.h"
#include "ft_test.h"

#include "../engine/safetensors.h"
#include "ftengine.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const archs[3] = {"mobilenet_v2", "efficientnet", "convnext"};
static const char *const req_mnv2[] = {"last_hidden_state", "pooler_output", "hidden_states.0", "hidden_states.15",
                                       NULL};
static const char *const req_eff[] = {"last_hidden_state", "pooler_output", "hidden_states.0", "hidden_states.10",
                                      NULL};
static const char *const req_cnx[] = {"last_hidden_state", "pooler_output", "hidden_states.0", "hidden_states.4",
                                      NULL};
static const char *const *const reqs[3] = {req_mnv2, req_eff, req_cnx};
static const ft_mode modes[3] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};
/* f16 and bf16 through a network whose random BatchNorm statistics amplify errors:
 * bf16's 8 mantissa bits need more room than f16's 11 */
static const golden_tol tol_f16 = {2e-2, 2e-2, 2e-2}, tol_bf16 = {1.5e-1, 1e-1, 8e-2};

/* ---- golden cases ---- */

static void test_golden_cpu(void) {
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 3; k++)
            golden_run_check(archs[a], FT_DEVICE_CPU, modes[k], FT_DTYPE_F32, reqs[a], GOLDEN_FP32);
}

static void test_golden_cpu_reduced(void) {
    for (int a = 0; a < 3; a++) {
        golden_run_check(archs[a], FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F16, reqs[a], tol_f16);
        golden_run_check(archs[a], FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F16, reqs[a], tol_f16);
        golden_run_check(archs[a], FT_DEVICE_CPU, FT_MODE_STATIC, FT_DTYPE_BF16, reqs[a], tol_bf16);
    }
}

static void test_golden_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    for (int a = 0; a < 3; a++) {
        for (int k = 0; k < 3; k++)
            golden_run_check(archs[a], FT_DEVICE_CUDA, modes[k], FT_DTYPE_F32, reqs[a], GOLDEN_FP32);
        golden_run_check(archs[a], FT_DEVICE_CUDA, FT_MODE_EAGER, FT_DTYPE_F16, reqs[a], tol_f16);
        golden_run_check(archs[a], FT_DEVICE_CUDA, FT_MODE_STATIC, FT_DTYPE_F16, reqs[a], tol_f16);
        golden_run_check(archs[a], FT_DEVICE_CUDA, FT_MODE_GRAPH, FT_DTYPE_BF16, reqs[a], tol_bf16);
    }
}

/* ---- the passes, read from the plan ---- */

typedef struct plan_count {
    int steps, traced, batchnorm, dw, dw_fused, dw_prologue, conv_residual, se, mul, sigmoid, add, linear_gelu;
} plan_count;

/* Loads golden case `arch` in graph mode on dev, runs it, counts its plan's steps. */
static int count_plan(const char *arch, ft_device dev, plan_count *pc) {
    memset(pc, 0, sizeof *pc);
    ft_ctx *ctx = NULL;
    golden_case g;
    if (golden_open_on(dev, arch, &ctx, &g)) return -1;
    ft_model_options opt = ft_model_options_default();
    opt.mode = FT_MODE_GRAPH;
    ft_model *m = NULL;
    int rc = -1;
    CHECK_OK(ctx, ft_model_load(ctx, g.dir, &opt, &m));
    if (m && ft_model_forward(m, g.in, g.n_in) == FT_OK) {
        ft_graph_stats gs;
        ft_model_graph_stats(m, &gs);
        pc->traced = gs.traced_kernels;
        pc->steps = ft_model_plan_length(m);
        CHECK(pc->steps == gs.kernels_per_forward, "%s: %d plan steps, %d kernels per forward", arch, pc->steps,
              gs.kernels_per_forward);
        for (int i = 0; i < pc->steps; i++) {
            ft_plan_step_info s;
            if (ft_model_plan_step(m, i, &s) != FT_OK) continue;
            pc->batchnorm += !strcmp(s.op, "batchnorm");
            pc->se += !strcmp(s.op, "se_gate");
            pc->mul += !strcmp(s.op, "mul");
            pc->sigmoid += !strcmp(s.op, "sigmoid");
            pc->add += !strcmp(s.op, "add");
            pc->linear_gelu += !strcmp(s.op, "linear") && strstr(s.detail, "gelu");
            pc->conv_residual += !strcmp(s.op, "conv2d") && strstr(s.detail, "residual");
            if (!strcmp(s.op, "dwconv2d")) {
                pc->dw++;
                pc->dw_fused += strstr(s.detail, "bias") && (strstr(s.detail, "relu6") || strstr(s.detail, "silu"));
                pc->dw_prologue += strstr(s.detail, "input bias") != NULL;
            }
        }
        rc = 0;
    } else {
        CHECK(0, "%s graph forward: %s", arch, ft_ctx_errmsg(ctx));
    }
    ft_model_free(m);
    golden_close(&g);
    ft_ctx_free(ctx);
    return rc;
}

static void test_passes_fired_cpu(void) {
    plan_count p;
    /* MobileNetV2 (golden: depth multiplier 0.15, whose rounding gives 11 residual layers):
     * per layer expand conv + bias + relu6, depthwise + bias + relu6, project conv + bias
     * (+ residual); stem 3, head 1, pool 1 */
    if (count_plan("mobilenet_v2", FT_DEVICE_CPU, &p) == 0) {
        printf("  mobilenet_v2 (golden) kernels per forward: eager %d, graph %d\n", p.traced, p.steps);
        CHECK(p.batchnorm == 0 && p.dw == 17 && p.dw_fused == 17, "mnv2: %d BN left, %d/%d depthwise fused",
              p.batchnorm, p.dw_fused, p.dw);
        CHECK(p.add == 0 && p.conv_residual == 11, "mnv2: %d adds left, %d residuals in convolutions", p.add,
              p.conv_residual);
        /* eager: stem 8 (conv, BN, ReLU6 twice, conv, BN), 8 per layer + 11 adds, head 3, pool;
         * graph: at the golden case's channel counts the blocked layout (graph/pass_nchwc.c)
         * takes only the last projection and the head conv: one reorder, for the model output */
        CHECK(p.steps == 3 + 3 * 16 + 2 + 1 && p.traced == 8 + 8 * 16 + 11 + 4, "mnv2 kernels: graph %d, eager %d",
              p.steps, p.traced);
    }
    /* EfficientNet (golden: 10 blocks, 9 with an expansion): one SE gate per block, no
     * pool/sigmoid/mul of the unfused form left */
    if (count_plan("efficientnet", FT_DEVICE_CPU, &p) == 0) {
        printf("  efficientnet (golden) kernels per forward: eager %d, graph %d\n", p.traced, p.steps);
        CHECK(p.se == 10 && p.mul == 0 && p.sigmoid == 0, "efficientnet: %d SE gates, %d mul, %d sigmoid", p.se,
              p.mul, p.sigmoid);
        CHECK(p.batchnorm == 0 && p.dw_fused == 10 && p.add == 0 && p.conv_residual == 3,
              "efficientnet: %d BN, %d/10 depthwise fused, %d adds, %d residuals in convolutions", p.batchnorm,
              p.dw_fused, p.add, p.conv_residual);
        /* + the model output's reorder (the last projection and the head conv blocked) */
        CHECK(p.steps == 4 * 10 - 1 + 3 + 1, "efficientnet: %d kernels in graph mode", p.steps);
    }
    /* ConvNeXt (golden: 5 blocks): the layer scale folded into pwconv2, GELU into pwconv1 */
    if (count_plan("convnext", FT_DEVICE_CPU, &p) == 0) {
        printf("  convnext (golden) kernels per forward: eager %d, graph %d\n", p.traced, p.steps);
        CHECK(p.mul == 0 && p.linear_gelu == 5 && p.dw == 5, "convnext: %d mul left, %d linear+gelu, %d depthwise",
              p.mul, p.linear_gelu, p.dw);
    }
}

static void test_passes_fired_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    plan_count p;
    /* on CUDA each expansion 1x1 hands its bias and activation to the depthwise convolution's input */
    if (count_plan("mobilenet_v2", FT_DEVICE_CUDA, &p) == 0) {
        printf("  mobilenet_v2 (golden, CUDA) kernels per forward: eager %d, graph %d\n", p.traced, p.steps);
        CHECK(p.dw_prologue == 16 && p.batchnorm == 0, "mnv2 cuda: %d depthwise with an input prologue",
              p.dw_prologue);
    }
    if (count_plan("efficientnet", FT_DEVICE_CUDA, &p) == 0) {
        printf("  efficientnet (golden, CUDA) kernels per forward: eager %d, graph %d\n", p.traced, p.steps);
        CHECK(p.se == 10 && p.dw_prologue == 9, "efficientnet cuda: %d SE, %d depthwise prologues", p.se,
              p.dw_prologue);
    }
}

/* ---- presets ---- */

static void test_presets(void) {
    /* tests/golden/README-zoo.md (parameters) and MACs counted op by op (224 x 224) */
    static const struct {
        const char *name, *arch;
        int64_t params, macs;
    } P[] = {
        {"mobilenet_v2_1.0_224", "MobileNetV2Model", 2223872, 299494272},
        {"efficientnet-b0", "EfficientNetModel", 4007548, 384534752},
        {"convnext-tiny-224", "ConvNextModel", 27820128, 4454763264LL},
    };
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        ft_model_options opt = ft_model_options_default();
        opt.weights = FT_WEIGHTS_NONE;
        ft_model *m = NULL;
        CHECK_OK(ctx, ft_model_load(ctx, P[i].name, &opt, &m));
        if (!m) continue;
        int64_t macs = 0, macs3 = 0;
        CHECK_OK(ctx, ft_model_macs(m, 1, 224, &macs));
        CHECK_OK(ctx, ft_model_macs(m, 3, 224, &macs3));
        CHECK(!strcmp(ft_model_arch(m), P[i].arch), "%s: architecture %s", P[i].name, ft_model_arch(m));
        CHECK(ft_model_param_count(m) == P[i].params, "%s: %lld parameters, published %lld", P[i].name,
              (long long)ft_model_param_count(m), (long long)P[i].params);
        CHECK(macs == P[i].macs && macs3 == 3 * P[i].macs, "%s: %lld MACs (batch 3: %lld), expected %lld", P[i].name,
              (long long)macs, (long long)macs3, (long long)P[i].macs);
        ft_model_free(m);
    }
    ft_ctx_free(ctx);
}

/* ---- checkpoints rewritten from the golden ones ---- */

typedef enum { RW_PREFIX, RW_LEGACY, RW_DROP, RW_INT, RW_RESHAPE } rw_kind;

/* tmpdir/<sub>/ with config.json (cfg, or the golden case's) and the golden weights of
 * `arch` rewritten: every name prefixed (plus a head and a counter), legacy
 * gamma/beta for the LayerNorm weights, one tensor dropped, turned into ints or
 * reshaped (the tensors whose name contains `which`). Returns 0 on success. */
static int rewrite_case(const char *arch, const char *sub, const char *cfg, rw_kind kind, const char *which,
                        char *dir, size_t size) {
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) return -1;
    char path[700];
    snprintf(path, sizeof path, "%s/%s/model.safetensors", ft_test_golden_dir(), arch);
    ft_st_file *f = NULL;
    int rc = -1;
    if (ft_st_open(ctx, path, &f) != FT_OK) goto out;
    int n = ft_st_count(f);
    ft_st_tensor *t = calloc((size_t)n + 2, sizeof *t);
    char (*names)[256] = calloc((size_t)n + 2, 256);
    int64_t *ints = NULL, zero = 0;
    float head[6] = {0};
    int k = 0;
    for (int i = 0; t && names && i < n; i++) {
        const ft_st_tensor *s = ft_st_get(f, i);
        bool hit = which && strstr(s->name, which);
        if (kind == RW_DROP && hit) continue;
        t[k] = *s;
        snprintf(names[k], 256, "%s", s->name);
        if (kind == RW_PREFIX) snprintf(names[k], 256, "%s.%s", arch, s->name);
        if (kind == RW_LEGACY && hit) {
            char *dot = strrchr(names[k], '.');
            if (dot && !strcmp(dot, ".weight")) strcpy(dot, ".gamma");
            else if (dot && !strcmp(dot, ".bias")) strcpy(dot, ".beta");
        }
        if (kind == RW_INT && hit && s->dtype == FT_DTYPE_F32 && !ints) {
            ints = calloc(s->nbytes / 4 + 1, sizeof *ints);
            t[k].dtype = FT_DTYPE_I64;
            t[k].data = ints;
            t[k].nbytes = s->nbytes / 4 * sizeof *ints;
        }
        if (kind == RW_RESHAPE && hit && s->ndim == 4) { /* [O, I, K, K] -> [O, I * K * K, 1, 1] */
            t[k].shape[1] *= t[k].shape[2] * t[k].shape[3];
            t[k].shape[2] = t[k].shape[3] = 1;
        }
        t[k].name = names[k];
        k++;
    }
    if (kind == RW_PREFIX && t && names) { /* a classification head and a BatchNorm counter, ignored */
        snprintf(names[k], 256, "classifier.weight");
        t[k] = (ft_st_tensor){names[k], FT_DTYPE_F32, 2, {3, 2}, head, sizeof head};
        k++;
        snprintf(names[k], 256, "%s.some_bn.num_batches_tracked", arch);
        t[k] = (ft_st_tensor){names[k], FT_DTYPE_I64, 0, {0}, &zero, sizeof zero};
        k++;
    }
    snprintf(dir, size, "%s/%s", tmpdir, sub);
    char cpath[700];
    snprintf(cpath, sizeof cpath, "%s/config.json", dir);
    snprintf(path, sizeof path, "%s/%s/config.json", ft_test_golden_dir(), arch);
    FILE *src = cfg ? NULL : fopen(path, "rb"), *dst = NULL;
    if (t && names && mkdir(dir, 0700) == 0 && (dst = fopen(cpath, "wb")) && (cfg || src)) {
        if (cfg) fputs(cfg, dst);
        else {
            char buf[4096];
            size_t got;
            while ((got = fread(buf, 1, sizeof buf, src)) > 0) fwrite(buf, 1, got, dst);
        }
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        rc = ft_st_write(ctx, path, t, k) == FT_OK ? 0 : -1;
    }
    if (src) fclose(src);
    if (dst && fclose(dst)) rc = -1;
    free(ints);
    free(t);
    free(names);
out:
    ft_st_close(f);
    ft_ctx_free(ctx);
    return rc;
}

/* Loads dir on the CPU (eager) and compares last_hidden_state and pooler_output with
 * golden case `arch`'s expected outputs. */
static void run_against_golden(const char *arch, const char *dir) {
    ft_ctx *ctx = NULL;
    golden_case g;
    if (golden_open_on(FT_DEVICE_CPU, arch, &ctx, &g)) return;
    ft_model_options opt = ft_model_options_default();
    ft_model *m = NULL;
    CHECK_OK(ctx, ft_model_load(ctx, dir, &opt, &m));
    if (m && ft_model_forward(m, g.in, g.n_in) == FT_OK) {
        const char *outs[2] = {"last_hidden_state", "pooler_output"};
        for (int i = 0; i < 2; i++) {
            char msg[512];
            int rc = golden_compare(ctx, ft_model_output_find(m, outs[i]), ft_st_find(g.expected, outs[i]),
                                    GOLDEN_FP32, msg, sizeof msg);
            CHECK(rc == 0, "%s from %s: %s", arch, dir, msg);
        }
    } else if (m) {
        CHECK(0, "%s from %s: %s", arch, dir, ft_ctx_errmsg(ctx));
    }
    ft_model_free(m);
    golden_close(&g);
    ft_ctx_free(ctx);
}

static void test_prefixed_and_legacy_names(void) {
    char dir[600], sub[64];
    for (int a = 0; a < 3; a++) {
        /* the task checkpoint's layout: "<prefix>." names, a classifier, a num_batches_tracked */
        snprintf(sub, sizeof sub, "prefixed_%s", archs[a]);
        CHECK(rewrite_case(archs[a], sub, NULL, RW_PREFIX, NULL, dir, sizeof dir) == 0, "writing %s", sub);
        run_against_golden(archs[a], dir);
    }
    /* older files: LayerNorm/BatchNorm weight and bias as gamma and beta (HF renames on load) */
    CHECK(rewrite_case("convnext", "legacy_convnext", NULL, RW_LEGACY, "layernorm", dir, sizeof dir) == 0, "writing");
    run_against_golden("convnext", dir);
    CHECK(rewrite_case("convnext", "legacy_down", NULL, RW_LEGACY, "downsampling_layer.0", dir, sizeof dir) == 0,
          "writing");
    run_against_golden("convnext", dir);
    CHECK(rewrite_case("mobilenet_v2", "legacy_mnv2", NULL, RW_LEGACY, "normalization", dir, sizeof dir) == 0,
          "writing");
    run_against_golden("mobilenet_v2", dir);
}

/* load of dir must fail with a message containing each of the NULL-terminated parts */
static void expect_load_error(const char *dir, ...) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    ft_model_options opt = ft_model_options_default();
    ft_model *m = NULL;
    ft_status st = ft_model_load(ctx, dir, &opt, &m);
    const char *msg = ft_ctx_errmsg(ctx);
    CHECK(st != FT_OK && m == NULL, "%s loaded, expected an error", dir);
    va_list ap;
    va_start(ap, dir);
    for (const char *part = va_arg(ap, const char *); part; part = va_arg(ap, const char *))
        CHECK(strstr(msg, part) != NULL, "%s: message '%s' lacks '%s'", dir, msg, part);
    va_end(ap);
    CHECK(!strchr(msg, '\n'), "%s: a multi-line message '%s'", dir, msg);
    ft_model_free(m);
    ft_ctx_free(ctx);
}

static void test_bad_checkpoints(void) {
    char dir[600];
    if (rewrite_case("mobilenet_v2", "missing", NULL, RW_DROP, "layer.3.conv_3x3.normalization.running_var", dir,
                     sizeof dir) == 0)
        expect_load_error(dir, "layer.3.conv_3x3.normalization.running_var", "not found", NULL);
    if (rewrite_case("efficientnet", "ints", NULL, RW_INT, "squeeze_excite.reduce.weight", dir, sizeof dir) == 0)
        expect_load_error(dir, "squeeze_excite.reduce.weight", "dtype", NULL);
    if (rewrite_case("convnext", "shape", NULL, RW_RESHAPE, "stages.2.layers.1.dwconv.weight", dir, sizeof dir) == 0)
        expect_load_error(dir, "stages.2.layers.1.dwconv.weight", "shape", NULL);
    /* the weights of another width: the first mis-shaped tensor is named */
    if (rewrite_case("mobilenet_v2", "width", "{\"model_type\": \"mobilenet_v2\", \"depth_multiplier\": 0.35, "
                     "\"image_size\": 72}", RW_PREFIX, NULL, dir, sizeof dir) == 0)
        expect_load_error(dir, "conv_stem.first_conv.convolution.weight", "shape", NULL);
    if (rewrite_case("efficientnet", "nodw", NULL, RW_DROP, "blocks.4.depthwise_conv.depthwise_conv.weight", dir,
                     sizeof dir) == 0)
        expect_load_error(dir, "encoder.blocks.4.depthwise_conv.depthwise_conv.weight", "not found", NULL);
    /* a truncated file */
    if (rewrite_case("convnext", "truncated", NULL, RW_PREFIX, NULL, dir, sizeof dir) == 0) {
        char path[700];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        CHECK(truncate(path, 5000) == 0, "truncating %s", path);
        expect_load_error(dir, "model.safetensors", NULL);
    }
}

/* a config alone, with the golden weights of arch: the error must name `key` */
static void bad_config(const char *arch, const char *sub, const char *cfg, const char *key) {
    char dir[600];
    if (rewrite_case(arch, sub, cfg, RW_PREFIX, NULL, dir, sizeof dir) == 0) expect_load_error(dir, key, NULL);
}

static void test_bad_configs(void) {
    bad_config("mobilenet_v2", "c1", "{\"model_type\": \"mobilenet_v2\", \"depth_multiplier\": 0}", "depth_multiplier");
    bad_config("mobilenet_v2", "c2", "{\"model_type\": \"mobilenet_v2\", \"hidden_act\": \"swoosh\"}", "hidden_act");
    bad_config("mobilenet_v2", "c3", "{\"model_type\": \"mobilenet_v2\", \"tf_padding\": \"yes\"}", "tf_padding");
    bad_config("mobilenet_v2", "c4", "{\"model_type\": \"mobilenet_v2\", \"layer_norm_eps\": -1}", "layer_norm_eps");
    bad_config("efficientnet", "c5",
               "{\"model_type\": \"efficientnet\", \"width_coefficient\": 0.2, \"hidden_dim\": 320}", "hidden_dim");
    bad_config("efficientnet", "c6", "{\"model_type\": \"efficientnet\", \"strides\": [1, 3, 2, 2, 1, 2, 1]}",
               "strides");
    bad_config("efficientnet", "c7", "{\"model_type\": \"efficientnet\", \"kernel_sizes\": [3, 3, 5]}", "kernel_sizes");
    bad_config("efficientnet", "c8", "{\"model_type\": \"efficientnet\", \"pooling_type\": \"sum\"}", "pooling_type");
    bad_config("efficientnet", "c9", "{\"model_type\": \"efficientnet\", \"depthwise_padding\": [1.5]}",
               "depthwise_padding");
    bad_config("convnext", "c10", "{\"model_type\": \"convnext\", \"num_stages\": 5}", "num_stages");
    bad_config("convnext", "c11", "{\"model_type\": \"convnext\", \"hidden_sizes\": \"wide\"}", "hidden_sizes");
    bad_config("convnext", "c12", "{\"model_type\": \"convnext\", \"layer_norm_eps\": \"small\"}", "layer_norm_eps");
}

/* ---- inputs ---- */

static void forward_error(const char *arch, int64_t b, int64_t c, int64_t h, int64_t w, ft_dtype dt, const char *part) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", ft_test_golden_dir(), arch);
    ft_model *m = NULL;
    ft_model_options opt = ft_model_options_default();
    CHECK_OK(ctx, ft_model_load(ctx, dir, &opt, &m));
    size_t n = (size_t)(b * c * h * w);
    void *px = calloc(n ? n : 1, 8);
    ft_host_tensor in = {"pixel_values", dt, 4, {b, c, h, w}, px};
    if (m) {
        ft_status st = ft_model_forward(m, &in, 1);
        CHECK(st != FT_OK && strstr(ft_ctx_errmsg(ctx), part), "%s %lldx%lldx%lldx%lld: %s (expected '%s')", arch,
              (long long)b, (long long)c, (long long)h, (long long)w, ft_ctx_errmsg(ctx), part);
    }
    free(px);
    ft_model_free(m);
    ft_ctx_free(ctx);
}

static void test_bad_inputs(void) {
    forward_error("mobilenet_v2", 1, 4, 32, 32, FT_DTYPE_F32, "channels");
    forward_error("mobilenet_v2", 1, 3, 32, 32, FT_DTYPE_I64, "float");
    forward_error("efficientnet", 1, 3, 1, 40, FT_DTYPE_F32, "pixels");
    forward_error("efficientnet", 2, 3, 40, 3, FT_DTYPE_F32, "too small");
    forward_error("convnext", 1, 3, 28, 64, FT_DTYPE_F32, "too small");
    forward_error("convnext", 1, 3, 3, 64, FT_DTYPE_F32, "pixels");
}

int main(void) {
    ft_test_tmpdir_make("zoo_vision_b");
    RUN(test_golden_cpu);
    RUN(test_golden_cpu_reduced);
    RUN(test_golden_cuda);
    RUN(test_passes_fired_cpu);
    RUN(test_passes_fired_cuda);
    RUN(test_presets);
    RUN(test_prefixed_and_legacy_names);
    RUN(test_bad_checkpoints);
    RUN(test_bad_configs);
    RUN(test_bad_inputs);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

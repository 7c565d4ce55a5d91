/*
 * test_zoo_vision_a.c - ViTModel, Wav2Vec2Model and HubertModel end to end:
 * the HF golden cases in eager, graph and static mode on the CPU (fp32 at the
 * golden criterion, fp16 and bf16 looser) and on CUDA (the emulator in `make
 * test`); preset parameter and MAC counts against the published ones; the
 * graph passes that must fire (Q/K/V merge, fused attention, GEMM and conv
 * epilogues, LN + residual) and kernels per layer, eager against graph.
 * tests/test_zoo_vision_a_io.c has the loader rules, audio masks and bad input.
 */
#include "ft_golden.h"
#include "ft_test.h"
#include "zoo_test_util.h"

#include "ftengine.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const req_vit[] = {"last_hidden_state", "pooler_output", "hidden_states.0", "hidden_states.2",
                                      NULL};
static const char *const req_w2v[] = {"last_hidden_state", "extract_features", "hidden_states.0",
                                      "hidden_states.2", NULL};
static const char *const req_hubert[] = {"last_hidden_state", "hidden_states.0", "hidden_states.2", NULL};

static const struct {
    const char *name;
    const char *const *required;
} cases[] = {{"vit", req_vit}, {"wav2vec2", req_w2v}, {"hubert", req_hubert}};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const ft_mode modes[3] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};
/* bf16 keeps 8 mantissa bits and rounds the inputs too: ~1.5e-2 relative L2, and the
 * audio front end's 7 convolutions put single elements of the 2-layer models up to
 * ~0.13 off in eager mode (every op rounded) */
static const golden_tol GOLDEN_BF16 = {2e-1, 5e-2, 3e-2};

/* ---- golden cases ---- */

static void golden_all(ft_device dev, ft_dtype dtype, golden_tol tol, int n_modes) {
    for (int c = 0; c < N_CASES; c++)
        for (int k = 0; k < n_modes; k++) golden_run_check(cases[c].name, dev, modes[k], dtype, cases[c].required, tol);
}

static void test_golden_cpu(void) { golden_all(FT_DEVICE_CPU, FT_DTYPE_F32, GOLDEN_FP32, 3); }

static void test_golden_cpu_reduced_precision(void) {
    golden_all(FT_DEVICE_CPU, FT_DTYPE_F16, GOLDEN_FP16, 3);
    golden_all(FT_DEVICE_CPU, FT_DTYPE_BF16, GOLDEN_BF16, 2);
}

static int no_cuda(void) {
    if (ft_cuda_device_count() > 0) return 0;
    SKIP("no CUDA device");
    return 1;
}

static void test_golden_cuda(void) {
    if (no_cuda()) return;
    golden_all(FT_DEVICE_CUDA, FT_DTYPE_F32, GOLDEN_FP32, 3);
}

static void test_golden_cuda_reduced_precision(void) {
    if (no_cuda()) return;
    golden_all(FT_DEVICE_CUDA, FT_DTYPE_F16, GOLDEN_FP16, 3);
    golden_all(FT_DEVICE_CUDA, FT_DTYPE_BF16, GOLDEN_BF16, 1);
}

/* HubertModel returns no extract_features; wav2vec2 does (checked above). */
static void test_hubert_outputs(void) {
    ft_ctx *ctx = NULL;
    golden_case g;
    ft_model *m = NULL;
    if (golden_open_on(FT_DEVICE_CPU, "hubert", &ctx, &g)) return;
    CHECK_OK(ctx, ft_model_load(ctx, g.dir, NULL, &m));
    if (m) {
        CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
        CHECK(ft_model_output_count(m) == 1 && ft_model_output_find(m, "last_hidden_state"),
              "HubertModel: %d outputs, expected last_hidden_state only", ft_model_output_count(m));
        CHECK(!strcmp(ft_model_arch(m), "HubertModel"), "arch %s", ft_model_arch(m));
    }
    ft_model_free(m);
    golden_close(&g);
    ft_ctx_free(ctx);
}

/* ---- presets ---- */

/* Parameters: tests/golden/README-zoo.md's table (ViT with its pooler); MACs:
 * counted op by op at batch 1, 224x224 images, 16000 audio samples. */
static void test_preset_counts(void) {
    static const struct {
        const char *name, *arch;
        int64_t params, macs;
    } p[] = {
        {"vit-base-patch16-224", "ViTModel", 86389248, 17563650048LL},
        {"vit-base-patch32-224", "ViTModel", 88045824, 4409008128LL},
        {"wav2vec2-base", "Wav2Vec2Model", 94371712, 6911374336LL},
        {"wav2vec2-large-lv60", "Wav2Vec2Model", 315438720, 17810762752LL},
        {"hubert-base-ls960", "HubertModel", 94371712, 6911374336LL},
        {"hubert-large-ll60k", "HubertModel", 315438720, 17810762752LL},
    };
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    ft_model_options o = ft_model_options_default();
    o.weights = FT_WEIGHTS_NONE; /* shapes only: nothing allocated */
    for (size_t i = 0; ctx && i < sizeof p / sizeof p[0]; i++) {
        ft_model *m = NULL;
        int64_t macs = 0;
        if (ft_model_load(ctx, p[i].name, &o, &m) != FT_OK || ft_model_macs(m, 1, 0, &macs) != FT_OK) {
            CHECK(0, "%s: %s", p[i].name, ft_ctx_errmsg(ctx));
            ft_ctx_clear_error(ctx);
        } else {
            CHECK(!strcmp(ft_model_arch(m), p[i].arch), "%s: %s", p[i].name, ft_model_arch(m));
            CHECK(ft_model_param_count(m) == p[i].params, "%s: %lld parameters, expected %lld", p[i].name,
                  (long long)ft_model_param_count(m), (long long)p[i].params);
            CHECK(macs == p[i].macs, "%s: %lld MACs, expected %lld", p[i].name, (long long)macs,
                  (long long)p[i].macs);
        }
        ft_model_free(m);
    }
    /* MACs are linear in batch; ViT takes its own image size only */
    ft_model *m = NULL;
    int64_t m1 = 0, m3 = 0;
    if (ctx && ft_model_load(ctx, "vit-base-patch32-224", &o, &m) == FT_OK) {
        CHECK_OK(ctx, ft_model_macs(m, 1, 224, &m1));
        CHECK_OK(ctx, ft_model_macs(m, 3, 0, &m3));
        CHECK(m3 == 3 * m1, "batch 3: %lld MACs, 3 x %lld", (long long)m3, (long long)m1);
        CHECK(ft_model_macs(m, 1, 256, &m1) == FT_ERR_INVALID_ARG && strstr(ft_ctx_errmsg(ctx), "224"),
              "256x256 accepted: %s", ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
    }
    ft_model_free(m);
    ft_ctx_free(ctx);
}

/* ---- graph passes ---- */

static int fusion_disabled(void) {
    const char *v = getenv("FT_DISABLE_FUSION"), *p = getenv("FT_DISABLE_PASSES");
    if ((v && *v && strcmp(v, "0")) || (p && *p)) {
        SKIP("FT_DISABLE_FUSION or FT_DISABLE_PASSES is set");
        return 1;
    }
    return 0;
}

typedef struct plan_counts {
    ft_graph_stats gs;
    int steps, attention, lin_residual, lin_gelu, lin_tanh, conv_act, loose_act, ln_residual;
} plan_counts;

/* Runs model directory `dir` (inputs: golden case `src`'s) once in `mode` on `dev` and
 * counts what its plan holds; 0, or -1 after recording why. */
static int plan_of(ft_device dev, const char *src, const char *dir, ft_mode mode, ft_dtype dtype, plan_counts *pc) {
    memset(pc, 0, sizeof *pc);
    ft_ctx *ctx = NULL;
    golden_case g;
    if (golden_open_on(dev, src, &ctx, &g)) return -1;
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    o.dtype = dtype;
    ft_model *m = NULL;
    int rc = -1;
    if (ft_model_load(ctx, dir ? dir : g.dir, &o, &m) != FT_OK || ft_model_forward(m, g.in, g.n_in) != FT_OK ||
        ft_model_graph_stats(m, &pc->gs) != FT_OK) {
        CHECK(0, "%s: %s", dir ? dir : g.dir, ft_ctx_errmsg(ctx));
    } else {
        rc = 0;
        pc->steps = ft_model_plan_length(m);
        for (int i = 0; i < pc->steps; i++) {
            ft_plan_step_info s;
            if (ft_model_plan_step(m, i, &s) != FT_OK) continue;
            bool lin = !strcmp(s.op, "linear"), conv = !strncmp(s.op, "conv", 4);
            pc->attention += !strcmp(s.op, "attention");
            pc->lin_residual += lin && strstr(s.detail, "residual") != NULL;
            pc->lin_gelu += lin && strstr(s.detail, "gelu") != NULL;
            pc->lin_tanh += lin && strstr(s.detail, "tanh") != NULL;
            pc->conv_act += conv && strstr(s.detail, "gelu") != NULL;
            pc->loose_act += !strcmp(s.op, "gelu") || !strcmp(s.op, "tanh");
            pc->ln_residual += !strcmp(s.op, "layernorm") && strstr(s.detail, "residual") != NULL;
        }
    }
    ft_model_free(m);
    golden_close(&g);
    ft_ctx_free(ctx);
    return rc;
}

/* Two-layer golden models: every layer's Q/K/V one GEMM, its attention one kernel,
 * the output projections carrying bias + residual, the FFN's first GEMM its GELU;
 * the audio convs their GELU (conv 0 excepted: the group norm sits between), the
 * positional conv too; ViT's pooler its tanh. */
static void check_passes(ft_device dev, ft_mode mode, ft_dtype dtype) {
    for (int c = 0; c < N_CASES; c++) {
        plan_counts p;
        if (plan_of(dev, cases[c].name, NULL, mode, dtype, &p)) continue;
        const char *n = cases[c].name;
        bool vit = !strcmp(n, "vit");
        printf("  %s %s %s %s: %d kernels (eager %d): qkv %d, attention %d, epilogues %d, ln+res %d, eltwise %d\n",
               n, ft_device_name(dev), ft_mode_name(mode), ft_dtype_name(dtype), p.gs.kernels_per_forward,
               p.gs.traced_kernels, p.gs.qkv_merged, p.gs.attention_fused, p.gs.epilogues, p.gs.ln_residual,
               p.gs.eltwise_fused);
        CHECK(p.gs.qkv_merged == 2 && p.gs.attention_fused == 2 && p.attention == 2,
              "%s: qkv merged %d, attention fused %d (%d steps), want 2 of each", n, p.gs.qkv_merged,
              p.gs.attention_fused, p.attention);
        CHECK(p.lin_residual == 4 && p.lin_gelu == 2, "%s: %d GEMMs + residual, %d GEMMs + GELU; want 4 and 2", n,
              p.lin_residual, p.lin_gelu);
        if (vit)
            CHECK(p.lin_tanh == 1 && p.loose_act == 0, "%s: pooler tanh fused %d, %d loose activations", n,
                  p.lin_tanh, p.loose_act);
        else /* 7 convs: 1..6 + the positional one; conv 0's GELU follows its group norm */
            CHECK(p.conv_act == 7 && p.loose_act == 1, "%s: %d convs + GELU (want 7), %d loose activations (want 1)",
                  n, p.conv_act, p.loose_act);
        CHECK(p.gs.kernels_per_forward < p.gs.traced_kernels, "%s: fusion saved nothing", n);
    }
}

static void test_passes_cpu(void) {
    if (fusion_disabled()) return;
    check_passes(FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F32);
}

static void test_passes_cuda(void) {
    if (fusion_disabled() || no_cuda()) return;
    check_passes(FT_DEVICE_CUDA, FT_MODE_STATIC, FT_DTYPE_F16);
}

/* Post-LN layers compute LN(x + sublayer(x)): the epilogue pass takes the residual
 * into the sublayer's last GEMM first; without it the LN + residual pass takes it
 * (two per layer), so either way the add is no kernel of its own. */
static void test_ln_residual_cpu(void) {
    if (fusion_disabled()) return;
    const char *audio[2] = {"wav2vec2", "hubert"};
    setenv("FT_DISABLE_PASSES", "epilogue", 1);
    plan_counts off[2];
    int rc[2];
    for (int c = 0; c < 2; c++) rc[c] = plan_of(FT_DEVICE_CPU, audio[c], NULL, FT_MODE_GRAPH, FT_DTYPE_F32, &off[c]);
    unsetenv("FT_DISABLE_PASSES");
    for (int c = 0; c < 2; c++) {
        plan_counts on;
        if (rc[c] || plan_of(FT_DEVICE_CPU, audio[c], NULL, FT_MODE_GRAPH, FT_DTYPE_F32, &on)) continue;
        CHECK(off[c].gs.ln_residual == 4 && off[c].ln_residual == 4 && off[c].gs.epilogues == 0,
              "%s without epilogues: %d LN + residual (%d steps), %d epilogues; want 4, 4, 0", audio[c],
              off[c].gs.ln_residual, off[c].ln_residual, off[c].gs.epilogues);
        CHECK(on.lin_residual == 4, "%s: %d GEMMs + residual", audio[c], on.lin_residual);
    }
}

/* Kernels per encoder layer, eager (traced launches) and graph (after the passes):
 * the 2-layer model minus the same checkpoint read as 1 layer. */
static void test_kernels_per_layer(void) {
    if (fusion_disabled()) return;
    static const struct {
        const char *src, *layers2, *layers1;
        int max_graph;
    } k[] = {
        {"vit", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1", 7},
        {"wav2vec2", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1", 7},
        {"hubert", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1", 7},
        {"variants/wav2vec2_large_mask", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1", 7},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char dir[600], sub[64];
        snprintf(sub, sizeof sub, "layers1_%zu", i);
        if (zoo_case_dir(k[i].src, sub, k[i].layers2, k[i].layers1, dir, sizeof dir)) {
            CHECK(0, "%s: cannot make the 1-layer copy", k[i].src);
            continue;
        }
        plan_counts one, two;
        if (plan_of(FT_DEVICE_CPU, k[i].src, dir, FT_MODE_GRAPH, FT_DTYPE_F32, &one) ||
            plan_of(FT_DEVICE_CPU, k[i].src, NULL, FT_MODE_GRAPH, FT_DTYPE_F32, &two))
            continue;
        int graph = two.gs.kernels_per_forward - one.gs.kernels_per_forward;
        int eager = two.gs.traced_kernels - one.gs.traced_kernels;
        printf("  %s: %d kernels per layer in graph mode, %d eager (whole model, 2 layers: %d graph, %d eager)\n",
               k[i].src, graph, eager, two.gs.kernels_per_forward, two.gs.traced_kernels);
        CHECK(graph <= k[i].max_graph && graph < eager, "%s: %d kernels per layer in graph mode (eager %d), want <= %d",
              k[i].src, graph, eager, k[i].max_graph);
    }
}

int main(void) {
    ft_test_tmpdir_make("zoo_vision_a");
    RUN(test_golden_cpu);
    RUN(test_golden_cpu_reduced_precision);
    RUN(test_golden_cuda);
    RUN(test_golden_cuda_reduced_precision);
    RUN(test_hubert_outputs);
    RUN(test_preset_counts);
    RUN(test_passes_cpu);
    RUN(test_passes_cuda);
    RUN(test_ln_residual_cpu);
    RUN(test_kernels_per_layer);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

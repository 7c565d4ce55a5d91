/*
 * test_pass_nchwc.c - the blocked-channel layout pass (graph/pass_nchwc.c) on
 * CPU plans: it fires (nodes blocked, reorders only at the edges, counted in
 * the graph statistics and shown by the plan), outputs stay within the golden
 * criterion in eager, graph and static mode at 1 and 2 threads (the golden
 * ResNet mixes 8-channel NCHW convolutions into the blocked region, and its
 * hidden states are outputs too), turning the pass off gives the same outputs,
 * and ResNet-50 runs blocked from the first convolution to the pooler with one
 * reorder, for its last_hidden_state.
 */
#include "ft_golden.h"
#include "ft_test.h"
#include "ftengine.h"

#include <stdlib.h>
#include <string.h>

static ft_ctx *cpu_ctx(int threads) {
    ft_ctx_options o = ft_ctx_options_default();
    o.device = FT_DEVICE_CPU;
    o.cpu_threads = threads;
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create_ex(&o, &ctx));
    return ctx;
}

/* The golden ResNet in `mode`: every output (hidden states too) against HF's
 * within the fp32 criterion; *stats filled for graph and static. Returns the
 * number of failed comparisons. */
static int golden_resnet(ft_mode mode, int threads, ft_graph_stats *stats, float **first_out, int64_t *n_out) {
    ft_ctx *ctx = cpu_ctx(threads);
    golden_case gc;
    ft_model *m = NULL;
    int fails = 0;
    memset(stats, 0, sizeof *stats);
    if (!ctx || golden_open(ctx, "resnet", &gc) != 0) {
        CHECK(0, "resnet golden case: %s", ctx ? ft_ctx_errmsg(ctx) : "no context");
        ft_ctx_free(ctx);
        return 1;
    }
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    o.output_hidden_states = 1;
    CHECK_OK(ctx, ft_model_load(ctx, gc.dir, &o, &m));
    if (m) CHECK_OK(ctx, ft_model_forward(m, gc.in, gc.n_in));
    int compared = 0;
    for (int i = 0; m && i < ft_model_output_count(m); i++) {
        const ft_st_tensor *e = ft_st_find(gc.expected, ft_model_output_name(m, i));
        if (!e) continue;
        char msg[512];
        int rc = golden_compare(ctx, ft_model_output(m, i), e, GOLDEN_FP32, msg, sizeof msg);
        CHECK(rc == 0, "resnet [%s, %d threads] %s", ft_mode_name(mode), threads, msg);
        fails += rc != 0;
        compared++;
    }
    CHECK(compared >= 3, "resnet: %d outputs compared", compared);
    if (m && first_out) {
        const ft_tensor *t = ft_model_output_find(m, "last_hidden_state");
        *n_out = t ? ft_tensor_numel(t) : 0;
        *first_out = malloc((size_t)(*n_out > 0 ? *n_out : 1) * sizeof(float));
        CHECK(t && ft_tensor_to_host(ctx, t, FT_DTYPE_F32, *first_out, (size_t)*n_out * sizeof(float)) == FT_OK,
              "reading last_hidden_state");
    }
    if (m && mode != FT_MODE_EAGER) CHECK_OK(ctx, ft_model_graph_stats(m, stats));
    ft_model_free(m);
    golden_close(&gc);
    ft_ctx_free(ctx);
    return fails;
}

/* Eager, graph and static, 1 and 2 threads: the golden criterion everywhere;
 * the plans are blocked (the pass fired) and convert only at the edges: into
 * NCHW before the 8-channel convolutions and for the stage outputs. */
static void test_golden_every_mode(void) {
    for (int threads = 1; threads <= 2; threads++)
        for (int mode = FT_MODE_EAGER; mode <= FT_MODE_STATIC; mode++) {
            ft_graph_stats gs;
            golden_resnet((ft_mode)mode, threads, &gs, NULL, NULL);
            if (mode == FT_MODE_EAGER) continue;
            printf("  %s, %d threads: %d kernels, %d blocked nodes, %d reorders\n", ft_mode_name((ft_mode)mode),
                   threads, gs.kernels_per_forward, gs.nchwc_nodes, gs.nchwc_reorders);
            CHECK(gs.valid && gs.nchwc_nodes >= 10, "%s: %d blocked nodes", ft_mode_name((ft_mode)mode), gs.nchwc_nodes);
            CHECK(gs.nchwc_reorders >= 1 && gs.nchwc_reorders < gs.nchwc_nodes, "%d reorders for %d blocked nodes",
                  gs.nchwc_reorders, gs.nchwc_nodes);
        }
}

/* FT_DISABLE_PASSES=nchwc: nothing blocked, and the same outputs (within the
 * summation-order difference of the two convolution kernels). */
static void test_pass_off_same_outputs(void) {
    ft_graph_stats on, off;
    float *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    golden_resnet(FT_MODE_GRAPH, 1, &on, &a, &na);
    setenv("FT_DISABLE_PASSES", "nchwc", 1);
    golden_resnet(FT_MODE_GRAPH, 1, &off, &b, &nb);
    unsetenv("FT_DISABLE_PASSES");
    CHECK(on.nchwc_nodes > 0 && off.nchwc_nodes == 0 && off.nchwc_reorders == 0, "blocked nodes %d on, %d off",
          on.nchwc_nodes, off.nchwc_nodes);
    CHECK(off.kernels_per_forward == on.kernels_per_forward - on.nchwc_reorders,
          "%d kernels off, %d on with %d reorders", off.kernels_per_forward, on.kernels_per_forward,
          on.nchwc_reorders);
    int bad = !a || !b || na != nb || na == 0;
    for (int64_t i = 0; !bad && i < na; i++) bad = !(fabsf(a[i] - b[i]) <= 1e-5f * (1.0f + fabsf(b[i])));
    CHECK(!bad, "outputs differ with the pass off");
    free(a);
    free(b);
}

/* Runs preset (random weights, 64 x 64 images, batch 2) in eager and in graph
 * mode on 2 threads; check sees the graph model and its stats; last_hidden_state
 * must agree between the two within 1e-5 relative L2. */
static void graph_vs_eager(const char *preset, void (*check)(ft_model *m, const ft_graph_stats *gs, int arg),
                           int arg) {
    float *out[2] = {NULL, NULL};
    int64_t n[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        ft_ctx *ctx = cpu_ctx(2);
        ft_model_options o = ft_model_options_default();
        o.mode = k ? FT_MODE_GRAPH : FT_MODE_EAGER;
        ft_model *m = NULL;
        ft_host_tensor in[8];
        int n_in = 0;
        void *owned = NULL;
        CHECK_OK(ctx, ft_model_load(ctx, preset, &o, &m));
        if (m) CHECK_OK(ctx, ft_model_example_inputs(m, 2, 64, in, &n_in, &owned));
        if (m && owned) CHECK_OK(ctx, ft_model_forward(m, in, n_in));
        const ft_tensor *t = m ? ft_model_output_find(m, "last_hidden_state") : NULL;
        n[k] = t ? ft_tensor_numel(t) : 0;
        out[k] = malloc((size_t)(n[k] > 0 ? n[k] : 1) * sizeof(float));
        CHECK(t && ft_tensor_to_host(ctx, t, FT_DTYPE_F32, out[k], (size_t)n[k] * sizeof(float)) == FT_OK,
              "%s output", preset);
        if (k && m) {
            ft_graph_stats gs;
            CHECK_OK(ctx, ft_model_graph_stats(m, &gs));
            printf("  %s: %d kernels, %d blocked, %d reorders\n", preset, gs.kernels_per_forward, gs.nchwc_nodes,
                   gs.nchwc_reorders);
            check(m, &gs, arg);
        }
        free(owned);
        ft_model_free(m);
        ft_ctx_free(ctx);
    }
    double e2 = 0, r2 = 0;
    for (int64_t i = 0; n[0] == n[1] && i < n[0]; i++) {
        double d = (double)out[1][i] - out[0][i];
        e2 += d * d;
        r2 += (double)out[0][i] * out[0][i];
    }
    CHECK(n[0] > 0 && n[0] == n[1] && r2 > 0 && sqrt(e2 / r2) <= 1e-5, "%s graph vs eager: rel L2 %.3g", preset,
          r2 > 0 ? sqrt(e2 / r2) : -1.0);
    free(out[0]);
    free(out[1]);
}

static void resnet50_plan(ft_model *m, const ft_graph_stats *gs, int arg) {
    (void)arg;
    CHECK(gs->nchwc_nodes == 54, "%d blocked nodes (53 convolutions + the max pool)", gs->nchwc_nodes);
    CHECK(gs->nchwc_reorders == 1, "%d reorders (the last_hidden_state output only)", gs->nchwc_reorders);
    CHECK(gs->kernels_per_forward == 56, "%d kernels (53 conv, pool, reorder, pooler)", gs->kernels_per_forward);
    /* every residual block's last convolution writes over its residual, the
     * last one's output (last_hidden_state's source) included: 16 blocks */
    printf("  resnet-50: %d convolutions over their residual\n", gs->residual_in_place);
    CHECK(gs->residual_in_place == 16, "%d convolutions in place (16 residual blocks)", gs->residual_in_place);
    /* Winograd takes the stride-1 3x3s of the 16 x 16 and 8 x 8 planes (2 x 64 and
     * 2 x 16 tiles; stages 1 and 2: 3 + 3 blocks), not those of 4 x 4 and 2 x 2
     * (8 and 2 tiles); graph == eager holds with it */
    printf("  resnet-50: %d Winograd convolutions\n", gs->winograd_convs);
    CHECK(gs->winograd_convs == 6, "%d Winograd convolutions (stages 1 and 2: 6)", gs->winograd_convs);
    char d[160] = "";
    for (int i = 0; i < ft_model_plan_length(m); i++) {
        ft_plan_step_info si;
        if (ft_model_plan_step(m, i, &si) == FT_OK && strstr(si.detail, "Winograd")) {
            snprintf(d, sizeof d, "%s", si.detail);
            break;
        }
    }
    CHECK(strstr(d, "NCHWc+Winograd") != NULL, "no plan step marked Winograd (first: '%s')", d);
}

/* ResNet-50: every convolution and the max pool blocked, one reorder
 * (last_hidden_state), the pooler read straight from the blocked layout, six
 * 3x3s on Winograd; graph == eager. */
static void test_resnet50_one_region(void) { graph_vs_eager("resnet-50", resnet50_plan, 0); }

static void blocked_count(ft_model *m, const ft_graph_stats *gs, int blocked) {
    (void)m;
    CHECK(gs->nchwc_nodes == blocked, "%d blocked nodes, %d expected", gs->nchwc_nodes, blocked);
    CHECK(gs->nchwc_reorders == 1, "%d reorders (the last_hidden_state output only)", gs->nchwc_reorders);
}

/* MobileNetV2 and EfficientNet-B0: the depthwise convolutions (EfficientNet's with
 * TF-SAME per-side padding at stride 2) and the squeeze-excitation gates blocked
 * with the convolutions around them, one reorder (last_hidden_state); graph == eager. */
static void test_mobile_nets_blocked(void) {
    graph_vs_eager("mobilenet_v2_1.0_224", blocked_count, 43);
    graph_vs_eager("efficientnet-b0", blocked_count, 45);
}

int main(void) {
    RUN(test_golden_every_mode);
    RUN(test_pass_off_same_outputs);
    RUN(test_resnet50_one_region);
    RUN(test_mobile_nets_blocked);
    return ft_test_finish();
}

/*
 * test_plan_info.c - ft_model_plan_step on every golden model, read only through
 * the public API: the plan's steps agree with its stats, every step feeds a later
 * step or an output (nothing dead survives the passes), no step overwrites a
 * buffer some later step still reads (the memory plan, checked from outside;
 * a CPU convolution may write over its residual at the residual's last read),
 * and on CUDA the per-step graph node counts add up to the captured graph.
 */
#include "ft_test.h"
#include "ft_golden.h"

#include <stdint.h>
#include <string.h>

static const char *const cases[] = {"bert", "funnel", "mobilebert", "resnet", "wavlm",
                                    "vit", "wav2vec2", "hubert", "squeezebert", "deberta"};

/* Checks the plan of m's last forward; returns its length. */
static int check_plan(const ft_model *m, const char *what, int captured) {
    ft_graph_stats gs;
    if (ft_model_graph_stats(m, &gs) != FT_OK || !gs.valid) {
        CHECK(0, "%s: no graph stats", what);
        return 0;
    }
    int n = ft_model_plan_length(m);
    CHECK(n == gs.kernels_per_forward, "%s: %d steps, stats say %d kernels", what, n,
          gs.kernels_per_forward);
    ft_plan_step_info *s = (ft_plan_step_info *)calloc((size_t)(n ? n : 1), sizeof *s);
    int *last_read = (int *)calloc((size_t)(n ? n : 1), sizeof *last_read);
    if (!s || !last_read) {
        CHECK(0, "out of host memory");
        free(s);
        free(last_read);
        return n;
    }
    int outputs = 0, nodes = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        last_read[i] = -1;
        if (ft_model_plan_step(m, i, &s[i]) != FT_OK) {
            CHECK(0, "%s: step %d unreadable", what, i);
            bad = 1;
            continue;
        }
        CHECK(s[i].op && *s[i].op, "%s: step %d has no op name", what, i);
        CHECK(s[i].ndim >= 1 && s[i].ndim <= FT_MAX_DIMS && s[i].bytes > 0, "%s: step %d shape", what, i);
        CHECK(s[i].arena_offset != SIZE_MAX && s[i].arena_offset + s[i].bytes <= gs.arena_bytes,
              "%s: step %d (%s) at %zu + %zu B outside the %zu B arena", what, i, s[i].op,
              s[i].arena_offset, s[i].bytes, gs.arena_bytes);
        CHECK(s[i].n_src >= 1, "%s: step %d (%s) reads nothing", what, i, s[i].op);
        for (int k = 0; k < s[i].n_src; k++) {
            int src = s[i].src_step[k];
            CHECK(src == FT_PLAN_SRC_INPUT || src == FT_PLAN_SRC_CONST || (src >= 0 && src < i),
                  "%s: step %d source %d is %d", what, i, k, src);
            if (src >= 0 && src < i) last_read[src] = i;
        }
        outputs += s[i].is_output;
        if (captured) {
            CHECK(s[i].graph_nodes >= 1, "%s: step %d (%s) captured %d graph nodes", what, i, s[i].op,
                  s[i].graph_nodes);
            nodes += s[i].graph_nodes;
        } else {
            CHECK(s[i].graph_nodes == 0, "%s: step %d has graph nodes without a graph", what, i);
        }
    }
    CHECK(outputs >= 1, "%s: no step holds an output", what);
    if (captured) CHECK(nodes == gs.graph_nodes, "%s: steps captured %d nodes, the graph has %d", what, nodes, gs.graph_nodes);
    /* dead-node elimination, seen from outside: every step is used */
    for (int i = 0; i < n && !bad; i++)
        CHECK(s[i].is_output || last_read[i] > i, "%s: step %d (%s) feeds nothing", what, i, s[i].op);
    /* no later step writes over a buffer before its last reader ran, and no step
     * shares bytes with an output (outputs live for the whole forward) */
    for (int i = 0; i < n && !bad; i++)
        for (int j = i + 1; j < n; j++) {
            int overlap = s[j].arena_offset < s[i].arena_offset + s[i].bytes &&
                          s[i].arena_offset < s[j].arena_offset + s[j].bytes;
            if (!overlap) continue;
            CHECK(!s[i].is_output && !s[j].is_output, "%s: steps %d and %d share bytes with an output",
                  what, i, j);
            /* the one exception: a CPU convolution over its residual when that is the
             * residual's last read (same bytes; the kernel accumulates into them) */
            int in_place = last_read[i] == j && !strcmp(s[j].op, "conv2d") && strstr(s[j].detail, "residual") &&
                           s[j].n_src >= 2 && s[j].src_step[s[j].n_src - 1] == i &&
                           s[j].arena_offset == s[i].arena_offset && s[j].bytes == s[i].bytes;
            CHECK(last_read[i] < j || in_place, "%s: step %d (%s) overwrites step %d's output, read until step %d",
                  what, j, s[j].op, i, last_read[i]);
        }
    free(s);
    free(last_read);
    return n;
}

static void run_plans(ft_device dev, ft_mode mode, ft_dtype dtype, int captured) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(dev, &ctx));
    for (size_t c = 0; ctx && c < sizeof cases / sizeof cases[0]; c++) {
        golden_case gc;
        if (golden_open(ctx, cases[c], &gc)) {
            CHECK(0, "golden %s: %s", cases[c], ft_ctx_errmsg(ctx));
            continue;
        }
        ft_model_options o = ft_model_options_default();
        o.mode = mode;
        o.dtype = dtype;
        ft_model *m = NULL;
        CHECK_OK(ctx, ft_model_load(ctx, gc.dir, &o, &m));
        CHECK(ft_model_plan_length(m) == 0, "%s: a plan before the first forward", cases[c]);
        ft_status st = m ? ft_model_forward(m, gc.in, gc.n_in) : FT_ERR_INVALID_ARG;
        CHECK(st == FT_OK, "%s forward: %s", cases[c], ft_ctx_errmsg(ctx));
        char what[96];
        snprintf(what, sizeof what, "%s %s %s", cases[c], ft_device_name(dev), ft_mode_name(mode));
        if (st == FT_OK) check_plan(m, what, captured);
        ft_model_free(m);
        golden_close(&gc);
    }
    ft_ctx_free(ctx);
}

static void test_plan_info_cpu(void) {
    run_plans(FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F32, 0);
    run_plans(FT_DEVICE_CPU, FT_MODE_STATIC, FT_DTYPE_F32, 0);
}

static void test_plan_info_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    run_plans(FT_DEVICE_CUDA, FT_MODE_GRAPH, FT_DTYPE_F16, 0);
    run_plans(FT_DEVICE_CUDA, FT_MODE_STATIC, FT_DTYPE_F16, !getenv("FT_DISABLE_CUDA_GRAPHS"));
}

/* A context on dev with golden case `name` open, for a test of the passes; 0, or
 * -1 after a SKIP (fusion switched off, no device) or a failure. */
static int open_for_fusion(ft_device dev, const char *name, ft_ctx **ctx, golden_case *gc) {
    const char *nofuse = getenv("FT_DISABLE_FUSION");
    *ctx = NULL;
    if (nofuse && *nofuse && strcmp(nofuse, "0")) {
        SKIP("FT_DISABLE_FUSION is set");
        return -1;
    }
    return golden_open_on(dev, name, ctx, gc);
}

/* What the passes did shows in the steps: BERT's attention output projection
 * carries its residual, its FFN GEMM its GELU, its attention the mask. */
static void test_plan_info_describes_fusions(void) {
    ft_ctx *ctx = NULL;
    golden_case gc;
    if (open_for_fusion(FT_DEVICE_CPU, "bert", &ctx, &gc)) return;
    ft_model_options o = ft_model_options_default();
    ft_model *eager = NULL, *m = NULL;
    CHECK_OK(ctx, ft_model_load(ctx, gc.dir, &o, &eager));
    o.mode = FT_MODE_GRAPH;
    CHECK_OK(ctx, ft_model_load(ctx, gc.dir, &o, &m));
    if (eager && m) {
        CHECK_OK(ctx, ft_model_forward(eager, gc.in, gc.n_in));
        CHECK(ft_model_plan_length(eager) == 0, "eager mode has a plan");
        ft_plan_step_info s;
        CHECK(ft_model_plan_step(eager, 0, &s) == FT_ERR_INVALID_ARG, "eager step 0 readable");
        CHECK_OK(ctx, ft_model_forward(m, gc.in, gc.n_in));
        int n = ft_model_plan_length(m), residual = 0, gelu = 0, attention = 0, ln_res = 0;
        for (int i = 0; i < n; i++) {
            CHECK_OK(ctx, ft_model_plan_step(m, i, &s));
            if (!strcmp(s.op, "linear") && strstr(s.detail, "residual")) residual++;
            if (!strcmp(s.op, "linear") && strstr(s.detail, "+gelu")) gelu++;
            if (!strcmp(s.op, "attention") && !strcmp(s.detail, "mask")) attention++;
            if (!strcmp(s.op, "layernorm") && !strcmp(s.detail, "residual")) ln_res++;
        }
        /* 2 layers: the attention output and FFN output GEMMs take the residual, the
         * attentions the padding mask; the embeddings' last sum goes into their norm */
        CHECK(residual == 4 && gelu == 2 && attention == 2 && ln_res == 1,
              "residual %d, gelu %d, masked attention %d, layernorm+residual %d", residual, gelu,
              attention, ln_res);
        CHECK(ft_model_plan_step(m, n, &s) == FT_ERR_INVALID_ARG, "step past the end readable");
        CHECK(ft_model_plan_step(m, -1, &s) == FT_ERR_INVALID_ARG, "step -1 readable");
        CHECK(ft_model_plan_step(m, 0, NULL) == FT_ERR_INVALID_ARG, "NULL out accepted");
        CHECK(ft_model_plan_step(NULL, 0, &s) == FT_ERR_INVALID_ARG, "NULL model accepted");
        CHECK(ft_model_plan_length(NULL) == 0, "NULL model has a plan");
    }
    ft_model_free(eager);
    ft_model_free(m);
    golden_close(&gc);
    ft_ctx_free(ctx);
}

/* The plan of golden case `name` run once on dev in mode / dtype, steps malloc'd
 * into *out (n of them) with the graph stats; 0, or -1 after a SKIP or failure. */
static int golden_plan(ft_device dev, const char *name, ft_mode mode, ft_dtype dtype, ft_plan_step_info **out,
                       int *n, ft_graph_stats *gs) {
    ft_ctx *ctx = NULL;
    golden_case gc;
    *out = NULL;
    *n = 0;
    if (open_for_fusion(dev, name, &ctx, &gc)) return -1;
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    o.dtype = dtype;
    ft_model *m = NULL;
    CHECK_OK(ctx, ft_model_load(ctx, gc.dir, &o, &m));
    if (m && ft_model_forward(m, gc.in, gc.n_in) == FT_OK) {
        *n = ft_model_plan_length(m);
        *out = (ft_plan_step_info *)calloc((size_t)(*n ? *n : 1), sizeof **out);
        for (int i = 0; *out && i < *n; i++) CHECK_OK(ctx, ft_model_plan_step(m, i, &(*out)[i]));
        CHECK_OK(ctx, ft_model_graph_stats(m, gs));
    } else {
        CHECK(0, "%s forward: %s", name, ft_ctx_errmsg(ctx));
    }
    ft_model_free(m);
    golden_close(&gc);
    ft_ctx_free(ctx);
    return *out ? 0 : -1;
}

/* Funnel in fp16 on CUDA: the positional and token-type score terms are summed
 * in fp16 and cast to the attention's f32 mask once per layer (one cast per term
 * before), and that sum chains with the product before it. */
static void test_plan_funnel_fp16_mask(void) {
    ft_plan_step_info *s;
    ft_graph_stats gs;
    int n, attention = 0, casts = 0, chains = 0;
    if (golden_plan(FT_DEVICE_CUDA, "funnel", FT_MODE_GRAPH, FT_DTYPE_F16, &s, &n, &gs)) return;
    for (int i = 0; i < n; i++) {
        attention += !strcmp(s[i].op, "attention");
        casts += !strcmp(s[i].op, "copy") && s[i].dtype == FT_DTYPE_F32 && s[i].ndim == 4; /* score terms */
        chains += !strcmp(s[i].op, "fused_eltwise") && s[i].dtype == FT_DTYPE_F16 && strstr(s[i].detail, ">add");
    }
    CHECK(attention == 5 && casts == 5 && chains == 5, "%d attentions, %d score casts to f32, %d f16 chains ending in add",
          attention, casts, chains);
    free(s);
}

/* WavLM's gate, sigmoid(sum of 4 of 8 projections) per head: the sums fold into
 * the projection's weights (2 outputs instead of 8, no sum kernel) and the
 * sigmoid into its epilogue, through the reshape between them. */
static void test_plan_wavlm_gate(void) {
    ft_plan_step_info *s;
    ft_graph_stats gs;
    int n, gates = 0, loose = 0;
    if (golden_plan(FT_DEVICE_CPU, "wavlm", FT_MODE_GRAPH, FT_DTYPE_F32, &s, &n, &gs)) return;
    for (int i = 0; i < n; i++) {
        gates += !strcmp(s[i].op, "linear") && !strcmp(s[i].detail, "bias+sigmoid") && s[i].shape[s[i].ndim - 1] == 2;
        loose += !strcmp(s[i].op, "sum_last") || !strcmp(s[i].op, "sigmoid");
    }
    CHECK(gates == 2 && loose == 0 && gs.affine_folded == 2,
          "%d gate GEMMs with 2 outputs and a sigmoid, %d sum/sigmoid kernels left, %d affine rewrites", gates, loose,
          gs.affine_folded);
    free(s);
}

/* ResNet on CUDA: a convolution through im2col carries its bias as a weight
 * column, so it is two launches (im2col, GEMM with the ReLU and the residual),
 * not three; a 1x1 one (a GEMM on x itself) read only by such a convolution hands
 * its bias and ReLU to the reader's im2col and is one launch; the other 1x1 ones
 * keep their bias pass (two). */
static void test_plan_resnet_conv_launches(void) {
    ft_plan_step_info *s;
    ft_graph_stats gs;
    int n, with_column = 0, over = 0, prologue = 0, single = 0;
    if (golden_plan(FT_DEVICE_CUDA, "resnet", FT_MODE_STATIC, FT_DTYPE_F16, &s, &n, &gs)) return;
    for (int i = 0; i < n; i++) {
        if (strcmp(s[i].op, "conv2d")) continue;
        with_column += strstr(s[i].detail, "bias in GEMM") != NULL;
        over += s[i].graph_nodes > 2;
        prologue += strstr(s[i].detail, "input bias relu") != NULL;
        single += s[i].graph_nodes == 1 && s[i].detail[0] == '\0';
    }
    /* golden ResNet: 4 stages of one bottleneck, each with its first 1x1 into a 3x3 */
    CHECK(with_column >= 4 && over == 0 && prologue == 4 && single == 4,
          "%d convolutions with the bias in the GEMM, %d of more than 2 launches, %d with an input prologue, %d bare "
          "1x1 GEMMs", with_column, over, prologue, single);
    free(s);
}

int main(void) {
    RUN(test_plan_info_describes_fusions);
    RUN(test_plan_info_cpu);
    RUN(test_plan_info_cuda);
    RUN(test_plan_funnel_fp16_mask);
    RUN(test_plan_wavlm_gate);
    RUN(test_plan_resnet_conv_launches);
    return ft_test_finish();
}

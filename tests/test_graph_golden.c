/*
 * test_graph_golden.c - every golden case in graph and static mode: on the CPU
 * in fp32 at the default tolerance, and on CUDA (skipped without a GPU) with
 * graph and static outputs compared bitwise. Also: BERT's kernels per encoder
 * layer after fusion (at most 8), counted on a 12-layer random-init BERT, and
 * the one-time cost of tracing, passes and planning.
 */
#include "ft_test.h"
#include "ft_golden.h"

#include "../engine/profiler.h"
#include "../graph/graph.h"
#include "../graph/graph_api.h"
#ifdef FT_CUDA_EMU
#include "emu/emu.h"
#endif

static const char *const req_bert[] = {"last_hidden_state", "pooler_output", NULL};
static const char *const req_hidden[] = {"last_hidden_state", NULL};

static const struct {
    const char *name, *model_type;
    const char *const *required;
} cases[] = {
    {"bert", "bert", req_bert},           {"funnel", "funnel", req_hidden},
    {"mobilebert", "mobilebert", req_bert}, {"resnet", "resnet", req_bert},
    {"wavlm", "wavlm", req_hidden},
};

static void run_cases_at(ft_device dev, ft_mode mode, ft_dtype dtype, golden_tol tol) {
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!ft_arch_find(cases[i].model_type)) {
            printf("  (%s: architecture not built yet)\n", cases[i].name);
            continue;
        }
        golden_run_check(cases[i].name, dev, mode, dtype, cases[i].required, tol);
        ran++;
    }
    if (!ran) SKIP("no golden architecture is built yet");
}

static void run_cases(ft_device dev, ft_mode mode) { run_cases_at(dev, mode, FT_DTYPE_F32, GOLDEN_FP32); }

static void test_golden_graph_cpu(void) { run_cases(FT_DEVICE_CPU, FT_MODE_GRAPH); }
static void test_golden_static_cpu(void) { run_cases(FT_DEVICE_CPU, FT_MODE_STATIC); }

static void test_golden_graph_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    run_cases(FT_DEVICE_CUDA, FT_MODE_GRAPH);
    run_cases(FT_DEVICE_CUDA, FT_MODE_STATIC);
}

/* fp16 plans differ from fp32 ones (score terms summed in fp16 before the mask
 * cast, Funnel's q GEMMs): the golden cases at the reduced-precision criterion */
static void test_golden_graph_cuda_fp16(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    run_cases_at(FT_DEVICE_CUDA, FT_MODE_GRAPH, FT_DTYPE_F16, GOLDEN_FP16);
    run_cases_at(FT_DEVICE_CUDA, FT_MODE_STATIC, FT_DTYPE_F16, GOLDEN_FP16);
}

/* The golden case's model loaded in `mode`, and run once on its inputs when `run`;
 * NULL after recording why. */
static ft_model *load_case(ft_ctx *ctx, const golden_case *gc, ft_mode mode, int run) {
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    ft_model *m = NULL;
    CHECK_OK(ctx, ft_model_load(ctx, gc->dir, &o, &m));
    if (m && run && ft_model_forward(m, gc->in, gc->n_in) != FT_OK) {
        CHECK(0, "forward of %s in %s mode: %s", gc->dir, ft_mode_name(mode), ft_ctx_errmsg(ctx));
        ft_model_free(m);
        m = NULL;
    }
    return m;
}

/* Graph and static mode on CUDA run the same kernels on the same plan: the
 * outputs must agree to the bit, for a first input and for new values replayed. */
static void test_cuda_graph_static_bitwise(void) {
    ft_ctx *ctx = NULL;
    golden_case gc;
    if (golden_open_on(FT_DEVICE_CUDA, "bert", &ctx, &gc)) return;
    ft_model *m[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) m[k] = load_case(ctx, &gc, (ft_mode)k, 0);
    int64_t n = 2 * 16 * 64;
    float *out[3];
    for (int k = 0; k < 3; k++) out[k] = (float *)malloc((size_t)n * sizeof(float));
    /* round 0: the golden inputs; round 1: other ids, same shape (a replay) */
    int64_t ids[2 * 16];
    for (int round = 0; round < 2 && m[0] && m[1] && m[2]; round++) {
        ft_host_tensor in[8];
        for (int i = 0; i < gc.n_in; i++) in[i] = gc.in[i];
        if (round == 1) {
            for (int i = 0; i < 32; i++) ids[i] = (i * 37 + 11) % 90;
            for (int i = 0; i < gc.n_in; i++)
                if (!strcmp(in[i].name, "input_ids")) in[i].data = ids;
        }
        for (int k = 0; k < 3; k++) {
            CHECK_OK(ctx, ft_model_forward(m[k], in, gc.n_in));
            ft_tensor *t = ft_model_output_find(m[k], "last_hidden_state");
            CHECK(t != NULL, "no output");
            if (t) CHECK_OK(ctx, ft_tensor_to_host(ctx, t, FT_DTYPE_F32, out[k], (size_t)n * 4));
        }
        CHECK(memcmp(out[1], out[2], (size_t)n * 4) == 0, "round %d: graph and static differ", round);
        /* the three inputs lie side by side in the arena: one upload per forward */
        for (int k = 1; k < 3; k++) {
            ft_graph_stats gs;
            CHECK(ft_model_graph_stats(m[k], &gs) == FT_OK && gs.input_uploads == 1,
                  "%s mode: %d input uploads per forward, want 1", ft_mode_name((ft_mode)k), gs.input_uploads);
        }
        double d = 0;
        for (int64_t i = 0; i < n; i++) {
            double e = out[0][i] - out[1][i];
            d = e * e > d ? e * e : d;
        }
        CHECK(d <= 1e-8, "round %d: graph vs eager max sq diff %g", round, d);
    }
    for (int k = 0; k < 3; k++) {
        free(out[k]);
        ft_model_free(m[k]);
    }
    golden_close(&gc);
    ft_ctx_free(ctx);
}

/* A captured ResNet keeps its im2col scratch: eager forwards run between two
 * replays allocate (and write) freely, and neither side may see the other's
 * data. The eager outputs are held while the static plan replays on new values,
 * so a scratch block handed back to the allocator would corrupt one of them. */
static void test_cuda_static_scratch_owned(void) {
    ft_ctx *ctx = NULL;
    golden_case gc;
    if (golden_open_on(FT_DEVICE_CUDA, "resnet", &ctx, &gc)) return;
    ft_model *eager = load_case(ctx, &gc, FT_MODE_EAGER, 0), *stat = load_case(ctx, &gc, FT_MODE_STATIC, 0);
    ft_host_tensor in = gc.in[0];
    int64_t n = 1;
    for (int d = 0; d < in.ndim; d++) n *= in.shape[d];
    float *px = (float *)malloc((size_t)n * sizeof(float));
    if (eager && stat && px) {
        CHECK_OK(ctx, ft_model_forward(stat, &gc.in[0], 1));
        ft_graph_stats gs;
        ft_model_graph_stats(stat, &gs);
        if (gs.captured) CHECK(gs.scratch_bytes > 0, "a captured ResNet owns no scratch");
        for (int round = 1; round <= 2; round++) {
            for (int64_t i = 0; i < n; i++) px[i] = ((const float *)gc.in[0].data)[i] * (0.5f + 0.25f * round) - 0.1f;
            in.data = px;
            CHECK_OK(ctx, ft_model_forward(eager, &in, 1));
            CHECK_OK(ctx, ft_model_forward(stat, &in, 1));
            ft_tensor *te = ft_model_output_find(eager, "last_hidden_state");
            ft_tensor *ts = ft_model_output_find(stat, "last_hidden_state");
            CHECK(te && ts && ft_tensor_numel(te) == ft_tensor_numel(ts), "outputs missing");
            if (!te || !ts) break;
            int64_t k = ft_tensor_numel(te);
            float *a = (float *)malloc((size_t)k * 4), *b = (float *)malloc((size_t)k * 4);
            if (a && b) {
                CHECK_OK(ctx, ft_tensor_to_host(ctx, te, FT_DTYPE_F32, a, (size_t)k * 4));
                CHECK_OK(ctx, ft_tensor_to_host(ctx, ts, FT_DTYPE_F32, b, (size_t)k * 4));
                double worst = 0;
                for (int64_t i = 0; i < k; i++) {
                    double e = fabs((double)a[i] - b[i]) / (1e-4 + 1e-4 * fabs((double)a[i]));
                    worst = e > worst ? e : worst;
                }
                CHECK(worst <= 1.0, "round %d: static vs eager off by %.3g x tolerance", round, worst);
            }
            free(a);
            free(b);
        }
    }
    free(px);
    ft_model_free(eager);
    ft_model_free(stat);
    golden_close(&gc);
    ft_ctx_free(ctx);
}

/* After a window with one attributed replay of map: every step and kernel
 * lands on an op row, none is left to graph_launch. */
static void check_rows(ft_profiler *p, const ft_replay_map *map, const char *dir, const char *what) {
    int64_t replayed = 0, kernels = 0, launch_kernels = -1;
    for (int i = 0; i < ft_profiler_op_stats_count(p); i++) {
        ft_profile_op_stats o;
        ft_profiler_op_stats(p, i, &o);
        replayed += o.replayed;
        kernels += o.kernels;
        if (!strcmp(o.name, "graph_launch")) launch_kernels = o.kernels;
    }
    CHECK(replayed == map->n_steps && kernels == map->n_work && launch_kernels == 0,
          "%s (%s): %lld steps replayed of %d, %lld kernels of %d, %lld left to graph_launch", dir, what,
          (long long)replayed, map->n_steps, (long long)kernels, map->n_work, (long long)launch_kernels);
}

/* Feeds the profiler one record per graph node in order (what CUPTI reports
 * of a replay) and checks the rows. */
static void check_attribution(ft_ctx *ctx, ft_profiler *p, const ft_replay_map *map, const char *dir) {
    int64_t rec = -1;
    for (int64_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].replay) rec = i;
    size_t n = (size_t)map->n_work;
    ft_gpu_rec *r = (ft_gpu_rec *)calloc(n + 1, sizeof *r);
    ft_gpu_rec *store = (ft_gpu_rec *)realloc(p->gpu, (n + 1) * sizeof *p->gpu);
    if (store) p->gpu = store;
    CHECK(r && store && rec >= 0, "%s: no replay record, or out of host memory", dir);
    if (r && store && rec >= 0) {
        p->cap_gpu = n + 1;
        p->cupti_window = 1;
        for (size_t k = 0; k < n; k++)
            r[k] = (ft_gpu_rec){.start = p->t0 + 10 + 3 * k, .end = p->t0 + 12 + 3 * k, .op = rec,
                                .correlation = 7, .kind = FT_GPU_KERNEL};
        CHECK_OK(ctx, ft_prof_finish(p, r, n, 0));
        ft_profile_summary s;
        ft_profiler_summary(p, &s);
        CHECK(s.graph_replays_attributed == 1, "%s: the replay was not attributed", dir);
        check_rows(p, map, dir, "synthetic records");
    }
    free(r);
}

#ifdef FT_CUDA_EMU
/* Device work each graph-mode step submits, counted on the emulator. */
typedef struct step_count {
    unsigned long long before;
    int n;
    int work[1024], node_id[1024], op[1024];
} step_count;

static void count_begin(void *user, const ft_tensor *node) {
    (void)node;
    ((step_count *)user)->before = ft_emu_work_submitted();
}

static void count_end(void *user, const ft_tensor *node, ft_status st) {
    step_count *c = (step_count *)user;
    (void)st;
    if (c->n == 1024) return;
    c->work[c->n] = (int)(ft_emu_work_submitted() - c->before);
    c->node_id[c->n] = node->id;
    c->op[c->n++] = (int)node->op;
}

/* Each step's range of the map holds exactly the device work the same step
 * submits in graph mode (the two modes run one plan). */
static void check_against_graph_mode(ft_ctx *ctx, const golden_case *gc, const ft_replay_map *map) {
    ft_model *g = load_case(ctx, gc, FT_MODE_GRAPH, 1);
    step_count *c = (step_count *)calloc(1, sizeof *c);
    if (g && c) {
        ft_dispatch_hooks h = {count_begin, NULL, NULL, count_end, c};
        const ft_dispatch_hooks *saved = ctx->hooks;
        ctx->hooks = &h;
        CHECK_OK(ctx, ft_model_forward(g, gc->in, gc->n_in));
        ctx->hooks = saved;
        CHECK(map->n_steps == c->n, "%s: %d steps mapped, %d run in graph mode", gc->dir, map->n_steps, c->n);
        int bad = 0, sum = 0;
        for (int i = 0; i < map->n_steps && i < c->n; i++) {
            int mine = map->step[i].end - (i ? map->step[i - 1].end : 0);
            sum += c->work[i];
            if ((mine != c->work[i] || map->step[i].node_id != c->node_id[i] || map->step[i].op != c->op[i]) &&
                bad++ < 3)
                CHECK(0, "%s step %d (%s): %d nodes captured, %d launched in graph mode", gc->dir, i,
                      ft_op_name((ft_op)map->step[i].op), mine, c->work[i]);
        }
        CHECK(sum == map->n_work, "%s: graph mode launched %d, the graph has %d", gc->dir, sum, map->n_work);
    }
    free(c);
    ft_model_free(g);
}
#endif

/* The replay map a static plan builds at capture (which step launched which
 * graph node) for every golden model: usable, one range per planned step,
 * its nodes those the stats report; on the emulator also step by step against
 * graph mode. With CUPTI (a GPU) the profiled replay itself is attributed. */
static void test_cuda_replay_map(void) {
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        ft_ctx *ctx = NULL;
        golden_case gc;
        if (golden_open_on(FT_DEVICE_CUDA, cases[ci].name, &ctx, &gc)) return;
        /* the profiler first, so CUPTI is on before the graph is captured (as
         * the CUPTI notes advise); it keeps a reference on the replayed plan's map */
        ft_profiler *p = NULL;
        CHECK_OK(ctx, ft_profiler_create(ctx, NULL, &p));
        ft_model *st = load_case(ctx, &gc, FT_MODE_STATIC, 1);
        if (st) {
            if (p) CHECK_OK(ctx, ft_profiler_start(p));
            CHECK_OK(ctx, ft_model_forward(st, gc.in, gc.n_in));
            if (p) CHECK_OK(ctx, ft_profiler_stop(p));
        }
        ft_graph_stats gs;
        memset(&gs, 0, sizeof gs);
        if (st) ft_model_graph_stats(st, &gs);
        const ft_replay_map *map = p && p->n_replays == 1 ? p->replays[0] : NULL;
        CHECK(!p || map, "%s: the profiler kept no replay map", gc.dir);
        if (map) {
            printf("  %s: %d plan steps captured as %d graph nodes\n", cases[ci].name, map->n_steps,
                   map->n_nodes);
            CHECK(map->usable, "%s: replay map not usable (%d nodes, %d device work)", gc.dir,
                  map->n_nodes, map->n_work);
            CHECK(map->n_steps == gs.kernels_per_forward, "%s: %d steps mapped, %d planned", gc.dir,
                  map->n_steps, gs.kernels_per_forward);
            CHECK(map->n_nodes == gs.graph_nodes && gs.graph_nodes >= gs.kernels_per_forward,
                  "%s: %d nodes mapped, stats say %d", gc.dir, map->n_nodes, gs.graph_nodes);
            ft_profile_summary s;
            ft_profiler_summary(p, &s);
            /* without CUPTI no record exists to attribute; with it, the real replay's */
            CHECK(s.graph_replays == 1 && s.graph_replays_attributed == s.cupti,
                  "%s: %lld replays, %lld attributed (CUPTI %d; %lld kernels)", gc.dir,
                  (long long)s.graph_replays, (long long)s.graph_replays_attributed, s.cupti,
                  (long long)s.kernels);
#ifdef FT_CUDA_EMU
            check_against_graph_mode(ctx, &gc, map);
#endif
            if (s.cupti && s.graph_replays_attributed == 1) {
                check_rows(p, map, gc.dir, "CUPTI records");
#ifdef FT_CUDA_EMU
                /* the fake CUPTI numbers a replay's nodes 1, 2, ... in capture order */
                int bad = 0;
                for (size_t i = 0; i < p->n_gpu; i++) {
                    const ft_gpu_rec *g = &p->gpu[i];
                    if (g->step < 0) continue;
                    int32_t lo = g->step ? map->step[g->step - 1].end : 0, hi = map->step[g->step].end;
                    bad += g->graph_node < (uint64_t)lo + 1 || g->graph_node > (uint64_t)hi;
                }
                CHECK(!bad, "%s: %d replayed records given to a step that did not capture them", gc.dir, bad);
#endif
            }
            check_attribution(ctx, p, map, gc.dir);
        }
        ft_profiler_free(p);
        ft_model_free(st);
        golden_close(&gc);
        ft_ctx_free(ctx);
    }
}

/* A window that replays more input shapes than the plan cache holds: the
 * first plan (and its CUDA graph) is evicted while the profiler still keeps
 * records of its replay, so the profiler's reference must keep its map alive
 * until the next window (run under ASan this is a use-after-free check); with
 * CUPTI every replay is attributed, the evicted one included. */
static void test_cuda_replay_map_outlives_plan(void) {
    ft_ctx *ctx = NULL;
    golden_case gc;
    if (golden_open_on(FT_DEVICE_CUDA, "bert", &ctx, &gc)) return;
    ft_profiler *p = NULL;
    CHECK_OK(ctx, ft_profiler_create(ctx, NULL, &p));
    ft_model *m = load_case(ctx, &gc, FT_MODE_STATIC, 0);
    const int shapes = FT_GRAPH_CACHE_SIZE + 1;
    if (m && p) {
        CHECK_OK(ctx, ft_profiler_start(p));
        for (int k = 0; k < shapes; k++) {
            ft_host_tensor in[8];
            int n_in = 0;
            void *owned = NULL;
            CHECK_OK(ctx, ft_model_example_inputs(m, 1, 4 + k, in, &n_in, &owned));
            CHECK_OK(ctx, ft_model_forward(m, in, n_in));
            free(owned);
        }
        CHECK_OK(ctx, ft_profiler_stop(p));
        ft_graph_stats gs;
        ft_model_graph_stats(m, &gs);
        ft_profile_summary s;
        ft_profiler_summary(p, &s);
        CHECK(gs.plan_evictions >= 1 && p->n_replays == shapes, "%llu evictions, %d maps kept for %d shapes",
              (unsigned long long)gs.plan_evictions, p->n_replays, shapes);
        CHECK(s.graph_replays == shapes && s.graph_replays_attributed == (s.cupti ? shapes : 0),
              "%lld replays, %lld attributed (CUPTI %d)", (long long)s.graph_replays,
              (long long)s.graph_replays_attributed, s.cupti);
        /* the evicted plan's steps are read again by the writers */
        char path[600];
        ft_test_tmpdir_make("replay");
        if (tmpdir[0]) {
            snprintf(path, sizeof path, "%s/replays.json", tmpdir);
            CHECK_OK(ctx, ft_profiler_write_chrome_trace(p, path));
            ft_test_tmpdir_remove();
        }
        for (int i = 0; i < ft_profiler_op_stats_count(p); i++) {
            ft_profile_op_stats o;
            CHECK_OK(ctx, ft_profiler_op_stats(p, i, &o));
        }
    }
    ft_model_free(m); /* every plan gone: the profiler's references hold the maps */
    if (p) {
        CHECK_OK(ctx, ft_profiler_start(p)); /* drops them */
        CHECK(p->n_replays == 0, "%d maps still kept", p->n_replays);
        CHECK_OK(ctx, ft_profiler_stop(p));
    }
    ft_profiler_free(p);
    golden_close(&gc);
    ft_ctx_free(ctx);
}

/* Kernel counts of a random-init BERT with `layers` layers at small width, traced
 * and optimised without running; -1 on error. */
static int bert_kernels(ft_ctx *ctx, int layers, int64_t B, int *traced, int *qkv, int *attn) {
    char cfg_json[512];
    snprintf(cfg_json, sizeof cfg_json,
             "{\"model_type\": \"bert\", \"hidden_size\": 64, \"num_hidden_layers\": %d,"
             " \"num_attention_heads\": 4, \"intermediate_size\": 128,"
             " \"vocab_size\": 100, \"max_position_embeddings\": 64}", layers);
    ft_config cfg;
    memset(&cfg, 0, sizeof cfg);
    ft_model *m = (ft_model *)calloc(1, sizeof *m);
    m->ctx = ctx;
    m->arch = ft_arch_find("bert");
    m->opt = ft_model_options_default();
    m->opt.mode = FT_MODE_GRAPH;
    m->dtype = FT_DTYPE_F32;
    m->rng = 1;
    m->init_std = 0.02f;
    int fused = -1;
    if (ft_config_from_string(ctx, cfg_json, "test", &cfg) == FT_OK && m->arch->load(m, &cfg) == FT_OK) {
        int64_t S = 9, ids[2 * 9], mask[2 * 9];
        for (int i = 0; i < 18; i++) {
            ids[i] = (i * 7) % 100;
            mask[i] = i % 9 < 7 ? 1 : 0;
        }
        ft_host_tensor in[2] = {{"input_ids", FT_DTYPE_I64, 2, {B, S}, ids},
                                {"attention_mask", FT_DTYPE_I64, 2, {B, S}, mask}};
        for (int k = 0; k < 2; k++) {
            snprintf(m->in[k].name, sizeof m->in[k].name, "%s", in[k].name);
            m->in[k].host = &in[k];
        }
        m->n_in = 2;
        ft_graph *g = NULL;
        if (ft_graph_trace_model(m, &g) == FT_OK) {
            *traced = ft_graph_kernel_count(g);
            if (ft_graph_optimize(g) == FT_OK) fused = ft_graph_kernel_count(g);
            *qkv = g->passes.qkv;
            *attn = g->passes.attention;
        }
        ft_graph_destroy(g);
        m->n_in = 0;
    }
    ft_config_free(&cfg);
    ft_model_free(m);
    return fused;
}

/* At most 8 kernels per BERT encoder layer in graph mode (the bound; 7 now),
 * measured as the difference between a 12-layer and a 1-layer model (a 0-layer
 * model would drop the unused mask ops). */
static int fusion_disabled(void) {
    const char *v = getenv("FT_DISABLE_FUSION");
    if (v && *v && strcmp(v, "0")) {
        SKIP("FT_DISABLE_FUSION is set");
        return 1;
    }
    return 0;
}

static void test_bert_kernels_per_layer(void) {
    if (fusion_disabled()) return;
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    for (int64_t B = 1; B <= 2 && ctx; B++) {
        int t0 = 0, t12 = 0, q = 0, a = 0, q0 = 0, a0 = 0;
        int k0 = bert_kernels(ctx, 1, B, &t0, &q0, &a0);
        int k12 = bert_kernels(ctx, 12, B, &t12, &q, &a);
        CHECK(k0 >= 0 && k12 >= 0, "tracing BERT: %s", ft_ctx_errmsg(ctx));
        if (k0 < 0 || k12 < 0) break;
        double per = (k12 - k0) / 11.0, eager = (t12 - t0) / 11.0;
        printf("  BERT B=%lld: %.2f kernels per layer in graph mode, %.2f eager\n", (long long)B, per,
               eager);
        /* QKV GEMM, attention (writing [B, S, H, D] for the next GEMM: no copy), output
         * GEMM + residual, LayerNorm, FFN GEMM + GELU, FFN GEMM + residual, LayerNorm */
        CHECK(per <= 7.0, "B=%lld: %.2f kernels per layer", (long long)B, per);
        CHECK(k12 < t12, "fusion saved nothing (%d of %d)", k12, t12);
        CHECK(a == 12 && q == 12, "attention fused %d, QKV merged %d of 12", a, q);
    }
    ft_ctx_free(ctx);
}

/* ResNet in graph mode: every conv + batch norm pair folded, graph == eager
 * within the golden tolerance (the golden check above), kernels counted. */
static void test_resnet_conv_bn_folded(void) {
    if (fusion_disabled()) return;
    if (!ft_arch_find("resnet")) {
        SKIP("resnet not built yet");
        return;
    }
    ft_ctx *ctx = NULL;
    golden_case gc;
    if (golden_open_on(FT_DEVICE_CPU, "resnet", &ctx, &gc)) return;
    ft_model *m = load_case(ctx, &gc, FT_MODE_GRAPH, 1);
    ft_graph_stats gs;
    if (m && ft_model_graph_stats(m, &gs) == FT_OK) {
        printf("  ResNet: %d kernels eager, %d graph; %d conv+BN folded, %d epilogues, arena %zu "
               "(bound %zu, no reuse %zu)\n",
               gs.traced_kernels, gs.kernels_per_forward, gs.conv_bn_folded, gs.epilogues,
               gs.arena_bytes, gs.peak_live_bytes, gs.sum_intermediate_bytes);
        CHECK(gs.conv_bn_folded >= 5, "conv+BN folded %d", gs.conv_bn_folded);
        CHECK(gs.kernels_per_forward < gs.traced_kernels, "no fusion");
        CHECK(gs.arena_bytes <= gs.peak_live_bytes * 11 / 10, "arena %zu vs bound %zu", gs.arena_bytes,
              gs.peak_live_bytes);
        /* a second input shape is a second plan; the folded weights are the first
         * plan's (the model's constant cache), not folded and stored again */
        CHECK(gs.shared_const_bytes > 0, "no folded weights counted");
        ft_host_tensor one = gc.in[0];
        one.shape[0] = 1;
        ft_mem_stats before = ft_ctx_mem_stats(ctx);
        CHECK_OK(ctx, ft_model_forward(m, &one, 1));
        ft_mem_stats after = ft_ctx_mem_stats(ctx);
        ft_graph_stats g2;
        CHECK_OK(ctx, ft_model_graph_stats(m, &g2));
        CHECK(g2.plans_cached == 2 && g2.conv_bn_folded == gs.conv_bn_folded, "second plan: %d plans, %d folded",
              g2.plans_cached, g2.conv_bn_folded);
        CHECK(g2.shared_const_bytes == gs.shared_const_bytes, "shared constants %zu then %zu",
              gs.shared_const_bytes, g2.shared_const_bytes);
        CHECK(after.allocated - before.allocated < gs.shared_const_bytes,
              "the second plan allocated %zu bytes, the folded weights are %zu",
              after.allocated - before.allocated, gs.shared_const_bytes);
    }
    ft_model_free(m);
    golden_close(&gc);
    ft_ctx_free(ctx);
}

/* WavLM's weight norm folds from weights alone: a second input shape takes the
 * folded weight from the model's constant cache (same constant bytes, nothing
 * of that size allocated again), and both shapes still match eager. */
/* Golden case `name` run in graph mode on dev at its own shape, then at batch 1
 * and length len (another plan): the second plan must share every plan-time
 * weight the first made (same shared bytes, allocating no more than its arena
 * and own constants) and match eager mode there. Returns the first plan's stats
 * (valid -1 when dev has no device). */
static ft_graph_stats second_plan_shares(ft_device dev, const char *name, int64_t len) {
    ft_graph_stats g1, g2;
    memset(&g1, 0, sizeof g1);
    ft_graph_stats fail = g1;
    fail.valid = -1;
    ft_ctx *ctx = NULL;
    golden_case gc;
    if (golden_open_on(dev, name, &ctx, &gc)) return fail;
    ft_model *m = load_case(ctx, &gc, FT_MODE_GRAPH, 0), *e = load_case(ctx, &gc, FT_MODE_EAGER, 0);
    /* the first len entries of each input's first row (inputs are [B, L] row-major) */
    ft_host_tensor one[8];
    for (int i = 0; i < gc.n_in; i++) {
        one[i] = gc.in[i];
        one[i].shape[0] = 1;
        one[i].shape[1] = len;
    }
    if (m && e) {
        CHECK_OK(ctx, ft_model_forward(m, gc.in, gc.n_in));
        CHECK_OK(ctx, ft_model_graph_stats(m, &g1));
        CHECK(g1.shared_const_bytes > 0, "%s: nothing shared", name);
        ft_mem_stats before = ft_ctx_mem_stats(ctx);
        CHECK_OK(ctx, ft_model_forward(m, one, gc.n_in));
        ft_mem_stats after = ft_ctx_mem_stats(ctx);
        CHECK_OK(ctx, ft_model_graph_stats(m, &g2));
        CHECK(g2.plans_cached == 2 && g2.folded == g1.folded, "%s: %d plans, %d then %d folded", name,
              g2.plans_cached, g1.folded, g2.folded);
        CHECK(g2.shared_const_bytes == g1.shared_const_bytes, "%s: shared constants %zu then %zu", name,
              g1.shared_const_bytes, g2.shared_const_bytes);
        /* the second plan allocates its arena and its own constants, not the shared
         * ones again (the allocator's size classes round each small constant up) */
        size_t grew = after.allocated - before.allocated;
        CHECK(grew <= g2.arena_bytes + g2.const_bytes + g2.const_bytes / 4 + 65536, "%s: the second plan "
              "allocated %zu bytes (arena %zu, own constants %zu)", name, grew, g2.arena_bytes, g2.const_bytes);
        CHECK_OK(ctx, ft_model_forward(e, one, gc.n_in));
        ft_tensor *a = ft_model_output_find(m, "last_hidden_state"), *b = ft_model_output_find(e, "last_hidden_state");
        int64_t n = a && b ? ft_tensor_numel(a) : 0;
        float *x = (float *)malloc((size_t)(n ? n : 1) * 4), *y = (float *)malloc((size_t)(n ? n : 1) * 4);
        if (n && x && y && ft_tensor_to_host(ctx, a, FT_DTYPE_F32, x, (size_t)n * 4) == FT_OK &&
            ft_tensor_to_host(ctx, b, FT_DTYPE_F32, y, (size_t)n * 4) == FT_OK) {
            double worst = 0;
            for (int64_t i = 0; i < n; i++) {
                double d = fabs((double)x[i] - y[i]);
                worst = d > worst ? d : worst;
            }
            CHECK(worst <= 1e-4, "%s: graph vs eager at the second shape: max abs diff %g", name, worst);
        } else {
            CHECK(0, "%s: outputs missing", name);
        }
        free(x);
        free(y);
    }
    ft_model_free(m);
    ft_model_free(e);
    golden_close(&gc);
    ft_ctx_free(ctx);
    return g1;
}

static void test_fold_shared_across_plans(void) {
    if (fusion_disabled()) return;
    ft_graph_stats g1 = second_plan_shares(FT_DEVICE_CPU, "wavlm", 12000);
    CHECK(g1.folded > 0, "nothing folded");
    /* the gated position bias joins the mask of the fused attention, every layer */
    CHECK(g1.attention_fused == 2, "attention fused in %d of 2 WavLM layers", g1.attention_fused);
}

/* Funnel scales q by 1/8 and adds three bias vectors to it: the scale goes into
 * the weights, and on CUDA each sum becomes a GEMM with that bias (4 rewrites
 * per layer) that stacks with K and V; on the CPU only the scale is folded and K
 * and V merge. Made once per model, shared by every plan; the golden batch of 2
 * checks the merge through Funnel's [B*L, N, Dh] head views. */
static void funnel_affine(ft_device dev) {
    if (fusion_disabled()) return;
    ft_graph_stats g1 = second_plan_shares(dev, "funnel", 64);
    if (g1.valid < 0) return;
    int per_layer = dev == FT_DEVICE_CUDA ? 4 : 1;
    CHECK(g1.affine_folded == per_layer * 5, "%s: affine rewrites %d, want %d in each of 5 layers",
          ft_device_name(dev), g1.affine_folded, per_layer);
    /* CUDA: the three q GEMMs merge with K and V where they read the same input,
     * and apart from them in the 2 layers that pool the query */
    int merges = dev == FT_DEVICE_CUDA ? 7 : 5;
    CHECK(g1.qkv_merged == merges, "%s: %d Q/K/V merges in 5 layers, want %d", ft_device_name(dev),
          g1.qkv_merged, merges);
}
/* MobileBERT's NoNorm folds and the GEMM stacks made of them are the model's,
 * made by the first plan and shared by the next. */
static void test_nonorm_shared_across_plans(void) {
    if (fusion_disabled()) return;
    ft_graph_stats g1 = second_plan_shares(FT_DEVICE_CPU, "mobilebert", 9);
    CHECK(g1.nonorm_folded > 0 && g1.const_bytes == 0, "%d NoNorm folds, %zu bytes of the plan's own constants",
          g1.nonorm_folded, g1.const_bytes);
}

static void test_funnel_affine_shared(void) { funnel_affine(FT_DEVICE_CPU); }
static void test_funnel_affine_shared_cuda(void) { funnel_affine(FT_DEVICE_CUDA); }

/* Funnel's positional and token-type terms are added to the scores before the
 * softmax: they join the mask, and all 5 attention layers (3 blocks of 1, 2
 * decoder layers) run the fused attention. */
static void test_funnel_attention_fused(void) {
    if (fusion_disabled()) return;
    ft_ctx *ctx = NULL;
    golden_case gc;
    if (golden_open_on(FT_DEVICE_CPU, "funnel", &ctx, &gc)) return;
    ft_model *m = load_case(ctx, &gc, FT_MODE_GRAPH, 1);
    ft_graph_stats gs;
    if (m && ft_model_graph_stats(m, &gs) == FT_OK)
        CHECK(gs.attention_fused == 5, "attention fused in %d of 5 Funnel layers", gs.attention_fused);
    ft_model_free(m);
    golden_close(&gc);
    ft_ctx_free(ctx);
}

/* The loader packs each layer's Q/K/V weights back to back in graph mode, so the
 * Q/K/V merge stacks them without a copy: merged, and no extra constant bytes. */
static void test_qkv_stack_is_packed(void) {
    if (fusion_disabled()) return;
    ft_ctx *ctx = NULL;
    golden_case gc;
    if (golden_open_on(FT_DEVICE_CPU, "bert", &ctx, &gc)) return;
    for (int k = 0; k < 2; k++) {
        ft_mode mode = k ? FT_MODE_STATIC : FT_MODE_GRAPH;
        ft_model *m = load_case(ctx, &gc, mode, 1);
        ft_graph_stats gs;
        if (m && ft_model_graph_stats(m, &gs) == FT_OK) {
            CHECK(gs.qkv_merged == 2, "%s: QKV merged in %d of 2 layers", ft_mode_name(mode), gs.qkv_merged);
            CHECK(gs.shared_const_bytes == 0, "%s: %zu bytes of stacked weights copied", ft_mode_name(mode),
                  gs.shared_const_bytes);
        }
        ft_model_free(m);
    }
    golden_close(&gc);
    ft_ctx_free(ctx);
}

int main(void) {
    (void)ft_test_golden_dir;
    RUN(test_bert_kernels_per_layer);
    RUN(test_resnet_conv_bn_folded);
    RUN(test_qkv_stack_is_packed);
    RUN(test_fold_shared_across_plans);
    RUN(test_funnel_attention_fused);
    RUN(test_nonorm_shared_across_plans);
    RUN(test_funnel_affine_shared);
    RUN(test_funnel_affine_shared_cuda);
    RUN(test_golden_graph_cpu);
    RUN(test_golden_static_cpu);
    RUN(test_golden_graph_cuda);
    RUN(test_golden_graph_cuda_fp16);
    RUN(test_cuda_graph_static_bitwise);
    RUN(test_cuda_static_scratch_owned);
    RUN(test_cuda_replay_map);
    RUN(test_cuda_replay_map_outlives_plan);
    return ft_test_finish();
}

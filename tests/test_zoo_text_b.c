/*
 * test_zoo_text_b.c - SqueezeBERT and DeBERTa (v1): the Hugging Face golden cases
 * (tests/golden/squeezebert, deberta) in eager, graph and static mode on the CPU
 * (fp32 at the golden criterion, fp16/bf16 looser) and on CUDA (fp32, fp16,
 * bf16; on the host emulator in `make test`); the graph passes firing on them
 * (grouped QKV merge, epilogues, attention, attention_rel with both relative
 * terms gathered in the kernel and no [B, H, S, S] step left); kernels per layer;
 * the presets' parameter and MAC counts; the loader rules (prefixed names, old
 * gamma/beta spellings, keys HF ignores); bad checkpoints and configs (missing
 * or misshapen tensors, wrong group counts, sizes not divisible by heads or
 * groups, pos_att_type of the wrong type, masks other than 0/1), each one clear
 * error; and random checkpoints of configurations the golden cases leave out
 * (spans shorter than the sequence, one relative term, absolute positions and
 * token types with a projected embedding, talking heads, other group counts,
 * batch 3, odd lengths, padded rows) agreeing across modes and devices.
 */
#include "ft_golden.h"
#include "ft_test.h"

#include "../engine/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const req_pool[] = {"last_hidden_state", "pooler_output", NULL};
static const char *const req_hidden[] = {"last_hidden_state", NULL};
static const golden_tol GOLDEN_BF16 = {3e-2, 3e-2, 2e-2};
static const ft_mode all_modes[3] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};

static void golden_all(ft_device dev, const ft_mode *modes, int n, ft_dtype dt, golden_tol tol) {
    for (int i = 0; i < n; i++) {
        golden_run_check("squeezebert", dev, modes[i], dt, req_pool, tol);
        golden_run_check("deberta", dev, modes[i], dt, req_hidden, tol);
    }
}

static void test_golden_cpu(void) {
    golden_all(FT_DEVICE_CPU, all_modes, 3, FT_DTYPE_F32, GOLDEN_FP32);
    golden_all(FT_DEVICE_CPU, all_modes, 2, FT_DTYPE_F16, GOLDEN_FP16);
    golden_all(FT_DEVICE_CPU, all_modes, 2, FT_DTYPE_BF16, GOLDEN_BF16);
}

static void test_golden_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    golden_all(FT_DEVICE_CUDA, all_modes, 3, FT_DTYPE_F32, GOLDEN_FP32);
    golden_all(FT_DEVICE_CUDA, all_modes + 1, 2, FT_DTYPE_F16, GOLDEN_FP16);
    golden_all(FT_DEVICE_CUDA, all_modes, 1, FT_DTYPE_BF16, GOLDEN_BF16);
}

/* ---- helpers: loading a case and its inputs ---- */

static ft_model *load(ft_ctx *ctx, const char *dir, ft_mode mode, ft_dtype dt) {
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    o.dtype = dt;
    ft_model *m = NULL;
    if (ft_model_load(ctx, dir, &o, &m) != FT_OK) return NULL;
    return m;
}

/* The plan's steps of op `op` whose detail holds `detail` (NULL: any). */
static int count_op(const ft_model *m, const char *op, const char *detail) {
    int n = 0;
    for (int i = 0; i < ft_model_plan_length(m); i++) {
        ft_plan_step_info s;
        if (ft_model_plan_step(m, i, &s) != FT_OK) continue;
        if (!strcmp(s.op, op) && (!detail || strstr(s.detail, detail))) n++;
        if (getenv("FT_TEST_VERBOSE")) printf("    step %d %s (%s)\n", i, s.op, s.detail);
    }
    return n;
}

/* Steps other than the attention itself whose output is [.., S, S] (4-d): scores or score terms. */
static int count_square(const ft_model *m, int64_t seq) {
    int n = 0;
    for (int i = 0; i < ft_model_plan_length(m); i++) {
        ft_plan_step_info s;
        if (ft_model_plan_step(m, i, &s) == FT_OK && s.ndim == 4 && s.shape[2] == seq && s.shape[3] == seq &&
            strcmp(s.op, "attention") && strcmp(s.op, "attention_rel")) {
            printf("    step %d %s [%lld,%lld,%lld,%lld] writes a score-sized tensor\n", i, s.op, (long long)s.shape[0],
                   (long long)s.shape[1], (long long)s.shape[2], (long long)s.shape[3]);
            n++;
        }
    }
    return n;
}

/* The golden case's forward in graph mode on `dev`; returns the model (NULL on failure). */
static ft_model *golden_graph(ft_ctx *ctx, const char *name, golden_case *g) {
    if (golden_open(ctx, name, g) != 0) return NULL;
    ft_model *m = load(ctx, g->dir, FT_MODE_GRAPH, FT_DTYPE_F32);
    if (m && ft_model_forward(m, g->in, g->n_in) != FT_OK) {
        ft_model_free(m);
        return NULL;
    }
    return m;
}

static void passes_on(ft_device dev) {
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(dev, &ctx) != FT_OK) {
        CHECK(0, "no %s context", ft_device_name(dev));
        return;
    }
    golden_case g;
    ft_model *m = golden_graph(ctx, "deberta", &g);
    CHECK(m != NULL, "deberta graph forward: %s", ft_ctx_errmsg(ctx));
    if (m) {
        /* 2 layers, a padded row: both relative terms, the key mask and the XSoftmax row scale fused */
        int rel = count_op(m, "attention_rel", "mask+c2p+p2c+row scale");
        CHECK(rel == 2, "deberta: %d attention_rel steps with mask, c2p, p2c and row scale (want 2)", rel);
        CHECK(count_op(m, "gather_last", NULL) == 0 && count_op(m, "softmax", NULL) == 0 &&
                  count_op(m, "attention", NULL) == 0,
              "deberta: gathers, softmax or a plain attention left in the plan");
        int sq = count_square(m, g.in[0].shape[1]);
        CHECK(sq == 0, "deberta: %d steps still write a [B, H, S, S] tensor", sq);
        ft_graph_stats st;
        ft_model_graph_stats(m, &st);
        CHECK(st.epilogues >= 6 && st.folded > 0, "deberta: epilogues %d, folded %d", st.epilogues, st.folded);
    }
    ft_model_free(m);
    golden_close(&g);
    m = golden_graph(ctx, "squeezebert", &g);
    CHECK(m != NULL, "squeezebert graph forward: %s", ft_ctx_errmsg(ctx));
    if (m) {
        CHECK(count_op(m, "linear_grouped", "groups 4 (3 stacked)+bias") == 2,
              "squeezebert: q, k, v not merged into one grouped GEMM per layer");
        CHECK(count_op(m, "linear_grouped", "bias+gelu") == 2 && count_op(m, "linear_grouped", "bias+residual") == 4,
              "squeezebert: grouped GEMM epilogues (bias+gelu, bias+residual) missing");
        CHECK(count_op(m, "attention", "mask") == 2, "squeezebert: attention not fused");
        CHECK(count_op(m, "gelu", NULL) == 0 && count_op(m, "softmax", NULL) == 0, "squeezebert: unfused gelu or softmax");
        CHECK(count_square(m, g.in[0].shape[1]) == 0, "squeezebert: a [B, H, S, S] step left");
        /* the encoder's residuals ride in the GEMM epilogues; the embeddings' last add
         * (token types) joins their LayerNorm */
        CHECK(count_op(m, "layernorm", "residual") == 1, "squeezebert: embedding add not fused into its LayerNorm");
    }
    ft_model_free(m);
    golden_close(&g);
    ft_ctx_free(ctx);
}

static void test_passes_fire_cpu(void) { passes_on(FT_DEVICE_CPU); }

static void test_passes_fire_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    passes_on(FT_DEVICE_CUDA);
}

/* ---- presets ---- */

static void test_presets(void) {
    static const struct {
        const char *name;
        int64_t params, macs;
    } p[] = {{"squeezebert-uncased", 51094272, 3699965952LL}, {"deberta-base", 138601728, 15401484288LL}};
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        ft_model_options o = ft_model_options_default();
        o.weights = FT_WEIGHTS_NONE;
        ft_model *m = NULL;
        CHECK_OK(ctx, ft_model_load(ctx, p[i].name, &o, &m));
        int64_t macs = 0;
        if (m) CHECK_OK(ctx, ft_model_macs(m, 1, 128, &macs));
        CHECK(m && ft_model_param_count(m) == p[i].params, "%s: %lld parameters, published %lld", p[i].name,
              m ? (long long)ft_model_param_count(m) : -1LL, (long long)p[i].params);
        CHECK(macs == p[i].macs, "%s: %lld MACs at 1 x 128, zoo.md %lld", p[i].name, (long long)macs,
              (long long)p[i].macs);
        ft_model_free(m);
    }
    ft_ctx_free(ctx);
}

/* ---- checkpoints written here ---- */

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* rename(name, buf) -> the name to write (buf or name) or NULL to drop it */
typedef const char *(*rename_fn)(const char *name, char *buf, size_t size);

/* Copies golden case `src`'s weights into dir through `rename`, plus `extra` tensors
 * (name, 2-d shape) of zeros; config.json is `cfg` (NULL: the case's). */
static int write_case(ft_ctx *ctx, const char *src, const char *dir, rename_fn rename, const char *cfg,
                      const char *const *extra) {
    char path[600];
    mkdir(dir, 0755);
    if (cfg) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        if (write_text(path, cfg)) return -1;
    } else {
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "cp '%s/%s/config.json' '%s/config.json'", ft_test_golden_dir(), src, dir);
        if (system(cmd)) return -1;
    }
    snprintf(path, sizeof path, "%s/%s/model.safetensors", ft_test_golden_dir(), src);
    ft_st_file *in = NULL;
    if (ft_st_open(ctx, path, &in) != FT_OK) return -1;
    int n = ft_st_count(in), k = 0;
    ft_st_tensor *out = calloc((size_t)n + 8, sizeof *out);
    char (*names)[256] = calloc((size_t)n + 8, 256);
    static float zeros[64 * 64];
    for (int i = 0; i < n; i++) {
        const ft_st_tensor *t = ft_st_get(in, i);
        const char *nn = rename ? rename(t->name, names[k], 256) : t->name;
        if (!nn) continue;
        out[k] = *t;
        if (nn != names[k]) snprintf(names[k], 256, "%s", nn);
        out[k].name = names[k];
        k++;
    }
    for (int i = 0; extra && extra[i]; i++, k++) {
        snprintf(names[k], 256, "%s", extra[i]);
        out[k] = (ft_st_tensor){names[k], FT_DTYPE_F32, 2, {64, 64}, zeros, sizeof zeros};
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ft_status st = ft_st_write(ctx, path, out, k);
    free(out);
    free(names);
    ft_st_close(in);
    return st == FT_OK ? 0 : -1;
}

/* max |a - b| over an output of two models (INFINITY when either is missing) */
static double out_diff(ft_ctx *ca, ft_model *a, ft_ctx *cb, ft_model *b, const char *name) {
    ft_tensor *x = a ? ft_model_output_find(a, name) : NULL, *y = b ? ft_model_output_find(b, name) : NULL;
    if (!x || !y || ft_tensor_numel(x) != ft_tensor_numel(y)) return INFINITY;
    int64_t n = ft_tensor_numel(x);
    float *p = malloc((size_t)n * 4), *q = malloc((size_t)n * 4);
    double d = INFINITY;
    if (ft_tensor_to_host(ca, x, FT_DTYPE_F32, p, (size_t)n * 4) == FT_OK &&
        ft_tensor_to_host(cb, y, FT_DTYPE_F32, q, (size_t)n * 4) == FT_OK) {
        d = 0;
        for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)p[i] - q[i]));
    }
    free(p);
    free(q);
    return d;
}

/* transformer./deberta. prefixes, gamma/beta spellings */
static const char *sq_hub(const char *name, char *buf, size_t size) {
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", name);
    size_t l = strlen(tmp);
    if (strstr(tmp, "layernorm.weight") && l > 7) strcpy(tmp + l - 7, ".gamma");
    else if (strstr(tmp, "layernorm.bias") && l > 5) strcpy(tmp + l - 5, ".beta");
    snprintf(buf, size, "transformer.%s", tmp);
    return buf;
}

static const char *db_hub(const char *name, char *buf, size_t size) {
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", name);
    size_t l = strlen(tmp);
    if (strstr(tmp, "LayerNorm.weight") && l > 7) strcpy(tmp + l - 7, ".gamma");
    snprintf(buf, size, "deberta.%s", tmp);
    return buf;
}

static const char *drop_key_bias(const char *name, char *buf, size_t size) {
    (void)buf, (void)size;
    return strcmp(name, "encoder.layers.1.attention.key.bias") ? name : NULL;
}

static const char *drop_rel(const char *name, char *buf, size_t size) {
    (void)buf, (void)size;
    return strcmp(name, "encoder.rel_embeddings.weight") ? name : NULL;
}

static void test_loader_rules(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    ft_test_tmpdir_make("zoo_b");
    char dir[400];
    /* Hub-style files: prefix, gamma/beta, the keys HF never loads, old buffers */
    static const char *const sq_extra[] = {"cls.predictions.transform.dense.weight", "transformer.embeddings.position_ids",
                                           NULL};
    static const char *const db_extra[] = {"deberta.embeddings.position_embeddings.weight",
                                           "lm_predictions.lm_head.dense.weight", "deberta.embeddings.position_ids",
                                           NULL};
    const char *cases[2] = {"squeezebert", "deberta"};
    for (int c = 0; c < 2; c++) {
        snprintf(dir, sizeof dir, "%s/%s_hub", tmpdir, cases[c]);
        CHECK(write_case(ctx, cases[c], dir, c ? db_hub : sq_hub, NULL, c ? db_extra : sq_extra) == 0, "writing %s",
              dir);
        golden_case g;
        ft_model *a = NULL, *b = NULL;
        if (golden_open(ctx, cases[c], &g) == 0) {
            a = load(ctx, g.dir, FT_MODE_EAGER, FT_DTYPE_F32);
            b = load(ctx, dir, FT_MODE_EAGER, FT_DTYPE_F32);
            CHECK(b != NULL, "%s with hub names: %s", cases[c], ft_ctx_errmsg(ctx));
            if (a && b && ft_model_forward(a, g.in, g.n_in) == FT_OK && ft_model_forward(b, g.in, g.n_in) == FT_OK)
                CHECK(out_diff(ctx, a, ctx, b, "last_hidden_state") == 0.0, "%s: hub names give other outputs",
                      cases[c]);
            ft_ctx_clear_error(ctx);
            golden_close(&g);
        }
        ft_model_free(a);
        ft_model_free(b);
    }
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

/* A checkpoint that must be refused with `want` in the message (and no crash). */
static void expect_refused(ft_ctx *ctx, const char *src, rename_fn rn, const char *cfg, const char *want) {
    char dir[400];
    static int k;
    snprintf(dir, sizeof dir, "%s/bad%d", tmpdir, k++);
    CHECK(write_case(ctx, src, dir, rn, cfg, NULL) == 0, "writing %s", dir);
    ft_model *m = load(ctx, dir, FT_MODE_EAGER, FT_DTYPE_F32);
    CHECK(!m && strstr(ft_ctx_errmsg(ctx), want), "%s (%s): loaded or wrong message '%s' (want '%s')", src,
          cfg ? cfg : "golden config", ft_ctx_errmsg(ctx), want);
    ft_model_free(m);
    ft_ctx_clear_error(ctx);
}

#define SQ_CFG(over) "{\"model_type\": \"squeezebert\", \"vocab_size\": 512, \"hidden_size\": 64, \"embedding_size\": 64," \
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 256," \
    " \"max_position_embeddings\": 64, \"q_groups\": 4, \"k_groups\": 4, \"v_groups\": 4," \
    " \"post_attention_groups\": 2, \"intermediate_groups\": 4, \"output_groups\": 4" over "}"
#define DB_CFG(over) "{\"model_type\": \"deberta\", \"vocab_size\": 512, \"hidden_size\": 64, \"num_hidden_layers\": 2," \
    " \"num_attention_heads\": 4, \"intermediate_size\": 256, \"max_position_embeddings\": 64," \
    " \"relative_attention\": true, \"pos_att_type\": [\"c2p\", \"p2c\"], \"position_biased_input\": false" over "}"

static void test_bad_checkpoints(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    ft_test_tmpdir_make("zoo_b_bad");
    expect_refused(ctx, "squeezebert", drop_key_bias, NULL, "encoder.layers.1.attention.key.bias' not found");
    expect_refused(ctx, "squeezebert", NULL, SQ_CFG(", \"q_groups\": 2"), "attention.query.weight' has shape [64,16,1]");
    expect_refused(ctx, "squeezebert", NULL, SQ_CFG(", \"q_groups\": 3"), "q_groups 3 does not divide");
    expect_refused(ctx, "squeezebert", NULL, SQ_CFG(", \"output_groups\": 0"), "output_groups must be at least 1");
    expect_refused(ctx, "squeezebert", NULL, SQ_CFG(", \"num_attention_heads\": 5"),
                   "hidden_size 64 is not a multiple of num_attention_heads 5");
    expect_refused(ctx, "squeezebert", NULL, SQ_CFG(", \"embedding_size\": 32"), "embedding_size 32 differs");
    expect_refused(ctx, "squeezebert", NULL, SQ_CFG(", \"intermediate_size\": 128"),
                   "intermediate.conv1d.weight' has shape [256,16,1]");
    expect_refused(ctx, "deberta", drop_rel, NULL, "encoder.rel_embeddings.weight' not found");
    expect_refused(ctx, "deberta", NULL, DB_CFG(", \"num_attention_heads\": 6"),
                   "hidden_size 64 is not a multiple of num_attention_heads 6");
    expect_refused(ctx, "deberta", NULL, DB_CFG(", \"intermediate_size\": 128"),
                   "intermediate.dense.weight' has shape [256,64]");
    expect_refused(ctx, "deberta", NULL, DB_CFG(", \"max_relative_positions\": 8"),
                   "rel_embeddings.weight' has shape [128,64], but the config implies [16,64]");
    expect_refused(ctx, "deberta", NULL, DB_CFG(", \"pos_att_type\": 3"), "pos_att_type must be a string or a list");
    expect_refused(ctx, "deberta", NULL, DB_CFG(", \"talking_head\": true"), "head_logits_proj.weight' not found");
    expect_refused(ctx, "deberta", NULL, DB_CFG(", \"position_biased_input\": true"),
                   "position_embeddings.weight' not found");

    /* a mask value other than 0 and 1 */
    golden_case g;
    if (golden_open(ctx, "deberta", &g) == 0) {
        ft_model *m = load(ctx, g.dir, FT_MODE_GRAPH, FT_DTYPE_F32);
        int64_t ids[6] = {1, 2, 3, 4, 5, 6}, mask[6] = {1, 1, 2, 1, 0, 0};
        ft_host_tensor in[2] = {{"input_ids", FT_DTYPE_I64, 2, {1, 6}, ids},
                                {"attention_mask", FT_DTYPE_I64, 2, {1, 6}, mask}};
        CHECK(m && ft_model_forward(m, in, 2) != FT_OK && strstr(ft_ctx_errmsg(ctx), "0/1 mask"),
              "deberta: mask value 2 not refused: %s", ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
        ft_model_free(m);
        golden_close(&g);
    }
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

#include "zoo_text_b_random.h"

int main(void) {
    RUN(test_golden_cpu);
    RUN(test_golden_cuda);
    RUN(test_passes_fire_cpu);
    RUN(test_passes_fire_cuda);
    RUN(test_presets);
    RUN(test_loader_rules);
    RUN(test_bad_checkpoints);
    RUN(test_random_configs_cpu);
    RUN(test_random_configs_cuda);
    RUN(test_kernels_per_layer_cpu);
    RUN(test_kernels_per_layer_cuda);
    return ft_test_finish();
}

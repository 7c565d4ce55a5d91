/*
 * test_bert.c - BertModel and DistilBertModel end to end: the HF golden case on
 * CPU (fp32 at the golden tolerance, f16/bf16 storage at 1e-2) and on CUDA
 * (skipped without a device), the DistilBERT equivalence, checkpoint spellings,
 * bad checkpoints, configs and inputs, preset sizes and MAC counts, and the
 * caching allocator's steady state.
 */
#include "ft_golden.h"
#include "ft_test.h"

#include "../engine/config.h"
#include "../engine/safetensors.h"
#include "../models/model.h"
#include <math.h>
#include "ftengine.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const bert_required[] = {"last_hidden_state", "pooler_output", NULL};

static void test_golden_cpu_fp32(void) {
    golden_run_check("bert", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F32, bert_required, GOLDEN_FP32);
}

static void test_golden_cpu_reduced_precision(void) {
    golden_run_check("bert", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F16, bert_required, GOLDEN_FP16);
    golden_run_check("bert", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_BF16, bert_required,
                     (golden_tol){3e-2, 3e-2, 2e-2});
}

static void test_golden_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    golden_run_check("bert", FT_DEVICE_CUDA, FT_MODE_EAGER, FT_DTYPE_F32, bert_required, GOLDEN_FP32);
    golden_run_check("bert", FT_DEVICE_CUDA, FT_MODE_EAGER, FT_DTYPE_F16, bert_required, GOLDEN_FP16);
}

/* ---- helpers writing modified checkpoints into a temporary directory ---- */


static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* rename(name) -> new name or NULL to drop; zero(name) -> whether to zero the data */
typedef const char *(*rename_fn)(const char *name, char *buf, size_t size);

/* Copies the golden BERT weights into dir/model.safetensors through `rename`
 * (a renamed tensor can be zeroed by returning a name starting with '0:'). */
static int write_weights(ft_ctx *ctx, const char *dir, rename_fn rename) {
    char path[512];
    snprintf(path, sizeof path, "%s/bert/model.safetensors", ft_test_golden_dir());
    ft_st_file *src = NULL;
    if (ft_st_open(ctx, path, &src) != FT_OK) return -1;
    int n = ft_st_count(src), k = 0;
    ft_st_tensor *out = (ft_st_tensor *)calloc((size_t)n, sizeof *out);
    char (*names)[256] = calloc((size_t)n, 256);
    void **zeros = (void **)calloc((size_t)n, sizeof *zeros);
    for (int i = 0; i < n; i++) {
        const ft_st_tensor *t = ft_st_get(src, i);
        const char *nn = rename ? rename(t->name, names[k], 256) : t->name;
        if (!nn) continue;
        out[k] = *t;
        if (!strncmp(nn, "0:", 2)) {
            zeros[k] = calloc(1, t->nbytes);
            out[k].data = zeros[k];
            nn += 2;
        }
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%s", nn); /* nn may point into names[k] */
        snprintf(names[k], 256, "%s", tmp);
        out[k].name = names[k];
        k++;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ft_status st = ft_st_write(ctx, path, out, k);
    for (int i = 0; i < n; i++) free(zeros[i]);
    free(zeros);
    free(names);
    free(out);
    ft_st_close(src);
    return st == FT_OK ? 0 : -1;
}

static const char *bert_config =
    "{\"model_type\": \"bert\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 4, \"intermediate_size\": 256, \"max_position_embeddings\": 128,"
    " \"vocab_size\": 512, \"hidden_act\": \"gelu\", \"layer_norm_eps\": 1e-12}";

/* DistilBERT names for BERT tensors */
static const char *to_distil(const char *name, char *buf, size_t size) {
    static const char *const map[][2] = {
        {"attention.self.query", "attention.q_lin"}, {"attention.self.key", "attention.k_lin"},
        {"attention.self.value", "attention.v_lin"}, {"attention.output.dense", "attention.out_lin"},
        {"attention.output.LayerNorm", "sa_layer_norm"}, {"intermediate.dense", "ffn.lin1"},
        {"output.dense", "ffn.lin2"}, {"output.LayerNorm", "output_layer_norm"},
    };
    if (!strncmp(name, "pooler.", 7) || strstr(name, "token_type_embeddings")) return NULL;
    if (strncmp(name, "encoder.layer.", 14)) return name; /* embeddings */
    int layer = atoi(name + 14);
    const char *rest = strchr(name + 14, '.') + 1;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t len = strlen(map[i][0]);
        if (!strncmp(rest, map[i][0], len)) {
            snprintf(buf, size, "distilbert.transformer.layer.%d.%s%s", layer, map[i][1], rest + len);
            return buf;
        }
    }
    return name;
}

/* BERT with zero token-type embeddings */
static const char *zero_types(const char *name, char *buf, size_t size) {
    if (strstr(name, "token_type_embeddings")) {
        snprintf(buf, size, "0:%s", name);
        return buf;
    }
    return name;
}

static ft_model *load_dir(ft_ctx *ctx, const char *dir, int hidden) {
    ft_model_options o = ft_model_options_default();
    o.output_hidden_states = hidden;
    ft_model *m = NULL;
    ft_model_load(ctx, dir, &o, &m);
    return m;
}

static double max_diff(ft_ctx *ctx, ft_tensor *a, ft_tensor *b) {
    int64_t n = ft_tensor_numel(a);
    if (!b || n != ft_tensor_numel(b)) return INFINITY;
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    ft_tensor_to_host(ctx, a, FT_DTYPE_F32, x, (size_t)n * 4);
    ft_tensor_to_host(ctx, b, FT_DTYPE_F32, y, (size_t)n * 4);
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)x[i] - y[i]));
    free(x);
    free(y);
    return d;
}

static void test_distilbert_equivalence(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    ft_test_tmpdir_make("bert");
    char dd[300], bd[300], p[400];
    snprintf(dd, sizeof dd, "%s/distil", tmpdir);
    snprintf(bd, sizeof bd, "%s/bert", tmpdir);
    mkdir(dd, 0755);
    mkdir(bd, 0755);
    snprintf(p, sizeof p, "%s/config.json", dd);
    write_text(p, "{\"model_type\": \"distilbert\", \"dim\": 64, \"n_layers\": 2, \"n_heads\": 4,"
                  " \"hidden_dim\": 256, \"max_position_embeddings\": 128, \"vocab_size\": 512,"
                  " \"activation\": \"gelu\"}");
    snprintf(p, sizeof p, "%s/config.json", bd);
    write_text(p, bert_config);
    CHECK(write_weights(ctx, dd, to_distil) == 0, "writing distil weights: %s", ft_ctx_errmsg(ctx));
    CHECK(write_weights(ctx, bd, zero_types) == 0, "writing bert weights: %s", ft_ctx_errmsg(ctx));
    ft_model *dm = load_dir(ctx, dd, 1), *bm = load_dir(ctx, bd, 1);
    CHECK(dm && bm, "loading: %s", ft_ctx_errmsg(ctx));
    if (dm && bm) {
        CHECK(!strcmp(ft_model_arch(dm), "DistilBertModel"), "arch %s", ft_model_arch(dm));
        int64_t ids[2 * 7], mask[2 * 7];
        for (int i = 0; i < 14; i++) {
            ids[i] = (i * 37 + 11) % 512;
            mask[i] = i < 7 || i % 7 < 4; /* second row padded after 4 tokens */
        }
        ft_host_tensor in[2] = {{"input_ids", FT_DTYPE_I64, 2, {2, 7}, ids},
                                {"attention_mask", FT_DTYPE_I64, 2, {2, 7}, mask}};
        CHECK_OK(ctx, ft_model_forward(dm, in, 2));
        CHECK_OK(ctx, ft_model_forward(bm, in, 2));
        CHECK(ft_model_output_find(dm, "pooler_output") == NULL, "DistilBERT has no pooler");
        const char *names[] = {"hidden_states.0", "hidden_states.1", "hidden_states.2", "last_hidden_state"};
        for (int i = 0; i < 4; i++) {
            double d = max_diff(ctx, ft_model_output_find(dm, names[i]), ft_model_output_find(bm, names[i]));
            CHECK(d < 1e-5, "%s differs by %g between DistilBERT and BERT", names[i], d);
        }
    }
    ft_model_free(dm);
    ft_model_free(bm);
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

/* "bert." prefix and LayerNorm.gamma/beta, as bert-base-uncased ships */
static const char *legacy(const char *name, char *buf, size_t size) {
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", name);
    char *ln = strstr(tmp, "LayerNorm.");
    if (ln && !strcmp(ln, "LayerNorm.weight")) strcpy(ln, "LayerNorm.gamma");
    else if (ln && !strcmp(ln, "LayerNorm.bias")) strcpy(ln, "LayerNorm.beta");
    snprintf(buf, size, "bert.%s", tmp);
    return buf;
}

static void test_legacy_spellings(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    ft_test_tmpdir_make("bert");
    char p[400];
    snprintf(p, sizeof p, "%s/config.json", tmpdir);
    write_text(p, bert_config);
    CHECK(write_weights(ctx, tmpdir, legacy) == 0, "writing: %s", ft_ctx_errmsg(ctx));
    ft_model *m = load_dir(ctx, tmpdir, 0);
    CHECK(m != NULL, "loading prefixed gamma/beta checkpoint: %s", ft_ctx_errmsg(ctx));
    golden_case g;
    if (m && golden_open(ctx, "bert", &g) == 0) {
        CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
        char msg[512];
        int rc = golden_compare(ctx, ft_model_output_find(m, "last_hidden_state"),
                                ft_st_find(g.expected, "last_hidden_state"), GOLDEN_FP32, msg, sizeof msg);
        CHECK(rc == 0, "%s", msg);
        golden_close(&g);
    }
    ft_model_free(m);
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

/* ---- bad checkpoints and configs ---- */

static const char *drop_one(const char *name, char *buf, size_t size) {
    return strcmp(name, "encoder.layer.1.output.dense.bias") ? name : NULL;
}

static void expect_load_error(const char *config, rename_fn rename, ft_status want, const char *needle1,
                              const char *needle2) {
    ft_ctx *ctx = NULL;
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    ft_test_tmpdir_make("bert");
    char p[400];
    snprintf(p, sizeof p, "%s/config.json", tmpdir);
    write_text(p, config);
    write_weights(ctx, tmpdir, rename);
    ft_model *m = NULL;
    ft_model_options o = ft_model_options_default();
    ft_status st = ft_model_load(ctx, tmpdir, &o, &m);
    const char *msg = ft_ctx_errmsg(ctx);
    CHECK(st == want && m == NULL, "load gave %s (want %s): %s", ft_status_str(st), ft_status_str(want), msg);
    CHECK(!needle1 || strstr(msg, needle1), "message lacks '%s': %s", needle1, msg);
    CHECK(!needle2 || strstr(msg, needle2), "message lacks '%s': %s", needle2, msg);
    ft_model_free(m);
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

static void test_bad_checkpoints(void) {
    expect_load_error(bert_config, drop_one, FT_ERR_NOT_FOUND, "model.safetensors",
                      "encoder.layer.1.output.dense.bias");
    /* the config says 3 layers, the file holds 2 */
    expect_load_error("{\"model_type\": \"bert\", \"hidden_size\": 64, \"num_hidden_layers\": 3,"
                      " \"num_attention_heads\": 4, \"intermediate_size\": 256,"
                      " \"max_position_embeddings\": 128, \"vocab_size\": 512}",
                      NULL, FT_ERR_NOT_FOUND, "encoder.layer.2", NULL);
    /* a shape that disagrees with the config */
    expect_load_error("{\"model_type\": \"bert\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                      " \"num_attention_heads\": 4, \"intermediate_size\": 128,"
                      " \"max_position_embeddings\": 128, \"vocab_size\": 512}",
                      NULL, FT_ERR_SHAPE, "intermediate.dense.weight", "[256,64]");
    expect_load_error("{\"hidden_size\": 64}", NULL, FT_ERR_FORMAT, "config.json", "model_type");
    expect_load_error("{\"model_type\": \"gpt9\"}", NULL, FT_ERR_FORMAT, "gpt9", NULL);
    expect_load_error("{\"model_type\": \"bert\", \"hidden_size\": \"64\"}", NULL, FT_ERR_FORMAT,
                      "hidden_size", NULL);
    expect_load_error("{\"model_type\": \"bert\", \"hidden_size\": 64, \"num_attention_heads\": 5}",
                      NULL, FT_ERR_FORMAT, "multiple", NULL);
    expect_load_error("{\"model_type\": \"bert\", ", NULL, FT_ERR_FORMAT, "config.json", NULL);
    expect_load_error("{\"model_type\": \"bert\", \"hidden_act\": \"mish\"}", NULL, FT_ERR_FORMAT,
                      "mish", NULL);

    ft_ctx *ctx = NULL;
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    ft_model *m = NULL;
    ft_status st = ft_model_load(ctx, "/nonexistent/model", NULL, &m);
    CHECK(st == FT_ERR_NOT_FOUND && !m, "missing directory gave %s", ft_status_str(st));
    CHECK(strstr(ft_ctx_errmsg(ctx), "/nonexistent/model") != NULL, "message: %s", ft_ctx_errmsg(ctx));
    ft_ctx_free(ctx);
}

/* ---- bad inputs ---- */

static void expect_forward_error(ft_model *m, ft_ctx *ctx, const ft_host_tensor *in, int n,
                                 const char *needle) {
    ft_status st = ft_model_forward(m, in, n);
    CHECK(st != FT_OK, "forward accepted bad input (%s)", needle);
    CHECK(strstr(ft_ctx_errmsg(ctx), needle) != NULL, "message lacks '%s': %s", needle, ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
}

static void test_bad_inputs(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bert", ft_test_golden_dir());
    ft_model *m = load_dir(ctx, dir, 0);
    CHECK(m != NULL, "load: %s", ft_ctx_errmsg(ctx));
    if (!m) {
        ft_ctx_free(ctx);
        return;
    }
    int64_t ids[6] = {1, 2, 3, 4, 5, 512}, ok_ids[6] = {1, 2, 3, 4, 5, 6}, tt[6] = {0, 1, 2, 0, 0, 0};
    int64_t long_ids[200] = {0};
    float fids[6] = {0};
    ft_host_tensor a = {"input_ids", FT_DTYPE_I64, 2, {2, 3}, ids};
    expect_forward_error(m, ctx, &a, 1, "outside [0, 512)");
    ft_host_tensor b = {"input_ids", FT_DTYPE_I64, 1, {6}, ok_ids};
    expect_forward_error(m, ctx, &b, 1, "rank");
    ft_host_tensor c[2] = {{"input_ids", FT_DTYPE_I64, 2, {2, 3}, ok_ids},
                           {"attention_mask", FT_DTYPE_I64, 2, {3, 2}, ok_ids}};
    expect_forward_error(m, ctx, c, 2, "attention_mask");
    ft_host_tensor d[2] = {{"input_ids", FT_DTYPE_I64, 2, {2, 3}, ok_ids},
                           {"token_type_ids", FT_DTYPE_I64, 2, {2, 3}, tt}};
    expect_forward_error(m, ctx, d, 2, "token_type_ids");
    ft_host_tensor e = {"input_ids", FT_DTYPE_I64, 2, {1, 200}, long_ids};
    expect_forward_error(m, ctx, &e, 1, "max_position_embeddings");
    ft_host_tensor f = {"pixel_values", FT_DTYPE_F32, 2, {2, 3}, fids};
    expect_forward_error(m, ctx, &f, 1, "pixel_values");
    expect_forward_error(m, ctx, NULL, 0, "input_ids");
    ft_host_tensor g = {"input_ids", FT_DTYPE_F32, 2, {2, 3}, fids};
    expect_forward_error(m, ctx, &g, 1, "i64");
    /* the model still works after errors were cleared; no mask, odd length, batch 3 */
    int64_t ids3[3 * 5];
    for (int i = 0; i < 15; i++) ids3[i] = (i * 7) % 512;
    ft_host_tensor h = {"input_ids", FT_DTYPE_I64, 2, {3, 5}, ids3};
    CHECK_OK(ctx, ft_model_forward(m, &h, 1));
    ft_tensor *out = ft_model_output_find(m, "last_hidden_state");
    CHECK(out && ft_tensor_dim(out, 0) == 3 && ft_tensor_dim(out, 1) == 5 && ft_tensor_dim(out, 2) == 64,
          "output shape after batch 3 / length 5");
    ft_model_free(m);
    ft_ctx_free(ctx);
}

/* Batch rows are independent: row 1 of a batch equals that row run alone. */
static void test_batch_rows_independent(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bert", ft_test_golden_dir());
    ft_model *m = load_dir(ctx, dir, 0);
    if (!m) {
        CHECK(0, "load: %s", ft_ctx_errmsg(ctx));
        ft_ctx_free(ctx);
        return;
    }
    int64_t ids[3 * 9], mask[3 * 9];
    for (int i = 0; i < 27; i++) {
        ids[i] = (i * 131 + 7) % 512;
        mask[i] = (i / 9 != 1) || (i % 9 < 5);
    }
    ft_host_tensor in[2] = {{"input_ids", FT_DTYPE_I64, 2, {3, 9}, ids},
                            {"attention_mask", FT_DTYPE_I64, 2, {3, 9}, mask}};
    float all[3 * 9 * 64], one[9 * 64];
    CHECK_OK(ctx, ft_model_forward(m, in, 2));
    CHECK_OK(ctx, ft_tensor_to_host(ctx, ft_model_output_find(m, "last_hidden_state"), FT_DTYPE_F32, all,
                                    sizeof all));
    ft_host_tensor in1[2] = {{"input_ids", FT_DTYPE_I64, 2, {1, 9}, ids + 9},
                             {"attention_mask", FT_DTYPE_I64, 2, {1, 9}, mask + 9}};
    CHECK_OK(ctx, ft_model_forward(m, in1, 2));
    CHECK_OK(ctx, ft_tensor_to_host(ctx, ft_model_output_find(m, "last_hidden_state"), FT_DTYPE_F32, one,
                                    sizeof one));
    double d = 0;
    for (int i = 0; i < 9 * 64; i++) d = fmax(d, fabs((double)all[9 * 64 + i] - one[i]));
    CHECK(d < 1e-5, "row 1 of the batch differs from the row alone by %g", d);
    ft_model_free(m);
    ft_ctx_free(ctx);
}

/* ---- presets, counts, allocator ---- */

static void test_presets_and_counts(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    struct { const char *name; int64_t params, macs; } want[] = {
        {"bert-base", 109482240, 11174215680LL},
        {"distilbert-base", 66362880, 5586812928LL},
    };
    for (int i = 0; i < 2; i++) {
        ft_model *m = NULL;
        CHECK_OK(ctx, ft_model_load(ctx, want[i].name, NULL, &m));
        if (!m) continue;
        int64_t macs = 0;
        CHECK_OK(ctx, ft_model_macs(m, 1, 128, &macs));
        CHECK(ft_model_param_count(m) == want[i].params, "%s: %lld parameters, expected %lld",
              want[i].name, (long long)ft_model_param_count(m), (long long)want[i].params);
        CHECK(macs == want[i].macs, "%s: %lld MACs at 1x128, expected %lld", want[i].name,
              (long long)macs, (long long)want[i].macs);
        ft_model_free(m);
    }
    ft_model *m = NULL;
    CHECK(ft_model_load(ctx, "no-such-preset", NULL, &m) == FT_ERR_NOT_FOUND, "unknown preset accepted");
    CHECK(strstr(ft_ctx_errmsg(ctx), "bert-base") != NULL, "message should list presets: %s",
          ft_ctx_errmsg(ctx));
    ft_ctx_free(ctx);
}

static void test_allocator_steady_state(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bert", ft_test_golden_dir());
    ft_model *m = load_dir(ctx, dir, 0);
    golden_case g;
    if (m && golden_open(ctx, "bert", &g) == 0) {
        CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
        ft_mem_stats s1 = ft_ctx_mem_stats(ctx);
        CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
        CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
        ft_mem_stats s2 = ft_ctx_mem_stats(ctx);
        CHECK(s2.n_sys_alloc == s1.n_sys_alloc, "steady-state forwards made %llu system allocations",
              (unsigned long long)(s2.n_sys_alloc - s1.n_sys_alloc));
        CHECK(s2.allocated == s1.allocated, "allocated bytes grew from %zu to %zu", s1.allocated,
              s2.allocated);
        CHECK(s2.n_alloc > s1.n_alloc, "no allocations counted");
        golden_close(&g);
    } else {
        CHECK(0, "setup: %s", ft_ctx_errmsg(ctx));
    }
    ft_model_free(m);
    ft_ctx_free(ctx);
}

/* Every Hugging Face activation name the models accept computes its ACT2FN formula
 * (checked in double on values across [-4, 4]); an unknown name is refused. */
static double ref_act(const char *name, double x) {
    double sg = 1.0 / (1.0 + exp(-x));
    if (!strcmp(name, "gelu") || !strcmp(name, "gelu_python")) return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    if (strstr(name, "gelu_") && strcmp(name, "quick_gelu"))
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    if (!strcmp(name, "relu")) return x > 0 ? x : 0;
    if (!strcmp(name, "tanh")) return tanh(x);
    if (!strcmp(name, "sigmoid")) return sg;
    if (!strcmp(name, "silu") || !strcmp(name, "swish")) return x * sg;
    if (!strcmp(name, "quick_gelu")) return x / (1.0 + exp(-1.702 * x));
    return x; /* linear */
}

static void test_activation_names(void) {
    static const char *const names[] = {"gelu", "gelu_python", "gelu_new", "gelu_pytorch_tanh", "gelu_fast",
                                        "gelu_accurate", "relu", "tanh", "sigmoid", "silu", "swish",
                                        "quick_gelu", "linear"};
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    float xs[33], ys[33];
    for (int i = 0; i < 33; i++) xs[i] = -4.0f + 0.25f * (float)i;
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        char js[128];
        snprintf(js, sizeof js, "{\"hidden_act\": \"%s\"}", names[n]);
        ft_config cfg;
        ft_act_kind act;
        CHECK_OK(ctx, ft_config_from_string(ctx, js, "test", &cfg));
        CHECK_OK(ctx, ft_model_act_parse(&cfg, "hidden_act", "gelu", &act));
        ft_tensor *x = ft_tensor_from_host(ctx, FT_DTYPE_F32, 1, (int64_t[]){33}, xs);
        ft_tensor *y = ft_model_act(ctx, act, x);
        ft_tensor_release(ctx, x); /* as the models do: the result must not depend on x */
        CHECK(y && ft_tensor_to_host(ctx, y, FT_DTYPE_F32, ys, sizeof ys) == FT_OK, "%s: %s", names[n],
              ft_ctx_errmsg(ctx));
        double worst = 0;
        for (int i = 0; y && i < 33; i++) worst = fmax(worst, fabs(ys[i] - ref_act(names[n], xs[i])));
        CHECK(worst < 2e-6, "%s: max error %g", names[n], worst);
        ft_config_free(&cfg);
        ft_ctx_clear_error(ctx);
    }
    ft_config cfg;
    ft_act_kind act;
    CHECK_OK(ctx, ft_config_from_string(ctx, "{\"hidden_act\": \"mish\"}", "test", &cfg));
    CHECK(ft_model_act_parse(&cfg, "hidden_act", "gelu", &act) == FT_ERR_FORMAT &&
              strstr(ft_ctx_errmsg(ctx), "mish"),
          "mish accepted or unnamed: %s", ft_ctx_errmsg(ctx));
    ft_config_free(&cfg);
    ft_ctx_free(ctx);
}

int main(void) {
    RUN(test_activation_names);
    RUN(test_golden_cpu_fp32);
    RUN(test_golden_cpu_reduced_precision);
    RUN(test_golden_cuda);
    RUN(test_distilbert_equivalence);
    RUN(test_legacy_spellings);
    RUN(test_bad_checkpoints);
    RUN(test_bad_inputs);
    RUN(test_batch_rows_independent);
    RUN(test_presets_and_counts);
    RUN(test_allocator_steady_state);
    return ft_test_finish();
}

/*
 * test_zoo_text_a.c - RobertaModel, AlbertModel and GPT2Model end to end:
 *  - the HF golden cases (tests/golden/{roberta,albert,gpt2}) in eager, graph and
 *    static mode on the CPU (fp32 at the golden criterion, fp16/bf16 at the looser
 *    bound) and on CUDA (the emulator in `make test`);
 *  - graph mode's passes fire on them (Q/K/V merge, epilogues incl. gelu_new,
 *    LayerNorm + residual, fused attention incl. causal) and cut the kernels;
 *  - ALBERT's shared layers: one weight, many steps, and one packed copy of it
 *    (CPU plan packing, Q/K/V stacks), in a 3-group x 2-inner layout too;
 *  - presets: parameters and MACs of the real checkpoints;
 *  - loader rules (prefixes, gamma/beta renames, unread buffers of any dtype,
 *    checkpoints without pooler) and bad checkpoints and inputs: one clear error.
 * Other sizes, odd lengths, batch 3 and other masks and layouts are checked
 * against HF-math references in tests/golden/variants (test_golden_variants.c).
 */
#include "ft_golden.h"
#include "ft_test.h"

#include "../engine/safetensors.h"
#include "../kernels/cpu/cpu_kernels.h"
#include "ftengine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>

static const char *const req_pooled[] = {"last_hidden_state", "pooler_output", NULL};
static const char *const req_plain[] = {"last_hidden_state", NULL};
static const golden_tol GOLDEN_BF16 = {3e-2, 3e-2, 2e-2};

typedef struct zoo_case {
    const char *name;
    const char *const *required;
} zoo_case;

static const zoo_case cases[] = {{"roberta", req_pooled}, {"albert", req_pooled}, {"gpt2", req_plain}};
#define N_CASES (int)(sizeof cases / sizeof cases[0])
static const ft_mode modes[] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};

/* ---- golden cases ---- */

static void golden_all(ft_device dev, ft_dtype dt, golden_tol tol) {
    for (int c = 0; c < N_CASES; c++)
        for (int k = 0; k < 3; k++) golden_run_check(cases[c].name, dev, modes[k], dt, cases[c].required, tol);
}

static void test_golden_cpu_fp32(void) { golden_all(FT_DEVICE_CPU, FT_DTYPE_F32, GOLDEN_FP32); }
static void test_golden_cpu_fp16(void) { golden_all(FT_DEVICE_CPU, FT_DTYPE_F16, GOLDEN_FP16); }
static void test_golden_cpu_bf16(void) { golden_all(FT_DEVICE_CPU, FT_DTYPE_BF16, GOLDEN_BF16); }

static void test_golden_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    golden_all(FT_DEVICE_CUDA, FT_DTYPE_F32, GOLDEN_FP32);
    golden_all(FT_DEVICE_CUDA, FT_DTYPE_F16, GOLDEN_FP16);
    golden_all(FT_DEVICE_CUDA, FT_DTYPE_BF16, GOLDEN_BF16);
}

/* ---- loading a model dir and running its golden inputs ---- */

typedef struct run_info {
    ft_graph_stats gs;
    int causal_attention, gelu_tanh_epilogues, steps;
    int64_t prepacks; /* CPU plan packs made by the load and first forward */
} run_info;

/* Loads dir on dev in mode/dtype and runs the inputs of golden case `inputs_of`;
 * 0 on success (with the model left in *out when out is given). */
static int load_and_run(ft_device dev, ft_mode mode, ft_dtype dt, const char *dir, const char *inputs_of,
                        run_info *info, ft_model **out, ft_ctx **ctx_out) {
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(dev, &ctx) != FT_OK) return -1;
    golden_case g;
    ft_model *m = NULL;
    int rc = -1;
    if (golden_open(ctx, inputs_of, &g)) {
        CHECK(0, "golden %s: %s", inputs_of, ft_ctx_errmsg(ctx));
        ft_ctx_free(ctx);
        return -1;
    }
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    o.dtype = dt;
    int64_t packs0 = ft_cpu_prepack_count();
    if (ft_model_load(ctx, dir, &o, &m) != FT_OK || ft_model_forward(m, g.in, g.n_in) != FT_OK) {
        CHECK(0, "%s (%s): %s", dir, ft_mode_name(mode), ft_ctx_errmsg(ctx));
        goto done;
    }
    if (info) {
        memset(info, 0, sizeof *info);
        info->prepacks = ft_cpu_prepack_count() - packs0;
        ft_model_graph_stats(m, &info->gs);
        ft_plan_step_info si;
        for (int i = 0; ft_model_plan_step(m, i, &si) == FT_OK; i++) {
            info->steps++;
            info->causal_attention += !strcmp(si.op, "attention") && strstr(si.detail, "causal");
            info->gelu_tanh_epilogues += !strcmp(si.op, "linear") && strstr(si.detail, "gelu_tanh");
        }
    }
    rc = 0;
done:
    golden_close(&g);
    if (out && rc == 0) {
        *out = m;
        *ctx_out = ctx;
    } else {
        ft_model_free(m);
        ft_ctx_free(ctx);
    }
    return rc;
}

static void golden_dir(const char *name, char *dir, size_t n) { snprintf(dir, n, "%s/%s", ft_test_golden_dir(), name); }

/* ---- graph passes ---- */

/* Each golden model (2 layers, or ALBERT's 3 applications of 1 layer) in graph
 * mode: Q/K/V merged per layer (GPT-2's c_attn is one GEMM already), attention
 * fused per layer (causal for GPT-2), the FFN activation an epilogue (gelu_new =
 * gelu_tanh for ALBERT and GPT-2), residual adds in epilogues or LayerNorms,
 * fewer kernels than eager's. */
static void check_passes(ft_device dev) {
    const int layers[N_CASES] = {2, 3, 2};
    for (int c = 0; c < N_CASES; c++) {
        char dir[512];
        golden_dir(cases[c].name, dir, sizeof dir);
        run_info r;
        if (load_and_run(dev, FT_MODE_GRAPH, FT_DTYPE_F32, dir, cases[c].name, &r, NULL, NULL)) continue;
        bool gpt2 = !strcmp(cases[c].name, "gpt2"), albert = !strcmp(cases[c].name, "albert");
        int L = layers[c];
        CHECK(r.gs.valid, "%s: no graph stats", cases[c].name);
        CHECK(r.gs.qkv_merged == (gpt2 ? 0 : L), "%s: %d Q/K/V merges, expected %d", cases[c].name,
              r.gs.qkv_merged, gpt2 ? 0 : L);
        CHECK(r.gs.attention_fused == L, "%s: %d attentions fused, expected %d", cases[c].name,
              r.gs.attention_fused, L);
        CHECK(r.causal_attention == (gpt2 ? L : 0), "%s: %d causal attention steps", cases[c].name,
              r.causal_attention);
        CHECK(r.gelu_tanh_epilogues == (gpt2 || albert ? L : 0), "%s: %d gelu_tanh epilogues", cases[c].name,
              r.gelu_tanh_epilogues);
        /* per layer two residual adds, each in a GEMM epilogue or a LayerNorm */
        CHECK(r.gs.epilogues + r.gs.ln_residual >= 2 * L + L, "%s: %d epilogues + %d LayerNorm residuals",
              cases[c].name, r.gs.epilogues, r.gs.ln_residual);
        CHECK(r.gs.kernels_per_forward < r.gs.traced_kernels, "%s: %d kernels after the passes, %d traced",
              cases[c].name, r.gs.kernels_per_forward, r.gs.traced_kernels);
        printf("  %-8s %s: %d kernels eager, %d graph (qkv %d, attention %d, epilogues %d, ln+residual %d, "
               "eltwise %d)\n",
               cases[c].name, ft_device_name(dev), r.gs.traced_kernels, r.gs.kernels_per_forward, r.gs.qkv_merged,
               r.gs.attention_fused, r.gs.epilogues, r.gs.ln_residual, r.gs.eltwise_fused);
    }
}

static void test_passes_fire_cpu(void) { check_passes(FT_DEVICE_CPU); }

static void test_passes_fire_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    check_passes(FT_DEVICE_CUDA);
}

/* ---- temporary checkpoints ---- */

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* The golden config of `gcase` with the keys of `over` ("\"k\": v, ...", or "")
 * replaced or added: the golden files hold one key per line. */
static int write_config(const char *gcase, const char *over, const char *path) {
    char src[600], line[512], out[8192] = "{\n";
    snprintf(src, sizeof src, "%s/%s/config.json", ft_test_golden_dir(), gcase);
    FILE *f = fopen(src, "r");
    if (!f) return -1;
    size_t k = strlen(out);
    while (fgets(line, sizeof line, f)) {
        char key[128];
        if (sscanf(line, " \"%127[^\"]\"", key) != 1) continue;
        char quoted[140];
        snprintf(quoted, sizeof quoted, "\"%s\":", key);
        if (strstr(over, quoted)) continue;
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        size_t len = strlen(line);
        if (len && line[len - 1] == ',') line[len - 1] = 0;
        k += (size_t)snprintf(out + k, sizeof out - k, "%s%s\n", k > 2 ? "," : "", line);
        /* the "architectures" list spans lines: keep its items too */
        if (strchr(line, '[') && !strchr(line, ']')) {
            while (fgets(line, sizeof line, f)) {
                k += (size_t)snprintf(out + k, sizeof out - k, "%s", line);
                if (strchr(line, ']')) {
                    out[k - 1] = 0; /* no newline: a comma may follow */
                    if (out[k - 2] == ',') out[k - 2] = 0;
                    k = strlen(out);
                    break;
                }
            }
        }
    }
    fclose(f);
    snprintf(out + k, sizeof out - k, "%s%s\n}\n", *over ? ", " : "", over);
    return write_text(path, out);
}

/* A tensor for raw_write: any safetensors dtype name (BOOL too, which the engine's
 * own writer refuses). */
typedef struct raw_tensor {
    const char *name, *dtype;
    int ndim;
    int64_t shape[4];
    const void *data;
    size_t nbytes;
} raw_tensor;

static int raw_write(const char *path, const raw_tensor *t, int n) {
    size_t cap = 256 + (size_t)n * 256, k = 0, off = 0;
    char *h = (char *)malloc(cap);
    if (!h) return -1;
    k += (size_t)snprintf(h + k, cap - k, "{");
    for (int i = 0; i < n; i++) {
        k += (size_t)snprintf(h + k, cap - k, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", t[i].name,
                              t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++) k += (size_t)snprintf(h + k, cap - k, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        k += (size_t)snprintf(h + k, cap - k, "],\"data_offsets\":[%zu,%zu]}", off, off + t[i].nbytes);
        off += t[i].nbytes;
    }
    k += (size_t)snprintf(h + k, cap - k, "}");
    FILE *f = fopen(path, "wb");
    int rc = f ? 0 : -1;
    uint64_t hl = k;
    if (f) {
        rc |= fwrite(&hl, 8, 1, f) != 1 || fwrite(h, 1, k, f) != k;
        for (int i = 0; i < n; i++) rc |= t[i].nbytes && fwrite(t[i].data, 1, t[i].nbytes, f) != t[i].nbytes;
        rc |= fclose(f) != 0;
    }
    free(h);
    return rc ? -1 : 0;
}

static const char *st_name(ft_dtype d) {
    return d == FT_DTYPE_F32 ? "F32" : d == FT_DTYPE_F16 ? "F16" : d == FT_DTYPE_BF16 ? "BF16" : d == FT_DTYPE_I64 ? "I64" : "I32";
}

/* edit(name, k, t, buf): the k-th tensor written for golden tensor `name` (renamed into
 * buf, reshaped or retyped through t), or NULL when done with it. */
typedef const char *(*edit_fn)(const char *name, int k, raw_tensor *t, char *buf, size_t size);

static int copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = a && b ? 0 : -1;
    while (!rc && (n = fread(buf, 1, sizeof buf, a)) > 0) rc = fwrite(buf, 1, n, b) != n;
    if (a) fclose(a);
    if (b && fclose(b)) rc = -1;
    return rc;
}

/* tmpdir/<sub>/ with the config of `gcase` (keys of `over` replaced), its golden
 * weights written through `edit` plus `extra` tensors, and its golden inputs and
 * expected outputs (so golden_run_check can run it with FT_GOLDEN_DIR = tmpdir). */
static int make_dir(ft_ctx *ctx, const char *gcase, const char *sub, const char *over, edit_fn edit,
                    const raw_tensor *extra, int n_extra, char *dir, size_t dsize) {
    char path[700], from[700];
    snprintf(dir, dsize, "%s/%s", tmpdir, sub);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (write_config(gcase, over, path)) return -1;
    const char *files[2] = {"inputs.safetensors", "expected.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(from, sizeof from, "%s/%s/%s", ft_test_golden_dir(), gcase, files[i]);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (copy_file(from, path)) return -1;
    }
    snprintf(path, sizeof path, "%s/%s/model.safetensors", ft_test_golden_dir(), gcase);
    ft_st_file *src = NULL;
    if (ft_st_open(ctx, path, &src) != FT_OK) return -1;
    int n = ft_st_count(src), k = 0, cap = 8 * n + n_extra;
    raw_tensor *out = (raw_tensor *)calloc((size_t)cap, sizeof *out);
    char(*names)[256] = calloc((size_t)cap, 256);
    for (int i = 0; out && names && i < n; i++) {
        const ft_st_tensor *t = ft_st_get(src, i);
        for (int r = 0; k < cap; r++) {
            raw_tensor c = {t->name, st_name(t->dtype), t->ndim, {0}, t->data, t->nbytes};
            for (int d = 0; d < t->ndim && d < 4; d++) c.shape[d] = t->shape[d];
            const char *nn = edit ? edit(t->name, r, &c, names[k], 256) : (r ? NULL : t->name);
            if (!nn) break;
            if (nn != names[k]) snprintf(names[k], 256, "%s", nn);
            out[k] = c;
            out[k].name = names[k];
            k++;
        }
    }
    for (int i = 0; out && i < n_extra && k < cap; i++) out[k++] = extra[i];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = out && names ? raw_write(path, out, k) : -1;
    free(names);
    free(out);
    ft_st_close(src);
    return rc;
}

/* ---- ALBERT's shared layers ---- */

/* Group 0's layer 0 written as groups 0..2 x inner layers 0..1 (same values, six
 * weights in memory). */
static const char *albert_3x2(const char *name, int k, raw_tensor *t, char *buf, size_t size) {
    (void)t;
    const char *p = "encoder.albert_layer_groups.0.albert_layers.0.";
    if (strncmp(name, p, strlen(p))) return k ? NULL : name;
    if (k >= 6) return NULL;
    snprintf(buf, size, "encoder.albert_layer_groups.%d.albert_layers.%d.%s", k / 2, k % 2, name + strlen(p));
    return buf;
}

/* Plan-time packing and Q/K/V stacks hold one copy per distinct layer, not one per
 * application: the golden ALBERT (1 group run 3 times) and a 3 x 2 layout run 6
 * times (12 layer evaluations of 6 weights). */
static void test_albert_shared_weights(void) {
    ft_test_tmpdir_make("zoo_a_share");
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    char dir[512], g1[512];
    golden_dir("albert", g1, sizeof g1);
    if (!ctx || make_dir(ctx, "albert", "g3x2", "\"num_hidden_groups\": 3, \"inner_group_num\": 2, "
                                              "\"num_hidden_layers\": 6", albert_3x2, NULL, 0, dir, sizeof dir)) {
        CHECK(0, "writing the 3 x 2 checkpoint: %s", ctx ? ft_ctx_errmsg(ctx) : "");
        ft_ctx_free(ctx);
        return;
    }
    struct {
        const char *dir;
        int distinct, evaluations;
    } v[2] = {{g1, 1, 3}, {dir, 6, 12}};
    for (int i = 0; i < 2; i++) {
        run_info r;
        if (load_and_run(FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F32, v[i].dir, "albert", &r, NULL, NULL)) continue;
        /* per distinct layer: the Q/K/V stack, dense, ffn, ffn_output; plus the E -> H
         * mapping and the pooler */
        CHECK(r.prepacks == 4 * v[i].distinct + 2, "%s: %lld weights packed for %d distinct layers", v[i].dir,
              (long long)r.prepacks, v[i].distinct);
        CHECK(r.gs.qkv_merged == v[i].evaluations && r.gs.attention_fused == v[i].evaluations,
              "%s: %d merges, %d attentions for %d layer evaluations", v[i].dir, r.gs.qkv_merged,
              r.gs.attention_fused, v[i].evaluations);
        /* f32 q/k/v weights and biases were packed side by side at load: no stack copies */
        CHECK(r.gs.shared_const_bytes == 0, "%s: %zu bytes of stacked weights", v[i].dir, r.gs.shared_const_bytes);
        /* fp16 biases (128 bytes) are not packed at load: one stack per distinct layer */
        if (load_and_run(FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F16, v[i].dir, "albert", &r, NULL, NULL)) continue;
        CHECK(r.gs.shared_const_bytes == (size_t)v[i].distinct * 3 * 64 * 2,
              "%s fp16: %zu bytes of stacked weights for %d distinct layers", v[i].dir, r.gs.shared_const_bytes,
              v[i].distinct);
    }
    /* the 3 x 2 layout with equal weights in every group is the golden layer run twice
     * per application: eager and graph agree, and differ from the golden output */
    ft_model *m[2] = {NULL, NULL};
    ft_ctx *c[2] = {NULL, NULL};
    if (!load_and_run(FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F32, dir, "albert", NULL, &m[0], &c[0]) &&
        !load_and_run(FT_DEVICE_CPU, FT_MODE_STATIC, FT_DTYPE_F32, dir, "albert", NULL, &m[1], &c[1])) {
        ft_tensor *a = ft_model_output_find(m[0], "last_hidden_state"), *b = ft_model_output_find(m[1], "last_hidden_state");
        float x[2 * 16 * 64], y[2 * 16 * 64];
        double md = 0;
        if (a && b && !ft_tensor_to_host(c[0], a, FT_DTYPE_F32, x, sizeof x) &&
            !ft_tensor_to_host(c[1], b, FT_DTYPE_F32, y, sizeof y))
            for (int i = 0; i < 2 * 16 * 64; i++) md = fmax(md, fabs((double)x[i] - y[i]));
        CHECK(a && b && md < 1e-4, "3 x 2 layout: eager and static differ by %g", md);
    }
    for (int i = 0; i < 2; i++) {
        ft_model_free(m[i]);
        ft_ctx_free(c[i]);
    }
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

/* ---- presets ---- */

static void test_presets(void) {
    static const struct {
        const char *name;
        int64_t params, macs;
    } p[] = {
        /* tests/golden/README-zoo.md (parameters); MACs op by op (B = 1, S = 128) */
        {"roberta-base", 124645632, 11174215680LL},
        {"albert-base-v2", 11683584, 11186798592LL},
        {"gpt2", 124439808, 11173625856LL},
        /* the large layouts: parameters of HF's formulas (bench/torch_zoo_text_a.py counts them too) */
        {"albert-large-v2", 17683968, -1},
        {"gpt2-medium", 354823168, -1},
    };
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        ft_model_options o = ft_model_options_default();
        o.weights = FT_WEIGHTS_NONE;
        ft_model *m = NULL;
        int64_t macs = 0;
        if (ft_model_load(ctx, p[i].name, &o, &m) != FT_OK) {
            CHECK(0, "%s: %s", p[i].name, ft_ctx_errmsg(ctx));
            ft_ctx_clear_error(ctx);
            continue;
        }
        CHECK(ft_model_param_count(m) == p[i].params, "%s: %lld parameters, expected %lld", p[i].name,
              (long long)ft_model_param_count(m), (long long)p[i].params);
        CHECK_OK(ctx, ft_model_macs(m, 1, 128, &macs));
        CHECK(p[i].macs < 0 || macs == p[i].macs, "%s: %lld MACs, expected %lld", p[i].name, (long long)macs,
              (long long)p[i].macs);
        ft_model_free(m);
    }
    ft_ctx_free(ctx);
}



/* ---- loader rules ---- */

static const char *edit_target; /* the tensor the edits below act on */

/* Every name with the arch's base-model prefix, "LayerNorm"/"layer_norm"/"ln_" weights
 * and biases spelled gamma/beta (HF renames any key holding those substrings), and
 * (ALBERT) no pooler. */
static const char *prefixed_gamma_beta(const char *name, int k, raw_tensor *t, char *buf, size_t size) {
    (void)t;
    if (k) return NULL;
    if (!strncmp(edit_target, "albert.", 7) && !strncmp(name, "pooler.", 7)) return NULL;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", name);
    size_t n = strlen(tmp);
    bool norm = strstr(tmp, "LayerNorm") || strstr(tmp, "layer_norm") || strstr(tmp, "ln_");
    if (norm && n > 7 && !strcmp(tmp + n - 7, ".weight")) snprintf(tmp + n - 7, sizeof tmp - (n - 7), ".gamma");
    else if (norm && n > 5 && !strcmp(tmp + n - 5, ".bias")) snprintf(tmp + n - 5, sizeof tmp - (n - 5), ".beta");
    snprintf(buf, size, "%s%s", edit_target, tmp);
    return buf;
}

static const int64_t ids_i64[34] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                                    18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33};
static const uint8_t tril[64 * 64] = {1}; /* a stand-in boolean causal buffer (values unread) */
static const float masked_bias = -1e4f;

/* The golden cases from files as published checkpoints have them, each checked
 * against HF's outputs: prefixed keys, gamma/beta spellings, the non-persistent
 * buffers older files carry (RoBERTa/ALBERT position_ids and token_type_ids as
 * I64, GPT-2's attn.bias as BOOL and attn.masked_bias), task heads, and ALBERT
 * without its pooler (then no pooler_output). */
static void test_loader_rules(void) {
    ft_test_tmpdir_make("zoo_a_load");
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    raw_tensor rob[3] = {{"roberta.embeddings.position_ids", "I64", 2, {1, 34}, ids_i64, sizeof ids_i64},
                         {"roberta.embeddings.token_type_ids", "I64", 2, {1, 34}, ids_i64, sizeof ids_i64},
                         {"lm_head.bias", "F32", 1, {16}, tril, 64}};
    raw_tensor alb[2] = {{"albert.embeddings.position_ids", "I64", 2, {1, 34}, ids_i64, sizeof ids_i64},
                         {"predictions.bias", "F32", 1, {16}, tril, 64}};
    raw_tensor gpt[4] = {{"transformer.h.0.attn.bias", "BOOL", 4, {1, 1, 64, 64}, tril, sizeof tril},
                         {"transformer.h.1.attn.bias", "BOOL", 4, {1, 1, 64, 64}, tril, sizeof tril},
                         {"transformer.h.0.attn.masked_bias", "F32", 0, {0}, &masked_bias, 4},
                         {"transformer.h.1.attn.masked_bias", "F32", 0, {0}, &masked_bias, 4}};
    struct {
        const char *gcase, *prefix;
        const raw_tensor *extra;
        int n_extra;
        const char *const *req;
    } v[3] = {{"roberta", "roberta.", rob, 3, req_pooled}, {"albert", "albert.", alb, 2, req_plain},
              {"gpt2", "transformer.", gpt, 4, req_plain}};
    const char *old = getenv("FT_GOLDEN_DIR");
    char keep[512] = "";
    if (old) snprintf(keep, sizeof keep, "%s", old);
    for (int i = 0; i < 3; i++) {
        char dir[512];
        edit_target = v[i].prefix;
        if (make_dir(ctx, v[i].gcase, v[i].gcase, "", prefixed_gamma_beta, v[i].extra, v[i].n_extra, dir,
                     sizeof dir)) {
            CHECK(0, "writing %s: %s", v[i].gcase, ft_ctx_errmsg(ctx));
            continue;
        }
        setenv("FT_GOLDEN_DIR", tmpdir, 1);
        golden_run_check(v[i].gcase, FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F32, v[i].req, GOLDEN_FP32);
        golden_run_check(v[i].gcase, FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F32, v[i].req, GOLDEN_FP32);
        if (old) setenv("FT_GOLDEN_DIR", keep, 1);
        else unsetenv("FT_GOLDEN_DIR");
        if (i == 1) { /* no pooler in the file: no pooler_output */
            ft_model *m = NULL;
            ft_ctx *c = NULL;
            if (!load_and_run(FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F32, dir, "albert", NULL, &m, &c))
                CHECK(!ft_model_output_find(m, "pooler_output"), "albert without pooler has a pooler_output");
            ft_model_free(m);
            ft_ctx_free(c);
        }
    }
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

/* ---- bad checkpoints ---- */

static const char *drop(const char *name, int k, raw_tensor *t, char *buf, size_t size) {
    (void)t, (void)buf, (void)size;
    return k || !strcmp(name, edit_target) ? NULL : name;
}

/* the target with its two dims swapped (GPT-2's Conv1D written like a Linear) */
static const char *swap_dims(const char *name, int k, raw_tensor *t, char *buf, size_t size) {
    (void)buf, (void)size;
    if (k) return NULL;
    if (!strcmp(name, edit_target)) {
        int64_t x = t->shape[0];
        t->shape[0] = t->shape[1];
        t->shape[1] = x;
    }
    return name;
}

/* the target stored as BOOL (its bytes reinterpreted, the size adjusted) */
static const char *as_bool(const char *name, int k, raw_tensor *t, char *buf, size_t size) {
    (void)buf, (void)size;
    if (k) return NULL;
    if (!strcmp(name, edit_target)) {
        t->dtype = "BOOL";
        t->nbytes /= 4;
    }
    return name;
}

/* group 0 also written as group (or inner layer) 1 */
static const char *second_group(const char *name, int k, raw_tensor *t, char *buf, size_t size) {
    (void)t;
    const char *p = "encoder.albert_layer_groups.0.albert_layers.0.";
    if (k > 1 || (k && strncmp(name, p, strlen(p)))) return NULL;
    if (!k) return name;
    snprintf(buf, size, edit_target, name + strlen(p));
    return buf;
}

static void test_bad_checkpoints(void) {
    static const struct {
        const char *gcase, *over;
        edit_fn edit;
        const char *target;
        ft_status st;
        const char *msg;
    } b[] = {
        {"roberta", "\"num_attention_heads\": 5", NULL, NULL, FT_ERR_FORMAT, "num_attention_heads 5"},
        {"albert", "\"num_attention_heads\": 3", NULL, NULL, FT_ERR_FORMAT, "num_attention_heads 3"},
        {"gpt2", "\"n_head\": 6", NULL, NULL, FT_ERR_FORMAT, "n_head 6"},
        {"gpt2", "\"add_cross_attention\": true", NULL, NULL, FT_ERR_FORMAT, "add_cross_attention"},
        {"roberta", "\"pad_token_id\": 34", NULL, NULL, FT_ERR_FORMAT, "pad_token_id 34"},
        {"roberta", "\"position_embedding_type\": \"relative_key\"", NULL, NULL, FT_ERR_FORMAT, "relative_key"},
        {"albert", "\"num_hidden_groups\": 0", NULL, NULL, FT_ERR_FORMAT, "num_hidden_groups 0"},
        {"albert", "\"hidden_act\": \"gelu_fancy\"", NULL, NULL, FT_ERR_FORMAT, "gelu_fancy"},
        {"roberta", "", drop, "encoder.layer.1.output.dense.bias", FT_ERR_NOT_FOUND, "encoder.layer.1.output.dense.bias"},
        {"roberta", "\"max_position_embeddings\": 40", NULL, NULL, FT_ERR_SHAPE, "[34,64], but the config implies [40,64]"},
        {"albert", "", drop, "encoder.embedding_hidden_mapping_in.weight", FT_ERR_NOT_FOUND, "embedding_hidden_mapping_in"},
        {"albert", "\"embedding_size\": 48", NULL, NULL, FT_ERR_SHAPE, "word_embeddings.weight"},
        {"albert", "\"num_hidden_groups\": 2", NULL, NULL, FT_ERR_NOT_FOUND, "albert_layer_groups.1.albert_layers.0"},
        {"albert", "\"inner_group_num\": 2", NULL, NULL, FT_ERR_NOT_FOUND, "albert_layer_groups.0.albert_layers.1"},
        {"albert", "", second_group, "encoder.albert_layer_groups.1.albert_layers.0.%s", FT_ERR_SHAPE,
         "num_hidden_groups is 1"},
        {"albert", "", second_group, "encoder.albert_layer_groups.0.albert_layers.1.%s", FT_ERR_SHAPE,
         "inner_group_num is 1"},
        {"gpt2", "", swap_dims, "h.1.attn.c_attn.weight", FT_ERR_SHAPE, "[64,192]"},
        {"gpt2", "", swap_dims, "h.0.mlp.c_proj.weight", FT_ERR_SHAPE, "[256,64]"},
        {"gpt2", "", drop, "ln_f.bias", FT_ERR_NOT_FOUND, "ln_f.bias"},
        {"gpt2", "", as_bool, "h.0.ln_2.weight", FT_ERR_UNSUPPORTED, "BOOL"},
        {"gpt2", "\"n_inner\": 128", NULL, NULL, FT_ERR_SHAPE, "h.0.mlp.c_fc.weight"},
    };
    ft_test_tmpdir_make("zoo_a_bad");
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        char dir[512], sub[32];
        snprintf(sub, sizeof sub, "case%zu", i);
        edit_target = b[i].target;
        if (make_dir(ctx, b[i].gcase, sub, b[i].over, b[i].edit, NULL, 0, dir, sizeof dir)) {
            CHECK(0, "writing case %zu: %s", i, ft_ctx_errmsg(ctx));
            continue;
        }
        for (int k = 0; k < 2; k++) {
            ft_model_options o = ft_model_options_default();
            o.mode = k ? FT_MODE_GRAPH : FT_MODE_EAGER;
            ft_model *m = NULL;
            ft_status st = ft_model_load(ctx, dir, &o, &m);
            const char *msg = ft_ctx_errmsg(ctx);
            CHECK(st == b[i].st && strstr(msg, b[i].msg), "%s case %zu (%s%s): %s (%s), expected %s naming '%s'",
                  b[i].gcase, i, b[i].over, b[i].target ? b[i].target : "", ft_status_str(st), msg,
                  ft_status_str(b[i].st), b[i].msg);
            ft_model_free(m);
            ft_ctx_clear_error(ctx);
        }
    }
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

/* ---- inputs ---- */

typedef struct text_in {
    int64_t ids[2 * 70], mask[2 * 70], tt[2 * 70], pos[2 * 70];
} text_in;

/* Runs `dir` (eager or graph) on [B, S] inputs; the last_hidden_state into out (if
 * given); the status, with the message in msg. */
static ft_status run_text(const char *dir, ft_mode mode, int64_t B, int64_t S, const text_in *in, const char *const *names,
                          int n, float *out, char *msg, size_t msz) {
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) return FT_ERR_INTERNAL;
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    ft_model *m = NULL;
    ft_host_tensor h[4];
    for (int i = 0; i < n; i++) {
        const int64_t *d = !strcmp(names[i], "input_ids") ? in->ids : !strcmp(names[i], "attention_mask") ? in->mask
                           : !strcmp(names[i], "token_type_ids")                                      ? in->tt
                                                                                                       : in->pos;
        bool one = !strcmp(names[i], "position_ids") && in->pos[0] < 0; /* [1, S]: row 1 */
        h[i] = (ft_host_tensor){names[i], FT_DTYPE_I64, 2, {one ? 1 : B, S}, one ? d + S : d};
    }
    ft_status st = ft_model_load(ctx, dir, &o, &m);
    if (st == FT_OK) st = ft_model_forward(m, h, n);
    snprintf(msg, msz, "%s", ft_ctx_errmsg(ctx));
    ft_tensor *y = st == FT_OK ? ft_model_output_find(m, "last_hidden_state") : NULL;
    if (y && out) st = ft_tensor_to_host(ctx, y, FT_DTYPE_F32, out, sizeof(float) * (size_t)(B * S * 64));
    ft_model_free(m);
    ft_ctx_free(ctx);
    return st;
}

static void fill(text_in *in, int64_t B, int64_t S, int64_t vocab, int64_t pad) {
    for (int64_t i = 0; i < B * S; i++) {
        in->ids[i] = (i * 37 + 11) % vocab;
        if (in->ids[i] == pad) in->ids[i]++;
        in->mask[i] = 1;
        in->tt[i] = 0;
        in->pos[i] = i % S;
    }
}

static void expect_input_error(const char *gcase, int64_t B, int64_t S, const text_in *in, const char *const *names, int n,
                               const char *want) {
    char dir[512], msg[512];
    golden_dir(gcase, dir, sizeof dir);
    ft_status st = run_text(dir, FT_MODE_EAGER, B, S, in, names, n, NULL, msg, sizeof msg);
    CHECK(st != FT_OK && strstr(msg, want), "%s: %s (%s), expected an error naming '%s'", gcase, ft_status_str(st), msg,
          want);
}

static void test_bad_inputs(void) {
    const char *ids[] = {"input_ids"}, *with_tt[] = {"input_ids", "token_type_ids"},
               *with_pos[] = {"input_ids", "position_ids"}, *with_mask[] = {"input_ids", "attention_mask"};
    text_in in;
    /* RoBERTa (pad 1, 34 positions): at most 32 tokens that are not padding */
    fill(&in, 1, 33, 512, 1);
    expect_input_error("roberta", 1, 33, &in, ids, 1, "max_position_embeddings 34");
    in.ids[0] = in.ids[1] = 1; /* two pads: positions stay in the table */
    char dir[512], msg[512];
    golden_dir("roberta", dir, sizeof dir);
    CHECK(run_text(dir, FT_MODE_EAGER, 1, 33, &in, ids, 1, NULL, msg, sizeof msg) == FT_OK, "roberta, 31 tokens and 2 "
          "pads: %s", msg);
    fill(&in, 2, 8, 512, 1);
    in.tt[3] = 1;
    expect_input_error("roberta", 2, 8, &in, with_tt, 2, "token_type_ids");
    in.pos[5] = 34;
    expect_input_error("roberta", 2, 8, &in, with_pos, 2, "position_ids");
    fill(&in, 2, 8, 512, 0);
    in.mask[4] = 3;
    expect_input_error("albert", 2, 8, &in, with_mask, 2, "attention_mask");
    fill(&in, 1, 65, 512, -1);
    expect_input_error("gpt2", 1, 65, &in, ids, 1, "64");
    fill(&in, 2, 8, 512, -1);
    in.ids[9] = 512;
    expect_input_error("gpt2", 2, 8, &in, ids, 1, "input_ids");
    fill(&in, 2, 8, 512, -1);
    in.tt[2] = 600; /* GPT-2's token types index the word table */
    expect_input_error("gpt2", 2, 8, &in, with_tt, 2, "token_type_ids");
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* Explicit position_ids and token_type_ids as HF takes them: positions equal to the
 * defaults give the default output ([B, S] or [1, S]); RoBERTa's default positions
 * come from the ids, not from the mask; other positions and GPT-2's token types
 * (rows of the word table) change it, alike in eager and graph mode. */
static void test_explicit_inputs(void) {
    static float base[2 * 20 * 64], got[2 * 20 * 64], other[2 * 20 * 64];
    const int64_t B = 2, S = 20, n = B * S * 64;
    const char *ids[] = {"input_ids"}, *with_pos[] = {"input_ids", "position_ids"},
               *with_tt[] = {"input_ids", "token_type_ids"}, *with_mask[] = {"input_ids", "attention_mask"};
    char msg[512];
    for (int c = 0; c < N_CASES; c++) {
        char dir[512];
        golden_dir(cases[c].name, dir, sizeof dir);
        bool rob = !strcmp(cases[c].name, "roberta"), gpt = !strcmp(cases[c].name, "gpt2");
        text_in in;
        fill(&in, B, S, 512, rob ? 1 : -1);
        if (rob) { /* pads inside and at the end of row 1: positions 2, 3, .. skip them */
            in.ids[S + 4] = in.ids[S + 17] = in.ids[S + 18] = in.ids[S + 19] = 1;
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = 0, k = 1; s < S; s++) in.pos[b * S + s] = in.ids[b * S + s] == 1 ? 1 : 1 + k++;
        }
        for (int k = 0; k < 2; k++) {
            ft_mode mode = k ? FT_MODE_GRAPH : FT_MODE_EAGER;
            CHECK(run_text(dir, mode, B, S, &in, ids, 1, base, msg, sizeof msg) == FT_OK, "%s: %s", dir, msg);
            CHECK(run_text(dir, mode, B, S, &in, with_pos, 2, got, msg, sizeof msg) == FT_OK, "%s: %s", dir, msg);
            CHECK(max_diff(base, got, n) == 0, "%s %s: the default positions given explicitly change the output by %g",
                  cases[c].name, ft_mode_name(mode), max_diff(base, got, n));
            if (rob) { /* the mask plays no part in the positions: masking row 1's pads changes nothing there */
                for (int64_t s = 17; s < S; s++) in.mask[S + s] = 0;
                CHECK(run_text(dir, mode, B, S, &in, with_mask, 2, got, msg, sizeof msg) == FT_OK, "%s", msg);
                CHECK(max_diff(base, got, S * 64) < 1e-5, "roberta: masking row 1 changed row 0 by %g",
                      max_diff(base, got, S * 64));
                for (int64_t s = 17; s < S; s++) in.mask[S + s] = 1;
            }
            int64_t keep = in.pos[S];
            in.pos[0] = -1; /* [1, S]: row 1's positions for both rows */
            CHECK(run_text(dir, mode, B, S, &in, with_pos, 2, got, msg, sizeof msg) == FT_OK, "%s: %s", dir, msg);
            CHECK(max_diff(base + S * 64, got + S * 64, S * 64) == 0, "%s: [1, S] positions differ on row 1",
                  cases[c].name);
            in.pos[0] = rob ? 2 : 0;
            in.pos[S] = keep;
            in.pos[3] += 1; /* other positions change row 0 */
            CHECK(run_text(dir, mode, B, S, &in, with_pos, 2, other, msg, sizeof msg) == FT_OK, "%s", msg);
            CHECK(max_diff(base, other, S * 64) > 1e-3, "%s: other positions change nothing", cases[c].name);
            in.pos[3] -= 1;
            if (gpt || !rob) {
                for (int64_t i = 0; i < B * S; i++) in.tt[i] = gpt ? (i * 7) % 512 : i % 2;
                CHECK(run_text(dir, mode, B, S, &in, with_tt, 2, other, msg, sizeof msg) == FT_OK, "%s", msg);
                CHECK(max_diff(base, other, n) > 1e-3, "%s: token types change nothing", cases[c].name);
                for (int64_t i = 0; i < B * S; i++) in.tt[i] = 0;
            }
        }
    }
}

int main(void) {
    RUN(test_golden_cpu_fp32);
    RUN(test_golden_cpu_fp16);
    RUN(test_golden_cpu_bf16);
    RUN(test_golden_cuda);
    RUN(test_passes_fire_cpu);
    RUN(test_passes_fire_cuda);
    RUN(test_albert_shared_weights);
    RUN(test_presets);
    RUN(test_loader_rules);
    RUN(test_bad_checkpoints);
    RUN(test_bad_inputs);
    RUN(test_explicit_inputs);
    return ft_test_finish();
}

/*
 * test_funnel_mobilebert.c - FunnelModel / FunnelBaseModel and MobileBertModel
 * end to end: the HF golden cases (CPU fp32 at the golden tolerance, every
 * intermediate the expected file holds; CUDA fp32 and fp16, skipped without a
 * device), preset parameter and MAC counts, and robustness through the same
 * code paths on shapes and configurations without an HF reference here (odd
 * lengths, batch 3, separate_cls / truncate_seq / pool_q_only off, other block
 * layouts, 4 stacked FFNs, other bottleneck variants): those check that the
 * forward runs, shapes are right, outputs finite, batch rows independent, the
 * per-length cache consistent, and eager and graph modes agree.
 */
#include "ft_golden.h"
#include "ft_test.h"

#include "../engine/safetensors.h"
#include "ftengine.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const funnel_required[] = {"last_hidden_state", NULL};
static const char *const mb_required[] = {"last_hidden_state", "pooler_output", NULL};

static void test_golden_cpu_fp32(void) {
    golden_run_check("funnel", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F32, funnel_required, GOLDEN_FP32);
    golden_run_check("mobilebert", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F32, mb_required, GOLDEN_FP32);
}

static void test_golden_cpu_fp16(void) {
    golden_run_check("funnel", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F16, funnel_required, GOLDEN_FP16);
    golden_run_check("mobilebert", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_F16, mb_required, GOLDEN_FP16);
    /* graph mode in f16: the fused attention takes Funnel's positional and token-type
     * terms as an f32 mask */
    golden_run_check("funnel", FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F16, funnel_required, GOLDEN_FP16);
    golden_run_check("funnel", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_BF16, funnel_required,
                     (golden_tol){3e-2, 3e-2, 2e-2});
    golden_run_check("mobilebert", FT_DEVICE_CPU, FT_MODE_EAGER, FT_DTYPE_BF16, mb_required,
                     (golden_tol){3e-2, 3e-2, 2e-2});
}

static int graph_available(ft_device dev) {
    static int cached[2] = {-1, -1};
    if (cached[dev] >= 0) return cached[dev];
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(dev, &ctx) != FT_OK) return cached[dev] = 0;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/funnel", ft_test_golden_dir());
    ft_model_options o = ft_model_options_default();
    o.mode = FT_MODE_GRAPH;
    ft_model *m = NULL;
    cached[dev] = ft_model_load(ctx, dir, &o, &m) == FT_OK;
    ft_model_free(m);
    ft_ctx_free(ctx);
    return cached[dev];
}

static void test_golden_graph(void) {
    if (!graph_available(FT_DEVICE_CPU)) {
        SKIP("graph mode not available");
        return;
    }
    golden_run_check("funnel", FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F32, funnel_required, GOLDEN_FP32);
    golden_run_check("mobilebert", FT_DEVICE_CPU, FT_MODE_GRAPH, FT_DTYPE_F32, mb_required, GOLDEN_FP32);
    golden_run_check("funnel", FT_DEVICE_CPU, FT_MODE_STATIC, FT_DTYPE_F32, funnel_required, GOLDEN_FP32);
    golden_run_check("mobilebert", FT_DEVICE_CPU, FT_MODE_STATIC, FT_DTYPE_F32, mb_required, GOLDEN_FP32);
}

static void test_golden_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    const char *cases[] = {"funnel", "mobilebert"};
    const char *const *req[] = {funnel_required, mb_required};
    for (int i = 0; i < 2; i++) {
        golden_run_check(cases[i], FT_DEVICE_CUDA, FT_MODE_EAGER, FT_DTYPE_F32, req[i], GOLDEN_FP32);
        golden_run_check(cases[i], FT_DEVICE_CUDA, FT_MODE_EAGER, FT_DTYPE_F16, req[i], GOLDEN_FP16);
        if (graph_available(FT_DEVICE_CUDA)) {
            golden_run_check(cases[i], FT_DEVICE_CUDA, FT_MODE_GRAPH, FT_DTYPE_F32, req[i], GOLDEN_FP32);
            golden_run_check(cases[i], FT_DEVICE_CUDA, FT_MODE_STATIC, FT_DTYPE_F32, req[i], GOLDEN_FP32);
        }
    }
}

/* ---- temporary model directories ---- */


static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* rename(name, k, buf): the k-th name golden tensor `name` is written under, NULL when done */
typedef const char *(*rename_fn)(const char *name, int k, char *buf, size_t size);

/* tmpdir/<sub>/ with config.json and the golden weights of `gcase` written through `rename` */
static int make_model_dir(ft_ctx *ctx, const char *gcase, const char *sub, const char *config, rename_fn rename,
                          char *dir, size_t dsize) {
    char path[700];
    snprintf(dir, dsize, "%s/%s", tmpdir, sub);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (write_text(path, config)) return -1;
    snprintf(path, sizeof path, "%s/%s/model.safetensors", ft_test_golden_dir(), gcase);
    ft_st_file *src = NULL;
    if (ft_st_open(ctx, path, &src) != FT_OK) return -1;
    int n = ft_st_count(src), k = 0, cap = 4 * n;
    ft_st_tensor *out = (ft_st_tensor *)calloc((size_t)cap, sizeof *out);
    char (*names)[256] = calloc((size_t)cap, 256);
    for (int i = 0; i < n; i++) {
        const ft_st_tensor *t = ft_st_get(src, i);
        for (int r = 0; k < cap; r++) {
            char buf[256];
            const char *nn = rename ? rename(t->name, r, buf, sizeof buf) : (r ? NULL : t->name);
            if (!nn) break;
            out[k] = *t;
            snprintf(names[k], 256, "%s", nn);
            out[k].name = names[k];
            k++;
        }
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ft_status st = ft_st_write(ctx, path, out, k);
    free(names);
    free(out);
    ft_st_close(src);
    return st == FT_OK ? 0 : -1;
}

/* ---- running a model on synthetic inputs ---- */

typedef struct run_out {
    float *h; /* last_hidden_state */
    int64_t shape[3];
    int ok;
} run_out;

/* ids pseudo-random, row 1 padded after 2/3 of its length, token types with a <cls> 2 for Funnel */
static void make_inputs(int64_t B, int64_t S, int64_t vocab, int cls_type, int64_t *ids, int64_t *mask, int64_t *tt) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            int64_t i = b * S + s;
            ids[i] = (i * 131 + 17 * b + 7) % vocab;
            mask[i] = b != 1 || s < (2 * S + 2) / 3;
            tt[i] = s == 0 && cls_type ? 2 : (s >= S / 2);
        }
}

static run_out run_model(const char *dir, ft_device dev, ft_mode mode, int64_t B, int64_t S, int64_t vocab,
                         int cls_type, int n_in, int64_t row_off) {
    run_out r;
    memset(&r, 0, sizeof r);
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(dev, &ctx) != FT_OK) return r;
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    ft_model *m = NULL;
    int64_t *buf = (int64_t *)malloc((size_t)(3 * (B + row_off) * S) * sizeof(int64_t));
    int64_t *ids = buf, *mask = buf + (B + row_off) * S, *tt = buf + 2 * (B + row_off) * S;
    make_inputs(B + row_off, S, vocab, cls_type, ids, mask, tt);
    ft_host_tensor in[3] = {{"input_ids", FT_DTYPE_I64, 2, {B, S}, ids + row_off * S},
                            {"attention_mask", FT_DTYPE_I64, 2, {B, S}, mask + row_off * S},
                            {"token_type_ids", FT_DTYPE_I64, 2, {B, S}, tt + row_off * S}};
    if (ft_model_load(ctx, dir, &o, &m) != FT_OK) {
        CHECK(0, "load %s (%s): %s", dir, ft_mode_name(mode), ft_ctx_errmsg(ctx));
    } else if (ft_model_forward(m, in, n_in) != FT_OK) {
        CHECK(0, "forward %s (%s, B %lld, S %lld): %s", dir, ft_mode_name(mode), (long long)B, (long long)S,
              ft_ctx_errmsg(ctx));
    } else {
        ft_tensor *h = ft_model_output_find(m, "last_hidden_state");
        CHECK(h && ft_tensor_ndim(h) == 3, "last_hidden_state missing or not rank 3");
        if (h && ft_tensor_ndim(h) == 3) {
            int64_t n = ft_tensor_numel(h);
            for (int d = 0; d < 3; d++) r.shape[d] = ft_tensor_dim(h, d);
            r.h = (float *)malloc((size_t)n * sizeof(float));
            r.ok = ft_tensor_to_host(ctx, h, FT_DTYPE_F32, r.h, (size_t)n * sizeof(float)) == FT_OK;
            for (int64_t i = 0; r.ok && i < n; i++)
                if (!isfinite(r.h[i])) {
                    CHECK(0, "%s: non-finite output at %lld", dir, (long long)i);
                    r.ok = 0;
                }
        }
    }
    free(buf);
    ft_model_free(m);
    ft_ctx_free(ctx);
    return r;
}

/* max |a-b| / max(1, max|b|) over n values */
static double rel_diff(const float *a, const float *b, int64_t n) {
    double d = 0, ref = 1;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        ref = fmax(ref, fabs((double)b[i]));
    }
    return d / ref;
}

/*
 * Runs dir at [B, S]: shape [B, out_len, D], finite; row 1 of the batch equals
 * row 1 run alone; graph mode (when built) equals eager.
 */
static void check_robust(const char *what, const char *dir, int64_t B, int64_t S, int64_t out_len, int64_t D,
                         int64_t vocab, int cls_type) {
    run_out e = run_model(dir, FT_DEVICE_CPU, FT_MODE_EAGER, B, S, vocab, cls_type, 3, 0);
    if (!e.ok) {
        CHECK(0, "%s: eager run failed", what);
        free(e.h);
        return;
    }
    CHECK(e.shape[0] == B && e.shape[1] == out_len && e.shape[2] == D,
          "%s: shape [%lld,%lld,%lld], expected [%lld,%lld,%lld]", what, (long long)e.shape[0],
          (long long)e.shape[1], (long long)e.shape[2], (long long)B, (long long)out_len, (long long)D);
    int64_t row = out_len * D;
    if (B > 1) {
        run_out one = run_model(dir, FT_DEVICE_CPU, FT_MODE_EAGER, 1, S, vocab, cls_type, 3, 1);
        if (one.ok) {
            double d = rel_diff(e.h + row, one.h, row);
            CHECK(d < 1e-5, "%s: batch row 1 differs from the row alone by %g", what, d);
        }
        free(one.h);
    }
    if (graph_available(FT_DEVICE_CPU)) {
        run_out g = run_model(dir, FT_DEVICE_CPU, FT_MODE_GRAPH, B, S, vocab, cls_type, 3, 0);
        if (g.ok) {
            double d = rel_diff(g.h, e.h, B * row);
            CHECK(d < 1e-4, "%s: graph mode differs from eager by %g", what, d);
        }
        free(g.h);
    }
    if (ft_cuda_device_count() > 0) {
        run_out c = run_model(dir, FT_DEVICE_CUDA, FT_MODE_EAGER, B, S, vocab, cls_type, 3, 0);
        if (c.ok) {
            double d = rel_diff(c.h, e.h, B * row);
            CHECK(d < 1e-4, "%s: CUDA differs from CPU by %g", what, d);
        }
        free(c.h);
    }
    free(e.h);
}

/* ---- Funnel configurations on the golden weights ---- */

#define FUNNEL_BASE_CFG "\"model_type\": \"funnel\", \"d_model\": 64, \"n_head\": 4, \"d_head\": 16, " \
                        "\"d_inner\": 128, \"vocab_size\": 512, \"num_decoder_layers\": 2"

/* encoder length after the blocks, by HF's pooling rule */
static int64_t funnel_len(int64_t S, int blocks, int sep, int trunc) {
    int64_t L = S;
    for (int b = 1; b < blocks && L > (sep ? 2 : 1); b++) L = sep && !trunc ? (L + 2) / 2 : (L + 1) / 2;
    return L;
}

/* blocks [2, 1] from golden [1, 1, 1]: blocks.1.0 -> blocks.0.1, blocks.2.0 -> blocks.1.0 */
static const char *to_blocks_2_1(const char *name, int k, char *buf, size_t size) {
    if (k) return NULL;
    if (!strncmp(name, "encoder.blocks.1.0.", 19)) {
        snprintf(buf, size, "encoder.blocks.0.1.%s", name + 19);
        return buf;
    }
    if (!strncmp(name, "encoder.blocks.2.0.", 19)) {
        snprintf(buf, size, "encoder.blocks.1.0.%s", name + 19);
        return buf;
    }
    return name;
}

/* 4 blocks of 1 for a base model: decoder.layers.0 -> blocks.3.0, with a "funnel." prefix */
static const char *to_4_blocks(const char *name, int k, char *buf, size_t size) {
    if (k) return NULL;
    if (!strncmp(name, "decoder.layers.0.", 17)) snprintf(buf, size, "funnel.encoder.blocks.3.0.%s", name + 17);
    else snprintf(buf, size, "funnel.%s", name);
    return buf;
}

static void test_funnel_variants(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    ft_test_tmpdir_make("fmb");
    struct {
        const char *name, *extra;
        rename_fn rename;
        int blocks, sep, trunc, base;
        int64_t S[3];
    } v[] = {
        {"default", "", NULL, 3, 1, 1, 0, {5, 7, 13}},
        /* too short to pool every block: HF still computes (unpooled rows, broadcast shift) */
        {"short", "", NULL, 3, 1, 1, 0, {1, 2, 3}},
        {"short_base", ", \"architectures\": [\"FunnelBaseModel\"]", NULL, 3, 1, 1, 1, {4, 1, 2}},
        {"no_separate_cls", ", \"separate_cls\": false", NULL, 3, 0, 1, 0, {4, 9, 16}},
        {"no_truncate_seq", ", \"truncate_seq\": false", NULL, 3, 1, 0, 0, {5, 11, 16}},
        {"neither", ", \"separate_cls\": false, \"truncate_seq\": false", NULL, 3, 0, 0, 0, {7, 10, 16}},
        {"pool_qkv", ", \"pool_q_only\": false", NULL, 3, 1, 1, 0, {5, 9, 16}},
        {"max_pool", ", \"pooling_type\": \"max\"", NULL, 3, 1, 1, 0, {6, 15, 16}},
        {"repeats", ", \"block_repeats\": [2, 1, 2]", NULL, 3, 1, 1, 0, {7, 12, 16}},
        {"blocks_2_1", ", \"block_sizes\": [2, 1], \"block_repeats\": [1, 2]", to_blocks_2_1, 2, 1, 1, 0, {3, 8, 17}},
        {"base", ", \"architectures\": [\"FunnelBaseModel\"]", NULL, 3, 1, 1, 1, {5, 9, 16}},
        {"base_4_blocks", ", \"architectures\": [\"FunnelBaseModel\"], \"block_sizes\": [1, 1, 1, 1]", to_4_blocks, 4,
         1, 1, 1, {9, 16, 21}},
        {"one_decoder_layer", ", \"num_decoder_layers\": 1, \"separate_cls\": false", NULL, 3, 0, 1, 0, {5, 8, 16}},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char cfg[512], dir[600];
        snprintf(cfg, sizeof cfg, "{" FUNNEL_BASE_CFG ", \"block_sizes\": [1, 1, 1]%s}", v[i].extra);
        if (make_model_dir(ctx, "funnel", v[i].name, cfg, v[i].rename, dir, sizeof dir)) {
            CHECK(0, "%s: writing model: %s", v[i].name, ft_ctx_errmsg(ctx));
            continue;
        }
        for (int k = 0; k < 3; k++) {
            int64_t S = v[i].S[k], B = k == 1 ? 1 : 3;
            int64_t out = v[i].base ? funnel_len(S, v[i].blocks, v[i].sep, v[i].trunc) : S;
            char what[128];
            snprintf(what, sizeof what, "funnel %s B%lld S%lld", v[i].name, (long long)B, (long long)S);
            check_robust(what, dir, B, S, out, 64, 512, 1);
        }
    }
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

/* The same inputs give the same outputs after other lengths went through the
 * per-length cache; and no token types / no mask take HF's defaults. */
static void test_funnel_cache_and_defaults(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/funnel", ft_test_golden_dir());
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    ft_model *m = NULL;
    CHECK_OK(ctx, ft_model_load(ctx, dir, NULL, &m));
    golden_case g;
    if (!m || golden_open(ctx, "funnel", &g)) {
        CHECK(0, "setup: %s", ft_ctx_errmsg(ctx));
        ft_model_free(m);
        ft_ctx_free(ctx);
        return;
    }
    float first[2 * 16 * 64], again[2 * 16 * 64];
    CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
    CHECK_OK(ctx, ft_tensor_to_host(ctx, ft_model_output_find(m, "last_hidden_state"), FT_DTYPE_F32, first,
                                    sizeof first));
    int64_t ids[2 * 40] = {0};
    for (int S = 5; S <= 40; S += 7) { /* more lengths than the cache holds */
        ft_host_tensor in = {"input_ids", FT_DTYPE_I64, 2, {2, S}, ids};
        CHECK_OK(ctx, ft_model_forward(m, &in, 1));
    }
    CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
    CHECK_OK(ctx, ft_tensor_to_host(ctx, ft_model_output_find(m, "last_hidden_state"), FT_DTYPE_F32, again,
                                    sizeof again));
    CHECK(rel_diff(again, first, 2 * 16 * 64) == 0, "the per-length cache changed the result");
    /* absent mask = all ones, absent token types = all zeros */
    int64_t ones[2 * 16], zeros[2 * 16] = {0};
    for (int i = 0; i < 32; i++) ones[i] = 1;
    const ft_host_tensor *gi = NULL;
    for (int i = 0; i < g.n_in; i++)
        if (!strcmp(g.in[i].name, "input_ids")) gi = &g.in[i];
    ft_host_tensor full[3] = {*gi, {"attention_mask", FT_DTYPE_I64, 2, {2, 16}, ones},
                              {"token_type_ids", FT_DTYPE_I64, 2, {2, 16}, zeros}};
    CHECK_OK(ctx, ft_model_forward(m, full, 3));
    CHECK_OK(ctx, ft_tensor_to_host(ctx, ft_model_output_find(m, "last_hidden_state"), FT_DTYPE_F32, first,
                                    sizeof first));
    CHECK_OK(ctx, ft_model_forward(m, gi, 1));
    CHECK_OK(ctx, ft_tensor_to_host(ctx, ft_model_output_find(m, "last_hidden_state"), FT_DTYPE_F32, again,
                                    sizeof again));
    double d = rel_diff(again, first, 2 * 16 * 64);
    CHECK(d < 1e-6, "absent mask/token types differ from explicit defaults by %g", d);
    /* steady state: no system allocations once the length is cached */
    ft_mem_stats s1 = ft_ctx_mem_stats(ctx);
    CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
    CHECK_OK(ctx, ft_model_forward(m, g.in, g.n_in));
    ft_mem_stats s2 = ft_ctx_mem_stats(ctx);
    CHECK(s2.n_sys_alloc == s1.n_sys_alloc, "steady-state forwards made %llu system allocations",
          (unsigned long long)(s2.n_sys_alloc - s1.n_sys_alloc));
    golden_close(&g);
    ft_model_free(m);
    ft_ctx_free(ctx);
}

/* ---- MobileBERT variants ---- */

/* golden weights with the one extra FFN copied into ffn.1 and ffn.2 */
static const char *to_4_ffn(const char *name, int k, char *buf, size_t size) {
    const char *p = strstr(name, ".ffn.0.");
    if (!p) return k ? NULL : name;
    if (k > 2) return NULL;
    snprintf(buf, size, "mobilebert.%.*s.ffn.%d.%s", (int)(p - name), name, k, p + 7);
    return buf;
}

/* Random weights for a MobileBERT config (normal-ish, std 0.1; norm scales near 1). */
typedef struct mb_cfg {
    int64_t V, D, E, Dt, I, L, nffn, P, T;
    int trigram, bottleneck, batt, kq, cls;
} mb_cfg;

typedef struct wlist {
    ft_st_tensor t[512];
    char names[512][128];
    float *data[512];
    int n;
    uint64_t rng;
} wlist;

static float wrand(wlist *w) {
    w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((float)(w->rng >> 40) / 16777216.0f - 0.5f) * 0.35f; /* std ~0.1 */
}

/* a [d0] / [d0, d1] / [d0, d1, d2] tensor (0 = absent dim) */
static void wadd3(wlist *w, int norm_scale, int64_t d0, int64_t d1, int64_t d2, const char *fmt, ...) {
    if (w->n >= 512) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->names[w->n], 128, fmt, ap);
    va_end(ap);
    int64_t n = d0 * (d1 ? d1 : 1) * (d2 ? d2 : 1);
    float *x = (float *)malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (norm_scale ? 1.0f : 0.0f) + wrand(w);
    ft_st_tensor *t = &w->t[w->n];
    t->name = w->names[w->n];
    t->dtype = FT_DTYPE_F32;
    t->ndim = d2 ? 3 : d1 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->shape[2] = d2;
    t->data = x;
    t->nbytes = (size_t)n * sizeof(float);
    w->data[w->n++] = x;
}

#define wadd(w, ns, d0, d1, ...) wadd3(w, ns, d0, d1, 0, __VA_ARGS__)

static void mb_norm_w(wlist *w, int64_t d, const char *p) {
    wadd(w, 1, d, 0, "%s.weight", p);
    wadd(w, 0, d, 0, "%s.bias", p);
}

static void mb_dense(wlist *w, int64_t out, int64_t in, const char *p) {
    wadd(w, 0, out, in, "%s.weight", p);
    wadd(w, 0, out, 0, "%s.bias", p);
}

static int write_mb_weights(ft_ctx *ctx, const mb_cfg *c, const char *dir) {
    wlist *w = (wlist *)calloc(1, sizeof *w);
    w->rng = 12345;
    char p[160];
    wadd(w, 0, c->V, c->E, "embeddings.word_embeddings.weight");
    wadd(w, 0, c->P, c->D, "embeddings.position_embeddings.weight");
    wadd(w, 0, c->T, c->D, "embeddings.token_type_embeddings.weight");
    mb_dense(w, c->D, c->E * (c->trigram ? 3 : 1), "embeddings.embedding_transformation");
    mb_norm_w(w, c->D, "embeddings.LayerNorm");
    for (int64_t i = 0; i < c->L; i++) {
#define P(...) (snprintf(p, sizeof p, __VA_ARGS__), p)
        if (c->bottleneck) {
            mb_dense(w, c->Dt, c->D, P("encoder.layer.%lld.bottleneck.input.dense", (long long)i));
            mb_norm_w(w, c->Dt, P("encoder.layer.%lld.bottleneck.input.LayerNorm", (long long)i));
            if (c->kq) {
                mb_dense(w, c->Dt, c->D, P("encoder.layer.%lld.bottleneck.attention.dense", (long long)i));
                mb_norm_w(w, c->Dt, P("encoder.layer.%lld.bottleneck.attention.LayerNorm", (long long)i));
            }
        }
        mb_dense(w, c->Dt, c->Dt, P("encoder.layer.%lld.attention.self.query", (long long)i));
        mb_dense(w, c->Dt, c->Dt, P("encoder.layer.%lld.attention.self.key", (long long)i));
        mb_dense(w, c->Dt, c->batt ? c->Dt : c->D, P("encoder.layer.%lld.attention.self.value", (long long)i));
        mb_dense(w, c->Dt, c->Dt, P("encoder.layer.%lld.attention.output.dense", (long long)i));
        mb_norm_w(w, c->Dt, P("encoder.layer.%lld.attention.output.LayerNorm", (long long)i));
        for (int64_t k = 0; k < c->nffn - 1; k++) {
            mb_dense(w, c->I, c->Dt, P("encoder.layer.%lld.ffn.%lld.intermediate.dense", (long long)i, (long long)k));
            mb_dense(w, c->Dt, c->I, P("encoder.layer.%lld.ffn.%lld.output.dense", (long long)i, (long long)k));
            mb_norm_w(w, c->Dt, P("encoder.layer.%lld.ffn.%lld.output.LayerNorm", (long long)i, (long long)k));
        }
        mb_dense(w, c->I, c->Dt, P("encoder.layer.%lld.intermediate.dense", (long long)i));
        mb_dense(w, c->Dt, c->I, P("encoder.layer.%lld.output.dense", (long long)i));
        mb_norm_w(w, c->Dt, P("encoder.layer.%lld.output.LayerNorm", (long long)i));
        if (c->bottleneck) {
            mb_dense(w, c->D, c->Dt, P("encoder.layer.%lld.output.bottleneck.dense", (long long)i));
            mb_norm_w(w, c->D, P("encoder.layer.%lld.output.bottleneck.LayerNorm", (long long)i));
        }
#undef P
    }
    if (c->cls) mb_dense(w, c->D, c->D, "pooler.dense");
    char path[700];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ft_status st = ft_st_write(ctx, path, w->t, w->n);
    for (int i = 0; i < w->n; i++) free(w->data[i]);
    free(w);
    return st == FT_OK ? 0 : -1;
}

static void test_mobilebert_variants(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    ft_test_tmpdir_make("fmb");
    const char *gcfg = "\"model_type\": \"mobilebert\", \"embedding_size\": 32, \"hidden_size\": 64, "
                       "\"intermediate_size\": 64, \"intra_bottleneck_size\": 32, \"max_position_embeddings\": 128, "
                       "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 512";
    struct {
        const char *name, *extra;
        rename_fn rename;
    } gv[] = {
        {"four_ffn", ", \"num_feedforward_networks\": 4", to_4_ffn},
        {"layer_norm", ", \"num_feedforward_networks\": 2, \"normalization_type\": \"layer_norm\"", NULL},
        {"gelu_no_pooler_act", ", \"num_feedforward_networks\": 2, \"hidden_act\": \"gelu\", \"classifier_activation\": false", NULL},
    };
    for (size_t i = 0; i < sizeof gv / sizeof gv[0]; i++) {
        char cfg[768], dir[600];
        snprintf(cfg, sizeof cfg, "{%s%s}", gcfg, gv[i].extra);
        if (make_model_dir(ctx, "mobilebert", gv[i].name, cfg, gv[i].rename, dir, sizeof dir)) {
            CHECK(0, "%s: writing model: %s", gv[i].name, ft_ctx_errmsg(ctx));
            continue;
        }
        int64_t S[3] = {1, 7, 16}, B[3] = {3, 1, 3};
        for (int k = 0; k < 3; k++) {
            char what[128];
            snprintf(what, sizeof what, "mobilebert %s B%lld S%lld", gv[i].name, (long long)B[k], (long long)S[k]);
            check_robust(what, dir, B[k], S[k], S[k], 64, 512, 0);
        }
    }
    /* variants with other shapes: random weights */
    struct {
        const char *name, *extra;
        mb_cfg c;
    } rv[] = {
        {"bottleneck_attention", "\"use_bottleneck_attention\": true, \"intra_bottleneck_size\": 16",
         {300, 48, 24, 16, 40, 2, 3, 64, 2, 1, 1, 1, 1, 1}},
        {"kq_not_shared", "\"key_query_shared_bottleneck\": false, \"intra_bottleneck_size\": 48",
         {300, 48, 24, 48, 40, 2, 2, 64, 2, 1, 1, 0, 0, 1}},
        {"no_bottleneck", "\"use_bottleneck\": false, \"intra_bottleneck_size\": 16",
         {300, 48, 24, 48, 40, 2, 4, 64, 2, 1, 0, 0, 1, 0}},
        {"no_trigram", "\"trigram_input\": false, \"intra_bottleneck_size\": 24",
         {300, 48, 24, 24, 40, 2, 1, 64, 3, 0, 1, 0, 1, 1}},
        {"no_trigram_e_eq_d", "\"trigram_input\": false, \"embedding_size\": 48, \"intra_bottleneck_size\": 24",
         {300, 48, 48, 24, 40, 3, 2, 64, 2, 0, 1, 0, 1, 0}},
    };
    for (size_t i = 0; i < sizeof rv / sizeof rv[0]; i++) {
        const mb_cfg *c = &rv[i].c;
        char cfg[1024], dir[600], path[700];
        snprintf(cfg, sizeof cfg,
                 "{\"model_type\": \"mobilebert\", \"vocab_size\": %lld, \"hidden_size\": %lld, "
                 "\"embedding_size\": %lld, \"intermediate_size\": %lld, \"num_hidden_layers\": %lld, "
                 "\"num_feedforward_networks\": %lld, \"max_position_embeddings\": %lld, \"type_vocab_size\": %lld, "
                 "\"num_attention_heads\": 4, \"classifier_activation\": %s, %s}",
                 (long long)c->V, (long long)c->D, (long long)c->E, (long long)c->I, (long long)c->L,
                 (long long)c->nffn, (long long)c->P, (long long)c->T, c->cls ? "true" : "false", rv[i].extra);
        snprintf(dir, sizeof dir, "%s/%s", tmpdir, rv[i].name);
        mkdir(dir, 0755);
        snprintf(path, sizeof path, "%s/config.json", dir);
        if (write_text(path, cfg) || write_mb_weights(ctx, c, dir)) {
            CHECK(0, "%s: writing model: %s", rv[i].name, ft_ctx_errmsg(ctx));
            continue;
        }
        int64_t S[2] = {9, 33}, B[2] = {3, 2};
        for (int k = 0; k < 2; k++) {
            char what[128];
            snprintf(what, sizeof what, "mobilebert %s B%lld S%lld", rv[i].name, (long long)B[k], (long long)S[k]);
            check_robust(what, dir, B[k], S[k], S[k], c->D, c->V, 0);
        }
    }
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

/* ---- Funnel with other head sizes: random weights ---- */

static int write_funnel_weights(ft_ctx *ctx, const char *dir, int64_t V, int64_t D, int64_t N, int64_t Dh,
                                int64_t I, const int *blocks, int nb, int dec) {
    wlist *w = (wlist *)calloc(1, sizeof *w);
    w->rng = 777;
    char p[160];
    int64_t H = N * Dh;
    wadd(w, 0, V, D, "embeddings.word_embeddings.weight");
    mb_norm_w(w, D, "embeddings.layer_norm");
    int total = dec;
    for (int b = 0; b < nb; b++) total += blocks[b];
    for (int li = 0, b = 0, l = 0; li < total; li++) {
        if (li < total - dec) snprintf(p, sizeof p, "encoder.blocks.%d.%d.", b, l);
        else snprintf(p, sizeof p, "decoder.layers.%d.", li - (total - dec));
        if (li < total - dec && ++l == blocks[b]) {
            b++;
            l = 0;
        }
        char q[200];
        wadd(w, 0, H, D, "%sattention.q_head.weight", p);
        snprintf(q, sizeof q, "%sattention.k_head", p);
        mb_dense(w, H, D, q);
        snprintf(q, sizeof q, "%sattention.v_head", p);
        mb_dense(w, H, D, q);
        wadd(w, 0, N, Dh, "%sattention.r_w_bias", p);
        wadd(w, 0, N, Dh, "%sattention.r_r_bias", p);
        wadd(w, 0, N, Dh, "%sattention.r_s_bias", p);
        wadd3(w, 0, D, N, Dh, "%sattention.r_kernel", p);
        wadd3(w, 0, 2, N, Dh, "%sattention.seg_embed", p);
        snprintf(q, sizeof q, "%sattention.post_proj", p);
        mb_dense(w, D, H, q);
        snprintf(q, sizeof q, "%sattention.layer_norm", p);
        mb_norm_w(w, D, q);
        snprintf(q, sizeof q, "%sffn.linear_1", p);
        mb_dense(w, I, D, q);
        snprintf(q, sizeof q, "%sffn.linear_2", p);
        mb_dense(w, D, I, q);
        snprintf(q, sizeof q, "%sffn.layer_norm", p);
        mb_norm_w(w, D, q);
    }
    char path[700];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ft_status st = ft_st_write(ctx, path, w->t, w->n);
    for (int i = 0; i < w->n; i++) free(w->data[i]);
    free(w);
    return st == FT_OK ? 0 : -1;
}

static void test_funnel_other_sizes(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    ft_test_tmpdir_make("fmb");
    /* n_head * d_head != d_model, two blocks of 2 and 3 layers, one decoder layer */
    const int blocks[2] = {2, 3};
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/funnel_sizes", tmpdir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    int ok = !write_text(path, "{\"model_type\": \"funnel\", \"vocab_size\": 100, \"d_model\": 32, \"n_head\": 3, "
                               "\"d_head\": 8, \"d_inner\": 48, \"block_sizes\": [2, 3], \"num_decoder_layers\": 1, "
                               "\"hidden_act\": \"gelu_new\"}") &&
             !write_funnel_weights(ctx, dir, 100, 32, 3, 8, 48, blocks, 2, 1);
    CHECK(ok, "writing model: %s", ft_ctx_errmsg(ctx));
    if (ok) {
        check_robust("funnel sizes B3 S6", dir, 3, 6, 6, 32, 100, 1);
        check_robust("funnel sizes B1 S31", dir, 1, 31, 31, 32, 100, 1);
    }
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
}

/* ---- bad inputs and configs ---- */

static void expect_forward_error(ft_model *m, ft_ctx *ctx, const ft_host_tensor *in, int n, const char *needle) {
    ft_status st = ft_model_forward(m, in, n);
    CHECK(st != FT_OK, "forward accepted bad input (%s)", needle);
    CHECK(strstr(ft_ctx_errmsg(ctx), needle) != NULL, "message lacks '%s': %s", needle, ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
}

static void test_bad_inputs(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    char dir[512];
    snprintf(dir, sizeof dir, "%s/funnel", ft_test_golden_dir());
    ft_model *f = NULL, *mb = NULL;
    CHECK_OK(ctx, ft_model_load(ctx, dir, NULL, &f));
    snprintf(dir, sizeof dir, "%s/mobilebert", ft_test_golden_dir());
    CHECK_OK(ctx, ft_model_load(ctx, dir, NULL, &mb));
    if (f && mb) {
        CHECK(!strcmp(ft_model_arch(f), "FunnelModel"), "arch %s", ft_model_arch(f));
        CHECK(!strcmp(ft_model_arch(mb), "MobileBertModel"), "arch %s", ft_model_arch(mb));
        int64_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8}, tt[8] = {2, 0, 1, 3, 0, 0, 0, 0}, big[200] = {0};
        ft_host_tensor a[2] = {{"input_ids", FT_DTYPE_I64, 2, {1, 8}, ids},
                               {"token_type_ids", FT_DTYPE_I64, 2, {1, 8}, tt}};
        expect_forward_error(f, ctx, a, 2, "token_type_ids");
        ft_host_tensor c = {"input_ids", FT_DTYPE_I64, 1, {8}, ids};
        expect_forward_error(f, ctx, &c, 1, "rank");
        expect_forward_error(mb, ctx, &c, 1, "rank");
        ft_host_tensor d = {"input_ids", FT_DTYPE_I64, 2, {1, 200}, big};
        expect_forward_error(mb, ctx, &d, 1, "max_position_embeddings");
        ids[3] = 512;
        ft_host_tensor e = {"input_ids", FT_DTYPE_I64, 2, {1, 8}, ids};
        expect_forward_error(mb, ctx, &e, 1, "outside [0, 512)");
        expect_forward_error(f, ctx, &e, 1, "outside [0, 512)");
        ids[3] = 4;
        ft_host_tensor g[2] = {{"input_ids", FT_DTYPE_I64, 2, {1, 8}, ids},
                               {"attention_mask", FT_DTYPE_I64, 2, {2, 4}, ids}};
        expect_forward_error(f, ctx, g, 2, "attention_mask");
        /* still usable; a long odd sequence works */
        ft_host_tensor h = {"input_ids", FT_DTYPE_I64, 2, {1, 199}, big};
        CHECK_OK(ctx, ft_model_forward(f, &h, 1));
        ft_tensor *o = ft_model_output_find(f, "last_hidden_state");
        CHECK(o && ft_tensor_dim(o, 1) == 199, "length 199 output");
    }
    ft_model_free(f);
    ft_model_free(mb);
    ft_ctx_free(ctx);

    /* configs */
    ft_test_tmpdir_make("fmb");
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    struct { const char *gcase, *cfg, *needle; ft_status want; } bad[] = {
        {"funnel", "{" FUNNEL_BASE_CFG ", \"block_sizes\": [1, 1, 1], \"attention_type\": \"relative\"}",
         "attention_type", FT_ERR_FORMAT},
        {"funnel", "{" FUNNEL_BASE_CFG ", \"block_sizes\": [1, 1, 1], \"block_repeats\": [1, 1]}", "block_repeats",
         FT_ERR_FORMAT},
        {"funnel", "{" FUNNEL_BASE_CFG ", \"block_sizes\": [1, 2, 1]}", "encoder.blocks.1.1", FT_ERR_NOT_FOUND},
        {"funnel", "{" FUNNEL_BASE_CFG ", \"block_sizes\": [1, 1, 1], \"pooling_type\": \"sum\"}", "pooling_type",
         FT_ERR_FORMAT},
        {"mobilebert", "{\"model_type\": \"mobilebert\", \"embedding_size\": 32, \"hidden_size\": 64, "
                       "\"intermediate_size\": 64, \"intra_bottleneck_size\": 32, \"num_attention_heads\": 4, "
                       "\"num_hidden_layers\": 2, \"vocab_size\": 512, \"num_feedforward_networks\": 2, "
                       "\"key_query_shared_bottleneck\": false}",
         "key_query_shared_bottleneck", FT_ERR_FORMAT},
        {"mobilebert", "{\"model_type\": \"mobilebert\", \"embedding_size\": 32, \"hidden_size\": 64, "
                       "\"intermediate_size\": 64, \"intra_bottleneck_size\": 32, \"num_attention_heads\": 4, "
                       "\"num_hidden_layers\": 2, \"vocab_size\": 512, \"num_feedforward_networks\": 3, "
                       "\"max_position_embeddings\": 128}",
         "ffn.1", FT_ERR_NOT_FOUND},
        {"mobilebert", "{\"model_type\": \"mobilebert\", \"normalization_type\": \"batch_norm\"}", "batch_norm",
         FT_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dir2[600], sub[16];
        snprintf(sub, sizeof sub, "bad%zu", i);
        make_model_dir(ctx, bad[i].gcase, sub, bad[i].cfg, NULL, dir2, sizeof dir2);
        ft_model *m = NULL;
        ft_status st = ft_model_load(ctx, dir2, NULL, &m);
        CHECK(st == bad[i].want && !m, "config %zu: load gave %s (want %s): %s", i, ft_status_str(st),
              ft_status_str(bad[i].want), ft_ctx_errmsg(ctx));
        CHECK(strstr(ft_ctx_errmsg(ctx), bad[i].needle) != NULL, "config %zu: message lacks '%s': %s", i,
              bad[i].needle, ft_ctx_errmsg(ctx));
        ft_model_free(m);
        ft_ctx_clear_error(ctx);
    }
    ft_ctx_free(ctx);
    ft_test_tmpdir_remove();
}

/* ---- presets ---- */

/* Random-initialising every preset takes tens of seconds on a small machine:
 * the three other Funnel sizes run with FT_TEST_SLOW=1. */
static void test_presets_and_counts(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    struct { const char *name, *arch; int64_t params, macs; } want[] = {
        {"mobilebert-uncased", "MobileBertModel", 24581888, 2692743168LL},
        {"funnel-small", "FunnelModel", 130973184, 10121576448LL},
        {"funnel-small-base", "FunnelBaseModel", 115611648, 7906590720LL},
        {"funnel-intermediate", "FunnelModel", 177057792, 13953761280LL},
        {"funnel-intermediate-base", "FunnelBaseModel", 161696256, 11738775552LL},
    };
    const char *slow = getenv("FT_TEST_SLOW");
    size_t n = slow && *slow && strcmp(slow, "0") ? sizeof want / sizeof want[0] : 2;
    for (size_t i = 0; i < n; i++) {
        ft_model *m = NULL;
        CHECK_OK(ctx, ft_model_load(ctx, want[i].name, NULL, &m));
        if (!m) continue;
        CHECK(!strcmp(ft_model_arch(m), want[i].arch), "%s: arch %s", want[i].name, ft_model_arch(m));
        CHECK(ft_model_param_count(m) == want[i].params, "%s: %lld parameters, expected %lld", want[i].name,
              (long long)ft_model_param_count(m), (long long)want[i].params);
        int64_t macs = 0;
        CHECK_OK(ctx, ft_model_macs(m, 1, 128, &macs));
        CHECK(macs == want[i].macs, "%s: %lld MACs at 1x128, expected %lld", want[i].name, (long long)macs,
              (long long)want[i].macs);
        ft_model_free(m);
    }
    ft_ctx_free(ctx);
}

int main(void) {
    RUN(test_golden_cpu_fp32);
    RUN(test_golden_cpu_fp16);
    RUN(test_golden_graph);
    RUN(test_golden_cuda);
    RUN(test_funnel_variants);
    RUN(test_funnel_cache_and_defaults);
    RUN(test_mobilebert_variants);
    RUN(test_funnel_other_sizes);
    RUN(test_bad_inputs);
    RUN(test_presets_and_counts);
    return ft_test_finish();
}

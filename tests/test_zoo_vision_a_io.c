/*
 * test_zoo_vision_a_io.c - ViTModel, Wav2Vec2Model and HubertModel at their
 * edges: the loader's rules (base-model prefixes, task-checkpoint extras that
 * are ignored, both weight-norm namings, a ViT checkpoint without pooler);
 * audio masks computed in the forward (a graph or static plan made for one mask
 * gives eager's numbers for another of the same shape, on the CPU and on CUDA;
 * with the layer-norm feature encoder a padded row's valid frames equal its
 * truncated audio run alone, and an unpadded row equals itself run alone); bad
 * checkpoints, configs and inputs, each ending in one clear error that names
 * what is at fault. tests/test_zoo_vision_a.c has the golden cases and passes.
 */
#include "ft_golden.h"
#include "ft_test.h"
#include "zoo_test_util.h"

#include "ftengine.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ft_mode modes[3] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};

/* Loads dir and golden case `arch` on the CPU in `mode`, runs both on the golden
 * inputs; every output of dir's model must be the golden model's, bitwise.
 * Returns dir's output count (-1 on failure). */
static int same_as_golden(const char *arch, const char *dir, ft_mode mode) {
    ft_ctx *ctx = NULL;
    golden_case g;
    if (golden_open_on(FT_DEVICE_CPU, arch, &ctx, &g)) return -1;
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    o.output_hidden_states = 1;
    ft_model *a = NULL, *b = NULL;
    int n = -1;
    if (ft_model_load(ctx, g.dir, &o, &a) != FT_OK || ft_model_load(ctx, dir, &o, &b) != FT_OK ||
        ft_model_forward(a, g.in, g.n_in) != FT_OK || ft_model_forward(b, g.in, g.n_in) != FT_OK) {
        CHECK(0, "%s: %s", dir, ft_ctx_errmsg(ctx));
    } else {
        n = ft_model_output_count(b);
        for (int i = 0; i < n; i++) {
            const char *name = ft_model_output_name(b, i);
            int64_t na = 0, nb = 0;
            float *x = ft_model_output_find(a, name) ? zoo_output(ctx, a, name, &na) : NULL;
            float *y = zoo_output(ctx, b, name, &nb);
            CHECK(x && y && na == nb && !memcmp(x, y, (size_t)na * sizeof *x),
                  "%s (%s): output %s is not the golden model's", dir, ft_mode_name(mode), name);
            free(x);
            free(y);
        }
    }
    ft_model_free(a);
    ft_model_free(b);
    golden_close(&g);
    ft_ctx_free(ctx);
    return n;
}

/* ---- loader rules ---- */

static int rn_w2v_pretraining(const char *name, char *out, size_t size) {
    const char *g = strstr(name, ".weight_g"), *v = strstr(name, ".weight_v");
    if (g || v)
        snprintf(out, size, "wav2vec2.%.*s.parametrizations.weight.original%d", (int)((g ? g : v) - name), name,
                 g ? 0 : 1);
    else
        snprintf(out, size, "wav2vec2.%s", name);
    return 1;
}
static int rn_hubert_ctc(const char *name, char *out, size_t size) {
    snprintf(out, size, "hubert.%s", name);
    return 1;
}
static int rn_vit_no_pooler(const char *name, char *out, size_t size) {
    if (!strncmp(name, "pooler.", 7)) return 0;
    snprintf(out, size, "vit.%s", name);
    return 1;
}

static void test_loader_rules(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    static float q_codes[1 * 6 * 4], q_proj[4 * 4], head[5 * 48], head_b[5], cls_w[7 * 64];
    char dir[600];
    /* Wav2Vec2ForPreTraining: wav2vec2. prefix, quantizer and projection heads, weight
     * norm as torch >= 2.1's parametrization */
    ft_st_tensor w2v_extra[2] = {{"quantizer.codevectors", FT_DTYPE_F32, 3, {1, 6, 4}, q_codes, sizeof q_codes},
                                 {"project_q.weight", FT_DTYPE_F32, 2, {4, 4}, q_proj, sizeof q_proj}};
    CHECK(zoo_case_dir("wav2vec2", "w2v_pretraining", NULL, NULL, dir, sizeof dir) == 0 &&
              zoo_rewrite_weights(ctx, "wav2vec2", dir, rn_w2v_pretraining, w2v_extra, 2) == 0,
          "writing %s: %s", dir, ft_ctx_errmsg(ctx));
    for (int k = 0; k < 3; k++) CHECK(same_as_golden("wav2vec2", dir, modes[k]) == 5, "wav2vec2: 5 outputs");
    /* HubertForCTC: hubert. prefix and lm_head */
    ft_st_tensor hub_extra[2] = {{"lm_head.weight", FT_DTYPE_F32, 2, {5, 48}, head, sizeof head},
                                 {"lm_head.bias", FT_DTYPE_F32, 1, {5}, head_b, sizeof head_b}};
    CHECK(zoo_case_dir("hubert", "hubert_ctc", NULL, NULL, dir, sizeof dir) == 0 &&
              zoo_rewrite_weights(ctx, "hubert", dir, rn_hubert_ctc, hub_extra, 2) == 0,
          "writing %s: %s", dir, ft_ctx_errmsg(ctx));
    CHECK(same_as_golden("hubert", dir, FT_MODE_GRAPH) == 4, "hubert: 4 outputs");
    /* ViTForImageClassification as google/vit-base-patch16-224 is saved: vit. prefix, a
     * classifier, no pooler -> no pooler_output (4 outputs, not 5), 2 tensors fewer */
    ft_st_tensor vit_extra[1] = {{"classifier.weight", FT_DTYPE_F32, 2, {7, 64}, cls_w, sizeof cls_w}};
    CHECK(zoo_case_dir("vit", "vit_no_pooler", NULL, NULL, dir, sizeof dir) == 0 &&
              zoo_rewrite_weights(ctx, "vit", dir, rn_vit_no_pooler, vit_extra, 1) == 0,
          "writing %s: %s", dir, ft_ctx_errmsg(ctx));
    for (int k = 0; k < 3; k++) CHECK(same_as_golden("vit", dir, modes[k]) == 4, "vit without pooler: 4 outputs");
    ft_model *a = NULL, *b = NULL;
    char golden[600];
    snprintf(golden, sizeof golden, "%s/vit", ft_test_golden_dir());
    if (ft_model_load(ctx, golden, NULL, &a) == FT_OK && ft_model_load(ctx, dir, NULL, &b) == FT_OK)
        CHECK(ft_model_param_count(a) - ft_model_param_count(b) == 64 * 64 + 64, "pooler parameters: %lld vs %lld",
              (long long)ft_model_param_count(a), (long long)ft_model_param_count(b));
    else
        CHECK(0, "loading: %s", ft_ctx_errmsg(ctx));
    ft_model_free(a);
    ft_model_free(b);
    ft_ctx_free(ctx);
}

/* ---- audio masks ---- */

/* Runs m on audio [B, T] (+ mask if given); last_hidden_state (malloc'd) and its dims. */
static float *run_audio(ft_ctx *ctx, ft_model *m, const float *audio, const int64_t *mask, int64_t B, int64_t T,
                        int64_t *frames, int64_t *dim) {
    ft_host_tensor in[2] = {{"input_values", FT_DTYPE_F32, 2, {B, T}, audio},
                            {"attention_mask", FT_DTYPE_I64, 2, {B, T}, mask}};
    ft_status st = ft_model_forward(m, in, mask ? 2 : 1);
    CHECK(st == FT_OK, "forward [%lld, %lld]%s: %s", (long long)B, (long long)T, mask ? " masked" : "",
          ft_ctx_errmsg(ctx));
    if (st != FT_OK) return NULL;
    ft_tensor *h = ft_model_output_find(m, "last_hidden_state");
    if (frames) *frames = ft_tensor_dim(h, 1);
    if (dim) *dim = ft_tensor_dim(h, 2);
    return zoo_output(ctx, m, "last_hidden_state", NULL);
}

static double urand01(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) * (1.0 / 9007199254740992.0);
}

/* The frame mask depends on mask values, so it is computed with ops: a plan made for
 * one mask must give eager's numbers for other masks of the same shape (replays). */
static void mask_in_forward(ft_device dev, const char *arch, int rounds) {
    ft_ctx *ctx = NULL;
    golden_case g;
    if (golden_open_on(dev, arch, &ctx, &g)) return;
    ft_model *m[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        ft_model_options o = ft_model_options_default();
        o.mode = modes[k];
        CHECK_OK(ctx, ft_model_load(ctx, g.dir, &o, &m[k]));
    }
    int64_t B = 3, T = 6000;
    float *audio = (float *)malloc((size_t)(B * T) * sizeof *audio);
    int64_t *mask = (int64_t *)malloc((size_t)(B * T) * sizeof *mask);
    uint64_t s = 5;
    for (int64_t i = 0; i < B * T; i++) audio[i] = (float)(urand01(&s) - 0.5);
    static const int64_t lens[4][3] = {{6000, 4100, 2222}, {3001, 6000, 5999}, {400, 1234, 6000}, {6000, 6000, 6000}};
    for (int r = 4 - rounds; r < 4 && m[0] && m[1] && m[2]; r++) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) mask[b * T + t] = t < lens[r][b];
        int64_t F = 0, D = 0;
        float *ref = run_audio(ctx, m[0], audio, mask, B, T, &F, &D);
        for (int k = 1; k < 3 && ref; k++) {
            float *got = run_audio(ctx, m[k], audio, mask, B, T, NULL, NULL);
            double w = got ? zoo_worst(got, ref, B * F * D, 1e-5, 1e-5) : 1e30;
            CHECK(w <= 1, "%s %s %s, mask %d: %g x tolerance from eager", arch, ft_device_name(dev),
                  ft_mode_name(modes[k]), r, w);
            free(got);
        }
        /* a mask of all ones is no mask (HF: every frame valid) */
        if (r == 3 && ref) {
            float *nomask = run_audio(ctx, m[0], audio, NULL, B, T, NULL, NULL);
            CHECK(nomask && zoo_worst(nomask, ref, B * F * D, 1e-6, 1e-6) <= 1, "%s: all-ones mask != no mask", arch);
            free(nomask);
        }
        free(ref);
    }
    free(audio);
    free(mask);
    for (int k = 0; k < 3; k++) ft_model_free(m[k]);
    golden_close(&g);
    ft_ctx_free(ctx);
}

static void test_audio_mask_in_forward_cpu(void) {
    mask_in_forward(FT_DEVICE_CPU, "wav2vec2", 4);
    mask_in_forward(FT_DEVICE_CPU, "hubert", 4);
}

static void test_audio_mask_in_forward_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    /* the emulator is slow: two masks (the second and the all-ones one) */
    mask_in_forward(FT_DEVICE_CUDA, "wav2vec2", 2);
    mask_in_forward(FT_DEVICE_CUDA, "hubert", 2);
}

/* With the "layer" feature encoder a frame depends on its own samples only, padded
 * frames are zeroed before the positional conv and masked as keys: a padded row's
 * valid frames equal the truncated audio run alone (in every mode), and an unpadded
 * row equals itself run alone. Independent of any reference implementation. */
static void test_audio_mask_local(void) {
    const char *src[2] = {"variants/wav2vec2_large_mask", "variants/hubert_large_noprojln_mask"};
    for (int c = 0; c < 2; c++) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s/%s", ft_test_golden_dir(), src[c]);
        ft_ctx *ctx = NULL;
        CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
        for (int k = 0; ctx && k < 3; k++) {
            ft_model_options o = ft_model_options_default();
            o.mode = modes[k];
            ft_model *m = NULL;
            if (ft_model_load(ctx, dir, &o, &m) != FT_OK) {
                CHECK(0, "%s: %s", dir, ft_ctx_errmsg(ctx));
                break;
            }
            int64_t T = 3000, len = 1777, F = 0, D = 0, Ft = 0;
            float *audio = (float *)malloc((size_t)(2 * T) * sizeof *audio);
            int64_t *mask = (int64_t *)malloc((size_t)(2 * T) * sizeof *mask);
            uint64_t s = 99;
            for (int64_t t = 0; t < T; t++) {
                audio[t] = (float)(urand01(&s) - 0.5);
                audio[T + t] = t < len ? (float)(urand01(&s) - 0.5) : (float)(3 * urand01(&s)); /* noise past len */
                mask[t] = 1;
                mask[T + t] = t < len;
            }
            float *both = run_audio(ctx, m, audio, mask, 2, T, &F, &D);
            float *alone = run_audio(ctx, m, audio, NULL, 1, T, NULL, NULL);
            float *trunc = run_audio(ctx, m, audio + T, NULL, 1, len, &Ft, NULL);
            if (both && alone && trunc) {
                CHECK(Ft < F, "truncated audio: %lld frames of %lld", (long long)Ft, (long long)F);
                CHECK(zoo_worst(both, alone, F * D, 1e-5, 1e-5) <= 1, "%s %s: unpadded row != itself alone", src[c],
                      ft_mode_name(modes[k]));
                CHECK(zoo_worst(both + F * D, trunc, Ft * D, 1e-4, 1e-4) <= 1,
                      "%s %s: padded row's valid frames != the truncated audio alone", src[c], ft_mode_name(modes[k]));
            }
            free(both);
            free(alone);
            free(trunc);
            free(audio);
            free(mask);
            ft_model_free(m);
        }
        ft_ctx_free(ctx);
    }
}

/* ---- bad checkpoints, configs, inputs ---- */

static int rn_drop_ffn_bias(const char *name, char *out, size_t size) {
    snprintf(out, size, "%s", name);
    return strcmp(name, "encoder.layers.1.final_layer_norm.bias") != 0;
}
static int rn_drop_pooler_bias(const char *name, char *out, size_t size) {
    snprintf(out, size, "%s", name);
    return strcmp(name, "pooler.dense.bias") != 0;
}
static int rn_drop_weight_g(const char *name, char *out, size_t size) {
    snprintf(out, size, "%s", name);
    return strstr(name, "weight_g") == NULL;
}

/* Loading dir fails with status `want` and a message holding `needle`. */
static void expect_load_error(const char *dir, ft_status want, const char *needle) {
    ft_ctx *ctx = NULL;
    ft_model *m = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    ft_status st = ft_model_load(ctx, dir, NULL, &m);
    CHECK(st == want && m == NULL && strstr(ft_ctx_errmsg(ctx), needle),
          "%s: got %s '%s', want %s naming '%s'", dir, ft_status_str(st), ft_ctx_errmsg(ctx), ft_status_str(want),
          needle);
    ft_model_free(m);
    ft_ctx_free(ctx);
}

static void test_bad_checkpoints(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    char dir[600];
    static const struct {
        const char *arch, *sub;
        zoo_rename_fn rn;
        const char *needle;
    } drop[] = {{"wav2vec2", "no_ffn_bias", rn_drop_ffn_bias, "encoder.layers.1.final_layer_norm.bias"},
                {"vit", "half_pooler", rn_drop_pooler_bias, "pooler.dense.bias"},
                {"hubert", "no_weight_g", rn_drop_weight_g, "encoder.pos_conv_embed.conv.weight_g"}};
    for (size_t i = 0; ctx && i < sizeof drop / sizeof drop[0]; i++) {
        CHECK(zoo_case_dir(drop[i].arch, drop[i].sub, NULL, NULL, dir, sizeof dir) == 0 &&
                  zoo_rewrite_weights(ctx, drop[i].arch, dir, drop[i].rn, NULL, 0) == 0,
              "writing %s", drop[i].sub);
        expect_load_error(dir, FT_ERR_NOT_FOUND, drop[i].needle);
    }
    /* shapes the config does not imply */
    CHECK(zoo_case_dir("wav2vec2", "ffn_200", "\"intermediate_size\": 256", "\"intermediate_size\": 200", dir,
                       sizeof dir) == 0, "config");
    expect_load_error(dir, FT_ERR_SHAPE, "intermediate_dense.weight");
    CHECK(zoo_case_dir("vit", "patch_8", "\"patch_size\": 4", "\"patch_size\": 8", dir, sizeof dir) == 0, "config");
    expect_load_error(dir, FT_ERR_SHAPE, "embeddings.position_embeddings");
    CHECK(zoo_case_dir("hubert", "no_proj_ln_with_weights", "\"feat_proj_layer_norm\": true",
                       "\"feat_proj_layer_norm\": false", dir, sizeof dir) == 0, "config");
    ft_model *m = NULL; /* extra LayerNorm tensors are ignored, as HF ignores them */
    CHECK_OK(ctx, ft_model_load(ctx, dir, NULL, &m));
    ft_model_free(m);
    /* a truncated file */
    char path[800], *data = NULL, src[600];
    size_t n = 0;
    CHECK(zoo_case_dir("vit", "truncated", NULL, NULL, dir, sizeof dir) == 0, "mkdir");
    snprintf(src, sizeof src, "%s/vit/model.safetensors", ft_test_golden_dir());
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    CHECK(zoo_read_file(src, &data, &n) == 0 && zoo_write_file(path, data, n / 2) == 0, "truncating");
    free(data);
    ft_status st = ctx ? ft_model_load(ctx, dir, NULL, &m) : FT_ERR_INVALID_ARG;
    CHECK(st != FT_OK && m == NULL && strstr(ft_ctx_errmsg(ctx), "model.safetensors"), "truncated: %s '%s'",
          ft_status_str(st), ctx ? ft_ctx_errmsg(ctx) : "");
    ft_ctx_free(ctx);
}

/* Each bad value ends in one error naming the key at fault. */
static void test_bad_configs(void) {
    static const struct {
        const char *arch, *from, *to, *key;
    } b[] = {
        {"vit", "\"image_size\": 32", "\"image_size\": \"big\"", "image_size"},
        {"vit", "\"image_size\": 32", "\"image_size\": [32, 32, 3]", "image_size"},
        {"vit", "\"image_size\": 32", "\"image_size\": 2", "image_size"},
        {"vit", "\"patch_size\": 4", "\"patch_size\": [4, 8]", "patch_size"},
        {"vit", "\"patch_size\": 4", "\"patch_size\": 0", "patch_size"},
        {"vit", "\"num_attention_heads\": 4", "\"num_attention_heads\": 5", "num_attention_heads"},
        {"vit", "\"hidden_act\": \"gelu\"", "\"hidden_act\": \"swishy\"", "hidden_act"},
        {"vit", "\"qkv_bias\": true", "\"qkv_bias\": 1.5", "qkv_bias"},
        {"vit", "\"layer_norm_eps\": 1e-12", "\"layer_norm_eps\": 0", "layer_norm_eps"},
        {"wav2vec2", "\"feat_extract_norm\": \"group\"", "\"feat_extract_norm\": \"batch\"", "feat_extract_norm"},
        {"wav2vec2", "\"conv_dim\": [", "\"conv_dim\": [32, ", "conv_dim"},
        {"wav2vec2", "\"num_conv_pos_embedding_groups\": 4", "\"num_conv_pos_embedding_groups\": 5",
         "num_conv_pos_embedding_groups"},
        {"wav2vec2", "\"add_adapter\": false", "\"add_adapter\": true", "add_adapter"},
        {"wav2vec2", "\"do_stable_layer_norm\": false", "\"do_stable_layer_norm\": \"yes\"", "do_stable_layer_norm"},
        {"wav2vec2", "\"feat_extract_activation\": \"gelu\"", "\"feat_extract_activation\": \"mish\"",
         "feat_extract_activation"},
        {"wav2vec2", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": -1", "num_hidden_layers"},
        {"hubert", "\"feat_proj_layer_norm\": true", "\"feat_proj_layer_norm\": true, \"conv_pos_batch_norm\": true",
         "conv_pos_batch_norm"},
        {"hubert", "\"conv_kernel\": [", "\"conv_kernel\": [0, ", "conv_kernel"},
        {"hubert", "\"num_conv_pos_embeddings\": 16", "\"num_conv_pos_embeddings\": 0", "num_conv_pos_embeddings"},
    };
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        char dir[600], sub[32];
        snprintf(sub, sizeof sub, "badcfg%zu", i);
        if (zoo_case_dir(b[i].arch, sub, b[i].from, b[i].to, dir, sizeof dir)) {
            CHECK(0, "%s: '%s' not in the golden config", b[i].arch, b[i].from);
            continue;
        }
        ft_ctx *ctx = NULL;
        ft_model *m = NULL;
        CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
        ft_status st = ctx ? ft_model_load(ctx, dir, NULL, &m) : FT_OK;
        const char *msg = ctx ? ft_ctx_errmsg(ctx) : "";
        CHECK(st != FT_OK && !m && strstr(msg, b[i].key) && strstr(msg, "config.json"),
              "%s with %s: %s '%s' (want an error naming %s)", b[i].arch, b[i].to, ft_status_str(st), msg, b[i].key);
        ft_model_free(m);
        ft_ctx_free(ctx);
    }
}

static void test_bad_inputs(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    char dir[600];
    static float buf[2 * 4 * 32 * 32];
    static int64_t ibuf[2 * 3 * 32 * 32], mask[2 * 600];
    for (int k = 0; ctx && k < 3; k++) {
        ft_model_options o = ft_model_options_default();
        o.mode = modes[k];
        ft_model *v = NULL, *w = NULL;
        snprintf(dir, sizeof dir, "%s/vit", ft_test_golden_dir());
        CHECK_OK(ctx, ft_model_load(ctx, dir, &o, &v));
        snprintf(dir, sizeof dir, "%s/wav2vec2", ft_test_golden_dir());
        CHECK_OK(ctx, ft_model_load(ctx, dir, &o, &w));
        if (!v || !w) break;
        static const struct {
            ft_host_tensor in;
            ft_status want;
            const char *needle;
        } vb[] = {
            {{"pixel_values", FT_DTYPE_F32, 4, {2, 3, 31, 32}, buf}, FT_ERR_SHAPE, "image_size"},
            {{"pixel_values", FT_DTYPE_F32, 4, {2, 3, 64, 64}, buf}, FT_ERR_SHAPE, "32x32"},
            {{"pixel_values", FT_DTYPE_F32, 4, {2, 4, 32, 32}, buf}, FT_ERR_SHAPE, "channels"},
            {{"pixel_values", FT_DTYPE_F32, 3, {2, 3, 32}, buf}, FT_ERR_SHAPE, "rank"},
            {{"pixel_values", FT_DTYPE_I64, 4, {2, 3, 32, 32}, ibuf}, FT_ERR_INVALID_ARG, "float"},
            {{"input_values", FT_DTYPE_F32, 2, {2, 32}, buf}, FT_ERR_INVALID_ARG, "input_values"},
        };
        for (size_t i = 0; i < sizeof vb / sizeof vb[0]; i++) {
            ft_status st = ft_model_forward(v, &vb[i].in, 1);
            CHECK(st == vb[i].want && strstr(ft_ctx_errmsg(ctx), vb[i].needle), "vit %s input %zu: %s '%s'",
                  ft_mode_name(modes[k]), i, ft_status_str(st), ft_ctx_errmsg(ctx));
            ft_ctx_clear_error(ctx);
        }
        ft_host_tensor a[2] = {{"input_values", FT_DTYPE_F32, 2, {2, 399}, buf},
                               {"attention_mask", FT_DTYPE_I64, 2, {2, 600}, mask}};
        CHECK(ft_model_forward(w, a, 1) == FT_ERR_SHAPE && strstr(ft_ctx_errmsg(ctx), "400"), "399 samples: %s",
              ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
        a[0].shape[1] = 600;
        for (int i = 0; i < 1200; i++) mask[i] = i % 600 < 500;
        mask[7] = 2; /* an audio mask holds 0 or 1 */
        CHECK(ft_model_forward(w, a, 2) == FT_ERR_INVALID_ARG && strstr(ft_ctx_errmsg(ctx), "[0, 7]"),
              "mask value 2: %s", ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
        mask[7] = 1;
        for (int i = 600; i < 1200; i++) mask[i] = i < 600 + 399; /* row 1 too short for a frame */
        CHECK(ft_model_forward(w, a, 2) == FT_ERR_INVALID_ARG && strstr(ft_ctx_errmsg(ctx), "row 1"),
              "399-sample row: %s", ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
        a[1].shape[1] = 599;
        CHECK(ft_model_forward(w, a, 2) == FT_ERR_SHAPE, "mis-shaped mask accepted");
        ft_ctx_clear_error(ctx);
        a[1].shape[1] = 600;
        for (int i = 600; i < 1200; i++) mask[i] = i < 600 + 400;
        CHECK_OK(ctx, ft_model_forward(w, a, 2)); /* 400 samples: one frame */
        ft_model_free(v);
        ft_model_free(w);
    }
    ft_ctx_free(ctx);
}

int main(void) {
    ft_test_tmpdir_make("zoo_vision_a_io");
    RUN(test_loader_rules);
    RUN(test_audio_mask_in_forward_cpu);
    RUN(test_audio_mask_in_forward_cuda);
    RUN(test_audio_mask_local);
    RUN(test_bad_checkpoints);
    RUN(test_bad_configs);
    RUN(test_bad_inputs);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

/*
 * test_model_describe.c - ft_model_options.weights = FT_WEIGHTS_NONE: a model
 * described from its config (and a checkpoint's shapes) without weights. Its
 * parameter and MAC counts equal those of the loaded model for every golden
 * case and a preset; no weight byte goes through the allocator (peak 0 during
 * the load, tiny after the MAC trace); forward is refused with a message; a
 * checkpoint whose shapes disagree with its config is still an error.
 */
#include "ft_test.h"
#include "ftengine.h"

#include <stdio.h>
#include <string.h>

static void compare(const char *path) {
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) {
        CHECK(0, "no CPU context");
        return;
    }
    ft_model_options o = ft_model_options_default();
    ft_model *full = NULL, *meta = NULL;
    CHECK_OK(ctx, ft_model_load(ctx, path, &o, &full));
    size_t after_full = ft_ctx_mem_stats(ctx).allocated;
    o.weights = FT_WEIGHTS_NONE;
    o.mode = FT_MODE_STATIC; /* ignored: a description is eager */
    CHECK_OK(ctx, ft_model_load(ctx, path, &o, &meta));
    if (full && meta) {
        CHECK(ft_ctx_mem_stats(ctx).allocated == after_full, "%s: describing allocated %zu B", path,
              ft_ctx_mem_stats(ctx).allocated - after_full);
        CHECK(ft_model_param_count(full) == ft_model_param_count(meta), "%s: %lld params loaded, %lld described",
              path, (long long)ft_model_param_count(full), (long long)ft_model_param_count(meta));
        CHECK(!strcmp(ft_model_arch(full), ft_model_arch(meta)), "%s: arch", path);
        CHECK(ft_model_mode(meta) == FT_MODE_EAGER, "%s: described model's mode %d", path, (int)ft_model_mode(meta));
        int64_t a = 0, b = 0;
        CHECK_OK(ctx, ft_model_macs(full, 2, 0, &a));
        CHECK_OK(ctx, ft_model_macs(meta, 2, 0, &b));
        CHECK(a == b && a > 0, "%s: %lld MACs loaded, %lld described", path, (long long)a, (long long)b);
        ft_host_tensor in[8];
        int n_in = 0;
        void *owned = NULL;
        CHECK_OK(ctx, ft_model_example_inputs(meta, 1, 0, in, &n_in, &owned));
        ft_status st = ft_model_forward(meta, in, n_in);
        CHECK(st == FT_ERR_UNSUPPORTED && strstr(ft_ctx_errmsg(ctx), "without weights"),
              "%s: forward of a description: %s (%s)", path, ft_status_str(st), ft_ctx_errmsg(ctx));
        free(owned);
    }
    ft_model_free(meta);
    ft_model_free(full);
    ft_ctx_free(ctx);
}

static void test_golden_cases(void) {
    const char *archs[] = {"bert", "funnel", "mobilebert", "resnet", "wavlm"};
    for (int i = 0; i < 5; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", ft_test_golden_dir(), archs[i]);
        compare(p);
    }
}

static void test_preset(void) { compare("bert-tiny"); }

/* A large preset costs nothing to describe: no allocation at all during the load. */
static void test_large_preset_allocates_nothing(void) {
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) {
        CHECK(0, "no CPU context");
        return;
    }
    ft_model_options o = ft_model_options_default();
    o.weights = FT_WEIGHTS_NONE;
    ft_model *m = NULL;
    CHECK_OK(ctx, ft_model_load(ctx, "bert-large", &o, &m));
    ft_mem_stats s = ft_ctx_mem_stats(ctx);
    CHECK(s.peak_allocated == 0 && s.n_alloc == 0, "describing bert-large: peak %zu B, %llu allocations",
          s.peak_allocated, (unsigned long long)s.n_alloc);
    CHECK(ft_model_param_count(m) == 335141888, "bert-large params %lld", (long long)ft_model_param_count(m));
    ft_model_free(m);
    o.weights = (ft_weights)7;
    CHECK(ft_model_load(ctx, "bert-tiny", &o, &m) == FT_ERR_INVALID_ARG && !m, "weights = 7 accepted");
    ft_ctx_free(ctx);
}

/* Shapes are still checked against the config without reading the data. */
static void test_bad_checkpoint_still_fails(void) {
    char dir[512], cmd[4096], src[512];
    snprintf(src, sizeof src, "%s/bert", ft_test_golden_dir());
    snprintf(dir, sizeof dir, "%s/bert", tmpdir);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && chmod -R u+w '%s' && sed -i 's/\"hidden_size\": 64/\"hidden_size\": 96/' '%s/config.json'",
             src, dir, dir, dir);
    CHECK(system(cmd) == 0, "setup");
    ft_ctx *ctx = NULL;
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    ft_model_options o = ft_model_options_default();
    o.weights = FT_WEIGHTS_NONE;
    ft_model *m = NULL;
    ft_status st = ft_model_load(ctx, dir, &o, &m);
    CHECK(st == FT_ERR_SHAPE && !m, "a config disagreeing with the checkpoint: %s (%s)", ft_status_str(st),
          ft_ctx_errmsg(ctx));
    ft_model_free(m);
    ft_ctx_free(ctx);
}

int main(void) {
    ft_test_tmpdir_make("describe");
    RUN(test_golden_cases);
    RUN(test_preset);
    RUN(test_large_preset_allocates_nothing);
    RUN(test_bad_checkpoint_still_fails);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

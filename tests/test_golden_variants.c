/*
 * test_golden_variants.c - the extra Hugging Face reference cases under
 * tests/golden/variants/<case>/ (configurations the five main golden cases do
 * not cover: other Funnel layouts, MobileBERT options, ResNet basic blocks on
 * non-square images, WavLM masks and the large layout...). They are written by
 * tools/golden/make_golden.py on a machine with transformers (SqueezeBERT and
 * DeBERTa ones also by bench/make_zoo_text_b_variants.py); every case found
 * is checked like a main golden case: on the CPU in eager, graph and static mode
 * at the fp32 tolerance, and on CUDA (skipped without a GPU) in fp32 in all three
 * modes and in fp16 at 1e-2. With no variant folder the test reports itself skipped.
 * A case may widen its fp16 bounds in tolerance.json ({"fp16": [atol, rtol, rel_l2]}):
 * MobileNetV2's 16 layers, every one with a BatchNorm on random statistics, carry f16
 * round-off past 1e-2 (tools/golden/make_vision_variants.py); fp32 is never widened.
 */
#include "ft_golden.h"
#include "ft_test.h"

#include "../engine/json.h"

#include <dirent.h>
#include <sys/stat.h>

#define MAX_CASES 64

static const char *const required[] = {"last_hidden_state", NULL};

/* Case folders under golden/variants, sorted; returns their count. */
static int list_cases(char names[][256]) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/variants", ft_test_golden_dir());
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_CASES) {
        if (e->d_name[0] == '.') continue;
        char cfg[8192 + 1024];
        struct stat sb;
        snprintf(cfg, sizeof cfg, "%s/%s/expected.safetensors", dir, e->d_name);
        if (stat(cfg, &sb) != 0) continue;
        snprintf(names[n++], 256, "%s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, 256, (int (*)(const void *, const void *))strcmp);
    return n;
}

/* The case's fp16 bounds: tol, or those of its tolerance.json. */
static golden_tol fp16_tol(const char *rel, golden_tol tol) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s/tolerance.json", ft_test_golden_dir(), rel);
    struct stat sb;
    if (stat(path, &sb) != 0) return tol;
    ft_ctx *ctx = NULL;
    ft_json *j = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) == FT_OK && ft_json_parse_file(ctx, path, &j) == FT_OK) {
        const ft_json *a = ft_json_get(j, "fp16");
        CHECK(a && ft_json_len(a) == 3, "%s: expected {\"fp16\": [atol, rtol, rel_l2]}", path);
        if (a && ft_json_len(a) == 3)
            tol = (golden_tol){ft_json_number(ft_json_at(a, 0)), ft_json_number(ft_json_at(a, 1)),
                               ft_json_number(ft_json_at(a, 2))};
    } else {
        CHECK(0, "%s: %s", path, ctx ? ft_ctx_errmsg(ctx) : "no context");
    }
    ft_json_free(j);
    ft_ctx_free(ctx);
    return tol;
}

static void run_all(ft_device dev, const ft_mode *modes, int n_modes, ft_dtype dtype, golden_tol tol) {
    static char names[MAX_CASES][256];
    int n = list_cases(names);
    if (!n) {
        SKIP("no cases in tests/golden/variants (tools/golden/make_golden.py writes them)");
        return;
    }
    for (int i = 0; i < n; i++) {
        char rel[300];
        snprintf(rel, sizeof rel, "variants/%.250s", names[i]);
        golden_tol t = dtype == FT_DTYPE_F16 ? fp16_tol(rel, tol) : tol;
        for (int k = 0; k < n_modes; k++) {
            int fails = golden_run_check(rel, dev, modes[k], dtype, required, t);
            printf("  %-40s %s %-6s %-4s %s\n", names[i], ft_device_name(dev), ft_mode_name(modes[k]),
                   ft_dtype_name(dtype), fails ? "FAIL" : "ok");
        }
    }
}

static const ft_mode all_modes[] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};

static void test_variants_cpu(void) { run_all(FT_DEVICE_CPU, all_modes, 3, FT_DTYPE_F32, GOLDEN_FP32); }

static void test_variants_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    run_all(FT_DEVICE_CUDA, all_modes, 3, FT_DTYPE_F32, GOLDEN_FP32);
    run_all(FT_DEVICE_CUDA, all_modes, 1, FT_DTYPE_F16, GOLDEN_FP16);
}

int main(void) {
    RUN(test_variants_cpu);
    RUN(test_variants_cuda);
    return ft_test_finish();
}

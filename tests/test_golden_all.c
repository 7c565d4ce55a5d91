/*
 * test_golden_all.c - every golden case on CUDA, found by listing the golden
 * folder (tests/golden, or FT_GOLDEN_DIR): each subfolder with config.json,
 * inputs.safetensors and expected.safetensors is a case, so a case added there
 * is checked with no change here. Each runs in eager, graph and static mode in
 * fp32 (the README's criterion), fp16 (about 1e-2) and bf16 (8 mantissa bits,
 * ~1e-2 rel L2 on these cases: 3e-2 rel L2 and 2e-1 + 5e-2|exp| per element, the
 * element bound loose enough for the one HuBERT output whose bf16 conv front end
 * lands 0.134 off while the whole tensor stays at 1.5e-2 rel L2), on a fresh
 * context per run; required outputs:
 * last_hidden_state, plus pooler_output where the expected file has it; every
 * other output the model names in the expected file is compared too.
 *
 * A case whose model_type has no architecture in this build (models/registry.c)
 * is SKIPPED with that reason, so the cases of an architecture being written
 * show up as skips, not failures. FT_GOLDEN_CASES=a,b, FT_GOLDEN_MODES=eager,...
 * and FT_GOLDEN_DTYPES=fp32,... narrow the runs. This is the GPU session's
 * golden step (tests/gpu_session.sh day); on the host emulator, where the
 * per-architecture programs already run every mode, it runs fp32 eager, fp16
 * static and bf16 graph of each case unless told otherwise. Without a CUDA
 * device it skips.
 */
#include "ft_golden.h"
#include "ft_test.h"
#include "ftengine.h"
#include "config.h"
#include "../models/model.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_CASES 256

static char cases[MAX_CASES][128];
static int n_cases;

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static int is_file(const char *dir, const char *name, const char *file) {
    char p[800];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/%s", dir, name, file);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The case folders of the golden folder, sorted; -1 if it cannot be read. */
static int list_cases(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    n_cases = 0;
    while ((e = readdir(d)) && n_cases < MAX_CASES) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof cases[0]) continue;
        if (is_file(dir, e->d_name, "config.json") && is_file(dir, e->d_name, "inputs.safetensors") &&
            is_file(dir, e->d_name, "expected.safetensors"))
            snprintf(cases[n_cases++], sizeof cases[0], "%s", e->d_name);
    }
    closedir(d);
    qsort(cases, (size_t)n_cases, sizeof cases[0], cmp_name);
    return n_cases;
}

/* 1 if `item` is in the comma-separated `list` (NULL or empty: everything). */
static int listed(const char *list, const char *item) {
    if (!list || !*list) return 1;
    size_t n = strlen(item);
    for (const char *p = list; *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && !strncmp(p, item, n)) return 1;
        if (!c) break;
        p = c + 1;
    }
    return 0;
}

/* The case's model_type when this build has no architecture for it, else "". */
static void missing_arch(ft_ctx *ctx, const char *name, char *why, size_t n) {
    char path[700];
    ft_config cfg;
    why[0] = 0;
    snprintf(path, sizeof path, "%s/%s/config.json", ft_test_golden_dir(), name);
    if (ft_config_load(ctx, path, &cfg) != FT_OK) return; /* the load fails and says why */
    const char *mt = NULL;
    if (ft_config_string(&cfg, "model_type", NULL, &mt) == FT_OK && mt && !ft_arch_find(mt))
        snprintf(why, n, "model_type '%s' has no architecture in this build (models/registry.c)", mt);
    ft_config_free(&cfg);
}

static const char *cur_case;
static int cur_index;
static ft_dtype cur_dtype;
/* per case, for the summary line: runs that matched, failed; why skipped */
static int n_match[MAX_CASES], n_fail[MAX_CASES];
static char skipped[MAX_CASES][160];
static char failed_runs[MAX_CASES][160];

static void run_case(void) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) {
        CHECK(0, "no CPU context");
        return;
    }
    char why[256];
    missing_arch(ctx, cur_case, why, sizeof why);
    golden_case g;
    int have_pooler = 0;
    if (!why[0] && golden_open(ctx, cur_case, &g) == 0) {
        have_pooler = ft_st_find(g.expected, "pooler_output") != NULL;
        golden_close(&g);
    }
    ft_ctx_free(ctx);
    if (why[0]) {
        SKIP("%s", why);
        snprintf(skipped[cur_index], sizeof skipped[0], "%s", why);
        return;
    }
    const char *req_lh[] = {"last_hidden_state", NULL};
    const char *req_pool[] = {"last_hidden_state", "pooler_output", NULL};
    golden_tol tol = cur_dtype == FT_DTYPE_F32   ? GOLDEN_FP32
                     : cur_dtype == FT_DTYPE_F16 ? GOLDEN_FP16
                                                 : (golden_tol){2e-1, 5e-2, 3e-2};
    const char *modes = getenv("FT_GOLDEN_MODES");
#ifdef FT_CUDA_EMU
    /* the emulator is slow and the per-architecture programs run every mode there */
    if (!modes || !*modes)
        modes = cur_dtype == FT_DTYPE_F32 ? "eager" : cur_dtype == FT_DTYPE_F16 ? "static" : "graph";
#endif
    int ran = 0;
    for (int mode = FT_MODE_EAGER; mode <= FT_MODE_STATIC; mode++) {
        if (!listed(modes, ft_mode_name((ft_mode)mode))) continue;
        int fails = golden_run_check(cur_case, FT_DEVICE_CUDA, (ft_mode)mode, cur_dtype,
                                     have_pooler ? req_pool : req_lh, tol);
        printf("    %s %s %s: %s\n", cur_case, ft_mode_name((ft_mode)mode), ft_dtype_name(cur_dtype),
               fails ? "FAILED" : "matches");
        if (fails) {
            size_t k = strlen(failed_runs[cur_index]);
            snprintf(failed_runs[cur_index] + k, sizeof failed_runs[0] - k, "%s%s %s", k ? ", " : "",
                     ft_mode_name((ft_mode)mode), ft_dtype_name(cur_dtype));
            n_fail[cur_index]++;
        } else {
            n_match[cur_index]++;
        }
        ran++;
    }
    if (!ran) SKIP("no mode selected (FT_GOLDEN_MODES=%s)", modes);
}

int main(void) {
    const char *dir = ft_test_golden_dir();
    if (list_cases(dir) <= 0) {
        printf("FAIL no golden case found in %s\n", dir);
        printf("RESULT: 0 passed, 1 failed, 0 skipped\n");
        return 1;
    }
    const char *only = getenv("FT_GOLDEN_CASES");
    const char *dtypes = getenv("FT_GOLDEN_DTYPES");
    printf("golden cases in %s: %d\n", dir, n_cases);
    static const ft_dtype all[] = {FT_DTYPE_F32, FT_DTYPE_F16, FT_DTYPE_BF16};
    for (int i = 0; i < n_cases; i++) {
        if (!listed(only, cases[i])) continue;
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
            const char *dn = all[k] == FT_DTYPE_F32 ? "fp32" : all[k] == FT_DTYPE_F16 ? "fp16" : "bf16";
            if (!listed(dtypes, dn)) continue;
            static char names[MAX_CASES * 3][200];
            char *name = names[i * 3 + (int)k];
            snprintf(name, sizeof names[0], "test_cuda_golden_%.120s_%s", cases[i], dn);
            cur_case = cases[i];
            cur_index = i;
            cur_dtype = all[k];
            ft_test_run(run_case, name);
        }
    }
    /* one line for a log: which cases matched in every run, which failed where, which were skipped */
    printf("golden summary (CUDA):");
    for (int pass = 0; pass < 3; pass++) {
        printf(pass == 0 ? " all runs match:" : pass == 1 ? "; failed:" : "; skipped:");
        int any = 0;
        for (int i = 0; i < n_cases; i++) {
            if (pass == 0 && n_match[i] && !n_fail[i]) printf("%s %s", any++ ? "," : "", cases[i]);
            if (pass == 1 && n_fail[i]) printf("%s %s (%s)", any++ ? "," : "", cases[i], failed_runs[i]);
            if (pass == 2 && skipped[i][0]) printf("%s %s", any++ ? "," : "", cases[i]);
        }
        if (!any) printf(" none");
    }
    printf("\n");
    return ft_test_finish();
}

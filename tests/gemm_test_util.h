/*
 * gemm_test_util.h - what the CPU GEMM tests share (test_gemm_cpu.c,
 * test_gemm_packed_cpu.c): a context, seeded random values in a dtype's
 * precision, tensors made from them, the tolerance per dtype, a comparison
 * against a double reference and the activations in double.
 */
#ifndef FT_GEMM_TEST_UTIL_H
#define FT_GEMM_TEST_UTIL_H

#include "ft_test.h"
#include "ftengine.h"
#include "ft_internal.h"
#include "../kernels/cpu/cpu_kernels.h"
#include "../kernels/cpu/gemm.h"
#include "../kernels/cpu/gemm_micro.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static ft_ctx *ctx;

/* ---- data helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline float rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / (float)0x800000 - 1.0f; /* [-1, 1) */
}

static inline float round_to(ft_dtype dt, float v) {
    if (dt == FT_DTYPE_F16) return ft_f16_to_f32(ft_f32_to_f16(v));
    if (dt == FT_DTYPE_BF16) return ft_bf16_to_f32(ft_f32_to_bf16(v));
    return v;
}

/* n random values, already rounded to dt so the reference sees what the engine sees */
static inline float *rvals(int64_t n, ft_dtype dt) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = round_to(dt, rnd());
    return v;
}

static inline int64_t prod(int nd, const int64_t *s) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= s[i];
    return n;
}

static inline ft_tensor *up(ft_dtype dt, int nd, const int64_t *shape, const float *v) {
    int64_t n = prod(nd, shape);
    if (dt == FT_DTYPE_F32) return ft_tensor_from_host(ctx, dt, nd, shape, v);
    uint16_t *h = malloc((size_t)(n > 0 ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++)
        h[i] = dt == FT_DTYPE_F16 ? ft_f32_to_f16(v[i]) : ft_f32_to_bf16(v[i]);
    ft_tensor *t = ft_tensor_from_host(ctx, dt, nd, shape, h);
    free(h);
    return t;
}

static inline double tol_of(ft_dtype dt) {
    return dt == FT_DTYPE_F32 ? 2e-4 : dt == FT_DTYPE_F16 ? 4e-3 : 2e-2;
}

/* Compares t with ref (|d| <= tol * (1 + |ref|)); returns the number of mismatches. */
static inline int cmp(ft_tensor *t, const double *ref, int64_t n, double tol, const char *what) {
    CHECK(t != NULL, "%s: op failed: %s", what, ft_ctx_errmsg(ctx));
    if (!t) {
        ft_ctx_clear_error(ctx);
        return 1;
    }
    CHECK(ft_tensor_numel(t) == n, "%s: numel %lld, expected %lld", what,
          (long long)ft_tensor_numel(t), (long long)n);
    if (ft_tensor_numel(t) != n) return 1;
    float *got = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    CHECK_OK(ctx, ft_tensor_to_host(ctx, t, FT_DTYPE_F32, got, (size_t)(n > 0 ? n : 1) * 4));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= tol * (1.0 + fabs(ref[i])))) {
            if (!bad)
                CHECK(0, "%s: element %lld is %.7g, expected %.7g", what, (long long)i,
                      (double)got[i], ref[i]);
            bad++;
        }
    }
    free(got);
    return bad;
}

static inline double act_ref(int act, double x) {
    switch (act) {
    case FT_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case FT_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case FT_ACT_RELU: return x > 0 ? x : 0;
    case FT_ACT_TANH: return tanh(x);
    case FT_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    default: return x;
    }
}

static const ft_dtype dtypes[3] = {FT_DTYPE_F32, FT_DTYPE_F16, FT_DTYPE_BF16};
static const int64_t odd[4] = {1, 3, 17, 129};

/*
 * Runs this test program (self = argv[0]) again with the environment variables
 * env (NAME=VALUE, NULL-terminated) and FT_TEST_CHILD=1 added: the GEMM's
 * micro-kernel and blocking are chosen once per process, so other kernels
 * (the AVX2 one on an AVX-512 host) and other blockings need a process of their
 * own (it picks them up with gemm_test_select). Returns the child's exit status
 * (0: all its tests passed), or -1.
 */
static inline __attribute__((unused)) int rerun_with_env(const char *self, const char *const *env) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        for (int i = 0; env[i]; i++) putenv((char *)env[i]);
        setenv("FT_TEST_CHILD", "1", 1);
        char *const argv[] = {(char *)self, NULL};
        execv(self, argv);
        _exit(127);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline __attribute__((unused)) int is_test_child(void) {
    const char *c = getenv("FT_TEST_CHILD");
    return c && *c == '1';
}

/* argv[0], for test_other_kernels */
static const char *gemm_test_self;

/* At the start of a test program's main: the micro-kernel (FT_TEST_GEMM_KERNEL,
 * "6x16" or "8x32") and blocking (FT_TEST_GEMM_BLOCKING="kc,mc") a rerun asks
 * for, through the library's test hook; 0, or -1 when they cannot be had. */
static __attribute__((unused)) int gemm_test_select(void) {
    const char *k = getenv("FT_TEST_GEMM_KERNEL"), *b = getenv("FT_TEST_GEMM_BLOCKING");
    long long kc = 0, mc = 0;
    if (b && sscanf(b, "%lld,%lld", &kc, &mc) < 1) return -1;
    if (!k && !b) return 0;
    if (!ft_cpu_gemm_kern_select(k, kc, mc)) {
        printf("cannot select GEMM kernel %s, blocking %s\n", k ? k : "(host)", b ? b : "(host)");
        return -1;
    }
    return 0;
}

/* Every test of the calling program again under the AVX2 micro-kernel (6 x 16;
 * the AVX-512 one is 8 x 32) and under small blockings (many depth and row
 * blocks on modest shapes), each in a process of its own. */
static __attribute__((unused)) void test_other_kernels(void) {
    static const char *const avx2[] = {"FT_TEST_GEMM_KERNEL=6x16", NULL};
    static const char *const small[] = {"FT_TEST_GEMM_BLOCKING=128,16", NULL};
    static const char *const avx2_small[] = {"FT_TEST_GEMM_KERNEL=6x16", "FT_TEST_GEMM_BLOCKING=128,12", NULL};
    const char *const *runs[] = {avx2, small, avx2_small};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        printf("  -- rerun with %s%s%s\n", runs[i][0], runs[i][1] ? " " : "", runs[i][1] ? runs[i][1] : "");
        int st = rerun_with_env(gemm_test_self, runs[i]);
        CHECK(st == 0, "rerun with %s failed (status %d)", runs[i][0], st);
    }
}

#endif /* FT_GEMM_TEST_UTIL_H */

/*
 * ft_golden.h - running the Hugging Face golden cases (tests/golden/<case>/)
 * and checking outputs with the criterion of tests/golden/README.md: same
 * shape, no NaN/Inf, every element |got - exp| <= atol + rtol * |exp|, and
 * relative L2 error ||got - exp|| / ||exp|| <= max_rel_l2.
 *
 *   golden_case g;
 *   if (golden_open(ctx, "bert", &g)) ...
 *   golden_run_check(ctx, "bert", device, mode, dtype, required_outputs, tol)
 */
#ifndef FT_GOLDEN_H
#define FT_GOLDEN_H

#include "../engine/safetensors.h"
#include "ft_test.h"
#include "ftengine.h"

#include <math.h>

typedef struct golden_tol {
    double atol, rtol, max_rel_l2;
} golden_tol;

/* fp32: the README's criterion; reduced precision: about 1e-2 on all three limits */
static const golden_tol GOLDEN_FP32 = {1e-4, 1e-4, 1e-5};
static const golden_tol GOLDEN_FP16 = {1e-2, 1e-2, 1e-2};

typedef struct golden_case {
    char dir[512];
    ft_st_file *inputs, *expected;
    ft_host_tensor in[8];
    int n_in;
} golden_case;

static __attribute__((unused)) int golden_open(ft_ctx *ctx, const char *name, golden_case *g) {
    memset(g, 0, sizeof *g);
    snprintf(g->dir, sizeof g->dir, "%s/%s", ft_test_golden_dir(), name);
    char path[600];
    snprintf(path, sizeof path, "%s/inputs.safetensors", g->dir);
    if (ft_st_open(ctx, path, &g->inputs) != FT_OK) return -1;
    snprintf(path, sizeof path, "%s/expected.safetensors", g->dir);
    if (ft_st_open(ctx, path, &g->expected) != FT_OK) return -1;
    g->n_in = ft_st_count(g->inputs);
    for (int i = 0; i < g->n_in && i < 8; i++) {
        const ft_st_tensor *t = ft_st_get(g->inputs, i);
        g->in[i].name = t->name;
        g->in[i].dtype = t->dtype;
        g->in[i].ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) g->in[i].shape[d] = t->shape[d];
        g->in[i].data = t->data;
    }
    return 0;
}

static __attribute__((unused)) void golden_close(golden_case *g) {
    ft_st_close(g->inputs);
    ft_st_close(g->expected);
    memset(g, 0, sizeof *g);
}

/* A context on `dev` with golden case `name` open; 0, or -1 after recording why
 * (a missing CUDA device is a skip, anything else a failure). */
static __attribute__((unused)) int golden_open_on(ft_device dev, const char *name, ft_ctx **ctx, golden_case *gc) {
    *ctx = NULL;
    if (dev == FT_DEVICE_CUDA && ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return -1;
    }
    CHECK_OK(*ctx, ft_ctx_create(dev, ctx));
    if (*ctx && golden_open(*ctx, name, gc) == 0) return 0;
    CHECK(0, "golden %s: %s", name, *ctx ? ft_ctx_errmsg(*ctx) : "");
    ft_ctx_free(*ctx);
    *ctx = NULL;
    return -1;
}

/* Compares one output with the expected tensor; 0 if it passes, else -1 with a message. */
static __attribute__((unused)) int golden_compare(ft_ctx *ctx, const ft_tensor *got, const ft_st_tensor *exp, golden_tol tol,
                          char *msg, size_t msz) {
    int nd = ft_tensor_ndim(got);
    int same = nd == exp->ndim;
    for (int d = 0; same && d < nd; d++) same = ft_tensor_dim(got, d) == exp->shape[d];
    if (!same) {
        char sh[96];
        snprintf(msg, msz, "%s: shape %s, expected rank %d", exp->name,
                 ft_tensor_describe(got, sh, sizeof sh), exp->ndim);
        return -1;
    }
    int64_t n = ft_tensor_numel(got);
    float *buf = (float *)malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!buf || ft_tensor_to_host(ctx, got, FT_DTYPE_F32, buf, (size_t)n * sizeof(float)) != FT_OK) {
        snprintf(msg, msz, "%s: cannot read output: %s", exp->name, ft_ctx_errmsg(ctx));
        free(buf);
        return -1;
    }
    const float *e = (const float *)exp->data;
    double err2 = 0, ref2 = 0, max_abs = 0;
    int64_t bad = 0, first_bad = -1, nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = buf[i], r = e[i], d = fabs(g - r);
        if (!isfinite(g)) nonfinite++;
        err2 += d * d;
        ref2 += r * r;
        if (d > max_abs) max_abs = d;
        if (!(d <= tol.atol + tol.rtol * fabs(r))) {
            if (first_bad < 0) first_bad = i;
            bad++;
        }
    }
    double rel = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
    int ok = !nonfinite && !bad && rel <= tol.max_rel_l2;
    snprintf(msg, msz, "%s: max abs err %.3g, rel L2 %.3g, %lld elements out of tolerance%s%s",
             exp->name, max_abs, rel, (long long)bad, nonfinite ? ", NON-FINITE values" : "",
             first_bad >= 0 ? " (first shown below)" : "");
    if (first_bad >= 0)
        printf("    %s[%lld]: got %.7g expected %.7g\n", exp->name, (long long)first_bad,
               buf[first_bad], e[first_bad]);
    free(buf);
    return ok ? 0 : -1;
}

/*
 * Loads tests/golden/<name> on a fresh context of `device`, runs it in `mode` and
 * `dtype`, checks every output the model produced that the expected file holds
 * (intermediates such as hidden_states.N included) plus the required ones.
 * Returns the number of failed comparisons (also recorded with CHECK).
 */
static __attribute__((unused)) int golden_run_check(const char *name, ft_device device, ft_mode mode, ft_dtype dtype,
                            const char *const *required, golden_tol tol) {
    ft_ctx *ctx = NULL;
    int fails = 0;
    if (ft_ctx_create(device, &ctx) != FT_OK) {
        CHECK(0, "cannot create a %s context", ft_device_name(device));
        return 1;
    }
    golden_case g;
    ft_model *m = NULL;
    if (golden_open(ctx, name, &g) != 0) {
        CHECK(0, "opening golden case %s: %s", name, ft_ctx_errmsg(ctx));
        fails++;
        goto done;
    }
    ft_model_options opt = ft_model_options_default();
    opt.mode = mode;
    opt.dtype = dtype;
    opt.output_hidden_states = 1;
    if (ft_model_load(ctx, g.dir, &opt, &m) != FT_OK) {
        CHECK(0, "loading %s: %s", g.dir, ft_ctx_errmsg(ctx));
        fails++;
        goto done;
    }
    if (ft_model_forward(m, g.in, g.n_in) != FT_OK) {
        CHECK(0, "forward of %s (%s, %s, %s): %s", name, ft_device_name(device), ft_mode_name(mode),
              ft_dtype_name(dtype), ft_ctx_errmsg(ctx));
        fails++;
        goto done;
    }
    for (const char *const *r = required; r && *r; r++) {
        CHECK(ft_model_output_find(m, *r) != NULL, "%s: output '%s' missing", name, *r);
        CHECK(ft_st_find(g.expected, *r) != NULL, "%s: expected file lacks '%s'", name, *r);
        fails += !ft_model_output_find(m, *r);
    }
    int compared = 0;
    for (int i = 0; i < ft_model_output_count(m); i++) {
        const ft_st_tensor *e = ft_st_find(g.expected, ft_model_output_name(m, i));
        if (!e) continue;
        char msg[512];
        int rc = golden_compare(ctx, ft_model_output(m, i), e, tol, msg, sizeof msg);
        CHECK(rc == 0, "%s [%s %s %s] %s", name, ft_device_name(device), ft_mode_name(mode),
              ft_dtype_name(dtype), msg);
        fails += rc != 0;
        compared++;
    }
    CHECK(compared > 0, "%s: no output matched a name in expected.safetensors", name);
done:
    ft_model_free(m);
    golden_close(&g);
    ft_ctx_free(ctx);
    return fails;
}

#endif /* FT_GOLDEN_H */

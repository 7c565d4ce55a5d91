/*
 * zoo_test_util.h - temporary checkpoints made from a golden case for the zoo
 * model tests (tests/test_zoo_vision_a*.c): a copy whose config.json has one
 * text replaced, weights symlinked or rewritten under other names; and a
 * model's output read back to the host.
 */
#ifndef FT_ZOO_TEST_UTIL_H
#define FT_ZOO_TEST_UTIL_H

#include "../engine/safetensors.h"
#include "ft_test.h"
#include "ftengine.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static __attribute__((unused)) int zoo_read_file(const char *path, char **out, size_t *n) {
    FILE *f = fopen(path, "rb");
    *out = NULL;
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = len >= 0 ? (char *)malloc((size_t)len + 1) : NULL;
    *n = *out ? fread(*out, 1, (size_t)len, f) : 0;
    if (*out) (*out)[*n] = 0;
    fclose(f);
    return *out && *n == (size_t)len ? 0 : -1;
}

static __attribute__((unused)) int zoo_write_file(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* tmpdir/<sub>/ holding golden case <src>'s config.json (src relative to the golden
 * directory, "vit" or "variants/...") with the text `from` replaced by `to` (from NULL:
 * unchanged; from absent: -1) and its model.safetensors as a symlink; path in out. */
static __attribute__((unused)) int zoo_case_dir(const char *src, const char *sub, const char *from, const char *to,
                                                char *out, size_t size) {
    char in[600], path[800];
    snprintf(out, size, "%s/%s", tmpdir, sub);
    if (mkdir(out, 0700) != 0) return -1;
    snprintf(in, sizeof in, "%s/%s/config.json", ft_test_golden_dir(), src);
    char *cfg = NULL;
    size_t n = 0;
    if (zoo_read_file(in, &cfg, &n)) {
        free(cfg);
        return -1;
    }
    char *hit = from ? strstr(cfg, from) : NULL;
    snprintf(path, sizeof path, "%s/config.json", out);
    int rc = from && !hit ? -1 : 0;
    if (!rc && hit) {
        size_t a = (size_t)(hit - cfg), fl = strlen(from), tl = strlen(to);
        char *edited = (char *)malloc(n - fl + tl + 1);
        rc = edited ? 0 : -1;
        if (edited) {
            memcpy(edited, cfg, a);
            memcpy(edited + a, to, tl);
            memcpy(edited + a + tl, hit + fl, n - a - fl + 1);
            rc = zoo_write_file(path, edited, n - fl + tl);
        }
        free(edited);
    } else if (!rc) {
        rc = zoo_write_file(path, cfg, n);
    }
    free(cfg);
    snprintf(in, sizeof in, "%s/%s/model.safetensors", ft_test_golden_dir(), src);
    char abs[PATH_MAX];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    if (rc || !realpath(in, abs) || symlink(abs, path)) return -1;
    return 0;
}

/* Rewrites <dir>/model.safetensors (after zoo_case_dir) from golden case <src>'s
 * weights: each name through rn(), which returns 0 to drop the tensor; then `extra`. */
typedef int (*zoo_rename_fn)(const char *name, char *out, size_t size);
static __attribute__((unused)) int zoo_rewrite_weights(ft_ctx *ctx, const char *src, const char *dir,
                                                       zoo_rename_fn rn, const ft_st_tensor *extra, int n_extra) {
    char in[600], path[800];
    snprintf(in, sizeof in, "%s/%s/model.safetensors", ft_test_golden_dir(), src);
    ft_st_file *f = NULL;
    if (ft_st_open(ctx, in, &f) != FT_OK) return -1;
    int n = ft_st_count(f), k = 0;
    ft_st_tensor *ts = (ft_st_tensor *)calloc((size_t)(n + n_extra + 1), sizeof *ts);
    char(*names)[200] = calloc((size_t)n + 1, sizeof *names);
    int rc = ts && names ? 0 : -1;
    for (int i = 0; !rc && i < n; i++) {
        const ft_st_tensor *t = ft_st_get(f, i);
        if (!rn(t->name, names[k], sizeof names[k])) continue;
        ts[k] = *t;
        ts[k].name = names[k];
        k++;
    }
    for (int i = 0; !rc && i < n_extra; i++) ts[k++] = extra[i];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path); /* the symlink zoo_case_dir made */
    if (!rc) rc = ft_st_write(ctx, path, ts, k) == FT_OK ? 0 : -1;
    ft_st_close(f);
    free(ts);
    free(names);
    return rc;
}

/* Output `name` of m as a malloc'd f32 array and its element count (NULL + failed CHECK). */
static __attribute__((unused)) float *zoo_output(ft_ctx *ctx, const ft_model *m, const char *name, int64_t *n_out) {
    ft_tensor *t = ft_model_output_find(m, name);
    CHECK(t != NULL, "output '%s' missing", name);
    if (!t) return NULL;
    int64_t n = ft_tensor_numel(t);
    float *buf = (float *)malloc((size_t)(n ? n : 1) * sizeof *buf);
    if (!buf || ft_tensor_to_host(ctx, t, FT_DTYPE_F32, buf, (size_t)n * sizeof *buf) != FT_OK) {
        CHECK(0, "reading '%s': %s", name, ft_ctx_errmsg(ctx));
        free(buf);
        return NULL;
    }
    if (n_out) *n_out = n;
    return buf;
}

/* Largest |a - b| / (atol + rtol |b|) over n elements (> 1: out of tolerance; non-finite: 1e30). */
static __attribute__((unused)) double zoo_worst(const float *a, const float *b, int64_t n, double atol, double rtol) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (atol + rtol * fabs(b[i]));
        if (!(d == d) || !isfinite(a[i])) return 1e30;
        if (d > worst) worst = d;
    }
    return worst;
}

#endif /* FT_ZOO_TEST_UTIL_H */

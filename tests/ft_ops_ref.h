/*
 * ft_ops_ref.h - helpers of the op tests (tests/test_ops_cpu.c): device tensors
 * paired with host mirrors of their values, view ops applied to both (so the
 * expected values of a strided input are read back without the engine), the
 * comparison against a double-precision reference at a per-dtype tolerance,
 * and the check of the dispatcher's error message ("op <name>(<shapes>): ...").
 * Include once, from one test file: it defines static state.
 */
#ifndef FT_OPS_REF_H
#define FT_OPS_REF_H

#include "ft_test.h"

#include "ft_internal.h" /* fused_eltwise and the layernorm residual are graph-only nodes */
#include "ftengine.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static ft_ctx *ctx;

static const ft_dtype float_dtypes[3] = {FT_DTYPE_F32, FT_DTYPE_F16, FT_DTYPE_BF16};

/* ---- host mirrors of device tensors ---- */

typedef struct hv {
    ft_tensor *t;
    int nd;
    int64_t ne[FT_MAX_DIMS], nb[FT_MAX_DIMS], off;
    double *base; /* values as stored (rounded to the dtype) */
} hv;

/* host arrays of the current test, freed by end_test() */
static void *owned[4096];
static int n_owned;

static void *keep(void *p) {
    if (n_owned < 4096) owned[n_owned++] = p;
    return p;
}

static void end_test(void) {
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    n_owned = 0;
    ft_ctx_clear_error(ctx);
    ft_ctx_reset(ctx);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(double lo, double hi) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

static double round_to(ft_dtype dt, double v) {
    if (dt == FT_DTYPE_F16) return ft_f16_to_f32(ft_f32_to_f16((float)v));
    if (dt == FT_DTYPE_BF16) return ft_bf16_to_f32(ft_f32_to_bf16((float)v));
    if (dt == FT_DTYPE_F32) return (float)v;
    return v;
}

static int64_t numel_of(int nd, const int64_t *ne) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= ne[i];
    return n;
}

/* A tensor of dtype dt holding vals (NULL: uniform in [lo, hi)); ints are rounded. */
static hv mk_vals(ft_dtype dt, int nd, const int64_t *ne, const double *vals, double lo, double hi) {
    hv h;
    memset(&h, 0, sizeof h);
    h.nd = nd;
    int64_t n = numel_of(nd, ne), s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        h.ne[i] = ne[i];
        h.nb[i] = s;
        s *= ne[i];
    }
    h.base = keep(malloc(sizeof(double) * (size_t)(n ? n : 1)));
    void *raw = malloc(8 * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double v = vals ? vals[i] : urand(lo, hi);
        if (dt == FT_DTYPE_I64 || dt == FT_DTYPE_I32) v = floor(v);
        h.base[i] = round_to(dt, v);
        switch (dt) {
        case FT_DTYPE_F32: ((float *)raw)[i] = (float)v; break;
        case FT_DTYPE_F16: ((uint16_t *)raw)[i] = ft_f32_to_f16((float)v); break;
        case FT_DTYPE_BF16: ((uint16_t *)raw)[i] = ft_f32_to_bf16((float)v); break;
        case FT_DTYPE_I64: ((int64_t *)raw)[i] = (int64_t)v; break;
        default: ((int32_t *)raw)[i] = (int32_t)v; break;
        }
    }
    h.t = ft_tensor_from_host(ctx, dt, nd, ne, raw);
    free(raw);
    return h;
}

static hv mk(ft_dtype dt, int nd, const int64_t *ne, double lo, double hi) {
    return mk_vals(dt, nd, ne, NULL, lo, hi);
}

static hv hv_transpose(hv h, int a, int b) {
    h.t = ft_transpose(ctx, h.t, a, b);
    int64_t t = h.ne[a];
    h.ne[a] = h.ne[b];
    h.ne[b] = t;
    t = h.nb[a];
    h.nb[a] = h.nb[b];
    h.nb[b] = t;
    return h;
}

static hv hv_slice(hv h, int d, int64_t start, int64_t len) {
    h.t = ft_slice(ctx, h.t, d, start, len);
    h.off += start * h.nb[d];
    h.ne[d] = len;
    return h;
}

static hv hv_expand(hv h, int nd, const int64_t *ne) {
    h.t = ft_expand(ctx, h.t, nd, ne);
    hv r = h;
    r.nd = nd;
    for (int i = 0; i < nd; i++) {
        int j = i - (nd - h.nd);
        r.ne[i] = ne[i];
        r.nb[i] = (j >= 0 && h.ne[j] == ne[i]) ? h.nb[j] : 0;
    }
    return r;
}

/* The logical values of a view, row-major. */
static double *dense(hv h) {
    int64_t n = numel_of(h.nd, h.ne);
    double *out = keep(malloc(sizeof(double) * (size_t)(n ? n : 1)));
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = h.off;
        for (int k = h.nd - 1; k >= 0; k--) {
            off += (rem % h.ne[k]) * h.nb[k];
            rem /= h.ne[k];
        }
        out[i] = h.base[off];
    }
    return out;
}

/* Index into a contiguous operand of shape (nd, ne) broadcast to out shape (ond, one). */
static int64_t bidx(int ond, const int64_t *one, int64_t i, int nd, const int64_t *ne) {
    int64_t idx = 0, mul = 1;
    for (int k = ond - 1; k >= 0; k--) {
        int64_t c = i % one[k];
        i /= one[k];
        int j = k - (ond - nd);
        if (j < 0) continue;
        idx += (ne[j] == 1 ? 0 : c) * mul;
        mul *= ne[j];
    }
    return idx;
}

static double tol_rel(ft_dtype dt) {
    return dt == FT_DTYPE_F32 ? 1e-5 : dt == FT_DTYPE_F16 ? 2e-3 : 1.2e-2;
}

/* Compares out (shape checked) with ref; returns 1 on match. */
static int expect(const char *what, ft_tensor *out, int nd, const int64_t *ne, const double *ref,
                  ft_dtype dt) {
    if (!out) {
        CHECK(0, "%s: op failed: %s", what, ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
        return 0;
    }
    int shape_ok = ft_tensor_ndim(out) == nd && ft_tensor_dtype(out) == dt;
    for (int i = 0; shape_ok && i < nd; i++) shape_ok = ft_tensor_dim(out, i) == ne[i];
    CHECK(shape_ok, "%s: wrong output shape/dtype", what);
    if (!shape_ok) return 0;
    int64_t n = numel_of(nd, ne);
    float *got = keep(malloc(sizeof(float) * (size_t)(n ? n : 1)));
    ft_status st = ft_tensor_to_host(ctx, out, FT_DTYPE_F32, got, sizeof(float) * (size_t)(n ? n : 1));
    CHECK(st == FT_OK, "%s: to_host: %s", what, ft_ctx_errmsg(ctx));
    if (st) return 0;
    double rt = tol_rel(dt), at = dt == FT_DTYPE_F32 ? 1e-6 : rt;
    for (int64_t i = 0; i < n; i++) {
        double r = ref[i], g = got[i];
        int ok = isnan(r) ? isnan(g) : (isinf(r) ? g == r : fabs(g - r) <= at + rt * fabs(r));
        if (!ok) {
            CHECK(0, "%s [%s]: element %lld: got %.9g, expected %.9g", what, ft_dtype_name(dt),
                  (long long)i, g, r);
            return 0;
        }
    }
    return 1;
}

/* The op failed with a message that starts with "op <name>(" and contains `part`. */
static void expect_error(const char *what, ft_tensor *out, const char *name, const char *part) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "op %s(", name);
    const char *msg = ft_ctx_errmsg(ctx);
    CHECK(out == NULL, "%s: expected an error", what);
    CHECK(ft_ctx_status(ctx) != FT_OK, "%s: no error recorded", what);
    CHECK(strncmp(msg, prefix, strlen(prefix)) == 0, "%s: message '%s' lacks '%s'", what, msg, prefix);
    CHECK(!part || strstr(msg, part), "%s: message '%s' lacks '%s'", what, msg, part);
    ft_ctx_clear_error(ctx);
}

#endif /* FT_OPS_REF_H */

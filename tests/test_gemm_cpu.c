/*
 * test_gemm_cpu.c - the CPU GEMM family (sgemm core, linear, matmul, attention,
 * conv1d, conv2d) against naive double-precision loops written here: odd
 * shapes, transposed/permuted/sliced/broadcast views, epilogues, f16/bf16.
 * Also prints the GFLOP/s of a BERT-sized linear (informational, not asserted).
 */
#include "gemm_test_util.h"
#include "../kernels/cpu/gemm_micro.h"

#include <float.h>
#include <time.h>


/* ---- sgemm core ---- */

static void test_sgemm_core(void) {
    /* past every blocking edge: a ragged 32-column tile (33, 49), a lone 16-column
     * sliver (48), rows past a 336-row A block (700), depths past 384 (513, 800),
     * columns past a 4096-column panel (4100) */
    static const int64_t dims[][3] = {{1, 1, 1},      {3, 17, 129},  {129, 3, 17},  {17, 129, 3},
                                      {200, 300, 513}, {97, 4100, 5}, {13, 35, 0},   {9, 33, 31},
                                      {8, 48, 7},      {700, 49, 800}, {23, 80, 385}};
    for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int64_t m = dims[s][0], n = dims[s][1], k = dims[s][2];
                int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
                float *a = rvals((ta ? k : m) * lda, FT_DTYPE_F32);
                float *b = rvals((tb ? n : k) * ldb, FT_DTYPE_F32);
                float *c = rvals(m * ldc, FT_DTYPE_F32);
                float alpha = 0.75f, beta = (ta + tb) % 2 ? 0.5f : 0.0f;
                double *ref = malloc((size_t)(m * n) * sizeof(double));
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double acc = 0;
                        for (int64_t p = 0; p < k; p++)
                            acc += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                                   (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
                        ref[i * n + j] = alpha * acc + (beta != 0.0f ? beta * c[i * ldc + j] : 0.0);
                    }
                if (beta == 0.0f) /* beta 0 must not read C: poison it */
                    for (int64_t i = 0; i < m * ldc; i++) c[i] = NAN;
                CHECK(ft_cpu_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == 0,
                      "sgemm failed");
                int bad = 0;
                for (int64_t i = 0; i < m && !bad; i++)
                    for (int64_t j = 0; j < n && !bad; j++) {
                        double g = c[i * ldc + j], r = ref[i * n + j];
                        if (!(fabs(g - r) <= 1e-4 * (1 + fabs(r)))) {
                            CHECK(0, "sgemm %lldx%lldx%lld ta%d tb%d: C[%lld,%lld] = %g, expected %g",
                                  (long long)m, (long long)n, (long long)k, ta, tb, (long long)i,
                                  (long long)j, g, r);
                            bad = 1;
                        }
                    }
                /* the padding columns of C stay untouched */
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = n; j < ldc; j++)
                        if (beta != 0.0f) CHECK(!isnan(c[i * ldc + j]), "C padding written");
                free(a);
                free(b);
                free(c);
                free(ref);
            }
}

static void test_sgemm_batched(void) {
    /* 5 products of a broadcast A with distinct B */
    int64_t m = 19, n = 33, k = 40, batch = 5;
    float *a = rvals(m * k, FT_DTYPE_F32), *b = rvals(batch * k * n, FT_DTYPE_F32);
    float *c = malloc((size_t)(batch * m * n) * sizeof(float));
    CHECK(ft_cpu_sgemm_batched(false, false, m, n, k, 1.0f, a, k, 0, b, n, k * n, 0.0f, c, n, m * n,
                               batch) == 0, "batched sgemm failed");
    int bad = 0;
    for (int64_t t = 0; t < batch; t++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++) acc += (double)a[i * k + p] * b[t * k * n + p * n + j];
                if (fabs(acc - c[t * m * n + i * n + j]) > 1e-4 * (1 + fabs(acc))) bad++;
            }
    CHECK(bad == 0, "%d batched elements differ", bad);
    free(a);
    free(b);
    free(c);
}

/* ---- linear ---- */

/* ref [rows, N] = act(x [rows, K] W^T + bias + res) */
/* the GEMM's alpha (a scale the graph folds into a linear) for linear_ref */
static double ref_alpha = 1.0;

static double *linear_ref(const float *x, const float *w, const float *bias, const float *res,
                          int act, int64_t rows, int64_t n, int64_t k) {
    double *r = malloc((size_t)(rows * n > 0 ? rows * n : 1) * sizeof(double));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++) {
            double dot = 0.0;
            for (int64_t p = 0; p < k; p++) dot += (double)x[i * k + p] * w[j * k + p];
            double acc = ref_alpha * dot + (bias ? bias[j] : 0.0);
            if (res) acc += res[i * n + j];
            r[i * n + j] = act_ref(act, acc);
        }
    return r;
}

static void test_linear_shapes(void) {
    for (int di = 0; di < 3; di++) {
        ft_dtype dt = dtypes[di];
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++)
                for (int c = 0; c < 4; c++) {
                    /* f16/bf16 on a subset: the f32 sweep covers every shape */
                    if (dt != FT_DTYPE_F32 && (a + b + c) % 3) continue;
                    int64_t rows = odd[a], n = odd[b], k = odd[c];
                    bool with_bias = (a + c) % 2 == 0;
                    float *x = rvals(rows * k, dt), *w = rvals(n * k, dt), *bias = rvals(n, dt);
                    double *ref = linear_ref(x, w, with_bias ? bias : NULL, NULL, FT_ACT_NONE, rows,
                                             n, k);
                    /* x as [rows/?, ..., K]: split rows into two leading dims when it can */
                    int64_t xs3[3] = {rows % 3 == 0 ? 3 : 1, rows % 3 == 0 ? rows / 3 : rows, k};
                    int64_t ws[2] = {n, k}, bs[1] = {n};
                    ft_tensor *y = ft_linear(ctx, up(dt, 3, xs3, x), up(dt, 2, ws, w),
                                             with_bias ? up(dt, 1, bs, bias) : NULL);
                    char what[96];
                    snprintf(what, sizeof what, "linear %s rows %lld N %lld K %lld",
                             ft_dtype_name(dt), (long long)rows, (long long)n, (long long)k);
                    cmp(y, ref, rows * n, tol_of(dt), what);
                    if (y) CHECK(ft_tensor_ndim(y) == 3 && ft_tensor_dim(y, -1) == n, "%s: shape", what);
                    free(x);
                    free(w);
                    free(bias);
                    free(ref);
                    ft_ctx_reset(ctx);
                }
    }
}

static void test_linear_views(void) {
    /* x is a slice of a wider tensor (row stride > K) and a batch-sliced 3-d view */
    int64_t rows = 17, k = 33, n = 20, wide = 50;
    float *big = rvals(2 * rows * wide, FT_DTYPE_F32), *w = rvals(n * k, FT_DTYPE_F32);
    int64_t bshape[3] = {2, rows, wide}, ws[2] = {n, k};
    ft_tensor *bt = up(FT_DTYPE_F32, 3, bshape, big), *wt = up(FT_DTYPE_F32, 2, ws, w);
    ft_tensor *xv = ft_slice(ctx, ft_select(ctx, bt, 0, 1), 1, 7, k); /* [rows, k], stride wide */
    CHECK(xv && ft_tensor_rows_layout(xv, NULL, NULL), "slice view is not rows layout");
    float *x = malloc((size_t)(rows * k) * sizeof(float));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t p = 0; p < k; p++) x[i * k + p] = big[rows * wide + i * wide + 7 + p];
    double *ref = linear_ref(x, w, NULL, NULL, FT_ACT_NONE, rows, n, k);
    cmp(ft_linear(ctx, xv, wt, NULL), ref, rows * n, 2e-4, "linear on a sliced view");
    free(big);
    free(w);
    free(x);
    free(ref);
    ft_ctx_reset(ctx);
}

static void test_linear_epilogue(void) {
    for (int di = 0; di < 3; di++)
        for (int act = FT_ACT_NONE; act <= FT_ACT_SIGMOID; act++)
            for (int with_res = 0; with_res < 2; with_res++) {
                ft_dtype dt = dtypes[di];
                int64_t rows = 35, n = 21, k = 67;
                float *x = rvals(rows * k, dt), *w = rvals(n * k, dt), *bias = rvals(n, dt),
                      *res = rvals(rows * n, dt);
                /* every other case with a folded scale: alpha applies to x W^T only */
                float alpha = (act + with_res) % 2 ? 0.3f : 1.0f;
                ref_alpha = alpha;
                double *ref = linear_ref(x, w, bias, with_res ? res : NULL, act, rows, n, k);
                ref_alpha = 1.0;
                int64_t xs[2] = {rows, k}, ws[2] = {n, k}, bs[1] = {n}, ys[2] = {rows, n};
                ft_tensor *src[4] = {up(dt, 2, xs, x), up(dt, 2, ws, w), up(dt, 1, bs, bias),
                                     with_res ? up(dt, 2, ys, res) : NULL};
                ft_params_linear p = {act, alpha};
                ft_tensor *y = ft_dispatch(ctx, FT_OP_LINEAR, src, 4, &p, sizeof p);
                char what[80];
                snprintf(what, sizeof what, "linear %s act %d residual %d alpha %g", ft_dtype_name(dt), act,
                         with_res, (double)alpha);
                if (act == FT_ACT_NONE && !with_res) {
                    /* parameters left zeroed are refused, not a silent zero output */
                    ft_params_linear z = {act, 0.0f};
                    CHECK(ft_dispatch(ctx, FT_OP_LINEAR, src, 3, &z, sizeof z) == NULL &&
                              ft_ctx_status(ctx) == FT_ERR_INVALID_ARG,
                          "linear with alpha 0 accepted");
                    ft_ctx_clear_error(ctx);
                }
                cmp(y, ref, rows * n, tol_of(dt), what);
                free(x);
                free(w);
                free(bias);
                free(res);
                free(ref);
                ft_ctx_reset(ctx);
            }
}

/* residual as a transposed view (staged path) and sharing the output's storage
 * (accumulated in place by the GEMM, as a memory plan may arrange) */
static void test_linear_residual_layouts(void) {
    int64_t rows = 21, n = 35, k = 19;
    float *x = rvals(rows * k, FT_DTYPE_F32), *w = rvals(n * k, FT_DTYPE_F32);
    float *res = rvals(rows * n, FT_DTYPE_F32), *rest = malloc((size_t)(rows * n) * sizeof(float));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++) rest[j * rows + i] = res[i * n + j];
    double *ref = linear_ref(x, w, NULL, res, FT_ACT_RELU, rows, n, k);
    int64_t xs[2] = {rows, k}, ws[2] = {n, k}, ts[2] = {n, rows}, ys[2] = {rows, n};
    ft_tensor *xt = up(FT_DTYPE_F32, 2, xs, x), *wt = up(FT_DTYPE_F32, 2, ws, w);
    ft_params_linear p = {FT_ACT_RELU, 1.0f};
    ft_tensor *src[4] = {xt, wt, NULL, ft_transpose(ctx, up(FT_DTYPE_F32, 2, ts, rest), 0, 1)};
    cmp(ft_dispatch(ctx, FT_OP_LINEAR, src, 4, &p, sizeof p), ref, rows * n, 2e-4,
        "linear with a transposed residual");
    src[3] = up(FT_DTYPE_F32, 2, ys, res);
    ft_tensor *y = ft_dispatch(ctx, FT_OP_LINEAR, src, 4, &p, sizeof p);
    CHECK(y != NULL, "linear failed: %s", ft_ctx_errmsg(ctx));
    if (y) {
        memcpy(y->data, res, (size_t)(rows * n) * sizeof(float));
        y->src[3] = y; /* the residual is the output buffer itself */
        CHECK(ft_cpu_linear(ctx, y) == FT_OK, "in-place residual linear failed");
        cmp(y, ref, rows * n, 2e-4, "linear with the residual in the output buffer");
    }
    free(x);
    free(w);
    free(res);
    free(rest);
    free(ref);
    ft_ctx_reset(ctx);
}

/* ---- matmul ---- */

static void test_matmul(void) {
    /* modes: 0 plain, 1 a transposed view, 2 b transposed view, 3 both, 4 b broadcast
     * over the batch (expand), 5 a permuted from [M, B, K] (batch stride K) */
    for (int di = 0; di < 3; di++)
        for (int mode = 0; mode < 6; mode++)
            for (int s = 0; s < 4; s++) {
                ft_dtype dt = dtypes[di];
                if (dt != FT_DTYPE_F32 && s != 2) continue;
                int64_t bt = 3, m = odd[s], k = odd[(s + 1) % 4], n = odd[(s + 2) % 4];
                float *a = rvals(bt * m * k, dt), *b = rvals(bt * k * n, dt); /* logical */
                float alpha = 0.5f;
                double *ref = malloc((size_t)(bt * m * n) * sizeof(double));
                for (int64_t t = 0; t < bt; t++)
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t j = 0; j < n; j++) {
                            double acc = 0;
                            const float *bb = mode == 4 ? b : b + t * k * n; /* broadcast */
                            for (int64_t p = 0; p < k; p++)
                                acc += (double)a[(t * m + i) * k + p] * bb[p * n + j];
                            ref[(t * m + i) * n + j] = alpha * acc;
                        }
                /* build the physical tensors whose views are the logical a and b */
                ft_tensor *ta, *tb;
                if (mode == 1 || mode == 3) {
                    float *p = malloc((size_t)(bt * m * k) * sizeof(float));
                    for (int64_t t = 0; t < bt; t++)
                        for (int64_t i = 0; i < m; i++)
                            for (int64_t q = 0; q < k; q++) p[(t * k + q) * m + i] = a[(t * m + i) * k + q];
                    int64_t sh[3] = {bt, k, m};
                    ta = ft_transpose(ctx, up(dt, 3, sh, p), 1, 2);
                    free(p);
                } else if (mode == 5) {
                    float *p = malloc((size_t)(bt * m * k) * sizeof(float));
                    for (int64_t t = 0; t < bt; t++)
                        for (int64_t i = 0; i < m; i++)
                            for (int64_t q = 0; q < k; q++) p[(i * bt + t) * k + q] = a[(t * m + i) * k + q];
                    int64_t sh[3] = {m, bt, k};
                    int perm[3] = {1, 0, 2};
                    ta = ft_permute(ctx, up(dt, 3, sh, p), perm);
                    free(p);
                } else {
                    int64_t sh[3] = {bt, m, k};
                    ta = up(dt, 3, sh, a);
                }
                if (mode == 2 || mode == 3) {
                    float *p = malloc((size_t)(bt * k * n) * sizeof(float));
                    for (int64_t t = 0; t < bt; t++)
                        for (int64_t q = 0; q < k; q++)
                            for (int64_t j = 0; j < n; j++) p[(t * n + j) * k + q] = b[(t * k + q) * n + j];
                    int64_t sh[3] = {bt, n, k};
                    tb = ft_transpose(ctx, up(dt, 3, sh, p), 1, 2);
                    free(p);
                } else if (mode == 4) {
                    int64_t sh[3] = {1, k, n}, ex[3] = {bt, k, n};
                    tb = ft_expand(ctx, up(dt, 3, sh, b), 3, ex);
                } else {
                    int64_t sh[3] = {bt, k, n};
                    tb = up(dt, 3, sh, b);
                }
                ft_tensor *y = ft_matmul(ctx, ta, tb, alpha);
                char what[80];
                snprintf(what, sizeof what, "matmul %s mode %d M %lld K %lld N %lld", ft_dtype_name(dt),
                         mode, (long long)m, (long long)k, (long long)n);
                cmp(y, ref, bt * m * n, tol_of(dt), what);
                free(a);
                free(b);
                free(ref);
                ft_ctx_reset(ctx);
            }
}

static void test_matmul_4d_many(void) {
    /* [2, 12, 33, 64] x [2, 12, 64, 33]: per-item parallel path */
    int64_t bt = 24, m = 33, k = 64, n = 33;
    float *a = rvals(bt * m * k, FT_DTYPE_F32), *b = rvals(bt * k * n, FT_DTYPE_F32);
    double *ref = malloc((size_t)(bt * m * n) * sizeof(double));
    for (int64_t t = 0; t < bt; t++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++) acc += (double)a[(t * m + i) * k + p] * b[(t * k + p) * n + j];
                ref[(t * m + i) * n + j] = acc;
            }
    int64_t as[4] = {2, 12, m, k}, bs[4] = {2, 12, k, n};
    ft_tensor *y = ft_matmul(ctx, up(FT_DTYPE_F32, 4, as, a), up(FT_DTYPE_F32, 4, bs, b), 1.0f);
    cmp(y, ref, bt * m * n, 2e-4, "matmul 4-d batch");
    if (y) CHECK(ft_tensor_ndim(y) == 4 && ft_tensor_dim(y, 1) == 12, "matmul 4-d shape");
    free(a);
    free(b);
    free(ref);
    ft_ctx_reset(ctx);
}

/* ---- attention ---- */

/* mask kinds: 0 none, 1 [B,1,1,Sk] padding mask, 2 [Sq,Sk] causal with -inf,
 * 3 [1,1,1,Sk] expanded to [B,H,Sq,Sk] (stride 0), 4 full [B,H,Sq,Sk],
 * 5 [B,1,1,Sk] left padding of b + 2 keys with finfo.min (HF's (1 - m) * min).
 * causal: ft_attention_causal, HF GPT-2's replacement of the scores past each
 * query by finfo.min before the mask is added, in f32 as there (min + min = -inf,
 * and a row with every allowed key padded is uniform over a set of keys). */
static void run_attention_c(ft_dtype dt, int64_t B, int64_t H, int64_t sq, int64_t sk, int64_t d,
                            int64_t dv, bool permuted, int mask_kind, float scale, bool causal) {
    float *q = rvals(B * H * sq * d, dt), *k = rvals(B * H * sk * d, dt), *v = rvals(B * H * sk * dv, dt);
    /* logical mask [B, H, Sq, Sk] for the reference, and the tensor the op gets */
    float *mfull = malloc((size_t)(B * H * sq * sk) * sizeof(float));
    float *mv = rvals(B * H * sq * sk, FT_DTYPE_F32);
    ft_tensor *mt = NULL;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < sq; i++)
                for (int64_t j = 0; j < sk; j++) {
                    float m = 0.0f;
                    if (mask_kind == 1) m = j > 0 && j >= sk - b - 1 ? -1e4f : 0.0f;
                    if (mask_kind == 2) /* causal; key 0 always visible so no row is all -inf */
                        m = j > 0 && j > i + sk - sq ? -INFINITY : 0.5f * mv[i * sk + j];
                    if (mask_kind == 3) m = mv[j];
                    if (mask_kind == 4) m = mv[((b * H + h) * sq + i) * sk + j];
                    if (mask_kind == 5) m = j < b + 2 ? -FLT_MAX : 0.0f;
                    mfull[((b * H + h) * sq + i) * sk + j] = m;
                }
    if (mask_kind == 1 || mask_kind == 5) {
        float *m1 = malloc((size_t)(B * sk) * sizeof(float));
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < sk; j++) m1[b * sk + j] = mfull[b * H * sq * sk + j];
        int64_t sh[4] = {B, 1, 1, sk};
        mt = up(FT_DTYPE_F32, 4, sh, m1);
        free(m1);
    } else if (mask_kind == 2) {
        int64_t sh[2] = {sq, sk};
        mt = up(FT_DTYPE_F32, 2, sh, mfull);
    } else if (mask_kind == 3) {
        int64_t sh[4] = {1, 1, 1, sk}, ex[4] = {B, H, sq, sk};
        mt = ft_expand(ctx, up(FT_DTYPE_F32, 4, sh, mv), 4, ex);
    } else if (mask_kind == 4) {
        int64_t sh[4] = {B, H, sq, sk};
        mt = up(FT_DTYPE_F32, 4, sh, mfull);
    }
    double *ref = malloc((size_t)(B * H * sq * dv) * sizeof(double));
    double *p = malloc((size_t)sk * sizeof(double));
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t i = 0; i < sq; i++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < sk; j++) {
                double s = 0;
                for (int64_t c = 0; c < d; c++) s += (double)q[(bh * sq + i) * d + c] * k[(bh * sk + j) * d + c];
                if (causal) /* f32 logits, as HF's: replaced, then the mask added */
                    p[j] = (j > i + sk - sq ? -FLT_MAX : (float)(s * scale)) + mfull[(bh * sq + i) * sk + j];
                else
                    p[j] = s * scale + mfull[(bh * sq + i) * sk + j];
                if (p[j] > mx) mx = p[j];
            }
            for (int64_t j = 0; j < sk; j++) sum += (p[j] = exp(p[j] - mx));
            for (int64_t c = 0; c < dv; c++) {
                double o = 0;
                for (int64_t j = 0; j < sk; j++) o += p[j] / sum * v[(bh * sk + j) * dv + c];
                ref[(bh * sq + i) * dv + c] = o;
            }
        }
    /* q, k, v as given, or as [B, S, H, D] storage permuted to [B, H, S, D] */
    ft_tensor *t[3];
    const float *lv[3] = {q, k, v};
    int64_t ss[3] = {sq, sk, sk}, dd[3] = {d, d, dv};
    for (int x = 0; x < 3; x++) {
        if (!permuted) {
            int64_t sh[4] = {B, H, ss[x], dd[x]};
            t[x] = up(dt, 4, sh, lv[x]);
            continue;
        }
        float *ph = malloc((size_t)(B * H * ss[x] * dd[x]) * sizeof(float));
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t s = 0; s < ss[x]; s++)
                    for (int64_t c = 0; c < dd[x]; c++)
                        ph[((b * ss[x] + s) * H + h) * dd[x] + c] = lv[x][((b * H + h) * ss[x] + s) * dd[x] + c];
        int64_t sh[4] = {B, ss[x], H, dd[x]};
        int perm[4] = {0, 2, 1, 3};
        t[x] = ft_permute(ctx, up(dt, 4, sh, ph), perm);
        free(ph);
    }
    ft_tensor *y = causal ? ft_attention_causal(ctx, t[0], t[1], t[2], mt, scale)
                          : ft_attention(ctx, t[0], t[1], t[2], mt, scale);
    char what[128];
    snprintf(what, sizeof what, "attention %s B%lld H%lld Sq%lld Sk%lld D%lld Dv%lld perm %d mask %d%s",
             ft_dtype_name(dt), (long long)B, (long long)H, (long long)sq, (long long)sk,
             (long long)d, (long long)dv, permuted, mask_kind, causal ? " causal" : "");
    cmp(y, ref, B * H * sq * dv, tol_of(dt), what);
    free(q);
    free(k);
    free(v);
    free(mfull);
    free(mv);
    free(ref);
    free(p);
    ft_ctx_reset(ctx);
}

static void run_attention(ft_dtype dt, int64_t B, int64_t H, int64_t sq, int64_t sk, int64_t d,
                          int64_t dv, bool permuted, int mask_kind, float scale) {
    run_attention_c(dt, B, H, sq, sk, d, dv, permuted, mask_kind, scale, false);
}

/* GPT-2's causal attention: no mask, a padding mask, left padding (rows whose every
 * allowed key is padded), more keys than queries, more queries than keys (rows
 * with no allowed key: uniform over all), and row blocks of 64 (129 queries). */
static void test_attention_causal(void) {
    for (int di = 0; di < 3; di++) {
        ft_dtype dt = dtypes[di];
        run_attention_c(dt, 2, 3, 17, 17, 16, 16, true, 0, 0.25f, true);
        run_attention_c(dt, 3, 2, 19, 19, 8, 5, false, 5, 0.3f, true);
        if (dt != FT_DTYPE_F32) continue;
        run_attention_c(dt, 2, 2, 17, 17, 16, 16, true, 1, 0.25f, true);
        run_attention_c(dt, 1, 2, 129, 129, 64, 64, true, 5, 0.125f, true);
        run_attention_c(dt, 2, 1, 5, 40, 3, 7, false, 3, 0.5f, true);
        run_attention_c(dt, 2, 1, 40, 17, 3, 7, false, 0, 0.5f, true);
    }
}

static void test_attention(void) {
    for (int di = 0; di < 3; di++) {
        ft_dtype dt = dtypes[di];
        run_attention(dt, 2, 3, 17, 17, 16, 16, true, 1, 0.25f);
        run_attention(dt, 2, 2, 3, 17, 8, 5, false, 2, 0.3f);
        if (dt != FT_DTYPE_F32) continue;
        run_attention(dt, 1, 1, 129, 129, 64, 64, true, 0, 0.125f);
        run_attention(dt, 2, 3, 1, 129, 3, 17, true, 3, 1.0f);
        run_attention(dt, 2, 2, 17, 3, 1, 1, false, 4, 0.5f);
        run_attention(dt, 1, 4, 129, 17, 17, 3, true, 2, 0.7f);
    }
}

/* A query row whose every key is masked with -inf: NaN from the fused attention,
 * as from softmax + matmul (eager) and PyTorch; the other row is unaffected. */
static void test_attention_fully_masked(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    float q[8], k[12], v[12], m[6] = {-INFINITY, -INFINITY, -INFINITY, 0.0f, -INFINITY, 0.0f};
    for (int i = 0; i < 12; i++) {
        if (i < 8) q[i] = 0.1f * (float)(i % 5) - 0.2f;
        k[i] = 0.07f * (float)(i % 7) - 0.2f;
        v[i] = 0.3f * (float)(i % 4) - 0.4f;
    }
    ft_tensor *tq = ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, (int64_t[]){1, 1, 2, 4}, q);
    ft_tensor *tk = ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, (int64_t[]){1, 1, 3, 4}, k);
    ft_tensor *tv = ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, (int64_t[]){1, 1, 3, 4}, v);
    ft_tensor *tm = ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, (int64_t[]){1, 1, 2, 3}, m);
    ft_tensor *fused = ft_attention(ctx, tq, tk, tv, tm, 0.5f);
    ft_tensor *p = ft_softmax(ctx, ft_matmul(ctx, tq, ft_transpose(ctx, tk, -1, -2), 0.5f), tm, 1.0f);
    ft_tensor *eager = ft_matmul(ctx, p, tv, 1.0f);
    float a[8], b[8];
    CHECK(fused && eager, "ops failed: %s", ft_ctx_errmsg(ctx));
    if (fused && eager && ft_tensor_to_host(ctx, fused, FT_DTYPE_F32, a, sizeof a) == FT_OK &&
        ft_tensor_to_host(ctx, eager, FT_DTYPE_F32, b, sizeof b) == FT_OK) {
        for (int j = 0; j < 4; j++) {
            CHECK(isnan(a[j]) && isnan(b[j]), "masked row: fused %g, eager %g", a[j], b[j]);
            CHECK(isfinite(a[4 + j]) && fabsf(a[4 + j] - b[4 + j]) < 1e-6f, "open row: fused %g, eager %g",
                  a[4 + j], b[4 + j]);
        }
    }
    ft_ctx_free(ctx);
}

static void test_attention_long(void) {
    /* Sk large enough that the score rows are processed in several blocks */
    run_attention(FT_DTYPE_F32, 1, 1, 200, 6000, 4, 3, false, 0, 0.5f);
    run_attention(FT_DTYPE_F32, 1, 2, 150, 7000, 3, 2, true, 3, 0.5f);
}

/* ---- convolutions ---- */

typedef struct conv_case {
    int64_t b, cin, h, w, cout, kh, kw;
    int stride, pad, groups;
} conv_case;

/* double reference of conv2d (conv1d: h = kh = 1, no padding along H) */
static double *conv_ref(const conv_case *c, bool is2d, const float *x, const float *w,
                        const float *bias, const float *res, int act, int64_t *oh, int64_t *ow) {
    int64_t ph = is2d ? c->pad : 0, sh = is2d ? c->stride : 1;
    *oh = (c->h + 2 * ph - c->kh) / sh + 1;
    *ow = (c->w + 2 * c->pad - c->kw) / c->stride + 1;
    int64_t cin_g = c->cin / c->groups, cout_g = c->cout / c->groups, n = *oh * *ow;
    double *r = malloc((size_t)(c->b * c->cout * n) * sizeof(double));
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t o = 0; o < c->cout; o++)
            for (int64_t y = 0; y < *oh; y++)
                for (int64_t xx = 0; xx < *ow; xx++) {
                    int64_t g = o / cout_g;
                    double acc = bias ? bias[o] : 0.0;
                    for (int64_t ci = 0; ci < cin_g; ci++)
                        for (int64_t ky = 0; ky < c->kh; ky++)
                            for (int64_t kx = 0; kx < c->kw; kx++) {
                                int64_t iy = y * sh + ky - ph, ix = xx * c->stride + kx - c->pad;
                                if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w) continue;
                                acc += (double)x[((b * c->cin + g * cin_g + ci) * c->h + iy) * c->w + ix] *
                                       w[((o * cin_g + ci) * c->kh + ky) * c->kw + kx];
                            }
                    int64_t idx = (b * c->cout + o) * n + y * *ow + xx;
                    if (res) acc += res[idx];
                    r[idx] = act_ref(act, acc);
                }
    return r;
}

/* runs one case through the public API (act < 0) or ft_dispatch with an epilogue */
static void run_conv(const conv_case *c, bool is2d, ft_dtype dt, bool with_bias, int act,
                     bool with_res) {
    int64_t cin_g = c->cin / c->groups;
    float *x = rvals(c->b * c->cin * c->h * c->w, dt), *w = rvals(c->cout * cin_g * c->kh * c->kw, dt);
    float *bias = rvals(c->cout, dt);
    int64_t oh, ow;
    double *ref0 = conv_ref(c, is2d, x, w, NULL, NULL, FT_ACT_NONE, &oh, &ow);
    int64_t n = c->b * c->cout * oh * ow;
    float *res = rvals(n, dt);
    free(ref0);
    double *ref = conv_ref(c, is2d, x, w, with_bias ? bias : NULL, with_res ? res : NULL,
                           act < 0 ? FT_ACT_NONE : act, &oh, &ow);
    int64_t xs2[4] = {c->b, c->cin, c->h, c->w}, ws2[4] = {c->cout, cin_g, c->kh, c->kw};
    int64_t xs1[3] = {c->b, c->cin, c->w}, ws1[3] = {c->cout, cin_g, c->kw}, bs[1] = {c->cout};
    int64_t ys2[4] = {c->b, c->cout, oh, ow}, ys1[3] = {c->b, c->cout, ow};
    ft_tensor *xt = is2d ? up(dt, 4, xs2, x) : up(dt, 3, xs1, x);
    ft_tensor *wt = is2d ? up(dt, 4, ws2, w) : up(dt, 3, ws1, w);
    ft_tensor *bt = with_bias ? up(dt, 1, bs, bias) : NULL;
    ft_tensor *y;
    if (act < 0) {
        y = is2d ? ft_conv2d(ctx, xt, wt, bt, c->stride, c->pad, c->groups)
                 : ft_conv1d(ctx, xt, wt, bt, c->stride, c->pad, c->groups);
    } else {
        ft_tensor *src[4] = {xt, wt, bt, with_res ? (is2d ? up(dt, 4, ys2, res) : up(dt, 3, ys1, res)) : NULL};
        ft_params_conv p = {.stride = c->stride, .padding = c->pad, .groups = c->groups,
                            .act = act, .act_in = FT_ACT_NONE};
        y = ft_dispatch(ctx, is2d ? FT_OP_CONV2D : FT_OP_CONV1D, src, 4, &p, sizeof p);
    }
    char what[128];
    snprintf(what, sizeof what, "conv%dd %s x[%lld,%lld,%lld,%lld] w[%lld,%lld,%lld] s%d p%d g%d act %d res %d",
             is2d ? 2 : 1, ft_dtype_name(dt), (long long)c->b, (long long)c->cin, (long long)c->h,
             (long long)c->w, (long long)c->cout, (long long)c->kh, (long long)c->kw, c->stride,
             c->pad, c->groups, act, with_res);
    cmp(y, ref, n, tol_of(dt), what);
    free(x);
    free(w);
    free(bias);
    free(res);
    free(ref);
    ft_ctx_reset(ctx);
}

static const conv_case conv1d_cases[] = {
    {1, 1, 1, 17, 3, 1, 3, 1, 0, 1},    {2, 3, 1, 17, 5, 1, 3, 2, 1, 1},
    {2, 4, 1, 33, 6, 1, 5, 3, 2, 2},    {1, 6, 1, 20, 6, 1, 3, 1, 1, 6},   /* depthwise */
    {1, 32, 1, 40, 32, 1, 16, 1, 8, 16}, /* WavLM-style grouped positional conv */
    {2, 8, 1, 13, 7, 1, 1, 1, 0, 1},    /* 1x1: no im2col */
    {1, 3, 1, 129, 17, 1, 10, 5, 0, 1}, {1, 5, 1, 4, 3, 1, 7, 1, 3, 1},
};

static const conv_case conv2d_cases[] = {
    {1, 3, 17, 13, 5, 3, 3, 1, 1, 1},  {2, 4, 9, 11, 6, 3, 3, 2, 1, 2},
    {1, 3, 23, 23, 8, 7, 7, 2, 3, 1},  {2, 8, 5, 7, 16, 1, 1, 1, 0, 1}, /* 1x1: no im2col */
    {1, 6, 9, 9, 6, 3, 3, 1, 1, 6},    /* depthwise */
    {1, 4, 8, 8, 4, 1, 1, 2, 0, 1},    {1, 2, 3, 3, 3, 5, 5, 1, 2, 1},
    {1, 64, 14, 14, 129, 3, 3, 1, 1, 1},
};

static void test_conv1d(void) {
    for (size_t i = 0; i < sizeof conv1d_cases / sizeof conv1d_cases[0]; i++)
        for (int di = 0; di < 3; di++)
            if (di == 0 || i % 3 == 1) run_conv(&conv1d_cases[i], false, dtypes[di], i % 2 == 0, -1, false);
}

static void test_conv2d(void) {
    for (size_t i = 0; i < sizeof conv2d_cases / sizeof conv2d_cases[0]; i++)
        for (int di = 0; di < 3; di++)
            if (di == 0 || i % 3 == 1) run_conv(&conv2d_cases[i], true, dtypes[di], i % 2 == 1, -1, false);
}

/* An input prologue (the graph moves a producer's bias and activation into the
 * convolution that reads it): the convolution of act_in(x + bin[c]), zero padded
 * after the prologue, against the naive reference on that transformed input. */
static void test_conv_input_prologue(void) {
    const conv_case *c = &conv2d_cases[1]; /* stride 2, padding 1, 2 groups */
    for (int di = 0; di < 3; di++) {
        ft_dtype dt = dtypes[di];
        int64_t cin_g = c->cin / c->groups, hw = c->h * c->w, oh, ow;
        float *x = rvals(c->b * c->cin * hw, dt), *w = rvals(c->cout * cin_g * c->kh * c->kw, dt);
        float *bias = rvals(c->cout, dt), *bin = rvals(c->cin, dt);
        float *xp = malloc((size_t)(c->b * c->cin * hw) * sizeof(float));
        for (int64_t i = 0; i < c->b * c->cin * hw; i++) {
            float v = x[i] + bin[(i / hw) % c->cin];
            xp[i] = v > 0.0f ? v : 0.0f;
        }
        double *ref = conv_ref(c, true, xp, w, bias, NULL, FT_ACT_NONE, &oh, &ow);
        int64_t xs[4] = {c->b, c->cin, c->h, c->w}, ws[4] = {c->cout, cin_g, c->kh, c->kw};
        int64_t bs[1] = {c->cout}, bis[1] = {c->cin};
        ft_tensor *src[6] = {up(dt, 4, xs, x), up(dt, 4, ws, w), up(dt, 1, bs, bias), NULL, NULL,
                             up(dt, 1, bis, bin)};
        ft_params_conv p = {.stride = c->stride, .padding = c->pad, .groups = c->groups,
                            .act = FT_ACT_NONE, .act_in = FT_ACT_RELU};
        char what[64];
        snprintf(what, sizeof what, "conv2d input prologue %s", ft_dtype_name(dt));
        cmp(ft_dispatch(ctx, FT_OP_CONV2D, src, 6, &p, sizeof p), ref, c->b * c->cout * oh * ow, tol_of(dt), what);
        free(x);
        free(w);
        free(bias);
        free(bin);
        free(xp);
        free(ref);
        ft_ctx_reset(ctx);
    }
}

static void test_conv_epilogue(void) {
    for (int act = FT_ACT_NONE; act <= FT_ACT_SIGMOID; act++)
        for (int r = 0; r < 2; r++) {
            ft_dtype dt = dtypes[(act + r) % 3];
            run_conv(&conv1d_cases[2], false, dt, true, act, r);
            run_conv(&conv2d_cases[1], true, dt, r == 0, act, r);
        }
}

/* ---- errors and timing ---- */

static void test_errors(void) {
    int64_t xs[2] = {4, 5}, ws[2] = {6, 7};
    float *v = rvals(64, FT_DTYPE_F32);
    ft_tensor *y = ft_linear(ctx, up(FT_DTYPE_F32, 2, xs, v), up(FT_DTYPE_F32, 2, ws, v), NULL);
    CHECK(y == NULL && ft_ctx_status(ctx) == FT_ERR_SHAPE, "linear K mismatch: %s",
          ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    int64_t cx[3] = {1, 6, 10}, cw[3] = {4, 4, 3};
    y = ft_conv1d(ctx, up(FT_DTYPE_F32, 3, cx, v), up(FT_DTYPE_F32, 3, cw, v), NULL, 1, 0, 2);
    CHECK(y == NULL && ft_ctx_status(ctx) == FT_ERR_SHAPE, "conv1d groups mismatch: %s",
          ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    int64_t q[4] = {1, 2, 3, 4}, ms[2] = {5, 5};
    ft_tensor *qt = up(FT_DTYPE_F32, 4, q, v);
    y = ft_attention(ctx, qt, qt, qt, up(FT_DTYPE_F32, 2, ms, v), 1.0f);
    CHECK(y == NULL && ft_ctx_status(ctx) == FT_ERR_SHAPE, "attention bad mask: %s",
          ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    free(v);
    ft_ctx_reset(ctx);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void test_perf_linear(void) {
    int64_t rows = 128, k = 768, n = 3072;
    int64_t xs[2] = {rows, k}, ws[2] = {n, k};
    for (int di = 0; di < 2; di++) {
        ft_dtype dt = dtypes[di];
        float *x = rvals(rows * k, dt), *w = rvals(n * k, dt);
        ft_tensor *xt = up(dt, 2, xs, x), *wt = up(dt, 2, ws, w);
        ft_tensor *y = ft_linear(ctx, xt, wt, NULL); /* warm-up */
        CHECK(y != NULL, "linear failed: %s", ft_ctx_errmsg(ctx));
        int it = 0;
        double t0 = now_s(), t;
        do {
            ft_tensor_release(ctx, y);
            y = ft_linear(ctx, xt, wt, NULL);
            it++;
            t = now_s() - t0;
        } while (y && t < 0.5 && it < 200);
        printf("  perf: linear [%lldx%lld] x [%lldx%lld]^T %s: %.3f ms, %.1f GFLOP/s (%d threads)\n",
               (long long)rows, (long long)k, (long long)n, (long long)k, ft_dtype_name(dt),
               1e3 * t / it, 2.0 * rows * n * k * it / t / 1e9, ft_cpu_gemm_threads());
        free(x);
        free(w);
        ft_ctx_reset(ctx);
    }
}

/* In a rerun: the kernel and blocking asked for are the ones in use. */
static void test_kernel_is_the_one_asked(void) {
    const ft_cpu_gemm_kern *k = ft_cpu_gemm_kern_get();
    const char *want = getenv("FT_TEST_GEMM_KERNEL"), *blk = getenv("FT_TEST_GEMM_BLOCKING");
    printf("  kernel %s %dx%d, kc %lld, mc %lld (L1 %lld, L2 %lld)\n", k->isa, k->mr, k->ncols,
           (long long)k->kc, (long long)k->mc, (long long)k->l1, (long long)k->l2);
    if (want && !strcmp(want, "6x16")) CHECK(k->mr == 6 && k->ncols == 16, "6x16 asked, %dx%d in use", k->mr, k->ncols);
    if (blk && !strcmp(blk, "128,16")) CHECK(k->kc == 128 && k->mc == 16, "blocking 128,16 asked");
    if (blk && !strcmp(blk, "128,12")) CHECK(k->kc == 128 && k->mc == 12, "blocking 128,12 asked");
    CHECK(k->kc % 16 == 0 && k->mc % k->mr == 0 && k->conv_nc % k->ncols == 0, "blocking not aligned to the tile");
    /* the choice is made once: panels packed so far were cut for it */
    CHECK(!ft_cpu_gemm_kern_select(NULL, 0, 0) && !ft_cpu_gemm_kern_select("6x16", 128, 16),
          "the kernel was chosen again after use");
    CHECK(ft_cpu_gemm_kern_get() == k && k->kc == ft_cpu_gemm_kern_get()->kc, "the kernel changed");
}

int main(int argc, char **argv) {
    (void)ft_test_golden_dir; /* the harness helper is unused here */
    (void)argc;
    if (gemm_test_select() != 0) return 1; /* before anything packs or multiplies */
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) {
        printf("cannot create a CPU context\n");
        return 1;
    }
    RUN(test_sgemm_core);
    RUN(test_sgemm_batched);
    RUN(test_linear_shapes);
    RUN(test_linear_views);
    RUN(test_linear_epilogue);
    RUN(test_linear_residual_layouts);
    RUN(test_matmul);
    RUN(test_matmul_4d_many);
    RUN(test_attention);
    RUN(test_attention_causal);
    RUN(test_attention_long);
    RUN(test_attention_fully_masked);
    RUN(test_conv1d);
    RUN(test_conv2d);
    RUN(test_conv_input_prologue);
    RUN(test_conv_epilogue);
    RUN(test_errors);
    RUN(test_kernel_is_the_one_asked);
    if (!is_test_child()) {
        RUN(test_perf_linear);
        gemm_test_self = argv[0];
        RUN(test_other_kernels);
    }
    ft_ctx_free(ctx);
    return ft_test_finish();
}

/*
 * test_ops_text_cpu.c - the CPU kernels of the two ops the zoo's text models
 * added, against naive double-precision loops written here: the grouped linear
 * (SqueezeBERT; odd group counts and widths, f32/f16/bf16, bias, epilogues,
 * alpha, a row view, the QKV merge's stacked form, plan-time packing and the
 * eager pack cache) and the disentangled attention (DeBERTa: c2p and/or p2c
 * gathered in the kernel with spans shorter than the sequence, Sq != Sk, masks,
 * row scales, strided relative products, f16/bf16), plus their argument errors.
 */
#include "gemm_test_util.h"
#include "../kernels/cpu/pack_cache.h"

#include <stdlib.h>
#include <string.h>

/* ---- grouped linear ---- */

/* ref [rows, N] = act(alpha x W_g^T + b + r), group j of `groups` reading input group j % in_groups */
static double *grouped_ref(const float *x, const float *w, const float *bias, const float *res, int act,
                           double alpha, int64_t rows, int64_t k, int64_t n, int64_t groups, int64_t in_groups) {
    int64_t kg = k / in_groups, ng = n / groups;
    double *r = malloc((size_t)(rows * n > 0 ? rows * n : 1) * sizeof(double));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t o = 0; o < n; o++) {
            int64_t g = o / ng, c0 = (g % in_groups) * kg;
            double dot = 0.0;
            for (int64_t c = 0; c < kg; c++) dot += (double)x[i * k + c0 + c] * w[o * kg + c];
            double acc = alpha * dot + (bias ? bias[o] : 0.0) + (res ? res[i * n + o] : 0.0);
            r[i * n + o] = act_ref(act, acc);
        }
    return r;
}

static ft_tensor *grouped_node(ft_tensor *x, ft_tensor *w, ft_tensor *b, ft_tensor *r, int act, float alpha,
                               int groups, int in_groups) {
    ft_params_linear_grouped p = {act, alpha, groups, in_groups};
    ft_tensor *s[4] = {x, w, b, r};
    return ft_dispatch(ctx, FT_OP_LINEAR_GROUPED, s, r ? 4 : 3, &p, sizeof p);
}

static void test_grouped_shapes(void) {
    static const int64_t rows_[3] = {1, 17, 129}, groups_[4] = {1, 2, 3, 6}, kg_[3] = {1, 5, 24}, ng_[3] = {1, 7, 33};
    for (int di = 0; di < 3; di++) {
        ft_dtype dt = dtypes[di];
        for (int a = 0; a < 3; a++)
            for (int gi = 0; gi < 4; gi++)
                for (int c = 0; c < 3; c++)
                    for (int e = 0; e < 3; e++) {
                        if (dt != FT_DTYPE_F32 && (a + gi + c + e) % 3) continue;
                        int64_t rows = rows_[a], g = groups_[gi], kg = kg_[c], ng = ng_[e], k = kg * g, n = ng * g;
                        bool with_bias = (a + c + e) % 2 == 0;
                        float *x = rvals(rows * k, dt), *w = rvals(n * kg, dt), *bias = rvals(n, dt);
                        double *ref = grouped_ref(x, w, with_bias ? bias : NULL, NULL, FT_ACT_NONE, 1.0, rows, k,
                                                  n, g, g);
                        int64_t xs[3] = {rows % 3 == 0 ? 3 : 1, rows % 3 == 0 ? rows / 3 : rows, k};
                        int64_t ws[2] = {n, kg}, bs[1] = {n};
                        ft_tensor *y = ft_linear_grouped(ctx, up(dt, 3, xs, x), up(dt, 2, ws, w),
                                                         with_bias ? up(dt, 1, bs, bias) : NULL, (int)g);
                        char what[128];
                        snprintf(what, sizeof what, "linear_grouped %s rows %lld groups %lld Kg %lld Ng %lld",
                                 ft_dtype_name(dt), (long long)rows, (long long)g, (long long)kg, (long long)ng);
                        cmp(y, ref, rows * n, tol_of(dt), what);
                        if (y && g > 1) {
                            CHECK(ft_tensor_dim(y, -1) == n, "%s: width", what);
                            CHECK(y->op == FT_OP_LINEAR_GROUPED, "%s: op %s", what, ft_op_name(y->op));
                        }
                        free(x);
                        free(w);
                        free(bias);
                        free(ref);
                        ft_ctx_reset(ctx);
                    }
    }
}

/* epilogues, alpha, a row view of x, the stacked (merged) form, and the packed paths */
static void test_grouped_epilogue_stacked(void) {
    const int64_t rows = 17, g = 3, kg = 7, ng = 9, k = g * kg, n = g * ng;
    for (int di = 0; di < 3; di++) {
        ft_dtype dt = dtypes[di];
        for (int act = FT_ACT_NONE; act <= FT_ACT_SIGMOID; act++)
            for (int with_res = 0; with_res < 2; with_res++) {
                float alpha = with_res ? 0.125f : 1.0f;
                float *x = rvals(rows * k, dt), *w = rvals(n * kg, dt), *bias = rvals(n, dt), *res = rvals(rows * n, dt);
                double *ref = grouped_ref(x, w, bias, with_res ? res : NULL, act, alpha, rows, k, n, g, g);
                int64_t xs[2] = {rows, k}, ws[2] = {n, kg}, bs[1] = {n}, rs[2] = {rows, n};
                ft_tensor *y = grouped_node(up(dt, 2, xs, x), up(dt, 2, ws, w), up(dt, 1, bs, bias),
                                            with_res ? up(dt, 2, rs, res) : NULL, act, alpha, (int)g, (int)g);
                char what[96];
                snprintf(what, sizeof what, "linear_grouped %s act %d residual %d", ft_dtype_name(dt), act, with_res);
                cmp(y, ref, rows * n, tol_of(dt), what);
                free(x), free(w), free(bias), free(res), free(ref);
                ft_ctx_reset(ctx);
            }
    }
    /* x a row view: columns 2 .. 2 + K of a wider tensor (row stride > K) */
    float *xw = rvals(rows * (k + 5), FT_DTYPE_F32), *w = rvals(n * kg, FT_DTYPE_F32);
    float *xv = malloc((size_t)(rows * k) * sizeof(float));
    for (int64_t i = 0; i < rows; i++) memcpy(xv + i * k, xw + i * (k + 5) + 2, (size_t)k * sizeof(float));
    double *ref = grouped_ref(xv, w, NULL, NULL, FT_ACT_NONE, 1.0, rows, k, n, g, g);
    int64_t xs[2] = {rows, k + 5}, ws[2] = {n, kg};
    ft_tensor *y = ft_linear_grouped(ctx, ft_slice(ctx, up(FT_DTYPE_F32, 2, xs, xw), 1, 2, k),
                                     up(FT_DTYPE_F32, 2, ws, w), NULL, (int)g);
    cmp(y, ref, rows * n, 2e-4, "linear_grouped on a row view");
    free(xw), free(w), free(xv), free(ref);
    ft_ctx_reset(ctx);

    /* stacked: 3 members of `g` groups each over the same input groups (q|k|v) */
    float *x = rvals(rows * k, FT_DTYPE_F32), *w3 = rvals(3 * n * kg, FT_DTYPE_F32), *b3 = rvals(3 * n, FT_DTYPE_F32);
    ref = grouped_ref(x, w3, b3, NULL, FT_ACT_NONE, 1.0, rows, k, 3 * n, 3 * g, g);
    int64_t xs2[2] = {rows, k}, w3s[2] = {3 * n, kg}, b3s[1] = {3 * n};
    ft_tensor *tw = up(FT_DTYPE_F32, 2, w3s, w3);
    ft_tensor *node = grouped_node(up(FT_DTYPE_F32, 2, xs2, x), tw, up(FT_DTYPE_F32, 1, b3s, b3), NULL,
                                   FT_ACT_NONE, 1.0f, (int)(3 * g), (int)g);
    cmp(node, ref, rows * 3 * n, 2e-4, "linear_grouped stacked (3 members)");
    /* the same node with its weight packed at plan time, and again from the eager pack cache */
    if (node) {
        tw->flags |= FT_TF_WEIGHT;
        int before = ft_cpu_prepack_count();
        ft_cpu_prepack(ctx, node);
        CHECK(ft_cpu_prepack_count() == before + 1 && node->extra, "the grouped weight was not prepacked");
        CHECK_OK(ctx, ft_cpu_linear_grouped(ctx, node));
        cmp(node, ref, rows * 3 * n, 2e-4, "linear_grouped stacked, prepacked");
        ft_cpu_unpack(node);
        CHECK(!node->extra, "unpack left the panels");
        const ft_cpu_packed_b *pk = ft_cpu_pack_cache_linear_groups(ctx, tw, 3 * g);
        if (pk) { /* only for versioned model parameters: here the header is a plain tensor */
            CHECK(pk->groups == 3 * g && pk->n == ng && pk->k == kg, "pack cache: %lld sets of %lld x %lld",
                  (long long)pk->groups, (long long)pk->n, (long long)pk->k);
        }
    }
    free(x), free(w3), free(b3), free(ref);
    ft_ctx_reset(ctx);
}

static void test_grouped_errors(void) {
    int64_t xs[2] = {3, 12}, ws[2] = {8, 5}, ws2[2] = {10, 4};
    float v[64] = {0};
    ft_tensor *x = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, xs, v);
    CHECK(ft_linear_grouped(ctx, x, ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, ws, v), NULL, 4) == NULL &&
              strstr(ft_ctx_errmsg(ctx), "groups"),
          "K/groups mismatch accepted: %s", ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    CHECK(ft_linear_grouped(ctx, x, ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, ws2, v), NULL, 3) == NULL,
          "N not a multiple of groups accepted");
    ft_ctx_clear_error(ctx);
    CHECK(ft_linear_grouped(ctx, x, ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, ws2, v), NULL, 0) == NULL,
          "0 groups accepted");
    ft_ctx_clear_error(ctx);
    ft_ctx_reset(ctx);
}

/* ---- disentangled attention ---- */

typedef struct rel_case {
    int64_t b, h, sq, sk, d, dv, span;
    bool c2p, p2c, mask, rs, c2p_transposed;
} rel_case;

static int64_t clampd(int64_t d, int64_t span) { return d < 0 ? 0 : d > 2 * span - 1 ? 2 * span - 1 : d; }

static void run_rel_case(const rel_case *c, ft_dtype dt) {
    int64_t B = c->b, H = c->h, Sq = c->sq, Sk = c->sk, D = c->d, Dv = c->dv, R = 2 * c->span;
    float *q = rvals(B * H * Sq * D, dt), *k = rvals(B * H * Sk * D, dt), *v = rvals(B * H * Sk * Dv, dt);
    float *cp = rvals(B * H * Sq * R, dt), *pc = rvals(B * H * Sk * R, dt), *rs = rvals(B * Sq, dt);
    float *mask = malloc((size_t)(B * Sk) * sizeof(float));
    for (int64_t i = 0; i < B * Sk; i++) mask[i] = (i % Sk) && (i * 7) % 5 == 0 ? -3.4028234663852886e38f : 0.0f;
    double scale = 0.125;
    double *ref = malloc((size_t)(B * H * Sq * Dv) * sizeof(double)), *s = malloc((size_t)Sk * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < Sq; i++) {
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < Sk; j++) {
                    double dot = 0.0;
                    for (int64_t e = 0; e < D; e++)
                        dot += (double)q[((b * H + h) * Sq + i) * D + e] * k[((b * H + h) * Sk + j) * D + e];
                    double sc = (double)(float)(dot * scale);
                    int64_t r = clampd(i - j + c->span, c->span);
                    if (c->c2p) sc += cp[((b * H + h) * Sq + i) * R + r];
                    if (c->p2c) sc += pc[((b * H + h) * Sk + j) * R + r];
                    if (c->mask) sc += mask[b * Sk + j];
                    s[j] = sc;
                    mx = fmax(mx, sc);
                }
                for (int64_t j = 0; j < Sk; j++) sum += (s[j] = exp(s[j] - mx));
                for (int64_t e = 0; e < Dv; e++) {
                    double o = 0.0;
                    for (int64_t j = 0; j < Sk; j++) o += s[j] / sum * v[((b * H + h) * Sk + j) * Dv + e];
                    ref[((b * H + h) * Sq + i) * Dv + e] = o * (c->rs ? rs[b * Sq + i] : 1.0);
                }
            }
    int64_t qs[4] = {B, H, Sq, D}, ks[4] = {B, H, Sk, D}, vs[4] = {B, H, Sk, Dv}, cs[4] = {B, H, Sq, R},
            ps[4] = {B, H, Sk, R}, ms[4] = {B, 1, 1, Sk}, rss[4] = {B, 1, Sq, 1};
    ft_tensor *tc = NULL;
    if (c->c2p && c->c2p_transposed) {
        /* the relative product stored [B, H, 2 span, Sq] and read through a transposed view */
        float *ct = malloc((size_t)(B * H * Sq * R) * sizeof(float));
        for (int64_t bh = 0; bh < B * H; bh++)
            for (int64_t i = 0; i < Sq; i++)
                for (int64_t r = 0; r < R; r++) ct[(bh * R + r) * Sq + i] = cp[(bh * Sq + i) * R + r];
        int64_t cts[4] = {B, H, R, Sq};
        tc = ft_transpose(ctx, up(dt, 4, cts, ct), 2, 3);
        free(ct);
    } else if (c->c2p) {
        tc = up(dt, 4, cs, cp);
    }
    ft_tensor *y = ft_attention_rel(ctx, up(dt, 4, qs, q), up(dt, 4, ks, k), up(dt, 4, vs, v),
                                    c->mask ? ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, ms, mask) : NULL, tc,
                                    c->p2c ? up(dt, 4, ps, pc) : NULL, c->rs ? up(dt, 4, rss, rs) : NULL,
                                    (float)scale, c->span);
    char what[160];
    snprintf(what, sizeof what, "attention_rel %s B%lld H%lld Sq%lld Sk%lld D%lld Dv%lld span %lld%s%s%s%s%s",
             ft_dtype_name(dt), (long long)B, (long long)H, (long long)Sq, (long long)Sk, (long long)D,
             (long long)Dv, (long long)c->span, c->c2p ? " c2p" : "", c->p2c ? " p2c" : "", c->mask ? " mask" : "",
             c->rs ? " row-scale" : "", c->c2p_transposed ? " (c2p view)" : "");
    cmp(y, ref, B * H * Sq * Dv, dt == FT_DTYPE_F32 ? 2e-4 : dt == FT_DTYPE_F16 ? 8e-3 : 4e-2, what);
    free(q), free(k), free(v), free(cp), free(pc), free(rs), free(mask), free(ref), free(s);
    ft_ctx_reset(ctx);
}

static void test_attention_rel(void) {
    static const rel_case cases[] = {
        {2, 3, 17, 17, 7, 5, 17, true, true, true, true, false},    /* every term, no clamping */
        {1, 2, 40, 40, 16, 16, 5, true, true, true, false, false},  /* span < S: clamped */
        {2, 1, 9, 33, 8, 3, 9, true, true, false, true, false},     /* Sq != Sk */
        {1, 2, 17, 17, 4, 4, 3, true, false, true, true, true},     /* c2p only, through a view */
        {3, 2, 5, 5, 3, 6, 5, false, true, true, true, false},      /* p2c only, batch 3 */
        {1, 1, 1, 1, 1, 1, 1, true, true, false, false, false},     /* one token */
        {1, 2, 129, 129, 20, 20, 64, true, true, true, true, false}, /* several score blocks */
        {2, 2, 6, 6, 5, 5, 2, false, false, true, true, false},     /* no terms: masked row scale */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int di = 0; di < 3; di++)
            if (di == 0 || i % 2 == 0) run_rel_case(&cases[i], dtypes[di]);
}

static void test_attention_rel_errors(void) {
    int64_t q4[4] = {1, 2, 5, 4}, c4[4] = {1, 2, 5, 7};
    float v[64] = {0};
    ft_tensor *q = ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, q4, v);
    CHECK(ft_attention_rel(ctx, q, q, q, NULL, ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, c4, v), NULL, NULL, 1.0f, 3) ==
                  NULL &&
              strstr(ft_ctx_errmsg(ctx), "c2p"),
          "a c2p of the wrong width accepted: %s", ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    CHECK(ft_attention_rel(ctx, q, q, q, NULL, NULL, NULL, NULL, 1.0f, 0) == NULL, "span 0 accepted");
    ft_ctx_clear_error(ctx);
    ft_tensor *qh = ft_cast(ctx, q, FT_DTYPE_F16);
    int64_t p4[4] = {1, 2, 5, 6};
    CHECK(ft_attention_rel(ctx, q, q, q, NULL, NULL, ft_cast(ctx, ft_tensor_from_host(ctx, FT_DTYPE_F32, 4, p4, v),
                                                             FT_DTYPE_F16),
                           NULL, 1.0f, 3) == NULL && qh,
          "a p2c of another dtype accepted");
    ft_ctx_clear_error(ctx);
    ft_ctx_reset(ctx);
}

int main(void) {
    (void)ft_test_golden_dir;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) {
        printf("cannot create a CPU context\n");
        return 1;
    }
    RUN(test_grouped_shapes);
    RUN(test_grouped_epilogue_stacked);
    RUN(test_grouped_errors);
    RUN(test_attention_rel);
    RUN(test_attention_rel_errors);
    ft_ctx_free(ctx);
    return ft_test_finish();
}

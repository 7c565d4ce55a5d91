/*
 * test_gemm_packed_cpu.c - the CPU GEMM's fused epilogue (bias and activation
 * applied as each tile is stored) and its packed operands: panels made once
 * (ft_cpu_pack_a / ft_cpu_pack_b) give what per-call packing gives, and graph
 * and static plans pack every linear and convolution weight once.
 */
#include "gemm_test_util.h"

/* The epilogue fused into the tile stores (ft_cpu_sgemm_ep): bias by column and
 * by row, every activation, a residual through beta = 1, K across several depth
 * blocks (the epilogue must run once, after the last), tiles cut by the thread
 * split, 1 and 2 threads. */
static void test_sgemm_fused_epilogue(void) {
    static const int64_t dims[][3] = {{1, 1, 1}, {13, 35, 0}, {29, 45, 300}, {130, 67, 17}, {7, 530, 513}};
    for (int th = 1; th <= 2; th++) {
        ft_cpu_set_threads(th);
        for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++)
            for (int act = FT_ACT_NONE; act <= FT_ACT_SIGMOID; act++)
                for (int per_row = 0; per_row < 2; per_row++) {
                    int64_t m = dims[s][0], n = dims[s][1], k = dims[s][2], ldc = n + 1;
                    float *a = rvals(m * k, FT_DTYPE_F32), *b = rvals(n * k, FT_DTYPE_F32);
                    float *bias = rvals(per_row ? m : n, FT_DTYPE_F32), *c = rvals(m * ldc, FT_DTYPE_F32);
                    float beta = act % 2 ? 1.0f : 0.0f; /* residual in C on odd acts */
                    double *ref = malloc((size_t)(m * n + 1) * sizeof(double));
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t j = 0; j < n; j++) {
                            double acc = 0;
                            for (int64_t p = 0; p < k; p++) acc += (double)a[i * k + p] * b[j * k + p];
                            acc = 2.0 * acc + (beta != 0.0f ? c[i * ldc + j] : 0.0) + bias[per_row ? i : j];
                            ref[i * n + j] = act_ref(act, acc);
                        }
                    ft_cpu_gemm_ep ep = {bias, per_row != 0, act};
                    CHECK(ft_cpu_sgemm_ep(false, true, m, n, k, 2.0f, a, k, b, k, beta, c, ldc, &ep) == 0,
                          "sgemm_ep failed");
                    int bad = 0;
                    for (int64_t i = 0; i < m && !bad; i++)
                        for (int64_t j = 0; j < n && !bad; j++) {
                            double g = c[i * ldc + j], r = ref[i * n + j];
                            if (!(fabs(g - r) <= 1e-4 * (1 + fabs(r)))) {
                                CHECK(0, "sgemm_ep %lldx%lldx%lld act %d per_row %d threads %d: C[%lld,%lld] = %g, expected %g",
                                      (long long)m, (long long)n, (long long)k, act, per_row, th,
                                      (long long)i, (long long)j, g, r);
                                bad = 1;
                            }
                        }
                    free(a);
                    free(b);
                    free(bias);
                    free(c);
                    free(ref);
                }
    }
    ft_cpu_set_threads(0);
}

/* op(B) packed once (ft_cpu_pack_b) and reused, and A packed once (ft_cpu_pack_a): the same products as packing per
 * call, for B given as W [N, K] (transposed) or [K, N], N across a 4096-column
 * panel and K across several depth blocks, with the fused epilogue, 1 and 2
 * threads (2: dynamic column chunks where A is small enough, rows past an A
 * block and depths past a depth block included, bit-identical to 1 thread),
 * the packed panels reused by a second product. */
static void test_sgemm_packed(void) {
    static const int64_t dims[][3] = {{1, 1, 1}, {5, 4100, 37}, {128, 67, 513}, {29, 45, 300}, {350, 100, 400}};
    enum { NS = sizeof dims / sizeof dims[0] };
    float *first[NS][2][2] = {{{NULL}}};
    for (int th = 1; th <= 2; th++) {
        ft_cpu_set_threads(th);
        for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++)
            for (int tb = 0; tb < 2; tb++) {
                int64_t m = dims[s][0], n = dims[s][1], k = dims[s][2], ldb = (tb ? k : n) + 3;
                rng_state = 0x5eed0000u + 2 * s + (uint64_t)tb; /* the same operands at both thread counts */
                float *a = rvals(m * k, FT_DTYPE_F32), *b = rvals((tb ? n : k) * ldb, FT_DTYPE_F32);
                float *bias = rvals(n, FT_DTYPE_F32), *c = malloc((size_t)(m * n) * sizeof(float));
                ft_cpu_packed_b *pb = ft_cpu_pack_b(tb, k, n, b, ldb);
                CHECK(pb != NULL, "pack failed");
                if (!pb) continue;
                for (int rep = 0; rep < 2; rep++) {
                    int act = rep ? FT_ACT_GELU : FT_ACT_NONE;
                    ft_cpu_gemm_ep ep = {bias, false, act};
                    CHECK(ft_cpu_sgemm_packed(false, m, 0.5f, a, k, pb, 0.0f, c, n, &ep) == 0, "packed failed");
                    if (th == 1) {
                        first[s][tb][rep] = malloc((size_t)(m * n) * sizeof(float));
                        memcpy(first[s][tb][rep], c, (size_t)(m * n) * sizeof(float));
                    } else {
                        CHECK(!memcmp(first[s][tb][rep], c, (size_t)(m * n) * sizeof(float)),
                              "packed %lldx%lldx%lld tb%d: 2 threads differ from 1 in some bit", (long long)m,
                              (long long)n, (long long)k, tb);
                        free(first[s][tb][rep]);
                    }
                    int bad = 0;
                    for (int64_t i = 0; i < m && !bad; i++)
                        for (int64_t j = 0; j < n && !bad; j++) {
                            double acc = 0;
                            for (int64_t p = 0; p < k; p++)
                                acc += (double)a[i * k + p] * (tb ? b[j * ldb + p] : b[p * ldb + j]);
                            double r = act_ref(act, 0.5 * acc + bias[j]), g = c[i * n + j];
                            if (!(fabs(g - r) <= 1e-4 * (1 + fabs(r)))) {
                                CHECK(0, "packed %lldx%lldx%lld tb%d threads %d: C[%lld,%lld] = %g, expected %g",
                                      (long long)m, (long long)n, (long long)k, tb, th, (long long)i,
                                      (long long)j, g, r);
                                bad = 1;
                            }
                        }
                }
                ft_cpu_packed_b_free(pb);
                free(a);
                free(b);
                free(bias);
                free(c);
            }
    }
    /* A packed once (a convolution weight [Cout, K]) times B [K, N] with a row bias */
    static const int64_t adims[][3] = {{1, 1, 1}, {64, 3136, 147}, {130, 50, 300}, {7, 4100, 9}};
    for (int th = 1; th <= 2; th++) {
        ft_cpu_set_threads(th);
        for (size_t s = 0; s < sizeof adims / sizeof adims[0]; s++) {
            int64_t m = adims[s][0], n = adims[s][1], k = adims[s][2], lda = k + 2;
            float *a = rvals(m * lda, FT_DTYPE_F32), *b = rvals(k * n, FT_DTYPE_F32);
            float *bias = rvals(m, FT_DTYPE_F32), *c = rvals(m * n, FT_DTYPE_F32);
            double *ref = malloc((size_t)(m * n) * sizeof(double));
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double acc = c[i * n + j] + bias[i]; /* beta = 1 */
                    for (int64_t p = 0; p < k; p++) acc += (double)a[i * lda + p] * b[p * n + j];
                    ref[i * n + j] = act_ref(FT_ACT_RELU, acc);
                }
            ft_cpu_packed_b *pa = ft_cpu_pack_a(m, k, a, lda);
            ft_cpu_gemm_ep ep = {bias, true, FT_ACT_RELU};
            CHECK(pa && ft_cpu_sgemm_packed_a(pa, n, b, n, 1.0f, c, n, &ep) == 0, "packed A failed");
            int bad = 0;
            for (int64_t i = 0; i < m * n && pa && !bad; i++)
                if (!(fabs(c[i] - ref[i]) <= 1e-4 * (1 + fabs(ref[i])))) {
                    CHECK(0, "packed A %lldx%lldx%lld threads %d: C[%lld] = %g, expected %g", (long long)m,
                          (long long)n, (long long)k, th, (long long)i, c[i], ref[i]);
                    bad = 1;
                }
            ft_cpu_packed_b_free(pa);
            free(a);
            free(b);
            free(bias);
            free(c);
            free(ref);
        }
    }
    ft_cpu_set_threads(0);
    ft_cpu_packed_b_free(NULL);
    CHECK(ft_cpu_pack_b(true, 0, 5, NULL, 1) == NULL, "an empty B has no panels");
}

/* Graph and static plans pack each linear and convolution weight once
 * (ft_cpu_prepack) and give the same outputs as eager mode, which packs per
 * call: bert-tiny in f32 and bf16, resnet-18 in f32. */
static void test_plan_prepacked_weights(void) {
    int64_t ids[2 * 11];
    for (int i = 0; i < 22; i++) ids[i] = (i * 37 + 5) % 1000;
    float *px = rvals(3 * 40 * 40, FT_DTYPE_F32);
    ft_host_tensor bert_in[] = {{"input_ids", FT_DTYPE_I64, 2, {2, 11}, ids}};
    ft_host_tensor rn_in[] = {{"pixel_values", FT_DTYPE_F32, 4, {1, 3, 40, 40}, px}};
    struct { const char *model, *out; ft_host_tensor *in; ft_dtype dt; int min_packed; } cases[] = {
        /* 2 layers x (qkv, out, ffn in, ffn out) + pooler; 20 convolutions */
        {"bert-tiny", "last_hidden_state", bert_in, FT_DTYPE_F32, 9},
        {"bert-tiny", "last_hidden_state", bert_in, FT_DTYPE_BF16, 9},
        {"resnet-18", "last_hidden_state", rn_in, FT_DTYPE_F32, 20},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float *ref = NULL;
        int64_t n = 0;
        for (int mode = FT_MODE_EAGER; mode <= FT_MODE_STATIC; mode++) {
            ft_model_options o = ft_model_options_default();
            o.mode = (ft_mode)mode;
            o.dtype = cases[c].dt;
            ft_model *m = NULL;
            int before = ft_cpu_prepack_count();
            if (ft_model_load(ctx, cases[c].model, &o, &m) != FT_OK || ft_model_forward(m, cases[c].in, 1) != FT_OK) {
                CHECK(0, "%s %d: %s", cases[c].model, mode, ft_ctx_errmsg(ctx));
                ft_ctx_clear_error(ctx);
                ft_model_free(m);
                continue;
            }
            int packed = ft_cpu_prepack_count() - before;
            if (mode == FT_MODE_EAGER) CHECK(packed == 0, "%s: eager packed %d weights", cases[c].model, packed);
            else CHECK(packed >= cases[c].min_packed, "%s mode %d packed %d weights", cases[c].model, mode, packed);
            ft_tensor *h = ft_model_output_find(m, cases[c].out);
            CHECK(h != NULL, "%s: no %s", cases[c].model, cases[c].out);
            if (!h) {
                ft_model_free(m);
                continue;
            }
            n = ft_tensor_numel(h);
            float *got = malloc((size_t)n * sizeof(float));
            CHECK(ft_tensor_to_host(ctx, h, FT_DTYPE_F32, got, (size_t)n * sizeof(float)) == FT_OK, "to_host");
            if (!ref) {
                ref = got;
            } else {
                double tol = cases[c].dt == FT_DTYPE_F32 ? 1e-4 : 3e-2;
                int bad = 0;
                for (int64_t i = 0; i < n && !bad; i++)
                    if (!(fabs(got[i] - ref[i]) <= tol * (1 + fabs(ref[i])))) {
                        CHECK(0, "%s mode %d [%lld]: %g vs eager %g", cases[c].model, mode, (long long)i, got[i], ref[i]);
                        bad = 1;
                    }
                free(got);
            }
            ft_model_free(m);
        }
        free(ref);
    }
    free(px);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)ft_test_golden_dir; /* the harness helper is unused here */
    if (gemm_test_select() != 0) return 1; /* before anything packs or multiplies */
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) {
        printf("cannot create a CPU context\n");
        return 1;
    }
    RUN(test_sgemm_fused_epilogue);
    RUN(test_sgemm_packed);
    RUN(test_plan_prepacked_weights);
    if (!is_test_child()) {
        gemm_test_self = argv[0];
        RUN(test_other_kernels);
    }
    ft_ctx_free(ctx);
    return ft_test_finish();
}

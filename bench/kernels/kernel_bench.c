/*
 * kernel_bench.c - achieved bandwidth / throughput of the hand-written CUDA
 * kernels (layernorm, softmax, attention) and the cuBLASLt GEMMs at BERT-base
 * shapes (fp16, sequence 128), and of ResNet-50's convolutions (224x224), each at
 * batch 1 and 64, next to what this device can do:
 * a large device-to-device cudaMemcpy (copy bandwidth) and a large fp16 GEMM
 * (GEMM peak). Not part of the library build: `make kernel-bench`.
 *
 * Each op is called through the public API. After a warm-up, REPS calls are
 * captured into one CUDA graph (outputs released every call, so the caching
 * allocator hands the same block back and nothing allocates while capturing)
 * and the graph is replayed: the time is GPU time without host dispatch gaps.
 * If capture fails the calls are timed on the stream instead (marked "s").
 * Each figure is the median of RUNS timed replays.
 */
#include "ftengine.h"
#include "ft_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FT_WITH_CUDA
int main(void) {
    printf("kernel bench: this build has no CUDA backend (CUDA=0 or no nvcc); nothing to measure\n");
    return 0;
}
#else
#include "cuda_backend.h"
#include "cuda_backend_internal.h"

#define REPS 20 /* op calls per timed replay */
#define RUNS 30 /* timed replays; the median is reported */
#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) DIE("%s: %s", #x, cudaGetErrorString(e_)); } while (0)

static ft_ctx *ctx;
static cudaStream_t stream;

typedef ft_tensor *(*op_fn)(ft_tensor **in);
static float g_scale = 0.125f;

static ft_tensor *op_layernorm(ft_tensor **in) { return ft_layernorm(ctx, in[0], in[1], in[2], 1e-12f); }
static ft_tensor *op_softmax(ft_tensor **in) { return ft_softmax(ctx, in[0], in[1], g_scale); }
static ft_tensor *op_attention(ft_tensor **in) { return ft_attention(ctx, in[0], in[1], in[2], in[3], g_scale); }
static ft_tensor *op_linear(ft_tensor **in) { return ft_linear(ctx, in[0], in[1], in[2]); }
static ft_tensor *op_matmul(ft_tensor **in) { return ft_matmul(ctx, in[0], in[1], 1.0f); }
static int g_stride = 1, g_pad = 0;
static ft_tensor *op_conv2d(ft_tensor **in) { return ft_conv2d(ctx, in[0], in[1], NULL, g_stride, g_pad, 1); }

/* Representative ResNet-50 convolutions at 224x224: {Cin, Cout, kernel, stride, input side}. */
static const int resnet50_convs[][5] = {
    {3, 64, 7, 2, 224},   /* stem */
    {64, 64, 1, 1, 56},   /* stage 1 reduce */
    {64, 64, 3, 1, 56},   /* stage 1 3x3 */
    {64, 256, 1, 1, 56},  /* stage 1 expand */
    {128, 128, 3, 2, 56}, /* stage 2 strided 3x3 */
    {256, 256, 3, 1, 14}, /* stage 3 3x3 */
    {1024, 2048, 1, 2, 14}, /* stage 4 projection shortcut */
    {512, 512, 3, 1, 7},  /* stage 4 3x3 */
};

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median milliseconds of one call of fn; *graphed says how it was timed. */
static float time_op(op_fn fn, ft_tensor **in, int *graphed) {
    for (int i = 0; i < 3; i++) { /* warm-up: plans cached, blocks in the allocator */
        ft_tensor *y = fn(in);
        if (!y) DIE("op failed: %s", ft_ctx_errmsg(ctx));
        ft_tensor_release(ctx, y);
    }
    if (ft_ctx_sync(ctx)) DIE("sync: %s", ft_ctx_errmsg(ctx));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    *graphed = 0;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        int ok = 1;
        for (int i = 0; i < REPS && ok; i++) {
            ft_tensor *y = fn(in);
            if (!y) ok = 0;
            else ft_tensor_release(ctx, y);
        }
        cudaError_t e = cudaStreamEndCapture(stream, &graph);
        if (ok && e == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) *graphed = 1;
        (void)cudaGetLastError();
        ft_ctx_clear_error(ctx);
    }
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    float ms[RUNS];
    for (int r = 0; r < RUNS; r++) {
        CK(cudaEventRecord(a, stream));
        if (*graphed) {
            CK(cudaGraphLaunch(exec, stream));
        } else {
            for (int i = 0; i < REPS; i++) {
                ft_tensor *y = fn(in);
                if (!y) DIE("op failed: %s", ft_ctx_errmsg(ctx));
                ft_tensor_release(ctx, y);
            }
        }
        CK(cudaEventRecord(b, stream));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms[r], a, b));
        ms[r] /= REPS;
    }
    qsort(ms, RUNS, sizeof ms[0], cmp_float);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms[RUNS / 2];
}

/* A device tensor of random values in [-1, 1) (or a 0/-10000 mask). */
static ft_tensor *rnd(ft_dtype dt, int nd, const int64_t *ne, int mask) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= ne[i];
    float *f = (float *)malloc((size_t)n * sizeof(float));
    void *h = malloc((size_t)n * 4);
    if (!f || !h) DIE("out of host memory");
    uint32_t s = 12345u + (uint32_t)n;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float u = (float)(s >> 8) / 16777216.0f;
        f[i] = mask ? (u < 0.9f ? 0.0f : -10000.0f) : 2.0f * u - 1.0f;
    }
    ft_convert_host(dt, h, FT_DTYPE_F32, f, n);
    ft_tensor *t = ft_tensor_from_host(ctx, dt, nd, ne, h);
    if (!t) DIE("tensor: %s", ft_ctx_errmsg(ctx));
    free(f);
    free(h);
    return t;
}

static double copy_gbs, gemm_tflops;

static void row(const char *name, const char *shape, float ms, int graphed, double bytes, double flops) {
    double gbs = bytes / (ms * 1e-3) / 1e9, tf = flops / (ms * 1e-3) / 1e12;
    printf("%-11s %-30s %9.2f%s %9.1f %6.0f%% %9.2f %6.1f%%\n", name, shape, ms * 1e3, graphed ? " " : "s",
           gbs, 100.0 * gbs / copy_gbs, tf, flops > 0 ? 100.0 * tf / gemm_tflops : 0.0);
}

int main(void) {
    if (ft_cuda_device_count() == 0) {
        printf("kernel bench: no CUDA device\n");
        return 0;
    }
    if (ft_ctx_create(FT_DEVICE_CUDA, &ctx) != FT_OK) DIE("cannot create a CUDA context");
    ft_cuda_state *st = ft_cuda_state_of(ctx);
    stream = st->stream;
    const ft_dtype H = FT_DTYPE_F16;

    /* device copy bandwidth: 1 GiB D2D, bytes read + written */
    size_t cb = (size_t)1 << 30;
    void *s0 = NULL, *s1 = NULL;
    CK(cudaMalloc(&s0, cb));
    CK(cudaMalloc(&s1, cb));
    CK(cudaMemsetAsync(s0, 1, cb, stream));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    float cms[9];
    for (int r = 0; r < 9; r++) {
        CK(cudaEventRecord(a, stream));
        CK(cudaMemcpyAsync(s1, s0, cb, cudaMemcpyDeviceToDevice, stream));
        CK(cudaEventRecord(b, stream));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&cms[r], a, b));
    }
    qsort(cms, 9, sizeof cms[0], cmp_float);
    copy_gbs = 2.0 * (double)cb / (cms[4] * 1e-3) / 1e9;
    cudaFree(s0);
    cudaFree(s1);

    /* GEMM peak: fp16 8192^3 through the same cuBLASLt path */
    {
        int64_t sh[2] = {8192, 8192};
        ft_tensor *in[2] = {rnd(H, 2, sh, 0), rnd(H, 2, sh, 0)};
        int gr;
        float ms = time_op(op_matmul, in, &gr);
        gemm_tflops = 2.0 * 8192.0 * 8192.0 * 8192.0 / (ms * 1e-3) / 1e12;
        ft_ctx_reset(ctx);
    }

    printf("device: %s (sm_%d%d, %d SMs), CUDA %d\n", st->name, st->sm_major, st->sm_minor, st->n_sm,
           ft_cuda_build_version());
    printf("measured copy bandwidth (D2D memcpy 1 GiB, read+write): %.0f GB/s\n", copy_gbs);
    printf("measured GEMM peak (fp16 8192^3, cuBLASLt): %.1f TFLOP/s\n\n", gemm_tflops);
    printf("%-11s %-30s %10s %9s %7s %9s %7s\n", "op", "shape (fp16)", "us", "GB/s", "%copy",
           "TFLOP/s", "%peak");

    const int batches[2] = {1, 64};
    for (int bi = 0; bi < 2; bi++) {
        int64_t B = batches[bi], S = 128, D = 768, Hh = 12, Dh = 64, F = 3072, R = B * S;
        char shp[64];
        int gr;
        float ms;
        { /* layernorm [B*S, D] */
            int64_t x[2] = {R, D}, v[1] = {D};
            ft_tensor *in[3] = {rnd(H, 2, x, 0), rnd(H, 1, v, 0), rnd(H, 1, v, 0)};
            ms = time_op(op_layernorm, in, &gr);
            snprintf(shp, sizeof shp, "[%lld,%lld]", (long long)R, (long long)D);
            row("layernorm", shp, ms, gr, 2.0 * R * D * 2 + 2.0 * D * 2, 0);
        }
        { /* softmax [B, H, S, S] + mask [B,1,1,S] */
            int64_t x[4] = {B, Hh, S, S}, m[4] = {B, 1, 1, S};
            ft_tensor *in[2] = {rnd(H, 4, x, 0), rnd(FT_DTYPE_F32, 4, m, 1)};
            ms = time_op(op_softmax, in, &gr);
            snprintf(shp, sizeof shp, "[%lld,%lld,%lld,%lld]", (long long)B, (long long)Hh, (long long)S, (long long)S);
            row("softmax", shp, ms, gr, 2.0 * B * Hh * S * S * 2, 0);
        }
        { /* fused attention q,k,v [B,H,S,64] */
            int64_t q[4] = {B, Hh, S, Dh}, m[4] = {B, 1, 1, S};
            ft_tensor *in[4] = {rnd(H, 4, q, 0), rnd(H, 4, q, 0), rnd(H, 4, q, 0), rnd(FT_DTYPE_F32, 4, m, 1)};
            ms = time_op(op_attention, in, &gr);
            snprintf(shp, sizeof shp, "[%lld,%lld,%lld,%lld]", (long long)B, (long long)Hh, (long long)S, (long long)Dh);
            row("attention", shp, ms, gr, 4.0 * B * Hh * S * Dh * 2, 4.0 * B * Hh * S * S * Dh);
        }
        /* the GEMMs of one BERT layer: QKV, attention output, FFN up, FFN down */
        const int64_t gemms[4][2] = {{D, 3 * D}, {D, D}, {D, F}, {F, D}};
        for (int g = 0; g < 4; g++) {
            int64_t K = gemms[g][0], N = gemms[g][1];
            int64_t x[2] = {R, K}, w[2] = {N, K}, bv[1] = {N};
            ft_tensor *in[3] = {rnd(H, 2, x, 0), rnd(H, 2, w, 0), rnd(H, 1, bv, 0)};
            ms = time_op(op_linear, in, &gr);
            snprintf(shp, sizeof shp, "%lldx%lldx%lld +bias", (long long)R, (long long)N, (long long)K);
            row("linear", shp, ms, gr, 2.0 * (R * K + N * K + R * N), 2.0 * R * N * K);
        }
        for (size_t c = 0; c < sizeof resnet50_convs / sizeof resnet50_convs[0]; c++) {
            const int *cv = resnet50_convs[c];
            int64_t ci = cv[0], co = cv[1], k = cv[2], side = cv[4];
            g_stride = cv[3];
            g_pad = cv[2] / 2;
            int64_t os = (side + 2 * g_pad - k) / g_stride + 1;
            int64_t x[4] = {B, ci, side, side}, w[4] = {co, ci, k, k};
            ft_tensor *in[2] = {rnd(H, 4, x, 0), rnd(H, 4, w, 0)};
            ms = time_op(op_conv2d, in, &gr);
            snprintf(shp, sizeof shp, "%lldx%lld %lldx%lld/%d @%lld", (long long)ci, (long long)co,
                     (long long)k, (long long)k, g_stride, (long long)side);
            row("conv2d", shp, ms, gr, 2.0 * (B * ci * side * side + co * ci * k * k + B * co * os * os),
                2.0 * B * co * os * os * ci * k * k);
        }
        ft_ctx_reset(ctx);
    }
    printf("\n(s = timed on the stream, host gaps included: CUDA graph capture failed)\n");
    ft_ctx_free(ctx);
    return 0;
}
#endif

/*
 * gemm_shapes.c - SGEMM throughput per shape: BERT-base's linear layers (batch 1
 * and 8 at 128 tokens) and ResNet-50's convolution GEMMs (as [OH*OW*batch, K] x
 * [K, Cout]), through ftengine's linear kernel and, beside it in the same
 * process and the same interleaved rounds, OpenBLAS's cblas_sgemm (dlopen'd, so
 * nothing links against it). bench/gemm_peers.py adds ONNX Runtime's MatMul and
 * prints the table of docs/results/.
 *
 *   build/bench/gemm_shapes [--threads N] [--rounds R] [--iters N] [--set bert|resnet|all]
 *                           [--impl ft,ft-nopack,openblas] [--openblas LIB] [--only NAME]
 *                           [--list] [--kernel 6x16|8x32] [--blocking KC,MC]
 *
 * Implementations: ft = the linear kernel with its weight packed as a graph plan
 * packs it (ft_cpu_prepack; graph and static mode, and eager through the pack
 * cache); ft-nopack = the same kernel packing the weight on every call;
 * openblas = cblas_sgemm(RowMajor, NoTrans, Trans) on the same x and W, which
 * packs both operands per call. Each round runs --iters calls of every shape
 * and implementation in turn, so a load change hits them all alike. Per call
 * it records the wall time and the CPU time of the OpenMP team (team_cpu_ms);
 * a busy shared host stretches the wall clock far more than the CPU time, so
 * GFLOP per CPU second is the fairer figure there (at 2 threads it counts a
 * waiting thread's spinning but not its sleep: run with OMP_WAIT_POLICY=passive
 * to count work only). One line per (shape, impl):
 *
 *   shape M N K impl best_wall_ms median_wall_ms best_cpu_ms gflops_wall gflops_cpu
 *
 * (gflops_wall from the best wall time, gflops_cpu from the best CPU time).
 */
#include "../engine/ft_internal.h"
#include "../kernels/cpu/cpu_kernels.h"
#include "../kernels/cpu/gemm_micro.h"
#include "bench_clock.h"

#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape {
    const char *name;
    int64_t m, n, k; /* y [m, n] = x [m, k] W^T, W [n, k] */
} shape;

static const shape bert[] = {
    {"bert.b1.qkv", 128, 2304, 768},     {"bert.b1.attn_out", 128, 768, 768},
    {"bert.b1.ffn_up", 128, 3072, 768},  {"bert.b1.ffn_down", 128, 768, 3072},
    {"bert.b8.qkv", 1024, 2304, 768},    {"bert.b8.attn_out", 1024, 768, 768},
    {"bert.b8.ffn_up", 1024, 3072, 768}, {"bert.b8.ffn_down", 1024, 768, 3072},
};

/* ResNet-50 at 224 x 224, batch 1 and 8: rows = batch * OH * OW, depth = Cin*KH*KW */
static const shape resnet[] = {
    {"r50.b1.stem", 12544, 64, 147},      {"r50.b1.l1.1x1", 3136, 64, 64},
    {"r50.b1.l1.3x3", 3136, 64, 576},     {"r50.b1.l1.1x1up", 3136, 256, 64},
    {"r50.b1.l1.1x1dn", 3136, 64, 256},   {"r50.b1.l2.3x3", 784, 128, 1152},
    {"r50.b1.l2.1x1up", 784, 512, 128},   {"r50.b1.l2.1x1dn", 784, 128, 512},
    {"r50.b1.l3.3x3", 196, 256, 2304},    {"r50.b1.l3.1x1up", 196, 1024, 256},
    {"r50.b1.l3.1x1dn", 196, 256, 1024},  {"r50.b1.l4.3x3", 49, 512, 4608},
    {"r50.b1.l4.1x1up", 49, 2048, 512},   {"r50.b1.l4.1x1dn", 49, 512, 2048},
    {"r50.b8.l1.3x3", 25088, 64, 576},    {"r50.b8.l1.1x1up", 25088, 256, 64},
    {"r50.b8.l2.3x3", 6272, 128, 1152},   {"r50.b8.l3.3x3", 1568, 256, 2304},
    {"r50.b8.l3.1x1up", 1568, 1024, 256}, {"r50.b8.l4.3x3", 392, 512, 4608},
    {"r50.b8.l4.1x1dn", 392, 512, 2048},
};

enum { IMPL_FT, IMPL_FT_NOPACK, IMPL_OPENBLAS, IMPL_COUNT };
static const char *impl_names[IMPL_COUNT] = {"ft", "ft-nopack", "openblas"};

typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);
static cblas_sgemm_fn cblas_sgemm_p;

/* one shape's operands and its two linear nodes (prepacked and not) */
typedef struct job {
    const shape *s;
    float *x, *w, *yb;
    ft_tensor *node, *node_nopack;
    double *wall[IMPL_COUNT], *cpu[IMPL_COUNT];
    int nsamp[IMPL_COUNT];
} job;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run_once(ft_ctx *ctx, job *j, int impl) {
    const shape *s = j->s;
    switch (impl) {
    case IMPL_FT: return ft_cpu_linear(ctx, j->node);
    case IMPL_FT_NOPACK: return ft_cpu_linear(ctx, j->node_nopack);
    default:
        /* CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112 */
        cblas_sgemm_p(101, 111, 112, (int)s->m, (int)s->n, (int)s->k, 1.0f, j->x, (int)s->k, j->w,
                      (int)s->k, 0.0f, j->yb, (int)s->n);
        return 0;
    }
}

int main(int argc, char **argv) {
    int threads = 1, rounds = 5, iters = 5;
    const char *set = "all", *impls = "ft,ft-nopack,openblas", *blas = "libopenblas.so.0", *only = NULL;
    bool list_only = false;
    const char *kernel = NULL, *blocking = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) list_only = true;
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--set")) set = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--impl")) impls = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--openblas")) blas = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--only")) only = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--kernel")) kernel = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--blocking")) blocking = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--threads N] [--rounds R] [--iters N] [--set bert|resnet|all]\n"
                    "          [--impl ft,ft-nopack,openblas] [--openblas LIB] [--only NAME] [--list]\n"
                    "          [--kernel 6x16|8x32] [--blocking KC,MC]\n",
                    argv[0]);
            return 2;
        }
    }
    if (threads < 1 || rounds < 1 || iters < 1) {
        fprintf(stderr, "gemm_shapes: --threads, --rounds and --iters must be positive\n");
        return 2;
    }
    const shape *list[64];
    int ns = 0;
    bool all = !strcmp(set, "all");
    if (all || !strcmp(set, "bert"))
        for (size_t i = 0; i < sizeof bert / sizeof bert[0]; i++) list[ns++] = &bert[i];
    if (all || !strcmp(set, "resnet"))
        for (size_t i = 0; i < sizeof resnet / sizeof resnet[0]; i++) list[ns++] = &resnet[i];
    if (list_only) {
        /* name M N K per line (bench/gemm_peers.py builds ONNX Runtime's models from it) */
        for (int i = 0; i < ns; i++)
            if (!only || strstr(list[i]->name, only))
                printf("%s %lld %lld %lld\n", list[i]->name, (long long)list[i]->m,
                       (long long)list[i]->n, (long long)list[i]->k);
        return 0;
    }
    if (kernel || blocking) {
        /* the test hook: another micro-kernel or blocking, before anything packs */
        long long kc = 0, mc = 0;
        if ((blocking && sscanf(blocking, "%lld,%lld", &kc, &mc) < 1) ||
            !ft_cpu_gemm_kern_select(kernel, kc, mc)) {
            fprintf(stderr, "gemm_shapes: kernel %s / blocking %s not available here\n", kernel ? kernel : "-",
                    blocking ? blocking : "-");
            return 2;
        }
    }
    bool use[IMPL_COUNT] = {0};
    for (int i = 0; i < IMPL_COUNT; i++) {
        const char *p = strstr(impls, impl_names[i]);
        /* "ft" must not match inside "ft-nopack" alone */
        while (p && ((p != impls && p[-1] != ',') ||
                     (p[strlen(impl_names[i])] != ',' && p[strlen(impl_names[i])] != '\0')))
            p = strstr(p + 1, impl_names[i]);
        use[i] = p != NULL;
    }
    if (use[IMPL_OPENBLAS]) {
        void *h = dlopen(blas, RTLD_NOW | RTLD_LOCAL);
        void (*set_threads)(int) = h ? (void (*)(int))dlsym(h, "openblas_set_num_threads") : NULL;
        char *(*corename)(void) = h ? (char *(*)(void))dlsym(h, "openblas_get_corename") : NULL;
        cblas_sgemm_p = h ? (cblas_sgemm_fn)dlsym(h, "cblas_sgemm") : NULL;
        if (!cblas_sgemm_p) {
            printf("# openblas: %s not loadable (%s): skipped\n", blas, dlerror());
            use[IMPL_OPENBLAS] = false;
        } else {
            if (set_threads) set_threads(threads);
            printf("# openblas: %s, core %s\n", blas, corename ? corename() : "?");
        }
    }

    ft_ctx_options o = ft_ctx_options_default();
    o.device = FT_DEVICE_CPU;
    o.cpu_threads = threads;
    ft_ctx *ctx = NULL;
    if (ft_ctx_create_ex(&o, &ctx) != FT_OK) {
        fprintf(stderr, "gemm_shapes: cannot create a CPU context\n");
        return 1;
    }
    job *jobs = calloc((size_t)ns, sizeof *jobs);
    int nj = 0, failed = 0;
    for (int i = 0; i < ns; i++) {
        if (only && !strstr(list[i]->name, only)) continue;
        job *j = &jobs[nj];
        const shape *s = list[i];
        j->s = s;
        j->x = bench_filled(s->m * s->k, 1);
        j->w = bench_filled(s->n * s->k, 2);
        j->yb = bench_filled(s->m * s->n, 3);
        int64_t xs[2] = {s->m, s->k}, ws[2] = {s->n, s->k};
        ft_tensor *src[4] = {ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, xs, j->x),
                             ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, ws, j->w), NULL, NULL};
        ft_params_linear p = {FT_ACT_NONE, 1.0f};
        if (src[0] && src[1]) {
            j->node_nopack = ft_dispatch(ctx, FT_OP_LINEAR, src, 4, &p, sizeof p);
            src[1]->flags |= FT_TF_WEIGHT;
            j->node = ft_dispatch(ctx, FT_OP_LINEAR, src, 4, &p, sizeof p);
        }
        if (!j->node || !j->node_nopack || ft_cpu_prepack(ctx, j->node) != FT_OK || !j->node->extra) {
            fprintf(stderr, "gemm_shapes: %s: setup failed (%s)\n", s->name, ft_ctx_errmsg(ctx));
            return 1;
        }
        for (int m = 0; m < IMPL_COUNT; m++) {
            j->wall[m] = calloc((size_t)(rounds * iters), sizeof(double));
            j->cpu[m] = calloc((size_t)(rounds * iters), sizeof(double));
        }
        nj++;
    }
    printf("# %d threads, %d rounds x %d calls; ms per call; CPU = the OpenMP team's CPU time\n",
           threads, rounds, iters);
    for (int r = 0; r < rounds + 1; r++) /* round 0 warms up */
        for (int i = 0; i < nj; i++)
            for (int m = 0; m < IMPL_COUNT; m++) {
                if (!use[m]) continue;
                job *j = &jobs[i];
                for (int it = 0; it < (r ? iters : 1); it++) {
                    double c0 = bench_team_cpu_ms(threads), w0 = bench_now_ms(CLOCK_MONOTONIC);
                    if (run_once(ctx, j, m) != FT_OK) {
                        fprintf(stderr, "gemm_shapes: %s %s failed: %s\n", j->s->name,
                                impl_names[m], ft_ctx_errmsg(ctx));
                        return 1;
                    }
                    double w1 = bench_now_ms(CLOCK_MONOTONIC), c1 = bench_team_cpu_ms(threads);
                    if (r) {
                        j->wall[m][j->nsamp[m]] = w1 - w0;
                        j->cpu[m][j->nsamp[m]++] = c1 - c0;
                    }
                }
            }
    printf("%-18s %6s %6s %6s %-10s %10s %10s %10s %9s %9s\n", "shape", "M", "N", "K", "impl",
           "best_ms", "median_ms", "cpu_ms", "GF/s", "GF/cpu-s");
    for (int i = 0; i < nj; i++)
        for (int m = 0; m < IMPL_COUNT; m++) {
            job *j = &jobs[i];
            int n = j->nsamp[m];
            if (!use[m] || n == 0) continue;
            qsort(j->wall[m], (size_t)n, sizeof(double), cmp_d);
            qsort(j->cpu[m], (size_t)n, sizeof(double), cmp_d);
            double gf = 2.0 * (double)j->s->m * (double)j->s->n * (double)j->s->k * 1e-9;
            printf("%-18s %6lld %6lld %6lld %-10s %10.3f %10.3f %10.3f %9.1f %9.1f\n", j->s->name,
                   (long long)j->s->m, (long long)j->s->n, (long long)j->s->k, impl_names[m],
                   j->wall[m][0], j->wall[m][n / 2], j->cpu[m][0], gf / (j->wall[m][0] * 1e-3),
                   gf / (j->cpu[m][0] * 1e-3));
        }
    for (int i = 0; i < nj; i++) {
        ft_cpu_unpack(jobs[i].node);
        free(jobs[i].x);
        free(jobs[i].w);
        free(jobs[i].yb);
        for (int m = 0; m < IMPL_COUNT; m++) {
            free(jobs[i].wall[m]);
            free(jobs[i].cpu[m]);
        }
    }
    free(jobs);
    ft_ctx_free(ctx);
    return failed;
}

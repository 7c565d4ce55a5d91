/*
 * cpu_forward.c - a model's forward on the CPU timed two ways, for a busy
 * shared host: the wall clock and the CPU time of the OpenMP team (each thread
 * reads its own clock in a parallel region before and after the forward; libgomp
 * keeps the same pool threads, so the difference is what the team spent in the
 * forward, spinning included, sleeping not). At one thread the CPU time is the
 * forward's cost however loaded the host is; the wall clock is not.
 *
 *   build/bench/cpu_forward MODEL [--mode eager|graph|static] [--batch B] [--seq S]
 *                           [--threads N] [--iters N] [--warmup N]
 *
 * Prints one line: model mode batch threads, min and median wall ms, min and
 * median CPU ms per forward.
 */
#include "ftengine.h"
#include "bench_clock.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *model = NULL, *mode_s = "graph";
    long long batch = 1, seq = 0;
    int threads = 1, iters = 10, warmup = 3;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--mode")) mode_s = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--batch")) batch = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--seq")) seq = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--warmup")) warmup = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !model) model = argv[i];
        else {
            model = NULL;
            break;
        }
    }
    ft_mode mode = !strcmp(mode_s, "eager") ? FT_MODE_EAGER : !strcmp(mode_s, "static") ? FT_MODE_STATIC : FT_MODE_GRAPH;
    if (!model || batch < 1 || threads < 1 || threads > 64 || iters < 1 || warmup < 0) {
        fprintf(stderr, "usage: %s MODEL [--mode eager|graph|static] [--batch B] [--seq S] [--threads N] "
                        "[--iters N] [--warmup N]\n", argv[0]);
        return 2;
    }
    ft_ctx_options co = ft_ctx_options_default();
    co.device = FT_DEVICE_CPU;
    co.cpu_threads = threads;
    ft_ctx *ctx = NULL;
    ft_model *m = NULL;
    if (ft_ctx_create_ex(&co, &ctx) != FT_OK) {
        fprintf(stderr, "cpu_forward: no CPU context\n");
        return 1;
    }
    ft_model_options mo = ft_model_options_default();
    mo.mode = mode;
    ft_host_tensor in[8];
    int n_in = 0;
    void *owned = NULL;
    double *wall = calloc((size_t)iters, sizeof(double)), *cpu = calloc((size_t)iters, sizeof(double));
    if (!wall || !cpu || ft_model_load(ctx, model, &mo, &m) != FT_OK ||
        ft_model_example_inputs(m, batch, seq, in, &n_in, &owned) != FT_OK) {
        fprintf(stderr, "cpu_forward: %s\n", ft_ctx_errmsg(ctx));
        return 1;
    }
    for (int i = 0; i < warmup + 1; i++)
        if (ft_model_forward(m, in, n_in) != FT_OK) {
            fprintf(stderr, "cpu_forward: %s\n", ft_ctx_errmsg(ctx));
            return 1;
        }
    for (int i = 0; i < iters; i++) {
        double c0 = bench_team_cpu_ms(threads), w0 = bench_now_ms(CLOCK_MONOTONIC);
        if (ft_model_forward(m, in, n_in) != FT_OK) {
            fprintf(stderr, "cpu_forward: %s\n", ft_ctx_errmsg(ctx));
            return 1;
        }
        double w1 = bench_now_ms(CLOCK_MONOTONIC), c1 = bench_team_cpu_ms(threads);
        wall[i] = w1 - w0;
        cpu[i] = c1 - c0;
    }
    qsort(wall, (size_t)iters, sizeof(double), cmp_d);
    qsort(cpu, (size_t)iters, sizeof(double), cmp_d);
    printf("%s %s b%lld t%d: wall ms min %.2f med %.2f  cpu ms min %.2f med %.2f\n", model, mode_s, batch,
           threads, wall[0], wall[iters / 2], cpu[0], cpu[iters / 2]);
    free(owned);
    free(wall);
    free(cpu);
    ft_model_free(m);
    ft_ctx_free(ctx);
    return 0;
}

/*
 * bench_clock.h - clocks and inputs the per-shape and per-model CPU benches
 * share (bench/gemm_shapes.c, conv_shapes.c, cpu_forward.c): a clock in ms,
 * the CPU time of an OpenMP team, and a filled test buffer.
 */
#ifndef FT_BENCH_CLOCK_H
#define FT_BENCH_CLOCK_H

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now_ms(clockid_t clk) {
    struct timespec t;
    clock_gettime(clk, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* CPU time (ms) of the OpenMP team of `threads`, each thread reading its own
 * clock: the threads of a later parallel region of that size are the same
 * (libgomp keeps its pool), so the difference across a call is the CPU time the
 * team spent in it, waiting included while it spins. The process CPU clock is
 * no substitute: it does not see another thread's running time until that
 * thread is descheduled. */
static inline double bench_team_cpu_ms(int threads) {
    double t[64] = {0};
#pragma omp parallel num_threads(threads)
    {
        int i = omp_get_thread_num();
        if (i < 64) t[i] = bench_now_ms(CLOCK_THREAD_CPUTIME_ID);
    }
    double s = 0;
    for (int i = 0; i < threads && i < 64; i++) s += t[i];
    return s;
}

/* n floats in [-0.5, 0.5) from a fixed LCG (reproducible inputs); NULL when out of memory. */
static inline float *bench_filled(int64_t n, uint32_t seed) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; v && i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return v;
}

#endif

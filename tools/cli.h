/*
 * cli.h - what the ftengine tool's commands share (tools/cli.c): option parsing,
 * the one-line error contract, context and model creation, and the timing loop
 * of `bench` and `sweep`.
 */
#ifndef FT_CLI_H
#define FT_CLI_H

#include "ftengine.h"

#include <stdio.h>

typedef struct args {
    const char *model, *inputs, *out;
    ft_device device;
    ft_mode mode;
    ft_dtype dtype;
    int hidden_states, profile, list_presets;
    long long batch, seq;
    int warmup, iters;
    int threads; /* --threads: the context's CPU threads (0: default) */
    const char *trace, *csv; /* profiler outputs */
    int phases;              /* print the profiler's tables */
    double op_cost_us;       /* emulated framework cost per op; < 0: not given */
    const char *modes, *batches; /* sweep: comma-separated lists */
    int paper;               /* timing protocol: 1 the paper's (back to back, mean), 0 synchronized */
    int overhead;            /* sweep: a profiled pass per point for the framework overhead */
    size_t mem_limit;        /* --mem-limit: the context's allocator cap in bytes (0: none) */
} args;

extern const char *ft_cli_usage_text;

/* Prints the message (if any) and the usage text to stderr; returns 2. */
int usage(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Prints "ftengine: error: <message>" as exactly one line; returns 1. */
int fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Parses options shared by the commands; returns 0, or the usage exit code. */
int parse(int argc, char **argv, args *a);
double now_ms(void);
/* Creates the context; the error (no CUDA backend, no device) becomes one line. */
ft_ctx *make_ctx(const args *a, ft_device dev, int *rc);
ft_model *load(ft_ctx *ctx, const args *a, int *rc);

/* Latency of m on `in`, after one untimed first forward (whose time goes to *first_ms)
 * and `warmup` more. Synchronized protocol (paper = 0): each of `iters` forwards is
 * timed alone, forward + device sync, into times[] (sorted on return); the mean goes
 * to *mean_ms. The paper's protocol (paper = 1, Fernandez et al.'s harness): sync,
 * `iters` forwards back to back with no sync between them, sync; *mean_ms is the
 * wall time over iters and times[] is left alone. Returns 0 or fail()'s code. */
int time_forwards(ft_ctx *ctx, ft_model *m, const ft_host_tensor *in, int n_in, int warmup,
                  int iters, int paper, double *times, double *first_ms, double *mean_ms);

/* The commands living outside tools/ftengine.c. */
int cmd_sweep(int argc, char **argv);

#endif /* FT_CLI_H */

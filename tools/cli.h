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
    const char *trace, *csv; /* profiler outputs */
    int phases;              /* print the profiler's tables */
    double op_cost_us;       /* emulated framework cost per op; < 0: not given */
    double step_cost_us;     /* emulated interpreter cost per graph-mode step; < 0: not given */
    const char *op_costs, *step_costs; /* the same as given: sweep takes a comma-separated list */
    int n_op_costs, n_step_costs;      /* values in them (bench and run take one) */
    const char *models;      /* sweep --models: comma-separated MODEL or MODEL@LENGTH */
    int rounds;              /* sweep --rounds: every point once per round (0: the default) */
    unsigned long long seed; /* sweep --seed: the rounds' visiting order */
    int seed_given;
    const char *modes, *batches; /* sweep: comma-separated lists */
    int paper;               /* timing protocol: 1 the paper's (back to back, mean), 0 synchronized */
    int overhead;            /* sweep: a profiled pass per point for the framework overhead */
    size_t mem_limit;        /* --mem-limit: the context's allocator cap in bytes (0: none) */
    ft_weights weights;      /* load(): FT_WEIGHTS_NONE describes the model only (info) */
    int threads;             /* --threads: CPU threads (ft_ctx_options.cpu_threads); 0: OpenMP's default */
    const char *json;        /* bench/sweep --json: machine-readable summary */
    const char *ops_csv;     /* bench --ops-csv (--csv): one row per op call of the profiled pass */
    int resume;              /* sweep --resume: keep the finished points of the CSV */
} args;

/* tools/help.c: the command and option tables behind --help and usage errors. */
/* Checks argv (after the command name) against the command's options, splits
 * --flag=value, prints --help; returns 0 (argc/argv replaced), -1 after --help
 * (exit 0), or the usage exit code. */
int ft_cli_prepare(const char *cmd, int *argc, char ***argv);
/* `ftengine help [COMMAND]`: prints to stdout; returns the exit code. */
int ft_cli_help(int argc, char **argv);
void ft_cli_print_usage_all(FILE *f);
/* The current command's usage line (every command's before one is known). */
void ft_cli_print_usage_line(FILE *f);
/* A preset or sibling directory name close to path: 1 and the name in buf, or 0. */
int ft_cli_suggest_model(const char *path, char *buf, size_t size);
int ft_cli_edit_distance(const char *a, const char *b);

/* Prints the message (if any) and the command's usage line to stderr; returns 2. */
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
/* Set by a command that handles errors itself (sweep's failed points): fail() then
 * keeps the message in cli_last_error instead of printing it. */
extern int cli_errors_quiet;
extern char cli_last_error[2048];
/* Parses options shared by the commands; returns 0, or the usage exit code. */
int parse(int argc, char **argv, args *a);
/* A comma-separated list option (--modes, --batches): every element parsed, into at
 * most max values. An empty element (",1", "1,,2", "1,"), an unknown or out-of-range
 * one, one given twice or more than max elements is a usage error naming the option
 * and the element (printed); nothing is cut silently. Returns the count, or -1. */
int ft_cli_list_modes(const char *opt, const char *value, int max, ft_mode *out);
int ft_cli_list_ints(const char *opt, const char *value, int max, long long lo, long long hi, long long *out);
double now_ms(void);
/* Creates the context; the error (no CUDA backend, no device) becomes one line. */
ft_ctx *make_ctx(const args *a, ft_device dev, int *rc);
ft_model *load(ft_ctx *ctx, const args *a, int *rc);
/* The input size that ft_model_example_inputs' `length` names, read back from the
 * inputs it made: tokens (text), image side (vision), samples (speech); *unit says which. */
long long input_length(const ft_host_tensor *in, int n_in, const char **unit);

/* Latency of m on `in`, after one untimed first forward (whose time goes to *first_ms)
 * and `warmup` more. Synchronized protocol (paper = 0): each of `iters` forwards is
 * timed alone, forward + device sync, into times[] (in the order run); the mean goes
 * to *mean_ms. The paper's protocol (paper = 1, Fernandez et al.'s harness): sync,
 * `iters` forwards back to back with no sync between them, sync; *mean_ms is the
 * wall time over iters and times[] is left alone. Returns 0 or fail()'s code. */
int time_forwards(ft_ctx *ctx, ft_model *m, const ft_host_tensor *in, int n_in, int warmup,
                  int iters, int paper, double *times, double *first_ms, double *mean_ms);

/* Sorts n doubles ascending in place. */
void ft_cli_sort(double *v, int n);

/* bench's trust in its numbers: p90 above FT_CLI_NOISY_P90 x the median is a noisy
 * host; returns 1 and a one-line warning in buf. */
#define FT_CLI_NOISY_P90 1.5
int ft_cli_noise_warning(double median_ms, double p90_ms, char *buf, size_t size);
/* "observer cost X ms (Y%)", or a caveat instead of a negative cost. */
void ft_cli_observer_cost(double profiled_ms, double plain_ms, char *buf, size_t size);

/* The commands living outside tools/ftengine.c. */
int cmd_sweep(int argc, char **argv);

#endif /* FT_CLI_H */

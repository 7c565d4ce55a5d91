/*
 * sweep.h - what tools/sweep.c (the command and its measuring), tools/sweep_csv.c
 * (its CSV and --resume) and tools/sweep_out.c (the summary table and the JSON)
 * share: the sweep's axes and its samples, one per (point, round).
 */
#ifndef FT_SWEEP_H
#define FT_SWEEP_H

#include "cli.h"
#include "provenance.h"

#define SWEEP_MAX 32

/* A model of the sweep: MODEL or MODEL@LENGTH (--models), or the one MODEL argument. */
typedef struct sweep_entry {
    char name[1024];
    long long seq; /* the length to use; 0: --seq, else the architecture's */
} sweep_entry;

/* An emulated-cost setting: eager's per-op and graph mode's per-step host cost (us);
 * < 0 where the option was not given (the environment's, if any, stays). */
typedef struct sweep_cost {
    double op, step;
} sweep_cost;

/* One point measured in one round: one CSV row. Numbers are NaN / -1 when not measured. */
typedef struct sample {
    int have;             /* measured (or failed) in this run, or kept by --resume */
    int prof;             /* --overhead: the profiled pass is in (1), failed (-1) or still to run (0) */
    int round, order;     /* the round, and the position of the point in that round's order */
    long long length, kernels, params, macs;
    char status[8], error[600], arch[64], date[32];
    double mean, median, min, p90, max, first, overhead_ms, share, profiled_ms, busy_ms, dispatch_ms;
} sample;

typedef struct sweep {
    const args *a;
    prov pv;
    sweep_entry entries[SWEEP_MAX];
    sweep_cost costs[SWEEP_MAX];
    ft_mode modes[SWEEP_MAX];
    long long batches[SWEEP_MAX];
    int n_entries, n_costs, n_modes, n_batches, rounds;
    int n_points;         /* entries x costs x modes x batches */
    sample *s;            /* [n_points][rounds] */
    char *dead;           /* [n_points]: failed in this run, not visited again */
    char *prof_dead;      /* [n_points]: a deferred profiled pass failed, not profiled again */
    int defer;            /* --overhead where profiling loads CUPTI for the rest of the process
                           * (CUDA with CUPTI): every timed visit first, then the profiled
                           * passes, each its own CSV row (SWEEP_ROW_PROFILED) */
} sweep;

/* The CSV's row kinds: a visit (timed forwards, and with --overhead outside deferral
 * its profiled pass), and a deferred profiled pass (protocol "profiled", the overhead
 * columns only). */
enum { SWEEP_ROW_VISIT = 0, SWEEP_ROW_PROFILED = 1 };
#define SWEEP_PROFILED_PROTOCOL "profiled"

/* The point index of (entry e, cost c, mode m, batch b), and back. */
static inline int sweep_point(const sweep *w, int e, int c, int m, int b) {
    return ((e * w->n_costs + c) * w->n_modes + m) * w->n_batches + b;
}
static inline void sweep_axes(const sweep *w, int p, int *e, int *c, int *m, int *b) {
    *b = p % w->n_batches;
    p /= w->n_batches;
    *m = p % w->n_modes;
    p /= w->n_modes;
    *c = p % w->n_costs;
    *e = p / w->n_costs;
}
static inline sample *sweep_sample(const sweep *w, int p, int r) { return &w->s[(size_t)p * w->rounds + r]; }

/* A sample with nothing measured yet (NaN / -1), status ok. */
void sweep_sample_init(sample *s, int round);
/* The table on stdout: its header, a visit's row. */
void sweep_print_header(void);
void sweep_print_row(const sweep *w, int p, const sample *s);

/* tools/sweep_csv.c: starts the CSV (--resume: keeps the reusable rows of the old
 * file, marks their samples, says what it dropped and why; *n_kept the visits' rows
 * kept); 0 or 1. */
int sweep_csv_open(sweep *w, int *n_kept);
/* One (point, round) row of a kind, appended whole (tools/outfiles.c: never a
 * partial row); 0 or 1. */
int sweep_csv_row(const sweep *w, int p, const sample *s, int kind);

/* "2" / "" for a cost not given (the CSV's op_cost_us and step_cost_us). */
void sweep_cost_text(double us, char *buf, size_t n);
/* A point's label for tables and the progress line: "[model ][op 2us ][step 2us ]mode b4". */
void sweep_point_label(const sweep *w, int p, char *buf, size_t n);

/* tools/sweep_out.c: after the rounds, one line per point: the median over rounds of
 * each round's latency, its interval, the lowest forward and the round count. */
void sweep_print_summary(const sweep *w);
/* The JSON summary (schema ftengine-sweep/2), written to tmp (tools/outfiles.c). */
int sweep_write_json(const sweep *w, const char *tmp, int failed);
/* One point's latency over its rounds: the per-round statistic (median, or the mean
 * under --protocol paper), its median, interval and level; returns the rounds used. */
int sweep_point_latency(const sweep *w, int p, double *med, double *lo, double *hi, double *level,
                        double *min_ms);

#endif /* FT_SWEEP_H */

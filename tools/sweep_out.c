/*
 * sweep_out.c - what `ftengine sweep` reports once its rounds are done
 * (tools/sweep.h): a summary line per point, the latency over the rounds with its
 * confidence interval, and the JSON summary with every round of every point.
 *
 * A point's latency is the median, over its rounds, of each round's statistic (the
 * median of the round's timed forwards; under --protocol paper their mean, the only
 * one there is). The interval is the distribution-free one of tools/stats.h over
 * the rounds, the same the report computes (bench/studydata.py).
 */
#include "sweep.h"
#include "outfiles.h"
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int sweep_point_latency(const sweep *w, int p, double *med, double *lo, double *hi, double *level,
                        double *min_ms) {
    double v[1000];
    int n = 0;
    *med = *lo = *hi = *min_ms = NAN;
    *level = 0;
    for (int r = 0; r < w->rounds && n < 1000; r++) {
        const sample *s = sweep_sample(w, p, r);
        double x = w->a->paper ? s->mean : s->median;
        if (!s->have || strcmp(s->status, "ok") || isnan(x)) continue;
        v[n++] = x;
        double m = w->a->paper ? s->mean : s->min;
        if (isnan(*min_ms) || m < *min_ms) *min_ms = m;
    }
    if (!n) return 0;
    ft_cli_sort(v, n);
    *med = ft_stats_median(v, n);
    ft_stats_median_ci(v, n, 0.95, lo, hi, level);
    return n;
}

/* The point's failed row, if it has one. */
static const sample *failed_row(const sweep *w, int p) {
    for (int r = 0; r < w->rounds; r++) {
        const sample *s = sweep_sample(w, p, r);
        if (s->have && strcmp(s->status, "ok")) return s;
    }
    return NULL;
}

void sweep_print_summary(const sweep *w) {
    printf("summary: latency = median over rounds of each round's %s; interval = its confidence interval from "
           "the rounds' order statistics (level shown; none from one round); min = fastest %s\n",
           w->a->paper ? "mean forward (paper protocol)" : "median forward",
           w->a->paper ? "round's mean" : "forward of any round");
    printf("%-40s %6s %11s %23s %6s %10s\n", "point", "rounds", "latency ms", "interval ms", "level", "min ms");
    for (int p = 0; p < w->n_points; p++) {
        char label[300], iv[64] = "-", lv[16] = "-";
        sweep_point_label(w, p, label, sizeof label);
        const sample *bad = failed_row(w, p);
        if (bad) {
            printf("%-40s FAILED (%s): %s\n", label, bad->status, bad->error);
            continue;
        }
        double med, lo, hi, level, mn;
        int n = sweep_point_latency(w, p, &med, &lo, &hi, &level, &mn);
        if (!n) {
            printf("%-40s %6d %11s\n", label, 0, "-");
            continue;
        }
        if (!isnan(lo)) {
            snprintf(iv, sizeof iv, "[%.4f, %.4f]", lo, hi);
            snprintf(lv, sizeof lv, "%.0f%%", 100 * level);
        }
        printf("%-40s %6d %11.4f %23s %6s %10.4f\n", label, n, med, iv, lv, mn);
    }
    fflush(stdout);
}

static void json_ll(FILE *f, long long v) {
    if (v >= 0) fprintf(f, "%lld", v);
    else fputs("null", f);
}

static void json_round(FILE *f, const sample *s) {
    fprintf(f, "{\"round\": %d, \"order\": ", s->round);
    json_ll(f, s->order);
    fputs(", \"date\": ", f);
    json_str(f, s->date);
    const char *k[] = {"mean_ms", "median_ms", "min_ms", "p90_ms", "max_ms", "first_ms", "profiled_ms",
                       "busy_ms", "overhead_ms", "overhead_share", "dispatch_ms"};
    double v[] = {s->mean, s->median, s->min, s->p90, s->max, s->first, s->profiled_ms, s->busy_ms,
                  s->overhead_ms, s->share, s->dispatch_ms};
    for (int i = 0; i < 11; i++) {
        fprintf(f, ", \"%s\": ", k[i]);
        json_num(f, v[i]);
    }
    fputc('}', f);
}

static void json_point(FILE *f, const sweep *w, int p) {
    int e, c, m, b;
    sweep_axes(w, p, &e, &c, &m, &b);
    const sample *any = NULL, *bad = failed_row(w, p);
    for (int r = 0; r < w->rounds && !any; r++)
        if (sweep_sample(w, p, r)->have) any = sweep_sample(w, p, r);
    fputs("    {\"model\": ", f);
    json_str(f, w->entries[e].name);
    fprintf(f, ", \"mode\": \"%s\", \"batch\": %lld, \"op_cost_us\": ", ft_mode_name(w->modes[m]), w->batches[b]);
    json_num(f, w->costs[c].op >= 0 ? w->costs[c].op : NAN);
    fputs(", \"step_cost_us\": ", f);
    json_num(f, w->costs[c].step >= 0 ? w->costs[c].step : NAN);
    fputs(", \"length\": ", f);
    json_ll(f, any ? any->length : -1);
    fputs(", \"arch\": ", f);
    json_str(f, any ? any->arch : "");
    fprintf(f, ", \"status\": \"%s\", \"error\": ", bad ? bad->status : "ok");
    json_str(f, bad ? bad->error : "");
    double med, lo, hi, level, mn;
    sweep_point_latency(w, p, &med, &lo, &hi, &level, &mn);
    const char *k[] = {"latency_ms", "ci_lo_ms", "ci_hi_ms", "ci_level", "min_ms"};
    double v[] = {med, lo, hi, level > 0 ? level : NAN, mn};
    for (int i = 0; i < 5; i++) {
        fprintf(f, ", \"%s\": ", k[i]);
        json_num(f, v[i]);
    }
    const char *ki[] = {"kernels_per_forward", "params", "macs"};
    long long vi[] = {any ? any->kernels : -1, any ? any->params : -1, any ? any->macs : -1};
    for (int i = 0; i < 3; i++) {
        fprintf(f, ", \"%s\": ", ki[i]);
        json_ll(f, vi[i]);
    }
    fputs(",\n     \"rounds\": [", f);
    int first = 1;
    for (int r = 0; r < w->rounds; r++) {
        const sample *s = sweep_sample(w, p, r);
        if (!s->have) continue;
        fputs(first ? "" : ",\n                ", f);
        first = 0;
        json_round(f, s);
    }
    fputs("]}", f);
}

int sweep_write_json(const sweep *w, const char *tmp, int failed) {
    const args *a = w->a;
    char date[32];
    prov_date(date, sizeof date);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len); /* written whole, every write checked (tools/outfiles.c) */
    if (!f) return fail("out of host memory");
    fputs("{\n  \"schema\": \"ftengine-sweep/2\",\n  \"provenance\": {\n", f);
    prov_json(f, &w->pv, date, "    ");
    fputs("\n  },\n  \"config\": {\"models\": [", f);
    for (int e = 0; e < w->n_entries; e++) {
        fputs(e ? ", {\"model\": " : "{\"model\": ", f);
        json_str(f, w->entries[e].name);
        fputs(", \"seq\": ", f);
        json_ll(f, w->entries[e].seq ? w->entries[e].seq : -1);
        fputc('}', f);
    }
    fprintf(f, "], \"device\": \"%s\", \"dtype\": \"%s\", \"protocol\": \"%s\", \"iters\": %d, \"warmup\": %d, "
               "\"rounds\": %d, \"seed\": %llu, \"costs\": [",
            ft_device_name(a->device), ft_dtype_name(a->dtype), a->paper ? "paper" : "sync", a->iters, a->warmup,
            w->rounds, a->seed);
    for (int c = 0; c < w->n_costs; c++) {
        fputs(c ? ", {\"op_cost_us\": " : "{\"op_cost_us\": ", f);
        json_num(f, w->costs[c].op >= 0 ? w->costs[c].op : NAN);
        fputs(", \"step_cost_us\": ", f);
        json_num(f, w->costs[c].step >= 0 ? w->costs[c].step : NAN);
        fputc('}', f);
    }
    fprintf(f, "], \"overhead\": %s, \"mem_limit\": ", a->overhead ? "true" : "false");
    if (a->mem_limit) fprintf(f, "%zu", a->mem_limit);
    else fputs("null", f);
    fprintf(f, ", \"statistic\": \"median over rounds of each round's %s, with an order-statistics confidence "
               "interval over the rounds\"},\n  \"failed\": %d,\n  \"points\": [\n",
            a->paper ? "mean (paper protocol)" : "median forward", failed);
    int first = 1;
    for (int p = 0; p < w->n_points; p++) {
        int have = 0;
        for (int r = 0; r < w->rounds; r++) have |= sweep_sample(w, p, r)->have;
        if (!have) continue;
        if (!first) fputs(",\n", f);
        first = 0;
        json_point(f, w, p);
    }
    fputs("\n  ]\n}\n", f);
    int rc = fclose(f) != 0 ? fail("out of host memory") : outfile_write(tmp, buf, len);
    free(buf);
    return rc;
}

/*
 * provenance.c - see provenance.h. The commit comes from $(BUILD)/gen/ft_commit.h,
 * which the Makefile rewrites only when the commit (or its -dirty state) changes,
 * so a new commit relinks the tool and rebuilds nothing of the library.
 */
#include "provenance.h"
#include "omp_policy.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include("ft_commit.h")
#include "ft_commit.h"
#endif
#endif
#ifndef FT_COMMIT
#define FT_COMMIT "unknown"
#endif

const char *prov_commit(void) { return FT_COMMIT[0] ? FT_COMMIT : "unknown"; }

static void host_cpu(char *buf, size_t size) {
    buf[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            char *c = strchr(line, ':');
            if (!c || (strncmp(line, "model name", 10) && strncmp(line, "Model", 5))) continue;
            c += 1 + strspn(c + 1, " \t");
            c[strcspn(c, "\n")] = 0;
            snprintf(buf, size, "%s", c);
            break;
        }
        fclose(f);
    }
    if (!buf[0]) { /* no model name (some ARM kernels): the machine type at least */
        struct utsname u;
        if (uname(&u) == 0) snprintf(buf, size, "%s", u.machine);
    }
}

void prov_fill(prov *p, ft_ctx *ctx, const args *a) {
    memset(p, 0, sizeof *p);
    ft_build_info b = ft_build_info_get();
    snprintf(p->version, sizeof p->version, "%s", b.version);
    snprintf(p->commit, sizeof p->commit, "%s", prov_commit());
    host_cpu(p->host, sizeof p->host);
    snprintf(p->device_label, sizeof p->device_label, "%s", ctx ? ft_ctx_device_label(ctx) : "");
    if (a->device == FT_DEVICE_CPU) {
        snprintf(p->threads, sizeof p->threads, "%d", a->threads > 0 ? a->threads : omp_get_max_threads());
        /* OpenMP's default team size is OMP_NUM_THREADS when that is set, else the cores */
        const char *env = getenv("OMP_NUM_THREADS");
        snprintf(p->threads_source, sizeof p->threads_source, "%s",
                 a->threads > 0 ? "--threads" : env && *env ? "OMP_NUM_THREADS" : "OpenMP default");
    }
    if (b.cuda)
        snprintf(p->cuda, sizeof p->cuda, "%d.%d", b.cuda_version / 1000, (b.cuda_version % 1000) / 10);
}

void prov_date(char *buf, size_t size) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void prov_print(FILE *f, const prov *p, const char *date) {
    fprintf(f, "provenance: ftengine %s, commit %s, date %s\n", p->version, p->commit, date);
    fprintf(f, "host: %s\n", p->host[0] ? p->host : "unknown CPU");
    if (p->threads[0]) {
        char w[96];
        fprintf(f, "threads: %s (%s); OpenMP wait: %s\n", p->threads, p->threads_source,
                ft_tool_omp_wait(w, sizeof w));
    }
    fprintf(f, "build: CUDA %s\n", p->cuda[0] ? p->cuda : "none (CPU-only build)");
}

void prov_json(FILE *f, const prov *p, const char *date, const char *ind) {
    const char *k[] = {"ftengine_version", "commit", "date", "host", "device_label", "threads",
                       "threads_source", "cuda_version"};
    const char *v[] = {p->version, p->commit, date, p->host, p->device_label, p->threads,
                       p->threads_source, p->cuda};
    for (int i = 0; i < 8; i++) {
        fprintf(f, "%s%s\"%s\": ", i ? ",\n" : "", ind, k[i]);
        json_str(f, v[i]);
    }
}

void csv_field(FILE *f, const char *s) {
    if (!s) return;
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

void csv_num(FILE *f, double v) {
    if (!isnan(v)) fprintf(f, "%.6f", v);
}

int csv_split(char *line, char **fields, int max) {
    int n = 0;
    char *r = line;
    line[strcspn(line, "\r\n")] = 0;
    while (n < max) {
        char *w = r, *start = r;
        if (*r == '"') { /* quoted: "" is a quote, the field ends at the closing quote */
            r++;
            start = w = r;
            while (*r) {
                if (*r == '"' && r[1] == '"') { *w++ = '"'; r += 2; }
                else if (*r == '"') { r++; break; }
                else *w++ = *r++;
            }
            while (*r && *r != ',') r++;
        } else {
            while (*r && *r != ',') r++;
            w = r;
        }
        char end = *r;
        *w = 0;
        fields[n++] = start;
        if (end != ',') break;
        r++;
    }
    return n;
}

void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

void json_num(FILE *f, double v) {
    if (isnan(v) || isinf(v)) fputs("null", f);
    else fprintf(f, "%.6g", v);
}

void progress_begin(progress *p, const char *what, int n) {
    memset(p, 0, sizeof *p);
    p->what = what;
    p->n = n;
    p->tty = isatty(2);
    p->t0 = now_ms();
}

void progress_step(progress *p, int measured, const char *label) {
    p->done++;
    p->measured += measured;
    double el = (now_ms() - p->t0) / 1e3;
    char left[48] = "";
    if (p->measured > 0 && p->done < p->n)
        snprintf(left, sizeof left, ", about %.0f s left", el / p->measured * (p->n - p->done));
    fprintf(stderr, "%s%s: point %d of %d (%s), %.1f s elapsed%s%s", p->tty ? "\r\033[K" : "", p->what,
            p->done, p->n, label, el, left, p->tty ? "" : "\n");
    p->shown = p->tty;
    fflush(stderr);
}

void progress_clear(progress *p) {
    if (p->shown) fputs("\r\033[K", stderr);
    p->shown = 0;
}

void progress_end(progress *p) {
    if (p->shown) fputc('\n', stderr);
    p->shown = 0;
}

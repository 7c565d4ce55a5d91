/*
 * provenance.h - where a measurement came from (tools/provenance.c): the
 * version, commit, date, host CPU, device, threads and CUDA build that every
 * `bench` header, `sweep` CSV row and JSON summary carries; plus the small
 * CSV/JSON writers and the progress line the long-running commands share.
 */
#ifndef FT_PROVENANCE_H
#define FT_PROVENANCE_H

#include "cli.h"

#include <stdio.h>

/* Every field is text; "" is "does not apply here" (never -1). */
typedef struct prov {
    char version[32];       /* FT_VERSION_STRING */
    char commit[64];        /* short hash, "-dirty" when built from a changed tree, "unknown" outside git */
    char host[160];         /* host CPU model */
    char device_label[256]; /* ft_ctx_device_label */
    char threads[16];       /* CPU threads of a CPU run; "" on CUDA */
    char threads_source[24]; /* "--threads", "OMP_NUM_THREADS" or "OpenMP default" (the cores); "" on CUDA */
    char cuda[16];          /* the build's CUDA runtime version ("13.0"), "" without CUDA */
} prov;

/* The commit the tool was built from (baked in by the Makefile). */
const char *prov_commit(void);
void prov_fill(prov *p, ft_ctx *ctx, const args *a);
/* Now as UTC ISO 8601 ("2026-11-25T14:05:09Z"). */
void prov_date(char *buf, size_t size);
/* "provenance: ..." lines of a text header. */
void prov_print(FILE *f, const prov *p, const char *date);
/* The provenance object's members in JSON ("\"commit\": ..., ..."), no braces. */
void prov_json(FILE *f, const prov *p, const char *date, const char *indent);

/* One CSV field, quoted (RFC 4180) when it holds a comma, quote or newline. */
void csv_field(FILE *f, const char *s);
/* A number with 6 decimals, or nothing when it is NaN (not measured). */
void csv_num(FILE *f, double v);
/* Splits one CSV line (quoted fields allowed, no embedded newlines) in place;
 * returns the number of fields (at most max). */
int csv_split(char *line, char **fields, int max);

void json_str(FILE *f, const char *s);
void json_num(FILE *f, double v); /* NaN -> null */

/* The progress line on stderr: "\r"-updated on a terminal, one line per step otherwise. */
typedef struct progress {
    const char *what;
    int n, done, measured, tty, shown;
    double t0;
} progress;
void progress_begin(progress *p, const char *what, int n);
/* Step k (1-based) of n has finished; `measured` steps took time (resumed ones did not). */
void progress_step(progress *p, int measured, const char *label);
/* Ends a "\r" line so that other output can follow. */
void progress_clear(progress *p);
void progress_end(progress *p);

#endif /* FT_PROVENANCE_H */

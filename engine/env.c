/*
 * env.c - the table of the library's environment variables (see env.h) and
 * their parsers. A knob that is set must hold a value its row accepts: the
 * empty string, a fraction where an integer belongs, inf or NaN, a value out of
 * range or a word a switch does not know are all errors, found when a context
 * is created. The ranges are those of the options the knobs mirror
 * (FT_OP_HOST_COST_US: ft_ctx_set_op_host_cost and --op-cost-us).
 */
#include "env.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { ENV_FLAG, ENV_NUM, ENV_INT, ENV_CHOICE, ENV_LIST } env_kind;

typedef struct env_row {
    const char *name;
    env_kind kind;
    double lo, hi;       /* ENV_NUM, ENV_INT: the accepted range */
    const char *words;   /* ENV_CHOICE, ENV_LIST: the accepted words, space-separated */
    const char *what;    /* how the message describes a valid value */
} env_row;

/* One row per knob, in ft_env_id order. Adding one: a row here, its id in env.h,
 * its line in docs/architecture.md; read it with ft_env_flag/num/str. */
static const env_row rows[FT_ENV_COUNT] = {
    {"FT_SYNC_DEBUG", ENV_FLAG, 0, 1, NULL, "0 or 1"},
    {"FT_NVTX", ENV_FLAG, 0, 1, NULL, "0 or 1"},
    {"FT_OP_HOST_COST_US", ENV_NUM, 0, 1e6, NULL, "a number of microseconds in [0, 1e6]"},
    {"FT_STEP_HOST_COST_US", ENV_NUM, 0, 1e6, NULL, "a number of microseconds in [0, 1e6]"},
    {"FT_CPU_PACK_CACHE_MB", ENV_INT, 0, 1048576, NULL, "an integer number of MiB in [0, 1048576]"},
    {"FT_DISABLE_FUSION", ENV_FLAG, 0, 1, NULL, "0 or 1"},
    {"FT_DISABLE_PASSES", ENV_LIST, 0, 0, NULL /* the graph's own list */, "a comma-separated list of pass names"},
    {"FT_DISABLE_CUDA_GRAPHS", ENV_FLAG, 0, 1, NULL, "0 or 1"},
    {"FT_GEMM_AUTOTUNE", ENV_FLAG, 0, 1, NULL, "0 or 1"},
    {"FT_DISABLE_PDL", ENV_FLAG, 0, 1, NULL, "0 or 1"},
    {"FT_ALLOW_TF32", ENV_FLAG, 0, 1, NULL, "0 or 1"},
    {"FT_FAST_GELU", ENV_FLAG, 0, 1, NULL, "0 or 1"},
    {"FT_ATTN_KERNEL", ENV_CHOICE, 0, 0, "v1 v2", "v1 or v2"},
    {"FT_CUPTI_SESSION", ENV_CHOICE, 0, 0, "process window", "process or window"},
    {"FT_CPU_WINOGRAD", ENV_FLAG, 0, 1, NULL, "0 or 1"},
};

const char *ft_env_name(ft_env_id id) { return (unsigned)id < FT_ENV_COUNT ? rows[id].name : "?"; }

/* The words a choice or list row accepts; FT_DISABLE_PASSES takes the passes graph/graph.c has. */
static const char *row_words(const env_row *r) {
    return r->words ? r->words : r->kind == ENV_LIST ? ft_graph_pass_names() : "";
}

/* Whether the n bytes at w are one of the space-separated words. */
static bool is_word(const char *words, const char *w, size_t n) {
    for (const char *p = words; *p;) {
        size_t len = strcspn(p, " ");
        if (len == n && !strncmp(p, w, n)) return true;
        p += len + (p[len] == ' ');
    }
    return false;
}

/* Parses v by its row: true and *num set, or false with the reason in why. */
static bool parse(const env_row *r, const char *v, double *num, const char **why) {
    *why = NULL;
    if (!*v) {
        *why = "set but empty";
        return false;
    }
    switch (r->kind) {
    case ENV_FLAG:
        if (strcmp(v, "0") && strcmp(v, "1")) return false;
        *num = v[0] == '1';
        return true;
    case ENV_NUM:
    case ENV_INT: {
        /* strtod takes leading blanks, hex, "inf" and "nan": only the plain forms pass */
        if (!strchr("0123456789+-.", v[0]) || strpbrk(v, "xXnNiI")) return false;
        if (r->kind == ENV_INT && v[strspn(v, "0123456789")]) return false;
        char *end = NULL;
        errno = 0;
        double x = strtod(v, &end);
        if (*end || errno == ERANGE || !isfinite(x) || x < r->lo || x > r->hi) return false;
        *num = x;
        return true;
    }
    case ENV_CHOICE:
        return is_word(row_words(r), v, strlen(v));
    case ENV_LIST:
        for (const char *p = v;;) {
            size_t len = strcspn(p, ",");
            if (!len) {
                *why = "has an empty element";
                return false;
            }
            if (!is_word(row_words(r), p, len)) return false;
            if (!p[len]) break;
            p += len + 1;
        }
        return true;
    }
    return false;
}

ft_status ft_env_check(char *err, size_t size) {
    for (int i = 0; i < FT_ENV_COUNT; i++) {
        const char *v = getenv(rows[i].name);
        double x;
        const char *why;
        if (!v || parse(&rows[i], v, &x, &why)) continue;
        if (err && size) {
            if (rows[i].kind == ENV_CHOICE || rows[i].kind == ENV_LIST)
                snprintf(err, size, "environment variable %s='%.64s' %s: must be %s (%s)", rows[i].name, v,
                         why ? why : "is not valid", rows[i].what, row_words(&rows[i]));
            else
                snprintf(err, size, "environment variable %s='%.64s' %s: must be %s", rows[i].name, v,
                         why ? why : "is not valid", rows[i].what);
        }
        return FT_ERR_INVALID_ARG;
    }
    return FT_OK;
}

static const char *valid_value(ft_env_id id, double *x) {
    if ((unsigned)id >= FT_ENV_COUNT) return NULL;
    const char *v = getenv(rows[id].name), *why;
    return v && parse(&rows[id], v, x, &why) ? v : NULL;
}

bool ft_env_flag(ft_env_id id, bool def) {
    double x = 0;
    return valid_value(id, &x) ? x != 0 : def;
}

double ft_env_num(ft_env_id id, double def) {
    double x = 0;
    return valid_value(id, &x) ? x : def;
}

const char *ft_env_raw(ft_env_id id) { return (unsigned)id < FT_ENV_COUNT ? getenv(rows[id].name) : NULL; }

const char *ft_env_str(ft_env_id id) {
    double x;
    return valid_value(id, &x);
}

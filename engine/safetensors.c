/*
 * safetensors.c - strict, memory-mapped safetensors reader and a writer.
 *
 * The reader validates the whole header before handing out a single tensor,
 * so code that uses ft_st_tensor never needs its own bounds checks: every
 * tensor's bytes lie inside the mapping, match dtype x shape, and overlap no
 * other tensor. Unused gaps between tensors are tolerated (other writers pad
 * for alignment). Every message names the file, and the tensor when there is
 * one. The format is little-endian, as is every host this engine targets.
 */
#include "safetensors.h"
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference implementation refuses larger headers; so do we, so that a
 * corrupt length cannot make us parse hundreds of megabytes of garbage. */
#define FT_ST_MAX_HEADER 100000000ull

struct ft_st_file {
    char *path;
    void *map;
    size_t map_size;
    const unsigned char *data; /* first byte after the header */
    size_t data_size;
    ft_json *header;         /* owns the tensor names */
    const ft_json *metadata; /* "__metadata__" object, or NULL */
    bool lenient;            /* tensors of whole-byte unsupported dtypes are listed, not refused */
    const char **unsupported; /* [members]: their dtype names (lenient only), else NULL */
    int n;
    ft_st_tensor *tensors; /* [n] in header order */
    int *slots;            /* [n_slots] hash of names -> index + 1 (0 = empty) */
    size_t n_slots;
};

static const struct {
    const char *name;
    ft_dtype dtype;
} st_dtypes[] = {
    {"F32", FT_DTYPE_F32}, {"F16", FT_DTYPE_F16}, {"BF16", FT_DTYPE_BF16},
    {"I64", FT_DTYPE_I64}, {"I32", FT_DTYPE_I32},
};

/* Valid safetensors dtypes this engine does not handle, with their bits per
 * element: reported as unsupported rather than as a corrupt file, or, in a
 * lenient open, listed as FT_DTYPE_COUNT tensors that nothing can read. */
static const struct {
    const char *name;
    int bits;
} st_known_unsupported[] = {
    {"F64", 64},    {"BOOL", 8},    {"U8", 8},      {"I8", 8},      {"U16", 16},
    {"I16", 16},    {"U32", 32},    {"U64", 64},    {"F8_E4M3", 8}, {"F8_E5M2", 8},
    {"F8_E8M0", 8}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"F4", 4},      {"C64", 64},
};

static const char *st_dtype_name(ft_dtype t) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].dtype == t) return st_dtypes[i].name;
    return NULL;
}

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Inserts tensor i into the index; returns the index of an earlier tensor with
 * the same name, or -1. */
static int index_insert(ft_st_file *f, int i) {
    size_t mask = f->n_slots - 1;
    for (size_t s = (size_t)name_hash(f->tensors[i].name) & mask;; s = (s + 1) & mask) {
        if (!f->slots[s]) {
            f->slots[s] = i + 1;
            return -1;
        }
        int j = f->slots[s] - 1;
        if (!strcmp(f->tensors[j].name, f->tensors[i].name)) return j;
    }
}

const ft_st_tensor *ft_st_find(const ft_st_file *f, const char *name) {
    if (!f || !name || !f->n_slots) return NULL;
    size_t mask = f->n_slots - 1;
    for (size_t s = (size_t)name_hash(name) & mask; f->slots[s]; s = (s + 1) & mask) {
        const ft_st_tensor *t = &f->tensors[f->slots[s] - 1];
        if (!strcmp(t->name, name)) return t;
    }
    return NULL;
}

void ft_st_close(ft_st_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->map_size);
    ft_json_free(f->header);
    free(f->tensors);
    free(f->unsupported);
    free(f->slots);
    free(f->path);
    free(f);
}

const char *ft_st_path(const ft_st_file *f) {
    return f ? f->path : NULL;
}
const char *ft_st_unsupported_dtype(const ft_st_file *f, const ft_st_tensor *t) {
    if (!f || !f->unsupported || !t || t < f->tensors || t >= f->tensors + f->n) return NULL;
    return f->unsupported[t - f->tensors];
}

int ft_st_count(const ft_st_file *f) {
    return f ? f->n : 0;
}
const ft_st_tensor *ft_st_get(const ft_st_file *f, int i) {
    return f && i >= 0 && i < f->n ? &f->tensors[i] : NULL;
}

const char *ft_st_metadata(const ft_st_file *f, const char *key) {
    return f ? ft_json_string(ft_json_get(f->metadata, key)) : NULL;
}

/* ---- header validation ---- */

static ft_status st_check_metadata(ft_ctx *ctx, ft_st_file *f, const ft_json *m) {
    if (ft_json_type_of(m) != FT_JSON_OBJECT)
        return ft_set_error(ctx, FT_ERR_FORMAT,
                            "%s: __metadata__ must be an object of strings, got %s", f->path,
                            ft_json_type_name(ft_json_type_of(m)));
    for (int i = 0; i < ft_json_len(m); i++)
        if (ft_json_type_of(ft_json_at(m, i)) != FT_JSON_STRING)
            return ft_set_error(
                ctx, FT_ERR_FORMAT, "%s: __metadata__ value '%s' must be a string, got %s", f->path,
                ft_json_key_at(m, i), ft_json_type_name(ft_json_type_of(ft_json_at(m, i))));
    f->metadata = m;
    return FT_OK;
}

static ft_status st_parse_dtype(ft_ctx *ctx, const ft_st_file *f, const char *name,
                                const ft_json *d, ft_dtype *out, size_t *esize, const char **unsupported) {
    *unsupported = NULL;
    if (!d)
        return ft_set_error(ctx, FT_ERR_FORMAT, "%s: tensor '%s': missing 'dtype'", f->path, name);
    const char *s = ft_json_string(d);
    if (!s)
        return ft_set_error(ctx, FT_ERR_FORMAT, "%s: tensor '%s': 'dtype' must be a string, got %s",
                            f->path, name, ft_json_type_name(ft_json_type_of(d)));
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(s, st_dtypes[i].name)) {
            *out = st_dtypes[i].dtype;
            *esize = ft_dtype_size(*out);
            return FT_OK;
        }
    for (size_t i = 0; i < sizeof st_known_unsupported / sizeof st_known_unsupported[0]; i++) {
        if (strcmp(s, st_known_unsupported[i].name)) continue;
        if (f->lenient && st_known_unsupported[i].bits % 8 == 0) {
            *out = FT_DTYPE_COUNT;
            *esize = (size_t)st_known_unsupported[i].bits / 8;
            *unsupported = st_known_unsupported[i].name;
            return FT_OK;
        }
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED,
                            "%s: tensor '%s': dtype %s is not supported (supported: F32, F16, BF16, I64, I32)",
                            f->path, name, s);
    }
    return ft_set_error(ctx, FT_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'", f->path, name,
                        s);
}

static ft_status st_parse_shape(ft_ctx *ctx, const ft_st_file *f, ft_st_tensor *t, const ft_json *s,
                                uint64_t *numel) {
    const char *name = t->name;
    if (!s)
        return ft_set_error(ctx, FT_ERR_FORMAT, "%s: tensor '%s': missing 'shape'", f->path, name);
    if (ft_json_type_of(s) != FT_JSON_ARRAY)
        return ft_set_error(ctx, FT_ERR_FORMAT, "%s: tensor '%s': 'shape' must be an array, got %s",
                            f->path, name, ft_json_type_name(ft_json_type_of(s)));
    int nd = ft_json_len(s);
    if (nd > FT_MAX_DIMS)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED,
                            "%s: tensor '%s': %d dimensions, at most %d are supported", f->path,
                            name, nd, FT_MAX_DIMS);
    uint64_t n = 1;
    bool overflow = false;
    for (int d = 0; d < nd; d++) {
        const ft_json *e = ft_json_at(s, d);
        if (!ft_json_is_integer(e) || ft_json_int(e) < 0) {
            char got[64];
            if (ft_json_type_of(e) == FT_JSON_NUMBER)
                snprintf(got, sizeof got, "%.17g", ft_json_number(e));
            else
                snprintf(got, sizeof got, "%s", ft_json_type_name(ft_json_type_of(e)));
            return ft_set_error(ctx, FT_ERR_FORMAT,
                                "%s: tensor '%s': shape[%d] must be a non-negative integer, got %s",
                                f->path, name, d, got);
        }
        uint64_t v = (uint64_t)ft_json_int(e);
        if (v && n > UINT64_MAX / v)
            overflow = true;
        else
            n *= v;
        t->shape[d] = (int64_t)v;
    }
    /* a zero dimension makes the tensor empty whatever the others say */
    for (int d = 0; d < nd; d++)
        if (t->shape[d] == 0) {
            overflow = false;
            n = 0;
        }
    if (overflow || n > (uint64_t)INT64_MAX / 8)
        return ft_set_error(ctx, FT_ERR_FORMAT, "%s: tensor '%s': shape has too many elements",
                            f->path, name);
    t->ndim = nd;
    *numel = n;
    return FT_OK;
}

static ft_status st_parse_offsets(ft_ctx *ctx, const ft_st_file *f, const char *name,
                                  const ft_json *o, uint64_t *begin, uint64_t *end) {
    if (!o)
        return ft_set_error(ctx, FT_ERR_FORMAT, "%s: tensor '%s': missing 'data_offsets'", f->path,
                            name);
    if (ft_json_type_of(o) != FT_JSON_ARRAY || ft_json_len(o) != 2)
        return ft_set_error(
            ctx, FT_ERR_FORMAT,
            "%s: tensor '%s': 'data_offsets' must be an array [begin, end], got %s", f->path, name,
            ft_json_type_of(o) == FT_JSON_ARRAY ? "an array of another length"
                                                : ft_json_type_name(ft_json_type_of(o)));
    for (int k = 0; k < 2; k++) {
        const ft_json *e = ft_json_at(o, k);
        if (!ft_json_is_integer(e) || ft_json_int(e) < 0)
            return ft_set_error(ctx, FT_ERR_FORMAT,
                                "%s: tensor '%s': data_offsets[%d] must be a non-negative integer",
                                f->path, name, k);
    }
    *begin = (uint64_t)ft_json_int(ft_json_at(o, 0));
    *end = (uint64_t)ft_json_int(ft_json_at(o, 1));
    if (*begin > *end)
        return ft_set_error(ctx, FT_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets [%llu, %llu] begin after end", f->path,
                            name, (unsigned long long)*begin, (unsigned long long)*end);
    if (*end > f->data_size)
        return ft_set_error(
            ctx, FT_ERR_FORMAT,
            "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the data (%zu bytes; "
            "truncated file?)",
            f->path, name, (unsigned long long)*begin, (unsigned long long)*end, f->data_size);
    return FT_OK;
}

typedef struct st_span {
    uint64_t begin, end;
    int idx;
} st_span;

static int span_cmp(const void *a, const void *b) {
    const st_span *x = (const st_span *)a, *y = (const st_span *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->idx - y->idx;
}

/* Builds f->tensors from the parsed header and checks every tensor. */
static ft_status st_build(ft_ctx *ctx, ft_st_file *f) {
    const ft_json *h = f->header;
    if (ft_json_type_of(h) != FT_JSON_OBJECT)
        return ft_set_error(ctx, FT_ERR_FORMAT, "%s: the header must be a JSON object, got %s",
                            f->path, ft_json_type_name(ft_json_type_of(h)));
    int members = ft_json_len(h), n = 0;
    f->tensors = (ft_st_tensor *)calloc((size_t)(members ? members : 1), sizeof *f->tensors);
    f->n_slots = 8;
    while (f->n_slots < 2 * (size_t)members)
        f->n_slots *= 2;
    f->slots = (int *)calloc(f->n_slots, sizeof *f->slots);
    st_span *spans = (st_span *)calloc((size_t)(members ? members : 1), sizeof *spans);
    if (f->lenient) f->unsupported = (const char **)calloc((size_t)(members ? members : 1), sizeof *f->unsupported);
    if (!f->tensors || !f->slots || !spans || (f->lenient && !f->unsupported)) {
        free(spans);
        return ft_set_error(ctx, FT_ERR_OOM, "%s: out of host memory reading the header", f->path);
    }
    ft_status st = FT_OK;
    for (int i = 0; i < members && st == FT_OK; i++) {
        const char *name = ft_json_key_at(h, i);
        const ft_json *e = ft_json_at(h, i);
        if (!strcmp(name, "__metadata__")) {
            if (f->metadata)
                st = ft_set_error(ctx, FT_ERR_FORMAT,
                                  "%s: __metadata__ appears twice in the header", f->path);
            else
                st = st_check_metadata(ctx, f, e);
            continue;
        }
        if (ft_json_type_of(e) != FT_JSON_OBJECT) {
            st =
                ft_set_error(ctx, FT_ERR_FORMAT, "%s: tensor '%s': entry must be an object, got %s",
                             f->path, name, ft_json_type_name(ft_json_type_of(e)));
            break;
        }
        ft_st_tensor *t = &f->tensors[n];
        t->name = name;
        int dup = index_insert(f, n);
        if (dup >= 0) {
            st = ft_set_error(ctx, FT_ERR_FORMAT, "%s: tensor '%s' appears twice in the header",
                              f->path, name);
            break;
        }
        uint64_t numel = 0, begin = 0, end = 0;
        size_t esize = 0;
        const char *uname = NULL;
        if ((st = st_parse_dtype(ctx, f, name, ft_json_get(e, "dtype"), &t->dtype, &esize, &uname)) != FT_OK ||
            (st = st_parse_shape(ctx, f, t, ft_json_get(e, "shape"), &numel)) != FT_OK ||
            (st = st_parse_offsets(ctx, f, name, ft_json_get(e, "data_offsets"), &begin, &end)) !=
                FT_OK)
            break;
        uint64_t want = numel * esize;
        if (end - begin != want) {
            st = ft_set_error(
                ctx, FT_ERR_FORMAT,
                "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but %s x %llu elements "
                "need %llu",
                f->path, name, (unsigned long long)begin, (unsigned long long)end,
                (unsigned long long)(end - begin), uname ? uname : st_dtype_name(t->dtype),
                (unsigned long long)numel, (unsigned long long)want);
            break;
        }
        t->data = f->data + begin;
        t->nbytes = (size_t)want;
        if (uname) f->unsupported[n] = uname;
        spans[n].begin = begin;
        spans[n].end = end;
        spans[n].idx = n;
        n++;
    }
    f->n = n;
    if (st == FT_OK) {
        /* sorted by begin, a tensor overlaps another iff it starts before the furthest end seen */
        qsort(spans, (size_t)n, sizeof *spans, span_cmp);
        uint64_t reach = 0;
        int owner = -1;
        for (int i = 0; i < n && st == FT_OK; i++) {
            if (spans[i].begin == spans[i].end) continue; /* empty tensors occupy nothing */
            if (owner >= 0 && spans[i].begin < reach) {
                const ft_st_tensor *a = &f->tensors[owner], *b = &f->tensors[spans[i].idx];
                st =
                    ft_set_error(ctx, FT_ERR_FORMAT,
                                 "%s: tensors '%s' and '%s' overlap in the data (bytes %llu..%llu)",
                                 f->path, a->name, b->name, (unsigned long long)spans[i].begin,
                                 (unsigned long long)(reach < spans[i].end ? reach : spans[i].end));
            }
            if (spans[i].end > reach) {
                reach = spans[i].end;
                owner = spans[i].idx;
            }
        }
    }
    free(spans);
    return st;
}

ft_status ft_st_open(ft_ctx *ctx, const char *path, ft_st_file **out) {
    return ft_st_open_ex(ctx, path, false, out);
}

ft_status ft_st_open_ex(ft_ctx *ctx, const char *path, bool lenient, ft_st_file **out) {
    if (!out) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_st_open: out is NULL");
    *out = NULL;
    if (!path) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_st_open: path is NULL");
    ft_st_file *f = (ft_st_file *)calloc(1, sizeof *f);
    if (f) f->path = strdup(path);
    if (f) f->lenient = lenient;
    if (!f || !f->path) {
        free(f);
        return ft_set_error(ctx, FT_ERR_OOM, "%s: out of host memory", path);
    }
    ft_status st = FT_OK;
    int fd = -1;
    struct stat sb;
    if (ft_open_regular(ctx, path, &fd, &sb) != FT_OK) {
        st = ctx->status;
    } else if ((uint64_t)sb.st_size < 8) {
        st = ft_set_error(ctx, FT_ERR_FORMAT,
                          "%s: truncated file: %lld bytes, shorter than the 8-byte header length",
                          path, (long long)sb.st_size);
    } else {
        f->map_size = (size_t)sb.st_size;
        void *m = mmap(NULL, f->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            st = ft_set_error(ctx, FT_ERR_IO, "cannot map %s: %s", path, strerror(errno));
        else
            f->map = m;
    }
    if (fd >= 0) close(fd); /* the mapping stays valid without the descriptor */
    if (st == FT_OK) {
        const unsigned char *b = (const unsigned char *)f->map;
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--)
            hlen = (hlen << 8) | b[i];
        if (hlen > f->map_size - 8)
            st = ft_set_error(
                ctx, FT_ERR_FORMAT,
                "%s: header length %llu runs past the end of the file (%zu bytes after the length; "
                "truncated file?)",
                path, (unsigned long long)hlen, f->map_size - 8);
        else if (hlen > FT_ST_MAX_HEADER)
            st = ft_set_error(ctx, FT_ERR_FORMAT,
                              "%s: header length %llu exceeds the %llu-byte limit", path,
                              (unsigned long long)hlen, FT_ST_MAX_HEADER);
        if (st == FT_OK) {
            f->data = b + 8 + hlen;
            f->data_size = f->map_size - 8 - (size_t)hlen;
            st = ft_json_parse(ctx, (const char *)b + 8, (size_t)hlen, path, &f->header);
            if (st == FT_OK) st = st_build(ctx, f);
        }
    }
    if (st != FT_OK) {
        ft_st_close(f);
        return st;
    }
    *out = f;
    return FT_OK;
}

/* ---- writer ---- */

typedef struct st_buf {
    char *p;
    size_t n, cap;
    bool oom;
} st_buf;

static void buf_put(st_buf *b, const char *s, size_t len) {
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->n + len + 1 > cap)
            cap *= 2;
        char *p = (char *)realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}

static void buf_printf(st_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void buf_printf(st_buf *b, const char *fmt, ...) {
    char tmp[96];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void buf_json_string(st_buf *b, const char *s) {
    buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            buf_put(b, e, 2);
        } else if (c < 0x20) {
            buf_printf(b, "\\u%04x", c);
        } else {
            buf_put(b, (const char *)&c, 1);
        }
    }
    buf_put(b, "\"", 1);
}

static ft_status st_check_write(ft_ctx *ctx, const char *path, const ft_st_tensor *ts, int n) {
    for (int i = 0; i < n; i++) {
        const ft_st_tensor *t = &ts[i];
        const char *name = t->name ? t->name : "(null)";
        if (!t->name || !strcmp(t->name, "__metadata__"))
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s: tensor %d: invalid name '%s'", path,
                                i, name);
        if (!st_dtype_name(t->dtype))
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s: tensor '%s': invalid dtype %d", path,
                                name, (int)t->dtype);
        if (t->ndim < 0 || t->ndim > FT_MAX_DIMS)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG,
                                "%s: tensor '%s': ndim %d out of range 0..%d", path, name, t->ndim,
                                FT_MAX_DIMS);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0)
                return ft_set_error(ctx, FT_ERR_INVALID_ARG,
                                    "%s: tensor '%s': negative shape[%d] = %lld", path, name, d,
                                    (long long)t->shape[d]);
            if (t->shape[d] && numel > (uint64_t)INT64_MAX / 8 / (uint64_t)t->shape[d])
                return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s: tensor '%s': shape too large",
                                    path, name);
            numel *= (uint64_t)t->shape[d];
        }
        uint64_t want = numel * ft_dtype_size(t->dtype);
        if (t->nbytes != want)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG,
                                "%s: tensor '%s': nbytes %zu, but %s x %llu elements is %llu", path,
                                name, t->nbytes, st_dtype_name(t->dtype), (unsigned long long)numel,
                                (unsigned long long)want);
        if (want && !t->data)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s: tensor '%s': data is NULL", path,
                                name);
        for (int j = 0; j < i; j++)
            if (!strcmp(ts[j].name, t->name))
                return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s: tensor name '%s' is given twice",
                                    path, name);
    }
    return FT_OK;
}

ft_status ft_st_write(ft_ctx *ctx, const char *path, const ft_st_tensor *tensors, int n) {
    if (!path) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_st_write: path is NULL");
    if (n < 0 || (n > 0 && !tensors))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_st_write: %s: bad tensor list (n = %d)",
                            path, n);
    ft_status st = st_check_write(ctx, path, tensors, n);
    if (st != FT_OK) return st;

    st_buf h = {0};
    uint64_t off = 0;
    buf_put(&h, "{", 1);
    for (int i = 0; i < n; i++) {
        const ft_st_tensor *t = &tensors[i];
        if (i) buf_put(&h, ",", 1);
        buf_json_string(&h, t->name);
        buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            buf_printf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        buf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                   (unsigned long long)(off + t->nbytes));
        off += t->nbytes;
    }
    buf_put(&h, "}", 1);
    /* spaces up to a multiple of 8, as the reference writer does, so the data starts aligned */
    while (!h.oom && h.n % 8)
        buf_put(&h, " ", 1);
    if (h.oom) {
        free(h.p);
        return ft_set_error(ctx, FT_ERR_OOM, "%s: out of host memory building the header", path);
    }

    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(h.p);
        return ft_set_error(ctx, FT_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    bool ok = fwrite(len8, 1, 8, fp) == 8 && fwrite(h.p, 1, h.n, fp) == h.n;
    for (int i = 0; ok && i < n; i++)
        if (tensors[i].nbytes)
            ok = fwrite(tensors[i].data, 1, tensors[i].nbytes, fp) == tensors[i].nbytes;
    int err = ok ? 0 : errno;
    if (fclose(fp) != 0 && ok) {
        ok = false;
        err = errno;
    }
    free(h.p);
    if (!ok) {
        remove(path); /* a half-written file would fail later with a confusing message */
        return ft_set_error(ctx, FT_ERR_IO, "cannot write %s: %s", path,
                            err ? strerror(err) : "short write");
    }
    return FT_OK;
}

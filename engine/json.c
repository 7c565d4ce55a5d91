/*
 * json.c - strict RFC 8259 JSON parser used for config.json and safetensors
 * headers.
 *
 * Strict on purpose: the files it reads come from elsewhere, and a lenient
 * parser would turn a typo (a trailing comma, a comment, 010) into a silently
 * different model. Every rejection says where ("<source>:<line>:<col>") and
 * what was wrong. Values form a small tree of malloc'd nodes; numbers keep
 * both their double value and, when written as an integer, the exact int64.
 */
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Deep enough for any real config, shallow enough that the recursive descent
 * cannot exhaust the stack on hostile input. */
#define FT_JSON_MAX_DEPTH 256

struct ft_json {
    ft_json_type type;
    bool boolean;
    bool is_int; /* number written without '.', 'e', 'E' and within int64 */
    int64_t ival;
    double num;
    char *str;   /* strings: NUL-terminated UTF-8 */
    size_t slen; /* strings: length in bytes (may contain \u0000) */
    int n;       /* arrays and objects: element count */
    int cap;
    ft_json **items; /* [n] elements, or member values */
    char **keys;     /* [n] member keys (objects only) */
};

typedef struct ft_json_parser {
    ft_ctx *ctx;
    const char *source;
    const char *begin; /* start of the text, for line:col */
    const char *p;
    const char *end;
    int depth;
} ft_json_parser;

/* ---- errors ---- */

static ft_status jp_error(ft_json_parser *jp, const char *at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static ft_status jp_error(ft_json_parser *jp, const char *at, const char *fmt, ...) {
    int line = 1, col = 1;
    for (const char *q = jp->begin; q < at && q < jp->end; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ft_set_error(jp->ctx, FT_ERR_FORMAT, "%s:%d:%d: %s", jp->source, line, col, what);
}

/* A printable description of the byte at q ("'x'", "byte 0x01", "end of input"). */
static const char *jp_describe(const ft_json_parser *jp, const char *q, char *buf, size_t size) {
    if (q >= jp->end) return "end of input";
    unsigned char c = (unsigned char)*q;
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02x", c);
    return buf;
}

/* ---- nodes ---- */

static ft_json *jnode(ft_json_parser *jp, ft_json_type t) {
    ft_json *j = (ft_json *)calloc(1, sizeof *j);
    if (!j)
        ft_set_error(jp->ctx, FT_ERR_OOM, "%s: out of host memory while parsing JSON", jp->source);
    else
        j->type = t;
    return j;
}

static bool jpush(ft_json_parser *jp, ft_json *c, ft_json *item, char *key) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 4;
        ft_json **items = (ft_json **)realloc(c->items, (size_t)cap * sizeof *items);
        if (items) c->items = items;
        char **keys = NULL;
        if (items && c->type == FT_JSON_OBJECT) {
            keys = (char **)realloc(c->keys, (size_t)cap * sizeof *keys);
            if (keys) c->keys = keys;
        }
        if (!items || (c->type == FT_JSON_OBJECT && !keys)) {
            ft_set_error(jp->ctx, FT_ERR_OOM, "%s: out of host memory while parsing JSON",
                         jp->source);
            return false;
        }
        c->cap = cap;
    }
    c->items[c->n] = item;
    if (c->type == FT_JSON_OBJECT) c->keys[c->n] = key;
    c->n++;
    return true;
}

void ft_json_free(ft_json *j) {
    if (!j) return;
    for (int i = 0; i < j->n; i++) {
        ft_json_free(j->items[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->str);
    free(j);
}

/* ---- lexing helpers ---- */

static void jp_skip_ws(ft_json_parser *jp) {
    while (jp->p < jp->end && (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' || *jp->p == '\r'))
        jp->p++;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads the 4 hex digits after "\u" at q; -1 if malformed. */
static long read_hex4(const ft_json_parser *jp, const char *q) {
    if (jp->end - q < 4) return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(q[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Length of a valid UTF-8 sequence at q (1..4), or 0 if invalid (overlong
 * forms, encoded surrogates and code points past U+10FFFF included). */
static int utf8_valid_len(const unsigned char *q, const unsigned char *end) {
    unsigned c = q[0];
    int len;
    unsigned cp, min;
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) {
        len = 2;
        cp = c & 0x1f;
        min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3;
        cp = c & 0x0f;
        min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else
        return 0;
    if (end - q < len) return 0;
    for (int i = 1; i < len; i++) {
        if ((q[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (q[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

static size_t utf8_encode(unsigned long cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* ---- strings ---- */

/* Parses a string starting at the opening quote; the decoded text is never
 * longer than the source, so one buffer of the source length suffices. */
static ft_status jp_string(ft_json_parser *jp, char **out, size_t *out_len) {
    const char *open = jp->p++;
    const char *q = jp->p;
    while (q < jp->end && *q != '"')
        q += (*q == '\\' && q + 1 < jp->end) ? 2 : 1;
    size_t cap = (size_t)(q - jp->p) + 1;
    char *buf = (char *)malloc(cap);
    if (!buf)
        return ft_set_error(jp->ctx, FT_ERR_OOM, "%s: out of host memory while parsing JSON",
                            jp->source);
    size_t n = 0;
    ft_status st = FT_OK;
    for (;;) {
        if (jp->p >= jp->end) {
            st = jp_error(jp, open, "unterminated string");
            break;
        }
        unsigned char c = (unsigned char)*jp->p;
        if (c == '"') {
            jp->p++;
            break;
        }
        if (c < 0x20) {
            st = jp_error(jp, jp->p, "control character 0x%02x in a string must be escaped", c);
            break;
        }
        if (c >= 0x80) {
            int len = utf8_valid_len((const unsigned char *)jp->p, (const unsigned char *)jp->end);
            if (!len) {
                st = jp_error(jp, jp->p, "invalid UTF-8 byte 0x%02x in a string", c);
                break;
            }
            memcpy(buf + n, jp->p, (size_t)len);
            n += (size_t)len;
            jp->p += len;
            continue;
        }
        if (c != '\\') {
            buf[n++] = (char)c;
            jp->p++;
            continue;
        }
        const char *esc = jp->p;
        if (jp->p + 1 >= jp->end) {
            st = jp_error(jp, open, "unterminated string");
            break;
        }
        char e = jp->p[1];
        jp->p += 2;
        switch (e) {
        case '"':
            buf[n++] = '"';
            continue;
        case '\\':
            buf[n++] = '\\';
            continue;
        case '/':
            buf[n++] = '/';
            continue;
        case 'b':
            buf[n++] = '\b';
            continue;
        case 'f':
            buf[n++] = '\f';
            continue;
        case 'n':
            buf[n++] = '\n';
            continue;
        case 'r':
            buf[n++] = '\r';
            continue;
        case 't':
            buf[n++] = '\t';
            continue;
        case 'u':
            break;
        default: {
            char d[32];
            st = jp_error(jp, esc, "invalid escape sequence '\\' followed by %s",
                          jp_describe(jp, esc + 1, d, sizeof d));
            break;
        }
        }
        if (st != FT_OK) break;
        long cp = read_hex4(jp, jp->p);
        if (cp < 0) {
            st = jp_error(jp, esc, "\\u must be followed by 4 hex digits");
            break;
        }
        jp->p += 4;
        if (cp >= 0xdc00 && cp <= 0xdfff) {
            st = jp_error(jp, esc, "unpaired low surrogate \\u%04lX", cp);
            break;
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
            long lo = (jp->end - jp->p >= 6 && jp->p[0] == '\\' && jp->p[1] == 'u')
                          ? read_hex4(jp, jp->p + 2)
                          : -1;
            if (lo < 0xdc00 || lo > 0xdfff) {
                st = jp_error(jp, esc, "high surrogate \\u%04lX is not followed by a low surrogate",
                              cp);
                break;
            }
            jp->p += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        /* "\uXXXX" (6 bytes) or a pair (12) always covers its UTF-8 (<= 4) */
        n += utf8_encode((unsigned long)cp, buf + n);
    }
    if (st != FT_OK) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *out = buf;
    *out_len = n;
    return FT_OK;
}

/* ---- numbers ---- */

static ft_status jp_number(ft_json_parser *jp, ft_json **out) {
    const char *s = jp->p, *q = jp->p;
    bool neg = false, integral = true;
    char d[32];
    if (*q == '-') {
        neg = true;
        q++;
    }
    if (q >= jp->end || *q < '0' || *q > '9')
        return jp_error(jp, q, "expected a digit after '-', got %s",
                        jp_describe(jp, q, d, sizeof d));
    const char *digits = q;
    if (*q == '0') {
        q++;
        if (q < jp->end && *q >= '0' && *q <= '9')
            return jp_error(jp, s, "leading zeros are not allowed in numbers");
    } else {
        while (q < jp->end && *q >= '0' && *q <= '9')
            q++;
    }
    const char *int_end = q;
    if (q < jp->end && *q == '.') {
        integral = false;
        q++;
        if (q >= jp->end || *q < '0' || *q > '9')
            return jp_error(jp, q, "expected a digit after '.', got %s",
                            jp_describe(jp, q, d, sizeof d));
        while (q < jp->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < jp->end && (*q == 'e' || *q == 'E')) {
        integral = false;
        q++;
        if (q < jp->end && (*q == '+' || *q == '-')) q++;
        if (q >= jp->end || *q < '0' || *q > '9')
            return jp_error(jp, q, "expected a digit in the exponent, got %s",
                            jp_describe(jp, q, d, sizeof d));
        while (q < jp->end && *q >= '0' && *q <= '9')
            q++;
    }
    ft_json *j = jnode(jp, FT_JSON_NUMBER);
    if (!j) return FT_ERR_OOM;
    if (integral) {
        /* exact int64 when it fits: a double cannot hold every 64-bit offset */
        uint64_t mag = 0;
        bool fits = true;
        for (const char *r = digits; r < int_end && fits; r++) {
            unsigned dv = (unsigned)(*r - '0');
            if (mag > (UINT64_MAX - dv) / 10)
                fits = false;
            else
                mag = mag * 10 + dv;
        }
        if (fits && (neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX)) {
            j->is_int = true;
            j->ival = neg ? (int64_t)(0 - mag) : (int64_t)mag;
        }
    }
    /* strtod follows the C locale's decimal point; the program may have set another */
    char tmp[512];
    size_t len = (size_t)(q - s);
    char *num = len < sizeof tmp ? tmp : (char *)malloc(len + 1);
    if (!num) {
        ft_json_free(j);
        return ft_set_error(jp->ctx, FT_ERR_OOM, "%s: out of host memory while parsing JSON",
                            jp->source);
    }
    memcpy(num, s, len);
    num[len] = 0;
    const char *dp = localeconv()->decimal_point;
    if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
        char *dot = strchr(num, '.');
        if (dot) *dot = dp[0];
    }
    j->num = strtod(num, NULL);
    if (num != tmp) free(num);
    if (isinf(j->num)) {
        ft_json_free(j);
        return jp_error(jp, s, "number %.*s is out of the range of a double",
                        (int)(len < 40 ? len : 40), s);
    }
    jp->p = q;
    *out = j;
    return FT_OK;
}

/* ---- values ---- */

static ft_status jp_value(ft_json_parser *jp, ft_json **out);

static ft_status jp_enter(ft_json_parser *jp) {
    if (++jp->depth > FT_JSON_MAX_DEPTH)
        return jp_error(jp, jp->p, "nesting deeper than %d levels", FT_JSON_MAX_DEPTH);
    return FT_OK;
}

static ft_status jp_array(ft_json_parser *jp, ft_json **out) {
    ft_status st = jp_enter(jp);
    if (st != FT_OK) return st;
    ft_json *a = jnode(jp, FT_JSON_ARRAY);
    if (!a) return FT_ERR_OOM;
    jp->p++;
    jp_skip_ws(jp);
    if (jp->p < jp->end && *jp->p == ']') {
        jp->p++;
        jp->depth--;
        *out = a;
        return FT_OK;
    }
    char d[32];
    for (;;) {
        jp_skip_ws(jp);
        if (jp->p < jp->end && *jp->p == ']') {
            st = jp_error(jp, jp->p, "trailing comma before ']' is not allowed");
            break;
        }
        ft_json *v = NULL;
        if ((st = jp_value(jp, &v)) != FT_OK) break;
        if (!jpush(jp, a, v, NULL)) {
            ft_json_free(v);
            st = FT_ERR_OOM;
            break;
        }
        jp_skip_ws(jp);
        if (jp->p < jp->end && *jp->p == ',') {
            jp->p++;
            continue;
        }
        if (jp->p < jp->end && *jp->p == ']') {
            jp->p++;
            break;
        }
        st = jp_error(jp, jp->p, "expected ',' or ']' in an array, got %s",
                      jp_describe(jp, jp->p, d, sizeof d));
        break;
    }
    if (st != FT_OK) {
        ft_json_free(a);
        return st;
    }
    jp->depth--;
    *out = a;
    return FT_OK;
}

static ft_status jp_object(ft_json_parser *jp, ft_json **out) {
    ft_status st = jp_enter(jp);
    if (st != FT_OK) return st;
    ft_json *o = jnode(jp, FT_JSON_OBJECT);
    if (!o) return FT_ERR_OOM;
    jp->p++;
    jp_skip_ws(jp);
    if (jp->p < jp->end && *jp->p == '}') {
        jp->p++;
        jp->depth--;
        *out = o;
        return FT_OK;
    }
    char d[32];
    for (bool first = true;; first = false) {
        jp_skip_ws(jp);
        if (jp->p >= jp->end || *jp->p != '"') {
            if (!first && jp->p < jp->end && *jp->p == '}')
                st = jp_error(jp, jp->p, "trailing comma before '}' is not allowed");
            else
                st = jp_error(jp, jp->p, "expected a string key in an object, got %s",
                              jp_describe(jp, jp->p, d, sizeof d));
            break;
        }
        char *key = NULL;
        size_t klen = 0;
        const char *key_at = jp->p;
        if ((st = jp_string(jp, &key, &klen)) != FT_OK) break;
        if (strlen(key) != klen) /* keys are C strings: "a\u0000b" would answer for "a" */
            st = jp_error(jp, key_at, "the key \"%.64s\\u0000...\" holds a NUL character (\\u0000)", key);
        jp_skip_ws(jp);
        if (st != FT_OK || jp->p >= jp->end || *jp->p != ':') {
            if (st == FT_OK)
                st = jp_error(jp, jp->p, "expected ':' after the key \"%.64s\", got %s", key,
                              jp_describe(jp, jp->p, d, sizeof d));
            free(key);
            break;
        }
        jp->p++;
        ft_json *v = NULL;
        if ((st = jp_value(jp, &v)) != FT_OK) {
            free(key);
            break;
        }
        if (!jpush(jp, o, v, key)) {
            ft_json_free(v);
            free(key);
            st = FT_ERR_OOM;
            break;
        }
        jp_skip_ws(jp);
        if (jp->p < jp->end && *jp->p == ',') {
            jp->p++;
            continue;
        }
        if (jp->p < jp->end && *jp->p == '}') {
            jp->p++;
            break;
        }
        st = jp_error(jp, jp->p, "expected ',' or '}' in an object, got %s",
                      jp_describe(jp, jp->p, d, sizeof d));
        break;
    }
    if (st != FT_OK) {
        ft_json_free(o);
        return st;
    }
    jp->depth--;
    *out = o;
    return FT_OK;
}

static bool jp_match(ft_json_parser *jp, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(jp->end - jp->p) < n || memcmp(jp->p, word, n) != 0) return false;
    jp->p += n;
    return true;
}

static ft_status jp_value(ft_json_parser *jp, ft_json **out) {
    jp_skip_ws(jp);
    char d[32];
    if (jp->p >= jp->end) return jp_error(jp, jp->p, "expected a value, got end of input");
    char c = *jp->p;
    switch (c) {
    case '{':
        return jp_object(jp, out);
    case '[':
        return jp_array(jp, out);
    case '"': {
        char *s = NULL;
        size_t len = 0;
        ft_status st = jp_string(jp, &s, &len);
        if (st != FT_OK) return st;
        ft_json *j = jnode(jp, FT_JSON_STRING);
        if (!j) {
            free(s);
            return FT_ERR_OOM;
        }
        j->str = s;
        j->slen = len;
        *out = j;
        return FT_OK;
    }
    case 't':
    case 'f':
    case 'n': {
        ft_json_type t = c == 'n' ? FT_JSON_NULL : FT_JSON_BOOL;
        const char *at = jp->p;
        if (!jp_match(jp, c == 't' ? "true" : c == 'f' ? "false" : "null"))
            return jp_error(jp, at, "invalid literal (expected true, false or null)");
        ft_json *j = jnode(jp, t);
        if (!j) return FT_ERR_OOM;
        j->boolean = c == 't';
        *out = j;
        return FT_OK;
    }
    case '+':
        return jp_error(jp, jp->p, "a number cannot start with '+'");
    case '.':
        return jp_error(jp, jp->p, "a number must start with a digit, not '.'");
    case 'N':
    case 'I':
        return jp_error(jp, jp->p, "NaN and Infinity are not valid JSON");
    case '/':
        return jp_error(jp, jp->p, "comments are not allowed in JSON");
    case '\'':
        return jp_error(jp, jp->p, "strings must use double quotes");
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            if (c == '-' && jp->end - jp->p >= 2 && jp->p[1] == 'I')
                return jp_error(jp, jp->p, "NaN and Infinity are not valid JSON");
            return jp_number(jp, out);
        }
        return jp_error(jp, jp->p, "expected a value, got %s", jp_describe(jp, jp->p, d, sizeof d));
    }
}

ft_status ft_json_parse(ft_ctx *ctx, const char *text, size_t len, const char *source,
                        ft_json **out) {
    if (!out) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_json_parse: out is NULL");
    *out = NULL;
    if (!text && len) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_json_parse: text is NULL");
    ft_json_parser jp;
    jp.ctx = ctx;
    jp.source = source ? source : "<json>";
    jp.begin = text ? text : "";
    jp.p = jp.begin;
    jp.end = jp.begin + len;
    jp.depth = 0;
    /* RFC 8259 lets a parser ignore a UTF-8 byte order mark; some editors write one */
    if (len >= 3 && (unsigned char)text[0] == 0xef && (unsigned char)text[1] == 0xbb &&
        (unsigned char)text[2] == 0xbf)
        jp.p += 3;
    ft_json *root = NULL;
    ft_status st = jp_value(&jp, &root);
    if (st != FT_OK) return st;
    jp_skip_ws(&jp);
    if (jp.p < jp.end) {
        char d[32];
        ft_json_free(root);
        return jp_error(&jp, jp.p, "unexpected %s after the JSON value",
                        jp_describe(&jp, jp.p, d, sizeof d));
    }
    *out = root;
    return FT_OK;
}

static const char *file_kind(mode_t m) {
    if (S_ISDIR(m)) return "it is a directory";
    if (S_ISFIFO(m)) return "it is a FIFO (named pipe), not a regular file";
    if (S_ISSOCK(m)) return "it is a socket, not a regular file";
    if (S_ISCHR(m)) return "it is a character device, not a regular file";
    if (S_ISBLK(m)) return "it is a block device, not a regular file";
    return "not a regular file";
}

ft_status ft_open_regular(ft_ctx *ctx, const char *path, int *fd, struct stat *sb) {
    *fd = -1;
    /* the type first, by name: opening some special files has effects of its own */
    if (stat(path, sb) != 0) return ft_set_error(ctx, FT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (!S_ISREG(sb->st_mode)) return ft_set_error(ctx, FT_ERR_IO, "cannot read %s: %s", path, file_kind(sb->st_mode));
    /* O_NONBLOCK: if the name was replaced by a FIFO since, open returns at once */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f < 0) return ft_set_error(ctx, FT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    int fl;
    if (fstat(f, sb) != 0 || (fl = fcntl(f, F_GETFL)) < 0) {
        int e = errno;
        close(f);
        return ft_set_error(ctx, FT_ERR_IO, "cannot read %s: %s", path, strerror(e));
    }
    if (!S_ISREG(sb->st_mode)) {
        close(f);
        return ft_set_error(ctx, FT_ERR_IO, "cannot read %s: %s", path, file_kind(sb->st_mode));
    }
    if (fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(f);
        return ft_set_error(ctx, FT_ERR_IO, "cannot read %s: %s", path, strerror(e));
    }
    *fd = f;
    return FT_OK;
}

static ft_status read_file(ft_ctx *ctx, const char *path, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    int fd;
    struct stat sb;
    if (ft_open_regular(ctx, path, &fd, &sb)) return ctx->status;
    size_t size = (size_t)sb.st_size;
    char *buf = (char *)malloc(size + 1);
    if (!buf) {
        close(fd);
        return ft_set_error(ctx, FT_ERR_OOM, "%s: out of host memory (%zu bytes)", path, size);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            free(buf);
            close(fd);
            return ft_set_error(ctx, FT_ERR_IO, "cannot read %s: %s", path,
                                e ? strerror(e) : "file shrank while reading");
        }
        got += (size_t)r;
    }
    close(fd);
    buf[size] = 0;
    *text = buf;
    *len = size;
    return FT_OK;
}

ft_status ft_json_parse_file(ft_ctx *ctx, const char *path, ft_json **out) {
    if (!out) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_json_parse_file: out is NULL");
    *out = NULL;
    if (!path) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_json_parse_file: path is NULL");
    char *text = NULL;
    size_t len = 0;
    ft_status st = read_file(ctx, path, &text, &len);
    if (st != FT_OK) return st;
    st = ft_json_parse(ctx, text, len, path, out);
    free(text);
    return st;
}

/* ---- accessors ---- */

ft_json_type ft_json_type_of(const ft_json *j) {
    return j ? j->type : FT_JSON_NULL;
}

const ft_json *ft_json_get(const ft_json *obj, const char *key) {
    if (!obj || obj->type != FT_JSON_OBJECT || !key) return NULL;
    for (int i = obj->n - 1; i >= 0; i--)
        if (!strcmp(obj->keys[i], key)) return obj->items[i];
    return NULL;
}

int ft_json_len(const ft_json *j) {
    return j && (j->type == FT_JSON_ARRAY || j->type == FT_JSON_OBJECT) ? j->n : 0;
}

const ft_json *ft_json_at(const ft_json *j, int i) {
    return i >= 0 && i < ft_json_len(j) ? j->items[i] : NULL;
}

const char *ft_json_key_at(const ft_json *obj, int i) {
    return obj && obj->type == FT_JSON_OBJECT && i >= 0 && i < obj->n ? obj->keys[i] : NULL;
}

double ft_json_number(const ft_json *j) {
    return j && j->type == FT_JSON_NUMBER ? j->num : 0.0;
}

bool ft_json_is_integer(const ft_json *j) {
    return j && j->type == FT_JSON_NUMBER && j->is_int;
}

int64_t ft_json_int(const ft_json *j) {
    if (!j || j->type != FT_JSON_NUMBER) return 0;
    if (j->is_int) return j->ival;
    if (!(j->num >= -9.2233720368547758e18 && j->num < 9.2233720368547758e18)) return 0;
    return (int64_t)j->num;
}

const char *ft_json_string(const ft_json *j) {
    return j && j->type == FT_JSON_STRING ? j->str : NULL;
}

size_t ft_json_string_len(const ft_json *j) {
    return j && j->type == FT_JSON_STRING ? j->slen : 0;
}

bool ft_json_bool(const ft_json *j) {
    return j && j->type == FT_JSON_BOOL && j->boolean;
}

const char *ft_json_type_name(ft_json_type t) {
    switch (t) {
    case FT_JSON_NULL:
        return "null";
    case FT_JSON_BOOL:
        return "boolean";
    case FT_JSON_NUMBER:
        return "number";
    case FT_JSON_STRING:
        return "string";
    case FT_JSON_ARRAY:
        return "array";
    case FT_JSON_OBJECT:
        return "object";
    }
    return "?";
}

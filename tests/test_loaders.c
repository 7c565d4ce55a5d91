/*
 * test_loaders.c - safetensors reader/writer and config.json getters: every
 * malformed-file case gives the expected status and a message naming the file
 * and the tensor or key; write/read round trips; the golden files load.
 * Malformed fixtures are written from C into a mkdtemp() directory.
 */
#include "config.h"
#include "safetensors.h"
#include "ft_test.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

static int file_seq;

/* Writes an 8-byte length `hlen` (or the header's real length when hlen is
 * UINT64_MAX), the header text, then `data_len` bytes of a counting pattern. */
static void write_raw(const char *path, uint64_t hlen, const char *header, size_t header_bytes,
                      size_t data_len) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)(hlen >> (8 * i));
    fwrite(len8, 1, 8, fp);
    fwrite(header, 1, header_bytes, fp);
    for (size_t i = 0; i < data_len; i++)
        fputc((int)(i & 0xff), fp);
    fclose(fp);
}

static void make_st(char *path, size_t size, const char *header, size_t data_len) {
    snprintf(path, size, "%s/case%03d.safetensors", tmpdir, file_seq++);
    write_raw(path, strlen(header), header, strlen(header), data_len);
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

typedef struct bad_case {
    const char *header;
    size_t data_len;
    ft_status want;
    const char *needle1; /* must appear in the message (tensor name, key) */
    const char *needle2; /* NULL or a second phrase */
} bad_case;

static const bad_case bad_headers[] = {
    /* syntax and structure */
    {"{\"w\":{\"dtype\":\"F32\",}}", 0, FT_ERR_FORMAT, ":1:21:", "trailing comma"},
    {"[1,2]", 0, FT_ERR_FORMAT, "object", "array"},
    {"{} x", 0, FT_ERR_FORMAT, ":1:4:", NULL},
    {"", 0, FT_ERR_FORMAT, "end of input", NULL},
    {"{\"w\":3}", 0, FT_ERR_FORMAT, "'w'", "object"},
    {"{\"__metadata__\":{\"format\":1}}", 0, FT_ERR_FORMAT, "__metadata__", "format"},
    {"{\"__metadata__\":[]}", 0, FT_ERR_FORMAT, "__metadata__", NULL},
    /* dtype */
    {"{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, FT_ERR_FORMAT, "'w'", "dtype"},
    {"{\"w\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, FT_ERR_FORMAT, "'w'",
     "dtype"},
    {"{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, FT_ERR_UNSUPPORTED,
     "'w'", "F64"},
    {"{\"w\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", 8, FT_ERR_UNSUPPORTED,
     "'w'", "BOOL"},
    {"{\"w\":{\"dtype\":\"FOO\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, FT_ERR_FORMAT, "'w'",
     "FOO"},
    /* shape */
    {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, FT_ERR_FORMAT, "'w'", "shape"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, FT_ERR_FORMAT, "'w'",
     "shape"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, FT_ERR_FORMAT, "'w'",
     "shape[0]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,2.5],\"data_offsets\":[0,8]}}", 8, FT_ERR_FORMAT,
     "'w'", "shape[1]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8, FT_ERR_FORMAT,
     "'w'", "shape[0]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
     FT_ERR_UNSUPPORTED, "'w'", "dimensions"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,8]}}", 8,
     FT_ERR_FORMAT, "'w'", "too many"},
    /* offsets */
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, FT_ERR_FORMAT, "'w'", "data_offsets"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, FT_ERR_FORMAT, "'w'",
     "data_offsets"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,\"8\"]}}", 8, FT_ERR_FORMAT,
     "'w'", "data_offsets"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-1,7]}}", 8, FT_ERR_FORMAT, "'w'",
     "data_offsets"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, FT_ERR_FORMAT, "'w'",
     "begin after end"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, FT_ERR_FORMAT, "'w'",
     "past the end"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, FT_ERR_FORMAT, "'w'",
     "need 12"},
    {"{\"w\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16, FT_ERR_FORMAT,
     "'w'", "need 8"},
    /* several tensors */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     12, FT_ERR_FORMAT, "'a'", "'b'"},
    {"{\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[8,12]},"
     "\"a\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}",
     16, FT_ERR_FORMAT, "overlap", "'b'"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
     8, FT_ERR_FORMAT, "'w'", "twice"},
};

static void check_error(ft_ctx *ctx, ft_status got, ft_status want, const char *path,
                        const char *n1, const char *n2, const char *label) {
    const char *msg = ft_ctx_errmsg(ctx);
    CHECK(got == want, "%s: status %s, want %s (%s)", label, ft_status_str(got),
          ft_status_str(want), msg);
    CHECK(ft_ctx_status(ctx) == want, "%s: context status %s", label,
          ft_status_str(ft_ctx_status(ctx)));
    CHECK(strstr(msg, base_name(path)) != NULL, "%s: message does not name the file: %s", label,
          msg);
    if (n1) CHECK(strstr(msg, n1) != NULL, "%s: message lacks \"%s\": %s", label, n1, msg);
    if (n2) CHECK(strstr(msg, n2) != NULL, "%s: message lacks \"%s\": %s", label, n2, msg);
    ft_ctx_clear_error(ctx);
}

static void test_st_bad_headers(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    for (size_t i = 0; i < sizeof bad_headers / sizeof bad_headers[0]; i++) {
        const bad_case *c = &bad_headers[i];
        char path[512], label[64];
        make_st(path, sizeof path, c->header, c->data_len);
        snprintf(label, sizeof label, "bad header #%zu", i);
        ft_st_file *f = (ft_st_file *)&path; /* must be reset to NULL on failure */
        ft_status st = ft_st_open(ctx, path, &f);
        CHECK(f == NULL, "%s: out not reset", label);
        if (st == FT_OK) ft_st_close(f);
        check_error(ctx, st, c->want, path, c->needle1, c->needle2, label);
        remove(path);
    }
    ft_ctx_free(ctx);
}

static void test_st_bad_files(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    ft_st_file *f = NULL;
    char path[512];

    snprintf(path, sizeof path, "%s/does_not_exist.safetensors", tmpdir);
    check_error(ctx, ft_st_open(ctx, path, &f), FT_ERR_IO, path, "No such file", NULL,
                "missing file");
    check_error(ctx, ft_st_open(ctx, tmpdir, &f), FT_ERR_IO, tmpdir, "directory", NULL,
                "directory");

    /* shorter than the 8-byte length */
    size_t short_sizes[] = {0, 5};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/short%d.safetensors", tmpdir, i);
        FILE *fp = fopen(path, "wb");
        if (fp) {
            fwrite("\x10\0\0\0\0", 1, short_sizes[i], fp);
            fclose(fp);
        }
        check_error(ctx, ft_st_open(ctx, path, &f), FT_ERR_FORMAT, path, "truncated", NULL,
                    "short file");
        remove(path);
    }

    /* header length past the end (header cut short), and an absurd length */
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    snprintf(path, sizeof path, "%s/cut.safetensors", tmpdir);
    write_raw(path, strlen(hdr), hdr, strlen(hdr) - 10, 0);
    check_error(ctx, ft_st_open(ctx, path, &f), FT_ERR_FORMAT, path, "header length",
                "past the end", "cut header");
    write_raw(path, UINT64_MAX, hdr, strlen(hdr), 4);
    check_error(ctx, ft_st_open(ctx, path, &f), FT_ERR_FORMAT, path, "header length", NULL,
                "huge length");

    /* data section truncated: the header is complete but the bytes are not */
    write_raw(path, strlen(hdr), hdr, strlen(hdr), 3);
    check_error(ctx, ft_st_open(ctx, path, &f), FT_ERR_FORMAT, path, "'w'", "truncated",
                "cut data");
    remove(path);

    /* NULL arguments are errors, not crashes */
    CHECK(ft_st_open(ctx, NULL, &f) == FT_ERR_INVALID_ARG, "NULL path accepted");
    ft_ctx_clear_error(ctx);
    CHECK(ft_st_open(ctx, path, NULL) == FT_ERR_INVALID_ARG, "NULL out accepted");
    ft_ctx_clear_error(ctx);
    CHECK(ft_st_count(NULL) == 0 && ft_st_get(NULL, 0) == NULL && ft_st_find(NULL, "w") == NULL,
          "NULL file accessors");
    ft_st_close(NULL);
    ft_ctx_free(ctx);
}

static void test_st_valid_edge_cases(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    char path[512];
    /* a scalar, metadata, a gap between tensors, an empty tensor inside another's
     * span, header padding, and names that need escaping */
    make_st(path, sizeof path,
            "{\"__metadata__\":{\"format\":\"pt\"},"
            "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
            "\"e\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
            "\"g\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16],\"extra\":1},"
            "\"q\\\"\\u00e9\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[16,20]}}     ",
            24);
    ft_st_file *f = NULL;
    CHECK_OK(ctx, ft_st_open(ctx, path, &f));
    if (f) {
        CHECK(ft_st_count(f) == 4, "count %d, want 4", ft_st_count(f));
        CHECK(ft_st_metadata(f, "format") && !strcmp(ft_st_metadata(f, "format"), "pt"),
              "metadata format");
        CHECK(ft_st_metadata(f, "nope") == NULL, "absent metadata key");
        const ft_st_tensor *s = ft_st_find(f, "s");
        CHECK(s && s->ndim == 0 && s->dtype == FT_DTYPE_I64 && s->nbytes == 8, "scalar tensor");
        if (s) {
            const unsigned char *d = (const unsigned char *)s->data;
            CHECK(d[0] == 0 && d[7] == 7, "scalar bytes %d %d", d[0], d[7]);
        }
        const ft_st_tensor *e = ft_st_find(f, "e");
        CHECK(e && e->ndim == 2 && e->shape[0] == 3 && e->shape[1] == 0 && e->nbytes == 0,
              "empty tensor");
        const ft_st_tensor *g = ft_st_find(f, "g");
        CHECK(g && g->dtype == FT_DTYPE_BF16 && ((const unsigned char *)g->data)[0] == 12,
              "gap tensor");
        const ft_st_tensor *q = ft_st_find(f, "q\"\xc3\xa9");
        CHECK(q && q->dtype == FT_DTYPE_I32, "escaped name not found");
        CHECK(ft_st_get(f, 0) == s && ft_st_get(f, 3) == q && ft_st_get(f, 4) == NULL,
              "header order");
        CHECK(ft_st_find(f, "missing") == NULL, "absent tensor found");
        CHECK(!strcmp(ft_st_path(f), path), "path %s", ft_st_path(f));
    }
    ft_st_close(f);
    remove(path);

    /* an empty header is a valid file with no tensors */
    make_st(path, sizeof path, "{}      ", 0);
    f = NULL;
    CHECK_OK(ctx, ft_st_open(ctx, path, &f));
    CHECK(f && ft_st_count(f) == 0, "empty file count");
    ft_st_close(f);
    remove(path);
    ft_ctx_free(ctx);
}

/* Reads the u64 header length of a file. */
static uint64_t file_header_len(const char *path, long *file_size) {
    unsigned char b[8] = {0};
    uint64_t n = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    if (fread(b, 1, 8, fp) == 8)
        for (int i = 7; i >= 0; i--)
            n = (n << 8) | b[i];
    fseek(fp, 0, SEEK_END);
    *file_size = ftell(fp);
    fclose(fp);
    return n;
}

static void test_st_round_trip(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    float a[2 * 3];
    uint16_t h[5], bf[3];
    int64_t sc = -1234567890123ll;
    int32_t i32[7];
    for (int i = 0; i < 6; i++)
        a[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 5; i++)
        h[i] = ft_f32_to_f16((float)i + 0.5f);
    for (int i = 0; i < 3; i++)
        bf[i] = ft_f32_to_bf16((float)-i * 3.0f);
    for (int i = 0; i < 7; i++)
        i32[i] = i * 1000 - 3;
    ft_st_tensor ts[] = {
        {"weight", FT_DTYPE_F32, 2, {2, 3}, a, sizeof a},
        {"half", FT_DTYPE_F16, 1, {5}, h, sizeof h},
        {"odd \"name\"\\\x01", FT_DTYPE_BF16, 3, {1, 1, 3}, bf, sizeof bf},
        {"scalar", FT_DTYPE_I64, 0, {0}, &sc, sizeof sc},
        {"empty", FT_DTYPE_I32, 2, {0, 4}, NULL, 0},
        {"ints", FT_DTYPE_I32, 1, {7}, i32, sizeof i32},
    };
    int n = (int)(sizeof ts / sizeof ts[0]);
    char path[512];
    snprintf(path, sizeof path, "%s/round.safetensors", tmpdir);
    CHECK_OK(ctx, ft_st_write(ctx, path, ts, n));
    long fsize = 0;
    uint64_t hlen = file_header_len(path, &fsize);
    size_t total = sizeof a + sizeof h + sizeof bf + sizeof sc + sizeof i32;
    CHECK(hlen % 8 == 0 && hlen > 0, "header length %llu not padded to 8",
          (unsigned long long)hlen);
    CHECK((uint64_t)fsize == 8 + hlen + total, "file size %ld, want %llu", fsize,
          (unsigned long long)(8 + hlen + total));
    ft_st_file *f = NULL;
    CHECK_OK(ctx, ft_st_open(ctx, path, &f));
    if (f) {
        CHECK(ft_st_count(f) == n, "count %d want %d", ft_st_count(f), n);
        const char *prev_end = NULL;
        for (int i = 0; i < n && i < ft_st_count(f); i++) {
            const ft_st_tensor *t = ft_st_get(f, i);
            CHECK(!strcmp(t->name, ts[i].name), "tensor %d name '%s'", i, t->name);
            CHECK(t->dtype == ts[i].dtype, "tensor %d dtype", i);
            CHECK(t->ndim == ts[i].ndim, "tensor %d ndim %d", i, t->ndim);
            for (int d = 0; d < t->ndim; d++)
                CHECK(t->shape[d] == ts[i].shape[d], "tensor %d dim %d", i, d);
            CHECK(t->nbytes == ts[i].nbytes, "tensor %d nbytes %zu", i, t->nbytes);
            if (t->nbytes) {
                CHECK(!memcmp(t->data, ts[i].data, t->nbytes), "tensor %d bytes differ", i);
                /* given order, contiguous */
                if (prev_end)
                    CHECK((const char *)t->data == prev_end, "tensor %d not contiguous", i);
                prev_end = (const char *)t->data + t->nbytes;
            }
            CHECK(ft_st_find(f, ts[i].name) == t, "find '%s'", ts[i].name);
        }
        const ft_st_tensor *w = ft_st_find(f, "weight");
        CHECK(w && ((uintptr_t)w->data % 8) == 0, "first tensor not 8-byte aligned");
    }
    ft_st_close(f);
    remove(path);

    /* zero tensors */
    CHECK_OK(ctx, ft_st_write(ctx, path, NULL, 0));
    f = NULL;
    CHECK_OK(ctx, ft_st_open(ctx, path, &f));
    CHECK(f && ft_st_count(f) == 0, "empty round trip");
    ft_st_close(f);
    remove(path);
    ft_ctx_free(ctx);
}

static void test_st_write_errors(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    float a[4] = {1, 2, 3, 4};
    char path[512];
    snprintf(path, sizeof path, "%s/w.safetensors", tmpdir);
    ft_st_tensor dup[] = {{"x", FT_DTYPE_F32, 1, {4}, a, sizeof a},
                          {"x", FT_DTYPE_F32, 1, {2}, a, 8}};
    check_error(ctx, ft_st_write(ctx, path, dup, 2), FT_ERR_INVALID_ARG, path, "'x'", "twice",
                "write dup");
    ft_st_tensor bad_bytes[] = {{"y", FT_DTYPE_F32, 1, {3}, a, sizeof a}};
    check_error(ctx, ft_st_write(ctx, path, bad_bytes, 1), FT_ERR_INVALID_ARG, path, "'y'",
                "nbytes", "write nbytes");
    ft_st_tensor bad_dim[] = {{"z", FT_DTYPE_F32, 1, {-4}, a, sizeof a}};
    check_error(ctx, ft_st_write(ctx, path, bad_dim, 1), FT_ERR_INVALID_ARG, path, "'z'",
                "negative", "write shape");
    ft_st_tensor bad_dtype[] = {{"d", (ft_dtype)99, 1, {4}, a, sizeof a}};
    check_error(ctx, ft_st_write(ctx, path, bad_dtype, 1), FT_ERR_INVALID_ARG, path, "'d'", "dtype",
                "write dtype");
    CHECK(access(path, F_OK) != 0, "a rejected write left a file");
    char nodir[512];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir.safetensors", tmpdir);
    check_error(ctx, ft_st_write(ctx, nodir, dup, 1), FT_ERR_IO, nodir, NULL, NULL,
                "write to missing dir");
    ft_ctx_free(ctx);
}

static void test_st_golden_files(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    const char *cases[] = {"bert", "funnel", "mobilebert", "resnet", "wavlm"};
    const char *files[] = {"model", "inputs", "expected"};
    for (int c = 0; c < 5; c++) {
        for (int k = 0; k < 3; k++) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s/%s.safetensors", ft_test_golden_dir(), cases[c],
                     files[k]);
            ft_st_file *f = NULL;
            CHECK_OK(ctx, ft_st_open(ctx, path, &f));
            if (!f) {
                ft_ctx_clear_error(ctx);
                continue;
            }
            CHECK(ft_st_count(f) > 0, "%s has no tensors", path);
            for (int i = 0; i < ft_st_count(f); i++) {
                const ft_st_tensor *t = ft_st_get(f, i);
                if (t->dtype != FT_DTYPE_F32) continue;
                const float *v = (const float *)t->data;
                size_t nf = t->nbytes / 4, bad = 0;
                for (size_t j = 0; j < nf; j++)
                    bad += !isfinite(v[j]);
                CHECK(bad == 0, "%s: '%s' has %zu non-finite values", path, t->name, bad);
            }
            if (k == 0)
                CHECK(ft_st_metadata(f, "format") && !strcmp(ft_st_metadata(f, "format"), "pt"),
                      "%s: metadata format", path);
            if (c == 0 && k == 1) {
                const ft_st_tensor *ids = ft_st_find(f, "input_ids");
                CHECK(ids && ids->dtype == FT_DTYPE_I64 && ids->ndim == 2 && ids->shape[0] == 2 &&
                          ids->shape[1] == 16,
                      "bert input_ids");
            }
            if (c == 0 && k == 2) {
                const ft_st_tensor *h = ft_st_find(f, "last_hidden_state");
                CHECK(h && h->ndim == 3 && h->shape[2] == 64 && h->nbytes == 2 * 16 * 64 * 4,
                      "bert last_hidden_state");
            }
            if (c == 3 && k == 0) {
                const ft_st_tensor *nb =
                    ft_st_find(f, "embedder.embedder.normalization.num_batches_tracked");
                CHECK(nb && nb->dtype == FT_DTYPE_I64 && nb->ndim == 0 && nb->nbytes == 8,
                      "resnet I64 scalar");
            }
            ft_st_close(f);
        }
    }
    ft_ctx_free(ctx);
}

/* ---- config ---- */

static void test_config_golden(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    char path[512];
    snprintf(path, sizeof path, "%s/bert/config.json", ft_test_golden_dir());
    ft_config c;
    CHECK_OK(ctx, ft_config_load(ctx, path, &c));
    int64_t v = 0;
    double x = 0;
    bool b = false;
    const char *s = NULL;
    CHECK_OK(ctx, ft_config_int(&c, "hidden_size", 768, &v));
    CHECK(v == 64, "hidden_size %lld", (long long)v);
    CHECK_OK(ctx, ft_config_int(&c, "dim|hidden_size", 768, &v));
    CHECK(v == 64, "alias dim|hidden_size %lld", (long long)v);
    CHECK_OK(ctx, ft_config_int(&c, "chunk_size_feed_forward", 7, &v));
    CHECK(v == 7, "absent key took %lld, want the default 7", (long long)v);
    CHECK_OK(ctx, ft_config_float(&c, "layer_norm_eps", 1.0, &x));
    CHECK(x == 1e-12, "layer_norm_eps %g", x);
    CHECK_OK(ctx, ft_config_float(&c, "num_hidden_layers", 0.0, &x));
    CHECK(x == 2.0, "float getter on an integer: %g", x);
    CHECK_OK(ctx, ft_config_float(&c, "classifier_dropout", 0.5, &x));
    CHECK(x == 0.5, "null must count as absent: %g", x);
    CHECK_OK(ctx, ft_config_bool(&c, "use_cache", false, &b));
    CHECK(b, "use_cache");
    CHECK_OK(ctx, ft_config_string(&c, "model_type", NULL, &s));
    CHECK(s && !strcmp(s, "bert"), "model_type");
    CHECK(ft_config_has(&c, "vocab_size") && !ft_config_has(&c, "dim") &&
              !ft_config_has(&c, "classifier_dropout"),
          "ft_config_has");
    CHECK(ft_config_architecture(&c) && !strcmp(ft_config_architecture(&c), "BertModel"),
          "architecture");

    ft_status st = ft_config_int(&c, "model_type", 0, &v);
    check_error(ctx, st, FT_ERR_FORMAT, path, "key 'model_type' must be an integer, got string",
                NULL, "int on string");
    st = ft_config_int(&c, "initializer_range", 0, &v);
    check_error(ctx, st, FT_ERR_FORMAT, path, "'initializer_range'", "integer", "int on fraction");
    st = ft_config_string(&c, "hidden_size", NULL, &s);
    check_error(ctx, st, FT_ERR_FORMAT, path, "'hidden_size'", "string", "string on int");
    st = ft_config_bool(&c, "hidden_act", false, &b);
    check_error(ctx, st, FT_ERR_FORMAT, path, "'hidden_act'", NULL, "bool on string");
    st = ft_config_error(&c, "bad combination %d", 42);
    check_error(ctx, st, FT_ERR_FORMAT, path, "config.json: bad combination 42", NULL,
                "config_error");
    ft_config_free(&c);
    ft_config_free(&c); /* idempotent */
    ft_ctx_free(ctx);
}

static void test_config_types(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    const char *json =
        "{\"i\": 768, \"f\": 12.0, \"e\": 1e3, \"big\": 99999999999999999999, \"t\": true,"
        " \"one\": 1, \"s\": \"x\", \"n\": null, \"arr\": [1, 2, 3], \"farr\": [1, 2.5],"
        " \"neg\": -5, \"alias_b\": 9, \"huge\": 4294967297, \"harr\": [1, -4294967297]}";
    ft_config c;
    CHECK_OK(ctx, ft_config_from_string(ctx, json, "preset:test", &c));
    int64_t v = 0, arr[4];
    double x = 0;
    bool b = false;
    int n = 0;
    const char *s = "unchanged";
    CHECK_OK(ctx, ft_config_int(&c, "neg", 0, &v));
    CHECK(v == -5, "neg %lld", (long long)v);
    const char *not_int[] = {"f", "e", "big", "t", "s", "arr"};
    for (int i = 0; i < 6; i++) {
        char key[16];
        snprintf(key, sizeof key, "'%s'", not_int[i]);
        check_error(ctx, ft_config_int(&c, not_int[i], 0, &v), FT_ERR_FORMAT, "preset:test", key,
                    "integer", not_int[i]);
    }
    CHECK_OK(ctx, ft_config_float(&c, "e", 0, &x));
    CHECK(x == 1000.0, "e %g", x);
    check_error(ctx, ft_config_float(&c, "s", 0, &x), FT_ERR_FORMAT, "preset:test", "'s'", "number",
                "float on str");
    check_error(ctx, ft_config_bool(&c, "one", false, &b), FT_ERR_FORMAT, "preset:test", "'one'",
                NULL, "bool on 1");
    CHECK_OK(ctx, ft_config_int(&c, "n", 11, &v));
    CHECK(v == 11, "null int -> default");
    CHECK_OK(ctx, ft_config_bool(&c, "n", true, &b));
    CHECK(b, "null bool -> default");
    CHECK_OK(ctx, ft_config_string(&c, "n", NULL, &s));
    CHECK(s == NULL, "null string -> NULL default");
    /* aliases: the first present (non-null) spelling wins */
    CHECK_OK(ctx, ft_config_int(&c, "alias_a|alias_b|i", 0, &v));
    CHECK(v == 9, "alias %lld", (long long)v);
    CHECK_OK(ctx, ft_config_int(&c, "n|i", 0, &v));
    CHECK(v == 768, "null alias skipped %lld", (long long)v);
    check_error(ctx, ft_config_int(&c, "zz|s", 0, &v), FT_ERR_FORMAT, "preset:test", "'s'", NULL,
                "alias wrong type");
    /* integer arrays */
    CHECK_OK(ctx, ft_config_int_array(&c, "arr", NULL, 0, arr, 4, &n));
    CHECK(n == 3 && arr[0] == 1 && arr[2] == 3, "arr n=%d", n);
    const int64_t def[2] = {7, 8};
    CHECK_OK(ctx, ft_config_int_array(&c, "absent", def, 2, arr, 4, &n));
    CHECK(n == 2 && arr[0] == 7 && arr[1] == 8, "array default");
    check_error(ctx, ft_config_int_array(&c, "farr", def, 2, arr, 4, &n), FT_ERR_FORMAT,
                "preset:test", "'farr'", "element 1", "array element");
    check_error(ctx, ft_config_int_array(&c, "arr", def, 2, arr, 2, &n), FT_ERR_UNSUPPORTED,
                "preset:test", "'arr'", NULL, "array too long");
    check_error(ctx, ft_config_int_array(&c, "i", def, 2, arr, 4, &n), FT_ERR_FORMAT, "preset:test",
                "'i'", "array", "array on int");
    /* sizes beyond int32 are refused before any shape arithmetic can overflow */
    check_error(ctx, ft_config_int(&c, "huge", 0, &v), FT_ERR_FORMAT, "preset:test", "'huge'",
                "out of range", "huge int");
    check_error(ctx, ft_config_int_array(&c, "harr", def, 2, arr, 4, &n), FT_ERR_FORMAT,
                "preset:test", "'harr' element 1", "out of range", "huge array element");
    CHECK(ft_config_architecture(&c) == NULL, "no architectures");
    ft_config_free(&c);

    /* a config that is not an object, one with a syntax error, a missing file */
    ft_status st = ft_config_from_string(ctx, "[1, 2]", "preset:arr", &c);
    check_error(ctx, st, FT_ERR_FORMAT, "preset:arr", "object", NULL, "array config");
    CHECK(c.root == NULL, "root left after failure");
    ft_config_free(&c);
    st = ft_config_from_string(ctx, "{\n  \"a\": 1,\n}", "preset:comma", &c);
    check_error(ctx, st, FT_ERR_FORMAT, "preset:comma", "preset:comma:3:1:", "trailing comma",
                "comma config");
    ft_config_free(&c);
    char path[512];
    snprintf(path, sizeof path, "%s/no_config.json", tmpdir);
    check_error(ctx, ft_config_load(ctx, path, &c), FT_ERR_IO, path, NULL, NULL, "missing config");
    ft_config_free(&c);
    /* getters on an unloaded config fail cleanly */
    CHECK(ft_config_int(&c, "i", 0, &v) != FT_OK, "getter on unloaded config succeeded");
    ft_ctx_clear_error(ctx);
    ft_ctx_free(ctx);
}

int main(void) {
    ft_test_tmpdir_make("loaders");
    if (!tmpdir[0]) {
        printf("cannot create a temporary directory\n");
        return 1;
    }
    RUN(test_st_bad_headers);
    RUN(test_st_bad_files);
    RUN(test_st_valid_edge_cases);
    RUN(test_st_round_trip);
    RUN(test_st_write_errors);
    RUN(test_st_golden_files);
    RUN(test_config_golden);
    RUN(test_config_types);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

/*
 * test_json.c - the strict JSON parser: values and accessors, every escape
 * (surrogate pairs included), number rules (leading zeros, '+', NaN, integer
 * detection), trailing commas, comments, trailing garbage, the nesting limit,
 * and the "<source>:<line>:<col>: <what>" position of each error.
 */
#include "json.h"
#include "ft_test.h"

#include <stdint.h>
#include <unistd.h>

static ft_ctx *ctx;

static ft_json *parse(const char *text) {
    ft_json *j = NULL;
    ft_status st = ft_json_parse(ctx, text, strlen(text), "t.json", &j);
    CHECK(st == FT_OK, "parse of %s failed: %s", text, ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    return j;
}

static void test_json_values(void) {
    ft_json *j = parse(
        " {\"a\": [1, -2.5, true, false, null, \"s\", {}, []], \"b\": {\"c\": 3}, \"a\": 7}\r\n\t");
    CHECK(ft_json_type_of(j) == FT_JSON_OBJECT && ft_json_len(j) == 3, "root");
    CHECK(!strcmp(ft_json_key_at(j, 0), "a") && !strcmp(ft_json_key_at(j, 2), "a"),
          "keys in order");
    const ft_json *a = ft_json_at(j, 0);
    CHECK(ft_json_type_of(a) == FT_JSON_ARRAY && ft_json_len(a) == 8, "array");
    CHECK(ft_json_is_integer(ft_json_at(a, 0)) && ft_json_int(ft_json_at(a, 0)) == 1, "1");
    CHECK(!ft_json_is_integer(ft_json_at(a, 1)) && ft_json_number(ft_json_at(a, 1)) == -2.5,
          "-2.5");
    CHECK(ft_json_bool(ft_json_at(a, 2)) && !ft_json_bool(ft_json_at(a, 3)), "bools");
    CHECK(ft_json_type_of(ft_json_at(a, 4)) == FT_JSON_NULL, "null");
    CHECK(!strcmp(ft_json_string(ft_json_at(a, 5)), "s"), "string");
    CHECK(ft_json_type_of(ft_json_at(a, 6)) == FT_JSON_OBJECT && ft_json_len(ft_json_at(a, 6)) == 0,
          "{}");
    CHECK(ft_json_type_of(ft_json_at(a, 7)) == FT_JSON_ARRAY && ft_json_len(ft_json_at(a, 7)) == 0,
          "[]");
    /* a repeated key: ft_json_get returns the last one */
    CHECK(ft_json_int(ft_json_get(j, "a")) == 7, "last duplicate wins");
    CHECK(ft_json_int(ft_json_get(ft_json_get(j, "b"), "c")) == 3, "nested");
    CHECK(ft_json_get(j, "zz") == NULL && ft_json_at(a, 8) == NULL && ft_json_at(a, -1) == NULL,
          "out of range");
    /* accessors on the wrong type or NULL return neutral values */
    CHECK(ft_json_string(ft_json_at(a, 0)) == NULL && ft_json_number(ft_json_at(a, 5)) == 0,
          "wrong type");
    CHECK(ft_json_get(a, "x") == NULL && ft_json_key_at(a, 0) == NULL && ft_json_len(NULL) == 0,
          "NULL-safe");
    CHECK(!strcmp(ft_json_type_name(FT_JSON_BOOL), "boolean"), "type name");
    ft_json_free(j);
    ft_json_free(NULL);

    /* top-level scalars and a byte order mark */
    j = parse("\xef\xbb\xbf 42 ");
    CHECK(ft_json_int(j) == 42, "BOM then 42");
    ft_json_free(j);
    j = parse("\"top\"");
    CHECK(ft_json_type_of(j) == FT_JSON_STRING, "top-level string");
    ft_json_free(j);
}

static void test_json_numbers(void) {
    struct {
        const char *text;
        bool is_int;
        int64_t i;
        double d;
    } cases[] = {
        {"0", true, 0, 0},
        {"-0", true, 0, -0.0},
        {"768", true, 768, 768},
        {"12.0", false, 12, 12},
        {"1e3", false, 1000, 1000},
        {"1E+3", false, 1000, 1000},
        {"2.5e-1", false, 0, 0.25},
        {"-1.5E2", false, -150, -150},
        {"9223372036854775807", true, INT64_MAX, 9223372036854775807.0},
        {"-9223372036854775808", true, INT64_MIN, -9223372036854775808.0},
        {"9223372036854775808", false, 0, 9223372036854775808.0},
        {"123456789012345678901234567890", false, 0, 1.2345678901234568e29},
        {"1e-400", false, 0, 0.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_json *j = parse(cases[i].text);
        CHECK(ft_json_type_of(j) == FT_JSON_NUMBER, "%s: not a number", cases[i].text);
        CHECK(ft_json_is_integer(j) == cases[i].is_int, "%s: is_integer %d", cases[i].text,
              ft_json_is_integer(j));
        if (cases[i].is_int)
            CHECK(ft_json_int(j) == cases[i].i, "%s: int %lld", cases[i].text,
                  (long long)ft_json_int(j));
        double d = ft_json_number(j), want = cases[i].d;
        CHECK(d == want || (d - want) / want < 1e-15, "%s: value %.17g", cases[i].text, d);
        ft_json_free(j);
    }
}

static void test_json_strings(void) {
    ft_json *j = parse(
        "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u00e9\\u20AC\", \"\\uD83D\\uDE00\", \"a\\u0000b\","
        " \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", \"\"]");
    CHECK(ft_json_len(j) == 6, "len %d", ft_json_len(j));
    CHECK(!strcmp(ft_json_string(ft_json_at(j, 0)), "\"\\/\b\f\n\r\t"), "simple escapes");
    CHECK(!strcmp(ft_json_string(ft_json_at(j, 1)), "\xc3\xa9\xe2\x82\xac"),
          "\\u00e9\\u20AC to UTF-8");
    CHECK(!strcmp(ft_json_string(ft_json_at(j, 2)), "\xf0\x9f\x98\x80"), "surrogate pair to UTF-8");
    const ft_json *nul = ft_json_at(j, 3);
    CHECK(ft_json_string_len(nul) == 3 && !memcmp(ft_json_string(nul), "a\0b", 3), "\\u0000 kept");
    CHECK(!strcmp(ft_json_string(ft_json_at(j, 4)), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
          "raw UTF-8");
    CHECK(ft_json_string_len(ft_json_at(j, 5)) == 0, "empty string");
    ft_json_free(j);
}

typedef struct err_case {
    const char *text;
    int line, col;
    const char *what; /* a phrase the message must contain */
} err_case;

static const err_case err_cases[] = {
    {"{\"a\":1,}", 1, 8, "trailing comma"},
    {"[1,2,]", 1, 6, "trailing comma"},
    {"[1,2,\n  ]", 2, 3, "trailing comma"},
    {"01", 1, 1, "leading zero"},
    {"[-012]", 1, 2, "leading zero"},
    {"+1", 1, 1, "'+'"},
    {"NaN", 1, 1, "NaN"},
    {"[Infinity]", 1, 2, "Infinity"},
    {"-Infinity", 1, 1, "Infinity"},
    {".5", 1, 1, "digit"},
    {"1.", 1, 3, "after '.'"},
    {"1.e5", 1, 3, "after '.'"},
    {"1e", 1, 3, "exponent"},
    {"1e+", 1, 4, "exponent"},
    {"-", 1, 2, "after '-'"},
    {"1e400", 1, 1, "range"},
    {"// c\n{}", 1, 1, "comments"},
    {"{} /* c */", 1, 4, "after the JSON value"},
    {"{\"a\":1} x", 1, 9, "after the JSON value"},
    {"[1] [2]", 1, 5, "after the JSON value"},
    {"{'a':1}", 1, 2, "string key"},
    {"'a'", 1, 1, "double quotes"},
    {"\"\\uD800\"", 1, 2, "surrogate"},
    {"\"\\uDC00\"", 1, 2, "surrogate"},
    {"\"\\uD800\\u0041\"", 1, 2, "surrogate"},
    {"\"ab\\x\"", 1, 4, "escape"},
    {"\"\\u12G4\"", 1, 2, "hex"},
    {"\"abc", 1, 1, "unterminated"},
    {"[\"a\tb\"]", 1, 4, "control character"},
    {"\"\xff\"", 1, 2, "UTF-8"},
    {"\"\xc0\xaf\"", 1, 2, "UTF-8"},
    {"\"\xed\xa0\x80\"", 1, 2, "UTF-8"},
    {"\"\xe2\x82\"", 1, 2, "UTF-8"},
    {"tru", 1, 1, "literal"},
    {"[nul]", 1, 2, "literal"},
    {"True", 1, 1, "expected a value"},
    {"", 1, 1, "end of input"},
    {"  \n ", 2, 2, "end of input"},
    {"[1 2]", 1, 4, "','"},
    {"{\"a\" 1}", 1, 6, "':'"},
    {"{1:2}", 1, 2, "string key"},
    {"{\"a\":}", 1, 6, "expected a value"},
    {"[1,,2]", 1, 4, "expected a value"},
    {"{\n  \"hidden\": 64,\n  \"b\": tru\n}", 3, 8, "literal"},
    {"[", 1, 2, "end of input"},
    {"{\"a\":1", 1, 7, "end of input"},
};

static void test_json_errors(void) {
    for (size_t i = 0; i < sizeof err_cases / sizeof err_cases[0]; i++) {
        const err_case *c = &err_cases[i];
        ft_json *j = (ft_json *)&ctx;
        ft_status st = ft_json_parse(ctx, c->text, strlen(c->text), "src.json", &j);
        const char *msg = ft_ctx_errmsg(ctx);
        char prefix[64];
        snprintf(prefix, sizeof prefix, "src.json:%d:%d: ", c->line, c->col);
        CHECK(st == FT_ERR_FORMAT, "case %zu %s: status %s", i, c->text, ft_status_str(st));
        CHECK(j == NULL, "case %zu: out not reset", i);
        CHECK(!strncmp(msg, prefix, strlen(prefix)), "case %zu %s: want prefix '%s', got '%s'", i,
              c->text, prefix, msg);
        CHECK(strstr(msg, c->what) != NULL, "case %zu %s: message lacks '%s': %s", i, c->text,
              c->what, msg);
        if (st == FT_OK) ft_json_free(j);
        ft_ctx_clear_error(ctx);
    }
    /* a length shorter than the text: the parser must not read past it */
    const char *t = "[1, 2]";
    ft_json *j = NULL;
    CHECK(ft_json_parse(ctx, t, 5, "cut", &j) == FT_ERR_FORMAT &&
              strstr(ft_ctx_errmsg(ctx), "cut:1:6:"),
          "cut text: %s", ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    /* an embedded NUL is a character like any other, not the end */
    CHECK(ft_json_parse(ctx, "[1]\0x", 5, "nul", &j) == FT_ERR_FORMAT &&
              strstr(ft_ctx_errmsg(ctx), "nul:1:4:"),
          "embedded NUL: %s", ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    CHECK(ft_json_parse(ctx, "1", 1, "x", NULL) == FT_ERR_INVALID_ARG, "NULL out accepted");
    ft_ctx_clear_error(ctx);
}

static void test_json_depth(void) {
    enum { N = 300 };
    char text[2 * N + 8];
    /* 256 levels parse, 257 do not */
    for (int depth = 255; depth <= 257; depth++) {
        int k = 0;
        for (int i = 0; i < depth; i++)
            text[k++] = '[';
        for (int i = 0; i < depth; i++)
            text[k++] = ']';
        text[k] = 0;
        ft_json *j = NULL;
        ft_status st = ft_json_parse(ctx, text, (size_t)k, "deep", &j);
        if (depth <= 256) {
            CHECK(st == FT_OK, "depth %d rejected: %s", depth, ft_ctx_errmsg(ctx));
        } else {
            CHECK(st == FT_ERR_FORMAT && strstr(ft_ctx_errmsg(ctx), "nesting") &&
                      strstr(ft_ctx_errmsg(ctx), "deep:1:257:"),
                  "depth %d: %s %s", depth, ft_status_str(st), ft_ctx_errmsg(ctx));
        }
        ft_json_free(j);
        ft_ctx_clear_error(ctx);
    }
    /* objects count too, and far deeper input fails cleanly rather than overflowing the stack */
    ft_json *j = NULL;
    CHECK(ft_json_parse(ctx,
                        "{\"a\":"
                        "{\"a\":"
                        "1}}",
                        13, "obj", &j) == FT_OK,
          "nested objects");
    ft_json_free(j);
    j = NULL;
    ft_status st = ft_json_parse(ctx, "[{\"a\":[{\"b\":[]}]}]", 18, "mixed", &j);
    CHECK(st == FT_OK, "mixed nesting: %s", ft_ctx_errmsg(ctx));
    ft_json_free(j);
    ft_ctx_clear_error(ctx);
    char arr[20001];
    memset(arr, '[', 20000);
    arr[20000] = 0;
    CHECK(ft_json_parse(ctx, arr, 20000, "arr", &j) == FT_ERR_FORMAT &&
              strstr(ft_ctx_errmsg(ctx), "nesting"),
          "20000 '[': %s", ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
}

static void test_json_file(void) {
    char dir[] = "/tmp/ft_json_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/c.json", dir);
    FILE *fp = fopen(path, "wb");
    if (fp) {
        fputs("{\n  \"x\": 1,\n  \"y\": [1, 2,]\n}\n", fp);
        fclose(fp);
    }
    ft_json *j = NULL;
    ft_status st = ft_json_parse_file(ctx, path, &j);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s:3:14: ", path);
    CHECK(st == FT_ERR_FORMAT && !strncmp(ft_ctx_errmsg(ctx), prefix, strlen(prefix)),
          "file error: %s", ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    remove(path);
    st = ft_json_parse_file(ctx, path, &j);
    CHECK(st == FT_ERR_IO && strstr(ft_ctx_errmsg(ctx), "c.json"), "missing file: %s",
          ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    st = ft_json_parse_file(ctx, dir, &j);
    CHECK(st == FT_ERR_IO && strstr(ft_ctx_errmsg(ctx), "directory"), "directory: %s",
          ft_ctx_errmsg(ctx));
    ft_ctx_clear_error(ctx);
    rmdir(dir);
}

int main(void) {
    (void)ft_test_golden_dir; /* shared harness helper this test has no use for */
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) return 1;
    RUN(test_json_values);
    RUN(test_json_numbers);
    RUN(test_json_strings);
    RUN(test_json_errors);
    RUN(test_json_depth);
    RUN(test_json_file);
    ft_ctx_free(ctx);
    return ft_test_finish();
}

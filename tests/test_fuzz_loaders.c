/*
 * test_fuzz_loaders.c - deterministic mutation testing of everything a user's
 * files reach: the JSON parser and config getters, the safetensors reader, and
 * a whole model load (+ forward) from a golden case whose config.json or
 * model.safetensors header was mutated (bytes flipped, inserted, deleted,
 * numbers and keys replaced, files truncated). Every mutant must either load
 * or fail with a status and a non-empty message; never crash (run it under
 * `make SANITIZE=1` to catch memory errors too). A fixed seed keeps it
 * repeatable; FT_FUZZ_ITERS raises the count and FT_FUZZ_SEED changes the
 * sequence for longer local runs.
 */
#include "config.h"
#include "ft_golden.h"
#include "ft_test.h"
#include "json.h"
#include "safetensors.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* Under AddressSanitizer a huge calloc (a mutated layer count) must return NULL
 * as libc's does, so the engine's own out-of-memory path is what gets tested. */
__attribute__((used)) const char *__asan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = (char *)malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        *len = (size_t)n;
    }
    return b;
}

static int write_all(const char *path, const char *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(buf, 1, len, f);
    fclose(f);
    return w == len ? 0 : -1;
}

/* Tokens a mutation may splice in: the values that break parsers and shape logic. */
static const char *const tokens[] = {
    "0", "-1", "1e309", "-0", "4294967297", "9223372036854775807", "1.5", "null", "true",
    "[]", "{}", "\"\"", "\"x\"", "[1,2", "{\"a\":", "\\u0000", "\"\\ud800\"", ",", ":", "]]]]",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "\"F64\"", "\"I8\"", "[0,0]", "[99999999,1]", "NaN",
};

/* One random edit of buf[0..len) into out (capacity cap); returns the new length. */
static size_t mutate(const char *buf, size_t len, char *out, size_t cap, size_t lo) {
    size_t span = len > lo ? len - lo : 1;
    size_t at = lo + (size_t)(rnd() % span);
    size_t n = 0;
    switch (rnd() % 6) {
    case 0: /* flip one byte */
        memcpy(out, buf, len);
        if (at < len) out[at] = (char)(out[at] ^ (1u << (rnd() % 8)));
        return len;
    case 1: /* truncate */
        memcpy(out, buf, at);
        return at;
    case 2: { /* delete a run */
        size_t k = 1 + (size_t)(rnd() % 16);
        if (at + k > len) k = len - at;
        memcpy(out, buf, at);
        memcpy(out + at, buf + at + k, len - at - k);
        return len - k;
    }
    case 3: { /* replace a digit run with a token */
        while (at < len && !(buf[at] >= '0' && buf[at] <= '9')) at++;
        size_t e = at;
        while (e < len && buf[e] >= '0' && buf[e] <= '9') e++;
        const char *t = tokens[rnd() % (sizeof tokens / sizeof tokens[0])];
        size_t tl = strlen(t);
        if (len - (e - at) + tl > cap) return 0;
        memcpy(out, buf, at);
        memcpy(out + at, t, tl);
        memcpy(out + at + tl, buf + e, len - e);
        return len - (e - at) + tl;
    }
    case 4: { /* insert a token */
        const char *t = tokens[rnd() % (sizeof tokens / sizeof tokens[0])];
        size_t tl = strlen(t);
        if (len + tl > cap) return 0;
        memcpy(out, buf, at);
        memcpy(out + at, t, tl);
        memcpy(out + at + tl, buf + at, len - at);
        return len + tl;
    }
    default: /* duplicate a run (repeated keys, longer arrays) */
        n = 1 + (size_t)(rnd() % 24);
        if (at + n > len) n = len - at;
        if (len + n > cap) return 0;
        memcpy(out, buf, at + n);
        memcpy(out + at + n, buf + at, len - at);
        return len + n;
    }
}

static int iters(int dflt) {
    const char *v = getenv("FT_FUZZ_ITERS");
    int n = v ? atoi(v) : 0;
    return n > 0 ? n : dflt;
}

/* A failed load must say why; a successful one must leave no error behind. */
static void check_outcome(ft_ctx *ctx, ft_status st, const char *what, int i) {
    if (st == FT_OK) return;
    CHECK(ft_ctx_errmsg(ctx)[0] != 0, "%s mutant %d: status %s without a message", what, i,
          ft_status_str(st));
    ft_ctx_clear_error(ctx);
}

static void test_fuzz_json_config(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    const char *cases[] = {"bert", "funnel", "mobilebert", "resnet", "wavlm"};
    int n = iters(400), failed_loads = 0;
    for (size_t c = 0; ctx && c < 5; c++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s/config.json", ft_test_golden_dir(), cases[c]);
        size_t len = 0;
        char *src = read_all(path, &len);
        CHECK(src != NULL, "cannot read %s", path);
        if (!src) continue;
        size_t cap = len + 256;
        char *mut = (char *)malloc(cap + 1);
        for (int i = 0; mut && i < n; i++) {
            size_t ml = mutate(src, len, mut, cap, 0);
            mut[ml] = 0;
            ft_json *j = NULL;
            ft_status st = ft_json_parse(ctx, mut, ml, "mutant.json", &j);
            check_outcome(ctx, st, "json", i);
            ft_json_free(j);
            ft_config cfg;
            memset(&cfg, 0, sizeof cfg);
            st = ft_config_from_string(ctx, mut, "mutant.json", &cfg);
            if (st == FT_OK) {
                /* a config that parses still has to make a model or say why not */
                ft_model *m = NULL;
                ft_model_options o = ft_model_options_default();
                char dir[] = "/tmp/ft_fuzz_cfg_XXXXXX";
                if (mkdtemp(dir)) {
                    char p2[600], p3[600];
                    snprintf(p2, sizeof p2, "%s/config.json", dir);
                    snprintf(p3, sizeof p3, "%s/%s/model.safetensors", ft_test_golden_dir(), cases[c]);
                    char p4[600], abs3[4096];
                    snprintf(p4, sizeof p4, "%s/model.safetensors", dir);
                    if (write_all(p2, mut, ml) == 0 && realpath(p3, abs3) && symlink(abs3, p4) == 0) {
                        st = ft_model_load(ctx, dir, &o, &m);
                        failed_loads += st != FT_OK;
                        check_outcome(ctx, st, "model load (config)", i);
                        ft_model_free(m);
                    }
                    unlink(p4);
                    unlink(p2);
                    rmdir(dir);
                }
            } else {
                check_outcome(ctx, st, "config", i);
            }
            ft_config_free(&cfg);
        }
        free(mut);
        free(src);
    }
    printf("  %d config mutants per case, %d model loads refused with a message\n", n, failed_loads);
    ft_ctx_free(ctx);
}

static void test_fuzz_safetensors(void) {
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    const char *cases[] = {"bert", "resnet"};
    int n = iters(300), opened = 0;
    char dir[] = "/tmp/ft_fuzz_st_XXXXXX";
    if (!ctx || !mkdtemp(dir)) {
        CHECK(0, "setup failed");
        ft_ctx_free(ctx);
        return;
    }
    for (size_t c = 0; c < 2; c++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s/model.safetensors", ft_test_golden_dir(), cases[c]);
        size_t len = 0;
        char *src = read_all(path, &len);
        CHECK(src != NULL && len > 8, "cannot read %s", path);
        if (!src || len <= 8) {
            free(src);
            continue;
        }
        uint64_t hlen = 0;
        for (int b = 0; b < 8; b++) hlen |= (uint64_t)(unsigned char)src[b] << (8 * b);
        size_t cap = len + 256;
        char *mut = (char *)malloc(cap);
        char cfg_src[600], cfg_dst[600], st_path[600];
        snprintf(cfg_src, sizeof cfg_src, "%s/%s/config.json", ft_test_golden_dir(), cases[c]);
        snprintf(cfg_dst, sizeof cfg_dst, "%s/config.json", dir);
        snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
        size_t cl = 0;
        char *cfg = read_all(cfg_src, &cl);
        if (cfg) write_all(cfg_dst, cfg, cl);
        free(cfg);
        for (int i = 0; mut && i < n; i++) {
            /* mostly the header (where the structure is), sometimes the length prefix */
            size_t ml;
            if (rnd() % 8 == 0) {
                memcpy(mut, src, len);
                mut[rnd() % 8] = (char)rnd();
                ml = len;
            } else {
                char *hdr = (char *)malloc((size_t)hlen + 256);
                size_t hl = hdr ? mutate(src + 8, (size_t)hlen, hdr, (size_t)hlen + 256, 0) : 0;
                if (!hdr || 8 + hl + (len - 8 - hlen) > cap) {
                    free(hdr);
                    continue;
                }
                for (int b = 0; b < 8; b++) mut[b] = (char)((uint64_t)hl >> (8 * b));
                memcpy(mut + 8, hdr, hl);
                memcpy(mut + 8 + hl, src + 8 + hlen, len - 8 - hlen);
                ml = 8 + hl + (len - 8 - hlen);
                free(hdr);
            }
            if (write_all(st_path, mut, ml) != 0) continue;
            ft_st_file *f = NULL;
            ft_status st = ft_st_open(ctx, st_path, &f);
            opened += st == FT_OK;
            check_outcome(ctx, st, "safetensors", i);
            ft_st_close(f);
            ft_model *m = NULL;
            ft_model_options o = ft_model_options_default();
            st = ft_model_load(ctx, dir, &o, &m);
            check_outcome(ctx, st, "model load (weights)", i);
            ft_model_free(m);
        }
        free(mut);
        free(src);
    }
    printf("  %d weight-file mutants per case, %d still opened\n", n, opened);
    char p[640];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    rmdir(dir);
    ft_ctx_free(ctx);
}

int main(void) {
    const char *seed = getenv("FT_FUZZ_SEED");
    if (seed && strtoull(seed, NULL, 0)) rng_state = strtoull(seed, NULL, 0);
    RUN(test_fuzz_json_config);
    RUN(test_fuzz_safetensors);
    return ft_test_finish();
}

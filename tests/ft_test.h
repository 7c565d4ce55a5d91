/*
 * ft_test.h - the tiny test harness every tests/test_*.c uses.
 *
 *   static void test_something(void) {
 *       CHECK(x == 3, "x is %d", x);      // records a failure, keeps going
 *       if (!have_gpu) { SKIP("no CUDA device"); return; }
 *   }
 *   int main(void) { RUN(test_something); return ft_test_finish(); }
 *
 * Each RUN counts one test as passed, failed or skipped. ft_test_finish prints
 * "RESULT: P passed, F failed, S skipped", which tests/run_tests.sh adds up.
 * Set FT_TEST_FILTER=substring to run only matching tests.
 */
#ifndef FT_TEST_H
#define FT_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ft_t_pass, ft_t_fail, ft_t_skip;
static int ft_t_cur_fail, ft_t_cur_skip;
static const char *ft_t_cur_name;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            if (ft_t_cur_fail < 8) {                                              \
                printf("  FAIL %s (%s:%d): ", ft_t_cur_name, __FILE__, __LINE__); \
                printf(__VA_ARGS__);                                              \
                printf("\n");                                                     \
            }                                                                     \
            ft_t_cur_fail++;                                                      \
        }                                                                         \
    } while (0)

/* CHECK that an ft_status call succeeded; prints the context's message if not. */
#define CHECK_OK(ctx, expr)                                                           \
    do {                                                                              \
        ft_status st_ = (expr);                                                       \
        CHECK(st_ == FT_OK, "%s -> %s: %s", #expr, ft_status_str(st_),                \
              (ctx) ? ft_ctx_errmsg(ctx) : "");                                       \
    } while (0)

#define SKIP(...)                                        \
    do {                                                 \
        printf("  SKIP %s: ", ft_t_cur_name);            \
        printf(__VA_ARGS__);                             \
        printf("\n");                                    \
        ft_t_cur_skip = 1;                               \
    } while (0)

static void ft_test_run(void (*fn)(void), const char *name) {
    const char *filter = getenv("FT_TEST_FILTER");
    if (filter && *filter && !strstr(name, filter)) return;
    ft_t_cur_name = name;
    ft_t_cur_fail = 0;
    ft_t_cur_skip = 0;
    fn();
    if (ft_t_cur_fail) {
        ft_t_fail++;
        printf("FAIL %s (%d checks failed)\n", name, ft_t_cur_fail);
    } else if (ft_t_cur_skip) {
        ft_t_skip++;
    } else {
        ft_t_pass++;
        printf("ok   %s\n", name);
    }
    fflush(stdout);
}

#define RUN(fn) ft_test_run(fn, #fn)

static int ft_test_finish(void) {
    printf("RESULT: %d passed, %d failed, %d skipped\n", ft_t_pass, ft_t_fail, ft_t_skip);
    return ft_t_fail ? 1 : 0;
}

/* Directory of the in-tree golden cases (tests/golden), overridable. */
static __attribute__((unused)) const char *ft_test_golden_dir(void) {
    const char *d = getenv("FT_GOLDEN_DIR");
    return d && *d ? d : "tests/golden";
}

/* A fresh temporary directory /tmp/ft_test_<tag>_XXXXXX for files a test writes
 * (tmpdir[0] is 0 if it could not be made), and its removal with what is in it. */
static char tmpdir[256];

static __attribute__((unused)) void ft_test_tmpdir_make(const char *tag) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ft_test_%s_XXXXXX", tag);
    if (!mkdtemp(tmpdir)) tmpdir[0] = 0;
}

static __attribute__((unused)) void ft_test_tmpdir_remove(void) {
    char cmd[300];
    if (!tmpdir[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    tmpdir[0] = 0;
}

#endif /* FT_TEST_H */

/*
 * test_threads.c - several contexts used at once from several threads: each
 * thread makes its own CPU context and runs every golden case (tests/golden)
 * in every mode, twice, checking the outputs against the expected ones. The
 * library keeps no unsynchronised state shared between contexts; this is the
 * program `make tsan-test` runs under ThreadSanitizer (docs/architecture.md,
 * "Testing for data races"), where any such state is a report.
 *
 * The threads record their failures; only the main thread touches the test
 * harness (its counters are not thread-safe).
 */
#include "ft_test.h"
#include "ft_golden.h"

#include <pthread.h>

#define N_THREADS 3

static const char *const cases[] = {"bert", "funnel", "mobilebert", "resnet", "wavlm", "mobilenet_v2", "efficientnet",
                                    "convnext"};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))
static const ft_mode modes[] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};

typedef struct {
    int index;
    int runs, fails;
    char first[512];
} job;

static void fail(job *j, const char *fmt, const char *a, const char *b, const char *c) {
    if (!j->fails++) snprintf(j->first, sizeof j->first, fmt, a, b, c);
}

static void *worker(void *arg) {
    job *j = (job *)arg;
    ft_ctx_options o = ft_ctx_options_default();
    ft_ctx *ctx = NULL;
    if (ft_ctx_create_ex(&o, &ctx) != FT_OK) {
        fail(j, "thread: no context%s%s%s", "", "", "");
        return NULL;
    }
    /* each thread starts at another case, so different models run at the same time */
    for (int k = 0; k < N_CASES; k++) {
        const char *name = cases[(k + j->index) % N_CASES];
        for (int mi = 0; mi < 3; mi++) {
            golden_case g;
            if (golden_open(ctx, name, &g) != 0) {
                fail(j, "%s: %s%s", name, ft_ctx_errmsg(ctx), "");
                ft_ctx_clear_error(ctx);
                golden_close(&g);
                continue;
            }
            ft_model_options mo = ft_model_options_default();
            mo.mode = modes[mi];
            ft_model *m = NULL;
            if (ft_model_load(ctx, g.dir, &mo, &m) != FT_OK) {
                fail(j, "%s %s: %s", name, ft_mode_name(modes[mi]), ft_ctx_errmsg(ctx));
                ft_ctx_clear_error(ctx);
                golden_close(&g);
                continue;
            }
            for (int rep = 0; rep < 2; rep++) {
                j->runs++;
                if (ft_model_forward(m, g.in, g.n_in) != FT_OK) {
                    fail(j, "%s %s forward: %s", name, ft_mode_name(modes[mi]), ft_ctx_errmsg(ctx));
                    ft_ctx_clear_error(ctx);
                    break;
                }
                int compared = 0;
                for (int i = 0; i < ft_model_output_count(m); i++) {
                    const ft_st_tensor *e = ft_st_find(g.expected, ft_model_output_name(m, i));
                    if (!e) continue;
                    char msg[400];
                    if (golden_compare(ctx, ft_model_output(m, i), e, GOLDEN_FP32, msg, sizeof msg) != 0)
                        fail(j, "%s %s: %s", name, ft_mode_name(modes[mi]), msg);
                    compared++;
                }
                if (!compared) fail(j, "%s %s: no output compared%s", name, ft_mode_name(modes[mi]), "");
            }
            ft_model_free(m);
            golden_close(&g);
        }
    }
    ft_ctx_free(ctx);
    return NULL;
}

static void test_threads_golden_every_mode(void) {
    pthread_t t[N_THREADS];
    job jobs[N_THREADS];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < N_THREADS; i++) {
        jobs[i].index = i;
        CHECK(pthread_create(&t[i], NULL, worker, &jobs[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < N_THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N_THREADS; i++) {
        CHECK(jobs[i].fails == 0, "thread %d: %d failures, first: %s", i, jobs[i].fails, jobs[i].first);
        CHECK(jobs[i].runs == N_CASES * 3 * 2, "thread %d ran %d forwards, not %d", i, jobs[i].runs, N_CASES * 3 * 2);
    }
}

int main(void) {
    RUN(test_threads_golden_every_mode);
    return ft_test_finish();
}

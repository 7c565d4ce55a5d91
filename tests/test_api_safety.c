/*
 * test_api_safety.c - misuse of the public API refused with a clear error, never
 * memory corruption (issue 27; NULL arguments: tests/test_api_null.sh):
 *   - one model run from two threads at once: the second call is FT_ERR_BUSY
 *     (seen from that thread only), the first thread's forwards all succeed and
 *     the outputs stay right, in eager and in graph mode; ops too;
 *   - tensors of another context refused by ops, views, copies and release;
 *   - negative sizes and lengths refused (ft_model_macs, example inputs,
 *     shapes, dims, profiler options);
 *   - every FT_* environment knob with a bad value makes context creation fail
 *     with a message naming it (FT_OP_HOST_COST_US=inf must not hang);
 *   - example inputs with owned == NULL: shapes only, nothing allocated, so MACs
 *     of a huge batch are counted without memory;
 *   - a config whose model_type holds NUL, and size keys out of range, named.
 */
#include "ft_test.h"
#include "ftengine.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>

static ft_ctx *new_ctx(void) {
    ft_ctx_options o = ft_ctx_options_default();
    o.cpu_threads = 1;
    ft_ctx *c = NULL;
    return ft_ctx_create_ex(&o, &c) == FT_OK ? c : NULL;
}

/* ---- two threads on one model ---- */

typedef struct worker {
    ft_model *m;
    const ft_host_tensor *in;
    int n_in, want_ok, ok, busy, other;
    char other_msg[256];
} worker;

static void *work(void *arg) {
    worker *w = (worker *)arg;
    ft_ctx *ctx = NULL;
    for (int k = 0; w->ok < w->want_ok && k < 200000; k++) {
        ft_status st = ft_model_forward(w->m, w->in, w->n_in);
        if (st == FT_OK) w->ok++;
        else if (st == FT_ERR_BUSY) w->busy++;
        else if (!w->other++) snprintf(w->other_msg, sizeof w->other_msg, "%s", ft_status_str(st));
        if (st != FT_OK) usleep(100); /* let the other one finish its forward */
        else sched_yield();
    }
    (void)ctx;
    return NULL;
}

static void two_threads(ft_mode mode) {
    ft_ctx *ctx = new_ctx();
    ft_model *m = NULL;
    ft_model_options mo = ft_model_options_default();
    mo.mode = mode;
    CHECK(ctx && ft_model_load(ctx, "bert-tiny", &mo, &m) == FT_OK, "load: %s", ctx ? ft_ctx_errmsg(ctx) : "");
    if (!m) {
        ft_ctx_free(ctx);
        return;
    }
    ft_host_tensor in[8];
    int n_in = 0;
    void *owned = NULL;
    CHECK_OK(ctx, ft_model_example_inputs(m, 4, 64, in, &n_in, &owned));
    CHECK_OK(ctx, ft_model_forward(m, in, n_in));
    ft_tensor *h = ft_model_output_find(m, "last_hidden_state");
    int64_t n = ft_tensor_numel(h);
    float *ref = (float *)malloc((size_t)n * sizeof(float)), *got = (float *)malloc((size_t)n * sizeof(float));
    CHECK_OK(ctx, ft_tensor_to_host(ctx, h, FT_DTYPE_F32, ref, (size_t)n * sizeof(float)));
    /* eager forwards long enough that the other thread meets one */
    CHECK_OK(ctx, ft_ctx_set_op_host_cost(ctx, mode == FT_MODE_EAGER ? 20 : 0));
    worker a = {m, in, n_in, 0, 0, 0, 0, ""}, b = {m, in, n_in, 0, 0, 0, 0, ""};
    /* rounds of 40 forwards each until the threads have met (on a loaded host they
     * may take turns for a while) */
    for (int round = 0; round < 20 && (round == 0 || a.busy + b.busy == 0); round++) {
        a.want_ok += 40;
        b.want_ok += 40;
        pthread_t ta, tb;
        pthread_create(&ta, NULL, work, &a);
        pthread_create(&tb, NULL, work, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
    }
    CHECK(a.ok == a.want_ok && b.ok == b.want_ok, "%s: forwards done %d and %d of %d", ft_mode_name(mode), a.ok,
          b.ok, a.want_ok);
    CHECK(!a.other && !b.other, "%s: a forward failed otherwise than busy: %s%s", ft_mode_name(mode), a.other_msg,
          b.other_msg);
    CHECK(a.busy + b.busy > 0, "%s: no call was refused as busy in %d + %d forwards", ft_mode_name(mode), a.ok, b.ok);
    CHECK(ft_ctx_status(ctx) == FT_OK, "%s: the context holds %s: %s", ft_mode_name(mode),
          ft_status_str(ft_ctx_status(ctx)), ft_ctx_errmsg(ctx));
    /* the model still computes what it computed alone */
    CHECK_OK(ctx, ft_model_forward(m, in, n_in));
    h = ft_model_output_find(m, "last_hidden_state");
    CHECK(h && ft_tensor_numel(h) == n, "output shape changed");
    if (h && ft_tensor_numel(h) == n) {
        CHECK_OK(ctx, ft_tensor_to_host(ctx, h, FT_DTYPE_F32, got, (size_t)n * sizeof(float)));
        int same = 1;
        for (int64_t i = 0; i < n; i++) same &= got[i] == ref[i];
        CHECK(same, "%s: outputs differ after the two threads", ft_mode_name(mode));
    }
    free(ref);
    free(got);
    free(owned);
    ft_model_free(m);
    ft_ctx_free(ctx);
}

static void test_two_threads_eager(void) { two_threads(FT_MODE_EAGER); }
static void test_two_threads_graph(void) { two_threads(FT_MODE_GRAPH); }

typedef struct holder {
    ft_model *m;
    const ft_host_tensor *in;
    int n_in;
    volatile int stop;
} holder;

static void *hold(void *arg) {
    holder *h = (holder *)arg;
    while (!h->stop) ft_model_forward(h->m, h->in, h->n_in);
    return NULL;
}

/* While one thread runs forwards, the other's ops and copies are refused as busy,
 * reported to it alone. */
static void test_busy_reported_to_caller(void) {
    ft_ctx *ctx = new_ctx();
    ft_model *m = NULL;
    ft_model_options mo = ft_model_options_default();
    CHECK(ctx && ft_model_load(ctx, "bert-tiny", &mo, &m) == FT_OK, "load");
    if (!m) {
        ft_ctx_free(ctx);
        return;
    }
    ft_host_tensor in[8];
    int n_in = 0;
    void *owned = NULL;
    CHECK_OK(ctx, ft_model_example_inputs(m, 1, 16, in, &n_in, &owned));
    float v[4] = {1, 2, 3, 4};
    ft_tensor *x = ft_tensor_from_host(ctx, FT_DTYPE_F32, 1, (const int64_t[]){4}, v);
    CHECK_OK(ctx, ft_ctx_set_op_host_cost(ctx, 200)); /* each forward ~ tens of ms */
    holder h = {m, in, n_in, 0};
    pthread_t t;
    pthread_create(&t, NULL, hold, &h);
    int busy_op = 0, busy_copy = 0, busy_fwd = 0, msg_ok = 0;
    for (int k = 0; k < 2000 && !(busy_op && busy_copy && busy_fwd); k++) {
        if (!busy_op && !ft_add(ctx, x, x) && ft_ctx_status(ctx) == FT_ERR_BUSY) {
            busy_op = 1;
            msg_ok = strstr(ft_ctx_errmsg(ctx), "another thread") != NULL;
        }
        float out[4];
        if (!busy_copy && ft_tensor_to_host(ctx, x, FT_DTYPE_F32, out, sizeof out) == FT_ERR_BUSY) busy_copy = 1;
        if (!busy_fwd && ft_model_forward(m, in, n_in) == FT_ERR_BUSY) busy_fwd = 1;
        usleep(1000);
    }
    h.stop = 1;
    pthread_join(t, NULL);
    CHECK(busy_op && busy_copy && busy_fwd, "busy refusals: op %d, copy %d, forward %d", busy_op, busy_copy, busy_fwd);
    CHECK(msg_ok, "the busy message does not say why");
    /* the refusal was this thread's: once it uses the context again, all is well */
    ft_ctx_clear_error(ctx);
    CHECK(ft_ctx_status(ctx) == FT_OK, "after the other thread: %s", ft_ctx_errmsg(ctx));
    CHECK(ft_add(ctx, x, x) != NULL, "an op after the other thread: %s", ft_ctx_errmsg(ctx));
    free(owned);
    ft_model_free(m);
    ft_ctx_free(ctx);
}

/* ---- tensors of another context ---- */

static void test_other_context(void) {
    ft_ctx *c1 = new_ctx(), *c2 = new_ctx();
    float v[6] = {1, 2, 3, 4, 5, 6}, out[6];
    const int64_t s[2] = {2, 3};
    ft_tensor *a = ft_tensor_from_host(c1, FT_DTYPE_F32, 2, s, v);
    ft_tensor *b = ft_tensor_from_host(c2, FT_DTYPE_F32, 2, s, v);
    CHECK(a && b, "tensors");
#define REFUSED(expr)                                                                                          \
    do {                                                                                                       \
        ft_ctx_clear_error(c1);                                                                                \
        ft_tensor *r_ = (expr);                                                                                \
        CHECK(!r_ && ft_ctx_status(c1) == FT_ERR_INVALID_ARG && strstr(ft_ctx_errmsg(c1), "another context"), \
              "%s: %s %s", #expr, r_ ? "ran" : "refused", ft_ctx_errmsg(c1));                                  \
    } while (0)
    REFUSED(ft_add(c1, a, b));
    REFUSED(ft_mul(c1, b, a));
    REFUSED(ft_gelu(c1, b));
    REFUSED(ft_reshape(c1, b, 1, (const int64_t[]){6}));
    REFUSED(ft_transpose(c1, b, 0, 1));
    REFUSED(ft_slice(c1, b, 0, 0, 1));
    REFUSED(ft_contiguous(c1, b));
    REFUSED(ft_cast(c1, b, FT_DTYPE_F16));
    REFUSED(ft_linear(c1, a, b, NULL));
    REFUSED(ft_matmul(c1, a, ft_transpose(c2, b, 0, 1), 1.0f));
    REFUSED(ft_concat(c1, a, b, 0));
    REFUSED(ft_softmax(c1, a, b, 1.0f));
    ft_ctx_clear_error(c1);
    CHECK(ft_tensor_to_host(c1, b, FT_DTYPE_F32, out, sizeof out) == FT_ERR_INVALID_ARG &&
              strstr(ft_ctx_errmsg(c1), "another context"),
          "ft_tensor_to_host of another context's tensor: %s", ft_ctx_errmsg(c1));
    ft_ctx_clear_error(c1);
    ft_tensor_release(c1, b); /* refused: b stays c2's, alive */
    CHECK(ft_tensor_to_host(c2, b, FT_DTYPE_F32, out, sizeof out) == FT_OK && out[5] == 6,
          "a release through another context freed the tensor");
    ft_ctx_free(c1);
    ft_ctx_free(c2);
}

/* ---- negative sizes ---- */

static void test_negative_sizes(void) {
    ft_ctx *ctx = new_ctx();
    ft_model *m = NULL;
    ft_model_options mo = ft_model_options_default();
    CHECK(ctx && ft_model_load(ctx, "bert-tiny", &mo, &m) == FT_OK, "load");
    if (!m) return;
    int64_t macs = 0;
    ft_host_tensor in[8];
    int n_in;
    void *owned = NULL;
    const int64_t bad[][2] = {{1, -1}, {1, -128}, {0, 8}, {-3, 8}, {-1, -1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ft_ctx_clear_error(ctx);
        ft_status st = ft_model_macs(m, bad[i][0], bad[i][1], &macs);
        CHECK(st == FT_ERR_INVALID_ARG && ft_ctx_errmsg(ctx)[0], "ft_model_macs(batch %lld, length %lld): %s %s",
              (long long)bad[i][0], (long long)bad[i][1], ft_status_str(st), ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
        st = ft_model_example_inputs(m, bad[i][0], bad[i][1], in, &n_in, &owned);
        CHECK(st == FT_ERR_INVALID_ARG && !owned, "ft_model_example_inputs(batch %lld, length %lld): %s",
              (long long)bad[i][0], (long long)bad[i][1], ft_status_str(st));
    }
    ft_ctx_clear_error(ctx);
    float v[6] = {0};
    CHECK(!ft_tensor_empty(ctx, FT_DTYPE_F32, 2, (const int64_t[]){-1, 2}), "a negative dim");
    ft_ctx_clear_error(ctx);
    CHECK(!ft_tensor_from_host(ctx, FT_DTYPE_F32, -1, (const int64_t[]){1}, v), "a negative rank");
    ft_ctx_clear_error(ctx);
    ft_tensor *x = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, (const int64_t[]){2, 3}, v);
    CHECK(!ft_reshape(ctx, x, 2, (const int64_t[]){-2, -3}), "reshape to negative sizes");
    ft_ctx_clear_error(ctx);
    /* expand's -1 keeps a size; anything more negative is refused (it once made a negative dim) */
    CHECK(!ft_expand(ctx, ft_reshape(ctx, x, 3, (const int64_t[]){1, 2, 3}), 3, (const int64_t[]){-4, 2, 3}),
          "expand to a negative size");
    ft_ctx_clear_error(ctx);
    CHECK(!ft_slice(ctx, x, 1, 0, -1) && !ft_slice(ctx, x, 1, -1, 1), "negative slice");
    ft_ctx_clear_error(ctx);
    ft_profiler *p = NULL;
    ft_profiler_options po = ft_profiler_options_default();
    po.max_ops = -5;
    CHECK(ft_profiler_create(ctx, &po, &p) == FT_ERR_INVALID_ARG && !p, "a negative max_ops");
    ft_ctx_clear_error(ctx);
    ft_model_free(m);
    ft_ctx_free(ctx);
}

/* ---- environment knobs ---- */

static void test_env_knobs(void) {
    static const char *const bad[][2] = {
        {"FT_OP_HOST_COST_US", "inf"}, {"FT_OP_HOST_COST_US", "1e12"}, {"FT_OP_HOST_COST_US", "-1"},
        {"FT_OP_HOST_COST_US", "garbage"}, {"FT_OP_HOST_COST_US", ""}, {"FT_OP_HOST_COST_US", "NaN"},
        {"FT_SYNC_DEBUG", "2"}, {"FT_NVTX", "yes"}, {"FT_CPU_PACK_CACHE_MB", "-5"}, {"FT_CPU_PACK_CACHE_MB", "x"},
        {"FT_DISABLE_FUSION", ""}, {"FT_DISABLE_PASSES", "qkv,"}, {"FT_DISABLE_PASSES", "fuse_everything"},
        {"FT_DISABLE_CUDA_GRAPHS", "true"}, {"FT_GEMM_AUTOTUNE", "-1"}, {"FT_DISABLE_PDL", "1 "},
        {"FT_ALLOW_TF32", "on"}, {"FT_FAST_GELU", "0.5"}, {"FT_ATTN_KERNEL", "v0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(bad[i][0], bad[i][1], 1);
        char err[256] = "";
        ft_ctx_options o = ft_ctx_options_default();
        o.errbuf = err;
        o.errbuf_size = sizeof err;
        ft_ctx *c = NULL;
        ft_status st = ft_ctx_create_ex(&o, &c);
        CHECK(st == FT_ERR_INVALID_ARG && !c && strstr(err, bad[i][0]), "%s='%s': %s, '%s'", bad[i][0], bad[i][1],
              ft_status_str(st), err);
        ft_ctx_free(c);
        CHECK(ft_ctx_create(FT_DEVICE_CPU, &c) == FT_ERR_INVALID_ARG, "%s='%s' through ft_ctx_create", bad[i][0],
              bad[i][1]);
        ft_ctx_free(c);
        unsetenv(bad[i][0]);
    }
    /* a valid value still works: 0.5 us per op, a short eager forward */
    setenv("FT_OP_HOST_COST_US", "0.5", 1);
    ft_ctx *c = new_ctx();
    CHECK(c != NULL, "FT_OP_HOST_COST_US=0.5 refused");
    /* one changed after the context was made: refused at the model's load */
    setenv("FT_DISABLE_FUSION", "maybe", 1);
    ft_model *m = NULL;
    CHECK(ft_model_load(c, "bert-tiny", NULL, &m) == FT_ERR_INVALID_ARG && !m &&
              strstr(ft_ctx_errmsg(c), "FT_DISABLE_FUSION"),
          "a knob set after the context: %s", ft_ctx_errmsg(c));
    unsetenv("FT_DISABLE_FUSION");
    ft_ctx_free(c);
    unsetenv("FT_OP_HOST_COST_US");
}

/* ---- example inputs without data ---- */

static void test_shapes_only(void) {
    ft_ctx *ctx = new_ctx();
    ft_model *m = NULL;
    ft_model_options mo = ft_model_options_default();
    mo.weights = FT_WEIGHTS_NONE;
    const char *models[] = {"bert-tiny", "resnet-50"};
    for (int k = 0; k < 2; k++) {
        CHECK(ft_model_load(ctx, models[k], &mo, &m) == FT_OK, "load %s: %s", models[k], ft_ctx_errmsg(ctx));
        ft_host_tensor in[8];
        int n_in = 0;
        /* 10^6 x 128 ids (1 GB) or 10^6 images (600 GB): nothing is allocated */
        CHECK_OK(ctx, ft_model_example_inputs(m, 1000000, 0, in, &n_in, NULL));
        CHECK(n_in >= 1 && in[0].data == NULL && in[0].shape[0] == 1000000, "%s: shapes only: n %d", models[k],
              n_in);
        int64_t macs1 = 0, macs = 0;
        CHECK_OK(ctx, ft_model_macs(m, 1, 0, &macs1));
        CHECK_OK(ctx, ft_model_macs(m, 1000000, 0, &macs));
        CHECK(macs1 > 0 && macs == macs1 * 1000000, "%s: MACs at batch 10^6 %lld, at 1 %lld", models[k],
              (long long)macs, (long long)macs1);
        ft_model_free(m);
        m = NULL;
    }
    ft_ctx_free(ctx);
}

/* ---- configs ---- */

static void test_config_strings(void) {
    ft_test_tmpdir_make("api_safety");
    ft_ctx *ctx = new_ctx();
    static const char *const cfgs[][2] = {
        {"{\"model_type\": \"bert\\u0000junk\"}", "NUL"},
        {"{\"model_type\": \"bert\", \"model_type\\u0000\": \"x\"}", "NUL"},
        {"{\"model_type\": \"bert\", \"num_hidden_layers\": -2}", "num_hidden_layers"},
        {"{\"model_type\": \"bert\", \"intermediate_size\": 0}", "intermediate_size"},
        {"{\"model_type\": \"bert\", \"hidden_size\": -768}", "hidden_size"},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        char dir[400], path[500];
        snprintf(dir, sizeof dir, "%s/m%zu", tmpdir, i);
        mkdir(dir, 0755);
        snprintf(path, sizeof path, "%s/config.json", dir);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(cfgs[i][0], f);
            fclose(f);
        }
        char weights[PATH_MAX], real[PATH_MAX];
        snprintf(path, sizeof path, "%s/bert/model.safetensors", ft_test_golden_dir());
        snprintf(weights, sizeof weights, "%s/model.safetensors", dir);
        CHECK(realpath(path, real) && symlink(real, weights) == 0, "weights link");
        ft_model *m = NULL;
        ft_model_options mo = ft_model_options_default();
        mo.weights = FT_WEIGHTS_NONE;
        ft_ctx_clear_error(ctx);
        ft_status st = ft_model_load(ctx, dir, &mo, &m);
        CHECK(st == FT_ERR_FORMAT && !m && strstr(ft_ctx_errmsg(ctx), cfgs[i][1]), "%s: %s %s", cfgs[i][0],
              ft_status_str(st), ft_ctx_errmsg(ctx));
        ft_model_free(m);
    }
    ft_ctx_free(ctx);
    ft_test_tmpdir_remove();
}

int main(void) {
    RUN(test_two_threads_eager);
    RUN(test_two_threads_graph);
    RUN(test_busy_reported_to_caller);
    RUN(test_other_context);
    RUN(test_negative_sizes);
    RUN(test_env_knobs);
    RUN(test_shapes_only);
    RUN(test_config_strings);
    return ft_test_finish();
}

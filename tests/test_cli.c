/*
 * test_cli.c - the command-line contract of build/ftengine, which other tools
 * rely on exactly: exit codes (0 ok, 1 error, 2 usage), one stderr line
 * "ftengine: error: ..." on error, no output file left behind, outputs written
 * as F32 safetensors under HF names and matching the golden case; `version`
 * and `info` output.
 */
#include "ft_golden.h"
#include "ft_test.h"
#include "ft_tool.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tool[512];

typedef struct result {
    int code;
    char out[8192], err[8192];
} result;

/* Runs the tool with up to 16 arguments (NULL-terminated); captures stdout/stderr. */
static result run_tool(const char *const *args) {
    result r;
    memset(&r, 0, sizeof r);
    r.code = ft_tool_exec(tool, tmpdir, args, r.out, sizeof r.out, r.err, sizeof r.err, NULL);
    return r;
}

static int exists(const char *p) {
    struct stat s;
    return stat(p, &s) == 0;
}

/* An error must be exactly one line starting "ftengine: error: " and exit 1. */
static void check_error(const result *r, const char *needle) {
    CHECK(r->code == 1, "exit %d, want 1 (stderr: %s)", r->code, r->err);
    CHECK(!strncmp(r->err, "ftengine: error: ", 17), "stderr does not start with 'ftengine: error: ': %s", r->err);
    size_t len = strlen(r->err);
    CHECK(len > 0 && r->err[len - 1] == '\n' && !memchr(r->err, '\n', len - 1),
          "stderr is not exactly one line: %s", r->err);
    CHECK(!needle || strstr(r->err, needle), "stderr lacks '%s': %s", needle, r->err);
}

static void golden_path(char *buf, size_t size, const char *file) {
    snprintf(buf, size, "%s/bert%s%s", ft_test_golden_dir(), file ? "/" : "", file ? file : "");
}

static void test_version(void) {
    const char *a[] = {"version", NULL};
    result r = run_tool(a);
    CHECK(r.code == 0, "version exit %d", r.code);
    CHECK(!strncmp(r.out, "ftengine ", 9), "version output: %s", r.out);
    const char *feat[] = {"\ncuda: ", "\ncublaslt: ", "\ncupti: ", "\nnvtx: "};
    for (int i = 0; i < 4; i++) CHECK(strstr(r.out, feat[i]) != NULL, "version lacks '%s'", feat[i] + 1);
    ft_build_info b = ft_build_info_get();
    CHECK(strstr(r.out, b.cuda ? "cuda: yes (" : "cuda: no") != NULL, "cuda line wrong: %s", r.out);
}

static void test_run_golden(void) {
    char model[512], in[512], out[512];
    golden_path(model, sizeof model, NULL);
    golden_path(in, sizeof in, "inputs.safetensors");
    snprintf(out, sizeof out, "%s/out.safetensors", tmpdir);
    const char *a[] = {"run", model, "--inputs", in, "--out", out, "--hidden-states", NULL};
    result r = run_tool(a);
    CHECK(r.code == 0, "run exit %d: %s", r.code, r.err);
    ft_ctx *ctx = NULL;
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    ft_st_file *got = NULL, *exp = NULL;
    char ep[512];
    golden_path(ep, sizeof ep, "expected.safetensors");
    if (ft_st_open(ctx, out, &got) == FT_OK && ft_st_open(ctx, ep, &exp) == FT_OK) {
        const char *names[] = {"last_hidden_state", "pooler_output", "hidden_states.2"};
        for (int i = 0; i < 3; i++) {
            const ft_st_tensor *g = ft_st_find(got, names[i]), *e = ft_st_find(exp, names[i]);
            CHECK(g && e, "output file lacks %s", names[i]);
            if (!g || !e) continue;
            CHECK(g->dtype == FT_DTYPE_F32, "%s is %s, want F32", names[i], ft_dtype_name(g->dtype));
            ft_tensor *t = ft_tensor_from_host(ctx, g->dtype, g->ndim, g->shape, g->data);
            char msg[512];
            CHECK(golden_compare(ctx, t, e, GOLDEN_FP32, msg, sizeof msg) == 0, "%s", msg);
        }
    } else {
        CHECK(0, "reading output: %s", ft_ctx_errmsg(ctx));
    }
    ft_st_close(got);
    ft_st_close(exp);
    ft_ctx_free(ctx);
    remove(out);
}

static void test_usage_errors(void) {
    char model[512], in[512];
    golden_path(model, sizeof model, NULL);
    golden_path(in, sizeof in, "inputs.safetensors");
    const char *cases[][8] = {
        {NULL},
        {"frobnicate", NULL},
        {"run", model, "--out", "/tmp/x.safetensors", NULL},           /* no --inputs */
        {"run", model, "--inputs", in, NULL},                          /* no --out */
        {"run", model, "--inputs", in, "--out", "/tmp/x", "--bogus"},  /* unknown option */
        {"run", model, "--inputs", in, "--out", "/tmp/x", "--device"}, /* missing value */
        {"run", model, "--inputs", in, "--out", "/tmp/x", "--mode"},
        {"info", model, "--batch", "zero", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r = run_tool(cases[i]);
        CHECK(r.code == 2, "case %zu: exit %d, want 2 (stderr: %s)", i, r.code, r.err);
    }
    const char *bad_dev[] = {"run", model, "--inputs", in, "--out", "/tmp/x", "--device", "tpu", NULL};
    CHECK(run_tool(bad_dev).code == 2, "--device tpu is a usage error");
    const char *bad_dt[] = {"run", model, "--inputs", in, "--out", "/tmp/x", "--dtype", "int4", NULL};
    CHECK(run_tool(bad_dt).code == 2, "--dtype int4 is a usage error");
}

/* Copies the golden bert directory into tmpdir/name, returning its path. */
static void copy_case(const char *name, char *dst, size_t size) {
    char src[512], cmd[1200];
    golden_path(src, sizeof src, NULL);
    snprintf(dst, size, "%s/%s", tmpdir, name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && chmod -R u+w '%s'", dst, src, dst, dst);
    if (system(cmd) != 0) CHECK(0, "cannot copy the golden case");
}

static void test_errors_leave_nothing(void) {
    char in[512], out[512], dir[512], p[700];
    golden_path(in, sizeof in, "inputs.safetensors");
    snprintf(out, sizeof out, "%s/never.safetensors", tmpdir);

    const char *missing[] = {"run", "/no/such/model", "--inputs", in, "--out", out, NULL};
    check_error((result[]){run_tool(missing)}, "/no/such/model");
    CHECK(!exists(out), "an output file was left behind");

    /* a truncated checkpoint */
    copy_case("trunc", dir, sizeof dir);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(truncate(p, 1000) == 0, "truncate");
    const char *trunc[] = {"run", dir, "--inputs", in, "--out", out, NULL};
    check_error((result[]){run_tool(trunc)}, "model.safetensors");
    CHECK(!exists(out), "an output file was left behind");

    /* a broken config */
    copy_case("badcfg", dir, sizeof dir);
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (f) { fputs("{\"model_type\": \"bert\",, }", f); fclose(f); }
    const char *badcfg[] = {"run", dir, "--inputs", in, "--out", out, NULL};
    check_error((result[]){run_tool(badcfg)}, "config.json");

    /* a token id out of range */
    ft_ctx *ctx = NULL;
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    int64_t ids[4] = {1, 2, 700, 3};
    ft_st_tensor t = {"input_ids", FT_DTYPE_I64, 2, {1, 4}, ids, sizeof ids};
    char bad_in[512];
    snprintf(bad_in, sizeof bad_in, "%s/bad_ids.safetensors", tmpdir);
    CHECK_OK(ctx, ft_st_write(ctx, bad_in, &t, 1));
    char model[512];
    golden_path(model, sizeof model, NULL);
    const char *oob[] = {"run", model, "--inputs", bad_in, "--out", out, NULL};
    check_error((result[]){run_tool(oob)}, "input_ids");
    CHECK(!exists(out), "an output file was left behind");

    /* an inputs file that is not safetensors */
    const char *notst[] = {"run", model, "--inputs", p, "--out", out, NULL};
    check_error((result[]){run_tool(notst)}, NULL);

    /* an output path that cannot be written */
    const char *unwritable[] = {"run", model, "--inputs", in, "--out", "/no/such/dir/out.safetensors", NULL};
    check_error((result[]){run_tool(unwritable)}, NULL);
    ft_ctx_free(ctx);
}

static void test_unavailable_device(void) {
    if (ft_cuda_device_count() > 0) {
        SKIP("a CUDA device is present");
        return;
    }
    char model[512], in[512], out[512];
    golden_path(model, sizeof model, NULL);
    golden_path(in, sizeof in, "inputs.safetensors");
    snprintf(out, sizeof out, "%s/cuda.safetensors", tmpdir);
    const char *a[] = {"run", model, "--inputs", in, "--out", out, "--device", "cuda", NULL};
    result r = run_tool(a);
    check_error(&r, "cuda");
    CHECK(!exists(out), "an output file was left behind");
}

static void test_info(void) {
    char model[512];
    golden_path(model, sizeof model, NULL);
    const char *a[] = {"info", model, "--batch", "2", "--seq", "16", NULL};
    result r = run_tool(a);
    CHECK(r.code == 0, "info exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "architecture: BertModel") != NULL, "info: %s", r.out);
    /* 2 layers of D=64, I=256, S=16, B=2: linear 2*16*(4*64*64 + 2*64*256) per layer, attention
     * 2*4*16*16*16*2 per layer, pooler 2*64*64 */
    long long lin = 2LL * 16 * (4 * 64 * 64 + 2 * 64 * 256), att = 2LL * 4 * 16 * 16 * 16 * 2;
    char want[128];
    snprintf(want, sizeof want, "macs: %lld", 2 * (lin + att) + 2LL * 64 * 64);
    CHECK(strstr(r.out, want) != NULL, "info lacks '%s': %s", want, r.out);
    CHECK(strstr(r.out, "parameters: ") != NULL, "info: %s", r.out);
    const char *p[] = {"info", "--presets", NULL};
    r = run_tool(p);
    CHECK(r.code == 0 && strstr(r.out, "\nbert-base "), "presets: %s", r.out);
}

/* A directory with another checkpoint form than model.safetensors says so. */
static void test_other_checkpoint_forms(void) {
    char dir[300], in[512], out[300], cmd[2400], cfg[512];
    golden_path(in, sizeof in, "inputs.safetensors");
    golden_path(cfg, sizeof cfg, "config.json");
    snprintf(out, sizeof out, "%s/o.safetensors", tmpdir);
    const char *forms[2][2] = {{"pytorch_model.bin", "pytorch_model.bin"},
                               {"model.safetensors.index.json", "sharded"}};
    for (int i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, "%s/form%d", tmpdir, i);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s/' && touch '%s/%s'", dir, cfg, dir, dir, forms[i][0]);
        CHECK(system(cmd) == 0, "setup failed");
        const char *a[] = {"run", dir, "--inputs", in, "--out", out, NULL};
        result r = run_tool(a);
        check_error(&r, forms[i][1]);
        CHECK(!exists(out), "an output was left behind");
    }
}

/* `bench --protocol paper` and `sweep`: one table row and one CSV row per
 * (mode, batch), with the kernel counts of graph mode; bad lists are usage
 * errors; a failing sweep leaves no CSV behind. */
/* `plan` prints the graph-mode plan of a forward on the model's example inputs. */
static void test_plan(void) {
    char dir[512];
    golden_path(dir, sizeof dir, NULL);
    result r = run_tool((const char *[]){"plan", dir, NULL});
    CHECK(r.code == 0, "plan exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "mode graph") && strstr(r.out, " steps\n") && strstr(r.out, "fused in"),
          "plan header: %s", r.out);
    CHECK(strstr(r.out, " attention ") && strstr(r.out, "bias+residual") &&
          strstr(r.out, "graph: kernels per forward"), "plan rows: %s", r.out);
    r = run_tool((const char *[]){"plan", dir, "--mode", "static", NULL});
    CHECK(r.code == 0 && strstr(r.out, "mode static"), "plan --mode static exit %d: %s", r.code, r.err);
    r = run_tool((const char *[]){"plan", NULL});
    CHECK(r.code == 2, "plan without a model exit %d", r.code);
    r = run_tool((const char *[]){"plan", "/nonexistent/model", NULL});
    check_error(&r, "/nonexistent/model");
}

static void test_bench_and_sweep(void) {
    char model[512], csv[300];
    golden_path(model, sizeof model, NULL);
    const char *bp[] = {"bench", model, "--protocol", "paper", "--iters", "3", "--warmup", "1", NULL};
    result r = run_tool(bp);
    CHECK(r.code == 0 && strstr(r.out, "back-to-back"), "bench --protocol paper: %d %s %s", r.code,
          r.out, r.err);
    /* a result names what it ran on */
    CHECK(strstr(r.out, "device: ") && strstr(r.out, "OpenMP threads"), "bench names no device: %s", r.out);
    /* --threads sets the context's CPU threads (named in the device line); 0 is a usage error */
    const char *bt[] = {"bench", model, "--device", "cpu", "--iters", "1", "--warmup", "0", "--threads", "3", NULL};
    r = run_tool(bt);
    CHECK(r.code == 0 && strstr(r.out, " 3 OpenMP threads"), "bench --threads 3: %d %s %s", r.code, r.out, r.err);
    const char *b0[] = {"bench", model, "--device", "cpu", "--threads", "0", NULL};
    CHECK(run_tool(b0).code == 2, "--threads 0 is a usage error");
    snprintf(csv, sizeof csv, "%s/sweep.csv", tmpdir);
    const char *sw[] = {"sweep", model, "--modes", "eager,graph", "--batches", "1,3", "--iters", "2",
                        "--warmup", "0", "--overhead", "--rounds", "1", "--csv", csv, NULL};
    r = run_tool(sw);
    CHECK(r.code == 0, "sweep exit %d: %s", r.code, r.err);
    FILE *f = fopen(csv, "r");
    CHECK(f != NULL, "no sweep CSV");
    int rows = 0, graph_rows = 0;
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        if (rows++ == 0) {
            CHECK(!strncmp(line, "model,arch,device", 17), "CSV header: %s", line);
            continue;
        }
        /* ...,mode,batch,length,...: graph rows carry a positive kernel count */
        if (strstr(line, ",graph,")) {
            graph_rows++;
            int commas = 0;
            const char *k = line;
            while (*k && commas < 13) commas += *k++ == ',';
            CHECK(atoi(k) > 0, "graph row without a kernel count: %s", line);
        }
        CHECK(strstr(line, ",BertModel,cpu,f32,") != NULL, "CSV row: %s", line);
    }
    if (f) fclose(f);
    CHECK(rows == 5 && graph_rows == 2, "CSV has %d lines (%d graph rows), want 1 + 4 (2)", rows, graph_rows);
    const char *bad[][8] = {{"sweep", model, "--batches", "1,0", NULL},
                            {"sweep", model, "--modes", "eager,turbo", NULL},
                            {"sweep", model, "--protocol", "fast", NULL},
                            {"sweep", NULL}};
    for (int i = 0; i < 4; i++) CHECK(run_tool(bad[i]).code == 2, "bad sweep %d is not a usage error", i);
    char missing[300], csv2[300];
    snprintf(missing, sizeof missing, "%s/no_such_model", tmpdir);
    snprintf(csv2, sizeof csv2, "%s/sweep2.csv", tmpdir);
    const char *err[] = {"sweep", missing, "--csv", csv2, NULL};
    r = run_tool(err);
    check_error(&r, NULL);
    CHECK(!exists(csv2), "a failed sweep left %s", csv2);
}

int main(void) {
    const char *b = getenv("FT_BUILD");
    snprintf(tool, sizeof tool, "%s/ftengine", b && *b ? b : "build");
    ft_test_tmpdir_make("cli");
    if (!tmpdir[0] || !exists(tool)) {
        printf("cannot set up (tool %s)\n", tool);
        return 1;
    }
    RUN(test_version);
    RUN(test_run_golden);
    RUN(test_usage_errors);
    RUN(test_errors_leave_nothing);
    RUN(test_unavailable_device);
    RUN(test_info);
    RUN(test_bench_and_sweep);
    RUN(test_plan);
    RUN(test_other_checkpoint_forms);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

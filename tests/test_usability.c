/*
 * test_usability.c - the tool as a new user meets it (issue 17): --help on every
 * command, one usage line per usage error, --flag=value, options a command does
 * not take refused, "did you mean", the input length named per architecture in
 * the bench/plan/info headers, `info` without weights (peak RSS of the child),
 * and the message and warning texts (no NVIDIA driver, noisy host, observer
 * cost). Links the tool's own sources (tools/cli.c, tools/help.c) for the last.
 */
#include "ft_test.h"
#include "ft_tool.h"
#include "cli.h"

#ifdef FT_WITH_CUDA
#include "cuda_backend.h"
#include <cuda_runtime_api.h>
#endif

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tool[512];

typedef struct result {
    int code;
    long maxrss_kb; /* the child's peak resident set */
    char out[16384], err[8192];
} result;

/* Runs the tool with the NULL-terminated arguments; stdout, stderr, exit code, peak RSS. */
static result *run_tool(const char *const *args) {
    static result r;
    memset(&r, 0, sizeof r);
    r.code = ft_tool_exec(tool, tmpdir, args, r.out, sizeof r.out, r.err, sizeof r.err, &r.maxrss_kb);
    return &r;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

static void golden(char *buf, size_t size, const char *arch) {
    snprintf(buf, size, "%s/%s", ft_test_golden_dir(), arch);
}

static void test_help_every_command(void) {
    const char *cmds[] = {"run", "info", "bench", "sweep", "plan", "version"};
    for (int i = 0; i < 6; i++) {
        for (int form = 0; form < 3; form++) {
            result *r = form == 0 ? run_tool(ARGS(cmds[i], "--help"))
                      : form == 1 ? run_tool(ARGS(cmds[i], "-h"))
                                  : run_tool(ARGS("help", cmds[i]));
            char want[64];
            snprintf(want, sizeof want, "usage: ftengine %s", cmds[i]);
            CHECK(r->code == 0, "%s help form %d: exit %d (stderr %s)", cmds[i], form, r->code, r->err);
            CHECK(!strncmp(r->out, want, strlen(want)), "%s help form %d on stdout: %s", cmds[i], form, r->out);
            CHECK(!r->err[0], "%s help wrote to stderr: %s", cmds[i], r->err);
        }
    }
    /* the defaults a user needs */
    result *r = run_tool(ARGS("bench", "--help"));
    CHECK(strstr(r->out, "--iters N") && strstr(r->out, "(default 20)") && strstr(r->out, "(default 5)") &&
          strstr(r->out, "--device cpu|cuda") && strstr(r->out, "--mode eager|graph|static"),
          "bench --help lacks options or defaults: %s", r->out);
    CHECK(!strstr(r->out, "--inputs"), "bench --help lists run's --inputs");
    r = run_tool(ARGS("sweep", "--help"));
    CHECK(strstr(r->out, "1,2,4,8,16,32,64,128") && strstr(r->out, "eager,graph,static"),
          "sweep --help lacks the default lists: %s", r->out);
    r = run_tool(ARGS("plan", "--help"));
    CHECK(strstr(r->out, "--mode graph|static") && !strstr(r->out, "eager|"), "plan --help modes: %s", r->out);
    /* the whole list on stdout for --help, on stderr for no command */
    r = run_tool(ARGS("--help"));
    CHECK(r->code == 0 && count(r->out, "  ftengine ") == 6, "--help: %d %s", r->code, r->out);
    r = run_tool((const char *const[]){NULL});
    CHECK(r->code == 2 && count(r->err, "  ftengine ") == 6, "no command: %d %s", r->code, r->err);
}

/* A usage error prints the command's own usage line, not every command's. */
static void test_one_usage_line(void) {
    char m[512];
    golden(m, sizeof m, "bert");
    result *r = run_tool(ARGS("bench", m, "--bogus"));
    CHECK(r->code == 2, "bench --bogus exit %d", r->code);
    CHECK(strstr(r->err, "usage: ftengine bench MODEL") && count(r->err, "ftengine ") <= 3 &&
          !strstr(r->err, "ftengine run") && !strstr(r->err, "ftengine sweep"),
          "bench usage error printed: %s", r->err);
    r = run_tool(ARGS("run", m));
    CHECK(r->code == 2 && strstr(r->err, "usage: ftengine run MODEL --inputs") && !strstr(r->err, "ftengine info"),
          "run usage error printed: %s", r->err);
}

static void test_flag_equals_value(void) {
    char m[512], a[sizeof ((result *)0)->out];
    golden(m, sizeof m, "bert");
    result *r = run_tool(ARGS("info", m, "--batch", "2", "--seq", "16"));
    CHECK(r->code == 0, "info exit %d: %s", r->code, r->err);
    memcpy(a, r->out, sizeof a);
    r = run_tool(ARGS("info", m, "--batch=2", "--seq=16"));
    CHECK(r->code == 0 && !strcmp(a, r->out), "--batch=2 --seq=16 differs from --batch 2 --seq 16: %d %s / %s",
          r->code, r->out, a);
    CHECK(strstr(a, "(batch 2, length 16 (tokens))") != NULL, "info header: %s", a);
    r = run_tool(ARGS("bench", m, "--iters=2", "--warmup=0", "--seq=8", "--mode=graph"));
    CHECK(r->code == 0 && strstr(r->out, "mode graph") && strstr(r->out, "2 iters, 0 warmup"),
          "bench with --x=y: %d %s %s", r->code, r->out, r->err);
    r = run_tool(ARGS("bench", m, "--phases=yes"));
    CHECK(r->code == 2 && strstr(r->err, "takes no value"), "--phases=yes: %d %s", r->code, r->err);
    r = run_tool(ARGS("bench", m, "--iters="));
    CHECK(r->code == 2, "--iters= (empty) exit %d", r->code);
}

/* Options a command does not take are refused, not silently ignored. */
static void test_refused_options(void) {
    char m[512], in[600], out[600];
    golden(m, sizeof m, "bert");
    snprintf(in, sizeof in, "%s/inputs.safetensors", m);
    snprintf(out, sizeof out, "%s/refused.safetensors", tmpdir); /* never written: the run is refused */
    struct {
        const char *const *args;
        const char *needle;
    } cases[] = {
        {ARGS("plan", m, "--mode", "eager"), "eager mode has no plan"},
        {ARGS("plan", m, "--mode=eager"), "eager mode has no plan"},
        {ARGS("info", m, "--device", "cuda"), "does not apply to 'info'"},
        {ARGS("info", m, "--mode", "graph"), "does not apply to 'info'"},
        {ARGS("version", "extra"), "unexpected argument 'extra'"},
        {ARGS("version", "--iters", "3"), "does not apply to 'version'"},
        {ARGS("run", m, "--inputs", in, "--out", out, "--iters", "3"), "does not apply to 'run'"},
        {ARGS("bench", m, "--inputs", in), "does not apply to 'bench'"},
        {ARGS("sweep", m, "--mode", "graph"), "does not apply to 'sweep'"},
        {ARGS("bench", m, m), "unexpected argument"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result *r = run_tool(cases[i].args);
        CHECK(r->code == 2 && strstr(r->err, cases[i].needle), "case %zu: exit %d, stderr %s", i, r->code, r->err);
    }
    CHECK(access(out, F_OK) != 0, "a refused run wrote %s", out);
}

static void test_did_you_mean(void) {
    result *r = run_tool(ARGS("info", "bert-bsae"));
    CHECK(r->code == 1 && strstr(r->err, "did you mean bert-base?"), "bert-bsae: %d %s", r->code, r->err);
    char m[512];
    golden(m, sizeof m, "brt");
    r = run_tool(ARGS("info", m));
    CHECK(r->code == 1 && strstr(r->err, "/bert?"), "a misspelled directory: %d %s", r->code, r->err);
    r = run_tool(ARGS("bnech"));
    CHECK(r->code == 2 && strstr(r->err, "did you mean bench?"), "bnech: %d %s", r->code, r->err);
    golden(m, sizeof m, "bert");
    r = run_tool(ARGS("bench", m, "--itres", "2"));
    CHECK(r->code == 2 && strstr(r->err, "did you mean --iters?"), "--itres: %d %s", r->code, r->err);
    r = run_tool(ARGS("info", "zzzzzzzz-unlike-anything"));
    CHECK(r->code == 1 && !strstr(r->err, "did you mean"), "a far name got a suggestion: %s", r->err);
    /* the preset list is whole names, the ones that do not fit counted, never cut */
    CHECK(!strstr(r->err, ",)") && !strstr(r->err, ", )") &&
              (strstr(r->err, "more: ftengine info --presets lists them)") || strstr(r->err, "gpt2)")),
          "the preset list of an unknown name: %s", r->err);
}

/* The header's length is the size ft_model_example_inputs' `length` names: not ResNet's
 * channel count (3), for every architecture. */
static void test_length_per_architecture(void) {
    struct {
        const char *arch, *seq, *want;
    } cases[] = {
        {"resnet", "32", "length 32 (image side)"},
        {"wavlm", "4000", "length 4000 (samples)"},
        {"bert", "8", "length 8 (tokens)"},
    };
    for (int i = 0; i < 3; i++) {
        char m[512];
        golden(m, sizeof m, cases[i].arch);
        result *r = run_tool(ARGS("bench", m, "--seq", cases[i].seq, "--iters", "1", "--warmup", "0"));
        CHECK(r->code == 0 && strstr(r->out, cases[i].want), "bench %s: %d %s %s", cases[i].arch, r->code,
              r->out, r->err);
        r = run_tool(ARGS("plan", m, "--seq", cases[i].seq));
        CHECK(r->code == 0 && strstr(r->out, cases[i].want), "plan %s: %d %.300s %s", cases[i].arch, r->code,
              r->out, r->err);
        r = run_tool(ARGS("info", m, "--seq", cases[i].seq));
        CHECK(r->code == 0 && strstr(r->out, cases[i].want), "info %s: %d %s", cases[i].arch, r->code, r->out);
    }
    char m[512];
    golden(m, sizeof m, "resnet");
    result *r = run_tool(ARGS("info", m));
    CHECK(strstr(r->out, "length 224 (image side), the default"), "resnet default length: %s", r->out);
}

/* info reads the config only: bert-large (1.3 GB of f32 weights) costs what the tiny
 * golden BERT costs. Before, it allocated and random-initialised every weight. */
static void test_info_loads_no_weights(void) {
    char m[512];
    golden(m, sizeof m, "bert");
    result *r = run_tool(ARGS("info", m));
    long small = r->maxrss_kb;
    CHECK(r->code == 0, "info golden exit %d", r->code);
    r = run_tool(ARGS("info", "bert-large"));
    CHECK(r->code == 0 && strstr(r->out, "parameters: 335141888"), "info bert-large: %d %s %s", r->code, r->out,
          r->err);
    CHECK(r->maxrss_kb - small < 100 * 1024, "info bert-large peaks at %ld KB, the tiny model at %ld KB",
          r->maxrss_kb, small);
    r = run_tool(ARGS("info", "wavlm-large"));
    CHECK(r->code == 0 && r->maxrss_kb - small < 100 * 1024, "info wavlm-large: %d, %ld KB vs %ld KB", r->code,
          r->maxrss_kb, small);
}

static void test_messages(void) {
    char buf[512];
    CHECK(ft_cli_noise_warning(1.0, 1.6, buf, sizeof buf) == 1 && strstr(buf, "OMP_NUM_THREADS=1") &&
              strstr(buf, "--threads 1") && strstr(buf, "1.6x"),
          "p90 1.6x the median: %s", buf);
    CHECK(ft_cli_noise_warning(1.0, 1.4, buf, sizeof buf) == 0, "p90 1.4x the median warned");
    CHECK(ft_cli_noise_warning(0.0, 1.4, buf, sizeof buf) == 0, "a zero median warned");
    ft_cli_observer_cost(1.2, 1.0, buf, sizeof buf);
    CHECK(strstr(buf, "observer cost 0.2000 ms (20.0%)") != NULL, "positive cost: %s", buf);
    ft_cli_observer_cost(0.9, 1.0, buf, sizeof buf);
    CHECK(strstr(buf, "not measurable") && !strstr(buf, "-0.") && !strstr(buf, "%"), "negative cost printed as: %s", buf);
    CHECK(ft_cli_edit_distance("bnech", "bench") == 1 && ft_cli_edit_distance("bert-bsae", "bert-base") == 1 &&
              ft_cli_edit_distance("abc", "abc") == 0 && ft_cli_edit_distance("", "ab") == 2,
          "edit distance");
#ifdef FT_WITH_CUDA
    ft_cuda_no_device_message(cudaErrorInsufficientDriver, 0, buf, sizeof buf);
    CHECK(strstr(buf, "no NVIDIA driver found") != NULL, "no driver: %s", buf);
    ft_cuda_no_device_message(cudaErrorInsufficientDriver, 11080, buf, sizeof buf);
    CHECK(strstr(buf, "CUDA 11.8") && strstr(buf, "update the driver") && !strstr(buf, "no NVIDIA driver"),
          "old driver: %s", buf);
    ft_cuda_no_device_message(cudaErrorNoDevice, 13000, buf, sizeof buf);
    CHECK(strstr(buf, "no CUDA device found") != NULL, "no device: %s", buf);
    /* and the tool, on this machine, when it has no device */
    if (ft_cuda_device_count() == 0) {
        char m[512];
        golden(m, sizeof m, "bert");
        result *r = run_tool(ARGS("bench", m, "--device", "cuda"));
        int drv = 0;
        if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
        CHECK(r->code == 1 && (drv || strstr(r->err, "no NVIDIA driver found")), "bench --device cuda without a "
              "driver (%d): %s", drv, r->err);
    }
#endif
}

int main(void) {
    const char *b = getenv("FT_BUILD");
    snprintf(tool, sizeof tool, "%s/ftengine", b && *b ? b : "build");
    ft_test_tmpdir_make("usability");
    struct stat st;
    if (!tmpdir[0] || stat(tool, &st) != 0) {
        printf("cannot set up (tool %s)\n", tool);
        return 1;
    }
    RUN(test_help_every_command);
    RUN(test_one_usage_line);
    RUN(test_flag_equals_value);
    RUN(test_refused_options);
    RUN(test_did_you_mean);
    RUN(test_length_per_architecture);
    RUN(test_info_loads_no_weights);
    RUN(test_messages);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

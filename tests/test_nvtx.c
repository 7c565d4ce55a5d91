/*
 * test_nvtx.c - what an NVTX tool sees of ftengine, seen through a real NVTX
 * injection (build/tests/libnvtx_inject.so, tests/nvtx_inject.c) loaded the way
 * Nsight Systems is: NVTX_INJECTION64_PATH, no ftengine variable set.
 *
 * `ftengine run` of every golden model in every mode (CPU, and the CUDA backend
 * on the host emulator when built) must show: one domain "ftengine" and nothing
 * outside it; balanced pushes and pops; one top-level "forward <model> <mode>
 * <shape>" range per forward; in eager mode every op range holding exactly
 * check, infer, alloc, select, launch; in graph mode trace, passes, plan and one
 * range per plan step; in static mode trace, passes, plan (warmup, capture,
 * instantiate on CUDA) and replay. FT_NVTX=0 must leave the tool with nothing.
 * In-process: failing ops and forwards leave the ranges balanced.
 */
#include "ft_test.h"
#include "ftengine.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tool[512], emu_tool[512], inject[512], inproc_out[512];

/* ---- reading the tool's record (format in tests/nvtx_inject.c) ---- */

#define MAX_RANGES 20000
typedef struct range {
    char name[160];
    unsigned cat, color;
    long long payload; /* -1: none */
    char how;          /* R registered, A ascii */
    int parent;        /* index, -1 top level */
    int n_children;
    char children[256]; /* names joined by ',' (truncated) */
} range;

typedef struct record {
    int domains, ftengine_dom;
    char domain_name[64];
    int foreign;    /* pushes/pops outside the ftengine domain, marks, start/end */
    int unbalanced; /* pops on an empty stack, ranges left open */
    int pushes, pops, streams, threads, strings;
    char stream_name[64];
    range *r;
    int n;
} record;

static void add_child(range *p, const char *name) {
    size_t len = strlen(p->children);
    if (len + strlen(name) + 2 < sizeof p->children)
        snprintf(p->children + len, sizeof p->children - len, "%s%s", len ? "," : "", name);
    p->n_children++;
}

/* Parses the record from byte `from`; the domain id is 1 unless a domain line says. */
static int read_record(const char *path, long from, record *rec) {
    memset(rec, 0, sizeof *rec);
    rec->ftengine_dom = 1;
    rec->r = (range *)calloc(MAX_RANGES, sizeof *rec->r);
    FILE *f = fopen(path, "r");
    if (!f || !rec->r) {
        if (f) fclose(f);
        return -1;
    }
    fseek(f, from, SEEK_SET);
    int stack[256], depth = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *fld[10];
        int nf = 0;
        for (char *s = line; nf < 10;) {
            fld[nf++] = s;
            char *t = strchr(s, '\t');
            if (!t) break;
            *t = 0;
            s = t + 1;
        }
        if (!strcmp(fld[0], "domain") && nf >= 3) {
            rec->domains++;
            rec->ftengine_dom = atoi(fld[1]);
            snprintf(rec->domain_name, sizeof rec->domain_name, "%s", fld[2]);
        } else if (!strcmp(fld[0], "string")) {
            rec->strings++;
        } else if (!strcmp(fld[0], "stream") && nf >= 3) {
            rec->streams++;
            snprintf(rec->stream_name, sizeof rec->stream_name, "%s", fld[2]);
        } else if (!strcmp(fld[0], "thread")) {
            rec->threads++;
        } else if (!strcmp(fld[0], "push") && nf >= 8) {
            rec->pushes++;
            if (atoi(fld[1]) != rec->ftengine_dom) rec->foreign++;
            if (rec->n == MAX_RANGES || depth == 256) continue;
            range *r = &rec->r[rec->n];
            snprintf(r->name, sizeof r->name, "%s", fld[7]);
            r->cat = (unsigned)strtoul(fld[3], NULL, 10);
            r->color = (unsigned)strtoul(fld[4], NULL, 16);
            r->payload = strcmp(fld[5], "-") ? atoll(fld[5]) : -1;
            r->how = fld[6][0];
            r->parent = depth ? stack[depth - 1] : -1;
            if (r->parent >= 0) add_child(&rec->r[r->parent], r->name);
            stack[depth++] = rec->n++;
        } else if (!strcmp(fld[0], "pop")) {
            rec->pops++;
            if (atoi(fld[1]) != rec->ftengine_dom) rec->foreign++;
            if (depth == 0) rec->unbalanced++;
            else depth--;
        } else if (!strcmp(fld[0], "other")) {
            rec->foreign++;
        }
    }
    rec->unbalanced += depth;
    fclose(f);
    return 0;
}

static long file_size(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 ? (long)s.st_size : 0;
}

/* ---- running the tool ---- */

/* Runs `exe run MODEL --inputs ... --out ... --mode MODE --device DEV` with the
 * injection attached when inj, FT_NVTX as given (NULL: unset); the tool writes
 * to rec_path. Returns the exit status. */
static int run_model(const char *exe, const char *model, const char *mode, const char *dev, int inj,
                     const char *ft_nvtx, const char *rec_path) {
    char dir[512], in[600], out[600];
    snprintf(dir, sizeof dir, "%s/%s", ft_test_golden_dir(), model);
    snprintf(in, sizeof in, "%s/inputs.safetensors", dir);
    snprintf(out, sizeof out, "%s/out.safetensors", tmpdir);
    remove(rec_path);
    fflush(stdout); /* or the child flushes our buffered lines again */
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        if (inj) setenv("NVTX_INJECTION64_PATH", inject, 1);
        else unsetenv("NVTX_INJECTION64_PATH");
        setenv("FT_NVTX_INJECT_OUT", rec_path, 1);
        if (ft_nvtx) setenv("FT_NVTX", ft_nvtx, 1);
        else unsetenv("FT_NVTX");
        execl(exe, exe, "run", dir, "--inputs", in, "--out", out, "--mode", mode, "--device", dev,
              (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    remove(out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Runs exe with args (NULL-terminated), stdout to the file out (NULL: /dev/null),
 * after setting the variables of env ("NAME=VALUE" strings, NULL-terminated).
 * Returns the exit status. */
static int run_with(const char *exe, const char *const *args, const char *const *env, const char *out) {
    fflush(stdout); /* or the child flushes our buffered lines again */
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out ? out : "/dev/null", "w", stdout)) _exit(126);
        for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
        const char *argv[24] = {exe};
        int n = 1;
        for (int i = 0; args[i] && n < 23; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The launch counts of the profiler windows the emulator logged, in order. */
static int read_windows(const char *path, long long *w, int max) {
    FILE *f = fopen(path, "r");
    int n = 0;
    if (!f) return 0;
    while (n < max && fscanf(f, "window %lld\n", &w[n]) == 1) n++;
    fclose(f);
    return n;
}

/* bench puts its timed iterations, and only those, in one cudaProfilerStart/Stop
 * window (what `nsys --capture-range=cudaProfilerApi` records): the window's
 * launches grow with --iters and hold nothing of the first call or the warm-up. */
static void test_profiler_capture_range(void) {
    if (access(emu_tool, X_OK) != 0) {
        SKIP("%s not built", emu_tool);
        return;
    }
    char dir[512], log[600], env_log[700];
    snprintf(dir, sizeof dir, "%s/bert", ft_test_golden_dir());
    snprintf(log, sizeof log, "%s/windows.txt", tmpdir);
    snprintf(env_log, sizeof env_log, "FT_EMU_PROFILER_LOG=%s", log);
    const char *env[] = {env_log, "FT_NVTX=0", NULL};
    const char *protocols[] = {"sync", "paper"};
    for (int p = 0; p < 2; p++) {
        long long w[2][4];
        int n[2];
        for (int k = 0; k < 2; k++) {
            const char *iters = k ? "4" : "2";
            const char *args[] = {"bench", dir, "--device", "cuda", "--mode", "eager", "--iters", iters,
                                  "--warmup", "3", "--protocol", protocols[p], NULL};
            remove(log);
            CHECK(run_with(emu_tool, args, env, NULL) == 0, "bench --iters %s failed", iters);
            n[k] = read_windows(log, w[k], 4);
        }
        CHECK(n[0] == 1 && n[1] == 1, "%s: %d and %d windows, want 1 each", protocols[p], n[0], n[1]);
        if (n[0] == 1 && n[1] == 1)
            CHECK(w[0][0] > 0 && w[1][0] == 2 * w[0][0],
                  "%s: %lld launches in the window of 2 iterations, %lld in that of 4", protocols[p],
                  w[0][0], w[1][0]);
    }
}

/* Under Nsight Systems ftengine's own CUPTI cannot subscribe (one subscriber per
 * process): bench and sweep must run on with host timers and say so up front.
 * The emulator's CUPTI refuses as under nsys with FT_EMU_CUPTI_BUSY=1; nsys also
 * sets CUDA_INJECTION64_PATH, which the profiler reads when it is made (it makes
 * no CUPTI call before its first window). */
static void test_cupti_busy_fallback(void) {
    if (access(emu_tool, X_OK) != 0) {
        SKIP("%s not built", emu_tool);
        return;
    }
    char dir[512], out[600];
    snprintf(dir, sizeof dir, "%s/bert", ft_test_golden_dir());
    snprintf(out, sizeof out, "%s/stdout.txt", tmpdir);
    const char *busy[] = {"FT_EMU_CUPTI_BUSY=1", "CUDA_INJECTION64_PATH=libToolsInjection64.so", NULL},
               *free_env[] = {"FT_EMU_CUPTI_BUSY=0", NULL};
    const char *bench[] = {"bench", dir, "--device", "cuda", "--iters", "2", "--warmup", "1", "--phases", NULL};
    const char *sweep[] = {"sweep", dir, "--device", "cuda", "--iters", "2", "--warmup", "1",
                           "--batches", "1", "--modes", "eager", "--overhead", NULL};
    const char *const *cmds[] = {bench, sweep};
    for (int c = 0; c < 2; c++)
        for (int b = 0; b < 2; b++) {
            int rc = run_with(emu_tool, cmds[c], b ? busy : free_env, out);
            char text[16384] = "";
            FILE *f = fopen(out, "r");
            size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
            text[n] = 0;
            if (f) fclose(f);
            const char *line = strstr(text, "profiler: another CUPTI client is attached");
            /* in the header: before the results */
            const char *results = strstr(text, c ? "\nbatch " : "\nlatency ms:");
            CHECK(rc == 0, "%s with CUPTI %s exited %d", cmds[c][0], b ? "busy" : "free", rc);
            CHECK(b ? line && results && line < results : !line,
                  "%s with CUPTI %s: header line %s: %.300s", cmds[c][0], b ? "busy" : "free",
                  line ? "present" : "missing", text);
        }
}

static const char *const phases = "check,infer,alloc,select,launch";

/* The checks of the tree one forward of `mode` leaves (see the file comment). */
static void check_tree(const record *rec, const char *label, const char *model, const char *mode,
                       int cuda) {
    CHECK(rec->domains == 1 && !strcmp(rec->domain_name, "ftengine"),
          "%s: %d domains created, the last '%s' (want one, 'ftengine')", label, rec->domains,
          rec->domain_name);
    CHECK(rec->foreign == 0, "%s: %d events outside the ftengine domain", label, rec->foreign);
    CHECK(rec->unbalanced == 0 && rec->pushes == rec->pops, "%s: %d pushes, %d pops, %d unbalanced",
          label, rec->pushes, rec->pops, rec->unbalanced);
    if (cuda) CHECK(rec->streams >= 1 && !strcmp(rec->stream_name, "ftengine compute"),
                    "%s: stream named '%s' (%d names)", label, rec->stream_name, rec->streams);
    int tops = 0, ops = 0, steps = 0, replays = 0;
    char want_prefix[96];
    snprintf(want_prefix, sizeof want_prefix, "forward %s %s ", model, mode);
    for (int i = 0; i < rec->n; i++) {
        const range *r = &rec->r[i];
        CHECK(r->how == 'R', "%s: range '%s' not a registered string", label, r->name);
        CHECK(r->cat != 0 && r->color != 0, "%s: range '%s' has no category/colour", label, r->name);
        if (r->parent < 0) {
            tops++;
            CHECK(!strncmp(r->name, want_prefix, strlen(want_prefix)),
                  "%s: top-level range '%s' is not '%s...'", label, r->name, want_prefix);
            const char *want_children = !strcmp(mode, "eager") ? NULL
                                        : cuda && !strcmp(mode, "static")
                                            ? "trace,passes,plan,warmup,capture,instantiate,replay"
                                        : !strcmp(mode, "static") ? "trace,passes,plan,replay"
                                                                  : "trace,passes,plan,";
            if (want_children)
                CHECK(!strncmp(r->children, want_children, strlen(want_children)),
                      "%s: forward holds '%.120s', want '%s...'", label, r->children, want_children);
            if (!strcmp(mode, "static"))
                CHECK(!strcmp(r->children, want_children), "%s: static forward holds '%.120s'",
                      label, r->children);
            continue;
        }
        const range *p = &rec->r[r->parent];
        if (r->cat == 2) { /* op */
            ops++;
            CHECK(p->parent < 0, "%s: op '%s' not directly under the forward (under '%s')", label,
                  r->name, p->name);
            CHECK(!strcmp(r->children, phases), "%s: op '%s' holds '%s', want '%s'", label, r->name,
                  r->children, phases);
        } else if (r->cat == 4) { /* plan step */
            steps++;
            CHECK(r->n_children == 0 && p->parent < 0 && r->payload >= 0,
                  "%s: step '%s' (payload %lld) holds '%s' under '%s'", label, r->name, r->payload,
                  r->children, p->name);
        } else if (!strcmp(r->name, "replay")) {
            replays++;
            CHECK(r->n_children == 0, "%s: replay holds '%s'", label, r->children);
        }
    }
    CHECK(tops == 1, "%s: %d top-level ranges, want 1 (one forward)", label, tops);
    if (!strcmp(mode, "eager")) CHECK(ops > 0 && steps == 0 && replays == 0,
                                      "%s: %d ops, %d steps, %d replays", label, ops, steps, replays);
    if (!strcmp(mode, "graph")) CHECK(ops == 0 && steps > 0 && replays == 0,
                                      "%s: %d ops, %d steps, %d replays", label, ops, steps, replays);
    if (!strcmp(mode, "static")) CHECK(ops == 0 && steps == 0 && replays == 1,
                                       "%s: %d ops, %d steps, %d replays", label, ops, steps, replays);
}

static const char *const models[] = {"bert", "funnel", "mobilebert", "resnet", "wavlm"};
static const char *const modes[] = {"eager", "graph", "static"};

static void golden_trees(const char *exe, const char *dev, int cuda, int n_models) {
    char path[600];
    snprintf(path, sizeof path, "%s/record.txt", tmpdir);
    for (int mi = 0; mi < n_models; mi++)
        for (int k = 0; k < 3; k++) {
            char label[96];
            snprintf(label, sizeof label, "%s %s %s", models[mi], modes[k], dev);
            int rc = run_model(exe, models[mi], modes[k], dev, 1, NULL, path);
            CHECK(rc == 0, "%s: ftengine run exited %d", label, rc);
            record rec;
            if (read_record(path, 0, &rec) != 0) {
                CHECK(0, "%s: no record written by the injection", label);
                continue;
            }
            check_tree(&rec, label, models[mi], modes[k], cuda);
            free(rec.r);
        }
}

static void test_golden_cpu(void) { golden_trees(tool, "cpu", 0, 5); }

static void test_golden_emulated_cuda(void) {
    if (access(emu_tool, X_OK) != 0) {
        SKIP("%s not built (make builds it with the CUDA toolkit)", emu_tool);
        return;
    }
    golden_trees(emu_tool, "cuda", 1, 5);
}

/* The same on a real GPU, when this machine has one (tests/gpu_check.sh runs it). */
static void test_golden_gpu(void) {
    if (ft_cuda_device_count() <= 0) {
        SKIP("no CUDA device here (the emulated run above covers the CUDA code paths)");
        return;
    }
    golden_trees(tool, "cuda", 1, 5);
}

/* Graph mode names its steps by what was fused: the golden BERT's FFN GEMM
 * carries its bias and GELU. */
static void test_step_names(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/record.txt", tmpdir);
    CHECK(run_model(tool, "bert", "graph", "cpu", 1, NULL, path) == 0, "run failed");
    record rec;
    if (read_record(path, 0, &rec) != 0) {
        CHECK(0, "no record");
        return;
    }
    int fused = 0, in_order = 1;
    long long next = 0;
    for (int i = 0; i < rec.n; i++) {
        if (rec.r[i].cat != 4) continue;
        fused += !strcmp(rec.r[i].name, "linear+bias+gelu");
        in_order &= rec.r[i].payload == next++;
    }
    CHECK(fused > 0, "no step named linear+bias+gelu");
    CHECK(in_order, "step payloads are not the step indices 0, 1, ...");
    free(rec.r);
}

/* FT_NVTX=0 with a tool attached: the tool sees nothing (not even loaded);
 * FT_NVTX=1 without one: runs as usual. */
static void test_switches(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/record.txt", tmpdir);
    for (int k = 0; k < 3; k++) {
        CHECK(run_model(tool, "bert", modes[k], "cpu", 1, "0", path) == 0, "FT_NVTX=0 run failed");
        CHECK(file_size(path) == 0, "FT_NVTX=0 %s: the tool got %ld bytes of events", modes[k],
              file_size(path));
    }
    CHECK(run_model(tool, "bert", "eager", "cpu", 0, "1", path) == 0, "FT_NVTX=1 without a tool failed");
    CHECK(file_size(path) == 0, "no tool attached, yet a record");
    /* FT_NVTX=1 with the tool: the same tree as with no variable */
    CHECK(run_model(tool, "bert", "eager", "cpu", 1, "1", path) == 0, "FT_NVTX=1 run failed");
    record rec;
    if (read_record(path, 0, &rec) == 0) {
        check_tree(&rec, "FT_NVTX=1", "bert", "eager", 0);
        free(rec.r);
    }
}

/* ---- in this process (the injection was attached by main) ---- */

static int64_t count_ranges(const record *rec, const char *name) {
    int64_t n = 0;
    for (int i = 0; i < rec->n; i++) n += !strcmp(rec->r[i].name, name);
    return n;
}

/* An op failing in INFER and one failing in LAUNCH close their open phase. */
static void test_failing_ops_balance(void) {
    long from = file_size(inproc_out);
    ft_ctx *ctx = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (!ctx) return;
    float x[20] = {0};
    int64_t sa[2] = {2, 3}, sb[2] = {4, 5}, st[2] = {10, 2}, si[1] = {2};
    int64_t ids[2] = {3, 1000};
    ft_tensor *a = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, sa, x);
    ft_tensor *b = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, sb, x);
    ft_tensor *table = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, st, x);
    ft_tensor *idt = ft_tensor_from_host(ctx, FT_DTYPE_I64, 1, si, ids);
    CHECK(a && b && table && idt, "inputs: %s", ft_ctx_errmsg(ctx));
    CHECK(ft_add(ctx, a, b) == NULL, "add of mismatched shapes succeeded");
    ft_ctx_clear_error(ctx);
    CHECK(ft_embedding(ctx, table, idt) == NULL, "embedding of id 1000 in 10 rows succeeded");
    ft_ctx_clear_error(ctx);
    CHECK(ft_add(ctx, a, a) != NULL, "add: %s", ft_ctx_errmsg(ctx));
    ft_ctx_free(ctx);
    record rec;
    if (read_record(inproc_out, from, &rec) != 0) {
        CHECK(0, "no record");
        return;
    }
    CHECK(rec.unbalanced == 0 && rec.pushes == rec.pops, "%d pushes, %d pops, %d unbalanced",
          rec.pushes, rec.pops, rec.unbalanced);
    CHECK(count_ranges(&rec, "add") == 2 && count_ranges(&rec, "embedding") == 1,
          "%lld add, %lld embedding ranges", (long long)count_ranges(&rec, "add"),
          (long long)count_ranges(&rec, "embedding"));
    for (int i = 0; i < rec.n; i++) {
        if (!strcmp(rec.r[i].name, "embedding"))
            CHECK(!strcmp(rec.r[i].children, phases), "failing embedding holds '%s'", rec.r[i].children);
        if (!strcmp(rec.r[i].name, "add") && i == 0)
            CHECK(!strncmp(rec.r[i].children, "check", 5) && rec.r[i].n_children <= 2,
                  "add failing in check/infer holds '%s'", rec.r[i].children);
    }
    free(rec.r);
}

/* A forward that fails part way (out of memory: the context may hold the weights
 * and little more), in each mode: the forward range and everything in it close. */
static ft_model *load_bert(ft_ctx *ctx, ft_mode mode) {
    ft_model_options opt = ft_model_options_default();
    opt.mode = mode;
    ft_model *m = NULL;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bert", ft_test_golden_dir());
    CHECK_OK(ctx, ft_model_load(ctx, dir, &opt, &m));
    return m;
}

static void test_failing_forward_balance(void) {
    for (int k = 0; k < 3; k++) {
        ft_mode mode = FT_MODE_EAGER;
        ft_mode_parse(modes[k], &mode);
        ft_ctx *ctx = NULL;
        CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
        ft_model *m = ctx ? load_bert(ctx, mode) : NULL;
        size_t weights = ft_ctx_mem_stats(ctx).reserved;
        ft_model_free(m);
        ft_ctx_free(ctx);
        if (!m) return;
        long from = file_size(inproc_out);
        ft_ctx_options o = ft_ctx_options_default();
        o.mem_limit = weights + 4096;
        ctx = NULL;
        CHECK_OK(ctx, ft_ctx_create_ex(&o, &ctx));
        if (!ctx) return;
        m = load_bert(ctx, mode);
        ft_host_tensor in[8];
        int n_in = 0;
        void *owned = NULL;
        if (m && ft_model_example_inputs(m, 2, 16, in, &n_in, &owned) == FT_OK)
            CHECK(ft_model_forward(m, in, n_in) == FT_ERR_OOM, "%s: forward with %zu bytes gave %s",
                  modes[k], o.mem_limit, ft_ctx_errmsg(ctx));
        free(owned);
        ft_model_free(m);
        ft_ctx_free(ctx);
        record rec;
        if (read_record(inproc_out, from, &rec) != 0) {
            CHECK(0, "no record");
            return;
        }
        CHECK(rec.unbalanced == 0 && rec.pushes == rec.pops && rec.n > 1,
              "%s: %d pushes, %d pops, %d unbalanced", modes[k], rec.pushes, rec.pops, rec.unbalanced);
        CHECK(rec.n > 0 && !strncmp(rec.r[0].name, "forward bert ", 13), "%s: first range '%s'",
              modes[k], rec.n ? rec.r[0].name : "");
        free(rec.r);
    }
}

int main(void) {
    const char *b = getenv("FT_BUILD");
    if (!b || !*b) b = "build";
    snprintf(tool, sizeof tool, "%s/ftengine", b);
    snprintf(emu_tool, sizeof emu_tool, "%s/emu/ftengine", b);
    snprintf(inject, sizeof inject, "%s/tests/libnvtx_inject.so", b);
    ft_build_info bi = ft_build_info_get();
    if (!bi.nvtx || access(inject, R_OK) != 0) {
        printf("  SKIP: %s\n", bi.nvtx ? "no injection library (make builds it)" : "built without NVTX");
        printf("RESULT: 0 passed, 0 failed, 1 skipped\n");
        return 0;
    }
    if (inject[0] != '/') { /* dlopen wants a path, not a bare name */
        char cwd[256], abs[sizeof inject];
        if (getcwd(cwd, sizeof cwd) && snprintf(abs, sizeof abs, "%.255s/%.200s", cwd, inject) > 0)
            memcpy(inject, abs, sizeof inject);
    }
    ft_test_tmpdir_make("nvtx");
    /* this process's own NVTX: attached before its first context decides */
    snprintf(inproc_out, sizeof inproc_out, "%s/inproc.txt", tmpdir);
    setenv("NVTX_INJECTION64_PATH", inject, 1);
    setenv("FT_NVTX_INJECT_OUT", inproc_out, 1);
    unsetenv("FT_NVTX");
    RUN(test_golden_cpu);
    RUN(test_golden_emulated_cuda);
    RUN(test_golden_gpu);
    RUN(test_step_names);
    RUN(test_switches);
    RUN(test_profiler_capture_range);
    RUN(test_cupti_busy_fallback);
    RUN(test_failing_ops_balance);
    RUN(test_failing_forward_balance);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

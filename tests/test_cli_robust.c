/*
 * test_cli_robust.c - build/ftengine against bad input, as tables of rows
 * (issue 13). A row names the command, its exit status (0; 1 with exactly one
 * stderr line "ftengine: error: ..."; 2 for usage) and the files of its scratch
 * folder that may change; no row may end in a signal or outlive its timeout.
 * Tables: special files as outputs (FIFO, socket, directory, links to them,
 * dangling links; made under a temp dir, never /dev) and unwritable side files
 * (nothing new, older outputs untouched, refused before the work); empty paths
 * and one file given twice; overflowing sizes through every command; FIFOs as
 * inputs or config.json; signals during a run (no temporary left); masks other
 * than 0/1 (finite outputs or a clear refusal); NaN/Inf inputs (the same
 * non-finite positions in eager, graph and static mode).
 * Rows marked LIB check the library side of issue 13 (sizes, FIFOs, masks,
 * NaN): they run as a group of their own, test_lib_rows.
 */
#include "ft_golden.h"
#include "ft_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#define LIB 1 /* a row that waits for the library side of issue 13 */

static char tool[512];
static int pending_only; /* the runners run the LIB rows (1) or the others (0) */

typedef struct result {
    int code;      /* exit status, or -1 when killed by a signal */
    int sig;       /* the signal that ended it, or 0 */
    int timed_out; /* still running at the timeout, then killed */
    char out[16384], err[8192];
} result;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void slurp(const char *path, char *buf, size_t size) {
    size_t n = 0;
    ssize_t r;
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        while (n + 1 < size && (r = read(fd, buf + n, size - 1 - n)) > 0) n += (size_t)r;
        close(fd);
    }
    buf[n] = 0;
}

static int has_temp(const char *dir);
static const char *watch_file; /* besides temporaries, a file whose appearance triggers the signal */

static void copy_str(char *dst, size_t size, const char *src) {
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* Runs the tool with argv (NULL-terminated, without the program name). With
 * sig > 0, sends it once a temporary output ("*.tmp.*") shows up in watch_dir. */
static result run_tool_sig(const char *const *args, double timeout_s, int sig, const char *watch_dir) {
    result r;
    memset(&r, 0, sizeof r);
    char of[300], ef[300];
    snprintf(of, sizeof of, "%s/stdout", tmpdir);
    snprintf(ef, sizeof ef, "%s/stderr", tmpdir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(of, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(ef, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        /* a test started in the background has SIGINT ignored: the tool must see the default */
        int sigs[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE};
        for (int i = 0; i < 5; i++) signal(sigs[i], SIG_DFL);
        const char *argv[40] = {tool};
        int n = 1;
        for (int i = 0; args[i] && n < 39; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(tool, (char *const *)argv);
        _exit(127);
    }
    int status = 0, sent = 0;
    double t0 = now_s();
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (sig && !sent && has_temp(watch_dir)) {
            usleep(200 * 1000);
            kill(pid, sig);
            sent = 1;
        }
        if (now_s() - t0 > timeout_s) {
            r.timed_out = 1;
            kill(pid, SIGTERM);
            usleep(500 * 1000);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        usleep(10 * 1000);
    }
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    slurp(of, r.out, sizeof r.out);
    slurp(ef, r.err, sizeof r.err);
    return r;
}

#define run_tool(args, timeout_s) run_tool_sig(args, timeout_s, 0, NULL)

/* What a row requires of its result: the exit status; for 1, exactly one line
 * "ftengine: error: ..." holding `needle` (if any). */
static int check_result(const char *row, const result *r, int want, const char *needle) {
    int bad = 0;
    if (r->timed_out || r->sig) {
        CHECK(0, "%s: %s %d (stderr: %.300s)", row,
              r->timed_out ? "still running at its timeout, killed by signal" : "killed by signal", r->sig, r->err);
        return 1;
    }
    if (r->code != want) {
        CHECK(0, "%s: exit %d, want %d (stderr: %.400s)", row, r->code, want, r->err);
        return 1;
    }
    if (want == 1) {
        const char *err = r->err; /* progress lines of long commands come before the error */
        while (!strncmp(err, "sweep: point ", 13) && strchr(err, '\n')) err = strchr(err, '\n') + 1;
        size_t len = strlen(err);
        bad |= strncmp(err, "ftengine: error: ", 17) != 0 || len < 18 || err[len - 1] != '\n' ||
               memchr(err, '\n', len - 1) != NULL;
        CHECK(!bad, "%s: stderr is not one line 'ftengine: error: ...': %.400s", row, r->err);
        if (needle && !strstr(r->err, needle)) {
            CHECK(0, "%s: the error lacks '%s': %.400s", row, needle, r->err);
            bad = 1;
        }
    }
    return bad;
}

/* CHECK prints the first 8 failures of a test: a row that failed later says so here. */
static void row_done(const char *row, int fails_before) {
    if (ft_t_cur_fail > fails_before && ft_t_cur_fail > 8) printf("  FAIL %s\n", row);
}

/* ---- scratch folders and what changed in them ---- */

typedef struct entry { char name[64], link[256], head[64]; mode_t type; long long size; } entry;
typedef struct snap { int n; entry e[32]; } snap;

static void take_snap(const char *dir, snap *s) {
    memset(s, 0, sizeof *s);
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) && s->n < 32) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        entry *e = &s->e[s->n++];
        char p[600];
        copy_str(e->name, sizeof e->name, de->d_name);
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) != 0) continue;
        e->type = st.st_mode & S_IFMT;
        e->size = (long long)st.st_size;
        if (S_ISLNK(st.st_mode)) {
            ssize_t k = readlink(p, e->link, sizeof e->link - 1);
            if (k > 0) e->link[k] = 0;
        } else if (S_ISREG(st.st_mode)) {
            slurp(p, e->head, sizeof e->head);
        }
    }
    if (d) closedir(d);
}

static const entry *find_entry(const snap *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->e[i].name, name)) return &s->e[i];
    return NULL;
}

static int listed(const char *const *names, const char *name) {
    for (int i = 0; names && names[i]; i++)
        if (!strcmp(names[i], name)) return 1;
    return 0;
}

/* Everything in `before` is still there, unchanged, unless named in `changed`;
 * nothing new appeared except names in `changed`, which must exist if must_exist. */
static void check_files(const char *row, const snap *before, const snap *after, const char *const *changed,
                        int must_exist) {
    for (int i = 0; i < before->n; i++) {
        const entry *b = &before->e[i], *a = find_entry(after, b->name);
        if (listed(changed, b->name)) continue;
        CHECK(a != NULL, "%s: %s was removed", row, b->name);
        if (a) CHECK(a->type == b->type && a->size == b->size && !strcmp(a->link, b->link) && !strcmp(a->head, b->head),
              "%s: %s was changed (type %o -> %o, size %lld -> %lld)", row, b->name, (unsigned)b->type,
              (unsigned)a->type, b->size, a->size);
    }
    for (int i = 0; i < after->n; i++)
        CHECK(find_entry(before, after->e[i].name) || listed(changed, after->e[i].name),
              "%s: %s was left behind", row, after->e[i].name);
    for (int i = 0; must_exist && changed && changed[i]; i++) {
        const entry *a = find_entry(after, changed[i]);
        CHECK(a && a->type == S_IFREG, "%s: %s was not written", row, changed[i]);
    }
}

static int has_temp(const char *dir) {
    snap s;
    take_snap(dir, &s);
    for (int i = 0; i < s.n; i++)
        if (strstr(s.e[i].name, ".tmp.") || (watch_file && !strcmp(s.e[i].name, watch_file))) return 1;
    return 0;
}

/* A folder with one of each kind of file an output may be pointed at. */
static void make_fixture(const char *dir) {
    char p[600];
    mkdir(dir, 0755);
#define AT(name) (snprintf(p, sizeof p, "%s/%s", dir, name), p)
    CHECK(mkfifo(AT("fifo"), 0644) == 0, "mkfifo: %s", strerror(errno));
    CHECK(mkdir(AT("dir"), 0755) == 0, "mkdir");
    CHECK(symlink("fifo", AT("lfifo")) == 0, "symlink");
    CHECK(symlink("nowhere", AT("dangling")) == 0, "symlink");
    CHECK(symlink("old.safetensors", AT("lold")) == 0, "symlink");
    FILE *f = fopen(AT("old.safetensors"), "w");
    if (f) { fputs("OLD CONTENTS, NOT A TENSOR FILE\n", f); fclose(f); }
    f = fopen(AT("afile"), "w");
    if (f) { fputs("a plain file\n", f); fclose(f); }
    CHECK(mkdir(AT("rodir"), 0555) == 0, "mkdir");
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    copy_str(sa.sun_path, sizeof sa.sun_path, AT("sock"));
    CHECK(s >= 0 && strlen(p) < sizeof sa.sun_path && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0,
          "cannot make a socket at %s", p);
    if (s >= 0) close(s);
#undef AT
}

/* ---- arguments with placeholders ---- */

static char golden[5][512], inputs[5][512], bad_ids[512];
enum { BERT, RESNET, WAVLM, FUNNEL, MOBILEBERT };
static const char *arch_names[] = {"bert", "resnet", "wavlm", "funnel", "mobilebert"};

/* "@x": x in the row's folder; "%t/x": x in the test's folder; "%bert" etc.: a
 * golden model; "%in": bert's inputs; "%badids": bert inputs with an id out of
 * range (fails inside the forward). */
static void expand(const char *const *in, const char **out, char store[][600], const char *dir) {
    int i = 0;
    for (; in[i]; i++) {
        out[i] = in[i];
        if (in[i][0] == '@') {
            snprintf(store[i], 600, "%s/%s", dir, in[i] + 1);
            out[i] = store[i];
        } else if (!strncmp(in[i], "%t/", 3)) {
            snprintf(store[i], 600, "%s/%s", tmpdir, in[i] + 3);
            out[i] = store[i];
        } else if (!strcmp(in[i], "%in")) {
            out[i] = inputs[BERT];
        } else if (!strcmp(in[i], "%badids")) {
            out[i] = bad_ids;
        } else if (in[i][0] == '%') {
            for (int a = 0; a < 5; a++)
                if (!strcmp(in[i] + 1, arch_names[a])) out[i] = golden[a];
        }
    }
    out[i] = NULL;
}

/* The command line of a row, for messages. */
static const char *describe(const char *const *args, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; args[i] && n + 1 < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s'%s'", i ? " " : "", args[i]);
    return buf;
}

/* ---- output targets and side files ---- */

typedef struct out_row {
    int lib;
    const char *args[24];
    int want;
    const char *needle;       /* in the error line */
    const char *changed[4];   /* files of the folder that may change (and must, on success) */
    const char *not_in_stdout; /* the refusal came before the work: no result printed */
} out_row;

#define RUN_BERT "run", "%bert", "--inputs", "%in"
#define FAST "--iters", "1", "--warmup", "0"
#define LONG "--iters", "1000000", "--warmup", "0"

static const out_row out_rows[] = {
    /* targets that are not regular files: refused, untouched */
    {0, {RUN_BERT, "--out", "@dir", NULL}, 1, "directory", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@dir/", NULL}, 1, "directory", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@fifo", NULL}, 1, "FIFO", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@sock", NULL}, 1, "socket", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@lfifo", NULL}, 1, "FIFO", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@dangling", NULL}, 1, "dangling", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@new.safetensors", "--trace", "@fifo", NULL}, 1, "FIFO", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@new.safetensors", "--ops-csv", "@dir", NULL}, 1, "directory", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@old.safetensors", "--trace", "@lfifo", NULL}, 1, "FIFO", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@new.safetensors", "--ops-csv", "@sock", NULL}, 1, "socket", {NULL}, NULL},
    {0, {"bench", "%bert", "--trace", "@fifo", LONG, NULL}, 1, "FIFO", {NULL}, "latency"},
    {0, {"bench", "%bert", "--ops-csv", "@sock", LONG, NULL}, 1, "socket", {NULL}, "latency"},
    {0, {"bench", "%bert", "--trace", "@dir", LONG, NULL}, 1, "directory", {NULL}, "latency"},
    {0, {"bench", "%bert", "--trace", "@dangling", LONG, NULL}, 1, "dangling", {NULL}, "latency"},
    {0, {"sweep", "%bert", "--csv", "@fifo", LONG, NULL}, 1, "FIFO", {NULL}, "mean ms"},
    {0, {"sweep", "%bert", "--csv", "@dir", LONG, NULL}, 1, "directory", {NULL}, "mean ms"},
    /* side files that cannot be written: nothing new, the older output untouched, refused first */
    {0, {RUN_BERT, "--out", "@old.safetensors", "--trace", "@missing/t.json", NULL}, 1, "missing", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@old.safetensors", "--ops-csv", "@afile/t.csv", NULL}, 1, "afile", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@old.safetensors", "--trace", "@rodir/t.json", NULL}, 1, "rodir", {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@missing/o.safetensors", "--trace", "@t.json", NULL}, 1, "missing", {NULL}, NULL},
    {0, {"bench", "%bert", "--trace", "@missing/t.json", LONG, NULL}, 1, "missing", {NULL}, "latency"},
    {0, {"bench", "%bert", "--trace", "@t.json", "--ops-csv", "@rodir/t.csv", LONG, NULL}, 1, "rodir", {NULL},
     "latency"},
    {0, {"sweep", "%bert", "--csv", "@missing/s.csv", LONG, NULL}, 1, "missing", {NULL}, "mean ms"},
    /* a failure inside the forward: no output, no side file, the older output kept */
    {0, {"run", "%bert", "--inputs", "%badids", "--out", "@old.safetensors", "--trace", "@t.json", "--ops-csv",
         "@t.csv", NULL}, 1, "input_ids", {NULL}, NULL},
    /* what must work: links written through, older files replaced, every file together */
    {0, {RUN_BERT, "--out", "@lold", NULL}, 0, NULL, {"old.safetensors", NULL}, NULL},
    {0, {RUN_BERT, "--out", "@old.safetensors", "--trace", "@t.json", "--ops-csv", "@t.csv", NULL}, 0, NULL,
     {"old.safetensors", "t.json", "t.csv", NULL}, NULL},
    {0, {"bench", "%bert", "--trace", "@t.json", "--ops-csv", "@lold", FAST, NULL}, 0, NULL,
     {"t.json", "old.safetensors", NULL}, NULL},
    {0, {"sweep", "%bert", "--modes", "eager", "--batches", "1", "--csv", "@lold", FAST, NULL}, 0, NULL,
     {"old.safetensors", NULL}, NULL},
    /* usage errors: empty paths, one file given twice */
    {0, {RUN_BERT, "--out", "", NULL}, 2, NULL, {NULL}, NULL},
    {0, {"run", "%bert", "--inputs", "", "--out", "@o.safetensors", NULL}, 2, NULL, {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@o.safetensors", "--trace", "", NULL}, 2, NULL, {NULL}, NULL},
    {0, {"run", "", "--inputs", "%in", "--out", "@o.safetensors", NULL}, 2, NULL, {NULL}, NULL},
    {0, {"bench", "%bert", "--ops-csv", "", FAST, NULL}, 2, NULL, {NULL}, NULL},
    {0, {"sweep", "%bert", "--csv", "", FAST, NULL}, 2, NULL, {NULL}, NULL},
    {0, {"info", "", NULL}, 2, NULL, {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@o.safetensors", "--trace", "@o.safetensors", NULL}, 2, NULL, {NULL}, NULL},
    {0, {RUN_BERT, "--out", "@lold", "--ops-csv", "@old.safetensors", NULL}, 2, NULL, {NULL}, NULL},
    {0, {"bench", "%bert", "--trace", "@t.json", "--ops-csv", "@t.json", LONG, NULL}, 2, NULL, {NULL}, "latency"},
};

static void test_output_targets(void) {
    int root = geteuid() == 0;
    for (size_t i = 0; i < sizeof out_rows / sizeof out_rows[0]; i++) {
        const out_row *w = &out_rows[i];
        if (w->lib != pending_only) continue;
        char dir[300], row[400], store[24][600];
        const char *args[24];
        snprintf(dir, sizeof dir, "%s/out%zu", tmpdir, i);
        snprintf(row, 40, "outputs row %zu: ", i);
        describe(w->args, row + strlen(row), sizeof row - strlen(row));
        int ro = 0;
        for (int k = 0; w->args[k]; k++) ro |= strstr(w->args[k], "rodir") != NULL;
        if (ro && root) continue; /* root writes into a read-only folder: the other rows cover the class */
        make_fixture(dir);
        expand(w->args, args, store, dir);
        snap before, after;
        take_snap(dir, &before);
        int f0 = ft_t_cur_fail;
        result r = run_tool(args, 120);
        take_snap(dir, &after);
        check_result(row, &r, w->want, w->needle);
        check_files(row, &before, &after, w->want == 0 ? w->changed : NULL, w->want == 0);
        if (w->not_in_stdout)
            CHECK(!strstr(r.out, w->not_in_stdout), "%s: the work ran before the refusal: %.300s", row, r.out);
        if (w->want == 0 && !strcmp(w->args[0], "run")) { /* the file written is a tensor file */
            char p[600];
            snprintf(p, sizeof p, "%s/old.safetensors", dir);
            ft_ctx *ctx = NULL;
            ft_st_file *f = NULL;
            ft_ctx_create(FT_DEVICE_CPU, &ctx);
            CHECK(ft_st_open(ctx, p, &f) == FT_OK && ft_st_find(f, "last_hidden_state"), "%s: %s is no output file",
                  row, p);
            ft_st_close(f);
            ft_ctx_free(ctx);
        }
        row_done(row, f0);
    }
}

/* ---- signals during a run: the temporaries go, nothing new is left ---- */

static void test_signals(void) {
    if (pending_only) return;
    /* keep: a file the command may leave (sweep's CSV grows in place and keeps the
     * rows it has, docs/benchmarking.md); its appearance is also when to signal */
    static const struct { int sig; const char *args[16]; const char *keep; } rows[] = {
        {SIGTERM, {"bench", "%bert", "--trace", "@t.json", LONG, NULL}, NULL},
        {SIGINT, {"bench", "%bert", "--ops-csv", "@t.csv", "--trace", "@t.json", LONG, NULL}, NULL},
        {SIGHUP, {"bench", "%bert", "--trace", "@lold", LONG, NULL}, NULL},
        {SIGTERM, {"sweep", "%bert", "--modes", "eager", "--batches", "1", "--csv", "@s.csv", LONG, NULL}, "s.csv"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char dir[300], row[400], store[24][600];
        const char *args[24];
        snprintf(dir, sizeof dir, "%s/sig%zu", tmpdir, i);
        snprintf(row, 40, "signal row %zu (signal %d): ", i, rows[i].sig);
        describe(rows[i].args, row + strlen(row), sizeof row - strlen(row));
        make_fixture(dir);
        expand(rows[i].args, args, store, dir);
        snap before, after;
        take_snap(dir, &before);
        watch_file = rows[i].keep;
        result r = run_tool_sig(args, 120, rows[i].sig, dir);
        watch_file = NULL;
        take_snap(dir, &after);
        CHECK(!r.timed_out && r.sig == rows[i].sig, "%s: ended with exit %d / signal %d%s, want signal %d", row,
              r.code, r.sig, r.timed_out ? " (timed out)" : "", rows[i].sig);
        const char *keep[] = {rows[i].keep, NULL};
        check_files(row, &before, &after, rows[i].keep ? keep : NULL, 0);
    }
}

/* ---- sizes whose products overflow: one clear line, never a crash ---- */

typedef struct plain_row {
    int lib;
    const char *args[20];
    int want;
    double timeout_s;
} plain_row;

static const plain_row size_rows[] = {
    {LIB, {"bench", "%resnet", "--batch", "64", "--seq", "536870912", FAST, NULL}, 1, 120},
    {LIB, {"bench", "%resnet", "--batch", "256", "--seq", "536870912", FAST, NULL}, 1, 120},
    {LIB, {"bench", "%resnet", "--batch", "1024", "--seq", "268435456", FAST, NULL}, 1, 120},
    {0, {"bench", "%resnet", "--batch", "64", "--seq", "536870912", "--mode", "graph", FAST, NULL}, 1, 120},
    {0, {"bench", "%resnet", "--batch", "1000000000", "--seq", "1000000000", FAST, NULL}, 1, 120},
    {0, {"bench", "%resnet", "--batch", "16", "--seq", "400000000", "--mode", "static", FAST, NULL}, 1, 120},
    {0, {"bench", "%bert", "--batch", "1099511627776", FAST, NULL}, 2, 120},
    {0, {"bench", "%bert", "--seq", "99999999999999999999999", FAST, NULL}, 2, 120},
    {0, {"bench", "%bert", "--batch", "1000000000", "--seq", "1000000000", FAST, NULL}, 1, 120},
    {0, {"bench", "%wavlm", "--batch", "1000000000", "--seq", "1000000000", FAST, NULL}, 1, 120},
    {0, {"bench", "%funnel", "--batch", "1000000000", FAST, NULL}, 1, 120},
    {0, {"bench", "%mobilebert", "--batch", "1000000000", "--seq", "16", FAST, NULL}, 1, 120},
    {LIB, {"info", "%resnet", "--batch", "64", "--seq", "536870912", NULL}, 1, 120},
    {0, {"info", "%resnet", "--batch", "1000000000", "--seq", "1000000000", NULL}, 1, 120},
    {0, {"info", "%bert", "--batch", "1000000000", "--seq", "1000000000", NULL}, 1, 120},
    {0, {"info", "%funnel", "--batch", "1000000000", "--seq", "1000000000", NULL}, 1, 120},
    {0, {"info", "%mobilebert", "--batch", "1000000000", "--seq", "1000000000", NULL}, 1, 120},
    {0, {"info", "%wavlm", "--batch", "1000000000", "--seq", "1000000000", NULL}, 1, 120},
    {0, {"plan", "%resnet", "--batch", "64", "--seq", "536870912", NULL}, 1, 120},
    {0, {"sweep", "%resnet", "--modes", "eager", "--batches", "1000000", "--seq", "1000000000", FAST, NULL}, 1,
     120},
    /* input files whose shapes overflow (no data behind them) */
    {0, {"run", "%bert", "--inputs", "%t/ids_2p62.safetensors", "--out", "@o.safetensors", NULL}, 1, 120},
    {0, {"run", "%bert", "--inputs", "%t/ids_2p32.safetensors", "--out", "@o.safetensors", "--mode", "graph",
         NULL}, 1, 120},
    {0, {"run", "%resnet", "--inputs", "%t/pix_wrap.safetensors", "--out", "@o.safetensors", NULL}, 1, 120},
    {0, {"run", "%wavlm", "--inputs", "%t/wav_wrap.safetensors", "--out", "@o.safetensors", "--mode", "static",
         NULL}, 1, 120},
    /* FIFOs where files are read: a clear refusal, not a hang */
    {LIB, {"run", "%bert", "--inputs", "%t/in.fifo", "--out", "@o.safetensors", NULL}, 1, 10},
    {LIB, {"run", "%t/fifo_config", "--inputs", "%in", "--out", "@o.safetensors", NULL}, 1, 10},
    {LIB, {"info", "%t/fifo_config", NULL}, 1, 10},
    {LIB, {"info", "%t/fifo_weights", NULL}, 1, 10},
    {LIB, {"bench", "%t/fifo_weights", FAST, NULL}, 1, 10},
};

/* A safetensors file with one tensor of the given shape and no data. */
static void write_shape_only(const char *name, const char *tensor, const char *dtype, const char *shape) {
    char path[600], hdr[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    int n = snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[0,0]}}", tensor,
                     dtype, shape);
    while (n % 8) hdr[n++] = ' ';
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((unsigned long long)n >> (8 * i));
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(len8, 1, 8, f) == 8 && fwrite(hdr, 1, (size_t)n, f) == (size_t)n, "cannot write %s", path);
    if (f) fclose(f);
}

/* Copies a golden model to tmpdir/name and puts a FIFO in place of one of its files. */
static void fifo_model(const char *name, const char *file) {
    char cmd[1600], p[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/%s' && cp -r '%s' '%s/%s' && chmod -R u+w '%s/%s' && rm '%s/%s/%s'", tmpdir,
             name, golden[BERT], tmpdir, name, tmpdir, name, tmpdir, name, file);
    CHECK(system(cmd) == 0, "cannot copy the golden case");
    snprintf(p, sizeof p, "%s/%s/%s", tmpdir, name, file);
    CHECK(mkfifo(p, 0644) == 0, "mkfifo %s", p);
}

static void run_plain_rows(const plain_row *rows, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        const plain_row *w = &rows[i];
        if (w->lib != pending_only) continue;
        char dir[300], row[400], store[24][600];
        const char *args[24];
        snprintf(dir, sizeof dir, "%s/%s%zu", tmpdir, what, i);
        mkdir(dir, 0755);
        snprintf(row, 40, "%s row %zu: ", what, i);
        describe(w->args, row + strlen(row), sizeof row - strlen(row));
        expand(w->args, args, store, dir);
        snap before, after;
        take_snap(dir, &before);
        int f0 = ft_t_cur_fail;
        result r = run_tool(args, w->timeout_s);
        take_snap(dir, &after);
        check_result(row, &r, w->want, NULL);
        check_files(row, &before, &after, NULL, 0);
        row_done(row, f0);
    }
}

static void test_sizes_and_fifos(void) {
    run_plain_rows(size_rows, sizeof size_rows / sizeof size_rows[0], "size");
}

/* ---- masks and non-finite inputs, through `run`, in every mode ---- */

static const char *modes[] = {"eager", "graph", "static"};

/* The golden inputs of `arch` with tensor `key` replaced by (dtype, values). */
static int write_variant(ft_ctx *ctx, int arch, const char *key, ft_dtype dtype, const void *data, size_t nbytes,
                         const int64_t *shape, int ndim, const char *out) {
    ft_st_file *f = NULL;
    if (ft_st_open(ctx, inputs[arch], &f) != FT_OK) return -1;
    ft_st_tensor t[8];
    int n = 0, replaced = 0;
    for (int i = 0; i < ft_st_count(f) && n < 7; i++) {
        t[n] = *ft_st_get(f, i);
        if (!strcmp(t[n].name, key)) {
            t[n].dtype = dtype;
            t[n].data = data;
            t[n].nbytes = nbytes;
            replaced = 1;
        }
        n++;
    }
    if (!replaced) { /* an input the case does not have: added */
        t[n] = (ft_st_tensor){key, dtype, ndim, {0}, data, nbytes};
        for (int d = 0; d < ndim; d++) t[n].shape[d] = shape[d];
        n++;
    }
    ft_status st = ft_st_write(ctx, out, t, n);
    ft_st_close(f);
    return st == FT_OK ? 0 : -1;
}

/* Runs `run` on inputs in one mode; returns the result and the output file path. */
static result run_mode(int arch, const char *in, const char *mode, char *out, size_t size, const char *tag) {
    snprintf(out, size, "%s/%s_%s_%s.safetensors", tmpdir, arch_names[arch], tag, mode);
    const char *a[] = {"run", golden[arch], "--inputs", in, "--out", out, "--mode", mode, NULL};
    return run_tool(a, 120);
}

/* Positions of non-finite values of every output of `path`, compared with `ref`'s
 * (ref == NULL: all must be finite). Returns 0 when they agree. */
static int compare_nonfinite(ft_ctx *ctx, const char *row, const char *path, const char *ref) {
    ft_st_file *f = NULL, *g = NULL;
    int bad = 0;
    if (ft_st_open(ctx, path, &f) != FT_OK || (ref && ft_st_open(ctx, ref, &g) != FT_OK)) {
        CHECK(0, "%s: cannot read outputs: %s", row, ft_ctx_errmsg(ctx));
        ft_st_close(f);
        return 1;
    }
    for (int i = 0; i < ft_st_count(f); i++) {
        const ft_st_tensor *t = ft_st_get(f, i), *u = g ? ft_st_find(g, t->name) : NULL;
        if (t->dtype != FT_DTYPE_F32 || (g && (!u || u->nbytes != t->nbytes))) {
            CHECK(0, "%s: output %s differs in dtype or size from eager mode's", row, t->name);
            bad = 1;
            continue;
        }
        const float *x = (const float *)t->data, *y = u ? (const float *)u->data : NULL;
        size_t n = t->nbytes / 4, diff = 0, first = 0, nonfinite = 0;
        for (size_t k = 0; k < n; k++) {
            int a = !isfinite(x[k]), b = y ? !isfinite(y[k]) : 0;
            nonfinite += (size_t)a;
            if (a != b && !diff++) first = k;
        }
        if (diff) {
            CHECK(0, "%s: output %s has %zu non-finite values, %zu positions differ from %s (first %zu)", row,
                  t->name, nonfinite, diff, ref ? "eager mode" : "all finite", first);
            bad = 1;
        }
    }
    ft_st_close(f);
    ft_st_close(g);
    return bad;
}

typedef struct mask_value {
    int lib_archs; /* bit per arch: that arch's row waits for the library */
    ft_dtype dtype;
    double v;
} mask_value;

#define ARCH_BIT(a) (1 << (a))
static const mask_value mask_values[] = {
    {ARCH_BIT(BERT) | ARCH_BIT(MOBILEBERT), FT_DTYPE_I64, 2},
    {0, FT_DTYPE_F32, 0.5},
    {ARCH_BIT(BERT) | ARCH_BIT(MOBILEBERT), FT_DTYPE_F32, 2.0},
    {0, FT_DTYPE_I64, -1},
    {ARCH_BIT(BERT) | ARCH_BIT(MOBILEBERT), FT_DTYPE_F32, 1e30},
    {0, FT_DTYPE_I64, 3}, /* WavLM only: it has no mask in its golden inputs, one is added */
};

/* A mask other than 0/1 gives finite outputs or a clear refusal, never a silent NaN. */
static void test_masks(void) {
    ft_ctx *ctx = NULL;
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    const int archs[] = {BERT, MOBILEBERT, FUNNEL, WAVLM};
    for (size_t vi = 0; vi < sizeof mask_values / sizeof mask_values[0]; vi++) {
        const mask_value *mv = &mask_values[vi];
        for (int ai = 0; ai < 4; ai++) {
            int arch = archs[ai];
            if ((arch == WAVLM) != (vi == 5)) continue;
            int lib = (mv->lib_archs & ARCH_BIT(arch)) != 0;
            if (lib != pending_only) continue;
            /* a 2 x 16 mask (WavLM: 2 x 16000) of ones with the value at [0, 3] and a zero at [1, last] */
            int64_t shape[2] = {2, arch == WAVLM ? 16000 : 16};
            size_t n = (size_t)(shape[0] * shape[1]);
            void *m = calloc(n, 8);
            for (size_t k = 0; k < n; k++) {
                double v = k == 3 ? mv->v : k == n - 1 ? 0 : 1;
                if (mv->dtype == FT_DTYPE_I64) ((int64_t *)m)[k] = (int64_t)v;
                else ((float *)m)[k] = (float)v;
            }
            char in[600], out[600], row[200], tag[32];
            snprintf(tag, sizeof tag, "mask%zu", vi);
            snprintf(in, sizeof in, "%s/%s_%s.safetensors", tmpdir, arch_names[arch], tag);
            CHECK(write_variant(ctx, arch, "attention_mask", mv->dtype, m, n * (mv->dtype == FT_DTYPE_I64 ? 8 : 4),
                                shape, 2, in) == 0, "cannot write %s", in);
            free(m);
            for (int mo = 0; mo < 3; mo++) {
                snprintf(row, sizeof row, "mask row: %s, %s mask holding %g, %s mode", arch_names[arch],
                         ft_dtype_name(mv->dtype), mv->v, modes[mo]);
                int f0 = ft_t_cur_fail;
                result r = run_mode(arch, in, modes[mo], out, sizeof out, tag);
                if (r.code == 1 && !r.sig && !r.timed_out) check_result(row, &r, 1, "mask");
                else if (!check_result(row, &r, 0, NULL)) compare_nonfinite(ctx, row, out, NULL);
                remove(out);
                row_done(row, f0);
            }
        }
    }
    ft_ctx_free(ctx);
}

typedef struct nan_row {
    int lib;
    int arch;
    const char *key; /* the float input changed */
    double v;
    int where;       /* 0: a third into the tensor, 1: its last element, 2: element 3 */
} nan_row;

static const nan_row nan_rows[] = {
    {LIB, RESNET, "pixel_values", NAN, 0},
    {LIB, RESNET, "pixel_values", INFINITY, 1},
    {LIB, RESNET, "pixel_values", -INFINITY, 2},
    {0, WAVLM, "input_values", NAN, 0},
    {0, WAVLM, "input_values", INFINITY, 1},
    {0, WAVLM, "input_values", -INFINITY, 2},
    {0, BERT, "attention_mask", NAN, 2},
    {0, MOBILEBERT, "attention_mask", INFINITY, 2},
    {0, FUNNEL, "attention_mask", NAN, 2},
};

/* Non-finite inputs: every mode ends the same way, with non-finite outputs in
 * the same positions as eager mode (or the same clear refusal). */
static void test_nonfinite_inputs(void) {
    ft_ctx *ctx = NULL;
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    for (size_t i = 0; i < sizeof nan_rows / sizeof nan_rows[0]; i++) {
        const nan_row *w = &nan_rows[i];
        if (w->lib != pending_only) continue;
        ft_st_file *f = NULL;
        const ft_st_tensor *t = NULL;
        if (ft_st_open(ctx, inputs[w->arch], &f) == FT_OK) t = ft_st_find(f, w->key);
        CHECK(t != NULL, "%s lacks %s", inputs[w->arch], w->key);
        if (!t) {
            ft_st_close(f);
            continue;
        }
        size_t n = 1;
        for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
        float *x = (float *)malloc(n * 4);
        for (size_t k = 0; k < n; k++)
            x[k] = t->dtype == FT_DTYPE_F32 ? ((const float *)t->data)[k] : (float)((const int64_t *)t->data)[k];
        size_t at = w->where == 0 ? n / 3 : w->where == 1 ? n - 1 : 3;
        x[at] = (float)w->v;
        int64_t shape[FT_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
        int ndim = t->ndim;
        ft_st_close(f);
        char in[600], tag[32], out[3][600], row[200];
        snprintf(tag, sizeof tag, "nan%zu", i);
        snprintf(in, sizeof in, "%s/%s_%s.safetensors", tmpdir, arch_names[w->arch], tag);
        CHECK(write_variant(ctx, w->arch, w->key, FT_DTYPE_F32, x, n * 4, shape, ndim, in) == 0, "cannot write %s", in);
        free(x);
        result r[3];
        for (int mo = 0; mo < 3; mo++) {
            snprintf(row, sizeof row, "non-finite row: %s, %s[%zu] = %g, %s mode", arch_names[w->arch], w->key, at, w->v,
                     modes[mo]);
            int f0 = ft_t_cur_fail;
            r[mo] = run_mode(w->arch, in, modes[mo], out[mo], sizeof out[mo], tag);
            if (r[mo].code == 1) check_result(row, &r[mo], 1, NULL);
            else check_result(row, &r[mo], 0, NULL);
            if (mo > 0) {
                CHECK(r[mo].code == r[0].code, "%s: exit %d, eager mode exits %d", row, r[mo].code, r[0].code);
                if (r[mo].code == 0 && r[0].code == 0) compare_nonfinite(ctx, row, out[mo], out[0]);
            }
            row_done(row, f0);
        }
        for (int mo = 0; mo < 3; mo++) remove(out[mo]);
    }
    ft_ctx_free(ctx);
}

/* The rows of the library side of issue 13, run after the others. */
static void test_lib_rows(void) {
    pending_only = 1;
    test_output_targets();
    test_sizes_and_fifos();
    test_masks();
    test_nonfinite_inputs();
    pending_only = 0;
}

/* The files the rows share; run whatever FT_TEST_FILTER selects. Returns 0 or -1. */
static int setup(void) {
    int bad = 0;
    for (int a = 0; a < 5; a++) {
        snprintf(golden[a], sizeof golden[a], "%s/%s", ft_test_golden_dir(), arch_names[a]);
        snprintf(inputs[a], sizeof inputs[a], "%s/inputs.safetensors", golden[a]);
    }
    write_shape_only("ids_2p62.safetensors", "input_ids", "I64", "[4611686018427387904,4]");
    write_shape_only("ids_2p32.safetensors", "input_ids", "I64", "[4294967296,4294967296]");
    write_shape_only("pix_wrap.safetensors", "pixel_values", "F32", "[2147483648,2147483648,2147483648,8]");
    write_shape_only("wav_wrap.safetensors", "input_values", "F32", "[4294967296,1073741824]");
    char p[600];
    snprintf(p, sizeof p, "%s/in.fifo", tmpdir);
    bad |= mkfifo(p, 0644) != 0;
    fifo_model("fifo_config", "config.json");
    fifo_model("fifo_weights", "model.safetensors");
    ft_ctx *ctx = NULL;
    ft_ctx_create(FT_DEVICE_CPU, &ctx);
    int64_t ids[32];
    for (int i = 0; i < 32; i++) ids[i] = i == 5 ? 100000 : 1 + i;
    int64_t shape[2] = {2, 16};
    snprintf(bad_ids, sizeof bad_ids, "%s/bad_ids.safetensors", tmpdir);
    bad |= write_variant(ctx, BERT, "input_ids", FT_DTYPE_I64, ids, sizeof ids, shape, 2, bad_ids) != 0;
    ft_ctx_free(ctx);
    return bad || ft_t_cur_fail ? -1 : 0;
}

int main(void) {
    const char *b = getenv("FT_BUILD");
    snprintf(tool, sizeof tool, "%s/ftengine", b && *b ? b : "build");
    ft_test_tmpdir_make("clirobust");
    struct stat st;
    if (!tmpdir[0] || stat(tool, &st) != 0) {
        printf("cannot set up (tool %s)\n", tool);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    ft_t_cur_name = "setup";
    if (setup() != 0) {
        printf("cannot set up the shared files in %s\n", tmpdir);
        return 1;
    }
    RUN(test_output_targets);
    RUN(test_signals);
    RUN(test_sizes_and_fifos);
    RUN(test_masks);
    RUN(test_nonfinite_inputs);
    RUN(test_lib_rows);
    /* the read-only folders of the fixtures: writable again so they can be removed */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'", tmpdir);
    if (system(cmd) != 0) printf("could not chmod %s\n", tmpdir);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

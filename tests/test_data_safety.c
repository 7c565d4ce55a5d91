/*
 * test_data_safety.c - build/ftengine never loses or destroys the user's data
 * (issue 27), each class of it tried through the tool:
 *   - full disks: a file-size limit (RLIMIT_FSIZE, several sizes) and, where a
 *     private tmpfs can be mounted (a user namespace), a full file system: every
 *     output fails with one line naming it and the reason, exit 1, nothing left
 *     behind; the sweep CSV keeps whole rows only; the report on stdout too;
 *   - an output that is an input: the same file named otherwise (./, a/../, a
 *     symbolic link, a hard link, /proc/self/fd/N, a link to the model folder),
 *     a file of the model directory, another output: refused before any work,
 *     files untouched; symbolic-link outputs written through, sweep --resume too;
 *   - two sweeps on one CSV: the second refused (an advisory lock);
 *   - every FT_* knob with a bad value: one line naming it, no hang;
 *   - the smaller findings: long file names, stale temporaries, SIGUSR1/SIGUSR2/
 *     SIGALRM, "did you mean" only for names that do not exist, list options,
 *     info on a huge batch without building inputs, config keys named in errors,
 *     a model_type holding NUL.
 */
#include "ft_test.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static char tool[1024], golden_bert[1024];

typedef struct run_opt {
    const char *const *env;   /* NAME=VALUE to set (NULL-terminated), or NULL */
    long long fsize;          /* RLIMIT_FSIZE in bytes, 0: none */
    double timeout_s;         /* 0: 120 */
    const char *stdout_file;  /* stdout goes there (else a file in tmpdir) */
    const char *tmpfs;        /* mount a private tmpfs here first (skipped: code 200) */
    long tmpfs_kb;            /* its size */
    long fill_bytes;          /* then fill it with a file of this size, leaving the rest */
} run_opt;

typedef struct result {
    int code, sig, timed_out;
    char out[8192], err[8192];
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

static int exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

/* A private tmpfs at dir (a new mount namespace, in a user namespace when not
 * root), so a full file system can be made without touching the host's. */
static int mount_tmpfs(const char *dir, long kb) {
    if (unshare(CLONE_NEWNS) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return -1;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 && errno != EINVAL) return -1;
    char o[64];
    snprintf(o, sizeof o, "size=%ldk", kb);
    return mount("none", dir, "tmpfs", 0, o);
}

/* Runs the tool in tmpdir with args (NULL-terminated, without the program name). */
static result run(const char *const *args, const run_opt *o) {
    static const run_opt none;
    if (!o) o = &none;
    result r;
    memset(&r, 0, sizeof r);
    /* pipes, not files: a file-size limit must not cut the messages */
    int po[2], pe[2];
    if (pipe(po) != 0 || pipe(pe) != 0) {
        r.code = 127;
        return r;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(tmpdir) != 0) _exit(126);
        int out = o->stdout_file ? open(o->stdout_file, O_WRONLY | O_CREAT | O_TRUNC, 0644) : po[1];
        dup2(out, 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        int sigs[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGXFSZ, SIGUSR1, SIGUSR2, SIGALRM};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
        for (int i = 0; o->env && o->env[i]; i++) putenv((char *)o->env[i]);
        if (o->tmpfs) {
            if (mount_tmpfs(o->tmpfs, o->tmpfs_kb) != 0) _exit(200);
            if (o->fill_bytes > 0) {
                char p[700];
                snprintf(p, sizeof p, "%s/filler", o->tmpfs);
                int fd = open(p, O_WRONLY | O_CREAT, 0644);
                static char zero[4096];
                for (long n = 0; fd >= 0 && n < o->fill_bytes;) {
                    ssize_t w = write(fd, zero, (size_t)(o->fill_bytes - n < 4096 ? o->fill_bytes - n : 4096));
                    if (w <= 0) break;
                    n += w;
                }
                if (fd >= 0) close(fd);
            }
        }
        if (o->fsize) {
            struct rlimit rl = {(rlim_t)o->fsize, (rlim_t)o->fsize};
            setrlimit(RLIMIT_FSIZE, &rl);
        }
        setenv("OMP_NUM_THREADS", "1", 0);
        const char *argv[40] = {tool};
        int n = 1;
        for (int i = 0; args[i] && n < 39; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(tool, (char *const *)argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    size_t no = 0, ne = 0;
    int status = 0;
    double t0 = now_s(), limit = o->timeout_s > 0 ? o->timeout_s : 120;
    for (int done = 0;;) {
        ssize_t k;
        while (no + 1 < sizeof r.out && (k = read(po[0], r.out + no, sizeof r.out - 1 - no)) > 0) no += (size_t)k;
        while (ne + 1 < sizeof r.err && (k = read(pe[0], r.err + ne, sizeof r.err - 1 - ne)) > 0) ne += (size_t)k;
        if (done) break;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            done = 1;
            continue;
        }
        if (now_s() - t0 > limit) {
            r.timed_out = 1;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            done = 1;
        }
        usleep(5 * 1000);
    }
    r.out[no] = r.err[ne] = 0;
    close(po[0]);
    close(pe[0]);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return r;
}

/* exit 1 (or want) with exactly one line "ftengine: error: ..." holding each needle. */
static void expect_error(const char *what, const result *r, int want, const char *n1, const char *n2) {
    CHECK(!r->timed_out && !r->sig, "%s: %s (signal %d)", what, r->timed_out ? "timed out" : "killed", r->sig);
    CHECK(r->code == want, "%s: exit %d, want %d: %s", what, r->code, want, r->err);
    if (want != 1) return;
    int lines = 0;
    for (const char *p = r->err; *p; p++) lines += *p == '\n';
    CHECK(lines == 1 && !strncmp(r->err, "ftengine: error: ", 17), "%s: want one error line, got: %s", what,
          r->err);
    CHECK(!n1 || strstr(r->err, n1), "%s: the error does not say '%s': %s", what, n1, r->err);
    CHECK(!n2 || strstr(r->err, n2), "%s: the error does not say '%s': %s", what, n2, r->err);
}

/* Starts the tool in tmpdir (stdout, stderr to files there); returns its pid. */
static pid_t spawn(const char *const *args, const char *log) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char p[700];
        if (chdir(tmpdir) != 0) _exit(126);
        snprintf(p, sizeof p, "%s/%s", tmpdir, log);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        int sigs[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGXFSZ, SIGUSR1, SIGUSR2, SIGALRM};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
        setenv("OMP_NUM_THREADS", "1", 0);
        const char *argv[40] = {tool};
        int n = 1;
        for (int i = 0; args[i] && n < 39; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(tool, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* The error lines of stderr only (a sweep's progress lines are not errors). */
static int error_lines(const char *err) {
    int n = 0;
    for (const char *p = err; (p = strstr(p, "ftengine: error: ")); p++) n++;
    return n;
}

static void write_file(const char *name, const char *text) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Nothing named like a temporary of ours in dir. */
static int temporaries_in(const char *dir) {
    char cmd[800], out[256];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c 'ftengine\\.\\(tmp\\|old\\)\\|\\.tmp\\.' > '%s/.count'", dir, tmpdir);
    if (system(cmd) < 0) return -1;
    snprintf(cmd, sizeof cmd, "%s/.count", tmpdir);
    slurp(cmd, out, sizeof out);
    return atoi(out);
}

/* Every line of a CSV complete: it ends in '\n' and each row has the header's commas. */
static int csv_whole(const char *path, int *rows) {
    char buf[65536];
    slurp(path, buf, sizeof buf);
    *rows = 0;
    size_t n = strlen(buf);
    if (!n) return 1;
    if (buf[n - 1] != '\n') return 0;
    int want = -1;
    for (char *p = buf; *p;) {
        char *e = strchr(p, '\n');
        int commas = 0, quoted = 0;
        for (char *q = p; q < e; q++) {
            if (*q == '"') quoted = !quoted;
            commas += *q == ',' && !quoted;
        }
        if (want < 0) want = commas;
        else if (commas != want) return 0;
        else (*rows)++;
        p = e + 1;
    }
    return 1;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define FAST "--iters", "1", "--warmup", "0"

/* ---- 1. full disks ---- */

static void test_full_disk_csv(void) {
    /* the header is 370 bytes, a row about 220: limits inside the header, inside the
     * first row, and a few rows in */
    const long long limits[] = {200, 500, 1000, 1700, 2900};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        char csv[700], what[64];
        snprintf(csv, sizeof csv, "%s/full.csv", tmpdir);
        unlink(csv);
        snprintf(what, sizeof what, "sweep CSV at a %lld-byte limit", limits[i]);
        run_opt o = {.fsize = limits[i]};
        result r = run(ARGS("sweep", "bert-tiny", "--modes", "eager,graph", "--batches", "1,2,3,4,5,6,7,8", FAST,
                            "--csv", "full.csv"),
                       &o);
        CHECK(r.code == 1 && error_lines(r.err) == 1 && strstr(r.err, "--csv full.csv") &&
                  strstr(r.err, "File too large"),
              "%s: exit %d, want 1 and one line naming --csv and the reason: %s", what, r.code, r.err);
        int rows = 0;
        CHECK(!exists(csv) || csv_whole(csv, &rows), "%s: the CSV ends in a partial row", what);
        CHECK(temporaries_in(tmpdir) == 0, "%s: temporaries left", what);
    }
}

static void test_full_disk_outputs(void) {
    char in[1100];
    snprintf(in, sizeof in, "%s/inputs.safetensors", golden_bert);
    static const struct { const char *args[14]; const char *opt; const char *target; long long limit; } rows[] = {
        {{"run", "%g", "--inputs", "%in", "--out", "o.safetensors"}, "--out o.safetensors", "o.safetensors", 4096},
        {{"run", "%g", "--inputs", "%in", "--out", "o.safetensors"}, "--out o.safetensors", "o.safetensors", 100},
        {{"bench", "bert-tiny", FAST, "--trace", "t.json"}, "--trace t.json", "t.json", 2000},
        {{"bench", "bert-tiny", FAST, "--ops-csv", "c.csv"}, "--ops-csv c.csv", "c.csv", 1000},
        {{"bench", "bert-tiny", FAST, "--json", "b.json"}, "--json b.json", "b.json", 300},
        {{"bench", "bert-tiny", FAST, "--json", "b.json"}, "--json b.json", "b.json", 700},
        {{"sweep", "bert-tiny", "--modes", "eager", "--batches", "1", FAST, "--json", "s.json"}, "--json s.json",
         "s.json", 500},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *args[16];
        int n = 0;
        for (int k = 0; rows[i].args[k]; k++)
            args[n++] = !strcmp(rows[i].args[k], "%g") ? golden_bert : !strcmp(rows[i].args[k], "%in") ? in
                                                                                                   : rows[i].args[k];
        args[n] = NULL;
        char what[96], target[700];
        snprintf(what, sizeof what, "%s at a %lld-byte limit", rows[i].opt, rows[i].limit);
        snprintf(target, sizeof target, "%s/%s", tmpdir, rows[i].target);
        run_opt o = {.fsize = rows[i].limit};
        result r = run(args, &o);
        CHECK(r.code == 1 && error_lines(r.err) == 1 && strstr(r.err, rows[i].opt) && strstr(r.err, "File too large"),
              "%s: exit %d, want 1 with one line naming the file and the reason: %s", what, r.code, r.err);
        CHECK(!exists(target), "%s: %s was left", what, rows[i].target);
        CHECK(temporaries_in(tmpdir) == 0, "%s: temporaries left", what);
    }
    /* the report itself: stdout into a file at a limit */
    char out[700];
    snprintf(out, sizeof out, "%s/report.txt", tmpdir);
    run_opt o = {.fsize = 200, .stdout_file = out};
    result r = run(ARGS("bench", "bert-tiny", FAST), &o);
    CHECK(r.code == 1 && strstr(r.err, "standard output"), "bench > file at 200 bytes: exit %d: %s", r.code, r.err);
}

/* A real full file system: a private tmpfs filled to a few pages. */
static void test_full_tmpfs(void) {
    char mnt[700];
    snprintf(mnt, sizeof mnt, "%s/mnt", tmpdir);
    mkdir(mnt, 0755);
    const long fills[] = {64 * 1024, 60 * 1024, 56 * 1024}; /* 0, 1 and 2 pages free of 64 KiB */
    const char *batches = "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24"; /* 48 rows: 10 KB */
    int skipped = 0;
    for (size_t i = 0; i < sizeof fills / sizeof fills[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "sweep CSV on a tmpfs with %ld KiB free", (64 * 1024 - fills[i]) / 1024);
        run_opt o = {.tmpfs = mnt, .tmpfs_kb = 64, .fill_bytes = fills[i]};
        /* the CSV and a probe file land on the tmpfs; both are gone with the namespace */
        result r = run(ARGS("sweep", "bert-tiny", "--modes", "eager,graph", "--batches", batches, FAST, "--csv",
                            "mnt/s.csv"),
                       &o);
        if (r.code == 200) {
            skipped = 1;
            break;
        }
        CHECK(r.code == 1 && error_lines(r.err) == 1 && strstr(r.err, "--csv mnt/s.csv") &&
                  strstr(r.err, "No space left on device"),
              "%s: exit %d, want 1 naming the file and ENOSPC: %s", what, r.code, r.err);
    }
    if (skipped) SKIP("no private tmpfs here (user namespaces off); the RLIMIT_FSIZE cases cover writes");
}

/* ---- 2. an output that is an input ---- */

static void test_output_is_input(void) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && rm -rf m && cp -r '%s' m && chmod -R u+w m && cp m/inputs.safetensors in.st && "
             "ln -s in.st lnk && ln in.st hard && ln -s m mlink && mkdir -p sub && ln -s ../m/config.json sub/cfg && "
             "ln -s m/model.safetensors wlink",
             tmpdir, golden_bert);
    CHECK(system(cmd) == 0, "setup");
    static const struct { const char *args[16]; const char *needle; } rows[] = {
        {{"run", "m", "--inputs", "in.st", "--out", "in.st"}, "--inputs"},
        {{"run", "m", "--inputs", "in.st", "--out", "./in.st"}, "--inputs"},
        {{"run", "m", "--inputs", "./in.st", "--out", "sub/../in.st"}, "--inputs"},
        {{"run", "m", "--inputs", "in.st", "--out", "lnk"}, "--inputs"},
        {{"run", "m", "--inputs", "lnk", "--out", "hard"}, "--inputs"},
        {{"run", "m", "--inputs", "in.st", "--out", "/proc/self/fd/5"}, "--inputs"},
        {{"run", "m", "--inputs", "in.st", "--out", "o.st", "--ops-csv", "in.st"}, "--inputs"},
        {{"run", "m", "--inputs", "in.st", "--out", "o.st", "--trace", "hard"}, "--inputs"},
        {{"run", "m", "--inputs", "in.st", "--out", "m/model.safetensors"}, "model directory"},
        {{"run", "mlink", "--inputs", "in.st", "--out", "m/config.json"}, "model directory"},
        {{"run", "m", "--inputs", "in.st", "--out", "wlink"}, "model directory"},
        {{"bench", "m", FAST, "--json", "m/config.json"}, "model directory"},
        {{"bench", "m", FAST, "--trace", "sub/cfg"}, "model directory"},
        {{"bench", "./m/", FAST, "--ops-csv", "mlink/model.safetensors"}, "model directory"},
        {{"sweep", "m", "--modes", "eager", "--batches", "1", FAST, "--csv", "m/config.json"}, "model directory"},
        {{"sweep", "m", "--modes", "eager", "--batches", "1", FAST, "--json", "sub/cfg"}, "model directory"},
        {{"sweep", "mlink", "--modes", "eager", "--batches", "1", FAST, "--csv", "m/model.safetensors", "--resume"},
         "model directory"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char what[200] = "";
        for (int k = 0; rows[i].args[k]; k++) {
            strncat(what, rows[i].args[k], sizeof what - strlen(what) - 2);
            strncat(what, " ", sizeof what - strlen(what) - 1);
        }
        snprintf(cmd, sizeof cmd, "cd '%s' && md5sum in.st m/* > .before", tmpdir);
        CHECK(system(cmd) == 0, "md5sum");
        /* fd 5 of the tool is in.st (for /proc/self/fd/5) */
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            char p[700];
            snprintf(p, sizeof p, "%s/in.st", tmpdir);
            int fd = open(p, O_RDONLY);
            if (fd >= 0 && fd != 5) {
                dup2(fd, 5);
                close(fd);
            }
            result r = run(rows[i].args, NULL);
            int ok = r.code == 1 && error_lines(r.err) == 1 && strstr(r.err, rows[i].needle);
            if (!ok) printf("  %s: exit %d: %s\n", what, r.code, r.err);
            fflush(stdout);
            _exit(ok ? 0 : 1);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: not refused as an input", what);
        snprintf(cmd, sizeof cmd, "cd '%s' && md5sum in.st m/* | cmp -s - .before && test -L lnk && test -L wlink",
                 tmpdir);
        CHECK(system(cmd) == 0, "%s: an input changed", what);
        CHECK(temporaries_in(tmpdir) == 0, "%s: temporaries left", what);
        char o[700];
        snprintf(o, sizeof o, "%s/o.st", tmpdir);
        CHECK(!exists(o), "%s: an output was written", what);
    }
    /* two outputs that are one file: usage (2) */
    result r = run(ARGS("sweep", "m", "--modes", "eager", "--batches", "1", FAST, "--csv", "x.csv", "--json",
                        "./x.csv"),
                   NULL);
    CHECK(r.code == 2 && strstr(r.err, "same file"), "--csv x --json ./x: exit %d: %s", r.code, r.err);
    char x[700];
    snprintf(x, sizeof x, "%s/x.csv", tmpdir);
    CHECK(!exists(x), "--csv x --json x left x.csv");
    r = run(ARGS("bench", "m", FAST, "--trace", "hard", "--json", "lnk"), NULL);
    CHECK(r.code == 2 && strstr(r.err, "same file"), "--trace hard --json lnk: exit %d: %s", r.code, r.err);
}

/* Outputs through symbolic links are written through; sweep --resume keeps the link. */
static void test_links_written_through(void) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p res && rm -f res/real.csv s.link && touch res/real.csv && "
                              "ln -s res/real.csv s.link", tmpdir);
    CHECK(system(cmd) == 0, "setup");
    const char *const args[] = {"sweep", "bert-tiny", "--modes", "eager", "--batches", "1,2", FAST, "--rounds", "1",
                                "--csv", "s.link", NULL};
    result r = run(args, NULL);
    CHECK(r.code == 0, "sweep --csv LINK: exit %d: %s", r.code, r.err);
    const char *const res[] = {"sweep", "bert-tiny", "--modes", "eager", "--batches", "1,2,3", FAST, "--rounds", "1",
                               "--csv", "s.link", "--resume", NULL};
    r = run(res, NULL);
    CHECK(r.code == 0 && strstr(r.out, "resumed: 2 of 3"), "sweep --csv LINK --resume: exit %d: %s%s", r.code, r.out,
          r.err);
    char p[700], q[700];
    snprintf(p, sizeof p, "%s/s.link", tmpdir);
    snprintf(q, sizeof q, "%s/res/real.csv", tmpdir);
    struct stat st;
    CHECK(lstat(p, &st) == 0 && S_ISLNK(st.st_mode), "--resume replaced the symbolic link with a file");
    int rows = 0;
    CHECK(csv_whole(q, &rows) && rows == 3, "the linked CSV has %d rows, want 3", rows);
    snprintf(q, sizeof q, "%s/res", tmpdir);
    CHECK(temporaries_in(tmpdir) == 0 && temporaries_in(q) == 0, "temporaries left");
}

/* ---- 3. two sweeps on one CSV ---- */

static void test_csv_lock(void) {
    char csv[700], lnk[700];
    snprintf(csv, sizeof csv, "%s/locked.csv", tmpdir);
    snprintf(lnk, sizeof lnk, "%s/locked.link", tmpdir);
    unlink(csv);
    unlink(lnk);
    pid_t first = spawn(ARGS("sweep", "bert-tiny", "--modes", "eager", "--batches", "1,2,3", "--iters", "1000000",
                             "--warmup", "0", "--csv", "locked.csv"),
                        "first.log");
    /* it holds its lock once the file exists, and has started it (the header) soon after:
     * a sweep killed before that removes the file it made */
    struct stat st;
    for (int i = 0; i < 6000 && !(stat(csv, &st) == 0 && st.st_size > 0); i++) usleep(10 * 1000);
    CHECK(symlink("locked.csv", lnk) == 0, "symlink");
    const char *const *second[] = {
        ARGS("sweep", "bert-tiny", "--modes", "eager", "--batches", "1", FAST, "--csv", "locked.csv"),
        ARGS("sweep", "bert-tiny", "--modes", "eager", "--batches", "1", FAST, "--csv", "locked.csv", "--resume"),
        ARGS("sweep", "bert-tiny", "--modes", "graph", "--batches", "4", FAST, "--csv", "locked.link"),
    };
    char before[65536], after[65536];
    for (size_t i = 0; i < sizeof second / sizeof second[0]; i++) {
        slurp(csv, before, sizeof before);
        result r = run(second[i], &(run_opt){.timeout_s = 60});
        slurp(csv, after, sizeof after);
        CHECK(r.code == 1 && error_lines(r.err) == 1 && strstr(r.err, "another ftengine sweep"),
              "second sweep %zu: exit %d, want a refusal naming the lock: %s", i, r.code, r.err);
        CHECK(strlen(after) >= strlen(before) && !strncmp(before, after, strlen(before)),
              "second sweep %zu changed the first one's CSV", i);
    }
    kill(first, SIGTERM);
    int status = 0;
    waitpid(first, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "the first sweep did not end by SIGTERM");
    int rows = 0;
    CHECK(csv_whole(csv, &rows), "the first sweep's CSV ends in a partial row");
    /* the lock went with it: the file is free again */
    result r = run(ARGS("sweep", "bert-tiny", "--modes", "eager", "--batches", "1", FAST, "--csv", "locked.link"),
                   NULL);
    CHECK(r.code == 0, "a sweep after the first ended: exit %d: %s", r.code, r.err);
    CHECK(exists(lnk) && temporaries_in(tmpdir) == 0, "link or temporaries");
}

/* ---- 4. environment knobs ---- */

static void test_env_knobs(void) {
    static const char *const bad[] = {
        "FT_OP_HOST_COST_US=inf", "FT_OP_HOST_COST_US=1e12", "FT_OP_HOST_COST_US=-1", "FT_OP_HOST_COST_US=abc",
        "FT_OP_HOST_COST_US=", "FT_OP_HOST_COST_US=nan", "FT_OP_HOST_COST_US= 5", "FT_OP_HOST_COST_US=0x10",
        "FT_SYNC_DEBUG=yes", "FT_SYNC_DEBUG=", "FT_NVTX=2", "FT_CPU_PACK_CACHE_MB=-1", "FT_CPU_PACK_CACHE_MB=1.5",
        "FT_CPU_PACK_CACHE_MB=1e12", "FT_DISABLE_FUSION=true", "FT_DISABLE_PASSES=fold,,qkv", "FT_DISABLE_PASSES=",
        "FT_DISABLE_PASSES=nope", "FT_DISABLE_CUDA_GRAPHS=on", "FT_GEMM_AUTOTUNE=2", "FT_DISABLE_PDL=-1",
        "FT_ALLOW_TF32=1.0", "FT_FAST_GELU=01", "FT_ATTN_KERNEL=v3", "FT_ATTN_KERNEL=", "FT_CPU_WINOGRAD=off",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(bad[i], "="), bad[i]);
        const char *env[] = {bad[i], NULL};
        run_opt o = {.env = env, .timeout_s = 30};
        result r = run(ARGS("bench", "bert-tiny", FAST), &o);
        expect_error(bad[i], &r, 1, name, NULL);
    }
    /* good values still work */
    static const char *const good[] = {"FT_OP_HOST_COST_US=0.5", "FT_SYNC_DEBUG=0", "FT_DISABLE_PASSES=fold,qkv",
                                       "FT_CPU_PACK_CACHE_MB=0", "FT_ATTN_KERNEL=v1", "FT_NVTX=0",
                                       "FT_CPU_WINOGRAD=0"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const char *env[] = {good[i], NULL};
        run_opt o = {.env = env, .timeout_s = 60};
        result r = run(ARGS("bench", "bert-tiny", "--mode", "graph", FAST), &o);
        CHECK(r.code == 0, "%s: exit %d: %s", good[i], r.code, r.err);
    }
}

/* ---- 6. the smaller findings ---- */

static void test_long_names_and_stale(void) {
    char name[300];
    memset(name, 'n', 250);
    memcpy(name + 245, ".json", 6); /* 250 bytes: legal, and too long for "<name>.tmp.<pid>" */
    result r = run(ARGS("bench", "bert-tiny", FAST, "--json", name, "--trace", "t.json"), NULL);
    CHECK(r.code == 0, "bench --json <250-byte name>: exit %d: %s", r.code, r.err);
    char p[700];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    CHECK(exists(p), "the 250-byte output was not written");
    unlink(p);
    /* three 255-byte names sharing their first 250 bytes: distinct temporaries (the
     * library's temporary of a temporary too) */
    char n1[300], n2[300], n3[300];
    memset(n1, 'q', 250);
    memcpy(n2, n1, 250);
    memcpy(n3, n1, 250);
    memcpy(n1 + 250, ".json", 6);
    memcpy(n2 + 250, ".trce", 6);
    memcpy(n3 + 250, ".csvv", 6);
    r = run(ARGS("bench", "bert-tiny", FAST, "--json", n1, "--trace", n2, "--ops-csv", n3), NULL);
    CHECK(r.code == 0, "bench with three 255-byte names: exit %d: %s", r.code, r.err);
    const char *names[] = {n1, n2, n3};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, names[i]);
        CHECK(exists(p), "the 255-byte output %d was not written", i);
        unlink(p);
    }
    CHECK(temporaries_in(tmpdir) == 0, "temporaries left by long names");
    /* a temporary of a process that is gone is removed; one of a live process stays */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    char stale[700], live[700];
    snprintf(stale, sizeof stale, "%s/.x.json.ftengine.tmp.%ld", tmpdir, (long)dead);
    snprintf(live, sizeof live, "%s/.x.json.ftengine.tmp.%ld", tmpdir, (long)getpid());
    write_file(stale + strlen(tmpdir) + 1, "half");
    write_file(live + strlen(tmpdir) + 1, "half");
    r = run(ARGS("bench", "bert-tiny", FAST, "--json", "x.json"), NULL);
    CHECK(r.code == 0, "bench --json x.json: exit %d: %s", r.code, r.err);
    CHECK(!exists(stale), "a stale temporary of a dead process was left");
    CHECK(exists(live), "a temporary of a live process was removed");
    unlink(live);
}

static void test_signals(void) {
    const int sigs[] = {SIGUSR1, SIGUSR2, SIGALRM, SIGTERM};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        char out[700];
        snprintf(out, sizeof out, "%s/sig%zu.json", tmpdir, i);
        pid_t pid = spawn(ARGS("bench", "bert-tiny", "--iters", "100000", "--warmup", "0", "--json", out + strlen(tmpdir) + 1,
                               "--trace", "sigt.json"),
                          "sig.log");
        for (int k = 0; k < 3000 && temporaries_in(tmpdir) < 2; k++) usleep(10 * 1000);
        usleep(200 * 1000); /* into the timed forwards */
        kill(pid, sigs[i]);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sigs[i], "signal %d: ended with status 0x%x", sigs[i],
              status);
        CHECK(temporaries_in(tmpdir) == 0, "signal %d left temporaries", sigs[i]);
        CHECK(!exists(out), "signal %d: the output appeared", sigs[i]);
    }
}

static void test_did_you_mean(void) {
    char p[700];
    snprintf(p, sizeof p, "%s/bert-tinyy", tmpdir);
    CHECK(symlink("nowhere", p) == 0, "symlink");
    result r = run(ARGS("info", "bert-tinyy"), NULL);
    CHECK(r.code == 1 && !strstr(r.err, "did you mean"), "a dangling link got a suggestion: %s", r.err);
    unlink(p);
    r = run(ARGS("info", "bert-tinyy"), NULL);
    CHECK(r.code == 1 && strstr(r.err, "did you mean bert-tiny"), "a missing name got no suggestion: %s", r.err);
    mkdir(p, 0755); /* exists, but no model in it */
    r = run(ARGS("info", "bert-tinyy"), NULL);
    CHECK(r.code == 1 && !strstr(r.err, "did you mean"), "an existing folder got a suggestion: %s", r.err);
    rmdir(p);
}

static void test_list_options(void) {
    static const char *const bad_batches[] = {"1,,2", ",1", "1,", ",", "1,x", "0", "1,1",
                                              "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,"
                                              "27,28,29,30,31,32,33",
                                              "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_batches / sizeof bad_batches[0]; i++) {
        result r = run(ARGS("sweep", "bert-tiny", "--modes", "eager", "--batches", bad_batches[i], FAST), NULL);
        CHECK(r.code == 2 && strstr(r.err, "--batches"), "--batches '%s': exit %d: %s", bad_batches[i], r.code, r.err);
    }
    static const char *const bad_modes[] = {"eager,,graph", "eager,", ",graph", "eager,eager", "eager,fast"};
    for (size_t i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
        result r = run(ARGS("sweep", "bert-tiny", "--modes", bad_modes[i], "--batches", "1", FAST), NULL);
        CHECK(r.code == 2 && strstr(r.err, "--modes"), "--modes '%s': exit %d: %s", bad_modes[i], r.code, r.err);
    }
    CHECK(temporaries_in(tmpdir) == 0, "a refused list left temporaries");
}

static void test_info_sizes(void) {
    /* 200000 images of 224^2: 120 GB of example pixels if built; the MACs need shapes only */
    char out[700];
    snprintf(out, sizeof out, "%s/info.txt", tmpdir);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {(rlim_t)16 << 30, (rlim_t)16 << 30}; /* far below the 120 GB of pixels */
        setrlimit(RLIMIT_AS, &rl);
        result r = run(ARGS("info", "resnet-50", "--batch", "200000"), NULL);
        FILE *f = fopen(out, "w");
        if (f) {
            fprintf(f, "%d\n%s%s", r.code, r.out, r.err);
            fclose(f);
        }
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    char buf[4096];
    slurp(out, buf, sizeof buf);
    CHECK(atoi(buf) == 0 && strstr(buf, "macs: ") && strstr(buf, "batch 200000"),
          "info resnet-50 --batch 200000 under a 16 GiB address space: %s", buf);
    /* every preset, every architecture's validator: shapes only, no data to read */
    pid = fork();
    if (pid == 0) {
        struct rlimit rl = {(rlim_t)16 << 30, (rlim_t)16 << 30};
        setrlimit(RLIMIT_AS, &rl);
        FILE *f = fopen(out, "w");
        result list = run(ARGS("info", "--presets"), NULL);
        int n = 0;
        for (char *line = strtok(list.out, "\n"); f && line; line = strtok(NULL, "\n")) {
            char name[128];
            if (sscanf(line, "%127s", name) != 1 || !strcmp(name, "preset")) continue;
            result r = run(ARGS("info", name, "--batch", "200000"), NULL);
            n++;
            if (r.code != 0 || r.sig || !strstr(r.out, "macs: "))
                fprintf(f, "%s: exit %d signal %d: %.200s\n", name, r.code, r.sig, r.err);
        }
        if (f) {
            fprintf(f, "presets %d\n", n);
            fclose(f);
        }
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    slurp(out, buf, sizeof buf);
    int presets = 0;
    const char *tail = strstr(buf, "presets ");
    if (tail) presets = atoi(tail + 8);
    CHECK(tail == buf && presets >= 20, "info PRESET --batch 200000 for every preset (%d): %s", presets, buf);
}

static void test_config_keys(void) {
    char cfg[4096], dir[700];
    static const struct { const char *key, *value, *needle; } rows[] = {
        {"num_hidden_layers", "-1", "'num_hidden_layers'"},
        {"intermediate_size", "0", "'intermediate_size'"},
        {"num_attention_heads", "-4", "'num_attention_heads'"},
        {"vocab_size", "0", "'vocab_size'"},
        {"num_attention_heads", "7", "hidden_size 32 is not a multiple of num_attention_heads 7"},
        {"model_type", "\"bert\\u0000x\"", "NUL"},
        {"model_type\\u0000", "\"bert\"", "NUL"},
        {"hidden_act", "\"gelu\\u0000\"", "NUL"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        snprintf(dir, sizeof dir, "%s/cfg%zu", tmpdir, i);
        mkdir(dir, 0755);
        snprintf(cfg, sizeof cfg,
                 "{\"model_type\": \"bert\", \"vocab_size\": 99, \"hidden_size\": 32, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": 2, \"intermediate_size\": 37, \"%s\": %s}",
                 rows[i].key, rows[i].value);
        char name[64], w[1200];
        snprintf(name, sizeof name, "cfg%zu/config.json", i);
        write_file(name, cfg);
        snprintf(w, sizeof w, "%s/model.safetensors", dir); /* the weights are read after the config */
        char src[1100];
        snprintf(src, sizeof src, "%s/model.safetensors", golden_bert);
        CHECK(symlink(src, w) == 0, "symlink");
        snprintf(name, sizeof name, "cfg%zu", i);
        result r = run(ARGS("info", name), NULL);
        expect_error(rows[i].key, &r, 1, rows[i].needle, NULL);
    }
}

/* The knobs are one table: no getenv("FT_...") outside engine/env.c in the library,
 * and each row of it documented in docs/architecture.md. */
static void test_env_table(void) {
    if (!exists("engine/env.c") || !exists("docs/architecture.md")) {
        SKIP("not run from the repository root");
        return;
    }
    CHECK(system("! grep -rn 'getenv(\"FT_' engine graph models kernels --include=*.c --include=*.cu "
                 "--include=*.h | grep -v '^engine/env.c'") == 0,
          "a library file reads an FT_ variable without the table (engine/env.c)");
    CHECK(system("for v in $(grep -o '{\"FT_[A-Z0-9_]*\"' engine/env.c | tr -d '{\"'); do "
                 "grep -q \"\\`$v\" docs/architecture.md || { echo \"  $v is not in docs/architecture.md\"; "
                 "exit 1; }; done") == 0,
          "a knob of engine/env.c is not documented");
}

int main(void) {
    const char *b = getenv("FT_BUILD");
    char rel[600];
    snprintf(rel, sizeof rel, "%s/ftengine", b && *b ? b : "build");
    ft_test_tmpdir_make("safety");
    if (!tmpdir[0] || !realpath(rel, tool) || !realpath(ft_test_golden_dir(), golden_bert)) {
        printf("cannot set up (tool %s)\n", rel);
        return 1;
    }
    strncat(golden_bert, "/bert", sizeof golden_bert - strlen(golden_bert) - 1);
    RUN(test_full_disk_csv);
    RUN(test_full_disk_outputs);
    RUN(test_full_tmpfs);
    RUN(test_output_is_input);
    RUN(test_links_written_through);
    RUN(test_csv_lock);
    RUN(test_env_knobs);
    RUN(test_env_table);
    RUN(test_long_names_and_stale);
    RUN(test_signals);
    RUN(test_did_you_mean);
    RUN(test_list_options);
    RUN(test_info_sizes);
    RUN(test_config_keys);
    ft_test_tmpdir_remove();
    return ft_test_finish();
}

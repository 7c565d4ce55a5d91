/*
 * outfiles.c - the files of one command (see outfiles.h): inputs recorded by
 * device and inode, outputs checked up front, written to temporaries, synced
 * and renamed into place together at the end, removed on failure or on a
 * terminating signal; and the sweep CSV stream (row-atomic, locked).
 *
 * Why a symbolic link is written through and a dangling one refused: `-o LINK`
 * is expected to update the file the link names (the link may point into a
 * results folder), while a dangling link may name a place the user no longer
 * means (cp refuses to write through one too). The temporary of a linked
 * target lives beside the file it points to, so the final rename stays on one
 * file system.
 *
 * Why inputs are compared by device and inode and not by name: ./in, a/../in,
 * a link, a hard link, /proc/self/fd/3 and a bind mount of the model folder
 * are all the same file under another name; only (st_dev, st_ino) says so.
 *
 * The output table and the CSV state are static so the signal handler only
 * reads memory that is already there and calls unlink() and ftruncate()
 * (async-signal-safe). While the table changes or the renames run, a signal is
 * only noted and acted on afterwards, so a handler on another (OpenMP) thread
 * never sees half an entry.
 */
#include "outfiles.h"
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT_MAX 8
#define NAME_LEN (PATH_MAX + 64)
#define BASE_KEEP 200 /* bytes of a file name kept in its temporary's: 200 + 35 < NAME_MAX */

typedef struct outfile {
    const char *opt, *given;    /* for messages: the option and the path as typed */
    char target[NAME_LEN];      /* the file replaced at the end (a link resolved) */
    char tmp[NAME_LEN];         /* written during the run */
    char lib_tmp[NAME_LEN];     /* the library's profiler writers write their own temporary of tmp */
    char backup[NAME_LEN];      /* during the commit: a hard link to the old target */
    int existed, has_backup;
    mode_t mode;
} outfile;

static outfile files[OUT_MAX];
static volatile sig_atomic_t n_live;   /* entries whose temporaries may exist */
static volatile sig_atomic_t critical; /* the table or the targets are changing */
static volatile sig_atomic_t pending;  /* a signal that arrived while critical */
static int handlers_set;

/* The sweep CSV: fd takes the rows; good is the length of its complete rows. */
static struct {
    int fd, old_fd;       /* old_fd: the file a resume replaced, kept open and locked */
    volatile sig_atomic_t live, started, created, tmp_live;
    off_t good;
    int rows;
    const char *opt, *given;
    char target[NAME_LEN]; /* the real file (a link resolved) */
    char tmp[NAME_LEN];    /* a resume's rewrite while it is being written */
} csv = {.fd = -1, .old_fd = -1};

/* What a file of this command is, for the identity checks. */
enum { ID_INPUT, ID_MODEL, ID_OUTPUT };
typedef struct ident {
    int kind, have_ino;
    dev_t dev;
    ino_t ino;
    const char *opt;
    char name[NAME_LEN]; /* as the user would recognise it */
    char key[NAME_LEN];  /* an output not yet existing: its real directory and name */
} ident;
static ident *idents;
static int n_idents, cap_idents;

/* ---- signals ---- */

static const int sigs[] = {
    SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGXCPU, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM,
#ifdef SIGPOLL
    SIGPOLL,
#endif
#ifdef SIGPWR
    SIGPWR,
#endif
#ifdef SIGSTKFLT
    SIGSTKFLT,
#endif
};

static void remove_temps(void) {
    for (int i = 0; i < n_live; i++) {
        unlink(files[i].tmp);
        unlink(files[i].lib_tmp);
    }
}

/* The CSV keeps its complete rows only; a file this command made and never
 * started goes. */
static void settle_csv(void) {
    if (csv.tmp_live) unlink(csv.tmp);
    csv.tmp_live = 0;
    if (!csv.live) return;
    if (csv.started) (void)ftruncate(csv.fd, csv.good);
    else if (csv.created) unlink(csv.target);
}

static void die_of(int sig) {
    remove_temps();
    n_live = 0;
    settle_csv();
    signal(sig, SIG_DFL);
    raise(sig); /* blocked while in the handler: delivered, with the default action, on return */
}

static void on_signal(int sig) {
    if (critical) {
        pending = sig;
        return;
    }
    die_of(sig);
}

static void set_handlers(void) {
    if (handlers_set) return;
    handlers_set = 1;
    /* a file-size limit (ulimit -f) is then a write error with a message, not a kill */
    signal(SIGXFSZ, SIG_IGN);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        for (size_t j = 0; j < sizeof sigs / sizeof sigs[0]; j++) sigaddset(&sa.sa_mask, sigs[j]);
        /* a signal ignored by whoever started us (nohup) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

void outfiles_begin(void) { set_handlers(); }

static void leave_critical(void) {
    critical = 0;
    if (pending) die_of(pending);
}

/* ---- names ---- */

static const char *kind_of(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
         : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : "not a regular file";
}

/* The directory part of a path ("." when there is none). */
static void dir_of(const char *path, char *dir, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, size, ".");
    else if (slash == path) snprintf(dir, size, "/");
    else snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

static const char *base_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* "<dir>/.<base>.ftengine.<what>.<pid>": hidden, recognisable as ours (stale ones are
 * cleaned by that pattern) and within NAME_MAX for any base: a longer base is cut to
 * BASE_KEEP bytes plus "~" and a hash of the whole, so two long names sharing their
 * first 200 bytes keep apart. engine/profiler_trace.c names its temporaries alike. */
static int side_name(const char *path, const char *what, char *out, size_t size) {
    char dir[NAME_LEN], hash[16] = "";
    dir_of(path, dir, sizeof dir);
    const char *base = base_of(path);
    size_t n = strlen(base);
    if (n > BASE_KEEP) {
        uint32_t h = 2166136261u; /* FNV-1a */
        for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)base[i]) * 16777619u;
        snprintf(hash, sizeof hash, "~%08x", (unsigned)h);
        n = BASE_KEEP;
        while (n > 0 && ((unsigned char)base[n] & 0xC0) == 0x80) n--; /* not inside a UTF-8 character */
    }
    int len = snprintf(out, size, "%s/.%.*s%s.ftengine.%s.%ld", dir, (int)n, base, hash, what, (long)getpid());
    return len > 0 && (size_t)len < size && len < PATH_MAX ? 0 : -1;
}

/* Removes ftengine temporaries and backups in dir whose process is gone: hidden
 * regular files ending ".ftengine.tmp.<pid>" or ".ftengine.old.<pid>". */
static void clean_stale(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *n = e->d_name, *m = strstr(n, ".ftengine.");
        if (n[0] != '.' || !m) continue;
        while (strstr(m + 1, ".ftengine.")) m = strstr(m + 1, ".ftengine.");
        m += strlen(".ftengine.");
        if (strncmp(m, "tmp.", 4) && strncmp(m, "old.", 4)) continue;
        m += 4;
        if (!*m || m[strspn(m, "0123456789")]) continue;
        long pid = strtol(m, NULL, 10);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char p[NAME_LEN];
        struct stat st;
        if (snprintf(p, sizeof p, "%s/%s", dir, n) < (int)sizeof p && lstat(p, &st) == 0 && S_ISREG(st.st_mode))
            unlink(p);
    }
    closedir(d);
}

/* ---- identities ---- */

static ident *new_ident(int kind, const char *opt, const char *name) {
    if (n_idents == cap_idents) {
        int cap = cap_idents ? 2 * cap_idents : 16;
        ident *p = (ident *)realloc(idents, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        idents = p;
        cap_idents = cap;
    }
    ident *id = &idents[n_idents];
    memset(id, 0, sizeof *id);
    id->kind = kind;
    id->opt = opt;
    snprintf(id->name, sizeof id->name, "%s", name);
    return id;
}

/* An output (existing: st, else its key) against everything registered. */
static int output_conflict(const char *opt, const char *path, const struct stat *st, const char *key) {
    for (int i = 0; i < n_idents; i++) {
        const ident *o = &idents[i];
        int same = st ? o->have_ino && o->dev == st->st_dev && o->ino == st->st_ino
                      : !o->have_ino && key && o->key[0] && !strcmp(o->key, key);
        if (!same) continue;
        if (o->kind == ID_INPUT)
            return fail("%s %s: is the same file as %s %s, an input of this command; refusing to overwrite it",
                        opt, path, o->opt, o->name);
        if (o->kind == ID_MODEL)
            return fail("%s %s: is %s, a file of the model directory; refusing to overwrite the model", opt, path,
                        o->name);
        return usage("%s %s and %s %s name the same file", o->opt, o->name, opt, path);
    }
    return 0;
}

static int add_output_ident(const char *opt, const char *path, const struct stat *st, const char *key) {
    int rc = output_conflict(opt, path, st, key);
    if (rc) return rc;
    ident *id = new_ident(ID_OUTPUT, opt, path);
    if (!id) return fail("out of host memory");
    if (st) {
        id->have_ino = 1;
        id->dev = st->st_dev;
        id->ino = st->st_ino;
    } else if (key) {
        snprintf(id->key, sizeof id->key, "%s", key);
    }
    n_idents++;
    return 0;
}

static int add_input(int kind, const char *opt, const char *name, const struct stat *st) {
    for (int i = 0; i < n_idents; i++) {
        const ident *o = &idents[i];
        if (o->kind == ID_OUTPUT && o->have_ino && o->dev == st->st_dev && o->ino == st->st_ino)
            return fail("%s %s: is the same file as %s %s, an output of this command; refusing to overwrite it",
                        o->opt, o->name, opt, name);
    }
    ident *id = new_ident(kind, opt, name);
    if (!id) return fail("out of host memory");
    id->have_ino = 1;
    id->dev = st->st_dev;
    id->ino = st->st_ino;
    n_idents++;
    return 0;
}

int outfile_input(const char *opt, const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0; /* the reader reports it */
    return add_input(ID_INPUT, opt, path, &st);
}

int outfile_input_model(const char *model) {
    struct stat st;
    if (!model || stat(model, &st) != 0 || !S_ISDIR(st.st_mode)) return 0; /* a preset, or the loader's error */
    DIR *d = opendir(model);
    if (!d) return 0;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d)) != NULL;) {
        char p[NAME_LEN];
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (snprintf(p, sizeof p, "%s%s%s", model, model[strlen(model) - 1] == '/' ? "" : "/", e->d_name) >=
            (int)sizeof p)
            continue;
        /* following links: a Hugging Face cache snapshot links its files to blobs */
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) rc = add_input(ID_MODEL, "MODEL", p, &st);
    }
    closedir(d);
    return rc;
}

/* ---- outputs ---- */

/* The file that will be replaced: path itself, or what a symbolic link points to. */
static int resolve(const char *opt, const char *path, char *target, size_t size, struct stat *st, int *existed) {
    if (lstat(path, st) != 0) {
        if (errno != ENOENT) return fail("%s %s: %s", opt, path, strerror(errno));
        *existed = 0;
        snprintf(target, size, "%s", path);
        return 0;
    }
    if (S_ISLNK(st->st_mode)) {
        if (stat(path, st) != 0) {
            if (errno == ENOENT)
                return fail("%s %s: a dangling symbolic link; refusing to create the file it points to", opt,
                            path);
            return fail("%s %s: %s", opt, path, strerror(errno));
        }
        if (!S_ISREG(st->st_mode))
            return fail("%s %s: a symbolic link to %s, not a regular file; refusing to replace it", opt, path,
                        kind_of(st->st_mode));
        char real[PATH_MAX];
        if (!realpath(path, real)) return fail("%s %s: %s", opt, path, strerror(errno));
        snprintf(target, size, "%s", real);
    } else if (!S_ISREG(st->st_mode)) {
        return fail("%s %s: is %s, not a regular file; refusing to replace it", opt, path, kind_of(st->st_mode));
    } else {
        snprintf(target, size, "%s", path);
    }
    *existed = 1;
    return 0;
}

/* Target checks and identity of an output: its target, whether it exists (st
 * then holds it) and the key of a new one. */
static int check_output(const char *opt, const char *path, char *target, struct stat *st, int *existed,
                        char *key) {
    int rc = resolve(opt, path, target, NAME_LEN, st, existed);
    if (rc) return rc;
    const char *base = base_of(target);
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return fail("%s %s: names a directory, not a file", opt, path);
    char dir[NAME_LEN], real_dir[PATH_MAX];
    dir_of(target, dir, sizeof dir);
    key[0] = 0;
    if (realpath(dir, real_dir) && snprintf(key, NAME_LEN, "%s/%s", real_dir, base) >= NAME_LEN)
        return fail("%s %s: %s", opt, path, strerror(ENAMETOOLONG));
    return output_conflict(opt, path, *existed ? st : NULL, key);
}

static int add(outfile *f, const char *opt, const char *path) {
    memset(f, 0, sizeof *f);
    f->opt = opt;
    f->given = path;
    struct stat st;
    char key[NAME_LEN], dir[NAME_LEN];
    int rc = check_output(opt, path, f->target, &st, &f->existed, key);
    if (rc) return rc;
    if (f->existed) f->mode = st.st_mode & 07777;
    dir_of(f->target, dir, sizeof dir);
    if (side_name(f->target, "tmp", f->tmp, sizeof f->tmp) || side_name(f->tmp, "tmp", f->lib_tmp, sizeof f->lib_tmp))
        return fail("%s %s: %s", opt, path, strerror(ENAMETOOLONG));
    clean_stale(dir);
    int fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR || e == EACCES || e == EPERM || e == EROFS)
            return fail("%s %s: cannot create a file in %s: %s", opt, path, dir, strerror(e));
        return fail("%s %s: cannot create %s: %s", opt, path, f->tmp, strerror(e));
    }
    close(fd);
    n_live = n_live + 1; /* from here on the temporary is removed on failure */
    if (!key[0]) return fail("%s %s: cannot resolve %s", opt, path, dir);
    return add_output_ident(opt, path, f->existed ? &st : NULL, key);
}

int outfile_check(const char *opt, const char *path) {
    if (!path || !*path) return usage("%s needs a file name", opt);
    char target[NAME_LEN], key[NAME_LEN];
    struct stat st;
    int existed;
    return check_output(opt, path, target, &st, &existed, key);
}

int outfile_add(const char *opt, const char *path, const char **tmp) {
    if (!path || !*path) return usage("%s needs a file name", opt);
    if (n_live >= OUT_MAX) return fail("too many output files (at most %d)", OUT_MAX);
    set_handlers();
    critical = 1;
    int rc = add(&files[n_live], opt, path);
    leave_critical();
    if (rc) outfiles_abort(); /* the command fails: its other temporaries go too */
    else *tmp = files[n_live - 1].tmp;
    return rc;
}

/* Writes all of buf at offset `at` of fd; 0 or the errno of the failure. */
static int write_all(int fd, const char *buf, size_t len, off_t at) {
    for (size_t done = 0; done < len;) {
        ssize_t w = pwrite(fd, buf + done, len - done, at + (off_t)done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        if (w == 0) return ENOSPC;
        done += (size_t)w;
    }
    return 0;
}

int outfile_write(const char *tmp, const void *buf, size_t len) {
    const outfile *f = NULL;
    for (int i = 0; i < n_live; i++)
        if (!strcmp(files[i].tmp, tmp)) f = &files[i];
    const char *opt = f ? f->opt : "output", *given = f ? f->given : tmp;
    int fd = open(tmp, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail("%s %s: cannot write %s: %s", opt, given, tmp, strerror(errno));
    int e = write_all(fd, (const char *)buf, len, 0);
    if (close(fd) != 0 && !e) e = errno;
    if (e) return fail("%s %s: cannot write: %s", opt, given, strerror(e));
    return 0;
}

/* fsync of a written temporary: a delayed write error (NFS, a full thin volume)
 * shows up here, before the rename replaces anything. */
static int sync_file(const char *path) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    int e = fsync(fd) != 0 ? errno : 0;
    if (close(fd) != 0 && !e) e = errno;
    return e == EINVAL ? 0 : e; /* EINVAL: a file system that cannot sync (nothing to report) */
}

int outfiles_commit(void) {
    critical = 1;
    int rc = 0, n = n_live, renamed = 0;
    /* check again: a target may have become a special file during the run */
    for (int i = 0; !rc && i < n; i++) {
        outfile *f = &files[i];
        struct stat st;
        int e = sync_file(f->tmp);
        if (e) {
            rc = fail("%s %s: cannot write: %s", f->opt, f->given, strerror(e));
            break;
        }
        f->existed = lstat(f->target, &st) == 0;
        if (f->existed ? !S_ISREG(st.st_mode) : errno != ENOENT) {
            rc = f->existed ? fail("%s %s: is now %s, not a regular file; refusing to replace it", f->opt,
                                   f->given, kind_of(st.st_mode))
                            : fail("%s %s: %s", f->opt, f->given, strerror(errno));
            break;
        }
        if (!f->existed) continue;
        chmod(f->tmp, st.st_mode & 07777); /* keep the mode of the file replaced */
        /* the old contents stay reachable until every rename succeeded */
        f->has_backup = side_name(f->target, "old", f->backup, sizeof f->backup) == 0 &&
                        link(f->target, f->backup) == 0;
    }
    for (int i = 0; !rc && i < n; i++, renamed++)
        if (rename(files[i].tmp, files[i].target) != 0)
            rc = fail("%s %s: cannot rename %s to %s: %s", files[i].opt, files[i].given, files[i].tmp,
                      files[i].target, strerror(errno));
    for (int i = 0; rc && i < renamed; i++) { /* undo */
        outfile *f = &files[i];
        if (f->has_backup) {
            if (rename(f->backup, f->target) != 0) /* rare: say where the old contents are */
                fprintf(stderr, "ftengine: the old %s is kept as %s\n", f->given, f->backup);
            f->has_backup = 0;
        } else if (!f->existed) {
            unlink(f->target);
        }
    }
    for (int i = 0; i < n; i++) {
        if (files[i].has_backup) unlink(files[i].backup);
        files[i].has_backup = 0;
    }
    if (rc) remove_temps();
    n_live = 0;
    leave_critical();
    return rc;
}

void outfiles_abort(void) {
    critical = 1;
    remove_temps();
    n_live = 0;
    settle_csv();
    if (csv.live) close(csv.fd);
    if (csv.old_fd >= 0) close(csv.old_fd);
    csv.live = 0;
    csv.fd = csv.old_fd = -1;
    leave_critical();
}

/* ---- the sweep CSV ---- */

static int csv_fail(int e, const char *what) {
    return fail("%s %s: %s: %s", csv.opt, csv.given, what, strerror(e));
}

static int lock_fd(int fd) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno == EWOULDBLOCK)
        return fail("%s %s: another ftengine sweep is writing this file (it holds its lock); wait for it to "
                    "finish or name another file", csv.opt, csv.given);
    return errno == ENOLCK || errno == EINVAL || errno == EOPNOTSUPP ? 0 /* no locks here: go on unlocked */
                                                                      : csv_fail(errno, "cannot lock it");
}

int ft_out_csv_open(const char *opt, const char *path) {
    if (!path || !*path) return usage("%s needs a file name", opt);
    if (csv.live) return fail("%s %s: a second CSV stream", opt, path);
    set_handlers();
    csv.opt = opt;
    csv.given = path;
    struct stat st;
    char key[NAME_LEN];
    int existed, rc = check_output(opt, path, csv.target, &st, &existed, key);
    if (rc) return rc;
    critical = 1;
    int fd = -1;
    csv.created = 0;
    if (!existed) {
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) csv.created = 1;
        else if (errno != EEXIST) rc = csv_fail(errno, "cannot create it");
    }
    if (!rc && fd < 0) { /* an existing file, or one made meanwhile: through a link, never blocking */
        fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) rc = csv_fail(errno, "cannot open it");
        else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
            rc = fail("%s %s: is %s, not a regular file; refusing to write it", opt, path, kind_of(st.st_mode));
        else
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    }
    if (!rc) {
        csv.fd = fd;
        csv.live = 1;
        csv.started = 0;
        csv.good = 0;
        /* the real file, for a resume's rename (written through a link, the link stays) */
        char real[PATH_MAX];
        if (realpath(path, real)) snprintf(csv.target, sizeof csv.target, "%s", real);
        rc = lock_fd(fd);
        if (!rc && fstat(fd, &st) == 0) rc = add_output_ident(opt, path, &st, NULL);
    } else if (fd >= 0) {
        close(fd);
    }
    leave_critical();
    if (rc) outfiles_abort();
    return rc;
}

/* Reads the whole file behind fd into a NUL-terminated buffer (the caller frees). */
static char *read_all(int fd, size_t *len) {
    struct stat st;
    if (fstat(fd, &st) != 0) return NULL;
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = (char *)malloc(cap);
    for (ssize_t r; buf;) {
        if (n + 1 == cap) {
            char *b = (char *)realloc(buf, cap *= 2);
            if (!b) break;
            buf = b;
        }
        r = pread(fd, buf + n, cap - 1 - n, (off_t)n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) break;
        if (r == 0) {
            buf[n] = 0;
            *len = n;
            return buf;
        }
        n += (size_t)r;
    }
    free(buf);
    return NULL;
}

/* A resume: header + the kept lines into a temporary beside the real file, synced,
 * locked, renamed over it; the old file stays open and locked until the end. */
static int csv_rewrite(const char *header, int (*keep)(void *, const char *), void *user, int *kept) {
    size_t len = 0;
    char *old = read_all(csv.fd, &len);
    if (!old) return csv_fail(errno ? errno : ENOMEM, "cannot read it");
    size_t hl = strlen(header);
    char *first_end = strchr(old, '\n');
    size_t fl = first_end ? (size_t)(first_end - old) : len;
    if (fl && old[fl - 1] == '\r') fl--;
    if (len && !(fl + 1 == hl && !strncmp(old, header, fl))) {
        free(old);
        return fail("--resume: %s is not a sweep CSV of this ftengine version (its header differs); remove it "
                    "or name another file", csv.given);
    }
    /* the new contents: header, then each line kept (a last line without '\n' is a cut row: dropped) */
    char *out = (char *)malloc(len + hl + 2);
    if (!out) {
        free(old);
        return fail("out of host memory");
    }
    memcpy(out, header, hl);
    size_t n = hl;
    for (char *p = first_end ? first_end + 1 : old + len; p < old + len;) {
        char *e = strchr(p, '\n');
        if (!e) break;
        *e = 0;
        if (e > p && e[-1] == '\r') e[-1] = 0;
        if (*p && keep(user, p)) {
            size_t l = strlen(p);
            memcpy(out + n, p, l);
            out[n + l] = '\n';
            n += l + 1;
            (*kept)++;
        }
        p = e + 1;
    }
    free(old);
    int rc = 0;
    critical = 1;
    if (side_name(csv.target, "tmp", csv.tmp, sizeof csv.tmp)) {
        rc = csv_fail(ENAMETOOLONG, "cannot rewrite it");
    } else {
        char dir[NAME_LEN];
        dir_of(csv.target, dir, sizeof dir);
        clean_stale(dir);
        int fd = open(csv.tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0) {
            rc = csv_fail(errno, "cannot rewrite it");
        } else {
            csv.tmp_live = 1;
            struct stat st;
            if (fstat(csv.fd, &st) == 0) fchmod(fd, st.st_mode & 07777);
            int e = write_all(fd, out, n, 0);
            if (!e && fsync(fd) != 0 && errno != EINVAL) e = errno;
            /* locked before it takes the name: no moment when the file is there unlocked */
            if (!e) (void)flock(fd, LOCK_EX | LOCK_NB);
            if (e) rc = csv_fail(e, "cannot rewrite it");
            else if (rename(csv.tmp, csv.target) != 0) rc = csv_fail(errno, "cannot rename its rewrite over it");
            if (rc) {
                close(fd);
                unlink(csv.tmp);
            } else {
                csv.old_fd = csv.fd; /* still locked: a sweep that opened the old file is refused */
                csv.fd = fd;
                csv.good = (off_t)n;
                csv.rows = *kept;
            }
            csv.tmp_live = 0;
        }
    }
    leave_critical();
    free(out);
    return rc;
}

int ft_out_csv_start(const char *header, int resume, int (*keep)(void *, const char *), void *user, int *kept) {
    *kept = 0;
    if (!csv.live) return fail("the CSV stream is not open");
    struct stat st;
    int rc = 0;
    if (resume && fstat(csv.fd, &st) == 0 && st.st_size > 0) {
        rc = csv_rewrite(header, keep, user, kept);
        if (!rc) csv.started = 1;
        return rc;
    }
    critical = 1;
    int e = ftruncate(csv.fd, 0) != 0 ? errno : write_all(csv.fd, header, strlen(header), 0);
    if (e) {
        (void)ftruncate(csv.fd, 0);
        rc = csv_fail(e, "cannot write its header");
    } else {
        csv.good = (off_t)strlen(header);
        csv.rows = 0;
        csv.started = 1;
    }
    leave_critical();
    return rc;
}

int ft_out_csv_append_row(const char *row) {
    if (!csv.live || !csv.started) return fail("the CSV stream is not started");
    size_t len = strlen(row);
    int e = write_all(csv.fd, row, len, csv.good);
    if (e) {
        /* no partial row: back to the last complete one */
        int t = ftruncate(csv.fd, csv.good) != 0 ? errno : 0;
        return fail("%s %s: cannot write a row: %s; %s its %d complete row%s", csv.opt, csv.given, strerror(e),
                    t ? "and cannot cut the partial row off, the file may end in one after" : "the file keeps",
                    csv.rows, csv.rows == 1 ? "" : "s");
    }
    csv.good += (off_t)len;
    csv.rows++;
    return 0;
}

int ft_out_csv_close(void) {
    if (!csv.live) return 0;
    int e = csv.started && fsync(csv.fd) != 0 && errno != EINVAL ? errno : 0;
    critical = 1;
    if (!csv.started && csv.created) unlink(csv.target); /* made, never written */
    if (close(csv.fd) != 0 && !e) e = errno;
    if (csv.old_fd >= 0) close(csv.old_fd);
    csv.fd = csv.old_fd = -1;
    csv.live = 0;
    leave_critical();
    return e ? fail("%s %s: cannot write: %s", csv.opt, csv.given, strerror(e)) : 0;
}

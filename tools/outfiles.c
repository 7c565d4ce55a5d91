/*
 * outfiles.c - the output files of one command (see outfiles.h): checked up
 * front, written to temporaries, renamed into place together at the end, and
 * removed on failure or on a terminating signal.
 *
 * Why a symbolic link is written through and a dangling one refused: `-o LINK`
 * is expected to update the file the link names (the link may point into a
 * results folder), while a dangling link may name a place the user no longer
 * means (cp refuses to write through one too). The temporary of a linked
 * target lives beside the file it points to, so the final rename stays on one
 * file system.
 *
 * The table is fixed-size and static so the signal handler only reads memory
 * that is already there and calls unlink() (async-signal-safe). While the table
 * changes or the renames run, a signal is only noted and acted on afterwards,
 * so a handler on another (OpenMP) thread never sees half an entry.
 */
#include "outfiles.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT_MAX 8
#define NAME_LEN (PATH_MAX + 64)

typedef struct outfile {
    const char *opt, *given;    /* for messages: the option and the path as typed */
    char target[NAME_LEN];      /* the file replaced at the end (a link resolved) */
    char tmp[NAME_LEN];         /* written during the run */
    char lib_tmp[NAME_LEN + 32]; /* the library's profiler writers write <tmp>.tmp.<pid> first */
    char backup[NAME_LEN];      /* during the commit: a hard link to the old target */
    char key[2 * NAME_LEN];     /* canonical name, to find one file given twice */
    int existed, has_backup;
    mode_t mode;
} outfile;

static outfile files[OUT_MAX];
static volatile sig_atomic_t n_live;   /* entries whose temporaries may exist */
static volatile sig_atomic_t critical; /* the table or the targets are changing */
static volatile sig_atomic_t pending;  /* a signal that arrived while critical */
static int handlers_set;

static const int sigs[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGXCPU, SIGXFSZ};

static void remove_temps(void) {
    for (int i = 0; i < n_live; i++) {
        unlink(files[i].tmp);
        unlink(files[i].lib_tmp);
    }
}

static void die_of(int sig) {
    remove_temps();
    n_live = 0;
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

static void leave_critical(void) {
    critical = 0;
    if (pending) die_of(pending);
}

static const char *kind_of(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
         : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : "not a regular file";
}

/* The file that will be replaced: path itself, or what a symbolic link points to. */
static int resolve(outfile *f, const char *path, struct stat *st) {
    if (lstat(path, st) != 0) {
        if (errno != ENOENT) return fail("%s %s: %s", f->opt, path, strerror(errno));
        f->existed = 0;
        snprintf(f->target, sizeof f->target, "%s", path);
        return 0;
    }
    if (S_ISLNK(st->st_mode)) {
        if (stat(path, st) != 0) {
            if (errno == ENOENT)
                return fail("%s %s: a dangling symbolic link; refusing to create the file it points to",
                            f->opt, path);
            return fail("%s %s: %s", f->opt, path, strerror(errno));
        }
        if (!S_ISREG(st->st_mode))
            return fail("%s %s: a symbolic link to %s, not a regular file; refusing to replace it",
                        f->opt, path, kind_of(st->st_mode));
        char real[PATH_MAX];
        if (!realpath(path, real)) return fail("%s %s: %s", f->opt, path, strerror(errno));
        snprintf(f->target, sizeof f->target, "%s", real);
    } else if (!S_ISREG(st->st_mode)) {
        return fail("%s %s: is %s, not a regular file; refusing to replace it", f->opt, path,
                    kind_of(st->st_mode));
    } else {
        snprintf(f->target, sizeof f->target, "%s", path);
    }
    f->existed = 1;
    f->mode = st->st_mode & 07777;
    return 0;
}

/* The directory part of a path ("." when there is none). */
static void dir_of(const char *path, char *dir, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, size, ".");
    else if (slash == path) snprintf(dir, size, "/");
    else snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

static int add(outfile *f, const char *opt, const char *path) {
    memset(f, 0, sizeof *f);
    f->opt = opt;
    f->given = path;
    struct stat st;
    int rc = resolve(f, path, &st);
    if (rc) return rc;
    char dir[NAME_LEN], real_dir[PATH_MAX];
    dir_of(f->target, dir, sizeof dir);
    const char *slash = strrchr(f->target, '/'), *base = slash ? slash + 1 : f->target;
    if (!*base) return fail("%s %s: names a directory, not a file", opt, path);
    /* one file given twice would be two temporaries renamed over each other */
    int have_dir = realpath(dir, real_dir) != NULL;
    if (have_dir) {
        if (snprintf(f->key, sizeof f->key, "%s/%s", real_dir, base) >= (int)sizeof f->key)
            return fail("%s %s: %s", opt, path, strerror(ENAMETOOLONG));
        for (outfile *o = files; o < f; o++)
            if (!strcmp(o->key, f->key))
                return usage("%s %s and %s %s name the same file", o->opt, o->given, opt, path);
    }
    long pid = (long)getpid();
    if (snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%ld", f->target, pid) >= (int)sizeof f->tmp)
        return fail("%s %s: %s", opt, path, strerror(ENAMETOOLONG));
    snprintf(f->lib_tmp, sizeof f->lib_tmp, "%s.tmp.%ld", f->tmp, pid);
    int fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR || e == EACCES || e == EPERM || e == EROFS)
            return fail("%s %s: cannot create a file in %s: %s", opt, path, dir, strerror(e));
        return fail("%s %s: cannot create %s: %s", opt, path, f->tmp, strerror(e));
    }
    close(fd);
    n_live = n_live + 1; /* from here on the temporary is removed on failure */
    if (!have_dir) return fail("%s %s: cannot resolve %s", opt, path, dir);
    return 0;
}

int outfile_check(const char *opt, const char *path) {
    if (!path || !*path) return usage("%s needs a file name", opt);
    outfile f;
    memset(&f, 0, sizeof f);
    f.opt = opt;
    struct stat st;
    return resolve(&f, path, &st);
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

int outfiles_commit(void) {
    critical = 1;
    int rc = 0, n = n_live, renamed = 0;
    long pid = (long)getpid();
    /* check again: a target may have become a special file during the run */
    for (int i = 0; !rc && i < n; i++) {
        outfile *f = &files[i];
        struct stat st;
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
        snprintf(f->backup, sizeof f->backup, "%s.old.%ld", f->target, pid);
        f->has_backup = link(f->target, f->backup) == 0;
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
    leave_critical();
}

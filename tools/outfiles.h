/*
 * outfiles.h - the files one command of the tool reads and writes (--inputs and
 * MODEL; --out, --trace, --ops-csv, --json, sweep --csv), handled in one place
 * (tools/outfiles.c) so that every command keeps the same promises:
 *   - an output is never one of the command's inputs or another of its outputs:
 *     the same file (device and inode) under any name (./x, a/../x, a symbolic
 *     or hard link, /proc/self/fd/N, a bind mount) is refused before any work,
 *     with one line; every file of a MODEL directory counts as an input;
 *   - a target is checked before the command's work starts: an existing target
 *     must be a regular file (or a symbolic link to one, written through: the
 *     file it points to is replaced, the link stays); a directory, FIFO, socket,
 *     device or a dangling link is refused and left untouched;
 *   - each file is written to a temporary beside its target, named
 *     ".<name>.ftengine.tmp.<pid>" (hidden, short enough for any legal name:
 *     the name is cut to 200 bytes), created at once so an unwritable place is
 *     found before a long run; every write, the flush, an fsync before the
 *     rename and the close are checked, and a failure is one line naming the
 *     file and the reason; all of a command's files are renamed into place
 *     together only when every one was written; on failure, or on a signal
 *     that would end the process (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE,
 *     SIGUSR1, SIGUSR2, SIGALRM, ...), the temporaries are removed and no
 *     target changes. Temporaries left by a process that no longer exists
 *     (kill -9, a power cut) are removed when a later command writes there;
 *   - SIGXFSZ is ignored, so a file-size limit is a write error (EFBIG) with
 *     its one-line message instead of a kill.
 * The sweep CSV is a stream (ft_out_csv_*): it grows in place, row by whole
 * row, under an advisory lock (flock) that a second sweep on the same file
 * meets and refuses.
 */
#ifndef FT_OUTFILES_H
#define FT_OUTFILES_H

#include <stddef.h>

/* Installs the signal handlers (and ignores SIGXFSZ) before a command runs, so
 * even a command with no output file reports a write error on stdout instead of
 * being killed by a file-size limit. */
void outfiles_begin(void);

/* Registers a file the command reads (option `opt`, for messages): no output of
 * this command may be it. Returns 0, or 1 after the printed error. A path that
 * does not exist is left to the command (which reports it as it reads it). */
int outfile_input(const char *opt, const char *path);
/* MODEL: when it is a directory, every file in it is an input (config.json,
 * model.safetensors, whatever else is there); a preset name registers nothing. */
int outfile_input_model(const char *model);

/* Registers `path`, given with option `opt` (for messages), as an output of this
 * command and creates its temporary; *tmp is the name to write to. Returns 0, 1
 * (the one-line error is printed: a refused target, an input, a place that cannot
 * be written) or 2 (usage: an empty path, the same file given twice). */
int outfile_add(const char *opt, const char *path, const char **tmp);

/* Writes len bytes to the temporary `tmp` of a registered output (replacing what
 * it held): every write checked, the error naming the output. 0 or 1. */
int outfile_write(const char *tmp, const void *buf, size_t len);

/* Only the target check of outfile_add, for a file written in place (the sweep
 * CSV, see ft_out_csv_open): 0, or the code of the printed error. */
int outfile_check(const char *opt, const char *path);

/* Syncs every temporary to disk and renames it over its target. If one fails,
 * the targets already replaced get their old contents back (or are removed if
 * they are new) and the error is printed. Returns 0 or 1. */
int outfiles_commit(void);

/* Removes every temporary not committed, and a sweep CSV this command created
 * but never started; what a failed command ends with. */
void outfiles_abort(void);

/* The sweep CSV, written in place: opened (or created) and locked before the
 * command's work, so a second sweep on the same file refuses at once with one
 * line, and checked like any output (never an input, never a special file; a
 * symbolic link is written through and stays a link). Nothing is changed until
 * ft_out_csv_start. 0, 1 or 2 (usage). */
int ft_out_csv_open(const char *opt, const char *path);
/* Starts the file: without `resume` it becomes `header` alone. With `resume`, an
 * existing non-empty file must begin with `header` (else an error: not ours to
 * rewrite); each later line is passed to keep(), and the file is rewritten as the
 * header plus the lines kept (beside its target, synced and renamed over it, so
 * a kill leaves either file whole). *kept counts them. 0 or 1. */
int ft_out_csv_start(const char *header, int resume, int (*keep)(void *user, const char *line), void *user,
                     int *kept);
/* Appends one row (a whole line, ending in '\n'). Written whole or not at all:
 * on a failed write (a full disk, a size limit) the file is cut back to its last
 * complete row and the error printed, naming the file and the reason. 0 or 1. */
int ft_out_csv_append_row(const char *row);
/* Syncs and closes the CSV (checked), releasing the lock. 0 or 1 (printed). */
int ft_out_csv_close(void);

#endif /* FT_OUTFILES_H */

/*
 * outfiles.h - the files one command of the tool writes (--out, --trace, --csv,
 * sweep --csv), handled in one place (tools/outfiles.c) so that every command
 * keeps the same promises:
 *   - a target is checked before the command's work starts: an existing target
 *     must be a regular file (or a symbolic link to one, written through: the
 *     file it points to is replaced, the link stays); a directory, FIFO, socket,
 *     device or a dangling link is refused and left untouched;
 *   - each file is written to a temporary beside its target (created at once,
 *     so an unwritable place is found before a long run) and all of them are
 *     renamed into place together only when every one was written; on failure,
 *     or on SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGPIPE, the temporaries are removed
 *     and no target changes.
 */
#ifndef FT_OUTFILES_H
#define FT_OUTFILES_H

/* Registers `path`, given with option `opt` (for messages), as an output of this
 * command and creates its temporary; *tmp is the name to write to. Returns 0, 1
 * (the one-line error is printed: a refused target, a place that cannot be
 * written) or 2 (usage: an empty path, the same file given twice). */
int outfile_add(const char *opt, const char *path, const char **tmp);

/* Only the target check of outfile_add, for a file written in place as it grows
 * (sweep --csv keeps every finished row, docs/benchmarking.md): 0, or the code of
 * the printed error (a special file, a dangling link, an empty name). */
int outfile_check(const char *opt, const char *path);

/* Renames every temporary over its target. If one rename fails, the targets
 * already replaced get their old contents back (or are removed if they are
 * new) and the error is printed. Returns 0 or 1. */
int outfiles_commit(void);

/* Removes every temporary not committed; what a failed command ends with. */
void outfiles_abort(void);

#endif /* FT_OUTFILES_H */

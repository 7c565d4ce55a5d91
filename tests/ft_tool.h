/*
 * ft_tool.h - running build/ftengine from a test: one child process, its stdout
 * and stderr captured through files in the test's temp dir, its exit status and
 * peak memory. Shared by the tests that drive the tool (test_cli, test_sweep,
 * test_usability); test_cli_robust has its own runner with timeouts and signals.
 */
#ifndef FT_TOOL_H
#define FT_TOOL_H

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Reads what fits of a file into buf (NUL-terminated; empty if it cannot be read). */
static void ft_tool_slurp(const char *path, char *buf, size_t size) {
    buf[0] = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    size_t n = 0;
    ssize_t r;
    while (n + 1 < size && (r = read(fd, buf + n, size - 1 - n)) > 0) n += (size_t)r;
    buf[n] = 0;
    close(fd);
}

/* Runs `tool` with the NULL-terminated args (at most 30); returns its exit code,
 * 128 + the signal that ended it, or 127 when it could not be started. out/err
 * get what it printed; *maxrss_kb (if given) its peak resident set. */
static int ft_tool_exec(const char *tool, const char *tmpdir, const char *const *args, char *out,
                        size_t out_size, char *err, size_t err_size, long *maxrss_kb) {
    char of[600], ef[600];
    snprintf(of, sizeof of, "%s/tool.stdout", tmpdir);
    snprintf(ef, sizeof ef, "%s/tool.stderr", tmpdir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(of, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(ef, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        const char *argv[32] = {tool};
        int n = 1;
        for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(tool, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) status = 127 << 8;
    if (maxrss_kb) *maxrss_kb = ru.ru_maxrss;
    ft_tool_slurp(of, out, out_size);
    ft_tool_slurp(ef, err, err_size);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#endif /* FT_TOOL_H */

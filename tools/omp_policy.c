/*
 * omp_policy.c - the ftengine tool's OpenMP wait policy: passive unless the
 * user chose one (docs/architecture.md, "CPU threads and a loaded host").
 *
 * libgomp's default has a waiting thread spin (about 300,000 iterations)
 * before it sleeps. With two threads on a two-core machine where something
 * else holds a core, a spinning thread takes the CPU from the one with work,
 * and every barrier costs a scheduler time slice: a 0.6 ms forward took
 * 200 ms. Passive waiting sleeps at once (futex) and costs a few microseconds
 * per parallel region on an idle host instead.
 *
 * libgomp reads OMP_WAIT_POLICY (and GOMP_SPINCOUNT) once, in its own
 * constructor, before any code of ours runs, and has no call to change it
 * afterwards. So when neither variable is set, this constructor of the tool
 * sets OMP_WAIT_POLICY=passive and executes the tool again, once (the
 * variable is then set, so it does not loop). If that fails (no
 * /proc/self/exe), the tool runs on with libgomp's default.
 */
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void ft_tool_wait_policy(int argc, char **argv, char **envp) {
    (void)envp;
    if (argc < 1 || !argv || getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* still here: exec failed; keep libgomp's default */
    unsetenv("OMP_WAIT_POLICY");
}

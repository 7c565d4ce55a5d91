/*
 * omp_policy.c - the ftengine tool's OpenMP wait policy: a short spin
 * (GOMP_SPINCOUNT=1000) unless the user chose one (docs/cpu_backend.md,
 * "Threads and a loaded host").
 *
 * libgomp's default has a waiting thread spin about 300,000 iterations before
 * it sleeps. With two threads on a two-core machine where something else holds
 * a core, a spinning thread takes the CPU from the one with work and every
 * barrier costs a scheduler time slice: bert-tiny (0.1 ms) took 70 ms. Passive
 * waiting (a futex sleep at once) fixes that but pays a wake-up per parallel
 * region on an idle host: MobileBERT, ~1000 short regions per forward, took
 * 57-68 ms with 2 threads instead of 43-49 ms. 1000 spins keeps a team warm
 * across back-to-back kernels and bounds what a spinning thread can steal
 * (docs/results/2026-11-25-tool-openmp-wait-policy.md has both measurements).
 *
 * libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, in its own
 * constructor, before any code of ours runs, and has no call to change them
 * afterwards. So when neither variable is set, this constructor sets
 * GOMP_SPINCOUNT and executes the tool again, once (the variable is then set,
 * so it does not loop); FT_TOOL_OMP_WAIT tells the new image that the tool,
 * not the user, chose. If exec fails (no /proc/self/exe), the tool runs on
 * with libgomp's default.
 */
#include "omp_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FT_TOOL_SPINCOUNT "1000"

static int set_by_tool; /* 1: this image runs with the tool's GOMP_SPINCOUNT */

__attribute__((constructor)) static void ft_tool_wait_policy(int argc, char **argv, char **envp) {
    (void)envp;
    const char *mark = getenv("FT_TOOL_OMP_WAIT");
    if (mark) {
        set_by_tool = strcmp(mark, "1") == 0;
        unsetenv("FT_TOOL_OMP_WAIT"); /* not inherited by anything the tool starts */
        return;
    }
    if (argc < 1 || !argv || getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", FT_TOOL_SPINCOUNT, 1) != 0) return;
    if (setenv("FT_TOOL_OMP_WAIT", "1", 1) == 0) execv("/proc/self/exe", argv);
    /* still here: exec failed; keep libgomp's default */
    unsetenv("GOMP_SPINCOUNT");
    unsetenv("FT_TOOL_OMP_WAIT");
}

const char *ft_tool_omp_wait(char *buf, size_t size) {
    const char *pol = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    if (set_by_tool && spin)
        snprintf(buf, size, "GOMP_SPINCOUNT=%s (the tool's default)", spin);
    else if (pol || spin)
        snprintf(buf, size, "%s%s%s%s%s (environment)", pol ? "OMP_WAIT_POLICY=" : "", pol ? pol : "",
                 pol && spin ? ", " : "", spin ? "GOMP_SPINCOUNT=" : "", spin ? spin : "");
    else
        snprintf(buf, size, "libgomp's default");
    return buf;
}

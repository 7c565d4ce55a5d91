/*
 * omp_policy.h - the OpenMP wait policy the ftengine tool runs under
 * (tools/omp_policy.c), as the bench/sweep header names it.
 */
#ifndef FT_OMP_POLICY_H
#define FT_OMP_POLICY_H

#include <stddef.h>

/* "GOMP_SPINCOUNT=1000 (the tool's default)", "OMP_WAIT_POLICY=passive
 * (environment)" or "libgomp's default", written into buf. */
const char *ft_tool_omp_wait(char *buf, size_t size);

#endif /* FT_OMP_POLICY_H */

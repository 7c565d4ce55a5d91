/*
 * stats.h - the statistics the tool's sweeps report (tools/stats.c): the median, a
 * distribution-free confidence interval for it from order statistics, and the
 * seeded shuffle that orders each round of a sweep. bench/studydata.py computes the
 * same interval for the report, so a number printed by `sweep` and the one in
 * report.md agree.
 */
#ifndef FT_STATS_H
#define FT_STATS_H

#include <stdint.h>

/* The median of v[0..n) sorted ascending (the mean of the middle two for even n); NaN for n = 0. */
double ft_stats_median(const double *sorted, int n);

/* A confidence interval for the median of n independent samples, without assuming
 * their distribution: [x(k), x(n+1-k)] of the sorted samples (1-based) covers the true
 * median with probability 1 - 2 P(Binomial(n, 1/2) <= k - 1). Picks the largest k whose
 * coverage is at least `want` (0.95), else k = 1 (the whole range), and returns k;
 * *level gets the coverage achieved (0 for n < 2, where there is no interval). */
int ft_stats_median_ci_rank(int n, double want, double *level);

/* The interval itself on sorted samples: *lo, *hi (NaN for n < 2), coverage in *level. */
void ft_stats_median_ci(const double *sorted, int n, double want, double *lo, double *hi, double *level);

/* Fisher-Yates on idx[0..n) with splitmix64 seeded by (seed, round): the same seed
 * and round give the same order, each round another one. */
void ft_stats_shuffle(int *idx, int n, uint64_t seed, int round);

#endif /* FT_STATS_H */

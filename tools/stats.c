/*
 * stats.c - see stats.h.
 */
#include "stats.h"

#include <math.h>

double ft_stats_median(const double *s, int n) {
    if (n <= 0) return NAN;
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* P(Binomial(n, 1/2) <= j), summed in doubles (n is a number of rounds: small). */
static double binom_cdf_half(int n, int j) {
    double term = pow(0.5, n), sum = 0;
    for (int i = 0; i <= j && i <= n; i++) {
        sum += term;
        term = term * (double)(n - i) / (double)(i + 1);
    }
    return sum;
}

int ft_stats_median_ci_rank(int n, double want, double *level) {
    *level = 0;
    if (n < 2) return 0;
    int best = 1;
    *level = 1 - 2 * binom_cdf_half(n, 0);
    for (int k = 2; 2 * k <= n + 1; k++) {
        double c = 1 - 2 * binom_cdf_half(n, k - 1);
        if (c < want) break;
        best = k;
        *level = c;
    }
    return best;
}

void ft_stats_median_ci(const double *s, int n, double want, double *lo, double *hi, double *level) {
    int k = ft_stats_median_ci_rank(n, want, level);
    *lo = k ? s[k - 1] : NAN;
    *hi = k ? s[n - k] : NAN;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ft_stats_shuffle(int *idx, int n, uint64_t seed, int round) {
    uint64_t st = seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(round + 1));
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(splitmix64(&st) % (uint64_t)(i + 1));
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

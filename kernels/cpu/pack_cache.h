/*
 * pack_cache.h - eager mode's per-context cache of packed linear and convolution weights
 * (kernels/cpu/pack_cache.c explains the key). Internal to kernels/cpu.
 */
#ifndef FT_CPU_PACK_CACHE_H
#define FT_CPU_PACK_CACHE_H

#include "gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The B panels (W^T) of linear weight w [N, K] from ctx's cache, packed on a
 * miss; NULL when w is not a versioned model parameter, the cache is off or
 * full of nothing evictable, or memory ran out: the caller then packs per call.
 * Valid until the next call on ctx. */
const ft_cpu_packed_b *ft_cpu_pack_cache_linear(ft_ctx *ctx, const ft_tensor *w);
/* The same for a grouped linear's weight w [N, Kg]: `groups` panel sets, set g the
 * W^T of rows g N/groups ... (ft_cpu_packed_b_group picks one). */
const ft_cpu_packed_b *ft_cpu_pack_cache_linear_groups(ft_ctx *ctx, const ft_tensor *w, int64_t groups);
/* The same for convolution weight w [Cout, Cin/groups, (KH,) KW]: its A panels
 * per group (ft_cpu_pack_a_groups), as a plan packs them. */
const ft_cpu_packed_b *ft_cpu_pack_cache_conv(ft_ctx *ctx, const ft_tensor *w, int64_t groups);
/* Test hooks: the cap in bytes (evicts down to it; 0 turns the cache off), and
 * process-wide lookup counts. */
void ft_cpu_pack_cache_set_limit(ft_ctx *ctx, size_t bytes);
int64_t ft_cpu_pack_cache_hits(void);
int64_t ft_cpu_pack_cache_misses(void);

#ifdef __cplusplus
}
#endif

#endif /* FT_CPU_PACK_CACHE_H */

/*
 * gemm_micro.h - what the blocked SGEMM (gemm.c) takes from gemm_micro.c: the
 * register-tiled micro-kernels, the packing of A and B slivers, and the
 * blocking sizes chosen for this host at run time. Internal to kernels/cpu.
 */
#ifndef FT_CPU_GEMM_MICRO_H
#define FT_CPU_GEMM_MICRO_H

#include "gemm.h"

#include <stdbool.h>
#include <stdint.h>

#define FT_CPU_GEMM_MR_MAX 8 /* largest micro-tile rows */
#define FT_CPU_GEMM_NC_MAX 32 /* widest micro-tile: two NR slivers side by side */

/*
 * C[mr, nr] (= or += beta *) an A sliver [kc][MR] times the B slivers at b
 * ([kc][NR] each; a tile ncols wide reads ncols / NR of them, consecutive in
 * the packed panel, the second at b + NR * kc). mr <= MR, nr <= the tile width.
 */
typedef void (*ft_cpu_micro_fn)(int64_t kc, const float *restrict a, const float *restrict b,
                                float *restrict c, int64_t ldc, float beta, int mr, int nr);

typedef struct ft_cpu_gemm_kern {
    ft_cpu_micro_fn fn;   /* mr x ncols */
    ft_cpu_micro_fn fn16; /* mr x NR: the last sliver alone (fn when ncols == NR) */
    int mr, ncols;
    /* blocking: depth of a packed block (a multiple of 16), rows of a packed A
     * block (a multiple of mr), columns of a packed B panel and of a
     * convolution's (multiples of ncols) */
    int64_t kc, mc, nc, conv_nc;
    const char *isa; /* "avx512", "avx2" or "generic" */
    int64_t l1, l2;  /* the cache sizes the blocking was derived from (bytes) */
} ft_cpu_gemm_kern;

/* The micro-kernel and blocking of this host: the widest vector ISA it has, and
 * depths sized from its L1 and L2 data caches (sysconf, else sysfs, else 32 KiB
 * and 1 MiB). Chosen once per process. */
const ft_cpu_gemm_kern *ft_cpu_gemm_kern_get(void);
/* Tests and benches, before anything of the process packed or multiplied:
 * another kernel ("6x16": the AVX2 one, "8x32": the AVX-512 one; NULL: the
 * host's) and depths (kc, mc > 0, rounded to what the kernel needs; 0: from the
 * caches). false when that kernel cannot run here or the choice is made. */
bool ft_cpu_gemm_kern_select(const char *kernel, int64_t kc, int64_t mc);

/* op(A)[i0:i0+mc, p0:p0+kc] * alpha into slivers of mr rows: sliver s holds
 * [kc][mr] with rows past mc zero-filled. */
void ft_cpu_gemm_pack_a(bool ta, const float *a, int64_t lda, int64_t i0, int64_t p0, int64_t mc,
                        int64_t kc, float alpha, int mr, float *restrict pa);

/* op(B)[p0:p0+kc, j0:j0+nc] into slivers of NR columns: [kc][NR], zero-filled. */
void ft_cpu_gemm_pack_b(bool tb, const float *b, int64_t ldb, int64_t p0, int64_t j0, int64_t kc,
                        int64_t nc, float *restrict pb);

#endif /* FT_CPU_GEMM_MICRO_H */

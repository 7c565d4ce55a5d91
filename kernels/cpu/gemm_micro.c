/*
 * gemm_micro.c - the innermost parts of the CPU SGEMM (gemm.c): register-tiled
 * micro-kernels, the packing of A and B into slivers, and the blocking sizes,
 * all chosen for the host at run time.
 *
 * The micro-kernels are plain C with fixed trip counts that gcc vectorises and
 * keeps in registers; each is compiled for the ISA it is written for and picked
 * by CPUID once. With AVX-512 the tile is 8 x 32: two zmm columns, so each
 * depth step loads 2 B vectors and broadcasts 8 A values for 16 FMAs (the
 * 12 x 16 tile it replaces issued 13 loads for 12 FMAs, and on a core with two
 * FMA pipes and two vector loads per cycle the loads were the bottleneck). The
 * 32 columns are two consecutive 16-column slivers of the packed B panel, so
 * the panel layout stays [kc][16] for every ISA. With AVX2 it is 6 x 16 (12 of
 * the 16 ymm registers as accumulators).
 *
 * Blocking (Goto's scheme): the B tile of one micro-kernel call (kc x 32
 * floats) is reused across every A sliver of a block and sits in L1 (or
 * streams from L2); the packed A block (mc x kc) is read once per B tile and
 * sits in half of L2. Both come from the host's cache sizes, read at run time.
 */
#include "gemm_micro.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NR FT_CPU_GEMM_NR
#define MR_MAX FT_CPU_GEMM_MR_MAX

#if defined(__GNUC__) && !defined(__clang__)
#define FT_HAVE_GCC 1
#endif

#if defined(__GNUC__)
#define FT_INLINE static inline __attribute__((always_inline))
#else
#define FT_INLINE static inline
#endif

#if defined(FT_HAVE_GCC) && defined(__x86_64__) && __GNUC__ >= 11
#define FT_GEMM_X86_CLONES 1
#endif

/* (not under ThreadSanitizer: it instruments the clones' ifunc resolver, which the
 * dynamic loader runs before the sanitizer's runtime is up, and crashes) */
#if defined(FT_GEMM_X86_CLONES) && !defined(__SANITIZE_THREAD__)
#define FT_CLONES_V3 __attribute__((target_clones("arch=x86-64-v3", "default")))
#define FT_CLONES_ALL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FT_CLONES_V3
#define FT_CLONES_ALL
#endif

#ifdef FT_HAVE_GCC
/* -std=c11 turns FMA contraction off; the micro-kernel wants it, and -O3 for
 * the complete unrolling of its fixed-size loops. */
#pragma GCC push_options
#pragma GCC optimize("O3", "fp-contract=fast")
#endif

/* ------------------------------------------------------------------------- */
/* micro-kernels                                                             */
/* ------------------------------------------------------------------------- */

/* C[mr, nr] (= or +=beta*) a sliver [kc, MRC] times NS slivers [kc, NR] (the
 * second at b + NR * kc). */
FT_INLINE void micro_body(const int MRC, const int NS, int64_t kc, const float *restrict a,
                          const float *restrict b, float *restrict c, int64_t ldc, float beta,
                          int mr, int nr) {
    float acc[MR_MAX][2 * NR];
    const float *restrict b1 = b + NR * kc;
    for (int i = 0; i < MRC; i++)
        for (int j = 0; j < NS * NR; j++) acc[i][j] = 0.0f;
    for (int64_t p = 0; p < kc; p++) {
        const float *ap = a + p * MRC, *bp = b + p * NR, *bq = b1 + p * NR;
#if defined(__GNUC__)
#pragma GCC unroll 16
#endif
        for (int i = 0; i < MRC; i++) {
            const float ai = ap[i];
#pragma omp simd
            for (int j = 0; j < NR; j++) acc[i][j] += ai * bp[j];
            if (NS == 2) {
#pragma omp simd
                for (int j = 0; j < NR; j++) acc[i][NR + j] += ai * bq[j];
            }
        }
    }
    if (mr == MRC && nr == NS * NR) {
        if (beta == 0.0f) {
            for (int i = 0; i < MRC; i++)
                for (int j = 0; j < NS * NR; j++) c[i * ldc + j] = acc[i][j];
        } else {
            for (int i = 0; i < MRC; i++)
                for (int j = 0; j < NS * NR; j++) c[i * ldc + j] = acc[i][j] + beta * c[i * ldc + j];
        }
        return;
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            c[i * ldc + j] = beta == 0.0f ? acc[i][j] : acc[i][j] + beta * c[i * ldc + j];
}

FT_CLONES_V3
static void micro_6x16(int64_t kc, const float *restrict a, const float *restrict b,
                       float *restrict c, int64_t ldc, float beta, int mr, int nr) {
    micro_body(6, 1, kc, a, b, c, ldc, beta, mr, nr);
}

#ifdef FT_GEMM_X86_CLONES
__attribute__((target("arch=x86-64-v4")))
static void micro_8x32(int64_t kc, const float *restrict a, const float *restrict b,
                       float *restrict c, int64_t ldc, float beta, int mr, int nr) {
    micro_body(8, 2, kc, a, b, c, ldc, beta, mr, nr);
}

__attribute__((target("arch=x86-64-v4")))
static void micro_8x16(int64_t kc, const float *restrict a, const float *restrict b,
                       float *restrict c, int64_t ldc, float beta, int mr, int nr) {
    micro_body(8, 1, kc, a, b, c, ldc, beta, mr, nr);
}

#endif

/* ------------------------------------------------------------------------- */
/* packing                                                                   */
/* ------------------------------------------------------------------------- */

/* A full sliver of MRC rows of a row-major A: for each depth p the MRC values of
 * column p, written in order (the reads are MRC short streams). */
FT_INLINE void pack_a_rows(const int MRC, const float *restrict src, int64_t lda, int64_t kc,
                           float alpha, float *restrict dst) {
    for (int64_t p = 0; p < kc; p++)
#if defined(__GNUC__)
#pragma GCC unroll 12
#endif
        for (int r = 0; r < MRC; r++) dst[p * MRC + r] = alpha * src[r * lda + p];
}

FT_CLONES_ALL
void ft_cpu_gemm_pack_a(bool ta, const float *a, int64_t lda, int64_t i0, int64_t p0, int64_t mc,
                        int64_t kc, float alpha, int mr, float *restrict pa) {
    for (int64_t s = 0; s < mc; s += mr) {
        int rows = (int)(mc - s < mr ? mc - s : mr);
        float *dst = pa + s * kc;
        if (ta) {
            /* op(A)(i, p) = a[p*lda + i]: each p reads rows contiguous */
            for (int64_t p = 0; p < kc; p++) {
                const float *src = a + (p0 + p) * lda + i0 + s;
                int r = 0;
                for (; r < rows; r++) dst[p * mr + r] = alpha * src[r];
                for (; r < mr; r++) dst[p * mr + r] = 0.0f;
            }
            continue;
        }
        const float *src = a + (i0 + s) * lda + p0;
        if (rows == mr && mr == 8) {
            pack_a_rows(8, src, lda, kc, alpha, dst);
        } else if (rows == mr && mr == 6) {
            pack_a_rows(6, src, lda, kc, alpha, dst);
        } else {
            for (int r = 0; r < rows; r++)
                for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = alpha * src[r * lda + p];
            for (int r = rows; r < mr; r++)
                for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = 0.0f;
        }
    }
}

FT_CLONES_ALL
void ft_cpu_gemm_pack_b(bool tb, const float *b, int64_t ldb, int64_t p0, int64_t j0, int64_t kc,
                        int64_t nc, float *restrict pb) {
    for (int64_t s = 0; s < nc; s += NR) {
        int cols = (int)(nc - s < NR ? nc - s : NR);
        float *dst = pb + s * kc;
        if (tb) {
            /* op(B)(p, j) = b[j*ldb + p]: reading NR rows side by side keeps the writes
             * sequential, ~3x faster than one row at a time */
            const float *src = b + (j0 + s) * ldb + p0;
            if (cols == NR) {
                for (int64_t p = 0; p < kc; p++)
                    for (int c = 0; c < NR; c++) dst[p * NR + c] = src[c * ldb + p];
            } else {
                for (int64_t p = 0; p < kc; p++) {
                    int c = 0;
                    for (; c < cols; c++) dst[p * NR + c] = src[c * ldb + p];
                    for (; c < NR; c++) dst[p * NR + c] = 0.0f;
                }
            }
        } else {
            for (int64_t p = 0; p < kc; p++) {
                const float *src = b + (p0 + p) * ldb + j0 + s;
                int c = 0;
                if (cols == NR) {
                    for (; c < NR; c++) dst[p * NR + c] = src[c];
                } else {
                    for (; c < cols; c++) dst[p * NR + c] = src[c];
                    for (; c < NR; c++) dst[p * NR + c] = 0.0f;
                }
            }
        }
    }
}

#ifdef FT_HAVE_GCC
#pragma GCC pop_options
#endif

/* ------------------------------------------------------------------------- */
/* the host: ISA and cache sizes                                             */
/* ------------------------------------------------------------------------- */

/* Size in bytes of the level-`level` data (or unified) cache of CPU 0 from
 * sysfs, or 0. */
static int64_t sysfs_cache(int level) {
    for (int idx = 0; idx < 8; idx++) {
        char path[96], buf[32];
        int lv = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        FILE *f = fopen(path, "r");
        if (!f) break;
        bool ok = fscanf(f, "%d", &lv) == 1;
        fclose(f);
        if (!ok || lv != level) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", idx);
        f = fopen(path, "r");
        if (!f) continue;
        ok = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        if (!ok || !strncmp(buf, "Instruction", 11)) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        f = fopen(path, "r");
        if (!f) continue;
        long long v = 0;
        char unit = 0;
        int got = fscanf(f, "%lld%c", &v, &unit);
        fclose(f);
        if (got >= 1 && v > 0) return unit == 'M' ? v << 20 : unit == 'K' ? v << 10 : v;
    }
    return 0;
}

static int64_t cache_bytes(int level, int64_t fallback) {
    long v = -1;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
    v = sysconf(level == 1 ? _SC_LEVEL1_DCACHE_SIZE : _SC_LEVEL2_CACHE_SIZE);
#endif
    if (v <= 0) v = (long)sysfs_cache(level);
    /* nonsense (a hypervisor's zero, a huge value) falls back to typical sizes */
    if (v < 8 * 1024 || v > ((int64_t)64 << 20)) v = (long)fallback;
    return v;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The kernel for this host, or the one named (want: "6x16" the AVX2 kernel, "8x32"
 * the AVX-512 one when the CPU has it); depths kc, mc from the caches unless given
 * (> 0). ok: false when the kernel asked for cannot run here. */
static ft_cpu_gemm_kern kern_make(const char *want, int64_t kc_want, int64_t mc_want, bool *ok) {
    ft_cpu_gemm_kern k = {micro_6x16, micro_6x16, 6, 16, 0, 0, 0, 0, "generic", 0, 0};
    *ok = true;
    bool v4 = false;
#ifdef FT_GEMM_X86_CLONES
    __builtin_cpu_init();
    /* everything x86-64-v4 implies, by names every gcc with that target knows */
    v4 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("fma");
    bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (want && !strcmp(want, "6x16")) v4 = false;
    if (v4)
        k = (ft_cpu_gemm_kern){micro_8x32, micro_8x16, 8, 32, 0, 0, 0, 0, "avx512", 0, 0};
    else if (v3)
        k.isa = "avx2";
#endif
    if (want && strcmp(want, "6x16") && !(v4 && !strcmp(want, "8x32"))) *ok = false;
    k.l1 = cache_bytes(1, 32 << 10);
    k.l2 = cache_bytes(2, 1 << 20);
    /* depth: a 32-column B tile (kc x 32) the size of L1. Goto's rule would keep
     * it in half of L1, but measured on an AVX-512 host (48 KiB L1, 1 MiB L2;
     * docs/results/2026-11-26-cpu-gemm.md) depths of 384-512 beat 192-256 by
     * 3-8%: the tile streams from L2 at 160 bytes per 16 FMAs, well within L2's
     * bandwidth, and a deeper block stores and reloads C fewer times */
    int64_t kc = kc_want > 0 ? kc_want : k.l1 / (32 * (int64_t)sizeof(float));
    k.kc = clamp64(kc / 16 * 16, 128, 512);
    /* the A block (mc x kc) in half of L2 */
    int64_t mc = mc_want > 0 ? mc_want : k.l2 / 2 / (k.kc * (int64_t)sizeof(float));
    k.mc = clamp64(mc / k.mr * k.mr, k.mr, 1020 / k.mr * k.mr);
    k.nc = 4096;
    /* a convolution's B panel (kc x conv_nc, rebuilt from x per panel) in half of L2 */
    int64_t cn = k.l2 / 2 / (k.kc * (int64_t)sizeof(float));
    k.conv_nc = clamp64(cn / k.ncols * k.ncols, 4 * k.ncols, 4096);
    return k;
}

static ft_cpu_gemm_kern kern;
static int kern_ready; /* 0, then 1 once kern is filled */
static int kern_lock;

/* Fills kern with k unless it is filled already; whether k is the one in use. */
static bool kern_set(const ft_cpu_gemm_kern *k) {
    while (__atomic_exchange_n(&kern_lock, 1, __ATOMIC_ACQUIRE)) {
    }
    bool set = !kern_ready;
    if (set) {
        kern = *k;
        __atomic_store_n(&kern_ready, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&kern_lock, 0, __ATOMIC_RELEASE);
    return set;
}

const ft_cpu_gemm_kern *ft_cpu_gemm_kern_get(void) {
    if (__atomic_load_n(&kern_ready, __ATOMIC_ACQUIRE)) return &kern;
    bool ok;
    ft_cpu_gemm_kern k = kern_make(NULL, 0, 0, &ok); /* every thread computes the same */
    kern_set(&k);
    return &kern;
}

bool ft_cpu_gemm_kern_select(const char *kernel, int64_t kc, int64_t mc) {
    bool ok;
    ft_cpu_gemm_kern k = kern_make(kernel, kc, mc, &ok);
    return ok && kern_set(&k);
}

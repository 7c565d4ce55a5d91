/*
 * scratch.h - the CPU backend's per-context scratch (kernels/cpu/scratch.c):
 * GEMM packing buffers, f32 staging of f16/bf16 operands, attention score rows.
 * A context owns one ft_cpu_scratch with a slot per OpenMP thread of its team;
 * each slot holds one grow-only buffer per kind. Buffers are sized on first use,
 * grown when a larger request comes, and kept until ft_ctx_free, so a steady
 * state of repeated forwards allocates nothing. Internal to kernels/cpu.
 */
#ifndef FT_CPU_SCRATCH_H
#define FT_CPU_SCRATCH_H

#include "../../engine/ft_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_cpu_scratch ft_cpu_scratch;

/* Buffer kinds of a slot. FT_SCR_STAGE: any free staging buffer (a kernel holds
 * up to FT_SCR_NSTAGE f32 copies at once; past that it mallocs). */
enum {
    FT_SCR_GEMM_A = 0, /* packed A block [MC][KC] */
    FT_SCR_GEMM_B,     /* packed B panel [KC][NC] */
    FT_SCR_GEMM_AP,    /* a thread's whole A packed (dynamic column chunks over a packed B) */
    FT_SCR_ATTN,       /* attention: a head's packed K and V, a query block's scores */
    FT_SCR_OUT,        /* f32 output of a kernel whose output is f16/bf16 */
    FT_SCR_STAGE0,
    FT_SCR_NSTAGE = 6,
    FT_SCR_KINDS = FT_SCR_STAGE0 + FT_SCR_NSTAGE,
    FT_SCR_STAGE = -1
};

/* The scratch of the context whose kernel the calling thread runs (NULL: none,
 * e.g. a GEMM called directly by a test, or an OpenMP worker thread). */
ft_cpu_scratch *ft_cpu_scratch_cur(void);
/* Makes s the calling thread's current scratch and returns the previous one: a
 * worker thread of a kernel's parallel region that calls the GEMM sets its
 * kernel's scratch on entry and restores the previous one on exit. */
ft_cpu_scratch *ft_cpu_scratch_swap(ft_cpu_scratch *s);
/* Kernel entry: ctx's scratch (made on first use) becomes the thread's current
 * one; ft_cpu_scratch_leave clears it, so nothing stale outlives a kernel. */
void ft_cpu_scratch_enter(ft_ctx *ctx);
void ft_cpu_scratch_leave(void);

/* A buffer obtained for one use: from scratch slot omp_get_thread_num() of sc,
 * or malloc'd when sc is NULL, the slot is out of range or no staging buffer is
 * free. */
typedef struct ft_cpu_buf {
    void *p;
    ft_cpu_scratch *sc; /* NULL: p is malloc'd (or NULL) */
    int slot, kind;
} ft_cpu_buf;
/* At least `bytes` (> 0 is not required) of kind `kind` (or FT_SCR_STAGE); NULL
 * when out of memory (or past the scratch limit). */
void *ft_cpu_buf_get(ft_cpu_buf *b, ft_cpu_scratch *sc, int kind, size_t bytes);
/* Gives the buffer back (frees it when it was malloc'd); b is cleared. */
void ft_cpu_buf_put(ft_cpu_buf *b);

/* Test hooks: empties ctx's scratch (call it between kernels) and caps it at
 * `bytes` (0: no cap), so that growing past the cap fails as out of memory; process-wide counts of scratch buffer (re)allocations
 * and of malloc fallbacks while a scratch was current. */
void ft_cpu_scratch_set_limit(ft_ctx *ctx, size_t bytes);
int64_t ft_cpu_scratch_allocs(void);
int64_t ft_cpu_scratch_fallbacks(void);

#ifdef __cplusplus
}
#endif

#endif /* FT_CPU_SCRATCH_H */

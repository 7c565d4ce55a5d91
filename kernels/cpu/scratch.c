/*
 * scratch.c - the per-context scratch of the CPU backend (scratch.h).
 *
 * Why a slot per OpenMP thread number: a kernel's parallel regions run at most
 * ctx->cpu_threads threads, numbered from 0, and a GEMM inside such a region
 * runs serially on the region's thread, so "slot = omp_get_thread_num() of the
 * innermost active team" never gives one slot to two threads at once. Two
 * contexts never share a scratch, and a context runs one kernel at a time, so
 * nothing here takes a lock. Worker threads of a team do not see the calling
 * thread's current scratch (it is thread-local): code that opens a region
 * captures it first and passes it on (the GEMM) or sets it in each worker
 * (ft_cpu_scratch_swap).
 */
#include "scratch.h"
#include "cpu_kernels.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct scr_buf {
    void *p;
    size_t cap;
} scr_buf;

struct ft_cpu_scratch {
    int nslots;
    scr_buf *b;          /* [nslots][FT_SCR_KINDS] */
    unsigned *stage_busy; /* [nslots]: bit i = staging buffer i is handed out */
    size_t bytes;        /* sum of caps (atomic: slots grow from several threads) */
    size_t team_hw[FT_SCR_OUT]; /* largest size each team kind (GEMM, attention) reached (atomic) */
    size_t limit;        /* 0: none */
};

static _Thread_local ft_cpu_scratch *cur_tls;
static int64_t n_allocs, n_fallbacks; /* test hooks (atomic) */

static ft_cpu_scratch *scratch_new(int nslots) {
    if (nslots < 1) nslots = 1;
    ft_cpu_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->nslots = nslots;
    s->b = calloc((size_t)nslots * FT_SCR_KINDS, sizeof *s->b);
    s->stage_busy = calloc((size_t)nslots, sizeof *s->stage_busy);
    if (!s->b || !s->stage_busy) {
        free(s->b);
        free(s->stage_busy);
        free(s);
        return NULL;
    }
    return s;
}

static void scratch_free(ft_cpu_scratch *s) {
    if (!s) return;
    for (int i = 0; i < s->nslots * FT_SCR_KINDS; i++) free(s->b[i].p);
    free(s->b);
    free(s->stage_busy);
    free(s);
}

ft_cpu_scratch *ft_cpu_scratch_cur(void) { return cur_tls; }

ft_cpu_scratch *ft_cpu_scratch_swap(ft_cpu_scratch *s) {
    ft_cpu_scratch *prev = cur_tls;
    cur_tls = s;
    return prev;
}

static void even_slots(ft_cpu_scratch *s);

void ft_cpu_scratch_enter(ft_ctx *ctx) {
    /* without memory for the bookkeeping the kernels malloc per call, as before */
    if (!ctx->cpu_scratch) ctx->cpu_scratch = scratch_new(ctx->cpu_threads);
    if (ctx->cpu_scratch) even_slots(ctx->cpu_scratch);
    cur_tls = ctx->cpu_scratch;
}

void ft_cpu_scratch_leave(void) { cur_tls = NULL; }

/* Buffer `kind` of `slot` grown to at least `bytes`; NULL when out of memory or
 * past the limit (the old buffer is then gone too: its contents never matter). */
static void *grow(ft_cpu_scratch *s, int slot, int kind, size_t bytes) {
    scr_buf *b = &s->b[slot * FT_SCR_KINDS + kind];
    if (b->cap >= bytes && b->p) return b->p;
    /* page multiples: a slightly larger request next time does not reallocate */
    size_t want = (bytes + 4095) & ~(size_t)4095;
    if (want < bytes) return NULL;
    /* reserve first: the threads of a team grow their slots at the same time */
    size_t after = __atomic_add_fetch(&s->bytes, want, __ATOMIC_RELAXED);
    if (s->limit && after - b->cap > s->limit) {
        __atomic_fetch_sub(&s->bytes, want, __ATOMIC_RELAXED);
        return NULL;
    }
    free(b->p);
    __atomic_fetch_sub(&s->bytes, b->cap, __ATOMIC_RELAXED);
    b->p = NULL;
    b->cap = 0;
    void *p = NULL;
    if (posix_memalign(&p, 64, want) != 0) {
        __atomic_fetch_sub(&s->bytes, want, __ATOMIC_RELAXED);
        return NULL;
    }
    b->p = p;
    b->cap = want;
    __atomic_fetch_add(&n_allocs, 1, __ATOMIC_RELAXED);
    if (kind < FT_SCR_OUT) {
        size_t hw = __atomic_load_n(&s->team_hw[kind], __ATOMIC_RELAXED);
        while (hw < want && !__atomic_compare_exchange_n(&s->team_hw[kind], &hw, want, true, __ATOMIC_RELAXED,
                                                         __ATOMIC_RELAXED)) {
        }
    }
    return p;
}

/*
 * At kernel entry (no team runs): every slot's team buffers grown to the largest
 * any slot needed. Which thread of a team gets which task varies between runs
 * (dynamic schedules), so without this a thread could meet a size for the first
 * time in the tenth forward and allocate then; with it, the steady state
 * allocates nothing once each size was seen anywhere.
 */
static void even_slots(ft_cpu_scratch *s) {
    for (int kind = 0; kind < FT_SCR_OUT; kind++) {
        size_t hw = __atomic_load_n(&s->team_hw[kind], __ATOMIC_RELAXED);
        for (int slot = 0; slot < s->nslots && hw; slot++)
            if (s->b[slot * FT_SCR_KINDS + kind].cap < hw) grow(s, slot, kind, hw);
    }
}

void *ft_cpu_buf_get(ft_cpu_buf *b, ft_cpu_scratch *sc, int kind, size_t bytes) {
    memset(b, 0, sizeof *b);
    if (bytes == 0) bytes = 1;
    int slot = omp_get_thread_num();
    if (sc && slot < sc->nslots) {
        if (kind == FT_SCR_STAGE) {
            unsigned busy = sc->stage_busy[slot];
            for (int i = 0; i < FT_SCR_NSTAGE; i++)
                if (!(busy & (1u << i))) {
                    kind = FT_SCR_STAGE0 + i;
                    break;
                }
        }
        if (kind != FT_SCR_STAGE) {
            b->p = grow(sc, slot, kind, bytes);
            if (!b->p) return NULL;
            b->sc = sc;
            b->slot = slot;
            b->kind = kind;
            if (kind >= FT_SCR_STAGE0) sc->stage_busy[slot] |= 1u << (kind - FT_SCR_STAGE0);
            return b->p;
        }
    }
    if (sc) __atomic_fetch_add(&n_fallbacks, 1, __ATOMIC_RELAXED);
    b->p = malloc(bytes);
    return b->p;
}

void ft_cpu_buf_put(ft_cpu_buf *b) {
    if (b->sc) {
        if (b->kind >= FT_SCR_STAGE0) b->sc->stage_busy[b->slot] &= ~(1u << (b->kind - FT_SCR_STAGE0));
    } else {
        free(b->p);
    }
    memset(b, 0, sizeof *b);
}

size_t ft_cpu_scratch_bytes(const ft_ctx *ctx) {
    const ft_cpu_scratch *s = ctx ? ctx->cpu_scratch : NULL;
    return s ? __atomic_load_n(&s->bytes, __ATOMIC_RELAXED) : 0;
}

void ft_cpu_scratch_set_limit(ft_ctx *ctx, size_t bytes) {
    if (!ctx->cpu_scratch) ctx->cpu_scratch = scratch_new(ctx->cpu_threads);
    ft_cpu_scratch *s = ctx->cpu_scratch;
    if (!s) return;
    /* between kernels nothing is handed out: start empty under the new cap */
    for (int i = 0; i < s->nslots * FT_SCR_KINDS; i++) {
        free(s->b[i].p);
        s->b[i].p = NULL;
        s->b[i].cap = 0;
    }
    s->bytes = 0;
    memset(s->team_hw, 0, sizeof s->team_hw);
    s->limit = bytes;
}

int64_t ft_cpu_scratch_allocs(void) { return __atomic_load_n(&n_allocs, __ATOMIC_RELAXED); }
int64_t ft_cpu_scratch_fallbacks(void) { return __atomic_load_n(&n_fallbacks, __ATOMIC_RELAXED); }

void ft_cpu_ctx_release(ft_ctx *ctx) {
    if (cur_tls == ctx->cpu_scratch) cur_tls = NULL;
    scratch_free(ctx->cpu_scratch);
    ctx->cpu_scratch = NULL;
    ft_cpu_pack_cache_free(ctx);
}

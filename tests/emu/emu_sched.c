/*
 * emu_sched.c - runs an emulated CUDA grid on the host (see emu.h): blocks one
 * after the other, the threads of a block as cooperative fibers (ucontext)
 * that switch only at __syncthreads and at warp exchanges.
 *
 * A waiting fiber yields until its barrier's generation moves on; a whole round
 * over the block in which nothing moved is a barrier that can never complete,
 * which on a GPU is a hang or undefined behaviour: reported and aborted.
 * Dynamic shared memory is filled with 0xFF (NaN as f32/f16/bf16) at every
 * block start, so a kernel that reads shared memory it never wrote shows it.
 *
 * Order: FT_EMU_ORDER=reverse runs the threads of each round, and the blocks,
 * last first; =random shuffles the threads of every round (FT_EMU_SEED). A
 * kernel whose result changes with the order has a race a GPU may show one day
 * (a thread reading what another wrote without a barrier between them).
 *
 * Speed: each stack slot holds one worker fiber for the whole process, entered
 * once through ucontext and from then on switched with _setjmp/_longjmp, which
 * (unlike swapcontext) make no system call; a worker runs one emulated thread,
 * parks, and is handed the next. Under AddressSanitizer every switch is a
 * swapcontext instead, the one stack switch ASan knows about.
 */
#undef _FORTIFY_SOURCE /* its longjmp check refuses jumps between stacks */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "emu.h"

#define FIBER_STACK (256u * 1024u)
#define MAX_THREADS 1024

enum { F_READY, F_DONE };

#if defined(__SANITIZE_ADDRESS__)
#define EMU_UCONTEXT_ONLY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_UCONTEXT_ONLY 1
#endif
#endif

typedef struct fiber {
    ucontext_t uc;
    jmp_buf jb;  /* where the worker parked (fast path) */
    int started; /* the worker has been entered once */
    int state;
    ft_emu_thread t;
} fiber;

/* one block's synchronisation state */
typedef struct warp_bar {
    unsigned arrived, mask;   /* lanes that arrived at the current exchange, its mask */
    unsigned gen;             /* completed exchanges */
    uint64_t vals[2][32];     /* double-buffered by generation: a lane that left exchange g
                                 can write g + 1 before slower lanes have read g */
} warp_bar;

static struct {
    fiber *fibers;            /* [MAX_THREADS] */
    char *stacks;             /* MAX_THREADS * FIBER_STACK, mapped once, reused */
    ucontext_t sched;
    jmp_buf sched_jb;
    int n, live;
    unsigned bar_arrived, bar_gen;
    warp_bar warps[MAX_THREADS / 32];
    unsigned long progress;   /* bumped by every arrival, release and exit */
    void (*fn)(void *);
    void *closure;
    void *smem;
    size_t smem_cap;
    const char *name;
    int pdl;                  /* the grid was launched with programmatic dependent launch */
    int no_gdc;               /* its kernels count as built from pre-sm_90 PTX (empty prologue) */
    fiber *cur;
    int order;                /* 0 forward, 1 reverse, 2 random */
    uint64_t rng;
    unsigned perm[MAX_THREADS];
} S;

ft_emu_thread *ft_emu_self;

static void emu_die(const char *what) {
    fprintf(stderr, "ftengine CUDA emulator: kernel %s: %s\n", S.name ? S.name : "?", what);
    abort();
}

/* fiber -> scheduler */
static void yield(void) {
#ifdef EMU_UCONTEXT_ONLY
    if (swapcontext(&S.cur->uc, &S.sched) != 0) emu_die("swapcontext failed");
#else
    if (!_setjmp(S.cur->jb)) _longjmp(S.sched_jb, 1);
#endif
}

static void block_barrier_check(void) {
    if (S.live > 0 && S.bar_arrived == (unsigned)S.live) {
        S.bar_arrived = 0;
        S.bar_gen++;
        S.progress++;
    }
}

void ft_emu_syncthreads(void) {
    unsigned gen = S.bar_gen;
    S.bar_arrived++;
    S.progress++;
    block_barrier_check();
    while (S.bar_gen == gen) yield();
    S.progress++;
}

void ft_emu_warp_exchange(unsigned mask, uint64_t v, uint64_t out[32]) {
    ft_emu_thread *t = ft_emu_self;
    warp_bar *w = &S.warps[t->warp];
    unsigned bit = 1u << t->lane;
    if (!(mask & bit)) emu_die("a lane calls a warp intrinsic with a mask that leaves it out");
    if (w->arrived && w->mask != mask) emu_die("warp intrinsics with different masks at once");
    w->mask = mask;
    unsigned gen = w->gen;
    w->vals[gen & 1][t->lane] = v;
    w->arrived |= bit;
    S.progress++;
    if (w->arrived == mask) {
        w->arrived = 0;
        w->gen++;
    }
    while (w->gen == gen) yield();
    memcpy(out, w->vals[gen & 1], sizeof w->vals[0]);
    S.progress++;
}

void *ft_emu_dyn_smem(void) { return S.smem; }

void ft_emu_gdc_wait(void) {
    /* kernels from PTX older than sm_90: the prologue has no griddepcontrol.wait */
    if (ft_emu_self && !S.no_gdc) ft_emu_self->gdc_waited = 1;
}

/* The end of one emulated thread. */
static void thread_done(void) {
    if (S.pdl && !S.cur->t.gdc_waited)
        emu_die("launched with programmatic dependent launch, but a thread ended without "
                "griddepcontrol.wait (FT_KERNEL_PROLOGUE): on a GPU it may run before the "
                "kernel it depends on has finished");
    S.cur->state = F_DONE;
    S.live--;
    S.progress++;
    block_barrier_check(); /* exited threads no longer hold a __syncthreads back */
}

#ifdef EMU_UCONTEXT_ONLY
static void fiber_main(void) {
    S.fn(S.closure);
    thread_done();
    /* returning resumes uc_link: the scheduler */
}
#else
/* A worker never returns: it runs the thread it was handed, parks, and is
 * resumed for the next one (S.cur names it each time). */
static void fiber_main(void) {
    for (;;) {
        S.fn(S.closure);
        thread_done();
        yield();
    }
}
#endif

static void ensure_init(size_t smem) {
    if (!S.fibers) {
        S.fibers = calloc(MAX_THREADS, sizeof *S.fibers);
        void *st = mmap(NULL, (size_t)MAX_THREADS * FIBER_STACK, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (!S.fibers || st == MAP_FAILED) emu_die("out of host memory for fibers");
        S.stacks = st;
    }
    if (smem > S.smem_cap) {
        free(S.smem);
        S.smem = aligned_alloc(16, (smem + 15) & ~(size_t)15);
        if (!S.smem) emu_die("out of host memory for shared memory");
        S.smem_cap = smem;
    }
}

/* outside run_block: getcontext returns twice for gcc's purposes, so no live
 * locals of the scheduling loop around it */
static void fiber_setup(unsigned i, dim3 grid, dim3 block, uint3 bid) {
    fiber *f = &S.fibers[i];
    f->state = F_READY;
    f->t.thread_idx.x = i % block.x;
    f->t.thread_idx.y = (i / block.x) % block.y;
    f->t.thread_idx.z = i / (block.x * block.y);
    f->t.block_idx = bid;
    f->t.block_dim = block;
    f->t.grid_dim = grid;
    f->t.lane = i % 32;
    f->t.warp = i / 32;
    f->t.gdc_waited = 0;
#ifndef EMU_UCONTEXT_ONLY
    if (f->started) return; /* a parked worker takes the new thread */
#endif
    if (getcontext(&f->uc) != 0) emu_die("getcontext failed");
    f->uc.uc_stack.ss_sp = S.stacks + (size_t)i * FIBER_STACK;
    f->uc.uc_stack.ss_size = FIBER_STACK;
    f->uc.uc_link = &S.sched;
    makecontext(&f->uc, fiber_main, 0);
}

/* scheduler -> fiber f, back when it yields or ends its thread */
static void resume(fiber *f) {
#ifdef EMU_UCONTEXT_ONLY
    if (swapcontext(&S.sched, &f->uc) != 0) emu_die("swapcontext failed");
#else
    if (_setjmp(S.sched_jb)) return;
    if (f->started) _longjmp(f->jb, 1);
    f->started = 1;
    setcontext(&f->uc);
    emu_die("setcontext failed");
#endif
}

static void read_order(void) {
    static int done;
    if (done) return;
    done = 1;
    const char *o = getenv("FT_EMU_ORDER"), *seed = getenv("FT_EMU_SEED");
    S.order = o && !strcmp(o, "reverse") ? 1 : (o && !strcmp(o, "random") ? 2 : 0);
    S.rng = seed ? strtoull(seed, NULL, 10) * 2654435761u + 1 : 88172645463325252ull;
}

/* the order of this round's visits: S.perm[0..nt) */
static void round_order(unsigned nt) {
    for (unsigned i = 0; i < nt; i++) S.perm[i] = S.order == 1 ? nt - 1 - i : i;
    if (S.order != 2) return;
    for (unsigned i = nt - 1; i > 0; i--) { /* Fisher-Yates with xorshift64 */
        S.rng ^= S.rng << 13;
        S.rng ^= S.rng >> 7;
        S.rng ^= S.rng << 17;
        unsigned j = (unsigned)(S.rng % (i + 1)), t = S.perm[i];
        S.perm[i] = S.perm[j];
        S.perm[j] = t;
    }
}

static void run_block(dim3 grid, dim3 block, uint3 bid, size_t smem) {
    unsigned nt = block.x * block.y * block.z;
    S.n = (int)nt;
    S.live = (int)nt;
    S.bar_arrived = 0;
    memset(S.warps, 0, sizeof S.warps);
    if (smem) memset(S.smem, 0xFF, smem);
    for (unsigned i = 0; i < nt; i++) fiber_setup(i, grid, block, bid);
    while (S.live > 0) {
        unsigned long before = S.progress;
        round_order(nt);
        for (unsigned i = 0; i < nt; i++) {
            fiber *f = &S.fibers[S.perm[i]];
            if (f->state == F_DONE) continue;
            S.cur = f;
            ft_emu_self = &f->t;
            resume(f);
        }
        if (S.live > 0 && S.progress == before)
            emu_die("a barrier or warp shuffle that not every thread reaches (a hang or "
                    "undefined behaviour on a GPU)");
    }
    ft_emu_self = NULL;
    S.cur = NULL;
}

/* one grid at a time: the fibers and barriers are process-wide */
static pthread_mutex_t grid_lock = PTHREAD_MUTEX_INITIALIZER;

void ft_emu_run_grid(dim3 grid, dim3 block, size_t dyn_smem, void (*thread_fn)(void *),
                     void *closure, const char *name, int pdl) {
    pthread_mutex_lock(&grid_lock);
    unsigned nt = block.x * block.y * block.z;
    if (nt == 0 || nt > MAX_THREADS) emu_die("bad block size (the launcher should have refused it)");
    ensure_init(dyn_smem);
    read_order();
    S.fn = thread_fn;
    S.closure = closure;
    S.name = name;
    S.pdl = pdl;
    S.no_gdc = ft_emu_ptx_arch() < 90;
    uint64_t nb = (uint64_t)grid.x * grid.y * grid.z;
    for (uint64_t i = 0; i < nb; i++) {
        uint64_t l = S.order ? nb - 1 - i : i; /* blocks must not depend on each other either */
        uint3 bid = {(unsigned)(l % grid.x), (unsigned)(l / grid.x % grid.y), (unsigned)(l / grid.x / grid.y)};
        run_block(grid, block, bid, dyn_smem);
    }
    S.name = NULL;
    pthread_mutex_unlock(&grid_lock);
}

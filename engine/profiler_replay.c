/*
 * profiler_replay.c - per-op attribution inside CUDA graph replays (see
 * replay_map.h for why the k-th device record of a replay is the k-th node
 * of the capture). The replay map itself is reference-counted here: a plan
 * that is evicted while a profiler still holds records of its replays must
 * not take the map with it.
 */
#include "profiler.h"

#include <stdlib.h>
#include <string.h>

ft_replay_map *ft_replay_map_new(int n_steps) {
    if (n_steps < 0) return NULL;
    ft_replay_map *m =
        (ft_replay_map *)calloc(1, sizeof *m + (size_t)n_steps * sizeof m->step[0]);
    if (!m) return NULL;
    m->refs = 1;
    m->n_steps = n_steps;
    return m;
}

/* Atomic: a plan and a profiler may in principle live on different threads. */
ft_replay_map *ft_replay_map_ref(ft_replay_map *m) {
    if (m) __atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED);
    return m;
}

void ft_replay_map_unref(ft_replay_map *m) {
    if (m && __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0) free(m);
}

typedef struct replay_rec {
    int64_t op;     /* the replay's op record */
    uint64_t start; /* device start: the execution order inside the chain */
    uint64_t end;
    size_t idx;     /* into recs */
} replay_rec;

static int cmp_replay_rec(const void *a, const void *b) {
    const replay_rec *x = (const replay_rec *)a, *y = (const replay_rec *)b;
    if (x->op != y->op) return (x->op > y->op) - (x->op < y->op);
    if (x->start != y->start) return (x->start > y->start) - (x->start < y->start);
    return (x->end > y->end) - (x->end < y->end);
}

static const ft_replay_map *map_of(const ft_prof_op *r, ft_replay_map *const *maps, int n_maps) {
    return r->replay > 0 && r->replay <= n_maps ? maps[r->replay - 1] : NULL;
}

int64_t ft_prof_attribute_replays(ft_gpu_rec *recs, size_t n, ft_prof_op *ops, int64_t n_ops,
                                  ft_replay_map *const *maps, int n_maps) {
    for (int64_t i = 0; i < n_ops; i++) ops[i].attributed = 0;
    if (!n) return 0;
    replay_rec *v = (replay_rec *)malloc(n * sizeof *v);
    if (!v) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        recs[i].step = -1;
        int64_t op = recs[i].op;
        if (recs[i].kind != FT_GPU_RUNTIME && op >= 0 && op < n_ops && map_of(&ops[op], maps, n_maps))
            v[m++] = (replay_rec){op, recs[i].start, recs[i].end, i};
    }
    qsort(v, m, sizeof *v, cmp_replay_rec);
    int64_t done = 0;
    for (size_t a = 0, b; a < m; a = b) {
        int timed = 1;
        for (b = a; b < m && v[b].op == v[a].op; b++)
            if (!v[b].start && !v[b].end) timed = 0;
        const ft_replay_map *map = map_of(&ops[v[a].op], maps, n_maps);
        /* a count that differs from the capture's (records dropped, a node kind
         * that leaves none) would shift every step after it: leave it whole */
        if (!timed || !map->usable || (int64_t)(b - a) != map->n_work) continue;
        int s = 0;
        for (size_t k = a; k < b; k++) {
            while (s < map->n_steps && map->step[s].end <= (int32_t)(k - a)) s++;
            if (s == map->n_steps) break; /* unreachable for a usable map */
            recs[v[k].idx].step = s;
        }
        ops[v[a].op].attributed = 1;
        done++;
    }
    free(v);
    return done;
}

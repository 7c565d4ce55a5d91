/*
 * replay_map.h - which plan step launched which node of a captured CUDA graph,
 * so the profiler can give each kernel of a replay back to its op.
 *
 * A replay has one correlation id for all its kernels, so CUPTI cannot link
 * them to ops the way it links eager launches. The executor captures a plan
 * from one stream, which makes the graph a chain: its nodes run one after
 * the other in capture order. Counting the nodes the capture holds after each
 * step therefore says that the replay's k-th device record (by start time)
 * belongs to the step whose range holds k. The map is built once per capture
 * (graph/executor.c), referenced by the profiler for as long as it keeps
 * records of the replay (engine/profiler.c), and checked against each
 * replay's record count before it is used (engine/profiler_replay.c).
 */
#ifndef FT_REPLAY_MAP_H
#define FT_REPLAY_MAP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_replay_step {
    int32_t end;     /* graph nodes captured by steps 0..i (cumulative) */
    int32_t node_id; /* the step's graph node id */
    int32_t op;      /* its ft_op */
} ft_replay_step;

typedef struct ft_replay_map {
    int refs;
    int n_steps;
    int32_t n_nodes; /* nodes in the captured graph */
    int32_t n_work;  /* of which leave a device record when replayed (kernel, memcpy, memset) */
    int usable;      /* 1 when every node is device work and the steps account for all of them */
    ft_replay_step step[]; /* [n_steps] */
} ft_replay_map;

/* A map for n_steps steps with one reference, zeroed; NULL when out of memory. */
ft_replay_map *ft_replay_map_new(int n_steps);
ft_replay_map *ft_replay_map_ref(ft_replay_map *m); /* NULL-safe */
void ft_replay_map_unref(ft_replay_map *m);        /* NULL-safe; frees at zero */

#ifdef __cplusplus
}
#endif

#endif /* FT_REPLAY_MAP_H */

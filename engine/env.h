/*
 * env.h - the environment variables the library reads (FT_*), as one table
 * (engine/env.c, documented in docs/architecture.md, "Environment switches").
 *
 * Each knob is parsed and range-checked like the option or API field it
 * mirrors: ft_ctx_create_ex validates every knob that is set and refuses to
 * create a context when one holds a bad value (inf, 1e12, -1, "yes", ""), so a
 * typo is an error at the first call instead of a silent default or a hang.
 * The places that use a knob read it through the getters below, never with
 * getenv, so the table stays the one list of them.
 */
#ifndef FT_ENV_H
#define FT_ENV_H

#include "ftengine.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ft_env_id {
    FT_ENV_SYNC_DEBUG = 0,
    FT_ENV_NVTX,
    FT_ENV_OP_HOST_COST_US,
    FT_ENV_STEP_HOST_COST_US,
    FT_ENV_CPU_PACK_CACHE_MB,
    FT_ENV_DISABLE_FUSION,
    FT_ENV_DISABLE_PASSES,
    FT_ENV_DISABLE_CUDA_GRAPHS,
    FT_ENV_GEMM_AUTOTUNE,
    FT_ENV_DISABLE_PDL,
    FT_ENV_ALLOW_TF32,
    FT_ENV_FAST_GELU,
    FT_ENV_ATTN_KERNEL,
    FT_ENV_CUPTI_SESSION,
    FT_ENV_CPU_WINOGRAD,
    FT_ENV_COUNT
} ft_env_id;

/* The variable's name ("FT_SYNC_DEBUG"); "?" out of range. */
const char *ft_env_name(ft_env_id id);
/* Checks every knob that is set. FT_OK, or FT_ERR_INVALID_ARG with one line in err
 * ("FT_OP_HOST_COST_US='inf': must be a number of microseconds in [0, 1e6]"). */
ft_status ft_env_check(char *err, size_t size);
/* A 0/1 switch: its value, or def when unset or invalid (a context refuses invalid). */
bool ft_env_flag(ft_env_id id, bool def);
/* A number knob: its value, or def when unset or invalid. */
double ft_env_num(ft_env_id id, double def);
/* A string knob (a choice, a list): the value when set and valid, else NULL. */
const char *ft_env_str(ft_env_id id);
/* The value as set, valid or not (NULL when unset), for a use site that checks it
 * again itself (FT_DISABLE_PASSES: graph/graph.c names an unknown pass). */
const char *ft_env_raw(ft_env_id id);

/* The graph passes FT_DISABLE_PASSES may name, space-separated (graph/graph.c). */
const char *ft_graph_pass_names(void);

#ifdef __cplusplus
}
#endif

#endif /* FT_ENV_H */

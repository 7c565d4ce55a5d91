/*
 * executor.c - graph and static mode: plans per input signature, built by
 * tracing the model's forward once, optimising the graph and planning its
 * memory, then run with nothing left to decide.
 *
 * A plan's steps are a flat array of {kernel, node} whose node pointers
 * already point into the plan's arena: a run does no shape inference, no
 * allocation and no table lookup. Graph mode walks the steps with the
 * dispatcher's hooks and counters (so the profiler sees each kernel); static
 * mode walks them bare on the CPU, and on CUDA replays them as one captured
 * CUDA Graph per input shape.
 */
#include "graph_api.h"
#include "graph.h"
#include "trace.h"
#include "../engine/nvtx.h"
#include "../engine/replay_map.h"
#include "../kernels/cpu/cpu_kernels.h"
#include "../kernels/cpu/nchwc.h"
#ifdef FT_WITH_CUDA
#include "../engine/cuda_backend.h"
#include "cuda_graph.h"
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct ft_plan_step {
    ft_kernel_fn fn;
    ft_tensor *node;
} ft_plan_step;

typedef struct ft_plan_input {
    char name[48];
    ft_dtype host_dtype;
    int ndim;
    int64_t shape[FT_MAX_DIMS];
    ft_tensor *t; /* the graph's input leaf (device dtype, data in the arena) */
} ft_plan_input;

typedef struct ft_plan {
    ft_plan_input in[FT_GRAPH_MAX_IN];
    int n_in;
    ft_graph *g;
    ft_plan_step *steps;
    ft_tensor **step_nodes; /* [n_steps] steps[i].node, for ft_model_plan_step */
    ft_nvtx_name *nvtx_steps; /* [n_steps] the steps' NVTX names, or NULL (NVTX off) */
    int n_steps;
    ft_block *arena;
    void *staging;        /* host buffer for inputs converted to the model dtype, or, when
                             packed, for all inputs as they lie in the arena */
    size_t staging_bytes;
    char *packed;         /* device: the inputs lie side by side from here (one upload), or NULL */
    size_t packed_bytes;
    ft_graph_stats stats;
    uint64_t last_used;
    bool is_static;
    ft_scratch_pool scratch; /* kernel scratch the captured graph keeps using */
#ifdef FT_WITH_CUDA
    ft_cuda_graph *cg;
    ft_replay_map *replay;  /* which step captured which node (NULL: not known) */
    ft_tensor launch_op;    /* the pseudo op hooks see for a replay; extra = replay */
#endif
} ft_plan;

typedef struct ft_graph_state {
    ft_const_cache consts; /* plan-time weights shared by all plans */
    ft_plan *plans[FT_GRAPH_CACHE_SIZE];
    int n_plans;
    uint64_t tick;
    uint64_t hits, misses, evictions;
    ft_plan *last;
} ft_graph_state;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static void plan_free(ft_plan *p) {
    if (!p) return;
#ifdef FT_WITH_CUDA
    ft_cuda_graph_free(p->cg);
    ft_replay_map_unref(p->replay);
#endif
    ft_scratch_pool_release(&p->scratch);
    for (int i = 0; p->step_nodes && i < p->n_steps; i++) ft_cpu_unpack(p->step_nodes[i]);
    ft_graph_destroy(p->g);
    if (p->arena) ft_block_unref(p->arena);
    free(p->steps);
    free(p->step_nodes);
    free(p->nvtx_steps);
    free(p->staging);
    free(p);
}

/* ---- input signature ---- */

static ft_dtype device_dtype(const ft_model *m, ft_dtype host) {
    return ft_dtype_is_float(host) ? m->dtype : host;
}

static bool plan_matches(const ft_plan *p, const ft_model *m) {
    if (p->n_in != m->n_in) return false;
    for (int i = 0; i < m->n_in; i++) {
        const ft_host_tensor *h = m->in[i].host;
        const ft_plan_input *pi = &p->in[i];
        if (strcmp(pi->name, m->in[i].name) || pi->host_dtype != h->dtype || pi->ndim != h->ndim)
            return false;
        for (int d = 0; d < h->ndim; d++)
            if (pi->shape[d] != h->shape[d]) return false;
    }
    return true;
}

/* ---- running ---- */

typedef struct run_args {
    ft_ctx *ctx;
    ft_plan *p;
    ft_replay_map *map; /* while capturing: filled step by step */
} run_args;

#ifdef FT_WITH_CUDA
/* Capturing: the graph's node count after step i closes that step's range. */
static void map_step(run_args *a, int i) {
    ft_replay_map *m = a->map;
    int64_t n = 0;
    if (!m->usable) return;
    if (ft_cuda_capture_node_count(a->ctx, &n) != 0 || n > INT32_MAX) {
        m->usable = 0;
        return;
    }
    m->step[i].end = (int32_t)n;
    m->step[i].node_id = a->p->steps[i].node->id;
    m->step[i].op = (int32_t)a->p->steps[i].node->op;
}
#endif

/* The bare walk: static mode's (and what a CUDA Graph captures). */
static ft_status run_bare(void *user) {
    run_args *a = (run_args *)user;
    ft_ctx *ctx = a->ctx;
    const ft_plan_step *s = a->p->steps;
    for (int i = 0, n = a->p->n_steps; i < n; i++) {
        ft_status st = (ft_status)s[i].fn(ctx, s[i].node);
#ifdef FT_WITH_CUDA
        if (a->map && st == FT_OK) map_step(a, i);
#endif
        if (st != FT_OK) {
            char d[256];
            if (ctx->status == FT_OK) ft_set_error(ctx, st, "kernel failed");
            ft_error_prefix(ctx, "plan step %d %s", i, ft_node_describe(s[i].node, d, sizeof d));
            return st;
        }
    }
    return FT_OK;
}

/* The emulated interpreter cost of one step (FT_STEP_HOST_COST_US): a busy wait,
 * as TorchScript's interpreter spends fetching a node, popping its inputs off the
 * stack and finding its kernel. Its own SELECT phase, so a profile charges it to
 * the host and not to LAUNCH (the CPU device's busy time), as eager's
 * FT_OP_HOST_COST_US is charged (engine/dispatch.c). */
static void step_cost(const ft_dispatch_hooks *h, const ft_tensor *node, double us) {
    if (h && h->phase_begin) h->phase_begin(h->user, FT_PHASE_SELECT, node);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) * 1e6 + (double)(t.tv_nsec - t0.tv_nsec) * 1e-3 < us);
    if (h && h->phase_end) h->phase_end(h->user, FT_PHASE_SELECT, node);
}

/* Graph mode's walk: hooks and counters, as the profiler expects of a launch;
 * with NVTX, one range per step named by what it runs (the NVTX hooks are quiet
 * meanwhile: the step range is the op range). */
static ft_status run_hooked(ft_ctx *ctx, ft_plan *p) {
    const ft_dispatch_hooks *h = ctx->hooks;
    const ft_nvtx_name *names = ctx->nvtx ? p->nvtx_steps : NULL;
    const double cost = ctx->extra_step_cost_us;
    ctx->nvtx_quiet = 1;
    for (int i = 0; i < p->n_steps; i++) {
        ft_tensor *node = p->steps[i].node;
        if (names) ft_nvtx_push(&names[i], FT_NVTX_STEP, i);
        if (h && h->op_begin) h->op_begin(h->user, node);
        if (cost > 0) step_cost(h, node, cost);
        if (h && h->phase_begin) h->phase_begin(h->user, FT_PHASE_LAUNCH, node);
        ft_status st = (ft_status)p->steps[i].fn(ctx, node);
#ifdef FT_WITH_CUDA
        if (st == FT_OK && ctx->device == FT_DEVICE_CUDA)
            st = ft_cuda_after_launch(ctx, ft_op_name(node->op));
#endif
        if (h && h->phase_end) h->phase_end(h->user, FT_PHASE_LAUNCH, node);
        ctx->counters[node->op].launches++;
        if (h && h->op_end) h->op_end(h->user, node, st);
        if (names) ft_nvtx_pop();
        if (st != FT_OK) {
            ctx->nvtx_quiet = 0;
            char d[256];
            if (ctx->status == FT_OK) ft_set_error(ctx, st, "kernel failed");
            ft_error_prefix(ctx, "plan step %d %s", i, ft_node_describe(node, d, sizeof d));
            return st;
        }
    }
    ctx->nvtx_quiet = 0;
    return FT_OK;
}

/* Packed inputs: each written (converted if need be) at its place in the
 * staging image of [packed, packed + packed_bytes), then one upload. */
static ft_status copy_inputs_packed(ft_model *m, ft_plan *p) {
    ft_ctx *ctx = m->ctx;
    for (int i = 0; i < p->n_in; i++) {
        const ft_host_tensor *h = m->in[i].host;
        ft_tensor *t = p->in[i].t;
        if (!t) continue;
        char *dst = (char *)p->staging + ((char *)t->data - p->packed);
        if (t->dtype == h->dtype) {
            memcpy(dst, h->data, ft_nbytes(t));
            continue;
        }
        ft_status st = ft_convert_host(t->dtype, dst, h->dtype, h->data, ft_numel(t));
        if (st != FT_OK)
            return ft_set_error(ctx, st, "input '%s': cannot convert %s to %s", h->name,
                                ft_dtype_name(h->dtype), ft_dtype_name(t->dtype));
    }
    return ft_copy_to_device(ctx, p->packed, p->staging, p->packed_bytes);
}

static ft_status copy_inputs(ft_model *m, ft_plan *p) {
    ft_ctx *ctx = m->ctx;
    if (p->packed) return copy_inputs_packed(m, p);
    for (int i = 0; i < p->n_in; i++) {
        const ft_host_tensor *h = m->in[i].host;
        ft_tensor *t = p->in[i].t;
        if (!t) continue;
        size_t bytes = ft_nbytes(t);
        const void *src = h->data;
        if (t->dtype != h->dtype) {
            ft_status st = ft_convert_host(t->dtype, p->staging, h->dtype, h->data, ft_numel(t));
            if (st != FT_OK)
                return ft_set_error(ctx, st, "input '%s': cannot convert %s to %s", h->name,
                                    ft_dtype_name(h->dtype), ft_dtype_name(t->dtype));
            src = p->staging;
        }
        ft_status st = ft_copy_to_device(ctx, t->data, src, bytes);
        if (st != FT_OK) return st;
    }
    return FT_OK;
}

/* On a device, inputs the planner laid side by side (graph/planner.c) go up
 * in one copy instead of one each: fewer copies before the forward's first
 * kernel. Only when their span holds nothing but them and alignment padding. */
static void pack_inputs(ft_ctx *ctx, ft_plan *p) {
    p->stats.input_uploads = 0;
    char *lo = NULL, *hi = NULL;
    size_t sum = 0;
    int n = 0;
    for (int i = 0; i < p->n_in; i++) {
        ft_tensor *t = p->in[i].t;
        if (!t || !t->data) continue;
        char *a = (char *)t->data, *b = a + ft_nbytes(t);
        if (!lo || a < lo) lo = a;
        if (!hi || b > hi) hi = b;
        sum += (ft_nbytes(t) + 255) & ~(size_t)255; /* the planner's alignment */
        n++;
    }
    p->stats.input_uploads = n;
    if (ctx->device == FT_DEVICE_CPU || n < 2 || (size_t)(hi - lo) > sum) return;
    p->packed = lo;
    p->packed_bytes = (size_t)(hi - lo);
    if (p->packed_bytes > p->staging_bytes) p->staging_bytes = p->packed_bytes;
    p->stats.input_uploads = 1;
}

static ft_status register_outputs(ft_model *m, ft_plan *p) {
    ft_ctx *ctx = m->ctx;
    for (int j = 0; j < p->g->n_out; j++) {
        ft_tensor *k = ft_tensor_keep(ctx, p->g->out[j].t);
        if (!k) return ctx->status;
        snprintf(k->name, sizeof k->name, "%s", p->g->out[j].name);
        k->flags &= ~(uint32_t)(FT_TF_OUTPUT | FT_GF_DEAD | FT_GF_FOLDED | FT_TF_WEIGHT);
        ft_status st = ft_model_add_output(m, p->g->out[j].name, k);
        if (st != FT_OK) {
            ft_tensor_free_persistent(k);
            return st;
        }
    }
    return FT_OK;
}

/* Static mode has no per-step hooks: with hooks installed (a profiler, NVTX)
 * the whole plan shows as one op, named by a pseudo node: this one, or a
 * captured plan's "graph_launch" (ft_plan.launch_op). */
static const ft_tensor static_plan_op = {.op = FT_OP_NONE, .id = -1, .name = "static_plan"};
#ifdef FT_WITH_CUDA
/* The run before a capture (plan building), as hooks see it. */
static const ft_tensor warmup_op = {.op = FT_OP_NONE, .id = -1, .name = "capture_warmup"};
#endif

/* Runs fn(arg) as one pseudo op `whole` to the hooks h (NULL: none). */
static ft_status as_one_op(const ft_dispatch_hooks *h, const ft_tensor *whole,
                           ft_status (*fn)(void *), void *arg) {
    if (h && h->op_begin) h->op_begin(h->user, whole);
    if (h && h->phase_begin) h->phase_begin(h->user, FT_PHASE_LAUNCH, whole);
    ft_status st = fn(arg);
    if (h && h->phase_end) h->phase_end(h->user, FT_PHASE_LAUNCH, whole);
    if (h && h->op_end) h->op_end(h->user, whole, st);
    return st;
}

#ifdef FT_WITH_CUDA
static ft_status run_graph(void *user) {
    run_args *a = (run_args *)user;
    return ft_cuda_graph_launch(a->ctx, a->p->cg);
}
#endif

static ft_status plan_run(ft_model *m, ft_plan *p) {
    ft_ctx *ctx = m->ctx;
    ft_status st = copy_inputs(m, p);
    if (st != FT_OK) return st;
    run_args a = {ctx, p, NULL};
    if (!p->is_static) {
        st = run_hooked(ctx, p);
    } else {
        if (ctx->nvtx) ft_nvtx_push_fixed(FT_NVTX_REPLAY_RANGE, p->n_steps);
#ifdef FT_WITH_CUDA
        if (p->cg) st = as_one_op(ctx->hooks, &p->launch_op, run_graph, &a);
        else
#endif
            st = as_one_op(ctx->hooks, &static_plan_op, run_bare, &a);
        if (ctx->nvtx) ft_nvtx_pop();
    }
    if (st != FT_OK) return st;
    return register_outputs(m, p);
}

/* ---- building ---- */

static ft_graph_state *state_of(ft_model *m);

ft_status ft_graph_trace_model(ft_model *m, ft_graph **out) {
    ft_ctx *ctx = m->ctx;
    int64_t mark = ft_arena_mark(ctx);
    ft_trace tr;
    memset(&tr, 0, sizeof tr);
    int saved_n_out = m->n_out;
    m->n_out = 0;
    ft_status st = ft_trace_begin(ctx, &tr);
    if (st == FT_OK) {
        for (int i = 0; i < m->n_in && st == FT_OK; i++) {
            const ft_host_tensor *h = m->in[i].host;
            m->in[i].t = ft_trace_input(ctx, m->in[i].name, device_dtype(m, h->dtype), h->ndim,
                                        h->shape);
            if (!m->in[i].t) st = ctx->status;
        }
        if (st == FT_OK) st = m->arch->forward(m, ctx);
        if (st == FT_OK) st = ctx->status;
        ft_trace_end(ctx, &tr);
    }
    ft_graph_io outs[FT_GRAPH_MAX_OUT];
    int n_out = 0;
    if (st == FT_OK && m->n_out > FT_GRAPH_MAX_OUT)
        st = ft_set_error(ctx, FT_ERR_UNSUPPORTED, "graph mode: %d outputs (at most %d)", m->n_out,
                          FT_GRAPH_MAX_OUT);
    for (int j = 0; st == FT_OK && j < m->n_out; j++) {
        snprintf(outs[j].name, sizeof outs[j].name, "%s", m->out[j].name);
        outs[j].t = m->out[j].t;
        n_out++;
    }
    if (st == FT_OK && n_out == 0)
        st = ft_set_error(ctx, FT_ERR_INTERNAL, "graph mode: the forward registered no output");
    /* the traced outputs are arena nodes: never let them reach the caller */
    m->n_out = saved_n_out;
    if (st == FT_OK) st = ft_graph_from_trace(ctx, &tr, outs, n_out, out);
    if (st == FT_OK && m->graph) (*out)->cache = &state_of(m)->consts;
    ft_trace_free(&tr);
    ft_arena_release_to(ctx, mark);
    for (int i = 0; i < m->n_in; i++) m->in[i].t = NULL;
    return st;
}

/* Whether a constant of the model's cache holds block b (counted there, not twice). */
static bool in_cache(const ft_const_cache *c, const ft_block *b) {
    for (int i = 0; c && i < c->n; i++)
        if (c->e[i].t->block == b) return true;
    return false;
}

/* Uploads the constants the forward made from host data. */
static ft_status upload_constants(ft_graph *g, size_t *bytes) {
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *t = g->nodes[i];
        if (t->op != FT_OP_NONE || !(t->flags & FT_TF_CONST) || !t->extra || t->data) continue;
        if (ft_tensor_alloc_storage(g->ctx, t) != FT_OK) return g->ctx->status;
        ft_status st = ft_copy_to_device(g->ctx, t->data, t->extra, ft_nbytes(t));
        if (st != FT_OK) return st;
        *bytes += ft_nbytes(t);
    }
    return FT_OK;
}

static ft_status resolve_steps(ft_ctx *ctx, ft_plan *p, bool need_capture) {
    ft_graph *g = p->g;
    size_t cap = (size_t)(g->n_nodes ? g->n_nodes : 1);
    p->steps = (ft_plan_step *)calloc(cap, sizeof *p->steps);
    p->step_nodes = (ft_tensor **)calloc(cap, sizeof *p->step_nodes);
    if (!p->steps || !p->step_nodes) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *n = g->nodes[i];
        if (n->op == FT_OP_NONE || n->op == FT_OP_VIEW) continue;
        char d[256];
        ft_kernel_fn fn = ft_select_kernel(ctx, n);
        if (!fn)
            return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "plan: no %s kernel for op %s",
                                ft_device_name(ctx->device), ft_node_describe(n, d, sizeof d));
        if (need_capture && !(ft_op_table[n->op].flags & FT_OPF_CAPTURABLE))
            return ft_set_error(ctx, FT_ERR_CAPTURE,
                                "static mode: op %s cannot be captured in a CUDA graph "
                                "(set FT_DISABLE_CUDA_GRAPHS=1 or use graph mode)",
                                ft_node_describe(n, d, sizeof d));
        /* CPU: linear and convolution weights packed once here, in the GEMM's panel layout,
         * one copy per weight however many steps run it */
        if (ctx->device == FT_DEVICE_CPU) ft_cpu_prepack_shared(ctx, n, p->step_nodes, p->n_steps);
        p->steps[p->n_steps].fn = fn;
        p->steps[p->n_steps].node = n;
        p->step_nodes[p->n_steps] = n;
        p->n_steps++;
    }
    return FT_OK;
}

/* The steps' NVTX names, "linear+bias+gelu": the op and what was fused into it
 * (the detail of ft_model_plan_step), registered once per distinct name. Out of
 * host memory the steps simply have no ranges. */
static void name_steps(ft_plan *p) {
    p->nvtx_steps = (ft_nvtx_name *)calloc((size_t)(p->n_steps ? p->n_steps : 1), sizeof *p->nvtx_steps);
    for (int i = 0; p->nvtx_steps && i < p->n_steps; i++) {
        char d[sizeof(((ft_plan_step_info *)0)->detail)], name[sizeof d + 32];
        const ft_tensor *t = p->steps[i].node;
        ft_plan_step_detail(t, d, sizeof d);
        snprintf(name, sizeof name, "%s%s%s", ft_op_name(t->op), d[0] ? "+" : "", d);
        p->nvtx_steps[i] = ft_nvtx_name_of(name);
    }
}

#ifdef FT_WITH_CUDA
/* The plan takes the map filled during its capture (which may be NULL) and the
 * pseudo op that hands it to the profiler at each replay. */
static void finish_replay_map(ft_plan *p, ft_replay_map *map) {
    int64_t all = -1, work = -1;
    ft_cuda_graph_node_counts(p->cg, &all, &work);
    p->stats.graph_nodes = (int)all;
    if (map) {
        map->n_nodes = (int32_t)all;
        map->n_work = (int32_t)work;
        int32_t last = p->n_steps ? map->step[p->n_steps - 1].end : 0;
        /* ordinal attribution needs every node to leave a record, and the
         * steps to account for every node */
        map->usable = map->usable && all >= 0 && all == work && last == all;
    }
    p->replay = map;
    p->launch_op = (ft_tensor){.op = FT_OP_NONE, .id = -1, .name = "graph_launch"};
    if (map) {
        p->launch_op.flags = FT_TF_REPLAY;
        p->launch_op.extra = map;
    }
}
#endif

static ft_status plan_build(ft_model *m, ft_plan **out) {
    ft_ctx *ctx = m->ctx;
    *out = NULL;
    ft_plan *p = (ft_plan *)calloc(1, sizeof *p);
    if (!p) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    p->is_static = m->opt.mode == FT_MODE_STATIC;
    p->n_in = m->n_in;
    for (int i = 0; i < m->n_in; i++) {
        const ft_host_tensor *h = m->in[i].host;
        snprintf(p->in[i].name, sizeof p->in[i].name, "%s", m->in[i].name);
        p->in[i].host_dtype = h->dtype;
        p->in[i].ndim = h->ndim;
        for (int d = 0; d < h->ndim; d++) p->in[i].shape[d] = h->shape[d];
    }
    ft_graph_stats *s = &p->stats;
    /* NVTX: trace, passes and plan, each its own range under the forward's */
    double t0 = now_ms();
    if (ctx->nvtx) ft_nvtx_push_fixed(FT_NVTX_TRACE, -1);
    ft_status st = ft_graph_trace_model(m, &p->g);
    if (ctx->nvtx) ft_nvtx_pop();
    double t1 = now_ms();
    if (st == FT_OK) {
        s->traced_kernels = ft_graph_kernel_count(p->g);
        if (ctx->nvtx) ft_nvtx_push_fixed(FT_NVTX_PASSES, -1);
        st = ft_graph_optimize(p->g);
        if (ctx->nvtx) ft_nvtx_pop();
    }
    double t2 = now_ms();
    if (ctx->nvtx) ft_nvtx_push_fixed(FT_NVTX_PLAN, -1);
    ft_mem_plan mp;
    memset(&mp, 0, sizeof mp);
    size_t *offs = NULL;
    if (st == FT_OK) {
        offs = (size_t *)malloc((size_t)(p->g->n_nodes ? p->g->n_nodes : 1) * sizeof *offs);
        st = offs ? ft_plan_memory(p->g, &mp, offs)
                  : ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    }
    if (st == FT_OK) {
        p->arena = ft_allocator_alloc(&ctx->alloc, ctx, mp.arena_bytes ? mp.arena_bytes : 1);
        if (!p->arena) st = ctx->status;
    }
    size_t const_bytes = 0;
    for (int i = 0; st == FT_OK && i < p->g->n_owned; i++)
        if (p->g->owned[i]->block && !in_cache(p->g->cache, p->g->owned[i]->block))
            const_bytes += ft_nbytes(p->g->owned[i]);
    /* constants first: binding gives views their pointers, views of constants too */
    if (st == FT_OK) st = upload_constants(p->g, &const_bytes);
    if (st == FT_OK) ft_plan_bind_memory(p->g, offs, p->arena->ptr);
    free(offs);
    /* stacked and folded weights shared by the model's plans; a stack the loader
     * packed (ft_weights_pack) is the weights' own memory and costs nothing extra */
    size_t shared_bytes = 0;
    for (int i = 0; st == FT_OK && p->g->cache && i < p->g->cache->n; i++) {
        const ft_const_entry *e = &p->g->cache->e[i];
        if (e->kind != FT_CONST_STACK || e->t->data != e->parts[0]) /* stacks are keyed by memory */
            shared_bytes += ft_nbytes(e->t);
    }
    for (int i = 0; st == FT_OK && i < p->n_in; i++) {
        for (int k = 0; k < p->g->n_in; k++)
            if (!strcmp(p->g->in[k].name, p->in[i].name)) p->in[i].t = p->g->in[k].t;
        if (p->in[i].t && ft_nbytes(p->in[i].t) > p->staging_bytes)
            p->staging_bytes = ft_nbytes(p->in[i].t);
    }
    if (st == FT_OK) pack_inputs(ctx, p);
    if (st == FT_OK && p->staging_bytes) {
        p->staging = calloc(1, p->staging_bytes); /* zeroed: the packed image's padding too */
        if (!p->staging) st = ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    }
    bool capture = false;
#ifdef FT_WITH_CUDA
    capture = p->is_static && ctx->device == FT_DEVICE_CUDA && !ft_env_flag(FT_ENV_DISABLE_CUDA_GRAPHS, false);
#endif
    if (st == FT_OK) st = resolve_steps(ctx, p, capture);
    double t3 = now_ms(); /* naming the steps is NVTX's cost, not planning's */
    if (st == FT_OK && ctx->nvtx && !p->is_static) name_steps(p);
    if (ctx->nvtx) ft_nvtx_pop();
    if (st == FT_OK) {
        s->valid = 1;
        s->kernels_per_forward = p->n_steps;
        s->arena_bytes = mp.arena_bytes;
        s->sum_intermediate_bytes = mp.sum_bytes;
        s->peak_live_bytes = mp.lower_bound;
        s->residual_in_place = mp.n_in_place;
        s->winograd_convs = 0;
        for (int i = 0; i < p->n_steps; i++) s->winograd_convs += ft_cpu_nchwc_conv_is_wino(p->step_nodes[i]);
        s->const_bytes = const_bytes;
        s->shared_const_bytes = shared_bytes;
        s->trace_ms = t1 - t0;
        s->passes_ms = t2 - t1;
        s->plan_ms = t3 - t2;
        const ft_pass_counts *pc = &p->g->passes;
        s->dce_removed = pc->dce;
        s->folded = pc->folded;
        s->qkv_merged = pc->qkv;
        s->epilogues = pc->epilogue;
        s->ln_residual = pc->ln_residual;
        s->attention_fused = pc->attention;
        s->eltwise_fused = pc->eltwise;
        s->nonorm_folded = pc->nonorm;
        s->conv_bn_folded = pc->conv_bn;
        s->affine_folded = pc->affine;
        s->nchwc_nodes = pc->nchwc;
        s->nchwc_reorders = pc->nchwc_reorders;
    }
#ifdef FT_WITH_CUDA
    if (st == FT_OK && capture) {
        /* the warm-up run makes every lazy allocation (library workspaces, GEMM
         * algorithm caches, scratch blocks) before capture, where none may happen */
        run_args a = {ctx, p, NULL};
        ctx->scratch_pool = &p->scratch;
        st = copy_inputs(m, p);
        /* a profiler sees the warm-up as one pseudo op, so its kernels are linked */
        if (ctx->nvtx) ft_nvtx_push_fixed(FT_NVTX_WARMUP, p->n_steps);
        if (st == FT_OK) st = as_one_op(ctx->hooks, &warmup_op, run_bare, &a);
        if (st == FT_OK) st = ft_cuda_sync(ctx);
        if (ctx->nvtx) ft_nvtx_pop();
        /* made before the capture, where nothing may be allocated; without it
         * (out of host memory) replays are only profiled whole */
        if (st == FT_OK && (a.map = ft_replay_map_new(p->n_steps))) a.map->usable = 1;
        if (st == FT_OK)
            st = ft_cuda_graph_capture(ctx, run_bare, &a, &p->cg, &s->capture_ms,
                                       &s->instantiate_ms);
        ctx->scratch_pool = NULL;
        if (st == FT_OK) {
            s->captured = 1;
            s->graph_launches = 1;
            s->scratch_bytes = p->scratch.bytes;
            finish_replay_map(p, a.map);
        } else {
            ft_replay_map_unref(a.map);
        }
    }
#endif
    if (st != FT_OK) {
        plan_free(p);
        return st;
    }
    *out = p;
    return FT_OK;
}

/* ---- the cache ---- */

static ft_graph_state *state_of(ft_model *m) {
    if (!m->graph) m->graph = calloc(1, sizeof(ft_graph_state));
    return (ft_graph_state *)m->graph;
}

ft_status ft_graph_forward(ft_model *m) {
    if (!m) return FT_ERR_INVALID_ARG;
    ft_ctx *ctx = m->ctx;
    if (ctx->status != FT_OK) return ctx->status;
    if (m->opt.mode != FT_MODE_GRAPH && m->opt.mode != FT_MODE_STATIC)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "ft_graph_forward in mode %s",
                            ft_mode_name(m->opt.mode));
    ft_graph_state *gs = state_of(m);
    if (!gs) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    ft_plan *p = NULL;
    for (int i = 0; i < gs->n_plans; i++)
        if (plan_matches(gs->plans[i], m)) p = gs->plans[i];
    if (p) {
        gs->hits++;
    } else {
        gs->misses++;
        ft_status st = plan_build(m, &p);
        if (st != FT_OK) return st;
        if (gs->n_plans == FT_GRAPH_CACHE_SIZE) {
            int lru = 0;
            for (int i = 1; i < gs->n_plans; i++)
                if (gs->plans[i]->last_used < gs->plans[lru]->last_used) lru = i;
            if (gs->last == gs->plans[lru]) gs->last = NULL;
            plan_free(gs->plans[lru]);
            gs->plans[lru] = gs->plans[--gs->n_plans];
            gs->evictions++;
        }
        gs->plans[gs->n_plans++] = p;
    }
    p->last_used = ++gs->tick;
    gs->last = p;
    return plan_run(m, p);
}

void ft_graph_free(ft_model *m) {
    if (!m || !m->graph) return;
    ft_graph_state *gs = (ft_graph_state *)m->graph;
    for (int i = 0; i < gs->n_plans; i++) plan_free(gs->plans[i]);
    ft_const_cache_free(&gs->consts);
    free(gs);
    m->graph = NULL;
}

ft_status ft_model_graph_stats(const ft_model *m, ft_graph_stats *out) {
    if (!m) return FT_ERR_INVALID_ARG;
    if (!out) return ft_api_null(m->ctx, __func__, "out");
    memset(out, 0, sizeof *out);
    ft_status st = ft_ctx_enter(m->ctx, __func__); /* not while another thread's forward plans */
    if (st != FT_OK) return st;
    const ft_graph_state *gs = (const ft_graph_state *)m->graph;
    if (gs && gs->last) *out = gs->last->stats;
    if (gs) {
        out->plans_cached = gs->n_plans;
        out->plan_hits = gs->hits;
        out->plan_misses = gs->misses;
        out->plan_evictions = gs->evictions;
    }
    ft_ctx_leave(m->ctx);
    return FT_OK;
}

bool ft_graph_last_plan(const ft_model *m, ft_plan_view *v) {
    memset(v, 0, sizeof *v);
    const ft_graph_state *gs = m ? (const ft_graph_state *)m->graph : NULL;
    const ft_plan *p = gs ? gs->last : NULL;
    if (!p) return false;
    v->g = p->g;
    v->nodes = p->step_nodes;
    v->n_steps = p->n_steps;
    v->arena = p->arena ? (const char *)p->arena->ptr : NULL;
    v->captured = p->stats.captured;
#ifdef FT_WITH_CUDA
    v->map = p->replay;
#endif
    return true;
}

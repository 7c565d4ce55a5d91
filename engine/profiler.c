/*
 * profiler.c - the instrumentation layer: dispatcher hooks that time every op
 * call and its phases inside a measured window, the CUPTI join (device work ->
 * op), and the window's overhead metrics (docs/instrumentation.md has the
 * formulas). The writers (Chrome trace, CSV) are in profiler_trace.c.
 *
 * Hot-path rules: the hooks read the clock, store into pre-allocated records
 * and return; no allocation, no formatting, no lock. Shapes and names are
 * turned into text only when results are read. Hooks are installed by
 * ft_profiler_start and removed by ft_profiler_stop, so an idle profiler
 * costs the dispatcher nothing.
 */
#include "profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

_Static_assert(FT_PROFILE_PHASES == FT_PHASE_COUNT, "public and internal phase lists differ");
_Static_assert(FT_PROFILE_CHECK == (int)FT_PHASE_CHECK && FT_PROFILE_INFER == (int)FT_PHASE_INFER &&
                   FT_PROFILE_ALLOC == (int)FT_PHASE_ALLOC &&
                   FT_PROFILE_SELECT == (int)FT_PHASE_SELECT &&
                   FT_PROFILE_LAUNCH == (int)FT_PHASE_LAUNCH,
               "public and internal phase order differ");

#define DEFAULT_MAX_OPS 65536
#define DEFAULT_MAX_GPU 262144

const char *ft_profile_phase_name(int phase) {
    static const char *const names[FT_PROFILE_PHASES] = {"check", "infer", "alloc", "select",
                                                         "launch"};
    return phase >= 0 && phase < FT_PROFILE_PHASES ? names[phase] : "?";
}

const char *ft_prof_op_name(const ft_prof_op *r) {
    return r->op < 0 ? r->label : ft_op_name((ft_op)r->op);
}

ft_profiler_options ft_profiler_options_default(void) {
    ft_profiler_options o;
    memset(&o, 0, sizeof o);
    o.max_ops = DEFAULT_MAX_OPS;
    o.max_gpu_records = DEFAULT_MAX_GPU;
    o.cupti = 1;
    return o;
}

/* ------------------------------------------------------------------------- */
/* Hooks                                                                      */
/* ------------------------------------------------------------------------- */

/* The record of the innermost op in flight, or NULL (dropped or too deep). */
static ft_prof_op *current(ft_profiler *p) {
    if (p->depth <= 0 || p->depth > FT_PROF_MAX_DEPTH) return NULL;
    int64_t i = p->stack[p->depth - 1];
    return i >= 0 ? &p->ops[i] : NULL;
}

/* Chained hooks run outside our timestamps (before a begin, after an end), so
 * an NVTX range encloses the interval we measure instead of inflating it. */
static void hook_op_begin(void *user, const ft_tensor *node) {
    ft_profiler *p = (ft_profiler *)user;
    if (p->prev && p->prev->op_begin) p->prev->op_begin(p->prev->user, node);
    int64_t idx = -1;
    if (p->n_ops < p->cap_ops) {
        idx = p->n_ops++;
        ft_prof_op *r = &p->ops[idx];
        memset(r, 0, sizeof *r);
        r->node_id = -1;
    } else {
        p->ops_dropped++;
    }
    if (p->depth < FT_PROF_MAX_DEPTH) p->stack[p->depth] = idx;
    p->depth++;
    if (idx >= 0) p->ops[idx].begin = ft_prof_now_ns();
}

static void hook_phase_begin(void *user, ft_phase ph, const ft_tensor *node) {
    ft_profiler *p = (ft_profiler *)user;
    if (p->prev && p->prev->phase_begin) p->prev->phase_begin(p->prev->user, ph, node);
    ft_prof_op *r = current(p);
    if (!r || (unsigned)ph >= FT_PHASE_COUNT) return;
    /* device work launched from here to phase_end is tagged with this record */
    if (ph == FT_PHASE_LAUNCH && p->cupti_window && !r->pushed) {
        if (ft_cupti_push(r - p->ops) == 0) r->pushed = 1;
        else p->corr_errors++;
    }
    r->ph[ph][0] = ft_prof_now_ns();
}

static void pop_correlation(ft_profiler *p, ft_prof_op *r) {
    if (!r->pushed) return;
    r->pushed = 0;
    if (ft_cupti_pop() != 0) p->corr_errors++;
}

static void hook_phase_end(void *user, ft_phase ph, const ft_tensor *node) {
    ft_profiler *p = (ft_profiler *)user;
    uint64_t t = ft_prof_now_ns();
    ft_prof_op *r = current(p);
    if (r && (unsigned)ph < FT_PHASE_COUNT) {
        r->ph[ph][1] = t;
        if (ph == FT_PHASE_LAUNCH) pop_correlation(p, r);
    }
    if (p->prev && p->prev->phase_end) p->prev->phase_end(p->prev->user, ph, node);
}

/* A CUDA graph replay: its record keeps the map of the plan it replayed (a
 * reference, so an evicted plan cannot free it under the records). Plans
 * repeat, so the search is short and nothing is allocated after the first. */
static void keep_replay_map(ft_profiler *p, ft_prof_op *r, ft_replay_map *map) {
    p->graph_replays++;
    if (!map) return;
    int i = 0;
    while (i < p->n_replays && p->replays[i] != map) i++;
    if (i == p->n_replays) {
        if (i == FT_PROF_MAX_REPLAY_MAPS) return; /* left unattributed */
        p->replays[p->n_replays++] = ft_replay_map_ref(map);
    }
    r->replay = (int16_t)(i + 1);
}

static void drop_replay_maps(ft_profiler *p) {
    for (int i = 0; i < p->n_replays; i++) ft_replay_map_unref(p->replays[i]);
    p->n_replays = 0;
    p->graph_replays = 0;
}

static void hook_op_end(void *user, const ft_tensor *node, ft_status st) {
    ft_profiler *p = (ft_profiler *)user;
    uint64_t t = ft_prof_now_ns();
    ft_prof_op *r = current(p);
    if (r) {
        r->end = t;
        r->status = (int32_t)st;
        /* a failed phase never reached phase_end: close it at the op's end */
        for (int k = 0; k < FT_PHASE_COUNT; k++)
            if (r->ph[k][0] && !r->ph[k][1]) r->ph[k][1] = t;
        pop_correlation(p, r);
        if (node) {
            r->node_id = node->id;
            r->op = (int16_t)node->op;
            r->dtype = (int8_t)node->dtype;
            r->ndim = (int8_t)(node->ndim > 0 && node->ndim <= FT_MAX_DIMS ? node->ndim : 0);
            for (int d = 0; d < r->ndim; d++) r->ne[d] = node->ne[d];
            /* a pseudo op (the executor's whole-plan launch) names itself */
            if (node->op == FT_OP_NONE && node->name[0]) {
                r->op = -1;
                r->ndim = 0;
                size_t n = strnlen(node->name, sizeof r->label - 1);
                memcpy(r->label, node->name, n);
                r->label[n] = 0;
                if (node->flags & FT_TF_REPLAY) keep_replay_map(p, r, (ft_replay_map *)node->extra);
            }
        }
    }
    if (p->depth > 0) p->depth--;
    if (p->prev && p->prev->op_end) p->prev->op_end(p->prev->user, node, st);
}

/* ------------------------------------------------------------------------- */
/* Life cycle                                                                 */
/* ------------------------------------------------------------------------- */

ft_status ft_profiler_create(ft_ctx *ctx, const ft_profiler_options *opt, ft_profiler **out) {
    if (!out) return ctx ? ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_profiler_create: out is NULL")
                         : FT_ERR_INVALID_ARG;
    *out = NULL;
    if (!ctx) return FT_ERR_INVALID_ARG;
    if (ctx->profiler)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_profiler_create: the context already has a profiler");
    ft_profiler_options o = opt ? *opt : ft_profiler_options_default();
    if (o.max_ops < 0 || o.max_gpu_records < 0)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_profiler_create: max_ops %lld and max_gpu_records %lld "
                            "must not be negative (0 takes the default)", (long long)o.max_ops,
                            (long long)o.max_gpu_records);
    if (o.max_ops <= 0) o.max_ops = DEFAULT_MAX_OPS;
    if (o.max_gpu_records <= 0) o.max_gpu_records = DEFAULT_MAX_GPU;
    ft_profiler *p = (ft_profiler *)calloc(1, sizeof *p);
    if (!p) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory for the profiler");
    p->ctx = ctx;
    p->opt = o;
    p->cap_ops = o.max_ops;
    p->ops = (ft_prof_op *)calloc((size_t)p->cap_ops, sizeof *p->ops);
    if (!p->ops) {
        free(p);
        return ft_set_error(ctx, FT_ERR_OOM, "out of host memory for %lld profiler records",
                            (long long)o.max_ops);
    }
    p->hooks.op_begin = hook_op_begin;
    p->hooks.phase_begin = hook_phase_begin;
    p->hooks.phase_end = hook_phase_end;
    p->hooks.op_end = hook_op_end;
    p->hooks.user = p;
    if (ctx->device == FT_DEVICE_CUDA && o.cupti) {
        ft_status st = ft_cupti_acquire((size_t)o.max_gpu_records, p->cupti_note, sizeof p->cupti_note);
        if (st == FT_OK) {
            p->gpu = (ft_gpu_rec *)malloc((size_t)o.max_gpu_records * sizeof *p->gpu);
            if (!p->gpu) snprintf(p->cupti_note, sizeof p->cupti_note, "out of host memory for CUPTI records");
            else p->cap_gpu = (size_t)o.max_gpu_records;
            p->cupti_ok = p->gpu != NULL;
        }
        /* otherwise CUPTI is off for this profiler, the note says why; host timers stay */
    } else if (ctx->device == FT_DEVICE_CUDA) {
        snprintf(p->cupti_note, sizeof p->cupti_note, "CUPTI not requested");
    }
    ctx->profiler = p;
    *out = p;
    return FT_OK;
}

/* Takes the hooks out and ends a CUPTI window; leaves the results alone. */
static void close_window(ft_profiler *p, char *msg, size_t msg_size, ft_status *cupti_st) {
    ft_ctx *ctx = p->ctx;
    if (ctx->hooks == &p->hooks) ctx->hooks = p->prev;
    p->prev = NULL;
    p->open = 0;
    p->depth = 0;
    *cupti_st = p->cupti_window ? ft_cupti_window_end(msg, msg_size) : FT_OK;
}

void ft_profiler_free(ft_profiler *p) {
    if (!p) return;
    if (p->open) {
        char msg[8];
        ft_status st;
        close_window(p, msg, sizeof msg, &st);
        (void)st;
    }
    if (p->ctx && p->ctx->profiler == p) p->ctx->profiler = NULL;
    drop_replay_maps(p);
    free(p->ops);
    free(p->gpu);
    free(p);
}

static ft_status profiler_start(ft_profiler *p);
static ft_status profiler_stop(ft_profiler *p);

/* start and stop change the context's dispatch hooks: never under another thread */
ft_status ft_profiler_start(ft_profiler *p) {
    if (!p) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(p->ctx, __func__);
    if (st != FT_OK) return st;
    st = profiler_start(p);
    ft_ctx_leave(p->ctx);
    return st;
}

ft_status ft_profiler_stop(ft_profiler *p) {
    if (!p) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(p->ctx, __func__);
    if (st != FT_OK) return st;
    st = profiler_stop(p);
    ft_ctx_leave(p->ctx);
    return st;
}

static ft_status profiler_start(ft_profiler *p) {
    ft_ctx *ctx = p->ctx;
    if (p->open) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_profiler_start: a window is already open");
    /* the window starts with the device idle, so nothing earlier is counted */
    ft_status st = ft_ctx_sync(ctx);
    if (st != FT_OK) return st;
    p->cupti_window = 0;
    if (p->cupti_ok) {
        char msg[sizeof p->cupti_note];
        st = ft_cupti_window_begin(msg, sizeof msg);
        if (st == FT_ERR_INVALID_ARG) return ft_set_error(ctx, st, "ft_profiler_start: %s", msg);
        if (st != FT_OK) snprintf(p->cupti_note, sizeof p->cupti_note, "%s", msg);
        p->cupti_window = st == FT_OK;
    }
    memset(&p->sum, 0, sizeof p->sum);
    p->n_ops = 0;
    p->ops_dropped = 0;
    p->corr_errors = 0;
    p->n_gpu = 0;
    p->gpu_dropped = 0;
    p->n_names = 0;
    p->depth = 0;
    drop_replay_maps(p);
    p->tid = (long)syscall(SYS_gettid);
    p->prev = ctx->hooks;
    ctx->hooks = &p->hooks;
    p->open = 1;
    p->t0 = ft_prof_now_ns();
    return FT_OK;
}

/* ------------------------------------------------------------------------- */
/* Metrics                                                                    */
/* ------------------------------------------------------------------------- */

typedef struct span {
    uint64_t s, e;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = (const span *)a, *y = (const span *)b;
    if (x->s != y->s) return (x->s > y->s) - (x->s < y->s);
    return (x->e > y->e) - (x->e < y->e);
}

static double us(uint64_t ns) { return (double)ns * 1e-3; }

static int is_device_work(const ft_gpu_rec *g) { return g->kind != FT_GPU_RUNTIME; }

/* Busy time and gaps from intervals already clipped to the window. */
static void busy_and_gaps(ft_profiler *p, span *v, size_t n) {
    ft_profile_summary *s = &p->sum;
    uint64_t sum = 0, busy = 0, internal = 0, largest = 0;
    int64_t gaps = 0;
    for (size_t i = 0; i < n; i++) sum += v[i].e - v[i].s;
    qsort(v, n, sizeof *v, cmp_span);
    uint64_t first = n ? v[0].s : 0, last = 0;
    size_t i = 0;
    while (i < n) {
        /* merge every interval that starts before the current union ends */
        uint64_t a = v[i].s, b = v[i].e;
        for (i++; i < n && v[i].s <= b; i++)
            if (v[i].e > b) b = v[i].e;
        if (a != first) { /* not the first union piece: the idle time before it is a gap */
            uint64_t gap = a - last;
            internal += gap;
            if (gap > largest) largest = gap;
            gaps++;
        }
        busy += b - a;
        last = b;
    }
    s->busy_us = us(busy);
    s->busy_sum_us = us(sum);
    s->gap_count = gaps;
    s->gap_internal_us = us(internal);
    s->gap_max_us = us(largest);
    if (n) {
        s->gap_leading_us = us(first - p->t0);
        s->gap_trailing_us = us(p->t1 - last);
    } else {
        s->gap_leading_us = us(p->t1 - p->t0);
    }
    s->overhead_us = s->wall_us - s->busy_us;
    s->utilization = s->wall_us > 0 ? s->busy_us / s->wall_us : 0;
}

static int clip(const ft_profiler *p, uint64_t a, uint64_t b, span *out) {
    if (a < p->t0) a = p->t0;
    if (b > p->t1) b = p->t1;
    if (b <= a) return 0;
    out->s = a;
    out->e = b;
    return 1;
}

typedef struct corr_key {
    uint32_t corr;
    uint64_t t;  /* device start (device work) or index (runtime) */
} corr_key;

static int cmp_corr(const void *a, const void *b) {
    const corr_key *x = (const corr_key *)a, *y = (const corr_key *)b;
    if (x->corr != y->corr) return (x->corr > y->corr) - (x->corr < y->corr);
    return (x->t > y->t) - (x->t < y->t);
}

/* Launch call -> first device work of that call: latency, queue, API time. */
static ft_status launch_stats(ft_profiler *p) {
    ft_profile_summary *s = &p->sum;
    corr_key *dev = (corr_key *)malloc((p->n_gpu ? p->n_gpu : 1) * sizeof *dev);
    corr_key *api = (corr_key *)malloc((p->n_gpu ? p->n_gpu : 1) * sizeof *api);
    if (!dev || !api) {
        free(dev);
        free(api);
        return ft_set_error(p->ctx, FT_ERR_OOM, "out of host memory for the profile");
    }
    size_t nd = 0, na = 0;
    for (size_t i = 0; i < p->n_gpu; i++) {
        const ft_gpu_rec *g = &p->gpu[i];
        if (g->kind == FT_GPU_RUNTIME) api[na++] = (corr_key){g->correlation, i};
        else if (g->start || g->end) dev[nd++] = (corr_key){g->correlation, g->start};
    }
    qsort(dev, nd, sizeof *dev, cmp_corr);
    qsort(api, na, sizeof *api, cmp_corr);
    double lat_sum = 0, queue_sum = 0, api_sum = 0, lat_max = 0;
    int64_t n = 0;
    for (size_t i = 0, j = 0; i < nd; i++) {
        if (i > 0 && dev[i].corr == dev[i - 1].corr) continue; /* a graph replay: its first kernel */
        while (j < na && api[j].corr < dev[i].corr) j++;
        if (j == na || api[j].corr != dev[i].corr) continue;
        const ft_gpu_rec *r = &p->gpu[api[j].t];
        uint64_t ks = dev[i].t;
        if (ks < r->start) {
            s->kernels_before_api++;
            continue;
        }
        double lat = us(ks - r->start);
        lat_sum += lat;
        if (lat > lat_max) lat_max = lat;
        queue_sum += ks > r->end ? us(ks - r->end) : 0;
        api_sum += us(r->end - r->start);
        n++;
    }
    s->launches = n;
    if (n) {
        s->launch_latency_mean_us = lat_sum / (double)n;
        s->launch_latency_max_us = lat_max;
        s->queue_mean_us = queue_sum / (double)n;
        s->api_mean_us = api_sum / (double)n;
    }
    free(dev);
    free(api);
    return FT_OK;
}

static ft_prof_name *name_slot(ft_profiler *p, const char *name) {
    for (int i = 0; i < p->n_names; i++)
        if (!strcmp(p->names[i].name, name)) return &p->names[i];
    if (p->n_names == FT_PROF_MAX_NAMES) return NULL;
    ft_prof_name *n = &p->names[p->n_names++];
    memset(n, 0, sizeof *n);
    n->name = name;
    return n;
}

static int cmp_name(const void *a, const void *b) {
    const ft_prof_name *x = (const ft_prof_name *)a, *y = (const ft_prof_name *)b;
    /* replayed ops have no host time of their own: they follow by device time */
    if (x->host_ns != y->host_ns) return (x->host_ns < y->host_ns) - (x->host_ns > y->host_ns);
    return (x->gpu_ns < y->gpu_ns) - (x->gpu_ns > y->gpu_ns);
}

/* The device time of attributed replays moves from the replay's row
 * ("graph_launch") to the rows of the ops that captured it, so a static-mode
 * table says which ops the device spent its time on. */
static void replays_to_names(ft_profiler *p) {
    for (size_t i = 0; i < p->n_gpu; i++) {
        const ft_gpu_rec *g = &p->gpu[i];
        if (g->step < 0 || g->end <= g->start) continue; /* as linked to the op record */
        const ft_replay_step *st = ft_prof_replay_step(p, g);
        ft_prof_name *from = name_slot(p, ft_prof_op_name(&p->ops[g->op]));
        ft_prof_name *to = name_slot(p, ft_op_name((ft_op)st->op));
        if (!from || !to) continue;
        from->gpu_ns -= g->end - g->own_start;
        from->kernels--;
        to->gpu_ns += g->end - g->own_start;
        to->kernels++;
    }
    for (int64_t i = 0; i < p->n_ops; i++) {
        const ft_prof_op *r = &p->ops[i];
        if (!r->attributed) continue;
        const ft_replay_map *m = p->replays[r->replay - 1];
        for (int k = 0; k < m->n_steps; k++) {
            ft_prof_name *n = name_slot(p, ft_op_name((ft_op)m->step[k].op));
            if (n) n->replayed++;
        }
    }
}

static int cmp_stream_start(const void *a, const void *b) {
    const ft_gpu_rec *x = *(const ft_gpu_rec *const *)a, *y = *(const ft_gpu_rec *const *)b;
    if (x->stream != y->stream) return (x->stream > y->stream) - (x->stream < y->stream);
    if (x->start != y->start) return (x->start > y->start) - (x->start < y->start);
    return (x->end > y->end) - (x->end < y->end);
}

/* Sets own_start of every device record: its start, or the end of the latest
 * earlier work of its stream if that is later (a PDL launch starts while the
 * kernel before it drains). Returns the overlap removed, in ns; -1 when out
 * of host memory. */
static int64_t own_starts(ft_profiler *p) {
    ft_gpu_rec **v = (ft_gpu_rec **)malloc((p->n_gpu ? p->n_gpu : 1) * sizeof *v);
    if (!v) return -1;
    size_t n = 0;
    for (size_t i = 0; i < p->n_gpu; i++) {
        p->gpu[i].own_start = p->gpu[i].start;
        if (is_device_work(&p->gpu[i]) && p->gpu[i].end > p->gpu[i].start) v[n++] = &p->gpu[i];
    }
    qsort(v, n, sizeof *v, cmp_stream_start);
    uint64_t cover = 0, overlap = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || v[i]->stream != v[i - 1]->stream) cover = 0;
        uint64_t own = v[i]->start < cover ? (cover < v[i]->end ? cover : v[i]->end) : v[i]->start;
        overlap += own - v[i]->start;
        v[i]->own_start = own;
        if (v[i]->end > cover) cover = v[i]->end;
    }
    free(v);
    return (int64_t)overlap;
}

/* Everything below is derived from the op and device records, from scratch:
 * computing twice gives the same numbers. */
static ft_status compute(ft_profiler *p) {
    ft_profile_summary *s = &p->sum;
    ft_ctx *ctx = p->ctx;
    memset(s, 0, sizeof *s);
    p->n_names = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        p->ops[i].gpu_ns = 0;
        p->ops[i].n_gpu = 0;
    }
    s->device = ctx->device;
    s->wall_us = us(p->t1 - p->t0);
    s->ops = p->n_ops;
    s->ops_dropped = (int64_t)p->ops_dropped;
    s->correlation_errors = (int64_t)p->corr_errors;
    s->cupti = p->cupti_window;
    snprintf(s->cupti_note, sizeof s->cupti_note, "%s", p->cupti_window ? "" : p->cupti_note);

    int64_t overlap = own_starts(p);
    if (overlap < 0) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory for the profile");
    s->overlap_us = us((uint64_t)overlap);

    /* device records -> ops; counts and health */
    for (size_t i = 0; i < p->n_gpu; i++) {
        const ft_gpu_rec *g = &p->gpu[i];
        switch (g->kind) {
        case FT_GPU_KERNEL: s->kernels++; break;
        case FT_GPU_MEMCPY: s->memcpys++; break;
        case FT_GPU_MEMSET: s->memsets++; break;
        default: s->runtime_calls++; break;
        }
        if (g->kind == FT_GPU_KERNEL && g->start == 0 && g->end == 0) s->kernels_zero_ts++;
        if (g->kind == FT_GPU_KERNEL && (g->op < 0 || g->op >= p->n_ops)) s->kernels_unlinked++;
        if (is_device_work(g) && g->op >= 0 && g->op < p->n_ops && g->end > g->start) {
            p->ops[g->op].gpu_ns += g->end - g->own_start;
            p->ops[g->op].n_gpu++;
        }
    }
    int64_t attributed = ft_prof_attribute_replays(p->gpu, p->n_gpu, p->ops, p->n_ops, p->replays,
                                                   p->n_replays);
    if (attributed < 0) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory for the profile");
    s->graph_replays = p->graph_replays;
    s->graph_replays_attributed = attributed;
    s->gpu_records_dropped = (int64_t)p->gpu_dropped;
    s->cupti_overhead_us = p->cupti_window ? us(ft_cupti_overhead_ns()) : 0;

    /* host time per op, per phase, per name */
    uint64_t host = 0, phases = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const ft_prof_op *r = &p->ops[i];
        uint64_t span_ns = r->end > r->begin ? r->end - r->begin : 0, ph_ns = 0;
        host += span_ns;
        if (r->status != FT_OK) s->ops_failed++;
        ft_prof_name *n = name_slot(p, ft_prof_op_name(r));
        if (n) {
            n->calls++;
            n->host_ns += span_ns;
            n->gpu_ns += r->gpu_ns;
            n->kernels += r->n_gpu;
        }
        for (int k = 0; k < FT_PHASE_COUNT; k++) {
            uint64_t d = r->ph[k][1] > r->ph[k][0] ? r->ph[k][1] - r->ph[k][0] : 0;
            s->phase_us[k] += us(d);
            ph_ns += d;
            if (n) n->phase_ns[k] += d;
        }
        phases += ph_ns;
    }
    s->op_host_us = us(host);
    s->untimed_us = us(host - (phases < host ? phases : host));
    replays_to_names(p);
    qsort(p->names, (size_t)p->n_names, sizeof p->names[0], cmp_name);

    /* busy intervals: device work (CUPTI) or LAUNCH phases (CPU) */
    size_t cap = p->cupti_window ? p->n_gpu : (size_t)p->n_ops;
    span *v = (span *)malloc((cap ? cap : 1) * sizeof *v);
    if (!v) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory for the profile");
    size_t n = 0;
    if (p->cupti_window) {
        s->busy_source = FT_BUSY_CUPTI;
        for (size_t i = 0; i < p->n_gpu; i++) {
            const ft_gpu_rec *g = &p->gpu[i];
            if (is_device_work(g) && g->start) n += (size_t)clip(p, g->start, g->end, &v[n]);
        }
    } else if (ctx->device == FT_DEVICE_CPU) {
        s->busy_source = FT_BUSY_CPU_LAUNCH;
        for (int64_t i = 0; i < p->n_ops; i++) {
            const ft_prof_op *r = &p->ops[i];
            n += (size_t)clip(p, r->ph[FT_PHASE_LAUNCH][0], r->ph[FT_PHASE_LAUNCH][1], &v[n]);
        }
    } else {
        s->busy_source = FT_BUSY_NONE;
    }
    if (s->busy_source != FT_BUSY_NONE) busy_and_gaps(p, v, n);
    free(v);
    ft_status st = p->cupti_window ? launch_stats(p) : FT_OK;
    if (st == FT_OK) s->valid = 1;
    return st;
}

static ft_status profiler_stop(ft_profiler *p) {
    ft_ctx *ctx = p->ctx;
    if (!p->open) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_profiler_stop: no window is open");
    /* the window ends when the device has finished what was launched in it */
    ft_status sync_st = ft_ctx_sync(ctx);
    p->t1 = ft_prof_now_ns();
    char msg[sizeof p->cupti_note] = "";
    ft_status cst;
    close_window(p, msg, sizeof msg, &cst);
    const ft_gpu_rec *recs = NULL;
    size_t n = 0;
    if (p->cupti_window) {
        if (cst != FT_OK) {
            snprintf(p->cupti_note, sizeof p->cupti_note, "%s", msg);
            p->cupti_window = 0;
        } else {
            recs = ft_cupti_records(&n);
        }
    }
    if (sync_st != FT_OK) return sync_st;
    return ft_prof_finish(p, recs, n, p->cupti_window ? ft_cupti_dropped() : 0);
}

ft_status ft_prof_finish(ft_profiler *p, const ft_gpu_rec *recs, size_t n, uint64_t dropped) {
    p->n_gpu = n < p->cap_gpu ? n : p->cap_gpu;
    if (p->n_gpu) memcpy(p->gpu, recs, p->n_gpu * sizeof *recs);
    p->gpu_dropped = dropped + (n - p->n_gpu);
    return compute(p);
}

/* ------------------------------------------------------------------------- */
/* Getters                                                                    */
/* ------------------------------------------------------------------------- */

const char *ft_profiler_cupti_note(const ft_profiler *p) {
    return p && !p->cupti_ok ? p->cupti_note : "";
}

ft_status ft_profiler_summary(const ft_profiler *p, ft_profile_summary *out) {
    if (!p) return FT_ERR_INVALID_ARG;
    if (!out) return ft_api_null(p->ctx, __func__, "out");
    *out = p->sum;
    return FT_OK;
}

int64_t ft_profiler_op_count(const ft_profiler *p) {
    return p && p->sum.valid ? p->n_ops : 0;
}

ft_status ft_profiler_op(const ft_profiler *p, int64_t i, ft_profile_op *out) {
    if (!p) return FT_ERR_INVALID_ARG;
    if (!out) return ft_api_null(p->ctx, __func__, "out");
    if (!p->sum.valid || i < 0 || i >= p->n_ops)
        return ft_set_error(p->ctx, FT_ERR_INVALID_ARG, "ft_profiler_op: no record %lld", (long long)i);
    const ft_prof_op *r = &p->ops[i];
    memset(out, 0, sizeof *out);
    out->name = ft_prof_op_name(r);
    out->node_id = r->node_id;
    out->status = (ft_status)r->status;
    if (r->ndim > 0) {
        size_t n = 0;
        for (int d = 0; d < r->ndim && n < sizeof out->shape; d++)
            n += (size_t)snprintf(out->shape + n, sizeof out->shape - n, "%s%lld", d ? "," : "[",
                                  (long long)r->ne[d]);
        if (n < sizeof out->shape)
            snprintf(out->shape + n, sizeof out->shape - n, "] %s", ft_dtype_name((ft_dtype)r->dtype));
    }
    out->start_us = r->begin >= p->t0 ? us(r->begin - p->t0) : 0;
    out->dur_us = r->end > r->begin ? us(r->end - r->begin) : 0;
    for (int k = 0; k < FT_PHASE_COUNT; k++)
        out->phase_us[k] = r->ph[k][1] > r->ph[k][0] ? us(r->ph[k][1] - r->ph[k][0]) : 0;
    out->gpu_us = us(r->gpu_ns);
    out->kernels = r->n_gpu;
    return FT_OK;
}

int ft_profiler_op_stats_count(const ft_profiler *p) {
    return p && p->sum.valid ? p->n_names : 0;
}

ft_status ft_profiler_op_stats(const ft_profiler *p, int i, ft_profile_op_stats *out) {
    if (!p) return FT_ERR_INVALID_ARG;
    if (!out) return ft_api_null(p->ctx, __func__, "out");
    if (!p->sum.valid || i < 0 || i >= p->n_names)
        return ft_set_error(p->ctx, FT_ERR_INVALID_ARG, "ft_profiler_op_stats: no entry %d", i);
    const ft_prof_name *n = &p->names[i];
    memset(out, 0, sizeof *out);
    out->name = n->name;
    out->calls = n->calls;
    out->host_us = us(n->host_ns);
    for (int k = 0; k < FT_PHASE_COUNT; k++) out->phase_us[k] = us(n->phase_ns[k]);
    out->gpu_us = us(n->gpu_ns);
    out->kernels = n->kernels;
    out->replayed = n->replayed;
    return FT_OK;
}

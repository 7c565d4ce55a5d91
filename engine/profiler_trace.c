/*
 * profiler_trace.c - writes a profiler window out: Chrome trace-event JSON
 * (Perfetto, chrome://tracing) and CSV. Layout of the trace (see
 * docs/instrumentation.md):
 *   pid 1            the host; tid = the OS thread that ran the window: one
 *                    "op" slice per op record, "phase" slices nested in it,
 *                    "cuda_runtime" slices (CUPTI) nested in the launch phase;
 *   pid 100 + dev    one GPU per device; tid = CUPTI stream id: "kernel",
 *                    "memcpy", "memset" slices;
 *   flows "ac2g"     from the launching runtime call (or the op's launch phase
 *                    when there is none) to each device slice of the op.
 * Timestamps are microseconds relative to the window's start with three
 * decimals (integer nanoseconds printed exactly, no double rounding).
 */
#include "profiler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GPU_PID_BASE 100

/* Writes t - t0 in microseconds with 3 decimals; negative allowed. */
static void put_ts(FILE *f, uint64_t t, uint64_t t0) {
    uint64_t d = t >= t0 ? t - t0 : t0 - t;
    fprintf(f, "%s%llu.%03llu", t >= t0 ? "" : "-", (unsigned long long)(d / 1000),
            (unsigned long long)(d % 1000));
}

static void put_dur(FILE *f, uint64_t a, uint64_t b) { put_ts(f, b > a ? b : a, a); }

static void put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; c && *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
        else fputc(*c, f);
    }
    fputc('"', f);
}

/* The output file is written beside its target as ".<name>.ftengine.tmp.<pid>" (a
 * name over 200 bytes cut to 200 plus "~" and a hash of the whole, so any legal target
 * name has a legal, distinct temporary; tools/outfiles.c names its own alike and
 * removes stale ones by that pattern), synced and renamed on success. */
typedef struct out_file {
    FILE *f;
    char tmp[4096 + 64];
    const char *path;
} out_file;

static ft_status out_open(const ft_profiler *p, const char *path, out_file *o) {
    if (!path || !*path) return ft_set_error(p->ctx, FT_ERR_INVALID_ARG, "profiler: no output path");
    if (!p->sum.valid)
        return ft_set_error(p->ctx, FT_ERR_INVALID_ARG,
                            "profiler: nothing to write (no window has been stopped)");
    o->path = path;
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    int dir_len = slash ? (int)(slash - path) + 1 : 0;
    size_t n = strlen(base);
    char hash[16] = "";
    if (n > 200) {
        uint32_t h = 2166136261u; /* FNV-1a */
        for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)base[i]) * 16777619u;
        snprintf(hash, sizeof hash, "~%08x", (unsigned)h);
        n = 200;
        while (n > 0 && ((unsigned char)base[n] & 0xC0) == 0x80) n--; /* not inside a UTF-8 character */
    }
    if (snprintf(o->tmp, sizeof o->tmp, "%.*s.%.*s%s.ftengine.tmp.%ld", dir_len, path, (int)n, base, hash,
                 (long)getpid()) >= (int)sizeof o->tmp)
        return ft_set_error(p->ctx, FT_ERR_IO, "cannot write %s: %s", path, strerror(ENAMETOOLONG));
    o->f = fopen(o->tmp, "w");
    if (!o->f) return ft_set_error(p->ctx, FT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return FT_OK;
}

/* Every step checked: the buffered writes (their error is seen at the flush), the
 * sync to disk, the close, the rename. */
static ft_status out_close(const ft_profiler *p, out_file *o) {
    int e = 0;
    errno = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) e = errno ? errno : EIO;
    if (!e && fsync(fileno(o->f)) != 0 && errno != EINVAL) e = errno;
    if (fclose(o->f) != 0 && !e) e = errno;
    if (!e && rename(o->tmp, o->path) != 0) e = errno;
    if (e) {
        remove(o->tmp);
        return ft_set_error(p->ctx, FT_ERR_IO, "cannot write %s: %s", o->path, strerror(e));
    }
    return FT_OK;
}

static const char *busy_source_name(ft_busy_source b) {
    return b == FT_BUSY_CUPTI ? "cupti" : b == FT_BUSY_CPU_LAUNCH ? "cpu_launch_phases" : "unknown";
}

static const char *gpu_cat(uint8_t kind) {
    return kind == FT_GPU_KERNEL ? "kernel" : kind == FT_GPU_MEMCPY ? "memcpy" : "memset";
}

static void write_metadata(FILE *f, const ft_profiler *p) {
    const ft_profile_summary *s = &p->sum;
    fprintf(f, "\"otherData\":{\"device\":\"%s\",\"busy_source\":\"%s\",\"wall_us\":%.3f,"
               "\"busy_us\":%.3f,\"overhead_us\":%.3f,\"utilization\":%.4f,\"ops\":%lld,"
               "\"ops_dropped\":%lld,\"cupti\":%d,\"cupti_note\":",
            ft_device_name(s->device), busy_source_name(s->busy_source), s->wall_us, s->busy_us,
            s->overhead_us, s->utilization, (long long)s->ops, (long long)s->ops_dropped, s->cupti);
    put_str(f, s->cupti_note);
    fprintf(f, ",\"gpu_records_dropped\":%lld,\"overlap_us\":%.3f},\n", (long long)s->gpu_records_dropped,
            s->overlap_us);
    fprintf(f, "\"traceEvents\":[\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":"
               "\"ftengine host (%s)\"}},\n",
            ft_device_name(s->device));
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_sort_index\",\"args\":"
               "{\"sort_index\":0}},\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%ld,\"name\":\"thread_name\",\"args\":{\"name\":"
               "\"dispatcher\"}}",
            p->tid);
    /* one GPU process per device, one thread per stream, each named once
     * (a handful of each: linear lookups over small tables) */
    enum { MAX_TRACKS = 256 };
    uint32_t dev_seen[MAX_TRACKS], track_seen[MAX_TRACKS][2];
    int n_dev = 0, n_track = 0;
    for (size_t i = 0; i < p->n_gpu; i++) {
        const ft_gpu_rec *g = &p->gpu[i];
        if (g->kind == FT_GPU_RUNTIME) continue;
        int d = 0, t = 0;
        while (d < n_dev && dev_seen[d] != g->device) d++;
        while (t < n_track && (track_seen[t][0] != g->device || track_seen[t][1] != g->stream)) t++;
        if (d == n_dev && n_dev < MAX_TRACKS) {
            dev_seen[n_dev++] = g->device;
            fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%u,\"tid\":0,\"name\":\"process_name\",\"args\":"
                       "{\"name\":\"GPU %u\"}},\n{\"ph\":\"M\",\"pid\":%u,\"tid\":0,\"name\":"
                       "\"process_sort_index\",\"args\":{\"sort_index\":%u}}",
                    GPU_PID_BASE + g->device, g->device, GPU_PID_BASE + g->device, 1 + g->device);
        }
        if (t == n_track && n_track < MAX_TRACKS) {
            track_seen[n_track][0] = g->device;
            track_seen[n_track][1] = g->stream;
            n_track++;
            fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":"
                       "{\"name\":\"stream %u\"}}",
                    GPU_PID_BASE + g->device, g->stream, g->stream);
        }
    }
}

static void write_ops(FILE *f, const ft_profiler *p) {
    for (int64_t i = 0; i < p->n_ops; i++) {
        const ft_prof_op *r = &p->ops[i];
        ft_profile_op o;
        if (ft_profiler_op(p, i, &o) != FT_OK) continue;
        fprintf(f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%ld,\"cat\":\"op\",\"name\":", p->tid);
        put_str(f, o.name);
        fputs(",\"ts\":", f);
        put_ts(f, r->begin, p->t0);
        fputs(",\"dur\":", f);
        put_dur(f, r->begin, r->end);
        fprintf(f, ",\"args\":{\"record\":%lld,\"node\":%d,\"shape\":", (long long)i, (int)r->node_id);
        put_str(f, o.shape);
        fprintf(f, ",\"status\":\"%s\"", ft_status_str((ft_status)r->status));
        if (p->sum.cupti) fprintf(f, ",\"gpu_us\":%.3f,\"device_records\":%d", o.gpu_us, o.kernels);
        fputs("}}", f);
        for (int k = 0; k < FT_PHASE_COUNT; k++) {
            if (!r->ph[k][0]) continue;
            fprintf(f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%ld,\"cat\":\"phase\",\"name\":\"%s\",\"ts\":",
                    p->tid, ft_profile_phase_name(k));
            put_ts(f, r->ph[k][0], p->t0);
            fputs(",\"dur\":", f);
            put_dur(f, r->ph[k][0], r->ph[k][1]);
            fputs("}", f);
        }
    }
}

/* Runtime records sorted by correlation id, to find each device slice's
 * launching call. */
typedef struct rt_key {
    uint32_t corr;
    uint32_t pad;
    size_t idx;
} rt_key;

static int cmp_rt(const void *a, const void *b) {
    uint32_t x = ((const rt_key *)a)->corr, y = ((const rt_key *)b)->corr;
    return (x > y) - (x < y);
}

static const ft_gpu_rec *find_runtime(const ft_profiler *p, const rt_key *keys, size_t n, uint32_t corr) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (keys[mid].corr < corr) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && keys[lo].corr == corr ? &p->gpu[keys[lo].idx] : NULL;
}

static void write_gpu(FILE *f, const ft_profiler *p, const rt_key *keys, size_t n_keys) {
    for (size_t i = 0; i < p->n_gpu; i++) {
        const ft_gpu_rec *g = &p->gpu[i];
        if (g->kind == FT_GPU_RUNTIME) {
            fprintf(f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"cat\":\"cuda_runtime\",\"name\":", g->stream);
            put_str(f, ft_cupti_string(g->name));
            fputs(",\"ts\":", f);
            put_ts(f, g->start, p->t0);
            fputs(",\"dur\":", f);
            put_dur(f, g->start, g->end);
            fprintf(f, ",\"args\":{\"correlation\":%u}}", g->correlation);
            continue;
        }
        if (!g->start && !g->end) continue; /* no timestamps: counted in the summary */
        unsigned pid = GPU_PID_BASE + g->device;
        fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"cat\":\"%s\",\"name\":", pid, g->stream,
                gpu_cat(g->kind));
        put_str(f, ft_cupti_string(g->name));
        fputs(",\"ts\":", f);
        put_ts(f, g->start, p->t0);
        fputs(",\"dur\":", f);
        put_dur(f, g->start, g->end);
        fprintf(f, ",\"args\":{\"correlation\":%u,\"op_record\":%lld,\"graph_node\":%llu,\"bytes\":%llu",
                g->correlation, (long long)g->op, (unsigned long long)g->graph_node,
                (unsigned long long)g->bytes);
        if (g->op < 0 || g->op >= p->n_ops) {
            fputs("}}", f);
            continue;
        }
        const ft_prof_op *r = &p->ops[g->op];
        if (g->step >= 0) { /* a replayed kernel: the op that captured it */
            const ft_replay_step *st = ft_prof_replay_step(p, g);
            fputs(",\"op\":", f);
            put_str(f, ft_op_name((ft_op)st->op));
            fprintf(f, ",\"plan_step\":%d,\"node\":%d}}", (int)g->step, (int)st->node_id);
        } else {
            fputs(",\"op\":", f);
            put_str(f, ft_prof_op_name(r));
            fputs("}}", f);
        }
        /* flow: launching call (or the op's launch phase) -> this device slice */
        const ft_gpu_rec *api = find_runtime(p, keys, n_keys, g->correlation);
        uint64_t from = api ? api->start : r->ph[FT_PHASE_LAUNCH][0] ? r->ph[FT_PHASE_LAUNCH][0] : r->begin;
        long from_tid = api ? (long)api->stream : p->tid;
        fprintf(f, ",\n{\"ph\":\"s\",\"pid\":1,\"tid\":%ld,\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%zu,\"ts\":",
                from_tid, i + 1);
        put_ts(f, from, p->t0);
        fprintf(f, "},\n{\"ph\":\"f\",\"pid\":%u,\"tid\":%u,\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%zu,"
                   "\"bp\":\"e\",\"ts\":",
                pid, g->stream, i + 1);
        put_ts(f, g->start, p->t0);
        fputs("}", f);
    }
}

/* CUDA graph replays given back to their plan steps: one slice per step on a
 * track of its own under the GPU, spanning that step's device work, so a
 * static-mode timeline names the op above each kernel as eager mode does. */
#define REPLAY_TID 2000000000u

typedef struct step_key {
    int64_t op;
    int32_t step;
    uint32_t pad;
    uint64_t start;
    size_t idx;
} step_key;

static int cmp_step(const void *a, const void *b) {
    const step_key *x = (const step_key *)a, *y = (const step_key *)b;
    if (x->op != y->op) return (x->op > y->op) - (x->op < y->op);
    if (x->step != y->step) return (x->step > y->step) - (x->step < y->step);
    return (x->start > y->start) - (x->start < y->start);
}

static ft_status write_replayed_steps(FILE *f, const ft_profiler *p) {
    size_t n = 0;
    for (size_t i = 0; i < p->n_gpu; i++) n += p->gpu[i].step >= 0;
    if (!n) return FT_OK;
    step_key *v = (step_key *)malloc(n * sizeof *v);
    if (!v) return ft_set_error(p->ctx, FT_ERR_OOM, "out of host memory for the trace");
    n = 0;
    for (size_t i = 0; i < p->n_gpu; i++)
        if (p->gpu[i].step >= 0) v[n++] = (step_key){p->gpu[i].op, p->gpu[i].step, 0, p->gpu[i].start, i};
    qsort(v, n, sizeof *v, cmp_step);
    uint32_t named = UINT32_MAX; /* the device whose track was named last */
    for (size_t a = 0, b; a < n; a = b) {
        const ft_gpu_rec *g = &p->gpu[v[a].idx];
        uint64_t end = g->end;
        for (b = a + 1; b < n && v[b].op == v[a].op && v[b].step == v[a].step; b++)
            if (p->gpu[v[b].idx].end > end) end = p->gpu[v[b].idx].end;
        const ft_replay_step *st = ft_prof_replay_step(p, g);
        unsigned pid = GPU_PID_BASE + g->device;
        if (named != g->device) {
            named = g->device;
            fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":"
                       "{\"name\":\"plan steps (CUDA graph replays)\"}}",
                    pid, REPLAY_TID);
        }
        fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"cat\":\"replayed_op\",\"name\":", pid,
                REPLAY_TID);
        put_str(f, ft_op_name((ft_op)st->op));
        fputs(",\"ts\":", f);
        put_ts(f, g->start, p->t0);
        fputs(",\"dur\":", f);
        put_dur(f, g->start, end);
        fprintf(f, ",\"args\":{\"op_record\":%lld,\"plan_step\":%d,\"node\":%d,\"device_records\":%zu}}",
                (long long)v[a].op, (int)v[a].step, (int)st->node_id, b - a);
    }
    free(v);
    return FT_OK;
}

ft_status ft_profiler_write_chrome_trace(const ft_profiler *p, const char *path) {
    if (!p) return FT_ERR_INVALID_ARG;
    rt_key *keys = (rt_key *)malloc((p->n_gpu ? p->n_gpu : 1) * sizeof *keys);
    if (!keys) return ft_set_error(p->ctx, FT_ERR_OOM, "out of host memory for the trace");
    size_t n_keys = 0;
    for (size_t i = 0; i < p->n_gpu; i++)
        if (p->gpu[i].kind == FT_GPU_RUNTIME) keys[n_keys++] = (rt_key){p->gpu[i].correlation, 0, i};
    qsort(keys, n_keys, sizeof *keys, cmp_rt);
    out_file o;
    ft_status st = out_open(p, path, &o);
    if (st != FT_OK) {
        free(keys);
        return st;
    }
    FILE *f = o.f;
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":%llu,\n", (unsigned long long)p->t0);
    write_metadata(f, p);
    write_ops(f, p);
    write_gpu(f, p, keys, n_keys);
    st = write_replayed_steps(f, p);
    fputs("\n]}\n", f);
    free(keys);
    if (st != FT_OK) { /* no partial file */
        fclose(f);
        remove(o.tmp);
        return st;
    }
    return out_close(p, &o);
}

ft_status ft_profiler_write_csv(const ft_profiler *p, const char *path) {
    if (!p) return FT_ERR_INVALID_ARG;
    out_file o;
    ft_status st = out_open(p, path, &o);
    if (st != FT_OK) return st;
    FILE *f = o.f;
    fputs("record,name,node_id,shape,status,start_us,dur_us", f);
    for (int k = 0; k < FT_PROFILE_PHASES; k++) fprintf(f, ",%s_us", ft_profile_phase_name(k));
    fputs(",gpu_us,device_records\n", f);
    for (int64_t i = 0; i < p->n_ops; i++) {
        ft_profile_op r;
        if (ft_profiler_op(p, i, &r) != FT_OK) continue;
        /* names and shapes hold no quotes; the shape holds commas: quote it */
        fprintf(f, "%lld,%s,%d,\"%s\",%s,%.3f,%.3f", (long long)i, r.name, (int)r.node_id, r.shape,
                ft_status_str(r.status), r.start_us, r.dur_us);
        for (int k = 0; k < FT_PROFILE_PHASES; k++) fprintf(f, ",%.3f", r.phase_us[k]);
        fprintf(f, ",%.3f,%d\n", r.gpu_us, r.kernels);
    }
    return out_close(p, &o);
}

/*
 * model.c - the model framework: loading a checkpoint directory or a preset,
 * validating host inputs, running a forward in the chosen mode, and holding
 * the outputs. Architectures (models/<arch>.c) plug in through ft_arch.
 *
 * An eager forward is one arena scope: inputs are uploaded, the architecture's
 * forward() runs op by op through the dispatcher, the outputs are kept (a
 * persistent header holding a storage reference) and every other tensor of the
 * scope goes back to the caching allocator. Graph and static modes hand the
 * same forward() to graph/ to be traced and planned.
 */
#include "model.h"
#include "../engine/nvtx.h"
#include "../engine/ft_checked.h"
#include "../engine/safetensors.h"
#include "../graph/graph_api.h"
#include "../graph/trace.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

ft_model_options ft_model_options_default(void) {
    ft_model_options o;
    memset(&o, 0, sizeof o);
    o.mode = FT_MODE_EAGER;
    o.dtype = FT_DTYPE_F32;
    o.seed = 0x5eed;
    return o;
}

/* ---- registry ---- */

const ft_arch *ft_arch_find(const char *model_type) {
    for (int i = 0; model_type && ft_archs[i]; i++)
        if (!strcmp(ft_archs[i]->model_type, model_type)) return ft_archs[i];
    return NULL;
}

const ft_preset *ft_preset_find(const char *name, const ft_arch **arch) {
    for (int i = 0; ft_archs[i]; i++)
        for (const ft_preset *p = ft_archs[i]->presets; p && p->name; p++)
            if (!strcmp(p->name, name)) {
                if (arch) *arch = ft_archs[i];
                return p;
            }
    return NULL;
}

const char *ft_preset_name(int i) {
    for (int a = 0; ft_archs[a]; a++)
        for (const ft_preset *p = ft_archs[a]->presets; p && p->name; p++)
            if (i-- == 0) return p->name;
    return NULL;
}

/* ---- outputs ---- */

static void release_outputs(ft_model *m) {
    for (int i = 0; i < m->n_out; i++) {
        if (m->out[i].t && (m->out[i].t->flags & FT_TF_PERSISTENT))
            ft_tensor_free_persistent(m->out[i].t);
        m->out[i].t = NULL;
    }
    m->n_out = 0;
}

ft_status ft_model_add_output(ft_model *m, const char *name, ft_tensor *t) {
    if (m->ctx->status != FT_OK) return m->ctx->status;
    if (!t) return ft_set_error(m->ctx, FT_ERR_INTERNAL, "output '%s' is NULL", name);
    for (int i = 0; i < m->n_out; i++)
        if (!strcmp(m->out[i].name, name))
            return ft_set_error(m->ctx, FT_ERR_INTERNAL, "output '%s' registered twice", name);
    if (m->n_out == FT_MODEL_MAX_OUTPUTS)
        return ft_set_error(m->ctx, FT_ERR_INTERNAL, "too many outputs");
    snprintf(m->out[m->n_out].name, sizeof m->out[0].name, "%s", name);
    m->out[m->n_out].t = t;
    m->out[m->n_out].host = NULL;
    m->n_out++;
    return FT_OK;
}

ft_status ft_model_add_hidden_state(ft_model *m, int64_t index, ft_tensor *t) {
    if (!m->opt.output_hidden_states) return m->ctx->status;
    char name[48];
    snprintf(name, sizeof name, "hidden_states.%lld", (long long)index);
    return ft_model_add_output(m, name, t);
}

/* The outputs are rewritten by a forward: read them only from the thread inside
 * the context (another thread's forward makes these answer 0 / NULL). */
int ft_model_output_count(const ft_model *m) {
    if (!m || ft_ctx_enter(m->ctx, __func__) != FT_OK) return 0;
    int n = m->n_out;
    ft_ctx_leave(m->ctx);
    return n;
}
const char *ft_model_output_name(const ft_model *m, int i) {
    if (!m || ft_ctx_enter(m->ctx, __func__) != FT_OK) return NULL;
    const char *n = i >= 0 && i < m->n_out ? m->out[i].name : NULL;
    ft_ctx_leave(m->ctx);
    return n;
}
ft_tensor *ft_model_output(const ft_model *m, int i) {
    if (!m || ft_ctx_enter(m->ctx, __func__) != FT_OK) return NULL;
    ft_tensor *t = i >= 0 && i < m->n_out ? m->out[i].t : NULL;
    ft_ctx_leave(m->ctx);
    return t;
}
ft_tensor *ft_model_output_find(const ft_model *m, const char *name) {
    if (!m || !FT_ARG_OK(m->ctx, name) || ft_ctx_enter(m->ctx, __func__) != FT_OK) return NULL;
    ft_tensor *t = NULL;
    for (int i = 0; !t && i < m->n_out; i++)
        if (!strcmp(m->out[i].name, name)) t = m->out[i].t;
    ft_ctx_leave(m->ctx);
    return t;
}

const char *ft_model_arch(const ft_model *m) { return m ? m->arch_name : ""; }
ft_mode ft_model_mode(const ft_model *m) { return m ? m->opt.mode : FT_MODE_EAGER; }
int64_t ft_model_param_count(const ft_model *m) { return m ? m->param_count : 0; }

/* ---- inputs ---- */

ft_tensor *ft_model_input(ft_model *m, const char *name) {
    for (int i = 0; i < m->n_in; i++)
        if (!strcmp(m->in[i].name, name)) return m->in[i].t;
    return NULL;
}

const ft_host_tensor *ft_model_host_input(const ft_model *m, const char *name) {
    for (int i = 0; i < m->n_in; i++)
        if (!strcmp(m->in[i].name, name)) return m->in[i].host;
    return NULL;
}

/* Saturates at INT64_MAX: check_inputs refuses such shapes before anyone counts on it. */
int64_t ft_host_numel(const ft_host_tensor *t) {
    int64_t n;
    ft_shape_numel_ok(t->ndim, t->shape, 1, &n);
    return n;
}

/* memcpy: host data (an unpadded safetensors file, a caller's buffer) need not
 * be 8-byte aligned, and a misaligned int64_t load is undefined behaviour. */
int64_t ft_host_int_at(const ft_host_tensor *t, int64_t i) {
    if (!t->data) return 0; /* shapes only (info, MACs): a validator that forgot to skip reads zeros */
    if (t->dtype == FT_DTYPE_I64) {
        int64_t v;
        memcpy(&v, (const char *)t->data + i * 8, sizeof v);
        return v;
    }
    int32_t v;
    memcpy(&v, (const char *)t->data + i * 4, sizeof v);
    return v;
}

/* Element i of any host tensor as a double (memcpy: the data need not be aligned). */
double ft_host_value_at(const ft_host_tensor *t, int64_t i) {
    if (!t->data) return 0; /* shapes only, as ft_host_int_at */
    const char *p = (const char *)t->data + i * (int64_t)ft_dtype_size(t->dtype);
    uint16_t h;
    float f;
    switch (t->dtype) {
    case FT_DTYPE_I64: case FT_DTYPE_I32: return (double)ft_host_int_at(t, i);
    case FT_DTYPE_F32: memcpy(&f, p, sizeof f); return f;
    case FT_DTYPE_F16: memcpy(&h, p, sizeof h); return ft_f16_to_f32(h);
    case FT_DTYPE_BF16: memcpy(&h, p, sizeof h); return ft_bf16_to_f32(h);
    default: return NAN;
    }
}

/* FT_ERR_SHAPE "<what> [a x b x c] is too large" unless the shape's element count and
 * its size at `elem` bytes per element fit (ft_checked.h). */
ft_status ft_check_host_size(ft_ctx *ctx, const char *what, int ndim, const int64_t *shape, size_t elem) {
    int64_t n;
    if (ft_shape_numel_ok(ndim, shape, elem, &n)) return FT_OK;
    char sh[256];
    size_t k = 0;
    for (int i = 0; i < ndim && k < sizeof sh; i++)
        k += (size_t)snprintf(sh + k, sizeof sh - k, "%s%lld", i ? " x " : "", (long long)shape[i]);
    return ft_set_error(ctx, FT_ERR_SHAPE, "%s of %s elements is too large (at most 2^48 bytes of %zu-byte "
                        "elements)", what, sh, elem ? elem : 1);
}

ft_status ft_check_ids(ft_model *m, const char *input, int64_t lo, int64_t hi) {
    const ft_host_tensor *t = ft_model_host_input(m, input);
    if (!t || !t->data) return FT_OK; /* no data: shapes only (check_inputs allows it then) */
    if (t->dtype != FT_DTYPE_I64 && t->dtype != FT_DTYPE_I32)
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "input '%s' must be i64 or i32, got %s",
                            input, ft_dtype_name(t->dtype));
    int64_t n = ft_host_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ft_host_int_at(t, i);
        if (v < lo || v >= hi)
            return ft_set_error(m->ctx, FT_ERR_INVALID_ARG,
                                "input '%s' holds %lld at flat index %lld, outside [%lld, %lld)",
                                input, (long long)v, (long long)i, (long long)lo, (long long)hi);
    }
    return FT_OK;
}

static ft_status check_inputs(ft_model *m, const ft_host_tensor *in, int n) {
    ft_ctx *ctx = m->ctx;
    if (n < 0 || n > FT_MODEL_MAX_INPUTS || (n && !in))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "invalid input count %d", n);
    m->n_in = 0;
    for (int i = 0; i < n; i++) {
        const ft_host_tensor *t = &in[i];
        if (!t->name) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "input %d has no name", i);
        bool known = false;
        for (const char *const *a = m->arch->inputs; a && *a; a++) known |= !strcmp(*a, t->name);
        if (!known) {
            char list[256] = "";
            size_t k = 0;
            for (const char *const *a = m->arch->inputs; a && *a && k < sizeof list; a++)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", *a);
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s takes no input '%s' (inputs: %s)",
                                m->arch_name, t->name, list);
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(in[j].name, t->name))
                return ft_set_error(ctx, FT_ERR_INVALID_ARG, "input '%s' given twice", t->name);
        if ((unsigned)t->dtype >= FT_DTYPE_COUNT)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "input '%s' has an invalid dtype", t->name);
        if (t->ndim < 1 || t->ndim > FT_MAX_DIMS)
            return ft_set_error(ctx, FT_ERR_SHAPE, "input '%s' has rank %d", t->name, t->ndim);
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] < 1)
                return ft_set_error(ctx, FT_ERR_SHAPE, "input '%s' has size %lld in dim %d",
                                    t->name, (long long)t->shape[d], d);
        char what[96];
        snprintf(what, sizeof what, "input '%s'", t->name);
        /* at its own dtype and at the model's (float inputs are converted on upload) */
        size_t es = ft_dtype_size(t->dtype), ms = ft_dtype_size(m->dtype);
        if (ft_check_host_size(ctx, what, t->ndim, t->shape, es > ms ? es : ms)) return ctx->status;
        if (!t->data && !m->example_shapes_only)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "input '%s' has no data", t->name);
        snprintf(m->in[i].name, sizeof m->in[i].name, "%s", t->name);
        m->in[i].host = t;
        m->in[i].t = NULL;
        m->n_in++;
    }
    return m->arch->validate ? m->arch->validate(m) : FT_OK;
}

/* Uploads the host inputs (floats converted to the model dtype). */
static ft_status upload_inputs(ft_model *m) {
    for (int i = 0; i < m->n_in; i++) {
        const ft_host_tensor *h = m->in[i].host;
        ft_dtype dt = ft_dtype_is_float(h->dtype) ? m->dtype : h->dtype;
        ft_tensor *t;
        if (dt == h->dtype) {
            t = ft_tensor_from_host(m->ctx, dt, h->ndim, h->shape, h->data);
        } else {
            int64_t n = ft_host_numel(h);
            void *tmp = malloc((size_t)n * ft_dtype_size(dt));
            if (!tmp) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
            ft_convert_host(dt, tmp, h->dtype, h->data, n);
            t = ft_tensor_from_host(m->ctx, dt, h->ndim, h->shape, tmp);
            free(tmp);
        }
        if (!t) return m->ctx->status;
        t->flags |= FT_TF_INPUT;
        snprintf(t->name, sizeof t->name, "%s", h->name);
        m->in[i].t = t;
    }
    return FT_OK;
}

/* ---- forward ---- */

static ft_status forward_eager(ft_model *m) {
    ft_ctx *ctx = m->ctx;
    int64_t mark = ft_arena_mark(ctx);
    ft_status st = upload_inputs(m);
    if (st == FT_OK) st = m->arch->forward(m, ctx);
    if (st == FT_OK) st = ctx->status;
    if (st == FT_OK) {
        for (int i = 0; i < m->n_out; i++) {
            ft_tensor *k = ft_tensor_keep(ctx, m->out[i].t);
            if (!k) {
                st = ctx->status;
                m->n_out = i; /* the rest are arena tensors, released below */
                break;
            }
            snprintf(k->name, sizeof k->name, "%s", m->out[i].name);
            m->out[i].t = k;
        }
    } else {
        m->n_out = 0; /* arena tensors only: released with the scope */
    }
    ft_arena_release_to(ctx, mark);
    for (int i = 0; i < m->n_in; i++) m->in[i].t = NULL;
    return st;
}

static ft_status model_forward(ft_model *m, const ft_host_tensor *inputs, int n_inputs) {
    ft_ctx *ctx = m->ctx;
    if (ctx->status != FT_OK) return ctx->status;
    release_outputs(m);
    if (m->opt.weights == FT_WEIGHTS_NONE)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "%s was loaded without weights (FT_WEIGHTS_NONE): "
                                 "it describes the model but cannot run it", m->source);
    ft_status st = check_inputs(m, inputs, n_inputs);
    if (st != FT_OK) return st;
    /* the NVTX tree's root (engine/nvtx.h): popped however the forward ends */
    if (ctx->nvtx)
        ft_nvtx_forward_push(ctx, strncmp(m->source, "preset:", 7) ? m->arch->model_type : m->source + 7,
                             ft_mode_name(m->opt.mode), n_inputs ? inputs[0].ndim : 0,
                             n_inputs ? inputs[0].shape : NULL);
    st = m->opt.mode == FT_MODE_EAGER ? forward_eager(m) : ft_graph_forward(m);
    if (ctx->nvtx) ft_nvtx_pop();
    return st;
}

/* Every public model function runs inside its context (ft_ctx_enter): a model, like
 * its context, is used by one thread at a time, and a second thread is refused. */
ft_status ft_model_forward(ft_model *m, const ft_host_tensor *inputs, int n_inputs) {
    if (!m) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(m->ctx, __func__);
    if (st != FT_OK) return st;
    st = model_forward(m, inputs, n_inputs);
    ft_ctx_leave(m->ctx);
    return st;
}

/* ---- example inputs ---- */

static uint64_t example_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

void ft_example_fill_ids(int64_t *ids, int64_t n, int64_t vocab) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < n; i++) ids[i] = vocab > 0 ? (int64_t)(example_next(&s) % (uint64_t)vocab) : 0;
}

void ft_example_fill_uniform(float *x, int64_t n) {
    uint64_t s = 0x2545f4914f6cdd1dull;
    for (int64_t i = 0; i < n; i++) x[i] = (float)(example_next(&s) >> 40) * (1.0f / 16777216.0f);
}

ft_status ft_example_image_inputs(ft_model *m, int64_t batch, int64_t channels, int64_t height, int64_t width,
                                  ft_host_tensor *in, int *n_in, void **owned) {
    if (batch < 1) return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "batch must be positive");
    int64_t n = batch;
    size_t bytes;
    if (!ft_mul_ok(n, channels, &n) || !ft_mul_ok(n, height, &n) || !ft_mul_ok(n, width, &n) ||
        !ft_bytes_ok(n, sizeof(float), &bytes))
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "batch %lld x %lld x %lldx%lld pixels is too large",
                            (long long)batch, (long long)channels, (long long)height, (long long)width);
    float *px = NULL;
    if (!m->example_shapes_only) { /* info and MAC counts need the shapes only */
        px = (float *)malloc(bytes);
        if (!px)
            return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory for %.3g GiB of example pixels",
                                (double)bytes / 1073741824.0);
        ft_example_fill_uniform(px, n);
    }
    *owned = px;
    memset(in, 0, sizeof *in);
    in[0].name = "pixel_values";
    in[0].dtype = FT_DTYPE_F32;
    in[0].ndim = 4;
    in[0].shape[0] = batch;
    in[0].shape[1] = channels;
    in[0].shape[2] = height;
    in[0].shape[3] = width;
    in[0].data = px;
    *n_in = 1;
    return FT_OK;
}

ft_status ft_example_text_inputs(ft_model *m, int64_t batch, int64_t length, int64_t vocab,
                                 ft_host_tensor *in, int *n_in, void **owned) {
    if (length <= 0) length = 128;
    int64_t n;
    size_t bytes;
    if (!ft_mul_ok(batch, length, &n) || !ft_bytes_ok(n, sizeof(int64_t), &bytes))
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "batch %lld x sequence %lld tokens is too large",
                            (long long)batch, (long long)length);
    int64_t *ids = NULL;
    if (!m->example_shapes_only) {
        ids = (int64_t *)malloc(bytes);
        if (!ids)
            return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory for batch %lld x %lld example ids "
                                "(%.3g GiB)", (long long)batch, (long long)length, (double)bytes / 1073741824.0);
        ft_example_fill_ids(ids, n, vocab);
    }
    *owned = ids;
    memset(in, 0, sizeof *in);
    in[0].name = "input_ids";
    in[0].dtype = FT_DTYPE_I64;
    in[0].ndim = 2;
    in[0].shape[0] = batch;
    in[0].shape[1] = length;
    in[0].data = ids;
    *n_in = 1;
    return FT_OK;
}

/* Example inputs with `shapes` set: names, dtypes and shapes, data NULL, nothing kept. */
static ft_status example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in, int *n_in,
                                void **owned, bool shapes) {
    *owned = NULL;
    *n_in = 0;
    if (m->ctx->status != FT_OK) return m->ctx->status;
    if (!m->arch->example_inputs)
        return ft_set_error(m->ctx, FT_ERR_UNSUPPORTED, "%s has no example inputs", m->arch_name);
    if (batch < 1)
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "batch %lld: must be positive", (long long)batch);
    if (length < 0)
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "length %lld: must not be negative (0 takes the "
                            "architecture's default)", (long long)length);
    m->example_shapes_only = shapes;
    ft_status st = m->arch->example_inputs(m, batch, length, in, n_in, owned);
    m->example_shapes_only = false;
    if (shapes) { /* an architecture that made data anyway: not wanted */
        free(*owned);
        *owned = NULL;
        for (int i = 0; i < *n_in; i++) in[i].data = NULL;
    }
    return st;
}

ft_status ft_model_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                                  int *n_in, void **owned) {
    if (!m) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(m->ctx, __func__);
    if (st != FT_OK) return st;
    void *none = NULL;
    if (!FT_ARG_OK(m->ctx, in) || !FT_ARG_OK(m->ctx, n_in)) st = m->ctx->status ? m->ctx->status : FT_ERR_INVALID_ARG;
    else st = example_inputs(m, batch, length, in, n_in, owned ? owned : &none, owned == NULL);
    ft_ctx_leave(m->ctx);
    return st;
}

/* ---- MAC counting by tracing ---- */

/* Traces one forward at the example inputs' shapes (no input data is made: a
 * trace needs shapes only) and adds up the ops' MACs. */
static ft_status model_macs(ft_model *m, int64_t batch, int64_t length, int64_t *macs) {
    ft_ctx *ctx = m->ctx;
    ft_host_tensor in[FT_MODEL_MAX_INPUTS];
    int n_in = 0;
    void *owned = NULL;
    ft_status st = example_inputs(m, batch, length, in, &n_in, &owned, true);
    if (st != FT_OK) return st;
    ft_model_io saved_out[FT_MODEL_MAX_OUTPUTS];
    int saved_n_out = m->n_out;
    memcpy(saved_out, m->out, sizeof saved_out);
    m->n_out = 0;
    m->example_shapes_only = true; /* check_inputs: no data, validators read none */
    st = check_inputs(m, in, n_in);
    m->example_shapes_only = false;
    int64_t mark = ft_arena_mark(ctx);
    ft_trace tr;
    memset(&tr, 0, sizeof tr);
    if (st == FT_OK) st = ft_trace_begin(ctx, &tr);
    if (st == FT_OK) {
        for (int i = 0; i < m->n_in && st == FT_OK; i++) {
            const ft_host_tensor *h = m->in[i].host;
            ft_dtype dt = ft_dtype_is_float(h->dtype) ? m->dtype : h->dtype;
            m->in[i].t = ft_trace_input(ctx, h->name, dt, h->ndim, h->shape);
            if (!m->in[i].t) st = ctx->status;
        }
        if (st == FT_OK) st = m->arch->forward(m, ctx);
        if (st == FT_OK) st = ctx->status;
        ft_trace_end(ctx, &tr);
    }
    int64_t total = 0;
    for (int i = 0; st == FT_OK && i < tr.n_nodes; i++) {
        const ft_tensor *n = tr.nodes[i];
        ft_macs_fn f = ft_op_table[n->op].macs;
        int64_t v = f ? f(n) : 0;
        if (v < 0 || total > INT64_MAX - v) /* no silent wrap for a huge batch */
            st = ft_set_error(ctx, FT_ERR_SHAPE, "the MACs of batch %lld overflow a 64-bit count", (long long)batch);
        else
            total += v;
    }
    ft_trace_free(&tr);
    ft_arena_release_to(ctx, mark);
    for (int i = 0; i < m->n_in; i++) m->in[i].t = NULL;
    m->n_in = 0;
    memcpy(m->out, saved_out, sizeof saved_out);
    m->n_out = saved_n_out;
    if (st == FT_OK) *macs = total;
    return st;
}

ft_status ft_model_macs(ft_model *m, int64_t batch, int64_t length, int64_t *macs) {
    if (!m) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(m->ctx, __func__);
    if (st != FT_OK) return st;
    st = FT_ARG_OK(m->ctx, macs) ? model_macs(m, batch, length, macs) : FT_ERR_INVALID_ARG;
    ft_ctx_leave(m->ctx);
    return st;
}

/* ---- load / free ---- */

static bool is_dir(const char *p) {
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

static ft_status model_load(ft_ctx *ctx, const char *path, const ft_model_options *opt, ft_model **out);

/* The i-th registered architecture's model_type, NULL past the last. */
static const char *arch_type(int i) { return ft_archs[i] ? ft_archs[i]->model_type : NULL; }

/* "a, b, c" of the names get(i) gives, within size: names that do not fit are
 * counted instead (", and 12 more" + tail), never cut in the middle. */
static void name_list(char *buf, size_t size, const char *(*get)(int), const char *tail) {
    size_t k = 0;
    int more = 0;
    buf[0] = '\0';
    for (int i = 0; get(i); i++) {
        const char *name = get(i);
        if (!more && k + strlen(name) + 2 + 64 < size) /* room kept for the count */
            k += (size_t)snprintf(buf + k, size - k, "%s%s", i ? ", " : "", name);
        else
            more++;
    }
    if (more) snprintf(buf + k, size - k, ", and %d more%s", more, tail);
}

ft_status ft_model_load(ft_ctx *ctx, const char *path, const ft_model_options *opt, ft_model **out) {
    if (out) *out = NULL;
    if (!ctx) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(ctx, __func__);
    if (st != FT_OK) return st;
    st = FT_ARG_OK(ctx, out) ? model_load(ctx, path, opt, out) : FT_ERR_INVALID_ARG;
    ft_ctx_leave(ctx);
    return st;
}

static ft_status model_load(ft_ctx *ctx, const char *path, const ft_model_options *opt, ft_model **out) {
    if (ctx->status != FT_OK) return ctx->status;
    /* the knobs were checked when the context was made; one changed since is checked
     * here, at the model's first use, rather than read as its default in a pass */
    char env_err[256];
    if (ft_env_check(env_err, sizeof env_err) != FT_OK) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "%s", env_err);
    if (!path) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_model_load: path is NULL");
    ft_model_options o = opt ? *opt : ft_model_options_default();
    if (!ft_dtype_is_float(o.dtype))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "model dtype must be f32, f16 or bf16, not %s",
                            ft_dtype_name(o.dtype));
    if ((unsigned)o.mode > FT_MODE_STATIC)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "invalid mode %d", (int)o.mode);
    if ((unsigned)o.weights > FT_WEIGHTS_NONE)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "invalid weights option %d", (int)o.weights);
    if (o.weights == FT_WEIGHTS_NONE) o.mode = FT_MODE_EAGER; /* no plan without weights */

    ft_model *m = (ft_model *)calloc(1, sizeof *m);
    if (!m) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    m->ctx = ctx;
    m->opt = o;
    m->dtype = o.dtype;
    m->rng = o.seed;
    ft_config cfg;
    memset(&cfg, 0, sizeof cfg);
    ft_status st;
    const ft_arch *preset_arch = NULL;
    const ft_preset *preset = NULL;
    if (is_dir(path)) {
        char file[1024];
        snprintf(m->source, sizeof m->source, "%s", path);
        snprintf(file, sizeof file, "%s/config.json", path);
        st = ft_config_load(ctx, file, &cfg);
        if (st == FT_OK) {
            snprintf(file, sizeof file, "%s/model.safetensors", path);
            /* a description needs the config only: without a checkpoint the shapes
             * come from the config alone (with one, every shape is checked against it) */
            if (o.weights != FT_WEIGHTS_NONE || access(file, F_OK) == 0) st = ft_st_open_ex(ctx, file, true, &m->st); /* unread buffers may have any dtype */
            if (st == FT_ERR_IO) { /* say what the directory holds instead, when it is a known form */
                char other[1100];
                snprintf(other, sizeof other, "%s/model.safetensors.index.json", path);
                bool sharded = access(other, F_OK) == 0;
                snprintf(other, sizeof other, "%s/pytorch_model.bin", path);
                bool pickle = access(other, F_OK) == 0;
                if (sharded)
                    ft_error_prefix(ctx, "%s holds a sharded checkpoint (model.safetensors.index.json), "
                                         "which is not supported: save it as one model.safetensors", path);
                else if (pickle)
                    ft_error_prefix(ctx, "%s holds pytorch_model.bin only: ftengine reads safetensors "
                                         "(transformers' save_pretrained writes model.safetensors)", path);
            }
        }
    } else if ((preset = ft_preset_find(path, &preset_arch)) != NULL) {
        snprintf(m->source, sizeof m->source, "preset:%s", path);
        st = ft_config_from_string(ctx, preset->config_json, m->source, &cfg);
    } else {
        char names[640];
        name_list(names, sizeof names, ft_preset_name, ": ftengine info --presets lists them");
        st = ft_set_error(ctx, FT_ERR_NOT_FOUND, "'%s' is neither a model directory nor a preset (%s)",
                          path, names);
    }
    if (st == FT_OK) {
        const char *mt = NULL;
        st = ft_config_string(&cfg, "model_type", NULL, &mt);
        if (st == FT_OK && !mt)
            st = ft_config_error(&cfg, "missing key 'model_type' (which architecture is this?)");
        if (st == FT_OK) {
            m->arch = ft_arch_find(mt);
            if (!m->arch) {
                char names[512];
                name_list(names, sizeof names, arch_type, "");
                st = ft_config_error(&cfg, "model_type '%s' is not supported (supported: %s)", mt, names);
            }
        }
    }
    if (st == FT_OK) {
        double std = 0.02;
        st = ft_config_float(&cfg, "initializer_range", 0.02, &std);
        m->init_std = (float)std;
    }
    if (st == FT_OK) st = m->arch->load(m, &cfg);
    if (st == FT_OK) st = ctx->status;
    ft_config_free(&cfg);
    ft_st_close(m->st);
    m->st = NULL;
    if (st != FT_OK) {
        ft_model_free(m);
        return st;
    }
    *out = m;
    return FT_OK;
}

void ft_model_free(ft_model *m) {
    /* not under another thread's forward: leaking it beats freeing what runs */
    if (!m || ft_ctx_enter(m->ctx, __func__) != FT_OK) return;
    ft_ctx *ctx = m->ctx;
    release_outputs(m);
    ft_graph_free(m);
    if (m->arch && m->arch->destroy) m->arch->destroy(m);
    for (int i = 0; i < m->n_params; i++) ft_tensor_free_persistent(m->params[i]);
    free(m->params);
    ft_st_close(m->st);
    free(m);
    ft_ctx_leave(ctx);
}

/* ---- activations ---- */

static const struct {
    const char *name;
    ft_act_kind act;
} act_names[] = {
    {"gelu", FT_ACTK_GELU},           {"gelu_python", FT_ACTK_GELU},
    {"gelu_new", FT_ACTK_GELU_TANH},  {"gelu_pytorch_tanh", FT_ACTK_GELU_TANH},
    {"gelu_fast", FT_ACTK_GELU_TANH}, {"gelu_accurate", FT_ACTK_GELU_TANH},
    {"relu", FT_ACTK_RELU},           {"tanh", FT_ACTK_TANH},
    {"sigmoid", FT_ACTK_SIGMOID},     {"silu", FT_ACTK_SILU},
    {"swish", FT_ACTK_SILU},          {"quick_gelu", FT_ACTK_QUICK_GELU},
    {"linear", FT_ACTK_LINEAR},       {"relu6", FT_ACTK_RELU6},
};

ft_status ft_model_act_parse(ft_config *cfg, const char *key, const char *def, ft_act_kind *out) {
    const char *a = NULL;
    ft_status st = ft_config_string(cfg, key, def, &a);
    if (st) return st;
    for (size_t i = 0; i < sizeof act_names / sizeof act_names[0]; i++)
        if (!strcmp(a, act_names[i].name)) {
            *out = act_names[i].act;
            return FT_OK;
        }
    return ft_config_error(cfg, "%s '%s' is not supported (gelu, gelu_python, gelu_new, gelu_pytorch_tanh, "
                                "gelu_fast, gelu_accurate, relu, relu6, tanh, sigmoid, silu, swish, quick_gelu, linear)",
                           key, a);
}

ft_tensor *ft_model_act(ft_ctx *ctx, ft_act_kind act, ft_tensor *x) {
    switch (act) {
    case FT_ACTK_GELU: return ft_gelu(ctx, x);
    case FT_ACTK_GELU_TANH: return ft_gelu_tanh(ctx, x);
    case FT_ACTK_RELU: return ft_relu(ctx, x);
    case FT_ACTK_TANH: return ft_tanh(ctx, x);
    case FT_ACTK_SIGMOID: return ft_sigmoid(ctx, x);
    case FT_ACTK_SILU: return ft_silu(ctx, x);
    case FT_ACTK_RELU6: return ft_relu6(ctx, x);
    case FT_ACTK_QUICK_GELU: return ft_mul(ctx, x, ft_sigmoid(ctx, ft_scale(ctx, x, 1.702f, 0.0f)));
    default: /* identity as a view: callers release x after the activation */
        return x ? ft_reshape(ctx, x, x->ndim, x->ne) : NULL;
    }
}

/* ---- shared by the text models ---- */

ft_tensor *ft_split_heads(ft_ctx *ctx, ft_tensor *x, int64_t heads) {
    if (!x) return NULL;
    ft_tensor *v = ft_reshape(ctx, x, 4,
                              FT_SHAPE(ft_tensor_dim(x, 0), ft_tensor_dim(x, 1), heads, ft_tensor_dim(x, 2) / heads));
    return ft_permute(ctx, v, (const int[]){0, 2, 1, 3});
}

/* The mask value a forward sees: a float mask is uploaded in the model dtype (as
 * HF casts it to the model's dtype), then cast to f32. */
static float mask_value_seen(const ft_model *m, const ft_host_tensor *t, int64_t i) {
    double v = ft_host_value_at(t, i);
    if (!ft_dtype_is_float(t->dtype)) return (float)v;
    switch (m->dtype) {
    case FT_DTYPE_F16: return ft_f16_to_f32(ft_f32_to_f16((float)v));
    case FT_DTYPE_BF16: return ft_bf16_to_f32(ft_f32_to_bf16((float)v));
    default: return (float)v;
    }
}

/* (1 - m) * min in f32, two roundings as HF's two torch ops; `volatile` keeps the
 * compiler from contracting it into one fma (the kernels round twice too). */
static float hf_additive(float mv, float min_value) {
    volatile float d = 1.0f - mv;
    return d * min_value;
}

ft_status ft_check_mask_values(ft_model *m, const char *input, float min_value) {
    const ft_host_tensor *t = ft_model_host_input(m, input);
    if (!t || !t->data) return FT_OK; /* shapes only */
    int64_t n = ft_host_numel(t), cols = t->shape[t->ndim - 1];
    for (int64_t i = 0; i < n; i++) {
        float v = mask_value_seen(m, t, i);
        if (!isfinite(hf_additive(v, min_value))) {
            double span = (double)FLT_MAX / fabs((double)min_value);
            return ft_set_error(m->ctx, FT_ERR_INVALID_ARG,
                                "input '%s' holds %g at [%lld, %lld]: the additive mask (1 - m) * %g that "
                                "Hugging Face computes from it is not finite in f32, and would give NaN; "
                                "1 keeps a position, 0 masks it (accepted: %g <= m <= %g)",
                                input, ft_host_value_at(t, i), (long long)(i / cols), (long long)(i % cols),
                                (double)min_value, 1.0 - span, 1.0 + span);
        }
    }
    return FT_OK;
}

ft_tensor *ft_additive_mask(ft_ctx *ctx, ft_tensor *mask, float min_value) {
    if (!mask) return NULL;
    ft_tensor *one_minus = ft_scale(ctx, ft_cast(ctx, mask, FT_DTYPE_F32), -1.0f, 1.0f);
    /* beta -0: x * min + (-0) is x * min for every x, -0 included (HF's 0 * min) */
    ft_tensor *add = ft_scale(ctx, one_minus, min_value, -0.0f);
    if (!add) return NULL;
    return ft_reshape(ctx, add, 4, FT_SHAPE(ft_tensor_dim(add, 0), 1, 1, ft_tensor_dim(add, 1)));
}

ft_status ft_validate_text_inputs(ft_model *m, int64_t max_pos, int64_t vocab, int64_t type_vocab) {
    const ft_host_tensor *ids = ft_model_host_input(m, "input_ids");
    if (!ids) return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "%s needs input 'input_ids'", m->arch_name);
    if (ids->ndim != 2)
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "input 'input_ids' must be [batch, seq], got rank %d",
                            ids->ndim);
    if (max_pos > 0 && ids->shape[1] > max_pos)
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "sequence length %lld exceeds max_position_embeddings %lld",
                            (long long)ids->shape[1], (long long)max_pos);
    ft_status st = ft_check_ids(m, "input_ids", 0, vocab);
    if (st) return st;
    const char *other[] = {"attention_mask", "token_type_ids"};
    for (int i = 0; i < 2; i++) {
        const ft_host_tensor *t = ft_model_host_input(m, other[i]);
        if (!t) continue;
        if (t->ndim != 2 || t->shape[0] != ids->shape[0] || t->shape[1] != ids->shape[1])
            return ft_set_error(m->ctx, FT_ERR_SHAPE, "input '%s' must have the shape of input_ids [%lld, %lld]",
                                other[i], (long long)ids->shape[0], (long long)ids->shape[1]);
    }
    return ft_check_ids(m, "token_type_ids", 0, type_vocab);
}

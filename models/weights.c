/*
 * weights.c - fetching model parameters during load.
 *
 * A parameter is asked for by its bare HF name and expected shape. From a
 * checkpoint it is looked up as written, with each of the architecture's
 * base-model prefixes ("bert." ...), and with the legacy spellings HF renames
 * on load (any "gamma"/"beta" in a key, weight_g/weight_v vs parametrizations); its
 * shape is checked against the config, its dtype converted to the model's,
 * and it is uploaded once. For a preset it is random-initialised instead:
 * normal(0, initializer_range) for matrices, zeros for biases, ones for norm
 * scales and running variances, so latency studies run at real sizes.
 */
#include "model.h"
#include "../engine/safetensors.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Replaces the suffix `from` of name with `to` into out; false if name lacks it. */
static bool swap_suffix(const char *name, const char *from, const char *to, char *out, size_t size) {
    if (!ends_with(name, from)) return false;
    size_t keep = strlen(name) - strlen(from);
    snprintf(out, size, "%.*s%s", (int)keep, name, to);
    return true;
}

/* name with its last `from` replaced by `to` into out; false if name lacks it. */
static bool swap_last(const char *name, const char *from, const char *to, char *out, size_t size) {
    const char *hit = NULL;
    for (const char *p = strstr(name, from); p; p = strstr(p + 1, from)) hit = p;
    if (!hit) return false;
    snprintf(out, size, "%.*s%s%s", (int)(hit - name), name, to, hit + strlen(from));
    return true;
}

/* Spellings of one parameter name, the canonical one first. HF renames every key
 * holding "gamma" or "beta" to "weight" / "bias" on load (old LayerNorm.gamma,
 * layernorm.beta, ...): the canonical name is also looked for with its last
 * "weight" or "bias" spelled that way. */
static int spellings(const char *name, char out[4][256]) {
    static const char *const renames[][2] = {
        {".weight_g", ".parametrizations.weight.original0"},
        {".weight_v", ".parametrizations.weight.original1"},
        {".parametrizations.weight.original0", ".weight_g"},
        {".parametrizations.weight.original1", ".weight_v"},
    };
    int n = 0;
    snprintf(out[n++], 256, "%s", name);
    if (swap_last(name, "weight", "gamma", out[n], 256) || swap_last(name, "bias", "beta", out[n], 256)) n++;
    for (size_t i = 0; i < sizeof renames / sizeof renames[0] && n < 4; i++)
        if (swap_suffix(name, renames[i][0], renames[i][1], out[n], 256)) n++;
    return n;
}

/* Hugging Face's rename of every loaded key (_load_state_dict_into_model, 4.36):
 * a key containing "beta" has each "beta" replaced by "bias", else one containing
 * "gamma" has each "gamma" replaced by "weight" (substrings, not suffixes). */
static void hf_fix_key(const char *key, char *out, size_t size) {
    const char *from = strstr(key, "beta") ? "beta" : "gamma", *to = strstr(key, "beta") ? "bias" : "weight";
    size_t k = 0, fl = strlen(from);
    for (const char *p = key; *p && k + 1 < size;) {
        if (!strncmp(p, from, fl)) {
            k += (size_t)snprintf(out + k, size - k, "%s", to);
            p += fl;
        } else {
            out[k++] = *p++;
        }
    }
    out[k < size ? k : size - 1] = '\0';
}

/* The file's tensor whose renamed key (hf_fix_key), with or without a prefix, is name. */
static const ft_st_tensor *lookup_renamed(ft_model *m, const char *name, char *found, size_t fsize) {
    for (int i = 0, n = ft_st_count(m->st); i < n; i++) {
        const ft_st_tensor *t = ft_st_get(m->st, i);
        if (!strstr(t->name, "gamma") && !strstr(t->name, "beta")) continue;
        char fixed[640];
        hf_fix_key(t->name, fixed, sizeof fixed);
        bool hit = !strcmp(fixed, name);
        for (const char *const *p = m->arch->prefixes; !hit && p && *p; p++)
            hit = !strncmp(fixed, *p, strlen(*p)) && !strcmp(fixed + strlen(*p), name);
        if (hit) {
            snprintf(found, fsize, "%.400s", t->name);
            return t;
        }
    }
    return NULL;
}

static const ft_st_tensor *lookup(ft_model *m, const char *name, char *found, size_t fsize) {
    if (!m->st) return NULL;
    char sp[4][256];
    int ns = spellings(name, sp);
    for (int i = 0; i < ns; i++) {
        const ft_st_tensor *t = ft_st_find(m->st, sp[i]);
        if (t) {
            snprintf(found, fsize, "%.255s", sp[i]);
            return t;
        }
        for (const char *const *p = m->arch->prefixes; p && *p; p++) {
            char full[640];
            snprintf(full, sizeof full, "%.63s%.255s", *p, sp[i]);
            t = ft_st_find(m->st, full);
            if (t) {
                snprintf(found, fsize, "%.400s", full);
                return t;
            }
        }
    }
    return lookup_renamed(m, name, found, fsize);
}

/* ---- random initialisation ---- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((double)(splitmix(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

static void random_fill(ft_model *m, const char *name, float *dst, int64_t n) {
    float constant = NAN;
    if (ends_with(name, "running_var") || ends_with(name, "gru_rel_pos_const")) constant = 1.0f;
    else if (ends_with(name, ".bias") || ends_with(name, "running_mean") || ends_with(name, "_bias"))
        constant = 0.0f;
    else if (ends_with(name, "norm.weight") || ends_with(name, "Norm.weight") ||
             ends_with(name, "normalization.weight") || ends_with(name, "bn1.weight") ||
             ends_with(name, "bn2.weight") || ends_with(name, "bn3.weight") || ends_with(name, "_bn.weight") ||
             ends_with(name, "batchnorm.weight") || ends_with(name, "downsampling_layer.0.weight"))
        constant = 1.0f;
    if (!isnan(constant)) {
        for (int64_t i = 0; i < n; i++) dst[i] = constant;
        return;
    }
    float std = m->init_std > 0 ? m->init_std : 0.02f;
    for (int64_t i = 0; i < n; i += 2) { /* Box-Muller pairs */
        double u1 = uniform01(&m->rng), u2 = uniform01(&m->rng);
        double r = sqrt(-2.0 * log(u1));
        dst[i] = (float)(r * cos(2 * M_PI * u2) * std);
        if (i + 1 < n) dst[i + 1] = (float)(r * sin(2 * M_PI * u2) * std);
    }
}

/* ---- fetching ---- */

/* 2^40 elements (4 TiB in f32): more than any device holds, far from int64 overflow */
#define FT_MAX_WEIGHT_ELEMS ((int64_t)1 << 40)

static bool is_buffer(const char *name) {
    return ends_with(name, "running_mean") || ends_with(name, "running_var") ||
           ends_with(name, "num_batches_tracked");
}

static ft_status add_param(ft_model *m, ft_tensor *t, const char *name) {
    if (m->n_params == m->cap_params) {
        int nc = m->cap_params ? m->cap_params * 2 : 64;
        ft_tensor **p = (ft_tensor **)realloc(m->params, (size_t)nc * sizeof *p);
        if (!p) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
        m->params = p;
        m->cap_params = nc;
    }
    m->params[m->n_params++] = t;
    if (!is_buffer(name)) m->param_count += ft_numel(t);
    return FT_OK;
}

static const char *source_file(const ft_model *m) {
    return m->st ? ft_st_path(m->st) : m->source;
}

/* out [r, c] = in [c, r] transposed, elements of es bytes. */
static void transpose2d(void *out, const void *in, int64_t r, int64_t c, size_t es) {
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            memcpy((char *)out + (size_t)(i * c + j) * es, (const char *)in + (size_t)(j * r + i) * es, es);
}

/* transposed: a 2-d parameter whose file holds shape[1] x shape[0] (a Conv1D's
 * [in, out]); it is stored as shape, transposed once here. */
static ft_tensor *fetch(ft_model *m, ft_dtype dtype, int ndim, const int64_t *shape, const char *name,
                        bool transposed) {
    ft_ctx *ctx = m->ctx;
    if (ctx->status != FT_OK) return NULL;
    /* sizes come from config.json: refuse what no device could hold before any
     * arithmetic on them can overflow */
    int64_t total = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || shape[i] > FT_MAX_WEIGHT_ELEMS || (shape[i] && total > FT_MAX_WEIGHT_ELEMS / shape[i])) {
            ft_set_error(ctx, FT_ERR_SHAPE, "%s: the config implies an impossible size for '%s' (dimension %d is %lld)",
                         source_file(m), name, i, (long long)shape[i]);
            return NULL;
        }
        total *= shape[i];
    }
    ft_tensor *t = ft_tensor_new_persistent(ctx);
    if (!t) return NULL;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->ne[i] = shape[i];
    ft_tensor_set_contiguous_strides(t);
    t->flags |= FT_TF_WEIGHT;
    snprintf(t->name, sizeof t->name, "%s", name);
    int64_t n = ft_numel(t);
    char want[128];
    ft_shape_str(t, want, sizeof want);
    if (transposed) /* the file's layout is what a mismatch names */
        snprintf(want, sizeof want, "[%lld,%lld] ", (long long)shape[1], (long long)shape[0]);

    float *f32 = NULL;
    const void *src = NULL;
    ft_dtype src_t = FT_DTYPE_F32;
    if (m->st) {
        char found[640];
        const ft_st_tensor *st = lookup(m, name, found, sizeof found);
        if (!st) {
            ft_set_error(ctx, FT_ERR_NOT_FOUND, "%s: tensor '%s' not found", source_file(m), name);
            goto fail;
        }
        if (ft_st_unsupported_dtype(m->st, st)) {
            ft_set_error(ctx, FT_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s, which the engine does not read "
                         "(expected a float dtype)", source_file(m), found, ft_st_unsupported_dtype(m->st, st));
            goto fail;
        }
        if (!ft_dtype_is_float(st->dtype)) {
            ft_set_error(ctx, FT_ERR_FORMAT, "%s: tensor '%s' has dtype %s, expected a float dtype",
                         source_file(m), found, ft_dtype_name(st->dtype));
            goto fail;
        }
        bool same = st->ndim == ndim;
        for (int i = 0; same && i < ndim; i++) same = st->shape[i] == shape[transposed ? ndim - 1 - i : i];
        if (!same) {
            char got[128] = "[";
            size_t k = 1;
            for (int i = 0; i < st->ndim; i++)
                k += (size_t)snprintf(got + k, sizeof got - k, "%s%lld", i ? "," : "",
                                      (long long)st->shape[i]);
            snprintf(got + k, sizeof got - k, "]");
            ft_set_error(ctx, FT_ERR_SHAPE,
                         "%s: tensor '%s' has shape %s, but the config implies %.*s", source_file(m),
                         found, got, (int)(strchr(want, ' ') ? strchr(want, ' ') - want : 64), want);
            goto fail;
        }
        src = st->data;
        src_t = st->dtype;
    } else if (m->opt.weights != FT_WEIGHTS_NONE) {
        f32 = (float *)malloc((size_t)(n ? n : 1) * sizeof(float));
        if (!f32) {
            ft_set_error(ctx, FT_ERR_OOM, "out of host memory initialising '%s'", name);
            goto fail;
        }
        random_fill(m, name, f32, n);
        src = f32;
    }
    if (m->opt.weights == FT_WEIGHTS_NONE) { /* a description: the shape is all there is */
        if (add_param(m, t, name) != FT_OK) goto fail;
        return t;
    }
    if (ft_tensor_alloc_storage(ctx, t) != FT_OK) {
        ft_error_prefix(ctx, "%s: loading '%s'", source_file(m), name);
        goto fail;
    }
    size_t bytes = ft_nbytes(t);
    if (src_t == dtype && !(transposed && m->st)) {
        if (ft_weight_store(ctx, t, src, bytes) != FT_OK) goto fail;
    } else {
        void *tmp = malloc(bytes ? bytes : 1), *tr = transposed && m->st ? malloc(bytes ? bytes : 1) : NULL;
        if (!tmp || (transposed && m->st && !tr)) {
            free(tmp);
            free(tr);
            ft_set_error(ctx, FT_ERR_OOM, "out of host memory converting '%s'", name);
            goto fail;
        }
        ft_convert_host(dtype, tmp, src_t, src, n);
        if (tr) transpose2d(tr, tmp, shape[0], shape[1], ft_dtype_size(dtype));
        ft_status st = ft_weight_store(ctx, t, tr ? tr : tmp, bytes);
        free(tmp);
        free(tr);
        if (st != FT_OK) goto fail;
    }
    free(f32);
    if (add_param(m, t, name) != FT_OK) {
        ft_tensor_free_persistent(t);
        return NULL;
    }
    return t;
fail:
    free(f32);
    ft_tensor_free_persistent(t);
    return NULL;
}

ft_tensor *ft_weight(ft_model *m, int ndim, const int64_t *shape, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return fetch(m, m->dtype, ndim, shape, name, false);
}

ft_tensor *ft_weight_f32(ft_model *m, int ndim, const int64_t *shape, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return fetch(m, FT_DTYPE_F32, ndim, shape, name, false);
}

ft_tensor *ft_weight_transposed(ft_model *m, int64_t out, int64_t in, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return fetch(m, m->dtype, 2, (const int64_t[]){out, in}, name, true);
}

bool ft_weight_exists(ft_model *m, const char *fmt, ...) {
    char name[256], found[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return lookup(m, name, found, sizeof found) != NULL;
}

ft_status ft_weights_pack(ft_model *m, ft_tensor *const *parts, int n) {
    ft_ctx *ctx = m->ctx;
    if (ctx->status != FT_OK) return ctx->status;
    if (m->opt.mode == FT_MODE_EAGER || n < 2) return FT_OK;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const ft_tensor *p = parts[i];
        if (!p || !p->block || p->dtype != parts[0]->dtype || !ft_tensor_contiguous(p) ||
            ft_nbytes(p) % 256 != 0)
            return FT_OK;
        total += ft_nbytes(p);
    }
    ft_block *b = ft_allocator_alloc(&ctx->alloc, ctx, total);
    if (!b) return ctx->status;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        ft_status st = ft_tensor_copy_raw(ctx, (char *)b->ptr + off, parts[i]);
        if (st != FT_OK) {
            ft_block_unref(b);
            return st;
        }
        off += ft_nbytes(parts[i]);
    }
    off = 0;
    for (int i = 0; i < n; i++) {
        ft_tensor *p = parts[i];
        ft_block_unref(p->block); /* stream-ordered: the copy above runs first */
        b->refs++;
        p->block = b;
        p->data = (char *)b->ptr + off;
        ft_tensor_mark_written(p); /* same values, new home: caches keyed on the old one drop it */
        off += ft_nbytes(p);
    }
    ft_block_unref(b); /* the parts hold the block now */
    return FT_OK;
}

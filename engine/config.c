/*
 * config.c - typed getters over a parsed Hugging Face config.json.
 *
 * HF's save_pretrained leaves out keys equal to the class default, so "absent"
 * is normal and takes the caller's default; a present key of the wrong type is
 * always an error, never coerced, because a coerced 12.5 layers or "768"
 * hidden size would build a different model without anyone noticing. JSON
 * null counts as absent (HF writes null for "use the default").
 *
 * Keys that are sizes or counts are range-checked here, by name, for every
 * model that reads them, so the message names the key at fault
 * ("key 'intermediate_size' is 0, must be at least 1") instead of a model's
 * summary of several values. A string holding NUL (\u0000) is refused: C code
 * compares it up to the NUL, so "bert\u0000x" would pass for "bert".
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void config_init(ft_ctx *ctx, ft_config *out, const char *source) {
    memset(out, 0, sizeof *out);
    out->ctx = ctx;
    snprintf(out->source, sizeof out->source, "%s", source ? source : "<config>");
}

static ft_status config_check_root(ft_config *c) {
    if (ft_json_type_of(c->root) != FT_JSON_OBJECT) {
        ft_json_type t = ft_json_type_of(c->root);
        ft_json_free(c->root);
        c->root = NULL;
        return ft_set_error(c->ctx, FT_ERR_FORMAT,
                            "%s: the config must be a JSON object, got %s %s", c->source,
                            t == FT_JSON_ARRAY ? "an" : "a", ft_json_type_name(t));
    }
    return FT_OK;
}

ft_status ft_config_load(ft_ctx *ctx, const char *path, ft_config *out) {
    if (!out) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_config_load: out is NULL");
    config_init(ctx, out, path);
    if (!path) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_config_load: path is NULL");
    ft_status st = ft_json_parse_file(ctx, path, &out->root);
    if (st != FT_OK) return st;
    return config_check_root(out);
}

ft_status ft_config_from_string(ft_ctx *ctx, const char *json, const char *source, ft_config *out) {
    if (!out) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_config_from_string: out is NULL");
    config_init(ctx, out, source);
    if (!json) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_config_from_string: json is NULL");
    ft_status st = ft_json_parse(ctx, json, strlen(json), out->source, &out->root);
    if (st != FT_OK) return st;
    return config_check_root(out);
}

void ft_config_free(ft_config *c) {
    if (!c) return;
    ft_json_free(c->root);
    c->root = NULL;
}

/* Finds the first present, non-null spelling of "a|b|c"; its name goes to `name`. */
static const ft_json *config_lookup(const ft_config *c, const char *key, char *name, size_t size) {
    if (!c || !c->root || !key) return NULL;
    const char *p = key;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len < size) {
            memcpy(name, p, len);
            name[len] = 0;
            const ft_json *v = ft_json_get(c->root, name);
            if (v && ft_json_type_of(v) != FT_JSON_NULL) return v;
        }
        if (!bar) break;
        p = bar + 1;
    }
    return NULL;
}

static ft_status config_args(ft_config *c, const char *key, const void *out, const char *fn) {
    if (!c) return FT_ERR_INVALID_ARG;
    if (!key || !out) return ft_set_error(c->ctx, FT_ERR_INVALID_ARG, "%s: key or out is NULL", fn);
    if (!c->root)
        return ft_set_error(c->ctx, FT_ERR_INVALID_ARG, "%s: config '%s' is not loaded", fn,
                            c->source);
    return FT_OK;
}

/* "string", "number 12.5", "array", ... for messages about a value of the wrong type */
static const char *describe(const ft_json *v, char *buf, size_t size) {
    ft_json_type t = ft_json_type_of(v);
    if (t == FT_JSON_NUMBER) {
        double x = ft_json_number(v);
        char num[40];
        snprintf(num, sizeof num, "%.15g", x);
        if (strtod(num, NULL) != x) snprintf(num, sizeof num, "%.17g", x);
        /* 12.0 or 1e3 reads like an integer in the message; say why it is not one */
        const char *why = "";
        if (!ft_json_is_integer(v) && x == floor(x))
            why = fabs(x) >= 9.2e18 ? " (outside the int64 range)"
                                    : " (written with a fraction or exponent)";
        snprintf(buf, size, "number %s%s", num, why);
    } else if (t == FT_JSON_STRING)
        snprintf(buf, size, "string \"%.40s\"", ft_json_string(v));
    else
        snprintf(buf, size, "%s", ft_json_type_name(t));
    return buf;
}

/* The range of a key that is a size or a count. Known keys have their own row
 * (a layer count may be 0, a hidden size may not; counts of layers and heads stop
 * at 65536, where a model would be absurd long before memory runs out); any other
 * key named like a size or count (num_*, n_*, *_size(s), *_layers, *_heads, *_dim)
 * is at least 0. Returns false for keys that are neither (ids, flags...). */
#define CNT 65536
static bool key_range(const char *name, int64_t *min, int64_t *max) {
    static const struct { const char *key; int64_t min, max; } rows[] = {
        {"num_hidden_layers", 0, CNT}, {"n_layers", 0, CNT}, {"n_layer", 0, CNT}, {"num_decoder_layers", 0, CNT},
        {"type_vocab_size", 0, INT32_MAX}, {"vocab_size", 1, INT32_MAX}, {"hidden_size", 1, INT32_MAX},
        {"dim", 1, INT32_MAX}, {"d_model", 1, INT32_MAX}, {"n_embd", 1, INT32_MAX},
        {"num_attention_heads", 1, CNT}, {"n_heads", 1, CNT}, {"n_head", 1, CNT},
        {"intermediate_size", 1, INT32_MAX}, {"hidden_dim", 1, INT32_MAX}, {"d_inner", 1, INT32_MAX},
        {"n_inner", 1, INT32_MAX}, {"d_head", 1, INT32_MAX}, {"max_position_embeddings", 1, INT32_MAX},
        {"n_positions", 1, INT32_MAX}, {"embedding_size", 1, INT32_MAX}, {"intra_bottleneck_size", 1, INT32_MAX},
        {"num_feedforward_networks", 1, CNT}, {"num_channels", 1, INT32_MAX}, {"width_multiplier", 1, CNT},
        {"num_conv_pos_embeddings", 1, INT32_MAX}, {"num_conv_pos_embedding_groups", 1, CNT},
        {"num_buckets", 1, INT32_MAX}, {"max_bucket_distance", 1, INT32_MAX}, {"image_size", 1, INT32_MAX},
        {"patch_size", 1, INT32_MAX}, {"block_sizes", 1, CNT}, {"block_repeats", 1, CNT},
        {"conv_dim", 1, INT32_MAX}, {"conv_kernel", 1, INT32_MAX}, {"conv_stride", 1, INT32_MAX},
        {"depths", 1, CNT}, {"hidden_sizes", 1, INT32_MAX},
    };
    *max = INT32_MAX;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (!strcmp(rows[i].key, name)) {
            *min = rows[i].min;
            *max = rows[i].max;
            return true;
        }
    size_t n = strlen(name);
    static const char *const suffixes[] = {"_size", "_sizes", "_layers", "_heads", "_dim"};
    bool like = !strncmp(name, "num_", 4) || !strncmp(name, "n_", 2);
    for (size_t i = 0; !like && i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t k = strlen(suffixes[i]);
        like = n > k && !strcmp(name + n - k, suffixes[i]);
    }
    *min = 0;
    return like;
}

static ft_status check_count(ft_config *c, const char *name, int64_t v, int elem) {
    int64_t min, max;
    if (!key_range(name, &min, &max) || (v >= min && v <= max)) return FT_OK;
    char where[32] = "";
    if (elem >= 0) snprintf(where, sizeof where, " element %d", elem);
    if (v > max)
        return ft_config_error(c, "key '%s'%s is %lld, at most %lld is supported", name, where, (long long)v,
                               (long long)max);
    return ft_config_error(c, "key '%s'%s is %lld, must be at least %lld (it is a size or a count)", name, where,
                           (long long)v, (long long)min);
}

static ft_status wrong_type(ft_config *c, const char *name, const char *want, const ft_json *v) {
    char d[96];
    return ft_set_error(c->ctx, FT_ERR_FORMAT, "%s: key '%s' must be %s, got %s", c->source, name,
                        want, describe(v, d, sizeof d));
}

bool ft_config_has(const ft_config *c, const char *key) {
    char name[256];
    return config_lookup(c, key, name, sizeof name) != NULL;
}

ft_status ft_config_int(ft_config *c, const char *key, int64_t def, int64_t *out) {
    ft_status st = config_args(c, key, out, "ft_config_int");
    if (st != FT_OK) return st;
    char name[256];
    const ft_json *v = config_lookup(c, key, name, sizeof name);
    if (!v) {
        *out = def;
        return FT_OK;
    }
    if (!ft_json_is_integer(v)) return wrong_type(c, name, "an integer", v);
    *out = ft_json_int(v);
    /* no Hugging Face size, count or id needs more; beyond it, shape arithmetic
     * downstream could overflow */
    if (*out > INT32_MAX || *out < -(int64_t)INT32_MAX)
        return ft_config_error(c, "'%s' is %lld, out of range (at most %d in magnitude)", name,
                               (long long)*out, INT32_MAX);
    return check_count(c, name, *out, -1);
}

ft_status ft_config_float(ft_config *c, const char *key, double def, double *out) {
    ft_status st = config_args(c, key, out, "ft_config_float");
    if (st != FT_OK) return st;
    char name[256];
    const ft_json *v = config_lookup(c, key, name, sizeof name);
    if (!v) {
        *out = def;
        return FT_OK;
    }
    if (ft_json_type_of(v) != FT_JSON_NUMBER) return wrong_type(c, name, "a number", v);
    *out = ft_json_number(v);
    return FT_OK;
}

ft_status ft_config_bool(ft_config *c, const char *key, bool def, bool *out) {
    ft_status st = config_args(c, key, out, "ft_config_bool");
    if (st != FT_OK) return st;
    char name[256];
    const ft_json *v = config_lookup(c, key, name, sizeof name);
    if (!v) {
        *out = def;
        return FT_OK;
    }
    if (ft_json_type_of(v) != FT_JSON_BOOL) return wrong_type(c, name, "true or false", v);
    *out = ft_json_bool(v);
    return FT_OK;
}

ft_status ft_config_string(ft_config *c, const char *key, const char *def, const char **out) {
    ft_status st = config_args(c, key, out, "ft_config_string");
    if (st != FT_OK) return st;
    char name[256];
    const ft_json *v = config_lookup(c, key, name, sizeof name);
    if (!v) {
        *out = def;
        return FT_OK;
    }
    if (ft_json_type_of(v) != FT_JSON_STRING) return wrong_type(c, name, "a string", v);
    if (ft_json_string_len(v) != strlen(ft_json_string(v)))
        return ft_config_error(c, "key '%s' is \"%.40s\\u0000...\": a string holding a NUL character (\\u0000)",
                               name, ft_json_string(v));
    *out = ft_json_string(v);
    return FT_OK;
}

ft_status ft_config_int_array(ft_config *c, const char *key, const int64_t *def, int n_def,
                              int64_t *out, int max, int *n) {
    ft_status st = config_args(c, key, out, "ft_config_int_array");
    if (st != FT_OK) return st;
    if (!n || max < 0 || n_def < 0 || (n_def > 0 && !def))
        return ft_set_error(c->ctx, FT_ERR_INVALID_ARG,
                            "ft_config_int_array('%s'): bad n, max or default", key);
    char name[256];
    const ft_json *v = config_lookup(c, key, name, sizeof name);
    if (!v) {
        if (n_def > max)
            return ft_set_error(c->ctx, FT_ERR_INVALID_ARG,
                                "ft_config_int_array('%s'): default has %d values, room for %d",
                                key, n_def, max);
        for (int i = 0; i < n_def; i++)
            out[i] = def[i];
        *n = n_def;
        return FT_OK;
    }
    if (ft_json_type_of(v) != FT_JSON_ARRAY) return wrong_type(c, name, "an array of integers", v);
    int len = ft_json_len(v);
    if (len > max)
        return ft_set_error(c->ctx, FT_ERR_UNSUPPORTED,
                            "%s: key '%s' has %d values, at most %d are supported", c->source, name,
                            len, max);
    for (int i = 0; i < len; i++) {
        const ft_json *e = ft_json_at(v, i);
        if (!ft_json_is_integer(e)) {
            char d[96];
            return ft_set_error(c->ctx, FT_ERR_FORMAT,
                                "%s: key '%s' element %d must be an integer, got %s", c->source,
                                name, i, describe(e, d, sizeof d));
        }
        out[i] = ft_json_int(e);
        if (out[i] > INT32_MAX || out[i] < -(int64_t)INT32_MAX)
            return ft_config_error(c, "'%s' element %d is %lld, out of range (at most %d in magnitude)",
                                   name, i, (long long)out[i], INT32_MAX);
        if ((st = check_count(c, name, out[i], i)) != FT_OK) return st;
    }
    *n = len;
    return FT_OK;
}

const char *ft_config_architecture(const ft_config *c) {
    if (!c || !c->root) return NULL;
    const ft_json *a = ft_json_get(c->root, "architectures");
    return ft_json_string(ft_json_at(a, 0));
}

ft_status ft_config_error(ft_config *c, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt ? fmt : "invalid configuration", ap);
    va_end(ap);
    if (!c) return FT_ERR_FORMAT;
    return ft_set_error(c->ctx, FT_ERR_FORMAT, "%s: %s", c->source, msg);
}

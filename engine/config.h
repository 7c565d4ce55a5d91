/*
 * config.h - typed access to a Hugging Face config.json.
 *
 * A key that is absent takes the default the caller passes (the HF default for
 * that model type); a key that is present with the wrong type (a string where
 * an integer belongs, a fraction for a layer count) is an error naming the
 * file and the key. Aliases cover the field names some configs use instead
 * (DistilBERT's "dim" for "hidden_size", Funnel's "d_model").
 */
#ifndef FT_CONFIG_H
#define FT_CONFIG_H

#include "json.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_config {
    ft_json *root;
    char source[512]; /* file path, or "preset:<name>" */
    ft_ctx *ctx;
} ft_config;

ft_status ft_config_load(ft_ctx *ctx, const char *path, ft_config *out);
ft_status ft_config_from_string(ft_ctx *ctx, const char *json, const char *source, ft_config *out);
void ft_config_free(ft_config *c);

bool ft_config_has(const ft_config *c, const char *key);
/* Each getter: `key` may be "a|b" to accept aliases (first present wins). */
ft_status ft_config_int(ft_config *c, const char *key, int64_t def, int64_t *out);
ft_status ft_config_float(ft_config *c, const char *key, double def, double *out);
ft_status ft_config_bool(ft_config *c, const char *key, bool def, bool *out);
/* String value (owned by the config); `def` may be NULL. null in JSON counts as absent. */
ft_status ft_config_string(ft_config *c, const char *key, const char *def, const char **out);
/* Integer array: up to `max` values into out, count in *n; absent -> def (n_def values). */
ft_status ft_config_int_array(ft_config *c, const char *key, const int64_t *def, int n_def,
                              int64_t *out, int max, int *n);
/* First element of "architectures", or NULL. */
const char *ft_config_architecture(const ft_config *c);
/* Records an error "<source>: <message>" (e.g. an invalid combination of values). */
ft_status ft_config_error(ft_config *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif

#endif /* FT_CONFIG_H */

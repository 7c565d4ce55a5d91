/*
 * json.h - a small strict JSON parser (RFC 8259) for config.json and the
 * safetensors header. Errors give "<source>:<line>:<col>: <what>".
 */
#ifndef FT_JSON_H
#define FT_JSON_H

#include "ft_internal.h"

#include <sys/stat.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ft_json_type {
    FT_JSON_NULL = 0,
    FT_JSON_BOOL,
    FT_JSON_NUMBER,
    FT_JSON_STRING,
    FT_JSON_ARRAY,
    FT_JSON_OBJECT
} ft_json_type;

typedef struct ft_json ft_json;

/* Parses `len` bytes of text; `source` names it in error messages. */
ft_status ft_json_parse(ft_ctx *ctx, const char *text, size_t len, const char *source,
                        ft_json **out);
ft_status ft_json_parse_file(ft_ctx *ctx, const char *path, ft_json **out);
/* Opens a file the loaders read (config.json, safetensors) without ever blocking:
 * a FIFO, socket, device or directory is refused by its type before it is opened
 * (opening a FIFO for reading waits for a writer) and again on the descriptor,
 * which is opened O_NONBLOCK and switched back to blocking reads once known to be
 * a regular file. FT_OK with *fd and *sb filled, or FT_ERR_IO naming the path. */
ft_status ft_open_regular(ft_ctx *ctx, const char *path, int *fd, struct stat *sb);
void ft_json_free(ft_json *j);

ft_json_type ft_json_type_of(const ft_json *j);
/* Member of an object by key (the last one if repeated), or NULL. */
const ft_json *ft_json_get(const ft_json *obj, const char *key);
/* Elements of an array, or members of an object. */
int ft_json_len(const ft_json *j);
const ft_json *ft_json_at(const ft_json *j, int i);
const char *ft_json_key_at(const ft_json *obj, int i);
double ft_json_number(const ft_json *j);
/* Whether the number was written without fraction or exponent and fits int64. */
bool ft_json_is_integer(const ft_json *j);
int64_t ft_json_int(const ft_json *j);
const char *ft_json_string(const ft_json *j); /* NUL-terminated, UTF-8 */
/* Byte length of a string value (differs from strlen when it holds \u0000). */
size_t ft_json_string_len(const ft_json *j);
bool ft_json_bool(const ft_json *j);
const char *ft_json_type_name(ft_json_type t);

#ifdef __cplusplus
}
#endif

#endif /* FT_JSON_H */

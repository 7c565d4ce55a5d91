/*
 * safetensors.h - strict reader and writer of the safetensors format.
 *
 * Layout: 8-byte little-endian u64 header length N, N bytes of JSON
 * (name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
 * "__metadata__" object of strings), then the raw little-endian data; offsets
 * are relative to the first byte after the header.
 *
 * The reader memory-maps the file and validates everything before returning:
 * header length within the file, JSON syntax, known dtypes (F32, F16, BF16,
 * I64, I32), shapes, offsets in range, byte counts matching dtype x shape, no
 * two tensors overlapping. Every error names the file, and the tensor when
 * there is one.
 */
#ifndef FT_SAFETENSORS_H
#define FT_SAFETENSORS_H

#include "ft_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_st_tensor {
    const char *name;
    ft_dtype dtype;
    int ndim;
    int64_t shape[FT_MAX_DIMS];
    const void *data;   /* into the mapping; valid until ft_st_close */
    size_t nbytes;
} ft_st_tensor;

typedef struct ft_st_file ft_st_file;

ft_status ft_st_open(ft_ctx *ctx, const char *path, ft_st_file **out);
/* lenient: a tensor of a whole-byte dtype the engine does not handle (BOOL, U8, F64 ...)
 * is checked like any other and listed with dtype FT_DTYPE_COUNT and its dtype name in
 * ft_st_unsupported_dtype, instead of refusing the file: a checkpoint's buffers that a
 * model never reads (GPT-2's old boolean attn.bias) then do not keep it from loading. */
ft_status ft_st_open_ex(ft_ctx *ctx, const char *path, bool lenient, ft_st_file **out);
/* The file's dtype name ("BOOL", "U8", ...) of a tensor of f that a lenient open listed
 * as FT_DTYPE_COUNT; NULL for every tensor the engine can read. */
const char *ft_st_unsupported_dtype(const ft_st_file *f, const ft_st_tensor *t);
void ft_st_close(ft_st_file *f);
const char *ft_st_path(const ft_st_file *f);
int ft_st_count(const ft_st_file *f);
const ft_st_tensor *ft_st_get(const ft_st_file *f, int i);
/* NULL if absent */
const ft_st_tensor *ft_st_find(const ft_st_file *f, const char *name);
/* A "__metadata__" string value, or NULL if absent. */
const char *ft_st_metadata(const ft_st_file *f, const char *key);

/* Writes tensors (host data) to `path` (overwriting it). Names must be unique. */
ft_status ft_st_write(ft_ctx *ctx, const char *path, const ft_st_tensor *tensors, int n);

#ifdef __cplusplus
}
#endif

#endif /* FT_SAFETENSORS_H */

/* attn_io.h — reading and writing tensors: safetensors (attn_st_), NumPy .npy (attn_npy_), and
 * the read interface (attn_reader) every parser is built on, so the same parser runs on a file, a
 * memory buffer or a fuzzer's input.
 *
 *   attn_st_file *f;
 *   if (attn_st_open("model.safetensors", &f)) { puts(attn_last_error()); return 1; }
 *   int64_t shape[2] = {768, 768};
 *   attn_st_read_f32(f, "h.0.attn.c_proj.weight", 2, shape, w);   // shape is checked
 *   attn_st_close(f);
 *
 * safetensors format (https://huggingface.co/docs/safetensors), field by field:
 *   bytes [0, 8)        N: unsigned 64-bit little-endian length of the header
 *   bytes [8, 8+N)      header: a UTF-8 JSON object. Each key is a tensor name mapping to
 *                       {"dtype": "F32"|"F16"|"BF16"|"F64"|"I64"|"I32"|"I16"|"I8"|"U8"|"BOOL",
 *                        "shape": [d0, d1, ...]  (non-negative integers, may be empty = scalar),
 *                        "data_offsets": [begin, end]}  (relative to byte 8+N, end-begin ==
 *                        product(shape) * size(dtype)). The optional key "__metadata__" maps to
 *                       an object of string -> string. The header may be padded with spaces.
 *   bytes [8+N, EOF)    the data buffer; tensors lie in it without overlap.
 * The reader rejects: a header length past the end of the file or above 100 MB, a header that is
 * not a JSON object, unknown dtypes, shapes whose product overflows, offsets that disagree with the
 * shape or fall outside the buffer, and overlapping tensors. All are ATTN_STATUS_FORMAT except a
 * header over 100 MB (ATTN_STATUS_TOO_LARGE); a missing or unreadable file is ATTN_STATUS_IO.
 *
 * .npy format (NumPy NEP 1, versions 1.0–3.0): magic "\x93NUMPY", major, minor, header length
 * (uint16 LE for 1.x, uint32 LE for 2.x/3.x), an ASCII Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (d0, d1), } padded with spaces and '\n' to a
 * multiple of 64 bytes, then the C-order data. */
#ifndef ATTN_IO_H
#define ATTN_IO_H

#include "attn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_MAX_DIMS 8

/* ---- read interface ------------------------------------------------------------------------ */

typedef struct attn_reader {
    void *ctx;
    uint64_t size;    /* total bytes available */
    const char *name; /* shown in error messages (a path, or e.g. "<memory>") */
    /* Read exactly n bytes at offset into dst; a short read is an error (ATTN_STATUS_FORMAT or
     * ATTN_STATUS_IO) with a message naming the reader. */
    attn_status (*read)(void *ctx, uint64_t offset, void *dst, size_t n);
    void (*close)(void *ctx); /* may be NULL */
} attn_reader;

attn_status attn_reader_open_file(const char *path, attn_reader *out);
/* The buffer is not copied and must outlive the reader. */
attn_status attn_reader_open_memory(const void *buf, size_t n, const char *name,
                                    attn_reader *out);
void attn_reader_close(attn_reader *r);

/* ---- dtypes ------------------------------------------------------------------------------ */

typedef enum {
    ATTN_DTYPE_F32 = 0,
    ATTN_DTYPE_F16,
    ATTN_DTYPE_BF16,
    ATTN_DTYPE_F64,
    ATTN_DTYPE_I64,
    ATTN_DTYPE_I32,
    ATTN_DTYPE_I16,
    ATTN_DTYPE_I8,
    ATTN_DTYPE_U8,
    ATTN_DTYPE_BOOL
} attn_dtype;

size_t attn_dtype_size(attn_dtype t);
const char *attn_dtype_name(attn_dtype t); /* safetensors spelling: "F32", ... */

/* ---- safetensors reading ------------------------------------------------------------------ */

typedef struct {
    const char *name;
    attn_dtype dtype;
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    uint64_t offset; /* absolute byte offset of the data in the file */
    uint64_t nbytes;
    size_t numel;
} attn_st_tensor;

typedef struct attn_st_file attn_st_file;

attn_status attn_st_open(const char *path, attn_st_file **out);
/* Takes ownership of r (closed by attn_st_close, or on failure). */
attn_status attn_st_open_reader(attn_reader r, attn_st_file **out);
void attn_st_close(attn_st_file *f);

/* Tensors in header order; names and descriptors stay valid until attn_st_close. */
int attn_st_count(const attn_st_file *f);
const attn_st_tensor *attn_st_tensor_at(const attn_st_file *f, int i);
/* NULL when absent (no error recorded). */
const attn_st_tensor *attn_st_find(const attn_st_file *f, const char *name);
/* A string from "__metadata__", or NULL. */
const char *attn_st_metadata(const attn_st_file *f, const char *key);

/* Read tensor `name` converted to float32 into dst (numel floats). F32, F16, BF16 and F64 are
 * accepted. If ndim >= 0 the tensor must have exactly that shape (else ATTN_STATUS_FORMAT naming
 * the file, tensor and both shapes); ndim < 0 skips the check. Absent: ATTN_STATUS_NOT_FOUND;
 * another dtype: ATTN_STATUS_UNSUPPORTED. F64 values beyond float range become ±inf. */
attn_status attn_st_read_f32(attn_st_file *f, const char *name, int ndim, const int64_t *shape,
                             float *dst);
/* Same, allocating *data with attn_alloc (free with attn_free); *t (may be NULL) describes it. */
attn_status attn_st_load_f32(attn_st_file *f, const char *name, float **data,
                             const attn_st_tensor **t);
/* Integer tensors (I64, I32, I16, I8, U8, BOOL) to int32, range-checked: a value outside int32
 * is ATTN_STATUS_TOO_LARGE, a BOOL byte other than 0/1 ATTN_STATUS_FORMAT, a float dtype
 * ATTN_STATUS_UNSUPPORTED. */
attn_status attn_st_load_i32(attn_st_file *f, const char *name, int32_t **data,
                             const attn_st_tensor **t);

/* ---- safetensors writing ------------------------------------------------------------------ */

typedef struct {
    const char *name;
    attn_dtype dtype;
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    const void *data; /* numel * attn_dtype_size(dtype) bytes */
} attn_st_entry;

/* Write a safetensors file atomically: a temporary file beside path, fsync, rename, fsync of the
 * directory. On any failure the previous file at path is untouched and the temporary removed.
 * meta: NULL or a NULL-terminated list of key, value, key, value, ... strings. */
attn_status attn_st_save(const char *path, const attn_st_entry *tensors, int n,
                         const char *const *meta);

/* ---- .npy -------------------------------------------------------------------------------- */

/* Write float32 C-order data (atomically, as above). */
attn_status attn_npy_save_f32(const char *path, const float *data, int ndim,
                              const int64_t *shape);
/* Read a little-endian '<f4' or '<f8' C-order array as float32 (allocated with attn_alloc).
 * Another dtype, Fortran order or a version other than 1.0/2.0/3.0: ATTN_STATUS_UNSUPPORTED;
 * a malformed header or a data size that disagrees with the shape: ATTN_STATUS_FORMAT. */
attn_status attn_npy_load_f32(const char *path, float **data, int *ndim,
                              int64_t shape[ATTN_MAX_DIMS]);

#ifdef __cplusplus
}
#endif
#endif

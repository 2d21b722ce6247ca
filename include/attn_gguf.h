/* attn_gguf.h — GGUF files (llama.cpp's / ggml's model format): read versions 2 and 3 (metadata of
 * every type, tensor infos, tensor data memory-mapped), and write version 3 atomically.
 *
 *   attn_gguf *g;
 *   if (attn_gguf_open("SmolLM2-135M-Instruct.Q4_1.gguf", &g)) { puts(attn_last_error()); return 1; }
 *   uint32_t layers;
 *   attn_gguf_get_u32(g, "llama.block_count", &layers);      // a wrong type is an error
 *   const attn_gguf_tensor *t = attn_gguf_find_tensor(g, "token_embd.weight");
 *   const void *q = attn_gguf_tensor_data(g, t);             // t->nbytes bytes, mapped
 *   attn_gguf_close(g);
 *
 * Format (ggml's docs/gguf.md; every integer little-endian; no field is aligned unless said):
 *   header
 *     magic             4 bytes "GGUF"
 *     version           u32: 2 or 3 (identical layouts; 3 allowed big-endian files, which attn
 *                       refuses: their version reads as 0x02000000 / 0x03000000). Version 1 (u32
 *                       counts) is refused as unsupported.
 *     tensor_count      u64
 *     kv_count          u64
 *   kv_count metadata entries
 *     key               string: u64 byte length, then the bytes (no terminator). Non-empty, no
 *                       NUL byte, unique within the file (by convention lower_snake_case
 *                       segments joined by dots: "general.architecture", "llama.block_count")
 *     value_type        u32: UINT8 0, INT8 1, UINT16 2, INT16 3, UINT32 4, INT32 5, FLOAT32 6,
 *                       BOOL 7, STRING 8, ARRAY 9, UINT64 10, INT64 11, FLOAT64 12
 *     value             the type's little-endian bytes (BOOL: one byte, 0 or 1; FLOAT32/64:
 *                       IEEE 754); STRING as for keys (any bytes, NULs included); ARRAY: u32
 *                       element type, u64 count, then count values of that type (STRING
 *                       elements each with their length; ARRAY elements are nested arrays, at
 *                       most ATTN_GGUF_MAX_DEPTH levels)
 *   tensor_count tensor infos
 *     name              string: no NUL byte, unique within the file
 *     n_dims            u32, 0..4
 *     ne                n_dims u64: elements per dimension, each < 2^63, ne[0] the contiguous
 *                       (fastest-varying) one: a PyTorch tensor of shape (rows, cols) is stored
 *                       with ne = [cols, rows]; their product < 2^63
 *     type              u32: a ggml type (attn_gguf_dtype), blocks of block_size elements of
 *                       type_size bytes each; ne[0] must be a multiple of block_size
 *     offset            u64: where the data starts, relative to the data section; a multiple of
 *                       the alignment
 *   padding             zero bytes up to the next multiple of the alignment
 *   data section        the tensors' bytes: ne[0]·ne[1]·ne[2]·ne[3] / block_size · type_size
 *                       each, at their offsets; tensors may come in any order but never overlap
 *                       and lie wholly inside the file (padding after the last one is optional)
 * The alignment is the metadata key general.alignment (UINT32, a power of two) or 32.
 *
 * Reading is strict and bounded: a wrong magic or version, a truncated header, key, value, array
 * or tensor info, a string or array count larger than the bytes left in the file, an unknown
 * value or tensor type, a type ggml removed (4, 5, 31–33, 36–38), more than 4 dimensions, a shape
 * whose element count or byte size overflows, ne[0] not a multiple of the block size, a
 * duplicate key or tensor name, a general.alignment that is not a UINT32 power of two, a tensor
 * offset that is misaligned, past the end of the file or overlapping another tensor, a BOOL byte
 * other than 0 or 1, or arrays nested deeper than ATTN_GGUF_MAX_DEPTH are each ATTN_STATUS_FORMAT
 * (a tensor type number ggml does not know: ATTN_STATUS_UNSUPPORTED) with a one-line message
 * naming the file and the key or tensor. Every count is checked against the bytes left before
 * anything is allocated, so memory stays within a small multiple of the file's size.
 *
 * Tensor data: attn_gguf_open maps the file read-only (mmap) and attn_gguf_tensor_data points
 * into the mapping; attn_gguf_open_memory points into the caller's buffer; a GGUF opened on
 * another reader has no pointer and is read with attn_gguf_read_tensor. A mapped tensor's address
 * is a multiple of the file's alignment (32 by default), no more: a file with general.alignment
 * 1 or 2 may put an F32 tensor at an address that is not a multiple of 4.
 *
 * Writing (attn_gguf_save, or attn_gguf_writer_* to stream tensors one by one) produces version 3
 * with the keys in the order given, the tensor infos in the order given, each tensor's data at
 * the next multiple of the alignment, zero padding between them and after the last (what the
 * gguf Python package's GGUFWriter writes), into a temporary file renamed over the destination
 * only when everything was written and synced. */
#ifndef ATTN_GGUF_H
#define ATTN_GGUF_H

#include "attn_core.h"
#include "attn_io.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_GGUF_DEFAULT_ALIGNMENT 32
#define ATTN_GGUF_MAX_DIMS 4
#define ATTN_GGUF_MAX_DEPTH 16 /* levels of nested arrays (an array of arrays is 2) */

/* Metadata value types (the file's numbers). */
typedef enum {
    ATTN_GGUF_TYPE_UINT8 = 0,
    ATTN_GGUF_TYPE_INT8 = 1,
    ATTN_GGUF_TYPE_UINT16 = 2,
    ATTN_GGUF_TYPE_INT16 = 3,
    ATTN_GGUF_TYPE_UINT32 = 4,
    ATTN_GGUF_TYPE_INT32 = 5,
    ATTN_GGUF_TYPE_FLOAT32 = 6,
    ATTN_GGUF_TYPE_BOOL = 7,
    ATTN_GGUF_TYPE_STRING = 8,
    ATTN_GGUF_TYPE_ARRAY = 9,
    ATTN_GGUF_TYPE_UINT64 = 10,
    ATTN_GGUF_TYPE_INT64 = 11,
    ATTN_GGUF_TYPE_FLOAT64 = 12
} attn_gguf_type;

/* Tensor types: ggml's enum ggml_type (ggml.h), with their (block_size elements, type_size
 * bytes) per block; the block layouts are ggml-common.h's. */
typedef enum {
    ATTN_GGUF_DTYPE_F32 = 0,      /* (1, 4) */
    ATTN_GGUF_DTYPE_F16 = 1,      /* (1, 2) */
    ATTN_GGUF_DTYPE_Q4_0 = 2,     /* (32, 18) */
    ATTN_GGUF_DTYPE_Q4_1 = 3,     /* (32, 20) */
    ATTN_GGUF_DTYPE_Q5_0 = 6,     /* (32, 22) */
    ATTN_GGUF_DTYPE_Q5_1 = 7,     /* (32, 24) */
    ATTN_GGUF_DTYPE_Q8_0 = 8,     /* (32, 34) */
    ATTN_GGUF_DTYPE_Q8_1 = 9,     /* (32, 36) */
    ATTN_GGUF_DTYPE_Q2_K = 10,    /* (256, 84) */
    ATTN_GGUF_DTYPE_Q3_K = 11,    /* (256, 110) */
    ATTN_GGUF_DTYPE_Q4_K = 12,    /* (256, 144) */
    ATTN_GGUF_DTYPE_Q5_K = 13,    /* (256, 176) */
    ATTN_GGUF_DTYPE_Q6_K = 14,    /* (256, 210) */
    ATTN_GGUF_DTYPE_Q8_K = 15,    /* (256, 292) */
    ATTN_GGUF_DTYPE_IQ2_XXS = 16, /* (256, 66) */
    ATTN_GGUF_DTYPE_IQ2_XS = 17,  /* (256, 74) */
    ATTN_GGUF_DTYPE_IQ3_XXS = 18, /* (256, 98) */
    ATTN_GGUF_DTYPE_IQ1_S = 19,   /* (256, 50) */
    ATTN_GGUF_DTYPE_IQ4_NL = 20,  /* (32, 18) */
    ATTN_GGUF_DTYPE_IQ3_S = 21,   /* (256, 110) */
    ATTN_GGUF_DTYPE_IQ2_S = 22,   /* (256, 82) */
    ATTN_GGUF_DTYPE_IQ4_XS = 23,  /* (256, 136) */
    ATTN_GGUF_DTYPE_I8 = 24,      /* (1, 1) */
    ATTN_GGUF_DTYPE_I16 = 25,     /* (1, 2) */
    ATTN_GGUF_DTYPE_I32 = 26,     /* (1, 4) */
    ATTN_GGUF_DTYPE_I64 = 27,     /* (1, 8) */
    ATTN_GGUF_DTYPE_F64 = 28,     /* (1, 8) */
    ATTN_GGUF_DTYPE_IQ1_M = 29,   /* (256, 56) */
    ATTN_GGUF_DTYPE_BF16 = 30,    /* (1, 2) */
    ATTN_GGUF_DTYPE_TQ1_0 = 34,   /* (256, 54) */
    ATTN_GGUF_DTYPE_TQ2_0 = 35,   /* (256, 66) */
    ATTN_GGUF_DTYPE_MXFP4 = 39,   /* (32, 17) */
    ATTN_GGUF_DTYPE_NVFP4 = 40,   /* (64, 36) */
    ATTN_GGUF_DTYPE_Q1_0 = 41,    /* (128, 18) */
    ATTN_GGUF_DTYPE_Q2_0 = 42,    /* (64, 18) */
    ATTN_GGUF_DTYPE_COUNT = 43    /* numbers below it that are not listed were removed */
} attn_gguf_dtype;

/* "F32", "Q4_K", ...; NULL for a number that is not a ggml type. */
const char *attn_gguf_dtype_name(attn_gguf_dtype t);
/* Elements and bytes per block; false (and 0s) for a number that is not a ggml type. */
bool attn_gguf_dtype_block(attn_gguf_dtype t, uint32_t *block_size, uint32_t *type_size);
/* "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64";
 * "?" for another number. */
const char *attn_gguf_type_name(attn_gguf_type t);

/* A string: len bytes at s (NULs possible inside), with s[len] == '\0'. */
typedef struct {
    const char *s;
    uint64_t len;
} attn_gguf_str;

/* A metadata value. For an ARRAY, arr.data points to arr.n elements of arr.type: a C array of the
 * fixed-size type (uint8_t ... double; bool for BOOL), of attn_gguf_str for STRING, of
 * attn_gguf_value (each an ARRAY) for nested arrays. */
typedef struct attn_gguf_value {
    attn_gguf_type type;
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
        bool b;
        attn_gguf_str str;
        struct {
            attn_gguf_type type;
            uint64_t n;
            const void *data;
        } arr;
    } v;
} attn_gguf_value;

typedef struct {
    const char *key; /* NUL-terminated (keys hold no NUL) */
    attn_gguf_value val;
} attn_gguf_kv;

/* Shorthands for writers: attn_gguf_kv kv[] = {attn_gguf_kv_str("general.architecture",
 * "llama"), attn_gguf_kv_u32("llama.block_count", 30), ...}. */
attn_gguf_kv attn_gguf_kv_u32(const char *key, uint32_t v);
attn_gguf_kv attn_gguf_kv_i32(const char *key, int32_t v);
attn_gguf_kv attn_gguf_kv_u64(const char *key, uint64_t v);
attn_gguf_kv attn_gguf_kv_f32(const char *key, float v);
attn_gguf_kv attn_gguf_kv_bool(const char *key, bool v);
attn_gguf_kv attn_gguf_kv_str(const char *key, const char *s); /* NUL-terminated s */
/* An array of n elements of type at data (laid out as attn_gguf_value describes). */
attn_gguf_kv attn_gguf_kv_arr(const char *key, attn_gguf_type type, uint64_t n, const void *data);

/* A tensor of an open file. */
typedef struct {
    const char *name;      /* NUL-terminated */
    attn_gguf_dtype type;
    int n_dims;            /* 0..4 as in the file */
    int64_t ne[ATTN_GGUF_MAX_DIMS];    /* ne[0] contiguous; 1 past n_dims */
    int64_t shape[ATTN_GGUF_MAX_DIMS]; /* the same reversed, row-major (PyTorch's order):
                                          shape[i] = ne[n_dims - 1 - i]; 1 past n_dims */
    uint64_t n_elements;
    uint64_t offset;       /* absolute byte offset of the data in the file */
    uint64_t nbytes;
} attn_gguf_tensor;

typedef struct attn_gguf attn_gguf;

/* Open and map a file (read-only; the mapping lives until attn_gguf_close). */
attn_status attn_gguf_open(const char *path, attn_gguf **out);
/* Parse n bytes at buf (not copied: it must outlive the attn_gguf). name is for messages. */
attn_status attn_gguf_open_memory(const void *buf, size_t n, const char *name, attn_gguf **out);
/* Parse through any reader, which the attn_gguf takes over (closed by attn_gguf_close, or at
 * once on failure). Tensor data has no pointer then: use attn_gguf_read_tensor. */
attn_status attn_gguf_open_reader(attn_reader r, attn_gguf **out);
void attn_gguf_close(attn_gguf *g);

/* A hint that t's data will not be read again soon (a loader that copied it): where the file
 * is mapped (attn_gguf_open), the whole pages inside its data leave memory (they are read from
 * the file again if the data is used). Nothing otherwise; the pointer stays valid either way. */
void attn_gguf_release_data(const attn_gguf *g, const attn_gguf_tensor *t);
const char *attn_gguf_name(const attn_gguf *g); /* the path or name given at open */
uint32_t attn_gguf_version(const attn_gguf *g);
uint32_t attn_gguf_alignment(const attn_gguf *g);
uint64_t attn_gguf_data_offset(const attn_gguf *g); /* where the data section starts */

/* ---- metadata ---- */

size_t attn_gguf_kv_count(const attn_gguf *g);
const attn_gguf_kv *attn_gguf_kv_at(const attn_gguf *g, size_t i); /* file order; NULL past */
/* The value of key, or NULL when absent (no error recorded). */
const attn_gguf_value *attn_gguf_find(const attn_gguf *g, const char *key);
/* The value of key, which must have the given type: absent is ATTN_STATUS_NOT_FOUND ("FILE: no
 * key 'K'"), another type ATTN_STATUS_FORMAT ("FILE: key 'K' is u32, expected string"). */
attn_status attn_gguf_get(const attn_gguf *g, const char *key, attn_gguf_type type,
                          const attn_gguf_value **out);
/* Typed getters on attn_gguf_get (the exact type; errors as there). */
attn_status attn_gguf_get_u32(const attn_gguf *g, const char *key, uint32_t *out);
attn_status attn_gguf_get_i32(const attn_gguf *g, const char *key, int32_t *out);
attn_status attn_gguf_get_u64(const attn_gguf *g, const char *key, uint64_t *out);
attn_status attn_gguf_get_f32(const attn_gguf *g, const char *key, float *out);
attn_status attn_gguf_get_bool(const attn_gguf *g, const char *key, bool *out);
/* *s points into g (NUL-terminated; *len may be NULL). */
attn_status attn_gguf_get_str(const attn_gguf *g, const char *key, const char **s,
                              uint64_t *len);
/* Any of the eight integer types as int64 (a UINT64 above INT64_MAX is ATTN_STATUS_TOO_LARGE):
 * converters write the same key as u32 or u64, i32 or u32. */
attn_status attn_gguf_get_int(const attn_gguf *g, const char *key, int64_t *out);
/* FLOAT32 or FLOAT64 as a double. */
attn_status attn_gguf_get_float(const attn_gguf *g, const char *key, double *out);
/* An ARRAY whose elements have type elem: *data and *n as attn_gguf_value's arr. A non-array or
 * an array of another type is ATTN_STATUS_FORMAT naming both. */
attn_status attn_gguf_get_arr(const attn_gguf *g, const char *key, attn_gguf_type elem,
                              const void **data, uint64_t *n);

/* ---- tensors ---- */

size_t attn_gguf_tensor_count(const attn_gguf *g);
const attn_gguf_tensor *attn_gguf_tensor_at(const attn_gguf *g, size_t i); /* file order */
const attn_gguf_tensor *attn_gguf_find_tensor(const attn_gguf *g, const char *name); /* or NULL */
/* t's nbytes bytes (mapped or in the caller's buffer), or NULL for a GGUF opened on a reader. */
const void *attn_gguf_tensor_data(const attn_gguf *g, const attn_gguf_tensor *t);
/* Copy t's bytes, as stored, into dst (t->nbytes bytes). */
attn_status attn_gguf_read_tensor(const attn_gguf *g, const attn_gguf_tensor *t, void *dst);

/* ---- writing ---- */

/* A tensor to write: ne as in the file (ne[0] contiguous; entries past n_dims ignored). */
typedef struct {
    const char *name;
    attn_gguf_dtype type;
    int n_dims; /* 0..4 */
    int64_t ne[ATTN_GGUF_MAX_DIMS];
    const void *data; /* the tensor's bytes (attn_gguf_save; the streaming writer ignores it) */
} attn_gguf_tensor_desc;

/* Write path atomically. kv: n_kv entries (keys unique, non-empty, without NUL; general.alignment,
 * if given, a UINT32 power of two); tensors: n_tensors (names unique, without NUL; types ggml
 * knows; ne[0] a multiple of the block size). Bad arguments are ATTN_STATUS_INVALID_ARGUMENT
 * naming the key or tensor; the file at path is then untouched. */
attn_status attn_gguf_save(const char *path, const attn_gguf_kv *kv, size_t n_kv,
                           const attn_gguf_tensor_desc *tensors, size_t n_tensors);

/* The same, tensor data streamed: open writes the header and tensor infos (data pointers are not
 * read), then attn_gguf_writer_write gives each tensor's bytes in order, in one or more calls
 * (exactly its size in all), and attn_gguf_writer_finish renames the file into place. Any failure,
 * or attn_gguf_writer_abort, removes the temporary file; either frees w. */
typedef struct attn_gguf_writer attn_gguf_writer;
attn_status attn_gguf_writer_open(const char *path, const attn_gguf_kv *kv, size_t n_kv,
                                  const attn_gguf_tensor_desc *tensors, size_t n_tensors,
                                  attn_gguf_writer **out);
attn_status attn_gguf_writer_write(attn_gguf_writer *w, const void *data, size_t n);
attn_status attn_gguf_writer_finish(attn_gguf_writer *w);
void attn_gguf_writer_abort(attn_gguf_writer *w);

/* Bytes of a tensor of type t and elements ne[0..n_dims) (ne[0] a multiple of the block size):
 * false when t is unknown, n_dims is outside 0..4, a dimension is negative, ne[0] is not a
 * multiple of the block size or the size overflows. */
bool attn_gguf_nbytes(attn_gguf_dtype t, int n_dims, const int64_t *ne, uint64_t *nbytes);

#ifdef __cplusplus
}
#endif
#endif

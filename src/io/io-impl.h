/* io-impl.h — internal helpers of the I/O layer (src/io/), not installed.
 *
 *   - little-endian loads/stores, independent of the host byte order;
 *   - half / bfloat16 → float32 conversion (exact, including subnormals, inf and NaN payloads);
 *   - the atomic file writer used by attn_st_save and attn_npy_save_f32: everything is written to
 *     a temporary "path.tmp.XXXXXX" beside path, then fsync + rename + fsync(dir). Until
 *     attn_atomic_commit succeeds the file at path is untouched; attn_atomic_abort (or a failed
 *     commit) removes the temporary file;
 *   - the .npy parser on an attn_reader, so a fuzzer can drive it from memory. */
#ifndef ATTN_IO_IMPL_H
#define ATTN_IO_IMPL_H

#include "attn_io.h"
#include "../core/core-impl.h"

#include <stdint.h>
#include <string.h>

static inline uint16_t attn_ld16(const unsigned char *p) {
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}
static inline uint32_t attn_ld32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t attn_ld64(const unsigned char *p) {
    return (uint64_t)attn_ld32(p) | (uint64_t)attn_ld32(p + 4) << 32;
}
static inline void attn_st64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void attn_st32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void attn_st16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static inline float attn_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE binary16 → binary32, exact for every input (NaN payloads are kept, shifted). */
static inline float attn_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in float32 (a normal number there) */
        float f = (float)man * 0x1p-24f;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        return attn_bits_f32(sign | u);
    }
    if (exp == 31) return attn_bits_f32(sign | 0x7f800000u | man << 13); /* inf / NaN */
    return attn_bits_f32(sign | (exp + 112) << 23 | man << 13);
}

/* bfloat16 is the top half of a float32. */
static inline float attn_bf16_to_f32(uint16_t b) { return attn_bits_f32((uint32_t)b << 16); }

/* float64 → float32 with IEEE round-to-nearest and overflow to ±inf, without the undefined
 * behaviour C gives an out-of-range conversion. */
static inline float attn_f64_to_f32(double d) {
    if (d >= 0x1.ffffffp127) return attn_bits_f32(0x7f800000u);
    if (d <= -0x1.ffffffp127) return attn_bits_f32(0xff800000u);
    return (float)d;
}

/* ---- atomic writer (reader.c) ---- */

typedef struct {
    int fd;          /* -1 when closed */
    char *path;      /* final path (copy) */
    char *tmp;       /* temporary path (copy) */
} attn_atomic;

/* Create the temporary file; on failure nothing is left behind. */
attn_status attn_atomic_begin(const char *path, attn_atomic *a);
/* Write all n bytes (retrying short writes and EINTR). On failure the caller must abort. */
attn_status attn_atomic_write(attn_atomic *a, const void *buf, size_t n);
/* fsync, close, rename over path, fsync the directory. Always releases a; on failure the
 * temporary file is removed and path is untouched. */
attn_status attn_atomic_commit(attn_atomic *a);
/* Close and remove the temporary file, release a. Safe to call twice. */
void attn_atomic_abort(attn_atomic *a);

/* s[0..n) for a message, in buf (cap bytes): control bytes and DEL as \xNN, cut with "..." to
 * fit, so one odd name can neither garble nor flood a one-line message (reader.c). */
const char *attn_io_shown(char *buf, size_t cap, const char *s, size_t n);

/* ---- .npy on a reader (npy.c); takes ownership of r (always closed) ---- */
attn_status attn_npy_load_f32_reader(attn_reader r, float **data, int *ndim,
                                     int64_t shape[ATTN_MAX_DIMS]);

#endif

/* data-impl.h — internals shared by src/data/: the private random generator that makes splits and
 * batch orders reproducible on every machine, and the atomic file writer. Not installed. */
#ifndef ATTN_DATA_IMPL_H
#define ATTN_DATA_IMPL_H

#include "attn_data.h"
#include "../core/core-impl.h"

#include <stdio.h>

/* splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014): a
 * 64-bit counter passed through a fixed mixer. Chosen because its whole state is one integer,
 * derived here from (seed, epoch, purpose), so no generator state needs saving to reproduce an
 * epoch, and it uses only integer arithmetic (identical everywhere). */
typedef struct {
    uint64_t s;
} attn_data_rng;

static inline uint64_t attn_data__mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t attn_data_rng_next(attn_data_rng *r) {
    r->s += 0x9E3779B97F4A7C15ull;
    return attn_data__mix(r->s);
}

/* Independent streams per (seed, epoch, purpose): mixing each input in turn keeps nearby seeds
 * or epochs from giving overlapping sequences. */
static inline attn_data_rng attn_data_rng_make(uint64_t seed, uint64_t epoch, uint64_t purpose) {
    attn_data_rng r;
    r.s = attn_data__mix(attn_data__mix(attn_data__mix(seed) ^ epoch) + purpose);
    return r;
}

/* Uniform in [0, n), n >= 1, without modulo bias: draws below 2^64 mod n are rejected, so the
 * result depends only on the generator's integers. */
static inline uint64_t attn_data_rng_below(attn_data_rng *r, uint64_t n) {
    uint64_t threshold = (0 - n) % n;
    for (;;) {
        uint64_t x = attn_data_rng_next(r);
        if (x >= threshold) return x % n;
    }
}

/* Fisher–Yates shuffle of n indices. */
static inline void attn_data_shuffle(attn_data_rng *r, size_t *a, size_t n) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)attn_data_rng_below(r, (uint64_t)i);
        size_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* The whole file at path into *out (malloc'ed, NUL-terminated, *len bytes before the NUL).
 * Errors name the path: cannot open (ATTN_STATUS_IO), read error, larger than
 * ATTN_MAX_BUFFER_BYTES (ATTN_STATUS_TOO_LARGE), out of memory. (corpus.c) */
attn_status attn_data_read_file(const char *path, char **out, size_t *len);

/* Atomic text file: write into "<path>.tmp", fsync, rename over path. */
typedef struct {
    FILE *fp;
    char *path, *tmp;
    bool failed;
} attn_data_wfile;

attn_status attn_data_wopen(attn_data_wfile *w, const char *path);
/* Append bytes (errors are remembered and reported by wclose). */
void attn_data_wput(attn_data_wfile *w, const char *s, size_t n);
void attn_data_wputs(attn_data_wfile *w, const char *s);
/* Flush, fsync, rename; on any failure remove the temporary file and report it. abort = true
 * discards the file instead. */
attn_status attn_data_wclose(attn_data_wfile *w, bool abort);

#endif

/* rng.c — Philox4x32-10 (Salmon, Moraes, Dror, Shaw, SC 2011), written from the paper's
 * definition: ten rounds of two 32×32→64 multiplications with the constants M0 = 0xD2511F53,
 * M1 = 0xCD9E8D57, key schedule increments W0 = 0x9E3779B9, W1 = 0xBB67AE85. Counter-based, so
 * the state is just (seed, words drawn) and any position is reachable directly — see
 * include/attn_train.h. */
#include "train-impl.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static void philox10(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * ctr[0], p1 = (uint64_t)PHILOX_M1 * ctr[2];
        uint32_t x0 = (uint32_t)(p1 >> 32) ^ ctr[1] ^ k0, x1 = (uint32_t)p1;
        uint32_t x2 = (uint32_t)(p0 >> 32) ^ ctr[3] ^ k1, x3 = (uint32_t)p0;
        ctr[0] = x0;
        ctr[1] = x1;
        ctr[2] = x2;
        ctr[3] = x3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
}

void attn_rng_block(uint64_t seed, uint64_t block, uint32_t out[4]) {
    out[0] = (uint32_t)block;
    out[1] = (uint32_t)(block >> 32);
    out[2] = 0;
    out[3] = 0;
    philox10(out, (uint32_t)seed, (uint32_t)(seed >> 32));
}

uint32_t attn_rng_at(uint64_t seed, uint64_t index) {
    uint32_t b[4];
    attn_rng_block(seed, index >> 2, b);
    return b[index & 3];
}

void attn_rng_set_state(attn_rng *r, uint64_t seed, uint64_t counter) {
    r->seed = seed;
    r->counter = counter;
    r->cached_block = 0;
    r->cache_valid = false;
}

void attn_rng_init(attn_rng *r, uint64_t seed) { attn_rng_set_state(r, seed, 0); }

void attn_rng_skip(attn_rng *r, uint64_t n) { r->counter += n; }

uint32_t attn_rng_u32(attn_rng *r) {
    uint64_t blk = r->counter >> 2;
    if (!r->cache_valid || r->cached_block != blk) {
        attn_rng_block(r->seed, blk, r->cache);
        r->cached_block = blk;
        r->cache_valid = true;
    }
    return r->cache[r->counter++ & 3];
}

uint64_t attn_rng_u64(attn_rng *r) {
    uint64_t lo = attn_rng_u32(r);
    return lo | (uint64_t)attn_rng_u32(r) << 32;
}

float attn_rng_uniform(attn_rng *r) { return (float)(attn_rng_u32(r) >> 8) * 0x1p-24f; }

double attn_rng_uniform_double(attn_rng *r) { return (double)(attn_rng_u64(r) >> 11) * 0x1p-53; }

double attn_rng_normal(attn_rng *r) {
    double u1 = attn_rng_uniform_double(r), u2 = attn_rng_uniform_double(r);
    /* 1 − u1 is in (0, 1], so the log is finite */
    return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
}

uint64_t attn_rng_below(attn_rng *r, uint64_t n) {
    if (n == 0) return 0;
    if (n <= UINT32_MAX) {
        /* Lemire: the high word of x·n is uniform in [0, n) once the low word's bias is rejected */
        uint32_t n32 = (uint32_t)n;
        uint64_t m = (uint64_t)attn_rng_u32(r) * n32;
        if ((uint32_t)m < n32) {
            uint32_t thresh = (uint32_t)(-n32) % n32;
            while ((uint32_t)m < thresh) m = (uint64_t)attn_rng_u32(r) * n32;
        }
        return m >> 32;
    }
    /* wide n: rejection on the smallest enclosing power of two */
    uint64_t mask = n - 1;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    uint64_t x;
    do x = attn_rng_u64(r) & mask;
    while (x >= n);
    return x;
}

void attn_rng_shuffle(attn_rng *r, uint32_t *idx, size_t n) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)attn_rng_below(r, i);
        uint32_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}

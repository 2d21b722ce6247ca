/* dropout.c — the one dropout of every family (attn_nn.h), and attn_encdec_dropout, its
 * in-place form over a flat buffer.
 *
 * The mask of an element is a pure function of (seed, step, site, element index): the element
 * index is global row · C + column, the global row coming from attn_nn_rows, so the masks depend
 * neither on the thread count nor on how a batch is cut into data-parallel replicas, and a
 * resumed run repeats an uninterrupted one. The forward computes each mask once, fused with its
 * use (out = base + drop(y)), and keeps the keep bits so the backward reads bits instead of
 * hashing every element again.
 *
 * The hash is three 64-bit multiplies per element: with AVX-512DQ (vpmullq) the compiler
 * vectorizes it, several times faster than the baseline ISA the library is built for, so that
 * version is chosen at run time on the AVX-512 backend. Integer hashing and the same float
 * operations (no contraction: -std=c11) give the same bits either way. */
#include "nn-impl.h"

#include "attn_models.h"

#include <string.h>

/* SplitMix64's finalizer: a bijective 64-bit mixer. */
static inline uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t drop_key(uint64_t seed, uint64_t step, uint32_t site) {
    return mix64(mix64(mix64(seed) ^ step) ^ site);
}

/* Element idx is dropped when the top 24 bits of its hash fall below thr = p·2^24. */
static inline bool dropped(uint64_t key, uint64_t thr, uint64_t idx) {
    return (mix64(key ^ (idx * 0xD6E8FEB86659FD93ull)) >> 40) < thr;
}

/* One span of at most 64 elements: out[j] = base[j] + drop(y[j]) for j < cnt, element j having
 * index idx0 + j; returns the keep bits. */
#define DROP_SPAN_BODY                                                                             \
    uint32_t keep[64];                                                                             \
    for (size_t j = 0; j < cnt; j++) keep[j] = !dropped(key, thr, idx0 + j);                       \
    uint64_t bits = 0;                                                                             \
    for (size_t j = 0; j < cnt; j++) {                                                             \
        const float d = keep[j] ? y[j] * scale : 0.0f;                                             \
        out[j] = base ? base[j] + d : d;                                                           \
        bits |= (uint64_t)keep[j] << j;                                                            \
    }                                                                                              \
    return bits;
#define DROP_SPAN_ARGS                                                                             \
    uint64_t key, uint64_t thr, float scale, uint64_t idx0, size_t cnt, const float *base,         \
        const float *y, float *out
static uint64_t drop_span(DROP_SPAN_ARGS) { DROP_SPAN_BODY }
/* The backward of one span: out = drop(g) from the bits. */
#define UNDROP_SPAN_BODY                                                                           \
    for (size_t j = 0; j < cnt; j++) out[j] = (bits >> j) & 1 ? g[j] * scale : 0.0f;
#define UNDROP_SPAN_ARGS uint64_t bits, float scale, size_t cnt, const float *g, float *out
static void undrop_span(UNDROP_SPAN_ARGS) { UNDROP_SPAN_BODY }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_DROP_512 1
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw"))) static uint64_t
drop_span_512(DROP_SPAN_ARGS) { DROP_SPAN_BODY }
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw"))) static void
undrop_span_512(UNDROP_SPAN_ARGS) { UNDROP_SPAN_BODY }
#endif

static uint64_t span(bool v512, DROP_SPAN_ARGS) {
#ifdef HAVE_DROP_512
    if (v512) return drop_span_512(key, thr, scale, idx0, cnt, base, y, out);
#else
    (void)v512;
#endif
    return drop_span(key, thr, scale, idx0, cnt, base, y, out);
}

static bool use_512(void) {
#ifdef HAVE_DROP_512
    return attn_get_backend() == ATTN_BACKEND_AVX512;
#else
    return false;
#endif
}

attn_nn_run attn_nn_default_run(void) {
    attn_nn_run r;
    memset(&r, 0, sizeof r);
    r.precision = ATTN_PRECISION_F32;
    return r;
}

attn_nn_rows attn_nn_rows_plain(int T) {
    attn_nn_rows r = {0, T > 0 ? T : 1, T > 0 ? T : 1};
    return r;
}

size_t attn_nn_dropout_words(int M, int C) {
    if (M <= 0 || C <= 0) return 0;
    return (size_t)M * (((size_t)C + 63) / 64);
}

void attn_nn_dropout_fwd(const attn_nn_run *run, uint32_t site, float p, attn_nn_rows rows, int M,
                         int C, const float *base, const float *y, float *out, uint64_t *mask) {
    if (M <= 0 || C <= 0) return;
    const size_t n = (size_t)M * C;
    if (!(p > 0.0f)) {
        if (base)
            nn_add(n, base, y, out);
        else if (out != y)
            memcpy(out, y, n * sizeof(float));
        if (mask) memset(mask, 0xff, attn_nn_dropout_words(M, C) * sizeof(uint64_t));
        return;
    }
    const uint64_t key = drop_key(run->seed, run->step, site);
    const uint64_t thr = (uint64_t)((double)p * 16777216.0 + 0.5);
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    const int tl = rows.t_local > 0 ? rows.t_local : 1, tg = rows.t_global > 0 ? rows.t_global : 1;
    const long wpr = (C + 63) / 64, items = (long)M * wpr;
    const bool v512 = use_512();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long it = 0; it < items; it++) {
        const int r = (int)(it / wpr), w = (int)(it % wpr);
        const uint64_t g = (uint64_t)((rows.row0 + r / tl) * tg + r % tl);
        const size_t c0 = (size_t)w * 64, cnt = ATTN_MIN((size_t)C - c0, (size_t)64);
        const size_t o = (size_t)r * C + c0;
        const uint64_t bits =
            span(v512, key, thr, scale, g * (uint64_t)C + c0, cnt, base ? base + o : NULL, y + o,
                 out + o);
        if (mask) mask[it] = bits;
    }
}

void attn_nn_dropout_bwd(float p, int M, int C, const uint64_t *mask, const float *g, float *out) {
    if (M <= 0 || C <= 0) return;
    const size_t n = (size_t)M * C;
    if (!(p > 0.0f)) {
        if (out != g) memcpy(out, g, n * sizeof(float));
        return;
    }
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    const long wpr = (C + 63) / 64, items = (long)M * wpr;
#ifdef HAVE_DROP_512
    const bool v512 = use_512();
#endif
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long it = 0; it < items; it++) {
        const size_t r = (size_t)(it / wpr), c0 = (size_t)(it % wpr) * 64;
        const size_t cnt = ATTN_MIN((size_t)C - c0, (size_t)64), o = r * C + c0;
#ifdef HAVE_DROP_512
        if (v512) {
            undrop_span_512(mask[it], scale, cnt, g + o, out + o);
            continue;
        }
#endif
        undrop_span(mask[it], scale, cnt, g + o, out + o);
    }
}

/* The flat in-place form (attn_models.h): element i of x is element index i. */
void attn_encdec_dropout(uint64_t seed, uint64_t step, uint32_t site, float p, size_t n,
                         float *x) {
    if (!x || !(p > 0.0f)) return;
    if (p >= 1.0f) {
        memset(x, 0, n * sizeof(float));
        return;
    }
    const uint64_t key = drop_key(seed, step, site);
    const uint64_t thr = (uint64_t)((double)p * 16777216.0 + 0.5);
    const float scale = 1.0f / (1.0f - p);
    const long nw = (long)((n + 63) / 64);
    const bool v512 = use_512();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long w = 0; w < nw; w++) {
        const size_t i0 = (size_t)w * 64, cnt = ATTN_MIN(n - i0, (size_t)64);
        (void)span(v512, key, thr, scale, i0, cnt, NULL, x + i0, x + i0);
    }
}

void nn_add(size_t n, const float *a, const float *b, float *y) {
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

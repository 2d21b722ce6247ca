/* quant_i8_simd.c — the SIMD pieces of the i8 product (attn_quant.h: ATTN_QTYPE_I8): the
 * activations' row quantizers (AVX-512, AVX2) and the panel kernels (AVX512-VNNI below; AVX2 at
 * the end). quant_i8.c picks them per backend, shares the panels among threads and holds the
 * reference loops these equal bit for bit.
 *
 * A tile: two panels (32 rows of W, 16 per zmm) times up to 8 rows of x. For each 4 consecutive
 * k, one 64-byte load per panel (16 rows x 4 codes) and, per row of x, its 4 activation bytes
 * broadcast: 2 VPDPBUSD per row, 16 int32 accumulators in registers for 8 rows. The sums run over
 * the whole of K in int32, started at each row of W's −128 · Σ q (the activations are stored + 128
 * as unsigned bytes), then one conversion and one scale (e_m · d_n) per output: no per-block
 * float work, unlike Q8_0's products. */
#include "quant-impl.h"

#if ATTN_ISA == 512
#include "vmath.h"

#include <immintrin.h>

#define VNNI_FN __attribute__((target("avx512vnni")))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define I8_ROWS 8 /* rows of x per tile */

/* acc += Σ over each 4 bytes of u (unsigned) × s (signed): VPDPBUSD in place. As inline assembly
 * because gcc 12, given the intrinsic on an array of accumulators, copied every accumulator twice
 * per step (32 register moves for 16 VPDPBUSD: a third of the kernel's speed). */
VNNI_FN static ALWAYS_INLINE void dpbusd(__m512i *acc, __m512i u, __m512i s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(*acc) : "v"(u), "v"(s));
}

/* One vector of outputs with the product's epilogue, as av_store_row does it (the same bits):
 * act(a·(e·d) [+ beta·y] [+ bias]) into the mk lanes of y. */
VNNI_FN static ALWAYS_INLINE void i8_store(const i8_job *j, float *y, __mmask16 mk, __m512i a,
                                           __m512 ed, __m512 bias) {
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(a), ed);
    if (j->beta != 0.0f) v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, y), _mm512_set1_ps(j->beta), v);
    if (j->bias) v = _mm512_add_ps(v, bias);
    _mm512_mask_storeu_ps(y, mk, av_act(v, j->act));
}

/* y[rows m0 .. m0 + Mc − 1, columns n0 .. n0 + nc − 1] = the epilogue of panels p and p + 1 (p
 * alone when !two; nc <= 32, <= 16 then) times those rows of x: the sums in registers, stored
 * from there (no tile in memory between the sums and y). */
VNNI_FN static ALWAYS_INLINE void i8_tile(int Mc, const i8_job *j, int p, bool two, int m0, int nc) {
    const int K = j->K;
    const int8_t *pa = j->w + (size_t)p * 16 * (size_t)K, *pb = two ? pa + 16 * (size_t)K : pa;
    const int q = two ? p + 1 : p;
    const __m512i na = _mm512_loadu_si512(j->nsum + 16 * p), nb = _mm512_loadu_si512(j->nsum + 16 * q);
    __m512i a0[I8_ROWS], a1[I8_ROWS];
#pragma GCC unroll 8
    for (int m = 0; m < Mc; m++) a0[m] = na, a1[m] = nb;
    const uint8_t *x0 = j->xu + (size_t)m0 * K;
    for (int k = 0; k < K; k += 4) {
        const __m512i wa = _mm512_loadu_si512(pa + 16 * (size_t)k);
        const __m512i wb = _mm512_loadu_si512(pb + 16 * (size_t)k);
#pragma GCC unroll 8
        for (int m = 0; m < Mc; m++) {
            int32_t v;
            memcpy(&v, x0 + (size_t)m * K + k, sizeof v);
            const __m512i xb = _mm512_set1_epi32(v);
            dpbusd(&a0[m], xb, wa);
            dpbusd(&a1[m], xb, wb);
        }
    }
    const int n0 = 16 * p;
    const __mmask16 ma = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1);
    const __mmask16 mb = nc >= 32 ? 0xffff : nc > 16 ? (__mmask16)((1u << (nc - 16)) - 1) : 0;
    const __m512 da = _mm512_loadu_ps(j->wd + 16 * p), db = _mm512_loadu_ps(j->wd + 16 * q);
    const __m512 ba = j->bias ? _mm512_maskz_loadu_ps(ma, j->bias + n0) : _mm512_setzero_ps();
    const __m512 bb = j->bias ? _mm512_maskz_loadu_ps(mb, j->bias + n0 + 16) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int m = 0; m < Mc; m++) {
        const __m512 e = _mm512_set1_ps(j->xe[m0 + m]);
        float *y = j->y + (size_t)(m0 + m) * j->ldy + n0;
        i8_store(j, y, ma, a0[m], _mm512_mul_ps(e, da), ba);
        if (mb) i8_store(j, y + 16, mb, a1[m], _mm512_mul_ps(e, db), bb);
    }
}

typedef void (*i8_tile_fn)(const i8_job *, int, bool, int, int);
#define I8_TILE_FN(Mc)                                                                           \
    VNNI_FN __attribute__((noinline)) static void i8_tile_##Mc(const i8_job *j, int p, bool two, \
                                                               int m0, int nc) {                 \
        i8_tile(Mc, j, p, two, m0, nc);                                                          \
    }
I8_TILE_FN(1) I8_TILE_FN(2) I8_TILE_FN(3) I8_TILE_FN(4) I8_TILE_FN(5) I8_TILE_FN(6) I8_TILE_FN(7)
I8_TILE_FN(8)
static const i8_tile_fn i8_tiles[I8_ROWS + 1] = {NULL,     i8_tile_1, i8_tile_2, i8_tile_3, i8_tile_4,
                                                 i8_tile_5, i8_tile_6, i8_tile_7, i8_tile_8};

void attn_quant_i8_row_avx512(int n, const float *x, float *d, uint8_t *q) {
    /* quant_i8.c's i8_row with 16 lanes, the same bits: max(|x|, amax) skips NaN as its
     * comparison does, max(v, −127) maps NaN to −127, VCVTPS2DQ rounds to nearest even as its
     * 1.5 · 2^23 trick does for |v| <= 127 */
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 amax = _mm512_setzero_ps();
    for (int k = 0; k < n; k += 16) {
        const __mmask16 mk = n - k >= 16 ? 0xffff : (__mmask16)((1u << (n - k)) - 1);
        amax = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_maskz_loadu_ps(mk, x + k)), amax);
    }
    *d = _mm512_reduce_max_ps(amax) / 127.0f;
    const __m512 id = _mm512_set1_ps(*d != 0.0f ? 1.0f / *d : 0.0f);
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    const __m512i off = _mm512_set1_epi32(128);
    for (int k = 0; k < n; k += 16) {
        const __mmask16 mk = n - k >= 16 ? 0xffff : (__mmask16)((1u << (n - k)) - 1);
        const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + k), id), lo), hi);
        _mm_mask_storeu_epi8(q + k, mk, _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(v), off)));
    }
}

void attn_quant_i8_panels_avx512(const i8_job *j, int p0, int p1) {
    for (int p = p0; p < p1; p += 2) {
        const bool two = p + 1 < p1;
        const int nc = ATTN_MIN(two ? 32 : 16, j->N - 16 * p);
        for (int m0 = 0; m0 < j->M; m0 += I8_ROWS)
            i8_tiles[ATTN_MIN(I8_ROWS, j->M - m0)](j, p, two, m0, nc);
    }
}
#else
#include "vmath.h"

#include <immintrin.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define I8_ROWS_AVX2 3 /* rows of x per pass over a panel */

/* AVX2 (and AVX-512 CPUs without VNNI): without VPDPBUSD, VPMADDUBSW takes unsigned × signed
 * bytes into saturating int16 pairs, so the sign moves onto the weights: |x| (unsigned, <= 127)
 * times w · sign(x), a pair at most 2 · 127 · 127 = 32258, no saturation; VPMADDWD then sums the
 * pairs into int32. Exact, so the same sums as the reference loops. |x| and x come as two planes
 * made once per product (attn_quant_i8_planes_avx2), so per row of x and 4 k a tile spends two
 * broadcast loads and, per 8 rows of W, VPSIGNB, VPMADDUBSW, VPMADDWD and VPADDD: on a Zen 3 the
 * first three share two pipes (measured: each alone and any mix of them 6.4 G/s in all, VPADDD
 * 12.7), so ~21 products a cycle. Measured on one Zen 3 thread (M = 128, N = 8000, K = 256):
 * 55-59 GMAC/s (72-75 in a later in-L1 run), against 31 with XOR and ABS per panel and 4-row
 * tiles that spilled; the float32 GEMM: 34-37. Exact alternatives measured (int16 codes on
 * VPMADDWD, the activations split into nibbles, 4 weight vectors per broadcast: docs/
 * bench-results.md, tenth session) issue as many vector operations per product and ran no
 * faster; CTranslate2's oneDNN u8s8 path is faster here by letting VPMADDUBSW saturate.
 * A tile: a panel of 16 rows of W (two vectors of 8 rows x 4 codes per 4 k) times up to 3 rows
 * of x, 6 int32 accumulators in registers (4 rows' 8 left gcc one register short: it spilled),
 * the epilogue (scale, beta, bias, activation) applied from the registers as the VNNI tile does
 * (before, a tile went through a stack buffer and av_store_row: 6-9% of an int8 translation). */
static ALWAYS_INLINE void i8_tile_avx2(int Mc, const i8_job *j, int p, int m0) {
    const int K = j->K;
    const int8_t *wp = j->w + (size_t)p * 16 * (size_t)K;
    const int8_t *xs = j->xs + (size_t)m0 * K;
    const uint8_t *xa = j->xa + (size_t)m0 * K;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i lo[I8_ROWS_AVX2], hi[I8_ROWS_AVX2];
#pragma GCC unroll 4
    for (int m = 0; m < Mc; m++) lo[m] = hi[m] = _mm256_setzero_si256();
    for (int k = 0; k < K; k += 4) {
        const __m256i wl = _mm256_loadu_si256((const __m256i *)(const void *)(wp + 16 * (size_t)k));
        const __m256i wh = _mm256_loadu_si256((const __m256i *)(const void *)(wp + 16 * (size_t)k + 32));
#pragma GCC unroll 4
        for (int m = 0; m < Mc; m++) {
            int32_t sv, av;
            memcpy(&sv, xs + (size_t)m * K + k, sizeof sv);
            memcpy(&av, xa + (size_t)m * K + k, sizeof av);
            const __m256i s = _mm256_set1_epi32(sv), a = _mm256_set1_epi32(av);
            lo[m] = _mm256_add_epi32(
                lo[m], _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(wl, s)), ones));
            hi[m] = _mm256_add_epi32(
                hi[m], _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(wh, s)), ones));
        }
    }
    const __m256 dl = _mm256_loadu_ps(j->wd + 16 * p), dh = _mm256_loadu_ps(j->wd + 16 * p + 8);
    const int n0 = 16 * p, nc = ATTN_MIN(16, j->N - n0);
    const float *bias = j->bias ? j->bias + n0 : NULL;
#pragma GCC unroll 4
    for (int m = 0; m < Mc; m++) {
        const __m256 e = _mm256_set1_ps(j->xe[m0 + m]);
        float *y = j->y + (size_t)(m0 + m) * j->ldy + n0;
        /* (av_store_row's steps on the scaled sums: the same bits, v · 1 = v) */
        av_store_epilogue(y, ATTN_MIN(nc, 8), _mm256_mul_ps(_mm256_cvtepi32_ps(lo[m]), _mm256_mul_ps(e, dl)),
                          j->beta, bias, j->act);
        if (nc > 8)
            av_store_epilogue(y + 8, nc - 8, _mm256_mul_ps(_mm256_cvtepi32_ps(hi[m]), _mm256_mul_ps(e, dh)),
                              j->beta, bias ? bias + 8 : NULL, j->act);
    }
}

typedef void (*i8_tile_avx2_fn)(const i8_job *, int, int);
#define I8_TILE_AVX2_FN(Mc)                                                                      \
    __attribute__((noinline)) static void i8_tile_avx2_##Mc(const i8_job *j, int p, int m0) {    \
        i8_tile_avx2(Mc, j, p, m0);                                                              \
    }
I8_TILE_AVX2_FN(1) I8_TILE_AVX2_FN(2) I8_TILE_AVX2_FN(3)
static const i8_tile_avx2_fn i8_tiles_avx2[I8_ROWS_AVX2 + 1] = {NULL, i8_tile_avx2_1, i8_tile_avx2_2,
                                                                i8_tile_avx2_3};

void attn_quant_i8_planes_avx2(size_t n, const uint8_t *xu, int8_t *xs, uint8_t *xa) {
    const __m256i off = _mm256_set1_epi8((char)0x80);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i s = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(xu + i)), off);
        _mm256_storeu_si256((__m256i *)(void *)(xs + i), s);
        _mm256_storeu_si256((__m256i *)(void *)(xa + i), _mm256_abs_epi8(s));
    }
    for (; i < n; i++) {
        const int v = (int)xu[i] - 128;
        xs[i] = (int8_t)v;
        xa[i] = (uint8_t)(v < 0 ? -v : v);
    }
}

void attn_quant_i8_row_avx2(int n, const float *x, float *d, uint8_t *q) {
    /* quant_i8.c's i8_row with 8 lanes, the same bits (as attn_quant_i8_row_avx512: max(|x|,
     * amax) skips NaN, max(v, −127) maps NaN to −127, VCVTPS2DQ rounds to nearest even); n is a
     * multiple of 4: the last 4 through a 4-lane mask */
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 amax = _mm256_setzero_ps();
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int k = 0; k < n; k += 8) {
        const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - k), lanes);
        amax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_maskload_ps(x + k, mk)), amax);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    *d = _mm_cvtss_f32(h) / 127.0f;
    const __m256 id = _mm256_set1_ps(*d != 0.0f ? 1.0f / *d : 0.0f);
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    const __m256i off = _mm256_set1_epi32(128);
    for (int k = 0; k < n; k += 8) {
        const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - k), lanes);
        const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_maskload_ps(x + k, mk), id), lo), hi);
        const __m256i c = _mm256_add_epi32(_mm256_cvtps_epi32(v), off); /* 0 .. 255 */
        const __m128i w = _mm_packus_epi16(_mm_packs_epi32(_mm256_castsi256_si128(c),
                                                           _mm256_extracti128_si256(c, 1)),
                                           _mm_setzero_si128());
        if (n - k >= 8)
            _mm_storel_epi64((__m128i *)(void *)(q + k), w);
        else
            memcpy(q + k, &w, 4); /* n - k == 4 */
    }
}

void attn_quant_i8_panels_avx2(const i8_job *j, int p0, int p1) {
    for (int p = p0; p < p1; p++)
        for (int m0 = 0; m0 < j->M; m0 += I8_ROWS_AVX2)
            i8_tiles_avx2[ATTN_MIN(I8_ROWS_AVX2, j->M - m0)](j, p, m0);
}
#endif

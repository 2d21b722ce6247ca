/* quant_simd.c — products on quantized weights (attn_quant_gemm), compiled once per ISA like the
 * other *_simd.c (kernels-impl.h).
 *
 * Two paths:
 *   - M <= SMALL_M rows (decoding): W is streamed once, straight from its blocks, the rows of W
 *     split over the OpenMP team in contiguous runs (one sequential stream per thread); for any
 *     M from attn_quant_gemm_batch (a batched step of several sequences) the same in chunks of
 *     SMALL_M rows per strip of W, which stays in L1 between the chunks. A block
 *     is decoded into registers 32 elements (a "group") at a time and used for every row of x:
 *       F32 activations: codes -> floats, products with x in float32, the group's scale applied to
 *         the partial sum (w = a·q + c, so Σ w·x = a·Σ q·x + c·Σ x with Σ x per 16 precomputed);
 *       Q8 activations:  x rounded per 32 to int8 codes with a float scale (quantize_acts), then
 *         exact integer dot products of the weight codes with them (VPMADDUBSW + VPMADDWD, or
 *         AVX512-VNNI's VPDPBUSD where the CPU has it: the same integers), scaled in float.
 *     Each output element is summed over the groups in index order whatever the thread count.
 *   - otherwise (prompts): the blocked GEMM of gemm_simd.c (attn_gemm_rows), whose B panels are
 *     filled by dequant_rows below with exactly attn_quant_dequantize's values, then attn_gemm's
 *     microkernels and epilogue. The K blocks start on multiples of 32 (every group decodes on its
 *     own).
 * The integer code is 256-bit on both ISAs (a 32-element group is one ymm of codes); the float
 * code uses vmath.h's vectors (8 or 16 lanes). */
#include "quant-impl.h"
#include "vmath.h"

#define SMALL_M 8
_Static_assert(SMALL_M == ATTN_QUANT_Q8_MAX_ROWS, "attn_quant.h documents this bound");
#define STRIP 64 /* outputs of a row of y gathered before the epilogue */

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- the block formats, a group of 32 elements at a time ----------------------------------- */

/* binary16 at p -> float32 with F16C (exact; a NaN may come out quieted, which no product can
 * tell apart: every use multiplies it). */
static ALWAYS_INLINE float h2f(const uint8_t *p) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(q_rd16(p))));
}

/* Codes subtracted before scaling (x = d·(q − off) [+ add]). */
static ALWAYS_INLINE int code_off(attn_qtype T) {
    return T == ATTN_QTYPE_Q4_0 ? 8 : T == ATTN_QTYPE_Q5_0 ? 16 : T == ATTN_QTYPE_Q6_K ? 32 : 0;
}
/* Whether the format adds a term after scaling: Q4_1/Q5_1's m, Q4_K/Q5_K's −dmin·m. */
static ALWAYS_INLINE bool has_add(attn_qtype T) {
    return T == ATTN_QTYPE_Q4_1 || T == ATTN_QTYPE_Q5_1 || T == ATTN_QTYPE_Q4_K ||
           T == ATTN_QTYPE_Q5_K;
}
static ALWAYS_INLINE int group_elems_per_block(attn_qtype T) {
    return T == ATTN_QTYPE_Q4_K || T == ATTN_QTYPE_Q5_K || T == ATTN_QTYPE_Q6_K ? 8 : 1;
}

/* One group: its 32 codes (unsigned, 0 .. 63, except Q8_0's signed ones) and x = d[h]·(q − off)
 * + add for elements 16h .. 16h + 15. */
typedef struct {
    __m256i q;
    float d[2];
    float add;
} qgroup;

/* 16 bytes of nibbles: bytes 0..15 their low nibbles, 16..31 their high ones. */
static ALWAYS_INLINE __m256i nibbles32(const uint8_t *p) {
    const __m128i t = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
}
/* Byte i = 16 where bit i of h is set, else 0 (Q5's fifth bits). */
static ALWAYS_INLINE __m256i bits32(uint32_t h) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                            2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit),
                            _mm256_set1_epi8(16));
}

/* attn_quant_f32_to_f16_n on F16C (attn_quant.h): eight at a time, a group holding a NaN one at a
 * time (VCVTPS2PH would quiet a signaling NaN's payload; attn_quant_f32_to_f16 keeps it). */
void ATTN_FN(attn_quant_f16_round)(size_t n, const float *src, uint16_t *dst, float *back) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) { /* a NaN: one at a time */
            for (size_t e = i; e < i + 8; e++) q_f16_round_at(src, dst, back, e);
            continue;
        }
        const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (dst) _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
        if (back) _mm256_storeu_ps(back + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) q_f16_round_at(src, dst, back, i);
}

static ALWAYS_INLINE __m256i load256(const uint8_t *p) {
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}
/* Bytes of v shifted right by n bits within 16-bit lanes, then masked to `mask`. */
static ALWAYS_INLINE __m256i shr_mask(__m256i v, int n, int mask) {
    return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(n)), _mm256_set1_epi8((char)mask));
}

/* Group g (0 .. group_elems_per_block − 1) of block b. */
static ALWAYS_INLINE qgroup group_of(attn_qtype T, const uint8_t *b, int g) {
    qgroup r;
    r.add = 0.0f;
    switch (T) {
    case ATTN_QTYPE_Q8_0:
        r.q = load256(b + Q8_0_QS);
        r.d[0] = r.d[1] = h2f(b);
        break;
    case ATTN_QTYPE_Q4_0:
        r.q = nibbles32(b + Q4_0_QS);
        r.d[0] = r.d[1] = h2f(b);
        break;
    case ATTN_QTYPE_Q4_1:
        r.q = nibbles32(b + Q4_1_QS);
        r.d[0] = r.d[1] = h2f(b);
        r.add = h2f(b + Q4_1_M);
        break;
    case ATTN_QTYPE_Q5_0:
        r.q = _mm256_or_si256(nibbles32(b + Q5_0_QS), bits32(q_rd32(b + Q5_0_QH)));
        r.d[0] = r.d[1] = h2f(b);
        break;
    case ATTN_QTYPE_Q5_1:
        r.q = _mm256_or_si256(nibbles32(b + Q5_1_QS), bits32(q_rd32(b + Q5_1_QH)));
        r.d[0] = r.d[1] = h2f(b);
        r.add = h2f(b + Q5_1_M);
        break;
    case ATTN_QTYPE_Q4_K:
    case ATTN_QTYPE_Q5_K: {
        const bool five = T == ATTN_QTYPE_Q5_K;
        const uint8_t *qs = b + (five ? Q5_K_QS : Q4_K_QS) + 32 * (g / 2);
        r.q = shr_mask(load256(qs), 4 * (g & 1), 15);
        if (five)
            r.q = _mm256_or_si256(r.q, _mm256_slli_epi16(shr_mask(load256(b + Q5_K_QH), g, 1), 4));
        int sc, m;
        q_k4_scale_min(g, b + QK4_SC, &sc, &m);
        r.d[0] = r.d[1] = h2f(b) * (float)sc;
        r.add = -(h2f(b + QK4_DMIN) * (float)m);
        break;
    }
    case ATTN_QTYPE_Q6_K: {
        const int h = g / 4, row = g % 4; /* elements 128h + 32row .. + 31 */
        const __m256i lo = shr_mask(load256(b + 64 * h + 32 * (row & 1)), 4 * (row >> 1), 15);
        const __m256i hi = shr_mask(load256(b + Q6_K_QH + 32 * h), 2 * row, 3);
        r.q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
        const int8_t *sc = (const int8_t *)(b + Q6_K_SC) + 8 * h + 2 * row;
        const float d = h2f(b + Q6_K_D);
        r.d[0] = d * (float)sc[0];
        r.d[1] = d * (float)sc[1];
        break;
    }
    default: r.q = _mm256_setzero_si256(), r.d[0] = r.d[1] = 0.0f; break;
    }
    return r;
}

/* Group gi (counted from the row's start) of the row at w. */
static ALWAYS_INLINE qgroup row_group(attn_qtype T, const uint8_t *w, size_t bb, int gi) {
    const int gpb = group_elems_per_block(T);
    return group_of(T, w + (size_t)(gi / gpb) * bb, gi % gpb);
}

/* The 32 signed bytes of q as floats: AV_LEN per vector, 32 / AV_LEN vectors. */
#define CODE_VECS (32 / AV_LEN)
static ALWAYS_INLINE void codes_to_floats(__m256i q, av_f f[CODE_VECS]) {
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
#if ATTN_ISA == 512
    f[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
    f[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
#else
    f[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    f[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
    f[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    f[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
#endif
}

/* An opaque copy: keeps the compiler from fusing the product before it into an FMA with the
 * addition after it (-ffp-contract=fast), which dequantization must not do. */
static ALWAYS_INLINE av_f no_fuse(av_f v) {
    __asm__("" : "+v"(v));
    return v;
}

/* out (32) = the group's values, exactly as attn_quant_block_dequant computes them. */
static ALWAYS_INLINE void dequant_group(attn_qtype T, qgroup g, float *out) {
    const int off = code_off(T);
    av_f f[CODE_VECS];
    codes_to_floats(off ? _mm256_sub_epi8(g.q, _mm256_set1_epi8((char)off)) : g.q, f);
    for (int c = 0; c < CODE_VECS; c++) {
        const av_f d = av_set1(g.d[c * AV_LEN / 16]);
        av_f v = av_mul(d, f[c]);
        if (has_add(T)) v = av_add(no_fuse(v), no_fuse(av_set1(g.add)));
        av_store(out + c * AV_LEN, v);
    }
}

/* ---- the blocked GEMM's row producer ------------------------------------------------------- */

typedef struct {
    attn_qtype t;
    const uint8_t *w;
    size_t row_bytes, block_bytes;
} qrows;

static ALWAYS_INLINE void dequant_rows_t(attn_qtype T, const qrows *q, int j0, int n, int k0,
                                         int kc, float *out) {
    for (int r = 0; r < n; r++) {
        const uint8_t *row = q->w + (size_t)(j0 + r) * q->row_bytes;
        float *o = out + (size_t)r * kc;
        for (int k = 0; k < kc; k += 32)
            dequant_group(T, row_group(T, row, q->block_bytes, (k0 + k) / 32), o + k);
    }
}

/* F16 and BF16 rows: exact conversions (F16C for binary16). */
static void convert_rows(const qrows *q, int j0, int n, int k0, int kc, float *out) {
    for (int r = 0; r < n; r++) {
        const uint8_t *row = q->w + (size_t)(j0 + r) * q->row_bytes + (size_t)k0 * 2;
        float *o = out + (size_t)r * kc;
        int k = 0;
        if (q->t == ATTN_QTYPE_F16) {
#if ATTN_ISA == 512
            for (; k + 16 <= kc; k += 16)
                _mm512_storeu_ps(o + k, _mm512_cvtph_ps(load256(row + 2 * k)));
#else
            for (; k + 8 <= kc; k += 8)
                _mm256_storeu_ps(
                    o + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * k))));
#endif
            for (; k < kc; k++) o[k] = q_f16_at(row + 2 * k);
        } else {
            for (; k + 8 <= kc; k += 8) {
                const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(row + 2 * k));
                _mm256_storeu_ps(o + k, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
            }
            for (; k < kc; k++) {
                const uint32_t u = (uint32_t)q_rd16(row + 2 * k) << 16;
                memcpy(o + k, &u, sizeof u);
            }
        }
    }
}

static void dequant_rows(const void *ctx, int j0, int n, int k0, int kc, float *out) {
    const qrows *q = ctx;
    switch (q->t) {
#define ROWS_CASE(T)                                                                             \
    case T: dequant_rows_t(T, q, j0, n, k0, kc, out); break;
        ROWS_CASE(ATTN_QTYPE_Q8_0)
        ROWS_CASE(ATTN_QTYPE_Q4_0)
        ROWS_CASE(ATTN_QTYPE_Q4_1)
        ROWS_CASE(ATTN_QTYPE_Q5_0)
        ROWS_CASE(ATTN_QTYPE_Q5_1)
        ROWS_CASE(ATTN_QTYPE_Q4_K)
        ROWS_CASE(ATTN_QTYPE_Q5_K)
        ROWS_CASE(ATTN_QTYPE_Q6_K)
#undef ROWS_CASE
    default: convert_rows(q, j0, n, k0, kc, out); break;
    }
}

/* ---- small M: the activations ---------------------------------------------------------------- */

/* What the small-M kernels read of the M rows of x (M <= SMALL_M), prepared once per call, per
 * row of x and group g of 32 elements (G = K/32 groups):
 *   F32 mode: x itself, and the sums of x over the group's halves and whole (s16lo, s16hi, s32:
 *             (M, G) each; the offset terms: w = a·q + c gives Σ w·x = a·Σ q·x + c·Σ x);
 *   Q8 mode:  xq (M, K) int8 codes, xd (M, G) their scales, and the same sums of the rounded
 *             activations xd · code. */
typedef struct {
    const float *x;
    int ldx;
    const int8_t *xq;
    const float *xd, *s16lo, *s16hi, *s32;
    const int32_t *xs; /* (M, G) Q8 mode: Σ of each group's codes, as integers (x8_pair_vnni) */
} acts;

static ALWAYS_INLINE float hsum_ps256(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

static ALWAYS_INLINE int hsum_i32x8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* Row x (K) in F32 mode: the sums of the halves and of each group. */
static void sums_f32(int K, const float *x, float *lo, float *hi, float *s32) {
    for (int k = 0; k < K; k += 32) {
        const float a = hsum_ps256(_mm256_add_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(x + k + 8)));
        const float b =
            hsum_ps256(_mm256_add_ps(_mm256_loadu_ps(x + k + 16), _mm256_loadu_ps(x + k + 24)));
        lo[k / 32] = a, hi[k / 32] = b, s32[k / 32] = a + b;
    }
}

/* One group of 32 of x in Q8 mode: d = max|x| / 127 (*d), c[i] the int32 codes round(x / d) (to
 * nearest even; |code| <= 127) of x[8i .. 8i + 8); returns the 32 codes as bytes in order. */
static ALWAYS_INLINE __m256i q8_group(const float *x, float *d, __m256i c[4]) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    *d = _mm_cvtss_f32(h) / 127.0f;
    const float id = *d != 0.0f ? 1.0f / *d : 0.0f;
    for (int i = 0; i < 4; i++) c[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
    /* packs interleave the 128-bit lanes: (0 2 | 1 3) -> bytes 0-3 8-11 | 4-7 12-15 in dwords;
     * vpermd restores the order. */
    const __m256i p16a = _mm256_packs_epi32(c[0], c[1]), p16b = _mm256_packs_epi32(c[2], c[3]);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Lane i of the result: the maximum (add: the int32 sum) of v[i]'s 8 lanes. Max and integer sums
 * are exact, so the order (a transpose tree: pairs of vectors, then halves of lanes, then the two
 * 128-bit lanes) gives the values of a horizontal reduction of each v[i] alone. */
static ALWAYS_INLINE __m256 hmax8x8(const __m256 v[8]) {
    __m256 p[4], q[2];
    for (int i = 0; i < 4; i++) /* per 128-bit lane: [a0|a2, b0|b2, a1|a3, b1|b3] */
        p[i] = _mm256_max_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                             _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 2; i++) { /* per lane: [a, b, c, d] */
        const __m256d x = _mm256_castps_pd(p[2 * i]), y = _mm256_castps_pd(p[2 * i + 1]);
        q[i] = _mm256_max_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)),
                             _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
    }
    return _mm256_max_ps(_mm256_permute2f128_ps(q[0], q[1], 0x20),
                         _mm256_permute2f128_ps(q[0], q[1], 0x31));
}
static ALWAYS_INLINE __m256i hadd8x8(const __m256i v[8]) {
    __m256i p[4], q[2];
    for (int i = 0; i < 4; i++)
        p[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 2; i++)
        q[i] = _mm256_add_epi32(_mm256_unpacklo_epi64(p[2 * i], p[2 * i + 1]),
                                _mm256_unpackhi_epi64(p[2 * i], p[2 * i + 1]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(q[0], q[1], 0x20),
                            _mm256_permute2x128_si256(q[0], q[1], 0x31));
}

/* q8_group for 8 groups of x (256 values) at once: the same codes (into q) and scales (d), their
 * arithmetic lane by lane in vectors instead of one group's latency-bound chain of a horizontal
 * maximum and two divisions (IEEE division and multiplication give the scalar code's bits;
 * `d != 0` is unordered-or-unequal, as C's != is for a NaN). *ia / *ib: the int32 sums of each
 * group's first and second 16 codes. Before (one group at a time) quantizing the activations was
 * ~5% of a 16-slot SmolLM2 int8 decoding step. */
static ALWAYS_INLINE __m256 q8_groups8(const float *x, int8_t *q, __m256i *ia, __m256i *ib) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 am[8];
    for (int g = 0; g < 8; g++) {
        const float *xg = x + 32 * g;
        am[g] = _mm256_max_ps(
            _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xg)),
                          _mm256_andnot_ps(sign, _mm256_loadu_ps(xg + 8))),
            _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xg + 16)),
                          _mm256_andnot_ps(sign, _mm256_loadu_ps(xg + 24))));
    }
    const __m256 d = _mm256_div_ps(hmax8x8(am), _mm256_set1_ps(127.0f));
    const __m256 id = _mm256_and_ps(_mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_UQ),
                                    _mm256_div_ps(_mm256_set1_ps(1.0f), d));
    float idv[8];
    _mm256_storeu_ps(idv, id);
    __m256i sa[8], sb[8];
    for (int g = 0; g < 8; g++) {
        const __m256 s = _mm256_set1_ps(idv[g]);
        __m256i c[4];
        for (int i = 0; i < 4; i++)
            c[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * i), s));
        const __m256i p16a = _mm256_packs_epi32(c[0], c[1]), p16b = _mm256_packs_epi32(c[2], c[3]);
        _mm256_storeu_si256((__m256i *)(void *)(q + 32 * g),
                            _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                                        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        sa[g] = _mm256_add_epi32(c[0], c[1]);
        sb[g] = _mm256_add_epi32(c[2], c[3]);
    }
    *ia = hadd8x8(sa);
    *ib = hadd8x8(sb);
    return d;
}

/* Row x (K) in Q8 mode: per 32, the codes and scale of q8_group, and the sums of the halves and
 * of the group of d·code (8 groups at a time by q8_groups8, the last K/32 mod 8 one by one). */
static void quantize_acts(int K, const float *x, int8_t *q, float *xd, float *lo, float *hi,
                          float *s32, int32_t *xs) {
    int k = 0;
    for (; k + 256 <= K; k += 256) {
        __m256i ia, ib;
        const __m256 d = q8_groups8(x + k, q + k, &ia, &ib);
        const __m256i is = _mm256_add_epi32(ia, ib);
        const int g = k / 32;
        _mm256_storeu_ps(xd + g, d);
        _mm256_storeu_ps(lo + g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(ia)));
        _mm256_storeu_ps(hi + g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(ib)));
        _mm256_storeu_ps(s32 + g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(is)));
        _mm256_storeu_si256((__m256i *)(void *)(xs + g), is);
    }
    for (; k < K; k += 32) {
        __m256i c[4];
        float d;
        _mm256_storeu_si256((__m256i *)(void *)(q + k), q8_group(x + k, &d, c));
        const int ia = hsum_i32x8(_mm256_add_epi32(c[0], c[1]));
        const int ib = hsum_i32x8(_mm256_add_epi32(c[2], c[3]));
        xd[k / 32] = d;
        lo[k / 32] = d * (float)ia, hi[k / 32] = d * (float)ib;
        s32[k / 32] = d * (float)(ia + ib);
        xs[k / 32] = ia + ib;
    }
}

#if ATTN_ISA == 512
/* The codes of quantize_acts stored + 128 as unsigned bytes (for VPDPBUSD), and the scales,
 * without the group sums. */
static void quantize_acts_u8(int K, const float *x, uint8_t *q, float *xd) {
    for (int k = 0; k < K; k += 32) {
        __m256i c[4];
        _mm256_storeu_si256((__m256i *)(void *)(q + k),
                            _mm256_xor_si256(q8_group(x + k, xd + k / 32, c),
                                             _mm256_set1_epi8((char)0x80)));
    }
}
#endif

/* ---- small M: the kernels -------------------------------------------------------------------- */

/* Σ over 4-byte groups of u8 (a) × s8 (b) products, as 8 int32: exact (|a| <= 63 here, or 128
 * with Q8_0's sign trick; |b| <= 127: no 16-bit saturation). */
static ALWAYS_INLINE __m256i dot_u8s8(__m256i a, __m256i b) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
}
#if ATTN_ISA == 512
#define VNNI_FN __attribute__((target("avx512vnni")))
VNNI_FN static ALWAYS_INLINE __m256i dot_u8s8_vnni(__m256i a, __m256i b) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b);
}
#endif

static ALWAYS_INLINE bool is_kquant(attn_qtype T) {
    return T == ATTN_QTYPE_Q4_K || T == ATTN_QTYPE_Q5_K || T == ATTN_QTYPE_Q6_K;
}

/* A k-quant super-block's eight groups' scales as vectors: w = a0·q + c over each group (Q4_K,
 * Q5_K: a0 = d·sc, c = −dmin·m; Q6_K: a0 on a group's first half, a1 on its second). */
static ALWAYS_INLINE void sb_scales(attn_qtype T, const uint8_t *b, __m256 *a0, __m256 *a1,
                                    __m256 *c) {
    if (T == ATTN_QTYPE_Q6_K) {
        /* scales[16], group g's halves at 2g and 2g + 1: even bytes, then odd ones. */
        const __m128i sc = _mm_shuffle_epi8(
            _mm_loadu_si128((const __m128i *)(const void *)(b + Q6_K_SC)),
            _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
        const __m256 d = _mm256_set1_ps(h2f(b + Q6_K_D));
        *a0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
        *a1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))));
        return;
    }
    /* The eight 6-bit scales and mins (q_k4_scale_min), four per 32-bit word. */
    const uint8_t *sc = b + QK4_SC;
    const uint32_t u0 = q_rd32(sc), u1 = q_rd32(sc + 4), u2 = q_rd32(sc + 8);
    const uint32_t s_lo = u0 & 0x3f3f3f3fu, m_lo = u1 & 0x3f3f3f3fu;
    const uint32_t s_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    const uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    const __m256 sf =
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32((int)s_lo, (int)s_hi, 0, 0)));
    const __m256 mf =
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32((int)m_lo, (int)m_hi, 0, 0)));
    *a0 = _mm256_mul_ps(_mm256_set1_ps(h2f(b)), sf);
    *c = _mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(_mm256_set1_ps(h2f(b + QK4_DMIN)), mf));
}

/* The offset terms of one group against row r of the activation sums: Σ over the group of
 * (add − d·off)·x (a small format's groups past the last eight). */
static ALWAYS_INLINE float offset_terms(attn_qtype T, const qgroup *g, const acts *a, size_t r) {
    if (T == ATTN_QTYPE_Q8_0) return 0.0f;
    const float c = has_add(T) ? g->add : -(float)code_off(T) * g->d[0];
    return c * a->s32[r];
}

/* Row n of y for Mc rows of x in Q8 mode: out[m·ldo]. M = 1 alternates two accumulators over the
 * groups to hide the FMA latency.
 *   Small formats: each group's scales decoded with it (scalar work that overlaps the vector
 *   work: measured fastest).
 *   k-quants: per super-block, the eight groups' scales decoded as vectors, multiplied by the
 *   activation scales and dotted with the activation sums (the offsets) eight at a time, then
 *   the groups' codes (measured 1.6x faster than decoding the 6-bit scales per group). */
#define INT_ROW(name, DOT, ATTR)                                                                 \
    /* acc + s · (the integer dot product of the codes q with the 32 activation codes at xq) */ \
    ATTR static ALWAYS_INLINE __m256 name##_dot(attn_qtype T, __m256i q, const int8_t *xq,       \
                                                __m256 s, __m256 acc) {                          \
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)xq);                \
        const __m256i p = T == ATTN_QTYPE_Q8_0                                                   \
                              ? DOT(_mm256_sign_epi8(q, q), _mm256_sign_epi8(xv, q))             \
                              : DOT(q, xv);                                                      \
        return _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(p), acc);                                   \
    }                                                                                            \
    /* one group of a small format against Mc rows */                                           \
    ATTR static ALWAYS_INLINE void name##_grp(attn_qtype T, int Mc, const acts *a, int K,        \
                                              const qgroup *g, int gi, __m256 *acc,             \
                                              float *accs) {                                     \
        const int G = K / 32;                                                                    \
        for (int m = 0; m < Mc; m++) {                                                           \
            const size_t r = (size_t)m * G + gi;                                                 \
            acc[m] = name##_dot(T, g->q, a->xq + (size_t)m * K + 32 * gi,                        \
                                _mm256_set1_ps(g->d[0] * a->xd[r]), acc[m]);                     \
            accs[m] += offset_terms(T, g, a, r);                                                 \
        }                                                                                        \
    }                                                                                            \
    ATTR static ALWAYS_INLINE void name(attn_qtype T, int Mc, const acts *a, int K,              \
                                        const uint8_t *w, size_t rb, size_t bb, int n,           \
                                        float *out, int ldo) {                                   \
        const uint8_t *row = w + (size_t)n * rb;                                                 \
        const int G = K / 32;                                                                    \
        __m256 acc[SMALL_M], acc2 = _mm256_setzero_ps(), offs[SMALL_M];                          \
        float accs[SMALL_M];                                                                     \
        for (int m = 0; m < Mc; m++)                                                             \
            acc[m] = offs[m] = _mm256_setzero_ps(), accs[m] = 0.0f;                              \
        int g0 = 0;                                                                              \
        /* k-quants by super-block; the small formats group by group (measured faster for    \
         * them: the scalar scale work overlaps the vector work) */                             \
        for (; is_kquant(T) && g0 + 8 <= G; g0 += 8) {                                           \
            const uint8_t *b = row + (size_t)(g0 / 8) * bb;                                      \
            __m256 a0, a1 = _mm256_setzero_ps(), c = _mm256_setzero_ps();                        \
            sb_scales(T, b, &a0, &a1, &c);                                                   \
            float ad0[SMALL_M][8] __attribute__((aligned(32)));                                  \
            float ad1[SMALL_M][8] __attribute__((aligned(32)));                                  \
            for (int m = 0; m < Mc; m++) {                                                       \
                const size_t r = (size_t)m * G + g0;                                             \
                const __m256 xd = _mm256_loadu_ps(a->xd + r);                                    \
                _mm256_store_ps(ad0[m], _mm256_mul_ps(a0, xd));                                  \
                if (T == ATTN_QTYPE_Q6_K) {                                                      \
                    _mm256_store_ps(ad1[m], _mm256_mul_ps(a1, xd));                              \
                    offs[m] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(a->s16lo + r), offs[m]);       \
                    offs[m] = _mm256_fmadd_ps(a1, _mm256_loadu_ps(a->s16hi + r), offs[m]);       \
                } else if (T != ATTN_QTYPE_Q8_0) {                                               \
                    offs[m] = _mm256_fmadd_ps(c, _mm256_loadu_ps(a->s32 + r), offs[m]);          \
                }                                                                                \
            }                                                                                    \
            const int8_t *xq = a->xq + 32 * (size_t)g0;                                          \
            for (int g = 0; g < 8; g++) {                                                        \
                const __m256i q = group_of(T, b, g).q;                                     \
                for (int m = 0; m < Mc; m++) {                                                   \
                    const __m256 s = T == ATTN_QTYPE_Q6_K                                        \
                                         ? _mm256_set_m128(_mm_broadcast_ss(&ad1[m][g]),         \
                                                           _mm_broadcast_ss(&ad0[m][g]))         \
                                         : _mm256_broadcast_ss(&ad0[m][g]);                      \
                    __m256 *dst = Mc == 1 && (g & 1) ? &acc2 : &acc[m];                          \
                    *dst = name##_dot(T, q, xq + (size_t)m * K + 32 * g, s, *dst);               \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        for (int m = 0; m < Mc; m++)                                                             \
            accs[m] = hsum_ps256(offs[m]) * (T == ATTN_QTYPE_Q6_K ? -32.0f : 1.0f);              \
        if (Mc == 1)                                                                             \
            for (; g0 + 2 <= G; g0 += 2) {                                                       \
                const qgroup g = row_group(T, row, bb, g0), h = row_group(T, row, bb, g0 + 1);   \
                name##_grp(T, 1, a, K, &g, g0, acc, accs);                                       \
                name##_grp(T, 1, a, K, &h, g0 + 1, &acc2, accs);                                 \
            }                                                                                    \
        for (; g0 < G; g0++) {                                                                   \
            const qgroup g = row_group(T, row, bb, g0);                                          \
            name##_grp(T, Mc, a, K, &g, g0, acc, accs);                                          \
        }                                                                                        \
        acc[0] = _mm256_add_ps(acc[0], acc2);                                                    \
        for (int m = 0; m < Mc; m++) out[(size_t)m * ldo] = hsum_ps256(acc[m]) + accs[m];        \
    }
INT_ROW(row_int, dot_u8s8, )
#if ATTN_ISA == 512
INT_ROW(row_int_vnni, dot_u8s8_vnni, VNNI_FN)
#endif

/* acc + the products of the codes f (as floats) with the 32 floats at x, scaled per half. */
static ALWAYS_INLINE av_f flt_dot(attn_qtype T, const av_f *f, const float *x, float s0, float s1,
                                  av_f acc) {
#if ATTN_ISA == 512
    const av_f lo = av_mul(f[0], av_load(x)), hi = av_mul(f[1], av_load(x + 16));
#else
    const av_f lo = av_fmadd(f[1], av_load(x + 8), av_mul(f[0], av_load(x)));
    const av_f hi = av_fmadd(f[3], av_load(x + 24), av_mul(f[2], av_load(x + 16)));
#endif
    if (T == ATTN_QTYPE_Q6_K) return av_fmadd(av_set1(s1), hi, av_fmadd(av_set1(s0), lo, acc));
    return av_fmadd(av_set1(s0), av_add(lo, hi), acc);
}

/* The same in float32 (F32 mode): the codes as floats times x, the scales applied per group,
 * organized as INT_ROW. */
static ALWAYS_INLINE void row_flt(attn_qtype T, int Mc, const acts *a, int K, const uint8_t *w,
                                  size_t rb, size_t bb, int n, float *out, int ldo) {
    const uint8_t *row = w + (size_t)n * rb;
    const int G = K / 32;
    av_f acc[SMALL_M], acc2 = av_zero();
    __m256 offs[SMALL_M];
    float accs[SMALL_M];
    for (int m = 0; m < Mc; m++) acc[m] = av_zero(), offs[m] = _mm256_setzero_ps(), accs[m] = 0;
    av_f f[CODE_VECS];
    int g0 = 0;
    for (; is_kquant(T) && g0 + 8 <= G; g0 += 8) {
        const uint8_t *b = row + (size_t)(g0 / 8) * bb;
        __m256 a0v, a1v = _mm256_setzero_ps(), cv = _mm256_setzero_ps();
        sb_scales(T, b, &a0v, &a1v, &cv);
        float a0[8] __attribute__((aligned(32))), a1[8] __attribute__((aligned(32)));
        _mm256_store_ps(a0, a0v);
        _mm256_store_ps(a1, a1v);
        for (int m = 0; m < Mc; m++) {
            const size_t r = (size_t)m * G + g0;
            if (T == ATTN_QTYPE_Q6_K) {
                offs[m] = _mm256_fmadd_ps(a0v, _mm256_loadu_ps(a->s16lo + r), offs[m]);
                offs[m] = _mm256_fmadd_ps(a1v, _mm256_loadu_ps(a->s16hi + r), offs[m]);
            } else if (T != ATTN_QTYPE_Q8_0) {
                offs[m] = _mm256_fmadd_ps(cv, _mm256_loadu_ps(a->s32 + r), offs[m]);
            }
        }
        for (int g = 0; g < 8; g++) {
            codes_to_floats(group_of(T, b, g).q, f);
            for (int m = 0; m < Mc; m++) {
                av_f *dst = Mc == 1 && (g & 1) ? &acc2 : &acc[m];
                *dst = flt_dot(T, f, a->x + (size_t)m * a->ldx + 32 * (g0 + g), a0[g], a1[g], *dst);
            }
        }
    }
    for (int m = 0; m < Mc; m++)
        accs[m] = hsum_ps256(offs[m]) * (T == ATTN_QTYPE_Q6_K ? -32.0f : 1.0f);
    if (Mc == 1)
        for (; g0 + 2 <= G; g0 += 2) {
            const qgroup g = row_group(T, row, bb, g0), h = row_group(T, row, bb, g0 + 1);
            av_f f2[CODE_VECS];
            codes_to_floats(g.q, f);
            codes_to_floats(h.q, f2);
            acc[0] = flt_dot(T, f, a->x + 32 * g0, g.d[0], g.d[1], acc[0]);
            acc2 = flt_dot(T, f2, a->x + 32 * (g0 + 1), h.d[0], h.d[1], acc2);
            accs[0] += offset_terms(T, &g, a, g0) + offset_terms(T, &h, a, g0 + 1);
        }
    for (; g0 < G; g0++) {
        const qgroup g = row_group(T, row, bb, g0);
        codes_to_floats(g.q, f);
        for (int m = 0; m < Mc; m++) {
            acc[m] = flt_dot(T, f, a->x + (size_t)m * a->ldx + 32 * g0, g.d[0], g.d[1], acc[m]);
            accs[m] += offset_terms(T, &g, a, (size_t)m * G + g0);
        }
    }
    acc[0] = av_add(acc[0], acc2);
    for (int m = 0; m < Mc; m++) out[(size_t)m * ldo] = av_reduce_add(acc[m]) + accs[m];
}

/* Bytes ahead of the stream of a half-precision row (and the rows after it): the hardware
 * prefetchers stop at 4 KiB pages. */
#define HALF_PREFETCH 1024

/* F16 / BF16 weights (no groups): converted AV_LEN at a time, float products; M = 1 with two
 * accumulators. */
static ALWAYS_INLINE av_f half_vec(bool f16, const uint8_t *p) {
#if ATTN_ISA == 512
    if (f16) return _mm512_cvtph_ps(load256(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(load256(p)), 16));
#else
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (f16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
#endif
}
static ALWAYS_INLINE void row_half(bool f16, int Mc, const acts *a, int K, const uint8_t *w,
                                   size_t rb, int n, float *out, int ldo) {
    const uint8_t *row = w + (size_t)n * rb;
    av_f acc[SMALL_M], acc2 = av_zero();
    for (int m = 0; m < Mc; m++) acc[m] = av_zero();
    int k = 0;
    if (Mc == 1)
        for (; k + 2 * AV_LEN <= K; k += 2 * AV_LEN) {
            _mm_prefetch((const char *)row + 2 * k + HALF_PREFETCH, _MM_HINT_T0);
            acc[0] = av_fmadd(half_vec(f16, row + 2 * k), av_load(a->x + k), acc[0]);
            acc2 = av_fmadd(half_vec(f16, row + 2 * k + 2 * AV_LEN), av_load(a->x + k + AV_LEN),
                            acc2);
        }
    for (; k + AV_LEN <= K; k += AV_LEN) {
        const av_f v = half_vec(f16, row + 2 * k);
        for (int m = 0; m < Mc; m++)
            acc[m] = av_fmadd(v, av_load(a->x + (size_t)m * a->ldx + k), acc[m]);
    }
    acc[0] = av_add(acc[0], acc2);
    for (int m = 0; m < Mc; m++) {
        float s = av_reduce_add(acc[m]);
        for (int kk = k; kk < K; kk++) {
            const uint32_t hb = q_rd16(row + 2 * kk);
            float wv;
            if (f16) {
                wv = q_f16(hb);
            } else {
                const uint32_t bits = hb << 16;
                memcpy(&wv, &bits, sizeof wv);
            }
            s += wv * a->x[(size_t)m * a->ldx + kk];
        }
        out[(size_t)m * ldo] = s;
    }
}

/* ---- small M: the driver --------------------------------------------------------------------- */

typedef struct {
    int M, N, K;
    attn_qtype t;
    const uint8_t *w;
    size_t rb, bb;
    attn_quant_act qact;
    bool vnni;
    acts a;
    float beta, *y;
    int ldy;
    const float *bias;
    attn_act act;
} small_job;

/* out (Mc, nb; row stride STRIP) for rows n0 .. n0 + nb of W. */
static ALWAYS_INLINE void strip_t(attn_qtype T, int Mc, const small_job *j, int n0, int nb,
                                  float *out) {
    for (int r = 0; r < nb; r++) {
        if (T == ATTN_QTYPE_F16 || T == ATTN_QTYPE_BF16)
            row_half(T == ATTN_QTYPE_F16, Mc, &j->a, j->K, j->w, j->rb, n0 + r, out + r, STRIP);
        else if (j->qact == ATTN_QUANT_ACT_F32)
            row_flt(T, Mc, &j->a, j->K, j->w, j->rb, j->bb, n0 + r, out + r, STRIP);
        else
            row_int(T, Mc, &j->a, j->K, j->w, j->rb, j->bb, n0 + r, out + r, STRIP);
    }
}

typedef void (*strip_fn)(const small_job *, int, int, float *);

/* One function per (type, row count): the row count a constant, so the row loops unroll and the
 * accumulators stay in registers. On AVX-512 a second set, compiled for AVX512-VNNI, runs the
 * integer products on CPUs that have it (only there: the attribute lets the compiler use VNNI
 * anywhere in those functions). */
#define STRIP_FN(T, Mc, name)                                                                    \
    __attribute__((noinline)) static void name(const small_job *j, int n0, int nb, float *out) { \
        strip_t(T, Mc, j, n0, nb, out);                                                          \
    }
#define STRIP_TABLE(tn, sfx)                                                                     \
    static const strip_fn strips_##tn##sfx[SMALL_M + 1] = {                                      \
        NULL,                   strip_##tn##_1##sfx, strip_##tn##_2##sfx, strip_##tn##_3##sfx,   \
        strip_##tn##_4##sfx, strip_##tn##_5##sfx, strip_##tn##_6##sfx, strip_##tn##_7##sfx,      \
        strip_##tn##_8##sfx};
#define STRIP_SET(DEF, T, tn, sfx)                                                               \
    DEF(T, 1, strip_##tn##_1##sfx)                                                               \
    DEF(T, 2, strip_##tn##_2##sfx)                                                               \
    DEF(T, 3, strip_##tn##_3##sfx)                                                               \
    DEF(T, 4, strip_##tn##_4##sfx)                                                               \
    DEF(T, 5, strip_##tn##_5##sfx)                                                               \
    DEF(T, 6, strip_##tn##_6##sfx)                                                               \
    DEF(T, 7, strip_##tn##_7##sfx)                                                               \
    DEF(T, 8, strip_##tn##_8##sfx)                                                               \
    STRIP_TABLE(tn, sfx)
#if ATTN_ISA == 512
VNNI_FN static ALWAYS_INLINE void strip_vnni_t(attn_qtype T, int Mc, const small_job *j, int n0,
                                               int nb, float *out) {
    for (int r = 0; r < nb; r++)
        row_int_vnni(T, Mc, &j->a, j->K, j->w, j->rb, j->bb, n0 + r, out + r, STRIP);
}
#define STRIP_FN_VNNI(T, Mc, name)                                                               \
    VNNI_FN __attribute__((noinline)) static void name(const small_job *j, int n0, int nb,       \
                                                       float *out) {                             \
        strip_vnni_t(T, Mc, j, n0, nb, out);                                                     \
    }
#define STRIP_FNS(T, tn) STRIP_SET(STRIP_FN, T, tn, ) STRIP_SET(STRIP_FN_VNNI, T, tn, _vnni)
#else
#define STRIP_FNS(T, tn) STRIP_SET(STRIP_FN, T, tn, )
#endif
STRIP_SET(STRIP_FN, ATTN_QTYPE_F16, f16, )
STRIP_SET(STRIP_FN, ATTN_QTYPE_BF16, bf16, )
STRIP_FNS(ATTN_QTYPE_Q8_0, q8_0)
STRIP_FNS(ATTN_QTYPE_Q4_0, q4_0)
STRIP_FNS(ATTN_QTYPE_Q4_1, q4_1)
STRIP_FNS(ATTN_QTYPE_Q5_0, q5_0)
STRIP_FNS(ATTN_QTYPE_Q5_1, q5_1)
STRIP_FNS(ATTN_QTYPE_Q4_K, q4_k)
STRIP_FNS(ATTN_QTYPE_Q5_K, q5_k)
STRIP_FNS(ATTN_QTYPE_Q6_K, q6_k)

/* The strip function of a type and row count (VNNI: the integer products with VPDPBUSD). */
static strip_fn strip_for(attn_qtype t, int Mc, bool vnni) {
#if ATTN_ISA == 512
#define STRIP_PICK(tn) return vnni ? strips_##tn##_vnni[Mc] : strips_##tn[Mc]
#else
#define STRIP_PICK(tn) return (void)vnni, strips_##tn[Mc]
#endif
    switch (t) {
    case ATTN_QTYPE_F16: return strips_f16[Mc];
    case ATTN_QTYPE_BF16: return strips_bf16[Mc];
    case ATTN_QTYPE_Q8_0: STRIP_PICK(q8_0);
    case ATTN_QTYPE_Q4_0: STRIP_PICK(q4_0);
    case ATTN_QTYPE_Q4_1: STRIP_PICK(q4_1);
    case ATTN_QTYPE_Q5_0: STRIP_PICK(q5_0);
    case ATTN_QTYPE_Q5_1: STRIP_PICK(q5_1);
    case ATTN_QTYPE_Q4_K: STRIP_PICK(q4_k);
    case ATTN_QTYPE_Q5_K: STRIP_PICK(q5_k);
    case ATTN_QTYPE_Q6_K: STRIP_PICK(q6_k);
    case ATTN_QTYPE_F32:
    case ATTN_QTYPE_I8: break;
    }
#undef STRIP_PICK
    return NULL;
}

/* The activations of rows r0 .. of a (rows of K values): a view for a chunk of rows. */
static acts acts_rows(const acts *a, int K, int r0) {
    const size_t G = (size_t)(K / 32), r = (size_t)r0;
    acts b = *a;
    b.x = a->x + r * (size_t)a->ldx;
    if (a->xq) b.xq = a->xq + r * (size_t)K;
    if (a->xd) b.xd = a->xd + r * G;
    if (a->s16lo) b.s16lo = a->s16lo + r * G;
    if (a->s16hi) b.s16hi = a->s16hi + r * G;
    if (a->s32) b.s32 = a->s32 + r * G;
    if (a->xs) b.xs = a->xs + r * G;
    return b;
}

/* Rows [n0, n1) of y: strips of STRIP outputs, each for the rows of x in chunks of SMALL_M (more
 * only from attn_quant_gemm_batch), then the epilogue per row of y. */
static void small_range(const small_job *j, int n0, int n1) {
    float out[SMALL_M * STRIP];
    for (int s = n0; s < n1; s += STRIP) {
        const int nb = ATTN_MIN(STRIP, n1 - s);
        for (int r0 = 0; r0 < j->M; r0 += SMALL_M) {
            small_job c = *j;
            c.M = ATTN_MIN(SMALL_M, j->M - r0);
            if (r0) c.a = acts_rows(&j->a, j->K, r0);
            strip_for(j->t, c.M, j->vnni)(&c, s, nb, out);
            for (int m = 0; m < c.M; m++)
                ATTN_FN(attn_gemm_store_row)(j->y + (size_t)(r0 + m) * j->ldy + s, nb,
                                             out + m * STRIP, 1.0f, j->beta,
                                             j->bias ? j->bias + s : NULL, j->act);
        }
    }
}

static bool cpu_vnni(void) { return ATTN_ISA == 512 && quant_cpu_vnni(); }

/* The activations of M rows of x (M, K) for the small-M kernels (q8: Q8 mode, grouped: a block
 * type): the scratch and the pointers into it, the values left to acts_fill; *scratch is what to
 * attn_free after. false when out of memory. */
static bool acts_alloc(int M, int K, const float *x, int ldx, bool q8, bool grouped, acts *a,
                       void **scratch) {
    /* s16lo, s16hi, s32, xd (M, G) floats each, then (Q8) xs (M, G) int32 and xq (M, K) bytes;
     * xd is left unset in F32 mode. */
    const size_t ng = grouped ? (size_t)M * (size_t)(K / 32) : 0;
    const size_t nq = q8 ? (size_t)M * (size_t)K : 0;
    *scratch = NULL;
    if (!ng) { /* F16 / BF16 rows: x itself only (no arithmetic on a NULL scratch) */
        *a = (acts){x, ldx, NULL, NULL, NULL, NULL, NULL, NULL};
        return true;
    }
    *scratch = attn_alloc(4 * ng * sizeof(float) + (q8 ? ng * sizeof(int32_t) : 0) + nq);
    if (!*scratch) return false;
    float *lo = *scratch, *hi = lo + ng, *s32 = hi + ng, *xd = s32 + ng;
    int32_t *xs = q8 ? (int32_t *)(void *)(xd + ng) : NULL;
    int8_t *xq = q8 ? (int8_t *)(void *)(xs + ng) : NULL;
    *a = (acts){x, ldx, xq, xd, lo, hi, s32, xs};
    return true;
}

/* Rows [m0, m1) of acts_alloc's a (which owns the arrays it points to): Q8 mode when a->xq. */
static void acts_fill(const acts *a, int K, int m0, int m1) {
    if (!a->s32) return;
    const size_t G = (size_t)(K / 32);
    for (int m = m0; m < m1; m++) {
        const size_t r = (size_t)m * G;
        const float *xm = a->x + (size_t)m * (size_t)a->ldx;
        float *lo = (float *)a->s16lo + r, *hi = (float *)a->s16hi + r, *s32 = (float *)a->s32 + r;
        if (a->xq)
            quantize_acts(K, xm, (int8_t *)a->xq + (size_t)m * K, (float *)a->xd + r, lo, hi, s32,
                          (int32_t *)a->xs + r);
        else
            sums_f32(K, xm, lo, hi, s32);
    }
}

/* acts_alloc, then every row's values. */
static bool acts_prepare(int M, int K, const float *x, int ldx, bool q8, bool grouped, acts *a,
                         void **scratch) {
    if (!acts_alloc(M, K, x, ldx, q8, grouped, a, scratch)) return false;
    acts_fill(a, K, 0, M);
    return true;
}

/* The small-M product; false when out of memory for the prepared activations. */
static bool small_m(small_job *j, const float *x, int ldx) {
    const int M = j->M, K = j->K;
    const bool q8 = j->qact == ATTN_QUANT_ACT_Q8 && j->bb && attn_quant_block_elems(j->t) > 1;
    const bool grouped = attn_quant_block_elems(j->t) > 1;
    j->qact = q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
    void *scratch;
    if (!acts_prepare(M, K, x, ldx, q8, grouped, &j->a, &scratch)) return false;
    j->vnni = q8 && cpu_vnni();
    const int nt = quant_team_for(M, j->N, K, (j->N + 15) / 16); /* at least 16 rows of W each */
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int n0, n1;
        quant_thread_share(j->N, &n0, &n1);
        if (n0 < n1) small_range(j, n0, n1);
    }
    attn_free(scratch);
    return true;
}

/* ---- the x8 layout (attn_quant_pack) --------------------------------------------------------- */

#define X8_PREFETCH 1024 /* bytes ahead in a thread's stream of panels: past the 4 KiB pages where the
                          * hardware prefetchers stop (measured: GPT-2 Q8_0 decoding ~117 -> ~132 t/s) */
typedef struct {
    int M, K;
    bool q8; /* Q8 mode (x8_panel), else F32 (x8_panel_f32) */
    const attn_quant_packed *P;
    acts a;
    float beta, *y;
    int ldy;
    const float *bias;
    attn_act act;
    bool vnni; /* Q8 mode on an AVX512-VNNI CPU: x8_pair_vnni */
} x8_job;

static ALWAYS_INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* acc[m] += group g's eight rows' dot products with row m of x (dot[m]: Σ code · activation, the
 * activations' scale applied) times the rows' d (dv), plus the offsets: Q4_1 m · Σx, Q4_0
 * −8 · d · Σx (Σx: the group's s32). */
static ALWAYS_INLINE void x8_scale(attn_qtype T, int Mc, const x8_job *j, const uint8_t *pg,
                                   __m256 dv, int g, const __m256 *dot, __m256 *acc) {
    const int G = j->K / 32;
    for (int m = 0; m < Mc; m++) {
        const float s32 = j->a.s32[(size_t)m * G + g];
        acc[m] = _mm256_fmadd_ps(dot[m], dv, acc[m]);
        if (T == ATTN_QTYPE_Q4_1)
            acc[m] = _mm256_fmadd_ps(
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(pg + 16))),
                _mm256_set1_ps(s32), acc[m]);
        else if (T == ATTN_QTYPE_Q4_0)
            acc[m] = _mm256_fmadd_ps(dv, _mm256_set1_ps(-8.0f * s32), acc[m]);
    }
}

/* out (Mc rows of ldo; 8 each) = panel p of W times the Mc rows of x, Q8 mode: per group the eight
 * rows' integer dot products in one vector (int16 partial sums for the nibble formats: at most
 * 8 · 2 · 15 · 127 = 30480), then scaled by the eight rows' d (one F16C conversion) times the
 * activations' scale, plus the offsets (Q4_1: m · Σx; Q4_0: −8 · d · Σx). */
static ALWAYS_INLINE void x8_panel(attn_qtype T, int Mc, const x8_job *j, int p, float *out,
                                   int ldo) {
    const int K = j->K, G = K / 32;
    const size_t S = qx8_group_bytes(T), co = qx8_codes_off(T);
    const uint8_t *pg = (const uint8_t *)j->P->data + (size_t)p * (size_t)G * S;
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    __m256 acc[SMALL_M];
    for (int m = 0; m < Mc; m++) acc[m] = _mm256_setzero_ps();
    for (int g = 0; g < G; g++, pg += S) {
        for (size_t b = 0; b < S; b += 64)
            _mm_prefetch((const char *)pg + X8_PREFETCH + b, _MM_HINT_T0);
        const __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)pg));
        const uint8_t *codes = pg + co;
        const int8_t *xq = j->a.xq + 32 * (size_t)g;
        __m256i isum[SMALL_M];
        if (T == ATTN_QTYPE_Q8_0) {
            for (int m = 0; m < Mc; m++) isum[m] = _mm256_setzero_si256();
            for (int c = 0; c < 8; c++) {
                const __m256i v = load256(codes + 32 * c), av = _mm256_sign_epi8(v, v);
                for (int m = 0; m < Mc; m++) {
                    const __m256i xv = _mm256_sign_epi8(bcast4(xq + (size_t)m * K + 4 * c), v);
                    isum[m] = _mm256_add_epi32(
                        isum[m], _mm256_madd_epi16(_mm256_maddubs_epi16(av, xv), ones));
                }
            }
        } else {
            __m256i s16[SMALL_M];
            for (int m = 0; m < Mc; m++) s16[m] = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                const __m256i v = load256(codes + 32 * c);
                const __m256i lo = _mm256_and_si256(v, m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                for (int m = 0; m < Mc; m++) {
                    const int8_t *xm = xq + (size_t)m * K;
                    s16[m] = _mm256_add_epi16(
                        s16[m], _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(xm + 4 * c)),
                                                 _mm256_maddubs_epi16(hi, bcast4(xm + 16 + 4 * c))));
                }
            }
            for (int m = 0; m < Mc; m++) isum[m] = _mm256_madd_epi16(s16[m], ones);
        }
        __m256 dot[SMALL_M];
        for (int m = 0; m < Mc; m++)
            dot[m] = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[m]), _mm256_set1_ps(j->a.xd[(size_t)m * G + g]));
        x8_scale(T, Mc, j, pg, dv, g, dot, acc);
    }
    for (int m = 0; m < Mc; m++) _mm256_storeu_ps(out + (size_t)m * ldo, acc[m]);
}

/* The same in F32 mode: the codes of the eight rows as float lanes (a shift and a mask per element
 * position: byte e of each row's 4-byte slot), products with x in float32 into CH partial sums
 * per row of x (several chains: the FMA latency), the group's scales applied to their sum. */
static ALWAYS_INLINE void x8_panel_f32(attn_qtype T, int Mc, const x8_job *j, int p, float *out,
                                       int ldo) {
    enum { CH = 8 };
    const int K = j->K, G = K / 32, ch = Mc == 1 ? 8 : Mc == 2 ? 4 : Mc <= 4 ? 2 : 1;
    const size_t S = qx8_group_bytes(T), co = qx8_codes_off(T);
    const uint8_t *pg = (const uint8_t *)j->P->data + (size_t)p * (size_t)G * S;
    const __m256i m4 = _mm256_set1_epi32(15);
    __m256 acc[SMALL_M];
    for (int m = 0; m < Mc; m++) acc[m] = _mm256_setzero_ps();
    for (int g = 0; g < G; g++, pg += S) {
        for (size_t b = 0; b < S; b += 64)
            _mm_prefetch((const char *)pg + X8_PREFETCH + b, _MM_HINT_T0);
        const uint8_t *codes = pg + co;
        __m256 sm[SMALL_M][CH];
        for (int m = 0; m < Mc; m++)
            for (int c = 0; c < ch; c++) sm[m][c] = _mm256_setzero_ps();
        const int chunks = T == ATTN_QTYPE_Q8_0 ? 8 : 4;
        for (int c = 0; c < chunks; c++) {
            const __m256i v = load256(codes + 32 * c);
            for (int e = 0; e < 4; e++) {
                if (T == ATTN_QTYPE_Q8_0) {
                    const __m256 wf = _mm256_cvtepi32_ps(
                        _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * e), 24));
                    const int k = 32 * g + 4 * c + e, slot = (4 * c + e) % ch;
                    for (int m = 0; m < Mc; m++)
                        sm[m][slot] = _mm256_fmadd_ps(
                            wf, _mm256_broadcast_ss(j->a.x + (size_t)m * j->a.ldx + k), sm[m][slot]);
                } else {
                    const __m256 lo =
                        _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 8 * e), m4));
                    const __m256 hi =
                        _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 8 * e + 4), m4));
                    const int k = 32 * g + 4 * c + e, s0 = (2 * e) % ch, s1 = (2 * e + 1) % ch;
                    for (int m = 0; m < Mc; m++) {
                        const float *xm = j->a.x + (size_t)m * j->a.ldx;
                        sm[m][s0] = _mm256_fmadd_ps(lo, _mm256_broadcast_ss(xm + k), sm[m][s0]);
                        sm[m][s1] = _mm256_fmadd_ps(hi, _mm256_broadcast_ss(xm + k + 16), sm[m][s1]);
                    }
                }
            }
        }
        const __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)pg));
        __m256 dot[SMALL_M];
        for (int m = 0; m < Mc; m++) {
            dot[m] = sm[m][0];
            for (int c = 1; c < ch; c++) dot[m] = _mm256_add_ps(dot[m], sm[m][c]);
        }
        x8_scale(T, Mc, j, pg, dv, g, dot, acc);
    }
    for (int m = 0; m < Mc; m++) _mm256_storeu_ps(out + (size_t)m * ldo, acc[m]);
}

#if ATTN_ISA != 512
/* ---- AVX2, Q8 mode, 2 to 8 rows of x ------------------------------------------------------------
 * x8_panel unrolls every loop over the rows and holds each row's sums and accumulator in
 * registers: past 4 rows that is more than AVX2's 16 and gcc spilled them (176 stack accesses in
 * x8_q4_1_8). Measured on a Zen 3 (16-row products, 2 threads, interleaved runs), two ways:
 *   - Q4_0 / Q4_1 (x8_rows_q4): a group's nibbles unpacked once for all the rows, then a loop
 *     over the rows keeping only its own sums in registers and its accumulator in out: 1536 x
 *     576 Q4_1 ~134 GMAC/s, against ~124 for x8_panel on blocks of four rows;
 *   - Q8_0: x8_panel on blocks of at most X8R_ROWS rows (acts_rows: the block's activations),
 *     each block reading the codes again: 49152 x 576 ~101 GMAC/s, against ~89 for the row loop
 *     (its |codes| took 8 registers and each row reloaded the codes for their signs).
 * Either way a row gets the same integer sums (exact) and the same float steps as x8_panel, so
 * the same bits (tests/test_quant.c rows_alone). (The row loop in F32 mode, a group's codes as
 * floats in a stack buffer, was slower than x8_panel_f32: 26-29 against 36-42 at 8-32 rows.)
 * x8_rows_q4 runs near 4 instructions a cycle on Zen 3 (`perf annotate`), ~74 GMAC/s a core;
 * its integer part alone ran ~128 in a microbenchmark, the per-group float steps (VCVTDQ2PS,
 * a multiply, two FMAs on the pipes VPMADDUBSW uses) take the rest. Tried and dropped (2 threads,
 * 1536 x 576 at 16 rows, the same bits): two panels per row with the unpacked codes of 8 groups
 * in a stack buffer, each broadcast serving two VPMADDUBSW and the accumulators in registers,
 * ~124 against ~148 GMAC/s, both with the codes as the register operand and with the roles
 * turned (codes the signed memory operand, x + 128 unsigned, 128 · Σ code taken off). */
static ALWAYS_INLINE void x8_rows_q4(attn_qtype T, int Mc, const x8_job *j, int p, float *out,
                                     int ldo) {
    const int K = j->K, G = K / 32;
    const size_t S = qx8_group_bytes(T), co = qx8_codes_off(T);
    const uint8_t *pg = (const uint8_t *)j->P->data + (size_t)p * (size_t)G * S;
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    for (int m = 0; m < Mc; m++) _mm256_storeu_ps(out + (size_t)m * ldo, _mm256_setzero_ps());
    for (int g = 0; g < G; g++, pg += S) {
        for (size_t b = 0; b < S; b += 64)
            _mm_prefetch((const char *)pg + X8_PREFETCH + b, _MM_HINT_T0);
        const __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)pg));
        const uint8_t *codes = pg + co;
        const int8_t *xq = j->a.xq + 32 * (size_t)g;
        __m256i lo[4], hi[4];
        for (int c = 0; c < 4; c++) {
            const __m256i v = load256(codes + 32 * c);
            lo[c] = _mm256_and_si256(v, m4);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
        const __m256 mv = T == ATTN_QTYPE_Q4_1
                              ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(pg + 16)))
                              : _mm256_setzero_ps();
        /* the rows' integer sums first, then their float steps: two short chains per row
         * instead of one long one (measured: 1536 x 576, 16 rows, one thread ~70 -> ~76 GMAC/s) */
        __m256i isum[SMALL_M];
#pragma GCC unroll 1
        for (int m = 0; m < Mc; m++) {
            const int8_t *xm = xq + (size_t)m * K;
            /* Σ of 8 pairs of nibble (<= 15) x code (|.| <= 127): |.| <= 30480, no saturation */
            __m256i s16 = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++)
                s16 = _mm256_add_epi16(
                    s16, _mm256_add_epi16(_mm256_maddubs_epi16(lo[c], bcast4(xm + 4 * c)),
                                          _mm256_maddubs_epi16(hi[c], bcast4(xm + 16 + 4 * c))));
            isum[m] = _mm256_madd_epi16(s16, ones);
        }
#pragma GCC unroll 1
        for (int m = 0; m < Mc; m++) {
            const __m256 dot = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[m]),
                                             _mm256_set1_ps(j->a.xd[(size_t)m * G + g]));
            const float s32 = j->a.s32[(size_t)m * G + g];
            float *o = out + (size_t)m * ldo;
            __m256 acc = _mm256_fmadd_ps(dot, dv, _mm256_loadu_ps(o));
            if (T == ATTN_QTYPE_Q4_1)
                acc = _mm256_fmadd_ps(mv, _mm256_set1_ps(s32), acc);
            else
                acc = _mm256_fmadd_ps(dv, _mm256_set1_ps(-8.0f * s32), acc);
            _mm256_storeu_ps(o, acc);
        }
    }
}

#define X8R_ROWS 4
static ALWAYS_INLINE void x8_rows_q8(attn_qtype T, int Mc, const x8_job *j, int p, float *out,
                                     int ldo) {
    if (T != ATTN_QTYPE_Q8_0) {
        x8_rows_q4(T, Mc, j, p, out, ldo);
        return;
    }
    for (int r0 = 0; r0 < Mc; r0 += X8R_ROWS) {
        x8_job c = *j;
        if (r0) c.a = acts_rows(&j->a, j->K, r0);
        float *o = out + (size_t)r0 * ldo;
        switch (ATTN_MIN(X8R_ROWS, Mc - r0)) {
        case 4: x8_panel(T, 4, &c, p, o, ldo); break;
        case 3: x8_panel(T, 3, &c, p, o, ldo); break;
        case 2: x8_panel(T, 2, &c, p, o, ldo); break;
        default: x8_panel(T, 1, &c, p, o, ldo); break;
        }
    }
}

#endif

#if ATTN_ISA == 512
/* bytes ahead in each of the two streams (measured on Zen 4, 1536 x 576 Q4_1 from memory, 8 rows:
 * 1024 -> 4096 took a product from ~70 to ~35-60 us: several rows' arithmetic per byte leaves
 * the stream further behind than x8_panel's) */
#define X8V_PREFETCH 4096
/* Rows of one VNNI pair kernel call at most (a batched decoding step's chunk, x8_range): the
 * codes of a group are unpacked once for all of them. 16 accumulators + 8 code vectors + the
 * group's scales and sums about fit the 32 zmm registers (a few spills). Against two calls of
 * 8 rows, µs a product of 16 rows on Zen 4, 2 threads: Q4_1 1536 x 576 59-61 -> 52, 576 x 1536
 * 63 -> 57, Q8_0 49152 x 576 2247 -> 2013; 12 rows (one call, not 8 + 4) 46-49 -> 40-42. */
#define X8V_MAX_ROWS 16
#define X8V_MIN_ROWS 4 /* below this x8_panel (x8_panel_f32): with 1-3 rows the product is bound by
                        * memory, and one stream of panels reads it faster than two (Q8 mode, 1
                        * row: ~20 against ~28 us; F32 mode, a SmolLM2 step of 1 / 2 / 3 rows:
                        * 5.0-5.5 / 6.7-7.6 / 7.4-8.8 ms against 6.3-7.0 / 7.2-8.1 / 8.3-9.8) */

/* ---- the pair kernels' shared steps (panels p and p + 1 of a group: pa, pb) -------------------- */
/* Group g's prefetches: X8V_PREFETCH ahead in each of the two streams; past panel p's end the a
 * stream's next bytes are panel p + 3's (p + 1's are b's, p + 2's start b's stream prefetches). */
static ALWAYS_INLINE void pair_prefetch(const uint8_t *pa, const uint8_t *pb, int g, size_t S,
                                        size_t PS, bool two) {
    const size_t ahead = (size_t)g * S + X8V_PREFETCH;
    const uint8_t *fa = pa + X8V_PREFETCH + (two && ahead >= PS ? PS : 0);
    for (size_t b = 0; b < S; b += 64) {
        _mm_prefetch((const char *)fa + b, _MM_HINT_T0);
        if (two) _mm_prefetch((const char *)pb + X8V_PREFETCH + b, _MM_HINT_T0);
    }
}
/* The 8 halves at byte o of a's group, then b's, as 16 floats (the rows' d or m). */
static ALWAYS_INLINE __m512 pair_halves(const uint8_t *pa, const uint8_t *pb, size_t o) {
    return _mm512_cvtph_ps(_mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(pa + o))),
        _mm_loadu_si128((const __m128i *)(const void *)(pb + o)), 1));
}
/* x8_scale's steps for one row of x: acc + dot·d, then Q4_1's m·Σx or Q4_0's −8·d·Σx. */
static ALWAYS_INLINE __m512 pair_scale(attn_qtype T, __m512 acc, __m512 dot, __m512 dv, __m512 mv,
                                       float s32) {
    acc = _mm512_fmadd_ps(dot, dv, acc);
    if (T == ATTN_QTYPE_Q4_1) acc = _mm512_fmadd_ps(mv, _mm512_set1_ps(s32), acc);
    else if (T == ATTN_QTYPE_Q4_0) acc = _mm512_fmadd_ps(dv, _mm512_set1_ps(-8.0f * s32), acc);
    return acc;
}
/* Mc rows of 16 outputs (8 without panel p + 1) into out, ldo apart. */
static ALWAYS_INLINE void pair_store(int Mc, const __m512 *acc, bool two, float *out, int ldo) {
    for (int m = 0; m < Mc; m++) {
        if (two)
            _mm512_storeu_ps(out + (size_t)m * ldo, acc[m]);
        else
            _mm256_storeu_ps(out + (size_t)m * ldo, _mm512_castps512_ps256(acc[m]));
    }
}

/* ---- AVX512-VNNI, Q8 mode: two panels at a time ---------------------------------------------
 * x8_panel's integers with VPDPBUSD (u8 × s8, four products summed per 32-bit lane) in a zmm
 * that holds the same chunk of panels p and p + 1 (16 output columns; p alone when !two), as
 * many_tile does. The unsigned operand is the weight codes: Q4_0 / Q4_1 nibbles as they are;
 * Q8_0's codes + 128 (XOR 0x80), the extra 128 · Σ code of the activations taken off first (the
 * group's xs). The int32 sums per group are exact, so they equal x8_panel's, and the float steps
 * after them are x8_scale's in its order: the same bits as x8_panel (tests/test_quant.c checks the
 * VNNI and AVX2 products bit for bit). Before (x8_panel: VPMADDUBSW + VPADDW per 32 products of a
 * ymm) a 16-slot decoding step of SmolLM2 Q4_1 spent ~50% of its time there. */
VNNI_FN static ALWAYS_INLINE void x8_pair_vnni(attn_qtype T, int Mc, const x8_job *j, int p,
                                               bool two, float *out, int ldo) {
    const int K = j->K, G = K / 32;
    const size_t S = qx8_group_bytes(T), co = qx8_codes_off(T), PS = (size_t)G * S;
    const uint8_t *pa = (const uint8_t *)j->P->data + (size_t)p * PS, *pb = two ? pa + PS : pa;
    const __m512i m4 = _mm512_set1_epi8(15), flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[X8V_MAX_ROWS];
#pragma GCC unroll 16
    for (int m = 0; m < Mc; m++) acc[m] = _mm512_setzero_ps();
    for (int g = 0; g < G; g++, pa += S, pb += S) {
        pair_prefetch(pa, pb, g, S, PS, two);
        const __m512 dv = pair_halves(pa, pb, 0);
        const __m512 mv = T == ATTN_QTYPE_Q4_1 ? pair_halves(pa, pb, 16) : _mm512_setzero_ps();
        /* w[c]: the unsigned codes of x's elements 4c .. 4c + 3 (c < 4, Q8_0: c < 8) and, for
         * the nibble formats, w[4 + c] those of 16 + 4c .. 16 + 4c + 3 */
        __m512i w[8];
        for (int c = 0; c < (T == ATTN_QTYPE_Q8_0 ? 8 : 4); c++) {
            const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(load256(pa + co + 32 * c)),
                                                 load256(pb + co + 32 * c), 1);
            if (T == ATTN_QTYPE_Q8_0) {
                w[c] = _mm512_xor_si512(v, flip);
            } else {
                w[c] = _mm512_and_si512(v, m4);
                w[4 + c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
        }
        const int8_t *xq = j->a.xq + 32 * (size_t)g;
#pragma GCC unroll 16
        for (int m = 0; m < Mc; m++) {
            const int8_t *xm = xq + (size_t)m * K;
            __m512i s0 = T == ATTN_QTYPE_Q8_0 ? _mm512_set1_epi32(-128 * j->a.xs[(size_t)m * G + g])
                                              : _mm512_setzero_si512();
            __m512i s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                int32_t v0, v1;
                const int o1 = T == ATTN_QTYPE_Q8_0 ? 4 * (4 + c) : 16 + 4 * c;
                memcpy(&v0, xm + 4 * c, sizeof v0);
                memcpy(&v1, xm + o1, sizeof v1);
                s0 = _mm512_dpbusd_epi32(s0, w[c], _mm512_set1_epi32(v0));
                s1 = _mm512_dpbusd_epi32(s1, w[4 + c], _mm512_set1_epi32(v1));
            }
            const __m512 dot = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                                             _mm512_set1_ps(j->a.xd[(size_t)m * G + g]));
            acc[m] = pair_scale(T, acc[m], dot, dv, mv, j->a.s32[(size_t)m * G + g]);
        }
    }
    pair_store(Mc, acc, two, out, ldo);
}

typedef void (*x8v_fn)(const x8_job *, int, bool, float *, int);
#define X8V_FN(T, Mc, name)                                                                      \
    VNNI_FN __attribute__((noinline)) static void name(const x8_job *j, int p, bool two,          \
                                                       float *out, int ldo) {                    \
        x8_pair_vnni(T, Mc, j, p, two, out, ldo);                                                \
    }
#define X8V_SET(T, tn)                                                                           \
    X8V_FN(T, 4, tn##_4) X8V_FN(T, 5, tn##_5) X8V_FN(T, 6, tn##_6) X8V_FN(T, 7, tn##_7)          \
    X8V_FN(T, 8, tn##_8) X8V_FN(T, 9, tn##_9) X8V_FN(T, 10, tn##_10) X8V_FN(T, 11, tn##_11)      \
    X8V_FN(T, 12, tn##_12) X8V_FN(T, 13, tn##_13) X8V_FN(T, 14, tn##_14)                         \
    X8V_FN(T, 15, tn##_15) X8V_FN(T, 16, tn##_16)                                                \
    static const x8v_fn tn##s[X8V_MAX_ROWS + 1] = {                                              \
        NULL,   NULL,   NULL,   NULL,   tn##_4,  tn##_5,  tn##_6,  tn##_7,  tn##_8,              \
        tn##_9, tn##_10, tn##_11, tn##_12, tn##_13, tn##_14, tn##_15, tn##_16};
_Static_assert(X8V_MIN_ROWS == 4 && SMALL_M == 8 && X8V_MAX_ROWS == 16,
               "x8v_*s hold the kernels for 4 to 16 rows, x8f2_*s for 4 to 8");
X8V_SET(ATTN_QTYPE_Q8_0, x8v_q8_0)
X8V_SET(ATTN_QTYPE_Q4_0, x8v_q4_0)
X8V_SET(ATTN_QTYPE_Q4_1, x8v_q4_1)
/* The same in F32 mode (x8_panel_f32's arithmetic two panels per zmm): each lane runs exactly
 * x8_panel_f32's chains (the same CH split for the same Mc, the same order), so the same bits as
 * the ymm code; the codes of two panels converted per instruction and each broadcast activation
 * used for 16 outputs. */
static ALWAYS_INLINE void x8_pair_f32(attn_qtype T, int Mc, const x8_job *j, int p, bool two,
                                      float *out, int ldo) {
    enum { CH = 8 };
    const int K = j->K, G = K / 32, ch = Mc == 1 ? 8 : Mc == 2 ? 4 : Mc <= 4 ? 2 : 1;
    const size_t S = qx8_group_bytes(T), co = qx8_codes_off(T), PS = (size_t)G * S;
    const uint8_t *pa = (const uint8_t *)j->P->data + (size_t)p * PS, *pb = two ? pa + PS : pa;
    const __m512i m4 = _mm512_set1_epi32(15);
    __m512 acc[SMALL_M];
    for (int m = 0; m < Mc; m++) acc[m] = _mm512_setzero_ps();
    for (int g = 0; g < G; g++, pa += S, pb += S) {
        pair_prefetch(pa, pb, g, S, PS, two);
        __m512 sm[SMALL_M][CH];
        for (int m = 0; m < Mc; m++)
            for (int c = 0; c < ch; c++) sm[m][c] = _mm512_setzero_ps();
        const int chunks = T == ATTN_QTYPE_Q8_0 ? 8 : 4;
        for (int c = 0; c < chunks; c++) {
            const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(load256(pa + co + 32 * c)),
                                                 load256(pb + co + 32 * c), 1);
            for (int e = 0; e < 4; e++) {
                if (T == ATTN_QTYPE_Q8_0) {
                    const __m512 wf = _mm512_cvtepi32_ps(
                        _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * e), 24));
                    const int k = 32 * g + 4 * c + e, slot = (4 * c + e) % ch;
                    for (int m = 0; m < Mc; m++)
                        sm[m][slot] = _mm512_fmadd_ps(
                            wf, _mm512_set1_ps(j->a.x[(size_t)m * j->a.ldx + k]), sm[m][slot]);
                } else {
                    const __m512 lo =
                        _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * e), m4));
                    const __m512 hi =
                        _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * e + 4), m4));
                    const int k = 32 * g + 4 * c + e, s0 = (2 * e) % ch, s1 = (2 * e + 1) % ch;
                    for (int m = 0; m < Mc; m++) {
                        const float *xm = j->a.x + (size_t)m * j->a.ldx;
                        sm[m][s0] = _mm512_fmadd_ps(lo, _mm512_set1_ps(xm[k]), sm[m][s0]);
                        sm[m][s1] = _mm512_fmadd_ps(hi, _mm512_set1_ps(xm[k + 16]), sm[m][s1]);
                    }
                }
            }
        }
        const __m512 dv = pair_halves(pa, pb, 0);
        const __m512 mv = T == ATTN_QTYPE_Q4_1 ? pair_halves(pa, pb, 16) : _mm512_setzero_ps();
        for (int m = 0; m < Mc; m++) {
            __m512 dot = sm[m][0];
            for (int c = 1; c < ch; c++) dot = _mm512_add_ps(dot, sm[m][c]);
            acc[m] = pair_scale(T, acc[m], dot, dv, mv, j->a.s32[(size_t)m * G + g]);
        }
    }
    pair_store(Mc, acc, two, out, ldo);
}
#define X8F2_FN(T, Mc, name)                                                                     \
    __attribute__((noinline)) static void name(const x8_job *j, int p, bool two, float *out,     \
                                               int ldo) {                                        \
        x8_pair_f32(T, Mc, j, p, two, out, ldo);                                                 \
    }
#define X8F2_SET(T, tn)                                                                          \
    X8F2_FN(T, 4, tn##_4) X8F2_FN(T, 5, tn##_5) X8F2_FN(T, 6, tn##_6) X8F2_FN(T, 7, tn##_7)      \
    X8F2_FN(T, 8, tn##_8)                                                                        \
    static const x8v_fn tn##s[SMALL_M + 1] = {NULL,   NULL,   NULL,   NULL,  tn##_4,             \
                                              tn##_5, tn##_6, tn##_7, tn##_8};
X8F2_SET(ATTN_QTYPE_Q8_0, x8f2_q8_0)
X8F2_SET(ATTN_QTYPE_Q4_0, x8f2_q4_0)
X8F2_SET(ATTN_QTYPE_Q4_1, x8f2_q4_1)
#endif

typedef void (*x8_fn)(const x8_job *, int, float *, int);
#define X8_FN(T, Mc, name, kernel)                                                               \
    __attribute__((noinline)) static void name(const x8_job *j, int p, float *out, int ldo) {     \
        kernel(T, Mc, j, p, out, ldo);                                                           \
    }
#define X8_SET(T, tn, kernel)                                                                    \
    X8_FN(T, 1, tn##_1, kernel) X8_FN(T, 2, tn##_2, kernel) X8_FN(T, 3, tn##_3, kernel)          \
    X8_FN(T, 4, tn##_4, kernel) X8_FN(T, 5, tn##_5, kernel) X8_FN(T, 6, tn##_6, kernel)          \
    X8_FN(T, 7, tn##_7, kernel) X8_FN(T, 8, tn##_8, kernel)                                      \
    static const x8_fn tn##s[SMALL_M + 1] = {NULL,    tn##_1, tn##_2, tn##_3, tn##_4,            \
                                             tn##_5, tn##_6, tn##_7, tn##_8};
X8_SET(ATTN_QTYPE_Q8_0, x8_q8_0, x8_panel)
X8_SET(ATTN_QTYPE_Q4_0, x8_q4_0, x8_panel)
X8_SET(ATTN_QTYPE_Q4_1, x8_q4_1, x8_panel)
X8_SET(ATTN_QTYPE_Q8_0, x8f_q8_0, x8_panel_f32)
X8_SET(ATTN_QTYPE_Q4_0, x8f_q4_0, x8_panel_f32)
X8_SET(ATTN_QTYPE_Q4_1, x8f_q4_1, x8_panel_f32)

#if ATTN_ISA != 512
X8_SET(ATTN_QTYPE_Q8_0, x8r_q8_0, x8_rows_q8)
X8_SET(ATTN_QTYPE_Q4_0, x8r_q4_0, x8_rows_q8)
X8_SET(ATTN_QTYPE_Q4_1, x8r_q4_1, x8_rows_q8)
#endif

/* The panel kernel of a job's type and mode for Mc <= SMALL_M rows (AVX2, Q8 mode: the row loop
 * from 2 rows, where the unrolled kernel spilled). */
static x8_fn x8_for(const x8_job *j, int Mc) {
    const attn_qtype t = j->P->type;
#if ATTN_ISA != 512
    if (j->q8 && Mc >= 2)
        return t == ATTN_QTYPE_Q8_0 ? x8r_q8_0s[Mc] : t == ATTN_QTYPE_Q4_0 ? x8r_q4_0s[Mc] : x8r_q4_1s[Mc];
#endif
    return j->q8 ? (t == ATTN_QTYPE_Q8_0   ? x8_q8_0s[Mc]
                    : t == ATTN_QTYPE_Q4_0 ? x8_q4_0s[Mc]
                                           : x8_q4_1s[Mc])
                 : (t == ATTN_QTYPE_Q8_0   ? x8f_q8_0s[Mc]
                    : t == ATTN_QTYPE_Q4_0 ? x8f_q4_0s[Mc]
                                           : x8f_q4_1s[Mc]);
}

/* Panels [p0, p1) of y's columns: STRIP / 8 panels at a time, for the rows of x in chunks of
 * SMALL_M, X8V_MAX_ROWS for the VNNI Q8 kernels (more only from attn_quant_gemm_packed_batch;
 * the strip's panels stay in L1 between the chunks), then the epilogue. */
static void x8_range(const x8_job *j, int p0, int p1) {
#if ATTN_ISA == 512
    const int chunk = j->q8 && j->vnni ? X8V_MAX_ROWS : SMALL_M;
    float out[X8V_MAX_ROWS * STRIP];
#else
    const int chunk = SMALL_M;
    float out[SMALL_M * STRIP];
#endif
    for (int p = p0; p < p1; p += STRIP / 8) {
        const int np = ATTN_MIN(STRIP / 8, p1 - p), n0 = 8 * p;
        for (int r0 = 0; r0 < j->M; r0 += chunk) {
            x8_job c = *j;
            c.M = ATTN_MIN(chunk, j->M - r0);
            if (r0) c.a = acts_rows(&j->a, j->K, r0);
#if ATTN_ISA == 512
            if (c.M >= X8V_MIN_ROWS && (j->vnni || !j->q8)) {
                const attn_qtype t = j->P->type;
                const x8v_fn fv = j->q8 ? (t == ATTN_QTYPE_Q8_0   ? x8v_q8_0s[c.M]
                                           : t == ATTN_QTYPE_Q4_0 ? x8v_q4_0s[c.M]
                                                                  : x8v_q4_1s[c.M])
                                        : (t == ATTN_QTYPE_Q8_0   ? x8f2_q8_0s[c.M]
                                           : t == ATTN_QTYPE_Q4_0 ? x8f2_q4_0s[c.M]
                                                                  : x8f2_q4_1s[c.M]);
                for (int i = 0; i < np; i += 2) fv(&c, p + i, i + 1 < np, out + 8 * i, STRIP);
            } else
#endif
            {
                const x8_fn fn = x8_for(j, c.M);
                for (int i = 0; i < np; i++) fn(&c, p + i, out + 8 * i, STRIP);
            }
            for (int m = 0; m < c.M; m++) /* (inlined: a call per row and strip cost ~1%) */
                av_store_row(j->y + (size_t)(r0 + m) * j->ldy + n0, 8 * np, out + m * STRIP, 1.0f,
                             j->beta, j->bias ? j->bias + n0 : NULL, j->act);
        }
    }
}

/* The 8x8 matrix of 32-bit words v (v[i] word j) transposed in place. */
static ALWAYS_INLINE void transpose8x32(__m256i v[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}

/* Eight whole rows of a panel group at once: out row r (stride kc) gets the group's 32 values of
 * row 8p + r; the codes regrouped per row by a word transpose, then dequant_group. */
static ALWAYS_INLINE void panel_group_rows(attn_qtype T, const uint8_t *pg, float *out, int kc) {
    const uint8_t *codes = pg + qx8_codes_off(T);
    __m256i v[8];
    const int chunks = T == ATTN_QTYPE_Q8_0 ? 8 : 4;
    for (int c = 0; c < 8; c++) v[c] = c < chunks ? load256(codes + 32 * c) : _mm256_setzero_si256();
    transpose8x32(v);
    for (int r = 0; r < 8; r++) {
        qgroup g;
        g.d[0] = g.d[1] = h2f(pg + 2 * r);
        g.add = T == ATTN_QTYPE_Q4_1 ? h2f(pg + 16 + 2 * r) : 0.0f;
        if (T == ATTN_QTYPE_Q8_0) {
            g.q = v[r];
        } else {
            const __m128i t = _mm256_castsi256_si128(v[r]);
            g.q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
        }
        dequant_group(T, g, out + (size_t)r * kc);
    }
}

/* The blocked GEMM's rows from a packed W: whole panels eight rows at a time (panel_group_rows),
 * other rows block by block back in the row layout; bit for bit attn_quant_dequantize's values
 * either way (dequant_group). */
static void packed_rows(const void *ctx, int j0, int n, int k0, int kc, float *out) {
    const attn_quant_packed *P = ctx;
    const int N8 = P->N - P->N % 8, G = P->K / 32;
    size_t rb;
    (void)attn_quant_row_bytes(P->type, P->K, &rb);
    const size_t bb = attn_quant_block_bytes(P->type), S = qx8_group_bytes(P->type);
    uint8_t blk[34];
    for (int r = 0; r < n; r++) {
        const int row = j0 + r;
        if (row % 8 == 0 && row + 8 <= N8 && r + 8 <= n) {
            const uint8_t *pan = (const uint8_t *)P->data + (size_t)(row / 8) * (size_t)G * S;
            for (int k = 0; k < kc; k += 32) {
                const uint8_t *pg = pan + (size_t)((k0 + k) / 32) * S;
                float *o = out + (size_t)r * kc + k;
                switch (P->type) {
                case ATTN_QTYPE_Q8_0: panel_group_rows(ATTN_QTYPE_Q8_0, pg, o, kc); break;
                case ATTN_QTYPE_Q4_0: panel_group_rows(ATTN_QTYPE_Q4_0, pg, o, kc); break;
                default: panel_group_rows(ATTN_QTYPE_Q4_1, pg, o, kc); break;
                }
            }
            r += 7;
            continue;
        }
        float *o = out + (size_t)r * kc;
        if (row >= N8) {
            const qrows q = {P->type, (const uint8_t *)P->data + (size_t)N8 * rb, rb, bb};
            dequant_rows(&q, row - N8, 1, k0, kc, o);
            continue;
        }
        for (int k = 0; k < kc; k += 32) {
            qx8_block(P, row, (k0 + k) / 32, blk);
            switch (P->type) {
            case ATTN_QTYPE_Q8_0: dequant_group(ATTN_QTYPE_Q8_0, group_of(ATTN_QTYPE_Q8_0, blk, 0), o + k); break;
            case ATTN_QTYPE_Q4_0: dequant_group(ATTN_QTYPE_Q4_0, group_of(ATTN_QTYPE_Q4_0, blk, 0), o + k); break;
            default: dequant_group(ATTN_QTYPE_Q4_1, group_of(ATTN_QTYPE_Q4_1, blk, 0), o + k); break;
            }
        }
    }
}

/* ---- many rows with int8 activations: AVX512-VNNI on x8 Q8_0 panels -------------------------
 * ATTN_QUANT_ACT_Q8_ALL with M > SMALL_M (a beam search's decoding steps: up to 128 rows): the
 * activations rounded per 32 as quantize_acts does for the small-M path, stored as unsigned
 * bytes code + 128, so that VPDPBUSD (u8 × s8, four products per 32-bit lane) multiplies them
 * with the weight codes directly; Σ (code + 128)·w − 128·Σ w = Σ code·w (exact in int32), the
 * −128·Σ w of each row and group computed once per panel pair. A zmm holds the same chunk of
 * two panels (16 output columns); the eight chunks of a group stay in registers for up to 8 rows
 * of x. Per group and row the same float steps as x8_panel (int32 sum -> float, times the
 * activations' scale, then fused multiply-add with the rows' d), so every output equals the
 * small-M x8 path's on the same row, bit for bit, whatever M is (tests/test_quant.c). */
#if ATTN_ISA == 512
typedef struct {
    int M, K;
    const attn_quant_packed *P;
    const uint8_t *xu; /* (M, K): activation codes + 128 */
    const float *xd;   /* (M, K/32): their scales */
    float beta, *y;
    int ldy;
    const float *bias;
    attn_act act;
} many_job;

/* out (Mc rows of 16) = panels p and p + 1 (p alone when !two: the upper 8 columns repeat it) times
 * rows m0 .. m0 + Mc − 1; nws: the panels' −128·Σ w per group (K/32 vectors). */
VNNI_FN static ALWAYS_INLINE void many_tile(int Mc, const many_job *j, int p, bool two,
                                            const __m512i *nws, int m0, float *out) {
    const int K = j->K, G = K / 32;
    const size_t S = qx8_group_bytes(ATTN_QTYPE_Q8_0), PS = (size_t)G * S;
    const uint8_t *pa = (const uint8_t *)j->P->data + (size_t)p * PS, *pb = two ? pa + PS : pa;
    /* Every loop over the Mc rows is unrolled (Mc is a constant in each many_<Mc>): the rows'
     * accumulators stay in registers and their VPDPBUSD chains interleave (a loop kept them in
     * memory and ran one row's dependent chain of 8 at a time). */
    __m512 acc[SMALL_M];
#pragma GCC unroll 8
    for (int m = 0; m < Mc; m++) acc[m] = _mm512_setzero_ps();
    for (int g = 0; g < G; g++) {
        const uint8_t *ga = pa + (size_t)g * S, *gb = pb + (size_t)g * S;
        __m512i w[8];
        for (int c = 0; c < 8; c++)
            w[c] = _mm512_inserti64x4(_mm512_castsi256_si512(load256(ga + 16 + 32 * c)),
                                      load256(gb + 16 + 32 * c), 1);
        const __m512 dv = _mm512_cvtph_ps(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)ga)),
            _mm_loadu_si128((const __m128i *)(const void *)gb), 1));
#pragma GCC unroll 8
        for (int m = 0; m < Mc; m++) {
            const uint8_t *xm = j->xu + (size_t)(m0 + m) * K + 32 * (size_t)g;
            /* two chains of four (exact: int32 sums): half the dependent latency, 10% faster
             * than one chain of eight; four chains of two were no faster (bench: M = 128,
             * K = 256, N = 8000, one thread: 136 -> 154 GMAC/s) */
            __m512i isum = nws[g], isum2 = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                int32_t v, v2;
                memcpy(&v, xm + 4 * c, sizeof v);
                memcpy(&v2, xm + 16 + 4 * c, sizeof v2);
                isum = _mm512_dpbusd_epi32(isum, _mm512_set1_epi32(v), w[c]);
                isum2 = _mm512_dpbusd_epi32(isum2, _mm512_set1_epi32(v2), w[4 + c]);
            }
            isum = _mm512_add_epi32(isum, isum2);
            const __m512 dot = _mm512_mul_ps(_mm512_cvtepi32_ps(isum),
                                             _mm512_set1_ps(j->xd[(size_t)(m0 + m) * G + g]));
            acc[m] = _mm512_fmadd_ps(dot, dv, acc[m]);
        }
    }
#pragma GCC unroll 8
    for (int m = 0; m < Mc; m++) _mm512_storeu_ps(out + 16 * m, acc[m]);
}

typedef void (*many_fn)(const many_job *, int, bool, const __m512i *, int, float *);
#define MANY_FN(Mc)                                                                              \
    VNNI_FN __attribute__((noinline)) static void many_##Mc(const many_job *j, int p, bool two,  \
                                                            const __m512i *nws, int m0,          \
                                                            float *out) {                        \
        many_tile(Mc, j, p, two, nws, m0, out);                                                  \
    }
MANY_FN(1) MANY_FN(2) MANY_FN(3) MANY_FN(4) MANY_FN(5) MANY_FN(6) MANY_FN(7) MANY_FN(8)
static const many_fn manys[SMALL_M + 1] = {NULL, many_1, many_2, many_3, many_4,
                                           many_5, many_6, many_7, many_8};

/* nws[g] = −128 · Σ over group g of each of the 16 rows' codes (panels p and p + 1 or p twice). */
VNNI_FN __attribute__((noinline)) static void many_neg_sums(const many_job *j, int p, bool two,
                                                            __m512i *nws) {
    const int G = j->K / 32;
    const size_t S = qx8_group_bytes(ATTN_QTYPE_Q8_0), PS = (size_t)G * S;
    const uint8_t *pa = (const uint8_t *)j->P->data + (size_t)p * PS, *pb = two ? pa + PS : pa;
    const __m512i ones = _mm512_set1_epi8(1);
    for (int g = 0; g < G; g++) {
        __m512i s = _mm512_setzero_si512();
        for (int c = 0; c < 8; c++)
            s = _mm512_dpbusd_epi32(
                s, ones,
                _mm512_inserti64x4(_mm512_castsi256_si512(load256(pa + (size_t)g * S + 16 + 32 * c)),
                                   load256(pb + (size_t)g * S + 16 + 32 * c), 1));
        nws[g] = _mm512_mullo_epi32(s, _mm512_set1_epi32(-128));
    }
}

/* Panel pairs [q0, q1) (pair q: panels 2q and 2q + 1 of np), every row of x; nws: K/32 vectors. */
static void many_range(const many_job *j, int np, int q0, int q1, __m512i *nws) {
    float out[SMALL_M * 16];
    for (int q = q0; q < q1; q++) {
        const int p = 2 * q, n0 = 8 * p;
        const bool two = p + 1 < np;
        if (j->P->nsum) { /* precomputed (attn_quant_pack_sums): panel p low, p + 1 (or p) high */
            const int G = j->K / 32;
            const int32_t *na = j->P->nsum + (size_t)p * (size_t)G * 8;
            const int32_t *nb = two ? na + (size_t)G * 8 : na;
            for (int g = 0; g < G; g++)
                nws[g] = _mm512_inserti64x4(
                    _mm512_castsi256_si512(load256((const uint8_t *)(na + 8 * g))),
                    load256((const uint8_t *)(nb + 8 * g)), 1);
        } else {
            many_neg_sums(j, p, two, nws);
        }
        for (int m0 = 0; m0 < j->M; m0 += SMALL_M) {
            const int Mc = ATTN_MIN(SMALL_M, j->M - m0);
            manys[Mc](j, p, two, nws, m0, out);
            /* the epilogue inlined (a call per 16 floats cost 9% of an int8 translation) */
            for (int m = 0; m < Mc; m++)
                av_store_row(j->y + (size_t)(m0 + m) * j->ldy + n0, two ? 16 : 8, out + 16 * m,
                             1.0f, j->beta, j->bias ? j->bias + n0 : NULL, j->act);
        }
    }
}

/* The product for M > SMALL_M rows of x with int8 activations on a packed Q8_0 W whose N is a
 * multiple of 8; false when out of memory (nothing written). */
static bool many_q8(int M, const float *x, int ldx, const attn_quant_packed *P, float beta,
                    float *y, int ldy, const float *bias, attn_act act) {
    const int K = P->K, G = K / 32, np = P->N / 8, pairs = (np + 1) / 2;
    /* the activations' codes + 128 (M, K) and scales (M, G): quantize_acts' codes and scales,
     * without the group sums the other paths need */
    void *scratch = attn_alloc((size_t)M * (size_t)G * sizeof(float) + (size_t)M * (size_t)K);
    if (!scratch) return false;
    float *xd = scratch;
    uint8_t *xu = (uint8_t *)(void *)(xd + (size_t)M * G);
    for (int m = 0; m < M; m++)
        quantize_acts_u8(K, x + (size_t)m * ldx, xu + (size_t)m * K, xd + (size_t)m * G);
    const int nt = quant_team_for(M, P->N, K, pairs);
    __m512i *nws = attn_alloc((size_t)nt * (size_t)G * sizeof *nws);
    if (!nws) {
        attn_free(scratch);
        return false;
    }
    const many_job j = {M, K, P, xu, xd, beta, y, ldy, bias, act};
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int q0, q1, t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        quant_thread_share(pairs, &q0, &q1);
        if (q0 < q1) many_range(&j, np, q0, q1, nws + (size_t)t * (size_t)G);
    }
    attn_free(nws);
    attn_free(scratch);
    return true;
}
#endif

bool ATTN_FN(attn_quant_gemm_x8)(int M, const float *x, int ldx, const attn_quant_packed *P,
                                 float beta, float *y, int ldy, const float *bias, attn_act act,
                                 attn_quant_act qact, bool chunked) {
    const int N = P->N, K = P->K, N8 = N - N % 8;
    size_t rb;
    (void)attn_quant_row_bytes(P->type, K, &rb);
    if (K == 0) { /* y = act(beta·y + bias) */
        float zero[STRIP] = {0};
        for (int m = 0; m < M; m++)
            for (int n0 = 0; n0 < N; n0 += STRIP)
                ATTN_FN(attn_gemm_store_row)(y + (size_t)m * ldy + n0, ATTN_MIN(STRIP, N - n0), zero,
                                             1.0f, beta, bias ? bias + n0 : NULL, act);
        return true;
    }
#if ATTN_ISA == 512
    if (M > SMALL_M && qact == ATTN_QUANT_ACT_Q8_ALL && P->type == ATTN_QTYPE_Q8_0 && N8 == N &&
        cpu_vnni())
        return many_q8(M, x, ldx, P, beta, y, ldy, bias, act);
#endif
    if (qact == ATTN_QUANT_ACT_Q8_ALL) qact = ATTN_QUANT_ACT_Q8;
    if (M <= SMALL_M || chunked) {
        const bool q8 = qact == ATTN_QUANT_ACT_Q8;
        x8_job j = {M,    K, q8, P, {NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL}, beta, y, ldy,
                    bias, act, q8 && cpu_vnni()};
        void *scratch;
        if (!acts_alloc(M, K, x, ldx, q8, true, &j.a, &scratch)) return false;
        /* the rows past the panels: the row kernels on their row layout */
        small_job t = {M, N - N8, K, P->type, (const uint8_t *)P->data + (size_t)N8 * rb, rb,
                       attn_quant_block_bytes(P->type), qact, false, j.a, beta,
                       y + N8, ldy, bias ? bias + N8 : NULL, act};
        const int np = N8 / 8, nt = quant_team_for(M, N, K, (np + 1) / 2); /* >= 2 panels each */
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
        {
            int p0, p1;
            /* the activations' rows split over the team too (one thread quantizing them while
             * the other waited was ~5% of a 16-row decoding step) */
            quant_thread_share(M, &p0, &p1);
            acts_fill(&j.a, K, p0, p1);
#ifdef _OPENMP
#pragma omp barrier
#endif
            const bool last = quant_thread_share(np, &p0, &p1);
            if (p0 < p1) x8_range(&j, p0, p1);
            if (last && N > N8) small_range(&t, 0, N - N8);
        }
        attn_free(scratch);
        return true;
    }
    const attn_gemm_rowsrc src = {packed_rows, P, 32};
    return ATTN_FN(attn_gemm_rows)(M, N, K, x, ldx, &src, beta, y, ldy, bias, act);
}

/* ---- entry point ----------------------------------------------------------------------------- */

void ATTN_FN(attn_quant_gemm)(int M, int N, int K,
                              const float *x, // (M, K), row stride ldx
                              int ldx, attn_qtype t,
                              const void *w, // (N, K) of type t, rows of row_bytes
                              size_t row_bytes, float beta,
                              float *y, // (M, N), row stride ldy
                              int ldy,
                              const float *bias, // (N) or NULL
                              attn_act act, attn_quant_act qact, bool chunked) {
    if (t == ATTN_QTYPE_F32) { /* plain floats (4-byte aligned, as a GGUF tensor is) */
        ATTN_FN(attn_gemm)(false, true, M, N, K, 1.0f, x, ldx, (const float *)w,
                           ATTN_MAX(1, K), beta, y, ldy, bias, act);
        return;
    }
    const size_t bb = attn_quant_block_bytes(t);
    if (K == 0) { /* y = act(beta·y + bias) */
        float zero[STRIP] = {0};
        for (int m = 0; m < M; m++)
            for (int n0 = 0; n0 < N; n0 += STRIP)
                ATTN_FN(attn_gemm_store_row)(y + (size_t)m * ldy + n0, ATTN_MIN(STRIP, N - n0), zero,
                                             1.0f, beta, bias ? bias + n0 : NULL, act);
        return;
    }
    if (qact == ATTN_QUANT_ACT_Q8_ALL) qact = ATTN_QUANT_ACT_Q8; /* no many-row int8 path here */
    if (M <= SMALL_M || chunked) {
        small_job j = {M, N, K, t, w, row_bytes, bb, qact, false,
                       {NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL}, beta, y, ldy, bias, act};
        if (small_m(&j, x, ldx)) return;
    }
    const qrows q = {t, w, row_bytes, bb};
    const attn_gemm_rowsrc src = {dequant_rows, &q, attn_quant_block_elems(t) > 1 ? 32 : 1};
    if (!ATTN_FN(attn_gemm_rows)(M, N, K, x, ldx, &src, beta, y, ldy, bias, act))
        attn_quant_gemm_ref(M, N, K, x, ldx, t, w, row_bytes, beta, y, ldy, bias, act, qact);
}

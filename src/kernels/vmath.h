/* vmath.h — a small SIMD vocabulary and vectorized math (exp, tanh, erf, GELU, SiLU) for the
 * *_simd.c kernels, written once for both ISAs: with ATTN_ISA == 512 a vector (av_f) is a __m512
 * of 16 floats, with ATTN_ISA == 2 a __m256 of 8. Internal; every function is static inline.
 *
 *   av_mask  lane mask for partial loads/stores (the first n lanes): av_tail(n)
 *   av_cond  result of a comparison, consumed by av_select(cond, if_true, if_false)
 *
 * Accuracy of the math functions (float32, measured against mpmath on dense grids; the
 * polynomials were fitted for this file, see the notes at each function):
 *   av_exp        ~1 ulp relative over the normal range; subnormal results, then 0 below,
 *                 +inf above exp's range, NaN kept
 *   av_tanh       <= ~1.5e-7 relative
 *   av_erf        <= ~2e-7 relative for |x| < 0.92, <= ~1e-7 absolute elsewhere
 *   av_gelu_tanh  x·sigmoid(2u) (the same function as 0.5x(1+tanh u)): <= ~1.2e-7 relative to
 *                 max(1, |result|); in the far left tail the relative error grows like
 *                 |u|·1e-7 (the float rounding of u itself; 1e-5 where the result is ~1e-30)
 *   av_gelu_erf   0.5x(1+erf(x/√2)), with 1+erf taken from erfc for x < 0, so that the left
 *                 tail keeps its relative accuracy (<= 6e-7 down to x = −5.5) instead of
 *                 cancelling; <= ~1.2e-7 relative to max(1, |result|) everywhere.
 *   av_silu       x·sigmoid(x) from exp(−|x|) (no overflow, no cancellation): <= ~2.4e-7
 *                 relative to max(1, |result|) (tests/test_gemm.c, test_elementwise.c); below
 *                 x ≈ −87 exp(x) is subnormal, ~1e-6 relative there, then −0.
 * These were checked on dense grids against double-precision libm (tests/test_gemm.c checks the
 * GELU epilogues against PyTorch in float64). */
#ifndef ATTN_VMATH_H
#define ATTN_VMATH_H

#if !defined(ATTN_ISA) || (ATTN_ISA != 512 && ATTN_ISA != 2)
#error "vmath.h needs ATTN_ISA == 512 or ATTN_ISA == 2"
#endif

#include "attn_kernels.h" /* attn_act */

#include <immintrin.h>
#include <stdint.h>

/* ---- vector vocabulary --------------------------------------------------------------------- */

#if ATTN_ISA == 512
#define AV_LEN 16
typedef __m512 av_f;
typedef __m512i av_i;
typedef __mmask16 av_mask;
typedef __mmask16 av_cond;

static inline av_f av_set1(float a) { return _mm512_set1_ps(a); }
static inline av_f av_zero(void) { return _mm512_setzero_ps(); }
static inline av_f av_load(const float *p) { return _mm512_loadu_ps(p); }
/* AV_LEN binary16 values as floats (exact). */
static inline av_f av_load_h(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}
static inline av_f av_load_aligned(const float *p) { return _mm512_load_ps(p); }
static inline void av_store(float *p, av_f v) { _mm512_storeu_ps(p, v); }
/* First n lanes, 0 <= n <= AV_LEN. */
static inline av_mask av_tail(int n) { return (av_mask)((1u << n) - 1u); }
/* Lanes outside m are not touched in memory (no fault past an array's end) and read as 0. */
static inline av_f av_load_mask(const float *p, av_mask m) { return _mm512_maskz_loadu_ps(m, p); }
static inline void av_store_mask(float *p, av_mask m, av_f v) { _mm512_mask_storeu_ps(p, m, v); }
static inline av_f av_add(av_f a, av_f b) { return _mm512_add_ps(a, b); }
static inline av_f av_sub(av_f a, av_f b) { return _mm512_sub_ps(a, b); }
static inline av_f av_mul(av_f a, av_f b) { return _mm512_mul_ps(a, b); }
static inline av_f av_div(av_f a, av_f b) { return _mm512_div_ps(a, b); }
/* a·b + c and c − a·b, one rounding each. */
static inline av_f av_fmadd(av_f a, av_f b, av_f c) { return _mm512_fmadd_ps(a, b, c); }
static inline av_f av_fnmadd(av_f a, av_f b, av_f c) { return _mm512_fnmadd_ps(a, b, c); }
/* x86 max/min: when either operand is NaN the SECOND one is returned; av_exp relies on it. */
static inline av_f av_max(av_f a, av_f b) { return _mm512_max_ps(a, b); }
static inline av_f av_min(av_f a, av_f b) { return _mm512_min_ps(a, b); }
static inline av_f av_abs(av_f a) { return _mm512_abs_ps(a); }
/* Copy the sign bit of s onto the magnitude of m (m must be >= 0). */
static inline av_f av_with_sign(av_f m, av_f s) {
    return _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(m),
        _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32((int)0x80000000u))));
}
static inline av_cond av_lt(av_f a, av_f b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline av_cond av_gt(av_f a, av_f b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
static inline av_f av_select(av_cond c, av_f t, av_f f) { return _mm512_mask_blend_ps(c, f, t); }
/* Round to nearest integer (as float). */
static inline av_f av_round(av_f a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/* 2^n for integral n in [-126, 127], built directly in the exponent field. */
static inline av_f av_pow2i(av_f n) {
    av_i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_castsi512_ps(e);
}
static inline float av_reduce_add(av_f a) { return _mm512_reduce_add_ps(a); }
static inline float av_reduce_max(av_f a) { return _mm512_reduce_max_ps(a); }
/* a·b − c in the even lanes, a·b + c in the odd ones (one rounding each). */
static inline av_f av_fmaddsub(av_f a, av_f b, av_f c) { return _mm512_fmaddsub_ps(a, b, c); }
/* Lanes (1, 0, 3, 2, ...): each even/odd pair swapped. */
static inline av_f av_swap_pairs(av_f a) { return _mm512_permute_ps(a, 0xB1); }
/* The n floats p[0 .. n), 0 <= n <= AV_LEN/2, each twice: (p0, p0, p1, p1, ...); lanes past 2n
 * are 0 and p[n ..] is not read. */
static inline av_f av_load_dup_pairs(const float *p, int n) {
    __m256 h = _mm256_maskz_loadu_ps((__mmask8)((1u << n) - 1u), p);
    const __m512i idx = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(h));
}

#else /* ATTN_ISA == 2 */
#define AV_LEN 8
typedef __m256 av_f;
typedef __m256i av_i;
typedef __m256i av_mask;
typedef __m256 av_cond;

static inline av_f av_set1(float a) { return _mm256_set1_ps(a); }
static inline av_f av_zero(void) { return _mm256_setzero_ps(); }
static inline av_f av_load(const float *p) { return _mm256_loadu_ps(p); }
static inline av_f av_load_h(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
static inline av_f av_load_aligned(const float *p) { return _mm256_load_ps(p); }
static inline void av_store(float *p, av_f v) { _mm256_storeu_ps(p, v); }
static inline av_mask av_tail(int n) {
    /* lane i is on when i < n: compare the lane indices with n. */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline av_f av_load_mask(const float *p, av_mask m) { return _mm256_maskload_ps(p, m); }
static inline void av_store_mask(float *p, av_mask m, av_f v) { _mm256_maskstore_ps(p, m, v); }
static inline av_f av_add(av_f a, av_f b) { return _mm256_add_ps(a, b); }
static inline av_f av_sub(av_f a, av_f b) { return _mm256_sub_ps(a, b); }
static inline av_f av_mul(av_f a, av_f b) { return _mm256_mul_ps(a, b); }
static inline av_f av_div(av_f a, av_f b) { return _mm256_div_ps(a, b); }
static inline av_f av_fmadd(av_f a, av_f b, av_f c) { return _mm256_fmadd_ps(a, b, c); }
static inline av_f av_fnmadd(av_f a, av_f b, av_f c) { return _mm256_fnmadd_ps(a, b, c); }
static inline av_f av_max(av_f a, av_f b) { return _mm256_max_ps(a, b); }
static inline av_f av_min(av_f a, av_f b) { return _mm256_min_ps(a, b); }
static inline av_f av_abs(av_f a) {
    return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}
static inline av_f av_with_sign(av_f m, av_f s) {
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    return _mm256_or_ps(m, _mm256_and_ps(s, sign));
}
static inline av_cond av_lt(av_f a, av_f b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline av_cond av_gt(av_f a, av_f b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
static inline av_f av_select(av_cond c, av_f t, av_f f) { return _mm256_blendv_ps(f, t, c); }
static inline av_f av_round(av_f a) {
    return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline av_f av_pow2i(av_f n) {
    av_i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_castsi256_ps(e);
}
static inline float av_reduce_add(av_f a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float av_reduce_max(av_f a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline av_f av_fmaddsub(av_f a, av_f b, av_f c) { return _mm256_fmaddsub_ps(a, b, c); }
static inline av_f av_swap_pairs(av_f a) { return _mm256_permute_ps(a, 0xB1); }
static inline av_f av_load_dup_pairs(const float *p, int n) {
    __m128 h = n == 4 ? _mm_loadu_ps(p)
                      : _mm_maskload_ps(p, _mm_cmpgt_epi32(_mm_set1_epi32(n),
                                                           _mm_setr_epi32(0, 1, 2, 3)));
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_unpacklo_ps(h, h)),
                                _mm_unpackhi_ps(h, h), 1);
}
#endif

/* ---- math ---------------------------------------------------------------------------------- */

/* exp(x). x = n·ln2 + r with |r| <= ln2/2 (ln2 split in two so n·ln2_hi is exact), exp(r) by its
 * Taylor series to r^7 (truncation < 1.5e-8 relative), times 2^n applied as two halves so that
 * n may run from -150 to 128: results overflow to +inf and underflow through the subnormals to
 * 0 (exp(-inf) = 0, as softmax masking needs) without special cases. NaN stays NaN. */
/* av_exp's core for a clamped xc: n = round(xc / ln2) and exp(r) = p, r = xc − n·ln2, so that
 * exp(xc) = p · 2^n. */
static inline av_f av_exp_reduce(av_f xc, av_f *n_out) {
    av_f n = av_round(av_mul(xc, av_set1(1.44269504088896341f)));
    av_f r = av_fnmadd(n, av_set1(0.693145751953125f), xc); /* ln2_hi: 16 significant bits */
    r = av_fnmadd(n, av_set1(1.42860682030941723212e-6f), r);
    av_f p = av_set1(1.0f / 5040.0f);
    p = av_fmadd(p, r, av_set1(1.0f / 720.0f));
    p = av_fmadd(p, r, av_set1(1.0f / 120.0f));
    p = av_fmadd(p, r, av_set1(1.0f / 24.0f));
    p = av_fmadd(p, r, av_set1(1.0f / 6.0f));
    p = av_fmadd(p, r, av_set1(0.5f));
    p = av_fmadd(p, r, av_set1(1.0f));
    p = av_fmadd(p, r, av_set1(1.0f));
    *n_out = n;
    return p;
}

static inline av_f av_exp(av_f x) {
    /* Clamp so n fits the two half-scales; the clamped ends still give 0 and +inf. NaN passes
     * (max/min return their second operand on NaN). */
    av_f xc = av_min(av_set1(89.0f), av_max(av_set1(-104.0f), x));
    av_f n, p = av_exp_reduce(xc, &n);
    av_f n1 = av_round(av_mul(n, av_set1(0.5f))); /* |n1|, |n - n1| <= 75 */
    return av_mul(av_mul(p, av_pow2i(n1)), av_pow2i(av_sub(n, n1)));
}

/* exp(x) for x <= 0 (NaN passes): av_exp's reduction and polynomial, with 2^n applied by one
 * vscalef on AVX-512 instead of building two powers of two and multiplying twice (the upper
 * clamp is not needed either). Both round only once, into the subnormals where they must, so the
 * values are av_exp's bit for bit (checked over the whole GELU input range). About 8 of its ~22
 * vector operations fewer; the tanh-GELU kernels ran ~15-25% faster with it on Zen 4. */
static inline av_f av_exp_nonpos(av_f x) {
#if ATTN_ISA == 512
    av_f n, p = av_exp_reduce(av_max(av_set1(-104.0f), x), &n);
    return _mm512_scalef_ps(p, n);
#else
    return av_exp(x);
#endif
}

/* sigmoid(x) and its complement 1 − sigmoid(x) = sigmoid(−x), both from e = exp(−|x|) <= 1, which
 * never overflows: with r = 1/(1 + e), sigmoid(x) = r (x >= 0) or e·r (x < 0), and the other one
 * the complement, so neither is a difference (no cancellation in either tail). NaN gives NaN. */
static inline av_f av_sigmoid2(av_f x, av_f *comp) {
    av_f e = av_exp_nonpos(av_sub(av_zero(), av_abs(x)));
    av_f r = av_div(av_set1(1.0f), av_add(av_set1(1.0f), e));
    av_f er = av_mul(e, r);
    av_cond neg = av_lt(x, av_zero());
    *comp = av_select(neg, r, er);
    return av_select(neg, er, r);
}

/* SiLU, x·sigmoid(x). x = −inf is taken as −FLT_MAX (so −inf·0 gives −0, not NaN); +inf gives
 * +inf; NaN stays NaN (max returns its second operand on NaN). */
static inline av_f av_silu(av_f x) {
    av_f c, s = av_sigmoid2(x, &c);
    return av_mul(av_max(av_set1(-3.402823466e38f), x), s);
}
/* SiLU's derivative s·(1 + x·(1 − s)), s = sigmoid(x), with 1 − s from av_sigmoid2 (no
 * cancellation) and x clamped to ±FLT_MAX so that ±inf give 1 and 0 instead of inf·0. The
 * forward value x·s is returned in *y. */
static inline av_f av_silu_grad(av_f x, av_f *y) {
    av_f c, s = av_sigmoid2(x, &c);
    av_f xc = av_min(av_set1(3.402823466e38f), av_max(av_set1(-3.402823466e38f), x));
    *y = av_mul(av_max(av_set1(-3.402823466e38f), x), s);
    return av_mul(s, av_fmadd(xc, c, av_set1(1.0f)));
}

/* tanh(x). |x| < 0.625: x + x^3·P(x^2), P of degree 5 fitted (Chebyshev-node least squares,
 * reweighted toward minimax) to (tanh x − x)/x^3; elsewhere 1 − 2/(exp(2|x|) + 1) with the sign
 * of x, which has no cancellation there (tanh(0.625) = 0.55). */
static inline av_f av_tanh(av_f x) {
    av_f ax = av_abs(x);
    av_f z = av_mul(x, x);
    av_f p = av_set1(0.0022989352078410237f);
    p = av_fmadd(p, z, av_set1(-0.008350001947652876f));
    p = av_fmadd(p, z, av_set1(0.021770993650377917f));
    p = av_fmadd(p, z, av_set1(-0.053959549985671276f));
    p = av_fmadd(p, z, av_set1(0.13333304981376323f));
    p = av_fmadd(p, z, av_set1(-0.33333333183346686f));
    av_f small = av_fmadd(av_mul(p, z), x, x);
    /* exp(2|x|) overflows to inf for |x| > 44: 2/inf = 0 gives exactly 1. */
    av_f e = av_exp(av_add(ax, ax));
    av_f big = av_sub(av_set1(1.0f), av_div(av_set1(2.0f), av_add(e, av_set1(1.0f))));
    big = av_with_sign(big, x);
    return av_select(av_lt(ax, av_set1(0.625f)), small, big);
}

/* erfc(a) for a in [0.921875, 3.9375]: exp(−a²)·R(a), R a degree-10 polynomial in
 * u = (a − 2.4296875)/1.5078125 ∈ [−1, 1] fitted to erfc(a)·exp(a²); 0 for larger a (erfc < 2e-8
 * there). a² is passed exactly as hi + lo (see av_sq_split): a² is up to 15.5 here, so rounding it
 * alone would cost 1e-6 of relative accuracy in the exponential. NaN stays NaN. */
static inline av_f av_erfc_mid_(av_f a, av_f a2_hi, av_f a2_lo) {
    av_f u = av_mul(av_sub(a, av_set1(2.4296875f)), av_set1(1.0f / 1.5078125f));
    av_f r = av_set1(0.00013035429654472848f);
    r = av_fmadd(r, u, av_set1(-0.00031368144402631323f));
    r = av_fmadd(r, u, av_set1(0.0004371071893718206f));
    r = av_fmadd(r, u, av_set1(-0.0010970921342613796f));
    r = av_fmadd(r, u, av_set1(0.002888204789069841f));
    r = av_fmadd(r, u, av_set1(-0.006515557464565293f));
    r = av_fmadd(r, u, av_set1(0.014158428711657692f));
    r = av_fmadd(r, u, av_set1(-0.029927596814665842f));
    r = av_fmadd(r, u, av_set1(0.06070723213985897f));
    r = av_fmadd(r, u, av_set1(-0.1175743712367194f));
    r = av_fmadd(r, u, av_set1(0.21616002634955203f));
    /* exp(−hi − lo) = exp(−hi)·(1 − lo) to first order; |lo| <= ulp(hi)/2. */
    av_f e = av_mul(av_exp(av_sub(av_zero(), a2_hi)), av_sub(av_set1(1.0f), a2_lo));
    av_f y = av_mul(e, r);
    return av_select(av_gt(a, av_set1(3.9375f)), av_zero(), y);
}

/* x² = hi + lo exactly (hi the rounded product, lo its rounding error, recovered by an FMA). */
static inline void av_sq_split(av_f x, av_f *hi, av_f *lo) {
    *hi = av_mul(x, x);
    *lo = av_fmadd(x, x, av_sub(av_zero(), *hi));
}

/* erf(x)/x for |x| < 0.921875 as P(x²), P of degree 6 fitted like av_tanh's. */
static inline av_f av_erf_small_(av_f z) {
    av_f p = av_set1(8.397793510316882e-05f);
    p = av_fmadd(p, z, av_set1(-0.000814980531235237f));
    p = av_fmadd(p, z, av_set1(0.005201715998220592f));
    p = av_fmadd(p, z, av_set1(-0.0268597022256707f));
    p = av_fmadd(p, z, av_set1(0.11283701618469158f));
    p = av_fmadd(p, z, av_set1(-0.37612634188237437f));
    return av_fmadd(p, z, av_set1(1.1283791666921212f));
}

/* erf(x): x·P(x²) near 0, 1 − erfc(|x|) with the sign of x beyond. */
static inline av_f av_erf(av_f x) {
    av_f ax = av_abs(x), hi, lo;
    av_sq_split(x, &hi, &lo);
    av_f small = av_mul(x, av_erf_small_(hi));
    av_f big = av_with_sign(av_sub(av_set1(1.0f), av_erfc_mid_(ax, hi, lo)), x);
    return av_select(av_lt(ax, av_set1(0.921875f)), small, big);
}

/* GELU, tanh form: 0.5x(1 + tanh u) = x·sigmoid(2u) = x / (1 + exp(−2u)),
 * u = sqrt(2/π)(x + 0.044715x³). No cancellation anywhere; exp(−2u) = inf gives −0. */
static inline av_f av_gelu_tanh(av_f x) {
    av_f x2 = av_mul(x, x);
    av_f u = av_mul(x, av_fmadd(x2, av_set1(0.044715f), av_set1(1.0f)));
    av_f e = av_exp(av_mul(u, av_set1(-2.0f * 0.7978845608028654f)));
    return av_div(x, av_add(av_set1(1.0f), e));
}

/* GELU, erf form: 0.5x(1 + erf(a)), a = x/√2. For a <= −0.92, 1 + erf(a) = erfc(|a|) directly,
 * and a² = x²/2 is split from x itself (not from the rounded a), so the left tail keeps ~2e-7
 * relative accuracy. */
static inline av_f av_gelu_erf(av_f x) {
    av_f a = av_mul(x, av_set1(0.70710678118654752f));
    av_f aa = av_abs(a), hi, lo;
    av_sq_split(x, &hi, &lo);
    hi = av_mul(hi, av_set1(0.5f)); /* exact: a power of two */
    lo = av_mul(lo, av_set1(0.5f));
    av_f small = av_fmadd(a, av_erf_small_(hi), av_set1(1.0f));
    av_f ec = av_erfc_mid_(aa, hi, lo);
    av_f big = av_select(av_lt(a, av_zero()), ec, av_sub(av_set1(2.0f), ec));
    av_f onep = av_select(av_lt(aa, av_set1(0.921875f)), small, big);
    return av_mul(av_mul(x, av_set1(0.5f)), onep);
}

/* max(x, 0), keeping NaN (the second operand of max wins on NaN). */
static inline av_f av_relu(av_f x) { return av_max(av_zero(), x); }

/* An epilogue's activation (attn_kernels.h's attn_act) on a vector. */
static inline av_f av_act(av_f v, attn_act act) {
    switch (act) {
    case ATTN_ACT_RELU: return av_relu(v);
    case ATTN_ACT_GELU_TANH: return av_gelu_tanh(v);
    case ATTN_ACT_GELU_ERF: return av_gelu_erf(v);
    case ATTN_ACT_SILU: return av_silu(v);
    case ATTN_ACT_NONE: break;
    }
    return v;
}

/* c (w, 1 <= w <= AV_LEN) = act(v + beta·c + bias (w)) for the first w lanes of v; bias may be
 * NULL, beta == 0 never reads c: the epilogue of one vector of outputs (a kernel that holds its
 * sums in registers stores them through this). */
static inline void av_store_epilogue(float *c, int w, av_f v, float beta, const float *bias,
                                     attn_act act) {
    const av_mask mk = av_tail(w);
    if (beta != 0.0f)
        v = av_fmadd(w == AV_LEN ? av_load(c) : av_load_mask(c, mk), av_set1(beta), v);
    if (bias) v = av_add(v, w == AV_LEN ? av_load(bias) : av_load_mask(bias, mk));
    v = av_act(v, act);
    if (w == AV_LEN)
        av_store(c, v);
    else
        av_store_mask(c, mk, v);
}

/* c (n) = act(alpha·acc (n) + beta·c + bias (n)); bias may be NULL, beta == 0 never reads c
 * (attn_gemm_store_row's body, inlined where a kernel stores its tiles). */
static inline void av_store_row(float *c, int n, const float *acc, float alpha, float beta,
                                const float *bias, attn_act act) {
    const av_f va = av_set1(alpha);
    for (int j = 0; j < n; j += AV_LEN) {
        const int w = n - j < AV_LEN ? n - j : AV_LEN;
        const av_f v = av_mul(w == AV_LEN ? av_load(acc + j) : av_load_mask(acc + j, av_tail(w)), va);
        av_store_epilogue(c + j, w, v, beta, bias ? bias + j : NULL, act);
    }
}

#endif

/* vmath_ew.h — private SIMD helpers of elementwise_simd.c: a thin vector abstraction over
 * AVX-512 and AVX2 (so one kernel source serves both ISAs), with what the shared vmath.h does not
 * offer: masked loads with a chosen fill value (-inf for a row maximum, the mean for a variance),
 * double-precision accumulation of float vectors, and the normal CDF together with
 * exp(-x^2/2), which GELU-erf's derivative reuses. exp itself is vmath.h's av_exp.
 * Internal; included only by files compiled with ATTN_ISA.
 *
 * The vector type vf holds VL floats, vd VL/2 doubles; vm is a lane mask (a k-register on
 * AVX-512, an all-ones / all-zeros float vector on AVX2), used both for loop tails and for
 * comparison results.
 *
 * Accuracy (the fits evaluated in float32 against mpmath over the range the kernels use):
 *   v_exp          = av_exp: <= ~2 ulp relative; results below FLT_MIN flush to 0 (exp(-inf) = 0).
 *   v_normcdf      Phi(x) = 0.5 (1 + erf(x / sqrt 2)): |abs err| <= ~1.3e-7 and, for x < 0,
 *                  |rel err| <= ~4e-6 (dominated by the rounding of x^2 inside exp(-x^2/2)). */
#ifndef ATTN_VMATH_EW_H
#define ATTN_VMATH_EW_H

#if !defined(ATTN_ISA) || (ATTN_ISA != 512 && ATTN_ISA != 2)
#error "vmath_ew.h needs ATTN_ISA=512 or ATTN_ISA=2"
#endif

#include "vmath.h"

#include <immintrin.h>
#include <stdint.h>

/* ---- vector abstraction -------------------------------------------------------------------- */

/* The arithmetic is vmath.h's (one implementation per ISA for the whole project); the v_ names
 * keep elementwise_simd.c short. What differs is the mask: vm serves both loop tails and
 * comparisons, so on AVX2 the tail masks are float vectors (as av_cond), not av_mask. */
#define VL AV_LEN
typedef av_f vf;
typedef av_cond vm;
#define v_set av_set1
#define v_zero av_zero
#define v_ld av_load
#define v_st av_store
#define v_add av_add
#define v_sub av_sub
#define v_mul av_mul
#define v_div av_div
#define v_fma av_fmadd   /* a b + c */
#define v_fnma av_fnmadd /* c − a b */
/* max/min return the second operand when either is NaN (x86 semantics); callers rely on it. */
#define v_max av_max
#define v_min av_min
#define v_abs av_abs
#define v_lt av_lt
#define v_gt av_gt
#define v_sel av_select /* m ? a : b, lane by lane */
#define v_hsum av_reduce_add
#define v_hmax av_reduce_max

#if ATTN_ISA == 512
/* Lanes [0, n) set, 0 <= n <= VL. */
static inline vm v_tail(int n) { return av_tail(n); }
/* Masked load: lanes outside m read nothing (no fault past the end) and take `fill`. */
static inline vf v_ldm(const float *p, vm m, vf fill) { return _mm512_mask_loadu_ps(fill, m, p); }
static inline void v_stm(float *p, vm m, vf v) { av_store_mask(p, m, v); }
/* Double-precision accumulation of float vectors (both halves widened exactly). */
typedef __m512d vd;
static inline vd vd_zero(void) { return _mm512_setzero_pd(); }
static inline vd vd_acc(vd acc, vf a) {
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(a)));
    return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1)));
}
static inline double vd_hsum(vd a) { return _mm512_reduce_add_pd(a); }

#else /* ATTN_ISA == 2 */
static inline vm v_tail(int n) { return _mm256_castsi256_ps(av_tail(n)); }
/* vmaskmov does not fault on masked-out lanes, so reading a row's tail is safe. */
static inline vf v_ldm(const float *p, vm m, vf fill) {
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, _mm256_castps_si256(m)), m);
}
static inline void v_stm(float *p, vm m, vf v) {
    _mm256_maskstore_ps(p, _mm256_castps_si256(m), v);
}
typedef __m256d vd;
static inline vd vd_zero(void) { return _mm256_setzero_pd(); }
static inline vd vd_acc(vd acc, vf a) {
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
}
static inline double vd_hsum(vd a) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
#endif

/* ---- exp ----------------------------------------------------------------------------------- */

/* The project's one vectorized exp lives in vmath.h (shared with the GEMM and attention
 * kernels; vf is the same type as av_f). The kernels here only call it with x <= 0. */
static inline vf v_exp(vf x) { return av_exp(x); }

/* ---- normal CDF (for GELU with erf) ------------------------------------------------------- */

/* Phi(x) = 0.5 (1 + erf(z)), z = x / sqrt 2, and e = exp(-x^2 / 2) (which GELU's derivative also
 * needs, through phi(x) = e / sqrt(2 pi)). With a = |z|:
 *   a < 1:  erf(a) = a · A(a^2)               A: degree-6 polynomial, rel err 1.2e-9
 *   a >= 1: erfc(a) = exp(-a^2) · B(s)        B: degree-9 polynomial in s, an affine map of
 *           t = 1/(1+a) from [1/11, 1/2] onto [-1, 1]; B ≈ erfc(a) exp(a^2) with rel err 4.4e-9
 *           on a in [1, 10] (beyond, exp(-a^2) underflows to 0 in float anyway).
 * The coefficients are our own Lawson-weighted least-squares fits against mpmath (40 digits).
 * For x < 0 the result is erfc(a) / 2 directly, never 1 − erf, so the far left tail keeps its
 * relative accuracy instead of cancelling to 0. */
static inline vf v_normcdf(vf x, vf *e_out) {
    vf e = v_exp(v_mul(v_mul(x, x), v_set(-0.5f))); /* exp(-a^2), a^2 = x^2 / 2 */
    vf a = v_mul(v_abs(x), v_set(0.70710678118654752f));
    /* small a: erf(a) */
    vf u = v_mul(a, a);
    vf pa = v_set(7.854221168e-05f);
    pa = v_fma(pa, u, v_set(-8.010311308e-04f));
    pa = v_fma(pa, u, v_set(5.188342503e-03f));
    pa = v_fma(pa, u, v_set(-2.685382090e-02f));
    pa = v_fma(pa, u, v_set(1.128358541e-01f));
    pa = v_fma(pa, u, v_set(-3.761262586e-01f));
    pa = v_fma(pa, u, v_set(1.128379166e+00f));
    vf erf_small = v_mul(a, pa);
    /* large a: erfc(a) */
    vf t = v_div(v_set(1.0f), v_add(v_set(1.0f), a));
    const float tmid = 0.29545454545454547f, thalf = 0.20454545454545453f;
    vf s = v_fma(t, v_set(1.0f / thalf), v_set(-tmid / thalf));
    vf pb = v_set(9.117377972e-07f);
    pb = v_fma(pb, s, v_set(2.274743209e-06f));
    pb = v_fma(pb, s, v_set(-1.682521291e-05f));
    pb = v_fma(pb, s, v_set(7.736074850e-06f));
    pb = v_fma(pb, s, v_set(2.127616671e-04f));
    pb = v_fma(pb, s, v_set(-6.688397523e-04f));
    pb = v_fma(pb, s, v_set(-2.956789178e-03f));
    pb = v_fma(pb, s, v_set(2.279145142e-02f));
    pb = v_fma(pb, s, v_set(1.884812335e-01f));
    pb = v_fma(pb, s, v_set(2.197296630e-01f));
    vf erfc_large = v_mul(e, pb);
    vm small = v_lt(a, v_set(1.0f));
    vf erfc_a = v_sel(small, v_sub(v_set(1.0f), erf_small), erfc_large);
    vf erf_a = v_sel(small, erf_small, v_sub(v_set(1.0f), erfc_large));
    /* 1 + erf(z): 1 + erf(a) for z >= 0, erfc(a) for z < 0. */
    vf one_plus = v_sel(v_lt(x, v_zero()), erfc_a, v_add(v_set(1.0f), erf_a));
    *e_out = e;
    return v_mul(v_set(0.5f), one_plus);
}

#endif

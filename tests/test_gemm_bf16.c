/* test_gemm_bf16.c — the opt-in BF16 GEMMs: pre-packed (attn_gemm_pack_b_precision with
 * ATTN_PRECISION_BF16, attn_gemm_packed) and general (attn_gemm_precision, both operands packed
 * per call, every transpose).
 *
 * The expected values are computed here, independently of the library: both operands rounded to
 * bfloat16 by this file's own rounding (truncate, then round half to even by the dropped bits;
 * subnormals to zero, as VCVTNEPS2BF16), products and sums in double, then the float32 epilogue.
 * Tolerances, as max|err| <= rtol · max|expected| (tu_close):
 *   ref backend:    1e-6 — it sums the same exact products in double; only the final rounding
 *                   and the epilogue's float operations differ.
 *   avx512 backend: 1e-5 — float32 sums of exact products (K up to 1536), as attn_gemm's F32
 *                   kernels against their reference.
 *   Both plus 1e-6 absolute: the float32 activation (erff, tanhf) against the oracle's double one
 *   matters when C is a single tiny element (GELU of a negative sum).
 * Also: the rounding itself on hand-picked halfway cases, NaN in C never read when beta == 0,
 * ldc padding untouched, 1 and 2 threads bit-identical, how far BF16 lies from the F32 product
 * (it must be a real approximation, not F32 in disguise nor garbage), and the errors. */
#include "tu.h"

#include "attn_kernels.h"

#include <string.h>

static float *alloc_f(size_t n) {
    float *p = attn_alloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

/* The oracle's rounding: keep the top 16 bits, add one ulp when the dropped 16 bits exceed half,
 * or equal half and the kept part is odd. */
static float bf16_oracle(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;         /* subnormal or zero: signed zero */
    else if ((u & 0x7f800000u) != 0x7f800000u) {          /* finite */
        uint32_t kept = u & 0xffff0000u, dropped = u & 0xffffu;
        if (dropped > 0x8000u || (dropped == 0x8000u && (kept & 0x10000u))) kept += 0x10000u;
        u = kept;
    }
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

static float act_oracle(float x, attn_act act) {
    switch (act) {
    case ATTN_ACT_RELU: return x > 0 ? x : 0;
    case ATTN_ACT_GELU_TANH:
        return (float)(0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
    case ATTN_ACT_GELU_ERF: return (float)(0.5 * x * (1 + erf(x * 0.70710678118654752)));
    case ATTN_ACT_SILU: return (float)(x / (1 + exp(-(double)x)));
    case ATTN_ACT_NONE: break;
    }
    return x;
}

typedef struct {
    int M, N, K;
    bool ta, tb;
    float alpha, beta;
    bool bias;
    attn_act act;
    int pad;
} bshape;

/* Select backend be for BF16 products, or skip the test (a hardware skip) where this CPU cannot
 * run them there: one cmocka test per backend, so that a missing one is skipped alone. */
static void use_bf16_backend(attn_backend be) {
    tu_need_backend(be);
    assert_int_equal(attn_set_backend(be), ATTN_STATUS_OK);
    if (!attn_precision_available(ATTN_PRECISION_BF16)) {
        attn_set_backend(ATTN_BACKEND_AUTO);
        tu_skip_hw("precision bf16 on backend %s needs AVX512-BF16, which this CPU lacks",
                   attn_backend_name(be));
    }
}

/* Run s on backend be (use_bf16_backend(be) first); failed checks count into tu_failures. */
static void check_shape(const bshape *s, attn_backend be, bool general, tu_rng *rng) {
    assert_int_equal(attn_set_backend(be), ATTN_STATUS_OK);
    assert_true(attn_precision_available(ATTN_PRECISION_BF16));
    const int ra = s->ta ? s->K : s->M, ca = s->ta ? s->M : s->K;
    const int rb = s->tb ? s->N : s->K, cb = s->tb ? s->K : s->N;
    const int lda = (ca > 0 ? ca : 1) + s->pad, ldb = (cb > 0 ? cb : 1) + s->pad,
              ldc = s->N + s->pad;
    const size_t na = (size_t)ra * lda, nb = (size_t)rb * ldb, nc = (size_t)s->M * ldc;
    float *A = alloc_f(na), *B = alloc_f(nb), *C0 = alloc_f(nc), *Cw = alloc_f(nc),
          *Cg = alloc_f(nc), *bias = alloc_f((size_t)s->N);
    tu_fill(rng, A, na, -1.0f, 1.0f);
    tu_fill(rng, B, nb, -1.0f, 1.0f);
    tu_fill(rng, C0, nc, -1.0f, 1.0f);
    tu_fill(rng, bias, (size_t)s->N, -0.5f, 0.5f);
    if (s->beta == 0.0f)
        for (int i = 0; i < s->M; i++)
            for (int j = 0; j < s->N; j++) C0[(size_t)i * ldc + j] = NAN;
    memcpy(Cw, C0, nc * sizeof(float));
    for (int i = 0; i < s->M; i++)
        for (int j = 0; j < s->N; j++) {
            double acc = 0;
            for (int k = 0; k < s->K; k++) {
                float a = s->ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                float b = s->tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                acc += (double)bf16_oracle(a) * bf16_oracle(b);
            }
            float v = s->alpha * (float)acc;
            if (s->beta != 0.0f) v += s->beta * C0[(size_t)i * ldc + j];
            if (s->bias) v += bias[j];
            Cw[(size_t)i * ldc + j] = act_oracle(v, s->act);
        }
    attn_gemm_packed_b P;
    memset(&P, 0, sizeof P);
    memcpy(Cg, C0, nc * sizeof(float));
    if (general) {
        assert_int_equal(attn_gemm_precision(s->ta, s->tb, s->M, s->N, s->K, s->alpha, A, lda, B,
                                             ldb, s->beta, Cg, ldc, s->bias ? bias : NULL, s->act,
                                             ATTN_PRECISION_BF16),
                         ATTN_STATUS_OK);
    } else {
        assert_int_equal(
            attn_gemm_pack_b_precision(s->tb, s->K, s->N, B, ldb, ATTN_PRECISION_BF16, &P),
            ATTN_STATUS_OK);
        assert_int_equal(P.precision, ATTN_PRECISION_BF16);
        assert_int_equal(attn_gemm_packed(s->ta, s->M, s->N, s->K, s->alpha, A, lda, &P, s->beta,
                                          Cg, ldc, s->bias ? bias : NULL, s->act),
                         ATTN_STATUS_OK);
    }
    char what[160];
    snprintf(what, sizeof what, "%s %s %dx%dx%d %c%c a=%g b=%g %s act%d ld+%d",
             general ? "gemm" : "packed", attn_backend_name(be), s->M, s->N, s->K,
             s->ta ? 'T' : 'N', s->tb ? 'T' : 'N',
             (double)s->alpha, (double)s->beta, s->bias ? "bias" : "", (int)s->act, s->pad);
    tu_close(what, Cg, Cw, nc, be == ATTN_BACKEND_REF ? 1e-6 : 1e-5, 1e-6);
    /* The padding columns of C are untouched. */
    for (int i = 0; i < s->M; i++)
        for (int j = s->N; j < ldc; j++)
            if (memcmp(&Cg[(size_t)i * ldc + j], &C0[(size_t)i * ldc + j], sizeof(float))) {
                printf("  %s: padding of C written at (%d, %d)\n", what, i, j);
                tu_failures++;
            }
    attn_gemm_packed_b_free(&P);
    attn_free(A), attn_free(B), attn_free(C0), attn_free(Cw), attn_free(Cg), attn_free(bias);
}

static const attn_backend BACKENDS[] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX512};

/* Every shape on backend BACKENDS[b]. */
static void against_oracle(size_t b) {
    use_bf16_backend(BACKENDS[b]);
    tu_rng rng = {0x5eedbf16ull + b};
    const bool vg = tu_valgrind();
    /* Row counts across the microkernel's 1..14 and several panels; K odd/even, one and
     * several blocks (512-row blocks: 513, 1025, 1536); N across panel edges. */
    static const int Ms[] = {1, 2, 7, 14, 15, 29, 230};
    static const int Ns[] = {1, 17, 32, 33, 100, 384};
    static const int Ks[] = {0, 1, 2, 3, 64, 385, 513, 1536};
    {
        for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
            for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
                for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++) {
                    const int M = Ms[mi], N = Ns[ni], K = Ks[ki];
                    if ((double)M * N * K > (vg ? 2e5 : (BACKENDS[b] == ATTN_BACKEND_REF ? 3e7 : 1e9)))
                        continue;
                    const int v = (int)(mi + ni + ki);
                    bshape s = {M, N, K, v % 5 == 0, v % 3 != 0, v % 4 ? 1.0f : 0.5f,
                                v % 2 ? 0.0f : 1.0f, v % 3 == 1, (attn_act)(v % 4), v % 7 == 0 ? 3 : 0};
                    check_shape(&s, BACKENDS[b], false, &rng);
                    /* the general product (attn_gemm_precision), every transpose pair */
                    s.tb = !s.tb;
                    check_shape(&s, BACKENDS[b], true, &rng);
                    s.ta = !s.ta, s.tb = !s.tb;
                    check_shape(&s, BACKENDS[b], true, &rng);
                }
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

static void test_against_oracle_ref(void **state) {
    (void)state;
    against_oracle(0);
}

static void test_against_oracle_avx512(void **state) {
    (void)state;
    against_oracle(1);
}

/* Halfway cases: bfloat16 keeps 7 fraction bits, so its spacing at 1 is 2^-7. 1 + 2^-8 is
 * halfway between 1 and 1 + 2^-7 and rounds to the even 1; 1 + 3·2^-8 is halfway between
 * 1 + 2^-7 and 1 + 2^-6 and rounds to the even 1 + 2^-6; 1 + 2^-8 + 2^-20 is above halfway and
 * rounds up; a subnormal becomes 0. A 1 x 1 x 1 product with B = 1 shows A's rounding; with
 * A = 1, B's. */
static void rounding_on(size_t b) {
    use_bf16_backend(BACKENDS[b]);
    const float cases[][2] = {{1.0f + 0x1p-8f, 1.0f},
                              {1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-6f},
                              {1.0f + 0x1p-8f + 0x1p-20f, 1.0f + 0x1p-7f},
                              {-(1.0f + 0x1p-8f + 0x1p-20f), -(1.0f + 0x1p-7f)},
                              {0x1p-130f, 0.0f}, /* subnormal: zero */
                              {3.0e38f, 2.9908e38f}};
    {
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            const float x = cases[i][0], one = 1.0f, want = bf16_oracle(x);
            if (i < 5) assert_true(want == cases[i][1]);
            for (int side = 0; side < 2; side++) {
                attn_gemm_packed_b P;
                float c = NAN;
                assert_int_equal(attn_gemm_pack_b_precision(false, 1, 1, side ? &x : &one, 1,
                                                            ATTN_PRECISION_BF16, &P),
                                 ATTN_STATUS_OK);
                assert_int_equal(attn_gemm_packed(false, 1, 1, 1, 1.0f, side ? &one : &x, 1, &P,
                                                  0.0f, &c, 1, NULL, ATTN_ACT_NONE),
                                 ATTN_STATUS_OK);
                if (c != want)
                    fail_msg("%s: bf16(%.9g) on side %c gave %.9g, expected %.9g",
                             attn_backend_name(BACKENDS[b]), (double)x, side ? 'B' : 'A',
                             (double)c, (double)want);
                attn_gemm_packed_b_free(&P);
            }
        }
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

static void test_rounding_ref(void **state) {
    (void)state;
    rounding_on(0);
}

static void test_rounding_avx512(void **state) {
    (void)state;
    rounding_on(1);
}

/* 1 and 2 threads give the same bits (each element is summed by one thread in one order), and
 * BF16 is a real approximation of the F32 product: off by more than F32 rounding, by far less
 * than the values. */
static void test_threads_and_distance(void **state) {
    (void)state;
    use_bf16_backend(ATTN_BACKEND_AVX512);
    const int M = tu_valgrind() ? 29 : 230, N = 384, K = 1536;
    tu_rng rng = {42};
    float *A = alloc_f((size_t)M * K), *B = alloc_f((size_t)N * K), *C1 = alloc_f((size_t)M * N),
          *C2 = alloc_f((size_t)M * N), *Cf = alloc_f((size_t)M * N);
    tu_fill(&rng, A, (size_t)M * K, -1, 1);
    tu_fill(&rng, B, (size_t)N * K, -1, 1);
    attn_gemm_packed_b P, Pf;
    assert_int_equal(attn_gemm_pack_b_precision(true, K, N, B, K, ATTN_PRECISION_BF16, &P), 0);
    assert_int_equal(attn_gemm_pack_b(true, K, N, B, K, &Pf), 0);
    const int nt = attn_get_num_threads();
    attn_set_num_threads(1);
    assert_int_equal(attn_gemm_packed(false, M, N, K, 1, A, K, &P, 0, C1, N, NULL, 0), 0);
    attn_set_num_threads(2);
    assert_int_equal(attn_gemm_packed(false, M, N, K, 1, A, K, &P, 0, C2, N, NULL, 0), 0);
    assert_int_equal(attn_gemm_packed(false, M, N, K, 1, A, K, &Pf, 0, Cf, N, NULL, 0), 0);
    attn_set_num_threads(nt);
    assert_memory_equal(C1, C2, (size_t)M * N * sizeof(float));
    double err = 0, scale = 0;
    for (size_t i = 0; i < (size_t)M * N; i++) {
        err = fmax(err, fabs((double)C1[i] - Cf[i]));
        scale = fmax(scale, fabs((double)Cf[i]));
    }
    printf("  bf16 vs f32 product (K=%d): max err %.3e = %.2e of max|C|\n", K, err, err / scale);
    assert_true(err > 1e-5 * scale && err < 2e-2 * scale);
    attn_gemm_packed_b_free(&P), attn_gemm_packed_b_free(&Pf);
    attn_free(A), attn_free(B), attn_free(C1), attn_free(C2), attn_free(Cf);
    attn_set_backend(ATTN_BACKEND_AUTO);
}

static void test_errors(void **state) {
    (void)state;
    float B[4] = {1, 2, 3, 4}, A[4] = {1, 1, 1, 1}, C[4];
    attn_gemm_packed_b P;
    tu_expect_fail(attn_gemm_pack_b_precision(false, 2, 2, B, 2, (attn_precision)7, &P),
                   ATTN_STATUS_INVALID_ARGUMENT, "precision", NULL);
    attn_precision p;
    assert_int_equal(attn_precision_parse("bf16", &p), 0);
    assert_int_equal(p, ATTN_PRECISION_BF16);
    assert_int_equal(attn_precision_parse("float32", &p), 0);
    assert_int_equal(p, ATTN_PRECISION_F32);
    tu_expect_fail(attn_precision_parse("fp8", &p), ATTN_STATUS_INVALID_ARGUMENT, "fp8", NULL);
    assert_string_equal(attn_precision_name(ATTN_PRECISION_BF16), "bf16");
    attn_set_backend(ATTN_BACKEND_REF);
    assert_int_equal(attn_gemm_pack_b_precision(false, 2, 2, B, 2, ATTN_PRECISION_BF16, &P), 0);
    tu_expect_fail(attn_gemm_packed(false, 2, 3, 2, 1, A, 2, &P, 0, C, 3, NULL, 0),
                   ATTN_STATUS_INVALID_ARGUMENT, "packed as", NULL);
    attn_gemm_packed_b_free(&P);
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* No BF16 kernel for AVX2: a clear error, not a slow or wrong product. */
static void test_errors_avx2(void **state) {
    (void)state;
    float B[4] = {1, 2, 3, 4};
    attn_gemm_packed_b P;
    tu_need_backend(ATTN_BACKEND_AVX2);
    attn_set_backend(ATTN_BACKEND_AVX2);
    assert_false(attn_precision_available(ATTN_PRECISION_BF16));
    tu_expect_fail(attn_gemm_pack_b_precision(false, 2, 2, B, 2, ATTN_PRECISION_BF16, &P),
                   ATTN_STATUS_UNSUPPORTED, "bf16", NULL);
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* Packed under one backend (ref), used under another (avx512): refused. */
static void test_errors_avx512(void **state) {
    (void)state;
    float B[4] = {1, 2, 3, 4}, A[4] = {1, 1, 1, 1}, C[4];
    attn_gemm_packed_b P;
    tu_need_backend(ATTN_BACKEND_AVX512);
    attn_set_backend(ATTN_BACKEND_REF);
    assert_int_equal(attn_gemm_pack_b_precision(false, 2, 2, B, 2, ATTN_PRECISION_BF16, &P), 0);
    attn_set_backend(ATTN_BACKEND_AVX512);
    tu_expect_fail(attn_gemm_packed(false, 2, 2, 2, 1, A, 2, &P, 0, C, 2, NULL, 0),
                   ATTN_STATUS_INVALID_ARGUMENT, "backend", NULL);
    attn_set_backend(ATTN_BACKEND_REF);
    attn_gemm_packed_b_free(&P);
    attn_set_backend(ATTN_BACKEND_AUTO);
}

int main(void) {
    bool have = false;
    if (attn_backend_available(ATTN_BACKEND_AVX512)) {
        attn_set_backend(ATTN_BACKEND_AVX512);
        have = attn_precision_available(ATTN_PRECISION_BF16);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
    printf("avx512 bf16 kernel: %s\n", have ? "available" : "not available on this CPU (ref only)");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding_ref),
        cmocka_unit_test(test_rounding_avx512),
        cmocka_unit_test(test_against_oracle_ref),
        cmocka_unit_test(test_against_oracle_avx512),
        cmocka_unit_test(test_threads_and_distance),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_errors_avx2),
        cmocka_unit_test(test_errors_avx512),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

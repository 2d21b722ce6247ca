/* test_gemm_small.c — attn_gemm's small-M path (M <= 8, the token-by-token generation shapes) on
 * every SIMD backend: against float64 products computed here, bitwise identical results for any
 * thread count, and concurrent calls from inside a parallel region.
 *
 * With op(B) = B and few accumulators the path splits K into fixed blocks whose partial sums are
 * reduced in a fixed order (gemm_simd.c, small_ks_*), so the shapes below cross: K below, at and
 * around the block size (64) and many blocks (3072); N with and without a vector tail; M·N on
 * both sides of the K-split limit (6144 accumulators: 1×6144 splits K, 1×6160 and 8×769 take the
 * column path); transposed A (copied into the same scratch as the partials); alpha, beta (0 with
 * NaN in C: C must not be read), bias and every activation; padded leading dimensions (the
 * padding of C must come back untouched).
 *
 * Tolerances, as max|err| <= RTOL · max|expected| (tu_close), expected in float64:
 *   RTOL 1e-5 — fp32 accumulation of up to 3072 products of [-1, 1] numbers (test_gemm's bound).
 * Thread counts 1–4 must give bit-identical C: no tolerance. */
#include "tu.h"

#include "attn_kernels.h"

#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define RTOL 1e-5

static const attn_backend SIMD_BACKENDS[] = {ATTN_BACKEND_AVX2, ATTN_BACKEND_AVX512};

typedef struct {
    int M, N, K;
    bool ta;
    float alpha, beta;
    bool bias;
    attn_act act;
    int pad; /* added to every leading dimension */
} sshape;

typedef struct {
    const sshape *s;
    int lda, ldb, ldc;
    size_t na, nb, nc;
    float *A, *B, *C0, *bias;
} sdata;

static float *alloc_f(size_t n) {
    float *p = attn_alloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

static void data_init(sdata *d, const sshape *s, tu_rng *rng) {
    d->s = s;
    const int ra = s->ta ? s->K : s->M, ca = s->ta ? s->M : s->K;
    d->lda = ca + s->pad, d->ldb = s->N + s->pad, d->ldc = s->N + s->pad;
    d->na = (size_t)ra * d->lda, d->nb = (size_t)s->K * d->ldb, d->nc = (size_t)s->M * d->ldc;
    d->A = alloc_f(d->na), d->B = alloc_f(d->nb), d->C0 = alloc_f(d->nc);
    d->bias = alloc_f((size_t)s->N);
    tu_fill(rng, d->A, d->na, -1.0f, 1.0f);
    tu_fill(rng, d->B, d->nb, -1.0f, 1.0f);
    tu_fill(rng, d->C0, d->nc, -1.0f, 1.0f);
    tu_fill(rng, d->bias, (size_t)s->N, -0.5f, 0.5f);
    if (s->beta == 0.0f)
        for (int i = 0; i < s->M; i++)
            for (int j = 0; j < s->N; j++) d->C0[(size_t)i * d->ldc + j] = NAN;
}

static void data_free(sdata *d) {
    attn_free(d->A);
    attn_free(d->B);
    attn_free(d->C0);
    attn_free(d->bias);
}

static double act64(attn_act act, double x) {
    switch (act) {
    case ATTN_ACT_RELU: return x > 0 ? x : 0;
    case ATTN_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case ATTN_ACT_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case ATTN_ACT_SILU: return x / (1.0 + exp(-x));
    case ATTN_ACT_NONE: break;
    }
    return x;
}

/* The expected C (including its padding, copied from C0) in float32 from float64 sums. */
static void expected(const sdata *d, float *out) {
    const sshape *s = d->s;
    memcpy(out, d->C0, d->nc * sizeof(float));
    for (int i = 0; i < s->M; i++)
        for (int j = 0; j < s->N; j++) {
            double acc = 0;
            for (int k = 0; k < s->K; k++) {
                const float a = s->ta ? d->A[(size_t)k * d->lda + i] : d->A[(size_t)i * d->lda + k];
                acc += (double)a * d->B[(size_t)k * d->ldb + j];
            }
            double v = s->alpha * acc;
            if (s->beta != 0.0f) v += (double)s->beta * d->C0[(size_t)i * d->ldc + j];
            if (s->bias) v += d->bias[j];
            out[(size_t)i * d->ldc + j] = (float)act64(s->act, v);
        }
}

static void run(const sdata *d, float *C) {
    const sshape *s = d->s;
    memcpy(C, d->C0, d->nc * sizeof(float));
    assert_int_equal(attn_gemm(s->ta, false, s->M, s->N, s->K, s->alpha, d->A, d->lda, d->B,
                               d->ldb, s->beta, C, d->ldc, s->bias ? d->bias : NULL, s->act),
                     ATTN_STATUS_OK);
}

static void label(const sshape *s, const char *backend, int threads, char *buf, size_t cap) {
    snprintf(buf, cap, "%s threads=%d %dx%dx%d %c a=%g b=%g %sact%d ld+%d", backend, threads, s->M,
             s->N, s->K, s->ta ? 'T' : 'N', (double)s->alpha, (double)s->beta,
             s->bias ? "bias " : "", (int)s->act, s->pad);
}

/* One shape on SIMD backend SIMD_BACKENDS[b] and thread counts 1..4: each close to float64, the
 * padding of C untouched, and all thread counts bit-identical. One cmocka test per backend (a
 * missing one is skipped alone), each drawing the same data from the same seed. */
static void check_shape(const sshape *s, tu_rng *rng, size_t b) {
    sdata d;
    data_init(&d, s, rng);
    float *want = alloc_f(d.nc), *first = alloc_f(d.nc), *got = alloc_f(d.nc);
    expected(&d, want);
    {
        assert_int_equal(attn_set_backend(SIMD_BACKENDS[b]), ATTN_STATUS_OK);
        for (int th = 1; th <= 4; th++) {
            attn_set_num_threads(th);
            run(&d, got);
            char what[240];
            label(s, attn_backend_name(SIMD_BACKENDS[b]), th, what, sizeof what);
            for (int i = 0; i < s->M; i++)
                if (memcmp(got + (size_t)i * d.ldc + s->N, d.C0 + (size_t)i * d.ldc + s->N,
                           (size_t)s->pad * sizeof(float))) {
                    printf("  %s: padding of C written in row %d\n", what, i);
                    tu_failures++;
                }
            tu_close(what, got, want, d.nc, RTOL, 0.0);
            if (th == 1) {
                memcpy(first, got, d.nc * sizeof(float));
            } else if (memcmp(first, got, d.nc * sizeof(float))) {
                printf("  %s: differs from 1 thread (the sum order must not depend on it)\n",
                       what);
                tu_failures++;
            }
        }
    }
    attn_set_num_threads(0);
    attn_set_backend(ATTN_BACKEND_AUTO);
    attn_free(want);
    attn_free(first);
    attn_free(got);
    data_free(&d);
}

/* Sizes around the K blocks and the vector tails, with varied epilogues. */
static void small_shapes(size_t b) {
    tu_need_backend(SIMD_BACKENDS[b]);
    tu_rng rng = {0x5eedull};
    static const int NK[][2] = {{1, 1},    {5, 3},     {17, 63},   {16, 64},  {100, 65},
                                {33, 128}, {129, 200}, {768, 768}, {40, 3072}};
    int n = 0;
    for (int M = 1; M <= 8; M++)
        for (size_t c = 0; c < sizeof NK / sizeof NK[0]; c++, n++) {
            if (M > 2 && NK[c][0] * NK[c][1] > 100000) continue; /* keep the run short */
            sshape s = {M, NK[c][0], NK[c][1], false, 1.0f, 0.0f, false, ATTN_ACT_NONE, 0};
            s.ta = n % 3 == 0;
            s.act = (attn_act)(n % 4);
            s.bias = n % 2 == 0;
            s.beta = (n % 4 == 0) ? 0.0f : (n % 4 == 1) ? 1.0f : -0.75f;
            s.alpha = (n % 5 == 4) ? -1.5f : 1.0f;
            s.pad = (n % 3 == 1) ? 5 : 0;
            check_shape(&s, &rng, b);
        }
}

static void test_small_shapes_avx2(void **state) {
    (void)state;
    small_shapes(0);
}

static void test_small_shapes_avx512(void **state) {
    (void)state;
    small_shapes(1);
}

/* GPT-2-124M's generation shapes (M = 1; B = 2 for QKV) and the edges of the K-split limit. */
static void generation_shapes(size_t b) {
    tu_need_backend(SIMD_BACKENDS[b]);
    tu_rng rng = {0xabcdefull};
    const sshape shapes[] = {
        {1, 2304, 768, false, 1.0f, 0.0f, true, ATTN_ACT_NONE, 0},     /* QKV */
        {1, 768, 768, false, 1.0f, 1.0f, true, ATTN_ACT_NONE, 0},      /* c_proj += x */
        {1, 3072, 768, false, 1.0f, 0.0f, true, ATTN_ACT_GELU_TANH, 0}, /* c_fc + GELU */
        {1, 768, 3072, false, 1.0f, 1.0f, true, ATTN_ACT_NONE, 0},     /* MLP c_proj += x */
        {2, 2304, 768, false, 1.0f, 0.0f, true, ATTN_ACT_NONE, 3},     /* two sequences */
        {1, 6144, 70, false, 0.5f, 0.25f, true, ATTN_ACT_RELU, 0},     /* at the limit */
        {1, 6160, 70, false, 1.0f, 0.0f, false, ATTN_ACT_NONE, 0},     /* column path */
        {8, 769, 130, true, 1.0f, -1.0f, true, ATTN_ACT_GELU_ERF, 1},  /* column path */
        {8, 752, 130, true, 1.0f, 0.0f, true, ATTN_ACT_GELU_ERF, 1},   /* K split, M = 8 */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(&shapes[i], &rng, b);
}

static void test_generation_shapes_avx2(void **state) {
    (void)state;
    generation_shapes(0);
}

static void test_generation_shapes_avx512(void **state) {
    (void)state;
    generation_shapes(1);
}

/* Several threads calling attn_gemm at once (each then runs single-threaded on its own scratch)
 * give what one call alone gives, bit for bit. */
static void test_concurrent_calls(void **state) {
    (void)state;
    tu_rng rng = {77};
    enum { NCALL = 6 };
    sshape s[NCALL];
    sdata d[NCALL];
    float *alone[NCALL], *together[NCALL];
    for (int i = 0; i < NCALL; i++) {
        s[i] = (sshape){1 + i % 3, 300 + 50 * i, 64 * i + 33, i % 2 == 1, 1.0f, 0.0f, true,
                        ATTN_ACT_GELU_TANH, 0};
        data_init(&d[i], &s[i], &rng);
        alone[i] = alloc_f(d[i].nc);
        together[i] = alloc_f(d[i].nc);
        run(&d[i], alone[i]);
    }
    attn_set_num_threads(3);
    int ok = 1;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(3)
#endif
    for (int i = 0; i < NCALL; i++) {
        const sshape *si = d[i].s;
        memcpy(together[i], d[i].C0, d[i].nc * sizeof(float));
        if (attn_gemm(si->ta, false, si->M, si->N, si->K, si->alpha, d[i].A, d[i].lda, d[i].B,
                      d[i].ldb, si->beta, together[i], d[i].ldc, d[i].bias, si->act) !=
            ATTN_STATUS_OK) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
            ok = 0;
        }
    }
    attn_set_num_threads(0);
    assert_true(ok);
    for (int i = 0; i < NCALL; i++) {
        if (memcmp(alone[i], together[i], d[i].nc * sizeof(float))) {
            printf("  call %d (%dx%dx%d): differs when run concurrently\n", i, s[i].M, s[i].N,
                   s[i].K);
            tu_failures++;
        }
        attn_free(alone[i]);
        attn_free(together[i]);
        data_free(&d[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_shapes_avx2),
        cmocka_unit_test(test_small_shapes_avx512),
        cmocka_unit_test(test_generation_shapes_avx2),
        cmocka_unit_test(test_generation_shapes_avx512),
        cmocka_unit_test(test_concurrent_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

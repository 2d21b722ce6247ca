/* test_gemm.c — attn_gemm: the SIMD backends against the reference loops over many shapes,
 * transposes, strides, alpha/beta, bias and activations (random data); every backend against
 * PyTorch (tools/ref_gemm.py, float64 expected values); and bad arguments.
 *
 * Tolerances, as max|err| <= rtol · max|reference| (tu_close):
 *   SIMD vs ref:   1e-5 — both accumulate in fp32, in different orders (K up to 2048 here).
 *   vs PyTorch:    1e-5 — against float64 expected values.
 *   Activation sweep (C = act(C) over [-10, 10], against float64): 1e-6 per element relative to
 *     max(1, |expected|), a much tighter check of the vectorized GELU/erf/tanh/SiLU epilogue
 *     (SiLU measured 1.5e-7; test_silu_epilogue checks it on every path, BF16 included, and at
 *     ±inf, NaN and the subnormal tail).
 * Cases with beta == 0 start from a C full of NaN: C must not be read. Padding columns of C
 * (ldc > N) must come back untouched. */
#include "tu.h"

#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_quant.h"

#include <jansson.h>

#define RTOL 1e-5
#define SWEEP_TOL 1e-6

/* Every check that runs on one backend is its own cmocka test per backend (PER_SIMD_BACKEND,
 * PER_BACKEND below), which starts with tu_need_backend: a backend this CPU lacks is skipped
 * alone, as a hardware skip, and the data are drawn from the same seeds in each. */
static const char *const ACT_NAMES[] = {"none", "relu", "gelu_tanh", "gelu_erf", "silu"};
#define NACTS ((int)(sizeof ACT_NAMES / sizeof ACT_NAMES[0]))

typedef struct {
    int M, N, K;
    bool ta, tb;
    float alpha, beta;
    bool bias;
    attn_act act;
    int pad; /* added to every leading dimension */
} gshape;

static float *alloc_f(size_t n) {
    float *p = attn_alloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

/* Run one shape on the reference and on the SIMD backend be and compare. The whole C buffer
 * including the ldc padding is compared, so writes outside the matrix are caught too. */
static void compare_shape(const gshape *s, tu_rng *rng, attn_backend be) {
    int ra = s->ta ? s->K : s->M, ca = s->ta ? s->M : s->K;
    int rb = s->tb ? s->N : s->K, cb = s->tb ? s->K : s->N;
    int lda = (ca > 0 ? ca : 1) + s->pad, ldb = (cb > 0 ? cb : 1) + s->pad, ldc = s->N + s->pad;
    size_t na = (size_t)ra * lda, nb = (size_t)rb * ldb, nc = (size_t)s->M * ldc;
    float *A = alloc_f(na), *B = alloc_f(nb), *C0 = alloc_f(nc), *Cref = alloc_f(nc),
          *Cgot = alloc_f(nc), *bias = alloc_f((size_t)s->N);
    tu_fill(rng, A, na, -1.0f, 1.0f);
    tu_fill(rng, B, nb, -1.0f, 1.0f);
    tu_fill(rng, C0, nc, -1.0f, 1.0f);
    tu_fill(rng, bias, (size_t)s->N, -0.5f, 0.5f);
    if (s->beta == 0.0f) /* C must not be read: NaN inside the matrix, numbers in the padding */
        for (int i = 0; i < s->M; i++)
            for (int j = 0; j < s->N; j++) C0[(size_t)i * ldc + j] = NAN;

    char what[160];
    snprintf(what, sizeof what, "%dx%dx%d %c%c a=%g b=%g %s%s ld+%d", s->M, s->N, s->K,
             s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', (double)s->alpha, (double)s->beta,
             s->bias ? "bias " : "", ACT_NAMES[s->act], s->pad);

    memcpy(Cref, C0, nc * sizeof(float));
    assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
    assert_int_equal(attn_gemm(s->ta, s->tb, s->M, s->N, s->K, s->alpha, A, lda, B, ldb, s->beta,
                               Cref, ldc, s->bias ? bias : NULL, s->act),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_set_backend(be), ATTN_STATUS_OK);
    memcpy(Cgot, C0, nc * sizeof(float));
    assert_int_equal(attn_gemm(s->ta, s->tb, s->M, s->N, s->K, s->alpha, A, lda, B, ldb, s->beta,
                               Cgot, ldc, s->bias ? bias : NULL, s->act),
                     ATTN_STATUS_OK);
    char label[200];
    snprintf(label, sizeof label, "%s %s", attn_backend_name(be), what);
    /* Padding must be bit-identical; compare it separately with zero tolerance. */
    for (int i = 0; i < s->M; i++)
        for (int j = s->N; j < ldc; j++)
            if (memcmp(&Cgot[(size_t)i * ldc + j], &C0[(size_t)i * ldc + j], sizeof(float))) {
                printf("  %s: padding of C written at (%d, %d)\n", label, i, j);
                tu_failures++;
                i = s->M;
                break;
            }
    tu_close(label, Cgot, Cref, nc, RTOL, 0.0);
    attn_set_backend(ATTN_BACKEND_AUTO);
    attn_free(A);
    attn_free(B);
    attn_free(C0);
    attn_free(Cref);
    attn_free(Cgot);
    attn_free(bias);
}

/* test_NAME_avx2 and test_NAME_avx512: NAME(backend) on one SIMD backend each. */
#define PER_SIMD_BACKEND(name)                                                                   \
    static void test_##name##_avx2(void **state) {                                               \
        (void)state;                                                                             \
        name(ATTN_BACKEND_AVX2);                                                                 \
    }                                                                                            \
    static void test_##name##_avx512(void **state) {                                             \
        (void)state;                                                                             \
        name(ATTN_BACKEND_AVX512);                                                               \
    }
/* test_NAME_ref, test_NAME_avx2 and test_NAME_avx512. */
#define PER_BACKEND(name)                                                                        \
    static void test_##name##_ref(void **state) {                                                \
        (void)state;                                                                             \
        name(ATTN_BACKEND_REF);                                                                  \
    }                                                                                            \
    PER_SIMD_BACKEND(name)

/* Odd sizes around the register-tile edges, every transpose and epilogue. */
static void simd_vs_ref_small(attn_backend be) {
    tu_need_backend(be);
    tu_rng rng = {0x9e3779b97f4a7c15ull};
    static const int sizes[] = {1, 7, 17, 33, 100, 257};
    int n = 0;
    for (int mi = 0; mi < 6; mi++)
        for (int ni = 0; ni < 6; ni++)
            for (int ki = 0; ki < 6; ki += 1 + (mi + ni) % 2) {
                gshape s = {sizes[mi], sizes[ni], sizes[ki], false, false, 1.0f, 0.0f, false,
                            ATTN_ACT_NONE, 0};
                s.ta = (n >> 0) & 1;
                s.tb = (n >> 1) & 1;
                s.act = (attn_act)((n >> 2) % NACTS);
                s.bias = (n % 3) != 0;
                s.pad = (n % 5 == 0) ? 3 : (n % 7 == 0) ? 16 : 0;
                s.beta = (n % 4 == 0) ? 0.0f : (n % 4 == 1) ? 1.0f : -0.75f;
                s.alpha = (n % 6 == 5) ? -1.5f : 1.0f;
                compare_shape(&s, &rng, be);
                n++;
            }
}
PER_SIMD_BACKEND(simd_vs_ref_small)

/* Every transpose × activation on one mid-size shape; K = 0; alpha = 0; threads 1, 2, 3. */
static void simd_vs_ref_variants(attn_backend be) {
    tu_need_backend(be);
    tu_rng rng = {12345};
    for (int t = 0; t < 4; t++)
        for (int a = 0; a < NACTS; a++) {
            gshape s = {45, 70, 129, t & 1, t >> 1, 0.75f, 0.5f, true, (attn_act)a, 1};
            compare_shape(&s, &rng, be);
        }
    gshape k0 = {33, 65, 0, false, false, 1.0f, 0.5f, true, ATTN_ACT_GELU_ERF, 2};
    compare_shape(&k0, &rng, be);
    gshape k0b = {33, 65, 0, true, true, 1.0f, 0.0f, false, ATTN_ACT_NONE, 0};
    compare_shape(&k0b, &rng, be);
    gshape a0 = {33, 65, 17, false, true, 0.0f, 2.0f, true, ATTN_ACT_RELU, 0};
    compare_shape(&a0, &rng, be);
    for (int th = 1; th <= 3; th++) {
        attn_set_num_threads(th);
        gshape s = {150, 190, 130, false, true, 1.0f, 0.0f, true, ATTN_ACT_GELU_TANH, 0};
        compare_shape(&s, &rng, be);
    }
    attn_set_num_threads(0);
}
PER_SIMD_BACKEND(simd_vs_ref_variants)

/* Shapes that cross every cache block (K > KC, M > MC, N > NC) and both thread splits (along M,
 * and along N when M is a single register tile). */
static void simd_vs_ref_blocked(attn_backend be) {
    tu_need_backend(be);
    tu_rng rng = {777};
    const gshape shapes[] = {
        {300, 1600, 700, false, false, 1.0f, 0.0f, true, ATTN_ACT_NONE, 0},
        {300, 1600, 700, true, true, 1.0f, 1.0f, true, ATTN_ACT_GELU_TANH, 5},
        {7, 3000, 300, false, true, 1.0f, 0.0f, true, ATTN_ACT_GELU_ERF, 0},
        {3000, 7, 300, true, false, 1.0f, -1.0f, false, ATTN_ACT_RELU, 0},
        {256, 384, 1000, true, false, 0.5f, 1.0f, false, ATTN_ACT_NONE, 0},
        {512, 512, 512, false, true, 1.0f, 0.0f, false, ATTN_ACT_NONE, 0},
    };
    /* Under valgrind (tu_valgrind), smaller shapes that still cross each block of the AVX2
     * kernel (the only SIMD backend valgrind runs: KC 384, MC_MAX 144, NC_MAX 1536) and both
     * thread splits, without the reference loops' hundreds of millions of multiply-adds. */
    const gshape small[] = {
        {150, 20, 390, false, false, 1.0f, 0.0f, true, ATTN_ACT_NONE, 0},
        {150, 23, 390, true, true, 1.0f, 1.0f, true, ATTN_ACT_GELU_TANH, 5},
        {7, 1540, 390, false, true, 1.0f, 0.0f, true, ATTN_ACT_GELU_ERF, 0},
        {150, 7, 390, true, false, 1.0f, -1.0f, false, ATTN_ACT_RELU, 0},
        {146, 1540, 20, true, false, 0.5f, 1.0f, false, ATTN_ACT_NONE, 0},
        {30, 200, 400, false, true, 1.0f, 0.0f, false, ATTN_ACT_NONE, 0},
    };
    const gshape *use = tu_valgrind() ? small : shapes;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) compare_shape(&use[i], &rng, be);
}
PER_SIMD_BACKEND(simd_vs_ref_blocked)

/* Every row count of the packed path's last panel: M from 9 to 9 + 2·14 covers remainders 1..14 of
 * the AVX-512 kernel's 14-row panels and 1..6 of AVX2's 6-row ones (one kernel per row count),
 * with both thread splits (M over threads, or N), odd N and K, beta, bias and an activation. */
static void simd_vs_ref_every_row_count(attn_backend be) {
    tu_need_backend(be);
    tu_rng rng = {31337};
    for (int th = 1; th <= 2; th++) {
        attn_set_num_threads(th);
        for (int M = 9; M <= 9 + 28; M++) {
            /* 2 threads: big enough to be split (smaller under valgrind, still split) */
            const int N = th == 1 ? 70 : tu_valgrind() ? 300 : 1031;
            const int K = th == 1 ? 37 : tu_valgrind() ? 40 : 260;
            gshape s = {M, N, K, M % 3 == 0, M % 2 == 0, 1.0f, M % 4 == 0 ? 1.0f : 0.0f,
                        M % 5 != 0, (attn_act)((M / 3) % NACTS), 0};
            compare_shape(&s, &rng, be);
        }
    }
    attn_set_num_threads(1);
}
PER_SIMD_BACKEND(simd_vs_ref_every_row_count)

/* The small-M path (M <= 8: generation's one-token products, which stream B once from its own
 * layout with the columns split across threads): every M from 1 to 9 (9 takes the packed path),
 * both layouts of B, odd and vector-multiple N and K (K tails of the 4-row unroll and of the
 * vector), a transposed A, ld padding, alpha/beta/bias/activations, and 1 to 3 threads. */
static void simd_vs_ref_small_m(attn_backend be) {
    tu_need_backend(be);
    tu_rng rng = {4242};
    int n = 0;
    for (int th = 1; th <= 3; th++) {
        attn_set_num_threads(th);
        for (int M = 1; M <= 9; M++) {
            static const int NK[][2] = {{1, 1}, {5, 3}, {16, 16}, {100, 33}, {768, 7},
                                        {2304, 768}, {1031, 130}};
            for (size_t c = 0; c < sizeof NK / sizeof NK[0]; c++, n++) {
                if (th > 1 && NK[c][0] * NK[c][1] < 10000) continue;
                /* under valgrind: N·K up to 1031·130 (threads still split the columns) */
                if (tu_valgrind() && NK[c][0] * NK[c][1] > 200000) continue;
                gshape s = {M, NK[c][0], NK[c][1], false, false, 1.0f, 0.0f, false,
                            ATTN_ACT_NONE, 0};
                s.tb = n & 1;
                s.ta = (n >> 1) % 3 == 0;
                s.act = (attn_act)((n >> 2) % NACTS);
                s.bias = n % 3 != 1;
                s.pad = n % 4 == 0 ? 5 : 0;
                s.beta = n % 5 == 0 ? 0.0f : n % 5 == 1 ? 1.0f : -0.5f;
                s.alpha = n % 7 == 3 ? -2.0f : 1.0f;
                compare_shape(&s, &rng, be);
            }
        }
    }
    /* GPT-2's generation shapes: the tied output projection x · wteᵀ and the MLP. */
    attn_set_num_threads(2);
    gshape lm = {1, 50257, 768, false, true, 1.0f, 0.0f, false, ATTN_ACT_NONE, 0};
    gshape fc = {1, 3072, 768, false, false, 1.0f, 0.0f, true, ATTN_ACT_GELU_TANH, 0};
    if (tu_valgrind()) { /* same layouts, a tenth of the size or less */
        lm.N = 5027;
        lm.K = 76;
        fc.K = 76;
    }
    compare_shape(&lm, &rng, be);
    compare_shape(&fc, &rng, be);
    attn_set_num_threads(0);
}
PER_SIMD_BACKEND(simd_vs_ref_small_m)

/* ---- against PyTorch ------------------------------------------------------------------------ */

typedef struct {
    int M, N, K, lda, ldb, ldc;
    bool ta, tb, sweep;
    float alpha, beta;
    attn_act act;
} pcase;

static bool parse_pcase(attn_st_file *f, int i, pcase *c) {
    char key[32];
    snprintf(key, sizeof key, "gemm.%d", i);
    const char *m = attn_st_metadata(f, key);
    if (!m) return false;
    json_error_t err;
    json_t *o = json_loads(m, 0, &err);
    if (!o) fail_msg("bad metadata %s: %s", key, err.text);
#define GETI(name) (int)json_integer_value(json_object_get(o, name))
    c->M = GETI("M");
    c->N = GETI("N");
    c->K = GETI("K");
    c->lda = GETI("lda");
    c->ldb = GETI("ldb");
    c->ldc = GETI("ldc");
    c->act = (attn_act)GETI("act");
#undef GETI
    c->ta = json_is_true(json_object_get(o, "trans_a"));
    c->tb = json_is_true(json_object_get(o, "trans_b"));
    c->sweep = json_is_true(json_object_get(o, "sweep"));
    c->alpha = (float)json_number_value(json_object_get(o, "alpha"));
    c->beta = (float)json_number_value(json_object_get(o, "beta"));
    json_decref(o);
    return true;
}

static float *load_t(attn_st_file *f, int i, const char *name, bool optional) {
    char key[64];
    snprintf(key, sizeof key, "gemm.%d.%s", i, name);
    if (optional && !attn_st_find(f, key)) return NULL;
    float *d = NULL;
    if (attn_st_load_f32(f, key, &d, NULL) != ATTN_STATUS_OK)
        fail_msg("loading %s: %s", key, attn_last_error());
    return d;
}

/* Elementwise: max |got − exp| / max(1, |exp|) <= tol. */
static void check_sweep(const char *what, const float *got, const float *want, size_t n,
                        double tol) {
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / fmax(1.0, fabs((double)want[i]));
        if (!(e <= worst)) {
            worst = e;
            at = i;
        }
    }
    bool ok = worst <= tol;
    printf("  %-44s max_err/max(1,|ref|)=%.2e %s\n", what, worst, ok ? "ok" : "FAIL");
    if (!ok) {
        printf("    worst at %zu: got %.9g, expected %.9g\n", at, (double)got[at],
               (double)want[at]);
        tu_failures++;
    }
}

/* Every case on backend be. */
static void against_pytorch(attn_backend be) {
    tu_need_backend(be);
    attn_st_file *f = NULL;
    const char *path = tu_ref_path("gemm.safetensors");
    if (attn_st_open(path, &f) != ATTN_STATUS_OK)
        fail_msg("%s: %s (run tools/ref_gemm.py first, or tests/run.sh)", path,
                 attn_last_error());
    int ncases = 0;
    pcase c;
    for (int i = 0; parse_pcase(f, i, &c); i++, ncases++) {
        /* Under valgrind the three cases of over 5e7 multiply-adds are left out (the same
         * paths run in the smaller ones and in test_simd_vs_ref_blocked). */
        if (tu_valgrind() && (double)c.M * c.N * c.K > 5e7) continue;
        float *A = load_t(f, i, "A", false), *B = load_t(f, i, "B", false);
        float *C0 = load_t(f, i, "C", false), *want = load_t(f, i, "expected", false);
        float *bias = load_t(f, i, "bias", true);
        size_t nc = (size_t)c.M * c.ldc;
        float *C = alloc_f(nc);
        assert_int_equal(attn_set_backend(be), ATTN_STATUS_OK);
        memcpy(C, C0, nc * sizeof(float));
        attn_status s = attn_gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, c.lda, B, c.ldb, c.beta,
                                  C, c.ldc, bias, c.act);
        if (s != ATTN_STATUS_OK) fail_msg("case %d: %s", i, attn_last_error());
        char what[160];
        snprintf(what, sizeof what, "torch %s #%d %dx%dx%d %c%c %s%s", attn_backend_name(be), i,
                 c.M, c.N, c.K, c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', bias ? "bias " : "",
                 ACT_NAMES[c.act]);
        if (c.sweep)
            check_sweep(what, C, want, nc, SWEEP_TOL);
        else
            tu_close(what, C, want, nc, RTOL, 0.0);
        attn_set_backend(ATTN_BACKEND_AUTO);
        attn_free(A);
        attn_free(B);
        attn_free(C0);
        attn_free(want);
        attn_free(bias);
        attn_free(C);
    }
    attn_st_close(f);
    if (ncases == 0) fail_msg("%s holds no cases", path);
}
PER_BACKEND(against_pytorch)

/* ---- the SiLU epilogue on every path ------------------------------------------------------ */

/* SiLU in float64 of a float pre-activation (the value the epilogue received). */
static double silu_f64(double v) {
    if (v == -INFINITY) return -0.0;
    if (v == INFINITY) return v;
    return v / (1.0 + exp(-v));
}

/* C = act(op(A)·op(B) + bias) computed once with act = NONE and once with SILU on the same
 * backend and path: the sums are identical (the activation is applied after them), so the
 * second must be silu(first) element by element. Checked for the blocked path (M > 8), the
 * small-M path (M <= 8), pre-packed B and, where the backend runs it, the BF16 GEMM (its
 * reference, gemm_bf16.c, under ATTN_BACKEND_REF; VDPBF16PS on avx512 with AVX512-BF16), each
 * with max |got − silu(pre)| / max(1, |silu(pre)|) <= 1e-6 (measured <= 1.5e-7). */
static void check_silu_of(const char *what, const float *pre, const float *got, size_t n) {
    float *want = alloc_f(n);
    for (size_t i = 0; i < n; i++) want[i] = (float)silu_f64(pre[i]);
    check_sweep(what, got, want, n, SWEEP_TOL);
    attn_free(want);
}

/* The products above at M = 37, 5, 1 (blocked and small-M paths, direct and pre-packed B) in
 * precision p on the current backend (bn: its name). Each test draws its data from the same
 * seed, so every backend and precision gets the same A, B and bias. */
static void silu_products(const char *bn, attn_precision p) {
    tu_rng rng = {0x51lu};
    static const int MS[] = {37, 5, 1};
    const int N = 70, K = 45;
    const char *pn = attn_precision_name(p);
    for (size_t mi = 0; mi < sizeof MS / sizeof MS[0]; mi++) {
        const int M = MS[mi];
        float *A = alloc_f((size_t)M * K), *B = alloc_f((size_t)N * K);
        float *bias = alloc_f(N), *pre = alloc_f((size_t)M * N), *C = alloc_f((size_t)M * N);
        /* pre-activations over about [-12, 12]: both tails and the minimum near -1.28 */
        tu_fill(&rng, A, (size_t)M * K, -1.0f, 1.0f);
        tu_fill(&rng, B, (size_t)N * K, -1.0f, 1.0f);
        tu_fill(&rng, bias, N, -4.0f, 4.0f);
        char what[96];
        assert_int_equal(attn_gemm_precision(false, true, M, N, K, 2.0f, A, K, B, K, 0.0f, pre, N,
                                             bias, ATTN_ACT_NONE, p),
                         ATTN_STATUS_OK);
        assert_int_equal(attn_gemm_precision(false, true, M, N, K, 2.0f, A, K, B, K, 0.0f, C, N,
                                             bias, ATTN_ACT_SILU, p),
                         ATTN_STATUS_OK);
        snprintf(what, sizeof what, "silu epilogue %s %s M=%d", pn, bn, M);
        check_silu_of(what, pre, C, (size_t)M * N);
        attn_gemm_packed_b pb;
        assert_int_equal(attn_gemm_pack_b_precision(true, K, N, B, K, p, &pb), ATTN_STATUS_OK);
        assert_int_equal(attn_gemm_packed(false, M, N, K, 2.0f, A, K, &pb, 0.0f, pre, N, bias,
                                          ATTN_ACT_NONE),
                         ATTN_STATUS_OK);
        assert_int_equal(attn_gemm_packed(false, M, N, K, 2.0f, A, K, &pb, 0.0f, C, N, bias,
                                          ATTN_ACT_SILU),
                         ATTN_STATUS_OK);
        attn_gemm_packed_b_free(&pb);
        snprintf(what, sizeof what, "silu epilogue packed %s %s M=%d", pn, bn, M);
        check_silu_of(what, pre, C, (size_t)M * N);
        attn_free(A), attn_free(B), attn_free(bias), attn_free(pre), attn_free(C);
    }
}

/* fp32 products and the extremes on backend be. */
static void silu_epilogue(attn_backend be) {
    tu_need_backend(be);
    assert_int_equal(attn_set_backend(be), ATTN_STATUS_OK);
    const char *bn = attn_backend_name(be);
    silu_products(bn, ATTN_PRECISION_F32);
    /* Extremes, through K = 0 and beta = 1 (C = silu(C)) on the blocked (9 rows) and the
     * small-M (1 row) paths: −inf gives −0 (PyTorch: NaN), +inf gives +inf, NaN stays
     * NaN, and no finite input gives NaN or inf. */
    enum { NX = 13 };
    const float xs[NX] = {-INFINITY, -1e30f, -100.0f, -90.0f, -0.0f, 0.0f, 1e-30f,
                          90.0f,     1e30f,  INFINITY, 3e38f, -3e38f, NAN};
    for (int M = 1; M <= 9; M += 8) {
        float C[9 * NX];
        for (int i = 0; i < M * NX; i++) C[i] = xs[i % NX];
        assert_int_equal(attn_gemm(false, false, M, NX, 0, 1.0f, NULL, 1, NULL, NX, 1.0f, C, NX,
                                   NULL, ATTN_ACT_SILU),
                         ATTN_STATUS_OK);
        int bad = 0;
        for (int i = 0; i < M * NX; i++) {
            const double x = xs[i % NX], w = silu_f64(x), g = C[i];
            int ok = isnan(x)    ? isnan(g)
                     : isinf(w) ? g == w
                                : isfinite(g) && fabs(g - w) <= 1e-5 * fabs(w) + 1e-40;
            if (!ok) {
                printf("  silu(%g) = %.9g, expected %.9g FAIL\n", x, g, w);
                bad++;
            }
        }
        printf("  silu epilogue extremes %s M=%d %s\n", bn, M, bad ? "FAIL" : "ok");
        tu_failures += bad;
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(silu_epilogue)

/* The bfloat16 products on backend be: the ref backend's reference (gemm_bf16.c) always runs;
 * avx512 needs AVX512-BF16 (a hardware skip without it); avx2 has no BF16 GEMM. */
static void silu_epilogue_bf16(attn_backend be) {
    tu_need_backend(be);
    assert_int_equal(attn_set_backend(be), ATTN_STATUS_OK);
    tu_need_bf16();
    silu_products(attn_backend_name(be), ATTN_PRECISION_BF16);
    attn_set_backend(ATTN_BACKEND_AUTO);
}

static void test_silu_epilogue_bf16_ref(void **state) {
    (void)state;
    silu_epilogue_bf16(ATTN_BACKEND_REF);
}

static void test_silu_epilogue_bf16_avx512(void **state) {
    (void)state;
    silu_epilogue_bf16(ATTN_BACKEND_AVX512);
}

/* ---- bad arguments ------------------------------------------------------------------------ */

#define EXPECT_INVALID(call)                                                                     \
    do {                                                                                         \
        attn_clear_error();                                                                      \
        assert_int_equal((call), ATTN_STATUS_INVALID_ARGUMENT);                                  \
        assert_true(attn_last_error()[0] != '\0');                                               \
        printf("  rejected: %s\n", attn_last_error());                                           \
    } while (0)

static void test_bad_arguments(void **state) {
    (void)state;
    float A[64] = {0}, B[64] = {0}, C[64] = {0};
    EXPECT_INVALID(attn_gemm(false, false, -1, 4, 4, 1, A, 4, B, 4, 0, C, 4, NULL, ATTN_ACT_NONE));
    EXPECT_INVALID(attn_gemm(false, false, 4, -1, 4, 1, A, 4, B, 4, 0, C, 4, NULL, ATTN_ACT_NONE));
    EXPECT_INVALID(attn_gemm(false, false, 4, 4, -1, 1, A, 4, B, 4, 0, C, 4, NULL, ATTN_ACT_NONE));
    /* Leading dimensions below the stored row length, per transpose. */
    EXPECT_INVALID(attn_gemm(false, false, 4, 4, 5, 1, A, 4, B, 4, 0, C, 4, NULL, ATTN_ACT_NONE));
    EXPECT_INVALID(attn_gemm(true, false, 5, 4, 4, 1, A, 4, B, 4, 0, C, 4, NULL, ATTN_ACT_NONE));
    EXPECT_INVALID(attn_gemm(false, false, 4, 5, 4, 1, A, 4, B, 4, 0, C, 5, NULL, ATTN_ACT_NONE));
    EXPECT_INVALID(attn_gemm(false, true, 4, 4, 5, 1, A, 5, B, 4, 0, C, 4, NULL, ATTN_ACT_NONE));
    EXPECT_INVALID(attn_gemm(false, false, 4, 5, 4, 1, A, 4, B, 5, 0, C, 4, NULL, ATTN_ACT_NONE));
    EXPECT_INVALID(attn_gemm(false, false, 4, 4, 4, 1, A, 0, B, 4, 0, C, 4, NULL, ATTN_ACT_NONE));
    EXPECT_INVALID(
        attn_gemm(false, false, 4, 4, 4, 1, A, 4, B, 4, 0, C, 4, NULL, (attn_act)(-1)));
    const attn_act past_last = (attn_act)(ATTN_ACT_SILU + 1);
    EXPECT_INVALID(attn_gemm(false, false, 4, 4, 4, 1, A, 4, B, 4, 0, C, 4, NULL, past_last));
    const attn_act none = ATTN_ACT_NONE;
    EXPECT_INVALID(attn_gemm(false, false, 4, 4, 4, 1, NULL, 4, B, 4, 0, C, 4, NULL, none));
    EXPECT_INVALID(attn_gemm(false, false, 4, 4, 4, 1, A, 4, NULL, 4, 0, C, 4, NULL, none));
    EXPECT_INVALID(attn_gemm(false, false, 4, 4, 4, 1, A, 4, B, 4, 0, NULL, 4, NULL, none));
    /* Empty products are fine and touch nothing. */
    C[0] = 42.0f;
    assert_int_equal(attn_gemm(false, false, 0, 4, 4, 1, A, 4, B, 4, 0, C, 4, NULL, ATTN_ACT_NONE),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_gemm(false, false, 4, 0, 4, 1, A, 4, B, 1, 0, C, 1, NULL, ATTN_ACT_NONE),
                     ATTN_STATUS_OK);
    assert_true(C[0] == 42.0f);
    /* K = 0 needs no A or B. */
    assert_int_equal(attn_gemm(false, false, 2, 2, 0, 1, NULL, 1, NULL, 2, 0, C, 2, NULL,
                               ATTN_ACT_NONE),
                     ATTN_STATUS_OK);
    assert_true(C[0] == 0.0f && C[3] == 0.0f);
}

/* attn_kernels_multiply_adds: M·N·K per product that runs (f32, packed, quantized); rejected
 * calls and empty products add nothing. */
static void test_multiply_adds(void **state) {
    (void)state;
    enum { M = 3, N = 5, K = 64 };
    float A[M * K], B[N * K], C[M * N];
    for (int i = 0; i < M * K; i++) A[i] = 0.01f * (float)(i % 7);
    for (int i = 0; i < N * K; i++) B[i] = 0.02f * (float)(i % 5);
    uint64_t m0 = attn_kernels_multiply_adds();
    assert_int_equal(attn_gemm(false, true, M, N, K, 1, A, K, B, K, 0, C, N, NULL, ATTN_ACT_NONE),
                     ATTN_STATUS_OK);
    assert_true(attn_kernels_multiply_adds() - m0 == (uint64_t)M * N * K);
    m0 = attn_kernels_multiply_adds();
    assert_int_equal(attn_gemm(false, true, -1, N, K, 1, A, K, B, K, 0, C, N, NULL, ATTN_ACT_NONE),
                     ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(attn_gemm(false, true, 0, N, K, 1, A, K, B, K, 0, C, N, NULL, ATTN_ACT_NONE),
                     ATTN_STATUS_OK);
    assert_true(attn_kernels_multiply_adds() == m0);
    attn_gemm_packed_b P;
    assert_int_equal(attn_gemm_pack_b(true, K, N, B, K, &P), ATTN_STATUS_OK);
    assert_true(attn_kernels_multiply_adds() == m0); /* packing is not a product */
    assert_int_equal(attn_gemm_packed(false, 2, N, K, 1, A, K, &P, 0, C, N, NULL, ATTN_ACT_NONE),
                     ATTN_STATUS_OK);
    assert_true(attn_kernels_multiply_adds() - m0 == (uint64_t)2 * N * K);
    attn_gemm_packed_b_free(&P);
    size_t rb = 0;
    assert_int_equal(attn_quant_row_bytes(ATTN_QTYPE_Q8_0, K, &rb), ATTN_STATUS_OK);
    unsigned char *W = malloc((size_t)N * rb);
    assert_non_null(W);
    for (int n = 0; n < N; n++)
        assert_int_equal(attn_quant_quantize(ATTN_QTYPE_Q8_0, K, B + (size_t)n * K, W + n * rb),
                         ATTN_STATUS_OK);
    m0 = attn_kernels_multiply_adds();
    assert_int_equal(attn_quant_gemm(M, N, K, A, K, ATTN_QTYPE_Q8_0, W, 0, C, N, NULL,
                                     ATTN_ACT_NONE, ATTN_QUANT_ACT_F32),
                     ATTN_STATUS_OK);
    assert_true(attn_kernels_multiply_adds() - m0 == (uint64_t)M * N * K);
    free(W);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multiply_adds),
        cmocka_unit_test(test_simd_vs_ref_small_avx2),
        cmocka_unit_test(test_simd_vs_ref_small_avx512),
        cmocka_unit_test(test_simd_vs_ref_variants_avx2),
        cmocka_unit_test(test_simd_vs_ref_variants_avx512),
        cmocka_unit_test(test_simd_vs_ref_blocked_avx2),
        cmocka_unit_test(test_simd_vs_ref_blocked_avx512),
        cmocka_unit_test(test_simd_vs_ref_every_row_count_avx2),
        cmocka_unit_test(test_simd_vs_ref_every_row_count_avx512),
        cmocka_unit_test(test_simd_vs_ref_small_m_avx2),
        cmocka_unit_test(test_simd_vs_ref_small_m_avx512),
        cmocka_unit_test(test_silu_epilogue_ref),
        cmocka_unit_test(test_silu_epilogue_avx2),
        cmocka_unit_test(test_silu_epilogue_avx512),
        cmocka_unit_test(test_silu_epilogue_bf16_ref),
        cmocka_unit_test(test_silu_epilogue_bf16_avx512),
        cmocka_unit_test(test_against_pytorch_ref),
        cmocka_unit_test(test_against_pytorch_avx2),
        cmocka_unit_test(test_against_pytorch_avx512),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

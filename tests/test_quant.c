/* test_quant.c — the quantized weight types (attn_quant.h) and the linear map on them
 * (attn_nn.h).
 *
 * Against the gguf Python package (tools/ref_quant.py, build/ref/quant.safetensors):
 *   - dequantization bit for bit (NaN = any NaN) for every type: random blocks, blocks whose
 *     scales hold every binary16 edge case, blocks whose scales are extreme but finite (exact
 *     comparison), and all 65536 binary16 / bfloat16 patterns;
 *   - quantization byte for byte for the types the package quantizes (f16, bf16, q8_0, q4_0,
 *     q4_1, q5_0, q5_1), on rows of varied scale (ties, zeros, overflow to inf, subnormals);
 *   - products act(x · dequantize(W)ᵀ + bias + beta·y) computed by NumPy in float64.
 * The k-quant quantizers against ggml's reference ones (quantize_row_q{4,5,6}_K_ref compiled with
 * -ffp-contract=off, i.e. strict float32): FNV-1a hashes of their output on kq_input's rows,
 * recorded here; and their round-trip error.
 * Tolerances (tu_close: max|err| <= rtol · max|expected|):
 *   ref backend, F32 SIMD paths vs NumPy: 2e-6 (float32 sums over K <= 768 against float64);
 *   SIMD F32 activations vs the ref backend: 2e-6, same reason;
 *   SIMD Q8 activations (M <= 8) vs the ref backend: 2e-2; measured ~5e-3 (the activations'
 *   rounding to 8 bits: see attn_quant.h). Each check prints its measured error.
 *   SIMD Q8 activations vs float64 element by element: within the rounding bound
 *   Σ_b (d_b / 2) · Σ_{k∈b} |w_k| (q8_activation_bound; prints the error relative to Σ|x·w|).
 * attn_nn blocks (gated FFN, GQA attention) on quantized maps vs the same on dequantized float32
 * weights: 1e-5 (F32 activations), 2e-2 (Q8 activations, M = 1).
 * Exact: the blocked path (M > 8) equals attn_gemm on the dequantized weights bit for bit where
 * both cut K the same way (K <= 384 here), 1 and 2 threads give the same bits, beta == 0 never
 * reads y, ldy padding is never written. */
#include "tu.h"

#include "attn_io.h"
#include "attn_nn.h"
#include "attn_quant.h"

#include <jansson.h>
#include <string.h>

static const attn_qtype ALL[] = {ATTN_QTYPE_F16,  ATTN_QTYPE_BF16, ATTN_QTYPE_Q8_0,
                                 ATTN_QTYPE_Q4_0, ATTN_QTYPE_Q4_1, ATTN_QTYPE_Q5_0,
                                 ATTN_QTYPE_Q5_1, ATTN_QTYPE_Q4_K, ATTN_QTYPE_Q5_K,
                                 ATTN_QTYPE_Q6_K};
#define NALL (int)(sizeof ALL / sizeof ALL[0])

#define RTOL_F32 2e-6
#define RTOL_Q8 2e-2

static void *xalloc(size_t n) {
    void *p = attn_alloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

/* ---- the reference file ------------------------------------------------------------------- */

typedef struct {
    attn_st_file *f;
    char *bytes; /* the whole file: the U8 tensors are read from it directly */
    size_t n;
} ref_file;

static ref_file ref_open(void) {
    ref_file r = {NULL, NULL, 0};
    const char *path = tu_ref_path("quant.safetensors");
    if (attn_st_open(path, &r.f) != ATTN_STATUS_OK)
        fail_msg("%s: %s (run tools/ref_quant.py first, or tests/run.sh)", path,
                 attn_last_error());
    r.bytes = tu_read_all(path, &r.n);
    assert_non_null(r.bytes);
    return r;
}

static void ref_close(ref_file *r) {
    attn_st_close(r->f);
    free(r->bytes);
}

/* A tensor's raw bytes (NULL when absent) and its shape. */
static const void *ref_raw(const ref_file *r, const char *name, int64_t *rows, int64_t *cols) {
    const attn_st_tensor *t = attn_st_find(r->f, name);
    if (!t) return NULL;
    if (t->offset + t->nbytes > r->n) fail_msg("%s: out of the file", name);
    if (rows) *rows = t->ndim > 0 ? t->shape[0] : 1;
    if (cols) *cols = t->ndim > 1 ? t->shape[1] : 1;
    return r->bytes + t->offset;
}

static float *ref_f32(const ref_file *r, const char *name) {
    float *d = NULL;
    if (attn_st_load_f32(r->f, name, &d, NULL) != ATTN_STATUS_OK)
        fail_msg("loading %s: %s", name, attn_last_error());
    return d;
}

/* ---- names and sizes ------------------------------------------------------------------------ */

static void test_types(void **state) {
    (void)state;
    static const struct {
        attn_qtype t;
        const char *name;
        int elems;
        size_t bytes;
    } want[] = {{ATTN_QTYPE_F32, "f32", 1, 4},      {ATTN_QTYPE_F16, "f16", 1, 2},
                {ATTN_QTYPE_BF16, "bf16", 1, 2},    {ATTN_QTYPE_Q8_0, "q8_0", 32, 34},
                {ATTN_QTYPE_Q4_0, "q4_0", 32, 18},  {ATTN_QTYPE_Q4_1, "q4_1", 32, 20},
                {ATTN_QTYPE_Q5_0, "q5_0", 32, 22},  {ATTN_QTYPE_Q5_1, "q5_1", 32, 24},
                {ATTN_QTYPE_Q4_K, "q4_K", 256, 144}, {ATTN_QTYPE_Q5_K, "q5_K", 256, 176},
                {ATTN_QTYPE_Q6_K, "q6_K", 256, 210}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(attn_quant_type_name(want[i].t), want[i].name);
        assert_int_equal(attn_quant_block_elems(want[i].t), want[i].elems);
        assert_int_equal(attn_quant_block_bytes(want[i].t), want[i].bytes);
        assert_true(attn_quant_type_known((uint32_t)want[i].t));
        attn_qtype p;
        assert_int_equal(attn_quant_type_parse(want[i].name, &p), ATTN_STATUS_OK);
        assert_int_equal(p, want[i].t);
    }
    attn_qtype p;
    assert_int_equal(attn_quant_type_parse("Q4_K", &p), ATTN_STATUS_OK);
    assert_int_equal(p, ATTN_QTYPE_Q4_K);
    tu_expect_fail(attn_quant_type_parse("q4_2", &p), ATTN_STATUS_INVALID_ARGUMENT, "q4_2",
                   "expected");
    for (uint32_t id = 0; id < 64; id++)
        if (!attn_quant_type_known(id)) {
            assert_string_equal(attn_quant_type_name((attn_qtype)id), "?");
            assert_int_equal(attn_quant_block_elems((attn_qtype)id), 0);
        }
    assert_false(attn_quant_type_known(9));   /* Q8_1: not a weight type */
    assert_false(attn_quant_type_known(10));  /* Q2_K */
    size_t rb;
    assert_int_equal(attn_quant_row_bytes(ATTN_QTYPE_Q4_1, 576, &rb), ATTN_STATUS_OK);
    assert_int_equal(rb, 18 * 20);
    assert_int_equal(attn_quant_row_bytes(ATTN_QTYPE_Q6_K, 768, &rb), ATTN_STATUS_OK);
    assert_int_equal(rb, 3 * 210);
    tu_expect_fail(attn_quant_row_bytes(ATTN_QTYPE_Q4_K, 576, &rb), ATTN_STATUS_INVALID_ARGUMENT,
                   "q4_K", "576");
    tu_expect_fail(attn_quant_row_bytes(ATTN_QTYPE_Q8_0, 100, &rb), ATTN_STATUS_INVALID_ARGUMENT,
                   "q8_0", "block of 32");
    tu_expect_fail(attn_quant_row_bytes(ATTN_QTYPE_Q8_0, -32, &rb), ATTN_STATUS_INVALID_ARGUMENT,
                   "q8_0", "-32");
    tu_expect_fail(attn_quant_row_bytes((attn_qtype)10, 256, &rb), ATTN_STATUS_INVALID_ARGUMENT,
                   "unknown", "10");
    tu_expect_fail(attn_quant_row_bytes(ATTN_QTYPE_F32, INT64_MAX, &rb), ATTN_STATUS_TOO_LARGE,
                   "f32", "too large");
}

/* ---- against gguf.quants -------------------------------------------------------------------- */

static bool same_float(float a, float b) {
    if (a != a || b != b) return a != a && b != b;
    return memcmp(&a, &b, sizeof a) == 0;
}

static void test_dequantize_gguf(void **state) {
    (void)state;
    ref_file r = ref_open();
    for (int ti = 0; ti < NALL; ti++) {
        const attn_qtype t = ALL[ti];
        char key[64];
        snprintf(key, sizeof key, "deq.%s.blocks", attn_quant_type_name(t));
        int64_t nb = 0, bytes = 0;
        const void *blocks = ref_raw(&r, key, &nb, &bytes);
        if (!blocks) fail_msg("%s missing", key);
        assert_int_equal((size_t)bytes, attn_quant_block_bytes(t));
        snprintf(key, sizeof key, "deq.%s.values", attn_quant_type_name(t));
        float *want = ref_f32(&r, key);
        const int64_t n = nb * attn_quant_block_elems(t);
        float *got = xalloc((size_t)n * sizeof(float));
        assert_int_equal(attn_quant_dequantize(t, n, blocks, got), ATTN_STATUS_OK);
        int64_t bad = 0, first = -1, nan = 0;
        for (int64_t i = 0; i < n; i++) {
            if (want[i] != want[i]) nan++;
            if (!same_float(got[i], want[i])) {
                if (first < 0) first = i;
                bad++;
            }
        }
        printf("  dequantize %-5s %6lld blocks (%lld values, %lld NaN): %lld differ %s\n",
               attn_quant_type_name(t), (long long)nb, (long long)n, (long long)nan,
               (long long)bad, bad ? "FAIL" : "ok");
        if (bad) {
            printf("    first at %lld: got %.9g, gguf %.9g\n", (long long)first,
                   (double)got[first], (double)want[first]);
            tu_failures++;
        }
        attn_free(want);
        attn_free(got);
    }
    ref_close(&r);
}

static void test_quantize_gguf(void **state) {
    (void)state;
    ref_file r = ref_open();
    int types = 0;
    for (int ti = 0; ti < NALL; ti++) {
        const attn_qtype t = ALL[ti];
        char key[64];
        snprintf(key, sizeof key, "quant.%s.x", attn_quant_type_name(t));
        if (!attn_st_find(r.f, key)) continue; /* gguf cannot quantize it */
        types++;
        float *x = ref_f32(&r, key);
        snprintf(key, sizeof key, "quant.%s.bytes", attn_quant_type_name(t));
        int64_t rows = 0, rbytes = 0;
        const unsigned char *want = ref_raw(&r, key, &rows, &rbytes);
        const int64_t cols = 256;
        size_t rb;
        assert_int_equal(attn_quant_row_bytes(t, cols, &rb), ATTN_STATUS_OK);
        assert_int_equal(rb, (size_t)rbytes);
        unsigned char *got = xalloc((size_t)rows * rb);
        assert_int_equal(attn_quant_quantize(t, rows * cols, x, got), ATTN_STATUS_OK);
        int bad_rows = 0;
        for (int64_t i = 0; i < rows; i++)
            if (memcmp(got + i * rb, want + i * rb, rb)) {
                size_t at = 0;
                while (got[i * rb + at] == want[i * rb + at]) at++;
                if (!bad_rows)
                    printf("    row %lld first differs at byte %zu: %u, gguf %u\n", (long long)i,
                           at, got[i * rb + at], want[i * rb + at]);
                bad_rows++;
            }
        printf("  quantize %-5s %lld rows of 256: %d differ %s\n", attn_quant_type_name(t),
               (long long)rows, bad_rows, bad_rows ? "FAIL" : "ok");
        if (bad_rows) tu_failures++;
        attn_free(x);
        attn_free(got);
    }
    assert_int_equal(types, 7);
    ref_close(&r);
}

/* ---- the k-quant quantizers ------------------------------------------------------------------ */

/* The inputs of the recorded hashes: 6 rows of 512 (outliers, one-sided, zero sub-blocks). The
 * same generator ran in a program around ggml's quantize_row_q{4,5,6}_K_ref. */
static uint64_t kq_state;
static double kq_u(void) {
    kq_state ^= kq_state << 13;
    kq_state ^= kq_state >> 7;
    kq_state ^= kq_state << 17;
    return (double)(kq_state >> 11) * (1.0 / 9007199254740992.0);
}
static void kq_input(float *x, int rows, int n) {
    kq_state = 0x2545F4914F6CDD1Dull;
    for (int r = 0; r < rows; r++) {
        const double scale = r == 0   ? 1.0
                             : r == 1 ? 1e-3
                             : r == 2 ? 40.0
                             : r == 3 ? 1.0
                             : r == 4 ? 0.02
                                      : 7.0;
        for (int i = 0; i < n; i++) {
            double v = (kq_u() + kq_u() + kq_u() - 1.5) * 2.0;
            if (r == 3 && i % 37 == 0) v *= 30.0;
            if (r == 4) v = fabs(v);
            if (r == 5 && (i / 32) % 3 == 0) v = 0.0;
            x[(size_t)r * n + i] = (float)(v * scale);
        }
    }
}
static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void test_kquant_quantize(void **state) {
    (void)state;
    static const struct {
        attn_qtype t;
        uint64_t ggml; /* quantize_row_*_ref, strict float32 (gcc -ffp-contract=off) */
        double max_rel_rms; /* round-trip bound, per row: rms(err) / rms(x) */
    } cases[] = {/* worst rows measured (the same bytes as ggml's): 0.090, 0.052, 0.038 — the last
                  * on row 3, whose 30x outliers every 37 elements set the scale of the 16-element
                  * sub-blocks they fall in */
                 {ATTN_QTYPE_Q4_K, 0x9467f08859705440ull, 0.12},
                 {ATTN_QTYPE_Q5_K, 0x314a1c620aefc568ull, 0.07},
                 {ATTN_QTYPE_Q6_K, 0x74654cafbd9813d0ull, 0.05}};
    enum { ROWS = 6, N = 512 };
    static float x[ROWS * N], y[ROWS * N];
    kq_input(x, ROWS, N);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const attn_qtype t = cases[c].t;
        size_t rb;
        assert_int_equal(attn_quant_row_bytes(t, N, &rb), ATTN_STATUS_OK);
        unsigned char *q = xalloc(ROWS * rb);
        assert_int_equal(attn_quant_quantize(t, ROWS * N, x, q), ATTN_STATUS_OK);
        const uint64_t h = fnv1a(q, ROWS * rb);
        const bool same = h == cases[c].ggml;
        printf("  %-5s quantize: hash %016llx, ggml's reference %016llx %s\n",
               attn_quant_type_name(t), (unsigned long long)h, (unsigned long long)cases[c].ggml,
               same ? "ok" : "FAIL");
        if (!same) tu_failures++;
        assert_int_equal(attn_quant_dequantize(t, ROWS * N, q, y), ATTN_STATUS_OK);
        double worst = 0;
        for (int r = 0; r < ROWS; r++) {
            double e2 = 0, x2 = 0;
            for (int i = 0; i < N; i++) {
                const double d = (double)y[r * N + i] - x[r * N + i];
                e2 += d * d;
                x2 += (double)x[r * N + i] * x[r * N + i];
            }
            const double rel = sqrt(e2 / x2);
            worst = fmax(worst, rel);
            if (!(rel <= cases[c].max_rel_rms)) {
                printf("    row %d: relative rms error %.3g > %.3g FAIL\n", r, rel,
                       cases[c].max_rel_rms);
                tu_failures++;
            }
        }
        printf("  %-5s round trip: worst row's rms(error) / rms(x) %.3g (bound %.3g)\n",
               attn_quant_type_name(t), worst, cases[c].max_rel_rms);
        attn_free(q);
    }
}

/* ---- products ------------------------------------------------------------------------------- */

/* Use backend be for the rest of the test, or skip it (a hardware skip). */
static void use_backend(attn_backend be) {
    tu_need_backend(be);
    assert_int_equal(attn_set_backend(be), ATTN_STATUS_OK);
}

#define PER_BACKEND(name)                                                                        \
    static void test_##name##_ref(void **state) {                                                \
        (void)state;                                                                             \
        name(ATTN_BACKEND_REF);                                                                  \
    }                                                                                            \
    PER_SIMD_BACKEND(name)
#define PER_SIMD_BACKEND(name)                                                                   \
    static void test_##name##_avx2(void **state) {                                               \
        (void)state;                                                                             \
        name(ATTN_BACKEND_AVX2);                                                                 \
    }                                                                                            \
    static void test_##name##_avx512(void **state) {                                             \
        (void)state;                                                                             \
        name(ATTN_BACKEND_AVX512);                                                               \
    }

/* The product cases of ref_quant.py, in both activation modes. */
static void products_gguf(attn_backend be) {
    use_backend(be);
    ref_file r = ref_open();
    int ncases = 0;
    for (int i = 0;; i++, ncases++) {
        char key[64];
        snprintf(key, sizeof key, "prod.%d", i);
        const char *m = attn_st_metadata(r.f, key);
        if (!m) break;
        json_error_t err;
        json_t *o = json_loads(m, 0, &err);
        assert_non_null(o);
        attn_qtype t;
        assert_int_equal(
            attn_quant_type_parse(json_string_value(json_object_get(o, "type")), &t),
            ATTN_STATUS_OK);
        const int M = (int)json_integer_value(json_object_get(o, "M"));
        const int N = (int)json_integer_value(json_object_get(o, "N"));
        const int K = (int)json_integer_value(json_object_get(o, "K"));
        const float beta = (float)json_number_value(json_object_get(o, "beta"));
        const attn_act act = (attn_act)json_integer_value(json_object_get(o, "act"));
        json_decref(o);
        char name[64];
#define LOAD(var, what) (snprintf(name, sizeof name, "prod.%d.%s", i, what), var)
        const void *w = LOAD(ref_raw(&r, name, NULL, NULL), "w");
        float *x = LOAD(ref_f32(&r, name), "x"), *y0 = LOAD(ref_f32(&r, name), "y0");
        float *want = LOAD(ref_f32(&r, name), "expected");
        float *bias = LOAD(attn_st_find(r.f, name) ? ref_f32(&r, name) : NULL, "bias");
#undef LOAD
        float *y = xalloc((size_t)M * N * sizeof(float));
        for (int q8 = 0; q8 < 2; q8++) {
            memcpy(y, y0, (size_t)M * N * sizeof(float));
            const attn_status s = attn_quant_gemm(M, N, K, x, K, t, w, beta, y, N, bias, act,
                                                  q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32);
            if (s) fail_msg("prod.%d: %s", i, attn_last_error());
            /* Q8 activations change the numbers only on the SIMD small-M path of block types. */
            const bool approx = q8 && be != ATTN_BACKEND_REF && M <= 8 &&
                                attn_quant_block_elems(t) > 1;
            char what[128];
            snprintf(what, sizeof what, "%s numpy #%d %s %dx%dx%d %s", attn_backend_name(be), i,
                     attn_quant_type_name(t), M, N, K, q8 ? "q8act" : "f32act");
            tu_close(what, y, want, (size_t)M * N, approx ? RTOL_Q8 : RTOL_F32, 1e-6);
        }
        attn_free(x);
        attn_free(y0);
        attn_free(want);
        attn_free(bias);
        attn_free(y);
    }
    assert_true(ncases >= 10);
    ref_close(&r);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(products_gguf)

/* Random weights of type t (N, K), quantized from uniform floats; returns the blocks. */
static void *random_weights(attn_qtype t, int N, int K, tu_rng *rng) {
    float *f = xalloc((size_t)N * K * sizeof(float));
    tu_fill(rng, f, (size_t)N * K, -1.0f, 1.0f);
    size_t rb;
    assert_int_equal(attn_quant_row_bytes(t, K, &rb), ATTN_STATUS_OK);
    void *w = xalloc((size_t)N * rb);
    assert_int_equal(attn_quant_quantize(t, (int64_t)N * K, f, w), ATTN_STATUS_OK);
    attn_free(f);
    return w;
}

/* Every type, M from 1 to 512, both activation modes: the SIMD backend against the reference
 * backend, with bias, an activation and beta on some. Prints the largest Q8 error seen. */
static void simd_vs_ref(attn_backend be) {
    tu_need_backend(be);
    static const int Ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33, 64, 512};
    tu_rng rng = {0x1234abcd5678ef01ull};
    double worst_q8 = 0;
    for (int ti = 0; ti < NALL; ti++) {
        const attn_qtype t = ALL[ti];
        const int be_elems = attn_quant_block_elems(t);
        const int K = be_elems == 256 ? 512 : be_elems == 32 ? 320 : 200, N = 37;
        void *w = random_weights(t, N, K, &rng);
        float *x = xalloc((size_t)512 * K * sizeof(float));
        tu_fill(&rng, x, (size_t)512 * K, -1.0f, 1.0f);
        float bias[37];
        tu_fill(&rng, bias, 37, -0.5f, 0.5f);
        float *want = xalloc((size_t)512 * N * sizeof(float));
        float *got = xalloc((size_t)512 * N * sizeof(float));
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            const int M = Ms[mi];
            if (M == 512 && tu_valgrind()) continue; /* 64 rows cover the blocked path */
            const attn_act act = (attn_act)((mi + ti) % 5);
            const float beta = mi % 3 == 0 ? 0.5f : 0.0f;
            const float *bp = mi % 2 ? bias : NULL;
            for (int q8 = 0; q8 < 2; q8++) {
                const attn_quant_act qa = q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
                for (int i = 0; i < M * N; i++) want[i] = got[i] = (float)(i % 7) * 0.25f;
                assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
                assert_int_equal(attn_quant_gemm(M, N, K, x, K, t, w, beta, want, N, bp, act, qa),
                                 ATTN_STATUS_OK);
                assert_int_equal(attn_set_backend(be), ATTN_STATUS_OK);
                assert_int_equal(attn_quant_gemm(M, N, K, x, K, t, w, beta, got, N, bp, act, qa),
                                 ATTN_STATUS_OK);
                const bool approx = q8 && M <= 8 && be_elems > 1;
                char what[96];
                snprintf(what, sizeof what, "%s %s M=%d %s vs ref", attn_backend_name(be),
                         attn_quant_type_name(t), M, q8 ? "q8act" : "f32act");
                tu_close(what, got, want, (size_t)M * N, approx ? RTOL_Q8 : RTOL_F32, 1e-6);
                if (approx) {
                    double e = 0, s = 0;
                    for (int i = 0; i < M * N; i++) {
                        e = fmax(e, fabs((double)got[i] - want[i]));
                        s = fmax(s, fabs((double)want[i]));
                    }
                    worst_q8 = fmax(worst_q8, e / s);
                }
            }
        }
        attn_free(w);
        attn_free(x);
        attn_free(want);
        attn_free(got);
    }
    printf("  %s: largest Q8-activation error, relative to max|y|: %.2e\n", attn_backend_name(be),
           worst_q8);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_SIMD_BACKEND(simd_vs_ref)

/* Q8 activations, proved element by element (M <= 8, every block type): the kernel computes
 * exactly x̃ · wᵀ where x̃ is x rounded per block b of 32 to codes of step d_b = max_b|x| / 127, so
 *   |y − x · wᵀ| <= Σ_b (d_b / 2)·(1 + 1e-4) · Σ_{k∈b} |w_k|  +  1e-5 · Σ_k |x_k · w_k|
 * (the rounding of x/d_b through a float reciprocal, then float32 sums), against x · wᵀ in
 * float64 on attn_quant_dequantize's weights (bit-identical to gguf's). Two kinds of x: uniform
 * in [-1, 1], and the same with one outlier (×20) per 32 (activations as LLMs have them). Prints
 * the error relative to Σ_k |x_k · w_k| (attn_quant.h's stated figures: worst and mean). */
static void q8_activation_bound(attn_backend be) {
    use_backend(be);
    tu_rng rng = {0x0badc0ffee0ddf00ull};
    const int N = 45, Ms[] = {1, 3, 8};
    double worst_rel[2] = {0, 0}, sum_rel[2] = {0, 0};
    long count[2] = {0, 0};
    for (int ti = 0; ti < NALL; ti++) {
        const attn_qtype t = ALL[ti];
        if (attn_quant_block_elems(t) == 1) continue; /* F16/BF16: no Q8 mode */
        const int K = attn_quant_block_elems(t) == 256 ? 768 : 416;
        void *w = random_weights(t, N, K, &rng);
        float *wd = xalloc((size_t)N * K * sizeof(float)), *x = xalloc((size_t)8 * K * sizeof(float));
        float y[8 * 45];
        assert_int_equal(attn_quant_dequantize(t, (int64_t)N * K, w, wd), ATTN_STATUS_OK);
        for (int kind = 0; kind < 2; kind++) {
            tu_fill(&rng, x, (size_t)8 * K, -1.0f, 1.0f);
            if (kind)
                for (int i = 0; i < 8 * K; i += 32) x[i + (int)(tu_uniform(&rng, 0, 31.99f))] *= 20.0f;
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                const int M = Ms[mi];
                assert_int_equal(attn_quant_gemm(M, N, K, x, K, t, w, 0.0f, y, N, NULL,
                                                 ATTN_ACT_NONE, ATTN_QUANT_ACT_Q8),
                                 ATTN_STATUS_OK);
                int bad = 0;
                for (int m = 0; m < M; m++)
                    for (int n = 0; n < N; n++) {
                        const float *xr = x + (size_t)m * K, *wr = wd + (size_t)n * K;
                        double exact = 0, mag = 0, bound = 0;
                        for (int b = 0; b < K; b += 32) {
                            double amax = 0, wabs = 0;
                            for (int k = b; k < b + 32; k++) {
                                exact += (double)xr[k] * wr[k];
                                mag += fabs((double)xr[k] * wr[k]);
                                amax = fmax(amax, fabs((double)xr[k]));
                                wabs += fabs((double)wr[k]);
                            }
                            bound += amax / 254.0 * (1.0 + 1e-4) * wabs;
                        }
                        const double err = fabs((double)y[m * N + n] - exact);
                        if (!(err <= bound + 1e-5 * mag)) {
                            if (!bad)
                                printf("  %s %s M=%d row %d col %d: error %.3g > bound %.3g FAIL\n",
                                       attn_backend_name(be), attn_quant_type_name(t), M, m, n,
                                       err, bound + 1e-5 * mag);
                            bad++;
                        }
                        if (mag > 0) {
                            worst_rel[kind] = fmax(worst_rel[kind], err / mag);
                            sum_rel[kind] += err / mag;
                            count[kind]++;
                        }
                    }
                if (bad) tu_failures++;
            }
        }
        attn_free(w);
        attn_free(wd);
        attn_free(x);
    }
    for (int kind = 0; kind < 2; kind++)
        printf("  %s Q8 activations, x %s: |error| / Σ|x·w| worst %.2e, mean %.2e over %ld "
               "elements (all within the rounding bound)\n",
               attn_backend_name(be), kind ? "with an outlier (x20) per 32" : "uniform",
               worst_rel[kind], sum_rel[kind] / (double)count[kind], count[kind]);
    /* attn_quant.h states: worst <= 1e-2, mean <= 2e-3 (uniform) of Σ|x·w| */
    if (!(worst_rel[0] <= 1e-2 && sum_rel[0] / (double)count[0] <= 2e-3)) {
        printf("  the figures stated in attn_quant.h do not hold FAIL\n");
        tu_failures++;
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_SIMD_BACKEND(q8_activation_bound)

/* The blocked path (M > 8) is attn_gemm's algorithm on panels of exactly dequantized weights:
 * with K in one block (K <= 384, both ISAs' KC) the same sums in the same order, so the same bits
 * as attn_gemm on attn_quant_dequantize's matrix. */
static void blocked_equals_gemm(attn_backend be) {
    use_backend(be);
    tu_rng rng = {0x9e3779b97f4a7c15ull};
    const int M = 33, N = 70, K = 256;
    float *x = xalloc((size_t)M * K * sizeof(float)), *wd = xalloc((size_t)N * K * sizeof(float));
    float *a = xalloc((size_t)M * N * sizeof(float)), *b = xalloc((size_t)M * N * sizeof(float));
    float bias[70];
    tu_fill(&rng, x, (size_t)M * K, -1.0f, 1.0f);
    tu_fill(&rng, bias, 70, -1.0f, 1.0f);
    for (int ti = 0; ti < NALL; ti++) {
        const attn_qtype t = ALL[ti];
        void *w = random_weights(t, N, K, &rng);
        assert_int_equal(attn_quant_dequantize(t, (int64_t)N * K, w, wd), ATTN_STATUS_OK);
        assert_int_equal(attn_quant_gemm(M, N, K, x, K, t, w, 0.0f, a, N, bias,
                                         ATTN_ACT_GELU_TANH, ATTN_QUANT_ACT_Q8),
                         ATTN_STATUS_OK);
        assert_int_equal(attn_gemm(false, true, M, N, K, 1.0f, x, K, wd, K, 0.0f, b, N, bias,
                                   ATTN_ACT_GELU_TANH),
                         ATTN_STATUS_OK);
        const bool same = memcmp(a, b, (size_t)M * N * sizeof(float)) == 0;
        printf("  %s %-5s M=%d: blocked path == attn_gemm(dequantized) bit for bit: %s\n",
               attn_backend_name(be), attn_quant_type_name(t), M, same ? "ok" : "FAIL");
        if (!same) tu_failures++;
        attn_free(w);
    }
    attn_free(x);
    attn_free(wd);
    attn_free(a);
    attn_free(b);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_SIMD_BACKEND(blocked_equals_gemm)

/* 1 and 2 threads: the same bits, on every path. */
static void threads_identical(attn_backend be) {
    use_backend(be);
    tu_rng rng = {0x5151515151515151ull};
    const int N = 300, K = 512;
    float *x = xalloc((size_t)40 * K * sizeof(float));
    float *a = xalloc((size_t)40 * N * sizeof(float)), *b = xalloc((size_t)40 * N * sizeof(float));
    tu_fill(&rng, x, (size_t)40 * K, -1.0f, 1.0f);
    static const attn_qtype types[] = {ATTN_QTYPE_Q4_1, ATTN_QTYPE_Q8_0, ATTN_QTYPE_Q6_K,
                                       ATTN_QTYPE_F16};
    static const int Ms[] = {1, 3, 40};
    for (size_t ti = 0; ti < 4; ti++) {
        void *w = random_weights(types[ti], N, K, &rng);
        for (int mi = 0; mi < 3; mi++)
            for (int q8 = 0; q8 < 2; q8++) {
                const attn_quant_act qa = q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
                attn_set_num_threads(1);
                assert_int_equal(attn_quant_gemm(Ms[mi], N, K, x, K, types[ti], w, 0.0f, a, N,
                                                 NULL, ATTN_ACT_NONE, qa),
                                 ATTN_STATUS_OK);
                attn_set_num_threads(2);
                assert_int_equal(attn_quant_gemm(Ms[mi], N, K, x, K, types[ti], w, 0.0f, b, N,
                                                 NULL, ATTN_ACT_NONE, qa),
                                 ATTN_STATUS_OK);
                if (memcmp(a, b, (size_t)Ms[mi] * N * sizeof(float))) {
                    printf("  %s %s M=%d %s: 1 and 2 threads differ FAIL\n", attn_backend_name(be),
                           attn_quant_type_name(types[ti]), Ms[mi], q8 ? "q8act" : "f32act");
                    tu_failures++;
                }
            }
        attn_free(w);
    }
    attn_set_num_threads(0);
    attn_free(x);
    attn_free(a);
    attn_free(b);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(threads_identical)

/* The x8 layout (attn_quant_pack): rows come back byte for byte; products equal the row
 * layout's — bit for bit on the ref backend and on the blocked path (M > 8, and F32 activations
 * at any M: the same dequantized values through the same GEMM), within 1e-5 of max|y| for Q8
 * activations at M <= 8 (the same integer products and scales per block, summed over the blocks
 * in another float order); 1 and 2 threads give the same bits; N with and without a tail of rows
 * past the last panel of 8. */
static void packed_vs_rows(attn_backend be) {
    use_backend(be);
    tu_rng rng = {0x8888777766665555ull};
    static const attn_qtype types[] = {ATTN_QTYPE_Q8_0, ATTN_QTYPE_Q4_0, ATTN_QTYPE_Q4_1};
    static const int Ns[] = {8, 37, 133}, Ms[] = {1, 2, 3, 5, 8, 9, 33};
    const int K = 320;
    float *x = xalloc((size_t)33 * K * sizeof(float));
    tu_fill(&rng, x, (size_t)33 * K, -1.0f, 1.0f);
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t ni = 0; ni < 3; ni++) {
            const attn_qtype t = types[ti];
            const int N = Ns[ni];
            void *w = random_weights(t, N, K, &rng);
            attn_quant_packed P;
            assert_int_equal(attn_quant_pack(t, N, K, w, &P), ATTN_STATUS_OK);
            size_t rb;
            assert_int_equal(attn_quant_row_bytes(t, K, &rb), ATTN_STATUS_OK);
            assert_int_equal(P.bytes, (size_t)N * rb);
            uint8_t *row = xalloc(rb);
            for (int n = 0; n < N; n++) {
                assert_int_equal(attn_quant_packed_row(&P, n, row), ATTN_STATUS_OK);
                if (memcmp(row, (const uint8_t *)w + (size_t)n * rb, rb))
                    fail_msg("%s N=%d: packed row %d differs", attn_quant_type_name(t), N, n);
            }
            attn_free(row);
            float bias[133];
            tu_fill(&rng, bias, (size_t)N, -0.5f, 0.5f);
            float *want = xalloc((size_t)33 * N * sizeof(float));
            float *got = xalloc((size_t)33 * N * sizeof(float));
            float *got2 = xalloc((size_t)33 * N * sizeof(float));
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
                for (int q8 = 0; q8 < 2; q8++) {
                    const int M = Ms[mi];
                    const attn_quant_act qa = q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
                    const attn_act act = (attn_act)((mi + ni) % 5);
                    const float beta = mi % 2 ? 0.5f : 0.0f;
                    const float *bp = mi % 3 ? bias : NULL;
                    for (int i = 0; i < M * N; i++)
                        want[i] = got[i] = got2[i] = (float)(i % 5) * 0.5f;
                    assert_int_equal(attn_quant_gemm(M, N, K, x, K, t, w, beta, want, N, bp, act, qa),
                                     ATTN_STATUS_OK);
                    attn_set_num_threads(1);
                    assert_int_equal(
                        attn_quant_gemm_packed(M, x, K, &P, beta, got, N, bp, act, qa),
                        ATTN_STATUS_OK);
                    attn_set_num_threads(2);
                    assert_int_equal(
                        attn_quant_gemm_packed(M, x, K, &P, beta, got2, N, bp, act, qa),
                        ATTN_STATUS_OK);
                    attn_set_num_threads(0);
                    char what[96];
                    snprintf(what, sizeof what, "%s %s N=%d M=%d %s packed vs rows",
                             attn_backend_name(be), attn_quant_type_name(t), N, M,
                             q8 ? "q8act" : "f32act");
                    if (memcmp(got, got2, (size_t)M * N * sizeof(float))) {
                        printf("  %s: 1 and 2 threads differ FAIL\n", what);
                        tu_failures++;
                    }
                    const bool q8_small = q8 && M <= 8 && be != ATTN_BACKEND_REF;
                    const bool small_f32 = !q8 && M <= 8 && be != ATTN_BACKEND_REF;
                    if (q8_small || small_f32)
                        tu_close(what, got, want, (size_t)M * N, 1e-5, 1e-6);
                    else if (memcmp(got, want, (size_t)M * N * sizeof(float))) {
                        printf("  %s: not bit-identical FAIL\n", what);
                        tu_failures++;
                    }
                }
            attn_free(want);
            attn_free(got);
            attn_free(got2);
            attn_quant_packed_free(&P);
            attn_free(w);
        }
    attn_free(x);
    /* what is not packed */
    attn_quant_packed P;
    assert_int_equal(attn_quant_pack(ATTN_QTYPE_Q4_K, 8, 256, x, &P), ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(attn_quant_pack(ATTN_QTYPE_F16, 8, 32, x, &P), ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(attn_quant_pack(ATTN_QTYPE_Q8_0, 8, 48, x, &P), ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(attn_quant_gemm_packed(1, x, 32, &P, 0.0f, x, 8, NULL, ATTN_ACT_NONE,
                                            ATTN_QUANT_ACT_Q8),
                     ATTN_STATUS_INVALID_ARGUMENT);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(packed_vs_rows)

/* A plain reference of ATTN_QUANT_ACT_Q8 on Q8_0 rows (the definition, in double): x rounded per
 * 32 to codes round(x / d), d = max|x| / 127 (to nearest even), then y = Σ_g d_w · d_x · Σ q_w·q_x
 * + bias, beta · y, the activation. */
static void q8_reference(int M, int N, int K, const float *x, const void *w, float beta, float *y,
                         const float *bias, attn_act act) {
    size_t rb;
    assert_int_equal(attn_quant_row_bytes(ATTN_QTYPE_Q8_0, K, &rb), ATTN_STATUS_OK);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            const uint8_t *row = (const uint8_t *)w + (size_t)n * rb;
            double sum = 0;
            for (int g = 0; g < K / 32; g++) {
                const float *xg = x + (size_t)m * K + 32 * g;
                float amax = 0;
                for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(xg[k]));
                const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
                const uint8_t *blk = row + 34 * (size_t)g;
                uint16_t h;
                memcpy(&h, blk, 2);
                long isum = 0;
                for (int k = 0; k < 32; k++)
                    isum += (long)(int8_t)blk[2 + k] * (long)nearbyintf(xg[k] * id);
                sum += (double)attn_quant_f16_to_f32(h) * d * (double)isum;
            }
            float v = (float)sum + (bias ? bias[n] : 0.0f);
            float *o = y + (size_t)m * N + n;
            if (beta != 0.0f) v += beta * *o;
            switch (act) {
            case ATTN_ACT_RELU: v = v > 0 ? v : 0; break;
            case ATTN_ACT_NONE: break;
            default: fail_msg("q8_reference: activation %d not covered", (int)act);
            }
            *o = v;
        }
}

/* y (M, N) = the packed product with activations qact on y's starting values (i % 7) / 4, bit for
 * bit want; else "WHAT: DIFFER FAIL" and a failed check. */
static void expect_same_bits(const float *want, int M, const float *x, int K,
                             const attn_quant_packed *P, float beta, int N, const float *bias,
                             attn_act act, attn_quant_act qact, const char *what,
                             const char *differ) {
    const size_t n = (size_t)M * N;
    float *y = xalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) y[i] = (float)(i % 7) * 0.25f;
    assert_int_equal(attn_quant_gemm_packed(M, x, K, P, beta, y, N, bias, act, qact),
                     ATTN_STATUS_OK);
    if (memcmp(want, y, n * sizeof(float))) {
        printf("  %s: %s FAIL\n", what, differ);
        tu_failures++;
    }
    attn_free(y);
}

/* got = the product on P with one thread in mode qa1, got2 with two threads in mode qa2. */
static void one_two_threads(int M, const float *x, int K, const attn_quant_packed *P, float beta,
                            float *got, float *got2, int N, const float *bias, attn_act act,
                            attn_quant_act qa1, attn_quant_act qa2) {
    attn_set_num_threads(1);
    assert_int_equal(attn_quant_gemm_packed(M, x, K, P, beta, got, N, bias, act, qa1),
                     ATTN_STATUS_OK);
    attn_set_num_threads(2);
    assert_int_equal(attn_quant_gemm_packed(M, x, K, P, beta, got2, N, bias, act, qa2),
                     ATTN_STATUS_OK);
    attn_set_num_threads(0);
}

/* Q8 activations on packed Q8_0 / Q4_0 / Q4_1 (the decoding kernels: AVX2 unrolls one row and
 * loops over 2 to 8): every row of a product of M = 2 .. 8 rows, and of a batched step's 16 (in
 * chunks of 8), bit for bit that row's product alone (M = 1), as `attn serve` relies on (a
 * stream's reply does not depend on its neighbours). Float32 activations: within 1e-5 (the rows'
 * sums run in other chains). */
static void rows_alone(attn_backend be) {
    use_backend(be);
    tu_rng rng = {0x5eed5eed12345ull};
    static const attn_qtype Ts[] = {ATTN_QTYPE_Q8_0, ATTN_QTYPE_Q4_0, ATTN_QTYPE_Q4_1};
    static const int Ns[] = {24, 40}, Ks[] = {64, 288};
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t ni = 0; ni < 2; ni++) {
            const int N = Ns[ni], K = Ks[ni], MX = 16;
            void *w = random_weights(Ts[ti], N, K, &rng);
            attn_quant_packed P;
            assert_int_equal(attn_quant_pack(Ts[ti], N, K, w, &P), ATTN_STATUS_OK);
            float *x = xalloc((size_t)MX * K * sizeof(float));
            tu_fill(&rng, x, (size_t)MX * K, -1.0f, 1.0f);
            x[5] = 9.0f; /* an outlier: another scale in one group */
            float *alone = xalloc((size_t)MX * N * sizeof(float)), *y = xalloc((size_t)MX * N * sizeof(float));
            for (int q8 = 0; q8 < 2; q8++) {
                const attn_quant_act qa = q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
                for (int m = 0; m < MX; m++)
                    assert_int_equal(attn_quant_gemm_packed(1, x + (size_t)m * K, K, &P, 0.0f,
                                                            alone + (size_t)m * N, N, NULL,
                                                            ATTN_ACT_NONE, qa),
                                     ATTN_STATUS_OK);
                for (int M = 2; M <= MX; M += M < 8 ? 1 : 8) {
                    if (M <= 8)
                        assert_int_equal(attn_quant_gemm_packed(M, x, K, &P, 0.0f, y, N, NULL,
                                                                ATTN_ACT_NONE, qa),
                                         ATTN_STATUS_OK);
                    else
                        assert_int_equal(attn_quant_gemm_packed_batch(M, x, K, &P, 0.0f, y, N,
                                                                      NULL, ATTN_ACT_NONE, qa),
                                         ATTN_STATUS_OK);
                    char what[96];
                    snprintf(what, sizeof what, "%s %s N=%d K=%d M=%d %s rows alone",
                             attn_backend_name(be), attn_quant_type_name(Ts[ti]), N, K, M,
                             q8 ? "q8act" : "f32act");
                    if (!q8)
                        tu_close(what, y, alone, (size_t)M * N, 1e-5, 1e-6);
                    else if (memcmp(y, alone, (size_t)M * N * sizeof(float))) {
                        printf("  %s: not each row's bits alone FAIL\n", what);
                        tu_failures++;
                    }
                }
            }
            attn_free(x), attn_free(alone), attn_free(y);
            attn_quant_packed_free(&P);
            attn_free(w);
        }
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(rows_alone)

/* Products on packed Q8_0 / Q4_0 / Q4_1, int8 and float32 activations: the AVX-512 backend
 * (AVX512-VNNI's two-panel kernel where the CPU has it, x8_pair_vnni, up to 16 rows a call; two
 * panels per zmm in F32 mode, x8_pair_f32) gives the AVX2 backend's bits, for 1 to 8 rows and a
 * batched step's 9 to 16, odd
 * and even panel counts and a tail of rows past the panels (f32: those rows' columns run the
 * row layout's kernels, not compared), with beta, a bias and activations:
 * the same integer sums and the same float chains per output, so the CPU a server runs on does
 * not change a reply. */
static void test_packed_isas(void **state) {
    (void)state;
    tu_need_backend(ATTN_BACKEND_AVX2);
    tu_need_backend(ATTN_BACKEND_AVX512);
    tu_rng rng = {0x7a7a1b1b2c2c3d3dull};
    static const attn_qtype Ts[] = {ATTN_QTYPE_Q8_0, ATTN_QTYPE_Q4_0, ATTN_QTYPE_Q4_1};
    static const int Ns[] = {8, 16, 24, 37, 136}, Ks[] = {32, 64, 320};
    enum { MX = 16 };
    float bias[136];
    tu_fill(&rng, bias, 136, -0.5f, 0.5f);
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t ni = 0; ni < 5; ni++) {
            const int N = Ns[ni], K = Ks[(ti + ni) % 3];
            void *w = random_weights(Ts[ti], N, K, &rng);
            attn_quant_packed P;
            assert_int_equal(attn_quant_pack(Ts[ti], N, K, w, &P), ATTN_STATUS_OK);
            float *x = xalloc((size_t)MX * K * sizeof(float));
            tu_fill(&rng, x, (size_t)MX * K, -1.0f, 1.0f);
            x[3] = -12.0f; /* an outlier: another scale in one group */
            const size_t n = (size_t)MX * N;
            float *a = xalloc(n * sizeof(float)), *b = xalloc(n * sizeof(float));
            for (int q8 = 0; q8 < 2; q8++)
            for (int M = 1; M <= MX; M++) {
                const attn_quant_act qa = q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
                const attn_act act = (attn_act)((size_t)M % 5);
                const float beta = M % 2 ? 0.5f : 0.0f;
                const float *bp = (M + (int)ni) % 2 ? bias : NULL;
                for (int be = 0; be < 2; be++) {
                    float *y = be ? b : a;
                    for (size_t i = 0; i < n; i++) y[i] = (float)(i % 7) * 0.25f;
                    assert_int_equal(attn_set_backend(be ? ATTN_BACKEND_AVX512 : ATTN_BACKEND_AVX2),
                                     ATTN_STATUS_OK);
                    if (M <= 8)
                        assert_int_equal(attn_quant_gemm_packed(M, x, K, &P, beta, y, N, bp, act,
                                                                qa),
                                         ATTN_STATUS_OK);
                    else
                        assert_int_equal(attn_quant_gemm_packed_batch(M, x, K, &P, beta, y, N, bp,
                                                                      act, qa),
                                         ATTN_STATUS_OK);
                }
                /* f32: the panels' columns (the rows past them run the row layout's float
                 * kernels, whose chains follow the vector width) */
                const int cols = q8 ? N : N - N % 8;
                bool same = true;
                for (int m = 0; m < M; m++)
                    same &= !memcmp(a + (size_t)m * N, b + (size_t)m * N, (size_t)cols * sizeof(float));
                if (!same) {
                    printf("  %s N=%d K=%d M=%d %s: AVX-512 and AVX2 differ FAIL\n",
                           attn_quant_type_name(Ts[ti]), N, K, M, q8 ? "q8act" : "f32act");
                    tu_failures++;
                }
            }
            printf("  %s N=%d K=%d: AVX-512%s and AVX2 products compared, M = 1 .. 16, q8 "
                   "and f32 activations\n",
                   attn_quant_type_name(Ts[ti]), N, K,
                   __builtin_cpu_supports("avx512vnni") ? " (VNNI)" : "");
            attn_free(x), attn_free(a), attn_free(b);
            attn_quant_packed_free(&P);
            attn_free(w);
        }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* ATTN_QUANT_ACT_Q8_ALL for M > 8 (AVX512-VNNI's many-row int8 kernel on x8 Q8_0 panels): every
 * row of y bit for bit what the M <= 8 Q8 path gives for that row alone, 1 and 2 threads the same
 * bits, and within 1e-5 of max|y| of the plain reference above (float32 sums in another order);
 * N with an odd number of panels (the last one alone) and N with a tail past the panels (not this
 * kernel's: it falls back to Q8, checked equal to Q8). */
static void test_q8_all_many_rows(void **state) {
    (void)state;
    use_backend(ATTN_BACKEND_AVX512);
    if (!__builtin_cpu_supports("avx512vnni")) tu_skip_hw("no AVX512-VNNI on this CPU");
    tu_rng rng = {0x1234567890abcdefull};
    static const int Ns[] = {8, 24, 136, 37}, Ks[] = {32, 256, 320}, Ms[] = {9, 16, 33, 128};
    float bias[136];
    tu_fill(&rng, bias, 136, -0.5f, 0.5f);
    for (size_t ki = 0; ki < 3; ki++)
        for (size_t ni = 0; ni < 4; ni++) {
            const int N = Ns[ni], K = Ks[ki];
            void *w = random_weights(ATTN_QTYPE_Q8_0, N, K, &rng);
            attn_quant_packed P;
            assert_int_equal(attn_quant_pack(ATTN_QTYPE_Q8_0, N, K, w, &P), ATTN_STATUS_OK);
            for (size_t mi = 0; mi < 4; mi++) {
                const int M = Ms[mi];
                float *x = xalloc((size_t)M * K * sizeof(float));
                tu_fill(&rng, x, (size_t)M * K, -1.0f, 1.0f);
                if (mi == 2) /* an outlier per row: other scales per group */
                    for (int m = 0; m < M; m++) x[(size_t)m * K + (m * 7) % K] = 20.0f;
                const size_t n = (size_t)M * N;
                float *want = xalloc(n * sizeof(float)), *got = xalloc(n * sizeof(float));
                float *got2 = xalloc(n * sizeof(float)), *ref = xalloc(n * sizeof(float));
                const attn_act act = mi % 2 ? ATTN_ACT_RELU : ATTN_ACT_NONE;
                const float beta = ni % 2 ? 0.5f : 0.0f;
                const float *bp = (mi + ni) % 2 ? bias : NULL;
                for (size_t i = 0; i < n; i++) want[i] = got[i] = got2[i] = ref[i] = (float)(i % 7) * 0.25f;
                for (int m0 = 0; m0 < M; m0 += 8) /* the M <= 8 path, 8 rows at a time */
                    assert_int_equal(attn_quant_gemm_packed(M - m0 < 8 ? M - m0 : 8,
                                                            x + (size_t)m0 * K, K, &P, beta,
                                                            want + (size_t)m0 * N, N, bp, act,
                                                            ATTN_QUANT_ACT_Q8),
                                     ATTN_STATUS_OK);
                one_two_threads(M, x, K, &P, beta, got, got2, N, bp, act, ATTN_QUANT_ACT_Q8_ALL,
                                ATTN_QUANT_ACT_Q8_ALL);
                char what[96];
                snprintf(what, sizeof what, "q8_all N=%d K=%d M=%d", N, K, M);
                if (N % 8 == 0) {
                    if (memcmp(got, want, n * sizeof(float))) {
                        printf("  %s: not the M <= 8 path's bits FAIL\n", what);
                        tu_failures++;
                    }
                    /* the group sums precomputed (attn_quant_pack_sums): the same bits */
                    attn_quant_packed Ps = P;
                    Ps.nsum = NULL;
                    assert_int_equal(attn_quant_pack_sums(&Ps), ATTN_STATUS_OK);
                    assert_non_null(Ps.nsum);
                    expect_same_bits(got, M, x, K, &Ps, beta, N, bp, act, ATTN_QUANT_ACT_Q8_ALL,
                                     what, "precomputed sums change the bits");
                    attn_free(Ps.nsum);
                    q8_reference(M, N, K, x, w, beta, ref, bp, act);
                    tu_close(what, got, ref, n, 1e-5, 1e-6);
                } else { /* a tail of rows: Q8 (the blocked path for M > 8) */
                    expect_same_bits(got, M, x, K, &P, beta, N, bp, act, ATTN_QUANT_ACT_Q8, what,
                                     "not Q8's bits");
                }
                if (memcmp(got, got2, n * sizeof(float))) {
                    printf("  %s: 1 and 2 threads differ FAIL\n", what);
                    tu_failures++;
                }
                attn_free(x), attn_free(want), attn_free(got), attn_free(got2), attn_free(ref);
            }
            attn_quant_packed_free(&P);
            attn_free(w);
        }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* ldy > N: the padding columns are never written; beta == 0 never reads y (NaN there). K = 0
 * gives act(beta·y + bias). */
static void strides_and_edges(attn_backend be) {
    use_backend(be);
    tu_rng rng = {0x77ull};
    const int N = 21, K = 64, ldy = 29;
    void *w = random_weights(ATTN_QTYPE_Q5_1, N, K, &rng);
    float x[20 * 70], y[20 * 29];
    tu_fill(&rng, x, sizeof x / sizeof x[0], -1.0f, 1.0f);
    static const int Ms[] = {1, 5, 20};
    for (int mi = 0; mi < 3; mi++) {
        const int M = Ms[mi];
        for (int i = 0; i < M * ldy; i++) y[i] = i % ldy < N ? NAN : -7.0f;
        assert_int_equal(attn_quant_gemm(M, N, K, x, 70, ATTN_QTYPE_Q5_1, w, 0.0f, y, ldy, NULL,
                                         ATTN_ACT_NONE, ATTN_QUANT_ACT_Q8),
                         ATTN_STATUS_OK);
        for (int i = 0; i < M * ldy; i++) {
            const bool pad = i % ldy >= N;
            if (pad ? y[i] != -7.0f : !isfinite(y[i])) {
                printf("  %s M=%d: element %d is %g FAIL\n", attn_backend_name(be), M, i,
                       (double)y[i]);
                tu_failures++;
                break;
            }
        }
    }
    float bias[21];
    for (int i = 0; i < N; i++) bias[i] = (float)i - 10.0f, y[i] = 1.0f;
    assert_int_equal(attn_quant_gemm(1, N, 0, NULL, 1, ATTN_QTYPE_Q5_1, NULL, 2.0f, y, N, bias,
                                     ATTN_ACT_RELU, ATTN_QUANT_ACT_F32),
                     ATTN_STATUS_OK);
    for (int i = 0; i < N; i++) assert_true(y[i] == fmaxf(0.0f, 2.0f + (float)i - 10.0f));
    attn_free(w);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(strides_and_edges)

/* ---- CTranslate2's int8 (ATTN_QTYPE_I8: one scale per row) ---------------------------------- */

/* One row (n) in the i8 scheme, written from attn_quant.h's definition: d = max|v| / 127, codes
 * round(v · (1 / d)) to nearest even (0 when d = 0). */
static float i8_define(int n, const float *v, int32_t *q) {
    float amax = 0.0f;
    for (int k = 0; k < n; k++) amax = fabsf(v[k]) > amax ? fabsf(v[k]) : amax;
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int k = 0; k < n; k++) {
        const float c = nearbyintf(v[k] * id);
        q[k] = (int32_t)(c > 127.0f ? 127.0f : c < -127.0f ? -127.0f : c);
    }
    return d;
}

/* y (M, N) as attn_quant.h defines the i8 product: int sums of the codes (int64 here), one
 * conversion, the scale e_m · d_n, fma(y, beta, v), bias, act (NONE or RELU: exact). */
static void i8_reference(int M, int N, int K, const float *x, const float *w, float beta,
                         float *y, const float *bias, attn_act act) {
    int32_t *qx = xalloc((size_t)M * K * sizeof *qx), *qw = xalloc((size_t)N * K * sizeof *qw);
    float *e = xalloc((size_t)M * sizeof *e), *d = xalloc((size_t)N * sizeof *d);
    for (int m = 0; m < M; m++) e[m] = i8_define(K, x + (size_t)m * K, qx + (size_t)m * K);
    for (int n = 0; n < N; n++) d[n] = i8_define(K, w + (size_t)n * K, qw + (size_t)n * K);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int64_t sum = 0;
            for (int k = 0; k < K; k++)
                sum += (int64_t)qx[(size_t)m * K + k] * qw[(size_t)n * K + k];
            float v = (float)sum * (e[m] * d[n]);
            float *yv = y + (size_t)m * N + n;
            if (beta != 0.0f) v = fmaf(*yv, beta, v);
            if (bias) v += bias[n];
            *yv = act == ATTN_ACT_RELU ? (v > 0.0f ? v : 0.0f) : v;
        }
    attn_free(qx), attn_free(qw), attn_free(e), attn_free(d);
}

/* attn_quant_pack_i8 and the products on it, on backend be: every output bit for bit the
 * definition's (act NONE / RELU; GELU within 1e-5 of it), 1 and 2 threads and the batch entry the
 * same bits, within 2.5% of max|y| of the float32 product (6% with outliers); rows dequantized as d · q; N with a
 * partial last panel and an odd number of panels; a zero row (scale 0) and outlier rows. */
/* attn_quant_f32_to_f16_n against attn_quant_f32_to_f16 / _f16_to_f32 one value at a time: every
 * binary16 value as a float, its neighbours, the ties halfway between neighbouring halves and
 * theirs (round to nearest even), overflow to inf, float32 denormals, quiet and signaling NaNs
 * (F16C would quiet the latter: the vector paths convert a group holding a NaN one at a time),
 * in order and shuffled (NaNs among finite values), with and without flushed denormals, every
 * output combination, in place, and lengths that leave a tail. */
static void f16_rows(attn_backend be) {
    use_backend(be);
    const size_t cap = 6u * 65536u + 64u;
    float *x = xalloc(cap * sizeof(float));
    size_t n = 0;
    for (uint32_t h = 0; h < 65536u; h++) {
        const float v = attn_quant_f16_to_f32((uint16_t)h);
        x[n++] = v;
        if (isfinite(v)) {
            x[n++] = nextafterf(v, INFINITY), x[n++] = nextafterf(v, -INFINITY);
            const uint16_t up = (uint16_t)(h + 1);
            if ((h & 0x7fffu) < 0x7c00u && (up & 0x8000u) == (h & 0x8000u)) {
                const float w = attn_quant_f16_to_f32(up), mid = v + (w - v) * 0.5f; /* exact */
                x[n++] = mid, x[n++] = nextafterf(mid, INFINITY), x[n++] = nextafterf(mid, -INFINITY);
            }
        }
    }
    static const uint32_t bits[] = {0x00000001u, 0x807fffffu, 0x00400000u, 0x477fefffu, 0x477ff000u,
                                    0xc77ff000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                    0xffc00001u, 0x7f800001u, 0x7fa00000u, 0xff801fffu, 0x7f802000u,
                                    0x33000000u, 0x33000001u, 0xb3000000u, 0x32ffffffu};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) memcpy(&x[n++], &bits[i], sizeof(float));
    assert_true(n <= cap);
    uint16_t *want_h = xalloc(n * sizeof(uint16_t)), *got_h = xalloc(n * sizeof(uint16_t));
    float *want_f = xalloc(n * sizeof(float)), *got_f = xalloc(n * sizeof(float));
    float *inplace = xalloc(n * sizeof(float));
    tu_rng rng = {0xf16f16f16ull};
    for (int pass = 0; pass < 4; pass++) {
        if (pass == 2) /* shuffled: NaNs in groups of finite values */
            for (size_t i = n - 1; i > 0; i--) {
                const size_t k = (size_t)(tu_uniform(&rng, 0.0f, 1.0f) * (float)(i + 1)) % (i + 1);
                const float t = x[i];
                x[i] = x[k], x[k] = t;
            }
        const bool flush = pass % 2;
        (void)attn_set_flush_denormals(flush);
        for (size_t i = 0; i < n; i++) {
            want_h[i] = attn_quant_f32_to_f16(x[i]);
            want_f[i] = attn_quant_f16_to_f32(want_h[i]);
        }
        static const size_t lens[] = {0, 1, 7, 8, 9, 15, 17};
        for (size_t li = 0; li <= sizeof lens / sizeof lens[0]; li++) {
            const size_t m = li < sizeof lens / sizeof lens[0] ? lens[li] : n, off = n - m;
            memset(got_h, 0xaa, n * sizeof(uint16_t)), memset(got_f, 0xaa, n * sizeof(float));
            attn_quant_f32_to_f16_n(m, x + off, got_h + off, got_f + off);
            memcpy(inplace, x, n * sizeof(float));
            attn_quant_f32_to_f16_n(m, inplace + off, NULL, inplace + off);
            bool ok = !memcmp(got_h + off, want_h + off, m * sizeof(uint16_t)) &&
                      !memcmp(got_f + off, want_f + off, m * sizeof(float)) &&
                      !memcmp(inplace + off, want_f + off, m * sizeof(float));
            memset(got_h, 0xaa, n * sizeof(uint16_t));
            attn_quant_f32_to_f16_n(m, x + off, got_h + off, NULL);
            ok = ok && !memcmp(got_h + off, want_h + off, m * sizeof(uint16_t));
            for (size_t i = 0; !ok && i < n; i++)
                if (i >= off && (got_h[i] != want_h[i] || memcmp(&got_f[i], &want_f[i], 4))) {
                    uint32_t u;
                    memcpy(&u, &x[i], sizeof u);
                    printf("  f16 rows %s (flush %d, n %zu): x 0x%08x -> 0x%04x, want 0x%04x FAIL\n",
                           attn_backend_name(be), (int)flush, m, (unsigned)u, got_h[i], want_h[i]);
                    break;
                }
            if (!ok) tu_failures++;
        }
    }
    (void)attn_set_flush_denormals(false);
    attn_free(x), attn_free(want_h), attn_free(got_h), attn_free(want_f), attn_free(got_f);
    attn_free(inplace);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(f16_rows)

static void i8_products(attn_backend be) {
    use_backend(be);
    tu_rng rng = {0x5eed1e8c0ffee123ull};
    static const int Ns[] = {16, 37, 136, 8}, Ks[] = {4, 36, 256}, Ms[] = {1, 5, 6, 7, 8, 9, 33};
    float bias[136];
    tu_fill(&rng, bias, 136, -0.5f, 0.5f);
    for (size_t ki = 0; ki < 3; ki++)
        for (size_t ni = 0; ni < 4; ni++) {
            const int N = Ns[ni], K = Ks[ki];
            float *w = xalloc((size_t)N * K * sizeof(float));
            tu_fill(&rng, w, (size_t)N * K, -1.0f, 1.0f);
            for (int k = 0; k < K; k++) w[(size_t)(N / 2) * K + k] = 0.0f; /* scale 0 */
            attn_quant_packed P;
            assert_int_equal(attn_quant_pack_i8(N, K, w, &P), ATTN_STATUS_OK);
            assert_int_equal(P.type, ATTN_QTYPE_I8);
            { /* rows dequantized: d · q */
                int32_t *q = xalloc((size_t)K * sizeof *q);
                float *row = xalloc((size_t)K * sizeof(float));
                for (int n = 0; n < N; n++) {
                    const float dn = i8_define(K, w + (size_t)n * K, q);
                    assert_int_equal(attn_quant_packed_dequant_row(&P, n, row), ATTN_STATUS_OK);
                    for (int k = 0; k < K; k++) assert_true(row[k] == (float)q[k] * dn);
                }
                attn_free(q), attn_free(row);
            }
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                const int M = Ms[mi];
                const size_t n = (size_t)M * N;
                float *x = xalloc((size_t)M * K * sizeof(float));
                tu_fill(&rng, x, (size_t)M * K, -1.0f, 1.0f);
                if (mi == 4) /* an outlier per row: a coarse scale */
                    for (int m = 0; m < M; m++) x[(size_t)m * K + (m * 7) % K] = 20.0f;
                float *want = xalloc(n * sizeof(float)), *got = xalloc(n * sizeof(float));
                float *got2 = xalloc(n * sizeof(float)), *got3 = xalloc(n * sizeof(float));
                float *fl = xalloc(n * sizeof(float));
                const attn_act act = (mi + ki) % 3 == 0   ? ATTN_ACT_NONE
                                     : (mi + ki) % 3 == 1 ? ATTN_ACT_RELU
                                                          : ATTN_ACT_GELU_ERF;
                const float beta = ni % 2 ? 0.5f : 0.0f;
                const float *bp = (mi + ni) % 2 ? bias : NULL;
                for (size_t i = 0; i < n; i++)
                    want[i] = got[i] = got2[i] = got3[i] = (float)(i % 7) * 0.25f;
                i8_reference(M, N, K, x, w, beta, want, bp,
                             act == ATTN_ACT_GELU_ERF ? ATTN_ACT_NONE : act);
                if (act == ATTN_ACT_GELU_ERF)
                    for (size_t i = 0; i < n; i++)
                        want[i] = 0.5f * want[i] * (1.0f + erff(want[i] / sqrtf(2.0f)));
                one_two_threads(M, x, K, &P, beta, got, got2, N, bp, act, ATTN_QUANT_ACT_F32,
                                ATTN_QUANT_ACT_Q8_ALL);
                assert_int_equal(attn_quant_gemm_packed_batch(M, x, K, &P, beta, got3, N, bp,
                                                              act, ATTN_QUANT_ACT_Q8),
                                 ATTN_STATUS_OK);
                char what[96];
                snprintf(what, sizeof what, "i8 %s N=%d K=%d M=%d act %d", attn_backend_name(be),
                         N, K, M, (int)act);
                if (act == ATTN_ACT_GELU_ERF) {
                    tu_close(what, got, want, n, 1e-5, 1e-6);
                } else if (memcmp(got, want, n * sizeof(float))) {
                    printf("  %s: not the definition's bits FAIL\n", what);
                    tu_failures++;
                }
                if (memcmp(got, got2, n * sizeof(float)) || memcmp(got, got3, n * sizeof(float))) {
                    printf("  %s: 1 / 2 threads / batch differ FAIL\n", what);
                    tu_failures++;
                }
                /* against float32: the quantization's error only */
                for (size_t i = 0; i < n; i++) fl[i] = (float)(i % 7) * 0.25f;
                for (int m = 0; m < M; m++)
                    for (int c = 0; c < N; c++) {
                        double v = 0;
                        for (int k = 0; k < K; k++)
                            v += (double)x[(size_t)m * K + k] * w[(size_t)c * K + k];
                        float f = (float)v, *yv = fl + (size_t)m * N + c;
                        if (beta != 0.0f) f += beta * *yv;
                        if (bp) f += bp[c];
                        *yv = act == ATTN_ACT_RELU ? (f > 0 ? f : 0)
                              : act == ATTN_ACT_GELU_ERF ? 0.5f * f * (1.0f + erff(f / sqrtf(2.0f)))
                                                         : f;
                    }
                snprintf(what, sizeof what, "i8 vs f32 N=%d K=%d M=%d", N, K, M);
                /* (with an outlier of 20 the row's step is 20/127 for values in [-1, 1]:
                 * measured up to 4.5e-2 of max|y|) */
                tu_close(what, got, fl, n, mi == 4 ? 6e-2 : 2.5e-2, 1e-6);
                attn_free(x), attn_free(want), attn_free(got), attn_free(got2), attn_free(got3);
                attn_free(fl);
            }
            attn_quant_packed_free(&P);
            attn_free(w);
        }
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(i8_products)

/* Bad arguments to the i8 functions: one-line errors, out zeroed, nothing written. */
static void test_i8_bad(void **state) {
    (void)state;
    float w[64] = {0}, x[16] = {0}, y[16] = {0}, row[16];
    attn_quant_packed P;
    tu_expect_fail(attn_quant_pack_i8(4, 6, w, &P), ATTN_STATUS_INVALID_ARGUMENT, "multiple of 4",
                   NULL);
    assert_null(P.data);
    tu_expect_fail(attn_quant_pack_i8(4, 0, w, &P), ATTN_STATUS_INVALID_ARGUMENT, NULL, NULL);
    tu_expect_fail(attn_quant_pack_i8(-1, 4, w, &P), ATTN_STATUS_INVALID_ARGUMENT, NULL, NULL);
    tu_expect_fail(attn_quant_pack_i8(1, 65540, w, &P), ATTN_STATUS_INVALID_ARGUMENT, NULL, NULL);
    tu_expect_fail(attn_quant_pack_i8(4, 16, NULL, &P), ATTN_STATUS_INVALID_ARGUMENT, NULL, NULL);
    tu_expect_fail(attn_quant_pack_i8(4, 16, w, NULL), ATTN_STATUS_INVALID_ARGUMENT, NULL, NULL);
    tu_expect_fail(attn_quant_pack_i8(1 << 30, 1 << 15, w, &P), ATTN_STATUS_TOO_LARGE, NULL, NULL);
    assert_int_equal(attn_quant_pack_i8(4, 16, w, &P), ATTN_STATUS_OK);
    uint8_t raw[64];
    tu_expect_fail(attn_quant_packed_row(&P, 0, raw), ATTN_STATUS_INVALID_ARGUMENT, "row layout",
                   NULL);
    tu_expect_fail(attn_quant_packed_dequant_row(&P, 4, row), ATTN_STATUS_INVALID_ARGUMENT, NULL,
                   NULL);
    tu_expect_fail(attn_quant_gemm_packed(1, x, 8, &P, 0.0f, y, 4, NULL, ATTN_ACT_NONE,
                                          ATTN_QUANT_ACT_F32),
                   ATTN_STATUS_INVALID_ARGUMENT, "ldx", NULL);
    attn_quant_packed bad = P;
    bad.bytes--; /* inconsistent fields */
    tu_expect_fail(attn_quant_gemm_packed(1, x, 16, &bad, 0.0f, y, 4, NULL, ATTN_ACT_NONE,
                                          ATTN_QUANT_ACT_F32),
                   ATTN_STATUS_INVALID_ARGUMENT, "i8", NULL);
    bad = P, bad.scale = NULL;
    tu_expect_fail(attn_quant_packed_dequant_row(&bad, 0, row), ATTN_STATUS_INVALID_ARGUMENT, "i8",
                   NULL);
    assert_string_equal(attn_quant_type_name(ATTN_QTYPE_I8), "i8");
    assert_false(attn_quant_type_known(ATTN_QTYPE_I8));
    attn_quant_packed_free(&P);
    assert_null(P.data);
    assert_null(P.scale);
}

static void test_bad_arguments(void **state) {
    (void)state;
    float x[64] = {0}, y[64] = {0};
    unsigned char w[1024] = {0};
    tu_expect_fail(attn_quant_gemm(1, 2, 100, x, 100, ATTN_QTYPE_Q8_0, w, 0.0f, y, 2, NULL,
                                   ATTN_ACT_NONE, ATTN_QUANT_ACT_F32),
                   ATTN_STATUS_INVALID_ARGUMENT, "q8_0", "100");
    tu_expect_fail(attn_quant_gemm(1, 1, 32, x, 32, (attn_qtype)11, w, 0.0f, y, 1, NULL,
                                   ATTN_ACT_NONE, ATTN_QUANT_ACT_F32),
                   ATTN_STATUS_INVALID_ARGUMENT, "unknown", "11");
    tu_expect_fail(attn_quant_gemm(-1, 1, 32, x, 32, ATTN_QTYPE_Q8_0, w, 0.0f, y, 1, NULL,
                                   ATTN_ACT_NONE, ATTN_QUANT_ACT_F32),
                   ATTN_STATUS_INVALID_ARGUMENT, "sizes", "M=-1");
    tu_expect_fail(attn_quant_gemm(1, 1, 32, x, 16, ATTN_QTYPE_Q8_0, w, 0.0f, y, 1, NULL,
                                   ATTN_ACT_NONE, ATTN_QUANT_ACT_F32),
                   ATTN_STATUS_INVALID_ARGUMENT, "ldx", "K=32");
    tu_expect_fail(attn_quant_gemm(1, 2, 32, x, 32, ATTN_QTYPE_Q8_0, w, 0.0f, y, 1, NULL,
                                   ATTN_ACT_NONE, ATTN_QUANT_ACT_F32),
                   ATTN_STATUS_INVALID_ARGUMENT, "ldy", "N=2");
    tu_expect_fail(attn_quant_gemm(1, 1, 32, x, 32, ATTN_QTYPE_Q8_0, NULL, 0.0f, y, 1, NULL,
                                   ATTN_ACT_NONE, ATTN_QUANT_ACT_F32),
                   ATTN_STATUS_INVALID_ARGUMENT, "NULL", NULL);
    tu_expect_fail(attn_quant_gemm(1, 1, 32, x, 32, ATTN_QTYPE_Q8_0, w, 0.0f, y, 1, NULL,
                                   (attn_act)9, ATTN_QUANT_ACT_F32),
                   ATTN_STATUS_INVALID_ARGUMENT, "activation", "9");
    tu_expect_fail(attn_quant_gemm(1, 1, 32, x, 32, ATTN_QTYPE_Q8_0, w, 0.0f, y, 1, NULL,
                                   ATTN_ACT_NONE, (attn_quant_act)5),
                   ATTN_STATUS_INVALID_ARGUMENT, "mode", "5");
    tu_expect_fail(attn_quant_gemm(1, 1 << 30, 1 << 20, x, 1 << 20, ATTN_QTYPE_F32, w, 0.0f, y,
                                   1 << 30, NULL, ATTN_ACT_NONE, ATTN_QUANT_ACT_F32),
                   ATTN_STATUS_TOO_LARGE, "too large", NULL);
    tu_expect_fail(attn_quant_dequantize(ATTN_QTYPE_Q4_K, 300, w, y), ATTN_STATUS_INVALID_ARGUMENT,
                   "q4_K", "300");
    tu_expect_fail(attn_quant_quantize(ATTN_QTYPE_Q4_0, 32, NULL, w), ATTN_STATUS_INVALID_ARGUMENT,
                   "NULL", NULL);
    const int32_t ids[2] = {0, 3};
    tu_expect_fail(attn_quant_embedding_forward(2, 3, 32, ids, ATTN_QTYPE_Q8_0, w, y),
                   ATTN_STATUS_INVALID_ARGUMENT, "id 3", "[0, 3)");
    /* Nothing to do: no error, nothing touched. */
    assert_int_equal(attn_quant_gemm(0, 5, 32, NULL, 32, ATTN_QTYPE_Q8_0, NULL, 0.0f, NULL, 5,
                                     NULL, ATTN_ACT_NONE, ATTN_QUANT_ACT_F32),
                     ATTN_STATUS_OK);
}

static void test_embedding(void **state) {
    (void)state;
    tu_rng rng = {0xe11ull};
    const int V = 50, C = 96;
    void *table = random_weights(ATTN_QTYPE_Q8_0, V, C, &rng);
    float *all = xalloc((size_t)V * C * sizeof(float)), out[3 * 96];
    assert_int_equal(attn_quant_dequantize(ATTN_QTYPE_Q8_0, (int64_t)V * C, table, all),
                     ATTN_STATUS_OK);
    const int32_t ids[3] = {49, 0, 17};
    assert_int_equal(attn_quant_embedding_forward(3, V, C, ids, ATTN_QTYPE_Q8_0, table, out),
                     ATTN_STATUS_OK);
    for (int i = 0; i < 3; i++)
        assert_memory_equal(out + i * C, all + (size_t)ids[i] * C, C * sizeof(float));
    attn_free(table);
    attn_free(all);
}

/* attn_nn_linear on quantized weights: the forward is attn_quant_gemm with the run's activation
 * mode (bias and activation fused, beta accumulate); backward and packing refuse. */
static void test_nn_linear(void **state) {
    (void)state;
    tu_rng rng = {0xabcull};
    const int in = 256, out = 40, M = 3;
    void *w = random_weights(ATTN_QTYPE_Q4_K, out, in, &rng);
    float x[3 * 256], b[40], y[3 * 40], want[3 * 40];
    tu_fill(&rng, x, sizeof x / sizeof x[0], -1.0f, 1.0f);
    tu_fill(&rng, b, 40, -1.0f, 1.0f);
    attn_nn_linear L = attn_nn_linear_make_quant(ATTN_QTYPE_Q4_K, w, b, in, out);
    attn_nn_run run = attn_nn_default_run();
    assert_int_equal(run.quant_act, ATTN_QUANT_ACT_F32);
    for (int q8 = 0; q8 < 2; q8++) {
        run.quant_act = q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
        for (int i = 0; i < M * out; i++) y[i] = want[i] = 1.0f;
        assert_int_equal(attn_nn_linear_forward(&run, &L, M, x, in, 1.0f, y, out, ATTN_ACT_SILU),
                         ATTN_STATUS_OK);
        assert_int_equal(attn_quant_gemm(M, out, in, x, in, ATTN_QTYPE_Q4_K, w, 1.0f, want, out, b,
                                         ATTN_ACT_SILU, run.quant_act),
                         ATTN_STATUS_OK);
        assert_memory_equal(y, want, sizeof y);
    }
    /* Rows [8, 24) as their own map. */
    const attn_nn_linear R = attn_nn_linear_rows(&L, 8, 16);
    assert_int_equal(attn_nn_linear_forward(&run, &R, M, x, in, 0.0f, y, 16, ATTN_ACT_NONE),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_quant_gemm(M, out, in, x, in, ATTN_QTYPE_Q4_K, w, 0.0f, want, out, b,
                                     ATTN_ACT_NONE, run.quant_act),
                     ATTN_STATUS_OK);
    for (int m = 0; m < M; m++) assert_memory_equal(y + m * 16, want + m * out + 8, 16 * sizeof(float));
    float dy[3 * 40] = {0}, dx[3 * 256];
    tu_expect_fail(attn_nn_linear_backward(&run, &L, M, x, in, dy, out, dx, in, false, NULL),
                   ATTN_STATUS_UNSUPPORTED, "quantized", "q4_K");
    attn_gemm_packed_b P;
    tu_expect_fail(attn_nn_linear_pack(&L, ATTN_PRECISION_F32, &P), ATTN_STATUS_UNSUPPORTED,
                   "quantized", NULL);
    attn_free(w);
}

/* A gated FFN and a grouped-query self-attention whose maps are quantized (mixed types, as in a
 * Q4_K_M file), against the same blocks on float32 weights dequantized from them (the float
 * paths: the fused gate|up pair, attn_gemm): one row (decoding, the streaming kernels) and 2 × 12
 * rows (a prompt, the blocked GEMM), in both activation modes; q, k and v with biases (Qwen2).
 * Tolerances relative to max|y|: F32 activations 1e-5 (float32 sums in another order through
 * two or three products), Q8 activations 2e-2 (each product's rounding; see
 * q8_activation_bound). */
static void *quant_map(attn_qtype t, int out, int in, tu_rng *rng, float **deq) {
    void *q = random_weights(t, out, in, rng);
    *deq = xalloc((size_t)out * in * sizeof(float));
    assert_int_equal(attn_quant_dequantize(t, (int64_t)out * in, q, *deq), ATTN_STATUS_OK);
    return q;
}

static void test_nn_blocks(void **state) {
    (void)state;
    tu_rng rng = {0xb10c5ull};
    enum { C = 256, F = 512, H = 8, HKV = 2, D = 32, MMAX = 24 };
    /* FFN: gate, up Q4_K; down Q6_K. Attention: q Q5_0, k Q5_1, v Q8_0, o Q4_0. */
    float *dg, *du, *dd, *dq, *dk, *dv, *dob;
    void *qg = quant_map(ATTN_QTYPE_Q4_K, F, C, &rng, &dg);
    void *qu = quant_map(ATTN_QTYPE_Q4_K, F, C, &rng, &du);
    void *qd = quant_map(ATTN_QTYPE_Q6_K, C, F, &rng, &dd);
    void *qq = quant_map(ATTN_QTYPE_Q5_0, H * D, C, &rng, &dq);
    void *qk = quant_map(ATTN_QTYPE_Q5_1, HKV * D, C, &rng, &dk);
    void *qv = quant_map(ATTN_QTYPE_Q8_0, HKV * D, C, &rng, &dv);
    void *qo = quant_map(ATTN_QTYPE_Q4_0, C, H * D, &rng, &dob);
    float bq[H * D], bk[HKV * D], bv[HKV * D];
    tu_fill(&rng, bq, H * D, -0.5f, 0.5f);
    tu_fill(&rng, bk, HKV * D, -0.5f, 0.5f);
    tu_fill(&rng, bv, HKV * D, -0.5f, 0.5f);
    /* float: gate and up adjacent (one (2F, C) matrix), so the fused pair path runs */
    float *gu = xalloc((size_t)2 * F * C * sizeof(float));
    memcpy(gu, dg, (size_t)F * C * sizeof(float));
    memcpy(gu + (size_t)F * C, du, (size_t)F * C * sizeof(float));
    attn_nn_ffn ff = {ATTN_FFN_GATED, ATTN_ACT_SILU,
                      attn_nn_linear_make(gu + (size_t)F * C, NULL, C, F, ATTN_NN_OUT_IN),
                      attn_nn_linear_make(gu, NULL, C, F, ATTN_NN_OUT_IN),
                      attn_nn_linear_make(dd, NULL, F, C, ATTN_NN_OUT_IN), NULL};
    attn_nn_ffn fq = {ATTN_FFN_GATED, ATTN_ACT_SILU,
                      attn_nn_linear_make_quant(ATTN_QTYPE_Q4_K, qu, NULL, C, F),
                      attn_nn_linear_make_quant(ATTN_QTYPE_Q4_K, qg, NULL, C, F),
                      attn_nn_linear_make_quant(ATTN_QTYPE_Q6_K, qd, NULL, F, C), NULL};
    attn_nn_attn_cfg cfg = attn_nn_attn_default_cfg(C, H);
    cfg.n_kv_head = HKV, cfg.d_head = D, cfg.causal = true;
    attn_nn_attn af, aq;
    memset(&af, 0, sizeof af);
    memset(&aq, 0, sizeof aq);
    af.q = attn_nn_linear_make(dq, bq, C, H * D, ATTN_NN_OUT_IN);
    af.k = attn_nn_linear_make(dk, bk, C, HKV * D, ATTN_NN_OUT_IN);
    af.v = attn_nn_linear_make(dv, bv, C, HKV * D, ATTN_NN_OUT_IN);
    af.o = attn_nn_linear_make(dob, NULL, H * D, C, ATTN_NN_OUT_IN);
    aq.q = attn_nn_linear_make_quant(ATTN_QTYPE_Q5_0, qq, bq, C, H * D);
    aq.k = attn_nn_linear_make_quant(ATTN_QTYPE_Q5_1, qk, bk, C, HKV * D);
    aq.v = attn_nn_linear_make_quant(ATTN_QTYPE_Q8_0, qv, bv, C, HKV * D);
    aq.o = attn_nn_linear_make_quant(ATTN_QTYPE_Q4_0, qo, NULL, H * D, C);

    float *x = xalloc((size_t)MMAX * C * sizeof(float));
    tu_fill(&rng, x, (size_t)MMAX * C, -0.1f, 0.1f);
    float *y0 = xalloc((size_t)MMAX * C * sizeof(float)), *y1 = xalloc((size_t)MMAX * C * sizeof(float));
    const size_t nf = attn_nn_ffn_acts_floats(&ff, MMAX, false);
    float *fbuf = xalloc(nf * sizeof(float));
    const size_t np = attn_nn_attn_proj_floats(&cfg, MMAX, 0);
    float *proj = xalloc(np * sizeof(float)), *ctx = xalloc((size_t)MMAX * H * D * sizeof(float));
    static const struct {
        int B, T;
    } shapes[] = {{1, 1}, {2, 12}};
    for (int si = 0; si < 2; si++)
        for (int q8 = 0; q8 < 2; q8++) {
            const int B = shapes[si].B, T = shapes[si].T, M = B * T;
            attn_nn_run run = attn_nn_default_run();
            run.quant_act = q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
            const double rtol = q8 && M <= 8 ? 2e-2 : 1e-5;
            char what[96];
            attn_nn_ffn_acts fa;
            attn_nn_ffn_acts_view(&ff, M, false, fbuf, &fa);
            assert_int_equal(attn_nn_ffn_forward(&run, &ff, M, x, &fa, 0.0f, y0), ATTN_STATUS_OK);
            attn_nn_ffn_acts_view(&fq, M, false, fbuf, &fa);
            if (attn_nn_ffn_forward(&run, &fq, M, x, &fa, 0.0f, y1))
                fail_msg("quantized FFN: %s", attn_last_error());
            snprintf(what, sizeof what, "gated FFN (q4_K, q6_K) M=%d %s", M, q8 ? "q8act" : "f32act");
            tu_close(what, y1, y0, (size_t)M * C, rtol, 1e-6);

            const attn_nn_seqs sq = attn_nn_seqs_dense(B, T, T);
            attn_nn_attn_acts aa = {proj, ctx, NULL, NULL, NULL};
            assert_int_equal(attn_nn_attention_forward(&run, &cfg, &af, &sq, x, NULL, NULL, &aa,
                                                       NULL, 0.0f, y0),
                             ATTN_STATUS_OK);
            if (attn_nn_attention_forward(&run, &cfg, &aq, &sq, x, NULL, NULL, &aa, NULL, 0.0f, y1))
                fail_msg("quantized attention: %s", attn_last_error());
            snprintf(what, sizeof what, "GQA attention (q5_0 q5_1 q8_0 q4_0) M=%d %s", M,
                     q8 ? "q8act" : "f32act");
            tu_close(what, y1, y0, (size_t)M * C, rtol, 1e-6);
        }
    /* A quantized map whose input width is not a multiple of the block: an error, no product. */
    attn_nn_linear bad = attn_nn_linear_make_quant(ATTN_QTYPE_Q4_K, qg, NULL, 200, 4);
    attn_nn_run run = attn_nn_default_run();
    tu_expect_fail(attn_nn_linear_forward(&run, &bad, 1, x, 200, 0.0f, y1, 4, ATTN_ACT_NONE),
                   ATTN_STATUS_INVALID_ARGUMENT, "q4_K", "200");
    void *ws[] = {qg, qu, qd, qq, qk, qv, qo};
    float *fs[] = {dg, du, dd, dq, dk, dv, dob, gu, x, y0, y1, fbuf, proj, ctx};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) attn_free(ws[i]);
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) attn_free(fs[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_dequantize_gguf),
        cmocka_unit_test(test_quantize_gguf),
        cmocka_unit_test(test_kquant_quantize),
        cmocka_unit_test(test_products_gguf_ref),
        cmocka_unit_test(test_products_gguf_avx2),
        cmocka_unit_test(test_products_gguf_avx512),
        cmocka_unit_test(test_simd_vs_ref_avx2),
        cmocka_unit_test(test_simd_vs_ref_avx512),
        cmocka_unit_test(test_q8_activation_bound_avx2),
        cmocka_unit_test(test_q8_activation_bound_avx512),
        cmocka_unit_test(test_blocked_equals_gemm_avx2),
        cmocka_unit_test(test_blocked_equals_gemm_avx512),
        cmocka_unit_test(test_threads_identical_ref),
        cmocka_unit_test(test_threads_identical_avx2),
        cmocka_unit_test(test_threads_identical_avx512),
        cmocka_unit_test(test_strides_and_edges_ref),
        cmocka_unit_test(test_strides_and_edges_avx2),
        cmocka_unit_test(test_strides_and_edges_avx512),
        cmocka_unit_test(test_packed_vs_rows_ref),
        cmocka_unit_test(test_packed_vs_rows_avx2),
        cmocka_unit_test(test_packed_vs_rows_avx512),
        cmocka_unit_test(test_rows_alone_ref),
        cmocka_unit_test(test_rows_alone_avx2),
        cmocka_unit_test(test_rows_alone_avx512),
        cmocka_unit_test(test_packed_isas),
        cmocka_unit_test(test_q8_all_many_rows),
        cmocka_unit_test(test_i8_products_ref),
        cmocka_unit_test(test_i8_products_avx2),
        cmocka_unit_test(test_i8_products_avx512),
        cmocka_unit_test(test_i8_bad),
        cmocka_unit_test(test_f16_rows_ref),
        cmocka_unit_test(test_f16_rows_avx2),
        cmocka_unit_test(test_f16_rows_avx512),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_nn_linear),
        cmocka_unit_test(test_nn_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_nn.c — the block layer (include/attn_nn.h) against PyTorch (tools/ref_nn.py), forward and
 * backward, on every kernel backend this CPU can run (ref, avx2; avx512 where available):
 *   linear     OUT_IN and IN_OUT weights, with and without bias, strided views (ldw, ldx, ldy),
 *              the fused activation epilogues, beta, backward (dx overwritten and accumulated,
 *              weight and bias gradients accumulated), pre-packed weights (attn_nn_linear_pack:
 *              the unpacked result; a copy, used only outside training and on its own backend),
 *              the few-rows option;
 *   norm       LayerNorm with and without bias / gain, RMSNorm with and without gain, in place,
 *              backward overwritten and accumulated;
 *   ffn        plain (ReLU, GELU erf / tanh, SiLU) and gated (SwiGLU, GeGLU), gate|up adjacent
 *              (one GEMM) and separate, gradients adjacent and separate, training and evaluation
 *              buffers, beta;
 *   attention  self and cross; q|k|v fused (OUT_IN and GPT-2's IN_OUT), adjacent and separate;
 *              multi-head, grouped-query and multi-query against K/V repeat_interleave'd;
 *              RoPE in both modes, partial, explicit positions and pos0, against transformers'
 *              apply_rotary_pos_emb (Llama: half-split; GPT-J: interleaved); Qwen3's per-head
 *              q/k RMSNorms (before RoPE; with biases, head_dim != C/H, their weight gradients,
 *              evaluation without their backward buffers); causal, sliding windows (1, 3, 4, 5,
 *              20, = T; transformers' Mistral mask), padding, variable-length packed rows
 *              (probabilities in the padded capture layout); the additive score bias (shared over
 *              the batch or the heads) and its gradient; KV-cache decoding (a prompt, then chunks
 *              and single tokens with pos0) equal to the full causal forward, in separate and
 *              shared-row caches, also with windows and q/k norms; cross-attention keys and
 *              values computed once (attn_nn_attention_cross_kv) equal to the uncached forward;
 *   sub-layers pre-norm and post-norm wiring with and without dropout (the mask from an
 *              independent numpy twin), and the row numbering of dropout: a batch equals the
 *              concatenation of its sequences run separately (also a data-parallel replica of
 *              trimmed length, and packed rows), on 1 and 2 threads bit for bit; the families'
 *              run-state allocator (mdl_sub_acts_alloc, q/k-norm buffers included) giving the
 *              same bits as the test's own buffers;
 *   dropout    attn_nn_dropout_fwd / bwd bit for bit against attn_encdec_dropout and against
 *              the header's formula re-implemented here;
 *   finite differences on the new combinations (GQA + RoPE + q/k norms + sliding window + score
 *              bias + SwiGLU + dropout);
 *   bad arguments: every validation error, one line naming the field.
 *
 * Tolerances, as max|got − ref| <= rtol · max|ref| + atol over a whole tensor (float32 against
 * float64; every check prints its measured error; worst measured over all cases and backends):
 *   forward outputs (linear, norm, FFN, attention y and probabilities, sub-layers):
 *     TOL_FWD = 1e-5 (measured worst 1.6e-6; the q/k-norm and window cases 4.8e-7);
 *   gradients: TOL_GRAD = 1e-5 relative (measured worst 2.3e-6; q/k-norm and window cases
 *     8.8e-7), plus 1e-5 · max|dx_ref| absolute for the parameter gradients, some of which are
 *     exactly zero in exact arithmetic (the key bias, by softmax's shift invariance; every key
 *     weight with a window of 1, where each query sees only itself: avx2 noise 7e-6 there)
 *     where float32 leaves rounding noise at the scale of the layer's other gradients;
 *   cached decoding and cached cross-attention against the uncached reference: TOL_FWD (the
 *     cached call sums over the same keys; measured worst 1.6e-6);
 *   pre-packed weights for M <= 8 rows on the SIMD backends, the few-rows option, and unpacked
 *     rows alone against the same rows in a larger call: TOL_PACK = 1e-6 relative to the plain
 *     result (attn_kernels.h: ~1e-7; measured 2.7e-7); bit for bit where the headers promise it
 *     (packed weights for M > 8 rows or on the ref backend; packed rows whatever the call);
 *   finite differences (float32 forward, loss in double, Richardson extrapolation of central
 *     differences with h = 4e-2 and 2e-2): TOL_FD = 2e-3 · max|analytic| of the tensor
 *     (measured 4.8e-4: float32 rounding of the loss over 2h is the floor);
 *   dropout, row numbering, thread counts, in-place calls: bit for bit.
 * Variable-length rows with a causal configuration are checked like every other case. */
#include "tu.h"

#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_models.h"
#include "attn_nn.h"

#include "../src/models/models-impl.h" /* mdl_sub_acts_alloc: its q/k-norm buffers */

#include <jansson.h>

#define TOL_FWD 1e-5
#define TOL_GRAD 1e-5
#define TOL_PACK 1e-6
#define TOL_FD 2e-3
#define T_MAX(a, b) ((a) > (b) ? (a) : (b))
#define T_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SENT 12345.0f /* padding sentinel: a call must leave it alone */

static const attn_backend ALL[] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX2, ATTN_BACKEND_AVX512};
#define NB (sizeof ALL / sizeof ALL[0])

/* Selects backend i if this CPU has it; says so once when it does not. */
static int use_backend(size_t i) {
    static int told[NB];
    if (!attn_backend_available(ALL[i])) {
        if (!told[i]++)
            printf("  (backend %s not available on this CPU: skipped)\n",
                   attn_backend_name(ALL[i]));
        return 0;
    }
    assert_int_equal(attn_set_backend(ALL[i]), ATTN_STATUS_OK);
    return 1;
}

static const char *bname(void) { return attn_backend_name(attn_get_backend()); }

static int check(const float *got, const float *ref, size_t n, double rtol, double atol,
                 const char *fmt, ...) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tu_close(what, got, ref, n, rtol, atol);
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        attn_status st_ = (call);                                                                  \
        if (st_) fail_msg("%s: %s", #call, attn_last_error());                                     \
    } while (0)

/* ---- buffers ------------------------------------------------------------------------------- */

static float *falloc(size_t n) {
    float *p = attn_alloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}
static float *ffill(size_t n, float v) {
    float *p = falloc(n);
    for (size_t i = 0; i < n; i++) p[i] = v;
    return p;
}
static float *fnan(size_t n) { return ffill(n, NAN); }
static float *fzero(size_t n) { return ffill(n, 0.0f); }
static float *fdup(const float *a, size_t n) {
    float *p = falloc(n);
    memcpy(p, a, n * sizeof(float));
    return p;
}
static double maxabs(const float *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}
static void scaled(const float *a, size_t n, float s, float *out) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] * s;
}
/* (rows, cols) of src (NULL: NaN) into a new buffer of row stride ld, padding set to pad. */
static float *pad_rows(const float *src, int rows, int cols, int ld, float pad) {
    float *p = ffill((size_t)rows * ld, pad);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            p[(size_t)r * ld + c] = src ? src[(size_t)r * cols + c] : NAN;
    return p;
}
static float *unpad(const float *a, int rows, int cols, int ld) {
    float *p = falloc((size_t)rows * cols);
    for (int r = 0; r < rows; r++) memcpy(p + (size_t)r * cols, a + (size_t)r * ld, cols * 4u);
    return p;
}
/* Whether the padding columns cols .. ld − 1 of every row still hold v. */
static bool pad_intact(const float *a, int rows, int cols, int ld, float v) {
    for (int r = 0; r < rows; r++)
        for (int c = cols; c < ld; c++)
            if (a[(size_t)r * ld + c] != v) return false;
    return true;
}
static bool same_bits(const void *a, const void *b, size_t bytes) { return !memcmp(a, b, bytes); }

/* A weight matrix seen as (out, in) whatever its storage: element (o, i) at p[o·ld + i]
 * (OUT_IN) or p[i·ld + o] (IN_OUT). */
typedef struct {
    float *p;
    int out, in, ld;
    bool io;
} mview;
static float *mv_at(const mview *v, int o, int i) {
    return v->io ? v->p + (size_t)i * v->ld + o : v->p + (size_t)o * v->ld + i;
}
static void mv_set(const mview *v, const float *src /* (out, in) or NULL: zeros */) {
    for (int o = 0; o < v->out; o++)
        for (int i = 0; i < v->in; i++) *mv_at(v, o, i) = src ? src[(size_t)o * v->in + i] : 0.0f;
}
static float *mv_get(const mview *v) { /* (out, in) */
    float *d = falloc((size_t)v->out * v->in);
    for (int o = 0; o < v->out; o++)
        for (int i = 0; i < v->in; i++) d[(size_t)o * v->in + i] = *mv_at(v, o, i);
    return d;
}

/* ---- the reference file -------------------------------------------------------------------- */

static attn_st_file *REF;

static int open_ref(void **state) {
    (void)state;
    if (attn_st_open(tu_ref_path("nn.safetensors"), &REF)) {
        printf("cannot open %s (%s): run .venv/bin/python tools/ref_nn.py DIR with "
               "ATTN_REF_DIR=DIR (tests/run.sh does both)\n",
               tu_ref_path("nn.safetensors"), attn_last_error());
        return -1;
    }
    return 0;
}
static int close_ref(void **state) {
    (void)state;
    attn_st_close(REF);
    REF = NULL;
    return 0;
}

static int ncases(const char *kind) {
    char key[64];
    snprintf(key, sizeof key, "%s.cases", kind);
    const char *m = attn_st_metadata(REF, key);
    if (!m) fail_msg("nn.safetensors has no %s (regenerate it)", key);
    return atoi(m);
}
static json_t *case_meta(const char *kind, int k) {
    char key[64];
    snprintf(key, sizeof key, "%s.%d", kind, k);
    const char *m = attn_st_metadata(REF, key);
    if (!m) fail_msg("nn.safetensors has no metadata %s", key);
    json_error_t e;
    json_t *o = json_loads(m, 0, &e);
    if (!o) fail_msg("%s: %s", key, e.text);
    return o;
}
static json_t *jget(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    if (!v) fail_msg("case metadata lacks \"%s\"", k);
    return v;
}
static int ji(json_t *o, const char *k) { return (int)json_integer_value(jget(o, k)); }
static bool jb(json_t *o, const char *k) { return json_is_true(jget(o, k)); }
static double jd(json_t *o, const char *k) { return json_number_value(jget(o, k)); }
/* An int array (or null: -1) into out[cap]; returns its length. */
static int jints(json_t *o, const char *k, int32_t *out, int cap) {
    json_t *a = jget(o, k);
    if (json_is_null(a)) return -1;
    const int n = (int)json_array_size(a);
    if (n > cap) fail_msg("\"%s\" has %d entries, more than %d", k, n, cap);
    for (int i = 0; i < n; i++) out[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return n;
}

/* Tensor PREFIX.NAME as float32 (attn_free it), or NULL when absent. */
static float *opt(const char *prefix, const char *name) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", prefix, name);
    if (!attn_st_find(REF, key)) return NULL;
    float *d = NULL;
    OK(attn_st_load_f32(REF, key, &d, NULL));
    return d;
}
static float *need(const char *prefix, const char *name) {
    float *d = opt(prefix, name);
    if (!d) fail_msg("nn.safetensors lacks %s.%s", prefix, name);
    return d;
}
static int32_t *opt_i32(const char *prefix, const char *name) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", prefix, name);
    if (!attn_st_find(REF, key)) return NULL;
    int32_t *d = NULL;
    OK(attn_st_load_i32(REF, key, &d, NULL));
    return d;
}

/* ==== linear ================================================================================= */

static void test_linear(void **state) {
    (void)state;
    const int n = ncases("lin");
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        for (int k = 0; k < n; k++) {
            json_t *o = case_meta("lin", k);
            const int M = ji(o, "M"), K = ji(o, "K"), N = ji(o, "N"), padw = ji(o, "padw");
            const int ldx = K + ji(o, "padx"), ldy = N + ji(o, "pady");
            const bool io = !strcmp(json_string_value(jget(o, "layout")), "io");
            const bool bias = jb(o, "bias");
            const attn_act act = (attn_act)ji(o, "act");
            const float beta = (float)jd(o, "beta");
            json_decref(o);
            char p[32];
            snprintf(p, sizeof p, "lin.%d", k);
            float *x = need(p, "x"), *w = need(p, "w"), *b = opt(p, "b"), *y0 = need(p, "y0");
            float *dy = need(p, "dy"), *dx0 = need(p, "dx0"), *g0w = need(p, "g0w");
            float *g0b = opt(p, "g0b"), *yr = need(p, "y"), *dxr = need(p, "dx");
            float *dxa = need(p, "dx_acc"), *gwr = need(p, "gw"), *gbr = opt(p, "gb");
            const double gs = maxabs(dxr, (size_t)M * K);

            /* The weight as a strided view with NaN in its padding (never read), the gradient
             * as another stride with a sentinel in its padding (never written). */
            const int wrows = io ? K : N, wcols = io ? N : K;
            const int ldw = wcols + padw, ldg = wcols + padw + 1;
            float *wb = fnan((size_t)wrows * ldw), *gb = ffill((size_t)wrows * ldg, SENT);
            mview wv = {wb, N, K, ldw, io}, gv = {gb, N, K, ldg, io};
            mv_set(&wv, w);
            mv_set(&gv, g0w);
            float *gbias = bias ? fdup(g0b, N) : NULL;
            const attn_nn_layout lay = io ? ATTN_NN_IN_OUT : ATTN_NN_OUT_IN;
            attn_nn_linear L = attn_nn_linear_make(wb, bias ? b : NULL, K, N, lay);
            attn_nn_linear G = attn_nn_linear_make(gb, gbias, K, N, lay);
            L.ldw = ldw, G.ldw = ldg;
            const attn_nn_run run = attn_nn_default_run();

            float *xb = pad_rows(x, M, K, ldx, NAN);
            float *yb = pad_rows(beta != 0.0f ? y0 : NULL, M, N, ldy, SENT);
            OK(attn_nn_linear_forward(&run, &L, M, xb, ldx, beta, yb, ldy, act));
            float *y = unpad(yb, M, N, ldy);
            check(y, yr, (size_t)M * N, TOL_FWD, 0, "linear %d %s y", k, bname());
            assert_true(pad_intact(yb, M, N, ldy, SENT));

            float *dyb = pad_rows(dy, M, N, ldy, NAN), *dxb = pad_rows(NULL, M, K, ldx, SENT);
            OK(attn_nn_linear_backward(&run, &L, M, xb, ldx, dyb, ldy, dxb, ldx, false, &G));
            float *dx = unpad(dxb, M, K, ldx), *gw = mv_get(&gv);
            check(dx, dxr, (size_t)M * K, TOL_GRAD, 0, "linear %d %s dx", k, bname());
            check(gw, gwr, (size_t)N * K, TOL_GRAD, TOL_GRAD * gs, "linear %d %s gw (+= g0)", k,
                  bname());
            if (bias)
                check(gbias, gbr, N, TOL_GRAD, TOL_GRAD * gs, "linear %d %s gb (+= g0)", k,
                      bname());
            assert_true(pad_intact(dxb, M, K, ldx, SENT));
            assert_true(pad_intact(gb, wrows, wcols, ldg, SENT));
            attn_free(dx);

            /* dx accumulated onto dx0, no parameter gradients. */
            attn_free(dxb);
            dxb = pad_rows(dx0, M, K, ldx, SENT);
            OK(attn_nn_linear_backward(&run, &L, M, xb, ldx, dyb, ldy, dxb, ldx, true, NULL));
            dx = unpad(dxb, M, K, ldx);
            check(dx, dxa, (size_t)M * K, TOL_GRAD, 0, "linear %d %s dx (+= dx0)", k, bname());

            /* Pre-packed: the unpacked result, bit for bit where attn_gemm packs too. */
            attn_gemm_packed_b P;
            memset(&P, 0, sizeof P);
            OK(attn_nn_linear_pack(&L, ATTN_PRECISION_F32, &P));
            attn_nn_linear Lp = L;
            Lp.packed = &P;
            float *yb2 = pad_rows(beta != 0.0f ? y0 : NULL, M, N, ldy, SENT);
            OK(attn_nn_linear_forward(&run, &Lp, M, xb, ldx, beta, yb2, ldy, act));
            float *y2 = unpad(yb2, M, N, ldy);
            if (M > 8 || attn_get_backend() == ATTN_BACKEND_REF) {
                if (!same_bits(y2, y, (size_t)M * N * 4))
                    fail_msg("linear %d %s: packed weights differ from unpacked", k, bname());
            } else {
                check(y2, y, (size_t)M * N, TOL_PACK, 0, "linear %d %s packed (M<=8)", k,
                      bname());
            }
            check(y2, yr, (size_t)M * N, TOL_FWD, 0, "linear %d %s packed y", k, bname());
            attn_gemm_packed_b_free(&P);

            attn_free(y2), attn_free(yb2), attn_free(dx), attn_free(dxb), attn_free(dyb);
            attn_free(gw), attn_free(y), attn_free(yb), attn_free(xb), attn_free(gbias);
            attn_free(wb), attn_free(gb), attn_free(x), attn_free(w), attn_free(b);
            attn_free(y0), attn_free(dy), attn_free(dx0), attn_free(g0w), attn_free(g0b);
            attn_free(yr), attn_free(dxr), attn_free(dxa), attn_free(gwr), attn_free(gbr);
        }
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* Packed weights are a copy, used by forwards outside training on the backend they were packed
 * for, and never by a backward; the few-rows option stays within rounding of the plain path. */
static void test_linear_packed(void **state) {
    (void)state;
    const int M = 20, K = 48, N = 40;
    tu_rng r = {42};
    float *x = falloc((size_t)M * K), *w = falloc((size_t)N * K), *b = falloc(N);
    tu_fill(&r, x, (size_t)M * K, -1, 1);
    tu_fill(&r, w, (size_t)N * K, -0.3f, 0.3f);
    tu_fill(&r, b, N, -0.3f, 0.3f);
    float *y_old = falloc((size_t)M * N), *y_new = falloc((size_t)M * N);
    float *y = falloc((size_t)M * N), *dy = falloc((size_t)M * N);
    tu_fill(&r, dy, (size_t)M * N, -1, 1);
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        attn_nn_linear L = attn_nn_linear_make(w, b, K, N, ATTN_NN_OUT_IN);
        attn_nn_run eval = attn_nn_default_run(), train = eval;
        train.training = true;
        OK(attn_nn_linear_forward(&eval, &L, M, x, K, 0.0f, y_old, N, ATTN_ACT_GELU_TANH));
        attn_gemm_packed_b P;
        OK(attn_nn_linear_pack(&L, ATTN_PRECISION_F32, &P));
        for (size_t i = 0; i < (size_t)N * K; i++) w[i] *= 0.5f; /* after packing */
        OK(attn_nn_linear_forward(&eval, &L, M, x, K, 0.0f, y_new, N, ATTN_ACT_GELU_TANH));
        L.packed = &P;
        OK(attn_nn_linear_forward(&eval, &L, M, x, K, 0.0f, y, N, ATTN_ACT_GELU_TANH));
        if (!same_bits(y, y_old, sizeof(float) * M * N))
            fail_msg("%s: evaluation did not use the packed copy", bname());
        OK(attn_nn_linear_forward(&train, &L, M, x, K, 0.0f, y, N, ATTN_ACT_GELU_TANH));
        if (!same_bits(y, y_new, sizeof(float) * M * N))
            fail_msg("%s: training used the packed copy", bname());
        /* backward ignores the packed copy: dx from the current weights */
        float *dx1 = falloc((size_t)M * K), *dx2 = falloc((size_t)M * K);
        OK(attn_nn_linear_backward(&train, &L, M, x, K, dy, N, dx1, K, false, NULL));
        L.packed = NULL;
        OK(attn_nn_linear_backward(&train, &L, M, x, K, dy, N, dx2, K, false, NULL));
        if (!same_bits(dx1, dx2, sizeof(float) * M * K))
            fail_msg("%s: backward used the packed copy", bname());
        /* on another backend the panels are not used: that backend's unpacked result */
        for (size_t bj = 0; bj < NB; bj++) {
            if (bj == bi || !attn_backend_available(ALL[bj])) continue;
            assert_int_equal(attn_set_backend(ALL[bj]), ATTN_STATUS_OK);
            OK(attn_nn_linear_forward(&eval, &L, M, x, K, 0.0f, y_new, N, ATTN_ACT_GELU_TANH));
            L.packed = &P;
            OK(attn_nn_linear_forward(&eval, &L, M, x, K, 0.0f, y, N, ATTN_ACT_GELU_TANH));
            L.packed = NULL;
            if (!same_bits(y, y_new, sizeof(float) * M * N))
                fail_msg("packed for %s, run on %s: not the unpacked result",
                         attn_backend_name(ALL[bi]), bname());
            assert_int_equal(attn_set_backend(ALL[bi]), ATTN_STATUS_OK);
        }
        attn_gemm_packed_b_free(&P);
        for (size_t i = 0; i < (size_t)N * K; i++) w[i] *= 2.0f; /* exact: back to w */
        /* few_rows: 9..48 nn.Linear rows in chunks of 8: rounding of the plain path */
        const int Ms[4] = {9, 20, 48, 49};
        for (int mi = 0; mi < 4; mi++) {
            const int m = Ms[mi];
            float *xa = falloc((size_t)m * K), *ya = falloc((size_t)m * N);
            float *yf = falloc((size_t)m * N);
            tu_fill(&r, xa, (size_t)m * K, -1, 1);
            attn_nn_run fr = eval;
            fr.few_rows = true;
            L = attn_nn_linear_make(w, b, K, N, ATTN_NN_OUT_IN);
            OK(attn_nn_linear_forward(&eval, &L, m, xa, K, 0.0f, ya, N, ATTN_ACT_SILU));
            OK(attn_nn_linear_forward(&fr, &L, m, xa, K, 0.0f, yf, N, ATTN_ACT_SILU));
            if (m > 48 && !same_bits(ya, yf, sizeof(float) * m * N))
                fail_msg("few_rows changed a %d-row product", m);
            check(yf, ya, (size_t)m * N, TOL_PACK, 0, "few_rows M=%d %s vs plain", m, bname());
            attn_free(xa), attn_free(ya), attn_free(yf);
        }
        /* Row independence. Pre-packed: rows 0..5 alone are bit for bit those rows of the
         * 20-row call (linear.c always uses the panels). Unpacked: on the SIMD backends the
         * <= 8-row call takes attn_gemm's direct path, within rounding of the 20-row one. */
        {
            L = attn_nn_linear_make(w, b, K, N, ATTN_NN_OUT_IN);
            attn_gemm_packed_b Q;
            OK(attn_nn_linear_pack(&L, ATTN_PRECISION_F32, &Q));
            float *y6 = falloc((size_t)6 * N);
            for (int pk = 0; pk < 2; pk++) {
                L.packed = pk ? &Q : NULL;
                OK(attn_nn_linear_forward(&eval, &L, M, x, K, 0.0f, y, N, ATTN_ACT_NONE));
                OK(attn_nn_linear_forward(&eval, &L, 6, x, K, 0.0f, y6, N, ATTN_ACT_NONE));
                const bool same = same_bits(y6, y, sizeof(float) * 6 * N);
                printf("  %s %s: 6 rows alone %s those of a 20-row call\n", bname(),
                       pk ? "packed" : "unpacked", same ? "bit for bit" : "within rounding of");
                if (pk && !same) fail_msg("%s: packed rows depend on the call's other rows",
                                          bname());
                check(y6, y, (size_t)6 * N, TOL_PACK, 0, "%s 6 rows vs 20 rows", bname());
            }
            attn_gemm_packed_b_free(&Q);
            attn_free(y6);
        }
        attn_free(dx1), attn_free(dx2);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
    /* attn_nn_colsum_add: column sums added, the same on any thread count */
    {
        const int rows = 700, cols = 150; /* >= 64 Ki elements: threaded */
        float *a = falloc((size_t)rows * (cols + 3)), *s1 = fzero(cols), *s2 = fzero(cols);
        tu_fill(&r, a, (size_t)rows * (cols + 3), -1, 1);
        double ref[150];
        float reff[150];
        for (int c = 0; c < cols; c++) {
            ref[c] = 1.0;
            for (int i = 0; i < rows; i++) ref[c] += a[(size_t)i * (cols + 3) + c];
            reff[c] = (float)ref[c];
            s1[c] = s2[c] = 1.0f;
        }
        const int nt = attn_get_num_threads();
        attn_set_num_threads(1);
        attn_nn_colsum_add(rows, cols, a, cols + 3, s1);
        attn_set_num_threads(2);
        attn_nn_colsum_add(rows, cols, a, cols + 3, s2);
        attn_set_num_threads(nt);
        check(s1, reff, cols, 1e-5, 0, "colsum_add vs float64 sums");
        if (!same_bits(s1, s2, sizeof(float) * cols)) fail_msg("colsum_add depends on threads");
        attn_free(a), attn_free(s1), attn_free(s2);
    }
    attn_free(x), attn_free(w), attn_free(b), attn_free(y_old), attn_free(y_new), attn_free(y);
    attn_free(dy);
}

/* ==== norms ================================================================================== */

static void test_norm(void **state) {
    (void)state;
    const int n = ncases("norm");
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        for (int k = 0; k < n; k++) {
            json_t *o = case_meta("norm", k);
            const int M = ji(o, "M"), C = ji(o, "C");
            const attn_norm_kind kind = (attn_norm_kind)ji(o, "kind");
            const bool hw = jb(o, "w"), hb = jb(o, "b");
            const float eps = (float)jd(o, "eps");
            json_decref(o);
            char p[32];
            snprintf(p, sizeof p, "norm.%d", k);
            float *x = need(p, "x"), *w = opt(p, "w"), *b = opt(p, "b"), *dy = need(p, "dy");
            float *dx0 = need(p, "dx0"), *g0w = opt(p, "g0w"), *g0b = opt(p, "g0b");
            float *yr = need(p, "y"), *dxr = need(p, "dx"), *dxa = need(p, "dx_acc");
            float *gwr = opt(p, "gw"), *gbr = opt(p, "gb");
            const size_t MC = (size_t)M * C;
            const double gs = maxabs(dxr, MC);
            const char *kn = attn_norm_kind_name(kind);
            attn_nn_norm N = {kind, C, eps, hw ? w : NULL, hb ? b : NULL};
            float *gw = hw ? fdup(g0w, C) : NULL, *gb = hb ? fdup(g0b, C) : NULL;
            attn_nn_norm G = {kind, C, eps, gw, gb};
            float *y = fnan(MC), *mean = fnan(M), *rstd = fnan(M);
            float *meanp = kind == ATTN_NORM_LAYER ? mean : NULL;
            OK(attn_nn_norm_forward(&N, M, x, y, meanp, rstd));
            check(y, yr, MC, TOL_FWD, 0, "norm %d %s %s y", k, kn, bname());
            float *z = fdup(x, MC); /* in place */
            OK(attn_nn_norm_forward(&N, M, z, z, NULL, NULL));
            if (!same_bits(z, y, MC * 4)) fail_msg("norm %d: in place differs", k);
            float *dx = fnan(MC);
            OK(attn_nn_norm_backward(&N, &G, M, x, meanp, rstd, dy, dx, false, NULL));
            check(dx, dxr, MC, TOL_GRAD, 0, "norm %d %s %s dx", k, kn, bname());
            if (hw) check(gw, gwr, C, TOL_GRAD, TOL_GRAD * gs, "norm %d %s gw (+= g0)", k, bname());
            if (hb) check(gb, gbr, C, TOL_GRAD, TOL_GRAD * gs, "norm %d %s gb (+= g0)", k, bname());
            float *tmp = fnan(MC);
            memcpy(dx, dx0, MC * 4);
            OK(attn_nn_norm_backward(&N, NULL, M, x, meanp, rstd, dy, dx, true, tmp));
            check(dx, dxa, MC, TOL_GRAD, 0, "norm %d %s %s dx (+= dx0)", k, kn, bname());
            attn_free(tmp), attn_free(dx), attn_free(z), attn_free(y), attn_free(mean);
            attn_free(rstd), attn_free(gw), attn_free(gb), attn_free(x), attn_free(w);
            attn_free(b), attn_free(dy), attn_free(dx0), attn_free(g0w), attn_free(g0b);
            attn_free(yr), attn_free(dxr), attn_free(dxa), attn_free(gwr), attn_free(gbr);
        }
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
    attn_norm_kind nk;
    OK(attn_norm_kind_parse("RMSNorm", "test", &nk));
    assert_int_equal(nk, ATTN_NORM_RMS);
    OK(attn_norm_kind_parse("layer_norm", "test", &nk));
    assert_int_equal(nk, ATTN_NORM_LAYER);
    assert_string_equal(attn_norm_kind_name(ATTN_NORM_RMS), "rms_norm");
}

/* ==== feed-forward =========================================================================== */

/* An FFN's weights (or gradients) laid out as a case asks: gate|up one (2F, C) matrix when
 * fused, else three separate allocations. */
typedef struct {
    attn_nn_ffn f;   /* up (F, C), gate (F, C), down (C, F) with biases (F), (F), (C) */
    float *mem[6];   /* the allocations */
} ffn_layout;

static void ffn_build(ffn_layout *L, attn_ffn_kind kind, attn_act act, int C, int Fd, bool bias,
                      bool fused, const float *wu, const float *bu, const float *wg,
                      const float *bg, const float *wd, const float *bd) {
    memset(L, 0, sizeof *L);
    const size_t FC = (size_t)Fd * C;
    float *gw, *uw, *gbv = NULL, *ubv = NULL;
    if (kind == ATTN_FFN_GATED && fused) {
        L->mem[0] = falloc(2 * FC);
        gw = L->mem[0], uw = gw + FC;
        if (bias) L->mem[1] = falloc(2 * (size_t)Fd), gbv = L->mem[1], ubv = gbv + Fd;
    } else {
        L->mem[0] = falloc(FC + 16), L->mem[2] = falloc(FC + 16); /* never adjacent */
        uw = L->mem[0], gw = L->mem[2];
        if (bias) {
            L->mem[1] = falloc(Fd + 16), L->mem[3] = falloc(Fd + 16);
            ubv = L->mem[1], gbv = L->mem[3];
        }
    }
    L->mem[4] = falloc((size_t)C * Fd);
    L->mem[5] = bias ? falloc(C) : NULL;
    memcpy(uw, wu, FC * 4);
    if (kind == ATTN_FFN_GATED) memcpy(gw, wg, FC * 4);
    memcpy(L->mem[4], wd, FC * 4);
    if (bias) {
        memcpy(ubv, bu, Fd * 4u);
        if (kind == ATTN_FFN_GATED) memcpy(gbv, bg, Fd * 4u);
        memcpy(L->mem[5], bd, C * 4u);
    }
    L->f.kind = kind;
    L->f.act = act;
    L->f.up = attn_nn_linear_make(uw, ubv, C, Fd, ATTN_NN_OUT_IN);
    if (kind == ATTN_FFN_GATED) L->f.gate = attn_nn_linear_make(gw, gbv, C, Fd, ATTN_NN_OUT_IN);
    L->f.down = attn_nn_linear_make(L->mem[4], L->mem[5], Fd, C, ATTN_NN_OUT_IN);
}
static void ffn_free(ffn_layout *L) {
    for (int i = 0; i < 6; i++) attn_free(L->mem[i]);
}

static void test_ffn(void **state) {
    (void)state;
    const int n = ncases("ffn");
    static const char *const NAMES[6] = {"w_up", "b_up", "w_gate", "b_gate", "w_down", "b_down"};
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        for (int k = 0; k < n; k++) {
            json_t *o = case_meta("ffn", k);
            const int M = ji(o, "M"), C = ji(o, "C"), Fd = ji(o, "F");
            const attn_ffn_kind kind = (attn_ffn_kind)ji(o, "kind");
            const attn_act act = (attn_act)ji(o, "act");
            const bool bias = jb(o, "bias"), fused = jb(o, "fused"), gfused = jb(o, "gfused");
            const float beta = (float)jd(o, "beta");
            json_decref(o);
            char p[32];
            snprintf(p, sizeof p, "ffn.%d", k);
            float *W[6], *G0[6], *GR[6];
            for (int i = 0; i < 6; i++) {
                char g0[16], g[16];
                snprintf(g0, sizeof g0, "g0_%s", NAMES[i]);
                snprintf(g, sizeof g, "g_%s", NAMES[i]);
                W[i] = opt(p, NAMES[i]), G0[i] = opt(p, g0), GR[i] = opt(p, g);
            }
            float *x = need(p, "x"), *y0 = need(p, "y0"), *dy = need(p, "dy");
            float *dx0 = need(p, "dx0"), *yr = need(p, "y"), *dxr = need(p, "dx");
            float *dxa = need(p, "dx_acc");
            const size_t MC = (size_t)M * C;
            const double gs = maxabs(dxr, MC);
            ffn_layout L, G;
            ffn_build(&L, kind, act, C, Fd, bias, fused, W[0], W[1], W[2], W[3], W[4], W[5]);
            ffn_build(&G, kind, act, C, Fd, bias, gfused, G0[0], G0[1], G0[2], G0[3], G0[4],
                      G0[5]);
            const char *desc = kind == ATTN_FFN_GATED ? (fused ? "gated fused" : "gated separate")
                                                      : "plain";
            for (int tr = 1; tr >= 0; tr--) {
                attn_nn_run run = attn_nn_default_run();
                run.training = tr;
                float *buf = fnan(attn_nn_ffn_acts_floats(&L.f, M, tr));
                attn_nn_ffn_acts a;
                attn_nn_ffn_acts_view(&L.f, M, tr, buf, &a);
                float *y = beta != 0.0f ? fdup(y0, MC) : fnan(MC);
                OK(attn_nn_ffn_forward(&run, &L.f, M, x, &a, beta, y));
                check(y, yr, MC, TOL_FWD, 0, "ffn %d %s act %d %s %s y", k, desc, (int)act,
                      tr ? "train" : "eval", bname());
                if (tr) {
                    float *dx = fnan(MC), *work = fnan(attn_nn_ffn_work_floats(&L.f, M));
                    OK(attn_nn_ffn_backward(&run, &L.f, &G.f, M, x, &a, dy, dx, false, work));
                    check(dx, dxr, MC, TOL_GRAD, 0, "ffn %d %s %s dx", k, desc, bname());
                    const attn_nn_linear *gl[6] = {&G.f.up, &G.f.up, &G.f.gate, &G.f.gate,
                                                   &G.f.down, &G.f.down};
                    for (int i = 0; i < 6; i++) {
                        if (!GR[i]) continue;
                        const bool isb = NAMES[i][0] == 'b';
                        const float *got = isb ? gl[i]->b : gl[i]->w;
                        const size_t cnt = isb ? (size_t)gl[i]->out
                                               : (size_t)gl[i]->out * gl[i]->in;
                        check(got, GR[i], cnt, TOL_GRAD, TOL_GRAD * gs, "ffn %d %s %s %s%s", k,
                              desc, bname(), NAMES[i], gfused ? " (grads adjacent)" : "");
                    }
                    memcpy(dx, dx0, MC * 4);
                    OK(attn_nn_ffn_backward(&run, &L.f, NULL, M, x, &a, dy, dx, true, work));
                    check(dx, dxa, MC, TOL_GRAD, 0, "ffn %d %s %s dx (+= dx0)", k, desc,
                          bname());
                    attn_free(dx), attn_free(work);
                }
                attn_free(y), attn_free(buf);
            }
            ffn_free(&L), ffn_free(&G);
            for (int i = 0; i < 6; i++) attn_free(W[i]), attn_free(G0[i]), attn_free(GR[i]);
            attn_free(x), attn_free(y0), attn_free(dy), attn_free(dx0), attn_free(yr);
            attn_free(dxr), attn_free(dxa);
        }
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* ==== attention ============================================================================== */

/* An attention case (tools/ref_nn.py attn_case): sizes, masks, rotary and bias options. */
typedef struct {
    int B, Tq, Tk, C, Ckv, H, Hk, D; /* H query heads, Hk key/value heads of D */
    int R, mode, P, pos0;             /* rotary dims, attn_rope_mode, table rows, first position */
    int Mq, Mk;                       /* query rows (B·Tq, or off[B]) and key-source rows */
    int window;                       /* sliding window (0: none) */
    bool cross, causal, pbias, has_pos, sbias, has_kv_len, has_off;
    bool qk_norm;                     /* Qwen3's q/k RMSNorms (weights qn, kn; eps) */
    float scale;                      /* 0: 1/sqrt(D) */
    float eps;                        /* of the q/k norms */
    int32_t kv_len[8];                /* (B) when has_kv_len */
    int32_t off[9];                   /* (B + 1) packed row offsets when has_off */
    ptrdiff_t bsb, bsh, bsq;          /* score bias strides */
} acase;

/* A case's reference tensors (HD = H·D, KD = Hk·D). */
typedef struct {
    float *x;      /* (Mq, C) */
    float *src;    /* (Mk, Ckv) cross-attention's source, or NULL */
    float *dy;     /* (Mq, C) */
    float *y;      /* (Mq, C) expected output */
    float *probs;  /* (B, H, Tq, Tk) expected probabilities (varlen: padded, zeros outside) */
    float *dx;     /* (Mq, C) */
    float *dsrc;   /* (Mk, Ckv) or NULL */
    float *dbias;  /* (B, H, Tq, Tk) or NULL */
    float *sbias;  /* the score bias as stored (strides bsb, bsh, bsq), or NULL */
    float *inv;    /* (R/2) rotary inv_freq, or NULL */
    float *cos, *sin; /* (P, R/2) attn_rope_tables of inv */
    float *W[4];   /* wq (HD, C), wk (KD, Ckv), wv (KD, Ckv), wo (C, HD) */
    float *Bs[4];  /* their biases (HD), (KD), (KD), (C), or NULL */
    float *GW[4], *GB[4]; /* the expected gradients of W and Bs */
    int32_t *pos;  /* (Mq) explicit rotary positions, or NULL */
    float *QN[2], *GQN[2]; /* q_norm, k_norm weights (D) and their expected gradients, or NULL */
} adata;

static void acase_load(int k, acase *c, adata *d) {
    json_t *o = case_meta("attn", k);
    memset(c, 0, sizeof *c);
    c->B = ji(o, "B"), c->Tq = ji(o, "Tq"), c->Tk = ji(o, "Tk"), c->C = ji(o, "C");
    c->Ckv = ji(o, "Ckv"), c->H = ji(o, "H"), c->Hk = ji(o, "Hk"), c->D = ji(o, "D");
    c->R = ji(o, "R"), c->mode = ji(o, "mode"), c->P = ji(o, "P"), c->pos0 = ji(o, "pos0");
    c->cross = jb(o, "cross"), c->causal = jb(o, "causal"), c->pbias = jb(o, "pbias");
    c->has_pos = jb(o, "pos"), c->sbias = jb(o, "sbias"), c->scale = (float)jd(o, "scale");
    c->window = ji(o, "window"), c->qk_norm = jb(o, "qk_norm"), c->eps = (float)jd(o, "eps");
    c->has_kv_len = jints(o, "kv_len", c->kv_len, 8) >= 0;
    c->has_off = jints(o, "off", c->off, 9) >= 0;
    if (c->has_off) c->B = (int)json_array_size(jget(o, "off")) - 1;
    if (c->sbias) c->bsb = ji(o, "bias_sb"), c->bsh = ji(o, "bias_sh"), c->bsq = ji(o, "bias_sq");
    json_decref(o);
    c->Mq = c->has_off ? c->off[c->B] : c->B * c->Tq;
    c->Mk = c->cross ? c->B * c->Tk : c->Mq;
    char p[32];
    snprintf(p, sizeof p, "attn.%d", k);
    memset(d, 0, sizeof *d);
    d->x = need(p, "x"), d->src = opt(p, "src"), d->dy = need(p, "dy"), d->y = need(p, "y");
    d->probs = need(p, "probs"), d->dx = need(p, "dx"), d->dsrc = opt(p, "dsrc");
    d->dbias = opt(p, "dbias"), d->sbias = opt(p, "sbias"), d->inv = opt(p, "inv_freq");
    d->pos = opt_i32(p, "pos");
    static const char *const WN[4] = {"wq", "wk", "wv", "wo"};
    static const char *const BN[4] = {"bq", "bk", "bv", "bo"};
    for (int i = 0; i < 4; i++) {
        char g[8];
        d->W[i] = need(p, WN[i]), d->Bs[i] = opt(p, BN[i]);
        snprintf(g, sizeof g, "g_%s", WN[i]);
        d->GW[i] = need(p, g);
        snprintf(g, sizeof g, "g_%s", BN[i]);
        d->GB[i] = opt(p, g);
    }
    if (c->qk_norm) {
        d->QN[0] = need(p, "qn"), d->QN[1] = need(p, "kn");
        d->GQN[0] = need(p, "g_qn"), d->GQN[1] = need(p, "g_kn");
    }
    if (c->R) {
        d->cos = falloc((size_t)c->P * c->R / 2), d->sin = falloc((size_t)c->P * c->R / 2);
        OK(attn_rope_tables(c->P, c->R, d->inv, d->cos, d->sin));
    }
}
static void adata_free(adata *d) {
    float *f[] = {d->x, d->src, d->dy, d->y, d->probs, d->dx, d->dsrc, d->dbias, d->sbias,
                  d->inv, d->cos, d->sin};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) attn_free(f[i]);
    for (int i = 0; i < 4; i++) attn_free(d->W[i]), attn_free(d->Bs[i]), attn_free(d->GW[i]);
    for (int i = 0; i < 4; i++) attn_free(d->GB[i]);
    for (int i = 0; i < 2; i++) attn_free(d->QN[i]), attn_free(d->GQN[i]);
    attn_free(d->pos);
}

static attn_nn_attn_cfg acfg_of(const acase *c, const adata *d) {
    attn_nn_attn_cfg g = attn_nn_attn_default_cfg(c->C, c->H);
    g.d_kv = c->Ckv, g.n_kv_head = c->Hk, g.d_head = c->D, g.scale = c->scale;
    g.causal = c->causal, g.cross = c->cross, g.window = c->window;
    if (c->R) {
        g.rope_dim = c->R, g.rope_mode = (attn_rope_mode)c->mode, g.rope_P = c->P;
        g.rope_cos = d->cos, g.rope_sin = d->sin;
    }
    return g;
}
static attn_nn_seqs seqs_of(const acase *c, const adata *d) {
    attn_nn_seqs s = attn_nn_seqs_dense(c->B, c->Tq, c->Tk);
    s.kv_len = c->has_kv_len ? c->kv_len : NULL;
    s.off = c->has_off ? c->off : NULL;
    s.pos0 = c->pos0;
    s.pos = d->pos;
    s.bias = d->sbias, s.bias_sb = c->bsb, s.bias_sh = c->bsh, s.bias_sq = c->bsq;
    return s;
}

/* How the projections are stored. Self-attention: q|k|v one fused OUT_IN map, one fused IN_OUT
 * map (GPT-2's c_attn, with an IN_OUT output map), three adjacent OUT_IN views of one buffer, or
 * three separate allocations. Cross-attention likewise for k|v (q separate). */
enum { PJ_FUSED_OI, PJ_FUSED_IO, PJ_ADJACENT, PJ_SEPARATE, PJ_N };
static const char *const PJ_NAME[PJ_N] = {"fused", "fused-io", "adjacent", "separate"};

typedef struct {
    attn_nn_attn w;  /* the projections (and q/k norms) as the block layer sees them */
    mview v[4];      /* q (HD, C), k (KD, Ckv), v (KD, Ckv), o (C, HD) as (out, in) views */
    float *b[4];     /* their biases (HD), (KD), (KD), (C), or NULL */
    float *mem[12];  /* the allocations */
    int nmem;
} alayout;

static float *lmem(alayout *L, size_t n) {
    float *p = fnan(n + 16); /* + 16: two allocations are never adjacent */
    L->mem[L->nmem++] = p;
    return p;
}

/* Weights W (out, in), biases Bs (NULL entries: zeros) laid out by mode, and the q/k norms'
 * weights QN (with c->qk_norm); with W NULL the layout holds zeros (gradients). */
static void alayout_build(alayout *L, const acase *c, int mode, float *const *W, float *const *Bs,
                          float *const *QN) {
    memset(L, 0, sizeof *L);
    const int HD = c->H * c->D, KD = c->Hk * c->D, C = c->C, Ckv = c->Ckv;
    const int outs[4] = {HD, KD, KD, C}, ins[4] = {C, Ckv, Ckv, HD};
    attn_nn_linear *lin[4] = {&L->w.q, &L->w.k, &L->w.v, &L->w.o};
    const bool io = mode == PJ_FUSED_IO;
    const int first = c->cross ? 1 : 0; /* the maps fused / adjacent: q|k|v or k|v */
    int tot = 0;
    for (int i = first; i < 3; i++) tot += outs[i];
    float *m = NULL, *mb = NULL;
    if (mode != PJ_SEPARATE) {
        m = lmem(L, (size_t)tot * ins[first]);
        if (c->pbias) mb = lmem(L, (size_t)tot);
    }
    int row = 0;
    for (int i = 0; i < 4; i++) {
        const bool grouped = mode != PJ_SEPARATE && i >= first && i < 3;
        L->v[i].out = outs[i], L->v[i].in = ins[i];
        if (grouped) {
            L->v[i].p = io ? m + row : m + (size_t)row * ins[i];
            L->v[i].ld = io ? tot : ins[i];
            L->v[i].io = io;
            L->b[i] = mb ? mb + row : NULL;
            row += outs[i];
        } else {
            const bool oio = i == 3 && io;
            L->v[i].p = lmem(L, (size_t)outs[i] * ins[i]);
            L->v[i].ld = oio ? outs[i] : ins[i];
            L->v[i].io = oio;
            L->b[i] = c->pbias ? lmem(L, outs[i]) : NULL;
        }
        mv_set(&L->v[i], W ? W[i] : NULL);
        if (L->b[i])
            for (int j = 0; j < outs[i]; j++) L->b[i][j] = W && Bs[i] ? Bs[i][j] : 0.0f;
        *lin[i] = attn_nn_linear_make(L->v[i].p, L->b[i], ins[i], outs[i],
                                      L->v[i].io ? ATTN_NN_IN_OUT : ATTN_NN_OUT_IN);
    }
    if (c->qk_norm) {
        attn_nn_norm *qn[2] = {&L->w.q_norm, &L->w.k_norm};
        for (int i = 0; i < 2; i++) {
            qn[i]->kind = ATTN_NORM_RMS, qn[i]->dim = c->D, qn[i]->eps = c->eps;
            qn[i]->w = lmem(L, (size_t)c->D);
            for (int j = 0; j < c->D; j++) qn[i]->w[j] = W ? QN[i][j] : 0.0f;
        }
    }
    if (mode == PJ_FUSED_OI || mode == PJ_FUSED_IO) {
        attn_nn_linear f = attn_nn_linear_make(m, mb, ins[first], tot,
                                               io ? ATTN_NN_IN_OUT : ATTN_NN_OUT_IN);
        if (c->cross) {
            L->w.kv = f;
            memset(&L->w.k, 0, sizeof L->w.k), memset(&L->w.v, 0, sizeof L->w.v);
        } else {
            L->w.qkv = f;
            memset(&L->w.q, 0, sizeof L->w.q), memset(&L->w.k, 0, sizeof L->w.k);
            memset(&L->w.v, 0, sizeof L->w.v);
        }
    }
}
static void alayout_free(alayout *L) {
    for (int i = 0; i < L->nmem; i++) attn_free(L->mem[i]);
}

/* The gradients of a layout against the reference's. */
static void agrads_check(const alayout *G, const adata *d, double gs, double mult,
                         const char *what) {
    static const char *const WN[4] = {"g_wq", "g_wk", "g_wv", "g_wo"};
    static const char *const BN[4] = {"g_bq", "g_bk", "g_bv", "g_bo"};
    for (int i = 0; i < 4; i++) {
        const size_t n = (size_t)G->v[i].out * G->v[i].in;
        float *got = mv_get(&G->v[i]), *ref = falloc(n);
        scaled(d->GW[i], n, (float)mult, ref);
        check(got, ref, n, TOL_GRAD, TOL_GRAD * gs * mult, "%s %s", what, WN[i]);
        attn_free(got), attn_free(ref);
        if (G->b[i] && d->GB[i]) {
            float *rb = falloc(G->v[i].out);
            scaled(d->GB[i], G->v[i].out, (float)mult, rb);
            check(G->b[i], rb, G->v[i].out, TOL_GRAD, TOL_GRAD * gs * mult, "%s %s", what, BN[i]);
            attn_free(rb);
        }
    }
    const attn_nn_norm *qn[2] = {&G->w.q_norm, &G->w.k_norm};
    static const char *const QNN[2] = {"g_qn", "g_kn"};
    for (int i = 0; i < 2 && d->GQN[0]; i++) {
        const size_t n = (size_t)qn[i]->dim;
        float *ref = falloc(n);
        scaled(d->GQN[i], n, (float)mult, ref);
        check(qn[i]->w, ref, n, TOL_GRAD, TOL_GRAD * gs * mult, "%s %s", what, QNN[i]);
        attn_free(ref);
    }
}

static void attn_run(const acase *c, const adata *d, int mode, int k) {
    const attn_nn_attn_cfg cfg = acfg_of(c, d);
    alayout W, G;
    alayout_build(&W, c, mode, d->W, d->Bs, d->QN);
    alayout_build(&G, c, mode, NULL, NULL, NULL);
    attn_nn_seqs s = seqs_of(c, d);
    const int HD = c->H * c->D, Mq = c->Mq, Mk = c->Mk, C = c->C;
    const size_t nP = (size_t)c->B * c->H * c->Tq * c->Tk, MC = (size_t)Mq * C;
    float *dbias = c->sbias ? fnan(nP) : NULL;
    s.dbias = dbias;
    attn_nn_attn_acts a;
    a.proj = fnan(attn_nn_attn_proj_floats(&cfg, Mq, Mk));
    a.ctx = fnan((size_t)Mq * HD);
    a.lse = fnan((size_t)T_MAX(c->B * c->Tq, Mq) * c->H);
    a.qk = a.qk_rstd = NULL;
    if (c->qk_norm) {
        a.qk = fnan(attn_nn_attn_qk_floats(&cfg, Mq));
        a.qk_rstd = fnan(attn_nn_attn_qk_floats(&cfg, Mq) / (size_t)c->D);
    }
    float *probs = fnan(nP), *y = fnan(MC);
    attn_nn_run run = attn_nn_default_run();
    run.training = true;
    char what[96];
    snprintf(what, sizeof what, "attn %d %s %s", k, PJ_NAME[mode], bname());
    OK(attn_nn_attention_forward(&run, &cfg, &W.w, &s, d->x, d->src, NULL, &a, probs, 0.0f, y));
    check(y, d->y, MC, TOL_FWD, 0, "%s y", what);
    check(probs, d->probs, nP, TOL_FWD, 0, "%s probs", what);

    const double gs = maxabs(d->dx, MC);
    float *dx = fnan(MC), *dsrc = c->cross ? fzero((size_t)Mk * c->Ckv) : NULL;
    float *work = fnan(attn_nn_attn_work_floats(&cfg, Mq, Mk));
    OK(attn_nn_attention_backward(&run, &cfg, &W.w, &G.w, &s, d->x, d->src, &a, d->dy, dx, false,
                                  dsrc, work));
    check(dx, d->dx, MC, TOL_GRAD, 0, "%s dx", what);
    if (c->cross) check(dsrc, d->dsrc, (size_t)Mk * c->Ckv, TOL_GRAD, 0, "%s dsrc", what);
    if (dbias) check(dbias, d->dbias, nP, TOL_GRAD, TOL_GRAD * gs, "%s dbias", what);
    agrads_check(&G, d, gs, 1.0, what);
    /* Again, accumulating: dx, dsrc and every parameter gradient twice the reference. */
    OK(attn_nn_attention_backward(&run, &cfg, &W.w, &G.w, &s, d->x, d->src, &a, d->dy, dx, true,
                                  dsrc, work));
    float *r2 = falloc(T_MAX(MC, (size_t)Mk * c->Ckv));
    scaled(d->dx, MC, 2.0f, r2);
    check(dx, r2, MC, TOL_GRAD, 0, "%s dx (accumulated)", what);
    if (c->cross) {
        scaled(d->dsrc, (size_t)Mk * c->Ckv, 2.0f, r2);
        check(dsrc, r2, (size_t)Mk * c->Ckv, TOL_GRAD, 0, "%s dsrc (added twice)", what);
    }
    snprintf(what + strlen(what), sizeof what - strlen(what), " x2");
    agrads_check(&G, d, gs, 2.0, what);
    /* Evaluation (no lse, no capture; varlen then runs its sequences in parallel; the q/k norms
     * without their backward buffers) with beta = 1: y0 + attention. */
    attn_nn_attn_acts e = a;
    e.lse = e.qk = e.qk_rstd = NULL;
    float *y1 = fdup(d->dy, MC);
    for (size_t i = 0; i < MC; i++) r2[i] = d->dy[i] + d->y[i];
    OK(attn_nn_attention_forward(&run, &cfg, &W.w, &s, d->x, d->src, NULL, &e, NULL, 1.0f, y1));
    check(y1, r2, MC, TOL_FWD, 0, "attn %d %s %s eval, beta=1", k, PJ_NAME[mode], bname());
    attn_free(y1), attn_free(r2), attn_free(dx), attn_free(dsrc), attn_free(work);
    attn_free(dbias), attn_free(a.proj), attn_free(a.ctx), attn_free(a.lse), attn_free(probs);
    attn_free(y), attn_free(a.qk), attn_free(a.qk_rstd);
    alayout_free(&W), alayout_free(&G);
}

static void test_attention(void **state) {
    (void)state;
    const int n = ncases("attn");
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        for (int k = 0; k < n; k++) {
            acase c;
            adata d;
            acase_load(k, &c, &d);
            for (int m = 0; m < PJ_N; m++) attn_run(&c, &d, m, k);
            adata_free(&d);
        }
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* A KV cache over B sequences of capacity maxT: separate k and v arrays (ld 0) or shared rows
 * (v = k + H_kv·D, ld = 2·H_kv·D). Unused rows hold NaN: they must never be read. */
static attn_nn_kv kv_make(int B, int maxT, int KD, bool shared, float **mem) {
    attn_nn_kv kv;
    memset(&kv, 0, sizeof kv);
    kv.B = B, kv.max_T = maxT;
    *mem = fnan((size_t)B * maxT * KD * 2);
    kv.k = *mem;
    if (shared)
        kv.v = kv.k + KD, kv.ld = 2 * KD;
    else
        kv.v = kv.k + (size_t)B * maxT * KD, kv.ld = 0;
    return kv;
}

/* Rows t0 .. t0 + n − 1 of each of B sequences of T rows of width C. */
static void gather(const float *a, int B, int T, int C, int t0, int n, float *out) {
    for (int b = 0; b < B; b++)
        memcpy(out + (size_t)b * n * C, a + ((size_t)b * T + t0) * C, (size_t)n * C * 4);
}
static void scatter(const float *a, int B, int T, int C, int t0, int n, float *out) {
    for (int b = 0; b < B; b++)
        memcpy(out + ((size_t)b * T + t0) * C, a + (size_t)b * n * C, (size_t)n * C * 4);
}

/* Decoding with a cache: a prompt of T/2 rows, then a chunk of 2 while >= 3 remain, then single
 * tokens, each call with pos0 = the cache's length; the outputs (and probabilities over the
 * cache) equal the full causal forward's. */
static void attn_decode(const acase *c, const adata *d, int mode, bool shared, int extra, int k) {
    const attn_nn_attn_cfg cfg = acfg_of(c, d);
    alayout W;
    alayout_build(&W, c, mode, d->W, d->Bs, d->QN);
    const int B = c->B, T = c->Tq, C = c->C, H = c->H, KD = c->Hk * c->D;
    float *mem;
    const attn_nn_kv kv = kv_make(B, T + extra, KD, shared, &mem);
    float *out = fnan((size_t)B * T * C), *xin = falloc((size_t)B * T * C);
    float *yo = falloc((size_t)B * T * C);
    attn_nn_run run = attn_nn_default_run();
    for (int t0 = 0; t0 < T;) {
        const int n = t0 == 0 ? T_MAX(1, T / 2) : (T - t0 >= 3 ? 2 : 1);
        gather(d->x, B, T, C, t0, n, xin);
        attn_nn_seqs s = attn_nn_seqs_dense(B, n, n);
        s.pos0 = t0;
        /* kv_len counts the cache's keys but must not exceed the keys visible to the call
         * (pos0 + Tq, the kernel's Tk): clamp it (see the report) */
        int32_t kvl[8];
        for (int b = 0; c->has_kv_len && b < B; b++) kvl[b] = T_MIN(c->kv_len[b], t0 + n);
        s.kv_len = c->has_kv_len ? kvl : NULL;
        if (d->sbias) { /* the bias rows of these queries, over the cache's keys */
            s.bias = d->sbias + (ptrdiff_t)t0 * c->bsq;
            s.bias_sb = c->bsb, s.bias_sh = c->bsh, s.bias_sq = c->bsq;
        }
        attn_nn_attn_acts a = {fnan(attn_nn_attn_proj_floats(&cfg, B * n, 0)),
                               fnan((size_t)B * n * H * c->D), NULL, NULL, NULL};
        const int Tk = t0 + n;
        const size_t np = (size_t)B * H * n * Tk;
        float *probs = fnan(np), *pref = falloc(np);
        OK(attn_nn_attention_forward(&run, &cfg, &W.w, &s, xin, NULL, &kv, &a, probs, 0.0f, yo));
        scatter(yo, B, T, C, t0, n, out);
        for (int bh = 0; bh < B * H; bh++) /* the reference's rows t0.., columns < Tk */
            for (int i = 0; i < n; i++)
                memcpy(pref + ((size_t)bh * n + i) * Tk, d->probs + ((size_t)bh * T + t0 + i) * T,
                       (size_t)Tk * 4);
        check(probs, pref, np, TOL_FWD, 0, "attn %d decode rows %d..%d probs (B, H, %d, %d)", k,
              t0, t0 + n - 1, n, Tk);
        attn_free(a.proj), attn_free(a.ctx), attn_free(probs), attn_free(pref);
        t0 += n;
    }
    check(out, d->y, (size_t)B * T * C, TOL_FWD, 0, "attn %d decode %s %s cache%s %s", k,
          PJ_NAME[mode], shared ? "shared-row" : "separate", extra ? "+spare" : "", bname());
    attn_free(out), attn_free(xin), attn_free(yo), attn_free(mem);
    alayout_free(&W);
}

/* Cross-attention from a cache filled once by attn_nn_attention_cross_kv: all queries at once and
 * one query per call equal the uncached forward. */
static void attn_cross_cached(const acase *c, const adata *d, int mode, bool shared, int extra,
                              int k) {
    const attn_nn_attn_cfg cfg = acfg_of(c, d);
    alayout W;
    alayout_build(&W, c, mode, d->W, d->Bs, d->QN);
    const int B = c->B, Tq = c->Tq, Tk = c->Tk, C = c->C, KD = c->Hk * c->D;
    float *mem;
    const attn_nn_kv kv = kv_make(B, Tk + extra, KD, shared, &mem);
    attn_nn_run run = attn_nn_default_run();
    OK(attn_nn_attention_cross_kv(&run, &cfg, &W.w, B, Tk, d->src, &kv));
    float *y = fnan((size_t)B * Tq * C), *xin = falloc((size_t)B * C), *yo = falloc((size_t)B * C);
    attn_nn_attn_acts a = {fnan(attn_nn_attn_proj_floats(&cfg, B * Tq, 0)),
                           fnan((size_t)B * Tq * c->H * c->D), NULL, NULL, NULL};
    attn_nn_seqs s = seqs_of(c, d);
    OK(attn_nn_attention_forward(&run, &cfg, &W.w, &s, d->x, NULL, &kv, &a, NULL, 0.0f, y));
    char what[96];
    snprintf(what, sizeof what, "attn %d cross cached %s %s%s %s", k, PJ_NAME[mode],
             shared ? "shared-row" : "separate", extra ? "+spare" : "", bname());
    check(y, d->y, (size_t)B * Tq * C, TOL_FWD, 0, "%s", what);
    float *y1 = fnan((size_t)B * Tq * C);
    for (int t = 0; t < Tq; t++) {
        gather(d->x, B, Tq, C, t, 1, xin);
        attn_nn_seqs s1 = s;
        s1.Tq = 1;
        if (d->sbias) s1.bias = d->sbias + (ptrdiff_t)t * c->bsq;
        OK(attn_nn_attention_forward(&run, &cfg, &W.w, &s1, xin, NULL, &kv, &a, NULL, 0.0f, yo));
        scatter(yo, B, Tq, C, t, 1, y1);
    }
    check(y1, d->y, (size_t)B * Tq * C, TOL_FWD, 0, "%s one query per call", what);
    attn_free(y), attn_free(y1), attn_free(xin), attn_free(yo), attn_free(a.proj);
    attn_free(a.ctx), attn_free(mem);
    alayout_free(&W);
}

static void test_attention_cache(void **state) {
    (void)state;
    const int n = ncases("attn");
    int ndec = 0, ncross = 0;
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        for (int k = 0; k < n; k++) {
            acase c;
            adata d;
            acase_load(k, &c, &d);
            const bool dec = !c.cross && c.causal && !c.has_off && !c.has_pos && c.Tq >= 3;
            for (int m = 0; m < PJ_N; m++)
                for (int lay = 0; lay < 4; lay++) {
                    /* under valgrind: two projection layouts, two cache layouts */
                    if (tu_valgrind() && (m == PJ_FUSED_IO || m == PJ_ADJACENT || lay == 1 ||
                                          lay == 2))
                        continue;
                    const bool shared = lay & 1;
                    const int extra = lay & 2 ? 3 : 0;
                    if (dec) attn_decode(&c, &d, m, shared, extra, k), ndec++;
                    if (c.cross) attn_cross_cached(&c, &d, m, shared, extra, k), ncross++;
                }
            adata_free(&d);
        }
    }
    assert_true(ndec > 0 && ncross > 0);
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* ==== sub-layers ============================================================================= */

/* A sub-layer and its activations with every buffer a backward needs; the weights from named
 * tensors of the reference (prefix) or, with prefix NULL, random (rng) / zero (gradients). */
typedef struct {
    attn_nn_sublayer S, G; /* the weights' and the gradients' views */
    attn_nn_attn_cfg cfg;  /* S.acfg (attention sub-layers) */
    attn_nn_sub_acts A;    /* over M rows of width C (attention keys: Mk rows) */
    float *cos, *sin;      /* (P, R/2) rotary tables */
    float *mem[48];        /* the allocations */
    int nmem, M, Mk, C;
} sub_t;

static float *smem(sub_t *t, size_t n, float v) {
    float *p = ffill(n, v);
    t->mem[t->nmem++] = p;
    return p;
}
/* Tensor name of the reference (prefix) or random in [-0.3, 0.3) (rng) into a new buffer. */
static float *sparam(sub_t *t, const char *prefix, const char *name, size_t n, tu_rng *r,
                     float center) {
    float *p = smem(t, n, 0.0f);
    if (prefix) {
        float *d = need(prefix, name);
        memcpy(p, d, n * 4);
        attn_free(d);
    } else {
        for (size_t i = 0; i < n; i++) p[i] = center + tu_uniform(r, -0.3f, 0.3f);
    }
    return p;
}

/* What a sub-layer is: its f (attention or FFN), wiring, norm, dropout and sizes. */
typedef struct {
    bool attn, pre_norm, cross, causal;
    bool qk_norm;     /* Qwen3's q/k RMSNorms (weights qn, kn; eps 1e-6) */
    int window;       /* sliding window (0: none) */
    attn_norm_kind norm;
    float eps, p_drop;
    uint32_t site;
    int B, Tq, Tk, C, Ckv, H, Hk, D, R, mode, P, F;
    attn_ffn_kind fkind;
    attn_act act;
    bool pbias;       /* projection / FFN biases */
    const float *inv; /* (R/2) rotary inv_freq */
} sub_spec;

static void sub_build(sub_t *t, const sub_spec *sp, const char *prefix, tu_rng *r) {
    memset(t, 0, sizeof *t);
    const int C = sp->C, M = sp->B * sp->Tq, Mk = sp->cross ? sp->B * sp->Tk : M;
    t->M = M, t->Mk = Mk, t->C = C;
    attn_nn_sublayer *S = &t->S, *G = &t->G;
    S->kind = G->kind = sp->attn ? ATTN_SUB_ATTN : ATTN_SUB_FFN;
    S->pre_norm = G->pre_norm = sp->pre_norm;
    S->p_drop = G->p_drop = sp->p_drop;
    S->site = G->site = sp->site;
    S->norm.kind = G->norm.kind = sp->norm;
    S->norm.dim = G->norm.dim = C;
    S->norm.eps = G->norm.eps = sp->eps;
    S->norm.w = sparam(t, prefix, "norm_w", C, r, 1.0f);
    G->norm.w = smem(t, C, 0.0f);
    if (sp->norm == ATTN_NORM_LAYER) {
        S->norm.b = sparam(t, prefix, "norm_b", C, r, 0.0f);
        G->norm.b = smem(t, C, 0.0f);
    }
    attn_nn_sub_acts *A = &t->A;
    const size_t MC = (size_t)M * C;
    A->ln = smem(t, MC, NAN), A->res = smem(t, MC, NAN), A->rstd = smem(t, M, NAN);
    A->mean = sp->norm == ATTN_NORM_LAYER ? smem(t, M, NAN) : NULL;
    A->mask = (uint64_t *)smem(t, 2 * attn_nn_dropout_words(M, C), 0.0f);
    if (sp->attn) {
        attn_nn_attn_cfg *c = &t->cfg;
        *c = attn_nn_attn_default_cfg(C, sp->H);
        c->d_kv = sp->Ckv, c->n_kv_head = sp->Hk, c->d_head = sp->D, c->causal = sp->causal;
        c->cross = sp->cross, c->window = sp->window;
        if (sp->R) {
            t->cos = smem(t, (size_t)sp->P * sp->R / 2, 0.0f);
            t->sin = smem(t, (size_t)sp->P * sp->R / 2, 0.0f);
            OK(attn_rope_tables(sp->P, sp->R, sp->inv, t->cos, t->sin));
            c->rope_dim = sp->R, c->rope_mode = (attn_rope_mode)sp->mode, c->rope_P = sp->P;
            c->rope_cos = t->cos, c->rope_sin = t->sin;
        }
        S->acfg = G->acfg = c;
        const int HD = sp->H * sp->D, KD = sp->Hk * sp->D;
        static const char *const WN[4] = {"wq", "wk", "wv", "wo"};
        static const char *const BN[4] = {"bq", "bk", "bv", "bo"};
        const int outs[4] = {HD, KD, KD, C}, ins[4] = {C, sp->Ckv, sp->Ckv, HD};
        attn_nn_linear *ls[4] = {&S->attn.q, &S->attn.k, &S->attn.v, &S->attn.o};
        attn_nn_linear *gl[4] = {&G->attn.q, &G->attn.k, &G->attn.v, &G->attn.o};
        for (int i = 0; i < 4; i++) {
            const size_t nw = (size_t)outs[i] * ins[i];
            float *b = sp->pbias ? sparam(t, prefix, BN[i], outs[i], r, 0.0f) : NULL;
            *ls[i] = attn_nn_linear_make(sparam(t, prefix, WN[i], nw, r, 0.0f), b, ins[i],
                                         outs[i], ATTN_NN_OUT_IN);
            *gl[i] = attn_nn_linear_make(smem(t, nw, 0.0f), b ? smem(t, outs[i], 0.0f) : NULL,
                                         ins[i], outs[i], ATTN_NN_OUT_IN);
        }
        if (sp->qk_norm) {
            static const char *const QN[2] = {"qn", "kn"};
            attn_nn_norm *sn[2] = {&S->attn.q_norm, &S->attn.k_norm};
            attn_nn_norm *gn[2] = {&G->attn.q_norm, &G->attn.k_norm};
            for (int i = 0; i < 2; i++) {
                sn[i]->kind = gn[i]->kind = ATTN_NORM_RMS;
                sn[i]->dim = gn[i]->dim = sp->D;
                sn[i]->eps = gn[i]->eps = 1e-6f;
                sn[i]->w = sparam(t, prefix, QN[i], (size_t)sp->D, r, 1.0f);
                gn[i]->w = smem(t, (size_t)sp->D, 0.0f);
            }
            const size_t nqk = attn_nn_attn_qk_floats(c, M);
            A->attn.qk = smem(t, nqk, NAN);
            A->attn.qk_rstd = smem(t, nqk / (size_t)sp->D, NAN);
        }
        A->attn.proj = smem(t, attn_nn_attn_proj_floats(c, M, Mk), NAN);
        A->attn.ctx = smem(t, (size_t)M * HD, NAN);
        A->attn.lse = smem(t, (size_t)sp->B * sp->H * sp->Tq, NAN);
    } else {
        const int Fd = sp->F;
        attn_nn_ffn *f = &S->ffn, *g = &G->ffn;
        f->kind = g->kind = sp->fkind;
        f->act = g->act = sp->act;
        const char *names[3][2] = {{"w_up", "b_up"}, {"w_gate", "b_gate"}, {"w_down", "b_down"}};
        attn_nn_linear *fl[3] = {&f->up, &f->gate, &f->down};
        attn_nn_linear *gl[3] = {&g->up, &g->gate, &g->down};
        for (int i = 0; i < 3; i++) {
            if (i == 1 && sp->fkind != ATTN_FFN_GATED) continue;
            const int in = i == 2 ? Fd : C, out = i == 2 ? C : Fd;
            float *b = sp->pbias ? sparam(t, prefix, names[i][1], out, r, 0.0f) : NULL;
            *fl[i] = attn_nn_linear_make(sparam(t, prefix, names[i][0], (size_t)in * out, r, 0.0f),
                                         b, in, out, ATTN_NN_OUT_IN);
            *gl[i] = attn_nn_linear_make(smem(t, (size_t)in * out, 0.0f),
                                         b ? smem(t, out, 0.0f) : NULL, in, out, ATTN_NN_OUT_IN);
        }
        attn_nn_ffn_acts_view(f, M, true, smem(t, attn_nn_ffn_acts_floats(f, M, true), NAN),
                              &A->ffn);
    }
}
static void sub_free(sub_t *t) {
    for (int i = 0; i < t->nmem; i++) attn_free(t->mem[i]);
}

static sub_spec sub_spec_of(json_t *o) {
    sub_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.attn = ji(o, "kind") == 0;
    sp.pre_norm = jb(o, "pre_norm");
    sp.norm = (attn_norm_kind)ji(o, "norm");
    sp.eps = (float)jd(o, "eps");
    sp.p_drop = (float)jd(o, "p_drop");
    sp.site = (uint32_t)ji(o, "site");
    sp.B = ji(o, "B"), sp.Tq = ji(o, "Tq"), sp.C = ji(o, "C");
    if (sp.attn) {
        sp.H = ji(o, "H"), sp.Hk = ji(o, "Hk"), sp.D = ji(o, "D"), sp.causal = jb(o, "causal");
        sp.cross = jb(o, "cross"), sp.Tk = ji(o, "Tk"), sp.Ckv = ji(o, "Ckv");
        sp.R = ji(o, "R"), sp.mode = ji(o, "mode"), sp.P = ji(o, "P");
        sp.window = ji(o, "window"), sp.qk_norm = jb(o, "qk_norm");
    } else {
        sp.fkind = (attn_ffn_kind)ji(o, "fkind"), sp.act = (attn_act)ji(o, "act");
        sp.F = ji(o, "F");
        sp.pbias = true;
    }
    return sp;
}

static void test_sublayer(void **state) {
    (void)state;
    const int n = ncases("sub");
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        for (int k = 0; k < n; k++) {
            json_t *o = case_meta("sub", k);
            sub_spec sp = sub_spec_of(o);
            attn_nn_run run = attn_nn_default_run();
            run.training = true;
            run.seed = (uint64_t)ji(o, "seed"), run.step = (uint64_t)ji(o, "step");
            const attn_nn_rows rows = {ji(o, "row0"), ji(o, "t_local"), ji(o, "t_global")};
            int32_t kvl[8];
            const bool has_kvl = jints(o, "kv_len", kvl, 8) >= 0;
            json_decref(o);
            char p[32];
            snprintf(p, sizeof p, "sub.%d", k);
            float *inv = opt(p, "inv_freq");
            sp.inv = inv;
            sub_t t;
            sub_build(&t, &sp, p, NULL);
            float *x = need(p, "x"), *dy = need(p, "dy"), *outr = need(p, "out");
            float *dxr = need(p, "dx"), *src = opt(p, "src"), *dsrcr = opt(p, "dsrc");
            attn_nn_seqs s = attn_nn_seqs_dense(sp.B, sp.Tq, sp.cross ? sp.Tk : sp.Tq);
            s.kv_len = has_kvl ? kvl : NULL;
            const size_t MC = (size_t)t.M * sp.C;
            float *tmp = fnan(MC);
            char what[96];
            snprintf(what, sizeof what, "sub %d %s-norm %s%s %s", k, sp.pre_norm ? "pre" : "post",
                     sp.attn ? (sp.cross ? "cross-attention" : "attention") : "ffn",
                     sp.p_drop > 0 ? " dropout" : "", bname());
            OK(attn_nn_sub_forward(&run, &t.S, &s, t.M, rows, x, src, NULL, &t.A, NULL, tmp));
            float *out = attn_nn_sub_output(&t.S, &t.A);
            assert_ptr_equal(out, sp.pre_norm ? t.A.res : t.A.ln);
            check(out, outr, MC, TOL_FWD, 0, "%s out", what);
            float *outc = fdup(out, MC);

            const double gs = maxabs(dxr, MC);
            float *G = fdup(dy, MC), *dsrc = sp.cross ? fzero((size_t)t.Mk * sp.Ckv) : NULL;
            float *work = fnan(attn_nn_sub_work_floats(&t.S, t.M, t.Mk));
            OK(attn_nn_sub_backward(&run, &t.S, &t.G, &s, t.M, x, src, &t.A, G, dsrc, work));
            check(G, dxr, MC, TOL_GRAD, 0, "%s dx", what);
            if (sp.cross) check(dsrc, dsrcr, (size_t)t.Mk * sp.Ckv, TOL_GRAD, 0, "%s dsrc", what);
            /* every parameter gradient: the norm's, then f's */
            struct {
                const char *name;
                const float *got;
                size_t n;
            } gl[16];
            int ng = 0;
            gl[ng].name = "g_norm_w", gl[ng].got = t.G.norm.w, gl[ng++].n = sp.C;
            if (t.G.norm.b) gl[ng].name = "g_norm_b", gl[ng].got = t.G.norm.b, gl[ng++].n = sp.C;
            if (sp.attn) {
                const attn_nn_linear *l4[4] = {&t.G.attn.q, &t.G.attn.k, &t.G.attn.v,
                                               &t.G.attn.o};
                static const char *const N4[4] = {"g_wq", "g_wk", "g_wv", "g_wo"};
                for (int i = 0; i < 4; i++)
                    gl[ng].name = N4[i], gl[ng].got = l4[i]->w,
                    gl[ng++].n = (size_t)l4[i]->in * l4[i]->out;
                if (sp.qk_norm) {
                    gl[ng].name = "g_qn", gl[ng].got = t.G.attn.q_norm.w, gl[ng++].n = sp.D;
                    gl[ng].name = "g_kn", gl[ng].got = t.G.attn.k_norm.w, gl[ng++].n = sp.D;
                }
            } else {
                const attn_nn_linear *l3[3] = {&t.G.ffn.up, &t.G.ffn.gate, &t.G.ffn.down};
                static const char *const N3[3][2] = {
                    {"g_w_up", "g_b_up"}, {"g_w_gate", "g_b_gate"}, {"g_w_down", "g_b_down"}};
                for (int i = 0; i < 3; i++) {
                    if (!l3[i]->w) continue;
                    gl[ng].name = N3[i][0], gl[ng].got = l3[i]->w;
                    gl[ng++].n = (size_t)l3[i]->in * l3[i]->out;
                    gl[ng].name = N3[i][1], gl[ng].got = l3[i]->b, gl[ng++].n = l3[i]->out;
                }
            }
            for (int i = 0; i < ng; i++) {
                float *ref = need(p, gl[i].name);
                check(gl[i].got, ref, gl[i].n, TOL_GRAD, TOL_GRAD * gs, "%s %s", what,
                      gl[i].name);
                attn_free(ref);
            }
            /* The run-state allocator of the families (mdl_sub_acts_alloc) sizes every buffer,
             * the q/k norms' included: its acts give the same bits. */
            if (sp.attn) {
                attn_arena ar;
                memset(&ar, 0, sizeof ar);
                attn_nn_sub_acts A2;
                size_t wn = 0;
                mdl_sub_acts_alloc(&ar, &t.S, t.M, t.Mk, &A2, &wn);
                assert_false(ar.oom);
                assert_true(wn >= attn_nn_sub_work_floats(&t.S, t.M, t.Mk));
                assert_true(!sp.qk_norm || (A2.attn.qk && A2.attn.qk_rstd));
                float *G2 = fdup(dy, MC), *w2 = fnan(wn);
                float *d2 = sp.cross ? fzero((size_t)t.Mk * sp.Ckv) : NULL;
                OK(attn_nn_sub_forward(&run, &t.S, &s, t.M, rows, x, src, NULL, &A2, NULL, tmp));
                OK(attn_nn_sub_backward(&run, &t.S, NULL, &s, t.M, x, src, &A2, G2, d2, w2));
                if (!same_bits(attn_nn_sub_output(&t.S, &A2), outc, MC * 4) ||
                    !same_bits(G2, G, MC * 4))
                    fail_msg("%s: acts from mdl_sub_acts_alloc differ", what);
                attn_free(G2), attn_free(w2), attn_free(d2);
                attn_arena_free(&ar);
            }
            /* pre-norm in place (A->res = x: the stream updated in place): the same bits */
            if (sp.pre_norm) {
                float *xs = fdup(x, MC), *res = t.A.res;
                t.A.res = xs;
                OK(attn_nn_sub_forward(&run, &t.S, &s, t.M, rows, xs, src, NULL, &t.A, NULL, tmp));
                if (!same_bits(xs, outc, MC * 4)) fail_msg("%s: in place differs", what);
                t.A.res = res;
                attn_free(xs);
            }
            attn_free(outc), attn_free(G), attn_free(dsrc), attn_free(work), attn_free(tmp);
            attn_free(x), attn_free(dy), attn_free(outr), attn_free(dxr), attn_free(src);
            attn_free(dsrcr), attn_free(inv);
            sub_free(&t);
        }
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* ==== dropout ================================================================================ */

/* The header's definition, written out again. */
static uint64_t t_mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static bool t_kept(const attn_nn_run *run, uint32_t site, float p, uint64_t g, int C, int c) {
    const uint64_t key = t_mix64(t_mix64(t_mix64(run->seed) ^ run->step) ^ site);
    const uint64_t thr = (uint64_t)((double)p * 16777216.0 + 0.5);
    const uint64_t idx = g * (uint64_t)C + (uint64_t)c;
    return (t_mix64(key ^ (idx * 0xD6E8FEB86659FD93ull)) >> 40) >= thr;
}
static uint64_t t_global(attn_nn_rows r, int row) {
    return (uint64_t)((r.row0 + row / r.t_local) * r.t_global + row % r.t_local);
}

static void test_dropout(void **state) {
    (void)state;
    const int M = 37, C = 70;
    const size_t n = (size_t)M * C, words = attn_nn_dropout_words(M, C);
    assert_int_equal(words, (size_t)M * 2);
    assert_int_equal(attn_nn_dropout_words(3, 64), 3);
    assert_int_equal(attn_nn_dropout_words(3, 65), 6);
    assert_int_equal(attn_nn_dropout_words(0, 5), 0);
    const attn_nn_rows pl = attn_nn_rows_plain(M), p0 = attn_nn_rows_plain(0);
    assert_true(pl.row0 == 0 && pl.t_local == M && pl.t_global == M);
    assert_true(p0.t_local == 1 && p0.t_global == 1);
    tu_rng r = {5};
    float *y = falloc(n), *base = falloc(n), *g = falloc(n);
    tu_fill(&r, y, n, -1, 1), tu_fill(&r, base, n, -1, 1), tu_fill(&r, g, n, -1, 1);
    float *out = falloc(n), *flat = falloc(n), *want = falloc(n);
    uint64_t *mask = calloc(words, 8), *wmask = calloc(words, 8);
    attn_nn_run run = attn_nn_default_run();
    run.training = true, run.seed = 7, run.step = 3;
    const float p = 0.1f, scale = 1.0f / (1.0f - p);
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        /* plain rows: attn_encdec_dropout over the flat buffer, bit for bit */
        attn_nn_dropout_fwd(&run, 5, p, pl, M, C, NULL, y, out, mask);
        memcpy(flat, y, n * 4);
        attn_encdec_dropout(7, 3, 5, p, n, flat);
        if (!same_bits(out, flat, n * 4)) fail_msg("%s: not attn_encdec_dropout's mask", bname());
        /* a replica's rows: sequences 2.. of 8 rows, 5 of them here; against the formula */
        const attn_nn_rows rr = {2, 5, 8};
        attn_nn_dropout_fwd(&run, 9, p, rr, M, C, base, y, out, mask);
        memset(wmask, 0, words * 8);
        int dropped = 0;
        for (int i = 0; i < M; i++)
            for (int c = 0; c < C; c++) {
                const bool kept = t_kept(&run, 9, p, t_global(rr, i), C, c);
                const size_t e = (size_t)i * C + c;
                want[e] = base[e] + (kept ? y[e] * scale : 0.0f);
                if (kept) wmask[(size_t)i * 2 + c / 64] |= 1ull << (c % 64);
                dropped += !kept;
            }
        if (!same_bits(out, want, n * 4)) fail_msg("%s: out != base + drop(y) by formula", bname());
        if (!same_bits(mask, wmask, words * 8)) fail_msg("%s: keep bits differ", bname());
        printf("  dropout %s: %d of %zu dropped (p = %.2f), bit for bit as the formula\n", bname(),
               dropped, n, (double)p);
        /* backward from the bits: drop(g) */
        attn_nn_dropout_bwd(p, M, C, mask, g, out);
        for (size_t e = 0; e < n; e++) {
            const int i = (int)(e / C), c = (int)(e % C);
            want[e] = wmask[(size_t)i * 2 + c / 64] >> (c % 64) & 1 ? g[e] * scale : 0.0f;
        }
        if (!same_bits(out, want, n * 4)) fail_msg("%s: backward differs", bname());
        memcpy(flat, g, n * 4);
        attn_nn_dropout_bwd(p, M, C, mask, flat, flat); /* in place */
        if (!same_bits(flat, want, n * 4)) fail_msg("%s: backward in place differs", bname());
        /* in place forwards: out = y, out = base */
        attn_nn_dropout_fwd(&run, 9, p, rr, M, C, base, y, out, NULL);
        memcpy(flat, y, n * 4);
        attn_nn_dropout_fwd(&run, 9, p, rr, M, C, base, flat, flat, NULL);
        if (!same_bits(flat, out, n * 4)) fail_msg("out == y differs");
        memcpy(flat, base, n * 4);
        attn_nn_dropout_fwd(&run, 9, p, rr, M, C, flat, y, flat, NULL);
        if (!same_bits(flat, out, n * 4)) fail_msg("out == base differs");
        /* p = 0: exactly base + y, every bit kept; p = 1: nothing kept */
        attn_nn_dropout_fwd(&run, 9, 0.0f, rr, M, C, base, y, out, mask);
        for (size_t e = 0; e < n; e++) want[e] = base[e] + y[e];
        if (!same_bits(out, want, n * 4)) fail_msg("p = 0 is not base + y");
        for (size_t w = 0; w < words; w++)
            if (mask[w] != ~0ull) fail_msg("p = 0: a dropped bit");
        attn_nn_dropout_fwd(&run, 9, 1.0f, rr, M, C, base, y, out, mask);
        if (!same_bits(out, base, n * 4)) fail_msg("p = 1 keeps something");
        for (size_t w = 0; w < words; w++)
            if (mask[w]) fail_msg("p = 1: a kept bit");
        /* another seed, step or site: another mask */
        attn_nn_dropout_fwd(&run, 9, p, rr, M, C, NULL, y, out, mask);
        const uint64_t keys[3][3] = {{8, 3, 9}, {7, 4, 9}, {7, 3, 10}};
        for (int kk = 0; kk < 3; kk++) {
            attn_nn_run r2 = run;
            r2.seed = keys[kk][0], r2.step = keys[kk][1];
            attn_nn_dropout_fwd(&r2, (uint32_t)keys[kk][2], p, rr, M, C, NULL, y, flat, wmask);
            if (same_bits(mask, wmask, words * 8)) fail_msg("key %d gives the same mask", kk);
        }
    }
    /* the dropped fraction (threaded size: 76800 elements) */
    {
        const int M2 = 256, C2 = 300;
        const size_t n2 = (size_t)M2 * C2;
        float *a = ffill(n2, 1.0f);
        attn_nn_dropout_fwd(&run, 1, 0.1f, attn_nn_rows_plain(M2), M2, C2, NULL, a, a, NULL);
        size_t z = 0;
        for (size_t e = 0; e < n2; e++) z += a[e] == 0.0f;
        const double frac = (double)z / n2, sd = sqrt(0.1 * 0.9 / n2);
        printf("  dropped fraction %.5f (p = 0.1, 5 sigma = %.5f)\n", frac, 5 * sd);
        assert_true(fabs(frac - 0.1) < 5 * sd);
        attn_free(a);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
    attn_free(y), attn_free(base), attn_free(g), attn_free(out), attn_free(flat);
    attn_free(want), free(mask), free(wmask);
}

/* Two pre-norm sub-layers (causal GQA attention with RoPE, then SwiGLU), both with dropout. */
static void block_spec(sub_spec sp[2], int B, int T, int C, const float *inv) {
    memset(sp, 0, 2 * sizeof *sp);
    sp[0].attn = true, sp[0].pre_norm = true, sp[0].causal = true, sp[0].norm = ATTN_NORM_RMS;
    sp[0].eps = 1e-6f, sp[0].p_drop = 0.3f, sp[0].site = 1;
    sp[0].B = B, sp[0].Tq = sp[0].Tk = T, sp[0].C = sp[0].Ckv = C;
    sp[0].H = 4, sp[0].Hk = 2, sp[0].D = C / 4, sp[0].R = 8, sp[0].P = 128, sp[0].inv = inv;
    sp[0].pbias = true;
    sp[1] = sp[0];
    sp[1].attn = false, sp[1].site = 2, sp[1].F = 2 * C, sp[1].fkind = ATTN_FFN_GATED;
    sp[1].act = ATTN_ACT_SILU;
}

/* Forward of the two sub-layers over s (M rows) numbered by rows; returns the output. */
static const float *block_fwd(const attn_nn_run *run, sub_t t[2], const attn_nn_seqs *s, int M,
                              attn_nn_rows rows, const float *x, float *tmp) {
    OK(attn_nn_sub_forward(run, &t[0].S, s, M, rows, x, NULL, NULL, &t[0].A, NULL, tmp));
    OK(attn_nn_sub_forward(run, &t[1].S, s, M, rows, t[0].A.res, NULL, NULL, &t[1].A, NULL, tmp));
    return t[1].A.res;
}

static void fill_inv(float *inv, int R, double theta) {
    for (int i = 0; i < R / 2; i++) inv[i] = (float)(1.0 / pow(theta, 2.0 * i / R));
}

/* The masks (and so the outputs) of a batch do not depend on how it is split: each sequence
 * alone with rows {b, T, T}, a replica of sequences 1..2 trimmed to 9 of the batch's 10 rows with
 * {1, 9, 10}, packed rows one sequence at a time with {off[b], 1, 1}. Every call has more than 8
 * rows: on the SIMD backends attn_gemm's direct path for <= 8 rows rounds differently from its
 * packed path (test_linear_packed measures it), so a row's bits are independent of its call's
 * other rows only among calls of > 8 rows (or with pre-packed weights). */
static void test_dropout_rows(void **state) {
    (void)state;
    const int B = 3, T = 10, C = 32, M = B * T;
    float inv[4];
    fill_inv(inv, 8, 10000.0);
    sub_spec sp[2];
    attn_nn_run run = attn_nn_default_run();
    run.training = true, run.seed = 11, run.step = 2;
    const size_t wpr = attn_nn_dropout_words(1, C);
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        tu_rng r = {77};
        sub_t all[2], one[2];
        block_spec(sp, B, T, C, inv);
        for (int i = 0; i < 2; i++) sub_build(&all[i], &sp[i], NULL, &r);
        float *x = falloc((size_t)M * C), *tmp = falloc((size_t)M * C);
        tu_fill(&r, x, (size_t)M * C, -1, 1);
        attn_nn_seqs s = attn_nn_seqs_dense(B, T, T);
        const float *yall = block_fwd(&run, all, &s, M, attn_nn_rows_plain(T), x, tmp);
        /* one sequence per call: the same weights (copied views), B = 1 buffers */
        block_spec(sp, 1, T, C, inv);
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < 2; i++) {
                tu_rng dummy = {1};
                sub_build(&one[i], &sp[i], NULL, &dummy);
                one[i].S = all[i].S;
                if (one[i].S.acfg) one[i].S.acfg = all[i].S.acfg;
            }
            const attn_nn_seqs s1 = attn_nn_seqs_dense(1, T, T);
            const attn_nn_rows rw = {b, T, T};
            const float *y1 = block_fwd(&run, one, &s1, T, rw, x + (size_t)b * T * C, tmp);
            if (!same_bits(y1, yall + (size_t)b * T * C, (size_t)T * C * 4))
                fail_msg("%s: sequence %d alone differs from the batch", bname(), b);
            for (int i = 0; i < 2; i++)
                if (!same_bits(one[i].A.mask, all[i].A.mask + (size_t)b * T * wpr, T * wpr * 8))
                    fail_msg("%s: sequence %d's mask differs", bname(), b);
            for (int i = 0; i < 2; i++) sub_free(&one[i]);
        }
        /* a replica: sequences 1..2, trimmed to 9 rows (causal: rows < 9 see only rows < 9) */
        {
            const int Tl = 9, Bl = 2;
            block_spec(sp, Bl, Tl, C, inv);
            for (int i = 0; i < 2; i++) {
                tu_rng dummy = {1};
                sub_build(&one[i], &sp[i], NULL, &dummy);
                one[i].S = all[i].S;
            }
            float *xl = falloc((size_t)Bl * Tl * C);
            for (int b = 0; b < Bl; b++)
                memcpy(xl + (size_t)b * Tl * C, x + (size_t)(1 + b) * T * C, (size_t)Tl * C * 4);
            const attn_nn_seqs sl = attn_nn_seqs_dense(Bl, Tl, Tl);
            const attn_nn_rows rw = {1, Tl, T};
            const float *yl = block_fwd(&run, one, &sl, Bl * Tl, rw, xl, tmp);
            for (int b = 0; b < Bl; b++) {
                for (int t = 0; t < Tl; t++) {
                    const size_t lr = (size_t)b * Tl + t, gr = (size_t)(1 + b) * T + t;
                    for (int i = 0; i < 2; i++)
                        if (!same_bits(one[i].A.mask + lr * wpr, all[i].A.mask + gr * wpr,
                                       wpr * 8))
                            fail_msg("%s: replica row %zu's mask differs", bname(), lr);
                    if (!same_bits(yl + lr * C, yall + gr * C, (size_t)C * 4))
                        fail_msg("%s: replica row %zu differs from the batch", bname(), lr);
                }
            }
            for (int i = 0; i < 2; i++) sub_free(&one[i]);
            attn_free(xl);
        }
        /* packed rows (non-causal attention, as BERT's): whole vs one sequence at a time */
        {
            int32_t off[4] = {0, 9, 19, 28};
            const int Mp = off[3];
            sub_spec pp[2];
            block_spec(pp, 1, Mp, C, inv); /* buffers for Mp rows */
            pp[0].causal = false;
            sub_t pk[2];
            for (int i = 0; i < 2; i++) {
                tu_rng dummy = {1};
                sub_build(&pk[i], &pp[i], NULL, &dummy);
                pk[i].S = all[i].S;
                pk[i].cfg = all[i].cfg;
                pk[i].cfg.causal = false;
                if (i == 0) pk[i].S.acfg = &pk[i].cfg;
            }
            attn_nn_seqs sv = attn_nn_seqs_dense(3, T, T);
            sv.off = off;
            const attn_nn_rows packed = {0, 1, 1};
            const float *yp = block_fwd(&run, pk, &sv, Mp, packed, x, tmp);
            float *ypc = fdup(yp, (size_t)Mp * C);
            uint64_t *mk[2];
            for (int i = 0; i < 2; i++)
                mk[i] = malloc(Mp * wpr * 8), memcpy(mk[i], pk[i].A.mask, Mp * wpr * 8);
            for (int b = 0; b < 3; b++) {
                const int nb = off[b + 1] - off[b];
                const attn_nn_seqs s1 = attn_nn_seqs_dense(1, nb, nb);
                const attn_nn_rows rw = {off[b], 1, 1};
                const float *y1 = block_fwd(&run, pk, &s1, nb, rw, x + (size_t)off[b] * C, tmp);
                if (!same_bits(y1, ypc + (size_t)off[b] * C, (size_t)nb * C * 4))
                    fail_msg("%s: packed sequence %d alone differs", bname(), b);
                for (int i = 0; i < 2; i++)
                    if (!same_bits(pk[i].A.mask, mk[i] + (size_t)off[b] * wpr, nb * wpr * 8))
                        fail_msg("%s: packed sequence %d's mask differs", bname(), b);
            }
            free(mk[0]), free(mk[1]), attn_free(ypc);
            for (int i = 0; i < 2; i++) sub_free(&pk[i]);
        }
        printf("  %s: batch = its sequences alone = a trimmed replica = packed rows, bit for bit\n",
               bname());
        for (int i = 0; i < 2; i++) sub_free(&all[i]);
        attn_free(x), attn_free(tmp);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* 1 and 2 threads: the same bits (dropout masks, outputs, every gradient), at sizes where the
 * dropout pass and the kernels are threaded. */
static void test_dropout_threads(void **state) {
    (void)state;
    const int B = 4, T = 72, C = 256, M = B * T; /* M·C = 73728 > 65536 */
    float inv[4];
    fill_inv(inv, 8, 10000.0);
    const int nt0 = attn_get_num_threads();
    attn_nn_run run = attn_nn_default_run();
    run.training = true, run.seed = 3, run.step = 9;
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        float *res[2][4] = {{0}};
        for (int th = 0; th < 2; th++) {
            attn_set_num_threads(th + 1);
            sub_spec sp[2];
            block_spec(sp, B, T, C, inv);
            sp[0].H = 8, sp[0].Hk = 2, sp[0].D = 32;
            tu_rng r = {123};
            sub_t t[2];
            for (int i = 0; i < 2; i++) sub_build(&t[i], &sp[i], NULL, &r);
            float *x = falloc((size_t)M * C), *tmp = falloc((size_t)M * C);
            tu_fill(&r, x, (size_t)M * C, -1, 1);
            attn_nn_seqs s = attn_nn_seqs_dense(B, T, T);
            const float *y = block_fwd(&run, t, &s, M, attn_nn_rows_plain(T), x, tmp);
            res[th][0] = fdup(y, (size_t)M * C);
            float *G = fdup(x, (size_t)M * C); /* any upstream gradient */
            float *work = falloc(T_MAX(attn_nn_sub_work_floats(&t[0].S, M, M),
                                          attn_nn_sub_work_floats(&t[1].S, M, M)));
            OK(attn_nn_sub_backward(&run, &t[1].S, &t[1].G, &s, M, t[0].A.res, NULL, &t[1].A, G,
                                    NULL, work));
            OK(attn_nn_sub_backward(&run, &t[0].S, &t[0].G, &s, M, x, NULL, &t[0].A, G, NULL,
                                    work));
            res[th][1] = G;
            res[th][2] = fdup(t[0].G.attn.k.w, (size_t)C * 2 * 32);
            res[th][3] = fdup(t[1].G.ffn.gate.w, (size_t)C * 2 * C);
            if (th == 1) {
                static const char *const what[4] = {"output", "dx", "key weight gradient",
                                                    "gate weight gradient"};
                const size_t ns[4] = {(size_t)M * C, (size_t)M * C, (size_t)C * 64,
                                      (size_t)C * 2 * C};
                for (int i = 0; i < 4; i++)
                    if (!same_bits(res[0][i], res[1][i], ns[i] * 4))
                        fail_msg("%s: %s differs on 1 and 2 threads", bname(), what[i]);
            }
            attn_free(x), attn_free(tmp), attn_free(work);
            for (int i = 0; i < 2; i++) sub_free(&t[i]);
        }
        for (int th = 0; th < 2; th++)
            for (int i = 0; i < 4; i++) attn_free(res[th][i]);
        /* attn_nn_dropout_fwd alone */
        const size_t n = (size_t)M * C;
        float *a = falloc(n), *o1 = falloc(n), *o2 = falloc(n);
        uint64_t *m1 = malloc(attn_nn_dropout_words(M, C) * 8),
                 *m2 = malloc(attn_nn_dropout_words(M, C) * 8);
        tu_rng r = {9};
        tu_fill(&r, a, n, -1, 1);
        const attn_nn_rows rw = {5, T, T + 1};
        attn_set_num_threads(1);
        attn_nn_dropout_fwd(&run, 4, 0.4f, rw, M, C, a, a, o1, m1);
        attn_set_num_threads(2);
        attn_nn_dropout_fwd(&run, 4, 0.4f, rw, M, C, a, a, o2, m2);
        if (!same_bits(o1, o2, n * 4) || !same_bits(m1, m2, attn_nn_dropout_words(M, C) * 8))
            fail_msg("%s: attn_nn_dropout_fwd depends on the thread count", bname());
        attn_nn_dropout_bwd(0.4f, M, C, m1, a, o1);
        attn_set_num_threads(1);
        attn_nn_dropout_bwd(0.4f, M, C, m1, a, o2);
        if (!same_bits(o1, o2, n * 4)) fail_msg("attn_nn_dropout_bwd depends on threads");
        attn_free(a), attn_free(o1), attn_free(o2), free(m1), free(m2);
        printf("  %s: 1 and 2 threads give the same bits\n", bname());
    }
    attn_set_num_threads(nt0);
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* ==== finite differences ===================================================================== */

static double block_loss(const attn_nn_run *run, sub_t t[2], const attn_nn_seqs *s, int M, int T,
                         const float *x, const float *dy, float *tmp) {
    const float *y = block_fwd(run, t, s, M, attn_nn_rows_plain(T), x, tmp);
    double L = 0;
    for (size_t i = 0; i < (size_t)M * t[0].C; i++) L += (double)dy[i] * y[i];
    return L;
}

/* Gradients of a pre-norm block — RMSNorm, grouped-query causal attention with partial RoPE
 * (both modes), projection biases and a per-sequence score bias; RMSNorm, SwiGLU with biases and
 * residual dropout — against central differences of the float32 forward (loss Σ dy·out in
 * double; Richardson extrapolation of h = 1e-2 and h/2 takes the O(h²) term out). */
static void test_finite_differences(void **state) {
    (void)state;
    const int B = 2, T = 5, C = 32, M = B * T, H = 4;
    float inv[4];
    for (size_t bi = 0; bi < NB; bi++) {
        if (!use_backend(bi)) continue;
        for (int mode = 0; mode < 2; mode++) {
            const int R = mode == 0 ? 6 : 4;
            fill_inv(inv, R, 10000.0);
            sub_spec sp[2];
            block_spec(sp, B, T, C, inv);
            sp[0].R = R, sp[0].mode = mode, sp[0].P = 16;
            sp[0].p_drop = 0.0f;
            sp[0].qk_norm = true;           /* Qwen3's q/k norms */
            sp[0].window = mode ? 3 : 0;    /* and a sliding window of 3 of the 5 keys */
            sp[1].p_drop = 0.2f;
            sp[1].F = 40;
            tu_rng r = {2024 + mode};
            sub_t t[2];
            for (int i = 0; i < 2; i++) sub_build(&t[i], &sp[i], NULL, &r);
            const size_t MC = (size_t)M * C, nb = (size_t)B * H * T * T;
            float *x = falloc(MC), *dy = falloc(MC), *tmp = falloc(MC), *sb = falloc(nb);
            float *dbias = fzero(nb);
            tu_fill(&r, x, MC, -1, 1), tu_fill(&r, dy, MC, -1, 1), tu_fill(&r, sb, nb, -1, 1);
            attn_nn_seqs s = attn_nn_seqs_dense(B, T, T);
            s.bias = sb, s.bias_sb = (ptrdiff_t)H * T * T, s.bias_sh = (ptrdiff_t)T * T;
            s.bias_sq = T, s.dbias = dbias;
            attn_nn_run run = attn_nn_default_run();
            run.training = true, run.seed = 8, run.step = 1;
            (void)block_fwd(&run, t, &s, M, attn_nn_rows_plain(T), x, tmp);
            float *G = fdup(dy, MC);
            float *work = falloc(T_MAX(attn_nn_sub_work_floats(&t[0].S, M, M),
                                          attn_nn_sub_work_floats(&t[1].S, M, M)));
            OK(attn_nn_sub_backward(&run, &t[1].S, &t[1].G, &s, M, t[0].A.res, NULL, &t[1].A, G,
                                    NULL, work));
            OK(attn_nn_sub_backward(&run, &t[0].S, &t[0].G, &s, M, x, NULL, &t[0].A, G, NULL,
                                    work));
            s.dbias = NULL;
            const attn_nn_sublayer *A = &t[0].S, *Ag = &t[0].G, *F = &t[1].S, *Fg = &t[1].G;
            struct {
                const char *name;
                float *p;
                const float *g;
                size_t n;
            } P[] = {
                {"x", x, G, MC},
                {"attn norm w", A->norm.w, Ag->norm.w, (size_t)C},
                {"w_q", A->attn.q.w, Ag->attn.q.w, (size_t)C * C},
                {"b_q", A->attn.q.b, Ag->attn.q.b, (size_t)C},
                {"w_k", A->attn.k.w, Ag->attn.k.w, (size_t)C * C / 2},
                {"b_k", A->attn.k.b, Ag->attn.k.b, (size_t)C / 2},
                {"w_v", A->attn.v.w, Ag->attn.v.w, (size_t)C * C / 2},
                {"b_v", A->attn.v.b, Ag->attn.v.b, (size_t)C / 2},
                {"w_o", A->attn.o.w, Ag->attn.o.w, (size_t)C * C},
                {"b_o", A->attn.o.b, Ag->attn.o.b, (size_t)C},
                {"q_norm w", A->attn.q_norm.w, Ag->attn.q_norm.w, (size_t)C / H},
                {"k_norm w", A->attn.k_norm.w, Ag->attn.k_norm.w, (size_t)C / H},
                {"score bias", sb, dbias, nb},
                {"ffn norm w", F->norm.w, Fg->norm.w, (size_t)C},
                {"w_gate", F->ffn.gate.w, Fg->ffn.gate.w, (size_t)40 * C},
                {"b_gate", F->ffn.gate.b, Fg->ffn.gate.b, 40},
                {"w_up", F->ffn.up.w, Fg->ffn.up.w, (size_t)40 * C},
                {"b_up", F->ffn.up.b, Fg->ffn.up.b, 40},
                {"w_down", F->ffn.down.w, Fg->ffn.down.w, (size_t)40 * C},
                {"b_down", F->ffn.down.b, Fg->ffn.down.b, (size_t)C},
            };
            for (size_t pi = 0; pi < sizeof P / sizeof P[0]; pi++) {
                float fd[5], an[5];
                const int nj = tu_valgrind() ? 2 : 5;
                for (int j = 0; j < nj; j++) {
                    const size_t i = ((size_t)j * 7919 + 13 * pi + 3) % P[pi].n;
                    const float orig = P[pi].p[i];
                    double D[2];
                    for (int hh = 0; hh < 2; hh++) {
                        const float h = hh ? 2e-2f : 4e-2f;
                        P[pi].p[i] = orig + h;
                        const double hp = (double)P[pi].p[i] - orig;
                        const double Lp = block_loss(&run, t, &s, M, T, x, dy, tmp);
                        P[pi].p[i] = orig - h;
                        const double hm = (double)P[pi].p[i] - orig;
                        const double Lm = block_loss(&run, t, &s, M, T, x, dy, tmp);
                        P[pi].p[i] = orig;
                        D[hh] = (Lp - Lm) / (hp - hm);
                    }
                    fd[j] = (float)((4 * D[1] - D[0]) / 3);
                    an[j] = P[pi].g[i];
                }
                const double scale = maxabs(P[pi].g, P[pi].n);
                check(an, fd, (size_t)nj, 0, TOL_FD * scale, "fd %s rope %s %s (scale %.2g)",
                      bname(), mode ? "interleaved" : "half", P[pi].name, scale);
            }
            attn_free(x), attn_free(dy), attn_free(tmp), attn_free(sb), attn_free(dbias);
            attn_free(G), attn_free(work);
            for (int i = 0; i < 2; i++) sub_free(&t[i]);
        }
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* ==== bad arguments ========================================================================== */

#define EXPECT(call, st, s1, s2) tu_expect_fail((call), (st), (s1), (s2))
#define INVALID ATTN_STATUS_INVALID_ARGUMENT

static void test_bad_arguments(void **state) {
    (void)state;
    /* ---- attn_nn_attn_cfg_check: every field, named */
    attn_nn_attn_cfg c = attn_nn_attn_default_cfg(32, 4);
    assert_true(c.d_kv == 32 && c.n_kv_head == 4 && c.d_head == 8 && !c.causal && !c.cross);
    OK(attn_nn_attn_cfg_check(&c, "layer 3"));
    EXPECT(attn_nn_attn_cfg_check(NULL, "layer 3"), INVALID, "layer 3", "NULL configuration");
    c.n_kv_head = 3;
    EXPECT(attn_nn_attn_cfg_check(&c, "layer 3"), INVALID, "layer 3: n_kv_head = 3",
           "does not divide n_head = 4");
    c.n_kv_head = 0;
    EXPECT(attn_nn_attn_cfg_check(&c, "layer 3"), INVALID, "sizes must be > 0", "n_kv_head=0");
    c = attn_nn_attn_default_cfg(32, 4), c.d_head = 0;
    EXPECT(attn_nn_attn_cfg_check(&c, NULL), INVALID, "attention: sizes", "d_head=0");
    c = attn_nn_attn_default_cfg(32, 4), c.d_kv = -1;
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), INVALID, "sizes", "d_kv=-1");
    c = attn_nn_attn_default_cfg(32, 0);
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), INVALID, "sizes", "n_head=0");
    c = attn_nn_attn_default_cfg(32, 4), c.n_head = c.n_kv_head = 1 << 20, c.d_head = 1 << 12;
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), ATTN_STATUS_TOO_LARGE, "n_head=1048576", "too large");
    float cosb[8 * 4], sinb[8 * 4], inv[4];
    fill_inv(inv, 8, 10000.0);
    OK(attn_rope_tables(8, 8, inv, cosb, sinb));
    c = attn_nn_attn_default_cfg(32, 4);
    c.rope_dim = 3, c.rope_P = 8, c.rope_cos = cosb, c.rope_sin = sinb;
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), INVALID, "rotary dimension 3 must be even",
           "d_head = 8");
    c.rope_dim = 10;
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), INVALID, "rotary dimension 10", "[2, d_head = 8]");
    c.rope_dim = 8, c.rope_mode = (attn_rope_mode)7;
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), INVALID, "unknown rope mode 7", NULL);
    c.rope_mode = ATTN_ROPE_HALF, c.rope_cos = NULL;
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), INVALID, "rotary embeddings need tables", NULL);
    c.rope_cos = cosb, c.rope_P = 0;
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), INVALID, "rotary embeddings need tables", NULL);
    c.rope_P = 8, c.cross = true;
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), INVALID, "rotary embeddings apply to self-attention",
           NULL);
    /* sliding windows: >= 0, and only for causal self-attention */
    c = attn_nn_attn_default_cfg(32, 4), c.window = -2, c.causal = true;
    EXPECT(attn_nn_attn_cfg_check(&c, "layer 1"), INVALID, "layer 1: sliding window -2",
           "only for causal self-attention");
    c.window = 4, c.causal = false;
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), INVALID, "sliding window 4", NULL);
    c.causal = true, c.cross = true;
    EXPECT(attn_nn_attn_cfg_check(&c, "x"), INVALID, "sliding window 4", NULL);
    c.cross = false;
    OK(attn_nn_attn_cfg_check(&c, "x"));

    /* ---- attention: a valid self-attention setup, then one thing wrong at a time */
    const int B = 2, T = 4, C = 32, H = 4, Hk = 2, HD = 32, KD = 16, M = B * T;
    c = attn_nn_attn_default_cfg(C, H);
    c.n_kv_head = Hk, c.causal = true;
    c.rope_dim = 8, c.rope_P = 8, c.rope_cos = cosb, c.rope_sin = sinb;
    tu_rng r = {4};
    float *wq = falloc((size_t)HD * C), *wk = falloc((size_t)KD * C), *wv = falloc((size_t)KD * C);
    float *wo = falloc((size_t)C * HD), *x = falloc((size_t)M * C), *y = falloc((size_t)M * C);
    tu_fill(&r, wq, (size_t)HD * C, -1, 1), tu_fill(&r, wk, (size_t)KD * C, -1, 1);
    tu_fill(&r, wv, (size_t)KD * C, -1, 1), tu_fill(&r, wo, (size_t)C * HD, -1, 1);
    tu_fill(&r, x, (size_t)M * C, -1, 1);
    attn_nn_attn w;
    memset(&w, 0, sizeof w);
    w.q = attn_nn_linear_make(wq, NULL, C, HD, ATTN_NN_OUT_IN);
    w.k = attn_nn_linear_make(wk, NULL, C, KD, ATTN_NN_OUT_IN);
    w.v = attn_nn_linear_make(wv, NULL, C, KD, ATTN_NN_OUT_IN);
    w.o = attn_nn_linear_make(wo, NULL, HD, C, ATTN_NN_OUT_IN);
    attn_nn_attn_acts a = {fzero(attn_nn_attn_proj_floats(&c, M, M) + 4096),
                           fzero((size_t)M * HD + 4096), fzero(4096), NULL, NULL};
    float *work = fzero(attn_nn_attn_work_floats(&c, M, M) + 4096), *dx = fzero((size_t)M * C);
    const attn_nn_run run = attn_nn_default_run();
    attn_nn_seqs s = attn_nn_seqs_dense(B, T, T);
    OK(attn_nn_attention_forward(&run, &c, &w, &s, x, NULL, NULL, &a, NULL, 0.0f, y));
    OK(attn_nn_attention_backward(&run, &c, &w, NULL, &s, x, NULL, &a, y, dx, false, NULL, work));
    attn_nn_attn bw = w;
    bw.q.out = 24;
    EXPECT(attn_nn_attention_forward(&run, &c, &bw, &s, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "query projection is (32 -> 24)", "expected (32 -> 32)");
    bw = w, bw.k.in = 16;
    EXPECT(attn_nn_attention_forward(&run, &c, &bw, &s, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "key projection is (16 -> 16)", "expected (32 -> 16)");
    bw = w, bw.v.w = NULL;
    EXPECT(attn_nn_attention_forward(&run, &c, &bw, &s, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "no value projection", NULL);
    bw = w, bw.o.out = 31;
    EXPECT(attn_nn_attention_backward(&run, &c, &bw, NULL, &s, x, NULL, &a, y, dx, false, NULL,
                                      work),
           INVALID, "output projection is (32 -> 31)", NULL);
    bw = w, bw.qkv = attn_nn_linear_make(wq, NULL, C, 3 * HD, ATTN_NN_OUT_IN);
    EXPECT(attn_nn_attention_forward(&run, &c, &bw, &s, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "fused qkv projection is (32 -> 96)", "expected (32 -> 64)");
    EXPECT(attn_nn_attention_forward(&run, &c, NULL, &s, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "NULL weights", NULL);
    attn_nn_attn_cfg cb = c;
    cb.n_kv_head = 3;
    EXPECT(attn_nn_attention_forward(&run, &cb, &w, &s, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "n_kv_head = 3", NULL);
    EXPECT(attn_nn_attention_backward(&run, &cb, &w, NULL, &s, x, NULL, &a, y, dx, false, NULL,
                                      work),
           INVALID, "attention backward: n_kv_head = 3", NULL);
    /* q/k norms: RMSNorms without bias over d_head values; backward needs qk and qk_rstd */
    float qnw[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    bw = w;
    bw.q_norm.kind = ATTN_NORM_RMS, bw.q_norm.dim = 8, bw.q_norm.eps = 1e-6f, bw.q_norm.w = qnw;
    bw.k_norm = bw.q_norm;
    OK(attn_nn_attention_forward(&run, &c, &bw, &s, x, NULL, NULL, &a, NULL, 0.0f, y));
    EXPECT(attn_nn_attention_backward(&run, &c, &bw, NULL, &s, x, NULL, &a, y, dx, false, NULL,
                                      work),
           INVALID, "q/k norms need the forward's acts qk and qk_rstd", NULL);
    bw.k_norm.dim = 16;
    EXPECT(attn_nn_attention_forward(&run, &c, &bw, &s, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "k_norm must be an RMSNorm without bias over d_head = 8", "dim 16");
    bw.k_norm.dim = 8, bw.q_norm.kind = ATTN_NORM_LAYER;
    EXPECT(attn_nn_attention_forward(&run, &c, &bw, &s, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "q_norm must be an RMSNorm", "kind layer_norm");
    bw.q_norm.kind = ATTN_NORM_RMS, bw.q_norm.b = qnw;
    EXPECT(attn_nn_attention_forward(&run, &c, &bw, &s, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "q_norm must be an RMSNorm without bias", NULL);
    /* sequences */
    attn_nn_seqs sb = s;
    sb.B = 0;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "bad sequence sizes (B=0", NULL);
    EXPECT(attn_nn_attention_forward(&run, &c, &w, NULL, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "bad sequence sizes", NULL);
    sb = s, sb.Tk = 3;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "self-attention needs Tk == Tq (Tq=4 Tk=3)", NULL);
    int32_t off_bad[3] = {0, 5, 8}, off_dec[3] = {0, 4, 2}, off_ok[3] = {0, 3, 7};
    sb = s, sb.off = off_bad;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "sequence 0's rows 0..5 exceed T = 4", NULL);
    sb.off = off_dec;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "sequence 1's rows 4..2", NULL);
    float bias[64] = {0};
    sb.off = off_ok, sb.bias = bias;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, NULL, &a, NULL, 0.0f, y),
           ATTN_STATUS_UNSUPPORTED, "a score bias needs the padded layout", NULL);
    int32_t kvl[2] = {4, 9};
    sb = s, sb.kv_len = kvl;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "kv_len[1]=9 is outside [0, Tk=4]", NULL);
    /* rotary positions beyond the tables: pos0 + t, explicit pos */
    sb = s, sb.pos0 = 5;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "position 8 is outside the rotary tables [0, 8)", NULL);
    int32_t posb[8] = {0, 1, 2, 3, 0, 1, -1, 3};
    sb = s, sb.pos = posb;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, NULL, &a, NULL, 0.0f, y), INVALID,
           "rope: position -1 of row 6 is outside [0, P=8)", NULL);
    /* caches */
    float *kvm = fzero((size_t)B * 8 * 2 * KD);
    attn_nn_kv kv = {kvm, kvm + KD, B, 8, 2 * KD, NULL, 0, false, NULL, NULL};
    sb = s, sb.pos0 = 5;
    c.rope_P = 8;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, &kv, &a, NULL, 0.0f, y), INVALID,
           "positions up to 9 exceed the cache's 8", NULL);
    sb.pos0 = -1;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, &kv, &a, NULL, 0.0f, y), INVALID,
           "exceed the cache's 8", NULL);
    attn_nn_kv kb = kv;
    kb.B = 3;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &s, x, NULL, &kb, &a, NULL, 0.0f, y), INVALID,
           "the cache holds 3 sequences, the call 2", NULL);
    kb = kv, kb.v = NULL;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &s, x, NULL, &kb, &a, NULL, 0.0f, y), INVALID,
           "the cache holds", NULL);
    kb = kv, kb.kt = kvm, kb.ldkt = 8 + 15; /* transposed keys: rows too short */
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &s, x, NULL, &kb, &a, NULL, 0.0f, y), INVALID,
           "the cache's transposed keys need ldkt >= 32 (ldkt=23)", NULL);
    sb = s, sb.off = off_ok;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &sb, x, NULL, &kv, &a, NULL, 0.0f, y), INVALID,
           "variable-length rows are for self-attention without a cache", NULL);
    /* NULL buffers, backward without lse, dsrc on self-attention */
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &s, NULL, NULL, NULL, &a, NULL, 0.0f, y),
           INVALID, "attention: NULL argument", NULL);
    attn_nn_attn_acts an = a;
    an.ctx = NULL;
    EXPECT(attn_nn_attention_forward(&run, &c, &w, &s, x, NULL, NULL, &an, NULL, 0.0f, y), INVALID,
           "NULL argument", NULL);
    an = a, an.lse = NULL;
    EXPECT(attn_nn_attention_backward(&run, &c, &w, NULL, &s, x, NULL, &an, y, dx, false, NULL,
                                      work),
           INVALID, "or a forward without lse", NULL);
    EXPECT(attn_nn_attention_backward(&run, &c, &w, NULL, &s, x, NULL, &a, y, dx, false, dx, work),
           INVALID, "dsrc and src exactly for cross-attention", NULL);
    /* cross-attention */
    attn_nn_attn_cfg cx = attn_nn_attn_default_cfg(C, H);
    cx.cross = true, cx.d_kv = 24, cx.n_kv_head = Hk;
    float *wkv = falloc((size_t)2 * KD * 24), *src = falloc((size_t)B * 6 * 24);
    tu_fill(&r, wkv, (size_t)2 * KD * 24, -1, 1), tu_fill(&r, src, (size_t)B * 6 * 24, -1, 1);
    attn_nn_attn wx;
    memset(&wx, 0, sizeof wx);
    wx.q = w.q, wx.o = w.o;
    wx.kv = attn_nn_linear_make(wkv, NULL, 24, 2 * KD, ATTN_NN_OUT_IN);
    attn_nn_seqs sx = attn_nn_seqs_dense(B, T, 6);
    OK(attn_nn_attention_forward(&run, &cx, &wx, &sx, x, src, NULL, &a, NULL, 0.0f, y));
    EXPECT(attn_nn_attention_forward(&run, &cx, &wx, &sx, x, NULL, NULL, &a, NULL, 0.0f, y),
           INVALID, "cross-attention needs a source", NULL);
    attn_nn_attn bx = wx;
    bx.q_norm.kind = ATTN_NORM_RMS, bx.q_norm.dim = 8, bx.q_norm.eps = 1e-6f;
    EXPECT(attn_nn_attention_forward(&run, &cx, &bx, &sx, x, src, NULL, &a, NULL, 0.0f, y),
           INVALID, "q/k norms apply to self-attention only", NULL);
    bx = wx;
    bx.kv.in = 32;
    EXPECT(attn_nn_attention_forward(&run, &cx, &bx, &sx, x, src, NULL, &a, NULL, 0.0f, y),
           INVALID, "fused key/value projection is (32 -> 32)", "expected (24 -> 32)");
    bx = wx, memset(&bx.kv, 0, sizeof bx.kv);
    EXPECT(attn_nn_attention_forward(&run, &cx, &bx, &sx, x, src, NULL, &a, NULL, 0.0f, y),
           INVALID, "no key projection", NULL);
    EXPECT(attn_nn_attention_backward(&run, &cx, &wx, NULL, &sx, x, src, &a, y, dx, false, NULL,
                                      work),
           INVALID, "dsrc and src exactly for cross-attention", NULL);
    sb = sx, sb.off = off_ok;
    EXPECT(attn_nn_attention_forward(&run, &cx, &wx, &sb, x, src, NULL, &a, NULL, 0.0f, y),
           INVALID, "variable-length rows are for self-attention", NULL);
    float *ckv = fzero((size_t)B * 5 * 2 * KD);
    attn_nn_kv xkv = {ckv, ckv + KD, B, 5, 2 * KD, NULL, 0, false, NULL, NULL};
    EXPECT(attn_nn_attention_cross_kv(&run, &cx, &wx, B, 6, src, &xkv), INVALID,
           "attention cross kv: needs cross-attention, a source and a cache of >= 6 positions",
           "for 2 sequences");
    EXPECT(attn_nn_attention_cross_kv(&run, &cx, &wx, 1, 5, src, &xkv), INVALID,
           "attention cross kv", "for 1 sequences");
    EXPECT(attn_nn_attention_cross_kv(&run, &cx, &wx, B, 5, NULL, &xkv), INVALID,
           "attention cross kv", NULL);
    EXPECT(attn_nn_attention_cross_kv(&run, &c, &w, B, 5, src, &xkv), INVALID,
           "needs cross-attention", NULL);
    EXPECT(attn_nn_attention_cross_kv(&run, &cx, &bx, B, 5, src, &xkv), INVALID,
           "no key projection", NULL);
    EXPECT(attn_nn_attention_forward(&run, &cx, &wx, &sx, x, NULL, &xkv, &a, NULL, 0.0f, y),
           INVALID, "positions up to 6 exceed the cache's 5", NULL);

    /* ---- linear */
    attn_nn_linear L = attn_nn_linear_make(wq, NULL, C, HD, ATTN_NN_OUT_IN), Lg = L;
    EXPECT(attn_nn_linear_forward(&run, NULL, M, x, C, 0.0f, y, HD, ATTN_ACT_NONE), INVALID,
           "linear: NULL argument", NULL);
    EXPECT(attn_nn_linear_forward(&run, &L, M, NULL, C, 0.0f, y, HD, ATTN_ACT_NONE), INVALID,
           "linear: NULL argument", NULL);
    Lg.out = 16;
    EXPECT(attn_nn_linear_backward(&run, &L, M, x, C, y, HD, dx, C, false, &Lg), INVALID,
           "gradient view (32, 16) does not match the weight (32, 32)", NULL);
    Lg = L, Lg.layout = ATTN_NN_IN_OUT;
    EXPECT(attn_nn_linear_backward(&run, &L, M, x, C, y, HD, dx, C, false, &Lg), INVALID,
           "does not match the weight", NULL);
    EXPECT(attn_nn_linear_backward(&run, NULL, M, x, C, y, HD, dx, C, false, NULL), INVALID,
           "linear backward: NULL weight", NULL);
    attn_gemm_packed_b P;
    EXPECT(attn_nn_linear_pack(&L, ATTN_PRECISION_F32, NULL), INVALID, "linear pack: NULL", NULL);
    EXPECT(attn_nn_linear_forward(&run, &L, M, x, 31, 0.0f, y, HD, ATTN_ACT_NONE), INVALID,
           NULL, NULL); /* lda < K: the GEMM's own message */
    (void)P;

    /* ---- norms */
    attn_nn_norm nrm = {ATTN_NORM_RMS, C, 1e-6f, NULL, NULL};
    float *mean = fzero(M), *rstd = fzero(M);
    EXPECT(attn_nn_norm_forward(NULL, M, x, y, mean, rstd), INVALID, "norm: NULL block", NULL);
    nrm.kind = (attn_norm_kind)9;
    EXPECT(attn_nn_norm_forward(&nrm, M, x, y, mean, rstd), INVALID, "norm: unknown kind 9", NULL);
    nrm.kind = ATTN_NORM_RMS;
    OK(attn_nn_norm_forward(&nrm, M, x, y, NULL, rstd));
    EXPECT(attn_nn_norm_backward(&nrm, NULL, M, x, NULL, rstd, y, dx, true, NULL), INVALID,
           "norm backward: accumulate needs scratch", NULL);
    EXPECT(attn_nn_norm_backward(NULL, NULL, M, x, NULL, rstd, y, dx, false, NULL), INVALID,
           "norm backward: NULL block", NULL);
    attn_norm_kind nk;
    /* A name a configuration file spells is unsupported, not an invalid argument (as the
     * families' unknown activations). */
    EXPECT(attn_norm_kind_parse("batchnorm", "layer 2 norm", &nk), ATTN_STATUS_UNSUPPORTED,
           "layer 2 norm: unknown norm \"batchnorm\"", "\"rms_norm\"");
        attn_act act;
    EXPECT(attn_act_parse("mish", "config.json: hidden_act", &act), ATTN_STATUS_UNSUPPORTED,
           "config.json: hidden_act: unknown activation \"mish\"", NULL);
    OK(attn_act_parse("swish", "config.json: hidden_act", &act));
    assert_int_equal(act, ATTN_ACT_SILU);
    attn_rope_mode rm;
    EXPECT(attn_rope_mode_parse("yarn", "config.json: rope", &rm), ATTN_STATUS_UNSUPPORTED,
           "config.json: rope: unknown rotary embedding mode \"yarn\"", NULL);
    OK(attn_rope_mode_parse("interleaved", "config.json: rope", &rm));
    assert_int_equal(rm, ATTN_ROPE_INTERLEAVED);
    EXPECT(attn_norm_kind_parse(NULL, "cfg", &nk), INVALID, "cfg: NULL norm name", NULL);

    /* ---- feed-forward */
    attn_nn_ffn f;
    memset(&f, 0, sizeof f);
    const int Fd = 16;
    float *wu = falloc((size_t)Fd * C), *wd = falloc((size_t)C * Fd), *wg = falloc((size_t)Fd * C);
    tu_fill(&r, wu, (size_t)Fd * C, -1, 1), tu_fill(&r, wd, (size_t)C * Fd, -1, 1);
    tu_fill(&r, wg, (size_t)Fd * C, -1, 1);
    f.kind = ATTN_FFN_PLAIN, f.act = ATTN_ACT_GELU_ERF;
    f.up = attn_nn_linear_make(wu, NULL, C, Fd, ATTN_NN_OUT_IN);
    f.down = attn_nn_linear_make(wd, NULL, Fd, C, ATTN_NN_OUT_IN);
    float *fb = fzero(attn_nn_ffn_acts_floats(&f, M, false) + 4096);
    attn_nn_ffn_acts fa;
    attn_nn_ffn_acts_view(&f, M, false, fb, &fa);
    assert_null(fa.u); /* evaluation keeps no pre-activation */
    OK(attn_nn_ffn_forward(&run, &f, M, x, &fa, 0.0f, y));
    EXPECT(attn_nn_ffn_backward(&run, &f, NULL, M, x, &fa, y, dx, false, work), INVALID,
           "ffn backward: the forward kept no pre-activation (evaluation mode)", NULL);
    EXPECT(attn_nn_ffn_backward(&run, &f, NULL, M, x, &fa, y, NULL, false, work), INVALID,
           "ffn backward: NULL argument", NULL);
    attn_nn_ffn fbad = f;
    fbad.down.in = 12;
    EXPECT(attn_nn_ffn_forward(&run, &fbad, M, x, &fa, 0.0f, y), INVALID,
           "ffn: down is (12 -> 32), expected (16 -> 32)", NULL);
    fbad = f, fbad.kind = ATTN_FFN_GATED;
    EXPECT(attn_nn_ffn_forward(&run, &fbad, M, x, &fa, 0.0f, y), INVALID,
           "ffn: gated FFN needs gate (32 -> 16)", NULL);
    fbad.gate = attn_nn_linear_make(wg, NULL, C, Fd, ATTN_NN_OUT_IN);
    attn_nn_ffn_acts fa2 = fa;
    fa2.g = NULL;
    EXPECT(attn_nn_ffn_forward(&run, &fbad, M, x, &fa2, 0.0f, y), INVALID,
           "ffn: gated needs acts.g", NULL);
    fbad.kind = (attn_ffn_kind)4;
    EXPECT(attn_nn_ffn_forward(&run, &fbad, M, x, &fa, 0.0f, y), INVALID, "unknown FFN kind 4",
           NULL);
    fa2 = fa, fa2.h = NULL;
    EXPECT(attn_nn_ffn_forward(&run, &f, M, x, &fa2, 0.0f, y), INVALID,
           "ffn: no activation buffers", NULL);
    EXPECT(attn_nn_ffn_forward(&run, NULL, M, x, &fa, 0.0f, y), INVALID, "ffn: NULL block", NULL);

    /* ---- sub-layers */
    attn_nn_sublayer S;
    memset(&S, 0, sizeof S);
    S.kind = ATTN_SUB_FFN, S.pre_norm = true, S.norm = nrm, S.ffn = f, S.p_drop = 0.1f;
    attn_nn_sub_acts A;
    memset(&A, 0, sizeof A);
    A.ln = fzero((size_t)M * C), A.res = fzero((size_t)M * C), A.rstd = rstd, A.ffn = fa;
    attn_nn_run tr = run;
    tr.training = true;
    OK(attn_nn_sub_forward(&run, &S, &s, M, attn_nn_rows_plain(T), x, NULL, NULL, &A, NULL, NULL));
    EXPECT(attn_nn_sub_forward(&tr, &S, &s, M, attn_nn_rows_plain(T), x, NULL, NULL, &A, NULL,
                               NULL),
           INVALID, "sub-layer: dropout needs scratch and mask buffers", NULL);
    attn_nn_sub_acts Ab = A;
    Ab.res = NULL;
    EXPECT(attn_nn_sub_forward(&run, &S, &s, M, attn_nn_rows_plain(T), x, NULL, NULL, &Ab, NULL,
                               NULL),
           INVALID, "sub-layer: NULL argument", NULL);
    attn_nn_sublayer Sb = S;
    Sb.kind = (attn_nn_sub_kind)5;
    EXPECT(attn_nn_sub_forward(&run, &Sb, &s, M, attn_nn_rows_plain(T), x, NULL, NULL, &A, NULL,
                               NULL),
           INVALID, "sub-layer: unknown kind 5", NULL);
    Sb = S, Sb.kind = ATTN_SUB_ATTN;
    EXPECT(attn_nn_sub_forward(&run, &Sb, &s, M, attn_nn_rows_plain(T), x, NULL, NULL, &A, NULL,
                               NULL),
           INVALID, "sub-layer: attention without its config", NULL);
    EXPECT(attn_nn_sub_backward(&run, &S, NULL, &s, M, x, NULL, &A, NULL, NULL, work), INVALID,
           "sub-layer backward: NULL", NULL);
    /* A sub-layer's f propagates its own error, naming the field. */
    Sb = S, Sb.ffn = fbad;
    Sb.ffn.kind = ATTN_FFN_PLAIN, Sb.ffn.down.in = 12;
    EXPECT(attn_nn_sub_forward(&run, &Sb, &s, M, attn_nn_rows_plain(T), x, NULL, NULL, &A, NULL,
                               NULL),
           INVALID, "ffn: down is (12 -> 32)", NULL);
    /* A sub-layer whose norm width differs from its function's, or whose row count differs from
     * its sequences', is refused before anything is read. */
    Sb = S, Sb.norm.dim = S.norm.dim + 4;
    EXPECT(attn_nn_sub_forward(&run, &Sb, &s, M, attn_nn_rows_plain(T), x, NULL, NULL, &A, NULL,
                               NULL),
           INVALID, "norm width", NULL);
    attn_nn_sublayer Sa = S;
    Sa.kind = ATTN_SUB_ATTN, Sa.acfg = &c, Sa.attn = w;
    attn_nn_sub_acts Aa = A;
    Aa.attn = a;
    EXPECT(attn_nn_sub_forward(&run, &Sa, &s, M - 1, attn_nn_rows_plain(T), x, NULL, NULL, &Aa,
                               NULL, NULL),
           INVALID, "rows but the sequences hold", NULL);

    attn_free(wq), attn_free(wk), attn_free(wv), attn_free(wo), attn_free(x), attn_free(y);
    attn_free(a.proj), attn_free(a.ctx), attn_free(a.lse), attn_free(work), attn_free(dx);
    attn_free(kvm), attn_free(wkv), attn_free(src), attn_free(ckv), attn_free(mean);
    attn_free(rstd), attn_free(wu), attn_free(wd), attn_free(wg), attn_free(fb), attn_free(A.ln);
    attn_free(A.res);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),          cmocka_unit_test(test_linear_packed),
        cmocka_unit_test(test_norm),            cmocka_unit_test(test_ffn),
        cmocka_unit_test(test_attention),       cmocka_unit_test(test_attention_cache),
        cmocka_unit_test(test_sublayer),        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_dropout_rows),    cmocka_unit_test(test_dropout_threads),
        cmocka_unit_test(test_finite_differences), cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests_name("nn", tests, open_ref, close_ref);
}

/* test_elementwise.c — softmax, layer norm, activations (ReLU, GELU, SiLU), embedding,
 * cross-entropy, and the Llama family's RMSNorm, rotary embeddings (RoPE) and gated linear units
 * (GLU), forward and backward, on every backend this CPU can run:
 *   (a) against PyTorch (float64 autograd) via $ATTN_REF_DIR/elementwise.safetensors, written by
 *       tools/ref_elementwise.py (tests/run.sh generates it first): RMSNorm against transformers'
 *       LlamaRMSNorm, RoPE against transformers' rotary modules and apply_rotary_pos_emb (Llama,
 *       GPT-NeoX and Phi with partial rotary) and Meta's complex form (interleaved);
 *   (b) finite-difference gradient checks of the reference path;
 *   (c) the SIMD paths against the reference path on random data, including sizes that are
 *       split across threads, odd widths (vector tails), strided and in-place (aliased) calls;
 *   (d) special values (infinities, subnormal tails, zero rows) and invalid arguments.
 * Tolerances (closeness = max|got − ref| <= rtol · max|ref| + atol over a whole tensor):
 *   vs PyTorch: rtol 1e-5 for every output and gradient (embedding forward: exact); measured
 *     worst for the new kernels: SiLU 1.3e-7, RMSNorm 1.1e-7 (dx of a 1-wide row: see there),
 *     RoPE 8.5e-8, GLU 1.4e-7;
 *   RMSNorm y against transformers' float32 module: 1e-6 (measured 1.5e-7);
 *   RoPE tables: 6e-8 absolute against float64, 1.2e-7 against transformers' float32 (measured
 *     0 and 6.0e-8);
 *   SIMD vs ref: rtol 2e-6 (embedding: exact, the summation order is the same; new kernels
 *     measured <= 2.4e-7);
 *   finite differences: relative error (max|fd − analytic| / max|analytic|) <= 1e-3 (measured
 *     <= 2.1e-5).
 * Every check prints its measured error (ATTN_TEST_QUIET=1 silences passing ones). */
#include "attn_io.h"
#include "attn_kernels.h"
#include "tu.h"

#define TOL_TORCH 1e-5
#define TOL_SIMD 2e-6
#define TOL_FD 1e-3
/* y of RMSNorm against transformers' float32 LlamaRMSNorm (not float64): both round */
#define TOL_HF 1e-6

static const attn_backend ALL[] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX2, ATTN_BACKEND_AVX512};

/* Every check that runs on one backend is its own cmocka test per backend: NAME(b) runs on
 * ALL[b] and starts with tu_need_backend, so a backend this CPU lacks is skipped alone (a
 * hardware skip); each draws the same data from the same seeds.
 * PER_BACKEND(NAME): test_NAME_ref, test_NAME_avx2, test_NAME_avx512;
 * PER_SIMD_BACKEND(NAME): test_NAME_avx2, test_NAME_avx512 (NAME compares them to ref). */
#define PER_SIMD_BACKEND(name)                                                                   \
    static void test_##name##_avx2(void **state) {                                               \
        (void)state;                                                                             \
        name(1);                                                                                 \
    }                                                                                            \
    static void test_##name##_avx512(void **state) {                                             \
        (void)state;                                                                             \
        name(2);                                                                                 \
    }
#define PER_BACKEND(name)                                                                        \
    static void test_##name##_ref(void **state) {                                                \
        (void)state;                                                                             \
        name(0);                                                                                 \
    }                                                                                            \
    PER_SIMD_BACKEND(name)

static int check(const float *got, const float *ref, size_t n, double rtol, double atol,
                 const char *fmt, ...) {
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tu_close(what, got, ref, n, rtol, atol);
}

static float *falloc(size_t n) {
    float *p = attn_alloc(n * sizeof(float));
    assert_non_null(p);
    return p;
}

/* ---- reference file ---------------------------------------------------------------------- */

static attn_st_file *open_ref(void) {
    attn_st_file *f = NULL;
    const char *path = tu_ref_path("elementwise.safetensors");
    if (attn_st_open(path, &f) != ATTN_STATUS_OK)
        fail_msg("cannot open %s (%s); generate it with .venv/bin/python tools/ref_elementwise.py "
                 "DIR and set ATTN_REF_DIR=DIR (tests/run.sh does both)",
                 path, attn_last_error());
    return f;
}

/* Tensor "prefix.k.name" as float32 (attn_free it), or NULL if the file has no such tensor. */
static float *getf(attn_st_file *f, const char *prefix, int k, const char *name,
                   const attn_st_tensor **t) {
    char key[128];
    snprintf(key, sizeof key, "%s.%d.%s", prefix, k, name);
    if (!attn_st_find(f, key)) return NULL;
    float *p = NULL;
    if (attn_st_load_f32(f, key, &p, t) != ATTN_STATUS_OK) fail_msg("%s", attn_last_error());
    return p;
}

static const char *getmeta(attn_st_file *f, const char *prefix, int k, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "%s.%d.%s", prefix, k, name);
    const char *v = attn_st_metadata(f, key);
    if (!v) fail_msg("metadata %s missing from the reference file", key);
    return v;
}

/* ---- (a) against PyTorch ----------------------------------------------------------------- */

static void torch_softmax(size_t b) {
    tu_need_backend(ALL[b]);
    attn_st_file *f = open_ref();
    int k = 0;
    for (;; k++) {
        const attn_st_tensor *t;
        float *x = getf(f, "softmax", k, "x", &t);
        if (!x) break;
        int N = (int)t->shape[0], D = (int)t->shape[1];
        size_t n = (size_t)N * D;
        float *dy = getf(f, "softmax", k, "dy", NULL), *y = getf(f, "softmax", k, "y", NULL);
        float *dx = getf(f, "softmax", k, "dx", NULL);
        float *gy = falloc(n), *gdx = falloc(n);
        assert_int_equal(attn_set_backend(ALL[b]), ATTN_STATUS_OK);
        const char *bn = attn_backend_name(ALL[b]);
        assert_int_equal(attn_softmax_forward(N, D, x, gy), ATTN_STATUS_OK);
        check(gy, y, n, TOL_TORCH, 0, "softmax.%d y  (%dx%d) %s", k, N, D, bn);
        /* The backward takes PyTorch's y, so it is judged on its own. */
        assert_int_equal(attn_softmax_backward(N, D, y, dy, gdx), ATTN_STATUS_OK);
        check(gdx, dx, n, TOL_TORCH, 0, "softmax.%d dx (%dx%d) %s", k, N, D, bn);
        attn_free(x), attn_free(dy), attn_free(y), attn_free(dx), attn_free(gy), attn_free(gdx);
    }
    assert_true(k > 0);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(torch_softmax)

/* log_softmax against PyTorch's (float64) on the softmax cases: -inf exactly where PyTorch's is
 * (masked entries, and a fully masked row by attn's convention), the rest within TOL_TORCH of the
 * largest |log-probability|. */
static void torch_log_softmax(size_t b) {
    tu_need_backend(ALL[b]);
    attn_st_file *f = open_ref();
    int k = 0;
    for (;; k++) {
        const attn_st_tensor *t;
        float *x = getf(f, "log_softmax", k, "x", &t);
        if (!x) break;
        int N = (int)t->shape[0], D = (int)t->shape[1];
        size_t n = (size_t)N * D;
        float *y = getf(f, "log_softmax", k, "y", NULL), *gy = falloc(n);
        assert_int_equal(attn_set_backend(ALL[b]), ATTN_STATUS_OK);
        assert_int_equal(attn_log_softmax_forward(N, D, x, gy), ATTN_STATUS_OK);
        size_t ninf = 0;
        for (size_t i = 0; i < n; i++) {
            if (isinf(y[i]) || isinf(gy[i])) {
                if (!(isinf(y[i]) && y[i] < 0 && gy[i] == y[i]))
                    fail_msg("log_softmax.%d: entry %zu is %g, PyTorch's %g", k, i, (double)gy[i],
                             (double)y[i]);
                y[i] = gy[i] = 0, ninf++;
            }
        }
        check(gy, y, n, TOL_TORCH, 0, "log_softmax.%d (%dx%d, %zu -inf) %s", k, N, D, ninf,
              attn_backend_name(ALL[b]));
        /* in place */
        assert_int_equal(attn_log_softmax_forward(N, D, x, x), ATTN_STATUS_OK);
        for (size_t i = 0; i < n; i++)
            if (isinf(x[i])) x[i] = 0;
        check(x, y, n, TOL_TORCH, 0, "log_softmax.%d in place %s", k, attn_backend_name(ALL[b]));
        attn_free(x), attn_free(y), attn_free(gy);
    }
    assert_true(k > 0);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(torch_log_softmax)

static void torch_layernorm(size_t b) {
    tu_need_backend(ALL[b]);
    attn_st_file *f = open_ref();
    int k = 0;
    for (;; k++) {
        const attn_st_tensor *t;
        float *x = getf(f, "layernorm", k, "x", &t);
        if (!x) break;
        int N = (int)t->shape[0], C = (int)t->shape[1];
        size_t n = (size_t)N * C;
        const char *aff = getmeta(f, "layernorm", k, "affine");
        float eps = strtof(getmeta(f, "layernorm", k, "eps"), NULL);
        /* Cases with |mean| >> std test the forward only: the backward is given mean as float32
         * (as PyTorch's is), and its rounding alone exceeds the tolerance there. */
        int bwd = strcmp(getmeta(f, "layernorm", k, "backward"), "0") != 0;
        float *w = getf(f, "layernorm", k, "w", NULL), *bias = getf(f, "layernorm", k, "b", NULL);
        float *dy = getf(f, "layernorm", k, "dy", NULL), *y = getf(f, "layernorm", k, "y", NULL);
        float *mean = getf(f, "layernorm", k, "mean", NULL);
        float *rstd = getf(f, "layernorm", k, "rstd", NULL);
        float *dx = getf(f, "layernorm", k, "dx", NULL), *dw = getf(f, "layernorm", k, "dw", NULL);
        float *db = getf(f, "layernorm", k, "db", NULL);
        const float *wp = strcmp(aff, "none") ? w : NULL, *bp = strcmp(aff, "wb") ? NULL : bias;
        float *gy = falloc(n), *gm = falloc(N), *gr = falloc(N), *gdx = falloc(n);
        float *gdw = falloc(C), *gdb = falloc(C);
        assert_int_equal(attn_set_backend(ALL[b]), ATTN_STATUS_OK);
        const char *bn = attn_backend_name(ALL[b]);
        assert_int_equal(attn_layernorm_forward(N, C, x, wp, bp, eps, gy, gm, gr),
                         ATTN_STATUS_OK);
        check(gy, y, n, TOL_TORCH, 0, "layernorm.%d y    (%dx%d,%s) %s", k, N, C, aff, bn);
        check(gm, mean, N, TOL_TORCH, 0, "layernorm.%d mean (%dx%d) %s", k, N, C, bn);
        check(gr, rstd, N, TOL_TORCH, 0, "layernorm.%d rstd (%dx%d) %s", k, N, C, bn);
        memset(gdw, 0, sizeof(float) * C);
        memset(gdb, 0, sizeof(float) * C);
        assert_int_equal(attn_layernorm_backward(N, C, x, wp, mean, rstd, dy, gdx,
                                                 wp ? gdw : NULL, bp ? gdb : NULL),
                         ATTN_STATUS_OK);
        /* atol: PyTorch's float64 result for C = 1 is rounding noise (1e-17), ours exact 0 */
        if (bwd) {
            check(gdx, dx, n, TOL_TORCH, 1e-7, "layernorm.%d dx   (%dx%d) %s", k, N, C, bn);
            if (wp)
                check(gdw, dw, C, TOL_TORCH, 1e-7, "layernorm.%d dw   (%dx%d) %s", k, N, C, bn);
            if (bp)
                check(gdb, db, C, TOL_TORCH, 1e-7, "layernorm.%d db   (%dx%d) %s", k, N, C, bn);
        }
        /* mean and rstd are optional outputs */
        assert_int_equal(attn_layernorm_forward(N, C, x, wp, bp, eps, gdx, NULL, NULL),
                         ATTN_STATUS_OK);
        assert_memory_equal(gdx, gy, n * sizeof(float));
        float *all[] = {x, w, bias, dy, y, mean, rstd, dx, dw, db, gy, gm, gr, gdx, gdw, gdb};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) attn_free(all[i]);
    }
    assert_true(k > 0);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(torch_layernorm)

static void torch_activations(size_t b) {
    tu_need_backend(ALL[b]);
    attn_st_file *f = open_ref();
    static const struct {
        const char *name;
        attn_act act;
    } acts[] = {{"relu", ATTN_ACT_RELU},
                {"gelu_tanh", ATTN_ACT_GELU_TANH},
                {"gelu_erf", ATTN_ACT_GELU_ERF},
                {"silu", ATTN_ACT_SILU}};
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
        int k = 0;
        for (;; k++) {
            const attn_st_tensor *t;
            float *x = getf(f, acts[a].name, k, "x", &t);
            if (!x) break;
            size_t n = t->numel;
            float *dy = getf(f, acts[a].name, k, "dy", NULL);
            float *y = getf(f, acts[a].name, k, "y", NULL);
            float *dx = getf(f, acts[a].name, k, "dx", NULL);
            float *gy = falloc(n), *gdx = falloc(n);
            assert_int_equal(attn_set_backend(ALL[b]), ATTN_STATUS_OK);
            const char *bn = attn_backend_name(ALL[b]);
            assert_int_equal(attn_act_forward(acts[a].act, n, x, gy), ATTN_STATUS_OK);
            check(gy, y, n, TOL_TORCH, 0, "%s.%d y  (%zu) %s", acts[a].name, k, n, bn);
            assert_int_equal(attn_act_backward(acts[a].act, n, x, dy, gdx), ATTN_STATUS_OK);
            check(gdx, dx, n, TOL_TORCH, 0, "%s.%d dx (%zu) %s", acts[a].name, k, n, bn);
            attn_free(x), attn_free(dy), attn_free(y), attn_free(dx), attn_free(gy);
            attn_free(gdx);
        }
        assert_true(k > 0);
    }
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(torch_activations)

static void torch_embedding(size_t b) {
    tu_need_backend(ALL[b]);
    attn_st_file *f = open_ref();
    int k = 0;
    for (;; k++) {
        char key[64];
        snprintf(key, sizeof key, "embedding.%d.ids", k);
        if (!attn_st_find(f, key)) break;
        int32_t *ids = NULL;
        const attn_st_tensor *t, *tt;
        assert_int_equal(attn_st_load_i32(f, key, &ids, &t), ATTN_STATUS_OK);
        float *table = getf(f, "embedding", k, "table", &tt);
        int N = (int)t->shape[0], V = (int)tt->shape[0], C = (int)tt->shape[1];
        float *dout = getf(f, "embedding", k, "dout", NULL);
        float *out = getf(f, "embedding", k, "out", NULL);
        float *dtable = getf(f, "embedding", k, "dtable", NULL);
        float *gout = falloc((size_t)N * C), *gdt = falloc((size_t)V * C);
        assert_int_equal(attn_set_backend(ALL[b]), ATTN_STATUS_OK);
        const char *bn = attn_backend_name(ALL[b]);
        assert_int_equal(attn_embedding_forward(N, V, C, ids, table, gout), ATTN_STATUS_OK);
        check(gout, out, (size_t)N * C, 0, 0, "embedding.%d out    (N=%d V=%d C=%d) %s", k, N,
              V, C, bn);
        memset(gdt, 0, sizeof(float) * (size_t)V * C);
        assert_int_equal(attn_embedding_backward(N, V, C, ids, dout, gdt), ATTN_STATUS_OK);
        check(gdt, dtable, (size_t)V * C, TOL_TORCH, 0,
              "embedding.%d dtable (N=%d V=%d C=%d) %s", k, N, V, C, bn);
        attn_free(ids), attn_free(table), attn_free(dout), attn_free(out), attn_free(dtable);
        attn_free(gout), attn_free(gdt);
    }
    assert_true(k > 0);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(torch_embedding)

static void torch_cross_entropy(size_t b) {
    tu_need_backend(ALL[b]);
    attn_st_file *f = open_ref();
    int k = 0;
    for (;; k++) {
        const attn_st_tensor *t;
        float *x = getf(f, "ce", k, "x", &t);
        if (!x) break;
        int N = (int)t->shape[0], V = (int)t->shape[1];
        size_t n = (size_t)N * V;
        char key[64];
        snprintf(key, sizeof key, "ce.%d.targets", k);
        int32_t *tg = NULL;
        assert_int_equal(attn_st_load_i32(f, key, &tg, NULL), ATTN_STATUS_OK);
        int32_t ignore = (int32_t)strtol(getmeta(f, "ce", k, "ignore_index"), NULL, 10);
        float ls = strtof(getmeta(f, "ce", k, "label_smoothing"), NULL);
        float *loss = getf(f, "ce", k, "loss", NULL), *dx = getf(f, "ce", k, "dx", NULL);
        float *gdx = falloc(n), gl = NAN, gl2 = NAN;
        assert_int_equal(attn_set_backend(ALL[b]), ATTN_STATUS_OK);
        const char *bn = attn_backend_name(ALL[b]);
        assert_int_equal(attn_cross_entropy(N, V, x, tg, ignore, ls, &gl, gdx),
                         ATTN_STATUS_OK);
        check(&gl, loss, 1, TOL_TORCH, 0, "ce.%d loss (%dx%d ls=%g ign=%d) %s", k, N, V,
              (double)ls, (int)ignore, bn);
        check(gdx, dx, n, TOL_TORCH, 0, "ce.%d dx   (%dx%d) %s", k, N, V, bn);
        /* Loss only: the same value without a gradient buffer. */
        assert_int_equal(attn_cross_entropy(N, V, x, tg, ignore, ls, &gl2, NULL),
                         ATTN_STATUS_OK);
        assert_true(gl2 == gl);
        attn_free(x), attn_free(tg), attn_free(loss), attn_free(dx), attn_free(gdx);
    }
    assert_true(k > 0);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(torch_cross_entropy)

/* RMSNorm against the float64 form of transformers' LlamaRMSNorm (y, rstd, dx, dw) and against
 * the module's own float32 output y_hf. */
static void torch_rmsnorm(size_t b) {
    tu_need_backend(ALL[b]);
    attn_st_file *f = open_ref();
    int k = 0;
    for (;; k++) {
        const attn_st_tensor *t;
        float *x = getf(f, "rmsnorm", k, "x", &t);
        if (!x) break;
        int N = (int)t->shape[0], C = (int)t->shape[1];
        size_t n = (size_t)N * C;
        int affine = strcmp(getmeta(f, "rmsnorm", k, "affine"), "0") != 0;
        float eps = strtof(getmeta(f, "rmsnorm", k, "eps"), NULL);
        float *w = getf(f, "rmsnorm", k, "w", NULL), *dy = getf(f, "rmsnorm", k, "dy", NULL);
        float *y = getf(f, "rmsnorm", k, "y", NULL), *yhf = getf(f, "rmsnorm", k, "y_hf", NULL);
        float *rstd = getf(f, "rmsnorm", k, "rstd", NULL), *dx = getf(f, "rmsnorm", k, "dx", NULL);
        float *dw = getf(f, "rmsnorm", k, "dw", NULL);
        const float *wp = affine ? w : NULL;
        float *gy = falloc(n), *gr = falloc(N), *gdx = falloc(n), *gdw = falloc(C);
        assert_int_equal(attn_set_backend(ALL[b]), ATTN_STATUS_OK);
        const char *bn = attn_backend_name(ALL[b]);
        assert_int_equal(attn_rmsnorm_forward(N, C, x, wp, eps, gy, gr), ATTN_STATUS_OK);
        check(gy, y, n, TOL_TORCH, 0, "rmsnorm.%d y    (%dx%d%s) %s", k, N, C,
              affine ? ",w" : "", bn);
        check(gr, rstd, N, TOL_TORCH, 0, "rmsnorm.%d rstd (%dx%d) %s", k, N, C, bn);
        /* transformers' float32 module: its own two roundings and float32 sum of squares
         * (measured worst 2.4e-7 relative) */
        check(gy, yhf, n, TOL_HF, 0, "rmsnorm.%d y vs LlamaRMSNorm fp32 %s", k, bn);
        /* the backward takes the reference rstd (rounded to float), as layer norm's; dw
         * is the gradient of the weight also when none is passed (a weight of ones) */
        memset(gdw, 0, sizeof(float) * C);
        assert_int_equal(attn_rmsnorm_backward(N, C, x, wp, rstd, dy, gdx, gdw),
                         ATTN_STATUS_OK);
        /* atol: for C = 1, dx = g·eps/(x² + eps)^1.5 is ~1e-6 of the terms it is the
         * difference of, and float rounding of those terms is all that is left (measured
         * 2.6e-9 absolute against |dx| = 1.4e-7 on avx2) */
        check(gdx, dx, n, TOL_TORCH, C == 1 ? 2e-8 : 0, "rmsnorm.%d dx   (%dx%d) %s", k, N,
              C, bn);
        check(gdw, dw, C, TOL_TORCH, 0, "rmsnorm.%d dw   (%dx%d) %s", k, N, C, bn);
        /* in place (dx = dy, with dw), and rstd is optional */
        float *tdw = falloc(C);
        memset(tdw, 0, sizeof(float) * C);
        memcpy(gy, dy, n * sizeof(float));
        assert_int_equal(attn_rmsnorm_backward(N, C, x, wp, rstd, gy, gy, tdw), ATTN_STATUS_OK);
        assert_memory_equal(gy, gdx, n * sizeof(float));
        assert_memory_equal(tdw, gdw, C * sizeof(float));
        attn_free(tdw);
        assert_int_equal(attn_rmsnorm_forward(N, C, x, wp, eps, gy, gr), ATTN_STATUS_OK);
        memcpy(gdx, x, n * sizeof(float));
        assert_int_equal(attn_rmsnorm_forward(N, C, gdx, wp, eps, gdx, NULL), ATTN_STATUS_OK);
        assert_memory_equal(gdx, gy, n * sizeof(float));
        float *all[] = {x, w, dy, y, yhf, rstd, dx, dw, gy, gr, gdx, gdw};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) attn_free(all[i]);
    }
    assert_true(k >= 10);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(torch_rmsnorm)

/* Rotary embeddings against transformers' rotary modules (HALF: Llama, GPT-NeoX and Phi with
 * partial rotary) and Meta's complex-number form (INTERLEAVED), in float64: the tables from the
 * module's inv_freq, the rotation with the module's own float32 tables, the full pipeline (our
 * tables), and the inverse against autograd's gradient. */
static void torch_rope(size_t b) {
    tu_need_backend(ALL[b]);
    attn_st_file *f = open_ref();
    int k = 0, nmode[2] = {0, 0};
    for (;; k++) {
        const attn_st_tensor *t;
        float *x = getf(f, "rope", k, "x", &t);
        if (!x) break;
        int N = (int)t->shape[0], H, D, R, P, ld, mode;
        char family[16];
        if (sscanf(getmeta(f, "rope", k, "dims"), "%d %d %d %d %d %d %15s", &H, &D, &R, &P, &ld,
                   &mode, family) != 7)
            fail_msg("rope.%d: bad dims metadata", k);
        assert_int_equal((int)t->shape[1], ld);
        nmode[mode]++;
        size_t n = (size_t)N * ld, nt = (size_t)P * (R / 2);
        char key[64];
        snprintf(key, sizeof key, "rope.%d.pos", k);
        int32_t *pos = NULL;
        assert_int_equal(attn_st_load_i32(f, key, &pos, NULL), ATTN_STATUS_OK);
        float *dy = getf(f, "rope", k, "dy", NULL), *inv = getf(f, "rope", k, "inv_freq", NULL);
        float *chf = getf(f, "rope", k, "cos_hf", NULL), *shf = getf(f, "rope", k, "sin_hf", NULL);
        float *c64 = getf(f, "rope", k, "cos", NULL), *s64 = getf(f, "rope", k, "sin", NULL);
        float *y = getf(f, "rope", k, "y", NULL), *dx = getf(f, "rope", k, "dx", NULL);
        float *ct = falloc(nt), *st = falloc(nt), *buf = falloc(n);
        const attn_rope_mode m = (attn_rope_mode)mode;
        const char *mn = m == ATTN_ROPE_HALF ? "half" : "interleaved";

        /* Tables: the cos/sin of the float32 angles, rounded once (measured: bit-identical to
         * the float64 values rounded to float); transformers' float32 cos/sin are within
         * 1 ulp of those (measured 6.0e-8), hence the atol of 2 ulp at 1. attn_rope_tables has
         * one implementation for every backend (attn_rope_tables_impl): checked once, in the ref
         * test; the other tests use the tables in the pipeline check below. */
        assert_int_equal(attn_rope_tables(P, R, inv, ct, st), ATTN_STATUS_OK);
        if (ALL[b] == ATTN_BACKEND_REF) {
            check(ct, c64, nt, 0, 6e-8, "rope.%d cos table (P=%d R=%d) vs float64", k, P, R);
            check(st, s64, nt, 0, 6e-8, "rope.%d sin table (P=%d R=%d) vs float64", k, P, R);
            check(ct, chf, nt, 0, 1.2e-7, "rope.%d cos table vs transformers fp32", k);
            check(st, shf, nt, 0, 1.2e-7, "rope.%d sin table vs transformers fp32", k);
        }

        assert_int_equal(attn_set_backend(ALL[b]), ATTN_STATUS_OK);
        const char *bn = attn_backend_name(ALL[b]);
        /* the module's tables: the rotation alone (padding must pass through exactly) */
        memcpy(buf, x, n * sizeof(float));
        assert_int_equal(attn_rope_apply(m, N, H, D, R, buf, ld, pos, P, chf, shf, false),
                         ATTN_STATUS_OK);
        check(buf, y, n, TOL_TORCH, 0, "rope.%d y  %s %s N=%d H=%d D=%d R=%d ld=%d %s", k,
              family, mn, N, H, D, R, ld, bn);
        for (int i = 0; i < N; i++)
            for (int j = H * D; j < ld; j++)
                if (memcmp(&buf[(size_t)i * ld + j], &x[(size_t)i * ld + j], sizeof(float)))
                    fail_msg("rope.%d: padding written at (%d, %d)", k, i, j);
        /* the backward is the inverse rotation of dy */
        memcpy(buf, dy, n * sizeof(float));
        assert_int_equal(attn_rope_apply(m, N, H, D, R, buf, ld, pos, P, chf, shf, true),
                         ATTN_STATUS_OK);
        check(buf, dx, n, TOL_TORCH, 0, "rope.%d dx (inverse) %s", k, bn);
        /* our own tables: the whole pipeline against transformers */
        memcpy(buf, x, n * sizeof(float));
        assert_int_equal(attn_rope_apply(m, N, H, D, R, buf, ld, pos, P, ct, st, false),
                         ATTN_STATUS_OK);
        check(buf, y, n, TOL_TORCH, 0, "rope.%d y with attn_rope_tables %s", k, bn);
        /* and back: R(−θ) R(θ) x = x up to rounding (measured <= 2.4e-7) */
        assert_int_equal(attn_rope_apply(m, N, H, D, R, buf, ld, pos, P, ct, st, true),
                         ATTN_STATUS_OK);
        check(buf, x, n, 1e-6, 0, "rope.%d round trip %s", k, bn);
        float *all[] = {x, dy, inv, chf, shf, c64, s64, y, dx, ct, st, buf};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) attn_free(all[i]);
        attn_free(pos);
    }
    assert_true(nmode[0] >= 5 && nmode[1] >= 4);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(torch_rope)

/* Gated linear units with every activation, g and u the halves of one (N, 2F) buffer (row
 * stride 2F), the gradients into the halves of one (N, 2F) buffer; then in place. */
static void torch_glu(size_t b) {
    tu_need_backend(ALL[b]);
    attn_st_file *f = open_ref();
    static const char *names[] = {"glu_none", "glu_relu", "glu_gelu_tanh", "glu_gelu_erf",
                                  "glu_silu"};
    for (size_t a = 0; a < sizeof names / sizeof names[0]; a++) {
        int k = 0;
        for (;; k++) {
            const attn_st_tensor *t;
            float *gu = getf(f, names[a], k, "gu", &t);
            if (!gu) break;
            int N = (int)t->shape[0], F = (int)t->shape[1] / 2;
            attn_act act = (attn_act)strtol(getmeta(f, names[a], k, "act"), NULL, 10);
            assert_int_equal((int)act, (int)a);
            size_t n = (size_t)N * F;
            float *dh = getf(f, names[a], k, "dh", NULL), *h = getf(f, names[a], k, "h", NULL);
            float *dgu = getf(f, names[a], k, "dgu", NULL);
            float *gh = falloc(n), *gd = falloc(2 * n), *buf = falloc(2 * n);
            assert_int_equal(attn_set_backend(ALL[b]), ATTN_STATUS_OK);
            const char *bn = attn_backend_name(ALL[b]);
            assert_int_equal(attn_glu_forward(act, N, F, gu, 2 * F, gu + F, 2 * F, gh, F),
                             ATTN_STATUS_OK);
            check(gh, h, n, TOL_TORCH, 0, "%s.%d h   (%dx%d) %s", names[a], k, N, F, bn);
            assert_int_equal(attn_glu_backward(act, N, F, gu, 2 * F, gu + F, 2 * F, dh, F, gd,
                                               2 * F, gd + F, 2 * F),
                             ATTN_STATUS_OK);
            check(gd, dgu, 2 * n, TOL_TORCH, 0, "%s.%d dgu (%dx%d) %s", names[a], k, N, F,
                  bn);
            /* in place: gradients over g and u, then h over g */
            memcpy(buf, gu, 2 * n * sizeof(float));
            assert_int_equal(attn_glu_backward(act, N, F, buf, 2 * F, buf + F, 2 * F, dh, F,
                                               buf, 2 * F, buf + F, 2 * F),
                             ATTN_STATUS_OK);
            assert_memory_equal(buf, gd, 2 * n * sizeof(float));
            memcpy(buf, gu, 2 * n * sizeof(float));
            assert_int_equal(attn_glu_forward(act, N, F, buf, 2 * F, buf + F, 2 * F, buf,
                                              2 * F),
                             ATTN_STATUS_OK);
            for (int i = 0; i < N; i++)
                assert_memory_equal(buf + (size_t)i * 2 * F, gh + (size_t)i * F,
                                    F * sizeof(float));
            attn_free(gu), attn_free(dh), attn_free(h), attn_free(dgu), attn_free(gh);
            attn_free(gd), attn_free(buf);
        }
        assert_true(k > 0);
    }
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(torch_glu)

/* ---- (b) finite differences -------------------------------------------------------------- */

/* Prints like tu_close (quiet under ATTN_TEST_QUIET unless failing) and counts a failure. */
static void fd_report(const char *what, double err, double scale) {
    double rel = scale > 0 ? err / scale : err;
    int ok = rel <= TOL_FD;
    if (!ok || !getenv("ATTN_TEST_QUIET"))
        printf("  fd %-41s max_abs_err=%.3e max|grad|=%.3e rel=%.2e %s\n", what, err, scale, rel,
               ok ? "ok" : "FAIL");
    if (!ok) tu_failures++;
}

/* Central differences of a scalar loss L(params) in double, on the reference path. The step is
 * taken on the float parameter and the denominator is the step actually representable. */
typedef double (*loss_fn)(void *ctx);

static void fd_check(const char *what, loss_fn L, void *ctx, float *p, size_t n,
                     const float *analytic, float h) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        float p0 = p[i], hi = p0 + h, lo = p0 - h;
        p[i] = hi;
        double lp = L(ctx);
        p[i] = lo;
        double lm = L(ctx);
        p[i] = p0;
        double fd = (lp - lm) / ((double)hi - (double)lo);
        err = fmax(err, fabs(fd - analytic[i]));
        scale = fmax(scale, fabs(analytic[i]));
    }
    fd_report(what, err, scale);
}

typedef struct {
    int N, D;
    float *x, *w, *b, *dy, *y;
    float eps;
    attn_act act;
    int32_t *tg;
    float ls;
} fd_ctx;

static double dot_dy(const fd_ctx *c, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)c->dy[i] * c->y[i];
    return s;
}
static double loss_softmax(void *v) {
    fd_ctx *c = v;
    assert_int_equal(attn_softmax_forward(c->N, c->D, c->x, c->y), ATTN_STATUS_OK);
    return dot_dy(c, (size_t)c->N * c->D);
}
static double loss_layernorm(void *v) {
    fd_ctx *c = v;
    assert_int_equal(attn_layernorm_forward(c->N, c->D, c->x, c->w, c->b, c->eps, c->y, NULL, NULL),
                     ATTN_STATUS_OK);
    return dot_dy(c, (size_t)c->N * c->D);
}
static double loss_rmsnorm(void *v) {
    fd_ctx *c = v;
    assert_int_equal(attn_rmsnorm_forward(c->N, c->D, c->x, c->w, c->eps, c->y, NULL),
                     ATTN_STATUS_OK);
    return dot_dy(c, (size_t)c->N * c->D);
}

/* sum(dh · glu(g, u)) with g, u the halves of gu (N, 2F) */
typedef struct {
    int N, F;
    attn_act act;
    float *gu, *dh, *h;
} glu_ctx;
static double loss_glu(void *v) {
    glu_ctx *c = v;
    assert_int_equal(attn_glu_forward(c->act, c->N, c->F, c->gu, 2 * c->F, c->gu + c->F,
                                      2 * c->F, c->h, c->F),
                     ATTN_STATUS_OK);
    double s = 0;
    for (int i = 0; i < c->N * c->F; i++) s += (double)c->dh[i] * c->h[i];
    return s;
}

/* sum(dy · rope(x)) over (N, ld) rows; rope works in place, so on a copy */
typedef struct {
    attn_rope_mode mode;
    int N, H, D, R, ld, P;
    const int32_t *pos;
    const float *ct, *st;
    float *x, *dy, *tmp;
} rope_ctx;
static double loss_rope(void *v) {
    rope_ctx *c = v;
    size_t n = (size_t)c->N * c->ld;
    memcpy(c->tmp, c->x, n * sizeof(float));
    assert_int_equal(attn_rope_apply(c->mode, c->N, c->H, c->D, c->R, c->tmp, c->ld, c->pos, c->P,
                                     c->ct, c->st, false),
                     ATTN_STATUS_OK);
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)c->dy[i] * c->tmp[i];
    return s;
}

static double loss_ce(void *v) {
    fd_ctx *c = v;
    float l;
    assert_int_equal(attn_cross_entropy(c->N, c->D, c->x, c->tg, -100, c->ls, &l, NULL),
                     ATTN_STATUS_OK);
    return l;
}

static void test_finite_differences(void **state) {
    (void)state;
    assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
    tu_rng r = {0x9e3779b97f4a7c15ull};
    enum { N = 3, D = 11, NMAX = N * D };
    float x[NMAX], w[D], b[D], dy[NMAX], y[NMAX], g[NMAX], gw[D], gb[D];
    fd_ctx c = {N, D, x, w, b, dy, y, 1e-5f, ATTN_ACT_NONE, NULL, 0};
    tu_fill(&r, x, NMAX, -2, 2);
    tu_fill(&r, dy, NMAX, -1, 1);
    tu_fill(&r, w, D, 0.5f, 1.5f);
    tu_fill(&r, b, D, -0.5f, 0.5f);

    /* softmax: d/dx sum(dy * softmax(x)) */
    assert_int_equal(attn_softmax_forward(N, D, x, y), ATTN_STATUS_OK);
    assert_int_equal(attn_softmax_backward(N, D, y, dy, g), ATTN_STATUS_OK);
    fd_check("softmax dx (3x11)", loss_softmax, &c, x, NMAX, g, 1e-2f);

    /* layer norm: dx, dw, db */
    float mean[N], rstd[N];
    assert_int_equal(attn_layernorm_forward(N, D, x, w, b, c.eps, y, mean, rstd), ATTN_STATUS_OK);
    memset(gw, 0, sizeof gw);
    memset(gb, 0, sizeof gb);
    assert_int_equal(attn_layernorm_backward(N, D, x, w, mean, rstd, dy, g, gw, gb),
                     ATTN_STATUS_OK);
    fd_check("layernorm dx (3x11)", loss_layernorm, &c, x, NMAX, g, 1e-2f);
    fd_check("layernorm dw (3x11)", loss_layernorm, &c, w, D, gw, 1e-2f);
    fd_check("layernorm db (3x11)", loss_layernorm, &c, b, D, gb, 1e-2f);

    /* GELU, both forms: elementwise, so one perturbation of every x at once gives every
     * derivative; d/dx with dy = 1. */
    static const attn_act acts[] = {ATTN_ACT_GELU_TANH, ATTN_ACT_GELU_ERF, ATTN_ACT_SILU};
    static const char *names[] = {"gelu_tanh dx (64)", "gelu_erf dx (64)", "silu dx (64)"};
    enum { NA = 64 };
    float xa[NA], ones[NA], yp[NA], ym[NA], ga[NA], fd[NA];
    tu_fill(&r, xa, NA, -5, 5);
    for (int i = 0; i < NA; i++) ones[i] = 1;
    for (int a = 0; a < 3; a++) {
        const float h = 1e-2f;
        float xp[NA], xm[NA];
        for (int i = 0; i < NA; i++) xp[i] = xa[i] + h, xm[i] = xa[i] - h;
        assert_int_equal(attn_act_forward(acts[a], NA, xp, yp), ATTN_STATUS_OK);
        assert_int_equal(attn_act_forward(acts[a], NA, xm, ym), ATTN_STATUS_OK);
        assert_int_equal(attn_act_backward(acts[a], NA, xa, ones, ga), ATTN_STATUS_OK);
        double err = 0, scale = 0;
        for (int i = 0; i < NA; i++) {
            fd[i] = (float)(((double)yp[i] - ym[i]) / ((double)xp[i] - xm[i]));
            err = fmax(err, fabs((double)fd[i] - ga[i]));
            scale = fmax(scale, fabs(ga[i]));
        }
        fd_report(names[a], err, scale);
    }

    /* RMSNorm: dx and dw (with a weight), dx without one */
    float rs[N];
    assert_int_equal(attn_rmsnorm_forward(N, D, x, w, c.eps, y, rs), ATTN_STATUS_OK);
    memset(gw, 0, sizeof gw);
    assert_int_equal(attn_rmsnorm_backward(N, D, x, w, rs, dy, g, gw), ATTN_STATUS_OK);
    fd_check("rmsnorm dx (3x11)", loss_rmsnorm, &c, x, NMAX, g, 1e-2f);
    fd_check("rmsnorm dw (3x11)", loss_rmsnorm, &c, w, D, gw, 1e-2f);
    c.w = NULL;
    assert_int_equal(attn_rmsnorm_forward(N, D, x, NULL, c.eps, y, rs), ATTN_STATUS_OK);
    assert_int_equal(attn_rmsnorm_backward(N, D, x, NULL, rs, dy, g, NULL), ATTN_STATUS_OK);
    fd_check("rmsnorm dx, no weight (3x11)", loss_rmsnorm, &c, x, NMAX, g, 1e-2f);
    c.w = w;

    /* GLU: dg and du of every activation but ReLU (its kink is not differentiable, and a step
     * of 1e-2 could cross it), g and u the halves of one (N, 2F) buffer */
    {
        enum { GF = 13 };
        float gu[N * 2 * GF], dh[N * GF], hh[N * GF], dgu[N * 2 * GF];
        tu_fill(&r, gu, N * 2 * GF, -3, 3);
        tu_fill(&r, dh, N * GF, -1, 1);
        static const attn_act gacts[] = {ATTN_ACT_NONE, ATTN_ACT_GELU_TANH, ATTN_ACT_GELU_ERF,
                                         ATTN_ACT_SILU};
        for (size_t a = 0; a < sizeof gacts / sizeof gacts[0]; a++) {
            glu_ctx gc = {N, GF, gacts[a], gu, dh, hh};
            assert_int_equal(attn_glu_backward(gacts[a], N, GF, gu, 2 * GF, gu + GF, 2 * GF, dh, GF,
                                               dgu, 2 * GF, dgu + GF, 2 * GF),
                             ATTN_STATUS_OK);
            char what[64];
            snprintf(what, sizeof what, "glu act %d dg, du (3x13)", (int)gacts[a]);
            fd_check(what, loss_glu, &gc, gu, N * 2 * GF, dgu, 1e-2f);
        }
    }

    /* RoPE: the gradient of sum(dy · rope(x)) is the inverse rotation of dy; both modes, a
     * partial rotary width and padded rows */
    {
        enum { RN = 3, RH = 2, RD = 10, RR = 6, RLD = 23, RP = 7 };
        float rx[RN * RLD], rdy[RN * RLD], rg[RN * RLD], tmp[RN * RLD], inv[RR / 2];
        float ct[RP * RR / 2], st[RP * RR / 2];
        int32_t pos[RN] = {6, 0, 3};
        for (int i = 0; i < RR / 2; i++) inv[i] = powf(100.0f, -2.0f * i / RR);
        assert_int_equal(attn_rope_tables(RP, RR, inv, ct, st), ATTN_STATUS_OK);
        tu_fill(&r, rx, RN * RLD, -2, 2);
        tu_fill(&r, rdy, RN * RLD, -1, 1);
        for (int m = 0; m < 2; m++) {
            rope_ctx rc = {(attn_rope_mode)m, RN, RH, RD, RR, RLD, RP, pos, ct, st, rx, rdy, tmp};
            memcpy(rg, rdy, sizeof rg);
            assert_int_equal(attn_rope_apply((attn_rope_mode)m, RN, RH, RD, RR, rg, RLD, pos, RP,
                                             ct, st, true),
                             ATTN_STATUS_OK);
            fd_check(m ? "rope interleaved dx (3x2x10, R=6)" : "rope half dx (3x2x10, R=6)",
                     loss_rope, &rc, rx, RN * RLD, rg, 1e-2f);
        }
    }

    /* cross-entropy with label smoothing and an ignored row */
    int32_t tg[N] = {4, -100, 10};
    c.tg = tg;
    c.ls = 0.1f;
    float l;
    assert_int_equal(attn_cross_entropy(N, D, x, tg, -100, c.ls, &l, g), ATTN_STATUS_OK);
    fd_check("cross_entropy dlogits (3x11, ls=0.1)", loss_ce, &c, x, NMAX, g, 1e-2f);

    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* ---- (c) SIMD against the reference path ------------------------------------------------- */

/* Shapes (N rows of D): odd lengths for the masked tails, and sizes above the threading
 * threshold (32768 elements) so the OpenMP paths run. */
static const int SHAPES[][2] = {{1, 1},   {3, 7},   {5, 17},   {4, 100}, {2, 1000},
                                {2, 50257}, {64, 768}, {333, 129}, {1, 40000}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static void simd_vs_ref(size_t bi) {
    tu_need_backend(ALL[bi]);
    tu_rng r = {12345};
    for (size_t s = 0; s < NSHAPES; s++) {
        int N = SHAPES[s][0], D = SHAPES[s][1];
        size_t n = (size_t)N * D;
        float *x = falloc(n), *dy = falloc(n), *w = falloc(D), *b = falloc(D);
        float *rm = falloc(N), *rr = falloc(N);
        float *rdw = falloc(D), *rdb = falloc(D), *acc0 = falloc(D);
        float *gy = falloc(n), *gdx = falloc(n), *gm = falloc(N), *gr = falloc(N);
        float *gdw = falloc(D), *gdb = falloc(D);
        int32_t *tg = attn_alloc(sizeof(int32_t) * N);
        tu_fill(&r, x, n, -4, 4);
        tu_fill(&r, dy, n, -1, 1);
        tu_fill(&r, w, D, 0.5f, 1.5f);
        tu_fill(&r, b, D, -1, 1);
        tu_fill(&r, acc0, D, -1, 1); /* dw, db accumulate onto this */
        for (int i = 0; i < N; i++)
            tg[i] = (i % 5 == 3) ? -100 : (int32_t)(tu_uniform(&r, 0, 1) * D) % D;
        const float ls = 0.1f;
        float rl, gl;

        /* The reference results. */
        assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
        float *rsm = falloc(n), *rsmb = falloc(n), *rln = falloc(n), *rlnb = falloc(n);
        float *rce = falloc(n), *rg[4], *rgb[4];
        float *rrm = falloc(n), *rrmb = falloc(n), *rrr = falloc(N), *rrdw = falloc(D);
        assert_int_equal(attn_softmax_forward(N, D, x, rsm), ATTN_STATUS_OK);
        assert_int_equal(attn_softmax_backward(N, D, rsm, dy, rsmb), ATTN_STATUS_OK);
        assert_int_equal(attn_layernorm_forward(N, D, x, w, b, 1e-5f, rln, rm, rr), ATTN_STATUS_OK);
        memcpy(rdw, acc0, sizeof(float) * D);
        memcpy(rdb, acc0, sizeof(float) * D);
        assert_int_equal(attn_layernorm_backward(N, D, x, w, rm, rr, dy, rlnb, rdw, rdb),
                         ATTN_STATUS_OK);
        assert_int_equal(attn_cross_entropy(N, D, x, tg, -100, ls, &rl, rce), ATTN_STATUS_OK);
        assert_int_equal(attn_rmsnorm_forward(N, D, x, w, 1e-6f, rrm, rrr), ATTN_STATUS_OK);
        memcpy(rrdw, acc0, sizeof(float) * D);
        assert_int_equal(attn_rmsnorm_backward(N, D, x, w, rrr, dy, rrmb, rrdw), ATTN_STATUS_OK);
        for (int a = 0; a < 4; a++) { /* ReLU, GELU tanh, GELU erf, SiLU */
            rg[a] = falloc(n), rgb[a] = falloc(n);
            assert_int_equal(attn_act_forward((attn_act)(a + 1), n, x, rg[a]), ATTN_STATUS_OK);
            assert_int_equal(attn_act_backward((attn_act)(a + 1), n, x, dy, rgb[a]),
                             ATTN_STATUS_OK);
        }

        assert_int_equal(attn_set_backend(ALL[bi]), ATTN_STATUS_OK);
        const char *bn = attn_backend_name(ALL[bi]);
        assert_int_equal(attn_softmax_forward(N, D, x, gy), ATTN_STATUS_OK);
        check(gy, rsm, n, TOL_SIMD, 0, "softmax y   %dx%d %s vs ref", N, D, bn);
        assert_int_equal(attn_softmax_backward(N, D, rsm, dy, gdx), ATTN_STATUS_OK);
        check(gdx, rsmb, n, TOL_SIMD, 0, "softmax dx  %dx%d %s vs ref", N, D, bn);
        /* in place: y = x, dx = dy give the same bits */
        memcpy(gy, x, n * sizeof(float));
        assert_int_equal(attn_softmax_forward(N, D, gy, gy), ATTN_STATUS_OK);
        assert_int_equal(attn_softmax_forward(N, D, x, gdx), ATTN_STATUS_OK);
        assert_memory_equal(gy, gdx, n * sizeof(float));
        memcpy(gdx, dy, n * sizeof(float));
        assert_int_equal(attn_softmax_backward(N, D, rsm, gdx, gdx), ATTN_STATUS_OK);
        assert_int_equal(attn_softmax_backward(N, D, rsm, dy, gy), ATTN_STATUS_OK);
        assert_memory_equal(gy, gdx, n * sizeof(float));

        assert_int_equal(attn_layernorm_forward(N, D, x, w, b, 1e-5f, gy, gm, gr),
                         ATTN_STATUS_OK);
        check(gy, rln, n, TOL_SIMD, 0, "layernorm y %dx%d %s vs ref", N, D, bn);
        check(gm, rm, N, TOL_SIMD, 0, "layernorm mean %dx%d %s vs ref", N, D, bn);
        check(gr, rr, N, TOL_SIMD, 0, "layernorm rstd %dx%d %s vs ref", N, D, bn);
        memcpy(gdw, acc0, sizeof(float) * D);
        memcpy(gdb, acc0, sizeof(float) * D);
        assert_int_equal(attn_layernorm_backward(N, D, x, w, rm, rr, dy, gdx, gdw, gdb),
                         ATTN_STATUS_OK);
        check(gdx, rlnb, n, TOL_SIMD, 0, "layernorm dx %dx%d %s vs ref", N, D, bn);
        check(gdw, rdw, D, TOL_SIMD, 0, "layernorm dw (accumulated) %dx%d %s", N, D, bn);
        check(gdb, rdb, D, TOL_SIMD, 0, "layernorm db (accumulated) %dx%d %s", N, D, bn);
        /* dx aliasing dy, no parameter gradients */
        memcpy(gy, dy, n * sizeof(float));
        assert_int_equal(attn_layernorm_backward(N, D, x, w, rm, rr, gy, gy, NULL, NULL),
                         ATTN_STATUS_OK);
        assert_memory_equal(gy, gdx, n * sizeof(float));

        /* RMSNorm: y, rstd, dx and dw accumulated onto acc0; then in place (y = x, dx = dy
         * without dw), which must give the same bits, and without a weight */
        assert_int_equal(attn_rmsnorm_forward(N, D, x, w, 1e-6f, gy, gr), ATTN_STATUS_OK);
        check(gy, rrm, n, TOL_SIMD, 0, "rmsnorm y    %dx%d %s vs ref", N, D, bn);
        check(gr, rrr, N, TOL_SIMD, 0, "rmsnorm rstd %dx%d %s vs ref", N, D, bn);
        memcpy(gdw, acc0, sizeof(float) * D);
        assert_int_equal(attn_rmsnorm_backward(N, D, x, w, rrr, dy, gdx, gdw), ATTN_STATUS_OK);
        /* atol for D = 1: dx ~ rstd·g·eps/x² is what is left of a cancellation, which float
         * rounding of rstd²·mean(g x) leaves at ~6e-8·rstd·|g| (measured 5.6e-10) */
        check(gdx, rrmb, n, TOL_SIMD, D == 1 ? 1e-8 : 0, "rmsnorm dx   %dx%d %s vs ref", N, D,
              bn);
        check(gdw, rrdw, D, TOL_SIMD, 0, "rmsnorm dw (accumulated) %dx%d %s", N, D, bn);
        float *tmp = falloc(n);
        memcpy(tmp, x, n * sizeof(float));
        assert_int_equal(attn_rmsnorm_forward(N, D, tmp, w, 1e-6f, tmp, NULL), ATTN_STATUS_OK);
        assert_memory_equal(tmp, gy, n * sizeof(float));
        memcpy(tmp, dy, n * sizeof(float));
        memcpy(gdb, acc0, sizeof(float) * D);
        assert_int_equal(attn_rmsnorm_backward(N, D, x, w, rrr, tmp, tmp, gdb), ATTN_STATUS_OK);
        assert_memory_equal(tmp, gdx, n * sizeof(float));
        assert_memory_equal(gdb, gdw, D * sizeof(float));
        memcpy(tmp, dy, n * sizeof(float));
        assert_int_equal(attn_rmsnorm_backward(N, D, x, w, rrr, tmp, tmp, NULL),
                         ATTN_STATUS_OK);
        assert_memory_equal(tmp, gdx, n * sizeof(float));
        attn_set_backend(ATTN_BACKEND_REF);
        assert_int_equal(attn_rmsnorm_forward(N, D, x, NULL, 1e-6f, tmp, NULL), ATTN_STATUS_OK);
        assert_int_equal(attn_set_backend(ALL[bi]), ATTN_STATUS_OK);
        assert_int_equal(attn_rmsnorm_forward(N, D, x, NULL, 1e-6f, gy, NULL), ATTN_STATUS_OK);
        check(gy, tmp, n, TOL_SIMD, 0, "rmsnorm y, no weight %dx%d %s vs ref", N, D, bn);
        attn_free(tmp);

        for (int a = 0; a < 4; a++) {
            attn_act act = (attn_act)(a + 1);
            assert_int_equal(attn_act_forward(act, n, x, gy), ATTN_STATUS_OK);
            check(gy, rg[a], n, TOL_SIMD, 0, "act %d y  %zu %s vs ref", (int)act, n, bn);
            assert_int_equal(attn_act_backward(act, n, x, dy, gdx), ATTN_STATUS_OK);
            check(gdx, rgb[a], n, TOL_SIMD, 0, "act %d dx %zu %s vs ref", (int)act, n, bn);
            memcpy(gdx, x, n * sizeof(float));
            assert_int_equal(attn_act_forward(act, n, gdx, gdx), ATTN_STATUS_OK);
            assert_memory_equal(gdx, gy, n * sizeof(float));
        }

        assert_int_equal(attn_cross_entropy(N, D, x, tg, -100, ls, &gl, gdx), ATTN_STATUS_OK);
        check(&gl, &rl, 1, TOL_SIMD, 0, "cross_entropy loss %dx%d %s vs ref", N, D, bn);
        check(gdx, rce, n, TOL_SIMD, 0, "cross_entropy dx   %dx%d %s vs ref", N, D, bn);
        float al;
        memcpy(gy, x, n * sizeof(float)); /* dlogits = logits */
        assert_int_equal(attn_cross_entropy(N, D, gy, tg, -100, ls, &al, gy), ATTN_STATUS_OK);
        assert_memory_equal(gy, gdx, n * sizeof(float));
        assert_true(al == gl);
        float *all[] = {x,  dy, w,  b,  rm,   rr,   rdw, rdb, acc0, gy, gdx,
                        gm, gr, gdw, gdb, rsm, rsmb, rln, rlnb, rce, rg[0], rg[1], rg[2],
                        rgb[0], rgb[1], rgb[2], rg[3], rgb[3], rrm, rrmb, rrr, rrdw};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) attn_free(all[i]);
        attn_free(tg);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_SIMD_BACKEND(simd_vs_ref)

/* GLU on random data, every activation: g and u inside one padded (N, 2F + 3) buffer, dh and h
 * with their own padded strides (padding must come back untouched), sizes with vector tails and
 * above the threading threshold; then the in-place forms (h = u; dg = g and du = u; dh = dg),
 * which must give the out-of-place bits. */
static void glu_simd_vs_ref(size_t bi) {
    tu_need_backend(ALL[bi]);
    tu_rng r = {2718281828ull};
    static const int S[][2] = {{1, 1},    {3, 7},     {5, 17},   {4, 100}, {2, 1000},
                               {16, 688}, {33, 1377}, {8, 11008}, {1, 40000}};
    for (size_t si = 0; si < sizeof S / sizeof S[0]; si++) {
        const int N = S[si][0], F = S[si][1], ld = 2 * F + 3, ldh = F + 1, ldo = F + 2;
        const size_t ngu = (size_t)N * ld, ndh = (size_t)N * ldh, no = (size_t)N * ldo;
        float *gu = falloc(ngu), *dh = falloc(ndh), *rh = falloc(no), *rd = falloc(ngu);
        float *h = falloc(no), *d = falloc(ngu), *buf = falloc(ngu), *b2 = falloc(ngu);
        tu_fill(&r, gu, ngu, -6, 6);
        tu_fill(&r, dh, ndh, -1, 1);
        for (int a = ATTN_ACT_NONE; a <= ATTN_ACT_SILU; a++) {
            const attn_act act = (attn_act)a;
            /* outputs start as a sentinel, so untouched padding is seen */
            for (size_t i = 0; i < no; i++) rh[i] = 7.0f;
            for (size_t i = 0; i < ngu; i++) rd[i] = 7.0f;
            assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
            assert_int_equal(attn_glu_forward(act, N, F, gu, ld, gu + F, ld, rh, ldo),
                             ATTN_STATUS_OK);
            assert_int_equal(attn_glu_backward(act, N, F, gu, ld, gu + F, ld, dh, ldh, rd, ld,
                                               rd + F, ld),
                             ATTN_STATUS_OK);
            for (int i = 0; i < N; i++) {
                for (int j = F; j < ldo; j++) assert_true(rh[(size_t)i * ldo + j] == 7.0f);
                for (int j = 2 * F; j < ld; j++) assert_true(rd[(size_t)i * ld + j] == 7.0f);
            }
            assert_int_equal(attn_set_backend(ALL[bi]), ATTN_STATUS_OK);
            const char *bn = attn_backend_name(ALL[bi]);
            for (size_t i = 0; i < no; i++) h[i] = 7.0f;
            for (size_t i = 0; i < ngu; i++) d[i] = 7.0f;
            assert_int_equal(attn_glu_forward(act, N, F, gu, ld, gu + F, ld, h, ldo),
                             ATTN_STATUS_OK);
            assert_int_equal(attn_glu_backward(act, N, F, gu, ld, gu + F, ld, dh, ldh, d, ld,
                                               d + F, ld),
                             ATTN_STATUS_OK);
            /* the whole buffers: the sentinel padding compares exactly */
            check(h, rh, no, TOL_SIMD, 0, "glu act %d h  %dx%d %s vs ref", a, N, F, bn);
            check(d, rd, ngu, TOL_SIMD, 0, "glu act %d dg,du %dx%d %s vs ref", a, N, F, bn);
            for (int i = 0; i < N; i++) {
                for (int j = F; j < ldo; j++) assert_true(h[(size_t)i * ldo + j] == 7.0f);
                for (int j = 2 * F; j < ld; j++) assert_true(d[(size_t)i * ld + j] == 7.0f);
            }
            /* forward in place over u */
            memcpy(buf, gu, ngu * sizeof(float));
            assert_int_equal(attn_glu_forward(act, N, F, buf, ld, buf + F, ld, buf + F, ld),
                             ATTN_STATUS_OK);
            for (int i = 0; i < N; i++)
                assert_memory_equal(buf + (size_t)i * ld + F, h + (size_t)i * ldo,
                                    F * sizeof(float));
            /* backward in place over g and u */
            memcpy(buf, gu, ngu * sizeof(float));
            assert_int_equal(attn_glu_backward(act, N, F, buf, ld, buf + F, ld, dh, ldh, buf,
                                               ld, buf + F, ld),
                             ATTN_STATUS_OK);
            for (int i = 0; i < N; i++)
                assert_memory_equal(buf + (size_t)i * ld, d + (size_t)i * ld,
                                    2 * F * sizeof(float));
            /* dh given in the buffer that receives dg */
            for (int i = 0; i < N; i++)
                memcpy(b2 + (size_t)i * ld, dh + (size_t)i * ldh, F * sizeof(float));
            assert_int_equal(attn_glu_backward(act, N, F, gu, ld, gu + F, ld, b2, ld, b2, ld,
                                               b2 + F, ld),
                             ATTN_STATUS_OK);
            for (int i = 0; i < N; i++)
                assert_memory_equal(b2 + (size_t)i * ld, d + (size_t)i * ld,
                                    2 * F * sizeof(float));
        }
        float *all[] = {gu, dh, rh, rd, h, d, buf, b2};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) attn_free(all[i]);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_SIMD_BACKEND(glu_simd_vs_ref)

/* RoPE on random data, both modes, forward and inverse: head sizes and rotary widths whose R/2
 * (half) or R (interleaved) leave vector tails of every kind, partial rotary, padded rows (which
 * must stay untouched), and a size above the threading threshold. */
static void rope_simd_vs_ref(size_t bi) {
    tu_need_backend(ALL[bi]);
    tu_rng r = {1414213562ull};
    static const int S[][5] = {/* N, H, D, R, pad */
                               {1, 1, 2, 2, 0},     {3, 2, 8, 8, 8},   {5, 3, 64, 64, 0},
                               {7, 4, 80, 32, 5},   {17, 2, 128, 128, 0}, {4, 8, 96, 24, 3},
                               {2, 1, 6, 6, 1},     {9, 2, 40, 34, 0}, {5, 2, 34, 18, 2},
                               {300, 8, 64, 64, 0}, {1, 32, 128, 128, 0}};
    enum { P = 64 };
    for (size_t si = 0; si < sizeof S / sizeof S[0]; si++) {
        const int N = S[si][0], H = S[si][1], D = S[si][2], R = S[si][3], ld = H * D + S[si][4];
        const size_t n = (size_t)N * ld, nt = (size_t)P * (R / 2);
        float *x = falloc(n), *rf = falloc(n), *ri = falloc(n), *g = falloc(n);
        float *inv = falloc((size_t)R / 2), *ct = falloc(nt), *st = falloc(nt);
        int32_t *pos = attn_alloc(sizeof(int32_t) * (size_t)N);
        assert_non_null(pos);
        for (int i = 0; i < R / 2; i++) inv[i] = powf(10000.0f, -2.0f * (float)i / (float)R);
        assert_int_equal(attn_rope_tables(P, R, inv, ct, st), ATTN_STATUS_OK);
        tu_fill(&r, x, n, -3, 3);
        for (int i = 0; i < N; i++) pos[i] = (int32_t)(tu_uniform(&r, 0, 1) * P) % P;
        for (int m = 0; m < 2; m++) {
            const attn_rope_mode mode = (attn_rope_mode)m;
            assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
            memcpy(rf, x, n * sizeof(float));
            assert_int_equal(attn_rope_apply(mode, N, H, D, R, rf, ld, pos, P, ct, st, false),
                             ATTN_STATUS_OK);
            memcpy(ri, x, n * sizeof(float));
            assert_int_equal(attn_rope_apply(mode, N, H, D, R, ri, ld, pos, P, ct, st, true),
                             ATTN_STATUS_OK);
            assert_int_equal(attn_set_backend(ALL[bi]), ATTN_STATUS_OK);
            const char *bn = attn_backend_name(ALL[bi]);
            for (int inverse = 0; inverse < 2; inverse++) {
                memcpy(g, x, n * sizeof(float));
                assert_int_equal(attn_rope_apply(mode, N, H, D, R, g, ld, pos, P, ct, st,
                                                 inverse != 0),
                                 ATTN_STATUS_OK);
                check(g, inverse ? ri : rf, n, TOL_SIMD, 0,
                      "rope %s%s N=%d H=%d D=%d R=%d ld=%d %s vs ref",
                      m ? "interleaved" : "half", inverse ? " inverse" : "", N, H, D, R, ld,
                      bn);
                for (int i = 0; i < N; i++)
                    for (int j = 0; j < ld; j++) {
                        /* past R in each head, and past H·D: unchanged, bit for bit */
                        const size_t o = (size_t)i * ld + j;
                        if ((j >= H * D || j % D >= R) && memcmp(&g[o], &x[o], sizeof(float)))
                            fail_msg("rope: element (%d, %d) outside the rotary part changed",
                                     i, j);
                    }
            }
        }
        float *all[] = {x, rf, ri, g, inv, ct, st};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) attn_free(all[i]);
        attn_free(pos);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_SIMD_BACKEND(rope_simd_vs_ref)

/* Embedding on random data: SIMD equals ref bit for bit (same summation order), including the
 * threaded column split and accumulation onto a non-zero dtable with heavily repeated ids. */
static void embedding_simd_vs_ref(size_t bi) {
    tu_need_backend(ALL[bi]);
    tu_rng r = {777};
    static const int S[][3] = {{1, 1, 1}, {9, 3, 7}, {50, 10, 17}, {200, 7, 1000}, {512, 50, 768}};
    for (size_t s = 0; s < sizeof S / sizeof S[0]; s++) {
        int N = S[s][0], V = S[s][1], C = S[s][2];
        int32_t *ids = attn_alloc(sizeof(int32_t) * N);
        for (int i = 0; i < N; i++) ids[i] = (int32_t)(tu_uniform(&r, 0, 1) * V) % V;
        float *table = falloc((size_t)V * C), *dout = falloc((size_t)N * C);
        float *t0 = falloc((size_t)V * C), *rt = falloc((size_t)V * C), *gt = falloc((size_t)V * C);
        float *ro = falloc((size_t)N * C), *go = falloc((size_t)N * C);
        tu_fill(&r, table, (size_t)V * C, -1, 1);
        tu_fill(&r, dout, (size_t)N * C, -1, 1);
        tu_fill(&r, t0, (size_t)V * C, -1, 1);
        assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
        memcpy(rt, t0, sizeof(float) * (size_t)V * C);
        assert_int_equal(attn_embedding_forward(N, V, C, ids, table, ro), ATTN_STATUS_OK);
        assert_int_equal(attn_embedding_backward(N, V, C, ids, dout, rt), ATTN_STATUS_OK);
        assert_int_equal(attn_set_backend(ALL[bi]), ATTN_STATUS_OK);
        const char *bn = attn_backend_name(ALL[bi]);
        memcpy(gt, t0, sizeof(float) * (size_t)V * C);
        assert_int_equal(attn_embedding_forward(N, V, C, ids, table, go), ATTN_STATUS_OK);
        assert_int_equal(attn_embedding_backward(N, V, C, ids, dout, gt), ATTN_STATUS_OK);
        check(go, ro, (size_t)N * C, 0, 0, "embedding out    N=%d V=%d C=%d %s", N, V, C, bn);
        check(gt, rt, (size_t)V * C, 0, 0, "embedding dtable N=%d V=%d C=%d %s", N, V, C, bn);
        attn_free(ids), attn_free(table), attn_free(dout), attn_free(t0), attn_free(rt);
        attn_free(gt), attn_free(ro), attn_free(go);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_SIMD_BACKEND(embedding_simd_vs_ref)

/* Special values on every backend: huge logits, -inf entries and all -inf rows in softmax,
 * constant layer-norm rows, and the GELU tails. */
static void special_values(size_t bi) {
    tu_need_backend(ALL[bi]);
    assert_int_equal(attn_set_backend(ALL[bi]), ATTN_STATUS_OK);
    const char *bn = attn_backend_name(ALL[bi]);
    float x[3 * 37], y[3 * 37];
    for (int j = 0; j < 37; j++) {
        x[j] = -INFINITY;                         /* row 0: all -inf -> zeros */
        x[37 + j] = j == 20 ? 3e38f : -3e38f;     /* row 1: extreme finite values */
        x[74 + j] = j % 2 ? -INFINITY : 1e30f;    /* row 2: half masked, ties */
    }
    assert_int_equal(attn_softmax_forward(3, 37, x, y), ATTN_STATUS_OK);
    float want[3 * 37];
    for (int j = 0; j < 37; j++) {
        want[j] = 0;
        want[37 + j] = j == 20 ? 1.0f : 0.0f;
        want[74 + j] = j % 2 ? 0.0f : 1.0f / 19;
    }
    check(y, want, 3 * 37, 1e-6, 0, "softmax special rows %s", bn);

    float c[2 * 9], cy[2 * 9], m[2], rs[2], wantc[2 * 9];
    for (int j = 0; j < 18; j++) c[j] = j < 9 ? 7.125f : -1e6f, wantc[j] = 0;
    assert_int_equal(attn_layernorm_forward(2, 9, c, NULL, NULL, 1e-5f, cy, m, rs),
                     ATTN_STATUS_OK);
    check(cy, wantc, 18, 0, 0, "layernorm constant rows -> 0 %s", bn);
    assert_true(m[0] == 7.125f && m[1] == -1e6f);

    float g[6] = {-200, -30, 0, 30, 200, -0.0f}, gy[6], gd[6], dy1[6] = {1, 1, 1, 1, 1, 1};
    float wy[6] = {0, 0, 0, 30, 200, 0}, wd[6] = {0, 0, 0.5f, 1, 1, 0.5f};
    for (int a = ATTN_ACT_GELU_TANH; a <= ATTN_ACT_GELU_ERF; a++) {
        assert_int_equal(attn_act_forward((attn_act)a, 6, g, gy), ATTN_STATUS_OK);
        assert_int_equal(attn_act_backward((attn_act)a, 6, g, dy1, gd), ATTN_STATUS_OK);
        check(gy, wy, 6, 1e-7, 1e-30, "gelu %d tails y  %s", a, bn);
        check(gd, wd, 6, 1e-7, 1e-30, "gelu %d tails dx %s", a, bn);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(special_values)

/* Element by element: |got − want| <= rtol·|want| + atol, infinities exactly (with their sign),
 * NaN only where NaN is wanted. */
static void check_each(const char *what, const float *got, const float *want, int n, double rtol,
                       double atol) {
    for (int i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        int ok = isnan(w)   ? isnan(g)
                 : isinf(w) ? g == w
                            : isfinite(g) && fabs(g - w) <= rtol * fabs(w) + atol;
        if (!ok) {
            printf("  %s: element %d is %.9g, expected %.9g FAIL\n", what, i, g, w);
            tu_failures++;
        }
    }
    if (!tu_quiet()) printf("  %-44s checked %d elements\n", what, n);
}

/* SiLU, GLU-SiLU and RMSNorm at extreme inputs on every backend: no NaN or inf from finite
 * input, the limits at ±inf (−0 and +inf; derivatives 0 and 1), the deep left tail through the
 * subnormals, a zero RMSNorm row. Expected values: float64 (torch) rounded to float; the
 * tolerance 1e-5 relative covers exp(−90) = 8e-40 being subnormal inside the SIMD sigmoid
 * (1.7e-6 measured), 1e-40 absolute the tail below that. */
static void special_values_llama(size_t bi) {
    tu_need_backend(ALL[bi]);
    enum { NS = 13 };
    const float x[NS] = {-INFINITY, -1e30f, -100.0f, -90.0f, -0.0f, 1e-30f, 90.0f,
                         1e30f,     INFINITY, 3e38f, -3e38f, NAN,   -1.2784645f};
    const float wy[NS] = {-0.0f, -0.0f, -3.7204474e-42f, -7.3746112e-38f, -0.0f, 5e-31f, 90.0f,
                          1e30f, INFINITY, 3e38f, -0.0f, NAN, -0.27846454f};
    const float wd[NS] = {0.0f, -0.0f, -3.6826124e-42f, -7.2926711e-38f, 0.5f, 0.5f, 1.0f,
                          1.0f, 1.0f, 1.0f, -0.0f, NAN, 0.0f};
    float ones[NS], y[NS], d[NS];
    for (int i = 0; i < NS; i++) ones[i] = 1.0f;
    assert_int_equal(attn_set_backend(ALL[bi]), ATTN_STATUS_OK);
    const char *bn = attn_backend_name(ALL[bi]);
    char what[96];
    assert_int_equal(attn_act_forward(ATTN_ACT_SILU, NS, x, y), ATTN_STATUS_OK);
    assert_int_equal(attn_act_backward(ATTN_ACT_SILU, NS, x, ones, d), ATTN_STATUS_OK);
    snprintf(what, sizeof what, "silu extremes y  %s", bn);
    check_each(what, y, wy, NS, 1e-5, 1e-40);
    /* silu'(−1.2785) = 0 exactly in theory: only an absolute bound means anything */
    snprintf(what, sizeof what, "silu extremes dx %s", bn);
    check_each(what, d, wd, NS, 1e-5, 1e-6);

    /* SwiGLU at the extremes: u = 2 */
    float g4[4] = {-INFINITY, -1e30f, 1e30f, INFINITY}, u4[4] = {2, 2, 2, 2}, h4[4];
    float dg4[4], du4[4], one4[4] = {1, 1, 1, 1};
    const float wh[4] = {-0.0f, -0.0f, 2e30f, INFINITY}, wdg[4] = {0, 0, 2, 2};
    const float wdu[4] = {-0.0f, -0.0f, 1e30f, INFINITY};
    assert_int_equal(attn_glu_forward(ATTN_ACT_SILU, 1, 4, g4, 4, u4, 4, h4, 4),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_glu_backward(ATTN_ACT_SILU, 1, 4, g4, 4, u4, 4, one4, 4, dg4, 4, du4,
                                       4),
                     ATTN_STATUS_OK);
    snprintf(what, sizeof what, "swiglu extremes h  %s", bn);
    check_each(what, h4, wh, 4, 1e-6, 0);
    snprintf(what, sizeof what, "swiglu extremes dg %s", bn);
    check_each(what, dg4, wdg, 4, 1e-6, 0);
    snprintf(what, sizeof what, "swiglu extremes du %s", bn);
    check_each(what, du4, wdu, 4, 1e-6, 0);

    /* RMSNorm: a zero row gives y = 0 and rstd = 1/sqrt(eps); a row of 1e18 (x² = 1e36,
     * still finite in float) gives ±w */
    float z[2 * 19], zy[2 * 19], zr[2], wz[2 * 19];
    for (int j = 0; j < 19; j++) {
        z[j] = 0.0f, wz[j] = 0.0f;
        z[19 + j] = j % 2 ? -1e18f : 1e18f, wz[19 + j] = j % 2 ? -1.0f : 1.0f;
    }
    assert_int_equal(attn_rmsnorm_forward(2, 19, z, NULL, 1e-6f, zy, zr), ATTN_STATUS_OK);
    snprintf(what, sizeof what, "rmsnorm zero / huge rows %s", bn);
    check_each(what, zy, wz, 2 * 19, 1e-6, 0);
    const float wr[2] = {(float)(1.0 / sqrt((double)1e-6f)), 1e-18f};
    snprintf(what, sizeof what, "rmsnorm zero / huge rows rstd %s", bn);
    check_each(what, zr, wr, 2, 1e-6, 0);
    attn_set_backend(ATTN_BACKEND_AUTO);
}
PER_BACKEND(special_values_llama)

/* ---- (d) invalid arguments --------------------------------------------------------------- */

#define EXPECT_INVALID(call)                                                                     \
    do {                                                                                         \
        attn_clear_error();                                                                      \
        attn_status s_ = (call);                                                                 \
        printf("  %-60s -> %s: %s\n", #call, attn_status_str(s_), attn_last_error());            \
        assert_int_equal(s_, ATTN_STATUS_INVALID_ARGUMENT);                                      \
        assert_true(attn_last_error()[0] != '\0');                                               \
    } while (0)

static void test_bad_arguments(void **state) {
    (void)state;
    float x[12] = {0}, y[12], l;
    int32_t ids[3] = {0, 5, 1}, neg[3] = {0, -1, 1}, tg[3] = {0, 1, 7};
    EXPECT_INVALID(attn_embedding_forward(3, 5, 4, ids, x, y));
    EXPECT_INVALID(attn_embedding_forward(3, 5, 4, neg, x, y));
    EXPECT_INVALID(attn_embedding_backward(3, 5, 4, ids, x, y));
    EXPECT_INVALID(attn_embedding_forward(-1, 5, 4, ids, x, y));
    EXPECT_INVALID(attn_softmax_forward(-2, 4, x, y));
    EXPECT_INVALID(attn_softmax_forward(2, 0, x, y));
    EXPECT_INVALID(attn_softmax_backward(2, -4, x, x, y));
    EXPECT_INVALID(attn_log_softmax_forward(2, 0, x, y));
    EXPECT_INVALID(attn_log_softmax_forward(2, 6, NULL, y));
    EXPECT_INVALID(attn_layernorm_forward(2, -6, x, NULL, NULL, 1e-5f, y, NULL, NULL));
    EXPECT_INVALID(attn_layernorm_forward(2, 6, x, NULL, NULL, -1.0f, y, NULL, NULL));
    EXPECT_INVALID(attn_layernorm_backward(-1, 6, x, NULL, x, x, x, y, NULL, NULL));
    EXPECT_INVALID(attn_cross_entropy(3, 4, x, tg, -100, 0.0f, &l, y));  /* target 7 >= V */
    EXPECT_INVALID(attn_cross_entropy(3, 8, x, tg, -100, 1.5f, &l, y));
    EXPECT_INVALID(attn_cross_entropy(3, 8, x, tg, -100, -0.1f, &l, y));
    EXPECT_INVALID(attn_cross_entropy(3, 8, x, tg, -100, NAN, &l, y));
    EXPECT_INVALID(attn_cross_entropy(-3, 8, x, tg, -100, 0.0f, &l, y));
    EXPECT_INVALID(attn_act_forward((attn_act)42, 4, x, y));
    EXPECT_INVALID(attn_act_backward((attn_act)-1, 4, x, x, y));
    EXPECT_INVALID(attn_act_forward((attn_act)(ATTN_ACT_SILU + 1), 4, x, y));
    EXPECT_INVALID(attn_act_backward((attn_act)(ATTN_ACT_SILU + 1), 4, x, x, y));

    /* RMSNorm */
    EXPECT_INVALID(attn_rmsnorm_forward(-1, 6, x, NULL, 1e-6f, y, NULL));
    EXPECT_INVALID(attn_rmsnorm_forward(2, 0, x, NULL, 1e-6f, y, NULL));
    EXPECT_INVALID(attn_rmsnorm_forward(2, 6, x, NULL, -1e-6f, y, NULL));
    EXPECT_INVALID(attn_rmsnorm_forward(2, 6, x, NULL, NAN, y, NULL));
    EXPECT_INVALID(attn_rmsnorm_forward(2, 6, x, NULL, INFINITY, y, NULL));
    EXPECT_INVALID(attn_rmsnorm_forward(2, 6, NULL, NULL, 1e-6f, y, NULL));
    EXPECT_INVALID(attn_rmsnorm_forward(2, 6, x, NULL, 1e-6f, NULL, NULL));
    EXPECT_INVALID(attn_rmsnorm_backward(-1, 6, x, NULL, x, x, y, NULL));
    EXPECT_INVALID(attn_rmsnorm_backward(2, -6, x, NULL, x, x, y, NULL));
    EXPECT_INVALID(attn_rmsnorm_backward(2, 6, x, NULL, NULL, x, y, NULL)); /* no rstd */
    EXPECT_INVALID(attn_rmsnorm_backward(2, 6, x, NULL, x, NULL, y, NULL));
    EXPECT_INVALID(attn_rmsnorm_backward(2, 6, x, NULL, x, x, NULL, NULL));
    tu_expect_fail(attn_rmsnorm_forward(2, 6, x, NULL, -1.0f, y, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "rmsnorm", "eps");

    /* RoPE: x (2, 8) as 2 heads of 4, tables for P = 3 positions of R/2 = 2 */
    float rx[16] = {0}, ct[6] = {1, 1, 1, 1, 1, 1}, st[6] = {0}, inv[2] = {1, 0.5f};
    int32_t pos[2] = {0, 2}, past[2] = {0, 3}, negp[2] = {-1, 0};
    const attn_rope_mode HALF = ATTN_ROPE_HALF;
    EXPECT_INVALID(attn_rope_apply((attn_rope_mode)2, 2, 2, 4, 4, rx, 8, pos, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply((attn_rope_mode)-1, 2, 2, 4, 4, rx, 8, pos, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, -1, 2, 4, 4, rx, 8, pos, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 0, 4, 4, rx, 8, pos, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 0, 0, rx, 8, pos, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 3, rx, 8, pos, 3, ct, st, false)); /* odd R */
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 6, rx, 8, pos, 3, ct, st, false)); /* R > D */
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 0, rx, 8, pos, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, -2, rx, 8, pos, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 4, rx, 7, pos, 3, ct, st, false)); /* ld */
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 4, rx, 8, pos, 0, ct, st, false)); /* P */
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 4, rx, 8, past, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 4, rx, 8, negp, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 4, NULL, 8, pos, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 4, rx, 8, NULL, 3, ct, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 4, rx, 8, pos, 3, NULL, st, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 2, 4, 4, rx, 8, pos, 3, ct, NULL, false));
    EXPECT_INVALID(attn_rope_apply(HALF, 2, 65536, 65536, 4, rx, INT32_MAX, pos, 3, ct, st,
                                   false)); /* H·D overflows int */
    tu_expect_fail3(attn_rope_apply(HALF, 2, 2, 4, 4, rx, 8, past, 3, ct, st, false),
                    ATTN_STATUS_INVALID_ARGUMENT, "position 3", "row 1", "[0, P=3)");
    tu_expect_fail(attn_rope_apply(HALF, 2, 2, 4, 5, rx, 8, pos, 3, ct, st, false),
                   ATTN_STATUS_INVALID_ARGUMENT, "R=5", "even");
    for (int i = 0; i < 16; i++) assert_true(rx[i] == 0.0f); /* nothing was touched */
    EXPECT_INVALID(attn_rope_tables(-1, 4, inv, ct, st));
    EXPECT_INVALID(attn_rope_tables(3, 3, inv, ct, st));
    EXPECT_INVALID(attn_rope_tables(3, 0, inv, ct, st));
    EXPECT_INVALID(attn_rope_tables(3, 4, NULL, ct, st));
    EXPECT_INVALID(attn_rope_tables(3, 4, inv, NULL, st));
    EXPECT_INVALID(attn_rope_tables(3, 4, inv, ct, NULL));

    /* GLU: g, u in gu (2, 6) as halves of F = 3 */
    float gu[12] = {0}, gh[6], gd[12];
    const attn_act S = ATTN_ACT_SILU;
    EXPECT_INVALID(attn_glu_forward((attn_act)(ATTN_ACT_SILU + 1), 2, 3, gu, 6, gu + 3, 6, gh, 3));
    EXPECT_INVALID(attn_glu_forward((attn_act)-1, 2, 3, gu, 6, gu + 3, 6, gh, 3));
    EXPECT_INVALID(attn_glu_forward(S, -1, 3, gu, 6, gu + 3, 6, gh, 3));
    EXPECT_INVALID(attn_glu_forward(S, 2, 0, gu, 6, gu + 3, 6, gh, 3));
    EXPECT_INVALID(attn_glu_forward(S, 2, 3, gu, 2, gu + 3, 6, gh, 3)); /* ldg < F */
    EXPECT_INVALID(attn_glu_forward(S, 2, 3, gu, 6, gu + 3, 2, gh, 3));
    EXPECT_INVALID(attn_glu_forward(S, 2, 3, gu, 6, gu + 3, 6, gh, 2));
    EXPECT_INVALID(attn_glu_forward(S, 2, 3, NULL, 6, gu + 3, 6, gh, 3));
    EXPECT_INVALID(attn_glu_forward(S, 2, 3, gu, 6, NULL, 6, gh, 3));
    EXPECT_INVALID(attn_glu_forward(S, 2, 3, gu, 6, gu + 3, 6, NULL, 3));
    EXPECT_INVALID(attn_glu_forward(S, 2, 3, gu, 6, gu + 3, 6, gu, 3)); /* h = g, other stride */
    EXPECT_INVALID(attn_glu_backward((attn_act)7, 2, 3, gu, 6, gu + 3, 6, gh, 3, gd, 6, gd + 3, 6));
    EXPECT_INVALID(attn_glu_backward(S, -2, 3, gu, 6, gu + 3, 6, gh, 3, gd, 6, gd + 3, 6));
    EXPECT_INVALID(attn_glu_backward(S, 2, 3, gu, 6, gu + 3, 6, gh, 3, gd, 2, gd + 3, 6));
    EXPECT_INVALID(attn_glu_backward(S, 2, 3, gu, 6, gu + 3, 6, gh, 3, gd, 6, gd + 3, 1));
    EXPECT_INVALID(attn_glu_backward(S, 2, 3, gu, 6, gu + 3, 6, gh, 2, gd, 6, gd + 3, 6));
    EXPECT_INVALID(attn_glu_backward(S, 2, 3, gu, 6, gu + 3, 6, NULL, 3, gd, 6, gd + 3, 6));
    EXPECT_INVALID(attn_glu_backward(S, 2, 3, gu, 6, gu + 3, 6, gh, 3, NULL, 6, gd + 3, 6));
    EXPECT_INVALID(attn_glu_backward(S, 2, 3, gu, 6, gu + 3, 6, gh, 3, gd, 6, NULL, 6));
    EXPECT_INVALID(attn_glu_backward(S, 2, 3, gu, 6, gu + 3, 6, gh, 3, gd, 6, gd, 6)); /* dg = du */
    EXPECT_INVALID(attn_glu_backward(S, 2, 3, gu, 6, gu + 3, 6, gh, 3, gu, 3, gd + 3, 6));
    tu_expect_fail(attn_glu_backward(S, 2, 3, gu, 6, gu + 3, 6, gh, 3, gh, 6, gd + 3, 6),
                   ATTN_STATUS_INVALID_ARGUMENT, "glu backward", "same row stride");

    /* Empty inputs are fine. */
    assert_int_equal(attn_rmsnorm_forward(0, 4, NULL, NULL, 1e-6f, NULL, NULL), ATTN_STATUS_OK);
    assert_int_equal(attn_rmsnorm_backward(0, 4, NULL, NULL, NULL, NULL, NULL, NULL),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_rope_apply(HALF, 0, 2, 4, 4, NULL, 8, NULL, 3, NULL, NULL, false),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_rope_tables(0, 4, NULL, NULL, NULL), ATTN_STATUS_OK);
    assert_int_equal(attn_glu_forward(S, 0, 3, NULL, 6, NULL, 6, NULL, 3), ATTN_STATUS_OK);
    assert_int_equal(attn_glu_backward(S, 0, 3, NULL, 6, NULL, 6, NULL, 3, NULL, 6, NULL, 6),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_softmax_forward(0, 4, NULL, NULL), ATTN_STATUS_OK);
    assert_int_equal(attn_act_forward(ATTN_ACT_GELU_ERF, 0, NULL, NULL), ATTN_STATUS_OK);
    assert_int_equal(attn_cross_entropy(0, 4, NULL, NULL, -100, 0.0f, &l, NULL), ATTN_STATUS_OK);
    assert_true(l == 0.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_softmax_ref),
        cmocka_unit_test(test_torch_softmax_avx2),
        cmocka_unit_test(test_torch_softmax_avx512),
        cmocka_unit_test(test_torch_log_softmax_ref),
        cmocka_unit_test(test_torch_log_softmax_avx2),
        cmocka_unit_test(test_torch_log_softmax_avx512),
        cmocka_unit_test(test_torch_layernorm_ref),
        cmocka_unit_test(test_torch_layernorm_avx2),
        cmocka_unit_test(test_torch_layernorm_avx512),
        cmocka_unit_test(test_torch_activations_ref),
        cmocka_unit_test(test_torch_activations_avx2),
        cmocka_unit_test(test_torch_activations_avx512),
        cmocka_unit_test(test_torch_embedding_ref),
        cmocka_unit_test(test_torch_embedding_avx2),
        cmocka_unit_test(test_torch_embedding_avx512),
        cmocka_unit_test(test_torch_cross_entropy_ref),
        cmocka_unit_test(test_torch_cross_entropy_avx2),
        cmocka_unit_test(test_torch_cross_entropy_avx512),
        cmocka_unit_test(test_torch_rmsnorm_ref),
        cmocka_unit_test(test_torch_rmsnorm_avx2),
        cmocka_unit_test(test_torch_rmsnorm_avx512),
        cmocka_unit_test(test_torch_rope_ref),
        cmocka_unit_test(test_torch_rope_avx2),
        cmocka_unit_test(test_torch_rope_avx512),
        cmocka_unit_test(test_torch_glu_ref),
        cmocka_unit_test(test_torch_glu_avx2),
        cmocka_unit_test(test_torch_glu_avx512),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_simd_vs_ref_avx2),
        cmocka_unit_test(test_simd_vs_ref_avx512),
        cmocka_unit_test(test_glu_simd_vs_ref_avx2),
        cmocka_unit_test(test_glu_simd_vs_ref_avx512),
        cmocka_unit_test(test_rope_simd_vs_ref_avx2),
        cmocka_unit_test(test_rope_simd_vs_ref_avx512),
        cmocka_unit_test(test_embedding_simd_vs_ref_avx2),
        cmocka_unit_test(test_embedding_simd_vs_ref_avx512),
        cmocka_unit_test(test_special_values_ref),
        cmocka_unit_test(test_special_values_avx2),
        cmocka_unit_test(test_special_values_avx512),
        cmocka_unit_test(test_special_values_llama_ref),
        cmocka_unit_test(test_special_values_llama_avx2),
        cmocka_unit_test(test_special_values_llama_avx512),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

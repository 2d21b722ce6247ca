/* test_elementwise.c — softmax, layer norm, activations, embedding and cross-entropy, forward and
 * backward, on every backend this CPU can run:
 *   (a) against PyTorch (float64 autograd) via $ATTN_REF_DIR/elementwise.safetensors, written by
 *       tools/ref_elementwise.py (tests/run.sh generates it first);
 *   (b) finite-difference gradient checks of the reference path;
 *   (c) the SIMD paths against the reference path on random data, including sizes that are
 *       split across threads and in-place (aliased) calls;
 *   (d) invalid arguments.
 * Tolerances (closeness = max|got − ref| <= rtol · max|ref| + atol over a whole tensor):
 *   vs PyTorch: rtol 1e-5 for every output and gradient (embedding forward: exact);
 *   SIMD vs ref: rtol 2e-6 (embedding: exact, the summation order is the same);
 *   finite differences: relative error (max|fd − analytic| / max|analytic|) <= 1e-3.
 * Every check prints its measured error (ATTN_TEST_QUIET=1 silences passing ones). */
#include "attn_io.h"
#include "attn_kernels.h"
#include "tu.h"

#define TOL_TORCH 1e-5
#define TOL_SIMD 2e-6
#define TOL_FD 1e-3

static const attn_backend ALL[] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX2, ATTN_BACKEND_AVX512};
#define NBACKENDS (sizeof ALL / sizeof ALL[0])

/* Selects backend i if this CPU has it; says so once when it does not. */
static int use_backend(size_t i) {
    static int told[NBACKENDS];
    if (!attn_backend_available(ALL[i])) {
        if (!told[i]++) printf("  (backend %s not available on this CPU: skipped)\n",
                               attn_backend_name(ALL[i]));
        return 0;
    }
    assert_int_equal(attn_set_backend(ALL[i]), ATTN_STATUS_OK);
    return 1;
}

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

static void test_torch_softmax(void **state) {
    (void)state;
    TU_BEGIN();
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
        for (size_t b = 0; b < NBACKENDS; b++) {
            if (!use_backend(b)) continue;
            const char *bn = attn_backend_name(ALL[b]);
            assert_int_equal(attn_softmax_forward(N, D, x, gy), ATTN_STATUS_OK);
            check(gy, y, n, TOL_TORCH, 0, "softmax.%d y  (%dx%d) %s", k, N, D, bn);
            /* The backward takes PyTorch's y, so it is judged on its own. */
            assert_int_equal(attn_softmax_backward(N, D, y, dy, gdx), ATTN_STATUS_OK);
            check(gdx, dx, n, TOL_TORCH, 0, "softmax.%d dx (%dx%d) %s", k, N, D, bn);
        }
        attn_free(x), attn_free(dy), attn_free(y), attn_free(dx), attn_free(gy), attn_free(gdx);
    }
    assert_true(k > 0);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
    TU_END();
}

static void test_torch_layernorm(void **state) {
    (void)state;
    TU_BEGIN();
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
        for (size_t b = 0; b < NBACKENDS; b++) {
            if (!use_backend(b)) continue;
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
        }
        float *all[] = {x, w, bias, dy, y, mean, rstd, dx, dw, db, gy, gm, gr, gdx, gdw, gdb};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) attn_free(all[i]);
    }
    assert_true(k > 0);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
    TU_END();
}

static void test_torch_activations(void **state) {
    (void)state;
    TU_BEGIN();
    attn_st_file *f = open_ref();
    static const struct {
        const char *name;
        attn_act act;
    } acts[] = {{"relu", ATTN_ACT_RELU},
                {"gelu_tanh", ATTN_ACT_GELU_TANH},
                {"gelu_erf", ATTN_ACT_GELU_ERF}};
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
            for (size_t b = 0; b < NBACKENDS; b++) {
                if (!use_backend(b)) continue;
                const char *bn = attn_backend_name(ALL[b]);
                assert_int_equal(attn_act_forward(acts[a].act, n, x, gy), ATTN_STATUS_OK);
                check(gy, y, n, TOL_TORCH, 0, "%s.%d y  (%zu) %s", acts[a].name, k, n, bn);
                assert_int_equal(attn_act_backward(acts[a].act, n, x, dy, gdx), ATTN_STATUS_OK);
                check(gdx, dx, n, TOL_TORCH, 0, "%s.%d dx (%zu) %s", acts[a].name, k, n, bn);
            }
            attn_free(x), attn_free(dy), attn_free(y), attn_free(dx), attn_free(gy);
            attn_free(gdx);
        }
        assert_true(k > 0);
    }
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
    TU_END();
}

static void test_torch_embedding(void **state) {
    (void)state;
    TU_BEGIN();
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
        for (size_t b = 0; b < NBACKENDS; b++) {
            if (!use_backend(b)) continue;
            const char *bn = attn_backend_name(ALL[b]);
            assert_int_equal(attn_embedding_forward(N, V, C, ids, table, gout), ATTN_STATUS_OK);
            check(gout, out, (size_t)N * C, 0, 0, "embedding.%d out    (N=%d V=%d C=%d) %s", k, N,
                  V, C, bn);
            memset(gdt, 0, sizeof(float) * (size_t)V * C);
            assert_int_equal(attn_embedding_backward(N, V, C, ids, dout, gdt), ATTN_STATUS_OK);
            check(gdt, dtable, (size_t)V * C, TOL_TORCH, 0,
                  "embedding.%d dtable (N=%d V=%d C=%d) %s", k, N, V, C, bn);
        }
        attn_free(ids), attn_free(table), attn_free(dout), attn_free(out), attn_free(dtable);
        attn_free(gout), attn_free(gdt);
    }
    assert_true(k > 0);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
    TU_END();
}

static void test_torch_cross_entropy(void **state) {
    (void)state;
    TU_BEGIN();
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
        for (size_t b = 0; b < NBACKENDS; b++) {
            if (!use_backend(b)) continue;
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
        }
        attn_free(x), attn_free(tg), attn_free(loss), attn_free(dx), attn_free(gdx);
    }
    assert_true(k > 0);
    attn_st_close(f);
    attn_set_backend(ATTN_BACKEND_AUTO);
    TU_END();
}

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
static double loss_ce(void *v) {
    fd_ctx *c = v;
    float l;
    assert_int_equal(attn_cross_entropy(c->N, c->D, c->x, c->tg, -100, c->ls, &l, NULL),
                     ATTN_STATUS_OK);
    return l;
}

static void test_finite_differences(void **state) {
    (void)state;
    TU_BEGIN();
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
    static const attn_act acts[] = {ATTN_ACT_GELU_TANH, ATTN_ACT_GELU_ERF};
    static const char *names[] = {"gelu_tanh dx (64)", "gelu_erf dx (64)"};
    enum { NA = 64 };
    float xa[NA], ones[NA], yp[NA], ym[NA], ga[NA], fd[NA];
    tu_fill(&r, xa, NA, -5, 5);
    for (int i = 0; i < NA; i++) ones[i] = 1;
    for (int a = 0; a < 2; a++) {
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

    /* cross-entropy with label smoothing and an ignored row */
    int32_t tg[N] = {4, -100, 10};
    c.tg = tg;
    c.ls = 0.1f;
    float l;
    assert_int_equal(attn_cross_entropy(N, D, x, tg, -100, c.ls, &l, g), ATTN_STATUS_OK);
    fd_check("cross_entropy dlogits (3x11, ls=0.1)", loss_ce, &c, x, NMAX, g, 1e-2f);

    attn_set_backend(ATTN_BACKEND_AUTO);
    TU_END();
}

/* ---- (c) SIMD against the reference path ------------------------------------------------- */

/* Shapes (N rows of D): odd lengths for the masked tails, and sizes above the threading
 * threshold (32768 elements) so the OpenMP paths run. */
static const int SHAPES[][2] = {{1, 1},   {3, 7},   {5, 17},   {4, 100}, {2, 1000},
                                {2, 50257}, {64, 768}, {333, 129}, {1, 40000}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static void test_simd_vs_ref(void **state) {
    (void)state;
    TU_BEGIN();
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
        float *rce = falloc(n), *rg[3], *rgb[3];
        assert_int_equal(attn_softmax_forward(N, D, x, rsm), ATTN_STATUS_OK);
        assert_int_equal(attn_softmax_backward(N, D, rsm, dy, rsmb), ATTN_STATUS_OK);
        assert_int_equal(attn_layernorm_forward(N, D, x, w, b, 1e-5f, rln, rm, rr), ATTN_STATUS_OK);
        memcpy(rdw, acc0, sizeof(float) * D);
        memcpy(rdb, acc0, sizeof(float) * D);
        assert_int_equal(attn_layernorm_backward(N, D, x, w, rm, rr, dy, rlnb, rdw, rdb),
                         ATTN_STATUS_OK);
        assert_int_equal(attn_cross_entropy(N, D, x, tg, -100, ls, &rl, rce), ATTN_STATUS_OK);
        for (int a = 0; a < 3; a++) {
            rg[a] = falloc(n), rgb[a] = falloc(n);
            assert_int_equal(attn_act_forward((attn_act)(a + 1), n, x, rg[a]), ATTN_STATUS_OK);
            assert_int_equal(attn_act_backward((attn_act)(a + 1), n, x, dy, rgb[a]),
                             ATTN_STATUS_OK);
        }

        for (size_t bi = 1; bi < NBACKENDS; bi++) {
            if (!use_backend(bi)) continue;
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

            for (int a = 0; a < 3; a++) {
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
        }
        float *all[] = {x,  dy, w,  b,  rm,   rr,   rdw, rdb, acc0, gy, gdx,
                        gm, gr, gdw, gdb, rsm, rsmb, rln, rlnb, rce, rg[0], rg[1], rg[2],
                        rgb[0], rgb[1], rgb[2]};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) attn_free(all[i]);
        attn_free(tg);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
    TU_END();
}

/* Embedding on random data: SIMD equals ref bit for bit (same summation order), including the
 * threaded column split and accumulation onto a non-zero dtable with heavily repeated ids. */
static void test_embedding_simd_vs_ref(void **state) {
    (void)state;
    TU_BEGIN();
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
        for (size_t bi = 1; bi < NBACKENDS; bi++) {
            if (!use_backend(bi)) continue;
            const char *bn = attn_backend_name(ALL[bi]);
            memcpy(gt, t0, sizeof(float) * (size_t)V * C);
            assert_int_equal(attn_embedding_forward(N, V, C, ids, table, go), ATTN_STATUS_OK);
            assert_int_equal(attn_embedding_backward(N, V, C, ids, dout, gt), ATTN_STATUS_OK);
            check(go, ro, (size_t)N * C, 0, 0, "embedding out    N=%d V=%d C=%d %s", N, V, C, bn);
            check(gt, rt, (size_t)V * C, 0, 0, "embedding dtable N=%d V=%d C=%d %s", N, V, C, bn);
        }
        attn_free(ids), attn_free(table), attn_free(dout), attn_free(t0), attn_free(rt);
        attn_free(gt), attn_free(ro), attn_free(go);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
    TU_END();
}

/* Special values on every backend: huge logits, -inf entries and all -inf rows in softmax,
 * constant layer-norm rows, and the GELU tails. */
static void test_special_values(void **state) {
    (void)state;
    TU_BEGIN();
    for (size_t bi = 0; bi < NBACKENDS; bi++) {
        if (!use_backend(bi)) continue;
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
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
    TU_END();
}

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
    /* Empty inputs are fine. */
    assert_int_equal(attn_softmax_forward(0, 4, NULL, NULL), ATTN_STATUS_OK);
    assert_int_equal(attn_act_forward(ATTN_ACT_GELU_ERF, 0, NULL, NULL), ATTN_STATUS_OK);
    assert_int_equal(attn_cross_entropy(0, 4, NULL, NULL, -100, 0.0f, &l, NULL), ATTN_STATUS_OK);
    assert_true(l == 0.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_softmax),
        cmocka_unit_test(test_torch_layernorm),
        cmocka_unit_test(test_torch_activations),
        cmocka_unit_test(test_torch_embedding),
        cmocka_unit_test(test_torch_cross_entropy),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_simd_vs_ref),
        cmocka_unit_test(test_embedding_simd_vs_ref),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

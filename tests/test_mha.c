/* test_mha.c — multi-head attention (attn_nn.h) against PyTorch (tools/ref_mha.py): output,
 * attention probabilities and every gradient, for every mask kind and every available kernel
 * backend, with the weights in one fused buffer and in separate allocations. Then the mask
 * properties the article turns on, and bad arguments.
 *
 * Tolerances (fp32 against a float64 reference), as max|err| <= rtol * max|ref|:
 *   y, probs, gradients: 1e-5 (measured worst: y 1.6e-6, probs 3.2e-6, gradients 2.8e-6),
 *   plus an absolute 1e-5 · max|dx_ref| for each gradient: some are exactly zero in exact
 *   arithmetic (the key bias, by softmax's shift invariance; W_Q and W_K when T = 1), and fp32
 *   leaves rounding noise there at the scale of the layer's other gradients. */
#include "tu.h"

#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_nn.h"

#include <jansson.h>

#define RTOL_FWD 1e-5
#define RTOL_GRAD 1e-5

static const char *const WNAMES[8] = {"w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o"};

static float **wfield(attn_mha_weights *w, int i) {
    float **f[8] = {&w->w_q, &w->b_q, &w->w_k, &w->b_k, &w->w_v, &w->b_v, &w->w_o, &w->b_o};
    return f[i];
}

typedef struct {
    int B, Tq, Tk, C, Ckv, H, D;
    bool bias, causal, self;
    int32_t kv_len[16];
    bool has_kv_len;
} mcase;

static bool parse_case(attn_st_file *f, int i, mcase *c) {
    char key[32];
    snprintf(key, sizeof key, "case%d", i);
    const char *m = attn_st_metadata(f, key);
    if (!m) return false;
    json_error_t err;
    json_t *o = json_loads(m, 0, &err);
    if (!o) return false;
    c->B = (int)json_integer_value(json_object_get(o, "B"));
    c->Tq = (int)json_integer_value(json_object_get(o, "Tq"));
    c->Tk = (int)json_integer_value(json_object_get(o, "Tk"));
    c->C = (int)json_integer_value(json_object_get(o, "C"));
    c->Ckv = (int)json_integer_value(json_object_get(o, "Ckv"));
    c->H = (int)json_integer_value(json_object_get(o, "H"));
    c->D = (int)json_integer_value(json_object_get(o, "D"));
    c->bias = json_is_true(json_object_get(o, "bias"));
    c->causal = json_is_true(json_object_get(o, "causal"));
    c->self = json_is_true(json_object_get(o, "self"));
    json_t *kl = json_object_get(o, "kv_len");
    c->has_kv_len = json_is_array(kl);
    for (size_t b = 0; c->has_kv_len && b < json_array_size(kl) && b < 16; b++)
        c->kv_len[b] = (int32_t)json_integer_value(json_array_get(kl, b));
    json_decref(o);
    return true;
}

static float *load(attn_st_file *f, int i, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "case%d.%s", i, name);
    float *d = NULL;
    attn_status s = attn_st_load_f32(f, key, &d, NULL);
    if (s) fail_msg("loading %s: %s", key, attn_last_error());
    return d;
}

/* Run one case on the current backend; fused = weights in one attn_mha_weights_view buffer. */
static void run_case(attn_st_file *f, int i, const mcase *c, bool fused) {
    attn_mha_config cfg = {c->C, c->Ckv, c->H, c->D, c->bias};
    attn_mha_weights w, g;
    float *wbuf = NULL, *gbuf = NULL, *sep[8] = {0}, *gsep[8] = {0};
    size_t np = attn_mha_num_params(&cfg);
    assert_true(np > 0);
    if (fused) {
        wbuf = attn_calloc(np * sizeof(float));
        gbuf = attn_calloc(np * sizeof(float));
        assert_int_equal(attn_mha_weights_view(&cfg, wbuf, &w), ATTN_STATUS_OK);
        assert_int_equal(attn_mha_weights_view(&cfg, gbuf, &g), ATTN_STATUS_OK);
    } else {
        memset(&w, 0, sizeof w);
        memset(&g, 0, sizeof g);
    }
    for (int k = 0; k < 8; k++) {
        if (!c->bias && WNAMES[k][0] == 'b') continue;
        float *src = load(f, i, WNAMES[k]);
        const attn_st_tensor *t;
        char key[64];
        snprintf(key, sizeof key, "case%d.%s", i, WNAMES[k]);
        t = attn_st_find(f, key);
        if (fused) {
            memcpy(*wfield(&w, k), src, t->numel * sizeof(float));
            attn_free(src);
        } else {
            sep[k] = src;
            *wfield(&w, k) = src;
            gsep[k] = attn_calloc(t->numel * sizeof(float));
            *wfield(&g, k) = gsep[k];
        }
    }
    float *x = load(f, i, "x"), *dy = load(f, i, "dy");
    float *kv = c->self ? NULL : load(f, i, "kv");
    size_t ny = (size_t)c->B * c->Tq * c->C, nkv = (size_t)c->B * c->Tk * c->Ckv;
    size_t np_ = (size_t)c->B * c->H * c->Tq * c->Tk;
    float *y = attn_alloc(ny * sizeof(float)), *dx = attn_alloc(ny * sizeof(float));
    float *probs = attn_alloc(np_ * sizeof(float));
    float *dkv = c->self ? NULL : attn_alloc(nkv * sizeof(float));
    attn_mha_state *st;
    assert_int_equal(attn_mha_state_init(&cfg, c->B, c->Tq, c->Tk, &st), ATTN_STATUS_OK);
    attn_mha_mask mask = {c->causal, 0, c->has_kv_len ? c->kv_len : NULL};

    attn_status s = attn_mha_forward(&cfg, &w, st, c->B, c->Tq, c->Tk, x, kv, &mask, y, probs);
    if (s) fail_msg("forward: %s", attn_last_error());
    s = attn_mha_backward(&cfg, &w, st, c->B, c->Tq, c->Tk, x, kv, &mask, dy, dx, dkv, &g);
    if (s) fail_msg("backward: %s", attn_last_error());

    char what[96];
    double gscale = 0; /* max |dx_ref|: the gradient scale of this case */
    {
        float *r = load(f, i, "dx");
        for (size_t k = 0; k < ny; k++) gscale = fmax(gscale, fabs(r[k]));
        attn_free(r);
    }
#define CMP(name, got, n, rtol, atol)                                                            \
    do {                                                                                         \
        float *ref_ = load(f, i, name);                                                          \
        snprintf(what, sizeof what, "case%d %s %s %s", i, fused ? "fused" : "separate",          \
                 attn_backend_name(attn_get_backend()), name);                                   \
        tu_close(what, got, ref_, n, rtol, atol);                                                \
        attn_free(ref_);                                                                         \
    } while (0)
    CMP("y", y, ny, RTOL_FWD, 0);
    CMP("probs", probs, np_, RTOL_FWD, 0);
    CMP("dx", dx, ny, RTOL_GRAD, 0);
    if (!c->self) CMP("dkv", dkv, nkv, RTOL_GRAD, RTOL_GRAD * gscale);
    for (int k = 0; k < 8; k++) {
        if (!c->bias && WNAMES[k][0] == 'b') continue;
        char gname[16];
        snprintf(gname, sizeof gname, "g_%s", WNAMES[k]);
        char key[64];
        snprintf(key, sizeof key, "case%d.%s", i, WNAMES[k]);
        CMP(gname, *wfield(&g, k), attn_st_find(f, key)->numel, RTOL_GRAD, RTOL_GRAD * gscale);
    }
#undef CMP
    attn_mha_state_free(st);
    attn_free(x), attn_free(dy), attn_free(kv), attn_free(y), attn_free(dx), attn_free(probs);
    attn_free(dkv), attn_free(wbuf), attn_free(gbuf);
    for (int k = 0; k < 8; k++) attn_free(sep[k]), attn_free(gsep[k]);
}

/* Every case on backends[b] (one cmocka test per backend: a missing one is skipped alone). */
static void against_pytorch(int b) {
    const attn_backend backends[] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX2, ATTN_BACKEND_AVX512};
    tu_need_backend(backends[b]);
    attn_st_file *f;
    if (attn_st_open(tu_ref_path("mha.safetensors"), &f))
        fail_msg("%s (run tools/ref_mha.py)", attn_last_error());
    const char *n = attn_st_metadata(f, "cases");
    assert_non_null(n);
    int ncases = atoi(n);
    assert_true(ncases > 0);
    {
        assert_int_equal(attn_set_backend(backends[b]), ATTN_STATUS_OK);
        for (int i = 0; i < ncases; i++) {
            mcase c;
            assert_true(parse_case(f, i, &c));
            run_case(f, i, &c, true);
            run_case(f, i, &c, false);
        }
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
    attn_st_close(f);
}

static void test_against_pytorch_ref(void **state) {
    (void)state;
    against_pytorch(0);
}

static void test_against_pytorch_avx2(void **state) {
    (void)state;
    against_pytorch(1);
}

static void test_against_pytorch_avx512(void **state) {
    (void)state;
    against_pytorch(2);
}

/* ---- properties ------------------------------------------------------------------------ */

typedef struct {
    attn_mha_config cfg;
    float *params;
    attn_mha_weights w;
    attn_mha_state *st;
} layer;

static void layer_init(layer *L, int C, int H, int B, int T, uint64_t seed) {
    L->cfg = attn_mha_default_config(C, H);
    size_t n = attn_mha_num_params(&L->cfg);
    L->params = attn_alloc(n * sizeof(float));
    tu_rng r = {seed};
    tu_fill(&r, L->params, n, -0.3f, 0.3f);
    assert_int_equal(attn_mha_weights_view(&L->cfg, L->params, &L->w), ATTN_STATUS_OK);
    assert_int_equal(attn_mha_state_init(&L->cfg, B, T, T, &L->st), ATTN_STATUS_OK);
}

static void layer_free(layer *L) {
    attn_mha_state_free(L->st);
    attn_free(L->params);
}

/* max |a - b| over rows [r0, r1) of (rows, C) matrices */
static float rows_diff(const float *a, const float *b, int r0, int r1, int C) {
    float m = 0;
    for (size_t i = (size_t)r0 * C; i < (size_t)r1 * C; i++) m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}

static void test_causal_property(void **state) {
    (void)state;
    const int B = 1, T = 37, C = 64, H = 4;
    layer L;
    layer_init(&L, C, H, B, T, 7);
    float *x = attn_alloc(sizeof(float) * T * C), *y1 = attn_alloc(sizeof(float) * T * C),
          *y2 = attn_alloc(sizeof(float) * T * C);
    tu_rng r = {99};
    tu_fill(&r, x, (size_t)T * C, -1, 1);
    for (int masked = 0; masked < 2; masked++) {
        attn_mha_mask m = {masked == 1, 0, NULL};
        assert_int_equal(attn_mha_forward(&L.cfg, &L.w, L.st, B, T, T, x, NULL, &m, y1, NULL), 0);
        const int i = 20; /* change every token after i */
        float *x2 = attn_alloc(sizeof(float) * T * C);
        memcpy(x2, x, sizeof(float) * T * C);
        for (size_t j = (size_t)(i + 1) * C; j < (size_t)T * C; j++) x2[j] += 0.5f;
        assert_int_equal(attn_mha_forward(&L.cfg, &L.w, L.st, B, T, T, x2, NULL, &m, y2, NULL),
                         0);
        float before = rows_diff(y1, y2, 0, i + 1, C);
        printf("  %s: max change of outputs 0..%d when tokens %d.. change: %.3g\n",
               masked ? "causal" : "bidirectional", i, i + 1, before);
        if (masked)
            assert_true(before == 0.0f); /* exactly: the later tokens never enter row i */
        else
            assert_true(before > 1e-3f);
        attn_free(x2);
    }
    attn_free(x), attn_free(y1), attn_free(y2);
    layer_free(&L);
}

static void test_padding_property(void **state) {
    (void)state;
    const int B = 3, T = 29, C = 48, H = 3;
    const int32_t len[3] = {29, 11, 1};
    layer L;
    layer_init(&L, C, H, B, T, 8);
    size_t n = (size_t)B * T * C;
    float *x = attn_alloc(sizeof(float) * n), *x2 = attn_alloc(sizeof(float) * n);
    float *y1 = attn_alloc(sizeof(float) * n), *y2 = attn_alloc(sizeof(float) * n);
    tu_rng r = {5};
    tu_fill(&r, x, n, -1, 1);
    memcpy(x2, x, sizeof(float) * n);
    for (int b = 0; b < B; b++) /* garbage in every padded position */
        for (int t = len[b]; t < T; t++)
            for (int c = 0; c < C; c++) x2[((size_t)b * T + t) * C + c] = 1e3f * (float)(c - t);
    for (int causal = 0; causal < 2; causal++) {
        attn_mha_mask m = {causal == 1, 0, len};
        assert_int_equal(attn_mha_forward(&L.cfg, &L.w, L.st, B, T, T, x, NULL, &m, y1, NULL), 0);
        assert_int_equal(attn_mha_forward(&L.cfg, &L.w, L.st, B, T, T, x2, NULL, &m, y2, NULL),
                         0);
        for (int b = 0; b < B; b++) {
            float d = rows_diff(y1 + (size_t)b * T * C, y2 + (size_t)b * T * C, 0, len[b], C);
            printf("  padding (%s) seq %d len %d: max change of real positions %.3g\n",
                   causal ? "causal" : "bidirectional", b, (int)len[b], d);
            assert_true(d == 0.0f);
        }
    }
    attn_free(x), attn_free(x2), attn_free(y1), attn_free(y2);
    layer_free(&L);
}

/* Finite differences: L = sum(y ⊙ dy) for cross-attention with causal + padding masks; central
 * differences (h = 1e-2, fp32) at random coordinates of x, kv and every weight against the
 * analytic gradient. Reports the worst relative error |fd − g| / max(|fd|, |g|, 1e-2). */
static double loss_of(layer *L, int B, int Tq, int Tk, const float *x, const float *kv,
                      const attn_mha_mask *m, const float *dy, float *y) {
    assert_int_equal(attn_mha_forward(&L->cfg, &L->w, L->st, B, Tq, Tk, x, kv, m, y, NULL), 0);
    double l = 0;
    for (size_t i = 0; i < (size_t)B * Tq * L->cfg.d_model; i++) l += (double)y[i] * dy[i];
    return l;
}

static void test_finite_differences(void **state) {
    (void)state;
    const int B = 2, Tq = 5, Tk = 7, C = 12, Ckv = 10, H = 2, D = 6;
    const int32_t len[2] = {7, 4};
    attn_mha_mask m = {true, Tk - Tq, len};
    layer L;
    L.cfg = (attn_mha_config){C, Ckv, H, D, true};
    size_t np = attn_mha_num_params(&L.cfg);
    L.params = attn_alloc(np * sizeof(float));
    float *grads = attn_calloc(np * sizeof(float));
    attn_mha_weights g;
    tu_rng r = {31};
    tu_fill(&r, L.params, np, -0.5f, 0.5f);
    attn_mha_weights_view(&L.cfg, L.params, &L.w);
    attn_mha_weights_view(&L.cfg, grads, &g);
    assert_int_equal(attn_mha_state_init(&L.cfg, B, Tq, Tk, &L.st), 0);
    size_t nx = (size_t)B * Tq * C, nkv = (size_t)B * Tk * Ckv;
    float *x = attn_alloc(nx * 4), *kv = attn_alloc(nkv * 4), *dy = attn_alloc(nx * 4);
    float *y = attn_alloc(nx * 4), *dx = attn_alloc(nx * 4), *dkv = attn_alloc(nkv * 4);
    tu_fill(&r, x, nx, -1, 1), tu_fill(&r, kv, nkv, -1, 1), tu_fill(&r, dy, nx, -1, 1);
    loss_of(&L, B, Tq, Tk, x, kv, &m, dy, y);
    assert_int_equal(attn_mha_backward(&L.cfg, &L.w, L.st, B, Tq, Tk, x, kv, &m, dy, dx, dkv, &g),
                     0);
    struct {
        const char *name;
        float *v, *g;
        size_t n;
    } t[3] = {{"x", x, dx, nx}, {"kv", kv, dkv, nkv}, {"weights", L.params, grads, np}};
    const float h = 1e-2f;
    double worst = 0;
    for (int k = 0; k < 3; k++)
        for (int s = 0; s < 40; s++) {
            size_t i = (size_t)(tu_uniform(&r, 0, 1) * (float)t[k].n) % t[k].n;
            float keep = t[k].v[i];
            t[k].v[i] = keep + h;
            double lp = loss_of(&L, B, Tq, Tk, x, kv, &m, dy, y);
            t[k].v[i] = keep - h;
            double lm = loss_of(&L, B, Tq, Tk, x, kv, &m, dy, y);
            t[k].v[i] = keep;
            double fd = (lp - lm) / (2 * h), an = t[k].g[i];
            double rel = fabs(fd - an) / fmax(fmax(fabs(fd), fabs(an)), 1e-2);
            if (rel > worst) worst = rel;
        }
    printf("  finite differences (120 coordinates of x, kv, weights): worst relative error %.2e "
           "(tolerance 1e-2)\n", worst);
    assert_true(worst < 1e-2);
    attn_free(x), attn_free(kv), attn_free(dy), attn_free(y), attn_free(dx), attn_free(dkv);
    attn_free(grads);
    layer_free(&L);
}

static void test_bad_arguments(void **state) {
    (void)state;
    attn_mha_config c = attn_mha_default_config(64, 4);
    attn_mha_state *st = NULL;
    c.n_head = 0;
    assert_int_equal(attn_mha_state_init(&c, 1, 4, 4, &st), ATTN_STATUS_INVALID_ARGUMENT);
    assert_true(strlen(attn_last_error()) > 0);
    c = attn_mha_default_config(64, 4);
    c.d_head = -3;
    assert_int_equal(attn_mha_config_check(&c), ATTN_STATUS_INVALID_ARGUMENT);
    c = attn_mha_default_config(1 << 30, 1 << 20);
    c.d_head = 1 << 20;
    assert_int_equal(attn_mha_config_check(&c), ATTN_STATUS_TOO_LARGE);
    printf("  overflow: %s\n", attn_last_error());
    c = attn_mha_default_config(64, 4);
    assert_int_equal(attn_mha_state_init(&c, 0, 4, 4, &st), ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(attn_mha_state_init(&c, 1 << 20, 1 << 20, 1 << 20, &st),
                     ATTN_STATUS_TOO_LARGE);
    assert_null(st);

    layer L;
    layer_init(&L, 64, 4, 2, 8, 1);
    float x[2 * 8 * 64] = {0}, y[2 * 8 * 64];
    /* Beyond the state's capacity. */
    assert_int_equal(attn_mha_forward(&L.cfg, &L.w, L.st, 3, 8, 8, x, NULL, NULL, y, NULL),
                     ATTN_STATUS_INVALID_ARGUMENT);
    printf("  capacity: %s\n", attn_last_error());
    /* Self-attention with Tk != Tq. */
    assert_int_equal(attn_mha_forward(&L.cfg, &L.w, L.st, 1, 8, 4, x, NULL, NULL, y, NULL),
                     ATTN_STATUS_INVALID_ARGUMENT);
    /* Key padding length out of range. */
    int32_t bad[2] = {9, 1};
    attn_mha_mask m = {false, 0, bad};
    assert_int_equal(attn_mha_forward(&L.cfg, &L.w, L.st, 2, 8, 8, x, NULL, &m, y, NULL),
                     ATTN_STATUS_INVALID_ARGUMENT);
    printf("  kv_len: %s\n", attn_last_error());
    /* State made for another configuration. */
    attn_mha_config other = attn_mha_default_config(64, 8);
    attn_mha_weights w2;
    float *p2 = attn_calloc(attn_mha_num_params(&other) * sizeof(float));
    attn_mha_weights_view(&other, p2, &w2);
    assert_int_equal(attn_mha_forward(&other, &w2, L.st, 1, 8, 8, x, NULL, NULL, y, NULL),
                     ATTN_STATUS_INVALID_ARGUMENT);
    attn_free(p2);
    layer_free(&L);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_pytorch_ref),
        cmocka_unit_test(test_against_pytorch_avx2),
        cmocka_unit_test(test_against_pytorch_avx512),
        cmocka_unit_test(test_causal_property),
        cmocka_unit_test(test_padding_property),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

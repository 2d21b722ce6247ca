/* test_train.c — training utilities (attn_train.h).
 *
 * Against PyTorch (tools/ref_train.py, float32 torch 1.13): Adam, Adam with L2 weight decay and a
 * no-decay range, AdamW with and without decay, SGD with momentum/dampening, Nesterov and plain,
 * each 10 steps with a changing learning rate, checked after every step to 1e-6 · max|p|;
 * clip_grad_norm_ (norm and clipped gradients); the three schedules to 1e-7 relative per value.
 * Then properties: the Philox known answer and stream arithmetic, finiteness checks naming the
 * parameter, identical updates for any thread count. Checkpoints: bit-exact round trip, exact
 * resume (40 AdamW steps on a noisy quadratic == 17 + checkpoint + 23 into fresh buffers), every
 * kind of damaged or mismatched checkpoint rejected with a message naming file and field, failed
 * saves leaving the previous checkpoint intact, and a simulated crash after every durable step of
 * a save (both swap strategies) leaving a loadable old-or-new checkpoint. */
#include "tu.h"

#include "attn_io.h"
#include "attn_train.h"
#include "../src/train/train-impl.h"

#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

static attn_st_file *ref_open(void) {
    attn_st_file *f = NULL;
    if (attn_st_open(tu_ref_path("train.safetensors"), &f))
        fail_msg("%s (run tools/ref_train.py first)", attn_last_error());
    return f;
}

static float *ref_load(attn_st_file *f, const char *name) {
    float *d = NULL;
    if (attn_st_load_f32(f, name, &d, NULL)) fail_msg("%s", attn_last_error());
    return d;
}

static json_t *ref_meta(attn_st_file *f, const char *key) {
    const char *m = attn_st_metadata(f, key);
    assert_non_null(m);
    json_t *o = json_loads(m, 0, NULL);
    assert_non_null(o);
    return o;
}

/* ---- optimizers against torch ---- */

static void test_optim_torch(void **state) {
    (void)state;
    attn_st_file *f = ref_open();
    int ncase = atoi(attn_st_metadata(f, "n_opt"));
    assert_true(ncase >= 7);
    double worst = 0;
    for (int c = 0; c < ncase; c++) {
        char key[64];
        snprintf(key, sizeof key, "opt%d", c);
        json_t *m = ref_meta(f, key);
        const char *name = json_string_value(json_object_get(m, "name"));
        attn_optim_kind kind;
        assert_int_equal(attn_optim_kind_parse(json_string_value(json_object_get(m, "kind")), &kind), 0);
        size_t n = (size_t)json_integer_value(json_object_get(m, "n"));
        json_t *split = json_object_get(m, "split");
        size_t s0 = (size_t)json_integer_value(json_array_get(split, 0));
        size_t s1 = (size_t)json_integer_value(json_array_get(split, 1));
        attn_optim_params p = attn_optim_default_params(kind);
        p.beta1 = json_number_value(json_object_get(m, "beta1"));
        p.beta2 = json_number_value(json_object_get(m, "beta2"));
        p.eps = json_number_value(json_object_get(m, "eps"));
        p.weight_decay = json_number_value(json_object_get(m, "weight_decay"));
        p.momentum = json_number_value(json_object_get(m, "momentum"));
        p.dampening = json_number_value(json_object_get(m, "dampening"));
        p.nesterov = json_is_true(json_object_get(m, "nesterov"));
        attn_optim_range r = {s0, s1 - s0, false, "ln.weight"};
        attn_optim *o;
        assert_int_equal(attn_optim_create(&p, n, &r, 1, &o), 0);
        snprintf(key, sizeof key, "opt%d.p0", c);
        float *params = ref_load(f, key);
        snprintf(key, sizeof key, "opt%d.grads", c);
        float *grads = ref_load(f, key);
        snprintf(key, sizeof key, "opt%d.expect", c);
        float *expect = ref_load(f, key);
        json_t *lrs = json_object_get(m, "lrs");
        for (int t = 0; t < (int)json_array_size(lrs); t++) {
            double lr = json_number_value(json_array_get(lrs, (size_t)t));
            assert_int_equal(attn_optim_step(o, params, grads + (size_t)t * n, lr), 0);
            char what[96];
            snprintf(what, sizeof what, "%s step %d", name, t + 1);
            const float *e = expect + (size_t)t * n;
            if (t == 0 || t == (int)json_array_size(lrs) - 1) tu_close(what, params, e, n, 1e-6, 0);
            else if (!tu_close(what, params, e, n, 1e-6, 0)) break;
            double scale = 0, err = 0;
            for (size_t i = 0; i < n; i++) {
                scale = fmax(scale, fabs(e[i]));
                err = fmax(err, fabs((double)params[i] - e[i]));
            }
            worst = fmax(worst, err / scale);
        }
        assert_int_equal(attn_optim_step_count(o), (int64_t)json_array_size(lrs));
        attn_free(params);
        attn_free(grads);
        attn_free(expect);
        attn_optim_destroy(o);
        json_decref(m);
    }
    printf("  optimizers: worst max|err|/max|p| over all cases and steps = %.2e\n", worst);
    attn_st_close(f);
}

static void test_clip_torch(void **state) {
    (void)state;
    attn_st_file *f = ref_open();
    for (int c = 0; c < 2; c++) {
        char key[64];
        snprintf(key, sizeof key, "clip%d", c);
        json_t *m = ref_meta(f, key);
        double max_norm = json_number_value(json_object_get(m, "max_norm"));
        const attn_st_tensor *t;
        float *g = NULL, *clipped, *normf;
        snprintf(key, sizeof key, "clip%d.grads", c);
        assert_int_equal(attn_st_load_f32(f, key, &g, &t), 0);
        size_t n = t->numel;
        snprintf(key, sizeof key, "clip%d.clipped", c);
        clipped = ref_load(f, key);
        snprintf(key, sizeof key, "clip%d.norm", c);
        normf = ref_load(f, key); /* F64 converted to float is enough to print; compare below */
        double norm = attn_optim_clip_grad_norm(g, n, max_norm);
        float nf = (float)norm;
        char what[64];
        snprintf(what, sizeof what, "clip_grad_norm_ %d: norm", c);
        tu_close(what, &nf, normf, 1, 1e-6, 0);
        snprintf(what, sizeof what, "clip_grad_norm_ %d: gradients", c);
        tu_close(what, g, clipped, n, 1e-6, 0);
        attn_free(g);
        attn_free(clipped);
        attn_free(normf);
        json_decref(m);
    }
    attn_st_close(f);
}

static void sched_check(const char *what, const double *got, const double *ref, size_t n,
                        const int64_t *steps) {
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double e = ref[i] == 0 ? fabs(got[i]) : fabs(got[i] - ref[i]) / fabs(ref[i]);
        if (!(e <= worst)) {
            worst = e;
            wi = i;
        }
    }
    int ok = worst <= 1e-7;
    printf("  %-44s max_rel_err=%.2e over %zu steps %s\n", what, worst, n, ok ? "ok" : "FAIL");
    if (!ok) {
        printf("    worst at step %lld: got %.17g, expected %.17g\n", (long long)steps[wi], got[wi],
               ref[wi]);
        tu_failures++;
    }
}

static void test_schedules(void **state) {
    (void)state;
    attn_st_file *f = ref_open();
    const attn_st_tensor *ts = attn_st_find(f, "sched.steps");
    assert_non_null(ts);
    size_t n = ts->numel;
    int32_t *st32 = NULL;
    assert_int_equal(attn_st_load_i32(f, "sched.steps", &st32, NULL), 0);
    int64_t *steps = malloc(n * sizeof *steps);
    double *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    for (size_t i = 0; i < n; i++) steps[i] = st32[i];
    json_t *m = ref_meta(f, "sched");
    attn_reader rd;
    /* the F64 references are read raw so that no float32 rounding enters the comparison */
    assert_int_equal(attn_reader_open_file(tu_ref_path("train.safetensors"), &rd), 0);
    const char *names[3] = {"sched.cosine", "sched.linear", "sched.noam"};
    for (int k = 0; k < 3; k++) {
        const attn_st_tensor *t = attn_st_find(f, names[k]);
        assert_non_null(t);
        assert_int_equal(t->dtype, ATTN_DTYPE_F64);
        assert_int_equal(rd.read(rd.ctx, t->offset, ref, n * sizeof(double)), 0);
        json_t *c = json_object_get(m, k == 0 ? "cosine" : k == 1 ? "linear" : "noam");
        for (size_t i = 0; i < n; i++) {
            if (k == 0)
                got[i] = attn_lr_cosine(steps[i], json_number_value(json_object_get(c, "lr")),
                                        json_number_value(json_object_get(c, "min_lr")),
                                        json_integer_value(json_object_get(c, "warmup")),
                                        json_integer_value(json_object_get(c, "decay")));
            else if (k == 1)
                got[i] = attn_lr_linear(steps[i], json_number_value(json_object_get(c, "base")),
                                        json_integer_value(json_object_get(c, "warmup")),
                                        json_integer_value(json_object_get(c, "total")));
            else
                got[i] = attn_lr_noam(steps[i], json_number_value(json_object_get(c, "factor")),
                                      json_integer_value(json_object_get(c, "d_model")),
                                      json_integer_value(json_object_get(c, "warmup")));
        }
        char what[64];
        snprintf(what, sizeof what, "schedule %s", names[k] + 6);
        sched_check(what, got, ref, n, steps);
    }
    /* the peak parameterization is the same curve */
    for (int64_t s = 0; s < 20000; s += 97) {
        double a = attn_lr_noam(s, 2.0, 512, 4000);
        double b = attn_lr_inv_sqrt(s, 2.0 / sqrt(512.0 * 4000.0), 4000);
        assert_true(fabs(a - b) <= 1e-12 * a);
    }
    assert_true(fabs(attn_lr_inv_sqrt(4000, 7e-4, 4000) - 7e-4) < 1e-18);
    assert_true(attn_lr_constant(5, 0.1) == 0.1);
    assert_true(isnan(attn_lr_noam(-1, 1, 512, 10)) && isnan(attn_lr_cosine(-1, 1, 0, 50, 400)));
    attn_reader_close(&rd);
    json_decref(m);
    free(steps);
    free(ref);
    free(got);
    attn_free(st32);
    attn_st_close(f);
}

/* ---- RNG ---- */

static void test_rng(void **state) {
    (void)state;
    /* Random123 known answers for philox4x32-10 */
    uint32_t b[4];
    attn_rng_block(0, 0, b);
    assert_true(b[0] == 0x6627e8d5u && b[1] == 0xe169c58du && b[2] == 0xbc57ac4cu &&
                b[3] == 0x9b00dbd8u);
    attn_rng r, q;
    attn_rng_init(&r, 42);
    uint32_t first[100];
    for (int i = 0; i < 100; i++) first[i] = attn_rng_u32(&r);
    for (int i = 0; i < 100; i++) assert_true(attn_rng_at(42, (uint64_t)i) == first[i]);
    /* restoring (seed, counter) continues the stream exactly */
    attn_rng_set_state(&q, r.seed, r.counter);
    for (int i = 0; i < 50; i++) assert_true(attn_rng_u32(&q) == attn_rng_u32(&r));
    attn_rng_init(&q, 42);
    attn_rng_skip(&q, 37);
    assert_true(attn_rng_u32(&q) == first[37]);
    attn_rng_init(&q, 43);
    assert_true(attn_rng_u32(&q) != first[0]);
    /* uniform moments, below() range and a permutation */
    double sum = 0, sum2 = 0;
    attn_rng_init(&r, 7);
    for (int i = 0; i < 100000; i++) {
        float u = attn_rng_uniform(&r);
        assert_true(u >= 0 && u < 1);
        sum += u;
        double z = attn_rng_normal(&r);
        sum2 += z * z;
    }
    assert_true(fabs(sum / 100000 - 0.5) < 0.01 && fabs(sum2 / 100000 - 1.0) < 0.02);
    int counts[7] = {0};
    for (int i = 0; i < 70000; i++) counts[attn_rng_below(&r, 7)]++;
    for (int i = 0; i < 7; i++) assert_true(abs(counts[i] - 10000) < 500);
    assert_true(attn_rng_below(&r, (uint64_t)1 << 40) < ((uint64_t)1 << 40));
    uint32_t idx[1000];
    char seen[1000] = {0};
    for (uint32_t i = 0; i < 1000; i++) idx[i] = i;
    attn_rng_shuffle(&r, idx, 1000);
    int moved = 0;
    for (uint32_t i = 0; i < 1000; i++) {
        assert_false(seen[idx[i]]);
        seen[idx[i]] = 1;
        moved += idx[i] != i;
    }
    assert_true(moved > 900);
}

/* ---- gradients, threads, bad arguments ---- */

static void test_grad_checks(void **state) {
    (void)state;
    float g[100];
    for (int i = 0; i < 100; i++) g[i] = (float)i - 50;
    attn_optim_range rs[2] = {{0, 40, true, "wte"}, {40, 60, false, "ln_f.bias"}};
    assert_int_equal(attn_optim_check_finite(g, 100, rs, 2, NULL), 0);
    g[57] = NAN;
    g[80] = INFINITY;
    size_t bad = 0;
    assert_int_equal(attn_optim_check_finite(g, 100, rs, 2, &bad), ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(bad, 57);
    printf("  message: %s\n", attn_last_error());
    assert_non_null(strstr(attn_last_error(), "'ln_f.bias'[17]"));
    assert_non_null(strstr(attn_last_error(), "nan"));
    g[57] = 0;
    assert_int_equal(attn_optim_check_finite(g, 100, NULL, 0, &bad), ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(bad, 80);
    assert_non_null(strstr(attn_last_error(), "index 80 is inf"));
    /* a non-finite norm is returned and nothing is scaled */
    assert_true(isinf(attn_optim_clip_grad_norm(g, 100, 1.0)) && g[10] == -40.0f);
    g[80] = 0;
    attn_optim_zero_grad(g, 100);
    for (int i = 0; i < 100; i++) assert_true(g[i] == 0);
    assert_true(attn_optim_grad_norm(g, 100) == 0);
}

/* attn_optim_clip_step = check_finite + clip_grad_norm + step, bit for bit in params and state,
 * for every optimizer, clipping on (a factor < 1) and off, decay ranges, 1 and 2 threads; a
 * non-finite gradient is the same error with nothing changed. */
static void test_clip_step_fused(void **state) {
    (void)state;
    const size_t n = 70001; /* several pieces, an odd tail */
    float *p1 = malloc(n * 4), *p2 = malloc(n * 4), *g = malloc(n * 4), *g1 = malloc(n * 4);
    assert_true(p1 && p2 && g && g1);
    attn_optim_range rs[2] = {{100, 5000, false, "ln.w"}, {60000, 10001, false, "bias"}};
    const attn_optim_kind kinds[3] = {ATTN_OPTIM_ADAMW, ATTN_OPTIM_ADAM, ATTN_OPTIM_SGD};
    for (int k = 0; k < 3; k++)
        for (int th = 1; th <= 2; th++)
            for (int clip = 0; clip < 3; clip++) {
                const double max_norm = clip == 0 ? 0.0 : clip == 1 ? 1.0 : 1e6; /* off, <1, 1 */
                attn_optim_params op = attn_optim_default_params(kinds[k]);
                op.weight_decay = 0.1;
                if (kinds[k] == ATTN_OPTIM_SGD) op.momentum = 0.9;
                attn_optim *a, *b;
                assert_int_equal(attn_optim_create(&op, n, rs, 2, &a), 0);
                assert_int_equal(attn_optim_create(&op, n, rs, 2, &b), 0);
                tu_rng r = {5 + (uint64_t)k};
                tu_fill(&r, p1, n, -1, 1);
                memcpy(p2, p1, n * 4);
                attn_set_num_threads(th);
                for (int t = 0; t < 3; t++) {
                    tu_fill(&r, g, n, -0.05f, 0.05f);
                    memcpy(g1, g, n * 4);
                    assert_int_equal(attn_optim_check_finite(g1, n, rs, 2, NULL), 0);
                    const double n1 = attn_optim_clip_grad_norm(g1, n, max_norm);
                    assert_int_equal(attn_optim_step(a, p1, g1, 1e-3 * (t + 1)), 0);
                    double n2 = -1;
                    assert_int_equal(attn_optim_clip_step(b, p2, g, max_norm, 1e-3 * (t + 1), rs,
                                                          2, &n2),
                                     0);
                    assert_true(n1 == n2);
                    assert_memory_equal(p1, p2, n * 4);
                }
                float *m1, *v1, *m2, *v2;
                attn_optim_state(a, &m1, &v1);
                attn_optim_state(b, &m2, &v2);
                if (m1) assert_memory_equal(m1, m2, n * 4);
                if (v1) assert_memory_equal(v1, v2, n * 4);
                /* a bad gradient: the check's error, params untouched */
                g[60007] = NAN;
                double nb = 0;
                tu_expect_fail(attn_optim_clip_step(b, p2, g, max_norm, 1e-3, rs, 2, &nb),
                               ATTN_STATUS_INVALID_ARGUMENT, "'bias'[7]", "nan");
                assert_true(isnan(nb));
                assert_memory_equal(p1, p2, n * 4);
                attn_optim_destroy(a);
                attn_optim_destroy(b);
            }
    attn_set_num_threads(0);
    free(p1), free(p2), free(g), free(g1);
}

static void test_optim_threads(void **state) {
    (void)state;
    /* big enough for the parallel path: the result must not depend on the thread count */
    size_t n = (size_t)1 << 20;
    float *p1 = malloc(n * 4), *p2 = malloc(n * 4), *g = malloc(n * 4), *g2 = malloc(n * 4);
    tu_rng r = {99};
    tu_fill(&r, p1, n, -1, 1);
    tu_fill(&r, g, n, -1, 1);
    memcpy(p2, p1, n * 4);
    memcpy(g2, g, n * 4);
    attn_optim_params p = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    attn_optim_range rs[1] = {{12345, 99999, false, NULL}};
    attn_optim *a, *b;
    assert_int_equal(attn_optim_create(&p, n, rs, 1, &a), 0);
    assert_int_equal(attn_optim_create(&p, n, rs, 1, &b), 0);
    attn_set_num_threads(1);
    double n1 = attn_optim_clip_grad_norm(g, n, 100.0);
    for (int t = 0; t < 3; t++) attn_optim_step(a, p1, g, 1e-3);
    attn_set_num_threads(4);
    double n2 = attn_optim_clip_grad_norm(g2, n, 100.0);
    for (int t = 0; t < 3; t++) attn_optim_step(b, p2, g2, 1e-3);
    attn_set_num_threads(0);
    assert_true(n1 == n2);
    assert_memory_equal(g, g2, n * 4);
    assert_memory_equal(p1, p2, n * 4);
    attn_optim_destroy(a);
    attn_optim_destroy(b);
    free(p1);
    free(p2);
    free(g);
    free(g2);
}

static void test_optim_bad_args(void **state) {
    (void)state;
    attn_optim *o = NULL;
    attn_optim_params p = attn_optim_default_params(ATTN_OPTIM_ADAM);
    p.beta1 = 1.0;
    assert_int_equal(attn_optim_create(&p, 10, NULL, 0, &o), ATTN_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(attn_last_error(), "betas"));
    p = attn_optim_default_params(ATTN_OPTIM_SGD);
    p.nesterov = true;
    assert_int_equal(attn_optim_create(&p, 10, NULL, 0, &o), ATTN_STATUS_INVALID_ARGUMENT);
    p = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    attn_optim_range over[2] = {{0, 5, false, "a"}, {4, 3, false, "b"}};
    assert_int_equal(attn_optim_create(&p, 10, over, 2, &o), ATTN_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(attn_last_error(), "overlaps"));
    attn_optim_range out[1] = {{8, 3, false, "c"}};
    assert_int_equal(attn_optim_create(&p, 10, out, 1, &o), ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(attn_optim_create(&p, 10, NULL, 0, &o), 0);
    float x[10] = {0}, g[10] = {0};
    assert_int_equal(attn_optim_step(o, x, g, NAN), ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(attn_optim_step(o, NULL, g, 1e-3), ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(attn_optim_step_count(o), 0);
    attn_optim_destroy(o);
    attn_optim_kind k;
    assert_int_equal(attn_optim_kind_parse("adagrad", &k), ATTN_STATUS_INVALID_ARGUMENT);
    /* CRC-32 check value */
    assert_true(attn_crc32(0, "123456789", 9) == 0xCBF43926u);
    assert_true(attn_crc32(attn_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
}

/* ---- checkpoints ---- */

static char g_root[256];

static int setup_dir(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/attn-train-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(g_root) ? 0 : -1;
}

static int teardown_dir(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *P(const char *rel) {
    static char buf[4][512];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_root, rel);
    return buf[k];
}

/* A toy "model": two tensors sharing one flat buffer of 3·4 + 4 = 16 parameters. */
enum { NP = 16 };
typedef struct {
    float params[NP], grads[NP];
    attn_optim *opt;
    attn_rng noise;
    attn_ckpt_tensor t[2];
} toy;

static void toy_init(toy *m, float fill) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < NP; i++) m->params[i] = fill + 0.1f * (float)i;
    m->t[0] = (attn_ckpt_tensor){"w", 2, {3, 4}, m->params};
    m->t[1] = (attn_ckpt_tensor){"b", 1, {4}, m->params + 12};
    attn_optim_params p = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    p.weight_decay = 0.1;
    attn_optim_range r = {12, 4, false, "b"};
    assert_int_equal(attn_optim_create(&p, NP, &r, 1, &m->opt), 0);
    attn_rng_init(&m->noise, 2024);
}

/* One training step on 0.5·Σ c_i (p_i − 1)² with gradient noise from the checkpointed RNG,
 * clipping and a cosine schedule. */
static void toy_step(toy *m) {
    int64_t step = attn_optim_step_count(m->opt);
    for (int i = 0; i < NP; i++)
        m->grads[i] = (float)(i + 1) * (m->params[i] - 1.0f) + 0.3f * (float)attn_rng_normal(&m->noise);
    attn_optim_clip_grad_norm(m->grads, NP, 2.0);
    assert_int_equal(attn_optim_step(m->opt, m->params, m->grads, attn_lr_cosine(step, 0.05, 0.005, 5, 40)), 0);
}

static attn_status toy_save(toy *m, const char *dir) {
    attn_ckpt_state st = attn_ckpt_state_init();
    st.step = attn_optim_step_count(m->opt);
    st.epoch = 3;
    st.data_position = 1234567890123LL;
    st.lr = 0.0123;
    st.best_valid_loss = 2.5;
    attn_ckpt_state_set_rng(&st, "noise", &m->noise);
    attn_rng other;
    attn_rng_set_state(&other, UINT64_MAX, (uint64_t)1 << 63);
    attn_ckpt_state_set_rng(&st, "shuffle", &other);
    st.extra = json_pack("{s:s, s:i}", "arch", "toy", "d_model", 4);
    attn_status s = attn_ckpt_save(dir, m->t, 2, m->opt, &st);
    json_decref(st.extra);
    return s;
}

static attn_status toy_load(toy *m, const char *dir) {
    attn_ckpt_state st;
    attn_status s = attn_ckpt_load(dir, m->t, 2, m->opt, &st);
    if (s) return s;
    assert_int_equal(st.step, attn_optim_step_count(m->opt));
    assert_int_equal(st.epoch, 3);
    assert_true(st.data_position == 1234567890123LL && st.lr == 0.0123 && st.best_valid_loss == 2.5);
    attn_rng other;
    assert_int_equal(attn_ckpt_state_get_rng(&st, "shuffle", &other), 0);
    assert_true(other.seed == UINT64_MAX && other.counter == (uint64_t)1 << 63);
    assert_int_equal(attn_ckpt_state_get_rng(&st, "noise", &m->noise), 0);
    assert_int_equal(attn_ckpt_state_get_rng(&st, "dropout", &other), ATTN_STATUS_NOT_FOUND);
    assert_string_equal(json_string_value(json_object_get(st.extra, "arch")), "toy");
    json_decref(st.extra);
    return ATTN_STATUS_OK;
}

static void toy_free(toy *m) { attn_optim_destroy(m->opt); }

static void test_ckpt_roundtrip_resume(void **state) {
    (void)state;
    toy a, b, c;
    toy_init(&a, 0.0f);
    for (int i = 0; i < 40; i++) toy_step(&a); /* the uninterrupted run */
    toy_init(&b, 0.0f);
    for (int i = 0; i < 17; i++) toy_step(&b);
    assert_int_equal(toy_save(&b, P("ck")), 0);
    assert_true(attn_ckpt_exists(P("ck")) && !attn_ckpt_exists(P("nothing")));
    toy_init(&c, 9.0f); /* fresh buffers, different contents, fresh RNG */
    assert_int_equal(toy_load(&c, P("ck")), 0);
    assert_memory_equal(c.params, b.params, sizeof c.params);
    float *mb, *vb, *mc, *vc;
    attn_optim_state(b.opt, &mb, &vb);
    attn_optim_state(c.opt, &mc, &vc);
    assert_memory_equal(mb, mc, NP * 4);
    assert_memory_equal(vb, vc, NP * 4);
    assert_int_equal(attn_optim_step_count(c.opt), 17);
    for (int i = 17; i < 40; i++) toy_step(&c);
    assert_memory_equal(c.params, a.params, sizeof a.params);
    printf("  resume: 17 + checkpoint + 23 steps == 40 steps bit for bit (p[0] = %.9g)\n",
           (double)a.params[0]);
    /* the JSON names what it holds */
    json_t *j = json_load_file(P("ck/training_state.json"), 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "format_version")), 1);
    assert_non_null(json_object_get(json_object_get(j, "files"), "optimizer.safetensors"));
    json_decref(j);
    /* without an optimizer: model-only checkpoint; loading an optimizer from it fails */
    attn_ckpt_state st = attn_ckpt_state_init();
    assert_int_equal(attn_ckpt_save(P("model-only/"), a.t, 2, NULL, &st), 0);
    assert_int_equal(attn_ckpt_load(P("model-only"), c.t, 2, NULL, NULL), 0);
    assert_memory_equal(c.params, a.params, sizeof a.params);
    assert_int_equal(attn_ckpt_load(P("model-only"), c.t, 2, c.opt, NULL), ATTN_STATUS_NOT_FOUND);
    printf("  message: %s\n", attn_last_error());
    toy_free(&a);
    toy_free(&b);
    toy_free(&c);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_fail(toy *m, const char *dir, attn_status want, const char *needle) {
    attn_status s = attn_ckpt_load(dir, m->t, 2, m->opt, NULL);
    printf("  %-28s -> %s\n", needle, attn_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(attn_last_error(), needle));
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_int_equal(system(cmd), 0);
}

static void test_ckpt_damaged(void **state) {
    (void)state;
    toy m;
    toy_init(&m, 1.0f);
    toy_step(&m);
    assert_int_equal(toy_save(&m, P("good")), 0);
    toy_step(&m);
    assert_int_equal(toy_save(&m, P("newer")), 0);
    size_t n;
    char *model = tu_read_all(P("good/model.safetensors"), &n);
    char *json = tu_read_all(P("good/training_state.json"), &n);
    assert_non_null(model);
    assert_non_null(json);
#define FRESH(d) sh("rm -rf '%s' && cp -r '%s' '%s'", P(d), P("good"), P(d))
    /* missing pieces */
    expect_fail(&m, P("nonexistent"), ATTN_STATUS_IO, "no such checkpoint directory");
    FRESH("c1");
    unlink(P("c1/training_state.json"));
    expect_fail(&m, P("c1"), ATTN_STATUS_IO, "training_state.json: missing");
    FRESH("c2");
    unlink(P("c2/model.safetensors"));
    expect_fail(&m, P("c2"), ATTN_STATUS_IO, "model.safetensors: cannot open");
    /* truncated and bit-flipped tensor files */
    FRESH("c3");
    tu_write_all(P("c3/model.safetensors"), model, 100);
    expect_fail(&m, P("c3"), ATTN_STATUS_FORMAT, "100 bytes, but training_state.json records");
    FRESH("c4");
    {
        size_t k;
        char *b = tu_read_all(P("c4/optimizer.safetensors"), &k);
        assert_non_null(b);
        b[k - 3] ^= 0x10;
        tu_write_all(P("c4/optimizer.safetensors"), b, k);
        free(b);
    }
    expect_fail(&m, P("c4"), ATTN_STATUS_FORMAT, "optimizer.safetensors: CRC-32");
    /* a crash between writes, as the old file-by-file scheme could leave: new tensors, old JSON */
    FRESH("c5");
    sh("cp '%s/model.safetensors' '%s/'", P("newer"), P("c5"));
    expect_fail(&m, P("c5"), ATTN_STATUS_FORMAT, "model.safetensors: CRC-32");
    /* bad JSON, version, fields */
    FRESH("c6");
    write_text(P("c6/training_state.json"), "{\"format_version\": 1, ");
    expect_fail(&m, P("c6"), ATTN_STATUS_FORMAT, "invalid JSON");
    FRESH("c7");
    {
        json_t *j = json_loads(json, 0, NULL);
        json_object_set_new(j, "format_version", json_integer(2));
        json_dump_file(j, P("c7/training_state.json"), 0);
        json_object_set_new(j, "format_version", json_integer(1));
        json_object_del(j, "epoch");
        FRESH("c8");
        json_dump_file(j, P("c8/training_state.json"), 0);
        json_object_set_new(j, "epoch", json_string("three"));
        FRESH("c9");
        json_dump_file(j, P("c9/training_state.json"), 0);
        json_object_set_new(j, "epoch", json_integer(3));
        json_object_set_new(json_object_get(json_object_get(j, "rng"), "noise"), "seed",
                            json_string("-5"));
        FRESH("c10");
        json_dump_file(j, P("c10/training_state.json"), 0);
        json_decref(j);
    }
    expect_fail(&m, P("c7"), ATTN_STATUS_UNSUPPORTED, "format_version 2");
    expect_fail(&m, P("c8"), ATTN_STATUS_FORMAT, "missing field \"epoch\"");
    expect_fail(&m, P("c9"), ATTN_STATUS_FORMAT, "field \"epoch\" must be an integer");
    attn_ckpt_state st;
    assert_int_equal(attn_ckpt_load(P("c10"), m.t, 2, m.opt, &st), ATTN_STATUS_FORMAT);
    printf("  %-28s -> %s\n", "rng seed", attn_last_error());
    assert_non_null(strstr(attn_last_error(), "rng.noise.seed"));
    /* a model that disagrees with the file: shape, missing and extra tensors */
    float before[NP];
    memcpy(before, m.params, sizeof before);
    m.t[0].shape[1] = 2;
    m.t[0].shape[0] = 6;
    expect_fail(&m, P("good"), ATTN_STATUS_FORMAT, "tensor 'w' has shape [3, 4], the model [6, 2]");
    assert_memory_equal(before, m.params, sizeof before); /* nothing written on mismatch */
    m.t[0].shape[0] = 3;
    m.t[0].shape[1] = 4;
    m.t[1].name = "bias";
    expect_fail(&m, P("good"), ATTN_STATUS_NOT_FOUND, "no tensor 'bias'");
    m.t[1].name = "b";
    assert_int_equal(attn_ckpt_load(P("good"), m.t, 1, NULL, NULL), ATTN_STATUS_FORMAT);
    assert_non_null(strstr(attn_last_error(), "tensor 'b' is not in the model"));
    /* optimizer of another kind or size */
    attn_optim_params sp = attn_optim_default_params(ATTN_OPTIM_SGD);
    sp.momentum = 0.9;
    attn_optim *sgd, *big;
    assert_int_equal(attn_optim_create(&sp, NP, NULL, 0, &sgd), 0);
    assert_int_equal(attn_ckpt_load(P("good"), m.t, 2, sgd, NULL), ATTN_STATUS_FORMAT);
    assert_non_null(strstr(attn_last_error(), "optimizer.kind is \"adamw\", but resuming with sgd"));
    attn_optim_params ap = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    assert_int_equal(attn_optim_create(&ap, NP + 1, NULL, 0, &big), 0);
    assert_int_equal(attn_ckpt_load(P("good"), m.t, 2, big, NULL), ATTN_STATUS_FORMAT);
    assert_non_null(strstr(attn_last_error(), "optimizer.n is 16"));
    assert_memory_equal(before, m.params, sizeof before);
    attn_optim_destroy(sgd);
    attn_optim_destroy(big);
    /* and the untouched original still loads */
    assert_int_equal(attn_ckpt_load(P("good"), m.t, 2, m.opt, NULL), 0);
    free(model);
    free(json);
    toy_free(&m);
#undef FRESH
}

static int count_tmp(const char *base) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls -d '%s'.tmp-* 2>/dev/null | wc -l", base);
    FILE *p = popen(cmd, "r");
    int k = -1;
    if (p) {
        if (fscanf(p, "%d", &k) != 1) k = -1;
        pclose(p);
    }
    return k;
}

static void test_ckpt_failed_save(void **state) {
    (void)state;
    toy m;
    toy_init(&m, 2.0f);
    assert_int_equal(toy_save(&m, P("keep")), 0);
    float saved[NP];
    memcpy(saved, m.params, sizeof saved);
    /* nonexistent parent, a file in the way, a bad tensor mid-save, a subdirectory in DIR */
    assert_int_equal(toy_save(&m, P("no/such/dir")), ATTN_STATUS_IO);
    printf("  message: %s\n", attn_last_error());
    write_text(P("afile"), "x");
    assert_int_equal(toy_save(&m, P("afile")), ATTN_STATUS_INVALID_ARGUMENT);
    m.params[0] = 77.0f;
    attn_ckpt_tensor bad[2] = {m.t[0], {NULL, 1, {4}, m.params + 12}};
    attn_ckpt_state st = attn_ckpt_state_init();
    assert_true(attn_ckpt_save(P("keep"), bad, 2, m.opt, &st) != 0);
    printf("  message: %s\n", attn_last_error());
    assert_int_equal(count_tmp(P("keep")), 0);
    assert_int_equal(mkdir(P("keep/sub"), 0777), 0);
    assert_int_equal(toy_save(&m, P("keep")), ATTN_STATUS_INVALID_ARGUMENT);
    printf("  message: %s\n", attn_last_error());
    rmdir(P("keep/sub"));
    /* the previous checkpoint is intact */
    toy f;
    toy_init(&f, 5.0f);
    assert_int_equal(toy_load(&f, P("keep")), 0);
    assert_memory_equal(f.params, saved, sizeof saved);
    toy_free(&f);
    toy_free(&m);
}

static void test_ckpt_crash(void **state) {
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        attn_ckpt__no_exchange = mode == 1;
        for (int k = 1; k <= 6; k++) {
            const char *dir = P("crash");
            sh("rm -rf '%s' '%s'.*", dir, dir);
            toy a;
            toy_init(&a, 1.0f); /* checkpoint A: params start at 1.0 */
            assert_int_equal(toy_save(&a, dir), 0);
            write_text(P("crash/config.json"), "{\"user\": true}\n");
            toy_free(&a);
            toy_init(&a, 2.0f); /* checkpoint B: params start at 2.0 */
            attn_ckpt__crash_after = k;
            attn_status s = toy_save(&a, dir);
            attn_ckpt__crash_after = 0;
            toy l;
            toy_init(&l, 9.0f);
            assert_int_equal(toy_load(&l, dir), 0);
            char which = l.params[0] == 1.0f ? 'A' : l.params[0] == 2.0f ? 'B' : '?';
            assert_true(which != '?');
            printf("  %s swap, crash after step %d (%s): loads %c\n", mode ? "two-rename" : "exchange",
                   k, s ? "crashed" : "completed", which);
            if (s == 0) assert_true(which == 'B');
            /* a normal save afterwards cleans up and keeps the user's file */
            toy_free(&l);
            toy_init(&l, 3.0f);
            assert_int_equal(toy_save(&l, dir), 0);
            toy c;
            toy_init(&c, 9.0f);
            assert_int_equal(toy_load(&c, dir), 0);
            assert_true(c.params[0] == 3.0f);
            assert_int_equal(access(P("crash/config.json"), R_OK), 0);
            assert_int_equal(access(P("crash.prev"), F_OK), -1);
            assert_int_equal(count_tmp(dir), 0);
            toy_free(&a);
            toy_free(&l);
            toy_free(&c);
        }
    }
    attn_ckpt__no_exchange = false;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optim_torch),
        cmocka_unit_test(test_clip_torch),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_grad_checks),
        cmocka_unit_test(test_clip_step_fused),
        cmocka_unit_test(test_optim_threads),
        cmocka_unit_test(test_optim_bad_args),
        cmocka_unit_test(test_ckpt_roundtrip_resume),
        cmocka_unit_test(test_ckpt_damaged),
        cmocka_unit_test(test_ckpt_failed_save),
        cmocka_unit_test(test_ckpt_crash),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}

/* test_gpt_dp.c — the data-parallel GPT training step (attn_gpt_trainer, src/models/gpt_dp.c)
 * against the plain whole-batch path (attn_gpt_forward + attn_gpt_loss + attn_gpt_backward on one
 * state, which tests/test_gpt_train.c checks against PyTorch):
 *   - gradients and loss with 2 replicas (even split), B = 3 over 2 (uneven), 3 replicas over 4
 *     rows, B = 1 (cut to one replica), ignored targets spread unevenly over the replicas,
 *     dropout on (the replicas must draw the whole-batch masks of their rows), and 2 accumulated
 *     micro-batches (grad_scale 1/2 added into the same buffer);
 *   - evaluation (attn_gpt_trainer_eval) against forward + loss;
 *   - a 6-step AdamW loss trajectory against the plain path;
 *   - one trainer reused over steps of varying batch size against fresh trainers, bit for bit;
 *   - determinism (two runs bit-identical) and argument errors.
 * Tolerance: every tensor's gradient within 1e-5 of its own largest |entry| (+1e-9 absolute for
 * all-zero tensors), the loss within 1e-6 relative: the two paths differ only in the float32
 * summation order over the batch's rows (measured ~1e-7). A replica drawing the wrong dropout
 * masks, a missing or double-counted replica, or a wrong loss weighting moves them by > 1e-2. */
#include "tu.h"

#include "attn_gpt.h"
#include "attn_train.h"

/* A small GPT with large initial weights (so every gradient is well away from 0). */
static attn_gpt_model *small_model(float pdrop, attn_act act) {
    attn_gpt_config c = attn_gpt_default_config();
    c.vocab_size = 13, c.n_positions = 8, c.n_embd = 16, c.n_layer = 2, c.n_head = 2;
    c.n_inner = 24, c.activation = act;
    c.resid_pdrop = c.embd_pdrop = pdrop, c.attn_pdrop = 0;
    c.initializer_range = 0.3f, c.bos_token_id = c.eos_token_id = -1;
    attn_gpt_model *m;
    assert_int_equal(attn_gpt_model_init(&c, 77, &m), ATTN_STATUS_OK);
    /* Non-zero biases and LayerNorm parameters too. */
    tu_rng r = {12345};
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 1)
            for (size_t k = 0; k < m->tensors[i].numel; k++)
                m->params[m->tensors[i].offset + k] += tu_uniform(&r, -0.2f, 0.2f);
    return m;
}

static void make_batch(int B, int T, int V, uint64_t seed, int n_ignored, int32_t *x, int32_t *y) {
    tu_rng r = {seed};
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)(tu_uniform(&r, 0, 1) * V) % V;
        y[i] = (int32_t)(tu_uniform(&r, 0, 1) * V) % V;
    }
    /* Ignore the first n_ignored targets: all in the first rows, so the replicas count unequal
     * numbers of targets. */
    for (int i = 0; i < n_ignored && i < B * T; i++) y[i] = ATTN_GPT_IGNORE_INDEX;
}

/* Compare two gradient buffers tensor by tensor (see the tolerance above). */
static void close_grads(const attn_gpt_model *m, const float *got, const float *ref,
                        const char *what) {
    double worst = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        double err = 0, mx = 0;
        for (size_t k = 0; k < t->numel; k++) {
            err = fmax(err, fabs((double)got[t->offset + k] - ref[t->offset + k]));
            mx = fmax(mx, fabs((double)ref[t->offset + k]));
        }
        if (mx > 0) worst = fmax(worst, err / mx);
        if (!(err <= 1e-5 * mx + 1e-9)) {
            char w[160];
            snprintf(w, sizeof w, "%s: grad %s", what, t->name);
            tu_close(w, got + t->offset, ref + t->offset, t->numel, 1e-5, 1e-9);
        }
    }
    printf("  %-44s worst tensor rel err %.2e (tolerance 1e-5)\n", what, worst);
}

/* The plain path: A micro-batches (x, y each (A, B, T)) accumulated with grad_scale 1/A. */
static float plain(attn_gpt_model *m, bool training, int A, int B, int T, const int32_t *x,
                   const int32_t *y) {
    attn_gpt_state *st;
    assert_int_equal(attn_gpt_state_init(m, B, T, &st), ATTN_STATUS_OK);
    double sum = 0;
    for (int a = 0; a < A; a++) {
        attn_gpt_set_train(st, training, 99, (uint64_t)(10 + a));
        float l;
        assert_int_equal(attn_gpt_forward(m, st, B, T, x + (size_t)a * B * T, NULL), ATTN_STATUS_OK);
        assert_int_equal(attn_gpt_loss(m, st, y + (size_t)a * B * T, 1.0f / (float)A, &l),
                         ATTN_STATUS_OK);
        assert_int_equal(attn_gpt_backward(m, st), ATTN_STATUS_OK);
        sum += l;
    }
    attn_gpt_state_free(st);
    return (float)(sum / A);
}

static float dp(attn_gpt_model *m, int n_rep, bool training, int A, int B, int T,
                const int32_t *x, const int32_t *y) {
    attn_gpt_trainer *t;
    assert_int_equal(attn_gpt_trainer_init(m, B, T, n_rep, &t), ATTN_STATUS_OK);
    assert_int_equal(attn_gpt_trainer_replicas(t), n_rep < B ? n_rep : B);
    double sum = 0;
    for (int a = 0; a < A; a++) {
        float l;
        attn_status s = attn_gpt_train_step(t, training, 99, (uint64_t)(10 + a), B, T,
                                            x + (size_t)a * B * T, y + (size_t)a * B * T,
                                            1.0f / (float)A, &l);
        if (s) fail_msg("train step: %s", attn_last_error());
        sum += l;
    }
    attn_gpt_trainer_free(t);
    return (float)(sum / A);
}

/* One case: plain vs n_rep replicas. */
static void check_case(const char *what, float pdrop, attn_act act, int n_rep, int A, int B, int T,
                       int n_ignored) {
    attn_gpt_model *m = small_model(pdrop, act);
    const int V = m->cfg.vocab_size;
    int32_t *x = malloc((size_t)A * B * T * sizeof *x), *y = malloc((size_t)A * B * T * sizeof *y);
    for (int a = 0; a < A; a++)
        make_batch(B, T, V, 1000 + (uint64_t)a, n_ignored, x + (size_t)a * B * T,
                   y + (size_t)a * B * T);
    float *gref = malloc(m->num_params * sizeof(float));
    /* Start from non-zero gradients: both paths must ADD. */
    for (size_t k = 0; k < m->num_params; k++) m->grads[k] = 1e-3f * (float)(k % 7);
    const float lref = plain(m, true, A, B, T, x, y);
    memcpy(gref, m->grads, m->num_params * sizeof(float));
    for (size_t k = 0; k < m->num_params; k++) m->grads[k] = 1e-3f * (float)(k % 7);
    const float l = dp(m, n_rep, true, A, B, T, x, y);
    printf("  %-44s loss %.9f plain %.9f rel %.2e\n", what, (double)l, (double)lref,
           fabs((double)l - lref) / fabs((double)lref));
    assert_true(fabs((double)l - lref) <= 1e-6 * fabs((double)lref));
    close_grads(m, m->grads, gref, what);
    free(gref), free(x), free(y);
    attn_gpt_model_free(m);
}

static void test_grads_even(void **state) {
    (void)state;
    check_case("B=4 over 2", 0.0f, ATTN_ACT_GELU_TANH, 2, 1, 4, 8, 0);
    check_case("B=4 over 3 (2+1+1), T=5", 0.0f, ATTN_ACT_GELU_TANH, 3, 1, 4, 5, 0);
    check_case("B=4 over 2, relu", 0.0f, ATTN_ACT_RELU, 2, 1, 4, 8, 0);
}

static void test_grads_uneven(void **state) {
    (void)state;
    check_case("B=3 over 2 (2+1)", 0.0f, ATTN_ACT_GELU_TANH, 2, 1, 3, 8, 0);
    check_case("B=1 (one replica)", 0.0f, ATTN_ACT_GELU_TANH, 2, 1, 1, 8, 0);
    check_case("B=4 over 2, 11 ignored targets", 0.0f, ATTN_ACT_GELU_TANH, 2, 1, 4, 8, 11);
    check_case("B=2 over 2, row 0 all ignored", 0.0f, ATTN_ACT_GELU_TANH, 2, 1, 2, 8, 8);
}

static void test_grads_dropout(void **state) {
    (void)state;
    check_case("dropout 0.3, B=4 over 2", 0.3f, ATTN_ACT_GELU_TANH, 2, 1, 4, 8, 0);
    check_case("dropout 0.3, B=3 over 2, T=7", 0.3f, ATTN_ACT_GELU_TANH, 2, 1, 3, 7, 0);
    check_case("dropout 0.3, B=5 over 3, relu", 0.3f, ATTN_ACT_RELU, 3, 1, 5, 8, 0);
}

static void test_grads_accumulation(void **state) {
    (void)state;
    check_case("2 micro-batches, B=4 over 2", 0.0f, ATTN_ACT_GELU_TANH, 2, 2, 4, 8, 0);
    check_case("3 micro-batches, dropout, B=3 over 2", 0.2f, ATTN_ACT_GELU_TANH, 2, 3, 3, 8, 5);
}

static void test_eval(void **state) {
    (void)state;
    attn_gpt_model *m = small_model(0.3f, ATTN_ACT_GELU_TANH);
    const int B = 5, T = 8;
    int32_t x[40], y[40];
    make_batch(B, T, m->cfg.vocab_size, 4, 3, x, y);
    attn_gpt_state *st;
    assert_int_equal(attn_gpt_state_init(m, B, T, &st), ATTN_STATUS_OK);
    float lref, l;
    assert_int_equal(attn_gpt_forward(m, st, B, T, x, NULL), ATTN_STATUS_OK); /* eval mode */
    assert_int_equal(attn_gpt_loss(m, st, y, 1.0f, &lref), ATTN_STATUS_OK);
    attn_gpt_trainer *t;
    assert_int_equal(attn_gpt_trainer_init(m, B, T, 2, &t), ATTN_STATUS_OK);
    memset(m->grads, 0, m->num_params * sizeof(float));
    assert_int_equal(attn_gpt_trainer_eval(t, B, T, x, y, &l), ATTN_STATUS_OK);
    printf("  eval loss %.9f plain %.9f\n", (double)l, (double)lref);
    assert_true(fabs((double)l - lref) <= 1e-6 * fabs((double)lref));
    for (size_t k = 0; k < m->num_params; k++) assert_true(m->grads[k] == 0.0f); /* untouched */
    attn_gpt_trainer_free(t);
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
}

/* 6 AdamW steps from the same weights, plain vs 2 replicas: losses within 1e-5 relative (the
 * rounding differences compound a little over the steps). */
static void run_traj(attn_gpt_model *m, int n_rep, int steps, int B, int T, float *losses) {
    attn_optim_range *ranges = calloc((size_t)m->n_tensors, sizeof *ranges);
    for (int i = 0; i < m->n_tensors; i++)
        ranges[i] = (attn_optim_range){m->tensors[i].offset, m->tensors[i].numel,
                                       m->tensors[i].decay, m->tensors[i].name};
    attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    op.beta1 = 0.9, op.beta2 = 0.99, op.weight_decay = 0.1;
    attn_optim *opt;
    assert_int_equal(attn_optim_create(&op, m->num_params, ranges, m->n_tensors, &opt),
                     ATTN_STATUS_OK);
    attn_gpt_trainer *t = NULL;
    attn_gpt_state *st = NULL;
    if (n_rep)
        assert_int_equal(attn_gpt_trainer_init(m, B, T, n_rep, &t), ATTN_STATUS_OK);
    else
        assert_int_equal(attn_gpt_state_init(m, B, T, &st), ATTN_STATUS_OK);
    int32_t *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    for (int s = 0; s < steps; s++) {
        make_batch(B, T, m->cfg.vocab_size, 500 + (uint64_t)(s % 2), 0, x, y); /* learnable */
        attn_gpt_zero_grad(m);
        if (t) {
            assert_int_equal(attn_gpt_train_step(t, true, 3, (uint64_t)s, B, T, x, y, 1.0f,
                                                 &losses[s]),
                             ATTN_STATUS_OK);
        } else {
            attn_gpt_set_train(st, true, 3, (uint64_t)s);
            assert_int_equal(attn_gpt_forward(m, st, B, T, x, NULL), ATTN_STATUS_OK);
            assert_int_equal(attn_gpt_loss(m, st, y, 1.0f, &losses[s]), ATTN_STATUS_OK);
            assert_int_equal(attn_gpt_backward(m, st), ATTN_STATUS_OK);
        }
        attn_optim_clip_grad_norm(m->grads, m->num_params, 1.0);
        assert_int_equal(attn_optim_step(opt, m->params, m->grads, 3e-3), ATTN_STATUS_OK);
    }
    free(x), free(y);
    attn_gpt_trainer_free(t);
    attn_gpt_state_free(st);
    attn_optim_destroy(opt);
    free(ranges);
}

static void test_trajectory(void **state) {
    (void)state;
    enum { S = 6 };
    float a[S], b[S], c[S];
    attn_gpt_model *m = small_model(0.1f, ATTN_ACT_GELU_TANH);
    run_traj(m, 0, S, 6, 8, a);
    attn_gpt_model_free(m);
    m = small_model(0.1f, ATTN_ACT_GELU_TANH);
    run_traj(m, 2, S, 6, 8, b);
    attn_gpt_model_free(m);
    m = small_model(0.1f, ATTN_ACT_GELU_TANH);
    run_traj(m, 2, S, 6, 8, c);
    attn_gpt_model_free(m);
    for (int s = 0; s < S; s++) {
        printf("  step %d: plain %.7f  2 replicas %.7f  rel %.2e\n", s, (double)a[s], (double)b[s],
               fabs((double)a[s] - b[s]) / a[s]);
        assert_true(fabs((double)a[s] - b[s]) <= 1e-5 * fabs((double)a[s]));
        /* deterministic for a replica count: bit for bit */
        assert_true(memcmp(&b[s], &c[s], sizeof(float)) == 0);
    }
    assert_true(a[S - 1] < a[0]); /* it trains */
}

/* One trainer reused over steps of different batch sizes (replicas idle in some steps, a rejected
 * step in between) gives, at every step, the gradients of a fresh trainer running that step
 * alone, bit for bit: nothing of a step (the replicas' private gradients in particular) leaks
 * into the next. */
static void test_reuse(void **state) {
    (void)state;
    attn_gpt_model *m = small_model(0.1f, ATTN_ACT_GELU_TANH);
    const int T = 8, V = m->cfg.vocab_size, sizes[] = {4, 1, 3, 2, 4};
    float *got = malloc(m->num_params * sizeof(float));
    attn_gpt_trainer *t;
    assert_int_equal(attn_gpt_trainer_init(m, 4, T, 3, &t), ATTN_STATUS_OK);
    int32_t x[32], y[32];
    for (int s = 0; s < 5; s++) {
        const int B = sizes[s];
        make_batch(B, T, V, 500 + (uint64_t)s, s, x, y);
        if (s == 2) { /* a rejected step first: nothing may change */
            x[3] = V;
            float l;
            tu_expect_fail3(attn_gpt_train_step(t, true, 5, (uint64_t)s, B, T, x, y, 1.0f, &l),
                            ATTN_STATUS_INVALID_ARGUMENT, "token id", NULL, NULL);
            x[3] = 0;
        }
        float l1, l2;
        attn_gpt_zero_grad(m);
        assert_int_equal(attn_gpt_train_step(t, true, 5, (uint64_t)s, B, T, x, y, 1.0f, &l1),
                         ATTN_STATUS_OK);
        memcpy(got, m->grads, m->num_params * sizeof(float));
        attn_gpt_trainer *fresh;
        assert_int_equal(attn_gpt_trainer_init(m, 4, T, 3, &fresh), ATTN_STATUS_OK);
        attn_gpt_zero_grad(m);
        assert_int_equal(attn_gpt_train_step(fresh, true, 5, (uint64_t)s, B, T, x, y, 1.0f, &l2),
                         ATTN_STATUS_OK);
        attn_gpt_trainer_free(fresh);
        printf("  step %d, B=%d: loss %.7f, fresh trainer %.7f\n", s, B, (double)l1, (double)l2);
        assert_true(l1 == l2);
        assert_memory_equal(got, m->grads, m->num_params * sizeof(float));
    }
    attn_gpt_trainer_free(t);
    free(got);
    attn_gpt_model_free(m);
}

/* The opt-in mixed precision (attn_gpt_trainer_set_precision BF16): every product's operands
 * rounded to bfloat16 (the kernels are checked exactly in test_gemm_bf16.c). Here, on the ref
 * backend and (where the CPU has AVX512-BF16) the avx512 one, 2 replicas in BF16 against the
 * float32 plain path: each gradient tensor within 5e-2 of its largest |entry| and the loss within
 * 1e-2 relative (bfloat16 keeps 8 significant bits: measured ~1e-2 and ~1e-3), and not equal to
 * the float32 numbers (worst tensor above 1e-5: the products really are rounded). */
static void bf16_on(int b) {
    const attn_backend bes[] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX512};
    tu_need_backend(bes[b]);
    attn_set_backend(bes[b]);
    if (!attn_precision_available(ATTN_PRECISION_BF16)) {
        attn_set_backend(ATTN_BACKEND_AUTO);
        tu_skip_hw("precision bf16 on backend %s needs AVX512-BF16, which this CPU lacks",
                   attn_backend_name(bes[b]));
    }
    {
        attn_gpt_model *m = small_model(0.0f, ATTN_ACT_GELU_TANH);
        const int B = 4, T = 8, V = m->cfg.vocab_size;
        int32_t x[4 * 8], y[4 * 8];
        make_batch(B, T, V, 2024, 3, x, y);
        attn_gpt_zero_grad(m);
        const float lref = plain(m, false, 1, B, T, x, y);
        float *gref = malloc(m->num_params * sizeof(float));
        memcpy(gref, m->grads, m->num_params * sizeof(float));
        attn_gpt_zero_grad(m);
        attn_gpt_trainer *t;
        assert_int_equal(attn_gpt_trainer_init(m, B, T, 2, &t), ATTN_STATUS_OK);
        assert_int_equal(attn_gpt_trainer_set_precision(t, ATTN_PRECISION_BF16), ATTN_STATUS_OK);
        float l;
        assert_int_equal(attn_gpt_train_step(t, false, 99, 10, B, T, x, y, 1.0f, &l),
                         ATTN_STATUS_OK);
        attn_gpt_trainer_free(t);
        double worst = 0;
        for (int i = 0; i < m->n_tensors; i++) {
            const attn_gpt_tensor *te = &m->tensors[i];
            double err = 0, mx = 0;
            for (size_t k = 0; k < te->numel; k++) {
                err = fmax(err, fabs((double)m->grads[te->offset + k] - gref[te->offset + k]));
                mx = fmax(mx, fabs((double)gref[te->offset + k]));
            }
            if (mx > 0) worst = fmax(worst, err / mx);
            if (!(err <= 5e-2 * mx + 1e-9))
                fail_msg("%s: bf16 grad %s off by %.3e (max %.3e)",
                         attn_backend_name(bes[b]), te->name, err, mx);
        }
        printf("  %-6s bf16: loss %.7f f32 %.7f (rel %.2e), worst tensor grad rel err %.2e\n",
               attn_backend_name(bes[b]), (double)l, (double)lref,
               fabs((double)l - lref) / lref, worst);
        assert_true(fabs((double)l - lref) <= 1e-2 * fabs((double)lref));
        assert_true(worst > 1e-5);
        free(gref);
        attn_gpt_model_free(m);
    }
    attn_set_backend(ATTN_BACKEND_AUTO);
}

static void test_bf16_ref(void **state) {
    (void)state;
    bf16_on(0);
}

static void test_bf16_avx512(void **state) {
    (void)state;
    bf16_on(1);
}

/* errors: an unknown precision */
static void test_bf16_errors(void **state) {
    (void)state;
    attn_gpt_model *m = small_model(0.0f, ATTN_ACT_GELU_TANH);
    attn_gpt_trainer *t;
    assert_int_equal(attn_gpt_trainer_init(m, 2, 8, 1, &t), ATTN_STATUS_OK);
    tu_expect_fail(attn_gpt_trainer_set_precision(t, (attn_precision)9),
                   ATTN_STATUS_INVALID_ARGUMENT, "precision", NULL);
    attn_gpt_trainer_free(t);
    attn_gpt_model_free(m);
}

/* errors: BF16 where no kernel runs it (the avx2 backend) */
static void test_bf16_errors_avx2(void **state) {
    (void)state;
    tu_need_backend(ATTN_BACKEND_AVX2);
    attn_gpt_model *m = small_model(0.0f, ATTN_ACT_GELU_TANH);
    attn_gpt_trainer *t;
    assert_int_equal(attn_gpt_trainer_init(m, 2, 8, 1, &t), ATTN_STATUS_OK);
    attn_set_backend(ATTN_BACKEND_AVX2);
    tu_expect_fail(attn_gpt_trainer_set_precision(t, ATTN_PRECISION_BF16),
                   ATTN_STATUS_UNSUPPORTED, "AVX512-BF16", NULL);
    attn_gpt_trainer_free(t);
    attn_gpt_model_free(m);
    attn_set_backend(ATTN_BACKEND_AUTO);
}

static void test_errors(void **state) {
    (void)state;
    attn_gpt_model *m = small_model(0.0f, ATTN_ACT_GELU_TANH);
    attn_gpt_trainer *t;
    tu_expect_fail3(attn_gpt_trainer_init(m, 4, 8, 0, &t), ATTN_STATUS_INVALID_ARGUMENT,
                    "replicas", NULL, NULL);
    assert_null(t);
    tu_expect_fail3(attn_gpt_trainer_init(m, 0, 8, 2, &t), ATTN_STATUS_INVALID_ARGUMENT, "B and T",
                    NULL, NULL);
    tu_expect_fail3(attn_gpt_trainer_init(m, 4, 9, 2, &t), ATTN_STATUS_INVALID_ARGUMENT,
                    "n_positions", NULL, NULL);
    assert_int_equal(attn_gpt_trainer_init(m, 4, 8, 2, &t), ATTN_STATUS_OK);
    int32_t x[40], y[40];
    make_batch(5, 8, m->cfg.vocab_size, 1, 0, x, y);
    float l;
    tu_expect_fail3(attn_gpt_train_step(t, false, 0, 0, 5, 8, x, y, 1.0f, &l),
                    ATTN_STATUS_INVALID_ARGUMENT, "capacity", NULL, NULL);
    tu_expect_fail3(attn_gpt_train_step(t, false, 0, 0, 4, 8, NULL, y, 1.0f, &l),
                    ATTN_STATUS_INVALID_ARGUMENT, "NULL", NULL, NULL);
    x[29] = 13; /* row 3 (the second replica's row 1), position 5 */
    tu_expect_fail3(attn_gpt_train_step(t, false, 0, 0, 4, 8, x, y, 1.0f, &l),
                    ATTN_STATUS_INVALID_ARGUMENT, "token id 13", "batch 3, position 5", NULL);
    x[29] = 0;
    y[30] = -5;
    tu_expect_fail3(attn_gpt_train_step(t, false, 0, 0, 4, 8, x, y, 1.0f, &l),
                    ATTN_STATUS_INVALID_ARGUMENT, "target -5", "batch 3, position 6", NULL);
    y[30] = 0;
    assert_int_equal(attn_gpt_train_step(t, false, 0, 0, 4, 8, x, y, 1.0f, &l), ATTN_STATUS_OK);
    assert_true(isfinite(l) && l > 0);
    attn_gpt_trainer_free(t);
    attn_gpt_trainer_free(NULL);
    assert_int_equal(attn_gpt_trainer_replicas(NULL), 0);
    attn_gpt_model_free(m);
}

int main(void) {
    attn_set_num_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grads_even),     cmocka_unit_test(test_grads_uneven),
        cmocka_unit_test(test_grads_dropout),  cmocka_unit_test(test_grads_accumulation),
        cmocka_unit_test(test_eval),           cmocka_unit_test(test_trajectory),
        cmocka_unit_test(test_reuse),          cmocka_unit_test(test_bf16_ref),
        cmocka_unit_test(test_bf16_avx512),    cmocka_unit_test(test_bf16_errors),
        cmocka_unit_test(test_bf16_errors_avx2), cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

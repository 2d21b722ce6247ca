/* test_gpt.c — GPT-2 (attn_gpt.h) against Hugging Face transformers (tools/ref_gpt.py): for
 * random-weight GPT2LMHeadModel directories of several shapes and storage formats (tied/untied,
 * gelu_new/gelu/relu, inverse-layer-index scaling, GPT2Model files without the "transformer."
 * prefix, float16, bfloat16 shards) loaded as transformers wrote them:
 *   - logits and every hidden state (output_hidden_states) of a batch;
 *   - greedy generation identical to model.generate(do_sample=False), through the KV cache,
 *     and the KV-cache decode (prompt in one pass, then token by token) equal to a full forward;
 *   - one step's loss and the gradient of every parameter against a float64 twin;
 * plus a finite-difference check with dropout on, save/load round trips (bit-exact, and read back
 * by transformers when the venv is there), configuration parsing, bad inputs, and the
 * `attn forward` command.
 *
 * Tolerances (fp32 against transformers' fp32 forward or a float64 twin), as
 * max|err| <= rtol · max|ref|:
 *   logits 1e-4 (the bar; the measured worst is printed), hidden states 1e-4 per layer,
 *   KV-cache decode vs full forward 1e-5, loss 1e-5 relative,
 *   each gradient tensor 1e-4 · its own max|ref| + 1e-6 · the largest gradient of the case,
 *   finite differences (fp32 central differences, h = 1e-2):
 *     |fd − grad| <= 3e-2·|grad| + 3e-3. */
#include "tu.h"

#include "attn_gpt.h"
#include "attn_io.h"
#include "attn_kernels.h"

#include <jansson.h>
#include <sys/wait.h>
#include <unistd.h>

#define RTOL_LOGITS 1e-4
#define RTOL_HIDDEN 1e-4
#define RTOL_KV 1e-5
#define RTOL_LOSS 1e-5
#define RTOL_GRAD 1e-4
#define ATOL_GRAD_REL 1e-6

static const char *const MODELS[] = {"tiny", "odd", "relu", "trunk_f16", "sharded"};
#define NMODELS (int)(sizeof MODELS / sizeof MODELS[0])

static double worst_logit_rel; /* the worst logits error / max|logit| over every model */

static const char *model_dir(const char *name) {
    static char b[4096];
    snprintf(b, sizeof b, "%s", tu_ref_path("gpt"));
    size_t n = strlen(b);
    snprintf(b + n, sizeof b - n, "/%s", name);
    return b;
}

static const char *ref_file(const char *name, const char *file) {
    static char b[4][4096];
    static int k;
    char *p = b[k++ & 3];
    snprintf(p, sizeof b[0], "%s.ref/%s", model_dir(name), file);
    return p;
}

static json_t *load_ref(const char *name) {
    json_error_t err;
    json_t *r = json_load_file(ref_file(name, "ref.json"), 0, &err);
    if (!r) fail_msg("%s: %s (run tools/ref_gpt.py first)", ref_file(name, "ref.json"), err.text);
    return r;
}

/* A JSON array of arrays of ints (B, T) into a malloc'd int32 buffer. */
static int32_t *ids_2d(json_t *a, int *B, int *T) {
    *B = (int)json_array_size(a);
    *T = (int)json_array_size(json_array_get(a, 0));
    int32_t *ids = malloc((size_t)*B * *T * sizeof *ids);
    assert_non_null(ids);
    for (int b = 0; b < *B; b++)
        for (int t = 0; t < *T; t++)
            ids[b * *T + t] = (int32_t)json_integer_value(json_array_get(json_array_get(a, b), t));
    return ids;
}

static int32_t *ids_1d(json_t *a, int *T) {
    *T = (int)json_array_size(a);
    int32_t *ids = malloc((size_t)(*T ? *T : 1) * sizeof *ids);
    assert_non_null(ids);
    for (int t = 0; t < *T; t++) ids[t] = (int32_t)json_integer_value(json_array_get(a, t));
    return ids;
}

static float *load_npy(const char *path, int want_ndim, int64_t *shape) {
    float *d;
    int nd;
    if (attn_npy_load_f32(path, &d, &nd, shape)) fail_msg("%s", attn_last_error());
    assert_int_equal(nd, want_ndim);
    return d;
}

static attn_gpt_model *load_model(const char *name) {
    attn_gpt_model *m;
    if (attn_gpt_load_dir(model_dir(name), &m)) fail_msg("%s", attn_last_error());
    return m;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* ---- logits, hidden states, KV cache, greedy generation --------------------------------- */

static void check_forward(const char *name) {
    printf(" model %s\n", name);
    attn_gpt_model *m = load_model(name);
    const attn_gpt_config *c = &m->cfg;
    json_t *ref = load_ref(name);
    int B, T;
    int32_t *ids = ids_2d(json_object_get(ref, "ids"), &B, &T);
    const int V = c->vocab_size, C = c->n_embd, L = c->n_layer;
    int64_t sh[ATTN_MAX_DIMS];
    float *rlog = load_npy(ref_file(name, "logits.npy"), 3, sh);
    assert_true(sh[0] == B && sh[1] == T && sh[2] == V);
    float *rhid = load_npy(ref_file(name, "hidden.npy"), 4, sh);
    assert_true(sh[0] == L + 1 && sh[1] == B && sh[2] == T && sh[3] == C);

    attn_gpt_state *st;
    if (attn_gpt_state_init(m, B, T, &st)) fail_msg("%s", attn_last_error());
    float *logits = malloc((size_t)B * T * V * sizeof(float));
    float *hid = malloc((size_t)(L + 1) * B * T * C * sizeof(float));
    attn_gpt_capture cap = {hid, NULL};
    attn_gpt_set_capture(st, &cap);
    if (attn_gpt_forward(m, st, B, T, ids, logits)) fail_msg("%s", attn_last_error());
    char what[96];
    snprintf(what, sizeof what, "%s logits (%d,%d,%d)", name, B, T, V);
    tu_close(what, logits, rlog, (size_t)B * T * V, RTOL_LOGITS, 0);
    double err = 0, mx = 0;
    for (size_t i = 0; i < (size_t)B * T * V; i++) {
        err = fmax(err, fabs(logits[i] - rlog[i]));
        mx = fmax(mx, fabs(rlog[i]));
    }
    if (err / mx > worst_logit_rel) worst_logit_rel = err / mx;
    for (int l = 0; l <= L; l++) {
        snprintf(what, sizeof what, "%s hidden[%d]", name, l);
        size_t per = (size_t)B * T * C;
        tu_close(what, hid + l * per, rhid + l * per, per, RTOL_HIDDEN, 0);
    }

    /* KV cache: the batch's prompt in one pass, then the rest one token at a time, every
     * position's logits against the full forward above. */
    attn_gpt_kv *kv;
    if (attn_gpt_kv_init(m, B, T, &kv)) fail_msg("%s", attn_last_error());
    float *dl = malloc((size_t)B * T * V * sizeof(float)); /* (B, T, V) assembled */
    float *step = malloc((size_t)B * T * V * sizeof(float));
    int32_t *col = malloc((size_t)B * T * sizeof *col);
    const int Tp = T / 2;
    for (int b = 0; b < B; b++) memcpy(col + b * Tp, ids + b * T, Tp * sizeof *col);
    if (attn_gpt_decode(m, kv, B, Tp, col, step, true)) fail_msg("%s", attn_last_error());
    for (int b = 0; b < B; b++)
        memcpy(dl + (size_t)b * T * V, step + (size_t)b * Tp * V, (size_t)Tp * V * sizeof(float));
    for (int t = Tp; t < T; t++) {
        for (int b = 0; b < B; b++) col[b] = ids[b * T + t];
        if (attn_gpt_decode(m, kv, B, 1, col, step, false)) fail_msg("%s", attn_last_error());
        for (int b = 0; b < B; b++)
            memcpy(dl + ((size_t)b * T + t) * V, step + (size_t)b * V, V * sizeof(float));
    }
    assert_int_equal(attn_gpt_kv_len(kv), T);
    snprintf(what, sizeof what, "%s KV-cache decode vs forward", name);
    tu_close(what, dl, logits, (size_t)B * T * V, RTOL_KV, 0);
    /* A full cache refuses more and stays as it was. */
    tu_expect_fail(attn_gpt_decode(m, kv, B, 1, col, step, false), ATTN_STATUS_INVALID_ARGUMENT,
                   "exceed", NULL);
    assert_int_equal(attn_gpt_kv_len(kv), T);
    attn_gpt_kv_free(kv);

    /* Greedy generation (batch 1) through the cache, as model.generate(do_sample=False). */
    int Tp2, NG;
    int32_t *prompt = ids_1d(json_object_get(ref, "prompt"), &Tp2);
    int32_t *want = ids_1d(json_object_get(ref, "greedy"), &NG);
    if (attn_gpt_kv_init(m, 1, Tp2 + NG, &kv)) fail_msg("%s", attn_last_error());
    float *lg = malloc(V * sizeof(float));
    if (attn_gpt_decode(m, kv, 1, Tp2, prompt, lg, false)) fail_msg("%s", attn_last_error());
    int32_t got[64];
    for (int i = 0; i < NG; i++) {
        got[i] = argmax(lg, V);
        if (i + 1 < NG && attn_gpt_decode(m, kv, 1, 1, &got[i], lg, false))
            fail_msg("%s", attn_last_error());
    }
    printf("  %s greedy (%d tokens, min top-2 margin %.3g):", name, NG,
           json_number_value(json_object_get(ref, "greedy_min_margin")));
    int same = 1;
    for (int i = 0; i < NG; i++) {
        printf(" %d%s", (int)got[i], got[i] == want[i] ? "" : "(!)");
        same &= got[i] == want[i];
    }
    printf(" %s\n", same ? "identical" : "DIFFERENT");
    if (!same) tu_failures++;
    /* Truncating the cache back to the prompt and regenerating gives the same tokens. */
    assert_int_equal(attn_gpt_kv_truncate(kv, Tp2), ATTN_STATUS_OK);
    assert_int_equal(attn_gpt_kv_truncate(kv, Tp2 + 1), ATTN_STATUS_INVALID_ARGUMENT);
    if (attn_gpt_decode(m, kv, 1, 1, &got[0], lg, false)) fail_msg("%s", attn_last_error());
    assert_int_equal(argmax(lg, V), got[1]);
    attn_gpt_kv_free(kv);

    free(lg);
    free(prompt);
    free(want);
    free(dl);
    free(step);
    free(col);
    free(logits);
    free(hid);
    attn_free(rlog);
    attn_free(rhid);
    free(ids);
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
    json_decref(ref);
}

static void test_hf_forward(void **state) {
    (void)state;
    worst_logit_rel = 0;
    for (int i = 0; i < NMODELS; i++) check_forward(MODELS[i]);
    printf("  worst logits error over all models: %.3e x max|logit| (bar %.0e)\n", worst_logit_rel,
           RTOL_LOGITS);
}

/* The same on the reference kernels (plain loops) for one model: both backends agree with HF. */
static void test_hf_forward_ref_backend(void **state) {
    (void)state;
    attn_backend prev = attn_get_backend();
    assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
    check_forward("odd");
    attn_set_backend(prev);
}

/* ---- loss and gradients ------------------------------------------------------------------ */

static void check_grads(const char *name) {
    attn_gpt_model *m = load_model(name);
    assert_null(m->grads);
    if (attn_gpt_alloc_grads(m)) fail_msg("%s", attn_last_error());
    json_t *ref = load_ref(name);
    int B, T, B2, T2;
    int32_t *ids = ids_2d(json_object_get(ref, "ids"), &B, &T);
    int32_t *tg = ids_2d(json_object_get(ref, "targets"), &B2, &T2);
    assert_true(B == B2 && T == T2);
    attn_gpt_state *st;
    if (attn_gpt_state_init(m, B, T, &st)) fail_msg("%s", attn_last_error());
    /* Training mode: the config's dropout is 0.1 but attn_pdrop must be 0 for training; the
     * reference ran in eval mode, so compare in eval mode (dropout off). */
    if (attn_gpt_forward(m, st, B, T, ids, NULL)) fail_msg("%s", attn_last_error());
    float loss;
    if (attn_gpt_loss(m, st, tg, 1.0f, &loss)) fail_msg("%s", attn_last_error());
    const double rl = json_number_value(json_object_get(ref, "loss"));
    const float rlf = (float)rl;
    char what[128];
    snprintf(what, sizeof what, "%s loss (%.6f vs %.6f)", name, (double)loss, rl);
    tu_close(what, &loss, &rlf, 1, RTOL_LOSS, 0);
    attn_gpt_zero_grad(m);
    if (attn_gpt_backward(m, st)) fail_msg("%s", attn_last_error());

    attn_st_file *f;
    if (attn_st_open(ref_file(name, "grads.safetensors"), &f)) fail_msg("%s", attn_last_error());
    double gmax = 0;
    float **refs = calloc((size_t)m->n_tensors, sizeof *refs);
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        refs[i] = malloc(t->numel * sizeof(float));
        if (attn_st_read_f32(f, t->name, t->ndim, t->shape, refs[i]))
            fail_msg("%s", attn_last_error());
        for (size_t k = 0; k < t->numel; k++) gmax = fmax(gmax, fabs(refs[i][k]));
    }
    double worst = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        const float *g = m->grads + t->offset;
        double err = 0, mx = 0;
        for (size_t k = 0; k < t->numel; k++) {
            err = fmax(err, fabs(g[k] - refs[i][k]));
            mx = fmax(mx, fabs(refs[i][k]));
        }
        worst = fmax(worst, err / (mx > 0 ? mx : 1));
        int ok = err <= RTOL_GRAD * mx + ATOL_GRAD_REL * gmax;
        if (!ok || !tu_quiet())
            printf("  %-8s grad %-38s max_abs_err=%.3e max|ref|=%.3e %s\n", name, t->name, err, mx,
                   ok ? "ok" : "FAIL");
        if (!ok) tu_failures++;
        free(refs[i]);
    }
    printf("  %s: worst gradient error %.3e x its tensor's max|ref|\n", name, worst);
    free(refs);
    attn_st_close(f);
    free(ids);
    free(tg);
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
    json_decref(ref);
}

static void test_hf_gradients(void **state) {
    (void)state;
    for (int i = 0; i < NMODELS; i++) check_grads(MODELS[i]);
}

/* ---- finite differences, with dropout on ----------------------------------------------------- */

static float fd_loss(attn_gpt_model *m, attn_gpt_state *st, int B, int T, const int32_t *ids,
                     const int32_t *tg) {
    float loss;
    if (attn_gpt_forward(m, st, B, T, ids, NULL)) fail_msg("%s", attn_last_error());
    if (attn_gpt_loss(m, st, tg, 1.0f, &loss)) fail_msg("%s", attn_last_error());
    return loss;
}

static void test_finite_differences(void **state) {
    (void)state;
    attn_gpt_config c = attn_gpt_default_config();
    c.vocab_size = 23, c.n_positions = 8, c.n_embd = 16, c.n_layer = 2, c.n_head = 2;
    c.n_inner = 24;
    c.initializer_range = 0.3f;
    c.attn_pdrop = 0.0f, c.resid_pdrop = 0.2f, c.embd_pdrop = 0.2f;
    attn_gpt_model *m;
    if (attn_gpt_model_init(&c, 7, &m)) fail_msg("%s", attn_last_error());
    /* Non-trivial biases and LayerNorm weights. */
    tu_rng r = {12345};
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 1)
            for (size_t k = 0; k < m->tensors[i].numel; k++)
                m->params[m->tensors[i].offset + k] += tu_uniform(&r, -0.3f, 0.3f);
    const int B = 2, T = 7;
    int32_t ids[14], tg[14];
    for (int i = 0; i < B * T; i++) {
        ids[i] = (int32_t)(tu_uniform(&r, 0, 1) * 23) % 23;
        tg[i] = (int32_t)(tu_uniform(&r, 0, 1) * 23) % 23;
    }
    tg[3] = ATTN_GPT_IGNORE_INDEX;
    attn_gpt_state *st;
    if (attn_gpt_state_init(m, B, T, &st)) fail_msg("%s", attn_last_error());
    attn_gpt_set_train(st, true, 99, 5); /* the same masks on every evaluation */
    fd_loss(m, st, B, T, ids, tg);
    attn_gpt_zero_grad(m);
    if (attn_gpt_backward(m, st)) fail_msg("%s", attn_last_error());
    int bad = 0, checked = 0;
    const float h = 1e-2f;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        for (int j = 0; j < 3; j++) {
            size_t k = t->offset + (size_t)(tu_uniform(&r, 0, 1) * (float)t->numel) % t->numel;
            float keep = m->params[k];
            m->params[k] = keep + h;
            double lp = fd_loss(m, st, B, T, ids, tg);
            m->params[k] = keep - h;
            double lm = fd_loss(m, st, B, T, ids, tg);
            m->params[k] = keep;
            double fd = (lp - lm) / (2.0 * h), g = m->grads[k];
            checked++;
            if (fabs(fd - g) > 3e-2 * fabs(g) + 3e-3) {
                printf("  FD mismatch %s[%zu]: fd %.6g grad %.6g\n", t->name, k - t->offset, fd, g);
                bad++;
            }
        }
    }
    printf("  finite differences: %d of %d entries checked agree (dropout 0.2 on)\n", checked - bad,
           checked);
    assert_int_equal(bad, 0);
    /* The dropout path is really on: evaluation mode gives another loss. */
    float l_train = fd_loss(m, st, B, T, ids, tg);
    attn_gpt_set_train(st, false, 0, 0);
    float l_eval = fd_loss(m, st, B, T, ids, tg);
    assert_true(l_train != l_eval);
    /* Same seed and step: same masks; another step: other masks. */
    attn_gpt_set_train(st, true, 99, 5);
    assert_true(fd_loss(m, st, B, T, ids, tg) == l_train);
    attn_gpt_set_train(st, true, 99, 6);
    assert_true(fd_loss(m, st, B, T, ids, tg) != l_train);
    /* The embedding dropout is attn_gpt_dropout (= attn_encdec_dropout) bit for bit: the first
     * captured hidden state of a training forward equals it applied to wte[id] + wpe[t]. */
    {
        float *hid = malloc((size_t)(c.n_layer + 1) * B * T * c.n_embd * sizeof(float));
        float *want = malloc((size_t)B * T * c.n_embd * sizeof(float));
        attn_gpt_capture cap = {hid, NULL};
        attn_gpt_set_capture(st, &cap);
        attn_gpt_set_train(st, true, 99, 5);
        fd_loss(m, st, B, T, ids, tg);
        attn_gpt_set_capture(st, NULL);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < c.n_embd; i++)
                    want[((size_t)b * T + t) * c.n_embd + i] =
                        m->w.wte[(size_t)ids[b * T + t] * c.n_embd + i] +
                        m->w.wpe[(size_t)t * c.n_embd + i];
        attn_gpt_dropout(99, 5, 0, c.embd_pdrop, (size_t)B * T * c.n_embd, want);
        assert_memory_equal(hid, want, (size_t)B * T * c.n_embd * sizeof(float));
        free(hid);
        free(want);
    }
    /* Training with attn_pdrop > 0 is refused (the fused kernel has no attention dropout). */
    m->cfg.attn_pdrop = 0.1f;
    tu_expect_fail(attn_gpt_forward(m, st, B, T, ids, NULL), ATTN_STATUS_UNSUPPORTED, "attn_pdrop",
                   NULL);
    attn_gpt_set_train(st, false, 0, 0);
    assert_int_equal(attn_gpt_forward(m, st, B, T, ids, NULL), ATTN_STATUS_OK);
    m->cfg.attn_pdrop = 0.0f;
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
}

/* ---- initialization ----------------------------------------------------------------------------
 */

static void test_init(void **state) {
    (void)state;
    attn_gpt_config c = attn_gpt_default_config();
    c.vocab_size = 300, c.n_positions = 64, c.n_embd = 96, c.n_layer = 4, c.n_head = 4;
    attn_gpt_model *a, *b;
    assert_int_equal(attn_gpt_model_init(&c, 1, &a), ATTN_STATUS_OK);
    attn_set_num_threads(1);
    assert_int_equal(attn_gpt_model_init(&c, 1, &b), ATTN_STATUS_OK);
    attn_set_num_threads(0);
    assert_int_equal(a->num_params, attn_gpt_num_params(&c));
    assert_memory_equal(a->params, b->params, a->num_params * sizeof(float)); /* any threads */
    attn_gpt_init_params(b, 2);
    assert_true(memcmp(a->params, b->params, a->num_params * sizeof(float)) != 0);
    /* Standard deviations: 0.02, c_proj 0.02 / sqrt(2 n_layer); biases 0; LN weights 1. */
    for (int i = 0; i < a->n_tensors; i++) {
        const attn_gpt_tensor *t = &a->tensors[i];
        const float *x = a->params + t->offset;
        double s = 0, s2 = 0;
        for (size_t k = 0; k < t->numel; k++) s += x[k], s2 += (double)x[k] * x[k];
        double mean = s / t->numel, sd = sqrt(s2 / t->numel - mean * mean);
        if (t->ndim == 1) {
            double want = strstr(t->name, "ln_") && strstr(t->name, ".weight") ? 1.0 : 0.0;
            for (size_t k = 0; k < t->numel; k++) assert_true(x[k] == want);
            continue;
        }
        double want = strstr(t->name, "c_proj.weight") ? 0.02 / sqrt(8.0) : 0.02;
        if (fabs(sd - want) > 0.1 * want || fabs(mean) > 0.1 * want) {
            printf("  %s: mean %.4g sd %.4g, expected sd %.4g\n", t->name, mean, sd, want);
            fail();
        }
        assert_true(t->decay);
    }
    assert_string_equal(a->tensors[0].name, "transformer.wte.weight");
    assert_ptr_equal(a->w.lm_head, a->w.wte); /* tied */
    assert_non_null(attn_gpt_find_tensor(a, "h.3.mlp.c_fc.weight"));
    assert_null(attn_gpt_find_tensor(a, "lm_head.weight"));
    attn_gpt_model_free(a);
    attn_gpt_model_free(b);
}

/* ---- save / load -------------------------------------------------------------------------- */

static bool same_params(const attn_gpt_model *a, const attn_gpt_model *b) {
    return a->num_params == b->num_params &&
           memcmp(a->params, b->params, a->num_params * sizeof(float)) == 0 &&
           memcmp(&a->cfg, &b->cfg, sizeof a->cfg) == 0;
}

/* transformers loads a directory attn wrote and gives the same logits (the test is skipped
 * without the project venv). */
static void check_hf_loads(const char *dir, const attn_gpt_model *m) {
    const char *b = getenv("ATTN_BUILD");
    char py[4096], cmd[16384], out[4200];
    snprintf(py, sizeof py, "%s/../.venv/bin/python", b && *b ? b : "build");
    if (access(py, X_OK) != 0) tu_skip("no %s (sh tools/install_deps.sh)", py);
    snprintf(out, sizeof out, "%s/hf_logits.npy", dir);
    snprintf(cmd, sizeof cmd, "'%s' tools/check_gpt_hf.py '%s' 3,1,4,1,5,9,2,6 '%s'", py, dir, out);
    if (access("tools/check_gpt_hf.py", R_OK) != 0)
        tu_skip("tools/check_gpt_hf.py not found (run from the repository root)");
    int rc = system(cmd);
    assert_int_equal(rc, 0);
    int64_t sh[ATTN_MAX_DIMS];
    float *hf = load_npy(out, 2, sh);
    int32_t ids[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    attn_gpt_state *st;
    assert_int_equal(attn_gpt_state_init(m, 1, 8, &st), ATTN_STATUS_OK);
    float *lg = malloc((size_t)8 * m->cfg.vocab_size * sizeof(float));
    assert_int_equal(attn_gpt_forward(m, st, 1, 8, ids, lg), ATTN_STATUS_OK);
    assert_true(sh[0] == 8 && sh[1] == m->cfg.vocab_size);
    tu_close("transformers on attn's save_dir: logits", lg, hf, (size_t)8 * m->cfg.vocab_size,
             RTOL_LOGITS, 0);
    free(lg);
    attn_free(hf);
    attn_gpt_state_free(st);
}

/* A fresh model with an untied head, n_inner, erf GELU and non-default flags. */
static attn_gpt_model *fresh_untied_model(void) {
    attn_gpt_config c = attn_gpt_default_config();
    c.vocab_size = 61, c.n_positions = 16, c.n_embd = 24, c.n_layer = 2, c.n_head = 3;
    c.n_inner = 40, c.activation = ATTN_ACT_GELU_ERF, c.tie_word_embeddings = false;
    c.scale_attn_by_inverse_layer_idx = true, c.layer_norm_epsilon = 1e-6f;
    c.resid_pdrop = 0.0f, c.bos_token_id = 1, c.eos_token_id = -1;
    c.initializer_range = 0.2f;
    attn_gpt_model *m;
    assert_int_equal(attn_gpt_model_init(&c, 3, &m), ATTN_STATUS_OK);
    return m;
}

static void test_save_load(void **state) {
    (void)state;
    attn_gpt_model *m = fresh_untied_model(), *back;
    const char *dir = tu_tmp("saved");
    char d1[1024];
    snprintf(d1, sizeof d1, "%s", dir);
    if (attn_gpt_save_dir(m, d1)) fail_msg("%s", attn_last_error());
    if (attn_gpt_load_dir(d1, &back)) fail_msg("%s", attn_last_error());
    assert_true(same_params(m, back));
    assert_non_null(attn_gpt_find_tensor(back, "lm_head.weight"));
    attn_gpt_model_free(back);
    attn_gpt_model_free(m);

    /* A transformers directory (float16, no prefix) saved by attn and read back: bit-exact. */
    for (int i = 0; i < NMODELS; i++) {
        m = load_model(MODELS[i]);
        char d2[1024];
        snprintf(d2, sizeof d2, "%s", tu_tmp(MODELS[i]));
        if (attn_gpt_save_dir(m, d2)) fail_msg("%s", attn_last_error());
        if (attn_gpt_load_dir(d2, &back)) fail_msg("%s", attn_last_error());
        assert_true(same_params(m, back));
        attn_gpt_model_free(back);
        attn_gpt_model_free(m);
    }
}

/* transformers reads what attn_gpt_save_dir wrote (the fresh untied model above). */
static void test_save_load_transformers(void **state) {
    (void)state;
    attn_gpt_model *m = fresh_untied_model(), *back;
    char d1[1024];
    snprintf(d1, sizeof d1, "%s", tu_tmp("saved_hf"));
    if (attn_gpt_save_dir(m, d1)) fail_msg("%s", attn_last_error());
    if (attn_gpt_load_dir(d1, &back)) fail_msg("%s", attn_last_error());
    check_hf_loads(d1, back);
    attn_gpt_model_free(back);
    attn_gpt_model_free(m);
}

/* ---- configuration ------------------------------------------------------------------------- */

static void test_config(void **state) {
    (void)state;
    attn_gpt_config c;
    /* An HF config with many unrelated fields. */
    assert_int_equal(
        attn_gpt_config_parse(
            "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"], "
            "\"n_ctx\": 1024, \"task_specific_params\": {\"text-generation\": {\"do_sample\": "
            "true}}, \"_name_or_path\": \"gpt2\", \"summary_type\": \"cls_index\", "
            "\"n_inner\": null, \"vocab_size\": 1000, \"n_embd\": 64, \"n_head\": 4, "
            "\"n_layer\": 2, \"activation_function\": \"gelu_pytorch_tanh\", "
            "\"bos_token_id\": null, \"eos_token_id\": [7, 8], \"layer_norm_epsilon\": 1e-06}",
            "<t>", &c),
        ATTN_STATUS_OK);
    assert_int_equal(c.vocab_size, 1000);
    assert_int_equal(c.n_positions, 1024); /* default */
    assert_int_equal(attn_gpt_inner(&c), 256);
    assert_int_equal(c.activation, ATTN_ACT_GELU_TANH);
    assert_int_equal(c.bos_token_id, -1);
    assert_int_equal(c.eos_token_id, 7);
    assert_true(c.tie_word_embeddings);
    assert_true(fabsf(c.layer_norm_epsilon - 1e-6f) < 1e-12f);
    /* Defaults are GPT2Config's. */
    attn_gpt_config d = attn_gpt_default_config();
    assert_int_equal(attn_gpt_config_parse("{}", "<t>", &c), ATTN_STATUS_OK);
    assert_memory_equal(&c, &d, sizeof c);
    assert_int_equal(attn_gpt_num_params(&d), 124439808); /* GPT-2 124M */
    /* Save and reload: the same configuration. */
    d.n_inner = 100, d.activation = ATTN_ACT_RELU, d.resid_pdrop = 0.25f, d.eos_token_id = -1;
    d.reorder_and_upcast_attn = true;
    const char *p = tu_tmp("config.json");
    assert_int_equal(attn_gpt_config_save(p, &d), ATTN_STATUS_OK);
    assert_int_equal(attn_gpt_config_load(p, &c), ATTN_STATUS_OK);
    assert_memory_equal(&c, &d, sizeof c);

    /* Errors name the field. */
    tu_expect_fail(attn_gpt_config_parse("{\"model_type\": \"bert\"}", "<t>", &c),
                   ATTN_STATUS_UNSUPPORTED, "bert", "gpt2");
    tu_expect_fail(attn_gpt_config_parse("{\"n_embd\": 100, \"n_head\": 3}", "<t>", &c),
                   ATTN_STATUS_INVALID_ARGUMENT, "n_head", "n_embd");
    tu_expect_fail(attn_gpt_config_parse("{\"vocab_size\": 2000000000}", "<t>", &c),
                   ATTN_STATUS_TOO_LARGE, "vocab_size", NULL);
    tu_expect_fail(attn_gpt_config_parse("{\"n_layer\": 100000}", "<t>", &c), ATTN_STATUS_TOO_LARGE,
                   "n_layer", NULL);
    tu_expect_fail(
        attn_gpt_config_parse("{\"n_embd\": 65536, \"n_head\": 1, \"n_layer\": 1024}", "<t>", &c),
        ATTN_STATUS_TOO_LARGE, "parameters", NULL);
    tu_expect_fail(attn_gpt_config_parse("{\"n_layer\": 0}", "<t>", &c),
                   ATTN_STATUS_INVALID_ARGUMENT, "n_layer", NULL);
    tu_expect_fail(attn_gpt_config_parse("{\"n_embd\": \"768\"}", "<t>", &c), ATTN_STATUS_FORMAT,
                   "n_embd", NULL);
    tu_expect_fail(attn_gpt_config_parse("{\"resid_pdrop\": 1.5}", "<t>", &c),
                   ATTN_STATUS_INVALID_ARGUMENT, "resid_pdrop", NULL);
    tu_expect_fail(attn_gpt_config_parse("{\"activation_function\": \"swish\"}", "<t>", &c),
                   ATTN_STATUS_UNSUPPORTED, "swish", NULL);
    tu_expect_fail(attn_gpt_config_parse("{\"add_cross_attention\": true}", "<t>", &c),
                   ATTN_STATUS_UNSUPPORTED, "add_cross_attention", NULL);
    tu_expect_fail(attn_gpt_config_parse("[1, 2]", "<t>", &c), ATTN_STATUS_FORMAT, "object", NULL);
    tu_expect_fail(attn_gpt_config_parse("{\"n_layer\": ", "<t>", &c), ATTN_STATUS_FORMAT,
                   "invalid JSON", NULL);
    tu_expect_fail(attn_gpt_config_load(tu_tmp("nope.json"), &c), ATTN_STATUS_IO, "nope.json",
                   NULL);
}

/* ---- bad inputs --------------------------------------------------------------------------- */

/* Write DIR/config.json (cfg) and DIR/model.safetensors from m's tensors, with tensor `skip`
 * left out, tensor `reshape` given a wrong shape and an extra tensor when extra. */
static void write_variant(const char *dir, const attn_gpt_model *m, const char *skip,
                          const char *reshape, const char *extra) {
    mkdir(dir, 0777);
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    assert_int_equal(attn_gpt_config_save(p, &m->cfg), ATTN_STATUS_OK);
    attn_st_entry e[64];
    int n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        if (skip && !strcmp(t->name, skip)) continue;
        e[n].name = t->name;
        e[n].dtype = ATTN_DTYPE_F32;
        e[n].ndim = t->ndim;
        e[n].shape[0] = t->shape[0];
        e[n].shape[1] = t->shape[1];
        if (reshape && !strcmp(t->name, reshape) && t->ndim == 2) {
            e[n].shape[0] = t->shape[1];
            e[n].shape[1] = t->shape[0];
        }
        e[n].data = m->params + t->offset;
        n++;
    }
    if (extra) {
        e[n] = e[n - 1];
        e[n].name = extra;
        n++;
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    assert_int_equal(attn_st_save(p, e, n, NULL), ATTN_STATUS_OK);
}

static void test_bad_inputs(void **state) {
    (void)state;
    attn_gpt_model *m = load_model("tiny"), *x = NULL;
    char d[1024];
    snprintf(d, sizeof d, "%s", tu_tmp("bad"));

    write_variant(d, m, "transformer.h.1.mlp.c_fc.bias", NULL, NULL);
    tu_expect_fail3(attn_gpt_load_dir(d, &x), ATTN_STATUS_FORMAT, "model.safetensors",
                    "transformer.h.1.mlp.c_fc.bias", "(256)");
    assert_null(x);
    write_variant(d, m, NULL, "transformer.h.0.attn.c_attn.weight", NULL);
    tu_expect_fail3(attn_gpt_load_dir(d, &x), ATTN_STATUS_FORMAT, "model.safetensors",
                    "transformer.h.0.attn.c_attn.weight", "(64, 192)");
    write_variant(d, m, NULL, NULL, "transformer.h.2.ln_1.weight");
    tu_expect_fail(attn_gpt_load_dir(d, &x), ATTN_STATUS_FORMAT, "transformer.h.2.ln_1.weight",
                   "not in the model");
    /* The old causal-mask buffers are ignored. */
    write_variant(d, m, NULL, NULL, "transformer.h.0.attn.masked_bias");
    assert_int_equal(attn_gpt_load_dir(d, &x), ATTN_STATUS_OK);
    attn_gpt_model_free(x);

    /* A truncated weight file. */
    char p[4096], q[4096];
    write_variant(d, m, NULL, NULL, NULL);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    size_t n;
    char *all = tu_read_all(p, &n);
    tu_write_all(p, all, n - 100);
    free(all);
    tu_expect_fail(attn_gpt_load_dir(d, &x), ATTN_STATUS_FORMAT, "model.safetensors", NULL);
    /* Only pytorch_model.bin. */
    remove(p);
    snprintf(q, sizeof q, "%s/pytorch_model.bin", d);
    tu_write_all(q, "PK", 2);
    tu_expect_fail(attn_gpt_load_dir(d, &x), ATTN_STATUS_UNSUPPORTED, "safe_serialization", NULL);
    remove(q);
    tu_expect_fail(attn_gpt_load_dir(d, &x), ATTN_STATUS_IO, "model.safetensors", NULL);
    /* Absurd sizes in config.json are refused before allocating. */
    snprintf(p, sizeof p, "%s/config.json", d);
    const char *absurd = "{\"model_type\": \"gpt2\", \"vocab_size\": 2147483647}";
    tu_write_all(p, absurd, strlen(absurd));
    tu_expect_fail(attn_gpt_load_dir(d, &x), ATTN_STATUS_TOO_LARGE, "vocab_size", "config.json");
    const char *nhead = "{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_head\": 5}";
    tu_write_all(p, nhead, strlen(nhead));
    tu_expect_fail(attn_gpt_load_dir(d, &x), ATTN_STATUS_INVALID_ARGUMENT, "n_head", "config.json");

    /* Ids out of range, sizes out of capacity. */
    attn_gpt_state *st;
    assert_int_equal(attn_gpt_state_init(m, 1, 4, &st), ATTN_STATUS_OK);
    int32_t ids[5] = {1, 2, 97, 3, 4};
    tu_expect_fail(attn_gpt_forward(m, st, 1, 4, ids, NULL), ATTN_STATUS_INVALID_ARGUMENT, "97",
                   "position 2");
    ids[2] = -5;
    tu_expect_fail(attn_gpt_forward(m, st, 1, 4, ids, NULL), ATTN_STATUS_INVALID_ARGUMENT, "-5",
                   NULL);
    ids[2] = 5;
    tu_expect_fail(attn_gpt_forward(m, st, 1, 5, ids, NULL), ATTN_STATUS_INVALID_ARGUMENT,
                   "capacity", NULL);
    float loss;
    int32_t tg[4] = {1, 2, 3, 4};
    tu_expect_fail(attn_gpt_loss(m, st, tg, 1.0f, &loss), ATTN_STATUS_INVALID_ARGUMENT, "forward",
                   NULL);
    assert_int_equal(attn_gpt_forward(m, st, 1, 4, ids, NULL), ATTN_STATUS_OK);
    tg[1] = 97;
    assert_int_equal(attn_gpt_loss(m, st, tg, 1.0f, &loss), ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(attn_gpt_forward(m, st, 1, 4, ids, NULL), ATTN_STATUS_OK);
    tg[1] = 2;
    assert_int_equal(attn_gpt_loss(m, st, tg, 1.0f, &loss), ATTN_STATUS_OK);
    tu_expect_fail(attn_gpt_backward(m, st), ATTN_STATUS_INVALID_ARGUMENT, "attn_gpt_alloc_grads",
                   NULL);
    attn_gpt_state_free(st);
    tu_expect_fail(attn_gpt_state_init(m, 1, 33, &st), ATTN_STATUS_INVALID_ARGUMENT, "n_positions",
                   NULL);
    assert_null(st);
    attn_gpt_kv *kv;
    tu_expect_fail(attn_gpt_kv_init(m, 1, 33, &kv), ATTN_STATUS_INVALID_ARGUMENT, "n_positions",
                   NULL);
    assert_int_equal(attn_gpt_kv_init(m, 1, 8, &kv), ATTN_STATUS_OK);
    ids[2] = 97;
    tu_expect_fail(attn_gpt_decode(m, kv, 1, 3, ids, NULL, false), ATTN_STATUS_INVALID_ARGUMENT,
                   "97", NULL);
    assert_int_equal(attn_gpt_kv_len(kv), 0);
    tu_expect_fail(attn_gpt_decode(m, kv, 2, 1, ids, NULL, false), ATTN_STATUS_INVALID_ARGUMENT,
                   "B = 2", NULL);
    attn_gpt_kv_free(kv);
    attn_gpt_model_free(m);
}

/* A prompt longer than the decoder's chunk (512 positions per pass) runs in several passes:
 * every logit and hidden state still equals the full forward's. */
static void test_decode_chunks(void **state) {
    (void)state;
    attn_gpt_config c = attn_gpt_default_config();
    c.vocab_size = 37, c.n_positions = 700, c.n_embd = 16, c.n_layer = 2, c.n_head = 2;
    c.initializer_range = 0.3f;
    attn_gpt_model *m;
    assert_int_equal(attn_gpt_model_init(&c, 11, &m), ATTN_STATUS_OK);
    const int B = 2, T = 650, V = 37, C = 16, L = 2;
    int32_t *ids = malloc((size_t)B * T * sizeof *ids);
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)((i * 7919u) % 37u);
    float *lf = malloc((size_t)B * T * V * sizeof(float)),
          *ld = malloc((size_t)B * T * V * sizeof(float));
    float *hf = malloc((size_t)(L + 1) * B * T * C * sizeof(float));
    float *hd = malloc((size_t)(L + 1) * B * T * C * sizeof(float));
    attn_gpt_state *st;
    assert_int_equal(attn_gpt_state_init(m, B, T, &st), ATTN_STATUS_OK);
    attn_gpt_capture cf = {hf, NULL}, cd = {hd, NULL};
    attn_gpt_set_capture(st, &cf);
    assert_int_equal(attn_gpt_forward(m, st, B, T, ids, lf), ATTN_STATUS_OK);
    attn_gpt_kv *kv;
    assert_int_equal(attn_gpt_kv_init(m, B, T, &kv), ATTN_STATUS_OK);
    attn_gpt_kv_set_capture(kv, &cd);
    assert_int_equal(attn_gpt_decode(m, kv, B, T, ids, ld, true), ATTN_STATUS_OK);
    tu_close("650-position prompt in chunks: logits", ld, lf, (size_t)B * T * V, RTOL_KV, 0);
    tu_close("650-position prompt in chunks: hidden", hd, hf, (size_t)(L + 1) * B * T * C, RTOL_KV,
             0);
    /* Last-position logits only. */
    attn_gpt_kv_reset(kv);
    attn_gpt_kv_set_capture(kv, NULL);
    assert_int_equal(attn_gpt_decode(m, kv, B, T, ids, ld, false), ATTN_STATUS_OK);
    for (int b = 0; b < B; b++)
        tu_close("650-position prompt: last logits", ld + (size_t)b * V,
                 lf + ((size_t)b * T + T - 1) * V, V, RTOL_KV, 0);
    /* Packed weights (attn_gpt_pack_weights): the same logits bit for bit, for the chunked prompt
     * (on the panels) and a single-token step after it (streaming, as unpacked). */
    float *lp = malloc((size_t)2 * B * V * sizeof(float));
    const int32_t next[2] = {5, 9};
    attn_gpt_kv_reset(kv);
    assert_int_equal(attn_gpt_decode(m, kv, B, T - 1, ids, ld, false), ATTN_STATUS_OK);
    assert_int_equal(attn_gpt_decode(m, kv, B, 1, next, ld + (size_t)B * V, false), ATTN_STATUS_OK);
    assert_int_equal(attn_gpt_pack_weights(m), ATTN_STATUS_OK);
    attn_gpt_kv_reset(kv);
    assert_int_equal(attn_gpt_decode(m, kv, B, T - 1, ids, lp, false), ATTN_STATUS_OK);
    assert_int_equal(attn_gpt_decode(m, kv, B, 1, next, lp + (size_t)B * V, false), ATTN_STATUS_OK);
    assert_memory_equal(lp, ld, (size_t)2 * B * V * sizeof(float));
    free(lp);
    free(ids);
    free(lf);
    free(ld);
    free(hf);
    free(hd);
    attn_gpt_kv_free(kv);
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
}

/* ---- attention probabilities capture ----------------------------------------------------- */

static void test_capture_probs(void **state) {
    (void)state;
    attn_gpt_model *m = load_model("odd");
    const int T = 6, H = m->cfg.n_head, L = m->cfg.n_layer;
    int32_t ids[6] = {5, 9, 1, 100, 42, 7};
    float *pf[3], *pd[3];
    for (int l = 0; l < L; l++) {
        pf[l] = malloc((size_t)H * T * T * sizeof(float));
        pd[l] = malloc((size_t)H * T * T * sizeof(float));
    }
    attn_gpt_state *st;
    assert_int_equal(attn_gpt_state_init(m, 1, T, &st), ATTN_STATUS_OK);
    attn_gpt_capture cap = {NULL, pf};
    attn_gpt_set_capture(st, &cap);
    assert_int_equal(attn_gpt_forward(m, st, 1, T, ids, NULL), ATTN_STATUS_OK);
    /* Through the cache in two calls (3 + 3 positions): the same probabilities. */
    attn_gpt_kv *kv;
    assert_int_equal(attn_gpt_kv_init(m, 1, T, &kv), ATTN_STATUS_OK);
    float *part[3];
    for (int l = 0; l < L; l++) part[l] = malloc((size_t)H * 3 * T * sizeof(float));
    attn_gpt_capture c1 = {NULL, part};
    attn_gpt_kv_set_capture(kv, &c1);
    assert_int_equal(attn_gpt_decode(m, kv, 1, 3, ids, NULL, false), ATTN_STATUS_OK);
    for (int l = 0; l < L; l++) /* (H, 3, 3) -> rows 0..2 of (H, T, T) */
        for (int h = 0; h < H; h++)
            for (int t = 0; t < 3; t++)
                for (int k = 0; k < T; k++)
                    pd[l][((size_t)h * T + t) * T + k] =
                        k < 3 ? part[l][((size_t)h * 3 + t) * 3 + k] : 0;
    assert_int_equal(attn_gpt_decode(m, kv, 1, 3, ids + 3, NULL, false), ATTN_STATUS_OK);
    for (int l = 0; l < L; l++) /* (H, 3, 6) -> rows 3..5 */
        for (int h = 0; h < H; h++)
            for (int t = 0; t < 3; t++)
                memcpy(&pd[l][((size_t)h * T + 3 + t) * T], &part[l][((size_t)h * 3 + t) * T],
                       T * sizeof(float));
    for (int l = 0; l < L; l++) {
        /* Rows sum to 1, the future is 0. */
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                double s = 0;
                for (int k = 0; k < T; k++) {
                    float v = pf[l][((size_t)h * T + t) * T + k];
                    s += v;
                    if (k > t) assert_true(v == 0.0f);
                }
                assert_true(fabs(s - 1) < 1e-5);
            }
        tu_close("attention probabilities: decode vs forward", pd[l], pf[l], (size_t)H * T * T,
                 1e-5, 0);
        free(pf[l]);
        free(pd[l]);
        free(part[l]);
    }
    attn_gpt_kv_free(kv);
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
}

/* ---- attn forward ------------------------------------------------------------------------- */

static int run_cli(const char *args, char *out, size_t cap) {
    const char *b = getenv("ATTN_BUILD");
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s/attn' %s 2>&1", b && *b ? b : "build", args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char cli_buf[1 << 16];

static void expect_cli_error(const char *args, int want_rc, const char *sub) {
    int rc = run_cli(args, cli_buf, sizeof cli_buf);
    if (!tu_quiet()) printf("  attn %s -> %d: %s", args, rc, cli_buf);
    assert_int_equal(rc, want_rc);
    assert_non_null(strstr(cli_buf, "attn: error: "));
    if (sub && !strstr(cli_buf, sub)) fail_msg("output lacks \"%s\": %s", sub, cli_buf);
    char *nl = strchr(cli_buf, '\n');
    assert_true(nl && nl[1] == '\0'); /* one line */
}

static void test_cli_forward(void **state) {
    (void)state;
    const char *name = "odd";
    json_t *ref = load_ref(name);
    int B, T;
    int32_t *ids = ids_2d(json_object_get(ref, "ids"), &B, &T);
    char list[1024] = "", args[8192], out[1024], hid[1024], rh[1024];
    for (int t = 0; t < T; t++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", t ? "," : "",
                 (int)ids[t]);
    snprintf(out, sizeof out, "%s", tu_tmp("logits.npy"));
    snprintf(hid, sizeof hid, "%s", tu_tmp("hidden.npy"));
    snprintf(args, sizeof args, "forward --model '%s' --ids %s --out '%s' --hidden-out '%s'",
             model_dir(name), list, out, hid);
    int rc = run_cli(args, cli_buf, sizeof cli_buf);
    if (rc) fail_msg("attn forward failed (%d): %s", rc, cli_buf);
    int64_t sh[ATTN_MAX_DIMS], rs[ATTN_MAX_DIMS];
    float *got = load_npy(out, 2, sh), *rlog = load_npy(ref_file(name, "logits.npy"), 3, rs);
    const int V = (int)sh[1];
    assert_true(sh[0] == T && rs[2] == V);
    tu_close("attn forward --out vs transformers (sequence 0)", got, rlog, (size_t)T * V,
             RTOL_LOGITS, 0);
    /* The reference hidden states of sequence 0 as (L + 1, T, C) for --compare-hidden. */
    int64_t hs[ATTN_MAX_DIMS];
    float *rhid = load_npy(ref_file(name, "hidden.npy"), 4, hs);
    const size_t per = (size_t)T * hs[3];
    float *r0 = malloc((size_t)hs[0] * per * sizeof(float));
    for (int l = 0; l < hs[0]; l++)
        memcpy(r0 + l * per, rhid + (size_t)l * hs[1] * per, per * sizeof(float));
    int64_t s3[3] = {hs[0], T, hs[3]};
    snprintf(rh, sizeof rh, "%s", tu_tmp("ref_hidden.npy"));
    assert_int_equal(attn_npy_save_f32(rh, r0, 3, s3), ATTN_STATUS_OK);
    float *gh = load_npy(hid, 3, sh);
    tu_close("attn forward --hidden-out vs transformers", gh, r0, (size_t)hs[0] * per, RTOL_HIDDEN,
             0);
    snprintf(args, sizeof args, "forward --model '%s' --ids %s --compare-hidden '%s'",
             model_dir(name), list, rh);
    rc = run_cli(args, cli_buf, sizeof cli_buf);
    printf("%s", cli_buf);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(cli_buf, "every layer within tolerance"));
    /* A perturbed layer 2 is flagged as the first over tolerance, exit 1. */
    r0[2 * per + 5] += 0.5f;
    assert_int_equal(attn_npy_save_f32(rh, r0, 3, s3), ATTN_STATUS_OK);
    rc = run_cli(args, cli_buf, sizeof cli_buf);
    printf("%s", cli_buf);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(cli_buf, "first layer over tolerance: 2"));
    /* The summary without --out. */
    snprintf(args, sizeof args, "forward --model '%s' --ids 3,200,17", model_dir("tiny"));
    rc = run_cli(args, cli_buf, sizeof cli_buf);
    assert_int_equal(rc, 1); /* 200 is outside vocab 97 */
    snprintf(args, sizeof args, "forward --model '%s' --ids 3,20,17", model_dir("tiny"));
    rc = run_cli(args, cli_buf, sizeof cli_buf);
    printf("%s", cli_buf);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(cli_buf, "logits: (3, 97)"));
    assert_non_null(strstr(cli_buf, "argmax"));

    /* Errors: one line each. */
    char a[8192];
    snprintf(a, sizeof a, "forward --model '%s' --ids 3,200,17", model_dir("tiny"));
    expect_cli_error(a, 1, "vocabulary");
    snprintf(a, sizeof a, "forward --model '%s' --ids 3,x,17", model_dir("tiny"));
    expect_cli_error(a, 2, "not a decimal number");
    snprintf(a, sizeof a, "forward --model '%s' --ids 3,-1", model_dir("tiny"));
    expect_cli_error(a, 2, "negative");
    snprintf(a, sizeof a, "forward --model '%s' --ids ''", model_dir("tiny"));
    expect_cli_error(a, 2, "empty");
    snprintf(a, sizeof a, "forward --model '%s' --ids 1,,2", model_dir("tiny"));
    expect_cli_error(a, 2, "empty entry");
    char many[200] = "";
    for (int i = 0; i < 33; i++) strcat(many, i ? ",1" : "1");
    snprintf(a, sizeof a, "forward --model '%s' --ids %s", model_dir("tiny"), many);
    expect_cli_error(a, 1, "n_positions 32");
    expect_cli_error("forward --ids 1,2", 2, "--model");
    snprintf(a, sizeof a, "forward --model '%s'", model_dir("tiny"));
    expect_cli_error(a, 2, "--ids");
    expect_cli_error("forward --model /nonexistent --ids 1", 1, "config.json");
    snprintf(a, sizeof a, "forward --model '%s' --ids 1 --bogus 2", model_dir("tiny"));
    expect_cli_error(a, 2, "--bogus");
    /* Another model type: unsupported, named. */
    char bdir[1024], cfgp[1100];
    snprintf(bdir, sizeof bdir, "%s", tu_tmp("bertish"));
    mkdir(bdir, 0777);
    snprintf(cfgp, sizeof cfgp, "%s/config.json", bdir);
    tu_write_all(cfgp, "{\"model_type\": \"llama\"}", 23);
    snprintf(a, sizeof a, "forward --model '%s' --ids 1", bdir);
    expect_cli_error(a, 1, "llama");
    snprintf(a, sizeof a, "forward --model '%s' --ids 1,2 --compare-hidden '%s'", model_dir(name),
             rh);
    expect_cli_error(a, 1, "expected (4, 2, 48)");

    free(r0);
    attn_free(rhid);
    attn_free(got);
    attn_free(rlog);
    attn_free(gh);
    free(ids);
    json_decref(ref);
}

static int setup(void **state) {
    (void)state;
    return tu_mkdtemp(tu_dir, sizeof tu_dir, "gpt");
}

static int teardown(void **state) {
    (void)state;
    tu_rm_tree(tu_dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),        cmocka_unit_test(test_init),
        cmocka_unit_test(test_hf_forward),    cmocka_unit_test(test_hf_forward_ref_backend),
        cmocka_unit_test(test_hf_gradients),  cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_decode_chunks), cmocka_unit_test(test_capture_probs),
        cmocka_unit_test(test_save_load),     cmocka_unit_test(test_save_load_transformers),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_cli_forward),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

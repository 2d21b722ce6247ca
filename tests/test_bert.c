/* test_bert.c — the BERT model (include/attn_bert.h) against transformers (tools/ref_bert.py,
 * float64 references) and the real all-MiniLM-L6-v2 against sentence-transformers 2.7.0.
 *
 * Tolerances (float32 computation against float64 references):
 *   hidden states, every layer's hidden states, pooler output, MLM logits, attention
 *   probabilities: max abs err <= 1e-4 · max|ref| (the bound)
 *   MLM loss: relative 1e-5
 *   gradients: per tensor, max abs err <= 1e-3 · max|ref| + 1e-6 (float32 backward over 2-3
 *   layers; measured worst is printed)
 *   F16/BF16 checkpoints: the same 1e-4 · max|ref| against references made from the rounded
 *   weights
 *   finite differences (float32, central, h = 1e-2 on a tiny model with dropout on):
 *   |analytic − numeric| <= 2e-3 + 2e-2 · |numeric|
 *   batch independence: max abs difference <= 1e-6 · max|h| (equal up to float rounding)
 *   MiniLM: hidden states 1e-4 · max|ref|; sentence embeddings cosine >= 0.99999 to
 *   sentence-transformers' and max abs err <= 1e-5 (printed). */
#include "tu.h"

#include "attn_bert.h"
#include "attn_io.h"

#include <math.h>

#define ATTN_TEST_GRAD_RTOL 1e-3

/* ---- reference files ---- */

typedef struct {
    attn_st_file *f;
    char path[4200];
} ref_file;

static int ref_open(ref_file *r, const char *name) {
    snprintf(r->path, sizeof r->path, "%s", tu_ref_path(name));
    if (access(r->path, R_OK) != 0) {
        fail_msg("%s is missing: run '.venv/bin/python tools/ref_bert.py DIR' with ATTN_REF_DIR=DIR",
                 r->path);
        return 0;
    }
    if (attn_st_open(r->path, &r->f)) fail_msg("%s: %s", r->path, attn_last_error());
    return 1;
}

static float *ref_f32(ref_file *r, const char *key) {
    float *d = NULL;
    if (attn_st_load_f32(r->f, key, &d, NULL)) fail_msg("%s: %s", r->path, attn_last_error());
    return d;
}

static int32_t *ref_i32(ref_file *r, const char *key) {
    int32_t *d = NULL;
    if (attn_st_load_i32(r->f, key, &d, NULL)) fail_msg("%s: %s", r->path, attn_last_error());
    return d;
}

static const attn_st_tensor *ref_has(ref_file *r, const char *key) { return attn_st_find(r->f, key); }

static const char *model_dir(const char *name) {
    static char buf[4300];
    snprintf(buf, sizeof buf, "%s", tu_ref_path("bert"));
    size_t n = strlen(buf);
    snprintf(buf + n, sizeof buf - n, "/%s", name);
    return buf;
}

static attn_bert_model *load_case(const char *name) {
    attn_bert_model *m = NULL;
    attn_status s = attn_bert_load_dir(model_dir(name), &m);
    if (s) fail_msg("load %s: %s", name, attn_last_error());
    return m;
}

/* Compare only rows of real tokens (both sides are 0 on padding; checked too). */
static double worst_hidden = 0, worst_logits = 0, worst_grad = 0;

/* max abs err / max|ref| (0 for a reference that is 0 up to rounding, e.g. the key bias's
 * gradient, which is exactly 0 in exact arithmetic: those are checked by the absolute term). */
static double rel_err(const float *got, const float *ref, size_t n) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)got[i] - ref[i]));
        s = fmax(s, fabs((double)ref[i]));
    }
    return s > 1e-6 ? e / s : 0;
}

/* ---- configuration ---- */

static void write_file(const char *path, const char *text) { tu_write_all(path, text, strlen(text)); }

static void test_config(void **state) {
    (void)state;
    attn_bert_config c = attn_bert_default_config();
    assert_int_equal(attn_bert_config_check(&c), ATTN_STATUS_OK);
    assert_int_equal(c.hidden_size, 768);
    assert_int_equal(c.hidden_act, ATTN_ACT_GELU_ERF);
    /* save -> load round trip */
    c = attn_bert_default_config();
    c.vocab_size = 101, c.hidden_size = 48, c.num_attention_heads = 3, c.intermediate_size = 100;
    c.hidden_act = ATTN_ACT_GELU_TANH, c.pad_token_id = -1, c.hidden_dropout_prob = 0.25f;
    c.layer_norm_eps = 1e-5f, c.tie_word_embeddings = false, c.type_vocab_size = 3;
    assert_int_equal(attn_bert_config_save(tu_tmp("cfg.json"), &c, "BertModel"), 0);
    attn_bert_config d;
    assert_int_equal(attn_bert_config_load(tu_tmp("cfg.json"), &d), 0);
    assert_memory_equal(&c, &d, sizeof c);

    struct {
        const char *json;
        attn_status want;
        const char *s1, *s2;
    } bad[] = {
        {"{\"vocab_size\": 2000000000}", ATTN_STATUS_TOO_LARGE, "vocab_size", "cfg_bad.json"},
        {"{\"num_hidden_layers\": 100000}", ATTN_STATUS_TOO_LARGE, "num_hidden_layers", NULL},
        {"{\"hidden_size\": 99999999999}", ATTN_STATUS_TOO_LARGE, "hidden_size", NULL},
        {"{\"intermediate_size\": 1000000, \"hidden_size\": 65536, \"num_hidden_layers\": 4000, "
         "\"num_attention_heads\": 16}",
         ATTN_STATUS_TOO_LARGE, "parameters", NULL},
        {"{\"hidden_size\": 100, \"num_attention_heads\": 3}", ATTN_STATUS_INVALID_ARGUMENT,
         "num_attention_heads (3) must divide hidden_size (100)", NULL},
        {"{\"hidden_size\": 0}", ATTN_STATUS_INVALID_ARGUMENT, "hidden_size must be > 0", NULL},
        {"{\"hidden_size\": \"big\"}", ATTN_STATUS_FORMAT, "hidden_size", "integer"},
        {"{\"hidden_act\": \"swish\"}", ATTN_STATUS_UNSUPPORTED, "hidden_act", "swish"},
        {"{\"position_embedding_type\": \"relative_key\"}", ATTN_STATUS_UNSUPPORTED,
         "position_embedding_type", "relative_key"},
        {"{\"model_type\": \"roberta\"}", ATTN_STATUS_UNSUPPORTED, "model_type", "roberta"},
        {"{\"is_decoder\": true}", ATTN_STATUS_UNSUPPORTED, "is_decoder", NULL},
        {"{\"hidden_dropout_prob\": 1.5}", ATTN_STATUS_INVALID_ARGUMENT, "hidden_dropout_prob",
         NULL},
        {"{\"pad_token_id\": 500, \"vocab_size\": 100}", ATTN_STATUS_INVALID_ARGUMENT,
         "pad_token_id", NULL},
        {"[1, 2]", ATTN_STATUS_FORMAT, "JSON object", NULL},
        {"{\"vocab_size\": ", ATTN_STATUS_FORMAT, "invalid JSON", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(tu_tmp("cfg_bad.json"), bad[i].json);
        tu_expect_fail(attn_bert_config_load(tu_tmp("cfg_bad.json"), &d), bad[i].want, bad[i].s1,
                       bad[i].s2);
    }
    tu_expect_fail(attn_bert_config_load(tu_tmp("nonexistent.json"), &d), ATTN_STATUS_IO,
                   "nonexistent.json", NULL);
    /* ignored fields */
    write_file(tu_tmp("cfg_ok.json"),
               "{\"architectures\": [\"BertModel\"], \"_name_or_path\": \"x\", \"use_cache\": true, "
               "\"gradient_checkpointing\": false, \"transformers_version\": \"4.8.2\", "
               "\"classifier_dropout\": null, \"torch_dtype\": \"float32\", \"pad_token_id\": null, "
               "\"model_type\": \"bert\", \"position_embedding_type\": \"absolute\"}");
    assert_int_equal(attn_bert_config_load(tu_tmp("cfg_ok.json"), &d), 0);
    assert_int_equal(d.pad_token_id, -1);
}

/* the real MiniLM config: ignores _name_or_path, architectures, gradient_checkpointing,
 * transformers_version, use_cache */
static void test_config_minilm(void **state) {
    (void)state;
    if (access("models/all-MiniLM-L6-v2/config.json", R_OK) != 0)
        tu_skip("models/all-MiniLM-L6-v2/config.json absent (sh tools/get_minilm.sh)");
    attn_bert_config c;
    assert_int_equal(attn_bert_config_load("models/all-MiniLM-L6-v2/config.json", &c), 0);
    assert_int_equal(c.hidden_size, 384);
    assert_int_equal(c.num_attention_heads, 12);
    assert_int_equal(c.num_hidden_layers, 6);
    assert_int_equal(c.intermediate_size, 1536);
    assert_true(c.layer_norm_eps == 1e-12f);
}

/* ---- forward against transformers ---- */

typedef struct {
    const char *name;
    bool pooler, mlm;
} case_info;

static const case_info CASES[] = {
    {"tiny", false, true}, {"odd", true, true}, {"relu", false, false}, {"pool", true, false}};

static void check_forward(const char *name, attn_bert_model *m, const char *ref_name) {
    ref_file r;
    if (!ref_open(&r, ref_name)) return;
    const attn_bert_config *c = &m->cfg;
    const attn_st_tensor *ti = ref_has(&r, "ids");
    const int B = (int)ti->shape[0], T = (int)ti->shape[1], C = c->hidden_size;
    const int L = c->num_hidden_layers, H = c->num_attention_heads, V = c->vocab_size;
    int32_t *ids = ref_i32(&r, "ids"), *types = ref_i32(&r, "types"), *len = ref_i32(&r, "lengths");
    attn_bert_state *st;
    assert_int_equal(attn_bert_state_init(m, B, T, &st), 0);
    float *hidden = attn_alloc((size_t)B * T * C * sizeof(float));
    float *hs[64], *att[64];
    const bool full = ref_has(&r, "hs.0") != NULL;
    for (int i = 0; i <= L; i++) hs[i] = attn_alloc((size_t)B * T * C * sizeof(float));
    for (int i = 0; i < L; i++) att[i] = attn_alloc((size_t)B * H * T * T * sizeof(float));
    attn_bert_capture cap = {hs, att};
    if (full) attn_bert_set_capture(st, &cap);
    assert_int_equal(attn_bert_forward(m, st, B, T, ids, types, len, hidden), 0);
    attn_bert_set_capture(st, NULL);
    char what[160];
    float *ref = ref_f32(&r, "hidden");
    snprintf(what, sizeof what, "%s hidden", name);
    tu_close(what, hidden, ref, (size_t)B * T * C, 1e-4, 0);
    worst_hidden = fmax(worst_hidden, rel_err(hidden, ref, (size_t)B * T * C));
    attn_free(ref);
    if (full) {
        for (int i = 0; i <= L; i++) {
            char key[32];
            snprintf(key, sizeof key, "hs.%d", i);
            ref = ref_f32(&r, key);
            snprintf(what, sizeof what, "%s hidden_states[%d]", name, i);
            tu_close(what, hs[i], ref, (size_t)B * T * C, 1e-4, 0);
            worst_hidden = fmax(worst_hidden, rel_err(hs[i], ref, (size_t)B * T * C));
            attn_free(ref);
        }
        for (int i = 0; i < L; i++) {
            char key[32];
            snprintf(key, sizeof key, "att.%d", i);
            ref = ref_f32(&r, key);
            snprintf(what, sizeof what, "%s attentions[%d]", name, i);
            tu_close(what, att[i], ref, (size_t)B * H * T * T, 1e-4, 0);
            attn_free(ref);
        }
    }
    if (ref_has(&r, "pooled")) {
        assert_true(m->has_pooler);
        float *pooled = attn_alloc((size_t)B * C * sizeof(float));
        assert_int_equal(attn_bert_pooler(m, st, pooled), 0);
        ref = ref_f32(&r, "pooled");
        snprintf(what, sizeof what, "%s pooler_output", name);
        tu_close(what, pooled, ref, (size_t)B * C, 1e-4, 0);
        attn_free(ref);
        attn_free(pooled);
    } else if (full) {
        assert_false(m->has_pooler);
        float dummy[8];
        tu_expect_fail(attn_bert_pooler(m, st, dummy), ATTN_STATUS_INVALID_ARGUMENT, "no pooler",
                       NULL);
    }
    if (ref_has(&r, "logits")) {
        assert_true(m->has_mlm);
        /* every real position, in an order other than the natural one */
        int32_t pos[1024];
        int n = 0;
        for (int b = B - 1; b >= 0; b--)
            for (int t = 0; t < len[b]; t++) pos[n++] = b * T + t;
        float *lg = attn_alloc((size_t)n * V * sizeof(float));
        float *want = attn_alloc((size_t)n * V * sizeof(float));
        ref = ref_f32(&r, "logits");
        for (int i = 0; i < n; i++)
            memcpy(want + (size_t)i * V, ref + (size_t)pos[i] * V, (size_t)V * sizeof(float));
        assert_int_equal(attn_bert_mlm_logits(m, st, n, pos, lg), 0);
        snprintf(what, sizeof what, "%s MLM logits", name);
        tu_close(what, lg, want, (size_t)n * V, 1e-4, 0);
        worst_logits = fmax(worst_logits, rel_err(lg, want, (size_t)n * V));
        attn_free(lg);
        attn_free(want);
        attn_free(ref);
    } else if (full) {
        int32_t p0 = 0;
        float dummy[8];
        tu_expect_fail(attn_bert_mlm_logits(m, st, 1, &p0, dummy), ATTN_STATUS_INVALID_ARGUMENT,
                       "no masked-LM head", NULL);
    }
    for (int i = 0; i <= L; i++) attn_free(hs[i]);
    for (int i = 0; i < L; i++) attn_free(att[i]);
    attn_free(hidden);
    attn_free(ids);
    attn_free(types);
    attn_free(len);
    attn_bert_state_free(st);
    attn_st_close(r.f);
}

static void test_forward(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        attn_bert_model *m = load_case(CASES[k].name);
        assert_int_equal(m->has_pooler, CASES[k].pooler);
        assert_int_equal(m->has_mlm, CASES[k].mlm);
        char rn[64];
        snprintf(rn, sizeof rn, "bert/%s.safetensors", CASES[k].name);
        check_forward(CASES[k].name, m, rn);
        attn_bert_model_free(m);
    }
    /* F16 / BF16 checkpoints (their own references: the rounded weights), and the old naming */
    const char *var[] = {"tiny_f16", "tiny_bf16", "tiny_old"};
    for (int k = 0; k < 3; k++) {
        attn_bert_model *m = load_case(var[k]);
        char rn[64];
        snprintf(rn, sizeof rn, "bert/%s.safetensors", k == 2 ? "tiny" : var[k]);
        check_forward(var[k], m, rn);
        if (k == 2) {
            attn_bert_model *t = load_case("tiny");
            assert_int_equal(t->num_params, m->num_params);
            assert_memory_equal(t->params, m->params, t->num_params * sizeof(float));
            attn_bert_model_free(t);
        }
        attn_bert_model_free(m);
    }
    printf("  worst hidden-state error %.2e, worst MLM-logit error %.2e (x max|ref|; bound 1e-4)\n",
           worst_hidden, worst_logits);
}

/* ---- gradients against transformers ---- */

static void check_grads(const char *name) {
    attn_bert_model *m = load_case(name);
    ref_file r;
    char rn[64];
    snprintf(rn, sizeof rn, "bert/%s.safetensors", name);
    if (!ref_open(&r, rn)) return;
    const attn_st_tensor *ti = ref_has(&r, "ids");
    const int B = (int)ti->shape[0], T = (int)ti->shape[1];
    int32_t *ids = ref_i32(&r, "ids"), *types = ref_i32(&r, "types"), *len = ref_i32(&r, "lengths");
    int32_t *labels = ref_i32(&r, "labels");
    attn_bert_state *st;
    assert_int_equal(attn_bert_state_init(m, B, T, &st), 0);
    m->cfg.hidden_dropout_prob = 0.0f; /* the reference ran without dropout */
    attn_bert_set_train(st, true, 1, 0);
    assert_int_equal(attn_bert_forward(m, st, B, T, ids, types, len, NULL), 0);
    float loss;
    assert_int_equal(attn_bert_mlm_loss(m, st, labels, &loss), 0);
    float *rl = ref_f32(&r, "loss");
    char what[160];
    snprintf(what, sizeof what, "%s MLM loss", name);
    tu_close(what, &loss, rl, 1, 1e-5, 0);
    attn_free(rl);
    attn_bert_zero_grad(m);
    assert_int_equal(attn_bert_backward(m, st), 0);
    int checked = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_bert_tensor *t = &m->tensors[i];
        if (strncmp(t->name, "pooler.", 7) == 0) continue; /* BertForMaskedLM has none */
        char key[128];
        snprintf(key, sizeof key, "grad.%s", t->name);
        float *g = ref_f32(&r, key);
        snprintf(what, sizeof what, "%s d/d %s", name, t->name);
        tu_close(what, m->grads + t->offset, g, t->numel, ATTN_TEST_GRAD_RTOL, 1e-6);
        worst_grad = fmax(worst_grad, rel_err(m->grads + t->offset, g, t->numel));
        attn_free(g);
        checked++;
    }
    assert_true(checked >= 16);
    /* a second backward without a new loss is refused */
    tu_expect_fail(attn_bert_backward(m, st), ATTN_STATUS_INVALID_ARGUMENT, "attn_bert_mlm_loss",
                   NULL);
    attn_free(ids);
    attn_free(types);
    attn_free(len);
    attn_free(labels);
    attn_bert_state_free(st);
    attn_bert_model_free(m);
    attn_st_close(r.f);
}

static void test_gradients(void **state) {
    (void)state;
    check_grads("tiny");
    check_grads("odd");
    printf("  worst gradient error %.2e x max|ref| (bound %.0e)\n", worst_grad,
           ATTN_TEST_GRAD_RTOL);
}

/* ---- batch independence ---- */

static void test_batch_independence(void **state) {
    (void)state;
    attn_bert_model *m = load_case("tiny");
    /* 57 rows in the batch, at most 24 alone: with several threads, the dense layers take their
     * many-row path for the batch and their few-row path (columns split) for each sentence */
    enum { T = 24, B = 5 };
    const int C = m->cfg.hidden_size, V = m->cfg.vocab_size;
    tu_rng rng = {12345};
    int32_t ids[B * T], types[B * T], len[B] = {24, 3, 17, 12, 1};
    for (int i = 0; i < B * T; i++) {
        ids[i] = 1 + (int32_t)(tu_uniform(&rng, 0, 1) * (V - 1));
        types[i] = tu_uniform(&rng, 0, 1) < 0.5f ? 0 : 1;
    }
    attn_bert_state *st;
    assert_int_equal(attn_bert_state_init(m, B, T, &st), 0);
    float *all = attn_alloc((size_t)B * T * C * sizeof(float));
    float *one = attn_alloc((size_t)T * C * sizeof(float));
    float pooled_all[5 * 64], pooled_one[64];
    assert_int_equal(attn_bert_forward(m, st, B, T, ids, types, len, all), 0);
    assert_int_equal(attn_bert_pool(m, st, ATTN_BERT_POOL_MEAN, true, pooled_all), 0);
    int32_t lp = 2 * T + 1; /* batch 2, position 1 */
    float lg_all[120], lg_one[120];
    assert_int_equal(attn_bert_mlm_logits(m, st, 1, &lp, lg_all), 0);
    double worst = 0;
    for (int b = 0; b < B; b++) {
        /* alone, with a shorter padded length T' = len[b] + 2 (or len) and garbage padding */
        int Tb = len[b] + 2 > T ? len[b] : len[b] + 2;
        int32_t ib[T], tb[T];
        for (int t = 0; t < Tb; t++) {
            ib[t] = t < len[b] ? ids[b * T + t] : 7;
            tb[t] = t < len[b] ? types[b * T + t] : 1;
        }
        assert_int_equal(attn_bert_forward(m, st, 1, Tb, ib, tb, &len[b], one), 0);
        assert_int_equal(attn_bert_pool(m, st, ATTN_BERT_POOL_MEAN, true, pooled_one), 0);
        for (size_t i = 0; i < (size_t)len[b] * C; i++)
            worst = fmax(worst, fabs((double)one[i] - all[(size_t)b * T * C + i]));
        for (int i = 0; i < C; i++)
            worst = fmax(worst, fabs((double)pooled_one[i] - pooled_all[b * C + i]));
        /* padded rows of the batch output are 0 */
        for (size_t i = (size_t)len[b] * C; i < (size_t)T * C; i++)
            assert_true(all[(size_t)b * T * C + i] == 0.0f);
        if (b == 2) {
            int32_t p1 = 1;
            assert_int_equal(attn_bert_mlm_logits(m, st, 1, &p1, lg_one), 0);
            for (int i = 0; i < V; i++) worst = fmax(worst, fabs((double)lg_one[i] - lg_all[i]));
        }
    }
    double scale = 0;
    for (size_t i = 0; i < (size_t)B * T * C; i++) scale = fmax(scale, fabs((double)all[i]));
    /* Equal up to float rounding, not always bit-identical: the GEMM takes its few-rows path
     * (another summation order) for the 1- and 3-token sentences alone, and an -O1 build
     * (sanitizers) of the SIMD GEMM rounds the fused GELU differently in edge tiles; both
     * ~1e-7 relative. Hence the bound 1e-6 · max|h|. */
    printf("  batch vs alone: max abs difference %.3g (bound 1e-6 x max|h| = %.3g)\n", worst,
           1e-6 * scale);
    assert_true(worst <= 1e-6 * scale);
    /* lengths NULL == all T; an attention mask converts to lengths */
    int32_t mask[B * T], len2[B];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) mask[b * T + t] = t < len[b];
    assert_int_equal(attn_bert_mask_to_lengths(B, T, mask, len2), 0);
    assert_memory_equal(len, len2, sizeof len);
    mask[1 * T + 5] = 1; /* a 1 after padding: left/middle padding is refused */
    tu_expect_fail(attn_bert_mask_to_lengths(B, T, mask, len2), ATTN_STATUS_UNSUPPORTED,
                   "row 1", "right padding");
    mask[1 * T + 5] = 2;
    tu_expect_fail(attn_bert_mask_to_lengths(B, T, mask, len2), ATTN_STATUS_INVALID_ARGUMENT,
                   "must be 0 or 1", NULL);
    for (int t = 0; t < T; t++) mask[3 * T + t] = 0;
    mask[1 * T + 5] = 0;
    tu_expect_fail(attn_bert_mask_to_lengths(B, T, mask, len2), ATTN_STATUS_INVALID_ARGUMENT,
                   "row 3", "no token");
    attn_free(all);
    attn_free(one);
    attn_bert_state_free(st);
    attn_bert_model_free(m);
}

/* ---- pooling ---- */

static void test_pooling(void **state) {
    (void)state;
    attn_bert_model *m = load_case("pool");
    enum { T = 6, B = 2 };
    const int C = m->cfg.hidden_size;
    int32_t ids[B * T] = {1, 5, 9, 13, 2, 0, 4, 8, 0, 0, 0, 0}, len[B] = {5, 2};
    attn_bert_state *st;
    assert_int_equal(attn_bert_state_init(m, B, T, &st), 0);
    float h[B * T * 64], got[B * 64], want[B * 64];
    assert_int_equal(attn_bert_forward(m, st, B, T, ids, NULL, len, h), 0);
    for (int mode = 0; mode < 4; mode++)
        for (int norm = 0; norm < 2; norm++) {
            assert_int_equal(attn_bert_pool(m, st, (attn_bert_pooling)mode, norm, got), 0);
            for (int b = 0; b < B; b++) {
                double ss = 0;
                for (int i = 0; i < C; i++) {
                    double v = mode == ATTN_BERT_POOL_MAX ? -INFINITY : 0;
                    for (int t = 0; t < (mode == ATTN_BERT_POOL_CLS ? 1 : len[b]); t++) {
                        double x = h[(b * T + t) * C + i];
                        v = mode == ATTN_BERT_POOL_MAX ? fmax(v, x) : v + x;
                    }
                    if (mode == ATTN_BERT_POOL_MEAN) v /= len[b];
                    if (mode == ATTN_BERT_POOL_MEAN_SQRT_LEN) v /= sqrt(len[b]);
                    want[b * C + i] = (float)v;
                    ss += v * v;
                }
                if (norm)
                    for (int i = 0; i < C; i++) want[b * C + i] /= (float)sqrt(ss);
            }
            char what[64];
            snprintf(what, sizeof what, "pool mode %d normalize %d", mode, norm);
            tu_close(what, got, want, (size_t)B * C, 1e-6, 1e-7);
        }
    float mp[B * 64];
    assert_int_equal(attn_bert_mean_pool(B, T, C, h, len, true, mp), 0);
    assert_int_equal(attn_bert_pool(m, st, ATTN_BERT_POOL_MEAN, true, got), 0);
    assert_memory_equal(mp, got, sizeof(float) * B * C);
    attn_bert_state_free(st);
    attn_bert_model_free(m);
}

/* ---- finite differences ---- */

static attn_bert_model *fd_model(void) {
    attn_bert_config c = attn_bert_default_config();
    c.vocab_size = 23, c.hidden_size = 16, c.num_hidden_layers = 2, c.num_attention_heads = 2;
    c.intermediate_size = 24, c.max_position_embeddings = 8, c.type_vocab_size = 2;
    c.initializer_range = 0.3f, c.hidden_dropout_prob = 0.1f, c.layer_norm_eps = 1e-5f;
    attn_bert_model *m;
    assert_int_equal(attn_bert_model_init(&c, 7, true, true, &m), 0);
    /* non-trivial LN gains and biases */
    tu_rng r = {99};
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 1)
            for (size_t k = 0; k < m->tensors[i].numel; k++)
                m->params[m->tensors[i].offset + k] += tu_uniform(&r, -0.2f, 0.2f);
    return m;
}

enum { FD_B = 2, FD_T = 6 };
static const int32_t FD_IDS[FD_B * FD_T] = {3, 7, 1, 22, 9, 4, 5, 2, 8, 0, 0, 0};
static const int32_t FD_TYPES[FD_B * FD_T] = {0, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0, 0};
static const int32_t FD_LEN[FD_B] = {6, 3};
static const int32_t FD_LABELS[FD_B * FD_T] = {-100, 4, -100, 11, -100, 0, 2, -100, 19,
                                               -100, -100, -100};

static double fd_loss(attn_bert_model *m, attn_bert_state *st) {
    assert_int_equal(attn_bert_forward(m, st, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN, NULL), 0);
    float loss;
    assert_int_equal(attn_bert_mlm_loss(m, st, FD_LABELS, &loss), 0);
    return loss;
}

static void test_finite_differences(void **state) {
    (void)state;
    attn_bert_model *m = fd_model();
    attn_bert_state *st;
    assert_int_equal(attn_bert_state_init(m, FD_B, FD_T, &st), 0);
    attn_bert_set_train(st, true, 42, 3); /* dropout 0.1 on: the masks are fixed by seed/step */
    fd_loss(m, st);
    attn_bert_zero_grad(m);
    assert_int_equal(attn_bert_backward(m, st), 0);
    float *g = attn_alloc(m->num_params * sizeof(float));
    memcpy(g, m->grads, m->num_params * sizeof(float));
    const double h = 1e-2;
    int n = 0, bad = 0;
    double worst = 0;
    tu_rng r = {5};
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_bert_tensor *t = &m->tensors[i];
        if (strncmp(t->name, "pooler", 6) == 0) continue;
        for (int k = 0; k < 3; k++) {
            size_t j = t->offset + (size_t)(tu_uniform(&r, 0, 1) * (float)t->numel);
            /* an embedding row that the batch uses, so the check is not trivially 0 == 0 */
            if (strstr(t->name, "word_embeddings"))
                j = t->offset + (size_t)FD_IDS[k * 2] * 16 + (size_t)k;
            float keep = m->params[j];
            m->params[j] = keep + (float)h;
            double lp = fd_loss(m, st);
            m->params[j] = keep - (float)h;
            double lm = fd_loss(m, st);
            m->params[j] = keep;
            double num = (lp - lm) / (2 * h), ana = g[j];
            double err = fabs(num - ana);
            worst = fmax(worst, err / (2e-3 + 2e-2 * fabs(num)));
            if (err > 2e-3 + 2e-2 * fabs(num)) {
                printf("  FD %s[%zu]: analytic %.6g numeric %.6g\n", t->name, j - t->offset, ana,
                       num);
                bad++;
            }
            n++;
        }
    }
    printf("  finite differences: %d entries, worst error %.2f of the tolerance\n", n, worst);
    assert_int_equal(bad, 0);

    /* backward from the hidden states: loss = sum(hidden · R) */
    const int C = 16;
    float R[FD_B * FD_T * 16], hid[FD_B * FD_T * 16];
    tu_fill(&r, R, sizeof R / sizeof R[0], -1, 1);
    assert_int_equal(attn_bert_forward(m, st, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN, hid), 0);
    attn_bert_zero_grad(m);
    assert_int_equal(attn_bert_backward_hidden(m, st, R), 0);
    memcpy(g, m->grads, m->num_params * sizeof(float));
    bad = 0;
    const attn_bert_tensor *pt[] = {attn_bert_find_tensor(m, "encoder.layer.0.attention.self.key.weight"),
                                    attn_bert_find_tensor(m, "bert.embeddings.LayerNorm.bias"),
                                    attn_bert_find_tensor(m, "encoder.layer.1.output.dense.weight")};
    for (int q = 0; q < 3; q++) {
        assert_non_null(pt[q]);
        for (int k = 0; k < 4; k++) {
            size_t j = pt[q]->offset + (size_t)(k * 7 % (int)pt[q]->numel);
            float keep = m->params[j];
            double l2[2];
            for (int s = 0; s < 2; s++) {
                m->params[j] = keep + (float)(s ? -h : h);
                assert_int_equal(
                    attn_bert_forward(m, st, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN, hid), 0);
                double acc = 0;
                for (int b = 0; b < FD_B; b++)
                    for (int t = 0; t < FD_LEN[b]; t++)
                        for (int i = 0; i < C; i++)
                            acc += (double)hid[(b * FD_T + t) * C + i] * R[(b * FD_T + t) * C + i];
                l2[s] = acc;
            }
            m->params[j] = keep;
            double num = (l2[0] - l2[1]) / (2 * h);
            if (fabs(num - g[j]) > 2e-3 + 2e-2 * fabs(num)) {
                printf("  FD(hidden) %s: analytic %.6g numeric %.6g\n", pt[q]->name, g[j], num);
                bad++;
            }
        }
    }
    assert_int_equal(bad, 0);
    attn_free(g);
    attn_bert_state_free(st);
    attn_bert_model_free(m);
}

/* ---- dropout ---- */

static void test_dropout(void **state) {
    (void)state;
    attn_bert_model *m = fd_model();
    attn_bert_state *st;
    assert_int_equal(attn_bert_state_init(m, FD_B, FD_T, &st), 0);
    const size_t n = (size_t)FD_B * FD_T * 16;
    float a[FD_B * FD_T * 16], b[FD_B * FD_T * 16], e[FD_B * FD_T * 16];
    assert_int_equal(attn_bert_forward(m, st, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN, e), 0);
    attn_bert_set_train(st, true, 42, 3);
    assert_int_equal(attn_bert_forward(m, st, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN, a), 0);
    assert_int_equal(attn_bert_forward(m, st, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN, b), 0);
    assert_memory_equal(a, b, sizeof a); /* same seed and step: same masks */
    attn_bert_set_train(st, true, 42, 4);
    assert_int_equal(attn_bert_forward(m, st, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN, b), 0);
    assert_true(memcmp(a, b, sizeof a) != 0);
    assert_true(memcmp(a, e, sizeof a) != 0);
    /* dropout 0 in training mode = evaluation */
    m->cfg.hidden_dropout_prob = 0.0f;
    assert_int_equal(attn_bert_forward(m, st, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN, b), 0);
    tu_close("train (p = 0) vs eval", b, e, n, 1e-6, 0);
    attn_bert_state_free(st);
    attn_bert_model_free(m);
}

/* ---- the data-parallel MLM trainer ---- */

/* attn_bert_trainer against the plain path (forward + mlm loss + backward on one state over the
 * whole batch): with 1 replica bit for bit; with 2 and 3 replicas (dropout off) the loss within
 * 1e-6 relative and every tensor's gradient within 1e-5 of its largest |entry| plus 1e-5 of the
 * model's largest gradient (the key biases' gradients are exactly 0 in exact arithmetic, by
 * softmax's shift invariance: float32 leaves ~6e-8 of rounding noise there, 1e-7 of the largest
 * gradient) — the paths differ only in the order of the float sums over rows. With dropout on, the replicas draw the masks of
 * their packed rows: 1, 2 and 3 replicas give the same loss within 1e-6 and the same gradients
 * within the same tolerance, and a replica count gives the same bits every time. */
static void test_trainer(void **state) {
    (void)state;
    for (int drop = 0; drop < 2; drop++) {
        attn_bert_model *m = fd_model();
        if (!drop) m->cfg.hidden_dropout_prob = 0.0f;
        const size_t P = m->num_params;
        float *g0 = malloc(P * sizeof(float)), *g1 = malloc(P * sizeof(float));
        float l0 = 0;
        /* Reference: the plain path on one state (training mode draws the masks of rows 0..). */
        attn_bert_state *st;
        assert_int_equal(attn_bert_state_init(m, FD_B, FD_T, &st), 0);
        attn_bert_set_train(st, true, 5, 2);
        assert_int_equal(attn_bert_forward(m, st, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN, NULL), 0);
        assert_int_equal(attn_bert_mlm_loss(m, st, FD_LABELS, &l0), 0);
        attn_bert_zero_grad(m);
        assert_int_equal(attn_bert_backward(m, st), 0);
        memcpy(g0, m->grads, P * sizeof(float));
        attn_bert_state_free(st);
        for (int n = 1; n <= 3; n++) {
            attn_bert_trainer *t;
            assert_int_equal(attn_bert_trainer_init(m, FD_B, FD_T, n, &t), 0);
            assert_int_equal(attn_bert_trainer_replicas(t), n < FD_B ? n : FD_B);
            float l = 0;
            for (int rep = 0; rep < 2; rep++) {
                attn_bert_zero_grad(m);
                assert_int_equal(attn_bert_train_step(t, true, 5, 2, FD_B, FD_T, FD_IDS,
                                                      FD_TYPES, FD_LEN, FD_LABELS, 1.0f, &l),
                                 0);
                if (rep == 0) memcpy(g1, m->grads, P * sizeof(float));
            }
            assert_memory_equal(g1, m->grads, P * sizeof(float)); /* deterministic */
            if (n == 1) {
                assert_true(l == l0);
                assert_memory_equal(m->grads, g0, P * sizeof(float));
            } else {
                assert_true(fabs(l - l0) <= 1e-6 * fabs(l0));
                double gmax = 0;
                for (size_t k = 0; k < P; k++) gmax = fmax(gmax, fabs(g0[k]));
                for (int i = 0; i < m->n_tensors; i++) {
                    const attn_bert_tensor *e = &m->tensors[i];
                    char what[128];
                    snprintf(what, sizeof what, "%s %d replicas: %s", drop ? "dropout" : "plain",
                             n, e->name);
                    tu_close(what, m->grads + e->offset, g0 + e->offset, e->numel, 1e-5,
                             1e-5 * gmax);
                }
            }
            float le = 0;
            assert_int_equal(attn_bert_trainer_eval(t, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN,
                                                    FD_LABELS, &le),
                             0);
            assert_true(isfinite(le));
            attn_bert_trainer_free(t);
        }
        /* Argument errors. */
        attn_bert_trainer *t;
        tu_expect_fail(attn_bert_trainer_init(m, FD_B, FD_T, 0, &t), ATTN_STATUS_INVALID_ARGUMENT,
                       "replicas must be 1..256", NULL);
        tu_expect_fail(attn_bert_trainer_init(m, 0, FD_T, 2, &t), ATTN_STATUS_INVALID_ARGUMENT,
                       "B and T", NULL);
        assert_int_equal(attn_bert_trainer_init(m, FD_B, FD_T, 2, &t), 0);
        int32_t bad[FD_B * FD_T];
        memcpy(bad, FD_LABELS, sizeof bad);
        bad[1 * FD_T + 4] = 3; /* a label on padding */
        float l;
        tu_expect_fail(attn_bert_train_step(t, true, 5, 2, FD_B, FD_T, FD_IDS, FD_TYPES, FD_LEN,
                                            bad, 1.0f, &l),
                       ATTN_STATUS_INVALID_ARGUMENT, "padded position (batch 1, position 4)",
                       NULL);
        tu_expect_fail(attn_bert_train_step(t, true, 5, 2, FD_B + 1, FD_T, FD_IDS, FD_TYPES,
                                            FD_LEN, FD_LABELS, 1.0f, &l),
                       ATTN_STATUS_INVALID_ARGUMENT, "capacity", NULL);
        attn_bert_trainer_free(t);
        free(g0), free(g1);
        attn_bert_model_free(m);
    }
}

/* ---- save / load ---- */

static void check_python_reload(const char *saved, const char *orig) {
    const char *py = ".venv/bin/python";
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "%s tools/check_bert.py '%s' '%s'", py, saved, orig);
    fflush(stdout);
    int rc = system(cmd);
    if (rc != 0) fail_msg("tools/check_bert.py failed (status %d)", rc);
}

static void test_save_load(void **state) {
    (void)state;
    const char *names[] = {"tiny", "pool", "odd"};
    for (int k = 0; k < 3; k++) {
        attn_bert_model *m = load_case(names[k]);
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/saved_%s", tu_dir, names[k]);
        assert_int_equal(attn_bert_save_dir(m, dir), 0);
        attn_bert_model *m2;
        assert_int_equal(attn_bert_load_dir(dir, &m2), 0);
        assert_memory_equal(&m->cfg, &m2->cfg, sizeof m->cfg);
        assert_int_equal(m->has_pooler, m2->has_pooler);
        assert_int_equal(m->has_mlm, m2->has_mlm);
        assert_int_equal(m->num_params, m2->num_params);
        assert_memory_equal(m->params, m2->params, m->num_params * sizeof(float));
        attn_bert_model_free(m2);
        attn_bert_model_free(m);
    }
    /* a fresh model saves and reloads too; init: pad row 0, LN 1/0, biases 0, std ~ range */
    attn_bert_config c = attn_bert_default_config();
    c.vocab_size = 300, c.hidden_size = 32, c.num_hidden_layers = 1, c.num_attention_heads = 4;
    c.intermediate_size = 64, c.max_position_embeddings = 64, c.pad_token_id = 5;
    attn_bert_model *m;
    assert_int_equal(attn_bert_model_init(&c, 1, true, true, &m), 0);
    const attn_bert_tensor *we = attn_bert_find_tensor(m, "embeddings.word_embeddings.weight");
    for (int i = 0; i < 32; i++) assert_true(m->params[we->offset + 5 * 32 + i] == 0.0f);
    double ss = 0;
    for (size_t i = 0; i < we->numel; i++) ss += (double)m->params[we->offset + i] * m->params[we->offset + i];
    double sd = sqrt(ss / (double)(we->numel - 32));
    printf("  init std of word embeddings %.4f (initializer_range 0.02)\n", sd);
    assert_true(fabs(sd - 0.02) < 0.002);
    assert_true(m->params[attn_bert_find_tensor(m, "encoder.layer.0.output.LayerNorm.weight")->offset] == 1.0f);
    assert_true(m->params[attn_bert_find_tensor(m, "cls.predictions.bias")->offset] == 0.0f);
    assert_true(m->w.mlm_decoder_w == m->w.word_emb);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fresh", tu_dir);
    assert_int_equal(attn_bert_save_dir(m, dir), 0);
    attn_bert_model *m2;
    assert_int_equal(attn_bert_load_dir(dir, &m2), 0);
    assert_memory_equal(m->params, m2->params, m->num_params * sizeof(float));
    attn_bert_model_free(m2);
    attn_bert_model_free(m);
    /* untied decoder: its own cls.predictions.decoder.weight, saved and reloaded */
    c.tie_word_embeddings = false;
    assert_int_equal(attn_bert_model_init(&c, 2, false, true, &m), 0);
    assert_true(m->w.mlm_decoder_w != m->w.word_emb);
    assert_non_null(attn_bert_find_tensor(m, "cls.predictions.decoder.weight"));
    snprintf(dir, sizeof dir, "%s/untied", tu_dir);
    assert_int_equal(attn_bert_save_dir(m, dir), 0);
    assert_int_equal(attn_bert_load_dir(dir, &m2), 0);
    assert_false(m2->cfg.tie_word_embeddings);
    assert_int_equal(m->num_params, m2->num_params);
    assert_memory_equal(m->params, m2->params, m->num_params * sizeof(float));
    attn_bert_model_free(m2);
    attn_bert_model_free(m);
}

/* transformers loads what attn_bert_save_dir wrote (tools/check_bert.py) */
static void test_save_load_transformers(void **state) {
    (void)state;
    if (access(".venv/bin/python", X_OK) != 0 || access("tools/check_bert.py", R_OK) != 0)
        tu_skip(".venv/bin/python or tools/check_bert.py not found (run from the repository "
                "root; sh tools/install_deps.sh)");
    const char *names[] = {"tiny", "pool"};
    for (int k = 0; k < 2; k++) {
        attn_bert_model *m = load_case(names[k]);
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/saved_py_%s", tu_dir, names[k]);
        assert_int_equal(attn_bert_save_dir(m, dir), 0);
        check_python_reload(dir, model_dir(names[k]));
        attn_bert_model_free(m);
    }
}

/* ---- bad inputs ---- */

/* Copy model dir src to dst, rewriting its safetensors: drop tensor `drop`, reshape tensor
 * `reshape` to (1, numel), and copy the config (or write `config` instead). */
static void make_variant(const char *src, const char *dst, const char *drop, const char *reshape,
                         const char *config) {
    mkdir(dst, 0777);
    char p[1100], q[1100];
    snprintf(p, sizeof p, "%s/model.safetensors", src);
    attn_st_file *f;
    assert_int_equal(attn_st_open(p, &f), 0);
    int n = attn_st_count(f), k = 0;
    attn_st_entry *e = calloc((size_t)n, sizeof *e);
    float **bufs = calloc((size_t)n, sizeof *bufs);
    for (int i = 0; i < n; i++) {
        const attn_st_tensor *t = attn_st_tensor_at(f, i);
        if (drop && strcmp(t->name, drop) == 0) continue;
        assert_int_equal(attn_st_load_f32(f, t->name, &bufs[i], NULL), 0);
        e[k].name = t->name;
        e[k].dtype = ATTN_DTYPE_F32;
        e[k].ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) e[k].shape[d] = t->shape[d];
        if (reshape && strcmp(t->name, reshape) == 0) {
            e[k].ndim = 2;
            e[k].shape[0] = 1;
            e[k].shape[1] = (int64_t)t->numel;
        }
        e[k].data = bufs[i];
        k++;
    }
    snprintf(q, sizeof q, "%s/model.safetensors", dst);
    assert_int_equal(attn_st_save(q, e, k, NULL), 0);
    for (int i = 0; i < n; i++) attn_free(bufs[i]);
    free(bufs);
    free(e);
    attn_st_close(f);
    snprintf(p, sizeof p, "%s/config.json", src);
    snprintf(q, sizeof q, "%s/config.json", dst);
    if (config) {
        write_file(q, config);
    } else {
        size_t len;
        char *text = tu_read_all(p, &len);
        tu_write_all(q, text, len);
        free(text);
    }
}

static void test_bad_inputs(void **state) {
    (void)state;
    char src[1024], dst[1024];
    snprintf(src, sizeof src, "%s", model_dir("tiny"));
    attn_bert_model *m = NULL;
    snprintf(dst, sizeof dst, "%s/missing", tu_dir);
    make_variant(src, dst, "bert.encoder.layer.1.intermediate.dense.weight", NULL, NULL);
    tu_expect_fail3(attn_bert_load_dir(dst, &m), ATTN_STATUS_FORMAT, "model.safetensors",
                    "encoder.layer.1.intermediate.dense.weight", "(128, 64)");
    assert_null(m);
    snprintf(dst, sizeof dst, "%s/shape", tu_dir);
    make_variant(src, dst, NULL, "bert.encoder.layer.0.attention.self.value.weight", NULL);
    tu_expect_fail3(attn_bert_load_dir(dst, &m), ATTN_STATUS_FORMAT, "model.safetensors",
                    "attention.self.value.weight", "64");
    snprintf(dst, sizeof dst, "%s/nohead_bias", tu_dir);
    make_variant(src, dst, "cls.predictions.bias", NULL, NULL);
    tu_expect_fail(attn_bert_load_dir(dst, &m), ATTN_STATUS_FORMAT, "cls.predictions.bias",
                   "missing");
    /* a config with fewer layers than the file */
    snprintf(dst, sizeof dst, "%s/layers", tu_dir);
    make_variant(src, dst, NULL, NULL,
                 "{\"model_type\": \"bert\", \"vocab_size\": 120, \"hidden_size\": 64, "
                 "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 128, "
                 "\"max_position_embeddings\": 32}");
    tu_expect_fail(attn_bert_load_dir(dst, &m), ATTN_STATUS_FORMAT, "encoder.layer.1",
                   "num_hidden_layers");
    /* absurd config: refused before allocating */
    snprintf(dst, sizeof dst, "%s/absurd", tu_dir);
    make_variant(src, dst, NULL, NULL,
                 "{\"model_type\": \"bert\", \"vocab_size\": 1000000000, \"hidden_size\": 64}");
    tu_expect_fail(attn_bert_load_dir(dst, &m), ATTN_STATUS_TOO_LARGE, "vocab_size", "config.json");
    snprintf(dst, sizeof dst, "%s/heads", tu_dir);
    make_variant(src, dst, NULL, NULL,
                 "{\"model_type\": \"bert\", \"hidden_size\": 64, \"num_attention_heads\": 5}");
    tu_expect_fail(attn_bert_load_dir(dst, &m), ATTN_STATUS_INVALID_ARGUMENT,
                   "num_attention_heads (5) must divide hidden_size (64)", NULL);
    /* no weights at all / only pytorch_model.bin */
    snprintf(dst, sizeof dst, "%s/nofile", tu_dir);
    mkdir(dst, 0777);
    char p[1100];
    snprintf(p, sizeof p, "%s/config.json", dst);
    write_file(p, "{\"model_type\": \"bert\"}");
    tu_expect_fail(attn_bert_load_dir(dst, &m), ATTN_STATUS_IO, "model.safetensors", NULL);
    snprintf(p, sizeof p, "%s/pytorch_model.bin", dst);
    write_file(p, "not a pickle");
    tu_expect_fail(attn_bert_load_dir(dst, &m), ATTN_STATUS_UNSUPPORTED, "pytorch_model.bin",
                   NULL);

    /* forward errors */
    m = load_case("tiny");
    attn_bert_state *st;
    tu_expect_fail(attn_bert_state_init(m, 2, 33, &st), ATTN_STATUS_INVALID_ARGUMENT,
                   "max_position_embeddings 32", NULL);
    tu_expect_fail(attn_bert_state_init(m, 100000000, 32, &st), ATTN_STATUS_TOO_LARGE,
                   "B=100000000", NULL);
    assert_int_equal(attn_bert_state_init(m, 2, 32, &st), 0);
    int32_t ids[2 * 40] = {0}, types[2 * 40] = {0}, len[2] = {4, 4};
    for (int i = 0; i < 80; i++) ids[i] = i % 100;
    ids[1 * 4 + 3] = 120; /* out of range: (batch 1, position 3) with T = 4 */
    tu_expect_fail3(attn_bert_forward(m, st, 2, 4, ids, NULL, len, NULL),
                    ATTN_STATUS_INVALID_ARGUMENT, "token id 120", "batch 1, position 3", "[0, 120)");
    len[1] = 3; /* position 3 is padding now: not checked */
    assert_int_equal(attn_bert_forward(m, st, 2, 4, ids, NULL, len, NULL), 0);
    ids[1 * 4 + 3] = -1;
    len[1] = 4;
    tu_expect_fail(attn_bert_forward(m, st, 2, 4, ids, NULL, len, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "token id -1", NULL);
    ids[1 * 4 + 3] = 5;
    types[2] = 2;
    tu_expect_fail3(attn_bert_forward(m, st, 2, 4, ids, types, len, NULL),
                    ATTN_STATUS_INVALID_ARGUMENT, "token type 2", "batch 0, position 2",
                    "type_vocab_size 2");
    types[2] = 0;
    tu_expect_fail(attn_bert_forward(m, st, 2, 40, ids, types, NULL, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "T = 40", "max_position_embeddings 32");
    tu_expect_fail(attn_bert_forward(m, st, 3, 4, ids, types, len, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "capacity", NULL);
    len[0] = 0;
    tu_expect_fail(attn_bert_forward(m, st, 2, 4, ids, types, len, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "lengths[0] = 0", NULL);
    len[0] = 5;
    tu_expect_fail(attn_bert_forward(m, st, 2, 4, ids, types, len, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "lengths[0] = 5", NULL);
    len[0] = 4, len[1] = 2;
    assert_int_equal(attn_bert_forward(m, st, 2, 4, ids, types, len, NULL), 0);
    int32_t pos = 1 * 4 + 2; /* padding */
    float lg[120];
    tu_expect_fail(attn_bert_mlm_logits(m, st, 1, &pos, lg), ATTN_STATUS_INVALID_ARGUMENT,
                   "not a real token", NULL);
    int32_t labels[8] = {-100, 3, -100, -100, 1, -100, 7, -100};
    float loss;
    tu_expect_fail(attn_bert_mlm_loss(m, st, labels, &loss), ATTN_STATUS_INVALID_ARGUMENT,
                   "padded position (batch 1, position 2)", "-100");
    labels[6] = -100, labels[1] = 500;
    tu_expect_fail(attn_bert_mlm_loss(m, st, labels, &loss), ATTN_STATUS_INVALID_ARGUMENT,
                   "label 500", NULL);
    labels[1] = 3;
    assert_int_equal(attn_bert_mlm_loss(m, st, labels, &loss), 0);
    /* evaluation-mode forward: the loss works, backward is refused */
    tu_expect_fail(attn_bert_backward(m, st), ATTN_STATUS_INVALID_ARGUMENT, "training-mode",
                   NULL);
    attn_bert_state_free(st);
    attn_bert_model_free(m);
}

/* ---- the real all-MiniLM-L6-v2 ---- */

static void test_minilm(void **state) {
    (void)state;
    const char *dir = "models/all-MiniLM-L6-v2";
    if (access("models/all-MiniLM-L6-v2/model.safetensors", R_OK) != 0 ||
        access(tu_ref_path("bert/minilm.safetensors"), R_OK) != 0)
        tu_skip("%s or its reference absent (sh tools/get_minilm.sh; tools/ref_bert.py)", dir);
    attn_bert_model *m;
    assert_int_equal(attn_bert_load_dir(dir, &m), 0);
    assert_true(m->has_pooler);
    ref_file r;
    if (!ref_open(&r, "bert/minilm.safetensors")) return;
    const attn_st_tensor *ti = ref_has(&r, "ids");
    const int B = (int)ti->shape[0], T = (int)ti->shape[1], C = m->cfg.hidden_size;
    int32_t *ids = ref_i32(&r, "ids"), *types = ref_i32(&r, "types"), *len = ref_i32(&r, "lengths");
    float *ref = ref_f32(&r, "hidden"), *st_emb = ref_f32(&r, "st_emb");
    attn_bert_state *st;
    assert_int_equal(attn_bert_state_init(m, 32, 64, &st), 0);
    float *h = attn_alloc((size_t)B * T * C * sizeof(float));
    float *emb = attn_alloc((size_t)B * C * sizeof(float));
    assert_int_equal(attn_bert_forward(m, st, B, T, ids, types, len, h), 0);
    tu_close("MiniLM last_hidden_state", h, ref, (size_t)B * T * C, 1e-4, 0);
    assert_int_equal(attn_bert_pool(m, st, ATTN_BERT_POOL_MEAN, true, emb), 0);
    double min_cos = 1, max_err = 0;
    for (int b = 0; b < B; b++) {
        double dot = 0, na = 0, nb = 0;
        for (int i = 0; i < C; i++) {
            double x = emb[b * C + i], y = st_emb[b * C + i];
            dot += x * y, na += x * x, nb += y * y;
            max_err = fmax(max_err, fabs(x - y));
        }
        min_cos = fmin(min_cos, dot / sqrt(na * nb));
    }
    printf("  MiniLM sentence embeddings vs sentence-transformers: min cosine %.8f, max abs err "
           "%.2e\n",
           min_cos, max_err);
    assert_true(min_cos >= 0.99999);
    assert_true(max_err <= 1e-5);

    /* rough speed: 32 sentences of 8-64 tokens (timing printed, never asserted; not under
     * valgrind, where it would time nothing and take minutes) */
    if (tu_valgrind()) goto done;
    int32_t bid[32 * 64], blen[32];
    tu_rng rr = {77};
    for (int b = 0; b < 32; b++) {
        blen[b] = 8 + (int)(tu_uniform(&rr, 0, 1) * 57);
        for (int t = 0; t < 64; t++)
            bid[b * 64 + t] = t == 0 ? 101 : t == blen[b] - 1 ? 102 : 1000 + (int)(tu_uniform(&rr, 0, 1) * 20000);
    }
    float *e32 = attn_alloc((size_t)32 * C * sizeof(float));
    assert_int_equal(attn_bert_forward(m, st, 32, 64, bid, NULL, blen, NULL), 0); /* warm-up */
    double t0 = tu_now();
    const int reps = 2;
    for (int k = 0; k < reps; k++) {
        assert_int_equal(attn_bert_forward(m, st, 32, 64, bid, NULL, blen, NULL), 0);
        assert_int_equal(attn_bert_pool(m, st, ATTN_BERT_POOL_MEAN, true, e32), 0);
    }
    double dt = (tu_now() - t0) / reps;
    int tok = 0;
    for (int b = 0; b < 32; b++) tok += blen[b];
    printf("  MiniLM: 32 sentences (%d tokens) in %.1f ms (%.0f sentences/s, %d threads)\n", tok,
           dt * 1e3, 32 / dt, attn_get_num_threads());
    t0 = tu_now();
    for (int k = 0; k < 5; k++)
        assert_int_equal(attn_bert_forward(m, st, 1, 64, bid, NULL, blen, NULL), 0);
    printf("  MiniLM: one sentence of %d tokens in %.2f ms\n", blen[0], (tu_now() - t0) / 5 * 1e3);
    attn_free(e32);
done:
    attn_free(h);
    attn_free(emb);
    attn_free(ids);
    attn_free(types);
    attn_free(len);
    attn_free(ref);
    attn_free(st_emb);
    attn_bert_state_free(st);
    attn_bert_model_free(m);
    attn_st_close(r.f);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "bert")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_config_minilm),
        cmocka_unit_test(test_forward),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_batch_independence),
        cmocka_unit_test(test_pooling),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_trainer),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_save_load_transformers),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_minilm),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rm_tree(tu_dir);
    return rc;
}

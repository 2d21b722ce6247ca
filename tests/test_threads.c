/* test_threads.c — the library reuses its threads: a call that runs on 2 threads creates no
 * thread once the OpenMP team exists.
 *
 * An OpenMP region nested in an inactive one (a `parallel if (false)` or `num_threads(1)` region
 * around code that calls the threaded kernels) gets a fresh team of new threads from libgomp on
 * every call. That made one short text 3x slower at 2 threads than at 1 (the new threads spun
 * against the old ones for the two cores). Each case below runs once to build the team, then
 * several times with every pthread_create counted; the count must stay 0.
 *
 * The counting: this program defines pthread_create, which the dynamic linker binds libgomp's
 * calls to (the executable comes first in the lookup order); it counts and forwards to the next
 * definition (libc's, or a sanitizer's interceptor). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "tu.h"

#include "attn_bert.h"
#include "attn_embed.h"
#include "attn_infer.h"
#include "attn_models.h"

#include <jansson.h>

static atomic_int n_created;

int pthread_create(pthread_t *restrict t, const pthread_attr_t *restrict a, void *(*f)(void *),
                   void *restrict arg) {
    typedef int (*create_fn)(pthread_t *restrict, const pthread_attr_t *restrict,
                             void *(*)(void *), void *restrict);
    static create_fn next;
    if (!next) {
        void *sym = dlsym(RTLD_NEXT, "pthread_create");
        memcpy(&next, &sym, sizeof next);
    }
    if (!next) return EAGAIN;
    atomic_fetch_add(&n_created, 1);
    return next(t, a, f, arg);
}

/* Threads created by `calls` more runs of what warm-up ran once. */
#define COUNT_CREATED(calls, warm_up, body)                                                      \
    do {                                                                                         \
        warm_up;                                                                                 \
        const int before_ = atomic_load(&n_created);                                             \
        for (int call_ = 0; call_ < (calls); call_++) body;                                      \
        created = atomic_load(&n_created) - before_;                                             \
    } while (0)

/* One text per call (B = 1: the kernels' own threads) through attn_embed_encode. */
static void test_embed_single(void **state) {
    (void)state;
    if (tu_valgrind()) { /* the 90 MB model; test_embed runs the same path under valgrind */
        printf("  skipped under valgrind (loading MiniLM takes a minute there)\n");
        return;
    }
    json_error_t err;
    json_t *s = json_load_file(tu_ref_path("embed_sentences.json"), 0, &err);
    if (!s) printf("cannot read %s: %s (run tools/ref_embed.py)\n", tu_ref_path("x"), err.text);
    assert_non_null(s);
    const char *model = json_string_value(json_object_get(s, "model_dir"));
    assert_non_null(model);
    attn_embed_options o = attn_embed_default_options();
    attn_embed *e;
    assert_int_equal(attn_embed_load(model, &o, &e), ATTN_STATUS_OK);
    const char *text[1] = {"The quick brown fox jumps over the lazy dog while the cat watches "
                           "from the warm windowsill in the afternoon sun."};
    float out[1024];
    assert_true(attn_embed_get_info(e)->dim <= 1024);
    attn_set_num_threads(2);
    int created = 0;
    COUNT_CREATED(tu_valgrind() ? 2 : 10,
                  assert_int_equal(attn_embed_encode(e, 1, text, NULL, out), ATTN_STATUS_OK),
                  assert_int_equal(attn_embed_encode(e, 1, text, NULL, out), ATTN_STATUS_OK));
    attn_set_num_threads(1);
    printf("  single texts at 2 threads: %d threads created\n", created);
    assert_int_equal(created, 0);
    attn_embed_free(e);
    json_decref(s);
}

/* A BERT training step with one sequence (the attention backward's B = 1 case). */
static void test_bert_train_single(void **state) {
    (void)state;
    attn_bert_config c = attn_bert_default_config();
    c.vocab_size = 100, c.hidden_size = 256, c.num_hidden_layers = 1;
    c.num_attention_heads = 4, c.intermediate_size = 1024, c.max_position_embeddings = 64;
    c.hidden_dropout_prob = 0.0f;
    attn_bert_model *m;
    assert_int_equal(attn_bert_model_init(&c, 3, false, true, &m), ATTN_STATUS_OK);
    attn_bert_state *st;
    assert_int_equal(attn_bert_state_init(m, 1, 48, &st), ATTN_STATUS_OK);
    int32_t ids[48], labels[48], len = 48;
    for (int t = 0; t < 48; t++) ids[t] = 5 + t, labels[t] = t % 3 ? ATTN_BERT_IGNORE_INDEX : 7;
    attn_set_num_threads(2);
    attn_bert_set_train(st, true, 1, 0);
    float loss;
    int created = 0;
#define STEP                                                                                     \
    do {                                                                                         \
        assert_int_equal(attn_bert_forward(m, st, 1, 48, ids, NULL, &len, NULL), ATTN_STATUS_OK); \
        assert_int_equal(attn_bert_mlm_loss(m, st, labels, &loss), ATTN_STATUS_OK);              \
        attn_bert_zero_grad(m);                                                                  \
        assert_int_equal(attn_bert_backward(m, st), ATTN_STATUS_OK);                             \
    } while (0)
    COUNT_CREATED(tu_valgrind() ? 1 : 4, STEP, STEP);
#undef STEP
    attn_set_num_threads(1);
    printf("  BERT steps with one sequence at 2 threads: %d threads created\n", created);
    assert_int_equal(created, 0);
    attn_bert_state_free(st);
    attn_bert_model_free(m);
}

static attn_encdec_model *wide_encdec(void) {
    attn_encdec_config c = attn_encdec_default_config();
    c.src_vocab = c.tgt_vocab = 64;
    c.d_model = 256, c.n_head = 4, c.d_ff = 1024, c.n_enc_layers = 1, c.n_dec_layers = 1;
    c.max_len = 32, c.dropout = 0.0f;
    attn_encdec_model *m;
    assert_int_equal(attn_encdec_model_init(&c, 5, &m), ATTN_STATUS_OK);
    return m;
}

/* One sentence through attn_translate_many (one batch: the caller's thread alone, the kernels'
 * threads inside), and a translation training step with one sentence pair (one replica). */
static void test_encdec_single(void **state) {
    (void)state;
    attn_encdec_model *m = wide_encdec();
    attn_translate_session *s;
    assert_int_equal(attn_translate_session_init(m, 4, 4, 24, 24, &s), ATTN_STATUS_OK);
    int32_t src[24], len = 24;
    for (int t = 0; t < 24; t++) src[t] = t == 23 ? 3 : 4 + (t * 7) % 60; /* 3 = </s> */
    const int32_t *srcs[1] = {src};
    attn_translate_options o = attn_translate_default_options();
    o.max_len = 12, o.max_len_a = 0;
    int32_t ids[12], olen;
    attn_set_num_threads(2);
    int created = 0;
#define TRANSLATE                                                                                \
    assert_int_equal(attn_translate_many(s, &o, 1, srcs, &len, 12, ids, &olen, NULL),            \
                     ATTN_STATUS_OK)
    COUNT_CREATED(tu_valgrind() ? 1 : 4, TRANSLATE, TRANSLATE);
#undef TRANSLATE
    printf("  one-sentence translations at 2 threads: %d threads created\n", created);
    assert_int_equal(created, 0);

    attn_encdec_trainer *t;
    assert_int_equal(attn_encdec_trainer_init(m, 1, 24, 24, 2, &t), ATTN_STATUS_OK);
    int32_t tin[24], tout[24], tlen = 24;
    for (int k = 0; k < 24; k++) tin[k] = 4 + (k * 5) % 60, tout[k] = 4 + (k * 11) % 60;
    float loss;
#define STEP                                                                                     \
    do {                                                                                         \
        memset(m->grads, 0, m->num_params * sizeof(float));                                      \
        assert_int_equal(attn_encdec_train_step(t, true, 1, 0, 1, 24, 24, src, &len, tin, &tlen, \
                                                tout, 0.0f, &loss),                              \
                         ATTN_STATUS_OK);                                                        \
    } while (0)
    COUNT_CREATED(tu_valgrind() ? 1 : 4, STEP, STEP);
#undef STEP
    attn_set_num_threads(1);
    printf("  one-pair training steps at 2 threads: %d threads created\n", created);
    assert_int_equal(created, 0);
    /* The counting itself works: the team's worker was created through it. */
    assert_true(atomic_load(&n_created) >= 1);
    attn_encdec_trainer_free(t);
    attn_translate_session_free(s);
    attn_encdec_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embed_single),
        cmocka_unit_test(test_bert_train_single),
        cmocka_unit_test(test_encdec_single),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

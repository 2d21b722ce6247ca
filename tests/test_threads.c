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

/* Runs run(ctx) once (the team is built), then `calls` more times at 2 threads, and requires
 * that those create no thread. */
static void expect_no_new_threads(const char *what, int calls, void (*run)(void *), void *ctx) {
    attn_set_num_threads(2);
    run(ctx);
    const int before = atomic_load(&n_created);
    for (int i = 0; i < calls; i++) run(ctx);
    const int created = atomic_load(&n_created) - before;
    attn_set_num_threads(1);
    printf("  %d %s at 2 threads: %d threads created\n", calls, what, created);
    assert_int_equal(created, 0);
    /* The counting itself works: the team's worker was created through it. */
    assert_true(atomic_load(&n_created) >= 1);
}

static int n_calls(int plain) { return tu_valgrind() ? 1 : plain; }

/* ---- one text per call (B = 1: the kernels' own threads) through attn_embed_encode ---- */

typedef struct {
    attn_embed *e;
    const char *text[1];
    float out[1024];
} embed_case;

static void embed_run(void *ctx) {
    embed_case *c = ctx;
    assert_int_equal(attn_embed_encode(c->e, 1, c->text, NULL, c->out), ATTN_STATUS_OK);
}

static void test_embed_single(void **state) {
    (void)state;
    if (tu_valgrind()) /* the 90 MB model; test_embed runs the same path under valgrind */
        tu_skip_env("not under valgrind (loading MiniLM takes a minute there; test_embed runs "
                    "the same path)");
    json_error_t err;
    json_t *s = json_load_file(tu_ref_path("embed_sentences.json"), 0, &err);
    if (!s) printf("cannot read %s: %s (run tools/ref_embed.py)\n", tu_ref_path("x"), err.text);
    assert_non_null(s);
    const char *model = json_string_value(json_object_get(s, "model_dir"));
    assert_non_null(model);
    attn_embed_options o = attn_embed_default_options();
    embed_case c = {.text = {"The quick brown fox jumps over the lazy dog while the cat watches "
                             "from the warm windowsill in the afternoon sun."}};
    assert_int_equal(attn_embed_load(model, &o, &c.e), ATTN_STATUS_OK);
    assert_true(attn_embed_get_info(c.e)->dim <= 1024);
    expect_no_new_threads("single texts", 10, embed_run, &c);
    attn_embed_free(c.e);
    json_decref(s);
}

/* ---- a BERT training step with one sequence (the attention backward's B = 1 case) ---- */

typedef struct {
    attn_bert_model *m;
    attn_bert_state *st;
    int32_t ids[48], labels[48], len;
} bert_case;

static void bert_run(void *ctx) {
    bert_case *c = ctx;
    float loss;
    attn_bert_set_train(c->st, true, 1, 0);
    assert_int_equal(attn_bert_forward(c->m, c->st, 1, 48, c->ids, NULL, &c->len, NULL),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_bert_mlm_loss(c->m, c->st, c->labels, &loss), ATTN_STATUS_OK);
    attn_bert_zero_grad(c->m);
    assert_int_equal(attn_bert_backward(c->m, c->st), ATTN_STATUS_OK);
}

static void test_bert_train_single(void **state) {
    (void)state;
    attn_bert_config cfg = attn_bert_default_config();
    cfg.vocab_size = 100, cfg.hidden_size = 256, cfg.num_hidden_layers = 1;
    cfg.num_attention_heads = 4, cfg.intermediate_size = 1024, cfg.max_position_embeddings = 64;
    cfg.hidden_dropout_prob = 0.0f;
    bert_case c = {.len = 48};
    assert_int_equal(attn_bert_model_init(&cfg, 3, false, true, &c.m), ATTN_STATUS_OK);
    assert_int_equal(attn_bert_state_init(c.m, 1, 48, &c.st), ATTN_STATUS_OK);
    for (int t = 0; t < 48; t++)
        c.ids[t] = 5 + t, c.labels[t] = t % 3 ? ATTN_BERT_IGNORE_INDEX : 7;
    expect_no_new_threads("BERT steps with one sequence", n_calls(4), bert_run, &c);
    attn_bert_state_free(c.st);
    attn_bert_model_free(c.m);
}

/* ---- one sentence through attn_translate_many (one batch: the caller's thread alone, the
 * kernels' threads inside), and a translation training step with one pair (one replica) ---- */

typedef struct {
    attn_encdec_model *m;
    attn_translate_session *s;
    attn_translate_options o;
    attn_encdec_trainer *t;
    int32_t src[24], tin[24], tout[24], ids[12], len, olen;
} encdec_case;

static void translate_run(void *ctx) {
    encdec_case *c = ctx;
    const int32_t *srcs[1] = {c->src};
    assert_int_equal(attn_translate_many(c->s, &c->o, 1, srcs, &c->len, 12, c->ids, &c->olen, NULL),
                     ATTN_STATUS_OK);
}

static void encdec_train_run(void *ctx) {
    encdec_case *c = ctx;
    float loss;
    memset(c->m->grads, 0, c->m->num_params * sizeof(float));
    assert_int_equal(attn_encdec_train_step(c->t, true, 1, 0, 1, 24, 24, c->src, &c->len, c->tin,
                                            &c->len, c->tout, 0.0f, &loss),
                     ATTN_STATUS_OK);
}

static void test_encdec_single(void **state) {
    (void)state;
    attn_encdec_config cfg = attn_encdec_default_config();
    cfg.src_vocab = cfg.tgt_vocab = 64;
    cfg.d_model = 256, cfg.n_head = 4, cfg.d_ff = 1024, cfg.n_enc_layers = 1;
    cfg.n_dec_layers = 1, cfg.max_len = 32, cfg.dropout = 0.0f;
    encdec_case c = {.len = 24, .o = attn_translate_default_options()};
    c.o.max_len = 12, c.o.max_len_a = 0;
    assert_int_equal(attn_encdec_model_init(&cfg, 5, &c.m), ATTN_STATUS_OK);
    assert_int_equal(attn_translate_session_init(c.m, 4, 4, 24, 24, &c.s), ATTN_STATUS_OK);
    /* Capacity 2 rows, 2 replicas: a 1-row step leaves one replica working (with capacity 1
     * the trainer has one replica and takes its plain path). */
    assert_int_equal(attn_encdec_trainer_init(c.m, 2, 24, 24, 2, &c.t), ATTN_STATUS_OK);
    assert_int_equal(attn_encdec_trainer_replicas(c.t), 2);
    for (int k = 0; k < 24; k++) {
        c.src[k] = k == 23 ? 3 : 4 + (k * 7) % 60; /* 3 = </s> */
        c.tin[k] = 4 + (k * 5) % 60, c.tout[k] = 4 + (k * 11) % 60;
    }
    expect_no_new_threads("one-sentence translations", n_calls(4), translate_run, &c);
    expect_no_new_threads("one-pair training steps", n_calls(4), encdec_train_run, &c);
    attn_encdec_trainer_free(c.t);
    attn_translate_session_free(c.s);
    attn_encdec_model_free(c.m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embed_single),
        cmocka_unit_test(test_bert_train_single),
        cmocka_unit_test(test_encdec_single),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

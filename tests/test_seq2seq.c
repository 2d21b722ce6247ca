/* test_seq2seq.c — Hugging Face translation models on attn's encoder–decoder (attn_models.h:
 * attn_encdec_load_dir of MarianMTModel and M2M100ForConditionalGeneration directories;
 * attn_infer.h: attn_hf_generate) against transformers, on tiny random models that
 * tools/ref_seq2seq.py makes with transformers and saves with save_pretrained (float32
 * safetensors): Marian with swish / gelu / relu, scaled and unscaled embeddings, shared and
 * separate embeddings, a logits bias; M2M100 (NLLB's architecture) pre-LN with final norms,
 * fairseq positions, relu / gelu, scaled and unscaled embeddings. Per model:
 *   - the encoder output of a right-padded batch (the non-pad rows) and the decoder's logits
 *     within 1e-4 of max|ref| (the float32 model);
 *   - transformers' generate, seven cases (greedy and beam 3 / 4; max_length, max_new_tokens,
 *     no_repeat_ngram_size, early_stopping False / True / "never", length penalties 2, 1, 0.6,
 *     −0.5; the directory's generation_config.json alone with its bad_words_ids, forced EOS / BOS,
 *     num_beams): every sequence identical, token for token, padding included, and beam search's
 *     sequences_scores within 1e-4.
 * And bad directories: one-line errors naming the file and the field. */
#include "attn_infer.h"
#include "attn_io.h"
#include "attn_models.h"
#include "tu.h"

#include <string.h>
#include <unistd.h>

#define TOL_ENC 1e-4
#define TOL_LOGITS 1e-4
#define TOL_SCORE 1e-4

#define OK(x)                                                                                    \
    do {                                                                                         \
        attn_status ok_s_ = (x);                                                                 \
        if (ok_s_) fail_msg("%s: %s", #x, attn_last_error());                                    \
    } while (0)

static attn_st_file *REF;

static bool ref_open(void) {
    if (REF) return true;
    if (access(tu_ref_path("seq2seq.safetensors"), R_OK) != 0) return false;
    if (attn_st_open(tu_ref_path("seq2seq.safetensors"), &REF)) fail_msg("%s", attn_last_error());
    return true;
}

static const attn_st_tensor *ref_t(const char *key) {
    const attn_st_tensor *t = attn_st_find(REF, key);
    if (!t) fail_msg("seq2seq.safetensors has no %s", key);
    return t;
}

static float *ref_f32(const char *key, size_t *n) {
    float *d = NULL;
    const attn_st_tensor *t;
    if (attn_st_load_f32(REF, key, &d, &t)) fail_msg("%s", attn_last_error());
    if (n) *n = t->numel;
    return d;
}

static int32_t *ref_i32(const char *key, size_t *n) {
    int32_t *d = NULL;
    const attn_st_tensor *t;
    if (attn_st_load_i32(REF, key, &d, &t)) fail_msg("%s", attn_last_error());
    if (n) *n = t->numel;
    return d;
}

static const char *model_dir(const char *name) {
    static char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", tu_ref_path("seq2seq"), name);
    return dir;
}

/* The encoder output and the decoder logits of the reference batch. */
static void check_forward(const char *name, const attn_encdec_model *m) {
    char key[256], what[160];
    snprintf(key, sizeof key, "%s.src", name);
    const attn_st_tensor *ts = ref_t(key);
    const int B = (int)ts->shape[0], Ts = (int)ts->shape[1], C = m->cfg.d_model;
    snprintf(key, sizeof key, "%s.tgt", name);
    const int Tt = (int)ref_t(key)->shape[1], V = m->cfg.tgt_vocab;
    snprintf(key, sizeof key, "%s.src", name);
    int32_t *src = ref_i32(key, NULL);
    snprintf(key, sizeof key, "%s.src_len", name);
    int32_t *src_len = ref_i32(key, NULL);
    snprintf(key, sizeof key, "%s.tgt", name);
    int32_t *tgt = ref_i32(key, NULL);
    snprintf(key, sizeof key, "%s.enc", name);
    float *renc = ref_f32(key, NULL);
    snprintf(key, sizeof key, "%s.logits", name);
    float *rlog = ref_f32(key, NULL);
    attn_encdec_state *st;
    OK(attn_encdec_state_init(m, B, Ts, Tt, &st));
    float *enc = malloc((size_t)B * Ts * C * sizeof(float));
    float *logits = malloc((size_t)B * Tt * V * sizeof(float));
    OK(attn_encdec_encode(m, st, B, Ts, src, src_len, enc));
    /* the non-pad rows, packed */
    size_t k = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < src_len[b]; t++, k++) {
            memmove(enc + k * C, enc + ((size_t)b * Ts + t) * C, (size_t)C * sizeof(float));
            memmove(renc + k * C, renc + ((size_t)b * Ts + t) * C, (size_t)C * sizeof(float));
        }
    snprintf(what, sizeof what, "%s: encoder output", name);
    tu_close(what, enc, renc, k * C, TOL_ENC, 0);
    int32_t tl[64];
    for (int b = 0; b < B; b++) tl[b] = Tt;
    OK(attn_encdec_forward(m, st, B, Ts, Tt, src, src_len, tgt, tl, logits));
    snprintf(what, sizeof what, "%s: decoder logits", name);
    tu_close(what, logits, rlog, (size_t)B * Tt * V, TOL_LOGITS, 0);
    attn_encdec_state_free(st);
    free(enc), free(logits), free(src), free(src_len), free(tgt), free(renc), free(rlog);
}

/* Every generate case of the model: sequences identical, scores close. */
static void check_generate(const char *name, const char *dir, const attn_encdec_model *m,
                           int n_gens) {
    char key[256], what[160];
    snprintf(key, sizeof key, "%s.src", name);
    const attn_st_tensor *ts = ref_t(key);
    const int B = (int)ts->shape[0], Ts = (int)ts->shape[1];
    int32_t *src = ref_i32(key, NULL);
    snprintf(key, sizeof key, "%s.src_len", name);
    int32_t *src_len = ref_i32(key, NULL);
    attn_translate_session *s;
    OK(attn_translate_session_init(m, B, 4, Ts, m->cfg.max_len, &s));
    const int max_out = m->cfg.max_len + 1;
    int32_t *ids = malloc((size_t)B * max_out * sizeof *ids), len[64];
    float score[64];
    for (int g = 0; g < n_gens; g++) {
        snprintf(key, sizeof key, "%s.gen.%d.opts", name, g);
        int32_t *opts = ref_i32(key, NULL);
        snprintf(key, sizeof key, "%s.gen.%d.lp", name, g);
        float *lp = ref_f32(key, NULL);
        snprintf(key, sizeof key, "%s.gen.%d.seq", name, g);
        const attn_st_tensor *tq = ref_t(key);
        const int L = (int)tq->shape[1];
        int32_t *seq = ref_i32(key, NULL);
        attn_hf_generate_options o;
        OK(attn_hf_generate_config_load(dir, &o));
        if (!opts[6]) { /* the arguments the case passed to generate */
            o.num_beams = opts[0];
            if (opts[1]) o.max_length = opts[1];
            o.max_new_tokens = opts[2];
            o.no_repeat_ngram_size = opts[3];
            o.early_stopping = (attn_hf_early_stopping)opts[4];
            if (opts[5] >= 0) o.forced_bos_token_id = opts[5];
            if (!isnan(lp[0])) o.length_penalty = lp[0];
        }
        OK(attn_hf_generate(s, &o, B, Ts, src, src_len, max_out, ids, len, score));
        /* transformers' sequences: start, the tokens, padding to the widest */
        int same = 0;
        for (int b = 0; b < B; b++) {
            bool eq = 1 + len[b] <= L && seq[(size_t)b * L] == o.decoder_start_token_id;
            for (int t = 1; t < L && eq; t++) {
                const int32_t want = seq[(size_t)b * L + t];
                const int32_t got = t - 1 < len[b] ? ids[(size_t)b * max_out + t - 1]
                                                   : o.pad_token_id >= 0 ? o.pad_token_id
                                                                         : o.eos_token_id;
                eq = got == want;
            }
            same += eq;
            if (!eq) {
                printf("    %s case %d sentence %d differs:\n      transformers:", name, g, b);
                for (int t = 0; t < L; t++) printf(" %d", seq[(size_t)b * L + t]);
                printf("\n      attn:         %d", o.decoder_start_token_id);
                for (int t = 0; t < len[b]; t++) printf(" %d", ids[(size_t)b * max_out + t]);
                printf("\n");
                tu_failures++;
            }
        }
        printf("  %-44s %d/%d sequences identical (beams %d, lengths", name, same, B,
               o.num_beams);
        for (int b = 0; b < B; b++) printf(" %d", len[b]);
        printf(")%s\n", same == B ? "" : " FAIL");
        if (o.num_beams > 1) {
            snprintf(key, sizeof key, "%s.gen.%d.scores", name, g);
            float *rs = ref_f32(key, NULL);
            snprintf(what, sizeof what, "%s: case %d sequences_scores", name, g);
            tu_close(what, score, rs, (size_t)B, TOL_SCORE, 1e-6);
            free(rs);
        }
        free(opts), free(lp), free(seq);
    }
    attn_translate_session_free(s);
    free(ids), free(src), free(src_len);
}

static void test_hf_models(void **state) {
    (void)state;
    if (!ref_open()) tu_skip("no seq2seq.safetensors (tools/ref_seq2seq.py, run by tests/run.sh)");
    const char *models = attn_st_metadata(REF, "models"), *gens = attn_st_metadata(REF, "gens");
    assert_non_null(models);
    assert_non_null(gens);
    const int n_gens = atoi(gens);
    char list[1024];
    snprintf(list, sizeof list, "%s", models);
    int n = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
         name = strtok_r(NULL, ",", &save), n++) {
        const char *dir = model_dir(name);
        attn_encdec_model *m;
        OK(attn_encdec_load_dir(dir, &m));
        printf("  %s: d_model %d, %d heads, d_ff %d, %d+%d layers, vocab %d, %s, %s\n", name,
               m->cfg.d_model, m->cfg.n_head, m->cfg.d_ff, m->cfg.n_enc_layers,
               m->cfg.n_dec_layers, m->cfg.tgt_vocab, m->cfg.pre_ln ? "pre-LN" : "post-LN",
               m->cfg.share_embeddings ? "shared embeddings" : "separate embeddings");
        check_forward(name, m);
        check_generate(name, dir, m, n_gens);
        attn_encdec_model_free(m);
    }
    assert_true(n >= 5);
}

/* ---- bad directories ---------------------------------------------------------------------- */

static void copy_model(const char *name, const char *to) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, model_dir(name), to);
    assert_int_equal(system(cmd), 0);
}

/* Replace the first `from` in DIR/file by `to`. */
static void edit(const char *dir, const char *file, const char *from, const char *to) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t n;
    char *s = tu_read_all(path, &n);
    assert_non_null(s);
    char *at = strstr(s, from);
    if (!at) fail_msg("%s has no %s", path, from);
    const size_t a = (size_t)(at - s), lf = strlen(from), lt = strlen(to);
    char *o = malloc(n - lf + lt + 1);
    memcpy(o, s, a);
    memcpy(o + a, to, lt);
    memcpy(o + a + lt, at + lf, n - a - lf + 1);
    tu_write_all(path, o, n - lf + lt);
    free(s), free(o);
}

static void test_bad_dirs(void **state) {
    (void)state;
    if (!ref_open()) tu_skip("no seq2seq.safetensors (tools/ref_seq2seq.py, run by tests/run.sh)");
    char dir[512];
    assert_int_equal(tu_mkdtemp(dir, sizeof dir, "seq2seq-bad"), 0);
    attn_encdec_model *m = NULL;
    struct {
        const char *model, *file, *from, *to;
        attn_status want;
        const char *s1, *s2;
    } cases[] = {
        {"marian_swish_shared", "config.json", "\"decoder_ffn_dim\": 64", "\"decoder_ffn_dim\": 32",
         ATTN_STATUS_UNSUPPORTED, "decoder_ffn_dim", "encoder_ffn_dim"},
        {"marian_swish_shared", "config.json", "\"activation_function\": \"swish\"",
         "\"activation_function\": \"tanh\"", ATTN_STATUS_UNSUPPORTED, "activation_function",
         "tanh"},
        {"marian_swish_shared", "config.json", "\"d_model\": 32", "\"d_model\": \"32\"",
         ATTN_STATUS_FORMAT, "d_model", NULL},
        {"marian_swish_shared", "config.json", "\"model_type\": \"marian\"",
         "\"model_type\": \"t5\"", ATTN_STATUS_UNSUPPORTED, "model_type", "t5"},
        {"marian_gelu_separate", "config.json", "\"decoder_vocab_size\": 53",
         "\"decoder_vocab_size\": 50", ATTN_STATUS_UNSUPPORTED, "decoder_vocab_size", NULL},
        {"m2m100_relu", "config.json", "\"encoder_attention_heads\": 4",
         "\"encoder_attention_heads\": 2", ATTN_STATUS_UNSUPPORTED, "encoder_attention_heads",
         NULL},
        {"m2m100_relu", "config.json", "\"encoder_layers\": 2", "\"encoder_layers\": 3",
         ATTN_STATUS_FORMAT, "model.encoder.layers.2", "missing"},
        {"m2m100_relu", "config.json", "\"vocab_size\": 67", "\"vocab_size\": 66",
         ATTN_STATUS_FORMAT, "model.shared.weight", "shape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        copy_model(cases[i].model, dir);
        edit(dir, cases[i].file, cases[i].from, cases[i].to);
        tu_expect_fail3(attn_encdec_load_dir(dir, &m), cases[i].want, cases[i].file, cases[i].s1,
                        cases[i].s2);
        assert_null(m);
    }
    /* generation_config.json */
    attn_hf_generate_options o;
    copy_model("marian_swish_shared", dir);
    edit(dir, "generation_config.json", "\"num_beams\": 3", "\"early_stopping\": \"sometimes\"");
    tu_expect_fail3(attn_hf_generate_config_load(dir, &o), ATTN_STATUS_FORMAT,
                    "generation_config.json", "early_stopping", NULL);
    copy_model("marian_swish_shared", dir);
    edit(dir, "generation_config.json", "\"num_beams\": 3", "\"num_beams\": 0");
    tu_expect_fail3(attn_hf_generate_config_load(dir, &o), ATTN_STATUS_FORMAT,
                    "generation_config.json", "num_beams", NULL);
    copy_model("marian_swish_shared", dir);
    edit(dir, "generation_config.json", "\"bad_words_ids\": [", "\"bad_words_ids\": [7, ");
    tu_expect_fail3(attn_hf_generate_config_load(dir, &o), ATTN_STATUS_FORMAT,
                    "generation_config.json", "bad_words_ids", NULL);
    /* only PyTorch pickles */
    copy_model("marian_swish_shared", dir);
    char a[1100], b[1100];
    snprintf(a, sizeof a, "%s/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/pytorch_model.bin", dir);
    assert_int_equal(rename(a, b), 0);
    tu_expect_fail3(attn_encdec_load_dir(dir, &m), ATTN_STATUS_UNSUPPORTED, "pytorch_model.bin",
                    "safe_serialization=True", NULL);
    tu_rm_tree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_models),
        cmocka_unit_test(test_bad_dirs),
    };
    int rc = cmocka_run_group_tests_name("seq2seq", tests, NULL, NULL);
    if (REF) attn_st_close(REF);
    return rc;
}

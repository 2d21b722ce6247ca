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
 *     sequences_scores within 1e-4; on a batch of 4 and on one of 20 (".big": beam search's
 *     first step with one row per sentence, sentences leaving the batch as they finish).
 * And bad directories: one-line errors naming the file and the field.
 * Attention capture (attn_viz_capture_encdec_mt) of one sentence per model: encoder self, decoder
 * self and cross attention of every layer and head within 1e-5 of transformers'
 * output_attentions, and `attn explain`'s probabilities (attn_explain_layer_encdec, every head's
 * walk-through) equal to the capture; `attn attention` / `attn explain --model` on the text
 * models (NLLB --src-lang / --tgt-lang, Marian >>lang<<): tokenizer, generate and capture end to
 * end against transformers. */
#include "attn_explain.h"
#include "attn_infer.h"
#include "attn_io.h"
#include "attn_models.h"
#include "attn_viz.h"
#include "tu.h"

#include <string.h>
#include <unistd.h>

#define TOL_ENC 1e-4
#define TOL_LOGITS 1e-4
#define TOL_SCORE 1e-4
#define TOL_ATTN 1e-5 /* attention probabilities, absolute */

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

static float *st_f32(attn_st_file *f, const char *key, size_t *n) {
    float *d = NULL;
    const attn_st_tensor *t;
    if (attn_st_load_f32(f, key, &d, &t)) fail_msg("%s", attn_last_error());
    if (n) *n = t->numel;
    return d;
}

static int32_t *st_i32(attn_st_file *f, const char *key, size_t *n) {
    int32_t *d = NULL;
    const attn_st_tensor *t;
    if (attn_st_load_i32(f, key, &d, &t)) fail_msg("%s", attn_last_error());
    if (n) *n = t->numel;
    return d;
}

static float *ref_f32(const char *key, size_t *n) { return st_f32(REF, key, n); }
static int32_t *ref_i32(const char *key, size_t *n) { return st_i32(REF, key, n); }

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

/* attn_hf_generate's results (ids (B, max_out), len) against transformers' sequences seq (B, L):
 * start, the tokens, padding to the widest. A difference is printed and counted as a failure;
 * returns how many sentences are identical. */
static int same_sequences(const char *name, int g, const attn_hf_generate_options *o, int B,
                          const int32_t *seq, int L, const int32_t *ids, const int32_t *len,
                          int max_out) {
    int same = 0;
    for (int b = 0; b < B; b++) {
        bool eq = 1 + len[b] <= L && seq[(size_t)b * L] == o->decoder_start_token_id;
        for (int t = 1; t < L && eq; t++) {
            const int32_t want = seq[(size_t)b * L + t];
            const int32_t got = t - 1 < len[b] ? ids[(size_t)b * max_out + t - 1]
                                               : o->pad_token_id >= 0 ? o->pad_token_id
                                                                      : o->eos_token_id;
            eq = got == want;
        }
        same += eq;
        if (!eq) {
            printf("    %s case %d sentence %d differs:\n      transformers:", name, g, b);
            for (int t = 0; t < L; t++) printf(" %d", seq[(size_t)b * L + t]);
            printf("\n      attn:         %d", o->decoder_start_token_id);
            for (int t = 0; t < len[b]; t++) printf(" %d", ids[(size_t)b * max_out + t]);
            printf("\n");
            tu_failures++;
        }
    }
    printf("  %-44s %d/%d sequences identical (beams %d, lengths", name, same, B, o->num_beams);
    for (int b = 0; b < B; b++) printf(" %d", len[b]);
    printf(")%s\n", same == B ? "" : " FAIL");
    return same;
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
    assert_true(B <= 64);
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
        same_sequences(name, g, &o, B, seq, L, ids, len, max_out);
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
    bool big_marian = false, big_m2m = false;
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
        /* 20 sentences: a first beam step of one row per sentence, sentences leaving as they end
         * (under valgrind and sanitizers: on the first model of each architecture, the same
         * code paths) */
        const bool marian = strncmp(name, "marian", 6) == 0;
        if (!(tu_valgrind() || tu_sanitized()) || !(marian ? big_marian : big_m2m)) {
            char big[160];
            snprintf(big, sizeof big, "%s.big", name);
            check_generate(big, dir, m, n_gens);
            *(marian ? &big_marian : &big_m2m) = true;
        }
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

/* ---- attn translate on the directories, end to end --------------------------------------------
 * `attn translate --model DIR --ids` (one source per line, its </s> included; out: the generated
 * ids without the start and </s>) against transformers' generate: the directory's
 * generation_config.json alone (case 2), and for Marian --beam 1 --max-tokens 19 (case 0:
 * num_beams 1, max_length 20) and --early-stopping true --length-penalty 0.6 (case 7), on the
 * 20-sentence batch too. */
static int cli_case(const char *name, const char *dir, int g, const char *opts, const char *tmp) {
    char key[256], in[700], out[700], err[700], args[3000], q[1200];
    snprintf(key, sizeof key, "%s.src", name);
    const attn_st_tensor *ts = ref_t(key);
    const int B = (int)ts->shape[0], Ts = (int)ts->shape[1];
    int32_t *src = ref_i32(key, NULL);
    snprintf(key, sizeof key, "%s.src_len", name);
    int32_t *src_len = ref_i32(key, NULL);
    snprintf(key, sizeof key, "%s.gen.%d.seq", name, g);
    const int L = (int)ref_t(key)->shape[1];
    int32_t *seq = ref_i32(key, NULL);
    snprintf(in, sizeof in, "%s/in.txt", tmp);
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    snprintf(err, sizeof err, "%s/err.txt", tmp);
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < src_len[b]; t++)
            fprintf(f, "%d%c", src[(size_t)b * Ts + t], t + 1 < src_len[b] ? ' ' : '\n');
    fclose(f);
    snprintf(args, sizeof args, "translate --model %s --ids %s", tu_shq(dir, q, sizeof q), opts);
    const int rc = tu_run_cli_files(args, in, out, err);
    size_t n;
    char *text = tu_read_all(out, &n);
    assert_non_null(text);
    if (rc != 0) {
        char *e = tu_read_all(err, &n);
        fail_msg("attn %s: exit %d: %s", args, rc, e ? e : "");
    }
    attn_hf_generate_options o;
    OK(attn_hf_generate_config_load(dir, &o));
    int same = 0;
    /* one line per sentence, empty ones included (an empty translation) */
    char *line = n > 0 ? text : NULL;
    for (int b = 0; b < B; b++) {
        char *nl = line ? strchr(line, '\n') : NULL;
        if (nl) *nl = 0;
        /* transformers' tokens after the start, up to </s> or the padding */
        char want[1024];
        size_t k = 0;
        want[0] = 0;
        for (int t = 1; t < L; t++) {
            const int32_t id = seq[(size_t)b * L + t];
            if (id == o.eos_token_id) break;
            k += (size_t)snprintf(want + k, sizeof want - k, k ? " %d" : "%d", id);
        }
        const char *got = line ? line : "(no line)";
        if (strcmp(got, want) == 0) same++;
        else printf("    %s: sentence %d: attn translate: %s\n      transformers:     %s\n", name, b,
                    got, want);
        line = nl && nl[1] ? nl + 1 : NULL;
    }
    printf("  attn translate --ids %-28s %-24s %d/%d identical to generate\n", name, opts, same,
           B);
    free(text), free(src), free(src_len), free(seq);
    return B - same;
}

static void test_translate_cli(void **state) {
    (void)state;
    if (!ref_open()) tu_skip("no seq2seq.safetensors (tools/ref_seq2seq.py, run by tests/run.sh)");
    if (access(tu_attn_bin(), X_OK) != 0) tu_skip("no %s (make)", tu_attn_bin());
    char tmp[512];
    assert_int_equal(tu_mkdtemp(tmp, sizeof tmp, "seq2seq-cli"), 0);
    char list[1024];
    snprintf(list, sizeof list, "%s", attn_st_metadata(REF, "models"));
    int bad = 0, n = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
         name = strtok_r(NULL, ",", &save), n++) {
        const char *dir = model_dir(name);
        bad += cli_case(name, dir, 2, n == 0 ? "--stats" : "", tmp);
        if (n == 0) { /* --stats: the same output, and one line on stderr with the products */
            char err[700];
            snprintf(err, sizeof err, "%s/err.txt", tmp);
            tu_expect_stats_file(err);
        }
        if (strncmp(name, "marian", 6) == 0) {
            char big[160];
            snprintf(big, sizeof big, "%s.big", name);
            static const char es[] = "--beam 4 --max-tokens 12 --early-stopping true "
                                     "--length-penalty 0.6";
            bad += cli_case(name, dir, 0, "--beam 1 --max-tokens 19", tmp);
            bad += cli_case(name, dir, 7, es, tmp);
            if (!(tu_valgrind() || tu_sanitized()) || n == 0) { /* one model there */
                bad += cli_case(big, dir, 2, "", tmp);
                bad += cli_case(big, dir, 7, es, tmp);
            }
        }
    }
    assert_true(n >= 5);
    /* one-line errors */
    char args[3000], q[1200], in[700], out[700], err[700];
    snprintf(in, sizeof in, "%s/in.txt", tmp);
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    snprintf(err, sizeof err, "%s/err.txt", tmp);
    tu_write_all(in, "1 2 x\n", 6);
    snprintf(args, sizeof args, "translate --model %s --ids",
             tu_shq(model_dir("m2m100_relu"), q, sizeof q));
    assert_int_equal(tu_run_cli_files(args, in, out, err), 1);
    tu_expect_error_file(err, "<input>:1");
    snprintf(args, sizeof args, "translate --model %s --ids --tgt-lang zho_Hans",
             tu_shq(model_dir("m2m100_relu"), q, sizeof q));
    assert_int_equal(tu_run_cli_files(args, in, out, err), 1);
    tu_expect_error_file(err, "tokenizer");
    snprintf(args, sizeof args, "translate --model %s --ids --early-stopping maybe",
             tu_shq(model_dir("m2m100_relu"), q, sizeof q));
    assert_int_equal(tu_run_cli_files(args, in, out, err), 2);
    tu_expect_error_file(err, "--early-stopping");
    tu_rm_tree(tmp);
    assert_int_equal(bad, 0);
}

/* `attn translate` with text in and out on a Marian and an NLLB-style M2M100 directory
 * (tools/ref_seq2seq_text.py: tiny random models, tokenizers from SentencePiece models trained
 * there): each case's output lines equal transformers' tokenizer + generate + decode. */
static void test_translate_text_cli(void **state) {
    (void)state;
    char d[4200], path[4400], in[4400], args[6000], q[4400], out[700], err[700], tmp[512];
    snprintf(d, sizeof d, "%s", tu_ref_path("seq2seq_text"));
    snprintf(in, sizeof in, "%s/in.txt", d);
    if (access(in, R_OK) != 0)
        tu_skip("no %s (tools/ref_seq2seq_text.py, run by tests/run.sh)", in);
    if (access(tu_attn_bin(), X_OK) != 0) tu_skip("no %s (make)", tu_attn_bin());
    assert_int_equal(tu_mkdtemp(tmp, sizeof tmp, "seq2seq-text"), 0);
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    snprintf(err, sizeof err, "%s/err.txt", tmp);
    int k = 0, bad = 0;
    for (;; k++) {
        snprintf(path, sizeof path, "%s/case%d.dir", d, k);
        size_t n;
        char *dir = tu_read_all(path, &n);
        if (!dir) break;
        snprintf(path, sizeof path, "%s/case%d.args", d, k);
        char *opts = tu_read_all(path, &n);
        snprintf(path, sizeof path, "%s/case%d.out", d, k);
        char *want = tu_read_all(path, &n);
        assert_non_null(opts);
        assert_non_null(want);
        snprintf(path, sizeof path, "%s/%s", d, dir);
        snprintf(args, sizeof args, "translate --model %s %s", tu_shq(path, q, sizeof q), opts);
        const int rc = tu_run_cli_files(args, in, out, err);
        char *got = tu_read_all(out, &n);
        if (rc != 0) {
            char *e = tu_read_all(err, &n);
            fail_msg("attn %s: exit %d: %s", args, rc, e ? e : "");
        }
        const bool same = got && strcmp(got, want) == 0;
        printf("  attn translate %-6s %-48s %s\n", dir, opts,
               same ? "identical to transformers" : "DIFFERS");
        if (!same) printf("    attn:\n%s    transformers:\n%s", got ? got : "", want), bad++;
        free(dir), free(opts), free(want), free(got);
    }
    assert_true(k >= 4);
    /* an unknown language code: one line naming it */
    snprintf(path, sizeof path, "%s/nllb", d);
    snprintf(args, sizeof args, "translate --model %s --tgt-lang xyz_Abcd",
             tu_shq(path, q, sizeof q));
    assert_int_equal(tu_run_cli_files(args, in, out, err), 1);
    tu_expect_error_file(err, "xyz_Abcd");
    tu_rm_tree(tmp);
    assert_int_equal(bad, 0);
}

/* ---- attn's own models exported (attn_encdec_save_hf_dir) ------------------------------------ */

/* A random attn model of configuration c, every tensor perturbed (biases and norms too) so every
 * path carries signal, and </s> (id 3) made likelier so sentences end at various lengths. */
static attn_encdec_model *random_model(const attn_encdec_config *c, uint64_t seed) {
    attn_encdec_model *m;
    OK(attn_encdec_model_init(c, seed, &m));
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_encdec_tensor *t = &m->tensors[i];
        const float amp = t->ndim == 1 ? 0.2f : 0.15f;
        for (size_t k = 0; k < t->numel; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            m->params[t->offset + k] += amp * ((float)(x >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
        }
    }
    const int C = c->d_model;
    if (c->logits_bias) m->w.out_b[3] += 2.5f;
    else
        for (int i = 0; i < C; i++) m->w.out_w[3 * C + i] *= 6.0f;
    return m;
}

/* Logits (B, Tt, V) of m on the batch (src, src_len, tgt). */
static float *logits_of(const attn_encdec_model *m, int B, int Ts, int Tt, const int32_t *src,
                        const int32_t *src_len, const int32_t *tgt) {
    attn_encdec_state *st;
    OK(attn_encdec_state_init(m, B, Ts, Tt, &st));
    int32_t tl[64];
    for (int b = 0; b < B; b++) tl[b] = Tt;
    float *lg = malloc((size_t)B * Tt * m->cfg.tgt_vocab * sizeof *lg);
    OK(attn_encdec_forward(m, st, B, Ts, Tt, src, src_len, tgt, tl, lg));
    attn_encdec_state_free(st);
    return lg;
}

/* transformers on the export (tools/check_seq2seq_hf.py): the logits of m within TOL_LOGITS of
 * max|logit|, every generate case's sequences those of attn_hf_generate on m with the export's
 * generation_config.json, beam scores within TOL_SCORE. */
static void check_export_in_transformers(const char *name, const char *dir,
                                         const attn_encdec_model *m) {
    const char *b = getenv("ATTN_BUILD");
    char py[4096], cmd[12000], out[4200], what[200];
    snprintf(py, sizeof py, "%s/../.venv/bin/python", b && *b ? b : "build");
    if (access(py, X_OK) != 0) tu_skip("no %s (sh tools/install_deps.sh)", py);
    if (access("tools/check_seq2seq_hf.py", R_OK) != 0)
        tu_skip("tools/check_seq2seq_hf.py not found (run from the repository root)");
    snprintf(out, sizeof out, "%s/hf.safetensors", dir);
    snprintf(cmd, sizeof cmd, "'%s' tools/check_seq2seq_hf.py '%s' '%s'", py, dir, out);
    if (tu_sh_indented(cmd, "  ") != 0) fail_msg("%s failed", cmd);
    attn_st_file *f;
    if (attn_st_open(out, &f)) fail_msg("%s", attn_last_error());
    const attn_st_tensor *ts = attn_st_find(f, "src"), *tt = attn_st_find(f, "tgt");
    assert_non_null(ts);
    assert_non_null(tt);
    const int B = (int)ts->shape[0], Ts = (int)ts->shape[1], Tt = (int)tt->shape[1];
    int32_t *src = st_i32(f, "src", NULL), *src_len = st_i32(f, "src_len", NULL);
    int32_t *tgt = st_i32(f, "tgt", NULL);
    float *ref = st_f32(f, "logits", NULL);
    float *lg = logits_of(m, B, Ts, Tt, src, src_len, tgt);
    snprintf(what, sizeof what, "%s: transformers' logits on the export vs attn's", name);
    tu_close(what, lg, ref, (size_t)B * Tt * m->cfg.tgt_vocab, TOL_LOGITS, 0);
    const int n_gens = atoi(attn_st_metadata(f, "gens"));
    attn_translate_session *s;
    OK(attn_translate_session_init(m, B, 4, Ts, m->cfg.max_len, &s));
    const int max_out = m->cfg.max_len + 1;
    int32_t *ids = malloc((size_t)B * max_out * sizeof *ids), len[64];
    float score[64];
    for (int g = 0; g < n_gens; g++) {
        char key[64];
        snprintf(key, sizeof key, "gen.%d.opts", g);
        int32_t *opts = st_i32(f, key, NULL);
        attn_hf_generate_options o;
        OK(attn_hf_generate_config_load(dir, &o));
        if (opts[0]) o.num_beams = opts[0], o.max_length = opts[1];
        OK(attn_hf_generate(s, &o, B, Ts, src, src_len, max_out, ids, len, score));
        snprintf(key, sizeof key, "gen.%d.seq", g);
        const int L = (int)attn_st_find(f, key)->shape[1];
        int32_t *seq = st_i32(f, key, NULL);
        same_sequences(name, g, &o, B, seq, L, ids, len, max_out);
        if (o.num_beams > 1) {
            snprintf(key, sizeof key, "gen.%d.scores", g);
            float *rs = st_f32(f, key, NULL);
            snprintf(what, sizeof what, "%s: case %d sequences_scores", name, g);
            tu_close(what, score, rs, (size_t)B, TOL_SCORE, 1e-6);
            free(rs);
        }
        free(seq), free(opts);
    }
    attn_translate_session_free(s);
    attn_st_close(f);
    free(ids), free(src), free(src_len), free(tgt), free(ref), free(lg);
}

static attn_encdec_config small_config(int V, int C, int H, int F, int nE, int nD) {
    attn_encdec_config c = attn_encdec_default_config();
    c.src_vocab = c.tgt_vocab = V;
    c.d_model = C, c.n_head = H, c.d_ff = F, c.n_enc_layers = nE, c.n_dec_layers = nD;
    c.max_len = 24;
    c.dropout = 0.1f;
    return c;
}

static void test_export_hf(void **state) {
    (void)state;
    char root[512];
    assert_int_equal(tu_mkdtemp(root, sizeof root, "seq2seq-export"), 0);
    struct {
        const char *name;
        attn_encdec_arch arch;
        attn_encdec_config c;
    } cases[4];
    /* attn train's default: post-LN, attn's interleaved sinusoids, separate untied embeddings,
     * a logits bias -> Marian with the C axis reordered */
    cases[0].name = "post-LN, sinusoidal, separate -> Marian";
    cases[0].arch = ATTN_ENCDEC_ARCH_MARIAN;
    cases[0].c = small_config(41, 24, 3, 40, 2, 2);
    /* Marian's own table, shared and tied, SiLU, unscaled, no logits bias */
    cases[1].name = "post-LN, halves, shared, no bias -> Marian";
    cases[1].arch = ATTN_ENCDEC_ARCH_MARIAN;
    cases[1].c = small_config(37, 16, 2, 24, 1, 3);
    cases[1].c.positions = ATTN_ENCDEC_SINUSOIDAL_HALVES;
    cases[1].c.share_embeddings = cases[1].c.tie_output = true;
    cases[1].c.activation = ATTN_ENCDEC_SILU;
    cases[1].c.scale_embedding = false;
    cases[1].c.logits_bias = false;
    /* the demo's kind (pre-LN, shared and tied) with fairseq's positions, no bias -> M2M100 */
    cases[2].name = "pre-LN, fairseq, shared, tied -> M2M100";
    cases[2].arch = ATTN_ENCDEC_ARCH_M2M100;
    cases[2].c = small_config(45, 32, 4, 48, 2, 2);
    cases[2].c.pre_ln = true;
    cases[2].c.positions = ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ;
    cases[2].c.share_embeddings = cases[2].c.tie_output = true;
    cases[2].c.logits_bias = false;
    cases[3].name = "pre-LN, fairseq, untied, gelu -> M2M100";
    cases[3].arch = ATTN_ENCDEC_ARCH_M2M100;
    cases[3].c = small_config(39, 20, 4, 28, 3, 1);
    cases[3].c.pre_ln = true;
    cases[3].c.positions = ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ;
    cases[3].c.share_embeddings = true;
    cases[3].c.activation = ATTN_ENCDEC_GELU;
    cases[3].c.logits_bias = false;
    for (int k = 0; k < 4; k++) {
        attn_encdec_model *m = random_model(&cases[k].c, 100 + (uint64_t)k);
        char dir[700];
        snprintf(dir, sizeof dir, "%s/export%d", root, k);
        attn_encdec_hf_export o = attn_encdec_hf_export_default(cases[k].arch);
        OK(attn_encdec_save_hf_dir(m, dir, &o));
        printf("  %s\n", cases[k].name);
        /* attn reads the export back as the same model */
        attn_encdec_model *m2;
        OK(attn_encdec_load_dir(dir, &m2));
        assert_int_equal(m2->cfg.arch, cases[k].arch);
        const int32_t src[2 * 5] = {5, 6, 7, 8, 3, 9, 10, 3, 0, 0}, src_len[2] = {5, 3};
        const int32_t tgt[2 * 4] = {2, 11, 12, 13, 2, 14, 15, 16};
        float *a = logits_of(m, 2, 5, 4, src, src_len, tgt);
        float *b2 = logits_of(m2, 2, 5, 4, src, src_len, tgt);
        char what[200];
        snprintf(what, sizeof what, "%s: attn on its export vs attn", cases[k].name);
        tu_close(what, b2, a, (size_t)2 * 4 * m->cfg.tgt_vocab, 1e-5, 0);
        free(a), free(b2);
        attn_encdec_model_free(m2);
        check_export_in_transformers(cases[k].name, dir, m);
        attn_encdec_model_free(m);
    }
    /* what the architectures cannot be: one-line errors naming the field */
    attn_encdec_config demo = small_config(41, 16, 2, 24, 1, 1);
    demo.pre_ln = true, demo.share_embeddings = demo.tie_output = true; /* the demo's kind */
    struct {
        attn_encdec_arch arch;
        const char *s1, *s2;
    } bad[] = {
        {ATTN_ENCDEC_ARCH_MARIAN, "pre_ln", "post-LN only"},
        {ATTN_ENCDEC_ARCH_M2M100, "positions", "sinusoidal_fairseq"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        attn_encdec_model *m = random_model(&demo, 7);
        attn_encdec_hf_export o = attn_encdec_hf_export_default(bad[i].arch);
        tu_expect_fail3(attn_encdec_save_hf_dir(m, root, &o), ATTN_STATUS_UNSUPPORTED, "export",
                        bad[i].s1, bad[i].s2);
        attn_encdec_model_free(m);
    }
    attn_encdec_config c = demo;
    c.positions = ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ; /* the logits bias is left */
    attn_encdec_model *m = random_model(&c, 8);
    attn_encdec_hf_export o = attn_encdec_hf_export_default(ATTN_ENCDEC_ARCH_M2M100);
    tu_expect_fail3(attn_encdec_save_hf_dir(m, root, &o), ATTN_STATUS_UNSUPPORTED, "logits_bias",
                    "no bias", NULL);
    memset(m->w.out_b, 0, (size_t)c.tgt_vocab * sizeof(float)); /* an all-zero bias is none */
    char dir[700];
    snprintf(dir, sizeof dir, "%s/zero-bias", root);
    OK(attn_encdec_save_hf_dir(m, dir, &o));
    attn_encdec_model_free(m);
    c = demo, c.pre_ln = false, c.positions = ATTN_ENCDEC_LEARNED;
    m = random_model(&c, 9);
    o = attn_encdec_hf_export_default(ATTN_ENCDEC_ARCH_MARIAN);
    tu_expect_fail3(attn_encdec_save_hf_dir(m, root, &o), ATTN_STATUS_UNSUPPORTED, "positions",
                    "learned", NULL);
    attn_encdec_model_free(m);
    c = demo, c.pre_ln = false, c.layer_norm_eps = 1e-6f;
    m = random_model(&c, 10);
    tu_expect_fail3(attn_encdec_save_hf_dir(m, root, &o), ATTN_STATUS_UNSUPPORTED,
                    "layer_norm_eps", "1e-06", NULL);
    o.eos_id = 99;
    tu_expect_fail3(attn_encdec_save_hf_dir(m, root, &o), ATTN_STATUS_INVALID_ARGUMENT, "eos_id",
                    "99", NULL);
    attn_encdec_model_free(m);
    tu_rm_tree(root);
}

/* ---- attention capture ------------------------------------------------------------------ */

static const char *const KIND_REF[3] = {"enc", "dec", "cross"};
static const attn_viz_kind KINDS[3] = {ATTN_VIZ_ENC_SELF, ATTN_VIZ_DEC_SELF, ATTN_VIZ_CROSS};

/* Every map of v against f's PREFIX.{enc,dec,cross}.L; the largest error. */
static double check_maps(const attn_viz *v, attn_st_file *f, const char *prefix, const char *name) {
    double worst = 0;
    int n = 0;
    for (int k = 0; k < 3; k++)
        for (int l = 0; l < attn_viz_num_layers(v, KINDS[k]); l++, n++) {
            const attn_viz_map *mp = attn_viz_find(v, KINDS[k], l);
            char key[256], what[600];
            snprintf(key, sizeof key, "%s.%s.%d", prefix, KIND_REF[k], l);
            size_t cnt;
            float *ref = st_f32(f, key, &cnt);
            assert_int_equal(cnt, (size_t)mp->H * mp->Tq * mp->Tk);
            for (size_t i = 0; i < cnt; i++) {
                const double e = fabs((double)mp->p[i] - ref[i]);
                if (e > worst) worst = e;
            }
            snprintf(what, sizeof what, "%s %s", name, key);
            if (!tu_close(what, mp->p, ref, cnt, 0, TOL_ATTN)) fail();
            free(ref);
        }
    assert_true(n >= 3);
    return worst;
}

/* attn_explain_layer_encdec's probabilities and every head's walk-through weights equal the
 * capture's maps (the same forward). */
static void check_explain(const attn_encdec_model *m, const attn_viz *v, const int32_t *src,
                          int Ts, const int32_t *tgt, int n_tgt, const char *name) {
    double worst = 0;
    for (int k = 0; k < 3; k++)
        for (int l = 0; l < attn_viz_num_layers(v, KINDS[k]); l++) {
            const attn_viz_map *mp = attn_viz_find(v, KINDS[k], l);
            attn_explain_layer L;
            OK(attn_explain_layer_encdec(m, src, Ts, tgt, n_tgt, KINDS[k], l, &L));
            assert_int_equal(L.H * L.Tq * L.Tk, mp->H * mp->Tq * mp->Tk);
            for (int i = 0; i < L.H * L.Tq * L.Tk; i++)
                worst = fmax(worst, fabs((double)L.probs[i] - mp->p[i]));
            for (int h = 0; h < L.H; h++) {
                attn_explain_head eh;
                OK(attn_explain_head_compute(&L, h, false, &eh));
                const float *p = mp->p + (size_t)h * mp->Tq * mp->Tk;
                for (int i = 0; i < mp->Tq * mp->Tk; i++)
                    worst = fmax(worst, fabs((double)eh.pass.weights[i] - p[i]));
                attn_explain_head_free(&eh);
            }
            attn_explain_layer_free(&L);
        }
    printf("  %-44s explain vs capture max_abs_err=%.3e %s\n", name, worst,
           worst <= TOL_ATTN ? "ok" : "FAIL");
    assert_true(worst <= TOL_ATTN);
}

static void test_hf_attention(void **state) {
    (void)state;
    if (!ref_open()) tu_skip("no seq2seq.safetensors (tools/ref_seq2seq.py, run by tests/run.sh)");
    char list[1024];
    snprintf(list, sizeof list, "%s", attn_st_metadata(REF, "models"));
    int n = 0;
    double worst = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
         name = strtok_r(NULL, ",", &save), n++) {
        char key[256];
        snprintf(key, sizeof key, "%s.attn.src", name);
        if (!attn_st_find(REF, key)) tu_skip("seq2seq.safetensors has no %s (rerun tools/ref_seq2seq.py)", key);
        size_t Ts, n_tgt;
        int32_t *src = ref_i32(key, &Ts);
        snprintf(key, sizeof key, "%s.attn.tgt", name);
        int32_t *tgt = ref_i32(key, &n_tgt);
        attn_encdec_model *m;
        OK(attn_encdec_load_dir(model_dir(name), &m));
        attn_viz *v = NULL;
        OK(attn_viz_capture_encdec_mt(m, NULL, src, (int)Ts, tgt, (int)n_tgt, &v));
        assert_int_equal(v->n_tokens, (int)Ts);
        assert_int_equal(v->n_target, (int)n_tgt - 1);
        snprintf(key, sizeof key, "%s.attn", name);
        worst = fmax(worst, check_maps(v, REF, key, name));
        check_explain(m, v, src, (int)Ts, tgt, (int)n_tgt, name);
        attn_viz_free(v);
        attn_encdec_model_free(m);
        free(src), free(tgt);
    }
    assert_true(n >= 5);
    printf("  attention capture vs transformers, %d models: max_abs_err %.3e\n", n, worst);
}

/* `attn attention` and `attn explain --model` on the text models: the source through the
 * tokenizer with the language tokens, the translation by generate's settings, the maps of the
 * output sequence = transformers' (tools/ref_seq2seq_text.py's attn.safetensors). */
static void test_hf_attention_cli(void **state) {
    (void)state;
    char d[4200], path[4400], args[9000], q[4400], q2[800], tmp[512], out[700], err[700];
    snprintf(d, sizeof d, "%s", tu_ref_path("seq2seq_text"));
    snprintf(path, sizeof path, "%s/attn.safetensors", d);
    if (access(path, R_OK) != 0)
        tu_skip("no %s (tools/ref_seq2seq_text.py, run by tests/run.sh)", path);
    if (access(tu_attn_bin(), X_OK) != 0) tu_skip("no %s (make)", tu_attn_bin());
    attn_st_file *f;
    OK(attn_st_open(path, &f));
    assert_int_equal(tu_mkdtemp(tmp, sizeof tmp, "seq2seq-attn"), 0);
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    snprintf(err, sizeof err, "%s/err.txt", tmp);
    const char *text = attn_st_metadata(f, "text");
    assert_non_null(text);
    for (int c = 0; c < 2; c++) {
        const char *name = c ? "marian" : "nllb";
        char dir[4400], cap[800], qt[1200];
        snprintf(dir, sizeof dir, "%s/%s", d, name);
        snprintf(cap, sizeof cap, "%s/%s.safetensors", tmp, name);
        snprintf(args, sizeof args, "attention --model %s %s %s --out %s",
                 tu_shq(dir, q, sizeof q), tu_shq(text, qt, sizeof qt), attn_st_metadata(f, name),
                 tu_shq(cap, q2, sizeof q2));
        if (tu_run_cli_files(args, NULL, out, err) != 0) {
            size_t el;
            char *e = tu_read_all(err, &el);
            fail_msg("attn %s: %s", args, e ? e : "?");
        }
        attn_viz *v;
        OK(attn_viz_load(cap, &v));
        char key[64];
        size_t Ts, n_seq;
        snprintf(key, sizeof key, "%s.src", name);
        free(st_i32(f, key, &Ts));
        snprintf(key, sizeof key, "%s.seq", name);
        int32_t *seq = st_i32(f, key, &n_seq);
        assert_int_equal(v->n_tokens, (int)Ts);
        assert_int_equal(v->n_target, (int)n_seq - 1);
        check_maps(v, f, name, name);
        /* explain --json: the cross weights of the last query row = the capture's */
        const attn_viz_map *mp = attn_viz_find(v, ATTN_VIZ_CROSS, 1);
        assert_non_null(mp);
        snprintf(args, sizeof args,
                 "explain --model %s %s %s --kind cross --layer 1 --head 1 --json",
                 tu_shq(dir, q, sizeof q), tu_shq(text, qt, sizeof qt), attn_st_metadata(f, name));
        assert_int_equal(tu_run_cli_files(args, NULL, out, err), 0);
        size_t jl;
        char *j = tu_read_all(out, &jl);
        assert_non_null(j);
        const char *w = strstr(j, "\"weights\":[");
        assert_non_null(w);
        w += strlen("\"weights\":[");
        double e = 0;
        int cnt = 0;
        for (int i = 0; i < mp->Tq; i++) { /* [[row 0], [row 1], ...] */
            while (*w == '[' || *w == ',') w++;
            for (int k = 0; k < mp->Tk; k++, cnt++) {
                char *end;
                const double x = strtod(w, &end);
                assert_true(end != w);
                e = fmax(e, fabs(x - mp->p[((size_t)mp->Tq + i) * mp->Tk + k]));
                w = end;
                while (*w == ',' || *w == ']') w++;
                if (k + 1 < mp->Tk && *w == '[') fail_msg("short weights row %d", i);
            }
        }
        printf("  attn explain --model %s --json cross 1.1: %d weights, max_abs_err vs capture "
               "%.3e\n",
               name, cnt, e);
        assert_true(e <= TOL_ATTN);
        free(j), free(seq);
        attn_viz_free(v);
    }
    /* one-line errors */
    snprintf(args, sizeof args, "attention --model %s hi --src-lang xx_Nope",
             tu_shq(model_dir("m2m100_relu"), q, sizeof q));
    assert_int_equal(tu_run_cli_files(args, NULL, out, err), 1);
    tu_expect_error_file(err, "tokenizer");
    snprintf(args, sizeof args, "attention --model %s/nllb hi --src-lang xx_Nope",
             tu_shq(d, q, sizeof q));
    assert_int_equal(tu_run_cli_files(args, NULL, out, err), 1);
    tu_expect_error_file(err, "xx_Nope");
    attn_st_close(f);
    tu_rm_tree(tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_models),
        cmocka_unit_test(test_bad_dirs),
        cmocka_unit_test(test_export_hf),
        cmocka_unit_test(test_translate_cli),
        cmocka_unit_test(test_translate_text_cli),
        cmocka_unit_test(test_hf_attention),
        cmocka_unit_test(test_hf_attention_cli),
    };
    int rc = cmocka_run_group_tests_name("seq2seq", tests, NULL, NULL);
    if (REF) attn_st_close(REF);
    return rc;
}

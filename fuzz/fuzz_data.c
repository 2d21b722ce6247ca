/* fuzz_data.c — text inputs of training and scoring: a TSV parallel corpus (attn_data_load_tsv,
 * then split, references, encoding with a fixed tokenizer, a loader's batches with seek), the
 * same bytes as a masked-LM text file (attn_data_load_sentences with a fixed BERT-style WordPiece
 * tokenizer, then attn_data_mlm_* batches, checked cell by cell) and as a BLEU lines file
 * (attn_bleu_read_lines, then attn_bleu_corpus of the lines against themselves shifted by one,
 * with each BLEU tokenizer). The first byte picks options. */
#include "fuzz.h"

#include "attn_data.h"
#include "attn_eval.h"
#include "attn_tok.h"

static attn_tok *tok, *wordpiece;

/* [CLS] ... [SEP] around each line, [MASK], a few words and pieces. */
static const char wordpiece_json[] =
    "{\"added_tokens\": ["
    "{\"id\": 0, \"content\": \"[PAD]\", \"special\": true, \"single_word\": false, "
    "\"lstrip\": false, \"rstrip\": false, \"normalized\": false},"
    "{\"id\": 1, \"content\": \"[UNK]\", \"special\": true, \"single_word\": false, "
    "\"lstrip\": false, \"rstrip\": false, \"normalized\": false},"
    "{\"id\": 2, \"content\": \"[CLS]\", \"special\": true, \"single_word\": false, "
    "\"lstrip\": false, \"rstrip\": false, \"normalized\": false},"
    "{\"id\": 3, \"content\": \"[SEP]\", \"special\": true, \"single_word\": false, "
    "\"lstrip\": false, \"rstrip\": false, \"normalized\": false},"
    "{\"id\": 4, \"content\": \"[MASK]\", \"special\": true, \"single_word\": false, "
    "\"lstrip\": false, \"rstrip\": false, \"normalized\": false}], "
    "\"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": true}, "
    "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, "
    "\"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\", 3], "
    "\"cls\": [\"[CLS]\", 2]}, "
    "\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", "
    "\"continuing_subword_prefix\": \"##\", \"max_input_chars_per_word\": 100, \"vocab\": "
    "{\"[PAD]\": 0, \"[UNK]\": 1, \"[CLS]\": 2, \"[SEP]\": 3, \"[MASK]\": 4, \"know\": 5, "
    "\"##ledge\": 6, \"is\": 7, \"power\": 8, \".\": 9, \"the\": 10, \"a\": 11, \"##s\": 12, "
    "\"知\": 13, \"识\": 14}}}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (attn_tok_load(fuzz_file("wordpiece.json", wordpiece_json, sizeof wordpiece_json - 1),
                      &wordpiece))
        abort();
    const char *lines[] = {"Knowledge is power.", "知识就是力量。", "I think, therefore I am.",
                           "我思故我在。", "the the then there"};
    attn_tok_train_params p = attn_tok_train_default_params();
    p.vocab_size = 300;
    p.min_frequency = 1;
    if (attn_tok_train_bpe(&p, lines, NULL, 5, &tok)) abort();
    return 0;
}

static void corpus(const char *path, unsigned flags) {
    attn_data_tsv_options to = attn_data_tsv_default_options();
    if (flags & 1) to.src_col = 1, to.tgt_col = 0;
    if (flags & 2) to.attr_col = -1;
    attn_data_corpus c;
    if (attn_data_load_tsv(path, &to, &c)) {
        fuzz_check_message(attn_last_error());
        if (!strstr(attn_last_error(), path)) abort();
        return;
    }
    for (size_t i = 0; i < c.n; i++)
        if (!c.src[i][0] || !c.tgt[i][0] || !c.attr[i] || c.line[i] < 1) abort();
    attn_data_split_options so = attn_data_split_default_options();
    so.min_valid_pairs = 1 + (flags >> 2 & 1);
    so.min_test_pairs = 1;
    attn_data_split sp;
    if (attn_data_split_make(&c, &so, &sp)) {
        fuzz_check_message(attn_last_error());
        attn_data_corpus_free(&c);
        return;
    }
    if (sp.n_train + sp.n_valid + sp.n_test != c.n) abort();
    attn_data_refs refs;
    if (attn_data_refs_make(&c, sp.valid, sp.n_valid, &refs) == ATTN_STATUS_OK) {
        if (refs.n > sp.n_valid || (sp.n_valid && !refs.n_refs)) abort();
        attn_data_refs_free(&refs);
    }
    attn_data_encode_options eo = attn_data_encode_default_options();
    eo.max_len = flags & 8 ? 6 : 64;
    eo.truncate = flags & 16;
    attn_data_dataset *ds;
    if (attn_data_encode(&c, sp.train, sp.n_train, tok, &eo, &ds) == ATTN_STATUS_OK) {
        attn_data_batch_options bo = attn_data_batch_default_options();
        bo.max_tokens = 64 + (flags & 32 ? 0 : 100);
        bo.bucket_size = flags & 64 ? 2 : 0;
        attn_data_loader *ld;
        if (attn_data_loader_new(ds, &bo, &ld) == ATTN_STATUS_OK) {
            attn_data_batch b;
            memset(&b, 0, sizeof b);
            for (int k = 0; k < 6; k++) {
                if (attn_data_loader_next(ld, &b)) abort();
                if (b.B < 1 || b.Ts < 1 || b.Tt < 1) abort();
                for (int i = 0; i < b.B; i++)
                    if (b.src_len[i] < 1 || b.src_len[i] > b.Ts || b.tgt_len[i] < 1 ||
                        b.tgt_len[i] > b.Tt)
                        abort();
            }
            attn_data_pos pos = attn_data_loader_tell(ld);
            if (attn_data_loader_seek(ld, pos)) abort();
            attn_data_pos far = {pos.epoch, pos.batch + 1000000};
            if (attn_data_loader_seek(ld, far) == ATTN_STATUS_OK) abort();
            attn_data_batch_free(&b);
            attn_data_loader_free(ld);
        } else {
            fuzz_check_message(attn_last_error());
        }
        attn_data_range *r;
        size_t nr;
        if (attn_data_dataset_plan_fixed(ds, 3, 40, &r, &nr) == ATTN_STATUS_OK) attn_free(r);
        attn_data_dataset_free(ds);
    } else {
        fuzz_check_message(attn_last_error());
    }
    attn_data_split_free(&sp);
    attn_data_corpus_free(&c);
}

/* Every cell of a masked batch: a chosen token's label is the sentence's id there, an unchosen
 * one keeps its id, the padding is 0 / -100, specials are never chosen. */
static void check_mlm_batch(const attn_data_sentences *s, const attn_data_mlm_batch *b) {
    int64_t tokens = 0, labels = 0;
    for (int i = 0; i < b->B; i++) {
        if (b->example[i] >= s->n) abort();
        const int32_t *ids = s->ids + s->off[b->example[i]];
        const int n = (int)(s->off[b->example[i] + 1] - s->off[b->example[i]]);
        if (b->len[i] != n || n > b->T) abort();
        for (int t = 0; t < b->T; t++) {
            const int32_t x = b->ids[(size_t)i * b->T + t], l = b->labels[(size_t)i * b->T + t];
            if (t >= n) {
                if (x != 0 || l != -100) abort();
                continue;
            }
            if (l == -100) {
                if (x != ids[t]) abort();
            } else {
                if (l != ids[t] || attn_tok_is_special(wordpiece, ids[t])) abort();
                labels++;
            }
            if (x < 0 || x >= attn_tok_vocab_size(wordpiece)) abort();
        }
        tokens += n;
    }
    if (tokens != b->n_tokens || labels != b->n_labels) abort();
}

static void sentences(const char *path, unsigned flags) {
    attn_data_text_options to = {.column = (int)(flags & 3), .max_len = flags & 4 ? 3 : 24};
    attn_data_sentences s;
    if (attn_data_load_sentences(path, wordpiece, &to, &s)) {
        fuzz_check_message(attn_last_error());
        if (!strstr(attn_last_error(), path)) abort();
        return;
    }
    if (s.n < 1 || s.n > s.n_lines || s.off[s.n] != s.tokens) abort();
    for (size_t i = 0; i < s.n; i++) {
        const size_t n = s.off[i + 1] - s.off[i];
        if (n < 3 || n > (size_t)to.max_len || s.ids[s.off[i]] != 2 || s.ids[s.off[i + 1] - 1] != 3)
            abort(); /* [CLS] ... [SEP], at least one token between */
    }
    attn_data_mlm_options mo = attn_data_mlm_default_options();
    mo.batch = 1 + (int)(flags >> 3 & 3);
    mo.valid_size = flags & 32 ? 1 : SIZE_MAX;
    mo.mlm_probability = flags & 64 ? 1.0f : 0.15f;
    attn_data_mlm *m;
    if (attn_data_mlm_new(&s, wordpiece, &mo, &m)) {
        fuzz_check_message(attn_last_error());
        attn_data_sentences_free(&s);
        return;
    }
    if (attn_data_mlm_num_train(m) + attn_data_mlm_num_valid(m) != s.n) abort();
    attn_data_mlm_batch b;
    memset(&b, 0, sizeof b);
    size_t seen = 0;
    for (uint64_t e = 0; e < 2; e++)
        for (size_t k = 0; k < attn_data_mlm_train_batches(m) && k < 8; k++) {
            if (attn_data_mlm_train_batch(m, e, k, &b)) abort();
            check_mlm_batch(&s, &b);
            seen += (size_t)b.B;
        }
    if (attn_data_mlm_train_batches(m) <= 8 && seen != 2 * attn_data_mlm_num_train(m)) abort();
    for (size_t k = 0; k < attn_data_mlm_valid_batches(m); k++) {
        if (attn_data_mlm_valid_batch(m, k, &b)) abort();
        check_mlm_batch(&s, &b);
    }
    if (attn_data_mlm_train_batch(m, 0, attn_data_mlm_train_batches(m), &b) == ATTN_STATUS_OK)
        abort();
    attn_data_mlm_batch_free(&b);
    attn_data_mlm_free(m);
    attn_data_sentences_free(&s);
}

static void bleu(const char *path, unsigned flags) {
    attn_bleu_lines l;
    if (attn_bleu_read_lines(path, &l)) {
        fuzz_check_message(attn_last_error());
        if (!strstr(attn_last_error(), path)) abort();
        return;
    }
    attn_bleu_options o = {(attn_bleu_tokenizer)(flags % 3), (flags & 4) != 0};
    const char **shifted = malloc((l.n + 1) * sizeof *shifted);
    if (!shifted) abort();
    for (size_t i = 0; i < l.n; i++) shifted[i] = l.lines[(i + 1) % l.n];
    const char *const *refs[2] = {(const char *const *)l.lines, shifted};
    attn_bleu_result r;
    for (size_t nr = 1; nr <= 2; nr++) {
        if (attn_bleu_corpus(l.n, nr == 1 ? (const char *const *)shifted
                                          : (const char *const *)l.lines,
                             nr, refs, &o, &r))
            abort(); /* valid lines always score */
        if (!(r.score >= 0 && r.score <= 100.000001) || r.sys_len < 0 || r.ref_len < 0) abort();
    }
    /* hypotheses equal to the only reference: every n-gram matches */
    if (attn_bleu_corpus(l.n, (const char *const *)l.lines, 1, refs, &o, &r)) abort();
    for (int k = 0; k < ATTN_BLEU_ORDER; k++)
        if (r.counts[k] != r.totals[k]) abort();
    for (size_t i = 0; i < l.n && i < 8; i++) {
        char *t;
        if (attn_bleu_tokenize(l.lines[i], &o, &t)) abort();
        attn_free(t);
    }
    free(shifted);
    attn_bleu_lines_free(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *path = fuzz_file("data.tsv", data + 1, size - 1);
    corpus(path, data[0]);
    sentences(path, data[0]);
    bleu(path, data[0]);
    return 0;
}

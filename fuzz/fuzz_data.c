/* fuzz_data.c — text inputs of training and scoring: a TSV parallel corpus (attn_data_load_tsv,
 * then split, references, encoding with a fixed tokenizer, a loader's batches with seek) and the
 * same bytes as a BLEU lines file (attn_bleu_read_lines, then attn_bleu_corpus of the lines
 * against themselves shifted by one, with each BLEU tokenizer). The first byte picks options. */
#include "fuzz.h"

#include "attn_data.h"
#include "attn_eval.h"
#include "attn_tok.h"

static attn_tok *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
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
    bleu(path, data[0]);
    return 0;
}

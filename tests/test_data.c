/* test_data.c — the parallel-corpus pipeline (src/data/, include/attn_data.h):
 *
 *   split      on the Tatoeba corpus: sizes (valid and test >= 1,000 pairs), no English sentence
 *              on two sides (checked with a hash set of its own), every pair in exactly one part,
 *              the same seed gives the same split and another seed another; where the article's
 *              "Knowledge is power." lands; the test split written as TSV reads back the same;
 *              multi-reference grouping (refs as hypotheses score BLEU 100) and its files.
 *   batches    a tokenizer trained here on the corpus encodes the train split; one epoch of the
 *              loader holds every pair exactly once, every batch within max_tokens, rows built
 *              right (<s> first in tgt_in, </s> last in tgt_out, pad_id after, lengths equal);
 *              the padding fraction is printed and must stay under 10%; the same (seed, epoch)
 *              gives the same batches; a loader seeked to a saved position gives the same
 *              remaining batches, across the epoch boundary; truncation; fixed-order plans.
 *   bad input  missing file, invalid UTF-8, too few columns, empty fields or input, impossible
 *              split sizes and budgets: the right status and a message naming file and line.
 *   GPT        attn_data_lm_batch (the windows `attn train --arch gpt` trains on): the window
 *              offsets of a few batches and a hash of 200 batches, per seed and stream, equal
 *              those the CLI's own sampler drew before it moved here (recorded with that code);
 *              y is x shifted by one; bad arguments.
 *   BERT       attn_data_load_sentences + attn_data_mlm_* on a generated text file with the
 *              all-MiniLM-L6-v2 tokenizer (skipped without models/): sentence counts, token
 *              hashes, the validation split and hashes of masked batches of two epochs equal
 *              those of the CLI's code before it moved here (recorded); every cell of every batch
 *              consistent (labels where chosen, ids kept elsewhere, padding 0 / -100); every
 *              training sentence once per epoch; bad files, options and positions.
 *
 * Needs ../shared/data/tatoeba-eng-cmn/cmn.txt (relative to the repository root, where
 * tests/run.sh runs); the corpus tests are skipped (tu_skip) without it. Scratch files go to
 * a fresh mkdtemp directory, removed at the end. */
#include "attn_bert.h"
#include "attn_data.h"
#include "attn_eval.h"
#include "tu.h"

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define CORPUS "../shared/data/tatoeba-eng-cmn/cmn.txt"
#define ATTN_MAX(a, b) ((a) > (b) ? (a) : (b))

/* A hash set of strings, written independently of the library's, to check disjointness. */
typedef struct {
    const char **slot;
    size_t cap;
} strset;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ^ (h >> 29);
}
static void set_init(strset *s, size_t n) {
    s->cap = 64;
    while (s->cap < 3 * n) s->cap *= 2;
    s->slot = calloc(s->cap, sizeof *s->slot);
    assert_non_null(s->slot);
}
static bool set_has(const strset *s, const char *x) {
    for (size_t h = hash_str(x) & (s->cap - 1); s->slot[h]; h = (h + 1) & (s->cap - 1))
        if (!strcmp(s->slot[h], x)) return true;
    return false;
}
static void set_add(strset *s, const char *x) {
    size_t h = hash_str(x) & (s->cap - 1);
    while (s->slot[h] && strcmp(s->slot[h], x)) h = (h + 1) & (s->cap - 1);
    s->slot[h] = x;
}

static bool g_have_corpus;
static attn_data_corpus g_c;

static const char *part_name(const attn_data_split *sp, size_t i) {
    for (size_t k = 0; k < sp->n_train; k++) if (sp->train[k] == i) return "train";
    for (size_t k = 0; k < sp->n_valid; k++) if (sp->valid[k] == i) return "valid";
    for (size_t k = 0; k < sp->n_test; k++) if (sp->test[k] == i) return "test";
    return "none";
}

/* ---- split ---- */

static void test_split(void **state) {
    (void)state;
    if (!g_have_corpus) tu_skip("%s not found", CORPUS);
    const attn_data_corpus *c = &g_c;
    assert_int_equal(c->n, 28090);
    assert_string_equal(c->src[0], "Hi."); /* the BOM is gone */
    assert_true(strstr(c->attr[0], "CC-BY") != NULL);

    attn_data_split_options so = attn_data_split_default_options();
    attn_data_split sp, sp2, sp3;
    double t0 = tu_now();
    assert_int_equal(attn_data_split_make(c, &so, &sp), 0);
    double t1 = tu_now();
    printf("  split (seed %llu, %.1f ms): train %zu pairs / %zu sentences, valid %zu / %zu, test %zu / %zu\n",
           (unsigned long long)so.seed, 1e3 * (t1 - t0), sp.n_train, sp.s_train, sp.n_valid,
           sp.s_valid, sp.n_test, sp.s_test);
    assert_true(sp.n_valid >= 1000 && sp.n_test >= 1000);
    assert_int_equal(sp.n_train + sp.n_valid + sp.n_test, c->n);
    /* The README's 26,662 counts line 1's "\uFEFFHi." apart from line 2's "Hi.";
     * with the BOM removed they are one sentence. */
    assert_int_equal(sp.s_train + sp.s_valid + sp.s_test, 26661);
    assert_true(sp.n_valid < 1100 && sp.n_test < 1100); /* "at least", not "far more" */

    /* Every pair in exactly one part; each part in file order. */
    unsigned char *seen = calloc(c->n, 1);
    assert_non_null(seen);
    const size_t *parts[3] = {sp.train, sp.valid, sp.test};
    size_t counts[3] = {sp.n_train, sp.n_valid, sp.n_test};
    for (int p = 0; p < 3; p++)
        for (size_t k = 0; k < counts[p]; k++) {
            assert_true(parts[p][k] < c->n);
            assert_int_equal(seen[parts[p][k]]++, 0);
            if (k) assert_true(parts[p][k] > parts[p][k - 1]);
        }
    for (size_t i = 0; i < c->n; i++) assert_int_equal(seen[i], 1);
    free(seen);

    /* No English sentence on two sides. */
    strset sets[3];
    for (int p = 0; p < 3; p++) {
        set_init(&sets[p], counts[p]);
        for (size_t k = 0; k < counts[p]; k++) set_add(&sets[p], c->src[parts[p][k]]);
    }
    size_t shared = 0;
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++)
            if (p != q)
                for (size_t k = 0; k < counts[p]; k++) shared += set_has(&sets[q], c->src[parts[p][k]]);
    assert_int_equal(shared, 0);
    for (int p = 0; p < 3; p++) free(sets[p].slot);

    /* Same seed, same split; another seed, another split. */
    assert_int_equal(attn_data_split_make(c, &so, &sp2), 0);
    assert_int_equal(sp2.n_test, sp.n_test);
    assert_int_equal(sp2.n_valid, sp.n_valid);
    assert_memory_equal(sp2.test, sp.test, sp.n_test * sizeof(size_t));
    assert_memory_equal(sp2.valid, sp.valid, sp.n_valid * sizeof(size_t));
    assert_memory_equal(sp2.train, sp.train, sp.n_train * sizeof(size_t));
    attn_data_split_options so3 = so;
    so3.seed = 2;
    assert_int_equal(attn_data_split_make(c, &so3, &sp3), 0);
    assert_true(sp3.n_test != sp.n_test || memcmp(sp3.test, sp.test, sp.n_test * sizeof(size_t)));
    /* Pinned: the default split must not drift across machines or versions, or the test BLEU
     * of different runs would be over different sentences. */
    printf("  test split starts at pairs %zu %zu %zu; seed 2 at %zu %zu %zu\n", sp.test[0],
           sp.test[1], sp.test[2], sp3.test[0], sp3.test[1], sp3.test[2]);
    assert_true(sp.test[0] == 34 && sp.test[1] == 35 && sp.test[2] == 49);
    assert_true(sp3.test[0] == 8 && sp3.test[1] == 36 && sp3.test[2] == 37);

    /* The article's example. */
    size_t kp = c->n;
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->src[i], "Knowledge is power.") && !strcmp(c->tgt[i], "知识就是力量。")) kp = i;
    assert_true(kp < c->n);
    printf("  \"Knowledge is power.\" -> \"知识就是力量。\" (line %zu) is in %s (seed 1), %s (seed 2)\n",
           c->line[kp], part_name(&sp, kp), part_name(&sp3, kp));
    assert_string_equal(part_name(&sp, kp), "train"); /* the demo translates it: keep it pinned */

    /* Write the test split and read it back. */
    assert_int_equal(attn_data_write_tsv(c, sp.test, sp.n_test, tu_tmp("test.tsv")), 0);
    attn_data_corpus back;
    assert_int_equal(attn_data_load_tsv(tu_tmp("test.tsv"), NULL, &back), 0);
    assert_int_equal(back.n, sp.n_test);
    for (size_t k = 0; k < back.n; k++) {
        assert_string_equal(back.src[k], c->src[sp.test[k]]);
        assert_string_equal(back.tgt[k], c->tgt[sp.test[k]]);
        assert_string_equal(back.attr[k], c->attr[sp.test[k]]);
    }
    attn_data_corpus_free(&back);

    /* Multiple references: one segment per distinct sentence, every translation somewhere. */
    attn_data_refs rf;
    assert_int_equal(attn_data_refs_make(c, sp.test, sp.n_test, &rf), 0);
    assert_int_equal(rf.n, sp.s_test);
    size_t nref = 0, multi = 0;
    for (size_t i = 0; i < rf.n; i++) {
        assert_non_null(rf.refs[0][i]);
        size_t k = 0;
        for (size_t r = 0; r < rf.n_refs; r++) k += rf.refs[r][i] != NULL;
        for (size_t r = k; r < rf.n_refs; r++) assert_null(rf.refs[r][i]); /* NULLs at the end */
        nref += k, multi += k > 1;
    }
    assert_int_equal(nref, sp.n_test);
    printf("  test references: %zu segments, up to %zu references, %zu with several\n", rf.n,
           rf.n_refs, multi);
    attn_bleu_result br;
    assert_int_equal(attn_bleu_corpus(rf.n, (const char *const *)rf.refs[0], rf.n_refs, rf.refs,
                                      NULL, &br), 0);
    assert_true(fabs(br.score - 100.0) < 1e-9);
    assert_int_equal(attn_data_refs_write(&rf, tu_tmp("test.en"), tu_tmp("test.zh")), 0);
    attn_bleu_lines l;
    assert_int_equal(attn_bleu_read_lines(tu_tmp("test.en"), &l), 0);
    assert_int_equal(l.n, rf.n);
    assert_string_equal(l.lines[0], rf.src[0]);
    attn_bleu_lines_free(&l);
    char name[64];
    snprintf(name, sizeof name, "test.zh.%zu", rf.n_refs - 1);
    assert_int_equal(attn_bleu_read_lines(tu_tmp(name), &l), 0);
    assert_int_equal(l.n, rf.n);
    attn_bleu_lines_free(&l);
    attn_data_refs_free(&rf);

    attn_data_split_free(&sp);
    attn_data_split_free(&sp2);
    attn_data_split_free(&sp3);
}

/* ---- batches ---- */

/* Checks one batch against the dataset; returns the padded cells (src and tgt). */
static size_t check_batch(const attn_data_dataset *ds, const attn_data_batch *b,
                          const attn_data_batch_options *bo, unsigned *seen, size_t *real) {
    assert_true(b->B >= 1 && b->Ts >= 1 && b->Tt >= 2);
    if (bo->budget == ATTN_DATA_BUDGET_PADDED)
        assert_true((size_t)b->B * (size_t)ATTN_MAX(b->Ts, b->Tt) <= bo->max_tokens);
    else
        assert_true((size_t)b->n_tokens <= bo->max_tokens);
    int64_t ntok = 0;
    int32_t ms = 0, mt = 0;
    for (int k = 0; k < b->B; k++) {
        size_t i = b->row[k];
        assert_true(i < ds->n);
        if (seen) seen[i]++;
        const int32_t *s = ds->ids + ds->off[2 * i], *t = ds->ids + ds->off[2 * i + 1];
        int32_t ls = (int32_t)(ds->off[2 * i + 1] - ds->off[2 * i]);
        int32_t lt = (int32_t)(ds->off[2 * i + 2] - ds->off[2 * i + 1]);
        const int32_t *srow = b->src + (size_t)k * b->Ts;                          // (Ts)
        const int32_t *irow = b->tgt_in + (size_t)k * b->Tt, *orow = b->tgt_out + (size_t)k * b->Tt;
        assert_int_equal(b->src_len[k], ls + 1);
        assert_int_equal(b->tgt_len[k], lt + 1);
        assert_memory_equal(srow, s, (size_t)ls * sizeof *s);
        assert_int_equal(srow[ls], ds->eos_id);
        for (int p = ls + 1; p < b->Ts; p++) assert_int_equal(srow[p], ds->pad_id);
        assert_int_equal(irow[0], ds->bos_id);
        assert_memory_equal(irow + 1, t, (size_t)lt * sizeof *t);
        assert_memory_equal(orow, t, (size_t)lt * sizeof *t);
        assert_int_equal(orow[lt], ds->eos_id);
        for (int p = lt + 1; p < b->Tt; p++) {
            assert_int_equal(irow[p], ds->pad_id);
            assert_int_equal(orow[p], ds->pad_id);
        }
        for (int p = 0; p < ls; p++) assert_true(srow[p] != ds->pad_id);
        ntok += lt + 1;
        ms = ATTN_MAX(ms, ls + 1), mt = ATTN_MAX(mt, lt + 1);
        *real += (size_t)(ls + 1 + lt + 1);
    }
    assert_int_equal(ms, b->Ts); /* no all-pad column */
    assert_int_equal(mt, b->Tt);
    assert_int_equal(ntok, b->n_tokens);
    return (size_t)b->B * (size_t)(b->Ts + b->Tt);
}

/* One epoch from the loader's current position: checks every batch, returns the padding
 * fraction; every row must appear exactly once. */
static double run_epoch(attn_data_loader *ld, const attn_data_dataset *ds,
                        const attn_data_batch_options *bo, size_t *nbatches) {
    unsigned *seen = calloc(ds->n, sizeof *seen);
    assert_non_null(seen);
    attn_data_batch b = {0};
    size_t cells = 0, real = 0, nb = attn_data_loader_num_batches(ld);
    attn_data_pos p0 = attn_data_loader_tell(ld);
    for (size_t k = 0; k < nb; k++) {
        assert_int_equal(attn_data_loader_next(ld, &b), 0);
        assert_int_equal(b.epoch, p0.epoch);
        assert_int_equal(b.index, k);
        cells += check_batch(ds, &b, bo, seen, &real);
    }
    for (size_t i = 0; i < ds->n; i++) assert_int_equal(seen[i], 1);
    attn_data_pos p1 = attn_data_loader_tell(ld);
    assert_int_equal(p1.epoch, p0.epoch + 1);
    assert_int_equal(p1.batch, 0);
    attn_data_batch_free(&b);
    free(seen);
    *nbatches = nb;
    return (double)(cells - real) / (double)cells;
}

/* Rows of the next count batches, concatenated with a separator, for comparing sequences. */
static size_t *take(attn_data_loader *ld, size_t count, size_t *len) {
    attn_data_batch b = {0};
    size_t cap = 1024, n = 0;
    size_t *out = malloc(cap * sizeof *out);
    assert_non_null(out);
    for (size_t k = 0; k < count; k++) {
        assert_int_equal(attn_data_loader_next(ld, &b), 0);
        if (n + (size_t)b.B + 3 > cap) {
            cap = 2 * (n + (size_t)b.B + 3);
            out = realloc(out, cap * sizeof *out);
            assert_non_null(out);
        }
        out[n++] = (size_t)b.epoch, out[n++] = (size_t)b.index;
        for (int i = 0; i < b.B; i++) out[n++] = b.row[i];
        out[n++] = SIZE_MAX;
    }
    attn_data_batch_free(&b);
    *len = n;
    return out;
}

static void test_batches(void **state) {
    (void)state;
    if (!g_have_corpus) tu_skip("%s not found", CORPUS);
    const attn_data_corpus *c = &g_c;
    /* A tokenizer trained on both columns of the whole corpus (shared vocabulary). */
    const char **lines = malloc(2 * c->n * sizeof *lines);
    assert_non_null(lines);
    for (size_t i = 0; i < c->n; i++) lines[2 * i] = c->src[i], lines[2 * i + 1] = c->tgt[i];
    attn_tok_train_params tp = attn_tok_train_default_params();
    tp.vocab_size = 8000;
    attn_tok *tok;
    double t0 = tu_now();
    if (attn_tok_train_bpe(&tp, lines, NULL, 2 * c->n, &tok)) fail_msg("train: %s", attn_last_error());
    double t1 = tu_now();
    free(lines);

    attn_data_split sp;
    assert_int_equal(attn_data_split_make(c, NULL, &sp), 0);
    attn_data_encode_options eo = attn_data_encode_default_options();
    eo.max_len = 64;
    attn_data_dataset *ds;
    assert_int_equal(attn_data_encode(c, sp.train, sp.n_train, tok, &eo, &ds), 0);
    double t2 = tu_now();
    printf("  tokenizer trained in %.2f s; train split encoded in %.3f s: %zu pairs, %zu ids, "
           "%zu dropped (> %d), longest src %d tgt %d\n",
           t1 - t0, t2 - t1, ds->n, ds->off[2 * ds->n], ds->n_dropped, (int)eo.max_len,
           (int)ds->longest_src, (int)ds->longest_tgt);
    assert_int_equal(ds->n + ds->n_dropped, sp.n_train);
    assert_int_equal(ds->pad_id, attn_tok_special_id(tok, ATTN_TOK_PAD));
    assert_int_equal(ds->pad_id, 0);
    assert_true(ds->longest_src <= 64 && ds->longest_tgt <= 64);

    /* One epoch: coverage, budget, rows, padding. */
    attn_data_batch_options bo = attn_data_batch_default_options();
    attn_data_loader *ld, *ld2;
    assert_int_equal(attn_data_loader_new(ds, &bo, &ld), 0);
    size_t nb;
    double t3 = tu_now();
    double pad = run_epoch(ld, ds, &bo, &nb);
    double t4 = tu_now();
    printf("  epoch 0: %zu batches (max_tokens %zu, padded budget, one bucket), padding %.2f%% of "
           "cells, %.1f ms\n", nb, bo.max_tokens, 100 * pad, 1e3 * (t4 - t3));
    assert_true(pad < 0.10);
    double pad1 = run_epoch(ld, ds, &bo, &nb); /* epoch 1 is planned afresh */
    printf("  epoch 1: %zu batches, padding %.2f%%\n", nb, 100 * pad1);

    attn_data_batch_options bo2 = bo;
    bo2.bucket_size = 8192;
    bo2.max_tokens = 4096;
    assert_int_equal(attn_data_loader_new(ds, &bo2, &ld2), 0);
    double pad2 = run_epoch(ld2, ds, &bo2, &nb);
    printf("  buckets of 8192 pairs: %zu batches, padding %.2f%%\n", nb, 100 * pad2);
    assert_true(pad2 < 0.15);
    attn_data_loader_free(ld2);
    attn_data_batch_options bo3 = bo;
    bo3.budget = ATTN_DATA_BUDGET_TARGET;
    bo3.max_tokens = 2500;
    bo3.max_sentences = 200;
    assert_int_equal(attn_data_loader_new(ds, &bo3, &ld2), 0);
    double pad3 = run_epoch(ld2, ds, &bo3, &nb);
    printf("  target-token budget 2500, at most 200 sentences: %zu batches, padding %.2f%%\n", nb,
           100 * pad3);
    attn_data_loader_free(ld2);

    /* Same (seed, epoch) -> same batches; another epoch -> another order. */
    assert_int_equal(attn_data_loader_seek(ld, (attn_data_pos){0, 0}), 0);
    assert_int_equal(attn_data_loader_new(ds, &bo, &ld2), 0);
    size_t la, lb;
    size_t n0 = attn_data_loader_num_batches(ld);
    size_t *a = take(ld, n0, &la), *b = take(ld2, n0, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la * sizeof *a);
    free(b);
    size_t *e1 = take(ld2, 5, &lb); /* epoch 1 now */
    assert_int_equal(e1[0], 1);
    assert_true(memcmp(a + 2, e1 + 2, 20 * sizeof *a) != 0);
    free(e1);
    free(a);

    /* Resume: run 40 batches, save the position, continue across the epoch boundary; a fresh
     * loader seeked to the saved position must produce the same. */
    assert_int_equal(attn_data_loader_seek(ld, (attn_data_pos){3, 0}), 0);
    size_t nb3 = attn_data_loader_num_batches(ld);
    free(take(ld, nb3 - 20, &la));
    attn_data_pos pos = attn_data_loader_tell(ld);
    assert_int_equal(pos.epoch, 3);
    assert_int_equal(pos.batch, nb3 - 20);
    a = take(ld, 60, &la);
    attn_data_loader_free(ld2);
    assert_int_equal(attn_data_loader_new(ds, &bo, &ld2), 0);
    assert_int_equal(attn_data_loader_seek(ld2, pos), 0);
    b = take(ld2, 60, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la * sizeof *a);
    printf("  resumed at (epoch %llu, batch %llu): the next 60 batches, into epoch 4, match\n",
           (unsigned long long)pos.epoch, (unsigned long long)pos.batch);
    free(a);
    free(b);
    tu_expect_fail(attn_data_loader_seek(ld2, (attn_data_pos){0, 1u << 30}),
                ATTN_STATUS_INVALID_ARGUMENT, "beyond", NULL);
    attn_data_loader_free(ld2);
    attn_data_loader_free(ld);

    /* Fixed-order plans for evaluation. */
    attn_data_range *rg;
    size_t nr;
    assert_int_equal(attn_data_dataset_plan_fixed(ds, 64, 1024, &rg, &nr), 0);
    size_t at = 0;
    for (size_t k = 0; k < nr; k++) {
        assert_int_equal(rg[k].begin, at);
        assert_true(rg[k].end > rg[k].begin && rg[k].end - rg[k].begin <= 64);
        int32_t m = 0;
        for (size_t i = rg[k].begin; i < rg[k].end; i++)
            m = ATTN_MAX(m, ATTN_MAX(attn_data_src_len(ds, i), attn_data_tgt_len(ds, i)));
        assert_true((rg[k].end - rg[k].begin) * (size_t)m <= 1024);
        at = rg[k].end;
    }
    assert_int_equal(at, ds->n);
    attn_data_batch eb = {0};
    size_t *rows = malloc((rg[0].end - rg[0].begin) * sizeof *rows);
    for (size_t i = rg[0].begin; i < rg[0].end; i++) rows[i - rg[0].begin] = i;
    size_t real = 0;
    assert_int_equal(attn_data_batch_fill(ds, rows, rg[0].end - rg[0].begin, &eb), 0);
    check_batch(ds, &eb, &(attn_data_batch_options){.max_tokens = 1024}, NULL, &real);
    free(rows);
    attn_data_batch_free(&eb);
    attn_free(rg);
    const int32_t lens[] = {3, 4, 100, 2, 2, 2, 5};
    assert_int_equal(attn_data_plan_fixed(lens, 7, 3, 10, &rg, &nr), 0);
    assert_int_equal(nr, 4); /* [0,2) [2,3) [3,6) [6,7) */
    assert_int_equal(rg[0].end, 2);
    assert_int_equal(rg[1].end, 3);
    assert_int_equal(rg[2].end, 6);
    assert_int_equal(rg[3].end, 7);
    attn_free(rg);
    attn_data_dataset_free(ds);

    /* Truncation keeps every pair, cut to max_len. */
    eo.max_len = 8;
    eo.truncate = true;
    assert_int_equal(attn_data_encode(c, sp.valid, sp.n_valid, tok, &eo, &ds), 0);
    assert_int_equal(ds->n, sp.n_valid);
    assert_true(ds->n_truncated > 0);
    assert_true(ds->longest_src <= 8 && ds->longest_tgt <= 8);
    printf("  max_len 8 with truncation: %zu of %zu valid pairs cut\n", ds->n_truncated, ds->n);
    assert_int_equal(attn_data_loader_new(ds, NULL, &ld), 0);
    run_epoch(ld, ds, &bo, &nb);
    attn_data_loader_free(ld);
    tu_expect_fail(attn_data_loader_new(ds, &(attn_data_batch_options){.max_tokens = 4}, &ld),
                ATTN_STATUS_INVALID_ARGUMENT, "max_tokens", NULL);
    attn_data_dataset_free(ds);
    eo.max_len = 2;
    eo.truncate = false;
    tu_expect_fail(attn_data_encode(c, sp.valid, sp.n_valid, tok, &eo, &ds),
                ATTN_STATUS_INVALID_ARGUMENT, "no pairs left", NULL);

    attn_data_split_free(&sp);
    attn_tok_free(tok);
}

/* ---- bad input ---- */

static void test_bad_input(void **state) {
    (void)state;
    attn_data_corpus c;
    tu_expect_fail(attn_data_load_tsv(tu_tmp("missing.tsv"), NULL, &c), ATTN_STATUS_IO, "missing.tsv",
                NULL);
    static const char bad_utf8[] = "Hi.\t嗨。\tx\nBad \xC3\x28 byte\t坏\tx\n";
    tu_write_all(tu_tmp("utf8.tsv"), bad_utf8, sizeof bad_utf8 - 1);
    tu_expect_fail(attn_data_load_tsv(tu_tmp("utf8.tsv"), NULL, &c), ATTN_STATUS_FORMAT, "utf8.tsv:2:",
                "UTF-8");
    static const char overlong[] = "A\t\xC0\xAF\n";
    tu_write_all(tu_tmp("overlong.tsv"), overlong, sizeof overlong - 1);
    tu_expect_fail(attn_data_load_tsv(tu_tmp("overlong.tsv"), NULL, &c), ATTN_STATUS_FORMAT,
                "overlong.tsv:1:", "UTF-8");
    tu_write_all(tu_tmp("nul.tsv"), "A\tB\nC\tD\0E\n", 10);
    tu_expect_fail(attn_data_load_tsv(tu_tmp("nul.tsv"), NULL, &c), ATTN_STATUS_FORMAT, "nul.tsv:2:",
                "NUL byte at byte 4");
    static const char cols[] = "Hi.\t嗨。\n\nRun.\t跑\nno tab here\n";
    tu_write_all(tu_tmp("cols.tsv"), cols, sizeof cols - 1);
    tu_expect_fail(attn_data_load_tsv(tu_tmp("cols.tsv"), NULL, &c), ATTN_STATUS_FORMAT, "cols.tsv:4:",
                "column");
    static const char empty_tgt[] = "Hi.\t\tattr\n";
    tu_write_all(tu_tmp("emptytgt.tsv"), empty_tgt, sizeof empty_tgt - 1);
    tu_expect_fail(attn_data_load_tsv(tu_tmp("emptytgt.tsv"), NULL, &c), ATTN_STATUS_FORMAT,
                "emptytgt.tsv:1:", "empty target");
    tu_write_all(tu_tmp("empty.tsv"), "", 0);
    tu_expect_fail(attn_data_load_tsv(tu_tmp("empty.tsv"), NULL, &c), ATTN_STATUS_FORMAT, "empty.tsv",
                "empty input");
    tu_write_all(tu_tmp("bom.tsv"), "\xEF\xBB\xBF\n\r\n", 6);
    tu_expect_fail(attn_data_load_tsv(tu_tmp("bom.tsv"), NULL, &c), ATTN_STATUS_FORMAT, "bom.tsv",
                "empty input");
    attn_data_tsv_options o = {.src_col = 1, .tgt_col = 1, .attr_col = -1};
    tu_expect_fail(attn_data_load_tsv(tu_tmp("bom.tsv"), &o, &c), ATTN_STATUS_INVALID_ARGUMENT,
                "distinct", NULL);

    /* What is accepted: BOM, CRLF, blank lines, no attribution, other column orders. */
    static const char ok[] = "\xEF\xBB\xBFHi.\t嗨。\r\n\r\nRun.\t跑\tsomeone\r\nHi.\t你好。";
    tu_write_all(tu_tmp("ok.tsv"), ok, sizeof ok - 1);
    assert_int_equal(attn_data_load_tsv(tu_tmp("ok.tsv"), NULL, &c), 0);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.src[0], "Hi.");
    assert_string_equal(c.tgt[0], "嗨。");
    assert_string_equal(c.attr[0], "");
    assert_string_equal(c.attr[1], "someone");
    assert_string_equal(c.tgt[2], "你好。");
    assert_int_equal(c.line[1], 3);
    /* Two of three sources are "Hi.": a split cannot put them on two sides. */
    attn_data_split sp;
    attn_data_split_options so = {.seed = 7, .min_valid_pairs = 1, .min_test_pairs = 1};
    tu_expect_fail(attn_data_split_make(&c, &so, &sp), ATTN_STATUS_INVALID_ARGUMENT,
                "nothing for train", NULL);
    so.min_valid_pairs = 0;
    assert_int_equal(attn_data_split_make(&c, &so, &sp), 0);
    assert_true(sp.n_test == 1 || sp.n_test == 2);
    assert_int_equal(sp.n_valid, 0);
    assert_int_equal(sp.n_train, 3 - sp.n_test);
    attn_data_split_free(&sp);
    so.min_test_pairs = 3;
    tu_expect_fail(attn_data_split_make(&c, &so, &sp), ATTN_STATUS_INVALID_ARGUMENT,
                "nothing for train", NULL);
    /* Grouped references: "Hi." has two. */
    size_t all[] = {0, 1, 2};
    attn_data_refs rf;
    assert_int_equal(attn_data_refs_make(&c, all, 3, &rf), 0);
    assert_int_equal(rf.n, 2);
    assert_int_equal(rf.n_refs, 2);
    assert_string_equal(rf.src[0], "Hi.");
    assert_string_equal(rf.refs[0][0], "嗨。");
    assert_string_equal(rf.refs[1][0], "你好。");
    assert_string_equal(rf.refs[0][1], "跑");
    assert_null(rf.refs[1][1]);
    attn_data_refs_free(&rf);
    attn_data_corpus_free(&c);
    o = (attn_data_tsv_options){.src_col = 1, .tgt_col = 0, .attr_col = -1};
    assert_int_equal(attn_data_load_tsv(tu_tmp("ok.tsv"), &o, &c), 0);
    assert_string_equal(c.src[0], "嗨。");
    assert_string_equal(c.tgt[0], "Hi.");
    tu_expect_fail(attn_data_write_tsv(&c, (size_t[]){5}, 1, tu_tmp("x.tsv")),
                ATTN_STATUS_INVALID_ARGUMENT, "out of range", NULL);
    tu_expect_fail(attn_data_write_tsv(&c, (size_t[]){0}, 1, tu_tmp("nodir/x.tsv")), ATTN_STATUS_IO,
                "nodir", NULL);
    attn_data_corpus_free(&c);
}

/* ---- GPT: language-model windows ---- */

static uint64_t fnv_i32(uint64_t h, const int32_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (uint32_t)v[i];
        h *= 1099511628211ull;
    }
    return h;
}
#define FNV0 1469598103934665603ull

/* Recorded with src/cli/cmd_train_gpt.c's sample_batch (commit e9f294f, before the move): ids
 * 0..17999, B 4, T 16; the window offsets of training batches 0-2, of validation batch 1 over the
 * first 2000 ids, and an FNV-1a hash of x and y of training batches 0-199. */
static const struct {
    uint64_t seed;
    int32_t train[3][4], valid[4];
    uint64_t hash200;
} k_lm_rec[] = {
    {1337,
     {{17791, 8681, 3618, 7119}, {7857, 12634, 11349, 13566}, {9072, 14930, 1519, 5440}},
     {249, 96, 1935, 1509},
     0x0488912009f99b83ull},
    {5,
     {{2553, 10531, 8333, 12732}, {9116, 9216, 3460, 7487}, {11847, 435, 14780, 240}},
     {1121, 185, 677, 1252},
     0x7f414086316c62a3ull},
};

static void test_lm_windows(void **state) {
    (void)state;
    enum { N = 18000, B = 4, T = 16 };
    static int32_t ids[N], x[B * T], y[B * T];
    for (int i = 0; i < N; i++) ids[i] = i; /* a window's first id is its offset */
    for (size_t r = 0; r < sizeof k_lm_rec / sizeof k_lm_rec[0]; r++) {
        const uint64_t seed = k_lm_rec[r].seed;
        for (int g = 0; g < 3; g++) {
            assert_int_equal(
                attn_data_lm_batch(ids, N, B, T, seed, ATTN_DATA_LM_TRAIN, (uint64_t)g, x, y), 0);
            for (int b = 0; b < B; b++) {
                if (x[b * T] != k_lm_rec[r].train[g][b])
                    fail_msg("seed %llu batch %d window %d: offset %d, recorded %d",
                             (unsigned long long)seed, g, b, x[b * T], k_lm_rec[r].train[g][b]);
                for (int t = 0; t < T; t++) {
                    assert_int_equal(x[b * T + t], x[b * T] + t);
                    assert_int_equal(y[b * T + t], x[b * T + t] + 1);
                }
            }
        }
        assert_int_equal(attn_data_lm_batch(ids, 2000, B, T, seed, ATTN_DATA_LM_VALID, 1, x, y), 0);
        for (int b = 0; b < B; b++) {
            assert_int_equal(x[b * T], k_lm_rec[r].valid[b]);
            assert_true(x[b * T] < 2000 - T); /* within [0, n - T) */
        }
        uint64_t h = FNV0;
        for (uint64_t g = 0; g < 200; g++) {
            assert_int_equal(attn_data_lm_batch(ids, N, B, T, seed, ATTN_DATA_LM_TRAIN, g, x, y), 0);
            h = fnv_i32(fnv_i32(h, x, B * T), y, B * T);
        }
        printf("  seed %llu: windows of batches 0-2 and validation batch 1 as recorded; hash of "
               "200 batches %016llx (recorded %016llx)\n",
               (unsigned long long)seed, (unsigned long long)h,
               (unsigned long long)k_lm_rec[r].hash200);
        assert_true(h == k_lm_rec[r].hash200);
    }
    assert_true(attn_data_lm_key(1, ATTN_DATA_LM_TRAIN) != attn_data_lm_key(1, ATTN_DATA_LM_VALID));
    /* The smallest text: n = T + 1 holds exactly one window. */
    assert_int_equal(attn_data_lm_batch(ids, T + 1, B, T, 3, ATTN_DATA_LM_TRAIN, 0, x, y), 0);
    for (int b = 0; b < B; b++) assert_int_equal(x[b * T], 0);
    tu_expect_fail(attn_data_lm_batch(ids, T, B, T, 3, ATTN_DATA_LM_TRAIN, 0, x, y),
                   ATTN_STATUS_INVALID_ARGUMENT, "no window", NULL);
    tu_expect_fail(attn_data_lm_batch(ids, N, 0, T, 3, ATTN_DATA_LM_TRAIN, 0, x, y),
                   ATTN_STATUS_INVALID_ARGUMENT, ">= 1", NULL);
    tu_expect_fail(attn_data_lm_batch(ids, N, B, T, 3, ATTN_DATA_LM_TRAIN, (uint64_t)1 << 32, x, y),
                   ATTN_STATUS_INVALID_ARGUMENT, "2^32", NULL);
    tu_expect_fail(attn_data_lm_batch(NULL, N, B, T, 3, ATTN_DATA_LM_TRAIN, 0, x, y),
                   ATTN_STATUS_INVALID_ARGUMENT, "NULL", NULL);
    tu_expect_fail(attn_data_lm_batch(ids, N, B, T, 3, (attn_data_lm_stream)7, 0, x, y),
                   ATTN_STATUS_INVALID_ARGUMENT, "stream", NULL);
}

/* ---- BERT: masked-LM sentences ---- */

#define MINILM "models/all-MiniLM-L6-v2"

/* 120 template sentences (some long, some with a CRLF, a TAB-separated 2nd and 3rd column, some
 * non-ASCII), empty lines and separator-only lines between them (skipped), and a last line
 * without '\n'. The recorded batches below were made from exactly these bytes. */
static void write_mlm_corpus(const char *path) {
    static const char *subj[] = {"the cat", "a dog", "my brother", "the teacher", "our neighbour",
                                 "the old man", "a little girl", "the king"};
    static const char *verb[] = {"likes", "sees", "wants", "buys", "finds", "loves", "eats", "reads"};
    static const char *obj[] = {"the red apple", "a new book", "some cold water", "the big house",
                                "a small car", "the blue sky", "fresh bread", "the long letter"};
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    for (int i = 0; i < 120; i++) {
        if (i % 17 == 3) fputs("\n", fp);      /* empty: skipped */
        if (i % 29 == 7) fputs("\t\t\r\n", fp); /* only separators: skipped */
        fprintf(fp, "%s %s %s every day%s\t%d\t%s%s", subj[i % 8], verb[(i / 8) % 8],
                obj[(i * 3 + i / 64) % 8], i % 5 == 0 ? ", and then again in the evening" : ".", i,
                i % 11 == 0 ? "caf\xc3\xa9 \xe7\x9f\xa5\xe8\xaf\x86" : "x", i % 3 ? "\n" : "\r\n");
    }
    fputs("no newline at the end", fp);
    fclose(fp);
}

typedef struct {
    int epoch;
    size_t k;
    int B, T;
    int64_t tokens, labels;
    uint32_t ex0;
    uint64_t hash;
} mlm_batch_rec;

/* Recorded with src/cli/cmd_train_bert.c's load_corpus, split, epoch shuffle and make_batch
 * (commit e9f294f, before the move) on write_mlm_corpus and the MiniLM tokenizer. hash: FNV-1a of
 * the masked ids, the labels and the lengths of the batch; batches 0, 1 and the last of epochs
 * 0 and 1, then validation batch 0 (epoch -1). */
static const struct {
    int column, max_len;
    uint64_t seed;
    long long valid_size;
    int batch;
    size_t lines, n, tokens, n_train, n_valid;
    uint64_t ids_hash;
    uint32_t valid[8];
    mlm_batch_rec b[7];
} k_mlm_rec[] = {
    {0, 16, 5, -1, 8, 132, 121, 1668, 115, 6, 0x0db634f40eea71c9ull,
     {6, 33, 56, 60, 96, 110},
     {{0, 0, 8, 16, 109, 13, 46, 0x6d285876d843cd48ull},
      {0, 1, 8, 15, 109, 17, 11, 0x7e017e354deba848ull},
      {0, 14, 3, 16, 43, 4, 77, 0xa0189db893294535ull},
      {1, 0, 8, 16, 106, 19, 47, 0xd3cbd552b82a17eeull},
      {1, 1, 8, 14, 104, 17, 98, 0x21dcda7a25eb8d7bull},
      {1, 14, 3, 15, 42, 6, 62, 0x04fed3ea24de5517ull},
      {-1, 0, 6, 16, 0, 0, 0, 0x6f95b5a847c0b2c6ull}}},
    {0, 16, 5, 8, 8, 132, 121, 1668, 113, 8, 0x0db634f40eea71c9ull,
     {6, 9, 33, 56, 60, 96, 110, 117},
     {{0, 0, 8, 16, 108, 10, 67, 0xe764a1348af94295ull},
      {0, 1, 8, 16, 107, 24, 32, 0x3c4a4590c14f4f0dull},
      {0, 14, 1, 13, 13, 1, 3, 0x68aa9d488aebe72eull},
      {1, 0, 8, 16, 121, 15, 90, 0x18b9d94badf9dbdcull},
      {1, 1, 8, 16, 114, 16, 23, 0xf8dea2a8d60012e0ull},
      {1, 14, 1, 12, 12, 1, 87, 0xfa403db65700e707ull},
      {-1, 0, 8, 16, 0, 0, 0, 0xb9263fd57ac4dceeull}}},
    {1, 12, 9, 3, 4, 132, 121, 1364, 118, 3, 0x8fa953956882ecdaull,
     {10, 28, 62},
     {{0, 0, 4, 12, 44, 7, 27, 0x0f9f14cdba54854dull},
      {0, 1, 4, 12, 45, 4, 18, 0xb546ac1f78ecca4full},
      {0, 29, 2, 11, 22, 3, 33, 0xd7ab9db1d2fe03feull},
      {1, 0, 4, 12, 46, 5, 55, 0xb5e8ad6332867dd1ull},
      {1, 1, 4, 12, 46, 8, 0, 0x835fd5b320ab3e63ull},
      {1, 29, 2, 12, 23, 2, 16, 0xadcb90c147d2d330ull},
      {-1, 0, 3, 12, 0, 0, 0, 0x280550b73d17774eull}}},
};

/* Every cell: a chosen token's label is the sentence's id there (never a special one), an
 * unchosen one keeps its id; padding 0 / IGNORE; lengths and counts add up. */
static void check_mlm_cells(const attn_data_sentences *s, const attn_tok *tok,
                            const attn_data_mlm_batch *b) {
    int64_t tokens = 0, labels = 0;
    for (int i = 0; i < b->B; i++) {
        const int32_t *ids = s->ids + s->off[b->example[i]];
        const int n = (int)(s->off[b->example[i] + 1] - s->off[b->example[i]]);
        assert_int_equal(b->len[i], n);
        for (int t = 0; t < b->T; t++) {
            int32_t x = b->ids[(size_t)i * b->T + t], l = b->labels[(size_t)i * b->T + t];
            if (t >= n) {
                assert_int_equal(x, 0);
                assert_int_equal(l, ATTN_BERT_IGNORE_INDEX);
            } else if (l == ATTN_BERT_IGNORE_INDEX) {
                assert_int_equal(x, ids[t]);
            } else {
                assert_int_equal(l, ids[t]);
                assert_false(attn_tok_is_special(tok, ids[t]));
                labels++;
            }
        }
        tokens += n;
    }
    assert_int_equal(tokens, b->n_tokens);
    assert_int_equal(labels, b->n_labels);
}

static uint64_t mlm_hash(const attn_data_mlm_batch *b) {
    size_t cells = (size_t)b->B * (size_t)b->T;
    return fnv_i32(fnv_i32(fnv_i32(FNV0, b->ids, cells), b->labels, cells), b->len, (size_t)b->B);
}

static void test_mlm(void **state) {
    (void)state;
    if (access(MINILM "/tokenizer.json", R_OK) != 0) {
        printf("  %s/tokenizer.json missing (tools/get_minilm.sh): skipped\n", MINILM);
        skip();
    }
    attn_tok *tok;
    assert_int_equal(attn_tok_load(MINILM, &tok), 0);
    const char *path = tu_tmp("mlm.txt");
    write_mlm_corpus(path);
    for (size_t r = 0; r < sizeof k_mlm_rec / sizeof k_mlm_rec[0]; r++) {
        attn_data_text_options to = {.column = k_mlm_rec[r].column, .max_len = k_mlm_rec[r].max_len};
        attn_data_sentences s;
        if (attn_data_load_sentences(path, tok, &to, &s)) fail_msg("%s", attn_last_error());
        assert_int_equal(s.n_lines, k_mlm_rec[r].lines);
        assert_int_equal(s.n, k_mlm_rec[r].n);
        assert_int_equal(s.tokens, k_mlm_rec[r].tokens);
        assert_true(fnv_i32(FNV0, s.ids, s.tokens) == k_mlm_rec[r].ids_hash);
        attn_data_mlm_options mo = attn_data_mlm_default_options();
        mo.seed = k_mlm_rec[r].seed;
        mo.batch = k_mlm_rec[r].batch;
        mo.valid_size = k_mlm_rec[r].valid_size < 0 ? SIZE_MAX : (size_t)k_mlm_rec[r].valid_size;
        attn_data_mlm *m;
        if (attn_data_mlm_new(&s, tok, &mo, &m)) fail_msg("%s", attn_last_error());
        assert_int_equal(attn_data_mlm_num_train(m), k_mlm_rec[r].n_train);
        assert_int_equal(attn_data_mlm_num_valid(m), k_mlm_rec[r].n_valid);
        for (size_t i = 0; i < k_mlm_rec[r].n_valid; i++)
            assert_int_equal(attn_data_mlm_valid_examples(m)[i], k_mlm_rec[r].valid[i]);
        attn_data_mlm_batch b;
        memset(&b, 0, sizeof b);
        const size_t nb = attn_data_mlm_train_batches(m);
        int checked = 0;
        for (int e = 0; e < 2; e++) {
            uint8_t *seen = calloc(s.n, 1);
            for (size_t k = 0; k < nb; k++) {
                assert_int_equal(attn_data_mlm_train_batch(m, (uint64_t)e, k, &b), 0);
                check_mlm_cells(&s, tok, &b);
                for (int i = 0; i < b.B; i++) {
                    assert_int_equal(seen[b.example[i]], 0); /* once per epoch */
                    seen[b.example[i]] = 1;
                }
                for (int q = 0; q < 7; q++) {
                    const mlm_batch_rec *w = &k_mlm_rec[r].b[q];
                    if (w->epoch != e || w->k != k) continue;
                    if (b.B != w->B || b.T != w->T || b.n_tokens != w->tokens ||
                        b.n_labels != w->labels || b.example[0] != w->ex0 || mlm_hash(&b) != w->hash)
                        fail_msg("case %zu epoch %d batch %zu: B %d T %d tokens %lld labels %lld "
                                 "ex0 %u hash %016llx, recorded %d %d %lld %lld %u %016llx",
                                 r, e, k, b.B, b.T, (long long)b.n_tokens, (long long)b.n_labels,
                                 b.example[0], (unsigned long long)mlm_hash(&b), w->B, w->T,
                                 (long long)w->tokens, (long long)w->labels, w->ex0,
                                 (unsigned long long)w->hash);
                    checked++;
                }
            }
            size_t n_seen = 0;
            for (size_t i = 0; i < s.n; i++) n_seen += seen[i];
            assert_int_equal(n_seen, k_mlm_rec[r].n_train);
            free(seen);
        }
        /* the same position again (another epoch in between): the same batch */
        assert_int_equal(attn_data_mlm_train_batch(m, 0, 1, &b), 0);
        assert_true(mlm_hash(&b) == k_mlm_rec[r].b[1].hash);
        assert_int_equal(attn_data_mlm_valid_batch(m, 0, &b), 0);
        check_mlm_cells(&s, tok, &b);
        assert_int_equal(b.B, k_mlm_rec[r].b[6].B);
        assert_int_equal(b.T, k_mlm_rec[r].b[6].T);
        assert_true(mlm_hash(&b) == k_mlm_rec[r].b[6].hash);
        checked++;
        assert_int_equal(checked, 7);
        tu_expect_fail(attn_data_mlm_train_batch(m, 0, nb, &b), ATTN_STATUS_INVALID_ARGUMENT,
                       "beyond", NULL);
        tu_expect_fail(attn_data_mlm_train_batch(m, (1u << 24) - 1, 0, &b), ATTN_STATUS_TOO_LARGE,
                       "epochs", NULL);
        tu_expect_fail(attn_data_mlm_valid_batch(m, attn_data_mlm_valid_batches(m), &b),
                       ATTN_STATUS_INVALID_ARGUMENT, "beyond", NULL);
        printf("  column %d, max_len %d, seed %llu: %zu lines -> %zu sentences, %zu tokens; "
               "%zu train / %zu valid; 7 recorded batches identical, %zu batches x 2 epochs "
               "checked cell by cell\n",
               to.column, to.max_len, (unsigned long long)mo.seed, s.n_lines, s.n, s.tokens,
               attn_data_mlm_num_train(m), attn_data_mlm_num_valid(m), nb);
        attn_data_mlm_batch_free(&b);
        attn_data_mlm_free(m);
        attn_data_sentences_free(&s);
    }

    /* bad input */
    attn_data_sentences s;
    attn_data_text_options to = attn_data_text_default_options();
    tu_expect_fail(attn_data_load_sentences(tu_tmp("none.txt"), tok, &to, &s), ATTN_STATUS_IO,
                   "none.txt", NULL);
    tu_write_all(tu_tmp("bad.txt"), "fine line\nbroken \xC0\xAF line\n", 25);
    tu_expect_fail(attn_data_load_sentences(tu_tmp("bad.txt"), tok, &to, &s),
                   ATTN_STATUS_INVALID_ARGUMENT, "bad.txt:2: invalid UTF-8", NULL);
    tu_write_all(tu_tmp("two.tsv"), "Hi.\tthere\nRun.\tx\n", 17);
    to.column = 3;
    tu_expect_fail(attn_data_load_sentences(tu_tmp("two.tsv"), tok, &to, &s), ATTN_STATUS_FORMAT,
                   "two.tsv:1: no column 3", NULL);
    to.column = 2;
    assert_int_equal(attn_data_load_sentences(tu_tmp("two.tsv"), tok, &to, &s), 0);
    assert_int_equal(s.n, 2);
    attn_data_sentences_free(&s);
    tu_write_all(tu_tmp("blank.txt"), "\n \t \r\n\n", 7);
    to.column = 0;
    tu_expect_fail(attn_data_load_sentences(tu_tmp("blank.txt"), tok, &to, &s),
                   ATTN_STATUS_INVALID_ARGUMENT, "no line has a token", NULL);
    to.max_len = 2;
    tu_expect_fail(attn_data_load_sentences(tu_tmp("two.tsv"), tok, &to, &s),
                   ATTN_STATUS_INVALID_ARGUMENT, "max_len", NULL);
    to.max_len = 128;
    assert_int_equal(attn_data_load_sentences(tu_tmp("two.tsv"), tok, &to, &s), 0);
    attn_data_mlm_options mo = attn_data_mlm_default_options();
    attn_data_mlm *m;
    mo.valid_size = 2;
    tu_expect_fail(attn_data_mlm_new(&s, tok, &mo, &m), ATTN_STATUS_INVALID_ARGUMENT,
                   "leave none to train on", NULL);
    mo.valid_size = SIZE_MAX; /* min(500, 2 / 20) = 0 */
    assert_int_equal(attn_data_mlm_new(&s, tok, &mo, &m), 0);
    assert_int_equal(attn_data_mlm_num_valid(m), 0);
    assert_int_equal(attn_data_mlm_valid_batches(m), 0);
    attn_data_mlm_free(m);
    mo.batch = 0;
    tu_expect_fail(attn_data_mlm_new(&s, tok, &mo, &m), ATTN_STATUS_INVALID_ARGUMENT, "batch",
                   NULL);
    mo = attn_data_mlm_default_options();
    mo.mask_fraction = 0.95f; /* + 0.1 random > 1 */
    tu_expect_fail(attn_data_mlm_new(&s, tok, &mo, &m), ATTN_STATUS_INVALID_ARGUMENT, "fractions",
                   NULL);
    /* a tokenizer without [MASK] (characters only) cannot mask */
    attn_tok *chars;
    assert_int_equal(attn_tok_train_chars("Hi there. Run x", 15, &chars), 0);
    mo = attn_data_mlm_default_options();
    tu_expect_fail(attn_data_mlm_new(&s, chars, &mo, &m), ATTN_STATUS_INVALID_ARGUMENT, "[MASK]",
                   NULL);
    attn_tok_free(chars);
    attn_data_sentences_free(&s);
    attn_tok_free(tok);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "data")) return 1;
    g_have_corpus = attn_data_load_tsv(CORPUS, NULL, &g_c) == ATTN_STATUS_OK;
    if (!g_have_corpus) printf("note: %s\n", attn_last_error());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_lm_windows),
        cmocka_unit_test(test_mlm),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    attn_data_corpus_free(&g_c);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}

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
 *
 * Needs ../shared/data/tatoeba-eng-cmn/cmn.txt (relative to the repository root, where
 * tests/run.sh runs); the corpus tests are skipped (tu_skip) without it. Scratch files go to
 * a fresh mkdtemp directory, removed at the end. */
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


int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "data")) return 1;
    g_have_corpus = attn_data_load_tsv(CORPUS, NULL, &g_c) == ATTN_STATUS_OK;
    if (!g_have_corpus) printf("note: %s\n", attn_last_error());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_batches),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    attn_data_corpus_free(&g_c);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}

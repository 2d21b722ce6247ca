/* attn_data.h — parallel-corpus data for translation training (prefix attn_data_): load a TSV
 * corpus, split it deterministically into train/valid/test by distinct source sentence, encode it
 * once with a tokenizer, and cut it into padded batches by token count, with an iterator whose
 * position (epoch, batch) can be saved and restored so that a resumed run sees the same batches.
 *
 *   attn_data_corpus c;
 *   attn_data_load_tsv("../shared/data/tatoeba-eng-cmn/cmn.txt", NULL, &c);
 *   attn_data_split sp;
 *   attn_data_split_options so = attn_data_split_default_options();   // seed, ≥1000 valid/test
 *   attn_data_split_make(&c, &so, &sp);
 *   attn_data_encode_options eo = attn_data_encode_default_options();
 *   attn_data_dataset *train;
 *   attn_data_encode(&c, sp.train, sp.n_train, tok, &eo, &train);
 *   attn_data_batch_options bo = attn_data_batch_default_options();
 *   attn_data_loader *ld;   attn_data_loader_new(train, &bo, &ld);
 *   attn_data_batch b = {0};
 *   for (step...) {
 *       attn_data_loader_next(ld, &b);      // b.B, b.Ts, b.Tt, b.src, b.tgt_in, b.tgt_out, ...
 *       attn_encdec_forward(m, st, b.B, b.Ts, b.Tt, b.src, b.src_len, b.tgt_in, b.tgt_len, NULL);
 *       ...
 *   }
 *   attn_data_pos pos = attn_data_loader_tell(ld);   // save with the checkpoint; later:
 *   attn_data_loader_seek(ld, pos);                  // the same remaining batches
 *
 * Sequences fed to the model (ids from the tokenizer, which adds no specials itself):
 *   src     = tokens(source) [+ </s> when src_eos]          length src_len[b]
 *   tgt_in  = <s> + tokens(target)                          length tgt_len[b]
 *   tgt_out = tokens(target) + </s>                         length tgt_len[b]
 * each row padded with pad_id to the batch's Ts / Tt.
 *
 * Determinism: every random choice (split, bucket shuffle, batch order) comes from a private
 * splitmix64 generator seeded from (seed, epoch, purpose) with integer-only bounded draws and
 * total-order sorts, so the same inputs give the same split and batches on any machine and libc. */
#ifndef ATTN_DATA_H
#define ATTN_DATA_H

#include "attn_core.h"
#include "attn_tok.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- corpus -------------------------------------------------------------------------------- */

/* Columns of the TSV file (0-based). Default: source 0, target 1, attribution 2 (the Tatoeba /
 * manythings.org layout `English<TAB>Chinese<TAB>attribution`). */
typedef struct {
    int src_col;
    int tgt_col;
    int attr_col; /* -1: none; a line without this column gets "" (attribution is optional) */
} attn_data_tsv_options;

attn_data_tsv_options attn_data_tsv_default_options(void);

/* Sentence pairs in file order. All strings are NUL-terminated, point into one buffer, and live
 * until attn_data_corpus_free. */
typedef struct {
    size_t n;          /* number of pairs */
    const char **src;  /* (n) source sentences */
    const char **tgt;  /* (n) target sentences */
    const char **attr; /* (n) attribution ("" when absent); kept for redistribution */
    size_t *line;      /* (n) 1-based line number of each pair in the file */
    char *buf;         /* storage */
} attn_data_corpus;

/* Load a UTF-8 TSV corpus. A leading UTF-8 BOM and a '\r' before each '\n' are removed; empty
 * lines are skipped. Errors, each naming path (and line where there is one):
 *   missing or unreadable file                  ATTN_STATUS_IO
 *   invalid UTF-8 or a NUL byte (path:line)     ATTN_STATUS_FORMAT
 *   too few columns (path:line)                 ATTN_STATUS_FORMAT
 *   an empty source or target field (path:line) ATTN_STATUS_FORMAT
 *   no pairs at all                             ATTN_STATUS_FORMAT
 * opt NULL means the defaults. On failure *out is zeroed. */
attn_status attn_data_load_tsv(const char *path, const attn_data_tsv_options *opt,
                               attn_data_corpus *out);
void attn_data_corpus_free(attn_data_corpus *c);

/* ---- train / valid / test split ------------------------------------------------------------ */

typedef struct {
    uint64_t seed;          /* default 1 */
    size_t min_valid_pairs; /* valid gets at least this many pairs (default 1000) */
    size_t min_test_pairs;  /* test gets at least this many pairs (default 1000) */
} attn_data_split_options;

attn_data_split_options attn_data_split_default_options(void);

/* Pair indices of each part, ascending (file order). Pairs with the same source string (byte
 * for byte) are always in the same part, so no source sentence is on two sides. */
typedef struct {
    size_t n_train, n_valid, n_test;   /* pairs */
    size_t *train, *valid, *test;      /* (n_train), (n_valid), (n_test) */
    size_t s_train, s_valid, s_test;   /* distinct source sentences in each part */
} attn_data_split;

/* The distinct source sentences, in an order shuffled by seed, go to test until it holds at least
 * min_test_pairs pairs, then to valid until it holds at least min_valid_pairs, and the rest to
 * train. If that would leave train empty: ATTN_STATUS_INVALID_ARGUMENT. */
attn_status attn_data_split_make(const attn_data_corpus *c, const attn_data_split_options *opt,
                                 attn_data_split *out);
void attn_data_split_free(attn_data_split *s);

/* Write pairs c[idx[0..n)] as `src<TAB>tgt<TAB>attribution` lines (attribution column omitted
 * when every one is empty) to path, atomically (temporary file, fsync, rename). */
attn_status attn_data_write_tsv(const attn_data_corpus *c, const size_t *idx, size_t n,
                                const char *path);

/* Multiple references for BLEU: the pairs idx[0..n) grouped by source sentence, in order of first
 * appearance. refs[r][i] is the r-th translation of source i (in file order) or NULL when source i
 * has fewer than r + 1 — exactly what attn_bleu_corpus takes. Strings point into the corpus. */
typedef struct {
    size_t n;                 /* distinct source sentences (segments) */
    size_t n_refs;            /* R: the most translations any of them has */
    const char **src;         /* (n) */
    const char *const **refs; /* (R) streams of (n) strings or NULL */
} attn_data_refs;

attn_status attn_data_refs_make(const attn_data_corpus *c, const size_t *idx, size_t n,
                                attn_data_refs *out);
void attn_data_refs_free(attn_data_refs *r);
/* Write the sources to src_path (one per line, for `attn translate`) and reference stream r to
 * "<ref_prefix>.<r>" for r in 0..R-1 (for `attn bleu HYP REF.0 REF.1 ...`); a missing reference
 * repeats the first reference (the same BLEU as "no reference", in every BLEU tool: clipping
 * takes the maximum count over references and the length the closest). Each file is written
 * atomically. */
attn_status attn_data_refs_write(const attn_data_refs *r, const char *src_path,
                                 const char *ref_prefix);

/* ---- tokenized dataset --------------------------------------------------------------------- */

typedef struct {
    int32_t max_len; /* longest model sequence, Ts and Tt, specials included (default 128; 0: no
                        limit) */
    bool truncate;   /* false (default): drop longer pairs; true: cut their tokens to fit */
    bool src_eos;    /* append </s> to the source (default true) */
} attn_data_encode_options;

attn_data_encode_options attn_data_encode_default_options(void);

/* Every pair encoded once, ids in one arena: pair i's source tokens are ids[off[2i] .. off[2i+1])
 * and its target tokens ids[off[2i+1] .. off[2i+2]) (no specials; they are added in batches). */
typedef struct {
    size_t n;            /* pairs kept */
    int32_t *ids;        /* (off[2n]) */
    size_t *off;         /* (2n + 1) */
    size_t *pair;        /* (n) the corpus index of each kept pair */
    int32_t pad_id, bos_id, eos_id;
    bool src_eos;
    int32_t max_len;     /* as given (0: none) */
    size_t n_dropped;    /* pairs over max_len left out (truncate false) */
    size_t n_truncated;  /* pairs cut to max_len (truncate true) */
    int32_t longest_src; /* longest source sequence kept (specials included), Ts of a batch ≤ it */
    int32_t longest_tgt; /* likewise for tgt_in / tgt_out */
} attn_data_dataset;

/* Encode pairs c[idx[0..n)] (idx NULL: all pairs in order) with tok, whose vocabulary serves both
 * languages. The tokenizer must have <pad>, <s> and </s> (attn_tok_special_id).
 * Every pair over max_len dropped is ATTN_STATUS_INVALID_ARGUMENT (nothing left to train on). */
attn_status attn_data_encode(const attn_data_corpus *c, const size_t *idx, size_t n,
                             const attn_tok *tok, const attn_data_encode_options *opt,
                             attn_data_dataset **out);
void attn_data_dataset_free(attn_data_dataset *ds);

/* Sequence lengths of row i as the model sees them (specials included). */
int32_t attn_data_src_len(const attn_data_dataset *ds, size_t i);
int32_t attn_data_tgt_len(const attn_data_dataset *ds, size_t i);

/* ---- batches ------------------------------------------------------------------------------- */

/* A padded batch, ready for attn_encdec_forward / attn_encdec_loss. The caller zero-initializes
 * it once and reuses it; the buffers grow as needed. Free with attn_data_batch_free. */
typedef struct {
    int B, Ts, Tt;
    int32_t *src;     /* (B, Ts) */
    int32_t *src_len; /* (B) */
    int32_t *tgt_in;  /* (B, Tt) <s> + target */
    int32_t *tgt_out; /* (B, Tt) target + </s> */
    int32_t *tgt_len; /* (B) */
    size_t *row;      /* (B) dataset row of each batch row */
    int64_t n_tokens; /* non-pad target tokens (sum of tgt_len): the loss's denominator */
    uint64_t epoch;   /* where the batch came from (attn_data_loader_next); 0 otherwise */
    uint64_t index;
    size_t cap_rows, cap_src, cap_tgt; /* allocated sizes (internal) */
} attn_data_batch;

void attn_data_batch_free(attn_data_batch *b);

/* Fill b with dataset rows rows[0..n), in that order (n >= 1). */
attn_status attn_data_batch_fill(const attn_data_dataset *ds, const size_t *rows, size_t n,
                                 attn_data_batch *b);

typedef enum {
    ATTN_DATA_BUDGET_PADDED = 0, /* B × max(Ts, Tt) ≤ max_tokens (the default) */
    ATTN_DATA_BUDGET_TARGET      /* sum of tgt_len ≤ max_tokens (target tokens the loss sees) */
} attn_data_budget;

typedef struct {
    size_t max_tokens;     /* default 4096; must hold the longest pair alone */
    attn_data_budget budget;
    size_t max_sentences;  /* cap on B (0: none) */
    size_t bucket_size;    /* pairs shuffled together then sorted by length (default 0: the
                              whole dataset in one bucket, the least padding) */
    uint64_t seed;         /* default 1 */
} attn_data_batch_options;

attn_data_batch_options attn_data_batch_default_options(void);

/* A position in the endless sequence of batches: batch `batch` of epoch `epoch`. Two integers, to
 * store in a training state. */
typedef struct {
    uint64_t epoch;
    uint64_t batch;
} attn_data_pos;

typedef struct attn_data_loader attn_data_loader;

/* Each epoch: the rows in an order shuffled by (seed, epoch), cut into buckets of bucket_size,
 * each bucket sorted by length (max(Ts, Tt), then Tt, then Ts) and cut greedily into batches
 * within the budget; then the batches of all buckets in an order shuffled by (seed, epoch). Every
 * row appears exactly once per epoch. The dataset must outlive the loader. Starts at (0, 0). */
attn_status attn_data_loader_new(const attn_data_dataset *ds, const attn_data_batch_options *opt,
                                 attn_data_loader **out);
void attn_data_loader_free(attn_data_loader *ld);

/* The next batch (into b, with b->epoch and b->index set), then advance; after an epoch's last
 * batch comes batch 0 of the next epoch. */
attn_status attn_data_loader_next(attn_data_loader *ld, attn_data_batch *b);
/* The position of the batch the next call to attn_data_loader_next returns. */
attn_data_pos attn_data_loader_tell(const attn_data_loader *ld);
/* Continue from pos (batch beyond the epoch's count: ATTN_STATUS_INVALID_ARGUMENT, and the
 * loader is then at the start of pos.epoch). */
attn_status attn_data_loader_seek(attn_data_loader *ld, attn_data_pos pos);
/* Batches in the epoch being served: that of the last batch returned or of the last seek (after
 * an epoch's last batch, still that epoch until the next call plans the following one). */
size_t attn_data_loader_num_batches(const attn_data_loader *ld);
/* Rows of batch k of the current epoch: *rows points into the loader's plan (valid until the
 * epoch changes), *n of them. */
attn_status attn_data_loader_batch_rows(const attn_data_loader *ld, size_t k, const size_t **rows,
                                        size_t *n);

/* ---- evaluation batches (fixed order) ------------------------------------------------------ */

typedef struct {
    size_t begin, end; /* rows [begin, end) */
} attn_data_range;

/* Cut n sequences, in their given order, into consecutive ranges of at most max_sentences
 * (0: no cap) whose padded size (count × longest length) stays within max_tokens (0: no budget);
 * a sequence longer than max_tokens gets a range of its own. *ranges is attn_alloc'd (free with
 * attn_free); for translation of a test set or standard input. */
attn_status attn_data_plan_fixed(const int32_t *lens, size_t n, size_t max_sentences,
                                 size_t max_tokens, attn_data_range **ranges, size_t *n_ranges);
/* The same over a dataset's rows, with each row's max(src, tgt) length (for valid loss). */
attn_status attn_data_dataset_plan_fixed(const attn_data_dataset *ds, size_t max_sentences,
                                         size_t max_tokens, attn_data_range **ranges,
                                         size_t *n_ranges);

#ifdef __cplusplus
}
#endif
#endif

/* attn_data.h — training data (prefix attn_data_), deterministic and resumable, for the three
 * model families: parallel corpora for the translator (below), random token windows for GPT
 * (attn_data_lm_) and masked sentences for BERT (attn_data_mlm_), further down.
 *
 * Translation: load a TSV corpus, split it deterministically into train/valid/test by distinct
 * source sentence, encode it once with a tokenizer, and cut it into padded batches by token count,
 * with an iterator whose position (epoch, batch) can be saved and restored so that a resumed run
 * sees the same batches.
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
 * Determinism (translation): every random choice (split, bucket shuffle, batch order) comes from
 * a private splitmix64 generator seeded from (seed, epoch, purpose) with integer-only bounded
 * draws and total-order sorts, so the same inputs give the same split and batches on any machine
 * and libc. */
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

/* ==== language-model windows (GPT training) ================================================ */

/* Which of a run's two window streams: training batches or the fixed validation batches. */
typedef enum { ATTN_DATA_LM_TRAIN = 0, ATTN_DATA_LM_VALID = 1 } attn_data_lm_stream;

/* The Philox stream (attn_rng, attn_train.h) a run with this seed draws the stream's windows
 * from: SplitMix64's output function of seed ^ "train" or seed ^ "valid" (the ASCII letters as a
 * big-endian integer: 0x747261696E, 0x76616C6964), so that the two streams and nearby seeds are
 * unrelated. */
uint64_t attn_data_lm_key(uint64_t seed, attn_data_lm_stream stream);

/* Batch `index` of a stream, nanoGPT's get_batch: B windows of T + 1 consecutive tokens of
 * ids[0..n),
 *   x[b] = ids[o_b .. o_b + T)   (the model input)      y[b] = ids[o_b + 1 .. o_b + T]  (targets)
 * with each offset o_b uniform in [0, n − T) (torch.randint(len(data) − T, (B,))), drawn in turn
 * by attn_rng_below from words [index · 2^32, ...) of Philox stream attn_data_lm_key(seed,
 * stream). So batch `index` depends on (seed, stream, index) only: training takes index
 * step · grad_accum + micro-batch, validation index k for its k-th batch (the same K batches at
 * every evaluation), and a resumed run draws what the uninterrupted one would have.
 * tools/ref_gpt_train.py re-implements it in Python. x and y are (B, T). Errors
 * (ATTN_STATUS_INVALID_ARGUMENT): a NULL pointer, B or T < 1, n <= T, index >= 2^32. */
attn_status attn_data_lm_batch(const int32_t *ids, size_t n, int B, int T, uint64_t seed,
                               attn_data_lm_stream stream, uint64_t index, int32_t *x,
                               int32_t *y);

/* ==== chat examples (supervised fine-tuning on the assistant's turns) ======================== */

/*   attn_data_chat *d;
 *   attn_data_chat_load("chats.jsonl", tpl, tok, NULL, 1025, &d);   // T + 1 tokens kept each
 *   size_t idx[8] = {...};                                           // which examples
 *   attn_data_chat_batch(d, idx, 8, 1024, x, y);                     // (8, 1024) each
 *
 * Each line of a chat JSONL file (attn_chat.h: a JSON array of messages) is rendered with the
 * model's chat template as transformers' apply_chat_template(messages, tokenize=True) gives it
 * (add_generation_prompt false, no special tokens added by the tokenizer: the template has them)
 * and tokenized. The training targets are the assistant messages' tokens: for assistant message
 * i, with F the whole conversation's ids, P the ids of render(messages[:i],
 * add_generation_prompt=true) and Q those of render(messages[:i+1]), the tokens F[lcp(P, F) ..
 * lcp(Q, F)) are targets (lcp: the length of the common prefix), i.e. the reply and what the
 * template puts after it (its end-of-turn token) — everything the model must learn to generate.
 * The other tokens (system, user, the template's headers) are context only. A conversation
 * longer than max_tokens is cut to its first max_tokens tokens. */
typedef struct attn_data_chat attn_data_chat;

/* The conversations of path (chat JSONL) rendered by tpl (attn_chat_template from attn_chat.h;
 * vars_json NULL or a JSON object of more template variables) and tokenized by tok; max_tokens
 * >= 2. A conversation without an assistant message, or whose assistant tokens were all cut, is
 * skipped (counted in attn_data_chat_skipped). No example at all is INVALID_ARGUMENT. Errors
 * name PATH:LINE. */
struct attn_chat_template;
attn_status attn_data_chat_load(const char *path, const struct attn_chat_template *tpl,
                                const attn_tok *tok, const char *vars_json, int max_tokens,
                                attn_data_chat **out);
void attn_data_chat_free(attn_data_chat *d);
size_t attn_data_chat_count(const attn_data_chat *d);   /* examples kept */
size_t attn_data_chat_skipped(const attn_data_chat *d); /* conversations skipped */
int attn_data_chat_longest(const attn_data_chat *d);     /* tokens of the longest example */
/* Example i: its n ids and target flags (mask[t] = 1: ids[t] is an assistant token); the
 * arrays belong to d. */
attn_status attn_data_chat_example(const attn_data_chat *d, size_t i, const int32_t **ids,
                                   const uint8_t **mask, int *n);
/* Rows b = 0 .. B−1 are examples idx[b]: x (B, T) their ids t = 0 .. T−1, y (B, T) the next id
 * when it is a target, else ignore (−1, ATTN_GPT_IGNORE_INDEX); positions past an example's end
 * hold pad_id in x and −1 in y. *n_targets (may be NULL) counts the targets. */
attn_status attn_data_chat_batch(const attn_data_chat *d, const size_t *idx, int B, int T,
                                 int32_t pad_id, int32_t *x, int32_t *y, size_t *n_targets);

/* ==== masked-LM sentences (BERT pre-training) ============================================== */

/*   attn_data_sentences s;
 *   attn_data_load_sentences("cmn.txt", tok, &(attn_data_text_options){1, 128}, &s);
 *   attn_data_mlm_options mo = attn_data_mlm_default_options();      // seed, batch 32, 15%
 *   attn_data_mlm *m;   attn_data_mlm_new(&s, tok, &mo, &m);
 *   attn_data_mlm_batch b = {0};
 *   attn_data_mlm_train_batch(m, epoch, k, &b);   // k < attn_data_mlm_train_batches(m)
 *   attn_bert_forward(model, st, b.B, b.T, b.ids, NULL, b.len, NULL);
 *   attn_bert_mlm_loss(model, st, b.labels, &loss); */

typedef struct {
    int column;  /* 0: the whole line (default); K >= 1: the K-th TAB-separated field */
    int max_len; /* tokens per sentence, [CLS] and [SEP] included (default 128; at least 3) */
} attn_data_text_options;

attn_data_text_options attn_data_text_default_options(void);

/* The sentences of a text file, tokenized. */
typedef struct {
    size_t n;       /* sentences kept */
    int32_t *ids;   /* (tokens) every sentence's ids, concatenated */
    size_t *off;    /* (n + 1) sentence i is ids[off[i] .. off[i + 1]) */
    size_t n_lines; /* lines in the file */
    size_t tokens;  /* off[n] */
} attn_data_sentences;

/* Each line of the file at path (split on '\n', a trailing '\r' dropped; a last line without '\n'
 * counts), or its column K, tokenized with the special tokens and truncated to max_len
 * ([CLS] ... [SEP]: Hugging Face's tokenizer(line, truncation=True, max_length=max_len)); a line
 * with no token besides the specials (empty, blank) is skipped, so sentence i is the i-th line
 * kept. Errors, naming path (and line): cannot open or read (ATTN_STATUS_IO), invalid UTF-8
 * (path:line, ATTN_STATUS_INVALID_ARGUMENT), no column K (path:line, ATTN_STATUS_FORMAT), no
 * sentence at all (ATTN_STATUS_INVALID_ARGUMENT), bad options. On failure *out is zeroed. */
attn_status attn_data_load_sentences(const char *path, const attn_tok *tok,
                                     const attn_data_text_options *opt, attn_data_sentences *out);
void attn_data_sentences_free(attn_data_sentences *s);

typedef struct {
    uint64_t seed;          /* validation split, epoch order, masks (default 1) */
    size_t valid_size;      /* sentences held out for validation; SIZE_MAX (the default):
                               min(500, n / 20) */
    int batch;              /* sentences per batch (default 32) */
    float mlm_probability;  /* the masking of attn_embed_mlm_mask (attn_embed.h): 0.15, */
    float mask_fraction;    /* 0.8 and */
    float random_fraction;  /* 0.1 (BERT's, DataCollatorForLanguageModeling's) */
} attn_data_mlm_options;

attn_data_mlm_options attn_data_mlm_default_options(void);

/* A batch of masked sentences for attn_bert_forward / attn_bert_mlm_loss. Zero-initialize once
 * and reuse; the buffers grow as needed. Free with attn_data_mlm_batch_free. */
typedef struct {
    int B, T;          /* sentences, the longest one's tokens */
    int32_t *ids;      /* (B, T) masked input ids, right-padded with 0 */
    int32_t *labels;   /* (B, T) the original id where a token was chosen, -100
                          (ATTN_BERT_IGNORE_INDEX) elsewhere and on the padding */
    int32_t *len;      /* (B) tokens of each sentence */
    uint32_t *example; /* (B) the sentence index of each row */
    int64_t n_tokens;  /* real (non-pad) tokens: the sum of len */
    int64_t n_labels;  /* chosen tokens: the loss's denominator */
    size_t cap_rows, cap_cells; /* allocated sizes (internal) */
} attn_data_mlm_batch;

void attn_data_mlm_batch_free(attn_data_mlm_batch *b);

/* Masked-LM batches of a set of sentences (which must outlive it):
 *   split   valid_size sentences (a seeded shuffle of all: attn_rng_shuffle on the Philox stream
 *           SplitMix64(seed ^ "valid")) validate; the others, in file order, train;
 *   epochs  epoch e serves the training sentences in the order attn_rng_shuffle gives on words
 *           [e · 2^32, ...) of stream SplitMix64(seed ^ "shuffle"), cut into batches of `batch`
 *           (the last one smaller);
 *   masks   attn_embed_mlm_mask(seed, epoch, sentence index): [CLS], [SEP] and every other
 *           special token of tok are never chosen, [MASK] is tok's, random ids are drawn from
 *           tok's vocabulary; so a sentence's mask depends on it and the epoch only (a new one
 *           each epoch); validation masks are fixed (epoch 2^24 − 1).
 * tools/ref_bert_train.py re-implements the masks in Python. Errors: tok without a [MASK] token,
 * a validation set that leaves nothing to train on, more than 2^28 sentences, bad options. */
typedef struct attn_data_mlm attn_data_mlm;

attn_status attn_data_mlm_new(const attn_data_sentences *s, const attn_tok *tok,
                              const attn_data_mlm_options *opt, attn_data_mlm **out);
void attn_data_mlm_free(attn_data_mlm *m);

size_t attn_data_mlm_num_train(const attn_data_mlm *m);     /* training sentences */
size_t attn_data_mlm_num_valid(const attn_data_mlm *m);     /* validation sentences */
size_t attn_data_mlm_train_batches(const attn_data_mlm *m); /* per epoch */
size_t attn_data_mlm_valid_batches(const attn_data_mlm *m);
/* The validation sentences' indices, ascending (n = attn_data_mlm_num_valid). */
const uint32_t *attn_data_mlm_valid_examples(const attn_data_mlm *m);

/* Batch k of epoch `epoch` (epoch < 2^24 − 1, k < attn_data_mlm_train_batches), masked. */
attn_status attn_data_mlm_train_batch(attn_data_mlm *m, uint64_t epoch, size_t k,
                                      attn_data_mlm_batch *b);
/* Validation batch k (k < attn_data_mlm_valid_batches): the validation sentences in index
 * order, `batch` at a time, with their fixed masks. */
attn_status attn_data_mlm_valid_batch(const attn_data_mlm *m, size_t k, attn_data_mlm_batch *b);

#ifdef __cplusplus
}
#endif
#endif

/* attn_embed.h — what BERT models are used for (prefix attn_embed_): sentence embeddings as
 * sentence-transformers computes them, cosine similarity and ranking, transformers' fill-mask
 * pipeline, and the masking of masked-LM training. Built on attn_bert.h (the model) and
 * attn_tok.h (the WordPiece tokenizer).
 *
 *   attn_embed *e;
 *   if (attn_embed_load("models/all-MiniLM-L6-v2", NULL, &e)) { puts(attn_last_error()); ... }
 *   const char *texts[2] = {"Knowledge is power.", "知识就是力量"};
 *   float emb[2 * 384];                                  // (n, attn_embed_get_info(e)->dim)
 *   attn_embed_encode(e, 2, texts, NULL, emb);
 *   float cos = attn_embed_cosine(384, emb, emb + 384);
 *
 *   attn_embed_fill_result r;                            // a BertForMaskedLM directory
 *   attn_embed_fill_mask(e, "The capital of France is [MASK].", SIZE_MAX, 5, &r);
 *   ... r.cands[0].token_str, r.cands[0].score ...
 *   attn_embed_fill_result_free(&r);
 *   attn_embed_free(e);
 *
 * ---- The model directory (attn_embed_load) ------------------------------------------------------
 * A sentence-transformers directory (modules.json present), as sentence-transformers 2.7 reads it:
 *   modules.json                 a list of modules {"idx", "name", "path", "type"}; supported:
 *                                sentence_transformers.models.Transformer (the BERT model lives in
 *                                DIR/path: config.json, model.safetensors, tokenizer.json, and its
 *                                sentence_bert_config.json), ...models.Pooling (DIR/path/config.json)
 *                                and ...models.Normalize (L2 normalization). Any other module
 *                                (Dense, LayerNorm, ...) is ATTN_STATUS_UNSUPPORTED naming it.
 *   sentence_bert_config.json    "max_seq_length" (tokens per sentence INCLUDING [CLS] and [SEP];
 *                                longer sentences are truncated) and "do_lower_case" (Python's
 *                                str.lower() before tokenizing). Absent: max_seq_length as for a
 *                                plain directory, do_lower_case false.
 *   Pooling config.json          exactly one of pooling_mode_cls_token, pooling_mode_mean_tokens,
 *                                pooling_mode_max_tokens, pooling_mode_mean_sqrt_len_tokens true
 *                                (several at once, which sentence-transformers concatenates, and
 *                                weightedmean / lasttoken are ATTN_STATUS_UNSUPPORTED);
 *                                "word_embedding_dimension" must equal hidden_size.
 * A plain Hugging Face BERT directory (config.json, model.safetensors, tokenizer.json; no
 * modules.json): mean pooling, no normalization (sentence-transformers' defaults when it wraps a
 * plain model), max_seq_length = min(max_position_embeddings, tokenizer_config.json's
 * "model_max_length" when present). Options override each of these.
 * tokenizer_config.json (optional) also gives "clean_up_tokenization_spaces" (default false), which
 * transformers' decode applies after the tokenizer's own decoder; fill-mask does the same.
 *
 * ---- Tokenization (what sentence-transformers 2.7 does before the model) ------------------------
 * text → Python's str.strip() (the Unicode whitespace Python strips) → str.lower() when
 * do_lower_case (code point lowercase mapping, U+0130 → "i̇", final sigma; not locale dependent) →
 * the tokenizer.json pipeline with its post-processor ([CLS] A [SEP]) → truncation to
 * max_seq_length tokens counting the specials (transformers' truncation="longest_first", which for
 * one text drops tokens from the end before [SEP] is added). The empty string (and a line of
 * spaces) is embedded as sentence-transformers embeds it: [CLS] [SEP]. Text must be valid UTF-8
 * (else ATTN_STATUS_INVALID_ARGUMENT naming the text's index and the byte offset).
 * Known difference: transformers' BertTokenizerFast re-imposes tokenizer_config.json's
 * do_lower_case (default true when absent), strip_accents and tokenize_chinese_chars on the
 * tokenizer.json BertNormalizer when they disagree; attn uses tokenizer.json's normalizer as it
 * is. Real checkpoints have both files agree (all-MiniLM-L6-v2 does).
 *
 * ---- Batching and speed ----------------------------------------------------------------------
 * attn_embed_encode tokenizes every text (in parallel), sorts them by token count (longest first,
 * as sentence-transformers does) and runs the model on batches of at most batch_size sentences.
 * With attn_set_num_threads(n > 1) and more than one batch, the batches are shared out over the n
 * threads, each running whole forwards with one-thread kernels on its own run state (batches
 * shrink to ceil(count / n) sentences when that is smaller, so that every thread gets work); one
 * text alone runs its kernels on the n threads instead. At load the handle packs the layers'
 * weights once into the GEMM's panel layout (attn_bert_pack_weights; ~42 MB more for
 * all-MiniLM-L6-v2). The model computes only each sentence's real tokens (attn_bert.h), each
 * row's sums in an order that depends on nothing else, so an embedding does not depend on the
 * order of the texts, the batch size, the thread count or the other texts of the call: it equals
 * the embedding of the text alone bit for bit (tests/test_embed.c and test_embed_speed.c check
 * within 1e-6; were the packing to fail for lack of memory, the unpacked path differs by ~2e-7).
 * Outputs are in input order.
 *
 * A handle holds one model and its run states: use it from one thread at a time (it uses
 * attn_set_num_threads threads itself). Several handles may share nothing but the CPU. */
#ifndef ATTN_EMBED_H
#define ATTN_EMBED_H

#include "attn_bert.h"
#include "attn_core.h"
#include "attn_tok.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- loading ------------------------------------------------------------------------------- */

typedef struct {
    int max_seq_length; /* > 0: override the directory's (at most max_position_embeddings);
                           0: the directory's (default 0) */
    int pooling;        /* -1: the directory's (default); else an attn_bert_pooling value */
    int normalize;      /* -1: the directory's (default); 0: off; 1: L2-normalize */
    int batch_size;     /* sentences per forward pass (default 32) */
    int precision;      /* attn_precision of the dense layers: ATTN_PRECISION_F32 (default:
                           sentence-transformers' numbers) or ATTN_PRECISION_BF16 (opt-in,
                           faster, cosine to F32 >= 0.9999; attn_bert_pack_weights_precision);
                           BF16 on a CPU without AVX512-BF16 is ATTN_STATUS_UNSUPPORTED */
} attn_embed_options;

attn_embed_options attn_embed_default_options(void);

/* What a loaded directory says (after the options are applied). */
typedef struct {
    int dim;                   /* embedding size = hidden_size */
    int max_seq_length;        /* tokens per sentence, [CLS] and [SEP] included */
    bool do_lower_case;        /* str.lower() before tokenizing */
    attn_bert_pooling pooling;
    bool normalize;
    bool sentence_transformers; /* modules.json was found */
    bool has_mlm;              /* the model has a masked-LM head (fill-mask works) */
    bool clean_up_tokenization_spaces; /* tokenizer_config.json's flag (fill-mask output) */
    int32_t cls_id, sep_id, pad_id, mask_id; /* -1 when the tokenizer lacks the token */
} attn_embed_info;

typedef struct attn_embed attn_embed;

/* Load DIR as described above. opt may be NULL (defaults). Errors name the file and field; a
 * missing tokenizer.json is ATTN_STATUS_IO naming the path. */
attn_status attn_embed_load(const char *dir, const attn_embed_options *opt, attn_embed **out);
void attn_embed_free(attn_embed *e);

const attn_embed_info *attn_embed_get_info(const attn_embed *e);
const attn_bert_model *attn_embed_model(const attn_embed *e);
const attn_tok *attn_embed_tokenizer(const attn_embed *e);

/* ---- sentence embeddings ------------------------------------------------------------------- */

/* The token ids the model sees for one text (tokenization above, with truncation). On success
 * *n ids are in ids[0..*n); cap too small: ATTN_STATUS_INVALID_ARGUMENT with *n = the number
 * needed. */
attn_status attn_embed_tokenize(const attn_embed *e, const char *text, size_t len, int32_t *ids,
                                size_t cap, size_t *n);

/* Embeddings of n texts: out (n, dim), row i for texts[i] (lens[i] bytes, or NUL-terminated when
 * lens is NULL). n == 0 does nothing. */
attn_status attn_embed_encode(attn_embed *e, size_t n, const char *const *texts,
                              const size_t *lens, float *out);

/* Byte offset of the first invalid UTF-8 sequence in s[0..n) (overlong forms, surrogates, code
 * points past U+10FFFF and truncated sequences are invalid), or n when all of it is valid: the
 * check every text passes (for callers that want to name the offending line themselves). */
size_t attn_embed_utf8_check(const char *s, size_t n);

/* ---- similarity ---------------------------------------------------------------------------- */

/* Cosine similarity a·b / max(|a| |b|, 1e-12), accumulated in double. Two zero vectors give 0. */
float attn_embed_cosine(int dim, const float *a, const float *b);

/* scores (n) = cosine of query (dim) with each row of cands (n, dim); order (n) = the indices by
 * score, highest first, equal scores by index (a stable sort). order may be NULL. */
attn_status attn_embed_rank(int dim, const float *query, size_t n, const float *cands,
                            float *scores, size_t *order);

/* ---- fill-mask (transformers' FillMaskPipeline) --------------------------------------------- */

typedef struct {
    int32_t token;   /* the predicted id */
    float score;     /* its probability: softmax over the whole vocabulary at the mask */
    char *token_str; /* decode([token]) (special tokens kept) */
    char *sequence;  /* the input ids with this token at the mask, pad ids removed, decoded
                        (special tokens skipped when the text has one mask; kept, so that the
                        other masks stay visible, when it has several — as the pipeline) */
} attn_embed_fill_candidate;

typedef struct {
    int n_masks;                    /* masks in the text, >= 1 */
    int top_k;                      /* candidates per mask */
    int32_t *positions;             /* (n_masks) token positions of the masks, [CLS] = 0 */
    attn_embed_fill_candidate *cands; /* (n_masks, top_k), best first per mask */
} attn_embed_fill_result;

/* Predict the tokens at every mask token of text (len bytes, SIZE_MAX = NUL-terminated): the text
 * is tokenized with the special tokens and without truncation (as the pipeline); candidates are
 * the top_k ids by probability (equal probabilities: lower id first). Errors: no mask token in
 * the text ("no [MASK] in the text"), a model without a masked-LM head, a tokenizer without a
 * mask token, a text longer than max_position_embeddings tokens, top_k outside [1, vocab]. */
attn_status attn_embed_fill_mask(attn_embed *e, const char *text, size_t len, int top_k,
                                 attn_embed_fill_result *out);
void attn_embed_fill_result_free(attn_embed_fill_result *r);

/* ---- masked-LM masking (BERT pre-training, as transformers' DataCollatorForLanguageModeling) ---- */

typedef struct {
    float mlm_probability;  /* each maskable token is chosen with this probability (0.15) */
    float mask_fraction;    /* a chosen token becomes mask_id with this probability (0.8) */
    float random_fraction;  /* ... a uniformly random id in [0, vocab_size) (0.1); else it is
                               kept unchanged (the remaining 0.1) */
    int32_t mask_id;        /* the [MASK] id */
    int32_t vocab_size;     /* V: random ids are drawn from [0, V) (as the collator does) */
    const uint8_t *no_mask; /* (V) nonzero for ids never chosen (special tokens: [CLS], [SEP],
                               [PAD], [UNK], [MASK] — the collator's special-token mask); may be
                               NULL */
} attn_embed_mlm_params;

/* 0.15 / 0.8 / 0.1, mask_id -1, vocab_size 0, no_mask NULL (the caller sets the last three). */
attn_embed_mlm_params attn_embed_mlm_default_params(void);

/* Mask one sequence: ids (n) → masked (n) (model input) and labels (n) (the original id where a
 * token was chosen, ATTN_BERT_IGNORE_INDEX elsewhere). The draws are a pure function of
 * (seed, epoch, example, t) — Philox4x32-10 (attn_rng_block) with key seed and block
 *   (epoch << 40) | (example << 12) | t
 * whose four words u0..u3 decide token t: chosen when u0 < floor(mlm_probability · 2^32) (and its
 * id is not no_mask); then mask_id when u1 < floor(mask_fraction · 2^32), else a random id
 * (u2 · V) >> 32 when u1 < floor((mask_fraction + random_fraction) · 2^32), else unchanged. So the
 * masking of a sentence depends only on which sentence it is and the epoch (dynamic masking: a
 * new mask each epoch), not on its batch, and a resumed run masks exactly as the uninterrupted
 * one. Limits: n <= 4096, example < 2^28, epoch < 2^24 (else ATTN_STATUS_INVALID_ARGUMENT). masked
 * may equal ids. */
attn_status attn_embed_mlm_mask(const attn_embed_mlm_params *p, uint64_t seed, uint64_t epoch,
                                uint64_t example, int n, const int32_t *ids, int32_t *masked,
                                int32_t *labels);

#ifdef __cplusplus
}
#endif
#endif

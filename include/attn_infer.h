/* attn_infer.h — fast translation with the encoder–decoder model (attn_models.h): greedy decoding
 * and beam search over a KV cache (prefix attn_translate_).
 *
 * A session holds everything mutable (caches, scratch); the model is only read, so one model can
 * serve several sessions (one per thread of a server, say). All buffers are allocated once by
 * attn_translate_session_init: decoding allocates nothing per token.
 *
 *   attn_translate_session *s;
 *   attn_translate_session_init(m, 32, 4, 64, 128, &s);   // 32 sentences, beam 4, Ts<=64, 128 steps
 *   attn_translate_options o = attn_translate_default_options();   // beam 4, alpha 0.6
 *   o.bos_id = 2; o.eos_id = 3;
 *   attn_translate(s, &o, B, Ts, src, src_len, max_out, out_ids, out_len, out_score);
 *   attn_translate_session_free(s);
 *
 * How a step runs (N = active sentences × beam hypotheses, all at the same position t):
 *   - the encoder runs once per batch; each decoder layer's cross-attention keys and values
 *     (Ts, 2C per sentence) are projected once, by one fused GEMM per layer, and kept;
 *   - each step embeds the N newest tokens and runs every decoder layer on N rows: one GEMM per
 *     projection for all hypotheses of all sentences; self-attention appends the new key/value to
 *     the hypothesis's cache (N, Tmax, C) and attends over its first t+1 positions (Tq = 1);
 *     cross-attention treats a sentence's K hypotheses as K queries over its source (Tq = K);
 *   - logits (N, Vt) by one GEMM, log-probabilities by a per-row log-sum-exp (the step of the
 *     first token runs one row per sentence, N = sentences, in batches of 16 or more).
 * Hypotheses of a sentence are contiguous (row = sentence · K + beam). After each beam step the
 * surviving hypotheses' cache rows are gathered into place (only rows whose parent changed, and
 * only the t+1 filled positions); finished sentences are compacted away so the batch shrinks.
 *
 * Scores. A hypothesis y_1..y_n followed by </s> has log-probability
 *   logp = Σ_{i=1..n+1} log P(y_i | y_<i, x)   (y_{n+1} = </s>),
 * and its final score is logp / lp(n + 1) with GNMT's length penalty
 *   lp(L) = ((5 + L) / 6)^alpha        (Wu et al. 2016; alpha = 0 gives lp = 1: plain logp)
 * where L counts the generated tokens including </s>. The padding and <s> ids are never
 * generated. A hypothesis that reaches the length limit is made to emit </s> (its score includes
 * that log-probability), so every result ends properly.
 * Early stop: a sentence's beam search ends when K hypotheses have finished and no live one can
 * still beat the worst of them. With logp ≤ 0 only falling as tokens are added, the best a live
 * hypothesis can reach is logp / max lp(L) over the lengths L it may still end at, which is exact
 * (never stops too early). It also ends, sooner and with the same result, once no live
 * hypothesis can reach the best finished score (with a 1e-3 margin on logp for rounding): what
 * would still change is only the K-best list, of which only the best is returned.
 * ATTN_TRANSLATE_STOP_HEURISTIC instead assumes the live hypothesis ends now
 * (logp / lp(current length + 1)), as Hugging Face's early_stopping=False, and compares with the
 * worst of K finished only; faster for alpha > 0, and its results may differ.
 * Speed: the first step runs one row per sentence (not K copies of <s>; batches of 16 or more
 * sentences, where that keeps every GEMM on the same kernel path), and the candidate search
 * looks at a row's value only when a vectorized threshold test says it may be among the row's
 * best 2K; neither changes a result (tests/test_translate_speed.c).
 * Length limit per sentence: n ≤ min(max_len, floor(max_len_a · src_len + max_len_b),
 * model max_len − 1, session max_tgt − 1) tokens before </s> (terms switched off when <= 0). */
#ifndef ATTN_INFER_H
#define ATTN_INFER_H

#include "attn_core.h"
#include "attn_models.h"
#include "attn_tok.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ATTN_TRANSLATE_STOP_EXACT = 0, /* stop when no live hypothesis can beat the K-th finished */
    ATTN_TRANSLATE_STOP_HEURISTIC  /* ... judging live hypotheses at their current length */
} attn_translate_stop;

typedef struct {
    int beam_size;        /* K >= 1; 1 is greedy decoding (argmax each step) */
    float length_penalty; /* alpha of lp(L) = ((5 + L)/6)^alpha; 0 = sum of log-probabilities */
    int max_len;          /* absolute cap on output tokens before </s>; <= 0: none */
    float max_len_a;      /* relative cap a · src_len + b; a <= 0: none */
    int max_len_b;
    attn_translate_stop stop;
    int32_t bos_id;       /* the decoder's first input (<s>) */
    int32_t eos_id;       /* </s>: ends a hypothesis */
    bool always_beam;     /* run the beam-search code even for K = 1 (tests: it equals greedy) */
} attn_translate_options;

/* beam 4, alpha 0.6, max_len 0 (model limit), a = 2, b = 10, exact stop, bos 2, eos 3 (the
 * tokenizer trainer's default special ids: <pad> 0, <unk> 1, <s> 2, </s> 3). */
attn_translate_options attn_translate_default_options(void);

typedef struct attn_translate_session attn_translate_session;

/* A session for m (which must outlive it; the session keeps transposed copies of the decoder's
 * weight matrices taken at init, so re-create the session after changing m's weights) translating batches of up to max_sentences sentences
 * with beams up to max_beam, sources up to max_src tokens and up to max_tgt decoder positions
 * (output tokens + </s>; clamped to the model's max_len). TOO_LARGE before allocating absurd
 * sizes. */
attn_status attn_translate_session_init(const attn_encdec_model *m, int max_sentences,
                                        int max_beam, int max_src, int max_tgt,
                                        attn_translate_session **out);
void attn_translate_session_free(attn_translate_session *s);

/* Translate B sentences.
 *   src (B, Ts) source ids in [0, Vs) (the caller appends </s>, as in training); src_len (B) in
 *     [1, Ts]
 *   out_ids (B, max_out): the best hypothesis of sentence b in out_ids[b·max_out ..], without
 *     <s> and </s>; out_len (B) its length; out_score (B) or NULL its score (see above).
 * A hypothesis longer than max_out is an error (pass max_out >= the length limit). Deterministic:
 * ties go to the lower hypothesis index, then the lower token id. */
attn_status attn_translate(attn_translate_session *s, const attn_translate_options *o, int B,
                           int Ts, const int32_t *src, const int32_t *src_len, int max_out,
                           int32_t *out_ids, int32_t *out_len, float *out_score);

/* Translate n sentences of ids: src[i] holds src_len[i] ids (</s> included, 1..max_src of the
 * session), out_ids (n, max_out) receives sentence i's best hypothesis at out_ids[i·max_out ..]
 * (without <s>, </s>), out_len (n) its length, out_score (n) or NULL its score. The sentences are
 * sorted by length into batches of up to the session's max_sentences (little padding) and each
 * batch is decoded as attn_translate does. With more than one thread (attn_get_num_threads())
 * and more than one batch, whole batches run concurrently, one per thread, each on its own
 * worker session (made on first use and kept in s) with single-threaded kernels, longest batch
 * first — the
 * inter-batch parallelism of CTranslate2's inter_threads: no synchronization inside a decoding
 * step. Every sentence's result is the same as attn_translate gives it in any batch (each
 * hypothesis's rows are computed independently of the other rows). */
attn_status attn_translate_many(attn_translate_session *s, const attn_translate_options *o,
                                size_t n, const int32_t *const *src, const int32_t *src_len,
                                int max_out, int32_t *out_ids, int32_t *out_len,
                                float *out_score);

/* Translate n UTF-8 texts with the model's tokenizer tok: each source is its ids + </s>, cut to
 * the session's source length (*n_cut, if not NULL, counts the texts that were cut); the sources
 * are decoded by attn_translate_many (sorted batches, one batch per thread; the decoder may
 * produce up to the session's max_tgt − 1 tokens). out[i]
 * receives the translation of texts[i] (NUL-terminated, attn_alloc'd: free with attn_free; "" for
 * an empty text), scores[i] (scores may be NULL) its score (0 for an empty text). On failure the
 * out[i] already written are freed and set to NULL. */
attn_status attn_translate_texts(attn_translate_session *s, const attn_translate_options *o,
                                 const attn_tok *tok, const char *const *texts, size_t n,
                                 char **out, float *scores, size_t *n_cut);

/* ---- the incremental decoder, for tests and custom searches ------------------------------- */

/* Encode B sentences and make R hypotheses per sentence (N = B·R rows, row = b·R + r), all empty
 * (position 0). Needs B <= max_sentences and R <= max_beam. */
attn_status attn_translate_begin(attn_translate_session *s, int B, int Ts, const int32_t *src,
                                 const int32_t *src_len, int R);
/* Feed one token per hypothesis, tokens (N), at the next position t (0 for the first call): the
 * logits (N, Vt) of the next token become available from attn_translate_logits. */
attn_status attn_translate_step(attn_translate_session *s, const int32_t *tokens);
/* (N, Vt) logits of the last step, valid until the next call on s. */
const float *attn_translate_logits(const attn_translate_session *s);
/* Reorder hypotheses within their sentences: new row i (of sentence i / R) continues old row
 * parent[i] (N entries, parent[i] in the same sentence), by copying cache rows. */
attn_status attn_translate_reorder(attn_translate_session *s, const int32_t *parent);

/* ---- transformers' generate, for Hugging Face translation models -------------------------------
 * Greedy decoding and beam search as transformers' generate (4.49's GenerationMixin: _sample
 * without sampling, _beam_search with BeamSearchScorer) does them for MarianMTModel and
 * M2M100ForConditionalGeneration, on the session's KV-cache decoder (attn_translate_begin /
 * step / reorder), so the sequences are transformers' own:
 *   - the decoder starts from decoder_start_token_id; max_length counts it (max_new_tokens > 0
 *     sets max_length = 1 + max_new_tokens); a sequence stops at eos_token_id or max_length;
 *   - each step's scores are the log-softmax of the logits (beam search; greedy takes the argmax
 *     of the logits) after transformers' processors in its order: no_repeat_ngram_size (n-grams
 *     of the sequence with its start token), bad_words_ids (one token: always; longer: when the
 *     sequence ends with the prefix; sequences equal to [eos] are dropped, as transformers does),
 *     min_length (eos banned while the sequence is shorter), forced_bos_token_id (the only token
 *     at the first step, score 0), forced_eos_token_id (the only token at max_length − 1, score 0);
 *   - beam search: num_beams hypotheses per sentence, beams 1.. starting at −1e9; the best
 *     2·num_beams candidates of beam score + token score (float32, as transformers adds them); an
 *     end among the top num_beams finishes a hypothesis with score sum_logprobs / L^length_penalty
 *     (L = its tokens after the start, </s> included); a sentence is done when num_beams have
 *     finished and early_stopping says no live one can do better (TRUE: at once; FALSE:
 *     transformers' heuristic, the best candidate's sum / current length^lp; NEVER: the exact bound
 *     with max_length for lp > 0); at max_length the live hypotheses are scored as they are.
 * attn's own models keep attn_translate (GNMT's length penalty). */
typedef enum {
    ATTN_HF_EARLY_FALSE = 0, /* transformers' early_stopping=False (its default) */
    ATTN_HF_EARLY_TRUE,      /* True */
    ATTN_HF_EARLY_NEVER      /* "never" */
} attn_hf_early_stopping;

#define ATTN_HF_MAX_BAD_WORDS 64
#define ATTN_HF_MAX_BAD_LEN 8

typedef struct {
    int num_beams;            /* >= 1; 1: greedy */
    float length_penalty;     /* exponent of the length in a finished hypothesis's score */
    attn_hf_early_stopping early_stopping;
    int max_length;           /* decoder sequence length, the start token included */
    int max_new_tokens;       /* > 0: overrides max_length (1 + max_new_tokens) */
    int min_length;           /* eos banned while the sequence (start included) is shorter */
    int no_repeat_ngram_size; /* 0: off */
    int32_t decoder_start_token_id, eos_token_id, pad_token_id;
    int32_t forced_bos_token_id, forced_eos_token_id; /* -1: none */
    int n_bad_words;
    int bad_words_len[ATTN_HF_MAX_BAD_WORDS];
    int32_t bad_words[ATTN_HF_MAX_BAD_WORDS][ATTN_HF_MAX_BAD_LEN];
} attn_hf_generate_options;

/* transformers' GenerationConfig defaults: num_beams 1, length_penalty 1, early_stopping False,
 * max_length 20, no n-gram ban, no bad words, and ids -1 (unset: attn_hf_generate refuses a
 * missing decoder_start_token_id or eos_token_id; pad_token_id defaults to eos). */
attn_hf_generate_options attn_hf_generate_default_options(void);

/* DIR's generation settings as transformers' from_pretrained takes them: DIR/generation_config.json
 * when present, else the same fields of DIR/config.json; missing fields keep the defaults above.
 * Fields read: num_beams, length_penalty, early_stopping (true / false / "never"), max_length,
 * max_new_tokens, min_length, no_repeat_ngram_size, decoder_start_token_id, eos_token_id (an id,
 * or a list of one), pad_token_id, forced_bos_token_id, forced_eos_token_id, bad_words_ids (lists
 * of ids). A bad value is a one-line error naming the file and the field. */
attn_status attn_hf_generate_config_load(const char *dir, attn_hf_generate_options *o);

/* Generate for B sentences src (B, Ts) (right-padded ids with their </s>; src_len (B) in [1, Ts])
 * on session s (made with max_beam >= num_beams and max_tgt >= max_length − 1).
 * out_ids (B, max_out): sentence b's tokens after the decoder start, its </s> included when it
 * ended with one (transformers' sequences[b, 1:] without the padding); out_len (B); out_score (B)
 * or NULL: beam search, the hypothesis's score (transformers' sequences_scores); greedy, the sum of
 * the chosen tokens' log-probabilities (unprocessed). */
attn_status attn_hf_generate(attn_translate_session *s, const attn_hf_generate_options *o, int B,
                             int Ts, const int32_t *src, const int32_t *src_len, int max_out,
                             int32_t *out_ids, int32_t *out_len, float *out_score);


/* ---- Hugging Face translation directories, text in and text out --------------------------------
 * What `attn translate --model DIR` does for a MarianMTModel / M2M100ForConditionalGeneration
 * directory (or an `attn export` of attn's own model), as one object shared by the CLI, `attn
 * attention` / `attn explain --model` and the Python package:
 *   - the tokenizer: Marian's source.spm / target.spm / vocab.json or NLLB's tokenizer.json with
 *     an NLLB tokenizer_config.json (attn_mt_tok), else a plain tokenizer.json (attn_tok: the
 *     export's; </s> appended to each source as attn's models are trained);
 *   - language codes: src_lang (NLLB: the source's first token), tgt_lang (NLLB: the forced
 *     first generated token, generate's forced_bos_token_id; Marian: ">>tgt_lang<<" put before the
 *     source), checked when the translator is made;
 *   - generation_config.json's settings (attn_hf_generate_config_load), num_beams and
 *     max_new_tokens overridable; attn_hf_generate on a session of max_sentences sentences;
 *   - the output back to text without </s> and special tokens.
 *   attn_hf_translator *t;
 *   attn_hf_translator_params p = attn_hf_translator_default_params();
 *   p.tgt_lang = "zho_Hans";
 *   attn_hf_translator_init(model, "models/nllb", &p, &t);
 *   attn_hf_translator_texts(t, texts, n, out, NULL);       // out[i]: attn_free
 *   attn_hf_translator_free(t);
 * The model (loaded from the same directory) must outlive the translator. */
typedef struct {
    const char *src_lang, *tgt_lang; /* NLLB codes / Marian's target >>lang<< (NULL: none) */
    int num_beams;                   /* > 0: overrides generation_config.json's */
    int max_new_tokens;              /* > 0: overrides (max_length = 1 + max_new_tokens) */
    float length_penalty;            /* not NaN: overrides (NaN) */
    int early_stopping;              /* >= 0: an attn_hf_early_stopping that overrides (-1) */
    int max_sentences;               /* sentences per attn_hf_generate call, 1..4096 (32) */
    bool need_tokenizer;             /* false: a directory without a tokenizer is fine (ids only;
                                        one present is still loaded, for labels) (true) */
} attn_hf_translator_params;
attn_hf_translator_params attn_hf_translator_default_params(void);

typedef struct attn_hf_translator attn_hf_translator;

/* m: the model loaded from dir (attn_encdec_load_dir; not attn's own architecture). */
attn_status attn_hf_translator_init(const attn_encdec_model *m, const char *dir,
                                    const attn_hf_translator_params *p, attn_hf_translator **out);
void attn_hf_translator_free(attn_hf_translator *t);
/* Change the languages (as the params' src_lang / tgt_lang; NULL: none, the tokenizer's and
 * generation_config.json's defaults) for the calls that follow: `attn serve` uses one translator
 * for every language pair of its requests. An unknown code, a source language on a Marian model,
 * or a language on a directory without a Marian / NLLB tokenizer is INVALID_ARGUMENT, and
 * leaves the languages as they were. */
attn_status attn_hf_translator_set_langs(attn_hf_translator *t, const char *src_lang,
                                         const char *tgt_lang);
/* The same checks without changing t (any thread may call it while another translates):
 * *tgt_id (or NULL) gets the target language's token id, -1 without one. */
attn_status attn_hf_translator_check_langs(const attn_hf_translator *t, const char *src_lang,
                                           const char *tgt_lang, int32_t *tgt_id);
/* The generation settings in use, max_length (the longest output, </s> included, of
 * attn_hf_translator_generate), and the tokenizer: one of the two, or neither (ids only). */
const attn_hf_generate_options *attn_hf_translator_options(const attn_hf_translator *t);
int attn_hf_translator_max_out(const attn_hf_translator *t);
const attn_mt_tok *attn_hf_translator_mt_tok(const attn_hf_translator *t);
const attn_tok *attn_hf_translator_tok(const attn_hf_translator *t);

/* A source from k ids (raw: a tokenizer's, or the user's with their </s>): Marian's target
 * language token first, </s> appended when add_eos, cut to the model's positions; an id outside
 * the source vocabulary is FORMAT. *ids attn_alloc'd. */
attn_status attn_hf_translator_source_ids(const attn_hf_translator *t, const int32_t *raw,
                                          size_t k, bool add_eos, int32_t **ids, size_t *n);
/* Text to source ids, as `attn translate` encodes a line (tokenizer(text).input_ids, with the
 * language tokens). *ids attn_alloc'd. */
attn_status attn_hf_translator_encode(const attn_hf_translator *t, const char *text, size_t len,
                                      int32_t **ids, size_t *n);
/* Target text to the whole decoder sequence: decoder_start + tokenizer(text_target=text)
 * .input_ids (NLLB: [tgt_lang] text </s>, the forced code's; Marian: text </s>) — the decoder's
 * inputs and, shifted by one, its labels. *ids attn_alloc'd. */
attn_status attn_hf_translator_encode_target(const attn_hf_translator *t, const char *text,
                                             size_t len, int32_t **ids, size_t *n);
/* attn_hf_generate for n <= max_sentences sources src[i] (src_len[i] ids, right-padded into one
 * batch): out_ids (n, attn_hf_translator_max_out), out_len (n), out_score (n) or NULL as
 * attn_hf_generate gives them. */
attn_status attn_hf_translator_generate(attn_hf_translator *t, int n, const int32_t *const *src,
                                        const size_t *src_len, int32_t *out_ids, int32_t *out_len,
                                        float *out_score);
/* One source translated alone (batch 1) as the whole decoder sequence: decoder_start + the
 * generated ids (</s> included when the search ended with it), *n_tgt of them (attn_alloc'd);
 * score as attn_hf_generate's. What attention capture runs over. */
attn_status attn_hf_translator_translate(attn_hf_translator *t, const int32_t *src, size_t Ts,
                                         int32_t **tgt, int *n_tgt, float *score);
/* The sequences `attn attention` captures (attn_viz_capture_encdec_mt): the source is ids
 * (n_ids, as given) when ids is not NULL, else text through attn_hf_translator_encode; the whole
 * decoder sequence is tgt_ids (as given) when not NULL, else target through
 * attn_hf_translator_encode_target when not NULL, else the source's translation
 * (attn_hf_translator_translate; *score, if not NULL, its score, else NaN). *src and *tgt
 * attn_alloc'd. */
attn_status attn_hf_translator_capture_input(attn_hf_translator *t, const char *text,
                                             const int32_t *ids, size_t n_ids, const char *target,
                                             const int32_t *tgt_ids, size_t n_tgt_ids,
                                             int32_t **src, size_t *Ts, int32_t **tgt,
                                             size_t *n_tgt, float *score);
/* Generated ids to text (a final </s> dropped; special tokens skipped). *text attn_alloc'd. */
attn_status attn_hf_translator_decode(const attn_hf_translator *t, const int32_t *ids, size_t n,
                                      char **text, size_t *len);
/* Translate n texts in batches of max_sentences in order (as `attn translate --batch`
 * max_sentences does, so the results are the CLI's bit for bit): out[i] attn_alloc'd text,
 * scores[i] (scores may be NULL) its score. On failure every out[i] is NULL. */
attn_status attn_hf_translator_texts(attn_hf_translator *t, const char *const *texts, size_t n,
                                     char **out, float *scores);

#ifdef __cplusplus
}
#endif
#endif

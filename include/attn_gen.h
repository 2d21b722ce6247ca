/* attn_gen.h — text generation (prefix attn_gen_): choosing the next token from logits
 * (temperature, top-k, top-p, greedy) with a counter-based random generator, a generation loop
 * over a GPT model's KV cache, and an incremental detokenizer that turns generated ids into text
 * as they arrive without ever emitting half a UTF-8 character.
 *
 *   attn_gen_params gp = attn_gen_default_params();
 *   gp.temperature = 0.8f;  gp.top_k = 200;  gp.seed = 7;
 *   attn_gen_stream *ts;  attn_gen_stream_init(tok, prompt, n_prompt, &ts);
 *   attn_gen_stats stats;
 *   attn_gen_gpt(model, &gp, prompt, n_prompt, 100, eos_id, NULL, on_token, ts, &stats);
 *   // on_token(ctx, id): attn_gen_stream_push(ctx, id, &text, &len); fwrite(text, 1, len, stdout)
 *
 * ---- Sampling (the semantics of transformers' generate(do_sample=True)) ----------------------
 * From logits (V) the distribution is built as transformers' default logits warpers do, in this
 * order:
 *   1. temperature:  logits / temperature           (TemperatureLogitsWarper; skipped when 1)
 *   2. top-k:        every logit below the k-th largest becomes −inf; all logits equal to the k-th
 *                    largest stay (TopKLogitsWarper: scores < topk(scores, k)[-1]); k >= V or 0 = off
 *   3. top-p:        sort ascending, softmax, cumulative sum; tokens whose cumulative probability
 *                    is <= 1 − top_p become −inf, the most likely token always stays
 *                    (TopPLogitsWarper, min_tokens_to_keep 1); top_p = 1 is off. Equal logits are
 *                    ordered by id (lower id first in the ascending order), so a tie that straddles
 *                    the cut is resolved deterministically.
 *   4. softmax over what is left, and one draw: u = the 53-bit uniform double made of words
 *      2·index and 2·index + 1 of Philox stream `seed` (attn_rng), and the token is the first id
 *      (in id order) whose cumulative probability exceeds u. So the choice is a pure function of
 *      (logits, params, seed, index): the same seed gives the same text on any machine and thread
 *      count, and generation can restart at any index.
 * Greedy (greedy = true, or temperature <= 0) takes the first id of the largest logit
 * (torch.argmax), as generate(do_sample=False). NaN logits are ATTN_STATUS_INVALID_ARGUMENT.
 *
 * ---- Generation loop (attn_gen_gpt) -----------------------------------------------------------
 * The prompt runs through attn_gpt_decode in one pass (the "prompt" phase), then each sampled
 * token is fed back one at a time (the "generation" phase) through the KV cache. It stops when
 *   - the end-of-text token (eos_token_id >= 0) is generated (it is the last token reported),
 *   - max_new_tokens tokens have been generated,
 *   - the context is full: a model sees at most n_positions tokens, so with a prompt of L tokens
 *     at most n_positions − L + 1 tokens can be generated (the last one is never fed back);
 *     this is not an error: stats.stop says ATTN_GEN_STOP_CONTEXT,
 *   - or the callback returns false.
 * A prompt longer than n_positions, or empty, is ATTN_STATUS_INVALID_ARGUMENT.
 *
 * ---- Streaming text (attn_gen_stream) ----------------------------------------------------------
 * Each push decodes the whole sequence (context + generated ids) with the tokenizer and returns
 * the part of the text after what was returned before, minus a tail that may still change: a
 * trailing run of U+FFFD (the decoder's stand-in for an incomplete UTF-8 sequence, e.g. the first
 * byte-level token of a 3-byte character), and the text of a trailing run of byte-fallback
 * tokens <0xHH> (attn_tok_decode_pending: such a run decodes as a whole, and one invalid byte
 * turns all of it into U+FFFD). So every piece is valid UTF-8 made of whole
 * characters, and the concatenation of all pieces plus attn_gen_stream_finish's remainder equals
 * decode(context + generated) without decode(context) — the text a non-streaming caller prints.
 * (Decoding the context together with the new ids keeps decoders that treat the start of the
 * text specially, such as Metaspace's stripped leading space, correct; when decode(context) is
 * not a prefix of the whole decode, the generated ids are decoded on their own instead.) Special
 * tokens are dropped, as attn_tok_decode does by default.
 *
 * All functions validate their arguments and return a status with a one-line attn_last_error();
 * nothing prints or exits. */
#ifndef ATTN_GEN_H
#define ATTN_GEN_H

#include "attn_core.h"
#include "attn_gpt.h"
#include "attn_tok.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== sampling ================================================================================ */

typedef struct {
    float temperature; /* > 0 divides the logits; <= 0 means greedy */
    int top_k;         /* keep the k largest logits (ties with the k-th kept); 0 = off */
    float top_p;       /* nucleus mass in [0, 1]; 1 = off */
    bool greedy;       /* argmax (after the repetition penalty); temperature, top-k, top-p and
                          min-p are then ignored */
    uint64_t seed;     /* Philox stream of the draws */
    float repetition_penalty; /* > 0; 1 = off. RepetitionPenaltyLogitsProcessor: before
                          everything else (greedy too), the logit of every id seen so far (the
                          prompt's and the generated ones) is divided by it when positive and
                          multiplied by it when negative */
    float min_p;       /* in [0, 1]; 0 = off. MinPLogitsWarper, after top-p: tokens with a
                          probability below min_p × the top token's are removed */
    attn_quant_act quant_act; /* products on quantized weights (GGUF files): ATTN_QUANT_ACT_F32
                          (the default: exact to the dequantized weights, what transformers
                          computes) or ATTN_QUANT_ACT_Q8 (llama.cpp's arithmetic: faster,
                          ~1e-3 relative error per product); see attn_gpt_kv_set_quant_act */
    bool kv_f16;       /* keys and values cached as binary16 (llama.cpp's default cache type;
                          decoding reads half the bytes; attn_gpt_kv_params.f16); false (the
                          default): float32 */
} attn_gen_params;

/* transformers' GenerationConfig defaults for sampling: temperature 1, top_k 50, top_p 1, not
 * greedy, seed 0, repetition_penalty 1, min_p 0 (off). */
attn_gen_params attn_gen_default_params(void);

/* temperature finite, top_k >= 0, top_p and min_p in [0, 1], repetition_penalty > 0;
 * INVALID_ARGUMENT naming the field. */
attn_status attn_gen_check_params(const attn_gen_params *p);

/* The logits warpers on their own, in place on logits (V); removed entries become -INFINITY.
 * Each is exactly the transformers warper described above (for tests and other front ends). */
attn_status attn_gen_temperature(float *logits, int V, float temperature);
attn_status attn_gen_top_k(float *logits, int V, int k);
attn_status attn_gen_top_p(float *logits, int V, float top_p);
attn_status attn_gen_min_p(float *logits, int V, float min_p);
/* The repetition penalty over the distinct ids among ids (n). */
attn_status attn_gen_repetition_penalty(float *logits, int V, const int32_t *ids, size_t n,
                                        float penalty);

/* The first index of the largest value (torch.argmax); INVALID_ARGUMENT on NaN or V < 1. */
attn_status attn_gen_argmax(const float *logits, int V, int32_t *token);

/* A sampler: parameters plus scratch for vocabularies of V ids (no allocation per token). */
typedef struct attn_gen_sampler attn_gen_sampler;

attn_status attn_gen_sampler_init(const attn_gen_params *p, int V, attn_gen_sampler **out);
void attn_gen_sampler_free(attn_gen_sampler *s);
const attn_gen_params *attn_gen_sampler_params(const attn_gen_sampler *s);

/* Mark ids (n, in [0, V)) as seen by the repetition penalty (a generation loop passes the
 * prompt, then each generated token); forget clears the marks. */
attn_status attn_gen_sampler_observe(attn_gen_sampler *s, const int32_t *ids, size_t n);
void attn_gen_sampler_forget(attn_gen_sampler *s);

/* The distribution the next draw uses: probs (V) after temperature, top-k, top-p and softmax
 * (zeros where removed; for greedy, 1 at the argmax). logits (V) are not modified. */
attn_status attn_gen_sampler_probs(attn_gen_sampler *s, const float *logits, float *probs);

/* The token for position `index` of the generated sequence (0 = the first new token): the
 * draw described above. logits (V) are not modified. */
attn_status attn_gen_sampler_next(attn_gen_sampler *s, const float *logits, uint64_t index,
                                  int32_t *token);

/* ==== generation with a GPT model ============================================================= */

typedef enum {
    ATTN_GEN_STOP_MAX_TOKENS = 0, /* max_new_tokens generated */
    ATTN_GEN_STOP_EOS,            /* the end-of-text token was generated */
    ATTN_GEN_STOP_CONTEXT,        /* n_positions reached */
    ATTN_GEN_STOP_CALLBACK        /* the callback asked to stop */
} attn_gen_stop;

typedef struct {
    int n_prompt;          /* prompt tokens run in the prompt phase */
    double prompt_seconds; /* that one pass (attn_gpt_decode over the prompt) */
    int n_generated;       /* tokens generated (the end-of-text token included) */
    int n_decode_steps;    /* single-token passes: generated tokens fed back (n_generated − 1
                              at most: the last one is never fed) */
    double decode_seconds; /* those passes plus sampling */
    attn_gen_stop stop;
    int n_cached;          /* prompt positions reused from a session's cache (not run again) */
} attn_gen_stats;

/* "max tokens", "end of text", "context full", "stopped by caller". */
const char *attn_gen_stop_name(attn_gen_stop s);

/* Called with each generated token as soon as it is chosen; return false to stop. */
typedef bool (*attn_gen_callback)(void *ctx, int32_t token);

/* Generate up to max_new_tokens (>= 1) tokens after prompt (n_prompt ids in [0, V), 1 <=
 * n_prompt <= n_positions) with the model's KV cache, as described above. eos_token_id < 0 means
 * none. out (max_new_tokens) receives the tokens (may be NULL); cb may be NULL; stats may be NULL.
 * The model is only read (several threads may generate with one model at once). */
attn_status attn_gen_gpt(const attn_gpt_model *m, const attn_gen_params *p, const int32_t *prompt,
                         int n_prompt, int max_new_tokens, int eos_token_id, int32_t *out,
                         attn_gen_callback cb, void *ctx, attn_gen_stats *stats);

/* ==== a model directory's generation_config.json ===============================================
 * transformers' GenerationConfig as save_pretrained writes it. Read: "do_sample" (false, the
 * default: greedy), "temperature", "top_k", "top_p", "min_p" (null: off), "repetition_penalty",
 * "max_new_tokens", "eos_token_id" (an id or a list: every one ends generation), "bos_token_id";
 * every other key is ignored. Missing keys keep GenerationConfig's defaults (temperature 1,
 * top_k 50, top_p 1, repetition_penalty 1). A field of the wrong type or out of range is
 * ATTN_STATUS_FORMAT naming the file and the field. */
#define ATTN_GEN_MAX_STOP_IDS 16

typedef struct {
    bool found;              /* the file exists (else everything below is the default) */
    attn_gen_params params;  /* greedy = !do_sample; seed 0 */
    int max_new_tokens;      /* 0: not given */
    int bos_token_id;        /* -1: not given */
    int n_eos;               /* eos_token_ids[0 .. n_eos) */
    int32_t eos_token_ids[ATTN_GEN_MAX_STOP_IDS];
} attn_gen_config;

/* DIR/generation_config.json (absent: found = false and the defaults, not an error). */
attn_status attn_gen_config_load(const char *dir, attn_gen_config *out);
/* The same from JSON text; name is used in messages. */
attn_status attn_gen_config_parse(const char *json_text, const char *name, attn_gen_config *out);

/* ==== sessions: generation over a KV cache kept between calls (chat) ============================
 * A session keeps the keys and values of every position it has run, with their ids. Each call
 * gives the whole context (a conversation so far, rendered and tokenized); the part that matches
 * what the cache holds is reused, and only the rest runs (at least the last position, whose
 * logits choose the first new token). So a chat turn costs its new tokens, not the conversation.
 * Sampling as attn_gen_gpt. Generated tokens are fed back (all but the last one), so the next
 * call's context, which repeats them, reuses them too. */
typedef struct attn_gen_session attn_gen_session;

/* A session for contexts of up to max_T positions (0: the model's n_positions). The model must
 * outlive it; one thread at a time per session. */
attn_status attn_gen_session_init(const attn_gpt_model *m, int max_T, attn_gen_session **out);
void attn_gen_session_free(attn_gen_session *s);
/* Forget everything cached. */
void attn_gen_session_reset(attn_gen_session *s);
/* Positions cached now; the session's capacity. */
int attn_gen_session_cached(const attn_gen_session *s);
int attn_gen_session_capacity(const attn_gen_session *s);
/* The session's cache (e.g. for attn_gpt_kv_set_capture). */
attn_gpt_kv *attn_gen_session_kv(attn_gen_session *s);

/* Generate up to max_new_tokens (>= 1) after the context ids (n_ids in [1, capacity]); stops
 * after any of stop_ids (n_stop_ids ids, e.g. every end-of-text id of the model; may be 0), when
 * max_new_tokens are generated, when the cache is full (ATTN_GEN_STOP_CONTEXT: a context of L
 * positions leaves capacity − L + 1 new tokens), or when cb returns false. out, cb, stats as
 * attn_gen_gpt; stats->n_prompt counts the positions that ran, n_cached those reused. */
attn_status attn_gen_session_generate(attn_gen_session *s, const attn_gen_params *p,
                                      const int32_t *ids, int n_ids, int max_new_tokens,
                                      const int32_t *stop_ids, int n_stop_ids, int32_t *out,
                                      attn_gen_callback cb, void *ctx, attn_gen_stats *stats);

/* ==== streaming detokenization ================================================================ */

typedef struct attn_gen_stream attn_gen_stream;

/* A stream whose text starts after context (n_context ids, may be 0). The tokenizer must outlive
 * the stream. */
attn_status attn_gen_stream_init(const attn_tok *tok, const int32_t *context, size_t n_context,
                                 attn_gen_stream **out);
void attn_gen_stream_free(attn_gen_stream *s);

/* Append a generated id; *text receives the newly completed text (*len bytes, NUL-terminated,
 * possibly empty), valid until the next call on s. An id outside the vocabulary is
 * INVALID_ARGUMENT (the stream is unchanged). */
attn_status attn_gen_stream_push(attn_gen_stream *s, int32_t id, const char **text, size_t *len);

/* The held-back tail (possibly empty) at the end of generation; later pushes are not allowed. */
attn_status attn_gen_stream_finish(attn_gen_stream *s, const char **text, size_t *len);

/* Everything returned so far (NUL-terminated; *len bytes if len is not NULL). */
const char *attn_gen_stream_text(const attn_gen_stream *s, size_t *len);

/* Stop strings (the OpenAI API's "stop", transformers' stop_strings): n non-empty strings
 * (copied; at most 64, each at most 1024 bytes). From then on the stream never returns text that
 * could still turn out to begin a stop string (such a tail is held back until it cannot), and
 * when the text after the context contains one, it ends just before the first occurrence:
 * attn_gen_stream_stopped becomes true and later pushes return nothing. finish returns what was
 * held back when no stop string completed. */
attn_status attn_gen_stream_set_stops(attn_gen_stream *s, const char *const *stops, size_t n);
/* Whether a stop string has appeared. */
bool attn_gen_stream_stopped(const attn_gen_stream *s);

#ifdef __cplusplus
}
#endif
#endif

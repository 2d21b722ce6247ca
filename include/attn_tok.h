/* attn_tok.h — tokenizers: load, save and train Hugging Face `tokenizer.json` files, encode text to
 * ids and decode ids to text, giving exactly the ids and text of the `tokenizers` library (tested
 * against tokenizers 0.21.4 (and 0.22.1)).
 *
 *   attn_tok *tok;
 *   if (attn_tok_load("models/demo/tokenizer.json", &tok)) { puts(attn_last_error()); return 1; }
 *   int32_t ids[256];
 *   size_t n;
 *   attn_tok_encode(tok, "Knowledge is power.", 19, ids, 256, &n);
 *   char text[1024];
 *   size_t len;
 *   attn_tok_decode(tok, ids, n, 0, text, sizeof text, &len);
 *   attn_tok_free(tok);
 *
 * tokenizer.json, field by field (what is read; anything else is refused with
 * ATTN_STATUS_UNSUPPORTED naming the component, never silently ignored):
 *   version          ignored (a string, "1.0")
 *   truncation       null (truncation changes encode's output: not supported)
 *   padding          null (likewise)
 *   added_tokens     array of {"id": int, "content": string, "single_word": false, "lstrip": false,
 *                    "rstrip": false, "normalized": bool, "special": bool}. Their occurrences in
 *                    the input are split out before the model (leftmost, then longest match);
 *                    normalized=false tokens are matched in the raw text, normalized=true ones in
 *                    the normalized text. If content is in model.vocab, id must agree with it.
 *                    Special tokens are dropped by decode unless ATTN_TOK_DECODE_KEEP_SPECIAL.
 *   normalizer       null, or one of / a {"type": "Sequence", "normalizers": [...]} of:
 *                      {"type": "Prepend", "prepend": S}        S before non-empty text
 *                      {"type": "Replace", "pattern": {"String": A}, "content": B}
 *   pre_tokenizer    null, or one of / a {"type": "Sequence", "pretokenizers": [...]} of:
 *                      {"type": "Metaspace", "replacement": C, "prepend_scheme":
 *                       "always"|"first"|"never", "split": bool}  (spaces become C; C prepended
 *                       per the scheme; with split, pieces start at each C)
 *                      {"type": "Punctuation", "behavior": "Isolated"}  (each ASCII punctuation
 *                       character or Unicode P* character becomes a piece of its own)
 *                      {"type": "ByteLevel", "add_prefix_space": b, "trim_offsets": b,
 *                       "use_regex": b}  (GPT-2's: a space before a piece that does not start
 *                       with one if add_prefix_space; with use_regex, GPT-2's pattern
 *                       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *                       through PCRE2 splits it; every byte then becomes a character of GPT-2's
 *                       byte-to-unicode alphabet, " " -> "Ġ"; missing flags default to true)
 *   post_processor   null (the caller adds <s>/</s> itself), or {"type": "ByteLevel", ...} (it
 *                    only trims offsets, which attn does not report: ids are unchanged)
 *   decoder          null (tokens joined by " "), or one of / a {"type": "Sequence", "decoders":
 *                    [...]} of: {"type": "Replace", "pattern": {"String": A}, "content": B},
 *                    {"type": "ByteFallback"} (runs of <0xHH> tokens become their bytes; an
 *                    invalid UTF-8 run becomes one U+FFFD per byte), {"type": "Fuse"},
 *                    {"type": "Strip", "content": C, "start": N, "stop": M},
 *                    {"type": "Metaspace", "replacement": C, "prepend_scheme": ..., "split": b},
 *                    {"type": "ByteLevel", ...} (tokens back to bytes; bytes that are not UTF-8
 *                    become U+FFFD per maximal invalid sequence, as Rust's from_utf8_lossy)
 *   model            {"type": "BPE", "dropout": null, "unk_token": null|S,
 *                     "continuing_subword_prefix": null|S, "end_of_word_suffix": null|S,
 *                     "fuse_unk": bool, "byte_fallback": bool, "ignore_merges": bool,
 *                     "vocab": {token: id, ...}, "merges": [[A, B], ...] or ["A B", ...]}
 *                    Merges are ranked by position; A, B and A+B must be in vocab. With
 *                    byte_fallback a character missing from vocab becomes its UTF-8 bytes as
 *                    tokens "<0xHH>"; otherwise unk_token (runs fused with fuse_unk), or nothing
 *                    when there is no unk_token. Other model types: ATTN_STATUS_UNSUPPORTED.
 *
 * The trainer (attn_tok_train_bpe) writes the SentencePiece-style configuration: normalizer
 * Sequence[Prepend "▁", Replace " " → "▁"] (the Prepend normalizer, rather than Metaspace's own
 * prepend, keeps a leading space: " x" must decode to " x"), pre_tokenizer Sequence[Metaspace("▁",
 * prepend_scheme "never", split), Punctuation(Isolated)] (merges stay inside words, and "power."
 * is "▁power" "." rather than a token of its own), decoder Sequence[Replace "▁" → " ", ByteFallback, Fuse, Strip(" ", 1, 0)], model BPE
 * with byte_fallback and the 256 byte tokens <0x00>..<0xFF>, and the special tokens as
 * added_tokens. With it every valid UTF-8 text decodes back to itself exactly, except text that
 * contains U+2581 "▁" (decoded as a space, as in SentencePiece) or a special token's string.
 *
 * Text given to encode must be valid UTF-8: anything else is ATTN_STATUS_INVALID_ARGUMENT naming
 * the byte offset (the Python library cannot receive such text at all). This holds for
 * byte-level BPE too, although its alphabet could spell any byte string: one rule for every
 * tokenizer, and GPT-2's pattern is defined on characters, not bytes.
 *
 * Encode keeps a per-call memo of pieces already seen (so a long text costs little more than its
 * distinct words); a tokenizer is read-only after loading and may be used by several threads at
 * once. */
#ifndef ATTN_TOK_H
#define ATTN_TOK_H

#include "attn_core.h"
#include "attn_io.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_tok attn_tok;

/* Load a tokenizer.json; path may also be a directory holding one (or, when it has no
 * tokenizer.json, GPT-2's vocab.json + merges.txt: see attn_tok_load_vocab_merges). */
attn_status attn_tok_load(const char *path, attn_tok **out);
/* GPT-2's two files: vocab.json ({token: id}) and merges.txt (one "A B" per line in rank order;
 * "#version..." lines and empty lines are skipped). Builds GPT-2's configuration: model BPE
 * (no unk_token, no byte fallback), pre_tokenizer ByteLevel(add_prefix_space false, use_regex),
 * decoder ByteLevel, post_processor ByteLevel, and "<|endoftext|>", when vocab.json has it, as a
 * special added token (what transformers' GPT2TokenizerFast does). attn_tok_save writes it as a
 * tokenizer.json. */
attn_status attn_tok_load_vocab_merges(const char *vocab_json, const char *merges_txt,
                                       attn_tok **out);
/* The same from any reader (a memory buffer, a fuzzer's input). Always closes r. */
attn_status attn_tok_load_reader(attn_reader r, attn_tok **out);
/* Write tokenizer.json atomically (temporary file, fsync, rename). */
attn_status attn_tok_save(const attn_tok *tok, const char *path);
void attn_tok_free(attn_tok *tok);

/* Encode len bytes of UTF-8 text. On success *n ids are in ids[0..*n). If cap is too small,
 * returns ATTN_STATUS_INVALID_ARGUMENT with *n set to the number needed (call again). */
attn_status attn_tok_encode(const attn_tok *tok, const char *text, size_t len, int32_t *ids,
                            size_t cap, size_t *n);
/* The same into a new array (free with attn_free; non-NULL even when *n is 0). */
attn_status attn_tok_encode_alloc(const attn_tok *tok, const char *text, size_t len,
                                  int32_t **ids, size_t *n);

enum {
    ATTN_TOK_DECODE_KEEP_SPECIAL = 1 /* keep special tokens (HF skip_special_tokens=False) */
};
/* Decode n ids to UTF-8 text, NUL-terminated, *len bytes (without the NUL). By default special
 * tokens are dropped, as HF's decode(ids) does. An id outside the vocabulary is
 * ATTN_STATUS_INVALID_ARGUMENT (HF silently skips it). If cap < *len + 1, returns
 * ATTN_STATUS_INVALID_ARGUMENT with *len set to the length needed. */
attn_status attn_tok_decode(const attn_tok *tok, const int32_t *ids, size_t n, unsigned flags,
                            char *buf, size_t cap, size_t *len);
/* The same into a new NUL-terminated string (free with attn_free). */
attn_status attn_tok_decode_alloc(const attn_tok *tok, const int32_t *ids, size_t n,
                                  unsigned flags, char **text, size_t *len);

/* Ids are in [0, attn_tok_vocab_size) (model and added tokens together). */
int32_t attn_tok_vocab_size(const attn_tok *tok);
/* -1 when absent. */
int32_t attn_tok_token_to_id(const attn_tok *tok, const char *token);
/* NULL when no token has that id. The string lives as long as tok. */
const char *attn_tok_id_to_token(const attn_tok *tok, int32_t id);
bool attn_tok_is_special(const attn_tok *tok, int32_t id);
/* "BPE", ... */
const char *attn_tok_model_type(const attn_tok *tok);

/* Ids of the conventional special tokens, -1 when absent: pad "<pad>" or "[PAD]", unk "<unk>" or
 * "[UNK]", bos "<s>" or "<|endoftext|>" or "[CLS]", eos "</s>" or "<|endoftext|>" or "[SEP]"
 * (the first present; the trainer's defaults come first, then GPT-2's and BERT's). */
typedef enum { ATTN_TOK_PAD, ATTN_TOK_UNK, ATTN_TOK_BOS, ATTN_TOK_EOS } attn_tok_special;
int32_t attn_tok_special_id(const attn_tok *tok, attn_tok_special which);

/* ---- training ------------------------------------------------------------------------------ */

typedef struct {
    int32_t vocab_size;         /* total ids, special and byte tokens included (default 8000) */
    int32_t min_frequency;      /* a pair is merged only if it occurs this often (default 2) */
    int32_t min_char_frequency; /* rarer characters stay out of the alphabet and go through
                                   byte fallback (default 1: every character seen) */
    int32_t limit_alphabet;     /* at most this many characters, the most frequent (0: none) */
    bool byte_fallback;         /* the 256 tokens <0x00>..<0xFF> (default true) */
    const char *const *special_tokens; /* ids 0.. in order (default <pad> <unk> <s> </s>) */
    int n_special;
    const char *unk_token; /* must be one of special_tokens, or NULL (default "<unk>") */
    /* Called now and then with the merges done and the merges wanted (may be NULL). */
    void (*progress)(void *ctx, int32_t done, int32_t total);
    void *progress_ctx;
} attn_tok_train_params;

attn_tok_train_params attn_tok_train_default_params(void);

/* Train a BPE tokenizer (the configuration above) on n lines of UTF-8 text (line i is
 * lines[i][0..lens[i]); lens may be NULL for NUL-terminated lines). Deterministic: the same
 * lines and params give the same tokenizer. Invalid UTF-8 is ATTN_STATUS_INVALID_ARGUMENT naming
 * the line. */
attn_status attn_tok_train_bpe(const attn_tok_train_params *p, const char *const *lines,
                               const size_t *lens, size_t n, attn_tok **out);

#ifdef __cplusplus
}
#endif
#endif

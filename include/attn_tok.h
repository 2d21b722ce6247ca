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
 *   truncation       null or {"max_length": N, "strategy": "LongestFirst"|"OnlyFirst"|"OnlySecond",
 *                    "stride": N, "direction": "Right"|"Left"}: stored and saved back, applied only
 *                    through attn_tok_file_params (attn_tok_encode ignores it, as transformers
 *                    does; stride only shapes tokenizers' overflowing parts, which attn does not
 *                    return)
 *   padding          null or {"strategy": "BatchLongest"|{"Fixed": N}, "direction",
 *                    "pad_to_multiple_of": null|N, "pad_id", "pad_type_id", "pad_token"}: likewise
 *   added_tokens     array of {"id": int, "content": string, "single_word": bool, "lstrip": bool,
 *                    "rstrip": bool, "normalized": bool, "special": bool} (missing flags: false,
 *                    normalized: !special). Their occurrences in the input are split out before
 *                    the model, as tokenizers' AddedVocabulary does: normalized=false tokens in the
 *                    raw text first, then normalized=true ones in each remaining piece after
 *                    normalization, matched as their content normalized (with Llama 2's Prepend
 *                    normalizer, "<s>" is matched as "▁<s>"); leftmost match first, the longest
 *                    there (equal ones: special tokens first, then file order), the search going
 *                    on after each match. single_word: a match touching a word character
 *                    (Rust regex \w) on either side is skipped; lstrip / rstrip: the whitespace
 *                    run before / after a match (not before the previous match's end) becomes
 *                    part of it; a match left empty by the previous rstrip is dropped. A
 *                    normalized token that normalizes to "" is refused (UNSUPPORTED). If content
 *                    is in model.vocab, id must agree with it. Special tokens are dropped by
 *                    decode unless ATTN_TOK_DECODE_KEEP_SPECIAL; tokens are saved with their
 *                    flags.
 *   normalizer       null, or one of / a {"type": "Sequence", "normalizers": [...]} of:
 *                      {"type": "Prepend", "prepend": S}        S before non-empty text
 *                      {"type": "Replace", "pattern": {"String": A}|{"Regex": R}, "content": B}
 *                       (R: Oniguruma syntax run by PCRE2, as Split's; every match replaced)
 *                      {"type": "Precompiled", "precompiled_charsmap": base64}  (SentencePiece's
 *                       compiled normalization rules — NFKC and more — as tokenizers applies
 *                       them: per grapheme cluster, see src/tok/precompiled.c; the NLLB, T5,
 *                       XLM-R, Marian-converted files)
 *                      {"type": "BertNormalizer", "clean_text": b, "handle_chinese_chars": b,
 *                       "strip_accents": null|b, "lowercase": b}  (BERT's, in tokenizers' order:
 *                       NUL, U+FFFD and control/format/private-use characters dropped and
 *                       whitespace made ' '; spaces around CJK ideographs; NFD then nonspacing
 *                       marks dropped (null: when lowercase); Rust's char::to_lowercase)
 *                      {"type": "Lowercase"}, {"type": "NFD"}, {"type": "NFKD"}, {"type": "NFC"},
 *                      {"type": "NFKC"}, {"type": "StripAccents"} (combining marks dropped),
 *                      {"type": "Strip", "strip_left": b, "strip_right": b}
 *                    Unicode data comes from utf8proc, corrected to the older tables tokenizers'
 *                    Rust crates use wherever the two differ (every code point is tested)
 *   pre_tokenizer    null, or one of / a {"type": "Sequence", "pretokenizers": [...]} of:
 *                      {"type": "Metaspace", "replacement": C, "prepend_scheme":
 *                       "always"|"first"|"never", "split": bool}  (spaces become C; C prepended
 *                       per the scheme; with split, pieces start at each C)
 *                      {"type": "Punctuation", "behavior": B}  (each ASCII punctuation character
 *                       or Unicode P* character is a delimiter; default "Isolated")
 *                      {"type": "BertPreTokenizer"}  (split on whitespace, which is dropped, and
 *                       punctuation, which becomes pieces of its own)
 *                      {"type": "Whitespace"}  (\w+|[^\w\s]+ pieces), {"type": "WhitespaceSplit"}
 *                      {"type": "Split", "pattern": {"String": S}|{"Regex": R}, "behavior": B,
 *                       "invert": b}  (B: "Removed", "Isolated", "MergedWithPrevious",
 *                       "MergedWithNext", "Contiguous"; R is Oniguruma syntax, run by PCRE2 after
 *                       translating what differs (\s \w \h \d \p{L} \p{N}, (?m), {,n}: see
 *                       src/tok/split.c); class intersection && is refused)
 *                      {"type": "Digits", "individual_digits": b}  (numbers, Rust's
 *                       char::is_numeric, split off one by one, or as runs when false)
 *                      {"type": "ByteLevel", "add_prefix_space": b, "trim_offsets": b,
 *                       "use_regex": b}  (GPT-2's: a space before a piece that does not start
 *                       with one if add_prefix_space; with use_regex, GPT-2's pattern
 *                       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *                       through PCRE2 splits it; every byte then becomes a character of GPT-2's
 *                       byte-to-unicode alphabet, " " -> "Ġ"; missing flags default to true)
 *   post_processor   null (no special tokens: the caller adds <s>/</s> itself; a pair's tokens
 *                    get type id 1), {"type": "ByteLevel", ...} (it only trims offsets, which attn
 *                    does not report: ids are unchanged), {"type": "TemplateProcessing", "single":
 *                    [...], "pair": [...], "special_tokens": {name: {"id", "ids": [...], "tokens":
 *                    [...]}}} (pieces {"SpecialToken": {"id": name, "type_id": t}} and
 *                    {"Sequence": {"id": "A"|"B", "type_id": t}}; single has A once, pair A and B
 *                    once; special ids must be in the vocabulary), {"type": "BertProcessing",
 *                    "sep": [S, id], "cls": [C, id]} ([CLS] A [SEP] and [CLS] A [SEP] B [SEP],
 *                    type ids 0 then 1), or {"type": "Sequence", "processors": [...]} of these
 *                    (Llama 3's ByteLevel + TemplateProcessing; at most one that adds tokens;
 *                    saved back as read)
 *   decoder          null (tokens joined by " "), or one of / a {"type": "Sequence", "decoders":
 *                    [...]} of: {"type": "Replace", "pattern": {"String": A}, "content": B},
 *                    {"type": "ByteFallback"} (runs of <0xHH> tokens become their bytes; an
 *                    invalid UTF-8 run becomes one U+FFFD per byte), {"type": "Fuse"},
 *                    {"type": "Strip", "content": C, "start": N, "stop": M},
 *                    {"type": "Metaspace", "replacement": C, "prepend_scheme": ..., "split": b},
 *                    {"type": "ByteLevel", ...} (tokens back to bytes; bytes that are not UTF-8
 *                    become U+FFFD per maximal invalid sequence, as Rust's from_utf8_lossy),
 *                    {"type": "WordPiece", "prefix": P, "cleanup": b} (P removed from
 *                    continuations, a space before other tokens; cleanup joins " ." " ?" " !"
 *                    " ," " ' " " n't" " 'm" " 's" " 've" " 're" and makes " do not" " don't")
 *   model            {"type": "BPE", "dropout": null, "unk_token": null|S,
 *                     "continuing_subword_prefix": null|S, "end_of_word_suffix": null|S,
 *                     "fuse_unk": bool, "byte_fallback": bool, "ignore_merges": bool,
 *                     "vocab": {token: id, ...}, "merges": [[A, B], ...] or ["A B", ...]}
 *                    Merges are ranked by position; A, B and A+B must be in vocab. With
 *                    byte_fallback a character missing from vocab becomes its UTF-8 bytes as
 *                    tokens "<0xHH>"; otherwise unk_token (runs fused with fuse_unk), or nothing
 *                    when there is no unk_token.
 *                    {"type": "WordPiece", "unk_token": S, "continuing_subword_prefix": P,
 *                     "max_input_chars_per_word": N, "vocab": {...}}  (greedy longest match
 *                     first, continuations prefixed with P; a word of more than N characters or
 *                     with no full match is unk_token)
 *                    {"type": "WordLevel", "vocab": {...}, "unk_token": S}  (a piece is its own
 *                     id or unk_token's)
 *                    {"type": "Unigram", "unk_id": null|N, "vocab": [[piece, score], ...],
 *                     "byte_fallback": b}  (SentencePiece's unigram model as tokenizers runs it:
 *                     Viterbi over the pieces, f64 scores, an unknown character scored
 *                     min_score - 10, runs of unknowns fused into one unk_id token; see
 *                     src/tok/unigram.c)
 *                    When a piece needs unk_token and it is not in vocab, encoding fails with
 *                    ATTN_STATUS_INVALID_ARGUMENT, as tokenizers raises.
 *
 * The trainer (attn_tok_train_bpe) writes the SentencePiece-style configuration: normalizer
 * Sequence[Prepend "▁", Replace " " → "▁"] (the Prepend normalizer, rather than Metaspace's own
 * prepend, keeps a leading space: " x" must decode to " x"), pre_tokenizer Sequence[Metaspace("▁",
 * prepend_scheme "never", split), Punctuation(Isolated)] (merges stay inside words, and "power."
 * is "▁power" "." rather than a token of its own), decoder Sequence[Replace "▁" → " ",
 * ByteFallback, Fuse, Strip(" ", 1, 0)], model BPE with byte_fallback and the 256 byte tokens
 * <0x00>..<0xFF>, and the special tokens as added_tokens. With it every valid UTF-8 text decodes back to itself exactly, except text that
 * contains U+2581 "▁" (decoded as a space, as in SentencePiece) or a special token's string.
 *
 * Strings: no tokenizer.json string that becomes a token or a pattern may hold U+0000 (jansson,
 * the JSON parser, cannot hold a NUL in an object key, where vocabularies and special-token names
 * live, so the same rule holds for every field: vocab keys, merges, added tokens, the
 * post-processor's special tokens, unk_token, prefixes and suffixes, normalizer, pre-tokenizer and
 * decoder patterns and contents, pad_token). Such a file is ATTN_STATUS_UNSUPPORTED with a
 * one-line message naming the field (for an object key: its line and column); a type, behavior or
 * scheme name with a NUL inside is an unknown name. Messages show token strings JSON-escaped.
 * Text to encode may hold NUL bytes.
 *
 * Text given to encode must be valid UTF-8: anything else is ATTN_STATUS_INVALID_ARGUMENT naming
 * the byte offset (the Python library cannot receive such text at all). This holds for
 * byte-level BPE too, although its alphabet could spell any byte string: one rule for every
 * tokenizer, and GPT-2's pattern is defined on characters, not bytes.
 *
 * Encode keeps a per-call memo of pieces already seen (so a long text costs little more than its
 * distinct words; a batch shares one); a tokenizer is read-only after loading and may be used by
 * several threads at once.
 *
 * BERT (all-MiniLM-L6-v2 and the like): attn_tok_encode gives [CLS] ... [SEP] as transformers'
 * tokenizer(text) does; sentence-transformers' batches are
 *   attn_tok_encode_params p = attn_tok_encode_default_params();
 *   p.truncation = ATTN_TOK_TRUNCATE_LONGEST_FIRST; p.max_length = 256;   (max_seq_length)
 *   p.padding = ATTN_TOK_PAD_LONGEST;
 *   attn_tok_encode_batch(tok, n, texts, NULL, NULL, NULL, &p, encodings);
 * and attn_tok_special_id(tok, ATTN_TOK_MASK) is fill-mask's [MASK]. */
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

/* Encode len bytes of UTF-8 text: what transformers' tokenizer.encode(text) gives, i.e. Hugging
 * Face's Tokenizer.encode(text, add_special_tokens=True).ids with no truncation and no padding
 * (a file's own "truncation" and "padding" are ignored, as transformers ignores them). So the
 * post-processor applies: a BERT tokenizer gives [CLS] ... [SEP]; tokenizers whose
 * post_processor is null or ByteLevel (the BPE ones) give the model's ids alone. For pairs,
 * type ids, masks, truncation and padding, see attn_tok_encode_ex. On success *n ids are in
 * ids[0..*n). If cap is too small, returns ATTN_STATUS_INVALID_ARGUMENT with *n set to the
 * number needed (call again). */
attn_status attn_tok_encode(const attn_tok *tok, const char *text, size_t len, int32_t *ids,
                            size_t cap, size_t *n);
/* The same into a new array (free with attn_free; non-NULL even when *n is 0). */
attn_status attn_tok_encode_alloc(const attn_tok *tok, const char *text, size_t len,
                                  int32_t **ids, size_t *n);

/* Byte offset of the first byte of s[0..n) that does not start a strict UTF-8 sequence (overlong
 * forms, surrogates, code points above U+10FFFF and truncated sequences are invalid; the offset
 * is that of the sequence's first byte) or, unless allow_nul, that is a NUL byte; n when all of it
 * is valid. The rule encode applies to its text, for callers that name the offending line or
 * argument themselves (s[offset] == 0 tells a NUL byte from invalid UTF-8). */
size_t attn_tok_utf8_check(const char *s, size_t n, bool allow_nul);

/* ---- encodings: pairs, type ids, attention masks, truncation, padding ---------------------- */

typedef enum {
    ATTN_TOK_TRUNCATE_NONE = 0,      /* no truncation (default) */
    ATTN_TOK_TRUNCATE_LONGEST_FIRST, /* take tokens from the longer of the two texts first */
    ATTN_TOK_TRUNCATE_ONLY_FIRST,    /* only from the first text (error if not enough) */
    ATTN_TOK_TRUNCATE_ONLY_SECOND    /* only from the pair (error without one or if too short) */
} attn_tok_truncation;

typedef enum {
    ATTN_TOK_PAD_NONE = 0, /* no padding (default) */
    ATTN_TOK_PAD_LONGEST,  /* to the longest encoding of the batch (one text: no change) */
    ATTN_TOK_PAD_FIXED     /* to pad_length (never shortens) */
} attn_tok_padding;

typedef enum { ATTN_TOK_RIGHT = 0, ATTN_TOK_LEFT } attn_tok_side;

/* What one encode call does, as in transformers' tokenizer(text, pair, add_special_tokens=...,
 * truncation=..., max_length=..., padding=...): these settings replace the file's. */
typedef struct {
    bool add_special_tokens;        /* the post-processor's tokens, e.g. [CLS] A [SEP] B [SEP]
                                       (default true) */
    attn_tok_truncation truncation; /* (default NONE) */
    size_t max_length;              /* total length with special tokens, as tokenizers counts
                                       it: max_length - (special tokens) for the texts; when
                                       that is negative nothing is truncated (tokenizers' wrap) */
    attn_tok_side truncation_side;  /* RIGHT (default): drop tokens at the end; LEFT: start */
    attn_tok_padding padding;       /* (default NONE) */
    size_t pad_length;              /* PAD_FIXED */
    size_t pad_to_multiple_of;      /* round the padded length up to a multiple (0: no) */
    attn_tok_side padding_side;     /* RIGHT (default) or LEFT */
    int32_t pad_id;                 /* -1 (default): the file's padding.pad_id, else the id of
                                       [PAD] / <pad>, else 0 */
    int32_t pad_type_id;            /* (default 0) */
} attn_tok_encode_params;

/* add_special_tokens true, no truncation, no padding, pad_id -1. */
attn_tok_encode_params attn_tok_encode_default_params(void);
/* The file's "truncation" and "padding" as params: what tokenizers' Tokenizer.encode applies
 * (all-MiniLM-L6-v2's file says truncation 128, padding Fixed 128; sentence-transformers uses
 * max_length 256 and batch-longest padding instead). Without them: the defaults. */
attn_tok_encode_params attn_tok_file_params(const attn_tok *tok);

/* One encoded text or pair; the four arrays are one allocation owned by ids. */
typedef struct {
    int32_t *ids;            /* (n) token ids */
    int32_t *type_ids;       /* (n) segment ids: per the post-processor (BERT: 0 for [CLS] A
                                [SEP], 1 for B [SEP]); without one 0 for A, 1 for B */
    int32_t *attention_mask; /* (n) 1 for tokens, 0 for padding */
    int32_t *special_mask;   /* (n) 1 for tokens the post-processor or padding added */
    size_t n;
} attn_tok_encoding;

/* Encode text (and pair, when pair is not NULL) into *out (free with attn_tok_encoding_free;
 * zeroed on failure). p may be NULL for the defaults. Errors: invalid UTF-8 or truncation that
 * cannot be done (ONLY_SECOND without a pair, a text too short) are
 * ATTN_STATUS_INVALID_ARGUMENT, as is a word the model cannot encode (WordPiece or WordLevel
 * whose unk_token is not in the vocabulary). */
attn_status attn_tok_encode_ex(const attn_tok *tok, const char *text, size_t len,
                               const char *pair, size_t pair_len,
                               const attn_tok_encode_params *p, attn_tok_encoding *out);
/* n texts (lens[i] bytes, or NUL-terminated when lens is NULL) and optional pairs (pairs NULL:
 * none; pair_lens as lens) into out[0..n); with ATTN_TOK_PAD_LONGEST all get the length of the
 * longest. On failure every out[i] is zeroed and the message names the text. */
attn_status attn_tok_encode_batch(const attn_tok *tok, size_t n, const char *const *texts,
                                  const size_t *lens, const char *const *pairs,
                                  const size_t *pair_lens, const attn_tok_encode_params *p,
                                  attn_tok_encoding *out);
void attn_tok_encoding_free(attn_tok_encoding *e);

enum {
    ATTN_TOK_DECODE_KEEP_SPECIAL = 1 /* keep special tokens (HF skip_special_tokens=False) */
};
/* Decode n ids to UTF-8 text, NUL-terminated, *len bytes (without the NUL). By default special
 * tokens are dropped, as HF's decode(ids) does. An id outside the vocabulary is
 * ATTN_STATUS_INVALID_ARGUMENT (HF silently skips it). If cap < *len + 1, returns
 * ATTN_STATUS_INVALID_ARGUMENT with *len set to the length needed. */
attn_status attn_tok_decode(const attn_tok *tok, const int32_t *ids, size_t n, unsigned flags,
                            char *buf, size_t cap, size_t *len);
/* How many of the last ids of ids[0..n) decode to text that may still change when more ids
 * follow: with a ByteFallback decoder, the trailing run of byte tokens "<0xHH>" (and the special
 * tokens among them that decode drops under flags), since the decoder reads a run as a whole
 * and turns every byte of it into U+FFFD when the run is not valid UTF-8. 0 for other decoders
 * (a ByteLevel decoder's incomplete UTF-8 tail decodes to U+FFFD that only grows into the
 * character; attn_gen_stream holds both back). Ids outside the vocabulary end the run. */
size_t attn_tok_decode_pending(const attn_tok *tok, const int32_t *ids, size_t n, unsigned flags);
/* The same into a new NUL-terminated string (free with attn_free). */
attn_status attn_tok_decode_alloc(const attn_tok *tok, const int32_t *ids, size_t n,
                                  unsigned flags, char **text, size_t *len);

/* Ids are in [0, attn_tok_vocab_size) (model and added tokens together). */
int32_t attn_tok_vocab_size(const attn_tok *tok);
/* -1 when absent. */
int32_t attn_tok_token_to_id(const attn_tok *tok, const char *token);
/* NULL when no token has that id. The string lives as long as tok (tokens never hold NUL: see
 * "Strings" above, so the C string is the whole token). */
const char *attn_tok_id_to_token(const attn_tok *tok, int32_t id);
bool attn_tok_is_special(const attn_tok *tok, int32_t id);
/* "BPE", "WordPiece", "WordLevel", "Unigram" */
const char *attn_tok_model_type(const attn_tok *tok);

/* Ids of the conventional special tokens, -1 when absent: pad "<pad>" or "[PAD]", unk "<unk>" or
 * "[UNK]", bos "<s>" or "<|endoftext|>" or "[CLS]", eos "</s>" or "<|endoftext|>" or "[SEP]"
 * (the first present; the trainer's defaults come first, then GPT-2's and BERT's); mask
 * "[MASK]" or "<mask>", cls "[CLS]" or "<s>", sep "[SEP]" or "</s>" (BERT's first). */
typedef enum {
    ATTN_TOK_PAD,
    ATTN_TOK_UNK,
    ATTN_TOK_BOS,
    ATTN_TOK_EOS,
    ATTN_TOK_MASK,
    ATTN_TOK_CLS,
    ATTN_TOK_SEP
} attn_tok_special;
int32_t attn_tok_special_id(const attn_tok *tok, attn_tok_special which);

/* ---- translation tokenizers: Marian (opus-mt) and NLLB-200 / M2M100-style ------------------
 *
 * What transformers' MarianTokenizer and NllbTokenizerFast do, as one object the translation
 * models use (tested id for id and string for string against transformers 4.49, sentencepiece
 * 0.2.0 and tokenizers 0.21.4: tests/test_tokenizer_spm.c):
 *
 *   attn_mt_tok *tok;
 *   if (attn_mt_tok_load("models/opus-mt-en-zh", &tok)) { puts(attn_last_error()); return 1; }
 *   int32_t *src; size_t n;
 *   attn_mt_tok_encode_source(tok, NULL, "Knowledge is power.", 19, &src, &n);  // ... </s>
 *   // generate; for NLLB the first forced token is attn_mt_tok_lang_id(tok, "zho_Hans", &id)
 *   char *text; size_t len;
 *   attn_mt_tok_decode(tok, out_ids, out_n, 0, &text, &len);                // specials dropped
 *   attn_free(src); attn_free(text); attn_mt_tok_free(tok);
 *
 * A directory is read as:
 *   Marian   source.spm and target.spm (SentencePiece models, read by Debian's libsentencepiece),
 *            vocab.json ({piece: id}: the model's ids, remapped from the .spm's own), with
 *            "separate_vocabs": true in tokenizer_config.json also target_vocab.json (the
 *            target side's ids). tokenizer_config.json is optional; read from it:
 *            separate_vocabs, unk_token / eos_token / pad_token (defaults "<unk>", "</s>",
 *            "<pad>"; each must be in vocab.json), clean_up_tokenization_spaces (default false).
 *            Encoding (source or target): the special tokens' strings in the text are split out
 *            and become their ids in vocab.json (also on the target side: transformers' added
 *            tokens); in each other chunk a leading language code ">>xx<<" (Python's
 *            re.match(">>.+<<"): greedy, within the first line) becomes the id of that string,
 *            every other ">>.+<<" match in the chunk is removed, and the rest goes through the
 *            side's SentencePiece model (its normalizer included); each piece becomes its id in
 *            the side's vocabulary (vocab.json, or target_vocab.json when separate), "<unk>"'s
 *            id when absent; "</s>" is appended (no BOS, no language token). Decoding (target
 *            side): ids name tokens of the target vocabulary; the three special tokens are
 *            dropped (unless ATTN_TOK_DECODE_KEEP_SPECIAL: then each is written followed by a
 *            space), the other pieces go through target.spm's DecodePieces, "▁" becomes " ",
 *            Unicode whitespace is stripped at both ends.
 *   NLLB     tokenizer.json (NLLB's: Unigram or BPE, Precompiled normalizer, Metaspace, the
 *            language codes as special added tokens) and tokenizer_config.json: src_lang
 *            (default "eng_Latn"), tgt_lang, legacy_behaviour (default false),
 *            clean_up_tokenization_spaces. Source: [src_lang] text </s>, or with
 *            legacy_behaviour text </s> [src_lang]; target likewise with tgt_lang. Decoding is
 *            tokenizer.json's decoder, special tokens (language codes included) dropped unless
 *            ATTN_TOK_DECODE_KEEP_SPECIAL.
 * Which one: a directory with source.spm is Marian, else one with tokenizer.json is NLLB.
 * Errors (one line each): a missing or unreadable file (IO), a truncated or foreign .spm, a
 * vocab.json that is not {string: non-negative id} or lacks a special token or gives one id
 * twice (FORMAT), an unknown language code (INVALID_ARGUMENT, naming it), text that is not UTF-8
 * (INVALID_ARGUMENT). A tokenizer is read-only after loading: any number of threads may use it. */
typedef struct attn_mt_tok attn_mt_tok;

typedef enum { ATTN_MT_TOK_MARIAN = 1, ATTN_MT_TOK_NLLB = 2 } attn_mt_tok_kind;

attn_status attn_mt_tok_load(const char *dir, attn_mt_tok **out);
/* Marian from memory (what the fuzz target drives): the files' bytes; target_vocab may be NULL
 * (then target_vocab_len 0) unless config says separate_vocabs; config may be NULL. */
attn_status attn_mt_tok_load_marian_mem(const void *source_spm, size_t source_spm_len,
                                        const void *target_spm, size_t target_spm_len,
                                        const char *vocab, size_t vocab_len,
                                        const char *target_vocab, size_t target_vocab_len,
                                        const char *config, size_t config_len,
                                        attn_mt_tok **out);
void attn_mt_tok_free(attn_mt_tok *t);
attn_mt_tok_kind attn_mt_tok_kind_of(const attn_mt_tok *t);

/* Source text to ids, as tokenizer(text).input_ids. src_lang: NLLB's language code (NULL: the
 * configured src_lang); Marian: must be NULL (a ">>xx<<" at the start of the text is Marian's
 * target-language token). *ids is allocated (attn_free; non-NULL even when *n is 0). */
attn_status attn_mt_tok_encode_source(const attn_mt_tok *t, const char *src_lang,
                                      const char *text, size_t len, int32_t **ids, size_t *n);
/* Target text to ids (the labels), as tokenizer(text_target=text).input_ids. tgt_lang: NLLB's
 * language code (NULL: the configured tgt_lang; an error when there is none); Marian: NULL. */
attn_status attn_mt_tok_encode_target(const attn_mt_tok *t, const char *tgt_lang,
                                      const char *text, size_t len, int32_t **ids, size_t *n);
/* Target ids to text, as tokenizer.decode(ids, skip_special_tokens=True) (flags
 * ATTN_TOK_DECODE_KEEP_SPECIAL: skip_special_tokens=False). An id outside the target vocabulary
 * is INVALID_ARGUMENT (Marian: an id inside it that no entry names decodes as "<unk>", as
 * transformers does). *text is NUL-terminated, allocated (attn_free). */
attn_status attn_mt_tok_decode(const attn_mt_tok *t, const int32_t *ids, size_t n,
                               unsigned flags, char **text, size_t *len);
/* The id of a language token: NLLB's codes ("zho_Hans": the forced first generated token,
 * generate's forced_bos_token_id), or Marian's ">>cmn_Hans<<" entries of vocab.json. Unknown:
 * INVALID_ARGUMENT naming the code. */
attn_status attn_mt_tok_lang_id(const attn_mt_tok *t, const char *lang, int32_t *id);
/* Ids of ATTN_TOK_PAD, ATTN_TOK_UNK, ATTN_TOK_EOS and (NLLB) ATTN_TOK_BOS; -1 when absent.
 * Marian's decoder start token is pad. */
int32_t attn_mt_tok_special_id(const attn_mt_tok *t, attn_tok_special which);
/* Number of ids of a side's vocabulary (max id + 1): Marian's vocab.json or (target, when
 * separate) target_vocab.json; NLLB: tokenizer.json's, both sides. Compare with config.json's
 * vocab_size (and decoder_vocab_size). */
int32_t attn_mt_tok_vocab_size(const attn_mt_tok *t, bool target);
/* The token of id on a side; NULL when none. Lives as long as t. */
const char *attn_mt_tok_id_to_token(const attn_mt_tok *t, int32_t id, bool target);

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
 * lines and params give the same tokenizer. Invalid UTF-8 and NUL bytes (which a tokenizer.json
 * vocabulary cannot hold) are ATTN_STATUS_INVALID_ARGUMENT naming the line. */
attn_status attn_tok_train_bpe(const attn_tok_train_params *p, const char *const *lines,
                               const size_t *lens, size_t n, attn_tok **out);

/* A character-level tokenizer (nanoGPT's shakespeare-char): one id per distinct Unicode code
 * point of text[0..len), in code point order (Python's sorted(set(text))). It is a plain
 * tokenizer.json that tokenizers loads and encodes identically: model WordLevel (the characters,
 * unk_token "<unk>", which is not in the vocabulary), pre_tokenizer Split(Regex "[\s\S]",
 * Isolated) (every character a piece; "." would miss "\n"), decoder Fuse (decode gives back the
 * text exactly). Encoding a character the text did not contain is an error here as in
 * tokenizers ("Missing [UNK] token"), never a silent substitute. text must be valid UTF-8, not
 * empty and without NUL bytes (ATTN_STATUS_INVALID_ARGUMENT; see "Strings" above). */
attn_status attn_tok_train_chars(const char *text, size_t len, attn_tok **out);

#ifdef __cplusplus
}
#endif
#endif

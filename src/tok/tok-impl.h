/* tok-impl.h — internals of the tokenizer subsystem (src/tok/), not installed.
 *
 * A tokenizer is the Hugging Face pipeline, component by component:
 *
 *   text ─► added tokens split out (those with normalized=false, matched on the raw text)
 *        ─► normalizer steps on each remaining segment
 *        ─► added tokens with normalized=true split out of the normalized text
 *        ─► pre-tokenizer steps: each segment becomes a list of pieces ("words")
 *        ─► the model turns each piece into ids (tok_model vtable: BPE in bpe.c, WordPiece and
 *           WordLevel in wordpiece.c)
 *        ─► truncation, the post-processor's special tokens and type ids, padding (post.c)
 *   ids ─► tokens (added vocabulary first, then the model) ─► decoder steps ─► text
 *
 * Components are kept as flat step lists (a JSON "Sequence" is flattened on load, which is
 * equivalent for normalizers, pre-tokenizers and decoders alike), so that adding a component
 * means one enum value, one parse case, one apply case and one save case.
 *
 * Every string is (pointer, byte length). tokenizer.json strings that become tokens or patterns
 * never contain U+0000: jansson cannot hold a NUL in an object key, where vocabularies and
 * special-token names live, so one rule holds for every field: a NUL there is refused at load
 * (tok_no_nul, and attn_tok_load_reader for keys) with a message naming the field. Text to encode
 * may contain NUL bytes. */
#ifndef ATTN_TOK_IMPL_H
#define ATTN_TOK_IMPL_H

#include "attn_tok.h"
#include "../core/core-impl.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Ids live in [0, TOK_MAX_ID]: far above any real vocabulary (the largest are ~260k), low enough
 * that an absurd id in a corrupt file cannot drive a huge allocation. */
#define TOK_MAX_ID ((int32_t)(1 << 24) - 1)
/* tokenizer.json files over this size are refused (the largest real ones are tens of MB). */
#define TOK_MAX_FILE_BYTES ((uint64_t)1 << 30)

/* ---- growable byte buffer, int vector and string list (util.c) ---- */

typedef struct {
    char *p;
    size_t n, cap;
    bool oom; /* an append failed: everything after is dropped, checked once at the end */
} tok_buf;

void tok_buf_put(tok_buf *b, const void *s, size_t n);
void tok_buf_putc(tok_buf *b, char c);
void tok_buf_puts(tok_buf *b, const char *s);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void tok_buf_printf(tok_buf *b, const char *fmt, ...);
/* A JSON string literal (quotes included) for s[0..n). */
void tok_buf_json_str(tok_buf *b, const char *s, size_t n);
void tok_buf_free(tok_buf *b);

/* s[0..n) for an error message: between double quotes, JSON-escaped (so a NUL, a newline or a
 * quote inside stays visible and the message one line), cut to fit cap bytes with "..." at the
 * end. Returns out. */
const char *tok_quote(char *out, size_t cap, const char *s, size_t n);
/* Whether the JSON value v is a string equal to name, byte for byte over its whole length (a
 * string with a NUL inside is never a component or option name). */
bool tok_json_str_is(json_t *v, const char *name);
/* ATTN_STATUS_UNSUPPORTED naming the field (name: the file, path: the field) when s[0..n) holds a
 * NUL byte, else OK. Every tokenizer.json string that becomes a token or a pattern goes through
 * it (see the top of this file). */
attn_status tok_no_nul(const char *s, size_t n, const char *name, const char *path);
/* A JSON parse error of a tokenizer file as an attn_fail status: a NUL in an object key (which
 * jansson refuses) is the rule above, UNSUPPORTED; anything else FORMAT. */
attn_status tok_json_error(const json_error_t *err, const char *name);

typedef struct {
    int32_t *v;
    size_t n, cap;
} tok_ivec;

bool tok_ivec_push(tok_ivec *v, int32_t x);
void tok_ivec_free(tok_ivec *v);

/* A list of strings stored back to back in one buffer; flag is a per-string byte the owner
 * uses (a pre-tokenizer piece: "starts at original offset 0"). */
typedef struct {
    tok_buf data;
    size_t *off, *len;
    uint8_t *flag;
    size_t n, cap;
} tok_strlist;

bool tok_strlist_push(tok_strlist *l, const char *s, size_t n, uint8_t flag);
static inline const char *tok_strlist_at(const tok_strlist *l, size_t i) {
    return l->data.p + l->off[i];
}
void tok_strlist_clear(tok_strlist *l);
void tok_strlist_free(tok_strlist *l);

/* ---- UTF-8 (util.c) ---- */

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 if it is invalid there (Rust's and
 * RFC 3629's rules: no overlongs, no surrogates, nothing above U+10FFFF). *cp gets the code
 * point. */
size_t tok_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Offset of the first invalid byte, or n when the whole buffer is valid UTF-8. */
size_t tok_utf8_check(const char *s, size_t n);
/* Encode cp (must be valid) into out[0..4); returns the length. */
size_t tok_utf8_encode(uint32_t cp, char *out);

/* ---- vocabulary: id <-> string (util.c) ---- */

typedef struct {
    char **str;      /* by id; NULL for an id with no token (gap) */
    uint32_t *len;   /* byte length by id */
    int32_t n;       /* ids are in [0, n) */
    int32_t count;   /* ids that have a token */
    int32_t *slots;  /* open-addressing table of ids, -1 = empty */
    size_t mask;     /* table size - 1 (a power of two) */
} tok_vocab;

uint64_t tok_hash(const char *s, size_t n);
/* Empty vocabulary with room for ids [0, n). */
attn_status tok_vocab_init(tok_vocab *v, int32_t n);
/* Give id the string s (copied). Fails (FORMAT, message by the caller) if id already has a token
 * or s already has an id: returns 1 for a duplicate id, 2 for a duplicate string, -1 for out of
 * memory, 0 on success. */
int tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t n);
int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t n); /* -1 if absent */
void tok_vocab_free(tok_vocab *v);

/* ---- models ---- */

typedef struct tok_model tok_model;
struct tok_model {
    const char *type; /* the tokenizer.json model.type: "BPE" */
    tok_vocab vocab;
    /* Append the ids of one pre-tokenized piece s[0..n) to out. */
    attn_status (*encode_piece)(const tok_model *m, const char *s, size_t n, tok_ivec *out);
    /* Write the model's JSON object (the value of "model") to b. */
    void (*save)(const tok_model *m, tok_buf *b);
    void (*destroy)(tok_model *m); /* frees m and everything it owns */
};

/* bpe.c: parse model (an object with "type": "BPE"); name is the file, for messages. */
attn_status tok_bpe_from_json(json_t *model, const char *name, tok_model **out);
/* bpe.c: a BPE model from a finished vocabulary (taken over, even on failure) and merge list
 * (pairs of ids, copied) — used by the trainer. */
typedef struct {
    bool byte_fallback, fuse_unk, ignore_merges;
    const char *unk_token; /* NULL for none */
} tok_bpe_options;
attn_status tok_bpe_from_parts(tok_vocab *vocab, const int32_t *merges, size_t n_merges,
                               const tok_bpe_options *opt, tok_model **out);

/* ---- pipeline components ---- */

typedef enum {
    TOK_NORM_PREPEND,       /* {"type": "Prepend", "prepend": S} */
    TOK_NORM_REPLACE,       /* {"type": "Replace", "pattern": {"String": A}, "content": B} */
    TOK_NORM_BERT,          /* {"type": "BertNormalizer", "clean_text", "handle_chinese_chars",
                               "strip_accents", "lowercase"} */
    TOK_NORM_LOWERCASE,     /* {"type": "Lowercase"} */
    TOK_NORM_NFD,           /* {"type": "NFD"} */
    TOK_NORM_NFKD,          /* {"type": "NFKD"} */
    TOK_NORM_NFC,           /* {"type": "NFC"} */
    TOK_NORM_NFKC,          /* {"type": "NFKC"} */
    TOK_NORM_STRIP_ACCENTS, /* {"type": "StripAccents"} */
    TOK_NORM_STRIP,         /* {"type": "Strip", "strip_left", "strip_right"} */
    TOK_NORM_PRECOMPILED    /* {"type": "Precompiled", "precompiled_charsmap": base64}
                               (precompiled.c) */
} tok_norm_kind;

typedef struct {
    tok_norm_kind kind;
    char *a, *b; /* Prepend: a = prepend. Replace: a = pattern, b = content */
    size_t alen, blen;
    bool clean, chinese, lower; /* BertNormalizer */
    int strip_accents;          /* BertNormalizer: -1 null (= lowercase), 0 false, 1 true */
    bool left, right;           /* Strip */
    bool regex;                 /* Replace: a = a {"Regex": ...} pattern, compiled into re */
    void *re;                   /* Replace (Regex): pcre2_code * (tok_regex_compile) */
    void *pc;                   /* Precompiled: the parsed charsmap; a = the base64 text */
} tok_norm;

typedef enum { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER } tok_prepend_scheme;

typedef enum {
    TOK_PRE_METASPACE,   /* {"type": "Metaspace", "replacement": C, "prepend_scheme": ..., "split"} */
    TOK_PRE_PUNCTUATION, /* {"type": "Punctuation", "behavior": B} */
    TOK_PRE_BYTE_LEVEL,  /* {"type": "ByteLevel", "add_prefix_space", "trim_offsets", "use_regex"} */
    TOK_PRE_BERT,        /* {"type": "BertPreTokenizer"} */
    TOK_PRE_WHITESPACE,  /* {"type": "Whitespace"}: \w+|[^\w\s]+ */
    TOK_PRE_WHITESPACE_SPLIT, /* {"type": "WhitespaceSplit"} */
    TOK_PRE_SPLIT,       /* {"type": "Split", "pattern": {"String"|"Regex": P}, "behavior", "invert"} */
    TOK_PRE_DIGITS       /* {"type": "Digits", "individual_digits": b}: numbers isolated one by one
                            (individual) or as runs */
} tok_pre_kind;

/* How a split treats its delimiters (tokenizers' SplitDelimiterBehavior). */
typedef enum {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_PREV, /* "MergedWithPrevious" */
    TOK_SPLIT_MERGED_NEXT, /* "MergedWithNext" */
    TOK_SPLIT_CONTIGUOUS
} tok_split_behavior;

/* The three flags of a ByteLevel pre-tokenizer, decoder or post-processor (saved as read). */
typedef struct {
    bool add_prefix_space, trim_offsets, use_regex;
} tok_byte_level;

typedef struct {
    tok_pre_kind kind;
    char rep[5]; /* the replacement character, UTF-8 */
    size_t replen;
    tok_prepend_scheme scheme;
    bool split;
    tok_byte_level bl; /* ByteLevel */
    tok_split_behavior behavior; /* Split, Punctuation; Digits: ISOLATED (individual_digits) or
                                    CONTIGUOUS */
    char *pat;                   /* Split: the pattern as written in the file */
    size_t patlen;
    bool regex, invert;          /* Split */
    void *re;                    /* Split (Regex), Whitespace: pcre2_code * (split.c) */
} tok_pre;

typedef enum {
    TOK_DEC_REPLACE,       /* {"type": "Replace", "pattern": {"String": A}, "content": B} */
    TOK_DEC_BYTE_FALLBACK, /* {"type": "ByteFallback"} */
    TOK_DEC_FUSE,          /* {"type": "Fuse"} */
    TOK_DEC_STRIP,         /* {"type": "Strip", "content": C, "start": N, "stop": M} */
    TOK_DEC_METASPACE,     /* {"type": "Metaspace", "replacement": C, "prepend_scheme": ...} */
    TOK_DEC_BYTE_LEVEL,    /* {"type": "ByteLevel", ...}: GPT-2's alphabet back to bytes */
    TOK_DEC_WORDPIECE      /* {"type": "WordPiece", "prefix": P, "cleanup": b} */
} tok_dec_kind;

typedef struct {
    tok_dec_kind kind;
    char *a, *b; /* Replace: pattern, content. WordPiece: a = prefix */
    size_t alen, blen;
    uint32_t ch;         /* Strip: content; Metaspace: replacement */
    size_t start, stop;  /* Strip */
    tok_prepend_scheme scheme; /* Metaspace */
    bool split;                /* Metaspace (saved back as read) */
    tok_byte_level bl;         /* ByteLevel (saved back as read) */
    bool cleanup;              /* WordPiece */
} tok_dec;

typedef enum {
    TOK_POST_NONE,       /* null */
    TOK_POST_BYTE_LEVEL, /* {"type": "ByteLevel", ...}: only offsets change, ids never */
    TOK_POST_TEMPLATE,   /* {"type": "TemplateProcessing", "single", "pair", "special_tokens"} */
    TOK_POST_BERT        /* {"type": "BertProcessing", "sep": [S, id], "cls": [C, id]}: kept as
                            the template [CLS] $A [SEP] / [CLS] $A [SEP] $B:1 [SEP]:1 */
} tok_post_kind;

/* One step of the post-processor: a Sequence keeps them in order (saved back as read). */
typedef struct {
    tok_post_kind kind;
    tok_byte_level bl; /* BYTE_LEVEL */
} tok_post_step;

/* One piece of a template: a special token (by index into attn_tok.tpl_special) or the
 * sequence A / B, with the type id its tokens get. */
typedef struct {
    bool special;
    uint8_t seq; /* Sequence: 0 = A, 1 = B */
    uint32_t type_id;
    size_t index; /* SpecialToken: into tpl_special */
} tok_tpl_piece;

typedef struct {
    char *name;      /* the template's "id" of it */
    size_t name_len;
    int32_t *ids;    /* (n) */
    char **tokens;   /* (n) NUL-terminated, for saving */
    size_t *tok_len; /* (n) */
    size_t n;
} tok_tpl_special;

/* The file's "truncation" and "padding" (stored, saved back; applied only on request). */
typedef struct {
    bool on;
    size_t max_length, stride;
    int strategy;  /* attn_tok_truncation */
    int direction; /* attn_tok_side */
} tok_trunc_cfg;

typedef struct {
    bool on;
    bool fixed;    /* {"Fixed": length}, else "BatchLongest" */
    size_t length, multiple; /* multiple: 0 = null */
    int direction; /* attn_tok_side */
    int32_t pad_id, pad_type_id;
    char *pad_token;
    size_t pad_token_len;
} tok_pad_cfg;

/* An added token, with tokenizers' AddedToken flags: single_word (a match only counts with no
 * word character (Rust regex \w) right before and after it), lstrip / rstrip (the whitespace
 * run before / after a match becomes part of it), normalized (matched in the normalized text,
 * as its content normalized, pat), special (dropped by decode unless asked). */
typedef struct {
    char *content;
    size_t len;
    int32_t id;
    bool special, normalized, single_word, lstrip, rstrip;
    char *pat;      /* what is matched: normalized tokens own their normalized content here; */
    size_t pat_len; /* the others point at content */
} tok_added;

struct attn_tok {
    tok_model *model;
    tok_norm *norm;
    size_t n_norm;
    tok_pre *pre;
    size_t n_pre;
    bool has_decoder; /* false: decode joins tokens with " " (HF's behaviour without one) */
    tok_dec *dec;
    size_t n_dec;
    tok_added *added; /* in file order */
    size_t n_added;
    bool any_added_normalized, any_added_raw;
    /* the added tokens of each kind ([0] matched in the raw text, [1] in the normalized text) by
     * the first byte of their pattern, longest first, then tokenizers' order of precedence
     * (special tokens, then the others, each in file order): added_order[k][added_first[k][b]
     * .. added_first[k][b + 1]) (tok_finish) */
    uint32_t added_first[2][257];
    int32_t *added_order[2];
    void *word_re;         /* pcre2_code * of Rust's \w when a token is single_word (split.c) */
    int32_t vocab_size;    /* max over model and added ids, + 1 */
    uint8_t *added_kind;   /* by id: 0 not added, 1 added, 2 added and special */
    int32_t *added_index;  /* by id: index into added, or -1 */
    tok_post_kind post;    /* the step that adds special tokens (TEMPLATE, BERT), else BYTE_LEVEL
                              when there is one, else NONE */
    tok_byte_level post_bl; /* a lone ByteLevel post-processor's flags */
    bool post_seq;          /* written as {"type": "Sequence", "processors": post_steps} */
    tok_post_step post_steps[8];
    size_t n_post_steps;
    tok_tpl_piece *tpl_single, *tpl_pair; /* TEMPLATE / BERT */
    size_t n_single, n_pair;
    tok_tpl_special *tpl_special;
    size_t n_tpl_special;
    size_t added_single, added_pair; /* ids the template adds around one text / a pair */
    tok_trunc_cfg trunc;
    tok_pad_cfg pad;
    void *byte_re;         /* pcre2_code * of GPT-2's pattern when a ByteLevel uses the regex */
};

/* tokenizer.c: run the pipeline up to the model: pieces (pre-tokenized words) and added-token
 * ids, in order. cb gets either a piece (id < 0) or an added token's id (s NULL). The trainer
 * uses it to count words exactly as encode will see them. */
typedef attn_status (*tok_piece_fn)(void *ctx, const char *s, size_t n, int32_t added_id);
attn_status tok_pretokenize(const attn_tok *t, const char *text, size_t len, tok_piece_fn cb,
                            void *ctx);
/* ---- byte level (byte_level.c): GPT-2's byte-to-unicode alphabet and pre-tokenization ---- */

/* Letters (\p{L}) and numbers (\p{N}) of Unicode 15.0-16.0, which tokenizers' Oniguruma knows
 * and Debian's PCRE2 10.42 (Unicode 14) does not, as PCRE2 class items. */
extern const char tok_new_letters[], tok_new_numbers[];

/* Compile GPT-2's pre-tokenization pattern into t->byte_re if some ByteLevel pre-tokenizer
 * uses it (no-op otherwise). name is the file, for messages. */
attn_status tok_byte_level_prepare(attn_tok *t, const char *name);
void tok_byte_level_release(attn_tok *t);
/* ByteLevel pre-tokenization of one piece s[0..n): a space prepended per add_prefix_space, the
 * regex split (Isolated), each piece's bytes mapped to GPT-2's alphabet, pushed to out. *md is
 * the caller's pcre2 match data (created on first use; free with tok_byte_level_md_free). */
bool tok_byte_level_split(const attn_tok *t, const tok_byte_level *bl, void **md, const char *s,
                          size_t n, uint8_t flag, tok_strlist *out);
void tok_byte_level_md_free(void *md);
/* The ByteLevel decoder: every token whose characters are all in the alphabet becomes its
 * bytes, any other token its own UTF-8; the whole is read as UTF-8 with each maximal invalid
 * subsequence replaced by U+FFFD (Rust's String::from_utf8_lossy); one string out. */
bool tok_byte_level_decode(const tok_strlist *in, tok_strlist *out);
/* Append s[0..n) to out as from_utf8_lossy does. */
void tok_utf8_lossy(tok_buf *out, const char *s, size_t n);

/* tokenizer.c: derive vocab_size, the by-id added-token tables, the normalized tokens' patterns
 * and the match index once model, added tokens and normalizers are set. */
attn_status tok_finish(attn_tok *t, const char *name);
/* tokenizer.c (called by tok_finish; the trainer calls it before counting words): the normalized
 * tokens' patterns (their content through the normalizer; one that becomes empty is
 * UNSUPPORTED), any_added_raw / any_added_normalized and the match index added_first /
 * added_order. */
attn_status tok_added_prepare(attn_tok *t, const char *name);

/* ---- Unicode as tokenizers sees it (unicode.c) ----
 * Character classes follow the Rust crates tokenizers 0.21 is built with (std's char methods,
 * unicode_categories, unicode-normalization-alignments); utf8proc gives the Unicode data and
 * the code points where those crates' tables disagree with utf8proc's are listed in unicode.c
 * (found by tests/test_tokenizer_wordpiece.c, which compares every code point). */
bool tok_uni_space(uint32_t cp);   /* Rust char::is_whitespace (the White_Space property) */
bool tok_uni_punct(uint32_t cp);   /* char::is_ascii_punctuation or a Unicode P* category */
bool tok_uni_numeric(uint32_t cp); /* Rust char::is_numeric (Nd, Nl, No): the Digits
                                      pre-tokenizer */
bool tok_uni_control(uint32_t cp); /* removed by BertNormalizer's clean_text (Cc Cf Co, not
                                      \t \n \r) */
bool tok_uni_mn(uint32_t cp);      /* a nonspacing mark (Mn) */
bool tok_uni_cjk(uint32_t cp);     /* BERT's "Chinese character" blocks */
/* Rust char::to_lowercase: 1 or 2 code points into out. */
size_t tok_uni_lower(uint32_t cp, uint32_t out[3]);
/* Apply one normalizer step to s[0..n), appending the result to out (false: out of memory). */
bool tok_norm_apply(const tok_norm *nm, const char *s, size_t n, tok_buf *out);

/* ---- the Precompiled normalizer (precompiled.c) ---- */

attn_status tok_precompiled_parse(const char *b64, size_t n, const char *name, const char *path,
                                  void **out);
bool tok_precompiled_apply(const void *pc, const char *s, size_t n, tok_buf *out);
void tok_precompiled_free(void *pc);

/* ---- the Unigram model (unigram.c) ---- */

attn_status tok_unigram_from_json(json_t *model, const char *name, tok_model **out);

/* ---- WordPiece and WordLevel models (wordpiece.c) ---- */

/* {token: id} into an empty vocabulary; path names the object for messages ("model.vocab"). */
attn_status tok_vocab_from_json(json_t *obj, const char *name, const char *path, tok_vocab *v);
attn_status tok_wordpiece_from_json(json_t *model, const char *name, tok_model **out);
attn_status tok_wordlevel_from_json(json_t *model, const char *name, tok_model **out);
/* A WordLevel model over a finished vocabulary (taken over, even on failure). */
attn_status tok_wordlevel_from_parts(tok_vocab *vocab, const char *unk_token, tok_model **out);

/* ---- splitting pre-tokenizers (split.c) ---- */

/* Compile the regexes of Split / Whitespace pre-tokenizers (Oniguruma syntax translated to
 * PCRE2); name is the file, for messages. */
attn_status tok_split_prepare(attn_tok *t, const char *name);
void tok_split_release(attn_tok *t);
/* Apply pre-tokenizer p (BertPreTokenizer, Whitespace, WhitespaceSplit, Split, Punctuation, Digits) to
 * one piece; *md is the caller's PCRE2 match data (created on first use, freed with
 * tok_byte_level_md_free). */
bool tok_split_apply(const tok_pre *p, void **md, const char *s, size_t n, uint8_t flag,
                     tok_strlist *out);
/* Translate an Oniguruma (Ruby syntax) pattern to PCRE2 syntax into out; false with a message
 * in err (size errn) when it uses something PCRE2 cannot express. */
bool tok_onig_to_pcre2(const char *pat, size_t n, tok_buf *out, char *err, size_t errn);
/* Whether the one character s[0..n) is a word character of Rust's regex crate (\w: Alphabetic,
 * marks, decimal numbers, connector punctuation, the joiners), as tokenizers' single_word added
 * tokens test it: 1 yes, 0 no, -1 out of memory. t->word_re must be compiled (tok_split_prepare
 * does when a token needs it). *md as in tok_split_apply. */
int tok_word_char(const attn_tok *t, void **md, const char *s, size_t n); /* 1, 0, -1: no memory */
/* Compile an Oniguruma pattern (a tokenizer.json {"Regex": ...}) into a pcre2_code *; what names
 * the field for messages. */
attn_status tok_regex_compile(const char *pat, size_t n, const char *name, const char *what,
                              void **out);
void tok_regex_free(void *re);
/* Replace every match of re (a pcre2_code *) in s[0..n) with c[0..cn), appending to out: what
 * tokenizers' Replace normalizer does with a Regex pattern (an empty match inserts c and the
 * search goes on after the next character). *md as in tok_split_apply. False: out of memory. */
bool tok_regex_replace(const void *re, void **md, const char *s, size_t n, const char *c,
                       size_t cn, tok_buf *out);
/* JIT-compile a pcre2_code * (skipped under valgrind and when ATTN_NO_JIT is set). */
void tok_regex_jit(void *re);

/* ---- post-processing (post.c) ---- */

attn_status tok_post_parse(attn_tok *t, json_t *obj, const char *name);
void tok_post_save(const attn_tok *t, tok_buf *b);
attn_status tok_trunc_pad_parse(attn_tok *t, json_t *root, const char *name);
void tok_trunc_pad_save(const attn_tok *t, tok_buf *b);
void tok_post_free(attn_tok *t);

/* tokenizer.c: the ids of one text (pipeline and model, no post-processing); memo is an
 * encode memo (tok_memo_new) shared by calls of one thread, or NULL. */
typedef struct tok_memo tok_memo;
tok_memo *tok_memo_new(const attn_tok *t);
void tok_memo_free(tok_memo *m);
attn_status tok_encode_ids(const attn_tok *t, tok_memo *memo, const char *text, size_t len,
                           tok_ivec *out);

#endif

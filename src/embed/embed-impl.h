/* embed-impl.h — internals of src/embed (attn_embed.h): the handle and the text helpers that
 * reproduce what Python does to a sentence before the tokenizer sees it. Not installed. */
#ifndef ATTN_EMBED_IMPL_H
#define ATTN_EMBED_IMPL_H

#include "attn_embed.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct attn_embed {
    attn_embed_info info;
    attn_bert_model *model;
    attn_tok *tok;
    attn_bert_state *st; /* run state for up to st_B sequences of st_T tokens (grown on demand) */
    int st_B, st_T;
    int batch_size;
    /* attn_embed_encode's extra run states for threads 1 .. n_workers-1 when it runs one batch
     * per thread (thread 0 uses st); each grown on demand like st. */
    attn_bert_state **wst; /* [n_workers] (entry 0 unused) */
    int *wst_B, *wst_T;    /* [n_workers] their capacities */
    int n_workers;
    char *model_dir; /* the directory holding config.json / model.safetensors / tokenizer.json */
};

/* ids of text with the special tokens: [CLS] tokens [SEP], the tokens cut so the total is at most
 * max_len (0 = no limit). st_prep: sentence-transformers' strip() / lower() first. *ids_out is
 * malloc'd (free it). index names the text in errors (SIZE_MAX: none). */
attn_status embed_tokenize_text(const attn_embed *e, const char *text, size_t len, size_t max_len,
                                bool st_prep, size_t index, int32_t **ids_out, size_t *n_out);
/* Make e->st hold at least B sequences of T tokens. */
attn_status embed_ensure_state(attn_embed *e, int B, int T);

/* Decode one UTF-8 code point at s[0..n) (n >= 1). Returns its length (1..4) and the code point
 * in *cp, or 0 for an invalid sequence (overlong, surrogate, > U+10FFFF, truncated). */
int embed_utf8_next(const unsigned char *s, size_t n, int32_t *cp);
/* Byte offset of the first invalid UTF-8 sequence in s[0..n), or n when s is valid. */
size_t embed_utf8_check(const char *s, size_t n);
/* Append code point cp (valid) as UTF-8 to dst (at least 4 bytes free); returns the bytes written. */
int embed_utf8_put(char *dst, int32_t cp);

/* Python's str.isspace() for one code point. */
bool embed_py_isspace(int32_t cp);
/* Python's str.strip() of valid UTF-8 s[0..n): *begin and *end bound the stripped text. */
void embed_py_strip(const char *s, size_t n, size_t *begin, size_t *end);
/* Python's str.lower() of valid UTF-8 s[0..n) into a new NUL-terminated string (malloc; *out_n
 * bytes). NULL when out of memory. */
char *embed_py_lower(const char *s, size_t n, size_t *out_n);
/* transformers' clean_up_tokenization() in place on a NUL-terminated string (it only shrinks). */
void embed_clean_up_tokenization(char *s);

#endif

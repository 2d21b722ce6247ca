/* char_train.c — attn_tok_train_chars: nanoGPT's character-level tokenizer as a tokenizer.json
 * that tokenizers loads and encodes identically (see attn_tok.h).
 *
 * Why this shape: tokenizers has no "character" model, but WordLevel over single characters with
 * a pre-tokenizer that makes every character a piece is one. The Split regex is "[\s\S]" rather
 * than "." because Oniguruma's "." does not match "\n" (and its (?m) means dot-all, PCRE2's
 * (?s)); a class and its complement match every code point in both engines. decoder Fuse joins
 * the tokens with nothing between them (without a decoder tokenizers joins them with spaces).
 * unk_token "<unk>" is a five-character string, never a vocabulary entry: an unseen character is
 * an error in both libraries rather than a silent substitute. */
#include "tok-impl.h"

#include <stdlib.h>
#include <string.h>

static const char CHAR_RE[] = "[\\s\\S]";

attn_status attn_tok_train_chars(const char *text, size_t len, attn_tok **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_tok_train_chars: out is NULL");
    *out = NULL;
    if (!text || len == 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_tok_train_chars: the text is empty (no characters to learn)");
    size_t bad = tok_utf8_check(text, len);
    if (bad != len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_tok_train_chars: the text is not valid UTF-8 (byte 0x%02X at "
                         "offset %zu)",
                         (unsigned char)text[bad], bad);
    const char *nul = memchr(text, 0, len);
    if (nul) /* a "\u0000" vocabulary key: see "Strings" in attn_tok.h */
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_tok_train_chars: the text has a NUL byte at offset %zu (a "
                         "tokenizer.json vocabulary cannot hold U+0000)",
                         (size_t)(nul - text));
    uint8_t *seen = calloc(0x110000 / 8, 1);
    if (!seen) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_tok_train_chars: out of memory");
    int32_t count = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = tok_utf8_decode((const unsigned char *)text + i, len - i, &cp);
        i += k; /* k > 0: validated above */
        if (!(seen[cp >> 3] & (1u << (cp & 7)))) {
            seen[cp >> 3] |= (uint8_t)(1u << (cp & 7));
            count++;
        }
    }
    tok_vocab V;
    attn_status st = tok_vocab_init(&V, count);
    int32_t id = 0;
    for (uint32_t cp = 0; !st && cp < 0x110000; cp++) {
        if (!(seen[cp >> 3] & (1u << (cp & 7)))) continue;
        char u[4];
        if (tok_vocab_set(&V, id++, u, tok_utf8_encode(cp, u)))
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_tok_train_chars: out of memory");
    }
    free(seen);
    if (st) {
        tok_vocab_free(&V);
        return st;
    }
    attn_tok *t = calloc(1, sizeof *t);
    if (!t) {
        tok_vocab_free(&V);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_tok_train_chars: out of memory");
    }
    st = tok_wordlevel_from_parts(&V, "<unk>", &t->model);
    if (!st) {
        t->pre = calloc(1, sizeof *t->pre);
        t->dec = calloc(1, sizeof *t->dec);
        t->added = calloc(1, sizeof *t->added);
        if (t->pre) t->pre->pat = malloc(sizeof CHAR_RE);
        if (!t->pre || !t->dec || !t->added || !t->pre->pat)
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_tok_train_chars: out of memory");
    }
    if (!st) {
        t->n_pre = 1;
        t->pre->kind = TOK_PRE_SPLIT;
        memcpy(t->pre->pat, CHAR_RE, sizeof CHAR_RE);
        t->pre->patlen = sizeof CHAR_RE - 1;
        t->pre->regex = true;
        t->pre->behavior = TOK_SPLIT_ISOLATED;
        t->n_dec = 1;
        t->dec->kind = TOK_DEC_FUSE;
        t->has_decoder = true;
        st = tok_finish(t, "attn_tok_train_chars");
    }
    if (!st) st = tok_split_prepare(t, "attn_tok_train_chars");
    if (st) {
        attn_tok_free(t);
        return st;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

/* tu_tok.h — tokenizer test helpers shared by test_tokenizer.c and test_tokenizer_gpt2.c. */
#ifndef ATTN_TU_TOK_H
#define ATTN_TU_TOK_H

#include "attn_tok.h"
#include "tu.h"

/* ids of text; the caller frees with attn_free */
static inline int32_t *enc(const attn_tok *t, const char *s, size_t n, size_t *k) {
    int32_t *ids = NULL;
    attn_status st = attn_tok_encode_alloc(t, s, n, &ids, k);
    if (st) fail_msg("encode failed: %s", attn_last_error());
    return ids;
}

static inline char *dec(const attn_tok *t, const int32_t *ids, size_t n, unsigned flags,
                        size_t *len) {
    char *s = NULL;
    attn_status st = attn_tok_decode_alloc(t, ids, n, flags, &s, len);
    if (st) fail_msg("decode failed: %s", attn_last_error());
    return s;
}

static inline void print_ids(const char *what, const int32_t *ids, size_t n) {
    printf("    %s [", what);
    for (size_t i = 0; i < n && i < 40; i++) printf(i ? ", %d" : "%d", ids[i]);
    printf("%s]\n", n > 40 ? ", ..." : "");
}

#endif

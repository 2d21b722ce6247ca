/* tu_tok.h — tokenizer test helpers shared by the tests/test_tokenizer*.c programs: encode and
 * decode that fail the test on error, and the reference cases tools/ref_tokenizer_*.py write. */
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

/* ---- reference cases written by tools/ref_tokenizer_*.py ---------------------------------- */

#include <jansson.h>

/* $ATTN_REF_DIR/name parsed (NULs in strings kept), or NULL when the file is missing. */
static inline json_t *tu_tok_load_ref(const char *name) {
    size_t n;
    char *txt = tu_read_all(tu_ref_path(name), &n);
    if (!txt) return NULL;
    json_error_t err;
    json_t *root = json_loadb(txt, n, JSON_ALLOW_NUL, &err);
    free(txt);
    if (!root) fail_msg("%s: %s", name, err.text);
    return root;
}

/* A JSON array of ids as a malloc'd array (*n ids). */
static inline int32_t *tu_tok_json_ids(json_t *a, size_t *n) {
    *n = json_array_size(a);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    assert_non_null(v);
    for (size_t j = 0; j < *n; j++) v[j] = (int32_t)json_integer_value(json_array_get(a, j));
    return v;
}

static inline bool tu_tok_ids_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

static inline bool tu_tok_str_eq(const char *s, size_t n, json_t *j) {
    return n == json_string_length(j) && !memcmp(s, json_string_value(j), n);
}

/* The ids of text without the post-processor's special tokens (malloc'd). */
static inline int32_t *tu_tok_enc_plain(const attn_tok *t, const char *s, size_t n, size_t *k) {
    attn_tok_encode_params p = attn_tok_encode_default_params();
    p.add_special_tokens = false;
    attn_tok_encoding e;
    if (attn_tok_encode_ex(t, s, n, NULL, 0, &p, &e)) fail_msg("encode: %s", attn_last_error());
    int32_t *ids = malloc((e.n + 1) * sizeof *ids);
    assert_non_null(ids);
    if (e.n) memcpy(ids, e.ids, e.n * sizeof *ids);
    *k = e.n;
    attn_tok_encoding_free(&e);
    return ids;
}

/* s[0..n) between quotes, control characters, quotes and backslashes as \xHH, cut at 160 bytes. */
static inline void tu_tok_show(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n && i < 160; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '"' || c == '\\')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    printf("%s\"", n > 160 ? "..." : "");
}

/* One case {"text", "ids" (encode), "ids_plain" (without special tokens), "decode" (of ids),
 * "decode_keep" (keeping special tokens)} through t, and when t2 is given its ids through t2 too
 * (a saved and reloaded copy). True when everything agrees; the first mismatches are printed
 * (while *shown < 4). */
static inline bool tu_tok_case(const char *what, const attn_tok *t, const attn_tok *t2, json_t *c,
                               size_t *shown) {
    json_t *text = json_object_get(c, "text");
    const char *s = json_string_value(text);
    size_t sl = json_string_length(text), k, kp, k2 = 0, nw, nwp;
    int32_t *ids = enc(t, s, sl, &k);
    int32_t *plain = tu_tok_enc_plain(t, s, sl, &kp);
    int32_t *ids2 = t2 ? enc(t2, s, sl, &k2) : NULL;
    int32_t *want = tu_tok_json_ids(json_object_get(c, "ids"), &nw);
    int32_t *want_p = tu_tok_json_ids(json_object_get(c, "ids_plain"), &nwp);
    bool ok = tu_tok_ids_eq(ids, k, want, nw) && tu_tok_ids_eq(plain, kp, want_p, nwp);
    bool ok2 = !t2 || tu_tok_ids_eq(ids2, k2, ids, k);
    size_t dl, dkl;
    char *d = dec(t, want, nw, 0, &dl);
    char *dk = dec(t, want, nw, ATTN_TOK_DECODE_KEEP_SPECIAL, &dkl);
    json_t *wk = json_object_get(c, "decode_keep");
    bool dok = tu_tok_str_eq(d, dl, json_object_get(c, "decode")) && tu_tok_str_eq(dk, dkl, wk);
    if ((!ok || !ok2 || !dok) && ++*shown <= 4) {
        printf("  %s:%s%s%s text ", what, ok ? "" : " (ids)", ok2 ? "" : " (reloaded)",
               dok ? "" : " (decode)");
        tu_tok_show(s, sl);
        printf("\n");
        print_ids("attn      ", ids, k);
        print_ids("tokenizers", want, nw);
        print_ids("attn plain", plain, kp);
        print_ids("tok. plain", want_p, nwp);
        printf("    decode attn ");
        tu_tok_show(dk, dkl);
        printf("\n           hf   ");
        tu_tok_show(json_string_value(wk), json_string_length(wk));
        printf("\n");
    }
    attn_free(ids);
    free(plain);
    attn_free(ids2);
    attn_free(d);
    attn_free(dk);
    free(want);
    free(want_p);
    return ok && ok2 && dok;
}

#endif

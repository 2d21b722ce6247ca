/* wordpiece.c — the "WordPiece" (BERT) and "WordLevel" models of tokenizer.json.
 *
 * WordPiece fields (tokenizers' defaults when absent):
 *   unk_token                  string ("[UNK]")
 *   continuing_subword_prefix  string ("##")
 *   max_input_chars_per_word   integer (100)
 *   vocab                      {token: id}: ids unique, 0 <= id < 2^24
 * A piece of more than max_input_chars_per_word characters is unk_token. Otherwise greedy
 * longest-match-first, as tokenizers 0.21 does it: from the start, the longest prefix in vocab
 * (after the first sub-token, prefixed with continuing_subword_prefix), then on from its end; if
 * some position has no match, the whole piece is unk_token. When unk_token is needed and not in
 * vocab, encoding fails (tokenizers: "WordPiece error: Missing [UNK] token from the vocabulary").
 *
 * WordLevel fields: vocab, unk_token ("<unk>"). A piece is its own id, or unk_token's, or an
 * error when neither is in vocab (tokenizers: "WordLevel error: Missing [UNK] token"). */
#include "tok-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    tok_model base;
    char *unk, *prefix;
    size_t unk_len, prefix_len;
    size_t max_chars;
    int32_t unk_id; /* -1: unk_token is not in vocab */
    char *name;     /* the file, for messages */
} wp_model;

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

attn_status tok_vocab_from_json(json_t *vocab, const char *name, const char *path, tok_vocab *v) {
    if (!json_is_object(vocab))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s: %s", name, path,
                         vocab ? "expected an object {token: id}" : "missing");
    int32_t max_id = -1;
    const char *key;
    json_t *val;
    char q[64], q2[64];
    json_object_foreach(vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0)
            return attn_fail(ATTN_STATUS_FORMAT, "%s: %s[%s]: expected a non-negative integer id",
                             name, path, tok_quote(q, sizeof q, key, strlen(key)));
        if (json_integer_value(val) > TOK_MAX_ID)
            return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: %s[%s]: id %lld is too large (max %ld)",
                             name, path, tok_quote(q, sizeof q, key, strlen(key)),
                             (long long)json_integer_value(val), (long)TOK_MAX_ID);
        if ((int32_t)json_integer_value(val) > max_id) max_id = (int32_t)json_integer_value(val);
    }
    attn_status s = tok_vocab_init(v, max_id + 1);
    if (s) return s;
    for (void *it = json_object_iter(vocab); it; it = json_object_iter_next(vocab, it)) {
        key = json_object_iter_key(it);
        int32_t id = (int32_t)json_integer_value(json_object_iter_value(it));
        int r = tok_vocab_set(v, id, key, json_object_iter_key_len(it));
        if (r == 1) {
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: %s: id %ld is given to %s and %s", name, path,
                          (long)id, tok_quote(q, sizeof q, v->str[id], v->len[id]),
                          tok_quote(q2, sizeof q2, key, json_object_iter_key_len(it)));
            tok_vocab_free(v);
            return s;
        }
        if (r) {
            tok_vocab_free(v);
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: %s: out of memory", name, path);
        }
    }
    return ATTN_STATUS_OK;
}

static void wp_destroy(tok_model *base) {
    wp_model *m = (wp_model *)base;
    if (!m) return;
    tok_vocab_free(&m->base.vocab);
    free(m->unk);
    free(m->prefix);
    free(m->name);
    free(m);
}

static attn_status missing_unk(const wp_model *m, const char *s, size_t n) {
    char q[80], q2[64];
    return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                     "encode: %s: %s: %s is not in the vocabulary and unk_token %s is not either",
                     m->name, m->base.type, tok_quote(q, sizeof q, s, n),
                     tok_quote(q2, sizeof q2, m->unk, m->unk_len));
}

static attn_status push_unk(const wp_model *m, const char *s, size_t n, tok_ivec *out) {
    if (m->unk_id < 0) return missing_unk(m, s, n);
    return tok_ivec_push(out, m->unk_id)
               ? ATTN_STATUS_OK
               : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encode: out of memory");
}

static attn_status wp_encode_piece(const tok_model *base, const char *s, size_t n, tok_ivec *out) {
    const wp_model *m = (const wp_model *)base;
    const tok_vocab *V = &m->base.vocab;
    size_t chars = 0;
    for (size_t i = 0; i < n; i++) chars += ((unsigned char)s[i] & 0xC0) != 0x80;
    if (chars > m->max_chars) return push_unk(m, s, n, out);
    int32_t whole = tok_vocab_find(V, s, n);
    if (whole >= 0)
        return tok_ivec_push(out, whole)
                   ? ATTN_STATUS_OK
                   : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encode: out of memory");
    size_t mark = out->n;
    char stack[256];
    char *key = m->prefix_len + n <= sizeof stack ? stack : malloc(m->prefix_len + n);
    if (!key) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encode: out of memory");
    memcpy(key, m->prefix, m->prefix_len);
    attn_status st = ATTN_STATUS_OK;
    size_t start = 0;
    bool bad = false;
    while (start < n) {
        size_t end = n;
        int32_t id = -1;
        while (start < end) {
            if (start == 0) {
                id = tok_vocab_find(V, s, end);
            } else {
                memcpy(key + m->prefix_len, s + start, end - start);
                id = tok_vocab_find(V, key, m->prefix_len + end - start);
            }
            if (id >= 0) break;
            end--; /* back to the start of the last character */
            while (end > start && ((unsigned char)s[end] & 0xC0) == 0x80) end--;
        }
        if (id < 0) {
            bad = true;
            break;
        }
        if (!tok_ivec_push(out, id)) {
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encode: out of memory");
            break;
        }
        start = end;
    }
    if (key != stack) free(key);
    if (st) return st;
    if (bad) {
        out->n = mark;
        return push_unk(m, s, n, out);
    }
    return ATTN_STATUS_OK;
}

static void save_vocab(const tok_vocab *V, tok_buf *b) {
    tok_buf_puts(b, "\"vocab\": {");
    bool first = true;
    for (int32_t id = 0; id < V->n; id++) {
        if (!V->str[id]) continue;
        tok_buf_puts(b, first ? "\n      " : ",\n      ");
        first = false;
        tok_buf_json_str(b, V->str[id], V->len[id]);
        tok_buf_printf(b, ": %ld", (long)id);
    }
    tok_buf_puts(b, first ? "}" : "\n    }");
}

static void wp_save(const tok_model *base, tok_buf *b) {
    const wp_model *m = (const wp_model *)base;
    tok_buf_puts(b, "{\n    \"type\": \"WordPiece\",\n    \"unk_token\": ");
    tok_buf_json_str(b, m->unk, m->unk_len);
    tok_buf_puts(b, ",\n    \"continuing_subword_prefix\": ");
    tok_buf_json_str(b, m->prefix, m->prefix_len);
    tok_buf_printf(b, ",\n    \"max_input_chars_per_word\": %zu,\n    ", m->max_chars);
    save_vocab(&m->base.vocab, b);
    tok_buf_puts(b, "\n  }");
}

static attn_status wl_encode_piece(const tok_model *base, const char *s, size_t n, tok_ivec *out) {
    const wp_model *m = (const wp_model *)base;
    int32_t id = tok_vocab_find(&m->base.vocab, s, n);
    if (id < 0) return push_unk(m, s, n, out);
    return tok_ivec_push(out, id) ? ATTN_STATUS_OK
                                  : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encode: out of memory");
}

static void wl_save(const tok_model *base, tok_buf *b) {
    const wp_model *m = (const wp_model *)base;
    tok_buf_puts(b, "{\n    \"type\": \"WordLevel\",\n    ");
    save_vocab(&m->base.vocab, b);
    tok_buf_puts(b, ",\n    \"unk_token\": ");
    tok_buf_json_str(b, m->unk, m->unk_len);
    tok_buf_puts(b, "\n  }");
}

static attn_status wp_alloc(const char *type, const char *name, wp_model **out) {
    wp_model *m = calloc(1, sizeof *m);
    if (m) m->name = dup_n(name, strlen(name));
    if (!m || !m->name) {
        free(m);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    bool wp = !strcmp(type, "WordPiece");
    m->base.type = wp ? "WordPiece" : "WordLevel";
    m->base.encode_piece = wp ? wp_encode_piece : wl_encode_piece;
    m->base.save = wp ? wp_save : wl_save;
    m->base.destroy = wp_destroy;
    m->max_chars = 100;
    m->unk_id = -1;
    *out = m;
    return ATTN_STATUS_OK;
}

/* A string field with a default. */
static attn_status str_field(json_t *model, const char *key, const char *def, const char *name,
                             char **dst, size_t *len) {
    json_t *v = json_object_get(model, key);
    if (v && !json_is_string(v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: model.%s: expected a string", name, key);
    const char *s = v ? json_string_value(v) : def;
    *len = v ? json_string_length(v) : strlen(def);
    char path[64];
    snprintf(path, sizeof path, "model.%s", key);
    attn_status st = tok_no_nul(s, *len, name, path);
    if (st) return st;
    *dst = dup_n(s, *len);
    return *dst ? ATTN_STATUS_OK : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
}

attn_status tok_wordpiece_from_json(json_t *model, const char *name, tok_model **out) {
    wp_model *m = NULL;
    attn_status s = wp_alloc("WordPiece", name, &m);
    if (s) return s;
    if ((s = str_field(model, "unk_token", "[UNK]", name, &m->unk, &m->unk_len)) ||
        (s = str_field(model, "continuing_subword_prefix", "##", name, &m->prefix, &m->prefix_len)))
        goto fail;
    json_t *mx = json_object_get(model, "max_input_chars_per_word");
    if (mx) {
        if (!json_is_integer(mx) || json_integer_value(mx) < 0) {
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: model.max_input_chars_per_word: expected a non-negative integer",
                          name);
            goto fail;
        }
        m->max_chars = (size_t)json_integer_value(mx);
    }
    if ((s = tok_vocab_from_json(json_object_get(model, "vocab"), name, "model.vocab",
                                 &m->base.vocab)))
        goto fail;
    m->unk_id = tok_vocab_find(&m->base.vocab, m->unk, m->unk_len);
    *out = &m->base;
    return ATTN_STATUS_OK;
fail:
    wp_destroy(&m->base);
    return s;
}

attn_status tok_wordlevel_from_json(json_t *model, const char *name, tok_model **out) {
    wp_model *m = NULL;
    attn_status s = wp_alloc("WordLevel", name, &m);
    if (s) return s;
    if ((s = str_field(model, "unk_token", "<unk>", name, &m->unk, &m->unk_len)) ||
        (s = tok_vocab_from_json(json_object_get(model, "vocab"), name, "model.vocab",
                                 &m->base.vocab)))
        goto fail;
    m->unk_id = tok_vocab_find(&m->base.vocab, m->unk, m->unk_len);
    *out = &m->base;
    return ATTN_STATUS_OK;
fail:
    wp_destroy(&m->base);
    return s;
}

attn_status tok_wordlevel_from_parts(tok_vocab *vocab, const char *unk_token, tok_model **out) {
    wp_model *m = NULL;
    attn_status s = wp_alloc("WordLevel", "the trained tokenizer", &m);
    if (s) {
        tok_vocab_free(vocab);
        return s;
    }
    m->base.vocab = *vocab;
    memset(vocab, 0, sizeof *vocab);
    m->unk_len = strlen(unk_token);
    m->unk = dup_n(unk_token, m->unk_len);
    if (!m->unk) {
        wp_destroy(&m->base);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    m->unk_id = tok_vocab_find(&m->base.vocab, m->unk, m->unk_len);
    *out = &m->base;
    return ATTN_STATUS_OK;
}

attn_status tok_wordpiece_from_parts(tok_vocab *vocab, const char *unk_token, size_t max_chars,
                                     const char *name, tok_model **out) {
    wp_model *m = NULL;
    attn_status s = wp_alloc("WordPiece", name, &m);
    if (s) {
        tok_vocab_free(vocab);
        return s;
    }
    m->base.vocab = *vocab;
    memset(vocab, 0, sizeof *vocab);
    m->unk_len = strlen(unk_token);
    m->unk = dup_n(unk_token, m->unk_len);
    m->prefix_len = 2;
    m->prefix = dup_n("##", 2);
    m->max_chars = max_chars;
    if (!m->unk || !m->prefix) {
        wp_destroy(&m->base);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    m->unk_id = tok_vocab_find(&m->base.vocab, m->unk, m->unk_len);
    *out = &m->base;
    return ATTN_STATUS_OK;
}

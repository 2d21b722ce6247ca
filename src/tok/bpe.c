/* bpe.c — the "BPE" model of tokenizer.json: parse, encode one pre-tokenized piece, save.
 *
 * model fields (all read; unknown extra fields are ignored, as the Python library does):
 *   type                       "BPE"
 *   dropout                    null (or 0): BPE-dropout is random, so it is refused otherwise
 *   unk_token                  null or a string (it must be in vocab once it is needed: with
 *                              byte_fallback and all 256 byte tokens present it never is)
 *   continuing_subword_prefix  null or a string put before every character but a piece's first
 *   end_of_word_suffix         null or a string put after a piece's last character
 *   fuse_unk                   bool (default false): consecutive unknowns become one unk_token
 *   byte_fallback              bool (default false): an unknown character becomes its UTF-8
 *                              bytes as "<0xHH>" tokens (uppercase hex), if all are in vocab
 *   ignore_merges              bool (default false): a piece that is itself in vocab is one token
 *   vocab                      {token: id}: ids unique, 0 <= id < 2^24
 *   merges                     [[A, B], ...] (tokenizers >= 0.20) or ["A B", ...] (one space);
 *                              rank = position; A, B and A + B[len(prefix):] must be in vocab.
 *                              A pair listed twice keeps its last rank, as a hash map insert does.
 *
 * Encoding a piece follows tokenizers' BPE::merge_word + Word::merge_all exactly: one symbol per
 * character (or per fallback byte, or per unk run), then repeatedly the lowest-rank merge,
 * leftmost first among equal ranks, using a binary heap with lazy invalidation. */
#include "tok-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    tok_model base;
    /* pair (a, b) -> (rank, new id), open addressing on key a << 32 | b */
    uint64_t *mkey;
    int32_t *mrank, *mnew;
    size_t mmask;
    size_t n_merges;
    int32_t *merge_list; /* (a, b) by rank, for saving; merges later overridden are kept */
    char *unk_token, *prefix, *suffix;
    size_t unk_len, prefix_len, suffix_len;
    bool fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_id[256]; /* id of "<0xHH>", -1 if absent */
} bpe_model;

#define MKEY_EMPTY UINT64_MAX

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static bool merge_find(const bpe_model *m, int32_t a, int32_t b, int32_t *rank, int32_t *nid) {
    if (!m->mkey) return false;
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = (size_t)mix64(k) & m->mmask;
    for (;;) {
        if (m->mkey[i] == MKEY_EMPTY) return false;
        if (m->mkey[i] == k) {
            *rank = m->mrank[i];
            *nid = m->mnew[i];
            return true;
        }
        i = (i + 1) & m->mmask;
    }
}

static void merge_insert(bpe_model *m, int32_t a, int32_t b, int32_t rank, int32_t nid) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = (size_t)mix64(k) & m->mmask;
    while (m->mkey[i] != MKEY_EMPTY && m->mkey[i] != k) i = (i + 1) & m->mmask;
    m->mkey[i] = k;
    m->mrank[i] = rank;
    m->mnew[i] = nid;
}

static void bpe_destroy(tok_model *base) {
    bpe_model *m = (bpe_model *)base;
    if (!m) return;
    tok_vocab_free(&m->base.vocab);
    free(m->mkey);
    free(m->mrank);
    free(m->mnew);
    free(m->merge_list);
    free(m->unk_token);
    free(m->prefix);
    free(m->suffix);
    free(m);
}

/* ---- encoding one piece ---- */

typedef struct {
    int32_t c;    /* token id */
    int32_t prev, next;
    size_t len;   /* bytes of input covered; 0 = merged away */
} bpe_sym;

typedef struct {
    int32_t rank, pos, nid;
} bpe_cand;

/* Min-heap on (rank, pos): HF's Merge ordering (lowest rank, then leftmost). */
static bool cand_less(const bpe_cand *x, const bpe_cand *y) {
    return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

typedef struct {
    bpe_cand *v;
    size_t n, cap;
} cand_heap;

static bool heap_push(cand_heap *h, bpe_cand c) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 32;
        bpe_cand *p = realloc(h->v, cap * sizeof *p);
        if (!p) return false;
        h->v = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_less(&c, &h->v[parent])) break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = c;
    return true;
}

static bpe_cand heap_pop(cand_heap *h) {
    bpe_cand top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        const bpe_cand *best = &last;
        if (l < h->n && cand_less(&h->v[l], best)) s = l, best = &h->v[l];
        if (r < h->n && cand_less(&h->v[r], best)) s = r;
        if (s == i) break;
        h->v[i] = h->v[s];
        i = s;
    }
    if (h->n) h->v[i] = last;
    return top;
}

typedef struct {
    bpe_sym *v;
    size_t n, cap;
} sym_vec;

static bool sym_add(sym_vec *w, int32_t c, size_t len) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 32;
        bpe_sym *p = realloc(w->v, cap * sizeof *p);
        if (!p) return false;
        w->v = p;
        w->cap = cap;
    }
    int32_t i = (int32_t)w->n;
    w->v[i] = (bpe_sym){c, i - 1, -1, len};
    if (i > 0) w->v[i - 1].next = i;
    w->n++;
    return true;
}

static attn_status bpe_encode_piece(const tok_model *base, const char *s, size_t n,
                                    tok_ivec *out) {
    const bpe_model *m = (const bpe_model *)base;
    const tok_vocab *V = &m->base.vocab;
    if (n == 0) return ATTN_STATUS_OK;
    if (n > INT32_MAX / 2)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "encode: a piece of %zu bytes is too long", n);
    if (m->ignore_merges) {
        int32_t id = tok_vocab_find(V, s, n);
        if (id >= 0) {
            if (!tok_ivec_push(out, id)) goto oom;
            return ATTN_STATUS_OK;
        }
    }
    attn_status st = ATTN_STATUS_OK;
    sym_vec w = {0};
    cand_heap h = {0};
    tok_buf tmp = {0}; /* a character with prefix/suffix attached */
    bool have_unk = false;
    int32_t unk_id = -1;
    size_t unk_len = 0;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = tok_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (!k) k = 1; /* cannot happen: text was validated; stay safe */
        bool first = i == 0, last = i + k == n;
        const char *cs = s + i;
        size_t cl = k;
        /* an empty prefix or suffix ("" in GPT-2-style files) is the same as none */
        if ((!first && m->prefix_len) || (last && m->suffix_len)) {
            tmp.n = 0;
            if (!first) tok_buf_put(&tmp, m->prefix, m->prefix_len);
            tok_buf_put(&tmp, s + i, k);
            if (last) tok_buf_put(&tmp, m->suffix, m->suffix_len);
            if (tmp.oom) goto oom_free;
            cs = tmp.p;
            cl = tmp.n;
        }
        int32_t id = tok_vocab_find(V, cs, cl);
        if (id >= 0) {
            if (have_unk) {
                if (!sym_add(&w, unk_id, unk_len)) goto oom_free;
                have_unk = false;
            }
            if (!sym_add(&w, id, k)) goto oom_free;
        } else {
            bool done = false;
            if (m->byte_fallback) {
                /* All bytes must have a token, else fall through to unk (as HF does). Note
                 * that a pending unk is not flushed first: HF's order, kept on purpose. */
                bool all = true;
                for (size_t j = 0; j < cl; j++)
                    if (m->byte_id[(unsigned char)cs[j]] < 0) all = false;
                if (all) {
                    for (size_t j = 0; j < cl; j++)
                        if (!sym_add(&w, m->byte_id[(unsigned char)cs[j]], 1)) goto oom_free;
                    done = true;
                }
            }
            if (!done && m->unk_token) {
                int32_t u = tok_vocab_find(V, m->unk_token, m->unk_len);
                if (u < 0) {
                    char q[64];
                    st = attn_fail(ATTN_STATUS_FORMAT,
                                   "encode: model.unk_token %s is not in model.vocab",
                                   tok_quote(q, sizeof q, m->unk_token, m->unk_len));
                    goto done;
                }
                if (have_unk && m->fuse_unk) {
                    unk_len += k;
                } else {
                    if (have_unk && !sym_add(&w, unk_id, unk_len)) goto oom_free;
                    have_unk = true;
                    unk_id = u;
                    unk_len = k;
                }
            }
            /* no byte token, no unk_token: the character is dropped (HF's behaviour) */
        }
        i += k;
    }
    if (have_unk && !sym_add(&w, unk_id, unk_len)) goto oom_free;

    /* merge_all */
    for (size_t j = 0; j + 1 < w.n; j++) {
        int32_t rank, nid;
        if (merge_find(m, w.v[j].c, w.v[j + 1].c, &rank, &nid))
            if (!heap_push(&h, (bpe_cand){rank, (int32_t)j, nid})) goto oom_free;
    }
    while (h.n) {
        bpe_cand top = heap_pop(&h);
        bpe_sym *cur = &w.v[top.pos];
        if (cur->len == 0 || cur->next < 0) continue;
        int32_t nx = cur->next;
        int32_t rank, nid;
        if (!merge_find(m, cur->c, w.v[nx].c, &rank, &nid) || nid != top.nid) continue;
        cur->c = top.nid;
        cur->len += w.v[nx].len;
        cur->next = w.v[nx].next;
        w.v[nx].len = 0;
        if (cur->next >= 0) w.v[cur->next].prev = top.pos;
        if (cur->prev >= 0 && merge_find(m, w.v[cur->prev].c, cur->c, &rank, &nid))
            if (!heap_push(&h, (bpe_cand){rank, cur->prev, nid})) goto oom_free;
        if (cur->next >= 0 && merge_find(m, cur->c, w.v[cur->next].c, &rank, &nid))
            if (!heap_push(&h, (bpe_cand){rank, top.pos, nid})) goto oom_free;
    }
    for (size_t j = 0; j < w.n; j++)
        if (w.v[j].len && !tok_ivec_push(out, w.v[j].c)) goto oom_free;
    goto done;
oom_free:
    st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encode: out of memory");
done:
    free(w.v);
    free(h.v);
    tok_buf_free(&tmp);
    return st;
oom:
    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encode: out of memory");
}

/* ---- saving ---- */

static void put_opt_str(tok_buf *b, const char *key, const char *s, size_t n) {
    tok_buf_printf(b, "    \"%s\": ", key);
    if (s)
        tok_buf_json_str(b, s, n);
    else
        tok_buf_puts(b, "null");
    tok_buf_puts(b, ",\n");
}

static void bpe_save(const tok_model *base, tok_buf *b) {
    const bpe_model *m = (const bpe_model *)base;
    const tok_vocab *V = &m->base.vocab;
    tok_buf_puts(b, "{\n    \"type\": \"BPE\",\n    \"dropout\": null,\n");
    put_opt_str(b, "unk_token", m->unk_token, m->unk_len);
    put_opt_str(b, "continuing_subword_prefix", m->prefix, m->prefix_len);
    put_opt_str(b, "end_of_word_suffix", m->suffix, m->suffix_len);
    tok_buf_printf(b, "    \"fuse_unk\": %s,\n    \"byte_fallback\": %s,\n"
                      "    \"ignore_merges\": %s,\n    \"vocab\": {",
                   m->fuse_unk ? "true" : "false", m->byte_fallback ? "true" : "false",
                   m->ignore_merges ? "true" : "false");
    bool first = true;
    for (int32_t id = 0; id < V->n; id++) {
        if (!V->str[id]) continue;
        tok_buf_puts(b, first ? "\n      " : ",\n      ");
        first = false;
        tok_buf_json_str(b, V->str[id], V->len[id]);
        tok_buf_printf(b, ": %ld", (long)id);
    }
    tok_buf_puts(b, first ? "},\n    \"merges\": [" : "\n    },\n    \"merges\": [");
    for (size_t r = 0; r < m->n_merges; r++) {
        int32_t a = m->merge_list[2 * r], c = m->merge_list[2 * r + 1];
        tok_buf_puts(b, r ? ",\n      [" : "\n      [");
        tok_buf_json_str(b, V->str[a], V->len[a]);
        tok_buf_puts(b, ", ");
        tok_buf_json_str(b, V->str[c], V->len[c]);
        tok_buf_putc(b, ']');
    }
    tok_buf_puts(b, m->n_merges ? "\n    ]\n  }" : "]\n  }");
}

/* ---- construction ---- */

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static attn_status bpe_alloc(bpe_model **out) {
    bpe_model *m = calloc(1, sizeof *m);
    if (!m) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "BPE model: out of memory");
    m->base.type = "BPE";
    m->base.encode_piece = bpe_encode_piece;
    m->base.save = bpe_save;
    m->base.destroy = bpe_destroy;
    *out = m;
    return ATTN_STATUS_OK;
}

static attn_status alloc_merges(bpe_model *m, size_t n) {
    size_t cap = 16;
    while (cap < n * 2 + 2) cap *= 2;
    m->mkey = malloc(cap * sizeof *m->mkey);
    m->mrank = malloc(cap * sizeof *m->mrank);
    m->mnew = malloc(cap * sizeof *m->mnew);
    m->merge_list = malloc((n ? n : 1) * 2 * sizeof *m->merge_list);
    if (!m->mkey || !m->mrank || !m->mnew || !m->merge_list)
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "BPE model: out of memory for %zu merges",
                         n);
    memset(m->mkey, 0xff, cap * sizeof *m->mkey);
    m->mmask = cap - 1;
    return ATTN_STATUS_OK;
}

static void find_byte_ids(bpe_model *m) {
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        m->byte_id[b] = tok_vocab_find(&m->base.vocab, name, 6);
    }
}

/* Record merge r = (a, b) after checking that the merged token exists. */
static attn_status add_merge(bpe_model *m, size_t r, int32_t a, int32_t b, const char *name) {
    const tok_vocab *V = &m->base.vocab;
    size_t blen = V->len[b];
    char q[64];
    if (m->prefix_len > blen)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: model.merges[%zu]: %s is shorter than continuing_subword_prefix",
                         name, r, tok_quote(q, sizeof q, V->str[b], blen));
    tok_buf t = {0};
    tok_buf_put(&t, V->str[a], V->len[a]);
    tok_buf_put(&t, V->str[b] + m->prefix_len, blen - m->prefix_len);
    if (t.oom) {
        tok_buf_free(&t);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    int32_t nid = tok_vocab_find(V, t.p, t.n);
    if (nid < 0) {
        attn_status s = attn_fail(ATTN_STATUS_FORMAT,
                                  "%s: model.merges[%zu]: merged token %s is not in "
                                  "model.vocab",
                                  name, r, tok_quote(q, sizeof q, t.p, t.n));
        tok_buf_free(&t);
        return s;
    }
    tok_buf_free(&t);
    merge_insert(m, a, b, (int32_t)r, nid);
    m->merge_list[2 * r] = a;
    m->merge_list[2 * r + 1] = b;
    return ATTN_STATUS_OK;
}

attn_status tok_bpe_from_parts(tok_vocab *vocab, const int32_t *merges, size_t n_merges,
                               const tok_bpe_options *opt, tok_model **out) {
    bpe_model *m = NULL;
    attn_status s = bpe_alloc(&m);
    if (s) {
        tok_vocab_free(vocab);
        return s;
    }
    m->base.vocab = *vocab;
    memset(vocab, 0, sizeof *vocab);
    m->byte_fallback = opt->byte_fallback;
    m->fuse_unk = opt->fuse_unk;
    m->ignore_merges = opt->ignore_merges;
    if (opt->unk_token) {
        m->unk_len = strlen(opt->unk_token);
        m->unk_token = dup_n(opt->unk_token, m->unk_len);
        if (!m->unk_token) {
            bpe_destroy(&m->base);
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "BPE model: out of memory");
        }
    }
    s = alloc_merges(m, n_merges);
    for (size_t r = 0; !s && r < n_merges; r++)
        s = add_merge(m, r, merges[2 * r], merges[2 * r + 1], "trainer");
    if (s) {
        bpe_destroy(&m->base);
        return s;
    }
    m->n_merges = n_merges;
    find_byte_ids(m);
    *out = &m->base;
    return ATTN_STATUS_OK;
}

/* An optional string field: absent or null -> *dst stays NULL. */
static attn_status opt_string(json_t *obj, const char *key, const char *name, char **dst,
                              size_t *len) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return ATTN_STATUS_OK;
    if (!json_is_string(v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: model.%s: expected a string or null", name,
                         key);
    *len = json_string_length(v);
    char path[64];
    snprintf(path, sizeof path, "model.%s", key);
    attn_status st = tok_no_nul(json_string_value(v), *len, name, path);
    if (st) return st;
    *dst = dup_n(json_string_value(v), *len);
    if (!*dst) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    return ATTN_STATUS_OK;
}

static attn_status opt_bool(json_t *obj, const char *key, const char *name, bool *dst) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return ATTN_STATUS_OK;
    if (!json_is_boolean(v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: model.%s: expected true or false", name, key);
    *dst = json_is_true(v);
    return ATTN_STATUS_OK;
}

/* One merge entry: ["A", "B"] or "A B". Gives pointers into the JSON (valid while it lives). */
static attn_status merge_parts(json_t *e, size_t r, const char *name, const char **a,
                               size_t *alen, const char **b, size_t *blen) {
    for (size_t k = 0; k < 3; k++) { /* the entry, or its two parts: no NUL (tok_no_nul) */
        json_t *x = k == 2 ? e : json_array_get(e, k);
        if (json_is_string(x) && memchr(json_string_value(x), 0, json_string_length(x))) {
            char path[64];
            snprintf(path, sizeof path, "model.merges[%zu]", r);
            return tok_no_nul(json_string_value(x), json_string_length(x), name, path);
        }
    }
    if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
        json_is_string(json_array_get(e, 1))) {
        *a = json_string_value(json_array_get(e, 0));
        *alen = json_string_length(json_array_get(e, 0));
        *b = json_string_value(json_array_get(e, 1));
        *blen = json_string_length(json_array_get(e, 1));
        return ATTN_STATUS_OK;
    }
    if (json_is_string(e)) {
        const char *s = json_string_value(e);
        size_t n = json_string_length(e);
        const char *sp = memchr(s, ' ', n);
        if (sp && !memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s))) {
            *a = s;
            *alen = (size_t)(sp - s);
            *b = sp + 1;
            *blen = n - *alen - 1;
            return ATTN_STATUS_OK;
        }
    }
    return attn_fail(ATTN_STATUS_FORMAT,
                     "%s: model.merges[%zu]: expected [\"A\", \"B\"] or \"A B\" (one space)",
                     name, r);
}

attn_status tok_bpe_from_json(json_t *model, const char *name, tok_model **out) {
    bpe_model *m = NULL;
    attn_status s = bpe_alloc(&m);
    if (s) return s;
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) &&
        !(json_is_number(dropout) && json_number_value(dropout) == 0.0)) {
        s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                      "%s: model.dropout: BPE-dropout (random merges) is not supported; "
                      "expected null",
                      name);
        goto fail;
    }
    if ((s = opt_string(model, "unk_token", name, &m->unk_token, &m->unk_len)) ||
        (s = opt_string(model, "continuing_subword_prefix", name, &m->prefix, &m->prefix_len)) ||
        (s = opt_string(model, "end_of_word_suffix", name, &m->suffix, &m->suffix_len)) ||
        (s = opt_bool(model, "fuse_unk", name, &m->fuse_unk)) ||
        (s = opt_bool(model, "byte_fallback", name, &m->byte_fallback)) ||
        (s = opt_bool(model, "ignore_merges", name, &m->ignore_merges)))
        goto fail;

    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab)) {
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: model.vocab: %s", name,
                      vocab ? "expected an object {token: id}" : "missing");
        goto fail;
    }
    /* First pass: check ids and find the largest. */
    int32_t max_id = -1;
    const char *key;
    json_t *val;
    char q[64], q2[64];
    json_object_foreach(vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0) {
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: model.vocab[%s]: expected a non-negative integer id", name,
                          tok_quote(q, sizeof q, key, strlen(key)));
            goto fail;
        }
        if (json_integer_value(val) > TOK_MAX_ID) {
            s = attn_fail(ATTN_STATUS_TOO_LARGE, "%s: model.vocab[%s]: id %lld is too large (max %ld)",
                          name, tok_quote(q, sizeof q, key, strlen(key)),
                          (long long)json_integer_value(val), (long)TOK_MAX_ID);
            goto fail;
        }
        if ((int32_t)json_integer_value(val) > max_id) max_id = (int32_t)json_integer_value(val);
    }
    if ((s = tok_vocab_init(&m->base.vocab, max_id + 1))) goto fail;
    void *it = json_object_iter(vocab);
    for (; it; it = json_object_iter_next(vocab, it)) {
        key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        int32_t id = (int32_t)json_integer_value(json_object_iter_value(it));
        int r = tok_vocab_set(&m->base.vocab, id, key, klen);
        if (r == 1) {
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: model.vocab: id %ld is given to %s and %s",
                          name, (long)id,
                          tok_quote(q, sizeof q, m->base.vocab.str[id], m->base.vocab.len[id]),
                          tok_quote(q2, sizeof q2, key, klen));
            goto fail;
        }
        if (r) {
            s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: model.vocab: out of memory", name);
            goto fail;
        }
    }

    json_t *merges = json_object_get(model, "merges");
    if (merges && !json_is_array(merges)) {
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: model.merges: expected an array", name);
        goto fail;
    }
    size_t nm = merges ? json_array_size(merges) : 0;
    if ((s = alloc_merges(m, nm))) goto fail;
    for (size_t r = 0; r < nm; r++) {
        const char *a = NULL, *b = NULL;
        size_t alen = 0, blen = 0;
        if ((s = merge_parts(json_array_get(merges, r), r, name, &a, &alen, &b, &blen)))
            goto fail;
        int32_t ia = tok_vocab_find(&m->base.vocab, a, alen);
        int32_t ib = tok_vocab_find(&m->base.vocab, b, blen);
        if (ia < 0 || ib < 0) {
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: model.merges[%zu]: token %s is not in model.vocab",
                          name, r, tok_quote(q, sizeof q, ia < 0 ? a : b, ia < 0 ? alen : blen));
            goto fail;
        }
        if ((s = add_merge(m, r, ia, ib, name))) goto fail;
    }
    m->n_merges = nm;
    find_byte_ids(m);
    *out = &m->base;
    return ATTN_STATUS_OK;
fail:
    bpe_destroy(&m->base);
    return s;
}

/* unigram.c — the Unigram model of tokenizer.json (SentencePiece's unigram language model, as
 * tokenizers 0.21 runs it): {"type": "Unigram", "unk_id": null|N, "vocab": [[piece, score], ...],
 * "byte_fallback": b}. A piece is split by Viterbi over the pieces that start at each character
 * (in order of increasing length; a later candidate replaces the best path into a position only
 * with a strictly higher score, f64 sums), with an unknown-character node of score
 * min_score - 10 wherever no one-character piece starts; consecutive unknown nodes are fused into
 * one token. A token outside the vocabulary (only fused unknowns) is its bytes "<0xHH>" when
 * byte_fallback and all of them are in the vocabulary, else unk_id. */
#include "tok-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNK_PENALTY 10.0

typedef struct {
    tok_model base;
    double *score;     /* by id */
    int32_t unk_id;    /* -1: none */
    bool byte_fallback;
    double min_score;
    size_t max_len;    /* longest piece in bytes */
    uint8_t first[32]; /* bit set: a piece starts with this byte */
} ug_model;

typedef struct {
    double score;
    int32_t id;
    size_t from; /* SIZE_MAX: not reached */
} ug_node;

static attn_status ug_encode_piece(const tok_model *base, const char *s, size_t n,
                                   tok_ivec *out) {
    const ug_model *m = (const ug_model *)base;
    if (!n) return ATTN_STATUS_OK;
    ug_node *best = malloc((n + 1) * sizeof *best);
    if (!best) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "Unigram: out of memory");
    for (size_t i = 0; i <= n; i++) best[i] = (ug_node){0.0, -1, SIZE_MAX};
    const double unk_score = m->min_score - UNK_PENALTY;
    attn_status st = ATTN_STATUS_OK;
    for (size_t at = 0; at < n && !st;) {
        uint32_t cp;
        size_t mblen = tok_utf8_decode((const unsigned char *)s + at, n - at, &cp);
        if (!mblen) mblen = 1; /* text is valid UTF-8; defensive */
        const double here = best[at].score;
        bool single = false;
        unsigned char c0 = (unsigned char)s[at];
        if (m->first[c0 >> 3] & (1u << (c0 & 7))) {
            for (size_t len = 1; len <= m->max_len && at + len <= n; len++) {
                if (at + len < n && ((unsigned char)s[at + len] & 0xc0) == 0x80) continue;
                int32_t id = tok_vocab_find(&m->base.vocab, s + at, len);
                if (id < 0) continue;
                ug_node *tn = &best[at + len];
                double cand = m->score[id] + here;
                if (tn->from == SIZE_MAX || cand > tn->score) *tn = (ug_node){cand, id, at};
                if (len == mblen) single = true;
            }
        }
        if (!single) {
            if (m->unk_id < 0) {
                st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                               "Unigram: a character has no piece and the model has no unk_id");
                break;
            }
            ug_node *tn = &best[at + mblen];
            double cand = unk_score + here;
            if (tn->from == SIZE_MAX || cand > tn->score) *tn = (ug_node){cand, m->unk_id, at};
        }
        at += mblen;
    }
    /* back from the end: tokens [a, b) in reverse order, consecutive unknowns fused */
    size_t *cut = NULL, nc = 0; /* pairs (a, b) */
    if (!st) {
        cut = malloc((2 * n + 2) * sizeof *cut);
        if (!cut) st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "Unigram: out of memory");
    }
    bool prev_unk = false;
    for (size_t end = n; !st && end > 0;) {
        const ug_node *nd = &best[end];
        bool unk = m->unk_id >= 0 && nd->id == m->unk_id;
        if (unk && prev_unk) {
            cut[2 * (nc - 1)] = nd->from;
        } else {
            cut[2 * nc] = nd->from, cut[2 * nc + 1] = end;
            nc++;
        }
        prev_unk = unk;
        end = nd->from;
    }
    for (size_t i = nc; i-- > 0 && !st;) {
        size_t a = cut[2 * i], b = cut[2 * i + 1];
        int32_t id = tok_vocab_find(&m->base.vocab, s + a, b - a);
        if (id < 0 && m->byte_fallback) {
            size_t k0 = out->n;
            bool all = true;
            for (size_t k = a; k < b && all && !st; k++) {
                char bt[8];
                snprintf(bt, sizeof bt, "<0x%02X>", (unsigned char)s[k]);
                int32_t bid = tok_vocab_find(&m->base.vocab, bt, 6);
                if (bid < 0)
                    all = false;
                else if (!tok_ivec_push(out, bid))
                    st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "Unigram: out of memory");
            }
            if (all || st) continue;
            out->n = k0;
        }
        if (id < 0) id = m->unk_id;
        if (id < 0)
            st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "Unigram: missing unk_id");
        else if (!tok_ivec_push(out, id))
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "Unigram: out of memory");
    }
    free(cut);
    free(best);
    return st;
}

static void ug_save(const tok_model *base, tok_buf *b) {
    const ug_model *m = (const ug_model *)base;
    tok_buf_puts(b, "{\n    \"type\": \"Unigram\",\n    \"unk_id\": ");
    if (m->unk_id < 0) tok_buf_puts(b, "null");
    else tok_buf_printf(b, "%ld", (long)m->unk_id);
    tok_buf_puts(b, ",\n    \"vocab\": [");
    for (int32_t i = 0; i < m->base.vocab.n; i++) {
        tok_buf_puts(b, i ? ", [" : "[");
        tok_buf_json_str(b, m->base.vocab.str[i], m->base.vocab.len[i]);
        char num[40];
        snprintf(num, sizeof num, "%.17g", m->score[i]);
        if (!strpbrk(num, ".eEn")) strcat(num, ".0"); /* a float, as serde writes it */
        tok_buf_printf(b, ", %s]", num);
    }
    tok_buf_printf(b, "],\n    \"byte_fallback\": %s\n  }", m->byte_fallback ? "true" : "false");
}

static void ug_destroy(tok_model *base) {
    ug_model *m = (ug_model *)base;
    tok_vocab_free(&m->base.vocab);
    free(m->score);
    free(m);
}

attn_status tok_unigram_from_json(json_t *model, const char *name, tok_model **out) {
    *out = NULL;
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_array(vocab))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: model.vocab: %s", name,
                         vocab ? "expected an array of [piece, score]" : "missing");
    size_t n = json_array_size(vocab);
    if (n == 0) return attn_fail(ATTN_STATUS_FORMAT, "%s: model.vocab: empty", name);
    if (n > (size_t)TOK_MAX_ID + 1)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: model.vocab: %zu pieces is too many", name, n);
    static const char *const known[] = {"type", "unk_id", "vocab", "byte_fallback"};
    const char *key;
    json_t *val;
    json_object_foreach(model, key, val) {
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(key, known[k])) k++;
        if (k == sizeof known / sizeof known[0]) {
            char q[64];
            return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: model.%s: unknown Unigram field", name,
                             tok_quote(q, sizeof q, key, strlen(key)));
        }
    }
    ug_model *m = calloc(1, sizeof *m);
    if (!m) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    m->base.type = "Unigram";
    m->base.encode_piece = ug_encode_piece;
    m->base.save = ug_save;
    m->base.destroy = ug_destroy;
    m->unk_id = -1;
    m->min_score = INFINITY;
    attn_status st = tok_vocab_init(&m->base.vocab, (int32_t)n);
    if (!st && !(m->score = malloc(n * sizeof *m->score)))
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    for (size_t i = 0; i < n && !st; i++) {
        json_t *e = json_array_get(vocab, i);
        json_t *p = json_array_get(e, 0), *sc = json_array_get(e, 1);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(p) ||
            !json_is_number(sc)) {
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: model.vocab[%zu]: expected [piece, score]",
                           name, i);
            break;
        }
        const char *s = json_string_value(p);
        size_t sl = json_string_length(p);
        char field[64];
        snprintf(field, sizeof field, "model.vocab[%zu]", i);
        if ((st = tok_no_nul(s, sl, name, field))) break;
        double v = json_number_value(sc);
        if (!isfinite(v)) {
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: model.vocab[%zu]: score is not finite", name, i);
            break;
        }
        int r = tok_vocab_set(&m->base.vocab, (int32_t)i, s, sl);
        if (r == 2) {
            char q[64];
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: model.vocab[%zu]: %s is listed twice", name, i,
                           tok_quote(q, sizeof q, s, sl));
        } else if (r) {
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
        }
        m->score[i] = v;
        if (v < m->min_score) m->min_score = v;
        if (sl > m->max_len) m->max_len = sl;
        if (sl) m->first[(unsigned char)s[0] >> 3] |= (uint8_t)(1u << ((unsigned char)s[0] & 7));
    }
    json_t *unk = json_object_get(model, "unk_id");
    if (!st && unk && !json_is_null(unk)) {
        if (!json_is_integer(unk) || json_integer_value(unk) < 0 ||
            json_integer_value(unk) >= (json_int_t)n)
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: model.unk_id: expected null or an id in "
                                               "0..%zu",
                           name, n - 1);
        else
            m->unk_id = (int32_t)json_integer_value(unk);
    }
    json_t *bf = json_object_get(model, "byte_fallback");
    if (!st && bf && !json_is_null(bf)) {
        if (!json_is_boolean(bf))
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: model.byte_fallback: expected true or false",
                           name);
        else
            m->byte_fallback = json_is_true(bf);
    }
    if (st) {
        ug_destroy(&m->base);
        return st;
    }
    *out = &m->base;
    return ATTN_STATUS_OK;
}

/* mlm.c — masked-LM sentences for BERT pre-training (include/attn_data.h, attn_data_mlm_): the
 * lines of a text file tokenized once, a seeded validation split, a shuffled order per epoch and
 * masked, padded batches. Every choice is a counter-based function of (seed, epoch, sentence), so
 * a resumed run needs only (epoch, batch) to see the same batches; tools/ref_bert_train.py
 * re-implements the masking. */
#include "data-impl.h"

#include "attn_bert.h"
#include "attn_embed.h"
#include "attn_train.h"

#include <stdlib.h>
#include <string.h>

/* Stream keys SplitMix64(seed ^ KEY_...): the ASCII letters as big-endian integers. */
#define KEY_SHUFFLE 0x73687566666c65ull /* "shuffle" */
#define KEY_VALID 0x76616c6964ull       /* "valid" */
#define VALID_EPOCH ((1u << 24) - 1)    /* the validation set's fixed masks: the last epoch
                                           attn_embed_mlm_mask takes, reserved */
#define MAX_SENTENCES ((size_t)1 << 28) /* attn_embed_mlm_mask's example limit */

static uint64_t key_of(uint64_t seed, uint64_t purpose) {
    return attn_data__mix((seed ^ purpose) + 0x9E3779B97F4A7C15ull);
}

/* ---- sentences ------------------------------------------------------------------------------ */

attn_data_text_options attn_data_text_default_options(void) {
    attn_data_text_options o = {.column = 0, .max_len = 128};
    return o;
}

void attn_data_sentences_free(attn_data_sentences *s) {
    if (!s) return;
    free(s->ids);
    free(s->off);
    memset(s, 0, sizeof *s);
}

/* The line buf[*b .. *e) narrowed to its TAB-separated field `column` (>= 1); false when it has
 * fewer (*cols of them). */
static bool pick_column(const char *buf, size_t *b, size_t *e, int column, int *cols) {
    int col = 1;
    size_t cb = *b;
    for (size_t k = *b; k < *e && col < column; k++)
        if (buf[k] == '\t') col++, cb = k + 1;
    *cols = col;
    if (col < column) return false;
    size_t ce = cb;
    while (ce < *e && buf[ce] != '\t') ce++;
    *b = cb, *e = ce;
    return true;
}

attn_status attn_data_load_sentences(const char *path, const attn_tok *tok,
                                     const attn_data_text_options *opt, attn_data_sentences *c) {
    if (!c) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: load_sentences: out is NULL");
    memset(c, 0, sizeof *c);
    if (!path || !tok)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: load_sentences: NULL argument");
    attn_data_text_options o = opt ? *opt : attn_data_text_default_options();
    if (o.column < 0 || o.max_len < 3)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: load_sentences: column %d (>= 0) or max_len %d (>= 3) out of range",
                         o.column, o.max_len);
    char *buf = NULL;
    size_t len = 0;
    attn_status s = attn_data_read_file(path, &buf, &len);
    if (s) return s;
    /* lines -> (text, length) of the chosen column */
    size_t nl = 0;
    for (size_t i = 0; i < len; i++) nl += buf[i] == '\n';
    if (len && buf[len - 1] != '\n') nl++;
    const char **txt = malloc((nl ? nl : 1) * sizeof *txt);
    size_t *tl = malloc((nl ? nl : 1) * sizeof *tl);
    size_t cap_ids = 1 << 16;
    attn_tok_encoding *enc = NULL;
    c->ids = malloc(cap_ids * sizeof *c->ids);
    c->off = malloc((nl + 1) * sizeof *c->off);
    if (!txt || !tl || !c->ids || !c->off) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    size_t start = 0, li = 0;
    for (size_t i = 0; i <= len && li < nl; i++) {
        if (i < len && buf[i] != '\n') continue;
        size_t b = start, e = i;
        start = i + 1;
        if (e > b && buf[e - 1] == '\r') e--;
        size_t bad = attn_embed_utf8_check(buf + b, e - b);
        if (bad < e - b) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "%s:%zu: invalid UTF-8 at byte %zu (0x%02X)", path, li + 1, bad + 1,
                          (unsigned)(unsigned char)buf[b + bad]);
            goto done;
        }
        int cols;
        if (o.column > 0 && !pick_column(buf, &b, &e, o.column, &cols)) {
            s = attn_fail(ATTN_STATUS_FORMAT, "%s:%zu: no column %d (the line has %d)", path,
                          li + 1, o.column, cols);
            goto done;
        }
        txt[li] = buf + b, tl[li] = e - b;
        li++;
    }
    c->n_lines = nl;
    attn_tok_encode_params tp = attn_tok_encode_default_params();
    tp.add_special_tokens = true;
    tp.truncation = ATTN_TOK_TRUNCATE_LONGEST_FIRST;
    tp.max_length = (size_t)o.max_len;
    enum { CHUNK = 4096 };
    enc = calloc(CHUNK, sizeof *enc);
    if (!enc) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    c->off[0] = 0;
    for (size_t at = 0; at < nl && !s; at += CHUNK) {
        size_t k = nl - at < CHUNK ? nl - at : CHUNK;
        s = attn_tok_encode_batch(tok, k, txt + at, tl + at, NULL, NULL, &tp, enc);
        if (s) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            s = attn_fail(s, "%s: %s", path, msg);
            break;
        }
        for (size_t i = 0; i < k && !s; i++) {
            size_t real = 0;
            for (size_t t = 0; t < enc[i].n; t++) real += !enc[i].special_mask[t];
            if (real == 0) continue; /* nothing to predict: skipped */
            if (c->tokens + enc[i].n > cap_ids) {
                while (c->tokens + enc[i].n > cap_ids) cap_ids *= 2;
                int32_t *ni = realloc(c->ids, cap_ids * sizeof *ni);
                if (!ni) {
                    s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
                    break;
                }
                c->ids = ni;
            }
            memcpy(c->ids + c->tokens, enc[i].ids, enc[i].n * sizeof *c->ids);
            c->tokens += enc[i].n;
            c->off[++c->n] = c->tokens;
        }
        for (size_t i = 0; i < k; i++) attn_tok_encoding_free(&enc[i]);
    }
    if (!s && c->n == 0)
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: no line has a token to train on", path);
done:
    free(enc);
    free(txt);
    free(tl);
    free(buf);
    if (s) attn_data_sentences_free(c);
    return s;
}

/* ---- masked batches ------------------------------------------------------------------------- */

struct attn_data_mlm {
    const attn_data_sentences *s;
    attn_data_mlm_options o;
    uint32_t *train, *valid; /* (n_train), (n_valid) sentence indices, ascending */
    size_t n_train, n_valid;
    uint32_t *perm;          /* (n_train) the order of epoch perm_epoch */
    int64_t perm_epoch;      /* -1: none yet */
    uint8_t *no_mask;        /* (V) the tokenizer's special ids */
    attn_embed_mlm_params mp;
};

attn_data_mlm_options attn_data_mlm_default_options(void) {
    attn_embed_mlm_params p = attn_embed_mlm_default_params();
    attn_data_mlm_options o = {.seed = 1,
                               .valid_size = SIZE_MAX,
                               .batch = 32,
                               .mlm_probability = p.mlm_probability,
                               .mask_fraction = p.mask_fraction,
                               .random_fraction = p.random_fraction};
    return o;
}

void attn_data_mlm_free(attn_data_mlm *m) {
    if (!m) return;
    free(m->train);
    free(m->valid);
    free(m->perm);
    free(m->no_mask);
    free(m);
}

attn_status attn_data_mlm_new(const attn_data_sentences *s, const attn_tok *tok,
                              const attn_data_mlm_options *opt, attn_data_mlm **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: mlm_new: out is NULL");
    *out = NULL;
    if (!s || !tok || !opt || !s->off || (s->n && !s->ids))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: mlm_new: NULL argument");
    const attn_data_mlm_options o = *opt;
    if (o.batch < 1 || !(o.mlm_probability > 0 && o.mlm_probability <= 1) ||
        !(o.mask_fraction >= 0 && o.random_fraction >= 0 &&
          o.mask_fraction + o.random_fraction <= 1))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: mlm_new: batch %d (>= 1), mlm_probability %g (in (0, 1]), mask "
                         "%g and random %g fractions (>= 0, sum <= 1) out of range",
                         o.batch, (double)o.mlm_probability, (double)o.mask_fraction,
                         (double)o.random_fraction);
    const size_t n = s->n;
    if (n == 0) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: mlm_new: no sentences");
    if (n >= MAX_SENTENCES)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "data: %zu sentences (at most 2^28)", n);
    const int32_t mask_id = attn_tok_special_id(tok, ATTN_TOK_MASK);
    if (mask_id < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "the tokenizer has no [MASK] token");
    size_t nv = o.valid_size != SIZE_MAX ? o.valid_size : (n / 20 < 500 ? n / 20 : 500);
    if (nv >= n)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: %zu validation sentences leave none to train on (%zu in all)",
                         nv, n);
    attn_data_mlm *m = calloc(1, sizeof *m);
    uint32_t *perm = malloc(n * sizeof *perm);
    uint8_t *is_valid = calloc(n, 1);
    const int32_t V = attn_tok_vocab_size(tok);
    if (m) {
        m->train = malloc((n - nv) * sizeof *m->train);
        m->valid = malloc((nv ? nv : 1) * sizeof *m->valid);
        m->perm = malloc((n - nv) * sizeof *m->perm);
        m->no_mask = calloc(V > 0 ? (size_t)V : 1, 1);
    }
    if (!m || !perm || !is_valid || !m->train || !m->valid || !m->perm || !m->no_mask) {
        free(perm);
        free(is_valid);
        attn_data_mlm_free(m);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: mlm_new: out of memory");
    }
    m->s = s;
    m->o = o;
    /* the held-out sentences: the first nv of a seeded permutation of all */
    for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    attn_rng rng;
    attn_rng_init(&rng, key_of(o.seed, KEY_VALID));
    if (nv) attn_rng_shuffle(&rng, perm, n);
    for (size_t i = 0; i < nv; i++) is_valid[perm[i]] = 1;
    for (size_t i = 0; i < n; i++) {
        if (is_valid[i]) m->valid[m->n_valid++] = (uint32_t)i;
        else m->train[m->n_train++] = (uint32_t)i;
    }
    free(perm);
    free(is_valid);
    m->perm_epoch = -1;
    for (int32_t i = 0; i < V; i++) m->no_mask[i] = attn_tok_is_special(tok, i);
    m->mp = attn_embed_mlm_default_params();
    m->mp.mlm_probability = o.mlm_probability;
    m->mp.mask_fraction = o.mask_fraction;
    m->mp.random_fraction = o.random_fraction;
    m->mp.mask_id = mask_id;
    m->mp.vocab_size = V;
    m->mp.no_mask = m->no_mask;
    *out = m;
    return ATTN_STATUS_OK;
}

size_t attn_data_mlm_num_train(const attn_data_mlm *m) { return m ? m->n_train : 0; }
size_t attn_data_mlm_num_valid(const attn_data_mlm *m) { return m ? m->n_valid : 0; }
size_t attn_data_mlm_train_batches(const attn_data_mlm *m) {
    return m ? (m->n_train + (size_t)m->o.batch - 1) / (size_t)m->o.batch : 0;
}
size_t attn_data_mlm_valid_batches(const attn_data_mlm *m) {
    return m ? (m->n_valid + (size_t)m->o.batch - 1) / (size_t)m->o.batch : 0;
}
const uint32_t *attn_data_mlm_valid_examples(const attn_data_mlm *m) { return m ? m->valid : NULL; }

void attn_data_mlm_batch_free(attn_data_mlm_batch *b) {
    if (!b) return;
    free(b->ids);
    free(b->labels);
    free(b->len);
    free(b->example);
    memset(b, 0, sizeof *b);
}

/* Sentences ex[0..B) masked for `epoch` into b, padded to the longest. */
static attn_status fill(const attn_data_mlm *m, const uint32_t *ex, int B, uint64_t epoch,
                        attn_data_mlm_batch *b) {
    const attn_data_sentences *s = m->s;
    int T = 0;
    for (int i = 0; i < B; i++) {
        size_t n = s->off[ex[i] + 1] - s->off[ex[i]];
        if ((int)n > T) T = (int)n;
    }
    size_t cells = (size_t)B * (size_t)T;
    if ((size_t)B > b->cap_rows) {
        int32_t *len = realloc(b->len, (size_t)B * sizeof *len);
        if (len) b->len = len;
        uint32_t *e = realloc(b->example, (size_t)B * sizeof *e);
        if (e) b->example = e;
        if (!len || !e)
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: mlm batch: out of memory");
        b->cap_rows = (size_t)B;
    }
    if (cells > b->cap_cells) {
        int32_t *ids = realloc(b->ids, cells * sizeof *ids);
        if (ids) b->ids = ids;
        int32_t *lab = realloc(b->labels, cells * sizeof *lab);
        if (lab) b->labels = lab;
        if (!ids || !lab)
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: mlm batch: out of memory");
        b->cap_cells = cells;
    }
    b->B = B, b->T = T;
    b->n_tokens = b->n_labels = 0;
    for (int i = 0; i < B; i++) {
        const int32_t *ids = s->ids + s->off[ex[i]];
        int n = (int)(s->off[ex[i] + 1] - s->off[ex[i]]);
        int32_t *mi = b->ids + (size_t)i * (size_t)T, *ml = b->labels + (size_t)i * (size_t)T;
        ATTN_TRY(attn_embed_mlm_mask(&m->mp, m->o.seed, epoch, ex[i], n, ids, mi, ml));
        for (int t = n; t < T; t++) mi[t] = 0, ml[t] = ATTN_BERT_IGNORE_INDEX;
        for (int t = 0; t < n; t++) b->n_labels += ml[t] != ATTN_BERT_IGNORE_INDEX;
        b->len[i] = n;
        b->example[i] = ex[i];
        b->n_tokens += n;
    }
    return ATTN_STATUS_OK;
}

attn_status attn_data_mlm_train_batch(attn_data_mlm *m, uint64_t epoch, size_t k,
                                      attn_data_mlm_batch *b) {
    if (!m || !b)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: mlm_train_batch: NULL argument");
    if (epoch >= VALID_EPOCH)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "data: epoch %llu: too many epochs (at most 2^24 - 2)",
                         (unsigned long long)epoch);
    size_t nb = attn_data_mlm_train_batches(m);
    if (k >= nb)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: mlm batch %zu beyond the epoch's %zu (different data or options?)",
                         k, nb);
    if (m->perm_epoch != (int64_t)epoch) {
        memcpy(m->perm, m->train, m->n_train * sizeof *m->perm);
        attn_rng rng;
        attn_rng_set_state(&rng, key_of(m->o.seed, KEY_SHUFFLE), epoch << 32);
        attn_rng_shuffle(&rng, m->perm, m->n_train);
        m->perm_epoch = (int64_t)epoch;
    }
    size_t at = k * (size_t)m->o.batch;
    int B = (int)(m->n_train - at < (size_t)m->o.batch ? m->n_train - at : (size_t)m->o.batch);
    return fill(m, m->perm + at, B, epoch, b);
}

attn_status attn_data_mlm_valid_batch(const attn_data_mlm *m, size_t k, attn_data_mlm_batch *b) {
    if (!m || !b)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: mlm_valid_batch: NULL argument");
    size_t nb = attn_data_mlm_valid_batches(m);
    if (k >= nb)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: mlm validation batch %zu beyond the %zu there are", k, nb);
    size_t at = k * (size_t)m->o.batch;
    int B = (int)(m->n_valid - at < (size_t)m->o.batch ? m->n_valid - at : (size_t)m->o.batch);
    return fill(m, m->valid + at, B, VALID_EPOCH, b);
}

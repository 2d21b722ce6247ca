/* dataset.c — the tokenized dataset and its batches (include/attn_data.h): every pair encoded
 * once into one int32 arena, a per-epoch batch plan (seeded shuffle, length-sorted buckets,
 * greedy cuts under a token budget, seeded batch order) that depends only on (dataset, options,
 * epoch), and the padded batch tensors the encoder–decoder takes. Because a plan is a pure
 * function of the epoch, a loader position is just (epoch, batch) and resuming replays exactly. */
#include "data-impl.h"

#include <stdlib.h>
#include <string.h>

attn_data_encode_options attn_data_encode_default_options(void) {
    attn_data_encode_options o = {.max_len = 128, .truncate = false, .src_eos = true};
    return o;
}

void attn_data_dataset_free(attn_data_dataset *ds) {
    if (!ds) return;
    attn_free(ds->ids);
    attn_free(ds->off);
    attn_free(ds->pair);
    attn_free(ds);
}

int32_t attn_data_src_len(const attn_data_dataset *ds, size_t i) {
    return (int32_t)(ds->off[2 * i + 1] - ds->off[2 * i]) + (ds->src_eos ? 1 : 0);
}

int32_t attn_data_tgt_len(const attn_data_dataset *ds, size_t i) {
    return (int32_t)(ds->off[2 * i + 2] - ds->off[2 * i + 1]) + 1; /* <s> or </s> */
}

/* Growable int32 arena (attn_alloc has no realloc, so growth copies). */
typedef struct {
    int32_t *p;
    size_t len, cap;
} arena;

static attn_status arena_reserve(arena *a, size_t extra) {
    size_t need;
    if (!attn_size_add(a->len, extra, &need) || need > ATTN_MAX_BUFFER_BYTES / sizeof(int32_t))
        return attn_fail(ATTN_STATUS_TOO_LARGE, "data: encode: more than %zu token ids",
                         ATTN_MAX_BUFFER_BYTES / sizeof(int32_t));
    if (need <= a->cap) return ATTN_STATUS_OK;
    size_t cap = a->cap ? a->cap : 1 << 16;
    while (cap < need) cap *= 2;
    int32_t *p = attn_alloc(cap * sizeof *p);
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: encode: out of memory");
    if (a->len) memcpy(p, a->p, a->len * sizeof *p);
    attn_free(a->p);
    a->p = p, a->cap = cap;
    return ATTN_STATUS_OK;
}

/* Encode s, appending its ids to the arena; *k = number of ids. */
static attn_status encode_into(const attn_tok *tok, const char *s, arena *a, size_t *k) {
    size_t len = strlen(s);
    for (;;) {
        size_t room = a->cap - a->len, n = 0;
        attn_status st = attn_tok_encode(tok, s, len, a->p + a->len, room, &n);
        if (st == ATTN_STATUS_OK) {
            a->len += n;
            *k = n;
            return ATTN_STATUS_OK;
        }
        if (st != ATTN_STATUS_INVALID_ARGUMENT || n <= room) return st; /* a real failure */
        attn_clear_error();
        st = arena_reserve(a, n);
        if (st) return st;
    }
}

attn_status attn_data_encode(const attn_data_corpus *c, const size_t *idx, size_t n,
                             const attn_tok *tok, const attn_data_encode_options *opt,
                             attn_data_dataset **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: encode: out is NULL");
    *out = NULL;
    if (!c || !tok) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: encode: NULL argument");
    if (!idx) n = c->n;
    attn_data_encode_options o = opt ? *opt : attn_data_encode_default_options();
    if (o.max_len != 0 && o.max_len < 2)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: encode: max_len %d must be 0 (no limit) or >= 2", (int)o.max_len);
    int32_t pad = attn_tok_special_id(tok, ATTN_TOK_PAD), bos = attn_tok_special_id(tok, ATTN_TOK_BOS);
    int32_t eos = attn_tok_special_id(tok, ATTN_TOK_EOS);
    if (pad < 0 || bos < 0 || eos < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: encode: the tokenizer lacks %s (needed for batches)",
                         pad < 0 ? "<pad>" : bos < 0 ? "<s>" : "</s>");
    attn_data_dataset *ds = attn_calloc(sizeof *ds);
    arena a = {0};
    attn_status st = ATTN_STATUS_OK;
    size_t noff;
    if (!ds || !attn_size_mul(ATTN_MAX(n, 1), 2, &noff) || !attn_size_add(noff, 1, &noff)) {
        attn_free(ds);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: encode: out of memory");
    }
    ds->off = attn_alloc(noff * sizeof *ds->off);
    ds->pair = attn_alloc(ATTN_MAX(n, 1) * sizeof *ds->pair);
    if (!ds->off || !ds->pair || (st = arena_reserve(&a, 16 * n + 16)) != ATTN_STATUS_OK) {
        if (!st) st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: encode: out of memory");
        goto fail;
    }
    ds->pad_id = pad, ds->bos_id = bos, ds->eos_id = eos;
    ds->src_eos = o.src_eos, ds->max_len = o.max_len;
    int32_t e = o.src_eos ? 1 : 0;
    size_t kept = 0;
    ds->off[0] = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = idx ? idx[k] : k;
        if (i >= c->n) {
            st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                           "data: encode: index %zu out of range (%zu pairs)", i, c->n);
            goto fail;
        }
        size_t start = a.len, ns, nt;
        if ((st = encode_into(tok, c->src[i], &a, &ns)) != ATTN_STATUS_OK ||
            (st = encode_into(tok, c->tgt[i], &a, &nt)) != ATTN_STATUS_OK) {
            char why[256]; /* a copy: attn_fail writes the buffer attn_last_error returns */
            snprintf(why, sizeof why, "%s", attn_last_error());
            st = attn_fail(st, "data: encode: pair %zu (line %zu): %s", i,
                           c->line ? c->line[i] : i + 1, why);
            goto fail;
        }
        if (o.max_len && (ns + (size_t)e > (size_t)o.max_len || nt + 1 > (size_t)o.max_len)) {
            if (!o.truncate) { /* forget this pair: rewind the arena */
                a.len = start;
                ds->n_dropped++;
                continue;
            }
            size_t ms = (size_t)(o.max_len - e), mt = (size_t)(o.max_len - 1);
            if (nt > mt) { /* target ids sit after the source ids: move the kept ones down */
                nt = mt;
            }
            if (ns > ms) {
                memmove(a.p + start + ms, a.p + start + ns, nt * sizeof *a.p);
                ns = ms;
            }
            a.len = start + ns + nt;
            ds->n_truncated++;
        }
        ds->pair[kept] = i;
        ds->off[2 * kept + 1] = start + ns;
        ds->off[2 * kept + 2] = start + ns + nt;
        ds->longest_src = ATTN_MAX(ds->longest_src, (int32_t)ns + e);
        ds->longest_tgt = ATTN_MAX(ds->longest_tgt, (int32_t)nt + 1);
        kept++;
    }
    if (kept == 0) {
        st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                       "data: encode: no pairs left (%zu given, %zu longer than max_len %d)", n,
                       ds->n_dropped, (int)o.max_len);
        goto fail;
    }
    ds->n = kept;
    ds->ids = a.p;
    *out = ds;
    return ATTN_STATUS_OK;
fail:
    attn_free(a.p);
    attn_data_dataset_free(ds);
    return st;
}

/* ---- batches ---- */

void attn_data_batch_free(attn_data_batch *b) {
    if (!b) return;
    attn_free(b->src);
    attn_free(b->src_len);
    attn_free(b->tgt_in);
    attn_free(b->tgt_out);
    attn_free(b->tgt_len);
    attn_free(b->row);
    memset(b, 0, sizeof *b);
}

/* Grow *p to hold n elements of size es (contents are rewritten by the caller, so no copy). */
static bool grow(void **p, size_t *cap, size_t n, size_t es) {
    if (n <= *cap && *p) return true;
    size_t c = ATTN_MAX(n, *cap * 2), bytes;
    if (!attn_size_mul(c, es, &bytes) || bytes > ATTN_MAX_BUFFER_BYTES) return false;
    void *q = attn_alloc(bytes);
    if (!q) return false;
    attn_free(*p);
    *p = q;
    *cap = c;
    return true;
}

attn_status attn_data_batch_fill(const attn_data_dataset *ds, const size_t *rows, size_t n,
                                 attn_data_batch *b) {
    if (!ds || !rows || !b || n == 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: batch_fill: NULL argument or n = 0");
    if (n > INT32_MAX) return attn_fail(ATTN_STATUS_TOO_LARGE, "data: batch of %zu rows", n);
    int32_t Ts = 0, Tt = 0;
    for (size_t k = 0; k < n; k++) {
        if (rows[k] >= ds->n)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "data: batch_fill: row %zu out of range (%zu rows)", rows[k], ds->n);
        Ts = ATTN_MAX(Ts, attn_data_src_len(ds, rows[k]));
        Tt = ATTN_MAX(Tt, attn_data_tgt_len(ds, rows[k]));
    }
    size_t ns, nt;
    if (!attn_size_mul(n, (size_t)Ts, &ns) || !attn_size_mul(n, (size_t)Tt, &nt))
        return attn_fail(ATTN_STATUS_TOO_LARGE, "data: batch %zu x %d", n, (int)ATTN_MAX(Ts, Tt));
    /* The three per-row arrays share cap_rows; grow them against a common old capacity. */
    size_t cr = b->cap_rows, cr2 = b->cap_rows, cr3 = b->cap_rows, cs = b->cap_src,
           ct = b->cap_tgt, ct2 = b->cap_tgt;
    bool ok = grow((void **)&b->src_len, &cr, n, sizeof(int32_t)) &&
              grow((void **)&b->tgt_len, &cr2, n, sizeof(int32_t)) &&
              grow((void **)&b->row, &cr3, n, sizeof(size_t)) &&
              grow((void **)&b->src, &cs, ns, sizeof(int32_t)) &&
              grow((void **)&b->tgt_in, &ct, nt, sizeof(int32_t)) &&
              grow((void **)&b->tgt_out, &ct2, nt, sizeof(int32_t));
    if (!ok) {
        attn_data_batch_free(b); /* capacities may now disagree with the buffers: start over */
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: batch of %zu x %d: out of memory", n,
                         (int)ATTN_MAX(Ts, Tt));
    }
    b->cap_rows = ATTN_MIN(cr, ATTN_MIN(cr2, cr3));
    b->cap_src = cs;
    b->cap_tgt = ATTN_MIN(ct, ct2);
    b->B = (int)n, b->Ts = (int)Ts, b->Tt = (int)Tt;
    b->n_tokens = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = rows[k];
        const int32_t *s = ds->ids + ds->off[2 * i], *t = ds->ids + ds->off[2 * i + 1];
        size_t ls = ds->off[2 * i + 1] - ds->off[2 * i], lt = ds->off[2 * i + 2] - ds->off[2 * i + 1];
        int32_t *srow = b->src + k * (size_t)Ts;                                  // (Ts)
        int32_t *irow = b->tgt_in + k * (size_t)Tt, *orow = b->tgt_out + k * (size_t)Tt; // (Tt)
        memcpy(srow, s, ls * sizeof *s);
        size_t p = ls;
        if (ds->src_eos) srow[p++] = ds->eos_id;
        for (; p < (size_t)Ts; p++) srow[p] = ds->pad_id;
        irow[0] = ds->bos_id;
        memcpy(irow + 1, t, lt * sizeof *t);
        memcpy(orow, t, lt * sizeof *t);
        orow[lt] = ds->eos_id;
        for (p = lt + 1; p < (size_t)Tt; p++) irow[p] = orow[p] = ds->pad_id;
        b->src_len[k] = (int32_t)ls + (ds->src_eos ? 1 : 0);
        b->tgt_len[k] = (int32_t)lt + 1;
        b->row[k] = i;
        b->n_tokens += b->tgt_len[k];
    }
    b->epoch = 0, b->index = 0;
    return ATTN_STATUS_OK;
}

attn_data_batch_options attn_data_batch_default_options(void) {
    attn_data_batch_options o = {.max_tokens = 4096, .budget = ATTN_DATA_BUDGET_PADDED,
                                 .max_sentences = 0, .bucket_size = 0, .seed = 1};
    return o;
}

/* Sort key of one row: ascending target length, then source length — ascending for even target
 * lengths and descending for odd ones (a boustrophedon), so that a batch spanning two target
 * lengths meets sources of similar length at the seam instead of the longest next to the
 * shortest — then the row's place in the epoch's shuffled order (a total order, so qsort's
 * instability cannot make plans differ between C libraries). */
typedef struct {
    int32_t tt, ts;
    size_t pos, row;
} sort_key;

static int key_cmp(const void *a, const void *b) {
    const sort_key *x = a, *y = b;
    if (x->tt != y->tt) return x->tt < y->tt ? -1 : 1;
    if (x->ts != y->ts) return (x->ts < y->ts) == !(x->tt & 1) ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

struct attn_data_loader {
    const attn_data_dataset *ds;
    attn_data_batch_options o;
    uint64_t epoch; /* the planned epoch */
    uint64_t next;  /* next batch index within it (== nb: the epoch is over) */
    size_t *rows;   /* (n) rows in plan order: batches are consecutive runs */
    size_t *start;  /* (nb + 1) where plan batch j begins in rows */
    size_t *order;  /* (nb) batch k of the epoch is plan batch order[k] */
    size_t nb;
    sort_key *keys; /* (n) scratch */
};

/* The plan of one epoch; a pure function of (dataset, options, epoch). */
static void plan_epoch(attn_data_loader *ld, uint64_t epoch) {
    const attn_data_dataset *ds = ld->ds;
    size_t n = ds->n;
    for (size_t i = 0; i < n; i++) ld->rows[i] = i;
    attn_data_rng r = attn_data_rng_make(ld->o.seed, epoch, 1);
    attn_data_shuffle(&r, ld->rows, n);
    size_t bs = ld->o.bucket_size ? ld->o.bucket_size : n;
    size_t nb = 0;
    for (size_t b0 = 0; b0 < n; b0 += bs) {
        size_t b1 = ATTN_MIN(n, b0 + bs);
        for (size_t p = b0; p < b1; p++) {
            size_t i = ld->rows[p];
            ld->keys[p] = (sort_key){attn_data_tgt_len(ds, i), attn_data_src_len(ds, i), p, i};
        }
        qsort(ld->keys + b0, b1 - b0, sizeof *ld->keys, key_cmp);
        /* Greedy cut: a batch grows while the budget holds (checked with the new row's lengths
         * included, as the padded tensor would be). */
        size_t B = 0;
        int32_t ms = 0, mt = 0;
        size_t sum = 0;
        for (size_t p = b0; p < b1; p++) {
            const sort_key *k = &ld->keys[p];
            int32_t ms2 = ATTN_MAX(ms, k->ts), mt2 = ATTN_MAX(mt, k->tt);
            size_t cost = ld->o.budget == ATTN_DATA_BUDGET_PADDED
                              ? (B + 1) * (size_t)ATTN_MAX(ms2, mt2)
                              : sum + (size_t)k->tt;
            bool full = ld->o.max_sentences && B >= ld->o.max_sentences;
            if (B > 0 && (cost > ld->o.max_tokens || full)) {
                ld->start[++nb] = p;
                B = 0, sum = 0, ms2 = k->ts, mt2 = k->tt;
            } else if (B == 0) {
                ld->start[nb] = p;
            }
            B++, sum += (size_t)k->tt, ms = ms2, mt = mt2;
            ld->rows[p] = k->row;
        }
        ld->start[++nb] = b1;
    }
    ld->nb = nb;
    for (size_t j = 0; j < nb; j++) ld->order[j] = j;
    attn_data_rng r2 = attn_data_rng_make(ld->o.seed, epoch, 2);
    attn_data_shuffle(&r2, ld->order, nb);
    ld->epoch = epoch;
    ld->next = 0;
}

void attn_data_loader_free(attn_data_loader *ld) {
    if (!ld) return;
    free(ld->rows);
    free(ld->start);
    free(ld->order);
    free(ld->keys);
    free(ld);
}

attn_status attn_data_loader_new(const attn_data_dataset *ds, const attn_data_batch_options *opt,
                                 attn_data_loader **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: loader: out is NULL");
    *out = NULL;
    if (!ds || ds->n == 0) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: loader: empty dataset");
    attn_data_batch_options o = opt ? *opt : attn_data_batch_default_options();
    if (o.budget != ATTN_DATA_BUDGET_PADDED && o.budget != ATTN_DATA_BUDGET_TARGET)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: loader: unknown budget %d", (int)o.budget);
    size_t need = o.budget == ATTN_DATA_BUDGET_PADDED
                      ? (size_t)ATTN_MAX(ds->longest_src, ds->longest_tgt)
                      : (size_t)ds->longest_tgt;
    if (o.max_tokens < need)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: loader: max_tokens %zu is less than the longest pair (%zu tokens)",
                         o.max_tokens, need);
    attn_data_loader *ld = calloc(1, sizeof *ld);
    if (!ld) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: loader: out of memory");
    ld->ds = ds, ld->o = o;
    ld->rows = malloc(ds->n * sizeof *ld->rows);
    ld->start = malloc((ds->n + 1) * sizeof *ld->start);
    ld->order = malloc(ds->n * sizeof *ld->order);
    ld->keys = malloc(ds->n * sizeof *ld->keys);
    if (!ld->rows || !ld->start || !ld->order || !ld->keys) {
        attn_data_loader_free(ld);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: loader: out of memory");
    }
    plan_epoch(ld, 0);
    *out = ld;
    return ATTN_STATUS_OK;
}

attn_status attn_data_loader_batch_rows(const attn_data_loader *ld, size_t k, const size_t **rows,
                                        size_t *n) {
    if (!ld || !rows || !n) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: loader: NULL argument");
    if (k >= ld->nb)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: loader: batch %zu out of range (epoch %llu has %zu)", k,
                         (unsigned long long)ld->epoch, ld->nb);
    size_t j = ld->order[k];
    *rows = ld->rows + ld->start[j];
    *n = ld->start[j + 1] - ld->start[j];
    return ATTN_STATUS_OK;
}

attn_status attn_data_loader_next(attn_data_loader *ld, attn_data_batch *b) {
    if (!ld || !b) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: loader: NULL argument");
    if (ld->next >= ld->nb) plan_epoch(ld, ld->epoch + 1); /* roll over only when needed */
    const size_t *rows;
    size_t n;
    attn_status st = attn_data_loader_batch_rows(ld, (size_t)ld->next, &rows, &n);
    if (st) return st;
    st = attn_data_batch_fill(ld->ds, rows, n, b);
    if (st) return st;
    b->epoch = ld->epoch;
    b->index = ld->next++;
    return ATTN_STATUS_OK;
}

attn_data_pos attn_data_loader_tell(const attn_data_loader *ld) {
    attn_data_pos p = {ld->epoch, ld->next};
    if (ld->next >= ld->nb) p.epoch++, p.batch = 0; /* the next call starts the next epoch */
    return p;
}

attn_status attn_data_loader_seek(attn_data_loader *ld, attn_data_pos pos) {
    if (!ld) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: loader: NULL argument");
    if (pos.epoch != ld->epoch) plan_epoch(ld, pos.epoch);
    if (pos.batch > ld->nb)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: loader: position (epoch %llu, batch %llu) beyond the epoch's %zu "
                         "batches (different data or options?)",
                         (unsigned long long)pos.epoch, (unsigned long long)pos.batch, ld->nb);
    ld->next = pos.batch;
    return ATTN_STATUS_OK;
}

size_t attn_data_loader_num_batches(const attn_data_loader *ld) {
    return ld ? ld->nb : 0;
}

/* ---- fixed-order evaluation batches ---- */

static attn_status plan_fixed(const attn_data_dataset *ds, const int32_t *lens, size_t n,
                              size_t max_sentences, size_t max_tokens, attn_data_range **ranges,
                              size_t *n_ranges) {
    if (!ranges || !n_ranges || (!lens && !ds && n))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: plan_fixed: NULL argument");
    *ranges = NULL, *n_ranges = 0;
    attn_data_range *r = attn_alloc(ATTN_MAX(n, 1) * sizeof *r);
    if (!r) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "data: plan_fixed: out of memory");
    size_t nr = 0, B = 0;
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t l = ds ? ATTN_MAX(attn_data_src_len(ds, i), attn_data_tgt_len(ds, i)) : lens[i];
        if (l < 0) {
            attn_free(r);
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: plan_fixed: lens[%zu] = %d < 0",
                             i, (int)l);
        }
        int32_t m2 = ATTN_MAX(m, l);
        bool over = (max_tokens && (B + 1) * (size_t)m2 > max_tokens) ||
                    (max_sentences && B >= max_sentences);
        if (B > 0 && over) {
            r[nr++].end = i;
            B = 0, m2 = l;
        }
        if (B == 0) r[nr].begin = i;
        B++, m = m2;
    }
    if (B > 0) r[nr++].end = n;
    *ranges = r, *n_ranges = nr;
    return ATTN_STATUS_OK;
}

attn_status attn_data_plan_fixed(const int32_t *lens, size_t n, size_t max_sentences,
                                 size_t max_tokens, attn_data_range **ranges, size_t *n_ranges) {
    if (!lens && n) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: plan_fixed: lens is NULL");
    return plan_fixed(NULL, lens, n, max_sentences, max_tokens, ranges, n_ranges);
}

attn_status attn_data_dataset_plan_fixed(const attn_data_dataset *ds, size_t max_sentences,
                                         size_t max_tokens, attn_data_range **ranges,
                                         size_t *n_ranges) {
    if (!ds) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: plan_fixed: ds is NULL");
    return plan_fixed(ds, NULL, ds->n, max_sentences, max_tokens, ranges, n_ranges);
}

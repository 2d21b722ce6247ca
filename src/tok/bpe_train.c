/* bpe_train.c — training a BPE tokenizer with byte fallback (attn_tok_train_bpe).
 *
 * 1. Every line goes through the very pipeline encode uses (special tokens split out, normalizer
 *    Prepend "▁" + Replace " " -> "▁", Metaspace split, punctuation isolated), so training words
 *    are exactly the pieces the model will later see; merges therefore never cross a word or a
 *    punctuation mark (so "power." is "▁power" + ".", not a token "er." of its own).
 * 2. Unique words are counted. Characters are counted over them; the alphabet is "▁" and every
 *    character seen at least min_char_frequency times, most frequent first, within limit_alphabet and what
 *    vocab_size leaves. A character outside the alphabet splits its word (at encode time it is
 *    byte fallback, so no merge across it could ever apply).
 * 3. Ids: special tokens, then <0x00>..<0xFF>, then the alphabet, then one id per merge.
 * 4. Merges: adjacent-pair counts (weighted by word frequency) live in a hash table; a max-heap
 *    ordered by (count desc, left id asc, right id asc) holds candidates with lazy invalidation:
 *    an entry whose count is stale is re-pushed with the current count when popped, and every
 *    pair whose count grows is pushed again, so the top valid entry is always the true best pair
 *    and ties are broken deterministically. Each pair keeps the list of words it occurs in; a
 *    merge rewrites only those words and updates counts incrementally (no full recount).
 *    A merge whose result string already exists (e.g. it spells "<0x41>" or a special token) is
 *    skipped, so every id has a distinct string and decoding stays exact. Training stops at
 *    vocab_size or when the best pair occurs fewer than min_frequency times. */
#include "tok-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

attn_tok_train_params attn_tok_train_default_params(void) {
    static const char *const specials[] = {"<pad>", "<unk>", "<s>", "</s>"};
    attn_tok_train_params p;
    memset(&p, 0, sizeof p);
    p.vocab_size = 8000;
    p.min_frequency = 2;
    p.min_char_frequency = 1;
    p.limit_alphabet = 0;
    p.byte_fallback = true;
    p.special_tokens = specials;
    p.n_special = 4;
    p.unk_token = "<unk>";
    return p;
}

/* ---- word counting: string -> count ---- */

typedef struct {
    tok_buf arena;    /* the words, back to back */
    size_t *off, *len;
    int64_t *cnt;
    size_t n, cap;
    int32_t *slots;   /* word index, -1 empty */
    size_t mask;
} word_map;

static bool wm_grow_table(word_map *m) {
    size_t cap = m->mask ? (m->mask + 1) * 2 : 1024;
    int32_t *s = malloc(cap * sizeof *s);
    if (!s) return false;
    memset(s, 0xff, cap * sizeof *s);
    for (size_t i = 0; i < m->n; i++) {
        size_t h = (size_t)tok_hash(m->arena.p + m->off[i], m->len[i]) & (cap - 1);
        while (s[h] >= 0) h = (h + 1) & (cap - 1);
        s[h] = (int32_t)i;
    }
    free(m->slots);
    m->slots = s;
    m->mask = cap - 1;
    return true;
}

static bool wm_add(word_map *m, const char *w, size_t n, int64_t c) {
    if (!m->slots || (m->n + 1) * 2 > m->mask + 1)
        if (!wm_grow_table(m)) return false;
    size_t h = (size_t)tok_hash(w, n) & m->mask;
    for (;;) {
        int32_t i = m->slots[h];
        if (i < 0) break;
        if (m->len[i] == n && !memcmp(m->arena.p + m->off[i], w, n)) {
            m->cnt[i] += c;
            return true;
        }
        h = (h + 1) & m->mask;
    }
    if (m->n >= (size_t)INT32_MAX) return false;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        size_t *off = realloc(m->off, cap * sizeof *off);
        if (off) m->off = off;
        size_t *len = realloc(m->len, cap * sizeof *len);
        if (len) m->len = len;
        int64_t *cnt = realloc(m->cnt, cap * sizeof *cnt);
        if (cnt) m->cnt = cnt;
        if (!off || !len || !cnt) return false;
        m->cap = cap;
    }
    m->off[m->n] = m->arena.n;
    m->len[m->n] = n;
    m->cnt[m->n] = c;
    tok_buf_put(&m->arena, w, n);
    if (m->arena.oom) return false;
    m->slots[h] = (int32_t)m->n++;
    return true;
}

static void wm_free(word_map *m) {
    tok_buf_free(&m->arena);
    free(m->off);
    free(m->len);
    free(m->cnt);
    free(m->slots);
}

static attn_status count_piece(void *ctx, const char *s, size_t n, int32_t added_id) {
    if (added_id >= 0) return ATTN_STATUS_OK; /* special tokens are not trained on */
    return wm_add(ctx, s, n, 1) ? ATTN_STATUS_OK
                                : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "train: out of memory");
}

/* ---- training state ---- */

typedef struct {
    int32_t *s;
    int32_t len;
    int64_t cnt;
} tword;

typedef struct {
    int32_t *w;
    uint32_t n, cap;
} wlist;

typedef struct {
    int64_t count;
    int32_t a, b, pair;
} hent;

typedef struct {
    /* tokens */
    char **str;
    uint32_t *slen;
    int32_t ntok, captok;
    tok_vocab lookup; /* string -> id, for collisions; sized vocab_size */
    /* words: symbol runs in one pool */
    int32_t *pool;
    tword *words;
    size_t nwords;
    uint32_t *wstamp;
    /* pairs */
    int32_t *pa, *pb;
    int64_t *pcount, *ppushed;
    wlist *pwhere;
    uint8_t *pbanned;
    uint32_t *ptouch;
    size_t npairs, cappairs;
    int32_t *pslots; /* hash: pair index, -1 empty */
    size_t pmask;
    /* heap */
    hent *heap;
    size_t nheap, capheap;
    /* merges */
    int32_t *merges;
    size_t nmerges;
} trainer;

static uint64_t pair_hash(int32_t a, int32_t b) {
    uint64_t x = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static bool pairs_rehash(trainer *T) {
    size_t cap = T->pmask ? (T->pmask + 1) * 2 : 1 << 16;
    int32_t *s = malloc(cap * sizeof *s);
    if (!s) return false;
    memset(s, 0xff, cap * sizeof *s);
    for (size_t i = 0; i < T->npairs; i++) {
        size_t h = (size_t)pair_hash(T->pa[i], T->pb[i]) & (cap - 1);
        while (s[h] >= 0) h = (h + 1) & (cap - 1);
        s[h] = (int32_t)i;
    }
    free(T->pslots);
    T->pslots = s;
    T->pmask = cap - 1;
    return true;
}

/* Index of pair (a, b), created with count 0 if new; -1 on out of memory. */
static int32_t pair_get(trainer *T, int32_t a, int32_t b) {
    if (!T->pslots || (T->npairs + 1) * 2 > T->pmask + 1)
        if (!pairs_rehash(T)) return -1;
    size_t h = (size_t)pair_hash(a, b) & T->pmask;
    for (;;) {
        int32_t i = T->pslots[h];
        if (i < 0) break;
        if (T->pa[i] == a && T->pb[i] == b) return i;
        h = (h + 1) & T->pmask;
    }
    if (T->npairs >= (size_t)INT32_MAX) return -1;
    if (T->npairs == T->cappairs) {
        size_t cap = T->cappairs ? T->cappairs * 2 : 1 << 15;
#define GROW(field)                                                                              \
    do {                                                                                         \
        void *p_ = realloc(T->field, cap * sizeof *T->field);                                    \
        if (!p_) return -1;                                                                      \
        T->field = p_;                                                                           \
    } while (0)
        GROW(pa);
        GROW(pb);
        GROW(pcount);
        GROW(ppushed);
        GROW(pwhere);
        GROW(pbanned);
        GROW(ptouch);
#undef GROW
        T->cappairs = cap;
    }
    int32_t i = (int32_t)T->npairs++;
    T->pa[i] = a;
    T->pb[i] = b;
    T->pcount[i] = 0;
    T->ppushed[i] = 0;
    T->pwhere[i] = (wlist){0};
    T->pbanned[i] = 0;
    T->ptouch[i] = 0;
    T->pslots[h] = i;
    return i;
}

static bool where_add(wlist *l, int32_t w) {
    if (l->n && l->w[l->n - 1] == w) return true; /* cheap de-duplication */
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 4;
        int32_t *p = realloc(l->w, cap * sizeof *p);
        if (!p) return false;
        l->w = p;
        l->cap = cap;
    }
    l->w[l->n++] = w;
    return true;
}

/* Heap order: larger count first, then smaller (a, b). */
static bool hent_before(const hent *x, const hent *y) {
    if (x->count != y->count) return x->count > y->count;
    if (x->a != y->a) return x->a < y->a;
    return x->b < y->b;
}

static bool heap_push(trainer *T, int32_t p) {
    if (T->nheap == T->capheap) {
        size_t cap = T->capheap ? T->capheap * 2 : 1 << 15;
        hent *h = realloc(T->heap, cap * sizeof *h);
        if (!h) return false;
        T->heap = h;
        T->capheap = cap;
    }
    hent e = {T->pcount[p], T->pa[p], T->pb[p], p};
    T->ppushed[p] = e.count;
    size_t i = T->nheap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!hent_before(&e, &T->heap[up])) break;
        T->heap[i] = T->heap[up];
        i = up;
    }
    T->heap[i] = e;
    return true;
}

static hent heap_pop(trainer *T) {
    hent top = T->heap[0], last = T->heap[--T->nheap];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        const hent *best = &last;
        if (l < T->nheap && hent_before(&T->heap[l], best)) s = l, best = &T->heap[l];
        if (r < T->nheap && hent_before(&T->heap[r], best)) s = r;
        if (s == i) break;
        T->heap[i] = T->heap[s];
        i = s;
    }
    if (T->nheap) T->heap[i] = last;
    return top;
}

static bool add_token(trainer *T, const char *s, size_t n) {
    if (T->ntok == T->captok) {
        int32_t cap = T->captok ? T->captok * 2 : 1024;
        char **p = realloc(T->str, (size_t)cap * sizeof *p);
        if (p) T->str = p;
        uint32_t *l = realloc(T->slen, (size_t)cap * sizeof *l);
        if (l) T->slen = l;
        if (!p || !l) return false;
        T->captok = cap;
    }
    char *c = malloc(n + 1);
    if (!c) return false;
    memcpy(c, s, n);
    c[n] = '\0';
    if (tok_vocab_set(&T->lookup, T->ntok, c, n) != 0) {
        free(c);
        return false;
    }
    T->str[T->ntok] = c;
    T->slen[T->ntok] = (uint32_t)n;
    T->ntok++;
    return true;
}

static void trainer_free(trainer *T) {
    for (int32_t i = 0; i < T->ntok; i++) free(T->str[i]);
    free(T->str);
    free(T->slen);
    tok_vocab_free(&T->lookup);
    free(T->pool);
    free(T->words);
    free(T->wstamp);
    for (size_t i = 0; i < T->npairs; i++) free(T->pwhere[i].w);
    free(T->pa);
    free(T->pb);
    free(T->pcount);
    free(T->ppushed);
    free(T->pwhere);
    free(T->pbanned);
    free(T->ptouch);
    free(T->pslots);
    free(T->heap);
    free(T->merges);
}

typedef struct {
    uint32_t cp;
    int64_t f;
} cfreq;

static int cfreq_cmp(const void *x, const void *y) {
    const cfreq *a = x, *b = y;
    if (a->f != b->f) return a->f > b->f ? -1 : 1;
    return a->cp < b->cp ? -1 : a->cp > b->cp;
}

/* Words -> symbol sequences of length >= 2 in one pool (cp2id: code point -> id or -1). */
static attn_status build_words(trainer *T, const word_map *wm, const int32_t *cp2id) {
    size_t total = 0;
    for (size_t i = 0; i < wm->n; i++) total += wm->len[i]; /* >= number of characters */
    T->pool = malloc((total ? total : 1) * sizeof *T->pool);
    if (!T->pool) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "train: out of memory");
    size_t used = 0, cap = 0;
    for (size_t i = 0; i < wm->n; i++) {
        const unsigned char *s = (const unsigned char *)wm->arena.p + wm->off[i];
        size_t n = wm->len[i], j = 0, start = used;
        while (j <= n) {
            int32_t id = -1;
            size_t k = 1;
            if (j < n) {
                uint32_t cp;
                k = tok_utf8_decode(s + j, n - j, &cp);
                if (!k)
                    k = 1;
                else
                    id = cp2id[cp];
            }
            if (id >= 0) {
                T->pool[used++] = id;
            } else if (used - start < 2) {
                used = start; /* end of a run of 0 or 1 symbols: no pair, drop it */
            } else {          /* end of word, or a character outside the alphabet */
                if (T->nwords == cap) {
                    cap = cap ? cap * 2 : 1024;
                    tword *w = realloc(T->words, cap * sizeof *w);
                    if (!w) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "train: out of memory");
                    T->words = w;
                }
                T->words[T->nwords++] =
                    (tword){T->pool + start, (int32_t)(used - start), wm->cnt[i]};
                start = used;
            }
            j += k;
        }
    }
    return ATTN_STATUS_OK;
}

static attn_status train_merges(trainer *T, const attn_tok_train_params *p) {
    const attn_status OOM = ATTN_STATUS_OUT_OF_MEMORY;
    T->wstamp = calloc(T->nwords ? T->nwords : 1, sizeof *T->wstamp);
    if (!T->wstamp) return attn_fail(OOM, "train: out of memory");
    for (size_t w = 0; w < T->nwords; w++) {
        tword *W = &T->words[w];
        for (int32_t i = 0; i + 1 < W->len; i++) {
            int32_t q = pair_get(T, W->s[i], W->s[i + 1]);
            if (q < 0 || !where_add(&T->pwhere[q], (int32_t)w))
                return attn_fail(OOM, "train: out of memory");
            T->pcount[q] += W->cnt;
        }
    }
    for (size_t q = 0; q < T->npairs; q++)
        if (!heap_push(T, (int32_t)q)) return attn_fail(OOM, "train: out of memory");
    int32_t want = p->vocab_size - T->ntok;
    T->merges = malloc((size_t)(want > 0 ? want : 1) * 2 * sizeof *T->merges);
    if (!T->merges) return attn_fail(OOM, "train: out of memory");
    uint32_t stamp = 0;
    int32_t *touched = NULL;
    size_t ntouched = 0, captouched = 0;
    tok_buf nb = {0};
    attn_status st = ATTN_STATUS_OK;
    while (T->ntok < p->vocab_size && T->nheap) {
        hent e = heap_pop(T);
        int32_t P = e.pair;
        if (T->pbanned[P]) continue;
        if (T->pcount[P] != e.count) {
            /* stale: re-queue a shrunken count; a grown one was pushed when it grew */
            if (T->pcount[P] > 0 && T->pcount[P] < e.count && !heap_push(T, P)) goto oom;
            continue;
        }
        if (e.count < p->min_frequency || e.count <= 0) break;
        int32_t a = T->pa[P], b = T->pb[P];
        nb.n = 0;
        tok_buf_put(&nb, T->str[a], T->slen[a]);
        tok_buf_put(&nb, T->str[b], T->slen[b]);
        if (nb.oom) goto oom;
        if (tok_vocab_find(&T->lookup, nb.p, nb.n) >= 0) {
            T->pbanned[P] = 1;
            continue;
        }
        int32_t c = T->ntok;
        if (!add_token(T, nb.p, nb.n)) goto oom;
        T->merges[2 * T->nmerges] = a;
        T->merges[2 * T->nmerges + 1] = b;
        T->nmerges++;
        stamp++;
        ntouched = 0;
        for (uint32_t k = 0; k < T->pwhere[P].n; k++) {
            int32_t w = T->pwhere[P].w[k];
            if (T->wstamp[w] == stamp) continue;
            T->wstamp[w] = stamp;
            tword *W = &T->words[w];
            bool has = false;
            for (int32_t i = 0; i + 1 < W->len && !has; i++)
                has = W->s[i] == a && W->s[i + 1] == b;
            if (!has) continue;
            for (int32_t i = 0; i + 1 < W->len; i++)
                T->pcount[pair_get(T, W->s[i], W->s[i + 1])] -= W->cnt; /* exists: no alloc */
            int32_t j = 0;
            for (int32_t i = 0; i < W->len; i++) {
                if (i + 1 < W->len && W->s[i] == a && W->s[i + 1] == b) {
                    W->s[j++] = c;
                    i++;
                } else {
                    W->s[j++] = W->s[i];
                }
            }
            W->len = j;
            for (int32_t i = 0; i + 1 < W->len; i++) {
                int32_t x = W->s[i], y = W->s[i + 1];
                int32_t q = pair_get(T, x, y);
                if (q < 0) goto oom;
                T->pcount[q] += W->cnt;
                if (x == c || y == c) {
                    if (!where_add(&T->pwhere[q], w)) goto oom;
                    if (T->ptouch[q] != stamp) {
                        T->ptouch[q] = stamp;
                        if (ntouched == captouched) {
                            size_t cap = captouched ? captouched * 2 : 256;
                            int32_t *tp = realloc(touched, cap * sizeof *tp);
                            if (!tp) goto oom;
                            touched = tp;
                            captouched = cap;
                        }
                        touched[ntouched++] = q;
                    }
                }
            }
        }
        /* (a, b) can never occur again: every occurrence became c, and merges only create new
         * ids, so a and b never become neighbours anew. */
        free(T->pwhere[P].w);
        T->pwhere[P] = (wlist){0};
        for (size_t k = 0; k < ntouched; k++) {
            int32_t q = touched[k];
            if (T->pcount[q] > T->ppushed[q] && !heap_push(T, q)) goto oom;
        }
        if (p->progress && (T->nmerges % 250 == 0))
            p->progress(p->progress_ctx, (int32_t)T->nmerges, want);
    }
    if (p->progress) p->progress(p->progress_ctx, (int32_t)T->nmerges, want);
    goto done;
oom:
    st = attn_fail(OOM, "train: out of memory");
done:
    free(touched);
    tok_buf_free(&nb);
    return st;
}

/* The SentencePiece-style pipeline around the model (see attn_tok.h). */
static attn_status make_shell(const attn_tok_train_params *p, attn_tok **out) {
    static const char meta[] = "\xE2\x96\x81"; /* U+2581 ▁ */
    attn_tok *t = calloc(1, sizeof *t);
    if (!t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "train: out of memory");
    *out = t;
    t->norm = calloc(2, sizeof *t->norm);
    t->pre = calloc(2, sizeof *t->pre);
    t->dec = calloc(4, sizeof *t->dec);
    t->added = calloc((size_t)p->n_special + 1, sizeof *t->added);
    if (!t->norm || !t->pre || !t->dec || !t->added)
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "train: out of memory");
    t->n_norm = 2;
    t->norm[0] = (tok_norm){.kind = TOK_NORM_PREPEND, .a = strdup(meta), .alen = 3};
    t->norm[1] = (tok_norm){.kind = TOK_NORM_REPLACE, .a = strdup(" "), .b = strdup(meta),
                            .alen = 1, .blen = 3};
    t->pre[0].kind = TOK_PRE_METASPACE;
    memcpy(t->pre[0].rep, meta, 3);
    t->pre[0].replen = 3;
    t->pre[0].scheme = TOK_PREPEND_NEVER;
    t->pre[0].split = true;
    t->pre[1].kind = TOK_PRE_PUNCTUATION;
    t->pre[1].behavior = TOK_SPLIT_ISOLATED;
    t->n_pre = 2;
    t->has_decoder = true;
    t->n_dec = 4;
    t->dec[0] = (tok_dec){.kind = TOK_DEC_REPLACE, .a = strdup(meta), .alen = 3,
                          .b = strdup(" "), .blen = 1};
    t->dec[1].kind = TOK_DEC_BYTE_FALLBACK;
    t->dec[2].kind = TOK_DEC_FUSE;
    t->dec[3] = (tok_dec){.kind = TOK_DEC_STRIP, .ch = ' ', .start = 1, .stop = 0};
    if (!t->norm[0].a || !t->norm[1].a || !t->norm[1].b || !t->dec[0].a || !t->dec[0].b)
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "train: out of memory");
    for (int i = 0; i < p->n_special; i++) {
        tok_added *a = &t->added[t->n_added++];
        a->len = strlen(p->special_tokens[i]);
        a->content = strdup(p->special_tokens[i]);
        if (!a->content) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "train: out of memory");
        a->id = i;
        a->special = true;
        a->normalized = false;
        t->any_added_raw = true;
    }
    return ATTN_STATUS_OK;
}

static attn_status check_params(const attn_tok_train_params *p) {
    if (!p) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "train: params is NULL");
    if (p->n_special < 0 || p->n_special > 1000 || (p->n_special && !p->special_tokens))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "train: n_special must be in [0, 1000] with special_tokens set");
    int32_t base = p->n_special + (p->byte_fallback ? 256 : 0);
    if (p->vocab_size <= base || p->vocab_size > TOK_MAX_ID)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "train: vocab_size %ld must be above %ld (special and byte tokens) and "
                         "at most %ld",
                         (long)p->vocab_size, (long)base, (long)TOK_MAX_ID);
    if (p->min_frequency < 1 || p->min_char_frequency < 1 || p->limit_alphabet < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "train: min_frequency and min_char_frequency must be >= 1, "
                         "limit_alphabet >= 0");
    bool unk_found = !p->unk_token;
    for (int i = 0; i < p->n_special; i++) {
        const char *s = p->special_tokens[i];
        if (!s || !*s || tok_utf8_check(s, strlen(s)) != strlen(s))
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "train: special_tokens[%d] must be a non-empty UTF-8 string", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(s, p->special_tokens[j]))
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "train: special token '%s' is listed twice", s);
        if (p->unk_token && !strcmp(s, p->unk_token)) unk_found = true;
    }
    if (!unk_found)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "train: unk_token '%s' must be one of special_tokens", p->unk_token);
    return ATTN_STATUS_OK;
}

attn_status attn_tok_train_bpe(const attn_tok_train_params *p, const char *const *lines,
                               const size_t *lens, size_t n, attn_tok **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "train: out is NULL");
    *out = NULL;
    attn_status st = check_params(p);
    if (st) return st;
    if (n && !lines) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "train: lines is NULL");
    attn_tok *t = NULL;
    word_map wm = {0};
    trainer T = {0};
    int64_t *freq = NULL;
    int32_t *cp2id = NULL;
    cfreq *alpha = NULL;
    if ((st = make_shell(p, &t)) || (st = tok_added_prepare(t, "train"))) goto done;

    for (size_t i = 0; i < n; i++) {
        if (!lines[i]) continue;
        size_t len = lens ? lens[i] : strlen(lines[i]);
        size_t bad = tok_utf8_check(lines[i], len);
        if (bad != len) {
            st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                           "train: line %zu is not valid UTF-8 (byte 0x%02X at offset %zu)",
                           i + 1, (unsigned char)lines[i][bad], bad);
            goto done;
        }
        const char *nul = len ? memchr(lines[i], 0, len) : NULL;
        if (nul) {
            /* U+0000 is valid UTF-8, but a vocabulary key holding it cannot be read back from
             * tokenizer.json (jansson refuses NUL in object keys): refuse it here. */
            st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                           "train: line %zu has a NUL byte at offset %zu (tokenizer.json cannot "
                           "hold it in a vocabulary)",
                           i + 1, (size_t)(nul - lines[i]));
            goto done;
        }
        if (len && (st = tok_pretokenize(t, lines[i], len, count_piece, &wm))) goto done;
    }

    /* alphabet */
    freq = calloc(0x110000, sizeof *freq);
    cp2id = malloc(0x110000 * sizeof *cp2id);
    if (!freq || !cp2id) goto oom;
    memset(cp2id, 0xff, 0x110000 * sizeof *cp2id);
    size_t nchars = 0;
    for (size_t i = 0; i < wm.n; i++) {
        const unsigned char *s = (const unsigned char *)wm.arena.p + wm.off[i];
        size_t len = wm.len[i], j = 0;
        while (j < len) {
            uint32_t cp;
            size_t k = tok_utf8_decode(s + j, len - j, &cp);
            if (!k) break; /* cannot happen: validated */
            if (freq[cp] == 0) nchars++;
            freq[cp] += wm.cnt[i];
            j += k;
        }
    }
    /* "▁" always gets a token of its own, first: were it left to byte fallback, the decoder's
     * Replace("▁", " ") (which runs before ByteFallback) would not see it and spaces would not
     * come back. */
    if (freq[0x2581] == 0) nchars++;
    freq[0x2581] = INT64_MAX;
    alpha = malloc((nchars ? nchars : 1) * sizeof *alpha);
    if (!alpha) goto oom;
    size_t na = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++)
        if (freq[cp] >= p->min_char_frequency) alpha[na++] = (cfreq){cp, freq[cp]};
    qsort(alpha, na, sizeof *alpha, cfreq_cmp);

    if ((st = tok_vocab_init(&T.lookup, p->vocab_size))) goto done;
    for (int i = 0; i < p->n_special; i++)
        if (!add_token(&T, p->special_tokens[i], strlen(p->special_tokens[i]))) goto oom;
    if (p->byte_fallback)
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            if (tok_vocab_find(&T.lookup, name, 6) >= 0) {
                st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                               "train: special token '%s' collides with a byte token", name);
                goto done;
            }
            if (!add_token(&T, name, 6)) goto oom;
        }
    size_t limit = p->limit_alphabet > 0 ? (size_t)p->limit_alphabet : SIZE_MAX;
    for (size_t i = 0, taken = 0; i < na && taken < limit && T.ntok < p->vocab_size; i++) {
        char u[4];
        size_t k = tok_utf8_encode(alpha[i].cp, u);
        if (tok_vocab_find(&T.lookup, u, k) >= 0) continue; /* a one-character special */
        if (!add_token(&T, u, k)) goto oom;
        cp2id[alpha[i].cp] = T.ntok - 1;
        taken++;
    }
    free(freq);
    freq = NULL;

    if ((st = build_words(&T, &wm, cp2id))) goto done;
    wm_free(&wm);
    memset(&wm, 0, sizeof wm);
    if ((st = train_merges(&T, p))) goto done;

    /* the model: an exact-size vocabulary, the merges, byte fallback */
    tok_vocab V;
    if ((st = tok_vocab_init(&V, T.ntok))) goto done;
    for (int32_t i = 0; i < T.ntok; i++)
        if (tok_vocab_set(&V, i, T.str[i], T.slen[i]) != 0) {
            tok_vocab_free(&V);
            goto oom;
        }
    tok_bpe_options opt = {.byte_fallback = p->byte_fallback, .fuse_unk = true,
                           .ignore_merges = false, .unk_token = p->unk_token};
    if ((st = tok_bpe_from_parts(&V, T.merges, T.nmerges, &opt, &t->model))) goto done;
    if ((st = tok_finish(t, "train"))) goto done;
    *out = t;
    t = NULL;
    goto done;
oom:
    st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "train: out of memory");
done:
    attn_tok_free(t);
    wm_free(&wm);
    trainer_free(&T);
    free(freq);
    free(cp2id);
    free(alpha);
    return st;
}

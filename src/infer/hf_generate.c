/* hf_generate.c — transformers' generate for Hugging Face translation models (attn_infer.h:
 * attn_hf_generate): greedy decoding and beam search with transformers' logits processors, beam
 * scorer, length penalty and stopping rules, on the translation session's KV-cache decoder
 * (attn_translate_begin / step, translate_session_select: the same sub-layers as the model's
 * forward). Unlike transformers, which feeds a finished sentence padding until the batch ends,
 * a finished sentence leaves the session, and the first beam step runs one row per sentence
 * (FIRST_ROWS_MIN): each row's values do not depend on the other rows, so the search and its
 * results are transformers'. */
#include "attn_infer.h"

#include "../core/core-impl.h"
#include "../models/config-impl.h"
#include "infer-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

attn_hf_generate_options attn_hf_generate_default_options(void) {
    attn_hf_generate_options o;
    memset(&o, 0, sizeof o);
    o.num_beams = 1;
    o.length_penalty = 1.0f;
    o.early_stopping = ATTN_HF_EARLY_FALSE;
    o.max_length = 20;
    o.decoder_start_token_id = o.eos_token_id = o.pad_token_id = -1;
    o.forced_bos_token_id = o.forced_eos_token_id = -1;
    return o;
}

/* ---- generation_config.json ------------------------------------------------------------------ */

static attn_status get_id(json_t *root, const char *path, const char *key, int32_t *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return ATTN_STATUS_OK;
    if (json_is_array(v)) { /* eos_token_id: [id] */
        if (json_array_size(v) != 1)
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: \"%s\" lists %zu ids (attn's translation search takes one)", path,
                             key, json_array_size(v));
        v = json_array_get(v, 0);
    }
    int x = 0;
    ATTN_TRY(config_read_int(path, key, v, CONFIG_INT_INTEGRAL, &x));
    if (x < 0)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: \"%s\" must be an id >= 0 (got %d)", path, key,
                         x);
    *out = x;
    return ATTN_STATUS_OK;
}

static attn_status get_count(json_t *root, const char *path, const char *key, int lo, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return ATTN_STATUS_OK;
    int x = 0;
    ATTN_TRY(config_read_int(path, key, v, CONFIG_INT_INTEGRAL, &x));
    if (x < lo)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: \"%s\" must be >= %d (got %d)", path, key, lo,
                         x);
    *out = x;
    return ATTN_STATUS_OK;
}

static attn_status parse(json_t *root, const char *path, attn_hf_generate_options *o) {
    attn_status s;
    if ((s = get_count(root, path, "num_beams", 1, &o->num_beams)) ||
        (s = get_count(root, path, "max_length", 1, &o->max_length)) ||
        (s = get_count(root, path, "max_new_tokens", 1, &o->max_new_tokens)) ||
        (s = get_count(root, path, "min_length", 0, &o->min_length)) ||
        (s = get_count(root, path, "no_repeat_ngram_size", 0, &o->no_repeat_ngram_size)) ||
        (s = get_id(root, path, "decoder_start_token_id", &o->decoder_start_token_id)) ||
        (s = get_id(root, path, "eos_token_id", &o->eos_token_id)) ||
        (s = get_id(root, path, "pad_token_id", &o->pad_token_id)) ||
        (s = get_id(root, path, "forced_bos_token_id", &o->forced_bos_token_id)) ||
        (s = get_id(root, path, "forced_eos_token_id", &o->forced_eos_token_id)))
        return s;
    json_t *v = json_object_get(root, "length_penalty");
    if (v && !json_is_null(v) &&
        (s = config_read_float(path, "length_penalty", v, true, &o->length_penalty)))
        return s;
    v = json_object_get(root, "early_stopping");
    if (v && !json_is_null(v)) {
        if (json_is_boolean(v)) o->early_stopping = json_is_true(v) ? ATTN_HF_EARLY_TRUE
                                                                    : ATTN_HF_EARLY_FALSE;
        else if (json_is_string(v) && strcmp(json_string_value(v), "never") == 0)
            o->early_stopping = ATTN_HF_EARLY_NEVER;
        else
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: \"early_stopping\" must be true, false or \"never\"", path);
    }
    v = json_object_get(root, "bad_words_ids");
    if (v && !json_is_null(v)) {
        if (!json_is_array(v))
            return attn_fail(ATTN_STATUS_FORMAT, "%s: \"bad_words_ids\" must be a list of lists "
                             "of ids", path);
        if (json_array_size(v) > ATTN_HF_MAX_BAD_WORDS)
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: \"bad_words_ids\" has %zu sequences (attn keeps at most %d)",
                             path, json_array_size(v), ATTN_HF_MAX_BAD_WORDS);
        o->n_bad_words = 0;
        size_t i, j;
        json_t *w, *e;
        json_array_foreach(v, i, w) {
            if (!json_is_array(w) || json_array_size(w) < 1 ||
                json_array_size(w) > ATTN_HF_MAX_BAD_LEN)
                return attn_fail(ATTN_STATUS_FORMAT,
                                 "%s: \"bad_words_ids\"[%zu] must be a list of 1 to %d ids", path,
                                 i, ATTN_HF_MAX_BAD_LEN);
            json_array_foreach(w, j, e) {
                if (!json_is_integer(e) || json_integer_value(e) < 0 ||
                    json_integer_value(e) > INT32_MAX)
                    return attn_fail(ATTN_STATUS_FORMAT,
                                     "%s: \"bad_words_ids\"[%zu][%zu] must be an id >= 0", path,
                                     i, j);
                o->bad_words[i][j] = (int32_t)json_integer_value(e);
            }
            o->bad_words_len[i] = (int)json_array_size(w);
            o->n_bad_words++;
        }
    }
    return ATTN_STATUS_OK;
}

attn_status attn_hf_generate_config_load(const char *dir, attn_hf_generate_options *o) {
    if (!dir || !o) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "hf generate: NULL argument");
    *o = attn_hf_generate_default_options();
    char path[4096];
    if (snprintf(path, sizeof path, "%s/generation_config.json", dir) >= (int)sizeof path)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "hf generate: directory name too long");
    struct stat sb;
    if (stat(path, &sb) != 0) snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *root;
    ATTN_TRY(config_json_load(path, JSON_REJECT_DUPLICATES, &root));
    attn_status s = parse(root, path, o);
    json_decref(root);
    return s;
}

/* ---- the processors ---------------------------------------------------------------------------- */

typedef struct {
    const attn_hf_generate_options *o;
    int V, max_length;
} procs;

/* transformers' logits processors, in its order, on one row's scores x (V) of a sequence h
 * (len tokens, the start included). */
static void process(const procs *p, const int32_t *h, int len, float *x) {
    const attn_hf_generate_options *o = p->o;
    const int V = p->V, n = o->no_repeat_ngram_size;
    if (n > 0 && len + 1 >= n) {
        /* ban the token that would repeat an n-gram: prefix h[len − n + 1 .. len) */
        for (int i = 0; i + n <= len; i++) {
            if (n > 1 && memcmp(h + i, h + len - n + 1, (size_t)(n - 1) * sizeof *h) != 0)
                continue;
            const int32_t v = h[i + n - 1];
            if (v >= 0 && v < V) x[v] = -INFINITY;
        }
    }
    for (int w = 0; w < o->n_bad_words; w++) {
        const int L = o->bad_words_len[w];
        const int32_t last = o->bad_words[w][L - 1];
        if (L == 1 && last == o->eos_token_id) continue; /* transformers drops [eos] */
        if (last < 0 || last >= V || L - 1 > len) continue;
        if (L == 1 ||
            memcmp(h + len - (L - 1), o->bad_words[w], (size_t)(L - 1) * sizeof *h) == 0)
            x[last] = -INFINITY;
    }
    if (len < o->min_length && o->eos_token_id < V) x[o->eos_token_id] = -INFINITY;
    if (o->forced_bos_token_id >= 0 && len == 1) {
        for (int v = 0; v < V; v++) x[v] = -INFINITY;
        x[o->forced_bos_token_id] = 0.0f;
    }
    if (o->forced_eos_token_id >= 0 && len == p->max_length - 1) {
        for (int v = 0; v < V; v++) x[v] = -INFINITY;
        x[o->forced_eos_token_id] = 0.0f;
    }
}

/* ---- greedy (transformers' _sample with do_sample=False) ---------------------------------- */

/* Row j of the session is active sentence j, sentence sent[j] of the batch (hist row j is its
 * sequence); a sentence that ends leaves the session (translate_session_select), so later steps
 * cost only what the others need. transformers feeds finished rows padding instead: each row's
 * values do not depend on the other rows, so the ids are the same. */
static attn_status greedy(attn_translate_session *s, const procs *p, int B, int32_t *hist,
                          int capL, float *x, int32_t *tok, int max_out, int32_t *out_ids,
                          int32_t *out_len, float *out_score) {
    const attn_hf_generate_options *o = p->o;
    const int V = p->V;
    int32_t *sent = malloc((size_t)B * sizeof *sent), *keep = malloc((size_t)B * sizeof *keep);
    double *lp = calloc((size_t)B, sizeof *lp);
    if (!sent || !keep || !lp) {
        free(sent), free(keep), free(lp);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "hf generate: out of memory");
    }
    for (int b = 0; b < B; b++) sent[b] = b, out_len[b] = 0;
    attn_status st = ATTN_STATUS_OK;
    int len = 1, S = B;
    while (!st && S > 0 && len < p->max_length) {
        for (int j = 0; j < S; j++) tok[j] = hist[(size_t)j * capL + len - 1];
        if ((st = attn_translate_step(s, tok))) break;
        const float *logits = attn_translate_logits(s);
        int nk = 0;
        for (int j = 0; j < S; j++) {
            const int b = sent[j];
            const float *l = logits + (size_t)j * V;
            memcpy(x, l, (size_t)V * sizeof *x);
            process(p, hist + (size_t)j * capL, len, x);
            int arg = 0;
            for (int v = 1; v < V; v++)
                if (x[v] > x[arg]) arg = v;
            /* the chosen token's log-probability under the unprocessed scores (x is free) */
            attn_log_softmax_forward(1, V, l, x);
            lp[b] += (double)x[arg];
            if (out_len[b] >= max_out) {
                st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                               "hf generate: sentence %d needs more than max_out %d tokens", b,
                               max_out);
                break;
            }
            out_ids[(size_t)b * max_out + out_len[b]++] = arg;
            hist[(size_t)j * capL + len] = arg;
            if (arg != o->eos_token_id) keep[nk++] = j;
        }
        len++;
        if (st || nk == S) continue;
        /* keep is ascending (keep[j] >= j): the moves go front to back in place */
        for (int j = 0; j < nk; j++) {
            sent[j] = sent[keep[j]];
            if (keep[j] != j)
                memcpy(hist + (size_t)j * capL, hist + (size_t)keep[j] * capL,
                       (size_t)len * sizeof *hist);
        }
        st = translate_session_select(s, nk, keep, 1, keep);
        S = nk;
    }
    if (out_score)
        for (int b = 0; b < B; b++) out_score[b] = (float)lp[b];
    free(sent), free(keep), free(lp);
    return st;
}

/* ---- beam search (transformers' _beam_search with BeamSearchScorer) ---------------------------- */

typedef struct {
    double score;
    int len;       /* tokens after the start */
    bool eos;      /* ended by </s> (appended on output) */
    int32_t *ids;  /* (capL) */
} hyp;

typedef struct {
    hyp *h;        /* [K] in insertion order (deletions keep the order, as a Python list) */
    int n;
    double worst;
    bool done;
} hyps;

/* BeamHypotheses.add: ids (len tokens after the start), score = sum / generated_len^lp. */
static void hyps_add(hyps *H, int K, const int32_t *ids, int len, bool eos, double sum,
                     int generated_len, double lpen) {
    const double score = sum / pow((double)generated_len, lpen);
    if (!(H->n < K || score > H->worst)) return;
    hyp *slot;
    if (H->n < K) {
        slot = &H->h[H->n++];
        slot->score = score;
        H->worst = fmin(score, H->worst);
    } else {
        /* append, then drop the smallest (first in (score, index) order); worst = next */
        int lo = 0;
        for (int i = 1; i < K; i++)
            if (H->h[i].score < H->h[lo].score) lo = i;
        double second = score;
        bool new_is_lowest = score < H->h[lo].score;
        if (new_is_lowest) return; /* unreachable: score > worst = the smallest */
        for (int i = 0; i < K; i++)
            if (i != lo && H->h[i].score < second) second = H->h[i].score;
        int32_t *keep = H->h[lo].ids;
        memmove(&H->h[lo], &H->h[lo + 1], (size_t)(K - 1 - lo) * sizeof(hyp));
        slot = &H->h[K - 1];
        slot->ids = keep;
        slot->score = score;
        H->worst = second;
    }
    slot->len = len, slot->eos = eos;
    memcpy(slot->ids, ids, (size_t)len * sizeof *ids);
}

typedef struct {
    float sc;
    int idx; /* beam · V + token */
} cand;

static void cand_insert(cand *top, int *nt, int M, float sc, int idx) {
    if (*nt == M && !(sc > top[M - 1].sc)) return;
    int i = *nt < M ? (*nt)++ : M - 1;
    while (i > 0 && top[i - 1].sc < sc) {
        top[i] = top[i - 1];
        i--;
    }
    top[i].sc = sc, top[i].idx = idx;
}

/* cand_insert of x[v] + b (index base + v) for v = 0 .. V-1 in order, skipping blocks of 16 where
 * no score beats the list's last once it is full (the same float sums and the same comparison as
 * cand_insert, so the list is exactly the element-by-element one; the test of a block is four
 * SSE compares: gcc left the plain loop scalar). */
static void cand_scan(cand *top, int *nt, int M, const float *x, int V, float b, int base) {
    int v = 0;
#if defined(__SSE2__)
    const __m128 vb = _mm_set1_ps(b);
#endif
    for (; v + 16 <= V; v += 16) {
        if (*nt == M) {
            const float thr = top[M - 1].sc;
#if defined(__SSE2__) /* the same float sums and comparisons, four at a time */
            const __m128 vt = _mm_set1_ps(thr);
            const __m128 h = _mm_or_ps(
                _mm_or_ps(_mm_cmpgt_ps(_mm_add_ps(_mm_loadu_ps(x + v), vb), vt),
                          _mm_cmpgt_ps(_mm_add_ps(_mm_loadu_ps(x + v + 4), vb), vt)),
                _mm_or_ps(_mm_cmpgt_ps(_mm_add_ps(_mm_loadu_ps(x + v + 8), vb), vt),
                          _mm_cmpgt_ps(_mm_add_ps(_mm_loadu_ps(x + v + 12), vb), vt)));
            if (!_mm_movemask_ps(h)) continue;
#else
            int hit = 0;
            for (int j = 0; j < 16; j++) hit |= x[v + j] + b > thr;
            if (!hit) continue;
#endif
        }
        for (int j = 0; j < 16; j++) cand_insert(top, nt, M, x[v + j] + b, base + v + j);
    }
    for (; v < V; v++) cand_insert(top, nt, M, x[v] + b, base + v);
}

/* The session / hist row holding beam k of active sentence j (R rows each: at R = 1 every beam
 * is the sentence's one row), and that beam's running score (bs per row; at R = 1 beams 1 ..
 * K−1 start at transformers' −1e9). */
static inline int beam_row(int j, int R, int k) { return R == 1 ? j : j * R + k; }
static inline float beam_score(const float *bs, int j, int R, int k) {
    return R == 1 && k ? -1e9f : bs[beam_row(j, R, k)];
}

/* Active sentence j (sentence sent[j] of the batch) has R rows j·R .. j·R + R − 1 in the session
 * and in hist: R = 1 at a first step run with one row per sentence (R0 = 1: transformers' K rows
 * would all be the start token, beams 1 .. K−1 at score −1e9, so their scores are row 0's plus
 * −1e9, computed here from row 0's), else K. A finished sentence leaves the session at once
 * (translate_session_select); transformers keeps feeding it padding, which changes no other row's
 * values, so the search is the same. */
static attn_status beam(attn_translate_session *s, const procs *p, int B, int K, int R0,
                        int32_t *hist, int capL, float *x, int32_t *tok, int max_out,
                        int32_t *out_ids, int32_t *out_len, float *out_score) {
    const attn_hf_generate_options *o = p->o;
    const int V = p->V, N = B * K, M = 2 * K;
    const double lpen = o->length_penalty;
    float *bs = malloc((size_t)N * sizeof *bs), *nbs = malloc((size_t)N * sizeof *nbs);
    int32_t *ntok = malloc((size_t)N * sizeof *ntok), *npar = malloc((size_t)N * sizeof *npar);
    int32_t *rows = malloc((size_t)N * sizeof *rows);
    int32_t *sent = malloc((size_t)B * sizeof *sent), *keep = malloc((size_t)B * sizeof *keep);
    int32_t *hist2 = malloc((size_t)N * capL * sizeof *hist2);
    cand *top = malloc((size_t)M * sizeof *top);
    hyps *H = calloc((size_t)B, sizeof *H);
    hyp *pool = calloc((size_t)B * K, sizeof *pool);
    int32_t *ids_pool = malloc((size_t)B * K * capL * sizeof *ids_pool);
    attn_status st = ATTN_STATUS_OK;
    if (!bs || !nbs || !ntok || !npar || !rows || !sent || !keep || !hist2 || !top || !H ||
        !pool || !ids_pool) {
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "hf generate: out of memory");
        goto done;
    }
    for (int b = 0; b < B; b++) {
        H[b].h = pool + (size_t)b * K;
        for (int k = 0; k < K; k++) H[b].h[k].ids = ids_pool + ((size_t)b * K + k) * capL;
        H[b].worst = 1e9;
        sent[b] = b;
    }
    int S = B, R = R0;
    for (int n = 0; n < S * R; n++) bs[n] = n % R ? -1e9f : 0.0f;
    int len = 1; /* tokens in each row's sequence, the start included */
    while (S > 0 && len < p->max_length) {
        for (int n = 0; n < S * R; n++) tok[n] = hist[(size_t)n * capL + len - 1];
        if ((st = attn_translate_step(s, tok))) break;
        const float *logits = attn_translate_logits(s);
        const int cur_len = len + 1; /* transformers' cur_len in the scorer */
        for (int j = 0; j < S; j++) {
            const int b = sent[j], r0 = j * K;
            int nt = 0;
            for (int k = 0; k < K; k++) {
                const int n = beam_row(j, R, k);
                if (k == 0 || R > 1) {
                    /* float32, as torch */
                    attn_log_softmax_forward(1, V, logits + (size_t)n * V, x);
                    process(p, hist + (size_t)n * capL, len, x);
                }
                cand_scan(top, &nt, M, x, V, beam_score(bs, j, R, k), k * V);
            }
            int nb = 0;
            for (int i = 0; i < nt && nb < K; i++) {
                const int k = top[i].idx / V, v = top[i].idx % V, n = beam_row(j, R, k);
                if (v == o->eos_token_id) {
                    if (i >= K) continue;
                    hyps_add(&H[b], K, hist + (size_t)n * capL + 1, len - 1, true,
                             (double)top[i].sc, cur_len - 1, lpen);
                } else {
                    nbs[r0 + nb] = top[i].sc, ntok[r0 + nb] = v, npar[r0 + nb] = n;
                    nb++;
                }
            }
            if (nb < K) {
                st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                               "hf generate: fewer than %d live candidates (vocabulary %d too "
                               "small for the beam)",
                               K, V);
                break;
            }
            /* BeamHypotheses.is_done with the best candidate's score */
            if (H[b].n >= K) {
                const double best = (double)top[0].sc;
                bool d;
                if (o->early_stopping == ATTN_HF_EARLY_TRUE) d = true;
                else if (o->early_stopping == ATTN_HF_EARLY_FALSE)
                    d = H[b].worst >= best / pow((double)(cur_len - 1), lpen);
                else
                    d = H[b].worst >= best / pow((double)(lpen > 0.0 ? p->max_length - 1
                                                                     : cur_len - 1),
                                                 lpen);
                H[b].done = d;
            }
        }
        if (st) break;
        /* the new rows of the sentences that go on: parent's sequence + the new token; the
         * session's rows follow (reordered, the finished sentences' dropped) */
        int nk = 0;
        for (int j = 0; j < S; j++)
            if (!H[sent[j]].done) keep[nk++] = j;
        for (int jn = 0; jn < nk; jn++)
            for (int r = 0; r < K; r++) {
                const int o_row = keep[jn] * K + r, n_row = jn * K + r, par = npar[o_row];
                rows[n_row] = par;
                memcpy(hist2 + (size_t)n_row * capL, hist + (size_t)par * capL,
                       (size_t)len * sizeof *hist);
                hist2[(size_t)n_row * capL + len] = ntok[o_row];
                bs[n_row] = nbs[o_row];
            }
        memcpy(hist, hist2, (size_t)nk * K * capL * sizeof *hist);
        for (int jn = 0; jn < nk; jn++) sent[jn] = sent[keep[jn]];
        if ((st = translate_session_select(s, nk, keep, K, rows))) break;
        S = nk, R = K;
        len++;
    }
    if (st) goto done;
    /* finalize: the live hypotheses of the unfinished sentences, then each sentence's best */
    for (int j = 0; j < S; j++)
        for (int k = 0; k < K; k++)
            hyps_add(&H[sent[j]], K, hist + (size_t)beam_row(j, R, k) * capL + 1, len - 1, false,
                     (double)beam_score(bs, j, R, k), len - 1, lpen);
    for (int b = 0; b < B; b++) {
        int best = 0; /* sorted by score, last popped: the last of equal maxima */
        for (int i = 1; i < H[b].n; i++)
            if (H[b].h[i].score >= H[b].h[best].score) best = i;
        const hyp *h = &H[b].h[best];
        const int n_out = h->len + (h->eos ? 1 : 0);
        if (n_out > max_out) {
            st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                           "hf generate: sentence %d needs %d tokens, more than max_out %d", b,
                           n_out, max_out);
            goto done;
        }
        memcpy(out_ids + (size_t)b * max_out, h->ids, (size_t)h->len * sizeof *h->ids);
        if (h->eos) out_ids[(size_t)b * max_out + h->len] = o->eos_token_id;
        out_len[b] = n_out;
        if (out_score) out_score[b] = (float)h->score;
    }
done:
    free(bs), free(nbs), free(ntok), free(npar), free(rows), free(sent), free(keep), free(hist2);
    free(top), free(H), free(pool), free(ids_pool);
    return st;
}

attn_status attn_hf_generate(attn_translate_session *s, const attn_hf_generate_options *o, int B,
                             int Ts, const int32_t *src, const int32_t *src_len, int max_out,
                             int32_t *out_ids, int32_t *out_len, float *out_score) {
    if (!s || !o || !src || !src_len || !out_ids || !out_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "hf generate: NULL argument");
    const attn_encdec_model *m = translate_session_model(s);
    const int V = m->cfg.tgt_vocab;
    int capK, capT, capS;
    translate_session_caps(s, &capK, &capT, &capS);
    attn_hf_generate_options oo = *o;
    if (oo.pad_token_id < 0) oo.pad_token_id = oo.eos_token_id;
    const int max_length = oo.max_new_tokens > 0 ? 1 + oo.max_new_tokens : oo.max_length;
    const int32_t ids[] = {oo.decoder_start_token_id, oo.eos_token_id, oo.pad_token_id};
    static const char *const id_names[] = {"decoder_start_token_id", "eos_token_id",
                                           "pad_token_id"};
    for (int i = 0; i < 3; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "hf generate: %s %d is not an id of the target vocabulary [0, %d)",
                             id_names[i], (int)ids[i], V);
    if (oo.forced_bos_token_id >= V || oo.forced_eos_token_id >= V)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "hf generate: forced_bos_token_id %d / forced_eos_token_id %d outside "
                         "the target vocabulary [0, %d)",
                         (int)oo.forced_bos_token_id, (int)oo.forced_eos_token_id, V);
    if (oo.num_beams < 1 || oo.num_beams > capK)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "hf generate: num_beams %d outside [1, %d] (the session's beam)",
                         oo.num_beams, capK);
    if (max_length < 1 || max_length - 1 > capT)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "hf generate: max_length %d needs %d decoder positions, the session has "
                         "%d (the model's max_position_embeddings or the session's max_tgt)",
                         max_length, max_length - 1, capT);
    if (!isfinite(oo.length_penalty) || max_out < 0 || B < 1 || B > capS)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "hf generate: bad length_penalty, max_out or batch size %d (session: %d)",
                         B, capS);
    const int K = oo.num_beams, N = B * K, capL = max_length + 1;
    /* the first step with one row per sentence when the batch is large enough (beam's R0) */
    const int R0 = K > 1 && B >= FIRST_ROWS_MIN ? 1 : K;
    ATTN_TRY(attn_translate_begin(s, B, Ts, src, src_len, R0));
    int32_t *hist = malloc((size_t)N * capL * sizeof *hist), *tok = malloc((size_t)N * sizeof *tok);
    float *x = malloc((size_t)V * sizeof *x);
    attn_status st = ATTN_STATUS_OK;
    if (!hist || !tok || !x) st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "hf generate: out of memory");
    const procs p = {&oo, V, max_length};
    if (!st) {
        for (int n = 0; n < N; n++) hist[(size_t)n * capL] = oo.decoder_start_token_id;
        st = K == 1 ? greedy(s, &p, B, hist, capL, x, tok, max_out, out_ids, out_len, out_score)
                    : beam(s, &p, B, K, R0, hist, capL, x, tok, max_out, out_ids, out_len,
                           out_score);
    }
    free(hist), free(tok), free(x);
    return st;
}

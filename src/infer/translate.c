/* translate.c — greedy and beam-search translation over a KV cache (attn_infer.h).
 *
 * The decoder step is the encoder–decoder's own (encdec_decoder_step: the same block-layer
 * sub-layers as the training forward, in evaluation mode, for one new position per hypothesis),
 * so its logits match the full forward's on the same prefix (tests/test_translate.c checks every
 * step). What differs is only what is recomputed: past keys/values come from each layer's cache,
 * the cross-attention keys/values of the encoder output are projected once per batch, and the
 * decoder's weights are packed for the GEMM once per session.
 *
 * Row layout: hypothesis r of active sentence j is row j·R + r (R = beam size, 1 for greedy), so
 * a sentence's R queries are one "batch element" of R queries for the cross-attention kernel and
 * no per-hypothesis copy of the encoder's keys/values is needed. Finished sentences are removed
 * by compaction (moving rows and per-sentence blocks towards the front), so late steps cost only
 * what the remaining sentences need. */
#include "attn_infer.h"

#include "attn_kernels.h"
#include "attn_tok.h"
#include "../core/core-impl.h"
#include "../models/encdec-impl.h"
#include "infer-impl.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

struct attn_translate_session {
    const attn_encdec_model *m;
    int capS, capK, capTs, capT; /* sentences, beam, source length, decoder positions */
    int capN;                    /* capS · capK hypothesis rows */
    int C, F, V, H, L;           /* d_model, d_ff, target vocabulary, heads, decoder layers */
    attn_encdec_state *enc;      /* encoder run state (capS, capTs) */
    encdec_packed_decoder pk;    /* the decoder's maps packed once for the GEMM */
    attn_nn_kv *self_kv;         /* [L] views of kc, vc for the current rows */
    attn_nn_kv *cross_kv;        /* [L] views of ckv for the current sentences */
    float *mem;                  /* (capS·capTs, C) encoder output of the current batch */
    float **ckv;                 /* [L] (S, Ts, 2C) cross-attention keys | values per sentence */
    float **kc, **vc;            /* [L] (capN, capT, C) self-attention key / value caches */
    float *stage;                /* (capN, capT, C) scratch for reordering cache rows */
    float *x;                    /* (capN, C) residual stream of the current step */
    float *h;                    /* (capN, C) pre-LN input of a sub-layer */
    float *qkv;                  /* (capN, 3C) fused self-attention projections / cross query */
    float *att;                  /* (capN, C) attention output before W_O */
    float *y;                    /* (capN, C) sub-layer output */
    float *ff;                   /* (capN, F) feed-forward hidden layer */
    float *logits;               /* (capN, V) */
    float *lse;                  /* (capN) log-sum-exp of each logits row */
    float *probs;                /* (capN, V) softmax scratch for the log-sum-exp */
    int32_t *src_len;            /* (capS) source lengths of the active sentences */
    int32_t *sent;               /* (capS) original index (in the batch) of active sentence j */
    int32_t *rows;               /* (capN) scratch: gather sources */
    /* search bookkeeping */
    int32_t *hist, *hist2;       /* (capN, capT) tokens generated so far by each hypothesis */
    int32_t *tok;                /* (capN) tokens to feed at the next step */
    double *score, *score2;      /* (capN) running log-probability of each hypothesis */
    int32_t *npar, *ntok;        /* (capN) chosen parent row / token per new beam (old layout) */
    double *nscore;              /* (capN) */
    int32_t *keep;               /* (capS) active sentences that go on */
    uint8_t *done;               /* (capS) sentence j finished this step */
    int32_t *lim;                /* (capS) length limit per original sentence */
    int32_t *fin_ids;            /* (capS, capK, capT) finished hypotheses per original sentence */
    int32_t *fin_len;            /* (capS, capK) */
    double *fin_score;           /* (capS, capK) normalized scores */
    int32_t *n_fin;              /* (capS) */
    int S, R, N, Ts, t;          /* active sentences, rows per sentence, rows, source len, pos */
    bool begun;
    /* Worker sessions for attn_translate_many's inter-batch threads (made on first use). */
    attn_translate_session **workers; /* [n_workers] */
    int n_workers;
};

const attn_encdec_model *translate_session_model(const attn_translate_session *s) {
    return s->m;
}

void translate_session_caps(const attn_translate_session *s, int *max_beam, int *max_tgt,
                            int *max_sentences) {
    *max_beam = s->capK, *max_tgt = s->capT, *max_sentences = s->capS;
}

attn_translate_options attn_translate_default_options(void) {
    attn_translate_options o;
    memset(&o, 0, sizeof o);
    o.beam_size = 4;
    o.length_penalty = 0.6f;
    o.max_len = 0;
    o.max_len_a = 2.0f;
    o.max_len_b = 10;
    o.stop = ATTN_TRANSLATE_STOP_EXACT;
    o.bos_id = 2;
    o.eos_id = 3;
    return o;
}

void attn_translate_session_free(attn_translate_session *s) {
    if (!s) return;
    for (int i = 0; i < s->n_workers; i++) attn_translate_session_free(s->workers[i]);
    attn_free(s->workers);
    attn_encdec_state_free(s->enc);
    encdec_packed_decoder_free(&s->pk);
    attn_free(s->self_kv);
    attn_free(s->cross_kv);
    for (int l = 0; l < s->L; l++) {
        if (s->ckv) attn_free(s->ckv[l]);
        if (s->kc) attn_free(s->kc[l]);
        if (s->vc) attn_free(s->vc[l]);
    }
    attn_free(s->ckv), attn_free(s->kc), attn_free(s->vc);
    void *bufs[] = {s->mem,   s->stage,  s->x,      s->h,     s->qkv,    s->att,      s->y,
                    s->ff,    s->logits, s->lse,    s->probs, s->src_len, s->sent,   s->rows,
                    s->hist,  s->hist2,  s->tok,    s->score, s->score2, s->npar,     s->ntok,
                    s->nscore, s->keep,  s->done,   s->lim,   s->fin_ids, s->fin_len, s->fin_score,
                    s->n_fin};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) attn_free(bufs[i]);
    attn_free(s);
}

attn_status attn_translate_session_init(const attn_encdec_model *m, int max_sentences,
                                        int max_beam, int max_src, int max_tgt,
                                        attn_translate_session **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate: NULL argument");
    *out = NULL;
    const attn_encdec_config *c = &m->cfg;
    if (max_sentences < 1 || max_beam < 1 || max_src < 1 || max_tgt < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "translate session: sizes must be >= 1 (sentences %d, beam %d, source "
                         "%d, target %d)",
                         max_sentences, max_beam, max_src, max_tgt);
    if (max_src > c->max_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "translate session: max_src %d exceeds the model's max_len %d", max_src,
                         c->max_len);
    max_tgt = ATTN_MIN(max_tgt, c->max_len);
    const double C = c->d_model, N = (double)max_sentences * max_beam, L = c->n_dec_layers;
    /* In double first: nothing absurd may reach the allocator. */
    double total = L * ((double)max_sentences * max_src * 2 * C + 2 * N * max_tgt * C) +
                   N * max_tgt * C + N * (7 * C + c->d_ff + c->tgt_vocab) + N * 2 * max_tgt;
    if (total > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)) || N * c->tgt_vocab > INT32_MAX ||
        N * max_tgt * C > INT32_MAX)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "translate session: %d sentences x beam %d x %d positions needs %.3g "
                         "floats, too large",
                         max_sentences, max_beam, max_tgt, total);
    attn_translate_session *s = attn_calloc(sizeof *s);
    if (!s) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    s->m = m;
    s->capS = max_sentences, s->capK = max_beam, s->capTs = max_src, s->capT = max_tgt;
    s->capN = max_sentences * max_beam;
    s->C = c->d_model, s->F = c->d_ff, s->V = c->tgt_vocab, s->H = c->n_head;
    s->L = c->n_dec_layers;
    attn_status st = attn_encdec_state_init(m, max_sentences, max_src, 1, &s->enc);
    if (st) {
        attn_translate_session_free(s);
        return st;
    }
    const size_t nS = (size_t)s->capS, nN = (size_t)s->capN, T = (size_t)s->capT;
    const size_t Cz = (size_t)s->C, f = sizeof(float), i4 = sizeof(int32_t), d8 = sizeof(double);
    bool ok = true;
#define ALLOC(field, bytes) ok = ok && ((s->field = attn_calloc(bytes)) != NULL)
    ALLOC(ckv, (size_t)s->L * sizeof(float *));
    ALLOC(kc, (size_t)s->L * sizeof(float *));
    ALLOC(vc, (size_t)s->L * sizeof(float *));
    for (int l = 0; ok && l < s->L; l++) {
        ALLOC(ckv[l], nS * (size_t)max_src * 2 * Cz * f);
        ALLOC(kc[l], nN * T * Cz * f);
        ALLOC(vc[l], nN * T * Cz * f);
    }
    ALLOC(self_kv, (size_t)s->L * sizeof(attn_nn_kv));
    ALLOC(cross_kv, (size_t)s->L * sizeof(attn_nn_kv));
    ALLOC(mem, nS * (size_t)max_src * Cz * f);
    ALLOC(stage, nN * T * Cz * f);
    ALLOC(x, nN * Cz * f);
    ALLOC(h, nN * Cz * f);
    ALLOC(qkv, nN * 3 * Cz * f);
    ALLOC(att, nN * Cz * f);
    ALLOC(y, nN * Cz * f);
    ALLOC(ff, nN * (size_t)s->F * f);
    ALLOC(logits, nN * (size_t)s->V * f);
    ALLOC(probs, nN * (size_t)s->V * f);
    ALLOC(lse, nN * f);
    ALLOC(src_len, nS * i4);
    ALLOC(sent, nS * i4);
    ALLOC(rows, nN * i4);
    ALLOC(hist, nN * T * i4);
    ALLOC(hist2, nN * T * i4);
    ALLOC(tok, nN * i4);
    ALLOC(score, nN * d8);
    ALLOC(score2, nN * d8);
    ALLOC(npar, nN * i4);
    ALLOC(ntok, nN * i4);
    ALLOC(nscore, nN * d8);
    ALLOC(keep, nS * i4);
    ALLOC(done, nS);
    ALLOC(lim, nS * i4);
    ALLOC(fin_ids, nN * T * i4);
    ALLOC(fin_len, nN * i4);
    ALLOC(fin_score, nN * d8);
    ALLOC(n_fin, nS * i4);
#undef ALLOC
    if (!ok) {
        attn_translate_session_free(s);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY,
                         "translate session: out of memory (%d sentences, beam %d)", max_sentences,
                         max_beam);
    }
    st = encdec_pack_decoder(m, &s->pk);
    if (st) {
        attn_translate_session_free(s);
        return st;
    }
    *out = s;
    return ATTN_STATUS_OK;
}

/* ---- the incremental decoder ------------------------------------------------------------- */

attn_status attn_translate_begin(attn_translate_session *s, int B, int Ts, const int32_t *src,
                                 const int32_t *src_len, int R) {
    if (!s || !src || !src_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate: NULL argument");
    if (B < 1 || B > s->capS || R < 1 || R > s->capK || Ts < 1 || Ts > s->capTs)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "translate: B=%d R=%d Ts=%d outside the session's capacity "
                         "(sentences %d, beam %d, source %d)",
                         B, R, Ts, s->capS, s->capK, s->capTs);
    s->begun = false;
    const attn_encdec_model *m = s->m;
    const int C = s->C;
    ATTN_TRY(attn_encdec_encode(m, s->enc, B, Ts, src, src_len, s->mem));
    /* Each layer's cross-attention K|V for all source positions, a sentence's block (Ts, 2C)
     * holding its keys and values side by side: one GEMM with the adjacent (w_k; w_v). */
    for (int l = 0; l < s->L; l++) {
        const attn_nn_kv kv = {s->ckv[l], s->ckv[l] + C, B, Ts, 2 * C, NULL, 0, false, NULL, NULL};
        ATTN_TRY(encdec_cross_kv(m, l, B, Ts, s->mem, &kv));
    }
    memcpy(s->src_len, src_len, (size_t)B * sizeof(int32_t));
    for (int b = 0; b < B; b++) s->sent[b] = b;
    s->S = B, s->R = R, s->N = B * R, s->Ts = Ts, s->t = 0;
    s->begun = true;
    return ATTN_STATUS_OK;
}

attn_status attn_translate_step(attn_translate_session *s, const int32_t *tokens) {
    if (!s || !tokens) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate: NULL argument");
    if (!s->begun)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate step: no attn_translate_begin");
    const attn_encdec_model *m = s->m;
    const int N = s->N, C = s->C, V = s->V, t = s->t;
    if (t >= s->capT)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "translate step: position %d beyond the session's %d target positions", t,
                         s->capT);
    for (int n = 0; n < N; n++)
        if (tokens[n] < 0 || tokens[n] >= V)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "translate step: token %d of hypothesis %d outside [0, %d)",
                             (int)tokens[n], n, V);
    ATTN_TRY(encdec_embed_target(m, N, tokens, t, s->x));
    for (int l = 0; l < s->L; l++) {
        s->self_kv[l] = (attn_nn_kv){s->kc[l], s->vc[l], N, s->capT, C, NULL, 0, false, NULL, NULL};
        s->cross_kv[l] = (attn_nn_kv){s->ckv[l], s->ckv[l] + C, s->S, s->Ts, 2 * C, NULL, 0, false, NULL, NULL};
    }
    const encdec_step step = {N,       s->S,        s->R,  t,      s->Ts,  s->src_len, s->self_kv,
                              s->cross_kv, s->x,    s->h,  s->y,   s->qkv, s->att,     s->ff,
                              s->logits, &s->pk};
    ATTN_TRY(encdec_decoder_step(m, &step));
    s->t = t + 1;
    return ATTN_STATUS_OK;
}

const float *attn_translate_logits(const attn_translate_session *s) {
    return s && s->begun && s->t > 0 ? s->logits : NULL;
}

/* One copy of a gather schedule: row dst of the cache (or, when stage_dst, stage slot dst) gets
 * row src of the cache (or, when stage_src, stage slot src). */
typedef struct {
    int32_t dst, src;
    bool stage_dst, stage_src;
} row_copy;

/* The copies that make new row i continue old row src[i] (i < Nnew, src[i] < capN) writing each
 * moved row once: a row is overwritten only after every row that reads it has been written (a
 * chain 0 -> 1 -> 2 is done from its end), and a cycle parks one row in the stage first. *ops has
 * room for 2 * Nnew copies; scratch (3 * capN ints). Returns the number of copies. */
static int gather_schedule(const int32_t *src, int Nnew, int capN, int *scratch, row_copy *ops) {
    int *readers = scratch, *parked = scratch + capN, *queue = scratch + 2 * capN;
    int n_ops = 0, n_pending = 0, qh = 0, qt = 0, n_parked = 0;
    memset(readers, 0, (size_t)capN * sizeof *readers);
    for (int i = 0; i < Nnew; i++) {
        parked[i] = -1;
        if (src[i] != i) readers[src[i]]++, n_pending++;
    }
    for (int i = 0; i < Nnew; i++)
        if (src[i] != i && readers[i] == 0) queue[qt++] = i;
    int scan = 0; /* where to look for a row on a cycle */
    while (n_pending > 0) {
        if (qh == qt) { /* only cycles left: park one of their rows */
            while (!(src[scan] != scan && readers[scan] > 0 && parked[scan] != -2)) scan++;
            const int r = scan, k = n_parked++;
            ops[n_ops++] = (row_copy){k, r, true, false};
            for (int j = 0; j < Nnew; j++)
                if (src[j] == r && j != r && parked[j] == -1) parked[j] = k;
            readers[r] = 0;
            queue[qt++] = r;
        }
        const int i = queue[qh++];
        const bool from_stage = parked[i] >= 0;
        ops[n_ops++] = (row_copy){i, from_stage ? parked[i] : src[i], false, from_stage};
        parked[i] = -2; /* written */
        n_pending--;
        if (!from_stage) {
            const int r = src[i];
            if (r < Nnew && src[r] != r && parked[r] != -2 && --readers[r] == 0) queue[qt++] = r;
        }
    }
    return n_ops;
}

/* New row i continues old row src[i] (i < Nnew): the caches' first t positions are gathered.
 * Any mapping (permutation, duplicates, compaction) is safe; rows that keep their place are not
 * copied, and the others once (gather_schedule; without memory for the schedule: every moved row
 * through the stage, twice). */
static void gather_rows(attn_translate_session *s, const int32_t *src, int Nnew) {
    const size_t row = (size_t)s->t * s->C, stride = (size_t)s->capT * s->C;
    if (row == 0) return;
    int moved = 0;
    for (int i = 0; i < Nnew; i++) moved += src[i] != i;
    if (!moved) return;
    int *scratch = malloc((size_t)3 * s->capN * sizeof *scratch);
    row_copy *ops = malloc((size_t)2 * Nnew * sizeof *ops);
    const int n_ops = scratch && ops ? gather_schedule(src, Nnew, s->capN, scratch, ops) : -1;
    for (int l = 0; l < s->L; l++)
        for (int kv = 0; kv < 2; kv++) {
            float *cache = kv ? s->vc[l] : s->kc[l];
            if (n_ops >= 0) {
                for (int o = 0; o < n_ops; o++)
                    memcpy((ops[o].stage_dst ? s->stage : cache) + (size_t)ops[o].dst * stride,
                           (ops[o].stage_src ? s->stage : cache) + (size_t)ops[o].src * stride,
                           row * sizeof(float));
                continue;
            }
            int j = 0;
            for (int i = 0; i < Nnew; i++)
                if (src[i] != i)
                    memcpy(s->stage + (size_t)j++ * stride, cache + (size_t)src[i] * stride,
                           row * sizeof(float));
            j = 0;
            for (int i = 0; i < Nnew; i++)
                if (src[i] != i)
                    memcpy(cache + (size_t)i * stride, s->stage + (size_t)j++ * stride,
                           row * sizeof(float));
        }
    free(scratch);
    free(ops);
}

attn_status attn_translate_reorder(attn_translate_session *s, const int32_t *parent) {
    if (!s || !parent) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate: NULL argument");
    if (!s->begun)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate reorder: no attn_translate_begin");
    for (int i = 0; i < s->N; i++)
        if (parent[i] < 0 || parent[i] >= s->N || parent[i] / s->R != i / s->R)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "translate reorder: parent[%d] = %d is not a row of sentence %d", i,
                             (int)parent[i], i / s->R);
    gather_rows(s, parent, s->N);
    return ATTN_STATUS_OK;
}

/* Keep only active sentences keep[0..nk) (ascending): their rows, per-sentence cross K/V blocks,
 * lengths and indices move to the front. The caller has already moved its own per-row data. */
static void compact(attn_translate_session *s, const int32_t *keep, int nk,
                    const int32_t *row_src) {
    gather_rows(s, row_src, nk * s->R);
    const size_t blk = (size_t)s->Ts * 2 * s->C;
    for (int j = 0; j < nk; j++) {
        if (keep[j] == j) continue;
        /* keep is ascending, so keep[j] > j and earlier blocks are already in place. */
        for (int l = 0; l < s->L; l++)
            memcpy(s->ckv[l] + (size_t)j * blk, s->ckv[l] + (size_t)keep[j] * blk,
                   blk * sizeof(float));
        s->src_len[j] = s->src_len[keep[j]];
        s->sent[j] = s->sent[keep[j]];
    }
    s->S = nk, s->N = nk * s->R;
}

attn_status translate_session_select(attn_translate_session *s, int nk, const int32_t *keep,
                                     int R, const int32_t *rows) {
    if (!s || (nk > 0 && (!keep || !rows)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate: NULL argument");
    if (!s->begun)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate select: no attn_translate_begin");
    if (nk < 0 || nk > s->S || R < 1 || R > s->capK)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "translate select: %d sentences of %d rows (session: %d sentences, beam "
                         "%d)",
                         nk, R, s->S, s->capK);
    for (int j = 0; j < nk; j++)
        if (keep[j] < (j ? keep[j - 1] + 1 : 0) || keep[j] >= s->S)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "translate select: keep[%d] = %d is not an ascending sentence index "
                             "below %d",
                             j, (int)keep[j], s->S);
    for (int i = 0; i < nk * R; i++)
        if (rows[i] < 0 || rows[i] >= s->N || rows[i] / s->R != keep[i / R])
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "translate select: rows[%d] = %d is not a row of sentence %d", i,
                             (int)rows[i], (int)keep[i / R]);
    s->R = R;
    compact(s, keep, nk, rows);
    return ATTN_STATUS_OK;
}

/* ---- search ---------------------------------------------------------------------------------- */

/* lse[n] = log Σ_v exp(logits[n, v]) for the active rows: log-probabilities are logit − lse. */
/* lse of each logits row. The vectorized softmax kernel does the exponentials; at the row's
 * maximum x* the probability is exp(x* − lse), so lse = x* − log p(x*), exact to rounding and
 * never underflowing (p(x*) >= 1/V). */
static void row_lse(attn_translate_session *s) {
    const int N = s->N, V = s->V;
    if (attn_softmax_forward(N, V, s->logits, s->probs) != ATTN_STATUS_OK) {
        /* Not reachable with the session's own sizes; keep a correct answer anyway. */
        for (int n = 0; n < N; n++) {
            const float *r = s->logits + (size_t)n * V;
            float mx = r[0];
            for (int v = 1; v < V; v++) mx = r[v] > mx ? r[v] : mx;
            double sum = 0;
            for (int v = 0; v < V; v++) sum += exp((double)r[v] - mx);
            s->lse[n] = (float)((double)mx + log(sum));
        }
        return;
    }
#pragma omp parallel for schedule(static) if ((size_t)N * V > 32768)
    for (int n = 0; n < N; n++) {
        const float *r = s->logits + (size_t)n * V;
        int arg = 0;
        for (int v = 1; v < V; v++)
            if (r[v] > r[arg]) arg = v;
        s->lse[n] = (float)((double)r[arg] - log((double)s->probs[(size_t)n * V + arg]));
    }
}

static double lp(const attn_translate_options *o, int len) {
    return o->length_penalty == 0.0f ? 1.0 : pow((5.0 + len) / 6.0, (double)o->length_penalty);
}

/* Output tokens allowed before </s> for a source of src_len tokens. */
static int length_limit(const attn_translate_session *s, const attn_translate_options *o,
                        int src_len) {
    int lim = ATTN_MIN(s->m->cfg.max_len, s->capT) - 1;
    if (o->max_len > 0) lim = ATTN_MIN(lim, o->max_len);
    if (o->max_len_a > 0.0f) {
        double r = floor((double)o->max_len_a * src_len + o->max_len_b);
        if (r < lim) lim = r < 0 ? 0 : (int)r;
    }
    return lim;
}

/* Record a finished hypothesis of original sentence b among its best K (replacing the worst
 * when full). ids (len) are the tokens before </s>. */
static void add_finished(attn_translate_session *s, int K, int b, const int32_t *ids, int len,
                         double sc) {
    int *nf = &s->n_fin[b];
    int slot = *nf;
    if (*nf == K) {
        slot = 0;
        for (int i = 1; i < K; i++)
            if (s->fin_score[(size_t)b * s->capK + i] < s->fin_score[(size_t)b * s->capK + slot])
                slot = i;
        if (!(sc > s->fin_score[(size_t)b * s->capK + slot])) return;
    } else {
        (*nf)++;
    }
    size_t k = (size_t)b * s->capK + slot;
    s->fin_score[k] = sc;
    s->fin_len[k] = len;
    memcpy(s->fin_ids + k * s->capT, ids, (size_t)len * sizeof(int32_t));
}

static double worst_finished(const attn_translate_session *s, int b) {
    double w = INFINITY;
    for (int i = 0; i < s->n_fin[b]; i++) w = fmin(w, s->fin_score[(size_t)b * s->capK + i]);
    return w;
}

static double best_finished(const attn_translate_session *s, int b) {
    double w = -INFINITY;
    for (int i = 0; i < s->n_fin[b]; i++) w = fmax(w, s->fin_score[(size_t)b * s->capK + i]);
    return w;
}

static bool banned(const attn_translate_session *s, const attn_translate_options *o, int v) {
    return v == s->m->cfg.pad_id || v == o->bos_id;
}

/* Candidate (score, row k, token v) of one sentence's beam step. */
typedef struct {
    double sc;
    int k, v;
} cand;

/* Insert candidate (sc, k, v) into top[0 .. *nt) (at most M, sorted by score descending): it
 * must beat the current last one when the list is full, and it goes after equal scores, so the
 * list is the M best under (score descending, then order of consideration). */
static inline void consider(cand *top, int *nt, int M, double sc, int k, int v) {
    if (*nt == M && !(sc > top[M - 1].sc)) return;
    int i = *nt < M ? (*nt)++ : M - 1;
    while (i > 0 && top[i - 1].sc < sc) {
        top[i] = top[i - 1];
        i--;
    }
    top[i].sc = sc, top[i].k = k, top[i].v = v;
}

/* Scan of one logits row r (V): the M-th largest value among the non-banned ids (*kth; -inf when
 * fewer than M), the row's maximum over all ids (*mx) and an id holding it (*arg). False when the
 * row holds a NaN or M > 16 (the caller then takes the plain path). Vectorized filter: a block of 16 values
 * is looked at one by one only when one of them beats the running M-th best. */
static bool row_scan(const attn_translate_session *s, const attn_translate_options *o,
                     const float *r, int M, float *kth, float *mx, int *arg) {
    const int V = s->V;
    if (M > 16) return false; /* beams over 8: the plain scan */
    float val[16]; /* M <= 16: sorted descending */
    int idx[16], nv = 0;
    float th = -INFINITY;
    bool nan = false;
    int v = 0;
#define TR_TAKE(x_, i_)                                                                          \
    do {                                                                                         \
        const float x = (x_);                                                                    \
        const int id = (i_);                                                                     \
        if (x != x) nan = true;                                                                  \
        if ((nv < M || x > th) && !banned(s, o, id)) {                                           \
            int p = nv < M ? nv++ : M - 1;                                                       \
            while (p > 0 && val[p - 1] < x) {                                                    \
                val[p] = val[p - 1], idx[p] = idx[p - 1];                                        \
                p--;                                                                             \
            }                                                                                    \
            val[p] = x, idx[p] = id;                                                             \
            if (nv == M) th = val[M - 1];                                                        \
        }                                                                                        \
    } while (0)
#if defined(__SSE2__)
    __m128 un = _mm_setzero_ps();
    for (; v + 16 <= V; v += 16) {
        const __m128 a = _mm_loadu_ps(r + v), b = _mm_loadu_ps(r + v + 4),
                     c = _mm_loadu_ps(r + v + 8), d = _mm_loadu_ps(r + v + 12);
        const __m128 t = _mm_set1_ps(th);
        un = _mm_or_ps(un, _mm_or_ps(_mm_cmpunord_ps(a, b), _mm_cmpunord_ps(c, d)));
        const __m128 gt = _mm_or_ps(_mm_or_ps(_mm_cmpgt_ps(a, t), _mm_cmpgt_ps(b, t)),
                                    _mm_or_ps(_mm_cmpgt_ps(c, t), _mm_cmpgt_ps(d, t)));
        if (nv < M || _mm_movemask_ps(gt))
            for (int u = 0; u < 16; u++) TR_TAKE(r[v + u], v + u);
    }
    if (_mm_movemask_ps(un)) nan = true;
#endif
    for (; v < V; v++) TR_TAKE(r[v], v);
#undef TR_TAKE
    if (nan) return false;
    *kth = nv == M ? val[M - 1] : -INFINITY;
    float m = -INFINITY;
    int a = 0;
    if (nv) m = val[0], a = idx[0];
    /* The banned ids count for the maximum (the log-sum-exp is over the whole row). */
    const int ban[2] = {s->m->cfg.pad_id, o->bos_id};
    for (int i = 0; i < 2; i++)
        if (ban[i] >= 0 && ban[i] < V && (r[ban[i]] > m || (r[ban[i]] == m && ban[i] < a)))
            m = r[ban[i]], a = ban[i];
    if (m == -INFINITY) { /* all -inf: the plain path's answer (first id) */
        a = 0;
        m = r[0];
    }
    *mx = m, *arg = a;
    return true;
}

/* lse of logits row n from the softmax probabilities (as row_lse), given an id holding the
 * row's maximum. */
static void set_lse(attn_translate_session *s, int n, int arg) {
    const float *r = s->logits + (size_t)n * s->V;
    s->lse[n] = (float)((double)r[arg] - log((double)s->probs[(size_t)n * s->V + arg]));
}

static void set_lse_plain(attn_translate_session *s, int n) {
    const float *r = s->logits + (size_t)n * s->V;
    int arg = 0;
    for (int v = 1; v < s->V; v++)
        if (r[v] > r[arg]) arg = v;
    set_lse(s, n, arg);
}

/* Beam step (beam K) for active sentence j, whose hypotheses are rows j·R .. j·R + R − 1
 * (R = s->R: 1 at the first step, where all K beams would be the same <s>, else K): choose up to
 * K live continuations (npar/ntok/nscore at slots j·K ..; npar names a current row) and record
 * finished ones; done[j] when the sentence's search is over. The logits' lse of the live rows is
 * computed here (the softmax probabilities are already in s->probs). */
static void beam_sentence(attn_translate_session *s, const attn_translate_options *o, int K, int j,
                          cand *top) {
    const int R = s->R, V = s->V, t = s->t - 1; /* t: position just computed */
    const int b = s->sent[j];
    const int eos = o->eos_id;
    const int base = j * K, row0 = j * R;
    int nlive = 0;
    s->done[j] = 0;
    if (t >= s->lim[b]) {
        /* Length limit: every live hypothesis ends here with </s>. */
        for (int k = 0; k < R; k++) {
            int n = row0 + k;
            if (!isfinite(s->score[n])) continue;
            set_lse_plain(s, n);
            double sc = s->score[n] + (double)(s->logits[(size_t)n * V + eos] - s->lse[n]);
            add_finished(s, K, b, s->hist + (size_t)n * s->capT, t, sc / lp(o, t + 1));
        }
        s->done[j] = 1;
        return;
    }
    /* The best 2K candidates over (k, v) under (score descending, then (k, v) ascending): equal
     * scores keep the earlier (k, v), so results never depend on threads. Only the values of a
     * row that can be among its own best 2K are considered (the others cannot be among the
     * sentence's): with sc = off + r[v] non-decreasing in r[v], values below the row's 2K-th
     * largest minus a slack of many ulps of |off| + |r| can neither outrank nor tie them. */
    const int M = 2 * K;
    int nt = 0;
    for (int k = 0; k < R; k++) {
        int n = row0 + k;
        if (!isfinite(s->score[n])) continue;
        const float *r = s->logits + (size_t)n * V;
        float kth = -INFINITY, mx = 0;
        int arg = 0;
        const bool fast = row_scan(s, o, r, M, &kth, &mx, &arg);
        if (fast)
            set_lse(s, n, arg);
        else
            set_lse_plain(s, n);
        const double off = s->score[n] - (double)s->lse[n];
        if (!fast || !isfinite(off) || !(kth > -INFINITY)) {
            for (int v = 0; v < V; v++) {
                if (banned(s, o, v)) continue;
                consider(top, &nt, M, off + (double)r[v], k, v);
            }
            continue;
        }
        const double slack = (fabs(off) + fabs((double)kth) + 1.0) * 1e-12;
        const double td = (double)kth - slack;
        float tau = (float)td; /* rounded down: tau <= td */
        if ((double)tau > td) tau = nextafterf(tau, -INFINITY);
        int v = 0;
#if defined(__SSE2__)
        const __m128 tt = _mm_set1_ps(tau);
        for (; v + 16 <= V; v += 16) {
            const __m128 ge =
                _mm_or_ps(_mm_or_ps(_mm_cmpge_ps(_mm_loadu_ps(r + v), tt),
                                    _mm_cmpge_ps(_mm_loadu_ps(r + v + 4), tt)),
                          _mm_or_ps(_mm_cmpge_ps(_mm_loadu_ps(r + v + 8), tt),
                                    _mm_cmpge_ps(_mm_loadu_ps(r + v + 12), tt)));
            if (!_mm_movemask_ps(ge)) continue;
            for (int u = v; u < v + 16; u++)
                if (r[u] >= tau && !banned(s, o, u)) consider(top, &nt, M, off + (double)r[u], k, u);
        }
#endif
        for (; v < V; v++)
            if (r[v] >= tau && !banned(s, o, v)) consider(top, &nt, M, off + (double)r[v], k, v);
    }
    for (int i = 0; i < nt && nlive < K; i++) {
        const int n = row0 + top[i].k;
        if (top[i].v == eos) {
            /* As in Hugging Face: an end among the top K candidates finishes a hypothesis; one
             * ranked lower is beaten by K live continuations anyway. */
            if (i < K)
                add_finished(s, K, b, s->hist + (size_t)n * s->capT, t,
                             top[i].sc / lp(o, t + 1));
            continue;
        }
        s->npar[base + nlive] = n;
        s->ntok[base + nlive] = top[i].v;
        s->nscore[base + nlive] = top[i].sc;
        nlive++;
    }
    const double best_live = nlive ? s->nscore[base] : -INFINITY;
    for (int r = nlive; r < K; r++) { /* dead filler rows: never expanded */
        s->npar[base + r] = row0;
        s->ntok[base + r] = eos;
        s->nscore[base + r] = -INFINITY;
    }
    if (!nlive) {
        s->done[j] = 1;
        return;
    }
    if (s->n_fin[b] == 0) return;
    if (o->stop == ATTN_TRANSLATE_STOP_HEURISTIC) {
        if (s->n_fin[b] == K && worst_finished(s, b) >= best_live / lp(o, t + 2)) s->done[j] = 1;
        return;
    }
    /* A live hypothesis (t + 1 tokens now) ends at a length L in [t + 2, lim + 1]; its
     * log-probability only falls, so its best normalized score is best_live / max lp(L). */
    const double den = o->length_penalty < 0.0f ? lp(o, t + 2) : lp(o, s->lim[b] + 1);
    if (s->n_fin[b] == K && worst_finished(s, b) >= best_live / den) {
        s->done[j] = 1;
        return;
    }
    /* Sooner, with the same result: once no live hypothesis can even reach the BEST finished
     * score, every later finished hypothesis scores strictly below it, so it stays the answer
     * (the K-best list would still change, but only its best entry is returned). The 1e-3
     * margin on logp covers rounding: a token's logit − lse may be a few ulps above 0. */
    if (best_finished(s, b) > (best_live + 1e-3) / den) s->done[j] = 1;
}

/* Copy a finished hypothesis to the caller's arrays. */
static attn_status emit(const attn_translate_session *s, int b, const int32_t *ids, int len,
                        double sc, int max_out, int32_t *out_ids, int32_t *out_len,
                        float *out_score) {
    if (len > max_out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "translate: sentence %d's translation has %d tokens, more than "
                         "max_out %d",
                         b, len, max_out);
    (void)s;
    memcpy(out_ids + (size_t)b * max_out, ids, (size_t)len * sizeof(int32_t));
    out_len[b] = len;
    if (out_score) out_score[b] = (float)sc;
    return ATTN_STATUS_OK;
}

static attn_status greedy(attn_translate_session *s, const attn_translate_options *o, int B,
                          int max_out, int32_t *out_ids, int32_t *out_len, float *out_score) {
    const int V = s->V, eos = o->eos_id;
    for (int n = 0; n < B; n++) s->tok[n] = o->bos_id, s->score[n] = 0;
    while (s->S > 0) {
        ATTN_TRY(attn_translate_step(s, s->tok));
        row_lse(s);
        const int t = s->t - 1, N = s->N;
#pragma omp parallel for schedule(static) if ((size_t)N * V > 32768)
        for (int n = 0; n < N; n++) {
            const float *r = s->logits + (size_t)n * V;
            int best = eos;
            if (t < s->lim[s->sent[n]]) {
                best = -1;
                for (int v = 0; v < V; v++)
                    if (!banned(s, o, v) && (best < 0 || r[v] > r[best])) best = v;
            }
            s->score[n] += (double)(r[best] - s->lse[n]);
            s->tok[n] = best;
        }
        int nk = 0;
        for (int n = 0; n < N; n++) {
            const int b = s->sent[n];
            int32_t *h = s->hist + (size_t)n * s->capT;
            if (s->tok[n] == eos) {
                ATTN_TRY(emit(s, b, h, t, s->score[n] / lp(o, t + 1), max_out, out_ids, out_len,
                              out_score));
                continue;
            }
            h[t] = s->tok[n];
            s->keep[nk++] = n;
        }
        if (nk == N) continue;
        /* Per-row state moves with its row (R = 1: rows are sentences). */
        for (int j = 0; j < nk; j++) {
            const int n = s->keep[j];
            s->rows[j] = n;
            if (n == j) continue;
            s->tok[j] = s->tok[n], s->score[j] = s->score[n];
            memcpy(s->hist + (size_t)j * s->capT, s->hist + (size_t)n * s->capT,
                   (size_t)(t + 1) * sizeof(int32_t));
        }
        compact(s, s->keep, nk, s->rows);
    }
    return ATTN_STATUS_OK;
}


static attn_status beam(attn_translate_session *s, const attn_translate_options *o, int B,
                        int max_out, int32_t *out_ids, int32_t *out_len, float *out_score) {
    /* The first step runs one row per sentence (s->R = 1, as attn_translate began it) when the
     * batch is large: K copies of <s> would give K equal beams, so only one would be alive
     * anyway. Each row's values are computed independently of the other rows, so this changes
     * no result, PROVIDED the GEMMs take the same path for B and B·K rows: the kernel's small-M
     * path (M <= 8 rows) sums long K dimensions in another order than its general path (bits
     * differ for the K = 4·C feed-forward GEMM), hence FIRST_ROWS_MIN, twice that. Smaller
     * batches start with K rows per sentence, K − 1 of them dead (s->R = K). */
    const int K = o->beam_size;
    for (int n = 0; n < B * s->R; n++) {
        s->tok[n] = o->bos_id;
        s->score[n] = n % s->R == 0 ? 0.0 : -INFINITY;
    }
    for (int b = 0; b < B; b++) s->n_fin[b] = 0;
    cand *tops = attn_alloc((size_t)s->capS * 2 * K * sizeof(cand));
    if (!tops) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    attn_status st = ATTN_STATUS_OK;
    while (s->S > 0) {
        st = attn_translate_step(s, s->tok);
        if (st) break;
        /* Probabilities for the lse, which beam_sentence takes with its scan of each row. */
        st = attn_softmax_forward(s->N, s->V, s->logits, s->probs);
        if (st) break;
        const int S = s->S, t = s->t - 1;
#pragma omp parallel for schedule(dynamic, 1) if (S > 1 && (size_t)S * K * s->V > 65536)
        for (int j = 0; j < S; j++) beam_sentence(s, o, K, j, tops + (size_t)j * 2 * K);
        s->R = K; /* from the second step on: K rows per sentence */
        /* New layout: surviving sentences in order, rows j'·K + r continuing npar. */
        int nk = 0;
        for (int j = 0; j < S; j++)
            if (!s->done[j]) s->keep[nk++] = j;
        for (int jn = 0; jn < nk; jn++)
            for (int r = 0; r < K; r++) {
                const int o_row = s->keep[jn] * K + r, n_row = jn * K + r;
                const int par = s->npar[o_row];
                s->rows[n_row] = par;
                int32_t *h = s->hist2 + (size_t)n_row * s->capT;
                memcpy(h, s->hist + (size_t)par * s->capT, (size_t)t * sizeof(int32_t));
                h[t] = s->ntok[o_row];
                s->score2[n_row] = s->nscore[o_row];
            }
        for (int n = 0; n < nk * K; n++) s->tok[n] = s->hist2[(size_t)n * s->capT + t];
        int32_t *hs = s->hist;
        s->hist = s->hist2, s->hist2 = hs;
        double *ss = s->score;
        s->score = s->score2, s->score2 = ss;
        compact(s, s->keep, nk, s->rows);
    }
    attn_free(tops);
    ATTN_TRY(st);
    for (int b = 0; b < B; b++) {
        int best = 0;
        for (int i = 1; i < s->n_fin[b]; i++)
            if (s->fin_score[(size_t)b * s->capK + i] > s->fin_score[(size_t)b * s->capK + best])
                best = i;
        const size_t k = (size_t)b * s->capK + best;
        ATTN_TRY(emit(s, b, s->fin_ids + k * s->capT, s->fin_len[k], s->fin_score[k], max_out,
                      out_ids, out_len, out_score));
    }
    return ATTN_STATUS_OK;
}

attn_status attn_translate(attn_translate_session *s, const attn_translate_options *o, int B,
                           int Ts, const int32_t *src, const int32_t *src_len, int max_out,
                           int32_t *out_ids, int32_t *out_len, float *out_score) {
    if (!s || !o || !src || !src_len || !out_ids || !out_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate: NULL argument");
    const int V = s->V;
    if (o->beam_size < 1 || o->beam_size > s->capK)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "translate: beam size %d outside [1, %d] (the session's maximum)",
                         o->beam_size, s->capK);
    if (o->bos_id < 0 || o->bos_id >= V || o->eos_id < 0 || o->eos_id >= V ||
        o->eos_id == s->m->cfg.pad_id || o->eos_id == o->bos_id)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "translate: bos_id %d / eos_id %d must be distinct ids in [0, %d), eos "
                         "not the padding id",
                         (int)o->bos_id, (int)o->eos_id, V);
    if (!isfinite(o->length_penalty) || max_out < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "translate: bad length penalty or max_out");
    /* Greedy runs one row per sentence, and so does the first step of beam search when the
     * batch has at least FIRST_ROWS_MIN sentences (see beam). */
    const bool greedy_path = o->beam_size == 1 && !o->always_beam;
    ATTN_TRY(attn_translate_begin(s, B, Ts, src, src_len,
                                  greedy_path || B >= FIRST_ROWS_MIN ? 1 : o->beam_size));
    for (int b = 0; b < B; b++) s->lim[b] = length_limit(s, o, src_len[b]);
    attn_status st = greedy_path
                         ? greedy(s, o, B, max_out, out_ids, out_len, out_score)
                         : beam(s, o, B, max_out, out_ids, out_len, out_score);
    s->begun = false; /* the rows were consumed by the search */
    return st;
}

/* ---- many sentences: sorted batches, one batch per thread ------------------------------- */

typedef struct {
    const int32_t *ids; /* source ids (</s> included) */
    int n;
    size_t index;       /* position in the caller's list */
} src_item;

static int cmp_src_len(const void *a, const void *b) {
    const src_item *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index; /* stable: input order among equals */
}

/* Decode the sorted items [i0, i0 + B) on session w; results go to the caller's arrays by index.
 * scratch: src (capS, capTs), src_len, ids (capS, max_out), len, score (capS). */
static attn_status many_batch(attn_translate_session *w, const attn_translate_options *o,
                              const src_item *items, int B, int max_out, int32_t *src,
                              int32_t *src_len, int32_t *ids, int32_t *len, float *score,
                              int32_t *out_ids, int32_t *out_len, float *out_score) {
    const int32_t pad = w->m->cfg.pad_id;
    int Ts = 1;
    for (int b = 0; b < B; b++) Ts = ATTN_MAX(Ts, items[b].n);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < Ts; t++) src[b * Ts + t] = t < items[b].n ? items[b].ids[t] : pad;
        src_len[b] = items[b].n;
    }
    ATTN_TRY(attn_translate(w, o, B, Ts, src, src_len, max_out, ids, len, score));
    for (int b = 0; b < B; b++) {
        const size_t i = items[b].index;
        memcpy(out_ids + i * (size_t)max_out, ids + (size_t)b * max_out,
               (size_t)len[b] * sizeof(int32_t));
        out_len[i] = len[b];
        if (out_score) out_score[i] = score[b];
    }
    return ATTN_STATUS_OK;
}

/* attn_translate_many's batches, shared by the threads of its team (or run by the caller alone). */
typedef struct {
    attn_translate_session *s;        /* thread 0's session; s->workers[t - 1] for thread t */
    const attn_translate_options *o;
    const src_item *items;            /* (n) sorted by source length */
    size_t n, capS, n_batches, per;   /* per: scratch int32s per thread */
    int max_out;
    int32_t *scratch;                 /* (threads, per) */
    int32_t *out_ids, *out_len;       /* (n, max_out), (n) */
    float *out_score;                 /* (n) or NULL */
    attn_status first;                /* the first failure */
    char err[1024];                   /* its message */
} many_ctx;

/* Batch number bb (longest first) on session w with the scratch at sc. */
static void many_item(many_ctx *c, attn_translate_session *w, int32_t *sc, long bb) {
    int32_t *bs = sc, *bl = bs + c->capS * (size_t)c->s->capTs, *bi = bl + c->capS,
            *bn = bi + c->capS * (size_t)c->max_out;
    float *bsc = (float *)(bn + c->capS);
    const long b = (long)c->n_batches - 1 - bb;
    attn_status seen;
#ifdef _OPENMP
#pragma omp atomic read
#endif
    seen = c->first;
    if (seen) return;
    const size_t i0 = (size_t)b * c->capS;
    const int B = (int)ATTN_MIN(c->capS, c->n - i0);
    attn_status e = many_batch(w, c->o, c->items + i0, B, c->max_out, bs, bl, bi, bn, bsc,
                               c->out_ids, c->out_len, c->out_score);
    if (e) {
#ifdef _OPENMP
#pragma omp critical(attn_translate_many_error)
#endif
        {
            if (!c->first) {
                snprintf(c->err, sizeof c->err, "%s", attn_last_error());
#ifdef _OPENMP
#pragma omp atomic write
#endif
                c->first = e;
            }
        }
    }
}

/* Thread t of a team of the session's threads (team), or the caller alone (t = 0, no team: the
 * loop must not be a worksharing one then, since the caller may be inside a region of its own). */
static void many_run(many_ctx *c, int t, bool team) {
    attn_translate_session *w = t == 0 ? c->s : c->s->workers[t - 1];
    int32_t *sc = c->scratch + (size_t)t * c->per;
    /* Longest batches first (they are sorted by length): the last ones to finish are then the
     * shortest, so the threads run out of work at about the same time. */
    if (team) {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (long bb = 0; bb < (long)c->n_batches; bb++) many_item(c, w, sc, bb);
    } else {
        for (long bb = 0; bb < (long)c->n_batches; bb++) many_item(c, w, sc, bb);
    }
}

attn_status attn_translate_many(attn_translate_session *s, const attn_translate_options *o,
                                size_t n, const int32_t *const *src, const int32_t *src_len,
                                int max_out, int32_t *out_ids, int32_t *out_len,
                                float *out_score) {
    if (!s || !o || (n && (!src || !src_len || !out_ids || !out_len)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate many: NULL argument");
    if (max_out < 0) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate many: max_out < 0");
    for (size_t i = 0; i < n; i++)
        if (!src[i] || src_len[i] < 1 || src_len[i] > s->capTs)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "translate many: sentence %zu has %d ids (must be 1..%d, the "
                             "session's source length)",
                             i, (int)src_len[i], s->capTs);
    if (n == 0) return ATTN_STATUS_OK;
    src_item *items = malloc(n * sizeof *items);
    if (!items) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "translate many: out of memory");
    for (size_t i = 0; i < n; i++) items[i] = (src_item){src[i], (int)src_len[i], i};
    qsort(items, n, sizeof *items, cmp_src_len);
    const size_t capS = (size_t)s->capS, n_batches = (n + capS - 1) / capS;

    /* Threads: as many as attn_get_num_threads() allows, at most one per batch. */
    int nt = 1;
#ifdef _OPENMP
    if (!omp_in_parallel()) nt = attn_get_num_threads();
#endif
    if ((size_t)nt > n_batches) nt = (int)n_batches;
    if (nt < 1) nt = 1;
    attn_status st = ATTN_STATUS_OK;
    if (nt > 1 && s->n_workers < nt - 1) {
        attn_translate_session **w = attn_calloc((size_t)(nt - 1) * sizeof *w);
        if (!w) st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "translate many: out of memory");
        for (int i = 0; i < s->n_workers && w; i++) w[i] = s->workers[i];
        for (int i = s->n_workers; i < nt - 1 && !st; i++) {
            st = attn_translate_session_init(s->m, s->capS, s->capK, s->capTs, s->capT, &w[i]);
            if (!st) s->n_workers = i + 1;
        }
        if (w) {
            attn_free(s->workers);
            s->workers = w;
        }
        if (st) nt = 1 + s->n_workers, st = ATTN_STATUS_OK; /* fewer threads, still correct */
    }
    const size_t per = capS * ((size_t)s->capTs + 3 + (size_t)max_out);
    int32_t *scratch = malloc((size_t)nt * per * sizeof(int32_t));
    if (!scratch) st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "translate many: out of memory");
    if (!st) {
        many_ctx c = {.s = s, .o = o, .items = items, .n = n, .capS = capS,
                      .n_batches = n_batches, .per = per, .max_out = max_out, .scratch = scratch,
                      .out_ids = out_ids, .out_len = out_len, .out_score = out_score,
                      .first = ATTN_STATUS_OK, .err = ""};
        /* One thread runs outside any parallel region: the kernels' regions nested in a
         * one-thread region would get a fresh team of new threads on every call. */
        if (nt > 1) {
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
            many_run(&c, omp_get_thread_num(), true);
#else
            many_run(&c, 0, false);
#endif
        } else {
            many_run(&c, 0, false);
        }
        if (c.first) st = attn_fail(c.first, "%s", c.err);
    }
    free(scratch);
    free(items);
    return st;
}

/* ---- texts ------------------------------------------------------------------------------------ */

attn_status attn_translate_texts(attn_translate_session *s, const attn_translate_options *o,
                                 const attn_tok *tok, const char *const *texts, size_t n,
                                 char **out, float *scores, size_t *n_cut) {
    if (!s || !o || !tok || (n && (!texts || !out)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "translate texts: NULL argument");
    if (n_cut) *n_cut = 0;
    for (size_t i = 0; i < n; i++) out[i] = NULL;
    const int Vs = s->m->cfg.src_vocab, max_src = s->capTs, max_out = s->capT;
    const size_t nn = n ? n : 1;
    int32_t **ids = calloc(nn, sizeof *ids);    /* [n] source ids + </s> (NULL: empty text) */
    int32_t *len = calloc(nn, sizeof *len);     /* (n) */
    size_t *where = calloc(nn, sizeof *where);  /* non-empty text k is texts[where[k]] */
    int32_t *res = malloc(nn * (size_t)max_out * sizeof *res);
    int32_t *res_len = calloc(nn, sizeof *res_len);
    float *res_score = calloc(nn, sizeof *res_score);
    attn_status st = ATTN_STATUS_OK;
    if (!ids || !len || !where || !res || !res_len || !res_score)
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "translate texts: out of memory");
    /* Tokenize the non-empty texts (k of them), each cut to the source length with </s>. */
    size_t k = 0;
    for (size_t i = 0; i < n && !st; i++) {
        if (scores) scores[i] = 0;
        if (!texts[i] || !texts[i][0]) {
            if (!(out[i] = attn_calloc(1)))
                st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "translate texts: out of memory");
            continue;
        }
        int32_t *t = NULL;
        size_t tl = 0;
        st = attn_tok_encode_alloc(tok, texts[i], strlen(texts[i]), &t, &tl);
        for (size_t j = 0; !st && j < tl; j++)
            if (t[j] < 0 || t[j] >= Vs)
                st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                               "translate: the tokenizer gives id %d, outside the model's source "
                               "vocabulary of %d",
                               (int)t[j], Vs);
        if (!st && tl > (size_t)max_src - 1) {
            tl = (size_t)max_src - 1; /* room for </s> */
            if (n_cut) ++*n_cut;
        }
        int32_t *with_eos = st ? NULL : attn_alloc((tl + 1) * sizeof(int32_t));
        if (!st && !with_eos)
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "translate texts: out of memory");
        if (!st) {
            memcpy(with_eos, t, tl * sizeof(int32_t));
            with_eos[tl] = o->eos_id;
            ids[k] = with_eos, len[k] = (int32_t)tl + 1, where[k] = i;
            k++;
        }
        attn_free(t);
    }
    if (!st)
        st = attn_translate_many(s, o, k, (const int32_t *const *)ids, len, max_out, res, res_len,
                                 res_score);
    for (size_t j = 0; j < k && !st; j++) {
        size_t tl;
        const size_t i = where[j];
        st = attn_tok_decode_alloc(tok, res + j * (size_t)max_out, (size_t)res_len[j], 0, &out[i],
                                   &tl);
        if (scores) scores[i] = res_score[j];
    }
    for (size_t j = 0; j < k; j++) attn_free(ids[j]);
    if (st)
        for (size_t i = 0; i < n; i++) attn_free(out[i]), out[i] = NULL;
    free(ids), free(len), free(where), free(res), free(res_len), free(res_score);
    return st;
}

/* gen.c — next-token choice (temperature, top-k, top-p, greedy), the GPT generation loop over a
 * KV cache, and streaming detokenization (attn_gen.h, which documents the semantics). */
#include "attn_gen.h"

#include "attn_train.h"
#include "../core/core-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Above this vocabulary size a caller is confused (GPT-2 has 50257; the biggest models ~256k). */
#define GEN_MAX_VOCAB (1 << 24)

attn_gen_params attn_gen_default_params(void) {
    attn_gen_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 1.0f;
    p.top_k = 50;
    p.top_p = 1.0f;
    p.greedy = false;
    p.seed = 0;
    p.repetition_penalty = 1.0f;
    p.min_p = 0.0f;
    return p;
}

attn_status attn_gen_check_params(const attn_gen_params *p) {
    if (!p) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen: params is NULL");
    if (!isfinite(p->temperature))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen: temperature must be finite, got %g",
                         (double)p->temperature);
    if (p->top_k < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen: top_k must be >= 0, got %d",
                         p->top_k);
    if (p->quant_act != ATTN_QUANT_ACT_F32 && p->quant_act != ATTN_QUANT_ACT_Q8)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen: unknown quant_act %d",
                         (int)p->quant_act);
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen: top_p must be in [0, 1], got %g",
                         (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen: min_p must be in [0, 1], got %g",
                         (double)p->min_p);
    if (!(p->repetition_penalty > 0.0f) || !isfinite(p->repetition_penalty))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen: repetition_penalty must be > 0, got %g",
                         (double)p->repetition_penalty);
    return ATTN_STATUS_OK;
}

static attn_status check_logits(const float *logits, int V, const char *fn) {
    if (!logits || V < 1 || V > GEN_MAX_VOCAB)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: need logits and 1 <= V <= %d (V = %d)",
                         fn, GEN_MAX_VOCAB, V);
    for (int i = 0; i < V; i++)
        if (isnan(logits[i]))
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: logit %d is NaN", fn, i);
    return ATTN_STATUS_OK;
}

/* ---- warpers (scratch-taking cores) ----------------------------------------------------------- */

static void do_temperature(float *x, int V, float t) {
    for (int i = 0; i < V; i++) x[i] = x[i] / t;
}

/* k-th largest of a[0..n) (1 <= k <= n) by quickselect; a is reordered. */
static float kth_largest(float *a, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1; /* index in descending order */
    while (lo < hi) {
        float pivot = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot) i++;
            while (a[j] < pivot) j--;
            if (i <= j) {
                float t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++, j--;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return a[want];
    }
    return a[want];
}

static void do_top_k(float *x, int V, int k, float *scratch) {
    if (k <= 0 || k >= V) return;
    memcpy(scratch, x, (size_t)V * sizeof *x);
    float kth = kth_largest(scratch, V, k);
    for (int i = 0; i < V; i++)
        if (x[i] < kth) x[i] = -INFINITY;
}

typedef struct {
    float v;
    int32_t id;
} vid;

static int cmp_vid_asc(const void *a, const void *b) {
    const vid *x = a, *y = b;
    if (x->v < y->v) return -1;
    if (x->v > y->v) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void do_top_p(float *x, int V, float p, vid *scratch) {
    if (p >= 1.0f) return;
    /* Entries already at -inf have probability 0: they stay removed whatever the cut, so only
     * the finite ones are sorted (after top-k that is k of them). */
    int n = 0;
    double mx = -INFINITY;
    for (int i = 0; i < V; i++)
        if (x[i] > -INFINITY) {
            scratch[n].v = x[i], scratch[n].id = i, n++;
            if (x[i] > mx) mx = x[i];
        }
    if (n <= 1) return;
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_vid_asc);
    double total = 0;
    for (int j = 0; j < n; j++) total += exp((double)scratch[j].v - mx);
    /* torch: cumsum of the float32 softmax (accumulated in double), compared in float32 with
     * 1 - top_p; the last (largest) entry is always kept. */
    const float cut = (float)(1.0 - (double)p);
    double cum = 0;
    for (int j = 0; j < n - 1; j++) {
        cum += (double)(float)(exp((double)scratch[j].v - mx) / total);
        if ((float)cum <= cut) x[scratch[j].id] = -INFINITY;
        else break; /* cumulative sums only grow */
    }
}

/* MinPLogitsWarper: tokens whose probability is below min_p times the top token's are removed
 * (the top token always stays). Probabilities as torch's float32 softmax. */
static void do_min_p(float *x, int V, float min_p) {
    if (!(min_p > 0.0f)) return;
    double mx = -INFINITY, total = 0;
    for (int i = 0; i < V; i++)
        if (x[i] > mx) mx = x[i];
    if (!isfinite(mx)) return;
    for (int i = 0; i < V; i++) total += x[i] > -INFINITY ? exp((double)x[i] - mx) : 0.0;
    const float top = (float)(1.0 / total), cut = min_p * top;
    for (int i = 0; i < V; i++)
        if (x[i] > -INFINITY && (float)(exp((double)x[i] - mx) / total) < cut && x[i] < mx)
            x[i] = -INFINITY;
}

/* RepetitionPenaltyLogitsProcessor on the ids marked in seen: a negative logit times the
 * penalty, a positive one divided by it. */
static void do_penalty(float *x, int V, const uint8_t *seen, float penalty) {
    for (int i = 0; i < V; i++)
        if (seen[i]) x[i] = x[i] < 0.0f ? x[i] * penalty : x[i] / penalty;
}

attn_status attn_gen_min_p(float *logits, int V, float min_p) {
    ATTN_TRY(check_logits(logits, V, "attn_gen_min_p"));
    if (!(min_p >= 0.0f && min_p <= 1.0f))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_min_p: min_p must be in [0, 1], got %g",
                         (double)min_p);
    do_min_p(logits, V, min_p);
    return ATTN_STATUS_OK;
}

attn_status attn_gen_repetition_penalty(float *logits, int V, const int32_t *ids, size_t n,
                                        float penalty) {
    ATTN_TRY(check_logits(logits, V, "attn_gen_repetition_penalty"));
    if (!(penalty > 0.0f) || !isfinite(penalty) || (n && !ids))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen_repetition_penalty: need ids and a penalty > 0 (got %g)",
                         (double)penalty);
    uint8_t *seen = calloc((size_t)V, 1);
    if (!seen) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_repetition_penalty: out of memory");
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < V) seen[ids[i]] = 1;
    do_penalty(logits, V, seen, penalty);
    free(seen);
    return ATTN_STATUS_OK;
}

attn_status attn_gen_temperature(float *logits, int V, float temperature) {
    ATTN_TRY(check_logits(logits, V, "attn_gen_temperature"));
    if (!(temperature > 0.0f) || !isfinite(temperature))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen_temperature: temperature must be > 0, got %g",
                         (double)temperature);
    do_temperature(logits, V, temperature);
    return ATTN_STATUS_OK;
}

attn_status attn_gen_top_k(float *logits, int V, int k) {
    ATTN_TRY(check_logits(logits, V, "attn_gen_top_k"));
    if (k < 0) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_top_k: k must be >= 0, got %d", k);
    float *scratch = malloc((size_t)V * sizeof *scratch);
    if (!scratch) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_top_k: out of memory");
    do_top_k(logits, V, k, scratch);
    free(scratch);
    return ATTN_STATUS_OK;
}

attn_status attn_gen_top_p(float *logits, int V, float top_p) {
    ATTN_TRY(check_logits(logits, V, "attn_gen_top_p"));
    if (!(top_p >= 0.0f && top_p <= 1.0f))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_top_p: top_p must be in [0, 1], got %g",
                         (double)top_p);
    vid *scratch = malloc((size_t)V * sizeof *scratch);
    if (!scratch) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_top_p: out of memory");
    do_top_p(logits, V, top_p, scratch);
    free(scratch);
    return ATTN_STATUS_OK;
}

/* The first index of the largest of x (V >= 1), or -1 when x holds a NaN: one pass of ARGMAX_L
 * independent lanes (the compiler vectorizes it) for the maximum and the NaN test, then the
 * first index holding that maximum. The scalar loop "x[i] > x[best]" was one latency-bound chain
 * and, with check_logits' scan before it, ~5% of a 16-slot serving step's wall time
 * (SmolLM2's 49,152 logits a slot). */
/* (16-byte vectors: the baseline ISA every x86-64 and arm64 has, so the compiler keeps them in
 * registers; four of them side by side hide the compare-and-select latency) */
#define ARGMAX_W 4
#define ARGMAX_U 4
#define ARGMAX_L (ARGMAX_W * ARGMAX_U)
typedef float argmax_vf __attribute__((vector_size(4 * ARGMAX_W)));
typedef int32_t argmax_vi __attribute__((vector_size(4 * ARGMAX_W)));
static int argmax_or_nan(const float *x, int V) {
    argmax_vf m[ARGMAX_U];
    argmax_vi nan[ARGMAX_U], at[ARGMAX_U]; /* at: the block where a lane's maximum first occurs */
    for (int u = 0; u < ARGMAX_U; u++) {
        for (int l = 0; l < ARGMAX_W; l++) m[u][l] = -INFINITY, nan[u][l] = 0, at[u][l] = 0;
    }
    int i = 0;
    for (; i + ARGMAX_L <= V; i += ARGMAX_L)
        for (int u = 0; u < ARGMAX_U; u++) {
            argmax_vf v;
            memcpy(&v, x + i + ARGMAX_W * u, sizeof v);
            const argmax_vi gt = v > m[u]; /* lanes: -1 where v > m (false for NaN) */
            nan[u] |= v != v;
            m[u] = (argmax_vf)(((argmax_vi)v & gt) | ((argmax_vi)m[u] & ~gt));
            at[u] = (i & gt) | (at[u] & ~gt);
        }
    /* the first index of the maximum: the smallest block + lane among the lanes holding it */
    float best = -INFINITY;
    int arg = -1, any_nan = 0;
    for (int u = 0; u < ARGMAX_U; u++)
        for (int l = 0; l < ARGMAX_W; l++) {
            any_nan |= nan[u][l];
            const int k = at[u][l] + ARGMAX_W * u + l;
            if (i > 0 && (arg < 0 || m[u][l] > best || (m[u][l] == best && k < arg)))
                best = m[u][l], arg = k;
        }
    for (; i < V; i++) { /* the tail (V not a multiple of the lanes) */
        any_nan |= x[i] != x[i];
        if (arg < 0 || x[i] > best) best = x[i], arg = i;
    }
    return any_nan ? -1 : arg;
}

attn_status attn_gen_argmax(const float *logits, int V, int32_t *token) {
    if (!logits || V < 1 || V > GEN_MAX_VOCAB) return check_logits(logits, V, "attn_gen_argmax");
    if (!token) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_argmax: token is NULL");
    const int best = argmax_or_nan(logits, V);
    if (best < 0) return check_logits(logits, V, "attn_gen_argmax"); /* names the NaN */
    *token = best;
    return ATTN_STATUS_OK;
}

/* ---- sampler ---------------------------------------------------------------------------------- */

struct attn_gen_sampler {
    attn_gen_params p;
    int V;
    float *x;     /* (V) warped logits */
    float *sel;   /* (V) quickselect scratch */
    vid *sorted;  /* (V) top-p scratch */
    uint8_t *seen; /* (V) ids the repetition penalty applies to */
    bool any_seen;
};

attn_status attn_gen_sampler_init(const attn_gen_params *p, int V, attn_gen_sampler **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_sampler_init: out is NULL");
    *out = NULL;
    ATTN_TRY(attn_gen_check_params(p));
    if (V < 1 || V > GEN_MAX_VOCAB)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen_sampler_init: vocabulary size %d is not in [1, %d]", V,
                         GEN_MAX_VOCAB);
    attn_gen_sampler *s = calloc(1, sizeof *s);
    if (!s) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_sampler_init: out of memory");
    s->p = *p;
    s->V = V;
    s->x = malloc((size_t)V * sizeof *s->x);
    s->sel = malloc((size_t)V * sizeof *s->sel);
    s->sorted = malloc((size_t)V * sizeof *s->sorted);
    s->seen = calloc((size_t)V, 1);
    if (!s->x || !s->sel || !s->sorted || !s->seen) {
        attn_gen_sampler_free(s);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_sampler_init: out of memory");
    }
    *out = s;
    return ATTN_STATUS_OK;
}

void attn_gen_sampler_free(attn_gen_sampler *s) {
    if (!s) return;
    free(s->x);
    free(s->sel);
    free(s->sorted);
    free(s->seen);
    free(s);
}

attn_status attn_gen_sampler_observe(attn_gen_sampler *s, const int32_t *ids, size_t n) {
    if (!s || (n && !ids))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_sampler_observe: NULL argument");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->V)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attn_gen_sampler_observe: id %d is outside the vocabulary [0, %d)",
                             (int)ids[i], s->V);
    for (size_t i = 0; i < n; i++) s->seen[ids[i]] = 1;
    s->any_seen |= n > 0;
    return ATTN_STATUS_OK;
}

void attn_gen_sampler_forget(attn_gen_sampler *s) {
    if (!s || !s->any_seen) return;
    memset(s->seen, 0, (size_t)s->V);
    s->any_seen = false;
}

const attn_gen_params *attn_gen_sampler_params(const attn_gen_sampler *s) { return s ? &s->p : NULL; }

static bool is_greedy(const attn_gen_params *p) { return p->greedy || !(p->temperature > 0.0f); }

/* The logits the choice starts from: logits, or a copy in s->x with the repetition penalty. */
static const float *penalized(attn_gen_sampler *s, const float *logits) {
    if (!s->any_seen || s->p.repetition_penalty == 1.0f) return logits;
    memcpy(s->x, logits, (size_t)s->V * sizeof *s->x);
    do_penalty(s->x, s->V, s->seen, s->p.repetition_penalty);
    return s->x;
}

/* Warp into s->x; returns the max of the kept logits in *mx. */
static void warp(attn_gen_sampler *s, const float *logits, double *mx) {
    const int V = s->V;
    const float *src = penalized(s, logits);
    if (src != s->x) memcpy(s->x, src, (size_t)V * sizeof *s->x);
    if (s->p.temperature != 1.0f) do_temperature(s->x, V, s->p.temperature);
    do_top_k(s->x, V, s->p.top_k, s->sel);
    do_top_p(s->x, V, s->p.top_p, s->sorted);
    do_min_p(s->x, V, s->p.min_p);
    double m = -INFINITY;
    for (int i = 0; i < V; i++)
        if (s->x[i] > m) m = s->x[i];
    *mx = m;
}

attn_status attn_gen_sampler_probs(attn_gen_sampler *s, const float *logits, float *probs) {
    if (!s || !probs) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_sampler_probs: NULL argument");
    ATTN_TRY(check_logits(logits, s->V, "attn_gen_sampler_probs"));
    const int V = s->V;
    if (is_greedy(&s->p)) {
        int32_t t;
        ATTN_TRY(attn_gen_argmax(penalized(s, logits), V, &t));
        memset(probs, 0, (size_t)V * sizeof *probs);
        probs[t] = 1.0f;
        return ATTN_STATUS_OK;
    }
    double mx;
    warp(s, logits, &mx);
    if (!isfinite(mx)) /* every logit was +inf or -inf: fall back to the argmax */
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen_sampler_probs: the logits have no finite maximum");
    double total = 0;
    for (int i = 0; i < V; i++) total += s->x[i] > -INFINITY ? exp((double)s->x[i] - mx) : 0.0;
    for (int i = 0; i < V; i++)
        probs[i] = s->x[i] > -INFINITY ? (float)(exp((double)s->x[i] - mx) / total) : 0.0f;
    return ATTN_STATUS_OK;
}

attn_status attn_gen_sampler_next(attn_gen_sampler *s, const float *logits, uint64_t index,
                                  int32_t *token) {
    if (!s || !token) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_sampler_next: NULL argument");
    if (is_greedy(&s->p)) { /* (attn_gen_argmax refuses NaN logits itself) */
        if (!logits) return check_logits(logits, s->V, "attn_gen_sampler_next");
        return attn_gen_argmax(penalized(s, logits), s->V, token);
    }
    ATTN_TRY(check_logits(logits, s->V, "attn_gen_sampler_next"));
    const int V = s->V;
    double mx;
    warp(s, logits, &mx);
    if (!isfinite(mx))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen_sampler_next: the logits have no finite maximum");
    double total = 0;
    for (int i = 0; i < V; i++) total += s->x[i] > -INFINITY ? exp((double)s->x[i] - mx) : 0.0;
    attn_rng r;
    attn_rng_set_state(&r, s->p.seed, 2 * index);
    double target = attn_rng_uniform_double(&r) * total, cum = 0;
    int32_t last = -1;
    for (int i = 0; i < V; i++) {
        if (!(s->x[i] > -INFINITY)) continue;
        cum += exp((double)s->x[i] - mx);
        last = i;
        if (cum > target) break;
    }
    *token = last;
    return ATTN_STATUS_OK;
}

/* ---- generation loop ---------------------------------------------------------------------------- */

const char *attn_gen_stop_name(attn_gen_stop s) {
    switch (s) {
    case ATTN_GEN_STOP_MAX_TOKENS: return "max tokens";
    case ATTN_GEN_STOP_EOS: return "end of text";
    case ATTN_GEN_STOP_CONTEXT: return "context full";
    case ATTN_GEN_STOP_CALLBACK: return "stopped by caller";
    }
    return "?";
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- sessions: a KV cache kept across calls ------------------------------------------------------ */

struct attn_gen_session {
    const attn_gpt_model *m;
    attn_gpt_kv *kv;
    int max_T;
    int32_t *hist;  /* (max_T) the ids whose keys and values the cache holds, in order */
    float *logits;  /* (V) */
};

attn_status attn_gen_session_init(const attn_gpt_model *m, int max_T, attn_gen_session **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_session_init: out is NULL");
    *out = NULL;
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_session_init: NULL model");
    const int P = m->cfg.n_positions;
    if (max_T == 0) max_T = P;
    if (max_T < 1 || max_T > P)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen_session_init: max_T = %d is outside [1, n_positions = %d]", max_T,
                         P);
    attn_gen_session *s = calloc(1, sizeof *s);
    if (!s) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_session_init: out of memory");
    s->m = m;
    s->max_T = max_T;
    attn_status st = attn_gpt_kv_init(m, 1, max_T, &s->kv);
    if (!st) {
        s->hist = malloc((size_t)max_T * sizeof *s->hist);
        s->logits = malloc((size_t)m->cfg.vocab_size * sizeof *s->logits);
        if (!s->hist || !s->logits)
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_session_init: out of memory");
    }
    if (st) {
        attn_gen_session_free(s);
        return st;
    }
    *out = s;
    return ATTN_STATUS_OK;
}

void attn_gen_session_free(attn_gen_session *s) {
    if (!s) return;
    attn_gpt_kv_free(s->kv);
    free(s->hist);
    free(s->logits);
    free(s);
}

void attn_gen_session_reset(attn_gen_session *s) {
    if (s) attn_gpt_kv_reset(s->kv);
}

int attn_gen_session_cached(const attn_gen_session *s) { return s ? attn_gpt_kv_len(s->kv) : 0; }
int attn_gen_session_capacity(const attn_gen_session *s) { return s ? s->max_T : 0; }
attn_gpt_kv *attn_gen_session_kv(attn_gen_session *s) { return s ? s->kv : NULL; }

/* Feed ids (n) after what the cache holds; the logits of the last one into s->logits. */
static attn_status feed(attn_gen_session *s, const int32_t *ids, int n) {
    const int len = attn_gpt_kv_len(s->kv);
    ATTN_TRY(attn_gpt_decode(s->m, s->kv, 1, n, ids, s->logits, false));
    memcpy(s->hist + len, ids, (size_t)n * sizeof *ids);
    return ATTN_STATUS_OK;
}

static bool is_stop(const int32_t *stop, int n, int32_t tok) {
    for (int i = 0; i < n; i++)
        if (stop[i] == tok) return true;
    return false;
}

attn_status attn_gen_session_generate(attn_gen_session *sess, const attn_gen_params *p,
                                      const int32_t *ids, int n_ids, int max_new_tokens,
                                      const int32_t *stop_ids, int n_stop_ids, int32_t *out,
                                      attn_gen_callback cb, void *ctx, attn_gen_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!sess || !p || !ids || (n_stop_ids > 0 && !stop_ids) || n_stop_ids < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen: NULL session, params or ids");
    ATTN_TRY(attn_gen_check_params(p));
    if (p->kv_f16 != attn_gpt_kv_f16(sess->kv)) { /* the cache of the asked type, empty */
        attn_gpt_kv_params kp = attn_gpt_kv_default_params();
        kp.f16 = p->kv_f16;
        attn_gpt_kv *kv;
        ATTN_TRY(attn_gpt_kv_init_params(sess->m, 1, sess->max_T, &kp, &kv));
        attn_gpt_kv_free(sess->kv);
        sess->kv = kv;
    }
    attn_gpt_kv_set_quant_act(sess->kv, p->quant_act);
    const attn_gpt_model *m = sess->m;
    const int V = m->cfg.vocab_size, P = m->cfg.n_positions;
    if (n_ids < 1) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen: the prompt is empty");
    if (n_ids > sess->max_T)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen: the prompt has %d tokens, more than the context (%s = %d)",
                         n_ids, sess->max_T == P ? "n_positions" : "the session's", sess->max_T);
    if (max_new_tokens < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen: max_new_tokens must be >= 1, got %d",
                         max_new_tokens);
    for (int i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attn_gen: prompt token %d is id %d, outside the vocabulary [0, %d)", i,
                             (int)ids[i], V);
    /* Reuse the cached prefix: only the positions after it run (at least the last one, whose
     * logits choose the first new token). */
    int c = 0;
    const int len = attn_gpt_kv_len(sess->kv);
    while (c < len && c < n_ids && sess->hist[c] == ids[c]) c++;
    if (c == n_ids) c--;
    ATTN_TRY(attn_gpt_kv_truncate(sess->kv, c));
    attn_gen_sampler *smp = NULL;
    attn_status s = attn_gen_sampler_init(p, V, &smp);
    if (!s && p->repetition_penalty != 1.0f) s = attn_gen_sampler_observe(smp, ids, (size_t)n_ids);
    if (s) goto done;
    double t0 = now_s();
    s = feed(sess, ids + c, n_ids - c);
    if (s) goto done;
    double t1 = now_s();
    if (stats) stats->n_prompt = n_ids - c, stats->n_cached = c, stats->prompt_seconds = t1 - t0;
    attn_gen_stop why = ATTN_GEN_STOP_MAX_TOKENS;
    int n_steps = 0;
    for (int i = 0; i < max_new_tokens; i++) {
        int32_t tok;
        s = attn_gen_sampler_next(smp, sess->logits, (uint64_t)i, &tok);
        if (s) break;
        if (out) out[i] = tok;
        if (stats) stats->n_generated = i + 1;
        if (p->repetition_penalty != 1.0f) attn_gen_sampler_observe(smp, &tok, 1);
        if (cb && !cb(ctx, tok)) {
            why = ATTN_GEN_STOP_CALLBACK;
            break;
        }
        if (is_stop(stop_ids, n_stop_ids, tok)) {
            why = ATTN_GEN_STOP_EOS;
            break;
        }
        if (i == max_new_tokens - 1) break;
        if (attn_gpt_kv_len(sess->kv) >= sess->max_T) {
            why = ATTN_GEN_STOP_CONTEXT;
            break;
        }
        s = feed(sess, &tok, 1);
        if (s) break;
        n_steps++;
    }
    if (stats) {
        stats->n_decode_steps = n_steps;
        stats->decode_seconds = now_s() - t1;
        stats->stop = why;
    }
done:
    attn_gen_sampler_free(smp);
    return s;
}

attn_status attn_gen_gpt(const attn_gpt_model *m, const attn_gen_params *p, const int32_t *prompt,
                         int n_prompt, int max_new_tokens, int eos_token_id, int32_t *out,
                         attn_gen_callback cb, void *ctx, attn_gen_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!m || !p || !prompt)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_gpt: NULL model, params or prompt");
    ATTN_TRY(attn_gen_check_params(p));
    const int P = m->cfg.n_positions;
    if (n_prompt < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_gpt: the prompt is empty");
    if (n_prompt > P)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen_gpt: the prompt has %d tokens, more than the model's context "
                         "(n_positions = %d)",
                         n_prompt, P);
    if (max_new_tokens < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_gpt: max_new_tokens must be >= 1, got %d",
                         max_new_tokens);
    /* Positions ever fed: the prompt plus every generated token but the last. */
    const long long need = (long long)n_prompt + max_new_tokens - 1;
    attn_gen_session *sess;
    ATTN_TRY(attn_gen_session_init(m, (int)(need < P ? need : P), &sess));
    const int32_t stop = eos_token_id;
    attn_status s = attn_gen_session_generate(sess, p, prompt, n_prompt, max_new_tokens, &stop,
                                              eos_token_id >= 0 ? 1 : 0, out, cb, ctx, stats);
    attn_gen_session_free(sess);
    return s;
}

/* ---- streaming detokenization ------------------------------------------------------------------- */

struct attn_gen_stream {
    const attn_tok *tok;
    int32_t *ids;      /* context + generated */
    size_t n, cap, n_context;
    char *base;        /* decode(context) */
    size_t base_len;
    bool own;          /* decoding the generated ids alone (decode(context) was not a prefix) */
    char *out;         /* everything emitted so far */
    size_t out_len, out_cap;
    char *piece;       /* the latest piece */
    size_t piece_cap;
    bool finished;
    char **stops;      /* stop strings (n_stops) */
    size_t n_stops;
    bool stopped;      /* a stop string appeared: the text ends before it */
};

#define GEN_MAX_STOPS 64
#define GEN_MAX_STOP_LEN 1024

void attn_gen_stream_free(attn_gen_stream *s) {
    if (!s) return;
    free(s->ids);
    attn_free(s->base);
    free(s->out);
    free(s->piece);
    for (size_t i = 0; i < s->n_stops; i++) free(s->stops[i]);
    free(s->stops);
    free(s);
}

attn_status attn_gen_stream_set_stops(attn_gen_stream *s, const char *const *stops, size_t n) {
    if (!s || (n && !stops))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_stream_set_stops: NULL argument");
    if (n > GEN_MAX_STOPS)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen_stream_set_stops: %zu stop strings (at most %d)", n,
                         GEN_MAX_STOPS);
    for (size_t i = 0; i < n; i++) {
        size_t len = stops[i] ? strlen(stops[i]) : 0;
        if (len == 0 || len > GEN_MAX_STOP_LEN)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attn_gen_stream_set_stops: stop string %zu is empty or longer than "
                             "%d bytes",
                             i, GEN_MAX_STOP_LEN);
    }
    char **copy = n ? calloc(n, sizeof *copy) : NULL;
    if (n && !copy) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_stream: out of memory");
    for (size_t i = 0; i < n; i++) {
        copy[i] = strdup(stops[i]);
        if (!copy[i]) {
            for (size_t j = 0; j < i; j++) free(copy[j]);
            free(copy);
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_stream: out of memory");
        }
    }
    for (size_t i = 0; i < s->n_stops; i++) free(s->stops[i]);
    free(s->stops);
    s->stops = copy, s->n_stops = n;
    return ATTN_STATUS_OK;
}

bool attn_gen_stream_stopped(const attn_gen_stream *s) { return s && s->stopped; }

/* With stop strings, of the text t (n bytes) after the context, the part that may be returned:
 * up to the first stop string (then *hit), else without a tail that begins a stop string. Only
 * positions from `from` on are searched (text returned before never holds a stop string). */
static size_t stop_cut(const attn_gen_stream *s, const char *t, size_t n, size_t from, bool final,
                       bool *hit) {
    *hit = false;
    if (!s->n_stops) return n;
    size_t first = n;
    for (size_t k = 0; k < s->n_stops; k++) {
        const char *stop = s->stops[k];
        const size_t L = strlen(stop);
        for (size_t i = from; i + L <= n && i < first; i++)
            if (memcmp(t + i, stop, L) == 0) {
                first = i;
                break;
            }
    }
    if (first < n) {
        *hit = true;
        return first;
    }
    if (final) return n;
    /* Hold back the longest tail that is a proper prefix of a stop string. */
    size_t hold = 0;
    for (size_t k = 0; k < s->n_stops; k++) {
        const char *stop = s->stops[k];
        const size_t L = strlen(stop);
        for (size_t h = L - 1 < n ? L - 1 : n; h > hold; h--)
            if (memcmp(t + n - h, stop, h) == 0) {
                hold = h;
                break;
            }
    }
    return n - hold;
}

static bool grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *b = realloc(*buf, c);
    if (!b) return false;
    *buf = b, *cap = c;
    return true;
}

attn_status attn_gen_stream_init(const attn_tok *tok, const int32_t *context, size_t n_context,
                                 attn_gen_stream **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_stream_init: out is NULL");
    *out = NULL;
    if (!tok || (n_context && !context))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_stream_init: NULL tokenizer or context");
    attn_gen_stream *s = calloc(1, sizeof *s);
    if (!s) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_stream_init: out of memory");
    s->tok = tok;
    s->cap = n_context + 64;
    s->ids = malloc(s->cap * sizeof *s->ids);
    attn_status st = ATTN_STATUS_OK;
    if (!s->ids || !grow(&s->out, &s->out_cap, 64) || !grow(&s->piece, &s->piece_cap, 64))
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_stream_init: out of memory");
    if (!st) {
        if (n_context) memcpy(s->ids, context, n_context * sizeof *context);
        s->n = s->n_context = n_context;
        st = attn_tok_decode_alloc(tok, context, n_context, 0, &s->base, &s->base_len);
    }
    if (st) {
        attn_gen_stream_free(s);
        return st;
    }
    s->out[0] = s->piece[0] = '\0';
    *out = s;
    return ATTN_STATUS_OK;
}

/* Length of text without a trailing run of U+FFFD (EF BF BD). */
static size_t stable_len(const char *t, size_t n) {
    while (n >= 3 && (unsigned char)t[n - 3] == 0xEF && (unsigned char)t[n - 2] == 0xBF &&
           (unsigned char)t[n - 1] == 0xBD)
        n -= 3;
    return n;
}

/* Decode the text after the context of ids[0..upto); *text is attn_alloc'd. */
static attn_status decode_suffix(attn_gen_stream *s, size_t upto, char **text, size_t *len,
                                 size_t *off) {
    if (upto < s->n_context) upto = s->n_context;
    const int32_t *ids = s->own ? s->ids + s->n_context : s->ids;
    size_t n = s->own ? upto - s->n_context : upto;
    ATTN_TRY(attn_tok_decode_alloc(s->tok, ids, n, 0, text, len));
    *off = 0;
    if (!s->own) {
        if (*len >= s->base_len && memcmp(*text, s->base, s->base_len) == 0) {
            *off = s->base_len;
        } else {
            /* this decoder does not keep the context's text as a prefix: decode on our own */
            attn_free(*text);
            s->own = true;
            return decode_suffix(s, upto, text, len, off);
        }
    }
    return ATTN_STATUS_OK;
}

static attn_status emit(attn_gen_stream *s, bool all, const char **text, size_t *len) {
    char *full = NULL;
    size_t n = 0, off = 0;
    /* ids whose text may still change (a byte-fallback run that the next id may make invalid
     * UTF-8, turning all of it into U+FFFD) wait for the run to end */
    size_t upto = all ? s->n : s->n - attn_tok_decode_pending(s->tok, s->ids, s->n, 0);
    ATTN_TRY(decode_suffix(s, upto, &full, &n, &off));
    const char *t = full + off;
    size_t tn = n - off;
    size_t keep = all ? tn : stable_len(t, tn);
    bool hit = false;
    if (s->stopped) {
        keep = s->out_len;
    } else {
        const size_t from = s->out_len;
        keep = stop_cut(s, t, keep, from, all, &hit);
        if (keep < s->out_len) keep = s->out_len;
    }
    size_t add = 0;
    /* Text already emitted is final; a decoder that rewrote it cannot be followed exactly, so
     * only what lies beyond it is emitted. */
    if (keep > s->out_len) add = keep - s->out_len;
    if (!grow(&s->out, &s->out_cap, s->out_len + add + 1) || !grow(&s->piece, &s->piece_cap, add + 1)) {
        attn_free(full);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_stream: out of memory");
    }
    memcpy(s->piece, t + s->out_len, add);
    s->piece[add] = '\0';
    memcpy(s->out + s->out_len, t + s->out_len, add);
    s->out_len += add;
    s->out[s->out_len] = '\0';
    attn_free(full);
    if (hit) s->stopped = true;
    if (text) *text = s->piece;
    if (len) *len = add;
    return ATTN_STATUS_OK;
}

attn_status attn_gen_stream_push(attn_gen_stream *s, int32_t id, const char **text, size_t *len) {
    if (!s) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_stream_push: stream is NULL");
    if (s->finished)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_stream_push: the stream is finished");
    if (id < 0 || id >= attn_tok_vocab_size(s->tok))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_gen_stream_push: id %d is outside the vocabulary [0, %d)", (int)id,
                         (int)attn_tok_vocab_size(s->tok));
    if (s->n == s->cap) {
        size_t c = s->cap * 2;
        int32_t *ids = realloc(s->ids, c * sizeof *ids);
        if (!ids) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_stream_push: out of memory");
        s->ids = ids, s->cap = c;
    }
    s->ids[s->n++] = id;
    attn_status st = emit(s, false, text, len);
    if (st) s->n--;
    return st;
}

attn_status attn_gen_stream_finish(attn_gen_stream *s, const char **text, size_t *len) {
    if (!s) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_stream_finish: stream is NULL");
    if (s->finished) {
        s->piece[0] = '\0';
        if (text) *text = s->piece;
        if (len) *len = 0;
        return ATTN_STATUS_OK;
    }
    ATTN_TRY(emit(s, true, text, len));
    s->finished = true;
    return ATTN_STATUS_OK;
}

const char *attn_gen_stream_text(const attn_gen_stream *s, size_t *len) {
    if (len) *len = s ? s->out_len : 0;
    return s ? s->out : "";
}

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
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen: top_p must be in [0, 1], got %g",
                         (double)p->top_p);
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

attn_status attn_gen_argmax(const float *logits, int V, int32_t *token) {
    ATTN_TRY(check_logits(logits, V, "attn_gen_argmax"));
    if (!token) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_argmax: token is NULL");
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
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
    if (!s->x || !s->sel || !s->sorted) {
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
    free(s);
}

const attn_gen_params *attn_gen_sampler_params(const attn_gen_sampler *s) { return s ? &s->p : NULL; }

static bool is_greedy(const attn_gen_params *p) { return p->greedy || !(p->temperature > 0.0f); }

/* Warp into s->x; returns the max of the kept logits in *mx. */
static void warp(attn_gen_sampler *s, const float *logits, double *mx) {
    const int V = s->V;
    memcpy(s->x, logits, (size_t)V * sizeof *s->x);
    if (s->p.temperature != 1.0f) do_temperature(s->x, V, s->p.temperature);
    do_top_k(s->x, V, s->p.top_k, s->sel);
    do_top_p(s->x, V, s->p.top_p, s->sorted);
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
        ATTN_TRY(attn_gen_argmax(logits, V, &t));
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
    if (is_greedy(&s->p)) return attn_gen_argmax(logits, s->V, token);
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

attn_status attn_gen_gpt(const attn_gpt_model *m, const attn_gen_params *p, const int32_t *prompt,
                         int n_prompt, int max_new_tokens, int eos_token_id, int32_t *out,
                         attn_gen_callback cb, void *ctx, attn_gen_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!m || !p || !prompt)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_gen_gpt: NULL model, params or prompt");
    ATTN_TRY(attn_gen_check_params(p));
    const int P = m->cfg.n_positions, V = m->cfg.vocab_size;
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
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attn_gen_gpt: prompt token %d is id %d, outside the vocabulary [0, %d)",
                             i, (int)prompt[i], V);
    /* Positions ever fed: the prompt plus every generated token but the last. */
    long long need = (long long)n_prompt + max_new_tokens - 1;
    int max_T = (int)(need < P ? need : P);
    attn_gpt_kv *kv = NULL;
    attn_gen_sampler *smp = NULL;
    float *logits = NULL;
    attn_status s = attn_gpt_kv_init(m, 1, max_T, &kv);
    if (!s) s = attn_gen_sampler_init(p, V, &smp);
    if (!s && !(logits = malloc((size_t)V * sizeof *logits)))
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_gen_gpt: out of memory");
    if (s) goto done;
    double t0 = now_s();
    s = attn_gpt_decode(m, kv, 1, n_prompt, prompt, logits, false);
    if (s) goto done;
    double t1 = now_s();
    if (stats) stats->n_prompt = n_prompt, stats->prompt_seconds = t1 - t0;
    attn_gen_stop why = ATTN_GEN_STOP_MAX_TOKENS;
    int n_steps = 0;
    for (int i = 0; i < max_new_tokens; i++) {
        int32_t tok;
        s = attn_gen_sampler_next(smp, logits, (uint64_t)i, &tok);
        if (s) break;
        if (out) out[i] = tok;
        if (stats) stats->n_generated = i + 1;
        if (cb && !cb(ctx, tok)) {
            why = ATTN_GEN_STOP_CALLBACK;
            break;
        }
        if (eos_token_id >= 0 && tok == eos_token_id) {
            why = ATTN_GEN_STOP_EOS;
            break;
        }
        if (i == max_new_tokens - 1) break;
        if (attn_gpt_kv_len(kv) >= P) {
            why = ATTN_GEN_STOP_CONTEXT;
            break;
        }
        s = attn_gpt_decode(m, kv, 1, 1, &tok, logits, false);
        if (s) break;
        n_steps++;
    }
    if (stats) {
        stats->n_decode_steps = n_steps;
        stats->decode_seconds = now_s() - t1;
        stats->stop = why;
    }
done:
    free(logits);
    attn_gen_sampler_free(smp);
    attn_gpt_kv_free(kv);
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
};

void attn_gen_stream_free(attn_gen_stream *s) {
    if (!s) return;
    free(s->ids);
    attn_free(s->base);
    free(s->out);
    free(s->piece);
    free(s);
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

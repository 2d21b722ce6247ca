/* test_translate.c — translation decoding (attn_infer.h) and model directories (attn_models.h).
 *
 * Everything is checked against attn_encdec_forward, itself tested against the PyTorch twin:
 *   - KV cache: the incremental decoder's logits at every step equal the full forward's logits on
 *     the same prefix (teacher forcing), post-LN and pre-LN, including after a reordering of the
 *     hypotheses' caches; tolerance 1e-5 · max|ref|.
 *   - greedy: identical tokens to a naive greedy that reruns the full forward at each step.
 *   - beam: beam 1 == greedy; with K >= (allowed tokens)^L the search is exhaustive, so its best
 *     equals brute-force enumeration of every output up to length L (alpha 0 and alpha 1); every
 *     returned score equals the full forward's rescoring; sentences decoded alone or in a batch
 *     give the same results.
 *   - model directory: save/load round trip is bit-exact; missing, corrupt, mismatched and
 *     extra tensors are errors naming the file and the tensor. */
#include "tu.h"

#include "attn_infer.h"
#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_models.h"

#include <unistd.h>

#define BOS 2
#define EOS 3

/* A small random model; biases and LN parameters perturbed so every term matters. */
static attn_encdec_model *make_model(bool pre_ln, bool gelu, bool learned, bool shared, int V,
                                     uint64_t seed) {
    attn_encdec_config c = attn_encdec_default_config();
    c.src_vocab = c.tgt_vocab = V;
    c.d_model = 32, c.n_head = 4, c.d_ff = 64, c.n_enc_layers = 2, c.n_dec_layers = 2;
    c.max_len = 24, c.dropout = 0.0f;
    c.pre_ln = pre_ln;
    c.activation = gelu ? ATTN_ENCDEC_GELU : ATTN_ENCDEC_RELU;
    c.positions = learned ? ATTN_ENCDEC_LEARNED : ATTN_ENCDEC_SINUSOIDAL;
    c.share_embeddings = c.tie_output = shared;
    attn_encdec_model *m;
    assert_int_equal(attn_encdec_model_init(&c, seed, &m), ATTN_STATUS_OK);
    tu_rng r = {seed * 7919 + 1};
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_encdec_tensor *t = &m->tensors[i];
        if (t->ndim != 1) continue;
        float *p = m->params + t->offset;
        for (size_t k = 0; k < t->numel; k++) p[k] += tu_uniform(&r, -0.1f, 0.1f);
    }
    return m;
}


/* ---- KV cache ---------------------------------------------------------------------------- */

static void check_kv_cache(bool pre_ln, bool gelu, bool learned, bool shared) {
    enum { B = 3, Ts = 7, Tt = 8, V = 30, R = 4 };
    attn_encdec_model *m = make_model(pre_ln, gelu, learned, shared, V, pre_ln ? 11 : 12);
    tu_rng r = {99};
    int32_t src_len[B] = {7, 4, 2}, src[B * Ts];
    tu_make_src(&r, B, Ts, V, src_len, EOS, src);
    /* R target sequences per sentence; the full forward runs on all R·B of them. */
    int32_t tgt[R * B * Tt], tgt_len[R * B], src2[R * B * Ts], src_len2[R * B];
    for (int i = 0; i < R * B; i++) {
        tgt_len[i] = Tt;
        src_len2[i] = src_len[i / R];
        memcpy(src2 + i * Ts, src + (i / R) * Ts, sizeof(int32_t) * Ts);
        for (int t = 0; t < Tt; t++)
            tgt[i * Tt + t] = t == 0 ? BOS : 3 + (int32_t)(tu_uniform(&r, 0, 1) * (V - 3.01f));
    }
    attn_encdec_state *st;
    assert_int_equal(attn_encdec_state_init(m, R * B, Ts, Tt, &st), ATTN_STATUS_OK);
    float *ref = malloc(sizeof(float) * R * B * Tt * V);
    assert_int_equal(attn_encdec_forward(m, st, R * B, Ts, Tt, src2, src_len2, tgt, tgt_len, ref),
                     ATTN_STATUS_OK);

    attn_translate_session *s;
    assert_int_equal(attn_translate_session_init(m, B, R, Ts, Tt, &s), ATTN_STATUS_OK);
    assert_int_equal(attn_translate_begin(s, B, Ts, src, src_len, R), ATTN_STATUS_OK);
    /* Row b·R + k follows sequence R·b + which[row]. The caches are reordered (row k continues
     * row perm[k] of its sentence) after step 2 by a swap of pairs, after step 4 by a 3-cycle
     * and a fixed row, after step 6 by a 2-cycle read twice plus a chain into it: each row then
     * follows the sequence its parent followed. */
    static const int32_t perms[3][R] = {{1, 0, 3, 2}, {1, 2, 0, 3}, {3, 3, 1, 0}};
    static const int at[3] = {2, 4, 6};
    int which[B * R];
    for (int n = 0; n < B * R; n++) which[n] = n % R;
    float *exp_ = malloc(sizeof(float) * B * R * V);
    for (int t = 0; t < Tt; t++) {
        for (int q = 0; q < 3; q++) {
            if (t != at[q]) continue;
            int32_t parent[B * R];
            int w2[B * R];
            for (int n = 0; n < B * R; n++) parent[n] = (n / R) * R + perms[q][n % R];
            assert_int_equal(attn_translate_reorder(s, parent), ATTN_STATUS_OK);
            for (int n = 0; n < B * R; n++) w2[n] = which[parent[n]];
            memcpy(which, w2, sizeof which);
        }
        int32_t tok[B * R];
        for (int n = 0; n < B * R; n++) {
            int seq = R * (n / R) + which[n];
            tok[n] = tgt[seq * Tt + t];
            memcpy(exp_ + (size_t)n * V, ref + ((size_t)seq * Tt + t) * V, sizeof(float) * V);
        }
        assert_int_equal(attn_translate_step(s, tok), ATTN_STATUS_OK);
        char what[64];
        snprintf(what, sizeof what, "%s step %d logits", pre_ln ? "pre-LN" : "post-LN", t);
        tu_close(what, attn_translate_logits(s), exp_, (size_t)B * R * V, 1e-5, 0);
    }
    free(exp_);
    free(ref);
    attn_translate_session_free(s);
    attn_encdec_state_free(st);
    attn_encdec_model_free(m);
}

static void test_kv_cache(void **state) {
    (void)state;
    check_kv_cache(false, false, false, false); /* post-LN, ReLU, sinusoidal, separate */
    check_kv_cache(true, true, true, true);     /* pre-LN, GELU, learned, shared + tied */
}

/* ---- naive references ----------------------------------------------------------------------- */

/* log P(seq + </s> | src) by full forwards (one sentence), and the forward's per-step logits. */
static double rescore(const attn_encdec_model *m, attn_encdec_state *st, int Ts,
                      const int32_t *src, int32_t src_len, const int32_t *seq, int n) {
    const int V = m->cfg.tgt_vocab, Tt = n + 1;
    int32_t in[64], len = Tt;
    in[0] = BOS;
    memcpy(in + 1, seq, sizeof(int32_t) * n);
    assert_int_equal(attn_encdec_forward(m, st, 1, Ts, Tt, src, &src_len, in, &len, NULL),
                     ATTN_STATUS_OK);
    const float *lg = attn_encdec_logits(st);
    double sum = 0;
    for (int t = 0; t < Tt; t++) {
        const float *row = lg + (size_t)t * V;
        double mx = row[0], z = 0;
        for (int v = 1; v < V; v++) mx = fmax(mx, row[v]);
        for (int v = 0; v < V; v++) z += exp(row[v] - mx);
        int y = t < n ? seq[t] : EOS;
        sum += row[y] - mx - log(z);
    }
    return sum;
}

static double lpen(double alpha, int L) { return pow((5.0 + L) / 6.0, alpha); }

/* Greedy by rerunning the full forward each step: argmax over ids other than pad and <s>. */
static int naive_greedy(const attn_encdec_model *m, attn_encdec_state *st, int Ts,
                        const int32_t *src, int32_t src_len, int lim, int32_t *out) {
    const int V = m->cfg.tgt_vocab;
    int32_t in[64];
    in[0] = BOS;
    for (int n = 0;; n++) {
        int32_t len = n + 1;
        assert_int_equal(attn_encdec_forward(m, st, 1, Ts, n + 1, src, &src_len, in, &len, NULL),
                         ATTN_STATUS_OK);
        const float *row = attn_encdec_logits(st) + (size_t)n * V;
        int best = -1;
        for (int v = 0; v < V; v++)
            if (v != 0 && v != BOS && (best < 0 || row[v] > row[best])) best = v;
        if (n == lim || best == EOS) return n;
        out[n] = best;
        in[n + 1] = best;
    }
}

enum { GB = 5, GTs = 8, GV = 24, GMAX = 12 };

static void batch_src(int32_t *src, int32_t *len) {
    tu_rng r = {2024};
    const int32_t l[GB] = {8, 3, 6, 1, 5};
    memcpy(len, l, sizeof l);
    tu_make_src(&r, GB, GTs, GV, len, EOS, src);
}

static void test_greedy(void **state) {
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        attn_encdec_model *m = make_model(variant, variant, variant, variant, GV, 31 + variant);
        int32_t src[GB * GTs], len[GB];
        batch_src(src, len);
        attn_encdec_state *st;
        assert_int_equal(attn_encdec_state_init(m, 1, GTs, GMAX + 1, &st), ATTN_STATUS_OK);
        /* Shift the </s> bias until some sentences stop before the limit and others do not, so
         * the batch shrinks while decoding goes on (the compaction path). */
        const float eos_b = m->w.out_b[EOS];
        for (float shift = -2.0f; shift <= 6.0f; shift += 0.25f) {
            m->w.out_b[EOS] = eos_b + shift;
            int early = 0;
            for (int b = 0; b < GB; b++) {
                int32_t ref[GMAX + 1];
                early += naive_greedy(m, st, GTs, src + b * GTs, len[b], GMAX, ref) < GMAX;
            }
            if (early > 0 && early < GB) break;
        }
        attn_translate_session *s;
        assert_int_equal(attn_translate_session_init(m, GB, 1, GTs, 24, &s), ATTN_STATUS_OK);
        attn_translate_options o = attn_translate_default_options();
        o.beam_size = 1, o.max_len = GMAX, o.max_len_a = 0, o.length_penalty = 0;
        int32_t ids[GB * GMAX], olen[GB];
        float sc[GB];
        assert_int_equal(attn_translate(s, &o, GB, GTs, src, len, GMAX, ids, olen, sc),
                         ATTN_STATUS_OK);
        int early = 0;
        for (int b = 0; b < GB; b++) {
            int32_t ref[GMAX + 1];
            int n = naive_greedy(m, st, GTs, src + b * GTs, len[b], GMAX, ref);
            early += n < GMAX;
            assert_int_equal(olen[b], n);
            for (int i = 0; i < n; i++) assert_int_equal(ids[b * GMAX + i], ref[i]);
            double want = rescore(m, st, GTs, src + b * GTs, len[b], ref, n);
            assert_true(fabs(sc[b] - want) <= 1e-4 * fmax(1.0, fabs(want)));
        }
        printf("  greedy variant %d: %d of %d sentences ended before the limit\n", variant, early,
               GB);
        assert_true(early > 0 && early < GB);
        attn_encdec_state_free(st);
        attn_translate_session_free(s);
        attn_encdec_model_free(m);
    }
}

/* ---- beam search ---------------------------------------------------------------------------- */

static void test_beam1_is_greedy(void **state) {
    (void)state;
    attn_encdec_model *m = make_model(false, false, false, false, GV, 41);
    m->w.out_b[EOS] += 1.5f;
    int32_t src[GB * GTs], len[GB];
    batch_src(src, len);
    attn_translate_session *s;
    assert_int_equal(attn_translate_session_init(m, GB, 4, GTs, 24, &s), ATTN_STATUS_OK);
    attn_translate_options o = attn_translate_default_options();
    o.max_len = GMAX, o.max_len_a = 0, o.length_penalty = 0;
    int32_t ids[2][GB * GMAX], olen[2][GB];
    float sc[2][GB];
    for (int k = 0; k < 2; k++) {
        /* k = 0: the greedy path; k = 1: the beam-search code with a beam of 1. */
        o.beam_size = 1;
        o.always_beam = k == 1;
        assert_int_equal(attn_translate(s, &o, GB, GTs, src, len, GMAX, ids[k], olen[k], sc[k]),
                         ATTN_STATUS_OK);
    }
    for (int b = 0; b < GB; b++) {
        assert_int_equal(olen[0][b], olen[1][b]);
        assert_memory_equal(ids[0] + b * GMAX, ids[1] + b * GMAX, sizeof(int32_t) * olen[0][b]);
        assert_true(fabsf(sc[0][b] - sc[1][b]) <= 1e-6f * fmaxf(1.0f, fabsf(sc[0][b])));
    }
    attn_translate_session_free(s);
    attn_encdec_model_free(m);
}

/* Every output of up to L tokens over the allowed ids (not pad, not <s>, not </s>) followed by
 * </s>: the best normalized score must be what an exhaustive beam returns. */
static void brute_force(double alpha) {
    enum { V = 6, L = 3, K = 27, Ts = 5 }; /* allowed: 1, 4, 5 -> 3^3 = 27 live at most */
    attn_encdec_model *m = make_model(true, false, false, false, V, 51);
    /* Sharper distributions than a fresh model's near-uniform ones, so that the optimum is not
     * simply the shortest output. */
    const attn_encdec_tensor *ow = attn_encdec_find_tensor(m, "out.w");
    for (size_t i = 0; i < ow->numel; i++) m->params[ow->offset + i] *= 6.0f;
    m->w.out_b[EOS] -= 2.0f;
    tu_rng r = {5};
    int32_t len[2] = {5, 3}, src[2 * Ts];
    tu_make_src(&r, 2, Ts, V, len, EOS, src);
    attn_encdec_state *st;
    assert_int_equal(attn_encdec_state_init(m, 1, Ts, L + 1, &st), ATTN_STATUS_OK);
    attn_translate_session *s;
    assert_int_equal(attn_translate_session_init(m, 2, K, Ts, L + 1, &s), ATTN_STATUS_OK);
    attn_translate_options o = attn_translate_default_options();
    o.beam_size = K, o.max_len = L, o.max_len_a = 0, o.length_penalty = (float)alpha;
    int32_t ids[2 * L], olen[2];
    float sc[2];
    assert_int_equal(attn_translate(s, &o, 2, Ts, src, len, L, ids, olen, sc), ATTN_STATUS_OK);
    static const int32_t allowed[3] = {1, 4, 5};
    for (int b = 0; b < 2; b++) {
        double best = -INFINITY;
        int32_t best_seq[L];
        int best_n = -1, count = 0;
        for (int n = 0; n <= L; n++) {
            int total = 1;
            for (int i = 0; i < n; i++) total *= 3;
            for (int code = 0; code < total; code++) {
                int32_t seq[L];
                for (int i = 0, c = code; i < n; i++, c /= 3) seq[i] = allowed[c % 3];
                double v = rescore(m, st, Ts, src + b * Ts, len[b], seq, n) / lpen(alpha, n + 1);
                count++;
                if (v > best) best = v, best_n = n, memcpy(best_seq, seq, sizeof seq);
            }
        }
        printf("  brute force alpha=%g sentence %d: %d outputs, best %.6f (n=%d), beam %.6f "
               "(n=%d)\n",
               alpha, b, count, best, best_n, (double)sc[b], olen[b]);
        assert_true(fabs(sc[b] - best) <= 1e-5 * fmax(1.0, fabs(best)));
        assert_int_equal(olen[b], best_n);
        assert_memory_equal(ids + b * L, best_seq, sizeof(int32_t) * best_n);
    }
    attn_translate_session_free(s);
    attn_encdec_state_free(st);
    attn_encdec_model_free(m);
}

static void test_beam_brute_force(void **state) {
    (void)state;
    brute_force(0.0);
    brute_force(1.0);
}

/* Beam 4 with a length penalty: scores equal the full forward's rescoring, and each sentence's
 * result is the same decoded alone as in the batch. */
static void test_beam_scores_and_batching(void **state) {
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        attn_encdec_model *m = make_model(variant, !variant, variant, !variant, GV, 61 + variant);
        m->w.out_b[EOS] += 1.0f;
        int32_t src[GB * GTs], len[GB];
        batch_src(src, len);
        attn_translate_session *s;
        assert_int_equal(attn_translate_session_init(m, GB, 4, GTs, 24, &s), ATTN_STATUS_OK);
        attn_encdec_state *st;
        assert_int_equal(attn_encdec_state_init(m, 1, GTs, GMAX + 1, &st), ATTN_STATUS_OK);
        attn_translate_options o = attn_translate_default_options();
        o.beam_size = 4, o.max_len = GMAX, o.max_len_a = 0, o.length_penalty = 0.6f;
        o.stop = variant ? ATTN_TRANSLATE_STOP_HEURISTIC : ATTN_TRANSLATE_STOP_EXACT;
        int32_t ids[GB * GMAX], olen[GB];
        float sc[GB];
        assert_int_equal(attn_translate(s, &o, GB, GTs, src, len, GMAX, ids, olen, sc),
                         ATTN_STATUS_OK);
        for (int b = 0; b < GB; b++) {
            double want = rescore(m, st, GTs, src + b * GTs, len[b], ids + b * GMAX, olen[b]) /
                          lpen(0.6, olen[b] + 1);
            assert_true(fabs(sc[b] - want) <= 1e-5 * fmax(1.0, fabs(want)));
            int32_t ids1[GMAX], olen1;
            float sc1;
            assert_int_equal(
                attn_translate(s, &o, 1, GTs, src + b * GTs, len + b, GMAX, ids1, &olen1, &sc1),
                ATTN_STATUS_OK);
            assert_int_equal(olen1, olen[b]);
            assert_memory_equal(ids1, ids + b * GMAX, sizeof(int32_t) * olen1);
            assert_true(fabs(sc1 - sc[b]) <= 1e-5 * fmax(1.0, fabs(sc[b])));
        }
        /* Beam 4 never scores below greedy under alpha = 0 ... usually; here only check that a
         * wider beam's best is at least as good as beam 1's on every sentence for alpha = 0. */
        o.length_penalty = 0, o.stop = ATTN_TRANSLATE_STOP_EXACT;
        float scg[GB], scb[GB];
        o.beam_size = 1;
        assert_int_equal(attn_translate(s, &o, GB, GTs, src, len, GMAX, ids, olen, scg),
                         ATTN_STATUS_OK);
        o.beam_size = 4;
        assert_int_equal(attn_translate(s, &o, GB, GTs, src, len, GMAX, ids, olen, scb),
                         ATTN_STATUS_OK);
        int better = 0;
        for (int b = 0; b < GB; b++) better += scb[b] >= scg[b] - 1e-5f;
        printf("  variant %d: beam 4 >= greedy on %d of %d sentences\n", variant, better, GB);
        attn_encdec_state_free(st);
        attn_translate_session_free(s);
        attn_encdec_model_free(m);
    }
}

static void test_errors(void **state) {
    (void)state;
    attn_encdec_model *m = make_model(false, false, false, false, GV, 71);
    attn_translate_session *s;
    assert_int_equal(attn_translate_session_init(m, 2, 2, 30, 8, &s),
                     ATTN_STATUS_INVALID_ARGUMENT); /* Ts beyond max_len 24 */
    assert_int_equal(attn_translate_session_init(m, 2, 2, GTs, 8, &s), ATTN_STATUS_OK);
    int32_t src[GB * GTs], len[GB], ids[GB * GMAX], olen[GB];
    batch_src(src, len);
    attn_translate_options o = attn_translate_default_options();
    o.beam_size = 3;
    assert_int_equal(attn_translate(s, &o, 2, GTs, src, len, GMAX, ids, olen, NULL),
                     ATTN_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(attn_last_error(), "beam size 3"));
    o.beam_size = 2;
    assert_int_equal(attn_translate(s, &o, 3, GTs, src, len, GMAX, ids, olen, NULL),
                     ATTN_STATUS_INVALID_ARGUMENT);
    o.eos_id = 0;
    assert_int_equal(attn_translate(s, &o, 2, GTs, src, len, GMAX, ids, olen, NULL),
                     ATTN_STATUS_INVALID_ARGUMENT);
    o.eos_id = EOS, o.max_len = 6, o.max_len_a = 0;
    m->w.out_b[EOS] = -100.0f; /* never ends: every output reaches the limit */
    assert_int_equal(attn_translate(s, &o, 2, GTs, src, len, 2, ids, olen, NULL),
                     ATTN_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(attn_last_error(), "max_out"));
    assert_int_equal(attn_translate(s, &o, 2, GTs, src, len, GMAX, ids, olen, NULL),
                     ATTN_STATUS_OK);
    assert_int_equal(olen[0], 6);
    assert_int_equal(olen[1], 6);
    int32_t bad = GV;
    assert_int_equal(attn_translate_begin(s, 1, GTs, src, len, 1), ATTN_STATUS_OK);
    assert_int_equal(attn_translate_step(s, &bad), ATTN_STATUS_INVALID_ARGUMENT);
    attn_translate_session_free(s);
    attn_encdec_model_free(m);
}

/* ---- model directory ------------------------------------------------------------------------ */

static char tmpdir[256];

static const char *tpath(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static void expect_load_error(attn_status want, const char *needle1, const char *needle2) {
    attn_encdec_model *m = NULL;
    attn_status s = attn_encdec_load_dir(tmpdir, &m);
    if ((want ? s != want : s == ATTN_STATUS_OK) || !strstr(attn_last_error(), needle1) ||
        (needle2 && !strstr(attn_last_error(), needle2)))
        fail_msg("load_dir: status %d (want %d), message '%s' (want '%s' and '%s')", s, want,
                 attn_last_error(), needle1, needle2 ? needle2 : "");
    assert_null(m);
}

/* Write model.safetensors with m's tensors, minus `skip`, with `reshape` given a wrong shape,
 * plus an `extra` tensor when not NULL. */
static void write_weights(const attn_encdec_model *m, const char *skip, const char *reshape,
                          const char *extra) {
    attn_st_entry *e = calloc((size_t)m->n_tensors + 1, sizeof *e);
    int n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_encdec_tensor *t = &m->tensors[i];
        if (skip && !strcmp(t->name, skip)) continue;
        e[n].name = t->name, e[n].dtype = ATTN_DTYPE_F32, e[n].ndim = t->ndim;
        e[n].shape[0] = t->shape[0], e[n].shape[1] = t->shape[1];
        if (reshape && !strcmp(t->name, reshape) && t->ndim == 2)
            e[n].shape[0] = t->shape[1], e[n].shape[1] = t->shape[0];
        e[n++].data = m->params + t->offset;
    }
    if (extra) {
        e[n].name = extra, e[n].dtype = ATTN_DTYPE_F32, e[n].ndim = 1, e[n].shape[0] = 1;
        e[n++].data = m->params;
    }
    assert_int_equal(attn_st_save(tpath("model.safetensors"), e, n, NULL), ATTN_STATUS_OK);
    free(e);
}

static void test_model_dir(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_translate_%d", (int)getpid());
    attn_encdec_model *m = make_model(true, true, true, false, GV, 81);
    attn_encdec_model *l = NULL;
    /* A directory that does not exist yet is created. */
    assert_int_equal(attn_encdec_save_dir(m, tmpdir), ATTN_STATUS_OK);
    assert_int_equal(attn_encdec_load_dir(tmpdir, &l), ATTN_STATUS_OK);
    assert_memory_equal(&l->cfg, &m->cfg, sizeof m->cfg);
    assert_int_equal(l->num_params, m->num_params);
    assert_memory_equal(l->params, m->params, m->num_params * sizeof(float));
    attn_encdec_model_free(l);
    /* Saving over an existing directory works too. */
    assert_int_equal(attn_encdec_save_dir(m, tmpdir), ATTN_STATUS_OK);

    write_weights(m, "dec.1.cross_attn.w_v", NULL, NULL);
    expect_load_error(ATTN_STATUS_FORMAT, "model.safetensors", "'dec.1.cross_attn.w_v' is missing");
    write_weights(m, NULL, "dec.0.ff1.w", NULL);
    expect_load_error(ATTN_STATUS_FORMAT, "model.safetensors", "dec.0.ff1.w");
    write_weights(m, NULL, NULL, "dec.9.bogus");
    expect_load_error(ATTN_STATUS_FORMAT, "not in the model", "'dec.9.bogus'");
    /* Corrupt weight file: truncated. */
    FILE *f = fopen(tpath("model.safetensors"), "wb");
    fputs("\x10\0\0\0\0\0\0\0{\"a\":", f);
    fclose(f);
    expect_load_error(ATTN_STATUS_FORMAT, "model.safetensors", NULL);
    unlink(tpath("model.safetensors"));
    expect_load_error(ATTN_STATUS_IO, "model.safetensors", NULL);
    /* Config that disagrees with the weights (untied output now expects out.w). */
    write_weights(m, NULL, NULL, NULL);
    attn_encdec_config c = m->cfg;
    c.d_ff = 48;
    assert_int_equal(attn_encdec_config_save(tpath("config.json"), &c), ATTN_STATUS_OK);
    expect_load_error(ATTN_STATUS_FORMAT, "model.safetensors", "ff1.w");
    f = fopen(tpath("config.json"), "w");
    fputs("{\"d_model\": ", f);
    fclose(f);
    expect_load_error(ATTN_STATUS_OK /* any failure */, "config.json", NULL);
    unlink(tpath("config.json"));
    expect_load_error(ATTN_STATUS_IO, "config.json", NULL);
    rmdir(tmpdir);
    expect_load_error(ATTN_STATUS_IO, "config.json", NULL);
    attn_encdec_model_free(m);
}

/* attn_translate_many: 11 sentences of varied lengths in batches of 3 (4 batches), beam 4 and
 * greedy, on 1 and 2 threads: every sentence's tokens equal attn_translate on that sentence
 * alone and its score within 1e-5; the 1- and 2-thread runs are bit-identical. */
static void test_many(void **state) {
    (void)state;
    enum { NS = 11, TS = 10 };
    attn_encdec_model *m = make_model(true, false, false, true, GV, 77);
    m->w.out_b[EOS] += 1.0f;
    tu_rng r = {4242};
    int32_t lens[NS], srcbuf[NS * TS];
    const int32_t *srcs[NS];
    for (int i = 0; i < NS; i++) {
        lens[i] = 2 + (i * 5) % (TS - 1);
        tu_make_src(&r, 1, TS, GV, &lens[i], EOS, srcbuf + i * TS);
        srcs[i] = srcbuf + i * TS;
    }
    attn_translate_session *s;
    assert_int_equal(attn_translate_session_init(m, 3, 4, TS, 24, &s), ATTN_STATUS_OK);
    const int saved = attn_get_num_threads();
    for (int beam = 1; beam <= 4; beam += 3) {
        attn_translate_options o = attn_translate_default_options();
        o.beam_size = beam, o.max_len = GMAX, o.max_len_a = 0;
        int32_t ids[2][NS * GMAX], olen[2][NS];
        float sc[2][NS];
        memset(ids, 0, sizeof ids);
        for (int th = 1; th <= 2; th++) {
            attn_set_num_threads(th);
            assert_int_equal(attn_translate_many(s, &o, NS, srcs, lens, GMAX, ids[th - 1],
                                                 olen[th - 1], sc[th - 1]),
                             ATTN_STATUS_OK);
        }
        assert_memory_equal(olen[0], olen[1], sizeof olen[0]);
        assert_memory_equal(ids[0], ids[1], sizeof ids[0]);
        assert_memory_equal(sc[0], sc[1], sizeof sc[0]);
        attn_set_num_threads(1);
        for (int i = 0; i < NS; i++) {
            int32_t one[GMAX], n1;
            float s1;
            assert_int_equal(attn_translate(s, &o, 1, lens[i], srcs[i], &lens[i], GMAX, one, &n1,
                                            &s1),
                             ATTN_STATUS_OK);
            assert_int_equal(n1, olen[0][i]);
            assert_memory_equal(one, ids[0] + i * GMAX, sizeof(int32_t) * (size_t)n1);
            assert_true(fabs(s1 - sc[0][i]) <= 1e-5 * fmax(1.0, fabs(s1)));
        }
    }
    attn_set_num_threads(saved);
    /* Bad lengths are refused with the sentence named. */
    attn_translate_options o = attn_translate_default_options();
    int32_t bad[2] = {3, TS + 1}, ids[2 * GMAX], olen[2];
    tu_expect_fail(attn_translate_many(s, &o, 2, srcs, bad, GMAX, ids, olen, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "sentence 1", NULL);
    assert_int_equal(attn_translate_many(s, &o, 0, NULL, NULL, GMAX, NULL, NULL, NULL),
                     ATTN_STATUS_OK);
    attn_translate_session_free(s);
    attn_encdec_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_cache),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_beam1_is_greedy),
        cmocka_unit_test(test_beam_brute_force),
        cmocka_unit_test(test_beam_scores_and_batching),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_model_dir),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_translate_speed.c — the speed-ups of beam search (src/infer/translate.c) change no result.
 *
 * attn_translate's beam search takes three shortcuts, each claimed to be output-preserving:
 *   - the first step runs one row per sentence instead of K copies of <s>;
 *   - the top-2K candidate search skips, by a vectorized threshold, the values of a row that
 *     cannot be among that row's best 2K;
 *   - a sentence stops as soon as no live hypothesis can reach its BEST finished score (besides
 *     the documented rule: K finished and none can beat the worst of them).
 * Checked here against a plain beam search written in this file with the public incremental
 * decoder (attn_translate_begin/step/logits/reorder): K rows from the first step (K − 1 of them
 * dead), full scans of every row, the documented stop rule only, no compaction. Its output ids,
 * lengths and scores must equal attn_translate's EXACTLY (no tolerance: every row is computed
 * independently of the others, and both sides take the same lse and candidate arithmetic), over
 * random models, batches, beams 2..5, alpha in {0, 0.6, 1, −0.5}, exact and heuristic stop. The
 * first-step claim is also checked directly: the logits of a sentence's row are bit-identical
 * whether the batch began with 1 or K rows per sentence. Also: attn_encdec_dropout's AVX-512 path
 * (a training speed-up) gives the same bits as its scalar loop. */
#include "tu.h"

#include "attn_infer.h"
#include "attn_kernels.h"
#include "attn_models.h"

#include <math.h>

#define BOS 2
#define EOS 3
#ifndef TR_EOS_BIAS
#define TR_EOS_BIAS 3.0f
#endif

/* A small random model (as test_translate.c's); biases and LN parameters perturbed. */
static attn_encdec_model *make_model(bool pre_ln, int V, int max_len, uint64_t seed) {
    attn_encdec_config c = attn_encdec_default_config();
    c.src_vocab = c.tgt_vocab = V;
    c.d_model = 32, c.n_head = 4, c.d_ff = 64, c.n_enc_layers = 2, c.n_dec_layers = 2;
    c.max_len = max_len, c.dropout = 0.0f;
    c.pre_ln = pre_ln;
    attn_encdec_model *m;
    assert_int_equal(attn_encdec_model_init(&c, seed, &m), ATTN_STATUS_OK);
    tu_rng r = {seed * 7919 + 1};
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_encdec_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        /* Sharper output distributions than the initialization gives, so that hypotheses end
         * at varied lengths (some at the limit) instead of all at the length limit. */
        const float amp = t->ndim == 1 ? 0.1f : 0.0f;
        for (size_t k = 0; k < t->numel; k++)
            p[k] = t->ndim == 1 ? p[k] + tu_uniform(&r, -amp, amp) : p[k] * 3.0f;
    }
    return m;
}


static double lpen(double alpha, int len) {
    return alpha == 0.0 ? 1.0 : pow((5.0 + len) / 6.0, alpha);
}

typedef struct {
    double sc;
    int k, v;
} pcand;

/* The plain beam search of one sentence (the documented algorithm, nothing skipped). */
static void plain_beam(const attn_encdec_model *m, const attn_translate_options *o, int Ts,
                       const int32_t *src, int32_t src_len, int capT, int32_t *ids, int32_t *len,
                       float *score) {
    const int K = o->beam_size, V = m->cfg.tgt_vocab, M = 2 * K;
    attn_translate_session *s;
    assert_int_equal(attn_translate_session_init(m, 1, K, Ts, capT, &s), ATTN_STATUS_OK);
    assert_int_equal(attn_translate_begin(s, 1, Ts, src, &src_len, K), ATTN_STATUS_OK);
    int lim = (m->cfg.max_len < capT ? m->cfg.max_len : capT) - 1;
    if (o->max_len > 0 && o->max_len < lim) lim = o->max_len;
    if (o->max_len_a > 0.0f) {
        double r = floor((double)o->max_len_a * src_len + o->max_len_b);
        if (r < lim) lim = r < 0 ? 0 : (int)r;
    }
    int32_t tok[8], ntok[8], npar[8], hist[8][64], nhist[8][64];
    double sc[8], nsc[8], lse[8];
    int nfin = 0, fin_len[8];
    int32_t fin_ids[8][64];
    double fin_sc[8];
    float *probs = malloc(sizeof(float) * (size_t)K * V);
    assert_non_null(probs);
    const double alpha = o->length_penalty;
    for (int k = 0; k < K; k++) tok[k] = BOS, sc[k] = k == 0 ? 0.0 : -INFINITY;
#define ADD_FIN(h_, n_, s_)                                                                      \
    do {                                                                                         \
        int slot = nfin;                                                                         \
        if (nfin == K) {                                                                         \
            slot = 0;                                                                            \
            for (int i_ = 1; i_ < K; i_++)                                                       \
                if (fin_sc[i_] < fin_sc[slot]) slot = i_;                                        \
            if (!((s_) > fin_sc[slot])) break;                                                   \
        } else {                                                                                 \
            nfin++;                                                                              \
        }                                                                                        \
        fin_sc[slot] = (s_), fin_len[slot] = (n_);                                               \
        memcpy(fin_ids[slot], (h_), sizeof(int32_t) * (size_t)(n_));                             \
    } while (0)
    for (int t = 0;; t++) {
        assert_int_equal(attn_translate_step(s, tok), ATTN_STATUS_OK);
        const float *lg = attn_translate_logits(s);
        assert_int_equal(attn_softmax_forward(K, V, lg, probs), ATTN_STATUS_OK);
        for (int k = 0; k < K; k++) {
            const float *r = lg + (size_t)k * V;
            int arg = 0;
            for (int v = 1; v < V; v++)
                if (r[v] > r[arg]) arg = v;
            lse[k] = (float)((double)r[arg] - log((double)probs[(size_t)k * V + arg]));
        }
        if (t >= lim) {
            for (int k = 0; k < K; k++) {
                if (!isfinite(sc[k])) continue;
                double f = sc[k] + (double)(lg[(size_t)k * V + EOS] - (float)lse[k]);
                ADD_FIN(hist[k], t, f / lpen(alpha, t + 1));
            }
            break;
        }
        pcand top[16];
        int nt = 0;
        for (int k = 0; k < K; k++) {
            if (!isfinite(sc[k])) continue;
            const double off = sc[k] - (double)(float)lse[k];
            for (int v = 0; v < V; v++) {
                if (v == m->cfg.pad_id || v == BOS) continue;
                double c = off + (double)lg[(size_t)k * V + v];
                if (nt == M && !(c > top[M - 1].sc)) continue;
                int i = nt < M ? nt++ : M - 1;
                while (i > 0 && top[i - 1].sc < c) top[i] = top[i - 1], i--;
                top[i].sc = c, top[i].k = k, top[i].v = v;
            }
        }
        int nlive = 0;
        for (int i = 0; i < nt && nlive < K; i++) {
            if (top[i].v == EOS) {
                if (i < K) ADD_FIN(hist[top[i].k], t, top[i].sc / lpen(alpha, t + 1));
                continue;
            }
            npar[nlive] = top[i].k, ntok[nlive] = top[i].v, nsc[nlive] = top[i].sc;
            nlive++;
        }
        const double best_live = nlive ? nsc[0] : -INFINITY;
        for (int r = nlive; r < K; r++) npar[r] = 0, ntok[r] = EOS, nsc[r] = -INFINITY;
        if (!nlive) break;
        if (nfin == K) {
            double den = o->stop == ATTN_TRANSLATE_STOP_HEURISTIC || alpha < 0
                             ? lpen(alpha, t + 2)
                             : lpen(alpha, lim + 1);
            double worst = INFINITY;
            for (int i = 0; i < K; i++) worst = fmin(worst, fin_sc[i]);
            if (worst >= best_live / den) break;
        }
        assert_int_equal(attn_translate_reorder(s, npar), ATTN_STATUS_OK);
        for (int r = 0; r < K; r++) {
            memcpy(nhist[r], hist[npar[r]], sizeof(int32_t) * (size_t)t);
            nhist[r][t] = ntok[r];
        }
        memcpy(hist, nhist, sizeof hist);
        memcpy(tok, ntok, sizeof tok);
        memcpy(sc, nsc, sizeof sc);
    }
#undef ADD_FIN
    int best = 0;
    for (int i = 1; i < nfin; i++)
        if (fin_sc[i] > fin_sc[best]) best = i;
    *len = fin_len[best];
    memcpy(ids, fin_ids[best], sizeof(int32_t) * (size_t)fin_len[best]);
    *score = (float)fin_sc[best];
    free(probs);
    attn_translate_session_free(s);
}

static void test_same_as_plain_beam(void **state) {
    (void)state;
    /* 18 sentences: the first beam step runs one row per sentence (16 or more); 9 of them: it
     * runs K rows per sentence, K − 1 dead. */
    enum { BMAX = 18, Ts = 9, T = 40 };
    const float alphas[4] = {0.0f, 0.6f, 1.0f, -0.5f};
    int checked = 0, sentences = 0, at_limit = 0;
    /* Under valgrind (tu_valgrind): two variants (one per first-step path) and two length
     * penalties; every code path still runs. */
    const bool vg = tu_valgrind();
    for (int vi = 0; vi < (vg ? 2 : 8); vi++) {
        const int variant = vg ? (vi ? 5 : 0) : vi;
        const int V = variant % 2 ? 40 : 23, K = 2 + variant % 4;
        attn_encdec_model *m = make_model(variant % 3 == 0, V, T, 100 + (uint64_t)variant);
        /* </s> made likely enough that most hypotheses end before the length limit. */
        assert_non_null(m->w.out_b);
        m->w.out_b[EOS] += TR_EOS_BIAS + 0.25f * (float)variant;
        tu_rng r = {7 + (uint64_t)variant};
        const int B = variant < 4 ? BMAX : 9;
        int32_t src_len[BMAX], src[BMAX * Ts];
        for (int b = 0; b < B; b++) src_len[b] = 1 + (int32_t)(tu_uniform(&r, 0, 1) * (Ts - 0.01f));
        tu_make_src(&r, B, Ts, V, src_len, EOS, src);
        attn_translate_session *s;
        assert_int_equal(attn_translate_session_init(m, B, 5, Ts, T, &s), ATTN_STATUS_OK);
        for (int ai = vg ? 2 : 0; ai < 4; ai++)
            for (int stop = 0; stop < 2; stop++) {
                attn_translate_options o = attn_translate_default_options();
                o.beam_size = K, o.length_penalty = alphas[ai];
                o.stop = stop ? ATTN_TRANSLATE_STOP_HEURISTIC : ATTN_TRANSLATE_STOP_EXACT;
                o.max_len_a = 1.5f, o.max_len_b = 4 + variant;
                int32_t ids[BMAX * T], len[BMAX];
                float score[BMAX];
                assert_int_equal(attn_translate(s, &o, B, Ts, src, src_len, T, ids, len, score),
                                 ATTN_STATUS_OK);
                for (int b = 0; b < B; b++) {
                    int32_t pids[T], plen;
                    float psc;
                    plain_beam(m, &o, Ts, src + b * Ts, src_len[b], T, pids, &plen, &psc);
                    sentences++;
                    if (plen >= (int)floorf(1.5f * src_len[b]) + 4 + variant) at_limit++;
                    bool same = plen == len[b] && psc == score[b] &&
                                !memcmp(pids, ids + b * T, sizeof(int32_t) * (size_t)plen);
                    if (!same) {
                        printf("  variant %d K=%d alpha=%g stop=%d sentence %d: plain len %d "
                               "score %.9g, attn len %d score %.9g\n",
                               variant, K, (double)alphas[ai], stop, b, (int)plen, (double)psc,
                               (int)len[b], (double)score[b]);
                        tu_failures++;
                    }
                    checked += same;
                }
            }
        attn_translate_session_free(s);
        attn_encdec_model_free(m);
    }
    printf("  %d of %d sentences identical to the plain beam search (%d at the length limit)\n",
           checked, sentences, at_limit);
}

/* The first step with 1 row per sentence gives the same logits bits as with K rows. */
static void test_first_step_rows(void **state) {
    (void)state;
    enum { Ts = 7, V = 37, K = 4 };
    const int Bs[3] = {1, 3, 12};
    attn_encdec_model *m = make_model(true, V, 24, 5);
    for (int bi = 0; bi < 3; bi++) {
        const int B = Bs[bi];
        tu_rng r = {31 + (uint64_t)B};
        int32_t src_len[12], src[12 * Ts], tok[12 * K];
        for (int b = 0; b < B; b++) src_len[b] = 1 + (int32_t)(tu_uniform(&r, 0, 1) * (Ts - 0.01f));
        tu_make_src(&r, B, Ts, V, src_len, EOS, src);
        for (int n = 0; n < B * K; n++) tok[n] = BOS;
        attn_translate_session *s1, *sk;
        assert_int_equal(attn_translate_session_init(m, B, K, Ts, 24, &s1), ATTN_STATUS_OK);
        assert_int_equal(attn_translate_session_init(m, B, K, Ts, 24, &sk), ATTN_STATUS_OK);
        assert_int_equal(attn_translate_begin(s1, B, Ts, src, src_len, 1), ATTN_STATUS_OK);
        assert_int_equal(attn_translate_begin(sk, B, Ts, src, src_len, K), ATTN_STATUS_OK);
        assert_int_equal(attn_translate_step(s1, tok), ATTN_STATUS_OK);
        assert_int_equal(attn_translate_step(sk, tok), ATTN_STATUS_OK);
        const float *l1 = attn_translate_logits(s1), *lk = attn_translate_logits(sk);
        int diff = 0;
        for (int b = 0; b < B; b++)
            for (int k = 0; k < K; k++)
                diff += memcmp(l1 + (size_t)b * V, lk + (size_t)(b * K + k) * V,
                               sizeof(float) * V) != 0;
        if (diff) {
            printf("  B=%d: %d rows differ between 1 and %d rows per sentence\n", B, diff, K);
            tu_failures++;
        }
        attn_translate_session_free(s1);
        attn_translate_session_free(sk);
    }
    attn_encdec_model_free(m);
}

/* attn_encdec_dropout's vectorized path (AVX-512 backend) gives the same bits as the scalar
 * loop (any other backend), for lengths around the 16-wide blocks and the per-thread chunks. */
static void test_dropout_paths(void **state) {
    (void)state;
    tu_need_backend(ATTN_BACKEND_AVX512); /* without it only the scalar path exists */
    const attn_backend was = attn_get_backend();
    const size_t ns[7] = {1, 15, 16, 17, 1000, 16385, 70001};
    const float ps[3] = {0.1f, 0.5f, 0.9f};
    float *a = malloc(sizeof(float) * 70001), *b = malloc(sizeof(float) * 70001);
    assert_non_null(a);
    assert_non_null(b);
    tu_rng r = {3};
    for (int ni = 0; ni < 7; ni++)
        for (int pi = 0; pi < 3; pi++)
            for (int th = 1; th <= 2; th++) {
                const size_t n = ns[ni];
                tu_fill(&r, a, n, -2.0f, 2.0f);
                memcpy(b, a, sizeof(float) * n);
                attn_set_num_threads(th);
                assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
                attn_encdec_dropout(11 + ni, 5 + pi, 3u + (uint32_t)th, ps[pi], n, a);
                assert_int_equal(attn_set_backend(ATTN_BACKEND_AVX512), ATTN_STATUS_OK);
                attn_encdec_dropout(11 + ni, 5 + pi, 3u + (uint32_t)th, ps[pi], n, b);
                if (memcmp(a, b, sizeof(float) * n)) {
                    printf("  dropout n=%zu p=%g threads=%d: paths differ\n", n, (double)ps[pi],
                           th);
                    tu_failures++;
                }
                if (n == 70001) { /* and it drops about p of the elements (5 sigma) */
                    size_t z = 0;
                    for (size_t i = 0; i < n; i++) z += b[i] == 0.0f;
                    const double sd = sqrt((double)n * ps[pi] * (1 - ps[pi]));
                    if (fabs((double)z - (double)n * ps[pi]) > 5 * sd) {
                        printf("  dropout p=%g dropped %zu of %zu\n", (double)ps[pi], z, n);
                        tu_failures++;
                    }
                }
            }
    attn_set_num_threads(1);
    assert_int_equal(attn_set_backend(was), ATTN_STATUS_OK);
    free(a);
    free(b);
}

int main(void) {
    attn_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_step_rows),
        cmocka_unit_test(test_same_as_plain_beam),
        cmocka_unit_test(test_dropout_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_ragged.c — ragged KV caches: sequences at their own lengths in one batch (continuous
 * batching, `attn serve`).
 *   - block layer: attn_nn_attention_forward with attn_nn_seqs.pos0s / slot (each sequence's new
 *     rows appended at its own cache position, attention per sequence) against the
 *     single-sequence path (the same cache rows as a batch-1 cache, the same outputs);
 *   - models: attn_gpt_decode_seq (one sequence alone: bit for bit attn_gpt_decode of a batch-1
 *     cache), attn_gpt_decode_ragged (one token each for a subset of sequences in one pass) and
 *     attn_gpt_decode_batch (a new prompt in the same pass) against each sequence decoded alone, on GPT-2, Llama (grouped-query heads), Qwen3 (q/k
 *     norms), Mistral (a sliding window shorter than the sequences), and the real SmolLM2 Q4_1
 *     GGUF file when models/ has it;
 *   - argument checks.
 * Tolerance: the batched step runs every linear map as an (n, C) product where the reference
 * runs (1, C) ones; the GEMM sums in another order for another row count, so rows agree to float
 * rounding, not bit for bit. Measured on an AVX-512 Xeon (each check prints its error): block
 * layer up to 2.5e-7 of max|y|; float32 models up to 2.5e-7 of max|logit| (GPT-2, Llama GQA,
 * Qwen3, Mistral window); SmolLM2 Q4_1 up to 2.0e-6 (6.5e-5 absolute on logits of ~35).
 * Checked at 1e-6 (block layer), 2e-5 (float32 models) and 2e-4 (Q4_1) times max|ref|. The
 * prompt path (attn_gpt_decode_seq) is checked bit for bit. */
#include "tu.h"

#include "attn_gguf.h"
#include "attn_gpt.h"
#include "attn_nn.h"
#include "attn_quant.h"

/* ---- block layer --------------------------------------------------------------------------- */

/* Self-attention, H = 4 query heads over H_kv = 2 key/value heads of D = 8, C = 32, causal,
 * optional sliding window; NS cache slots of MT positions. Each slot first gets its own prompt
 * (a single-sequence call on a batch-1 view of the slot), then ragged calls append Tq rows to a
 * subset of slots; the same rows go through the single-sequence path on a second cache. */
static void attention_ragged(int window, int Tq) {
    enum { C = 32, H = 4, HK = 2, D = 8, NS = 4, MT = 24, W = (H + 2 * HK) * D, KD = HK * D };
    attn_nn_attn_cfg cfg = attn_nn_attn_default_cfg(C, H);
    cfg.n_kv_head = HK, cfg.d_head = D, cfg.causal = true, cfg.window = window;
    tu_rng r = {42};
    float *wqkv = malloc(sizeof(float) * W * C), *bqkv = malloc(sizeof(float) * W);
    float *wo = malloc(sizeof(float) * C * H * D);
    tu_fill(&r, wqkv, (size_t)W * C, -0.3f, 0.3f);
    tu_fill(&r, bqkv, W, -0.1f, 0.1f);
    tu_fill(&r, wo, (size_t)C * H * D, -0.3f, 0.3f);
    attn_nn_attn w;
    memset(&w, 0, sizeof w);
    w.qkv = attn_nn_linear_make(wqkv, bqkv, C, W, ATTN_NN_OUT_IN);
    w.o = attn_nn_linear_make(wo, NULL, H * D, C, ATTN_NN_OUT_IN);
    const size_t ncache = (size_t)NS * MT * KD;
    float *k1 = calloc(ncache, sizeof(float)), *v1 = calloc(ncache, sizeof(float));
    float *k2 = calloc(ncache, sizeof(float)), *v2 = calloc(ncache, sizeof(float));
    /* the ragged side's cache also keeps its keys transposed (attn_nn_kv.kt), as decoding does */
    const int LDKT = attn_nn_kv_ldkt(MT);
    float *kt1 = calloc((size_t)NS * KD * LDKT, sizeof(float));
    float *x = malloc(sizeof(float) * NS * MT * C);
    float *proj = malloc(sizeof(float) * NS * MT * W), *ctx = malloc(sizeof(float) * NS * MT * H * D);
    float *y = malloc(sizeof(float) * NS * MT * C), *yref = malloc(sizeof(float) * NS * MT * C);
    attn_nn_attn_acts a = {proj, ctx, NULL, NULL, NULL};
    const attn_nn_run run = attn_nn_default_run();
    int32_t len[NS] = {5, 1, 9, 3};
    /* Prompts: the same single-sequence call into both caches. */
    for (int sl = 0; sl < NS; sl++) {
        tu_fill(&r, x, (size_t)len[sl] * C, -1, 1);
        attn_nn_seqs s = attn_nn_seqs_dense(1, len[sl], len[sl]);
        const size_t at = (size_t)sl * MT * KD;
        const attn_nn_kv c1 = {k1 + at, v1 + at, 1, MT, 0, kt1 + (size_t)sl * KD * LDKT, LDKT, false, NULL, NULL};
        const attn_nn_kv c2 = {k2 + at, v2 + at, 1, MT, 0, NULL, 0, false, NULL, NULL};
        assert_int_equal(attn_nn_attention_forward(&run, &cfg, &w, &s, x, NULL, &c1, &a, NULL,
                                                   0.0f, y), ATTN_STATUS_OK);
        assert_int_equal(attn_nn_attention_forward(&run, &cfg, &w, &s, x, NULL, &c2, &a, NULL,
                                                   0.0f, y), ATTN_STATUS_OK);
    }
    /* Ragged steps over varying subsets (slot order not sorted). */
    const int32_t subsets[3][NS] = {{2, 0, 3, 1}, {3, 1, -1, -1}, {0, 2, 3, -1}};
    const int nsub[3] = {4, 2, 3};
    for (int step = 0; step < 3; step++) {
        const int n = nsub[step];
        int32_t pos0s[NS];
        for (int i = 0; i < n; i++) pos0s[i] = len[subsets[step][i]];
        tu_fill(&r, x, (size_t)n * Tq * C, -1, 1);
        attn_nn_seqs s = attn_nn_seqs_dense(n, Tq, Tq);
        s.pos0s = pos0s, s.slot = subsets[step];
        const attn_nn_kv c1 = {k1, v1, NS, MT, 0, kt1, LDKT, false, NULL, NULL};
        assert_int_equal(attn_nn_attention_forward(&run, &cfg, &w, &s, x, NULL, &c1, &a, NULL,
                                                   0.0f, y), ATTN_STATUS_OK);
        for (int i = 0; i < n; i++) {
            const int sl = subsets[step][i];
            attn_nn_seqs s1 = attn_nn_seqs_dense(1, Tq, Tq);
            s1.pos0 = len[sl];
            const size_t at = (size_t)sl * MT * KD;
            const attn_nn_kv c2 = {k2 + at, v2 + at, 1, MT, 0, NULL, 0, false, NULL, NULL};
            assert_int_equal(attn_nn_attention_forward(&run, &cfg, &w, &s1, x + (size_t)i * Tq * C,
                                                       NULL, &c2, &a, NULL, 0.0f,
                                                       yref + (size_t)i * Tq * C), ATTN_STATUS_OK);
            len[sl] += Tq;
        }
        char what[96];
        snprintf(what, sizeof what, "ragged attention w=%d Tq=%d step %d: y", window, Tq, step);
        tu_close(what, y, yref, (size_t)n * Tq * C, 1e-6, 0);
    }
    /* Every slot's cache rows: what the single-sequence calls wrote. */
    for (int sl = 0; sl < NS; sl++) {
        const size_t at = (size_t)sl * MT * KD, nr = (size_t)len[sl] * KD;
        char what[96];
        snprintf(what, sizeof what, "ragged attention w=%d Tq=%d slot %d: keys", window, Tq, sl);
        tu_close(what, k1 + at, k2 + at, nr, 1e-6, 0);
        snprintf(what, sizeof what, "ragged attention w=%d Tq=%d slot %d: values", window, Tq, sl);
        tu_close(what, v1 + at, v2 + at, nr, 1e-6, 0);
        int off = 0; /* the transposed keys: the keys, transposed */
        for (int t = 0; t < len[sl]; t++)
            for (int c = 0; c < KD; c++)
                off += kt1[((size_t)sl * KD + c) * LDKT + t] != k1[at + (size_t)t * KD + c];
        printf("  ragged attention w=%d Tq=%d slot %d: %d transposed keys differ\n", window, Tq,
               sl, off);
        if (off) tu_failures++;
    }
    /* Refused: a slot out of range, positions past the cache, probabilities, key padding. */
    int32_t bad_slot[1] = {NS}, p0[1] = {0}, full[1] = {MT}, kvl[1] = {1};
    attn_nn_seqs s = attn_nn_seqs_dense(1, 1, 1);
    s.pos0s = p0, s.slot = bad_slot;
    const attn_nn_kv c1 = {k1, v1, NS, MT, 0, NULL, 0, false, NULL, NULL};
    tu_expect_fail(attn_nn_attention_forward(&run, &cfg, &w, &s, x, NULL, &c1, &a, NULL, 0.0f, y),
                   ATTN_STATUS_INVALID_ARGUMENT, "slot", NULL);
    bad_slot[0] = 1, s.pos0s = full;
    tu_expect_fail(attn_nn_attention_forward(&run, &cfg, &w, &s, x, NULL, &c1, &a, NULL, 0.0f, y),
                   ATTN_STATUS_INVALID_ARGUMENT, "exceed", NULL);
    s.pos0s = p0;
    tu_expect_fail(attn_nn_attention_forward(&run, &cfg, &w, &s, x, NULL, &c1, &a, y, 0.0f, y),
                   ATTN_STATUS_UNSUPPORTED, "probabilities", NULL);
    s.kv_len = kvl;
    tu_expect_fail(attn_nn_attention_forward(&run, &cfg, &w, &s, x, NULL, &c1, &a, NULL, 0.0f, y),
                   ATTN_STATUS_UNSUPPORTED, "padding", NULL);
    s.kv_len = NULL;
    tu_expect_fail(attn_nn_attention_forward(&run, &cfg, &w, &s, x, NULL, NULL, &a, NULL, 0.0f, y),
                   ATTN_STATUS_INVALID_ARGUMENT, "with a cache", NULL);
    free(wqkv), free(bqkv), free(wo), free(k1), free(v1), free(k2), free(v2), free(kt1), free(x);
    free(proj), free(ctx), free(y), free(yref);
}

static void test_attention_ragged(void **state) {
    (void)state;
    attention_ragged(0, 1);
    attention_ragged(0, 3);
    attention_ragged(4, 1); /* a window shorter than most sequences */
    attention_ragged(4, 2);
}

/* ---- the batched quantized products --------------------------------------------------------- */

/* attn_quant_gemm_batch / attn_quant_gemm_packed_batch over M rows: bit for bit the plain
 * products over each chunk of 8 rows (the decoding path), on every backend this CPU has, for
 * both activation modes, the row layout (Q4_1, Q6_K) and the x8 layout (Q4_1, Q8_0), N not a
 * multiple of 8 (the packed tail rows). */
static void test_quant_batch(void **state) {
    (void)state;
    enum { N = 75, K = 96, M = 21 };
    tu_rng r = {3};
    float *w = malloc(sizeof(float) * N * 256), *x = malloc(sizeof(float) * M * 256);
    float *y = malloc(sizeof(float) * M * N), *yref = malloc(sizeof(float) * M * N);
    float bias[N];
    tu_fill(&r, w, (size_t)N * 256, -1, 1);
    tu_fill(&r, x, (size_t)M * 256, -1, 1);
    tu_fill(&r, bias, N, -1, 1);
    const attn_qtype types[3] = {ATTN_QTYPE_Q4_1, ATTN_QTYPE_Q8_0, ATTN_QTYPE_Q6_K};
    const attn_backend bes[3] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX2, ATTN_BACKEND_AVX512};
    const attn_backend was = attn_get_backend();
    int checked = 0;
    for (int bi = 0; bi < 3; bi++) {
        if (!attn_backend_available(bes[bi])) continue;
        attn_set_backend(bes[bi]);
        for (int ti = 0; ti < 3; ti++) {
            const int Kt = types[ti] == ATTN_QTYPE_Q6_K ? 256 : K;
            size_t rb;
            assert_int_equal(attn_quant_row_bytes(types[ti], Kt, &rb), ATTN_STATUS_OK);
            uint8_t *q = malloc(rb * N);
            assert_int_equal(attn_quant_quantize(types[ti], (int64_t)N * Kt, w, q), ATTN_STATUS_OK);
            attn_quant_packed P;
            const bool packed = attn_quant_pack_supported(types[ti]);
            if (packed) assert_int_equal(attn_quant_pack(types[ti], N, Kt, q, &P), ATTN_STATUS_OK);
            for (int qa = 0; qa < 2; qa++) {
                const attn_quant_act act = qa ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
                for (int lay = 0; lay < (packed ? 2 : 1); lay++) {
                    for (int i = 0; i < M * N; i++) y[i] = yref[i] = 0.5f;
                    for (int r0 = 0; r0 < M; r0 += 8) {
                        const int mc = M - r0 < 8 ? M - r0 : 8;
                        const float *xr = x + (size_t)r0 * 256;
                        float *yr = yref + (size_t)r0 * N;
                        assert_int_equal(lay ? attn_quant_gemm_packed(mc, xr, 256, &P, 1.0f, yr, N,
                                                                      bias, ATTN_ACT_GELU_TANH, act)
                                             : attn_quant_gemm(mc, N, Kt, xr, 256, types[ti], q,
                                                               1.0f, yr, N, bias,
                                                               ATTN_ACT_GELU_TANH, act),
                                         ATTN_STATUS_OK);
                    }
                    assert_int_equal(lay ? attn_quant_gemm_packed_batch(M, x, 256, &P, 1.0f, y, N,
                                                                        bias, ATTN_ACT_GELU_TANH,
                                                                        act)
                                         : attn_quant_gemm_batch(M, N, Kt, x, 256, types[ti], q,
                                                                 1.0f, y, N, bias,
                                                                 ATTN_ACT_GELU_TANH, act),
                                     ATTN_STATUS_OK);
                    if (memcmp(y, yref, sizeof(float) * M * N)) {
                        printf("  %s %s %s %s: the batched product differs from its chunks\n",
                               attn_backend_name(bes[bi]), attn_quant_type_name(types[ti]),
                               qa ? "q8" : "f32", lay ? "x8" : "rows");
                        tu_failures++;
                    }
                    checked++;
                }
            }
            if (packed) attn_quant_packed_free(&P);
            free(q);
        }
    }
    attn_set_backend(was);
    printf("  %d batched products equal their 8-row chunks bit for bit\n", checked);
    free(w), free(x), free(y), free(yref);
}

/* ---- models -------------------------------------------------------------------------------- */

enum { NSEQ = 6, STEPS = 6 };

/* Decode NSEQ prompts of different lengths and STEPS tokens each (subsets stepping at
 * different times, one sequence restarted mid-way) through one slot cache, against each
 * sequence in its own batch-1 cache. rtol: the tolerance on the batched steps' logits. */
static void model_ragged(const char *name, const attn_gpt_model *m, double rtol) {
    const int V = m->cfg.vocab_size, MT = 48;
    static const int plen[NSEQ] = {3, 11, 1, 7, 20, 5};
    tu_rng r = {7};
    attn_gpt_kv *ref[NSEQ + 1], *kv = NULL;
    for (int b = 0; b <= NSEQ; b++)
        assert_int_equal(attn_gpt_kv_init(m, 1, MT, &ref[b]), ATTN_STATUS_OK);
    assert_int_equal(attn_gpt_kv_init_slots(m, NSEQ, MT, &kv), ATTN_STATUS_OK);
    float *lg = malloc(sizeof(float) * NSEQ * V), *lref = malloc(sizeof(float) * NSEQ * V);
    float *l1 = malloc(sizeof(float) * V);
    int32_t ids[32], next[NSEQ];
    /* Prompts: decode_seq equals the batch-1 cache's decode bit for bit. */
    double worst = 0;
    for (int b = 0; b < NSEQ; b++) {
        for (int t = 0; t < plen[b]; t++) ids[t] = (int32_t)(tu_uniform(&r, 0, 1) * V) % V;
        assert_int_equal(attn_gpt_decode_seq(m, kv, b, plen[b], ids, lg + (size_t)b * V, false),
                         ATTN_STATUS_OK);
        assert_int_equal(attn_gpt_decode(m, ref[b], 1, plen[b], ids, l1, false), ATTN_STATUS_OK);
        if (memcmp(lg + (size_t)b * V, l1, sizeof(float) * V)) {
            printf("  %s: decode_seq of sequence %d differs from a batch-1 decode\n", name, b);
            tu_failures++;
        }
        assert_int_equal(attn_gpt_kv_seq_len(kv, b), plen[b]);
        next[b] = (int32_t)(b * 31 + 5) % V;
    }
    assert_int_equal(attn_gpt_kv_len(kv), 20);
    /* A cache whose sequences differ in length: attn_gpt_decode refuses it. */
    tu_expect_fail(attn_gpt_decode(m, kv, NSEQ, 1, next, lg, false), ATTN_STATUS_INVALID_ARGUMENT,
                   "different lengths", NULL);
    for (int step = 0; step < STEPS; step++) {
        /* All sequences, then subsets in shuffled order. */
        int32_t seqs[NSEQ];
        int n = 0;
        for (int i = 0; i < NSEQ; i++) {
            const int b = (i * 5 + step) % NSEQ;
            if (step % 2 == 0 || b % 3 != 1) seqs[n++] = b;
        }
        int32_t tok[NSEQ + 16], counts[NSEQ];
        int fed = 0, restart = -1;
        for (int i = 0; i < n; i++) {
            counts[i] = 1;
            if (step >= 3 && seqs[i] == 2 - 3 + step) {
                /* Sequence 2 (step 3; then 3, 4) ends and a new one starts in its slot (a
                 * server's next request): its 9-token prompt in the same pass as the others'
                 * steps (attn_gpt_decode_batch). */
                restart = i;
                assert_int_equal(attn_gpt_kv_seq_truncate(kv, seqs[i], 0), ATTN_STATUS_OK);
                attn_gpt_kv_reset(ref[seqs[i]]);
                counts[i] = 9;
                for (int t = 0; t < 9; t++) tok[fed + t] = (int32_t)(t * 17 + 3 + step) % V;
            } else {
                tok[fed] = next[seqs[i]];
            }
            fed += counts[i];
        }
        const attn_status st = restart >= 0
                                   ? attn_gpt_decode_batch(m, kv, n, seqs, counts, tok, lg)
                                   : attn_gpt_decode_ragged(m, kv, n, seqs, tok, lg);
        if (st) fail_msg("%s", attn_last_error());
        for (int i = 0, at = 0; i < n; at += counts[i], i++) {
            const int b = seqs[i];
            assert_int_equal(attn_gpt_decode(m, ref[b], 1, counts[i], &tok[at],
                                             lref + (size_t)i * V, false), ATTN_STATUS_OK);
            assert_int_equal(attn_gpt_kv_seq_len(kv, b), attn_gpt_kv_len(ref[b]));
            /* The next token: the reference's argmax (what greedy decoding feeds). */
            int best = 0;
            for (int v = 1; v < V; v++)
                if (lref[(size_t)i * V + v] > lref[(size_t)i * V + best]) best = v;
            next[b] = best;
        }
        for (size_t i = 0; i < (size_t)n * V; i++) {
            const double e = fabs((double)lg[i] - lref[i]);
            if (e > worst) worst = e;
        }
        char what[96];
        snprintf(what, sizeof what, "%s: ragged step %d (%d seqs): logits", name, step, n);
        tu_close(what, lg, lref, (size_t)n * V, rtol, 0);
    }
    printf("  %s: largest |batched - alone| over all steps: %.3e\n", name, worst);
    /* The first n sequences (seqs NULL), and a cache-filling check. */
    assert_int_equal(attn_gpt_decode_ragged(m, kv, 2, NULL, next, lg), ATTN_STATUS_OK);
    /* Refused: a sequence twice, one out of range, n out of range, a full sequence; nothing
     * changes. */
    int32_t dup[2] = {1, 1}, out[1] = {NSEQ};
    const int len1 = attn_gpt_kv_seq_len(kv, 1);
    tu_expect_fail(attn_gpt_decode_ragged(m, kv, 2, dup, next, lg), ATTN_STATUS_INVALID_ARGUMENT,
                   "twice", NULL);
    tu_expect_fail(attn_gpt_decode_ragged(m, kv, 1, out, next, lg), ATTN_STATUS_INVALID_ARGUMENT,
                   "outside", NULL);
    tu_expect_fail(attn_gpt_decode_ragged(m, kv, NSEQ + 1, NULL, next, lg),
                   ATTN_STATUS_INVALID_ARGUMENT, "n = ", NULL);
    int32_t bad_id[1] = {V};
    int32_t one[1] = {1};
    tu_expect_fail(attn_gpt_decode_ragged(m, kv, 1, one, bad_id, lg),
                   ATTN_STATUS_INVALID_ARGUMENT, "vocabulary", NULL);
    assert_int_equal(attn_gpt_kv_seq_len(kv, 1), len1);
    tu_expect_fail(attn_gpt_decode_seq(m, kv, 0, MT, ids, lg, false),
                   ATTN_STATUS_INVALID_ARGUMENT, "fit", NULL);
    tu_expect_fail(attn_gpt_kv_seq_truncate(kv, 0, MT), ATTN_STATUS_INVALID_ARGUMENT, "holds",
                   NULL);
    /* Fill sequence 0 to the end: the next step on it is refused. */
    const int room = MT - attn_gpt_kv_seq_len(kv, 0);
    for (int t = 0; t < room; t++) ids[t % 32] = 1;
    for (int t = 0; t < room; t++)
        assert_int_equal(attn_gpt_decode_ragged(m, kv, 1, NULL, ids, NULL), ATTN_STATUS_OK);
    tu_expect_fail(attn_gpt_decode_ragged(m, kv, 1, NULL, ids, lg), ATTN_STATUS_INVALID_ARGUMENT,
                   "full", NULL);
    /* truncate keeps at most the shortest sequence. */
    tu_expect_fail(attn_gpt_kv_truncate(kv, MT), ATTN_STATUS_INVALID_ARGUMENT, "truncate", NULL);
    assert_int_equal(attn_gpt_kv_truncate(kv, 0), ATTN_STATUS_OK);
    assert_int_equal(attn_gpt_kv_len(kv), 0);
    for (int b = 0; b <= NSEQ; b++) attn_gpt_kv_free(ref[b]);
    attn_gpt_kv_free(kv);
    free(lg), free(lref), free(l1);
}

static attn_gpt_model *model_from(const char *json) {
    attn_gpt_config c;
    if (attn_gpt_config_parse(json, "<test>", &c)) fail_msg("%s", attn_last_error());
    attn_gpt_model *m = NULL;
    if (attn_gpt_model_init(&c, 11, &m)) fail_msg("%s", attn_last_error());
    return m;
}

static void test_gpt2_ragged(void **state) {
    (void)state;
    attn_gpt_model *m = model_from("{\"model_type\": \"gpt2\", \"vocab_size\": 300, "
                                   "\"n_positions\": 64, \"n_embd\": 64, \"n_head\": 4, "
                                   "\"n_layer\": 2}");
    model_ragged("gpt2", m, 2e-5);
    /* Packed weights (more than 8 rows take the panels: none here) give the same. */
    assert_int_equal(attn_gpt_pack_weights(m), ATTN_STATUS_OK);
    model_ragged("gpt2 packed", m, 2e-5);
    attn_gpt_model_free(m);
}

static void test_llama_ragged(void **state) {
    (void)state;
    attn_gpt_model *m = model_from(
        "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 64, "
        "\"intermediate_size\": 96, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
        "\"num_hidden_layers\": 2, \"max_position_embeddings\": 64}");
    model_ragged("llama gqa", m, 2e-5);
    attn_gpt_model_free(m);
}

static void test_qwen3_ragged(void **state) {
    (void)state;
    attn_gpt_model *m = model_from(
        "{\"model_type\": \"qwen3\", \"vocab_size\": 256, \"hidden_size\": 64, "
        "\"intermediate_size\": 96, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
        "\"head_dim\": 16, \"num_hidden_layers\": 2, \"max_position_embeddings\": 64, "
        "\"tie_word_embeddings\": true}");
    model_ragged("qwen3 qk-norm", m, 2e-5);
    attn_gpt_model_free(m);
}

static void test_mistral_window_ragged(void **state) {
    (void)state;
    attn_gpt_model *m = model_from(
        "{\"model_type\": \"mistral\", \"vocab_size\": 256, \"hidden_size\": 64, "
        "\"intermediate_size\": 96, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, "
        "\"num_hidden_layers\": 2, \"max_position_embeddings\": 64, \"sliding_window\": 6}");
    model_ragged("mistral window 6", m, 2e-5);
    attn_gpt_model_free(m);
}

/* attn_gpt_kv_seq_copy (the server sharing a prompt's prefix between slots): sequence 1 takes
 * positions of sequence 0's cache (all 17 of its prompt, or those after a 12-token prefix it
 * computed by the same pass) and then decodes the same steps; its logits are sequence 0's bit for
 * bit, with float32 and binary16 caches (the transposed keys, values and binary16 copies all
 * copied). Bad arguments are refused. */
static attn_gpt_kv *slots_kv(const attn_gpt_model *m, int n, int max_T, bool f16);
static void test_kv_seq_copy(void **state) {
    (void)state;
    attn_gpt_model *m = model_from(
        "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 64, "
        "\"intermediate_size\": 96, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
        "\"num_hidden_layers\": 2, \"max_position_embeddings\": 64}");
    const int V = m->cfg.vocab_size;
    enum { P = 17, NSTEP = 6, N = P + NSTEP };
    int32_t ids[N];
    for (int t = 0; t < N; t++) ids[t] = (int32_t)((t * 37 + 5) % V);
    float *a = malloc(sizeof(float) * NSTEP * V), *b = malloc(sizeof(float) * V);
    for (int f16 = 0; f16 <= 1; f16++)
        for (int own = 0; own <= 12; own += 12) {
            attn_gpt_kv *kv = slots_kv(m, 3, 40, f16);
            /* sequence 0: the prompt in passes of 12 and 5, then single steps */
            assert_int_equal(attn_gpt_decode_seq(m, kv, 0, 12, ids, NULL, false), ATTN_STATUS_OK);
            assert_int_equal(attn_gpt_decode_seq(m, kv, 0, 5, ids + 12, NULL, false), ATTN_STATUS_OK);
            for (int t = 0; t < NSTEP; t++)
                assert_int_equal(attn_gpt_decode_seq(m, kv, 0, 1, ids + P + t, a + (size_t)t * V, false),
                                 ATTN_STATUS_OK);
            /* sequence 2 holds something else at the same positions (the copy must not read it) */
            int32_t other[P];
            for (int t = 0; t < P; t++) other[t] = (int32_t)((t * 11 + 3) % V);
            assert_int_equal(attn_gpt_decode_seq(m, kv, 2, P, other, NULL, false), ATTN_STATUS_OK);
            /* sequence 1: its own prefix (the same first pass), the rest of the prompt copied */
            if (own) assert_int_equal(attn_gpt_decode_seq(m, kv, 1, 12, ids, NULL, false), ATTN_STATUS_OK);
            assert_int_equal(attn_gpt_kv_seq_copy(kv, 1, 0, P), ATTN_STATUS_OK);
            assert_int_equal(attn_gpt_kv_seq_len(kv, 1), P);
            assert_int_equal(attn_gpt_kv_seq_len(kv, 0), N);
            for (int t = 0; t < NSTEP; t++) {
                assert_int_equal(attn_gpt_decode_seq(m, kv, 1, 1, ids + P + t, b, false), ATTN_STATUS_OK);
                if (memcmp(a + (size_t)t * V, b, sizeof(float) * V))
                    fail_msg("kv copy (%s cache, own prefix %d): step %d differs from the source's",
                             f16 ? "f16" : "f32", own, t);
            }
            printf("  kv copy (%s cache, own prefix %d): %d steps bit for bit as the source's\n",
                   f16 ? "f16" : "f32", own, NSTEP);
            /* refused: the same sequence, out of range, past the source, behind the target */
            assert_int_equal(attn_gpt_kv_seq_copy(kv, 1, 1, P), ATTN_STATUS_INVALID_ARGUMENT);
            assert_int_equal(attn_gpt_kv_seq_copy(kv, 3, 0, P), ATTN_STATUS_INVALID_ARGUMENT);
            assert_int_equal(attn_gpt_kv_seq_copy(kv, -1, 0, P), ATTN_STATUS_INVALID_ARGUMENT);
            assert_int_equal(attn_gpt_kv_seq_copy(kv, 2, 0, N + 1), ATTN_STATUS_INVALID_ARGUMENT);
            assert_int_equal(attn_gpt_kv_seq_copy(kv, 2, 0, P - 1), ATTN_STATUS_INVALID_ARGUMENT);
            assert_int_equal(attn_gpt_kv_seq_copy(NULL, 1, 0, P), ATTN_STATUS_INVALID_ARGUMENT);
            assert_int_equal(attn_gpt_kv_seq_len(kv, 2), P);
            attn_gpt_kv_free(kv);
        }
    free(a), free(b);
    attn_gpt_model_free(m);
}

/* The real SmolLM2-135M-Instruct Q4_1 file (tools/get_smollm2.sh puts it in models/), loaded;
 * the test skipped without it or under valgrind. */
static attn_gpt_model *smollm2_q4_1(void) {
    const char *b = getenv("ATTN_BUILD");
    char path[512];
    snprintf(path, sizeof path, "%s/../models/SmolLM2-135M-Instruct.Q4_1.gguf",
             b && *b ? b : "build");
    FILE *f = fopen(path, "rb");
    if (!f) tu_skip("%s not found (tools/install_deps.sh fetches it)", path);
    fclose(f);
    if (tu_valgrind()) tu_skip_env("a 135M-parameter model under valgrind");
    attn_gpt_model *m = NULL;
    if (attn_gpt_load_gguf(path, &m)) fail_msg("%s", attn_last_error());
    return m;
}

static void test_smollm2_q4_1_ragged(void **state) {
    (void)state;
    attn_gpt_model *m = smollm2_q4_1();
    model_ragged("smollm2 q4_1", m, 2e-4);
    attn_gpt_model_free(m);
}

/* Prompts in batched passes on the real SmolLM2 Q4_1 file with int8 activations (`attn serve
 * --quant-act q8`): four sequences' prompts (3 to 33 new tokens; two after a cached prefix) in
 * one attn_gpt_decode_batch pass, then a ragged step, then a pass mixing a 3-token feed with
 * steps, each give every sequence's logits bit for bit what attn_gpt_decode_seq of it alone gives
 * (every product quantizes its rows in chunks of 8 whatever the pass: what lets the server answer
 * as `attn generate --quant-act q8` with prompts fed beside other requests' steps and prefixes
 * from its cache). With float32 activations, within 1e-4. */
/* A slots cache of n sequences, float32 or binary16 keys and values (attn_gpt_kv_params.f16). */
static attn_gpt_kv *slots_kv(const attn_gpt_model *m, int n, int max_T, bool f16) {
    attn_gpt_kv_params kp = attn_gpt_kv_default_params();
    kp.slots = true, kp.f16 = f16;
    attn_gpt_kv *kv = NULL;
    if (attn_gpt_kv_init_params(m, n, max_T, &kp, &kv)) fail_msg("%s", attn_last_error());
    return kv;
}

static void test_smollm2_q8_prompts(void **state) {
    (void)state;
    attn_gpt_model *m = smollm2_q4_1();
    enum { NS = 4, MT = 96 };
    const int V = m->cfg.vocab_size;
    static const int pre[NS] = {0, 5, 0, 17}, len[NS] = {3, 12, 33, 20};
    int32_t ids[NS][64];
    for (int i = 0; i < NS; i++)
        for (int t = 0; t < pre[i] + len[i]; t++) ids[i][t] = (int32_t)((t * 131 + i * 977 + 7) % V);
    float *a = malloc(sizeof(float) * NS * V), *r = malloc(sizeof(float) * NS * V);
    /* (mode 2: int8 activations with a binary16 cache: the same bits again, from its halves) */
    for (int mode = 2; mode >= 0; mode--) {
        const int q8 = mode >= 1;
        const bool f16 = mode == 2;
        attn_gpt_kv *kv = slots_kv(m, NS, MT, f16), *ref = slots_kv(m, NS, MT, f16);
        const attn_quant_act qa = q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
        attn_gpt_kv_set_quant_act(kv, qa);
        attn_gpt_kv_set_quant_act(ref, qa);
        for (int i = 0; i < NS; i++)
            if (pre[i]) { /* the cached prefix, the same way in both caches */
                assert_int_equal(attn_gpt_decode_seq(m, kv, i, pre[i], ids[i], NULL, false),
                                 ATTN_STATUS_OK);
                assert_int_equal(attn_gpt_decode_seq(m, ref, i, pre[i], ids[i], NULL, false),
                                 ATTN_STATUS_OK);
            }
        for (int pass = 0; pass < 3; pass++) {
            /* 0: every prompt (sequences in reverse order); 1: a step each; 2: sequence 2 gets 3
             * tokens, the others a step */
            int32_t seqs[NS], counts[NS], toks[128];
            int rows = 0;
            for (int i = 0; i < NS; i++) {
                const int sq = pass == 0 ? NS - 1 - i : i;
                seqs[i] = sq;
                counts[i] = pass == 0 ? len[sq] : pass == 2 && sq == 2 ? 3 : 1;
                for (int t = 0; t < counts[i]; t++)
                    toks[rows + t] = pass == 0 ? ids[sq][pre[sq] + t] : (int32_t)(sq * 11 + t + pass);
                rows += counts[i];
            }
            if (attn_gpt_decode_batch(m, kv, NS, seqs, counts, toks, a))
                fail_msg("%s", attn_last_error());
            for (int i = 0, at = 0; i < NS; at += counts[i], i++) {
                assert_int_equal(attn_gpt_decode_seq(m, ref, seqs[i], counts[i], toks + at,
                                                     r + (size_t)i * V, false),
                                 ATTN_STATUS_OK);
                assert_int_equal(attn_gpt_kv_seq_len(kv, seqs[i]), attn_gpt_kv_seq_len(ref, seqs[i]));
            }
            char what[96];
            snprintf(what, sizeof what, "smollm2 %s%s: batched pass %d (%d rows)",
                     q8 ? "q8" : "f32", f16 ? " f16 cache" : "", pass, rows);
            if (!q8) {
                tu_close(what, a, r, (size_t)NS * V, 1e-4, 0);
            } else if (memcmp(a, r, sizeof(float) * NS * V)) {
                printf("  %s: not decode_seq's bits FAIL\n", what);
                tu_failures++;
            } else {
                printf("  %s: decode_seq's bits\n", what);
            }
        }
        attn_gpt_kv_free(kv);
        attn_gpt_kv_free(ref);
    }
    /* a prompt's last token from the cache's prefix (the prompt cache of `attn serve`): the
     * prompt whole, or all but its last token and then that token alone, give the same bits
     * (the 17th token and past the first 64-key tile included) */
    for (int si = 0; si < 6; si++) {
        const int n = 16 + 28 * (si % 3);
        const bool f16 = si >= 3;
        attn_gpt_kv *w1 = slots_kv(m, 1, MT, f16), *w2 = slots_kv(m, 1, MT, f16);
        attn_gpt_kv_set_quant_act(w1, ATTN_QUANT_ACT_Q8);
        attn_gpt_kv_set_quant_act(w2, ATTN_QUANT_ACT_Q8);
        int32_t p[72];
        for (int t = 0; t < n; t++) p[t] = (int32_t)((t * 211 + 3) % V);
        assert_int_equal(attn_gpt_decode_seq(m, w1, 0, n, p, a, false), ATTN_STATUS_OK);
        assert_int_equal(attn_gpt_decode_seq(m, w2, 0, n - 1, p, NULL, false), ATTN_STATUS_OK);
        const int32_t s0 = 0, c1 = 1;
        assert_int_equal(attn_gpt_decode_batch(m, w2, 1, &s0, &c1, p + n - 1, r), ATTN_STATUS_OK);
        if (memcmp(a, r, sizeof(float) * V)) {
            printf("  smollm2 q8%s: a %d-token prompt whole and as %d + 1 differ FAIL\n",
                   f16 ? " f16 cache" : "", n, n - 1);
            tu_failures++;
        } else {
            printf("  smollm2 q8%s: a %d-token prompt whole and as %d + 1: the same bits\n",
                   f16 ? " f16 cache" : "", n, n - 1);
        }
        attn_gpt_kv_free(w1);
        attn_gpt_kv_free(w2);
    }
    /* the binary16 cache rounds: its logits differ from the float32 cache's, by about that */
    {
        attn_gpt_kv *w1 = slots_kv(m, 1, MT, false), *w2 = slots_kv(m, 1, MT, true);
        int32_t p[40];
        for (int t = 0; t < 40; t++) p[t] = (int32_t)((t * 97 + 5) % V);
        assert_int_equal(attn_gpt_decode_seq(m, w1, 0, 40, p, a, false), ATTN_STATUS_OK);
        assert_int_equal(attn_gpt_decode_seq(m, w2, 0, 40, p, r, false), ATTN_STATUS_OK);
        double dmax = 0, amax = 0;
        for (int i = 0; i < V; i++) {
            dmax = fmax(dmax, fabs((double)a[i] - r[i]));
            amax = fmax(amax, fabs((double)a[i]));
        }
        printf("  smollm2 f32 activations: f16 cache against f32 cache, max |diff| %.3g of max "
               "|logit| %.3g\n", dmax, amax);
        assert_true(dmax > 0);          /* it rounds */
        assert_true(dmax < 0.02 * amax); /* by binary16's rounding, not more */
        assert_true(attn_gpt_kv_f16(w2) && !attn_gpt_kv_f16(w1));
        attn_gpt_kv_free(w1);
        attn_gpt_kv_free(w2);
    }
    free(a), free(r);
    attn_gpt_model_free(m);
}

/* The GGUF loader fuses each Llama layer's q, k and v packs into one matrix (attn_gpt_model
 * qkv_qp), which decoding multiplies once: on the real SmolLM2 Q4_1 file every layer is fused
 * (576 + 192 + 192 rows), q, k and v are views into it, and the fused product gives each of the
 * three's columns bit for bit (1 to 16 rows, both activation modes, the decoding-step product
 * too). */
static void test_smollm2_fused_qkv(void **state) {
    (void)state;
    attn_gpt_model *m = smollm2_q4_1();
    const int C = m->cfg.n_embd, L = m->cfg.n_layer;
    assert_non_null(m->qkv_qp);
    for (int l = 0; l < L; l++) {
        const attn_quant_packed *F = &m->qkv_qp[l];
        const attn_nn_attn *A = &m->w.h[l].attn;
        assert_non_null(F->data);
        assert_int_equal(F->N, A->q.out + A->k.out + A->v.out);
        assert_int_equal(F->K, C);
        assert_ptr_equal(A->q.qpacked->data, F->data);
        assert_ptr_equal(A->k.qpacked->data,
                         (const uint8_t *)F->data + A->q.qpacked->bytes);
        assert_ptr_equal(A->v.qpacked->data,
                         (const uint8_t *)F->data + A->q.qpacked->bytes + A->k.qpacked->bytes);
    }
    const attn_nn_attn *A = &m->w.h[L / 2].attn;
    const attn_quant_packed *F = &m->qkv_qp[L / 2];
    const attn_quant_packed *P[3] = {A->q.qpacked, A->k.qpacked, A->v.qpacked};
    enum { MMAX = 16 };
    float *x = malloc(sizeof(float) * MMAX * C), *yf = malloc(sizeof(float) * MMAX * F->N);
    float *y = malloc(sizeof(float) * MMAX * F->N);
    tu_rng r = {11};
    for (int i = 0; i < MMAX * C; i++) x[i] = (float)tu_uniform(&r, -2, 2);
    static const int Ms[] = {1, 3, 5, 8, 16};
    for (int qa = 0; qa < 2; qa++)
        for (int batch = 0; batch < 2; batch++)
            for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++) {
                const int M = Ms[mi];
                const attn_quant_act act = qa ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
                attn_status st = batch ? attn_quant_gemm_packed_batch(M, x, C, F, 0.0f, yf, F->N,
                                                                      NULL, ATTN_ACT_NONE, act)
                                       : attn_quant_gemm_packed(M, x, C, F, 0.0f, yf, F->N, NULL,
                                                                ATTN_ACT_NONE, act);
                assert_int_equal(st, ATTN_STATUS_OK);
                int col = 0;
                for (int j = 0; j < 3; j++) {
                    st = batch ? attn_quant_gemm_packed_batch(M, x, C, P[j], 0.0f, y + col, F->N,
                                                              NULL, ATTN_ACT_NONE, act)
                               : attn_quant_gemm_packed(M, x, C, P[j], 0.0f, y + col, F->N, NULL,
                                                        ATTN_ACT_NONE, act);
                    assert_int_equal(st, ATTN_STATUS_OK);
                    col += P[j]->N;
                }
                for (int i = 0; i < M; i++)
                    if (memcmp(y + (size_t)i * F->N, yf + (size_t)i * F->N,
                               sizeof(float) * F->N))
                        fail_msg("fused q, k, v: row %d of %d differs (%s activations, %s)", i, M,
                                 qa ? "q8" : "f32", batch ? "batched step" : "product");
            }
    free(x);
    free(y);
    free(yf);
    attn_gpt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_ragged),
        cmocka_unit_test(test_quant_batch),
        cmocka_unit_test(test_gpt2_ragged),
        cmocka_unit_test(test_llama_ragged),
        cmocka_unit_test(test_qwen3_ragged),
        cmocka_unit_test(test_mistral_window_ragged),
        cmocka_unit_test(test_kv_seq_copy),
        cmocka_unit_test(test_smollm2_q4_1_ragged),
        cmocka_unit_test(test_smollm2_q8_prompts),
        cmocka_unit_test(test_smollm2_fused_qkv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

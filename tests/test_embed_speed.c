/* test_embed_speed.c — what the embedding speed work relies on:
 *   - pre-packed GEMM (attn_gemm_pack_b / attn_gemm_packed, attn_kernels.h) on every available
 *     backend: bit-identical to attn_gemm wherever attn_gemm takes its packed path (M > 8 rows on
 *     the SIMD backends, every M on ref), and within 1e-5 · max|ref| + 1e-5 of the reference
 *     loops for every M (the small-M path of attn_gemm sums in another order); transposed A,
 *     beta 0 (C holding NaN, never read) and 1, bias, activations, K = 0, N not a multiple of the
 *     panel width, 1 and 2 threads; the errors (another backend's layout, wrong K / N, unpacked);
 *   - attn_bert_pack_weights: an evaluation forward with packed weights equals the unpacked one
 *     bit for bit on a batch of more than 48 tokens (within 1e-6 · max|h| below), training-mode
 *     forwards ignore the packed copy, and a forward under another backend runs unpacked;
 *   - attn_embed_encode running one batch per thread: with 2 threads (parallel batches) the
 *     embeddings equal the 1-thread ones and each text encoded alone within 1e-6 (measured: 0),
 *     and every sentence keeps cosine >= 0.99999 to sentence-transformers (tools/ref_embed.py).
 * No timing is asserted anywhere. */
#include "tu.h"

#include "attn_bert.h"
#include "attn_embed.h"
#include "attn_io.h"
#include "attn_kernels.h"

#include <jansson.h>

/* ---- pre-packed GEMM ------------------------------------------------------------------------ */

/* One case under the current backend: op(B) given as trans_b storage, packed, then multiplied;
 * returns the number of failed checks. */
static int packed_case(tu_rng *r, int M, int N, int K, bool ta, bool tb, float beta, bool bias,
                       attn_act act) {
    const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
    const size_t na = (size_t)(ta ? K : M) * lda + 1, nb = (size_t)(tb ? N : K) * ldb + 1;
    const size_t nc = (size_t)M * ldc;
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *bv = malloc((size_t)N * 4);
    float *C0 = malloc(nc * sizeof *C0), *C1 = malloc(nc * sizeof *C1);
    float *C2 = malloc(nc * sizeof *C2);
    assert_non_null(A && B && bv && C0 && C1 && C2);
    tu_fill(r, A, na, -1, 1);
    tu_fill(r, B, nb, -1, 1);
    tu_fill(r, bv, (size_t)N, -1, 1);
    tu_fill(r, C0, nc, -1, 1);
    if (beta == 0.0f)
        for (size_t i = 0; i < nc; i++) C0[i] = NAN; /* must never be read */
    memcpy(C1, C0, nc * sizeof *C0);
    memcpy(C2, C0, nc * sizeof *C0);
    attn_gemm_packed_b P;
    assert_int_equal(attn_gemm_pack_b(tb, K, N, B, ldb, &P), ATTN_STATUS_OK);
    assert_int_equal(attn_gemm_packed(ta, M, N, K, 0.75f, A, lda, &P, beta, C0, ldc,
                                      bias ? bv : NULL, act),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_gemm(ta, tb, M, N, K, 0.75f, A, lda, B, ldb, beta, C1, ldc,
                               bias ? bv : NULL, act),
                     ATTN_STATUS_OK);
    const attn_backend be = attn_get_backend();
    assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
    assert_int_equal(attn_gemm(ta, tb, M, N, K, 0.75f, A, lda, B, ldb, beta, C2, ldc,
                               bias ? bv : NULL, act),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_set_backend(be), ATTN_STATUS_OK);
    int bad = 0;
    /* Compare the M×N entries only (the gaps of ldc were never written). */
    double err = 0, scale = 0;
    bool same = true;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const size_t k = (size_t)i * ldc + j;
            if (memcmp(&C0[k], &C1[k], sizeof(float)) != 0) same = false;
            err = fmax(err, fabs((double)C0[k] - C2[k]));
            scale = fmax(scale, fabs((double)C2[k]));
            if (!isfinite(C0[k])) bad++;
        }
    /* tolerance: 1e-5 relative to the largest entry plus 1e-5 (sums of up to 1536 products of
     * [-1, 1] values in float, different orders) */
    if (err > 1e-5 * scale + 1e-5) bad++;
    if ((M > 8 || be == ATTN_BACKEND_REF) && !same) bad++;
    for (size_t i = 0; i < nc; i++) /* padding columns of C untouched */
        if ((int)(i % (size_t)ldc) >= N && memcmp(&C0[i], &C1[i], sizeof(float)) != 0) bad++;
    if (bad)
        printf("  FAIL %s M=%d N=%d K=%d ta=%d tb=%d beta=%g bias=%d act=%d: max err %.3e (max "
               "%.3e), %s attn_gemm\n",
               attn_backend_name(be), M, N, K, ta, tb, beta, bias, (int)act, err, scale,
               same ? "equal to" : "differs from");
    attn_gemm_packed_b_free(&P);
    attn_gemm_packed_b_free(&P); /* twice is fine */
    free(A), free(B), free(bv), free(C0), free(C1), free(C2);
    return bad;
}

/* Every case on backend all[bi] (one cmocka test per backend: one missing is skipped alone). */
static void packed_gemm_on(int bi) {
    const attn_backend all[] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX2, ATTN_BACKEND_AVX512};
    tu_need_backend(all[bi]);
    const attn_backend keep = attn_get_backend();
    static const int Ms[] = {1, 3, 8, 9, 14, 27, 45, 230};
    static const int NKs[][2] = {{1, 1}, {33, 17}, {32, 384}, {100, 600}, {384, 1536}, {70, 0}};
    int bad = 0, cases = 0;
    {
        assert_int_equal(attn_set_backend(all[bi]), ATTN_STATUS_OK);
        tu_rng r = {0x1234 + (uint64_t)bi};
        for (int th = 1; th <= 2; th++) {
            attn_set_num_threads(th);
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
                for (size_t ni = 0; ni < sizeof NKs / sizeof NKs[0]; ni++) {
                    const int M = Ms[mi], N = NKs[ni][0], K = NKs[ni][1];
                    /* the reference loops are slow: the biggest shapes on SIMD backends only */
                    if (all[bi] == ATTN_BACKEND_REF && (size_t)M * N * K > 4000000) continue;
                    /* under valgrind (tu_valgrind) the small and middle shapes only */
                    if (tu_valgrind() && (size_t)M * N * K > 2000000) continue;
                    /* 2 threads: the shapes that split (a busy machine makes every barrier slow) */
                    if (th == 2 && (size_t)M * N * K < 64 * 64 * 64) continue;
                    const int v = (int)(mi + ni + (size_t)th);
                    bad += packed_case(&r, M, N, K, v % 2, (v / 2) % 2, v % 3 ? 0.0f : 1.0f,
                                       v % 4 != 1, (attn_act)(v % 4));
                    cases++;
                }
        }
    }
    assert_int_equal(attn_set_backend(keep), ATTN_STATUS_OK);
    attn_set_num_threads(1);
    printf("  packed GEMM: %d cases on backend %s, %d failed\n", cases, attn_backend_name(all[bi]),
           bad);
    assert_int_equal(bad, 0);
}

static void test_packed_gemm_ref(void **state) {
    (void)state;
    packed_gemm_on(0);
}

static void test_packed_gemm_avx2(void **state) {
    (void)state;
    packed_gemm_on(1);
}

static void test_packed_gemm_avx512(void **state) {
    (void)state;
    packed_gemm_on(2);
}

static void test_packed_gemm_errors(void **state) {
    (void)state;
    float B[6 * 4] = {0}, A[4 * 4] = {0}, C[4 * 6];
    attn_gemm_packed_b P;
    assert_int_equal(attn_gemm_pack_b(false, 4, 6, B, 6, &P), ATTN_STATUS_OK);
    tu_expect_fail(attn_gemm_packed(false, 4, 5, 4, 1, A, 4, &P, 0, C, 6, NULL, ATTN_ACT_NONE),
                   ATTN_STATUS_INVALID_ARGUMENT, "packed as (K=4, N=6)", "N=5");
    tu_expect_fail(attn_gemm_packed(false, 4, 6, 4, 1, A, 4, NULL, 0, C, 6, NULL, ATTN_ACT_NONE),
                   ATTN_STATUS_INVALID_ARGUMENT, "not packed", NULL);
    attn_gemm_packed_b_free(&P);
    tu_expect_fail(attn_gemm_pack_b(false, 4, 6, B, 5, &P), ATTN_STATUS_INVALID_ARGUMENT, "ldb=5",
                   NULL);
    assert_null(P.data); /* a failed pack leaves a zeroed struct */
    attn_gemm_packed_b_free(&P);
    /* Another backend's layout is refused rather than misread. */
    const attn_backend keep = attn_get_backend();
    if (keep != ATTN_BACKEND_REF) {
        assert_int_equal(attn_gemm_pack_b(false, 4, 6, B, 6, &P), ATTN_STATUS_OK);
        assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
        tu_expect_fail(attn_gemm_packed(false, 4, 6, 4, 1, A, 4, &P, 0, C, 6, NULL, ATTN_ACT_NONE),
                       ATTN_STATUS_INVALID_ARGUMENT, "packed for backend", "ref");
        assert_int_equal(attn_set_backend(keep), ATTN_STATUS_OK);
        attn_gemm_packed_b_free(&P);
    }
}

/* ---- BERT with packed weights ------------------------------------------------------------- */

static void test_bert_packed(void **state) {
    (void)state;
    attn_bert_config cfg = attn_bert_default_config();
    cfg.vocab_size = 97, cfg.hidden_size = 64, cfg.num_hidden_layers = 2;
    cfg.num_attention_heads = 4, cfg.intermediate_size = 160, cfg.max_position_embeddings = 64;
    cfg.hidden_dropout_prob = 0.0f;
    attn_bert_model *m;
    assert_int_equal(attn_bert_model_init(&cfg, 7, false, false, &m), ATTN_STATUS_OK);
    const int B = 3, T = 20, C = cfg.hidden_size;
    int32_t ids[3 * 20], lens[3] = {20, 20, 13};
    for (int i = 0; i < B * T; i++) ids[i] = (i * 37 + 11) % cfg.vocab_size;
    attn_bert_state *st;
    assert_int_equal(attn_bert_state_init(m, B, T, &st), ATTN_STATUS_OK);
    const size_t n = (size_t)B * T * C;
    float *h0 = malloc(n * 4), *h1 = malloc(n * 4), *h2 = malloc(n * 4), *h3 = malloc(n * 4);
    assert_non_null(h0 && h1 && h2 && h3);
    for (int th = 1; th <= 2; th++) {
        attn_set_num_threads(th);
        attn_bert_unpack_weights(m);
        assert_int_equal(attn_bert_forward(m, st, B, T, ids, NULL, lens, h0), ATTN_STATUS_OK);
        assert_int_equal(attn_bert_pack_weights(m), ATTN_STATUS_OK);
        assert_non_null(m->packed);
        assert_int_equal(attn_bert_forward(m, st, B, T, ids, NULL, lens, h1), ATTN_STATUS_OK);
        /* 53 tokens: bert's unpacked dense layers take attn_gemm's packed path too (above 48
         * rows), so the results are the same bits */
        assert_memory_equal(h0, h1, n * sizeof(float));
        /* the 13-token sequence alone: the unpacked forward takes the few-rows path (another
         * summation order); tolerance 1e-6 · max|h| + 1e-6 */
        attn_bert_unpack_weights(m);
        assert_null(m->packed);
        assert_int_equal(attn_bert_forward(m, st, 1, 13, ids + 2 * T, NULL, NULL, h2), ATTN_STATUS_OK);
        assert_int_equal(attn_bert_pack_weights(m), ATTN_STATUS_OK);
        assert_int_equal(attn_bert_forward(m, st, 1, 13, ids + 2 * T, NULL, NULL, h3), ATTN_STATUS_OK);
        tu_close("13 tokens alone, packed vs unpacked", h3, h2, (size_t)13 * C, 1e-6, 1e-6);
        /* ... and equal to its rows in the batch (packed: row-independent sums) */
        tu_close("13 tokens alone vs in the batch (packed)", h3, h1 + (size_t)2 * T * C,
                 (size_t)13 * C, 0, 0);
    }
    /* Training-mode forwards use the live weights, not the packed copy. */
    m->w.layers[0].ffn.up.w[5] += 0.5f;
    attn_bert_set_train(st, true, 1, 0);
    assert_int_equal(attn_bert_forward(m, st, B, T, ids, NULL, lens, h2), ATTN_STATUS_OK);
    attn_bert_set_train(st, false, 0, 0);
    assert_int_equal(attn_bert_pack_weights(m), ATTN_STATUS_OK); /* again: the new weights */
    assert_int_equal(attn_bert_forward(m, st, B, T, ids, NULL, lens, h3), ATTN_STATUS_OK);
    tu_close("training forward = repacked eval forward", h2, h3, n, 1e-6, 1e-6);
    int diff = memcmp(h2, h1, n * sizeof(float)) != 0;
    assert_true(diff); /* the weight change is visible */
    /* Under another backend the packed copy is not used (no error, the unpacked result). */
    const attn_backend keep = attn_get_backend();
    if (keep != ATTN_BACKEND_REF) {
        assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
        attn_bert_unpack_weights(m);
        assert_int_equal(attn_bert_forward(m, st, B, T, ids, NULL, lens, h0), ATTN_STATUS_OK);
        assert_int_equal(attn_set_backend(keep), ATTN_STATUS_OK);
        assert_int_equal(attn_bert_pack_weights(m), ATTN_STATUS_OK);
        assert_int_equal(attn_set_backend(ATTN_BACKEND_REF), ATTN_STATUS_OK);
        assert_int_equal(attn_bert_forward(m, st, B, T, ids, NULL, lens, h1), ATTN_STATUS_OK);
        assert_int_equal(attn_set_backend(keep), ATTN_STATUS_OK);
        assert_memory_equal(h0, h1, n * sizeof(float));
    }
    attn_set_num_threads(1);
    free(h0), free(h1), free(h2), free(h3);
    attn_bert_state_free(st);
    attn_bert_model_free(m); /* frees the packed copy too (the sanitizer build checks) */
}

/* ---- attn_embed_encode, one batch per thread --------------------------------------------- */

static json_t *load_json(const char *name) {
    json_error_t err;
    json_t *j = json_load_file(tu_ref_path(name), 0, &err);
    if (!j) printf("cannot read %s: %s (run tools/ref_embed.py)\n", tu_ref_path(name), err.text);
    return j;
}

static void test_embed_threads(void **state) {
    (void)state;
    json_t *s = load_json("embed_sentences.json");
    assert_non_null(s);
    json_t *sent = json_object_get(s, "sentences");
    const char *model = json_string_value(json_object_get(s, "model_dir"));
    assert_non_null(model);
    float *ref;
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    assert_int_equal(attn_npy_load_f32(tu_ref_path("embed_ref.npy"), &ref, &ndim, shape),
                     ATTN_STATUS_OK);
    int N = (int)json_array_size(sent);
    const int D = (int)shape[1];
    assert_int_equal((int)shape[0], N);
    if (tu_valgrind() && N > 4) N = 4;
    const char **texts = malloc((size_t)N * sizeof *texts);
    for (int i = 0; i < N; i++) texts[i] = json_string_value(json_array_get(sent, (size_t)i));
    attn_embed_options o = attn_embed_default_options();
    o.batch_size = 8; /* several batches per thread */
    attn_embed *e;
    assert_int_equal(attn_embed_load(model, &o, &e), ATTN_STATUS_OK);
    assert_int_equal(attn_embed_get_info(e)->dim, D);
    const size_t n = (size_t)N * D;
    float *e1 = malloc(n * 4), *e2 = malloc(n * 4), *ea = malloc(n * 4);
    assert_non_null(e1 && e2 && ea);
    attn_set_num_threads(1);
    assert_int_equal(attn_embed_encode(e, (size_t)N, texts, NULL, e1), ATTN_STATUS_OK);
    attn_set_num_threads(2);
    assert_int_equal(attn_embed_encode(e, (size_t)N, texts, NULL, e2), ATTN_STATUS_OK);
    /* alone: B = 1, the kernels' own threads (the first 24 texts: many short parallel regions,
     * slow on a busy machine) */
    const int Na = N < 24 ? N : 24;
    for (int i = 0; i < Na; i++)
        assert_int_equal(attn_embed_encode(e, 1, texts + i, NULL, ea + (size_t)i * D),
                         ATTN_STATUS_OK);
    /* 3 texts with 2 threads: batches of 2 and 1 */
    float e3[3 * 1024];
    assert_true(D <= 1024);
    assert_int_equal(attn_embed_encode(e, 3, texts, NULL, e3), ATTN_STATUS_OK);
    /* Errors found while tokenizing still name the text, with threads. */
    const char *badv[3] = {texts[0], "ok", "bad \xff byte"};
    tu_expect_fail(attn_embed_encode(e, 3, badv, NULL, e3), ATTN_STATUS_INVALID_ARGUMENT,
                   "text 2", "UTF-8");
    attn_set_num_threads(1);
    /* tolerance 1e-6 absolute on unit vectors (expected 0: every sentence's rows are computed
     * alone, in the same order, whatever the batch and the thread) */
    tu_close("2 threads (parallel batches) vs 1 thread", e2, e1, n, 0, 1e-6);
    tu_close("each text alone vs in batches", ea, e1, (size_t)Na * D, 0, 1e-6);
    tu_close("3 texts with 2 threads vs 1 thread", e3, e1, (size_t)3 * D, 0, 1e-6);
    double mn = 1;
    for (int i = 0; i < N; i++)
        mn = fmin(mn, attn_embed_cosine(D, e2 + (size_t)i * D, ref + (size_t)i * D));
    printf("  %d sentences, 2 threads: min cosine to sentence-transformers 1 - %.3g\n", N, 1 - mn);
    assert_true(mn >= 0.99999); /* the bar, every sentence */
    free(e1), free(e2), free(ea), free(texts);
    attn_free(ref);
    attn_embed_free(e);
    json_decref(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_gemm_ref),
        cmocka_unit_test(test_packed_gemm_avx2),
        cmocka_unit_test(test_packed_gemm_avx512),
        cmocka_unit_test(test_packed_gemm_errors),
        cmocka_unit_test(test_bert_packed),
        cmocka_unit_test(test_embed_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

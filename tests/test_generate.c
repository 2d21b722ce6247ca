/* test_generate.c — text generation (attn_gen.h) and `attn generate` against transformers
 * (tools/ref_generate.py writes $ATTN_REF_DIR/generate/):
 *   - temperature / top-k / top-p: the kept set and the renormalized probabilities equal
 *     transformers' TemperatureLogitsWarper → TopKLogitsWarper → TopPLogitsWarper + softmax
 *     (kept set exactly, probabilities to 1e-6), including ties and -inf logits;
 *   - the draws follow those probabilities, are a pure function of (seed, index), and greedy is
 *     the argmax;
 *   - greedy generation with the KV cache gives exactly the tokens of transformers'
 *     generate(do_sample=False) on a random-weight Hugging Face GPT-2 directory (tokenizer.json,
 *     or vocab.json + merges.txt), also from an empty prompt (bos) and up to a full context
 *     (where attn stops: n_positions reached);
 *   - the CLI prints the same text as transformers decodes; the same seed gives the same text, a
 *     different seed a different one; streamed output equals --no-stream;
 *   - streaming detokenization never emits half a UTF-8 character, and its pieces add up to the
 *     decoded text;
 *   - errors are one line. */
#include "tu.h"

#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_io.h"
#include "attn_tok.h"

#include <jansson.h>
#include <stdbool.h>
#include <sys/wait.h>

static char g_ref[4096], g_work[4300];
static char buf[1 << 20];
static json_t *g_j;

static const char *ref(const char *name) {
    static tu_path_ring r;
    return tu_path(&r, g_ref, name);
}

static int setup(void **state) {
    (void)state;
    const char *d = getenv("ATTN_REF_DIR");
    snprintf(g_ref, sizeof g_ref, "%s/generate", d && *d ? d : "build/ref");
    json_error_t err;
    g_j = json_load_file(ref("generate.json"), 0, &err);
    if (!g_j) {
        fprintf(stderr, "%s: %s (run tools/ref_generate.py first)\n", ref("generate.json"), err.text);
        return -1;
    }
    if (tu_mkdtemp(g_work, sizeof g_work, "generate")) return -1;
    attn_set_num_threads(2);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    json_decref(g_j);
    tu_rm_tree(g_work);
    return 0;
}

/* Run attn with args (stdout only, or stdout+stderr); return the exit status. */
static int attn_run(const char *args, bool with_stderr) {
    char cmd[20000];
    snprintf(cmd, sizeof cmd, "'%s' --threads 2 %s", tu_attn_bin(), args);
    return tu_sh_capture(cmd, with_stderr, buf, sizeof buf);
}

/* A single-quoted shell word (2 rotating buffers). */
static const char *shq(const char *s) {
    static char out[2][8192];
    static int k;
    return tu_shq(s, out[k++ & 1], sizeof out[0]);
}

/* Valid UTF-8 (no overlongs, surrogates or values above U+10FFFF): the library's rule, which
 * test_utf8_check holds against utf8proc. */
static bool utf8_valid(const char *s, size_t n) { return attn_tok_utf8_check(s, n, true) == n; }

/* ---- warpers vs transformers ------------------------------------------------------------------ */

static void test_warpers(void **state) {
    (void)state;
    attn_st_file *f;
    assert_int_equal(attn_st_open(ref("warpers.safetensors"), &f), ATTN_STATUS_OK);
    float *logits, *probs;
    int32_t *kept;
    const attn_st_tensor *t;
    assert_int_equal(attn_st_load_f32(f, "logits", &logits, &t), ATTN_STATUS_OK);
    assert_int_equal(attn_st_load_f32(f, "probs", &probs, NULL), ATTN_STATUS_OK);
    assert_int_equal(attn_st_load_i32(f, "kept", &kept, NULL), ATTN_STATUS_OK);
    const int N = (int)t->shape[0], V = (int)t->shape[1];
    json_t *cases = json_object_get(g_j, "warpers");
    assert_int_equal((int)json_array_size(cases), N);
    float *got = malloc((size_t)V * sizeof *got), *x = malloc((size_t)V * sizeof *x);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        json_t *c = json_array_get(cases, (size_t)i);
        attn_gen_params p = attn_gen_default_params();
        p.temperature = (float)json_number_value(json_object_get(c, "temperature"));
        p.top_k = (int)json_integer_value(json_object_get(c, "top_k"));
        p.top_p = (float)json_number_value(json_object_get(c, "top_p"));
        json_t *mp = json_object_get(c, "min_p"), *rp = json_object_get(c, "repetition_penalty");
        if (mp) p.min_p = (float)json_number_value(mp);
        if (rp) p.repetition_penalty = (float)json_number_value(rp);
        attn_gen_sampler *s;
        assert_int_equal(attn_gen_sampler_init(&p, V, &s), ATTN_STATUS_OK);
        json_t *seen = json_object_get(c, "seen");
        for (size_t k = 0; k < json_array_size(seen); k++) {
            int32_t id = (int32_t)json_integer_value(json_array_get(seen, k));
            assert_int_equal(attn_gen_sampler_observe(s, &id, 1), ATTN_STATUS_OK);
        }
        const float *row = logits + (size_t)i * V;
        assert_int_equal(attn_gen_sampler_probs(s, row, got), ATTN_STATUS_OK);
        attn_gen_sampler_free(s);
        int nk = 0, nk_ref = 0, mismatch = -1;
        for (int v = 0; v < V; v++) {
            bool k_got = got[v] > 0, k_ref = kept[(size_t)i * V + v] != 0;
            nk += k_got, nk_ref += k_ref;
            if (k_got != k_ref && mismatch < 0) mismatch = v;
        }
        char what[128];
        snprintf(what, sizeof what, "case %2d T=%.2f k=%4d p=%.3f min-p %.2f rep %.1f kept %4d/%d",
                 i, (double)p.temperature, p.top_k, (double)p.top_p, (double)p.min_p,
                 (double)p.repetition_penalty, nk, nk_ref);
        /* probabilities: 1e-6 absolute (float32 softmax of the same warped logits) */
        tu_close(what, got, probs + (size_t)i * V, (size_t)V, 0, 1e-6);
        for (int v = 0; v < V; v++) worst = fmax(worst, fabs((double)got[v] - probs[(size_t)i * V + v]));
        if (mismatch >= 0) fail_msg("case %d: token %d kept %d by attn, %d by transformers", i,
                                    mismatch, got[mismatch] > 0, kept[(size_t)i * V + mismatch]);
        /* the single warpers on their own, in place */
        if (p.temperature == 1.0f && (p.top_k > 0) != (p.top_p < 1.0f) && p.min_p == 0.0f &&
            p.repetition_penalty == 1.0f) {
            memcpy(x, row, (size_t)V * sizeof *x);
            assert_int_equal(p.top_k > 0 ? attn_gen_top_k(x, V, p.top_k) : attn_gen_top_p(x, V, p.top_p),
                             ATTN_STATUS_OK);
            for (int v = 0; v < V; v++) {
                bool k_ref = kept[(size_t)i * V + v] != 0;
                if ((x[v] > -INFINITY) != k_ref) fail_msg("case %d: single warper differs at %d", i, v);
                if (k_ref && x[v] != row[v]) fail_msg("case %d: kept logit %d changed", i, v);
            }
        }
    }
    printf("  %d cases: kept sets identical, worst |prob - transformers| = %.2e (tolerance 1e-6)\n",
           N, worst);
    free(got), free(x);
    attn_free(logits), attn_free(probs), attn_free(kept);
    attn_st_close(f);
}

/* ---- draws -------------------------------------------------------------------------------------- */

static void test_draws(void **state) {
    (void)state;
    enum { V = 40, N = 40000 };
    float logits[V];
    tu_rng r = {12345};
    tu_fill(&r, logits, V, -2, 2);
    attn_gen_params p = attn_gen_default_params();
    p.top_k = 10, p.temperature = 0.8f, p.top_p = 0.95f, p.seed = 99;
    attn_gen_sampler *s;
    assert_int_equal(attn_gen_sampler_init(&p, V, &s), ATTN_STATUS_OK);
    float probs[V];
    assert_int_equal(attn_gen_sampler_probs(s, logits, probs), ATTN_STATUS_OK);
    int count[V] = {0};
    for (int i = 0; i < N; i++) {
        int32_t tok;
        assert_int_equal(attn_gen_sampler_next(s, logits, (uint64_t)i, &tok), ATTN_STATUS_OK);
        assert_true(tok >= 0 && tok < V);
        count[tok]++;
    }
    /* frequencies within 5 standard deviations of the probabilities; removed tokens never */
    double worst = 0;
    for (int v = 0; v < V; v++) {
        double f = (double)count[v] / N, pr = probs[v];
        double sd = sqrt(pr * (1 - pr) / N);
        if (pr == 0) assert_int_equal(count[v], 0);
        else worst = fmax(worst, fabs(f - pr) / sd);
    }
    printf("  %d draws: worst |freq - prob| = %.2f standard deviations (limit 5)\n", N, worst);
    assert_true(worst < 5);
    /* a pure function of (seed, index): again the same; another seed differs somewhere */
    int same = 0;
    attn_gen_params p2 = p;
    p2.seed = 100;
    attn_gen_sampler *s2;
    assert_int_equal(attn_gen_sampler_init(&p2, V, &s2), ATTN_STATUS_OK);
    for (int i = 0; i < 200; i++) {
        int32_t a, b, c;
        assert_int_equal(attn_gen_sampler_next(s, logits, (uint64_t)i, &a), ATTN_STATUS_OK);
        assert_int_equal(attn_gen_sampler_next(s, logits, (uint64_t)i, &b), ATTN_STATUS_OK);
        assert_int_equal(attn_gen_sampler_next(s2, logits, (uint64_t)i, &c), ATTN_STATUS_OK);
        assert_int_equal(a, b);
        same += a == c;
    }
    printf("  seeds 99 and 100 agree on %d of 200 draws\n", same);
    assert_true(same < 150);
    /* greedy and temperature 0 are the argmax (first of equal maxima, as torch.argmax) */
    logits[7] = logits[23] = 10;
    attn_gen_params g = attn_gen_default_params();
    g.greedy = true;
    attn_gen_sampler *sg;
    assert_int_equal(attn_gen_sampler_init(&g, V, &sg), ATTN_STATUS_OK);
    int32_t tok;
    assert_int_equal(attn_gen_sampler_next(sg, logits, 5, &tok), ATTN_STATUS_OK);
    assert_int_equal(tok, 7);
    attn_gen_sampler_free(sg);
    g.greedy = false, g.temperature = 0;
    assert_int_equal(attn_gen_sampler_init(&g, V, &sg), ATTN_STATUS_OK);
    assert_int_equal(attn_gen_sampler_next(sg, logits, 5, &tok), ATTN_STATUS_OK);
    assert_int_equal(tok, 7);
    attn_gen_sampler_free(sg);
    attn_gen_sampler_free(s);
    attn_gen_sampler_free(s2);
}

/* ---- greedy generation vs transformers ---------------------------------------------------------- */

static void check_greedy(const char *dir) {
    attn_gpt_model *m;
    attn_status st = attn_gpt_load_dir(dir, &m);
    if (st) fail_msg("%s: %s", dir, attn_last_error());
    json_t *cases = json_object_get(g_j, "greedy");
    attn_gen_params p = attn_gen_default_params();
    p.greedy = true;
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *jc = json_array_get(cases, c), *jids = json_object_get(jc, "ids"),
               *jnew = json_object_get(jc, "new");
        int n = (int)json_array_size(jids), n_new = (int)json_array_size(jnew);
        bool fills = json_is_true(json_object_get(jc, "fills_context"));
        int32_t ids[256], out[256];
        for (int i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
        int max_new = fills ? 30 : (int)json_integer_value(json_object_get(jc, "max_new"));
        attn_gen_stats stats;
        st = attn_gen_gpt(m, &p, ids, n, max_new, m->cfg.eos_token_id, out, NULL, NULL, &stats);
        if (st) fail_msg("%s", attn_last_error());
        printf("  %s case %zu: prompt %d tokens, %d generated (transformers %d), stop: %s\n", dir + strlen(g_ref) + 1, c,
               n, stats.n_generated, n_new, attn_gen_stop_name(stats.stop));
        if (fills) assert_int_equal(stats.stop, ATTN_GEN_STOP_CONTEXT);
        assert_int_equal(stats.n_generated, n_new);
        for (int i = 0; i < n_new; i++)
            if (out[i] != json_integer_value(json_array_get(jnew, (size_t)i)))
                fail_msg("case %zu token %d: attn %d, transformers %d", c, i, out[i],
                         (int)json_integer_value(json_array_get(jnew, (size_t)i)));
        assert_int_equal(stats.n_prompt, n);
        assert_true(stats.n_decode_steps == n_new - 1 || stats.stop == ATTN_GEN_STOP_EOS);
    }
    attn_gpt_model_free(m);
}

static void test_greedy_matches_transformers(void **state) {
    (void)state;
    check_greedy(ref("hf"));
    check_greedy(ref("hf_vm"));
}

static void test_cli_greedy_text(void **state) {
    (void)state;
    json_t *cases = json_object_get(g_j, "greedy");
    const char *dirs[2] = {"hf", "hf_vm"};
    for (int d = 0; d < 2; d++)
        for (size_t c = 0; c < json_array_size(cases); c++) {
            json_t *jc = json_array_get(cases, c);
            const char *prompt = json_string_value(json_object_get(jc, "prompt"));
            const char *text = json_string_value(json_object_get(jc, "text"));
            int max_new = (int)json_integer_value(json_object_get(jc, "max_new"));
            /* the full-context case asks for more: generation stops at n_positions */
            if (json_is_true(json_object_get(jc, "fills_context"))) max_new += 5;
            char args[12000];
            snprintf(args, sizeof args, "generate --model '%s' --prompt %s --greedy --max-tokens %d "
                     "--no-echo --quiet", ref(dirs[d]), shq(prompt), max_new);
            int rc = attn_run(args, false);
            if (rc) fail_msg("exit %d: %s", rc, args);
            if (strcmp(buf, text) != 0) fail_msg("%s case %zu:\n  attn         \"%s\"\n  transformers \"%s\"",
                                                 dirs[d], c, buf, text);
            /* with the prompt echoed */
            snprintf(args, sizeof args, "generate --model '%s' --prompt %s --greedy --max-tokens %d "
                     "--quiet", ref(dirs[d]), shq(prompt), max_new);
            assert_int_equal(attn_run(args, false), 0);
            assert_true(strncmp(buf, prompt, strlen(prompt)) == 0 && !strcmp(buf + strlen(prompt), text));
        }
    printf("  %zu greedy texts identical to transformers' decode (tokenizer.json and "
           "vocab.json + merges.txt)\n", json_array_size(cases));
}

static void test_cli_seed_and_stream(void **state) {
    (void)state;
    static char a[1 << 20], b[1 << 20], c[1 << 20], d[1 << 20];
    const char *common = "--prompt 'ROMEO: Hello' --max-tokens 34 --top-k 30 --temperature 1.5 "
                         "--no-echo --quiet";
    char args[9000];
    snprintf(args, sizeof args, "generate --model '%s' %s --seed 7", ref("hf"), common);
    assert_int_equal(attn_run(args, false), 0);
    snprintf(a, sizeof a, "%s", buf);
    assert_int_equal(attn_run(args, false), 0);
    snprintf(b, sizeof b, "%s", buf);
    snprintf(args, sizeof args, "generate --model '%s' %s --seed 7 --no-stream", ref("hf"), common);
    assert_int_equal(attn_run(args, false), 0);
    snprintf(c, sizeof c, "%s", buf);
    snprintf(args, sizeof args, "generate --model '%s' %s --seed 8", ref("hf"), common);
    assert_int_equal(attn_run(args, false), 0);
    snprintf(d, sizeof d, "%s", buf);
    printf("  seed 7: \"%s\"\n  seed 8: \"%s\"\n", a, d);
    assert_string_equal(a, b); /* same seed, same text */
    assert_string_equal(a, c); /* streamed == not streamed */
    assert_true(strcmp(a, d) != 0);
    /* --temperature 0 is greedy */
    snprintf(args, sizeof args, "generate --model '%s' --prompt 'ROMEO: Hello' --max-tokens 10 "
             "--temperature 0 --no-echo --quiet", ref("hf"));
    assert_int_equal(attn_run(args, false), 0);
    snprintf(a, sizeof a, "%s", buf);
    snprintf(args, sizeof args, "generate --model '%s' --prompt 'ROMEO: Hello' --max-tokens 10 "
             "--greedy --no-echo --quiet", ref("hf"));
    assert_int_equal(attn_run(args, false), 0);
    assert_string_equal(a, buf);
    /* the statistics line and the context note go to stderr */
    snprintf(args, sizeof args, "generate --model '%s' --prompt 'ROMEO: Hello' --max-tokens 100 "
             "--ignore-eos --seed 1 --no-echo", ref("hf"));
    assert_int_equal(attn_run(args, true), 0);
    assert_non_null(strstr(buf, "stopped at the model's context length (n_positions = 48)"));
    assert_non_null(strstr(buf, "tokens/s); generation: "));
}

/* ---- streaming UTF-8 ----------------------------------------------------------------------------- */

static void test_stream_utf8(void **state) {
    (void)state;
    attn_tok *tok;
    assert_int_equal(attn_tok_load(ref("hf"), &tok), ATTN_STATUS_OK);
    json_t *cases = json_object_get(g_j, "utf8");
    int held = 0;
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *jc = json_array_get(cases, c), *jids = json_object_get(jc, "ids");
        const char *text = json_string_value(json_object_get(jc, "text"));
        attn_gen_stream *s;
        assert_int_equal(attn_gen_stream_init(tok, NULL, 0, &s), ATTN_STATUS_OK);
        char acc[4096] = "";
        size_t n_acc = 0;
        printf("  \"%s\" ->", text);
        for (size_t i = 0; i < json_array_size(jids); i++) {
            const char *piece;
            size_t n;
            assert_int_equal(attn_gen_stream_push(s, (int32_t)json_integer_value(json_array_get(jids, i)),
                                                  &piece, &n),
                             ATTN_STATUS_OK);
            assert_int_equal(strlen(piece), n);
            if (!utf8_valid(piece, n)) fail_msg("piece %zu of \"%s\" is not valid UTF-8", i, text);
            if (strstr(piece, "\xEF\xBF\xBD")) fail_msg("piece %zu of \"%s\" has U+FFFD", i, text);
            held += n == 0;
            printf(" [%s]", piece);
            memcpy(acc + n_acc, piece, n);
            n_acc += n;
        }
        const char *rest;
        size_t nr;
        assert_int_equal(attn_gen_stream_finish(s, &rest, &nr), ATTN_STATUS_OK);
        memcpy(acc + n_acc, rest, nr);
        acc[n_acc + nr] = '\0';
        printf(" + [%s]\n", rest);
        assert_string_equal(acc, text);
        size_t nt;
        assert_string_equal(attn_gen_stream_text(s, &nt), text);
        assert_int_equal(nt, strlen(text));
        attn_gen_stream_free(s);
    }
    assert_true(held > 0); /* incomplete characters were held back */

    /* invalid sequences: a lone first byte of 中 (token 160 in case 4) before "b", and at the end */
    json_t *ids4 = json_object_get(json_array_get(cases, 3), "ids"); /* a😀b中c */
    int32_t lead = (int32_t)json_integer_value(json_array_get(ids4, 6));
    int32_t b = (int32_t)json_integer_value(json_array_get(ids4, 5));
    int32_t seq[3] = {lead, b, lead};
    char *want;
    size_t nwant;
    assert_int_equal(attn_tok_decode_alloc(tok, seq, 3, 0, &want, &nwant), ATTN_STATUS_OK);
    attn_gen_stream *s;
    assert_int_equal(attn_gen_stream_init(tok, NULL, 0, &s), ATTN_STATUS_OK);
    const char *piece;
    size_t n;
    assert_int_equal(attn_gen_stream_push(s, seq[0], &piece, &n), ATTN_STATUS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(attn_gen_stream_push(s, seq[1], &piece, &n), ATTN_STATUS_OK);
    assert_string_equal(piece, "\xEF\xBF\xBD" "b");
    assert_int_equal(attn_gen_stream_push(s, seq[2], &piece, &n), ATTN_STATUS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(attn_gen_stream_finish(s, &piece, &n), ATTN_STATUS_OK);
    assert_string_equal(piece, "\xEF\xBF\xBD");
    assert_string_equal(attn_gen_stream_text(s, NULL), want);
    /* after finish: no more pushes; an id outside the vocabulary is refused */
    tu_expect_fail(attn_gen_stream_push(s, b, &piece, &n), ATTN_STATUS_INVALID_ARGUMENT, "finished", NULL);
    attn_gen_stream_free(s);
    attn_free(want);

    /* with a context: only the text after it */
    int32_t ctx[64];
    size_t nctx;
    assert_int_equal(attn_tok_encode(tok, "Hello there", 11, ctx, 64, &nctx), ATTN_STATUS_OK);
    assert_int_equal(attn_gen_stream_init(tok, ctx, nctx, &s), ATTN_STATUS_OK);
    int32_t more[64];
    size_t nmore;
    assert_int_equal(attn_tok_encode(tok, " friend", 7, more, 64, &nmore), ATTN_STATUS_OK);
    for (size_t i = 0; i < nmore; i++) assert_int_equal(attn_gen_stream_push(s, more[i], &piece, &n), ATTN_STATUS_OK);
    assert_int_equal(attn_gen_stream_finish(s, &piece, &n), ATTN_STATUS_OK);
    assert_string_equal(attn_gen_stream_text(s, NULL), " friend");
    tu_expect_fail(attn_gen_stream_init(tok, NULL, 0, NULL), ATTN_STATUS_INVALID_ARGUMENT, "out", NULL);
    attn_gen_stream_free(s);
    assert_int_equal(attn_gen_stream_init(tok, NULL, 0, &s), ATTN_STATUS_OK);
    tu_expect_fail(attn_gen_stream_push(s, 100000, &piece, &n), ATTN_STATUS_INVALID_ARGUMENT, "100000", "vocabulary");
    attn_gen_stream_free(s);
    attn_tok_free(tok);
}

/* ---- errors --------------------------------------------------------------------------------------- */

static void expect_cli_error(const char *args, int want_rc, const char *needle) {
    int rc = attn_run(args, true);
    tu_expect_error_output(buf, rc, want_rc, needle, args);
}

/* attn_gen_argmax (a vectorized pass) against the plain scan "x[i] > x[best]": the first of equal
 * maxima, -inf and +inf, every length from 1 to 70 (the vector lanes and the tail) and a
 * vocabulary's 49,152; a NaN anywhere is refused. */
static int argmax_plain(const float *x, int V) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void test_argmax(void **state) {
    (void)state;
    enum { N = 49152 };
    static float x[N];
    uint64_t r = 12345;
    int checked = 0;
    for (int round = 0; round < 400; round++) {
        const int V = round < 350 ? 1 + round % 70 : N - (round % 7);
        const int kind = round % 5;
        for (int i = 0; i < V; i++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            const int u = (int)(r >> 33);
            /* few distinct values (many ties), -inf only, or wide values */
            x[i] = kind == 0 ? (float)(u % 4) : kind == 1 ? -INFINITY
                   : kind == 2 ? (u % 9 == 0 ? -INFINITY : (float)(u % 3) - 5.0f)
                               : (float)u / 1e6f - 1000.0f;
        }
        if (kind == 4 && V > 3) x[(round * 7) % V] = INFINITY, x[(round * 11) % V] = INFINITY;
        int32_t tok = -1;
        assert_int_equal(attn_gen_argmax(x, V, &tok), ATTN_STATUS_OK);
        assert_int_equal(tok, argmax_plain(x, V));
        checked++;
        if (V > 1) { /* a NaN anywhere, at the tail too */
            const float keep = x[V - 1 - round % V];
            x[V - 1 - round % V] = NAN;
            tu_expect_fail(attn_gen_argmax(x, V, &tok), ATTN_STATUS_INVALID_ARGUMENT, "NaN", NULL);
            x[V - 1 - round % V] = keep;
        }
    }
    printf("  argmax equals the plain scan on %d arrays\n", checked);
}

static void test_errors(void **state) {
    (void)state;
    char a[16000];
    const char *hf = ref("hf");
    expect_cli_error("generate --prompt hi", 2, "--model");
    snprintf(a, sizeof a, "generate --model '%s'", hf);
    expect_cli_error(a, 2, "--prompt");
    snprintf(a, sizeof a, "generate --model '%s' --prompt hi --top-p 1.5", hf);
    expect_cli_error(a, 2, "--top-p");
    snprintf(a, sizeof a, "generate --model '%s' --prompt hi --temperature -1", hf);
    expect_cli_error(a, 2, "--temperature");
    snprintf(a, sizeof a, "generate --model '%s' --prompt hi --max-tokens 0", hf);
    expect_cli_error(a, 2, "--max-tokens");
    snprintf(a, sizeof a, "generate --model '%s' --prompt hi --seed x", hf);
    expect_cli_error(a, 2, "--seed");
    snprintf(a, sizeof a, "generate --model '%s' --prompt hi --frobnicate", hf);
    expect_cli_error(a, 2, "--frobnicate");
    snprintf(a, sizeof a, "generate --model '%s/nope' --prompt hi", g_work);
    expect_cli_error(a, 1, "nope");
    /* a prompt longer than the context (48) */
    char longp[4000] = "";
    for (int i = 0; i < 60; i++) strcat(longp, "word ");
    snprintf(a, sizeof a, "generate --model '%s' --prompt '%s'", hf, longp);
    expect_cli_error(a, 1, "n_positions = 48");
    /* invalid UTF-8 in the prompt */
    snprintf(a, sizeof a, "generate --model '%s' --prompt \"$(printf 'ab\\377c')\"", hf);
    expect_cli_error(a, 1, "UTF-8");
    /* a model directory without a tokenizer */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/notok' && cp '%s/config.json' '%s/model.safetensors' '%s/notok/'",
             g_work, hf, hf, g_work);
    assert_int_equal(system(cmd), 0);
    snprintf(a, sizeof a, "generate --model '%s/notok' --prompt hi", g_work);
    expect_cli_error(a, 1, "notok");

    /* the library */
    attn_gen_params p = attn_gen_default_params();
    p.top_p = 2;
    tu_expect_fail(attn_gen_check_params(&p), ATTN_STATUS_INVALID_ARGUMENT, "top_p", NULL);
    p = attn_gen_default_params();
    p.top_k = -1;
    tu_expect_fail(attn_gen_check_params(&p), ATTN_STATUS_INVALID_ARGUMENT, "top_k", NULL);
    p = attn_gen_default_params();
    p.temperature = NAN;
    tu_expect_fail(attn_gen_check_params(&p), ATTN_STATUS_INVALID_ARGUMENT, "temperature", NULL);
    float lg[4] = {1, NAN, 2, 3};
    int32_t tok;
    tu_expect_fail(attn_gen_argmax(lg, 4, &tok), ATTN_STATUS_INVALID_ARGUMENT, "NaN", NULL);
    tu_expect_fail(attn_gen_top_k(lg, 0, 1), ATTN_STATUS_INVALID_ARGUMENT, "V", NULL);
    attn_gen_sampler *s;
    p = attn_gen_default_params();
    tu_expect_fail(attn_gen_sampler_init(&p, 0, &s), ATTN_STATUS_INVALID_ARGUMENT, "vocabulary", NULL);
    attn_gpt_model *m;
    assert_int_equal(attn_gpt_load_dir(hf, &m), ATTN_STATUS_OK);
    int32_t ids[60] = {0};
    tu_expect_fail(attn_gen_gpt(m, &p, ids, 0, 5, -1, NULL, NULL, NULL, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "empty", NULL);
    tu_expect_fail(attn_gen_gpt(m, &p, ids, 49, 5, -1, NULL, NULL, NULL, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "n_positions = 48", NULL);
    ids[2] = 5000;
    tu_expect_fail(attn_gen_gpt(m, &p, ids, 3, 5, -1, NULL, NULL, NULL, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "5000", NULL);
    ids[2] = 1;
    tu_expect_fail(attn_gen_gpt(m, &p, ids, 3, 0, -1, NULL, NULL, NULL, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "max_new_tokens", NULL);
    attn_gpt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warpers),
        cmocka_unit_test(test_draws),
        cmocka_unit_test(test_greedy_matches_transformers),
        cmocka_unit_test(test_cli_greedy_text),
        cmocka_unit_test(test_cli_seed_and_stream),
        cmocka_unit_test(test_stream_utf8),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

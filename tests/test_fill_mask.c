/* test_fill_mask.c — attn_embed_fill_mask and `attn fill-mask` against transformers' fill-mask
 * pipeline on random-weight BertForMaskedLM directories (tools/ref_fill_mask.py, live): the
 * MiniLM WordPiece tokenizer with vocab 30522, and a small WordPiece vocabulary with an untied
 * decoder, gelu_new and clean_up_tokenization_spaces.
 *
 * Tolerances: the same token ids in the same order, the same token strings and filled sequences
 * (exact), probabilities within 1e-5 absolute (the bar; measured ~1e-6; the reference's
 * smallest gap between consecutive candidates is printed: ties would make the ranking
 * ambiguous). */
#include "tu.h"

#include "attn_embed.h"

#include <jansson.h>
#include <sys/wait.h>

static json_t *g_cases;

static int run_cli(const char *args, const char *out, const char *err) {
    return tu_run_cli_files(args, NULL, out, err);
}

static int setup(void **state) {
    (void)state;
    attn_set_num_threads(1); /* see test_embed.c */
    json_error_t e;
    g_cases = json_load_file(tu_ref_path("fill_cases.json"), 0, &e);
    if (!g_cases) {
        fprintf(stderr, "cannot read %s: %s (run tools/ref_fill_mask.py)\n",
                tu_ref_path("fill_cases.json"), e.text);
        return -1;
    }
    return tu_mkdtemp(tu_dir, sizeof tu_dir, "fill-mask");
}

static int teardown(void **state) {
    (void)state;
    json_decref(g_cases);
    tu_rm_tree(tu_dir);
    return 0;
}

static json_t *cases(void) { return json_object_get(g_cases, "cases"); }

static void test_library(void **state) {
    (void)state;
    attn_embed *e = NULL;
    const char *loaded = "";
    double worst = 0;
    int n_cand = 0;
    size_t i;
    json_t *c;
    json_array_foreach(cases(), i, c) {
        const char *dir = json_string_value(json_object_get(c, "dir"));
        const char *text = json_string_value(json_object_get(c, "text"));
        int k = (int)json_integer_value(json_object_get(c, "top_k"));
        if (strcmp(dir, loaded)) {
            attn_embed_free(e);
            e = NULL;
            attn_status s = attn_embed_load(dir, NULL, &e);
            if (s) fail_msg("load %s: %s", dir, attn_last_error());
            loaded = dir;
        }
        attn_embed_fill_result r;
        attn_status s = attn_embed_fill_mask(e, text, SIZE_MAX, k, &r);
        if (s) fail_msg("fill-mask \"%s\": %s", text, attn_last_error());
        json_t *res = json_object_get(c, "results");
        assert_int_equal(r.n_masks, (int)json_array_size(res));
        assert_int_equal(r.top_k, k);
        for (int m = 0; m < r.n_masks; m++) {
            json_t *row = json_array_get(res, (size_t)m);
            assert_int_equal(json_array_size(row), (size_t)k);
            for (int j = 0; j < k; j++) {
                json_t *x = json_array_get(row, (size_t)j);
                const attn_embed_fill_candidate *a = &r.cands[(size_t)m * (size_t)k + (size_t)j];
                int want = (int)json_integer_value(json_object_get(x, "token"));
                if (a->token != want)
                    fail_msg("\"%s\" mask %d rank %d: token %d, expected %d", text, m, j + 1,
                             (int)a->token, want);
                assert_string_equal(a->token_str, json_string_value(json_object_get(x, "token_str")));
                assert_string_equal(a->sequence, json_string_value(json_object_get(x, "sequence")));
                double err = fabs((double)a->score - json_number_value(json_object_get(x, "score")));
                if (err > worst) worst = err;
                n_cand++;
            }
        }
        if (!tu_quiet() && i < 2)
            printf("  \"%s\" -> %s (%.4f), sequence \"%s\"\n", text, r.cands[0].token_str,
                   (double)r.cands[0].score, r.cands[0].sequence);
        attn_embed_fill_result_free(&r);
    }
    attn_embed_free(e);
    printf("  %zu texts, %d candidates: identical ranking, token strings and sequences; max "
           "probability error %.3e (tolerance 1e-5); smallest reference gap %.3g\n",
           json_array_size(cases()), n_cand, worst,
           json_number_value(json_object_get(g_cases, "min_gap")));
    assert_true(worst <= 1e-5);
}

/* `attn fill-mask --jsonl` on a single-mask and a multi-mask case, and the plain output. */
static void test_cli(void **state) {
    (void)state;
    char out[1024], err[1024], args[8192], qd[2048], qt[2048];
    snprintf(out, sizeof out, "%s", tu_tmp("out.txt"));
    snprintf(err, sizeof err, "%s", tu_tmp("err.txt"));
    size_t i;
    json_t *c;
    int checked = 0;
    json_array_foreach(cases(), i, c) {
        if (i != 0 && i != 2 && i != 14) continue;
        const char *dir = json_string_value(json_object_get(c, "dir"));
        const char *text = json_string_value(json_object_get(c, "text"));
        int k = (int)json_integer_value(json_object_get(c, "top_k"));
        snprintf(args, sizeof args, "fill-mask --model %s --top-k %d --jsonl %s",
                 tu_shq(dir, qd, sizeof qd), k, tu_shq(text, qt, sizeof qt));
        assert_int_equal(run_cli(args, out, err), 0);
        size_t n;
        char *txt = tu_read_all(out, &n), *line = txt;
        assert_non_null(txt);
        json_t *res = json_object_get(c, "results");
        for (size_t m = 0; m < json_array_size(res); m++)
            for (int j = 0; j < k; j++) {
                char *nl = strchr(line, '\n');
                assert_non_null(nl);
                *nl = '\0';
                json_t *got = json_loads(line, 0, NULL), *x = json_array_get(json_array_get(res, m), (size_t)j);
                assert_non_null(got);
                assert_int_equal(json_integer_value(json_object_get(got, "mask")), (json_int_t)m + 1);
                assert_int_equal(json_integer_value(json_object_get(got, "rank")), j + 1);
                assert_int_equal(json_integer_value(json_object_get(got, "token")),
                                 json_integer_value(json_object_get(x, "token")));
                assert_string_equal(json_string_value(json_object_get(got, "sequence")),
                                    json_string_value(json_object_get(x, "sequence")));
                assert_true(fabs(json_number_value(json_object_get(got, "score")) -
                                 json_number_value(json_object_get(x, "score"))) <= 1e-5);
                json_decref(got);
                line = nl + 1;
                checked++;
            }
        assert_true(*line == '\0');
        free(txt);
    }
    printf("  attn fill-mask --jsonl: %d candidates checked\n", checked);
    /* plain output: rank, probability, token, sequence */
    c = json_array_get(cases(), 0);
    snprintf(args, sizeof args, "fill-mask --model %s %s",
             tu_shq(json_string_value(json_object_get(c, "dir")), qd, sizeof qd),
             tu_shq(json_string_value(json_object_get(c, "text")), qt, sizeof qt));
    assert_int_equal(run_cli(args, out, err), 0);
    size_t n;
    char *txt = tu_read_all(out, &n);
    assert_non_null(txt);
    fputs(txt, stdout);
    int lines = 0;
    for (char *p = txt; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 5); /* default top-k 5 */
    const char *seq = json_string_value(json_object_get(
        json_array_get(json_array_get(json_object_get(c, "results"), 0), 0), "sequence"));
    assert_non_null(seq);
    assert_non_null(strstr(txt, seq));
    free(txt);
}

static void expect_error(const char *args, int code, const char *sub) {
    char out[1024], err[1024];
    snprintf(out, sizeof out, "%s", tu_tmp("bad.out"));
    snprintf(err, sizeof err, "%s", tu_tmp("bad.err"));
    int rc = run_cli(args, out, err);
    printf("  exit %d\n", rc);
    assert_int_equal(rc, code);
    tu_expect_error_file(err, sub);
}

static void test_bad_inputs(void **state) {
    (void)state;
    char args[8192], qd[2048], qn[2048];
    const char *dir = json_string_value(json_object_get(json_array_get(cases(), 0), "dir"));
    tu_shq(dir, qd, sizeof qd);
    tu_shq(json_string_value(json_object_get(g_cases, "nohead")), qn, sizeof qn);
    snprintf(args, sizeof args, "fill-mask --model %s 'no mask here.'", qd);
    expect_error(args, 1, "no [MASK]");
    snprintf(args, sizeof args, "fill-mask --model %s 'a [MASK] b'", qn);
    expect_error(args, 1, "masked-LM head");
    snprintf(args, sizeof args, "fill-mask --model '%s' 'a [MASK] b'", tu_dir);
    expect_error(args, 1, "tokenizer.json");
    snprintf(args, sizeof args, "fill-mask --model %s --top-k 0 'a [MASK] b'", qd);
    expect_error(args, 2, "--top-k");
    snprintf(args, sizeof args, "fill-mask --model %s $(printf 'bad\\377 [MASK]')", qd);
    expect_error(args, 1, "UTF-8");
    /* longer than max_position_embeddings (128) */
    char *longtext = malloc(200 * 6 + 16);
    longtext[0] = '\0';
    for (int i = 0; i < 200; i++) strcat(longtext, "word ");
    strcat(longtext, "[MASK]");
    snprintf(args, sizeof args, "fill-mask --model %s '%s'", qd, longtext);
    expect_error(args, 1, "max_position_embeddings");
    free(longtext);
    snprintf(args, sizeof args, "fill-mask --model %s 'one [MASK]' 'two'", qd);
    expect_error(args, 2, "exactly one TEXT");
    /* library: top_k beyond the vocabulary, a tokenizer with another mask token works through
     * the same path (checked above); NULL text */
    attn_embed *e = NULL;
    assert_int_equal(attn_embed_load(dir, NULL, &e), ATTN_STATUS_OK);
    attn_embed_fill_result r;
    tu_expect_fail(attn_embed_fill_mask(e, "a [MASK]", SIZE_MAX, 40000, &r),
                   ATTN_STATUS_INVALID_ARGUMENT, "top_k", NULL);
    tu_expect_fail(attn_embed_fill_mask(e, NULL, 0, 5, &r), ATTN_STATUS_INVALID_ARGUMENT, "NULL", NULL);
    attn_embed_free(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* test_bleu.c — corpus BLEU (src/eval/bleu.c, `attn bleu`) against sacreBLEU run live
 * (tools/ref_bleu.py writes $ATTN_REF_DIR/bleu_cases.json and the data files):
 *   - every segment of every case tokenized exactly as sacreBLEU does (string equality);
 *   - every case's statistics (counts, totals, lengths) identical and score, precisions, BP and
 *     ratio within 1e-9 (the algorithm is the same; the print shows the largest difference);
 *   - the Chinese-character table, Python's whitespace and str.lower() over all of Unicode;
 *   - a 112k-segment corpus, for speed;
 *   - `attn bleu` end to end (text line identical to sacreBLEU's, --json, stdin) and its errors:
 *     exit codes and one-line messages. The CLI tests are skipped (tu_skip) while the
 *     binary does not have the command. */
#include "tu.h"

#include "attn_eval.h"

#include <jansson.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#define SCORE_TOL 1e-9

static json_t *doc; /* bleu_cases.json */

static int setup(void **state) {
    (void)state;
    json_error_t e;
    doc = json_load_file(tu_ref_path("bleu_cases.json"), 0, &e);
    if (!doc) {
        printf("cannot load %s: %s (run tools/ref_bleu.py)\n", tu_ref_path("bleu_cases.json"),
               e.text);
        return -1;
    }
    return 0;
}
static int teardown(void **state) {
    (void)state;
    json_decref(doc);
    return 0;
}

/* The segments of a data set: inline from the JSON, or (the large set) read from its files. */
typedef struct {
    size_t n, nrefs;
    const char **hyps;
    const char ***refs;
    attn_bleu_lines files[8];
} dataset;

static void dataset_load(const char *name, dataset *d) {
    memset(d, 0, sizeof *d);
    json_t *ds = json_object_get(json_object_get(doc, "datasets"), name);
    assert_non_null(ds);
    d->n = (size_t)json_integer_value(json_object_get(ds, "n"));
    d->nrefs = (size_t)json_integer_value(json_object_get(ds, "nrefs"));
    assert_true(d->nrefs >= 1 && d->nrefs < 8);
    d->refs = calloc(d->nrefs, sizeof *d->refs);
    json_t *hyps = json_object_get(ds, "hyps");
    if (hyps) {
        d->hyps = calloc(d->n + 1, sizeof *d->hyps);
        for (size_t i = 0; i < d->n; i++) d->hyps[i] = json_string_value(json_array_get(hyps, i));
        for (size_t r = 0; r < d->nrefs; r++) {
            json_t *st = json_array_get(json_object_get(ds, "refs"), r);
            d->refs[r] = calloc(d->n + 1, sizeof **d->refs);
            for (size_t i = 0; i < d->n; i++) /* null stays NULL: no reference */
                d->refs[r][i] = json_string_value(json_array_get(st, i));
        }
        return;
    }
    char path[4096];
    for (size_t k = 0; k <= d->nrefs; k++) {
        char file[256];
        if (k == 0) snprintf(file, sizeof file, "bleu_%s.hyp", name);
        else snprintf(file, sizeof file, "bleu_%s.ref%zu", name, k);
        snprintf(path, sizeof path, "%s", tu_ref_path(file));
        if (attn_bleu_read_lines(path, &d->files[k])) fail_msg("%s", attn_last_error());
        assert_int_equal(d->files[k].n, d->n);
    }
    d->hyps = (const char **)d->files[0].lines;
    for (size_t r = 0; r < d->nrefs; r++) d->refs[r] = (const char **)d->files[r + 1].lines;
}

static void dataset_free(dataset *d) {
    if (d->files[0].lines) {
        for (size_t k = 0; k <= d->nrefs; k++) attn_bleu_lines_free(&d->files[k]);
    } else {
        free(d->hyps);
        for (size_t r = 0; r < d->nrefs; r++) free(d->refs[r]);
    }
    free(d->refs);
}

static attn_bleu_options case_options(json_t *c) {
    attn_bleu_options o = {0};
    assert_int_equal(
        attn_bleu_tokenizer_parse(json_string_value(json_object_get(c, "tokenize")), &o.tokenize),
        ATTN_STATUS_OK);
    o.lowercase = json_is_true(json_object_get(c, "lowercase"));
    return o;
}

static double jnum(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

/* sacreBLEU's BLEUScore.format() line for a result. */
static void format_line(const attn_bleu_result *r, char *buf, size_t n) {
    snprintf(buf, n,
             "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = "
             "%lld)",
             r->score, r->precisions[0], r->precisions[1], r->precisions[2], r->precisions[3],
             r->bp, r->ratio, (long long)r->sys_len, (long long)r->ref_len);
}

static void test_tokenize_against_sacrebleu(void **state) {
    (void)state;
    json_t *cases = json_object_get(doc, "cases"), *c;
    size_t idx, checked = 0, bad = 0;
    json_array_foreach(cases, idx, c) {
        json_t *th = json_object_get(c, "tok_hyps");
        if (!th) continue;
        const char *ds_name = json_string_value(json_object_get(c, "dataset"));
        attn_bleu_options o = case_options(c);
        dataset d;
        dataset_load(ds_name, &d);
        for (size_t r = 0; r <= d.nrefs; r++) {
            json_t *want = r == 0 ? th : json_array_get(json_object_get(c, "tok_refs"), r - 1);
            for (size_t i = 0; i < d.n; i++) {
                const char *in = r == 0 ? d.hyps[i] : d.refs[r - 1][i];
                if (!in) continue;
                char *got;
                assert_int_equal(attn_bleu_tokenize(in, &o, &got), ATTN_STATUS_OK);
                const char *exp = json_string_value(json_array_get(want, i));
                checked++;
                if (strcmp(got, exp)) {
                    if (bad++ < 10)
                        printf("  %s tok=%s lc=%d stream %zu line %zu:\n    input    [%s]\n    "
                               "attn     [%s]\n    sacrebleu[%s]\n",
                               ds_name, attn_bleu_tokenizer_name(o.tokenize), o.lowercase, r,
                               i + 1, in, got, exp);
                }
                attn_free(got);
            }
        }
        dataset_free(&d);
    }
    printf("  tokenized segments identical to sacreBLEU: %zu of %zu\n", checked - bad, checked);
    assert_int_equal(bad, 0);
}

static void test_corpus_against_sacrebleu(void **state) {
    (void)state;
    json_t *cases = json_object_get(doc, "cases"), *c;
    size_t idx;
    double worst = 0;
    int failures = 0;
    json_array_foreach(cases, idx, c) {
        const char *ds_name = json_string_value(json_object_get(c, "dataset"));
        attn_bleu_options o = case_options(c);
        dataset d;
        dataset_load(ds_name, &d);
        attn_bleu_result r;
        clock_t t0 = clock();
        attn_status st = attn_bleu_corpus(d.n, d.hyps, d.nrefs,
                                          (const char *const *const *)d.refs, &o, &r);
        double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        if (st) fail_msg("%s: %s", ds_name, attn_last_error());
        double err = fabs(r.score - jnum(c, "score"));
        err = fmax(err, fabs(r.bp - jnum(c, "bp")));
        err = fmax(err, fabs(r.ratio - jnum(c, "ratio")));
        int exact = r.sys_len == (int64_t)jnum(c, "sys_len") &&
                    r.ref_len == (int64_t)jnum(c, "ref_len");
        for (int k = 0; k < ATTN_BLEU_ORDER; k++) {
            err = fmax(err, fabs(r.precisions[k] -
                                 json_number_value(json_array_get(json_object_get(c, "precisions"), k))));
            exact &= r.counts[k] == json_integer_value(json_array_get(json_object_get(c, "counts"), k));
            exact &= r.totals[k] == json_integer_value(json_array_get(json_object_get(c, "totals"), k));
        }
        char line[256];
        format_line(&r, line, sizeof line);
        int same_text = !strcmp(line, json_string_value(json_object_get(c, "text")));
        int ok = exact && err <= SCORE_TOL && same_text;
        if (err > worst) worst = err;
        if (!ok || !getenv("ATTN_TEST_QUIET"))
            printf("  %-13s tok=%-4s lc=%d n=%-6zu refs=%zu BLEU %9.5f |d|=%.1e %s%s\n", ds_name,
                   attn_bleu_tokenizer_name(o.tokenize), o.lowercase, d.n, d.nrefs, r.score, err,
                   ok ? "ok" : "FAIL", d.n > 10000 ? (secs < 10 ? " (timed)" : " SLOW") : "");
        if (!ok) {
            printf("    attn:      %s  counts %lld %lld %lld %lld totals %lld %lld %lld %lld\n",
                   line, (long long)r.counts[0], (long long)r.counts[1], (long long)r.counts[2],
                   (long long)r.counts[3], (long long)r.totals[0], (long long)r.totals[1],
                   (long long)r.totals[2], (long long)r.totals[3]);
            printf("    sacrebleu: %s  counts %s totals %s\n",
                   json_string_value(json_object_get(c, "text")),
                   json_dumps(json_object_get(c, "counts"), JSON_COMPACT),
                   json_dumps(json_object_get(c, "totals"), JSON_COMPACT));
            failures++;
        }
        dataset_free(&d);
    }
    printf("  %zu cases: max |BLEU, precision, BP, ratio difference| vs sacreBLEU %s = %.3e\n",
           json_array_size(cases), json_string_value(json_object_get(doc, "sacrebleu_version")),
           worst);
    assert_int_equal(failures, 0);
}

/* 112k segments (the whole corpus four times): the hash-map counting must stay fast. */
static void test_large_corpus_speed(void **state) {
    (void)state;
    dataset d;
    dataset_load("big", &d);
    size_t n = 4 * d.n;
    const char **h = malloc(n * sizeof *h), **rf = malloc(n * sizeof *rf);
    for (size_t i = 0; i < n; i++) h[i] = d.hyps[i % d.n], rf[i] = d.refs[0][i % d.n];
    const char *const *refs[1] = {rf};
    attn_bleu_result r1, r4;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(attn_bleu_corpus(n, h, 1, refs, NULL, &r4), ATTN_STATUS_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const char *const *refs1[1] = {(const char *const *)d.refs[0]};
    assert_int_equal(attn_bleu_corpus(d.n, d.hyps, 1, refs1, NULL, &r1), ATTN_STATUS_OK);
    printf("  %zu segments (%lld hypothesis tokens): %.3f s; BLEU %.4f (x1: %.4f)\n", n,
           (long long)r4.sys_len, secs, r4.score, r1.score);
    /* statistics add up exactly, so the score of 4 copies is the score of one */
    assert_true(r4.sys_len == 4 * r1.sys_len && r4.counts[3] == 4 * r1.counts[3]);
    assert_true(fabs(r4.score - r1.score) < 1e-9);
    free(h), free(rf);
    dataset_free(&d);
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
               o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    return o[0] = (char)(0xF0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
           o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F)), 4;
}

/* Over every code point: zh table, str.isspace() and str.lower() as the running Python has them. */
static void test_unicode_tables(void **state) {
    (void)state;
    static unsigned char is_zh[0x110000], is_ws[0x110000];
    static const char *lower[0x110000];
    json_t *v;
    size_t i;
    json_array_foreach(json_object_get(doc, "zh_ranges"), i, v) {
        for (json_int_t c = json_integer_value(json_array_get(v, 0));
             c <= json_integer_value(json_array_get(v, 1)); c++)
            is_zh[c] = 1;
    }
    json_array_foreach(json_object_get(doc, "whitespace"), i, v) is_ws[json_integer_value(v)] = 1;
    json_array_foreach(json_object_get(doc, "lower"), i, v) {
        lower[json_integer_value(json_array_get(v, 0))] = json_string_value(json_array_get(v, 1));
    }
    attn_bleu_options none = {ATTN_BLEU_TOKENIZE_NONE, false}, none_lc = {ATTN_BLEU_TOKENIZE_NONE, true};
    int bad_zh = 0, bad_ws = 0, bad_lower = 0;
    for (uint32_t cp = 1; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        if (attn_bleu_is_zh_char(cp) != is_zh[cp] && bad_zh++ < 5)
            printf("  U+%04X: zh %d, sacreBLEU %d\n", cp, attn_bleu_is_zh_char(cp), is_zh[cp]);
        char s[16], want[64], *got;
        size_t k = put_utf8(s + 1, cp);
        s[0] = 'a', s[k + 1] = 'b', s[k + 2] = '\0';
        assert_int_equal(attn_bleu_tokenize(s, &none, &got), ATTN_STATUS_OK);
        if (is_ws[cp]) snprintf(want, sizeof want, "a b");
        else snprintf(want, sizeof want, "%s", s);
        if (strcmp(got, want) && bad_ws++ < 5) printf("  U+%04X: whitespace mismatch\n", cp);
        attn_free(got);
        /* a lone character, lowercased (then rstripped: whitespace vanishes) */
        s[k + 1] = '\0';
        assert_int_equal(attn_bleu_tokenize(s + 1, &none_lc, &got), ATTN_STATUS_OK);
        if (is_ws[cp]) want[0] = '\0';
        else if (lower[cp]) snprintf(want, sizeof want, "%s", lower[cp]);
        else snprintf(want, sizeof want, "%s", s + 1);
        if (strcmp(got, want) && bad_lower++ < 10)
            printf("  U+%04X: lower gives [%s], Python (Unicode %s) [%s]\n", cp, got,
                   json_string_value(json_object_get(doc, "python_unicode")), want);
        attn_free(got);
    }
    printf("  all code points: %d zh, %d whitespace, %d lowercase mismatches\n", bad_zh, bad_ws,
           bad_lower);
    assert_int_equal(bad_zh + bad_ws + bad_lower, 0);
}

static void test_compute_rules(void **state) {
    (void)state;
    attn_bleu_result r;
    /* no match at all: score and precisions 0, BP still computed */
    int64_t c0[4] = {0, 0, 0, 0}, t0[4] = {5, 4, 3, 2};
    assert_int_equal(attn_bleu_compute(c0, t0, 5, 10, &r), ATTN_STATUS_OK);
    assert_true(r.score == 0 && r.precisions[0] == 0 && fabs(r.bp - exp(1 - 2.0)) < 1e-15);
    /* exp smoothing: the k-th order without match gets 100 / (2^k * total) */
    int64_t c1[4] = {4, 0, 0, 1}, t1[4] = {5, 4, 3, 2};
    assert_int_equal(attn_bleu_compute(c1, t1, 5, 5, &r), ATTN_STATUS_OK);
    assert_true(r.precisions[1] == 100.0 / 8 && r.precisions[2] == 100.0 / 12 &&
                r.precisions[3] == 50.0 && r.bp == 1.0);
    /* an order without n-grams stops the loop: later precisions stay 0, score 0 */
    int64_t c2[4] = {3, 1, 0, 0}, t2[4] = {3, 2, 1, 0};
    assert_int_equal(attn_bleu_compute(c2, t2, 3, 3, &r), ATTN_STATUS_OK);
    assert_true(r.precisions[2] == 50.0 && r.precisions[3] == 0 && r.score == 0);
    /* empty hypotheses: BP 0 */
    assert_int_equal(attn_bleu_compute(c0, c0, 0, 7, &r), ATTN_STATUS_OK);
    assert_true(r.bp == 0 && r.score == 0 && r.ratio == 0);
    /* everything empty: ratio 0, not NaN */
    assert_int_equal(attn_bleu_compute(c0, c0, 0, 0, &r), ATTN_STATUS_OK);
    assert_true(r.ratio == 0 && r.bp == 1);
    int64_t bad[4] = {6, 0, 0, 0};
    assert_int_equal(attn_bleu_compute(bad, t0, 5, 5, &r), ATTN_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(attn_last_error(), "order 1"));
    /* zero segments */
    assert_int_equal(attn_bleu_corpus(0, NULL, 1, NULL, NULL, &r), ATTN_STATUS_OK);
    assert_true(r.score == 0 && r.sys_len == 0);
}

static void test_library_errors(void **state) {
    (void)state;
    attn_bleu_result r;
    const char *hyps[] = {"好", "bad \xff byte", "ok"};
    const char *good[] = {"好", "fine", "ok"};
    const char *badref[] = {"好", "fine", "\xe4\xbd"}; /* truncated 你 */
    const char *const *refs1[] = {good};
    assert_int_equal(attn_bleu_corpus(3, hyps, 1, refs1, NULL, &r), ATTN_STATUS_INVALID_ARGUMENT);
    printf("  %s\n", attn_last_error());
    assert_non_null(strstr(attn_last_error(), "hypothesis 2"));
    assert_non_null(strstr(attn_last_error(), "invalid UTF-8 at byte 5"));
    const char *const *refs2[] = {good, badref};
    assert_int_equal(attn_bleu_corpus(3, good, 2, refs2, NULL, &r), ATTN_STATUS_INVALID_ARGUMENT);
    printf("  %s\n", attn_last_error());
    assert_non_null(strstr(attn_last_error(), "reference stream 2, segment 3"));
    /* overlong, surrogate, above U+10FFFF: rejected like Python's decoder */
    const char *invalid[] = {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe0\x80\x80", "\x80"};
    for (int k = 0; k < 5; k++) {
        char *out;
        assert_int_equal(attn_bleu_tokenize(invalid[k], NULL, &out), ATTN_STATUS_INVALID_ARGUMENT);
    }
    const char *nulls[] = {NULL, "x", "y"};
    const char *const *refs3[] = {nulls, nulls};
    assert_int_equal(attn_bleu_corpus(3, good, 2, refs3, NULL, &r), ATTN_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(attn_last_error(), "segment 1 has no reference"));
    attn_bleu_options o = {(attn_bleu_tokenizer)7, false};
    assert_int_equal(attn_bleu_corpus(3, good, 1, refs1, &o, &r), ATTN_STATUS_INVALID_ARGUMENT);
    attn_bleu_tokenizer t;
    assert_int_equal(attn_bleu_tokenizer_parse("intl", &t), ATTN_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(attn_last_error(), "intl"));
    assert_int_equal(attn_bleu_corpus(3, good, 0, refs1, NULL, &r), ATTN_STATUS_INVALID_ARGUMENT);
}

static void write_file(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void test_read_lines(void **state) {
    (void)state;
    char path[4096];
    attn_bleu_lines l;
    snprintf(path, sizeof path, "%s", tu_ref_path("bleu_tmp_lines.txt"));
    /* '\n' only splits ("\r" stays), a last line without '\n' counts */
    write_file(path, "a\r\nb\n\nc \xe4\xbd\xa0", 11);
    assert_int_equal(attn_bleu_read_lines(path, &l), ATTN_STATUS_OK);
    assert_int_equal(l.n, 4);
    assert_string_equal(l.lines[0], "a\r");
    assert_string_equal(l.lines[2], "");
    assert_string_equal(l.lines[3], "c \xe4\xbd\xa0");
    attn_bleu_lines_free(&l);
    write_file(path, "", 0);
    assert_int_equal(attn_bleu_read_lines(path, &l), ATTN_STATUS_OK);
    assert_int_equal(l.n, 0);
    attn_bleu_lines_free(&l);
    write_file(path, "\n", 1);
    assert_int_equal(attn_bleu_read_lines(path, &l), ATTN_STATUS_OK);
    assert_int_equal(l.n, 1);
    attn_bleu_lines_free(&l);
    write_file(path, "ok\nbad \xfe\n", 9);
    assert_int_equal(attn_bleu_read_lines(path, &l), ATTN_STATUS_INVALID_ARGUMENT);
    printf("  %s\n", attn_last_error());
    assert_non_null(strstr(attn_last_error(), "bleu_tmp_lines.txt:2: invalid UTF-8 at byte 5"));
    write_file(path, "ok\nnul\0x\n", 9);
    assert_int_equal(attn_bleu_read_lines(path, &l), ATTN_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(attn_last_error(), ":2: NUL byte"));
    assert_int_equal(attn_bleu_read_lines("/nonexistent/bleu.txt", &l), ATTN_STATUS_IO);
    assert_non_null(strstr(attn_last_error(), "/nonexistent/bleu.txt"));
}

/* ---------------------------------------------------------------- CLI */

static char out_buf[1 << 16], err_buf[1 << 16];

/* Run `$ATTN_BUILD/attn ARGS` (ARGS already quoted); stdout and stderr into out_buf, err_buf. */
static int run_cli(const char *args) {
    const char *b = getenv("ATTN_BUILD");
    char cmd[16384], o[4096], e[4096];
    snprintf(o, sizeof o, "%s", tu_ref_path("bleu_tmp_stdout.txt"));
    snprintf(e, sizeof e, "%s", tu_ref_path("bleu_tmp_stderr.txt"));
    snprintf(cmd, sizeof cmd, "'%s/attn' %s >'%s' 2>'%s'", b && *b ? b : "build", args, o, e);
    int st = system(cmd);
    char *bufs[2] = {out_buf, err_buf};
    const char *paths[2] = {o, e};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(paths[k], "rb");
        size_t n = f ? fread(bufs[k], 1, sizeof out_buf - 1, f) : 0;
        bufs[k][n] = '\0';
        if (f) fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int cli_has_bleu(void) {
    static int has = -1;
    if (has < 0) has = run_cli("bleu --help") == 0 && strstr(out_buf, "usage: attn bleu");
    return has;
}

static void data_args(const char *ds, char *buf, size_t n) {
    json_t *d = json_object_get(json_object_get(doc, "datasets"), ds);
    size_t nrefs = (size_t)json_integer_value(json_object_get(d, "nrefs"));
    char f[256];
    snprintf(f, sizeof f, "bleu_%s.hyp", ds);
    size_t k = (size_t)snprintf(buf, n, "'%s'", tu_ref_path(f));
    for (size_t r = 1; r <= nrefs && k < n; r++) {
        snprintf(f, sizeof f, "bleu_%s.ref%zu", ds, r);
        k += (size_t)snprintf(buf + k, n - k, " '%s'", tu_ref_path(f));
    }
}

static void test_cli_against_sacrebleu(void **state) {
    (void)state;
    if (!cli_has_bleu())
        tu_skip("'%s bleu --help' fails: the bleu command is not in this CLI", tu_attn_bin());
    json_t *cases = json_object_get(doc, "cases"), *c;
    size_t idx;
    int runs = 0, bad = 0;
    json_array_foreach(cases, idx, c) {
        const char *ds = json_string_value(json_object_get(c, "dataset"));
        json_t *d = json_object_get(json_object_get(doc, "datasets"), ds);
        if (!json_is_true(json_object_get(d, "file_safe"))) continue;
        const char *tok = json_string_value(json_object_get(c, "tokenize"));
        bool lc = json_is_true(json_object_get(c, "lowercase"));
        char files[8192], args[16384];
        data_args(ds, files, sizeof files);
        /* default tokenizer (zh) without the option, the others with it */
        snprintf(args, sizeof args, "bleu %s%s%s%s", files, strcmp(tok, "zh") ? " --tokenize " : "",
                 strcmp(tok, "zh") ? tok : "", lc ? " --lowercase" : "");
        int rc = run_cli(args);
        char want[512];
        snprintf(want, sizeof want, "%s\n", json_string_value(json_object_get(c, "text")));
        runs++;
        if (rc != 0 || strcmp(out_buf, want)) {
            if (bad++ < 5)
                printf("  attn %s\n    exit %d\n    got  %s    want %s    stderr %s\n", args, rc,
                       out_buf, want, err_buf);
        }
    }
    printf("  %d CLI runs, %d text lines differ from sacreBLEU's\n", runs, bad);
    assert_int_equal(bad, 0);

    /* --json and reading the hypotheses from standard input */
    char files[8192], args[16384];
    data_args("zh2", files, sizeof files);
    snprintf(args, sizeof args, "bleu %s --json -tok 13a -lc", files);
    assert_int_equal(run_cli(args), 0);
    json_error_t e;
    json_t *j = json_loads(out_buf, 0, &e);
    assert_non_null(j);
    json_array_foreach(cases, idx, c) {
        if (strcmp(json_string_value(json_object_get(c, "dataset")), "zh2") ||
            strcmp(json_string_value(json_object_get(c, "tokenize")), "13a") ||
            !json_is_true(json_object_get(c, "lowercase")))
            continue;
        assert_true(fabs(jnum(j, "score") - jnum(c, "score")) <= SCORE_TOL);
        assert_true(fabs(jnum(j, "bp") - jnum(c, "bp")) <= SCORE_TOL);
        assert_true(fabs(jnum(j, "ratio") - jnum(c, "ratio")) <= SCORE_TOL);
        assert_int_equal(json_integer_value(json_object_get(j, "hyp_len")), (json_int_t)jnum(c, "sys_len"));
        assert_int_equal(json_integer_value(json_object_get(j, "ref_len")), (json_int_t)jnum(c, "ref_len"));
        for (int k = 0; k < 4; k++)
            assert_true(fabs(json_number_value(json_array_get(json_object_get(j, "precisions"), k)) -
                             json_number_value(json_array_get(json_object_get(c, "precisions"), k))) <=
                        SCORE_TOL);
        assert_string_equal(json_string_value(json_object_get(j, "tokenize")), "13a");
        assert_true(json_is_true(json_object_get(j, "lowercase")));
        assert_int_equal(json_integer_value(json_object_get(j, "nrefs")), 2);
    }
    json_decref(j);
    char hyp[4096], ref[4096];
    snprintf(hyp, sizeof hyp, "%s", tu_ref_path("bleu_zh1.hyp"));
    snprintf(ref, sizeof ref, "%s", tu_ref_path("bleu_zh1.ref1"));
    snprintf(args, sizeof args, "bleu - '%s' < '%s'", ref, hyp);
    assert_int_equal(run_cli(args), 0);
    char *from_stdin = strdup(out_buf);
    snprintf(args, sizeof args, "bleu '%s' '%s'", hyp, ref);
    assert_int_equal(run_cli(args), 0);
    assert_string_equal(from_stdin, out_buf);
    free(from_stdin);
}

/* exit code, one line on stderr starting "attn: error: ", containing the given strings */
static void expect_cli_error(const char *args, int code, const char *s1, const char *s2) {
    int rc = run_cli(args);
    printf("  attn %.60s%s -> %d: %s", args, strlen(args) > 60 ? "..." : "", rc, err_buf);
    assert_int_equal(rc, code);
    assert_string_equal(out_buf, "");
    assert_true(!strncmp(err_buf, "attn: error: ", 13));
    char *nl = strchr(err_buf, '\n');
    assert_true(nl && nl[1] == '\0'); /* exactly one line */
    if (s1) assert_non_null(strstr(err_buf, s1));
    if (s2) assert_non_null(strstr(err_buf, s2));
}

static void test_cli_errors(void **state) {
    (void)state;
    if (!cli_has_bleu())
        tu_skip("'%s bleu --help' fails: the bleu command is not in this CLI", tu_attn_bin());
    char args[16384], a[4096], b[4096], bad[4096];
    snprintf(a, sizeof a, "%s", tu_ref_path("bleu_zh1.hyp"));
    snprintf(b, sizeof b, "%s", tu_ref_path("bleu_en1.ref1"));
    snprintf(args, sizeof args, "bleu '%s' '%s'", a, b);
    expect_cli_error(args, 1, "line counts differ", NULL);
    json_t *sets = json_object_get(doc, "datasets");
    char want[128];
    snprintf(want, sizeof want, "bleu_zh1.hyp has %lld lines",
             (long long)json_integer_value(json_object_get(json_object_get(sets, "zh1"), "n")));
    assert_non_null(strstr(err_buf, want));
    snprintf(want, sizeof want, "bleu_en1.ref1 has %lld lines",
             (long long)json_integer_value(json_object_get(json_object_get(sets, "en1"), "n")));
    assert_non_null(strstr(err_buf, want));
    snprintf(args, sizeof args, "bleu '%s' /nonexistent/refs.txt", a);
    expect_cli_error(args, 1, "/nonexistent/refs.txt", "cannot open");
    snprintf(bad, sizeof bad, "%s", tu_ref_path("bleu_tmp_bad.txt"));
    write_file(bad, "一\n二 \xff\n三\n", 12);
    snprintf(b, sizeof b, "%s", tu_ref_path("bleu_tmp_good.txt"));
    write_file(b, "一\n二\n三\n", 12);
    snprintf(args, sizeof args, "bleu '%s' '%s'", b, bad);
    expect_cli_error(args, 1, "bleu_tmp_bad.txt:2: invalid UTF-8", NULL);
    snprintf(args, sizeof args, "bleu '%s' '%s' --tokenize intl", b, b);
    expect_cli_error(args, 2, "--tokenize", "intl");
    snprintf(args, sizeof args, "bleu '%s' '%s' --frobnicate", b, b);
    expect_cli_error(args, 2, "--frobnicate", NULL);
    snprintf(args, sizeof args, "bleu '%s'", b);
    expect_cli_error(args, 2, "REFERENCES", NULL);
    expect_cli_error("bleu", 2, "HYPOTHESES", NULL);
    snprintf(args, sizeof args, "bleu '%s' '%s' --tokenize", b, b);
    expect_cli_error(args, 2, "--tokenize", NULL);
    /* a good run for contrast: identical files score 100 */
    snprintf(args, sizeof args, "bleu '%s' '%s'", b, b);
    assert_int_equal(run_cli(args), 0);
    assert_string_equal(out_buf, "BLEU = 0.00 100.0/0.0/0.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 3 "
                                 "ref_len = 3)\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenize_against_sacrebleu),
        cmocka_unit_test(test_corpus_against_sacrebleu),
        cmocka_unit_test(test_unicode_tables),
        cmocka_unit_test(test_compute_rules),
        cmocka_unit_test(test_library_errors),
        cmocka_unit_test(test_read_lines),
        cmocka_unit_test(test_large_corpus_speed),
        cmocka_unit_test(test_cli_against_sacrebleu),
        cmocka_unit_test(test_cli_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

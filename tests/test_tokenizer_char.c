/* test_tokenizer_char.c — the character-level tokenizer (attn_tok_train_chars, nanoGPT's
 * shakespeare-char), the WordLevel model and the splitting pre-tokenizers against Hugging Face
 * `tokenizers` 0.21.4, live:
 *
 *   train       attn_tok_train_chars on ../shared/data/tinyshakespeare/input.txt: 65 characters;
 *               the ids of the whole text are identical to the tokenizer
 * tools/ref_tokenizer_char.py builds with tokenizers (which it checks equal nanoGPT's stoi); decode
 * gives the text back byte for byte; saved, the file loads in tokenizers with identical ids and
 * decodes (tools/check_tokenizer.py), and a character outside the vocabulary is an error in both.
 * The same on random Unicode text (all planes, controls, \r\n). reference   tokenizers' own char
 * and word-level (Whitespace, [UNK]) files: ids and decodes of hard texts and text samples
 * identical, errors where tokenizers raises. splits      Split (String and Regex patterns, five
 * behaviours, inverted or not, Oniguruma syntax: \s \w \h (?m) {,n}, empty matches, anchors,
 * GPT-2's and Llama 3's patterns), Punctuation (five behaviours), Whitespace, WhitespaceSplit,
 *               BertPreTokenizer: the pieces of 52 texts identical to pre_tokenize_str's. Patterns
 *               PCRE2 cannot express (class intersection &&) must be refused, never misread.
 *   bad input   empty, invalid UTF-8 or NUL-holding training text, NULL arguments.
 * Parts whose reference files are missing are skipped (tu_skip). */
#include "../src/tok/tok-impl.h" /* tok_split_apply: the pieces */
#include "attn_tok.h"
#include "tu.h"
#include "tu_tok.h"

#include <jansson.h>
#include <time.h>
#include <unistd.h>

#define TEXT "../shared/data/tinyshakespeare/input.txt"

static json_t *g_root;

static json_t *cases_root(void) {
    if (g_root) return g_root;
    size_t n;
    char *txt = tu_read_all(tu_ref_path("char_cases.json"), &n);
    if (!txt) return NULL;
    json_error_t err;
    g_root = json_loadb(txt, n, JSON_ALLOW_NUL, &err);
    free(txt);
    if (!g_root) fail_msg("char_cases.json: %s", err.text);
    return g_root;
}

#define SKIP_IF_NO_REF()                                                                           \
    json_t *root = cases_root();                                                                   \
    if (!root)                                                                                     \
        tu_skip("%s missing (tools/ref_tokenizer_char.py needs %s)",                               \
                tu_ref_path("char_cases.json"), TEXT);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *py_path(void) {
    static char buf[4096];
    const char *r = getenv("ATTN_ROOT");
    snprintf(buf, sizeof buf, "%s/.venv/bin/python", r ? r : ".");
    return access(buf, X_OK) == 0 ? buf : NULL;
}

/* tools/check_tokenizer.py on attn's file: cases [{"text", "ids", "decode"} or "error"]. The
 * tests write the spec (queued here) and test_python_check runs them all: a cmocka test of its
 * own, skipped alone without the project venv. */
enum { N_HF = 2 }; /* test_train_shakespeare, test_train_random */
static char g_hf_spec[N_HF][1100];
static int g_n_hf;

static void hf_check(const char *tok_path, json_t *cases) {
    assert_true(g_n_hf < N_HF);
    json_t *spec = json_object();
    json_object_set_new(spec, "tokenizer", json_string(tok_path));
    json_object_set_new(spec, "cases", cases);
    char name[64];
    snprintf(name, sizeof name, "check_cases_%d.json", g_n_hf);
    snprintf(g_hf_spec[g_n_hf], sizeof g_hf_spec[0], "%s", tu_tmp(name));
    assert_int_equal(json_dump_file(spec, g_hf_spec[g_n_hf], JSON_COMPACT), 0);
    json_decref(spec);
    g_n_hf++;
}

static void test_python_check(void **state) {
    (void)state;
    const char *py = py_path();
    if (!py) tu_skip(".venv/bin/python missing (sh tools/install_deps.sh)");
    if (g_n_hf < N_HF)
        tu_skip("%d of the %d tokenizers checks were prepared (a test before failed or skipped)",
                g_n_hf, N_HF);
    for (int i = 0; i < g_n_hf; i++) {
        char cmd[9000];
        snprintf(cmd, sizeof cmd, "%s tools/check_tokenizer.py '%s'", py, g_hf_spec[i]);
        int rc = tu_sh_indented(cmd, "  ");
        if (rc != 0)
            fail_msg("tools/check_tokenizer.py failed on %s (status %d)", g_hf_spec[i], rc);
    }
}

/* A case for hf_check: attn's ids and decode of s, or "error" when attn refuses it. */
static void add_case(json_t *cases, const attn_tok *t, const char *s, size_t n) {
    json_t *c = json_object();
    json_object_set_new(c, "text", json_stringn(s, n));
    int32_t *ids = NULL;
    size_t k = 0;
    if (attn_tok_encode_alloc(t, s, n, &ids, &k)) {
        json_object_set_new(c, "error", json_true());
    } else {
        json_t *a = json_array();
        for (size_t i = 0; i < k; i++) json_array_append_new(a, json_integer(ids[i]));
        json_object_set_new(c, "ids", a);
        size_t dl;
        char *d = dec(t, ids, k, 0, &dl);
        json_object_set_new(c, "decode", json_stringn(d, dl));
        attn_free(d);
        attn_free(ids);
    }
    json_array_append_new(cases, c);
}

/* ---- training on tiny shakespeare ---- */

static void test_train_shakespeare(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    size_t n;
    char *text = tu_read_all(TEXT, &n);
    assert_non_null(text);
    double t0 = now_s();
    attn_tok *t;
    if (attn_tok_train_chars(text, n, &t)) fail_msg("%s", attn_last_error());
    double t_train = now_s() - t0;
    assert_int_equal(attn_tok_vocab_size(t), 65);
    assert_string_equal(attn_tok_model_type(t), "WordLevel");
    /* nanoGPT's itos: sorted characters; "\n" first, then " ", "!" ... */
    assert_string_equal(attn_tok_id_to_token(t, 0), "\n");
    assert_string_equal(attn_tok_id_to_token(t, 1), " ");
    assert_int_equal(attn_tok_token_to_id(t, "a"), 39);
    t0 = now_s();
    size_t k;
    int32_t *ids = enc(t, text, n, &k);
    double t_enc = now_s() - t0;
    json_t *want = json_object_get(root, "shakespeare_ids");
    assert_int_equal(k, json_array_size(want));
    size_t bad = 0;
    for (size_t i = 0; i < k; i++) bad += ids[i] != json_integer_value(json_array_get(want, i));
    t0 = now_s();
    size_t dl;
    char *d = dec(t, ids, k, 0, &dl);
    double t_dec = now_s() - t0;
    assert_int_equal(dl, n);
    assert_memory_equal(d, text, n);
    printf(
        "  tiny shakespeare: %zu bytes, 65 characters: trained in %.1f ms; %zu ids identical to "
        "tokenizers' (%zu differ); encode %.1f ms (%.1f MB/s), decode %.1f ms, round trip exact\n",
        n, t_train * 1e3, k - bad, bad, t_enc * 1e3, (double)n / t_enc / 1e6, t_dec * 1e3);
    assert_int_equal(bad, 0);
    /* the library's own file gives the same */
    attn_tok *th;
    char hpath[4200];
    snprintf(hpath, sizeof hpath, "%s", tu_ref_path("char_shakespeare.json"));
    if (attn_tok_load(hpath, &th)) fail_msg("%s: %s", hpath, attn_last_error());
    size_t k2;
    int32_t *ids2 = enc(th, text, n, &k2);
    assert_int_equal(k2, k);
    assert_memory_equal(ids2, ids, k * sizeof *ids);
    attn_free(ids2);
    attn_tok_free(th);
    /* saved and reloaded; checked by tokenizers */
    const char *path = tu_tmp("char.json");
    assert_int_equal(attn_tok_save(t, path), 0);
    attn_tok *t2;
    if (attn_tok_load(path, &t2)) fail_msg("%s", attn_last_error());
    ids2 = enc(t2, text, n, &k2);
    assert_int_equal(k2, k);
    assert_memory_equal(ids2, ids, k * sizeof *ids);
    attn_free(ids2);
    json_t *cases = json_array();
    add_case(cases, t2, text, n);
    json_t *texts = json_object_get(root, "texts");
    for (size_t i = 0; i < json_array_size(texts); i++)
        add_case(cases, t2, json_string_value(json_array_get(texts, i)),
                 json_string_length(json_array_get(texts, i)));
    for (size_t i = 0; i + 500 < n; i += n / 50) add_case(cases, t2, text + i, 500);
    /* unknown characters: refused by both */
    int32_t *none;
    size_t kn;
    tu_expect_fail(attn_tok_encode_alloc(t2, "caf\xC3\xA9", 5, &none, &kn),
                   ATTN_STATUS_INVALID_ARGUMENT, "\"\xC3\xA9\" is not in the vocabulary", "<unk>");
    tu_expect_fail(attn_tok_encode_alloc(t2, "a\tb", 3, &none, &kn), ATTN_STATUS_INVALID_ARGUMENT,
                   "not in the vocabulary", NULL);
    size_t errors = 0;
    for (size_t i = 0; i < json_array_size(cases); i++)
        errors += json_is_true(json_object_get(json_array_get(cases, i), "error"));
    assert_true(errors >= 5);
    hf_check(path, cases);
    attn_free(ids);
    attn_free(d);
    attn_tok_free(t);
    attn_tok_free(t2);
    free(text);
}

/* ---- random Unicode ---- */

static size_t random_text(tu_rng *r, char *buf, size_t max_chars) {
    size_t n = 0, m = 1 + (size_t)(tu_uniform(r, 0, 1) * (float)max_chars);
    for (size_t i = 0; i < m; i++) {
        float u = tu_uniform(r, 0, 1);
        uint32_t cp;
        if (u < 0.3f)
            cp = 0x20 + (uint32_t)(tu_uniform(r, 0, 1) * 95);
        else if (u < 0.4f)
            cp = "\n\r\t \x0b\x0c"[(int)(tu_uniform(r, 0, 1) * 6)];
        else if (u < 0.7f)
            cp = 0x80 + (uint32_t)(tu_uniform(r, 0, 1) * 0x2F80);
        else
            cp = (uint32_t)(tu_uniform(r, 0, 1) * 0x10FFFF);
        if (cp >= 0xD800 && cp < 0xE000) cp = 'x';
        n += tok_utf8_encode(cp, buf + n);
    }
    return n;
}

static void test_train_random(void **state) {
    (void)state;
    tu_rng r = {0x9e3779b97f4a7c15ull};
    static char buf[4 * 20000];
    size_t n = 0;
    while (n < sizeof buf - 4 * 300) n += random_text(&r, buf + n, 200);
    attn_tok *t;
    if (attn_tok_train_chars(buf, n, &t)) fail_msg("%s", attn_last_error());
    size_t k, dl;
    int32_t *ids = enc(t, buf, n, &k);
    char *d = dec(t, ids, k, 0, &dl);
    assert_int_equal(dl, n);
    assert_memory_equal(d, buf, n);
    /* ids in code point order */
    for (int32_t i = 1; i < attn_tok_vocab_size(t); i++) {
        uint32_t a, b;
        const char *x = attn_tok_id_to_token(t, i - 1), *y = attn_tok_id_to_token(t, i);
        tok_utf8_decode((const unsigned char *)x, strlen(x) ? strlen(x) : 1, &a);
        tok_utf8_decode((const unsigned char *)y, strlen(y) ? strlen(y) : 1, &b);
        assert_true(a < b);
    }
    printf("  random Unicode: %zu bytes, %d distinct characters: exact round trip\n", n,
           attn_tok_vocab_size(t));
    const char *path = tu_tmp("rand.json");
    assert_int_equal(attn_tok_save(t, path), 0);
    json_t *cases = json_array();
    add_case(cases, t, buf, n);
    for (size_t i = 0; i + 64 < n; i += n / 40) {
        size_t a = i, b = i + 64;
        while (a < n && ((unsigned char)buf[a] & 0xC0) == 0x80) a++;
        while (b < n && ((unsigned char)buf[b] & 0xC0) == 0x80) b++;
        add_case(cases, t, buf + a, b - a);
    }
    add_case(cases, t, "\xF0\x9F\x98\x80\xE2\x82\xAC", 7); /* probably unknown: error in both */
    hf_check(path, cases);
    attn_free(ids);
    attn_free(d);
    attn_tok_free(t);
}

/* ---- tokenizers' own files ---- */

static void test_reference(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    json_t *encs = json_object_get(root, "encodes");
    size_t nc = json_array_size(encs), bad = 0, errors = 0;
    attn_tok *tk[2] = {NULL, NULL};
    const char *names[2] = {"char_shakespeare.json", "char_words.json"};
    for (int i = 0; i < 2; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s", tu_ref_path(names[i]));
        if (attn_tok_load(p, &tk[i])) fail_msg("%s: %s", p, attn_last_error());
    }
    for (size_t i = 0; i < nc; i++) {
        json_t *c = json_array_get(encs, i);
        attn_tok *t = tk[strcmp(json_string_value(json_object_get(c, "tokenizer")), names[0]) != 0];
        json_t *text = json_object_get(c, "text");
        int32_t *ids = NULL;
        size_t k = 0;
        attn_status st =
            attn_tok_encode_alloc(t, json_string_value(text), json_string_length(text), &ids, &k);
        bool ok;
        if (json_is_true(json_object_get(c, "error"))) {
            ok = st != ATTN_STATUS_OK;
            errors += ok;
        } else {
            json_t *w = json_object_get(c, "ids");
            ok = !st && k == json_array_size(w);
            for (size_t j = 0; ok && j < k; j++)
                ok = ids[j] == json_integer_value(json_array_get(w, j));
            if (ok) {
                size_t dl;
                char *d = dec(t, ids, k, 0, &dl);
                json_t *wd = json_object_get(c, "decode");
                ok = dl == json_string_length(wd) && !memcmp(d, json_string_value(wd), dl);
                attn_free(d);
            }
        }
        if (!ok && ++bad <= 5) {
            printf("  %s \"%.60s\": attn %s\n", json_string_value(json_object_get(c, "tokenizer")),
                   json_string_value(text), st ? attn_last_error() : "ok");
            if (!st) print_ids("attn", ids, k);
        }
        attn_free(ids);
    }
    printf("  tokenizers' WordLevel files: %zu/%zu encodes and decodes identical (%zu errors "
           "reproduced)\n",
           nc - bad, nc, errors);
    attn_tok_free(tk[0]);
    attn_tok_free(tk[1]);
    assert_true(nc > 100);
    assert_int_equal(bad, 0);
}

/* ---- pre-tokenizer pieces ---- */

static void test_splits(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    json_t *splits = json_object_get(root, "splits");
    size_t n = json_array_size(splits), bad = 0, refused = 0, configs = 0;
    char *last = NULL;
    attn_tok *t = NULL;
    attn_status load_st = ATTN_STATUS_OK;
    void *md = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(splits, i);
        char *pj = json_dumps(json_object_get(c, "pre_tokenizer"), JSON_COMPACT);
        if (!last || strcmp(last, pj)) {
            attn_tok_free(t);
            t = NULL;
            free(last);
            last = pj;
            configs++;
            char buf[2048];
            snprintf(buf, sizeof buf,
                     "{\"pre_tokenizer\": %s, \"model\": {\"type\": \"WordLevel\", \"vocab\": {}}}",
                     pj);
            attn_reader r;
            assert_int_equal(attn_reader_open_memory(buf, strlen(buf), "split.json", &r), 0);
            load_st = attn_tok_load_reader(r, &t);
            if (load_st) {
                if (!refused++) printf("  refused %s: %s\n", pj, attn_last_error());
                /* only what PCRE2 cannot express may be refused */
                if (load_st != ATTN_STATUS_UNSUPPORTED || !strstr(attn_last_error(), "&&")) bad++;
            }
        } else {
            free(pj);
        }
        if (load_st) continue;
        json_t *text = json_object_get(c, "text"), *want = json_object_get(c, "pieces");
        tok_strlist l = {0};
        assert_true(tok_split_apply(&t->pre[0], &md, json_string_value(text),
                                    json_string_length(text), 1, &l));
        bool ok = l.n == json_array_size(want);
        for (size_t k = 0; ok && k < l.n; k++) {
            json_t *w = json_array_get(want, k);
            ok = l.len[k] == json_string_length(w) &&
                 !memcmp(tok_strlist_at(&l, k), json_string_value(w), l.len[k]);
        }
        if (!ok && ++bad <= 6) {
            printf("  %s on \"%s\":\n    attn:", last, json_string_value(text));
            for (size_t k = 0; k < l.n; k++)
                printf(" [%.*s]", (int)l.len[k], tok_strlist_at(&l, k));
            printf("\n    hf:  ");
            for (size_t k = 0; k < json_array_size(want); k++)
                printf(" [%s]", json_string_value(json_array_get(want, k)));
            printf("\n");
        }
        tok_strlist_free(&l);
    }
    free(last);
    attn_tok_free(t);
    tok_byte_level_md_free(md);
    printf("  pre-tokenizers: %zu configurations x texts = %zu cases, %zu differ; %zu "
           "configurations refused (class intersection, which PCRE2 lacks)\n",
           configs, n, bad, refused);
    assert_true(configs > 200);
    assert_int_equal(bad, 0);
}

/* ---- every code point through one-class regexes ---- */

static const char *find(const char *h, size_t hn, const char *nd, size_t nn) {
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && !memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

static void test_classes(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    json_t *classes = json_object_get(root, "classes");
    /* the text of every code point, surrogates excepted */
    char *text = malloc(4 * 0x110000);
    uint32_t *cp_at = malloc(4 * 0x110000 * sizeof *cp_at); /* byte offset -> code point */
    assert_non_null(text);
    assert_non_null(cp_at);
    size_t n = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        size_t k = tok_utf8_encode(cp, text + n);
        for (size_t j = 0; j < k; j++) cp_at[n + j] = cp;
        n += k;
    }
    uint8_t *matched = malloc(0x110000);
    const char *pat;
    json_t *runs;
    size_t total_bad = 0;
    void *md = NULL;
    json_object_foreach(classes, pat, runs) {
        json_t *pj = json_object();
        json_t *pt = json_object();
        json_object_set_new(pt, "Regex", json_string(pat));
        json_object_set_new(pj, "type", json_string("Split"));
        json_object_set_new(pj, "pattern", pt);
        json_object_set_new(pj, "behavior", json_string("Removed"));
        json_object_set_new(pj, "invert", json_false());
        json_t *tj = json_object();
        json_object_set_new(tj, "pre_tokenizer", pj);
        json_t *mj = json_object();
        json_object_set_new(mj, "type", json_string("WordLevel"));
        json_object_set_new(mj, "vocab", json_object());
        json_object_set_new(tj, "model", mj);
        char *js = json_dumps(tj, JSON_COMPACT);
        json_decref(tj);
        attn_reader r;
        assert_int_equal(attn_reader_open_memory(js, strlen(js), "class.json", &r), 0);
        attn_tok *t;
        if (attn_tok_load_reader(r, &t)) fail_msg("%s: %s", pat, attn_last_error());
        free(js);
        tok_strlist l = {0};
        assert_true(tok_split_apply(&t->pre[0], &md, text, n, 1, &l));
        /* what no piece covers was matched (removed) */
        memset(matched, 1, 0x110000);
        size_t cur = 0;
        for (size_t k = 0; k < l.n; k++) {
            const char *p = tok_strlist_at(&l, k);
            const char *f = find(text + cur, n - cur, p, l.len[k]);
            assert_non_null(f);
            size_t a = (size_t)(f - text);
            for (size_t j = a; j < a + l.len[k]; j++) matched[cp_at[j]] = 0;
            cur = a + l.len[k];
        }
        tok_strlist_free(&l);
        attn_tok_free(t);
        size_t bad = 0, ri = 0, nr = json_array_size(runs), count = 0;
        for (uint32_t cp = 0; cp < 0x110000; cp++) {
            if (cp >= 0xD800 && cp < 0xE000) continue;
            while (ri < nr &&
                   (uint32_t)json_integer_value(json_array_get(json_array_get(runs, ri), 1)) < cp)
                ri++;
            bool want = ri < nr && (uint32_t)json_integer_value(
                                       json_array_get(json_array_get(runs, ri), 0)) <= cp;
            count += want;
            if (want != (matched[cp] != 0)) {
                if (getenv("ATTN_DUMP_CLASSES"))
                    fprintf(stderr, "%s %X %d\n", pat, (unsigned)cp, want);
                if (++bad <= 3)
                    printf("    %s U+%04X: attn %s, tokenizers %s\n", pat, (unsigned)cp,
                           matched[cp] ? "matches" : "does not match",
                           want ? "matches" : "does not");
            }
        }
        printf("  regex %-6s %zu/1112064 code points as Oniguruma (%zu match)\n", pat,
               1112064 - bad, count);
        total_bad += bad;
    }
    tok_byte_level_md_free(md);
    free(matched);
    free(text);
    free(cp_at);
    assert_int_equal(total_bad, 0);
}

/* ---- bad input ---- */

static void test_bad_input(void **state) {
    (void)state;
    const attn_status I = ATTN_STATUS_INVALID_ARGUMENT;
    attn_tok *t = (attn_tok *)1;
    tu_expect_fail(attn_tok_train_chars("", 0, &t), I, "empty", NULL);
    assert_null(t);
    tu_expect_fail(attn_tok_train_chars(NULL, 5, &t), I, "empty", NULL);
    tu_expect_fail(attn_tok_train_chars("ab\xC0\x80", 4, &t), I, "UTF-8", "offset 2");
    tu_expect_fail(attn_tok_train_chars("ab", 2, NULL), I, "NULL", NULL);
    /* NUL would be a vocabulary key "\u0000", which a tokenizer.json cannot give back to attn
     * (see "Strings" in attn_tok.h): refused, naming the offset */
    tu_expect_fail(attn_tok_train_chars("a\0b", 3, &t), I, "NUL", "offset 1");
    assert_null(t);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "char")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_shakespeare), cmocka_unit_test(test_train_random),
        cmocka_unit_test(test_reference),         cmocka_unit_test(test_splits),
        cmocka_unit_test(test_classes),           cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_python_check),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(g_root);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}

/* test_tokenizer.c — the BPE tokenizer (src/tok/) against Hugging Face `tokenizers`:
 *
 *   reference   tools/ref_tokenizer.py (run by tests/run.sh into $ATTN_REF_DIR) trains tokenizers
 *               with `tokenizers` in six configurations and records encode/decode results for
 *               hard texts and corpus lines; here each tokenizer.json is loaded and every id and
 *               every decoded string must be identical. Each is also saved and reloaded.
 *   training    attn trains its own tokenizer on the whole Tatoeba corpus (both languages):
 *               time and vocabulary size are printed; every line must round-trip exactly;
 *               the saved file, reloaded, must encode identically; training is deterministic;
 *               tools/check_tokenizer.py loads the C-written tokenizer.json with `tokenizers`
 *               and compares ids and decodes of thousands of lines and random texts.
 *   random      random Unicode text (every plane, controls, spaces) round-trips.
 *   bad input   malformed or unsupported tokenizer.json, invalid UTF-8, ids out of range, small
 *               buffers, bad training parameters: the right status and a one-line message.
 *
 * Needs ../shared/data/tatoeba-eng-cmn/cmn.txt (relative to the repository root, where
 * tests/run.sh runs) and .venv/bin/python with tokenizers; parts that lack them are skipped with
 * a message. Scratch files go to a fresh mkdtemp directory, removed at the end. */
#include "attn_tok.h"
#include "tu.h"
#include "tu_tok.h"

#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CORPUS "../shared/data/tatoeba-eng-cmn/cmn.txt"

static attn_tok *load_mem(const char *json, attn_status *st) {
    attn_reader r;
    assert_int_equal(attn_reader_open_memory(json, strlen(json), "mem.json", &r), 0);
    attn_tok *t = (attn_tok *)1;
    *st = attn_tok_load_reader(r, &t);
    if (*st) assert_null(t);
    return *st ? NULL : t;
}

/* ---- reference: tokenizers' own files and results ---- */

static void test_reference(void **state) {
    (void)state;
    size_t n;
    char *txt = tu_read_all(tu_ref_path("tok_cases.json"), &n);
    if (!txt)
        tu_skip("%s missing (tools/ref_tokenizer.py needs the corpus and tokenizers)",
                tu_ref_path("tok_cases.json"));
    json_error_t err;
    json_t *root = json_loadb(txt, n, JSON_ALLOW_NUL, &err);
    free(txt);
    assert_non_null(root);
    json_t *variants = json_object_get(root, "variants");
    const char *vname;
    json_t *v;
    size_t total = 0, bad = 0;
    json_object_foreach(variants, vname, v) {
        char path[4200];
        snprintf(path, sizeof path, "%s", tu_ref_path(json_string_value(json_object_get(v, "tokenizer"))));
        attn_tok *t;
        if (attn_tok_load(path, &t)) fail_msg("%s: %s", path, attn_last_error());
        /* saved by attn and reloaded: must behave identically */
        const char *saved = tu_tmp("resaved.json");
        assert_int_equal(attn_tok_save(t, saved), 0);
        attn_tok *t2;
        if (attn_tok_load(saved, &t2)) fail_msg("%s: %s", saved, attn_last_error());
        assert_int_equal(attn_tok_vocab_size(t), attn_tok_vocab_size(t2));
        json_t *cases = json_object_get(v, "cases");
        size_t vbad = 0, nc = json_array_size(cases);
        for (size_t i = 0; i < nc; i++) {
            json_t *c = json_array_get(cases, i);
            json_t *text = json_object_get(c, "text"), *want = json_object_get(c, "ids");
            const char *s = json_string_value(text);
            size_t sl = json_string_length(text), k, k2;
            int32_t *ids = enc(t, s, sl, &k);
            int32_t *ids2 = enc(t2, s, sl, &k2);
            bool ok = k == json_array_size(want) && k2 == k && !memcmp(ids, ids2, k * 4);
            for (size_t j = 0; ok && j < k; j++)
                ok = ids[j] == json_integer_value(json_array_get(want, j));
            int32_t *wids = malloc((json_array_size(want) + 1) * sizeof *wids);
            for (size_t j = 0; j < json_array_size(want); j++)
                wids[j] = (int32_t)json_integer_value(json_array_get(want, j));
            size_t dl, dkl;
            char *d = dec(t, wids, json_array_size(want), 0, &dl);
            char *dk = dec(t, wids, json_array_size(want), ATTN_TOK_DECODE_KEEP_SPECIAL, &dkl);
            json_t *wd = json_object_get(c, "decode"), *wdk = json_object_get(c, "decode_keep");
            bool dok = dl == json_string_length(wd) && !memcmp(d, json_string_value(wd), dl) &&
                       dkl == json_string_length(wdk) &&
                       !memcmp(dk, json_string_value(wdk), dkl);
            if (!ok || !dok) {
                if (++vbad <= 3) {
                    printf("  %s case %zu: text \"%s\"\n", vname, i, s);
                    print_ids("attn", ids, k);
                    print_ids("hf  ", wids, json_array_size(want));
                    printf("    decode attn \"%s\" / hf \"%s\"\n", d, json_string_value(wd));
                    printf("    keep   attn \"%s\" / hf \"%s\"\n", dk, json_string_value(wdk));
                }
            }
            attn_free(ids);
            attn_free(ids2);
            attn_free(d);
            attn_free(dk);
            free(wids);
        }
        printf("  %-10s %s: %zu/%zu texts: identical ids and decodes (vocab %d)\n", vname,
               attn_tok_model_type(t), nc - vbad, nc, attn_tok_vocab_size(t));
        total += nc;
        bad += vbad;
        attn_tok_free(t);
        attn_tok_free(t2);
    }
    printf("  reference (tokenizers %s): %zu/%zu identical\n",
           json_string_value(json_object_get(root, "version")), total - bad, total);
    json_decref(root);
    assert_true(total > 1000);
    assert_int_equal(bad, 0);
}

/* ---- training on the corpus ---- */

typedef struct {
    char *buf;
    const char **line;
    size_t *len;
    size_t n;
} corpus;

/* Columns 1 and 2 of every line (English, Chinese), BOM and CR removed. */
static bool corpus_load(corpus *c) {
    size_t n;
    memset(c, 0, sizeof *c);
    c->buf = tu_read_all(CORPUS, &n);
    if (!c->buf) return false;
    c->line = malloc(2 * (n / 2 + 1) * sizeof *c->line);
    c->len = malloc(2 * (n / 2 + 1) * sizeof *c->len);
    assert_true(c->line && c->len);
    char *s = c->buf, *end = c->buf + n;
    if (n >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) s += 3;
    while (s < end) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *e = nl ? nl : end;
        char *t1 = memchr(s, '\t', (size_t)(e - s));
        if (t1) {
            char *t2 = memchr(t1 + 1, '\t', (size_t)(e - t1 - 1));
            if (!t2) t2 = e;
            c->line[c->n] = s, c->len[c->n++] = (size_t)(t1 - s);
            c->line[c->n] = t1 + 1, c->len[c->n++] = (size_t)(t2 - t1 - 1);
        }
        s = nl ? nl + 1 : end;
    }
    return true;
}

static void corpus_free(corpus *c) {
    free(c->buf);
    free(c->line);
    free(c->len);
}

static const char *const fallback_text[] = {
    "Knowledge is power.", "知识就是力量。", "I don't know where Tom is.", "我不知道汤姆在哪里。",
    "The weather is nice today.", "今天天气很好。", "Where is the station?", "车站在哪里？"};

/* A tokenizer trained on the corpus (or, without it, on a few built-in lines). */
static attn_tok *train_default(int32_t vocab, double *secs, size_t *nlines) {
    corpus c;
    attn_tok_train_params p = attn_tok_train_default_params();
    p.vocab_size = vocab;
    attn_tok *t = NULL;
    double t0 = tu_now();
    attn_status st;
    if (corpus_load(&c)) {
        st = attn_tok_train_bpe(&p, c.line, c.len, c.n, &t);
        *nlines = c.n;
        corpus_free(&c);
    } else {
        p.vocab_size = 400;
        st = attn_tok_train_bpe(&p, fallback_text, NULL, 8, &t);
        *nlines = 8;
    }
    *secs = tu_now() - t0;
    if (st) fail_msg("train: %s", attn_last_error());
    return t;
}

static const char *py_path(void) {
    static const char py[] = ".venv/bin/python";
    return access(py, X_OK) == 0 ? py : NULL;
}

static int g_nrand_checked;

/* Random valid UTF-8: code points from many ranges (no surrogates, no U+2581, no '<' so no
 * special token can appear). */
static size_t random_text(tu_rng *r, char *out, size_t max_chars) {
    static const uint32_t ranges[][2] = {{0x20, 0x7e},       {0x00, 0x1f},     {0x80, 0x2ff},
                                         {0x370, 0x52f},     {0x4e00, 0x9fff}, {0x3000, 0x30ff},
                                         {0xac00, 0xd7a3},   {0xe000, 0xf8ff}, {0xfe00, 0xffff},
                                         {0x1f300, 0x1faff}, {0x20000, 0x2fa1f}, {0xe0000, 0x10ffff}};
    size_t nch = 1 + (size_t)(tu_uniform(r, 0, 1) * (float)max_chars), len = 0;
    for (size_t i = 0; i < nch; i++) {
        uint32_t cp;
        float u = tu_uniform(r, 0, 1);
        if (u < 0.25f) {
            cp = ' ';
        } else if (u < 0.55f) {
            cp = ranges[0][0] + (uint32_t)(tu_uniform(r, 0, 1) * 95);
        } else {
            int k = 1 + (int)(tu_uniform(r, 0, 1) * 11);
            if (k > 11) k = 11;
            cp = ranges[k][0] +
                 (uint32_t)(tu_uniform(r, 0, 1) * (float)(ranges[k][1] - ranges[k][0]));
        }
        if (cp == '<' || cp == 0x2581 || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) cp = 'x';
        char u8[4];
        int k;
        if (cp < 0x80) u8[0] = (char)cp, k = 1;
        else if (cp < 0x800) u8[0] = (char)(0xC0 | cp >> 6), u8[1] = (char)(0x80 | (cp & 63)), k = 2;
        else if (cp < 0x10000)
            u8[0] = (char)(0xE0 | cp >> 12), u8[1] = (char)(0x80 | (cp >> 6 & 63)),
            u8[2] = (char)(0x80 | (cp & 63)), k = 3;
        else
            u8[0] = (char)(0xF0 | cp >> 18), u8[1] = (char)(0x80 | (cp >> 12 & 63)),
            u8[2] = (char)(0x80 | (cp >> 6 & 63)), u8[3] = (char)(0x80 | (cp & 63)), k = 4;
        memcpy(out + len, u8, (size_t)k);
        len += (size_t)k;
    }
    out[len] = '\0';
    return len;
}

static void add_case(json_t *cases, const attn_tok *t, const char *s, size_t n) {
    size_t k, dl;
    int32_t *ids = enc(t, s, n, &k);
    char *d = dec(t, ids, k, 0, &dl);
    json_t *a = json_array();
    for (size_t j = 0; j < k; j++) json_array_append_new(a, json_integer(ids[j]));
    json_t *c = json_object();
    json_object_set_new(c, "text", json_stringn(s, n));
    json_object_set_new(c, "ids", a);
    json_object_set_new(c, "decode", json_stringn(d, dl));
    json_array_append_new(cases, c);
    attn_free(ids);
    attn_free(d);
}

static void test_train_corpus(void **state) {
    (void)state;
    corpus c;
    if (!corpus_load(&c)) tu_skip("%s not found", CORPUS);
    attn_tok_train_params p = attn_tok_train_default_params();
    p.vocab_size = 8000;
    attn_tok *t;
    double t0 = tu_now();
    if (attn_tok_train_bpe(&p, c.line, c.len, c.n, &t)) fail_msg("train: %s", attn_last_error());
    double secs = tu_now() - t0;
    printf("  trained on %zu texts (English and Chinese) in %.2f s: vocabulary %d\n", c.n, secs,
           attn_tok_vocab_size(t));
    assert_int_equal(attn_tok_vocab_size(t), 8000);
    assert_string_equal(attn_tok_model_type(t), "BPE");
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_PAD), 0);
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_UNK), 1);
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_BOS), 2);
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_EOS), 3);
    assert_int_equal(attn_tok_token_to_id(t, "<0x00>"), 4);
    assert_int_equal(attn_tok_token_to_id(t, "<0xFF>"), 259);
    assert_true(attn_tok_is_special(t, 2) && !attn_tok_is_special(t, 4));
    assert_string_equal(attn_tok_id_to_token(t, 3), "</s>");
    assert_true(attn_tok_token_to_id(t, "\xE2\x96\x81") >= 260); /* ▁ is in the alphabet */
    assert_true(attn_tok_token_to_id(t, "知") >= 260);

    /* save, reload, deterministic */
    const char *path = tu_tmp("trained.json");
    char path2[1024];
    snprintf(path2, sizeof path2, "%s", tu_tmp("trained2.json"));
    assert_int_equal(attn_tok_save(t, path), 0);
    attn_tok *t2 = NULL, *t3 = NULL;
    if (attn_tok_load(tu_dir, &t2) == 0) fail_msg("a directory without tokenizer.json loaded");
    if (attn_tok_load(path, &t2)) fail_msg("%s", attn_last_error());
    assert_int_equal(attn_tok_train_bpe(&p, c.line, c.len, c.n, &t3), 0);
    assert_int_equal(attn_tok_save(t3, path2), 0);
    size_t n1, n2;
    char *f1 = tu_read_all(path, &n1), *f2 = tu_read_all(path2, &n2);
    assert_true(n1 == n2 && !memcmp(f1, f2, n1));
    free(f1);
    free(f2);
    attn_tok_free(t3);

    /* every line round-trips; the reloaded tokenizer encodes identically */
    size_t tokens = 0, bytes = 0, rt_bad = 0;
    t0 = tu_now();
    for (size_t i = 0; i < c.n; i++) {
        size_t k, k2, dl;
        int32_t *ids = enc(t, c.line[i], c.len[i], &k);
        int32_t *ids2 = enc(t2, c.line[i], c.len[i], &k2);
        if (k != k2 || memcmp(ids, ids2, k * sizeof *ids)) fail_msg("reloaded differs on line %zu", i);
        char *d = dec(t2, ids, k, 0, &dl);
        if (dl != c.len[i] || memcmp(d, c.line[i], dl)) {
            if (++rt_bad <= 3) printf("  round trip: \"%.*s\" -> \"%s\"\n", (int)c.len[i], c.line[i], d);
        }
        tokens += k;
        bytes += c.len[i];
        attn_free(ids);
        attn_free(ids2);
        attn_free(d);
    }
    printf("  %zu/%zu texts round-trip exactly; %.2f bytes/token; encode+decode %.2f s\n",
           c.n - rt_bad, c.n, (double)bytes / (double)tokens, tu_now() - t0);
    assert_int_equal(rt_bad, 0);
    /* frequent words are whole tokens; punctuation is a token of its own */
    size_t k;
    const char *tom = "Tom is here.";
    int32_t *ids = enc(t, tom, strlen(tom), &k);
    assert_int_equal(k, 4);
    assert_int_equal(ids[0], attn_tok_token_to_id(t, "\xE2\x96\x81Tom"));
    assert_int_equal(ids[3], attn_tok_token_to_id(t, "."));
    attn_free(ids);
    attn_tok_free(t);
    attn_tok_free(t2);
    corpus_free(&c);
}

/* Python: tokenizers must load the C-written file of test_train_corpus's tokenizer (trained again
 * here: the training is deterministic, and takes under a second) and agree on ids and decodes. */
static void test_train_corpus_python(void **state) {
    (void)state;
    const char *py = py_path();
    if (!py) tu_skip(".venv/bin/python missing: run 'sh tools/install_deps.sh'");
    corpus c;
    if (!corpus_load(&c)) tu_skip("%s not found", CORPUS);
    attn_tok_train_params p = attn_tok_train_default_params();
    p.vocab_size = 8000;
    attn_tok *t, *t2;
    if (attn_tok_train_bpe(&p, c.line, c.len, c.n, &t)) fail_msg("train: %s", attn_last_error());
    const char *path = tu_tmp("trained_py.json");
    assert_int_equal(attn_tok_save(t, path), 0);
    if (attn_tok_load(path, &t2)) fail_msg("%s", attn_last_error());
    {
        json_t *cases = json_array();
        for (size_t i = 0; i < c.n; i += 14) add_case(cases, t2, c.line[i], c.len[i]);
        tu_rng r = {0x1234567u};
        char buf[4 * 200 + 1];
        for (int i = 0; i < 500; i++) add_case(cases, t2, buf, random_text(&r, buf, 60));
        static const char *const extra[] = {"", " ", "  x  ", "<s>hi</s>", "a<pad>b", "\t\n",
                                            "😀 emoji", "e\xCC\x81", "<0x41>"};
        for (size_t i = 0; i < sizeof extra / sizeof *extra; i++)
            add_case(cases, t2, extra[i], strlen(extra[i]));
        g_nrand_checked = (int)json_array_size(cases);
        json_t *spec = json_object();
        json_object_set_new(spec, "tokenizer", json_string(path));
        json_object_set_new(spec, "cases", cases);
        const char *cpath = tu_tmp("check_cases.json");
        assert_int_equal(json_dump_file(spec, cpath, JSON_COMPACT), 0);
        json_decref(spec);
        char cmd[3000];
        snprintf(cmd, sizeof cmd, "%s tools/check_tokenizer.py '%s'", py, cpath);
        fflush(stdout);
        int rc = system(cmd);
        if (rc != 0) fail_msg("tools/check_tokenizer.py failed (status %d)", rc);
    }
    attn_tok_free(t);
    attn_tok_free(t2);
    corpus_free(&c);
}

/* ---- random text round trip ---- */

static void test_random_roundtrip(void **state) {
    (void)state;
    double secs;
    size_t nl;
    attn_tok *t = train_default(4000, &secs, &nl);
    tu_rng r = {0xC0FFEEu};
    static char buf[4 * 400 + 1];
    size_t bad = 0, N = 3000;
    for (size_t i = 0; i < N; i++) {
        size_t n = random_text(&r, buf, 300), k, dl;
        int32_t *ids = enc(t, buf, n, &k);
        char *d = dec(t, ids, k, 0, &dl);
        if (dl != n || memcmp(d, buf, n)) {
            if (++bad <= 3) printf("  round trip failed on a %zu-byte text\n", n);
        }
        for (size_t j = 0; j < k; j++)
            if (ids[j] < 0 || ids[j] >= attn_tok_vocab_size(t)) fail_msg("id out of range");
        attn_free(ids);
        attn_free(d);
    }
    /* every single byte-fallback-prone character: all of the BMP but surrogates and U+2581 */
    for (uint32_t cp = 1; cp < 0x10000; cp++) {
        if ((cp >= 0xd800 && cp <= 0xdfff) || cp == 0x2581 || cp == '<') continue;
        char s[8];
        size_t n;
        if (cp < 0x80) s[0] = (char)cp, n = 1;
        else if (cp < 0x800) s[0] = (char)(0xC0 | cp >> 6), s[1] = (char)(0x80 | (cp & 63)), n = 2;
        else
            s[0] = (char)(0xE0 | cp >> 12), s[1] = (char)(0x80 | (cp >> 6 & 63)),
            s[2] = (char)(0x80 | (cp & 63)), n = 3;
        size_t k, dl;
        int32_t *ids = enc(t, s, n, &k);
        char *d = dec(t, ids, k, 0, &dl);
        if (dl != n || memcmp(d, s, n)) {
            if (++bad <= 6) printf("  U+%04X does not round-trip\n", (unsigned)cp);
        }
        attn_free(ids);
        attn_free(d);
    }
    printf("  %zu random texts and every BMP character round-trip (%zu failures)\n", N, bad);
    assert_int_equal(bad, 0);
    attn_tok_free(t);
}

/* ---- small hand-made tokenizers: the algorithm's corner cases ---- */

/* HF's own BPE unit-test vocabulary: merges apply by rank, not left to right. */
static const char small_json[] =
    "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null, \"pre_tokenizer\": null,"
    " \"decoder\": {\"type\": \"Fuse\"}, \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\","
    " \"fuse_unk\": %s, \"vocab\": {\"<unk>\": 0, \"u\": 1, \"n\": 2, \"r\": 3, \"e\": 4, \"l\": 5,"
    " \"a\": 6, \"t\": 7, \"d\": 8, \"re\": 9, \"at\": 10, \"ed\": 11, \"un\": 12, \"ated\": 13,"
    " \"rel\": 14, \"related\": 15, \"unrelated\": 16},"
    " \"merges\": [\"r e\", \"a t\", [\"e\", \"d\"], [\"u\", \"n\"], [\"at\", \"ed\"],"
    " [\"re\", \"l\"], [\"rel\", \"ated\"], [\"un\", \"related\"]]}}";

static void check_ids(const attn_tok *t, const char *s, const int32_t *want, size_t nw) {
    size_t k;
    int32_t *ids = enc(t, s, strlen(s), &k);
    if (k != nw || (nw && memcmp(ids, want, nw * sizeof *want))) {
        print_ids("got ", ids, k);
        print_ids("want", want, nw);
        fail_msg("encode(\"%s\")", s);
    }
    attn_free(ids);
}

static void test_small(void **state) {
    (void)state;
    char json[2048];
    attn_status st;
    snprintf(json, sizeof json, small_json, "false");
    attn_tok *t = load_mem(json, &st);
    if (!t) fail_msg("%s", attn_last_error());
    check_ids(t, "unrelated", (int32_t[]){16}, 1);
    check_ids(t, "related", (int32_t[]){15}, 1);
    check_ids(t, "dated", (int32_t[]){8, 13}, 2);
    check_ids(t, "rereed", (int32_t[]){9, 9, 11}, 3);
    check_ids(t, "uxxn", (int32_t[]){1, 0, 0, 2}, 4); /* unknowns, not fused */
    check_ids(t, "", NULL, 0);
    size_t dl;
    char *d = dec(t, (int32_t[]){16, 0, 8}, 3, 0, &dl);
    assert_string_equal(d, "unrelated<unk>d"); /* <unk> is not an added special token here */
    attn_free(d);
    attn_tok_free(t);
    snprintf(json, sizeof json, small_json, "true");
    t = load_mem(json, &st);
    assert_non_null(t);
    check_ids(t, "uxxn", (int32_t[]){1, 0, 2}, 3); /* fused */
    /* buffers: too small reports the size needed */
    int32_t ids[2];
    size_t n = 0;
    tu_expect_fail(attn_tok_encode(t, "uxxnu", 5, ids, 2, &n), ATTN_STATUS_INVALID_ARGUMENT,
                "ids buffer", NULL);
    assert_int_equal(n, 4);
    char small[4];
    tu_expect_fail(attn_tok_decode(t, (int32_t[]){16}, 1, 0, small, sizeof small, &dl),
                ATTN_STATUS_INVALID_ARGUMENT, "text buffer", NULL);
    assert_int_equal(dl, 9);
    char big[16];
    assert_int_equal(attn_tok_decode(t, (int32_t[]){16}, 1, 0, big, sizeof big, &dl), 0);
    assert_string_equal(big, "unrelated");
    /* no decoder: tokens joined by spaces */
    attn_tok_free(t);
    char *nodec = strdup(small_json);
    char *p = strstr(nodec, "{\"type\": \"Fuse\"}");
    memcpy(p, "null            ", 16);
    snprintf(json, sizeof json, nodec, "true");
    free(nodec);
    t = load_mem(json, &st);
    assert_non_null(t);
    d = dec(t, (int32_t[]){12, 15}, 2, 0, &dl);
    assert_string_equal(d, "un related");
    attn_free(d);
    attn_tok_free(t);
}

/* ---- bad input ---- */

static void bad_json(const char *json, attn_status want, const char *sub) {
    attn_status st;
    attn_tok *t = load_mem(json, &st);
    attn_tok_free(t);
    tu_expect_fail(st, want, "mem.json", sub);
}

#define TOKJ(added, norm, pre, dec, model)                                                       \
    "{\"added_tokens\": " added ", \"normalizer\": " norm ", \"pre_tokenizer\": " pre            \
    ", \"decoder\": " dec ", \"model\": " model "}"
#define BPE(vocab, merges) "{\"type\": \"BPE\", \"vocab\": " vocab ", \"merges\": " merges "}"
#define V3 "{\"a\": 0, \"b\": 1, \"ab\": 2}"

static void test_bad_input(void **state) {
    (void)state;
    const attn_status F = ATTN_STATUS_FORMAT, U = ATTN_STATUS_UNSUPPORTED;
    bad_json("", F, "not valid JSON");
    bad_json("{\"model\": ", F, "not valid JSON");
    bad_json("[1, 2]", F, "top level");
    bad_json("{\"version\": \"1.0\"}", F, "model: missing");
    bad_json("{\"model\": {\"vocab\": {}}}", F, "model.type");
    bad_json("{\"model\": {\"type\": \"WordPiece\", \"vocab\": []}}", F, "model.vocab");
    bad_json("{\"model\": {\"type\": \"WordLevel\"}}", F, "model.vocab: missing");
    bad_json("{\"model\": {\"type\": \"Unigram\"}}", F, "model.vocab: missing");
    bad_json("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", F, "model.vocab: empty");
    bad_json("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]], \"unk_id\": 5}}", F,
             "model.unk_id");
    bad_json("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0], [\"a\", -1.0]]}}", F,
             "listed twice");
    bad_json("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]], \"seed\": 1}}", U,
             "unknown Unigram field");
    bad_json("{\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"AAA\"}, "
             "\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}}", F, "not base64");
    bad_json("{\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"/////wAA\"}, "
             "\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}}", F, "trie size");
    bad_json("{\"model\": {\"type\": \"Sentencepiece\"}}", U, "Sentencepiece");
    bad_json("{\"model\": {\"type\": \"BPE\"}}", F, "model.vocab: missing");
    bad_json("{\"model\": {\"type\": \"BPE\", \"vocab\": [1]}}", F, "model.vocab");
    bad_json("{\"model\": " BPE("{\"a\": -1}", "[]") "}", F, "non-negative");
    bad_json("{\"model\": " BPE("{\"a\": 1.5}", "[]") "}", F, "vocab[\"a\"]");
    bad_json("{\"model\": " BPE("{\"a\": 99999999999}", "[]") "}", ATTN_STATUS_TOO_LARGE,
             "too large");
    bad_json("{\"model\": " BPE("{\"a\": 0, \"b\": 0}", "[]") "}", F, "id 0");
    bad_json("{\"model\": " BPE("{\"a\": 0, \"a\": 1}", "[]") "}", F, "duplicate");
    bad_json("{\"model\": " BPE(V3, "[[\"a\", \"c\"]]") "}", F, "merges[0]: token \"c\"");
    bad_json("{\"model\": " BPE(V3, "[\"a b\", \"b a\"]") "}", F, "merged token \"ba\"");
    bad_json("{\"model\": " BPE(V3, "[\"ab\"]") "}", F, "merges[0]");
    bad_json("{\"model\": " BPE(V3, "[[\"a\"]]") "}", F, "merges[0]");
    bad_json("{\"model\": " BPE(V3, "{}") "}", F, "model.merges");
    bad_json("{\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, \"vocab\": {}}}", U, "dropout");
    bad_json("{\"model\": {\"type\": \"BPE\", \"byte_fallback\": 1, \"vocab\": {}}}", F,
             "byte_fallback");
    bad_json("{\"model\": {\"type\": \"BPE\", \"unk_token\": 5, \"vocab\": {}}}", F, "unk_token");
    bad_json("{\"truncation\": {\"max_length\": 5}, \"model\": " BPE(V3, "[]") "}", F,
             "truncation.stride");
    bad_json("{\"padding\": {}, \"model\": " BPE(V3, "[]") "}", F, "padding.strategy");
    bad_json("{\"post_processor\": {\"type\": \"RobertaProcessing\"}, \"model\": " BPE(V3, "[]") "}",
             U, "post_processor");
    bad_json(TOKJ("[]", "{\"type\": \"Precompiled\"}", "null", "null", BPE(V3, "[]")), F,
             "precompiled_charsmap: missing");
    bad_json(TOKJ("[]", "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Nmt\"}]}",
                  "null", "null", BPE(V3, "[]")),
             U, "normalizer.normalizers[0]");
    /* a Regex pattern is accepted (SentencePiece conversions' " {2,}"); one PCRE2 cannot express
     * (class intersection) is refused */
    bad_json(TOKJ("[]", "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \"[a&&b]\"}, \"content\": \"\"}",
                  "null", "null", BPE(V3, "[]")),
             U, "regex");
    bad_json(TOKJ("[]", "{\"type\": \"Prepend\"}", "null", "null", BPE(V3, "[]")), F,
             "normalizer.prepend");
    bad_json(TOKJ("[]", "null", "{\"type\": \"UnicodeScripts\"}", "null", BPE(V3, "[]")), U,
             "UnicodeScripts");
    bad_json(TOKJ("[]", "null", "{\"type\": \"Digits\", \"individual_digits\": 1}", "null",
                  BPE(V3, "[]")),
             F, "pre_tokenizer.individual_digits");
    bad_json(TOKJ("[]", "null", "{\"type\": \"Metaspace\", \"replacement\": \"ab\"}", "null",
                  BPE(V3, "[]")),
             F, "single character");
    bad_json(TOKJ("[]", "null",
                  "{\"type\": \"Metaspace\", \"replacement\": \"_\", \"prepend_scheme\": \"x\"}",
                  "null", BPE(V3, "[]")),
             F, "prepend_scheme");
    bad_json(TOKJ("[]", "null", "null", "{\"type\": \"CTC\"}", BPE(V3, "[]")), U,
             "decoder type \"CTC\"");
    bad_json(TOKJ("[]", "null", "null", "{\"type\": \"Strip\", \"content\": \" \"}", BPE(V3, "[]")),
             F, "start");
    bad_json(TOKJ("[]", "null", "null", "{\"type\": 7}", BPE(V3, "[]")), F, "decoder.type");
    bad_json(TOKJ("{}", "null", "null", "null", BPE(V3, "[]")), F, "added_tokens");
    bad_json(TOKJ("[{\"id\": 5}]", "null", "null", "null", BPE(V3, "[]")), F, "added_tokens[0]");
    bad_json(TOKJ("[{\"id\": 1, \"content\": \"a\"}]", "null", "null", "null", BPE(V3, "[]")), F,
             "model.vocab says 0");
    bad_json(TOKJ("[{\"id\": 1, \"content\": \"<s>\"}]", "null", "null", "null", BPE(V3, "[]")), F,
             "belongs to \"b\"");
    bad_json(TOKJ("[{\"id\": 3, \"content\": \"<s>\"}, {\"id\": 3, \"content\": \"</s>\"}]", "null",
                  "null", "null", BPE(V3, "[]")),
             F, "used twice");
    bad_json(TOKJ("[{\"id\": 3, \"content\": \"<s>\", \"lstrip\": 1}]", "null", "null", "null",
                  BPE(V3, "[]")),
             F, "added_tokens[0].lstrip");

    /* files */
    attn_tok *t = (attn_tok *)1;
    tu_expect_fail(attn_tok_load(tu_tmp("no-such.json"), &t), ATTN_STATUS_IO, "no-such.json", NULL);
    tu_expect_fail(attn_tok_load("", &t), ATTN_STATUS_INVALID_ARGUMENT, NULL, NULL);

    /* encode / decode misuse */
    attn_status st;
    t = load_mem(TOKJ("[{\"id\": 3, \"content\": \"<s>\", \"special\": true}]", "null", "null",
                      "null", BPE(V3, "[[\"a\", \"b\"]]")),
                 &st);
    if (!t) fail_msg("%s", attn_last_error());
    check_ids(t, "ab<s>ba", (int32_t[]){2, 3, 1, 0}, 4);
    assert_int_equal(attn_tok_vocab_size(t), 4);
    int32_t *ids;
    size_t n;
    tu_expect_fail(attn_tok_encode_alloc(t, "a\xff", 2, &ids, &n), ATTN_STATUS_INVALID_ARGUMENT,
                "UTF-8", "offset 1");
    tu_expect_fail(attn_tok_encode_alloc(t, "\xe4\xbd", 2, &ids, &n), ATTN_STATUS_INVALID_ARGUMENT,
                "offset 0", NULL);
    tu_expect_fail(attn_tok_encode_alloc(t, "\xed\xa0\x80", 3, &ids, &n),
                ATTN_STATUS_INVALID_ARGUMENT, "UTF-8", NULL); /* a surrogate */
    tu_expect_fail(attn_tok_encode_alloc(t, "\xc0\x80", 2, &ids, &n), ATTN_STATUS_INVALID_ARGUMENT,
                "UTF-8", NULL); /* overlong NUL */
    char *s;
    size_t len;
    tu_expect_fail(attn_tok_decode_alloc(t, (int32_t[]){0, 4}, 2, 0, &s, &len),
                ATTN_STATUS_INVALID_ARGUMENT, "ids[1] = 4", NULL);
    tu_expect_fail(attn_tok_decode_alloc(t, (int32_t[]){-1}, 1, 0, &s, &len),
                ATTN_STATUS_INVALID_ARGUMENT, "ids[0] = -1", NULL);
    assert_null(attn_tok_id_to_token(t, 4));
    assert_null(attn_tok_id_to_token(t, -3));
    assert_int_equal(attn_tok_token_to_id(t, "zz"), -1);
    assert_int_equal(attn_tok_token_to_id(t, "<s>"), 3);
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_PAD), -1);
    attn_tok_free(t);

    /* an unk_token missing from the vocabulary is reported when it is needed */
    t = load_mem("{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"vocab\": " V3 "}}", &st);
    assert_non_null(t);
    tu_expect_fail(attn_tok_encode_alloc(t, "abc", 3, &ids, &n), ATTN_STATUS_FORMAT, "<unk>", NULL);
    attn_tok_free(t);

    /* training parameters and text */
    attn_tok_train_params p = attn_tok_train_default_params();
    const char *lines[] = {"hello", "wor\xffld"};
    tu_expect_fail(attn_tok_train_bpe(&p, lines, NULL, 2, &t), ATTN_STATUS_INVALID_ARGUMENT,
                "line 2", "UTF-8");
    p.vocab_size = 100;
    tu_expect_fail(attn_tok_train_bpe(&p, lines, NULL, 1, &t), ATTN_STATUS_INVALID_ARGUMENT,
                "vocab_size", NULL);
    p = attn_tok_train_default_params();
    p.unk_token = "[UNK]";
    tu_expect_fail(attn_tok_train_bpe(&p, lines, NULL, 1, &t), ATTN_STATUS_INVALID_ARGUMENT,
                "[UNK]", NULL);
    p = attn_tok_train_default_params();
    p.min_frequency = 0;
    tu_expect_fail(attn_tok_train_bpe(&p, lines, NULL, 1, &t), ATTN_STATUS_INVALID_ARGUMENT,
                "min_frequency", NULL);
    /* nothing to train on still gives a working (byte-level) tokenizer */
    p = attn_tok_train_default_params();
    assert_int_equal(attn_tok_train_bpe(&p, NULL, NULL, 0, &t), 0);
    assert_int_equal(attn_tok_vocab_size(t), 261); /* + "▁" */
    size_t k, dl;
    int32_t *e = enc(t, "héllo 世界", strlen("héllo 世界"), &k);
    char *d = dec(t, e, k, 0, &dl);
    assert_string_equal(d, "héllo 世界");
    attn_free(e);
    attn_free(d);
    attn_tok_free(t);
}

/* Training details: merges never cross words, rare characters stay out of the alphabet, a
 * merge that would spell an existing token is skipped. */
static void test_train_details(void **state) {
    (void)state;
    const char *lines[] = {"ab ab ab ab", "ab ab", "<0x4 1> <0x4 1> <0x4 1>", "zq zq zq zq zq", "q"};
    attn_tok_train_params p = attn_tok_train_default_params();
    p.vocab_size = 400;
    p.min_char_frequency = 2;
    attn_tok *t;
    assert_int_equal(attn_tok_train_bpe(&p, lines, NULL, 5, &t), 0);
    assert_true(attn_tok_token_to_id(t, "\xE2\x96\x81" "ab") >= 0);
    /* no token holds "▁" after its first character: merges stay inside words */
    for (int32_t id = 0; id < attn_tok_vocab_size(t); id++) {
        const char *s = attn_tok_id_to_token(t, id);
        if (s && strlen(s) > 3) assert_null(strstr(s + 1, "\xE2\x96\x81"));
    }
    const char *path = tu_tmp("details.json");
    assert_int_equal(attn_tok_save(t, path), 0);
    attn_tok *t2;
    assert_int_equal(attn_tok_load(path, &t2), 0);
    assert_int_equal(attn_tok_vocab_size(t), attn_tok_vocab_size(t2));
    const char *probe = "ab <0x4 1> zq q <0x41>";
    size_t k, dl;
    int32_t *ids = enc(t2, probe, strlen(probe), &k);
    char *d = dec(t2, ids, k, 0, &dl);
    assert_string_equal(d, probe);
    attn_free(ids);
    attn_free(d);
    attn_tok_free(t);
    attn_tok_free(t2);
}

/* ---- driver ---- */


int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "tok")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_train_details),
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_train_corpus),
        cmocka_unit_test(test_train_corpus_python),
        cmocka_unit_test(test_random_roundtrip),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}

/* test_tokenizer_spm.c — SentencePiece models, Unigram / Precompiled tokenizer.json files and the
 * translation tokenizers (attn_mt_tok: MarianTokenizer, NllbTokenizerFast), id for id and string
 * for string against the live references of tools/ref_tokenizer_spm.py (SentencePiece's own
 * trainer on Tatoeba English + Chinese; sentencepiece, transformers, tokenizers in .venv):
 *   test_spm_shim        raw SentencePieceProcessor ids and decodes (libsentencepiece vs PyPI's)
 *   test_tokenizer_json  T5, XLM-R and NLLB tokenizer.json files (Unigram and BPE, Precompiled,
 *                        Replace Regex, Strip, Metaspace, TemplateProcessing) vs tokenizers,
 *                        then the same after attn_tok_save and reload
 *   test_marian          MarianTokenizer: source and target ids, decode with and without specials
 *   test_nllb            NllbTokenizerFast: language pairs, legacy_behaviour, decodes
 *   test_decode_ids      decodes of arbitrary id runs, both flags
 *   test_bad_input       truncated / foreign .spm, bad vocab.json, unknown language codes
 * Without the references (no Tatoeba data, no venv) every test skips. */
#include "../src/tok/spm_shim.h"
#include "attn_tok.h"
#include "tu.h"
#include "tu_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static json_t *g_cases;

static json_t *cases(void) {
    if (!g_cases) g_cases = tu_tok_load_ref("spm_cases.json");
    return g_cases;
}

#define NEED_CASES()                                                                               \
    if (!cases())                                                                                  \
        tu_skip("%s missing (tools/ref_tokenizer_spm.py needs ../shared/data/tatoeba-eng-cmn and " \
                "the venv's sentencepiece)",                                                       \
                tu_ref_path("spm_cases.json"));

static const char *spm_dir(const char *sub) {
    static char p[1024];
    snprintf(p, sizeof p, "spm/%.300s", sub);
    return tu_ref_path(p); /* $ATTN_REF_DIR, else build/ref, as every test's references */
}

static json_t *text_of(int i) { return json_array_get(json_object_get(cases(), "texts"), (size_t)i); }

/* Report one mismatch (the first few of each test in full). */
static int g_shown;
static void mismatch(const char *what, const char *where, json_t *text, const int32_t *got,
                     size_t ng, json_t *want) {
    if (g_shown++ >= 12) return;
    printf("  MISMATCH %s %s text ", what, where);
    if (text) tu_tok_show(json_string_value(text), json_string_length(text));
    printf("\n");
    if (got) {
        size_t nw;
        int32_t *w = tu_tok_json_ids(want, &nw);
        print_ids("got ", got, ng);
        print_ids("want", w, nw);
        free(w);
    }
}

static void str_mismatch(const char *what, const char *where, const char *got, size_t n,
                         json_t *want) {
    if (g_shown++ >= 12) return;
    printf("  MISMATCH %s %s\n    got  ", what, where);
    tu_tok_show(got, n);
    printf("\n    want ");
    tu_tok_show(json_string_value(want), json_string_length(want));
    printf("\n");
}

static bool ids_match(const int32_t *got, size_t ng, json_t *want) {
    size_t nw;
    int32_t *w = tu_tok_json_ids(want, &nw);
    bool ok = tu_tok_ids_eq(got, ng, w, nw);
    free(w);
    return ok;
}

/* ---- raw SentencePiece ---- */

static void test_spm_shim(void **state) {
    (void)state;
    NEED_CASES();
    json_t *list = json_object_get(cases(), "spm");
    tok_spm *sp[2] = {0};
    const char *names[2] = {"uni.model", "bpe.model"};
    for (int k = 0; k < 2; k++) {
        size_t n;
        char *b = tu_read_all(spm_dir(names[k]), &n);
        assert_non_null(b);
        char err[256];
        if (tok_spm_load(b, n, &sp[k], err, sizeof err)) fail_msg("%s: %s", names[k], err);
        free(b);
    }
    assert_int_equal(tok_spm_model_type(sp[0]), 0);
    assert_int_equal(tok_spm_model_type(sp[1]), 1);
    size_t ok = 0, bad = 0;
    for (size_t c = 0; c < json_array_size(list); c++) {
        json_t *e = json_array_get(list, c);
        tok_spm *s = sp[strcmp(json_string_value(json_object_get(e, "model")), "uni.model") ? 1 : 0];
        int i = (int)json_integer_value(json_object_get(e, "i"));
        char err[256];
        bool good = true;
        if (i >= 0) {
            json_t *t = text_of(i);
            int32_t *ids;
            size_t k;
            if (tok_spm_encode(s, json_string_value(t), json_string_length(t), &ids, NULL, NULL, &k,
                               err, sizeof err))
                fail_msg("encode: %s", err);
            if (!ids_match(ids, k, json_object_get(e, "ids"))) {
                mismatch("spm encode", json_string_value(json_object_get(e, "model")), t, ids, k,
                         json_object_get(e, "ids"));
                good = false;
            }
            free(ids);
        }
        size_t nw;
        int32_t *w = tu_tok_json_ids(json_object_get(e, "ids"), &nw);
        char *txt;
        size_t tl;
        if (tok_spm_decode_ids(s, w, nw, &txt, &tl, err, sizeof err)) fail_msg("decode: %s", err);
        if (!tu_tok_str_eq(txt, tl, json_object_get(e, "decode"))) {
            str_mismatch("spm decode", json_string_value(json_object_get(e, "model")), txt, tl,
                         json_object_get(e, "decode"));
            good = false;
        }
        free(txt);
        free(w);
        good ? ok++ : bad++;
    }
    printf("  SentencePiece (libsentencepiece %s vs PyPI sentencepiece %s): %zu of %zu cases "
           "identical\n",
           "0.1.97", json_string_value(json_object_get(json_object_get(cases(), "versions"),
                                                       "sentencepiece")),
           ok, ok + bad);
    tok_spm_free(sp[0]);
    tok_spm_free(sp[1]);
    assert_int_equal(bad, 0);
}

/* ---- tokenizer.json ---- */

static attn_tok *load_json(const char *dir) {
    char p[1200];
    snprintf(p, sizeof p, "%.1024s/tokenizer.json", spm_dir(dir));
    attn_tok *t;
    if (attn_tok_load(p, &t)) fail_msg("%s: %s", p, attn_last_error());
    return t;
}

static size_t check_json_cases(attn_tok *t, const char *dir, size_t *total) {
    json_t *list = json_object_get(cases(), "json");
    size_t bad = 0;
    for (size_t c = 0; c < json_array_size(list); c++) {
        json_t *e = json_array_get(list, c);
        if (strcmp(json_string_value(json_object_get(e, "dir")), dir)) continue;
        json_t *txt = text_of((int)json_integer_value(json_object_get(e, "i")));
        size_t k;
        int32_t *ids = enc(t, json_string_value(txt), json_string_length(txt), &k);
        bool good = ids_match(ids, k, json_object_get(e, "ids"));
        if (!good) mismatch("tokenizer.json encode", dir, txt, ids, k, json_object_get(e, "ids"));
        for (int f = 0; f < 2; f++) {
            size_t l;
            char *s = dec(t, ids, k, f ? ATTN_TOK_DECODE_KEEP_SPECIAL : 0, &l);
            json_t *want = json_object_get(e, f ? "decode_keep" : "decode");
            if (good && !tu_tok_str_eq(s, l, want)) {
                str_mismatch(f ? "decode_keep" : "decode", dir, s, l, want);
                good = false;
            }
            attn_free(s);
        }
        attn_free(ids);
        (*total)++;
        bad += !good;
    }
    return bad;
}

static void test_tokenizer_json(void **state) {
    (void)state;
    NEED_CASES();
    static const char *dirs[] = {"t5_uni", "t5_bpe", "xlmr_uni", "nllb_uni", "nllb_bpe"};
    size_t bad = 0, total = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        attn_tok *t = load_json(dirs[d]);
        size_t t0 = total, b0 = bad;
        bad += check_json_cases(t, dirs[d], &total);
        /* saved and loaded back: the same ids and text */
        char p[1200];
        snprintf(p, sizeof p, "%.512s/%.100s.saved.json", tu_dir, dirs[d]);
        if (attn_tok_save(t, p)) fail_msg("save: %s", attn_last_error());
        attn_tok_free(t);
        if (attn_tok_load(p, &t)) fail_msg("reload %s: %s", p, attn_last_error());
        bad += check_json_cases(t, dirs[d], &total);
        attn_tok_free(t);
        printf("  %-9s %s: %zu of %zu cases identical (loaded, then saved and reloaded)\n",
               dirs[d], "tokenizer.json", (total - t0) - (bad - b0), total - t0);
    }
    assert_int_equal(bad, 0);
}

/* ---- translation tokenizers ---- */

static attn_mt_tok *load_mt(const char *dir) {
    attn_mt_tok *t;
    if (attn_mt_tok_load(spm_dir(dir), &t)) fail_msg("%s: %s", dir, attn_last_error());
    return t;
}

static bool check_mt(attn_mt_tok *t, const char *dir, json_t *e, const char *sl, const char *tl) {
    json_t *txt = text_of((int)json_integer_value(json_object_get(e, "i")));
    const char *s = json_string_value(txt);
    size_t n = json_string_length(txt), k;
    int32_t *ids;
    bool good = true;
    if (attn_mt_tok_encode_source(t, sl, s, n, &ids, &k)) fail_msg("%s", attn_last_error());
    if (!ids_match(ids, k, json_object_get(e, "src"))) {
        mismatch("source", dir, txt, ids, k, json_object_get(e, "src"));
        good = false;
    }
    attn_free(ids);
    if (attn_mt_tok_encode_target(t, tl, s, n, &ids, &k)) fail_msg("%s", attn_last_error());
    if (!ids_match(ids, k, json_object_get(e, "tgt"))) {
        mismatch("target", dir, txt, ids, k, json_object_get(e, "tgt"));
        good = false;
    }
    attn_free(ids);
    size_t nw;
    int32_t *w = tu_tok_json_ids(json_object_get(e, "tgt"), &nw);
    for (int f = 0; f < 2; f++) {
        char *out;
        size_t l;
        if (attn_mt_tok_decode(t, w, nw, f ? ATTN_TOK_DECODE_KEEP_SPECIAL : 0, &out, &l))
            fail_msg("%s", attn_last_error());
        json_t *want = json_object_get(e, f ? "decode_keep" : "decode");
        if (!tu_tok_str_eq(out, l, want)) {
            str_mismatch(f ? "decode_keep" : "decode", dir, out, l, want);
            good = false;
        }
        attn_free(out);
    }
    free(w);
    return good;
}

static void test_marian(void **state) {
    (void)state;
    NEED_CASES();
    json_t *list = json_object_get(cases(), "marian");
    static const char *dirs[] = {"marian_shared", "marian_sep"};
    size_t bad = 0, total = 0;
    for (int d = 0; d < 2; d++) {
        attn_mt_tok *t = load_mt(dirs[d]);
        assert_int_equal(attn_mt_tok_kind_of(t), ATTN_MT_TOK_MARIAN);
        size_t b0 = bad, t0 = total;
        for (size_t c = 0; c < json_array_size(list); c++) {
            json_t *e = json_array_get(list, c);
            if (strcmp(json_string_value(json_object_get(e, "dir")), dirs[d])) continue;
            bad += !check_mt(t, dirs[d], e, NULL, NULL);
            total++;
        }
        printf("  %-14s MarianTokenizer: %zu of %zu texts identical (source ids, target ids, "
               "decodes)\n",
               dirs[d], (total - t0) - (bad - b0), total - t0);
        int32_t id;
        assert_int_equal(attn_mt_tok_lang_id(t, ">>fra<<", &id), ATTN_STATUS_OK);
        assert_int_equal(attn_mt_tok_lang_id(t, ">>xyz<<", &id), ATTN_STATUS_INVALID_ARGUMENT);
        printf("    unknown code: %s\n", attn_last_error());
        assert_true(attn_mt_tok_special_id(t, ATTN_TOK_PAD) ==
                    attn_mt_tok_vocab_size(t, false) - 1);
        attn_mt_tok_free(t);
    }
    assert_int_equal(bad, 0);
}

static void test_nllb(void **state) {
    (void)state;
    NEED_CASES();
    json_t *list = json_object_get(cases(), "nllb");
    static const char *dirs[] = {"nllb_uni", "nllb_bpe", "nllb_uni_legacy"};
    size_t bad = 0, total = 0;
    for (int d = 0; d < 3; d++) {
        attn_mt_tok *t = load_mt(dirs[d]);
        assert_int_equal(attn_mt_tok_kind_of(t), ATTN_MT_TOK_NLLB);
        size_t b0 = bad, t0 = total;
        for (size_t c = 0; c < json_array_size(list); c++) {
            json_t *e = json_array_get(list, c);
            if (strcmp(json_string_value(json_object_get(e, "dir")), dirs[d])) continue;
            bad += !check_mt(t, dirs[d], e, json_string_value(json_object_get(e, "src_lang")),
                             json_string_value(json_object_get(e, "tgt_lang")));
            total++;
        }
        printf("  %-16s NllbTokenizerFast: %zu of %zu (text, language pair) identical\n", dirs[d],
               (total - t0) - (bad - b0), total - t0);
        int32_t id;
        assert_int_equal(attn_mt_tok_lang_id(t, "zho_Hans", &id), ATTN_STATUS_OK);
        assert_string_equal(attn_mt_tok_id_to_token(t, id, true), "zho_Hans");
        int32_t *ids;
        size_t k;
        assert_int_equal(attn_mt_tok_encode_source(t, "xxx_Latn", "a", 1, &ids, &k),
                         ATTN_STATUS_INVALID_ARGUMENT);
        printf("    unknown code: %s\n", attn_last_error());
        assert_null(strchr(attn_last_error(), '\n'));
        assert_int_equal(attn_mt_tok_encode_source(t, "</s>", "a", 1, &ids, &k),
                         ATTN_STATUS_INVALID_ARGUMENT);
        /* no tgt_lang configured: the target side needs one */
        assert_int_equal(attn_mt_tok_encode_target(t, NULL, "a", 1, &ids, &k),
                         ATTN_STATUS_INVALID_ARGUMENT);
        attn_mt_tok_free(t);
    }
    assert_int_equal(bad, 0);
}

static void test_decode_ids(void **state) {
    (void)state;
    NEED_CASES();
    json_t *list = json_object_get(cases(), "decode_ids");
    size_t bad = 0;
    for (size_t c = 0; c < json_array_size(list); c++) {
        json_t *e = json_array_get(list, c);
        const char *dir = json_string_value(json_object_get(e, "dir"));
        size_t nw;
        int32_t *w = tu_tok_json_ids(json_object_get(e, "ids"), &nw);
        bool is_json = strstr(dir, "/tokenizer.json") != NULL;
        attn_mt_tok *mt = NULL;
        attn_tok *tk = NULL;
        if (is_json) {
            char d2[256];
            snprintf(d2, sizeof d2, "%.*s", (int)(strstr(dir, "/tokenizer.json") - dir), dir);
            tk = load_json(d2);
        } else {
            mt = load_mt(dir);
        }
        bool good = true;
        for (int f = 0; f < 2; f++) {
            char *out;
            size_t l;
            unsigned fl = f ? ATTN_TOK_DECODE_KEEP_SPECIAL : 0;
            attn_status st = mt ? attn_mt_tok_decode(mt, w, nw, fl, &out, &l)
                                : attn_tok_decode_alloc(tk, w, nw, fl, &out, &l);
            if (st) fail_msg("%s: %s", dir, attn_last_error());
            json_t *want = json_object_get(e, f ? "decode_keep" : "decode");
            if (!tu_tok_str_eq(out, l, want)) {
                str_mismatch(f ? "decode_keep ids" : "decode ids", dir, out, l, want);
                print_ids("ids", w, nw);
                good = false;
            }
            attn_free(out);
        }
        bad += !good;
        attn_mt_tok_free(mt);
        attn_tok_free(tk);
        free(w);
    }
    printf("  decodes of arbitrary ids: %zu of %zu identical\n", json_array_size(list) - bad,
           json_array_size(list));
    assert_int_equal(bad, 0);
}

/* ---- bad input ---- */

static void write_file(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* A Marian directory in tu_dir/name from the reference's files, with one file replaced. */
static const char *marian_with(const char *name, const char *file, const void *b, size_t n) {
    static char d[1200];
    snprintf(d, sizeof d, "%.512s/%.100s", tu_dir, name);
    mkdir(d, 0755);
    static const char *files[] = {"source.spm", "target.spm", "vocab.json",
                                  "tokenizer_config.json"};
    for (int i = 0; i < 4; i++) {
        char p[1400];
        snprintf(p, sizeof p, "%.1200s/%.100s", d, files[i]);
        if (!strcmp(files[i], file)) {
            write_file(p, b, n);
        } else {
            char src[300];
            snprintf(src, sizeof src, "marian_shared/%.100s", files[i]);
            size_t m;
            char *c = tu_read_all(spm_dir(src), &m);
            assert_non_null(c);
            write_file(p, c, m);
            free(c);
        }
    }
    return d;
}

static void expect_error(const char *d, attn_status want, const char *what) {
    attn_mt_tok *t = NULL;
    attn_status st = attn_mt_tok_load(d, &t);
    printf("    %-34s -> %s\n", what, st ? attn_last_error() : "(loaded)");
    assert_null(t);
    assert_int_equal(st, want);
    assert_null(strchr(attn_last_error(), '\n'));
}

static void test_bad_input(void **state) {
    (void)state;
    NEED_CASES();
    size_t n;
    char *spm = tu_read_all(spm_dir("uni.model"), &n);
    assert_non_null(spm);
    expect_error(marian_with("trunc", "source.spm", spm, n / 2), ATTN_STATUS_FORMAT,
                 "source.spm cut in half");
    expect_error(marian_with("trunc1", "target.spm", spm, 7), ATTN_STATUS_FORMAT,
                 "target.spm of 7 bytes");
    expect_error(marian_with("empty", "source.spm", "", 0), ATTN_STATUS_FORMAT, "empty source.spm");
    const char *js = "{\"not\": \"a model\"}";
    expect_error(marian_with("foreign", "source.spm", js, strlen(js)), ATTN_STATUS_FORMAT,
                 "a JSON file as source.spm");
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    expect_error(marian_with("png", "target.spm", png, sizeof png), ATTN_STATUS_FORMAT,
                 "a PNG header as target.spm");
    const char *v1 = "{\"</s>\": 0, \"<pad>\": 1}";
    expect_error(marian_with("nounk", "vocab.json", v1, strlen(v1)), ATTN_STATUS_FORMAT,
                 "vocab.json without <unk>");
    const char *v2 = "{\"</s>\": 0, \"<unk>\": 1, \"<pad>\": 1}";
    expect_error(marian_with("dup", "vocab.json", v2, strlen(v2)), ATTN_STATUS_FORMAT,
                 "vocab.json with one id twice");
    const char *v3 = "[\"</s>\", \"<unk>\"]";
    expect_error(marian_with("arr", "vocab.json", v3, strlen(v3)), ATTN_STATUS_FORMAT,
                 "vocab.json as an array");
    const char *v4 = "{\"</s>\": 0, \"<unk>\": -1, \"<pad>\": 2}";
    expect_error(marian_with("neg", "vocab.json", v4, strlen(v4)), ATTN_STATUS_FORMAT,
                 "vocab.json with a negative id");
    const char *c1 = "{\"separate_vocabs\": true}";
    expect_error(marian_with("sep", "tokenizer_config.json", c1, strlen(c1)), ATTN_STATUS_FORMAT,
                 "separate_vocabs, no target_vocab.json");
    /* an unknown group field (wire type 3: field 14 start 0x73 .. end 0x74) first: protobuf
     * skips it and SentencePiece would load the model, so attn's charsmap check must walk past it
     * too — a walk that cannot (here: a group without its end, which protobuf refuses as well, and
     * a nested group, which it accepts) must not let an unchecked model through
     * (fuzz/regress/spm/crash-fef338ea...) */
    {
        char err[256];
        tok_spm *sp = NULL;
        char *g = malloc(n + 4);
        assert_non_null(g);
        static const unsigned char grp[4] = {0x73, 0x73, 0x74, 0x74}; /* {14: {14: {}}} */
        memcpy(g, grp, 4), memcpy(g + 4, spm, n);
        assert_int_equal(tok_spm_load(g, n + 4, &sp, err, sizeof err), 0); /* walked: loads */
        tok_spm_free(sp), sp = NULL;
        g[2] = 0x7c; /* end of field 15: the group never ends */
        assert_int_not_equal(tok_spm_load(g, n + 4, &sp, err, sizeof err), 0);
        printf("  group without its end: %s\n", err);
        assert_null(sp);
        free(g);
        /* 70 nested groups: protobuf takes them (its limit is 100), attn's walk stops at 64 */
        g = malloc(n + 140);
        assert_non_null(g);
        memset(g, 0x73, 70), memset(g + 70, 0x74, 70), memcpy(g + 140, spm, n);
        const int rc = tok_spm_load(g, n + 140, &sp, err, sizeof err);
        printf("  70 nested groups: %s\n", rc ? err : "loaded");
        assert_int_not_equal(rc, 0);
        assert_non_null(strstr(err, "cannot be checked"));
        free(g);
    }
    free(spm);
    /* an NLLB tokenizer_config.json naming a language the tokenizer lacks */
    char d[1200], p[1400];
    snprintf(d, sizeof d, "%.512s/nllb_bad", tu_dir);
    mkdir(d, 0755);
    char *tj = tu_read_all(spm_dir("nllb_uni/tokenizer.json"), &n);
    assert_non_null(tj);
    snprintf(p, sizeof p, "%.1200s/tokenizer.json", d);
    write_file(p, tj, n);
    free(tj);
    const char *c2 = "{\"src_lang\": \"klingon\"}";
    snprintf(p, sizeof p, "%.1200s/tokenizer_config.json", d);
    write_file(p, c2, strlen(c2));
    expect_error(d, ATTN_STATUS_INVALID_ARGUMENT, "NLLB src_lang unknown");
    /* invalid UTF-8 */
    attn_mt_tok *t = load_mt("marian_shared");
    int32_t *ids;
    size_t k;
    assert_int_equal(attn_mt_tok_encode_source(t, NULL, "a\xff", 2, &ids, &k),
                     ATTN_STATUS_INVALID_ARGUMENT);
    int32_t badid = 1 << 20;
    char *out;
    assert_int_equal(attn_mt_tok_decode(t, &badid, 1, 0, &out, &k), ATTN_STATUS_INVALID_ARGUMENT);
    attn_mt_tok_free(t);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "spm")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_shim),   cmocka_unit_test(test_tokenizer_json),
        cmocka_unit_test(test_marian),     cmocka_unit_test(test_nllb),
        cmocka_unit_test(test_decode_ids), cmocka_unit_test(test_bad_input),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(g_cases);
    tu_rm_tree(tu_dir);
    return r;
}

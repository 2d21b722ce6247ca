/* test_tokenizer_added.c — added and special tokens as Hugging Face `tokenizers` 0.21.4 handles
 * them, and the rule for U+0000 in tokenizer strings:
 *
 *   flags       tools/ref_tokenizer_added.py (run by tests/run.sh into $ATTN_REF_DIR) gives a
 *               small BPE in four pipelines (Llama 2's normalizer, Mistral's Metaspace, Llama 3's
 *               byte level, Lowercase + NFKC) ten added tokens that overlap, look like words,
 *               hold whitespace or case, with every combination of the flags single_word,
 *               lstrip, rstrip, normalized and special (and two mixed sets): 136 tokenizers, 65
 *               texts each. Ids with and without special tokens and decodes with and without
 *               skip_special_tokens must be identical; the tokenizer saved and loaded again too.
 *   nul         every tokenizer.json field whose string becomes a token or a pattern, with a
 *               U+0000 in it: refused with ATTN_STATUS_UNSUPPORTED naming the field (one line),
 *               while the same file without the NUL loads (a table, one row per field); names
 *               (types, behaviors, schemes) with a NUL inside are unknown names.
 *   regress     the fuzzer's crash input of issue 21 (fuzz/regress/tokenizer/added-token-nul):
 *               an added token "<|\u0000ex{t|>" is refused. */
#include "attn_tok.h"
#include "tu.h"
#include "tu_tok.h"

static attn_status load_mem(const char *js, size_t n, attn_tok **t) {
    attn_reader r;
    assert_int_equal(attn_reader_open_memory(js, n, "mem.json", &r), 0);
    return attn_tok_load_reader(r, t);
}

/* The cases of one variant through t; returns the mismatches. A case where tokenizers panics
 * only has to encode without error here. */
static size_t check_variant(const char *name, const attn_tok *t, json_t *cases, size_t *panics) {
    size_t bad = 0, shown = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        if (json_object_get(c, "panic")) {
            json_t *text = json_object_get(c, "text");
            size_t k, kp;
            attn_free(enc(t, json_string_value(text), json_string_length(text), &k));
            free(tu_tok_enc_plain(t, json_string_value(text), json_string_length(text), &kp));
            ++*panics;
            continue;
        }
        bad += !tu_tok_case(name, t, NULL, c, &shown);
    }
    return bad;
}

static void test_flags(void **state) {
    (void)state;
    json_t *root = tu_tok_load_ref("added_cases.json");
    if (!root)
        tu_skip("%s missing (tools/ref_tokenizer_added.py)", tu_ref_path("added_cases.json"));
    json_t *variants = json_object_get(root, "variants");
    size_t nv = json_array_size(variants), total = 0, bad = 0, bad_variants = 0, panics = 0;
    /* under valgrind: every 8th variant (all four pipelines, a spread of flags) */
    const size_t step = tu_valgrind() ? 8 : 1;
    for (size_t v = 0; v < nv; v += step) {
        json_t *var = json_array_get(variants, v);
        const char *name = json_string_value(json_object_get(var, "name"));
        json_t *tj = json_object_get(var, "tokenizer");
        attn_tok *t, *t2;
        if (load_mem(json_string_value(tj), json_string_length(tj), &t)) {
            printf("  %s: does not load: %s\n", name, attn_last_error());
            bad_variants++;
            continue;
        }
        json_t *cases = json_object_get(var, "cases");
        size_t vb = check_variant(name, t, cases, &panics);
        /* saved and loaded again: the flags survive */
        if (attn_tok_save(t, tu_tmp("added.json"))) fail_msg("save: %s", attn_last_error());
        if (attn_tok_load(tu_tmp("added.json"), &t2)) fail_msg("reload: %s", attn_last_error());
        size_t p2 = 0;
        vb += check_variant(name, t2, cases, &p2);
        total += json_array_size(cases);
        bad += vb;
        bad_variants += vb != 0;
        attn_tok_free(t);
        attn_tok_free(t2);
    }
    printf("  added tokens (tokenizers %s): %zu tokenizers, %zu texts: %zu differ (%zu texts "
           "where tokenizers panics, encoded without error)\n",
           json_string_value(json_object_get(root, "version")), (nv + step - 1) / step, total, bad,
           panics);
    json_decref(root);
    assert_true(total > 0);
    assert_int_equal(bad_variants, 0);
    assert_int_equal(bad, 0);
}

/* ---- U+0000 in tokenizer strings --------------------------------------------------------------
 * One tokenizer.json with every kind of string field (a WordPiece decoder and model are in the
 * second one), each written as @FIELD@ placeholder text; a row puts a NUL into one field. */
static const char *const TOK_BPE =
    "{\"version\": \"1.0\", \"truncation\": null,"
    " \"padding\": {\"strategy\": \"BatchLongest\", \"direction\": \"Right\", \"pad_to_multiple_of\":"
    " null, \"pad_id\": 0, \"pad_type_id\": 0, \"pad_token\": \"@PAD@\"},"
    " \"added_tokens\": [{\"id\": 5, \"content\": \"@ADDED@\", \"special\": true}],"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\":"
    " \"@PREPEND@\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \"@NPAT@\"}, \"content\":"
    " \"@NCONTENT@\"}]},"
    " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\","
    " \"pattern\": {\"String\": \"@SPLIT@\"}, \"behavior\": \"@BEHAVIOR@\", \"invert\": false},"
    " {\"type\": \"Split\", \"pattern\": {\"Regex\": \"@REGEX@\"}, \"behavior\": \"Isolated\","
    " \"invert\": false}, {\"type\": \"Metaspace\", \"replacement\": \"@MSREP@\","
    " \"prepend_scheme\": \"@SCHEME@\", \"split\": false}]},"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\":"
    " {\"id\": \"@TPLNAME@\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"@SEQID@\", \"type_id\": 0}}],"
    " \"pair\": [{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"B\","
    " \"type_id\": 1}}], \"special_tokens\": {\"s\": {\"id\": \"@TPLNAME@\", \"ids\": [4],"
    " \"tokens\": [\"@TPLTOKEN@\"]}}},"
    " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\":"
    " {\"String\": \"@DPAT@\"}, \"content\": \"@DCONTENT@\"}, {\"type\": \"Strip\", \"content\":"
    " \"@STRIP@\", \"start\": 1, \"stop\": 0}, {\"type\": \"Metaspace\", \"replacement\": \"@DMSREP@\","
    " \"prepend_scheme\": \"always\", \"split\": true}, {\"type\": \"@DTYPE@\"}]},"
    " \"model\": {\"type\": \"BPE\", \"unk_token\": \"@UNK@\", \"continuing_subword_prefix\":"
    " \"@PREFIX@\", \"end_of_word_suffix\": \"@SUFFIX@\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2,"
    " \"<unk>\": 3, \"<s>\": 4, \"@KEY@\": 6}, \"merges\": [\"@MERGE@\"]}}";

static const char *const TOK_WP =
    "{\"added_tokens\": [], \"normalizer\": null, \"pre_tokenizer\": null, \"post_processor\":"
    " {\"type\": \"BertProcessing\", \"sep\": [\"@SEP@\", 1], \"cls\": [\"@CLS@\", 0]},"
    " \"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"@DPREFIX@\", \"cleanup\": true},"
    " \"model\": {\"type\": \"@MTYPE@\", \"unk_token\": \"@WUNK@\", \"continuing_subword_prefix\":"
    " \"@WPREFIX@\", \"vocab\": {\"[CLS]\": 0, \"[SEP]\": 1, \"[UNK]\": 2, \"a\": 3}}}";

typedef struct {
    const char *field;  /* the placeholder */
    const char *clean;  /* its value in a file that loads */
    const char *nul;    /* the same with a NUL (a JSON escape) */
    attn_status want;   /* for the NUL version */
    const char *where;  /* the message must name this (the field) */
} nul_row;

static const nul_row BPE_ROWS[] = {
    {"@PAD@", "<pad>", "<pa\\u0000d>", ATTN_STATUS_UNSUPPORTED, "padding.pad_token"},
    {"@ADDED@", "<|x|>", "<|\\u0000ex{t|>", ATTN_STATUS_UNSUPPORTED, "added_tokens[0].content"},
    {"@PREPEND@", "_", "_\\u0000", ATTN_STATUS_UNSUPPORTED, "normalizer.normalizers[0].prepend"},
    {"@NPAT@", " ", "\\u0000", ATTN_STATUS_UNSUPPORTED,
     "normalizer.normalizers[1].pattern.String"},
    {"@NCONTENT@", "_", "\\u0000_", ATTN_STATUS_UNSUPPORTED, "normalizer.normalizers[1].content"},
    {"@SPLIT@", "-", "-\\u0000", ATTN_STATUS_UNSUPPORTED,
     "pre_tokenizer.pretokenizers[0].pattern.String"},
    {"@REGEX@", "\\\\s+", "\\\\s+\\u0000", ATTN_STATUS_UNSUPPORTED,
     "pre_tokenizer.pretokenizers[1].pattern.Regex"},
    {"@MSREP@", "_", "\\u0000", ATTN_STATUS_UNSUPPORTED,
     "pre_tokenizer.pretokenizers[2].replacement"},
    {"@TPLNAME@", "<s>", "<s\\u0000>", ATTN_STATUS_UNSUPPORTED, "post_processor.special_tokens"},
    {"@TPLTOKEN@", "<s>", "<s>\\u0000", ATTN_STATUS_UNSUPPORTED, "post_processor.special_tokens"},
    {"@DPAT@", "_", "_\\u0000", ATTN_STATUS_UNSUPPORTED, "decoder.decoders[0].pattern.String"},
    {"@DCONTENT@", " ", "\\u0000", ATTN_STATUS_UNSUPPORTED, "decoder.decoders[0].content"},
    {"@STRIP@", " ", "\\u0000", ATTN_STATUS_UNSUPPORTED, "decoder.decoders[1].content"},
    {"@DMSREP@", "_", "\\u0000", ATTN_STATUS_UNSUPPORTED, "decoder.decoders[2].replacement"},
    {"@UNK@", "<unk>", "<unk\\u0000>", ATTN_STATUS_UNSUPPORTED, "model.unk_token"},
    {"@PREFIX@", "", "\\u0000", ATTN_STATUS_UNSUPPORTED, "model.continuing_subword_prefix"},
    {"@SUFFIX@", "", "\\u0000", ATTN_STATUS_UNSUPPORTED, "model.end_of_word_suffix"},
    {"@KEY@", "c", "c\\u0000", ATTN_STATUS_UNSUPPORTED, "an object key holds U+0000"},
    {"@MERGE@", "a b", "a b\\u0000", ATTN_STATUS_UNSUPPORTED, "model.merges[0]"},
    /* names with a NUL inside are no names */
    {"@BEHAVIOR@", "Isolated", "Isolated\\u0000", ATTN_STATUS_FORMAT,
     "pretokenizers[0].behavior"},
    {"@SCHEME@", "first", "first\\u0000x", ATTN_STATUS_FORMAT, "prepend_scheme"},
    {"@SEQID@", "A", "A\\u0000", ATTN_STATUS_FORMAT, "Sequence.id"},
    {"@DTYPE@", "Fuse", "Fuse\\u0000", ATTN_STATUS_UNSUPPORTED, "decoder.decoders[3].type"},
};

static const nul_row WP_ROWS[] = {
    {"@SEP@", "[SEP]", "[SEP]\\u0000", ATTN_STATUS_UNSUPPORTED, "post_processor.sep"},
    {"@CLS@", "[CLS]", "\\u0000[CLS]", ATTN_STATUS_UNSUPPORTED, "post_processor.cls"},
    {"@DPREFIX@", "##", "#\\u0000#", ATTN_STATUS_UNSUPPORTED, "decoder.prefix"},
    {"@WUNK@", "[UNK]", "[UNK\\u0000]", ATTN_STATUS_UNSUPPORTED, "model.unk_token"},
    {"@WPREFIX@", "##", "##\\u0000", ATTN_STATUS_UNSUPPORTED, "model.continuing_subword_prefix"},
    {"@MTYPE@", "WordPiece", "WordPiece\\u0000", ATTN_STATUS_UNSUPPORTED, "model.type"},
};

/* tpl with every placeholder of rows replaced by its clean value, and row `nul` (or none, when
 * nul is the row count) by its NUL value. */
static char *fill(const char *tpl, const nul_row *rows, size_t n, size_t nul) {
    size_t cap = strlen(tpl) * 2 + 1024, len = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    for (const char *p = tpl; *p;) {
        size_t r = 0;
        while (r < n && strncmp(p, rows[r].field, strlen(rows[r].field))) r++;
        if (r == n) {
            out[len++] = *p++;
            continue;
        }
        const char *v = r == nul ? rows[r].nul : rows[r].clean;
        memcpy(out + len, v, strlen(v));
        len += strlen(v);
        p += strlen(rows[r].field);
    }
    out[len] = '\0';
    return out;
}

static void nul_table(const char *tpl, const nul_row *rows, size_t n, size_t *checked) {
    char *clean = fill(tpl, rows, n, n);
    attn_tok *t;
    if (load_mem(clean, strlen(clean), &t)) fail_msg("clean file: %s\n%s", attn_last_error(), clean);
    attn_tok_free(t);
    for (size_t r = 0; r < n; r++) {
        char *js = fill(tpl, rows, n, r);
        attn_tok *x = (attn_tok *)1;
        attn_status st = load_mem(js, strlen(js), &x);
        const char *msg = attn_last_error();
        if (st != rows[r].want || !strstr(msg, rows[r].where) || strchr(msg, '\n') || x) {
            printf("  %s: status %d (want %d), message: %s\n", rows[r].field, (int)st,
                   (int)rows[r].want, st ? msg : "(loaded)");
            tu_failures++;
        } else {
            printf("  [%s] %s\n", attn_status_str(st), msg);
        }
        if (!st) attn_tok_free(x);
        free(js);
        ++*checked;
    }
    free(clean);
}

static void test_nul(void **state) {
    (void)state;
    size_t checked = 0;
    nul_table(TOK_BPE, BPE_ROWS, sizeof BPE_ROWS / sizeof BPE_ROWS[0], &checked);
    nul_table(TOK_WP, WP_ROWS, sizeof WP_ROWS / sizeof WP_ROWS[0], &checked);
    printf("  U+0000: %zu fields refused, each named\n", checked);
    /* WordLevel's unk_token too, and vocab.json keys of attn_tok_load_vocab_merges */
    static const char wl[] = "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"a\": 0},"
                             " \"unk_token\": \"a\\u0000\"}}";
    attn_tok *t;
    tu_expect_fail(load_mem(wl, strlen(wl), &t), ATTN_STATUS_UNSUPPORTED, "model.unk_token",
                   "U+0000");
    /* fields outside the two tables: Unigram pieces, a merge as a pair, a Replace normalizer's
     * Regex, and option names (truncation, padding), which a NUL makes unknown */
#define WL "\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"a\": 0, \"<unk>\": 1}, " \
           "\"unk_token\": \"<unk>\"}"
    static const struct {
        const char *json;
        attn_status want;
        const char *where;
    } more[] = {
        {"{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0.0],"
         " [\"a\\u0000\", -1.0]]}}",
         ATTN_STATUS_UNSUPPORTED, "model.vocab[1]"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
         " \"merges\": [[\"a\", \"b\\u0000\"]]}}",
         ATTN_STATUS_UNSUPPORTED, "model.merges[0]"},
        {"{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"a\\u0000\"},"
         " \"content\": \"b\"}, " WL "}",
         ATTN_STATUS_UNSUPPORTED, "normalizer.pattern.Regex"},
        {"{\"truncation\": {\"max_length\": 4, \"stride\": 0, \"strategy\":"
         " \"OnlyFirst\\u0000\"}, " WL "}",
         ATTN_STATUS_FORMAT, "truncation.strategy"},
        {"{\"truncation\": {\"max_length\": 4, \"stride\": 0, \"strategy\": \"OnlyFirst\","
         " \"direction\": \"Left\\u0000\"}, " WL "}",
         ATTN_STATUS_FORMAT, "truncation.direction"},
        {"{\"padding\": {\"strategy\": \"BatchLongest\\u0000\"}, " WL "}", ATTN_STATUS_FORMAT,
         "padding.strategy"},
    };
#undef WL
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        char clean[512]; /* the same without the NUL loads */
        const char *z = strstr(more[i].json, "\\u0000");
        assert_non_null(z);
        snprintf(clean, sizeof clean, "%.*s%s", (int)(z - more[i].json), more[i].json, z + 6);
        if (load_mem(clean, strlen(clean), &t)) fail_msg("%s: %s", clean, attn_last_error());
        attn_tok_free(t);
        t = (attn_tok *)1;
        tu_expect_fail(load_mem(more[i].json, strlen(more[i].json), &t), more[i].want,
                       more[i].where, NULL);
        assert_null(t);
    }
    tu_write_all(tu_tmp("v.json"), "{\"a\\u0000\": 0}", 14);
    tu_write_all(tu_tmp("m.txt"), "", 0);
    tu_expect_fail(attn_tok_load_vocab_merges(tu_tmp("v.json"), tu_tmp("m.txt"), &t),
                   ATTN_STATUS_UNSUPPORTED, "v.json: line 1", "U+0000");
    /* text to encode may hold NUL bytes: the tokens just cannot */
    static const char ok[] = "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"a\": 0, \"<unk>\":"
                             " 1}, \"unk_token\": \"<unk>\"}, \"pre_tokenizer\": {\"type\":"
                             " \"Split\", \"pattern\": {\"Regex\": \"[\\\\s\\\\S]\"},"
                             " \"behavior\": \"Isolated\", \"invert\": false}}";
    if (load_mem(ok, strlen(ok), &t)) fail_msg("%s", attn_last_error());
    int32_t ids[4];
    size_t n;
    assert_int_equal(attn_tok_encode(t, "a\0a", 3, ids, 4, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], 1);
    attn_tok_free(t);
}

/* The crash input of issue 21, kept in the fuzzer's regress directory. */
static void test_regress(void **state) {
    (void)state;
    const char *path = "fuzz/regress/tokenizer/added-token-nul"; /* tests run from the root */
    size_t n;
    char *b = tu_read_all(path, &n);
    if (!b) tu_skip("%s missing (the tests run from the repository root)", path);
    attn_tok *t = (attn_tok *)1;
    tu_expect_fail(load_mem(b, n, &t), ATTN_STATUS_UNSUPPORTED, "added_tokens[", "U+0000");
    assert_null(t);
    free(b);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "added")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_nul),
        cmocka_unit_test(test_regress),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}

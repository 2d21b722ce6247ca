/* test_tokenizer_gpt2.c — GPT-2's byte-level BPE (src/tok/byte_level.c) against Hugging Face
 * `tokenizers`:
 *
 *   reference   tools/ref_tokenizer_gpt2.py (run by tests/run.sh into $ATTN_REF_DIR) trains a
 *               GPT-2-style tokenizer on tiny shakespeare and records ids and decodes of a table of
 *               hard texts plus 3000 corpus lines, in four configurations; each tokenizer.json is
 *               loaded (and saved and reloaded): ids and decodes must be identical. The same model
 *               saved as vocab.json + merges.txt, loaded with attn_tok_load_vocab_merges and
 *               through a directory, must give the same ids. decode(encode(x)) == x.
 *   decodes     random id sequences (partial UTF-8 included) decode exactly as HF's decode.
 *   corpus      the whole of input.txt as one text: ids identical, time printed, round trip.
 *   whitespace  every code point is classified by the regex as HF classifies it (letter, number,
 *               space, other), from the table the reference script writes.
 *   bad input   invalid UTF-8, malformed vocab.json / merges.txt, bad ByteLevel fields.
 *
 * Parts whose reference files are missing are skipped (tu_skip). */
#include "attn_tok.h"
#include "tu.h"
#include "tu_tok.h"
#include "../src/tok/tok-impl.h" /* tok_pretokenize: the pieces, for the character classes */

#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CORPUS "../shared/data/tinyshakespeare/input.txt"

static void write_str(const char *path, const char *s) { tu_write_all(path, s, strlen(s)); }

static void copy_file(const char *from, const char *to) {
    size_t n;
    char *b = tu_read_all(from, &n);
    assert_non_null(b);
    tu_write_all(to, b, n);
    free(b);
}

static json_t *load_cases(void) {
    size_t n;
    char *txt = tu_read_all(tu_ref_path("gpt2_cases.json"), &n);
    if (!txt) return NULL;
    json_error_t err;
    json_t *root = json_loadb(txt, n, JSON_ALLOW_NUL, &err);
    free(txt);
    assert_non_null(root);
    return root;
}

static int32_t *json_ids(json_t *a, size_t *n) {
    *n = json_array_size(a);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    assert_non_null(v);
    for (size_t j = 0; j < *n; j++) v[j] = (int32_t)json_integer_value(json_array_get(a, j));
    return v;
}

static bool str_eq(const char *s, size_t n, json_t *j) {
    return n == json_string_length(j) && !memcmp(s, json_string_value(j), n);
}

/* Every case of `cases` through t (and t2 when given): ids and decodes identical; with
 * roundtrip, decode(encode(x), keep special) == x. Returns the number of mismatching cases. */
static size_t check_cases(const char *vname, const attn_tok *t, const attn_tok *t2, json_t *cases,
                          bool roundtrip) {
    size_t bad = 0, nc = json_array_size(cases);
    for (size_t i = 0; i < nc; i++) {
        json_t *c = json_array_get(cases, i);
        json_t *text = json_object_get(c, "text");
        const char *s = json_string_value(text);
        size_t sl = json_string_length(text), k, k2 = 0, nw;
        int32_t *ids = enc(t, s, sl, &k);
        int32_t *ids2 = t2 ? enc(t2, s, sl, &k2) : NULL;
        int32_t *want = json_ids(json_object_get(c, "ids"), &nw);
        bool ok = k == nw && !memcmp(ids, want, k * sizeof *ids);
        if (t2) ok = ok && k2 == k && !memcmp(ids2, ids, k * sizeof *ids);
        size_t dl, dkl;
        char *d = dec(t, want, nw, 0, &dl);
        char *dk = dec(t, want, nw, ATTN_TOK_DECODE_KEEP_SPECIAL, &dkl);
        bool dok = str_eq(d, dl, json_object_get(c, "decode")) &&
                   str_eq(dk, dkl, json_object_get(c, "decode_keep"));
        bool rok = !roundtrip || (dkl == sl && !memcmp(dk, s, sl));
        if (!ok || !dok || !rok) {
            if (++bad <= 3) {
                printf("  %s case %zu: text \"%.200s\"%s%s%s\n", vname, i, s, ok ? "" : " (ids)",
                       dok ? "" : " (decode)", rok ? "" : " (round trip)");
                print_ids("attn", ids, k);
                print_ids("hf  ", want, nw);
                printf("    decode attn \"%.200s\" / hf \"%.200s\"\n", d,
                       json_string_value(json_object_get(c, "decode")));
            }
        }
        attn_free(ids);
        attn_free(ids2);
        attn_free(d);
        attn_free(dk);
        free(want);
    }
    return bad;
}

static void test_reference(void **state) {
    (void)state;
    json_t *root = load_cases();
    if (!root)
        tu_skip("%s missing (tools/ref_tokenizer_gpt2.py needs the corpus and tokenizers)",
                tu_ref_path("gpt2_cases.json"));
    json_t *variants = json_object_get(root, "variants");
    const char *vname;
    json_t *v;
    size_t total = 0, bad = 0;
    json_object_foreach(variants, vname, v) {
        char path[4200];
        snprintf(path, sizeof path, "%s",
                 tu_ref_path(json_string_value(json_object_get(v, "tokenizer"))));
        attn_tok *t, *t2;
        if (attn_tok_load(path, &t)) fail_msg("%s: %s", path, attn_last_error());
        const char *saved = tu_tmp("resaved.json");
        assert_int_equal(attn_tok_save(t, saved), 0);
        if (attn_tok_load(saved, &t2)) fail_msg("%s: %s", saved, attn_last_error());
        assert_int_equal(attn_tok_vocab_size(t), attn_tok_vocab_size(t2));
        json_t *cases = json_object_get(v, "cases");
        /* add_prefix_space adds a space that decode keeps: no exact round trip there */
        size_t vbad = check_cases(vname, t, t2, cases, strcmp(vname, "prefix") != 0);
        size_t nc = json_array_size(cases);
        printf("  %-8s %s: %zu/%zu texts: identical ids and decodes (vocab %d)\n", vname,
               attn_tok_model_type(t), nc - vbad, nc, attn_tok_vocab_size(t));
        total += nc;
        bad += vbad;
        if (!strcmp(vname, "gpt2")) {
            assert_int_equal(attn_tok_special_id(t, ATTN_TOK_EOS), 4000);
            assert_true(attn_tok_is_special(t, 4000));
            /* vocab.json + merges.txt, directly and through a directory */
            attn_tok *vm, *vd;
            char vj[4200], mt[4200];
            snprintf(vj, sizeof vj, "%s", tu_ref_path("gpt2-vocab.json"));
            snprintf(mt, sizeof mt, "%s", tu_ref_path("gpt2-merges.txt"));
            if (attn_tok_load_vocab_merges(vj, mt, &vm)) fail_msg("%s", attn_last_error());
            char sub[1100];
            snprintf(sub, sizeof sub, "%s", tu_tmp("gpt2dir"));
            assert_int_equal(mkdir(sub, 0700), 0);
            copy_file(vj, tu_tmp("gpt2dir/vocab.json"));
            copy_file(mt, tu_tmp("gpt2dir/merges.txt"));
            if (attn_tok_load(sub, &vd)) fail_msg("%s: %s", sub, attn_last_error());
            assert_int_equal(attn_tok_vocab_size(vm), attn_tok_vocab_size(t));
            size_t mbad = check_cases("vocab+merges", vm, vd, cases, true);
            printf("  %-8s vocab.json + merges.txt (file pair and directory): %zu/%zu texts "
                   "identical\n",
                   vname, nc - mbad, nc);
            total += nc;
            bad += mbad;
            /* saved as tokenizer.json, it loads back the same */
            attn_tok *vs;
            assert_int_equal(attn_tok_save(vm, tu_tmp("vm.json")), 0);
            if (attn_tok_load(tu_tmp("vm.json"), &vs)) fail_msg("%s", attn_last_error());
            bad += check_cases("vm-saved", vs, NULL, cases, true);
            attn_tok_free(vs);
            attn_tok_free(vm);
            attn_tok_free(vd);
        }
        attn_tok_free(t);
        attn_tok_free(t2);
    }
    printf("  reference (tokenizers %s): %zu/%zu identical\n",
           json_string_value(json_object_get(root, "version")), total - bad, total);
    json_decref(root);
    assert_true(total > 3000);
    assert_int_equal(bad, 0);
}

static void test_decodes(void **state) {
    (void)state;
    json_t *root = load_cases();
    if (!root) tu_skip("%s missing (tools/ref_tokenizer_gpt2.py)", tu_ref_path("gpt2_cases.json"));
    attn_tok *t;
    if (attn_tok_load(tu_ref_path("gpt2_gpt2.json"), &t)) fail_msg("%s", attn_last_error());
    json_t *decs = json_object_get(root, "decodes");
    size_t bad = 0, n = json_array_size(decs);
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(decs, i);
        size_t nw, dl, dkl;
        int32_t *ids = json_ids(json_object_get(c, "ids"), &nw);
        char *d = dec(t, ids, nw, 0, &dl);
        char *dk = dec(t, ids, nw, ATTN_TOK_DECODE_KEEP_SPECIAL, &dkl);
        if (!str_eq(d, dl, json_object_get(c, "decode")) ||
            !str_eq(dk, dkl, json_object_get(c, "decode_keep"))) {
            if (++bad <= 3) {
                print_ids("ids", ids, nw);
                printf("    attn \"%s\" / hf \"%s\"\n", dk,
                       json_string_value(json_object_get(c, "decode_keep")));
            }
        }
        attn_free(d);
        attn_free(dk);
        free(ids);
    }
    printf("  decodes of random id sequences: %zu/%zu identical\n", n - bad, n);
    attn_tok_free(t);
    json_decref(root);
    assert_true(n >= 100);
    assert_int_equal(bad, 0);
}

static void test_corpus(void **state) {
    (void)state;
    json_t *root = load_cases();
    size_t n;
    char *text = tu_read_all(CORPUS, &n);
    if (!root || !text) {
        free(text);
        json_decref(root);
        tu_skip("%s or %s missing", tu_ref_path("gpt2_cases.json"), CORPUS);
    }
    attn_tok *t;
    if (attn_tok_load(tu_ref_path("gpt2_gpt2.json"), &t)) fail_msg("%s", attn_last_error());
    size_t nw, k;
    int32_t *want = json_ids(json_object_get(root, "corpus_ids"), &nw);
    /* Under valgrind (tu_valgrind): the first ~40 KB, cut after a newline before a letter, where
     * no piece of GPT-2's pattern crosses: its ids are the first ids of the whole text. */
    const bool prefix = tu_valgrind() && n > 40000;
    if (prefix) {
        size_t cut = 40000;
        while (cut < n && !(text[cut - 1] == '\n' && ((text[cut] | 0x20) >= 'a' && (text[cut] | 0x20) <= 'z')))
            cut++;
        n = cut;
    }
    double t0 = tu_now();
    int32_t *ids = enc(t, text, n, &k);
    double t1 = tu_now();
    size_t first_diff = k < nw ? k : nw;
    for (size_t i = 0; i < (k < nw ? k : nw); i++)
        if (ids[i] != want[i]) {
            first_diff = i;
            break;
        }
    size_t dl;
    double t2 = tu_now();
    char *d = dec(t, ids, k, 0, &dl);
    double t3 = tu_now();
    printf("  tiny shakespeare (%zu bytes, one text): %zu ids (hf %zu), encode %.3f s "
           "(%.1f MB/s), decode %.3f s\n",
           n, k, nw, t1 - t0, (double)n / 1e6 / (t1 - t0), t3 - t2);
    if ((prefix ? k > nw : k != nw) || first_diff != k)
        printf("    first difference at id %zu\n", first_diff);
    if (prefix)
        assert_true(k <= nw);
    else
        assert_int_equal(k, nw);
    assert_int_equal(first_diff, k);
    assert_int_equal(dl, n);
    assert_memory_equal(d, text, n);
    /* line by line, as a data loader would: same ids as the library per line (spot check: the
     * concatenation of per-line encodes of "line\n" decodes back to the text) */
    double t4 = tu_now();
    size_t total = 0;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && text[e] != '\n') e++;
        if (e < n) e++;
        int32_t *li = enc(t, text + i, e - i, &k);
        total += k;
        attn_free(li);
        i = e;
    }
    printf("  line by line: %zu ids in %.3f s\n", total, tu_now() - t4);
    attn_free(ids);
    attn_free(d);
    free(want);
    free(text);
    attn_tok_free(t);
    json_decref(root);
}

static void test_bad_input(void **state) {
    (void)state;
    json_t *root = load_cases();
    if (!root) tu_skip("%s missing (tools/ref_tokenizer_gpt2.py)", tu_ref_path("gpt2_cases.json"));
    json_decref(root);
    attn_tok *t;
    if (attn_tok_load(tu_ref_path("gpt2_gpt2.json"), &t)) fail_msg("%s", attn_last_error());
    int32_t ids[16];
    size_t n;
    tu_expect_fail(attn_tok_encode(t, "ab\xff" "c", 4, ids, 16, &n), ATTN_STATUS_INVALID_ARGUMENT,
                "UTF-8", "offset 2");
    tu_expect_fail(attn_tok_encode(t, "\xe4\xbd", 2, ids, 16, &n), ATTN_STATUS_INVALID_ARGUMENT,
                "offset 0", NULL);
    /* decode of a lone continuation byte token: U+FFFD, as from_utf8_lossy */
    int32_t b80 = attn_tok_token_to_id(t, "\xc4\xa2"); /* U+0122 = byte 0x80 */
    assert_true(b80 >= 0);
    char buf[64];
    size_t len;
    assert_int_equal(attn_tok_decode(t, &b80, 1, 0, buf, sizeof buf, &len), 0);
    assert_string_equal(buf, "\xEF\xBF\xBD");
    attn_tok_free(t);

    /* vocab.json / merges.txt */
    write_str(tu_tmp("v.json"), "{\"a\": 0, \"b\": 1, \"ab\": 2}");
    write_str(tu_tmp("m.txt"), "#version: 0.2\na b\n");
    attn_tok *vm;
    assert_int_equal(attn_tok_load_vocab_merges(tu_tmp("v.json"), tu_tmp("m.txt"), &vm), 0);
    assert_int_equal(attn_tok_encode(vm, "ab", 2, ids, 16, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 2);
    assert_int_equal(attn_tok_special_id(vm, ATTN_TOK_EOS), -1);
    attn_tok_free(vm);
    write_str(tu_tmp("m2.txt"), "a b\nab\n");
    tu_expect_fail(attn_tok_load_vocab_merges(tu_tmp("v.json"), tu_tmp("m2.txt"), &vm), ATTN_STATUS_FORMAT,
                "m2.txt: line 2", "one space");
    write_str(tu_tmp("m3.txt"), "a c\n");
    tu_expect_fail(attn_tok_load_vocab_merges(tu_tmp("v.json"), tu_tmp("m3.txt"), &vm), ATTN_STATUS_FORMAT,
                "line 1", "'c'");
    write_str(tu_tmp("m4.txt"), "b a\n");
    tu_expect_fail(attn_tok_load_vocab_merges(tu_tmp("v.json"), tu_tmp("m4.txt"), &vm), ATTN_STATUS_FORMAT,
                "m4.txt: line 1", "'ba' is not in");
    write_str(tu_tmp("v2.json"), "[1, 2]");
    tu_expect_fail(attn_tok_load_vocab_merges(tu_tmp("v2.json"), tu_tmp("m.txt"), &vm), ATTN_STATUS_FORMAT,
                "v2.json", "object");
    write_str(tu_tmp("v3.json"), "{\"a\": -1}");
    tu_expect_fail(attn_tok_load_vocab_merges(tu_tmp("v3.json"), tu_tmp("m.txt"), &vm), ATTN_STATUS_FORMAT,
                "\"a\"", NULL);
    assert_int_not_equal(attn_tok_load_vocab_merges(tu_tmp("nope.json"), tu_tmp("m.txt"), &vm), 0);
    assert_null(vm);

    /* tokenizer.json fields */
    static const char head[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, ";
    struct {
        const char *tail;
        attn_status want;
        const char *s1, *s2;
    } bad[] = {
        {"\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": 1}}", ATTN_STATUS_FORMAT,
         "pre_tokenizer.use_regex", "true or false"},
        {"\"decoder\": {\"type\": \"ByteLevel\", \"trim_offsets\": \"x\"}}", ATTN_STATUS_FORMAT,
         "decoder.trim_offsets", NULL},
        {"\"post_processor\": {\"type\": \"RobertaProcessing\"}}", ATTN_STATUS_UNSUPPORTED,
         "post_processor", "RobertaProcessing"},
        {"\"post_processor\": {\"type\": \"TemplateProcessing\"}}", ATTN_STATUS_FORMAT,
         "post_processor.special_tokens", NULL},
        {"\"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": null}}",
         ATTN_STATUS_FORMAT, "post_processor.add_prefix_space", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char js[512];
        snprintf(js, sizeof js, "%s%s", head, bad[i].tail);
        attn_reader r;
        assert_int_equal(attn_reader_open_memory(js, strlen(js), "mem.json", &r), 0);
        attn_tok *x = (attn_tok *)1;
        tu_expect_fail(attn_tok_load_reader(r, &x), bad[i].want, bad[i].s1, bad[i].s2);
        assert_null(x);
    }
    /* defaults: a bare ByteLevel is add_prefix_space, use_regex on */
    {
        static const char js[] =
            "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\xc4\xa0\": 0, \"a\": 1}, \"merges\": []},"
            " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}}";
        attn_reader r;
        assert_int_equal(attn_reader_open_memory(js, strlen(js), "mem.json", &r), 0);
        attn_tok *x;
        if (attn_tok_load_reader(r, &x)) fail_msg("%s", attn_last_error());
        assert_int_equal(attn_tok_encode(x, "a", 1, ids, 16, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(ids[0], 0);
        assert_int_equal(ids[1], 1);
        attn_tok_free(x);
    }
}

static attn_status count_piece(void *ctx, const char *s, size_t n, int32_t added_id) {
    (void)s, (void)n, (void)added_id;
    ++*(int *)ctx;
    return ATTN_STATUS_OK;
}

static int pieces(const attn_tok *t, char a, uint32_t cp) {
    char text[8];
    text[0] = a;
    size_t k = tok_utf8_encode(cp, text + 1);
    text[1 + k] = a;
    int n = 0;
    if (tok_pretokenize(t, text, k + 2, count_piece, &n)) fail_msg("%s", attn_last_error());
    return n;
}

/* The class of cp under GPT-2's pattern, probed as the reference script does. */
static char char_class(const attn_tok *t, uint32_t cp) {
    if (pieces(t, '!', cp) == 1) return 'O';
    if (pieces(t, 'x', cp) == 1) return 'L';
    if (pieces(t, '1', cp) == 1) return 'N';
    return 'S';
}

static void test_char_classes(void **state) {
    (void)state;
    json_t *root = load_cases();
    if (!root) tu_skip("%s missing (tools/ref_tokenizer_gpt2.py)", tu_ref_path("gpt2_cases.json"));
    attn_tok *t;
    if (attn_tok_load(tu_ref_path("gpt2_noregex.json"), &t)) fail_msg("%s", attn_last_error());
    attn_tok_free(t);
    if (attn_tok_load(tu_ref_path("gpt2_gpt2.json"), &t)) fail_msg("%s", attn_last_error());
    json_t *runs = json_object_get(root, "char_classes");
    size_t nr = json_array_size(runs), checked = 0, bad = 0, counts[4] = {0};
    for (size_t i = 0; i < nr; i++) {
        uint32_t a = (uint32_t)json_integer_value(json_array_get(json_array_get(runs, i), 0));
        char want = json_string_value(json_array_get(json_array_get(runs, i), 1))[0];
        uint32_t z = i + 1 < nr
                         ? (uint32_t)json_integer_value(json_array_get(json_array_get(runs, i + 1), 0))
                         : 0xE0200;
        for (uint32_t cp = a; cp < z; cp++) {
            if ((cp >= 0xD800 && cp < 0xE000) || (cp >= 0x40000 && cp < 0xE0000)) continue;
            char got = char_class(t, cp);
            checked++;
            counts[want == 'L' ? 0 : want == 'N' ? 1 : want == 'S' ? 2 : 3]++;
            if (got != want && getenv("ATTN_DUMP_CLASSES")) fprintf(stderr, "%X %c %c\n", (unsigned)cp, got, want);
            if (got != want && ++bad <= 10)
                printf("    U+%04X: attn %c, tokenizers %c\n", (unsigned)cp, got, want);
        }
    }
    printf("  character classes of GPT-2's pattern: %zu/%zu code points agree with tokenizers "
           "(L %zu, N %zu, S %zu, other %zu)\n",
           checked - bad, checked, counts[0], counts[1], counts[2], counts[3]);
    attn_tok_free(t);
    json_decref(root);
    assert_true(checked > 200000);
    assert_int_equal(bad, 0);
}


int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "gpt2")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_decodes),
        cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_char_classes),
        cmocka_unit_test(test_bad_input),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}

/* test_tokenizer_families.c — the real tokenizers of the Llama family against Hugging Face
 * `tokenizers` 0.21.4:
 *
 *   reference   tools/ref_tokenizer_families.py (run by tests/run.sh into $ATTN_REF_DIR) encodes a
 *               table of hard texts, llama.cpp's own tokenizer test strings and 300 lines of tiny
 *               shakespeare with each family's tokenizer.json (Llama 3, Llama 2 / TinyLlama,
 *               Mistral 7B v0.3-style Metaspace, Phi-3, Qwen2, GPT-2, SmolLM2, Mistral-Nemo's
 *               pre-tokenizer: see tools/tok_families.py and tools/get_smollm2.py). attn must give
 *               the same ids with and without special tokens, and the same decode with and without
 *               skip_special_tokens; a tokenizer saved by attn and loaded again the same ids
 *               (for the families with structures of their own: see resave_family).
 *   decodes     random id sequences (special tokens, lone byte-fallback and byte-level tokens
 *               included) decode exactly as tokenizers' decode.
 *   numeric     the Digits pre-tokenizer's class (Rust's char::is_numeric) of every code point.
 *   stream      attn_gen_stream (include/attn_gen.h) gives, piece by piece, the text of a whole
 *               decode: for every case (its first 64 ids), as generated text after an empty
 *               context and after a context of the first id.
 *
 * A family whose tokenizer.json is missing (tools/install_deps.sh makes them) is a software skip.
 * Under valgrind only Llama 2's tokenizer runs (the others take minutes to load there) with its
 * first 40 cases; the full tables run in `make test` and `make san`. */
#include "attn_gen.h"
#include "attn_tok.h"
#include "tu.h"
#include "tu_tok.h"
#include "../src/tok/tok-impl.h" /* tok_uni_numeric: the Digits pre-tokenizer's classes */

static const char *const FAMILIES[] = {"llama3", "llama2", "mistral", "phi3",
                                       "qwen2",  "gpt2",   "smollm2", "nemo"};
#define N_FAMILIES (sizeof FAMILIES / sizeof FAMILIES[0])

/* Each family's tokenizer, loaded once for all the tests (the large ones take a second). */
static attn_tok *g_tok[N_FAMILIES];
static double g_load_s[N_FAMILIES];

/* Families whose saved and reloaded tokenizer is checked too: the structures the others do not
 * have (a Sequence post-processor, rstrip flags, Metaspace, Digits); the rest are large and
 * their components are saved by the other tokenizer tests. */
static bool resave_family(const char *name) {
    return !strcmp(name, "llama3") || !strcmp(name, "phi3") || !strcmp(name, "mistral") ||
           !strcmp(name, "smollm2");
}

static size_t max_cases(void) { return tu_valgrind() ? 40 : (size_t)-1; }
#define RESAVED_CASES 80 /* cases also encoded by the reloaded copy */

/* What one test does with one family (f: its entry of families_cases.json); returns the
 * number of mismatches and adds the number of checks to *checked. */
typedef size_t (*family_fn)(size_t fi, const attn_tok *t, json_t *f, size_t *checked);

/* fn over every family the reference has (under valgrind only Llama 2); a family attn refuses
 * to load counts as a mismatch. Returns the mismatches; *missing lists the families without a
 * tokenizer.json. */
static size_t each_family(json_t *root, family_fn fn, size_t *checked, char *missing,
                          size_t cap) {
    size_t bad = 0;
    if (missing) missing[0] = '\0';
    for (size_t fi = 0; fi < N_FAMILIES; fi++) {
        json_t *f = json_object_get(json_object_get(root, "families"), FAMILIES[fi]);
        if (!f) {
            if (missing)
                snprintf(missing + strlen(missing), cap - strlen(missing), " %s", FAMILIES[fi]);
            continue;
        }
        if (tu_valgrind() && strcmp(FAMILIES[fi], "llama2")) continue;
        if (!g_tok[fi]) {
            const char *path = json_string_value(json_object_get(f, "tokenizer"));
            double t0 = tu_now();
            if (attn_tok_load(path, &g_tok[fi])) {
                printf("  %-8s does not load: %s\n", FAMILIES[fi], attn_last_error());
                g_tok[fi] = NULL;
                bad++;
                continue;
            }
            g_load_s[fi] = tu_now() - t0;
        }
        bad += fn(fi, g_tok[fi], f, checked);
    }
    return bad;
}

static json_t *load_cases(void) {
    json_t *root = tu_tok_load_ref("families_cases.json");
    if (!root)
        tu_skip("%s missing (tools/ref_tokenizer_families.py)", tu_ref_path("families_cases.json"));
    return root;
}

static size_t reference_family(size_t fi, const attn_tok *t, json_t *f, size_t *checked) {
    attn_tok *t2 = NULL;
    if (resave_family(FAMILIES[fi])) {
        const char *saved = tu_tmp("resaved.json");
        if (attn_tok_save(t, saved)) fail_msg("save: %s", attn_last_error());
        if (attn_tok_load(saved, &t2)) fail_msg("%s: %s", saved, attn_last_error());
        assert_int_equal(attn_tok_vocab_size(t), attn_tok_vocab_size(t2));
    }
    json_t *cases = json_object_get(f, "cases");
    size_t nc = json_array_size(cases), bad = 0, shown = 0;
    if (nc > max_cases()) nc = max_cases();
    for (size_t i = 0; i < nc; i++)
        bad += !tu_tok_case(FAMILIES[fi], t, i < RESAVED_CASES ? t2 : NULL,
                            json_array_get(cases, i), &shown);
    printf("  %-8s %zu/%zu texts: identical ids (with and without special tokens) and "
           "decodes%s (vocab %d, loaded in %.2f s)\n",
           FAMILIES[fi], nc - bad, nc, t2 ? ", also saved and reloaded" : "",
           attn_tok_vocab_size(t), g_load_s[fi]);
    attn_tok_free(t2);
    *checked += nc;
    return bad;
}

static void test_reference(void **state) {
    (void)state;
    json_t *root = load_cases();
    char missing[256];
    size_t total = 0, bad = each_family(root, reference_family, &total, missing, sizeof missing);
    printf("  reference (tokenizers %s): %zu/%zu identical\n",
           json_string_value(json_object_get(root, "version")), total - bad, total);
    json_decref(root);
    assert_int_equal(bad, 0);
    if (missing[0]) tu_skip("no tokenizer.json for%s (sh tools/install_deps.sh makes them)", missing);
}

static size_t decodes_family(size_t fi, const attn_tok *t, json_t *f, size_t *checked) {
    json_t *decs = json_object_get(f, "decodes");
    size_t n = json_array_size(decs), bad = 0;
    if (n > max_cases()) n = max_cases();
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(decs, i);
        size_t nw, dl, dkl;
        int32_t *ids = tu_tok_json_ids(json_object_get(c, "ids"), &nw);
        char *d = dec(t, ids, nw, 0, &dl);
        char *dk = dec(t, ids, nw, ATTN_TOK_DECODE_KEEP_SPECIAL, &dkl);
        json_t *wk = json_object_get(c, "decode_keep");
        if ((!tu_tok_str_eq(d, dl, json_object_get(c, "decode")) ||
             !tu_tok_str_eq(dk, dkl, wk)) &&
            ++bad <= 3) {
            printf("  %s: ", FAMILIES[fi]);
            print_ids("ids", ids, nw);
            printf("    attn ");
            tu_tok_show(dk, dkl);
            printf("\n    hf   ");
            tu_tok_show(json_string_value(wk), json_string_length(wk));
            printf("\n");
        }
        attn_free(d);
        attn_free(dk);
        free(ids);
    }
    printf("  %-8s decodes of random id sequences: %zu/%zu identical\n", FAMILIES[fi], n - bad, n);
    *checked += n;
    return bad;
}

static void test_decodes(void **state) {
    (void)state;
    json_t *root = load_cases();
    size_t total = 0, bad = each_family(root, decodes_family, &total, NULL, 0);
    json_decref(root);
    if (!total && !bad) tu_skip("no family tokenizer to check");
    assert_int_equal(bad, 0);
}

typedef struct {
    char *p;
    size_t n, cap;
} text_buf;

static void buf_put(text_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1);
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* ids streamed after context (ctx ids of them): the pieces joined must be decode(context + rest)
 * without decode(context) when that is a prefix, else decode(rest). */
static bool stream_ok(const attn_tok *t, const int32_t *ids, size_t n, size_t ctx) {
    attn_gen_stream *s;
    if (attn_gen_stream_init(t, ids, ctx, &s)) fail_msg("stream: %s", attn_last_error());
    text_buf joined = {0};
    bool whole = true; /* every piece whole characters */
    for (size_t i = ctx; i < n; i++) {
        const char *p;
        size_t pl;
        if (attn_gen_stream_push(s, ids[i], &p, &pl)) fail_msg("push: %s", attn_last_error());
        whole = whole && attn_tok_utf8_check(p, pl, true) == pl;
        buf_put(&joined, p, pl);
    }
    const char *p;
    size_t pl;
    if (attn_gen_stream_finish(s, &p, &pl)) fail_msg("finish: %s", attn_last_error());
    buf_put(&joined, p, pl);
    attn_gen_stream_free(s);
    size_t al, cl, rl;
    char *all = dec(t, ids, n, 0, &al);
    char *cx = dec(t, ids, ctx, 0, &cl);
    const char *want = all + cl;
    size_t wl = al - cl;
    char *rest = NULL;
    if (al < cl || memcmp(all, cx, cl)) {
        rest = dec(t, ids + ctx, n - ctx, 0, &rl);
        want = rest, wl = rl;
    }
    bool ok = whole && joined.n == wl && !memcmp(joined.p ? joined.p : "", want, wl);
    attn_free(all);
    attn_free(cx);
    attn_free(rest);
    free(joined.p);
    return ok;
}

static size_t stream_family(size_t fi, const attn_tok *t, json_t *f, size_t *checked) {
    json_t *cases = json_object_get(f, "cases");
    size_t n = json_array_size(cases), bad = 0;
    if (n > max_cases()) n = max_cases();
    for (size_t i = 0; i < n; i++) {
        size_t nw;
        int32_t *ids = tu_tok_json_ids(json_object_get(json_array_get(cases, i), "ids"), &nw);
        if (nw > 64) nw = 64; /* each push decodes everything so far: keep it short */
        for (size_t ctx = 0; ctx <= 1 && ctx <= nw; ctx++)
            if (!stream_ok(t, ids, nw, ctx) && ++bad <= 3) {
                printf("  %s case %zu, context %zu: streamed text differs from decode\n",
                       FAMILIES[fi], i, ctx);
                print_ids("ids", ids, nw);
            }
        free(ids);
    }
    printf("  %-8s streaming decode of %zu id sequences: %zu identical to decode\n", FAMILIES[fi],
           n, n - bad);
    *checked += n;
    return bad;
}

static void test_stream(void **state) {
    (void)state;
    json_t *root = load_cases();
    size_t total = 0, bad = each_family(root, stream_family, &total, NULL, 0);
    json_decref(root);
    if (!total && !bad) tu_skip("no family tokenizer to check");
    assert_int_equal(bad, 0);
}

/* Rust's char::is_numeric (the Digits pre-tokenizer, SmolLM2's) over every code point. */
static void test_numeric(void **state) {
    (void)state;
    json_t *root = load_cases();
    static uint8_t want[0x110000];
    memset(want, 0, sizeof want);
    json_t *runs = json_object_get(root, "numeric");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        json_t *r = json_array_get(runs, i);
        for (json_int_t c = json_integer_value(json_array_get(r, 0));
             c <= json_integer_value(json_array_get(r, 1)) && c < 0x110000; c++)
            want[c] = 1;
    }
    size_t bad = 0, n = 0, checked = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        checked++;
        n += want[cp];
        if (tok_uni_numeric(cp) != (want[cp] != 0) && ++bad <= 10)
            printf("    U+%04X: attn %d, tokenizers %d\n", (unsigned)cp, tok_uni_numeric(cp),
                   want[cp]);
    }
    printf("  Digits: %zu/%zu code points classified as tokenizers does (%zu numeric)\n",
           checked - bad, checked, n);
    json_decref(root);
    assert_true(n > 1000);
    assert_int_equal(bad, 0);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "families")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_decodes),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_numeric),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    for (size_t i = 0; i < N_FAMILIES; i++) attn_tok_free(g_tok[i]);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}

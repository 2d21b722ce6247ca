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

#include <jansson.h>

static const char *const FAMILIES[] = {"llama3", "llama2", "mistral", "phi3",
                                       "qwen2",  "gpt2",   "smollm2", "nemo"};
#define N_FAMILIES (sizeof FAMILIES / sizeof FAMILIES[0])

static json_t *load_cases(void) {
    size_t n;
    char *txt = tu_read_all(tu_ref_path("families_cases.json"), &n);
    if (!txt) return NULL;
    json_error_t err;
    json_t *root = json_loadb(txt, n, JSON_ALLOW_NUL, &err);
    free(txt);
    if (!root) fail_msg("families_cases.json: %s", err.text);
    return root;
}

static int32_t *json_ids(json_t *a, size_t *n) {
    *n = json_array_size(a);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    assert_non_null(v);
    for (size_t j = 0; j < *n; j++) v[j] = (int32_t)json_integer_value(json_array_get(a, j));
    return v;
}

static bool ids_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

static bool str_eq(const char *s, size_t n, json_t *j) {
    return n == json_string_length(j) && !memcmp(s, json_string_value(j), n);
}

/* The family's cases and tokenizer, or a software skip naming what is missing. */
static json_t *family(json_t *root, const char *name) {
    json_t *f = json_object_get(json_object_get(root, "families"), name);
    return f;
}

/* Each family's tokenizer, loaded once for all the tests (the large ones take a second). */
static attn_tok *g_tok[N_FAMILIES];
static double g_load_s[N_FAMILIES];

/* Family fi's tokenizer, or NULL (printed, and counted in *bad) when attn refuses it. */
static attn_tok *load_family(size_t fi, json_t *f, size_t *bad) {
    if (g_tok[fi]) return g_tok[fi];
    const char *path = json_string_value(json_object_get(f, "tokenizer"));
    double t0 = tu_now();
    if (attn_tok_load(path, &g_tok[fi])) {
        printf("  %-8s does not load: %s\n", FAMILIES[fi], attn_last_error());
        g_tok[fi] = NULL;
        ++*bad;
        return NULL;
    }
    g_load_s[fi] = tu_now() - t0;
    return g_tok[fi];
}

/* Families whose saved and reloaded tokenizer is checked too: the structures the others do not
 * have (a Sequence post-processor, rstrip flags, Metaspace, Digits); the rest are large and
 * their components are saved by the other tokenizer tests. */
static bool resave_family(const char *name) {
    return !strcmp(name, "llama3") || !strcmp(name, "phi3") || !strcmp(name, "mistral") ||
           !strcmp(name, "smollm2");
}

static size_t max_cases(void) { return tu_valgrind() ? 40 : (size_t)-1; }
#define RESAVED_CASES 80 /* cases also encoded by the reloaded copy */

static bool run_family(const char *name) { return !tu_valgrind() || !strcmp(name, "llama2"); }

/* The ids of text without the post-processor's special tokens. */
static int32_t *enc_plain(const attn_tok *t, const char *s, size_t n, size_t *k) {
    attn_tok_encode_params p = attn_tok_encode_default_params();
    p.add_special_tokens = false;
    attn_tok_encoding e;
    if (attn_tok_encode_ex(t, s, n, NULL, 0, &p, &e)) fail_msg("encode: %s", attn_last_error());
    int32_t *ids = malloc((e.n + 1) * sizeof *ids);
    assert_non_null(ids);
    if (e.n) memcpy(ids, e.ids, e.n * sizeof *ids);
    *k = e.n;
    attn_tok_encoding_free(&e);
    return ids;
}

static void show(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n && i < 160; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '"' || c == '\\')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    printf("%s\"", n > 160 ? "..." : "");
}

/* Every case of f through t (and t2, a saved and reloaded copy, when given). Returns the number
 * of mismatching cases. */
static size_t check_cases(const char *name, const attn_tok *t, const attn_tok *t2, json_t *f) {
    json_t *cases = json_object_get(f, "cases");
    size_t bad = 0, nc = json_array_size(cases);
    if (nc > max_cases()) nc = max_cases();
    for (size_t i = 0; i < nc; i++) {
        json_t *c = json_array_get(cases, i);
        json_t *text = json_object_get(c, "text");
        const char *s = json_string_value(text);
        size_t sl = json_string_length(text), k, kp, k2 = 0, nw, nwp;
        int32_t *ids = enc(t, s, sl, &k);
        int32_t *plain = enc_plain(t, s, sl, &kp);
        int32_t *ids2 = t2 && i < RESAVED_CASES ? enc(t2, s, sl, &k2) : NULL;
        int32_t *want = json_ids(json_object_get(c, "ids"), &nw);
        int32_t *want_p = json_ids(json_object_get(c, "ids_plain"), &nwp);
        bool ok = ids_eq(ids, k, want, nw) && ids_eq(plain, kp, want_p, nwp);
        bool ok2 = !ids2 || ids_eq(ids2, k2, ids, k);
        size_t dl, dkl;
        char *d = dec(t, want, nw, 0, &dl);
        char *dk = dec(t, want, nw, ATTN_TOK_DECODE_KEEP_SPECIAL, &dkl);
        bool dok = str_eq(d, dl, json_object_get(c, "decode")) &&
                   str_eq(dk, dkl, json_object_get(c, "decode_keep"));
        if (!ok || !ok2 || !dok) {
            if (++bad <= 4) {
                printf("  %s case %zu:%s%s%s text ", name, i, ok ? "" : " (ids)",
                       ok2 ? "" : " (reloaded)", dok ? "" : " (decode)");
                show(s, sl);
                printf("\n");
                print_ids("attn      ", ids, k);
                print_ids("tokenizers", want, nw);
                print_ids("attn plain", plain, kp);
                print_ids("tok. plain", want_p, nwp);
                printf("    decode attn ");
                show(dk, dkl);
                printf("\n           hf   ");
                json_t *w = json_object_get(c, "decode_keep");
                show(json_string_value(w), json_string_length(w));
                printf("\n");
            }
        }
        attn_free(ids);
        free(plain);
        attn_free(ids2);
        attn_free(d);
        attn_free(dk);
        free(want);
        free(want_p);
    }
    return bad;
}

static void test_reference(void **state) {
    (void)state;
    json_t *root = load_cases();
    if (!root)
        tu_skip("%s missing (tools/ref_tokenizer_families.py)", tu_ref_path("families_cases.json"));
    size_t total = 0, bad = 0, missing = 0;
    char absent[256] = "";
    for (size_t fi = 0; fi < N_FAMILIES; fi++) {
        const char *name = FAMILIES[fi];
        json_t *f = family(root, name);
        if (!f) {
            missing++;
            snprintf(absent + strlen(absent), sizeof absent - strlen(absent), " %s", name);
            continue;
        }
        if (!run_family(name)) continue;
        attn_tok *t = load_family(fi, f, &bad), *t2 = NULL;
        if (!t) continue;
        if (resave_family(name)) {
            const char *saved = tu_tmp("resaved.json");
            if (attn_tok_save(t, saved)) fail_msg("save: %s", attn_last_error());
            if (attn_tok_load(saved, &t2)) fail_msg("%s: %s", saved, attn_last_error());
            assert_int_equal(attn_tok_vocab_size(t), attn_tok_vocab_size(t2));
        }
        size_t fb = check_cases(name, t, t2, f);
        size_t nc = json_array_size(json_object_get(f, "cases"));
        if (nc > max_cases()) nc = max_cases();
        printf("  %-8s %zu/%zu texts: identical ids (with and without special tokens) and "
               "decodes%s (vocab %d, loaded in %.2f s)\n",
               name, nc - fb, nc, t2 ? ", also saved and reloaded" : "",
               attn_tok_vocab_size(t), g_load_s[fi]);
        total += nc;
        bad += fb;
        attn_tok_free(t2);
    }
    printf("  reference (tokenizers %s): %zu/%zu identical\n",
           json_string_value(json_object_get(root, "version")), total - bad, total);
    json_decref(root);
    assert_int_equal(bad, 0);
    if (missing)
        tu_skip("no tokenizer.json for%s (sh tools/install_deps.sh makes them)", absent);
}

static void test_decodes(void **state) {
    (void)state;
    json_t *root = load_cases();
    if (!root)
        tu_skip("%s missing (tools/ref_tokenizer_families.py)", tu_ref_path("families_cases.json"));
    size_t total = 0, bad = 0;
    for (size_t fi = 0; fi < N_FAMILIES; fi++) {
        json_t *f = family(root, FAMILIES[fi]);
        if (!f || !run_family(FAMILIES[fi])) continue;
        attn_tok *t = load_family(fi, f, &bad);
        if (!t) continue;
        json_t *decs = json_object_get(f, "decodes");
        size_t n = json_array_size(decs), fb = 0;
        if (n > max_cases()) n = max_cases();
        for (size_t i = 0; i < n; i++) {
            json_t *c = json_array_get(decs, i);
            size_t nw, dl, dkl;
            int32_t *ids = json_ids(json_object_get(c, "ids"), &nw);
            char *d = dec(t, ids, nw, 0, &dl);
            char *dk = dec(t, ids, nw, ATTN_TOK_DECODE_KEEP_SPECIAL, &dkl);
            if (!str_eq(d, dl, json_object_get(c, "decode")) ||
                !str_eq(dk, dkl, json_object_get(c, "decode_keep"))) {
                if (++fb <= 3) {
                    printf("  %s: ", FAMILIES[fi]);
                    print_ids("ids", ids, nw);
                    printf("    attn ");
                    show(dk, dkl);
                    printf("\n    hf   ");
                    json_t *w = json_object_get(c, "decode_keep");
                    show(json_string_value(w), json_string_length(w));
                    printf("\n");
                }
            }
            attn_free(d);
            attn_free(dk);
            free(ids);
        }
        printf("  %-8s decodes of random id sequences: %zu/%zu identical\n", FAMILIES[fi],
               n - fb, n);
        total += n;
        bad += fb;
    }
    json_decref(root);
    if (!total) tu_skip("no family tokenizer to check");
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
    for (size_t i = ctx; i < n; i++) {
        const char *p;
        size_t pl;
        if (attn_gen_stream_push(s, ids[i], &p, &pl)) fail_msg("push: %s", attn_last_error());
        if (attn_tok_utf8_check(p, pl, true) != pl) {
            attn_gen_stream_free(s);
            free(joined.p);
            return false; /* a piece must be whole characters */
        }
        buf_put(&joined, p, pl);
    }
    const char *p;
    size_t pl;
    if (attn_gen_stream_finish(s, &p, &pl)) fail_msg("finish: %s", attn_last_error());
    buf_put(&joined, p, pl);
    attn_gen_stream_free(s);
    size_t al, cl;
    char *all = dec(t, ids, n, 0, &al);
    char *cx = dec(t, ids, ctx, 0, &cl);
    bool ok;
    if (al >= cl && !memcmp(all, cx, cl)) {
        ok = joined.n == al - cl && !memcmp(joined.p ? joined.p : "", all + cl, joined.n);
    } else {
        size_t rl;
        char *rest = dec(t, ids + ctx, n - ctx, 0, &rl);
        ok = joined.n == rl && !memcmp(joined.p ? joined.p : "", rest, rl);
        attn_free(rest);
    }
    attn_free(all);
    attn_free(cx);
    free(joined.p);
    return ok;
}

static void test_stream(void **state) {
    (void)state;
    json_t *root = load_cases();
    if (!root)
        tu_skip("%s missing (tools/ref_tokenizer_families.py)", tu_ref_path("families_cases.json"));
    size_t total = 0, bad = 0;
    for (size_t fi = 0; fi < N_FAMILIES; fi++) {
        json_t *f = family(root, FAMILIES[fi]);
        if (!f || !run_family(FAMILIES[fi])) continue;
        attn_tok *t = load_family(fi, f, &bad);
        if (!t) continue;
        json_t *cases = json_object_get(f, "cases");
        size_t n = json_array_size(cases), fb = 0;
        if (n > max_cases()) n = max_cases();
        for (size_t i = 0; i < n; i++) {
            size_t nw;
            int32_t *ids = json_ids(json_object_get(json_array_get(cases, i), "ids"), &nw);
            if (nw > 64) nw = 64; /* each push decodes everything so far: keep it short */
            for (size_t ctx = 0; ctx <= 1 && ctx <= nw; ctx++)
                if (!stream_ok(t, ids, nw, ctx) && ++fb <= 3) {
                    printf("  %s case %zu, context %zu: streamed text differs from decode\n",
                           FAMILIES[fi], i, ctx);
                    print_ids("ids", ids, nw);
                }
            free(ids);
        }
        printf("  %-8s streaming decode of %zu id sequences: %zu identical to decode\n",
               FAMILIES[fi], n, n - fb);
        total += n;
        bad += fb;
    }
    json_decref(root);
    if (!total) tu_skip("no family tokenizer to check");
    assert_int_equal(bad, 0);
}

/* Rust's char::is_numeric (the Digits pre-tokenizer, SmolLM2's) over every code point. */
static void test_numeric(void **state) {
    (void)state;
    json_t *root = load_cases();
    if (!root)
        tu_skip("%s missing (tools/ref_tokenizer_families.py)", tu_ref_path("families_cases.json"));
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

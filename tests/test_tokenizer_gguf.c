/* test_tokenizer_gguf.c — tokenizers built from GGUF metadata (attn_tok_from_gguf) against the
 * `tokenizers` library on the families' real tokenizer.json files:
 *
 *   reference   each GGUF's tokenizer gives the ids (with and without special tokens) and the
 *               decodes tokenizers gives with the family's tokenizer.json on the hard-case
 *               table, llama.cpp's own test strings and 300 lines of tiny shakespeare
 *               (families_cases.json of tools/ref_tokenizer_families.py, and
 *               gguf_tok_cases.json of tools/ref_tokenizer_gguf.py for BERT), and random id
 *               sequences decode alike:
 *                 llama3   ggml-vocab-llama-bpe.gguf  (gpt2, pre llama-bpe)
 *                 llama2   ggml-vocab-llama-spm.gguf  (llama: merges from the scores)
 *                 phi3     ggml-vocab-phi-3.gguf      (llama, Phi-3's rstrip tokens, [PAD] rows)
 *                 qwen2    ggml-vocab-qwen2.gguf      (gpt2, pre qwen2, [PAD] rows)
 *                 gpt2     ggml-vocab-gpt-2.gguf      (gpt2, pre gpt-2)
 *                 smollm2  SmolLM2-135M-Instruct.Q4_1.gguf (gpt2, pre smollm: the real model)
 *                 nemo     ggml-vocab-gpt-2.gguf rewritten by attn with pre "tekken"
 *                 bert     ggml-vocab-bert-bge.gguf   (bert: WordPiece; all-MiniLM-L6-v2's
 *                          tokenizer.json has the same vocabulary and pipeline)
 *   llamacpp    llama.cpp's expected ids (models/llamacpp/vocab/ggml-vocab-NAME.gguf.out, made with the
 *               models' Hugging Face tokenizers): attn equals them wherever tokenizers on the
 *               family's file does; the cases where those two differ are counted and shown.
 *   info        special ids, add_bos / add_eos, the chat template (SmolLM2's equals its
 *               tokenizer_config.json's), attn_tok_special_id answering with the file's ids, a
 *               GGUF tokenizer saved as tokenizer.json and reloaded giving the same ids.
 *   bad         tokenizer metadata that is wrong: each its status and a one-line message naming
 *               the file and the key.
 * A missing file is a software skip. Under valgrind only llama2 and bert load (the others take
 * minutes there), with their first 40 cases. */
#include "attn_gguf.h"
#include "attn_tok.h"
#include "tu.h"
#include "tu_tok.h"

#include <unistd.h>

#define VOCAB "models/llamacpp/vocab/"
#define SMOLLM2 "models/SmolLM2-135M-Instruct.Q4_1.gguf"

typedef struct {
    const char *family; /* in families_cases.json or gguf_tok_cases.json */
    const char *gguf;   /* NULL: made by the test (nemo) */
    const char *inp;    /* llama.cpp's test strings for it, or NULL */
} family;

static const family FAMILIES[] = {
    {"llama3", VOCAB "ggml-vocab-llama-bpe.gguf", VOCAB "ggml-vocab-llama-bpe.gguf"},
    {"llama2", VOCAB "ggml-vocab-llama-spm.gguf", VOCAB "ggml-vocab-llama-spm.gguf"},
    {"phi3", VOCAB "ggml-vocab-phi-3.gguf", VOCAB "ggml-vocab-phi-3.gguf"},
    {"qwen2", VOCAB "ggml-vocab-qwen2.gguf", VOCAB "ggml-vocab-qwen2.gguf"},
    {"gpt2", VOCAB "ggml-vocab-gpt-2.gguf", VOCAB "ggml-vocab-gpt-2.gguf"},
    {"smollm2", SMOLLM2, NULL},
    {"nemo", NULL, NULL},
    {"bert", VOCAB "ggml-vocab-bert-bge.gguf", VOCAB "ggml-vocab-bert-bge.gguf"},
};
#define N_FAMILIES (sizeof FAMILIES / sizeof FAMILIES[0])

static attn_tok *g_tok[N_FAMILIES];
static attn_tok_gguf_info g_info[N_FAMILIES];
static attn_gguf *g_gguf[N_FAMILIES];
static double g_load_s[N_FAMILIES];
static json_t *g_cases; /* families_cases.json's "families" merged with gguf_tok_cases.json's */

static bool valgrind_family(size_t fi) {
    return !strcmp(FAMILIES[fi].family, "llama2") || !strcmp(FAMILIES[fi].family, "bert");
}

static size_t max_cases(void) { return tu_valgrind() ? 40 : (size_t)-1; }

/* GPT-2's vocabulary with tokenizer.ggml.pre "tekken" (Mistral-Nemo's pre-tokenizer), written by
 * attn's GGUF writer from the file attn's reader read. */
static const char *make_tekken(void) {
    static char path[1024];
    if (path[0]) return path;
    attn_gguf *g;
    if (attn_gguf_open(VOCAB "ggml-vocab-gpt-2.gguf", &g)) return NULL;
    size_t n = attn_gguf_kv_count(g);
    attn_gguf_kv *kv = calloc(n, sizeof *kv);
    assert_non_null(kv);
    for (size_t i = 0; i < n; i++) {
        kv[i] = *attn_gguf_kv_at(g, i);
        if (!strcmp(kv[i].key, "tokenizer.ggml.pre")) kv[i] = attn_gguf_kv_str(kv[i].key, "tekken");
    }
    snprintf(path, sizeof path, "%s", tu_tmp("tekken.gguf"));
    if (attn_gguf_save(path, kv, n, NULL, 0)) fail_msg("%s", attn_last_error());
    free(kv);
    attn_gguf_close(g);
    return path;
}

static json_t *cases_root(void) {
    if (g_cases) return g_cases;
    json_t *a = tu_tok_load_ref("families_cases.json"), *b = tu_tok_load_ref("gguf_tok_cases.json");
    if (!a || !b) {
        json_decref(a);
        json_decref(b);
        tu_skip("%s or gguf_tok_cases.json missing (tools/ref_tokenizer_families.py, "
                "tools/ref_tokenizer_gguf.py)",
                tu_ref_path("families_cases.json"));
    }
    g_cases = json_object();
    json_object_update(g_cases, json_object_get(a, "families"));
    json_object_update(g_cases, json_object_get(b, "families"));
    json_decref(a);
    json_decref(b);
    return g_cases;
}

/* Family fi's tokenizer from its GGUF (loaded once), or NULL when the GGUF or the reference is
 * missing (named in missing). */
static attn_tok *family_tok(size_t fi, char *missing, size_t cap) {
    if (g_tok[fi]) return g_tok[fi];
    const char *path = FAMILIES[fi].gguf;
    if (!path && access(VOCAB "ggml-vocab-gpt-2.gguf", R_OK) == 0) path = make_tekken();
    if (!path || access(path, R_OK) != 0 || !json_object_get(cases_root(), FAMILIES[fi].family)) {
        if (missing)
            snprintf(missing + strlen(missing), cap - strlen(missing), " %s", FAMILIES[fi].family);
        return NULL;
    }
    double t0 = tu_now();
    if (attn_gguf_open(path, &g_gguf[fi])) fail_msg("%s", attn_last_error());
    if (attn_tok_from_gguf(g_gguf[fi], &g_tok[fi], &g_info[fi]))
        fail_msg("%s: %s", FAMILIES[fi].family, attn_last_error());
    g_load_s[fi] = tu_now() - t0;
    return g_tok[fi];
}

static void skip_missing(const char *missing) {
    if (missing[0])
        tu_skip("no GGUF or reference for%s (sh tools/install_deps.sh fetches them)", missing);
}

static void test_reference(void **state) {
    (void)state;
    char missing[256] = "";
    size_t total = 0, bad_total = 0;
    for (size_t fi = 0; fi < N_FAMILIES; fi++) {
        if (tu_valgrind() && !valgrind_family(fi)) continue;
        attn_tok *t = family_tok(fi, missing, sizeof missing);
        if (!t) continue;
        json_t *f = json_object_get(cases_root(), FAMILIES[fi].family);
        json_t *cases = json_object_get(f, "cases"), *decs = json_object_get(f, "decodes");
        size_t nc = json_array_size(cases), bad = 0, shown = 0, nd = json_array_size(decs);
        if (nc > max_cases()) nc = max_cases();
        if (nd > max_cases()) nd = max_cases();
        for (size_t i = 0; i < nc; i++)
            bad += !tu_tok_case(FAMILIES[fi].family, t, NULL, json_array_get(cases, i), &shown);
        size_t dbad = 0;
        for (size_t i = 0; i < nd; i++) {
            json_t *c = json_array_get(decs, i);
            size_t nw, dl, dkl;
            int32_t *ids = tu_tok_json_ids(json_object_get(c, "ids"), &nw);
            char *d = dec(t, ids, nw, 0, &dl);
            char *dk = dec(t, ids, nw, ATTN_TOK_DECODE_KEEP_SPECIAL, &dkl);
            if (!tu_tok_str_eq(d, dl, json_object_get(c, "decode")) ||
                !tu_tok_str_eq(dk, dkl, json_object_get(c, "decode_keep"))) {
                if (++dbad <= 3) print_ids("decode differs", ids, nw);
            }
            attn_free(d);
            attn_free(dk);
            free(ids);
        }
        printf("  %-8s %zu/%zu texts and %zu/%zu decodes identical to tokenizers (vocab %d, "
               "loaded from GGUF in %.2f s)\n",
               FAMILIES[fi].family, nc - bad, nc, nd - dbad, nd, attn_tok_vocab_size(t),
               g_load_s[fi]);
        total += nc + nd;
        bad_total += bad + dbad;
    }
    printf("  %zu/%zu identical\n", total - bad_total, total);
    assert_int_equal(bad_total, 0);
    skip_missing(missing);
}

/* llama.cpp's test strings (FILE.inp, separated by "\n__ggml_vocab_test__\n") and expected ids
 * without special tokens (FILE.out, one line of ids per string). */
static void test_llamacpp(void **state) {
    (void)state;
    char missing[256] = "";
    size_t agree_all = 0, n_all = 0, differ_all = 0;
    for (size_t fi = 0; fi < N_FAMILIES; fi++) {
        if (!FAMILIES[fi].inp || (tu_valgrind() && !valgrind_family(fi))) continue;
        char inp_path[512], out_path[512];
        snprintf(inp_path, sizeof inp_path, "%s.inp", FAMILIES[fi].inp);
        snprintf(out_path, sizeof out_path, "%s.out", FAMILIES[fi].inp);
        size_t ni, no;
        char *inp = tu_read_all(inp_path, &ni), *out = tu_read_all(out_path, &no);
        attn_tok *t = inp && out ? family_tok(fi, missing, sizeof missing) : NULL;
        if (!t) {
            if (!inp || !out)
                snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %.60s",
                         strrchr(inp_path, '/') + 1);
            free(inp);
            free(out);
            continue;
        }
        /* tokenizers' ids for the same texts (the reference cases hold every non-empty one) */
        json_t *cases = json_object_get(json_object_get(cases_root(), FAMILIES[fi].family), "cases");
        static const char SEP[] = "\n__ggml_vocab_test__\n";
        char *p = inp, *line = out;
        size_t n = 0, agree = 0, differ = 0, shown = 0;
        while (*line) {
            char *sep = strstr(p, SEP), *eol = strchr(line, '\n');
            if (!sep || !eol) break;
            *sep = '\0';
            *eol = '\0';
            size_t tl = (size_t)(sep - p);
            int32_t want[512];
            size_t nw = 0;
            for (char *q = line; *q && nw < 512;) {
                char *end;
                long v = strtol(q, &end, 10);
                if (end == q) break;
                want[nw++] = (int32_t)v;
                q = end;
            }
            size_t k;
            int32_t *got = tu_tok_enc_plain(t, p, tl, &k);
            json_t *ref = NULL;
            for (size_t i = 0; i < json_array_size(cases) && tl; i++) {
                json_t *tx = json_object_get(json_array_get(cases, i), "text");
                if (json_string_length(tx) == tl && !memcmp(json_string_value(tx), p, tl)) {
                    ref = json_object_get(json_array_get(cases, i), "ids_plain");
                    break;
                }
            }
            size_t nr = 0;
            int32_t *hf = ref ? tu_tok_json_ids(ref, &nr) : NULL;
            bool hf_agrees = tl == 0 ? nw == 0 : hf && tu_tok_ids_eq(hf, nr, want, nw);
            if (tu_tok_ids_eq(got, k, want, nw)) agree++;
            else if (hf_agrees) fail_msg("%s: attn differs from llama.cpp's %s where tokenizers agrees with it", FAMILIES[fi].family, out_path);
            if (!hf_agrees) {
                differ++;
                if (++shown <= 2) {
                    printf("  %s: llama.cpp's expectation differs from tokenizers' on ", FAMILIES[fi].family);
                    tu_tok_show(p, tl);
                    printf("\n");
                    print_ids("llama.cpp ", want, nw);
                    print_ids("tokenizers", hf, nr);
                    print_ids("attn      ", got, k);
                }
            }
            free(got);
            free(hf);
            n++;
            p = sep + strlen(SEP);
            line = eol + 1;
        }
        printf("  %-8s %zu/%zu of llama.cpp's expected ids equal (%zu where tokenizers' file "
               "gives other ids)\n",
               FAMILIES[fi].family, agree, n, differ);
        assert_true(n > 30);
        agree_all += agree, n_all += n, differ_all += differ;
        free(inp);
        free(out);
    }
    printf("  %zu/%zu equal llama.cpp's; %zu differ from tokenizers' too\n", agree_all, n_all,
           differ_all);
    skip_missing(missing);
}

static size_t family_index(const char *name) {
    for (size_t fi = 0; fi < N_FAMILIES; fi++)
        if (!strcmp(FAMILIES[fi].family, name)) return fi;
    fail_msg("no family %s", name);
    return 0;
}

static void test_info(void **state) {
    (void)state;
    char missing[256] = "";
    size_t fi = family_index("llama2");
    attn_tok *t = tu_valgrind() ? NULL : family_tok(family_index("smollm2"), missing, sizeof missing);
    if (t) {
        const attn_tok_gguf_info *in = &g_info[family_index("smollm2")];
        assert_int_equal(in->bos_id, 1);
        assert_int_equal(in->eos_id, 2);
        assert_int_equal(in->pad_id, 2);
        assert_int_equal(in->unk_id, 0);
        assert_false(in->add_bos);
        assert_string_equal(in->model, "gpt2");
        assert_string_equal(in->pre, "smollm");
        assert_int_equal(attn_tok_special_id(t, ATTN_TOK_BOS), 1);
        assert_int_equal(attn_tok_special_id(t, ATTN_TOK_EOS), 2);
        assert_int_equal(attn_tok_special_id(t, ATTN_TOK_MASK), -1);
        assert_non_null(in->chat_template);
        /* the template transformers saved from the same GGUF into tokenizer_config.json */
        size_t n;
        char *cfg = tu_read_all("models/SmolLM2-135M-Instruct/tokenizer_config.json", &n);
        if (cfg) {
            json_error_t err;
            json_t *j = json_loadb(cfg, n, 0, &err);
            json_t *ct = json_object_get(j, "chat_template");
            assert_true(json_is_string(ct));
            assert_int_equal(json_string_length(ct), in->chat_template_len);
            assert_memory_equal(json_string_value(ct), in->chat_template, in->chat_template_len);
            json_decref(j);
            free(cfg);
        }
        printf("  smollm2: bos 1, eos 2, pad 2, unk 0, no bos added, chat template of %llu bytes "
               "(tokenizer_config.json's)\n",
               (unsigned long long)in->chat_template_len);
    }
    t = family_tok(fi, missing, sizeof missing);
    if (t) {
        const attn_tok_gguf_info *in = &g_info[fi];
        assert_int_equal(in->bos_id, 1);
        assert_int_equal(in->eos_id, 2);
        assert_true(in->add_bos);
        assert_false(in->add_eos);
        assert_null(in->chat_template);
        assert_int_equal(attn_tok_special_id(t, ATTN_TOK_UNK), 0);
        size_t k;
        int32_t *ids = enc(t, "Hello", 5, &k);
        assert_int_equal(ids[0], 1); /* <s> added */
        attn_free(ids);
        /* saved as tokenizer.json and loaded again: the same ids (not under valgrind, where a
         * 2.6 MB tokenizer.json parsed twice takes long and adds no code path) */
        if (!tu_valgrind()) {
            const char *saved = tu_tmp("llama2-from-gguf.json");
            assert_int_equal(attn_tok_save(t, saved), ATTN_STATUS_OK);
            attn_tok *t2;
            if (attn_tok_load(saved, &t2)) fail_msg("%s", attn_last_error());
            json_t *cases = json_object_get(json_object_get(cases_root(), "llama2"), "cases");
            size_t shown = 0, nc = json_array_size(cases) < 60 ? json_array_size(cases) : 60;
            for (size_t i = 0; i < nc; i++)
                assert_true(tu_tok_case("llama2 resaved", t, t2, json_array_get(cases, i), &shown));
            attn_tok_free(t2);
            printf("  llama2: bos 1 added, eos 2, unk 0; saved as tokenizer.json and reloaded: "
                   "the same ids on %zu cases\n", nc);
        }
    }
    fi = family_index("bert");
    t = family_tok(fi, missing, sizeof missing);
    if (t) {
        assert_int_equal(attn_tok_special_id(t, ATTN_TOK_CLS), 101);
        assert_int_equal(attn_tok_special_id(t, ATTN_TOK_SEP), 102);
        assert_int_equal(attn_tok_special_id(t, ATTN_TOK_MASK), 103);
        assert_int_equal(attn_tok_special_id(t, ATTN_TOK_PAD), 0);
        assert_int_equal(attn_tok_special_id(t, ATTN_TOK_UNK), 100);
        assert_string_equal(attn_tok_model_type(t), "WordPiece");
        assert_true(g_info[fi].add_bos && g_info[fi].add_eos);
        /* attn_tok_load on the GGUF file itself */
        attn_tok *t2;
        if (attn_tok_load(FAMILIES[fi].gguf, &t2)) fail_msg("%s", attn_last_error());
        assert_int_equal(attn_tok_vocab_size(t2), attn_tok_vocab_size(t));
        size_t k1, k2;
        int32_t *a = enc(t, "Hello, GGUF!", 12, &k1), *b = enc(t2, "Hello, GGUF!", 12, &k2);
        assert_true(tu_tok_ids_eq(a, k1, b, k2));
        attn_free(a);
        attn_free(b);
        attn_tok_free(t2);
    }
    if (!tu_valgrind()) {
        t = family_tok(family_index("phi3"), missing, sizeof missing);
        if (t) {
            assert_int_equal(attn_tok_special_id(t, ATTN_TOK_EOS), 32000);
            assert_non_null(g_info[family_index("phi3")].chat_template);
            assert_false(attn_tok_is_special(t, 2)); /* Phi-3's </s> is not special */
            assert_true(attn_tok_is_special(t, 32007));
            assert_int_equal(attn_tok_vocab_size(t), 32011); /* no [PAD32011..] rows */
        }
        t = family_tok(family_index("llama3"), missing, sizeof missing);
        if (t) {
            assert_true(g_info[family_index("llama3")].add_bos);
            assert_int_equal(attn_tok_token_to_id(t, "<|eot_id|>"), 128009);
        }
    }
    skip_missing(missing);
}

/* ---- bad tokenizer metadata ---- */

static attn_gguf_str gs(const char *s) { return (attn_gguf_str){s, strlen(s)}; }

static void expect_bad_tok(const attn_gguf_kv *kv, size_t n, attn_status want, const char *s1,
                           const char *s2) {
    const char *path = tu_tmp("badtok.gguf");
    if (attn_gguf_save(path, kv, n, NULL, 0)) fail_msg("%s", attn_last_error());
    attn_gguf *g;
    if (attn_gguf_open(path, &g)) fail_msg("%s", attn_last_error());
    attn_tok *t = (attn_tok *)1;
    attn_status s = attn_tok_from_gguf(g, &t, NULL);
    assert_null(t);
    tu_expect_fail3(s, want, "badtok.gguf: ", s1, s2);
    attn_gguf_close(g);
}

static void test_bad(void **state) {
    (void)state;
    attn_gguf_str toks[6] = {gs("<|endoftext|>"), gs("a"), gs("b"), gs("ab"), gs("c"), gs("[PAD5]")};
    int32_t types[6] = {3, 1, 1, 1, 1, 4};
    attn_gguf_str merges[2] = {gs("a b"), gs("ab c")};
    float scores[6] = {0, -1, -2, -3, -4, -5};
    attn_gguf_kv kv[12];
    size_t k = 0;
    kv[k++] = attn_gguf_kv_str("tokenizer.ggml.model", "gpt2");
    kv[k++] = attn_gguf_kv_str("tokenizer.ggml.pre", "gpt-2");
    kv[k++] = attn_gguf_kv_arr("tokenizer.ggml.tokens", ATTN_GGUF_TYPE_STRING, 6, toks);
    kv[k++] = attn_gguf_kv_arr("tokenizer.ggml.token_type", ATTN_GGUF_TYPE_INT32, 6, types);
    kv[k++] = attn_gguf_kv_arr("tokenizer.ggml.merges", ATTN_GGUF_TYPE_STRING, 1, merges);
    /* the base loads: a small GPT-2 */
    const char *path = tu_tmp("ok.gguf");
    assert_int_equal(attn_gguf_save(path, kv, k, NULL, 0), ATTN_STATUS_OK);
    attn_tok *t;
    if (attn_tok_load(path, &t)) fail_msg("%s", attn_last_error());
    size_t n;
    int32_t *ids = enc(t, "abc", 3, &n);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 4);
    attn_free(ids);
    assert_int_equal(attn_tok_vocab_size(t), 5); /* [PAD5] left out */
    attn_tok_free(t);

    attn_gguf_kv e[12];
    memcpy(e, kv, sizeof kv);
    expect_bad_tok(e + 1, k - 1, ATTN_STATUS_NOT_FOUND, "no key 'tokenizer.ggml.model'", NULL);
    e[0] = attn_gguf_kv_str("tokenizer.ggml.model", "t5");
    expect_bad_tok(e, k, ATTN_STATUS_UNSUPPORTED, "tokenizer.ggml.model \"t5\" is not supported", NULL);
    e[0] = attn_gguf_kv_u32("tokenizer.ggml.model", 1);
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "key 'tokenizer.ggml.model' is u32, expected string", NULL);
    memcpy(e, kv, sizeof kv);
    e[1] = attn_gguf_kv_str("tokenizer.ggml.pre", "deepseek-llm");
    expect_bad_tok(e, k, ATTN_STATUS_UNSUPPORTED, "tokenizer.ggml.pre \"deepseek-llm\" is not supported", NULL);
    e[1] = e[0];
    expect_bad_tok(e + 1, k - 1, ATTN_STATUS_UNSUPPORTED, "tokenizer.ggml.pre (absent)", NULL);
    memcpy(e, kv, sizeof kv);
    e[2] = attn_gguf_kv_arr("tokenizer.ggml.tokens", ATTN_GGUF_TYPE_INT32, 6, types);
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "'tokenizer.ggml.tokens' is an array of i32, expected an array of string", NULL);
    e[2] = attn_gguf_kv_arr("tokenizer.ggml.tokens", ATTN_GGUF_TYPE_STRING, 0, toks);
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "tokenizer.ggml.tokens is empty", NULL);
    memcpy(e, kv, sizeof kv);
    e[3] = attn_gguf_kv_arr("tokenizer.ggml.token_type", ATTN_GGUF_TYPE_INT32, 5, types);
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "tokenizer.ggml.token_type has 5 entries, tokens 6", NULL);
    int32_t badtypes[6] = {3, 1, 1, 9, 1, 1};
    e[3] = attn_gguf_kv_arr("tokenizer.ggml.token_type", ATTN_GGUF_TYPE_INT32, 6, badtypes);
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "tokenizer.ggml.token_type[3] is 9", NULL);
    memcpy(e, kv, sizeof kv);
    attn_gguf_str m2[1] = {gs("a x")};
    e[4] = attn_gguf_kv_arr("tokenizer.ggml.merges", ATTN_GGUF_TYPE_STRING, 1, m2);
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "tokenizer.ggml.merges[0]: token \"x\" is not in the vocabulary", NULL);
    m2[0] = gs("abc");
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "tokenizer.ggml.merges[0] \"abc\" is not two tokens", NULL);
    m2[0] = gs("b a");
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "tokenizer.ggml.merges[0]: merged token \"ba\"", NULL);
    expect_bad_tok(e, 4, ATTN_STATUS_NOT_FOUND, "no key 'tokenizer.ggml.merges'", NULL);
    memcpy(e, kv, sizeof kv);
    attn_gguf_str t2[6] = {gs("<|endoftext|>"), gs("a"), gs("b"), gs("ab"), gs("a"), gs("x")};
    e[2] = attn_gguf_kv_arr("tokenizer.ggml.tokens", ATTN_GGUF_TYPE_STRING, 6, t2);
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "tokenizer.ggml.tokens[4] \"a\" is token 1 already", NULL);
    t2[0] = gs("");
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "tokenizer.ggml.tokens[0] is empty, and an added token (type 3) needs text", NULL);
    t2[0] = gs("<|endoftext|>");
    t2[4] = (attn_gguf_str){"a\0b", 3};
    expect_bad_tok(e, k, ATTN_STATUS_UNSUPPORTED, "tokenizer.ggml.tokens[4]", NULL);
    t2[4] = gs("\xff\xfe");
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "tokenizer.ggml.tokens[4] is not valid UTF-8 (byte 0 is 0xff)", NULL);
    memcpy(e, kv, sizeof kv);
    size_t k2 = k;
    e[k2++] = attn_gguf_kv_u32("tokenizer.ggml.bos_token_id", 6);
    expect_bad_tok(e, k2, ATTN_STATUS_FORMAT, "tokenizer.ggml.bos_token_id is 6, not a token id (0..5)", NULL);
    e[k2 - 1] = attn_gguf_kv_u32("tokenizer.ggml.eos_token_id", 5);
    expect_bad_tok(e, k2, ATTN_STATUS_FORMAT, "tokenizer.ggml.eos_token_id is 5, a padding entry ([PAD5])", NULL);
    e[k2 - 1] = attn_gguf_kv_bool("tokenizer.ggml.add_bos_token", true);
    expect_bad_tok(e, k2, ATTN_STATUS_FORMAT, "tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is absent", NULL);
    e[k2 - 1] = attn_gguf_kv_u32("tokenizer.ggml.add_bos_token", 1);
    expect_bad_tok(e, k2, ATTN_STATUS_FORMAT, "key 'tokenizer.ggml.add_bos_token' is u32, expected bool", NULL);
    e[k2 - 1] = attn_gguf_kv_str("tokenizer.chat_template", "x");
    e[k2++] = attn_gguf_kv_str("tokenizer.ggml.bos_token_id", "0");
    expect_bad_tok(e, k2, ATTN_STATUS_FORMAT, "key 'tokenizer.ggml.bos_token_id' is string, expected an integer", NULL);
    /* SentencePiece: scores */
    memcpy(e, kv, sizeof kv);
    e[0] = attn_gguf_kv_str("tokenizer.ggml.model", "llama");
    expect_bad_tok(e, k, ATTN_STATUS_NOT_FOUND, "no key 'tokenizer.ggml.scores'", NULL);
    e[k] = attn_gguf_kv_arr("tokenizer.ggml.scores", ATTN_GGUF_TYPE_FLOAT32, 5, scores);
    expect_bad_tok(e, k + 1, ATTN_STATUS_FORMAT, "tokenizer.ggml.scores has 5 entries, tokens 6", NULL);
    scores[2] = NAN;
    e[k] = attn_gguf_kv_arr("tokenizer.ggml.scores", ATTN_GGUF_TYPE_FLOAT32, 6, scores);
    expect_bad_tok(e, k + 1, ATTN_STATUS_FORMAT, "tokenizer.ggml.scores[2] is NaN", NULL);
    /* WordPiece: [CLS] / [SEP] needed */
    memcpy(e, kv, sizeof kv);
    e[0] = attn_gguf_kv_str("tokenizer.ggml.model", "bert");
    expect_bad_tok(e, k, ATTN_STATUS_FORMAT, "a bert tokenizer needs tokenizer.ggml.cls_token_id", NULL);
    attn_gguf_str dup[3] = {gs("\xe2\x96\x81##x"), gs("x"), gs("y")};
    int32_t dt[3] = {1, 1, 1};
    e[2] = attn_gguf_kv_arr("tokenizer.ggml.tokens", ATTN_GGUF_TYPE_STRING, 3, dup);
    e[3] = attn_gguf_kv_arr("tokenizer.ggml.token_type", ATTN_GGUF_TYPE_INT32, 3, dt);
    e[4] = attn_gguf_kv_u32("tokenizer.ggml.cls_token_id", 0);
    e[5] = attn_gguf_kv_u32("tokenizer.ggml.seperator_token_id", 0);
    expect_bad_tok(e, 6, ATTN_STATUS_FORMAT,
                   "tokenizer.ggml.tokens[1] \"##x\" is token 0 already (in WordPiece's spelling)", NULL);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "tokgguf")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_llamacpp),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_bad),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    for (size_t fi = 0; fi < N_FAMILIES; fi++) {
        attn_tok_free(g_tok[fi]);
        attn_gguf_close(g_gguf[fi]);
    }
    json_decref(g_cases);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}

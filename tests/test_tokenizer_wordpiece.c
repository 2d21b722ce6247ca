/* test_tokenizer_wordpiece.c — BERT's WordPiece pipeline (src/tok/: BertNormalizer, Unicode
 * normal forms, BertPreTokenizer / Whitespace / WhitespaceSplit, WordPiece, TemplateProcessing /
 * BertProcessing, the WordPiece decoder, truncation and padding) against Hugging Face
 * `tokenizers` 0.21.4, live:
 *
 *   reference   tools/ref_tokenizer_wordpiece.py (run by tests/run.sh into $ATTN_REF_DIR) makes 14
 *               tokenizer.json variants of the real all-MiniLM-L6-v2 one (cased, accent
 *               stripping on/off, no CJK handling, no cleaning, BertProcessing, no
 *               post-processor, a tiny vocabulary with [UNK] and a two-id special token, one
 *               without [UNK], generic normalizer/pre-tokenizer sequences) and records ids,
 *               type ids, attention and special-token masks of a table of hard texts, pairs,
 *               corpus lines, truncation (every strategy, side, length) and padding (fixed,
 *               longest, multiple-of, left); all must be identical (errors included).
 *   batches     attn_tok_encode_batch against tokenizers' encode_batch and against
 *               sentence-transformers' own MiniLM tokenization (max_seq_length 256, padding to
 *               the longest) and transformers' AutoTokenizer(padding=True, truncation=True,
 *               max_length=256), long inputs and pairs included.
 *   decodes     every hard case decoded, with and without special tokens, plus the cleanup
 *               rules: identical strings.
 *   classes     every code point (surrogates excepted) through each normalizer alone
 *               (clean_text, CJK spacing, accent stripping, Lowercase, NFD, NFKD, NFC, NFKC,
 *               StripAccents) and each splitting pre-tokenizer: identical to tokenizers'.
 *   save        every variant saved by attn and reloaded gives the same encodings; the saved
 *               MiniLM file loads in tokenizers with identical results (tools/check_tokenizer.py).
 *   speed       1,000 corpus sentences encoded in one batch: time printed (not asserted).
 *   bad input   malformed WordPiece / template / truncation / padding / Split fields, bad
 *               params, unknown words without [UNK]: the right status and a one-line message.
 *
 * Needs models/all-MiniLM-L6-v2 (sh tools/get_minilm.sh) for the reference files; parts that
 * lack them are skipped (tu_skip). */
#include "../src/tok/tok-impl.h" /* tok_norm_apply, tok_split_apply: the per-code-point classes */
#include "attn_tok.h"
#include "tu.h"
#include "tu_tok.h"

#include <jansson.h>
#include <time.h>
#include <unistd.h>

static json_t *g_root;

static json_t *cases_root(void) {
    if (g_root) return g_root;
    size_t n;
    char *txt = tu_read_all(tu_ref_path("wp_cases.json"), &n);
    if (!txt) return NULL;
    json_error_t err;
    g_root = json_loadb(txt, n, JSON_ALLOW_NUL, &err);
    free(txt);
    if (!g_root) fail_msg("wp_cases.json: %s", err.text);
    return g_root;
}

#define SKIP_IF_NO_REF()                                                                           \
    json_t *root = cases_root();                                                                   \
    if (!root)                                                                                     \
        tu_skip("%s missing (tools/ref_tokenizer_wordpiece.py needs models/all-MiniLM-L6-v2: "     \
                "sh tools/get_minilm.sh)",                                                         \
                tu_ref_path("wp_cases.json"));

/* The variant's tokenizer, loaded once. */
#define MAX_VARIANTS 32
static struct {
    char name[32];
    attn_tok *t;
} g_tok[MAX_VARIANTS];

static attn_tok *variant(json_t *root, const char *name) {
    int i = 0;
    for (; i < MAX_VARIANTS && g_tok[i].t; i++)
        if (!strcmp(g_tok[i].name, name)) return g_tok[i].t;
    assert_true(i < MAX_VARIANTS);
    const char *file = json_string_value(json_object_get(json_object_get(root, "files"), name));
    assert_non_null(file);
    char path[4200];
    snprintf(path, sizeof path, "%s", tu_ref_path(file));
    if (attn_tok_load(path, &g_tok[i].t)) fail_msg("%s: %s", path, attn_last_error());
    snprintf(g_tok[i].name, sizeof g_tok[i].name, "%s", name);
    return g_tok[i].t;
}

static void free_variants(void) {
    for (int i = 0; i < MAX_VARIANTS; i++) {
        attn_tok_free(g_tok[i].t);
        g_tok[i].t = NULL;
    }
}

/* The reference's params object (or "file") as attn_tok_encode_params. */
static attn_tok_encode_params params_of(const attn_tok *t, json_t *p) {
    if (json_is_string(p)) return attn_tok_file_params(t);
    attn_tok_encode_params e = attn_tok_encode_default_params();
    e.add_special_tokens = json_is_true(json_object_get(p, "add_special_tokens"));
    json_t *tr = json_object_get(p, "truncation");
    if (json_is_object(tr)) {
        const char *s = json_string_value(json_object_get(tr, "strategy"));
        e.truncation = !strcmp(s, "longest_first") ? ATTN_TOK_TRUNCATE_LONGEST_FIRST
                       : !strcmp(s, "only_first")  ? ATTN_TOK_TRUNCATE_ONLY_FIRST
                                                   : ATTN_TOK_TRUNCATE_ONLY_SECOND;
        e.max_length = (size_t)json_integer_value(json_object_get(tr, "max_length"));
        e.truncation_side = !strcmp(json_string_value(json_object_get(tr, "direction")), "left")
                                ? ATTN_TOK_LEFT
                                : ATTN_TOK_RIGHT;
    }
    json_t *pd = json_object_get(p, "padding");
    if (json_is_object(pd)) {
        json_t *len = json_object_get(pd, "length"), *mul = json_object_get(pd, "multiple");
        e.padding = json_is_integer(len) ? ATTN_TOK_PAD_FIXED : ATTN_TOK_PAD_LONGEST;
        e.pad_length = json_is_integer(len) ? (size_t)json_integer_value(len) : 0;
        e.pad_to_multiple_of = json_is_integer(mul) ? (size_t)json_integer_value(mul) : 0;
        e.padding_side = !strcmp(json_string_value(json_object_get(pd, "direction")), "left")
                             ? ATTN_TOK_LEFT
                             : ATTN_TOK_RIGHT;
        e.pad_id = (int32_t)json_integer_value(json_object_get(pd, "pad_id"));
        e.pad_type_id = (int32_t)json_integer_value(json_object_get(pd, "pad_type_id"));
    }
    return e;
}

static bool same(const int32_t *got, size_t n, json_t *want) {
    if (!want) return true; /* not recorded by this source */
    if (json_array_size(want) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (got[i] != json_integer_value(json_array_get(want, i))) return false;
    return true;
}

static bool same_encoding(const attn_tok_encoding *e, json_t *c) {
    return same(e->ids, e->n, json_object_get(c, "ids")) &&
           same(e->type_ids, e->n, json_object_get(c, "type_ids")) &&
           same(e->attention_mask, e->n, json_object_get(c, "attention_mask")) &&
           same(e->special_mask, e->n, json_object_get(c, "special_tokens_mask"));
}

static void show_json_ids(const char *what, json_t *a) {
    printf("    %s [", what);
    for (size_t i = 0; i < json_array_size(a) && i < 40; i++)
        printf(i ? ", %d" : "%d", (int)json_integer_value(json_array_get(a, i)));
    printf("%s]\n", json_array_size(a) > 40 ? ", ..." : "");
}

static void show_diff(const attn_tok_encoding *e, json_t *c) {
    print_ids("attn ids     ", e->ids, e->n);
    show_json_ids("hf   ids     ", json_object_get(c, "ids"));
    print_ids("attn type_ids", e->type_ids, e->n);
    show_json_ids("hf   type_ids", json_object_get(c, "type_ids"));
    print_ids("attn special ", e->special_mask, e->n);
    show_json_ids("hf   special ", json_object_get(c, "special_tokens_mask"));
}

/* ---- reference cases ---- */

static void test_reference(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    json_t *cases = json_object_get(root, "cases");
    size_t nc = json_array_size(cases), bad = 0, errors = 0, plain = 0;
    for (size_t i = 0; i < nc; i++) {
        json_t *c = json_array_get(cases, i);
        const char *vname = json_string_value(json_object_get(c, "variant"));
        attn_tok *t = variant(root, vname);
        json_t *text = json_object_get(c, "text"), *pair = json_object_get(c, "pair");
        json_t *pj = json_object_get(c, "params");
        attn_tok_encode_params p = params_of(t, pj);
        attn_tok_encoding e;
        attn_status st = attn_tok_encode_ex(t, json_string_value(text), json_string_length(text),
                                            json_is_string(pair) ? json_string_value(pair) : NULL,
                                            json_string_length(pair), &p, &e);
        bool want_err = json_is_true(json_object_get(c, "error"));
        bool ok;
        if (want_err) {
            ok = st != ATTN_STATUS_OK;
            errors += ok;
            if (ok && strchr(attn_last_error(), '\n')) ok = false;
        } else {
            ok = st == ATTN_STATUS_OK && same_encoding(&e, c);
        }
        /* plain attn_tok_encode == encode_ex with the defaults */
        if (ok && !want_err && !json_is_string(pj) && !json_is_string(pair) &&
            json_is_true(json_object_get(pj, "add_special_tokens")) &&
            json_is_null(json_object_get(pj, "truncation")) &&
            json_is_null(json_object_get(pj, "padding"))) {
            size_t k;
            int32_t *ids = enc(t, json_string_value(text), json_string_length(text), &k);
            ok = k == e.n && (k == 0 || !memcmp(ids, e.ids, k * sizeof *ids));
            attn_free(ids);
            plain++;
        }
        if (!ok && ++bad <= 8) {
            printf("  case %zu (%s) text \"%.80s\" pair %s%.40s%s\n", i, vname,
                   json_string_value(text), json_is_string(pair) ? "\"" : "",
                   json_is_string(pair) ? json_string_value(pair) : "null",
                   json_is_string(pair) ? "\"" : "");
            char *pd = json_dumps(pj, JSON_COMPACT);
            printf("    params %s\n", pd);
            free(pd);
            if (st)
                printf("    attn: error: %s; hf: %s\n", attn_last_error(),
                       want_err ? json_string_value(json_object_get(c, "message")) : "ok");
            else if (want_err)
                printf("    attn: ok; hf: error: %s\n",
                       json_string_value(json_object_get(c, "message")));
            else
                show_diff(&e, c);
        }
        if (!st) attn_tok_encoding_free(&e);
    }
    printf("  reference (tokenizers %s): %zu/%zu encodings identical (%zu expected errors "
           "reproduced, %zu checked through attn_tok_encode too)\n",
           json_string_value(json_object_get(root, "version")), nc - bad, nc, errors, plain);
    assert_true(nc > 5000);
    assert_int_equal(bad, 0);
}

static void test_batches(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    json_t *batches = json_object_get(root, "batches");
    size_t nb = json_array_size(batches), bad = 0, rows = 0, st_rows = 0;
    for (size_t i = 0; i < nb; i++) {
        json_t *b = json_array_get(batches, i);
        attn_tok *t = variant(root, json_string_value(json_object_get(b, "variant")));
        json_t *texts = json_object_get(b, "texts"), *pairs = json_object_get(b, "pairs");
        size_t n = json_array_size(texts);
        const char **tv = calloc(n, sizeof *tv), **pv = calloc(n, sizeof *pv);
        size_t *tl = calloc(n, sizeof *tl), *pl = calloc(n, sizeof *pl);
        for (size_t k = 0; k < n; k++) {
            tv[k] = json_string_value(json_array_get(texts, k));
            tl[k] = json_string_length(json_array_get(texts, k));
            if (json_is_array(pairs)) {
                pv[k] = json_string_value(json_array_get(pairs, k));
                pl[k] = json_string_length(json_array_get(pairs, k));
            }
        }
        attn_tok_encode_params p = params_of(t, json_object_get(b, "params"));
        attn_tok_encoding *out = calloc(n, sizeof *out);
        attn_status st =
            attn_tok_encode_batch(t, n, tv, tl, json_is_array(pairs) ? pv : NULL, pl, &p, out);
        if (st) fail_msg("batch %zu: %s", i, attn_last_error());
        const char *src = json_string_value(json_object_get(b, "source"));
        for (size_t k = 0; k < n; k++) {
            json_t *want = json_array_get(json_object_get(b, "encodings"), k);
            rows++;
            if (!strcmp(src, "sentence-transformers")) st_rows++;
            if (!same_encoding(&out[k], want) && ++bad <= 5) {
                printf("  batch %zu (%s, %s) row %zu: \"%.60s\"\n", i,
                       json_string_value(json_object_get(b, "variant")), src, k, tv[k]);
                show_diff(&out[k], want);
            }
            attn_tok_encoding_free(&out[k]);
        }
        free(out);
        free(tv);
        free(pv);
        free(tl);
        free(pl);
    }
    printf("  batches: %zu/%zu rows identical over %zu batches (%zu rows from "
           "sentence-transformers' MiniLM tokenization)\n",
           rows - bad, rows, nb, st_rows);
    assert_true(rows > 100);
    assert_int_equal(bad, 0);
}

static void test_decodes(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    json_t *ds = json_object_get(root, "decodes");
    size_t n = json_array_size(ds), bad = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(ds, i);
        attn_tok *t = variant(root, json_string_value(json_object_get(d, "variant")));
        json_t *ids = json_object_get(d, "ids");
        size_t k = json_array_size(ids);
        int32_t *v = malloc((k + 1) * sizeof *v);
        for (size_t j = 0; j < k; j++) v[j] = (int32_t)json_integer_value(json_array_get(ids, j));
        size_t len;
        unsigned fl =
            json_is_true(json_object_get(d, "skip_special")) ? 0 : ATTN_TOK_DECODE_KEEP_SPECIAL;
        char *s = dec(t, v, k, fl, &len);
        json_t *w = json_object_get(d, "text");
        if ((len != json_string_length(w) || memcmp(s, json_string_value(w), len)) && ++bad <= 5)
            printf("  decode %zu (%s): attn \"%s\" / hf \"%s\"\n", i,
                   json_string_value(json_object_get(d, "variant")), s, json_string_value(w));
        attn_free(s);
        free(v);
    }
    printf("  decodes: %zu/%zu identical\n", n - bad, n);
    assert_true(n > 500);
    assert_int_equal(bad, 0);
}

/* ---- every code point ---- */

/* The output of one normalizer (or class of one pre-tokenizer) for code point cp. */
typedef struct {
    const char *name;
    const tok_norm *norm;
    const tok_pre *pre;
} probe;

static void probe_out(const probe *pr, uint32_t cp, tok_buf *out, void **md) {
    char u[6];
    size_t k = tok_utf8_encode(cp, u);
    out->n = 0;
    if (pr->norm && !strcmp(pr->name, "nfd_order")) { /* "R" if NFD(c U+0334) != NFD(c) U+0334 */
        tok_buf a = {0};
        assert_true(tok_norm_apply(pr->norm, u, k, &a));
        tok_buf_put(&a, "\xCC\xB4", 2);
        memcpy(u + k, "\xCC\xB4", 2);
        assert_true(tok_norm_apply(pr->norm, u, k + 2, out));
        bool moved = out->n != a.n || memcmp(out->p, a.p, a.n);
        tok_buf_free(&a);
        out->n = 0;
        if (moved)
            tok_buf_putc(out, 'R');
        else
            tok_buf_put(out, u, k);
        return;
    }
    if (pr->norm) {
        assert_true(tok_norm_apply(pr->norm, u, k, out));
        if (pr->norm->kind == TOK_NORM_BERT && pr->norm->chinese && out->n == k + 2 &&
            out->p[0] == ' ' && out->p[k + 1] == ' ' && !memcmp(out->p + 1, u, k)) {
            out->n = 0;
            tok_buf_putc(out, 'S');
        }
        return;
    }
    /* 'a' cp 'a' through the pre-tokenizer: W (cp removed), a class letter (cp alone), or
     * unchanged (merged with the letters) */
    char s[6] = {'a'};
    memcpy(s + 1, u, k);
    s[k + 1] = 'a';
    tok_strlist l = {0};
    assert_true(tok_split_apply(pr->pre, md, s, k + 2, 1, &l));
    if (l.n == 2 && cp != 'a')
        tok_buf_putc(out, 'W');
    else if (l.n == 3)
        tok_buf_putc(out, pr->pre->kind == TOK_PRE_BERT ? 'P' : 'O');
    else
        tok_buf_put(out, u, k);
    tok_strlist_free(&l);
}

static void test_classes(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    json_t *classes = json_object_get(root, "classes");
    tok_norm bert = {.kind = TOK_NORM_BERT, .strip_accents = 0};
    tok_norm clean = bert, cjk = bert, strip = bert;
    clean.clean = true;
    cjk.chinese = true;
    strip.strip_accents = 1;
    tok_norm lower = {.kind = TOK_NORM_LOWERCASE}, nfd = {.kind = TOK_NORM_NFD},
             nfkd = {.kind = TOK_NORM_NFKD}, nfc = {.kind = TOK_NORM_NFC},
             nfkc = {.kind = TOK_NORM_NFKC}, sa = {.kind = TOK_NORM_STRIP_ACCENTS};
    /* pre-tokenizers from a tokenizer.json, so that Whitespace's regex is compiled */
    static const char pre_json[] =
        "{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
        "\"BertPreTokenizer\"}, {\"type\": \"Whitespace\"}, {\"type\": \"WhitespaceSplit\"}]}, "
        "\"model\": {\"type\": \"WordLevel\", \"vocab\": {}}}";
    attn_reader r;
    assert_int_equal(attn_reader_open_memory(pre_json, strlen(pre_json), "pre.json", &r), 0);
    attn_tok *t;
    if (attn_tok_load_reader(r, &t)) fail_msg("%s", attn_last_error());
    const probe probes[] = {{"clean", &clean, NULL},
                            {"chinese", &cjk, NULL},
                            {"strip", &strip, NULL},
                            {"lower", &lower, NULL},
                            {"nfd", &nfd, NULL},
                            {"nfkd", &nfkd, NULL},
                            {"nfc", &nfc, NULL},
                            {"nfkc", &nfkc, NULL},
                            {"strip_accents", &sa, NULL},
                            {"nfd_order", &nfd, NULL},
                            {"bert_pre", NULL, &t->pre[0]},
                            {"ws_pre", NULL, &t->pre[1]},
                            {"wss_pre", NULL, &t->pre[2]}};
    tok_buf out = {0};
    void *md = NULL;
    bool dump = getenv("ATTN_DUMP_CLASSES") != NULL;
    /* Under valgrind (tu_valgrind), a sample: every code point below U+0800, the first and last
     * of each run the reference lists, and every 97th above (about 1/40 of them). */
    const bool sample = tu_valgrind();
    size_t total_bad = 0;
    for (size_t q = 0; q < sizeof probes / sizeof probes[0]; q++) {
        json_t *runs = json_object_get(classes, probes[q].name);
        assert_non_null(runs);
        size_t nr = json_array_size(runs), ri = 0, bad = 0, checked = 0, changed = 0;
        for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
            if (cp >= 0xD800 && cp < 0xE000) continue;
            while (ri < nr &&
                   (uint32_t)json_integer_value(json_array_get(json_array_get(runs, ri), 1)) < cp)
                ri++;
            json_t *run = ri < nr ? json_array_get(runs, ri) : NULL;
            if (sample && cp >= 0x800 && cp % 97 &&
                !(run && (cp == (uint32_t)json_integer_value(json_array_get(run, 0)) ||
                          cp == (uint32_t)json_integer_value(json_array_get(run, 1)))))
                continue;
            char u[4];
            const char *want;
            size_t wn;
            if (run && (uint32_t)json_integer_value(json_array_get(run, 0)) <= cp) {
                want = json_string_value(json_array_get(run, 2));
                wn = json_string_length(json_array_get(run, 2));
                changed++;
            } else {
                want = u;
                wn = tok_utf8_encode(cp, u);
            }
            probe_out(&probes[q], cp, &out, &md);
            checked++;
            if (out.n != wn || memcmp(out.p, want, wn)) {
                if (dump) {
                    fprintf(stderr, "%s %X attn:", probes[q].name, (unsigned)cp);
                    for (size_t j = 0; j < out.n; j++)
                        fprintf(stderr, " %02X", (unsigned char)out.p[j]);
                    fprintf(stderr, " hf:");
                    for (size_t j = 0; j < wn; j++)
                        fprintf(stderr, " %02X", (unsigned char)want[j]);
                    fprintf(stderr, "\n");
                }
                if (++bad <= 3)
                    printf("    %s U+%04X: attn \"%.*s\" (%zu bytes), tokenizers \"%.*s\" (%zu "
                           "bytes)\n",
                           probes[q].name, (unsigned)cp, (int)out.n, out.p, out.n, (int)wn, want,
                           wn);
            }
        }
        printf("  %-13s %zu/%zu code points as tokenizers (%zu changed by it)\n", probes[q].name,
               checked - bad, checked, changed);
        total_bad += bad;
    }
    tok_buf_free(&out);
    tok_byte_level_md_free(md);
    attn_tok_free(t);
    assert_int_equal(total_bad, 0);
}

static void test_norms(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    static const struct {
        const char *name;
        tok_norm n;
    } norms[] = {
        {"nfd", {.kind = TOK_NORM_NFD}},
        {"nfkd", {.kind = TOK_NORM_NFKD}},
        {"nfc", {.kind = TOK_NORM_NFC}},
        {"nfkc", {.kind = TOK_NORM_NFKC}},
        {"lower", {.kind = TOK_NORM_LOWERCASE}},
        {"strip_accents", {.kind = TOK_NORM_STRIP_ACCENTS}},
        {"strip", {.kind = TOK_NORM_STRIP, .left = true, .right = true}},
        {"lstrip", {.kind = TOK_NORM_STRIP, .left = true}},
        {"rstrip", {.kind = TOK_NORM_STRIP, .right = true}},
        {"bert",
         {.kind = TOK_NORM_BERT,
          .clean = true,
          .chinese = true,
          .lower = true,
          .strip_accents = -1}},
        {"bert_cased",
         {.kind = TOK_NORM_BERT, .clean = true, .chinese = true, .strip_accents = -1}},
        {"bert_strip", {.kind = TOK_NORM_BERT, .clean = true, .chinese = true, .strip_accents = 1}},
    };
    json_t *cs = json_object_get(root, "norms");
    size_t n = json_array_size(cs), bad = 0;
    tok_buf out = {0};
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(cs, i);
        const char *name = json_string_value(json_object_get(c, "norm"));
        size_t k = 0;
        while (k < sizeof norms / sizeof norms[0] && strcmp(norms[k].name, name)) k++;
        assert_true(k < sizeof norms / sizeof norms[0]);
        json_t *text = json_object_get(c, "text"), *want = json_object_get(c, "out");
        out.n = 0;
        assert_true(
            tok_norm_apply(&norms[k].n, json_string_value(text), json_string_length(text), &out));
        if ((out.n != json_string_length(want) || memcmp(out.p, json_string_value(want), out.n)) &&
            ++bad <= 5)
            printf("  %s(\"%s\"): attn \"%.*s\", tokenizers \"%s\"\n", name,
                   json_string_value(text), (int)out.n, out.p, json_string_value(want));
    }
    tok_buf_free(&out);
    printf("  normalizers on whole texts: %zu/%zu identical\n", n - bad, n);
    assert_true(n > 1000);
    assert_int_equal(bad, 0);
}

/* ---- save, reload, and tokenizers on attn's file ---- */

static const char *py_path(void) {
    static char buf[4096];
    const char *root = getenv("ATTN_ROOT");
    snprintf(buf, sizeof buf, "%s/.venv/bin/python", root ? root : ".");
    return access(buf, X_OK) == 0 ? buf : NULL;
}

/* The saved files test_save prepared for tools/check_tokenizer.py (spec files and the variant
 * names), which test_save_python runs: a cmocka test of its own, skipped alone without the
 * project venv. */
static char g_hf_spec[MAX_VARIANTS][1100], g_hf_name[MAX_VARIANTS][128];
static size_t g_n_hf;
static bool g_save_done; /* test_save went through every variant */

static void test_save(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    json_t *files = json_object_get(root, "files"), *cases = json_object_get(root, "cases");
    const char *vname;
    json_t *v;
    size_t checked = 0, bad = 0;
    g_n_hf = 0;
    json_object_foreach(files, vname, v) {
        attn_tok *t = variant(root, vname), *t2;
        char path[1100], name[64];
        snprintf(name, sizeof name, "saved_%zu.json", g_n_hf);
        snprintf(path, sizeof path, "%s", tu_tmp(name));
        if (attn_tok_save(t, path)) fail_msg("save %s: %s", vname, attn_last_error());
        if (attn_tok_load(path, &t2)) fail_msg("reload %s: %s", vname, attn_last_error());
        assert_int_equal(attn_tok_vocab_size(t), attn_tok_vocab_size(t2));
        assert_string_equal(attn_tok_model_type(t), attn_tok_model_type(t2));
        json_t *hf = json_array();
        for (size_t i = 0; i < json_array_size(cases); i++) {
            json_t *c = json_array_get(cases, i);
            if (strcmp(json_string_value(json_object_get(c, "variant")), vname)) continue;
            json_t *text = json_object_get(c, "text"), *pair = json_object_get(c, "pair");
            attn_tok_encode_params p = params_of(t, json_object_get(c, "params"));
            attn_tok_encode_params p2 = params_of(t2, json_object_get(c, "params"));
            attn_tok_encoding e1, e2;
            const char *ps = json_is_string(pair) ? json_string_value(pair) : NULL;
            attn_status s1 =
                attn_tok_encode_ex(t, json_string_value(text), json_string_length(text), ps,
                                   json_string_length(pair), &p, &e1);
            attn_status s2 =
                attn_tok_encode_ex(t2, json_string_value(text), json_string_length(text), ps,
                                   json_string_length(pair), &p2, &e2);
            checked++;
            bool ok = s1 == s2;
            if (ok && !s1) ok = e1.n == e2.n && !memcmp(e1.ids, e2.ids, 4 * e1.n * sizeof *e1.ids);
            if (!ok && ++bad <= 3) printf("  %s case %zu differs after save + load\n", vname, i);
            /* the plain cases (no truncation, no padding) for tokenizers to check */
            json_t *pj = json_object_get(c, "params");
            if (json_is_object(pj) && json_is_true(json_object_get(pj, "add_special_tokens")) &&
                json_is_null(json_object_get(pj, "truncation")) &&
                json_is_null(json_object_get(pj, "padding")) && json_array_size(hf) < 400) {
                json_t *hc = json_object();
                json_object_set(hc, "text", text);
                if (ps) json_object_set(hc, "pair", pair);
                if (s1) {
                    json_object_set_new(hc, "error", json_true());
                } else {
                    json_t *ids = json_array(), *types = json_array();
                    for (size_t k = 0; k < e1.n; k++) {
                        json_array_append_new(ids, json_integer(e1.ids[k]));
                        json_array_append_new(types, json_integer(e1.type_ids[k]));
                    }
                    size_t dl;
                    char *d = dec(t, e1.ids, e1.n, 0, &dl);
                    json_object_set_new(hc, "ids", ids);
                    json_object_set_new(hc, "type_ids", types);
                    json_object_set_new(hc, "decode", json_stringn(d, dl));
                    attn_free(d);
                }
                json_array_append_new(hf, hc);
            }
            if (!s1) attn_tok_encoding_free(&e1);
            if (!s2) attn_tok_encoding_free(&e2);
        }
        if (json_array_size(hf)) {
            assert_true(g_n_hf < MAX_VARIANTS);
            json_t *spec = json_object();
            json_object_set_new(spec, "tokenizer", json_string(path));
            json_object_set_new(spec, "file_settings", json_false());
            json_object_set_new(spec, "cases", hf);
            hf = NULL;
            snprintf(name, sizeof name, "check_cases_%zu.json", g_n_hf);
            snprintf(g_hf_spec[g_n_hf], sizeof g_hf_spec[0], "%s", tu_tmp(name));
            snprintf(g_hf_name[g_n_hf], sizeof g_hf_name[0], "%s", vname);
            assert_int_equal(json_dump_file(spec, g_hf_spec[g_n_hf], JSON_COMPACT), 0);
            json_decref(spec);
            g_n_hf++;
        }
        json_decref(hf);
        attn_tok_free(t2);
    }
    printf("  save + reload: %zu/%zu encodings identical; %zu saved files for tokenizers to check "
           "(test_save_python)\n",
           checked - bad, checked, g_n_hf);
    assert_int_equal(bad, 0);
    g_save_done = true;
}

/* tokenizers loads each file test_save wrote and agrees on its ids, type ids and decodes */
static void test_save_python(void **state) {
    (void)state;
    const char *py = py_path();
    if (!py) tu_skip(".venv/bin/python missing (sh tools/install_deps.sh)");
    if (!g_save_done) tu_skip("test_save did not prepare the files (it failed or was skipped)");
    assert_true(g_n_hf > 0);
    for (size_t i = 0; i < g_n_hf; i++) {
        char cmd[9000], prefix[160];
        snprintf(cmd, sizeof cmd, "%s tools/check_tokenizer.py '%.1099s'", py, g_hf_spec[i]);
        snprintf(prefix, sizeof prefix, "  %s: ", g_hf_name[i]);
        int rc = tu_sh_indented(cmd, prefix);
        if (rc != 0)
            fail_msg("tools/check_tokenizer.py failed on attn's %s (status %d)", g_hf_name[i], rc);
    }
    printf("  %zu saved files checked by tokenizers\n", g_n_hf);
}

/* ---- speed ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_speed(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    attn_tok *t = variant(root, "minilm");
    json_t *cases = json_object_get(root, "cases");
    const char *texts[1000];
    size_t lens[1000], n = 0, bytes = 0;
    for (size_t i = json_array_size(cases); i-- > 0 && n < 1000;) {
        json_t *c = json_array_get(cases, i);
        json_t *pj = json_object_get(c, "params"), *text = json_object_get(c, "text");
        if (strcmp(json_string_value(json_object_get(c, "variant")), "minilm") ||
            !json_is_object(pj) || !json_is_null(json_object_get(c, "pair")) ||
            !json_is_null(json_object_get(pj, "padding")) ||
            !json_is_null(json_object_get(pj, "truncation")) || json_string_length(text) < 10)
            continue;
        texts[n] = json_string_value(text);
        lens[n] = json_string_length(text);
        bytes += lens[n++];
    }
    attn_tok_encode_params p = attn_tok_encode_default_params();
    p.truncation = ATTN_TOK_TRUNCATE_LONGEST_FIRST;
    p.max_length = 256;
    p.padding = ATTN_TOK_PAD_LONGEST;
    attn_tok_encoding *out = calloc(n, sizeof *out);
    double best = 1e9;
    size_t tokens = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s();
        if (attn_tok_encode_batch(t, n, texts, lens, NULL, NULL, &p, out))
            fail_msg("%s", attn_last_error());
        double dt = now_s() - t0;
        if (dt < best) best = dt;
        tokens = 0;
        for (size_t i = 0; i < n; i++) {
            for (size_t k = 0; k < out[i].n; k++) tokens += (size_t)out[i].attention_mask[k];
            attn_tok_encoding_free(&out[i]);
        }
    }
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        attn_tok_encoding e;
        if (attn_tok_encode_ex(t, texts[i], lens[i], NULL, 0, &p, &e))
            fail_msg("%s", attn_last_error());
        attn_tok_encoding_free(&e);
    }
    double one = now_s() - t0;
    printf("  speed: %zu sentences (%zu bytes, %zu tokens): batch %.2f ms (%.0f sentences/s, "
           "%.1f MB/s); one by one %.2f ms\n",
           n, bytes, tokens, best * 1e3, (double)n / best, (double)bytes / best / 1e6, one * 1e3);
    free(out);
    assert_true(n >= 500);
}

/* ---- bad input ---- */

static void bad_json(const char *json, attn_status want, const char *sub) {
    attn_reader r;
    assert_int_equal(attn_reader_open_memory(json, strlen(json), "mem.json", &r), 0);
    attn_tok *t = (attn_tok *)1;
    attn_status st = attn_tok_load_reader(r, &t);
    if (!st) attn_tok_free(t);
    if (st) assert_null(t);
    tu_expect_fail(st, want, "mem.json", sub);
}

#define WP(extra)                                                                                  \
    "{\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0, \"a\": 1, \"##b\": 2}" extra "}"
#define TOK(fields) "{" fields "\"model\": " WP("") "}"
#define TPL(single, pair, special)                                                                 \
    TOK("\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": " single               \
        ", \"pair\": " pair ", \"special_tokens\": " special "}, ")
#define SA "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}"
#define SB "{\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}"
#define SX "{\"SpecialToken\": {\"id\": \"X\", \"type_id\": 0}}"
#define SPX "{\"X\": {\"id\": \"X\", \"ids\": [1], \"tokens\": [\"a\"]}}"
#define SPLIT(pat, rest)                                                                           \
    TOK("\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": " pat rest "}, ")

static void test_bad_input(void **state) {
    (void)state;
    const attn_status F = ATTN_STATUS_FORMAT, U = ATTN_STATUS_UNSUPPORTED,
                      I = ATTN_STATUS_INVALID_ARGUMENT;
    bad_json("{\"model\": " WP(", \"max_input_chars_per_word\": -1") "}", F,
             "max_input_chars_per_word");
    bad_json("{\"model\": " WP(", \"max_input_chars_per_word\": \"x\"") "}", F, "max_input_chars");
    bad_json("{\"model\": " WP(", \"unk_token\": 5") "}", F, "model.unk_token");
    bad_json("{\"model\": " WP(", \"continuing_subword_prefix\": null") "}", F,
             "continuing_subword_prefix");
    bad_json("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0, \"b\": 0}}}", F, "id 0");
    bad_json("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 99999999999}}}",
             ATTN_STATUS_TOO_LARGE, "too large");
    bad_json("{\"model\": {\"type\": \"WordLevel\", \"unk_token\": [], \"vocab\": {}}}", F,
             "unk_token");
    bad_json(TOK("\"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": \"yes\"}, "), F,
             "normalizer.clean_text");
    bad_json(TOK("\"normalizer\": {\"type\": \"BertNormalizer\", \"strip_accents\": 1}, "), F,
             "strip_accents");
    bad_json(TOK("\"normalizer\": {\"type\": \"Strip\", \"strip_left\": 1}, "), F, "strip_left");
    bad_json(SPLIT("{\"String\": \"a\"}", ""), F, "behavior");
    bad_json(SPLIT("{\"Foo\": \"a\"}", ", \"behavior\": \"Isolated\""), F, "pattern");
    bad_json(SPLIT("{\"String\": \"a\", \"Regex\": \"b\"}", ", \"behavior\": \"Isolated\""), F,
             "pattern");
    bad_json(SPLIT("{\"String\": \"a\"}", ", \"behavior\": \"Bogus\""), F, "MergedWithPrevious");
    bad_json(SPLIT("{\"String\": \"a\"}", ", \"behavior\": \"Removed\", \"invert\": 1"), F,
             "invert");
    bad_json(SPLIT("{\"String\": \"\"}", ", \"behavior\": \"Removed\""), U, "empty pattern");
    bad_json(SPLIT("{\"Regex\": \"[a\"}", ", \"behavior\": \"Removed\""), U, "unterminated");
    bad_json(SPLIT("{\"Regex\": \"(a\"}", ", \"behavior\": \"Removed\""), U, "PCRE2");
    bad_json(SPLIT("{\"Regex\": \"[a&&b]\"}", ", \"behavior\": \"Removed\""), U, "&&");
    bad_json(SPLIT("{\"Regex\": \"[a[b]]\"}", ", \"behavior\": \"Removed\""), U, "nested");
    bad_json(SPLIT("{\"Regex\": \"[\\\\W]\"}", ", \"behavior\": \"Removed\""), U, "\\W");
    bad_json(SPLIT("{\"Regex\": \"a\\\\\"}", ", \"behavior\": \"Removed\""), U, "backslash");
    bad_json(TOK("\"pre_tokenizer\": {\"type\": \"Punctuation\", \"behavior\": \"X\"}, "), F,
             "behavior");
    bad_json(TOK("\"decoder\": {\"type\": \"WordPiece\", \"prefix\": 5}, "), F, "decoder.prefix");
    bad_json(TOK("\"decoder\": {\"type\": \"WordPiece\", \"cleanup\": \"x\"}, "), F, "cleanup");
    bad_json(TPL("[" SA "]", "[" SA "," SB "]", "[]"), F, "special_tokens");
    bad_json(
        TOK("\"post_processor\": {\"type\": \"TemplateProcessing\", \"special_tokens\": {}}, "), F,
        "post_processor.single");
    bad_json(TPL("[" SX "," SA "]", "[" SA "," SB "]", "{}"), F, "not in special_tokens");
    bad_json(TPL("[" SA "," SB "]", "[" SA "," SB "]", "{}"), F, "post_processor.single");
    bad_json(TPL("[" SA "]", "[" SA "," SA "]", "{}"), F, "post_processor.pair");
    bad_json(TPL("[" SA "]", "[" SA "," SB ", 5]", "{}"), F, "post_processor.pair[2]");
    bad_json(TPL("[{\"Sequence\": {\"id\": \"C\", \"type_id\": 0}}]", "[" SA "," SB "]", "{}"), F,
             "\"A\" or \"B\"");
    bad_json(TPL("[" SA "]", "[" SA "," SB "]",
                 "{\"X\": {\"id\": \"X\", \"ids\": [1, 2], \"tokens\": [\"a\"]}}"),
             F, "equal lengths");
    bad_json(TPL("[" SX "," SA "]", "[" SA "," SB "]",
                 "{\"X\": {\"id\": \"X\", \"ids\": [7], \"tokens\": [\"q\"]}}"),
             F, "outside the vocabulary");
    bad_json(TPL("[" SA "]", "[" SA "," SB "]", SPX "x"), F, "not valid JSON");
    bad_json(TOK("\"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"a\"], \"cls\": "
                 "[\"a\", 1]}, "),
             F, "post_processor.sep");
    bad_json(TOK("\"truncation\": {\"max_length\": 5, \"stride\": 0, \"strategy\": \"Bogus\"}, "),
             F, "truncation.strategy");
    bad_json(
        TOK("\"truncation\": {\"max_length\": -5, \"stride\": 0, \"strategy\": \"OnlyFirst\"}, "),
        F, "truncation.max_length");
    bad_json(TOK("\"truncation\": {\"max_length\": 5, \"stride\": 0, \"strategy\": \"OnlyFirst\", "
                 "\"direction\": \"Up\"}, "),
             F, "truncation.direction");
    bad_json(TOK("\"truncation\": [], "), F, "truncation");
    bad_json(TOK("\"padding\": {\"strategy\": \"Fixed\"}, "), F, "padding.strategy");
    bad_json(TOK("\"padding\": {\"strategy\": {\"Fixed\": -1}}, "), F, "Fixed");
    bad_json(TOK("\"padding\": {\"strategy\": \"BatchLongest\", \"pad_to_multiple_of\": \"x\"}, "),
             F, "pad_to_multiple_of");
    bad_json(TOK("\"padding\": {\"strategy\": \"BatchLongest\", \"pad_token\": 5}, "), F,
             "pad_token");
    bad_json(TOK("\"padding\": {\"strategy\": \"BatchLongest\", \"pad_id\": -1}, "), F, "pad_id");

    /* encoding */
    static const char ok_json[] =
        TOK("\"normalizer\": {\"type\": \"BertNormalizer\"}, \"pre_tokenizer\": {\"type\": "
            "\"BertPreTokenizer\"}, \"post_processor\": {\"type\": \"BertProcessing\", \"sep\": "
            "[\"a\", 1], \"cls\": [\"[UNK]\", 0]}, ");
    attn_reader r;
    assert_int_equal(attn_reader_open_memory(ok_json, strlen(ok_json), "ok.json", &r), 0);
    attn_tok *t;
    if (attn_tok_load_reader(r, &t)) fail_msg("%s", attn_last_error());
    attn_tok_encoding e;
    attn_tok_encode_params p = attn_tok_encode_default_params();
    assert_int_equal(attn_tok_encode_ex(t, "ab ab", 5, NULL, 0, &p, &e), 0);
    assert_int_equal(e.n, 6); /* cls ([UNK]) a ##b a ##b sep ("a") */
    assert_int_equal(e.ids[0], 0);
    assert_int_equal(e.ids[2], 2);
    assert_int_equal(e.ids[5], 1);
    attn_tok_encoding_free(&e);
    tu_expect_fail(attn_tok_encode_ex(t, "a\xff", 2, NULL, 0, &p, &e), I, "UTF-8", "offset 1");
    assert_null(e.ids);
    tu_expect_fail(attn_tok_encode_ex(t, "a", 1, "\xc3", 1, &p, &e), I, "UTF-8", NULL);
    tu_expect_fail(attn_tok_encode_ex(NULL, "a", 1, NULL, 0, &p, &e), I, "NULL", NULL);
    tu_expect_fail(attn_tok_encode_ex(t, "a", 1, NULL, 0, &p, NULL), I, "NULL", NULL);
    tu_expect_fail(attn_tok_encode_ex(t, NULL, 3, NULL, 0, &p, &e), I, "NULL", NULL);
    tu_expect_fail(attn_tok_encode_ex(t, "a", 1, NULL, 3, &p, &e), I, "pair", NULL);
    p.truncation = (attn_tok_truncation)9;
    tu_expect_fail(attn_tok_encode_ex(t, "a", 1, NULL, 0, &p, &e), I, "enum", NULL);
    p = attn_tok_encode_default_params();
    p.pad_id = -2;
    tu_expect_fail(attn_tok_encode_ex(t, "a", 1, NULL, 0, &p, &e), I, "pad_id", NULL);
    p = attn_tok_encode_default_params();
    p.padding = ATTN_TOK_PAD_FIXED;
    p.pad_length = (size_t)1 << 40;
    tu_expect_fail(attn_tok_encode_ex(t, "a", 1, NULL, 0, &p, &e), I, "pad_length", NULL);
    p = attn_tok_encode_default_params();
    p.truncation = ATTN_TOK_TRUNCATE_ONLY_SECOND;
    p.max_length = 5; /* 2 tokens for the texts */
    tu_expect_fail(attn_tok_encode_ex(t, "a a a a", 7, NULL, 0, &p, &e), I, "ONLY_SECOND", NULL);
    tu_expect_fail(attn_tok_encode_ex(t, "a a a a", 7, "a", 1, &p, &e), I, "second text has 1",
                   NULL);
    const char *texts[] = {"a", "a\xff", "a"};
    attn_tok_encoding out[3];
    tu_expect_fail(attn_tok_encode_batch(t, 3, texts, NULL, NULL, NULL, NULL, out), I,
                   "text 1 of the batch", "UTF-8");
    for (int i = 0; i < 3; i++) assert_null(out[i].ids);
    tu_expect_fail(attn_tok_encode_batch(t, 3, NULL, NULL, NULL, NULL, NULL, out), I, "texts",
                   NULL);
    assert_int_equal(attn_tok_encode_batch(t, 0, NULL, NULL, NULL, NULL, NULL, NULL), 0);
    /* encode's ids buffer too small: the number needed, as before */
    int32_t ids[2];
    size_t n = 0;
    tu_expect_fail(attn_tok_encode(t, "a a", 3, ids, 2, &n), I, "needed", NULL);
    assert_int_equal(n, 4);
    attn_tok_free(t);

    /* a word neither in the vocabulary nor [UNK] */
    static const char nounk[] = "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}";
    assert_int_equal(attn_reader_open_memory(nounk, strlen(nounk), "nounk.json", &r), 0);
    if (attn_tok_load_reader(r, &t)) fail_msg("%s", attn_last_error());
    size_t k;
    int32_t *v = enc(t, "a", 1, &k);
    assert_int_equal(k, 1);
    attn_free(v);
    tu_expect_fail(attn_tok_encode_alloc(t, "ab", 2, &v, &k), I, "\"ab\" is not in the vocabulary",
                   "unk_token \"[UNK]\"");
    attn_tok_free(t);
}

static void test_special_ids(void **state) {
    (void)state;
    SKIP_IF_NO_REF();
    attn_tok *t = variant(root, "minilm");
    assert_string_equal(attn_tok_model_type(t), "WordPiece");
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_PAD), 0);
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_UNK), 100);
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_CLS), 101);
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_SEP), 102);
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_MASK), 103);
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_BOS), 101);
    assert_int_equal(attn_tok_special_id(t, ATTN_TOK_EOS), 102);
    assert_int_equal(attn_tok_special_id(t, (attn_tok_special)99), -1);
    assert_int_equal(attn_tok_vocab_size(t), 30522);
    /* fill-mask: the mask token survives as one id, [CLS] ... [SEP] around */
    size_t k;
    int32_t *ids = enc(t, "The capital of France is [MASK].", 32, &k);
    assert_int_equal(k, 9);
    assert_int_equal(ids[0], 101);
    assert_int_equal(ids[6], 103);
    assert_int_equal(ids[8], 102);
    attn_free(ids);
    /* the file's settings: truncation 128, padding Fixed 128 */
    attn_tok_encode_params p = attn_tok_file_params(t);
    assert_int_equal(p.truncation, ATTN_TOK_TRUNCATE_LONGEST_FIRST);
    assert_int_equal(p.max_length, 128);
    assert_int_equal(p.padding, ATTN_TOK_PAD_FIXED);
    assert_int_equal(p.pad_length, 128);
    assert_int_equal(p.pad_id, 0);
    attn_tok_encoding e;
    assert_int_equal(attn_tok_encode_ex(t, "hello", 5, NULL, 0, &p, &e), 0);
    assert_int_equal(e.n, 128);
    assert_int_equal(e.attention_mask[2], 1);
    assert_int_equal(e.attention_mask[3], 0);
    attn_tok_encoding_free(&e);
    attn_tok_encoding_free(NULL);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "wordpiece")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes),     cmocka_unit_test(test_norms),
        cmocka_unit_test(test_reference),   cmocka_unit_test(test_batches),
        cmocka_unit_test(test_decodes),     cmocka_unit_test(test_save),
        cmocka_unit_test(test_save_python), cmocka_unit_test(test_special_ids),
        cmocka_unit_test(test_speed),       cmocka_unit_test(test_bad_input),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    free_variants();
    json_decref(g_root);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}

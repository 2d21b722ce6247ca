/* test_badinput.c — bad input never crashes attn: every file-reading command (translate --model,
 * train --data/--config/--tokenizer/--resume, tokenizer encode/decode --tokenizer, explain FILE,
 * bleu) is run ($ATTN_BUILD/attn, so under `make san` the ASan + UBSan build) on broken files and
 * text: truncated, empty, oversized and overlapping safetensors, header lengths past the end or
 * near 2^64, unknown dtypes, shape products that overflow, shapes that disagree with the byte
 * ranges, missing and extra tensors, config.json that is not JSON, absurd sizes, heads that do not
 * divide the width, vocabularies that contradict the weights or the tokenizer, ids out of range,
 * negative or not numbers, invalid UTF-8 and NUL bytes in text, empty inputs, damaged
 * checkpoints.
 *
 * Each case must end with the expected non-zero exit (1: failure, 2: usage), exactly ONE line on
 * stderr ("attn: error: ..."), containing the file (or input position), the field and what was
 * expected (the substrings listed per case), and no sanitizer report. Text longer than the
 * model's positions is cut with one warning line by design (exit 0); the library itself refuses
 * it, which is checked directly, together with ids out of range. */
#include "tu.h"

#include "attn_bert.h"
#include "attn_infer.h"
#include "attn_io.h"
#include "attn_models.h"
#include "attn_tok.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/wait.h>

static char g_attn[1024];
static char g_good[700];  /* a valid model directory: config.json, model.safetensors, tokenizer */
static attn_encdec_config g_cfg;
static int g_vocab;
static char g_err[1 << 16];
static int g_cases, g_failed, g_skipped;

/* Each test function fails when one of its cases failed (every case still runs and prints): a
 * failed case counts into tu_failures too, which fails the running test (tests/tu.h). */
static void case_failed(void) {
    g_failed++;
    tu_failures++;
}

static const char *const train_text[] = {
    "Knowledge is power.", "知识就是力量。", "I think, therefore I am.", "我思故我在。",
    "Where there is a will, there is a way.", "有志者事竟成。", "Time flies like an arrow.",
    "光阴似箭。", "the then there these those", "他们在那里。"};

/* ---- running the CLI ---- */

/* Run attn ARGS (already shell-quoted) with stdin from in_path (NULL: /dev/null); stderr into
 * g_err. Returns the exit status, or -1 for a signal. */
static int run(const char *args, const char *in_path) {
    char cmd[16384], errp[800];
    snprintf(errp, sizeof errp, "%s/stderr.txt", tu_dir);
    snprintf(cmd, sizeof cmd, "'%s' %s < '%s' > /dev/null 2> '%s'", g_attn, args,
             in_path ? in_path : "/dev/null", errp);
    int st = system(cmd);
    FILE *f = fopen(errp, "rb");
    size_t n = f ? fread(g_err, 1, sizeof g_err - 1, f) : 0;
    g_err[n] = '\0';
    if (f) fclose(f);
    if (WIFSIGNALED(st)) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool one_line(const char *s) {
    size_t n = strlen(s);
    return n > 0 && s[n - 1] == '\n' && memchr(s, '\n', n - 1) == NULL;
}

static bool sanitizer_report(const char *s) {
    return strstr(s, "Sanitizer") || strstr(s, "runtime error:") || strstr(s, "==ERROR");
}

/* One case: exit `code`, one stderr line "attn: error: ..." holding every string that follows
 * (a NULL-terminated list; the macro adds the NULL). */
static void expect_(const char *what, const char *args, const char *in_path, int code, ...) {
    /* Under valgrind (.ci/valgrind.sh traces the attn processes: ~2 s of memcheck start-up
     * each) every other case runs; all of them run under make san (ASan + UBSan + LeakSanitizer
     * on the same commands) and make test. */
    if (tu_valgrind() && g_cases++ % 2) {
        g_skipped++;
        return;
    }
    if (!tu_valgrind()) g_cases++;
    int rc = run(args, in_path);
    const char *why = NULL, *missing = NULL;
    if (sanitizer_report(g_err)) why = "sanitizer report";
    else if (rc != code) why = "exit status";
    else if (!one_line(g_err)) why = "not exactly one line on stderr";
    else if (strncmp(g_err, "attn: error: ", 13) != 0) why = "not 'attn: error: ...'";
    va_list ap;
    va_start(ap, code);
    for (const char *sub; !why && (sub = va_arg(ap, const char *));)
        if (!strstr(g_err, sub)) why = "missing", missing = sub;
    va_end(ap);
    if (why) {
        case_failed();
        printf("  FAIL %-26s exit %d (want %d): %s%s%s%s\n    attn %.300s\n    stderr: %.2000s\n",
               what, rc, code, why, missing ? " \"" : "", missing ? missing : "",
               missing ? "\"" : "", args, g_err);
    } else if (!tu_quiet()) {
        printf("  ok   %-26s %d  %s", what, rc, g_err + 13);
    }
}
#define expect(...) expect_(__VA_ARGS__, (const char *)NULL)

static void write_file(const char *path, const void *p, size_t n) { tu_write_all(path, p, n); }

static void write_str(const char *path, const char *s) { write_file(path, s, strlen(s)); }

static char *read_file(const char *path, size_t *n) {
    char *b = tu_read_all(path, n);
    assert_non_null(b);
    return b;
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    char *b = read_file(from, &n);
    write_file(to, b, n);
    free(b);
}

/* DIR = scratch/name holding copies of the good model directory's three files. */
static const char *model_dir(const char *name) {
    static char dir[4][700];
    static int k;
    char *d = dir[k++ & 3];
    snprintf(d, sizeof dir[0], "%s/%s", tu_dir, name);
    mkdir(d, 0755);
    const char *files[3] = {"config.json", "model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        char a[800], b[800];
        snprintf(a, sizeof a, "%s/%s", g_good, files[i]);
        snprintf(b, sizeof b, "%s/%s", d, files[i]);
        copy_file(a, b);
    }
    return d;
}

static const char *in_dir(const char *dir, const char *file) {
    static char p[4][1024];
    static int k;
    char *r = p[k++ & 3];
    snprintf(r, sizeof p[0], "%s/%s", dir, file);
    return r;
}

/* A safetensors file from a header (written as is) and data bytes; hlen_override != 0 replaces
 * the header length field. */
static void write_st(const char *path, const char *header, const void *data, size_t n,
                     uint64_t hlen_override) {
    size_t hl = strlen(header);
    uint64_t v = hlen_override ? hlen_override : hl;
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(v >> (8 * i));
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(len, 1, 8, f);
    fwrite(header, 1, hl, f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

/* The good model's tensors as safetensors entries (views into m's buffer). */
static int model_entries(const attn_encdec_model *m, attn_st_entry *e) {
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_encdec_tensor *t = &m->tensors[i];
        e[i] = (attn_st_entry){t->name, ATTN_DTYPE_F32, t->ndim, {t->shape[0], t->shape[1]},
                               m->params + t->offset};
    }
    return m->n_tensors;
}

static void args_model(char *buf, size_t n, const char *dir) {
    snprintf(buf, n, "translate --model '%s' --beam 2 'Knowledge is power.'", dir);
}

/* ---- setup ---- */

static int setup(void **state) {
    (void)state;
    const char *b = getenv("ATTN_BUILD");
    snprintf(g_attn, sizeof g_attn, "%s/attn", b && *b ? b : "build");
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "badinput")) return -1;
    attn_tok_train_params tp = attn_tok_train_default_params();
    tp.vocab_size = 300;
    tp.min_frequency = 1;
    attn_tok *tok;
    if (attn_tok_train_bpe(&tp, train_text, NULL, 10, &tok)) return -1;
    g_vocab = attn_tok_vocab_size(tok);
    snprintf(g_good, sizeof g_good, "%s/good", tu_dir);
    g_cfg = attn_encdec_default_config();
    g_cfg.src_vocab = g_cfg.tgt_vocab = g_vocab;
    g_cfg.d_model = 16, g_cfg.n_head = 2, g_cfg.d_ff = 32;
    g_cfg.n_enc_layers = g_cfg.n_dec_layers = 1;
    g_cfg.max_len = 12;
    g_cfg.share_embeddings = g_cfg.tie_output = true;
    g_cfg.pad_id = attn_tok_special_id(tok, ATTN_TOK_PAD);
    attn_encdec_model *m;
    if (attn_encdec_model_init(&g_cfg, 3, &m)) return -1;
    attn_status s = attn_encdec_save_dir(m, g_good);
    attn_encdec_model_free(m);
    if (!s) s = attn_tok_save(tok, in_dir(g_good, "tokenizer.json"));
    attn_tok_free(tok);
    if (s) {
        printf("setup: %s\n", attn_last_error());
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (!getenv("ATTN_KEEP_TMP")) tu_rm_tree(tu_dir);
    return 0;
}

/* ---- the good directory works ---- */

static void test_good_model(void **state) {
    (void)state;
    char args[2048];
    args_model(args, sizeof args, g_good);
    int rc = run(args, NULL);
    if (rc != 0) fail_msg("the good model does not translate (exit %d): %s", rc, g_err);
    snprintf(args, sizeof args, "tokenizer decode --tokenizer '%s' 4,5,6", g_good);
    assert_int_equal(run(args, NULL), 0);
}

/* ---- model.safetensors ---- */

static void test_safetensors(void **state) {
    (void)state;
    char args[2048];
    attn_encdec_model *m;
    assert_int_equal(attn_encdec_load_dir(g_good, &m), ATTN_STATUS_OK);
    attn_st_entry e[64];
    int n = model_entries(m, e);
    assert_true(n < 60);
    size_t good_n;
    char *good = read_file(in_dir(g_good, "model.safetensors"), &good_n);
    const char *d;
#define ST_CASE(name, ...)                                                                         \
    do {                                                                                           \
        args_model(args, sizeof args, d);                                                          \
        expect(name, args, NULL, 1, __VA_ARGS__);                                                  \
    } while (0)

    d = model_dir("st_empty");
    write_file(in_dir(d, "model.safetensors"), "", 0);
    ST_CASE("empty", "st_empty/model.safetensors", "0 bytes", "too short");

    d = model_dir("st_trunc_data");
    write_file(in_dir(d, "model.safetensors"), good, good_n - 100);
    ST_CASE("truncated data", "st_trunc_data/model.safetensors", "data_offsets", "past the end");

    d = model_dir("st_trunc_header");
    write_file(in_dir(d, "model.safetensors"), good, 60);
    ST_CASE("truncated header", "st_trunc_header/model.safetensors", "header length",
            "past the end of the file");

    d = model_dir("st_hlen_max");
    write_st(in_dir(d, "model.safetensors"), "{}", NULL, 0, UINT64_MAX);
    ST_CASE("header length 2^64-1", "st_hlen_max/model.safetensors",
            "header length 18446744073709551615", "past the end");

    d = model_dir("st_hlen_near");
    write_st(in_dir(d, "model.safetensors"), "{}", NULL, 0, UINT64_MAX - 7);
    ST_CASE("header length 2^64-8", "st_hlen_near/model.safetensors", "18446744073709551608",
            "past the end");

    /* oversized: a header length of 200 MB in a (sparse) file that is that long */
    d = model_dir("st_oversized");
    {
        const char *p = in_dir(d, "model.safetensors");
        write_st(p, "{}", NULL, 0, 200000000);
        assert_int_equal(truncate(p, 200000100), 0);
    }
    ST_CASE("oversized header", "st_oversized/model.safetensors", "too large", "limit");

    d = model_dir("st_not_json");
    write_st(in_dir(d, "model.safetensors"), "{\"emb\": [1, 2", NULL, 0, 0);
    ST_CASE("header not JSON", "st_not_json/model.safetensors", "not valid JSON", NULL);

    d = model_dir("st_dtype");
    write_st(in_dir(d, "model.safetensors"),
             "{\"emb\": {\"dtype\": \"F8_E4M3\", \"shape\": [4], \"data_offsets\": [0, 4]}}",
             "abcd", 4, 0);
    ST_CASE("unknown dtype", "st_dtype/model.safetensors", "'emb'", "unknown dtype \"F8_E4M3\"",
            "expected F32");

    d = model_dir("st_overflow");
    write_st(in_dir(d, "model.safetensors"),
             "{\"emb\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 16], "
             "\"data_offsets\": [0, 4]}}",
             "abcd", 4, 0);
    ST_CASE("shape product overflows", "st_overflow/model.safetensors", "'emb'", "overflows");

    d = model_dir("st_mismatch");
    write_st(in_dir(d, "model.safetensors"),
             "{\"emb\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 12]}}",
             "abcdefghijkl", 12, 0);
    ST_CASE("shape vs byte range", "st_mismatch/model.safetensors", "'emb'",
            "do not match shape [2, 2] of F32 (16 bytes)", NULL);

    d = model_dir("st_overlap");
    write_st(in_dir(d, "model.safetensors"),
             "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}, "
             "\"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}",
             "abcdefghijklmnopqrstuvwx", 24, 0);
    ST_CASE("overlapping tensors", "st_overlap/model.safetensors", "'a'", "'b'", "overlap");

    d = model_dir("st_negative");
    write_st(in_dir(d, "model.safetensors"),
             "{\"emb\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", "abcd",
             4, 0);
    ST_CASE("negative dimension", "st_negative/model.safetensors", "shape[0]",
            "non-negative integer");

    d = model_dir("st_missing_tensor");
    assert_int_equal(attn_st_save(in_dir(d, "model.safetensors"), e, n - 1, NULL), 0);
    char want[256];
    snprintf(want, sizeof want, "tensor '%s' is missing", e[n - 1].name);
    ST_CASE("missing tensor", "st_missing_tensor/model.safetensors", want, "config.json");

    d = model_dir("st_extra_tensor");
    {
        attn_st_entry e2[64];
        memcpy(e2, e, (size_t)n * sizeof *e);
        float one = 1;
        e2[n] = (attn_st_entry){"bogus.w", ATTN_DTYPE_F32, 1, {1}, &one};
        assert_int_equal(attn_st_save(in_dir(d, "model.safetensors"), e2, n + 1, NULL), 0);
    }
    ST_CASE("extra tensor", "st_extra_tensor/model.safetensors", "'bogus.w'", "not in the model");

    d = model_dir("st_wrong_shape");
    {
        attn_st_entry e2[64];
        memcpy(e2, e, (size_t)n * sizeof *e);
        float *big = calloc((size_t)(g_vocab + 1) * 16, sizeof *big);
        for (int i = 0; i < n; i++)
            if (!strcmp(e2[i].name, "emb")) e2[i].shape[0] = g_vocab + 1, e2[i].data = big;
        assert_int_equal(attn_st_save(in_dir(d, "model.safetensors"), e2, n, NULL), 0);
        free(big);
    }
    snprintf(want, sizeof want, "has shape [%d, 16], expected [%d, 16]", g_vocab + 1, g_vocab);
    ST_CASE("tensor shape", "st_wrong_shape/model.safetensors", "'emb'", want);

    d = model_dir("st_int_dtype");
    {
        attn_st_entry e2[64];
        memcpy(e2, e, (size_t)n * sizeof *e);
        e2[n - 1].dtype = ATTN_DTYPE_I32;
        assert_int_equal(attn_st_save(in_dir(d, "model.safetensors"), e2, n, NULL), 0);
        snprintf(want, sizeof want, "'%s'", e2[n - 1].name);
    }
    ST_CASE("integer dtype", "st_int_dtype/model.safetensors", want, "expected F32, F16, BF16");

    d = model_dir("st_absent");
    unlink(in_dir(d, "model.safetensors"));
    ST_CASE("missing file", "st_absent/model.safetensors", "cannot open", NULL);

    d = model_dir("st_is_dir");
    unlink(in_dir(d, "model.safetensors"));
    mkdir(in_dir(d, "model.safetensors"), 0755);
    ST_CASE("a directory", "st_is_dir/model.safetensors", "not a regular file", NULL);
#undef ST_CASE
    free(good);
    attn_encdec_model_free(m);
}

/* ---- config.json ---- */

static void cfg_case(const char *name, const char *text, const char *s1, const char *s2) {
    char args[2048], field[256];
    const char *d = model_dir(name);
    if (text) write_str(in_dir(d, "config.json"), text);
    else unlink(in_dir(d, "config.json"));
    args_model(args, sizeof args, d);
    snprintf(field, sizeof field, "%s/config.json", name);
    expect(name, args, NULL, 1, field, s1, s2);
}

static void test_config(void **state) {
    (void)state;
    size_t n;
    char *good = read_file(in_dir(g_good, "config.json"), &n);
    char text[4096];
    cfg_case("cfg_not_json", "{\"d_model\": 16,, }", "invalid JSON", NULL);
    cfg_case("cfg_empty", "", "invalid JSON", NULL);
    cfg_case("cfg_array", "[16, 2]", "must be a JSON object", NULL);
    cfg_case("cfg_absent", NULL, "cannot read", NULL);
    snprintf(text, sizeof text,
             "{\"src_vocab\": %d, \"tgt_vocab\": %d, \"d_model\": 1048576, \"n_head\": 2, "
             "\"d_ff\": 4194304, \"n_enc_layers\": 6, \"n_dec_layers\": 6}",
             g_vocab, g_vocab);
    cfg_case("cfg_absurd", text, "too large", "d_model 1048576");
    snprintf(text, sizeof text,
             "{\"src_vocab\": %d, \"tgt_vocab\": %d, \"d_model\": 512, \"n_head\": 8, "
             "\"max_len\": 2147483647}",
             g_vocab, g_vocab);
    cfg_case("cfg_absurd_positions", text, "too large", "max_len 2147483647");
    snprintf(text, sizeof text, "{\"src_vocab\": %d, \"tgt_vocab\": 2000000000, \"d_model\": 512}",
             g_vocab);
    cfg_case("cfg_absurd_vocab", text, "too large", "vocab");
    /* edits of the good file */
    struct {
        const char *name, *from, *to, *s1, *s2;
    } ed[] = {
        {"cfg_heads", "\"n_head\": 2", "\"n_head\": 3", "n_head (3) must divide d_model (16)", NULL},
        {"cfg_type", "\"d_model\": 16", "\"d_model\": \"16\"", "\"d_model\"", "32-bit integer"},
        {"cfg_int_range", "\"d_model\": 16", "\"d_model\": 99999999999", "\"d_model\"",
         "32-bit integer"},
        {"cfg_negative", "\"max_len\": 12", "\"max_len\": -5", "max_len must be > 0", NULL},
        /* tiny layers in numbers that would overflow the tensor table's int count */
        {"cfg_layers", "\"n_enc_layers\": 1", "\"n_enc_layers\": 268435456", "too large",
         "n_enc_layers 268435456"},
        {"cfg_zero_heads", "\"n_head\": 2", "\"n_head\": 0", "n_head must be > 0", NULL},
        {"cfg_unknown", "\"d_model\": 16", "\"d_modle\": 16", "unknown field \"d_modle\"", NULL},
        {"cfg_huge_float", "\"dropout\": 0.1", "\"dropout\": 1e300", "\"dropout\"", "float range"},
        {"cfg_dropout", "\"dropout\": 0.1", "\"dropout\": 1.5", "dropout must be in [0, 1)", NULL},
        {"cfg_activation", "\"activation\": \"relu\"", "\"activation\": \"swish\"",
         "\"activation\"", "\"gelu\" or \"silu\""},
        {"cfg_pad", "\"pad_id\": 0", "\"pad_id\": 100000", "pad_id 100000", NULL},
    };
    for (size_t i = 0; i < sizeof ed / sizeof ed[0]; i++) {
        char *at = strstr(good, ed[i].from);
        if (!at) fail_msg("config.json lacks %s:\n%s", ed[i].from, good);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good), good, ed[i].to,
                 at + strlen(ed[i].from));
        cfg_case(ed[i].name, text, ed[i].s1, ed[i].s2);
    }
    /* the vocabulary of config.json contradicts the weights */
    {
        char from[64], to[64];
        snprintf(from, sizeof from, "\"src_vocab\": %d,\n  \"tgt_vocab\": %d", g_vocab, g_vocab);
        snprintf(to, sizeof to, "\"src_vocab\": %d,\n  \"tgt_vocab\": %d", g_vocab + 7,
                 g_vocab + 7);
        char *at = strstr(good, from);
        if (!at) fail_msg("config.json lacks %s:\n%s", from, good);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
        char args[2048], want[128];
        const char *d = model_dir("cfg_vocab_vs_weights");
        write_str(in_dir(d, "config.json"), text);
        args_model(args, sizeof args, d);
        snprintf(want, sizeof want, "expected [%d, 16]", g_vocab + 7);
        expect("cfg_vocab_vs_weights", args, NULL, 1, "cfg_vocab_vs_weights/model.safetensors",
               "'emb'", want);
    }
    /* config.json and the weights agree, the tokenizer has another vocabulary */
    {
        attn_encdec_config c = g_cfg;
        c.src_vocab = c.tgt_vocab = g_vocab + 20;
        attn_encdec_model *m;
        assert_int_equal(attn_encdec_model_init(&c, 1, &m), 0);
        const char *d = model_dir("cfg_vocab_vs_tokenizer");
        assert_int_equal(attn_encdec_save_dir(m, d), 0);
        attn_encdec_model_free(m);
        char args[2048], want[128];
        args_model(args, sizeof args, d);
        snprintf(want, sizeof want, "%d ids", g_vocab);
        expect("cfg_vocab_vs_tokenizer", args, NULL, 1, "cfg_vocab_vs_tokenizer/tokenizer.json",
               want, "config.json has src_vocab");
    }
    free(good);
}

/* ---- tokenizer.json ---- */

static void test_tokenizer_file(void **state) {
    (void)state;
    char args[2048];
    struct {
        const char *name, *text, *s1;
    } c[] = {
        {"tok_not_json", "{\"model\": {\"type\": \"BPE\", ", "not valid JSON"},
        {"tok_empty", "", "not valid JSON"},
        {"tok_no_model", "{\"added_tokens\": []}", "model"},
        {"tok_unigram", "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\"]]}}",
         "model.vocab[0]"},
        {"tok_bad_vocab", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -4}, \"merges\": []}}",
         "vocab"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *d = model_dir(c[i].name);
        write_str(in_dir(d, "tokenizer.json"), c[i].text);
        char field[256];
        snprintf(field, sizeof field, "%s/tokenizer.json", c[i].name);
        args_model(args, sizeof args, d);
        expect(c[i].name, args, NULL, 1, field, c[i].s1, NULL);
        snprintf(args, sizeof args, "tokenizer encode --tokenizer '%s' hello", d);
        expect(c[i].name, args, NULL, 1, field, c[i].s1, NULL);
    }
    snprintf(args, sizeof args, "tokenizer encode --tokenizer '%s/absent.json' hello", tu_dir);
    expect("tok_absent", args, NULL, 1, "absent.json", "cannot open", NULL);
}

/* ---- text and ids ---- */

static void test_text(void **state) {
    (void)state;
    char args[2048];
    const char *in = tu_tmp("in.txt");
    char in_path[800];
    snprintf(in_path, sizeof in_path, "%s", in);
    /* translate: standard input and arguments */
    snprintf(args, sizeof args, "translate --model '%s' --beam 1", g_good);
    write_file(in_path, "ok\nbad \xC3\x28 text\n", 15);
    expect("translate invalid UTF-8", args, in_path, 1, "<stdin>:2", "invalid UTF-8 at byte 5",
           "expected UTF-8");
    write_file(in_path, "a\0b\n", 4);
    expect("translate NUL byte", args, in_path, 1, "<stdin>:1", "NUL byte at byte 2",
           "expected UTF-8");
    write_file(in_path, "ok\n\xED\xA0\x80\n", 7);
    expect("translate surrogate", args, in_path, 1, "<stdin>:2", "invalid UTF-8 at byte 1", NULL);
    snprintf(args, sizeof args, "translate --model '%s' 'fine' 'over\xC0\xAFlong'", g_good);
    expect("translate argument", args, NULL, 1, "argument 2", "invalid UTF-8 at byte 5", NULL);
    /* empty standard input is no input: no output, success */
    snprintf(args, sizeof args, "translate --model '%s'", g_good);
    write_file(in_path, "", 0);
    g_cases++;
    if (run(args, in_path) != 0 || g_err[0]) {
        case_failed();
        printf("  FAIL translate of empty input: %s\n", g_err);
    }
    /* more tokens than the model's positions: cut, with one warning line, by design */
    {
        char longtext[1300] = "";
        for (int i = 0; i < 60; i++) strcat(longtext, "Knowledge is power. ");
        char largs[3000];
        snprintf(largs, sizeof largs, "translate --model '%s' --beam 1 '%s'", g_good, longtext);
        g_cases++;
        int rc = run(largs, NULL);
        if (rc != 0 || !one_line(g_err) || !strstr(g_err, "attn: warning:") ||
            !strstr(g_err, "were cut") || sanitizer_report(g_err)) {
            case_failed();
            printf("  FAIL translate of a text over max_len: exit %d, stderr %s\n", rc, g_err);
        } else if (!tu_quiet()) {
            printf("  ok   %-26s %d  %s", "translate over max_len", rc, g_err);
        }
    }

    /* tokenizer decode: ids */
    char want[128];
    snprintf(want, sizeof want, "from 0 to %d", g_vocab - 1);
    snprintf(args, sizeof args, "tokenizer decode --tokenizer '%s' 1,2 -1", g_good);
    expect("decode negative id", args, NULL, 2, "argument 2", "'-1' is not an id", want);
    snprintf(args, sizeof args, "tokenizer decode --tokenizer '%s' '4 five'", g_good);
    expect("decode not a number", args, NULL, 2, "argument 1", "'five' is not an id", want);
    snprintf(args, sizeof args, "tokenizer decode --tokenizer '%s' 99999999999", g_good);
    expect("decode id overflow", args, NULL, 2, "argument 1", "'99999999999' is not an id", want);
    snprintf(args, sizeof args, "tokenizer decode --tokenizer '%s' 4 '5 %d'", g_good, g_vocab);
    snprintf(want, sizeof want, "= %d is not in the vocabulary", g_vocab);
    expect("decode id out of range", args, NULL, 1, "argument 2", want, NULL);
    snprintf(args, sizeof args, "tokenizer decode --tokenizer '%s'", g_good);
    write_str(in_path, "4 5\n6 x7\n");
    expect("decode stdin not a number", args, in_path, 1, "<stdin>:2", "'x7' is not an id", NULL);
    write_str(in_path, "4 5\n1000000\n");
    expect("decode stdin out of range", args, in_path, 1, "<stdin>:2", "1000000", "vocabulary");
    write_file(in_path, "4\0005\n", 4);
    expect("decode stdin NUL", args, in_path, 1, "<stdin>:1", "NUL byte", NULL);

    /* tokenizer encode: text */
    snprintf(args, sizeof args, "tokenizer encode --tokenizer '%s'", g_good);
    write_file(in_path, "ok\nbad \xC3\x28\n", 10);
    expect("encode invalid UTF-8", args, in_path, 1, "<stdin>:2", "not valid UTF-8", "offset 4");
    write_file(in_path, "x\0y\n", 4);
    expect("encode NUL byte", args, in_path, 1, "<stdin>:1", "NUL byte at byte 2", NULL);
    snprintf(args, sizeof args, "tokenizer encode --tokenizer '%s' ok '\xFF'", g_good);
    expect("encode argument", args, NULL, 1, "argument 2", "not valid UTF-8", NULL);

    /* tokenizer train: its text */
    char tdata[800];
    snprintf(tdata, sizeof tdata, "%s", tu_tmp("tok-train.txt"));
    snprintf(args, sizeof args, "tokenizer train --data '%s' --out '%s/tok-out' --vocab-size 300",
             tdata, tu_dir);
    write_file(tdata, "fine line\nnul\0byte\n", 19);
    expect("tokenizer train NUL byte", args, NULL, 1, "tok-train.txt:2", "NUL byte at byte 4",
           NULL);
    write_file(tdata, "fine line\r\nbad \xE0\x80\x80\n", 18);
    expect("tokenizer train bad UTF-8", args, NULL, 1, "tok-train.txt:2", "invalid UTF-8 at byte 5",
           NULL);
    snprintf(args, sizeof args, "tokenizer train --data - --out '%s/tok-out'", tu_dir);
    expect("tokenizer train bad stdin", args, tdata, 1, "<stdin>:2", "invalid UTF-8", NULL);
}

/* ---- bleu ---- */

static void test_bleu_files(void **state) {
    (void)state;
    char args[4096], h[800], r[800];
    snprintf(h, sizeof h, "%s", tu_tmp("hyp.txt"));
    snprintf(r, sizeof r, "%s", tu_tmp("ref.txt"));
    write_str(r, "我是学生。\n他们在那里。\n");
    snprintf(args, sizeof args, "bleu '%s' '%s'", h, r);
    write_file(h, "我是学生。\n他们\xE5\x9C在那里。\n", 30);
    expect("bleu invalid UTF-8", args, NULL, 1, "hyp.txt:2", "invalid UTF-8", NULL);
    write_file(h, "我是学生。\nab\0c\n", 21);
    expect("bleu NUL byte", args, NULL, 1, "hyp.txt:2", "NUL byte", NULL);
    write_file(h, "", 0);
    write_file(r, "", 0);
    expect("bleu empty", args, NULL, 1, "hyp.txt", "no lines to score", "expected");
    write_str(h, "one\n");
    write_str(r, "one\ntwo\n");
    expect("bleu line counts", args, NULL, 1, "hyp.txt has 1 line", "ref.txt has 2 lines", NULL);
    snprintf(args, sizeof args, "bleu '%s' '%s/absent.txt'", h, tu_dir);
    expect("bleu missing", args, NULL, 1, "absent.txt", "cannot open", NULL);
    snprintf(args, sizeof args, "bleu - '%s'", r);
    write_file(h, "", 0);
    expect("bleu empty stdin", args, h, 1, "<stdin>", "no lines to score", NULL);
}

/* ---- train: data, config, tokenizer, checkpoint ---- */

static void test_train_inputs(void **state) {
    (void)state;
    char args[8192], data[800], cfg[800], out[800];
    snprintf(data, sizeof data, "%s", tu_tmp("pairs.tsv"));
    snprintf(cfg, sizeof cfg, "%s", tu_tmp("tiny.json"));
    /* a valid corpus to vary */
    {
        FILE *f = fopen(data, "w");
        assert_non_null(f);
        for (int i = 0; i < 60; i++)
            fprintf(f, "%s %d\t%s%d\tattribution\n", train_text[2 * (i % 5)], i,
                    train_text[2 * (i % 5) + 1], i);
        fclose(f);
    }
    write_str(cfg, "{\"d_model\": 16, \"n_head\": 2, \"d_ff\": 32, \"n_enc_layers\": 1, "
                   "\"n_dec_layers\": 1, \"max_len\": 24, \"share_embeddings\": true, "
                   "\"tie_output\": true}");
    int k = 0;
#define TRAIN(extra, in, ...)                                                                      \
    do {                                                                                           \
        snprintf(out, sizeof out, "%s/train%d", tu_dir, k++);                                      \
        snprintf(args, sizeof args,                                                                \
                 "train --out '%s' --vocab-size 300 --valid-size 5 --test-size 5 --max-steps 1 "   \
                 "--max-tokens 200 %s",                                                            \
                 out, extra);                                                                      \
        expect(__VA_ARGS__);                                                                       \
    } while (0)
    char extra[3000];
    const char *bad = tu_tmp("bad.tsv");
    char badp[800];
    snprintf(badp, sizeof badp, "%s", bad);
    snprintf(extra, sizeof extra, "--data '%s' --config '%s'", badp, cfg);
    write_file(badp, "a\tb\nc \xC3\x28\td\n", 12);
    TRAIN(extra, NULL, "train invalid UTF-8", args, NULL, 1, "bad.tsv:2", "invalid UTF-8", NULL);
    write_file(badp, "a\tb\nc\0x\td\n", 10);
    TRAIN(extra, NULL, "train NUL byte", args, NULL, 1, "bad.tsv:2", "NUL byte", NULL);
    write_file(badp, "", 0);
    TRAIN(extra, NULL, "train empty data", args, NULL, 1, "bad.tsv", "no sentence pairs", NULL);
    write_file(badp, "\n\r\n\n", 4);
    TRAIN(extra, NULL, "train blank data", args, NULL, 1, "bad.tsv", "no sentence pairs", NULL);
    write_str(badp, "a\tb\nonly one column\n");
    TRAIN(extra, NULL, "train one column", args, NULL, 1, "bad.tsv:2", "1 column",
          "expected at least 2");
    write_str(badp, "a\tb\nsource\t\tattr\n");
    TRAIN(extra, NULL, "train empty target", args, NULL, 1, "bad.tsv:2", "empty target", NULL);
    snprintf(extra, sizeof extra, "--data '%s/absent.tsv'", tu_dir);
    TRAIN(extra, NULL, "train missing data", args, NULL, 1, "absent.tsv", "cannot open", NULL);

    /* --config */
    const char *bc = tu_tmp("badcfg.json");
    char bcp[800];
    snprintf(bcp, sizeof bcp, "%s", bc);
    snprintf(extra, sizeof extra, "--data '%s' --config '%s'", data, bcp);
    write_str(bcp, "{\"d_model\": 16 \"n_head\": 2}");
    TRAIN(extra, NULL, "train config not JSON", args, NULL, 1, "badcfg.json", "invalid JSON", NULL);
    write_str(bcp, "{\"d_model\": 1048576, \"d_ff\": 4194304}");
    TRAIN(extra, NULL, "train config absurd", args, NULL, 1, "badcfg.json", "too large", NULL);
    write_str(bcp, "{\"d_model\": 16, \"n_head\": 3}");
    TRAIN(extra, NULL, "train config heads", args, NULL, 1, "badcfg.json",
          "n_head (3) must divide d_model (16)", NULL);
    write_str(bcp, "{\"d_model\": 16, \"n_heads\": 2}");
    TRAIN(extra, NULL, "train config unknown", args, NULL, 1, "badcfg.json",
          "unknown field \"n_heads\"", NULL);
    write_str(bcp, "{\"d_model\": 16, \"layer_norm_eps\": 0}");
    TRAIN(extra, NULL, "train config eps", args, NULL, 1, "badcfg.json", "layer_norm_eps", NULL);
    /* --tokenizer */
    snprintf(extra, sizeof extra, "--data '%s' --config '%s' --tokenizer '%s'", data, cfg, bcp);
    write_str(bcp, "{\"model\": 3}");
    TRAIN(extra, NULL, "train tokenizer", args, NULL, 1, "badcfg.json", "model", NULL);
#undef TRAIN

    /* --resume of a damaged checkpoint */
    char ck[800];
    snprintf(ck, sizeof ck, "%s/ckpt", tu_dir);
    snprintf(args, sizeof args,
             "train --out '%s' --data '%s' --config '%s' --vocab-size 300 --valid-size 5 "
             "--test-size 5 --max-steps 2 --max-tokens 200 --eval-every 100",
             ck, data, cfg);
    int rc = run(args, NULL);
    if (rc) fail_msg("training the checkpoint failed (%d): %s", rc, g_err);
    size_t mn, jn;
    char *model = read_file(in_dir(ck, "model.safetensors"), &mn);
    char *state_json = read_file(in_dir(ck, "training_state.json"), &jn);
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps 3", ck);
    write_file(in_dir(ck, "model.safetensors"), model, mn / 2);
    char want[128];
    snprintf(want, sizeof want, "but training_state.json records %zu", mn);
    expect("resume truncated model", args, NULL, 1, "ckpt/model.safetensors", want, NULL);
    model[mn - 5] ^= 0x40;
    write_file(in_dir(ck, "model.safetensors"), model, mn);
    expect("resume corrupt model", args, NULL, 1, "ckpt/model.safetensors", "CRC-32", NULL);
    model[mn - 5] ^= 0x40;
    write_file(in_dir(ck, "model.safetensors"), model, mn);
    write_file(in_dir(ck, "training_state.json"), state_json, jn / 2);
    expect("resume truncated state", args, NULL, 1, "training_state.json", "end of input", NULL);
    {
        char *at = strstr(state_json, "\"format_version\": 1");
        assert_non_null(at);
        at[18] = '7';
        write_file(in_dir(ck, "training_state.json"), state_json, jn);
        at[18] = '1';
    }
    expect("resume newer format", args, NULL, 1, "training_state.json", "format_version 7", NULL);
    write_file(in_dir(ck, "training_state.json"), state_json, jn);
    unlink(in_dir(ck, "optimizer.safetensors"));
    expect("resume missing optimizer", args, NULL, 1, "optimizer.safetensors", "cannot open",
           NULL);
    free(model);
    free(state_json);
}

/* ---- explain FILE ---- */

static void test_explain(void **state) {
    (void)state;
    char args[2048];
    const char *p = tu_tmp("explain.safetensors");
    char path[800];
    snprintf(path, sizeof path, "%s", p);
    snprintf(args, sizeof args, "explain '%s'", path);
    write_file(path, "", 0);
    expect("explain empty", args, NULL, 1, "explain.safetensors", "too short", NULL);
    write_st(path, "{\"x\": {\"dtype\": \"F32\", \"shape\": [2, 4], \"data_offsets\": [0, 32]}}",
             "abcd", 4, 0);
    expect("explain truncated", args, NULL, 1, "explain.safetensors", "'x'", "past the end");
    write_st(path, "{\"x\": {\"dtype\": \"F32\", \"shape\": [1, 1], \"data_offsets\": [0, 4]}}",
             "abcd", 4, 0);
    expect("explain missing tensor", args, NULL, 1, "explain.safetensors", "'w_q'", NULL);
    float f[16] = {0};
    attn_st_entry e[4] = {{"x", ATTN_DTYPE_F32, 2, {2, 4}, f},
                          {"w_q", ATTN_DTYPE_F32, 2, {3, 2}, f},
                          {"w_k", ATTN_DTYPE_F32, 2, {4, 2}, f},
                          {"w_v", ATTN_DTYPE_F32, 2, {4, 2}, f}};
    assert_int_equal(attn_st_save(path, e, 4, NULL), 0);
    expect("explain shapes disagree", args, NULL, 1, "explain.safetensors", "'w_q'", NULL);
}

/* ---- GPT-2 and BERT commands: generate, forward, attention, embed, fill-mask ----
 * (their messages belong to those commands; checked here: exit status, one line, the file or the
 * option named) */

static void test_model_commands(void **state) {
    (void)state;
    char args[4096], text[800], g[800], b[800], cfg[800];
    snprintf(text, sizeof text, "%s", tu_tmp("gpt.txt"));
    snprintf(cfg, sizeof cfg, "%s", tu_tmp("gpt.json"));
    snprintf(g, sizeof g, "%s/gpt", tu_dir);
    snprintf(b, sizeof b, "%s/bert", tu_dir);
    {
        FILE *f = fopen(text, "w");
        assert_non_null(f);
        for (int i = 0; i < 200; i++) fprintf(f, "%s\n", train_text[i % 10]);
        fclose(f);
    }
    write_str(cfg, "{\"n_embd\": 16, \"n_head\": 2, \"n_layer\": 1, \"n_positions\": 16}");
    snprintf(args, sizeof args,
             "train --arch gpt --data '%s' --out '%s' --config '%s' --tokenizer char "
             "--max-steps 1",
             text, g, cfg);
    int rc = run(args, NULL);
    if (rc) fail_msg("training the GPT-2 directory failed (%d): %s", rc, g_err);
    {
        attn_bert_config c = attn_bert_default_config();
        c.vocab_size = 20, c.hidden_size = 8, c.num_hidden_layers = 1;
        c.num_attention_heads = 2, c.intermediate_size = 16, c.max_position_embeddings = 8;
        attn_bert_model *m;
        assert_int_equal(attn_bert_model_init(&c, 9, true, true, &m), 0);
        assert_int_equal(attn_bert_save_dir(m, b), 0);
        attn_bert_model_free(m);
    }
    /* ids: negative, not numbers, out of range, more than the positions */
    snprintf(args, sizeof args, "forward --model '%s' --ids 1,2,-3", g);
    expect("forward negative id", args, NULL, 2, "--ids", "-3", NULL);
    snprintf(args, sizeof args, "forward --model '%s' --ids 1,x", g);
    expect("forward id not a number", args, NULL, 2, "--ids", "'x'", NULL);
    snprintf(args, sizeof args, "forward --model '%s' --ids 1,2,99999", g);
    expect("forward id out of range", args, NULL, 1, "--ids", "99999", "vocabulary");
    snprintf(args, sizeof args, "forward --model '%s' --ids 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1", g);
    expect("forward over n_positions", args, NULL, 1, "--ids", "17", "n_positions 16");
    snprintf(args, sizeof args, "attention --model '%s' --ids 1,2,99999", g);
    expect("attention id out of range", args, NULL, 1, "99999", "vocabulary", NULL);
    snprintf(args, sizeof args, "forward --model '%s' --ids 1,1,1,1,1,1,1,1,1", b);
    expect("bert over positions", args, NULL, 1, "--ids", "max_position_embeddings 8", NULL);
    /* text */
    snprintf(args, sizeof args, "generate --model '%s' --prompt 'bad \xC3\x28' --max-tokens 2", g);
    expect("generate invalid UTF-8", args, NULL, 1, "UTF-8", NULL);
    /* damaged directories */
    size_t n;
    char *good = read_file(in_dir(g, "model.safetensors"), &n);
    write_file(in_dir(g, "model.safetensors"), good, n / 2);
    snprintf(args, sizeof args, "generate --model '%s' --prompt 'To be' --max-tokens 2", g);
    expect("generate truncated model", args, NULL, 1, "gpt/model.safetensors", "past the end",
           NULL);
    write_file(in_dir(g, "model.safetensors"), "", 0);
    expect("generate empty model", args, NULL, 1, "gpt/model.safetensors", "too short", NULL);
    write_file(in_dir(g, "model.safetensors"), good, n);
    free(good);
    good = read_file(in_dir(g, "config.json"), &n);
    write_str(in_dir(g, "config.json"), "{\"n_embd\": 16,");
    expect("generate config not JSON", args, NULL, 1, "gpt/config.json", "invalid JSON", NULL);
    write_str(in_dir(g, "config.json"), "{\"n_embd\": 16, \"n_head\": 3}");
    expect("generate heads", args, NULL, 1, "gpt/config.json", "n_head", NULL);
    write_file(in_dir(g, "config.json"), good, n);
    free(good);
    snprintf(args, sizeof args, "fill-mask --model '%s' 'a [MASK]'", g);
    expect("fill-mask on a GPT-2", args, NULL, 1, "gpt/config.json", "model_type", NULL);
    snprintf(args, sizeof args, "embed --model '%s' hello", b);
    expect("embed without tokenizer", args, NULL, 1, "bert", "tokenizer.json", NULL);
    write_file(in_dir(b, "model.safetensors"), "", 0);
    snprintf(args, sizeof args, "forward --model '%s' --ids 1,2", b);
    expect("bert empty model", args, NULL, 1, "bert/model.safetensors", "too short", NULL);
    snprintf(args, sizeof args, "generate --model '%s/absent' --prompt x", tu_dir);
    expect("generate missing model", args, NULL, 1, "absent", NULL);
}

/* ---- the library refuses what the CLI cuts or never sends ---- */

static void test_library_limits(void **state) {
    (void)state;
    attn_encdec_model *m;
    assert_int_equal(attn_encdec_load_dir(g_good, &m), ATTN_STATUS_OK);
    const int L = m->cfg.max_len;
    attn_translate_session *s;
    /* a session longer than the model's positions */
    tu_expect_fail(attn_translate_session_init(m, 1, 1, L + 1, 4, &s), ATTN_STATUS_INVALID_ARGUMENT,
                   "max_src", "max_len");
    assert_int_equal(attn_translate_session_init(m, 1, 2, L, L, &s), ATTN_STATUS_OK);
    int32_t src[64], len[1], out[64], olen[1];
    for (int i = 0; i < 64; i++) src[i] = 4 + i % 10;
    attn_translate_options o = attn_translate_default_options();
    o.beam_size = 2;
    /* more tokens than the positions */
    len[0] = L + 1;
    tu_expect_fail(attn_translate(s, &o, 1, L + 1, src, len, 64, out, olen, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "Ts=13", "source 12");
    /* ids out of range, negative */
    len[0] = 3;
    src[1] = g_vocab;
    tu_expect_fail(attn_translate(s, &o, 1, 3, src, len, 64, out, olen, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "id 300 at (batch 0, position 1)",
                   "vocabulary [0, 300)");
    src[1] = -1;
    tu_expect_fail(attn_translate(s, &o, 1, 3, src, len, 64, out, olen, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "id -1", "vocabulary");
    src[1] = 5;
    /* a source length of 0 and lengths past Ts */
    len[0] = 0;
    tu_expect_fail(attn_translate(s, &o, 1, 3, src, len, 64, out, olen, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "src_len[0] = 0", "[1, 3]");
    attn_translate_session_free(s);
    /* the training forward: positions and ids */
    attn_encdec_state *st;
    assert_int_equal(attn_encdec_state_init(m, 1, L, L, &st), ATTN_STATUS_OK);
    int32_t sl[1] = {2}, tl[1] = {2};
    tu_expect_fail(attn_encdec_forward(m, st, 1, L + 1, 2, src, sl, src, tl, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "Ts=13", "max_len 12");
    src[0] = g_vocab + 5;
    tu_expect_fail(attn_encdec_forward(m, st, 1, 2, 2, src, sl, src + 1, tl, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "source id 305", "vocabulary");
    attn_encdec_state_free(st);
    attn_encdec_model_free(m);
}

static void test_summary(void **state) {
    (void)state;
    printf("  %d bad-input cases, %d failed", g_cases, g_failed);
    if (g_skipped) printf(" (%d not run under valgrind: every other case)", g_skipped);
    printf("\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_model),      cmocka_unit_test(test_safetensors),
        cmocka_unit_test(test_config),          cmocka_unit_test(test_tokenizer_file),
        cmocka_unit_test(test_text),            cmocka_unit_test(test_bleu_files),
        cmocka_unit_test(test_train_inputs),    cmocka_unit_test(test_explain),
        cmocka_unit_test(test_model_commands),
        cmocka_unit_test(test_library_limits),  cmocka_unit_test(test_summary),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

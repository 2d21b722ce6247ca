/* test_quantize.c — attn quantize (include/attn_gguf_quantize.h) on the tiny random Hugging Face
 * decoders of tools/ref_quantize.py (llama with 8 layers of rows 256/512, llama with rows of 96,
 * qwen2, gpt2), in several types:
 *   - tools/check_quantize.py reads each file with the gguf package's GGUFReader: metadata as
 *     convert_hf_to_gguf.py writes it (tokenizer from AutoTokenizer + llama.cpp's SpecialVocab),
 *     tensor names, shapes, llama-quantize's type per tensor, bytes identical to
 *     gguf.quants.quantize of the (permuted / transposed) float weights for the types gguf
 *     implements, k-quants within a relative RMS error;
 *   - attn loads its own file back: logits of 2 × 12 tokens against the float model loaded from
 *     the directory, within a bound per type (relative to max|logit|);
 *   - GGUF -> GGUF requantization (checked against gguf.quants on the input's dequantized
 *     values);
 *   - llama-quant.cpp's choices on their own (attn_gguf_quantize_pick);
 *   - bad input: unknown type, unreadable input, no tokenizer, usage errors: one line. */
#include "attn_gguf.h"
#include "attn_gguf_quantize.h"
#include "attn_gpt.h"
#include "tu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OK(x)                                                                                      \
    do {                                                                                           \
        attn_status s_ = (x);                                                                      \
        if (s_) fail_msg("%s: %s", #x, attn_last_error());                                         \
    } while (0)

static const char *model_dir(const char *m) {
    static char b[4][4200];
    static int k;
    char *p = b[k++ & 3];
    snprintf(p, sizeof b[0], "%s/%s", tu_ref_path("quantize"), m);
    return p;
}

static const char *attn_bin(void) {
    static char b[4200];
    const char *bd = getenv("ATTN_BUILD");
    snprintf(b, sizeof b, "%s/attn", bd ? bd : "build");
    return b;
}

static void need_refs(void) {
    char p[4300];
    snprintf(p, sizeof p, "%s/config.json", model_dir("gpt2"));
    if (access(p, R_OK) != 0) tu_skip("no %s (tools/ref_quantize.py)", p);
    if (access(attn_bin(), X_OK) != 0) tu_skip("no %s (make)", attn_bin());
    if (access(".venv/bin/python", X_OK) != 0) tu_skip("no .venv/bin/python");
}

/* Runs cmd, returns its exit status; its output (stdout + stderr) in out. */
static int run(const char *cmd, char *out, size_t cap) {
    char full[40000];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) fail_msg("popen %s", cmd);
    size_t n = 0;
    while (n + 1 < cap) {
        size_t r = fread(out + n, 1, cap - n - 1, p);
        if (!r) break;
        n += r;
    }
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* max |a - b| / max |b| over n */
static double rel_err(const float *a, const float *b, size_t n) {
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return e / m;
}

static double logits_err(const char *dir, const char *gguf) {
    attn_gpt_model *mf, *mq;
    OK(attn_gpt_load_dir(dir, &mf));
    OK(attn_gpt_load_gguf(gguf, &mq));
    const int B = 2, T = 12, V = mf->cfg.vocab_size;
    assert_int_equal(mq->cfg.vocab_size, V);
    int32_t ids[24];
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)((i * 37 + 11) % (V - 4));
    float *a = malloc((size_t)B * T * V * sizeof(float)), *b = malloc((size_t)B * T * V * sizeof(float));
    attn_gpt_state *s1, *s2;
    OK(attn_gpt_state_init(mf, B, T, &s1));
    OK(attn_gpt_state_init(mq, B, T, &s2));
    OK(attn_gpt_forward(mf, s1, B, T, ids, a));
    OK(attn_gpt_forward(mq, s2, B, T, ids, b));
    const double e = rel_err(b, a, (size_t)B * T * V);
    attn_gpt_state_free(s1);
    attn_gpt_state_free(s2);
    attn_gpt_model_free(mf);
    attn_gpt_model_free(mq);
    free(a);
    free(b);
    return e;
}

/* One case: attn quantize DIR (or --from: a GGUF file) -> a file of type, checked by
 * tools/check_quantize.py, its logits within bound of the float model's. */
typedef struct {
    const char *model, *type;
    bool pure;
    double bound;
    bool vg; /* run under valgrind and AddressSanitizer too */
} qcase;

/* The cases: each file written by attn quantize (from src_gguf when not NULL), then every file
 * checked by one tools/check_quantize.py --batch process (one Python start-up, not one per file),
 * then each file's logits. Under valgrind and AddressSanitizer only the cases marked vg run (one
 * per code path: float, Q8_0, a k-quant mix, the row-length fallback, GPT-2's transposed
 * weights); the rest repeat those paths with other types (make test runs them all). */
static void run_cases(const qcase *cs, int n, const char *src_gguf) {
    static char out[16][4300], cmd[160000], buf[65536];
    char jobs[4300];
    snprintf(jobs, sizeof jobs, "%s", tu_tmp("jobs.txt"));
    FILE *jf = fopen(jobs, "w");
    assert_non_null(jf);
    bool any = false;
    assert_true(n <= 16);
    for (int i = 0; i < n; i++) {
        const qcase *c = &cs[i];
        out[i][0] = 0;
        if ((tu_valgrind() || tu_sanitized()) && !c->vg) continue;
        snprintf(out[i], sizeof out[i], "%s-%s%s.gguf", tu_tmp(c->model), c->type,
                 c->pure ? "-pure" : src_gguf ? "-rq" : "");
        snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' --type %s%s --quiet", attn_bin(),
                 src_gguf ? src_gguf : model_dir(c->model), out[i], c->type,
                 c->pure ? " --pure" : "");
        int rc = run(cmd, buf, sizeof buf);
        if (rc) fail_msg("%s: %d: %s", cmd, rc, buf);
        fprintf(jf, "'%s' '%s' %s%s", out[i], model_dir(c->model), c->type,
                c->pure ? " --pure" : "");
        if (src_gguf) fprintf(jf, " --from '%s'", src_gguf);
        fputc('\n', jf);
        any = true;
    }
    fclose(jf);
    if (any) {
        snprintf(cmd, sizeof cmd, ".venv/bin/python tools/check_quantize.py --batch < '%s'", jobs);
        const int rc = run(cmd, buf, sizeof buf);
        for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
            if (!strncmp(l, "check_quantize: ", 16)) printf("  %s\n", l + 16);
        if (rc) fail_msg("%s failed", cmd);
    }
    unlink(jobs);
    for (int i = 0; i < n; i++) {
        if (!out[i][0]) continue;
        const double e = logits_err(model_dir(cs[i].model), out[i]);
        printf("  %s %s%s%s: logits within %.3g of max|logit| of the float model (bound %g)\n",
               cs[i].model, src_gguf ? "requantized to " : "", cs[i].type,
               cs[i].pure ? " (pure)" : "", e, cs[i].bound);
        assert_true(e <= cs[i].bound);
        unlink(out[i]);
    }
}

static void test_llama_types(void **state) {
    (void)state;
    need_refs();
    static const qcase cs[] = {
        {"llama8", "f32", false, 1e-5, true},     {"llama8", "f16", false, 1e-3, false},
        {"llama8", "bf16", false, 1e-2, false},   {"llama8", "q8_0", false, 2.5e-2, true},
        {"llama8", "q4_0", false, 0.3, false},    {"llama8", "q5_1", false, 0.15, false},
        {"llama8", "q4_k_s", false, 0.25, false}, {"llama8", "q4_k_m", false, 0.25, true},
        {"llama8", "q5_k_m", false, 0.15, false}, {"llama8", "q6_k", false, 0.08, false},
        {"llama8", "q4_k_m", true, 0.3, false}};
    run_cases(cs, (int)(sizeof cs / sizeof cs[0]), NULL);
}

static void test_fallback_qwen2_gpt2(void **state) {
    (void)state;
    need_refs();
    static const qcase cs[] = {
        {"llama96", "q4_k_m", false, 0.03, true}, /* rows of 96: Q5_0, head Q8_0 */
        {"llama96", "q4_1", false, 0.03, false},  {"qwen2", "q8_0", false, 1e-2, true},
        {"qwen2", "q4_k_m", false, 0.03, false},  {"gpt2", "f16", false, 1e-3, false},
        {"gpt2", "q5_0", false, 0.04, true},      {"gpt2", "q5_k_m", false, 0.04, false}};
    run_cases(cs, (int)(sizeof cs / sizeof cs[0]), NULL);
}

/* GGUF -> GGUF: llama8 as Q8_0, then requantized to each type (checked against gguf.quants on
 * the input's dequantized values: check_quantize.py --from). */
static void test_requantize(void **state) {
    (void)state;
    need_refs();
    char a[4300], cmd[32000], buf[8192];
    snprintf(a, sizeof a, "%s", tu_tmp("rq-q8_0.gguf"));
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' --type q8_0 --quiet", attn_bin(),
             model_dir("llama8"), a);
    assert_int_equal(run(cmd, buf, sizeof buf), 0);
    static const qcase cs[] = {{"llama8", "q4_0", false, 0.3, true},
                               {"llama8", "q4_k_m", false, 0.3, false},
                               {"llama8", "f16", false, 0.3, false}};
    run_cases(cs, 3, a);
    unlink(a);
}

static void test_pick_rules(void **state) {
    (void)state;
    attn_gguf_quantize_params p = attn_gguf_quantize_default_params();
    int iv = 0, id = 0;
    const int64_t r256[2] = {256, 64}, r96[2] = {96, 64}, r48[2] = {48, 64}, v1[1] = {256};
#define PICK(name, ne, nd, tied) \
    attn_gguf_quantize_pick(&p, name, nd, ne, ATTN_GGUF_DTYPE_F32, 8, 8, tied, &iv, &id)
    OK(attn_gguf_ftype_parse("Q4_K_M", &p.ftype));
    assert_int_equal(PICK("output.weight", r256, 2, false), ATTN_GGUF_DTYPE_Q6_K);
    assert_int_equal(PICK("token_embd.weight", r256, 2, false), ATTN_GGUF_DTYPE_Q4_K);
    assert_int_equal(PICK("token_embd.weight", r256, 2, true), ATTN_GGUF_DTYPE_Q6_K);
    assert_int_equal(PICK("output.weight", r96, 2, false), ATTN_GGUF_DTYPE_Q8_0);
    assert_int_equal(PICK("output.weight", r48, 2, false), ATTN_GGUF_DTYPE_F16);
    assert_int_equal(PICK("blk.0.attn_norm.weight", v1, 1, false), ATTN_GGUF_DTYPE_F32);
    assert_int_equal(PICK("blk.0.attn_q.bias", v1, 1, false), ATTN_GGUF_DTYPE_F32);
    assert_int_equal(PICK("blk.0.attn_q.weight", r96, 2, false), ATTN_GGUF_DTYPE_Q5_0);
    /* attn_v of 8 layers: Q6_K on 0, 3, 6, 7 */
    const int want[8] = {1, 0, 0, 1, 0, 0, 1, 1};
    for (int l = 0; l < 8; l++) {
        char n[64];
        snprintf(n, sizeof n, "blk.%d.attn_v.weight", l);
        assert_int_equal(PICK(n, r256, 2, false), want[l] ? ATTN_GGUF_DTYPE_Q6_K : ATTN_GGUF_DTYPE_Q4_K);
        snprintf(n, sizeof n, "blk.%d.ffn_down.weight", l);
        assert_int_equal(PICK(n, r256, 2, false), want[l] ? ATTN_GGUF_DTYPE_Q6_K : ATTN_GGUF_DTYPE_Q4_K);
    }
    assert_int_equal(iv, 8);
    assert_int_equal(id, 8);
    OK(attn_gguf_ftype_parse("q4_0", &p.ftype));
    assert_int_equal(PICK("output.weight", r256, 2, false), ATTN_GGUF_DTYPE_Q6_K);
    assert_int_equal(PICK("blk.1.ffn_up.weight", r48, 2, false), ATTN_GGUF_DTYPE_F16);
    OK(attn_gguf_ftype_parse("q8_0", &p.ftype));
    assert_int_equal(PICK("output.weight", r256, 2, false), ATTN_GGUF_DTYPE_Q8_0);
    OK(attn_gguf_ftype_parse("f16", &p.ftype));
    assert_int_equal(PICK("output.weight", r48, 2, false), ATTN_GGUF_DTYPE_F16);
    assert_int_equal(PICK("position_embd.weight", r256, 2, false), ATTN_GGUF_DTYPE_F32);
    p.pure = true;
    OK(attn_gguf_ftype_parse("q4_k_m", &p.ftype));
    assert_int_equal(PICK("output.weight", r256, 2, false), ATTN_GGUF_DTYPE_Q4_K);
    assert_int_equal(PICK("output.weight", r96, 2, false), ATTN_GGUF_DTYPE_Q5_0);
#undef PICK
    attn_gguf_ftype ft;
    tu_expect_fail(attn_gguf_ftype_parse("q3_k_m", &ft), ATTN_STATUS_INVALID_ARGUMENT, "q3_k_m",
                   "q4_k_m");
}

/* exit status want and one line on stderr containing s */
static void bad(const char *args, int want, const char *s) {
    char cmd[32000], buf[8192];
    snprintf(cmd, sizeof cmd, "'%s' quantize %s", attn_bin(), args);
    const int rc = run(cmd, buf, sizeof buf);
    const char *nl = strchr(buf, '\n');
    printf("  attn quantize %s -> %d: %s", args, rc, buf);
    assert_int_equal(rc, want);
    assert_true(nl && nl[1] == '\0');
    assert_non_null(strstr(buf, "attn: error: "));
    assert_non_null(strstr(buf, s));
}

static void test_bad_input(void **state) {
    (void)state;
    need_refs();
    char args[16000];
    const char *o = tu_tmp("bad-out.gguf");
    snprintf(args, sizeof args, "'%s' '%s' --type q3_k_m", model_dir("gpt2"), o);
    bad(args, 2, "unknown type 'q3_k_m'");
    snprintf(args, sizeof args, "'%s' '%s'", model_dir("gpt2"), o);
    bad(args, 2, "--type is required");
    snprintf(args, sizeof args, "'%s' --type q8_0", model_dir("gpt2"));
    bad(args, 2, "needs an input");
    snprintf(args, sizeof args, "/nonexistent/model '%s' --type q8_0", o);
    bad(args, 1, "/nonexistent/model");
    /* not a GGUF file */
    const char *junk = tu_tmp("junk.gguf");
    FILE *f = fopen(junk, "wb");
    fputs("not a gguf file at all, just text", f);
    fclose(f);
    snprintf(args, sizeof args, "'%s' '%s' --type q8_0", junk, o);
    bad(args, 1, "junk.gguf");
    /* a directory without tokenizer.json */
    char d[4300], cmd[32000], buf[4096];
    snprintf(d, sizeof d, "%s", tu_tmp("notok"));
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s/config.json' '%s/model.safetensors' '%s/'",
             d, d, model_dir("gpt2"), model_dir("gpt2"), d);
    assert_int_equal(run(cmd, buf, sizeof buf), 0);
    snprintf(args, sizeof args, "'%s' '%s' --type q8_0", d, o);
    bad(args, 1, "no tokenizer.json");
    /* an unwritable output */
    snprintf(args, sizeof args, "'%s' /nonexistent/dir/out.gguf --type q8_0 --quiet",
             model_dir("gpt2"));
    bad(args, 1, "/nonexistent/dir");
    assert_int_equal(access(o, F_OK), -1); /* nothing written on failure */
    unlink(junk);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "quantize")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick_rules),
        cmocka_unit_test(test_llama_types),
        cmocka_unit_test(test_fallback_qwen2_gpt2),
        cmocka_unit_test(test_requantize),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

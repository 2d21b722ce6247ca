/* test_explain_model.c — `attn explain --model` (attn_explain_layer_*, attn_explain_head_compute,
 * attn_explain_find) against transformers' intermediate values pulled with hooks
 * (tools/ref_explain_model.py): all-MiniLM-L6-v2 (BERT) on the article's sentence, a
 * random-weight GPT-2 and a random-weight Llama with grouped-query attention and rotary
 * embeddings. For every head of the reference layer: the input rows, W_Q/W_K/W_V/W_O slices,
 * q and k before and after rotary, v, the scores, the probabilities, the weighted sum and the
 * head's share of the output projection agree with transformers within 1e-5 relative
 * (max |attn − ref| <= 1e-5 · max |ref|); the probabilities also equal the fused kernel's
 * (attn_viz_capture_*, what `attn attention` shows) within 1e-6. The CLI: --find on MiniLM lists
 * layer 3 head 1 sending 64% of "it"'s attention to "animal", --json, --compare-masks, --png;
 * the HTML page in headless Chromium (tu_skip without chromium). */
#include "tu.h"
#include "tu_page.h"

#include "attn_bert.h"
#include "attn_explain.h"
#include "attn_gpt.h"
#include "attn_io.h"
#include "attn_models.h"
#include "attn_viz.h"

#include <jansson.h>
#include <sys/wait.h>

static const char *SENTENCE = "The animal didn't cross the street because it was too tired";

static const char *attn_bin(void) {
    static char buf[1024];
    const char *b = getenv("ATTN_BUILD");
    snprintf(buf, sizeof buf, "%s/attn", b && *b ? b : "build");
    return buf;
}

/* ---- the reference -------------------------------------------------------------------------- */

typedef struct {
    attn_st_file *f;
    int T, C, H, Hk, D, layer;
    float scale;
    bool causal;
    int32_t *ids;
} ref;

static float *get(ref *r, const char *name, const attn_st_tensor **t) {
    float *p = NULL;
    const attn_st_tensor *tt;
    if (attn_st_load_f32(r->f, name, &p, &tt) != ATTN_STATUS_OK)
        fail_msg("reference tensor %s: %s", name, attn_last_error());
    if (t) *t = tt;
    return p;
}

static bool open_ref(const char *name, ref *r) {
    memset(r, 0, sizeof *r);
    char path[256];
    snprintf(path, sizeof path, "explain_model/%s.ref.safetensors", name);
    if (attn_st_open(tu_ref_path(path), &r->f)) return false;
    const attn_st_tensor *t;
    assert_int_equal(attn_st_load_i32(r->f, "ids", &r->ids, &t), ATTN_STATUS_OK);
    r->T = (int)t->shape[0];
    float *q = get(r, "q", &t);
    r->H = (int)t->shape[0], r->D = (int)t->shape[2];
    attn_free(q);
    float *k = get(r, "k", &t);
    r->Hk = (int)t->shape[0];
    attn_free(k);
    float *x = get(r, "x", &t);
    r->C = (int)t->shape[1];
    attn_free(x);
    r->layer = atoi(attn_st_metadata(r->f, "layer"));
    r->scale = (float)atof(attn_st_metadata(r->f, "scale"));
    r->causal = !strcmp(attn_st_metadata(r->f, "causal"), "1");
    return true;
}

static void close_ref(ref *r) {
    attn_st_close(r->f);
    attn_free(r->ids);
}

/* Columns [c0, c0 + n) of m (rows, ld) (a new buffer). */
static float *colsof(const float *m, int rows, int ld, int c0, int n) {
    float *d = malloc(sizeof(float) * (size_t)rows * n);
    for (int i = 0; i < rows; i++) memcpy(d + (size_t)i * n, m + (size_t)i * ld + c0, sizeof(float) * n);
    return d;
}

/* The largest relative error of the checks of one model (reported). */
static double worst;

static void close_rel(const char *what, int h, const float *got, const float *want, size_t n,
                      double rtol) {
    char name[96];
    snprintf(name, sizeof name, "head %d %s", h, what);
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(want[i]) && fabs(want[i]) > s) s = fabs(want[i]);
        if (isfinite(want[i]) && fabs((double)got[i] - want[i]) > e) e = fabs((double)got[i] - want[i]);
    }
    if (s > 0 && e / s > worst) worst = e / s;
    tu_close(name, got, want, n, rtol, 0);
}

/* Every head of the reference layer against transformers; l captured by the model's forward;
 * fused: the model's whole capture (attn_viz), whose map of the layer must equal the walk-through's
 * probabilities. */
static void check_layer(const char *model, ref *r, const attn_explain_layer *l, const attn_viz *fused) {
    const int T = r->T, C = r->C, H = r->H, Hk = r->Hk, D = r->D;
    assert_int_equal(l->H, H);
    assert_int_equal(l->Tq, T);
    float *x = get(r, "x", NULL), *wq = get(r, "w_q", NULL), *wk = get(r, "w_k", NULL);
    float *wv = get(r, "w_v", NULL), *wo = get(r, "w_o", NULL), *qp = get(r, "q_pre", NULL);
    float *kp = get(r, "k_pre", NULL), *q = get(r, "q", NULL), *k = get(r, "k", NULL);
    float *v = get(r, "v", NULL), *sc = get(r, "scores", NULL), *pr = get(r, "probs", NULL);
    float *ctx = get(r, "ctx", NULL), *share = get(r, "share", NULL);
    const attn_viz_map *fm = attn_viz_find(fused, ATTN_VIZ_SELF, r->layer);
    assert_non_null(fm);
    worst = 0;
    double fused_err = 0;
    const bool quiet = getenv("ATTN_TEST_QUIET") != NULL;
    if (!quiet) setenv("ATTN_TEST_QUIET", "1", 1); /* one summary line per model, failures in full */
    /* under valgrind: the first and the last head (every code path, the last key/value group) */
    for (int h = 0; h < H; h = tu_valgrind() && h < H - 1 ? H - 1 : h + 1) {
        attn_explain_head e;
        assert_int_equal(attn_explain_head_compute(l, h, h == 0, &e), ATTN_STATUS_OK);
        const int g = h / (H / Hk);
        assert_int_equal(e.kv_head, g);
        assert_int_equal(e.causal, r->causal);
        assert_true(fabsf(e.scale - r->scale) <= 1e-7f * r->scale);
        close_rel("x", h, e.x_q, x, (size_t)T * C, 1e-5);
        float *s;
        s = colsof(wq, C, H * D, h * D, D), close_rel("W_Q", h, e.w_q, s, (size_t)C * D, 1e-6), free(s);
        s = colsof(wk, C, Hk * D, g * D, D), close_rel("W_K", h, e.w_k, s, (size_t)C * D, 1e-6), free(s);
        s = colsof(wv, C, Hk * D, g * D, D), close_rel("W_V", h, e.w_v, s, (size_t)C * D, 1e-6), free(s);
        close_rel("W_O", h, e.w_o, wo + (size_t)h * D * C, (size_t)D * C, 1e-6);
        close_rel("q before rotary", h, e.q_pre, qp + (size_t)h * T * D, (size_t)T * D, 1e-5);
        close_rel("k before rotary", h, e.k_pre, kp + (size_t)g * T * D, (size_t)T * D, 1e-5);
        close_rel("q", h, e.pass.q, q + (size_t)h * T * D, (size_t)T * D, 1e-5);
        close_rel("k", h, e.pass.k, k + (size_t)g * T * D, (size_t)T * D, 1e-5);
        close_rel("v", h, e.pass.v, v + (size_t)g * T * D, (size_t)T * D, 1e-5);
        close_rel("scores", h, e.pass.scores, sc + (size_t)h * T * T, (size_t)T * T, 1e-5);
        close_rel("softmax", h, e.pass.weights, pr + (size_t)h * T * T, (size_t)T * T, 1e-5);
        close_rel("kernel probabilities", h, e.probs_model, pr + (size_t)h * T * T, (size_t)T * T,
                  1e-5);
        s = colsof(ctx, T, H * D, h * D, D);
        close_rel("weighted sum", h, e.pass.output, s, (size_t)T * D, 1e-5);
        close_rel("model's weighted sum", h, e.ctx_model, s, (size_t)T * D, 1e-5);
        free(s);
        close_rel("head's share", h, e.out_share, share + (size_t)h * T * C, (size_t)T * C, 1e-5);
        /* the walk-through's softmax is the fused kernel's (what `attn attention` shows) */
        const float *fp = fm->p + (size_t)h * T * T;
        for (size_t i = 0; i < (size_t)T * T; i++) {
            const double d = fabs((double)e.pass.weights[i] - fp[i]);
            if (d > fused_err) fused_err = d;
        }
        /* scaled = scores · scale, −inf exactly where the mask hides a key */
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                const float a = e.pass.scaled[(size_t)i * T + j];
                if (r->causal && j > i) {
                    if (!(isinf(a) && a < 0)) fail_msg("%s head %d: scaled (%d, %d) not -inf", model, h, i, j);
                } else if (fabsf(a - e.pass.scores[(size_t)i * T + j] * e.scale) > 1e-6f * (1 + fabsf(a))) {
                    fail_msg("%s head %d: scaled (%d, %d) = %g is not score x scale", model, h, i, j, a);
                }
            }
        if (h == 0) { /* the other mask: rows still sum to 1; a decoder unmasked sees the future */
            assert_true(e.compared);
            for (int i = 0; i < T; i++) {
                double sum = 0;
                for (int j = 0; j < T; j++) sum += e.other.weights[(size_t)i * T + j];
                assert_true(fabs(sum - 1) < 1e-5);
            }
            const float fut = e.other.weights[1]; /* row 0, key 1 */
            assert_true(r->causal ? fut > 0 : e.pass.weights[1] > 0);
        }
        attn_explain_head_free(&e);
    }
    if (!quiet) unsetenv("ATTN_TEST_QUIET");
    printf("  %s layer %d, %d heads (%d key/value), T=%d%s: max relative error vs transformers "
           "%.2e (tolerance 1e-5); walk-through softmax vs the fused kernel's: max |diff| %.2e\n",
           model, r->layer, H, Hk, T, tu_valgrind() ? " (valgrind: heads 0 and last)" : "",
           worst, fused_err);
    assert_true(fused_err <= 1e-6);
    float *all[] = {x, wq, wk, wv, wo, qp, kp, q, k, v, sc, pr, ctx, share};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) attn_free(all[i]);
}

/* ---- the models ----------------------------------------------------------------------------- */

static void test_minilm(void **state) {
    (void)state;
    ref r;
    if (!open_ref("bert", &r))
        tu_skip("%s absent: models/all-MiniLM-L6-v2 missing (sh tools/get_minilm.sh)",
                tu_ref_path("explain_model/bert.ref.safetensors"));
    attn_bert_model *m;
    assert_int_equal(attn_bert_load("models/all-MiniLM-L6-v2", &m), ATTN_STATUS_OK);
    attn_explain_layer l;
    assert_int_equal(attn_explain_layer_bert(m, r.ids, r.T, r.layer, &l), ATTN_STATUS_OK);
    attn_viz *v;
    assert_int_equal(attn_viz_capture_bert(m, NULL, r.ids, NULL, r.T, &v), ATTN_STATUS_OK);
    check_layer("all-MiniLM-L6-v2", &r, &l, v);

    /* find: "it" (position 10) -> "animal" (2) in layer 3 head 1, at 64% */
    attn_explain_hit hits[8];
    int n = 0;
    bool skip[64] = {false};
    skip[0] = skip[r.T - 1] = true; /* [CLS], [SEP] */
    assert_int_equal(attn_explain_find(v, ATTN_VIZ_SELF, 10, skip, hits, 8, &n), ATTN_STATUS_OK);
    int at = -1;
    for (int i = 0; i < n; i++) {
        printf("  find 'it': %d. layer %d head %d -> %d (%.1f%%)\n", i + 1, hits[i].layer,
               hits[i].head, hits[i].key, 100.0 * hits[i].weight);
        if (hits[i].layer == 3 && hits[i].head == 1) at = i;
        if (i) assert_true(hits[i].weight <= hits[i - 1].weight);
    }
    assert_true(at >= 0);
    assert_int_equal(hits[at].key, 2);
    assert_true(fabsf(hits[at].weight - 0.640f) < 0.005f);
    assert_int_equal(attn_explain_find_key(v, ATTN_VIZ_SELF, 10, 2, hits, 3, &n), ATTN_STATUS_OK);
    assert_int_equal(n, 3);
    bool l3h1 = false;
    for (int i = 0; i < 2; i++) l3h1 |= hits[i].layer == 3 && hits[i].head == 1;
    assert_true(l3h1); /* among the two heads that attend most from "it" to "animal" */

    /* errors */
    attn_explain_head e;
    tu_expect_fail(attn_explain_head_compute(&l, 12, false, &e), ATTN_STATUS_INVALID_ARGUMENT,
                   "head 12", "0 to 11");
    attn_explain_layer bad;
    tu_expect_fail(attn_explain_layer_bert(m, r.ids, r.T, 6, &bad), ATTN_STATUS_INVALID_ARGUMENT,
                   "layer 6", "0 to 5");
    attn_viz_free(v);
    attn_explain_layer_free(&l);
    attn_bert_model_free(m);
    close_ref(&r);
}

static void test_decoder(const char *name, const char *what) {
    ref r;
    if (!open_ref(name, &r)) fail_msg("missing explain_model/%s (run tools/ref_explain_model.py)", name);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", tu_ref_path("explain_model"), name);
    attn_gpt_model *m;
    assert_int_equal(attn_gpt_load(dir, &m), ATTN_STATUS_OK);
    attn_explain_layer l;
    assert_int_equal(attn_explain_layer_gpt(m, r.ids, r.T, r.layer, &l), ATTN_STATUS_OK);
    attn_viz *v;
    assert_int_equal(attn_viz_capture_gpt(m, NULL, r.ids, r.T, &v), ATTN_STATUS_OK);
    check_layer(what, &r, &l, v);
    attn_viz_free(v);
    attn_explain_layer_free(&l);
    attn_gpt_model_free(m);
    close_ref(&r);
}

static void test_gpt2(void **state) {
    (void)state;
    test_decoder("gpt", "GPT-2");
}

static void test_llama(void **state) {
    (void)state;
    test_decoder("llama", "Llama (GQA 6/2, rotary)");
}

/* attn's translator (the small one tools/ref_tiny_translator.py trains): cross-attention, its
 * walk-through against the model's own fused kernel and weighted sums (no transformers twin:
 * attn's own format). */
static void test_translator(void **state) {
    (void)state;
    const char *dir = tu_ref_path("tiny-en-zh");
    attn_encdec_model *m;
    if (attn_encdec_load_dir(dir, &m) != ATTN_STATUS_OK)
        tu_skip("%s missing (tools/ref_tiny_translator.py, run by tests/run.sh): %s", dir,
                attn_last_error());
    const int32_t src[] = {5, 9, 13, 2}, tgt[] = {0, 7, 11, 6, 3};
    const int Ts = 4, n_tgt = 5, Tt = 4;
    attn_viz *v;
    assert_int_equal(attn_viz_capture_encdec(m, NULL, src, Ts, tgt, n_tgt, &v), ATTN_STATUS_OK);
    const attn_viz_kind kinds[] = {ATTN_VIZ_ENC_SELF, ATTN_VIZ_DEC_SELF, ATTN_VIZ_CROSS};
    for (int k = 0; k < 3; k++) {
        attn_explain_layer l;
        assert_int_equal(attn_explain_layer_encdec(m, src, Ts, tgt, n_tgt, kinds[k], 1, &l), 0);
        const attn_viz_map *fm = attn_viz_find(v, kinds[k], 1);
        for (int h = 0; h < l.H; h++) {
            attn_explain_head e;
            assert_int_equal(attn_explain_head_compute(&l, h, false, &e), ATTN_STATUS_OK);
            assert_int_equal(e.Tq, k == 0 ? Ts : Tt);
            assert_int_equal(e.Tk, k == 1 ? Tt : Ts);
            char name[64];
            snprintf(name, sizeof name, "%s head %d softmax", attn_viz_kind_name(kinds[k]), h);
            tu_close(name, e.pass.weights, fm->p + (size_t)h * e.Tq * e.Tk,
                     (size_t)e.Tq * e.Tk, 0, 1e-6);
            snprintf(name, sizeof name, "%s head %d weighted sum", attn_viz_kind_name(kinds[k]), h);
            tu_close(name, e.pass.output, e.ctx_model, (size_t)e.Tq * e.d_head, 1e-5, 0);
            attn_explain_head_free(&e);
        }
        attn_explain_head e;
        if (k == 2)
            tu_expect_fail(attn_explain_head_compute(&l, 0, true, &e),
                           ATTN_STATUS_INVALID_ARGUMENT, "cross-attention", NULL);
        attn_explain_layer_free(&l);
    }
    attn_viz_free(v);
    attn_encdec_model_free(m);
}

/* ---- the CLI -------------------------------------------------------------------------------- */

/* Run attn with args; its stdout (and stderr) into out; the exit status. */
static int run_cli(const char *args, char *out, size_t cap) {
    char cmd[8192], path[1024];
    snprintf(path, sizeof path, "%s", tu_tmp("cli.out"));
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", attn_bin(), args, path);
    int st = system(cmd);
    size_t n;
    char *t = tu_read_all(path, &n);
    snprintf(out, cap, "%s", t ? t : "");
    free(t);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli_find(void **state) {
    (void)state;
    ref r;
    if (!open_ref("bert", &r))
        tu_skip("models/all-MiniLM-L6-v2 missing (sh tools/get_minilm.sh)");
    static char out[1 << 20];
    char args[2048];
    snprintf(args, sizeof args, "explain --model models/all-MiniLM-L6-v2 \"%s\" --find it", SENTENCE);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    const char *line = strstr(out, "layer  3 head  1   64.0% -> animal");
    if (!line) fail_msg("--find it does not list layer 3 head 1 -> animal at 64.0%%:\n%.3000s", out);
    const char *per = strstr(out, "  2 animal");
    assert_non_null(per);
    const char *eol = strchr(per, '\n');
    assert_non_null(strstr(per, "layer  3 head  1  64.0%"));
    assert_true(strstr(per, "layer  3 head  1  64.0%") < eol);
    printf("  --find it: %.*s\n", (int)(strchr(line, '\n') - line), line);

    /* the walk-through of that head as JSON: its softmax is transformers' */
    snprintf(args, sizeof args,
             "explain --model models/all-MiniLM-L6-v2 \"%s\" --find it --key animal --layer 3 "
             "--head 1 --json",
             SENTENCE);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    if (!j) fail_msg("not JSON: %.500s", out);
    assert_int_equal(json_integer_value(json_object_get(j, "layer")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "head")), 1);
    assert_int_equal(json_integer_value(json_object_get(j, "query")), 10);
    json_t *w = json_object_get(j, "weights");
    float *pr = get(&r, "probs", NULL);
    const int T = r.T;
    float *got = malloc(sizeof(float) * T * T);
    for (int i = 0; i < T; i++)
        for (int k = 0; k < T; k++)
            got[i * T + k] = (float)json_real_value(json_array_get(json_array_get(w, i), k));
    tu_close("--json layer 3 head 1 softmax", got, pr + (size_t)1 * T * T, (size_t)T * T, 1e-5, 0);
    printf("  it -> animal in layer 3 head 1: %.4f\n", (double)got[10 * T + 2]);
    json_t *find = json_object_get(j, "find");
    assert_true(json_array_size(find) >= 2); /* ranked by the weight on "animal" */
    bool l3h1 = false;
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(find, i);
        assert_string_equal(json_string_value(json_object_get(e, "key_label")), "animal");
        l3h1 |= json_integer_value(json_object_get(e, "layer")) == 3 &&
                json_integer_value(json_object_get(e, "head")) == 1;
    }
    assert_true(l3h1);
    assert_int_equal(json_array_size(json_object_get(j, "w_q")), r.C); /* full: (C, D) */
    free(got);
    attn_free(pr);
    json_decref(j);
    close_ref(&r);

    assert_int_equal(run_cli("explain --model models/all-MiniLM-L6-v2 \"a b\" --find zebra", out,
                             sizeof out),
                     1);
    assert_non_null(strstr(out, "'zebra'"));
    assert_int_equal(run_cli("explain --model models/all-MiniLM-L6-v2 \"a b\" --head 99", out,
                             sizeof out),
                     1);
    assert_non_null(strstr(out, "head 99"));
    assert_int_equal(run_cli("explain --model models/all-MiniLM-L6-v2", out, sizeof out), 2);
}

/* The Llama reference through the CLI: --ids, a GQA head, --compare-masks and --png. */
static void test_cli_llama(void **state) {
    (void)state;
    ref r;
    if (!open_ref("llama", &r)) fail_msg("missing explain_model/llama (tools/ref_explain_model.py)");
    char ids[1024] = "", args[8192];
    for (int i = 0; i < r.T; i++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", (int)r.ids[i]);
    static char out[1 << 20];
    snprintf(args, sizeof args,
             "--backend %s explain --model '%s/llama' --ids %s --layer 1 --head 5 --query 7 "
             "--compare-masks --json",
             attn_backend_name(attn_get_backend()), tu_ref_path("explain_model"), ids);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    if (!j) fail_msg("not JSON: %.500s", out);
    assert_int_equal(json_integer_value(json_object_get(j, "kv_head")), 1);
    assert_int_equal(json_integer_value(json_object_get(j, "rope_dim")), r.D);
    assert_string_equal(json_string_value(json_object_get(j, "mask")), "causal");
    const int T = r.T, D = r.D;
    float *q = get(&r, "q", NULL), *qp = get(&r, "q_pre", NULL);
    float *gq = malloc(sizeof(float) * T * D), *gp = malloc(sizeof(float) * T * D);
    for (int i = 0; i < T; i++)
        for (int d = 0; d < D; d++) {
            gq[i * D + d] = (float)json_real_value(json_array_get(json_array_get(json_object_get(j, "q"), i), d));
            gp[i * D + d] = (float)json_real_value(json_array_get(json_array_get(json_object_get(j, "q_pre"), i), d));
        }
    tu_close("--json head 5 q after rotary", gq, q + (size_t)5 * T * D, (size_t)T * D, 1e-5, 0);
    tu_close("--json head 5 q before rotary", gp, qp + (size_t)5 * T * D, (size_t)T * D, 1e-5, 0);
    json_t *other = json_object_get(j, "other");
    assert_string_equal(json_string_value(json_object_get(other, "mask")), "none");
    assert_true(json_is_null(json_array_get(json_array_get(json_object_get(j, "scaled"), 0), 1)));
    free(gq), free(gp), attn_free(q), attn_free(qp);
    json_decref(j);

    /* text output names the steps */
    snprintf(args, sizeof args, "explain --model '%s/llama' --ids %s --layer 1 --head 5",
             tu_ref_path("explain_model"), ids);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "reads key/value head 1 of 2"));
    assert_non_null(strstr(out, "rotary embeddings"));
    assert_non_null(strstr(out, "before:"));
    assert_non_null(strstr(out, "Step 6."));

    char font[1024];
    if (attn_viz_find_font(font, sizeof font) == ATTN_STATUS_OK) {
        char png[1024];
        snprintf(png, sizeof png, "%s", tu_tmp("llama.png"));
        snprintf(args, sizeof args,
                 "explain --model '%s/llama' --ids %s --layer 1 --head 5 --compare-masks --png '%s'",
                 tu_ref_path("explain_model"), ids, png);
        assert_int_equal(run_cli(args, out, sizeof out), 0);
        size_t n;
        char *b = tu_read_all(png, &n);
        assert_non_null(b);
        assert_true(n > 1000 && !memcmp(b, "\x89PNG", 4));
        printf("  --png: %zu bytes\n", n);
        free(b);
    } else {
        printf("  --png not drawn: no font (%s)\n", attn_last_error());
    }
    snprintf(args, sizeof args, "explain --model '%s/llama' --ids %s --layer 2",
             tu_ref_path("explain_model"), ids);
    assert_int_equal(run_cli(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "layer 2"));
    close_ref(&r);
}

static void test_png_font(void **state) {
    (void)state;
    char font[1024];
    if (attn_viz_find_font(font, sizeof font) != ATTN_STATUS_OK)
        tu_skip("no CJK font (%s): fonts-noto-cjk (sh tools/install_deps.sh)", attn_last_error());
    ref r;
    if (!open_ref("gpt", &r)) fail_msg("missing explain_model/gpt (tools/ref_explain_model.py)");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/gpt", tu_ref_path("explain_model"));
    attn_gpt_model *m;
    assert_int_equal(attn_gpt_load(dir, &m), ATTN_STATUS_OK);
    attn_explain_layer l;
    attn_explain_head h;
    assert_int_equal(attn_explain_layer_gpt(m, r.ids, r.T, 0, &l), ATTN_STATUS_OK);
    assert_int_equal(attn_explain_head_compute(&l, 3, true, &h), ATTN_STATUS_OK);
    char png[1024];
    snprintf(png, sizeof png, "%s", tu_tmp("gpt.png"));
    assert_int_equal(attn_explain_head_write_png(&h, NULL, NULL, "GPT-2", png, NULL), ATTN_STATUS_OK);
    size_t n;
    char *b = tu_read_all(png, &n);
    assert_true(b && n > 1000 && !memcmp(b, "\x89PNG", 4));
    free(b);
    attn_explain_head_free(&h);
    attn_explain_layer_free(&l);
    attn_gpt_model_free(m);
    close_ref(&r);
}

/* The page in headless Chromium: clicking "it" shows "animal" as its strongest key. */
static void test_html_chromium(void **state) {
    (void)state;
    if (!tu_chromium()) tu_skip("chromium not installed (sh tools/install_deps.sh; or ATTN_CHROMIUM)");
    if (tu_valgrind())
        tu_skip_env("under valgrind: the page runs in Chromium (not traced); test_minilm checks the "
                    "same walk-through in this process");
    ref r;
    if (!open_ref("bert", &r)) tu_skip("models/all-MiniLM-L6-v2 missing (sh tools/get_minilm.sh)");
    attn_bert_model *m;
    attn_tok *tok;
    assert_int_equal(attn_bert_load("models/all-MiniLM-L6-v2", &m), ATTN_STATUS_OK);
    assert_int_equal(attn_tok_load("models/all-MiniLM-L6-v2", &tok), ATTN_STATUS_OK);
    char lab[64][64];
    const char *labels[64];
    for (int i = 0; i < r.T; i++) attn_viz_token_label(tok, r.ids[i], lab[i], sizeof lab[i]), labels[i] = lab[i];
    assert_string_equal(labels[10], "it");
    attn_explain_layer l;
    attn_explain_head h;
    assert_int_equal(attn_explain_layer_bert(m, r.ids, r.T, 3, &l), ATTN_STATUS_OK);
    assert_int_equal(attn_explain_head_compute(&l, 1, true, &h), ATTN_STATUS_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s", tu_tmp("explain.html"));
    assert_int_equal(attn_explain_head_write_html(&h, labels, labels, "all-MiniLM-L6-v2 </script>",
                                                  10, path),
                     ATTN_STATUS_OK);
    size_t n;
    char *html = tu_read_all(path, &n);
    assert_null(strstr(html, "http://"));
    assert_null(strstr(html, "https://"));
    assert_null(strstr(html, "MiniLM-L6-v2 </script>")); /* escaped in the data */
    free(html);
    int console = 0;
    json_t *j = tu_run_page(path, "10,2,0", &console);
    assert_non_null(j);
    char *dump = json_dumps(j, JSON_COMPACT);
    printf("  hook: %.400s\n", dump);
    free(dump);
    assert_int_equal(json_integer_value(json_object_get(j, "errors")), 0);
    assert_int_equal(console, 0);
    json_t *res = json_object_get(j, "results");
    assert_int_equal(json_array_size(res), 3);
    json_t *it = json_array_get(res, 0);
    assert_int_equal(json_integer_value(json_object_get(it, "query")), 10);
    assert_int_equal(json_integer_value(json_object_get(it, "top")), 2); /* animal */
    assert_true(fabs(json_real_value(json_object_get(it, "weight")) - h.pass.weights[10 * r.T + 2]) < 1e-6);
    for (size_t i = 0; i < 3; i++) {
        json_t *e = json_array_get(res, i);
        assert_int_equal(json_integer_value(json_object_get(e, "rows")), r.T);
        assert_true(fabs(json_number_value(json_object_get(e, "sum")) - 1.0) < 0.005);
    }
    json_decref(j);
    attn_explain_head_free(&h);
    attn_explain_layer_free(&l);
    attn_tok_free(tok);
    attn_bert_model_free(m);
    close_ref(&r);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "explain-model")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minilm),   cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_llama),    cmocka_unit_test(test_translator),
        cmocka_unit_test(test_cli_find),
        cmocka_unit_test(test_cli_llama), cmocka_unit_test(test_png_font),
        cmocka_unit_test(test_html_chromium),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rm_tree(tu_dir);
    return rc;
}

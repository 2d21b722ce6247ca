/* test_viz_models.c — attention captured from GPT-2 and BERT (attn_viz_capture_gpt / _bert and
 * `attn attention`) against transformers' output_attentions (tools/ref_viz.py: random-weight
 * GPT-2 and BERT models, and the real all-MiniLM-L6-v2 on the article's sentence when present).
 * Tolerance: |attn − transformers| <= 1e-5 per probability (absolute: probabilities are <= 1);
 * rows sum to 1 within 1e-5; GPT-2's masked entries (j > i) are exactly 0. */
#include "tu.h"

#include "attn_bert.h"
#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_tok.h"
#include "attn_viz.h"

#include <sys/wait.h>

static const char *attn_bin(void) {
    static char buf[1024];
    const char *b = getenv("ATTN_BUILD");
    snprintf(buf, sizeof buf, "%s/attn", b && *b ? b : "build");
    return buf;
}

/* The reference ids (T) and per-layer attentions. */
typedef struct {
    int T, L, H;
    int32_t *ids;
    float **att; /* [L] (H, T, T) */
} ref;

static bool load_ref(const char *name, ref *r) {
    memset(r, 0, sizeof *r);
    attn_st_file *f;
    if (attn_st_open(tu_ref_path(name), &f)) return false;
    const attn_st_tensor *t;
    assert_int_equal(attn_st_load_i32(f, "ids", &r->ids, &t), ATTN_STATUS_OK);
    r->T = (int)t->shape[0];
    r->att = calloc(64, sizeof *r->att);
    for (;; r->L++) {
        char n[32];
        snprintf(n, sizeof n, "self.%d", r->L);
        if (!attn_st_find(f, n)) break;
        assert_int_equal(attn_st_load_f32(f, n, &r->att[r->L], &t), ATTN_STATUS_OK);
        r->H = (int)t->shape[0];
        assert_int_equal(t->shape[1], r->T);
    }
    attn_st_close(f);
    return r->L > 0;
}

static void free_ref(ref *r) {
    for (int l = 0; l < r->L; l++) attn_free(r->att[l]);
    free(r->att);
    attn_free(r->ids);
}

/* Every map of v against the reference; causal: entries j > i must be exactly 0. */
static void compare(const char *what, const attn_viz *v, const ref *r, bool causal) {
    char name[96];
    assert_int_equal(attn_viz_num_layers(v, ATTN_VIZ_SELF), r->L);
    for (int l = 0; l < r->L; l++) {
        const attn_viz_map *m = attn_viz_find(v, ATTN_VIZ_SELF, l);
        assert_non_null(m);
        assert_int_equal(m->H, r->H);
        assert_int_equal(m->Tq, r->T);
        snprintf(name, sizeof name, "%s self.%d (%d, %d, %d)", what, l, r->H, r->T, r->T);
        tu_close(name, m->p, r->att[l], (size_t)r->H * r->T * r->T, 0, 1e-5);
        if (causal)
            for (int h = 0; h < m->H; h++)
                for (int i = 0; i < m->Tq; i++)
                    for (int j = i + 1; j < m->Tk; j++)
                        if (m->p[((size_t)h * m->Tq + i) * m->Tk + j] != 0.0f)
                            fail_msg("%s: masked entry (%d, %d, %d) is not 0", name, h, i, j);
    }
    size_t zeros;
    double e = attn_viz_row_sum_error(v, &zeros);
    printf("  %s: max |row sum - 1| = %.2e (tolerance 1e-5)\n", what, e);
    assert_true(e <= 1e-5);
    assert_int_equal(zeros, 0);
}

static void test_gpt(void **state) {
    (void)state;
    ref r;
    if (!load_ref("viz/gpt.ref.safetensors", &r))
        fail_msg("missing viz/gpt.ref (run tools/ref_viz.py)");
    attn_gpt_model *m;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", tu_ref_path("viz/gpt"));
    assert_int_equal(attn_gpt_load_dir(dir, &m), ATTN_STATUS_OK);
    attn_viz *v;
    assert_int_equal(attn_viz_capture_gpt(m, NULL, r.ids, r.T, &v), ATTN_STATUS_OK);
    compare("GPT-2", v, &r, true);
    char lab[32];
    snprintf(lab, sizeof lab, "#%d", (int)r.ids[0]); /* no tokenizer: the ids label the tokens */
    assert_string_equal(v->tokens[0], lab);
    attn_viz_free(v);
    int32_t bad[2] = {1, 97};
    tu_expect_fail(attn_viz_capture_gpt(m, NULL, bad, 2, &v), ATTN_STATUS_INVALID_ARGUMENT,
                   "id 97 at position 1", "[0, 97)");
    tu_expect_fail(attn_viz_capture_gpt(m, NULL, bad, 65, &v), ATTN_STATUS_INVALID_ARGUMENT,
                   "65 tokens", "1 to 64");

    /* the CLI on the same directory: --ids, --out, then the file against the reference */
    char ids[1024] = "", cmd[8192];
    for (int i = 0; i < r.T; i++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", (int)r.ids[i]);
    char out[1024];
    snprintf(out, sizeof out, "%s", tu_tmp("gpt.safetensors"));
    snprintf(cmd, sizeof cmd, "'%s' attention --model '%s' --ids %s --out '%s' >/dev/null",
             attn_bin(), dir, ids, out);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(attn_viz_load(out, &v), ATTN_STATUS_OK);
    compare("GPT-2 via attn attention --out", v, &r, true);
    attn_viz_free(v);

    /* --generate: the capture covers the prompt and exactly the tokens greedy generation chose */
    const int n_new = 6, np = 5;
    int32_t seq[5 + 6];
    memcpy(seq, r.ids, np * sizeof *seq);
    attn_gen_params gp = attn_gen_default_params();
    gp.greedy = true;
    attn_gen_stats gs;
    assert_int_equal(attn_gen_gpt(m, &gp, seq, np, n_new, -1, seq + np, NULL, NULL, &gs), 0);
    assert_int_equal(gs.n_generated, n_new);
    /* Compared bit for bit below, so the CLI must run the kernels of this process: under
     * valgrind (which hides AVX-512) this process runs AVX2 while an untraced child would pick
     * AVX-512, whose sums round differently. */
    snprintf(cmd, sizeof cmd,
             "ATTN_BACKEND=%s '%s' attention --model '%s' --ids %d,%d,%d,%d,%d --generate %d "
             "--out '%s' >/dev/null",
             attn_backend_name(attn_get_backend()), attn_bin(), dir, (int)seq[0], (int)seq[1],
             (int)seq[2], (int)seq[3], (int)seq[4], n_new, out);
    st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    attn_viz *g, *want;
    assert_int_equal(attn_viz_load(out, &g), ATTN_STATUS_OK);
    assert_int_equal(g->n_tokens, np + n_new);
    for (int i = 0; i < np + n_new; i++) {
        char want_lab[32];
        snprintf(want_lab, sizeof want_lab, "#%d", (int)seq[i]);
        assert_string_equal(g->tokens[i], want_lab);
    }
    assert_int_equal(attn_viz_capture_gpt(m, NULL, seq, np + n_new, &want), ATTN_STATUS_OK);
    for (int l = 0; l < want->n_maps; l++) {
        const attn_viz_map *a = &want->maps[l], *b = attn_viz_find(g, a->kind, a->layer);
        assert_non_null(b);
        tu_close("GPT-2 --generate capture", b->p, a->p, (size_t)a->H * a->Tq * a->Tk, 0, 0);
    }
    printf("  --generate %d: captured tokens = prompt + the %d greedy tokens\n", n_new, n_new);
    attn_viz_free(g);
    attn_viz_free(want);
    attn_gpt_model_free(m);
    free_ref(&r);
}

static void test_bert(void **state) {
    (void)state;
    ref r;
    if (!load_ref("viz/bert.ref.safetensors", &r))
        fail_msg("missing viz/bert.ref (run tools/ref_viz.py)");
    attn_bert_model *m;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", tu_ref_path("viz/bert"));
    assert_int_equal(attn_bert_load_dir(dir, &m), ATTN_STATUS_OK);
    attn_viz *v;
    assert_int_equal(attn_viz_capture_bert(m, NULL, r.ids, NULL, r.T, &v), ATTN_STATUS_OK);
    compare("BERT", v, &r, false);
    attn_viz_free(v);
    int32_t bad[2] = {-1, 3};
    tu_expect_fail(attn_viz_capture_bert(m, NULL, bad, NULL, 2, &v), ATTN_STATUS_INVALID_ARGUMENT,
                   "id -1 at position 0", "BERT");
    attn_bert_model_free(m);
    free_ref(&r);
}

/* The real all-MiniLM-L6-v2 on the article's sentence, from TEXT through its own tokenizer. */
static void test_minilm(void **state) {
    (void)state;
    ref r;
    if (!load_ref("viz/minilm.ref.safetensors", &r))
        tu_skip("%s absent: models/all-MiniLM-L6-v2 missing (sh tools/get_minilm.sh)",
                tu_ref_path("viz/minilm.ref.safetensors"));
    const char *dir = "models/all-MiniLM-L6-v2";
    char out[1024], cmd[8192];
    snprintf(out, sizeof out, "%s", tu_tmp("minilm.safetensors"));
    snprintf(cmd, sizeof cmd,
             "'%s' attention --model '%s' \"The animal didn't cross the street because it was "
             "too tired\" --out '%s' >/dev/null",
             attn_bin(), dir, out);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    attn_viz *v;
    assert_int_equal(attn_viz_load(out, &v), ATTN_STATUS_OK);
    assert_int_equal(v->n_tokens, r.T);
    assert_string_equal(v->tokens[0], "[CLS]");
    assert_string_equal(v->tokens[10], "it");
    compare("all-MiniLM-L6-v2", v, &r, false);
    attn_viz_free(v);
    free_ref(&r);
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "viz-models")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt),
        cmocka_unit_test(test_bert),
        cmocka_unit_test(test_minilm),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rm_tree(tu_dir);
    return rc;
}

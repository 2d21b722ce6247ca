/* test_viz.c — seeing attention (attn_viz.h, `attn attention`, `attn explain --png`):
 *   - capture from the encoder–decoder model: every row sums to 1 (|sum − 1| <= 1e-5), the
 *     decoder's causal mask holds exactly (entries j > i are 0), the first decoder query sees
 *     only itself; the captured maps equal those of a second capture (determinism);
 *   - save / load round trip (bit-exact), the JSON file beside it, and bad files refused;
 *   - PNG heatmaps decoded with libpng: dimensions, a one-hot map shows exactly its cell bright,
 *     a causal map's upper triangle has the colour of 0, CJK labels render as distinct glyphs;
 *   - the HTML page in headless Chromium (tu_skip when Debian's chromium is absent): no console
 *     output or script error, the number of lines drawn for a head and token equals the count of
 *     keys with a visible weight, and switching layer changes it; a 512-token page loads;
 *   - the CLI: files written, --from, the translation path (the captured target is exactly the
 *     tokens `attn translate` outputs), usage and input errors.
 * GPT-2 and BERT captures against transformers' output_attentions live in test_viz_models.c. */
#include "tu.h"
#include "tu_page.h"

#include "attn_explain.h"
#include "attn_infer.h"
#include "attn_io.h"
#include "attn_models.h"
#include "attn_tok.h"
#include "attn_viz.h"
#include "../src/viz/viz-impl.h" /* viz_real6: the probabilities' text, against jansson's */

#include <float.h>
#include <jansson.h>
#include <png.h>
#include <sys/wait.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static const char *attn_bin(void) {
    static char buf[1024];
    const char *b = getenv("ATTN_BUILD");
    snprintf(buf, sizeof buf, "%s/attn", b && *b ? b : "build");
    return buf;
}

/* Run the CLI (stdout, and stderr when merge) into out; the exit status. */
static int run_cli(const char *args, bool merge, char *out, size_t cap) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' %s %s", attn_bin(), args, merge ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

typedef struct {
    int w, h;
    uint8_t *px; /* (h, w, 3) */
} rgb_image;

static rgb_image read_png(const char *path) {
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&pi, path)) fail_msg("%s: %s", path, pi.message);
    pi.format = PNG_FORMAT_RGB;
    rgb_image im = {(int)pi.width, (int)pi.height, malloc(PNG_IMAGE_SIZE(pi))};
    assert_non_null(im.px);
    if (!png_image_finish_read(&pi, NULL, im.px, 0, NULL)) fail_msg("%s: %s", path, pi.message);
    return im;
}

static const uint8_t *pix(const rgb_image *im, int x, int y) {
    assert_true(x >= 0 && y >= 0 && x < im->w && y < im->h);
    return im->px + ((size_t)y * im->w + x) * 3;
}

static bool same_rgb(const uint8_t *a, const uint8_t *b) {
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

/* A small deterministic encoder–decoder model (random weights). */
static attn_encdec_model *small_model(int vocab, uint64_t seed) {
    attn_encdec_config c = attn_encdec_default_config();
    c.src_vocab = c.tgt_vocab = vocab;
    c.d_model = 16, c.n_head = 2, c.d_ff = 32, c.n_enc_layers = 1, c.n_dec_layers = 2;
    c.max_len = 24, c.dropout = 0, c.pre_ln = true, c.share_embeddings = true;
    c.tie_output = true;
    attn_encdec_model *m;
    assert_int_equal(attn_encdec_model_init(&c, seed, &m), ATTN_STATUS_OK);
    return m;
}

/* A model directory with a small BPE tokenizer (English and Chinese lines). */
static const char *model_dir(void) {
    static char dir[1024];
    if (dir[0]) return dir;
    snprintf(dir, sizeof dir, "%s", tu_tmp("model"));
    static const char *lines[] = {"Knowledge is power.", "知识就是力量。",
                                  "The cat sat on the mat.", "猫坐在垫子上。",
                                  "Power is knowledge."};
    attn_tok_train_params p = attn_tok_train_default_params();
    p.vocab_size = 300;
    attn_tok *tok;
    assert_int_equal(attn_tok_train_bpe(&p, lines, NULL, 5, &tok), ATTN_STATUS_OK);
    attn_encdec_model *m = small_model(attn_tok_vocab_size(tok), 7);
    assert_int_equal(attn_encdec_save_dir(m, dir), ATTN_STATUS_OK);
    char path[1100];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    assert_int_equal(attn_tok_save(tok, path), ATTN_STATUS_OK);
    attn_encdec_model_free(m);
    attn_tok_free(tok);
    return dir;
}

/* ---- capture ------------------------------------------------------------------------------ */

static void test_capture_encdec(void **state) {
    (void)state;
    attn_encdec_model *m = small_model(50, 11);
    const int32_t src[] = {5, 9, 13, 21, 3}, tgt[] = {2, 7, 8, 44, 30, 3};
    const int Ts = 5, Tt = 5;
    attn_viz *v;
    assert_int_equal(attn_viz_capture_encdec(m, NULL, src, Ts, tgt, 6, &v), ATTN_STATUS_OK);
    assert_int_equal(v->n_tokens, Ts);
    assert_int_equal(v->n_target, Tt);
    assert_string_equal(v->tokens[0], "#5");
    assert_string_equal(v->target[0], "#2");
    assert_string_equal(v->target_out[Tt - 1], "#3");
    assert_int_equal(v->n_maps, 1 + 2 + 2);
    assert_int_equal(attn_viz_num_layers(v, ATTN_VIZ_ENC_SELF), 1);
    assert_int_equal(attn_viz_num_layers(v, ATTN_VIZ_DEC_SELF), 2);
    assert_int_equal(attn_viz_num_layers(v, ATTN_VIZ_CROSS), 2);
    size_t zero_rows = 99;
    double err = attn_viz_row_sum_error(v, &zero_rows);
    printf("  row sums: max |sum - 1| = %.2e (tolerance 1e-5), all-zero rows %zu\n", err,
           zero_rows);
    assert_true(err <= 1e-5);
    assert_int_equal(zero_rows, 0);
    for (int l = 0; l < 2; l++) {
        const attn_viz_map *d = attn_viz_find(v, ATTN_VIZ_DEC_SELF, l);
        assert_non_null(d);
        assert_int_equal(d->H, 2);
        for (int h = 0; h < d->H; h++)
            for (int i = 0; i < Tt; i++)
                for (int j = 0; j < Tt; j++) {
                    float p = d->p[((size_t)h * Tt + i) * Tt + j];
                    if (j > i && p != 0.0f)
                        fail_msg("decoder.self.%d h%d (%d,%d) = %g, masked", l, h, i, j, p);
                    if (j <= i && !(p > 0.0f))
                        fail_msg("decoder.self.%d h%d (%d,%d) = %g", l, h, i, j, p);
                }
        assert_true(fabsf(d->p[0] - 1.0f) <= 1e-6f); /* query 0 sees only key 0 */
        const attn_viz_map *c = attn_viz_find(v, ATTN_VIZ_CROSS, l);
        assert_int_equal(c->Tq, Tt);
        assert_int_equal(c->Tk, Ts);
        for (size_t i = 0; i < (size_t)c->H * Tt * Ts; i++) assert_true(c->p[i] > 0.0f);
    }
    /* the same capture again gives the same numbers (no state leaks between captures) */
    attn_viz *v2;
    assert_int_equal(attn_viz_capture_encdec(m, NULL, src, Ts, tgt, 6, &v2), ATTN_STATUS_OK);
    for (int k = 0; k < v->n_maps; k++) {
        const attn_viz_map *a = &v->maps[k], *b = &v2->maps[k];
        tu_close("capture repeated", a->p, b->p, (size_t)a->H * a->Tq * a->Tk, 0, 0);
    }
    attn_viz_free(v2);
    /* errors */
    const int32_t bad[] = {5, 50, 3};
    tu_expect_fail(attn_viz_capture_encdec(m, NULL, bad, 3, tgt, 6, &v2),
                   ATTN_STATUS_INVALID_ARGUMENT, "source id 50", "position 1");
    tu_expect_fail(attn_viz_capture_encdec(m, NULL, src, Ts, tgt, 1, &v2),
                   ATTN_STATUS_INVALID_ARGUMENT, "target sequence has 1", NULL);
    int32_t longsrc[30] = {0};
    tu_expect_fail(attn_viz_capture_encdec(m, NULL, longsrc, 30, tgt, 6, &v2),
                   ATTN_STATUS_INVALID_ARGUMENT, "30 tokens", "1 to 24");
    attn_viz_free(v);
    attn_encdec_model_free(m);
}

static void test_container(void **state) {
    (void)state;
    attn_viz *v;
    assert_int_equal(attn_viz_init(&v), ATTN_STATUS_OK);
    const char *tok[] = {"a", "b", "c"};
    tu_expect_fail(attn_viz_add_map(v, ATTN_VIZ_SELF, 0, 1, 3, 3, NULL, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "self.0 is (3, 3)", "have 0 tokens");
    assert_int_equal(attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TOKENS, 3, tok), ATTN_STATUS_OK);
    assert_int_equal(attn_viz_add_map(v, ATTN_VIZ_SELF, 0, 1, 3, 3, NULL, NULL), ATTN_STATUS_OK);
    tu_expect_fail(attn_viz_add_map(v, ATTN_VIZ_SELF, 0, 1, 3, 3, NULL, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "self.0 added twice", NULL);
    tu_expect_fail(attn_viz_add_map(v, ATTN_VIZ_CROSS, 0, 1, 3, 3, NULL, NULL),
                   ATTN_STATUS_INVALID_ARGUMENT, "decoder.cross.0", "target");
    const char *two[] = {"a", "b"};
    tu_expect_fail(attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TOKENS, 2, two),
                   ATTN_STATUS_INVALID_ARGUMENT, "maps already hold 3", NULL);
    const char *badu[] = {"ok", "\xff\xfe", "x"};
    tu_expect_fail(attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TARGET, 3, badu),
                   ATTN_STATUS_INVALID_ARGUMENT, "target[1] is not valid UTF-8", NULL);
    attn_viz_kind k;
    assert_int_equal(attn_viz_kind_parse("cross", &k), ATTN_STATUS_OK);
    assert_int_equal(k, ATTN_VIZ_CROSS);
    tu_expect_fail(attn_viz_kind_parse("crosss", &k), ATTN_STATUS_INVALID_ARGUMENT, "crosss", NULL);
    attn_viz_free(v);

    /* labels: readable pieces from a trained tokenizer, "#id" without one */
    static const char *lines[] = {"Knowledge is power.", "知识就是力量。", "Power is knowledge.",
                                  "is power is"};
    attn_tok_train_params p = attn_tok_train_default_params();
    p.vocab_size = 290;
    attn_tok *t;
    assert_int_equal(attn_tok_train_bpe(&p, lines, NULL, 4, &t), ATTN_STATUS_OK);
    int32_t *ids;
    size_t n;
    assert_int_equal(attn_tok_encode_alloc(t, "is power.", 9, &ids, &n), ATTN_STATUS_OK);
    char buf[64], joined[256] = "";
    for (size_t i = 0; i < n; i++) {
        attn_viz_token_label(t, ids[i], buf, sizeof buf);
        assert_null(strstr(buf, "\xe2\x96\x81")); /* no "▁" left */
        strcat(joined, buf), strcat(joined, "|");
    }
    printf("  labels of \"is power.\": %s\n", joined);
    assert_non_null(strstr(joined, "is|"));
    attn_viz_token_label(t, attn_tok_token_to_id(t, "<0xE7>"), buf, sizeof buf);
    assert_string_equal(buf, "<0xE7>"); /* a lone byte stays a byte token */
    attn_viz_token_label(t, attn_tok_token_to_id(t, "</s>"), buf, sizeof buf);
    assert_string_equal(buf, "</s>");
    attn_viz_token_label(NULL, 42, buf, sizeof buf);
    assert_string_equal(buf, "#42");
    attn_viz_token_label(t, 1 << 30, buf, sizeof buf);
    assert_string_equal(buf, "#1073741824");
    attn_free(ids);
    attn_tok_free(t);
}

/* ---- the maps as JSON text (attn_viz_to_json, `attn serve`'s /v1/attention) ---------------- */

/* jansson's text of x at precision 6 ("null" where jansson has no real: NaN, infinities) */
static void jansson_real6(double x, char *buf, size_t cap) {
    json_t *r = json_real(x);
    char *t = r ? json_dumps(r, JSON_ENCODE_ANY | JSON_REAL_PRECISION(6)) : NULL;
    snprintf(buf, cap, "%s", t ? t : "null");
    free(t);
    json_decref(r);
}

static int real6_against_jansson(double x, int *shown) {
    char mine[VIZ_REAL6_MAX + 1], want[64];
    const size_t n = viz_real6(mine, x);
    jansson_real6(x, want, sizeof want);
    if (n == strlen(mine) && !strcmp(mine, want)) return 0;
    if ((*shown)++ < 10) printf("  viz_real6(%.17g) = \"%s\", jansson \"%s\" FAIL\n", x, mine, want);
    return 1;
}

/* viz_real6 gives jansson's bytes: edge cases (zeros, ties, the ends of the printf-free range,
 * values that round up to the next power of ten, denormals, non-finite), every 4099th float
 * bit pattern of both signs (~2.1 M: every exponent), and 10^6 probabilities of a softmax's
 * range. */
static void test_real6(void **state) {
    (void)state;
    static const double edge[] = {0.0, -0.0, 1.0, -1.0, 0.5, 0.25, 0.001953125, 0.0009765625,
                                  1e-30, 9.9999999e-31, 1e30, 9.999999e29, 1e-5, 1e-4, 9.999995e-5,
                                  9.9999949e-5, 0.999999, 0.9999995, 0.99999949, 999999.5,
                                  999999.4, 123456.5, 100000, 1e6, 1e7, 12345678, FLT_MIN,
                                  FLT_MAX, FLT_TRUE_MIN, DBL_MIN, 1.0 / 3, 2.0 / 3, 1e-45,
                                  0.1, 0.2, 0.3, 1e21, 1e22, 1e23, NAN, INFINITY, -INFINITY};
    int bad = 0, shown = 0;
    long checked = 0;
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++, checked++)
        bad += real6_against_jansson(edge[i], &shown);
    for (uint64_t b = 0; b < (1ull << 32); b += 4099, checked++) {
        uint32_t u = (uint32_t)b;
        float f;
        memcpy(&f, &u, sizeof f);
        bad += real6_against_jansson((double)f, &shown);
    }
    tu_rng rng = {0x6a6a5b5b4c4c3d3dull};
    for (int i = 0; i < 1000000; i++, checked++) {
        const float p = expf(-30.0f * tu_uniform(&rng, 0, 1)); /* e^-30 .. 1 */
        bad += real6_against_jansson((double)p, &shown);
    }
    printf("  viz_real6: %ld values, %d differ from jansson's text\n", checked, bad);
    assert_int_equal(bad, 0);
}

/* attn_viz_to_json is json_dumps of the same object built as a jansson tree; one layer; the
 * model name left out; the bound on probabilities. */
static void test_to_json(void **state) {
    (void)state;
    attn_viz *v;
    assert_int_equal(attn_viz_init(&v), ATTN_STATUS_OK);
    const char *src[] = {"Knowledge", "is", "power", "</s>"}, *tgt[] = {"<s>", "知识", "\"就是\"", "</s>"};
    assert_int_equal(attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TOKENS, 4, src), ATTN_STATUS_OK);
    assert_int_equal(attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TARGET, 4, tgt), ATTN_STATUS_OK);
    tu_rng rng = {0x1234abcd5678ef01ull};
    const attn_viz_kind kinds[3] = {ATTN_VIZ_ENC_SELF, ATTN_VIZ_DEC_SELF, ATTN_VIZ_CROSS};
    for (int layer = 0; layer < 2; layer++)
        for (int k = 0; k < 3; k++) {
            float *d;
            assert_int_equal(attn_viz_add_map(v, kinds[k], layer, 2, 4, 4, NULL, &d), ATTN_STATUS_OK);
            for (int i = 0; i < 32; i++) /* tiny, round, tie-like and ordinary values */
                d[i] = i % 7 == 0 ? 0.0f : i % 7 == 1 ? 1e-9f * tu_uniform(&rng, 0, 1)
                     : i % 7 == 2 ? 0.5f : i % 7 == 3 ? 0.001953125f : tu_uniform(&rng, 0, 1);
        }
    for (int layer = -1; layer < 2; layer++)
        for (int named = 0; named < 2; named++) {
            char *text = NULL;
            size_t len = 0;
            assert_int_equal(attn_viz_to_json(v, named ? "enzh" : NULL, layer, 1000, &text, &len),
                             ATTN_STATUS_OK);
            assert_int_equal(len, strlen(text));
            json_t *o = json_object(), *maps = json_array();
            if (named) json_object_set_new(o, "model", json_string("enzh"));
            json_t *ts = json_array(), *tt = json_array();
            for (int i = 0; i < 4; i++)
                json_array_append_new(ts, json_string(src[i])), json_array_append_new(tt, json_string(tgt[i]));
            json_object_set_new(o, "tokens", ts);
            for (int i = 0; i < v->n_maps; i++) {
                const attn_viz_map *m = &v->maps[i];
                if (layer >= 0 && m->layer != layer) continue;
                json_t *heads = json_array();
                for (int h = 0; h < m->H; h++) {
                    json_t *rows = json_array();
                    for (int q = 0; q < m->Tq; q++) {
                        json_t *row = json_array();
                        for (int c = 0; c < m->Tk; c++)
                            json_array_append_new(row, json_real(m->p[((size_t)h * m->Tq + q) * m->Tk + c]));
                        json_array_append_new(rows, row);
                    }
                    json_array_append_new(heads, rows);
                }
                json_array_append_new(maps, json_pack("{s:s, s:i, s:i, s:i, s:i, s:o}", "kind",
                                                      attn_viz_kind_name(m->kind), "layer", m->layer,
                                                      "heads", m->H, "queries", m->Tq, "keys", m->Tk,
                                                      "p", heads));
            }
            json_object_set_new(o, "maps", maps);
            json_object_set_new(o, "target", tt);
            char *want = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
            if (strcmp(text, want)) {
                size_t i = 0;
                while (text[i] && text[i] == want[i]) i++;
                fail_msg("layer %d: differs from jansson at byte %zu: %.40s / %.40s", layer, i,
                         text + i, want + i);
            }
            if (layer == -1 && named) printf("  attn_viz_to_json: %zu bytes, jansson's\n", len);
            free(want), json_decref(o), attn_free(text);
        }
    char *text = NULL;
    size_t len = 7;
    tu_expect_fail(attn_viz_to_json(v, "m", -1, 191, &text, &len), ATTN_STATUS_INVALID_ARGUMENT,
                   "192 probabilities", "at most 191");
    assert_null(text);
    assert_int_equal(len, 0);
    assert_int_equal(attn_viz_to_json(v, "m", 0, 96, &text, &len), ATTN_STATUS_OK); /* one layer: 96 */
    attn_free(text);
    attn_viz_free(v);
}

/* ---- save / load -------------------------------------------------------------------------- */

static void test_save_load(void **state) {
    (void)state;
    attn_encdec_model *m = small_model(50, 3);
    const int32_t src[] = {5, 9, 3}, tgt[] = {2, 7, 8, 3};
    attn_viz *v, *w;
    assert_int_equal(attn_viz_capture_encdec(m, NULL, src, 3, tgt, 4, &v), ATTN_STATUS_OK);
    const char *t2[] = {"知识", "</script><!--", "a\"b"};
    assert_int_equal(attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TOKENS, 3, t2), ATTN_STATUS_OK);
    const char *path = tu_tmp("cap.safetensors");
    assert_int_equal(attn_viz_save(v, path), ATTN_STATUS_OK);
    assert_int_equal(attn_viz_load(path, &w), ATTN_STATUS_OK);
    assert_int_equal(w->n_maps, v->n_maps);
    assert_int_equal(w->n_tokens, 3);
    assert_string_equal(w->tokens[0], "知识");
    assert_string_equal(w->tokens[1], "</script><!--");
    assert_string_equal(w->target_out[2], "#3");
    assert_string_equal(w->title, v->title);
    for (int k = 0; k < v->n_maps; k++) {
        const attn_viz_map *a = &v->maps[k], *b = attn_viz_find(w, a->kind, a->layer);
        assert_non_null(b);
        assert_int_equal(b->H, a->H);
        assert_memory_equal(a->p, b->p, sizeof(float) * a->H * a->Tq * a->Tk);
    }
    /* the JSON beside it */
    json_error_t err;
    json_t *j = json_load_file(tu_tmp("cap.json"), 0, &err);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "format")), "attn-attention");
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "tokens"), 0)), "知识");
    json_t *maps = json_object_get(j, "maps");
    assert_int_equal(json_array_size(maps), (size_t)v->n_maps);
    bool cross = false;
    for (size_t i = 0; i < json_array_size(maps); i++) {
        json_t *mm = json_array_get(maps, i);
        if (!strcmp(json_string_value(json_object_get(mm, "name")), "decoder.cross.1")) {
            cross = true;
            assert_string_equal(json_string_value(json_object_get(mm, "queries")), "target");
            assert_int_equal(json_integer_value(json_array_get(json_object_get(mm, "shape"), 2)),
                             3);
        }
    }
    assert_true(cross);
    json_decref(j);
    attn_viz_free(w);
    /* files that are not captures */
    float x[6] = {0};
    attn_st_entry e = {"encoder.self.0", ATTN_DTYPE_F32, 3, {1, 2, 3}, x};
    const char *meta[] = {"format", "attn-attention", "tokens", "[\"a\",\"b\",\"c\"]", NULL};
    assert_int_equal(attn_st_save(tu_tmp("bad1.safetensors"), &e, 1, meta), ATTN_STATUS_OK);
    tu_expect_fail(attn_viz_load(tu_tmp("bad1.safetensors"), &w), ATTN_STATUS_FORMAT,
                   "encoder.self.0", "(heads <= 1024, 3, 3)");
    e.name = "encoder.selfish.0";
    e.shape[1] = 3, e.shape[2] = 2;
    assert_int_equal(attn_st_save(tu_tmp("bad2.safetensors"), &e, 1, meta), ATTN_STATUS_OK);
    tu_expect_fail(attn_viz_load(tu_tmp("bad2.safetensors"), &w), ATTN_STATUS_FORMAT,
                   "encoder.selfish.0", "<kind>.<layer>");
    const char *meta2[] = {"tokens", "[\"a\"]", NULL};
    assert_int_equal(attn_st_save(tu_tmp("bad3.safetensors"), &e, 1, meta2), ATTN_STATUS_OK);
    tu_expect_fail(attn_viz_load(tu_tmp("bad3.safetensors"), &w), ATTN_STATUS_FORMAT,
                   "'format' is missing", NULL);
    const char *meta3[] = {"format", "attn-attention", "tokens", "[\"a\", 3]", NULL};
    assert_int_equal(attn_st_save(tu_tmp("bad4.safetensors"), &e, 1, meta3), ATTN_STATUS_OK);
    tu_expect_fail(attn_viz_load(tu_tmp("bad4.safetensors"), &w), ATTN_STATUS_FORMAT,
                   "'tokens'[1] is not a string", NULL);
    tu_expect_fail(attn_viz_load(tu_tmp("missing.safetensors"), &w), ATTN_STATUS_IO, "missing",
                   NULL);
    attn_viz_free(v);
    attn_encdec_model_free(m);
}

/* ---- PNG ---------------------------------------------------------------------------------- */

/* Skip the PNG test (tu_skip) without a CJK font. */
static void need_font(void) {
    char f[1024];
    if (attn_viz_find_font(f, sizeof f) != ATTN_STATUS_OK)
        tu_skip("no CJK font (%s): fonts-noto-cjk (sh tools/install_deps.sh)", attn_last_error());
}

/* A one-hot map: exactly the hot cell is bright, every other cell has the colour of 0. */
static void test_png_one_hot(void **state) {
    (void)state;
    need_font();
    attn_viz *v;
    assert_int_equal(attn_viz_init(&v), ATTN_STATUS_OK);
    const char *tok[] = {"The", "cat", "知识", "力量", "sat", "."};
    const int T = 6, hi = 2, hj = 4;
    assert_int_equal(attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TOKENS, T, tok), ATTN_STATUS_OK);
    float *p;
    assert_int_equal(attn_viz_add_map(v, ATTN_VIZ_SELF, 0, 2, T, T, NULL, &p), ATTN_STATUS_OK);
    p[T * T + hi * T + hj] = 1.0f; /* head 1 */
    attn_viz_png_options o = attn_viz_png_default_options();
    o.mode = ATTN_VIZ_PNG_HEAD, o.layer = 0, o.head = 1, o.style.cell = 20;
    attn_viz_png_layout lay;
    const char *path = tu_tmp("hot.png");
    assert_int_equal(attn_viz_write_png(v, path, &o, &lay), ATTN_STATUS_OK);
    rgb_image im = read_png(path);
    printf("  one-hot PNG %d x %d, cell %d at (%d, %d), labels %d\n", im.w, im.h, lay.cell, lay.x0,
           lay.y0, lay.labels);
    assert_int_equal(im.w, lay.width);
    assert_int_equal(im.h, lay.height);
    assert_int_equal(lay.cell, 20);
    assert_true(lay.labels);
    uint8_t c0[3], c1[3];
    attn_viz_colormap(0, c0), attn_viz_colormap(1, c1);
    int bright = 0;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            for (int y = 0; y < lay.cell; y++)
                for (int x = 0; x < lay.cell; x++) {
                    const uint8_t *q =
                        pix(&im, lay.x0 + j * lay.cell + x, lay.y0 + i * lay.cell + y);
                    bool hot = i == hi && j == hj;
                    if (!same_rgb(q, hot ? c1 : c0))
                        fail_msg("cell (%d,%d) pixel (%d,%d) = %d,%d,%d", i, j, x, y, q[0], q[1],
                                 q[2]);
                    bright += q[0] + q[1] + q[2] > 300;
                }
    assert_int_equal(bright, lay.cell * lay.cell);
    /* head 0 is all zero: no bright pixel at all in its grid */
    o.head = 0;
    assert_int_equal(attn_viz_write_png(v, path, &o, &lay), ATTN_STATUS_OK);
    free(im.px);
    im = read_png(path);
    for (int y = 0; y < T * lay.cell; y++)
        for (int x = 0; x < T * lay.cell; x++)
            assert_true(same_rgb(pix(&im, lay.x0 + x, lay.y0 + y), c0));
    /* CJK labels: the rows of 知识 and 力量 (both two characters) have ink and differ, which
     * missing glyphs (identical .notdef boxes) would not */
    int ink[2] = {0, 0}, differ = 0;
    for (int y = 0; y < lay.cell; y++)
        for (int x = 0; x < lay.x0 - 2; x++) {
            const uint8_t *a = pix(&im, x, lay.y0 + 2 * lay.cell + y);
            const uint8_t *b = pix(&im, x, lay.y0 + 3 * lay.cell + y);
            ink[0] += a[0] < 128, ink[1] += b[0] < 128;
            differ += !same_rgb(a, b);
        }
    printf("  CJK label ink: 知识 %d px, 力量 %d px, %d pixels differ\n", ink[0], ink[1], differ);
    assert_true(ink[0] > 20 && ink[1] > 20 && differ > 20);
    free(im.px);
    /* a font that is not there */
    o.style.font = "/nonexistent/font.ttc";
    tu_expect_fail(attn_viz_write_png(v, path, &o, &lay), ATTN_STATUS_FORMAT,
                   "/nonexistent/font.ttc", "FreeType");
    setenv("ATTN_FONT", "/nonexistent/x.ttf", 1);
    char f[256];
    tu_expect_fail(attn_viz_find_font(f, sizeof f), ATTN_STATUS_NOT_FOUND, "ATTN_FONT", NULL);
    unsetenv("ATTN_FONT");
    o.style.font = NULL, o.head = 2;
    tu_expect_fail(attn_viz_write_png(v, path, &o, &lay), ATTN_STATUS_INVALID_ARGUMENT, "head 2",
                   "heads 0 to 1");
    o.kind = ATTN_VIZ_CROSS;
    tu_expect_fail(attn_viz_write_png(v, path, &o, &lay), ATTN_STATUS_NOT_FOUND, "no decoder.cross",
                   NULL);
    attn_viz_free(v);
}

/* The decoder's masked self-attention: the upper triangle has exactly the colour of 0. */
static void test_png_causal(void **state) {
    (void)state;
    need_font();
    attn_encdec_model *m = small_model(50, 5);
    const int32_t src[] = {5, 9, 13, 3}, tgt[] = {2, 7, 8, 44, 30, 11, 12, 3};
    const int Tt = 7;
    attn_viz *v;
    assert_int_equal(attn_viz_capture_encdec(m, NULL, src, 4, tgt, 8, &v), ATTN_STATUS_OK);
    attn_viz_png_options o = attn_viz_png_default_options();
    o.kind = ATTN_VIZ_DEC_SELF, o.mode = ATTN_VIZ_PNG_MEAN;
    attn_viz_png_layout lay;
    const char *path = tu_tmp("causal.png");
    assert_int_equal(attn_viz_write_png(v, path, &o, &lay), ATTN_STATUS_OK);
    rgb_image im = read_png(path);
    assert_int_equal(im.w, lay.width);
    assert_int_equal(im.h, lay.height);
    uint8_t c0[3], c1[3];
    attn_viz_colormap(0, c0), attn_viz_colormap(1, c1);
    int c = lay.cell;
    for (int i = 0; i < Tt; i++)
        for (int j = 0; j < Tt; j++) {
            const uint8_t *q = pix(&im, lay.x0 + j * c + c / 2, lay.y0 + i * c + c / 2);
            if (j > i)
                assert_true(same_rgb(q, c0));
            else
                assert_false(same_rgb(q, c0));
        }
    assert_true(same_rgb(pix(&im, lay.x0 + c / 2, lay.y0 + c / 2), c1)); /* (0,0) = 1 */
    free(im.px);
    /* a grid of every layer and head, and the query view */
    o.mode = ATTN_VIZ_PNG_GRID, o.layer = -1;
    assert_int_equal(attn_viz_write_png(v, path, &o, &lay), ATTN_STATUS_OK);
    im = read_png(path);
    printf("  grid of 2 layers x 2 heads: %d x %d pixels, cell %d\n", im.w, im.h, lay.cell);
    assert_int_equal(lay.n_panels, 4);
    assert_int_equal(lay.grid_cols, 2);
    assert_int_equal(im.w, lay.width);
    assert_true(im.w >= 2 * Tt * lay.cell && im.h >= 2 * Tt * lay.cell);
    /* panel 3 (layer 1, head 1): upper triangle dark, diagonal (0,0) bright */
    int bx = lay.x0 + lay.dx, by = lay.y0 + lay.dy;
    assert_true(same_rgb(pix(&im, bx + (Tt - 1) * lay.cell, by), c0));
    assert_true(same_rgb(pix(&im, bx, by), c1));
    free(im.px);
    o.mode = ATTN_VIZ_PNG_QUERY, o.query = 3;
    assert_int_equal(attn_viz_write_png(v, path, &o, &lay), ATTN_STATUS_OK);
    im = read_png(path);
    assert_int_equal(lay.n_panels, 2); /* a panel per layer, a row per head, a column per key */
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < Tt; j++) {
                const uint8_t *q =
                    pix(&im, lay.x0 + k * lay.dx + j * lay.cell + 1, lay.y0 + r * lay.cell + 1);
                assert_true(same_rgb(q, c0) == (j > 3)); /* keys after the query are 0 */
            }
    free(im.px);
    attn_viz_free(v);
    attn_encdec_model_free(m);
}

static void test_explain_png(void **state) {
    (void)state;
    need_font();
    float x[12], wq[12], wk[12], wv[12];
    tu_rng r = {77};
    tu_fill(&r, x, 12, -1, 1), tu_fill(&r, wq, 12, -1, 1), tu_fill(&r, wk, 12, -1, 1);
    tu_fill(&r, wv, 12, -1, 1);
    attn_explain_result res;
    assert_int_equal(attn_explain_compute(3, 4, 3, x, wq, wk, wv, &res), ATTN_STATUS_OK);
    const char *tok[] = {"知识", "is", "power"};
    const char *path = tu_tmp("explain.png");
    assert_int_equal(attn_explain_write_png(&res, tok, path, NULL), ATTN_STATUS_OK);
    rgb_image im = read_png(path);
    printf("  explain PNG %d x %d\n", im.w, im.h);
    assert_true(im.w > 200 && im.h > 200);
    free(im.px);
    attn_explain_free(&res);
    char out[8192];
    char args[2048];
    snprintf(args, sizeof args, "explain --png '%s'", tu_tmp("explain_cli.png"));
    assert_int_equal(run_cli(args, true, out, sizeof out), 0);
    im = read_png(tu_tmp("explain_cli.png"));
    assert_true(im.w > 200 && im.h > 200);
    free(im.px);
    assert_int_equal(run_cli("explain --png", true, out, sizeof out), 2);
}

/* ---- HTML in Chromium --------------------------------------------------------------------- */

/* Keys j of query i in head h with weight k/… : row i has (base + h) visible keys, each 1/cnt. */
static void fill_pattern(float *p, int H, int Tq, int Tk, int base) {
    for (int h = 0; h < H; h++)
        for (int i = 0; i < Tq; i++) {
            int cnt = base + h > Tk ? Tk : base + h;
            for (int c = 0; c < cnt; c++) p[((size_t)h * Tq + i) * Tk + (i + c) % Tk] = 1.0f / cnt;
        }
}

static long result_lines(json_t *j, size_t k) {
    return (long)json_integer_value(
        json_object_get(json_array_get(json_object_get(j, "results"), k), "lines"));
}

static void test_html_chromium(void **state) {
    (void)state;
    if (!tu_chromium()) tu_skip("chromium not installed (sh tools/install_deps.sh; or ATTN_CHROMIUM)");
    attn_viz *v;
    assert_int_equal(attn_viz_init(&v), ATTN_STATUS_OK);
    const char *src[] = {"Knowledge", "is",    "power", ".", "</script><!--<script>",
                         "&amp;",     "\"q\"", "</s>"};
    const char *tgt[] = {"<s>", "知识", "就是", "力量", "。"};
    const int Ts = 8, Tt = 5, H = 3;
    assert_int_equal(attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TOKENS, Ts, src), ATTN_STATUS_OK);
    assert_int_equal(attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TARGET, Tt, tgt), ATTN_STATUS_OK);
    float *p;
    for (int l = 0; l < 2; l++) {
        assert_int_equal(attn_viz_add_map(v, ATTN_VIZ_ENC_SELF, l, H, Ts, Ts, NULL, &p), 0);
        fill_pattern(p, H, Ts, Ts, 1 + 2 * l); /* layer 0: 1 + h keys per row; layer 1: 3 + h */
        assert_int_equal(attn_viz_add_map(v, ATTN_VIZ_DEC_SELF, l, H, Tt, Tt, NULL, &p), 0);
        fill_pattern(p, H, Tt, Tt, 1);
        assert_int_equal(attn_viz_add_map(v, ATTN_VIZ_CROSS, l, H, Tt, Ts, NULL, &p), 0);
        fill_pattern(p, H, Tt, Ts, 2 + l);
    }
    assert_int_equal(attn_viz_set_title(v, "test <b>page</b>"), ATTN_STATUS_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s", tu_tmp("page.html"));
    assert_int_equal(attn_viz_write_html(v, path), ATTN_STATUS_OK);
    /* self-contained: no network references */
    size_t n;
    char *html = tu_read_all(path, &n);
    assert_null(strstr(html, "http://"));
    assert_null(strstr(html, "https://"));
    assert_null(strstr(html, "<!--<script>")); /* escaped in the data */
    free(html);
    int console;
    json_t *j = tu_run_page(path,
                         "0,1,2,encoder.self;1,1,2,encoder.self;1,all,-1,encoder.self;"
                         "0,all,3,decoder.cross;1,2,4,decoder.cross",
                         &console);
    assert_non_null(j);
    char *dump = json_dumps(j, JSON_COMPACT);
    printf("  hook: %.600s\n", dump);
    free(dump);
    assert_int_equal(json_integer_value(json_object_get(j, "errors")), 0);
    assert_int_equal(console, 0);
    assert_int_equal(json_array_size(json_object_get(j, "results")), 5);
    assert_int_equal(result_lines(j, 0), 2);                /* layer 0 head 1: 1 + 1 keys */
    assert_int_equal(result_lines(j, 1), 4);                /* layer 1 head 1: 3 + 1 keys */
    assert_int_equal(result_lines(j, 2), Ts * (3 + 4 + 5)); /* every query, every head */
    assert_int_equal(result_lines(j, 3), 2 + 3 + 4);        /* cross layer 0, heads 0..2 */
    assert_int_equal(result_lines(j, 4), 5);                /* cross layer 1 head 2 */
    assert_int_equal(json_integer_value(json_object_get(j, "thumbnails")), 2 * H);
    json_decref(j);
    attn_viz_free(v);
}

/* A 512-token page stays usable: it loads, draws a focused token and the model view. */
static void test_html_long(void **state) {
    (void)state;
    if (!tu_chromium()) tu_skip("chromium not installed (sh tools/install_deps.sh; or ATTN_CHROMIUM)");
    const int T = 512, H = 4, L = 2;
    attn_viz *v;
    assert_int_equal(attn_viz_init(&v), ATTN_STATUS_OK);
    char **tok = malloc(sizeof(char *) * T);
    for (int i = 0; i < T; i++) {
        tok[i] = malloc(16);
        snprintf(tok[i], 16, "tok%d", i);
    }
    assert_int_equal(attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TOKENS, T, (const char *const *)tok), 0);
    tu_rng r = {5};
    for (int l = 0; l < L; l++) {
        float *p;
        assert_int_equal(attn_viz_add_map(v, ATTN_VIZ_SELF, l, H, T, T, NULL, &p), 0);
        /* causal rows with random weights, normalized */
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                float *row = p + ((size_t)h * T + i) * T, s = 0;
                for (int jj = 0; jj <= i; jj++)
                    s += row[jj] = tu_uniform(&r, 0, 1) * tu_uniform(&r, 0, 1);
                for (int jj = 0; jj <= i; jj++) row[jj] /= s;
            }
    }
    char path[1024];
    snprintf(path, sizeof path, "%s", tu_tmp("long.html"));
    double t0 = tu_now();
    assert_int_equal(attn_viz_write_html(v, path), ATTN_STATUS_OK);
    struct stat stt;
    stat(path, &stt);
    printf("  512 tokens, %d layers x %d heads: page %.1f MB written in %.2f s\n", L, H,
           stt.st_size / 1e6, tu_now() - t0);
    int console;
    json_t *j = tu_run_page(path, "1,all,500;0,2,-1", &console);
    assert_non_null(j);
    char *dump = json_dumps(j, JSON_COMPACT);
    printf("  hook: %.400s\n", dump);
    free(dump);
    assert_int_equal(json_integer_value(json_object_get(j, "errors")), 0);
    assert_int_equal(console, 0);
    /* token 500 of every head: keys with a quantized weight >= 1/255 */
    long expect = 0, expect_all = 0;
    const attn_viz_map *m1 = attn_viz_find(v, ATTN_VIZ_SELF, 1),
                       *m0 = attn_viz_find(v, ATTN_VIZ_SELF, 0);
    for (int h = 0; h < H; h++)
        for (int jj = 0; jj < T; jj++)
            expect += lrintf(m1->p[((size_t)h * T + 500) * T + jj] * 255) >= 1;
    /* unfocused: at most 20000 lines, the threshold raised as far as needed, no further */
    long thr = (long)json_integer_value(
        json_object_get(json_array_get(json_object_get(j, "results"), 1), "threshold"));
    long below = 0;
    for (size_t i = 0; i < (size_t)T * T; i++) {
        long q = lrintf(m0->p[(size_t)2 * T * T + i] * 255);
        expect_all += q >= thr, below += q == thr - 1;
    }
    printf("  lines: focused %ld (expected %ld), unfocused head %ld (expected %ld at threshold "
           "%ld/255)\n",
           result_lines(j, 0), expect, result_lines(j, 1), expect_all, thr);
    assert_true(thr >= 1 && expect_all <= 20000 && (thr == 1 || expect_all + below > 20000));
    assert_int_equal(result_lines(j, 0), expect);
    assert_int_equal(result_lines(j, 1), expect_all);
    json_decref(j);
    for (int i = 0; i < T; i++) free(tok[i]);
    free(tok);
    attn_viz_free(v);
}

/* ---- CLI ---------------------------------------------------------------------------------- */

static void test_cli(void **state) {
    (void)state;
    const char *dir = model_dir();
    char args[8192], out[65536];
    /* summary only */
    snprintf(args, sizeof args,
             "attention --model '%s' 'Knowledge is power.' --target '知识就是力量。'", dir);
    assert_int_equal(run_cli(args, true, out, sizeof out), 0);
    printf("%s", out);
    assert_non_null(strstr(out, "strongest key per query (decoder.cross"));
    assert_non_null(strstr(out, "target ("));
    /* files */
    char st[1024], html[1024], png[1024];
    snprintf(st, sizeof st, "%s", tu_tmp("cli.safetensors"));
    snprintf(html, sizeof html, "%s", tu_tmp("cli.html"));
    snprintf(png, sizeof png, "%s", tu_tmp("cli.png"));
    snprintf(args, sizeof args,
             "attention --model '%s' 'Knowledge is power.' --beam 3 --out '%s' --html '%s' "
             "--png '%s' --head all",
             dir, st, html, png);
    int rc = run_cli(args, true, out, sizeof out);
    printf("%s", out);
    assert_int_equal(rc, 0);
    attn_viz *v;
    assert_int_equal(attn_viz_load(st, &v), ATTN_STATUS_OK);
    assert_true(attn_viz_row_sum_error(v, NULL) <= 1e-5);
    assert_int_equal(attn_viz_num_layers(v, ATTN_VIZ_CROSS), 2);
    /* the captured target is exactly <s> + what `attn translate --beam 3` outputs + </s> */
    char *tl = strstr(out, "translation (beam 3");
    assert_non_null(tl);
    tl = strstr(tl, "): ") + 3;
    char *eol = strchr(tl, '\n');
    *eol = '\0';
    char out2[4096];
    snprintf(args, sizeof args, "translate --model '%s' --beam 3 'Knowledge is power.'", dir);
    assert_int_equal(run_cli(args, false, out2, sizeof out2), 0);
    out2[strcspn(out2, "\n")] = '\0';
    printf("  attention's translation \"%s\", translate's \"%s\"\n", tl, out2);
    assert_string_equal(tl, out2);
    /* and token by token: the library's beam search with the CLI's settings */
    attn_tok *tok;
    attn_encdec_model *m;
    assert_int_equal(attn_tok_load(dir, &tok), ATTN_STATUS_OK);
    assert_int_equal(attn_encdec_load_dir(dir, &m), ATTN_STATUS_OK);
    int32_t *ids;
    size_t n;
    assert_int_equal(attn_tok_encode_alloc(tok, "Knowledge is power.", 19, &ids, &n), 0);
    int32_t src[64], hyp[64], len, sl = (int32_t)n + 1;
    memcpy(src, ids, n * sizeof *src);
    src[n] = attn_tok_special_id(tok, ATTN_TOK_EOS);
    attn_translate_options to = attn_translate_default_options();
    to.beam_size = 3;
    to.bos_id = attn_tok_special_id(tok, ATTN_TOK_BOS), to.eos_id = src[n];
    attn_translate_session *ts;
    const int L = m->cfg.max_len;
    assert_int_equal(attn_translate_session_init(m, 1, 3, sl, L, &ts), 0);
    assert_int_equal(attn_translate(ts, &to, 1, sl, src, &sl, L, hyp, &len, NULL), 0);
    assert_int_equal(v->n_target, len + 1);
    assert_string_equal(v->target[0], "<s>");
    assert_string_equal(v->target_out[len], "</s>");
    for (int i = 0; i < len; i++) {
        char lab[256];
        attn_viz_token_label(tok, hyp[i], lab, sizeof lab);
        assert_string_equal(v->target[i + 1], lab);
        assert_string_equal(v->target_out[i], lab);
    }
    printf("  captured target = <s> + the %d tokens of the beam-3 hypothesis + </s>\n", (int)len);
    attn_translate_session_free(ts);
    attn_encdec_model_free(m);
    attn_free(ids);
    attn_tok_free(tok);
    attn_viz_free(v);
    rgb_image im = read_png(png);
    assert_true(im.w > 50 && im.h > 50);
    free(im.px);
    /* draw the saved capture */
    snprintf(args, sizeof args,
             "attention --from '%s' --png '%s' --kind encoder --layer 0 --head 1", st, png);
    assert_int_equal(run_cli(args, true, out, sizeof out), 0);
    snprintf(args, sizeof args, "attention --from '%s' --png '%s' --kind decoder --query 1", st,
             png);
    assert_int_equal(run_cli(args, true, out, sizeof out), 0);
    /* --ids */
    snprintf(args, sizeof args, "attention --model '%s' --ids 5,6,7,3 --target-ids '2 9 10 3'",
             dir);
    assert_int_equal(run_cli(args, true, out, sizeof out), 0);
    assert_non_null(strstr(out, "source (4)"));
    /* errors: usage (2) and failures (1), one line each */
    const char *usage[] = {"attention",
                           "attention --model x",
                           "attention --model x a b",
                           "attention --model x --ids 1 t",
                           "attention --from a --model b",
                           "attention --from f.safetensors --ids 3",
                           "attention --head x --model m t",
                           "attention --kind sideways --model m t",
                           "attention --bogus"};
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        assert_int_equal(run_cli(usage[i], true, out, sizeof out), 2);
        assert_non_null(strstr(out, "attn: error: "));
    }
    snprintf(args, sizeof args, "attention --model '%s' --ids 5,99999,3", dir);
    assert_int_equal(run_cli(args, true, out, sizeof out), 1);
    printf("  %s", out);
    assert_non_null(strstr(out, "attn: error: "));
    assert_non_null(strstr(out, "source id 99999"));
    snprintf(args, sizeof args, "attention --model '%s' --ids 5,x", dir);
    assert_int_equal(run_cli(args, true, out, sizeof out), 1);
    assert_non_null(strstr(out, "'x' is not a token id"));
    snprintf(args, sizeof args, "attention --model '%s' t --png '%s' --kind self", dir, png);
    assert_int_equal(run_cli(args, true, out, sizeof out), 1);
    assert_non_null(strstr(out, "no self attention"));
    snprintf(args, sizeof args, "attention --model '%s' t --png '%s' --layer 5", dir, png);
    assert_int_equal(run_cli(args, true, out, sizeof out), 1);
    assert_non_null(strstr(out, "layer 5"));
    assert_int_equal(run_cli("attention --model /nonexistent t", true, out, sizeof out), 1);
    assert_non_null(strstr(out, "/nonexistent/config.json"));
    assert_int_equal(
        run_cli("attention --from /nonexistent.safetensors --png x.png", true, out, sizeof out), 1);
}

/* src/viz/viewer_page.c is generated from tools/viz_viewer.html: they must agree. */
static void test_viewer_in_sync(void **state) {
    (void)state;
    if (access("tools/viz_embed.py", R_OK) != 0)
        tu_skip("tools/viz_embed.py not found (not run from the source tree)");
    const char *py = access(".venv/bin/python", X_OK) == 0 ? ".venv/bin/python" : "python3";
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s tools/viz_embed.py --check", py);
    int st = system(cmd);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("src/viz/viewer_page.c differs from tools/viz_viewer.html: run python3 "
                 "tools/viz_embed.py");
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "viz")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_encdec),
        cmocka_unit_test(test_container),
        cmocka_unit_test(test_real6),
        cmocka_unit_test(test_to_json),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_png_one_hot),
        cmocka_unit_test(test_png_causal),
        cmocka_unit_test(test_explain_png),
        cmocka_unit_test(test_html_chromium),
        cmocka_unit_test(test_html_long),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_viewer_in_sync),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rm_tree(tu_dir);
    return rc;
}

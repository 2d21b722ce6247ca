/* test_explain.c — `attn explain`: the library walk-through against PyTorch
 * (tools/ref_explain.py), the CLI's --json output against the same reference, the built-in
 * example's invariants, and the CLI's errors on bad input. Tolerance: 1e-5 × max|ref|. */
#include "tu.h"

#include "attn_explain.h"
#include "attn_io.h"

#include <jansson.h>
#include <sys/wait.h>

static const char *const MATS[7] = {"q", "k", "v", "scores", "scaled", "weights", "output"};

static float *pass_mat(attn_explain_pass *p, int m) {
    float *f[7] = {p->q, p->k, p->v, p->scores, p->scaled, p->weights, p->output};
    return f[m];
}

/* -inf entries are compared as "both -inf", then zeroed for the numeric check. */
static void cmp_masked(const char *what, float *got, float *ref, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (isinf(ref[i]) || isinf(got[i])) {
            if (!(isinf(ref[i]) && isinf(got[i]) && ref[i] < 0 && got[i] < 0)) {
                printf("  %s: entry %zu got %g expected %g\n", what, i, got[i], ref[i]);
                tu_failures++;
            }
            got[i] = ref[i] = 0;
        }
    tu_close(what, got, ref, n, 1e-5, 0);
}

static int ncases(void) {
    FILE *f = fopen(tu_ref_path("explain_cases.txt"), "r");
    int n = 0;
    if (!f || fscanf(f, "%d", &n) != 1) fail_msg("missing explain_cases.txt (run tools/ref_explain.py)");
    fclose(f);
    return n;
}

static void test_library_against_pytorch(void **state) {
    (void)state;
    for (int c = 0; c < ncases(); c++) {
        char name[64];
        snprintf(name, sizeof name, "explain%d_in.safetensors", c);
        attn_st_file *in, *ref;
        if (attn_st_open(tu_ref_path(name), &in)) fail_msg("%s", attn_last_error());
        snprintf(name, sizeof name, "explain%d_ref.safetensors", c);
        if (attn_st_open(tu_ref_path(name), &ref)) fail_msg("%s", attn_last_error());
        float *x, *wq, *wk, *wv;
        const attn_st_tensor *tx, *tw;
        assert_int_equal(attn_st_load_f32(in, "x", &x, &tx), 0);
        assert_int_equal(attn_st_load_f32(in, "w_q", &wq, &tw), 0);
        assert_int_equal(attn_st_load_f32(in, "w_k", &wk, NULL), 0);
        assert_int_equal(attn_st_load_f32(in, "w_v", &wv, NULL), 0);
        int T = (int)tx->shape[0], dm = (int)tx->shape[1], dk = (int)tw->shape[1];
        attn_explain_result r;
        assert_int_equal(attn_explain_compute(T, dm, dk, x, wq, wk, wv, &r), ATTN_STATUS_OK);
        for (int p = 0; p < 2; p++)
            for (int m = 0; m < 7; m++) {
                char key[64], what[96];
                snprintf(key, sizeof key, "%s.%s", p ? "decoder" : "encoder", MATS[m]);
                float *e;
                const attn_st_tensor *te;
                assert_int_equal(attn_st_load_f32(ref, key, &e, &te), 0);
                snprintf(what, sizeof what, "case%d T=%d %s", c, T, key);
                cmp_masked(what, pass_mat(p ? &r.decoder : &r.encoder, m), e, te->numel);
                attn_free(e);
            }
        attn_explain_free(&r);
        attn_free(x), attn_free(wq), attn_free(wk), attn_free(wv);
        attn_st_close(in);
        attn_st_close(ref);
    }
    attn_explain_result r;
    float one = 1;
    assert_int_equal(attn_explain_compute(0, 1, 1, &one, &one, &one, &one, &r),
                     ATTN_STATUS_INVALID_ARGUMENT);
    assert_int_equal(attn_explain_compute(5000, 1, 1, &one, &one, &one, &one, &r),
                     ATTN_STATUS_TOO_LARGE);
}

/* Run the CLI; capture stdout (and stderr when merge); return the exit code. */
static int run_cli(const char *args, bool merge, char *out, size_t cap) {
    const char *b = getenv("ATTN_BUILD");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s/attn' %s %s", b && *b ? b : "build", args,
             merge ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char outbuf[1 << 22];

static float *json_to_matrix(json_t *rows, size_t *n) {
    size_t R = json_array_size(rows), C = json_array_size(json_array_get(rows, 0));
    float *m = attn_alloc(R * C * sizeof(float));
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++) {
            json_t *v = json_array_get(json_array_get(rows, i), j);
            m[i * C + j] = json_is_null(v) ? -INFINITY : (float)json_number_value(v);
        }
    *n = R * C;
    return m;
}

static void test_cli_json_against_pytorch(void **state) {
    (void)state;
    for (int c = 0; c < ncases(); c++) {
        char args[4200], name[64];
        snprintf(name, sizeof name, "explain%d_in.safetensors", c);
        snprintf(args, sizeof args, "explain '%s' --json", tu_ref_path(name));
        assert_int_equal(run_cli(args, false, outbuf, sizeof outbuf), 0);
        json_error_t err;
        json_t *root = json_loads(outbuf, 0, &err);
        if (!root) fail_msg("explain --json: not JSON: %s", err.text);
        attn_st_file *ref;
        snprintf(name, sizeof name, "explain%d_ref.safetensors", c);
        assert_int_equal(attn_st_open(tu_ref_path(name), &ref), 0);
        for (int p = 0; p < 2; p++) {
            json_t *pass = json_object_get(root, p ? "decoder" : "encoder");
            assert_non_null(pass);
            for (int m = 0; m < 7; m++) {
                char key[64], what[96];
                snprintf(key, sizeof key, "%s.%s", p ? "decoder" : "encoder", MATS[m]);
                size_t n;
                float *got = json_to_matrix(json_object_get(pass, MATS[m]), &n), *e;
                const attn_st_tensor *te;
                assert_int_equal(attn_st_load_f32(ref, key, &e, &te), 0);
                assert_int_equal(n, te->numel);
                snprintf(what, sizeof what, "cli case%d %s", c, key);
                cmp_masked(what, got, e, n);
                attn_free(got), attn_free(e);
            }
        }
        /* Token labels come from the file's metadata. */
        assert_true(json_array_size(json_object_get(root, "tokens")) > 0);
        attn_st_close(ref);
        json_decref(root);
    }
}

static void test_cli_builtin(void **state) {
    (void)state;
    assert_int_equal(run_cli("explain", false, outbuf, sizeof outbuf), 0);
    assert_non_null(strstr(outbuf, "Knowledge"));
    assert_non_null(strstr(outbuf, "-inf"));
    assert_non_null(strstr(outbuf, "encoder"));
    assert_non_null(strstr(outbuf, "decoder"));
    /* The built-in example is deterministic. */
    static char again[1 << 16];
    assert_int_equal(run_cli("explain", false, again, sizeof again), 0);
    assert_string_equal(outbuf, again);

    assert_int_equal(run_cli("explain --json", false, outbuf, sizeof outbuf), 0);
    json_error_t err;
    json_t *root = json_loads(outbuf, 0, &err);
    assert_non_null(root);
    json_t *tok = json_object_get(root, "tokens");
    assert_int_equal(json_array_size(tok), 3);
    assert_string_equal(json_string_value(json_array_get(tok, 0)), "Knowledge");
    for (int p = 0; p < 2; p++) {
        json_t *pass = json_object_get(root, p ? "decoder" : "encoder");
        json_t *w = json_object_get(pass, "weights"), *sc = json_object_get(pass, "scaled");
        for (size_t i = 0; i < 3; i++) {
            double sum = 0;
            for (size_t j = 0; j < 3; j++) {
                double a = json_number_value(json_array_get(json_array_get(w, i), j));
                sum += a;
                json_t *s = json_array_get(json_array_get(sc, i), j);
                if (p && j > i) {
                    assert_true(a == 0.0);    /* the decoder does not look ahead */
                    assert_true(json_is_null(s));
                } else {
                    assert_true(a > 0.0);
                    assert_true(json_is_number(s));
                }
            }
            assert_true(fabs(sum - 1.0) < 1e-6);
        }
    }
    json_decref(root);
}

static void expect_error(const char *args, int code, const char *needle1, const char *needle2) {
    int rc = run_cli(args, true, outbuf, sizeof outbuf);
    printf("  attn %s -> exit %d: %s", args, rc, outbuf);
    assert_int_equal(rc, code);
    assert_non_null(strstr(outbuf, "attn: error: "));
    assert_null(strchr(strchr(outbuf, '\n') + 1, '\n')); /* exactly one line */
    if (needle1) assert_non_null(strstr(outbuf, needle1));
    if (needle2) assert_non_null(strstr(outbuf, needle2));
}

static void test_cli_errors(void **state) {
    (void)state;
    char args[4200], path[4096];
    expect_error("explain --bogus", 2, "--bogus", NULL);
    expect_error("--threads 0 explain", 2, "--threads", NULL);
    expect_error("--backend sse9 explain", 1, "sse9", NULL);
    expect_error("frobnicate", 2, "frobnicate", NULL);
    expect_error("explain /nonexistent/x.safetensors", 1, "/nonexistent/x.safetensors", NULL);

    /* A file without w_q. */
    snprintf(path, sizeof path, "%s", tu_ref_path("explain_missing.safetensors"));
    float data[12] = {0};
    attn_st_entry e[3] = {{"x", ATTN_DTYPE_F32, 2, {3, 4}, data},
                          {"w_k", ATTN_DTYPE_F32, 2, {4, 3}, data},
                          {"w_v", ATTN_DTYPE_F32, 2, {4, 3}, data}};
    assert_int_equal(attn_st_save(path, e, 3, NULL), 0);
    snprintf(args, sizeof args, "explain '%s'", path);
    expect_error(args, 1, "w_q", "explain_missing.safetensors");

    /* Shapes that disagree. */
    snprintf(path, sizeof path, "%s", tu_ref_path("explain_shapes.safetensors"));
    attn_st_entry e2[4] = {{"x", ATTN_DTYPE_F32, 2, {3, 4}, data},
                           {"w_q", ATTN_DTYPE_F32, 2, {4, 3}, data},
                           {"w_k", ATTN_DTYPE_F32, 2, {3, 4}, data},
                           {"w_v", ATTN_DTYPE_F32, 2, {4, 3}, data}};
    assert_int_equal(attn_st_save(path, e2, 4, NULL), 0);
    snprintf(args, sizeof args, "explain '%s'", path);
    expect_error(args, 1, "w_k", "expected");

    /* A truncated file. */
    snprintf(path, sizeof path, "%s", tu_ref_path("explain_truncated.safetensors"));
    FILE *src = fopen(tu_ref_path("explain0_in.safetensors"), "rb");
    assert_non_null(src);
    char buf[64];
    size_t n = fread(buf, 1, sizeof buf, src);
    fclose(src);
    FILE *dst = fopen(path, "wb");
    fwrite(buf, 1, n / 2, dst);
    fclose(dst);
    snprintf(args, sizeof args, "explain '%s'", path);
    expect_error(args, 1, "explain_truncated.safetensors", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library_against_pytorch),
        cmocka_unit_test(test_cli_json_against_pytorch),
        cmocka_unit_test(test_cli_builtin),
        cmocka_unit_test(test_cli_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_gpt_train.c — `attn train --arch gpt` against its PyTorch twin (tools/ref_gpt_train.py,
 * and, in a second group, `attn train --arch llama` against transformers' LlamaForCausalLM
 * (tools/ref_llama_train.py: the same checks but those of the GPT-2 character run);
 * which writes $ATTN_REF_DIR/gpt_train/: attn's own initial checkpoint made with --max-steps 0,
 * and the twin's numbers computed from those weights on the very same batches):
 *   - one step's loss and gradients (2 accumulated micro-batches) vs the twin in float64;
 *   - the step-0 validation loss (the trainer's fixed validation batches) vs the twin;
 *   - the 10-step loss trajectory of the CLI (resume from the step-0 checkpoint: AdamW with decay
 *     on 2-D tensors, warmup + cosine, clipping, accumulation) vs the twin in float32;
 *   - exact resume: stopped at step 4, or by a time budget anywhere, and resumed, the losses and
 *     the saved model and optimizer are bit-identical to an uninterrupted run (same threads);
 *   - a fresh run with the default character tokenizer, auto-detected resume, SIGINT, and the
 *     model directory generating text; one-line errors for bad invocations and inputs. */
#include "tu.h"

#include "attn_gpt.h"
#include "attn_io.h"

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>

static char g_ref[4096], g_work[4300];
static char buf[1 << 20];

static const char *ref(const char *name) {
    static tu_path_ring r;
    return tu_path(&r, g_ref, name);
}

static const char *work(const char *name) {
    static tu_path_ring r;
    return tu_path(&r, g_work, name);
}

/* Run a shell command line; capture stdout+stderr into buf; return the exit status. */
static int sh(const char *cmdline) { return tu_sh_capture(cmdline, 1, buf, sizeof buf); }

static int attn(const char *args) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' --threads 2 %s", tu_attn_bin(), args);
    return sh(cmd);
}

static void copy_dir(const char *from, const char *to) {
    char cmd[12000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    if (sh(cmd) != 0) fail_msg("%s: %s", cmd, buf);
}

static json_t *g_refj;

/* The group's reference: NAME under $ATTN_REF_DIR, made by tools/ref_NAME.py. */
static int setup_for(const char *name) {
    const char *d = getenv("ATTN_REF_DIR");
    snprintf(g_ref, sizeof g_ref, "%s/%s", d && *d ? d : "build/ref", name);
    json_error_t err;
    char p[4400];
    snprintf(p, sizeof p, "%s/ref.json", g_ref);
    g_refj = json_load_file(p, 0, &err);
    if (!g_refj) {
        fprintf(stderr, "%s: %s (run tools/ref_%s.py first)\n", p, err.text, name);
        return -1;
    }
    if (tu_mkdtemp(g_work, sizeof g_work, name)) return -1;
    return 0;
}

static int setup(void **state) {
    (void)state;
    return setup_for("gpt_train");
}

/* The Llama group: `attn train --arch llama` against transformers' LlamaForCausalLM
 * (tools/ref_llama_train.py), with the same checks of gradients, validation loss, trajectory and
 * exact resume. */
static int setup_llama(void **state) {
    (void)state;
    return setup_for("llama_train");
}

static int teardown(void **state) {
    (void)state;
    json_decref(g_refj);
    if (!getenv("ATTN_TEST_KEEP")) tu_rm_tree(g_work);
    return 0;
}

static double refnum(const char *key) { return json_number_value(json_object_get(g_refj, key)); }
static int setting(const char *key) {
    return (int)json_integer_value(json_object_get(json_object_get(g_refj, "settings"), key));
}

/* The metrics lines with "loss" (per step), in order: losses[i], norms[i], lrs[i], and the raw
 * loss strings (for bit-exact comparison). Returns how many. */
typedef struct {
    int n;
    long step[64];
    double loss[64], norm[64], lr[64];
    char raw[64][40];
    double val_loss;
} metrics;

static void read_metrics(const char *path, metrics *m) {
    memset(m, 0, sizeof *m);
    m->val_loss = NAN;
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: cannot open", path);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        if (!j) fail_msg("%s: not JSON: %s", path, line);
        json_t *l = json_object_get(j, "loss"), *v = json_object_get(j, "val_loss");
        if (l && m->n < 64) {
            m->step[m->n] = (long)json_integer_value(json_object_get(j, "step"));
            m->loss[m->n] = json_number_value(l);
            m->norm[m->n] = json_number_value(json_object_get(j, "grad_norm"));
            m->lr[m->n] = json_number_value(json_object_get(j, "lr"));
            const char *q = strstr(line, "\"loss\": ");
            snprintf(m->raw[m->n], sizeof m->raw[0], "%.*s", (int)strcspn(q + 8, ","), q + 8);
            m->n++;
        }
        if (v) m->val_loss = json_number_value(v);
        json_decref(j);
    }
    fclose(f);
}

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read_all(a, &na), *y = tu_read_all(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x), free(y);
    return same;
}

/* ---- one step's gradients vs the float64 twin ------------------------------------------------- */

static void test_step0_gradients(void **state) {
    (void)state;
    attn_set_num_threads(2);
    attn_gpt_model *m;
    attn_status s = attn_gpt_load_dir(ref("init"), &m);
    if (s) fail_msg("load %s: %s", ref("init"), attn_last_error());
    assert_int_equal(attn_gpt_alloc_grads(m), ATTN_STATUS_OK);
    const int B = setting("B"), T = setting("T"), A = setting("grad_accum");
    attn_gpt_state *st;
    assert_int_equal(attn_gpt_state_init(m, B, T, &st), ATTN_STATUS_OK);
    attn_st_file *bf, *gf;
    assert_int_equal(attn_st_open(ref("batches.safetensors"), &bf), ATTN_STATUS_OK);
    assert_int_equal(attn_st_open(ref("grads.safetensors"), &gf), ATTN_STATUS_OK);
    attn_gpt_zero_grad(m);
    double loss = 0;
    for (int micro = 0; micro < A; micro++) {
        char nx[16], ny[16];
        snprintf(nx, sizeof nx, "x%d", micro);
        snprintf(ny, sizeof ny, "y%d", micro);
        int32_t *x, *y;
        const attn_st_tensor *tx;
        assert_int_equal(attn_st_load_i32(bf, nx, &x, &tx), ATTN_STATUS_OK);
        assert_true(tx->ndim == 2 && tx->shape[0] == B && tx->shape[1] == T);
        assert_int_equal(attn_st_load_i32(bf, ny, &y, NULL), ATTN_STATUS_OK);
        attn_gpt_set_train(st, true, 5, (uint64_t)micro);
        float l;
        assert_int_equal(attn_gpt_forward(m, st, B, T, x, NULL), ATTN_STATUS_OK);
        assert_int_equal(attn_gpt_loss(m, st, y, 1.0f / (float)A, &l), ATTN_STATUS_OK);
        assert_int_equal(attn_gpt_backward(m, st), ATTN_STATUS_OK);
        loss += l / A;
        attn_free(x), attn_free(y);
    }
    /* float32 vs the float64 twin: the loss to 1e-6 relative, each tensor's gradient to 1e-4 of
     * its largest reference entry (float32 sums over B·T = 64 positions: ~1e-6 expected). */
    double lref = refnum("loss0");
    printf("  loss %.9f, twin (float64) %.9f, rel %.2e\n", loss, lref, fabs(loss - lref) / lref);
    assert_true(fabs(loss - lref) <= 1e-6 * lref);
    double worst = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        float *g;
        const attn_st_tensor *tg;
        s = attn_st_load_f32(gf, t->name, &g, &tg);
        if (s) fail_msg("%s: %s", t->name, attn_last_error());
        assert_int_equal(tg->ndim, t->ndim);
        double err = 0, mx = 0;
        for (size_t k = 0; k < t->numel; k++) {
            err = fmax(err, fabs((double)m->grads[t->offset + k] - g[k]));
            mx = fmax(mx, fabs((double)g[k]));
        }
        if (mx > 0) worst = fmax(worst, err / mx);
        char what[128];
        snprintf(what, sizeof what, "grad %s", t->name);
        tu_close(what, m->grads + t->offset, g, t->numel, 1e-4, 1e-9);
        attn_free(g);
    }
    printf("  gradients: worst max|err|/max|ref| over %d tensors = %.2e (tolerance 1e-4)\n",
           m->n_tensors, worst);
    attn_st_close(bf);
    attn_st_close(gf);
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
}

/* The --max-steps 0 run evaluated the initial model on the fixed validation batches. */
static void test_step0_valid_loss(void **state) {
    (void)state;
    metrics mt;
    read_metrics(ref("metrics0.jsonl"), &mt);
    double v = refnum("val_loss0");
    printf("  step-0 validation loss: attn %.7f, twin %.7f, rel %.2e (tolerance 1e-5)\n",
           mt.val_loss, v, fabs(mt.val_loss - v) / v);
    assert_true(fabs(mt.val_loss - v) <= 1e-5 * v);
}

/* ---- the 10-step trajectory through the CLI ------------------------------------------------------ */

static void run_to(const char *dir, int steps, const char *extra, const char *metrics_path) {
    char args[12000];
    snprintf(args, sizeof args,
             "train --out '%s' --resume --max-steps %d --metrics '%s' --log-every 1 "
             "--eval-every 1000 %s",
             dir, steps, metrics_path, extra ? extra : "");
    int rc = attn(args);
    if (rc) fail_msg("attn %s -> %d:\n%s", args, rc, buf);
}

static void test_trajectory(void **state) {
    (void)state;
    copy_dir(ref("init"), work("A"));
    run_to(work("A"), 10, NULL, work("A.jsonl"));
    assert_non_null(strstr(buf, "resumed"));
    assert_non_null(strstr(buf, "tokens/s="));
    metrics mt;
    read_metrics(work("A.jsonl"), &mt);
    json_t *l32 = json_object_get(g_refj, "losses32"), *lrs = json_object_get(g_refj, "lrs"),
           *n32 = json_object_get(g_refj, "norms32");
    assert_int_equal(mt.n, 10);
    assert_int_equal((int)json_array_size(l32), 10);
    /* float32 vs float32 with different summation orders: the twin and attn agree to ~1e-7
     * relative over these 10 steps (measured); 2e-5 leaves room for other kernel paths. The
     * learning rate is a double formula: 1e-12. The gradient norm before clipping: 1e-5 for the
     * first 3 steps, then 1e-3: the gradient of the key biases is exactly 0 in exact arithmetic
     * (softmax ignores a constant added to every score of a row), so in float32 it is rounding
     * noise, which Adam normalizes into steps of size ~lr in both implementations — the key biases
     * drift apart (by ~5e-5 after 8 steps, harmlessly: they do not change the output), and the
     * norms with them (4e-5 relative measured at step 9), while the losses stay within 1e-7. */
    double worst = 0, worst_n = 0;
    for (int i = 0; i < 10; i++) {
        double r = json_number_value(json_array_get(l32, (size_t)i));
        double e = fabs(mt.loss[i] - r) / r;
        double rn = json_number_value(json_array_get(n32, (size_t)i));
        double en = fabs(mt.norm[i] - rn) / rn;
        worst = fmax(worst, e), worst_n = fmax(worst_n, en);
        assert_true(en <= (i < 3 ? 1e-5 : 1e-3));
        printf("  step %2ld: loss %.7f twin %.7f (rel %.1e)  |g| %.5f twin %.5f  lr %.3e\n",
               mt.step[i], mt.loss[i], r, e, mt.norm[i], rn, mt.lr[i]);
        assert_int_equal(mt.step[i], i + 1);
        assert_true(fabs(mt.lr[i] - json_number_value(json_array_get(lrs, (size_t)i))) <= 1e-12);
    }
    printf("  10-step trajectory: worst loss rel %.2e (tolerance 2e-5), grad-norm rel %.2e "
           "(tolerance 1e-5 for steps 1-3, then 1e-3)\n",
           worst, worst_n);
    assert_true(worst <= 2e-5);
}

/* ---- exact resume ------------------------------------------------------------------------------- */

static void expect_same_run(const char *dir_a, const metrics *a, const char *dir_b, const metrics *b,
                            int from) {
    for (int i = 0; i < a->n; i++) {
        if (a->step[i] <= from) continue;
        int j = 0;
        while (j < b->n && b->step[j] != a->step[i]) j++;
        if (j == b->n) fail_msg("step %ld missing from the resumed run", a->step[i]);
        if (strcmp(a->raw[i], b->raw[j]) != 0)
            fail_msg("step %ld: loss %s uninterrupted, %s resumed", a->step[i], a->raw[i], b->raw[j]);
    }
    const char *files[] = {"model.safetensors", "optimizer.safetensors"};
    for (int k = 0; k < 2; k++) {
        char pa[4400], pb[4400];
        snprintf(pa, sizeof pa, "%s/%s", dir_a, files[k]);
        snprintf(pb, sizeof pb, "%s/%s", dir_b, files[k]);
        printf("  %s identical: %s\n", files[k], same_file(pa, pb) ? "yes" : "NO");
        assert_true(same_file(pa, pb));
    }
}

static void test_resume_exact(void **state) {
    (void)state;
    metrics a, b, c;
    read_metrics(work("A.jsonl"), &a); /* test_trajectory's uninterrupted 10 steps */
    assert_int_equal(a.n, 10);
    /* stopped at step 4 (with a periodic checkpoint at 2), resumed to 10 */
    copy_dir(ref("init"), work("B"));
    run_to(work("B"), 4, "--save-every 2", work("B.jsonl"));
    run_to(work("B"), 10, NULL, work("B.jsonl"));
    read_metrics(work("B.jsonl"), &b);
    printf("  stop at 4, resume: %d steps logged\n", b.n);
    expect_same_run(work("A"), &a, work("B"), &b, 0);
    /* stopped by a time budget wherever it falls, resumed */
    copy_dir(ref("init"), work("C"));
    run_to(work("C"), 10, "--time-budget 0.05", work("C.jsonl"));
    const char *at = strstr(buf, "time budget reached: step ");
    if (at) printf("  time budget stopped at step %ld\n", strtol(at + 26, NULL, 10));
    run_to(work("C"), 10, NULL, work("C.jsonl"));
    read_metrics(work("C.jsonl"), &c);
    expect_same_run(work("A"), &a, work("C"), &c, 0);
}

/* With dropout (masks from (seed, micro-step)) and gradient accumulation: fresh runs, one
 * uninterrupted and one stopped at step 3 and resumed, are bit-identical; dropout is active (the
 * first loss differs from the same run without dropout). */
static void test_resume_exact_dropout(void **state) {
    (void)state;
    char args[12000];
    const char *common = "--batch 2 --grad-accum 2 --eval-iters 1 --log-every 1 --eval-every 1000";
    const char *names[3] = {"D1", "D2", "D0"};
    const char *drop[3] = {"0.1", "0.1", "0"};
    const int steps[3] = {6, 3, 1};
    for (int k = 0; k < 3; k++) {
        char mp[4400];
        snprintf(mp, sizeof mp, "%s.jsonl", work(names[k]));
        snprintf(args, sizeof args,
                 "train --arch gpt --config '%s' --data '%s' %s --dropout %s --max-steps %d "
                 "--lr-decay-steps 6 --metrics '%s' --out '%s'",
                 ref("tiny.json"), ref("data.txt"), common, drop[k], steps[k], mp, work(names[k]));
        if (attn(args)) fail_msg("%s", buf);
    }
    run_to(work("D2"), 6, NULL, work("D2.jsonl"));
    metrics a, b, z;
    read_metrics(work("D1.jsonl"), &a);
    read_metrics(work("D2.jsonl"), &b);
    read_metrics(work("D0.jsonl"), &z);
    printf("  step 1 loss: dropout 0.1 %s, no dropout %s\n", a.raw[0], z.raw[0]);
    assert_true(strcmp(a.raw[0], z.raw[0]) != 0);
    assert_int_equal(a.n, 6);
    expect_same_run(work("D1"), &a, work("D2"), &b, 0);
}

/* ---- a fresh run: defaults, auto-detected resume, SIGINT, generate --------------------------------- */

/* --precision: an unknown precision is a usage error. */
static void test_bf16_option(void **state) {
    (void)state;
    char args[12000];
    snprintf(args, sizeof args,
             "train --arch gpt --config '%s' --data '%s' --batch 2 --max-steps 3 --eval-iters 2 "
             "--precision fp16 --out '%s'",
             ref("tiny.json"), ref("data.txt"), work("B16a"));
    assert_int_equal(attn(args), 2);
    assert_non_null(strstr(buf, "--precision must be f32 or bf16"));
}

/* Without AVX512-BF16 a --precision bf16 run fails with a clear error. (The CLI picks its backend
 * as this process does, from ATTN_BACKEND or the CPU, so attn_precision_available says which.)
 * Where this backend runs bf16, the CLI is run on the AVX2 backend, which has no bf16 products:
 * the same refusal, on every CPU with AVX2. */
static void test_bf16_refused(void **state) {
    (void)state;
    const char *env = "";
    if (attn_precision_available(ATTN_PRECISION_BF16)) {
        if (!attn_backend_available(ATTN_BACKEND_AVX2))
            tu_skip_hw("backend %s runs bf16 and this CPU has no AVX2 backend to refuse it",
                       attn_backend_name(attn_get_backend()));
        env = "ATTN_BACKEND=avx2 ";
    }
    char args[12000];
    snprintf(args, sizeof args,
             "train --arch gpt --config '%s' --data '%s' --batch 2 --max-steps 5 --eval-iters 2 "
             "--precision bf16 --out '%s'",
             ref("tiny.json"), ref("data.txt"), work("B16r"));
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s'%s' --threads 2 %s", env, tu_attn_bin(), args);
    int rc = sh(cmd);
    printf("  [%d] %s", rc, buf);
    if (rc != 1 || !strstr(buf, "needs a CPU with AVX512-BF16"))
        fail_msg("a bf16 run without AVX512-BF16: exit %d, expected 1 and a clear error: %s", rc,
                 buf);
}

/* --precision bf16 (mixed precision): a run trains, saves the precision in its checkpoint, and
 * resumes exactly (3 + 2 steps give the 5-step run's weights, bit for bit). */
static void test_bf16_run(void **state) {
    (void)state;
    tu_need_bf16();
    char args[12000], cmd[12000];
    const char *a = work("B16a"), *b = work("B16b");
    snprintf(args, sizeof args,
             "train --arch gpt --config '%s' --data '%s' --batch 2 --max-steps 5 --eval-iters 2 "
             "--precision bf16 --out '%s'",
             ref("tiny.json"), ref("data.txt"), a);
    int rc = attn(args);
    if (rc) fail_msg("bf16 run failed: %s", buf);
    assert_non_null(strstr(buf, "done: step 5"));
    snprintf(args, sizeof args,
             "train --arch gpt --config '%s' --data '%s' --batch 2 --max-steps 3 --eval-iters 2 "
             "--lr-decay-steps 5 --precision bf16 --out '%s'",
             ref("tiny.json"), ref("data.txt"), b);
    rc = attn(args);
    if (rc) fail_msg("bf16 run failed: %s", buf);
    snprintf(cmd, sizeof cmd, "grep -q '\"precision\": *\"bf16\"' '%s/training_state.json'", b);
    if (sh(cmd)) fail_msg("the checkpoint does not record precision bf16");
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps 5", b);
    rc = attn(args);
    if (rc) fail_msg("bf16 resume failed: %s", buf);
    snprintf(cmd, sizeof cmd, "cmp '%s/model.safetensors' '%s/model.safetensors'", a, b);
    if (sh(cmd)) fail_msg("3 + 2 resumed bf16 steps differ from 5 steps: %s", buf);
}

static void test_fresh_run(void **state) {
    (void)state;
    char args[12000];
    const char *dir = work("F");
    snprintf(args, sizeof args,
             "train --arch gpt --config '%s' --data '%s' --batch 2 --max-steps 3 --eval-iters 2 "
             "--out '%s'",
             ref("tiny.json"), ref("data.txt"), dir);
    int rc = attn(args);
    printf("%s", buf);
    if (rc) fail_msg("fresh run failed: %s", buf);
    assert_non_null(strstr(buf, "done: step 3"));
    assert_non_null(strstr(buf, "tokens/s="));
    const char *files[] = {"config.json", "tokenizer.json", "model.safetensors",
                           "optimizer.safetensors", "training_state.json"};
    for (int i = 0; i < 5; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        struct stat sb;
        if (stat(p, &sb) != 0) fail_msg("%s is missing", p);
    }
    /* resume without --arch: config.json says gpt2 */
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps 5 --eval-iters 2", dir);
    rc = attn(args);
    assert_int_equal(rc, 2); /* --eval-iters defines the run: refused */
    assert_non_null(strstr(buf, "cannot be changed"));
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps 5", dir);
    rc = attn(args);
    if (rc) fail_msg("auto-detected resume failed: %s", buf);
    assert_non_null(strstr(buf, "resumed"));
    assert_non_null(strstr(buf, "done: step 5"));
    /* a save interrupted between its two renames leaves only DIR.prev: resume takes it, and the
     * next save puts DIR back */
    char prev[4400], cmd[9000];
    snprintf(prev, sizeof prev, "%s.prev", dir);
    snprintf(cmd, sizeof cmd, "mv '%s' '%s'", dir, prev);
    assert_int_equal(sh(cmd), 0);
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps 6", dir);
    rc = attn(args);
    if (rc) fail_msg("resume from DIR.prev failed: %s", buf);
    assert_non_null(strstr(buf, "done: step 6"));
    struct stat sb;
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_not_equal(stat(prev, &sb), 0);
    /* the directory generates text in the training text's alphabet, up to the context length:
     * 16 positions with a 6-character prompt leave 16 - 6 + 1 = 11 new characters */
    snprintf(args, sizeof args,
             "generate --model '%s' --prompt 'ROMEO:' --max-tokens 40 --seed 3 --no-echo --quiet", dir);
    rc = attn(args);
    if (rc) fail_msg("generate failed: %s", buf);
    size_t nd;
    char *data = tu_read_all(ref("data.txt"), &nd);
    assert_non_null(data);
    size_t nchars = strlen(buf);
    printf("  generated: \"%s\"\n", buf);
    assert_int_equal(nchars, 11); /* ASCII text: one byte per character token */
    for (size_t i = 0; i < nchars; i++)
        if (!memchr(data, buf[i], nd)) fail_msg("generated character 0x%02x is not in the data", buf[i]);
    free(data);
}

static void test_sigint(void **state) {
    (void)state;
    const char *dir = work("S");
    copy_dir(ref("init"), dir);
    static char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "exec '%s' --threads 2 train --out '%s' --resume --max-steps 1000000 --log-every 1 "
             "--eval-every 1000000",
             tu_attn_bin(), dir);
    /* interrupted after the third progress line */
    int st = tu_sh_interrupt(cmd, "step ", 3, buf, sizeof buf);
    const char *at = strstr(buf, "interrupted: step ");
    printf("  after SIGINT: exit %d, %.60s\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1, at ? at : buf);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_non_null(at);
    long step = strtol(at + 18, NULL, 10);
    char args[9000];
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps %ld --eval-every 1000",
             dir, step + 1);
    int rc = attn(args);
    if (rc) fail_msg("resume after SIGINT failed: %s", buf);
    assert_non_null(strstr(buf, "done: step"));
}

/* ---- errors: one line "attn: error: ...", exit 1 (failure) or 2 (usage) -------------------------- */

static void expect_error(const char *args, int want_rc, const char *needle) {
    int rc = attn(args);
    tu_expect_error_output(buf, rc, want_rc, needle, args);
}

static void write_text(const char *path, const char *s) { tu_write_all(path, s, strlen(s)); }

static void test_errors(void **state) {
    (void)state;
    char a[16000];
    const char *data = ref("data.txt"), *tiny = ref("tiny.json");
    write_text(work("pdrop.json"), "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 16, \"n_positions\": 8, "
                                   "\"attn_pdrop\": 0.1}");
    write_text(work("vocab.json"), "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 16, \"n_positions\": 8, "
                                   "\"vocab_size\": 10}");
    write_text(work("heads.json"), "{\"n_layer\": 1, \"n_head\": 3, \"n_embd\": 16, \"n_positions\": 8}");
    write_text(work("bad.json"), "{\"n_layer\": 1, ");
    write_text(work("short.txt"), "To be, or not to be");
    static const char latin1[] = "caf\xe9 au lait, caf\xe9 au lait, caf\xe9 au lait!!";
    tu_write_all(work("latin1.txt"), latin1, sizeof latin1 - 1);
    mkdir(work("empty"), 0777);

    snprintf(a, sizeof a, "train --arch gpt --out '%s'", work("x"));
    expect_error(a, 2, "--data");
    snprintf(a, sizeof a, "train --arch rnn --data '%s' --out '%s'", data, work("x"));
    expect_error(a, 2, "--arch");
    snprintf(a, sizeof a, "train --arch gpt --data '%s' --out '%s' --batch 0", data, work("x"));
    expect_error(a, 2, "--batch");
    snprintf(a, sizeof a, "train --arch gpt --data '%s' --out '%s' --bogus 1", data, work("x"));
    expect_error(a, 2, "--bogus");
    snprintf(a, sizeof a, "train --arch gpt --data '%s' --out '%s'", work("missing.txt"), work("x"));
    expect_error(a, 1, "missing.txt");
    snprintf(a, sizeof a, "train --arch gpt --config '%s' --data '%s' --out '%s'", work("pdrop.json"),
             data, work("x1"));
    expect_error(a, 1, "attn_pdrop");
    snprintf(a, sizeof a, "train --arch gpt --config '%s' --data '%s' --out '%s'", work("vocab.json"),
             data, work("x2"));
    expect_error(a, 1, "vocab_size");
    snprintf(a, sizeof a, "train --arch gpt --config '%s' --data '%s' --out '%s'", work("heads.json"),
             data, work("x3"));
    expect_error(a, 1, "n_head");
    snprintf(a, sizeof a, "train --arch gpt --config '%s' --data '%s' --out '%s'", work("bad.json"),
             data, work("x4"));
    expect_error(a, 1, "bad.json");
    snprintf(a, sizeof a, "train --arch gpt --config '%s' --data '%s' --out '%s'", tiny,
             work("short.txt"), work("x5"));
    expect_error(a, 1, "at least n_positions + 1");
    snprintf(a, sizeof a, "train --arch gpt --config '%s' --data '%s' --out '%s'", tiny,
             work("latin1.txt"), work("x6"));
    expect_error(a, 1, "UTF-8");
    snprintf(a, sizeof a, "train --arch gpt --config '%s' --data '%s' --tokenizer '%s' --out '%s'",
             tiny, data, work("no-such-tokenizer"), work("x7"));
    expect_error(a, 1, "no-such-tokenizer");
    copy_dir(ref("init"), work("E"));
    snprintf(a, sizeof a, "train --arch gpt --config '%s' --data '%s' --out '%s'", tiny, data, work("E"));
    expect_error(a, 1, "already holds a checkpoint");
    snprintf(a, sizeof a, "train --arch gpt --out '%s' --resume --lr 0.1", work("E"));
    expect_error(a, 2, "--lr");
    snprintf(a, sizeof a, "train --arch gpt --out '%s' --resume", work("empty"));
    expect_error(a, 1, "no checkpoint");
    /* the data changed under a checkpoint */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", data, work("data2.txt"));
    assert_int_equal(sh(cmd), 0);
    snprintf(a, sizeof a, "train --arch gpt --config '%s' --data '%s' --max-steps 0 --eval-iters 1 --out '%s'",
             tiny, work("data2.txt"), work("G"));
    if (attn(a)) fail_msg("%s", buf);
    snprintf(cmd, sizeof cmd, "echo 'one more line' >> '%s'", work("data2.txt"));
    assert_int_equal(sh(cmd), 0);
    snprintf(a, sizeof a, "train --out '%s' --resume --max-steps 1", work("G"));
    expect_error(a, 1, "changed since the checkpoint");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step0_gradients),
        cmocka_unit_test(test_step0_valid_loss),
        cmocka_unit_test(test_trajectory),
        cmocka_unit_test(test_resume_exact),
        cmocka_unit_test(test_resume_exact_dropout),
        cmocka_unit_test(test_fresh_run),
        cmocka_unit_test(test_bf16_option),
        cmocka_unit_test(test_bf16_refused),
        cmocka_unit_test(test_bf16_run),
        cmocka_unit_test(test_sigint),
        cmocka_unit_test(test_errors),
    };
    const struct CMUnitTest llama[] = {
        cmocka_unit_test(test_step0_gradients),
        cmocka_unit_test(test_step0_valid_loss),
        cmocka_unit_test(test_trajectory),
        cmocka_unit_test(test_resume_exact),
    };
    int rc = cmocka_run_group_tests_name("gpt_train", tests, setup, teardown);
    return rc + cmocka_run_group_tests_name("llama_train", llama, setup_llama, teardown);
}

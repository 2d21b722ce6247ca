/* test_train_cli.c — `attn train` and `attn translate` end to end on a tiny model and a slice of
 * the Tatoeba pairs: an interrupted-and-resumed run ends bit-identical to an uninterrupted one
 * (same thread count), Ctrl-C saves a checkpoint and exits 0, the time budget stops and saves,
 * translate reads the result, and bad invocations give one-line errors.
 *
 * The one training loop of every family (src/cli/train_loop.c):
 *   shared flags  every option the three families (translator, --arch gpt, --arch bert) share is
 *                 in each one's --help with its default; the defaults agree except where the
 *                 family's reference differs, and then its --help names the reason; the same
 *                 flag (and its old spelling) is refused with the same message by each; an
 *                 option of other families only is refused naming them; --resume refuses options
 *                 that define the run, in every family.
 *   tokens/s      a 5-step run of each family with validation after every step and --metrics:
 *                 the summary's token count is the family's definition recomputed here from the
 *                 data API (translator: non-pad source + target tokens of the loader's batches;
 *                 GPT: B x n_positions x grad-accum per step; BERT: non-pad tokens of the masked
 *                 batches) and equals the metrics file's; tokens/s is that count over the
 *                 metrics' train_seconds (not over the elapsed time); and at every step
 *                 train_seconds <= seconds - (the validations' eval_seconds so far), which holds
 *                 only if validation time is left out (no timing threshold: the intervals are
 *                 disjoint by construction); the checkpoints record the shared options under one
 *                 name each. */
#include "tu.h"

#include "attn_data.h"

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[4096], g_data[4200], g_cfg[4200];

/* A slice of the corpus (first 3000 pairs) and a tiny model configuration. */
static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s/train_cli", getenv("ATTN_REF_DIR") ? getenv("ATTN_REF_DIR")
                                                                          : "build/ref");
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_dir, g_dir);
    if (system(cmd) != 0) return -1;
    snprintf(g_data, sizeof g_data, "%s/pairs.tsv", g_dir);
    snprintf(cmd, sizeof cmd, "head -n 3000 ../shared/data/tatoeba-eng-cmn/cmn.txt > '%s'", g_data);
    if (system(cmd) != 0) return -1;
    snprintf(g_cfg, sizeof g_cfg, "%s/tiny.json", g_dir);
    FILE *f = fopen(g_cfg, "w");
    if (!f) return -1;
    fputs("{\"d_model\": 32, \"n_head\": 2, \"d_ff\": 64, \"n_enc_layers\": 1, "
          "\"n_dec_layers\": 1, \"max_len\": 48, \"dropout\": 0.1, \"share_embeddings\": true, "
          "\"tie_output\": true, \"pre_ln\": false}\n",
          f);
    fclose(f);
    return 0;
}

/* Run attn with args; capture stdout+stderr; return the exit status. */
static int run(const char *args, char *out, size_t cap) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' %s", tu_attn_bin(), args);
    return tu_sh_capture(cmd, 1, out, cap);
}

static char buf[1 << 20];

static const char *common(void) {
    static char c[9000];
    snprintf(c, sizeof c,
             "--data '%s' --config '%s' --vocab-size 400 --valid-size 50 --test-size 50 "
             "--max-tokens 400 --warmup 5 --eval-every 6 --bleu-sentences 5 --save-every 100 "
             "--log-every 1",
             g_data, g_cfg);
    return c;
}

static bool same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = false;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* The "step N | ... loss X" lines for steps > from, in order. */
static void loss_lines(const char *text, int from, char *out, size_t cap) {
    out[0] = '\0';
    for (const char *p = text; (p = strstr(p, "step ")) != NULL; p++) {
        long step = strtol(p + 5, NULL, 10);
        const char *loss = strstr(p, "loss ");
        const char *eol = strchr(p, '\n');
        if (step > from && loss && eol && loss < eol) {
            size_t n = strlen(out);
            snprintf(out + n, cap - n, "%ld:%.8s ", step, loss + 5);
        }
    }
}

static void test_resume_is_exact(void **state) {
    (void)state;
    char args[16384], a_dir[4300], b_dir[4300], full[4096], resumed[4096];
    snprintf(a_dir, sizeof a_dir, "%s/A", g_dir);
    snprintf(b_dir, sizeof b_dir, "%s/B", g_dir);
    snprintf(args, sizeof args, "train %s --out '%s' --max-steps 12", common(), a_dir);
    int rc = run(args, buf, sizeof buf);
    if (rc) fail_msg("uninterrupted run failed (%d): %s", rc, buf);
    loss_lines(buf, 6, full, sizeof full);

    snprintf(args, sizeof args, "train %s --out '%s' --max-steps 6", common(), b_dir);
    rc = run(args, buf, sizeof buf);
    if (rc) fail_msg("first half failed (%d): %s", rc, buf);
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps 12 --log-every 1", b_dir);
    rc = run(args, buf, sizeof buf);
    if (rc) fail_msg("resumed half failed (%d): %s", rc, buf);
    assert_non_null(strstr(buf, "resumed"));
    loss_lines(buf, 6, resumed, sizeof resumed);
    printf("  uninterrupted steps 7-12: %s\n  resumed       steps 7-12: %s\n", full, resumed);
    assert_true(strlen(full) > 0);
    assert_string_equal(full, resumed);
    char pa[4400], pb[4400];
    const char *files[] = {"model.safetensors", "optimizer.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(pa, sizeof pa, "%s/%s", a_dir, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b_dir, files[i]);
        printf("  %s identical: %s\n", files[i], same_file(pa, pb) ? "yes" : "NO");
        assert_true(same_file(pa, pb));
    }
    /* The model directory translates, one line out per line in. */
    snprintf(args, sizeof args,
             "translate --model '%s' --beam 2 < '%s/test.src' | wc -l | tr -d ' ' && wc -l < "
             "'%s/test.src' | tr -d ' '",
             a_dir, a_dir, a_dir);
    rc = run(args, buf, sizeof buf);
    assert_int_equal(rc, 0);
    long n_out = strtol(buf, NULL, 10), n_in = strtol(strchr(buf, '\n') + 1, NULL, 10);
    printf("  translate: %ld lines in, %ld lines out\n", n_in, n_out);
    assert_true(n_in > 0 && n_in == n_out);
    /* --stats: one line on standard error with the products' multiply-adds */
    char out[4400], err[4400];
    snprintf(out, sizeof out, "%s/stats.out", g_dir);
    snprintf(err, sizeof err, "%s/stats.err", g_dir);
    snprintf(args, sizeof args, "translate --model '%s' --beam 2 --stats 'Hello there.'", a_dir);
    assert_int_equal(tu_run_cli_files(args, NULL, out, err), 0);
    tu_expect_stats_file(err);
}

static void test_sigint_saves(void **state) {
    (void)state;
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/C", g_dir);
    static char cmd[32768];
    snprintf(cmd, sizeof cmd, "exec '%s' train %s --out '%s' --max-steps 100000 --eval-every 100000",
             tu_attn_bin(), common(), dir);
    /* Wait for the third progress line, then interrupt. */
    int st = tu_sh_interrupt(cmd, "step ", 3, buf, sizeof buf);
    size_t used = strlen(buf);
    printf("  after SIGINT: exit %d, last line: %s", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
           strrchr(buf, '\n') > buf ? buf + used - 1 - (used > 200 ? 200 : used - 1) : buf);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_non_null(strstr(buf, "interrupted: step"));
    char p[4400];
    snprintf(p, sizeof p, "%s/training_state.json", dir);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    /* and it resumes */
    char args[8000];
    const char *at = strstr(buf, "interrupted: step ");
    long step = strtol(at + 18, NULL, 10);
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps %ld --eval-every 100000",
             dir, step + 2);
    int rc = run(args, buf, sizeof buf);
    if (rc) fail_msg("resume after SIGINT failed: %s", buf);
    assert_non_null(strstr(buf, "done: step"));
}

static void test_time_budget(void **state) {
    (void)state;
    char args[16384];
    snprintf(args, sizeof args, "train %s --out '%s/D' --time-budget 1 --eval-every 100000",
             common(), g_dir);
    int rc = run(args, buf, sizeof buf);
    if (rc) fail_msg("time budget run failed: %s", buf);
    assert_non_null(strstr(buf, "time budget reached: step"));
    assert_non_null(strstr(buf, "tokens/s="));
}

static void expect_error(const char *args, int code, const char *needle) {
    int rc = run(args, buf, sizeof buf);
    tu_expect_error_output(buf, rc, code, needle, args);
}

static void test_errors(void **state) {
    (void)state;
    char args[16384];
    snprintf(args, sizeof args, "train --out '%s/nothing-here' --resume", g_dir);
    expect_error(args, 1, "no checkpoint");
    snprintf(args, sizeof args, "train %s --out '%s/A' --max-steps 1", common(), g_dir);
    expect_error(args, 1, "--resume");
    expect_error("train --data x.tsv", 2, "--out");
    snprintf(args, sizeof args, "train --out '%s/E' --lr banana", g_dir);
    expect_error(args, 2, "--lr");
    snprintf(args, sizeof args, "train --out '%s/E' --data /nonexistent.tsv", g_dir);
    expect_error(args, 1, "/nonexistent.tsv");
    snprintf(args, sizeof args, "train --arch bogus --out '%s/E' --data y", g_dir);
    expect_error(args, 2, "--arch");
    snprintf(args, sizeof args, "train --arch gpt --out '%s/E' --data '%s/missing.txt'", g_dir,
             g_dir);
    expect_error(args, 1, "missing.txt: cannot open");
    snprintf(args, sizeof args, "translate --model '%s/nothing-here' hello", g_dir);
    expect_error(args, 1, "nothing-here");
}


/* ---- the shared flags of the three families ---- */

/* The text of `attn train [--arch A] --help` with wrapped option lines joined. */
static void help_of(const char *arch, char *out, size_t cap) {
    char args[128];
    snprintf(args, sizeof args, "train %s%s --help", arch ? "--arch " : "", arch ? arch : "");
    assert_int_equal(run(args, out, cap), 0);
    /* join continuation lines (23 spaces) to their option line */
    char *w = out;
    for (const char *r = out; *r;) {
        if (r[0] == '\n' && !strncmp(r + 1, "                       ", 23)) {
            *w++ = ' ';
            r += 24;
            continue;
        }
        *w++ = *r++;
    }
    *w = '\0';
}

/* The "(default ...)" text of option `name` in help (NULL: no such option line). */
static const char *default_of(const char *help, const char *name, char *dst, size_t cap) {
    char head[64];
    snprintf(head, sizeof head, "\n  %s ", name);
    const char *p = strstr(help, head);
    if (!p) return NULL;
    const char *eol = strchr(p + 1, '\n'), *d = NULL;
    for (const char *q = p; (q = strstr(q + 1, "(default")) && (!eol || q < eol);) d = q;
    if (!d) {
        dst[0] = '\0';
        return dst;
    }
    const char *end = eol ? eol : d + strlen(d);
    while (end > d && end[-1] != ')') end--;
    snprintf(dst, cap, "%.*s", (int)(end - d - 1 - 8 > 0 ? end - d - 1 - 8 : 0), d + 8);
    return dst;
}

static char g_help[3][65536];

static void test_shared_flags(void **state) {
    (void)state;
    const char *arch[3] = {"encdec", "gpt", "bert"};
    for (int f = 0; f < 3; f++) help_of(arch[f], g_help[f], sizeof g_help[f]);
    /* `attn train --help` shows all three */
    assert_int_equal(run("train --help", buf, sizeof buf), 0);
    assert_non_null(strstr(buf, "--arch gpt"));
    assert_non_null(strstr(buf, "--arch bert"));
    /* taken by every family, with these defaults (NULL: the family's own, checked below) */
    static const struct {
        const char *name, *def;
    } all[] = {{"--seed", NULL},          {"--dropout", ": the configuration's"},
               {"--lr", NULL},            {"--warmup-steps", NULL},
               {"--weight-decay", NULL},  {"--beta1", " 0.9"},
               {"--beta2", NULL},         {"--adam-eps", NULL},
               {"--grad-clip", " 1; also --clip"}, {"--max-steps", NULL},
               {"--time-budget", ": none"}, {"--eval-every", NULL},
               {"--save-every", " 1000"}, {"--log-every", NULL},
               {"--metrics", ": none"},   {"--batch", NULL},
               {"--resume", ""}};
    char d[3][512];
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        for (int f = 0; f < 3; f++) {
            if (!default_of(g_help[f], all[k].name, d[f], sizeof d[f]))
                fail_msg("--arch %s --help lacks %s", arch[f], all[k].name);
            if (all[k].def && strcmp(d[f], all[k].def) != 0)
                fail_msg("--arch %s: %s default \"%s\", the shared one is \"%s\"", arch[f],
                         all[k].name, d[f], all[k].def);
        }
        printf("  %-15s %-28s %-28s %s\n", all[k].name, d[0], d[1], d[2]);
    }
    /* where a family's default differs, its --help says why (its reference's setting) */
    static const struct {
        int family;
        const char *name, *def, *reason;
    } own[] = {
        {0, "--seed", " 1", NULL},
        {1, "--seed", " 1337", "seed 1337"},
        {2, "--seed", " 1", NULL},
        {0, "--lr", " 1e-3", NULL},
        {1, "--lr", " 1e-3", NULL},
        {2, "--lr", " 5e-4", "lr 5e-4"},
        {0, "--warmup-steps", " 400; also --warmup", "warmup 400"},
        {1, "--warmup-steps", " 100; also --warmup", "warmup 100"},
        {2, "--warmup-steps", " 100; also --warmup", "warmup 100"},
        {0, "--weight-decay", " 0", "no weight decay"},
        {1, "--weight-decay", " 0.1", "weight decay 0.1"},
        {2, "--weight-decay", " 0.01", "weight decay 0.01"},
        {0, "--beta2", " 0.98", "betas (0.9, 0.98)"},
        {1, "--beta2", " 0.99", "beta2 0.99"},
        {2, "--beta2", " 0.999", "betas (0.9, 0.999)"},
        {0, "--adam-eps", " 1e-9", "eps 1e-9"},
        {1, "--adam-eps", " 1e-8", NULL},
        {2, "--adam-eps", " 1e-8", "eps 1e-8"},
        {0, "--eval-every", " 500", NULL},
        {1, "--eval-every", " 250", "eval every 250"},
        {2, "--eval-every", " 500", NULL},
        {0, "--log-every", " 20", NULL},
        {1, "--log-every", " 10", "log every 10"},
        {2, "--log-every", " 20", NULL},
        {0, "--max-steps", ": none", NULL},
        {1, "--max-steps", ": 2000; 0 = save the initial model, evaluate it and exit", "2000 steps"},
        {2, "--max-steps", ": none", NULL},
        {0, "--epochs", ": 20 when neither --max-steps nor --time-budget is given", NULL},
        {2, "--epochs", ": 1 when neither --max-steps nor --time-budget is given", "epochs 1"},
    };
    for (size_t k = 0; k < sizeof own / sizeof own[0]; k++) {
        const char *got = default_of(g_help[own[k].family], own[k].name, d[0], sizeof d[0]);
        if (!got || strcmp(got, own[k].def) != 0)
            fail_msg("--arch %s: %s default \"%s\", expected \"%s\"", arch[own[k].family],
                     own[k].name, got ? got : "(missing)", own[k].def);
        if (own[k].reason && !strstr(g_help[own[k].family], own[k].reason))
            fail_msg("--arch %s --help does not explain its %s default (\"%s\")",
                     arch[own[k].family], own[k].name, own[k].reason);
    }
    /* options of some families only */
    assert_null(default_of(g_help[1], "--epochs", d[0], sizeof d[0]));
    assert_null(default_of(g_help[0], "--lr-decay-steps", d[0], sizeof d[0]));
    assert_non_null(default_of(g_help[1], "--lr-decay-steps", d[0], sizeof d[0]));
    assert_non_null(default_of(g_help[2], "--lr-decay-steps", d[0], sizeof d[0]));
    /* what a token is, for tokens/s, in each */
    assert_non_null(strstr(g_help[0], "non-pad source or target token"));
    assert_non_null(strstr(g_help[1], "B x n_positions x grad-accum"));
    assert_non_null(strstr(g_help[2], "real (non-pad) token"));

    /* the same flag, or its old spelling, is parsed alike by each family */
    static const struct {
        const char *arg, *msg;
    } bad[] = {{"--grad-clip -1", "train: --grad-clip needs a number from 0 to 1e+09, got '-1'"},
               {"--clip -1", "train: --clip needs a number from 0 to 1e+09, got '-1'"},
               {"--warmup-steps x", "train: --warmup-steps needs an integer from 0 to 1000000000"},
               {"--warmup x", "train: --warmup needs an integer from 0 to 1000000000"},
               {"--eval-every 0", "train: --eval-every needs an integer from 1 to 1000000000"},
               {"--batch 0", "train: --batch needs an integer from 1 to 1000000"},
               {"--adam-eps 2", "train: --adam-eps needs a number from 1e-30 to 1"},
               {"--time-budget 0", "train: --time-budget needs a number from 0.001 to 1e+09"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        for (int f = 0; f < 3; f++) {
            char args[4800];
            snprintf(args, sizeof args, "train --arch %s --out '%s/F' --data x %s", arch[f], g_dir,
                     bad[k].arg);
            expect_error(args, 2, bad[k].msg);
        }
    char args[9000];
    snprintf(args, sizeof args, "train --arch gpt --out '%s/F' --data x --epochs 2", g_dir);
    expect_error(args, 2, "--epochs is an option of --arch encdec and --arch bert, not of --arch gpt");
    snprintf(args, sizeof args, "train --out '%s/F' --data x --lr-decay-steps 9", g_dir);
    expect_error(args, 2, "--lr-decay-steps is an option of --arch gpt and --arch bert");
    snprintf(args, sizeof args, "train --arch bert --out '%s/F' --data x --max-tokens 9", g_dir);
    expect_error(args, 2, "unknown option '--max-tokens' for --arch bert");
    for (int f = 0; f < 3; f++) {
        snprintf(args, sizeof args, "train --arch %s --out '%s/F' --resume --clip 2", arch[f], g_dir);
        expect_error(args, 2, "--clip cannot be changed");
    }
}

/* ---- tokens/s: the same for every family ---- */

typedef struct {
    double tokens, train_seconds; /* the last step line's */
    int steps, evals;
} metrics_sum;

/* Reads a --metrics file, checking at every step line that train_seconds leaves out the
 * validations before it: train_seconds <= seconds - their eval_seconds (each value is printed
 * with 6 decimals: 1e-5 of slack per line). */
static metrics_sum check_metrics(const char *path) {
    metrics_sum m = {0, 0, 0, 0};
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: cannot open", path);
    char line[1024];
    double eval_sum = 0, prev_tokens = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        if (!j) fail_msg("%s: not JSON: %s", path, line);
        if (json_object_get(j, "val_loss")) {
            assert_non_null(json_object_get(j, "eval_seconds"));
            eval_sum += json_number_value(json_object_get(j, "eval_seconds"));
            m.evals++;
        } else {
            double tok = json_number_value(json_object_get(j, "tokens"));
            double ts = json_number_value(json_object_get(j, "train_seconds"));
            double sec = json_number_value(json_object_get(j, "seconds"));
            m.steps++;
            assert_true(tok > prev_tokens); /* cumulative */
            prev_tokens = tok;
            if (!(ts > 0 && ts <= sec - eval_sum + 1e-5 * (m.steps + m.evals)))
                fail_msg("%s step %d: train_seconds %.6f, seconds %.6f, validations so far %.6f s: "
                         "training time must leave validation out",
                         path, m.steps, ts, sec, eval_sum);
            m.tokens = tok, m.train_seconds = ts;
        }
        json_decref(j);
    }
    fclose(f);
    return m;
}

/* The summary line's "tokens/s=R (N tokens in S s of training steps)" against the metrics, and
 * N against the family's definition (expect). */
static void check_summary(const char *what, const char *text, const char *metrics, double expect,
                          int steps) {
    const char *p = strstr(text, "tokens/s=");
    if (!p) fail_msg("%s: no tokens/s= in\n%s", what, text);
    double rate = 0, n = 0, s = 0;
    if (sscanf(p, "tokens/s=%lf (%lf tokens in %lf s of training steps)", &rate, &n, &s) != 3)
        fail_msg("%s: summary not as expected: %.200s", what, p);
    metrics_sum m = check_metrics(metrics);
    printf("  %-10s %d steps, %d validations: %.0f tokens (expected %.0f), %.9f s in training "
           "steps, tokens/s=%.0f (= %.1f / s)\n",
           what, m.steps, m.evals, n, expect, m.train_seconds, rate, m.tokens / m.train_seconds);
    assert_int_equal(m.steps, steps);
    assert_int_equal(m.evals, steps); /* after every step, the last one being the final */
    assert_true(n == expect && m.tokens == expect);
    /* rate is N over the training-step time: printed %.0f (0.5) from the train_seconds the
     * metrics print with 9 decimals (relative error <= 5e-10 / train_seconds) */
    assert_true(fabs(rate - m.tokens / m.train_seconds) <= 0.5 + rate * 1e-9 / m.train_seconds);
}

/* The checkpoint's "extra": the shared options under their one name each. */
static void check_extra(const char *state_path, double clip, double beta2, double eps) {
    json_error_t e;
    json_t *j = json_load_file(state_path, 0, &e);
    if (!j) fail_msg("%s: %s", state_path, e.text);
    json_t *x = json_object_get(j, "extra");
    assert_true(json_is_string(json_object_get(x, "seed")));
    assert_true(json_number_value(json_object_get(x, "grad_clip")) == clip);
    assert_true(json_number_value(json_object_get(x, "beta1")) == 0.9);
    assert_true(json_number_value(json_object_get(x, "beta2")) == beta2);
    assert_true(json_number_value(json_object_get(x, "adam_eps")) == eps);
    assert_non_null(json_object_get(x, "warmup_steps"));
    assert_null(json_object_get(x, "clip")); /* the old names are only read */
    assert_null(json_object_get(x, "warmup"));
    json_decref(j);
}

static void test_tokens_per_second(void **state) {
    (void)state;
    static char args[32768];
    char metrics[4400], dir[4400];
    /* the translator: tokens = non-pad source + target tokens of the loader's batches */
    snprintf(dir, sizeof dir, "%s/T_enc", g_dir);
    snprintf(metrics, sizeof metrics, "%s/T_enc.jsonl", g_dir);
    snprintf(args, sizeof args,
             "train --data '%s' --config '%s' --vocab-size 400 --valid-size 50 --test-size 50 "
             "--max-tokens 400 --warmup 5 --eval-every 1 --bleu-sentences 3 --log-every 1 "
             "--max-steps 5 --metrics '%s' --out '%s'",
             g_data, g_cfg, metrics, dir);
    int rc = run(args, buf, sizeof buf);
    if (rc) fail_msg("%s -> %d\n%s", args, rc, buf);
    {
        attn_data_corpus c;
        assert_int_equal(attn_data_load_tsv(g_data, NULL, &c), 0);
        attn_data_split_options so = attn_data_split_default_options();
        so.seed = 1, so.min_valid_pairs = 50, so.min_test_pairs = 50;
        attn_data_split sp;
        assert_int_equal(attn_data_split_make(&c, &so, &sp), 0);
        char p[4500];
        snprintf(p, sizeof p, "%s/tokenizer.json", dir);
        attn_tok *tok;
        assert_int_equal(attn_tok_load(p, &tok), 0);
        attn_data_encode_options eo = attn_data_encode_default_options();
        eo.max_len = 48; /* tiny.json */
        attn_data_dataset *ds;
        assert_int_equal(attn_data_encode(&c, sp.train, sp.n_train, tok, &eo, &ds), 0);
        attn_data_batch_options bo = attn_data_batch_default_options();
        bo.max_tokens = 400, bo.seed = 1;
        attn_data_loader *ld;
        assert_int_equal(attn_data_loader_new(ds, &bo, &ld), 0);
        attn_data_batch b;
        memset(&b, 0, sizeof b);
        double expect = 0;
        for (int k = 0; k < 5; k++) {
            assert_int_equal(attn_data_loader_next(ld, &b), 0);
            for (int i = 0; i < b.B; i++) expect += b.src_len[i] + b.tgt_len[i];
        }
        check_summary("translator", buf, metrics, expect, 5);
        attn_data_batch_free(&b);
        attn_data_loader_free(ld);
        attn_data_dataset_free(ds);
        attn_tok_free(tok);
        attn_data_split_free(&sp);
        attn_data_corpus_free(&c);
        snprintf(p, sizeof p, "%s/training_state.json", dir);
        check_extra(p, 1.0, 0.98, 1e-9);
    }

    /* GPT: B x n_positions x grad-accum per step */
    char text[4400], gcfg[4400];
    snprintf(text, sizeof text, "%s/shakespeare.txt", g_dir);
    snprintf(gcfg, sizeof gcfg, "%s/gpt.json", g_dir);
    snprintf(args, sizeof args, "head -c 20000 ../shared/data/tinyshakespeare/input.txt > '%s'",
             text);
    assert_int_equal(system(args), 0);
    const char *gc = "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 16, \"n_positions\": 16}";
    tu_write_all(gcfg, gc, strlen(gc));
    snprintf(dir, sizeof dir, "%s/T_gpt", g_dir);
    snprintf(metrics, sizeof metrics, "%s/T_gpt.jsonl", g_dir);
    snprintf(args, sizeof args,
             "train --arch gpt --data '%s' --config '%s' --batch 3 --grad-accum 2 --eval-iters 2 "
             "--eval-every 1 --log-every 1 --max-steps 5 --metrics '%s' --out '%s'",
             text, gcfg, metrics, dir);
    rc = run(args, buf, sizeof buf);
    if (rc) fail_msg("%s -> %d\n%s", args, rc, buf);
    check_summary("gpt", buf, metrics, 5.0 * 3 * 16 * 2, 5);
    {
        char p[4500];
        snprintf(p, sizeof p, "%s/training_state.json", dir);
        check_extra(p, 1.0, 0.99, 1e-8);
    }

    /* BERT: the non-pad tokens of the masked batches */
    const char *minilm = "models/all-MiniLM-L6-v2";
    char p[4500];
    snprintf(p, sizeof p, "%s/tokenizer.json", minilm);
    if (access(p, R_OK) != 0) {
        printf("  %s missing: the BERT run is skipped\n", p);
        return;
    }
    char bcfg[4400];
    snprintf(bcfg, sizeof bcfg, "%s/bert.json", g_dir);
    const char *bc = "{\"model_type\": \"bert\", \"hidden_size\": 32, \"num_hidden_layers\": 1, "
                     "\"num_attention_heads\": 2, \"intermediate_size\": 64, "
                     "\"max_position_embeddings\": 32, \"attention_probs_dropout_prob\": 0.0}";
    tu_write_all(bcfg, bc, strlen(bc));
    snprintf(dir, sizeof dir, "%s/T_bert", g_dir);
    snprintf(metrics, sizeof metrics, "%s/T_bert.jsonl", g_dir);
    snprintf(args, sizeof args,
             "train --arch bert --data '%s' --column 1 --tokenizer %s --config '%s' --max-len 24 "
             "--batch 8 --valid-size 16 --eval-every 1 --log-every 1 --max-steps 5 --metrics '%s' "
             "--out '%s'",
             g_data, minilm, bcfg, metrics, dir);
    rc = run(args, buf, sizeof buf);
    if (rc) fail_msg("%s -> %d\n%s", args, rc, buf);
    {
        attn_tok *tok;
        assert_int_equal(attn_tok_load(minilm, &tok), 0);
        attn_data_text_options to = {.column = 1, .max_len = 24};
        attn_data_sentences se;
        assert_int_equal(attn_data_load_sentences(g_data, tok, &to, &se), 0);
        attn_data_mlm_options mo = attn_data_mlm_default_options();
        mo.seed = 1, mo.batch = 8, mo.valid_size = 16;
        attn_data_mlm *m;
        assert_int_equal(attn_data_mlm_new(&se, tok, &mo, &m), 0);
        attn_data_mlm_batch b;
        memset(&b, 0, sizeof b);
        double expect = 0;
        for (size_t k = 0; k < 5; k++) {
            assert_int_equal(attn_data_mlm_train_batch(m, 0, k, &b), 0);
            expect += (double)b.n_tokens;
        }
        check_summary("bert", buf, metrics, expect, 5);
        attn_data_mlm_batch_free(&b);
        attn_data_mlm_free(m);
        attn_data_sentences_free(&se);
        attn_tok_free(tok);
        snprintf(p, sizeof p, "%s/checkpoint/training_state.json", dir);
        check_extra(p, 1.0, 0.999, 1e-8);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_is_exact),
        cmocka_unit_test(test_sigint_saves),
        cmocka_unit_test(test_time_budget),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_shared_flags),
        cmocka_unit_test(test_tokens_per_second),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

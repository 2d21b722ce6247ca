/* test_train_cli.c — `attn train` and `attn translate` end to end on a tiny model and a slice of
 * the Tatoeba pairs: an interrupted-and-resumed run ends bit-identical to an uninterrupted one
 * (same thread count), Ctrl-C saves a checkpoint and exits 0, the time budget stops and saves,
 * translate reads the result, and bad invocations give one-line errors. */
#include "tu.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_is_exact),
        cmocka_unit_test(test_sigint_saves),
        cmocka_unit_test(test_time_budget),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

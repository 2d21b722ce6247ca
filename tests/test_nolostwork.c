/* test_nolostwork.c — training never loses work (`attn train`, a tiny model on a slice of the
 * Tatoeba pairs):
 *
 *   kills     `attn train --resume --save-every 1` is killed with SIGKILL at random moments, at
 *             least 20 times; the save pauses after each durable step (ATTN_CKPT_TEST_PAUSE_US,
 *             src/train/ckpt.c) so many kills land inside saves, and every other run takes the
 *             rename fallback (ATTN_CKPT_TEST_NO_EXCHANGE). After each kill the latest complete
 *             checkpoint loads (attn_ckpt_load, checked here directly), it is at most one step
 *             behind the last step the run reported, and the next run resumes it.
 *   exact     the killed-and-resumed run, finished, ends with model.safetensors and
 *             optimizer.safetensors byte-identical to an uninterrupted run's (same thread count),
 *             and every loss line any segment printed equals the uninterrupted run's.
 *   full disk a save into a directory on a small tmpfs (or, where mounting is not allowed, under
 *             RLIMIT_FSIZE) fails with one clear line; the previous checkpoint is intact, loads
 *             and resumes, and no temporary directory is left. */
#include "tu.h"

#include "attn_models.h"
#include "attn_train.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

static char g_attn[1024], g_data[700], g_cfg[700];
static char g_mnt[700];
static bool g_mounted;

#define MAX_STEPS 400 /* longest run the loss table holds */
#define N_KILLS 24

static int setup(void **state) {
    (void)state;
    const char *b = getenv("ATTN_BUILD");
    snprintf(g_attn, sizeof g_attn, "%s/attn", b && *b ? b : "build");
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "nolostwork")) return -1;
    snprintf(g_data, sizeof g_data, "%s/pairs.tsv", tu_dir);
    snprintf(g_cfg, sizeof g_cfg, "%s/tiny.json", tu_dir);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "head -n 400 ../shared/data/tatoeba-eng-cmn/cmn.txt > '%s'", g_data);
    if (system(cmd) != 0) return -1;
    FILE *f = fopen(g_cfg, "w");
    if (!f) return -1;
    fputs("{\"d_model\": 16, \"n_head\": 2, \"d_ff\": 32, \"n_enc_layers\": 1, \"n_dec_layers\": 1, "
          "\"max_len\": 24, \"dropout\": 0.1, \"share_embeddings\": true, \"tie_output\": true, "
          "\"pre_ln\": true}\n",
          f);
    fclose(f);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (g_mounted) umount2(g_mnt, MNT_DETACH);
    if (!getenv("ATTN_KEEP_TMP")) tu_rm_tree(tu_dir);
    return 0;
}

/* ---- running attn ---- */

typedef struct {
    pid_t pid;
    FILE *out; /* its stdout (and stderr, unless err_path) */
} child;

/* Start attn with the given arguments (NULL-terminated), extra environment (NAME=VALUE, NULL-
 * terminated or NULL), stderr to err_path (NULL: with stdout), and a file size limit (0: none). */
static child spawn(const char *const *args, const char *const *env, const char *err_path,
                   rlim_t fsize) {
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    child c;
    c.pid = fork();
    assert_true(c.pid >= 0);
    if (c.pid == 0) {
        dup2(fd[1], 1);
        if (err_path) {
            int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (e >= 0) dup2(e, 2);
        } else {
            dup2(fd[1], 2);
        }
        close(fd[0]);
        for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
        if (fsize) {
            signal(SIGXFSZ, SIG_IGN); /* writes past the limit fail with EFBIG instead */
            struct rlimit rl = {fsize, fsize};
            setrlimit(RLIMIT_FSIZE, &rl);
        }
        char *argv[64];
        int n = 0;
        argv[n++] = g_attn;
        argv[n++] = (char *)"--threads";
        argv[n++] = (char *)"2";
        for (int i = 0; args[i] && n < 63; i++) argv[n++] = (char *)args[i];
        argv[n] = NULL;
        execv(g_attn, argv);
        _exit(127);
    }
    close(fd[1]);
    c.out = fdopen(fd[0], "r");
    assert_non_null(c.out);
    return c;
}

/* Read the child's output to the end into buf; wait; return the exit status (-signal). */
static int finish(child *c, char *buf, size_t cap, size_t used) {
    size_t n;
    while (used + 1 < cap && (n = fread(buf + used, 1, cap - 1 - used, c->out)) > 0) used += n;
    buf[used] = '\0';
    char sink[4096];
    while (fread(sink, 1, sizeof sink, c->out) > 0) {
    }
    fclose(c->out);
    int st;
    assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1000;
}

static int run_to_end(const char *const *args, char *buf, size_t cap) {
    child c = spawn(args, NULL, NULL, 0);
    return finish(&c, buf, cap, 0);
}

/* "step N | ... | loss X" lines: losses[N] = X as printed (the 8 characters). */
static char g_loss_a[MAX_STEPS][9];

static int parse_steps(const char *text, char losses[][9], int *last) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, "step ")) != NULL; p++) {
        if (p != text && p[-1] != '\n') continue;
        long step = strtol(p + 5, NULL, 10);
        const char *l = strstr(p, "| loss ");
        const char *eol = strchr(p, '\n');
        if (!l || !eol || l > eol || step < 0 || step >= MAX_STEPS) continue;
        if (losses) snprintf(losses[step], 9, "%.8s", l + 7);
        if (last && step > *last) *last = (int)step;
        n++;
    }
    return n;
}

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read_all(a, &na), *y = tu_read_all(b, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

/* ---- loading a checkpoint directly ---- */

/* Load DIR's checkpoint into a model built from DIR/config.json; its step, or -1 with the
 * message printed. */
static long load_step(const char *dir) {
    /* as `attn train --resume` does: this also brings back DIR from DIR.prev after a crash in
     * the middle of the fallback swap */
    if (!attn_ckpt_exists(dir)) {
        printf("  %s holds no checkpoint\n", dir);
        return -1;
    }
    char p[1024];
    snprintf(p, sizeof p, "%s/config.json", dir);
    attn_encdec_config cfg;
    attn_encdec_model *m = NULL;
    attn_optim *o = NULL;
    attn_ckpt_tensor *t = NULL;
    long step = -1;
    attn_status s = attn_encdec_config_load(p, &cfg);
    if (!s) s = attn_encdec_model_init(&cfg, 0, &m);
    if (!s) {
        t = calloc((size_t)m->n_tensors, sizeof *t);
        for (int i = 0; i < m->n_tensors; i++)
            t[i] = (attn_ckpt_tensor){m->tensors[i].name, m->tensors[i].ndim,
                                      {m->tensors[i].shape[0], m->tensors[i].shape[1]},
                                      m->params + m->tensors[i].offset};
        attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
        s = attn_optim_create(&op, m->num_params, NULL, 0, &o);
    }
    attn_ckpt_state st = attn_ckpt_state_init();
    if (!s) s = attn_ckpt_load(dir, t, m->n_tensors, o, &st);
    if (!s) {
        step = (long)st.step;
        if (st.extra) json_decref(st.extra);
    } else {
        printf("  checkpoint %s does not load: %s\n", dir, attn_last_error());
    }
    free(t);
    attn_optim_destroy(o);
    attn_encdec_model_free(m);
    return step;
}

/* Entries of dir's parent named BASE.tmp-* and BASE.prev. */
static void leftovers(const char *dir, int *tmp, int *prev) {
    *tmp = *prev = 0;
    const char *base = strrchr(dir, '/') + 1;
    char parent[1024];
    snprintf(parent, sizeof parent, "%.*s", (int)(base - 1 - dir), dir);
    DIR *d = opendir(parent);
    if (!d) return;
    struct dirent *e;
    size_t lb = strlen(base);
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, lb)) continue;
        if (!strncmp(e->d_name + lb, ".tmp-", 5)) (*tmp)++;
        if (!strcmp(e->d_name + lb, ".prev")) (*prev)++;
    }
    closedir(d);
}

#define COMMON                                                                                     \
    "--vocab-size", "300", "--valid-size", "10", "--test-size", "10", "--max-tokens", "200",        \
        "--warmup", "5", "--eval-every", "1000000", "--bleu-sentences", "0", "--log-every", "1"

static char g_buf[1 << 20];

/* ---- SIGKILL at random moments, then exact resume ---- */

static void test_kills_and_exact_resume(void **state) {
    (void)state;
    char a_dir[800], b_dir[800], ksteps[16];
    snprintf(a_dir, sizeof a_dir, "%s/A", tu_dir);
    snprintf(b_dir, sizeof b_dir, "%s/B", tu_dir);
    double t0 = tu_now();

    /* the first checkpoint of B, then runs killed at random moments (their --max-steps is out
     * of reach: it is not part of the training state, only where a run stops) */
    const char *b0[] = {"train", "--data", g_data, "--config", g_cfg, "--out", b_dir,
                        COMMON, "--max-steps", "1", "--save-every", "1", NULL};
    int rc = run_to_end(b0, g_buf, sizeof g_buf);
    if (rc) fail_msg("first run of B failed (%d): %s", rc, g_buf);

    tu_rng rng = {0x2545F4914F6CDD1Dull};
    int kills = 0, in_save = 0, with_prev = 0, last_reported = 1;
    bool simulated = false;
    long max_resumed = 1;
    char err_path[900], pause[64];
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", tu_dir);
    /* (step, loss) as each killed segment printed them: checked against the uninterrupted run */
    static char seen[MAX_STEPS][9], losses[MAX_STEPS][9];
    memset(seen, 0, sizeof seen);
    while (kills < N_KILLS) {
        snprintf(pause, sizeof pause, "ATTN_CKPT_TEST_PAUSE_US=%d",
                 (int)tu_uniform(&rng, 200, 4000));
        const char *env[] = {pause, kills % 2 ? "ATTN_CKPT_TEST_NO_EXCHANGE=1" : NULL, NULL};
        const char *args[] = {"train", "--out", b_dir, "--resume", "--max-steps", "1000000",
                              "--save-every", "1", "--log-every", "1", "--eval-every", "1000000",
                              NULL};
        child c = spawn(args, env, err_path, 0);
        /* wait for "resumed DIR at step S", then let it run a random while */
        char line[4096];
        size_t used = 0;
        g_buf[0] = '\0';
        long resumed = -1;
        while (fgets(line, sizeof line, c.out)) {
            used += (size_t)snprintf(g_buf + used, sizeof g_buf - used, "%s", line);
            const char *r = strstr(line, " at step ");
            if (!strncmp(line, "resumed ", 8) && r) {
                resumed = strtol(r + 9, NULL, 10);
                break;
            }
        }
        if (resumed < 0) {
            finish(&c, g_buf, sizeof g_buf, used);
            size_t en;
            char *err = tu_read_all(err_path, &en);
            fail_msg("run %d did not resume: %s %s", kills + 1, g_buf, err ? err : "");
        }
        /* no work lost: the checkpoint is at most one step behind what the killed run reported */
        if (resumed < last_reported - 1 || resumed < max_resumed)
            fail_msg("run %d resumed at step %ld, but the previous run had reported step %d (and "
                     "a checkpoint at %ld was seen)",
                     kills + 1, resumed, last_reported, max_resumed);
        max_resumed = resumed;
        struct timespec ts = {0, (long)tu_uniform(&rng, 10, 120) * 1000000L};
        nanosleep(&ts, NULL);
        kill(c.pid, SIGKILL);
        rc = finish(&c, g_buf, sizeof g_buf, used);
        /* LLVM's OpenMP runtime (clang builds) registers each process in /dev/shm and removes
         * the file at exit, which a SIGKILL skips */
        char kmp[128];
        snprintf(kmp, sizeof kmp, "/dev/shm/__KMP_REGISTERED_LIB_%d_0", (int)c.pid);
        unlink(kmp);
        if (rc != -SIGKILL) fail_msg("run %d ended by itself (%d): %s", kills + 1, rc, g_buf);
        int last = (int)resumed;
        memset(losses, 0, sizeof losses);
        parse_steps(g_buf, losses, &last);
        if (last >= MAX_STEPS - 20) fail_msg("the killed runs got too far (step %d)", last);
        for (int st = (int)resumed + 1; st <= last; st++) {
            if (seen[st][0] && strcmp(seen[st], losses[st]))
                fail_msg("step %d: loss %s, and %s in an earlier segment", st, losses[st], seen[st]);
            memcpy(seen[st], losses[st], 9);
        }
        kills++;
        last_reported = last;
        int tmp, prev;
        leftovers(b_dir, &tmp, &prev);
        in_save += tmp > 0 || prev > 0;
        with_prev += prev > 0;
        if (!simulated && kills >= N_KILLS / 2 && !prev) {
            /* the narrowest window, made certain: a crash between the fallback swap's two
             * renames leaves DIR.prev and no DIR; the next `attn train --resume` must recover */
            char pv[1024];
            snprintf(pv, sizeof pv, "%s.prev", b_dir);
            assert_int_equal(rename(b_dir, pv), 0);
            printf("  kill %2d: DIR renamed to DIR.prev, as a crash between the fallback's "
                   "renames leaves it\n",
                   kills);
            simulated = true;
            continue;
        }
        long step = load_step(b_dir);
        if (step < 0) fail_msg("after kill %d the checkpoint does not load", kills);
        if (step < last - 1)
            fail_msg("after kill %d the checkpoint is at step %ld, the run had reported %d", kills,
                     step, last);
        if (!tu_quiet())
            printf("  kill %2d: resumed at %3ld, killed after step %3d, checkpoint %3ld%s%s\n",
                   kills, resumed, last, step, tmp ? ", mid-save (tmp dir left)" : "",
                   prev ? ", mid-swap (DIR.prev left)" : "");
    }
    printf("  %d SIGKILLs: %d left a save's temporary directory or DIR.prev (%d DIR.prev), every "
           "checkpoint loaded and resumed with no step lost; %.1f s\n",
           kills, in_save, with_prev, tu_now() - t0);
    assert_true(kills >= 20);
    assert_true(simulated);
    /* kills inside saves did happen (with saves every step and pauses inside, most kills do) */
    assert_true(in_save >= 3);

    /* the uninterrupted run, a few steps past the kills */
    const int K = last_reported + 8;
    snprintf(ksteps, sizeof ksteps, "%d", K);
    const char *a_args[] = {"train", "--data", g_data, "--config", g_cfg, "--out", a_dir,
                            COMMON, "--max-steps", ksteps, "--save-every", "1000000", NULL};
    rc = run_to_end(a_args, g_buf, sizeof g_buf);
    if (rc) fail_msg("uninterrupted run failed (%d): %s", rc, g_buf);
    int last_a = 0;
    assert_int_equal(parse_steps(g_buf, g_loss_a, &last_a), K);
    assert_int_equal(last_a, K);

    /* finish B without interruption: identical to A, bit for bit */
    const char *fin[] = {"train", "--out", b_dir, "--resume", "--max-steps", ksteps,
                         "--save-every", "1000000", "--log-every", "1", "--eval-every", "1000000",
                         NULL};
    rc = run_to_end(fin, g_buf, sizeof g_buf);
    if (rc) fail_msg("final resume failed (%d): %s", rc, g_buf);
    int last = 0, mismatched = 0, compared = 0;
    parse_steps(g_buf, seen, &last);
    assert_int_equal(last, K);
    for (int st = 2; st <= K; st++) {
        if (!seen[st][0]) continue;
        compared++;
        if (strcmp(seen[st], g_loss_a[st]) && mismatched++ < 5)
            printf("  step %d: loss %s after kills and resumes, %s uninterrupted\n", st, seen[st],
                   g_loss_a[st]);
    }
    printf("  steps 2..%d: %d loss lines of the killed and resumed segments compared, %d differ "
           "from the uninterrupted run's\n",
           K, compared, mismatched);
    assert_int_equal(mismatched, 0);
    assert_true(compared >= K - 2);
    const char *files[] = {"model.safetensors", "optimizer.safetensors"};
    for (int i = 0; i < 2; i++) {
        char pa[1024], pb[1024];
        snprintf(pa, sizeof pa, "%s/%s", a_dir, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b_dir, files[i]);
        bool same = same_file(pa, pb);
        printf("  %s at step %d after %d kills: %s the uninterrupted run's\n", files[i], K, kills,
               same ? "byte-identical to" : "DIFFERENT from");
        assert_true(same);
    }
    int tmp, prev;
    leftovers(b_dir, &tmp, &prev);
    printf("  leftovers after the last save: %d temporary, %d DIR.prev; %.1f s in all\n", tmp, prev,
           tu_now() - t0);
    assert_int_equal(tmp + prev, 0);
}

/* ---- a full disk during a save ---- */

static size_t file_size(const char *dir, const char *name) {
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) == 0 ? (size_t)st.st_size : 0;
}

static size_t dir_pages(const char *dir) {
    DIR *d = opendir(dir);
    size_t pages = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        pages += (file_size(dir, e->d_name) + 4095) / 4096 + 1;
    }
    if (d) closedir(d);
    return pages;
}

static void test_full_disk(void **state) {
    (void)state;
    char src[800], ck[800];
    snprintf(src, sizeof src, "%s/F", tu_dir);
    const char *first[] = {"train", "--data", g_data, "--config", g_cfg, "--out", src,
                           COMMON, "--max-steps", "2", "--save-every", "1", NULL};
    int rc = run_to_end(first, g_buf, sizeof g_buf);
    if (rc) fail_msg("first run failed (%d): %s", rc, g_buf);
    size_t model = file_size(src, "model.safetensors");
    assert_true(model > 0);

    /* a tmpfs with room for the checkpoint and about one more model file, not the optimizer */
    snprintf(g_mnt, sizeof g_mnt, "%s/mnt", tu_dir);
    mkdir(g_mnt, 0755);
    size_t kb = (dir_pages(src) * 4096 + model + 8192) / 1024;
    char opts[64];
    snprintf(opts, sizeof opts, "size=%zuk,mode=0755", kb);
    rlim_t fsize = 0;
    /* ATTN_TEST_NO_MOUNT=1 forces the fallback (to test it where mounting works) */
    const char *nm = getenv("ATTN_TEST_NO_MOUNT");
    errno = EPERM;
    if (!(nm && *nm && strcmp(nm, "0")) && mount("tmpfs", g_mnt, "tmpfs", 0, opts) == 0) {
        g_mounted = true;
        snprintf(ck, sizeof ck, "%s/ck", g_mnt);
        printf("  full disk: a %zu KiB tmpfs (checkpoint %zu pages, model %zu bytes)\n", kb,
               dir_pages(src), model);
    } else {
        /* no mount here (not root, or no CAP_SYS_ADMIN): a file size limit below the model size
         * makes the first write of the save fail the same way (EFBIG instead of ENOSPC) */
        printf("  full disk: cannot mount a tmpfs (%s); RLIMIT_FSIZE of %zu bytes instead\n",
               strerror(errno), model / 2);
        snprintf(ck, sizeof ck, "%s/ck", tu_dir);
        fsize = (rlim_t)(model / 2);
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", src, ck);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(load_step(ck), 2);

    char err_path[900];
    snprintf(err_path, sizeof err_path, "%s/full-stderr.txt", tu_dir);
    const char *args[] = {"train", "--out", ck, "--resume", "--max-steps", "5", "--save-every",
                          "1", "--eval-every", "1000000", NULL};
    child c = spawn(args, NULL, err_path, fsize);
    rc = finish(&c, g_buf, sizeof g_buf, 0);
    size_t en;
    char *err = tu_read_all(err_path, &en);
    assert_non_null(err);
    printf("  save on a full disk: exit %d, stderr: %s", rc, err ? err : "(none)\n");
    assert_int_equal(rc, 1);
    /* one line, naming the file and the system's reason */
    assert_true(en > 0 && err[en - 1] == '\n' && memchr(err, '\n', en - 1) == NULL);
    assert_non_null(strstr(err, "attn: error: "));
    assert_non_null(strstr(err, fsize ? "File too large" : "No space left on device"));
    assert_non_null(strstr(err, "ck"));
    assert_null(strstr(err, "Sanitizer"));
    free(err);
    /* the previous checkpoint is intact (sizes and CRCs checked by the load), nothing left over */
    long step = load_step(ck);
    printf("  after the failed save: the checkpoint loads at step %ld\n", step);
    assert_int_equal(step, 2);
    int tmp, prev;
    leftovers(ck, &tmp, &prev);
    assert_int_equal(tmp + prev, 0);
    /* and training resumes from it once there is room */
    char back[800];
    snprintf(back, sizeof back, "%s/F2", tu_dir);
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", ck, back);
    assert_int_equal(system(cmd), 0);
    if (g_mounted) {
        assert_int_equal(umount2(g_mnt, MNT_DETACH), 0);
        g_mounted = false;
    }
    const char *res[] = {"train", "--out", back, "--resume", "--max-steps", "4", "--save-every", "1",
                         "--eval-every", "1000000", NULL};
    rc = run_to_end(res, g_buf, sizeof g_buf);
    if (rc) fail_msg("resume after the full disk failed (%d): %s", rc, g_buf);
    assert_non_null(strstr(g_buf, "resumed"));
    assert_int_equal(load_step(back), 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kills_and_exact_resume),
        cmocka_unit_test(test_full_disk),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

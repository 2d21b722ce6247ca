/* test_train_mpi.c — `mpirun -np N attn train` (issue 19): data-parallel training across
 * processes, each rank its slice of every global batch, the gradients summed with MPI.
 *
 *   equality   for every family (the encoder–decoder translator, --arch gpt with dropout and
 *              micro-batches, --arch llama, --arch bert MLM) on tiny models, 20 steps: 2 ranks
 *              (oversubscribed, 1 thread each) against one process with 1 thread and the same
 *              global batch. The losses of every step agree within a relative 1e-5 and the final
 *              weights within 1e-5 absolute (measured here: <= 1.2e-7 for the losses and
 *              <= 1.4e-7 for the weights; both are printed). The sums run in another order
 *              (each rank's rows, then MPI's sum), so bit equality is not expected. Left out of
 *              the weight check: the attention key biases (the translator's *.b_k, BERT's
 *              *.key.bias), whose exact gradient is zero (softmax ignores a shift shared by every
 *              key): their gradients are rounding noise, which AdamW's m / sqrt(v) scales up to
 *              steps of the size of the learning rate, so they differ by ~1e-3 between ANY two
 *              summation orders — one process with 1 and with 2 threads too.
 *   resume     a checkpoint written by 2 ranks at step 10, resumed to step 20 by 1 process and
 *              by 3 ranks: the same trajectory and final weights as the uninterrupted
 *              single-process run, within the same tolerances (the checkpoint holds the global
 *              state; the data order is the global one).
 *   ZeRO-1     --zero1 (each rank updates its share of the parameters with its share of AdamW's
 *              state, then all-gathers them; the state is gathered for each checkpoint) gives
 *              bit for bit the checkpoint of the same ranks without it, for 2 ranks and for a
 *              resume by 3 (uneven shares).
 *   failures   a rank that stops answering (here: it was given fewer steps, so it leaves while
 *              rank 0 waits in the next collective) ends the job after --comm-timeout with one
 *              "attn: error:" line naming rank 1, and the last checkpoint loads; a rank that
 *              fails on its own (a missing file) ends the job with one line naming itself (and
 *              at most one more from rank 0 about its collective, when it notices first); a
 *              rank that would start from another state than rank 0's (another --seed here:
 *              another data file or configuration on its host alike) stops the job at once.
 *   overlap    with small buckets (ATTN_GRAD_BUCKET: 256 floats, BERT 16384) every family's
 *              2-rank run posts some of its gradient buckets during the backward (the summary's
 *              "mpi:" line), and the equality above holds for it.
 * Skipped (a software skip: CI installs Open MPI) without mpirun or when attn was built without
 * MPI; in a sanitizer build (make san) the translator, Llama and BERT matrices are skipped (an
 * environment skip: ~3 s per process there), --arch gpt, ZeRO-1 and the failures run. (Under valgrind only this program is traced: mpirun's processes run natively.) */
#include "tu.h"

#include "attn_dist.h"
#include "attn_io.h"

#include <jansson.h>
#include <math.h>
#include <unistd.h>

enum { STEPS = 20, HALF = 10 };

static char g_attn[4096];      /* absolute path of attn */
static char g_mpirun[256];     /* "mpirun --oversubscribe -np" */
static const char *g_skip;     /* why the tests skip, or NULL */
static bool g_san;             /* a sanitizer build (make san): the lighter matrix */
static char buf[1 << 20];

static const double LOSS_REL = 1e-5, WEIGHT_ABS = 1e-5;

static int setup(void **state) {
    (void)state;
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "train_mpi")) return -1;
    char *rp = realpath(tu_attn_bin(), NULL);
    snprintf(g_attn, sizeof g_attn, "%s", rp ? rp : tu_attn_bin());
    free(rp);
    g_san = strstr(g_attn, "-san/") != NULL;
    if (system("command -v mpirun > /dev/null 2>&1") != 0)
        g_skip = "mpirun not found (Open MPI: tools/install_deps.sh installs openmpi-bin)";
    else if (!attn_dist_compiled())
        g_skip = "attn was built without MPI (libopenmpi-dev missing at build time, or ATTN_MPI=0)";
    if (g_skip) return 0;
    /* one thread per rank; mpirun as root (containers, CI) needs these */
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    /* containers often forbid the cross-process memory attach of Open MPI's shared-memory
     * transport: plain copies */
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    /* the sanitizer build (make san): what Open MPI never frees is not ours to report
     * (tests/lsan-mpi.supp; its components stay loaded and the slow unwinder names them) */
    setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1);
    char *supp = realpath("tests/lsan-mpi.supp", NULL);
    if (supp) {
        char v[8192];
        const char *lo = getenv("LSAN_OPTIONS"), *ao = getenv("ASAN_OPTIONS");
        snprintf(v, sizeof v, "%s%ssuppressions=%s:print_suppressions=0:fast_unwind_on_malloc=0",
                 lo ? lo : "", lo && *lo ? ":" : "", supp);
        setenv("LSAN_OPTIONS", v, 1);
        snprintf(v, sizeof v, "%s%sfast_unwind_on_malloc=0", ao ? ao : "", ao && *ao ? ":" : "");
        setenv("ASAN_OPTIONS", v, 1);
        free(supp);
    }
    /* small buckets (each family's ATTN_GRAD_BUCKET): the tiny models' gradients go out in
     * several, some of them while the backward still runs (the overlap) */
    snprintf(g_mpirun, sizeof g_mpirun, "mpirun --oversubscribe -np");
    char cmd[9000];
    snprintf(cmd, sizeof cmd,
             "head -n 3000 ../shared/data/tatoeba-eng-cmn/cmn.txt > '%s' && "
             "head -c 20000 ../shared/data/tinyshakespeare/input.txt > '%s'",
             tu_tmp("pairs.tsv"), tu_tmp("text.txt"));
    if (system(cmd) != 0) return -1;
    const char *enc = "{\"d_model\": 32, \"n_head\": 2, \"d_ff\": 64, \"n_enc_layers\": 1, "
                      "\"n_dec_layers\": 1, \"max_len\": 48, \"dropout\": 0.1, "
                      "\"share_embeddings\": true, \"tie_output\": true, \"pre_ln\": false}";
    const char *gpt = "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 16, \"n_positions\": 16}";
    const char *llama = "{\"num_hidden_layers\": 1, \"num_attention_heads\": 4, "
                        "\"num_key_value_heads\": 2, \"hidden_size\": 16, "
                        "\"intermediate_size\": 32, \"max_position_embeddings\": 16}";
    const char *bert = "{\"model_type\": \"bert\", \"hidden_size\": 32, \"num_hidden_layers\": 1, "
                       "\"num_attention_heads\": 2, \"intermediate_size\": 64, "
                       "\"max_position_embeddings\": 32, \"attention_probs_dropout_prob\": 0.0}";
    tu_write_all(tu_tmp("enc.json"), enc, strlen(enc));
    tu_write_all(tu_tmp("gpt.json"), gpt, strlen(gpt));
    tu_write_all(tu_tmp("llama.json"), llama, strlen(llama));
    tu_write_all(tu_tmp("bert.json"), bert, strlen(bert));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_rm_tree(tu_dir);
    return 0;
}

/* Runs "[mpirun -np ranks] attn ARGS" (ranks 0: no mpirun) with stdout and stderr into buf;
 * returns the exit status. */
static int run(int ranks, const char *args) {
    char cmd[16384];
    if (ranks > 0)
        snprintf(cmd, sizeof cmd, "%s %d '%s' %s", g_mpirun, ranks, g_attn, args);
    else
        snprintf(cmd, sizeof cmd, "'%s' --threads 1 %s", g_attn, args);
    if (!tu_quiet()) printf("  $ %s\n", cmd);
    fflush(stdout);
    return tu_sh_capture(cmd, 1, buf, sizeof buf);
}

static void run_ok(int ranks, const char *args) {
    int rc = run(ranks, args);
    if (rc) fail_msg("exit %d: %s\n%s", rc, args, buf);
}

/* The training losses of a --metrics file by step (1..STEPS); NaN where absent. */
static void read_losses(const char *path, double loss[STEPS + 1]) {
    for (int i = 0; i <= STEPS; i++) loss[i] = NAN;
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: cannot open", path);
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *s = json_object_get(j, "step"), *l = json_object_get(j, "loss");
        if (json_is_integer(s) && json_is_number(l)) {
            json_int_t k = json_integer_value(s);
            if (k >= 1 && k <= STEPS) loss[k] = json_number_value(l);
        }
        json_decref(j);
    }
    fclose(f);
}

/* The largest relative difference of steps from..STEPS' losses (fails when one is missing). */
static double loss_diff(const char *what, const double *ref, const double *got, int from) {
    double worst = 0;
    for (int k = from; k <= STEPS; k++) {
        if (isnan(ref[k]) || isnan(got[k])) fail_msg("%s: no loss for step %d", what, k);
        worst = fmax(worst, fabs(got[k] - ref[k]) / fmax(fabs(ref[k]), 1e-30));
    }
    return worst;
}

/* Whether the exact gradient of tensor `name` is zero (see the file comment). */
static bool zero_gradient(const char *name) {
    size_t n = strlen(name);
    return (n >= 3 && !strcmp(name + n - 3, "b_k")) ||
           (n >= 8 && !strcmp(name + n - 8, "key.bias"));
}

/* The largest absolute difference of the weights of two model.safetensors, every tensor but
 * those of zero_gradient. */
static double weight_diff(const char *a, const char *b) {
    attn_st_file *fa = NULL, *fb = NULL;
    if (attn_st_open(a, &fa) || attn_st_open(b, &fb))
        fail_msg("cannot open %s or %s: %s", a, b, attn_last_error());
    double worst = 0;
    const int n = attn_st_count(fa);
    if (n != attn_st_count(fb)) fail_msg("%s and %s differ in tensor count", a, b);
    for (int i = 0; i < n; i++) {
        const attn_st_tensor *t = attn_st_tensor_at(fa, i);
        if (zero_gradient(t->name)) continue;
        float *x = NULL, *y = NULL;
        const attn_st_tensor *ta = NULL, *tb = NULL;
        if (attn_st_load_f32(fa, t->name, &x, &ta) || attn_st_load_f32(fb, t->name, &y, &tb))
            fail_msg("%s: %s", t->name, attn_last_error());
        if (ta->numel != tb->numel) fail_msg("%s: sizes differ", t->name);
        for (size_t k = 0; k < ta->numel; k++) worst = fmax(worst, fabs((double)x[k] - y[k]));
        attn_free(x), attn_free(y);
    }
    attn_st_close(fa), attn_st_close(fb);
    return worst;
}

typedef struct {
    const char *name;
    const char *args; /* printf format: %s the scratch directory */
    const char *ckpt; /* the checkpoint's directory inside --out ("" or "/checkpoint") */
    const char *needs; /* a file the run needs (NULL: none) */
    const char *bucket; /* ATTN_GRAD_BUCKET: several buckets, some during the backward */
} family;

/* 20 steps single-process and with 2 ranks; 10 with 2 ranks, resumed to 20 by 1 and by 3. */
static void check_family(const family *f) {
    if (g_skip) tu_skip("%s", g_skip);
    /* each process under ASan takes ~3 s (most of it the leak check at exit): there the GPT
     * family alone covers the ranks' paths (the trainer's are shared), ZeRO-1 and failures too */
    if (g_san && strcmp(f->name, "gpt") != 0)
        tu_skip_env("a sanitizer build: --arch gpt covers the multi-rank paths (all families "
                    "run in make test)");
    if (f->needs && access(f->needs, R_OK) != 0)
        tu_skip("%s missing (tools/install_deps.sh)", f->needs);
    setenv("ATTN_GRAD_BUCKET", f->bucket, 1);
    char base[4096], args[16384], d1[1024], d2[1024], h[1024], h3[1024];
    snprintf(base, sizeof base, f->args, tu_dir, tu_dir);
    snprintf(d1, sizeof d1, "%s/%s-1", tu_dir, f->name);
    snprintf(d2, sizeof d2, "%s/%s-2", tu_dir, f->name);
    snprintf(h, sizeof h, "%s/%s-h", tu_dir, f->name);
    snprintf(h3, sizeof h3, "%s/%s-h3", tu_dir, f->name);
    snprintf(args, sizeof args, "%s --max-steps %d --out '%s' --metrics '%s.jsonl'", base, STEPS,
             d1, d1);
    run_ok(0, args);
    snprintf(args, sizeof args, "%s --max-steps %d --out '%s' --metrics '%s.jsonl'", base, STEPS,
             d2, d2);
    run_ok(2, args);
    /* "mpi: 2 ranks; per step B bytes ... in N buckets (E during the backward), ..." */
    const char *mp = strstr(buf, "mpi: 2 ranks; per step ");
    double nb = 0, early = 0;
    if (!mp || sscanf(strstr(mp, " in ") ? strstr(mp, " in ") : "", " in %lf buckets (%lf during",
                      &nb, &early) != 2)
        fail_msg("no 'mpi:' summary line:\n%s", buf);
    printf("  %s: %.1f buckets of gradients per step, %.1f of them during the backward\n",
           f->name, nb, early);
    if (!(nb >= 2 && early >= 1 && early < nb))
        fail_msg("%s: the gradients' all-reduce did not overlap the backward", f->name);
    snprintf(args, sizeof args, "%s --max-steps %d --out '%s' --metrics '%s.jsonl'", base, HALF,
             h, h);
    run_ok(2, args);
    snprintf(args, sizeof args, "cp -r '%s' '%s' && cp '%s.jsonl' '%s.jsonl'", h, h3, h, h3);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps %d --metrics '%s.jsonl'", h,
             STEPS, h);
    run_ok(0, args);
    if (!strstr(buf, "at step 10")) fail_msg("resumed with 1 rank, not at step 10:\n%s", buf);
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps %d --metrics '%s.jsonl'",
             h3, STEPS, h3);
    run_ok(3, args);
    if (!strstr(buf, "at step 10")) fail_msg("resumed with 3 ranks, not at step 10:\n%s", buf);

    static double l1[STEPS + 1], l2[STEPS + 1], lh[STEPS + 1], lh3[STEPS + 1];
    char p1[1200], p2[1200];
    snprintf(p1, sizeof p1, "%s.jsonl", d1), read_losses(p1, l1);
    snprintf(p2, sizeof p2, "%s.jsonl", d2), read_losses(p2, l2);
    snprintf(p2, sizeof p2, "%s.jsonl", h), read_losses(p2, lh);
    snprintf(p2, sizeof p2, "%s.jsonl", h3), read_losses(p2, lh3);
    const double e2 = loss_diff("2 ranks", l1, l2, 1), eh = loss_diff("2 -> 1 rank", l1, lh, 1),
                 eh3 = loss_diff("2 -> 3 ranks", l1, lh3, 1);
    double w[3];
    const char *dirs[3] = {d2, h, h3};
    snprintf(p1, sizeof p1, "%s%s/model.safetensors", d1, f->ckpt);
    for (int k = 0; k < 3; k++) {
        snprintf(p2, sizeof p2, "%s%s/model.safetensors", dirs[k], f->ckpt);
        w[k] = weight_diff(p1, p2);
    }
    printf("  %s: against 1 process, losses (rel) / weights (abs): 2 ranks %.2g / %.2g; "
           "resumed from 2 ranks by 1 %.2g / %.2g, by 3 %.2g / %.2g\n",
           f->name, e2, w[0], eh, w[1], eh3, w[2]);
    if (e2 > LOSS_REL || eh > LOSS_REL || eh3 > LOSS_REL)
        fail_msg("%s: a loss differs by more than %g (relative)", f->name, LOSS_REL);
    if (w[0] > WEIGHT_ABS || w[1] > WEIGHT_ABS || w[2] > WEIGHT_ABS)
        fail_msg("%s: a weight differs by more than %g", f->name, WEIGHT_ABS);
}

static const char *enc_args = "train --data '%s/pairs.tsv' --config '%s/enc.json' --vocab-size "
                              "400 --valid-size 50 --test-size 50 --max-tokens 400 --warmup 5 "
                              "--eval-every 10 --bleu-sentences 0 --log-every 5";

static void test_encdec(void **state) {
    (void)state;
    const family f = {"encdec", enc_args, "", NULL, "256"};
    check_family(&f);
}

static void test_gpt(void **state) {
    (void)state;
    const family f = {"gpt",
                      "train --arch gpt --data '%s/text.txt' --config '%s/gpt.json' --batch 5 "
                      "--grad-accum 2 --dropout 0.1 --eval-iters 2 --eval-every 10 --log-every 5",
                      "", NULL, "256"};
    check_family(&f);
}

static void test_llama(void **state) {
    (void)state;
    const family f = {"llama",
                      "train --arch llama --data '%s/text.txt' --config '%s/llama.json' "
                      "--batch 5 --eval-iters 2 --eval-every 10 --log-every 5",
                      "", NULL, "256"};
    check_family(&f);
}

static void test_bert(void **state) {
    (void)state;
    const family f = {"bert",
                      "train --arch bert --data '%s/pairs.tsv' --column 1 --tokenizer "
                      "models/all-MiniLM-L6-v2 --config '%s/bert.json' --max-len 24 --batch 8 "
                      "--valid-size 16 --eval-every 10 --log-every 5",
                      "/checkpoint", "models/all-MiniLM-L6-v2/tokenizer.json",
                      "16384" /* the 30522-word embedding: 1M floats */};
    check_family(&f);
}

static bool same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = tu_read_all(a, &na), *y = tu_read_all(b, &nb);
    const bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

static void test_zero1(void **state) {
    (void)state;
    if (g_skip) tu_skip("%s", g_skip);
    char base[4096], args[9000], a[1024], z[1024], p[1200], q[1200];
    snprintf(base, sizeof base,
             "train --arch gpt --data '%s/text.txt' --config '%s/gpt.json' --batch 5 "
             "--grad-accum 2 --dropout 0.1 --eval-iters 2 --eval-every 10 --log-every 5",
             tu_dir, tu_dir);
    snprintf(a, sizeof a, "%s/z-plain", tu_dir);
    snprintf(z, sizeof z, "%s/z-zero1", tu_dir);
    snprintf(args, sizeof args, "%s --max-steps %d --out '%s'", base, HALF, a);
    run_ok(2, args);
    snprintf(args, sizeof args, "%s --max-steps %d --save-every 5 --zero1 --out '%s'", base, HALF,
             z);
    run_ok(2, args);
    if (!strstr(buf, "zero1: AdamW's state sharded over 2 ranks"))
        fail_msg("no zero1 line:\n%s", buf);
    for (int round = 0; round < 2; round++) {
        static const char *const files[2] = {"model.safetensors", "optimizer.safetensors"};
        for (int k = 0; k < 2; k++) {
            snprintf(p, sizeof p, "%s/%s", a, files[k]);
            snprintf(q, sizeof q, "%s/%s", z, files[k]);
            if (!same_file(p, q))
                fail_msg("%s ranks: %s differs with --zero1", round ? "3" : "2", files[k]);
        }
        if (round) break;
        /* both resumed by 3 ranks (shares of uneven length), one with --zero1 */
        snprintf(args, sizeof args, "train --out '%s' --resume --max-steps %d", a, STEPS);
        run_ok(3, args);
        snprintf(args, sizeof args, "train --out '%s' --resume --max-steps %d --zero1", z, STEPS);
        run_ok(3, args);
    }
    printf("  --zero1: the checkpoints (parameters and AdamW state) equal those without it, "
           "2 ranks and resumed by 3\n");
}

/* The one "attn: error:" line of buf (fails unless there is exactly one), NUL-terminated in
 * line. */
static void one_error_line(char *line, size_t cap) {
    const char *e = strstr(buf, "attn: error: ");
    if (!e) fail_msg("no 'attn: error:' line:\n%s", buf);
    const size_t at = (size_t)(e - buf);
    if (strstr(buf + at + 13, "attn: error: ")) fail_msg("more than one error line:\n%s", buf);
    const char *eol = strchr(e, '\n');
    snprintf(line, cap, "%.*s", (int)(eol ? eol - e : (long)strlen(e)), e);
    printf("  %s\n", line);
}

static void test_failures(void **state) {
    (void)state;
    if (g_skip) tu_skip("%s", g_skip);
    char base[8192], args[9000], d[4600], line[2048];
    snprintf(base, sizeof base, enc_args, tu_dir, tu_dir);
    snprintf(d, sizeof d, "%s/fail", tu_dir);
    /* rank 1 leaves after step 5; rank 0, saving every 5 steps, waits for it in step 6. The
     * program mpirun starts is sh: "sh -c SCRIPT attn ARGS" execs attn with a rank's
     * --max-steps. */
    char cmd[24000];
    snprintf(cmd, sizeof cmd,
             "%s 2 sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then n=5; else n=40; fi; "
             "exec \"$0\" \"$@\" --max-steps $n' '%s' %s --out '%s' --save-every 5 "
             "--comm-timeout 2",
             g_mpirun, g_attn, base, d);
    if (!tu_quiet()) printf("  $ %s\n", cmd);
    int rc = tu_sh_capture(cmd, 1, buf, sizeof buf);
    if (rc == 0) fail_msg("a job whose rank 1 left early ended with 0:\n%s", buf);
    one_error_line(line, sizeof line);
    if (!strstr(line, "rank 0 of 2") || !strstr(line, "rank 1") || !strstr(line, "2 s"))
        fail_msg("the error line does not name rank 1 and the timeout: %s", line);
    /* the checkpoint of step 5 is intact */
    snprintf(args, sizeof args, "train --out '%s' --resume --max-steps 6", d);
    run_ok(0, args);
    if (!strstr(buf, "resumed") || !strstr(buf, "at step 5"))
        fail_msg("the last checkpoint is not step 5's:\n%s", buf);

    /* a rank that fails alone: rank 1 cannot read its data (its line comes first; rank 0 is then
     * killed by mpirun, or — a race — may report its own failed collective in one more line) */
    char pairs[4600];
    snprintf(pairs, sizeof pairs, "%s/pairs.tsv", tu_dir);
    snprintf(cmd, sizeof cmd,
             "%s 2 sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exec \"$0\" train --data "
             "/nonexistent.tsv --out \"$1\"; fi; exec \"$0\" train --data \"$2\" --out \"$1\" "
             "--max-steps 40 --comm-timeout 60' '%s' '%s/fail2' '%s'",
             g_mpirun, g_attn, tu_dir, pairs);
    if (!tu_quiet()) printf("  $ %s\n", cmd);
    rc = tu_sh_capture(cmd, 1, buf, sizeof buf);
    if (rc == 0) fail_msg("a job whose rank 1 failed ended with 0:\n%s", buf);
    int n1 = 0, n0 = 0;
    for (const char *e = buf; (e = strstr(e, "attn: error: ")) != NULL; e++) {
        const char *eol = strchr(e, '\n');
        snprintf(line, sizeof line, "%.*s", (int)(eol ? eol - e : (long)strlen(e)), e);
        printf("  %s\n", line);
        if (strstr(line, "rank 1 of 2") && strstr(line, "/nonexistent.tsv")) n1++;
        else if (strstr(line, "rank 0 of 2")) n0++;
        else fail_msg("an error line that is neither rank 1's nor rank 0's: %s", line);
    }
    if (n1 != 1 || n0 > 1) fail_msg("expected rank 1's one error line:\n%s", buf);

    /* a rank that would start from another state (here another --seed) stops the job at once */
    snprintf(cmd, sizeof cmd,
             "%s 2 sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then s=7; else s=1; fi; "
             "exec \"$0\" \"$@\" --seed $s' '%s' train --arch gpt --data '%s/text.txt' "
             "--config '%s/gpt.json' --batch 4 --max-steps 5 --out '%s/fail3'",
             g_mpirun, g_attn, tu_dir, tu_dir, tu_dir);
    if (!tu_quiet()) printf("  $ %s\n", cmd);
    rc = tu_sh_capture(cmd, 1, buf, sizeof buf);
    if (rc == 0) fail_msg("a job whose ranks differ in --seed ended with 0:\n%s", buf);
    one_error_line(line, sizeof line);
    if (!strstr(line, "rank 1 of 2") || !strstr(line, "another state than rank 0"))
        fail_msg("the error line does not name rank 1 and the mismatch: %s", line);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encdec),
        cmocka_unit_test(test_gpt),
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_bert),
        cmocka_unit_test(test_zero1),
        cmocka_unit_test(test_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

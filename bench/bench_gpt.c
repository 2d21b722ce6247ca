/* bench_gpt.c — attn's side of issue 4's GPT benchmarks, compared with PyTorch by
 * bench/torch_gpt.py (which runs bench/torch_gpt_generate.py for the generation cases). JSON lines
 * {"bench":"gpt","case":...,"metric":"tokens/s","value":...} (higher is better).
 *
 * (1) "train char 6L-384 ctx256 B8": training throughput of configs/gpt-char-6l.json (6 layers,
 *     6 heads, width 384, context 256; dropout 0.2 as nanoGPT's shakespeare-char, override with
 *     ATTN_BENCH_DROPOUT) on tinyshakespeare characters (65 ids), batch 8: WARMUP (3) then STEPS
 *     (20) optimizer steps exactly as `attn train --arch gpt` runs them (dropout masks, forward,
 *     loss, backward — data-parallel over one replica per thread, attn_gpt_trainer —, finiteness
 *     check, clipping at 1.0, AdamW(0.9, 0.99, wd 0.1 on 2-D tensors), lr 1e-3). tokens/s = B·T per step over the timed steps. The initial weights (seed 1337, by
 *     Hugging Face tensor name), the batches and the settings go to
 *     $ATTN_BENCH_DIR/gpt_train.safetensors so the PyTorch twin trains the same model from the same
 *     weights on the same batches; check: the loss of batch 0 at the initial weights without
 *     dropout ("first_loss"), which the twin recomputes.
 * (2) "generate 124M prompt 128" / "generate 124M new 128": a GPT-2-124M-shaped model (12 layers,
 *     12 heads, width 768, vocabulary 50257, context 1024; random weights, float32), a 128-token
 *     prompt then 128 new tokens through attn_gen_gpt (the loop `attn generate` runs: KV cache,
 *     greedy choice, no stop at end of text): prompt tokens/s (the one-pass prompt) and new
 *     tokens/s (the single-token passes: 127 decode steps / their time). Best of
 *     ATTN_BENCH_ROUNDS (2). The prompt ids go to $ATTN_BENCH_DIR/gpt_generate.safetensors.
 * Environment: ATTN_BENCH_THREADS (2), ATTN_BENCH_DIR, ATTN_BENCH_STEPS (20), ATTN_BENCH_WARMUP
 * (3), ATTN_BENCH_ROUNDS (2), ATTN_BENCH_DROPOUT, ATTN_BENCH_GEN_LAYERS (12; fewer for a smoke
 * run), ATTN_BENCH_GPT_CASES ("train,generate"). Run from the repository root. */
#include "attn_core.h"
#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DATA_PATH "../shared/data/tinyshakespeare/input.txt"
#define CONFIG_PATH "configs/gpt-char-6l.json"
#define B 8
#define SEED 1337
#define LR 1e-3

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_gpt: %s: %s\n", what, attn_last_error());
    return 1;
}

/* tinyshakespeare as nanoGPT's character ids (sorted distinct bytes; the file is ASCII). */
static int32_t *load_chars(size_t *n, int *V) {
    FILE *f = fopen(DATA_PATH, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *t = malloc((size_t)sz);
    int32_t *ids = malloc((size_t)sz * sizeof *ids);
    if (!t || !ids || fread(t, 1, (size_t)sz, f) != (size_t)sz) {
        fclose(f);
        free(t), free(ids);
        return NULL;
    }
    fclose(f);
    int map[256], v = 0;
    bool seen[256] = {false};
    for (long i = 0; i < sz; i++) seen[t[i]] = true;
    for (int c = 0; c < 256; c++) map[c] = seen[c] ? v++ : -1;
    for (long i = 0; i < sz; i++) ids[i] = map[t[i]];
    free(t);
    *n = (size_t)sz, *V = v;
    return ids;
}

/* WARMUP + STEPS optimizer steps of a fresh model (seed SEED) in the given precision, exactly as
 * `attn train --arch gpt` runs them; *tok_s over the timed steps, *last the last batch's loss. */
static int train_steps(const attn_gpt_config *c, const int32_t *x, const int32_t *y, int T,
                       int warm, int steps, attn_precision prec, double *tok_s, float *last,
                       size_t *n_params) {
    const int S = warm + steps;
    attn_gpt_model *m;
    if (attn_gpt_model_init(c, SEED, &m)) return fail("model");
    *n_params = m->num_params;
    attn_optim_range *ranges = calloc((size_t)m->n_tensors, sizeof *ranges);
    for (int i = 0; i < m->n_tensors; i++)
        ranges[i] = (attn_optim_range){m->tensors[i].offset, m->tensors[i].numel, m->tensors[i].decay,
                                       m->tensors[i].name};
    attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    op.beta1 = 0.9, op.beta2 = 0.99, op.weight_decay = 0.1;
    attn_optim *opt;
    if (attn_optim_create(&op, m->num_params, ranges, m->n_tensors, &opt)) return fail("optimizer");
    /* the step as `attn train --arch gpt` runs it: data-parallel, one replica per thread */
    attn_gpt_trainer *tr;
    if (attn_gpt_trainer_init(m, B, T, attn_get_num_threads(), &tr)) return fail("trainer");
    if (attn_gpt_trainer_set_precision(tr, prec)) return fail("precision");
    double t0 = 0;
    for (int s = 0; s < S; s++) {
        if (s == warm) t0 = now();
        const size_t off = (size_t)s * B * T;
        attn_gpt_zero_grad(m);
        if (attn_gpt_train_step(tr, true, SEED, (uint64_t)s, B, T, x + off, y + off, 1.0f, last))
            return fail("train step");
        if (attn_optim_clip_step(opt, m->params, m->grads, 1.0, LR, ranges, m->n_tensors, NULL))
            return fail("optimizer step");
    }
    *tok_s = (double)B * T * steps / (now() - t0);
    attn_optim_destroy(opt);
    free(ranges);
    attn_gpt_trainer_free(tr);
    attn_gpt_model_free(m);
    return 0;
}

static int bench_train(const char *dir) {
    size_t n;
    int V;
    int32_t *data = load_chars(&n, &V);
    if (!data) {
        fprintf(stderr, "bench_gpt: cannot read %s (run from the repository root)\n", DATA_PATH);
        return 1;
    }
    attn_gpt_config c;
    if (attn_gpt_config_load(CONFIG_PATH, &c)) return fail(CONFIG_PATH);
    c.vocab_size = V;
    c.bos_token_id = c.eos_token_id = -1;
    const char *dr = getenv("ATTN_BENCH_DROPOUT");
    if (dr && *dr) c.resid_pdrop = c.embd_pdrop = (float)atof(dr);
    const int T = c.n_positions;
    const int warm = env_int("ATTN_BENCH_WARMUP", 3), steps = env_int("ATTN_BENCH_STEPS", 20);
    const int S = warm + steps;
    attn_gpt_model *m;
    if (attn_gpt_model_init(&c, SEED, &m)) return fail("model");
    /* the batches: random windows of the first 90% (nanoGPT's train split) */
    int32_t *x = malloc((size_t)S * B * T * sizeof *x), *y = malloc((size_t)S * B * T * sizeof *y);
    attn_rng r;
    attn_rng_init(&r, 42);
    const size_t n_train = (size_t)((double)n * 0.9);
    for (int i = 0; i < S * B; i++) {
        size_t o = (size_t)attn_rng_below(&r, n_train - (size_t)T);
        memcpy(x + (size_t)i * T, data + o, (size_t)T * sizeof *x);
        memcpy(y + (size_t)i * T, data + o + 1, (size_t)T * sizeof *y);
    }
    free(data);
    attn_gpt_state *st;
    if (attn_gpt_state_init(m, B, T, &st)) return fail("state");
    /* check value: batch 0's loss at the initial weights, no dropout */
    float first_loss = 0;
    attn_gpt_set_train(st, false, 0, 0);
    if (attn_gpt_forward(m, st, B, T, x, NULL) || attn_gpt_loss(m, st, y, 1.0f, &first_loss))
        return fail("first loss");
    if (dir) {
        char path[4096], cfgp[4096];
        snprintf(path, sizeof path, "%s/gpt_train.safetensors", dir);
        snprintf(cfgp, sizeof cfgp, "%s/gpt_train_config.json", dir);
        if (attn_gpt_config_save(cfgp, &c)) return fail(cfgp);
        attn_st_entry *e = calloc((size_t)m->n_tensors + 2, sizeof *e);
        char (*names)[112] = calloc((size_t)m->n_tensors, sizeof *names);
        for (int i = 0; i < m->n_tensors; i++) {
            const attn_gpt_tensor *t = &m->tensors[i];
            snprintf(names[i], sizeof names[i], "w.%s", t->name);
            e[i] = (attn_st_entry){names[i], ATTN_DTYPE_F32, t->ndim, {t->shape[0], t->shape[1]},
                                   m->params + t->offset};
        }
        e[m->n_tensors] = (attn_st_entry){"x", ATTN_DTYPE_I32, 3, {S, B, T}, x};
        e[m->n_tensors + 1] = (attn_st_entry){"y", ATTN_DTYPE_I32, 3, {S, B, T}, y};
        char v[4][32];
        snprintf(v[0], sizeof v[0], "%d", warm);
        snprintf(v[1], sizeof v[1], "%d", steps);
        snprintf(v[2], sizeof v[2], "%.9g", (double)first_loss);
        snprintf(v[3], sizeof v[3], "%g", (double)c.resid_pdrop);
        const char *meta[] = {"n_warmup", v[0], "n_steps", v[1], "first_loss", v[2], "dropout",
                              v[3], "lr", "0.001", "weight_decay", "0.1", "beta1", "0.9", "beta2",
                              "0.99", "grad_clip", "1.0", "bf16",
                              attn_precision_available(ATTN_PRECISION_BF16) ? "1" : "0", NULL};
        attn_status s = attn_st_save(path, e, m->n_tensors + 2, meta);
        free(e), free(names);
        if (s) return fail(path);
    }
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
    double tok_s;
    float last;
    size_t n_params;
    if (train_steps(&c, x, y, T, warm, steps, ATTN_PRECISION_F32, &tok_s, &last, &n_params))
        return 1;
    printf("note: train: %zu parameters, first loss %.6f (no dropout), last loss %.4f, dropout "
           "%.2f, %d timed steps, %.1f tokens/s\n",
           n_params, (double)first_loss, last, (double)c.resid_pdrop, steps, tok_s);
    printf("{\"bench\":\"gpt\",\"case\":\"train char 6L-384 ctx256 B8\",\"metric\":\"tokens/s\","
           "\"value\":%.1f}\n",
           tok_s);
    fflush(stdout);
    /* The opt-in mixed precision (attn train --precision bf16), where the CPU has it: against the
     * float32 twin (the peer) and the twin under torch.autocast(bfloat16). */
    if (attn_precision_available(ATTN_PRECISION_BF16)) {
        if (train_steps(&c, x, y, T, warm, steps, ATTN_PRECISION_BF16, &tok_s, &last, &n_params))
            return 1;
        printf("note: train bf16: last loss %.4f, %.1f tokens/s\n", last, tok_s);
        printf("{\"bench\":\"gpt\",\"case\":\"train 6L, attn bf16 vs torch f32\","
               "\"metric\":\"tokens/s\",\"value\":%.1f}\n",
               tok_s);
        printf("{\"bench\":\"gpt\",\"case\":\"train 6L, attn bf16 vs torch bf16\","
               "\"metric\":\"tokens/s\",\"value\":%.1f}\n",
               tok_s);
        fflush(stdout);
    }
    free(x), free(y);
    return 0;
}

static int bench_generate(const char *dir) {
    attn_gpt_config c = attn_gpt_default_config();
    c.n_layer = env_int("ATTN_BENCH_GEN_LAYERS", 12);
    const int Tp = 128, NG = 128, rounds = env_int("ATTN_BENCH_ROUNDS", 2);
    attn_gpt_model *m;
    if (attn_gpt_model_init(&c, 1234, &m)) return fail("gpt2 model");
    int32_t prompt[128];
    attn_rng r;
    attn_rng_init(&r, 7);
    for (int i = 0; i < Tp; i++) prompt[i] = (int32_t)attn_rng_below(&r, (uint64_t)c.vocab_size);
    if (dir) {
        char path[4096], v[16];
        snprintf(path, sizeof path, "%s/gpt_generate.safetensors", dir);
        snprintf(v, sizeof v, "%d", c.n_layer);
        attn_st_entry e = {"prompt", ATTN_DTYPE_I32, 1, {Tp}, prompt};
        const char *meta[] = {"n_layer", v, NULL};
        if (attn_st_save(path, &e, 1, meta)) return fail(path);
    }
    attn_gen_params gp = attn_gen_default_params();
    gp.greedy = true;
    double best_p = 0, best_g = 0;
    for (int k = 0; k < rounds; k++) {
        attn_gen_stats st;
        if (attn_gen_gpt(m, &gp, prompt, Tp, NG, -1, NULL, NULL, NULL, &st)) return fail("generate");
        double rp = st.n_prompt / st.prompt_seconds, rg = st.n_decode_steps / st.decode_seconds;
        if (rp > best_p) best_p = rp;
        if (rg > best_g) best_g = rg;
    }
    double gb = (double)m->num_params * 4 / 1e9;
    printf("note: generate: GPT-2-124M shape, %d layers, %.2f GB of float32 weights; new tokens at "
           "%.1f/s stream %.1f GB/s of weights\n",
           c.n_layer, gb, best_g, best_g * gb);
    printf("{\"bench\":\"gpt\",\"case\":\"generate 124M prompt 128\",\"metric\":\"tokens/s\","
           "\"value\":%.1f}\n",
           best_p);
    printf("{\"bench\":\"gpt\",\"case\":\"generate 124M new 128\",\"metric\":\"tokens/s\","
           "\"value\":%.1f}\n",
           best_g);
    fflush(stdout);
    attn_gpt_model_free(m);
    return 0;
}

int main(void) {
    attn_set_num_threads(env_int("ATTN_BENCH_THREADS", 2));
    (void)attn_set_flush_denormals(true); /* as the attn CLI does */
    const char *dir = getenv("ATTN_BENCH_DIR");
    if (dir && !*dir) dir = NULL;
    const char *cases = getenv("ATTN_BENCH_GPT_CASES");
    if (!cases || !*cases) cases = "train,generate";
    printf("note: %d threads, %s kernels\n", attn_get_num_threads(), attn_backend_name(attn_get_backend()));
    if (strstr(cases, "train") && bench_train(dir)) return 1;
    if (strstr(cases, "generate") && bench_generate(dir)) return 1;
    return 0;
}

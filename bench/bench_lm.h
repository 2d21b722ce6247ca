/* bench_lm.h — what bench_gpt.c and bench_llama.c share: timing helpers and the training-throughput
 * case of a decoder language model on tinyshakespeare characters, run exactly as `attn train
 * --arch gpt|llama` steps (data-parallel attn_gpt_trainer, one replica per thread; clipping at
 * 1.0; AdamW(0.9, 0.99, weight decay 0.1 on the 2-D tensors), lr 1e-3).
 *
 * lm_bench_train(&case, dir): a model of the case's config.json (vocabulary: the 65 characters of
 * tinyshakespeare, nanoGPT's ids; no bos/eos), batch 8 of context-length windows drawn from the
 * first 90% (Philox seed 42), WARMUP (ATTN_BENCH_WARMUP, 3) then STEPS (ATTN_BENCH_STEPS, 20)
 * optimizer steps; tokens/s = B·T per step over the timed steps. Into dir (when not NULL):
 *   NAME.safetensors      "w.<Hugging Face tensor name>" for every initial weight (seed 1337),
 *                         "x", "y" (steps, B, T) int32 batches, metadata n_warmup, n_steps,
 *                         first_loss (batch 0 at the initial weights, no dropout: the PyTorch
 *                         twin recomputes it), dropout, lr, weight_decay, beta1, beta2,
 *                         grad_clip, bf16 ("1" when the CPU has AVX512-BF16)
 *   NAME_config.json      the model's config.json (attn_gpt_config_save)
 * Prints a note line and {"bench": BENCH, "case": CASE, "metric": "tokens/s", ...}; where the CPU
 * has bfloat16, the same again in attn's opt-in bf16 as two more cases (against the twin in
 * float32 and under autocast). Static functions: one copy per bench program. */
#ifndef BENCH_LM_H
#define BENCH_LM_H

#include "attn_core.h"
#include "attn_gpt.h"
#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LM_DATA_PATH "../shared/data/tinyshakespeare/input.txt"
#define LM_B 8
#define LM_SEED 1337
#define LM_LR 1e-3

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static const char *lm_prog = "bench"; /* the program's name in messages */

static int fail(const char *what) {
    fprintf(stderr, "%s: %s: %s\n", lm_prog, what, attn_last_error());
    return 1;
}

typedef struct {
    const char *bench;       /* the JSON lines' "bench" */
    const char *case_name;   /* the float32 case's "case" */
    const char *bf16_prefix; /* the bf16 cases: "<prefix>, attn bf16 vs torch f32|bf16" */
    const char *config_path; /* config.json of the model */
    const char *name;        /* the files' base name in dir */
    bool dropout_env;        /* ATTN_BENCH_DROPOUT overrides resid/embd dropout (GPT-2) */
} lm_train_case;

/* tinyshakespeare as nanoGPT's character ids (sorted distinct bytes; the file is ASCII). */
static int32_t *lm_load_chars(size_t *n, int *V) {
    FILE *f = fopen(LM_DATA_PATH, "rb");
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

/* warm + steps optimizer steps of a fresh model (seed LM_SEED) in the given precision, exactly as
 * `attn train` runs them; *tok_s over the timed steps, *last the last batch's loss. */
static int lm_train_steps(const attn_gpt_config *c, const int32_t *x, const int32_t *y, int T,
                          int warm, int steps, attn_precision prec, double *tok_s, float *last) {
    const int S = warm + steps;
    attn_gpt_model *m;
    if (attn_gpt_model_init(c, LM_SEED, &m)) return fail("model");
    attn_optim_range *ranges = calloc((size_t)m->n_tensors, sizeof *ranges);
    for (int i = 0; i < m->n_tensors; i++)
        ranges[i] = (attn_optim_range){m->tensors[i].offset, m->tensors[i].numel,
                                       m->tensors[i].decay, m->tensors[i].name};
    attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    op.beta1 = 0.9, op.beta2 = 0.99, op.weight_decay = 0.1;
    attn_optim *opt;
    if (attn_optim_create(&op, m->num_params, ranges, m->n_tensors, &opt)) return fail("optimizer");
    attn_gpt_trainer *tr;
    if (attn_gpt_trainer_init(m, LM_B, T, attn_get_num_threads(), &tr)) return fail("trainer");
    if (attn_gpt_trainer_set_precision(tr, prec)) return fail("precision");
    double t0 = 0;
    for (int s = 0; s < S; s++) {
        if (s == warm) t0 = now();
        const size_t off = (size_t)s * LM_B * T;
        attn_gpt_zero_grad(m);
        if (attn_gpt_train_step(tr, true, LM_SEED, (uint64_t)s, LM_B, T, x + off, y + off, 1.0f,
                                last))
            return fail("train step");
        if (attn_optim_clip_step(opt, m->params, m->grads, 1.0, LM_LR, ranges, m->n_tensors, NULL))
            return fail("optimizer step");
    }
    *tok_s = (double)LM_B * T * steps / (now() - t0);
    attn_optim_destroy(opt);
    free(ranges);
    attn_gpt_trainer_free(tr);
    attn_gpt_model_free(m);
    return 0;
}

/* The initial weights, batches and settings for the twin (see the top of the file). */
static int lm_save_inputs(const lm_train_case *tc, const char *dir, const attn_gpt_model *m,
                          const int32_t *x, const int32_t *y, int S, int T, int warm, int steps,
                          float first_loss) {
    char path[4096], cfgp[4096];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, tc->name);
    snprintf(cfgp, sizeof cfgp, "%s/%s_config.json", dir, tc->name);
    if (attn_gpt_config_save(cfgp, &m->cfg)) return fail(cfgp);
    attn_st_entry *e = calloc((size_t)m->n_tensors + 2, sizeof *e);
    char (*names)[112] = calloc((size_t)m->n_tensors, sizeof *names);
    if (!e || !names) {
        free(e), free(names);
        fprintf(stderr, "%s: out of memory\n", lm_prog);
        return 1;
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        snprintf(names[i], sizeof names[i], "w.%s", t->name);
        e[i] = (attn_st_entry){names[i], ATTN_DTYPE_F32, t->ndim, {t->shape[0], t->shape[1]},
                               m->params + t->offset};
    }
    e[m->n_tensors] = (attn_st_entry){"x", ATTN_DTYPE_I32, 3, {S, LM_B, T}, x};
    e[m->n_tensors + 1] = (attn_st_entry){"y", ATTN_DTYPE_I32, 3, {S, LM_B, T}, y};
    char v[4][32];
    snprintf(v[0], sizeof v[0], "%d", warm);
    snprintf(v[1], sizeof v[1], "%d", steps);
    snprintf(v[2], sizeof v[2], "%.9g", (double)first_loss);
    snprintf(v[3], sizeof v[3], "%g", (double)m->cfg.resid_pdrop);
    const char *meta[] = {"n_warmup", v[0], "n_steps", v[1], "first_loss", v[2], "dropout", v[3],
                          "lr", "0.001", "weight_decay", "0.1", "beta1", "0.9", "beta2", "0.99",
                          "grad_clip", "1.0", "bf16",
                          attn_precision_available(ATTN_PRECISION_BF16) ? "1" : "0", NULL};
    attn_status s = attn_st_save(path, e, m->n_tensors + 2, meta);
    free(e), free(names);
    return s ? fail(path) : 0;
}

static int lm_bench_train(const lm_train_case *tc, const char *dir) {
    size_t n;
    int V;
    int32_t *data = lm_load_chars(&n, &V);
    if (!data) {
        fprintf(stderr, "%s: cannot read %s (run from the repository root)\n", lm_prog,
                LM_DATA_PATH);
        return 1;
    }
    attn_gpt_config c;
    if (attn_gpt_config_load(tc->config_path, &c)) return fail(tc->config_path);
    c.vocab_size = V;
    c.bos_token_id = c.eos_token_id = -1;
    c.n_more_eos = 0;
    const char *dr = getenv("ATTN_BENCH_DROPOUT");
    if (tc->dropout_env && dr && *dr) c.resid_pdrop = c.embd_pdrop = (float)atof(dr);
    const int T = c.n_positions;
    const int warm = env_int("ATTN_BENCH_WARMUP", 3), steps = env_int("ATTN_BENCH_STEPS", 20);
    const int S = warm + steps;
    attn_gpt_model *m;
    if (attn_gpt_model_init(&c, LM_SEED, &m)) return fail("model");
    /* the batches: random windows of the first 90% (nanoGPT's train split) */
    int32_t *x = malloc((size_t)S * LM_B * T * sizeof *x);
    int32_t *y = malloc((size_t)S * LM_B * T * sizeof *y);
    if (!x || !y) {
        fprintf(stderr, "%s: out of memory\n", lm_prog);
        return 1;
    }
    attn_rng r;
    attn_rng_init(&r, 42);
    const size_t n_train = (size_t)((double)n * 0.9);
    for (int i = 0; i < S * LM_B; i++) {
        size_t o = (size_t)attn_rng_below(&r, n_train - (size_t)T);
        memcpy(x + (size_t)i * T, data + o, (size_t)T * sizeof *x);
        memcpy(y + (size_t)i * T, data + o + 1, (size_t)T * sizeof *y);
    }
    free(data);
    attn_gpt_state *st;
    if (attn_gpt_state_init(m, LM_B, T, &st)) return fail("state");
    /* check value: batch 0's loss at the initial weights, no dropout */
    float first_loss = 0;
    attn_gpt_set_train(st, false, 0, 0);
    if (attn_gpt_forward(m, st, LM_B, T, x, NULL) || attn_gpt_loss(m, st, y, 1.0f, &first_loss))
        return fail("first loss");
    if (dir && lm_save_inputs(tc, dir, m, x, y, S, T, warm, steps, first_loss)) return 1;
    const size_t n_params = m->num_params;
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
    double tok_s;
    float last;
    if (lm_train_steps(&c, x, y, T, warm, steps, ATTN_PRECISION_F32, &tok_s, &last)) return 1;
    printf("note: train: %zu parameters, first loss %.6f (no dropout), last loss %.4f, dropout "
           "%.2f, %d timed steps, %.1f tokens/s\n",
           n_params, (double)first_loss, last, (double)c.resid_pdrop, steps, tok_s);
    printf("{\"bench\":\"%s\",\"case\":\"%s\",\"metric\":\"tokens/s\",\"value\":%.1f}\n",
           tc->bench, tc->case_name, tok_s);
    fflush(stdout);
    /* The opt-in mixed precision (attn train --precision bf16), where the CPU has it: against the
     * float32 twin (the peer) and the twin under torch.autocast(bfloat16). */
    if (attn_precision_available(ATTN_PRECISION_BF16)) {
        if (lm_train_steps(&c, x, y, T, warm, steps, ATTN_PRECISION_BF16, &tok_s, &last))
            return 1;
        printf("note: train bf16: last loss %.4f, %.1f tokens/s\n", last, tok_s);
        for (int k = 0; k < 2; k++)
            printf("{\"bench\":\"%s\",\"case\":\"%s, attn bf16 vs torch %s\",\"metric\":"
                   "\"tokens/s\",\"value\":%.1f}\n",
                   tc->bench, tc->bf16_prefix, k ? "bf16" : "f32", tok_s);
        fflush(stdout);
    }
    free(x), free(y);
    return 0;
}

#endif

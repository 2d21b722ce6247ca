/* train_loop.h — what every `attn train` family (the translator: cmd_train.c; --arch gpt:
 * cmd_train_gpt.c; --arch bert: cmd_train_bert.c) does alike, written once: the options they
 * share (one spelling, one meaning, the defaults side by side) and the training loop
 *
 *   stop check → batch → step (forward, loss, backward) → clip + AdamW → log → evaluate
 *   → save … → final evaluation → final checkpoint → summary line
 *
 * with its timing, tokens/s, ETA, metrics file, checkpoint cadence and resume bookkeeping. A
 * family fills a train_loop with hooks for what differs (its batches, its step, its validation,
 * its learning-rate schedule, what its checkpoint holds besides the tensors) and calls
 * train_run. Internal to the CLI.
 *
 * tokens/s, for every family: the training tokens of the steps done in this run over the time
 * spent in those steps (the batch, forward, backward and the update; evaluation, checkpoints and
 * the progress output excluded). What a "token" is belongs to the family (its --help says). */
#ifndef ATTN_CLI_TRAIN_LOOP_H
#define ATTN_CLI_TRAIN_LOOP_H

#include "attn_models.h"
#include "train_common.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ==== the shared options ==================================================================== */

typedef enum { TRAIN_ENCDEC = 1, TRAIN_GPT = 2, TRAIN_BERT = 4 } train_family;

/* The options of every family (those a family does not take keep their defaults). */
typedef struct {
    const char *data, *out, *config, *tokenizer, *metrics;
    uint64_t seed;
    double lr;
    int64_t warmup;      /* --warmup-steps */
    int64_t decay_steps; /* --lr-decay-steps (GPT, BERT); -1: the family's default */
    double grad_clip, weight_decay, beta1, beta2, adam_eps;
    double dropout;      /* < 0: the configuration's */
    int64_t batch;       /* --batch: sequences per batch (GPT: per micro-batch); 0: no cap */
    int64_t max_steps;   /* -1: none */
    int64_t epochs;      /* 0: none (encdec, BERT) */
    double time_budget;  /* seconds; 0: none */
    int64_t eval_every, save_every, log_every;
    double comm_timeout; /* --comm-timeout: seconds; 0: 600 */
    double comm_abort_delay; /* --comm-abort-delay: seconds between a failure and MPI_Abort */
    bool zero1;          /* --zero1: shard the optimizer state over the ranks */
    bool resume;
    bool max_steps_given;
    const char *fixed; /* the last run-defining option given: not allowed with --resume */
} train_opts;

/* A family's face on the command line: its --help is usage, then "data and model:" own_data
 * and the shared data rows, "optimization:" the shared rows and own_optimization, "stopping,
 * logging, saving:" the shared rows and own_stopping, the loop's notes (tokens/s, --metrics),
 * then notes. */
typedef struct train_family_info {
    train_family family;
    const char *arch; /* "encdec", "gpt", "bert" */
    const char *usage, *own_data, *own_optimization, *own_stopping, *notes;
    /* {"--option", "default text", ..., NULL}: the default shown for a shared option when it is
     * not a plain value (e.g. "20 when neither --max-steps nor --time-budget is given") */
    const char *const *default_text;
    /* more families whose help `attn train --help` prints after this one's (NULL-terminated) */
    const struct train_family_info *const *more_help;
    train_opts defaults;
} train_family_info;

/* The option loop's step at argv[*i]. --help / -h prints the family's usage (fam NULL: every
 * family's) and returns CLI_EXIT_OK; --resume, --arch (checked against fam->arch) and the shared
 * options fam takes are stored into o and return -1 with *a = NULL; an argument that is not an
 * option, a shared option another family takes, or a missing value is a usage error (printed,
 * CLI_EXIT_USAGE); anything else returns -1 with *a the option and *v its value (*i moves onto
 * it), for the family's own table. */
int train_next_arg(int argc, char **argv, int *i, const train_family_info *fam, train_opts *o,
                   const char **a, const char **v);
/* After the loop: --out is required, --data unless --resume, and --resume refuses an option that
 * defines the run. -1 to go on, else the exit code (printed). */
int train_check_args(const train_family_info *fam, const train_opts *o);
/* The usage error for an option of no table (names the family). */
int train_unknown_option(const train_family_info *fam, const char *a);
/* Prints the family's whole --help text. */
void train_print_usage(const train_family_info *fam, FILE *f);

/* Mark a family option as run-defining, in its CLI_*_OPT row's THEN: TRAIN_FIXED(o, "--name"). */
#define TRAIN_FIXED(o, name) ((o)->fixed = (name))

/* The options the shared table stores that define the run, as "extra" fields of the checkpoint
 * (seed as a decimal string: a uint64), and back. opts_from_json leaves a field missing from an
 * older checkpoint at its value in o (the family's default). */
void train_opts_to_json(const train_opts *o, json_t *extra);
void train_opts_from_json(const json_t *extra, train_opts *o);

/* ==== the loop ============================================================================== */

typedef struct {
    double loss;   /* the step's training loss */
    double weight; /* its weight in the progress line's mean loss (1: all steps alike) */
    double tokens; /* the step's training tokens, for tokens/s (the family's definition) */
} train_step_out;

typedef struct {
    double loss;      /* validation loss */
    double bleu;      /* NaN when not measured */
    char detail[128]; /* shown after the loss and ppl ("(20 batches)", "BLEU ..."), or "" */
} train_eval_out;

typedef struct {
    void *ctx; /* the family's run, passed to every hook */
    /* The batch (or micro-batches) of step `step` (0-based: the step about to run). */
    attn_status (*next_batch)(void *ctx, int64_t step);
    /* The learning rate of that step (the family's schedule). */
    double (*lr_at)(void *ctx, int64_t step);
    /* Forward, loss and backward over the batch: the step's gradients in grads. */
    attn_status (*train_step)(void *ctx, int64_t step, train_step_out *out);
    /* Validation in evaluation mode; NULL: the run has no validation data. */
    attn_status (*evaluate)(void *ctx, train_eval_out *out);
    /* Where the data stands after the steps so far: the checkpoint's (epoch, position), and the
     * 1-based epoch shown in the progress line (0: the family has no epochs). */
    void (*position)(void *ctx, int64_t *epoch, int64_t *position, int64_t *shown_epoch);
    /* The run's options for the checkpoint's "extra" (a new object). */
    json_t *(*run_options)(void *ctx);
    /* After every checkpoint: what else the family writes (BERT: its Hugging Face files); NULL:
     * nothing. */
    attn_status (*save_extra)(void *ctx);

    /* The model and the optimizer (the family fills them; train_loop_free frees the tables and
     * the optimizer). */
    float *params, *grads;      /* (num_params) the model's flat buffers */
    attn_ckpt_tensor *tensors;  /* (n_tensors) the checkpoint's tensors */
    attn_optim_range *ranges;   /* (n_tensors) the optimizer's, with weight decay per tensor */
    int n_tensors;
    size_t num_params; /* floats of params and grads (train_loop_optim) */
    attn_optim *opt;   /* the whole optimizer; with ZeRO-1 only while a checkpoint loads or saves */
    /* ZeRO-1 (--zero1 with several ranks): this rank's share [zoff[rank], zoff[rank + 1]) of the
     * parameters, updated with its share of the optimizer state, then all-gathered */
    bool zero1;
    attn_optim *zopt;
    size_t *zoff;              /* (ranks + 1) */
    attn_optim_range *zranges; /* the share's weight-decay ranges */
    attn_ckpt_state cs; /* the checkpoint's state: loaded by train_loop_resume */

    const char *out;      /* DIR, named in the summary */
    const char *ckpt_dir; /* where checkpoints go: DIR, or BERT's DIR/checkpoint */
    const char *metrics;  /* --metrics FILE or NULL */
    bool resume;
    double grad_clip, time_budget;
    int64_t end_step; /* INT64_MAX: none (the time budget or Ctrl-C stops) */
    int64_t eval_every, save_every, log_every;
} train_loop;

/* The checkpoint and optimizer tables from a model's parameter table (attn_models.h: names,
 * shapes, offsets into params, decay), and AdamW over num_params floats with o's betas, eps and
 * weight decay (tensors with decay false get none). */
attn_status train_loop_tables(train_loop *L, const attn_param_info *t, int n, float *params);
attn_status train_loop_optim(train_loop *L, size_t num_params, const train_opts *o);
/* --resume: loads the checkpoint in ckpt_dir into the tensors, the optimizer and L->cs, and says
 * so ("resumed DIR at step N[ (epoch E, batch B)]"; with_epoch: the family counts epochs). A fresh
 * run: L->cs starts empty. */
attn_status train_loop_resume(train_loop *L, bool with_epoch);
/* Data-parallel replicas for a model of num_params floats: one per thread, each but the first
 * with its own gradient buffer — fewer when those buffers would pass 2 GiB (a large model's
 * matrices keep every thread busy inside the kernels anyway). */
int train_loop_replicas(size_t num_params);
/* Copies the shared stopping, logging and saving options into L (end_step from max_steps). */
void train_loop_set(train_loop *L, const train_opts *o);
/* Runs the loop to its end (or the time budget, or Ctrl-C): returns the exit code, having printed
 * the progress, validation and summary lines (or the error). */
int train_run(train_loop *L);
void train_loop_free(train_loop *L);

#endif

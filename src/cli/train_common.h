/* train_common.h — small pieces under the training loop (train_loop.h) that the training commands
 * (`attn train` for encdec, --arch bert, --arch gpt) use: the clock, Ctrl-C, the progress line,
 * the checkpoint tables, the output directory and the checkpoint save/resume plumbing. Internal
 * to the CLI. */
#ifndef ATTN_CLI_TRAIN_COMMON_H
#define ATTN_CLI_TRAIN_COMMON_H

#include "attn_core.h"
#include "attn_dist.h"
#include "attn_train.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Return the status of EXPR from the calling function when it fails. */
#define TRAIN_TRY(expr)                                                                          \
    do {                                                                                         \
        attn_status s_ = (expr);                                                                 \
        if (s_) return s_;                                                                       \
    } while (0)

/* ---- processes (`mpirun -np N attn train ...`) ---- */
/* The start of `attn train`: joins the MPI job when an MPI launcher started this process as one of
 * several ranks (attn_dist_init), and on every rank but 0 sends stdout to /dev/null (rank 0 alone
 * prints progress and validation); a build without MPI started so refuses (printed). -1 to go
 * on, else the exit code. */
int train_dist_begin(void);
/* The end: rc as is after MPI_Finalize; with several ranks a failure (rc != 0, its one line
 * already printed) ends the whole job through MPI_Abort instead, so that no rank waits on it. */
int train_dist_end(int rc);
/* Seconds train_dist_end waits, its line printed, before MPI_Abort (--comm-abort-delay): Open
 * MPI 4.1's mpirun cannot end a job after MPI_Abort while a node's daemon is unreachable (a failed
 * network), but ends it itself once its TCP keepalive notices the lost daemon; waiting longer than
 * that window lets it. 0 (the default): at once. */
void train_dist_set_abort_delay(double seconds);
/* The job (never NULL after train_dist_begin; one rank without MPI). */
attn_dist *train_dist(void);
/* Whether this process writes files (checkpoints, the metrics file, the tokenizer and
 * configuration of a fresh run): rank 0 only. */
bool train_writer(void);

/* ---- time, signals, progress ---- */

double train_now_s(void); /* a monotonic clock, in seconds */
/* "MM:SS", "H:MM:SS", or "--:--" for a negative, NaN or absurd (> 1e7 s) duration. */
void train_fmt_duration(double s, char *buf, size_t cap);
/* From now on SIGINT and SIGTERM only set a flag that train_stop_reason() reads. */
void train_catch_signals(void);
/* Why a run that started at t_start (train_now_s()) must stop before its next step:
 * "interrupted" (a signal came), "time budget reached" (time_budget seconds, 0: none, are over),
 * or NULL to go on. */
const char *train_stop_reason(double t_start, double time_budget);
/* Seconds left: the smaller of per_step x steps_left (steps_left < 0: unknown) and
 * time_budget - elapsed (time_budget 0: none); NaN when neither is known. */
double train_eta(double per_step, int64_t steps_left, double time_budget, double elapsed);
/* Prints "WHERE | loss L | lr X | N tok/s | MM:SS elapsed | ETA MM:SS\n" and flushes stdout;
 * WHERE is the caller's "step ..." head. */
void train_progress(const char *where, double loss, double lr, double tok_s, double elapsed,
                    double eta);
/* A front end other than the command line (the Python package, python/) follows training with a
 * hook set on the thread that trains (NULL: none): each progress line also calls
 * fn(ctx, step, ...) with its numbers, and a false return ends the run as an interrupt does
 * (train_stop_reason: "stopped by the caller"; the checkpoint is saved). */
typedef bool (*train_progress_hook_fn)(void *ctx, int64_t step, double loss, double lr,
                                       double tok_s, double elapsed, double eta);
void train_set_progress_hook(train_progress_hook_fn fn, void *ctx);
/* Called by the loop after each progress line: the hook, when set. */
void train_progress_notify(int64_t step, double loss, double lr, double tok_s, double elapsed,
                           double eta);

/* ---- small helpers ---- */

char *train_path_in(const char *dir, const char *name); /* malloc'ed "dir/name", NULL if OOM */
/* SplitMix64's finalizer: independent stream keys from (seed ^ purpose). */
uint64_t train_mix64(uint64_t x);

/* ---- checkpoints ---- */

/* Allocates the checkpoint tensor and optimizer range tables of a model with n tensors. */
attn_status train_tables_alloc(int n, attn_ckpt_tensor **tensors, attn_optim_range **ranges);
/* Entry i of both tables for the tensor `name` (ndim 1 or 2, shape (shape[0], shape[1])) at
 * params + offset, numel floats; decay: AdamW's weight decay applies. name must outlive them. */
void train_table_set(attn_ckpt_tensor *t, attn_optim_range *r, const char *name, int ndim,
                     const int64_t shape[2], float *params, size_t offset, size_t numel,
                     bool decay);
/* --out for a fresh run: creates DIR (an existing one is fine) and refuses one whose checkpoint
 * directory ckpt_dir (DIR itself or inside it) already holds a checkpoint. */
attn_status train_fresh_out(const char *dir, const char *ckpt_dir);
/* Loads the JSON file state_path (a checkpoint's training_state.json) into *root (the caller
 * json_decref's it); json_object_get(*root, "extra") holds the run's options. */
attn_status train_load_state_json(const char *state_path, json_t **root);
/* Records (step, epoch, position, lr) and the run's options `extra` (the state takes it over)
 * in cs, then writes the checkpoint to dir (attn_ckpt_save). */
attn_status train_save(const char *dir, const attn_ckpt_tensor *tensors, int ntensors,
                       attn_optim *opt, attn_ckpt_state *cs, int64_t step, int64_t epoch,
                       int64_t position, double lr, json_t *extra);

#endif

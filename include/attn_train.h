/* attn_train.h — training utilities: optimizers on flat parameter buffers (attn_optim_),
 * gradient clipping and checks, learning-rate schedules (attn_lr_), a deterministic counter-based
 * random generator (attn_rng_) and atomic checkpoints with exact resume (attn_ckpt_).
 *
 * Models keep all parameters in one contiguous float buffer, all gradients in another of the same
 * layout (llm.c style); the optimizer owns its moment buffers in the same layout.
 *
 *   attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
 *   op.beta2 = 0.98;
 *   attn_optim_range no_decay[] = {{ln_off, ln_len, false, "ln.weight"}};   // others decay
 *   attn_optim *opt;
 *   attn_optim_create(&op, n, no_decay, 1, &opt);
 *   for (int64_t step = 0; step < steps; step++) {
 *       attn_optim_zero_grad(grads, n);
 *       ... forward/backward into grads ...
 *       if (attn_optim_check_finite(grads, n, NULL, 0, NULL)) { skip or stop }
 *       double norm = attn_optim_clip_grad_norm(grads, n, 1.0);
 *       double lr = attn_lr_cosine(step, 6e-4, 6e-5, 200, 5000);
 *       attn_optim_step(opt, params, grads, lr);
 *   }
 *
 * Numerics: Adam, AdamW and SGD follow torch.optim (torch 1.13, single-tensor path) operation by
 * operation in float32, with the step-dependent scalars (bias corrections, step size) computed in
 * double as Python does, so results agree with PyTorch to a few float32 ulps (tests/test_train.c
 * measures it). The update is elementwise, so it is identical for any thread count; the gradient
 * norm sums fixed-size chunks in double and adds the chunk sums in order, so it too is independent
 * of the thread count — which exact resume relies on.
 *
 * All functions validate their arguments and return ATTN_STATUS_INVALID_ARGUMENT (with a one-line
 * attn_last_error()) on bad ones. The library never prints or exits. */
#ifndef ATTN_TRAIN_H
#define ATTN_TRAIN_H

#include "attn_core.h"
#include "attn_io.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== deterministic random numbers ========================================================== */

/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), a
 * counter-based generator: output word i of stream `seed` is word (i mod 4) of
 * Philox4x32-10(key = seed, counter = i / 4). The whole state is therefore (seed, counter) — two
 * integers that the checkpoint stores — and any position can be computed directly, so parallel
 * code (dropout over a buffer) can draw from disjoint counter ranges without sharing state.
 * Word 0 of (seed 0, counter 0) is 0x6627e8d5, the Random123 known answer. */
typedef struct {
    uint64_t seed;    /* the key (two 32-bit words, low first) */
    uint64_t counter; /* 32-bit words drawn so far */
    /* cache of the current block, derived from (seed, counter); not part of the saved state */
    uint64_t cached_block;
    uint32_t cache[4];
    bool cache_valid;
} attn_rng;

/* Start stream `seed` at position 0. */
void attn_rng_init(attn_rng *r, uint64_t seed);
/* Restore a state saved as (seed, counter). */
void attn_rng_set_state(attn_rng *r, uint64_t seed, uint64_t counter);
/* The four words of block `block` of stream `seed` (stateless). */
void attn_rng_block(uint64_t seed, uint64_t block, uint32_t out[4]);
/* Word `index` of stream `seed` (stateless; what attn_rng_u32 returns at that position). */
uint32_t attn_rng_at(uint64_t seed, uint64_t index);
uint32_t attn_rng_u32(attn_rng *r);
uint64_t attn_rng_u64(attn_rng *r); /* two words, the first in the low half */
/* Uniform in [0, 1): 24 random bits (one word). */
float attn_rng_uniform(attn_rng *r);
/* Uniform in [0, 1): 53 random bits (two words). */
double attn_rng_uniform_double(attn_rng *r);
/* Standard normal (Box–Muller on two doubles, four words; no hidden cached value, so the state
 * stays the pair (seed, counter)). */
double attn_rng_normal(attn_rng *r);
/* Uniform integer in [0, n) without modulo bias (Lemire's method; rejection draws extra words).
 * n == 0 returns 0. */
uint64_t attn_rng_below(attn_rng *r, uint64_t n);
/* Fisher–Yates shuffle of idx[0..n): a uniformly random permutation. */
void attn_rng_shuffle(attn_rng *r, uint32_t *idx, size_t n);
/* Skip n words (O(1)). */
void attn_rng_skip(attn_rng *r, uint64_t n);

/* ==== optimizers ============================================================================ */

typedef enum {
    ATTN_OPTIM_SGD = 0, /* torch.optim.SGD (momentum, dampening, nesterov, L2 weight decay) */
    ATTN_OPTIM_ADAM,    /* torch.optim.Adam (weight decay added to the gradient: L2) */
    ATTN_OPTIM_ADAMW    /* torch.optim.AdamW (decoupled weight decay) */
} attn_optim_kind;

typedef struct {
    attn_optim_kind kind;
    double beta1, beta2;  /* Adam/AdamW moment decay rates */
    double eps;           /* Adam/AdamW: added to sqrt(v_hat), not inside the sqrt (as torch) */
    double weight_decay;  /* applied to ranges with decay = true (and to uncovered elements) */
    double momentum;      /* SGD */
    double dampening;     /* SGD */
    bool nesterov;        /* SGD; needs momentum > 0 and dampening == 0 (as torch) */
} attn_optim_params;

/* torch's defaults for the kind: Adam betas (0.9, 0.999), eps 1e-8, weight decay 0; AdamW the
 * same with weight decay 0.01; SGD momentum 0, dampening 0, weight decay 0, no nesterov. The
 * learning rate is not a parameter: it is given to every attn_optim_step (see attn_lr_). */
attn_optim_params attn_optim_default_params(attn_optim_kind kind);

/* A named slice [offset, offset + length) of the flat buffer. Used to switch weight decay off
 * per parameter group (biases, LayerNorm gains) and to name the parameter in error messages.
 * name may be NULL. */
typedef struct {
    size_t offset, length;
    bool decay;
    const char *name;
} attn_optim_range;

typedef struct attn_optim attn_optim;

/* An optimizer for n parameters with zeroed state. ranges (may be NULL if nranges == 0) must lie
 * in [0, n) and not overlap; elements outside every range decay. The list is copied (names are
 * not: they must outlive the optimizer). */
attn_status attn_optim_create(const attn_optim_params *p, size_t n, const attn_optim_range *ranges,
                              int nranges, attn_optim **out);
void attn_optim_destroy(attn_optim *o);

/* One update of params (n floats) from grads with learning rate lr; increments the step count.
 *   Adam:  t += 1; g' = g + wd·p; m = β1·m + (1−β1)·g'; v = β2·v + (1−β2)·g'²;
 *          p −= lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + eps)
 *   AdamW: p *= 1 − lr·wd first, then the Adam update with g' = g
 *   SGD:   g' = g + wd·p; b = g' at the first step, else μ·b + (1−dampening)·g';
 *          p −= lr · (nesterov ? g' + μ·b : b)       (no momentum: p −= lr·g')
 * (wd is 0 on ranges with decay = false.) grads are not modified. */
attn_status attn_optim_step(attn_optim *o, float *params, const float *grads, double lr);

size_t attn_optim_size(const attn_optim *o);
int64_t attn_optim_step_count(const attn_optim *o);
const attn_optim_params *attn_optim_get_params(const attn_optim *o);
/* The state buffers (n floats each): Adam/AdamW first and second moments; SGD the momentum
 * buffer in *m and NULL in *v (NULL too when momentum == 0). Writable, for inspection and tests. */
void attn_optim_state(attn_optim *o, float **m, float **v);
/* Reset the state to that after `step` steps with the given buffers (copied; NULL = zeros). */
attn_status attn_optim_set_state(attn_optim *o, int64_t step, const float *m, const float *v);
/* "sgd", "adam", "adamw". */
const char *attn_optim_kind_name(attn_optim_kind k);
attn_status attn_optim_kind_parse(const char *name, attn_optim_kind *out);

/* ---- gradients ---- */

void attn_optim_zero_grad(float *grads, size_t n);

/* torch.nn.utils.clip_grad_norm_(max_norm, norm_type=2): total = ||grads||₂ over all n (summed in
 * double); if coef = max_norm / (total + 1e-6) < 1 every gradient is multiplied by (float)coef.
 * Returns total, the norm before clipping. A non-finite total is returned and nothing is scaled
 * (torch would scale by NaN; check with attn_optim_check_finite first). max_norm <= 0 or NaN only
 * computes the norm. */
double attn_optim_grad_norm(const float *grads, size_t n);
double attn_optim_clip_grad_norm(float *grads, size_t n, double max_norm);

/* The three calls of a training step in one: attn_optim_check_finite(grads, n, ranges,
 * nranges) (its error is returned, nothing changes), then attn_optim_clip_grad_norm(grads, n,
 * max_norm), then attn_optim_step(o, params, grads, lr) — with two passes fewer over the
 * gradients: the clipping factor is applied as the step reads them, so params and the state come
 * out bit-identical to the three calls while grads (n = the optimizer's size) is left unscaled.
 * *norm (may be NULL) receives the norm before clipping. max_norm <= 0: no clipping. */
attn_status attn_optim_clip_step(attn_optim *o, float *params, const float *grads, double max_norm,
                                 double lr, const attn_optim_range *ranges, int nranges,
                                 double *norm);

/* attn_optim_clip_step for a slice of a larger gradient buffer whose norm `total` (finite) was
 * measured over the whole buffer (attn_optim_grad_norm): the slice's parameters and state come out
 * bit-identical to that slice of attn_optim_clip_step over the whole buffer. ZeRO-1: each rank
 * updates its share of the parameters with its share of the optimizer state. */
attn_status attn_optim_clip_step_with_norm(attn_optim *o, float *params, const float *grads,
                                           double total, double max_norm, double lr);

/* ATTN_STATUS_OK if every gradient is finite. Otherwise ATTN_STATUS_INVALID_ARGUMENT with a message
 * naming the first bad index, its value (nan/inf) and, when ranges are given, the range's name and
 * the element within it, e.g. "gradient of 'h.0.attn.w_q'[17] (index 1041) is nan"; *first_bad
 * (may be NULL) receives the index. Fast when everything is finite (one vectorized pass). */
attn_status attn_optim_check_finite(const float *grads, size_t n, const attn_optim_range *ranges,
                                    int nranges, size_t *first_bad);

/* ==== learning-rate schedules ================================================================ */
/* Pure functions of the step (0-based: the number of optimizer steps already taken, i.e. the lr
 * used for update number step + 1). Each returns lr >= 0; invalid arguments give NAN. */

/* constant: lr. */
double attn_lr_constant(int64_t step, double lr);

/* "Noam" (Vaswani et al. 2017, eq. 3, as in The Annotated Transformer's rate()):
 *   lr = factor · d_model^−0.5 · min(s^−0.5, s · warmup^−1.5),  s = max(step, 1)
 * Linear warmup over `warmup` steps, then decay ∝ 1/sqrt(s); the peak, at s = warmup, is
 * factor · (d_model · warmup)^−0.5. (The Annotated Transformer calls it with step + 1 after
 * step updates; pass step + 1 for that convention.) */
double attn_lr_noam(int64_t step, double factor, int64_t d_model, int64_t warmup);

/* The same shape parameterized by its peak:  lr = peak · min(s / warmup, sqrt(warmup / s)),
 * s = max(step, 1); equals attn_lr_noam with factor = peak · sqrt(d_model · warmup). */
double attn_lr_inv_sqrt(int64_t step, double peak, int64_t warmup);

/* Warmup + cosine decay to min_lr (nanoGPT train.py get_lr(it)):
 *   step <  warmup:       lr · (step + 1) / (warmup + 1)
 *   step >  decay_steps:  min_lr
 *   otherwise:            min_lr + ½(1 + cos(π · (step − warmup) / (decay_steps − warmup))) ·
 *                         (lr − min_lr)
 * Needs warmup < decay_steps (else NAN unless step < warmup or step > decay_steps). */
double attn_lr_cosine(int64_t step, double lr, double min_lr, int64_t warmup, int64_t decay_steps);

/* Warmup + linear decay to 0 (Hugging Face get_linear_schedule_with_warmup, a LambdaLR whose
 * factor after `step` scheduler steps is):
 *   step < warmup:  step / max(1, warmup)
 *   otherwise:      max(0, (total − step) / max(1, total − warmup))
 * lr = base_lr · factor. Note the first update (step 0) uses lr 0 when warmup > 0, as in HF. */
double attn_lr_linear(int64_t step, double base_lr, int64_t warmup, int64_t total);

/* ==== checkpoints ============================================================================ */
/* A checkpoint is a directory DIR holding:
 *
 *   DIR/model.safetensors      the caller's named float32 tensors (attn_ckpt_tensor list), with
 *                              __metadata__ {"format": "pt"} (what transformers requires to load it).
 *   DIR/optimizer.safetensors  the optimizer state as flat F32 tensors of n elements:
 *                              "m" and "v" (Adam/AdamW first and second moments) or
 *                              "momentum_buffer" (SGD with momentum; no tensor without momentum),
 *                              __metadata__ {"kind": "adamw", "step": "1234", "n": "…"}.
 *   DIR/training_state.json    a JSON object, written last:
 *     "format_version": 1                 (ATTN_CKPT_FORMAT_VERSION; a newer one is refused)
 *     "library": "attn 0.1.0"
 *     "step", "epoch", "data_position":  integers (attn_ckpt_state)
 *     "lr": number, "best_valid_loss": number or null (none yet)
 *     "rng": {"NAME": {"seed": "DECIMAL", "counter": "DECIMAL"}, …}  (strings: uint64 does not
 *            fit a JSON integer portably)
 *     "optimizer": {"kind": "adamw", "step": int, "n": int, "beta1", "beta2", "eps",
 *                   "weight_decay", "momentum", "dampening", "nesterov"}  (echo; on load only
 *                   kind, n and step are used)
 *     "files": {"model.safetensors": {"bytes": int, "crc32": "8 hex digits"},
 *               "optimizer.safetensors": {...}}  CRC-32 (IEEE, as zlib's crc32) of each whole file
 *     "extra": any JSON value the caller gave (configuration echo, tokenizer path, …)
 *   Any other files in DIR (config.json, tokenizer.json, …) are not part of the checkpoint; a save
 *   keeps them (see below).
 *
 * Atomicity — at every instant DIR (or, on the fallback path, DIR.prev) holds one complete
 * checkpoint, old or new:
 *   1. everything is written into a fresh sibling directory DIR.tmp-XXXXXX (each file written to
 *      a temporary name, fsynced, renamed; the JSON last; then the directory fsynced). A failure
 *      here removes DIR.tmp-XXXXXX and leaves DIR untouched.
 *   2. other files of the old DIR are carried over into the new one: regular files by hard link
 *      (a copy where the file system cannot link), symbolic links recreated. DIR may not hold
 *      subdirectories (refused before anything is written) so that nothing ever has to move.
 *   Stale DIR.tmp-XXXXXX directories from crashed saves are removed at the start of a save; two
 *   saves into the same DIR must not run at the same time.
 *   3. Linux: renameat2(RENAME_EXCHANGE) swaps DIR.tmp-XXXXXX and DIR in one atomic step, then
 *      the old directory (now under the temporary name) is removed. Elsewhere, or where the file
 *      system refuses the exchange: DIR → DIR.prev, DIR.tmp-XXXXXX → DIR, remove DIR.prev; if a
 *      crash leaves DIR missing, attn_ckpt_load falls back to DIR.prev, and the next save
 *      completes the cleanup. The parent directory is fsynced after the renames.
 *   A crash may leave a DIR.tmp-XXXXXX behind: it is never loaded, and the next save removes it.
 *
 * Validation on load — each failure is one line naming the file and field: missing file
 * (ATTN_STATUS_IO), JSON that does not parse or lacks/mistypes a field, a format_version other than
 * 1, a file whose size or CRC-32 differs from the JSON (a torn or mixed checkpoint), a tensor
 * whose shape differs from the model's, a tensor missing or one the model does not have, an
 * optimizer of another kind or size (all ATTN_STATUS_FORMAT, missing tensors
 * ATTN_STATUS_NOT_FOUND). On failure the caller's buffers may be partly overwritten. */

#define ATTN_CKPT_FORMAT_VERSION 1
#define ATTN_CKPT_MAX_RNG 8
#define ATTN_CKPT_RNG_NAME 32

/* One model tensor: float32, C order. On save data is read; on load it is filled. */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    float *data;
} attn_ckpt_tensor;

struct json_t; /* jansson's json_t */

typedef struct {
    int64_t step;            /* optimizer updates completed */
    int64_t epoch;
    int64_t data_position;   /* where the data loader resumes (e.g. next batch within the epoch) */
    double lr;               /* the last learning rate used (informational) */
    double best_valid_loss;  /* INFINITY or NAN = none yet (stored as null, loaded as INFINITY) */
    int n_rng;               /* named generator states (dropout, shuffling, sampling, …) */
    struct {
        char name[ATTN_CKPT_RNG_NAME];
        attn_rng rng;
    } rng[ATTN_CKPT_MAX_RNG];
    /* save: NULL or a JSON value written as "extra" (borrowed).
     * load: a new reference to the saved "extra" (the caller json_decref()s it), or NULL. */
    struct json_t *extra;
} attn_ckpt_state;

/* Zeroed state, best_valid_loss = INFINITY. */
attn_ckpt_state attn_ckpt_state_init(void);
/* Add (or replace) the generator state `name` (at most ATTN_CKPT_RNG_NAME − 1 bytes). */
attn_status attn_ckpt_state_set_rng(attn_ckpt_state *st, const char *name, const attn_rng *r);
/* Restore generator `name` into *r; ATTN_STATUS_NOT_FOUND if absent. */
attn_status attn_ckpt_state_get_rng(const attn_ckpt_state *st, const char *name, attn_rng *r);

/* Save tensors[0..ntensors), the optimizer's state (opt may be NULL: no optimizer file) and st
 * into DIR atomically, as described above. dir's parent must exist. */
attn_status attn_ckpt_save(const char *dir, const attn_ckpt_tensor *tensors, int ntensors,
                           const attn_optim *opt, const attn_ckpt_state *st);

/* Validate the checkpoint in DIR (or DIR.prev, see above) and load it: every tensor in tensors
 * must be in model.safetensors with the same shape and vice versa; opt (may be NULL: the optimizer
 * file is then checked but not loaded) receives state and step count; st (may be NULL) the
 * training state. */
attn_status attn_ckpt_load(const char *dir, attn_ckpt_tensor *tensors, int ntensors,
                           attn_optim *opt, attn_ckpt_state *st);

/* Whether DIR (or DIR.prev) has a training_state.json — "is there something to resume".
 * Recovery: when a crash in the fallback swap left DIR missing and DIR.prev complete, this call
 * and attn_ckpt_load first rename DIR.prev back to DIR, so that DIR's other files (config.json,
 * tokenizer.json, ...) are where the caller reads them. Like saves, loads and this call must not
 * run while another process saves into the same DIR. */
bool attn_ckpt_exists(const char *dir);

/* CRC-32 (IEEE 802.3, reflected, as zlib crc32) of buf, continuing from crc (start with 0). */
uint32_t attn_crc32(uint32_t crc, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif

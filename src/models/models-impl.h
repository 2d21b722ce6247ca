/* models-impl.h — the model skeleton shared by every family (src/models): the parameter-table
 * builder, Hugging Face directory loading and saving driven by a per-family name map, and the
 * data-parallel trainer. Internal. */
#ifndef ATTN_MODELS_IMPL_H
#define ATTN_MODELS_IMPL_H

#include "attn_dist.h"
#include "attn_io.h"
#include "attn_models.h"
#include "attn_nn.h"
#include "attn_quant.h"

#include "../core/core-impl.h"

#include <stdarg.h>

/* ==== parameter layout ======================================================================= */

/* A family lays out its tensors by calling mdl_take in buffer order, once over the parameter
 * buffer while recording the table (t != NULL) and again over any other buffer of the same
 * layout (the gradients, a replica's gradients) to build its named views. */
/* Where one tensor of a layout lives when it is not in the parameter buffer (a model whose
 * tensors stay in a mapped file, src/models/gpt_gguf.c). */
typedef struct {
    float *f;          /* float32 data (in place or converted), or NULL when q holds it */
    const void *q;     /* quantized rows (out, in) of type qtype (attn_quant.h), or NULL */
    attn_qtype qtype;
    const attn_quant_packed *qp; /* q in the x8 layout (attn_quant_pack), or NULL */
    bool transposed;   /* a linear's weight stored (out, in) where the table says (in, out)
                          (GPT-2's Conv1D weights in a GGUF file) */
} mdl_src;

typedef struct {
    attn_param_info *t; /* the table being recorded (grown as needed), or NULL */
    int n, cap;
    bool oom;           /* recording ran out of memory */
    float *base;        /* the buffer the views point into (may be NULL: counting only) */
    size_t cursor;      /* floats used so far */
    const mdl_src *src; /* [tensors] when set: tensor i's views are src[i]'s, not base's */
    int idx;            /* tensors taken so far */
} mdl_layout;

/* Starts a layout over base; record: build the table too (free it with attn_free(L.t)). */
mdl_layout mdl_layout_begin(float *base, bool record);

/* The next tensor: ndim 1 (d1 ignored) or 2, its initialization, weight decay, and a
 * printf-style name. Returns its view (base + offset; NULL when base is NULL). */
#if defined(__GNUC__)
__attribute__((format(printf, 8, 9)))
#endif
float *mdl_take(mdl_layout *L, int ndim, int64_t d0, int64_t d1, attn_init_kind init, double scale,
                bool decay, const char *fmt, ...);

/* The views of a block layer piece, recorded under the given names (bname unused without a
 * bias). A norm's gain starts at 1, its bias at 0; a linear's bias at 0. */
attn_nn_norm mdl_take_norm(mdl_layout *L, attn_norm_kind kind, int dim, float eps, bool bias,
                           const char *wname, const char *bname);
attn_nn_linear mdl_take_linear(mdl_layout *L, int in, int out, attn_nn_layout layout, bool bias,
                               attn_init_kind init, double scale, const char *wname,
                               const char *bname);

/* ==== run states ============================================================================== */

/* Everything a training forward of sub-layer S keeps for backward over M rows (Mk key rows of a
 * cross-attention), from the arena (a->oom set on failure): norm output and statistics, residual
 * sum, dropout bits, and the attention's or the FFN's activations — uninitialized: the forward
 * writes each before anything reads it. *work grows to the sub-layer's backward scratch. */
void mdl_sub_acts_alloc(attn_arena *a, const attn_nn_sublayer *S, int M, int Mk,
                        attn_nn_sub_acts *A, size_t *work);

/* ==== weights in a model directory ============================================================ */

/* DIR's weights: DIR/model.safetensors or the shards of DIR/model.safetensors.index.json. A
 * directory with only PyTorch pickles is ATTN_STATUS_UNSUPPORTED saying how to convert. */
typedef struct mdl_weights mdl_weights;
attn_status mdl_weights_open(const char *dir, const char *what, mdl_weights **out);
void mdl_weights_close(mdl_weights *w);
/* The tensor called name in any shard (and its file), or NULL. */
const attn_st_tensor *mdl_weights_find(const mdl_weights *w, const char *name, attn_st_file **f);
/* Whether some tensor's name starts with prefix. */
bool mdl_weights_has_prefix(const mdl_weights *w, const char *prefix);
/* Every tensor name, one after the other: index i over [0, mdl_weights_count). */
int mdl_weights_count(const mdl_weights *w);
const char *mdl_weights_name(const mdl_weights *w, int i);
/* The path to name in messages: the one file, or the index. */
const char *mdl_weights_path(const mdl_weights *w);

/* The family's name map between its table and a checkpoint. */
typedef struct {
    /* The file's name of table entry t (0, 1, ... alternatives; false when there is no k-th):
     * k = 0 is the name written by mdl_save; later ones are accepted on load (old spellings). */
    bool (*file_name)(void *ctx, const attn_param_info *t, int k, char *buf, size_t cap);
    /* A file tensor that is in no table entry: true when it is to be ignored (buffers, heads the
     * model does not have); false makes it an error naming it. NULL: nothing is ignored. */
    bool (*ignorable)(void *ctx, const char *name);
    void *ctx;
} mdl_name_map;

/* Load every table entry (each must be present with its exact shape; F32, F16, BF16, F64 are
 * converted), then refuse tensors of the file that no entry took unless map->ignorable says so.
 * Messages name the file, the tensor and the expected shape. */
attn_status mdl_load_params(const mdl_weights *w, const attn_param_info *t, int n, float *params,
                            const mdl_name_map *map);
/* Write DIR/model.safetensors (atomically) with every entry under its first file name; entries
 * for which skip(ctx, t) is true are left out (tied aliases). meta: NULL-terminated key/value
 * pairs. */
attn_status mdl_save_params(const char *path, const attn_param_info *t, int n,
                            const float *params, const mdl_name_map *map, const char *const *meta);

/* "DIR/name" into buf; false (with an error recorded naming what) when it does not fit. */
bool mdl_dir_path(char *buf, size_t n, const char *dir, const char *name, const char *what);
/* Creates DIR when absent. */
attn_status mdl_make_dir(const char *dir, const char *what);
bool mdl_file_exists(const char *path);

/* ==== the data-parallel trainer ================================================================
 * One step's forward, loss and backward split over n replicas (one thread each, single-threaded
 * kernels inside): the batch's rows are cut into contiguous runs, replica i runs its run through
 * its own state, and the gradients are summed in replica order into the model's buffer (replica 0
 * accumulates straight into it, the others into private buffers zeroed by their own thread, summed
 * threaded over chunks: deterministic for a replica count). Each replica's loss gradient is scaled
 * by grad_scale · (its counted targets / the batch's), so the sum is the gradient of the whole
 * batch's mean loss; the loss is the same weighted mean. With one replica the family's own path
 * runs on the model itself, bit for bit the plain step. Dropout masks are indexed by global rows
 * (attn_nn_rows), so they depend on neither the split nor the replica count. */
/* The gradient sum overlapped with the backward (several ranks): a family's backward calls
 * mdl_grad_ready(&hook, p) after each layer, p the layer's first gradient in the buffer, when
 * every gradient from p to the end of the buffer is final for this backward — the layers run last
 * to first and the parameter table lists them first to last, with only what the backward's start
 * finishes (final norm, head) after them. fn NULL: nobody listens (the default). */
typedef struct {
    void (*fn)(void *ctx, size_t from);
    void *ctx;
    const float *base; /* the gradient buffer */
} mdl_grad_hook;

static inline void mdl_grad_ready(const mdl_grad_hook *h, const float *p) {
    if (h->fn && p && h->base && p >= h->base) h->fn(h->ctx, (size_t)(p - h->base));
}

typedef struct {
    /* Replica i's state for the capacity, accumulating into grads (the model's for i = 0). */
    attn_status (*replica_init)(void *family, int i, float *grads, void **replica);
    void (*replica_free)(void *replica);
    /* Targets of rows [b0, b1) of the batch that count for the loss. */
    double (*count)(void *family, const void *batch, int b0, int b1);
    /* Forward, loss (its mean over the run's counted targets into *loss) and, when backward,
     * the gradients of scale · loss accumulated into the replica's buffer. */
    attn_status (*run)(void *replica, const void *batch, int b0, int b1, bool backward,
                       bool training, uint64_t seed, uint64_t step, float scale, float *loss);
    /* Optional: the split of B rows over n replicas into bounds[0..n] (bounds[0] = 0, bounds[n] =
     * B, each run non-empty). NULL: near-equal row counts (the first B % n one longer). */
    void (*split)(void *family, const void *batch, int B, int n, int *bounds);
    /* Optional: the hook replica 0's backward calls (mdl_grad_hook); NULL: no overlap. */
    void (*set_hook)(void *replica, const mdl_grad_hook *hook);
} mdl_trainer_ops;

typedef struct mdl_trainer mdl_trainer;
/* The arguments every family's trainer takes: rows B >= 1, length T >= 1, replicas 1..256; the
 * message names what. */
attn_status mdl_trainer_args(const char *what, int B, int T, int n_replicas);
/* n_replicas 1..256, cut to max_rows; grads: the model's gradient buffer (num_params floats). */
attn_status mdl_trainer_init(const mdl_trainer_ops *ops, void *family, float *grads,
                             size_t num_params, int max_rows, int n_replicas, const char *what,
                             mdl_trainer **out);
void mdl_trainer_free(mdl_trainer *t);
int mdl_trainer_replicas(const mdl_trainer *t);
void *mdl_trainer_replica(const mdl_trainer *t, int i);
/* Several ranks (attn_dist.h; NULL: this process alone): mdl_trainer_step runs this rank's run
 * of the global batch, the replicas' loss gradients weighed over the global batch, and sums the
 * loss over the ranks; the caller all-reduces the gradients. */
void mdl_trainer_set_dist(mdl_trainer *t, attn_dist *d);
/* With several ranks and one replica on this rank: the backward of the next steps hands each
 * finished layer's gradients to attn_dist_grad_ready (the caller has called attn_dist_grad_begin
 * on the model's buffer, and calls attn_dist_grad_finish after the step). Only for a backward
 * after which the step's gradients are final (not for a micro-batch that more will add to). */
void mdl_trainer_set_overlap(mdl_trainer *t, bool on);
/* One step over B rows (backward: gradients of grad_scale · the batch's mean loss ADDED to the
 * model's buffer); *loss the batch's mean loss. */
attn_status mdl_trainer_step(mdl_trainer *t, const void *batch, int B, bool backward,
                             bool training, uint64_t seed, uint64_t step, float grad_scale,
                             float *loss);

#endif

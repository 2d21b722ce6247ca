/* gpt_dp.c — the data-parallel GPT training step (attn_gpt_trainer, attn_gpt.h).
 *
 * On a few cores the model's small matrices (width 128..384, a few hundred rows per step) leave
 * kernel-level threading dominated by OpenMP barriers: every GEMM, LayerNorm and attention call
 * forks and joins. Here the batch's sequences are split instead, one contiguous run per thread,
 * each replica running the whole forward, loss and backward with single-threaded kernels (the
 * kernels see omp_in_parallel() / an inactive nested region) on its own state. One fork and join
 * per step for the pass, one for the gradient sum.
 *
 * Exactness: replica i's loss gradient is scaled by grad_scale · counted_i / counted, so the sum of
 * the replicas' gradients is the gradient of the whole batch's mean loss; the states' row0 makes
 * each replica draw the whole-batch run's dropout masks for its rows. Replica 0 accumulates into
 * m->grads directly; the others into private buffers zeroed by their own thread, added to m->grads
 * in replica order afterwards (threaded over chunks: deterministic for a replica count). */
#include "attn_gpt.h"

#include "../core/core-impl.h"
#include "gpt-impl.h"
#include "models-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* One replica: a shallow copy of the model sharing its parameters but accumulating into its own
 * gradient buffer (replica 0 is the model itself), and a run state. */
typedef struct {
    attn_gpt_model view;  /* replicas > 0 */
    attn_gpt_model *mdl;  /* the model this replica runs (m, or &view) */
    attn_gpt_state *st;   /* capacity (rows, T) */
} replica;

struct attn_gpt_trainer {
    attn_gpt_model *m;
    int n;        /* replicas */
    int capB, capT;
    mdl_trainer *t;
};

/* One step's batch as the trainer's hooks see it. */
typedef struct {
    int T;
    const int32_t *ids, *targets; /* (B, T) */
} batch;

static void replica_free(void *p) {
    replica *r = p;
    if (!r) return;
    attn_gpt_state_free(r->st);
    if (r->mdl == &r->view) attn_free(r->view.g.h); /* the buffer is the trainer's */
    attn_free(r);
}

static attn_status replica_init(void *family, int i, float *grads, void **out) {
    attn_gpt_trainer *t = family;
    replica *r = attn_calloc(sizeof *r);
    if (!r) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt trainer: out of memory");
    r->mdl = t->m;
    if (i > 0) {
        r->view = *t->m;
        r->view.grads = grads;
        r->view.g.h = attn_calloc((size_t)t->m->cfg.n_layer * sizeof(attn_gpt_block));
        if (!r->view.g.h) {
            attn_free(r);
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt trainer: out of memory");
        }
        gpt_layout_grads(t->m, grads, &r->view.g);
        r->mdl = &r->view;
    }
    *out = r;
    /* Replica i's largest run is ceil(B / n) rows. */
    attn_status s = attn_gpt_state_init(r->mdl, (t->capB + t->n - 1) / t->n, t->capT, &r->st);
    if (s) {
        replica_free(r);
        *out = NULL;
    }
    return s;
}

static double count(void *family, const void *bp, int b0, int b1) {
    (void)family;
    const batch *b = bp;
    double cnt = 0;
    const int32_t *y = b->targets + (size_t)b0 * b->T;
    for (size_t k = 0; k < (size_t)(b1 - b0) * b->T; k++) cnt += y[k] != ATTN_GPT_IGNORE_INDEX;
    return cnt;
}

static attn_status run_rows(void *rp, const void *bp, int b0, int b1, bool backward,
                            bool training, uint64_t seed, uint64_t step, float scale,
                            float *loss) {
    replica *r = rp;
    const batch *b = bp;
    const size_t off = (size_t)b0 * b->T;
    attn_gpt_set_train(r->st, training, seed, step);
    gpt_state_set_row0(r->st, b0);
    ATTN_TRY(attn_gpt_forward(r->mdl, r->st, b1 - b0, b->T, b->ids + off, NULL));
    ATTN_TRY(attn_gpt_loss(r->mdl, r->st, b->targets + off, scale, loss));
    return backward ? attn_gpt_backward(r->mdl, r->st) : ATTN_STATUS_OK;
}

static void set_hook(void *rp, const mdl_grad_hook *h) {
    replica *r = rp;
    gpt_state_set_grad_hook(r->st, h);
}

static const mdl_trainer_ops ops = {replica_init, replica_free, count, run_rows, NULL, set_hook};

void attn_gpt_trainer_free(attn_gpt_trainer *t) {
    if (!t) return;
    mdl_trainer_free(t->t);
    attn_free(t);
}

int attn_gpt_trainer_replicas(const attn_gpt_trainer *t) { return t ? t->n : 0; }

void attn_gpt_trainer_set_dist(attn_gpt_trainer *t, attn_dist *d) {
    if (t) mdl_trainer_set_dist(t->t, d);
}

void attn_gpt_trainer_set_overlap(attn_gpt_trainer *t, bool on) {
    if (t) mdl_trainer_set_overlap(t->t, on);
}

attn_status attn_gpt_trainer_set_precision(attn_gpt_trainer *t, attn_precision precision) {
    if (!t) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt trainer: NULL trainer");
    for (int i = 0; i < t->n; i++) {
        replica *r = mdl_trainer_replica(t->t, i);
        ATTN_TRY(attn_gpt_state_set_precision(r->st, precision));
    }
    return ATTN_STATUS_OK;
}

attn_status attn_gpt_trainer_init(attn_gpt_model *m, int B, int T, int n_replicas,
                                  attn_gpt_trainer **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt trainer: NULL argument");
    *out = NULL;
    if (!m->grads)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt trainer: the model has no gradient buffer (attn_gpt_alloc_grads)");
    ATTN_TRY(mdl_trainer_args("gpt trainer", B, T, n_replicas));
    attn_gpt_trainer *t = attn_calloc(sizeof *t);
    if (!t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt trainer: out of memory");
    t->m = m, t->n = ATTN_MIN(n_replicas, B), t->capB = B, t->capT = T;
    attn_status s = mdl_trainer_init(&ops, t, m->grads, m->num_params, B, t->n, "gpt trainer",
                                     &t->t);
    if (s) {
        attn_gpt_trainer_free(t);
        return s;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

static attn_status run(attn_gpt_trainer *t, bool training, uint64_t seed, uint64_t step, int B,
                       int T, const int32_t *ids, const int32_t *targets, float grad_scale,
                       bool grads, float *loss) {
    if (!t || !ids || !targets || !loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt train step: NULL argument");
    if (B < 1 || T < 1 || B > t->capB || T > t->capT)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt train step: batch %d x %d outside the trainer's capacity %d x %d", B,
                         T, t->capB, t->capT);
    if (!isfinite(grad_scale))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt train step: grad_scale must be finite");
    const attn_gpt_model *m = t->m;
    /* Check the whole batch here so that messages name global positions, not a replica's. */
    ATTN_TRY(gpt_check_ids("gpt train step", &m->cfg, B, T, ids));
    for (size_t k = 0; k < (size_t)B * T; k++)
        if (targets[k] != ATTN_GPT_IGNORE_INDEX &&
            (targets[k] < 0 || targets[k] >= m->cfg.vocab_size))
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "gpt train step: target %d at (batch %d, position %d) is outside the "
                             "vocabulary [0, %d) and is not the ignore index %d",
                             (int)targets[k], (int)(k / (size_t)T), (int)(k % (size_t)T),
                             m->cfg.vocab_size, ATTN_GPT_IGNORE_INDEX);
    const batch b = {T, ids, targets};
    return mdl_trainer_step(t->t, &b, B, grads, training, seed, step, grad_scale, loss);
}

attn_status attn_gpt_train_step(attn_gpt_trainer *t, bool training, uint64_t seed, uint64_t step,
                                int B, int T, const int32_t *ids, const int32_t *targets,
                                float grad_scale, float *loss) {
    return run(t, training, seed, step, B, T, ids, targets, grad_scale, true, loss);
}

attn_status attn_gpt_trainer_eval(attn_gpt_trainer *t, int B, int T, const int32_t *ids,
                                  const int32_t *targets, float *loss) {
    return run(t, false, 0, 0, B, T, ids, targets, 1.0f, false, loss);
}

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

#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct {
    attn_gpt_model view;  /* replica 0: unused (the model itself); others: shallow copy with own grads */
    attn_gpt_model *mdl;  /* the model this replica runs (m, or &view) */
    attn_gpt_state *st;   /* capacity (rows, T) */
    int b0, B;            /* this micro-batch's run of sequences: [b0, b0 + B) */
    double counted;       /* targets of the run that count */
    float loss;           /* the run's mean loss */
    attn_status status;
    char err[1024];
} replica;

struct attn_gpt_trainer {
    attn_gpt_model *m;
    int n;        /* replicas */
    int capB, capT;
    replica *r;   /* [n] */
};

void attn_gpt_trainer_free(attn_gpt_trainer *t) {
    if (!t) return;
    for (int i = 0; t->r && i < t->n; i++) {
        replica *r = &t->r[i];
        attn_gpt_state_free(r->st);
        if (i > 0) {
            attn_free(r->view.grads);
            attn_free(r->view.g.h);
        }
    }
    attn_free(t->r);
    attn_free(t);
}

int attn_gpt_trainer_replicas(const attn_gpt_trainer *t) { return t ? t->n : 0; }

attn_status attn_gpt_trainer_set_precision(attn_gpt_trainer *t, attn_precision precision) {
    if (!t) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt trainer: NULL trainer");
    for (int i = 0; i < t->n; i++) ATTN_TRY(attn_gpt_state_set_precision(t->r[i].st, precision));
    return ATTN_STATUS_OK;
}

/* Rows of replica i when B rows split over n: the first B % n replicas get one more. */
static int rows_of(int B, int n, int i) { return B / n + (i < B % n ? 1 : 0); }

attn_status attn_gpt_trainer_init(attn_gpt_model *m, int B, int T, int n_replicas,
                                  attn_gpt_trainer **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt trainer: NULL argument");
    *out = NULL;
    if (!m->grads)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt trainer: the model has no gradient buffer (attn_gpt_alloc_grads)");
    if (B < 1 || T < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt trainer: B and T must be > 0 (got %d, %d)", B, T);
    if (n_replicas < 1 || n_replicas > 256)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt trainer: replicas must be 1..256 (got %d)", n_replicas);
    if (n_replicas > B) n_replicas = B;
    attn_gpt_trainer *t = attn_calloc(sizeof *t);
    if (!t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt trainer: out of memory");
    t->m = m, t->n = n_replicas, t->capB = B, t->capT = T;
    t->r = attn_calloc((size_t)t->n * sizeof *t->r);
    attn_status s = t->r ? ATTN_STATUS_OK
                         : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt trainer: out of memory");
    for (int i = 0; i < t->n && !s; i++) {
        replica *r = &t->r[i];
        if (i == 0) {
            r->mdl = m;
        } else {
            r->view = *m;
            r->view.grads = attn_alloc(m->num_params * sizeof(float));
            r->view.g.h = attn_calloc((size_t)m->cfg.n_layer * sizeof(attn_gpt_block));
            if (!r->view.grads || !r->view.g.h) {
                s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY,
                              "gpt trainer: out of memory for replica %d's %zu gradients", i,
                              m->num_params);
                break;
            }
            gpt_advise_huge_pages(r->view.grads, m->num_params * sizeof(float));
            gpt_layout_grads(&r->view, r->view.grads, &r->view.g);
            r->mdl = &r->view;
        }
        /* Replica i's largest run is ceil(B / n) rows. */
        s = attn_gpt_state_init(r->mdl, rows_of(B, t->n, 0), T, &r->st);
    }
    if (s) {
        attn_gpt_trainer_free(t);
        return s;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

/* Split B rows over the replicas; counted targets per run and in all. Returns replicas used. */
static int split(attn_gpt_trainer *t, int B, int T, const int32_t *targets, double *counted) {
    const int n = ATTN_MIN(t->n, B);
    int b0 = 0;
    *counted = 0;
    for (int i = 0; i < n; i++) {
        replica *r = &t->r[i];
        r->b0 = b0, r->B = rows_of(B, n, i);
        double cnt = 0;
        const int32_t *y = targets + (size_t)b0 * T;
        for (size_t k = 0; k < (size_t)r->B * T; k++) cnt += y[k] != ATTN_GPT_IGNORE_INDEX;
        r->counted = cnt;
        *counted += cnt;
        r->status = ATTN_STATUS_OK;
        r->loss = 0;
        b0 += r->B;
    }
    return n;
}

/* Forward, loss (and backward when grads) of replica r's rows; errors stay in r. */
static void replica_run(replica *r, bool training, uint64_t seed, uint64_t step, int T,
                        const int32_t *ids, const int32_t *targets, float scale, bool grads,
                        bool own_grads) {
    attn_gpt_model *v = r->mdl;
    const size_t off = (size_t)r->b0 * T;
    attn_gpt_set_train(r->st, training, seed, step);
    gpt_state_set_row0(r->st, r->b0);
    attn_status s = attn_gpt_forward(v, r->st, r->B, T, ids + off, NULL);
    if (!s) s = attn_gpt_loss(v, r->st, targets + off, scale, &r->loss);
    if (!s && grads) {
        if (own_grads) memset(v->grads, 0, v->num_params * sizeof(float));
        s = attn_gpt_backward(v, r->st);
    }
    r->status = s;
    if (s) snprintf(r->err, sizeof r->err, "%s", attn_last_error());
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
    attn_gpt_model *m = t->m;
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
    double counted;
    const int n = split(t, B, T, targets, &counted);
    if (n == 1) {
        /* The plain path: one state, the caller's threads inside the kernels. */
        replica_run(&t->r[0], training, seed, step, T, ids, targets, grad_scale, grads, false);
        if (t->r[0].status) return attn_fail(t->r[0].status, "%s", t->r[0].err);
        *loss = t->r[0].loss;
        return ATTN_STATUS_OK;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(n)
#endif
    {
        int i = 0, step_i = 1;
#ifdef _OPENMP
        i = omp_get_thread_num(), step_i = omp_get_num_threads();
#endif
        for (; i < n; i += step_i) {
            replica *r = &t->r[i];
            const double w = counted > 0 ? r->counted / counted : 0.0;
            replica_run(r, training, seed, step, T, ids, targets, (float)(grad_scale * w), grads,
                        i > 0);
        }
    }
    for (int i = 0; i < n; i++)
        if (t->r[i].status) return attn_fail(t->r[i].status, "%s", t->r[i].err);
    double l = 0;
    for (int i = 0; i < n; i++)
        if (counted > 0) l += t->r[i].counted / counted * (double)t->r[i].loss;
    *loss = (float)l;
    if (!grads) return ATTN_STATUS_OK;
    /* m->grads += replicas 1.. in order, threaded over chunks of the buffer. */
    const size_t P = m->num_params, CH = 16384;
    float *g = m->grads;
    const long nchunk = (long)((P + CH - 1) / CH);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(n) if (nchunk > 1)
#endif
    for (long c = 0; c < nchunk; c++) {
        const size_t a = (size_t)c * CH, e = ATTN_MIN(P, a + CH);
        for (int i = 1; i < n; i++) {
            const float *gi = t->r[i].view.grads;
            for (size_t k = a; k < e; k++) g[k] += gi[k];
        }
    }
    return ATTN_STATUS_OK;
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

/* trainer.c — the one data-parallel trainer of every family (models-impl.h).
 *
 * On a few cores the small matrices of the models trained here (width 128..512, a few hundred
 * rows per step) leave kernel-level threading dominated by OpenMP barriers: every GEMM,
 * LayerNorm and attention call forks and joins. So the batch's rows are split instead, one
 * contiguous run per thread, each replica running the whole forward, loss and backward with
 * single-threaded kernels (the kernels see an active parallel region) on its own state. One fork
 * and join per step for the pass, one for the gradient sum.
 *
 * Exactness: replica i's loss gradient is scaled by grad_scale · counted_i / counted, so the sum
 * of the replicas' gradients is the gradient of the whole batch's mean loss; the families number
 * their rows globally for dropout. Replica 0 accumulates into the model's buffer directly; the
 * others into private buffers zeroed by their own thread, added to the model's in replica order
 * afterwards (threaded over chunks: deterministic for a replica count).
 *
 * Several processes (attn_dist.h, mdl_trainer_set_dist): every rank holds the same global batch;
 * the rows are first split over the ranks (the family's split, or near-equal rows), then this
 * rank's run over its replicas, each weighed over the GLOBAL batch's counted targets (counted
 * from the batch every rank holds: no message); the loss is summed over the ranks here, the
 * gradients by the caller (attn_dist_grad_*), and with one replica on the rank the family's
 * backward hands finished layers to attn_dist_grad_ready as it goes (the overlap). One process
 * takes exactly the path it took before. */
#include "models-impl.h"

#include "attn_dist.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct {
    void *st;      /* the family's replica */
    float *grads;  /* the model's (i = 0) or a private buffer */
    int b0, b1;    /* this step's run of rows */
    double counted;
    float loss;
    attn_status status;
    char err[1024];
} replica;

struct mdl_trainer {
    const mdl_trainer_ops *ops;
    void *family;
    size_t P;      /* floats of a gradient buffer */
    int n;         /* replicas */
    int max_rows;
    int *bounds;   /* (n + 1) */
    replica *r;    /* [n] */
    attn_dist *dist; /* NULL or one rank: the batch is this process's alone */
    int *rank_bounds; /* (size + 1): the ranks' runs of the global batch */
    int rank_cap;
    bool overlap;        /* mdl_trainer_set_overlap */
    bool hook_on;        /* this step's backward hands finished gradients to the dist */
    attn_status hook_status;
    char hook_err[512];
};

void mdl_trainer_free(mdl_trainer *t) {
    if (!t) return;
    for (int i = 0; t->r && i < t->n; i++) {
        if (t->r[i].st) t->ops->replica_free(t->r[i].st);
        if (i > 0) attn_free(t->r[i].grads);
    }
    attn_free(t->r);
    attn_free(t->bounds);
    attn_free(t->rank_bounds);
    attn_free(t);
}

void mdl_trainer_set_dist(mdl_trainer *t, attn_dist *d) {
    if (t) t->dist = d;
}

void mdl_trainer_set_overlap(mdl_trainer *t, bool on) {
    if (t) t->overlap = on;
}

/* Replica 0's backward: gradients [from, P) are final. */
static void grad_hook(void *ctx, size_t from) {
    mdl_trainer *t = ctx;
    if (!t->hook_on || t->hook_status) return;
    t->hook_status = attn_dist_grad_ready(t->dist, from);
    if (t->hook_status) snprintf(t->hook_err, sizeof t->hook_err, "%s", attn_last_error());
}

int mdl_trainer_replicas(const mdl_trainer *t) { return t ? t->n : 0; }

void *mdl_trainer_replica(const mdl_trainer *t, int i) {
    return t && i >= 0 && i < t->n ? t->r[i].st : NULL;
}

attn_status mdl_trainer_args(const char *what, int B, int T, int n_replicas) {
    if (B < 1 || T < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: B and T must be > 0 (got %d, %d)",
                         what, B, T);
    if (n_replicas < 1 || n_replicas > 256)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: replicas must be 1..256 (got %d)",
                         what, n_replicas);
    return ATTN_STATUS_OK;
}

attn_status mdl_trainer_init(const mdl_trainer_ops *ops, void *family, float *grads,
                             size_t num_params, int max_rows, int n_replicas, const char *what,
                             mdl_trainer **out) {
    *out = NULL;
    if (!grads)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "%s: the model has no gradient buffer", what);
    if (max_rows < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: the batch must have rows (got %d)",
                         what, max_rows);
    if (n_replicas < 1 || n_replicas > 256)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: replicas must be 1..256 (got %d)",
                         what, n_replicas);
    if (n_replicas > max_rows) n_replicas = max_rows;
    mdl_trainer *t = attn_calloc(sizeof *t);
    if (!t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", what);
    t->ops = ops, t->family = family, t->P = num_params, t->n = n_replicas;
    t->max_rows = max_rows;
    t->r = attn_calloc((size_t)t->n * sizeof *t->r);
    t->bounds = attn_calloc(((size_t)t->n + 1) * sizeof *t->bounds);
    attn_status s = t->r && t->bounds
                        ? ATTN_STATUS_OK
                        : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", what);
    for (int i = 0; i < t->n && !s; i++) {
        replica *r = &t->r[i];
        r->grads = grads;
        if (i > 0) {
            r->grads = attn_alloc(num_params * sizeof(float));
            if (!r->grads) {
                s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY,
                              "%s: out of memory for replica %d's %zu gradients", what, i,
                              num_params);
                break;
            }
            attn_advise_huge_pages(r->grads, num_params * sizeof(float));
        }
        s = ops->replica_init(family, i, r->grads, &r->st);
        if (!s && i == 0 && ops->set_hook) {
            const mdl_grad_hook h = {grad_hook, t, grads};
            ops->set_hook(r->st, &h);
        }
    }
    if (s) {
        mdl_trainer_free(t);
        return s;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

static void replica_step(mdl_trainer *t, int i, const void *batch, bool backward, bool training,
                         uint64_t seed, uint64_t step, float scale) {
    replica *r = &t->r[i];
    if (backward && i > 0) attn_params_zero(r->grads, t->P);
    r->status = t->ops->run(r->st, batch, r->b0, r->b1, backward, training, seed, step, scale,
                            &r->loss);
    if (r->status) snprintf(r->err, sizeof r->err, "%s", attn_last_error());
}

/* Runs replicas 0..n-1 (bounds and counted set): the plain path for one, else one thread each;
 * the first failure's status. */
static attn_status run_replicas(mdl_trainer *t, int n, const void *batch, bool backward,
                                bool training, uint64_t seed, uint64_t step, float grad_scale,
                                double counted, bool weigh_one) {
    if (n == 1) {
        const double w = weigh_one ? (counted > 0 ? t->r[0].counted / counted : 0.0) : 1.0;
        replica_step(t, 0, batch, backward, training, seed, step, (float)(grad_scale * w));
        if (t->r[0].status) return attn_fail(t->r[0].status, "%s", t->r[0].err);
        return ATTN_STATUS_OK;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(n)
#endif
    {
        int i = 0, stride = 1;
#ifdef _OPENMP
        i = omp_get_thread_num(), stride = omp_get_num_threads();
#endif
        for (; i < n; i += stride) {
            const double w = counted > 0 ? t->r[i].counted / counted : 0.0;
            replica_step(t, i, batch, backward, training, seed, step, (float)(grad_scale * w));
        }
    }
    for (int i = 0; i < n; i++)
        if (t->r[i].status) return attn_fail(t->r[i].status, "%s", t->r[i].err);
    return ATTN_STATUS_OK;
}

/* The model's gradients += replicas 1..n-1 in order, threaded over chunks of the buffer. */
static void sum_replica_grads(mdl_trainer *t, int n) {
    const size_t P = t->P, CH = 16384;
    float *g = t->r[0].grads;
    const long nchunk = (long)((P + CH - 1) / CH);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(n) if (nchunk > 1)
#endif
    for (long c = 0; c < nchunk; c++) {
        const size_t a = (size_t)c * CH, e = ATTN_MIN(P, a + CH);
        for (int i = 1; i < n; i++) {
            const float *gi = t->r[i].grads;
            for (size_t k = a; k < e; k++) g[k] += gi[k];
        }
    }
}

/* Several ranks: every rank holds the same global batch of B rows and runs its own contiguous
 * run of it (the family's split over the ranks), cut again over its replicas; each replica's
 * loss gradient is weighed by its counted targets over the GLOBAL batch's (every rank counts
 * them from the batch it holds: no message), so the sum over every rank's replicas — the
 * caller's all-reduce of the gradient buffers — is the gradient of the whole batch's mean loss,
 * and the rows keep their global numbers for dropout. The loss is summed over the ranks here. */
static attn_status step_ranks(mdl_trainer *t, const void *batch, int B, bool backward,
                              bool training, uint64_t seed, uint64_t step, float grad_scale,
                              float *loss) {
    const int S = attn_dist_size(t->dist), me = attn_dist_rank(t->dist);
    if (t->rank_cap < S + 1) {
        attn_free(t->rank_bounds);
        t->rank_bounds = attn_alloc((size_t)(S + 1) * sizeof(int));
        if (!t->rank_bounds) {
            t->rank_cap = 0;
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "trainer: out of memory");
        }
        t->rank_cap = S + 1;
    }
    int *rb = t->rank_bounds;
    if (B >= S && t->ops->split) {
        t->ops->split(t->family, batch, B, S, rb);
    } else { /* near-equal rows; with fewer rows than ranks the last ranks get none */
        rb[0] = 0;
        for (int i = 0; i < S; i++) rb[i + 1] = rb[i] + B / S + (i < B % S ? 1 : 0);
    }
    const int R0 = rb[me], rows = rb[me + 1] - rb[me];
    const double counted = t->ops->count(t->family, batch, 0, B);
    const int n = ATTN_MIN(t->n, rows);
    int *bd = t->bounds;
    bd[0] = R0;
    for (int i = 0; i < n; i++) bd[i + 1] = bd[i] + rows / n + (i < rows % n ? 1 : 0);
    for (int i = 0; i < n; i++) {
        replica *r = &t->r[i];
        r->b0 = bd[i], r->b1 = bd[i + 1];
        r->counted = t->ops->count(t->family, batch, r->b0, r->b1);
        r->loss = 0;
        r->status = ATTN_STATUS_OK;
    }
    double l = 0;
    if (n > 0) {
        /* one replica: replica 0's backward writes straight into the model's buffer, so each
         * finished layer can be summed over the ranks while the earlier layers run */
        t->hook_on = backward && t->overlap && n == 1;
        t->hook_status = ATTN_STATUS_OK;
        attn_status s = run_replicas(t, n, batch, backward, training, seed, step, grad_scale,
                                     counted, true);
        t->hook_on = false;
        ATTN_TRY(s);
        if (t->hook_status) return attn_fail(t->hook_status, "%s", t->hook_err);
        for (int i = 0; i < n; i++)
            if (counted > 0) l += t->r[i].counted / counted * (double)t->r[i].loss;
        if (backward && n > 1) sum_replica_grads(t, n);
    }
    ATTN_TRY(attn_dist_allreduce_f64(t->dist, &l, 1, ATTN_DIST_SUM));
    *loss = (float)l;
    return ATTN_STATUS_OK;
}

attn_status mdl_trainer_step(mdl_trainer *t, const void *batch, int B, bool backward,
                             bool training, uint64_t seed, uint64_t step, float grad_scale,
                             float *loss) {
    if (!t || !loss) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "trainer: NULL argument");
    if (!isfinite(grad_scale))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "trainer: grad_scale must be finite");
    if (attn_dist_size(t->dist) > 1)
        return step_ranks(t, batch, B, backward, training, seed, step, grad_scale, loss);
    const int n = ATTN_MIN(t->n, B);
    int *bd = t->bounds;
    if (n > 1 && t->ops->split) {
        t->ops->split(t->family, batch, B, n, bd);
    } else {
        bd[0] = 0;
        for (int i = 0; i < n; i++) bd[i + 1] = bd[i] + B / n + (i < B % n ? 1 : 0);
    }
    double counted = 0;
    for (int i = 0; i < n; i++) {
        replica *r = &t->r[i];
        r->b0 = bd[i], r->b1 = bd[i + 1];
        r->counted = n > 1 ? t->ops->count(t->family, batch, r->b0, r->b1) : 0;
        counted += r->counted;
        r->loss = 0;
        r->status = ATTN_STATUS_OK;
    }
    if (n == 1) {
        /* The plain path: one state, the caller's threads inside the kernels. */
        ATTN_TRY(run_replicas(t, 1, batch, backward, training, seed, step, grad_scale, counted,
                              false));
        *loss = t->r[0].loss;
        return ATTN_STATUS_OK;
    }
    ATTN_TRY(run_replicas(t, n, batch, backward, training, seed, step, grad_scale, counted, true));
    double l = 0;
    for (int i = 0; i < n; i++)
        if (counted > 0) l += t->r[i].counted / counted * (double)t->r[i].loss;
    *loss = (float)l;
    if (backward) sum_replica_grads(t, n);
    return ATTN_STATUS_OK;
}

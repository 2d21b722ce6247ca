/* bert_dp.c — the data-parallel masked-LM training step (attn_bert_trainer, attn_bert.h): BERT's
 * hooks for the one trainer of src/models/trainer.c. A replica runs a contiguous run of the
 * batch's sequences; its rows' dropout masks are those of the batch's packed rows (the state's
 * row0 = the packed offset of its first sequence), and its loss gradient is scaled by its share
 * of the batch's labelled positions. */
#include "attn_bert.h"

#include "bert-impl.h"
#include "models-impl.h"

#include <string.h>

typedef struct {
    attn_bert_model view; /* replicas > 0: parameters shared, gradients the trainer's buffer */
    attn_bert_model *mdl; /* the model this replica runs (m, or &view) */
    attn_bert_state *st;
} replica;

struct attn_bert_trainer {
    attn_bert_model *m;
    int n, capB, capT;
    mdl_trainer *t;
};

typedef struct {
    int T;
    const int32_t *ids, *types, *lengths, *labels; /* (B, T), (B, T) or NULL, (B) or NULL, (B, T) */
} batch;

static void replica_free(void *p) {
    replica *r = p;
    if (!r) return;
    attn_bert_state_free(r->st);
    if (r->mdl == &r->view) attn_free(r->view.g.layers);
    attn_free(r);
}

static attn_status replica_init(void *family, int i, float *grads, void **out) {
    attn_bert_trainer *t = family;
    replica *r = attn_calloc(sizeof *r);
    if (!r) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert trainer: out of memory");
    r->mdl = t->m;
    if (i > 0) {
        r->view = *t->m;
        r->view.grads = grads;
        r->view.packed = NULL;
        r->view.g.layers = attn_calloc((size_t)t->m->cfg.num_hidden_layers *
                                       sizeof(attn_bert_layer));
        if (!r->view.g.layers) {
            attn_free(r);
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert trainer: out of memory");
        }
        bert_layout_grads(t->m, grads, &r->view.g);
        r->mdl = &r->view;
    }
    *out = r;
    attn_status s = attn_bert_state_init(r->mdl, (t->capB + t->n - 1) / t->n, t->capT, &r->st);
    if (s) {
        replica_free(r);
        *out = NULL;
    }
    return s;
}

static double count(void *family, const void *bp, int b0, int b1) {
    (void)family;
    const batch *b = bp;
    double n = 0;
    for (size_t k = (size_t)b0 * b->T; k < (size_t)b1 * b->T; k++)
        n += b->labels[k] != ATTN_BERT_IGNORE_INDEX;
    return n;
}

static attn_status run_rows(void *rp, const void *bp, int b0, int b1, bool backward,
                            bool training, uint64_t seed, uint64_t step, float scale,
                            float *loss) {
    replica *r = rp;
    const batch *b = bp;
    const size_t off = (size_t)b0 * b->T;
    int64_t row0 = 0;
    for (int i = 0; i < b0; i++) row0 += b->lengths ? b->lengths[i] : b->T;
    attn_bert_set_train(r->st, training, seed, step);
    bert_state_set_keep(r->st, backward);
    bert_state_set_row0(r->st, row0);
    ATTN_TRY(attn_bert_forward(r->mdl, r->st, b1 - b0, b->T, b->ids + off,
                               b->types ? b->types + off : NULL,
                               b->lengths ? b->lengths + b0 : NULL, NULL));
    ATTN_TRY(bert_mlm_loss(r->mdl, r->st, b->labels + off, scale, loss));
    return backward ? attn_bert_backward(r->mdl, r->st) : ATTN_STATUS_OK;
}

static void set_hook(void *rp, const mdl_grad_hook *h) {
    replica *r = rp;
    bert_state_set_grad_hook(r->st, h);
}

static const mdl_trainer_ops ops = {replica_init, replica_free, count, run_rows, NULL, set_hook};

void attn_bert_trainer_free(attn_bert_trainer *t) {
    if (!t) return;
    mdl_trainer_free(t->t);
    attn_free(t);
}

int attn_bert_trainer_replicas(const attn_bert_trainer *t) { return t ? t->n : 0; }

void attn_bert_trainer_set_dist(attn_bert_trainer *t, attn_dist *d) {
    if (t) mdl_trainer_set_dist(t->t, d);
}

void attn_bert_trainer_set_overlap(attn_bert_trainer *t, bool on) {
    if (t) mdl_trainer_set_overlap(t->t, on);
}

attn_status attn_bert_trainer_init(attn_bert_model *m, int B, int T, int n_replicas,
                                   attn_bert_trainer **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert trainer: NULL argument");
    *out = NULL;
    if (!m->has_mlm)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert trainer: the model has no masked-LM head");
    ATTN_TRY(mdl_trainer_args("bert trainer", B, T, n_replicas));
    attn_bert_trainer *t = attn_calloc(sizeof *t);
    if (!t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert trainer: out of memory");
    t->m = m, t->n = ATTN_MIN(n_replicas, B), t->capB = B, t->capT = T;
    attn_status s = mdl_trainer_init(&ops, t, m->grads, m->num_params, B, t->n, "bert trainer",
                                     &t->t);
    if (s) {
        attn_bert_trainer_free(t);
        return s;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

static attn_status run(attn_bert_trainer *t, bool training, uint64_t seed, uint64_t step, int B,
                       int T, const int32_t *ids, const int32_t *types, const int32_t *lengths,
                       const int32_t *labels, float grad_scale, bool grads, float *loss) {
    if (!t || !ids || !labels || !loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert train step: NULL argument");
    if (B < 1 || T < 1 || B > t->capB || T > t->capT)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert train step: batch %d x %d outside the trainer's capacity %d x %d",
                         B, T, t->capB, t->capT);
    for (int b = 0; lengths && b < B; b++)
        if (lengths[b] < 1 || lengths[b] > T)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "bert train step: lengths[%d] = %d outside [1, %d]", b,
                             (int)lengths[b], T);
    /* Check the whole batch's labels here so that messages name global positions. */
    int n;
    ATTN_TRY(bert_count_labels(t->m, B, T, lengths, labels, &n));
    const batch b = {T, ids, types, lengths, labels};
    return mdl_trainer_step(t->t, &b, B, grads, training, seed, step, grad_scale, loss);
}

attn_status attn_bert_train_step(attn_bert_trainer *t, bool training, uint64_t seed,
                                 uint64_t step, int B, int T, const int32_t *ids,
                                 const int32_t *type_ids, const int32_t *lengths,
                                 const int32_t *labels, float grad_scale, float *loss) {
    return run(t, training, seed, step, B, T, ids, type_ids, lengths, labels, grad_scale, true,
               loss);
}

attn_status attn_bert_trainer_eval(attn_bert_trainer *t, int B, int T, const int32_t *ids,
                                   const int32_t *type_ids, const int32_t *lengths,
                                   const int32_t *labels, float *loss) {
    return run(t, false, 0, 0, B, T, ids, type_ids, lengths, labels, 1.0f, false, loss);
}

/* encdec_dp.c — the data-parallel training step of the encoder–decoder (attn_encdec_trainer,
 * attn_models.h): its hooks for the one trainer of src/models/trainer.c. A replica runs a
 * contiguous run of the batch's sentence pairs with its own padding trimmed (its longest source
 * and target), numbering its rows as the whole batch's for dropout; its loss gradient is scaled
 * by its share of the batch's counted (non-pad) targets. */
#include "attn_models.h"

#include "encdec-impl.h"
#include "models-impl.h"

#include <math.h>
#include <string.h>

typedef struct {
    attn_encdec_model view;  /* replicas > 0: params/tables borrowed, gradients the trainer's */
    attn_encdec_model *mdl;  /* the model this replica runs (m, or &view) */
    attn_encdec_state *st;
    int32_t *src, *src_len;  /* (capB, capTs), (capB): this step's trimmed run */
    int32_t *tin, *tout;     /* (capB, capTt) */
    int32_t *tgt_len;        /* (capB) */
} replica;

struct attn_encdec_trainer {
    attn_encdec_model *m;
    int n, capB, capTs, capTt;
    int32_t *suf_s, *suf_t;  /* (capB) suffix maxima of the lengths (the split's scratch) */
    mdl_trainer *t;
};

typedef struct {
    int B, Ts, Tt;
    const int32_t *src, *src_len, *tin, *tgt_len, *tout;
    float ls;
} batch;

static void replica_free(void *p) {
    replica *r = p;
    if (!r) return;
    attn_encdec_state_free(r->st);
    if (r->mdl == &r->view) {
        attn_free(r->view.g.enc);
        attn_free(r->view.g.dec);
    }
    attn_free(r->src), attn_free(r->src_len), attn_free(r->tin), attn_free(r->tout);
    attn_free(r->tgt_len);
    attn_free(r);
}

static attn_status replica_init(void *family, int i, float *grads, void **out) {
    attn_encdec_trainer *t = family;
    const attn_encdec_model *m = t->m;
    replica *r = attn_calloc(sizeof *r);
    if (!r) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec trainer: out of memory");
    *out = r;
    r->mdl = t->m;
    attn_status s = ATTN_STATUS_OK;
    if (i > 0) {
        r->view = *m;
        r->view.grads = grads;
        r->view.g.enc = attn_calloc((size_t)m->cfg.n_enc_layers * sizeof(attn_encdec_enc_layer));
        r->view.g.dec = attn_calloc((size_t)m->cfg.n_dec_layers * sizeof(attn_encdec_dec_layer));
        r->mdl = &r->view;
        if (!r->view.g.enc || !r->view.g.dec)
            s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec trainer: out of memory");
        else
            encdec_layout_grads(m, grads, &r->view.g);
    }
    /* A replica may get all rows but one's share; size it for the whole batch. */
    const size_t B = (size_t)t->capB;
    r->src = attn_alloc(B * t->capTs * sizeof(int32_t));
    r->src_len = attn_alloc(B * sizeof(int32_t));
    r->tin = attn_alloc(B * t->capTt * sizeof(int32_t));
    r->tout = attn_alloc(B * t->capTt * sizeof(int32_t));
    r->tgt_len = attn_alloc(B * sizeof(int32_t));
    if (!s && (!r->src || !r->src_len || !r->tin || !r->tout || !r->tgt_len))
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec trainer: out of memory");
    if (!s) s = attn_encdec_state_init(r->mdl, t->capB, t->capTs, t->capTt, &r->st);
    if (s) {
        replica_free(r);
        *out = NULL;
    }
    return s;
}

/* Rows [b0, b1)'s longest source and target. */
static void run_lengths(const batch *b, int b0, int b1, int *Ts, int *Tt) {
    *Ts = 1, *Tt = 1;
    for (int i = b0; i < b1; i++) {
        *Ts = ATTN_MAX(*Ts, b->src_len[i]);
        *Tt = ATTN_MAX(*Tt, b->tgt_len[i]);
    }
}

static double count(void *family, const void *bp, int b0, int b1) {
    const attn_encdec_trainer *t = family;
    const batch *b = bp;
    int Ts, Tt;
    run_lengths(b, b0, b1, &Ts, &Tt);
    (void)Ts;
    double cnt = 0;
    for (int i = b0; i < b1; i++)
        for (int k = 0; k < Tt; k++) cnt += b->tout[(size_t)i * b->Tt + k] != t->m->cfg.pad_id;
    return cnt;
}

/* Contiguous runs of about equal work. Two replicas: the split point that minimizes the larger
 * replica's padded work, a run of r rows costing r·(a·max Ts + b·max Tt) with a, b the
 * multiply-adds per source and per target position (the attention's T² terms are a few percent
 * here and left out); splitting by token counts alone left one replica idle up to ~20% of a step
 * when the lengths differ. More replicas: equal shares of source + target tokens. */
static void split(void *family, const void *bp, int B, int n, int *bd) {
    attn_encdec_trainer *t = family;
    const batch *b = bp;
    bd[0] = 0, bd[n] = B;
    if (n == 2) {
        const attn_encdec_config *c = &t->m->cfg;
        const double C = c->d_model, F = c->d_ff;
        const double a = c->n_enc_layers * (4 * C * C + 2 * C * F) + c->n_dec_layers * 2 * C * C;
        const double bt = c->n_dec_layers * (6 * C * C + 2 * C * F) + C * c->tgt_vocab;
        int32_t ms = 0, mt = 0;
        for (int i = B - 1; i >= 0; i--) {
            ms = ATTN_MAX(ms, b->src_len[i]), mt = ATTN_MAX(mt, b->tgt_len[i]);
            t->suf_s[i] = ms, t->suf_t[i] = mt;
        }
        double best = INFINITY;
        ms = 0, mt = 0;
        bd[1] = 1;
        for (int b1 = 1; b1 < B; b1++) {
            ms = ATTN_MAX(ms, b->src_len[b1 - 1]), mt = ATTN_MAX(mt, b->tgt_len[b1 - 1]);
            const double c0 = b1 * (a * ms + bt * mt);
            const double c1 = (B - b1) * (a * t->suf_s[b1] + bt * t->suf_t[b1]);
            const double w = c0 > c1 ? c0 : c1;
            if (w < best) best = w, bd[1] = b1;
        }
        return;
    }
    double total = 0, acc = 0;
    for (int i = 0; i < B; i++) total += (double)b->src_len[i] + b->tgt_len[i];
    int b1 = 0;
    for (int i = 0; i < n - 1; i++) {
        const double goal = total * (i + 1) / n;
        const int b0 = b1;
        while (b1 < B - (n - 1 - i) &&
               (b1 == b0 || acc + (double)b->src_len[b1] + b->tgt_len[b1] <= goal)) {
            acc += (double)b->src_len[b1] + b->tgt_len[b1];
            b1++;
        }
        bd[i + 1] = b1;
    }
}

static attn_status run_rows(void *rp, const void *bp, int b0, int b1, bool backward,
                            bool training, uint64_t seed, uint64_t step, float scale,
                            float *loss) {
    replica *r = rp;
    const batch *b = bp;
    attn_encdec_model *v = r->mdl;
    attn_encdec_set_train(r->st, training, seed, step);
    if (b0 == 0 && b1 == b->B) {
        /* The whole batch (one replica): exactly the plain path, untrimmed. */
        encdec_state_set_rows(r->st, 0, 0, 0);
        ATTN_TRY(attn_encdec_forward(v, r->st, b->B, b->Ts, b->Tt, b->src, b->src_len, b->tin,
                                     b->tgt_len, NULL));
        ATTN_TRY(encdec_loss(v, r->st, b->tout, b->ls, scale, loss));
        return backward ? attn_encdec_backward(v, r->st) : ATTN_STATUS_OK;
    }
    int Ts, Tt;
    run_lengths(b, b0, b1, &Ts, &Tt);
    for (int i = b0; i < b1; i++) {
        const int j = i - b0;
        memcpy(r->src + (size_t)j * Ts, b->src + (size_t)i * b->Ts, (size_t)Ts * sizeof(int32_t));
        memcpy(r->tin + (size_t)j * Tt, b->tin + (size_t)i * b->Tt, (size_t)Tt * sizeof(int32_t));
        memcpy(r->tout + (size_t)j * Tt, b->tout + (size_t)i * b->Tt, (size_t)Tt * sizeof(int32_t));
        r->src_len[j] = b->src_len[i], r->tgt_len[j] = b->tgt_len[i];
    }
    encdec_state_set_rows(r->st, b0, b->Ts, b->Tt);
    ATTN_TRY(attn_encdec_forward(v, r->st, b1 - b0, Ts, Tt, r->src, r->src_len, r->tin,
                                 r->tgt_len, NULL));
    ATTN_TRY(encdec_loss(v, r->st, r->tout, b->ls, scale, loss));
    return backward ? attn_encdec_backward(v, r->st) : ATTN_STATUS_OK;
}

static void set_hook(void *rp, const mdl_grad_hook *h) {
    replica *r = rp;
    encdec_state_set_grad_hook(r->st, h);
}

static const mdl_trainer_ops ops = {replica_init, replica_free, count, run_rows, split, set_hook};

void attn_encdec_trainer_free(attn_encdec_trainer *t) {
    if (!t) return;
    mdl_trainer_free(t->t);
    attn_free(t->suf_s);
    attn_free(t->suf_t);
    attn_free(t);
}

int attn_encdec_trainer_replicas(const attn_encdec_trainer *t) { return t ? t->n : 0; }

void attn_encdec_trainer_set_dist(attn_encdec_trainer *t, attn_dist *d) {
    if (t) mdl_trainer_set_dist(t->t, d);
}

void attn_encdec_trainer_set_overlap(attn_encdec_trainer *t, bool on) {
    if (t) mdl_trainer_set_overlap(t->t, on);
}

attn_status attn_encdec_trainer_init(attn_encdec_model *m, int B, int Ts, int Tt, int n_replicas,
                                     attn_encdec_trainer **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec trainer: NULL argument");
    *out = NULL;
    ATTN_TRY(mdl_trainer_args("encdec trainer", B, ATTN_MIN(Ts, Tt), n_replicas));
    attn_encdec_trainer *t = attn_calloc(sizeof *t);
    if (!t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec trainer: out of memory");
    t->m = m, t->n = ATTN_MIN(n_replicas, B), t->capB = B, t->capTs = Ts, t->capTt = Tt;
    t->suf_s = attn_alloc((size_t)B * sizeof(int32_t));
    t->suf_t = attn_alloc((size_t)B * sizeof(int32_t));
    attn_status s = t->suf_s && t->suf_t
                        ? mdl_trainer_init(&ops, t, m->grads, m->num_params, B, t->n,
                                           "encdec trainer", &t->t)
                        : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec trainer: out of memory");
    if (s) {
        attn_encdec_trainer_free(t);
        return s;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

attn_status attn_encdec_train_step(attn_encdec_trainer *t, bool training, uint64_t seed,
                                   uint64_t step, int B, int Ts, int Tt, const int32_t *src_ids,
                                   const int32_t *src_len, const int32_t *tgt_in,
                                   const int32_t *tgt_len, const int32_t *targets,
                                   float label_smoothing, float *loss) {
    if (!t || !src_ids || !src_len || !tgt_in || !tgt_len || !targets || !loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec train step: NULL argument");
    if (B < 1 || Ts < 1 || Tt < 1 || B > t->capB || Ts > t->capTs || Tt > t->capTt)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec train step: batch %d x %d x %d exceeds the trainer's capacity "
                         "%d x %d x %d",
                         B, Ts, Tt, t->capB, t->capTs, t->capTt);
    for (int b = 0; b < B; b++)
        if (src_len[b] < 1 || src_len[b] > Ts || tgt_len[b] < 1 || tgt_len[b] > Tt)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "encdec train step: row %d has lengths %d / %d outside 1..%d / 1..%d",
                             b, (int)src_len[b], (int)tgt_len[b], Ts, Tt);
    const batch b = {B, Ts, Tt, src_ids, src_len, tgt_in, tgt_len, targets, label_smoothing};
    return mdl_trainer_step(t->t, &b, B, true, training, seed, step, 1.0f, loss);
}

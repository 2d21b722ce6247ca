/* bert.c — BERT (attn_bert.h): parameter layout and initialization, run state, forward over
 * packed rows, pooler / pooling, masked-LM head, loss and backward.
 *
 * Packed rows: a batch of B sequences of lengths len[b] (padded to T) is computed on
 * M = sum(len) rows, sequence b occupying rows off[b] .. off[b+1]-1. Every dense layer, layer
 * norm and elementwise step works on those M rows; attention runs once per sequence (queries and
 * keys = that sequence's rows, no mask needed), the sequences spread over threads. Padding
 * therefore costs nothing, and a row's result depends only on its own sequence (up to rounding:
 * the GEMM kernel has a separate path for a handful of rows, with another summation order).
 *
 * Evaluation mode keeps one set of layer buffers, reused by every layer. Training mode keeps each
 * layer's activations (struct acts) for backward; those are allocated on the first training
 * forward. Dropout masks are not stored: backward regenerates them from the counter-based
 * generator (attn_encdec_dropout). */
#include "attn_bert.h"

#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_models.h"
#include "attn_train.h"
#include "../core/core-impl.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- parameter layout ---------------------------------------------------------------------- */

typedef struct {
    attn_bert_model *m;
    float *base;
    size_t cursor;
    bool record;
} builder;

static float *take(builder *b, const char *name, int ndim, int64_t d0, int64_t d1) {
    float *p = b->base + b->cursor;
    size_t n = (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
    if (b->record) {
        attn_bert_tensor *t = &b->m->tensors[b->m->n_tensors++];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ndim = ndim;
        t->shape[0] = d0;
        t->shape[1] = ndim == 2 ? d1 : 0;
        t->offset = b->cursor;
        t->numel = n;
    }
    b->cursor += n;
    return p;
}

static size_t layout(attn_bert_model *m, float *base, attn_bert_weights *w, bool rec) {
    const attn_bert_config *c = &m->cfg;
    builder b = {m, base, 0, rec};
    const int64_t C = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
    w->word_emb = take(&b, "embeddings.word_embeddings.weight", 2, V, C);
    w->pos_emb = take(&b, "embeddings.position_embeddings.weight", 2, c->max_position_embeddings, C);
    w->type_emb = take(&b, "embeddings.token_type_embeddings.weight", 2, c->type_vocab_size, C);
    w->emb_ln_w = take(&b, "embeddings.LayerNorm.weight", 1, C, 0);
    w->emb_ln_b = take(&b, "embeddings.LayerNorm.bias", 1, C, 0);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        attn_bert_layer *L = &w->layers[l];
        char n[80];
        /* q, k, v weights adjacent, then their biases: attn_mha_weights_view's layout. */
        static const char *const qkv[3] = {"query", "key", "value"};
        float **ws[3] = {&L->attn.w_q, &L->attn.w_k, &L->attn.w_v};
        float **bs[3] = {&L->attn.b_q, &L->attn.b_k, &L->attn.b_v};
        for (int i = 0; i < 3; i++) {
            snprintf(n, sizeof n, "encoder.layer.%d.attention.self.%s.weight", l, qkv[i]);
            *ws[i] = take(&b, n, 2, C, C);
        }
        for (int i = 0; i < 3; i++) {
            snprintf(n, sizeof n, "encoder.layer.%d.attention.self.%s.bias", l, qkv[i]);
            *bs[i] = take(&b, n, 1, C, 0);
        }
        snprintf(n, sizeof n, "encoder.layer.%d.attention.output.dense.weight", l);
        L->attn.w_o = take(&b, n, 2, C, C);
        snprintf(n, sizeof n, "encoder.layer.%d.attention.output.dense.bias", l);
        L->attn.b_o = take(&b, n, 1, C, 0);
        snprintf(n, sizeof n, "encoder.layer.%d.attention.output.LayerNorm.weight", l);
        L->attn_ln_w = take(&b, n, 1, C, 0);
        snprintf(n, sizeof n, "encoder.layer.%d.attention.output.LayerNorm.bias", l);
        L->attn_ln_b = take(&b, n, 1, C, 0);
        snprintf(n, sizeof n, "encoder.layer.%d.intermediate.dense.weight", l);
        L->inter_w = take(&b, n, 2, F, C);
        snprintf(n, sizeof n, "encoder.layer.%d.intermediate.dense.bias", l);
        L->inter_b = take(&b, n, 1, F, 0);
        snprintf(n, sizeof n, "encoder.layer.%d.output.dense.weight", l);
        L->out_w = take(&b, n, 2, C, F);
        snprintf(n, sizeof n, "encoder.layer.%d.output.dense.bias", l);
        L->out_b = take(&b, n, 1, C, 0);
        snprintf(n, sizeof n, "encoder.layer.%d.output.LayerNorm.weight", l);
        L->out_ln_w = take(&b, n, 1, C, 0);
        snprintf(n, sizeof n, "encoder.layer.%d.output.LayerNorm.bias", l);
        L->out_ln_b = take(&b, n, 1, C, 0);
    }
    w->pooler_w = w->pooler_b = NULL;
    if (m->has_pooler) {
        w->pooler_w = take(&b, "pooler.dense.weight", 2, C, C);
        w->pooler_b = take(&b, "pooler.dense.bias", 1, C, 0);
    }
    w->mlm_dense_w = w->mlm_dense_b = w->mlm_ln_w = w->mlm_ln_b = NULL;
    w->mlm_decoder_w = w->mlm_bias = NULL;
    if (m->has_mlm) {
        w->mlm_dense_w = take(&b, "cls.predictions.transform.dense.weight", 2, C, C);
        w->mlm_dense_b = take(&b, "cls.predictions.transform.dense.bias", 1, C, 0);
        w->mlm_ln_w = take(&b, "cls.predictions.transform.LayerNorm.weight", 1, C, 0);
        w->mlm_ln_b = take(&b, "cls.predictions.transform.LayerNorm.bias", 1, C, 0);
        w->mlm_decoder_w = c->tie_word_embeddings
                               ? w->word_emb
                               : take(&b, "cls.predictions.decoder.weight", 2, V, C);
        w->mlm_bias = take(&b, "cls.predictions.bias", 1, V, 0);
    }
    return b.cursor;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

void attn_bert_init_params(attn_bert_model *m, uint64_t seed) {
    if (!m) return;
    const double sd = m->cfg.initializer_range;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_bert_tensor *t = &m->tensors[i];
        float *x = m->params + t->offset;
        if (t->ndim == 1) {
            /* Biases 0 (cls.predictions.bias too), LayerNorm weights 1. */
            float v = strstr(t->name, "LayerNorm.weight") ? 1.0f : 0.0f;
            for (size_t k = 0; k < t->numel; k++) x[k] = v;
            continue;
        }
        /* Every matrix and embedding table: normal(0, initializer_range). Each tensor draws from
         * its own Philox stream, so the values do not depend on the layout order. */
        attn_rng r;
        uint64_t key = seed * 0x9E3779B97F4A7C15ull + (uint64_t)(i + 1) * 0xD6E8FEB86659FD93ull;
        attn_rng_init(&r, key);
        for (size_t k = 0; k < t->numel; k++) x[k] = (float)(attn_rng_normal(&r) * sd);
        if (ends_with(t->name, "word_embeddings.weight") && m->cfg.pad_token_id >= 0)
            memset(x + (size_t)m->cfg.pad_token_id * m->cfg.hidden_size, 0,
                   (size_t)m->cfg.hidden_size * sizeof(float));
    }
}

void attn_bert_zero_grad(attn_bert_model *m) {
    if (m && m->grads) memset(m->grads, 0, m->num_params * sizeof(float));
}

const attn_bert_tensor *attn_bert_find_tensor(const attn_bert_model *m, const char *name) {
    if (!m || !name) return NULL;
    if (strncmp(name, "bert.", 5) == 0) name += 5;
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

void attn_bert_model_free(attn_bert_model *m) {
    if (!m) return;
    attn_bert_unpack_weights(m);
    attn_free(m->params);
    attn_free(m->grads);
    attn_free(m->tensors);
    attn_free(m->w.layers);
    attn_free(m->g.layers);
    attn_free(m);
}

/* Allocate a model with its layout; the parameters are left uninitialized. */
static attn_status model_alloc(const attn_bert_config *cfg, bool pooler, bool mlm,
                               attn_bert_model **out) {
    *out = NULL;
    ATTN_TRY(attn_bert_config_check(cfg));
    attn_bert_model *m = attn_calloc(sizeof *m);
    if (!m) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert: out of memory");
    m->cfg = *cfg;
    m->has_pooler = pooler;
    m->has_mlm = mlm;
    m->num_params = attn_bert_num_params(cfg, pooler, mlm);
    const int L = cfg->num_hidden_layers;
    m->params = attn_alloc(m->num_params * sizeof(float));
    m->grads = attn_calloc(m->num_params * sizeof(float));
    m->tensors = attn_calloc((size_t)(16 * L + 16) * sizeof(attn_bert_tensor));
    m->w.layers = attn_calloc((size_t)L * sizeof(attn_bert_layer));
    m->g.layers = attn_calloc((size_t)L * sizeof(attn_bert_layer));
    if (!m->params || !m->grads || !m->tensors || !m->w.layers || !m->g.layers) {
        size_t n = m->num_params;
        attn_bert_model_free(m);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert: out of memory for %zu parameters", n);
    }
    size_t n = layout(m, m->params, &m->w, true);
    size_t n2 = layout(m, m->grads, &m->g, false);
    if (n != m->num_params || n2 != n) {
        attn_bert_model_free(m);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert: internal parameter count mismatch");
    }
    *out = m;
    return ATTN_STATUS_OK;
}

attn_status attn_bert_model_init(const attn_bert_config *cfg, uint64_t seed, bool with_pooler,
                                 bool with_mlm_head, attn_bert_model **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert: NULL output");
    ATTN_TRY(model_alloc(cfg, with_pooler, with_mlm_head, out));
    attn_bert_init_params(*out, seed);
    return ATTN_STATUS_OK;
}

/* ---- packed weights ------------------------------------------------------------------------ */

/* One layer's nn.Linear weights as attn_gemm_pack_b panels (op(B) = Wᵀ, (in, out)). */
typedef struct {
    attn_gemm_packed_b qkv; /* (C, 3C) */
    attn_gemm_packed_b o;   /* (C, C) */
    attn_gemm_packed_b inter; /* (C, F) */
    attn_gemm_packed_b out; /* (F, C) */
} packed_layer;

struct attn_bert_packed {
    attn_backend backend; /* the backend the panels were laid out for */
    attn_precision precision;
    int L;
    packed_layer *layers; /* [L] */
};

void attn_bert_unpack_weights(attn_bert_model *m) {
    if (!m || !m->packed) return;
    struct attn_bert_packed *p = m->packed;
    for (int l = 0; p->layers && l < p->L; l++) {
        attn_gemm_packed_b_free(&p->layers[l].qkv);
        attn_gemm_packed_b_free(&p->layers[l].o);
        attn_gemm_packed_b_free(&p->layers[l].inter);
        attn_gemm_packed_b_free(&p->layers[l].out);
    }
    attn_free(p->layers);
    attn_free(p);
    m->packed = NULL;
}

attn_status attn_bert_pack_weights(attn_bert_model *m) {
    return attn_bert_pack_weights_precision(m, ATTN_PRECISION_F32);
}

attn_status attn_bert_pack_weights_precision(attn_bert_model *m, attn_precision precision) {
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert pack: NULL model");
    ATTN_TRY(attn_precision_check(precision, "bert pack"));
    attn_bert_unpack_weights(m);
    const attn_bert_config *c = &m->cfg;
    const int L = c->num_hidden_layers, C = c->hidden_size, F = c->intermediate_size;
    struct attn_bert_packed *p = attn_calloc(sizeof *p);
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert pack: out of memory");
    p->layers = attn_calloc((size_t)L * sizeof *p->layers);
    p->L = L;
    p->backend = attn_get_backend();
    p->precision = precision;
    m->packed = p; /* freed by attn_bert_unpack_weights below on failure */
    attn_status s = p->layers ? ATTN_STATUS_OK
                              : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert pack: out of memory");
    for (int l = 0; l < L && !s; l++) {
        const attn_bert_layer *W = &m->w.layers[l];
        packed_layer *P = &p->layers[l];
        s = attn_gemm_pack_b_precision(true, C, 3 * C, W->attn.w_q, C, precision, &P->qkv);
        if (!s) s = attn_gemm_pack_b_precision(true, C, C, W->attn.w_o, C, precision, &P->o);
        if (!s) s = attn_gemm_pack_b_precision(true, C, F, W->inter_w, C, precision, &P->inter);
        if (!s) s = attn_gemm_pack_b_precision(true, F, C, W->out_w, F, precision, &P->out);
    }
    if (s) attn_bert_unpack_weights(m);
    return s;
}

/* ---- run state ----------------------------------------------------------------------------- */

/* One layer's activations over M packed rows. In evaluation mode all layers share one set and
 * the LN statistics, u and lse are not kept. */
typedef struct {
    float *qkv;          /* (M, 3C) fused Q | K | V projections */
    float *ctx;          /* (M, C) attention output (before attention.output.dense) */
    float *lse;          /* (H·M) per sequence b: (H, len[b]) at H·off[b]; training only */
    float *r1;           /* (M, C) x + drop(attention.output.dense(ctx)) */
    float *x1;           /* (M, C) LN(r1) */
    float *mean1, *rstd1; /* (M) training only */
    float *u;            /* (M, F) intermediate pre-activation; training only */
    float *h;            /* (M, F) act(u) */
    float *r2;           /* (M, C) x1 + drop(output.dense(h)) */
    float *x2;           /* (M, C) LN(r2): the layer output */
    float *mean2, *rstd2; /* (M) training only */
} acts;

struct attn_bert_state {
    const attn_bert_model *model;
    int capB, capT, capM;
    int B, T, M;                  /* the last forward's sizes */
    bool has_fwd, fwd_train, has_loss;
    bool training;
    uint64_t seed, step;
    int32_t *len;                 /* (capB) lengths of the last forward */
    int32_t *off;                 /* (capB + 1) packed row offsets */
    int32_t *ids, *types, *pos;   /* (capM) packed ids, token types, positions */
    float *emb_sum;               /* (capM, C) word + position + type (training: LN input) */
    float *emb_mean, *emb_rstd;   /* (capM) */
    float *x0;                    /* (capM, C) embeddings output */
    acts ev;                      /* evaluation buffers (x2 == x0) */
    acts *tr;                     /* [L] training buffers, NULL until the first training forward */
    const float *out;             /* (M, C) final hidden states of the last forward */
    /* masked-LM loss */
    int n_lab, cap_lab;
    int32_t *lab_row, *lab_tgt;   /* (cap_lab) packed row and target of each labelled position */
    float *mlm_in, *mlm_u, *mlm_a, *mlm_t; /* (cap_lab, C) gathered hidden, pre-act, act, LN */
    float *mlm_mean, *mlm_rstd;   /* (cap_lab) */
    float *dlogits;               /* (cap_lab, V) logits, then d loss / d logits */
    /* backward scratch */
    float *G, *s1, *s2, *s3;      /* (capM, C) */
    float *gh;                    /* (capM, F) */
    float *dqkv;                  /* (capM, 3C) */
    attn_bert_capture cap;
    float *probs_tmp;             /* (H, capT, capT) capture scratch, allocated on demand */
    attn_arena arena;             /* every buffer above */
};

static float *salloc(attn_bert_state *st, size_t n) {
    return attn_arena_alloc(&st->arena, n * sizeof(float));
}

void attn_bert_state_free(attn_bert_state *st) {
    if (!st) return;
    attn_arena_free(&st->arena);
    attn_free(st);
}

attn_status attn_bert_state_init(const attn_bert_model *m, int B, int T, attn_bert_state **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert state: NULL argument");
    *out = NULL;
    const attn_bert_config *c = &m->cfg;
    if (B <= 0 || T <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert state: B and T must be > 0 (got %d, %d)",
                         B, T);
    if (T > c->max_position_embeddings)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert state: T = %d exceeds max_position_embeddings %d", T,
                         c->max_position_embeddings);
    const double Md = (double)B * T, C = c->hidden_size, F = c->intermediate_size;
    /* Evaluation buffers plus the backward scratch (training adds per-layer buffers later). */
    double total = Md * (C * 6 + F + 3 + 3) + Md * (4 * C + F + 3 * C);
    if (Md > INT32_MAX / 4 || total > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)) ||
        Md * fmax(3 * C, F) > (double)INT32_MAX * 64)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "bert state: B=%d T=%d needs %.3g floats, too large", B, T, total);
    attn_bert_state *st = attn_calloc(sizeof *st);
    if (!st) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert state: out of memory");
    st->model = m;
    st->capB = B, st->capT = T, st->capM = B * T;
    const size_t M = (size_t)B * T, Cz = (size_t)c->hidden_size, Fz = (size_t)c->intermediate_size;
    st->len = attn_arena_alloc(&st->arena, (size_t)B * sizeof(int32_t));
    st->off = attn_arena_alloc(&st->arena, ((size_t)B + 1) * sizeof(int32_t));
    st->ids = attn_arena_alloc(&st->arena, M * sizeof(int32_t));
    st->types = attn_arena_alloc(&st->arena, M * sizeof(int32_t));
    st->pos = attn_arena_alloc(&st->arena, M * sizeof(int32_t));
    st->emb_sum = salloc(st, M * Cz);
    st->x0 = salloc(st, M * Cz);
    st->ev.qkv = salloc(st, M * 3 * Cz);
    st->ev.ctx = salloc(st, M * Cz);
    st->ev.r1 = st->ev.r2 = salloc(st, M * Cz);
    st->ev.x1 = salloc(st, M * Cz);
    st->ev.h = salloc(st, M * Fz);
    st->ev.x2 = st->x0;
    if (st->arena.oom) {
        attn_bert_state_free(st);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert state: out of memory for B=%d T=%d", B,
                         T);
    }
    *out = st;
    return ATTN_STATUS_OK;
}

/* The training buffers: per-layer activations and the backward scratch. */
static attn_status alloc_training(attn_bert_state *st) {
    if (st->tr) return ATTN_STATUS_OK;
    const attn_bert_config *c = &st->model->cfg;
    const int L = c->num_hidden_layers;
    const size_t M = (size_t)st->capM, Cz = (size_t)c->hidden_size;
    const size_t Fz = (size_t)c->intermediate_size, H = (size_t)c->num_attention_heads;
    const double total =
        (double)M * L * (8.0 * Cz + 2.0 * Fz + H + 4) + (double)M * (7.0 * Cz + Fz + 2);
    if (total > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)))
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "bert state: training buffers for B=%d T=%d need %.3g floats", st->capB,
                         st->capT, total);
    acts *tr = attn_arena_alloc(&st->arena, (size_t)L * sizeof(acts));
    st->emb_mean = salloc(st, M);
    st->emb_rstd = salloc(st, M);
    for (int l = 0; l < L && tr; l++) {
        acts *A = &tr[l];
        A->qkv = salloc(st, M * 3 * Cz);
        A->ctx = salloc(st, M * Cz);
        A->lse = salloc(st, M * H);
        A->r1 = salloc(st, M * Cz);
        A->x1 = salloc(st, M * Cz);
        A->mean1 = salloc(st, M);
        A->rstd1 = salloc(st, M);
        A->u = salloc(st, M * Fz);
        A->h = salloc(st, M * Fz);
        A->r2 = salloc(st, M * Cz);
        A->x2 = salloc(st, M * Cz);
        A->mean2 = salloc(st, M);
        A->rstd2 = salloc(st, M);
    }
    st->G = salloc(st, M * Cz);
    st->s1 = salloc(st, M * Cz);
    st->s2 = salloc(st, M * Cz);
    st->s3 = salloc(st, M * Cz);
    st->gh = salloc(st, M * Fz);
    st->dqkv = salloc(st, M * 3 * Cz);
    if (st->arena.oom) {
        /* Nothing usable was half-made visible: tr stays NULL; the allocations are freed with the
         * state. Clear the flag so evaluation keeps working. */
        st->arena.oom = false;
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY,
                         "bert state: out of memory for the training buffers (B=%d T=%d)",
                         st->capB, st->capT);
    }
    st->tr = tr;
    return ATTN_STATUS_OK;
}

void attn_bert_set_train(attn_bert_state *st, bool training, uint64_t seed, uint64_t step) {
    if (!st) return;
    st->training = training;
    st->seed = seed;
    st->step = step;
}

void attn_bert_set_capture(attn_bert_state *st, const attn_bert_capture *cap) {
    if (!st) return;
    if (cap)
        st->cap = *cap;
    else
        memset(&st->cap, 0, sizeof st->cap);
}

attn_status attn_bert_mask_to_lengths(int B, int T, const int32_t *mask, int32_t *lengths) {
    if (!mask || !lengths || B < 0 || T < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert mask: bad arguments");
    for (int b = 0; b < B; b++) {
        const int32_t *row = mask + (size_t)b * T;
        int n = 0;
        while (n < T && row[n] == 1) n++;
        for (int t = n; t < T; t++) {
            if (row[t] == 1)
                return attn_fail(ATTN_STATUS_UNSUPPORTED,
                                 "bert mask: attention_mask row %d has a 1 at position %d after a "
                                 "0 at %d: only right padding is supported",
                                 b, t, n);
            if (row[t] != 0)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "bert mask: attention_mask[%d][%d] = %d (must be 0 or 1)", b, t,
                                 (int)row[t]);
        }
        if (n == 0)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "bert mask: attention_mask row %d has no token (starts with %d)", b,
                             (int)row[0]);
        lengths[b] = n;
    }
    return ATTN_STATUS_OK;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static bool dropping(const attn_bert_state *st) {
    return st->training && st->model->cfg.hidden_dropout_prob > 0.0f;
}

static void drop(const attn_bert_state *st, uint32_t site, size_t n, float *x) {
    if (dropping(st))
        attn_encdec_dropout(st->seed, st->step, site, st->model->cfg.hidden_dropout_prob, n, x);
}

#define SITE_EMB 0u
#define SITE_ATTN(l) (1u + 2u * (uint32_t)(l))
#define SITE_FFN(l) (2u + 2u * (uint32_t)(l))

/* out (cols) += column sums of a (rows, cols) */
static void colsum_add(int rows, int cols, const float *a, float *out) {
#pragma omp parallel for schedule(static) if ((size_t)rows * cols > 65536)
    for (int j0 = 0; j0 < cols; j0 += 64) {
        int j1 = j0 + 64 < cols ? j0 + 64 : cols;
        float acc[64] = {0};
        for (int r = 0; r < rows; r++) {
            const float *row = a + (size_t)r * cols;
            for (int j = j0; j < j1; j++) acc[j - j0] += row[j];
        }
        for (int j = j0; j < j1; j++) out[j] += acc[j - j0];
    }
}

/* Packed (M, C) rows to (B, T, C) with padded rows 0. */
static void unpack(const attn_bert_state *st, const float *src, int C, float *dst) {
    const int B = st->B, T = st->T;
#pragma omp parallel for schedule(static) if ((size_t)B * T * C > 65536)
    for (int b = 0; b < B; b++) {
        const int n = st->len[b];
        memcpy(dst + (size_t)b * T * C, src + (size_t)st->off[b] * C, (size_t)n * C * sizeof(float));
        memset(dst + ((size_t)b * T + n) * C, 0, (size_t)(T - n) * C * sizeof(float));
    }
}

/* ---- forward ---------------------------------------------------------------------------- */

static attn_status embed(const attn_bert_model *m, attn_bert_state *st, bool train) {
    const attn_bert_config *c = &m->cfg;
    const int M = st->M, C = c->hidden_size;
    float *sum = st->emb_sum;
#pragma omp parallel for schedule(static) if ((size_t)M * C > 32768)
    for (int r = 0; r < M; r++) {
        const float *we = m->w.word_emb + (size_t)st->ids[r] * C;
        const float *pe = m->w.pos_emb + (size_t)st->pos[r] * C;
        const float *te = m->w.type_emb + (size_t)st->types[r] * C;
        float *y = sum + (size_t)r * C;
        for (int i = 0; i < C; i++) y[i] = we[i] + pe[i] + te[i];
    }
    ATTN_TRY(attn_layernorm_forward(M, C, sum, m->w.emb_ln_w, m->w.emb_ln_b, c->layer_norm_eps,
                                    st->x0, train ? st->emb_mean : NULL,
                                    train ? st->emb_rstd : NULL));
    drop(st, SITE_EMB, (size_t)M * C, st->x0);
    return ATTN_STATUS_OK;
}

/* The attention kernel's parameters for sequence b's rows of the packed (M, 3C) q|k|v. */
static attn_attention_params seq_params(const attn_bert_state *st, int C, int H, int D, int b) {
    attn_attention_params p = attn_attention_default_params(1, H, st->len[b], st->len[b], D);
    p.ldq = p.ldk = p.ldv = 3 * C;
    p.ldo = C;
    return p;
}

/* Attention of sequence b over its own rows; with probs_out, its probabilities (via tmp (H, n,
 * n)) go to probs_out (B, H, T, T) with masked entries 0. Returns 1 on failure. */
static int attend_one(const attn_bert_state *st, const acts *A, int C, int H, int D, int b,
                      float *probs_out, float *tmp) {
    const int n = st->len[b];
    const size_t o = (size_t)st->off[b];
    const attn_attention_params p = seq_params(st, C, H, D, b);
    const float *q = A->qkv + o * 3 * C;
    float *pr = probs_out ? tmp : NULL;
    if (attn_attention_forward(&p, q, q + C, q + 2 * C, A->ctx + o * C,
                               A->lse ? A->lse + o * H : NULL, pr))
        return 1;
    if (pr) {
        const int T = st->T;
        float *dst = probs_out + (size_t)b * H * T * T;
        memset(dst, 0, (size_t)H * T * T * sizeof(float));
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n; i++)
                memcpy(dst + ((size_t)h * T + i) * T, pr + ((size_t)h * n + i) * n,
                       (size_t)n * sizeof(float));
    }
    return 0;
}

/* Attention of every sequence over its own rows: ctx = softmax(q kᵀ / sqrt(D)) v. */
static attn_status attention(const attn_bert_model *m, attn_bert_state *st, const acts *A, int l) {
    const attn_bert_config *c = &m->cfg;
    const int C = c->hidden_size, H = c->num_attention_heads, D = C / H, B = st->B;
    float *probs_out = st->cap.probs ? st->cap.probs[l] : NULL;
    if (probs_out && !st->probs_tmp) {
        st->probs_tmp = salloc(st, (size_t)H * st->capT * st->capT);
        if (!st->probs_tmp) {
            st->arena.oom = false;
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert: out of memory for attention capture");
        }
    }
    (void)attn_get_backend(); /* settle the dispatch before the threads start */
    int bad = 0;
    /* One sequence per thread (the kernel's own threading stays inside one thread here); a
     * single sequence, or capture, runs the kernel's threads instead. That case must not be
     * wrapped in an inactive parallel region (`if` false): the kernel's region nested in it would
     * get a fresh team of new threads on every call (libgomp does not reuse its pool there),
     * which oversubscribed the cores and made one short text 3x slower than one thread. */
    if (B > 1 && !probs_out) {
#pragma omp parallel for schedule(dynamic, 1) reduction(| : bad)
        for (int b = 0; b < B; b++) bad |= attend_one(st, A, C, H, D, b, NULL, NULL);
    } else {
        for (int b = 0; b < B; b++) bad |= attend_one(st, A, C, H, D, b, probs_out, st->probs_tmp);
    }
    if (bad) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert: attention failed (layer %d)", l);
    return ATTN_STATUS_OK;
}

/* y (M, N) = act(x (M, K) · W (N, K)ᵀ + beta · y + bias (N)): every nn.Linear of the model.
 *
 * Few rows (a short sentence, the MLM head on a few positions) take a path of their own: attn_gemm
 * multiplies up to SMALL_ROWS rows by reading W directly (no packing), which for a dozen rows is
 * ~1.5x faster than its packed path, but it threads over the whole N. So the rows go through in
 * chunks of SMALL_ROWS, over column blocks of W small enough to stay in L2 between the chunks,
 * the blocks split across threads (each thread runs one-thread GEMMs on its share of W). */
#define SMALL_ROWS 8     /* attn_gemm's direct path handles M <= 8 */
#define FEW_ROWS 48      /* up to this M, chunked rows beat the packed path (measured) */
#define COL_BLOCK 128    /* columns of W per block: 128 x K floats stay in L2 for K <= 1024 */

static void dense_block(int M, int n0, int n1, int N, int K, const float *x, const float *W,
                        float beta, float *y, const float *bias, attn_act act, int *bad) {
    for (int j0 = n0; j0 < n1; j0 += COL_BLOCK) {
        const int nb = ATTN_MIN(COL_BLOCK, n1 - j0);
        for (int r0 = 0; r0 < M; r0 += SMALL_ROWS) {
            const int mr = ATTN_MIN(SMALL_ROWS, M - r0);
            if (attn_gemm(false, true, mr, nb, K, 1.0f, x + (size_t)r0 * K, K,
                          W + (size_t)j0 * K, K, beta, y + (size_t)r0 * N + j0, N,
                          bias ? bias + j0 : NULL, act))
                *bad = 1;
        }
    }
}

static attn_status dense_p(int M, int N, int K, const float *x, const float *W,
                           const attn_gemm_packed_b *P, float beta, float *y, const float *bias,
                           attn_act act) {
    if (P) return attn_gemm_packed(false, M, N, K, 1.0f, x, K, P, beta, y, N, bias, act);
    if (M > 0 && M <= FEW_ROWS && N > 0 && !omp_in_parallel()) {
        const int blocks = (N + COL_BLOCK - 1) / COL_BLOCK;
        const int nt = ATTN_MIN(attn_get_num_threads(), blocks);
        int bad = 0;
        if (nt <= 1) {
            dense_block(M, 0, N, N, K, x, W, beta, y, bias, act, &bad);
        } else {
#pragma omp parallel num_threads(nt) reduction(| : bad)
            {
                const int t = omp_get_thread_num(), team = omp_get_num_threads();
                const int n0 = ATTN_MIN(N, (int)((long)blocks * t / team) * COL_BLOCK);
                const int n1 = ATTN_MIN(N, (int)((long)blocks * (t + 1) / team) * COL_BLOCK);
                dense_block(M, n0, n1, N, K, x, W, beta, y, bias, act, &bad);
            }
        }
        if (bad) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert: dense layer failed");
        return ATTN_STATUS_OK;
    }
    return attn_gemm(false, true, M, N, K, 1.0f, x, K, W, K, beta, y, N, bias, act);
}

static attn_status dense(int M, int N, int K, const float *x, const float *W, float beta, float *y,
                         const float *bias, attn_act act) {
    return dense_p(M, N, K, x, W, NULL, beta, y, bias, act);
}

/* r = x + drop(a · Wᵀ + b) for a (M, K), W (C, K); written into r (M, C). */
static attn_status dense_residual(attn_bert_state *st, int M, int C, int K, const float *a,
                                  const float *W, const attn_gemm_packed_b *P, const float *bias,
                                  const float *x, float *r, uint32_t site) {
    if (!dropping(st)) {
        /* The residual enters as the GEMM's C operand (beta = 1): one pass fewer. */
        if (r != x) memcpy(r, x, (size_t)M * C * sizeof(float));
        return dense_p(M, C, K, a, W, P, 1.0f, r, bias, ATTN_ACT_NONE);
    }
    ATTN_TRY(dense(M, C, K, a, W, 0.0f, r, bias, ATTN_ACT_NONE));
    drop(st, site, (size_t)M * C, r);
    const size_t n = (size_t)M * C;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) r[i] += x[i];
    return ATTN_STATUS_OK;
}

static attn_status layer_forward(const attn_bert_model *m, attn_bert_state *st, int l,
                                 const float *x, acts *A, bool train) {
    const attn_bert_config *c = &m->cfg;
    const attn_bert_layer *W = &m->w.layers[l];
    const int M = st->M, C = c->hidden_size, F = c->intermediate_size;
    const float eps = c->layer_norm_eps;
    /* The packed weights (attn_bert_pack_weights) in evaluation mode, under their backend. */
    const packed_layer *P = !train && m->packed && m->packed->backend == attn_get_backend()
                                ? &m->packed->layers[l]
                                : NULL;
    /* Fused QKV projection: W_q, W_k, W_v adjacent form one (3C, C) matrix, biases one (3C). */
    ATTN_TRY(dense_p(M, 3 * C, C, x, W->attn.w_q, P ? &P->qkv : NULL, 0.0f, A->qkv, W->attn.b_q,
                     ATTN_ACT_NONE));
    ATTN_TRY(attention(m, st, A, l));
    ATTN_TRY(dense_residual(st, M, C, C, A->ctx, W->attn.w_o, P ? &P->o : NULL, W->attn.b_o, x,
                            A->r1, SITE_ATTN(l)));
    ATTN_TRY(attn_layernorm_forward(M, C, A->r1, W->attn_ln_w, W->attn_ln_b, eps, A->x1,
                                    train ? A->mean1 : NULL, train ? A->rstd1 : NULL));
    if (train) {
        /* The activation's derivative needs the pre-activation: keep u. */
        ATTN_TRY(dense(M, F, C, A->x1, W->inter_w, 0.0f, A->u, W->inter_b, ATTN_ACT_NONE));
        ATTN_TRY(attn_act_forward(c->hidden_act, (size_t)M * F, A->u, A->h));
    } else {
        /* bias + activation fused into the GEMM epilogue */
        ATTN_TRY(dense_p(M, F, C, A->x1, W->inter_w, P ? &P->inter : NULL, 0.0f, A->h, W->inter_b,
                         c->hidden_act));
    }
    ATTN_TRY(dense_residual(st, M, C, F, A->h, W->out_w, P ? &P->out : NULL, W->out_b, A->x1, A->r2,
                            SITE_FFN(l)));
    return attn_layernorm_forward(M, C, A->r2, W->out_ln_w, W->out_ln_b, eps, A->x2,
                                  train ? A->mean2 : NULL, train ? A->rstd2 : NULL);
}

attn_status attn_bert_forward(const attn_bert_model *m, attn_bert_state *st, int B, int T,
                              const int32_t *ids, const int32_t *type_ids, const int32_t *lengths,
                              float *hidden_out) {
    if (!m || !st || !ids)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert forward: NULL argument");
    if (st->model != m)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert forward: the state was made for another model");
    const attn_bert_config *c = &m->cfg;
    if (T > c->max_position_embeddings)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert forward: sequence length T = %d exceeds max_position_embeddings %d",
                         T, c->max_position_embeddings);
    if (B < 1 || T < 1 || B > st->capB || T > st->capT)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert forward: B=%d T=%d outside the state's capacity B<=%d T<=%d", B, T,
                         st->capB, st->capT);
    for (int b = 0; b < B; b++) {
        int32_t n = lengths ? lengths[b] : T;
        if (n < 1 || n > T)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "bert forward: lengths[%d] = %d outside [1, %d]", b, (int)n, T);
    }
    for (int b = 0; b < B; b++) {
        const int n = lengths ? lengths[b] : T;
        for (int t = 0; t < n; t++) {
            int32_t id = ids[(size_t)b * T + t];
            if (id < 0 || id >= c->vocab_size)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "bert forward: token id %d at (batch %d, position %d) is outside "
                                 "the vocabulary [0, %d)",
                                 (int)id, b, t, c->vocab_size);
            int32_t ty = type_ids ? type_ids[(size_t)b * T + t] : 0;
            if (ty < 0 || ty >= c->type_vocab_size)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "bert forward: token type %d at (batch %d, position %d) is "
                                 "outside [0, type_vocab_size %d)",
                                 (int)ty, b, t, c->type_vocab_size);
        }
    }
    const bool train = st->training;
    if (train) ATTN_TRY(alloc_training(st));
    st->has_fwd = st->has_loss = st->fwd_train = false;
    st->B = B, st->T = T;
    int M = 0;
    for (int b = 0; b < B; b++) {
        const int n = lengths ? lengths[b] : T;
        st->len[b] = n;
        st->off[b] = M;
        for (int t = 0; t < n; t++) {
            st->ids[M + t] = ids[(size_t)b * T + t];
            st->types[M + t] = type_ids ? type_ids[(size_t)b * T + t] : 0;
            st->pos[M + t] = t;
        }
        M += n;
    }
    st->off[B] = M;
    st->M = M;
    const int C = c->hidden_size, L = c->num_hidden_layers;

    ATTN_TRY(embed(m, st, train));
    if (st->cap.hidden && st->cap.hidden[0]) unpack(st, st->x0, C, st->cap.hidden[0]);
    const float *x = st->x0;
    for (int l = 0; l < L; l++) {
        acts *A = train ? &st->tr[l] : &st->ev;
        ATTN_TRY(layer_forward(m, st, l, x, A, train));
        x = A->x2;
        if (st->cap.hidden && st->cap.hidden[l + 1]) unpack(st, x, C, st->cap.hidden[l + 1]);
    }
    st->out = x;
    if (hidden_out) unpack(st, x, C, hidden_out);
    st->has_fwd = true;
    st->fwd_train = train;
    return ATTN_STATUS_OK;
}

/* ---- pooler and pooling -------------------------------------------------------------------- */

attn_status attn_bert_pooler(const attn_bert_model *m, attn_bert_state *st, float *pooled) {
    if (!m || !st || !pooled)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert pooler: NULL argument");
    if (!m->has_pooler)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert pooler: this model has no pooler (no pooler.dense weights)");
    if (st->model != m || !st->has_fwd)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert pooler: no forward pass of this model on this state");
    const int B = st->B, C = m->cfg.hidden_size;
    float *cls = attn_alloc((size_t)B * C * sizeof(float));
    if (!cls) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert pooler: out of memory");
    for (int b = 0; b < B; b++)
        memcpy(cls + (size_t)b * C, st->out + (size_t)st->off[b] * C, (size_t)C * sizeof(float));
    attn_status s = dense(B, C, C, cls, m->w.pooler_w, 0.0f, pooled, m->w.pooler_b, ATTN_ACT_NONE);
    attn_free(cls);
    ATTN_TRY(s);
    for (size_t i = 0; i < (size_t)B * C; i++) pooled[i] = tanhf(pooled[i]);
    return ATTN_STATUS_OK;
}

static void l2_normalize(int C, float *v) {
    double ss = 0;
    for (int i = 0; i < C; i++) ss += (double)v[i] * v[i];
    double nrm = sqrt(ss);
    float inv = (float)(1.0 / (nrm > 1e-12 ? nrm : 1e-12));
    for (int i = 0; i < C; i++) v[i] *= inv;
}

/* out (C) = pooling of rows (n, C). */
static void pool_rows(attn_bert_pooling mode, int n, int C, const float *rows, float *out) {
    if (mode == ATTN_BERT_POOL_CLS) {
        memcpy(out, rows, (size_t)C * sizeof(float));
        return;
    }
    if (mode == ATTN_BERT_POOL_MAX) {
        memcpy(out, rows, (size_t)C * sizeof(float));
        for (int t = 1; t < n; t++)
            for (int i = 0; i < C; i++) {
                float v = rows[(size_t)t * C + i];
                if (v > out[i]) out[i] = v;
            }
        return;
    }
    /* mean: float sums as sentence-transformers (torch.sum then divide) */
    for (int i = 0; i < C; i++) out[i] = 0.0f;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < C; i++) out[i] += rows[(size_t)t * C + i];
    const float div = mode == ATTN_BERT_POOL_MEAN ? (float)n : sqrtf((float)n);
    for (int i = 0; i < C; i++) out[i] /= div;
}

attn_status attn_bert_pool(const attn_bert_model *m, const attn_bert_state *st,
                           attn_bert_pooling mode, bool normalize, float *out) {
    if (!m || !st || !out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert pool: NULL argument");
    if (st->model != m || !st->has_fwd)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert pool: no forward pass of this model on this state");
    if (mode != ATTN_BERT_POOL_MEAN && mode != ATTN_BERT_POOL_CLS && mode != ATTN_BERT_POOL_MAX &&
        mode != ATTN_BERT_POOL_MEAN_SQRT_LEN)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert pool: unknown pooling mode %d",
                         (int)mode);
    const int C = m->cfg.hidden_size;
    for (int b = 0; b < st->B; b++) {
        float *o = out + (size_t)b * C;
        pool_rows(mode, st->len[b], C, st->out + (size_t)st->off[b] * C, o);
        if (normalize) l2_normalize(C, o);
    }
    return ATTN_STATUS_OK;
}

attn_status attn_bert_mean_pool(int B, int T, int C, const float *hidden, const int32_t *lengths,
                                bool normalize, float *out) {
    if (!hidden || !out || B < 0 || T < 1 || C < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert mean pool: bad arguments");
    for (int b = 0; b < B; b++) {
        int n = lengths ? lengths[b] : T;
        if (n < 1 || n > T)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "bert mean pool: lengths[%d] = %d outside [1, %d]", b, n, T);
        float *o = out + (size_t)b * C;
        pool_rows(ATTN_BERT_POOL_MEAN, n, C, hidden + (size_t)b * T * C, o);
        if (normalize) l2_normalize(C, o);
    }
    return ATTN_STATUS_OK;
}

/* ---- masked-LM head ------------------------------------------------------------------------ */

/* logits (n, V) for the gathered rows in (n, C); u, a, t (n, C) scratch; mean, rstd (n) or NULL. */
static attn_status mlm_head(const attn_bert_model *m, int n, const float *in, float *u, float *a,
                            float *t, float *mean, float *rstd, float *logits) {
    const attn_bert_config *c = &m->cfg;
    const int C = c->hidden_size, V = c->vocab_size;
    if (u) {
        ATTN_TRY(dense(n, C, C, in, m->w.mlm_dense_w, 0.0f, u, m->w.mlm_dense_b, ATTN_ACT_NONE));
        ATTN_TRY(attn_act_forward(c->hidden_act, (size_t)n * C, u, a));
    } else {
        ATTN_TRY(dense(n, C, C, in, m->w.mlm_dense_w, 0.0f, a, m->w.mlm_dense_b, c->hidden_act));
    }
    ATTN_TRY(attn_layernorm_forward(n, C, a, m->w.mlm_ln_w, m->w.mlm_ln_b, c->layer_norm_eps, t,
                                    mean, rstd));
    return dense(n, V, C, t, m->w.mlm_decoder_w, 0.0f, logits, m->w.mlm_bias, ATTN_ACT_NONE);
}

attn_status attn_bert_mlm_logits(const attn_bert_model *m, attn_bert_state *st, int n,
                                 const int32_t *positions, float *logits) {
    if (!m || !st || (n > 0 && (!positions || !logits)) || n < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert mlm logits: bad arguments");
    if (!m->has_mlm)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert mlm logits: this model has no masked-LM head (no cls.predictions "
                         "weights; load a BertForMaskedLM checkpoint)");
    if (st->model != m || !st->has_fwd)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert mlm logits: no forward pass of this model on this state");
    if (n == 0) return ATTN_STATUS_OK;
    const int C = m->cfg.hidden_size, T = st->T;
    const size_t BT = (size_t)st->B * T;
    for (int i = 0; i < n; i++) {
        int32_t p = positions[i];
        if (p < 0 || (size_t)p >= BT || p % T >= st->len[p / T])
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "bert mlm logits: position %d (index %d) is not a real token of the "
                             "(B=%d, T=%d) batch",
                             (int)p, i, st->B, T);
    }
    float *buf = attn_alloc((size_t)n * C * 3 * sizeof(float));
    if (!buf) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert mlm logits: out of memory");
    float *in = buf, *a = buf + (size_t)n * C, *t = buf + (size_t)2 * n * C;
    for (int i = 0; i < n; i++) {
        int32_t p = positions[i];
        size_t row = (size_t)st->off[p / T] + (size_t)(p % T);
        memcpy(in + (size_t)i * C, st->out + row * C, (size_t)C * sizeof(float));
    }
    attn_status s = mlm_head(m, n, in, NULL, a, t, NULL, NULL, logits);
    attn_free(buf);
    return s;
}

static attn_status grow_labels(attn_bert_state *st, int n) {
    if (n <= st->cap_lab) return ATTN_STATUS_OK;
    const size_t C = (size_t)st->model->cfg.hidden_size, V = (size_t)st->model->cfg.vocab_size;
    if ((double)n * V > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)))
        return attn_fail(ATTN_STATUS_TOO_LARGE, "bert mlm loss: %d labels x vocab %zu too large", n,
                         V);
    void *olds[9] = {st->lab_row, st->lab_tgt, st->mlm_in, st->mlm_u, st->mlm_a,
                     st->mlm_t,   st->mlm_mean, st->mlm_rstd, st->dlogits};
    for (int i = 0; i < 9; i++) attn_arena_release(&st->arena, olds[i]);
    st->cap_lab = 0;
    const size_t k = (size_t)n;
    st->lab_row = attn_arena_alloc(&st->arena, k * sizeof(int32_t));
    st->lab_tgt = attn_arena_alloc(&st->arena, k * sizeof(int32_t));
    st->mlm_in = salloc(st, k * C);
    st->mlm_u = salloc(st, k * C);
    st->mlm_a = salloc(st, k * C);
    st->mlm_t = salloc(st, k * C);
    st->mlm_mean = salloc(st, k);
    st->mlm_rstd = salloc(st, k);
    st->dlogits = salloc(st, k * V);
    if (st->arena.oom) {
        st->arena.oom = false;
        void *news[9] = {st->lab_row, st->lab_tgt, st->mlm_in, st->mlm_u, st->mlm_a,
                         st->mlm_t,   st->mlm_mean, st->mlm_rstd, st->dlogits};
        for (int i = 0; i < 9; i++) attn_arena_release(&st->arena, news[i]);
        st->lab_row = st->lab_tgt = NULL;
        st->mlm_in = st->mlm_u = st->mlm_a = st->mlm_t = st->mlm_mean = st->mlm_rstd = NULL;
        st->dlogits = NULL;
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert mlm loss: out of memory for %d labels",
                         n);
    }
    st->cap_lab = n;
    return ATTN_STATUS_OK;
}

attn_status attn_bert_mlm_loss(const attn_bert_model *m, attn_bert_state *st,
                               const int32_t *labels, float *loss) {
    if (!m || !st || !labels || !loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert mlm loss: NULL argument");
    if (!m->has_mlm)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert mlm loss: this model has no masked-LM head");
    if (st->model != m || !st->has_fwd)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert mlm loss: no forward pass of this model on this state");
    const int B = st->B, T = st->T, V = m->cfg.vocab_size, C = m->cfg.hidden_size;
    int n = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int32_t y = labels[(size_t)b * T + t];
            if (y == ATTN_BERT_IGNORE_INDEX) continue;
            if (t >= st->len[b])
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "bert mlm loss: label %d at padded position (batch %d, position "
                                 "%d): padding must be labelled -100",
                                 (int)y, b, t);
            if (y < 0 || y >= V)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "bert mlm loss: label %d at (batch %d, position %d) is outside the "
                                 "vocabulary [0, %d) and not -100",
                                 (int)y, b, t, V);
            n++;
        }
    st->has_loss = false;
    ATTN_TRY(grow_labels(st, n > 0 ? n : 1));
    n = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < st->len[b]; t++) {
            int32_t y = labels[(size_t)b * T + t];
            if (y == ATTN_BERT_IGNORE_INDEX) continue;
            st->lab_row[n] = st->off[b] + t;
            st->lab_tgt[n] = y;
            n++;
        }
    st->n_lab = n;
    if (n == 0) {
        *loss = 0.0f;
        st->has_loss = st->fwd_train;
        return ATTN_STATUS_OK;
    }
    for (int i = 0; i < n; i++)
        memcpy(st->mlm_in + (size_t)i * C, st->out + (size_t)st->lab_row[i] * C,
               (size_t)C * sizeof(float));
    ATTN_TRY(mlm_head(m, n, st->mlm_in, st->mlm_u, st->mlm_a, st->mlm_t, st->mlm_mean, st->mlm_rstd,
                      st->dlogits));
    ATTN_TRY(attn_cross_entropy(n, V, st->dlogits, st->lab_tgt, ATTN_BERT_IGNORE_INDEX, 0.0f, loss,
                                st->dlogits));
    st->has_loss = st->fwd_train;
    return ATTN_STATUS_OK;
}

/* ---- backward ------------------------------------------------------------------------------ */

/* Backward of attend_one for sequence b. Returns 1 on failure. */
static int attend_back_one(const attn_bert_state *st, const acts *A, int C, int H, int D, int b,
                           const float *dctx, float *dqkv) {
    const size_t o = (size_t)st->off[b];
    const attn_attention_params p = seq_params(st, C, H, D, b);
    const float *q = A->qkv + o * 3 * C;
    float *dq = dqkv + o * 3 * C;
    return attn_attention_backward(&p, q, q + C, q + 2 * C, A->ctx + o * C, A->lse + o * H,
                                   dctx + o * C, dq, dq + C, dq + 2 * C) != ATTN_STATUS_OK;
}

static attn_status attention_backward(const attn_bert_model *m, attn_bert_state *st,
                                      const acts *A, const float *dctx, float *dqkv) {
    const attn_bert_config *c = &m->cfg;
    const int C = c->hidden_size, H = c->num_attention_heads, D = C / H, B = st->B;
    (void)attn_get_backend();
    int bad = 0;
    /* B == 1 runs the kernel's own threads, outside any region (see attention()). */
    if (B > 1) {
#pragma omp parallel for schedule(dynamic, 1) reduction(| : bad)
        for (int b = 0; b < B; b++) bad |= attend_back_one(st, A, C, H, D, b, dctx, dqkv);
    } else {
        for (int b = 0; b < B; b++) bad |= attend_back_one(st, A, C, H, D, b, dctx, dqkv);
    }
    if (bad) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert: attention backward failed");
    return ATTN_STATUS_OK;
}

/* G (M, C): in, d loss / d layer output; out, d loss / d layer input x. */
static attn_status layer_backward(attn_bert_model *m, attn_bert_state *st, int l, const float *x,
                                  float *G) {
    const attn_bert_config *c = &m->cfg;
    const attn_bert_layer *W = &m->w.layers[l];
    const attn_bert_layer *Gw = &m->g.layers[l];
    const acts *A = &st->tr[l];
    const int M = st->M, C = c->hidden_size, F = c->intermediate_size;
    const size_t n = (size_t)M * C;
    float *s1 = st->s1, *s2 = st->s2, *s3 = st->s3, *gh = st->gh;

    /* x2 = LN(r2), r2 = x1 + drop(h Woutᵀ + b) */
    ATTN_TRY(attn_layernorm_backward(M, C, A->r2, W->out_ln_w, A->mean2, A->rstd2, G, s1,
                                     Gw->out_ln_w, Gw->out_ln_b));
    const float *df = s1;
    if (dropping(st)) {
        memcpy(s2, s1, n * sizeof(float));
        drop(st, SITE_FFN(l), n, s2);
        df = s2;
    }
    ATTN_TRY(attn_gemm(false, false, M, F, C, 1.0f, df, C, W->out_w, F, 0.0f, gh, F, NULL,
                       ATTN_ACT_NONE));
    ATTN_TRY(attn_gemm(true, false, C, F, M, 1.0f, df, C, A->h, F, 1.0f, Gw->out_w, F, NULL,
                       ATTN_ACT_NONE));
    colsum_add(M, C, df, Gw->out_b);
    ATTN_TRY(attn_act_backward(c->hidden_act, (size_t)M * F, A->u, gh, gh));
    ATTN_TRY(attn_gemm(true, false, F, C, M, 1.0f, gh, F, A->x1, C, 1.0f, Gw->inter_w, C, NULL,
                       ATTN_ACT_NONE));
    colsum_add(M, F, gh, Gw->inter_b);
    /* d x1 = s1 (residual) + gh · W_inter */
    ATTN_TRY(attn_gemm(false, false, M, C, F, 1.0f, gh, F, W->inter_w, C, 1.0f, s1, C, NULL,
                       ATTN_ACT_NONE));

    /* x1 = LN(r1), r1 = x + drop(ctx Woᵀ + b) */
    ATTN_TRY(attn_layernorm_backward(M, C, A->r1, W->attn_ln_w, A->mean1, A->rstd1, s1, s3,
                                     Gw->attn_ln_w, Gw->attn_ln_b));
    const float *dout = s3;
    if (dropping(st)) {
        memcpy(s2, s3, n * sizeof(float));
        drop(st, SITE_ATTN(l), n, s2);
        dout = s2;
    }
    ATTN_TRY(attn_gemm(false, false, M, C, C, 1.0f, dout, C, W->attn.w_o, C, 0.0f, s1, C, NULL,
                       ATTN_ACT_NONE));
    ATTN_TRY(attn_gemm(true, false, C, C, M, 1.0f, dout, C, A->ctx, C, 1.0f, Gw->attn.w_o, C, NULL,
                       ATTN_ACT_NONE));
    colsum_add(M, C, dout, Gw->attn.b_o);
    ATTN_TRY(attention_backward(m, st, A, s1, st->dqkv));
    ATTN_TRY(attn_gemm(true, false, 3 * C, C, M, 1.0f, st->dqkv, 3 * C, x, C, 1.0f, Gw->attn.w_q, C,
                       NULL, ATTN_ACT_NONE));
    colsum_add(M, 3 * C, st->dqkv, Gw->attn.b_q);
    /* d x = s3 (residual) + dqkv · W_qkv */
    memcpy(G, s3, n * sizeof(float));
    return attn_gemm(false, false, M, C, 3 * C, 1.0f, st->dqkv, 3 * C, W->attn.w_q, C, 1.0f, G, C,
                     NULL, ATTN_ACT_NONE);
}

/* Backward through the encoder and embeddings from st->G = d loss / d final hidden (M, C). */
static attn_status encoder_backward(attn_bert_model *m, attn_bert_state *st) {
    const attn_bert_config *c = &m->cfg;
    const int M = st->M, C = c->hidden_size, L = c->num_hidden_layers;
    float *G = st->G;
    for (int l = L - 1; l >= 0; l--)
        ATTN_TRY(layer_backward(m, st, l, l ? st->tr[l - 1].x2 : st->x0, G));
    drop(st, SITE_EMB, (size_t)M * C, G);
    ATTN_TRY(attn_layernorm_backward(M, C, st->emb_sum, m->w.emb_ln_w, st->emb_mean, st->emb_rstd,
                                     G, st->s1, m->g.emb_ln_w, m->g.emb_ln_b));
    ATTN_TRY(attn_embedding_backward(M, c->vocab_size, C, st->ids, st->s1, m->g.word_emb));
    ATTN_TRY(
        attn_embedding_backward(M, c->max_position_embeddings, C, st->pos, st->s1, m->g.pos_emb));
    return attn_embedding_backward(M, c->type_vocab_size, C, st->types, st->s1, m->g.type_emb);
}

attn_status attn_bert_backward(attn_bert_model *m, attn_bert_state *st) {
    if (!m || !st) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert backward: NULL argument");
    if (st->model != m || !st->has_loss || !st->fwd_train)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert backward: needs a training-mode attn_bert_forward and "
                         "attn_bert_mlm_loss first");
    const attn_bert_config *c = &m->cfg;
    const int M = st->M, C = c->hidden_size, V = c->vocab_size, n = st->n_lab;
    memset(st->G, 0, (size_t)M * C * sizeof(float));
    if (n > 0) {
        /* logits = t · W_decᵀ + bias */
        ATTN_TRY(attn_gemm(true, false, V, C, n, 1.0f, st->dlogits, V, st->mlm_t, C, 1.0f,
                           m->g.mlm_decoder_w, C, NULL, ATTN_ACT_NONE));
        colsum_add(n, V, st->dlogits, m->g.mlm_bias);
        /* d1 (n, C) = dlogits · W_dec; then back through t = LN(a), a = act(u),
         * u = in · W_denseᵀ + b, into the gathered rows of G. */
        float *buf = attn_alloc((size_t)n * C * 2 * sizeof(float));
        if (!buf) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert backward: out of memory");
        float *d1 = buf, *d2 = buf + (size_t)n * C;
        attn_status s = attn_gemm(false, false, n, C, V, 1.0f, st->dlogits, V, m->w.mlm_decoder_w,
                                  C, 0.0f, d1, C, NULL, ATTN_ACT_NONE);
        if (!s)
            s = attn_layernorm_backward(n, C, st->mlm_a, m->w.mlm_ln_w, st->mlm_mean,
                                        st->mlm_rstd, d1, d2, m->g.mlm_ln_w, m->g.mlm_ln_b);
        if (!s) s = attn_act_backward(c->hidden_act, (size_t)n * C, st->mlm_u, d2, d2);
        if (!s)
            s = attn_gemm(true, false, C, C, n, 1.0f, d2, C, st->mlm_in, C, 1.0f,
                          m->g.mlm_dense_w, C, NULL, ATTN_ACT_NONE);
        if (!s) colsum_add(n, C, d2, m->g.mlm_dense_b);
        if (!s)
            s = attn_gemm(false, false, n, C, C, 1.0f, d2, C, m->w.mlm_dense_w, C, 0.0f, d1, C,
                          NULL, ATTN_ACT_NONE);
        if (!s)
            for (int i = 0; i < n; i++) {
                float *g = st->G + (size_t)st->lab_row[i] * C;
                const float *d = d1 + (size_t)i * C;
                for (int j = 0; j < C; j++) g[j] += d[j];
            }
        attn_free(buf);
        ATTN_TRY(s);
    }
    st->has_loss = false;
    return encoder_backward(m, st);
}

attn_status attn_bert_backward_hidden(attn_bert_model *m, attn_bert_state *st,
                                      const float *dhidden) {
    if (!m || !st || !dhidden)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert backward: NULL argument");
    if (st->model != m || !st->has_fwd || !st->fwd_train)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert backward: needs a training-mode attn_bert_forward first");
    const int C = m->cfg.hidden_size, T = st->T;
    for (int b = 0; b < st->B; b++)
        memcpy(st->G + (size_t)st->off[b] * C, dhidden + (size_t)b * T * C,
               (size_t)st->len[b] * C * sizeof(float));
    st->has_loss = false;
    return encoder_backward(m, st);
}

/* ---- model directory ------------------------------------------------------------------------ */

static bool dir_path(char *buf, size_t n, const char *dir, const char *name, const char *what) {
    int k = snprintf(buf, n, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= n) {
        attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert %s: directory path too long: %s", what, dir);
        return false;
    }
    return true;
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

attn_status attn_bert_save_dir(const attn_bert_model *m, const char *dir) {
    if (!m || !dir || !*dir)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert save: NULL argument");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return attn_fail(ATTN_STATUS_IO, "bert save: cannot create directory %s: %s", dir,
                         strerror(errno));
    char path[4096];
    if (!dir_path(path, sizeof path, dir, "model.safetensors", "save"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    attn_st_entry *e = attn_calloc((size_t)m->n_tensors * sizeof *e);
    char(*names)[112] = attn_calloc((size_t)m->n_tensors * sizeof *names);
    if (!e || !names) {
        attn_free(e);
        attn_free(names);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert save: out of memory");
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_bert_tensor *t = &m->tensors[i];
        /* BertForMaskedLM nests the encoder under "bert."; its head is "cls.*". */
        bool prefix = m->has_mlm && strncmp(t->name, "cls.", 4) != 0;
        snprintf(names[i], sizeof names[i], "%s%s", prefix ? "bert." : "", t->name);
        e[i].name = names[i];
        e[i].dtype = ATTN_DTYPE_F32;
        e[i].ndim = t->ndim;
        e[i].shape[0] = t->shape[0];
        e[i].shape[1] = t->shape[1];
        e[i].data = m->params + t->offset;
    }
    /* transformers refuses safetensors files whose metadata format is not "pt". */
    static const char *const meta[] = {"format", "pt", NULL};
    attn_status s = attn_st_save(path, e, m->n_tensors, meta);
    attn_free(e);
    attn_free(names);
    ATTN_TRY(s);
    if (!dir_path(path, sizeof path, dir, "config.json", "save"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    return attn_bert_config_save(path, &m->cfg, m->has_mlm ? "BertForMaskedLM" : "BertModel");
}

/* The file's name for one of our tensors: with the encoder prefix (not for cls.*), and the old
 * LayerNorm.gamma / .beta spelling as a fallback. NULL when absent. */
static const attn_st_tensor *find_hf(attn_st_file *f, const char *prefix, const char *name,
                                     char *buf, size_t cap) {
    const char *pre = strncmp(name, "cls.", 4) == 0 ? "" : prefix;
    snprintf(buf, cap, "%s%s", pre, name);
    const attn_st_tensor *t = attn_st_find(f, buf);
    if (t) return t;
    static const struct {
        const char *now, *old;
    } alt[] = {{"LayerNorm.weight", "LayerNorm.gamma"}, {"LayerNorm.bias", "LayerNorm.beta"}};
    for (int i = 0; i < 2; i++)
        if (ends_with(name, alt[i].now)) {
            size_t k = strlen(name) - strlen(alt[i].now);
            snprintf(buf, cap, "%s%.*s%s", pre, (int)k, name, alt[i].old);
            if ((t = attn_st_find(f, buf))) return t;
        }
    if (strcmp(name, "cls.predictions.bias") == 0) {
        snprintf(buf, cap, "cls.predictions.decoder.bias");
        if ((t = attn_st_find(f, buf))) return t;
    }
    snprintf(buf, cap, "%s%s", pre, name);
    return NULL;
}

static bool has_prefix_tensor(attn_st_file *f, const char *start) {
    for (int i = 0; i < attn_st_count(f); i++)
        if (strncmp(attn_st_tensor_at(f, i)->name, start, strlen(start)) == 0) return true;
    return false;
}

attn_status attn_bert_load_dir(const char *dir, attn_bert_model **out) {
    if (!dir || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert load: NULL argument");
    *out = NULL;
    char path[4096];
    if (!dir_path(path, sizeof path, dir, "config.json", "load")) return ATTN_STATUS_INVALID_ARGUMENT;
    attn_bert_config cfg;
    ATTN_TRY(attn_bert_config_load(path, &cfg));
    if (!dir_path(path, sizeof path, dir, "model.safetensors", "load"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    if (!file_exists(path)) {
        char other[4096];
        if (dir_path(other, sizeof other, dir, "model.safetensors.index.json", "load") &&
            file_exists(other))
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: sharded checkpoints (model.safetensors.index.json) are not "
                             "supported; save the model as one model.safetensors",
                             dir);
        if (dir_path(other, sizeof other, dir, "pytorch_model.bin", "load") && file_exists(other))
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: only pytorch_model.bin is there; attn reads model.safetensors "
                             "(convert with transformers: save_pretrained(safe_serialization="
                             "True))",
                             dir);
    }
    attn_st_file *f;
    ATTN_TRY(attn_st_open(path, &f));
    /* Which naming and which parts: "bert."-prefixed (BertForMaskedLM / BertForPreTraining) or
     * bare (BertModel); pooler and MLM head present or not. */
    const char *prefix = has_prefix_tensor(f, "bert.embeddings.") ? "bert." : "";
    char buf[160];
    snprintf(buf, sizeof buf, "%spooler.", prefix);
    bool pooler = has_prefix_tensor(f, buf);
    bool mlm = has_prefix_tensor(f, "cls.predictions.");
    /* A layer beyond num_hidden_layers: the file belongs to another configuration. */
    attn_status s = ATTN_STATUS_OK;
    snprintf(buf, sizeof buf, "%sencoder.layer.", prefix);
    for (int i = 0; i < attn_st_count(f) && !s; i++) {
        const char *nm = attn_st_tensor_at(f, i)->name;
        if (strncmp(nm, buf, strlen(buf)) != 0) continue;
        long k = strtol(nm + strlen(buf), NULL, 10);
        if (k < 0 || k >= cfg.num_hidden_layers)
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: tensor '%s' is a layer beyond num_hidden_layers = %d of "
                          "config.json",
                          path, nm, cfg.num_hidden_layers);
    }
    attn_bert_model *m = NULL;
    if (!s) s = model_alloc(&cfg, pooler, mlm, &m);
    for (int i = 0; !s && i < m->n_tensors; i++) {
        const attn_bert_tensor *t = &m->tensors[i];
        const attn_st_tensor *ft = find_hf(f, prefix, t->name, buf, sizeof buf);
        if (!ft) {
            if (t->ndim == 2)
                s = attn_fail(ATTN_STATUS_FORMAT,
                              "%s: tensor '%s' is missing (expected shape (%lld, %lld) for the "
                              "model of config.json)",
                              path, buf, (long long)t->shape[0], (long long)t->shape[1]);
            else
                s = attn_fail(ATTN_STATUS_FORMAT,
                              "%s: tensor '%s' is missing (expected shape (%lld) for the model of "
                              "config.json)",
                              path, buf, (long long)t->shape[0]);
            break;
        }
        s = attn_st_read_f32(f, buf, t->ndim, t->shape, m->params + t->offset);
    }
    attn_st_close(f);
    if (s) {
        attn_bert_model_free(m);
        return s;
    }
    *out = m;
    return ATTN_STATUS_OK;
}

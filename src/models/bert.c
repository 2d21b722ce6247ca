/* bert.c — BERT (attn_bert.h) as a composition of the block layer (attn_nn.h): the parameter
 * table with BertModel's names, BertPreTrainedModel's initialization, packed weights, the run
 * state, forward over packed rows, the pooler and pooling, the masked-LM head, loss and backward.
 *
 * A layer is two post-norm sub-layers, x = LN(x + drop(attn(x))) and x = LN(x + drop(ffn(x))).
 * Packed rows: a batch of B sequences of lengths len[b] (padded to T) is computed on
 * M = sum(len) rows, sequence b occupying rows off[b] .. off[b+1]-1: every dense layer, norm and
 * elementwise step works on those M rows, and attention runs once per sequence over its own rows
 * (the block layer's variable-length layout). Padding therefore costs nothing, and a row's result
 * depends only on its own sequence (up to rounding: the GEMM has separate paths for few rows).
 *
 * Evaluation mode keeps one set of layer buffers, reused by every layer. Training mode keeps
 * each layer's activations for backward; those are allocated on the first training forward. */
#include "attn_bert.h"

#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_train.h"
#include "bert-impl.h"
#include "models-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameter layout ---------------------------------------------------------------------- */

#define NAME(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)

/* The views w over L's buffer in BertModel's tensor order (recording the table when L records):
 * every matrix and embedding table normal(0, initializer_range), the padding row of the word
 * embeddings 0, biases 0 (cls.predictions.bias too), LayerNorm gains 1. */
static void layout(const attn_bert_config *c, bool pooler, bool mlm, mdl_layout *L,
                   attn_bert_weights *w) {
    const int C = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
    const float sd = c->initializer_range, eps = c->layer_norm_eps;
    char a[128], b[128];
    w->word_emb = mdl_take(L, 2, V, C, ATTN_INIT_NORMAL, sd, true,
                           "embeddings.word_embeddings.weight");
    if (L->t && c->pad_token_id >= 0) L->t[L->n - 1].zero_row = c->pad_token_id;
    w->pos_emb = mdl_take(L, 2, c->max_position_embeddings, C, ATTN_INIT_NORMAL, sd, true,
                          "embeddings.position_embeddings.weight");
    w->type_emb = mdl_take(L, 2, c->type_vocab_size, C, ATTN_INIT_NORMAL, sd, true,
                           "embeddings.token_type_embeddings.weight");
    w->emb_ln = mdl_take_norm(L, ATTN_NORM_LAYER, C, eps, true, "embeddings.LayerNorm.weight",
                              "embeddings.LayerNorm.bias");
    for (int l = 0; l < c->num_hidden_layers; l++) {
        attn_bert_layer *Y = &w->layers[l];
        memset(Y, 0, sizeof *Y);
#define E(s) NAME(a, "encoder.layer.%d.%s", l, s)
#define EB(s) NAME(b, "encoder.layer.%d.%s", l, s)
        /* q, k, v weights adjacent, then their biases: one fused (3C, C) projection. */
        static const char *const qkv[3] = {"query", "key", "value"};
        attn_nn_linear *P[3] = {&Y->attn.q, &Y->attn.k, &Y->attn.v};
        float *pw[3], *pb[3];
        for (int i = 0; i < 3; i++)
            pw[i] = mdl_take(L, 2, C, C, ATTN_INIT_NORMAL, sd, true,
                             "encoder.layer.%d.attention.self.%s.weight", l, qkv[i]);
        for (int i = 0; i < 3; i++)
            pb[i] = mdl_take(L, 1, C, 0, ATTN_INIT_ZEROS, 0.0f, false,
                             "encoder.layer.%d.attention.self.%s.bias", l, qkv[i]);
        for (int i = 0; i < 3; i++) *P[i] = attn_nn_linear_make(pw[i], pb[i], C, C, ATTN_NN_OUT_IN);
        Y->attn.o = mdl_take_linear(L, C, C, ATTN_NN_OUT_IN, true, ATTN_INIT_NORMAL, sd,
                                    E("attention.output.dense.weight"),
                                    EB("attention.output.dense.bias"));
        Y->attn_ln = mdl_take_norm(L, ATTN_NORM_LAYER, C, eps, true,
                                   E("attention.output.LayerNorm.weight"),
                                   EB("attention.output.LayerNorm.bias"));
        Y->ffn.kind = ATTN_FFN_PLAIN;
        Y->ffn.act = c->hidden_act;
        Y->ffn.up = mdl_take_linear(L, C, F, ATTN_NN_OUT_IN, true, ATTN_INIT_NORMAL, sd,
                                    E("intermediate.dense.weight"), EB("intermediate.dense.bias"));
        Y->ffn.down = mdl_take_linear(L, F, C, ATTN_NN_OUT_IN, true, ATTN_INIT_NORMAL, sd,
                                      E("output.dense.weight"), EB("output.dense.bias"));
        Y->out_ln = mdl_take_norm(L, ATTN_NORM_LAYER, C, eps, true, E("output.LayerNorm.weight"),
                                  EB("output.LayerNorm.bias"));
#undef E
#undef EB
    }
    memset(&w->pooler, 0, sizeof w->pooler);
    if (pooler)
        w->pooler = mdl_take_linear(L, C, C, ATTN_NN_OUT_IN, true, ATTN_INIT_NORMAL, sd,
                                    "pooler.dense.weight", "pooler.dense.bias");
    memset(&w->mlm_dense, 0, sizeof w->mlm_dense);
    memset(&w->mlm_ln, 0, sizeof w->mlm_ln);
    w->mlm_decoder_w = w->mlm_bias = NULL;
    if (mlm) {
        w->mlm_dense = mdl_take_linear(L, C, C, ATTN_NN_OUT_IN, true, ATTN_INIT_NORMAL, sd,
                                       "cls.predictions.transform.dense.weight",
                                       "cls.predictions.transform.dense.bias");
        w->mlm_ln = mdl_take_norm(L, ATTN_NORM_LAYER, C, eps, true,
                                  "cls.predictions.transform.LayerNorm.weight",
                                  "cls.predictions.transform.LayerNorm.bias");
        w->mlm_decoder_w = c->tie_word_embeddings
                               ? w->word_emb
                               : mdl_take(L, 2, V, C, ATTN_INIT_NORMAL, sd, true,
                                          "cls.predictions.decoder.weight");
        w->mlm_bias = mdl_take(L, 1, V, 0, ATTN_INIT_ZEROS, 0.0f, false, "cls.predictions.bias");
    }
}

void bert_layout_grads(const attn_bert_model *m, float *grads, attn_bert_weights *g) {
    mdl_layout L = mdl_layout_begin(grads, false);
    layout(&m->cfg, m->has_pooler, m->has_mlm, &L, g);
}

void attn_bert_init_params(attn_bert_model *m, uint64_t seed) {
    if (m && m->params) attn_params_init(m->tensors, m->n_tensors, m->params, seed);
}

void attn_bert_zero_grad(attn_bert_model *m) {
    if (m && m->grads) attn_params_zero(m->grads, m->num_params);
}

const attn_bert_tensor *attn_bert_find_tensor(const attn_bert_model *m, const char *name) {
    if (!m || !name) return NULL;
    if (strncmp(name, "bert.", 5) == 0) name += 5;
    return attn_params_find(m->tensors, m->n_tensors, name);
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

attn_status bert_model_alloc(const attn_bert_config *cfg, bool pooler, bool mlm,
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
    m->w.layers = attn_calloc((size_t)L * sizeof(attn_bert_layer));
    m->g.layers = attn_calloc((size_t)L * sizeof(attn_bert_layer));
    mdl_layout lay = mdl_layout_begin(m->params, true);
    if (m->params && m->w.layers) layout(cfg, pooler, mlm, &lay, &m->w);
    m->tensors = lay.t, m->n_tensors = lay.n;
    if (!m->params || !m->grads || !m->w.layers || !m->g.layers || lay.oom) {
        size_t n = m->num_params;
        attn_bert_model_free(m);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert: out of memory for %zu parameters", n);
    }
    if (lay.cursor != m->num_params) {
        attn_bert_model_free(m);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert: internal parameter count mismatch");
    }
    bert_layout_grads(m, m->grads, &m->g);
    *out = m;
    return ATTN_STATUS_OK;
}

attn_status attn_bert_model_init(const attn_bert_config *cfg, uint64_t seed, bool with_pooler,
                                 bool with_mlm_head, attn_bert_model **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert: NULL output");
    ATTN_TRY(bert_model_alloc(cfg, with_pooler, with_mlm_head, out));
    attn_bert_init_params(*out, seed);
    return ATTN_STATUS_OK;
}

/* ---- packed weights ------------------------------------------------------------------------ */

/* One layer's nn.Linear weights as attn_gemm_pack_b panels (op(B) = Wᵀ, (in, out)). */
typedef struct {
    attn_gemm_packed_b qkv;   /* (C, 3C) */
    attn_gemm_packed_b o;     /* (C, C) */
    attn_gemm_packed_b inter; /* (C, F) */
    attn_gemm_packed_b out;   /* (F, C) */
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

/* The fused (3C, C) query|key|value map of a layer. */
static attn_nn_linear fused_qkv(const attn_bert_layer *Y) {
    return attn_nn_linear_make(Y->attn.q.w, Y->attn.q.b, Y->attn.q.in, 3 * Y->attn.q.out,
                               ATTN_NN_OUT_IN);
}

attn_status attn_bert_pack_weights_precision(attn_bert_model *m, attn_precision precision) {
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert pack: NULL model");
    ATTN_TRY(attn_precision_check(precision, "bert pack"));
    attn_bert_unpack_weights(m);
    const int L = m->cfg.num_hidden_layers;
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
        const attn_bert_layer *Y = &m->w.layers[l];
        packed_layer *P = &p->layers[l];
        const attn_nn_linear qkv = fused_qkv(Y);
        s = attn_nn_linear_pack(&qkv, precision, &P->qkv);
        if (!s) s = attn_nn_linear_pack(&Y->attn.o, precision, &P->o);
        if (!s) s = attn_nn_linear_pack(&Y->ffn.up, precision, &P->inter);
        if (!s) s = attn_nn_linear_pack(&Y->ffn.down, precision, &P->out);
    }
    if (s) attn_bert_unpack_weights(m);
    return s;
}

/* Layer l's two post-norm sub-layers over the views Y (weights or gradients). With packed
 * (inference under the packing backend) the projections read the packed panels. */
static void sublayers(const attn_bert_model *m, const attn_bert_layer *Y, int l,
                      const packed_layer *packed, const attn_nn_attn_cfg *acfg, float p_drop,
                      attn_nn_sublayer S[2]) {
    memset(S, 0, 2 * sizeof *S);
    S[0].kind = ATTN_SUB_ATTN;
    S[0].norm = Y->attn_ln;
    S[0].acfg = acfg;
    S[0].attn = Y->attn;
    S[0].p_drop = p_drop;
    S[0].site = BERT_SITE_ATTN(l);
    S[1].kind = ATTN_SUB_FFN;
    S[1].norm = Y->out_ln;
    S[1].ffn = Y->ffn;
    S[1].p_drop = p_drop;
    S[1].site = BERT_SITE_FFN(l);
    if (packed) {
        S[0].attn.qkv = fused_qkv(Y);
        S[0].attn.qkv.packed = &packed->qkv;
        S[0].attn.o.packed = &packed->o;
        S[1].ffn.up.packed = &packed->inter;
        S[1].ffn.down.packed = &packed->out;
    }
    (void)m;
}

/* ---- run state ----------------------------------------------------------------------------- */

struct attn_bert_state {
    const attn_bert_model *model;
    attn_nn_attn_cfg acfg;        /* every layer's self-attention */
    int capB, capT, capM;
    int B, T, M;                  /* the last forward's sizes */
    bool has_fwd, fwd_train, has_loss;
    attn_nn_run run;              /* training (dropout), dropout key */
    bool keep;                    /* keep the activations for backward even without dropout */
    int64_t row0;                 /* global packed row of the first row (data parallelism) */
    mdl_grad_hook grad_hook;      /* finished layers (data parallelism over ranks) */
    int32_t *len;                 /* (capB) lengths of the last forward */
    int32_t *off;                 /* (capB + 1) packed row offsets */
    int32_t *ids, *types, *pos;   /* (capM) packed ids, token types, positions */
    float *emb_sum;               /* (capM, C) word + position + type (the embeddings' LN input) */
    float *emb_mean, *emb_rstd;   /* (capM) training only */
    uint64_t *emb_mask;           /* embedding dropout keep bits, training only */
    float *x0;                    /* (capM, C) embeddings output (evaluation: every layer's) */
    attn_nn_sub_acts ev[2];       /* evaluation buffers, shared by the layers */
    attn_nn_sub_acts *tr;         /* [2L] training buffers, NULL until the first training forward */
    const float *out;             /* (M, C) final hidden states of the last forward */
    /* masked-LM loss */
    int n_lab, cap_lab;
    int32_t *lab_row, *lab_tgt;   /* (cap_lab) packed row and target of each labelled position */
    float *mlm_in, *mlm_u, *mlm_a, *mlm_t; /* (cap_lab, C) gathered hidden, pre-act, act, LN */
    float *mlm_mean, *mlm_rstd;   /* (cap_lab) */
    float *dlogits;               /* (cap_lab, V) logits, then d loss / d logits */
    /* training scratch */
    float *tmp;                   /* (capM, C) a sub-layer's branch before dropout */
    float *G;                     /* (capM, C) d loss / d stream */
    float *work;                  /* a sub-layer backward's scratch */
    attn_bert_capture cap;
    attn_nn_attn_capture *acap;   /* one layer's attention internals, or NULL */
    int acap_layer;
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
    /* Evaluation buffers (training adds per-layer buffers later). */
    double total = Md * (C * 6 + F + 3 + 3) + Md * (4 * C + F + 3 * C);
    if (Md > INT32_MAX / 4 || total > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)) ||
        Md * fmax(3 * C, F) > (double)INT32_MAX * 64)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "bert state: B=%d T=%d needs %.3g floats, too large", B, T, total);
    attn_bert_state *st = attn_calloc(sizeof *st);
    if (!st) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert state: out of memory");
    st->model = m;
    st->acfg = attn_nn_attn_default_cfg(c->hidden_size, c->num_attention_heads);
    st->run = attn_nn_default_run();
    st->run.few_rows = true; /* a short sentence's latency (attn_nn_run) */
    st->capB = B, st->capT = T, st->capM = B * T;
    const size_t M = (size_t)B * T, Cz = (size_t)c->hidden_size, Fz = (size_t)c->intermediate_size;
    st->len = attn_arena_alloc(&st->arena, (size_t)B * sizeof(int32_t));
    st->off = attn_arena_alloc(&st->arena, ((size_t)B + 1) * sizeof(int32_t));
    st->ids = attn_arena_alloc(&st->arena, M * sizeof(int32_t));
    st->types = attn_arena_alloc(&st->arena, M * sizeof(int32_t));
    st->pos = attn_arena_alloc(&st->arena, M * sizeof(int32_t));
    st->emb_sum = salloc(st, M * Cz);
    st->x0 = salloc(st, M * Cz);
    /* Evaluation: attention x0 -> r -> x1, FFN x1 -> r -> x0 (the next layer's input). */
    float *r = salloc(st, M * Cz), *x1 = salloc(st, M * Cz);
    memset(st->ev, 0, sizeof st->ev);
    st->ev[0].ln = x1, st->ev[0].res = r;
    st->ev[0].attn.proj = salloc(st, M * 3 * Cz);
    st->ev[0].attn.ctx = salloc(st, M * Cz);
    st->ev[1].ln = st->x0, st->ev[1].res = r;
    st->ev[1].ffn.h = salloc(st, M * Fz);
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
    const attn_bert_model *m = st->model;
    const attn_bert_config *c = &m->cfg;
    const int L = c->num_hidden_layers, Mi = st->capM;
    const size_t M = (size_t)Mi, Cz = (size_t)c->hidden_size;
    const size_t Fz = (size_t)c->intermediate_size, H = (size_t)c->num_attention_heads;
    const double total =
        (double)M * L * (8.0 * Cz + 2.0 * Fz + H + 4) + (double)M * (7.0 * Cz + Fz + 2);
    if (total > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)))
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "bert state: training buffers for B=%d T=%d need %.3g floats", st->capB,
                         st->capT, total);
    attn_nn_sub_acts *tr = attn_arena_calloc(&st->arena, (size_t)2 * L * sizeof *tr);
    const size_t words = attn_nn_dropout_words(Mi, (int)Cz);
    st->emb_mean = salloc(st, M);
    st->emb_rstd = salloc(st, M);
    st->emb_mask = attn_arena_calloc(&st->arena, words * sizeof(uint64_t));
    size_t work = 0;
    for (int l = 0; l < L && tr; l++) {
        attn_nn_sublayer S[2];
        sublayers(m, &m->w.layers[l], l, NULL, &st->acfg, c->hidden_dropout_prob, S);
        for (int k = 0; k < 2; k++) mdl_sub_acts_alloc(&st->arena, &S[k], Mi, Mi, &tr[2 * l + k], &work);
    }
    st->tmp = salloc(st, M * Cz);
    st->G = salloc(st, M * Cz);
    st->work = salloc(st, work);
    if (st->arena.oom || !tr) {
        /* Nothing usable was made visible: tr stays NULL; the allocations are freed with the
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
    st->run.training = training;
    st->run.seed = seed;
    st->run.step = step;
}

void bert_state_set_keep(attn_bert_state *st, bool keep) {
    if (st) st->keep = keep;
}

void bert_state_set_grad_hook(attn_bert_state *st, const mdl_grad_hook *h) {
    if (st && h) st->grad_hook = *h;
}

void bert_state_set_row0(attn_bert_state *st, int64_t row0) {
    if (st) st->row0 = row0 > 0 ? row0 : 0;
}

void attn_bert_set_capture(attn_bert_state *st, const attn_bert_capture *cap) {
    if (!st) return;
    if (cap)
        st->cap = *cap;
    else
        memset(&st->cap, 0, sizeof st->cap);
}

void attn_bert_set_attn_capture(attn_bert_state *st, int layer, attn_nn_attn_capture *cap) {
    if (!st) return;
    st->acap = cap;
    st->acap_layer = layer;
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

/* The packed rows for dropout: row r of this state is global packed row row0 + r. */
static attn_nn_rows rows(const attn_bert_state *st) {
    attn_nn_rows r = {st->row0, 1, 1};
    return r;
}

static bool dropping(const attn_bert_state *st) {
    return st->run.training && st->model->cfg.hidden_dropout_prob > 0.0f;
}

/* The sequences of the last forward, in the block layer's variable-length layout. */
static attn_nn_seqs seqs(const attn_bert_state *st) {
    attn_nn_seqs s = attn_nn_seqs_dense(st->B, st->T, st->T);
    s.off = st->off;
    return s;
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
    ATTN_TRY(attn_nn_norm_forward(&m->w.emb_ln, M, sum, st->x0, train ? st->emb_mean : NULL,
                                  train ? st->emb_rstd : NULL));
    if (dropping(st))
        attn_nn_dropout_fwd(&st->run, BERT_SITE_EMB, c->hidden_dropout_prob, rows(st), M, C, NULL,
                            st->x0, st->x0, st->emb_mask);
    return ATTN_STATUS_OK;
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
    const bool train = st->run.training || st->keep;
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
    /* The packed weights (attn_bert_pack_weights) in evaluation mode, under their backend. */
    const struct attn_bert_packed *P =
        !train && m->packed && m->packed->backend == attn_get_backend() ? m->packed : NULL;
    const attn_nn_seqs s = seqs(st);

    ATTN_TRY(embed(m, st, train));
    if (st->cap.hidden && st->cap.hidden[0]) unpack(st, st->x0, C, st->cap.hidden[0]);
    const float *x = st->x0;
    for (int l = 0; l < L; l++) {
        attn_nn_sublayer S[2];
        sublayers(m, &m->w.layers[l], l, P ? &P->layers[l] : NULL, &st->acfg,
                  c->hidden_dropout_prob, S);
        attn_nn_sub_acts *A = train ? &st->tr[2 * l] : st->ev;
        float *probs = st->cap.probs ? st->cap.probs[l] : NULL;
        ATTN_TRY(attn_nn_sub_forward(&st->run, &S[0], &s, M, rows(st), x, NULL, NULL, &A[0],
                                     probs, st->tmp));
        if (st->acap && st->acap_layer == l)
            ATTN_TRY(attn_nn_attn_capture_take(st->acap, &S[0], M, M, x, NULL, &A[0]));
        ATTN_TRY(attn_nn_sub_forward(&st->run, &S[1], &s, M, rows(st), A[0].ln, NULL, NULL,
                                     &A[1], NULL, st->tmp));
        x = A[1].ln;
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
    attn_nn_run run = attn_nn_default_run();
    run.few_rows = true;
    attn_status s = attn_nn_linear_forward(&run, &m->w.pooler, B, cls, C, 0.0f, pooled, C,
                                           ATTN_ACT_NONE);
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

/* logits (n, V) for the gathered rows in (n, C): decoder(LN(act(dense(in)))) + bias; u, a, t
 * (n, C) scratch (u NULL: evaluation, the activation fused); mean, rstd (n) or NULL. */
static attn_status mlm_head(const attn_bert_model *m, int n, const float *in, float *u, float *a,
                            float *t, float *mean, float *rstd, float *logits) {
    const attn_bert_config *c = &m->cfg;
    const int C = c->hidden_size, V = c->vocab_size;
    attn_nn_run run = attn_nn_default_run();
    run.few_rows = true;
    if (u) {
        ATTN_TRY(attn_nn_linear_forward(&run, &m->w.mlm_dense, n, in, C, 0.0f, u, C,
                                        ATTN_ACT_NONE));
        ATTN_TRY(attn_act_forward(c->hidden_act, (size_t)n * C, u, a));
    } else {
        ATTN_TRY(attn_nn_linear_forward(&run, &m->w.mlm_dense, n, in, C, 0.0f, a, C,
                                        c->hidden_act));
    }
    ATTN_TRY(attn_nn_norm_forward(&m->w.mlm_ln, n, a, t, mean, rstd));
    const attn_nn_linear dec = attn_nn_linear_make(m->w.mlm_decoder_w, m->w.mlm_bias, C, V,
                                                   ATTN_NN_OUT_IN);
    return attn_nn_linear_forward(&run, &dec, n, t, C, 0.0f, logits, V, ATTN_ACT_NONE);
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

/* Labelled positions of labels (B, T) in the state's batch: their number, or an error. */
attn_status bert_count_labels(const attn_bert_model *m, int B, int T, const int32_t *len,
                              const int32_t *labels, int *n_out) {
    const int V = m->cfg.vocab_size;
    int n = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int32_t y = labels[(size_t)b * T + t];
            if (y == ATTN_BERT_IGNORE_INDEX) continue;
            if (t >= (len ? len[b] : T))
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
    *n_out = n;
    return ATTN_STATUS_OK;
}

attn_status bert_mlm_loss(const attn_bert_model *m, attn_bert_state *st, const int32_t *labels,
                          float grad_scale, float *loss) {
    if (!m || !st || !labels || !loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert mlm loss: NULL argument");
    if (!m->has_mlm)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert mlm loss: this model has no masked-LM head");
    if (st->model != m || !st->has_fwd)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert mlm loss: no forward pass of this model on this state");
    const int B = st->B, T = st->T, V = m->cfg.vocab_size, C = m->cfg.hidden_size;
    int n;
    ATTN_TRY(bert_count_labels(m, B, T, st->len, labels, &n));
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
    if (grad_scale != 1.0f) {
        const size_t k = (size_t)n * V;
        for (size_t i = 0; i < k; i++) st->dlogits[i] *= grad_scale;
    }
    st->has_loss = st->fwd_train;
    return ATTN_STATUS_OK;
}

attn_status attn_bert_mlm_loss(const attn_bert_model *m, attn_bert_state *st,
                               const int32_t *labels, float *loss) {
    return bert_mlm_loss(m, st, labels, 1.0f, loss);
}

/* ---- backward ------------------------------------------------------------------------------ */

/* Backward through the encoder and embeddings from st->G = d loss / d final hidden (M, C). */
static attn_status encoder_backward(attn_bert_model *m, attn_bert_state *st) {
    const attn_bert_config *c = &m->cfg;
    const int M = st->M, C = c->hidden_size, L = c->num_hidden_layers;
    const attn_nn_seqs s = seqs(st);
    float *G = st->G;
    for (int l = L - 1; l >= 0; l--) {
        attn_nn_sublayer S[2], Sg[2];
        sublayers(m, &m->w.layers[l], l, NULL, &st->acfg, c->hidden_dropout_prob, S);
        sublayers(m, &m->g.layers[l], l, NULL, &st->acfg, c->hidden_dropout_prob, Sg);
        attn_nn_sub_acts *A = &st->tr[2 * l];
        const float *x = l ? st->tr[2 * l - 1].ln : st->x0;
        ATTN_TRY(attn_nn_sub_backward(&st->run, &S[1], &Sg[1], &s, M, A[0].ln, NULL, &A[1], G,
                                      NULL, st->work));
        ATTN_TRY(attn_nn_sub_backward(&st->run, &S[0], &Sg[0], &s, M, x, NULL, &A[0], G, NULL,
                                      st->work));
        /* layer l and everything after it in the buffer (the pooler, the MLM head) are final */
        mdl_grad_ready(&st->grad_hook, m->g.layers[l].attn.q.w);
    }
    if (dropping(st)) attn_nn_dropout_bwd(c->hidden_dropout_prob, M, C, st->emb_mask, G, G);
    ATTN_TRY(attn_nn_norm_backward(&m->w.emb_ln, &m->g.emb_ln, M, st->emb_sum, st->emb_mean,
                                   st->emb_rstd, G, st->tmp, false, NULL));
    ATTN_TRY(attn_embedding_backward(M, c->vocab_size, C, st->ids, st->tmp, m->g.word_emb));
    ATTN_TRY(
        attn_embedding_backward(M, c->max_position_embeddings, C, st->pos, st->tmp, m->g.pos_emb));
    return attn_embedding_backward(M, c->type_vocab_size, C, st->types, st->tmp, m->g.type_emb);
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
        const attn_nn_run run = attn_nn_default_run();
        const attn_nn_linear dec = attn_nn_linear_make(m->w.mlm_decoder_w, m->w.mlm_bias, C, V,
                                                       ATTN_NN_OUT_IN);
        const attn_nn_linear gdec = attn_nn_linear_make(m->g.mlm_decoder_w, m->g.mlm_bias, C, V,
                                                        ATTN_NN_OUT_IN);
        /* logits = t · W_decᵀ + bias; then back through t = LN(a), a = act(u),
         * u = in · W_denseᵀ + b, into the gathered rows of G. */
        float *buf = attn_alloc((size_t)n * C * 2 * sizeof(float));
        if (!buf) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert backward: out of memory");
        float *d1 = buf, *d2 = buf + (size_t)n * C;
        attn_status s = attn_nn_linear_backward(&run, &dec, n, st->mlm_t, C, st->dlogits, V, d1, C,
                                                false, &gdec);
        if (!s)
            s = attn_nn_norm_backward(&m->w.mlm_ln, &m->g.mlm_ln, n, st->mlm_a, st->mlm_mean,
                                      st->mlm_rstd, d1, d2, false, NULL);
        if (!s) s = attn_act_backward(c->hidden_act, (size_t)n * C, st->mlm_u, d2, d2);
        if (!s)
            s = attn_nn_linear_backward(&run, &m->w.mlm_dense, n, st->mlm_in, C, d2, C, d1, C,
                                        false, &m->g.mlm_dense);
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

/* encdec.c — the original Transformer encoder–decoder (attn_models.h) as a composition of the
 * block layer (attn_nn.h): parameter table and initialization, run state, forward, loss,
 * backward, the incremental decoder step the translator runs, model directories.
 *
 * An encoder layer is two sub-layers (self-attention over the source with its padding hidden,
 * feed-forward), a decoder layer three (causal self-attention, cross-attention over the encoder
 * output, feed-forward), each pre-LN or post-LN (attn_nn_sublayer). The state keeps every
 * sub-layer's activations, which is everything backward reads. All rows are packed: a batch of B
 * sequences of length T uses the first B·T rows of each buffer whatever the state's capacity. */
#include "attn_models.h"

#include "attn_io.h"
#include "attn_kernels.h"
#include "encdec-impl.h"
#include "models-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- parameter layout ---------------------------------------------------------------------- */

#define NAME(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)

/* One attention layer in attn_mha_weights_view's order (q, k, v weights adjacent, then their
 * biases, then o), recorded as eight tensors PREFIX.{w_q,w_k,w_v,b_q,b_k,b_v,w_o,b_o}; matrices
 * Xavier-uniform, each q / k / v separately. */
static attn_nn_attn take_attn(mdl_layout *L, const char *prefix, int C, bool cross) {
    attn_nn_attn a;
    memset(&a, 0, sizeof a);
    const float xav = (float)sqrt(6.0 / (2.0 * C));
    float *w[3], *b[3];
    static const char *const wn[3] = {"w_q", "w_k", "w_v"}, *const bn[3] = {"b_q", "b_k", "b_v"};
    for (int i = 0; i < 3; i++)
        w[i] = mdl_take(L, 2, C, C, ATTN_INIT_UNIFORM, xav, true, "%s.%s", prefix, wn[i]);
    for (int i = 0; i < 3; i++)
        b[i] = mdl_take(L, 1, C, 0, ATTN_INIT_ZEROS, 0.0f, false, "%s.%s", prefix, bn[i]);
    a.q = attn_nn_linear_make(w[0], b[0], C, C, ATTN_NN_OUT_IN);
    a.k = attn_nn_linear_make(w[1], b[1], C, C, ATTN_NN_OUT_IN);
    a.v = attn_nn_linear_make(w[2], b[2], C, C, ATTN_NN_OUT_IN);
    char n1[64], n2[64];
    a.o = mdl_take_linear(L, C, C, ATTN_NN_OUT_IN, true, ATTN_INIT_UNIFORM, xav,
                          NAME(n1, "%s.w_o", prefix), NAME(n2, "%s.b_o", prefix));
    (void)cross;
    return a;
}

static attn_nn_ffn take_ffn(mdl_layout *L, const char *prefix, int C, int F, attn_act act) {
    attn_nn_ffn f;
    memset(&f, 0, sizeof f);
    f.kind = ATTN_FFN_PLAIN;
    f.act = act;
    const float xav = (float)sqrt(6.0 / ((double)C + F));
    char a[64], b[64];
    f.up = mdl_take_linear(L, C, F, ATTN_NN_OUT_IN, true, ATTN_INIT_UNIFORM, xav,
                           NAME(a, "%s.ff1.w", prefix), NAME(b, "%s.ff1.b", prefix));
    f.down = mdl_take_linear(L, F, C, ATTN_NN_OUT_IN, true, ATTN_INIT_UNIFORM, xav,
                             NAME(a, "%s.ff2.w", prefix), NAME(b, "%s.ff2.b", prefix));
    return f;
}

static attn_nn_norm take_ln(mdl_layout *L, const char *prefix, int C, float eps) {
    char a[64], b[64];
    return mdl_take_norm(L, ATTN_NORM_LAYER, C, eps, true, NAME(a, "%s.w", prefix),
                         NAME(b, "%s.b", prefix));
}

/* The views w over L's buffer (recording the table when L records). Initialization: matrices
 * (attention projections, FFN, untied output) Xavier-uniform; embedding tables and learned
 * positions uniform with standard deviation 1/sqrt(C) (the forward multiplies embeddings by
 * sqrt(C), giving unit-variance inputs); biases 0, LN weights 1, LN biases 0. */
static void layout(const attn_encdec_config *c, mdl_layout *L, attn_encdec_weights *w) {
    const int C = c->d_model, F = c->d_ff;
    const float eb = (float)sqrt(3.0 / C), eps = c->layer_norm_eps;
    const attn_act act = c->activation == ATTN_ENCDEC_GELU   ? ATTN_ACT_GELU_ERF
                         : c->activation == ATTN_ENCDEC_SILU ? ATTN_ACT_SILU
                                                             : ATTN_ACT_RELU;
    if (c->share_embeddings) {
        w->tgt_emb = w->src_emb =
            mdl_take(L, 2, c->tgt_vocab, C, ATTN_INIT_UNIFORM, eb, true, "emb");
    } else {
        w->src_emb = mdl_take(L, 2, c->src_vocab, C, ATTN_INIT_UNIFORM, eb, true, "src_emb");
        w->tgt_emb = mdl_take(L, 2, c->tgt_vocab, C, ATTN_INIT_UNIFORM, eb, true, "tgt_emb");
    }
    w->enc_pos = w->dec_pos = NULL;
    if (c->positions == ATTN_ENCDEC_LEARNED) {
        w->enc_pos = mdl_take(L, 2, c->max_len, C, ATTN_INIT_UNIFORM, eb, true, "enc_pos");
        w->dec_pos = mdl_take(L, 2, c->max_len, C, ATTN_INIT_UNIFORM, eb, true, "dec_pos");
    }
    char p[32], n[48];
    for (int l = 0; l < c->n_enc_layers; l++) {
        attn_encdec_enc_layer *Y = &w->enc[l];
        NAME(p, "enc.%d", l);
        Y->self_attn = take_attn(L, NAME(n, "%s.self_attn", p), C, false);
        Y->ln1 = take_ln(L, NAME(n, "%s.ln1", p), C, eps);
        Y->ffn = take_ffn(L, p, C, F, act);
        Y->ln2 = take_ln(L, NAME(n, "%s.ln2", p), C, eps);
    }
    for (int l = 0; l < c->n_dec_layers; l++) {
        attn_encdec_dec_layer *Y = &w->dec[l];
        NAME(p, "dec.%d", l);
        Y->self_attn = take_attn(L, NAME(n, "%s.self_attn", p), C, false);
        Y->ln1 = take_ln(L, NAME(n, "%s.ln1", p), C, eps);
        Y->cross_attn = take_attn(L, NAME(n, "%s.cross_attn", p), C, true);
        Y->ln2 = take_ln(L, NAME(n, "%s.ln2", p), C, eps);
        Y->ffn = take_ffn(L, p, C, F, act);
        Y->ln3 = take_ln(L, NAME(n, "%s.ln3", p), C, eps);
    }
    memset(&w->enc_ln, 0, sizeof w->enc_ln);
    memset(&w->dec_ln, 0, sizeof w->dec_ln);
    if (c->pre_ln) {
        w->enc_ln = take_ln(L, "enc.ln_f", C, eps);
        w->dec_ln = take_ln(L, "dec.ln_f", C, eps);
    }
    w->out_w = c->tie_output ? w->tgt_emb
                             : mdl_take(L, 2, c->tgt_vocab, C, ATTN_INIT_UNIFORM,
                                        (float)sqrt(6.0 / ((double)c->tgt_vocab + C)), true,
                                        "out.w");
    /* Marian's final_logits_bias is a (1, Vt) buffer: its table entry has the file's shape. */
    w->out_b = !c->logits_bias ? NULL
               : c->arch == ATTN_ENCDEC_ARCH_MARIAN
                   ? mdl_take(L, 2, 1, c->tgt_vocab, ATTN_INIT_ZEROS, 0.0f, false, "out.b")
                   : mdl_take(L, 1, c->tgt_vocab, 0, ATTN_INIT_ZEROS, 0.0f, false, "out.b");
}

/* Rows of the sinusoidal table: positions 0 .. max_len − 1, or for fairseq's positions
 * pad_id + 1 .. pad_id + max_len (row pad_id is the pad tokens' zero row). */
static int pos_rows(const attn_encdec_config *c) {
    return c->positions == ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ ? c->max_len + c->pad_id + 1
                                                          : c->max_len;
}

/* The sinusoidal table (rows pos_rows, C) of c->positions, in double. */
static void pos_table_fill(const attn_encdec_config *c, float *P) {
    const int C = c->d_model, R = pos_rows(c);
    for (int t = 0; t < R; t++) {
        float *row = P + (size_t)t * C;
        switch (c->positions) {
        case ATTN_ENCDEC_SINUSOIDAL: /* PE(t, 2i) = sin(t / 10000^(2i/C)), PE(t, 2i+1) = cos */
            for (int i = 0; i < C; i++) {
                double ang = t / pow(10000.0, (double)(i - i % 2) / C);
                row[i] = (float)(i % 2 ? cos(ang) : sin(ang));
            }
            break;
        case ATTN_ENCDEC_SINUSOIDAL_HALVES: { /* Marian: sin(t / 10000^(2i/C)) | cos(same) */
            const int ns = (C + 1) / 2;
            for (int i = 0; i < ns; i++) row[i] = (float)sin(t / pow(10000.0, 2.0 * i / C));
            for (int i = 0; i < C - ns; i++)
                row[ns + i] = (float)cos(t / pow(10000.0, 2.0 * i / C));
            break;
        }
        case ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ: { /* t · exp(−i ln(10000) / (h − 1)), h = C / 2 */
            const int h = C / 2;
            const double k = h > 1 ? log(10000.0) / (h - 1) : 0.0;
            memset(row, 0, (size_t)C * sizeof(float));
            if (t == c->pad_id) break;
            for (int i = 0; i < h; i++) {
                double ang = t * exp(-k * i);
                row[i] = (float)sin(ang), row[h + i] = (float)cos(ang);
            }
            break;
        }
        default: break;
        }
    }
}

attn_status encdec_table(const attn_encdec_config *c, attn_param_info **t, int *n) {
    *t = NULL, *n = 0;
    ATTN_TRY(attn_encdec_config_check(c));
    attn_encdec_weights w;
    memset(&w, 0, sizeof w);
    w.enc = attn_calloc((size_t)c->n_enc_layers * sizeof *w.enc);
    w.dec = attn_calloc((size_t)c->n_dec_layers * sizeof *w.dec);
    mdl_layout L = mdl_layout_begin(NULL, true);
    if (w.enc && w.dec) layout(c, &L, &w);
    const bool oom = !w.enc || !w.dec || L.oom;
    attn_free(w.enc), attn_free(w.dec);
    if (oom) {
        attn_free(L.t);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec: out of memory for a tensor table");
    }
    *t = L.t, *n = L.n;
    return ATTN_STATUS_OK;
}

void encdec_layout_grads(const attn_encdec_model *m, float *grads, attn_encdec_weights *g) {
    mdl_layout L = mdl_layout_begin(grads, false);
    layout(&m->cfg, &L, g);
}

void encdec_layout_weights(attn_encdec_model *m) {
    mdl_layout L = mdl_layout_begin(m->params, false);
    layout(&m->cfg, &L, &m->w);
}

void attn_encdec_init_params(attn_encdec_model *m, uint64_t seed) {
    if (m && m->params) attn_params_init(m->tensors, m->n_tensors, m->params, seed);
}

void attn_encdec_zero_grad(attn_encdec_model *m) {
    if (m && m->grads) attn_params_zero(m->grads, m->num_params);
}

const attn_encdec_tensor *attn_encdec_find_tensor(const attn_encdec_model *m, const char *name) {
    return m ? attn_params_find(m->tensors, m->n_tensors, name) : NULL;
}

void attn_encdec_model_free(attn_encdec_model *m) {
    if (!m) return;
    encdec_quant_free(m->quant);
    attn_free(m->params);
    attn_free(m->grads);
    attn_free(m->pos_table);
    attn_free(m->tensors);
    attn_free(m->w.enc);
    attn_free(m->w.dec);
    attn_free(m->g.enc);
    attn_free(m->g.dec);
    attn_free(m);
}

/* The model's memory and layout; its parameters initialized (seed) when init, else left for
 * the caller to fill (a loader that writes every tensor). */
static attn_status model_new(const attn_encdec_config *cfg, bool init, uint64_t seed,
                             attn_encdec_model **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec: NULL output");
    *out = NULL;
    ATTN_TRY(attn_encdec_config_check(cfg)); /* TOO_LARGE happens here, before any allocation */
    attn_encdec_model *m = attn_calloc(sizeof *m);
    if (!m) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec: out of memory");
    m->cfg = *cfg;
    m->num_params = attn_encdec_num_params(cfg);
    const int nE = cfg->n_enc_layers, nD = cfg->n_dec_layers, C = cfg->d_model;
    m->params = attn_alloc(m->num_params * sizeof(float));
    m->grads = attn_calloc(m->num_params * sizeof(float));
    m->w.enc = attn_calloc((size_t)nE * sizeof(attn_encdec_enc_layer));
    m->g.enc = attn_calloc((size_t)nE * sizeof(attn_encdec_enc_layer));
    m->w.dec = attn_calloc((size_t)nD * sizeof(attn_encdec_dec_layer));
    m->g.dec = attn_calloc((size_t)nD * sizeof(attn_encdec_dec_layer));
    const bool sinusoidal = cfg->positions != ATTN_ENCDEC_LEARNED;
    if (sinusoidal) m->pos_table = attn_alloc((size_t)pos_rows(cfg) * C * sizeof(float));
    mdl_layout lay = mdl_layout_begin(m->params, true);
    if (m->params && m->w.enc && m->w.dec) layout(cfg, &lay, &m->w);
    m->tensors = lay.t, m->n_tensors = lay.n;
    if (!m->params || !m->grads || !m->w.enc || !m->g.enc || !m->w.dec || !m->g.dec || lay.oom ||
        (sinusoidal && !m->pos_table)) {
        attn_encdec_model_free(m);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec: out of memory for %zu parameters",
                         attn_encdec_num_params(cfg));
    }
    if (lay.cursor != m->num_params) { /* a layout/count mismatch is a bug; never write past */
        attn_encdec_model_free(m);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec: internal parameter count mismatch");
    }
    encdec_layout_grads(m, m->grads, &m->g);
    if (m->pos_table) pos_table_fill(cfg, m->pos_table);
    for (int k = 0; k < 3; k++) {
        attn_nn_attn_cfg *a = &m->attn_cfg[k];
        *a = attn_nn_attn_default_cfg(C, cfg->n_head);
        a->causal = k == 1;
        a->cross = k == 2;
    }
    if (init) attn_encdec_init_params(m, seed);
    *out = m;
    return ATTN_STATUS_OK;
}

attn_status attn_encdec_model_init(const attn_encdec_config *cfg, uint64_t seed,
                                   attn_encdec_model **out) {
    return model_new(cfg, true, seed, out);
}

/* ---- sub-layers ---------------------------------------------------------------------------- */

static void sub(attn_nn_sublayer *S, attn_nn_sub_kind kind, bool pre, attn_nn_norm norm,
                const attn_nn_attn_cfg *acfg, float p, uint32_t site) {
    memset(S, 0, sizeof *S);
    S->kind = kind, S->pre_norm = pre, S->norm = norm, S->acfg = acfg;
    S->p_drop = p, S->site = site;
}

void encdec_enc_sublayers(const attn_encdec_model *m, const attn_encdec_enc_layer *W, int l,
                          float p, attn_nn_sublayer S[2]) {
    const bool pre = m->cfg.pre_ln;
    const uint32_t site = 2u + (uint32_t)(2 * l);
    sub(&S[0], ATTN_SUB_ATTN, pre, W->ln1, &m->attn_cfg[0], p, site);
    S[0].attn = W->self_attn;
    sub(&S[1], ATTN_SUB_FFN, pre, W->ln2, NULL, p, site + 1);
    S[1].ffn = W->ffn;
}

void encdec_dec_sublayers(const attn_encdec_model *m, const attn_encdec_dec_layer *W, int l,
                          float p, attn_nn_sublayer S[3]) {
    const bool pre = m->cfg.pre_ln;
    const uint32_t site = 2u + 2u * (uint32_t)m->cfg.n_enc_layers + (uint32_t)(3 * l);
    sub(&S[0], ATTN_SUB_ATTN, pre, W->ln1, &m->attn_cfg[1], p, site);
    S[0].attn = W->self_attn;
    sub(&S[1], ATTN_SUB_ATTN, pre, W->ln2, &m->attn_cfg[2], p, site + 1);
    S[1].attn = W->cross_attn;
    sub(&S[2], ATTN_SUB_FFN, pre, W->ln3, NULL, p, site + 2);
    S[2].ffn = W->ffn;
}

/* ---- run state ----------------------------------------------------------------------------- */

struct attn_encdec_state {
    const attn_encdec_model *model; /* the model this state was sized for */
    attn_encdec_config cfg;
    int capB, capTs, capTt;         /* capacity */
    int B, Ts, Tt;                  /* the last forward's sizes */
    bool has_fwd, has_loss;
    attn_nn_run run;                /* training, dropout key */
    int64_t row0;                   /* dropout rows (encdec_state_set_rows) */
    int Ts_global, Tt_global;       /* 0: the call's own */
    int32_t *src_ids, *tgt_ids;     /* (B, Ts), (B, Tt) copies of the last forward's ids */
    int32_t *src_len, *tgt_len;     /* (B) */
    float *enc_x0;                  /* (B·Ts, C) encoder input after embedding dropout */
    float *dec_x0;                  /* (B·Tt, C) decoder input */
    uint64_t *enc_mask, *dec_mask;  /* embedding dropout keep bits */
    attn_nn_sub_acts *enc_sub;      /* [2·nE] */
    attn_nn_sub_acts *dec_sub;      /* [3·nD] */
    float *enc_f, *enc_fmean, *enc_frstd; /* (B·Ts, C), (B·Ts) x2: final LN (pre-LN only) */
    float *dec_f, *dec_fmean, *dec_frstd; /* (B·Tt, C), ... */
    float *logits;                  /* (B·Tt, Vt) */
    float *dlogits;                 /* (B·Tt, Vt) d loss / d logits */
    float *tmp;                     /* (max(B·Ts, B·Tt), C) a sub-layer's branch (dropout) */
    float *G;                       /* (max(B·Ts, B·Tt), C) d loss / d stream */
    float *g_enc;                   /* (B·Ts, C) d loss / d encoder output, summed over layers */
    float *work;                    /* a sub-layer backward's scratch */
    attn_encdec_capture cap;        /* caller's attention-capture buffers (all NULL: none) */
    attn_nn_attn_capture *acap;     /* one attention sub-layer's internals, or NULL */
    attn_encdec_attn_site acap_site;
    int acap_layer;
    attn_arena arena;               /* everything above that was attn_alloc'ed */
    mdl_grad_hook grad_hook; /* finished layers (data parallelism over ranks) */
};

/* Uninitialized: every buffer is written before it is read (touching pages of a large batch's
 * capacity up front cost 17 s of a training run's set-up). */
static float *salloc(attn_encdec_state *st, size_t n) {
    return attn_arena_alloc(&st->arena, n * sizeof(float));
}

void attn_encdec_state_free(attn_encdec_state *st) {
    if (!st) return;
    attn_arena_free(&st->arena);
    attn_free(st);
}

attn_status attn_encdec_state_init(const attn_encdec_model *m, int B, int Ts, int Tt,
                                   attn_encdec_state **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec: NULL argument");
    *out = NULL;
    const attn_encdec_config *c = &m->cfg;
    if (B <= 0 || Ts <= 0 || Tt <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec state: B, Ts, Tt must be > 0 (got %d, %d, %d)", B, Ts, Tt);
    if (Ts > c->max_len || Tt > c->max_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec state: lengths Ts=%d Tt=%d exceed max_len %d", Ts, Tt,
                         c->max_len);
    /* Total size in double (no overflow) before allocating anything. */
    const int nE = c->n_enc_layers, nD = c->n_dec_layers;
    const double C = c->d_model, F = c->d_ff, Ms = (double)B * Ts, Mt = (double)B * Tt;
    const double Mx = fmax(Ms, Mt);
    double total = Ms * C * (1 + 2.0 * nE * 2 + 2) + Mt * C * (1 + 3.0 * nD * 2 + 2) +
                   (Ms * nE + Mt * nD) * 2 * F + 2 * Mt * c->tgt_vocab + Mx * (5 * C + F) +
                   (Ms * nE + Mt * nD * 2) * 3 * C + Ms * 6 * C;
    if (total > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)) || Mx * fmax(C, F) > INT32_MAX ||
        Mt * c->tgt_vocab > (double)INT32_MAX * 64)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "encdec state: B=%d Ts=%d Tt=%d needs %.3g floats, too large", B, Ts, Tt,
                         total);
    attn_encdec_state *st = attn_calloc(sizeof *st);
    if (!st) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec: out of memory");
    st->model = m;
    st->cfg = *c;
    st->run = attn_nn_default_run();
    st->capB = B, st->capTs = Ts, st->capTt = Tt;
    const int ms = B * Ts, mt = B * Tt, mx = ATTN_MAX(ms, mt);
    const size_t Cz = (size_t)c->d_model;
    st->src_ids = attn_arena_calloc(&st->arena, (size_t)ms * sizeof(int32_t));
    st->tgt_ids = attn_arena_calloc(&st->arena, (size_t)mt * sizeof(int32_t));
    st->src_len = attn_arena_calloc(&st->arena, (size_t)B * sizeof(int32_t));
    st->tgt_len = attn_arena_calloc(&st->arena, (size_t)B * sizeof(int32_t));
    st->enc_x0 = salloc(st, (size_t)ms * Cz);
    st->dec_x0 = salloc(st, (size_t)mt * Cz);
    st->enc_mask = attn_arena_alloc(&st->arena, attn_nn_dropout_words(ms, (int)Cz) * 8);
    st->dec_mask = attn_arena_alloc(&st->arena, attn_nn_dropout_words(mt, (int)Cz) * 8);
    st->enc_sub = attn_arena_calloc(&st->arena, (size_t)2 * nE * sizeof(attn_nn_sub_acts));
    st->dec_sub = attn_arena_calloc(&st->arena, (size_t)3 * nD * sizeof(attn_nn_sub_acts));
    if (st->arena.oom) goto oom;
    size_t work = 0;
    for (int l = 0; l < nE; l++) {
        attn_nn_sublayer S[2];
        encdec_enc_sublayers(m, &m->w.enc[l], l, c->dropout, S);
        for (int k = 0; k < 2; k++)
            mdl_sub_acts_alloc(&st->arena, &S[k], ms, ms, &st->enc_sub[2 * l + k], &work);
    }
    for (int l = 0; l < nD; l++) {
        attn_nn_sublayer S[3];
        encdec_dec_sublayers(m, &m->w.dec[l], l, c->dropout, S);
        for (int k = 0; k < 3; k++)
            mdl_sub_acts_alloc(&st->arena, &S[k], mt, ms, &st->dec_sub[3 * l + k], &work);
    }
    if (c->pre_ln) {
        st->enc_f = salloc(st, (size_t)ms * Cz);
        st->enc_fmean = salloc(st, (size_t)ms);
        st->enc_frstd = salloc(st, (size_t)ms);
        st->dec_f = salloc(st, (size_t)mt * Cz);
        st->dec_fmean = salloc(st, (size_t)mt);
        st->dec_frstd = salloc(st, (size_t)mt);
    }
    st->logits = salloc(st, (size_t)mt * c->tgt_vocab);
    st->dlogits = salloc(st, (size_t)mt * c->tgt_vocab);
    st->tmp = salloc(st, (size_t)mx * Cz);
    st->G = salloc(st, (size_t)mx * Cz);
    st->g_enc = salloc(st, (size_t)ms * Cz);
    st->work = salloc(st, work);
    if (st->arena.oom) goto oom;
    *out = st;
    return ATTN_STATUS_OK;
oom:
    attn_encdec_state_free(st);
    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec state: out of memory for B=%d Ts=%d Tt=%d",
                     B, Ts, Tt);
}

void attn_encdec_set_train(attn_encdec_state *st, bool training, uint64_t seed, uint64_t step) {
    if (!st) return;
    st->run.training = training;
    st->run.seed = seed;
    st->run.step = step;
}

void encdec_state_set_grad_hook(attn_encdec_state *st, const mdl_grad_hook *h) {
    if (st && h) st->grad_hook = *h;
}

void encdec_state_set_rows(attn_encdec_state *st, int64_t row0, int Ts_global, int Tt_global) {
    if (!st) return;
    st->row0 = row0 > 0 ? row0 : 0;
    st->Ts_global = Ts_global > 0 ? Ts_global : 0;
    st->Tt_global = Tt_global > 0 ? Tt_global : 0;
}

const float *attn_encdec_logits(const attn_encdec_state *st) {
    return st && st->has_fwd ? st->logits : NULL;
}

void attn_encdec_set_capture(attn_encdec_state *st, const attn_encdec_capture *cap) {
    if (!st) return;
    if (cap)
        st->cap = *cap;
    else
        memset(&st->cap, 0, sizeof st->cap);
}

static bool dropping(const attn_encdec_state *st) {
    return st->run.training && st->cfg.dropout > 0.0f;
}

/* Dropout rows of the source (enc) or target stream. */
static attn_nn_rows rows(const attn_encdec_state *st, bool enc) {
    const int T = enc ? st->Ts : st->Tt, G = enc ? st->Ts_global : st->Tt_global;
    attn_nn_rows r = {st->row0, T, G > 0 ? G : T};
    return r;
}

/* ---- embeddings -------------------------------------------------------------------------- */

static float embed_scale(const attn_encdec_config *c) {
    return c->scale_embedding ? (float)sqrt((double)c->d_model) : 1.0f;
}

/* out (B·T, C) = table[ids] · scale + pos[p(b, t)], ids checked against V. p(b, t) = t0 + t, or
 * with fairseq's positions pad_id for a pad token and else pad_id + 1 + the number of non-pad
 * tokens before it in its row (cumulative: the whole-sequence forward), or t0 (step: one token
 * per row at position t0, transformers' incremental decoding). */
static attn_status embed_rows(const attn_encdec_config *c, const char *which, const float *table,
                              int V, const float *pos, const int32_t *ids, int B, int T, int t0,
                              bool step, float *out) {
    const int C = c->d_model;
    const bool fairseq = c->positions == ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int32_t id = ids[(size_t)b * T + t];
            if (id < 0 || id >= V)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "encdec forward: %s id %d at (batch %d, position %d) is outside "
                                 "the vocabulary [0, %d)",
                                 which, (int)id, b, t, V);
        }
    ATTN_TRY(attn_embedding_forward(B * T, V, C, ids, table, out));
    const float scale = embed_scale(c);
    for (int b = 0; b < B; b++) {
        int seen = 0; /* fairseq: non-pad tokens so far in this row */
        for (int t = 0; t < T; t++) {
            float *row = out + ((size_t)b * T + t) * C;
            int p = t0 + t;
            if (fairseq) {
                const bool is_pad = ids[(size_t)b * T + t] == c->pad_id;
                seen += !is_pad;
                p = is_pad ? c->pad_id : c->pad_id + (step ? t0 + t + 1 : seen);
            }
            const float *pr = pos + (size_t)p * C;
            for (int i = 0; i < C; i++) row[i] = row[i] * scale + pr[i];
        }
    }
    return ATTN_STATUS_OK;
}

attn_status encdec_embed_target(const attn_encdec_model *m, int N, const int32_t *tokens, int t,
                                float *out) {
    return embed_rows(&m->cfg, "target", m->w.tgt_emb, m->cfg.tgt_vocab,
                      m->w.dec_pos ? m->w.dec_pos : m->pos_table, tokens, N, 1, t, true, out);
}

/* G (B·T, C) = d loss / d embed output (consumed). */
static attn_status embed_backward(attn_encdec_state *st, float *gtable, int V, float *gpos,
                                  const int32_t *ids, int B, int T, const uint64_t *mask,
                                  float *G) {
    const int C = st->cfg.d_model;
    const size_t n = (size_t)B * T * C;
    if (dropping(st)) attn_nn_dropout_bwd(st->cfg.dropout, B * T, C, mask, G, G);
    if (gpos)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const float *row = G + ((size_t)b * T + t) * C;
                float *p = gpos + (size_t)t * C;
                for (int i = 0; i < C; i++) p[i] += row[i];
            }
    const float scale = embed_scale(&st->cfg);
    if (scale != 1.0f)
        for (size_t i = 0; i < n; i++) G[i] *= scale;
    return attn_embedding_backward(B * T, V, C, ids, G, gtable);
}

void attn_encdec_set_attn_capture(attn_encdec_state *st, attn_encdec_attn_site site, int layer,
                                  attn_nn_attn_capture *cap) {
    if (!st) return;
    st->acap = cap;
    st->acap_site = site;
    st->acap_layer = layer;
}

/* Whether the attention internals of (site, layer) are to be captured. */
static bool acap_wanted(const attn_encdec_state *st, attn_encdec_attn_site site, int layer) {
    return st->acap && st->acap_site == site && st->acap_layer == layer;
}

/* ---- forward, loss, backward ----------------------------------------------------------- */

/* The input of encoder sub-layer (l, k) and the encoder's output (before the final LN). */
static const float *enc_input(const attn_encdec_state *st, int l, int k) {
    if (l == 0 && k == 0) return st->enc_x0;
    const attn_nn_sub_acts *A = &st->enc_sub[2 * l + k - 1];
    return st->cfg.pre_ln ? A->res : A->ln;
}

static const float *dec_input(const attn_encdec_state *st, int l, int k) {
    if (l == 0 && k == 0) return st->dec_x0;
    const attn_nn_sub_acts *A = &st->dec_sub[3 * l + k - 1];
    return st->cfg.pre_ln ? A->res : A->ln;
}

static const float *enc_output(const attn_encdec_state *st) {
    return st->cfg.pre_ln ? st->enc_f : enc_input(st, st->cfg.n_enc_layers, 0);
}

static const float *dec_output(const attn_encdec_state *st) {
    return st->cfg.pre_ln ? st->dec_f : dec_input(st, st->cfg.n_dec_layers, 0);
}

static attn_status check_lens(const char *which, const int32_t *len, int B, int T) {
    for (int b = 0; b < B; b++)
        if (len[b] < 1 || len[b] > T)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "encdec forward: %s_len[%d] = %d outside [1, %d]", which, b,
                             (int)len[b], T);
    return ATTN_STATUS_OK;
}

/* The sequences of the encoder's self-attention, the decoder's and its cross-attention. */
static attn_nn_seqs enc_seqs(const attn_encdec_state *st) {
    attn_nn_seqs s = attn_nn_seqs_dense(st->B, st->Ts, st->Ts);
    s.kv_len = st->src_len; /* bidirectional, source padding hidden */
    return s;
}
static attn_nn_seqs dec_seqs(const attn_encdec_state *st, bool cross) {
    attn_nn_seqs s = attn_nn_seqs_dense(st->B, st->Tt, cross ? st->Ts : st->Tt);
    s.kv_len = cross ? st->src_len : st->tgt_len;
    return s;
}

/* The encoder over the ids and lengths already copied into st (st->B, st->Ts); the output is
 * enc_output(st). Shared by attn_encdec_forward and attn_encdec_encode so that decoding sees
 * exactly the memory training computes. */
static attn_status run_encoder(const attn_encdec_model *m, attn_encdec_state *st) {
    const attn_encdec_config *c = &m->cfg;
    const int B = st->B, Ts = st->Ts, C = c->d_model, Ms = B * Ts;
    (void)C;
    ATTN_TRY(embed_rows(c, "source", m->w.src_emb, c->src_vocab,
                        m->w.enc_pos ? m->w.enc_pos : m->pos_table, st->src_ids, B, Ts, 0, false,
                        st->enc_x0));
    if (dropping(st))
        attn_nn_dropout_fwd(&st->run, ENCDEC_SITE_ENC_EMB, c->dropout, rows(st, true), Ms, C, NULL,
                            st->enc_x0, st->enc_x0, st->enc_mask);
    const attn_nn_seqs s = enc_seqs(st);
    for (int l = 0; l < c->n_enc_layers; l++) {
        attn_nn_sublayer S[2];
        encdec_enc_sublayers(m, &m->w.enc[l], l, c->dropout, S);
        for (int k = 0; k < 2; k++)
            ATTN_TRY(attn_nn_sub_forward(&st->run, &S[k], &s, Ms, rows(st, true),
                                         enc_input(st, l, k), NULL, NULL, &st->enc_sub[2 * l + k],
                                         k == 0 && st->cap.enc_self ? st->cap.enc_self[l] : NULL,
                                         st->tmp));
        if (acap_wanted(st, ATTN_ENCDEC_ATTN_ENC_SELF, l))
            ATTN_TRY(attn_nn_attn_capture_take(st->acap, &S[0], Ms, Ms, enc_input(st, l, 0), NULL,
                                               &st->enc_sub[2 * l]));
    }
    if (c->pre_ln)
        ATTN_TRY(attn_nn_norm_forward(&m->w.enc_ln, Ms, enc_input(st, c->n_enc_layers, 0),
                                      st->enc_f, st->enc_fmean, st->enc_frstd));
    return ATTN_STATUS_OK;
}

/* The output projection: logits = y · W_outᵀ + b_out (float32 views: weights or gradients). */
static attn_nn_linear out_map(const attn_encdec_model *m, const attn_encdec_weights *w) {
    return attn_nn_linear_make(w->out_w, w->out_b, m->cfg.d_model, m->cfg.tgt_vocab,
                               ATTN_NN_OUT_IN);
}

attn_nn_linear encdec_out_map(const attn_encdec_model *m) {
    return m->quant ? m->quant->out : out_map(m, &m->w);
}

/* The state's products in the model's inference precision (its training flags kept). */
static void run_precision(const attn_encdec_model *m, attn_encdec_state *st) {
    const attn_nn_run r = encdec_run(m);
    st->run.precision = r.precision;
    st->run.quant_act = r.quant_act;
}

attn_status attn_encdec_encode(const attn_encdec_model *m, attn_encdec_state *st, int B, int Ts,
                               const int32_t *src_ids, const int32_t *src_len, float *enc_out) {
    if (!m || !st || !src_ids || !src_len || !enc_out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec encode: NULL argument");
    if (st->model != m)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec encode: the state was made for another model");
    if (B < 1 || Ts < 1 || B > st->capB || Ts > st->capTs)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec encode: B=%d Ts=%d outside the state's capacity B<=%d Ts<=%d", B,
                         Ts, st->capB, st->capTs);
    ATTN_TRY(check_lens("src", src_len, B, Ts));
    /* The decoder half of the state no longer matches this encoder output: no loss/backward. */
    st->has_fwd = st->has_loss = false;
    run_precision(m, st);
    st->B = B, st->Ts = Ts;
    memcpy(st->src_ids, src_ids, (size_t)B * Ts * sizeof(int32_t));
    memcpy(st->src_len, src_len, (size_t)B * sizeof(int32_t));
    ATTN_TRY(run_encoder(m, st));
    memcpy(enc_out, enc_output(st), (size_t)B * Ts * m->cfg.d_model * sizeof(float));
    return ATTN_STATUS_OK;
}

attn_status attn_encdec_forward(const attn_encdec_model *m, attn_encdec_state *st, int B, int Ts,
                                int Tt, const int32_t *src_ids, const int32_t *src_len,
                                const int32_t *tgt_in, const int32_t *tgt_len,
                                float *logits_out) {
    if (!m || !st || !src_ids || !src_len || !tgt_in || !tgt_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec forward: NULL argument");
    if (st->model != m)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec forward: the state was made for another model");
    const attn_encdec_config *c = &m->cfg;
    if (Ts > c->max_len || Tt > c->max_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec forward: lengths Ts=%d Tt=%d exceed max_len %d", Ts, Tt,
                         c->max_len);
    if (B < 1 || Ts < 1 || Tt < 1 || B > st->capB || Ts > st->capTs || Tt > st->capTt)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec forward: B=%d Ts=%d Tt=%d outside the state's capacity B<=%d "
                         "Ts<=%d Tt<=%d",
                         B, Ts, Tt, st->capB, st->capTs, st->capTt);
    ATTN_TRY(check_lens("src", src_len, B, Ts));
    ATTN_TRY(check_lens("tgt", tgt_len, B, Tt));
    st->has_fwd = st->has_loss = false;
    run_precision(m, st);
    st->B = B, st->Ts = Ts, st->Tt = Tt;
    memcpy(st->src_ids, src_ids, (size_t)B * Ts * sizeof(int32_t));
    memcpy(st->tgt_ids, tgt_in, (size_t)B * Tt * sizeof(int32_t));
    memcpy(st->src_len, src_len, (size_t)B * sizeof(int32_t));
    memcpy(st->tgt_len, tgt_len, (size_t)B * sizeof(int32_t));
    const int C = c->d_model, Mt = B * Tt;

    ATTN_TRY(run_encoder(m, st));
    const float *memory = enc_output(st);

    /* Decoder. */
    ATTN_TRY(embed_rows(c, "target", m->w.tgt_emb, c->tgt_vocab,
                        m->w.dec_pos ? m->w.dec_pos : m->pos_table, st->tgt_ids, B, Tt, 0, false,
                        st->dec_x0));
    if (dropping(st))
        attn_nn_dropout_fwd(&st->run, ENCDEC_SITE_DEC_EMB, c->dropout, rows(st, false), Mt, C,
                            NULL, st->dec_x0, st->dec_x0, st->dec_mask);
    for (int l = 0; l < c->n_dec_layers; l++) {
        attn_nn_sublayer S[3];
        encdec_dec_sublayers(m, &m->w.dec[l], l, c->dropout, S);
        for (int k = 0; k < 3; k++) {
            const attn_nn_seqs s = dec_seqs(st, k == 1);
            float *probs = k == 0 && st->cap.dec_self    ? st->cap.dec_self[l]
                           : k == 1 && st->cap.dec_cross ? st->cap.dec_cross[l]
                                                         : NULL;
            ATTN_TRY(attn_nn_sub_forward(&st->run, &S[k], &s, Mt, rows(st, false),
                                         dec_input(st, l, k), k == 1 ? memory : NULL, NULL,
                                         &st->dec_sub[3 * l + k], probs, st->tmp));
            const attn_encdec_attn_site site =
                k == 0 ? ATTN_ENCDEC_ATTN_DEC_SELF : ATTN_ENCDEC_ATTN_DEC_CROSS;
            if (k < 2 && acap_wanted(st, site, l))
                ATTN_TRY(attn_nn_attn_capture_take(st->acap, &S[k], Mt, B * Ts,
                                                   dec_input(st, l, k), k == 1 ? memory : NULL,
                                                   &st->dec_sub[3 * l + k]));
        }
    }
    if (c->pre_ln)
        ATTN_TRY(attn_nn_norm_forward(&m->w.dec_ln, Mt, dec_input(st, c->n_dec_layers, 0),
                                      st->dec_f, st->dec_fmean, st->dec_frstd));

    /* Output projection (Mt, Vt). */
    const attn_nn_linear out = encdec_out_map(m);
    ATTN_TRY(attn_nn_linear_forward(&st->run, &out, Mt, dec_output(st), C, 0.0f, st->logits,
                                    c->tgt_vocab, ATTN_ACT_NONE));
    if (logits_out)
        memcpy(logits_out, st->logits, (size_t)Mt * c->tgt_vocab * sizeof(float));
    st->has_fwd = true;
    return ATTN_STATUS_OK;
}

attn_status encdec_loss(const attn_encdec_model *m, attn_encdec_state *st, const int32_t *targets,
                        float label_smoothing, float grad_scale, float *loss) {
    if (!m || !st || !targets || !loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec loss: NULL argument");
    if (st->model != m || !st->has_fwd)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec loss: no forward pass of this model on this state");
    const int N = st->B * st->Tt, V = m->cfg.tgt_vocab;
    ATTN_TRY(attn_cross_entropy(N, V, st->logits, targets, m->cfg.pad_id, label_smoothing, loss,
                                st->dlogits));
    if (grad_scale != 1.0f) {
        const size_t n = (size_t)N * V;
        float *g = st->dlogits;
#pragma omp parallel for schedule(static) if (n >= 65536)
        for (size_t i = 0; i < n; i++) g[i] *= grad_scale;
    }
    st->has_loss = true;
    return ATTN_STATUS_OK;
}

attn_status attn_encdec_loss(const attn_encdec_model *m, attn_encdec_state *st,
                             const int32_t *targets, float label_smoothing, float *loss) {
    return encdec_loss(m, st, targets, label_smoothing, 1.0f, loss);
}

attn_status attn_encdec_backward(attn_encdec_model *m, attn_encdec_state *st) {
    if (!m || !st) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec backward: NULL argument");
    if (st->model != m || !st->has_loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec backward: needs attn_encdec_forward and attn_encdec_loss first");
    if (m->quant)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "encdec backward: the model runs in int8 (attn_encdec_set_precision), "
                         "which is for inference only: switch it back to f32 to train");
    const attn_encdec_config *c = &m->cfg;
    const int B = st->B, Ts = st->Ts, Tt = st->Tt, C = c->d_model, V = c->tgt_vocab;
    const int Ms = B * Ts, Mt = B * Tt;
    float *G = st->G;

    /* Output projection, then the final decoder LN (pre-LN). */
    const attn_nn_linear out = out_map(m, &m->w), gout = out_map(m, &m->g);
    float *dy = c->pre_ln ? st->tmp : G;
    ATTN_TRY(attn_nn_linear_backward(&st->run, &out, Mt, dec_output(st), C, st->dlogits, V, dy, C,
                                     false, &gout));
    if (c->pre_ln)
        ATTN_TRY(attn_nn_norm_backward(&m->w.dec_ln, &m->g.dec_ln, Mt,
                                       dec_input(st, c->n_dec_layers, 0), st->dec_fmean,
                                       st->dec_frstd, st->tmp, G, false, NULL));

    /* Decoder, last sub-layer first; the cross-attentions add into g_enc. */
    const float *memory = enc_output(st);
    memset(st->g_enc, 0, (size_t)Ms * C * sizeof(float));
    for (int l = c->n_dec_layers - 1; l >= 0; l--) {
        attn_nn_sublayer S[3], Sg[3];
        encdec_dec_sublayers(m, &m->w.dec[l], l, c->dropout, S);
        encdec_dec_sublayers(m, &m->g.dec[l], l, c->dropout, Sg);
        for (int k = 2; k >= 0; k--) {
            const attn_nn_seqs s = dec_seqs(st, k == 1);
            ATTN_TRY(attn_nn_sub_backward(&st->run, &S[k], &Sg[k], &s, Mt, dec_input(st, l, k),
                                          k == 1 ? memory : NULL, &st->dec_sub[3 * l + k], G,
                                          k == 1 ? st->g_enc : NULL, st->work));
        }
        /* decoder layer l and what follows it are final, unless a final encoder LayerNorm
         * (pre-LN), which the buffer lists after the decoder, is still to come */
        if (!c->pre_ln) mdl_grad_ready(&st->grad_hook, m->g.dec[l].self_attn.q.w);
    }
    ATTN_TRY(embed_backward(st, m->g.tgt_emb, V, m->g.dec_pos, st->tgt_ids, B, Tt, st->dec_mask,
                            G));

    /* Encoder. */
    if (c->pre_ln)
        ATTN_TRY(attn_nn_norm_backward(&m->w.enc_ln, &m->g.enc_ln, Ms,
                                       enc_input(st, c->n_enc_layers, 0), st->enc_fmean,
                                       st->enc_frstd, st->g_enc, G, false, NULL));
    else
        memcpy(G, st->g_enc, (size_t)Ms * C * sizeof(float));
    const attn_nn_seqs s = enc_seqs(st);
    for (int l = c->n_enc_layers - 1; l >= 0; l--) {
        attn_nn_sublayer S[2], Sg[2];
        encdec_enc_sublayers(m, &m->w.enc[l], l, c->dropout, S);
        encdec_enc_sublayers(m, &m->g.enc[l], l, c->dropout, Sg);
        for (int k = 1; k >= 0; k--)
            ATTN_TRY(attn_nn_sub_backward(&st->run, &S[k], &Sg[k], &s, Ms, enc_input(st, l, k),
                                          NULL, &st->enc_sub[2 * l + k], G, NULL, st->work));
        mdl_grad_ready(&st->grad_hook, m->g.enc[l].self_attn.q.w);
    }
    ATTN_TRY(embed_backward(st, m->g.src_emb, c->src_vocab, m->g.enc_pos, st->src_ids, B, Ts,
                            st->enc_mask, G));
    st->has_loss = false;
    return ATTN_STATUS_OK;
}

/* ---- the incremental decoder (translate.c) ------------------------------------------------ */

static void pack_free(attn_gemm_packed_b *p, int n) {
    for (int i = 0; i < n; i++) attn_gemm_packed_b_free(&p[i]);
}

void encdec_packed_decoder_free(encdec_packed_decoder *p) {
    if (!p) return;
    for (int l = 0; p->layer && l < p->L; l++) pack_free(&p->layer[l].qkv, 6);
    attn_free(p->layer);
    attn_gemm_packed_b_free(&p->out);
    memset(p, 0, sizeof *p);
}

/* The fused (rows · C, C) map of adjacent q | k | v (rows = 3) or k | v (rows = 2) views. */
static attn_nn_linear fused(const attn_nn_linear *first, int rows) {
    return attn_nn_linear_make(first->w, first->b, first->in, rows * first->out, ATTN_NN_OUT_IN);
}

/* The self-attention's q|k|v as one map: the quantized one of an INT8 model, else the fused
 * float views. */
static attn_nn_linear self_qkv(const attn_nn_attn *a) {
    return attn_nn_linear_quantized(&a->qkv) ? a->qkv : fused(&a->q, 3);
}

/* Pack a float map in precision prec; quantized maps are used as they are (out stays zeroed). */
static attn_status pack_map(const attn_nn_linear *L, attn_precision prec,
                            attn_gemm_packed_b *out) {
    if (attn_nn_linear_quantized(L)) return ATTN_STATUS_OK;
    return attn_nn_linear_pack(L, prec, out);
}

/* L's panels, when pack_map made some. */
static void use_pack(attn_nn_linear *L, const attn_gemm_packed_b *P) {
    if (P->data) L->packed = P;
}

attn_status encdec_pack_decoder(const attn_encdec_model *m, encdec_packed_decoder *p) {
    memset(p, 0, sizeof *p);
    const int L = m->cfg.n_dec_layers;
    const attn_precision prec = encdec_run(m).precision;
    p->layer = attn_calloc((size_t)L * sizeof *p->layer);
    if (!p->layer) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    p->L = L;
    attn_status s = ATTN_STATUS_OK;
    for (int l = 0; l < L && !s; l++) {
        const attn_encdec_dec_layer *W = &m->w.dec[l];
        encdec_packed_layer *P = &p->layer[l];
        const attn_nn_linear qkv = self_qkv(&W->self_attn);
        s = pack_map(&qkv, prec, &P->qkv);
        if (!s) s = pack_map(&W->self_attn.o, prec, &P->so);
        if (!s) s = pack_map(&W->cross_attn.q, prec, &P->cq);
        if (!s) s = pack_map(&W->cross_attn.o, prec, &P->co);
        if (!s) s = pack_map(&W->ffn.up, prec, &P->f1);
        if (!s) s = pack_map(&W->ffn.down, prec, &P->f2);
    }
    const attn_nn_linear out = encdec_out_map(m);
    if (!s) s = pack_map(&out, prec, &p->out);
    if (s) encdec_packed_decoder_free(p);
    return s;
}

attn_status encdec_cross_kv(const attn_encdec_model *m, int l, int S, int Ts, const float *mem,
                            const attn_nn_kv *cache) {
    const attn_nn_run run = encdec_run(m);
    return attn_nn_attention_cross_kv(&run, &m->attn_cfg[2], &m->w.dec[l].cross_attn, S, Ts, mem,
                                      cache);
}

attn_status encdec_decoder_step(const attn_encdec_model *m, const encdec_step *s) {
    const attn_encdec_config *c = &m->cfg;
    const int N = s->N, C = c->d_model;
    const bool pre = c->pre_ln;
    const attn_nn_run run = encdec_run(m);
    /* Self-attention: every row its own sequence of one query over its cache; cross-attention:
     * a sentence's R rows are R queries over its source. */
    attn_nn_seqs self = attn_nn_seqs_dense(N, 1, 1), cross = attn_nn_seqs_dense(s->S, s->R, s->Ts);
    self.pos0 = s->t;
    cross.kv_len = s->src_len;
    /* Evaluation in place: pre-LN x += f(LN(x)) (LN into h); post-LN x = LN(x + f(x)) (the sum in
     * y). */
    attn_nn_sub_acts A;
    memset(&A, 0, sizeof A);
    A.ln = pre ? s->h : s->x;
    A.res = pre ? s->x : s->y;
    A.attn.proj = s->qkv, A.attn.ctx = s->att;
    A.ffn.h = s->ff;
    for (int l = 0; l < c->n_dec_layers; l++) {
        attn_nn_sublayer S[3];
        encdec_dec_sublayers(m, &m->w.dec[l], l, 0.0f, S);
        if (s->packed) {
            const encdec_packed_layer *P = &s->packed->layer[l];
            S[0].attn.qkv = self_qkv(&S[0].attn);
            use_pack(&S[0].attn.qkv, &P->qkv);
            use_pack(&S[0].attn.o, &P->so);
            use_pack(&S[1].attn.q, &P->cq);
            use_pack(&S[1].attn.o, &P->co);
            use_pack(&S[2].ffn.up, &P->f1);
            use_pack(&S[2].ffn.down, &P->f2);
        }
        ATTN_TRY(attn_nn_sub_forward(&run, &S[0], &self, N, attn_nn_rows_plain(1), s->x, NULL,
                                     &s->self_kv[l], &A, NULL, NULL));
        ATTN_TRY(attn_nn_sub_forward(&run, &S[1], &cross, N, attn_nn_rows_plain(1), s->x, NULL,
                                     &s->cross_kv[l], &A, NULL, NULL));
        ATTN_TRY(attn_nn_sub_forward(&run, &S[2], &self, N, attn_nn_rows_plain(1), s->x, NULL,
                                     NULL, &A, NULL, NULL));
    }
    const float *yout = s->x;
    if (pre) {
        ATTN_TRY(attn_nn_norm_forward(&m->w.dec_ln, N, s->x, s->h, NULL, NULL));
        yout = s->h;
    }
    attn_nn_linear out = encdec_out_map(m);
    if (s->packed) use_pack(&out, &s->packed->out);
    return attn_nn_linear_forward(&run, &out, N, yout, C, 0.0f, s->logits, c->tgt_vocab,
                                  ATTN_ACT_NONE);
}

/* ---- model directory ------------------------------------------------------------------------ */

/* attn's own names, one spelling. */
static bool file_name(void *ctx, const attn_param_info *t, int k, char *buf, size_t cap) {
    (void)ctx;
    if (k > 0) return false;
    snprintf(buf, cap, "%s", t->name);
    return true;
}

attn_status attn_encdec_save_dir(const attn_encdec_model *m, const char *dir) {
    if (!m || !dir || !*dir)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec save: NULL argument");
    if (m->cfg.arch != ATTN_ENCDEC_ARCH_ATTN)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "encdec save: a Marian / M2M100 model is saved in its own format by "
                         "attn_encdec_save_hf_dir (attn export), not in attn's");
    ATTN_TRY(mdl_make_dir(dir, "encdec save"));
    char path[4096];
    /* Weights first, then the config: a reader that finds a config beside an old weight file
     * fails its shape checks loudly rather than loading half-updated weights silently. */
    if (!mdl_dir_path(path, sizeof path, dir, "model.safetensors", "encdec save"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    static const char *const meta[] = {"format", "attn-encdec", NULL};
    const mdl_name_map map = {file_name, NULL, NULL};
    ATTN_TRY(mdl_save_params(path, m->tensors, m->n_tensors, m->params, &map, meta));
    if (!mdl_dir_path(path, sizeof path, dir, "config.json", "encdec save"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    return attn_encdec_config_save(path, &m->cfg);
}

attn_status attn_encdec_load_dir(const char *dir, attn_encdec_model **out) {
    if (!dir || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec load: NULL argument");
    *out = NULL;
    char path[4096];
    if (!mdl_dir_path(path, sizeof path, dir, "config.json", "encdec load"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    attn_encdec_config cfg;
    ATTN_TRY(encdec_config_load_any(path, &cfg)); /* names the file and field */
    attn_encdec_model *m;
    /* no initialization: the strict load below writes every tensor, or fails and frees m */
    ATTN_TRY(model_new(&cfg, false, 0, &m));
    mdl_weights *w;
    attn_status s = mdl_weights_open(dir, "encdec load", &w);
    if (!s) {
        /* Every tensor of the table must be present with its exact shape, and nothing else may
         * be there: a stray tensor means the file belongs to another configuration (say, untied
         * output weights loaded as tied), which must not pass silently. */
        const mdl_name_map own = {file_name, NULL, NULL};
        const mdl_name_map map = cfg.arch == ATTN_ENCDEC_ARCH_ATTN ? own : encdec_hf_name_map(&cfg);
        s = mdl_load_params(w, m->tensors, m->n_tensors, m->params, &map);
        mdl_weights_close(w);
    }
    if (s) {
        attn_encdec_model_free(m);
        return s;
    }
    *out = m;
    return ATTN_STATUS_OK;
}

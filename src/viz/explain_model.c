/* explain_model.c — the article's self-attention steps for one head of a real model
 * (attn_explain.h): one forward with a layer's internals captured (attn_nn_attn_capture), then
 * the head's slices of the captured rows and the layer's weights, and the unfused steps of
 * explain.c on the captured q, k, v. */
#include "viz-impl.h"

#include "attn_kernels.h"
#include "attn_nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void attn_explain_layer_free(attn_explain_layer *l) {
    if (!l) return;
    attn_nn_attn_capture_free(&l->cap);
    attn_free(l->probs);
    memset(l, 0, sizeof *l);
}

static attn_status check_layer(const char *what, int layer, int L) {
    if (layer < 0 || layer >= L)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: layer %d; the %s has layers 0 to %d",
                         layer, what, L - 1);
    return ATTN_STATUS_OK;
}

/* *probs (H, Tq, Tk) zeroed, and the layer's header. */
static attn_status layer_start(attn_explain_layer *out, attn_viz_kind kind, int layer, int H,
                               int Tq, int Tk) {
    out->kind = kind, out->layer = layer, out->H = H, out->Tq = Tq, out->Tk = Tk;
    out->probs = attn_calloc((size_t)H * Tq * Tk * sizeof(float));
    if (!out->probs) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
    return ATTN_STATUS_OK;
}

/* A capture that ran (the forward reached the layer). */
static attn_status layer_end(attn_explain_layer *out, attn_status s) {
    if (!s && !out->cap.taken)
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: the forward did not capture layer %d",
                      out->layer);
    if (s) attn_explain_layer_free(out);
    return s;
}

static attn_status check_ids(const char *what, const int32_t *ids, int T, int max_T, int V) {
    if (!ids || T < 1 || T > max_T)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: %d tokens; the %s takes 1 to %d",
                         T, what, max_T);
    for (int i = 0; i < T; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "explain: id %ld at position %d is outside the %s vocabulary [0, %d)",
                             (long)ids[i], i, what, V);
    return ATTN_STATUS_OK;
}

attn_status attn_explain_layer_bert(const attn_bert_model *m, const int32_t *ids, int T, int layer,
                                    attn_explain_layer *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL output");
    memset(out, 0, sizeof *out);
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL model");
    const attn_bert_config *c = &m->cfg;
    ATTN_TRY(check_layer("BERT model", layer, c->num_hidden_layers));
    ATTN_TRY(check_ids("BERT model", ids, T, c->max_position_embeddings, c->vocab_size));
    attn_status s = layer_start(out, ATTN_VIZ_SELF, layer, c->num_attention_heads, T, T);
    float **bufs = s ? NULL : calloc((size_t)c->num_hidden_layers, sizeof *bufs);
    if (!s && !bufs) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
    attn_bert_state *st = NULL;
    if (!s) s = attn_bert_state_init(m, 1, T, &st);
    if (!s) {
        bufs[layer] = out->probs;
        attn_bert_capture cap = {NULL, bufs};
        attn_bert_set_capture(st, &cap);
        attn_bert_set_attn_capture(st, layer, &out->cap);
        s = attn_bert_forward(m, st, 1, T, ids, NULL, NULL, NULL);
        attn_bert_set_capture(st, NULL);
        attn_bert_set_attn_capture(st, 0, NULL);
    }
    attn_bert_state_free(st);
    free(bufs);
    return layer_end(out, s);
}

attn_status attn_explain_layer_gpt(const attn_gpt_model *m, const int32_t *ids, int T, int layer,
                                   attn_explain_layer *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL output");
    memset(out, 0, sizeof *out);
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL model");
    const attn_gpt_config *c = &m->cfg;
    ATTN_TRY(check_layer("decoder", layer, c->n_layer));
    ATTN_TRY(check_ids("decoder", ids, T, c->n_positions, c->vocab_size));
    attn_status s = layer_start(out, ATTN_VIZ_SELF, layer, c->n_head, T, T);
    float **bufs = s ? NULL : calloc((size_t)c->n_layer, sizeof *bufs);
    if (!s && !bufs) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
    attn_gpt_state *st = NULL;
    if (!s) s = attn_gpt_state_init(m, 1, T, &st);
    if (!s) {
        bufs[layer] = out->probs;
        attn_gpt_capture cap = {NULL, bufs};
        attn_gpt_set_capture(st, &cap);
        attn_gpt_set_attn_capture(st, layer, &out->cap);
        s = attn_gpt_forward(m, st, 1, T, ids, NULL);
        attn_gpt_set_capture(st, NULL);
        attn_gpt_set_attn_capture(st, 0, NULL);
    }
    attn_gpt_state_free(st);
    free(bufs);
    return layer_end(out, s);
}

attn_status attn_explain_layer_encdec(const attn_encdec_model *m, const int32_t *src, int Ts,
                                      const int32_t *tgt, int n_tgt, attn_viz_kind kind, int layer,
                                      attn_explain_layer *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL output");
    memset(out, 0, sizeof *out);
    if (!m || !src || !tgt) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL argument");
    const attn_encdec_config *c = &m->cfg;
    const int Tt = n_tgt - 1;
    attn_encdec_attn_site site;
    switch (kind) {
    case ATTN_VIZ_ENC_SELF: site = ATTN_ENCDEC_ATTN_ENC_SELF; break;
    case ATTN_VIZ_DEC_SELF: site = ATTN_ENCDEC_ATTN_DEC_SELF; break;
    case ATTN_VIZ_CROSS: site = ATTN_ENCDEC_ATTN_DEC_CROSS; break;
    default:
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "explain: an encoder-decoder model has encoder.self, decoder.self and "
                         "decoder.cross attention, not %s",
                         attn_viz_kind_name(kind));
    }
    ATTN_TRY(check_layer(kind == ATTN_VIZ_ENC_SELF ? "encoder" : "decoder", layer,
                         kind == ATTN_VIZ_ENC_SELF ? c->n_enc_layers : c->n_dec_layers));
    ATTN_TRY(check_ids("source", src, Ts, c->max_len, c->src_vocab));
    if (n_tgt < 2)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "explain: the target sequence needs <s> ... (at least 2 ids)");
    ATTN_TRY(check_ids("target", tgt, n_tgt, c->max_len + 1, c->tgt_vocab));
    const int Tq = kind == ATTN_VIZ_ENC_SELF ? Ts : Tt, Tk = kind == ATTN_VIZ_DEC_SELF ? Tt : Ts;
    attn_status s = layer_start(out, kind, layer, c->n_head, Tq, Tk);
    attn_encdec_state *st = NULL;
    if (!s) s = attn_encdec_state_init(m, 1, Ts, Tt, &st);
    if (!s) {
        float *one[1] = {out->probs};
        float *const *none = NULL;
        const int L = kind == ATTN_VIZ_ENC_SELF ? c->n_enc_layers : c->n_dec_layers;
        float **bufs = calloc((size_t)L, sizeof *bufs);
        if (!bufs) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
        if (!s) {
            bufs[layer] = one[0];
            attn_encdec_capture cap = {kind == ATTN_VIZ_ENC_SELF ? bufs : none,
                                       kind == ATTN_VIZ_DEC_SELF ? bufs : none,
                                       kind == ATTN_VIZ_CROSS ? bufs : none};
            attn_encdec_set_capture(st, &cap);
            attn_encdec_set_attn_capture(st, site, layer, &out->cap);
            const int32_t sl = Ts, tl = Tt;
            s = attn_encdec_forward(m, st, 1, Ts, Tt, src, &sl, tgt, &tl, NULL);
            attn_encdec_set_capture(st, NULL);
            attn_encdec_set_attn_capture(st, site, 0, NULL);
        }
        free(bufs);
    }
    attn_encdec_state_free(st);
    return layer_end(out, s);
}

/* ---- one head ------------------------------------------------------------------------------ */

void attn_explain_head_free(attn_explain_head *h) {
    if (!h) return;
    float *bufs[] = {h->x_q,   h->x_kv,        h->w_q,       h->w_k, h->w_v,      h->b_q,
                     h->b_k,   h->b_v,         h->q_pre,     h->k_pre, h->probs_model,
                     h->ctx_model, h->w_o,     h->out_share};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) attn_free(bufs[i]);
    explain_pass_free(&h->pass);
    explain_pass_free(&h->other);
    memset(h, 0, sizeof *h);
}

static float *falloc(size_t n) { return attn_alloc((n ? n : 1) * sizeof(float)); }

/* Columns [col, col + width) of rows (M, ld) into a new (M, width) matrix. */
static float *cols(const float *src, int M, size_t ld, size_t col, int width) {
    float *d = falloc((size_t)M * width);
    if (d)
        for (int r = 0; r < M; r++)
            memcpy(d + (size_t)r * width, src + (size_t)r * ld + col, (size_t)width * sizeof(float));
    return d;
}

/* The matrix the article writes for the linear map L, rows [i0, i0 + n) of W (in, out) with
 * y = x·W (+ b): L itself (without its bias) applied to the identity rows e_i0 .. e_{i0+n−1},
 * so it is the map's weight exactly as the model multiplies it, whatever its layout (nn.Linear,
 * Conv1D, quantized). Into *out (n, L->out), in blocks of identity rows. */
static attn_status linear_matrix(const attn_nn_linear *L, int i0, int n, float **out) {
    attn_nn_linear m = *L;
    m.b = NULL;
    const attn_nn_run run = attn_nn_default_run();
    enum { BLOCK = 256 };
    float *W = falloc((size_t)n * L->out), *I = falloc((size_t)BLOCK * L->in);
    attn_status s = W && I ? ATTN_STATUS_OK
                           : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
    for (int r0 = 0; r0 < n && !s; r0 += BLOCK) {
        const int b = n - r0 < BLOCK ? n - r0 : BLOCK;
        memset(I, 0, (size_t)b * L->in * sizeof(float));
        for (int r = 0; r < b; r++) I[(size_t)r * L->in + i0 + r0 + r] = 1.0f;
        s = attn_nn_linear_forward(&run, &m, b, I, L->in, 0.0f, W + (size_t)r0 * L->out, L->out,
                                   ATTN_ACT_NONE);
    }
    attn_free(I);
    if (s) {
        attn_free(W);
        return s;
    }
    *out = W;
    return ATTN_STATUS_OK;
}

static bool has_weight(const attn_nn_linear *L) { return L->w || attn_nn_linear_quantized(L); }

/* The head's q, k, v projections (rows of the layer's maps): D outputs each. */
static void head_maps(const attn_nn_attn_capture *c, int h, int g, attn_nn_linear *q,
                      attn_nn_linear *k, attn_nn_linear *v) {
    const attn_nn_attn_cfg *f = &c->cfg;
    const attn_nn_attn *w = &c->w;
    const int D = f->d_head, HD = f->n_head * D, KD = f->n_kv_head * D;
    if (!f->cross && has_weight(&w->qkv)) {
        *q = attn_nn_linear_rows(&w->qkv, h * D, D);
        *k = attn_nn_linear_rows(&w->qkv, HD + g * D, D);
        *v = attn_nn_linear_rows(&w->qkv, HD + KD + g * D, D);
        return;
    }
    *q = attn_nn_linear_rows(&w->q, h * D, D);
    if (f->cross && has_weight(&w->kv)) {
        *k = attn_nn_linear_rows(&w->kv, g * D, D);
        *v = attn_nn_linear_rows(&w->kv, KD + g * D, D);
        return;
    }
    *k = attn_nn_linear_rows(&w->k, g * D, D);
    *v = attn_nn_linear_rows(&w->v, g * D, D);
}

/* A copy of a map's bias (D), or NULL without one (*ok false when out of memory). */
static float *bias_copy(const attn_nn_linear *L, bool *ok) {
    if (!L->b) return NULL;
    float *b = falloc((size_t)L->out);
    if (!b) {
        *ok = false;
        return NULL;
    }
    memcpy(b, L->b, (size_t)L->out * sizeof(float));
    return b;
}

/* y (M, D) = L(x (M, in)), then the per-head RMSNorm when norm->dim (Qwen3's q/k norms). */
static attn_status project(const attn_nn_linear *L, const attn_nn_norm *norm, int M,
                           const float *x, float **out) {
    const attn_nn_run run = attn_nn_default_run();
    float *y = falloc((size_t)M * L->out);
    if (!y) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
    attn_status s = attn_nn_linear_forward(&run, L, M, x, L->in, 0.0f, y, L->out, ATTN_ACT_NONE);
    if (!s && norm->dim) s = attn_nn_norm_forward(norm, M, y, y, NULL, NULL);
    if (s) {
        attn_free(y);
        return s;
    }
    *out = y;
    return ATTN_STATUS_OK;
}

attn_status attn_explain_head_compute(const attn_explain_layer *l, int head, bool compare_masks,
                                      attn_explain_head *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL output");
    memset(out, 0, sizeof *out);
    if (!l || !l->cap.taken || !l->probs)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: no captured layer");
    const attn_nn_attn_capture *c = &l->cap;
    const attn_nn_attn_cfg *f = &c->cfg;
    const int H = f->n_head, Hk = f->n_kv_head, D = f->d_head;
    if (head < 0 || head >= H)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: head %d; the layer has heads 0 to %d",
                         head, H - 1);
    if (compare_masks && f->cross)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "explain: comparing masks is for self-attention (cross-attention has "
                         "no causal mask to compare)");
    const int Tq = c->Mq, Tk = c->Mk, C = f->d_model, Ckv = f->cross ? f->d_kv : C;
    if (Tq != l->Tq || Tk != l->Tk)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "explain: the capture holds %d x %d rows, the layer %d x %d (batch 1 only)",
                         Tq, Tk, l->Tq, l->Tk);
    const int g = head / (H / Hk), HD = H * D, KD = Hk * D, W = HD + 2 * KD;
    attn_explain_head *o = out;
    o->kind = l->kind, o->layer = l->layer, o->head = head, o->kv_head = g;
    o->H = H, o->H_kv = Hk, o->Tq = Tq, o->Tk = Tk, o->d_model = C, o->d_kv = Ckv, o->d_head = D;
    o->scale = attn_attention_default_params(1, H, Tq, Tk, D).scale;
    if (f->scale != 0.0f) o->scale = f->scale;
    o->causal = f->causal, o->window = f->window;
    o->pre_norm = c->pre_norm, o->norm_kind = c->norm.kind;
    o->rope_dim = f->rope_dim, o->rope_mode = f->rope_mode;
    o->qk_norm = c->w.q_norm.dim || c->w.k_norm.dim;

    attn_nn_linear Lq, Lk, Lv;
    head_maps(c, head, g, &Lq, &Lk, &Lv);
    const float *xkv = f->cross ? c->src : c->x;
    bool ok = true;
    o->x_q = cols(c->x, Tq, (size_t)C, 0, C);
    o->x_kv = cols(xkv, Tk, (size_t)Ckv, 0, Ckv);
    o->b_q = bias_copy(&Lq, &ok), o->b_k = bias_copy(&Lk, &ok), o->b_v = bias_copy(&Lv, &ok);
    /* after rotary: what the attention read (the capture's q | k | v) */
    if (!f->cross) {
        o->pass.q = cols(c->proj, Tq, (size_t)W, (size_t)head * D, D);
        o->pass.k = cols(c->proj, Tk, (size_t)W, (size_t)HD + (size_t)g * D, D);
        o->pass.v = cols(c->proj, Tk, (size_t)W, (size_t)HD + KD + (size_t)g * D, D);
    } else {
        const float *kv = c->proj + (size_t)Tq * HD;
        o->pass.q = cols(c->proj, Tq, (size_t)HD, (size_t)head * D, D);
        o->pass.k = cols(kv, Tk, (size_t)2 * KD, (size_t)g * D, D);
        o->pass.v = cols(kv, Tk, (size_t)2 * KD, (size_t)KD + (size_t)g * D, D);
    }
    o->ctx_model = cols(c->ctx, Tq, (size_t)HD, (size_t)head * D, D);
    o->probs_model = cols(l->probs + (size_t)head * Tq * Tk, Tq, (size_t)Tk, 0, Tk);
    if (!ok || !o->x_q || !o->x_kv || !o->pass.q || !o->pass.k || !o->pass.v || !o->ctx_model ||
        !o->probs_model) {
        attn_explain_head_free(o);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
    }
    const attn_nn_norm none = {0};
    attn_status s = project(&Lq, f->cross ? &none : &c->w.q_norm, Tq, o->x_q, &o->q_pre);
    if (!s) s = project(&Lk, f->cross ? &none : &c->w.k_norm, Tk, o->x_kv, &o->k_pre);
    if (!s) s = linear_matrix(&Lq, 0, C, &o->w_q);
    if (!s) s = linear_matrix(&Lk, 0, Ckv, &o->w_k);
    if (!s) s = linear_matrix(&Lv, 0, Ckv, &o->w_v);
    /* W_O's rows for this head's D inputs: (D, C) */
    if (!s) s = linear_matrix(&c->w.o, head * D, D, &o->w_o);
    if (!s) s = explain_attend(Tq, Tk, D, o->scale, f->causal, f->window, &o->pass);
    if (!s && !(o->out_share = falloc((size_t)Tq * C)))
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
    if (!s)
        s = attn_gemm(false, false, Tq, C, D, 1.0f, o->pass.output, D, o->w_o, C, 0.0f,
                      o->out_share, C, NULL, ATTN_ACT_NONE);
    if (!s && compare_masks) {
        o->other.q = cols(o->pass.q, Tq, (size_t)D, 0, D);
        o->other.k = cols(o->pass.k, Tk, (size_t)D, 0, D);
        o->other.v = cols(o->pass.v, Tk, (size_t)D, 0, D);
        if (!o->other.q || !o->other.k || !o->other.v)
            s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
        if (!s) s = explain_attend(Tq, Tk, D, o->scale, !f->causal, 0, &o->other);
        o->compared = !s;
    }
    if (s) attn_explain_head_free(o);
    return s;
}

/* ---- finding a head ------------------------------------------------------------------------ */

/* Whether hit a ranks before hit b. */
static bool better(const attn_explain_hit *a, const attn_explain_hit *b) {
    if (a->weight != b->weight) return a->weight > b->weight;
    if (a->layer != b->layer) return a->layer < b->layer;
    return a->head < b->head;
}

/* attn_explain_find (key < 0) and attn_explain_find_key (only key counts). */
static attn_status find(const attn_viz *v, attn_viz_kind kind, int query, int key, const bool *skip,
                        attn_explain_hit *hits, int cap, int *n_hits) {
    if (!v || !hits || !n_hits || cap < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain find: bad arguments");
    *n_hits = 0;
    const int L = attn_viz_num_layers(v, kind);
    if (!L)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain find: the capture has no %s maps",
                         attn_viz_kind_name(kind));
    int n = 0;
    for (int l = 0; l < L; l++) {
        const attn_viz_map *m = attn_viz_find(v, kind, l);
        if (!m) continue;
        if (query < 0 || query >= m->Tq || key >= m->Tk)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "explain find: query %d outside [0, %d) or key %d outside [0, %d)",
                             query, m->Tq, key, m->Tk);
        for (int h = 0; h < m->H; h++) {
            const float *row = m->p + ((size_t)h * m->Tq + query) * m->Tk;
            attn_explain_hit e;
            memset(&e, 0, sizeof e);
            e.layer = l, e.head = h, e.key = -1, e.weight = -1.0f;
            for (int t = 0; t < 3; t++) e.keys[t] = -1, e.weights[t] = 0.0f;
            for (int j = 0; j < m->Tk; j++) {
                const bool self = attn_viz_key_side(kind) == attn_viz_query_side(kind) && j == query;
                if (self || (skip && skip[j]) || (key >= 0 && j != key)) continue;
                const float w = row[j];
                for (int t = 0; t < 3; t++)
                    if (e.keys[t] < 0 || w > e.weights[t]) {
                        for (int u = 2; u > t; u--) e.keys[u] = e.keys[u - 1], e.weights[u] = e.weights[u - 1];
                        e.keys[t] = j, e.weights[t] = w;
                        break;
                    }
            }
            if (e.keys[0] < 0) continue; /* no key counts */
            e.key = e.keys[0], e.weight = e.weights[0];
            /* insert into the sorted top list */
            int at = n < cap ? n : cap;
            while (at > 0 && better(&e, &hits[at - 1])) at--;
            if (at >= cap) continue;
            const int last = n < cap ? n : cap - 1;
            for (int u = last; u > at; u--) hits[u] = hits[u - 1];
            hits[at] = e;
            if (n < cap) n++;
        }
    }
    *n_hits = n;
    return ATTN_STATUS_OK;
}

attn_status attn_explain_find(const attn_viz *v, attn_viz_kind kind, int query, const bool *skip,
                              attn_explain_hit *hits, int cap, int *n_hits) {
    return find(v, kind, query, -1, skip, hits, cap, n_hits);
}

attn_status attn_explain_find_key(const attn_viz *v, attn_viz_kind kind, int query, int key,
                                  attn_explain_hit *hits, int cap, int *n_hits) {
    if (key < 0) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain find: key %d < 0", key);
    return find(v, kind, query, key, NULL, hits, cap, n_hits);
}

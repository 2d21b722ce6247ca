/* mha.c — the classic multi-head attention layer (attn_mha_, attn_nn.h): nn.Linear weights in one
 * block, run by the block layer's attention function (attention.c) with its state's buffers. */
#include "nn-impl.h"

#include <string.h>

struct attn_mha_state {
    attn_mha_config cfg;
    int B, Tq, Tk;    /* capacity */
    float *proj;      /* attention.c's projection layout (self or cross) */
    float *ctx;       /* (B·Tq, H·D) */
    float *lse;       /* (B, H, Tq) */
    float *work;      /* backward scratch: attn_nn_attn_work_floats */
};

attn_mha_config attn_mha_default_config(int d_model, int n_head) {
    attn_mha_config c;
    memset(&c, 0, sizeof c);
    c.d_model = d_model;
    c.d_kv = d_model;
    c.n_head = n_head;
    c.d_head = n_head > 0 ? d_model / n_head : 0;
    c.bias = true;
    return c;
}

attn_status attn_mha_config_check(const attn_mha_config *c) {
    if (!c) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "mha: NULL config");
    if (c->d_model <= 0 || c->d_kv <= 0 || c->n_head <= 0 || c->d_head <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "mha: sizes must be > 0 (d_model=%d d_kv=%d n_head=%d d_head=%d)",
                         c->d_model, c->d_kv, c->n_head, c->d_head);
    size_t hd, a, b;
    if (!attn_size_mul((size_t)c->n_head, (size_t)c->d_head, &hd) || hd > INT32_MAX / 3 ||
        !attn_size_mul(hd, (size_t)ATTN_MAX(c->d_model, c->d_kv), &a) ||
        !attn_size_mul(a, 4, &b) || b > (SIZE_MAX / sizeof(float)) / 2)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "mha: n_head=%d x d_head=%d x width=%d is too large", c->n_head,
                         c->d_head, ATTN_MAX(c->d_model, c->d_kv));
    return ATTN_STATUS_OK;
}

size_t attn_mha_num_params(const attn_mha_config *c) {
    if (attn_mha_config_check(c)) return 0;
    size_t C = (size_t)c->d_model, Ckv = (size_t)c->d_kv, HD = (size_t)c->n_head * c->d_head;
    size_t n = HD * C + 2 * HD * Ckv + C * HD;
    if (c->bias) n += 3 * HD + C;
    return n;
}

attn_status attn_mha_weights_view(const attn_mha_config *c, float *buf, attn_mha_weights *w) {
    attn_status s = attn_mha_config_check(c);
    if (s) return s;
    if (!buf || !w) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "mha: NULL buffer");
    size_t C = (size_t)c->d_model, Ckv = (size_t)c->d_kv, HD = (size_t)c->n_head * c->d_head;
    float *p = buf;
    w->w_q = p, p += HD * C;
    w->w_k = p, p += HD * Ckv;
    w->w_v = p, p += HD * Ckv;
    if (c->bias) {
        w->b_q = p, p += HD;
        w->b_k = p, p += HD;
        w->b_v = p, p += HD;
    } else {
        w->b_q = w->b_k = w->b_v = NULL;
    }
    w->w_o = p, p += C * HD;
    w->b_o = c->bias ? p : NULL;
    return ATTN_STATUS_OK;
}

attn_nn_attn attn_mha_as_attn(const attn_mha_config *c, const attn_mha_weights *w) {
    attn_nn_attn a;
    memset(&a, 0, sizeof a);
    const int HD = c->n_head * c->d_head;
    a.q = attn_nn_linear_make(w->w_q, c->bias ? w->b_q : NULL, c->d_model, HD, ATTN_NN_OUT_IN);
    a.k = attn_nn_linear_make(w->w_k, c->bias ? w->b_k : NULL, c->d_kv, HD, ATTN_NN_OUT_IN);
    a.v = attn_nn_linear_make(w->w_v, c->bias ? w->b_v : NULL, c->d_kv, HD, ATTN_NN_OUT_IN);
    a.o = attn_nn_linear_make(w->w_o, c->bias ? w->b_o : NULL, HD, c->d_model, ATTN_NN_OUT_IN);
    return a;
}

static attn_nn_attn_cfg block_cfg(const attn_mha_config *c, bool cross, const attn_mha_mask *m) {
    attn_nn_attn_cfg a;
    memset(&a, 0, sizeof a);
    a.d_model = c->d_model, a.d_kv = c->d_kv;
    a.n_head = a.n_kv_head = c->n_head, a.d_head = c->d_head;
    a.cross = cross;
    a.causal = m && m->causal;
    return a;
}

attn_status attn_mha_state_init(const attn_mha_config *c, int B, int Tq, int Tk,
                                attn_mha_state **out) {
    attn_status s = attn_mha_config_check(c);
    if (s) return s;
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "mha: NULL output");
    *out = NULL;
    if (B <= 0 || Tq <= 0 || Tk <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "mha: state sizes must be > 0 (B=%d Tq=%d Tk=%d)", B, Tq, Tk);
    size_t HD = (size_t)c->n_head * c->d_head, rows, proj, ctx;
    /* Self: B·T·3HD; cross: B·Tq·HD + B·Tk·2HD. Both fit in B·max(Tq,Tk)·3HD. */
    if (!attn_size_mul((size_t)B, (size_t)ATTN_MAX(Tq, Tk), &rows) ||
        !attn_size_mul(rows, 3 * HD, &proj) || !attn_size_mul((size_t)B * (size_t)Tq, HD, &ctx) ||
        proj > ATTN_MAX_BUFFER_BYTES / sizeof(float))
        return attn_fail(ATTN_STATUS_TOO_LARGE, "mha: state for B=%d Tq=%d Tk=%d is too large",
                         B, Tq, Tk);
    attn_mha_state *st = attn_calloc(sizeof *st);
    if (!st) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "mha: out of memory");
    st->cfg = *c;
    st->B = B, st->Tq = Tq, st->Tk = Tk;
    st->proj = attn_alloc(proj * sizeof(float));
    st->ctx = attn_alloc(ctx * sizeof(float));
    st->lse = attn_alloc((size_t)B * c->n_head * Tq * sizeof(float));
    st->work = attn_alloc((proj + ctx) * sizeof(float));
    if (!st->proj || !st->ctx || !st->lse || !st->work) {
        attn_mha_state_free(st);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "mha: out of memory for B=%d Tq=%d Tk=%d",
                         B, Tq, Tk);
    }
    *out = st;
    return ATTN_STATUS_OK;
}

void attn_mha_state_free(attn_mha_state *st) {
    if (!st) return;
    attn_free(st->proj);
    attn_free(st->ctx);
    attn_free(st->lse);
    attn_free(st->work);
    attn_free(st);
}

static attn_status check_call(const attn_mha_config *c, const attn_mha_weights *w,
                              const attn_mha_state *st, int B, int Tq, int Tk, const float *x,
                              const float *kv) {
    attn_status s = attn_mha_config_check(c);
    if (s) return s;
    if (!w || !st || !x) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "mha: NULL argument");
    if (c->d_model != st->cfg.d_model || c->d_kv != st->cfg.d_kv || c->n_head != st->cfg.n_head ||
        c->d_head != st->cfg.d_head || c->bias != st->cfg.bias)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "mha: the state was made for a different configuration");
    if (B <= 0 || Tq <= 0 || Tk <= 0 || B > st->B || Tq > st->Tq || Tk > st->Tk)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "mha: B=%d Tq=%d Tk=%d outside the state's capacity B<=%d Tq<=%d Tk<=%d",
                         B, Tq, Tk, st->B, st->Tq, st->Tk);
    if (!kv && (Tk != Tq || c->d_kv != c->d_model))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "mha: self-attention needs Tk == Tq and d_kv == d_model (Tq=%d Tk=%d)",
                         Tq, Tk);
    if (!w->w_q || !w->w_k || !w->w_v || !w->w_o ||
        (c->bias && (!w->b_q || !w->b_k || !w->b_v || !w->b_o)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "mha: missing weight or bias");
    return ATTN_STATUS_OK;
}

static attn_nn_seqs seqs(int B, int Tq, int Tk, const attn_mha_mask *m) {
    attn_nn_seqs s = attn_nn_seqs_dense(B, Tq, Tk);
    if (m) {
        s.kv_len = m->kv_len;
        s.pos0 = m->causal_offset;
    }
    return s;
}

attn_status attn_mha_forward(const attn_mha_config *c, const attn_mha_weights *w,
                             attn_mha_state *st, int B, int Tq, int Tk, const float *x,
                             const float *kv, const attn_mha_mask *mask, float *y, float *probs) {
    ATTN_TRY(check_call(c, w, st, B, Tq, Tk, x, kv));
    if (!y) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "mha: NULL output");
    if (!kv && mask && mask->causal_offset != 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "mha: self-attention has Tk == Tq, so causal_offset must be 0 (got %d)",
                         mask->causal_offset);
    const attn_nn_attn_cfg cfg = block_cfg(c, kv != NULL, mask);
    const attn_nn_attn a = attn_mha_as_attn(c, w);
    const attn_nn_seqs s = seqs(B, Tq, Tk, mask);
    const attn_nn_run run = attn_nn_default_run();
    attn_nn_attn_acts acts = {st->proj, st->ctx, st->lse, NULL, NULL};
    return attn_nn_attention_forward(&run, &cfg, &a, &s, x, kv, NULL, &acts, probs, 0.0f, y);
}

attn_status attn_mha_backward(const attn_mha_config *c, const attn_mha_weights *w,
                              attn_mha_state *st, int B, int Tq, int Tk, const float *x,
                              const float *kv, const attn_mha_mask *mask, const float *dy,
                              float *dx, float *dkv, const attn_mha_weights *g) {
    ATTN_TRY(check_call(c, w, st, B, Tq, Tk, x, kv));
    const bool self = kv == NULL;
    if (!dy || !dx || !g || (self && dkv) || (!self && !dkv))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "mha backward: need dy, dx, grads, and dkv exactly for cross-attention");
    const attn_nn_attn_cfg cfg = block_cfg(c, !self, mask);
    const attn_nn_attn a = attn_mha_as_attn(c, w), ga = attn_mha_as_attn(c, g);
    const attn_nn_seqs s = seqs(B, Tq, Tk, mask);
    const attn_nn_run run = attn_nn_default_run();
    const attn_nn_attn_acts acts = {st->proj, st->ctx, st->lse, NULL, NULL};
    if (dkv) memset(dkv, 0, (size_t)B * Tk * c->d_kv * sizeof(float)); /* overwritten (API) */
    return attn_nn_attention_backward(&run, &cfg, &a, &ga, &s, x, kv, &acts, dy, dx, false, dkv,
                                      st->work);
}

/* mha.c — multi-head attention layer: projections with attn_gemm, the fused attention kernel,
 * output projection; and the backward pass.
 *
 * Buffer layout in attn_mha_state (why: the attention kernel reads heads straight out of the
 * projection rows, so no transposes are ever done):
 *   self-attention:  proj = QKV (B·T, 3·H·D), q|k|v interleaved per row, row stride 3·H·D; one
 *                    GEMM when W_Q, W_K, W_V are adjacent in memory (attn_mha_weights_view).
 *   cross-attention: proj = Q (B·Tq, H·D) followed by KV (B·Tk, 2·H·D), row stride 2·H·D; one
 *                    GEMM for K and V when W_K, W_V are adjacent.
 *   ctx (B·Tq, H·D)  the attention output before W_O; lse (B, H, Tq) for backward.
 * dproj and dctx mirror proj and ctx. */
#include "attn_nn.h"

#include "attn_kernels.h"
#include "../core/core-impl.h"

#include <string.h>

struct attn_mha_state {
    attn_mha_config cfg;
    int B, Tq, Tk;    /* capacity */
    float *proj;      /* see above */
    float *dproj;     /* same layout as proj */
    float *ctx;       /* (B·Tq, H·D) */
    float *dctx;      /* (B·Tq, H·D) */
    float *lse;       /* (B, H, Tq) */
    size_t proj_size; /* floats */
};

attn_mha_config attn_mha_default_config(int d_model, int n_head) {
    attn_mha_config c;
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
    st->proj_size = proj;
    st->proj = attn_alloc(proj * sizeof(float));
    st->dproj = attn_alloc(proj * sizeof(float));
    st->ctx = attn_alloc(ctx * sizeof(float));
    st->dctx = attn_alloc(ctx * sizeof(float));
    st->lse = attn_alloc((size_t)B * c->n_head * Tq * sizeof(float));
    if (!st->proj || !st->dproj || !st->ctx || !st->dctx || !st->lse) {
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
    attn_free(st->dproj);
    attn_free(st->ctx);
    attn_free(st->dctx);
    attn_free(st->lse);
    attn_free(st);
}

/* Where q, k, v sit inside proj (or dproj) for this call. */
typedef struct {
    size_t q, k, v; /* offsets in floats */
    int ldq, ldkv;
} proj_layout;

static proj_layout layout(int B, int Tq, int HD, bool self) {
    proj_layout L;
    if (self) {
        L.q = 0, L.k = (size_t)HD, L.v = 2 * (size_t)HD;
        L.ldq = L.ldkv = 3 * HD;
    } else {
        L.q = 0;
        L.k = (size_t)B * Tq * HD;
        L.v = L.k + (size_t)HD;
        L.ldq = HD;
        L.ldkv = 2 * HD;
    }
    return L;
}

static bool adjacent3(const float *a, const float *b, const float *c, size_t n) {
    return b == a + n && c == b + n;
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

static attn_attention_params attention_params(const attn_mha_config *c, int B, int Tq, int Tk,
                                               const attn_mha_mask *mask, proj_layout L) {
    attn_attention_params p = attn_attention_default_params(B, c->n_head, Tq, Tk, c->d_head);
    p.ldq = L.ldq;
    p.ldk = p.ldv = L.ldkv;
    p.ldo = c->n_head * c->d_head;
    if (mask) {
        p.causal = mask->causal;
        p.causal_offset = mask->causal_offset;
        p.kv_len = mask->kv_len;
    }
    return p;
}

/* out (rows, n_out, stride ldo) = in (rows, cin) · W (n_out, cin)ᵀ + b */
static attn_status linear(int rows, int cin, int n_out, const float *in, const float *W,
                          const float *b, float *out, int ldo) {
    return attn_gemm(false, true, rows, n_out, cin, 1.0f, in, cin, W, cin, 0.0f, out, ldo, b,
                     ATTN_ACT_NONE);
}

attn_status attn_mha_forward(const attn_mha_config *c, const attn_mha_weights *w,
                             attn_mha_state *st, int B, int Tq, int Tk, const float *x,
                             const float *kv, const attn_mha_mask *mask, float *y, float *probs) {
    ATTN_TRY(check_call(c, w, st, B, Tq, Tk, x, kv));
    if (!y) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "mha: NULL output");
    const int C = c->d_model, Ckv = c->d_kv, HD = c->n_head * c->d_head;
    const bool self = kv == NULL;
    proj_layout L = layout(B, Tq, HD, self);
    float *P = st->proj;
    if (self) {
        bool fused = adjacent3(w->w_q, w->w_k, w->w_v, (size_t)HD * C) &&
                     (!c->bias || adjacent3(w->b_q, w->b_k, w->b_v, (size_t)HD));
        if (fused) {
            ATTN_TRY(linear(B * Tq, C, 3 * HD, x, w->w_q, w->b_q, P, 3 * HD));
        } else {
            ATTN_TRY(linear(B * Tq, C, HD, x, w->w_q, w->b_q, P + L.q, L.ldq));
            ATTN_TRY(linear(B * Tq, C, HD, x, w->w_k, w->b_k, P + L.k, L.ldkv));
            ATTN_TRY(linear(B * Tq, C, HD, x, w->w_v, w->b_v, P + L.v, L.ldkv));
        }
    } else {
        ATTN_TRY(linear(B * Tq, C, HD, x, w->w_q, w->b_q, P + L.q, L.ldq));
        bool fused = w->w_v == w->w_k + (size_t)HD * Ckv && (!c->bias || w->b_v == w->b_k + HD);
        if (fused) {
            ATTN_TRY(linear(B * Tk, Ckv, 2 * HD, kv, w->w_k, w->b_k, P + L.k, L.ldkv));
        } else {
            ATTN_TRY(linear(B * Tk, Ckv, HD, kv, w->w_k, w->b_k, P + L.k, L.ldkv));
            ATTN_TRY(linear(B * Tk, Ckv, HD, kv, w->w_v, w->b_v, P + L.v, L.ldkv));
        }
    }
    attn_attention_params p = attention_params(c, B, Tq, Tk, mask, L);
    ATTN_TRY(attn_attention_forward(&p, P + L.q, P + L.k, P + L.v, st->ctx, st->lse, probs));
    return linear(B * Tq, HD, C, st->ctx, w->w_o, w->b_o, y, C);
}

/* out (cols) += column sums of a (rows, cols, stride lda) */
static void colsum_add(int rows, int cols, const float *a, int lda, float *out) {
    for (int r = 0; r < rows; r++) {
        const float *row = a + (size_t)r * lda;
        for (int j = 0; j < cols; j++) out[j] += row[j];
    }
}

/* gW (n_out, cin) += d (rows, n_out, stride ldd)ᵀ · in (rows, cin); gb += colsum(d) */
static attn_status linear_grad_w(int rows, int cin, int n_out, const float *d, int ldd,
                                 const float *in, float *gW, float *gb) {
    if (gW)
        ATTN_TRY(attn_gemm(true, false, n_out, cin, rows, 1.0f, d, ldd, in, cin, 1.0f, gW, cin,
                           NULL, ATTN_ACT_NONE));
    if (gb) colsum_add(rows, n_out, d, ldd, gb);
    return ATTN_STATUS_OK;
}

/* din (rows, cin) (=|+=) d (rows, n_out, stride ldd) · W (n_out, cin) */
static attn_status linear_grad_in(int rows, int cin, int n_out, const float *d, int ldd,
                                  const float *W, float *din, bool accumulate) {
    return attn_gemm(false, false, rows, cin, n_out, 1.0f, d, ldd, W, cin,
                     accumulate ? 1.0f : 0.0f, din, cin, NULL, ATTN_ACT_NONE);
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
    const int C = c->d_model, Ckv = c->d_kv, HD = c->n_head * c->d_head;
    const int Mq = B * Tq, Mk = B * Tk;
    proj_layout L = layout(B, Tq, HD, self);
    const float *P = st->proj;
    float *dP = st->dproj;

    /* Output projection. */
    ATTN_TRY(linear_grad_in(Mq, HD, C, dy, C, w->w_o, st->dctx, false));
    ATTN_TRY(linear_grad_w(Mq, HD, C, dy, C, st->ctx, g->w_o, c->bias ? g->b_o : NULL));

    /* Attention. */
    attn_attention_params p = attention_params(c, B, Tq, Tk, mask, L);
    ATTN_TRY(attn_attention_backward(&p, P + L.q, P + L.k, P + L.v, st->ctx, st->lse, st->dctx,
                                     dP + L.q, dP + L.k, dP + L.v));

    /* Input projections. */
    if (self) {
        bool wf = adjacent3(w->w_q, w->w_k, w->w_v, (size_t)HD * C);
        bool gf = adjacent3(g->w_q, g->w_k, g->w_v, (size_t)HD * C) &&
                  (!c->bias || adjacent3(g->b_q, g->b_k, g->b_v, (size_t)HD));
        if (gf) {
            ATTN_TRY(linear_grad_w(Mq, C, 3 * HD, dP, 3 * HD, x, g->w_q, c->bias ? g->b_q : NULL));
        } else {
            ATTN_TRY(
                linear_grad_w(Mq, C, HD, dP + L.q, 3 * HD, x, g->w_q, c->bias ? g->b_q : NULL));
            ATTN_TRY(
                linear_grad_w(Mq, C, HD, dP + L.k, 3 * HD, x, g->w_k, c->bias ? g->b_k : NULL));
            ATTN_TRY(
                linear_grad_w(Mq, C, HD, dP + L.v, 3 * HD, x, g->w_v, c->bias ? g->b_v : NULL));
        }
        if (wf) {
            ATTN_TRY(linear_grad_in(Mq, C, 3 * HD, dP, 3 * HD, w->w_q, dx, false));
        } else {
            ATTN_TRY(linear_grad_in(Mq, C, HD, dP + L.q, 3 * HD, w->w_q, dx, false));
            ATTN_TRY(linear_grad_in(Mq, C, HD, dP + L.k, 3 * HD, w->w_k, dx, true));
            ATTN_TRY(linear_grad_in(Mq, C, HD, dP + L.v, 3 * HD, w->w_v, dx, true));
        }
    } else {
        ATTN_TRY(linear_grad_w(Mq, C, HD, dP + L.q, HD, x, g->w_q, c->bias ? g->b_q : NULL));
        ATTN_TRY(linear_grad_in(Mq, C, HD, dP + L.q, HD, w->w_q, dx, false));
        bool wf = w->w_v == w->w_k + (size_t)HD * Ckv;
        bool gf = g->w_v == g->w_k + (size_t)HD * Ckv && (!c->bias || g->b_v == g->b_k + HD);
        if (gf) {
            ATTN_TRY(linear_grad_w(Mk, Ckv, 2 * HD, dP + L.k, 2 * HD, kv, g->w_k,
                                   c->bias ? g->b_k : NULL));
        } else {
            ATTN_TRY(
                linear_grad_w(Mk, Ckv, HD, dP + L.k, 2 * HD, kv, g->w_k, c->bias ? g->b_k : NULL));
            ATTN_TRY(
                linear_grad_w(Mk, Ckv, HD, dP + L.v, 2 * HD, kv, g->w_v, c->bias ? g->b_v : NULL));
        }
        if (wf) {
            ATTN_TRY(linear_grad_in(Mk, Ckv, 2 * HD, dP + L.k, 2 * HD, w->w_k, dkv, false));
        } else {
            ATTN_TRY(linear_grad_in(Mk, Ckv, HD, dP + L.k, 2 * HD, w->w_k, dkv, false));
            ATTN_TRY(linear_grad_in(Mk, Ckv, HD, dP + L.v, 2 * HD, w->w_v, dkv, true));
        }
    }
    return ATTN_STATUS_OK;
}

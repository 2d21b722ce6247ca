/* sublayer.c — the residual wiring of every Transformer block (attn_nn.h):
 *   pre-norm:  res = x + drop(f(norm(x)));  out = res
 *   post-norm: res = x + drop(f(x));        out = norm(res)
 * f is an attention or feed-forward function. Without dropout the residual enters f's last
 * product as its C operand (beta = 1: one pass over the stream fewer); with dropout f's output
 * goes to scratch and one fused pass draws the mask and adds (attn_nn_dropout_fwd). The backward
 * mirrors it: the skip path's gradient is the GEMM's C operand again (post-norm) or the norm's
 * input gradient is added to it (pre-norm). */
#include "nn-impl.h"

#include <string.h>

float *attn_nn_sub_output(const attn_nn_sublayer *S, const attn_nn_sub_acts *A) {
    return S->pre_norm ? A->res : A->ln;
}

static int width(const attn_nn_sublayer *S) { return S->norm.dim; }

size_t attn_nn_sub_work_floats(const attn_nn_sublayer *S, int M, int Mk) {
    const size_t n = (size_t)M * width(S);
    const size_t f = S->kind == ATTN_SUB_ATTN ? attn_nn_attn_work_floats(S->acfg, M, Mk)
                                              : attn_nn_ffn_work_floats(&S->ffn, M);
    return 3 * n + f;
}

static attn_status run_f(const attn_nn_run *run, const attn_nn_sublayer *S, const attn_nn_seqs *s,
                         int M, const float *in, const float *src, const attn_nn_kv *cache,
                         attn_nn_sub_acts *A, float *probs, float beta, float *y) {
    if (S->kind == ATTN_SUB_ATTN)
        return attn_nn_attention_forward(run, S->acfg, &S->attn, s, in, src, cache, &A->attn,
                                         probs, beta, y);
    return attn_nn_ffn_forward(run, &S->ffn, M, in, &A->ffn, beta, y);
}

static attn_status check(const attn_nn_sublayer *S, const attn_nn_sub_acts *A, const float *x) {
    if (!S || !A || !x || !A->res || !A->ln)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "sub-layer: NULL argument");
    if (S->kind != ATTN_SUB_ATTN && S->kind != ATTN_SUB_FFN)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "sub-layer: unknown kind %d", (int)S->kind);
    if (S->kind == ATTN_SUB_ATTN && !S->acfg)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "sub-layer: attention without its config");
    const int C = S->norm.dim;
    if (S->kind == ATTN_SUB_ATTN && S->acfg->d_model != C)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "sub-layer: norm width %d differs from the attention's d_model %d", C,
                         S->acfg->d_model);
    if (S->kind == ATTN_SUB_FFN && (S->ffn.up.in != C || S->ffn.down.out != C))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "sub-layer: norm width %d differs from the FFN's (%d -> ... -> %d)", C,
                         S->ffn.up.in, S->ffn.down.out);
    return ATTN_STATUS_OK;
}

/* The rows an attention sub-layer's sequences describe must be the call's. */
static attn_status check_rows(const attn_nn_sublayer *S, const attn_nn_seqs *s, int M) {
    if (S->kind != ATTN_SUB_ATTN || !s) return ATTN_STATUS_OK;
    const int rows = s->off ? s->off[s->B] : s->B * s->Tq;
    if (rows != M)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "sub-layer: M = %d rows but the sequences hold %d", M, rows);
    return ATTN_STATUS_OK;
}

attn_status attn_nn_sub_forward(const attn_nn_run *run, const attn_nn_sublayer *S,
                                const attn_nn_seqs *s, int M, attn_nn_rows rows, const float *x,
                                const float *src, const attn_nn_kv *cache, attn_nn_sub_acts *A,
                                float *probs, float *tmp) {
    ATTN_TRY(check(S, A, x));
    ATTN_TRY(check_rows(S, s, M));
    const int C = width(S);
    const size_t n = (size_t)M * C;
    const float *in = x;
    if (S->pre_norm) {
        ATTN_TRY(attn_nn_norm_forward(&S->norm, M, x, A->ln, A->mean, A->rstd));
        in = A->ln;
    }
    if (nn_dropping(run, S->p_drop)) {
        if (!tmp || !A->mask)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "sub-layer: dropout needs scratch and mask buffers");
        ATTN_TRY(run_f(run, S, s, M, in, src, cache, A, probs, 0.0f, tmp));
        attn_nn_dropout_fwd(run, S->site, S->p_drop, rows, M, C, x, tmp, A->res, A->mask);
    } else {
        if (A->res != x) memcpy(A->res, x, n * sizeof(float));
        ATTN_TRY(run_f(run, S, s, M, in, src, cache, A, probs, 1.0f, A->res));
    }
    if (!S->pre_norm) ATTN_TRY(attn_nn_norm_forward(&S->norm, M, A->res, A->ln, A->mean, A->rstd));
    return ATTN_STATUS_OK;
}

attn_status attn_nn_sub_backward(const attn_nn_run *run, const attn_nn_sublayer *S,
                                 const attn_nn_sublayer *Gs, const attn_nn_seqs *s, int M,
                                 const float *x, const float *src, attn_nn_sub_acts *A, float *G,
                                 float *dsrc, float *work) {
    ATTN_TRY(check(S, A, x));
    ATTN_TRY(check_rows(S, s, M));
    if (!G || !work) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "sub-layer backward: NULL");
    const int C = width(S);
    const size_t n = (size_t)M * C;
    float *s1 = work, *s2 = work + n, *s3 = work + 2 * n, *fw = work + 3 * n;
    const float *in = S->pre_norm ? A->ln : x;
    const float *dres = G;
    if (!S->pre_norm) {
        ATTN_TRY(attn_nn_norm_backward(&S->norm, Gs ? &Gs->norm : NULL, M, A->res, A->mean,
                                       A->rstd, G, s1, false, NULL));
        dres = s1;
    }
    const float *dsub = dres;
    if (nn_dropping(run, S->p_drop)) {
        attn_nn_dropout_bwd(S->p_drop, M, C, A->mask, dres, s2);
        dsub = s2;
    }
    /* d f's input: into s3 (pre-norm, then through the norm) or added onto the skip path. */
    float *din = s3;
    bool acc = false;
    if (!S->pre_norm) {
        memcpy(G, dres, n * sizeof(float));
        din = G, acc = true;
    }
    if (S->kind == ATTN_SUB_ATTN)
        ATTN_TRY(attn_nn_attention_backward(run, S->acfg, &S->attn, Gs ? &Gs->attn : NULL, s, in,
                                            src, &A->attn, dsub, din, acc,
                                            S->acfg->cross ? dsrc : NULL, fw));
    else
        ATTN_TRY(attn_nn_ffn_backward(run, &S->ffn, Gs ? &Gs->ffn : NULL, M, in, &A->ffn, dsub, din,
                                      acc, fw));
    if (S->pre_norm)
        ATTN_TRY(attn_nn_norm_backward(&S->norm, Gs ? &Gs->norm : NULL, M, x, A->mean, A->rstd, s3,
                                       G, true, s1));
    return ATTN_STATUS_OK;
}

void attn_nn_attn_capture_free(attn_nn_attn_capture *cap) {
    if (!cap) return;
    attn_free(cap->x);
    attn_free(cap->src);
    attn_free(cap->proj);
    attn_free(cap->ctx);
    memset(cap, 0, sizeof *cap);
}

/* A fresh copy of n floats of p. */
static float *dup_floats(const float *p, size_t n) {
    float *d = attn_alloc(n * sizeof(float));
    if (d) memcpy(d, p, n * sizeof(float));
    return d;
}

attn_status attn_nn_attn_capture_take(attn_nn_attn_capture *cap, const attn_nn_sublayer *S, int Mq,
                                      int Mk, const float *x, const float *src,
                                      const attn_nn_sub_acts *A) {
    if (!cap || !S || !A || !x || S->kind != ATTN_SUB_ATTN || !S->acfg || Mq < 1 ||
        (S->acfg->cross && (!src || Mk < 1)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention capture: not an attention sub-layer's forward");
    attn_nn_attn_capture_free(cap);
    const attn_nn_attn_cfg *c = S->acfg;
    if (!c->cross) Mk = Mq;
    cap->Mq = Mq, cap->Mk = Mk;
    cap->cfg = *c;
    cap->w = S->attn;
    cap->norm = S->norm;
    cap->pre_norm = S->pre_norm;
    const size_t C = (size_t)c->d_model, HD = (size_t)c->n_head * c->d_head;
    cap->x = dup_floats(S->pre_norm ? A->ln : x, (size_t)Mq * C);
    cap->proj = dup_floats(A->attn.proj, attn_nn_attn_proj_floats(c, Mq, Mk));
    cap->ctx = dup_floats(A->attn.ctx, (size_t)Mq * HD);
    if (c->cross) cap->src = dup_floats(src, (size_t)Mk * c->d_kv);
    if (!cap->x || !cap->proj || !cap->ctx || (c->cross && !cap->src)) {
        attn_nn_attn_capture_free(cap);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
    }
    cap->taken = true;
    return ATTN_STATUS_OK;
}

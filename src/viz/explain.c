/* explain.c — the step-by-step self-attention of attn_explain.h, on the library's kernels.
 * Kept deliberately unfused: each intermediate the article names is materialized so it can be
 * shown; the fused attention kernel is for real models. */
#include "attn_explain.h"

#include "attn_kernels.h"
#include "attn_viz.h"
#include "viz-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void explain_pass_free(attn_explain_pass *p) {
    attn_free(p->q);
    attn_free(p->k);
    attn_free(p->v);
    attn_free(p->scores);
    attn_free(p->scaled);
    attn_free(p->weights);
    attn_free(p->output);
    memset(p, 0, sizeof *p);
}

void attn_explain_free(attn_explain_result *r) {
    if (!r) return;
    explain_pass_free(&r->encoder);
    explain_pass_free(&r->decoder);
}

attn_status explain_attend(int Tq, int Tk, int dk, float scale, bool causal, int window,
                           attn_explain_pass *p) {
    const size_t tt = (size_t)Tq * Tk * sizeof(float);
    p->scores = attn_alloc(tt), p->scaled = attn_alloc(tt), p->weights = attn_alloc(tt);
    p->output = attn_alloc((size_t)Tq * dk * sizeof(float));
    if (!p->scores || !p->scaled || !p->weights || !p->output)
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory for %d x %d", Tq, Tk);
    /* scores = q · kᵀ (Tq, Tk) */
    ATTN_TRY(attn_gemm(false, true, Tq, Tk, dk, 1.0f, p->q, dk, p->k, dk, 0.0f, p->scores, Tk,
                       NULL, ATTN_ACT_NONE));
    for (int i = 0; i < Tq; i++)
        for (int j = 0; j < Tk; j++) {
            const bool hidden = causal && (j > i || (window > 0 && i - j >= window));
            p->scaled[(size_t)i * Tk + j] =
                hidden ? -INFINITY : p->scores[(size_t)i * Tk + j] * scale;
        }
    ATTN_TRY(attn_softmax_forward(Tq, Tk, p->scaled, p->weights));
    /* output = weights · v (Tq, dk) */
    return attn_gemm(false, false, Tq, dk, Tk, 1.0f, p->weights, Tk, p->v, dk, 0.0f, p->output,
                     dk, NULL, ATTN_ACT_NONE);
}

static attn_status run_pass(int T, int dm, int dk, const float *x, const float *wq,
                            const float *wk, const float *wv, bool causal, attn_explain_pass *p) {
    size_t tk = (size_t)T * dk * sizeof(float);
    p->q = attn_alloc(tk), p->k = attn_alloc(tk), p->v = attn_alloc(tk);
    if (!p->q || !p->k || !p->v)
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory for T=%d", T);
    /* q = x · W_Q etc.: x (T, dm) · W (dm, dk) */
    ATTN_TRY(attn_gemm(false, false, T, dk, dm, 1.0f, x, dm, wq, dk, 0.0f, p->q, dk, NULL,
                       ATTN_ACT_NONE));
    ATTN_TRY(attn_gemm(false, false, T, dk, dm, 1.0f, x, dm, wk, dk, 0.0f, p->k, dk, NULL,
                       ATTN_ACT_NONE));
    ATTN_TRY(attn_gemm(false, false, T, dk, dm, 1.0f, x, dm, wv, dk, 0.0f, p->v, dk, NULL,
                       ATTN_ACT_NONE));
    return explain_attend(T, T, dk, 1.0f / sqrtf((float)dk), causal, 0, p);
}

attn_status attn_explain_compute(int T, int d_model, int d_k, const float *x, const float *w_q,
                                 const float *w_k, const float *w_v, attn_explain_result *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL output");
    memset(out, 0, sizeof *out);
    if (T <= 0 || d_model <= 0 || d_k <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "explain: sizes must be > 0 (T=%d d_model=%d d_k=%d)", T, d_model, d_k);
    if (T > 4096 || d_model > 65536 || d_k > 65536)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "explain: T=%d d_model=%d d_k=%d is too large for a walk-through "
                         "(limits 4096, 65536, 65536)",
                         T, d_model, d_k);
    if (!x || !w_q || !w_k || !w_v)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL input");
    out->T = T, out->d_model = d_model, out->d_k = d_k;
    attn_status s = run_pass(T, d_model, d_k, x, w_q, w_k, w_v, false, &out->encoder);
    if (!s) s = run_pass(T, d_model, d_k, x, w_q, w_k, w_v, true, &out->decoder);
    if (s) attn_explain_free(out);
    return s;
}

attn_status attn_explain_write_png(const attn_explain_result *r, const char *const *tokens,
                                   const char *path, const char *font) {
    if (!r || !path || r->T <= 0 || !r->encoder.scores || !r->decoder.weights)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: nothing to draw");
    const int T = r->T;
    char(*num)[16] = NULL;
    const char **lab = NULL;
    if (!tokens) {
        num = calloc((size_t)T, sizeof *num);
        lab = calloc((size_t)T, sizeof *lab);
        if (!num || !lab) {
            free(num), free(lab);
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
        }
        for (int i = 0; i < T; i++) snprintf(num[i], sizeof num[i], "#%d", i), lab[i] = num[i];
        tokens = lab;
    }
    char t[4][96];
    snprintf(t[0], sizeof t[0], "encoder: scores q_i · k_j");
    snprintf(t[1], sizeof t[1], "encoder: weights = softmax(scores / √%d)", r->d_k);
    snprintf(t[2], sizeof t[2], "decoder: scores / √%d, masked where j > i", r->d_k);
    snprintf(t[3], sizeof t[3], "decoder: weights (causal softmax)");
    const attn_viz_panel p[4] = {{t[0], T, T, r->encoder.scores, tokens, tokens, 0, 0},
                                 {t[1], T, T, r->encoder.weights, tokens, tokens, 0, 1},
                                 {t[2], T, T, r->decoder.scaled, tokens, tokens, 0, 0},
                                 {t[3], T, T, r->decoder.weights, tokens, tokens, 0, 1}};
    attn_viz_png_style st;
    memset(&st, 0, sizeof st);
    st.values = true;
    st.font = font;
    st.title = "self-attention step by step: rows = queries i, columns = keys j";
    attn_status s = attn_viz_png_panels(path, p, 4, 2, &st, NULL);
    free(num), free(lab);
    return s;
}

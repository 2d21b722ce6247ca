/* attn_explain.h — the article's self-attention walk-through as data (prefix attn_explain_).
 *
 * For tokens x (T, d_model) and trained matrices W_Q, W_K, W_V (d_model, d_k) — the article's
 * convention q = x·W_Q — it computes every intermediate of single-head attention, once with the
 * encoder's bidirectional attention (every position sees every position) and once with the
 * decoder's causal mask (position i sees positions j <= i):
 *   q, k, v = x·W_Q, x·W_K, x·W_V                          (T, d_k)
 *   scores(i, j)  = q_i · k_j                               (T, T)
 *   scaled(i, j)  = scores(i, j) / sqrt(d_k), −inf where masked
 *   weights(i, :) = softmax(scaled(i, :))                   (T, T)
 *   output_i      = Σ_j weights(i, j) · v_j                 (T, d_k)
 * The steps run on the library's kernels (attn_gemm, attn_softmax_forward).
 *
 *   attn_explain_result r;
 *   if (attn_explain_compute(T, dm, dk, x, wq, wk, wv, &r) == ATTN_STATUS_OK) {
 *       ... r.decoder.weights[i * T + j] ...
 *       attn_explain_free(&r);
 *   }
 */
#ifndef ATTN_EXPLAIN_H
#define ATTN_EXPLAIN_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float *q, *k, *v; /* (T, d_k) each */
    float *scores;    /* (T, T)  q_i · k_j */
    float *scaled;    /* (T, T)  scores / sqrt(d_k); −INFINITY where masked */
    float *weights;   /* (T, T)  softmax of each row of scaled */
    float *output;    /* (T, d_k) */
} attn_explain_pass;

typedef struct {
    int T, d_model, d_k;
    attn_explain_pass encoder; /* bidirectional */
    attn_explain_pass decoder; /* causal */
} attn_explain_result;

/* x (T, d_model), w_q, w_k, w_v (d_model, d_k). Sizes must be positive and modest
 * (T <= 4096, d_model and d_k <= 65536). On failure *out is zeroed and nothing needs freeing. */
attn_status attn_explain_compute(int T, int d_model, int d_k, const float *x, const float *w_q,
                                 const float *w_k, const float *w_v, attn_explain_result *out);
void attn_explain_free(attn_explain_result *r);

/* Draw the walk-through as one PNG of four heatmaps with each value printed in its cell (attn_viz.h
 * draws them): encoder scores q_i·k_j and softmax weights, decoder scaled scores (masked cells
 * grey, "-inf") and weights; the tokens label rows (queries i) and columns (keys j). tokens: T
 * UTF-8 strings, or NULL for "#i"; font: a font file, or NULL for attn_viz_find_font. */
attn_status attn_explain_write_png(const attn_explain_result *r, const char *const *tokens,
                                   const char *path, const char *font);

#ifdef __cplusplus
}
#endif
#endif

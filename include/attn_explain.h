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
#include "attn_viz.h"

#include <stdbool.h>

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

/* ==== the same steps for one head of a real model ============================================
 *
 * The numbers a model really computed on one input, for one attention sub-layer (kind, layer) and
 * one head h (grouped-query: query head h reads key/value head h / (H / H_kv)):
 *   x         the rows the layer's projections read: after its norm (pre-norm models), the
 *             layer's input (post-norm: BERT, the original Transformer); cross-attention's keys
 *             and values are projected from the encoder output
 *   W_Q, W_K, W_V  the head's slices of the projections, (d_model, d_head) with q = x·W_Q + b_Q
 *   q, k      before rotary embeddings (the projection, after the q/k norms of Qwen3) and after
 *             (what the attention used; the same when the model has no rotary embeddings)
 *   scores = q_i·k_j, scaled = scores·scale (1/sqrt(d_head), or the model's own) with −inf
 *   where the mask hides a key (causal for decoders, a sliding window, none for encoders and
 *   cross-attention), weights = softmax, output z_i = Σ_j weights(i, j)·v_j
 *   the head's share of the output projection: z_i·W_O[h] (d_model), W_O[h] the (d_head,
 *   d_model) rows of W_O (x·W convention) that read this head; the layer's attention output is
 *   the sum of every head's share plus b_O.
 * q, k after rotary, v and the model's own probabilities and weighted sums come from one forward
 * with the layer's internals captured (attn_nn_attn_capture); the scores, scaled scores and
 * softmax are recomputed from those q and k on the library's kernels (the fused kernel never
 * materializes them), and the result is checked against the kernel's probabilities by the
 * tests. Everything runs in float32, batch 1, evaluation mode.
 *
 *   attn_explain_layer L;
 *   attn_explain_layer_bert(model, ids, T, 3, &L);       // one forward, layer 3 captured
 *   attn_explain_head h;
 *   attn_explain_head_compute(&L, 1, false, &h);         // head 1's steps
 *   ... h.pass.weights[i * h.Tk + j] ...
 *   attn_explain_head_free(&h); attn_explain_layer_free(&L);
 */

/* One attention sub-layer of a model on one input. */
typedef struct {
    attn_viz_kind kind;       /* SELF (GPT, Llama, BERT), ENC_SELF, DEC_SELF or CROSS */
    int layer;
    int H, Tq, Tk;            /* query heads, queries, keys */
    attn_nn_attn_capture cap; /* the layer's internals (attn_nn.h) */
    float *probs;             /* (H, Tq, Tk) the fused kernel's probabilities (attn_viz's maps) */
} attn_explain_layer;

/* One forward of the model (batch 1, evaluation mode) with layer `layer`'s attention captured.
 * ids as attn_viz_capture_bert / _gpt take them; the encoder-decoder as attn_viz_capture_encdec
 * (src (Ts); tgt (n_tgt) = <s> y1 .. yn </s>, the decoder reading tgt[0 .. n_tgt − 1)) with kind
 * ATTN_VIZ_ENC_SELF, ATTN_VIZ_DEC_SELF or ATTN_VIZ_CROSS. A layer out of range, ids out of range
 * or too many tokens are ATTN_STATUS_INVALID_ARGUMENT. On failure *out is zeroed. */
attn_status attn_explain_layer_bert(const attn_bert_model *m, const int32_t *ids, int T, int layer,
                                    attn_explain_layer *out);
attn_status attn_explain_layer_gpt(const attn_gpt_model *m, const int32_t *ids, int T, int layer,
                                   attn_explain_layer *out);
attn_status attn_explain_layer_encdec(const attn_encdec_model *m, const int32_t *src, int Ts,
                                      const int32_t *tgt, int n_tgt, attn_viz_kind kind, int layer,
                                      attn_explain_layer *out);
void attn_explain_layer_free(attn_explain_layer *l);

/* The walk-through of one head. Matrices are row-major, every buffer owned. */
typedef struct {
    attn_viz_kind kind;
    int layer, head, kv_head;
    int H, H_kv;
    int Tq, Tk, d_model, d_kv, d_head; /* d_kv: the width keys/values are projected from */
    float scale;                       /* what q·k is multiplied by */
    bool causal;                       /* the model's mask: query i sees keys j <= i */
    int window;                        /* sliding window (0: none) */
    bool pre_norm;                     /* x is norm(stream) (else the stream itself) */
    attn_norm_kind norm_kind;
    int rope_dim;                      /* rotated dims per head (0: no rotary embeddings) */
    attn_rope_mode rope_mode;
    bool qk_norm;                      /* per-head RMSNorms on q and k (Qwen3) */
    float *x_q;                        /* (Tq, d_model) */
    float *x_kv;                       /* (Tk, d_kv) (self-attention: the same rows as x_q) */
    float *w_q;                        /* (d_model, d_head) */
    float *w_k, *w_v;                  /* (d_kv, d_head) */
    float *b_q, *b_k, *b_v;            /* (d_head) or NULL (no bias) */
    float *q_pre, *k_pre;              /* (Tq, d_head), (Tk, d_head): before rotary */
    attn_explain_pass pass;            /* q, k (after rotary), v (Tk, d_head), scores, scaled,
                                          weights (Tq, Tk) with the model's mask, output
                                          (Tq, d_head); k and v have Tk rows */
    bool compared;                     /* other holds the opposite mask (compare_masks) */
    attn_explain_pass other;           /* the same head with causal <-> no mask (self only) */
    float *probs_model;                /* (Tq, Tk) the fused kernel's probabilities */
    float *ctx_model;                  /* (Tq, d_head) the model's weighted sum for this head */
    float *w_o;                        /* (d_head, d_model) */
    float *out_share;                  /* (Tq, d_model) = output · w_o */
} attn_explain_head;

/* Head `head` of a captured layer; compare_masks also runs it with the opposite mask (an
 * encoder's head made causal, a decoder's unmasked; refused for cross-attention). On failure
 * *out is zeroed. */
attn_status attn_explain_head_compute(const attn_explain_layer *l, int head, bool compare_masks,
                                      attn_explain_head *out);
void attn_explain_head_free(attn_explain_head *h);

/* The walk-through as JSON text (malloc'd into *json; free with free()): {"format": "attn-explain",
 * "version": 1, "title", "kind", "layer", "head", "kv_head", "H", "H_kv", "d_model", "d_kv",
 * "d_head", "scale", "causal", "window", "rope_dim", "rope_mode", "pre_norm", "norm", "qk_norm",
 * "query", "q_labels", "k_labels", then the matrices as arrays of rows (null for −inf):
 * "q", "k", "v", "scores", "scaled", "weights", "output", "q_pre", "k_pre", "probs_model",
 * "ctx_model", "other": {"mask", "scaled", "weights", "output"} or null, and the row norms
 * "x_norm", "share_norm" (Tq); with full also "x_q", "x_kv", "w_q", "w_k", "w_v", "b_q", "b_k",
 * "b_v" (null without bias), "w_o", "share". Floats with 9 significant digits (float32 exactly).
 * query: the query to show first (-1: none). */
attn_status attn_explain_head_json(const attn_explain_head *h, const char *const *q_labels,
                                   const char *const *k_labels, const char *title, int query,
                                   bool full, char **json);

/* The head's scores, scaled scores (masked cells grey) and weights (and, when compared, the other
 * mask's weights) as one PNG with each value printed in its cell when the matrices are small;
 * q_labels (Tq) and k_labels (Tk) label rows and columns (NULL: "#i"); title over the image (or
 * NULL); font as attn_viz_png_style. */
attn_status attn_explain_head_write_png(const attn_explain_head *h, const char *const *q_labels,
                                        const char *const *k_labels, const char *title,
                                        const char *path, const char *font);

/* The walk-through as one self-contained HTML page (inline CSS and JS, no network): the tokens
 * (click one to make it the query), the q, k, v matrices, the score table of the query (score,
 * scaled, mask, softmax, a bar per key), the weighted sum and the head's share of the output.
 * query: the token shown first. Test hook: with the URL fragment "#test=I[,J...]" the page
 * selects each query in turn and writes {"results": [{"query": I, "top": J, "weight": P,
 * "rows": N, "sum": S}, ...], "errors": n} into the element with id "attn-test" (top: the key
 * with the largest weight as the page read it, rows: the score table's rows drawn, sum: the sum
 * of the weights shown). */
attn_status attn_explain_head_write_html(const attn_explain_head *h, const char *const *q_labels,
                                         const char *const *k_labels, const char *title,
                                         int query, const char *path);

/* ---- finding a head ----------------------------------------------------------------------- */

typedef struct {
    int layer, head;
    float weight;  /* the largest weight of the query on a key that counts */
    int key;       /* that key */
    int keys[3];   /* the three keys that count with the largest weights (−1: fewer) */
    float weights[3];
} attn_explain_hit;

/* Rank every (layer, head) of a capture's maps of one kind by how much query position `query`
 * attends to one other token: the largest weight on a key j != query with skip NULL or !skip[j]
 * (skip (Tk): special tokens such as [CLS] / [SEP], which many heads use as a no-op). The best
 * n_hits (at most cap) in *hits, best first (ties: lower layer, then lower head). */
attn_status attn_explain_find(const attn_viz *v, attn_viz_kind kind, int query, const bool *skip,
                              attn_explain_hit *hits, int cap, int *n_hits);
/* The same ranking by the weight of query on one key (key and weight of each hit are that key's;
 * keys[1..2] −1): which heads link the two tokens most. */
attn_status attn_explain_find_key(const attn_viz *v, attn_viz_kind kind, int query, int key,
                                  attn_explain_hit *hits, int cap, int *n_hits);

#ifdef __cplusplus
}
#endif
#endif

/* attn_nn.h — neural-network layers built on attn_kernels.h. For now: multi-head attention
 * (prefix attn_mha_), forward and backward, for self-attention (encoder: no mask; decoder: causal)
 * and cross-attention (queries from one sequence, keys and values from another), each with
 * optional key padding.
 *
 * The weights are read-only and use PyTorch's nn.Linear layout (out_features, in_features), so a
 * Hugging Face checkpoint's q/k/v/o projections load without transposing. Mutable per-run buffers
 * (the projections and softmax statistics kept for backward) live in an attn_mha_state, so one set
 * of weights serves several runs.
 *
 *   attn_mha_config cfg = attn_mha_default_config(384, 6);          // C = 384, H = 6, D = 64
 *   float *params = attn_alloc(attn_mha_num_params(&cfg) * sizeof(float));
 *   attn_mha_weights w;  attn_mha_weights_view(&cfg, params, &w);   // views into one buffer
 *   attn_mha_state *st;  attn_mha_state_init(&cfg, B, T, T, &st);
 *   attn_mha_mask m = {.causal = true};
 *   attn_mha_forward(&cfg, &w, st, B, T, T, x, NULL, &m, y, NULL);  // decoder self-attention
 *   attn_mha_backward(&cfg, &w, st, B, T, T, x, NULL, &m, dy, dx, NULL, &grads);
 */
#ifndef ATTN_NN_H
#define ATTN_NN_H

#include "attn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int d_model; /* C:   width of the query input x and of the output y */
    int d_kv;    /* Ckv: width of the key/value source (= d_model for self-attention) */
    int n_head;  /* H */
    int d_head;  /* D (H·D need not equal C) */
    bool bias;   /* whether the four projections have biases */
} attn_mha_config;

/* d_kv = d_model, d_head = d_model / n_head, bias = true. */
attn_mha_config attn_mha_default_config(int d_model, int n_head);

/* Validates sizes (positive, H·D and every weight size without overflow). */
attn_status attn_mha_config_check(const attn_mha_config *cfg);

typedef struct {
    float *w_q; /* (H*D, C)   */
    float *b_q; /* (H*D)      NULL without bias */
    float *w_k; /* (H*D, Ckv) */
    float *b_k; /* (H*D)      */
    float *w_v; /* (H*D, Ckv) */
    float *b_v; /* (H*D)      */
    float *w_o; /* (C, H*D)   */
    float *b_o; /* (C)        */
} attn_mha_weights; /* also the layout of the gradients */

/* Number of floats of all weights (and biases) of one layer. */
size_t attn_mha_num_params(const attn_mha_config *cfg);

/* Point w's fields into buf (attn_mha_num_params floats) in the order w_q, w_k, w_v, b_q, b_k, b_v,
 * w_o, b_o. With this layout, when d_kv == d_model, W_Q, W_K, W_V form one (3·H·D, C) matrix and
 * self-attention uses a single fused QKV projection. */
attn_status attn_mha_weights_view(const attn_mha_config *cfg, float *buf, attn_mha_weights *w);

typedef struct {
    bool causal;           /* decoder self-attention: query i sees keys j <= i + causal_offset */
    int causal_offset;     /* 0 for plain self-attention; Tk − Tq when queries are the last Tq */
    const int32_t *kv_len; /* (B) key padding: keys t >= kv_len[b] are ignored; NULL = none */
} attn_mha_mask;

typedef struct attn_mha_state attn_mha_state;

/* Buffers for batches of up to B sequences of up to Tq queries and Tk keys. */
attn_status attn_mha_state_init(const attn_mha_config *cfg, int B, int Tq, int Tk,
                                attn_mha_state **out);
void attn_mha_state_free(attn_mha_state *st);

/* y (B, Tq, C) = W_O · attention(x W_Qᵀ, kv W_Kᵀ, kv W_Vᵀ) with biases.
 *   x  (B, Tq, C)
 *   kv (B, Tk, Ckv) the key/value source, or NULL for self-attention (then Tk must equal Tq and
 *      the keys and values come from x)
 *   mask may be NULL (no mask)
 *   probs (B, H, Tq, Tk) or NULL: the attention weights, on request
 * The state keeps what attn_mha_backward needs; x and kv must be unchanged until then. */
attn_status attn_mha_forward(const attn_mha_config *cfg, const attn_mha_weights *w,
                             attn_mha_state *st, int B, int Tq, int Tk, const float *x,
                             const float *kv, const attn_mha_mask *mask, float *y, float *probs);

/* Gradients of the last attn_mha_forward on st, given dy (B, Tq, C):
 *   dx  (B, Tq, C)   overwritten (for self-attention it includes the key/value paths)
 *   dkv (B, Tk, Ckv) overwritten; must be NULL for self-attention, non-NULL for cross-attention
 *   grads: accumulated into (+=), in the same layout as w (NULL fields skipped when !bias). */
attn_status attn_mha_backward(const attn_mha_config *cfg, const attn_mha_weights *w,
                              attn_mha_state *st, int B, int Tq, int Tk, const float *x,
                              const float *kv, const attn_mha_mask *mask, const float *dy,
                              float *dx, float *dkv, const attn_mha_weights *grads);

#ifdef __cplusplus
}
#endif
#endif

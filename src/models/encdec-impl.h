/* encdec-impl.h — internals shared by the encoder–decoder sources (encdec.c, encdec_dp.c) and
 * the translator (src/infer/translate.c), which decodes with the same sub-layers. */
#ifndef ATTN_ENCDEC_IMPL_H
#define ATTN_ENCDEC_IMPL_H

#include "attn_models.h"
#include "attn_nn.h"
#include "models-impl.h"

/* Dropout sites: 0 the encoder embeddings, 1 the decoder embeddings, then one per sub-layer:
 * encoder layer l's sub-layer k at 2 + 2l + k, decoder layer l's at 2 + 2·nE + 3l + k. */
#define ENCDEC_SITE_ENC_EMB 0u
#define ENCDEC_SITE_DEC_EMB 1u

/* Encoder layer l's two sub-layers, decoder layer l's three, over the views (weights or
 * gradients), residual dropout p. */
void encdec_enc_sublayers(const attn_encdec_model *m, const attn_encdec_enc_layer *W, int l,
                          float p, attn_nn_sublayer S[2]);
void encdec_dec_sublayers(const attn_encdec_model *m, const attn_encdec_dec_layer *W, int l,
                          float p, attn_nn_sublayer S[3]);

/* Views g of a gradient buffer laid out as m's parameters (g->enc, g->dec hold the layers). */
void encdec_layout_grads(const attn_encdec_model *m, float *grads, attn_encdec_weights *g);

/* attn_encdec_loss with d loss / d logits scaled by grad_scale. */
attn_status encdec_loss(const attn_encdec_model *m, attn_encdec_state *st, const int32_t *targets,
                        float label_smoothing, float grad_scale, float *loss);

/* The rows of the state's batch for dropout: sequences row0.. of the whole batch, whose source
 * and target lengths are Ts_global and Tt_global (default: the call's own). */
void encdec_state_set_rows(attn_encdec_state *st, int64_t row0, int Ts_global, int Tt_global);
/* Replica 0's backward reports finished layers through h (mdl_grad_hook; default: none). */
void encdec_state_set_grad_hook(attn_encdec_state *st, const mdl_grad_hook *h);

/* out (N, C) = E_tgt[tokens] · sqrt(C) + P[t]: the decoder's input at position t. */
attn_status encdec_embed_target(const attn_encdec_model *m, int N, const int32_t *tokens, int t,
                                float *out);

/* The decoder's linear maps packed for inference (attn_nn_linear_pack) — per layer the fused
 * self-attention QKV, its output, the cross-attention query and output, the two FFN maps — and
 * the output projection. */
typedef struct {
    attn_gemm_packed_b qkv, so, cq, co, f1, f2;
} encdec_packed_layer;
typedef struct {
    int L;
    encdec_packed_layer *layer; /* [n_dec_layers] */
    attn_gemm_packed_b out;
} encdec_packed_decoder;
attn_status encdec_pack_decoder(const attn_encdec_model *m, encdec_packed_decoder *out);
void encdec_packed_decoder_free(encdec_packed_decoder *p);

/* One incremental decoder step for N hypothesis rows at position t (the translator):
 *   x (N, C): in, the embedded tokens (encdec_embed_target); out, the decoder's output stream
 *   self_kv [L]: each row's self-attention cache (B = N, positions 0 .. t − 1 filled; the step
 *                appends position t)
 *   cross_kv [L]: each sentence's cross-attention keys/values (attn_nn_attention_cross_kv),
 *                S sentences of Ts source positions, src_len (S); row n belongs to sentence n / R
 *   h (N, C), y (N, C), qkv (N, 3C), att (N, C), ff (N, F): scratch
 *   logits (N, Vt): the output projection
 * With packed (may be NULL) the maps read its panels. Numerically the forward's decoder on the
 * same prefix (tests/test_translate.c checks every step). */
typedef struct {
    int N, S, R, t, Ts;
    const int32_t *src_len;
    const attn_nn_kv *self_kv, *cross_kv;
    float *x, *h, *y, *qkv, *att, *ff, *logits;
    const encdec_packed_decoder *packed;
} encdec_step;
attn_status encdec_decoder_step(const attn_encdec_model *m, const encdec_step *s);
/* Decoder layer l's cross-attention keys/values of the encoder output mem (S·Ts, C). */
attn_status encdec_cross_kv(const attn_encdec_model *m, int l, int S, int Ts, const float *mem,
                            const attn_nn_kv *cache);

/* ---- inference precision (encdec_precision.c) ---------------------------------------------- */

/* An INT8 or Q8_0 model's quantized matrices: n of cap, which the views of m->w point into. I8:
 * the i8 layout only (attn_nn_linear.qpacked); Q8_0: the row layout (attn_nn_linear.qw) and the
 * x8 layout (.qpacked). */
struct attn_encdec_quant {
    int n, cap;
    attn_qtype qtype;         /* ATTN_QTYPE_I8 (INT8) or ATTN_QTYPE_Q8_0 */
    void **rows;              /* [cap] (N, K) Q8_0 rows; NULL for I8 */
    attn_quant_packed *packs; /* [cap] the matrices in the x8 or i8 layout */
    attn_nn_linear out;       /* the output projection (logits) */
    size_t bytes;             /* of rows and packs */
};
void encdec_quant_free(attn_encdec_quant *q);

/* The run of m's inference products: its precision's GEMM precision (BF16 or F32) and Q8_0's
 * activation mode; evaluation, no dropout. */
attn_nn_run encdec_run(const attn_encdec_model *m);

/* m->w's views over m->params again (float32 maps: what INT8 replaced is undone). */
void encdec_layout_weights(attn_encdec_model *m);

/* The output projection logits = y · W_outᵀ + b_out of m's weights (the quantized map of an INT8
 * model). */
attn_nn_linear encdec_out_map(const attn_encdec_model *m);

/* config.json of attn's own format or a Hugging Face Marian / M2M100 one (by "model_type"). */
attn_status encdec_config_load_any(const char *path, attn_encdec_config *cfg);
/* transformers' names for a Marian / M2M100 configuration's table (encdec_hf.c); ctx is c, which
 * must outlive the map. */
mdl_name_map encdec_hf_name_map(const attn_encdec_config *c);

/* The parameter table of configuration c (names, shapes, offsets; what attn_encdec_model_init
 * would record) without allocating the parameters. Free *t with attn_free. */
attn_status encdec_table(const attn_encdec_config *c, attn_param_info **t, int *n);

#endif

/* attn_models.h — whole models built from attn_nn.h layers. For now: the original Transformer
 * encoder–decoder of "Attention Is All You Need" (prefix attn_encdec_), forward and backward.
 *
 * The model (read-mostly: weights and their gradients) and the run state (activations kept for
 * backward, sized for a maximum batch) are separate, so one model serves several states (training
 * and evaluation batches of different sizes).
 *
 * All weights live in ONE contiguous float buffer (model->params) with named views into it
 * (model->w); the gradients live in a second buffer (model->grads) with the same layout and views
 * (model->g). An optimizer can therefore treat params/grads as flat arrays, and a checkpoint is the
 * list of named tensors from attn_encdec_tensor_at().
 *
 *   attn_encdec_config cfg = attn_encdec_default_config();
 *   cfg.src_vocab = cfg.tgt_vocab = 8000;
 *   attn_encdec_model *m;   attn_encdec_model_init(&cfg, 42, &m);      // Xavier init, seed 42
 *   attn_encdec_state *st;  attn_encdec_state_init(m, B, Ts, Tt, &st);
 *   attn_encdec_set_train(st, true, 1234, step);                        // dropout on
 *   attn_encdec_forward(m, st, B, Ts, Tt, src, src_len, tgt_in, tgt_len, NULL);
 *   float loss; attn_encdec_loss(m, st, tgt_out, 0.1f, &loss);
 *   attn_encdec_zero_grad(m); attn_encdec_backward(m, st);              // grads in m->grads
 *
 * Architecture (d = d_model, per token):
 *   encoder input  x = dropout(E_src[id] · sqrt(d) + P[t])
 *   encoder layer  post-LN: x = LN(x + dropout(SelfAttn(x)));  x = LN(x + dropout(FFN(x)))
 *                  pre-LN:  x = x + dropout(SelfAttn(LN(x)));  x = x + dropout(FFN(LN(x)))
 *   decoder layer  the same with three sub-layers: causal self-attention, cross-attention over the
 *                  encoder output (queries from the decoder), FFN
 *   pre-LN adds a final LN after the last encoder layer and after the last decoder layer
 *   logits = y · W_outᵀ + b_out, W_out = E_tgt when tie_output
 *   FFN(x) = act(x W1ᵀ + b1) W2ᵀ + b2 with act = ReLU or GELU (erf form, as torch.nn.GELU()).
 * Dropout sits where the paper puts it (each sub-layer output before the residual add, and the
 * embedding + position sums); there is no dropout on attention weights or inside the FFN.
 * Padding: source keys t >= src_len[b] are masked in the encoder self-attention and the decoder
 * cross-attention, target keys t >= tgt_len[b] in the decoder self-attention; loss ignores targets
 * equal to pad_id. */
#ifndef ATTN_MODELS_H
#define ATTN_MODELS_H

#include "attn_core.h"
#include "attn_dist.h"
#include "attn_nn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== the model skeleton: one parameter table for every family ================================
 * Every family keeps all its weights in ONE float buffer (model->params), the gradients in a
 * second buffer of the same layout (model->grads), and describes both with one table of
 * attn_param_info entries in buffer order: names (the family's checkpoint names), shapes,
 * offsets, whether AdamW's weight decay applies, and how the tensor is initialized. Optimizers,
 * checkpoints, loaders and savers work on that table, whatever the family. */

typedef enum {
    ATTN_INIT_ZEROS = 0, /* 0 (biases) */
    ATTN_INIT_ONES,      /* 1 (norm gains) */
    ATTN_INIT_NORMAL,    /* normal(0, init_scale) */
    ATTN_INIT_UNIFORM    /* uniform(−init_scale, init_scale) */
} attn_init_kind;

typedef struct {
    char name[96];       /* e.g. "transformer.h.0.attn.c_attn.weight", "enc.0.ff1.w" */
    int ndim;            /* 1 or 2 */
    int64_t shape[2];    /* shape[1] = 0 when ndim == 1 */
    size_t offset;       /* in floats, into params and grads */
    size_t numel;
    bool decay;          /* a matrix or embedding: AdamW's weight decay applies */
    attn_init_kind init;
    double init_scale;   /* NORMAL: standard deviation; UNIFORM: bound */
    int64_t zero_row;    /* >= 0: that row starts at 0 (BERT's padding embedding); else -1 */
} attn_param_info;

/* Fill params (the buffer the table describes) from seed: tensor i's element k is drawn at word
 * 4k of Philox stream key mix64(mix64(seed) ^ (i + 1)) (attn_rng; normal: attn_rng_normal,
 * uniform: 2·attn_rng_uniform_double − 1 scaled), so the values depend neither on the thread count
 * nor on other tensors. */
void attn_params_init(const attn_param_info *t, int n, float *params, uint64_t seed);
/* The entry called name, or NULL. */
const attn_param_info *attn_params_find(const attn_param_info *t, int n, const char *name);
/* buf (n) = 0, threaded over 64 KB chunks. */
void attn_params_zero(float *buf, size_t n);

typedef enum {
    ATTN_ENCDEC_RELU = 0,
    ATTN_ENCDEC_GELU, /* erf form */
    ATTN_ENCDEC_SILU  /* x · sigmoid(x): transformers' "swish" / "silu" (Marian's opus-mt) */
} attn_encdec_activation;
/* Position encodings added to the (scaled) token embeddings:
 *   SINUSOIDAL            attn's own: PE(t, 2i) = sin(t / 10000^(2i/C)), PE(t, 2i+1) = cos(same)
 *   LEARNED               a learned (max_len, C) table per side
 *   SINUSOIDAL_HALVES     Marian's: the same angles, sin in the first ceil(C/2) columns, cos in
 *                         the rest; position t = 0, 1, ...
 *   SINUSOIDAL_FAIRSEQ    M2M100 / NLLB's (fairseq): angle t · exp(−i · ln(10000) / (C/2 − 1)),
 *                         sin half then cos half (a zero column when C is odd); a token's
 *                         position is pad_id + 1 + (non-pad tokens before it), a pad token's is
 *                         pad_id, whose row is 0 (table rows: max_len + pad_id + 1). */
typedef enum {
    ATTN_ENCDEC_SINUSOIDAL = 0,
    ATTN_ENCDEC_LEARNED,
    ATTN_ENCDEC_SINUSOIDAL_HALVES,
    ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ
} attn_encdec_positions;
/* Whose checkpoint names the parameter table is read and written under (the model is the same
 * composition whatever the names): attn's own (enc.0.self_attn.w_q, ...), transformers'
 * MarianMTModel (model.encoder.layers.0.self_attn.q_proj.weight, final_logits_bias (1, Vt), ...)
 * or M2M100ForConditionalGeneration (NLLB-200, M2M100: the same names without the logits bias,
 * plus model.encoder.layer_norm / model.decoder.layer_norm). */
typedef enum {
    ATTN_ENCDEC_ARCH_ATTN = 0,
    ATTN_ENCDEC_ARCH_MARIAN,
    ATTN_ENCDEC_ARCH_M2M100
} attn_encdec_arch;

typedef struct {
    int src_vocab;     /* Vs */
    int tgt_vocab;     /* Vt */
    int d_model;       /* C */
    int n_head;        /* H, must divide C */
    int d_ff;          /* F, inner width of the feed-forward blocks */
    int n_enc_layers;  /* >= 1 */
    int n_dec_layers;  /* >= 1 */
    int max_len;       /* longest source or target sequence (positions table rows) */
    float dropout;     /* residual/embedding dropout probability in [0, 1) */
    bool share_embeddings; /* one table for source and target (needs src_vocab == tgt_vocab) */
    bool tie_output;   /* output projection weight = target embedding table */
    bool pre_ln;       /* false: post-LN as in the paper; true: pre-LN with final LNs */
    attn_encdec_activation activation;
    attn_encdec_positions positions;
    int pad_id;        /* padding id: ignored by the loss; must be a valid id of both vocabularies */
    float layer_norm_eps;
    bool scale_embedding; /* token embeddings times sqrt(d_model) (true: attn's and the paper's) */
    bool logits_bias;  /* logits = y · W_outᵀ + b_out (true); false: no bias (M2M100's lm_head) */
    attn_encdec_arch arch; /* checkpoint names (attn_encdec_load_dir sets it from config.json) */
} attn_encdec_config;

/* The paper's base model: d_model 512, 8 heads, d_ff 2048, 6 + 6 layers, max_len 256, dropout 0.1,
 * post-LN, ReLU, sinusoidal positions, separate untied embeddings, pad_id 0, eps 1e-5, scaled
 * embeddings, a logits bias, attn's names, and vocabularies of 0 (the caller must set them). */
attn_encdec_config attn_encdec_default_config(void);

/* Validates a configuration: positive sizes, n_head dividing d_model, pad_id in range, equal
 * vocabularies with share_embeddings, dropout in [0, 1), eps > 0. Sizes whose parameter or
 * embedding buffers would exceed ATTN_MAX_BUFFER_BYTES are ATTN_STATUS_TOO_LARGE (nothing is
 * allocated). The message names the offending field. */
attn_status attn_encdec_config_check(const attn_encdec_config *cfg);

/* JSON: an object with the field names above ("activation": "relu"|"gelu", "positions":
 * "sinusoidal"|"learned"). Missing fields keep attn_encdec_default_config()'s values; unknown
 * fields, wrong types and failed checks are errors naming the file and the field. */
attn_status attn_encdec_config_load(const char *path, attn_encdec_config *cfg);
attn_status attn_encdec_config_save(const char *path, const attn_encdec_config *cfg);
/* The same parse without attn_encdec_config_check: a training template whose vocabulary sizes
 * and pad_id come later from the tokenizer (the caller checks the completed configuration). */
attn_status attn_encdec_config_load_template(const char *path, attn_encdec_config *cfg);

/* Number of floats in the parameter buffer (0 if the configuration is invalid). */
size_t attn_encdec_num_params(const attn_encdec_config *cfg);

/* Views of one encoder layer's weights (or gradients), as block-layer pieces (attn_nn.h). */
typedef struct {
    attn_nn_attn self_attn;     /* q, k, v (C, C) nn.Linear adjacent (= one fused (3C, C) QKV),
                                   biases (C) adjacent; o (C, C) + bias */
    attn_nn_norm ln1;           /* (C) LN of the attention sub-layer */
    attn_nn_ffn ffn;            /* up = ff1 (F, C) + bias (F); down = ff2 (C, F) + bias (C) */
    attn_nn_norm ln2;           /* (C) LN of the feed-forward sub-layer */
} attn_encdec_enc_layer;

/* Views of one decoder layer's weights (or gradients). */
typedef struct {
    attn_nn_attn self_attn;     /* causal self-attention, as the encoder's */
    attn_nn_norm ln1;           /* (C) */
    attn_nn_attn cross_attn;    /* q from the decoder; k, v (C, C) adjacent (= one fused (2C, C)
                                   K|V) from the encoder output; o */
    attn_nn_norm ln2;           /* (C) */
    attn_nn_ffn ffn;            /* ff1, ff2 as the encoder's */
    attn_nn_norm ln3;           /* (C) */
} attn_encdec_dec_layer;

/* Named views into the parameter (or gradient) buffer. Aliases: with share_embeddings src_emb ==
 * tgt_emb; with tie_output out_w == tgt_emb (so gradients of both uses add up in one place). */
typedef struct {
    float *src_emb;               /* (Vs, C) */
    float *tgt_emb;               /* (Vt, C) */
    float *enc_pos;               /* (max_len, C) learned positions, NULL for sinusoidal */
    float *dec_pos;               /* (max_len, C) learned positions, NULL for sinusoidal */
    attn_encdec_enc_layer *enc;   /* [n_enc_layers] */
    attn_encdec_dec_layer *dec;   /* [n_dec_layers] */
    attn_nn_norm enc_ln;          /* (C) final encoder LN, pre-LN only (else w NULL) */
    attn_nn_norm dec_ln;          /* (C) final decoder LN, pre-LN only (else w NULL) */
    float *out_w;                 /* (Vt, C) */
    float *out_b;                 /* (Vt)    */
} attn_encdec_weights;

/* One named tensor of the parameter buffer, for checkpoints and tests. Names:
 *   src_emb, tgt_emb (or emb when shared), enc_pos, dec_pos (learned only),
 *   enc.L.self_attn.{w_q,w_k,w_v,b_q,b_k,b_v,w_o,b_o}, enc.L.ln1.{w,b}, enc.L.ff1.{w,b},
 *   enc.L.ff2.{w,b}, enc.L.ln2.{w,b},
 *   dec.L.self_attn.*, dec.L.ln1.*, dec.L.cross_attn.*, dec.L.ln2.*, dec.L.ff1.*, dec.L.ff2.*,
 *   dec.L.ln3.*, enc.ln_f.{w,b}, dec.ln_f.{w,b} (pre-LN only), out.w (untied only), out.b. */
typedef attn_param_info attn_encdec_tensor;

/* ---- inference precision ----------------------------------------------------------------------
 * How the linear maps of a model's forwards (attn_encdec_forward, attn_encdec_encode and the
 * translator's decoder, attn_infer.h) compute. Embeddings, positions, attention, LayerNorm,
 * softmax and the search stay float32 in every mode.
 *   F32   float32 (the default: transformers' numbers).
 *   BF16  the matrix products in bfloat16 (attn_kernels.h's ATTN_PRECISION_BF16: both operands
 *         rounded to bfloat16, exact products, float32 sums; the translator's decoder weights
 *         pre-packed as bfloat16). Needs a CPU with AVX512-BF16, or the ref backend (plain loops,
 *         for tests); elsewhere attn_encdec_set_precision fails with attn_precision_check's
 *         message.
 *   INT8  CTranslate2's int8: every linear map's weight (the encoder's and decoder's attention
 *         projections, with q|k|v and the cross-attention's k|v as one fused matrix each, the
 *         feed-forward maps and the output projection, the largest matrix) quantized at
 *         attn_encdec_set_precision to ATTN_QTYPE_I8 (attn_quant.h: int8 codes with one float32
 *         scale per output row), each product's activations to int8 with one scale per row, the
 *         sums over the whole row in int32 (AVX512-VNNI on CPUs that have it): the scheme of
 *         CTranslate2's int8. The activation mode (act) is not used. A map whose input width is
 *         not a multiple of 4 stays float32.
 *   Q8_0  the same maps quantized to GGUF's Q8_0 (attn_quant.h: one binary16 scale per 32
 *         weights of a row: finer, 6% more bytes) and repacked in the x8 layout; the products
 *         run on attn_quant_gemm_packed. Products of at most 8 rows (decoding: a few hypotheses
 *         per step) read the int8 codes directly, with the activations either rounded to int8
 *         per 32 (ATTN_QUANT_ACT_Q8: integer dot products) or float32 (ATTN_QUANT_ACT_F32);
 *         with ATTN_QUANT_ACT_Q8_ALL on an AVX512-VNNI CPU larger products take the int8 path
 *         too, else they dequantize the weights panel by panel into the float32 GEMM. A map
 *         whose input width is not a multiple of 32 stays float32.
 *   In INT8 and Q8_0 the biases stay float32, and the embedding lookups read the float32 tables
 *   (the output projection's quantized copy is only used for the logits). */
typedef enum {
    ATTN_ENCDEC_PRECISION_F32 = 0,
    ATTN_ENCDEC_PRECISION_BF16,
    ATTN_ENCDEC_PRECISION_INT8,
    ATTN_ENCDEC_PRECISION_Q8_0
} attn_encdec_precision;

/* "f32", "bf16", "int8", "q8_0". */
const char *attn_encdec_precision_name(attn_encdec_precision p);
/* The names above ("fp32", "float32", "bfloat16" too), case-sensitive;
 * ATTN_STATUS_INVALID_ARGUMENT naming the known ones. */
attn_status attn_encdec_precision_parse(const char *name, attn_encdec_precision *out);

/* The quantized weights of an INT8 model (internal). */
typedef struct attn_encdec_quant attn_encdec_quant;

typedef struct {
    attn_encdec_config cfg;
    size_t num_params;
    float *params;          /* (num_params) all weights */
    float *grads;           /* (num_params) same layout; accumulated by attn_encdec_backward */
    attn_encdec_weights w;  /* views into params */
    attn_encdec_weights g;  /* views into grads */
    float *pos_table;       /* (max_len, C) sinusoidal table (not a parameter), NULL if learned */
    attn_nn_attn_cfg attn_cfg[3]; /* encoder self, decoder causal self, decoder cross-attention */
    int n_tensors;
    attn_encdec_tensor *tensors; /* [n_tensors] in buffer order */
    /* Inference precision (attn_encdec_set_precision; F32 after init and load). */
    attn_encdec_precision precision;
    attn_quant_act quant_act;    /* Q8_0: the activation mode of the products */
    attn_encdec_quant *quant;    /* INT8, Q8_0: the quantized weights, else NULL */
} attn_encdec_model;

/* Switch m's forwards to precision p (see above): INT8 and Q8_0 quantize the weights now (the
 * float32 parameters stay as they are: saving, exporting and switching back to F32 use them),
 * Q8_0 with activation mode act (ignored otherwise); BF16 checks that this CPU and backend run it
 * (attn_precision_check). The weight views m->w of the linear maps then carry the quantized
 * weights (attn_nn_linear.qpacked, and .qw for Q8_0): backward refuses them (training needs F32 or BF16). Translation
 * sessions (attn_infer.h) made before the switch keep the old weights: make them after it. A
 * failure leaves m in F32. */
attn_status attn_encdec_set_precision(attn_encdec_model *m, attn_encdec_precision p,
                                      attn_quant_act act);
/* Bytes of the quantized weights an INT8 or Q8_0 model holds (every layout), 0 otherwise. */
size_t attn_encdec_quant_bytes(const attn_encdec_model *m);

/* Allocate a model and initialize it from seed (deterministic, no global RNG):
 *   matrices (attention projections, FFN, untied output): Xavier-uniform, each q/k/v separately
 *   embedding tables and learned positions: uniform with standard deviation 1/sqrt(C) (the
 *     forward multiplies embeddings by sqrt(C), giving unit-variance inputs)
 *   biases 0, LN weights 1, LN biases 0.
 * Gradients start at 0. */
attn_status attn_encdec_model_init(const attn_encdec_config *cfg, uint64_t seed,
                                   attn_encdec_model **out);
void attn_encdec_model_free(attn_encdec_model *m);
/* Re-run the initialization above on an existing model. */
void attn_encdec_init_params(attn_encdec_model *m, uint64_t seed);
void attn_encdec_zero_grad(attn_encdec_model *m);
/* The tensor called name, or NULL. */
const attn_encdec_tensor *attn_encdec_find_tensor(const attn_encdec_model *m, const char *name);

typedef struct attn_encdec_state attn_encdec_state;

/* Activations for batches of up to B sequences, source length up to Ts, target length up to Tt
 * (each <= max_len). TOO_LARGE before allocating when the buffers would be absurd. */
attn_status attn_encdec_state_init(const attn_encdec_model *m, int B, int Ts, int Tt,
                                   attn_encdec_state **out);
void attn_encdec_state_free(attn_encdec_state *st);

/* Training mode turns dropout on (when cfg.dropout > 0) with masks drawn from a counter-based
 * generator keyed by (seed, step, site, element): the same seed and step give the same masks on
 * any thread count, so a resumed run repeats an uninterrupted one. Evaluation mode (the default)
 * and dropout 0 take exactly the no-dropout path. */
void attn_encdec_set_train(attn_encdec_state *st, bool training, uint64_t seed, uint64_t step);

/* Forward pass.
 *   src_ids (B, Ts) ids in [0, Vs); src_len (B) in [1, Ts]
 *   tgt_in  (B, Tt) decoder inputs in [0, Vt); tgt_len (B) in [1, Tt]
 *   logits_out (B, Tt, Vt) or NULL; the logits also stay in the state (attn_encdec_logits).
 * An id out of range is ATTN_STATUS_INVALID_ARGUMENT naming the position and the id. The ids and
 * lengths are copied into the state. */
attn_status attn_encdec_forward(const attn_encdec_model *m, attn_encdec_state *st, int B, int Ts,
                                int Tt, const int32_t *src_ids, const int32_t *src_len,
                                const int32_t *tgt_in, const int32_t *tgt_len, float *logits_out);

/* Attention capture: when set, every following forward (and encode) also writes the attention
 * probabilities of each layer into the caller's buffers, from the fused kernel's second pass (the
 * outputs are unchanged). Each array has one buffer per layer (NULL array or NULL entry: not
 * captured), each (B, H, Tq, Tk) for the batch and lengths of the call, masked entries 0:
 *   enc_self  [n_enc_layers] (B, H, Ts, Ts)  encoder self-attention
 *   dec_self  [n_dec_layers] (B, H, Tt, Tt)  decoder masked self-attention
 *   dec_cross [n_dec_layers] (B, H, Tt, Ts)  cross-attention (queries: target, keys: source)
 * The buffers must stay valid until capture is cleared with attn_encdec_set_capture(st, NULL). */
typedef struct {
    float *const *enc_self;
    float *const *dec_self;
    float *const *dec_cross;
} attn_encdec_capture;
void attn_encdec_set_capture(attn_encdec_state *st, const attn_encdec_capture *cap);

/* Which attention sub-layer of a layer: the encoder's self-attention, the decoder's masked
 * self-attention, the decoder's cross-attention. */
typedef enum {
    ATTN_ENCDEC_ATTN_ENC_SELF = 0,
    ATTN_ENCDEC_ATTN_DEC_SELF,
    ATTN_ENCDEC_ATTN_DEC_CROSS
} attn_encdec_attn_site;
/* Capture the internals of one attention sub-layer (site, layer) (attn_nn.h: its input rows after
 * the norm, q | k | v, the heads' weighted sums, its weights; cross-attention also the encoder
 * output it reads) in the following forwards and encodes into cap (the caller's until
 * attn_nn_attn_capture_free; NULL clears). */
void attn_encdec_set_attn_capture(attn_encdec_state *st, attn_encdec_attn_site site, int layer,
                                  attn_nn_attn_capture *cap);

/* The logits (B, Tt, Vt) of the last forward, or NULL. */
const float *attn_encdec_logits(const attn_encdec_state *st);

/* The encoder alone (inference): enc_out (B, Ts, C) = the encoder output ("memory") that
 * attn_encdec_forward's decoder would attend to for src_ids (B, Ts) with src_len (B) in [1, Ts].
 * The state needs capacity B and Ts (its target capacity is unused). Runs the same code path as
 * attn_encdec_forward, so the result is bit-identical to the forward's memory. */
attn_status attn_encdec_encode(const attn_encdec_model *m, attn_encdec_state *st, int B, int Ts,
                               const int32_t *src_ids, const int32_t *src_len, float *enc_out);

/* Mean cross-entropy of the last forward's logits against targets (B, Tt) (targets == pad_id are
 * ignored), with label smoothing as torch.nn.functional.cross_entropy. Also stores d loss / d
 * logits in the state for attn_encdec_backward. */
attn_status attn_encdec_loss(const attn_encdec_model *m, attn_encdec_state *st,
                             const int32_t *targets, float label_smoothing, float *loss);

/* Gradients of the last attn_encdec_loss with respect to every parameter, accumulated (+=) into
 * m->grads. Needs forward and loss to have run on st since the last backward. */
attn_status attn_encdec_backward(attn_encdec_model *m, attn_encdec_state *st);

/* Model directory: DIR/config.json (attn_encdec_config_save) and DIR/model.safetensors (every
 * tensor of the table, F32, named as attn_encdec_tensor names them; metadata format =
 * "attn-encdec"). Both files are written atomically; DIR is created if absent. */
attn_status attn_encdec_save_dir(const attn_encdec_model *m, const char *dir);
/* Hugging Face translation directories (config.json with transformers' field names and
 * "model_type" "marian" or "m2m_100"): the configuration they describe, or a one-line error
 * naming the file and the field (sizes transformers allows but this model cannot express, such
 * as encoder_ffn_dim != decoder_ffn_dim, are refused the same way). Marian: post-LN, Marian's
 * sinusoidal halves, final_logits_bias, tied output; decoder_vocab_size must equal vocab_size
 * when share_encoder_decoder_embeddings. M2M100: pre-LN with final norms, fairseq positions, no
 * logits bias. Dropouts are read as 0 (inference; attn's dropout sites are not transformers'). */
attn_status attn_encdec_hf_config_load(const char *path, attn_encdec_config *cfg);

/* Export as a Hugging Face translation directory of the architecture that is the same model:
 *   ATTN_ENCDEC_ARCH_MARIAN   MarianMTModel: needs post-LN, positions "sinusoidal" or
 *                             "sinusoidal_halves" (attn's interleaved sin/cos columns are Marian's
 *                             sin half / cos half up to an order of the model's C dimensions: the
 *                             export stores every tensor with its C axis in that order, which
 *                             changes no output), any activation, shared or separate embeddings
 *                             of equal size, tied or untied output; no logits bias is written as
 *                             a zero final_logits_bias.
 *   ATTN_ENCDEC_ARCH_M2M100   M2M100ForConditionalGeneration: needs pre-LN (final norms),
 *                             positions "sinusoidal_fairseq", shared embeddings, and no logits
 *                             bias (or one that is all zero).
 * Both need layer_norm_eps 1e-5 (transformers' LayerNorm) and sinusoidal positions (learned
 * tables are refused). A configuration the architecture cannot express is a one-line error naming
 * the field and what the architecture has. Writes DIR/model.safetensors (transformers' names,
 * F32; the sinusoids are not stored, as transformers does not), DIR/config.json (transformers'
 * fields, dropout as cfg.dropout) and DIR/generation_config.json (decoder start, </s>, padding,
 * forced </s> at the length limit, bad words <pad> and <s> — the tokens attn_translate never
 * generates — max_length = max_len, num_beams); DIR is created if absent. attn_encdec_load_dir
 * reads the directory back as the same model. */
typedef struct {
    attn_encdec_arch arch;      /* MARIAN or M2M100 */
    int32_t bos_id;             /* the tokenizer's <s> (-1: none) */
    int32_t eos_id;             /* </s>: required */
    int32_t decoder_start_id;   /* the decoder's first input (attn's own models: <s>) */
    int num_beams;              /* generation_config.json's num_beams (>= 1) */
} attn_encdec_hf_export;
/* arch, with attn's tokenizer trainer's ids (<s> 2, </s> 3, start <s>) and 4 beams (attn
 * translate's default). */
attn_encdec_hf_export attn_encdec_hf_export_default(attn_encdec_arch arch);
attn_status attn_encdec_save_hf_dir(const attn_encdec_model *m, const char *dir,
                                    const attn_encdec_hf_export *o);

/* Load a model directory written by attn_encdec_save_dir (or by a trainer using the same names),
 * or a Hugging Face MarianMTModel / M2M100ForConditionalGeneration directory (config.json's
 * "model_type" "marian" / "m2m_100": attn_encdec_hf_config_load, the weights through that
 * architecture's names; a directory with only pytorch_model.bin is refused with how to make
 * model.safetensors).
 * Strict: each tensor of the configuration's table must be present with its exact shape (F32,
 * F16, BF16 or F64 data), and a tensor the table does not have is an error naming it; every
 * message names the file and the tensor. Gradients start at 0. */
attn_status attn_encdec_load_dir(const char *dir, attn_encdec_model **out);

/* ---- data-parallel training step -------------------------------------------------------------
 * One training step's forward, loss and backward split over n_replicas threads (data parallelism
 * on one machine, as DDP does across GPUs): the batch's rows are cut into contiguous runs of about
 * equal work (source + target tokens), replica i runs its run (with its own padding trimmed)
 * through its own state with single-threaded kernels into its own gradient buffer, and the
 * gradients are summed into m->grads weighted by each run's share of the counted (non-pad)
 * targets — so the result is the gradient of the whole batch's mean loss, as one forward over the
 * batch gives it (up to float rounding and dropout masks). No synchronization inside the step: on
 * a 2-core machine this beats splitting every kernel over 2 threads.
 * Dropout: replica i uses the masks of seed + i·0x9E3779B97F4A7C15 at the step, so a run is
 * deterministic for a given replica count. n_replicas == 1 is exactly the plain path
 * (attn_encdec_set_train + forward + loss + backward on one state). */
typedef struct attn_encdec_trainer attn_encdec_trainer;
/* Capacity: batches of up to B rows, Ts source and Tt target positions. n_replicas 1..256 (more
 * than B is cut to B). Allocates a gradient buffer and a state per replica. */
attn_status attn_encdec_trainer_init(attn_encdec_model *m, int B, int Ts, int Tt, int n_replicas,
                                     attn_encdec_trainer **out);
void attn_encdec_trainer_free(attn_encdec_trainer *t);
int attn_encdec_trainer_replicas(const attn_encdec_trainer *t);
/* Data parallel across processes (attn_dist.h): every rank passes the same global batch and runs
 * its contiguous run of it (a collective call then), each loss gradient weighed by its share of
 * the global batch's counted targets, so once the caller has summed the gradient buffers over the
 * ranks (attn_dist_allreduce_sum) they are the whole batch's; *loss is the global batch's on every
 * rank. Dropout masks follow the global row numbers, as in one process. NULL or a one-rank d:
 * this process alone (the default). d must outlive the trainer. */
void attn_encdec_trainer_set_dist(attn_encdec_trainer *t, attn_dist *d);
/* With a dist of several ranks and one replica per rank: the backward of the following steps
 * hands each finished layer's gradients to attn_dist_grad_ready, so their sum over the ranks
 * runs while the earlier layers' backward does (the caller calls attn_dist_grad_begin on the
 * model's gradient buffer before the step and attn_dist_grad_finish after it). Only for steps
 * after which the gradients are final (not a micro-batch that more will add to). Default off. */
void attn_encdec_trainer_set_overlap(attn_encdec_trainer *t, bool on);
/* Arguments as attn_encdec_forward + attn_encdec_loss (targets (B, Tt), pad_id ignored); *loss is
 * the batch's mean; the gradients are ADDED to m->grads (zero them first). */
attn_status attn_encdec_train_step(attn_encdec_trainer *t, bool training, uint64_t seed,
                                   uint64_t step, int B, int Ts, int Tt, const int32_t *src_ids,
                                   const int32_t *src_len, const int32_t *tgt_in,
                                   const int32_t *tgt_len, const int32_t *targets,
                                   float label_smoothing, float *loss);

/* The dropout the model applies, exposed for tests: x (n) *= keep / (1 − p), where element i is
 * dropped with probability p as a pure function of (seed, step, site, i). p == 0 leaves x as is. */
void attn_encdec_dropout(uint64_t seed, uint64_t step, uint32_t site, float p, size_t n,
                         float *x);

#ifdef __cplusplus
}
#endif
#endif

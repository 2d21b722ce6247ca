/* attn_gpt.h — decoder-only language models, GPT-2 and its descendants (prefix attn_gpt_): the
 * Llama family (Llama 2 and 3, TinyLlama, SmolLM2), Mistral, Qwen2 and Qwen3, each exactly as its
 * transformers class computes it. One configuration (Hugging Face config.json field names per
 * architecture), seeded initialization, training forward/loss/backward, a KV-cache decoder for
 * generation, and model directories in Hugging Face's own format (config.json + model.safetensors
 * as save_pretrained writes them), so a checkpoint from transformers loads as it is and
 * transformers loads what attn saves. Every architecture is the same composition of the block
 * layer (attn_nn.h); they differ only in which blocks and options they pick and in their tensor
 * names (docs/architecture.md).
 *
 *   attn_gpt_model *m;
 *   if (attn_gpt_load_dir("models/gpt2", &m)) { puts(attn_last_error()); return 1; }
 *   attn_gpt_kv *kv;  attn_gpt_kv_init(m, 1, 256, &kv);               // batch 1, 256 positions
 *   float *logits = malloc(m->cfg.vocab_size * sizeof(float));
 *   attn_gpt_decode(m, kv, 1, n_prompt, prompt_ids, logits, false);    // whole prompt, one pass
 *   for (...) {
 *       int32_t next = argmax(logits);                                 // one token at a time
 *       attn_gpt_decode(m, kv, 1, 1, &next, logits, false);
 *   }
 *
 *   // training (llm.c style: one flat parameter buffer, one flat gradient buffer)
 *   attn_gpt_config cfg = attn_gpt_default_config();  cfg.vocab_size = 65; ...
 *   attn_gpt_model_init(&cfg, seed, &m);                                // params + zeroed grads
 *   attn_gpt_state *st;  attn_gpt_state_init(m, B, T, &st);
 *   attn_gpt_set_train(st, true, dropout_seed, step);
 *   attn_gpt_forward(m, st, B, T, ids, NULL);
 *   float loss;  attn_gpt_loss(m, st, targets, 1.0f, &loss);
 *   attn_gpt_zero_grad(m);  attn_gpt_backward(m, st);                    // grads in m->grads
 *
 * The configuration's fields carry GPT-2's names (n_embd, n_head, n_positions, n_inner,
 * layer_norm_epsilon, activation) for every architecture; config.json uses each architecture's
 * own (hidden_size, num_attention_heads, max_position_embeddings, intermediate_size,
 * rms_norm_eps, hidden_act for the Llama family). The two groups are described below.
 *
 * ==== GPT-2 (model_type "gpt2") ================================================================
 *
 * ---- Architecture (exactly transformers' GPT2LMHeadModel, eval semantics) --------------------
 * C = n_embd, H = n_head, D = C / H, F = n_inner (0 means 4·C), V = vocab_size, P = n_positions,
 * L = n_layer. For token ids[b, t] at position t (0-based; t < P):
 *   x = drop_embd(wte[id] + wpe[t])
 *   for each block l:  x = x + drop_resid(c_proj(attn(ln_1(x))))
 *                      x = x + drop_resid(mlp_c_proj(act(c_fc(ln_2(x)))))
 *   y = ln_f(x);  logits = y · wteᵀ (tie_word_embeddings) or y · lm_headᵀ
 * attn: qkv = ln_1(x) · c_attn.weight (C, 3C) + c_attn.bias; q, k, v are columns [0, C),
 *   [C, 2C), [2C, 3C), each split into H heads of D columns (head h = columns h·D..h·D+D-1);
 *   causal softmax(scale · q kᵀ) v per head, with scale = (scale_attn_weights ? 1/sqrt(D) : 1)
 *   / (scale_attn_by_inverse_layer_idx ? l + 1 : 1). Heads concatenated, then c_proj.
 * The Conv1D weights are stored (in, out) as Hugging Face stores them: y = x · W + b.
 * LayerNorm: biased variance, eps = layer_norm_epsilon. act = activation_function.
 * Dropout (training mode only): embd_pdrop on the embedding sum, resid_pdrop on each residual
 * branch's output (after c_proj, before the add). attn_pdrop (dropout on the attention
 * probabilities) is not supported by the fused attention kernel: training with attn_pdrop > 0 is
 * ATTN_STATUS_UNSUPPORTED; inference ignores it (as PyTorch's eval mode does).
 *
 * ---- Configuration JSON (Hugging Face config.json) -------------------------------------------
 * attn_gpt_config_load reads an object with these fields (missing ones keep GPT2Config's
 * defaults, shown after '='):
 *   "model_type"        must be "gpt2" when present (absent is accepted: a hand-written training
 *                       config); another value is ATTN_STATUS_UNSUPPORTED naming it
 *   "vocab_size" = 50257, "n_positions" = 1024, "n_embd" = 768, "n_layer" = 12, "n_head" = 12
 *                       integers > 0; n_head must divide n_embd
 *   "n_inner" = null    integer > 0, or null / 0 for 4·n_embd
 *   "activation_function" = "gelu_new"   "gelu_new", "gelu_pytorch_tanh", "gelu_fast" (tanh
 *                       form, ATTN_ACT_GELU_TANH), "gelu" (erf form), "relu"; others UNSUPPORTED
 *   "resid_pdrop" = 0.1, "embd_pdrop" = 0.1, "attn_pdrop" = 0.1    numbers in [0, 1)
 *   "layer_norm_epsilon" = 1e-5  (> 0),  "initializer_range" = 0.02  (>= 0)
 *   "tie_word_embeddings" = true
 *   "bos_token_id" = 50256, "eos_token_id" = 50256   integers, or null (stored as -1); not
 *                       range-checked (transformers keeps 50256 for small vocabularies too: an
 *                       id outside [0, vocab_size) never occurs); a list keeps its first id
 *   "scale_attn_weights" = true, "scale_attn_by_inverse_layer_idx" = false,
 *   "reorder_and_upcast_attn" = false   (only changes fp16 numerics in transformers; in float32
 *                       the result is the same, so it is accepted and written back)
 *   "add_cross_attention" must be false when present (UNSUPPORTED otherwise).
 * Every other key (architectures, n_ctx, task_specific_params, _name_or_path, summary_*,
 * transformers_version, use_cache, torch_dtype, pad_token_id, ...) is ignored, as transformers
 * does. A field of the wrong JSON type is ATTN_STATUS_FORMAT naming the file and the field.
 * Sizes are checked before anything is allocated: each of vocab_size, n_positions, n_embd,
 * n_inner above 2^24 (n_layer above 4096, n_head above n_embd), or a total parameter count above
 * ATTN_MAX_BUFFER_BYTES / 4, is ATTN_STATUS_TOO_LARGE with a message naming the field.
 * attn_gpt_config_save writes every field above plus "model_type": "gpt2", "architectures":
 * ["GPT2LMHeadModel"], "n_inner" (null when 0), "use_cache": true, "torch_dtype": "float32":
 * a config transformers' AutoConfig / GPT2LMHeadModel.from_pretrained loads.
 *
 * ---- Tensors (names as GPT2LMHeadModel.save_pretrained writes them) ----------------------------
 *   transformer.wte.weight            (V, C)      decay
 *   transformer.wpe.weight            (P, C)      decay
 *   transformer.h.{l}.ln_1.weight     (C)         ln_1.bias (C)
 *   transformer.h.{l}.attn.c_attn.weight (C, 3C)  decay;  .attn.c_attn.bias (3C)
 *   transformer.h.{l}.attn.c_proj.weight (C, C)   decay;  .attn.c_proj.bias (C)
 *   transformer.h.{l}.ln_2.weight     (C)         ln_2.bias (C)
 *   transformer.h.{l}.mlp.c_fc.weight (C, F)      decay;  .mlp.c_fc.bias (F)
 *   transformer.h.{l}.mlp.c_proj.weight (F, C)    decay;  .mlp.c_proj.bias (C)
 *   transformer.ln_f.weight (C), transformer.ln_f.bias (C)
 *   lm_head.weight                    (V, C)      decay; only when !tie_word_embeddings
 * This is also the order of the parameter buffer and of attn_gpt_model.tensors. "decay" marks the
 * 2-D tensors (nanoGPT puts weight decay on those and not on biases or LayerNorm weights).
 *
 * Loading (attn_gpt_load_dir): DIR/config.json + DIR/model.safetensors, or a sharded checkpoint
 * DIR/model.safetensors.index.json ({"weight_map": {tensor: shard file}}). Names with or without
 * the "transformer." prefix (files written by GPT2Model) are accepted; the non-parameter buffers
 * of older checkpoints (h.{l}.attn.bias, h.{l}.attn.masked_bias) are ignored, and so is a stored
 * lm_head.weight when the embeddings are tied. F32, F16, BF16 and F64 data are converted to
 * float32. Strict otherwise: a missing tensor, a wrong shape or a tensor the configuration does
 * not have is ATTN_STATUS_FORMAT naming the file, the tensor and the expected shape. A directory
 * with only pytorch_model.bin is ATTN_STATUS_UNSUPPORTED (attn reads safetensors only: re-save
 * with save_pretrained(DIR, safe_serialization=True)).
 * Saving (attn_gpt_save_dir): DIR/model.safetensors (F32, the names above with the
 * "transformer." prefix, metadata {"format": "pt"} as transformers requires) and then
 * DIR/config.json, each written atomically; DIR is created if absent; other files in DIR
 * (tokenizer.json, ...) are left alone.
 *
 * ==== The Llama family (model_type "llama", "mistral", "qwen2", "qwen3") =======================
 *
 * ---- Architecture (exactly transformers' LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
 * Qwen3ForCausalLM, eval semantics) ------------------------------------------------------------
 * C = hidden_size, H = num_attention_heads, H_kv = num_key_value_heads (divides H), D = head_dim
 * (default C / H; H·D need not equal C), F = intermediate_size. For token ids[b, t] at position t:
 *   x = embed_tokens[id]
 *   for each layer l:  x = x + o_proj(attn(input_layernorm(x)))
 *                      x = x + down_proj(act(gate_proj(n)) ⊙ up_proj(n)),  n = post_attention_layernorm(x)
 *   logits = norm(x) · lm_headᵀ  (lm_head = embed_tokens when tie_word_embeddings)
 * Norms are RMSNorm (x · rsqrt(mean(x²) + rms_norm_eps) · w). attn: q = q_proj(h) (H·D), k =
 * k_proj(h), v = v_proj(h) (H_kv·D each); Qwen3 first RMS-normalizes every head of q and k over its
 * D dims (q_norm, k_norm); then rotary embeddings on q and k (rotate_half pairs (i, i + D/2),
 * inv_freq[i] = 1 / rope_theta^(2i / D), scaled per rope_scaling); causal softmax(q kᵀ / sqrt(D))
 * v with query head h reading key/value head h / (H / H_kv); a sliding window (below) hides keys
 * more than window − 1 positions back. act = hidden_act (silu for every released model).
 * Biases: Qwen2 has them on q/k/v (never o); Llama and Qwen3 on q/k/v/o when attention_bias; Llama
 * on gate/up/down when mlp_bias; Mistral never. Dropout: attention_dropout acts on attention
 * probabilities (training needs 0, as attn_pdrop for GPT-2; it is stored in attn_pdrop); there is
 * no residual or embedding dropout (resid_pdrop = embd_pdrop = 0).
 *
 * ---- Configuration JSON ---------------------------------------------------------------------
 * Fields (missing ones take the defaults of the architecture's transformers config class, given as
 * llama / mistral / qwen2 / qwen3 where they differ):
 *   "vocab_size" = 32000/32000/151936/151936, "hidden_size" = 4096, "intermediate_size" =
 *   11008/14336/22016/22016, "num_hidden_layers" = 32, "num_attention_heads" = 32,
 *   "num_key_value_heads" = num_attention_heads/8/32/32 (null: = num_attention_heads),
 *   "head_dim" = null (C / H; qwen3: 128; qwen2 has none: C / H), "max_position_embeddings" =
 *   2048/131072/32768/32768, "rms_norm_eps" = 1e-6, "initializer_range" = 0.02,
 *   "tie_word_embeddings" = false, "rope_theta" = 10000 (qwen3 1000000 is NOT its class default:
 *   10000), "attention_dropout" = 0, "hidden_act" = "silu" (ACT2FN names: silu/swish, gelu, relu,
 *   gelu_pytorch_tanh ...), "bos_token_id" = 1/1/null/null, "eos_token_id" = 2/2/null/null (an id
 *   or a list of ids: every id in it ends generation: eos_token_id, more_eos_token_ids),
 *   "attention_bias" (llama, qwen3) = false, "mlp_bias" (llama) = false,
 *   "rope_scaling" = null or {"rope_type" (or "type"): "default" | "linear" | "llama3", "factor":
 *   X > 0, and for llama3 "low_freq_factor", "high_freq_factor" (> low), 
 *   "original_max_position_embeddings"}; other types (dynamic, yarn, longrope, ...) are
 *   ATTN_STATUS_UNSUPPORTED naming the type,
 *   "sliding_window" (mistral: every layer; null or absent: none) = 4096 for mistral,
 *   "use_sliding_window" = false, "sliding_window" = 4096, "max_window_layers" = 28 (qwen2,
 *   qwen3: layers l >= max_window_layers use the window when use_sliding_window — the intended
 *   semantics of those fields; transformers 4.49's eager Qwen2 path applies the window to every
 *   layer whenever sliding_window is set, which only shows beyond 4096 positions).
 * "pretraining_tp", "use_cache", "torch_dtype", "pad_token_id", "architectures", "_name_or_path",
 * "transformers_version" and other keys are ignored. Errors name the file and the field: sizes as
 * for GPT-2, num_key_value_heads not dividing num_attention_heads, an odd head_dim, an unknown
 * rope_scaling type or a missing llama3 field, a window < 1.
 * attn_gpt_config_save writes the architecture's class name ("LlamaForCausalLM", ...), its
 * model_type and every field above (torch_dtype "float32"), which transformers loads.
 *
 * ---- Tensors (names as save_pretrained writes them; the buffer's order) ----------------------
 *   model.embed_tokens.weight                   (V, C)
 *   model.layers.{l}.input_layernorm.weight     (C)
 *   model.layers.{l}.self_attn.q_proj.weight    (H·D, C)     .bias (H·D) with q/k/v biases
 *   model.layers.{l}.self_attn.k_proj.weight    (H_kv·D, C)  .bias (H_kv·D)
 *   model.layers.{l}.self_attn.v_proj.weight    (H_kv·D, C)  .bias (H_kv·D)
 *   model.layers.{l}.self_attn.q_norm.weight    (D)          qwen3 only; also k_norm (D)
 *   model.layers.{l}.self_attn.o_proj.weight    (C, H·D)     .bias (C) with attention_bias
 *   model.layers.{l}.post_attention_layernorm.weight (C)
 *   model.layers.{l}.mlp.gate_proj.weight       (F, C)       then up_proj (F, C), down_proj
 *                                                            (C, F); .bias with mlp_bias
 *   model.norm.weight                           (C)
 *   lm_head.weight                              (V, C)       only when not tied
 * (q, k, v adjacent, and gate before up, so one GEMM computes each group.) 2-D tensors have weight
 * decay. Old checkpoints' "model.layers.{l}.self_attn.rotary_emb.inv_freq" buffers are ignored, and
 * so is lm_head.weight of a tied model.
 *
 * ---- Ownership and threads --------------------------------------------------------------------
 * The model is read-only during forward and decode; one model may serve several states and KV
 * caches (each used by one thread at a time). The kernels use attn_get_num_threads() threads.
 * States and caches must be freed before their model. Every function validates its arguments and
 * returns a status with a one-line attn_last_error(); nothing prints or exits. */
#ifndef ATTN_GPT_H
#define ATTN_GPT_H

#include "attn_core.h"
#include "attn_dist.h"
#include "attn_gguf.h"
#include "attn_kernels.h"
#include "attn_models.h"
#include "attn_nn.h"
#include "attn_quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== configuration ========================================================================== */

/* The architecture (config.json's model_type). */
typedef enum {
    ATTN_GPT_ARCH_GPT2 = 0, /* "gpt2":    GPT2LMHeadModel */
    ATTN_GPT_ARCH_LLAMA,    /* "llama":   LlamaForCausalLM (Llama 2/3, TinyLlama, SmolLM2) */
    ATTN_GPT_ARCH_MISTRAL,  /* "mistral": MistralForCausalLM (sliding window) */
    ATTN_GPT_ARCH_QWEN2,    /* "qwen2":   Qwen2ForCausalLM (q/k/v biases) */
    ATTN_GPT_ARCH_QWEN3     /* "qwen3":   Qwen3ForCausalLM (q/k norms) */
} attn_gpt_arch;

/* "gpt2", "llama", "mistral", "qwen2", "qwen3"; NULL for an unknown value. */
const char *attn_gpt_arch_name(attn_gpt_arch arch);

/* rope_scaling (transformers' ROPE_INIT_FUNCTIONS of the same names). */
typedef enum {
    ATTN_GPT_ROPE_DEFAULT = 0, /* inv_freq[i] = 1 / theta^(2i / D) */
    ATTN_GPT_ROPE_LINEAR,      /* inv_freq / factor (position interpolation) */
    ATTN_GPT_ROPE_LLAMA3       /* Llama 3.1's: low frequencies / factor, high ones kept, smoothed
                                  in between (low_freq_factor, high_freq_factor,
                                  original_max_position_embeddings) */
} attn_gpt_rope_type;

typedef struct {
    attn_gpt_rope_type type;
    float factor;                         /* linear, llama3: > 0 */
    float low_freq_factor;                /* llama3 */
    float high_freq_factor;               /* llama3: > low_freq_factor */
    int original_max_position_embeddings; /* llama3: > 0 */
} attn_gpt_rope_scaling;

/* The most end-of-text ids a configuration keeps (config.json's eos_token_id list). */
#define ATTN_GPT_MAX_EOS 8

typedef struct {
    attn_gpt_arch arch;          /* model_type */
    int vocab_size;              /* V */
    int n_positions;             /* P, the longest sequence (context length; Llama family:
                                    max_position_embeddings) */
    int n_embd;                  /* C (hidden_size) */
    int n_layer;                 /* L (num_hidden_layers) */
    int n_head;                  /* H (num_attention_heads); GPT-2: divides C */
    int n_inner;                 /* F, the MLP width (intermediate_size); 0 = 4·C (GPT-2 only; use
                                    attn_gpt_inner()) */
    attn_act activation;         /* GPT-2: ATTN_ACT_GELU_TANH ("gelu_new"), _GELU_ERF ("gelu"),
                                    _RELU; Llama family: hidden_act (ATTN_ACT_SILU) */
    float resid_pdrop;           /* dropout on each residual branch, [0, 1) (GPT-2) */
    float embd_pdrop;            /* dropout on the embedding sum, [0, 1) (GPT-2) */
    float attn_pdrop;            /* dropout on attention probabilities (GPT-2 attn_pdrop, Llama
                                    attention_dropout): training needs 0 */
    float layer_norm_epsilon;    /* > 0 (Llama family: rms_norm_eps) */
    float initializer_range;     /* std of the normal initialization, >= 0 */
    bool tie_word_embeddings;    /* logits use the token embeddings (no lm_head tensor) */
    int bos_token_id;            /* -1 = none (may lie outside [0, V): then it never occurs) */
    int eos_token_id;            /* -1 = none; generation's end-of-text token (the first of the
                                    list when config.json gives several) */
    int n_more_eos;              /* the list's further ids: more_eos_token_ids[0 .. n_more_eos) */
    int more_eos_token_ids[ATTN_GPT_MAX_EOS - 1];
    /* GPT-2 only: */
    bool scale_attn_weights;     /* scores divided by sqrt(D) */
    bool scale_attn_by_inverse_layer_idx; /* scores of block l further divided by l + 1 */
    bool reorder_and_upcast_attn; /* accepted and kept; no effect in float32 */
    /* The Llama family only: */
    int n_kv_head;               /* H_kv (num_key_value_heads), divides H; 0 = H */
    int head_dim;                /* D; 0 = C / H */
    float rope_theta;            /* the rotary base, > 0 */
    attn_gpt_rope_scaling rope_scaling;
    bool attention_bias;         /* biases on q/k/v and o (llama, qwen3) */
    bool mlp_bias;               /* biases on gate/up/down (llama) */
    int sliding_window;          /* > 0: the window (mistral; qwen2/qwen3 with
                                    use_sliding_window); 0: none */
    bool use_sliding_window;     /* qwen2, qwen3: the window applies to layers >=
                                    max_window_layers */
    int max_window_layers;
} attn_gpt_config;

/* GPT2Config's defaults (GPT-2 124M): V 50257, P 1024, C 768, L 12, H 12, n_inner 0, gelu_new,
 * pdrops 0.1, eps 1e-5, initializer_range 0.02, tied, bos = eos = 50256, scale_attn_weights. */
attn_gpt_config attn_gpt_default_config(void);
/* The defaults of an architecture's transformers config class (ATTN_GPT_ARCH_GPT2: the above). */
attn_gpt_config attn_gpt_arch_default_config(attn_gpt_arch arch);

/* Whether the architecture is one of the Llama family (RMSNorm, RoPE, gated FFN, no position
 * table). */
bool attn_gpt_is_llama(const attn_gpt_config *cfg);
/* H_kv and D with their defaults resolved. */
int attn_gpt_kv_heads(const attn_gpt_config *cfg);
int attn_gpt_head_dim(const attn_gpt_config *cfg);
/* Whether id is one of the configuration's end-of-text ids (eos_token_id or the list's others). */
bool attn_gpt_is_eos(const attn_gpt_config *cfg, int32_t id);
/* Whether layer l attends through the sliding window (its size, or 0). */
int attn_gpt_layer_window(const attn_gpt_config *cfg, int layer);
/* The rotary inverse frequencies inv_freq (D / 2) of the configuration, as transformers computes
 * them in float32 (rope_theta, rope_scaling). */
attn_status attn_gpt_rope_inv_freq(const attn_gpt_config *cfg, float *inv_freq);

/* The MLP width F: n_inner, or 4·n_embd when n_inner is 0. */
int attn_gpt_inner(const attn_gpt_config *cfg);

/* Validate: positive sizes, n_head divides n_embd, pdrops in [0, 1), eps > 0, a known
 * activation; TOO_LARGE limits as described above (nothing is allocated). The
 * message names the field. */
attn_status attn_gpt_config_check(const attn_gpt_config *cfg);

/* Load a config.json (format above) and check it. Errors name the file and the field. */
attn_status attn_gpt_config_load(const char *path, attn_gpt_config *cfg);
/* The same from JSON text in memory; name is used in messages (e.g. "<config>"). */
attn_status attn_gpt_config_parse(const char *json_text, const char *name, attn_gpt_config *cfg);
/* Write a Hugging Face config.json atomically (temporary file + rename). */
attn_status attn_gpt_config_save(const char *path, const attn_gpt_config *cfg);
/* "gelu_new", "gelu", "relu" for the activation (the name config.json gets). */
const char *attn_gpt_activation_name(attn_act act);

/* Floats in the parameter buffer (0 if the configuration is invalid). */
size_t attn_gpt_num_params(const attn_gpt_config *cfg);

/* ==== model ================================================================================== */

/* Views of one block's weights (or gradients), as block-layer pieces (attn_nn.h). */
typedef struct {
    attn_nn_norm ln_1;            /* GPT-2 ln_1.{weight,bias} (C); Llama input_layernorm (C) RMS */
    attn_nn_attn attn;            /* GPT-2: qkv = c_attn (C, 3C) Conv1D + bias (3C), o = c_proj
                                     (C, C) + bias (C). Llama: q (H·D, C), k, v (H_kv·D, C), o
                                     (C, H·D), biases per the configuration; Qwen3's q_norm,
                                     k_norm (D) */
    attn_nn_norm ln_2;            /* GPT-2 ln_2 (C); Llama post_attention_layernorm (C) RMS */
    attn_nn_ffn mlp;              /* GPT-2: up = mlp.c_fc (C, F) + bias (F), down = mlp.c_proj
                                     (F, C) + bias (C), act = activation_function. Llama: gated,
                                     gate (F, C), up (F, C), down (C, F), act = hidden_act */
} attn_gpt_block;

/* Named views into the parameter (or gradient) buffer. lm_head == wte when tied (so the gradients
 * of both uses add up in one place). */
typedef struct {
    float *wte;                   /* (V, C) token embeddings (Llama: embed_tokens) */
    float *wpe;                   /* (P, C) position embeddings; NULL for the Llama family */
    attn_gpt_block *h;            /* [n_layer] */
    attn_nn_norm ln_f;            /* (C) (Llama: norm, RMS) */
    float *lm_head;               /* (V, C) */
} attn_gpt_weights;

/* One tensor of the buffer, for checkpoints, optimizers and tests (attn_models.h): its name is
 * the Hugging Face name, e.g. "transformer.h.0.attn.c_attn.weight"; decay on 2-D tensors. */
typedef attn_param_info attn_gpt_tensor;

typedef struct {
    attn_gpt_config cfg;
    size_t num_params;
    float *params;                /* (num_params) all weights, in tensor-table order */
    float *grads;                 /* (num_params) same layout, accumulated by attn_gpt_backward;
                                     NULL after attn_gpt_load_dir until attn_gpt_alloc_grads */
    attn_gpt_weights w;           /* views into params */
    attn_gpt_weights g;           /* views into grads (all NULL while grads is NULL) */
    int n_tensors;
    attn_gpt_tensor *tensors;     /* [n_tensors] in buffer order */
    attn_nn_attn_cfg *attn_cfg;   /* [n_layer] block l's attention: causal, heads, score scale,
                                     rotary tables, window */
    float *rope_cos, *rope_sin;   /* (n_positions, D/2) rotary tables (Llama family), or NULL */
    struct attn_gpt_packed *packed; /* attn_gpt_pack_weights' copy of the weights in the GEMM's
                                       panel layout, or NULL */
    /* A model read from a GGUF file (attn_gpt_load_gguf) keeps the file mapped and computes on
     * its tensors where they lie: params is NULL; the views point into the mapping (float32
     * data), into converted float32 copies (F16, BF16, and any 1-D tensor), or are quantized
     * linear maps (attn_nn_linear.qw). Such a model is for inference only: no gradients, no
     * attn_gpt_save_dir. Quantized token embeddings stay quantized too: */
    const void *wte_q;            /* (V, C) the token embeddings of type wte_qtype (w.wte NULL),
                                     a row dequantized per lookup; or NULL */
    attn_qtype wte_qtype;
    const void *lm_head_q;        /* (V, C) the output head of type lm_head_qtype (w.lm_head
                                     NULL; the same rows as wte_q when tied), or NULL */
    attn_qtype lm_head_qtype;
    const attn_quant_packed *lm_head_qp; /* lm_head_q in the x8 layout (attn_quant_pack), or NULL */
    const attn_quant_packed *wte_qp;     /* wte_q in the x8 layout (when tied: the head's), or
                                            NULL; lookups read it, not the mapping */
    const attn_quant_packed *qkv_qp;     /* [n_layer] Llama family: layer l's q, k and v packs
                                            fused into one (H·D + 2·H_kv·D, C) matrix (zeroed
                                            where they could not be), which decoding multiplies
                                            once; or NULL */
    struct attn_gpt_file *file;   /* the GGUF file and the model's converted tensors, or NULL */
} attn_gpt_model;

/* Allocate a model (parameters and zeroed gradients) initialized from seed as GPT-2 / nanoGPT
 * do: every weight matrix and both embeddings normal(0, initializer_range); the two c_proj
 * weights of each block normal(0, initializer_range / sqrt(2·n_layer)); biases 0; LayerNorm
 * weights 1 and biases 0. Deterministic for a seed on any thread count (Philox, attn_rng). */
attn_status attn_gpt_model_init(const attn_gpt_config *cfg, uint64_t seed, attn_gpt_model **out);
void attn_gpt_model_free(attn_gpt_model *m);
/* Re-run the initialization on an existing model. */
void attn_gpt_init_params(attn_gpt_model *m, uint64_t seed);
/* Give a loaded model its gradient buffer (zeroed); no-op when it has one. */
attn_status attn_gpt_alloc_grads(attn_gpt_model *m);
void attn_gpt_zero_grad(attn_gpt_model *m);
/* The tensor called name (with or without the "transformer." prefix), or NULL. */
const attn_gpt_tensor *attn_gpt_find_tensor(const attn_gpt_model *m, const char *name);

/* Inference speed-up: pack every layer's weight matrices as decoding multiplies them (GPT-2:
 * c_attn, attn.c_proj, c_fc, mlp.c_proj; the Llama family: q|k|v as one map, o_proj, gate|up as
 * one map, down_proj) once into the GEMM kernel's panel layout (attn_gemm_pack_b), so that an
 * attn_gpt_decode pass over more than 8 positions in all (a prompt) skips packing each weight
 * again: its products then cost the arithmetic alone. Single-token steps (up to 8 rows) keep
 * streaming the weights in their own layout, which is faster there. Costs a second copy of the
 * layers' weights (about the model's size in float32 less the embeddings: 0.42 GB for
 * SmolLM2-135M, 3.9 GB for a 1.1B model). Results are bit-identical to the unpacked ones (the
 * panels are what the GEMM packs per call). attn_gpt_forward, training and the backward never
 * use the copy. After changing m->params
 * (training, attn_gpt_init_params, editing weights) call attn_gpt_pack_weights again or
 * attn_gpt_unpack_weights, else decoding would use the old weights. Packing again also follows
 * a change of backend (attn_set_backend); a decode under another backend runs unpacked. */
attn_status attn_gpt_pack_weights(attn_gpt_model *m);
/* Drop the packed copy (no-op when there is none). attn_gpt_model_free does it too. */
void attn_gpt_unpack_weights(attn_gpt_model *m);

/* Model directories, as described above. save_dir refuses a model read from a GGUF file. */
attn_status attn_gpt_load_dir(const char *dir, attn_gpt_model **out);
attn_status attn_gpt_save_dir(const attn_gpt_model *m, const char *dir);

/* ---- GGUF files (llama.cpp's format; docs/gguf.md) ----------------------------------------------
 * general.architecture "llama", "qwen2", "qwen3" (the Llama family) or "gpt2", with
 *   ARCH.block_count, .embedding_length, .feed_forward_length, .context_length (n_positions),
 *   .attention.head_count                          required integers;
 *   .attention.head_count_kv (= head_count), .attention.key_length (= value_length; head_dim,
 *   default embedding_length / head_count), .rope.dimension_count (must equal head_dim),
 *   .rope.freq_base (10000), .rope.scaling.type none | linear with .rope.scaling.factor (or the
 *   older .rope.scale_linear), .vocab_size (default: token_embd's rows)   optional;
 *   .attention.layer_norm_rms_epsilon (Llama family) / .attention.layer_norm_epsilon (gpt2)
 *                                                  required;
 *   tokenizer.ggml.bos_token_id, eos_token_id, eot_token_id (a second end-of-text id).
 * Tensors under llama.cpp's names: token_embd, (gpt2: position_embd,) blk.N.attn_norm,
 * attn_q / attn_k / attn_v / attn_output (gpt2: attn_qkv, attn_output), attn_q_norm / attn_k_norm
 * (qwen3), ffn_norm, ffn_gate / ffn_up / ffn_down (gpt2: ffn_up, ffn_down), output_norm, output
 * (absent: tied to token_embd); .bias where the architecture has them (qwen2's q/k/v; llama and
 * qwen3 with attention biases when blk.0.attn_q.bias exists, llama's MLP biases with
 * blk.0.ffn_gate.bias; every gpt2 bias); rope_freqs (per-frequency divisors) optional. Each
 * with the shape the hyperparameters give (GGUF's (out, in) matrices; gpt2's Conv1D weights
 * transposed as convert_hf_to_gguf.py writes them). A missing key or tensor, a wrong shape or
 * type, a tensor the model does not have, an inconsistent head count is a one-line error naming
 * the file and the key or tensor. The llama architecture's q/k rows, permuted by the converter for
 * llama.cpp's rotation of adjacent pairs, are used as they are with interleaved rotary pairs
 * (ATTN_ROPE_INTERLEAVED): the same attention as transformers' on the original weights.
 * F32 tensors are used in place in the mapping, F16 / BF16 converted to float32, quantized
 * matrices (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) kept quantized (attn_quant.h's
 * products; embeddings dequantized a row per lookup). The model is for inference (forward,
 * decode, capture): gradients and save_dir are refused. */
attn_status attn_gpt_load_gguf(const char *path, attn_gpt_model **out);
/* The same from an open file (mapped or in memory). On success the model owns g
 * (attn_gpt_model_free closes it); on failure g is still the caller's. */
attn_status attn_gpt_from_gguf(attn_gguf *g, attn_gpt_model **out);
/* path names a file (attn_gpt_load_gguf) rather than a directory (attn_gpt_load_dir). */
bool attn_gpt_is_gguf_path(const char *path);
attn_status attn_gpt_load(const char *path, attn_gpt_model **out);

/* ==== capture (hidden states, attention probabilities) ======================================= */

/* Optional outputs of a forward (or decode) for a batch of B sequences and T positions (for a
 * decode: T = n_new and Tk = the cache length after the call; for a forward Tk = T):
 *   hidden      (L + 1, B, T, C): exactly Hugging Face's output_hidden_states — entry l < L is
 *               block l's input (entry 0 the embedding sum), entry L is ln_f of the last block's
 *               output — or NULL.
 *   attn_probs  [L] array of per-layer buffers (B, H, T, Tk), causal-masked entries 0; the array
 *               or any entry may be NULL (not captured).
 * The buffers must stay valid until the capture is cleared with set_capture(..., NULL). */
typedef struct {
    float *hidden;
    float *const *attn_probs;
} attn_gpt_capture;

/* ==== training: forward, loss, backward ====================================================== */

/* Targets equal to this are ignored by attn_gpt_loss (nanoGPT's convention). */
#define ATTN_GPT_IGNORE_INDEX (-1)

typedef struct attn_gpt_state attn_gpt_state;

/* Activations for batches of up to B sequences of up to T positions (T <= n_positions).
 * TOO_LARGE before allocating when the buffers would be absurd. */
attn_status attn_gpt_state_init(const attn_gpt_model *m, int B, int T, attn_gpt_state **out);
void attn_gpt_state_free(attn_gpt_state *st);
/* The precision of every matrix product of this state's forward and backward (attn_kernels.h):
 * ATTN_PRECISION_F32 (the default: PyTorch's float32 numbers) or ATTN_PRECISION_BF16 (opt-in
 * mixed precision, as PyTorch's CPU autocast to bfloat16: each product's operands rounded to
 * bfloat16, float32 sums and results; weights, gradients, optimizer state and everything else
 * stay float32). ATTN_STATUS_UNSUPPORTED where attn_precision_available is false. */
attn_status attn_gpt_state_set_precision(attn_gpt_state *st, attn_precision precision);

/* Training mode turns dropout on (embd_pdrop, resid_pdrop > 0) with masks that are a pure
 * function of (seed, step, site, element) — attn_encdec_dropout's generator, with site 0 the
 * embeddings and sites 1 + 2l, 2 + 2l the attention and MLP branches of block l — so the same
 * seed and step give the same masks on any thread count and a resumed run repeats an
 * uninterrupted one. Evaluation mode (the default) takes exactly the no-dropout path. */
void attn_gpt_set_train(attn_gpt_state *st, bool training, uint64_t seed, uint64_t step);

/* Capture for the following forwards (NULL clears); shapes as attn_gpt_capture, B and T of
 * each call. */
void attn_gpt_set_capture(attn_gpt_state *st, const attn_gpt_capture *cap);
/* Capture block `layer`'s attention internals (attn_nn.h: its input rows after ln_1, q | k | v
 * after RoPE, the heads' weighted sums, the block's weights) in the following forwards into cap
 * (the caller's until attn_nn_attn_capture_free; NULL clears). Forwards only, not decoding. */
void attn_gpt_set_attn_capture(attn_gpt_state *st, int layer, attn_nn_attn_capture *cap);

/* Forward pass: ids (B, T) in [0, V), 1 <= B, T within the state's capacity. logits_out (B, T, V)
 * or NULL; the logits also stay in the state (attn_gpt_logits) until attn_gpt_loss. An id out of
 * range is ATTN_STATUS_INVALID_ARGUMENT naming the position and the id; training mode with
 * attn_pdrop > 0 is ATTN_STATUS_UNSUPPORTED. */
attn_status attn_gpt_forward(const attn_gpt_model *m, attn_gpt_state *st, int B, int T,
                             const int32_t *ids, float *logits_out);

/* The logits (B, T, V) of the last forward, or NULL (none yet, or consumed by attn_gpt_loss). */
const float *attn_gpt_logits(const attn_gpt_state *st);

/* Mean cross-entropy of the last forward's logits against targets (B, T) (entries equal to
 * ATTN_GPT_IGNORE_INDEX count for nothing; others must be in [0, V)), as
 * F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1). The gradient
 * d(grad_scale · loss)/d logits replaces the logits in the state for attn_gpt_backward:
 * grad_scale is 1 for a plain step, 1/n when n micro-batches accumulate into one step. */
attn_status attn_gpt_loss(const attn_gpt_model *m, attn_gpt_state *st, const int32_t *targets,
                          float grad_scale, float *loss);

/* Gradients of the last attn_gpt_loss with respect to every parameter, accumulated (+=) into
 * m->grads (which must exist: attn_gpt_model_init, or attn_gpt_alloc_grads after a load). Needs
 * forward and loss on st since the last backward. */
attn_status attn_gpt_backward(attn_gpt_model *m, attn_gpt_state *st);

/* The dropout the model applies, exposed for tests and twins: x (n) *= keep / (1 − p), element i
 * dropped with probability p as a pure function of (seed, step, site, i); identical to
 * attn_encdec_dropout. */
void attn_gpt_dropout(uint64_t seed, uint64_t step, uint32_t site, float p, size_t n, float *x);

/* ==== data-parallel training step ============================================================ */

/* One micro-batch's forward, loss and backward split over n_replicas threads (data parallelism on
 * one machine, as DDP does across GPUs; attn_encdec_trainer's scheme): the B sequences are cut
 * into n contiguous runs of ceil/floor(B / n) rows, replica i runs its run through its own state
 * with single-threaded kernels (no synchronization inside the step), and the gradients are then
 * summed into m->grads, threaded over chunks of the buffer and in replica order, so a run is
 * deterministic for a given replica count. Replica 0 accumulates straight into m->grads; the
 * others into private buffers. Each replica's loss gradient is scaled by its share of the batch's
 * counted (not ignored) targets, so the result is the gradient of the whole batch's mean loss, as
 * attn_gpt_forward + attn_gpt_loss + attn_gpt_backward over the whole batch give it (equal up to
 * float rounding: tests/test_gpt_dp.c). Dropout: replica i's rows draw the very masks those rows
 * get in the whole-batch run (masks are indexed by the global row), so dropout does not depend on
 * the replica count either. n_replicas == 1 is exactly the plain path on one state. */
typedef struct attn_gpt_trainer attn_gpt_trainer;

/* Capacity: micro-batches of up to B sequences of up to T positions; n_replicas 1..256 (more than
 * B is cut to B). Allocates a state per replica and a gradient buffer per replica but the first;
 * m must have its gradient buffer. The model must outlive the trainer. */
attn_status attn_gpt_trainer_init(attn_gpt_model *m, int B, int T, int n_replicas,
                                  attn_gpt_trainer **out);
void attn_gpt_trainer_free(attn_gpt_trainer *t);
int attn_gpt_trainer_replicas(const attn_gpt_trainer *t);
/* attn_gpt_state_set_precision on every replica's state. */
attn_status attn_gpt_trainer_set_precision(attn_gpt_trainer *t, attn_precision precision);
/* Data parallel across processes (attn_dist.h): every rank passes the same global batch and runs
 * its contiguous run of it (a collective call then), each loss gradient weighed by its share of
 * the global batch's counted targets, so once the caller has summed the gradient buffers over the
 * ranks (attn_dist_allreduce_sum) they are the whole batch's; *loss is the global batch's on every
 * rank. Dropout masks follow the global row numbers, as in one process. NULL or a one-rank d:
 * this process alone (the default). d must outlive the trainer. */
void attn_gpt_trainer_set_dist(attn_gpt_trainer *t, attn_dist *d);
/* With a dist of several ranks and one replica per rank: the backward of the following steps
 * hands each finished layer's gradients to attn_dist_grad_ready, so their sum over the ranks
 * runs while the earlier layers' backward does (the caller calls attn_dist_grad_begin on the
 * model's gradient buffer before the step and attn_dist_grad_finish after it). Only for steps
 * after which the gradients are final (not a micro-batch that more will add to). Default off. */
void attn_gpt_trainer_set_overlap(attn_gpt_trainer *t, bool on);

/* One micro-batch: ids and targets (B, T) as attn_gpt_forward / attn_gpt_loss (targets equal to
 * ATTN_GPT_IGNORE_INDEX ignored). training turns dropout on with (seed, step) as
 * attn_gpt_set_train. *loss is the batch's mean loss; the gradients of grad_scale · loss are ADDED
 * to m->grads (zero them first; grad_scale 1/n for n accumulated micro-batches). */
attn_status attn_gpt_train_step(attn_gpt_trainer *t, bool training, uint64_t seed, uint64_t step,
                                int B, int T, const int32_t *ids, const int32_t *targets,
                                float grad_scale, float *loss);

/* Evaluation only (no dropout, no gradients): *loss is the batch's mean loss, the replicas each
 * running a forward and loss over their rows. */
attn_status attn_gpt_trainer_eval(attn_gpt_trainer *t, int B, int T, const int32_t *ids,
                                  const int32_t *targets, float *loss);

/* ==== inference with a KV cache ============================================================== */

/* The run state of generation: the keys and values of every layer for B sequences of up to max_T
 * positions (one length for all with attn_gpt_decode; each its own with attn_gpt_decode_seq and
 * attn_gpt_decode_ragged), plus scratch for one pass of up to 256 new positions per sequence (a
 * longer prompt runs in several passes, with the same result). Mutable; the model is not. */
typedef struct attn_gpt_kv attn_gpt_kv;

/* 1 <= B, 1 <= max_T <= n_positions. TOO_LARGE before allocating when absurd. */
attn_status attn_gpt_kv_init(const attn_gpt_model *m, int B, int max_T, attn_gpt_kv **out);
/* A cache of n_slots independent sequences (slots) of up to max_T positions each, for
 * attn_gpt_decode_seq and attn_gpt_decode_ragged (a server's requests, each at its own length):
 * the same cache as attn_gpt_kv_init's, with scratch for one pass over one sequence's up to 256
 * positions or one position of every slot (max(n_slots, min(max_T, 256)) rows) rather than
 * n_slots × 256 rows. attn_gpt_decode works on it too (in passes of fewer positions). */
attn_status attn_gpt_kv_init_slots(const attn_gpt_model *m, int n_slots, int max_T,
                                   attn_gpt_kv **out);
void attn_gpt_kv_free(attn_gpt_kv *kv);
/* Forget every cached position (len = 0). */
void attn_gpt_kv_reset(attn_gpt_kv *kv);
/* Keep only the first len positions (0 <= len <= current length); INVALID_ARGUMENT otherwise. */
attn_status attn_gpt_kv_truncate(attn_gpt_kv *kv, int len);
/* Positions cached so far (the position the next token gets). When the sequences have different
 * lengths (attn_gpt_decode_seq / attn_gpt_decode_ragged), the longest; truncate then keeps at most
 * the shortest's. */
int attn_gpt_kv_len(const attn_gpt_kv *kv);
/* Sequence b's own length (0 when b is out of range). */
int attn_gpt_kv_seq_len(const attn_gpt_kv *kv, int b);
/* Keep only the first len positions of sequence b (0 <= len <= its length; 0 frees the slot for
 * a new sequence); INVALID_ARGUMENT otherwise. The other sequences are untouched. */
attn_status attn_gpt_kv_seq_truncate(attn_gpt_kv *kv, int b, int len);
/* Sequence dst, holding p positions, extended to n by copying positions p .. n − 1 of sequence
 * src (p <= n <= src's length, dst != src): a prefix computed once serves another sequence with
 * the same tokens (a server's requests sharing a prompt). The copies are src's keys and values
 * bit for bit, which are what dst would compute: a position's keys and values do not depend on
 * the pass that computed them (tests/test_ragged.c). INVALID_ARGUMENT otherwise. */
attn_status attn_gpt_kv_seq_copy(attn_gpt_kv *kv, int dst, int src, int n);
/* Capacity: batch size and positions. */
int attn_gpt_kv_batch(const attn_gpt_kv *kv);
int attn_gpt_kv_max_len(const attn_gpt_kv *kv);
/* Products on quantized weights (GGUF Q8_0, Q4_K, ...) in the following decodes: with
 * ATTN_QUANT_ACT_F32 (the default) the activations stay float32 — the product with the
 * dequantized weights, what transformers computes on a GGUF file; with ATTN_QUANT_ACT_Q8 the
 * activations of every product, prompts included, are rounded to int8 per 32 for integer dot
 * products, in chunks of 8 rows — llama.cpp's arithmetic, faster, ~1e-3 relative error per
 * product (attn_quant.h). A row's numbers then do not depend on the other rows of its pass:
 * attn_gpt_decode_batch / _ragged give attn_gpt_decode_seq's bits for each sequence. Float
 * weights are not affected. */
void attn_gpt_kv_set_quant_act(attn_gpt_kv *kv, attn_quant_act act);

/* How a cache is made (attn_gpt_kv_init_params):
 *   slots: a server's cache of independent sequences, as attn_gpt_kv_init_slots (its scratch
 *          for attn_gpt_decode_batch; the memory decoding steps read is on huge pages and made
 *          resident at once);
 *   f16:   keys and values rounded to binary16 when stored (round to nearest even), as
 *          llama.cpp's default f16 cache: decoding steps read the binary16 copies, half the
 *          bytes of float32 (a 16-sequence step of SmolLM2 at ~100 positions reads ~37 MB of
 *          keys and values instead of ~74). The results follow the rounded values: every
 *          decode path (attn_gpt_decode_seq, _batch, _ragged, prompts split anywhere) gives the
 *          same bits as with float32 keys and values that held them; against a float32 cache
 *          the logits differ by the rounding (~1e-3 relative). */
typedef struct {
    bool slots;
    bool f16;
} attn_gpt_kv_params;
attn_gpt_kv_params attn_gpt_kv_default_params(void); /* {slots false, f16 false} */
attn_status attn_gpt_kv_init_params(const attn_gpt_model *m, int B, int max_T,
                                    const attn_gpt_kv_params *p, attn_gpt_kv **out);
/* Whether the cache stores binary16 keys and values. */
bool attn_gpt_kv_f16(const attn_gpt_kv *kv);
attn_quant_act attn_gpt_kv_quant_act(const attn_gpt_kv *kv);
/* Capture for the following decodes (NULL clears); T = n_new, Tk = length after the call. */
void attn_gpt_kv_set_capture(attn_gpt_kv *kv, const attn_gpt_capture *cap);

/* Run n_new new positions of each of the B sequences (B must equal the cache's batch size) in one
 * pass, at positions len .. len + n_new − 1 (causal over everything cached), and append their
 * keys and values to the cache. A prompt is one call with n_new = its length; generation then
 * calls with n_new = 1. ids (B, n_new) in [0, V); len + n_new must fit the cache (max_T) —
 * otherwise ATTN_STATUS_INVALID_ARGUMENT and nothing changes.
 *   logits: all == false: (B, V), the last new position of each sequence;
 *           all == true:  (B, n_new, V), every new position;  may be NULL (only fill the cache).
 * Numerically the same as attn_gpt_forward over the whole sequence (eval mode), up to float
 * rounding order. */
attn_status attn_gpt_decode(const attn_gpt_model *m, attn_gpt_kv *kv, int B, int n_new,
                            const int32_t *ids, float *logits, bool all);
/* (attn_gpt_decode needs every sequence at one length: INVALID_ARGUMENT when they differ.) */

/* ---- ragged batches: sequences at their own lengths (continuous batching) ----
 * Sequence b of the cache (0 <= b < B) alone: n_new new positions at its own positions
 * len_b .. len_b + n_new − 1 (len_b = attn_gpt_kv_seq_len), e.g. a new request's prompt, while the
 * other sequences keep theirs. ids (n_new); logits as attn_gpt_decode's for one sequence: (V) or,
 * with all, (n_new, V), or NULL. Exactly attn_gpt_decode of a batch-1 cache holding that
 * sequence (the same passes, bit for bit). Capture is not supported (UNSUPPORTED). */
attn_status attn_gpt_decode_seq(const attn_gpt_model *m, attn_gpt_kv *kv, int b, int n_new,
                                 const int32_t *ids, float *logits, bool all);

/* One new token for each of n distinct sequences seqs[0..n) of the cache (NULL: sequences
 * 0..n − 1), each at its own position len_seqs[i] — one decoding step of several requests in ONE
 * pass: the linear maps and the head run as (n, C) products over the weights (read once for all
 * n rows), attention per sequence over its own cache. ids (n), logits (n, V) (row i for seqs[i]),
 * or NULL. 1 <= n <= B; each sequence must have room for one more position. Numerically each
 * row equals attn_gpt_decode_seq of that sequence alone up to the products' summation order,
 * which may depend on the row count n (tests/test_ragged.c measures it); with int8 activations
 * on quantized weights (attn_gpt_kv_set_quant_act) bit for bit. Capture is not supported
 * (UNSUPPORTED). On failure nothing changes. */
attn_status attn_gpt_decode_ragged(const attn_gpt_model *m, attn_gpt_kv *kv, int n,
                                   const int32_t *seqs, const int32_t *ids, float *logits);
/* The same with counts[i] >= 1 new positions for sequence seqs[i] (counts NULL: one each):
 * ids holds sequence 0's counts[0] ids, then sequence 1's, ... (Σ counts in all, at most the
 * cache's scratch rows: max(B, min(max_T, 256)) for attn_gpt_kv_init_slots), each sequence's at
 * its own positions len .. len + counts[i] − 1 — decoding steps and new prompts (or parts of
 * them) in one pass. logits (n, V): each sequence's last new position. attn_gpt_decode_ragged
 * is this with counts NULL. */
attn_status attn_gpt_decode_batch(const attn_gpt_model *m, attn_gpt_kv *kv, int n,
                                  const int32_t *seqs, const int32_t *counts, const int32_t *ids,
                                  float *logits);

#ifdef __cplusplus
}
#endif
#endif

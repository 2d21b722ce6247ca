/* attn_bert.h — encoder-only BERT models (prefix attn_bert_): Hugging Face BertModel and
 * BertForMaskedLM checkpoints loaded as they are, forward over padded batches, the pooler, sentence
 * embeddings (mean / CLS / max pooling, L2 normalization), masked-LM logits for chosen positions,
 * and masked-LM training (loss and gradients for every parameter).
 *
 *   attn_bert_model *m;  attn_bert_load_dir("models/all-MiniLM-L6-v2", &m);
 *   attn_bert_state *st; attn_bert_state_init(m, 32, 128, &st);      // up to 32 x 128 tokens
 *   attn_bert_forward(m, st, B, T, ids, NULL, lengths, NULL);        // ids (B, T), lengths (B)
 *   float emb[32 * 384];
 *   attn_bert_pool(m, st, ATTN_BERT_POOL_MEAN, true, emb);            // sentence-transformers
 *   ...
 *   attn_bert_set_train(st, true, seed, step);                         // MLM training
 *   attn_bert_forward(m, st, B, T, ids, types, lengths, NULL);
 *   float loss; attn_bert_mlm_loss(m, st, labels, &loss);            // labels (B, T), -100 = skip
 *   attn_bert_zero_grad(m); attn_bert_backward(m, st);               // gradients in m->grads
 *
 * Architecture (exactly transformers' BertModel / BertForMaskedLM; C = hidden_size, per token):
 *   embeddings  x = dropout(LN(word[id] + position[t] + token_type[type]))   t = 0, 1, ...
 *   layer (post-LN, num_hidden_layers times)
 *               a = attention.output.dense(MHA(x))          MHA over the sequence's real tokens
 *               x = LN(x + dropout(a))                        attention.output.LayerNorm
 *               f = output.dense(act(intermediate.dense(x)))
 *               x = LN(x + dropout(f))                        output.LayerNorm
 *   pooler      pooled = tanh(pooler.dense(x[CLS = position 0]))
 *   MLM head    logits = decoder(LN(act(transform.dense(x)))) + cls.predictions.bias, with the
 *               decoder weight = word embeddings when tie_word_embeddings (the default).
 * act is hidden_act. Dropout (training mode only) is hidden_dropout_prob at the three places
 * shown, with masks from the same counter-based generator as attn_encdec_dropout (keyed by seed,
 * step, site and element; site 0 = embeddings, 1 + 2l = layer l's attention output, 2 + 2l =
 * layer l's feed-forward output). attention_probs_dropout_prob is read and saved but NEVER applied
 * (the fused attention kernel has no dropout): it is treated as 0 in training, as documented here.
 *
 * Padding: a batch is (B, T) ids with lengths (B), each in [1, T]: sequence b's real tokens are
 * positions 0 .. lengths[b]-1 (right padding, as HF's tokenizers produce; convert an attention mask
 * with attn_bert_mask_to_lengths). Internally only the real tokens are computed: every dense layer
 * runs on the packed rows of all sequences (sum of lengths rows, not B·T) and attention runs per
 * sequence over its own tokens, so a sequence's results do not depend on which other sequences
 * share its batch or on T, and padding costs nothing. (They are equal up to float rounding: the
 * GEMM kernel takes another code path, with another summation order, for a handful of rows, so
 * a very short sequence alone can differ from the same sequence in a batch by ~1e-7 relative;
 * otherwise bit-identical. With attn_bert_pack_weights, evaluation is bit-identical always.) Outputs in (B, T, .) layout hold 0 in padded rows (HF computes
 * values there from the pad ids; they mean nothing).
 *
 * Weights use HF's nn.Linear layout (out_features, in_features), which is attn_mha's (attn_nn.h):
 * each layer's query, key and value weights are adjacent, forming one fused (3C, C) projection.
 * All weights live in ONE contiguous buffer (model->params) with named views (model->w); the
 * gradients in a second buffer (model->grads) with the same layout (model->g). */
#ifndef ATTN_BERT_H
#define ATTN_BERT_H

#include "attn_core.h"
#include "attn_dist.h"
#include "attn_gguf.h"
#include "attn_kernels.h"
#include "attn_models.h"
#include "attn_nn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The label that attn_bert_mlm_loss ignores (HF / PyTorch's ignore_index). */
#define ATTN_BERT_IGNORE_INDEX (-100)

/* ---- configuration --------------------------------------------------------------------------- */

/* HF BertConfig's fields, with its names. */
typedef struct {
    int vocab_size;              /* V */
    int hidden_size;             /* C */
    int num_hidden_layers;       /* L >= 1 */
    int num_attention_heads;     /* H, must divide C */
    int intermediate_size;       /* F */
    attn_act hidden_act;         /* "gelu" (or "gelu_python") = ATTN_ACT_GELU_ERF; "gelu_new",
                                    "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate" =
                                    ATTN_ACT_GELU_TANH (saved as "gelu_new"); "relu" =
                                    ATTN_ACT_RELU */
    float hidden_dropout_prob;   /* [0, 1): embeddings and sub-layer outputs, training only */
    float attention_probs_dropout_prob; /* [0, 1): kept for the config file, never applied */
    int max_position_embeddings; /* P: longest sequence */
    int type_vocab_size;         /* number of token types (segments) >= 1 */
    float initializer_range;     /* std of the normal initialization */
    float layer_norm_eps;        /* > 0 */
    int pad_token_id;            /* in [0, V), or -1 (config.json null) for none; its word
                                    embedding row starts at 0 in attn_bert_model_init */
    bool tie_word_embeddings;    /* MLM decoder weight = word embeddings (HF default true); false:
                                    a separate (V, C) cls.predictions.decoder.weight */
} attn_bert_config;
/* position_embedding_type: only "absolute" exists here; config.json with another value is
 * ATTN_STATUS_UNSUPPORTED naming it. */

/* BertConfig's defaults (bert-base-uncased): V 30522, C 768, L 12, H 12, F 3072, gelu, dropouts
 * 0.1, P 512, 2 token types, initializer_range 0.02, eps 1e-12, pad 0, tied. */
attn_bert_config attn_bert_default_config(void);

/* Validates a configuration; the message names the field. Sizes whose buffers would be absurd are
 * ATTN_STATUS_TOO_LARGE (before anything is allocated), others ATTN_STATUS_INVALID_ARGUMENT. */
attn_status attn_bert_config_check(const attn_bert_config *cfg);

/* Read HF's config.json. model_type must be "bert" when present. Fields of BertConfig not listed
 * above that do not change the computation (architectures, _name_or_path, transformers_version,
 * use_cache, gradient_checkpointing, classifier_dropout, id2label, torch_dtype, ...) are ignored;
 * every used field is type-checked and the result validated (errors name the file and field).
 * Missing fields take BertConfig's defaults. */
attn_status attn_bert_config_load(const char *path, attn_bert_config *cfg);

/* Write a config.json transformers loads (model_type "bert", every field above, "architectures":
 * [architecture] when architecture is not NULL, e.g. "BertModel" or "BertForMaskedLM"). Atomic. */
attn_status attn_bert_config_save(const char *path, const attn_bert_config *cfg,
                                  const char *architecture);

/* ---- model ----------------------------------------------------------------------------------- */

/* Views of one layer's weights (or gradients), as block-layer pieces (attn_nn.h). */
typedef struct {
    attn_nn_attn attn;       /* q, k, v = attention.self.{query,key,value} (C, C) nn.Linear, adjacent
                                (= one fused (3C, C) matrix), biases (C) adjacent; o =
                                attention.output.dense (C, C) + bias */
    attn_nn_norm attn_ln;    /* (C) attention.output.LayerNorm */
    attn_nn_ffn ffn;         /* up = intermediate.dense (F, C) + bias (F); down = output.dense
                                (C, F) + bias (C); act = hidden_act */
    attn_nn_norm out_ln;     /* (C) output.LayerNorm */
} attn_bert_layer;

/* Named views into the parameter (or gradient) buffer. */
typedef struct {
    float *word_emb;         /* (V, C) embeddings.word_embeddings.weight */
    float *pos_emb;          /* (P, C) embeddings.position_embeddings.weight */
    float *type_emb;         /* (Tv, C) embeddings.token_type_embeddings.weight */
    attn_nn_norm emb_ln;     /* (C) embeddings.LayerNorm */
    attn_bert_layer *layers; /* [L] encoder.layer.{i} */
    attn_nn_linear pooler;   /* pooler.dense (C, C) + bias; w NULL without pooler */
    attn_nn_linear mlm_dense; /* cls.predictions.transform.dense (C, C) + bias; w NULL without head */
    attn_nn_norm mlm_ln;     /* (C) cls.predictions.transform.LayerNorm */
    float *mlm_decoder_w;    /* (V, C) == word_emb when tied (gradients then add up there) */
    float *mlm_bias;         /* (V) cls.predictions.bias */
} attn_bert_weights;

/* One named tensor of the parameter buffer (attn_models.h), with BertModel's names (no "bert."
 * prefix): "embeddings.word_embeddings.weight", ..., "encoder.layer.3.attention.self.query.weight",
 * ..., "pooler.dense.weight", "cls.predictions.transform.dense.weight", "cls.predictions.bias",
 * "cls.predictions.decoder.weight" (untied only). */
typedef attn_param_info attn_bert_tensor;

typedef struct {
    attn_bert_config cfg;
    bool has_pooler;         /* pooler weights present */
    bool has_mlm;            /* masked-LM head present */
    size_t num_params;
    float *params;           /* (num_params) all weights */
    float *grads;            /* (num_params) same layout; accumulated by the backward passes */
    attn_bert_weights w;     /* views into params */
    attn_bert_weights g;     /* views into grads */
    int n_tensors;
    attn_bert_tensor *tensors; /* [n_tensors] in buffer order */
    struct attn_bert_packed *packed; /* attn_bert_pack_weights' copy of the layers' weights in
                                        the GEMM's panel layout, or NULL */
} attn_bert_model;

/* Number of floats of the parameter buffer (0 if the configuration is invalid). */
size_t attn_bert_num_params(const attn_bert_config *cfg, bool with_pooler, bool with_mlm_head);

/* Allocate a model initialized from seed as BertPreTrainedModel._init_weights does: linear
 * weights and embedding tables normal(0, initializer_range), the pad_token_id row of the word
 * embeddings 0, biases 0 (cls.predictions.bias too), LayerNorm weights 1 and biases 0.
 * Deterministic (counter-based generator, no global state). Gradients start at 0. */
attn_status attn_bert_model_init(const attn_bert_config *cfg, uint64_t seed, bool with_pooler,
                                 bool with_mlm_head, attn_bert_model **out);
void attn_bert_model_free(attn_bert_model *m);
/* Re-run the initialization above on an existing model. */
void attn_bert_init_params(attn_bert_model *m, uint64_t seed);
void attn_bert_zero_grad(attn_bert_model *m);
/* The tensor called name (BertModel naming; a "bert." prefix is accepted), or NULL. */
const attn_bert_tensor *attn_bert_find_tensor(const attn_bert_model *m, const char *name);

/* Inference speed-up: pack every layer's four weight matrices (fused QKV, attention output,
 * intermediate, output) once into the GEMM kernel's panel layout (attn_gemm_pack_b), so that
 * evaluation-mode forwards skip the per-call packing (for a sentence or two, that packing is as
 * much work as the product). Results are unchanged: bit-identical to the unpacked forward of a
 * batch of more than 8 tokens in all. Costs a copy of those weights (~4·C·(3C + C + 2F)·L bytes;
 * 42 MB for all-MiniLM-L6-v2). Training-mode forwards never use the copy; after changing
 * m->params (training, attn_bert_init_params, editing weights) call attn_bert_pack_weights
 * again or attn_bert_unpack_weights, else evaluation would use the old weights. Packing again
 * also follows a change of backend (attn_set_backend); a forward under another backend than the
 * packing one simply runs unpacked. */
attn_status attn_bert_pack_weights(attn_bert_model *m);
/* The same with the copy in a chosen precision (attn_kernels.h). ATTN_PRECISION_BF16 (opt-in)
 * stores the weights as bfloat16 (half the memory: 21 MB for all-MiniLM-L6-v2) and rounds each
 * dense layer's input to bfloat16 too, for about twice the dense layers' speed on CPUs with
 * AVX512-BF16; everything else (embeddings, attention, LayerNorm, GELU, sums) stays float32.
 * Its results are not transformers' float32 ones: on all-MiniLM-L6-v2 sentence embeddings the
 * cosine to float32 is >= 0.9999 (tests/test_embed.c states the measured figure).
 * ATTN_STATUS_UNSUPPORTED where attn_precision_available(precision) is false. */
attn_status attn_bert_pack_weights_precision(attn_bert_model *m, attn_precision precision);
/* Drop the packed copy (no-op when there is none). attn_bert_model_free does it too. */
void attn_bert_unpack_weights(attn_bert_model *m);

/* Load a Hugging Face model directory: DIR/config.json (attn_bert_config_load) and
 * DIR/model.safetensors as written by BertModel / BertForMaskedLM / BertForPreTraining
 * .save_pretrained (names with or without the "bert." prefix; old checkpoints' LayerNorm
 * .gamma/.beta accepted). F32, F16, BF16 and F64 tensors are converted to float32.
 *   - The pooler is loaded when pooler.dense.* is present, the MLM head when
 *     cls.predictions.transform.* is; otherwise those parts are absent (has_pooler / has_mlm
 *     false) and asking for them is an error.
 *   - A tied model (tie_word_embeddings) ignores cls.predictions.decoder.weight (the word
 *     embeddings are authoritative, as in HF); cls.predictions.decoder.bias is used only when
 *     cls.predictions.bias is absent.
 *   - Buffers (embeddings.position_ids) and other heads (cls.seq_relationship.*) are ignored; a
 *     layer beyond num_hidden_layers is an error (the file belongs to another configuration).
 * Strict: a missing tensor or a wrong shape is ATTN_STATUS_FORMAT naming the file, the tensor and
 * the expected shape. Only model.safetensors is read (a pytorch_model.bin-only directory is
 * ATTN_STATUS_UNSUPPORTED, saying so). Gradients start at 0. */
attn_status attn_bert_load_dir(const char *dir, attn_bert_model **out);

/* A GGUF file with general.architecture "bert" (convert_hf_to_gguf.py's BertModel):
 * bert.block_count, .embedding_length, .feed_forward_length, .context_length (max_position_embeddings),
 * .attention.head_count, .attention.layer_norm_epsilon; vocab_size and type_vocab_size from the
 * token_embd / token_types tables; hidden_act gelu; tensors token_embd, position_embd,
 * token_types, token_embd_norm, blk.N.attn_q / attn_k / attn_v / attn_output,
 * attn_output_norm, ffn_up, ffn_down, layer_output_norm (.weight and .bias), no pooler or MLM
 * head. Every tensor is converted to float32 into the parameter buffer (F32, F16, BF16 and the
 * quantized types of attn_quant.h: the dequantized model; 4 bytes per weight in memory).
 * Errors as attn_gpt_load_gguf's: one line naming the file and the key or tensor. */
attn_status attn_bert_load_gguf(const char *path, attn_bert_model **out);
attn_status attn_bert_from_gguf(const attn_gguf *g, attn_bert_model **out);
/* A directory (attn_bert_load_dir) or a GGUF file (attn_bert_load_gguf). */
attn_status attn_bert_load(const char *path, attn_bert_model **out);

/* Write DIR/model.safetensors (F32, the names BertModel.save_pretrained writes, or with the MLM
 * head BertForMaskedLM's: "bert."-prefixed encoder, "cls.predictions.*", tied decoder weight not
 * written) and DIR/config.json (architectures ["BertModel"] or ["BertForMaskedLM"]), both atomic;
 * DIR is created if absent. transformers' from_pretrained loads the result. A model with both a
 * pooler and an MLM head saves the pooler as bert.pooler.* (BertForMaskedLM ignores it). */
attn_status attn_bert_save_dir(const attn_bert_model *m, const char *dir);

/* ---- run state ------------------------------------------------------------------------------- */

typedef struct attn_bert_state attn_bert_state;

/* Buffers for batches of up to B sequences of up to T tokens (T <= max_position_embeddings).
 * TOO_LARGE before allocating when the buffers would be absurd. The activations kept for backward
 * are allocated on the first training-mode forward (attn_bert_set_train). One model serves
 * several states; a state serves one thread at a time. */
attn_status attn_bert_state_init(const attn_bert_model *m, int B, int T, attn_bert_state **out);
void attn_bert_state_free(attn_bert_state *st);

/* Training mode: the following forwards keep what backward needs and apply dropout
 * (hidden_dropout_prob > 0) with masks from (seed, step, site, element) — the same seed and step
 * give the same masks on any thread count. Evaluation mode (the default) keeps nothing and takes
 * exactly the no-dropout path. Set model->cfg.hidden_dropout_prob = 0 for deterministic
 * gradients. */
void attn_bert_set_train(attn_bert_state *st, bool training, uint64_t seed, uint64_t step);

/* lengths (B) from an attention mask (B, T) of 1/0 (HF's attention_mask). Only right padding is
 * supported: each row must be 1 ... 1 0 ... 0 with at least one 1; anything else (a 0 before a 1,
 * a value other than 0/1, an all-zero row) is ATTN_STATUS_UNSUPPORTED / INVALID_ARGUMENT naming
 * the row. */
attn_status attn_bert_mask_to_lengths(int B, int T, const int32_t *mask, int32_t *lengths);

/* Forward pass over a padded batch.
 *   ids      (B, T) token ids in [0, V)          (checked on real positions only)
 *   type_ids (B, T) token types in [0, Tv), or NULL = all 0
 *   lengths  (B) in [1, T], or NULL = all T (no padding)
 *   hidden_out (B, T, C) or NULL: the last hidden states (last_hidden_state), padded rows 0
 * B <= the state's B, T <= its T. An id or type out of range, or T > max_position_embeddings, is
 * ATTN_STATUS_INVALID_ARGUMENT naming the position and the value. The results stay in the state
 * for attn_bert_pooler / _pool / _mlm_logits / _mlm_loss / _backward. */
attn_status attn_bert_forward(const attn_bert_model *m, attn_bert_state *st, int B, int T,
                              const int32_t *ids, const int32_t *type_ids, const int32_t *lengths,
                              float *hidden_out);

/* Capture: when set, every following forward also writes, for the batch and T of the call
 * (padded rows / masked entries 0):
 *   hidden [L + 1]  (B, T, C) HF's hidden_states: the embeddings output, then each layer's output
 *   probs  [L]      (B, H, T, T) each layer's attention probabilities (HF's attentions)
 * A NULL array or NULL entry is not captured. The buffers must stay valid until capture is cleared
 * with attn_bert_set_capture(st, NULL). Outputs other than these are unchanged by capturing. */
typedef struct {
    float *const *hidden;
    float *const *probs;
} attn_bert_capture;
void attn_bert_set_capture(attn_bert_state *st, const attn_bert_capture *cap);
/* Capture layer `layer`'s attention internals (attn_nn.h: its input rows, q | k | v, the heads'
 * weighted sums, the layer's weights) in the following forwards into cap (the caller's until
 * attn_nn_attn_capture_free; NULL clears). The rows are the packed real tokens of the batch
 * (batch 1 without padding: the T tokens). */
void attn_bert_set_attn_capture(attn_bert_state *st, int layer, attn_nn_attn_capture *cap);

/* pooled (B, C) = tanh(pooler.dense(h[b, 0])) for the last forward (HF's pooler_output).
 * ATTN_STATUS_INVALID_ARGUMENT when the model has no pooler or no forward ran. */
attn_status attn_bert_pooler(const attn_bert_model *m, attn_bert_state *st, float *pooled);

typedef enum {
    ATTN_BERT_POOL_MEAN = 0,      /* mean over the real tokens (sentence-transformers' mean) */
    ATTN_BERT_POOL_CLS,           /* the first token's hidden state */
    ATTN_BERT_POOL_MAX,           /* element-wise max over the real tokens */
    ATTN_BERT_POOL_MEAN_SQRT_LEN  /* sum over the real tokens / sqrt(length) */
} attn_bert_pooling;

/* Sentence embeddings out (B, C) from the last forward's hidden states, pooled over each
 * sequence's real tokens and, when normalize, divided by max(||.||_2, 1e-12) (F.normalize), as
 * sentence-transformers' Pooling + Normalize modules compute them. */
attn_status attn_bert_pool(const attn_bert_model *m, const attn_bert_state *st,
                           attn_bert_pooling mode, bool normalize, float *out);

/* The same mean pooling as a plain function of padded hidden states:
 * out (B, C) = mean of hidden (B, T, C) over t < lengths[b] (lengths NULL = all T), L2-normalized
 * when normalize. */
attn_status attn_bert_mean_pool(int B, int T, int C, const float *hidden, const int32_t *lengths,
                                bool normalize, float *out);

/* Masked-LM logits for n chosen positions of the last forward, without computing the others:
 *   positions (n) flat indices b*T + t into the forward's (B, T) batch, each a real token
 *   logits (n, V)
 * ATTN_STATUS_INVALID_ARGUMENT when the model has no MLM head, no forward ran, or a position is
 * out of range or padding. */
attn_status attn_bert_mlm_logits(const attn_bert_model *m, attn_bert_state *st, int n,
                                 const int32_t *positions, float *logits);

/* Masked-LM loss of the last forward (training mode): labels (B, T), ATTN_BERT_IGNORE_INDEX
 * (-100) where no prediction is wanted (it must be -100 on padded positions), else a target id in
 * [0, V). *loss = mean cross-entropy over the labelled positions (0 when none), as
 * BertForMaskedLM(labels=...). The head runs on the labelled rows only. Stores d loss / d logits
 * for attn_bert_backward. */
attn_status attn_bert_mlm_loss(const attn_bert_model *m, attn_bert_state *st,
                               const int32_t *labels, float *loss);

/* Gradients of the last attn_bert_mlm_loss with respect to every parameter (MLM head, encoder,
 * embeddings), accumulated (+=) into m->grads. The pooler gets none (BertForMaskedLM has no
 * pooler). Needs a training-mode forward and the loss since the last backward. */
attn_status attn_bert_backward(attn_bert_model *m, attn_bert_state *st);

/* Gradients for a loss on the last hidden states: dhidden (B, T, C) = d loss / d hidden_out of
 * the last training-mode forward (padded rows ignored), accumulated into m->grads through the
 * encoder and embeddings (for fine-tuning with an outside head, and for tests). */
attn_status attn_bert_backward_hidden(attn_bert_model *m, attn_bert_state *st,
                                      const float *dhidden);

/* ---- data-parallel masked-LM training ------------------------------------------------------
 * One step's forward, MLM loss and backward split over n_replicas threads, as attn_gpt_trainer
 * (the one trainer of src/models/trainer.c): the B sequences are cut into contiguous runs of
 * about equal rows, each replica runs its run through its own state with single-threaded kernels
 * into its own gradient buffer, and the gradients are summed in replica order, each replica's
 * loss gradient scaled by its share of the batch's labelled positions — the gradient of the whole
 * batch's mean loss, as one attn_bert_forward + attn_bert_mlm_loss + attn_bert_backward give it
 * (equal up to float rounding). Dropout masks are indexed by the batch's packed rows, so they do
 * not depend on the replica count. n_replicas == 1 is exactly the plain path. */
typedef struct attn_bert_trainer attn_bert_trainer;

/* Capacity: batches of up to B sequences of up to T tokens; n_replicas 1..256 (more than B is cut
 * to B). The model (with its MLM head) must outlive the trainer. */
attn_status attn_bert_trainer_init(attn_bert_model *m, int B, int T, int n_replicas,
                                   attn_bert_trainer **out);
void attn_bert_trainer_free(attn_bert_trainer *t);
int attn_bert_trainer_replicas(const attn_bert_trainer *t);
/* Data parallel across processes (attn_dist.h): every rank passes the same global batch and runs
 * its contiguous run of it (a collective call then), each loss gradient weighed by its share of
 * the global batch's counted targets, so once the caller has summed the gradient buffers over the
 * ranks (attn_dist_allreduce_sum) they are the whole batch's; *loss is the global batch's on every
 * rank. Dropout masks follow the global row numbers, as in one process. NULL or a one-rank d:
 * this process alone (the default). d must outlive the trainer. */
void attn_bert_trainer_set_dist(attn_bert_trainer *t, attn_dist *d);
/* With a dist of several ranks and one replica per rank: the backward of the following steps
 * hands each finished layer's gradients to attn_dist_grad_ready, so their sum over the ranks
 * runs while the earlier layers' backward does (the caller calls attn_dist_grad_begin on the
 * model's gradient buffer before the step and attn_dist_grad_finish after it). Only for steps
 * after which the gradients are final (not a micro-batch that more will add to). Default off. */
void attn_bert_trainer_set_overlap(attn_bert_trainer *t, bool on);

/* One step: ids, type_ids (may be NULL), lengths (may be NULL) as attn_bert_forward, labels as
 * attn_bert_mlm_loss; training turns dropout on with (seed, step) as attn_bert_set_train.
 * *loss is the batch's mean loss; the gradients of grad_scale · loss are ADDED to m->grads. */
attn_status attn_bert_train_step(attn_bert_trainer *t, bool training, uint64_t seed,
                                 uint64_t step, int B, int T, const int32_t *ids,
                                 const int32_t *type_ids, const int32_t *lengths,
                                 const int32_t *labels, float grad_scale, float *loss);
/* Evaluation only: the batch's mean masked-LM loss (no dropout, no gradients). */
attn_status attn_bert_trainer_eval(attn_bert_trainer *t, int B, int T, const int32_t *ids,
                                   const int32_t *type_ids, const int32_t *lengths,
                                   const int32_t *labels, float *loss);

#ifdef __cplusplus
}
#endif
#endif

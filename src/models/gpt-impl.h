/* gpt-impl.h — internals shared by the GPT-2 sources (gpt.c, gpt_io.c, gpt_decode.c, gpt_dp.c). */
#ifndef ATTN_GPT_IMPL_H
#define ATTN_GPT_IMPL_H

#include "attn_gpt.h"
#include "attn_nn.h"
#include "models-impl.h"

/* Dropout sites: 0 the embeddings, 1 + 2l block l's attention branch, 2 + 2l its MLP branch. */
#define GPT_SITE_EMB 0u
#define GPT_SITE_ATTN(l) (1u + 2u * (uint32_t)(l))
#define GPT_SITE_MLP(l) (2u + 2u * (uint32_t)(l))

/* Allocate a model for cfg (checked first) with its layout and tensor table; parameters are NOT
 * initialized; gradients only when grads. */
attn_status gpt_model_alloc(const attn_gpt_config *cfg, bool grads, attn_gpt_model **out);

/* The tensor table of cfg (names, shapes, buffer offsets) without any buffer; *table freed with
 * attn_free. */
attn_status gpt_model_table(const attn_gpt_config *cfg, attn_param_info **table, int *n);
/* A model for cfg whose tensors are src[i] for table entry i (models-impl.h's mdl_src): no
 * parameter buffer, no gradients. */
attn_status gpt_model_alloc_src(const attn_gpt_config *cfg, const mdl_src *src,
                                attn_gpt_model **out);
/* The output head of m's weights w (m->w: quantized when lm_head_q) or of views w. */
attn_nn_linear gpt_head(const attn_gpt_model *m, const attn_gpt_weights *w);
/* Frees a GGUF model's file state (gpt_gguf.c); NULL is a no-op. */
void gpt_file_free(struct attn_gpt_file *f);

/* The attention score scale of block `layer` (scale_attn_weights, inverse layer index). */
float gpt_attn_scale(const attn_gpt_config *c, int layer);

/* Every id of ids (B, T) in [0, V), else INVALID_ARGUMENT naming `what`, the position and id. */
attn_status gpt_check_ids(const char *what, const attn_gpt_config *c, int B, int T,
                          const int32_t *ids);

/* out (B·T, C) = wte[ids] + wpe[pos0 + t] (ids already checked, pos0 + T <= P). */
void gpt_embed(const attn_gpt_model *m, int B, int T, int pos0, const int32_t *ids, float *out);
/* The same for M rows at their own positions pos (M) (each < P). */
void gpt_embed_pos(const attn_gpt_model *m, int M, const int32_t *pos, const int32_t *ids,
                   float *out);

/* Block l's two pre-norm sub-layers (attention, MLP) over the views W, residual dropout p. */
void gpt_sublayers(const attn_gpt_model *m, const attn_gpt_block *W, int l, float p_drop,
                   attn_nn_sublayer S[2]);

/* attn_gpt_pack_weights' copy (gpt_decode.c): per layer the maps decoding runs, as views of the
 * parameters whose .packed are the panels beside them. */
typedef struct {
    attn_nn_linear qkv;  /* GPT-2 c_attn; Llama q|k|v fused (w NULL: not packed) */
    attn_nn_linear o;    /* attn.c_proj / o_proj */
    attn_nn_linear up;   /* GPT-2 c_fc; Llama the fused gate|up pair (its panels: ffn pair_packed) */
    attn_nn_linear down; /* mlp.c_proj / down_proj */
    attn_gemm_packed_b p_qkv, p_o, p_up, p_down;
} gpt_packed_layer;

struct attn_gpt_packed {
    int L;
    gpt_packed_layer *layer; /* [L] */
};

/* Up to this many rows a product streams the weights in their own layout (attn_gemm's small-M
 * path: faster than the panels for a decoding step's one row per sequence); more take the panels,
 * whose results equal attn_gemm's blocked path bit for bit. So packing changes no result. */
#define GPT_STREAM_ROWS 8

/* Block l's sub-layers S (gpt_sublayers) switched to the packed maps when m has them and the
 * call has more than GPT_STREAM_ROWS rows (M); and, for any M, to a GGUF Llama's fused quantized
 * q, k, v (m->qkv_qp). */
void gpt_use_packed(const attn_gpt_model *m, int l, int M, attn_nn_sublayer S[2]);

/* Views g of a gradient buffer grads laid out as m's parameters (g->h holds n_layer blocks). */
void gpt_layout_grads(const attn_gpt_model *m, float *grads, attn_gpt_weights *g);

/* The global index of the state's first sequence within the whole batch (default 0): dropout
 * masks of its rows are those rows' masks in a forward over the whole batch (gpt_dp.c). */
void gpt_state_set_row0(attn_gpt_state *st, int row0);
/* Replica 0's backward reports finished layers through h (mdl_grad_hook; default: none). */
void gpt_state_set_grad_hook(attn_gpt_state *st, const mdl_grad_hook *h);

/* ---- the Llama family's configuration (llama_config.c) ---- */
#include <jansson.h>
/* model_type name -> architecture; false when unknown. */
bool gpt_arch_parse(const char *name, attn_gpt_arch *out);
/* The transformers config class defaults of a Llama-family architecture. */
attn_gpt_config gpt_llama_defaults(attn_gpt_arch arch);
/* Checks (messages name config.json's fields), parameter count (floats). */
attn_status gpt_llama_config_check(const attn_gpt_config *c);
double gpt_llama_count_params(const attn_gpt_config *c);
/* config.json's object root (model_type arch) into *out; errors name the source and the field. */
attn_status gpt_llama_config_parse(json_t *root, const char *name, attn_gpt_arch arch,
                                   attn_gpt_config *out);
/* The config.json object transformers' class of c->arch loads (NULL: out of memory). */
json_t *gpt_llama_config_json(const attn_gpt_config *c);

/* llama.cpp's GGUF name (out, cap bytes) of the model-table entry hf (Hugging Face names: the Llama
 * family, GPT-2), or false when it has none; *conv1d: GPT-2's Conv1D weights, (in, out) in the
 * table and (out, in) in GGUF. The one name map of the GGUF loader and writer (gpt_gguf.c). */
bool gpt_gguf_tensor_name(const char *hf, char *out, size_t cap, bool *conv1d);

#endif

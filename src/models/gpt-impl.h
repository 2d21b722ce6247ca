/* gpt-impl.h — internals shared by the GPT-2 sources (gpt.c, gpt_io.c, gpt_decode.c). */
#ifndef ATTN_GPT_IMPL_H
#define ATTN_GPT_IMPL_H

#include "attn_gpt.h"

/* Allocate a model for cfg (checked first) with its layout and tensor table; parameters are NOT
 * initialized; gradients only when grads. */
attn_status gpt_model_alloc(const attn_gpt_config *cfg, bool grads, attn_gpt_model **out);

/* The attention score scale of block `layer` (scale_attn_weights, inverse layer index). */
float gpt_attn_scale(const attn_gpt_config *c, int layer);

/* Every id of ids (B, T) in [0, V), else INVALID_ARGUMENT naming `what`, the position and id. */
attn_status gpt_check_ids(const char *what, const attn_gpt_config *c, int B, int T,
                          const int32_t *ids);

/* out (B·T, C) = wte[ids] + wpe[pos0 + t] (ids already checked, pos0 + T <= P). */
void gpt_embed(const attn_gpt_model *m, int B, int T, int pos0, const int32_t *ids, float *out);

/* attn_encdec_dropout's masks, computed once and kept as bits (gpt.c): out = base + drop(y)
 * (base NULL: out = drop(y)), element i using the mask of element off + i of the site, recording
 * the keep bits in mask (ceil(n / 64) words); then
 * out = drop(g) from those bits. Bit-identical to attn_encdec_dropout followed by the add. out
 * may equal y, base or g. */
void gpt_dropout_fwd(uint64_t seed, uint64_t step, uint32_t site, float p, size_t off,
                     size_t n, const float *base, const float *y, float *out, uint64_t *mask);
void gpt_dropout_bwd(float p, size_t n, const uint64_t *mask, const float *g, float *out);

/* Ask for transparent huge pages on a large buffer before it is first touched (gpt.c). */
void gpt_advise_huge_pages(void *p, size_t nbytes);

/* Views g of a gradient buffer grads laid out as m's parameters (g->h holds n_layer blocks). */
void gpt_layout_grads(attn_gpt_model *m, float *grads, attn_gpt_weights *g);

/* The global index of the state's first sequence within the whole batch (default 0): dropout
 * masks of its rows are those rows' masks in a forward over the whole batch (gpt_dp.c). */
void gpt_state_set_row0(attn_gpt_state *st, int row0);

#endif

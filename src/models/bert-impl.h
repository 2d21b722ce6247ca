/* bert-impl.h — internals shared by the BERT sources (bert.c, bert_io.c, bert_dp.c). */
#ifndef ATTN_BERT_IMPL_H
#define ATTN_BERT_IMPL_H

#include "attn_bert.h"
#include "models-impl.h"

/* Dropout sites: 0 the embeddings, 1 + 2l layer l's attention output, 2 + 2l its FFN output. */
#define BERT_SITE_EMB 0u
#define BERT_SITE_ATTN(l) (1u + 2u * (uint32_t)(l))
#define BERT_SITE_FFN(l) (2u + 2u * (uint32_t)(l))

/* A model for cfg with its layout and table; parameters NOT initialized; gradients zeroed. */
attn_status bert_model_alloc(const attn_bert_config *cfg, bool pooler, bool mlm,
                             attn_bert_model **out);
/* Views g of a gradient buffer laid out as m's parameters (g->layers holds L layers). */
void bert_layout_grads(const attn_bert_model *m, float *grads, attn_bert_weights *g);
/* The global packed row of the state's first row (data parallelism; default 0). */
void bert_state_set_row0(attn_bert_state *st, int64_t row0);
/* Replica 0's backward reports finished layers through h (mdl_grad_hook; default: none). */
void bert_state_set_grad_hook(attn_bert_state *st, const mdl_grad_hook *h);
/* Keep the activations for backward in the following forwards even in evaluation mode (no
 * dropout): the trainer's backward without dropout. */
void bert_state_set_keep(attn_bert_state *st, bool keep);
/* attn_bert_mlm_loss with d loss / d logits scaled by grad_scale. */
attn_status bert_mlm_loss(const attn_bert_model *m, attn_bert_state *st, const int32_t *labels,
                          float grad_scale, float *loss);
/* The labelled positions of labels (B, T) with lengths len (NULL: all T), checked. */
attn_status bert_count_labels(const attn_bert_model *m, int B, int T, const int32_t *len,
                              const int32_t *labels, int *n);

#endif

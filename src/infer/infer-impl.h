/* infer-impl.h — what the translation searches share inside src/infer (internal). */
#ifndef ATTN_INFER_IMPL_H
#define ATTN_INFER_IMPL_H

#include "attn_infer.h"

/* The session's model, and its capacities: beam, decoder positions, sentences. */
const attn_encdec_model *translate_session_model(const attn_translate_session *s);
void translate_session_caps(const attn_translate_session *s, int *max_beam, int *max_tgt,
                            int *max_sentences);

#endif

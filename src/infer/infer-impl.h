/* infer-impl.h — what the translation searches share inside src/infer (internal). */
#ifndef ATTN_INFER_IMPL_H
#define ATTN_INFER_IMPL_H

#include "attn_infer.h"

/* The session's model, and its capacities: beam, decoder positions, sentences. */
const attn_encdec_model *translate_session_model(const attn_translate_session *s);
void translate_session_caps(const attn_translate_session *s, int *max_beam, int *max_tgt,
                            int *max_sentences);

/* Sentences in a batch from which a beam search runs its first step with one row per sentence
 * (all K beams would be the same start token): the GEMMs then take the same path for B rows as
 * for B·K (their small-M path sums in another order), so no result changes. */
#define FIRST_ROWS_MIN 16

/* Keep the session's active sentences keep[0 .. nk) (ascending indices among the current ones),
 * each with R rows from now on: new row i continues current row rows[i], a row of sentence
 * keep[i / R] (so rows both reorder and duplicate a sentence's hypotheses). The KV caches, the
 * cross-attention keys / values and the source lengths move with them. */
attn_status translate_session_select(attn_translate_session *s, int nk, const int32_t *keep,
                                     int R, const int32_t *rows);
#endif

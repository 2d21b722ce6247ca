/* cmd_translate_hf.h — `attn translate` on Hugging Face translation directories (Marian,
 * M2M100 / NLLB, attn export's): transformers' generate (attn_hf_generate). */
#ifndef ATTN_CMD_TRANSLATE_HF_H
#define ATTN_CMD_TRANSLATE_HF_H

#include "attn_models.h"

#include <stdbool.h>

typedef struct {
    const char *dir;
    int beam;        /* > 0: num_beams (else generation_config.json's) */
    int max_tokens;  /* > 0: max_new_tokens */
    float length_penalty; /* not NaN: transformers' length_penalty */
    int early_stopping;   /* >= 0: an attn_hf_early_stopping (else generation_config.json's) */
    int batch;       /* sentences per attn_hf_generate call */
    bool ids;        /* input lines are source ids (</s> included), output lines ids */
    bool scores;     /* prefix each line with its score and a tab */
    const char *src_lang, *tgt_lang; /* NLLB codes / Marian's target >>lang<< (NULL: none) */
} translate_hf_args;

/* Translate texts[0..n_texts) (NULL: standard input's lines) with m (loaded from a->dir),
 * printing one line per input line. Errors are returned (the caller prints them). */
attn_status translate_hf(const translate_hf_args *a, const attn_encdec_model *m, char **texts,
                         int n_texts);

#endif

/* cmd_attention.h — `attn attention`: capture a model's attention probabilities and draw them. */
#ifndef ATTN_CMD_ATTENTION_H
#define ATTN_CMD_ATTENTION_H

#include "attn_gen.h"
#include "attn_infer.h"
#include "attn_models.h"
#include "attn_tok.h"

#include <stdbool.h>
#include <stdint.h>

/* argv[0] is "attention". Returns the process exit status (0, 1 failure, 2 usage). */
int cmd_attention(int argc, char **argv);


/* The model families `attn attention` (and `attn explain --model`) read. */
typedef enum { FAMILY_ENCDEC, FAMILY_GPT, FAMILY_BERT } attention_family;

/* The options of `attn attention`; `attn explain --model` fills the input ones. */
typedef struct {
    const char *dir, *from, *text, *ids, *target, *target_ids;
    const char *src_lang, *tgt_lang; /* Hugging Face translators: NLLB codes, Marian's >>xx<< */
    const char *out, *html, *png, *font, *query;
    const char *kind_s;
    int beam, layer, head, cell; /* head: >= 0, or HEAD_MEAN / HEAD_ALL */
    float length_penalty;
    bool beam_set, lp_set;
    int generate; /* GPT-2: new tokens to generate first (0: none) */
    attn_gen_params gen;
} attention_opts;

/* A model directory's (or GGUF file's) family, from its config.json (or GGUF architecture). */
attn_status attention_detect_family(const char *dir, attention_family *f);
/* Token ids separated by commas or spaces (malloc'd). what names the option in errors. */
attn_status attention_parse_ids(const char *what, const char *s, int32_t **ids, int *n);
/* A single-stack model's input: o->ids as given, or o->text through o->dir's tokenizer (with its
 * post-processor: BERT's [CLS] ... [SEP]); *tok labels the tokens (NULL with --ids and no
 * tokenizer). *ids malloc'd. */
attn_status attention_single_input(const attention_opts *o, attn_tok **tok, int32_t **ids, int *n);
/* The translator's source (the text's ids + </s>, or --ids) and target (<s> + --target's ids +
 * </s>, --target-ids, or the translation of the source with beam o->beam, printed), malloc'd. */
attn_status attention_encdec_input(const attention_opts *o, const attn_encdec_model *m,
                                   const attn_tok *tok, int32_t **src, int *Ts, int32_t **tgt,
                                   int *n_tgt);

/* A Hugging Face translator's (Marian, M2M100 / NLLB: m->cfg.arch not attn's) input, as `attn
 * translate --model DIR` reads it: *t the directory's translator (attn_hf_translator: tokenizer,
 * --src-lang / --tgt-lang, generation_config.json with --beam and --length-penalty); the source
 * (TEXT through the tokenizer with the language tokens, or --ids as given) and the whole decoder
 * sequence (decoder start + --target's ids, --target-ids as given, or the start + the
 * translation of the source, printed), malloc'd. */
attn_status attention_hf_input(const attention_opts *o, const attn_encdec_model *m,
                               attn_hf_translator **t, int32_t **src, int *Ts, int32_t **tgt,
                               int *n_tgt);
/* Whether --src-lang / --tgt-lang were given to a model that is not a Hugging Face translator:
 * then the error. */
attn_status attention_check_langs(const attention_opts *o, const attn_encdec_model *m);

#endif

/* cmd_train_gpt.h — `attn train --arch gpt|llama`: train a decoder (GPT-2 or the Llama family)
 * on a text file, from scratch or fine-tuning a Hugging Face directory. */
#ifndef ATTN_CMD_TRAIN_GPT_H
#define ATTN_CMD_TRAIN_GPT_H

#include "train_loop.h"

#include <stdbool.h>

/* The gpt and llama families' options and --help (their parts of `attn train --help`): one
 * trainer, GPT-2 or the Llama family. */
extern const train_family_info cmd_train_gpt_family;
extern const train_family_info cmd_train_llama_family;

/* Whether these `attn train` arguments are for this trainer: "--arch gpt" or "--arch llama", or
 * "--resume" with an --out DIR whose config.json's model_type is gpt2, llama, mistral, qwen2 or
 * qwen3. */
bool cmd_train_gpt_wanted(int argc, char **argv);

int cmd_train_gpt(int argc, char **argv);

#endif

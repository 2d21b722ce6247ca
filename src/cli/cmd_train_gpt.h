/* cmd_train_gpt.h — `attn train --arch gpt`: train a GPT-2 language model on a text file. */
#ifndef ATTN_CMD_TRAIN_GPT_H
#define ATTN_CMD_TRAIN_GPT_H

#include "train_loop.h"

#include <stdbool.h>

/* The gpt family's options and --help (the part of `attn train --help` about it). */
extern const train_family_info cmd_train_gpt_family;

/* Whether these `attn train` arguments are for the gpt trainer: "--arch gpt", or "--resume" with
 * an --out DIR whose config.json says "model_type": "gpt2". */
bool cmd_train_gpt_wanted(int argc, char **argv);

int cmd_train_gpt(int argc, char **argv);

#endif

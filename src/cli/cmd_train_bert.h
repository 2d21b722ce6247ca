/* cmd_train_bert.h — `attn train --arch bert`: masked-LM training of a BERT model on text lines
 * (src/cli/cmd_train_bert.c). */
#ifndef ATTN_CMD_TRAIN_BERT_H
#define ATTN_CMD_TRAIN_BERT_H

#include "train_loop.h"

#include <stdbool.h>

/* The bert family's options and --help (the part of `attn train --help` about it). */
extern const train_family_info cmd_train_bert_family;

/* Whether these `attn train` arguments are for the bert trainer: "--arch bert", or "--resume"
 * with an --out DIR whose config.json says "model_type": "bert" and which holds checkpoint/. */
bool cmd_train_bert_wanted(int argc, char **argv);

int cmd_train_bert(int argc, char **argv);

#endif

/* cmd_train_bert.h — `attn train --arch bert`: masked-LM training of a BERT model on text lines
 * (src/cli/cmd_train_bert.c). */
#ifndef ATTN_CMD_TRAIN_BERT_H
#define ATTN_CMD_TRAIN_BERT_H

#include <stdbool.h>

/* The bert part of `attn train --help`. */
extern const char cmd_train_bert_usage[];

/* Whether these `attn train` arguments are for the bert trainer: "--arch bert", or "--resume"
 * with an --out DIR whose config.json says "model_type": "bert" and which holds checkpoint/. */
bool cmd_train_bert_wanted(int argc, char **argv);

int cmd_train_bert(int argc, char **argv);

#endif

/* cmd_bleu.h — `attn bleu`: corpus BLEU of a translation, as sacreBLEU computes it. */
#ifndef ATTN_CMD_BLEU_H
#define ATTN_CMD_BLEU_H

/* argv[0] is "bleu". Returns the process exit status (0, 1 failure, 2 usage). */
int cmd_bleu(int argc, char **argv);

#endif

/* cmd_tokenizer.h — `attn tokenizer train|encode|decode`: BPE tokenizers saved as Hugging Face
 * tokenizer.json. */
#ifndef ATTN_CMD_TOKENIZER_H
#define ATTN_CMD_TOKENIZER_H

/* argv[0] is "tokenizer". Returns the process exit status (0, 1 failure, 2 usage). */
int cmd_tokenizer(int argc, char **argv);

#endif

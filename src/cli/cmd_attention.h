/* cmd_attention.h — `attn attention`: capture a model's attention probabilities and draw them. */
#ifndef ATTN_CMD_ATTENTION_H
#define ATTN_CMD_ATTENTION_H

/* argv[0] is "attention". Returns the process exit status (0, 1 failure, 2 usage). */
int cmd_attention(int argc, char **argv);

#endif

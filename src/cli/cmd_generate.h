/* cmd_generate.h — `attn generate`: sample text from a GPT-2 model. */
#ifndef ATTN_CMD_GENERATE_H
#define ATTN_CMD_GENERATE_H
int cmd_generate(int argc, char **argv);
#endif

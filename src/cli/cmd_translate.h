/* cmd_translate.h — `attn translate`: translate text with a trained encoder–decoder model. */
#ifndef ATTN_CMD_TRANSLATE_H
#define ATTN_CMD_TRANSLATE_H

/* argv[0] is "translate". Returns the process exit status (0, 1 failure, 2 usage). */
int cmd_translate(int argc, char **argv);

#endif

/* cmd_explain_model.h — `attn explain --model`: the self-attention walk-through on a real model. */
#ifndef ATTN_CMD_EXPLAIN_MODEL_H
#define ATTN_CMD_EXPLAIN_MODEL_H

/* argv[0] is "explain" and some argument is "--model". Returns the exit status (0, 1, 2). */
int cmd_explain_model(int argc, char **argv);

#endif

/* cmd_forward.h — `attn forward`: run a model directory on token ids, write its output as .npy. */
#ifndef ATTN_CMD_FORWARD_H
#define ATTN_CMD_FORWARD_H

/* argv[0] is "forward". Returns the process exit status (0, 1 failure, 2 usage). */
int cmd_forward(int argc, char **argv);

#endif

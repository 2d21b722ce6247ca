/* cmd_train.h — `attn train`. */
#ifndef ATTN_CMD_TRAIN_H
#define ATTN_CMD_TRAIN_H
int cmd_train(int argc, char **argv);
#endif

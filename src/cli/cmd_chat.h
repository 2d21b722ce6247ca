/* cmd_chat.h — `attn chat`: multi-turn chat with a chat model's own template. */
#ifndef ATTN_CMD_CHAT_H
#define ATTN_CMD_CHAT_H
int cmd_chat(int argc, char **argv);
#endif

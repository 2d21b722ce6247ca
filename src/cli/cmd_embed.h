/* cmd_embed.h — `attn embed`, `attn similarity`, `attn fill-mask` (src/cli/cmd_embed.c). */
#ifndef ATTN_CMD_EMBED_H
#define ATTN_CMD_EMBED_H

int cmd_embed(int argc, char **argv);
int cmd_similarity(int argc, char **argv);
int cmd_fill_mask(int argc, char **argv);

#endif

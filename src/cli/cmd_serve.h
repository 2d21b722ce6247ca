/* cmd_serve.h — `attn serve` (cmd_serve.c, src/serve/). */
#ifndef ATTN_CMD_SERVE_H
#define ATTN_CMD_SERVE_H

int cmd_serve(int argc, char **argv);

#endif

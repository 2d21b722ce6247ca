/* cmd_quantize.h — `attn quantize IN OUT.gguf --type T`: a decoder written as a GGUF file. */
#ifndef ATTN_CMD_QUANTIZE_H
#define ATTN_CMD_QUANTIZE_H

/* argv[0] is "quantize". Returns the process exit status (0, 1 failure, 2 usage). */
int cmd_quantize(int argc, char **argv);

#endif

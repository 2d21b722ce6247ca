/* cmd_export.h — `attn export`: an attn translator as a Hugging Face directory. */
#ifndef ATTN_CMD_EXPORT_H
#define ATTN_CMD_EXPORT_H

/* argv[0] is "export". Returns the process exit status (0, 1 failure, 2 usage). */
int cmd_export(int argc, char **argv);

#endif

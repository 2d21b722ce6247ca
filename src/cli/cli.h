/* cli.h — shared pieces of the attn command-line tool. The CLI, not the library, prints: every
 * failure becomes one line "attn: error: ..." on stderr and a non-zero exit (1 for a failed run,
 * 2 for a usage error). */
#ifndef ATTN_CLI_H
#define ATTN_CLI_H

#include "attn_core.h"

#include <stdbool.h>

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int cli_usage_error(const char *fmt, ...); /* prints, returns CLI_EXIT_USAGE */
int cli_fail(attn_status s);               /* prints attn_last_error(), returns CLI_EXIT_FAIL */
/* Parse a whole decimal int in [lo, hi]; false on anything else. */
bool cli_parse_int(const char *s, int lo, int hi, int *out);

int cmd_explain(int argc, char **argv);

#endif

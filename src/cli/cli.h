/* cli.h — shared pieces of the attn command-line tool. The CLI, not the library, prints: every
 * failure becomes one line "attn: error: ..." on stderr and a non-zero exit (1 for a failed run,
 * 2 for a usage error). */
#ifndef ATTN_CLI_H
#define ATTN_CLI_H

#include "attn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int cli_usage_error(const char *fmt, ...); /* prints, returns CLI_EXIT_USAGE */
int cli_fail(attn_status s);               /* prints attn_last_error(), returns CLI_EXIT_FAIL */
/* One of several processes (`mpirun ... attn train`): errors read "attn: error: rank R of N: ...". */
void cli_set_error_prefix(int rank, int size);
/* Parse a whole decimal int in [lo, hi]; false on anything else. */
bool cli_parse_int(const char *s, int lo, int hi, int *out);
/* The same for a 64-bit integer (cli_opts.c). */
bool cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* A whole number (strtod syntax) in [lo, hi]; false on anything else, NaN included. */
bool cli_parse_double(const char *s, double lo, double hi, double *out);

/* Input text for a tokenizer (cli_opts.c): NULL when s[0..n) is strict UTF-8 without NUL bytes
 * (attn_tok_utf8_check), else what is wrong with the byte at *at: "NUL byte" or "invalid UTF-8". */
const char *cli_text_problem(const char *s, size_t n, size_t *at);

/* Option tables. Inside an argument loop whose current option is `a` (a const char *) and whose
 * value is `v`: when a is NAME, parse v into LVALUE, run THEN (a statement, may be empty) and
 * `continue`; a bad value returns the usage error
 *   "CMD: NAME needs an integer from LO to HI, got 'V'"  /  "... needs a number from LO to HI ...".
 * (The file using them includes <string.h>.) */
#define CLI_INT_OPT(cmd, name, lo, hi, lvalue, then)                                             \
    if (!strcmp(a, name)) {                                                                      \
        int64_t cli_n_;                                                                          \
        if (!cli_parse_i64(v, lo, hi, &cli_n_))                                                  \
            return cli_usage_error(cmd ": %s needs an integer from %lld to %lld, got '%s'",      \
                                   name, (long long)(lo), (long long)(hi), v);                   \
        (lvalue) = cli_n_;                                                                       \
        then;                                                                                    \
        continue;                                                                                \
    }
#define CLI_REAL_OPT(cmd, name, lo, hi, lvalue, then)                                            \
    if (!strcmp(a, name)) {                                                                      \
        double cli_d_;                                                                           \
        if (!cli_parse_double(v, lo, hi, &cli_d_))                                               \
            return cli_usage_error(cmd ": %s needs a number from %g to %g, got '%s'", name,     \
                                   (double)(lo), (double)(hi), v);                               \
        (lvalue) = cli_d_;                                                                       \
        then;                                                                                    \
        continue;                                                                                \
    }

int cmd_explain(int argc, char **argv);

#endif

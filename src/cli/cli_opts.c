/* cli_opts.c — checks of what the user gives: numbers for the option tables, input text, and the
 * one-line errors (cli.h). Kept apart from main.c so that another front end built on the
 * commands (the Python package, python/) links them without the CLI's main. */
#include "cli.h"

#include "attn_tok.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Several ranks: "rank R of N: " before a failure's message; a usage error (the same on every
 * rank: the same arguments) from rank 0 alone. */
static char g_prefix[48];
static bool g_quiet_usage;

int cli_usage_error(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!g_quiet_usage) fprintf(stderr, "attn: error: %s (see 'attn --help')\n", msg);
    /* also the thread's last error, for front ends that report it themselves */
    attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "%s", msg);
    return CLI_EXIT_USAGE;
}

void cli_set_error_prefix(int rank, int size) {
    snprintf(g_prefix, sizeof g_prefix, "rank %d of %d: ", rank, size);
    g_quiet_usage = rank != 0;
}

int cli_fail(attn_status s) {
    const char *m = attn_last_error();
    if (!m || !*m) m = attn_status_str(s);
    /* a message from a collective names the rank itself */
    const bool named = g_prefix[0] && !strncmp(m, g_prefix, strlen(g_prefix));
    fprintf(stderr, "attn: error: %s%s\n", named ? "" : g_prefix, m);
    return CLI_EXIT_FAIL;
}

bool cli_parse_int(const char *s, int lo, int hi, int *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

bool cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_parse_double(const char *s, double lo, double hi, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

const char *cli_text_problem(const char *s, size_t n, size_t *at) {
    size_t bad = attn_tok_utf8_check(s, n, false);
    if (bad == n) return NULL;
    *at = bad;
    return s[bad] == 0 ? "NUL byte" : "invalid UTF-8";
}

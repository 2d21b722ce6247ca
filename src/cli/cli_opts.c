/* cli_opts.c — checks of what the user gives: numbers for the option tables, input text (cli.h). */
#include "cli.h"

#include "attn_tok.h"

#include <errno.h>
#include <stdlib.h>

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

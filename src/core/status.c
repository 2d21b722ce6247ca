/* status.c — status names and the per-thread last-error message. */
#include "core-impl.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char g_last_error[1024];

const char *attn_status_str(attn_status s) {
    switch (s) {
    case ATTN_STATUS_OK: return "ok";
    case ATTN_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case ATTN_STATUS_OUT_OF_MEMORY: return "out of memory";
    case ATTN_STATUS_TOO_LARGE: return "too large";
    case ATTN_STATUS_IO: return "i/o error";
    case ATTN_STATUS_FORMAT: return "bad format";
    case ATTN_STATUS_NOT_FOUND: return "not found";
    case ATTN_STATUS_UNSUPPORTED: return "unsupported";
    }
    return "unknown status";
}

const char *attn_last_error(void) { return g_last_error; }

void attn_clear_error(void) { g_last_error[0] = '\0'; }

static attn_status set_error(attn_status s, const char *fmt, va_list ap) {
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    /* One line: the CLI prints it as is. */
    for (char *p = g_last_error; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return s;
}

attn_status attn_fail(attn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(s, fmt, ap);
    va_end(ap);
    return s;
}

attn_status attn_set_error(attn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(s, fmt, ap);
    va_end(ap);
    return s;
}

bool attn_size_prod(const int64_t *dims, int n, size_t *out) {
    size_t p = 1;
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0) return false;
        if ((uint64_t)dims[i] > SIZE_MAX) return false;
        if (!attn_size_mul(p, (size_t)dims[i], &p)) return false;
    }
    *out = p;
    return true;
}

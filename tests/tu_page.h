/* tu_page.h — test helper for the self-contained HTML pages (viewer, explain): open a page in
 * headless Chromium and read what its test hook wrote. Include after tu.h. */
#ifndef ATTN_TU_PAGE_H
#define ATTN_TU_PAGE_H

#include <jansson.h>

/* Chromium's path: $ATTN_CHROMIUM, or the first of Debian's and other distributions' names that
 * exists; NULL when none (the caller skips). */
static inline const char *tu_chromium(void) {
    const char *e = getenv("ATTN_CHROMIUM");
    if (e && *e) return e;
    static const char *c[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser",
                              "/usr/bin/google-chrome", NULL};
    for (int i = 0; c[i]; i++)
        if (access(c[i], X_OK) == 0) return c[i];
    return NULL;
}

/* Open path#test=spec headless; the hook's JSON (NULL when the page did not produce it), and
 * the number of console lines Chromium logged for the page. */
static inline json_t *tu_run_page(const char *path, const char *spec, int *console_lines) {
    char cmd[8192], prof[1024], err[1100];
    snprintf(prof, sizeof prof, "%s", tu_tmp("chromium-profile"));
    snprintf(err, sizeof err, "%s", tu_tmp("chromium.err"));
    snprintf(cmd, sizeof cmd,
             "'%s' --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions "
             "--user-data-dir='%s' --enable-logging=stderr --v=0 --virtual-time-budget=10000 "
             "--dump-dom 'file://%s#test=%s' 2>'%s'",
             tu_chromium(), prof, path, spec, err);
    double t0 = tu_now();
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 20, n = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    /* the DOM includes the embedded data; keep only what fits, the hook's element is first
     * after <main> */
    for (size_t k; (k = fread(out + n, 1, cap - 1 - n, p)) > 0;) {
        n += k;
        if (n == cap - 1) {
            char skip[65536];
            while (fread(skip, 1, sizeof skip, p) > 0) {
            }
            break;
        }
    }
    out[n] = '\0';
    pclose(p);
    printf("  chromium: %.1f s, %zu bytes of DOM read\n", tu_now() - t0, n);
    *console_lines = 0;
    size_t en;
    char *log = tu_read_all(err, &en);
    if (log) {
        for (char *l = log; (l = strstr(l, "CONSOLE")); l++) {
            char *eol = strchr(l, '\n');
            printf("  console: %.*s\n", eol ? (int)(eol - l) : 200, l);
            (*console_lines)++;
        }
        free(log);
    }
    json_t *j = NULL;
    char *s = strstr(out, "<pre id=\"attn-test\">");
    char *e = s ? strstr(s, "</pre>") : NULL;
    if (s && e) {
        s += strlen("<pre id=\"attn-test\">");
        *e = '\0';
        /* undo the serializer's escapes */
        char *w = s;
        for (char *r = s; *r;) {
            if (!strncmp(r, "&amp;", 5))
                *w++ = '&', r += 5;
            else if (!strncmp(r, "&lt;", 4))
                *w++ = '<', r += 4;
            else if (!strncmp(r, "&gt;", 4))
                *w++ = '>', r += 4;
            else if (!strncmp(r, "&quot;", 6))
                *w++ = '"', r += 6;
            else
                *w++ = *r++;
        }
        *w = '\0';
        json_error_t je;
        j = json_loads(s, 0, &je);
        if (!j) printf("  hook output is not JSON: %.300s\n", s);
    } else {
        printf("  no test hook output in the DOM (%zu bytes): %.300s\n", n, out);
    }
    free(out);
    return j;
}

#endif

/* corpus.c — reading a parallel corpus from a TSV file and writing pairs back out (include/
 * attn_data.h). The whole file is read into one buffer and split in place (tabs and newlines
 * become NULs), so a corpus is one allocation of text plus four pointer arrays, and every error
 * names the file and line a person would open in an editor. */
#include "data-impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

attn_data_tsv_options attn_data_tsv_default_options(void) {
    attn_data_tsv_options o = {.src_col = 0, .tgt_col = 1, .attr_col = 2};
    return o;
}

void attn_data_corpus_free(attn_data_corpus *c) {
    if (!c) return;
    free((void *)c->src);
    free((void *)c->tgt);
    free((void *)c->attr);
    free(c->line);
    free(c->buf);
    memset(c, 0, sizeof *c);
}

/* Whole file into a NUL-terminated buffer (data-impl.h). Reads in chunks rather than trusting a
 * size from fstat, so pipes and /dev/stdin work too. */
attn_status attn_data_read_file(const char *path, char **out, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return attn_fail(ATTN_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) {
        fclose(fp);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    for (;;) {
        if (cap - n < 2) {
            if (cap > ATTN_MAX_BUFFER_BYTES / 2) {
                free(b);
                fclose(fp);
                return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: file larger than %zu bytes", path,
                                 (size_t)ATTN_MAX_BUFFER_BYTES);
            }
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                fclose(fp);
                return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
            }
            b = nb, cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n - 1, fp);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) {
        free(b);
        return attn_fail(ATTN_STATUS_IO, "%s: read error", path);
    }
    b[n] = '\0';
    *out = b;
    *len = n;
    return ATTN_STATUS_OK;
}

attn_status attn_data_load_tsv(const char *path, const attn_data_tsv_options *opt,
                               attn_data_corpus *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: path is NULL");
    attn_data_tsv_options o = opt ? *opt : attn_data_tsv_default_options();
    if (o.src_col < 0 || o.tgt_col < 0 || o.src_col == o.tgt_col || o.attr_col < -1 ||
        o.attr_col == o.src_col || o.attr_col == o.tgt_col)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "data: columns src %d, tgt %d, attr %d must be distinct (attr -1: none)",
                         o.src_col, o.tgt_col, o.attr_col);
    int need = ATTN_MAX(o.src_col, o.tgt_col) + 1; /* columns every line must have */

    char *buf = NULL;
    size_t len = 0;
    attn_status st = attn_data_read_file(path, &buf, &len);
    if (st) return st;
    char *s = buf, *end = buf + len;
    if (len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) s += 3; /* BOM: not part of the first field */

    size_t max_lines = 1;
    for (char *p = s; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++) max_lines++;
    const char **src = malloc(max_lines * sizeof *src), **tgt = malloc(max_lines * sizeof *tgt);
    const char **attr = malloc(max_lines * sizeof *attr);
    size_t *lineno = malloc(max_lines * sizeof *lineno);
    if (!src || !tgt || !attr || !lineno) {
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        goto fail;
    }

    size_t n = 0, line = 0;
    while (s < end) {
        line++;
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *e = nl ? nl : end;
        char *next = nl ? nl + 1 : end;
        if (e > s && e[-1] == '\r') e--; /* CRLF files */
        *e = '\0';
        if (e == s) { /* empty line: nothing to learn from, not an error */
            s = next;
            continue;
        }
        /* Strict UTF-8 without NUL bytes, the same rule as Python's decoder, so that every
         * string handed to the tokenizer and to BLEU is text both accept. */
        size_t bad = attn_tok_utf8_check(s, (size_t)(e - s), false);
        if (bad != (size_t)(e - s)) {
            st = attn_fail(ATTN_STATUS_FORMAT, "%s:%zu: %s at byte %zu of the line", path, line,
                           s[bad] ? "invalid UTF-8" : "NUL byte", bad + 1);
            goto fail;
        }
        /* Split on tabs in place; only the columns we use are remembered. */
        const char *col_src = NULL, *col_tgt = NULL, *col_attr = "";
        int col = 0;
        char *f = s;
        for (;;) {
            char *tab = memchr(f, '\t', (size_t)(e - f));
            if (tab) *tab = '\0';
            if (col == o.src_col) col_src = f;
            if (col == o.tgt_col) col_tgt = f;
            if (col == o.attr_col) col_attr = f;
            col++;
            if (!tab) break;
            f = tab + 1;
        }
        if (col < need) {
            st = attn_fail(ATTN_STATUS_FORMAT, "%s:%zu: %d column%s, expected at least %d (tab-separated)",
                           path, line, col, col == 1 ? "" : "s", need);
            goto fail;
        }
        if (!*col_src || !*col_tgt) {
            st = attn_fail(ATTN_STATUS_FORMAT, "%s:%zu: empty %s sentence (column %d)", path, line,
                           !*col_src ? "source" : "target", !*col_src ? o.src_col + 1 : o.tgt_col + 1);
            goto fail;
        }
        src[n] = col_src, tgt[n] = col_tgt, attr[n] = col_attr, lineno[n] = line;
        n++;
        s = next;
    }
    if (n == 0) {
        st = attn_fail(ATTN_STATUS_FORMAT, "%s: no sentence pairs (empty input)", path);
        goto fail;
    }
    out->n = n, out->src = src, out->tgt = tgt, out->attr = attr, out->line = lineno;
    out->buf = buf;
    return ATTN_STATUS_OK;
fail:
    free((void *)src);
    free((void *)tgt);
    free((void *)attr);
    free(lineno);
    free(buf);
    return st;
}

/* ---- atomic writes ---- */

attn_status attn_data_wopen(attn_data_wfile *w, const char *path) {
    memset(w, 0, sizeof *w);
    size_t n = strlen(path);
    w->path = malloc(n + 1);
    w->tmp = malloc(n + 5);
    if (!w->path || !w->tmp) {
        free(w->path);
        free(w->tmp);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    memcpy(w->path, path, n + 1);
    memcpy(w->tmp, path, n);
    memcpy(w->tmp + n, ".tmp", 5);
    w->fp = fopen(w->tmp, "wb");
    if (!w->fp) {
        attn_status st =
            attn_fail(ATTN_STATUS_IO, "%s: cannot create: %s", w->tmp, strerror(errno));
        free(w->path);
        free(w->tmp);
        return st;
    }
    return ATTN_STATUS_OK;
}

void attn_data_wput(attn_data_wfile *w, const char *s, size_t n) {
    if (!w->failed && n && fwrite(s, 1, n, w->fp) != n) w->failed = true;
}

void attn_data_wputs(attn_data_wfile *w, const char *s) { attn_data_wput(w, s, strlen(s)); }

attn_status attn_data_wclose(attn_data_wfile *w, bool abort) {
    attn_status st = ATTN_STATUS_OK;
    bool bad = w->failed || fflush(w->fp) != 0 || fsync(fileno(w->fp)) != 0;
    int err = errno;
    if (fclose(w->fp) != 0) bad = true, err = errno;
    if (abort) {
        remove(w->tmp);
    } else if (bad) {
        st = attn_fail(ATTN_STATUS_IO, "%s: write failed: %s", w->tmp, strerror(err));
        remove(w->tmp);
    } else if (rename(w->tmp, w->path) != 0) {
        st = attn_fail(ATTN_STATUS_IO, "%s: cannot rename to %s: %s", w->tmp, w->path,
                       strerror(errno));
        remove(w->tmp);
    }
    free(w->path);
    free(w->tmp);
    memset(w, 0, sizeof *w);
    return st;
}

/* A field written into TSV must not contain the separators, or the file would read back
 * differently. */
static bool tsv_safe(const char *s) { return strpbrk(s, "\t\n\r") == NULL; }

attn_status attn_data_write_tsv(const attn_data_corpus *c, const size_t *idx, size_t n,
                                const char *path) {
    if (!c || (!idx && n) || !path)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "data: write_tsv: NULL argument");
    bool with_attr = false;
    for (size_t k = 0; k < n; k++) {
        size_t i = idx[k];
        if (i >= c->n)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "data: write_tsv: index %zu out of range (%zu pairs)", i, c->n);
        if (!tsv_safe(c->src[i]) || !tsv_safe(c->tgt[i]) || !tsv_safe(c->attr[i]))
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "data: write_tsv: pair %zu contains a tab or newline", i);
        if (c->attr[i][0]) with_attr = true;
    }
    attn_data_wfile w;
    attn_status st = attn_data_wopen(&w, path);
    if (st) return st;
    for (size_t k = 0; k < n; k++) {
        size_t i = idx[k];
        attn_data_wputs(&w, c->src[i]);
        attn_data_wput(&w, "\t", 1);
        attn_data_wputs(&w, c->tgt[i]);
        if (with_attr) {
            attn_data_wput(&w, "\t", 1);
            attn_data_wputs(&w, c->attr[i]);
        }
        attn_data_wput(&w, "\n", 1);
    }
    return attn_data_wclose(&w, false);
}

/* util.c — the tokenizer subsystem's small containers: byte buffer (with JSON string escaping),
 * int vector, string list, UTF-8 decoding/validation and the id <-> string vocabulary table.
 *
 * Buffers record an out-of-memory condition instead of failing each append, so builders stay
 * linear; their owners check .oom once. */
#include "tok-impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tok_buf ---- */

static bool buf_reserve(tok_buf *b, size_t extra) {
    if (b->oom) return false;
    size_t need;
    if (!attn_size_add(b->n, extra, &need) || !attn_size_add(need, 1, &need)) {
        b->oom = true;
        return false;
    }
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void tok_buf_put(tok_buf *b, const void *s, size_t n) {
    if (!buf_reserve(b, n)) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0'; /* always NUL-terminated, for callers that print */
}

void tok_buf_putc(tok_buf *b, char c) { tok_buf_put(b, &c, 1); }
void tok_buf_puts(tok_buf *b, const char *s) { tok_buf_put(b, s, strlen(s)); }

void tok_buf_printf(tok_buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->oom = true;
        return;
    }
    if ((size_t)k < sizeof tmp) {
        tok_buf_put(b, tmp, (size_t)k);
        return;
    }
    if (!buf_reserve(b, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* JSON (RFC 8259) string: quote, backslash and C0 controls escaped; everything else, UTF-8
 * included, written as is (the caller guarantees valid UTF-8), as serde_json does. */
void tok_buf_json_str(tok_buf *b, const char *s, size_t n) {
    tok_buf_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        tok_buf_put(b, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"': tok_buf_puts(b, "\\\""); break;
        case '\\': tok_buf_puts(b, "\\\\"); break;
        case '\n': tok_buf_puts(b, "\\n"); break;
        case '\t': tok_buf_puts(b, "\\t"); break;
        case '\r': tok_buf_puts(b, "\\r"); break;
        case '\b': tok_buf_puts(b, "\\b"); break;
        case '\f': tok_buf_puts(b, "\\f"); break;
        default: tok_buf_printf(b, "\\u%04x", c); break;
        }
    }
    tok_buf_put(b, s + run, n - run);
    tok_buf_putc(b, '"');
}

const char *tok_quote(char *out, size_t cap, const char *s, size_t n) {
    if (cap < 8) {
        if (cap) out[0] = '\0';
        return out;
    }
    tok_buf b = {0};
    tok_buf_json_str(&b, s, n);
    if (b.oom || !b.p) {
        snprintf(out, cap, "\"...\"");
    } else if (b.n < cap) {
        memcpy(out, b.p, b.n + 1);
    } else {
        size_t k = cap - 5; /* room for ..." and the NUL */
        /* do not cut inside an escape or a UTF-8 sequence */
        size_t esc = k;
        while (esc > 1 && b.p[esc - 1] != '\\' && esc > k - 6) esc--;
        if (esc > 1 && b.p[esc - 1] == '\\') k = esc - 1;
        while (k > 1 && ((unsigned char)b.p[k] & 0xC0) == 0x80) k--;
        memcpy(out, b.p, k);
        memcpy(out + k, "...\"", 5);
    }
    tok_buf_free(&b);
    return out;
}

bool tok_json_str_is(json_t *v, const char *name) {
    size_t n = strlen(name);
    return json_is_string(v) && json_string_length(v) == n && !memcmp(json_string_value(v), name, n);
}

attn_status tok_no_nul(const char *s, size_t n, const char *name, const char *path) {
    const char *z = n ? memchr(s, 0, n) : NULL;
    if (!z) return ATTN_STATUS_OK;
    char q[48];
    return attn_fail(ATTN_STATUS_UNSUPPORTED,
                     "%s: %s: %s holds U+0000 (NUL) at byte %zu, which attn does not support in "
                     "tokenizer strings",
                     name, path, tok_quote(q, sizeof q, s, n), (size_t)(z - s));
}

attn_status tok_json_error(const json_error_t *err, const char *name) {
    if (json_error_code(err) == json_error_null_byte_in_key)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: line %d column %d: an object key holds U+0000 (NUL), which attn "
                         "does not support in tokenizer strings (vocabulary tokens, special-token "
                         "names)",
                         name, err->line, err->column);
    return attn_fail(ATTN_STATUS_FORMAT, "%s: not valid JSON: line %d column %d: %s", name,
                     err->line, err->column, err->text);
}

void tok_buf_free(tok_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- tok_ivec ---- */

bool tok_ivec_push(tok_ivec *v, int32_t x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        if (cap > SIZE_MAX / sizeof *v->v) return false;
        int32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p) return false;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return true;
}

void tok_ivec_free(tok_ivec *v) {
    free(v->v);
    memset(v, 0, sizeof *v);
}

/* ---- tok_strlist ---- */

bool tok_strlist_push(tok_strlist *l, const char *s, size_t n, uint8_t flag) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        size_t *off = realloc(l->off, cap * sizeof *off);
        if (off) l->off = off;
        size_t *len = realloc(l->len, cap * sizeof *len);
        if (len) l->len = len;
        uint8_t *fl = realloc(l->flag, cap);
        if (fl) l->flag = fl;
        if (!off || !len || !fl) return false;
        l->cap = cap;
    }
    size_t at = l->data.n;
    tok_buf_put(&l->data, s, n);
    if (l->data.oom) return false;
    if (!l->data.p) tok_buf_put(&l->data, "", 0); /* so tok_strlist_at never sees NULL */
    if (l->data.oom) return false;
    l->off[l->n] = at;
    l->len[l->n] = n;
    l->flag[l->n] = flag;
    l->n++;
    return true;
}

void tok_strlist_clear(tok_strlist *l) {
    l->n = 0;
    l->data.n = 0;
}

void tok_strlist_free(tok_strlist *l) {
    tok_buf_free(&l->data);
    free(l->off);
    free(l->len);
    free(l->flag);
    memset(l, 0, sizeof *l);
}

/* ---- UTF-8 ---- */

size_t tok_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t k;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        k = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return k;
}

static inline size_t utf8_scan(const char *s, size_t n, bool allow_nul) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) { /* ASCII fast path */
            if (!allow_nul && u[i] == 0) return i;
            i++;
            continue;
        }
        uint32_t cp;
        size_t k = tok_utf8_decode(u + i, n - i, &cp);
        if (!k) return i;
        i += k;
    }
    return n;
}

size_t tok_utf8_check(const char *s, size_t n) { return utf8_scan(s, n, true); }

size_t attn_tok_utf8_check(const char *s, size_t n, bool allow_nul) {
    return s ? utf8_scan(s, n, allow_nul) : 0;
}

size_t tok_utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- vocabulary ---- */

/* FNV-1a, then a 64-bit finalizer so the low bits used as a table index are well mixed. */
uint64_t tok_hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

attn_status tok_vocab_init(tok_vocab *v, int32_t n) {
    memset(v, 0, sizeof *v);
    if (n < 0 || n > TOK_MAX_ID + 1)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "vocabulary of %ld ids is too large (max %ld)",
                         (long)n, (long)TOK_MAX_ID + 1);
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2; /* load factor <= 1/2 */
    v->str = calloc((size_t)n ? (size_t)n : 1, sizeof *v->str);
    v->len = calloc((size_t)n ? (size_t)n : 1, sizeof *v->len);
    v->slots = malloc(cap * sizeof *v->slots);
    if (!v->str || !v->len || !v->slots) {
        tok_vocab_free(v);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "vocabulary: out of memory");
    }
    memset(v->slots, 0xff, cap * sizeof *v->slots);
    v->mask = cap - 1;
    v->n = n;
    return ATTN_STATUS_OK;
}

int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t n) {
    if (!v->slots) return -1;
    size_t i = (size_t)tok_hash(s, n) & v->mask;
    for (;;) {
        int32_t id = v->slots[i];
        if (id < 0) return -1;
        if (v->len[id] == n && memcmp(v->str[id], s, n) == 0) return id;
        i = (i + 1) & v->mask;
    }
}

int tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t n) {
    if (id < 0 || id >= v->n || v->str[id]) return 1;
    if (n > UINT32_MAX) return -1;
    size_t i = (size_t)tok_hash(s, n) & v->mask;
    for (;;) {
        int32_t o = v->slots[i];
        if (o < 0) break;
        if (v->len[o] == n && memcmp(v->str[o], s, n) == 0) return 2;
        i = (i + 1) & v->mask;
    }
    char *c = malloc(n + 1);
    if (!c) return -1;
    if (n) memcpy(c, s, n);
    c[n] = '\0';
    v->str[id] = c;
    v->len[id] = (uint32_t)n;
    v->slots[i] = id;
    v->count++;
    return 0;
}

void tok_vocab_free(tok_vocab *v) {
    if (v->str)
        for (int32_t i = 0; i < v->n; i++) free(v->str[i]);
    free(v->str);
    free(v->len);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

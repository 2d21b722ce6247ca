/* value.c — the arena, errors, and the value type of the chat-template interpreter: Python's
 * str() and repr() of values, json.dumps as transformers' tojson calls it, equality and ordering
 * with Python's rules (1 == 1.0 == True; lists and tuples lexicographic; mixed types refused).
 *
 * Invariant: every string is valid UTF-8 (inputs are checked; every operation keeps it so), so
 * code-point indexing never meets a broken sequence. */
#include "chat-impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ----------------------------------------------------------------------------------- */

struct ch_chunk {
    ch_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

void ch_fail(ch_err *e, attn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    for (char *c = e->msg; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    e->status = s;
    longjmp(e->jb, 1);
}

void *ch_alloc(ch_err *e, size_t n) {
    ch_arena *a = e->arena;
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    ch_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ((size_t)1 << 16) ? n : ((size_t)1 << 16);
        if (cap > a->budget || a->used > a->budget - cap)
            ch_fail(e, ATTN_STATUS_TOO_LARGE,
                    "the render needs more than its memory limit of %zu bytes", a->budget);
        c = malloc(sizeof *c + cap);
        if (!c) ch_fail(e, ATTN_STATUS_OUT_OF_MEMORY, "out of memory (%zu bytes)", cap);
        a->used += cap;
        c->used = 0, c->cap = cap;
        if (a->head && cap == n) { /* a big one: keep filling the current chunk */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->mem + c->used;
    c->used += n;
    return p;
}

void ch_work(ch_err *e, uint64_t n) {
    e->work += n;
    if (e->work_max && e->work > e->work_max)
        ch_fail(e, ATTN_STATUS_TOO_LARGE,
                "the render does more than %llu units of work (its limit: 256 per allowed step)",
                (unsigned long long)e->work_max);
}

void ch_arena_free(ch_arena *a) {
    for (ch_chunk *c = a->head, *nx; c; c = nx) {
        nx = c->next;
        free(c);
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- UTF-8 ----------------------------------------------------------------------------------- */

size_t ch_utf8_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

size_t ch_utf8_offset(const char *s, size_t n, size_t k) {
    size_t i = 0;
    while (k > 0 && i < n) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        k--;
    }
    return i;
}

int ch_utf8_decode(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || n < 2) return *cp = u[0], 1;
    if (u[0] < 0xE0) return *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F), 2;
    if (u[0] < 0xF0 || n < 4) {
        if (n < 3) return *cp = u[0], 1;
        return *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) |
                     (u[2] & 0x3F),
               3;
    }
    *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
          ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    return 4;
}

int ch_utf8_encode(uint32_t c, char *o) {
    if (c < 0x80) return o[0] = (char)c, 1;
    if (c < 0x800) return o[0] = (char)(0xC0 | (c >> 6)), o[1] = (char)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12)), o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18)), o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F)), o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Python's str.isspace: the code points with bidirectional class WS, B or S, or category Zs. */
bool ch_is_space(uint32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ---- constructors ------------------------------------------------------------------------- */

ch_val ch_undef(const char *hint) {
    ch_val v = {CV_UNDEF, 0, {.hint = hint}};
    return v;
}
ch_val ch_none(void) {
    ch_val v = {CV_NONE, 0, {.i = 0}};
    return v;
}
ch_val ch_bool(bool b) {
    ch_val v = {CV_BOOL, 0, {.b = b}};
    return v;
}
ch_val ch_int(int64_t i) {
    ch_val v = {CV_INT, 0, {.i = i}};
    return v;
}
ch_val ch_float(double f) {
    ch_val v = {CV_FLOAT, 0, {.f = f}};
    return v;
}

ch_str *ch_str_new(ch_err *e, const char *s, size_t n) {
    if (n > ((size_t)1 << 40)) ch_fail(e, ATTN_STATUS_TOO_LARGE, "string too large");
    ch_work(e, n);
    ch_str *r = ch_alloc(e, sizeof *r + n + 1);
    r->len = n;
    if (n) memcpy(r->s, s, n);
    r->s[n] = '\0';
    r->nch = ch_utf8_count(r->s, n);
    return r;
}

ch_val ch_strn(ch_err *e, const char *s, size_t n) {
    ch_val v = {CV_STR, 0, {.s = ch_str_new(e, s, n)}};
    return v;
}
ch_val ch_strz(ch_err *e, const char *s) { return ch_strn(e, s, strlen(s)); }

ch_list *ch_list_new(ch_err *e, size_t n) {
    size_t bytes;
    if (!attn_size_mul(n, sizeof(ch_val), &bytes))
        ch_fail(e, ATTN_STATUS_TOO_LARGE, "list too large");
    ch_list *l = ch_alloc(e, sizeof *l);
    l->n = n;
    l->v = n ? ch_alloc(e, bytes) : NULL;
    return l;
}

ch_dict *ch_dict_new(ch_err *e, size_t cap) {
    ch_dict *d = ch_alloc(e, sizeof *d);
    d->n = 0;
    d->cap = cap;
    d->k = cap ? ch_alloc(e, cap * sizeof(ch_val)) : NULL;
    d->v = cap ? ch_alloc(e, cap * sizeof(ch_val)) : NULL;
    return d;
}

ch_val *ch_dict_gets(ch_dict *d, const char *k, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == CV_STR && d->k[i].u.s->len == n && !memcmp(d->k[i].u.s->s, k, n))
            return &d->v[i];
    return NULL;
}

ch_val *ch_dict_get(ch_dict *d, ch_val k) {
    if (k.kind == CV_STR) return ch_dict_gets(d, k.u.s->s, k.u.s->len);
    for (size_t i = 0; i < d->n; i++)
        if (ch_equal(d->k[i], k)) return &d->v[i];
    return NULL;
}

void ch_dict_set(ch_err *e, ch_dict *d, ch_val k, ch_val v) {
    ch_val *old = ch_dict_get(d, k);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 4;
        ch_val *nk = ch_alloc(e, cap * sizeof(ch_val)), *nv = ch_alloc(e, cap * sizeof(ch_val));
        if (d->n) memcpy(nk, d->k, d->n * sizeof(ch_val)), memcpy(nv, d->v, d->n * sizeof(ch_val));
        d->k = nk, d->v = nv, d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

/* ---- truth, equality, order ---------------------------------------------------------------- */

bool ch_truthy(ch_val v) {
    switch (v.kind) {
    case CV_UNDEF:
    case CV_NONE: return false;
    case CV_BOOL: return v.u.b;
    case CV_INT: return v.u.i != 0;
    case CV_FLOAT: return v.u.f != 0.0;
    case CV_STR: return v.u.s->len != 0;
    case CV_LIST: return (v.flags & CVF_GEN) || v.u.l->n != 0;
    case CV_DICT: return v.u.d->n != 0;
    default: return true;
    }
}

static bool is_num(ch_val v) { return v.kind == CV_BOOL || v.kind == CV_INT || v.kind == CV_FLOAT; }
static double num_f(ch_val v) {
    return v.kind == CV_FLOAT ? v.u.f : v.kind == CV_INT ? (double)v.u.i : (double)v.u.b;
}
static int64_t num_i(ch_val v) { return v.kind == CV_INT ? v.u.i : (int64_t)v.u.b; }

static bool equal(ch_val a, ch_val b, int depth);
bool ch_equal(ch_val a, ch_val b) { return equal(a, b, 0); }

/* Python would fail with RecursionError past ~1000 levels; attn calls such values unequal */
static bool equal(ch_val a, ch_val b, int depth) {
    if (depth > 500) return false;
    if (is_num(a) && is_num(b)) {
        if (a.kind == CV_FLOAT || b.kind == CV_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case CV_UNDEF:
    case CV_NONE: return true;
    case CV_STR: return a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    case CV_LIST:
        if ((a.flags | b.flags) & CVF_GEN) return a.u.l == b.u.l;
        if ((a.flags & CVF_TUPLE) != (b.flags & CVF_TUPLE) || a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal(a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    case CV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            ch_val *o = ch_dict_get(b.u.d, a.u.d->k[i]);
            if (!o || !equal(a.u.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    case CV_NS: return a.u.d == b.u.d;
    case CV_FUNC: return a.u.fn == b.u.fn;
    case CV_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

const char *ch_type_name(ch_val v) {
    switch (v.kind) {
    case CV_UNDEF: return "Undefined";
    case CV_NONE: return "NoneType";
    case CV_BOOL: return "bool";
    case CV_INT: return "int";
    case CV_FLOAT: return "float";
    case CV_STR: return v.flags & CVF_MARKUP ? "Markup" : "str";
    case CV_LIST: return v.flags & CVF_GEN ? "generator" : v.flags & CVF_TUPLE ? "tuple" : "list";
    case CV_DICT: return "dict";
    case CV_NS: return "Namespace";
    case CV_LOOP: return "LoopContext";
    default: return v.u.fn->kind == CF_MACRO ? "Macro" : "builtin_function_or_method";
    }
}

static int compare(ch_err *e, ch_val a, ch_val b, int depth);
int ch_compare(ch_err *e, ch_val a, ch_val b) { return compare(e, a, b, 0); }

static int compare(ch_err *e, ch_val a, ch_val b, int depth) {
    if (depth > 500) ch_fail(e, ATTN_STATUS_TOO_LARGE, "comparing values nested deeper than 500 levels");
    ch_work(e, 1);
    if (is_num(a) && is_num(b)) {
        if (a.kind == CV_FLOAT || b.kind == CV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            return x < y ? -1 : x > y ? 1 : 0; /* NaN: "equal", as neither < nor > holds */
        }
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y;
    }
    if (a.kind == CV_STR && b.kind == CV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int c = memcmp(a.u.s->s, b.u.s->s, n); /* UTF-8 byte order is code point order */
        if (c) return c < 0 ? -1 : 1;
        return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len;
    }
    if (a.kind == CV_LIST && b.kind == CV_LIST && (a.flags & CVF_TUPLE) == (b.flags & CVF_TUPLE)) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++)
            if (!ch_equal(a.u.l->v[i], b.u.l->v[i])) return compare(e, a.u.l->v[i], b.u.l->v[i], depth + 1);
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    ch_fail(e, ATTN_STATUS_INVALID_ARGUMENT,
            "'<' not supported between instances of '%s' and '%s'", ch_type_name(a),
            ch_type_name(b));
}

/* ---- buffers ------------------------------------------------------------------------------- */

void ch_buf_put(ch_err *e, ch_buf *b, const char *s, size_t n) {
    if (n == 0) return;
    ch_work(e, n);
    if (b->max && (n > b->max || b->n > b->max - n))
        ch_fail(e, ATTN_STATUS_TOO_LARGE, "the rendered text exceeds the limit of %zu bytes",
                b->max);
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n + 1) {
            if (cap > ((size_t)1 << 46)) ch_fail(e, ATTN_STATUS_TOO_LARGE, "string too large");
            cap *= 2;
        }
        char *p = ch_alloc(e, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void ch_buf_putc(ch_err *e, ch_buf *b, char c) { ch_buf_put(e, b, &c, 1); }

void ch_buf_printf(ch_err *e, ch_buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
    ch_buf_put(e, b, tmp, (size_t)n);
}

/* ---- str / repr ----------------------------------------------------------------------------- */

/* Python's repr(float): the shortest digits that read back exactly; positional notation when
 * the decimal exponent is in [-4, 16), else d.ddde±XX. */
void ch_put_float(ch_buf *b, ch_err *e, double f) {
    if (isnan(f)) return ch_buf_put(e, b, "nan", 3);
    if (isinf(f)) return f < 0 ? ch_buf_put(e, b, "-inf", 4) : ch_buf_put(e, b, "inf", 3);
    char tmp[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp: [-]d[.ddd]e[+-]XX */
    char digits[32];
    int nd = 0, neg = tmp[0] == '-';
    const char *p = tmp + neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char out[64];
    int k = 0;
    if (neg) out[k++] = '-';
    int decpt = exp10 + 1; /* value = 0.DIGITS * 10^decpt */
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[k++] = '0', out[k++] = '.';
            for (int i = 0; i < -decpt; i++) out[k++] = '0';
            for (int i = 0; i < nd; i++) out[k++] = digits[i];
        } else {
            for (int i = 0; i < decpt; i++) out[k++] = i < nd ? digits[i] : '0';
            out[k++] = '.';
            if (nd > decpt)
                for (int i = decpt; i < nd; i++) out[k++] = digits[i];
            else
                out[k++] = '0';
        }
    } else {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++) out[k++] = digits[i];
        }
        k += snprintf(out + k, sizeof out - (size_t)k, "e%c%02d", exp10 < 0 ? '-' : '+',
                      exp10 < 0 ? -exp10 : exp10);
    }
    ch_buf_put(e, b, out, (size_t)k);
}

/* Python's str.isprintable for one code point (approximated: every code point but the C0/C1
 * controls, the line/paragraph separators, the non-space Zs, surrogates, private use and a few
 * format characters). */
static bool printable(uint32_t c) {
    if (c < 0x20 || (c >= 0x7F && c <= 0xA0)) return false;
    if (c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F))
        return false;
    if ((c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF) return false;
    if ((c >= 0xD800 && c <= 0xF8FF) || c >= 0xF0000) return false;
    return true;
}

static void put_str_repr(ch_err *e, ch_buf *b, const ch_str *s) {
    bool sq = memchr(s->s, '\'', s->len) != NULL, dq = memchr(s->s, '"', s->len) != NULL;
    char q = sq && !dq ? '"' : '\'';
    ch_buf_putc(e, b, q);
    for (size_t i = 0; i < s->len;) {
        uint32_t c;
        int n = ch_utf8_decode(s->s + i, s->len - i, &c);
        if (c == (uint32_t)q || c == '\\') {
            ch_buf_putc(e, b, '\\');
            ch_buf_putc(e, b, (char)c);
        } else if (c == '\n') {
            ch_buf_put(e, b, "\\n", 2);
        } else if (c == '\r') {
            ch_buf_put(e, b, "\\r", 2);
        } else if (c == '\t') {
            ch_buf_put(e, b, "\\t", 2);
        } else if (!printable(c)) {
            if (c < 0x100)
                ch_buf_printf(e, b, "\\x%02x", c);
            else if (c < 0x10000)
                ch_buf_printf(e, b, "\\u%04x", c);
            else
                ch_buf_printf(e, b, "\\U%08x", c);
        } else {
            ch_buf_put(e, b, s->s + i, (size_t)n);
        }
        i += (size_t)n;
    }
    ch_buf_putc(e, b, q);
}

static void put_repr(ch_err *e, ch_buf *b, ch_val v, int depth);

void ch_put_repr(ch_err *e, ch_buf *b, ch_val v) { put_repr(e, b, v, 0); }

static void put_repr(ch_err *e, ch_buf *b, ch_val v, int depth) {
    if (depth > 500) ch_fail(e, ATTN_STATUS_TOO_LARGE, "a value nested deeper than 500 levels");
    switch (v.kind) {
    case CV_STR:
        if (v.flags & CVF_MARKUP) ch_buf_put(e, b, "Markup(", 7);
        put_str_repr(e, b, v.u.s);
        if (v.flags & CVF_MARKUP) ch_buf_putc(e, b, ')');
        return;
    case CV_LIST: {
        if (v.flags & CVF_GEN)
            ch_fail(e, ATTN_STATUS_UNSUPPORTED,
                    "printing a generator (the result of map, select, reject, unique, items or reverse "
                    "without |list): jinja2 prints its memory address");
        bool tup = v.flags & CVF_TUPLE;
        ch_buf_putc(e, b, tup ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) ch_buf_put(e, b, ", ", 2);
            put_repr(e, b, v.u.l->v[i], depth + 1);
        }
        if (tup && v.u.l->n == 1) ch_buf_putc(e, b, ',');
        ch_buf_putc(e, b, tup ? ')' : ']');
        return;
    }
    case CV_DICT:
    case CV_NS:
        if (v.kind == CV_NS) ch_buf_put(e, b, "<Namespace ", 11);
        ch_buf_putc(e, b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) ch_buf_put(e, b, ", ", 2);
            put_repr(e, b, v.u.d->k[i], depth + 1);
            ch_buf_put(e, b, ": ", 2);
            put_repr(e, b, v.u.d->v[i], depth + 1);
        }
        ch_buf_putc(e, b, '}');
        if (v.kind == CV_NS) ch_buf_putc(e, b, '>');
        return;
    case CV_UNDEF: ch_buf_put(e, b, "Undefined", 9); return;
    default: ch_put_str(e, b, v);
    }
}

void ch_put_str(ch_err *e, ch_buf *b, ch_val v) {
    switch (v.kind) {
    case CV_UNDEF: return;
    case CV_NONE: ch_buf_put(e, b, "None", 4); return;
    case CV_BOOL: v.u.b ? ch_buf_put(e, b, "True", 4) : ch_buf_put(e, b, "False", 5); return;
    case CV_INT: ch_buf_printf(e, b, "%lld", (long long)v.u.i); return;
    case CV_FLOAT: ch_put_float(b, e, v.u.f); return;
    case CV_STR: ch_buf_put(e, b, v.u.s->s, v.u.s->len); return;
    case CV_LIST:
    case CV_DICT:
    case CV_NS: ch_put_repr(e, b, v); return;
    case CV_LOOP: ch_buf_put(e, b, "<LoopContext>", 13); return;
    case CV_FUNC:
        if (v.u.fn->kind == CF_MACRO)
            ch_buf_printf(e, b, "<Macro '%s'>", v.u.fn->name);
        else
            ch_buf_printf(e, b, "<built-in function %s>", v.u.fn->name);
        return;
    }
}

ch_val ch_to_str(ch_err *e, ch_val v) {
    if (v.kind == CV_STR) return v;
    ch_buf b = {0};
    ch_put_str(e, &b, v);
    return ch_strn(e, b.p ? b.p : "", b.n);
}

/* ---- json.dumps ----------------------------------------------------------------------------- */

static void put_json_str(ch_err *e, ch_buf *b, const char *s, size_t n, bool ascii) {
    ch_buf_putc(e, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        int w = 1;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) snprintf(tmp, sizeof tmp, "\\u%04x", c), esc = tmp;
        else if (c >= 0x80 && ascii) {
            uint32_t cp;
            w = ch_utf8_decode(s + i, n - i, &cp);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (cp >> 10),
                         0xDC00 + (cp & 0x3FF));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            }
            esc = tmp;
        }
        if (esc) {
            ch_buf_put(e, b, s + i - run, run);
            run = 0;
            ch_buf_put(e, b, esc, strlen(esc));
            i += (size_t)w;
        } else {
            run++;
            i++;
        }
    }
    ch_buf_put(e, b, s + n - run, run);
    ch_buf_putc(e, b, '"');
}

static void put_indent(ch_err *e, ch_buf *b, const char *ind, size_t il, int depth) {
    ch_buf_putc(e, b, '\n');
    for (int i = 0; i < depth; i++) ch_buf_put(e, b, ind, il);
}

/* a dict key as json.dumps writes it: strings as they are; numbers, bools and None converted */
static void put_json_key(ch_err *e, ch_buf *b, ch_val k, bool ascii) {
    if (k.kind == CV_STR) return put_json_str(e, b, k.u.s->s, k.u.s->len, ascii);
    ch_buf t = {0};
    if (k.kind == CV_BOOL) ch_buf_put(e, &t, k.u.b ? "true" : "false", k.u.b ? 4 : 5);
    else if (k.kind == CV_NONE) ch_buf_put(e, &t, "null", 4);
    else if (k.kind == CV_INT || k.kind == CV_FLOAT) ch_put_str(e, &t, k);
    else
        ch_fail(e, ATTN_STATUS_INVALID_ARGUMENT,
                "keys must be str, int, float, bool or None, not %s", ch_type_name(k));
    put_json_str(e, b, t.p, t.n, ascii);
}

/* Stable merge sort of the indices idx[0..n) by cmp (which may fail through e). */
void ch_msort(ch_err *e, size_t *idx, size_t n, ch_cmp_fn cmp, void *ctx) {
    if (n < 2) return;
    size_t *tmp = ch_alloc(e, n * sizeof *tmp);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp(e, ctx, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, n * sizeof *idx);
    }
}

static int key_order(ch_err *e, void *ctx, size_t a, size_t b) {
    const ch_dict *d = ctx;
    return ch_compare(e, d->k[a], d->k[b]);
}

void ch_put_json(ch_err *e, ch_buf *b, ch_val v, bool ascii, const char *ind, size_t il,
                 const char *isep, const char *ksep, bool sort_keys, int depth) {
    if (depth > 200) ch_fail(e, ATTN_STATUS_TOO_LARGE, "tojson: nesting deeper than 200");
    switch (v.kind) {
    case CV_NONE: ch_buf_put(e, b, "null", 4); return;
    case CV_BOOL: v.u.b ? ch_buf_put(e, b, "true", 4) : ch_buf_put(e, b, "false", 5); return;
    case CV_INT: ch_buf_printf(e, b, "%lld", (long long)v.u.i); return;
    case CV_FLOAT:
        if (isnan(v.u.f)) ch_buf_put(e, b, "NaN", 3);
        else if (isinf(v.u.f)) v.u.f < 0 ? ch_buf_put(e, b, "-Infinity", 9)
                                         : ch_buf_put(e, b, "Infinity", 8);
        else ch_put_float(b, e, v.u.f);
        return;
    case CV_STR: put_json_str(e, b, v.u.s->s, v.u.s->len, ascii); return;
    case CV_LIST:
        if (v.flags & CVF_GEN)
            ch_fail(e, ATTN_STATUS_INVALID_ARGUMENT, "Object of type generator is not JSON serializable");
        if (v.u.l->n == 0) return ch_buf_put(e, b, "[]", 2);
        ch_buf_putc(e, b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) ch_buf_put(e, b, isep, strlen(isep));
            if (ind) put_indent(e, b, ind, il, depth + 1);
            ch_put_json(e, b, v.u.l->v[i], ascii, ind, il, isep, ksep, sort_keys, depth + 1);
        }
        if (ind) put_indent(e, b, ind, il, depth);
        ch_buf_putc(e, b, ']');
        return;
    case CV_DICT: {
        const ch_dict *d = v.u.d;
        if (d->n == 0) return ch_buf_put(e, b, "{}", 2);
        size_t *order = ch_alloc(e, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (sort_keys) ch_msort(e, order, d->n, key_order, (void *)d);
        ch_buf_putc(e, b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) ch_buf_put(e, b, isep, strlen(isep));
            if (ind) put_indent(e, b, ind, il, depth + 1);
            put_json_key(e, b, d->k[order[i]], ascii);
            ch_buf_put(e, b, ksep, strlen(ksep));
            ch_put_json(e, b, d->v[order[i]], ascii, ind, il, isep, ksep, sort_keys, depth + 1);
        }
        if (ind) put_indent(e, b, ind, il, depth);
        ch_buf_putc(e, b, '}');
        return;
    }
    default: {
        const char *tn = v.kind == CV_NS ? "Namespace" : ch_type_name(v);
        ch_fail(e, ATTN_STATUS_INVALID_ARGUMENT, "Object of type %s is not JSON serializable", tn);
    }
    }
}

/* builtins.c — jinja2's filters and tests, and the Python str / dict / list methods templates
 * call, with the semantics of jinja2 3.1 and CPython (code points, not bytes; case mapping from
 * utf8proc, one code point to one: Python's few one-to-many mappings such as "ß".upper() == "SS"
 * are not made). The name tables list every filter and test jinja2 has: a name attn does not
 * implement is an UNSUPPORTED error when a template evaluates it. */
#include "chat-impl.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define E (cx->e)

#define bfail ch_rfail

/* ---- names ----------------------------------------------------------------------------------- */

enum {
    F_ABS, F_ATTR, F_CAPITALIZE, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE, F_FIRST,
    F_FLOAT, F_FORCEESCAPE, F_INDENT, F_INT, F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_ITEMS,
    F_MAP, F_MIN, F_MAX, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND, F_SAFE, F_SELECT,
    F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TRIM, F_UNIQUE, F_UPPER, F_TOJSON,
    F_CENTER, F_WORDCOUNT, F_N
};
static const char *const filter_names[F_N] = {
    "abs", "attr", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first",
    "float", "forceescape", "indent", "int", "join", "last", "length", "list", "lower", "items",
    "map", "min", "max", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
    "selectattr", "sort", "string", "sum", "title", "trim", "unique", "upper", "tojson",
    "center", "wordcount"};
static const char *const filter_missing[] = {
    "batch", "filesizeformat", "format", "groupby", "pprint", "random", "slice", "striptags",
    "truncate", "urlencode", "urlize", "wordwrap", "xmlattr", NULL};

enum {
    T_ODD, T_EVEN, T_DIVISIBLEBY, T_DEFINED, T_UNDEFINED, T_FILTER, T_TEST, T_NONE, T_BOOLEAN,
    T_FALSE, T_TRUE, T_INTEGER, T_FLOAT, T_LOWER, T_UPPER, T_STRING, T_MAPPING, T_NUMBER,
    T_SEQUENCE, T_ITERABLE, T_CALLABLE, T_SAMEAS, T_ESCAPED, T_IN, T_EQ1, T_EQ2, T_EQ3, T_NE1,
    T_NE2, T_GT1, T_GT2, T_GT3, T_GE1, T_GE2, T_LT1, T_LT2, T_LT3, T_LE1, T_LE2, T_N
};
static const char *const test_names[T_N] = {
    "odd", "even", "divisibleby", "defined", "undefined", "filter", "test", "none", "boolean",
    "false", "true", "integer", "float", "lower", "upper", "string", "mapping", "number",
    "sequence", "iterable", "callable", "sameas", "escaped", "in", "==", "eq", "equalto", "!=",
    "ne", ">", "gt", "greaterthan", ">=", "ge", "<", "lt", "lessthan", "<=", "le"};

int ch_filter_id(const char *name) {
    for (int i = 0; i < F_N; i++)
        if (!strcmp(filter_names[i], name)) return i;
    for (int i = 0; filter_missing[i]; i++)
        if (!strcmp(filter_missing[i], name)) return -2;
    return -1;
}

int ch_test_id(const char *name) {
    for (int i = 0; i < T_N; i++)
        if (!strcmp(test_names[i], name)) return i;
    return -1;
}

/* ---- helpers --------------------------------------------------------------------------------- */

static ch_val arg(ch_args *a, int pos, const char *name, ch_val def) {
    if (pos >= 0 && pos < a->npos) return a->pos[pos];
    for (int i = 0; i < a->nkw; i++)
        if (!strcmp(a->kwn[i], name)) return a->kwv[i];
    return def;
}

static void max_args(ch_cx *cx, const ch_node *at, ch_args *a, int n, const char *what) {
    if (a->npos > n) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "%s takes at most %d argument(s)", what, n);
}

static ch_val str_of(ch_cx *cx, ch_val v) { return ch_to_str(E, v); }

static ch_val list_val(ch_list *l, bool tuple) {
    ch_val v = {CV_LIST, (uint8_t)(tuple ? CVF_TUPLE : 0), {.l = l}};
    return v;
}

static ch_val gen_val(ch_list *l) {
    ch_val v = {CV_LIST, CVF_GEN, {.l = l}};
    return v;
}

static ch_val dict_val(ch_dict *d) {
    ch_val v = {CV_DICT, 0, {.d = d}};
    return v;
}

static ch_val with_markup(ch_val v, bool m) {
    if (m) v.flags |= CVF_MARKUP;
    return v;
}

static bool need_str(ch_cx *cx, const ch_node *at, ch_val v, const char *what) {
    if (v.kind == CV_UNDEF) ch_undef_fail(cx, at, v);
    if (v.kind != CV_STR)
        bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "%s: expected a string, got '%s'", what, ch_type_name(v));
    return true;
}

static int64_t need_int(ch_cx *cx, const ch_node *at, ch_val v, const char *what) {
    if (v.kind == CV_INT) return v.u.i;
    if (v.kind == CV_BOOL) return v.u.b;
    bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "%s: expected an integer, got '%s'", what, ch_type_name(v));
}

/* code point mapping of a string */
static ch_val map_case(ch_cx *cx, const ch_str *s, int mode /* 0 lower 1 upper 2 capitalize */) {
    ch_buf b = {0};
    size_t k = 0;
    for (size_t i = 0; i < s->len; k++) {
        uint32_t c;
        int w = ch_utf8_decode(s->s + i, s->len - i, &c);
        int32_t m = mode == 1 || (mode == 2 && k == 0) ? utf8proc_toupper((int32_t)c)
                                                       : utf8proc_tolower((int32_t)c);
        char o[4];
        ch_buf_put(E, &b, o, (size_t)ch_utf8_encode((uint32_t)m, o));
        i += (size_t)w;
    }
    return ch_strn(E, b.p ? b.p : "", b.n);
}

static bool is_cased_letter(uint32_t c) {
    utf8proc_category_t cat = utf8proc_category((int32_t)c);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

static bool in_set(uint32_t c, const ch_str *chars) {
    for (size_t i = 0; i < chars->len;) {
        uint32_t d;
        i += (size_t)ch_utf8_decode(chars->s + i, chars->len - i, &d);
        if (c == d) return true;
    }
    return false;
}

/* str.strip family: which 1 left, 2 right, 3 both; chars NULL: whitespace */
static ch_val strip(ch_cx *cx, ch_val v, int which, const ch_str *chars) {
    const ch_str *s = v.u.s;
    size_t a = 0, b = s->len;
    if (which & 1)
        while (a < b) {
            uint32_t c;
            int w = ch_utf8_decode(s->s + a, b - a, &c);
            if (chars ? !in_set(c, chars) : !ch_is_space(c)) break;
            a += (size_t)w;
        }
    if (which & 2)
        while (b > a) {
            size_t p = b - 1;
            while (p > a && ((unsigned char)s->s[p] & 0xC0) == 0x80) p--;
            uint32_t c;
            ch_utf8_decode(s->s + p, b - p, &c);
            if (chars ? !in_set(c, chars) : !ch_is_space(c)) break;
            b = p;
        }
    if (a == 0 && b == s->len) return v;
    return with_markup(ch_strn(E, s->s + a, b - a), v.flags & CVF_MARKUP);
}

static const char *find_sub_(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i, n, nn)) return h + i;
    return NULL;
}

static const char *rfind_sub_(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn > hn) return NULL;
    for (size_t i = hn - nn + 1; i-- > 0;)
        if (!memcmp(h + i, n, nn)) return h + i;
    return NULL;
}

/* the searches count the bytes they scanned */
static const char *find_counted(ch_cx *cx, const char *h, size_t hn, const char *n, size_t nn) {
    const char *p = find_sub_(h, hn, n, nn);
    ch_work(E, p ? (uint64_t)(p - h) + nn : hn);
    return p;
}
static const char *rfind_counted(ch_cx *cx, const char *h, size_t hn, const char *n, size_t nn) {
    const char *p = rfind_sub_(h, hn, n, nn);
    ch_work(E, p ? (uint64_t)(h + hn - p) : hn);
    return p;
}
#define find_sub(h, hn, n, nn) find_counted(cx, (h), (hn), (n), (nn))
#define rfind_sub(h, hn, n, nn) rfind_counted(cx, (h), (hn), (n), (nn))

static ch_val replace(ch_cx *cx, ch_val v, const ch_str *old, const ch_str *new_, int64_t count) {
    const ch_str *s = v.u.s;
    ch_buf b = {0};
    b.max = cx->p->max_memory;
    int64_t done = 0;
    if (old->len == 0) { /* between every code point, and at both ends */
        for (size_t i = 0;; ) {
            if (count < 0 || done < count) ch_buf_put(E, &b, new_->s, new_->len), done++;
            if (i >= s->len) break;
            size_t w = ch_utf8_offset(s->s + i, s->len - i, 1);
            ch_buf_put(E, &b, s->s + i, w);
            i += w;
        }
        return ch_strn(E, b.p ? b.p : "", b.n);
    }
    size_t i = 0;
    while (i <= s->len && (count < 0 || done < count)) {
        const char *f = find_sub(s->s + i, s->len - i, old->s, old->len);
        if (!f) break;
        size_t at = (size_t)(f - s->s);
        ch_buf_put(E, &b, s->s + i, at - i);
        ch_buf_put(E, &b, new_->s, new_->len);
        i = at + old->len;
        done++;
    }
    ch_buf_put(E, &b, s->s + i, s->len - i);
    return ch_strn(E, b.p ? b.p : "", b.n);
}

/* str.split / rsplit; sep NULL: runs of whitespace */
static ch_val split(ch_cx *cx, const ch_node *at, const ch_str *s, const ch_str *sep, int64_t maxsplit, bool right) {
    size_t cap = 8, n = 0;
    ch_val *v = ch_alloc(E, cap * sizeof *v);
#define PUSH(x)                                                                                    \
    do {                                                                                           \
        if (n == cap) {                                                                            \
            ch_val *nv = ch_alloc(E, 2 * cap * sizeof *nv);                                        \
            memcpy(nv, v, n * sizeof *nv);                                                         \
            v = nv, cap *= 2;                                                                      \
        }                                                                                          \
        v[n++] = (x);                                                                              \
    } while (0)
    if (sep) {
        if (sep->len == 0) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "empty separator");
        if (!right) {
            size_t i = 0;
            int64_t k = 0;
            for (;;) {
                const char *f = maxsplit < 0 || k < maxsplit ? find_sub(s->s + i, s->len - i, sep->s, sep->len) : NULL;
                if (!f) break;
                PUSH(ch_strn(E, s->s + i, (size_t)(f - s->s) - i));
                i = (size_t)(f - s->s) + sep->len;
                k++;
            }
            PUSH(ch_strn(E, s->s + i, s->len - i));
        } else {
            size_t j = s->len;
            int64_t k = 0;
            for (;;) {
                const char *f = maxsplit < 0 || k < maxsplit ? rfind_sub(s->s, j, sep->s, sep->len) : NULL;
                if (!f) break;
                size_t a = (size_t)(f - s->s) + sep->len;
                PUSH(ch_strn(E, s->s + a, j - a));
                j = (size_t)(f - s->s);
                k++;
            }
            PUSH(ch_strn(E, s->s, j));
            for (size_t x = 0; x < n / 2; x++) {
                ch_val t = v[x];
                v[x] = v[n - 1 - x], v[n - 1 - x] = t;
            }
        }
    } else {
        /* whitespace runs; with maxsplit the remainder (left-stripped) is the last item */
        size_t i = 0;
        int64_t k = 0;
        if (right) bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "rsplit() without a separator is not supported");
        for (;;) {
            while (i < s->len) {
                uint32_t c;
                int w = ch_utf8_decode(s->s + i, s->len - i, &c);
                if (!ch_is_space(c)) break;
                i += (size_t)w;
            }
            if (i >= s->len) break;
            if (maxsplit >= 0 && k >= maxsplit) { /* the rest, trailing whitespace and all */
                PUSH(ch_strn(E, s->s + i, s->len - i));
                break;
            }
            size_t j = i;
            while (j < s->len) {
                uint32_t c;
                int w = ch_utf8_decode(s->s + j, s->len - j, &c);
                if (ch_is_space(c)) break;
                j += (size_t)w;
            }
            PUSH(ch_strn(E, s->s + i, j - i));
            k++;
            i = j;
        }
    }
#undef PUSH
    ch_list *l = ch_list_new(E, 0);
    l->v = v, l->n = n;
    return list_val(l, false);
}

/* Python's str.splitlines */
static size_t line_break_at(const ch_str *s, size_t i, size_t *blen) {
    unsigned char c = (unsigned char)s->s[i];
    if (c == '\r') return *blen = i + 1 < s->len && s->s[i + 1] == '\n' ? 2 : 1;
    if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) return *blen = 1;
    if (c >= 0x80) {
        uint32_t cp;
        int w = ch_utf8_decode(s->s + i, s->len - i, &cp);
        if (cp == 0x85 || cp == 0x2028 || cp == 0x2029) return *blen = (size_t)w;
    }
    return *blen = 0;
}

static ch_list *splitlines(ch_cx *cx, const ch_str *s, bool keepends) {
    size_t cap = 8, n = 0;
    ch_val *v = ch_alloc(E, cap * sizeof *v);
    size_t start = 0;
    for (size_t i = 0; i < s->len;) {
        size_t bl;
        if (line_break_at(s, i, &bl)) {
            if (n == cap) {
                ch_val *nv = ch_alloc(E, 2 * cap * sizeof *nv);
                memcpy(nv, v, n * sizeof *nv);
                v = nv, cap *= 2;
            }
            v[n++] = ch_strn(E, s->s + start, i - start + (keepends ? bl : 0));
            i += bl;
            start = i;
        } else {
            i++;
        }
    }
    if (start < s->len) {
        if (n == cap) {
            ch_val *nv = ch_alloc(E, 2 * cap * sizeof *nv);
            memcpy(nv, v, n * sizeof *nv);
            v = nv;
        }
        v[n++] = ch_strn(E, s->s + start, s->len - start);
    }
    ch_list *l = ch_list_new(E, 0);
    l->v = v, l->n = n;
    return l;
}

static ch_val join(ch_cx *cx, ch_list *items, const ch_str *sep) {
    ch_buf b = {0};
    for (size_t i = 0; i < items->n; i++) {
        if (i && sep) ch_buf_put(E, &b, sep->s, sep->len);
        ch_put_str(E, &b, items->v[i]);
    }
    return ch_strn(E, b.p ? b.p : "", b.n);
}

static size_t v_len(ch_cx *cx, const ch_node *at, ch_val v) {
    switch (v.kind) {
    case CV_UNDEF: return 0;
    case CV_STR: return v.u.s->nch;
    case CV_LIST:
        if (v.flags & CVF_GEN) break;
        return v.u.l->n;
    case CV_DICT: return v.u.d->n;
    case CV_LOOP: return v.u.loop->items->n;
    default: break;
    }
    bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "object of type '%s' has no len()", ch_type_name(v));
}

/* jinja2's attribute getter: "a.b.0" -> getitem per part (integers as integers) */
static ch_val get_path(ch_cx *cx, ch_val item, const ch_str *path) {
    size_t i = 0;
    for (;;) {
        const char *dot = memchr(path->s + i, '.', path->len - i);
        size_t e = dot ? (size_t)(dot - path->s) : path->len;
        bool digits = e > i;
        for (size_t k = i; k < e; k++) digits = digits && path->s[k] >= '0' && path->s[k] <= '9';
        ch_val key = digits && e - i < 18 ? ch_int(strtoll(path->s + i, NULL, 10)) : ch_strn(E, path->s + i, e - i);
        if (item.kind == CV_UNDEF) return item;
        item = ch_getitem(cx, item, key);
        if (!dot) return item;
        i = e + 1;
    }
}

static ch_val lower_if_str(ch_cx *cx, ch_val v, bool cs) {
    if (!cs && v.kind == CV_STR) return map_case(cx, v.u.s, 0);
    return v;
}

typedef struct {
    ch_cx *cx;
    ch_val *keys;
    bool reverse;
} sort_ctx;

static int by_key(ch_err *e, void *c, size_t a, size_t b) {
    sort_ctx *s = c;
    int r = ch_compare(e, s->keys[a], s->keys[b]);
    return s->reverse ? -r : r;
}

/* the sorted copy of items by key(item) */
static ch_list *sorted(ch_cx *cx, ch_list *items, ch_val *keys, bool reverse) {
    size_t n = items->n;
    size_t *idx = ch_alloc(E, (n ? n : 1) * sizeof *idx);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    sort_ctx s = {cx, keys, reverse};
    /* Python's reverse=True keeps equal items in their order: sort by the reversed comparison */
    ch_msort(E, idx, n, by_key, &s);
    ch_list *l = ch_list_new(E, n);
    for (size_t i = 0; i < n; i++) l->v[i] = items->v[idx[i]];
    return l;
}

/* a test by name (select/reject) on v with extra arguments */
static bool run_named_test(ch_cx *cx, const ch_node *at, ch_val name, ch_val v, ch_val *extra, int nextra) {
    if (name.kind != CV_STR) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "the test name must be a string");
    int id = ch_test_id(name.u.s->s);
    if (id < 0) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "no test named '%s'", name.u.s->s);
    ch_args a = {extra, nextra, NULL, NULL, 0};
    return ch_call_test(cx, at, id, v, &a);
}

/* select / reject / selectattr / rejectattr */
static ch_val select_items(ch_cx *cx, const ch_node *at, ch_val v, ch_args *a, bool attr, bool keep) {
    if (!ch_truthy(v)) return gen_val(ch_list_new(E, 0)); /* jinja2: `if value:` */
    ch_list *items = ch_iterate(cx, v);
    int first = attr ? 1 : 0;
    ch_val path = attr ? arg(a, 0, "attribute", ch_undef(NULL)) : ch_none();
    if (attr && path.kind != CV_STR) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "selectattr: the attribute must be a string");
    bool has_test = a->npos > first;
    ch_list *out = ch_list_new(E, items->n);
    size_t k = 0;
    for (size_t i = 0; i < items->n; i++) {
        ch_val x = attr ? get_path(cx, items->v[i], path.u.s) : items->v[i];
        bool r = has_test ? run_named_test(cx, at, a->pos[first], x, a->pos + first + 1, a->npos - first - 1)
                          : ch_truthy(x);
        if (r == keep) out->v[k++] = items->v[i];
    }
    out->n = k;
    return gen_val(out);
}

/* ---- filters ---------------------------------------------------------------------------------- */

static ch_val f_tojson(ch_cx *cx, const ch_node *at, ch_val v, ch_args *a) {
    max_args(cx, at, a, 4, "tojson");
    bool ascii = ch_truthy(arg(a, 0, "ensure_ascii", ch_bool(false)));
    ch_val ind = arg(a, 1, "indent", ch_none()), sep = arg(a, 2, "separators", ch_none());
    bool sk = ch_truthy(arg(a, 3, "sort_keys", ch_bool(false)));
    const char *is = NULL;
    size_t il = 0;
    if (ind.kind == CV_INT || ind.kind == CV_BOOL) {
        int64_t n = ind.kind == CV_INT ? ind.u.i : ind.u.b;
        if (n > 64) bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "tojson: indent %lld is too large", (long long)n);
        il = n > 0 ? (size_t)n : 0;
        char *sp = ch_alloc(E, il + 1);
        memset(sp, ' ', il);
        is = sp;
    } else if (ind.kind == CV_STR) {
        is = ind.u.s->s, il = ind.u.s->len;
    } else if (ind.kind != CV_NONE) {
        bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "tojson: indent must be an integer or a string");
    }
    const char *isep = is ? "," : ", ", *ksep = ": ";
    if (sep.kind == CV_LIST && sep.u.l->n == 2 && sep.u.l->v[0].kind == CV_STR && sep.u.l->v[1].kind == CV_STR)
        isep = sep.u.l->v[0].u.s->s, ksep = sep.u.l->v[1].u.s->s;
    else if (sep.kind != CV_NONE)
        bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "tojson: separators must be a pair of strings");
    if (v.kind == CV_UNDEF) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "Object of type Undefined is not JSON serializable");
    ch_buf b = {0};
    b.max = cx->p->max_output;
    ch_put_json(E, &b, v, ascii, is, il, isep, ksep, sk, 0);
    return ch_strn(E, b.p ? b.p : "", b.n);
}

static ch_val f_indent(ch_cx *cx, const ch_node *at, ch_val v, ch_args *a) {
    ch_val s = str_of(cx, v);
    ch_val w = arg(a, 0, "width", ch_int(4));
    bool first = ch_truthy(arg(a, 1, "first", ch_bool(false))), blank = ch_truthy(arg(a, 2, "blank", ch_bool(false)));
    ch_val ind;
    if (w.kind == CV_STR) ind = w;
    else {
        int64_t n = need_int(cx, at, w, "indent");
        if (n > 1024) bfail(cx, ATTN_STATUS_TOO_LARGE, at, "indent width %lld is too large", (long long)n);
        char sp[1025];
        memset(sp, ' ', n > 0 ? (size_t)n : 0);
        ind = ch_strn(E, sp, n > 0 ? (size_t)n : 0);
    }
    ch_buf t = {0};
    ch_buf_put(E, &t, s.u.s->s, s.u.s->len);
    ch_buf_putc(E, &t, '\n');
    ch_str *withnl = ch_str_new(E, t.p, t.n);
    ch_list *lines = splitlines(cx, withnl, false);
    ch_buf b = {0};
    b.max = cx->p->max_output;
    for (size_t i = 0; i < lines->n; i++) {
        const ch_str *l = lines->v[i].u.s;
        if (i) ch_buf_putc(E, &b, '\n');
        if (i && (blank || l->len)) ch_buf_put(E, &b, ind.u.s->s, ind.u.s->len);
        ch_buf_put(E, &b, l->s, l->len);
    }
    ch_val r = ch_strn(E, b.p ? b.p : "", b.n);
    if (first) {
        ch_buf f = {0};
        ch_buf_put(E, &f, ind.u.s->s, ind.u.s->len);
        ch_buf_put(E, &f, r.u.s->s, r.u.s->len);
        r = ch_strn(E, f.p, f.n);
    }
    return with_markup(r, s.flags & CVF_MARKUP);
}

static ch_val f_title(ch_cx *cx, ch_val v) {
    /* jinja2: words start after runs of [-\s({\[<]; each word's first code point upper, the rest lower */
    ch_val s = str_of(cx, v);
    ch_buf b = {0};
    bool start = true;
    for (size_t i = 0; i < s.u.s->len;) {
        uint32_t c;
        int w = ch_utf8_decode(s.u.s->s + i, s.u.s->len - i, &c);
        bool delim = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || ch_is_space(c);
        int32_t m = delim ? (int32_t)c : start ? utf8proc_toupper((int32_t)c) : utf8proc_tolower((int32_t)c);
        char o[4];
        ch_buf_put(E, &b, o, (size_t)ch_utf8_encode((uint32_t)m, o));
        start = delim;
        i += (size_t)w;
    }
    return ch_strn(E, b.p ? b.p : "", b.n);
}

static ch_val f_int(ch_cx *cx, const ch_node *at, ch_val v, ch_args *a) {
    ch_val def = arg(a, 0, "default", ch_int(0));
    int64_t base = need_int(cx, at, arg(a, 1, "base", ch_int(10)), "int");
    if (v.kind == CV_INT) return v;
    if (v.kind == CV_BOOL) return ch_int(v.u.b);
    if (v.kind == CV_FLOAT) {
        if (!isfinite(v.u.f) || fabs(v.u.f) > 9.2e18) return def;
        return ch_int((int64_t)v.u.f);
    }
    if (v.kind == CV_STR) {
        ch_val s = strip(cx, v, 3, NULL);
        char buf[128];
        size_t k = 0;
        for (size_t i = 0; i < s.u.s->len && k < 127; i++)
            if (s.u.s->s[i] != '_') buf[k++] = s.u.s->s[i];
        buf[k] = '\0';
        if (k && s.u.s->len < 120) {
            char *end;
            errno = 0;
            long long x = strtoll(buf, &end, (int)base);
            if (!*end && !errno) return ch_int(x);
            double d = strtod(buf, &end);
            if (!*end && isfinite(d) && fabs(d) < 9.2e18) return ch_int((int64_t)d);
        }
    }
    return def;
}

static ch_val f_float(ch_cx *cx, ch_val v, ch_args *a) {
    (void)cx;
    ch_val def = arg(a, 0, "default", ch_float(0.0));
    if (v.kind == CV_FLOAT) return v;
    if (v.kind == CV_INT) return ch_float((double)v.u.i);
    if (v.kind == CV_BOOL) return ch_float(v.u.b);
    if (v.kind == CV_STR && v.u.s->len < 120) {
        ch_val s = strip(cx, v, 3, NULL);
        char *end;
        double d = strtod(s.u.s->s, &end);
        if (s.u.s->len && !*end) return ch_float(d);
    }
    return def;
}

static ch_val f_round(ch_cx *cx, const ch_node *at, ch_val v, ch_args *a) {
    int64_t prec = need_int(cx, at, arg(a, 0, "precision", ch_int(0)), "round");
    ch_val m = arg(a, 1, "method", ch_undef(NULL));
    double x = v.kind == CV_FLOAT ? v.u.f : v.kind == CV_INT ? (double)v.u.i : v.kind == CV_BOOL ? v.u.b : NAN;
    if (isnan(x) && v.kind != CV_FLOAT) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "round: not a number");
    if (prec < 0 || prec > 30) bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "round: precision %lld", (long long)prec);
    if (m.kind == CV_STR && strcmp(m.u.s->s, "common")) {
        double p = pow(10, (double)prec);
        if (!strcmp(m.u.s->s, "floor")) return ch_float(floor(x * p) / p);
        if (!strcmp(m.u.s->s, "ceil")) return ch_float(ceil(x * p) / p);
        bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "method must be common, ceil or floor");
    }
    if (!isfinite(x)) return ch_float(x);
    char buf[400];
    snprintf(buf, sizeof buf, "%.*f", (int)prec, x); /* correctly rounded, half to even: Python's */
    return ch_float(strtod(buf, NULL));
}

static ch_val f_minmax(ch_cx *cx, const ch_node *at, ch_val v, ch_args *a, bool max) {
    bool cs = ch_truthy(arg(a, 0, "case_sensitive", ch_bool(false)));
    ch_val attr = arg(a, 1, "attribute", ch_none());
    ch_list *items = ch_iterate(cx, v);
    if (!items->n) return ch_undef("No aggregated item, sequence was empty.");
    size_t best = 0;
    ch_val bk = ch_none();
    for (size_t i = 0; i < items->n; i++) {
        ch_val x = attr.kind == CV_STR ? get_path(cx, items->v[i], attr.u.s) : items->v[i];
        x = lower_if_str(cx, x, cs);
        if (i == 0 || (max ? ch_compare(E, x, bk) > 0 : ch_compare(E, x, bk) < 0)) best = i, bk = x;
    }
    (void)at;
    return items->v[best];
}

ch_val ch_call_filter(ch_cx *cx, const ch_node *at, int fid, ch_val v, ch_args *a) {
    switch (fid) {
    case F_D:
    case F_DEFAULT: {
        ch_val def = arg(a, 0, "default_value", ch_strn(E, "", 0));
        bool boolean = ch_truthy(arg(a, 1, "boolean", ch_bool(false)));
        if (v.kind == CV_UNDEF || (boolean && !ch_truthy(v))) return def;
        return v;
    }
    case F_LENGTH:
    case F_COUNT: return ch_int((int64_t)v_len(cx, at, v));
    case F_TOJSON: return f_tojson(cx, at, v, a);
    case F_SAFE: {
        ch_val s = str_of(cx, v);
        s.flags |= CVF_MARKUP;
        return s;
    }
    case F_E:
    case F_ESCAPE:
    case F_FORCEESCAPE: {
        if (fid != F_FORCEESCAPE && v.kind == CV_STR && (v.flags & CVF_MARKUP)) return v;
        ch_val s = str_of(cx, v);
        ch_buf b = {0};
        for (size_t i = 0; i < s.u.s->len; i++) {
            char c = s.u.s->s[i];
            const char *r = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;"
                            : c == '\'' ? "&#39;" : NULL;
            if (r) ch_buf_put(E, &b, r, strlen(r));
            else ch_buf_putc(E, &b, c);
        }
        return with_markup(ch_strn(E, b.p ? b.p : "", b.n), true);
    }
    case F_STRING: return str_of(cx, v);
    case F_TRIM: {
        ch_val chars = arg(a, 0, "chars", ch_none());
        ch_val s = str_of(cx, v);
        if (chars.kind != CV_NONE && chars.kind != CV_STR)
            bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "trim: chars must be a string or None");
        return strip(cx, s, 3, chars.kind == CV_STR ? chars.u.s : NULL);
    }
    case F_LOWER: return map_case(cx, str_of(cx, v).u.s, 0);
    case F_UPPER: return map_case(cx, str_of(cx, v).u.s, 1);
    case F_CAPITALIZE: return map_case(cx, str_of(cx, v).u.s, 2);
    case F_TITLE: return f_title(cx, v);
    case F_REPLACE: {
        ch_val s = str_of(cx, v), o = arg(a, 0, "old", ch_undef(NULL)), n = arg(a, 1, "new", ch_undef(NULL));
        ch_val c = arg(a, 2, "count", ch_none());
        o = str_of(cx, o), n = str_of(cx, n);
        return replace(cx, s, o.u.s, n.u.s, c.kind == CV_NONE ? -1 : need_int(cx, at, c, "replace"));
    }
    case F_JOIN: {
        ch_val sep = arg(a, 0, "d", ch_strn(E, "", 0)), attr = arg(a, 1, "attribute", ch_none());
        ch_list *items = ch_iterate(cx, v);
        if (attr.kind == CV_STR) {
            ch_list *m = ch_list_new(E, items->n);
            for (size_t i = 0; i < items->n; i++) m->v[i] = get_path(cx, items->v[i], attr.u.s);
            items = m;
        }
        return join(cx, items, str_of(cx, sep).u.s);
    }
    case F_FIRST: {
        if (v.kind == CV_UNDEF) return ch_undef("No first item, sequence was empty.");
        ch_list *l = ch_iterate(cx, v);
        return l->n ? l->v[0] : ch_undef("No first item, sequence was empty.");
    }
    case F_LAST: {
        if (v.kind == CV_UNDEF) return ch_undef("No last item, sequence was empty.");
        if (v.kind == CV_LIST && (v.flags & CVF_GEN))
            bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "'generator' object is not reversible");
        ch_list *l = ch_iterate(cx, v);
        return l->n ? l->v[l->n - 1] : ch_undef("No last item, sequence was empty.");
    }
    case F_LIST: return list_val(ch_iterate(cx, v), false);
    case F_REVERSE: {
        if (v.kind == CV_STR) {
            ch_list *cs = ch_iterate(cx, v);
            ch_buf b = {0};
            for (size_t i = cs->n; i-- > 0;) ch_buf_put(E, &b, cs->v[i].u.s->s, cs->v[i].u.s->len);
            return ch_strn(E, b.p ? b.p : "", b.n);
        }
        ch_list *l = ch_iterate(cx, v), *r = ch_list_new(E, l->n);
        for (size_t i = 0; i < l->n; i++) r->v[i] = l->v[l->n - 1 - i];
        /* reversed(list) is an iterator; a generator or dict goes through list() */
        return v.kind == CV_LIST && !(v.flags & CVF_GEN) ? gen_val(r) : list_val(r, false);
    }
    case F_ITEMS: {
        if (v.kind == CV_UNDEF) return gen_val(ch_list_new(E, 0));
        if (v.kind != CV_DICT) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "Can only get item pairs from a mapping.");
        ch_list *l = ch_list_new(E, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) {
            ch_list *p = ch_list_new(E, 2);
            p->v[0] = v.u.d->k[i], p->v[1] = v.u.d->v[i];
            l->v[i] = list_val(p, true);
        }
        return gen_val(l);
    }
    case F_MAP: {
        if (!ch_truthy(v)) return gen_val(ch_list_new(E, 0)); /* jinja2: `if value:` */
        ch_list *items = ch_iterate(cx, v), *out = ch_list_new(E, items->n);
        ch_val attr = arg(a, -1, "attribute", ch_undef(NULL));
        if (attr.kind != CV_UNDEF) {
            ch_val def = arg(a, -1, "default", ch_undef(NULL));
            if (attr.kind != CV_STR) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "map: attribute must be a string");
            for (size_t i = 0; i < items->n; i++) {
                ch_val x = get_path(cx, items->v[i], attr.u.s);
                out->v[i] = x.kind == CV_UNDEF && def.kind != CV_UNDEF ? def : x;
            }
            return gen_val(out);
        }
        if (a->npos < 1 || a->pos[0].kind != CV_STR) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "map: a filter name or attribute= is needed");
        int id = ch_filter_id(a->pos[0].u.s->s);
        if (id == -1) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "no filter named '%s'", a->pos[0].u.s->s);
        if (id == -2) bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "the filter '%s' is not supported by attn's chat templates", a->pos[0].u.s->s);
        ch_args rest = {a->pos + 1, a->npos - 1, a->kwn, a->kwv, a->nkw};
        for (size_t i = 0; i < items->n; i++) out->v[i] = ch_call_filter(cx, at, id, items->v[i], &rest);
        return gen_val(out);
    }
    case F_SELECT: return select_items(cx, at, v, a, false, true);
    case F_REJECT: return select_items(cx, at, v, a, false, false);
    case F_SELECTATTR: return select_items(cx, at, v, a, true, true);
    case F_REJECTATTR: return select_items(cx, at, v, a, true, false);
    case F_UNIQUE: {
        bool cs = ch_truthy(arg(a, 0, "case_sensitive", ch_bool(false)));
        ch_val attr = arg(a, 1, "attribute", ch_none());
        ch_list *items = ch_iterate(cx, v), *out = ch_list_new(E, items->n);
        ch_val *seen = ch_alloc(E, (items->n ? items->n : 1) * sizeof *seen);
        size_t k = 0;
        for (size_t i = 0; i < items->n; i++) {
            ch_val key = attr.kind == CV_STR ? get_path(cx, items->v[i], attr.u.s) : items->v[i];
            key = lower_if_str(cx, key, cs);
            bool dup = false;
            ch_work(E, k);
            for (size_t j = 0; j < k && !dup; j++) dup = ch_equal(seen[j], key);
            if (!dup) seen[k] = key, out->v[k++] = items->v[i];
        }
        out->n = k;
        return gen_val(out);
    }
    case F_SORT: {
        bool rev = ch_truthy(arg(a, 0, "reverse", ch_bool(false))), cs = ch_truthy(arg(a, 1, "case_sensitive", ch_bool(false)));
        ch_val attr = arg(a, 2, "attribute", ch_none());
        ch_list *items = ch_iterate(cx, v);
        ch_val *keys = ch_alloc(E, (items->n ? items->n : 1) * sizeof *keys);
        for (size_t i = 0; i < items->n; i++)
            keys[i] = lower_if_str(cx, attr.kind == CV_STR ? get_path(cx, items->v[i], attr.u.s) : items->v[i], cs);
        return list_val(sorted(cx, items, keys, rev), false);
    }
    case F_DICTSORT: {
        bool cs = ch_truthy(arg(a, 0, "case_sensitive", ch_bool(false)));
        ch_val by = arg(a, 1, "by", ch_strz(E, "key"));
        bool rev = ch_truthy(arg(a, 2, "reverse", ch_bool(false)));
        if (v.kind != CV_DICT) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "dictsort: expected a mapping");
        int pos = by.kind == CV_STR && !strcmp(by.u.s->s, "value") ? 1 : 0;
        if (!(by.kind == CV_STR && (!strcmp(by.u.s->s, "value") || !strcmp(by.u.s->s, "key"))))
            bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "You can only sort by either \"key\" or \"value\"");
        ch_list *items = ch_list_new(E, v.u.d->n);
        ch_val *keys = ch_alloc(E, (items->n ? items->n : 1) * sizeof *keys);
        for (size_t i = 0; i < v.u.d->n; i++) {
            ch_list *p = ch_list_new(E, 2);
            p->v[0] = v.u.d->k[i], p->v[1] = v.u.d->v[i];
            items->v[i] = list_val(p, true);
            keys[i] = lower_if_str(cx, p->v[pos], cs);
        }
        return list_val(sorted(cx, items, keys, rev), false);
    }
    case F_MIN: return f_minmax(cx, at, v, a, false);
    case F_MAX: return f_minmax(cx, at, v, a, true);
    case F_SUM: {
        ch_val attr = arg(a, 0, "attribute", ch_none()), acc = arg(a, 1, "start", ch_int(0));
        ch_list *items = ch_iterate(cx, v);
        for (size_t i = 0; i < items->n; i++)
            acc = ch_binop(cx, CO_ADD, acc, attr.kind == CV_STR ? get_path(cx, items->v[i], attr.u.s) : items->v[i]);
        return acc;
    }
    case F_ABS:
        if (v.kind == CV_FLOAT) return ch_float(fabs(v.u.f));
        if (v.kind == CV_INT || v.kind == CV_BOOL) {
            int64_t i = v.kind == CV_INT ? v.u.i : v.u.b;
            if (i == INT64_MIN) bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "integer overflow");
            return ch_int(i < 0 ? -i : i);
        }
        bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "bad operand type for abs(): '%s'", ch_type_name(v));
    case F_INT: return f_int(cx, at, v, a);
    case F_FLOAT: return f_float(cx, v, a);
    case F_ROUND: return f_round(cx, at, v, a);
    case F_INDENT: return f_indent(cx, at, v, a);
    case F_ATTR: {
        ch_val name = arg(a, 0, "name", ch_undef(NULL));
        if (name.kind != CV_STR) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "attr: the name must be a string");
        if (v.kind == CV_DICT) { /* attributes only: the methods, not the items */
            ch_val r = ch_getattr(cx, v, name.u.s->s, name.u.s->len);
            if (r.kind == CV_FUNC) return r;
            return ch_undef("'dict object' has no such attribute");
        }
        return ch_getattr(cx, v, name.u.s->s, name.u.s->len);
    }
    case F_CENTER: {
        ch_val s = str_of(cx, v);
        int64_t w = need_int(cx, at, arg(a, 0, "width", ch_int(80)), "center");
        if (w > 1 << 20) bfail(cx, ATTN_STATUS_TOO_LARGE, at, "center: width too large");
        int64_t n = (int64_t)s.u.s->nch;
        if (w <= n) return s;
        int64_t pad = w - n, left = pad / 2 + (pad & w & 1);
        ch_buf b = {0};
        for (int64_t i = 0; i < left; i++) ch_buf_putc(E, &b, ' ');
        ch_buf_put(E, &b, s.u.s->s, s.u.s->len);
        for (int64_t i = 0; i < pad - left; i++) ch_buf_putc(E, &b, ' ');
        return ch_strn(E, b.p, b.n);
    }
    case F_WORDCOUNT: {
        ch_val s = str_of(cx, v);
        int64_t n = 0;
        bool in = false;
        for (size_t i = 0; i < s.u.s->len;) {
            uint32_t c;
            int w = ch_utf8_decode(s.u.s->s + i, s.u.s->len - i, &c);
            utf8proc_category_t cat = utf8proc_category((int32_t)c);
            bool word = c == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                        (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
            if (word && !in) n++;
            in = word;
            i += (size_t)w;
        }
        return ch_int(n);
    }
    default: break;
    }
    bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "the filter '%s' is not supported", fid >= 0 && fid < F_N ? filter_names[fid] : "?");
}

/* ---- tests ------------------------------------------------------------------------------------ */

bool ch_call_test(ch_cx *cx, const ch_node *at, int tid, ch_val v, ch_args *a) {
    ch_val x = a->npos ? a->pos[0] : ch_undef(NULL);
    switch (tid) {
    case T_DEFINED: return v.kind != CV_UNDEF;
    case T_UNDEFINED: return v.kind == CV_UNDEF;
    case T_NONE: return v.kind == CV_NONE;
    case T_BOOLEAN: return v.kind == CV_BOOL;
    case T_TRUE: return v.kind == CV_BOOL && v.u.b;
    case T_FALSE: return v.kind == CV_BOOL && !v.u.b;
    case T_INTEGER: return v.kind == CV_INT;
    case T_FLOAT: return v.kind == CV_FLOAT;
    case T_NUMBER: return v.kind == CV_INT || v.kind == CV_FLOAT || v.kind == CV_BOOL;
    case T_STRING: return v.kind == CV_STR;
    case T_MAPPING: return v.kind == CV_DICT;
    case T_ITERABLE:
        return v.kind == CV_UNDEF || v.kind == CV_STR || v.kind == CV_LIST || v.kind == CV_DICT || v.kind == CV_LOOP;
    case T_SEQUENCE:
        return v.kind == CV_UNDEF || v.kind == CV_STR || (v.kind == CV_LIST && !(v.flags & CVF_GEN)) || v.kind == CV_DICT;
    case T_CALLABLE: return v.kind == CV_FUNC || v.kind == CV_UNDEF; /* Undefined has __call__ */
    case T_ESCAPED: return v.kind == CV_STR && (v.flags & CVF_MARKUP);
    case T_LOWER:
    case T_UPPER: {
        ch_val s = str_of(cx, v);
        bool cased = false;
        for (size_t i = 0; i < s.u.s->len;) {
            uint32_t c;
            i += (size_t)ch_utf8_decode(s.u.s->s + i, s.u.s->len - i, &c);
            utf8proc_category_t cat = utf8proc_category((int32_t)c);
            if (cat == UTF8PROC_CATEGORY_LT) return false;
            if (cat == UTF8PROC_CATEGORY_LU) {
                if (tid == T_LOWER) return false;
                cased = true;
            } else if (cat == UTF8PROC_CATEGORY_LL) {
                if (tid == T_UPPER) return false;
                cased = true;
            }
        }
        return cased;
    }
    case T_ODD:
    case T_EVEN:
    case T_DIVISIBLEBY: {
        ch_val d = tid == T_DIVISIBLEBY ? arg(a, 0, "num", ch_undef(NULL)) : ch_int(2);
        ch_val m = ch_binop(cx, CO_MOD, v, d);
        bool zero = m.kind == CV_FLOAT ? m.u.f == 0 : m.u.i == 0;
        return tid == T_ODD ? (m.kind == CV_FLOAT ? m.u.f == 1 : m.u.i == 1) : zero;
    }
    case T_SAMEAS:
        if (v.kind != x.kind) return false;
        if (v.kind == CV_NONE || v.kind == CV_UNDEF) return true;
        if (v.kind == CV_BOOL) return v.u.b == x.u.b;
        if (v.kind == CV_INT) return v.u.i == x.u.i && v.u.i >= -5 && v.u.i <= 256; /* CPython's cache */
        return v.u.s == x.u.s;
    case T_IN: {
        ch_val seq = arg(a, 0, "seq", ch_undef(NULL));
        if (seq.kind == CV_STR) {
            if (v.kind != CV_STR) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "'in <string>' requires string as left operand");
            return find_sub(seq.u.s->s, seq.u.s->len, v.u.s->s, v.u.s->len) != NULL;
        }
        if (seq.kind == CV_LIST) {
            for (size_t i = 0; i < seq.u.l->n; i++)
                if (ch_equal(seq.u.l->v[i], v)) return true;
            return false;
        }
        if (seq.kind == CV_DICT) return ch_dict_get(seq.u.d, v) != NULL;
        if (seq.kind == CV_UNDEF) return false;
        bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "argument of type '%s' is not iterable", ch_type_name(seq));
    }
    case T_EQ1: case T_EQ2: case T_EQ3: return ch_equal(v, x);
    case T_NE1: case T_NE2: return !ch_equal(v, x);
    case T_GT1: case T_GT2: case T_GT3:
    case T_GE1: case T_GE2:
    case T_LT1: case T_LT2: case T_LT3:
    case T_LE1: case T_LE2: {
        if (v.kind == CV_UNDEF || x.kind == CV_UNDEF)
            ch_undef_fail(cx, at, v.kind == CV_UNDEF ? v : x);
        int c = ch_compare(E, v, x);
        if (tid <= T_GT3) return c > 0;
        if (tid <= T_GE2) return c >= 0;
        if (tid <= T_LT3) return c < 0;
        return c <= 0;
    }
    case T_FILTER:
        return v.kind == CV_STR && ch_filter_id(v.u.s->s) >= 0;
    case T_TEST:
        return v.kind == CV_STR && ch_test_id(v.u.s->s) >= 0;
    default: break;
    }
    bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "the test '%s' is not supported", tid >= 0 && tid < T_N ? test_names[tid] : "?");
}

/* ---- methods ---------------------------------------------------------------------------------- */

static bool affix(ch_cx *cx, const ch_node *at, const ch_str *s, ch_val p, bool end) {
    if (p.kind == CV_LIST && (p.flags & CVF_TUPLE)) {
        for (size_t i = 0; i < p.u.l->n; i++)
            if (affix(cx, at, s, p.u.l->v[i], end)) return true;
        return false;
    }
    if (p.kind != CV_STR)
        bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "%s arg must be str or a tuple of str, not %s",
              end ? "endswith" : "startswith", ch_type_name(p));
    const ch_str *x = p.u.s;
    if (x->len > s->len) return false;
    return !memcmp(end ? s->s + s->len - x->len : s->s, x->s, x->len);
}

/* Python's str.format: {} {0} {name} {name.attr} {name[key]}, {{ and }}; no conversions or specs */
static ch_val str_format(ch_cx *cx, const ch_node *at, const ch_str *f, ch_args *a) {
    ch_buf b = {0};
    int autonum = 0;
    for (size_t i = 0; i < f->len; i++) {
        char c = f->s[i];
        if (c == '}' ) {
            if (i + 1 < f->len && f->s[i + 1] == '}') { ch_buf_putc(E, &b, '}'); i++; continue; }
            bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "Single '}' encountered in format string");
        }
        if (c != '{') { ch_buf_putc(E, &b, c); continue; }
        if (i + 1 < f->len && f->s[i + 1] == '{') { ch_buf_putc(E, &b, '{'); i++; continue; }
        const char *close = memchr(f->s + i, '}', f->len - i);
        if (!close) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "Single '{' encountered in format string");
        size_t a0 = i + 1, a1 = (size_t)(close - f->s);
        for (size_t k = a0; k < a1; k++)
            if (f->s[k] == ':' || f->s[k] == '!' || f->s[k] == '[' || f->s[k] == '.' || f->s[k] == '{')
                bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "str.format with conversions, specs or lookups");
        ch_val v;
        if (a1 == a0) {
            if (autonum >= a->npos) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "Replacement index %d out of range", autonum);
            v = a->pos[autonum++];
        } else if (f->s[a0] >= '0' && f->s[a0] <= '9') {
            long k = strtol(f->s + a0, NULL, 10);
            if (k >= a->npos) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "Replacement index %ld out of range", k);
            v = a->pos[k];
        } else {
            bool found = false;
            for (int k = 0; k < a->nkw; k++)
                if (strlen(a->kwn[k]) == a1 - a0 && !memcmp(a->kwn[k], f->s + a0, a1 - a0)) v = a->kwv[k], found = true;
            if (!found) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "str.format: missing key '%.*s'", (int)(a1 - a0), f->s + a0);
        }
        ch_put_str(E, &b, v);
        i = a1;
    }
    return ch_strn(E, b.p ? b.p : "", b.n);
}

static int64_t cp_index(const ch_str *s, const char *p) { return (int64_t)ch_utf8_count(s->s, (size_t)(p - s->s)); }

static ch_val str_method(ch_cx *cx, const ch_node *at, int id, ch_val self, ch_args *a) {
    const ch_str *s = self.u.s;
    ch_val x0 = a->npos ? a->pos[0] : ch_none();
    switch (id) {
    case 0: case 1: case 2: { /* strip lstrip rstrip */
        if (x0.kind != CV_NONE && x0.kind != CV_STR)
            bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "strip arg must be None or str");
        return strip(cx, self, id == 0 ? 3 : id == 1 ? 1 : 2, x0.kind == CV_STR ? x0.u.s : NULL);
    }
    case 3: case 4: { /* split rsplit */
        ch_val sep = arg(a, 0, "sep", ch_none()), ms = arg(a, 1, "maxsplit", ch_int(-1));
        if (sep.kind != CV_NONE && sep.kind != CV_STR)
            bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "must be str or None, not %s", ch_type_name(sep));
        return split(cx, at, s, sep.kind == CV_STR ? sep.u.s : NULL, need_int(cx, at, ms, "split"), id == 4);
    }
    case 5: case 6: /* startswith endswith */
        if (a->npos != 1) bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "startswith/endswith with start/end arguments");
        return ch_bool(affix(cx, at, s, x0, id == 6));
    case 7: return map_case(cx, s, 1);
    case 8: return map_case(cx, s, 0);
    case 9: { /* title: Python's, by cased letters */
        ch_buf b = {0};
        bool prev = false;
        for (size_t i = 0; i < s->len;) {
            uint32_t c;
            int w = ch_utf8_decode(s->s + i, s->len - i, &c);
            int32_t m = prev ? utf8proc_tolower((int32_t)c) : utf8proc_toupper((int32_t)c);
            char o[4];
            ch_buf_put(E, &b, o, (size_t)ch_utf8_encode((uint32_t)m, o));
            prev = is_cased_letter(c);
            i += (size_t)w;
        }
        return ch_strn(E, b.p ? b.p : "", b.n);
    }
    case 10: return map_case(cx, s, 2);
    case 11: { /* replace */
        if (a->npos < 2) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "replace expected at least 2 arguments");
        need_str(cx, at, a->pos[0], "replace");
        need_str(cx, at, a->pos[1], "replace");
        return replace(cx, self, a->pos[0].u.s, a->pos[1].u.s, a->npos > 2 ? need_int(cx, at, a->pos[2], "replace") : -1);
    }
    case 12: case 13: case 26: case 27: { /* find rfind index rindex */
        need_str(cx, at, x0, "find");
        bool right = id == 13 || id == 27;
        const char *p = right ? rfind_sub(s->s, s->len, x0.u.s->s, x0.u.s->len) : find_sub(s->s, s->len, x0.u.s->s, x0.u.s->len);
        if (!p && id >= 26) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "substring not found");
        return ch_int(p ? cp_index(s, p) : -1);
    }
    case 14: { /* count */
        need_str(cx, at, x0, "count");
        if (x0.u.s->len == 0) return ch_int((int64_t)s->nch + 1);
        int64_t n = 0;
        for (size_t i = 0; i + x0.u.s->len <= s->len;) {
            const char *p = find_sub(s->s + i, s->len - i, x0.u.s->s, x0.u.s->len);
            if (!p) break;
            n++;
            i = (size_t)(p - s->s) + x0.u.s->len;
        }
        return ch_int(n);
    }
    case 15: { /* join */
        ch_list *items = ch_iterate(cx, x0);
        for (size_t i = 0; i < items->n; i++)
            if (items->v[i].kind != CV_STR)
                bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "sequence item %zu: expected str instance, %s found", i,
                      ch_type_name(items->v[i]));
        return join(cx, items, s);
    }
    case 16: return list_val(splitlines(cx, s, ch_truthy(arg(a, 0, "keepends", ch_bool(false)))), false);
    case 17: case 18: case 19: case 20: case 21: case 22: { /* isdigit isalpha isalnum isspace isupper islower */
        if (id >= 21) {
            ch_args none = {0};
            return ch_bool(ch_call_test(cx, at, id == 21 ? T_UPPER : T_LOWER, self, &none));
        }
        if (!s->len) return ch_bool(false);
        for (size_t i = 0; i < s->len;) {
            uint32_t c;
            i += (size_t)ch_utf8_decode(s->s + i, s->len - i, &c);
            utf8proc_category_t cat = utf8proc_category((int32_t)c);
            bool alpha = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
            bool digit = cat == UTF8PROC_CATEGORY_ND;
            bool ok = id == 17 ? digit : id == 18 ? alpha : id == 19 ? alpha || digit || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO
                                                                     : ch_is_space(c);
            if (!ok) return ch_bool(false);
        }
        return ch_bool(true);
    }
    case 23: case 24: { /* removeprefix removesuffix */
        need_str(cx, at, x0, "removeprefix");
        if (!affix(cx, at, s, x0, id == 24)) return self;
        size_t n = x0.u.s->len;
        return id == 23 ? ch_strn(E, s->s + n, s->len - n) : ch_strn(E, s->s, s->len - n);
    }
    case 25: return str_format(cx, at, s, a);
    default: break;
    }
    bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "the string method '%s' is not supported", a ? "str" : "");
}

ch_val ch_call_method(ch_cx *cx, const ch_node *at, ch_func *f, ch_args *a) {
    ch_val self = f->self;
    int id = f->id;
    if (id >= 100 && id < 200) {
        if (id - 100 > 27)
            bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "the string method '%s' is not supported", f->name);
        return str_method(cx, at, id - 100, self, a);
    }
    ch_val x0 = a->npos ? a->pos[0] : ch_undef(NULL);
    if (id >= 200 && id < 300) {
        const ch_dict *d = self.u.d;
        switch (id - 200) {
        case 0: { /* get */
            if (a->npos < 1) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "get expected at least 1 argument");
            ch_val *v = ch_dict_get((ch_dict *)d, x0);
            return v ? *v : a->npos > 1 ? a->pos[1] : ch_none();
        }
        case 1: {
            ch_list *l = ch_list_new(E, d->n);
            for (size_t i = 0; i < d->n; i++) {
                ch_list *p = ch_list_new(E, 2);
                p->v[0] = d->k[i], p->v[1] = d->v[i];
                l->v[i] = list_val(p, true);
            }
            return list_val(l, false);
        }
        case 2:
        case 3: {
            ch_list *l = ch_list_new(E, d->n);
            if (d->n) memcpy(l->v, id == 202 ? d->k : d->v, d->n * sizeof(ch_val)); /* {}: NULL */
            return list_val(l, false);
        }
        case 4: {
            ch_dict *c = ch_dict_new(E, d->n);
            for (size_t i = 0; i < d->n; i++) ch_dict_set(E, c, d->k[i], d->v[i]);
            return dict_val(c);
        }
        default: break;
        }
    } else if (id >= 300 && id < 400) {
        const ch_list *l = self.u.l;
        switch (id - 300) {
        case 0:
            for (size_t i = 0; i < l->n; i++)
                if (ch_equal(l->v[i], x0)) return ch_int((int64_t)i);
            bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "the value is not in the list");
        case 1: {
            int64_t n = 0;
            for (size_t i = 0; i < l->n; i++) n += ch_equal(l->v[i], x0);
            return ch_int(n);
        }
        case 2: {
            ch_list *c = ch_list_new(E, l->n);
            if (l->n) memcpy(c->v, l->v, l->n * sizeof(ch_val));
            return list_val(c, false);
        }
        default: break;
        }
    } else if (id == 400) { /* loop.cycle */
        if (!a->npos) bfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "no items for cycling given");
        return a->pos[self.u.loop->i % (size_t)a->npos];
    }
    bfail(cx, ATTN_STATUS_UNSUPPORTED, at, "the method '%s' is not supported", f->name);
}

/* eval.c — the interpreter: statements and expressions of the syntax tree over ch_val, with
 * jinja2's semantics under ImmutableSandboxedEnvironment:
 *   - Undefined: a missing variable, attribute or item is Undefined; printing it gives "",
 *     iterating it nothing, testing it false; arithmetic, attribute access, calls on it fail
 *     ("'x' is undefined");
 *   - scopes: a for loop (and its else), a macro call, a block set, a filter block and a
 *     generation block each get a frame of their own, whose sets do not leak out; if does not;
 *   - attribute access tries the Python attribute (methods) first, then the item; item access
 *     the item first, then the attribute; methods that modify a list or dict are refused, as the
 *     sandbox refuses them;
 *   - arithmetic with Python's rules (floor division and modulo round toward -inf, / is float),
 *     on 64-bit integers (an overflow is an error rather than a big integer).
 * Every loop iteration and macro call counts toward max_steps; nesting toward max_depth. */
#include "chat-impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { FLOW_NONE = 0, FLOW_BREAK, FLOW_CONTINUE };

#define E (cx->e)

static ch_val eval(ch_cx *cx, const ch_node *n);
static int exec_body(ch_cx *cx, ch_node **body, int n);

void ch_rfail(ch_cx *cx, attn_status s, const ch_node *at, const char *fmt, ...) {
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    int line = at ? at->line : cx->line;
    if (line) ch_fail(E, s, "%s:%d: %s", cx->name, line, m);
    ch_fail(E, s, "%s: %s", cx->name, m);
}

/* Using an Undefined value fails with its hint. */
void ch_undef_fail(ch_cx *cx, const ch_node *at, ch_val v) {
    if (v.flags & CVF_UNAME) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "'%s' is undefined", v.u.hint);
    ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "%s", v.u.hint ? v.u.hint : "a value is undefined");
}

static const char *hintf(ch_cx *cx, const char *fmt, const char *a, const char *b) {
    size_t n = strlen(fmt) + strlen(a) + (b ? strlen(b) : 0) + 1;
    if (n > 300) n = 300;
    char *s = ch_alloc(E, n);
    snprintf(s, n, fmt, a, b ? b : "");
    return s;
}

void ch_count_steps(ch_cx *cx, uint64_t n) {
    cx->steps += n;
    if (cx->steps > cx->p->max_steps)
        ch_rfail(cx, ATTN_STATUS_TOO_LARGE, NULL,
              "more than %llu loop iterations and macro calls (the render's limit)",
              (unsigned long long)cx->p->max_steps);
}

static void deeper(ch_cx *cx, const ch_node *at) {
    if (++cx->depth > cx->p->max_depth)
        ch_rfail(cx, ATTN_STATUS_TOO_LARGE, at, "evaluation nested deeper than %d", cx->p->max_depth);
}

/* ---- frames --------------------------------------------------------------------------------- */

static ch_frame *frame_new(ch_cx *cx, ch_frame *parent) {
    ch_frame *f = ch_alloc(E, sizeof *f);
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

static void frame_set(ch_cx *cx, ch_frame *f, const char *name, ch_val v) {
    ch_work(E, f->n);
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) {
            f->vals[i] = v;
            return;
        }
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 8;
        const char **nn = ch_alloc(E, cap * sizeof *nn);
        ch_val *nv = ch_alloc(E, cap * sizeof *nv);
        if (f->n) memcpy(nn, f->names, f->n * sizeof *nn), memcpy(nv, f->vals, f->n * sizeof *nv);
        f->names = nn, f->vals = nv, f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n] = v;
    f->n++;
}

static ch_val *frame_find(ch_frame *f, const char *name) {
    for (; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (!strcmp(f->names[i], name)) return &f->vals[i];
    return NULL;
}

/* ---- attribute and item access ------------------------------------------------------------- */

static ch_val method(ch_cx *cx, ch_val self, int id, const char *name) {
    ch_func *f = ch_alloc(E, sizeof *f);
    memset(f, 0, sizeof *f);
    f->kind = CF_METHOD, f->id = id, f->name = name, f->self = self;
    ch_val v = {CV_FUNC, 0, {.fn = f}};
    return v;
}

/* method ids: the names each type has (builtins.c implements them) */
static const char *const str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "replace", "find", "rfind", "count", "join", "splitlines", "isdigit",
    "isalpha", "isalnum", "isspace", "isupper", "islower", "removeprefix", "removesuffix",
    "format", "index", "rindex", "center", "ljust", "rjust", "zfill", "casefold", "swapcase",
    "partition", "rpartition", "isnumeric", "isdecimal", "istitle", "isidentifier",
    "isprintable", "isascii", "expandtabs", "encode", "translate", "maketrans", "format_map",
    NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", "copy", "fromkeys",
                                           NULL};
static const char *const dict_mutating[] = {"pop", "popitem", "setdefault", "update", "clear", NULL};
static const char *const list_methods[] = {"index", "count", "copy", NULL};
static const char *const list_mutating[] = {"append", "extend", "insert", "pop", "remove",
                                            "reverse", "sort", "clear", NULL};

static int find_name(const char *const *tab, const char *name, size_t len) {
    for (int i = 0; tab[i]; i++)
        if (strlen(tab[i]) == len && !memcmp(tab[i], name, len)) return i;
    return -1;
}

/* method id spaces: str 100+, dict 200+, list 300+, loop 400+ */
static ch_val unsafe(ch_cx *cx, const char *name, const char *type) {
    return ch_undef(hintf(cx, "access to attribute '%s' of '%s' object is unsafe", name, type));
}

static ch_val loop_attr(ch_cx *cx, ch_val v, const char *name) {
    const ch_loop *l = v.u.loop;
    size_t n = l->items->n, i = l->i;
    if (!strcmp(name, "index")) return ch_int((int64_t)i + 1);
    if (!strcmp(name, "index0")) return ch_int((int64_t)i);
    if (!strcmp(name, "revindex")) return ch_int((int64_t)(n - i));
    if (!strcmp(name, "revindex0")) return ch_int((int64_t)(n - i - 1));
    if (!strcmp(name, "first")) return ch_bool(i == 0);
    if (!strcmp(name, "last")) return ch_bool(i + 1 == n);
    if (!strcmp(name, "length")) return ch_int((int64_t)n);
    if (!strcmp(name, "depth")) return ch_int(l->depth0 + 1);
    if (!strcmp(name, "depth0")) return ch_int(l->depth0);
    if (!strcmp(name, "previtem"))
        return i > 0 ? l->items->v[i - 1] : ch_undef("there is no previous item");
    if (!strcmp(name, "nextitem"))
        return i + 1 < n ? l->items->v[i + 1] : ch_undef("there is no next item");
    if (!strcmp(name, "cycle")) return method(cx, v, 400, "cycle");
    if (!strcmp(name, "changed")) return method(cx, v, 401, "changed");
    return ch_undef(hintf(cx, "'LoopContext object' has no attribute '%s'%s", name, NULL));
}

ch_val ch_getattr(ch_cx *cx, ch_val v, const char *name, size_t len) {
    if (v.kind == CV_UNDEF) ch_undef_fail(cx, NULL, v);
    if (v.kind == CV_DICT || v.kind == CV_NS) ch_work(E, v.u.d->n); /* a linear search */
    if (len && name[0] == '_') return unsafe(cx, name, ch_type_name(v));
    int id;
    switch (v.kind) {
    case CV_STR:
        if ((id = find_name(str_methods, name, len)) >= 0) return method(cx, v, 100 + id, str_methods[id]);
        break;
    case CV_DICT:
        if ((id = find_name(dict_methods, name, len)) >= 0) return method(cx, v, 200 + id, dict_methods[id]);
        if (find_name(dict_mutating, name, len) >= 0) return unsafe(cx, name, "dict");
        {
            ch_val *x = ch_dict_gets(v.u.d, name, len);
            if (x) return *x;
        }
        break;
    case CV_LIST:
        if ((id = find_name(list_methods, name, len)) >= 0) return method(cx, v, 300 + id, list_methods[id]);
        if (find_name(list_mutating, name, len) >= 0) return unsafe(cx, name, ch_type_name(v));
        break;
    case CV_NS: {
        ch_val *x = ch_dict_gets(v.u.d, name, len);
        if (x) return *x;
        break;
    }
    case CV_LOOP: return loop_attr(cx, v, name);
    default: break;
    }
    if (v.kind == CV_NONE) return ch_undef(hintf(cx, "'None' has no attribute '%s'%s", name, NULL));
    return ch_undef(hintf(cx, "'%s object' has no attribute '%s'", ch_type_name(v), name));
}

static int64_t as_index(ch_val k, bool *ok) {
    *ok = k.kind == CV_INT || k.kind == CV_BOOL;
    return k.kind == CV_INT ? k.u.i : k.kind == CV_BOOL ? k.u.b : 0;
}

ch_val ch_getitem(ch_cx *cx, ch_val v, ch_val key) {
    if (v.kind == CV_UNDEF) ch_undef_fail(cx, NULL, v);
    if (v.kind == CV_DICT) ch_work(E, v.u.d->n);
    if (v.kind == CV_STR) ch_work(E, v.u.s->len); /* code point indexing scans */
    bool ok;
    switch (v.kind) {
    case CV_DICT: {
        if (key.kind == CV_LIST && !(key.flags & CVF_TUPLE)) break; /* unhashable */
        ch_val *x = ch_dict_get(v.u.d, key);
        if (x) return *x;
        break;
    }
    case CV_LIST: {
        int64_t i = as_index(key, &ok);
        if (v.flags & CVF_GEN) return ch_undef("'generator' object is not subscriptable");
        if (ok) {
            int64_t n = (int64_t)v.u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return v.u.l->v[i];
            return ch_undef(hintf(cx, "%s object has no element %s", ch_type_name(v), "(index out of range)"));
        }
        break;
    }
    case CV_STR: {
        int64_t i = as_index(key, &ok);
        if (ok) {
            int64_t n = (int64_t)v.u.s->nch;
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t a = ch_utf8_offset(v.u.s->s, v.u.s->len, (size_t)i);
                size_t b = ch_utf8_offset(v.u.s->s + a, v.u.s->len - a, 1) + a;
                return ch_strn(E, v.u.s->s + a, b - a);
            }
            return ch_undef("str object has no element (index out of range)");
        }
        break;
    }
    default: break;
    }
    if (key.kind == CV_STR) {
        ch_val r = ch_getattr(cx, v, key.u.s->s, key.u.s->len);
        return r;
    }
    if (v.kind == CV_NONE) return ch_undef("'None' has no attribute or item");
    return ch_undef(hintf(cx, "'%s object' has no attribute or item %s", ch_type_name(v), "of that key"));
}

/* Python's slice of a sequence of n items: the selected indices' first, step, count */
static size_t slice_indices(ch_cx *cx, const ch_node *at, ch_val *sv, int64_t n, int64_t *start,
                            int64_t *step) {
    int64_t st = 1, a, b;
    bool ok;
    if (sv[2].kind != CV_NONE) {
        st = as_index(sv[2], &ok);
        if (!ok) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "slice indices must be integers or None");
        if (st == 0) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "slice step cannot be zero");
    }
    for (int k = 0; k < 2; k++)
        if (sv[k].kind != CV_NONE) {
            as_index(sv[k], &ok);
            if (!ok) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "slice indices must be integers or None");
        }
    if (st > 0) {
        a = sv[0].kind == CV_NONE ? 0 : as_index(sv[0], &ok);
        b = sv[1].kind == CV_NONE ? n : as_index(sv[1], &ok);
        if (a < 0) a = a + n < 0 ? 0 : a + n;
        if (a > n) a = n;
        if (b < 0) b = b + n < 0 ? 0 : b + n;
        if (b > n) b = n;
        *start = a, *step = st;
        return b > a ? (size_t)((b - a + st - 1) / st) : 0;
    }
    a = sv[0].kind == CV_NONE ? n - 1 : as_index(sv[0], &ok);
    b = sv[1].kind == CV_NONE ? -1 : as_index(sv[1], &ok);
    if (sv[0].kind != CV_NONE) {
        if (a < 0) a = a + n < 0 ? -1 : a + n;
        if (a >= n) a = n - 1;
    }
    if (sv[1].kind != CV_NONE) {
        if (b < 0) b = b + n < 0 ? -1 : b + n;
        if (b >= n) b = n - 1;
    }
    *start = a, *step = st;
    return a > b ? (size_t)((a - b + (-st) - 1) / (-st)) : 0;
}

static ch_val eval_slice(ch_cx *cx, const ch_node *n) {
    ch_val v = eval(cx, n->a);
    if (v.kind == CV_UNDEF) ch_undef_fail(cx, n, v);
    ch_val sv[3];
    for (int k = 0; k < 3; k++) sv[k] = n->args[k] ? eval(cx, n->args[k]) : ch_none();
    for (int k = 0; k < 3; k++)
        if (sv[k].kind == CV_UNDEF) return ch_undef("a slice index is undefined");
    int64_t start, step;
    if (v.kind == CV_LIST && (v.flags & CVF_GEN)) return ch_undef("'generator' object is not subscriptable");
    if (v.kind == CV_LIST) {
        size_t cnt = slice_indices(cx, n, sv, (int64_t)v.u.l->n, &start, &step);
        ch_list *l = ch_list_new(E, cnt);
        for (size_t i = 0; i < cnt; i++) l->v[i] = v.u.l->v[start + (int64_t)i * step];
        ch_val r = {CV_LIST, (uint8_t)(v.flags & CVF_TUPLE), {.l = l}};
        return r;
    }
    if (v.kind == CV_STR) {
        const ch_str *s = v.u.s;
        size_t cnt = slice_indices(cx, n, sv, (int64_t)s->nch, &start, &step);
        ch_buf b = {0};
        if (s->nch == s->len) {
            for (size_t i = 0; i < cnt; i++) ch_buf_putc(E, &b, s->s[start + (int64_t)i * step]);
        } else if (step == 1) {
            size_t a = ch_utf8_offset(s->s, s->len, (size_t)start);
            size_t z = ch_utf8_offset(s->s + a, s->len - a, cnt) + a;
            ch_buf_put(E, &b, s->s + a, z - a);
        } else { /* offsets of every code point, then pick */
            size_t *off = ch_alloc(E, (s->nch + 1) * sizeof *off), k = 0;
            for (size_t i = 0; i < s->len; i++)
                if (((unsigned char)s->s[i] & 0xC0) != 0x80) off[k++] = i;
            off[k] = s->len;
            for (size_t i = 0; i < cnt; i++) {
                size_t c = (size_t)(start + (int64_t)i * step);
                ch_buf_put(E, &b, s->s + off[c], off[c + 1] - off[c]);
            }
        }
        ch_val r = ch_strn(E, b.p ? b.p : "", b.n);
        r.flags = v.flags & CVF_MARKUP;
        return r;
    }
    return ch_undef(hintf(cx, "'%s' object is not subscriptable by a slice%s", ch_type_name(v), NULL));
}

/* ---- iteration ------------------------------------------------------------------------------ */

ch_list *ch_iterate(ch_cx *cx, ch_val v) {
    switch (v.kind) {
    case CV_UNDEF: return ch_list_new(E, 0);
    case CV_LIST: return v.u.l;
    case CV_DICT: {
        ch_list *l = ch_list_new(E, v.u.d->n);
        if (v.u.d->n) memcpy(l->v, v.u.d->k, v.u.d->n * sizeof(ch_val)); /* {}: l->v may be NULL */
        return l;
    }
    case CV_STR: {
        const ch_str *s = v.u.s;
        ch_list *l = ch_list_new(E, s->nch);
        for (size_t i = 0, k = 0; i < s->len; k++) {
            size_t w = ch_utf8_offset(s->s + i, s->len - i, 1);
            l->v[k] = ch_strn(E, s->s + i, w);
            i += w;
        }
        return l;
    }
    case CV_LOOP: return v.u.loop->items;
    default:
        ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, NULL, "'%s' object is not iterable", ch_type_name(v));
    }
}

/* ---- operators -------------------------------------------------------------------------------- */

static bool is_num(ch_val v) { return v.kind == CV_BOOL || v.kind == CV_INT || v.kind == CV_FLOAT; }
static double fnum(ch_val v) {
    return v.kind == CV_FLOAT ? v.u.f : v.kind == CV_INT ? (double)v.u.i : (double)v.u.b;
}
static int64_t inum(ch_val v) { return v.kind == CV_INT ? v.u.i : (int64_t)v.u.b; }

static const char *op_sym(int op) {
    static const char *s[] = {"?", "+", "-", "*", "/", "//", "%", "**"};
    return op >= CO_ADD && op <= CO_POW ? s[op] : "?";
}

#if defined(__GNUC__)
__attribute__((noreturn))
#endif
static void type_error(ch_cx *cx, int op, ch_val a, ch_val b) {
    ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, NULL, "unsupported operand type(s) for %s: '%s' and '%s'",
          op_sym(op), ch_type_name(a), ch_type_name(b));
}

static void overflow(ch_cx *cx) {
    ch_rfail(cx, ATTN_STATUS_UNSUPPORTED, NULL, "integer overflow (attn computes with 64-bit integers)");
}

/* Python's float divmod */
static void fdivmod(double x, double y, double *fl, double *md) {
    double mod = fmod(x, y), div = (x - mod) / y;
    if (mod != 0) {
        if ((y < 0) != (mod < 0)) mod += y, div -= 1.0;
    } else {
        mod = copysign(0.0, y);
    }
    double f;
    if (div != 0) {
        f = floor(div);
        if (div - f > 0.5) f += 1.0;
    } else {
        f = copysign(0.0, x / y);
    }
    *fl = f, *md = mod;
}

/* HTML escaping as markupsafe.escape */
static void put_escaped(ch_err *e, ch_buf *b, const ch_str *s) {
    for (size_t i = 0; i < s->len; i++) {
        char c = s->s[i];
        switch (c) {
        case '&': ch_buf_put(e, b, "&amp;", 5); break;
        case '<': ch_buf_put(e, b, "&lt;", 4); break;
        case '>': ch_buf_put(e, b, "&gt;", 4); break;
        case '"': ch_buf_put(e, b, "&#34;", 5); break;
        case '\'': ch_buf_put(e, b, "&#39;", 5); break;
        default: ch_buf_putc(e, b, c);
        }
    }
}

static ch_val repeat(ch_cx *cx, ch_val s, int64_t times) {
    if (times <= 0) {
        if (s.kind == CV_STR) return ch_strn(E, "", 0);
        ch_val r = {CV_LIST, s.flags, {.l = ch_list_new(E, 0)}};
        return r;
    }
    size_t unit = s.kind == CV_STR ? s.u.s->len : s.u.l->n * sizeof(ch_val), total;
    if (!attn_size_mul(unit, (size_t)times, &total) || total > cx->p->max_memory)
        ch_rfail(cx, ATTN_STATUS_TOO_LARGE, NULL, "a repetition of %lld is too large", (long long)times);
    if (s.kind == CV_STR) {
        ch_buf b = {0};
        for (int64_t i = 0; i < times; i++) ch_buf_put(E, &b, s.u.s->s, s.u.s->len);
        ch_val r = ch_strn(E, b.p ? b.p : "", b.n);
        r.flags = s.flags & CVF_MARKUP;
        return r;
    }
    size_t n = s.u.l->n;
    ch_list *l = ch_list_new(E, n * (size_t)times);
    for (int64_t i = 0; i < times; i++)
        if (n) memcpy(l->v + (size_t)i * n, s.u.l->v, n * sizeof(ch_val));
    ch_val r = {CV_LIST, s.flags, {.l = l}};
    return r;
}

ch_val ch_binop(ch_cx *cx, int op, ch_val a, ch_val b) {
    if (a.kind == CV_UNDEF) ch_undef_fail(cx, NULL, a);
    if (b.kind == CV_UNDEF) ch_undef_fail(cx, NULL, b);
    if (is_num(a) && is_num(b)) {
        bool fl = a.kind == CV_FLOAT || b.kind == CV_FLOAT;
        if (!fl) {
            int64_t x = inum(a), y = inum(b), r;
            switch (op) {
            case CO_ADD: if (__builtin_add_overflow(x, y, &r)) overflow(cx); return ch_int(r);
            case CO_SUB: if (__builtin_sub_overflow(x, y, &r)) overflow(cx); return ch_int(r);
            case CO_MUL: if (__builtin_mul_overflow(x, y, &r)) overflow(cx); return ch_int(r);
            case CO_DIV:
                if (y == 0) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, NULL, "division by zero");
                return ch_float((double)x / (double)y);
            case CO_FLOORDIV:
            case CO_MOD: {
                if (y == 0)
                    ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, NULL, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) {
                    if (op == CO_MOD) return ch_int(0);
                    overflow(cx);
                }
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) q--, m += y;
                return ch_int(op == CO_FLOORDIV ? q : m);
            }
            case CO_POW:
                if (y >= 0) {
                    int64_t acc = 1, base = x;
                    for (int64_t e = y; e > 0; e >>= 1) {
                        if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) overflow(cx);
                        if (e > 1 && __builtin_mul_overflow(base, base, &base)) overflow(cx);
                    }
                    return ch_int(acc);
                }
                if (x == 0)
                    ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, NULL,
                          "0.0 cannot be raised to a negative power");
                return ch_float(pow((double)x, (double)y));
            default: break;
            }
        }
        double x = fnum(a), y = fnum(b);
        switch (op) {
        case CO_ADD: return ch_float(x + y);
        case CO_SUB: return ch_float(x - y);
        case CO_MUL: return ch_float(x * y);
        case CO_DIV:
            if (y == 0) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, NULL, "float division by zero");
            return ch_float(x / y);
        case CO_FLOORDIV:
        case CO_MOD: {
            if (y == 0) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, NULL, "float modulo or division by zero");
            double q, m;
            fdivmod(x, y, &q, &m);
            return ch_float(op == CO_MOD ? m : q);
        }
        case CO_POW:
            if (x == 0 && y < 0)
                ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, NULL, "0.0 cannot be raised to a negative power");
            if (x < 0 && y != floor(y))
                ch_rfail(cx, ATTN_STATUS_UNSUPPORTED, NULL, "a negative number to a fractional power (a complex number)");
            return ch_float(pow(x, y));
        default: break;
        }
    }
    if (op == CO_ADD && a.kind == CV_STR && b.kind == CV_STR) {
        ch_buf buf = {0};
        bool ma = a.flags & CVF_MARKUP, mb = b.flags & CVF_MARKUP;
        /* Markup + str escapes the str (markupsafe), and so does str + Markup */
        if (mb && !ma) put_escaped(E, &buf, a.u.s);
        else ch_buf_put(E, &buf, a.u.s->s, a.u.s->len);
        if (ma && !mb) put_escaped(E, &buf, b.u.s);
        else ch_buf_put(E, &buf, b.u.s->s, b.u.s->len);
        ch_val r = ch_strn(E, buf.p ? buf.p : "", buf.n);
        if (ma || mb) r.flags = CVF_MARKUP;
        return r;
    }
    if (op == CO_ADD && a.kind == CV_LIST && b.kind == CV_LIST && !((a.flags | b.flags) & CVF_GEN) &&
        (a.flags & CVF_TUPLE) == (b.flags & CVF_TUPLE)) {
        ch_list *l = ch_list_new(E, a.u.l->n + b.u.l->n);
        if (a.u.l->n) memcpy(l->v, a.u.l->v, a.u.l->n * sizeof(ch_val));
        if (b.u.l->n) memcpy(l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(ch_val));
        ch_val r = {CV_LIST, a.flags, {.l = l}};
        return r;
    }
    if (op == CO_MUL && (a.kind == CV_STR || a.kind == CV_LIST) && (b.kind == CV_INT || b.kind == CV_BOOL))
        return repeat(cx, a, inum(b));
    if (op == CO_MUL && (b.kind == CV_STR || b.kind == CV_LIST) && (a.kind == CV_INT || a.kind == CV_BOOL))
        return repeat(cx, b, inum(a));
    if (op == CO_MOD && a.kind == CV_STR)
        ch_rfail(cx, ATTN_STATUS_UNSUPPORTED, NULL, "printf-style string formatting ('...' %% x) is not supported");
    type_error(cx, op, a, b);
}

static bool contains(ch_cx *cx, const ch_node *at, ch_val item, ch_val seq) {
    switch (seq.kind) {
    case CV_UNDEF: return false;
    case CV_STR:
        if (item.kind == CV_UNDEF) ch_undef_fail(cx, at, item);
        if (item.kind != CV_STR)
            ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "'in <string>' requires string as left operand, not %s",
                  ch_type_name(item));
        if (item.u.s->len == 0) return true;
        if (item.u.s->len > seq.u.s->len) return false;
        ch_work(E, seq.u.s->len);
        for (size_t i = 0; i + item.u.s->len <= seq.u.s->len; i++)
            if (seq.u.s->s[i] == item.u.s->s[0] && !memcmp(seq.u.s->s + i, item.u.s->s, item.u.s->len))
                return true;
        return false;
    case CV_LIST:
        ch_work(E, seq.u.l->n);
        for (size_t i = 0; i < seq.u.l->n; i++)
            if (ch_equal(seq.u.l->v[i], item)) return true;
        return false;
    case CV_DICT: ch_work(E, seq.u.d->n); return ch_dict_get(seq.u.d, item) != NULL;
    case CV_LOOP: {
        ch_list *l = seq.u.loop->items;
        for (size_t i = 0; i < l->n; i++)
            if (ch_equal(l->v[i], item)) return true;
        return false;
    }
    default:
        ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "argument of type '%s' is not iterable", ch_type_name(seq));
    }
}

static bool compare(ch_cx *cx, const ch_node *at, int op, ch_val a, ch_val b) {
    switch (op) {
    case CO_EQ: return ch_equal(a, b);
    case CO_NE: return !ch_equal(a, b);
    case CO_IN: return contains(cx, at, a, b);
    case CO_NOTIN: return !contains(cx, at, a, b);
    default: break;
    }
    if (a.kind == CV_UNDEF) ch_undef_fail(cx, at, a);
    if (b.kind == CV_UNDEF) ch_undef_fail(cx, at, b);
    if ((a.kind == CV_FLOAT && isnan(a.u.f)) || (b.kind == CV_FLOAT && isnan(b.u.f))) return false;
    int c = ch_compare(E, a, b);
    switch (op) {
    case CO_LT: return c < 0;
    case CO_LE: return c <= 0;
    case CO_GT: return c > 0;
    default: return c >= 0;
    }
}

/* ---- calls ------------------------------------------------------------------------------------ */

static void eval_args(ch_cx *cx, const ch_node *n, ch_args *a, int extra_kw) {
    a->npos = n->nargs;
    a->pos = n->nargs ? ch_alloc(E, (size_t)n->nargs * sizeof(ch_val)) : NULL;
    for (int i = 0; i < n->nargs; i++) a->pos[i] = eval(cx, n->args[i]);
    a->nkw = n->nkw;
    int cap = n->nkw + extra_kw;
    a->kwn = cap ? ch_alloc(E, (size_t)cap * sizeof(char *)) : NULL;
    a->kwv = cap ? ch_alloc(E, (size_t)cap * sizeof(ch_val)) : NULL;
    for (int i = 0; i < n->nkw; i++) a->kwn[i] = n->kwn[i], a->kwv[i] = eval(cx, n->kwv[i]);
}

ch_val ch_call_macro(ch_cx *cx, ch_func *f, ch_args *a, const ch_node *at) {
    const ch_node *m = f->macro;
    ch_count_steps(cx, 1);
    deeper(cx, at);
    ch_frame *fr = frame_new(cx, f->closure), *saved = cx->frame;
    cx->frame = fr;
    const char *mname = m->name ? m->name : "caller";
    bool uses_varargs = m->op & 1, uses_kwargs = m->op & 2, uses_caller = m->op & 4;
    if (a->npos > m->nargs && !uses_varargs)
        ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "macro '%s' takes not more than %d argument(s)", mname,
              m->nargs);
    bool *used = a->nkw ? ch_alloc(E, (size_t)a->nkw) : NULL;
    if (used) memset(used, 0, (size_t)a->nkw);
    for (int i = 0; i < m->nargs; i++) {
        const char *pn = m->args[i]->name;
        ch_val v;
        bool have = false;
        if (i < a->npos) v = a->pos[i], have = true;
        else
            for (int k = 0; k < a->nkw; k++)
                if (!used[k] && !strcmp(a->kwn[k], pn)) {
                    v = a->kwv[k], used[k] = true, have = true;
                    break;
                }
        if (!have) v = m->kwv[i] ? eval(cx, m->kwv[i]) : ch_undef(hintf(cx, "parameter '%s' was not provided%s", pn, NULL));
        frame_set(cx, fr, pn, v);
    }
    ch_dict *kw = ch_dict_new(E, 0);
    for (int k = 0; k < a->nkw; k++) {
        if (used[k]) continue;
        if (!strcmp(a->kwn[k], "caller") && f->caller == NULL && uses_caller) {
            frame_set(cx, fr, "caller", a->kwv[k]);
            continue;
        }
        if (!uses_kwargs)
            ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "macro '%s' takes no keyword argument '%s'", mname,
                  a->kwn[k]);
        ch_dict_set(E, kw, ch_strz(E, a->kwn[k]), a->kwv[k]);
    }
    if (uses_varargs) {
        size_t nv = a->npos > m->nargs ? (size_t)(a->npos - m->nargs) : 0;
        ch_list *l = ch_list_new(E, nv);
        for (size_t i = 0; i < nv; i++) l->v[i] = a->pos[(size_t)m->nargs + i];
        ch_val t = {CV_LIST, CVF_TUPLE, {.l = l}};
        frame_set(cx, fr, "varargs", t);
    }
    if (uses_kwargs) {
        ch_val d = {CV_DICT, 0, {.d = kw}};
        frame_set(cx, fr, "kwargs", d);
    }
    if (f->caller) {
        ch_val c = {CV_FUNC, 0, {.fn = f->caller}};
        frame_set(cx, fr, "caller", c);
    }
    ch_buf out = {0}, *saved_out = cx->out;
    out.max = cx->p->max_output;
    cx->out = &out;
    exec_body(cx, m->body, m->nbody);
    cx->out = saved_out;
    cx->frame = saved;
    cx->depth--;
    return ch_strn(E, out.p ? out.p : "", out.n);
}

static ch_val call_builtin(ch_cx *cx, const ch_node *at, int id, ch_args *a);

ch_val ch_call_value(ch_cx *cx, const ch_node *at, ch_val fv, ch_args *a) {
    if (fv.kind == CV_UNDEF) ch_undef_fail(cx, at, fv);
    if (fv.kind != CV_FUNC)
        ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "'%s' object is not callable", ch_type_name(fv));
    ch_func *f = fv.u.fn;
    if (f->kind == CF_MACRO) return ch_call_macro(cx, f, a, at);
    if (f->kind == CF_BUILTIN) return call_builtin(cx, at, f->id, a);
    return ch_call_method(cx, at, f, a);
}

static ch_val new_func(ch_cx *cx, int kind, int id, const char *name) {
    ch_func *f = ch_alloc(E, sizeof *f);
    memset(f, 0, sizeof *f);
    f->kind = kind, f->id = id, f->name = name;
    ch_val v = {CV_FUNC, 0, {.fn = f}};
    return v;
}

static ch_val kwarg(ch_args *a, const char *name, int pos, ch_val def) {
    if (pos >= 0 && pos < a->npos) return a->pos[pos];
    for (int i = 0; i < a->nkw; i++)
        if (!strcmp(a->kwn[i], name)) return a->kwv[i];
    return def;
}

static ch_val call_builtin(ch_cx *cx, const ch_node *at, int id, ch_args *a) {
    switch (id) {
    case CB_RAISE: {
        ch_val m = a->npos ? a->pos[0] : kwarg(a, "message", -1, ch_undef(NULL));
        m = ch_to_str(E, m);
        E->raised = true;
        if (m.u.s->len == 0) /* raise_exception('') or of an undefined name: still a message */
            ch_fail(E, ATTN_STATUS_INVALID_ARGUMENT, "the chat template raised an exception with "
                    "an empty message");
        ch_fail(E, ATTN_STATUS_INVALID_ARGUMENT, "%.*s", (int)(m.u.s->len > 500 ? 500 : m.u.s->len),
                m.u.s->s);
    }
    case CB_STRFTIME: {
        ch_val f = a->npos ? a->pos[0] : kwarg(a, "format", -1, ch_undef(NULL));
        if (f.kind != CV_STR)
            ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "strftime_now: the format must be a string");
        if (f.u.s->len > 256 || memchr(f.u.s->s, 0, f.u.s->len))
            ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "strftime_now: format too long");
        time_t t = (time_t)cx->now;
        struct tm tm;
        if (!localtime_r(&t, &tm)) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "strftime_now: bad time");
        char out[2048];
        size_t n = f.u.s->len ? strftime(out, sizeof out, f.u.s->s, &tm) : 0;
        return ch_strn(E, out, n);
    }
    case CB_NAMESPACE:
    case CB_DICT: {
        ch_dict *d = ch_dict_new(E, 4);
        for (int i = 0; i < a->npos; i++) {
            ch_val x = a->pos[i];
            if (i > 0 || (x.kind != CV_DICT && x.kind != CV_NS))
                ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "%s() takes at most one positional mapping",
                      id == CB_DICT ? "dict" : "namespace");
            for (size_t k = 0; k < x.u.d->n; k++) ch_dict_set(E, d, x.u.d->k[k], x.u.d->v[k]);
        }
        for (int i = 0; i < a->nkw; i++) ch_dict_set(E, d, ch_strz(E, a->kwn[i]), a->kwv[i]);
        ch_val v = {(uint8_t)(id == CB_DICT ? CV_DICT : CV_NS), 0, {.d = d}};
        return v;
    }
    case CB_RANGE: {
        int64_t r[3] = {0, 0, 1};
        if (a->npos < 1 || a->npos > 3 || a->nkw)
            ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "range expected 1 to 3 integer arguments");
        for (int i = 0; i < a->npos; i++) {
            ch_val x = a->pos[i];
            if (x.kind == CV_UNDEF) ch_undef_fail(cx, at, x);
            if (x.kind != CV_INT && x.kind != CV_BOOL)
                ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "'%s' object cannot be interpreted as an integer",
                      ch_type_name(x));
        }
        if (a->npos == 1) r[1] = inum(a->pos[0]);
        else for (int i = 0; i < a->npos; i++) r[i] = inum(a->pos[i]);
        if (r[2] == 0) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, at, "range() arg 3 must not be zero");
        double cnt = r[2] > 0 ? ceil(((double)r[1] - (double)r[0]) / (double)r[2])
                              : ceil(((double)r[0] - (double)r[1]) / (double)-r[2]);
        if (cnt < 0) cnt = 0;
        if (cnt > (double)cx->p->max_steps)
            ch_rfail(cx, ATTN_STATUS_TOO_LARGE, at, "range of %.0f items exceeds the render's step limit", cnt);
        ch_list *l = ch_list_new(E, (size_t)cnt);
        for (size_t i = 0; i < l->n; i++) l->v[i] = ch_int(r[0] + (int64_t)i * r[2]);
        ch_count_steps(cx, l->n);
        ch_val v = {CV_LIST, 0, {.l = l}};
        return v;
    }
    default:
        ch_rfail(cx, ATTN_STATUS_UNSUPPORTED, at, "the global function '%s' is not supported",
              id == CB_CYCLER ? "cycler" : id == CB_JOINER ? "joiner" : "lipsum");
    }
}

/* ---- expressions ------------------------------------------------------------------------------ */

/* filter node n on v (its arguments evaluated here) */
static ch_val run_filter(ch_cx *cx, const ch_node *n, ch_val v) {
    if (n->fid == -1) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, n, "no filter named '%s' found", n->name);
    if (n->fid == -2)
        ch_rfail(cx, ATTN_STATUS_UNSUPPORTED, n, "the filter '%s' is not supported by attn's chat templates", n->name);
    ch_args a;
    eval_args(cx, n, &a, 0);
    return ch_call_filter(cx, n, n->fid, v, &a);
}

/* a filter chain whose innermost input is `input` (filter blocks, block sets) */
static ch_val apply_chain(ch_cx *cx, const ch_node *n, ch_val input) {
    if (!n) return input;
    return run_filter(cx, n, n->a ? apply_chain(cx, n->a, input) : input);
}

static ch_val eval(ch_cx *cx, const ch_node *n) {
    deeper(cx, n);
    cx->line = n->line;
    ch_val r;
    switch (n->kind) {
    case CN_CONST: r = n->cst; break;
    case CN_NAME: {
        ch_val *v = frame_find(cx->frame, n->name);
        if (v) r = *v;
        else r = ch_undef(n->name), r.flags = CVF_UNAME; /* the hint is the bare name */
        break;
    }
    case CN_GETATTR: {
        ch_val v = eval(cx, n->a);
        if (v.kind == CV_UNDEF) ch_undef_fail(cx, n, v);
        r = ch_getattr(cx, v, n->name, strlen(n->name));
        break;
    }
    case CN_GETITEM: {
        ch_val v = eval(cx, n->a);
        if (v.kind == CV_UNDEF) ch_undef_fail(cx, n, v);
        r = ch_getitem(cx, v, eval(cx, n->b));
        break;
    }
    case CN_SLICE: /* a slice among several subscripts (x[1:, 0]): Python refuses the tuple key */
        r = n->a ? eval_slice(cx, n) : ch_undef("a slice inside a tuple subscript");
        break;
    case CN_CALL: {
        ch_val f = eval(cx, n->a);
        ch_args a;
        eval_args(cx, n, &a, 0);
        r = ch_call_value(cx, n, f, &a);
        break;
    }
    case CN_FILTER: r = run_filter(cx, n, eval(cx, n->a)); break;
    case CN_TEST: {
        ch_val v = eval(cx, n->a);
        if (n->fid == -1) ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, n, "no test named '%s' found", n->name);
        if (n->fid == -2)
            ch_rfail(cx, ATTN_STATUS_UNSUPPORTED, n, "the test '%s' is not supported by attn's chat templates",
                  n->name);
        ch_args a;
        eval_args(cx, n, &a, 0);
        r = ch_bool(ch_call_test(cx, n, n->fid, v, &a));
        break;
    }
    case CN_NOT: r = ch_bool(!ch_truthy(eval(cx, n->a))); break;
    case CN_NEG:
    case CN_POS: {
        ch_val v = eval(cx, n->a);
        if (v.kind == CV_UNDEF) ch_undef_fail(cx, n, v);
        if (v.kind == CV_FLOAT) r = ch_float(n->kind == CN_NEG ? -v.u.f : v.u.f);
        else if (v.kind == CV_INT || v.kind == CV_BOOL) {
            int64_t i = inum(v);
            if (n->kind == CN_NEG && i == INT64_MIN) overflow(cx);
            r = ch_int(n->kind == CN_NEG ? -i : i);
        } else
            ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, n, "bad operand type for unary %c: '%s'",
                  n->kind == CN_NEG ? '-' : '+', ch_type_name(v));
        break;
    }
    case CN_BINOP: {
        ch_val a = eval(cx, n->a), b = eval(cx, n->b);
        if (a.kind == CV_UNDEF) ch_undef_fail(cx, n, a);
        if (b.kind == CV_UNDEF) ch_undef_fail(cx, n, b);
        r = ch_binop(cx, n->op, a, b);
        break;
    }
    case CN_AND: {
        ch_val a = eval(cx, n->a);
        r = ch_truthy(a) ? eval(cx, n->b) : a;
        break;
    }
    case CN_OR: {
        ch_val a = eval(cx, n->a);
        r = ch_truthy(a) ? a : eval(cx, n->b);
        break;
    }
    case CN_CMP: {
        ch_val a = eval(cx, n->a);
        r = ch_bool(true);
        for (int i = 0; i < n->nargs; i++) {
            ch_val b = eval(cx, n->args[i]);
            if (!compare(cx, n, n->ops[i], a, b)) {
                r = ch_bool(false);
                break;
            }
            a = b;
        }
        break;
    }
    case CN_CONCAT: {
        ch_buf b = {0};
        for (int i = 0; i < n->nargs; i++) ch_put_str(E, &b, eval(cx, n->args[i]));
        r = ch_strn(E, b.p ? b.p : "", b.n);
        break;
    }
    case CN_CONDEXPR:
        if (ch_truthy(eval(cx, n->a))) r = eval(cx, n->b);
        else if (n->c) r = eval(cx, n->c);
        else r = ch_undef("the inline if-expression evaluated to false and no else section was defined");
        break;
    case CN_LIST:
    case CN_TUPLE: {
        ch_list *l = ch_list_new(E, (size_t)n->nargs);
        for (int i = 0; i < n->nargs; i++) l->v[i] = eval(cx, n->args[i]);
        r.kind = CV_LIST, r.flags = n->kind == CN_TUPLE ? CVF_TUPLE : 0, r.u.l = l;
        break;
    }
    case CN_DICT: {
        ch_dict *d = ch_dict_new(E, (size_t)n->nargs / 2);
        for (int i = 0; i + 1 < n->nargs; i += 2) {
            ch_val k = eval(cx, n->args[i]);
            if ((k.kind == CV_LIST && !(k.flags & CVF_TUPLE)) || k.kind == CV_DICT || k.kind == CV_NS)
                ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, n, "unhashable type: '%s'", ch_type_name(k));
            ch_dict_set(E, d, k, eval(cx, n->args[i + 1]));
        }
        r.kind = CV_DICT, r.flags = 0, r.u.d = d;
        break;
    }
    default: ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, n, "internal error: node %d is not an expression", n->kind);
    }
    cx->depth--;
    return r;
}

/* ---- statements ------------------------------------------------------------------------------- */

static void assign(ch_cx *cx, const ch_node *t, ch_val v) {
    if (t->kind == CN_NAME) {
        frame_set(cx, cx->frame, t->name, v);
        return;
    }
    if (t->kind == CN_NSREF) {
        ch_val *ns = frame_find(cx->frame, t->name);
        if (!ns || ns->kind != CV_NS)
            ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, t, "cannot assign attribute on non-namespace object");
        ch_dict_set(E, ns->u.d, ch_strz(E, t->b->name), v);
        return;
    }
    /* a tuple of names: unpack */
    if (v.kind == CV_UNDEF) ch_undef_fail(cx, t, v);
    ch_list *l = ch_iterate(cx, v);
    if (l->n != (size_t)t->nargs)
        ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, t, "%s values to unpack (expected %d, got %zu)",
              l->n > (size_t)t->nargs ? "too many" : "not enough", t->nargs, l->n);
    for (int i = 0; i < t->nargs; i++) frame_set(cx, cx->frame, t->args[i]->name, l->v[i]);
}

static ch_val capture(ch_cx *cx, ch_node **body, int n) {
    ch_buf out = {0}, *saved_out = cx->out;
    out.max = cx->p->max_output;
    ch_frame *saved = cx->frame;
    cx->frame = frame_new(cx, saved);
    cx->out = &out;
    exec_body(cx, body, n);
    cx->out = saved_out;
    cx->frame = saved;
    return ch_strn(E, out.p ? out.p : "", out.n);
}

static int exec_for(ch_cx *cx, const ch_node *n) {
    ch_val it = eval(cx, n->b);
    ch_list *items = ch_iterate(cx, it);
    ch_frame *saved = cx->frame;
    cx->frame = frame_new(cx, saved);
    if (n->c) { /* for x in xs if cond: the loop sees only the items that pass */
        ch_list *kept = ch_list_new(E, items->n);
        size_t k = 0;
        for (size_t i = 0; i < items->n; i++) {
            ch_count_steps(cx, 1);
            assign(cx, n->a, items->v[i]);
            if (ch_truthy(eval(cx, n->c))) kept->v[k++] = items->v[i];
        }
        kept->n = k;
        items = kept;
    }
    ch_loop *lp = ch_alloc(E, sizeof *lp);
    lp->items = items, lp->i = 0, lp->depth0 = 0; /* depth counts recursive loops only */
    ch_val lv = {CV_LOOP, 0, {.loop = lp}};
    ch_frame *fr = frame_new(cx, saved);
    for (size_t i = 0; i < items->n; i++) {
        ch_count_steps(cx, 1);
        /* each iteration starts from the enclosing scope: a set in the body does not carry
         * over to the next iteration (jinja2 resolves the body's names anew each time). The
         * frame's storage is reused, so a long loop does not grow the arena. */
        fr->n = 0;
        cx->frame = fr;
        lp->i = i;
        assign(cx, n->a, items->v[i]);
        frame_set(cx, fr, "loop", lv);
        if (exec_body(cx, n->body, n->nbody) == FLOW_BREAK) break;
    }
    cx->frame = saved;
    if (items->n == 0 && n->nbody2) {
        cx->frame = frame_new(cx, saved);
        exec_body(cx, n->body2, n->nbody2);
        cx->frame = saved;
    }
    return FLOW_NONE;
}

static int exec_stmt1(ch_cx *cx, const ch_node *n);

static int exec_stmt(ch_cx *cx, const ch_node *n) {
    deeper(cx, n); /* statements nest inside macro calls: count them with the rest */
    int f = exec_stmt1(cx, n);
    cx->depth--;
    return f;
}

static int exec_stmt1(ch_cx *cx, const ch_node *n) {
    switch (n->kind) {
    case CN_DATA: ch_buf_put(E, cx->out, n->cst.u.s->s, n->cst.u.s->len); return FLOW_NONE;
    case CN_OUTPUT: ch_put_str(E, cx->out, eval(cx, n->a)); return FLOW_NONE;
    case CN_PRINT:
        for (int i = 0; i < n->nargs; i++) ch_put_str(E, cx->out, eval(cx, n->args[i]));
        return FLOW_NONE;
    case CN_IF:
        if (ch_truthy(eval(cx, n->a))) return exec_body(cx, n->body, n->nbody);
        return exec_body(cx, n->body2, n->nbody2);
    case CN_FOR: return exec_for(cx, n);
    case CN_SET: assign(cx, n->a, eval(cx, n->b)); return FLOW_NONE;
    case CN_SETBLOCK: assign(cx, n->a, apply_chain(cx, n->b, capture(cx, n->body, n->nbody))); return FLOW_NONE;
    case CN_FILTERBLK: {
        ch_val v = apply_chain(cx, n->b, capture(cx, n->body, n->nbody));
        ch_put_str(E, cx->out, v);
        return FLOW_NONE;
    }
    case CN_MACRO: {
        ch_val f = new_func(cx, CF_MACRO, 0, n->name);
        f.u.fn->macro = n, f.u.fn->closure = cx->frame;
        frame_set(cx, cx->frame, n->name, f);
        return FLOW_NONE;
    }
    case CN_CALLBLOCK: {
        ch_val c = new_func(cx, CF_MACRO, 0, "caller");
        c.u.fn->macro = n, c.u.fn->closure = cx->frame;
        const ch_node *call = n->a;
        ch_val f = eval(cx, call->a);
        ch_args a;
        eval_args(cx, call, &a, 1);
        a.kwn[a.nkw] = "caller", a.kwv[a.nkw] = c, a.nkw++;
        ch_put_str(E, cx->out, ch_call_value(cx, call, f, &a));
        return FLOW_NONE;
    }
    case CN_GENERATION: {
        ch_val v = capture(cx, n->body, n->nbody);
        ch_buf_put(E, cx->out, v.u.s->s, v.u.s->len);
        return FLOW_NONE;
    }
    case CN_BREAK: return FLOW_BREAK;
    case CN_CONTINUE: return FLOW_CONTINUE;
    default: ch_rfail(cx, ATTN_STATUS_INVALID_ARGUMENT, n, "internal error: node %d is not a statement", n->kind);
    }
}

static int exec_body(ch_cx *cx, ch_node **body, int n) {
    for (int i = 0; i < n; i++) {
        int f = exec_stmt(cx, body[i]);
        if (f) return f;
    }
    return FLOW_NONE;
}

/* ---- entry ------------------------------------------------------------------------------------ */

void ch_exec(ch_cx *cx, const ch_tree *t, ch_frame *root) {
    static const struct { const char *name; int id; } globals[] = {
        {"raise_exception", CB_RAISE}, {"strftime_now", CB_STRFTIME}, {"namespace", CB_NAMESPACE},
        {"range", CB_RANGE}, {"dict", CB_DICT}, {"cycler", CB_CYCLER}, {"joiner", CB_JOINER},
        {"lipsum", CB_LIPSUM}};
    ch_frame *g = frame_new(cx, NULL);
    for (size_t i = 0; i < sizeof globals / sizeof *globals; i++)
        frame_set(cx, g, globals[i].name, new_func(cx, CF_BUILTIN, globals[i].id, globals[i].name));
    root->parent = g;
    cx->frame = root;
    exec_body(cx, t->body, t->nbody);
}

ch_frame *ch_frame_new(ch_cx *cx) { return frame_new(cx, NULL); }
void ch_frame_set(ch_cx *cx, ch_frame *f, const char *name, ch_val v) { frame_set(cx, f, name, v); }

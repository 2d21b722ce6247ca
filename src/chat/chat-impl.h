/* chat-impl.h — internals of the chat-template subsystem (src/chat): the value type the
 * interpreter computes with, the arena every value and syntax node lives in, the syntax tree,
 * and the entry points of the lexer/parser (parse.c), the interpreter (eval.c), the built-in
 * filters, tests and methods (builtins.c) and the value helpers (value.c). Not installed.
 *
 * Errors inside a parse or a render are raised with cx_fail (a longjmp back to the entry point,
 * as Lua does): everything allocated on the way lives in an arena freed as a whole, so no path
 * needs its own clean-up. Values are immutable once built, except namespaces (the one mutable
 * object transformers' ImmutableSandboxedEnvironment allows), so they are shared freely. */
#ifndef ATTN_CHAT_IMPL_H
#define ATTN_CHAT_IMPL_H

#include "attn_chat.h"

#include "../core/core-impl.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena ------------------------------------------------------------------------------- */

typedef struct ch_chunk ch_chunk;
typedef struct {
    ch_chunk *head;
    size_t used, budget; /* bytes taken from malloc so far, and the most allowed */
} ch_arena;

/* ---- error context (shared by the parser and the interpreter) ---------------------------- */

typedef struct {
    jmp_buf jb;
    attn_status status;
    char msg[512];
    bool raised; /* the message is raise_exception's own (no location prefix) */
    ch_arena *arena;
    uint64_t work, work_max; /* bytes copied or scanned so far, and the most allowed (0: none) */
} ch_err;

#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 3, 4)))
#endif
void ch_fail(ch_err *e, attn_status s, const char *fmt, ...);

void *ch_alloc(ch_err *e, size_t n); /* from e->arena, 16-byte aligned; fails "too large" */
/* Counts n units of work (bytes copied or scanned, items compared): a render whose total passes
 * e->work_max fails, so that no operation repeated in a loop can hang a render. */
void ch_work(ch_err *e, uint64_t n);
void ch_arena_free(ch_arena *a);

/* ---- values ------------------------------------------------------------------------------ */

typedef enum {
    CV_UNDEF = 0, /* jinja2's Undefined; u.hint says why (for the error when it is used) */
    CV_NONE,
    CV_BOOL,
    CV_INT,
    CV_FLOAT,
    CV_STR,
    CV_LIST, /* list or tuple (CVF_TUPLE) */
    CV_DICT,
    CV_NS,   /* namespace(): a mutable dict behind attribute syntax */
    CV_FUNC, /* macro, built-in function, bound method */
    CV_LOOP  /* a for loop's `loop` */
} ch_kind;

/* CVF_GEN: a list standing for one of jinja2's generators (what map, select, reject, selectattr,
 * rejectattr, unique, items and reverse return): iterable, always true, but without len(),
 * indexing, JSON or a printable form. */
/* CVF_UNAME: an Undefined whose hint is the bare name of an undefined variable. */
enum { CVF_TUPLE = 1, CVF_MARKUP = 2, CVF_GEN = 4, CVF_UNAME = 8 };

typedef struct {
    size_t len, nch; /* bytes, code points */
    char s[];        /* len bytes + NUL */
} ch_str;

typedef struct ch_list ch_list;
typedef struct ch_dict ch_dict;
typedef struct ch_func ch_func;
typedef struct ch_loop ch_loop;

typedef struct {
    uint8_t kind, flags;
    union {
        bool b;
        int64_t i;
        double f;
        ch_str *s;
        ch_list *l;
        ch_dict *d;
        ch_func *fn;
        ch_loop *loop;
        const char *hint; /* CV_UNDEF: "'x' is undefined" (NULL: plain) */
    } u;
} ch_val;

struct ch_list {
    size_t n;
    ch_val *v;
};
struct ch_dict {
    size_t n, cap;
    ch_val *k, *v;
};

/* ---- syntax tree ------------------------------------------------------------------------- */

typedef enum {
    /* statements */
    CN_DATA = 1,  /* text: cst */
    CN_OUTPUT,    /* {{ a }} */
    CN_IF,        /* if a: body else body2 (elif: an CN_IF alone in body2) */
    CN_FOR,       /* for targets(names) in a [if b]: body else body2 */
    CN_SET,       /* target a = b (a: CN_NAME, CN_TUPLE of names, CN_NSREF) */
    CN_SETBLOCK,  /* target a = body's output through filter b (NULL: none) */
    CN_MACRO,     /* name(params = args, defaults = kwv): body */
    CN_CALLBLOCK, /* call(args = caller's params) a: body */
    CN_FILTERBLK, /* filter b(body's output) */
    CN_BREAK,
    CN_CONTINUE,
    CN_GENERATION, /* {% generation %} body {% endgeneration %} */
    CN_PRINT,      /* {% print args... %} */
    /* expressions */
    CN_CONST,   /* cst */
    CN_NAME,    /* name */
    CN_NSREF,   /* name.attr (a set target) */
    CN_GETATTR, /* a.name */
    CN_GETITEM, /* a[b] */
    CN_SLICE,   /* a[b:c:d], each may be NULL (args[0..2]) */
    CN_CALL,    /* a(args, kw) */
    CN_FILTER,  /* a | name(args, kw); a NULL in a filter block */
    CN_TEST,    /* a is name(args, kw) */
    CN_NOT,
    CN_NEG,
    CN_POS,
    CN_BINOP, /* a op b: + - * / // % ** */
    CN_AND,
    CN_OR,
    CN_CMP,      /* a (ops[i] args[i])... */
    CN_CONCAT,   /* args joined with ~ */
    CN_CONDEXPR, /* b if a else c */
    CN_LIST,
    CN_TUPLE,
    CN_DICT /* args: k0, v0, k1, v1, ... */
} ch_node_kind;

typedef enum {
    CO_ADD = 1, CO_SUB, CO_MUL, CO_DIV, CO_FLOORDIV, CO_MOD, CO_POW,
    CO_EQ, CO_NE, CO_LT, CO_LE, CO_GT, CO_GE, CO_IN, CO_NOTIN
} ch_op;

typedef struct ch_node ch_node;
struct ch_node {
    uint8_t kind, op;
    bool soft;     /* CN_FILTER/CN_TEST: in an if (jinja2's soft frame): unknown names fail late */
    int line, col; /* 1-based */
    ch_node *a, *b, *c;
    ch_node **body, **body2; /* statements */
    int nbody, nbody2;
    ch_node **args; /* positional arguments, list items, ... */
    int nargs;
    const char **kwn; /* keyword argument names (NUL-terminated) */
    ch_node **kwv;    /* and their values */
    int nkw;
    uint8_t *ops; /* CN_CMP: nargs operators */
    const char *name;
    int fid; /* CN_FILTER / CN_TEST: the built-in's index (-1: unknown to jinja2) */
    ch_val cst;
};

typedef struct {
    ch_arena arena;
    ch_node **body;
    int nbody;
} ch_tree;

/* Parses src (len bytes of UTF-8) into t (its arena) or fails through e. */
void ch_parse(ch_err *e, const char *name, const char *src, size_t len, ch_tree *t);

/* ---- built-ins (builtins.c) ------------------------------------------------------------- */

/* Index of a jinja2 filter / test by name: >= 0 when attn has it, -2 when jinja2 has it but attn
 * does not, -1 when jinja2 has no such name. */
int ch_filter_id(const char *name);
int ch_test_id(const char *name);

/* ---- interpreter ------------------------------------------------------------------------ */

typedef struct ch_cx ch_cx;

typedef struct {
    ch_val *pos;
    int npos;
    const char **kwn;
    ch_val *kwv;
    int nkw;
} ch_args;

/* value helpers (value.c) */
ch_val ch_undef(const char *hint);
ch_val ch_none(void);
ch_val ch_bool(bool b);
ch_val ch_int(int64_t i);
ch_val ch_float(double f);
ch_val ch_strn(ch_err *e, const char *s, size_t n); /* a copy */
ch_val ch_strz(ch_err *e, const char *s);
ch_str *ch_str_new(ch_err *e, const char *s, size_t n);
ch_list *ch_list_new(ch_err *e, size_t n);
ch_dict *ch_dict_new(ch_err *e, size_t cap);
void ch_dict_set(ch_err *e, ch_dict *d, ch_val k, ch_val v); /* replaces an equal key */
ch_val *ch_dict_get(ch_dict *d, ch_val k);
ch_val *ch_dict_gets(ch_dict *d, const char *k, size_t n);
size_t ch_utf8_count(const char *s, size_t n);
size_t ch_utf8_offset(const char *s, size_t n, size_t k); /* byte offset of code point k */
bool ch_truthy(ch_val v);
bool ch_equal(ch_val a, ch_val b);
/* -1, 0, 1 as Python's <, or fails (TypeError) through e */
int ch_compare(ch_err *e, ch_val a, ch_val b);
const char *ch_type_name(ch_val v); /* Python's type name: 'str', 'int', 'dict', ... */
typedef int (*ch_cmp_fn)(ch_err *e, void *ctx, size_t a, size_t b);
/* Stable merge sort of the indices idx[0..n) by cmp (which may fail through e). */
void ch_msort(ch_err *e, size_t *idx, size_t n, ch_cmp_fn cmp, void *ctx);

/* growable byte buffer inside the arena */
typedef struct {
    char *p;
    size_t n, cap, max; /* max: the limit (0: none) */
} ch_buf;
void ch_buf_put(ch_err *e, ch_buf *b, const char *s, size_t n);
void ch_buf_putc(ch_err *e, ch_buf *b, char c);
void ch_buf_printf(ch_err *e, ch_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* str(v) (Python), appended */
void ch_put_str(ch_err *e, ch_buf *b, ch_val v);
void ch_put_repr(ch_err *e, ch_buf *b, ch_val v);
void ch_put_float(ch_buf *b, ch_err *e, double f); /* Python's repr of a float */
/* json.dumps(v, ensure_ascii, indent (NULL: none; else the string per level), item and key
 * separators, sort_keys) */
void ch_put_json(ch_err *e, ch_buf *b, ch_val v, bool ensure_ascii, const char *indent,
                 size_t indent_len, const char *item_sep, const char *key_sep, bool sort_keys,
                 int depth);
ch_val ch_to_str(ch_err *e, ch_val v); /* str(v) as a value (a string stays itself) */
/* Python's str.isspace for one code point */
bool ch_is_space(uint32_t c);
/* decode one code point at s (valid UTF-8), returning its length */
int ch_utf8_decode(const char *s, size_t n, uint32_t *cp);
int ch_utf8_encode(uint32_t cp, char *out);

/* the interpreter's context */
struct ch_cx {
    ch_err *e;
    const attn_chat_render_params *p;
    int depth;        /* nesting of evaluation (macro calls, expressions) */
    uint64_t steps;   /* loop iterations + macro calls so far */
    ch_buf *out;      /* where output goes now */
    struct ch_frame *frame;
    int64_t now;      /* strftime_now's time */
    const char *name; /* the template's name */
    int line;         /* of the expression evaluated last (for messages) */
};

/* filters / tests / methods: the value, its args */
ch_val ch_call_filter(ch_cx *cx, const ch_node *n, int fid, ch_val v, ch_args *a);
bool ch_call_test(ch_cx *cx, const ch_node *n, int tid, ch_val v, ch_args *a);
/* v.name as jinja2's sandboxed getattr (attribute first, then item); getitem: item first */
ch_val ch_getattr(ch_cx *cx, ch_val v, const char *name, size_t len);
ch_val ch_getitem(ch_cx *cx, ch_val v, ch_val key);
ch_val ch_call_value(ch_cx *cx, const ch_node *at, ch_val f, ch_args *a);
/* iteration: the items of v as a list (dict: keys; string: characters); fails for non-iterables */
ch_list *ch_iterate(ch_cx *cx, ch_val v);
ch_val ch_binop(ch_cx *cx, int op, ch_val a, ch_val b);
void ch_count_steps(ch_cx *cx, uint64_t n);
/* Fails the render: "NAME:LINE: message" (the line of at, else of the last expression). */
#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 4, 5)))
#endif
void ch_rfail(ch_cx *cx, attn_status s, const ch_node *at, const char *fmt, ...);
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void ch_undef_fail(ch_cx *cx, const ch_node *at, ch_val v); /* the error of using v */
ch_val ch_call_macro(ch_cx *cx, ch_func *f, ch_args *a, const ch_node *at);

/* one frame of variables */
typedef struct ch_frame {
    struct ch_frame *parent;
    size_t n, cap;
    const char **names;
    ch_val *vals;
} ch_frame;

struct ch_func {
    int kind; /* CF_MACRO, CF_BUILTIN, CF_METHOD */
    int id;   /* the built-in or method */
    const char *name;
    ch_val self;          /* CF_METHOD: the object */
    const ch_node *macro; /* CF_MACRO: the definition */
    ch_frame *closure;    /* CF_MACRO: the frame it was defined in */
    ch_func *caller;      /* CF_MACRO called from a call block: `caller` */
};
enum { CF_MACRO = 1, CF_BUILTIN, CF_METHOD };

struct ch_loop {
    ch_list *items;
    size_t i; /* index0 */
    int depth0;
};

/* bound methods of str (ids 100+), dict (200+), list (300+), loop (400+) */
ch_val ch_call_method(ch_cx *cx, const ch_node *at, ch_func *f, ch_args *a);

/* runs the template t with root (the render's variables; its parent becomes the globals) */
void ch_exec(ch_cx *cx, const ch_tree *t, ch_frame *root);
ch_frame *ch_frame_new(ch_cx *cx);
void ch_frame_set(ch_cx *cx, ch_frame *f, const char *name, ch_val v);

/* built-in functions (globals) */
enum { CB_RAISE = 1, CB_STRFTIME, CB_NAMESPACE, CB_RANGE, CB_DICT, CB_CYCLER, CB_JOINER, CB_LIPSUM };

#endif

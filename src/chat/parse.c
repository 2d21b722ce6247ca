/* parse.c — the lexer and parser of chat templates: Jinja2 3.1's grammar, lexed as jinja2's
 * Lexer does under transformers' settings (trim_blocks: the first newline after a block or
 * comment tag is dropped; lstrip_blocks: spaces and tabs from the start of a line to a block or
 * comment tag are dropped; `-` strips all whitespace on its side of a tag, `+` turns
 * lstrip_blocks / trim_blocks off for that tag; "\r\n" and "\r" read as "\n"; one trailing newline
 * of the source is dropped), and parsed as jinja2's Parser does (the same precedence: condexpr <
 * or < and < not < comparisons < + - < ~ < * / // % < ** < unary - + < postfix . [] () < | is).
 *
 * Errors name "NAME:LINE:COLUMN" (column in bytes, 1-based). Statements jinja2 has and attn does
 * not (block, extends, include, import, from, with, autoescape, recursive loops) are
 * ATTN_STATUS_UNSUPPORTED; everything else that is not Jinja is ATTN_STATUS_FORMAT. */
#include "chat-impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    T_EOF = 0,
    T_DATA,
    T_VAR_BEGIN,
    T_VAR_END,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    /* operators */
    T_ADD, T_SUB, T_DIV, T_FLOORDIV, T_MUL, T_MOD, T_POW, T_TILDE, T_LBRACKET, T_RBRACKET,
    T_LPAREN, T_RPAREN, T_LBRACE, T_RBRACE, T_EQ, T_NE, T_GT, T_GTEQ, T_LT, T_LTEQ, T_ASSIGN,
    T_DOT, T_COLON, T_PIPE, T_COMMA, T_SEMICOLON
};

static const char *tok_desc[] = {
    "end of template", "template data", "begin of print statement", "end of print statement",
    "begin of statement block", "end of statement block", "name", "string", "integer", "float",
    "'+'", "'-'", "'/'", "'//'", "'*'", "'%'", "'**'", "'~'", "'['", "']'", "'('", "')'", "'{'",
    "'}'", "'=='", "'!='", "'>'", "'>='", "'<'", "'<='", "'='", "'.'", "':'", "'|'", "','", "';'"};

typedef struct {
    int type, line, col;
    const char *s; /* names: the name (NUL-terminated copy); strings/data: the value */
    size_t n;      /* its length in bytes */
    int64_t i;
    double f;
} tok;

typedef struct {
    ch_err *e;
    const char *name;
    const char *src; /* normalized: '\n' newlines, no trailing newline */
    size_t len, pos;
    int line;
    size_t line_start; /* offset of the current line's first byte */
    tok *t;
    size_t nt, cap;
    /* parser */
    size_t k; /* current token */
    int depth, loops, soft;
    ch_node *macro; /* the macro being parsed (varargs/kwargs/caller use) */
} ps;

#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 5, 6)))
#endif
static void perr(ps *p, attn_status s, int line, int col, const char *fmt, ...) {
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    ch_fail(p->e, s, "%s:%d:%d: %s", p->name, line, col, m);
}

/* ---- lexer ---------------------------------------------------------------------------------- */

static void advance(ps *p, size_t to) {
    for (size_t i = p->pos; i < to; i++)
        if (p->src[i] == '\n') p->line++, p->line_start = i + 1;
    p->pos = to;
}

static int cur_col(const ps *p) { return (int)(p->pos - p->line_start) + 1; }

static tok *push(ps *p, int type) {
    if (p->nt == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        tok *t = ch_alloc(p->e, cap * sizeof *t);
        if (p->nt) memcpy(t, p->t, p->nt * sizeof *t);
        p->t = t, p->cap = cap;
    }
    tok *t = &p->t[p->nt++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->line = p->line;
    t->col = cur_col(p);
    return t;
}

/* Python's \s (str.isspace) at s[i]: its byte length, or 0 */
static int space_at(const char *s, size_t n, size_t i) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return ch_is_space(c) ? 1 : 0;
    uint32_t cp;
    int w = ch_utf8_decode(s + i, n - i, &cp);
    return ch_is_space(cp) ? w : 0;
}

static size_t skip_space(const ps *p, size_t i) {
    int w;
    while (i < p->len && (w = space_at(p->src, p->len, i)) > 0) i += (size_t)w;
    return i;
}

/* the end of s[0..n) without trailing Python whitespace */
static size_t rstrip_len(const char *s, size_t n) {
    while (n > 0) {
        size_t b = n - 1;
        while (b > 0 && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
        if (!space_at(s, n, b)) break;
        n = b;
    }
    return n;
}

/* Emits text src[a..b) as data after whitespace control for the tag that follows: sign '-'
 * strips all trailing whitespace; otherwise (not '+', a block or comment tag) lstrip_blocks drops
 * the whitespace between the last newline (or the start of a line) and the tag. */
static void emit_data(ps *p, size_t a, size_t b, char sign, bool lstrip, bool line_starting) {
    size_t end = b;
    if (sign == '-') {
        end = a + rstrip_len(p->src + a, b - a);
    } else if (sign != '+' && lstrip) {
        size_t l = b;
        while (l > a && p->src[l - 1] != '\n') l--;
        if (l > a || line_starting) {
            size_t i = l;
            int w;
            while (i < b && (w = space_at(p->src, b, i)) > 0) i += (size_t)w;
            if (i == b && b > l) end = l;
        }
    }
    if (end > a) {
        tok *t = push(p, T_DATA);
        t->s = p->src + a; /* the data is not copied: the source outlives the tokens */
        t->n = end - a;
    }
}

/* Python's unicode-escape decoding of a string literal's body into the arena. */
static void unescape(ps *p, tok *t, const char *s, size_t n) {
    char *o = ch_alloc(p->e, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 == n) {
            o[k++] = s[i];
            continue;
        }
        char c = s[++i];
        uint32_t cp = 0;
        int digits = 0;
        switch (c) {
        case '\n': continue;
        case '\\': o[k++] = '\\'; continue;
        case '\'': o[k++] = '\''; continue;
        case '"': o[k++] = '"'; continue;
        case 'a': o[k++] = '\a'; continue;
        case 'b': o[k++] = '\b'; continue;
        case 'f': o[k++] = '\f'; continue;
        case 'n': o[k++] = '\n'; continue;
        case 'r': o[k++] = '\r'; continue;
        case 't': o[k++] = '\t'; continue;
        case 'v': o[k++] = '\v'; continue;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        case 'N': perr(p, ATTN_STATUS_UNSUPPORTED, t->line, t->col, "'\\N{...}' escapes are not supported");
        default:
            if (c >= '0' && c <= '7') {
                int m = 0;
                while (m < 3 && i < n && s[i] >= '0' && s[i] <= '7') cp = cp * 8 + (uint32_t)(s[i++] - '0'), m++;
                i--;
                if (cp == 0 || cp > 0x10FFFF) cp = cp ? cp : 0;
                k += (size_t)ch_utf8_encode(cp, o + k);
                continue;
            }
            o[k++] = '\\';
            i--; /* keep the character itself */
            continue;
        }
        for (int d = 0; d < digits; d++) {
            char h = i + 1 < n ? s[i + 1] : 0;
            int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (v < 0)
                perr(p, ATTN_STATUS_FORMAT, t->line, t->col, "truncated \\%c escape in a string", c);
            cp = cp * 16 + (uint32_t)v;
            i++;
        }
        if (cp > 0x10FFFF)
            perr(p, ATTN_STATUS_FORMAT, t->line, t->col, "illegal Unicode character in a string");
        if (cp >= 0xD800 && cp <= 0xDFFF)
            perr(p, ATTN_STATUS_UNSUPPORTED, t->line, t->col, "a lone surrogate (\\u%04x) in a string", cp);
        k += (size_t)ch_utf8_encode(cp, o + k);
    }
    o[k] = '\0';
    t->s = o, t->n = k;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* digits with single '_' separators ((\d+_)*\d+) at i: the end, or i when none */
static size_t digits_at(const ps *p, size_t i) {
    size_t j = i;
    if (j >= p->len || !is_digit(p->src[j])) return i;
    while (j < p->len) {
        while (j < p->len && is_digit(p->src[j])) j++;
        if (j + 1 < p->len && p->src[j] == '_' && is_digit(p->src[j + 1])) j++;
        else break;
    }
    return j;
}

static void strip_us(char *d, const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < 127; i++)
        if (s[i] != '_') d[k++] = s[i];
    d[k] = '\0';
}

/* One number at p->pos (float_re, then integer_re); false when none. */
static bool lex_number(ps *p) {
    size_t i = p->pos;
    if (!is_digit(p->src[i])) return false;
    if (i > 0 && p->src[i - 1] == '.') goto integer; /* float_re's (?<!\.) */
    size_t a = digits_at(p, i), f = a;
    if (a > i) {
        size_t j = a;
        bool frac = false;
        if (j + 1 < p->len && p->src[j] == '.' && digits_at(p, j + 1) > j + 1)
            j = digits_at(p, j + 1), frac = true;
        size_t x = j;
        if (x < p->len && (p->src[x] == 'e' || p->src[x] == 'E')) {
            x++;
            if (x < p->len && (p->src[x] == '+' || p->src[x] == '-')) x++;
            size_t y = digits_at(p, x);
            if (y > x) f = y;
            else if (frac) f = j;
        } else if (frac) {
            f = j;
        }
        if (f > a) {
            char buf[128];
            if (f - i > 100) perr(p, ATTN_STATUS_FORMAT, p->line, cur_col(p), "number too long");
            strip_us(buf, p->src + i, f - i);
            tok *t = push(p, T_FLOAT);
            t->f = strtod(buf, NULL);
            advance(p, f);
            return true;
        }
    }
integer:;
    int base = 10;
    size_t j = i;
    if (p->src[i] == '0' && i + 1 < p->len && p->src[i + 1] && strchr("bBoOxX", p->src[i + 1])) {
        char b = (char)(p->src[i + 1] | 0x20);
        base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
        j = i + 2;
        size_t s = j;
        while (j < p->len) {
            size_t q = j + (p->src[j] == '_');
            char c = q < p->len ? p->src[q] : 0;
            bool ok = base == 16 ? is_hex(c) : base == 8 ? (c >= '0' && c <= '7') : (c == '0' || c == '1');
            if (!ok) break;
            j = q + 1;
        }
        if (j == s) base = 10, j = i; /* just "0" */
    }
    if (base == 10) {
        if (p->src[i] == '0') { /* 0(_?0)* */
            j = i + 1;
            while (j < p->len && (p->src[j] == '0' || (p->src[j] == '_' && j + 1 < p->len && p->src[j + 1] == '0')))
                j += p->src[j] == '_' ? 2 : 1;
        } else {
            j = digits_at(p, i);
        }
    }
    char buf[128];
    if (j - i > 100) perr(p, ATTN_STATUS_FORMAT, p->line, cur_col(p), "number too long");
    strip_us(buf, p->src + i + (base != 10 ? 2 : 0), j - i - (base != 10 ? 2 : 0));
    errno = 0;
    char *end;
    unsigned long long v = strtoull(buf, &end, base);
    if (errno || v > INT64_MAX)
        perr(p, ATTN_STATUS_UNSUPPORTED, p->line, cur_col(p),
             "integer literal out of the 64-bit range attn supports");
    tok *t = push(p, T_INT);
    t->i = (int64_t)v;
    advance(p, j);
    return true;
}

static const struct { const char *s; int t; } ops[] = {
    {"//", T_FLOORDIV}, {"**", T_POW}, {"==", T_EQ}, {"!=", T_NE}, {">=", T_GTEQ}, {"<=", T_LTEQ},
    {"+", T_ADD}, {"-", T_SUB}, {"/", T_DIV}, {"*", T_MUL}, {"%", T_MOD}, {"~", T_TILDE},
    {"[", T_LBRACKET}, {"]", T_RBRACKET}, {"(", T_LPAREN}, {")", T_RPAREN}, {"{", T_LBRACE},
    {"}", T_RBRACE}, {">", T_GT}, {"<", T_LT}, {"=", T_ASSIGN}, {".", T_DOT}, {":", T_COLON},
    {"|", T_PIPE}, {",", T_COMMA}, {";", T_SEMICOLON}};

/* The tokens of one {{ }} or {% %} tag, from p->pos (after the opener) through its end tag.
 * Returns whether the end tag ended with a newline (jinja2's line_starting). */
static bool lex_tag(ps *p, bool block, int tline, int tcol) {
    char stack[64];
    int depth = 0;
    for (;;) {
        size_t i = skip_space(p, p->pos);
        advance(p, i);
        if (i >= p->len)
            perr(p, ATTN_STATUS_FORMAT, tline, tcol, "unexpected end of template: the %s is not closed",
                 block ? "'{%' tag" : "'{{' tag");
        const char *s = p->src + i;
        size_t left = p->len - i;
        if (depth == 0) {
            const char *end = block ? "%}" : "}}";
            if (block && left >= 3 && s[0] == '+' && !memcmp(s + 1, end, 2)) {
                push(p, T_BLOCK_END);
                advance(p, i + 3);
                return false;
            }
            if (left >= 3 && s[0] == '-' && !memcmp(s + 1, end, 2)) {
                push(p, block ? T_BLOCK_END : T_VAR_END);
                size_t j = skip_space(p, i + 3);
                advance(p, j);
                return j > i + 3 && p->src[j - 1] == '\n';
            }
            if (left >= 2 && !memcmp(s, end, 2)) {
                push(p, block ? T_BLOCK_END : T_VAR_END);
                size_t j = i + 2;
                if (block && j < p->len && p->src[j] == '\n') j++; /* trim_blocks */
                advance(p, j);
                return j > i + 2;
            }
        }
        if (lex_number(p)) continue;
        if (is_alpha(s[0])) {
            size_t j = i;
            while (j < p->len && (is_alpha(p->src[j]) || is_digit(p->src[j]))) j++;
            tok *t = push(p, T_NAME);
            char *nm = ch_alloc(p->e, j - i + 1);
            memcpy(nm, s, j - i);
            nm[j - i] = '\0';
            t->s = nm, t->n = j - i;
            advance(p, j);
            continue;
        }
        if (s[0] == '\'' || s[0] == '"') {
            size_t j = i + 1;
            while (j < p->len && p->src[j] != s[0]) j += p->src[j] == '\\' && j + 1 < p->len ? 2 : 1;
            if (j >= p->len)
                perr(p, ATTN_STATUS_FORMAT, p->line, cur_col(p), "unexpected char %s: an unterminated string",
                     s[0] == '"' ? "'\"'" : "\"'\"");
            tok *t = push(p, T_STRING);
            unescape(p, t, s + 1, j - i - 1);
            advance(p, j + 1);
            continue;
        }
        int ty = 0;
        size_t w = 0;
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
            size_t l = strlen(ops[o].s);
            if (left >= l && !memcmp(s, ops[o].s, l)) {
                ty = ops[o].t, w = l;
                break;
            }
        }
        if (!ty) {
            uint32_t cp;
            int n = ch_utf8_decode(s, left, &cp);
            perr(p, ATTN_STATUS_FORMAT, p->line, cur_col(p), "unexpected char '%.*s'", n, s);
        }
        if (ty == T_LBRACE || ty == T_LPAREN || ty == T_LBRACKET) {
            if (depth == (int)sizeof stack)
                perr(p, ATTN_STATUS_TOO_LARGE, p->line, cur_col(p), "brackets nested deeper than %d", depth);
            stack[depth++] = ty == T_LBRACE ? '}' : ty == T_LPAREN ? ')' : ']';
        } else if (ty == T_RBRACE || ty == T_RPAREN || ty == T_RBRACKET) {
            if (depth == 0) perr(p, ATTN_STATUS_FORMAT, p->line, cur_col(p), "unexpected '%c'", s[0]);
            if (stack[--depth] != s[0])
                perr(p, ATTN_STATUS_FORMAT, p->line, cur_col(p), "unexpected '%c', expected '%c'", s[0],
                     stack[depth]);
        }
        push(p, ty);
        advance(p, i + w);
    }
}

/* {% raw %} at i (the '{'): the opener's length, or 0 when it is not one */
static size_t raw_open(const ps *p, size_t i, const char *word) {
    size_t j = i + 2;
    if (j < p->len && (p->src[j] == '-' || p->src[j] == '+')) j++;
    j = skip_space(p, j);
    size_t wl = strlen(word);
    if (p->len - j < wl || memcmp(p->src + j, word, wl)) return 0;
    j = skip_space(p, j + wl);
    if (j < p->len && (p->src[j] == '-' || p->src[j] == '+')) j++;
    if (p->len - j < 2 || memcmp(p->src + j, "%}", 2)) return 0;
    return j + 2 - i;
}

static void lex(ps *p) {
    bool line_starting = true;
    while (p->pos < p->len) {
        /* the next tag opener */
        size_t i = p->pos;
        const char *q = NULL;
        for (;;) {
            q = memchr(p->src + i, '{', p->len - i);
            if (!q || (size_t)(q - p->src) + 1 >= p->len) {
                q = NULL;
                break;
            }
            char c = q[1];
            if (c == '{' || c == '%' || c == '#') break;
            i = (size_t)(q - p->src) + 1;
        }
        if (!q) {
            emit_data(p, p->pos, p->len, 0, false, false);
            advance(p, p->len);
            break;
        }
        size_t at = (size_t)(q - p->src);
        char kind = q[1];
        char sign = at + 2 < p->len && (q[2] == '-' || q[2] == '+') ? q[2] : 0;
        int tline, tcol;
        size_t rl = kind == '%' ? raw_open(p, at, "raw") : 0;
        emit_data(p, p->pos, at, sign, kind != '{', line_starting);
        advance(p, at);
        tline = p->line, tcol = cur_col(p);
        if (rl) { /* {% raw %}...{% endraw %}: the text as it is */
            size_t j = at + rl, body = j;
            if (p->src[j - 3] == '-') j = skip_space(p, j); /* -%} strips what follows */
            body = j;
            size_t end = 0, el = 0;
            for (size_t k = body; k + 1 < p->len; k++)
                if (p->src[k] == '{' && p->src[k + 1] == '%' && (el = raw_open(p, k, "endraw"))) {
                    end = k;
                    break;
                }
            if (!el) perr(p, ATTN_STATUS_FORMAT, tline, tcol, "missing end of raw directive");
            char es = p->src[end + 2] == '-' || p->src[end + 2] == '+' ? p->src[end + 2] : 0;
            advance(p, body);
            emit_data(p, body, end, es, true, false);
            size_t after = end + el;
            char close = p->src[after - 3];
            if (close == '-') after = skip_space(p, after);
            else if (close != '+' && after < p->len && p->src[after] == '\n') after++;
            line_starting = after > 0 && p->src[after - 1] == '\n';
            advance(p, after);
            continue;
        }
        advance(p, at + 2 + (sign ? 1 : 0));
        if (kind == '#') {
            size_t body = p->pos, j = body;
            const char *c = NULL;
            while (j + 1 < p->len) {
                c = memchr(p->src + j, '#', p->len - j - 1);
                if (!c) break;
                if (c[1] == '}') break;
                j = (size_t)(c - p->src) + 1;
                c = NULL;
            }
            if (!c) perr(p, ATTN_STATUS_FORMAT, tline, tcol, "missing end of comment tag");
            size_t e = (size_t)(c - p->src), after = e + 2;
            char cs = e > body && (p->src[e - 1] == '-' || p->src[e - 1] == '+') ? p->src[e - 1] : 0;
            if (cs == '-') after = skip_space(p, after);
            else if (!cs && after < p->len && p->src[after] == '\n') after++;
            line_starting = p->src[after - 1] == '\n';
            advance(p, after);
            continue;
        }
        push(p, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN)->line = tline;
        p->t[p->nt - 1].col = tcol;
        line_starting = lex_tag(p, kind == '%', tline, tcol);
    }
    push(p, T_EOF);
}

/* ---- parser --------------------------------------------------------------------------------- */

static tok *cur(ps *p) { return &p->t[p->k]; }
static tok *look(ps *p) { return &p->t[p->k + (p->t[p->k].type != T_EOF)]; }
static tok *next(ps *p) {
    tok *t = &p->t[p->k];
    if (t->type != T_EOF) p->k++;
    return t;
}
static bool is_name(const tok *t, const char *n) { return t->type == T_NAME && !strcmp(t->s, n); }

static const char *describe(const tok *t) {
    static _Thread_local char b[80];
    if (t->type == T_NAME) {
        snprintf(b, sizeof b, "'%.60s'", t->s);
        return b;
    }
    return tok_desc[t->type];
}

#if defined(__GNUC__)
__attribute__((noreturn))
#endif
static void unexpected(ps *p, const tok *t, const char *wanted) {
    if (t->type == T_EOF)
        perr(p, ATTN_STATUS_FORMAT, t->line, t->col, "unexpected end of template, expected %s", wanted);
    perr(p, ATTN_STATUS_FORMAT, t->line, t->col, "expected %s, got %s", wanted, describe(t));
}

static tok *expect(ps *p, int type) {
    if (cur(p)->type != type) unexpected(p, cur(p), tok_desc[type]);
    return next(p);
}
static void expect_name(ps *p, const char *n) {
    if (!is_name(cur(p), n)) {
        char w[64];
        snprintf(w, sizeof w, "'%s'", n);
        unexpected(p, cur(p), w);
    }
    next(p);
}
static bool skip_if(ps *p, int type) {
    if (cur(p)->type != type) return false;
    next(p);
    return true;
}
static bool skip_name(ps *p, const char *n) {
    if (!is_name(cur(p), n)) return false;
    next(p);
    return true;
}

static ch_node *node(ps *p, int kind, const tok *at) {
    ch_node *n = ch_alloc(p->e, sizeof *n);
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = at->line, n->col = at->col;
    n->fid = -1;
    return n;
}

/* growable node lists */
typedef struct {
    ch_node **v;
    int n, cap;
} nlist;
static void nl_push(ps *p, nlist *l, ch_node *n) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        ch_node **v = ch_alloc(p->e, (size_t)cap * sizeof *v);
        if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof *v);
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = n;
}

static void enter(ps *p, const tok *at) {
    if (++p->depth > ATTN_CHAT_MAX_NESTING)
        perr(p, ATTN_STATUS_TOO_LARGE, at->line, at->col, "nested deeper than %d", ATTN_CHAT_MAX_NESTING);
}

static ch_node *parse_expr(ps *p, bool condexpr);
static ch_node *parse_tuple(ps *p, bool simplified, bool condexpr, const char *end_name, bool paren);
static ch_node *parse_unary(ps *p, bool filters);
static ch_node *parse_primary(ps *p);
static ch_node *parse_postfix(ps *p, ch_node *n);

static void mark_soft(ch_node *n) {
    if (!n) return;
    if (n->kind == CN_FILTER || n->kind == CN_TEST) n->soft = true;
    mark_soft(n->a), mark_soft(n->b), mark_soft(n->c);
    for (int i = 0; i < n->nargs; i++) mark_soft(n->args[i]);
    for (int i = 0; i < n->nkw; i++) mark_soft(n->kwv[i]);
}

static ch_node *parse_condexpr(ps *p) {
    ch_node *e1 = parse_expr(p, false);
    while (is_name(cur(p), "if")) {
        tok *at = next(p);
        ch_node *n = node(p, CN_CONDEXPR, at);
        n->b = e1;
        n->a = parse_expr(p, false);
        if (skip_name(p, "else")) n->c = parse_condexpr(p);
        mark_soft(n);
        e1 = n;
    }
    return e1;
}

static ch_node *parse_not(ps *p);
static ch_node *parse_math1(ps *p);

static ch_node *parse_or_and(ps *p, bool is_or) {
    ch_node *l = is_or ? parse_or_and(p, false) : parse_not(p);
    while (is_name(cur(p), is_or ? "or" : "and")) {
        tok *at = next(p);
        ch_node *n = node(p, is_or ? CN_OR : CN_AND, at);
        n->a = l;
        n->b = is_or ? parse_or_and(p, false) : parse_not(p);
        l = n;
    }
    return l;
}

static ch_node *parse_not(ps *p) {
    if (is_name(cur(p), "not")) {
        tok *at = next(p);
        enter(p, at);
        ch_node *n = node(p, CN_NOT, at);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    ch_node *l = parse_math1(p);
    nlist args = {0};
    uint8_t opsv[64];
    int nops = 0;
    tok *at = cur(p);
    for (;;) {
        int t = cur(p)->type, op = 0;
        if (t == T_EQ) op = CO_EQ;
        else if (t == T_NE) op = CO_NE;
        else if (t == T_LT) op = CO_LT;
        else if (t == T_LTEQ) op = CO_LE;
        else if (t == T_GT) op = CO_GT;
        else if (t == T_GTEQ) op = CO_GE;
        if (op) next(p);
        else if (skip_name(p, "in")) op = CO_IN;
        else if (is_name(cur(p), "not") && is_name(look(p), "in")) next(p), next(p), op = CO_NOTIN;
        else break;
        if (nops == 64) perr(p, ATTN_STATUS_TOO_LARGE, at->line, at->col, "more than 64 chained comparisons");
        opsv[nops++] = (uint8_t)op;
        nl_push(p, &args, parse_math1(p));
    }
    if (!nops) return l;
    ch_node *n = node(p, CN_CMP, at);
    n->a = l;
    n->args = args.v, n->nargs = args.n;
    n->ops = ch_alloc(p->e, (size_t)nops);
    memcpy(n->ops, opsv, (size_t)nops);
    return n;
}

static ch_node *binop(ps *p, int op, ch_node *l, ch_node *r, const tok *at) {
    ch_node *n = node(p, CN_BINOP, at);
    n->op = (uint8_t)op, n->a = l, n->b = r;
    return n;
}

static ch_node *parse_pow(ps *p) {
    ch_node *l = parse_unary(p, true);
    while (cur(p)->type == T_POW) {
        tok *at = next(p);
        l = binop(p, CO_POW, l, parse_unary(p, true), at);
    }
    return l;
}

static ch_node *parse_math2(ps *p) {
    ch_node *l = parse_pow(p);
    for (;;) {
        int t = cur(p)->type;
        int op = t == T_MUL ? CO_MUL : t == T_DIV ? CO_DIV : t == T_FLOORDIV ? CO_FLOORDIV
                 : t == T_MOD ? CO_MOD : 0;
        if (!op) return l;
        tok *at = next(p);
        l = binop(p, op, l, parse_pow(p), at);
    }
}

static ch_node *parse_concat(ps *p) {
    tok *at = cur(p);
    ch_node *first = parse_math2(p);
    if (cur(p)->type != T_TILDE) return first;
    nlist args = {0};
    nl_push(p, &args, first);
    while (skip_if(p, T_TILDE)) nl_push(p, &args, parse_math2(p));
    ch_node *n = node(p, CN_CONCAT, at);
    n->args = args.v, n->nargs = args.n;
    return n;
}

static ch_node *parse_math1(ps *p) {
    ch_node *l = parse_concat(p);
    for (;;) {
        int t = cur(p)->type;
        if (t != T_ADD && t != T_SUB) return l;
        tok *at = next(p);
        l = binop(p, t == T_ADD ? CO_ADD : CO_SUB, l, parse_concat(p), at);
    }
}

static ch_node *parse_expr(ps *p, bool condexpr) {
    tok *at = cur(p);
    enter(p, at);
    ch_node *n = condexpr ? parse_condexpr(p) : parse_or_and(p, true);
    p->depth--;
    return n;
}

/* (args, kw) of a call: after '(' through ')' */
static void parse_call_args(ps *p, ch_node *n) {
    tok *at = expect(p, T_LPAREN);
    nlist args = {0}, kwv = {0};
    const char *names[256];
    bool comma = false;
    while (cur(p)->type != T_RPAREN) {
        if (comma) {
            expect(p, T_COMMA);
            if (cur(p)->type == T_RPAREN) break;
        }
        if (cur(p)->type == T_MUL || cur(p)->type == T_POW)
            perr(p, ATTN_STATUS_UNSUPPORTED, cur(p)->line, cur(p)->col,
                 "'*args' / '**kwargs' in a call are not supported");
        if (cur(p)->type == T_NAME && look(p)->type == T_ASSIGN) {
            tok *k = next(p);
            next(p);
            if (kwv.n == 256) perr(p, ATTN_STATUS_TOO_LARGE, k->line, k->col, "more than 256 keyword arguments");
            names[kwv.n] = k->s;
            nl_push(p, &kwv, parse_expr(p, true));
        } else {
            if (kwv.n) perr(p, ATTN_STATUS_FORMAT, at->line, at->col, "invalid syntax for function call expression");
            nl_push(p, &args, parse_expr(p, true));
        }
        comma = true;
    }
    expect(p, T_RPAREN);
    n->args = args.v, n->nargs = args.n;
    n->kwv = kwv.v, n->nkw = kwv.n;
    if (kwv.n) {
        n->kwn = ch_alloc(p->e, (size_t)kwv.n * sizeof *n->kwn);
        memcpy(n->kwn, names, (size_t)kwv.n * sizeof *n->kwn);
    }
}

static const char *dotted_name(ps *p) {
    tok *t = expect(p, T_NAME);
    const char *name = t->s;
    while (cur(p)->type == T_DOT) {
        next(p);
        tok *u = expect(p, T_NAME);
        size_t a = strlen(name), b = strlen(u->s);
        char *s = ch_alloc(p->e, a + b + 2);
        memcpy(s, name, a), s[a] = '.', memcpy(s + a + 1, u->s, b + 1);
        name = s;
    }
    return name;
}

static ch_node *parse_filter(ps *p, ch_node *n, bool inline_start) {
    while (cur(p)->type == T_PIPE || inline_start) {
        if (!inline_start) next(p);
        inline_start = false;
        tok *at = cur(p);
        ch_node *f = node(p, CN_FILTER, at);
        f->name = dotted_name(p);
        f->a = n;
        f->fid = ch_filter_id(f->name);
        f->soft = p->soft > 0;
        if (f->fid == -1 && !f->soft)
            perr(p, ATTN_STATUS_FORMAT, at->line, at->col, "no filter named '%s'", f->name);
        if (cur(p)->type == T_LPAREN) parse_call_args(p, f);
        n = f;
    }
    return n;
}

static ch_node *parse_test(ps *p, ch_node *n) {
    tok *at = next(p); /* is */
    bool neg = skip_name(p, "not");
    tok *nt = cur(p);
    ch_node *t = node(p, CN_TEST, at);
    t->name = dotted_name(p);
    t->a = n;
    t->fid = ch_test_id(t->name);
    t->soft = p->soft > 0;
    if (t->fid == -1 && !t->soft)
        perr(p, ATTN_STATUS_FORMAT, nt->line, nt->col, "no test named '%s'", t->name);
    int ty = cur(p)->type;
    if (ty == T_LPAREN) {
        parse_call_args(p, t);
    } else if ((ty == T_NAME || ty == T_STRING || ty == T_INT || ty == T_FLOAT || ty == T_LBRACKET ||
                ty == T_LBRACE) &&
               !is_name(cur(p), "else") && !is_name(cur(p), "or") && !is_name(cur(p), "and")) {
        if (is_name(cur(p), "is"))
            perr(p, ATTN_STATUS_FORMAT, cur(p)->line, cur(p)->col, "you cannot chain multiple tests with is");
        ch_node *arg = parse_postfix(p, parse_primary(p));
        t->args = ch_alloc(p->e, sizeof *t->args);
        t->args[0] = arg, t->nargs = 1;
    }
    if (!neg) return t;
    ch_node *x = node(p, CN_NOT, at);
    x->a = t;
    return x;
}

static ch_node *parse_subscribed(ps *p) {
    tok *at = cur(p);
    ch_node *a[3] = {NULL, NULL, NULL};
    if (cur(p)->type == T_COLON) {
        next(p);
    } else {
        ch_node *e = parse_expr(p, true);
        if (cur(p)->type != T_COLON) return e;
        next(p);
        a[0] = e;
    }
    if (cur(p)->type != T_COLON && cur(p)->type != T_RBRACKET && cur(p)->type != T_COMMA)
        a[1] = parse_expr(p, true);
    if (cur(p)->type == T_COLON) {
        next(p);
        if (cur(p)->type != T_RBRACKET && cur(p)->type != T_COMMA) a[2] = parse_expr(p, true);
    }
    ch_node *n = node(p, CN_SLICE, at);
    n->args = ch_alloc(p->e, 3 * sizeof *n->args);
    memcpy(n->args, a, sizeof a);
    n->nargs = 3;
    return n;
}

static ch_node *parse_postfix(ps *p, ch_node *n) {
    for (;;) {
        tok *at = cur(p);
        if (at->type == T_DOT) {
            next(p);
            tok *t = next(p);
            if (t->type == T_NAME) {
                ch_node *g = node(p, CN_GETATTR, at);
                g->a = n, g->name = t->s;
                n = g;
            } else if (t->type == T_INT) {
                ch_node *g = node(p, CN_GETITEM, at), *c = node(p, CN_CONST, t);
                c->cst = ch_int(t->i);
                g->a = n, g->b = c;
                n = g;
            } else {
                unexpected(p, t, "name or number");
            }
        } else if (at->type == T_LBRACKET) {
            next(p);
            nlist args = {0};
            while (cur(p)->type != T_RBRACKET) {
                if (args.n) expect(p, T_COMMA);
                nl_push(p, &args, parse_subscribed(p));
            }
            expect(p, T_RBRACKET);
            ch_node *g;
            if (args.n == 1 && args.v[0]->kind == CN_SLICE) {
                g = args.v[0];
                g->a = n;
            } else {
                g = node(p, CN_GETITEM, at);
                g->a = n;
                if (args.n == 1) {
                    g->b = args.v[0];
                } else {
                    ch_node *t = node(p, CN_TUPLE, at);
                    t->args = args.v, t->nargs = args.n;
                    g->b = t;
                }
            }
            n = g;
        } else if (at->type == T_LPAREN) {
            ch_node *c = node(p, CN_CALL, at);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

static ch_node *parse_unary(ps *p, bool filters) {
    tok *at = cur(p);
    enter(p, at);
    ch_node *n;
    if (at->type == T_SUB || at->type == T_ADD) {
        next(p);
        n = node(p, at->type == T_SUB ? CN_NEG : CN_POS, at);
        n->a = parse_unary(p, false);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (filters)
        for (;;) {
            if (cur(p)->type == T_PIPE) n = parse_filter(p, n, false);
            else if (is_name(cur(p), "is")) n = parse_test(p, n);
            else if (cur(p)->type == T_LPAREN) n = parse_postfix(p, n);
            else break;
        }
    p->depth--;
    return n;
}

static ch_node *parse_primary(ps *p) {
    tok *t = cur(p);
    ch_node *n;
    switch (t->type) {
    case T_NAME:
        next(p);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") ||
            !strcmp(t->s, "False")) {
            n = node(p, CN_CONST, t);
            n->cst = ch_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
            n = node(p, CN_CONST, t);
            n->cst = ch_none();
        } else {
            n = node(p, CN_NAME, t);
            n->name = t->s;
            if (p->macro && (!strcmp(t->s, "varargs") || !strcmp(t->s, "kwargs") || !strcmp(t->s, "caller")))
                p->macro->op |= (uint8_t)(t->s[0] == 'v' ? 1 : t->s[0] == 'k' ? 2 : 4);
        }
        return n;
    case T_STRING: {
        next(p);
        ch_buf b = {0};
        ch_buf_put(p->e, &b, t->s, t->n);
        while (cur(p)->type == T_STRING) {
            tok *u = next(p);
            ch_buf_put(p->e, &b, u->s, u->n);
        }
        n = node(p, CN_CONST, t);
        n->cst = ch_strn(p->e, b.p ? b.p : "", b.n);
        return n;
    }
    case T_INT:
    case T_FLOAT:
        next(p);
        n = node(p, CN_CONST, t);
        n->cst = t->type == T_INT ? ch_int(t->i) : ch_float(t->f);
        return n;
    case T_LPAREN:
        next(p);
        n = parse_tuple(p, false, true, NULL, true);
        expect(p, T_RPAREN);
        return n;
    case T_LBRACKET: {
        next(p);
        nlist items = {0};
        while (cur(p)->type != T_RBRACKET) {
            if (items.n) expect(p, T_COMMA);
            if (cur(p)->type == T_RBRACKET) break;
            nl_push(p, &items, parse_expr(p, true));
        }
        expect(p, T_RBRACKET);
        n = node(p, CN_LIST, t);
        n->args = items.v, n->nargs = items.n;
        return n;
    }
    case T_LBRACE: {
        next(p);
        nlist items = {0};
        while (cur(p)->type != T_RBRACE) {
            if (items.n) expect(p, T_COMMA);
            if (cur(p)->type == T_RBRACE) break;
            nl_push(p, &items, parse_expr(p, true));
            expect(p, T_COLON);
            nl_push(p, &items, parse_expr(p, true));
        }
        expect(p, T_RBRACE);
        n = node(p, CN_DICT, t);
        n->args = items.v, n->nargs = items.n;
        return n;
    }
    default: perr(p, ATTN_STATUS_FORMAT, t->line, t->col, "unexpected %s", describe(t));
    }
}

static bool tuple_end(ps *p, const char *end_name) {
    int t = cur(p)->type;
    if (t == T_VAR_END || t == T_BLOCK_END || t == T_RPAREN) return true;
    return end_name && is_name(cur(p), end_name);
}

static ch_node *parse_tuple(ps *p, bool simplified, bool condexpr, const char *end_name, bool paren) {
    tok *at = cur(p);
    nlist args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n) expect(p, T_COMMA);
        if (tuple_end(p, end_name)) break;
        nl_push(p, &args, simplified ? parse_primary(p) : parse_expr(p, condexpr));
        if (cur(p)->type == T_COMMA) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (args.n) return args.v[0];
        if (!paren) perr(p, ATTN_STATUS_FORMAT, at->line, at->col, "expected an expression, got %s", describe(at));
    }
    ch_node *n = node(p, CN_TUPLE, at);
    n->args = args.v, n->nargs = args.n;
    return n;
}

/* ---- statements ----------------------------------------------------------------------------- */

static void subparse(ps *p, const char *const *ends, nlist *body);

/* ':'? '%}' body, up to one of ends (left as the current token) */
static void parse_body(ps *p, const char *const *ends, nlist *body, const tok *start) {
    skip_if(p, T_COLON);
    expect(p, T_BLOCK_END);
    subparse(p, ends, body);
    if (cur(p)->type == T_EOF) {
        char w[160] = "";
        for (int i = 0; ends[i]; i++) {
            size_t l = strlen(w);
            snprintf(w + l, sizeof w - l, "%s'%s'", i ? " or " : "", ends[i]);
        }
        perr(p, ATTN_STATUS_FORMAT, start->line, start->col,
             "unexpected end of template: the block opened here needs %s", w);
    }
}

static ch_node *assign_target(ps *p, bool with_ns, const char *end_name) {
    tok *t = cur(p);
    if (with_ns && t->type == T_NAME && look(p)->type == T_DOT) {
        next(p);
        next(p);
        tok *a = expect(p, T_NAME);
        ch_node *n = node(p, CN_NSREF, t);
        n->name = t->s;
        ch_node *c = node(p, CN_CONST, a);
        c->name = a->s;
        n->b = c;
        return n;
    }
    ch_node *n = parse_tuple(p, true, true, end_name, false);
    bool ok = n->kind == CN_NAME;
    if (n->kind == CN_TUPLE) {
        ok = n->nargs > 0;
        for (int i = 0; i < n->nargs; i++) ok = ok && n->args[i]->kind == CN_NAME;
    }
    if (!ok) perr(p, ATTN_STATUS_FORMAT, t->line, t->col, "can't assign to %s", describe(t));
    return n;
}

static void parse_signature(ps *p, ch_node *n) {
    expect(p, T_LPAREN);
    nlist args = {0}, defs = {0};
    while (cur(p)->type != T_RPAREN) {
        if (args.n) expect(p, T_COMMA);
        tok *t = expect(p, T_NAME);
        ch_node *a = node(p, CN_NAME, t);
        a->name = t->s;
        ch_node *d = NULL;
        if (skip_if(p, T_ASSIGN)) d = parse_expr(p, true);
        else if (defs.n && defs.v[defs.n - 1])
            perr(p, ATTN_STATUS_FORMAT, t->line, t->col, "non-default argument follows default argument");
        nl_push(p, &args, a);
        nl_push(p, &defs, d);
    }
    expect(p, T_RPAREN);
    n->args = args.v, n->nargs = args.n;
    n->kwv = defs.v, n->nkw = defs.n;
}

static const char *const END_FOR[] = {"endfor", "else", NULL};
static const char *const END_FOR2[] = {"endfor", NULL};
static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_IF2[] = {"endif", NULL};

static ch_node *parse_statement(ps *p) {
    tok *t = cur(p);
    if (t->type != T_NAME) unexpected(p, t, "a statement name");
    enter(p, t);
    const char *w = t->s;
    ch_node *n;
    int soft = p->soft;
    if (!strcmp(w, "for")) {
        next(p);
        n = node(p, CN_FOR, t);
        n->a = assign_target(p, false, "in");
        expect_name(p, "in");
        n->b = parse_tuple(p, false, false, "recursive", false);
        p->soft = 0;
        if (skip_name(p, "if")) n->c = parse_expr(p, true);
        if (is_name(cur(p), "recursive"))
            perr(p, ATTN_STATUS_UNSUPPORTED, cur(p)->line, cur(p)->col, "recursive for loops are not supported");
        nlist body = {0}, els = {0};
        p->loops++;
        parse_body(p, END_FOR, &body, t);
        p->loops--;
        if (!strcmp(next(p)->s, "else")) {
            parse_body(p, END_FOR2, &els, t);
            next(p);
        }
        n->body = body.v, n->nbody = body.n, n->body2 = els.v, n->nbody2 = els.n;
    } else if (!strcmp(w, "if")) {
        next(p);
        n = node(p, CN_IF, t);
        ch_node *c = n;
        p->soft = 1;
        for (;;) {
            c->a = parse_tuple(p, false, false, NULL, false);
            nlist body = {0};
            parse_body(p, END_IF, &body, t);
            c->body = body.v, c->nbody = body.n;
            tok *e = next(p);
            if (!strcmp(e->s, "elif")) {
                ch_node *d = node(p, CN_IF, e);
                c->body2 = ch_alloc(p->e, sizeof *c->body2);
                c->body2[0] = d, c->nbody2 = 1;
                c = d;
                continue;
            }
            if (!strcmp(e->s, "else")) {
                nlist els = {0};
                parse_body(p, END_IF2, &els, t);
                next(p);
                c->body2 = els.v, c->nbody2 = els.n;
            }
            break;
        }
    } else if (!strcmp(w, "set")) {
        next(p);
        ch_node *target = assign_target(p, true, NULL);
        if (skip_if(p, T_ASSIGN)) {
            n = node(p, CN_SET, t);
            n->a = target;
            n->b = parse_tuple(p, false, true, NULL, false);
        } else {
            static const char *const END[] = {"endset", NULL};
            n = node(p, CN_SETBLOCK, t);
            n->a = target;
            p->soft = 0;
            n->b = parse_filter(p, NULL, false);
            nlist body = {0};
            parse_body(p, END, &body, t);
            next(p);
            n->body = body.v, n->nbody = body.n;
        }
    } else if (!strcmp(w, "macro") || !strcmp(w, "call")) {
        bool macro = w[0] == 'm';
        next(p);
        n = node(p, macro ? CN_MACRO : CN_CALLBLOCK, t);
        ch_node *outer = p->macro;
        int loops = p->loops;
        if (macro) {
            n->name = expect(p, T_NAME)->s;
            parse_signature(p, n);
        } else {
            if (cur(p)->type == T_LPAREN) parse_signature(p, n);
            n->a = parse_expr(p, true);
            if (n->a->kind != CN_CALL) perr(p, ATTN_STATUS_FORMAT, t->line, t->col, "expected a call after 'call'");
        }
        static const char *const END_M[] = {"endmacro", NULL}, *const END_C[] = {"endcall", NULL};
        p->macro = n, p->loops = 0, p->soft = 0;
        nlist body = {0};
        parse_body(p, macro ? END_M : END_C, &body, t);
        next(p);
        p->macro = outer, p->loops = loops;
        n->body = body.v, n->nbody = body.n;
    } else if (!strcmp(w, "filter")) {
        static const char *const END[] = {"endfilter", NULL};
        next(p);
        n = node(p, CN_FILTERBLK, t);
        p->soft = 0;
        n->b = parse_filter(p, NULL, true);
        nlist body = {0};
        parse_body(p, END, &body, t);
        next(p);
        n->body = body.v, n->nbody = body.n;
    } else if (!strcmp(w, "generation")) {
        static const char *const END[] = {"endgeneration", NULL};
        next(p);
        n = node(p, CN_GENERATION, t);
        p->soft = 0;
        nlist body = {0};
        int loops = p->loops;
        p->loops = 0; /* the body is a macro in jinja2: no break out of it */
        parse_body(p, END, &body, t);
        p->loops = loops;
        next(p);
        n->body = body.v, n->nbody = body.n;
    } else if (!strcmp(w, "break") || !strcmp(w, "continue")) {
        next(p);
        if (!p->loops) perr(p, ATTN_STATUS_FORMAT, t->line, t->col, "'%s' outside of a loop", w);
        n = node(p, w[0] == 'b' ? CN_BREAK : CN_CONTINUE, t);
    } else if (!strcmp(w, "print")) { /* {% print a, b %}: each printed, no separator */
        next(p);
        n = node(p, CN_PRINT, t);
        nlist items = {0};
        while (cur(p)->type != T_BLOCK_END) {
            if (items.n) expect(p, T_COMMA);
            nl_push(p, &items, parse_expr(p, true));
        }
        n->args = items.v, n->nargs = items.n;
    } else if (!strcmp(w, "block") || !strcmp(w, "extends") || !strcmp(w, "include") ||
               !strcmp(w, "import") || !strcmp(w, "from") || !strcmp(w, "with") ||
               !strcmp(w, "autoescape") || !strcmp(w, "trans") || !strcmp(w, "do")) {
        if (!strcmp(w, "do") || !strcmp(w, "trans"))
            perr(p, ATTN_STATUS_FORMAT, t->line, t->col,
                 "encountered unknown tag '%s' (an extension transformers does not load)", w);
        perr(p, ATTN_STATUS_UNSUPPORTED, t->line, t->col, "the '{%% %s %%}' statement is not supported", w);
    } else {
        perr(p, ATTN_STATUS_FORMAT, t->line, t->col, "encountered unknown tag '%.60s'", w);
    }
    p->soft = soft;
    p->depth--;
    return n;
}

static void subparse(ps *p, const char *const *ends, nlist *body) {
    for (;;) {
        tok *t = cur(p);
        if (t->type == T_EOF) return;
        if (t->type == T_DATA) {
            next(p);
            ch_node *n = node(p, CN_DATA, t);
            n->cst.kind = CV_STR;
            n->cst.u.s = ch_str_new(p->e, t->s, t->n);
            nl_push(p, body, n);
        } else if (t->type == T_VAR_BEGIN) {
            next(p);
            ch_node *n = node(p, CN_OUTPUT, t);
            n->a = parse_tuple(p, false, true, NULL, false);
            expect(p, T_VAR_END);
            nl_push(p, body, n);
        } else if (t->type == T_BLOCK_BEGIN) {
            next(p);
            if (ends && cur(p)->type == T_NAME)
                for (int i = 0; ends[i]; i++)
                    if (!strcmp(cur(p)->s, ends[i])) return;
            nl_push(p, body, parse_statement(p));
            expect(p, T_BLOCK_END);
        } else {
            unexpected(p, t, "template data or a tag");
        }
    }
}

void ch_parse(ch_err *e, const char *name, const char *src, size_t len, ch_tree *tree) {
    ps p;
    memset(&p, 0, sizeof p);
    p.e = e, p.name = name, p.line = 1;
    /* newlines normalized, one trailing newline dropped (keep_trailing_newline=False) */
    char *s = ch_alloc(e, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = '\0';
    p.src = s, p.len = n;
    lex(&p);
    nlist body = {0};
    subparse(&p, NULL, &body);
    tree->body = body.v, tree->nbody = body.n;
}

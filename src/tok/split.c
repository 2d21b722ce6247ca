/* split.c — the splitting pre-tokenizers: Split (String or Regex pattern, five delimiter
 * behaviours, invert), BertPreTokenizer, Whitespace, WhitespaceSplit and Punctuation.
 *
 * As in tokenizers, a split first lists the text as alternating (range, is_match) events —
 * regex matches (Oniguruma's find_iter: leftmost matches left to right; an empty match is
 * skipped when it touches the previous match, and the search moves on one character after an
 * empty match), or single characters satisfying a predicate — then the behaviour decides:
 *   Removed             matches dropped, the text between them kept
 *   Isolated            every event a piece
 *   MergedWithPrevious  a match joins the piece before it
 *   MergedWithNext      a match joins the piece after it
 *   Contiguous          consecutive matches (or non-matches) form one piece
 * invert swaps what counts as a match. Empty pieces are dropped.
 *
 * Regexes. tokenizer.json patterns are Oniguruma (Ruby syntax); PCRE2 runs them here after a
 * translation of what differs between the two (tok_onig_to_pcre2):
 *   \s \S    Oniguruma: Unicode White_Space; spelled out (PCRE2's \s differs on U+0085, U+180E)
 *   \w \W    Oniguruma: Alphabetic, marks, decimal numbers, connector punctuation, ² ³ ¹ ¼ ½ ¾;
 *            spelled out with PCRE2 properties (PCRE2 10.42's \w is letters, numbers and _)
 *   \d \p{L} \p{N} (\D \P{L} \P{N} outside classes): with the characters of Unicode 15-16
 *            (Oniguruma's tables are Unicode 16, Debian's PCRE2 10.42 has Unicode 14); other
 *            properties and these negations inside a class use PCRE2's tables
 *   \h \H    Oniguruma: hexadecimal digit (PCRE2: horizontal space)
 *   \uHHHH   -> \x{HHHH}
 *   (?m)     Ruby's "dot matches newline" is PCRE2's (?s); ^ and $ are line anchors in Ruby
 *            (PCRE2_MULTILINE), "." stops at \n only (PCRE2_NEWLINE_LF)
 *   {,n}     -> {0,n}
 * Refused (ATTN_STATUS_UNSUPPORTED, naming the construct): nested classes and && class
 * intersection, \W inside a class. Unicode properties come from PCRE2's tables (Unicode 14 on
 * Debian 12), case-insensitive matching lacks Oniguruma's multi-character folds (ß ~ ss). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tok-impl.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h> /* RUNNING_ON_VALGRIND: a no-op instruction sequence natively */
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* Unicode White_Space (Oniguruma's \s), as class items, and its complement. */
static const char WS_ITEMS[] =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";
static const char NOT_WS_ITEMS[] =
    "\\x{0}-\\x{8}\\x{E}-\\x{1F}\\x{21}-\\x{84}\\x{86}-\\x{9F}\\x{A1}-\\x{167F}\\x{1681}-\\x{1FFF}"
    "\\x{200B}-\\x{2027}\\x{202A}-\\x{202E}\\x{2030}-\\x{205E}\\x{2060}-\\x{2FFF}"
    "\\x{3001}-\\x{10FFFF}";
/* Word characters of Oniguruma (Unicode 16) that PCRE2 10.42 (Unicode 14) lacks: assigned in
 * Unicode 15.0 to 16.0. Found by tests/test_tokenizer_wordpiece.c (Whitespace over every code
 * point). */
#define NEW_WORD                                                                                   \
    "\\x{897}\\x{CF3}\\x{ECE}\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}"            \
    "\\x{105C0}-\\x{105F3}\\x{10D40}-\\x{10D65}\\x{10D69}-\\x{10D6D}\\x{10D6F}-\\x{10D85}"         \
    "\\x{10EC2}-\\x{10EC4}\\x{10EFC}-\\x{10EFF}\\x{1123F}-\\x{11241}\\x{11380}-\\x{11389}"         \
    "\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}-\\x{113C0}\\x{113C2}\\x{113C5}"           \
    "\\x{113C7}-\\x{113CA}\\x{113CC}-\\x{113D3}\\x{113E1}-\\x{113E2}\\x{116D0}-\\x{116E3}"         \
    "\\x{11BC0}-\\x{11BE0}\\x{11BF0}-\\x{11BF9}\\x{11F00}-\\x{11F10}\\x{11F12}-\\x{11F3A}"         \
    "\\x{11F3E}-\\x{11F42}\\x{11F50}-\\x{11F5A}\\x{1342F}\\x{13440}-\\x{13455}"                    \
    "\\x{13460}-\\x{143FA}\\x{16100}-\\x{16139}\\x{16D40}-\\x{16D6C}\\x{16D70}-\\x{16D79}"         \
    "\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1CCF0}-\\x{1CCF9}\\x{1DF25}-\\x{1DF2A}"                     \
    "\\x{1E030}-\\x{1E06D}\\x{1E08F}\\x{1E4D0}-\\x{1E4F9}\\x{1E5D0}-\\x{1E5FA}\\x{2B739}"          \
    "\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"
/* Rust's regex crate's \w (tokenizers' Whitespace pre-tokenizer): Unicode's word characters. */
static const char RUST_WORD_ITEMS[] =
    "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}" NEW_WORD;
/* Oniguruma's \w: the same without the joiners U+200C/D, with ² ³ ¹ ¼ ½ ¾ (its Latin-1 table). */
static const char WORD_ITEMS[] =
    "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}" NEW_WORD;
/* Decimal digits of Unicode 15.0-16.0 (Oniguruma's \d has them, PCRE2 10.42's not). */
static const char NEW_DIGITS[] =
    "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}"
    "\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1E4F0}-\\x{1E4F9}"
    "\\x{1E5F1}-\\x{1E5FA}";
static const char HEX_ITEMS[] = "0-9a-fA-F";
static const char NOT_HEX_ITEMS[] =
    "\\x{0}-\\x{2F}\\x{3A}-\\x{40}\\x{47}-\\x{60}\\x{67}-\\x{10FFFF}";

/* tokenizers' Whitespace pre-tokenizer (Rust's regex crate, not Oniguruma): \w+|[^\w\s]+,
 * built in PCRE2 syntax by compile_whitespace(). */

static size_t utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

bool tok_onig_to_pcre2(const char *p, size_t n, tok_buf *o, char *err, size_t errn) {
    bool in_class = false;
    size_t class_at = 0; /* offset in p just after the class's "[" or "[^" */
    size_t i = 0;
    while (i < n) {
        char c = p[i];
        if (c == '\\') {
            if (i + 1 >= n) {
                snprintf(err, errn, "a trailing backslash");
                return false;
            }
            char d = p[i + 1];
            const char *rep = NULL, *neg = NULL;
            switch (d) {
            case 's':
                rep = WS_ITEMS;
                neg = NULL;
                break;
            case 'S':
                rep = NOT_WS_ITEMS;
                neg = WS_ITEMS;
                break;
            case 'w': rep = WORD_ITEMS; break;
            case 'W':
                if (in_class) {
                    snprintf(err, errn, "\\W inside a character class (at offset %zu)", i);
                    return false;
                }
                neg = WORD_ITEMS;
                break;
            case 'h': rep = HEX_ITEMS; break;
            case 'H':
                rep = NOT_HEX_ITEMS;
                neg = HEX_ITEMS;
                break;
            default: break;
            }
            /* \d, \p{L}, \p{N} (and \pL, \pN) with the characters Unicode 15-16 added; their
             * negations outside classes (inside, PCRE2's own tables apply) */
            const char *extra = NULL, *prop = NULL;
            size_t skip = 2;
            if (d == 'd' || (d == 'D' && !in_class)) {
                extra = NEW_DIGITS;
                prop = "\\p{Nd}";
            } else if ((d == 'p' || (d == 'P' && !in_class)) && i + 2 < n) {
                char c2 = p[i + 2];
                if ((c2 == 'L' || c2 == 'N') && (i + 3 >= n || p[i + 3] != '}')) {
                    skip = 3; /* \pL */
                } else if (c2 == '{' && i + 4 < n && (p[i + 3] == 'L' || p[i + 3] == 'N') &&
                           p[i + 4] == '}') {
                    c2 = p[i + 3];
                    skip = 5; /* \p{L} */
                } else {
                    c2 = 0;
                }
                if (c2 == 'L' && skip > 2) extra = tok_new_letters, prop = "\\p{L}";
                if (c2 == 'N' && skip > 2) extra = tok_new_numbers, prop = "\\p{N}";
            }
            if (extra) {
                bool negate = d == 'D' || d == 'P';
                if (in_class)
                    tok_buf_printf(o, "%s%s", prop, extra);
                else
                    tok_buf_printf(o, "[%s%s%s]", negate ? "^" : "", prop, extra);
                i += skip;
                continue;
            }
            if (rep || neg) {
                if (in_class) {
                    tok_buf_puts(o, rep);
                } else if (d == 's' || d == 'w' || d == 'h') {
                    tok_buf_printf(o, "[%s]", rep);
                } else {
                    tok_buf_printf(o, "[^%s]", neg);
                }
                i += 2;
                continue;
            }
            if (d == 'u' && i + 5 < n + 0 && i + 6 <= n) {
                bool hex = true;
                for (size_t k = 2; k < 6; k++) {
                    char h = p[i + k];
                    hex = hex && ((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                                  (h >= 'A' && h <= 'F'));
                }
                if (hex) {
                    tok_buf_printf(o, "\\x{%.4s}", p + i + 2);
                    i += 6;
                    continue;
                }
            }
            /* any other escape: copied, with a braced argument ({...}) when there is one */
            size_t k = i + 1 + utf8_len((unsigned char)d);
            if ((d == 'x' || d == 'p' || d == 'P' || d == 'o' || d == 'k' || d == 'g') && k < n &&
                (p[k] == '{' || p[k] == '<')) {
                char close = p[k] == '{' ? '}' : '>';
                while (k < n && p[k] != close) k++;
                if (k < n) k++;
            }
            if (k > n) k = n;
            tok_buf_put(o, p + i, k - i);
            i = k;
            continue;
        }
        if (in_class) {
            if (c == '[') {
                if (i + 1 < n && p[i + 1] == ':') { /* POSIX bracket [:alpha:] */
                    const char *e = NULL;
                    for (size_t k = i + 2; k + 1 < n; k++)
                        if (p[k] == ':' && p[k + 1] == ']') {
                            e = p + k + 2;
                            break;
                        }
                    if (e) {
                        tok_buf_put(o, p + i, (size_t)(e - (p + i)));
                        i = (size_t)(e - p);
                        continue;
                    }
                }
                snprintf(err, errn, "a nested character class (at offset %zu)", i);
                return false;
            }
            if (c == '&' && i + 1 < n && p[i + 1] == '&') {
                snprintf(err, errn, "class intersection && (at offset %zu)", i);
                return false;
            }
            if (c == ']' && i > class_at) in_class = false;
            tok_buf_putc(o, c);
            i++;
            continue;
        }
        if (c == '[') {
            in_class = true;
            tok_buf_putc(o, '[');
            i++;
            if (i < n && p[i] == '^') {
                tok_buf_putc(o, '^');
                i++;
            }
            class_at = i;
            continue;
        }
        if (c == '(' && i + 2 < n && p[i + 1] == '?') {
            /* (?imx-imx) or (?imx-imx:...): Ruby's m is PCRE2's s */
            size_t k = i + 2;
            while (k < n && (p[k] == 'i' || p[k] == 'm' || p[k] == 'x' || p[k] == '-')) k++;
            if (k > i + 2 && k < n && (p[k] == ':' || p[k] == ')')) {
                tok_buf_puts(o, "(?");
                for (size_t j = i + 2; j < k; j++) tok_buf_putc(o, p[j] == 'm' ? 's' : p[j]);
                i = k;
                continue;
            }
            tok_buf_puts(o, "(?");
            i += 2;
            continue;
        }
        if (c == '{' && i + 1 < n && p[i + 1] == ',') {
            tok_buf_puts(o, "{0,");
            i += 2;
            continue;
        }
        tok_buf_putc(o, c);
        i++;
    }
    if (in_class) {
        snprintf(err, errn, "an unterminated character class");
        return false;
    }
    return !o->oom;
}

/* JIT-compile a pattern unless running under valgrind or ATTN_NO_JIT is set (non-empty, not
 * "0"); without JIT, PCRE2's interpreter runs the same pattern with the same matches. Memcheck
 * cannot check JIT-generated machine code soundly (it has no symbols, and the JIT reads the
 * subject in whole words past what a match uses, which memcheck may report as uninitialised;
 * only a PCRE2 configured with --enable-valgrind annotates that, Debian's is not), while the
 * interpreter is plain C that memcheck follows exactly. */
void tok_regex_jit(void *re) {
    if (RUNNING_ON_VALGRIND) return;
    const char *env = getenv("ATTN_NO_JIT");
    if (env && *env && strcmp(env, "0") != 0) return;
    (void)pcre2_jit_compile((pcre2_code *)re, PCRE2_JIT_COMPLETE); /* the interpreter works too */
}

/* Compile an Oniguruma pattern (raw: already PCRE2 syntax); what names it for messages. */
static attn_status compile_as(const char *pat, size_t n, bool raw, const char *name,
                              const char *what, void **out) {
    tok_buf tr = {0};
    char err[160];
    if (raw) {
        tok_buf_put(&tr, pat, n);
    } else if (!tok_onig_to_pcre2(pat, n, &tr, err, sizeof err)) {
        tok_buf_free(&tr);
        if (tr.oom) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: %s: the regex uses %s, which PCRE2 cannot "
                         "express",
                         name, what, err);
    }
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (!cc) {
        tok_buf_free(&tr);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    int e = 0;
    PCRE2_SIZE off = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(tr.p ? tr.p : ""), tr.n,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &e, &off, cc);
    pcre2_compile_context_free(cc);
    tok_buf_free(&tr);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(e, msg, sizeof msg);
        return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: %s: PCRE2 cannot compile the regex: %s",
                         name, what, (const char *)msg);
    }
    tok_regex_jit(re);
    *out = re;
    return ATTN_STATUS_OK;
}

static attn_status compile(const char *pat, size_t n, const char *name, const char *what,
                           void **out) {
    return compile_as(pat, n, false, name, what, out);
}

attn_status tok_regex_compile(const char *pat, size_t n, const char *name, const char *what,
                              void **out) {
    return compile(pat, n, name, what, out);
}

void tok_regex_free(void *re) { pcre2_code_free((pcre2_code *)re); }

bool tok_regex_replace(const void *re, void **md, const char *s, size_t n, const char *c,
                       size_t cn, tok_buf *out) {
    if (!*md) {
        *md = pcre2_match_data_create_from_pattern((const pcre2_code *)re, NULL);
        if (!*md) return false;
    }
    size_t at = 0, copied = 0;
    while (at <= n) {
        int r = pcre2_match((const pcre2_code *)re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK,
                            (pcre2_match_data *)*md, NULL);
        if (r < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer((pcre2_match_data *)*md);
        size_t a = ov[0], b = ov[1];
        if (a < copied || b < a) break;
        tok_buf_put(out, s + copied, a - copied);
        tok_buf_put(out, c, cn);
        copied = b;
        if (b > a) {
            at = b;
        } else { /* empty match: go on after the next character */
            if (b >= n) break;
            size_t l = 1;
            while (b + l < n && ((unsigned char)s[b + l] & 0xc0) == 0x80) l++;
            at = b + l;
        }
    }
    tok_buf_put(out, s + copied, n - copied);
    return !out->oom;
}

static attn_status compile_whitespace(const char *name, void **out) {
    tok_buf b = {0};
    tok_buf_printf(&b, "[%s]+|[^%s%s]+", RUST_WORD_ITEMS, RUST_WORD_ITEMS, WS_ITEMS);
    attn_status st = b.oom ? attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name)
                           : compile_as(b.p, b.n, true, name, "Whitespace", out);
    tok_buf_free(&b);
    return st;
}

attn_status tok_split_prepare(attn_tok *t, const char *name) {
    bool single_word = false;
    for (size_t i = 0; i < t->n_added; i++) single_word |= t->added[i].single_word;
    if (single_word && !t->word_re) {
        tok_buf b = {0};
        tok_buf_printf(&b, "[%s]", RUST_WORD_ITEMS);
        attn_status st = b.oom ? attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name)
                               : compile_as(b.p, b.n, true, name, "single_word", &t->word_re);
        tok_buf_free(&b);
        if (st) return st;
    }
    for (size_t i = 0; i < t->n_pre; i++) {
        tok_pre *p = &t->pre[i];
        if (p->re) continue;
        char what[64];
        snprintf(what, sizeof what, "pre_tokenizer[%zu].pattern", i);
        attn_status st = ATTN_STATUS_OK;
        if (p->kind == TOK_PRE_SPLIT && p->regex)
            st = compile(p->pat, p->patlen, name, what, &p->re);
        else if (p->kind == TOK_PRE_WHITESPACE)
            st = compile_whitespace(name, &p->re);
        if (st) return st;
    }
    return ATTN_STATUS_OK;
}

int tok_word_char(const attn_tok *t, void **md, const char *s, size_t n) {
    if (!t->word_re) return 0;
    if (!*md) {
        *md = pcre2_match_data_create_from_pattern((const pcre2_code *)t->word_re, NULL);
        if (!*md) return -1;
    }
    return pcre2_match((const pcre2_code *)t->word_re, (PCRE2_SPTR)s, n, 0,
                       PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, (pcre2_match_data *)*md, NULL) >= 0;
}

void tok_split_release(attn_tok *t) {
    if (t && t->word_re) pcre2_code_free((pcre2_code *)t->word_re);
    if (t) t->word_re = NULL;
    for (size_t i = 0; t && i < t->n_pre; i++) {
        if (t->pre[i].re) pcre2_code_free((pcre2_code *)t->pre[i].re);
        t->pre[i].re = NULL;
    }
}

/* ---- events ---- */

typedef struct {
    size_t a, b;
    bool match;
} ev;

typedef struct {
    ev *v;
    size_t n, cap;
} ev_list;

static bool ev_push(ev_list *l, size_t a, size_t b, bool m) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        ev *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (ev){a, b, m};
    return true;
}

typedef bool (*char_pred)(uint32_t cp);

/* Every character satisfying pred is a match of its own. */
static bool events_pred(const char *s, size_t n, char_pred pred, ev_list *l) {
    size_t i = 0, last = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = tok_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (!k) k = 1, cp = 0xFFFD;
        if (pred(cp)) {
            if (last < i && !ev_push(l, last, i, false)) return false;
            if (!ev_push(l, i, i + k, true)) return false;
            last = i + k;
        }
        i += k;
    }
    return last >= n || ev_push(l, last, n, false);
}

/* Matches of re (or of the literal lit when re is NULL), as Oniguruma's find_iter gives them. */
static bool events_re(const pcre2_code *re, const char *lit, size_t litn, void **md, const char *s,
                      size_t n, ev_list *l) {
    if (re && !*md) {
        *md = pcre2_match_data_create(1, NULL);
        if (!*md) return false;
    }
    size_t pos = 0, prev = 0;
    bool have_last = false;
    size_t last_end = 0;
    while (pos <= n) {
        size_t a, b;
        if (re) {
            int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK,
                                 (pcre2_match_data *)*md, NULL);
            if (rc < 0) break; /* no match (or a matching limit): the rest is not a match */
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer((pcre2_match_data *)*md);
            a = ov[0];
            b = ov[1];
            if (b < a) break;
        } else {
            const char *f = NULL;
            for (size_t k = pos; litn && k + litn <= n; k++)
                if (!memcmp(s + k, lit, litn)) {
                    f = s + k;
                    break;
                }
            if (!f) break;
            a = (size_t)(f - s);
            b = a + litn;
        }
        if (a == b) {
            size_t step = b < n ? utf8_len((unsigned char)s[b]) : 1;
            if (have_last && last_end == b) { /* empty match right after a match: skipped */
                pos = b + step;
                continue;
            }
            if (prev < a && !ev_push(l, prev, a, false)) return false;
            if (!ev_push(l, a, b, true)) return false;
            prev = b;
            have_last = true;
            last_end = b;
            pos = b + step;
            continue;
        }
        if (prev < a && !ev_push(l, prev, a, false)) return false;
        if (!ev_push(l, a, b, true)) return false;
        prev = b;
        have_last = true;
        last_end = b;
        pos = b;
    }
    return prev >= n || ev_push(l, prev, n, false);
}

/* Apply the behaviour to the events and push the non-empty pieces. */
static bool emit(const char *s, const ev_list *l, tok_split_behavior bh, bool invert, uint8_t flag,
                 tok_strlist *out) {
    ev_list m = {0};
    bool ok = true;
    for (size_t i = 0; bh != TOK_SPLIT_MERGED_NEXT && i < l->n && ok; i++) {
        ev e = l->v[i];
        if (invert) e.match = !e.match;
        bool merge = false;
        if (bh == TOK_SPLIT_CONTIGUOUS)
            merge = i > 0 && m.n && e.match == (invert ? !l->v[i - 1].match : l->v[i - 1].match);
        else if (bh == TOK_SPLIT_MERGED_PREV)
            merge = e.match && i > 0 && m.n && !(invert ? !l->v[i - 1].match : l->v[i - 1].match);
        if (merge) {
            m.v[m.n - 1].b = e.b;
            continue;
        }
        ok = ev_push(&m, e.a, e.b, bh == TOK_SPLIT_REMOVED ? e.match : false);
    }
    if (bh == TOK_SPLIT_MERGED_NEXT) { /* a match joins the piece after it */
        for (size_t i = l->n; i-- > 0 && ok;) {
            ev e = l->v[i];
            bool em = invert ? !e.match : e.match;
            bool next_match = i + 1 < l->n && (invert ? !l->v[i + 1].match : l->v[i + 1].match);
            if (em && !next_match && m.n) {
                m.v[m.n - 1].a = e.a;
                continue;
            }
            ok = ev_push(&m, e.a, e.b, false);
        }
        for (size_t i = 0; ok && i < m.n / 2; i++) { /* back to text order */
            ev t = m.v[i];
            m.v[i] = m.v[m.n - 1 - i];
            m.v[m.n - 1 - i] = t;
        }
    }
    for (size_t i = 0; ok && i < m.n; i++) {
        if (m.v[i].match || m.v[i].b <= m.v[i].a) continue; /* removed, or empty */
        ok = tok_strlist_push(out, s + m.v[i].a, m.v[i].b - m.v[i].a, m.v[i].a == 0 ? flag : 0);
    }
    free(m.v);
    return ok;
}

static bool split_pred(const char *s, size_t n, char_pred pred, tok_split_behavior bh, uint8_t flag,
                       tok_strlist *out) {
    ev_list l = {0};
    bool ok = n == 0 || events_pred(s, n, pred, &l);
    ok = ok && emit(s, &l, bh, false, flag, out);
    free(l.v);
    return ok;
}

bool tok_split_apply(const tok_pre *p, void **md, const char *s, size_t n, uint8_t flag,
                     tok_strlist *out) {
    switch (p->kind) {
    case TOK_PRE_WHITESPACE_SPLIT:
        return split_pred(s, n, tok_uni_space, TOK_SPLIT_REMOVED, flag, out);
    case TOK_PRE_PUNCTUATION: return split_pred(s, n, tok_uni_punct, p->behavior, flag, out);
    case TOK_PRE_DIGITS: return split_pred(s, n, tok_uni_numeric, p->behavior, flag, out);
    case TOK_PRE_BERT: {
        tok_strlist words = {0};
        bool ok = split_pred(s, n, tok_uni_space, TOK_SPLIT_REMOVED, flag, &words);
        for (size_t i = 0; ok && i < words.n; i++)
            ok = split_pred(tok_strlist_at(&words, i), words.len[i], tok_uni_punct,
                            TOK_SPLIT_ISOLATED, words.flag[i], out);
        tok_strlist_free(&words);
        return ok;
    }
    case TOK_PRE_WHITESPACE:
    case TOK_PRE_SPLIT: {
        if (p->kind == TOK_PRE_SPLIT && p->behavior == TOK_SPLIT_ISOLATED && !p->invert &&
            p->regex && p->patlen == 6 && !memcmp(p->pat, "[\\s\\S]", 6)) {
            /* every character a piece (the character-level tokenizer): no regex needed */
            for (size_t i = 0; i < n;) {
                size_t k = utf8_len((unsigned char)s[i]);
                if (k > n - i) k = n - i;
                if (!tok_strlist_push(out, s + i, k, i == 0 ? flag : 0)) return false;
                i += k;
            }
            return true;
        }
        bool invert = p->kind == TOK_PRE_WHITESPACE ? true : p->invert;
        tok_split_behavior bh = p->kind == TOK_PRE_WHITESPACE ? TOK_SPLIT_REMOVED : p->behavior;
        ev_list l = {0};
        bool ok = true;
        if (n == 0) {
            ok = ev_push(&l, 0, 0, false);
        } else if (p->re) {
            ok = events_re((const pcre2_code *)p->re, NULL, 0, md, s, n, &l);
        } else {
            ok = events_re(NULL, p->pat, p->patlen, md, s, n, &l);
        }
        ok = ok && emit(s, &l, bh, invert, flag, out);
        free(l.v);
        return ok;
    }
    default: break;
    }
    return tok_strlist_push(out, s, n, flag);
}

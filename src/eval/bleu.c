/* bleu.c — corpus BLEU computed exactly as sacreBLEU 2.x does (include/attn_eval.h has the
 * definition, step by step). The point of this file is bit-for-bit agreement with sacreBLEU, so
 * every step follows what the Python code does, including its quirks, and each quirk is named
 * where it is reproduced. tests/test_bleu.c checks it against sacreBLEU run live
 * (tools/ref_bleu.py): tokenized segments string for string, statistics exactly, scores to 1e-9.
 *
 * Pipeline per segment: validate UTF-8 -> [lowercase] -> rstrip -> tokenizer -> split on
 * whitespace -> n-gram statistics. Text is processed as UTF-8 bytes: every regular expression of
 * the 13a tokenizer is ASCII except the class [^0-9], and a byte-wise scan finds the same matches
 * as Python's code-point scan (a multi-byte character is "not a digit" in its every byte, and a
 * match can only end on '.', ',' or the first byte after them), so decoding is needed only for
 * whitespace, lowercasing and the Chinese-character test. */
#include "attn_eval.h"

#include "../core/core-impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---------------------------------------------------------------- growable byte buffer */

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static attn_status sb_reserve(sbuf *b, size_t extra) {
    size_t need;
    if (!attn_size_add(b->len, extra, &need) || !attn_size_add(need, 1, &need) ||
        need > ATTN_MAX_BUFFER_BYTES)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "bleu: a segment grows past %zu bytes",
                         (size_t)ATTN_MAX_BUFFER_BYTES);
    if (need <= b->cap) return ATTN_STATUS_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bleu: out of memory (%zu bytes)", cap);
    b->p = p, b->cap = cap;
    return ATTN_STATUS_OK;
}

/* Callers reserve first; these only append. */
static inline void sb_put(sbuf *b, const char *s, size_t n) {
    memcpy(b->p + b->len, s, n);
    b->len += n;
}
static inline void sb_putc(sbuf *b, char c) { b->p[b->len++] = c; }

static size_t u8_encode(uint32_t cp, char *o) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---------------------------------------------------------------- UTF-8 */

/* Offset of the first byte that starts an ill-formed sequence (Unicode Table 3-7, which is what
 * Python's strict decoder accepts), or SIZE_MAX when all of s[0, n) is well formed. */
static size_t u8_invalid_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;      /* overlong */
            else if (c == 0xED) hi = 0x9F; /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;      /* overlong */
            else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
        } else
            return i;
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
        i += len;
    }
    return SIZE_MAX;
}

/* Decode one code point of well-formed UTF-8; *len gets its byte length. */
static inline uint32_t u8_decode(const unsigned char *s, size_t *len) {
    unsigned c = s[0];
    if (c < 0x80) return *len = 1, c;
    if (c < 0xE0) return *len = 2, ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
    if (c < 0xF0)
        return *len = 3, ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) |
                             (s[2] & 0x3F);
    return *len = 4, ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                         ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

/* Start of the code point that ends just before offset i (> 0). */
static inline size_t u8_prev(const unsigned char *s, size_t i) {
    do i--;
    while (i > 0 && (s[i] & 0xC0) == 0x80);
    return i;
}

/* ---------------------------------------------------------------- character classes */

/* Python's str.isspace() (what str.split(), strip() and rstrip() use): bidirectional class WS,
 * B or S, or category Zs. The set has been stable for many Unicode versions; the test compares it
 * with the running Python's. */
static inline bool py_space(uint32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* sacreBLEU's _UCODE_RANGES as Python evaluates `start <= char <= end` on them. Two entries are
 * written u'\u20000', u'\u2a6d6' and u'\u2f800', u'\u2fa1d': '\u' takes exactly four hex digits,
 * so each is a two-character string (U+2000 '0', U+2A6D '6', ...). For a one-character c,
 * c >= "\u2000" "0" holds iff c > U+2000 and c <= "\u2a6d" "6" iff c <= U+2A6D, which gives the
 * first two ranges below, not CJK extension B (U+20000...) as intended. Kept as sacreBLEU runs. */
static const uint32_t zh_ranges[][2] = {
    {0x2001, 0x2A6D}, /* from ('\u20000', '\u2a6d6'), see above */
    {0x2F81, 0x2FA1}, /* from ('\u2f800', '\u2fa1d') */
    {0x3400, 0x4DB5}, {0x4E00, 0x9FA5}, {0x9FA6, 0x9FBB}, {0xF900, 0xFA2D}, {0xFA30, 0xFA6A},
    {0xFA70, 0xFAD9}, {0xFF00, 0xFFEF}, {0x2E80, 0x2EFF}, {0x3000, 0x303F}, {0x31C0, 0x31EF},
    {0x2F00, 0x2FDF}, {0x2FF0, 0x2FFF}, {0x3100, 0x312F}, {0x31A0, 0x31BF}, {0xFE10, 0xFE1F},
    {0xFE30, 0xFE4F}, {0x2600, 0x26FF}, {0x2700, 0x27BF}, {0x3200, 0x32FF}, {0x3300, 0x33FF},
};

bool attn_bleu_is_zh_char(uint32_t cp) {
    if (cp < 0x2001 || cp > 0xFFEF) return false; /* fast path: ASCII, Latin, ... */
    for (size_t k = 0; k < sizeof zh_ranges / sizeof zh_ranges[0]; k++)
        if (cp >= zh_ranges[k][0] && cp <= zh_ranges[k][1]) return true;
    return false;
}

/* Unicode Case_Ignorable (DerivedCoreProperties): categories Mn Me Cf Lm Sk, and Word_Break
 * MidLetter, MidNumLet or Single_Quote. Only the Greek final-sigma rule needs it. */
static bool case_ignorable(uint32_t c) {
    switch (c) {
    case 0x27: case 0x2E: case 0x3A: case 0xB7: case 0x387: case 0x55F: case 0x5F4:
    case 0x2018: case 0x2019: case 0x2024: case 0x2027: case 0xFE13: case 0xFE52: case 0xFE55:
    case 0xFF07: case 0xFF0E: case 0xFF1A:
        return true;
    default:
        break;
    }
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK;
}

/* Unicode Cased: Lu Ll Lt, Other_Lowercase, Other_Uppercase. utf8proc has no property for the
 * last two; letters with a case mapping (Roman numerals, circled letters) and the ordinals ª º
 * cover those that matter here (the rest are Lm/Mn, which case_ignorable() takes first). */
static bool cased(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT)
        return true;
    return c == 0xAA || c == 0xBA || utf8proc_tolower((utf8proc_int32_t)c) != (utf8proc_int32_t)c ||
           utf8proc_toupper((utf8proc_int32_t)c) != (utf8proc_int32_t)c;
}

/* Python lowers U+03A3 to final ς when it follows a cased letter (skipping case-ignorables) and
 * no cased letter follows (skipping case-ignorables): CPython's handle_capital_sigma. */
static bool final_sigma(const unsigned char *s, size_t n, size_t i, size_t clen) {
    size_t j = i, l;
    uint32_t c = 0;
    bool found = false;
    while (j > 0) {
        j = u8_prev(s, j);
        c = u8_decode(s + j, &l);
        if (!case_ignorable(c)) {
            found = true;
            break;
        }
    }
    if (!found || !cased(c)) return false;
    for (j = i + clen; j < n; j += l) {
        c = u8_decode(s + j, &l);
        if (!case_ignorable(c)) return !cased(c);
    }
    return true;
}

/* ---------------------------------------------------------------- tokenization passes */

/* Python's str.lower(): the simple lowercase mapping except the two SpecialCasing rules Python
 * applies (U+0130 -> "i\u0307", and final sigma); Python ignores the language-specific ones. */
static attn_status pass_lower(const unsigned char *s, size_t n, sbuf *d) {
    attn_status st;
    for (size_t i = 0, l; i < n; i += l) {
        if ((st = sb_reserve(d, 8))) return st;
        uint32_t c = u8_decode(s + i, &l);
        if (c < 0x80) {
            sb_putc(d, (char)(c >= 'A' && c <= 'Z' ? c + 32 : c));
            continue;
        }
        if (c == 0x130) {
            sb_putc(d, 'i');
            d->len += u8_encode(0x307, d->p + d->len);
            continue;
        }
        uint32_t lc = c == 0x3A3 ? (final_sigma(s, n, i, l) ? 0x3C2 : 0x3C3)
                                 : (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
        d->len += u8_encode(lc, d->p + d->len);
    }
    return ATTN_STATUS_OK;
}

/* str.replace(pat, rep): left to right, non-overlapping, no rescan of the output. */
static attn_status pass_replace(const char *s, size_t n, const char *pat, const char *rep,
                                sbuf *d) {
    size_t pl = strlen(pat), rl = strlen(rep);
    attn_status st = sb_reserve(d, n + 1);
    if (st) return st;
    for (size_t i = 0; i < n;) {
        if (s[i] == pat[0] && n - i >= pl && !memcmp(s + i, pat, pl)) {
            sb_put(d, rep, rl); /* rl <= pl: the output never outgrows the input */
            i += pl;
        } else
            sb_putc(d, s[i++]);
    }
    return ATTN_STATUS_OK;
}

/* [\{-\~\[-\` -\&\(-\+\:-\@\/]: { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * + : ; < = > ? @ / */
static inline bool re1_class(unsigned char c) {
    return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
           (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == '/';
}
static inline bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static inline bool is_dot_comma(unsigned char c) { return c == '.' || c == ','; }

/* The four substitutions of sacreBLEU's TokenizerRegexp, each a full left-to-right re.sub scan
 * over the previous one's output (so e.g. in "a.,b" the ',' is not split by rule 2, because the
 * '.' was consumed by the match before it). */
static attn_status pass_re1(const unsigned char *s, size_t n, sbuf *d) { /* ' \1 ' */
    attn_status st = sb_reserve(d, 3 * n);
    if (st) return st;
    for (size_t i = 0; i < n; i++) {
        if (re1_class(s[i])) {
            sb_putc(d, ' '), sb_putc(d, (char)s[i]), sb_putc(d, ' ');
        } else
            sb_putc(d, (char)s[i]);
    }
    return ATTN_STATUS_OK;
}

static attn_status pass_re2(const unsigned char *s, size_t n, sbuf *d) { /* ([^0-9])([\.,]) */
    attn_status st = sb_reserve(d, 2 * n);
    if (st) return st;
    for (size_t i = 0; i < n;) {
        if (i + 1 < n && !is_digit(s[i]) && is_dot_comma(s[i + 1])) {
            sb_putc(d, (char)s[i]), sb_putc(d, ' '), sb_putc(d, (char)s[i + 1]), sb_putc(d, ' ');
            i += 2;
        } else
            sb_putc(d, (char)s[i++]);
    }
    return ATTN_STATUS_OK;
}

static attn_status pass_re3(const unsigned char *s, size_t n, sbuf *d) { /* ([\.,])([^0-9]) */
    attn_status st = sb_reserve(d, 2 * n);
    if (st) return st;
    for (size_t i = 0; i < n;) {
        if (i + 1 < n && is_dot_comma(s[i]) && !is_digit(s[i + 1])) {
            sb_putc(d, ' '), sb_putc(d, (char)s[i]), sb_putc(d, ' '), sb_putc(d, (char)s[i + 1]);
            i += 2;
        } else
            sb_putc(d, (char)s[i++]);
    }
    return ATTN_STATUS_OK;
}

static attn_status pass_re4(const unsigned char *s, size_t n, sbuf *d) { /* ([0-9])(-) */
    attn_status st = sb_reserve(d, 2 * n);
    if (st) return st;
    for (size_t i = 0; i < n;) {
        if (i + 1 < n && is_digit(s[i]) && s[i + 1] == '-') {
            sb_putc(d, (char)s[i]), sb_putc(d, ' '), sb_putc(d, '-'), sb_putc(d, ' ');
            i += 2;
        } else
            sb_putc(d, (char)s[i++]);
    }
    return ATTN_STATUS_OK;
}

/* TokenizerZh's per-character loop: " c " around each Chinese character. */
static attn_status pass_zh_chars(const unsigned char *s, size_t n, sbuf *d) {
    attn_status st = sb_reserve(d, 3 * n); /* a Chinese character has >= 3 bytes: <= 5/3 growth */
    if (st) return st;
    for (size_t i = 0, l; i < n; i += l) {
        if (s[i] < 0x80) {
            l = 1;
            sb_putc(d, (char)s[i]);
            continue;
        }
        uint32_t c = u8_decode(s + i, &l);
        if (attn_bleu_is_zh_char(c)) {
            sb_putc(d, ' '), sb_put(d, (const char *)s + i, l), sb_putc(d, ' ');
        } else
            sb_put(d, (const char *)s + i, l);
    }
    return ATTN_STATUS_OK;
}

/* ---------------------------------------------------------------- the segment pipeline */

typedef struct {
    sbuf buf[2];         /* ping-pong buffers between passes */
    const char *text;    /* the current text: the input or one of buf[] */
    size_t len;
    int next;            /* buf[next] receives the next pass */
    size_t *toks;        /* ntok (offset, length) pairs into text */
    size_t ntok, tok_cap;
} tok_ctx;

static void tok_ctx_free(tok_ctx *c) {
    free(c->buf[0].p), free(c->buf[1].p), free(c->toks);
    memset(c, 0, sizeof *c);
}

static sbuf *next_buf(tok_ctx *c) {
    sbuf *d = &c->buf[c->next];
    d->len = 0;
    return d;
}
static void took(tok_ctx *c, sbuf *d) {
    c->text = d->p ? d->p : "", c->len = d->len; /* a pass over "" may not have allocated */
    c->next ^= 1;
}

#define U(p) ((const unsigned char *)(p))

/* Python's str.split(): maximal runs of non-whitespace. */
static attn_status split_tokens(tok_ctx *c) {
    const unsigned char *s = U(c->text);
    size_t n = c->len, start = SIZE_MAX;
    c->ntok = 0;
    for (size_t i = 0, l; i <= n; i += l) {
        bool space = true;
        l = 1;
        if (i < n) {
            uint32_t cp = s[i] < 0x80 ? s[i] : u8_decode(s + i, &l);
            space = py_space(cp);
        }
        if (!space && start == SIZE_MAX) start = i;
        if (space && start != SIZE_MAX) {
            if (c->ntok == c->tok_cap) {
                size_t cap = c->tok_cap ? 2 * c->tok_cap : 64;
                size_t *t = realloc(c->toks, 2 * cap * sizeof *t);
                if (!t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bleu: out of memory");
                c->toks = t, c->tok_cap = cap;
            }
            c->toks[2 * c->ntok] = start, c->toks[2 * c->ntok + 1] = i - start;
            c->ntok++;
            start = SIZE_MAX;
        }
    }
    return ATTN_STATUS_OK;
}

/* sacreBLEU's BLEU._preprocess_segment followed by str.split(), on well-formed UTF-8 text. */
static attn_status preprocess(tok_ctx *c, const char *text, size_t n, const attn_bleu_options *o) {
    attn_status st;
    sbuf *d;
    c->text = text, c->len = n, c->next = 0;
    if (o->lowercase) {
        if ((st = pass_lower(U(c->text), c->len, d = next_buf(c)))) return st;
        took(c, d);
    }
    /* sent.rstrip() */
    while (c->len > 0) {
        size_t j = u8_prev(U(c->text), c->len), l;
        if (!py_space(u8_decode(U(c->text) + j, &l))) break;
        c->len = j;
    }
    if (o->tokenize == ATTN_BLEU_TOKENIZE_13A) {
        static const char *const subs[][2] = {{"<skipped>", ""}, {"-\n", ""}, {"\n", " "}};
        static const char *const ents[][2] = {
            {"&quot;", "\""}, {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}};
        for (int k = 0; k < 3; k++) {
            if (!memchr(c->text, subs[k][0][0], c->len)) continue; /* nothing to replace */
            if ((st = pass_replace(c->text, c->len, subs[k][0], subs[k][1], d = next_buf(c))))
                return st;
            took(c, d);
        }
        if (memchr(c->text, '&', c->len)) /* the Python guard: `if '&' in line` */
            for (int k = 0; k < 4; k++) {
                if ((st = pass_replace(c->text, c->len, ents[k][0], ents[k][1], d = next_buf(c))))
                    return st;
                took(c, d);
            }
        /* f' {line} ' — the padding lets rule 1 see no edge; kept for exactness */
        if ((st = sb_reserve(d = next_buf(c), c->len + 2))) return st;
        sb_putc(d, ' '), sb_put(d, c->text, c->len), sb_putc(d, ' ');
        took(c, d);
    } else if (o->tokenize == ATTN_BLEU_TOKENIZE_ZH) {
        /* line.strip(): the right side is already stripped */
        while (c->len > 0) {
            size_t l;
            if (!py_space(u8_decode(U(c->text), &l))) break;
            c->text += l, c->len -= l;
        }
        if ((st = pass_zh_chars(U(c->text), c->len, d = next_buf(c)))) return st;
        took(c, d);
    }
    if (o->tokenize != ATTN_BLEU_TOKENIZE_NONE) {
        attn_status (*const passes[4])(const unsigned char *, size_t, sbuf *) = {
            pass_re1, pass_re2, pass_re3, pass_re4};
        for (int k = 0; k < 4; k++) {
            if ((st = passes[k](U(c->text), c->len, d = next_buf(c)))) return st;
            took(c, d);
        }
    }
    return split_tokens(c);
}

static attn_status check_options(const attn_bleu_options *o) {
    if (o->tokenize != ATTN_BLEU_TOKENIZE_ZH && o->tokenize != ATTN_BLEU_TOKENIZE_13A &&
        o->tokenize != ATTN_BLEU_TOKENIZE_NONE)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bleu: unknown tokenizer %d (expected zh, 13a or none)",
                         (int)o->tokenize);
    return ATTN_STATUS_OK;
}

attn_status attn_bleu_tokenize(const char *text, const attn_bleu_options *opt, char **out) {
    static const attn_bleu_options defaults = {ATTN_BLEU_TOKENIZE_ZH, false};
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_bleu_tokenize: out is NULL");
    *out = NULL;
    if (!text) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_bleu_tokenize: text is NULL");
    const attn_bleu_options *o = opt ? opt : &defaults;
    attn_status st = check_options(o);
    if (st) return st;
    size_t n = strlen(text), bad = u8_invalid_at(U(text), n);
    if (bad != SIZE_MAX)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_bleu_tokenize: invalid UTF-8 at byte %zu (0x%02x)", bad + 1,
                         (unsigned)U(text)[bad]);
    tok_ctx c = {0};
    if ((st = preprocess(&c, text, n, o))) {
        tok_ctx_free(&c);
        return st;
    }
    size_t total = 1;
    for (size_t t = 0; t < c.ntok; t++) total += c.toks[2 * t + 1] + 1;
    char *r = attn_alloc(total);
    if (!r) {
        tok_ctx_free(&c);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attn_bleu_tokenize: out of memory");
    }
    size_t k = 0;
    for (size_t t = 0; t < c.ntok; t++) {
        if (t) r[k++] = ' ';
        memcpy(r + k, c.text + c.toks[2 * t], c.toks[2 * t + 1]);
        k += c.toks[2 * t + 1];
    }
    r[k] = '\0';
    tok_ctx_free(&c);
    *out = r;
    return ATTN_STATUS_OK;
}

/* ---------------------------------------------------------------- n-gram statistics */

/* Per segment, sacreBLEU builds Counters of n-gram tuples; here the hypothesis tokens get small
 * integer ids (a per-segment string table), its n-grams go into an open-addressing table keyed
 * by (order, ids), and each reference's n-grams are only looked up in it: a reference n-gram the
 * hypothesis lacks cannot change the clipped counts. Both tables are sized to the hypothesis and
 * reset between segments through a list of used slots, so a long corpus costs O(total tokens). */

#define NO_ID UINT32_MAX /* a reference token absent from the hypothesis */

typedef struct {
    uint64_t h;
    size_t off, len; /* token bytes within the owner's string storage */
    uint32_t id;     /* the token's id */
    uint32_t gen;    /* the segment that filled the slot; any other value = empty */
} vocab_slot;

typedef struct {
    uint64_t h;
    uint32_t start;   /* first token index in the hypothesis; order 0 = empty slot */
    uint32_t order;
    uint32_t hyp;     /* occurrences in the hypothesis */
    uint32_t ref_max; /* max over references of occurrences in one reference */
    uint32_t ref_cur; /* occurrences in the current reference */
    uint32_t stamp;   /* which reference ref_cur counts (index + 1) */
} ngram_slot;

typedef struct {
    tok_ctx tc;
    sbuf words; /* hypothesis token bytes, for the vocabulary */
    vocab_slot *vocab;
    size_t vocab_cap;
    ngram_slot *grams;
    size_t gram_cap;
    size_t *used; /* occupied slots of grams */
    size_t n_used, used_cap;
    uint32_t *hyp_ids, *ref_ids;
    size_t hyp_cap, ref_cap;
    uint32_t n_words;
    uint32_t gen; /* current segment's vocabulary generation (never 0 while in use) */
} bleu_ctx;

static void bleu_ctx_free(bleu_ctx *b) {
    tok_ctx_free(&b->tc);
    free(b->words.p), free(b->vocab), free(b->grams), free(b->used);
    free(b->hyp_ids), free(b->ref_ids);
}

static inline uint64_t hash_bytes(const char *s, size_t n) { /* FNV-1a, then a final mix */
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 32);
}

static inline uint64_t hash_ids(const uint32_t *ids, uint32_t order) {
    uint64_t h = 0x9E3779B97F4A7C15ull * (order + 1);
    for (uint32_t k = 0; k < order; k++) {
        h = (h ^ ids[k]) * 0xff51afd7ed558ccdull;
        h ^= h >> 33;
    }
    return h;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

/* Make room for a segment of nh hypothesis tokens: tables at most half full. */
static attn_status bleu_reserve(bleu_ctx *b, size_t nh) {
    if (nh >= (size_t)1 << 28)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "bleu: a segment has %zu tokens (limit 2^28)", nh);
    size_t vc = pow2_at_least(2 * nh + 1), gc = pow2_at_least(2 * ATTN_BLEU_ORDER * nh + 1);
    if (vc > b->vocab_cap) {
        free(b->vocab);
        b->vocab_cap = 0;
        if (!(b->vocab = calloc(vc, sizeof *b->vocab))) goto oom;
        b->vocab_cap = vc;
        b->gen = 0; /* all slots are empty (gen 0) */
    }
    if (gc > b->gram_cap) {
        free(b->grams), free(b->used);
        b->gram_cap = b->used_cap = b->n_used = 0; /* the new table starts empty */
        b->grams = calloc(gc, sizeof *b->grams);
        b->used = malloc(gc * sizeof *b->used);
        if (!b->grams || !b->used) goto oom;
        b->gram_cap = b->used_cap = gc;
    }
    if (nh > b->hyp_cap) {
        free(b->hyp_ids);
        b->hyp_cap = 0;
        if (!(b->hyp_ids = malloc(nh * sizeof *b->hyp_ids))) goto oom;
        b->hyp_cap = nh;
    }
    return ATTN_STATUS_OK;
oom:
    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bleu: out of memory for a %zu-token segment", nh);
}

/* Id of token s[0, n): inserted when insert is set, else NO_ID if the hypothesis lacks it. */
static uint32_t vocab_id(bleu_ctx *b, const char *s, size_t n, bool insert) {
    uint64_t h = hash_bytes(s, n);
    size_t mask = b->vocab_cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        vocab_slot *v = &b->vocab[i];
        if (v->gen != b->gen) {
            if (!insert) return NO_ID;
            /* words was reserved for the whole hypothesis: no reallocation here */
            v->h = h, v->off = b->words.len, v->len = n, v->id = b->n_words++, v->gen = b->gen;
            sb_put(&b->words, s, n);
            return v->id;
        }
        if (v->h == h && v->len == n && !memcmp(b->words.p + v->off, s, n)) return v->id;
    }
}

static ngram_slot *gram_find(bleu_ctx *b, const uint32_t *ids, uint32_t order, uint64_t h,
                             bool insert, uint32_t start) {
    size_t mask = b->gram_cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        ngram_slot *g = &b->grams[i];
        if (!g->order) {
            if (!insert) return NULL;
            *g = (ngram_slot){.h = h, .start = start, .order = order};
            b->used[b->n_used++] = i;
            return g;
        }
        if (g->h == h && g->order == order &&
            !memcmp(b->hyp_ids + g->start, ids, order * sizeof *ids))
            return g;
    }
}

typedef struct {
    int64_t sys_len, ref_len, counts[ATTN_BLEU_ORDER], totals[ATTN_BLEU_ORDER];
} bleu_stats;

static attn_status segment_stats(bleu_ctx *b, size_t seg, const char *hyp, size_t n_refs,
                                 const char *const *const *refs, const attn_bleu_options *o,
                                 bleu_stats *acc) {
    attn_status st;
    size_t len = strlen(hyp), bad = u8_invalid_at(U(hyp), len);
    if (bad != SIZE_MAX)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bleu: hypothesis %zu: invalid UTF-8 at byte %zu (0x%02x)", seg + 1,
                         bad + 1, (unsigned)U(hyp)[bad]);
    if ((st = preprocess(&b->tc, hyp, len, o))) return st;
    size_t nh = b->tc.ntok;
    if ((st = bleu_reserve(b, nh))) return st;
    /* reset the previous segment's tables */
    for (size_t k = 0; k < b->n_used; k++) b->grams[b->used[k]].order = 0;
    b->n_used = 0;
    if (++b->gen == 0) { /* wrapped after 2^32 segments: really clear once */
        memset(b->vocab, 0, b->vocab_cap * sizeof *b->vocab);
        b->gen = 1;
    }
    b->n_words = 0, b->words.len = 0;
    if ((st = sb_reserve(&b->words, b->tc.len))) return st;
    for (size_t t = 0; t < nh; t++)
        b->hyp_ids[t] = vocab_id(b, b->tc.text + b->tc.toks[2 * t], b->tc.toks[2 * t + 1], true);
    for (uint32_t n = 1; n <= ATTN_BLEU_ORDER; n++)
        for (size_t i = 0; i + n <= nh; i++) {
            const uint32_t *ids = b->hyp_ids + i;
            ngram_slot *g = gram_find(b, ids, n, hash_ids(ids, n), true, (uint32_t)i);
            g->hyp++;
        }

    int64_t closest_diff = -1, closest_len = -1;
    for (size_t r = 0; r < n_refs; r++) {
        const char *ref = refs[r][seg];
        if (!ref) continue; /* sacreBLEU drops None references */
        size_t rlen = strlen(ref);
        if ((bad = u8_invalid_at(U(ref), rlen)) != SIZE_MAX)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "bleu: reference stream %zu, segment %zu: invalid UTF-8 at byte %zu "
                             "(0x%02x)",
                             r + 1, seg + 1, bad + 1, (unsigned)U(ref)[bad]);
        if ((st = preprocess(&b->tc, ref, rlen, o))) return st;
        size_t nr = b->tc.ntok;
        if (nr > b->ref_cap) {
            free(b->ref_ids);
            if (!(b->ref_ids = malloc(nr * sizeof *b->ref_ids)))
                return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bleu: out of memory");
            b->ref_cap = nr;
        }
        for (size_t t = 0; t < nr; t++)
            b->ref_ids[t] =
                vocab_id(b, b->tc.text + b->tc.toks[2 * t], b->tc.toks[2 * t + 1], false);
        for (uint32_t n = 1; n <= ATTN_BLEU_ORDER && n <= nh; n++)
            for (size_t i = 0; i + n <= nr; i++) {
                const uint32_t *ids = b->ref_ids + i;
                bool unknown = false;
                for (uint32_t k = 0; k < n; k++) unknown |= ids[k] == NO_ID;
                if (unknown) continue;
                ngram_slot *g = gram_find(b, ids, n, hash_ids(ids, n), false, 0);
                if (!g) continue;
                if (g->stamp != r + 1) g->stamp = (uint32_t)(r + 1), g->ref_cur = 0;
                if (++g->ref_cur > g->ref_max) g->ref_max = g->ref_cur;
            }
        /* BLEU._get_closest_ref_len, in stream order: closest, the shorter on a tie */
        int64_t diff = llabs((int64_t)nh - (int64_t)nr);
        if (closest_diff == -1 || diff < closest_diff) closest_diff = diff, closest_len = (int64_t)nr;
        else if (diff == closest_diff && (int64_t)nr < closest_len) closest_len = (int64_t)nr;
    }
    if (closest_len < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bleu: segment %zu has no reference (every stream's entry is NULL)",
                         seg + 1);
    for (size_t k = 0; k < b->n_used; k++) {
        const ngram_slot *g = &b->grams[b->used[k]];
        acc->counts[g->order - 1] += ATTN_MIN(g->hyp, g->ref_max);
        acc->totals[g->order - 1] += g->hyp;
    }
    acc->sys_len += (int64_t)nh;
    acc->ref_len += closest_len;
    return ATTN_STATUS_OK;
}

/* ---------------------------------------------------------------- the score */

/* utils.my_log: log with log(0) "floored" to -9999999999. */
static double my_log(double x) { return x == 0.0 ? -9999999999.0 : log(x); }

attn_status attn_bleu_compute(const int64_t counts[ATTN_BLEU_ORDER],
                              const int64_t totals[ATTN_BLEU_ORDER], int64_t sys_len,
                              int64_t ref_len, attn_bleu_result *out) {
    if (!counts || !totals || !out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_bleu_compute: NULL argument");
    if (sys_len < 0 || ref_len < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_bleu_compute: negative length (sys_len %lld, ref_len %lld)",
                         (long long)sys_len, (long long)ref_len);
    bool any = false;
    for (int k = 0; k < ATTN_BLEU_ORDER; k++) {
        if (counts[k] < 0 || counts[k] > totals[k])
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attn_bleu_compute: order %d has %lld matches of %lld n-grams "
                             "(expected 0 <= matches <= n-grams)",
                             k + 1, (long long)counts[k], (long long)totals[k]);
        any |= counts[k] != 0;
    }
    attn_bleu_result r = {0};
    memcpy(r.counts, counts, sizeof r.counts);
    memcpy(r.totals, totals, sizeof r.totals);
    r.sys_len = sys_len, r.ref_len = ref_len;
    /* Python: ratio = sys_len / ref_len if ref_len else 0; bp = exp(1 - ref_len / sys_len).
     * int / int is the correctly rounded quotient, as is the double division of exact values. */
    r.ratio = ref_len ? (double)sys_len / (double)ref_len : 0.0;
    r.bp = 1.0;
    if (sys_len < ref_len) r.bp = sys_len > 0 ? exp(1.0 - (double)ref_len / (double)sys_len) : 0.0;
    if (any) { /* else "early stop if there are no matches": score and precisions 0 */
        double smooth = 1.0;
        for (int k = 0; k < ATTN_BLEU_ORDER; k++) {
            if (totals[k] == 0) break;
            if (counts[k] == 0) {
                smooth *= 2;
                r.precisions[k] = 100.0 / (smooth * (double)totals[k]);
            } else
                r.precisions[k] = 100.0 * (double)counts[k] / (double)totals[k];
        }
        /* sum() from left to right, as Python 3.11's sum() of floats does */
        double s = 0.0;
        for (int k = 0; k < ATTN_BLEU_ORDER; k++) s += my_log(r.precisions[k]);
        r.score = r.bp * exp(s / ATTN_BLEU_ORDER);
    }
    *out = r;
    return ATTN_STATUS_OK;
}

attn_status attn_bleu_corpus(size_t n, const char *const *hyps, size_t n_refs,
                             const char *const *const *refs, const attn_bleu_options *opt,
                             attn_bleu_result *out) {
    static const attn_bleu_options defaults = {ATTN_BLEU_TOKENIZE_ZH, false};
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_bleu_corpus: out is NULL");
    const attn_bleu_options *o = opt ? opt : &defaults;
    attn_status st = check_options(o);
    if (st) return st;
    if (n_refs == 0 || n_refs > UINT32_MAX - 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_bleu_corpus: %zu reference streams (expected at least 1)", n_refs);
    if (n > 0 && (!hyps || !refs))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_bleu_corpus: %s is NULL",
                         !hyps ? "hyps" : "refs");
    for (size_t r = 0; n > 0 && r < n_refs; r++)
        if (!refs[r])
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attn_bleu_corpus: reference stream %zu is NULL", r + 1);
    bleu_ctx b = {0};
    bleu_stats acc = {0};
    for (size_t i = 0; i < n && !st; i++) {
        if (!hyps[i])
            st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_bleu_corpus: hypothesis %zu is NULL",
                           i + 1);
        else
            st = segment_stats(&b, i, hyps[i], n_refs, refs, o, &acc);
    }
    bleu_ctx_free(&b);
    if (st) return st;
    return attn_bleu_compute(acc.counts, acc.totals, acc.sys_len, acc.ref_len, out);
}

/* ---------------------------------------------------------------- names, files */

static const char *const tok_names[] = {"zh", "13a", "none"};

attn_status attn_bleu_tokenizer_parse(const char *name, attn_bleu_tokenizer *out) {
    for (int k = 0; k < 3; k++)
        if (name && !strcmp(name, tok_names[k])) {
            if (out) *out = (attn_bleu_tokenizer)k;
            return ATTN_STATUS_OK;
        }
    return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                     "unknown BLEU tokenizer '%s' (expected zh, 13a or none)", name ? name : "");
}

const char *attn_bleu_tokenizer_name(attn_bleu_tokenizer t) {
    return (unsigned)t < 3 ? tok_names[t] : "?";
}

void attn_bleu_lines_free(attn_bleu_lines *l) {
    if (!l) return;
    free(l->lines), free(l->data);
    memset(l, 0, sizeof *l);
}

attn_status attn_bleu_read_lines(const char *path, attn_bleu_lines *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_bleu_read_lines: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_bleu_read_lines: path is NULL");
    bool is_stdin = !strcmp(path, "-");
    const char *name = is_stdin ? "<stdin>" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return attn_fail(ATTN_STATUS_IO, "%s: cannot open: %s", name, strerror(errno));
    sbuf b = {0};
    attn_status st = ATTN_STATUS_OK;
    for (;;) {
        if ((st = sb_reserve(&b, 1 << 16))) break;
        size_t got = fread(b.p + b.len, 1, b.cap - b.len - 1, f);
        b.len += got;
        if (got == 0) break;
    }
    if (!st && ferror(f)) st = attn_fail(ATTN_STATUS_IO, "%s: read error: %s", name, strerror(errno));
    if (!is_stdin) fclose(f);
    if (st) {
        free(b.p);
        return st == ATTN_STATUS_TOO_LARGE
                   ? attn_fail(st, "%s: larger than %zu bytes", name, (size_t)ATTN_MAX_BUFFER_BYTES)
                   : st;
    }
    b.p[b.len] = '\0'; /* sb_reserve kept a byte for it */
    size_t n = 0;
    for (size_t i = 0; i < b.len; i++) n += b.p[i] == '\n';
    if (b.len > 0 && b.p[b.len - 1] != '\n') n++;
    char **lines = malloc((n + 1) * sizeof *lines);
    if (!lines) {
        free(b.p);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory for %zu lines", name, n);
    }
    size_t start = 0;
    for (size_t k = 0; k < n; k++) {
        char *nl = memchr(b.p + start, '\n', b.len - start);
        size_t end = nl ? (size_t)(nl - b.p) : b.len;
        b.p[end] = '\0';
        size_t len = end - start, bad;
        const char *nul = memchr(b.p + start, '\0', len);
        if (nul) {
            st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s:%zu: NUL byte at byte %zu of the line",
                           name, k + 1, (size_t)(nul - (b.p + start)) + 1);
            break;
        }
        if ((bad = u8_invalid_at(U(b.p + start), len)) != SIZE_MAX) {
            st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                           "%s:%zu: invalid UTF-8 at byte %zu of the line (0x%02x)", name, k + 1,
                           bad + 1, (unsigned)U(b.p + start)[bad]);
            break;
        }
        lines[k] = b.p + start;
        start = end + 1;
    }
    if (st) {
        free(lines), free(b.p);
        return st;
    }
    lines[n] = NULL;
    out->n = n, out->lines = lines, out->data = b.p;
    return ATTN_STATUS_OK;
}

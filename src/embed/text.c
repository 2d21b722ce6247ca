/* text.c — UTF-8 helpers and what Python does to a sentence before sentence-transformers hands it
 * to the tokenizer (str.strip(), str.lower()), plus transformers' clean_up_tokenization(). */
#include "embed-impl.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

int embed_utf8_next(const unsigned char *s, size_t n, int32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    }
    int len;
    int32_t v, min;
    if ((c & 0xE0) == 0xC0) len = 2, v = (int32_t)(c & 0x1F), min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, v = (int32_t)(c & 0x0F), min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, v = (int32_t)(c & 0x07), min = 0x10000;
    else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (int32_t)(s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

size_t embed_utf8_check(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        int k = embed_utf8_next(u + i, n - i, &cp);
        if (!k) return i;
        i += (size_t)k;
    }
    return n;
}

size_t attn_embed_utf8_check(const char *s, size_t n) { return s ? embed_utf8_check(s, n) : 0; }

int embed_utf8_put(char *dst, int32_t cp) {
    unsigned char *d = (unsigned char *)dst;
    if (cp < 0x80) {
        d[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (unsigned char)(0xC0 | (cp >> 6));
        d[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (unsigned char)(0xE0 | (cp >> 12));
        d[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (unsigned char)(0xF0 | (cp >> 18));
    d[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* CPython's _PyUnicode_IsWhitespace: bidirectional class WS, B or S, or category Zs. */
bool embed_py_isspace(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

void embed_py_strip(const char *s, size_t n, size_t *begin, size_t *end) {
    const unsigned char *u = (const unsigned char *)s;
    size_t b = 0, e = 0, i = 0;
    bool seen = false;
    while (i < n) {
        int32_t cp = u[i];
        int k = u[i] < 0x80 ? 1 : embed_utf8_next(u + i, n - i, &cp);
        if (!k) k = 1; /* callers pass valid UTF-8; never loop forever */
        if (!embed_py_isspace(cp)) {
            if (!seen) b = i, seen = true;
            e = i + (size_t)k;
        }
        i += (size_t)k;
    }
    *begin = seen ? b : n;
    *end = seen ? e : n;
}

/* Cased and case-ignorable as Unicode's Final_Sigma condition uses them (approximated from the
 * general category; Python uses the derived properties). */
static bool is_cased(int32_t c) {
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}
static bool is_case_ignorable(int32_t c) {
    if (c == '\'' || c == '.' || c == ':' || c == 0xB7 || c == 0x2018 || c == 0x2019 ||
        c == 0x2024 || c == 0xFE52 || c == 0xFF07 || c == 0xFF0E)
        return true;
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK;
}

char *embed_py_lower(const char *s, size_t n, size_t *out_n) {
    const unsigned char *u = (const unsigned char *)s;
    /* Decode once into code points (at most n of them). */
    int32_t *cps = malloc((n + 1) * sizeof *cps);
    char *out = malloc(2 * n + 8); /* U+0130 (2 bytes) becomes 3 bytes; others keep or shrink
                                      their length... except a few (e.g. U+023A -> U+2C65, 2 -> 3
                                      bytes): 2n is always enough */
    if (!cps || !out) {
        free(cps), free(out);
        return NULL;
    }
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp = u[i];
        int k = u[i] < 0x80 ? 1 : embed_utf8_next(u + i, n - i, &cp);
        if (!k) k = 1, cp = 0xFFFD;
        cps[m++] = cp;
        i += (size_t)k;
    }
    size_t o = 0;
    for (size_t i = 0; i < m; i++) {
        int32_t c = cps[i];
        if (c == 0x130) { /* LATIN CAPITAL LETTER I WITH DOT ABOVE: "i" + COMBINING DOT ABOVE */
            o += (size_t)embed_utf8_put(out + o, 'i');
            o += (size_t)embed_utf8_put(out + o, 0x307);
            continue;
        }
        if (c == 0x3A3) { /* GREEK CAPITAL SIGMA: final form at the end of a word */
            bool before = false, after = false;
            for (size_t j = i; j-- > 0;) {
                if (is_case_ignorable(cps[j])) continue;
                before = is_cased(cps[j]);
                break;
            }
            for (size_t j = i + 1; j < m; j++) {
                if (is_case_ignorable(cps[j])) continue;
                after = is_cased(cps[j]);
                break;
            }
            o += (size_t)embed_utf8_put(out + o, before && !after ? 0x3C2 : 0x3C3);
            continue;
        }
        int32_t l = c < 0x80 ? (c >= 'A' && c <= 'Z' ? c + 32 : c) : utf8proc_tolower(c);
        o += (size_t)embed_utf8_put(out + o, l);
    }
    out[o] = '\0';
    free(cps);
    *out_n = o;
    return out;
}

/* Replace every non-overlapping occurrence of pat (left to right) by rep, in place; rep is never
 * longer than pat. */
static void replace_all(char *s, const char *pat, const char *rep) {
    size_t lp = strlen(pat), lr = strlen(rep);
    char *r = s, *w = s;
    while (*r) {
        if (!strncmp(r, pat, lp)) {
            memcpy(w, rep, lr);
            w += lr, r += lp;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

void embed_clean_up_tokenization(char *s) {
    static const char *const pairs[][2] = {
        {" .", "."},     {" ?", "?"},     {" !", "!"},     {" ,", ","},   {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"},   {" 's", "'s"},   {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) replace_all(s, pairs[i][0], pairs[i][1]);
}

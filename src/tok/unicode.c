/* unicode.c — Unicode as Hugging Face tokenizers sees it: the character classes its BERT
 * normalizer and pre-tokenizers use, Rust's lowercase, the four normalization forms, and the
 * normalizer steps built on them (BertNormalizer, Lowercase, NFD, NFKD, NFC, NFKC,
 * StripAccents, Strip).
 *
 * tokenizers 0.21 takes these from Rust crates with tables of different Unicode versions:
 * char::is_whitespace and char::to_lowercase from Rust's std (recent Unicode), the general
 * categories (control, format, private use, nonspacing mark, punctuation) from
 * unicode_categories (an old Unicode version: characters assigned since are "unassigned" there,
 * so never removed as controls nor stripped as accents), and the normalization forms from
 * unicode-normalization-alignments. utf8proc supplies the data here; where its tables and the
 * crates' disagree, the differing code points are listed below. Every code point is compared
 * with tokenizers by tests/test_tokenizer_wordpiece.c (the lists come from there).
 *
 * BertNormalizer, as tokenizers applies it, in this order:
 *   clean_text            drop U+0000, U+FFFD and "control" characters (categories Cc, Cf, Co
 *                         except \t \n \r); whitespace (White_Space, \t \n \r included) -> ' '
 *   handle_chinese_chars  ' ' before and after every character of the CJK ideograph blocks
 *   strip_accents         NFD, then drop nonspacing marks (Mn); null means "= lowercase"
 *   lowercase             Rust's char::to_lowercase per character (İ -> "i̇", no final sigma) */
#include "tok-impl.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* A sorted list of [first, last] code point ranges. */
typedef struct {
    uint32_t a, z;
} cp_range;

static bool in_ranges(const cp_range *r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].a)
            hi = mid;
        else if (cp > r[mid].z)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

#define NR(x) (sizeof(x) / sizeof(x)[0])
#define IN(table, cp) in_ranges(table, NR(table), cp)

/* Where utf8proc 2.8 (Unicode 15.0) and the crates tokenizers 0.21.4 uses disagree, as measured
 * by tests/test_tokenizer_wordpiece.c over every code point:
 *   NOT_CONTROL  format characters (Cf) unicode_categories (Unicode 8) does not know: kept by
 *                clean_text
 *   NOT_MN       nonspacing marks unknown to unicode_categories: kept by strip_accents (and
 *                U+1734, Mc since Unicode 14, is still Mn there)
 *   NOT_PUNCT    punctuation unknown to unicode_categories: not split off by BertPreTokenizer
 *   NF_UNKNOWN   characters with a decomposition that unicode-normalization-alignments (Unicode 9)
 *                does not know: left as they are by NFD / NFKD / NFC / NFKC
 *   NOT_MARK     combining marks (M*) unknown to unicode-normalization-alignments: kept by
 *                StripAccents; those with a combining class are starters to its NFD
 *   EXTRA_*      characters whose category changed since those old tables (still punctuation
 *                / marks there)
 *   LOWER_NEW    lowercase mappings Rust's std (Unicode 16) has and utf8proc lacks */
static const cp_range NOT_CONTROL[] = {
    {0x890, 0x891},
    {0x8E2, 0x8E2},
    {0x110CD, 0x110CD},
    {0x13430, 0x1343F},
};
static const cp_range NOT_MN[] = {
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8E1},     {0x9FE, 0x9FE},
    {0xAFA, 0xAFF},     {0xB55, 0xB55},     {0xC04, 0xC04},     {0xC3C, 0xC3C},
    {0xD00, 0xD00},     {0xD3B, 0xD3C},     {0xD81, 0xD81},     {0xEBA, 0xEBA},
    {0xECE, 0xECE},     {0x180F, 0x180F},   {0x1885, 0x1886},   {0x1ABF, 0x1ACE},
    {0x1DF6, 0x1DFB},   {0xA82C, 0xA82C},   {0xA8C5, 0xA8C5},   {0xA8FF, 0xA8FF},
    {0xA9BD, 0xA9BD},   {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF},
    {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x11073, 0x11074},
    {0x110C2, 0x110C2}, {0x111C9, 0x111C9}, {0x111CF, 0x111CF}, {0x1123E, 0x1123E},
    {0x11241, 0x11241}, {0x1133B, 0x1133B}, {0x11438, 0x1143F}, {0x11442, 0x11444},
    {0x11446, 0x11446}, {0x1145E, 0x1145E}, {0x1182F, 0x11837}, {0x11839, 0x1183A},
    {0x1193B, 0x1193C}, {0x1193E, 0x1193E}, {0x11943, 0x11943}, {0x119D4, 0x119D7},
    {0x119DA, 0x119DB}, {0x119E0, 0x119E0}, {0x11A01, 0x11A0A}, {0x11A33, 0x11A38},
    {0x11A3B, 0x11A3E}, {0x11A47, 0x11A47}, {0x11A51, 0x11A56}, {0x11A59, 0x11A5B},
    {0x11A8A, 0x11A96}, {0x11A98, 0x11A99}, {0x11C30, 0x11C36}, {0x11C38, 0x11C3D},
    {0x11C3F, 0x11C3F}, {0x11C92, 0x11CA7}, {0x11CAA, 0x11CB0}, {0x11CB2, 0x11CB3},
    {0x11CB5, 0x11CB6}, {0x11D31, 0x11D36}, {0x11D3A, 0x11D3A}, {0x11D3C, 0x11D3D},
    {0x11D3F, 0x11D45}, {0x11D47, 0x11D47}, {0x11D90, 0x11D91}, {0x11D95, 0x11D95},
    {0x11D97, 0x11D97}, {0x11EF3, 0x11EF4}, {0x11F00, 0x11F01}, {0x11F36, 0x11F3A},
    {0x11F40, 0x11F40}, {0x11F42, 0x11F42}, {0x13440, 0x13440}, {0x13447, 0x13455},
    {0x16F4F, 0x16F4F}, {0x16FE4, 0x16FE4}, {0x1CF00, 0x1CF2D}, {0x1CF30, 0x1CF46},
    {0x1E000, 0x1E006}, {0x1E008, 0x1E018}, {0x1E01B, 0x1E021}, {0x1E023, 0x1E024},
    {0x1E026, 0x1E02A}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE},
    {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF}, {0x1E944, 0x1E94A},
};
static const cp_range NOT_PUNCT[] = {
    {0x61D, 0x61D},     {0x9FD, 0x9FD},     {0xA76, 0xA76},     {0xC77, 0xC77},
    {0xC84, 0xC84},     {0x1B7D, 0x1B7E},   {0x2E43, 0x2E4F},   {0x2E52, 0x2E5D},
    {0x10EAD, 0x10EAD}, {0x10F55, 0x10F59}, {0x10F86, 0x10F89}, {0x1144B, 0x1144F},
    {0x1145A, 0x1145B}, {0x1145D, 0x1145D}, {0x11660, 0x1166C}, {0x116B9, 0x116B9},
    {0x1183B, 0x1183B}, {0x11944, 0x11946}, {0x119E2, 0x119E2}, {0x11A3F, 0x11A46},
    {0x11A9A, 0x11A9C}, {0x11A9E, 0x11AA2}, {0x11B00, 0x11B09}, {0x11C41, 0x11C45},
    {0x11C70, 0x11C71}, {0x11EF7, 0x11EF8}, {0x11F43, 0x11F4F}, {0x11FFF, 0x11FFF},
    {0x12FF1, 0x12FF2}, {0x16E97, 0x16E9A}, {0x16FE2, 0x16FE2}, {0x1E95E, 0x1E95F},
};
static const cp_range NF_UNKNOWN[] = {
    {0x32FF, 0x32FF},   {0xA7F2, 0xA7F4},   {0xAB69, 0xAB69},   {0x10781, 0x10785},
    {0x10787, 0x107B0}, {0x107B2, 0x107BA}, {0x11938, 0x11938}, {0x1E030, 0x1E06D},
    {0x1F16C, 0x1F16C}, {0x1FBF0, 0x1FBF9},
};
static const cp_range NOT_MARK[] = {
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8D3},     {0x9FE, 0x9FE},
    {0xAFA, 0xAFF},     {0xB55, 0xB55},     {0xC04, 0xC04},     {0xC3C, 0xC3C},
    {0xCF3, 0xCF3},     {0xD00, 0xD00},     {0xD3B, 0xD3C},     {0xD81, 0xD81},
    {0xEBA, 0xEBA},     {0xECE, 0xECE},     {0x1715, 0x1715},   {0x180F, 0x180F},
    {0x1ABF, 0x1ACE},   {0x1CF7, 0x1CF7},   {0x1DF6, 0x1DFA},   {0xA82C, 0xA82C},
    {0xA8FF, 0xA8FF},   {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF},
    {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x11073, 0x11074},
    {0x110C2, 0x110C2}, {0x11145, 0x11146}, {0x111C9, 0x111C9}, {0x111CE, 0x111CF},
    {0x11241, 0x11241}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x1182C, 0x1183A},
    {0x11930, 0x11935}, {0x11937, 0x11938}, {0x1193B, 0x1193E}, {0x11940, 0x11940},
    {0x11942, 0x11943}, {0x119D1, 0x119D7}, {0x119DA, 0x119E0}, {0x119E4, 0x119E4},
    {0x11A01, 0x11A0A}, {0x11A33, 0x11A39}, {0x11A3B, 0x11A3E}, {0x11A47, 0x11A47},
    {0x11A51, 0x11A5B}, {0x11A8A, 0x11A99}, {0x11D31, 0x11D36}, {0x11D3A, 0x11D3A},
    {0x11D3C, 0x11D3D}, {0x11D3F, 0x11D45}, {0x11D47, 0x11D47}, {0x11D8A, 0x11D8E},
    {0x11D90, 0x11D91}, {0x11D93, 0x11D97}, {0x11EF3, 0x11EF6}, {0x11F00, 0x11F01},
    {0x11F03, 0x11F03}, {0x11F34, 0x11F3A}, {0x11F3E, 0x11F42}, {0x13440, 0x13440},
    {0x13447, 0x13455}, {0x16F4F, 0x16F4F}, {0x16F7F, 0x16F87}, {0x16FE4, 0x16FE4},
    {0x16FF0, 0x16FF1}, {0x1CF00, 0x1CF2D}, {0x1CF30, 0x1CF46}, {0x1E08F, 0x1E08F},
    {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF},
};
/* marks to the old tables, no longer since (Mc -> Lo, Po -> So / Mn) */
static const cp_range EXTRA_MARK[] = {{0x1CF2, 0x1CF3}};
static const cp_range EXTRA_PUNCT[] = {{0x166D, 0x166D}, {0x111C9, 0x111C9}};

static const struct {
    uint32_t from, to;
} LOWER_NEW[] = {
    {0x1C89, 0x1C8A}, {0xA7CB, 0x264}, {0xA7CC, 0xA7CD}, {0xA7DA, 0xA7DB}, {0xA7DC, 0x19B}};
/* and U+10D50..U+10D65 -> U+10D70..U+10D85 (Garay) */

/* ---- classes ---- */

bool tok_uni_space(uint32_t cp) {
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool tok_uni_punct(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= 0x21 && cp <= 0x2f) || (cp >= 0x3a && cp <= 0x40) ||
               (cp >= 0x5b && cp <= 0x60) || (cp >= 0x7b && cp <= 0x7e);
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    if (c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO) return !IN(NOT_PUNCT, cp);
    return IN(EXTRA_PUNCT, cp);
}

/* Numbers (Nd) of Unicode 16.0 that utf8proc 2.8 (Unicode 15.0) does not know; Rust's
 * char::is_numeric (tokenizers' Digits) has them. Measured over every code point by
 * tests/test_tokenizer_families.c. */
static const cp_range NEW_NUMERIC[] = {{0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9},
                                       {0x16130, 0x16139}, {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9},
                                       {0x1E5F1, 0x1E5FA}};

bool tok_uni_numeric(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO ||
           IN(NEW_NUMERIC, cp);
}

bool tok_uni_control(uint32_t cp) {
    if (cp == '\t' || cp == '\n' || cp == '\r') return false;
    if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return true;
    if (cp < 0xA0) return false;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return (c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CO ||
            c == UTF8PROC_CATEGORY_CS) &&
           !IN(NOT_CONTROL, cp);
}

bool tok_uni_mn(uint32_t cp) {
    if (cp < 0x300) return false;
    if (cp == 0x1734) return true;
    return utf8proc_category((utf8proc_int32_t)cp) == UTF8PROC_CATEGORY_MN && !IN(NOT_MN, cp);
}

/* unicode-normalization-alignments' is_combining_mark (StripAccents): M* of Unicode 9. */
static bool uni_mark(uint32_t cp) {
    if (cp < 0x300) return false;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    if (c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME)
        return !IN(NOT_MARK, cp);
    return IN(EXTRA_MARK, cp);
}

/* A character that unicode-normalization-alignments treats as an unknown starter while
 * utf8proc would decompose or reorder it: normalization runs stop there. */
static bool nf_opaque(uint32_t cp) {
    if (cp < 0x7FD) return false;
    if (IN(NF_UNKNOWN, cp)) return true;
    return IN(NOT_MARK, cp) && utf8proc_get_property((utf8proc_int32_t)cp)->combining_class != 0;
}

bool tok_uni_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

size_t tok_uni_lower(uint32_t cp, uint32_t out[3]) {
    if (cp < 0x80) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    if (cp == 0x130) { /* the one unconditional multi-character lowercase (SpecialCasing) */
        out[0] = 0x69;
        out[1] = 0x307;
        return 2;
    }
    out[0] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
    if (out[0] == cp) {
        if (cp >= 0x10D50 && cp <= 0x10D65) out[0] = cp + 0x20;
        for (size_t i = 0; i < NR(LOWER_NEW); i++)
            if (LOWER_NEW[i].from == cp) out[0] = LOWER_NEW[i].to;
    }
    return 1;
}

/* ---- helpers ---- */

static void put_cp(tok_buf *b, uint32_t cp) {
    char u[4];
    tok_buf_put(b, u, tok_utf8_encode(cp, u));
}

static bool all_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return false;
    return true;
}

/* Next code point of valid UTF-8 s[*i..n). */
static uint32_t next_cp(const char *s, size_t n, size_t *i) {
    uint32_t cp;
    size_t k = tok_utf8_decode((const unsigned char *)s + *i, n - *i, &cp);
    if (!k) { /* cannot happen: encode validates its text; be safe anyway */
        k = 1;
        cp = 0xFFFD;
    }
    *i += k;
    return cp;
}

typedef enum { NF_D, NF_KD, NF_C, NF_KC } nf_form;

/* One run without opaque characters through utf8proc (see nf_apply). */
static bool nf_run(nf_form form, bool drop_mn, const char *s, size_t n, tok_buf *out) {
    if (all_ascii(s, n)) { /* ASCII is invariant under every form and has no marks */
        tok_buf_put(out, s, n);
        return !out->oom;
    }
    utf8proc_option_t opt = UTF8PROC_STABLE;
    opt |= (form == NF_D || form == NF_KD) ? UTF8PROC_DECOMPOSE : UTF8PROC_COMPOSE;
    if (form == NF_KD || form == NF_KC) opt |= UTF8PROC_COMPAT;
    utf8proc_ssize_t cap = (utf8proc_ssize_t)n + 16;
    utf8proc_int32_t *buf = NULL;
    utf8proc_ssize_t k;
    for (;;) {
        utf8proc_int32_t *nb = realloc(buf, (size_t)cap * sizeof *buf);
        if (!nb) {
            free(buf);
            return false;
        }
        buf = nb;
        k = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, buf, cap, opt);
        if (k < 0) { /* invalid UTF-8: cannot happen after validation */
            free(buf);
            tok_buf_put(out, s, n);
            return !out->oom;
        }
        if (k <= cap) break;
        cap = k;
    }
    if (form == NF_C || form == NF_KC) {
        k = utf8proc_reencode(buf, k, opt); /* composes, then writes UTF-8 into buf */
        const char *u = (const char *)buf;
        for (size_t i = 0; k >= 0 && i < (size_t)k;) {
            size_t at = i;
            uint32_t cp = next_cp(u, (size_t)k, &i);
            if (cp >= 0x7FD && IN(NF_UNKNOWN, cp)) {
                /* a composition unknown to tokenizers' tables (U+11938): not composed there */
                utf8proc_int32_t d[8];
                int bc = 0;
                utf8proc_ssize_t m =
                    utf8proc_decompose_char((utf8proc_int32_t)cp, d, 8, UTF8PROC_DECOMPOSE, &bc);
                for (utf8proc_ssize_t j = 0; j < m && j < 8; j++) put_cp(out, (uint32_t)d[j]);
            } else {
                tok_buf_put(out, u + at, i - at);
            }
        }
    } else {
        for (utf8proc_ssize_t i = 0; i < k; i++)
            if (!(drop_mn && tok_uni_mn((uint32_t)buf[i]))) put_cp(out, (uint32_t)buf[i]);
    }
    free(buf);
    return !out->oom;
}

/* Normalize s[0..n) to form and append it to out; with drop_mn, nonspacing marks are removed
 * after decomposition (BertNormalizer's strip_accents: form must be NF_D). Characters
 * tokenizers' normalization tables do not know (nf_opaque) pass unchanged and cut the text into
 * runs normalized separately: to those tables they are starters without a decomposition. */
static bool nf_apply(nf_form form, bool drop_mn, const char *s, size_t n, tok_buf *out) {
    size_t i = 0, run = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0xDF) { /* below U+07C0: never opaque */
            i++;
            continue;
        }
        size_t at = i;
        uint32_t cp = next_cp(s, n, &i);
        if (!nf_opaque(cp)) continue;
        if (!nf_run(form, drop_mn, s + run, at - run, out)) return false;
        if (!(drop_mn && tok_uni_mn(cp))) tok_buf_put(out, s + at, i - at);
        run = i;
    }
    return nf_run(form, drop_mn, s + run, n - run, out);
}

static void lower_into(const char *s, size_t n, tok_buf *out) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            tok_buf_putc(out, (char)(c >= 'A' && c <= 'Z' ? c + 32 : c));
            i++;
            continue;
        }
        uint32_t lc[3];
        size_t m = tok_uni_lower(next_cp(s, n, &i), lc);
        for (size_t j = 0; j < m; j++) put_cp(out, lc[j]);
    }
}

/* BertNormalizer's clean_text and handle_chinese_chars in one pass. */
static void bert_clean(const tok_norm *nm, const char *s, size_t n, tok_buf *out) {
    size_t i = 0;
    while (i < n) {
        size_t at = i;
        uint32_t cp = next_cp(s, n, &i);
        if (nm->clean) {
            if (cp == 0 || cp == 0xFFFD || tok_uni_control(cp)) continue;
            if (tok_uni_space(cp)) cp = ' ';
        }
        if (nm->chinese && tok_uni_cjk(cp)) {
            tok_buf_putc(out, ' ');
            tok_buf_put(out, s + at, i - at);
            tok_buf_putc(out, ' ');
        } else if (cp == ' ') {
            tok_buf_putc(out, ' ');
        } else {
            tok_buf_put(out, s + at, i - at);
        }
    }
}

bool tok_norm_apply(const tok_norm *nm, const char *s, size_t n, tok_buf *out) {
    switch (nm->kind) {
    case TOK_NORM_BERT: {
        bool strip = nm->strip_accents < 0 ? nm->lower : nm->strip_accents == 1;
        if (!nm->clean && !nm->chinese && !strip && !nm->lower) {
            tok_buf_put(out, s, n);
            return !out->oom;
        }
        tok_buf a = {0}, b = {0};
        const char *cur = s;
        size_t cn = n;
        if (nm->clean || nm->chinese) {
            bert_clean(nm, cur, cn, &a);
            cur = a.p ? a.p : "";
            cn = a.n;
        }
        bool ok = !a.oom;
        if (ok && strip) {
            tok_buf *dst = nm->lower ? &b : out;
            ok = nf_apply(NF_D, true, cur, cn, dst);
            cur = b.p ? b.p : "";
            cn = b.n;
        }
        if (ok && nm->lower)
            lower_into(cur, cn, out);
        else if (ok && !strip)
            tok_buf_put(out, cur, cn);
        tok_buf_free(&a);
        tok_buf_free(&b);
        return ok && !out->oom;
    }
    case TOK_NORM_LOWERCASE: lower_into(s, n, out); return !out->oom;
    case TOK_NORM_NFD: return nf_apply(NF_D, false, s, n, out);
    case TOK_NORM_NFKD: return nf_apply(NF_KD, false, s, n, out);
    case TOK_NORM_NFC: return nf_apply(NF_C, false, s, n, out);
    case TOK_NORM_NFKC: return nf_apply(NF_KC, false, s, n, out);
    case TOK_NORM_STRIP_ACCENTS: {
        size_t i = 0;
        while (i < n) {
            size_t at = i;
            uint32_t cp = next_cp(s, n, &i);
            if (!uni_mark(cp)) tok_buf_put(out, s + at, i - at);
        }
        return !out->oom;
    }
    case TOK_NORM_STRIP: {
        size_t a = 0, z = n;
        if (nm->left) {
            while (a < z) {
                size_t j = a;
                if (!tok_uni_space(next_cp(s, z, &j))) break;
                a = j;
            }
        }
        if (nm->right) {
            while (z > a) { /* step back one code point */
                size_t j = z - 1;
                while (j > a && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
                size_t k = j;
                if (!tok_uni_space(next_cp(s, z, &k))) break;
                z = j;
            }
        }
        tok_buf_put(out, s + a, z - a);
        return !out->oom;
    }
    case TOK_NORM_PRECOMPILED: return tok_precompiled_apply(nm->pc, s, n, out);
    case TOK_NORM_PREPEND:
    case TOK_NORM_REPLACE: break; /* done by the caller (tokenizer.c) */
    }
    tok_buf_put(out, s, n);
    return !out->oom;
}

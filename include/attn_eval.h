/* attn_eval.h — evaluating translations: corpus BLEU (attn_bleu_), computed exactly as sacreBLEU
 * 2.x's BLEU().corpus_score() with its defaults, so that a score printed by attn can be quoted
 * next to a sacreBLEU score.
 *
 *   const char *hyps[] = {"猫坐在垫子上。", "今天很热"};
 *   const char *ref0[] = {"猫坐在垫子上。", "今天天气很热。"};
 *   const char *const *refs[] = {ref0};           // one reference stream
 *   attn_bleu_options opt = {0};                   // tokenize zh, case-sensitive
 *   attn_bleu_result r;
 *   if (attn_bleu_corpus(2, hyps, 1, refs, &opt, &r)) puts(attn_last_error());
 *   else printf("BLEU = %.2f\n", r.score);
 *
 * What is computed (sacreBLEU 2.6.0, metrics/bleu.py; the signature
 * "nrefs:R|case:mixed|eff:no|tok:zh|smooth:exp"):
 *   - each segment is lowercased if asked (Python's str.lower: full Unicode mapping, including
 *     'İ' -> "i̇" and the Greek final sigma), right-stripped of Unicode whitespace, tokenized,
 *     and split on Unicode whitespace (Python's str.split());
 *   - for each segment, n-grams of orders 1..4; a hypothesis n-gram's count is clipped by the
 *     largest count of that n-gram in any one reference of the segment;
 *   - the reference length of a segment is that of the reference closest in length to the
 *     hypothesis, the shorter one on a tie;
 *   - BP = 1 if hyp_len >= ref_len, else exp(1 - ref_len / hyp_len) (0 when hyp_len is 0);
 *   - precisions p_n = 100 * counts_n / totals_n; with 'exp' smoothing the k-th order that has
 *     no match gets 100 / (2^k * totals_n); an order with totals_n == 0 and every order after it
 *     keep p_n = 0; if no n-gram matches at all, every p_n and the score are 0;
 *   - score = BP * exp(sum_n log(p_n) / 4), log(0) taken as -9999999999 (so the score is 0).
 *
 * Tokenizers (sacreBLEU's names):
 *   zh    TokenizerZh: strip, put spaces around every "Chinese" character, then the regular
 *         expressions of 13a below (not its unescaping). "Chinese" is sacreBLEU's exact table,
 *         including its quirk: two of its ranges are written as 5-hex-digit '\u' escapes, which
 *         Python reads as two characters, so the effective ranges are U+2001–U+2A6D (general
 *         punctuation such as “ ” — …, currency, arrows, math, symbols, enclosed alphanumerics)
 *         and U+2F81–U+2FA1 instead of CJK extension B and the compatibility supplement; the
 *         other ranges are
 *         U+2E80–U+2FDF, U+2FF0–U+303F, U+3100–U+312F, U+31A0–U+31EF, U+3200–U+4DB5,
 *         U+4E00–U+9FBB, U+F900–U+FA2D, U+FA30–U+FA6A, U+FA70–U+FAD9, U+FE10–U+FE1F,
 *         U+FE30–U+FE4F, U+FF00–U+FFEF (fullwidth forms). Characters beyond U+FFFF never are.
 *   13a   Tokenizer13a (mteval-v13a): drop "<skipped>" and "-\n", '\n' -> ' ', unescape
 *         &quot; &amp; &lt; &gt;, then: space around ASCII punctuation and symbols except
 *         ' - . , ; '.' and ',' separated unless between two digits; '-' separated after a
 *         digit (the regular expressions' left-to-right matching is reproduced exactly).
 *   none  no tokenization: split on whitespace only.
 *
 * Text is UTF-8, validated strictly as Python decodes it (no overlong forms, surrogates or code
 * points above U+10FFFF): invalid text is ATTN_STATUS_INVALID_ARGUMENT naming the segment (its
 * 1-based line number) and byte. */
#ifndef ATTN_EVAL_H
#define ATTN_EVAL_H

#include "attn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* BLEU's maximum n-gram order (sacreBLEU's default, fixed here). */
#define ATTN_BLEU_ORDER 4

typedef enum {
    ATTN_BLEU_TOKENIZE_ZH = 0, /* sacreBLEU "zh" — the default: attn translates into Chinese */
    ATTN_BLEU_TOKENIZE_13A,    /* sacreBLEU "13a" — sacreBLEU's own default, for other languages */
    ATTN_BLEU_TOKENIZE_NONE    /* sacreBLEU "none" — text already tokenized */
} attn_bleu_tokenizer;

/* A zero-initialized struct is the default: tokenize zh, case-sensitive. */
typedef struct {
    attn_bleu_tokenizer tokenize;
    bool lowercase; /* sacreBLEU -lc */
} attn_bleu_options;

/* The fields of sacreBLEU's BLEUScore. Percentages are on a 0..100 scale. */
typedef struct {
    double score;                          /* BLEU, 0..100 */
    double precisions[ATTN_BLEU_ORDER];    /* p_1..p_4 after smoothing, 0..100 */
    double bp;                             /* brevity penalty, 0..1 */
    double ratio;                          /* sys_len / ref_len (0 when ref_len is 0) */
    int64_t sys_len, ref_len;              /* tokens in the hypotheses; in the closest refs */
    int64_t counts[ATTN_BLEU_ORDER];       /* clipped n-gram matches per order */
    int64_t totals[ATTN_BLEU_ORDER];       /* hypothesis n-grams per order */
} attn_bleu_result;

/* Corpus BLEU of n hypotheses against n_refs reference streams: refs[r][i] is the r-th reference
 * of segment i (refs[r] holds n strings). A NULL reference means "no r-th reference for this
 * segment" (sacreBLEU's None, for a variable number of references); every segment needs at least
 * one. opt NULL means the defaults. n == 0 gives a score of 0 with zero lengths. */
attn_status attn_bleu_corpus(size_t n, const char *const *hyps, size_t n_refs,
                             const char *const *const *refs, const attn_bleu_options *opt,
                             attn_bleu_result *out);

/* BLEU from already summed statistics (sacreBLEU's BLEU.compute_bleu with 'exp' smoothing):
 * for combining the statistics of several runs or shards. Needs 0 <= counts[k] <= totals[k]. */
attn_status attn_bleu_compute(const int64_t counts[ATTN_BLEU_ORDER],
                              const int64_t totals[ATTN_BLEU_ORDER], int64_t sys_len,
                              int64_t ref_len, attn_bleu_result *out);

/* One segment as BLEU sees it: lowercased if asked, tokenized, tokens joined by single spaces
 * (' '.join(seg.split()) of sacreBLEU's preprocessed segment). *out is NUL-terminated; free it
 * with attn_free. */
attn_status attn_bleu_tokenize(const char *text, const attn_bleu_options *opt, char **out);

/* "zh", "13a", "none" <-> attn_bleu_tokenizer. Parsing an unknown name is
 * ATTN_STATUS_INVALID_ARGUMENT; the name of an unknown value is "?". */
attn_status attn_bleu_tokenizer_parse(const char *name, attn_bleu_tokenizer *out);
const char *attn_bleu_tokenizer_name(attn_bleu_tokenizer t);

/* Whether the zh tokenizer treats code point cp as a Chinese character (see above). */
bool attn_bleu_is_zh_char(uint32_t cp);

/* The lines of a text file, as sacreBLEU reads them: split on '\n' only (a '\r' stays in the
 * line, where it counts as whitespace); a last line without '\n' counts; an empty file has no
 * lines. Every line is checked to be UTF-8 without NUL bytes: failures name path:line:byte. */
typedef struct {
    size_t n;     /* number of lines */
    char **lines; /* n NUL-terminated lines, without their '\n' */
    char *data;   /* the storage they point into */
} attn_bleu_lines;

/* Read path ("-" for standard input) into *out; free with attn_bleu_lines_free. A missing or
 * unreadable file is ATTN_STATUS_IO; invalid UTF-8 or a NUL byte ATTN_STATUS_INVALID_ARGUMENT. */
attn_status attn_bleu_read_lines(const char *path, attn_bleu_lines *out);
void attn_bleu_lines_free(attn_bleu_lines *l);

#ifdef __cplusplus
}
#endif
#endif

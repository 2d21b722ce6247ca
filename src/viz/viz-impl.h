/* viz-impl.h — internal helpers of src/viz (not installed). */
#ifndef ATTN_VIZ_IMPL_H
#define ATTN_VIZ_IMPL_H

#include "attn_viz.h"
#include "../core/core-impl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 prefix of s[0..n) (== n when all valid). */
size_t viz_utf8_valid_prefix(const char *s, size_t n);

/* Copy s into buf (cap >= 8) for display: invalid bytes become U+FFFD, C0 controls and DEL their
 * U+2400 pictures, and the text is cut at a character boundary to fit. */
void viz_sanitize(const char *s, size_t n, char *buf, size_t cap);

/* Decode the next UTF-8 code point of s (valid UTF-8 assumed, use viz_sanitize first); returns
 * the bytes consumed (0 at the end). */
int viz_utf8_next(const char *s, int32_t *cp);

/* Labels of n ids (attn_viz_mt_token_label of mt's pieces, target side when target, when mt is
 * not NULL; else attn_viz_token_label of tok's) as a string array; free with viz_labels_free. */
attn_status viz_labels(const attn_tok *tok, const attn_mt_tok *mt, bool target, const int32_t *ids,
                       int n, char ***out);
void viz_labels_free(char **labels, int n);

/* The tokens of a side (NULL if unset) and their count. */
static inline char **viz_side_tokens(const attn_viz *v, attn_viz_side s) {
    return s == ATTN_VIZ_SIDE_TOKENS ? v->tokens : v->target;
}
static inline int viz_side_len(const attn_viz *v, attn_viz_side s) {
    return s == ATTN_VIZ_SIDE_TOKENS ? v->n_tokens : v->n_target;
}

/* The JavaScript / CSS of the HTML viewer (viewer_page.c): pieces to write in order around the
 * data. */
extern const char *const viz_page_head[]; /* NULL-terminated; before the data JSON */
extern const char *const viz_page_tail[]; /* NULL-terminated; after it */
/* The explain walk-through's page (explain_page_data.c, from tools/explain_page.html). */
extern const char *const explain_page_head[];
extern const char *const explain_page_tail[];

/* ---- text buffers for pages (html.c) ---------------------------------------------------- */

/* A growing NUL-terminated text; oom once an allocation failed (later appends do nothing). */
typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} viz_sbuf;

void viz_sb_put(viz_sbuf *b, const char *s, size_t n);
void viz_sb_str(viz_sbuf *b, const char *s);
/* j as compact JSON with every "<" written as \u003c (safe inside a <script> element); takes
 * the reference to j. */
struct json_t;
void viz_sb_json(viz_sbuf *b, struct json_t *j);
/* The same without the \u003c (as json_dumps writes it: JSON_COMPACT | JSON_ENCODE_ANY). */
void viz_sb_json_raw(viz_sbuf *b, struct json_t *j);
/* A capture's tokens (valid UTF-8, none NULL: attn_viz_set_tokens checks) as a JSON array. */
struct json_t *viz_json_strings(char *const *s, int n);

/* ---- JSON text (json.c) ---- */
#define VIZ_REAL6_MAX 16 /* bytes of viz_real6's text at most (13 in fact: "-1.23457e-308") */
/* x as jansson writes a real at JSON_REAL_PRECISION(6) ("%.6g", ".0" added when it has neither
 * '.' nor 'e', the exponent without '+' and leading zeros; non-finite: null), into out (at least
 * VIZ_REAL6_MAX + 1 bytes, NUL-terminated); returns its length. Without printf for
 * |x| in [1e-30, 1e30) away from rounding ties. */
size_t viz_real6(char *out, double x);
/* Write the text to path atomically and free it. */
attn_status viz_sb_commit(viz_sbuf *b, const char *path);

/* ---- explain (explain.c) ---- */
#include "attn_explain.h"

/* The steps after q, k, v (p->q (Tq, dk), p->k, p->v (Tk, dk) already set): scores = q·kᵀ,
 * scaled = scores·scale with −inf where hidden (causal: j > i, or i − j >= window when
 * window > 0), weights = softmax of each row, output = weights·v; on the library's kernels. */
attn_status explain_attend(int Tq, int Tk, int dk, float scale, bool causal, int window,
                           attn_explain_pass *p);
/* Frees a pass's buffers and zeroes it. */
void explain_pass_free(attn_explain_pass *p);

#endif

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

#endif

/* html.c — the self-contained HTML viewer: the page of viewer_page.c (generated from
 * tools/viz_viewer.html) with the capture embedded as JSON in a <script type="application/json">
 * element. Each map's probabilities travel as base64 bytes, round(255 p), which is what a canvas
 * can show and keeps a 512-token capture small enough to load quickly. Every "<" of the JSON is
 * written as \u003c, so no token text can end the script element early. */
#include "viz-impl.h"

#include "../io/io-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void viz_sb_put(viz_sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->n + n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void viz_sb_str(viz_sbuf *b, const char *s) { viz_sb_put(b, s, strlen(s)); }

static void sb_json(viz_sbuf *b, json_t *j, bool escape_lt) {
    char *t = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!t) {
        b->oom = true;
        return;
    }
    const char *s = t;
    for (const char *lt; escape_lt && (lt = strchr(s, '<')); s = lt + 1) {
        viz_sb_put(b, s, (size_t)(lt - s));
        viz_sb_str(b, "\\u003c");
    }
    viz_sb_str(b, s);
    free(t);
}

void viz_sb_json(viz_sbuf *b, json_t *j) { sb_json(b, j, true); }
void viz_sb_json_raw(viz_sbuf *b, json_t *j) { sb_json(b, j, false); }

attn_status viz_sb_commit(viz_sbuf *b, const char *path) {
    if (b->oom) {
        free(b->p);
        memset(b, 0, sizeof *b);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory writing the page", path);
    }
    attn_atomic a;
    attn_status s = attn_atomic_begin(path, &a);
    if (!s) s = attn_atomic_write(&a, b->p, b->n);
    if (!s)
        s = attn_atomic_commit(&a);
    else
        attn_atomic_abort(&a);
    free(b->p);
    memset(b, 0, sizeof *b);
    return s;
}

json_t *viz_json_strings(char *const *s, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_string(s[i]));
    return a;
}

static void sb_base64_probs(viz_sbuf *b, const float *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char out[4 * 1024];
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned q[3] = {0, 0, 0};
        size_t k = n - i < 3 ? n - i : 3;
        for (size_t t = 0; t < k; t++) {
            float v = p[i + t];
            q[t] = v > 0 ? (v >= 1 ? 255u : (unsigned)lrintf(v * 255.0f)) : 0u; /* NaN -> 0 */
        }
        uint32_t w = q[0] << 16 | q[1] << 8 | q[2];
        out[o++] = tab[w >> 18 & 63];
        out[o++] = tab[w >> 12 & 63];
        out[o++] = k > 1 ? tab[w >> 6 & 63] : '=';
        out[o++] = k > 2 ? tab[w & 63] : '=';
        if (o + 4 > sizeof out) viz_sb_put(b, out, o), o = 0;
    }
    viz_sb_put(b, out, o);
}

attn_status attn_viz_write_html(const attn_viz *v, const char *path) {
    if (!v || !path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_write_html: NULL");
    if (v->n_maps == 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: the capture holds no attention maps",
                         path);
    viz_sbuf b = {NULL, 0, 0, false};
    for (int i = 0; viz_page_head[i]; i++) viz_sb_str(&b, viz_page_head[i]);
    viz_sb_str(&b, "{\"format\":\"attn-attention\",\"title\":");
    viz_sb_json(&b, v->title ? json_string(v->title) : json_null());
    viz_sb_str(&b, ",\"tokens\":");
    viz_sb_json(&b, viz_json_strings(v->tokens, v->n_tokens));
    if (v->n_target) {
        viz_sb_str(&b, ",\"target\":");
        viz_sb_json(&b, viz_json_strings(v->target, v->n_target));
    }
    if (v->target_out) {
        viz_sb_str(&b, ",\"target_out\":");
        viz_sb_json(&b, viz_json_strings(v->target_out, v->n_target));
    }
    viz_sb_str(&b, ",\"maps\":[");
    for (int i = 0; i < v->n_maps; i++) {
        const attn_viz_map *m = &v->maps[i];
        char hdr[256];
        snprintf(hdr, sizeof hdr,
                 "%s{\"kind\":\"%s\",\"layer\":%d,\"H\":%d,\"Tq\":%d,\"Tk\":%d,\"b64\":\"",
                 i ? "," : "", attn_viz_kind_name(m->kind), m->layer, m->H, m->Tq, m->Tk);
        viz_sb_str(&b, hdr);
        sb_base64_probs(&b, m->p, (size_t)m->H * m->Tq * m->Tk);
        viz_sb_str(&b, "\"}");
    }
    viz_sb_str(&b, "]}\n");
    for (int i = 0; viz_page_tail[i]; i++) viz_sb_str(&b, viz_page_tail[i]);
    return viz_sb_commit(&b, path);
}

/* capture.c — the attention container of attn_viz.h: tokens, maps, readable token labels, and the
 * safetensors + JSON export and import. */
#include "viz-impl.h"

#include "attn_io.h"
#include "../io/io-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- kinds -------------------------------------------------------------------------------- */

static const char *const kind_names[ATTN_VIZ_NUM_KINDS] = {"self", "encoder.self", "decoder.self",
                                                           "decoder.cross"};

const char *attn_viz_kind_name(attn_viz_kind k) {
    return (unsigned)k < ATTN_VIZ_NUM_KINDS ? kind_names[k] : "?";
}

attn_status attn_viz_kind_parse(const char *s, attn_viz_kind *out) {
    static const struct {
        const char *name;
        attn_viz_kind k;
    } alias[] = {{"self", ATTN_VIZ_SELF},        {"encoder.self", ATTN_VIZ_ENC_SELF},
                 {"encoder", ATTN_VIZ_ENC_SELF}, {"decoder.self", ATTN_VIZ_DEC_SELF},
                 {"decoder", ATTN_VIZ_DEC_SELF}, {"decoder.cross", ATTN_VIZ_CROSS},
                 {"cross", ATTN_VIZ_CROSS}};
    for (size_t i = 0; s && i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(s, alias[i].name)) {
            *out = alias[i].k;
            return ATTN_STATUS_OK;
        }
    return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                     "attention kind '%s' is not one of self, encoder.self (encoder), "
                     "decoder.self (decoder), decoder.cross (cross)",
                     s ? s : "(null)");
}

attn_viz_side attn_viz_query_side(attn_viz_kind k) {
    return k == ATTN_VIZ_DEC_SELF || k == ATTN_VIZ_CROSS ? ATTN_VIZ_SIDE_TARGET
                                                         : ATTN_VIZ_SIDE_TOKENS;
}

attn_viz_side attn_viz_key_side(attn_viz_kind k) {
    return k == ATTN_VIZ_DEC_SELF ? ATTN_VIZ_SIDE_TARGET : ATTN_VIZ_SIDE_TOKENS;
}

static const char *side_name(attn_viz_side s) {
    return s == ATTN_VIZ_SIDE_TOKENS ? "tokens" : "target";
}

/* ---- UTF-8 helpers ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

size_t viz_utf8_valid_prefix(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (!k) break;
        i += k;
    }
    return i;
}

int viz_utf8_next(const char *s, int32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    if (!u[0]) return 0;
    size_t k = utf8_seq(u, u[1] == 0 ? 1 : u[2] == 0 ? 2 : u[3] == 0 ? 3 : 4);
    if (!k) {
        *cp = 0xFFFD;
        return 1;
    }
    uint32_t c = k == 1 ? u[0] : k == 2 ? u[0] & 0x1Fu : k == 3 ? u[0] & 0x0Fu : u[0] & 0x07u;
    for (size_t i = 1; i < k; i++) c = c << 6 | (u[i] & 0x3Fu);
    *cp = (int32_t)c;
    return (int)k;
}

void viz_sanitize(const char *s, size_t n, char *buf, size_t cap) {
    size_t o = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        char tmp[4];
        size_t k = utf8_seq(u + i, n - i), len;
        if (k == 1 && (u[i] < 0x20 || u[i] == 0x7F)) {
            unsigned cp = u[i] == 0x7F ? 0x2421u : 0x2400u + u[i]; /* control pictures */
            tmp[0] = (char)(0xE0 | cp >> 12), tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
            tmp[2] = (char)(0x80 | (cp & 0x3F)), len = 3;
            i++;
        } else if (k == 0) {
            memcpy(tmp, "\xEF\xBF\xBD", 3), len = 3;
            i++;
        } else {
            memcpy(tmp, u + i, k), len = k;
            i += k;
        }
        if (o + len + 1 > cap) break;
        memcpy(buf + o, tmp, len);
        o += len;
    }
    buf[o] = '\0';
}

/* ---- token labels ------------------------------------------------------------------------- */

void attn_viz_token_label(const attn_tok *tok, int32_t id, char *buf, size_t cap) {
    if (!buf || cap == 0) return;
    const char *raw = tok ? attn_tok_id_to_token(tok, id) : NULL;
    if (!raw) {
        snprintf(buf, cap, "#%ld", (long)id);
        return;
    }
    char dec[256];
    size_t len = 0;
    bool ok = attn_tok_decode(tok, &id, 1, ATTN_TOK_DECODE_KEEP_SPECIAL, dec, sizeof dec, &len) ==
              ATTN_STATUS_OK;
    attn_clear_error();
    const char *text = raw;
    size_t n = strlen(raw);
    if (ok) {
        /* a lone byte of a multi-byte character decodes to U+FFFD: keep the piece ("<0xE7>") */
        bool bad = strstr(dec, "\xEF\xBF\xBD") && !strstr(raw, "\xEF\xBF\xBD");
        size_t b = 0;
        while (b < len && dec[b] == ' ') b++;
        if (!bad && b == len) {
            snprintf(buf, cap, "%s", cap >= 4 ? "\xE2\x90\xA3" : "_"); /* ␣ */
            return;
        }
        if (!bad) text = dec + b, n = len - b;
    }
    viz_sanitize(text, n, buf, cap);
}

void attn_viz_mt_token_label(const attn_mt_tok *tok, int32_t id, bool target, char *buf,
                             size_t cap) {
    if (!buf || cap == 0) return;
    const char *raw = tok ? attn_mt_tok_id_to_token(tok, id, target) : NULL;
    if (!raw) {
        snprintf(buf, cap, "#%ld", (long)id);
        return;
    }
    /* SentencePiece's word marker "▁" (U+2581) reads as a space; leading spaces dropped */
    char text[ATTN_VIZ_MAX_TOKEN_BYTES];
    size_t n = 0;
    for (const char *p = raw; *p && n + 1 < sizeof text;) {
        if (!strncmp(p, "\xE2\x96\x81", 3)) {
            if (n) text[n++] = ' ';
            p += 3;
        } else {
            text[n++] = *p++;
        }
    }
    if (n == 0 && *raw) {
        snprintf(buf, cap, "%s", cap >= 4 ? "\xE2\x90\xA3" : "_"); /* ␣ */
        return;
    }
    viz_sanitize(text, n, buf, cap);
}

/* ---- container ---------------------------------------------------------------------------- */

attn_status attn_viz_init(attn_viz **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_init: NULL output");
    *out = calloc(1, sizeof **out);
    return *out ? ATTN_STATUS_OK
                : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
}

static void free_strings(char **s, int n) {
    if (!s) return;
    for (int i = 0; i < n; i++) free(s[i]);
    free(s);
}

void attn_viz_free(attn_viz *v) {
    if (!v) return;
    free(v->title);
    free_strings(v->tokens, v->n_tokens);
    free_strings(v->target, v->n_target);
    free_strings(v->target_out, v->n_target);
    for (int i = 0; i < v->n_maps; i++) attn_free(v->maps[i].p);
    free(v->maps);
    free(v);
}

attn_status attn_viz_set_title(attn_viz *v, const char *title) {
    if (!v || !title) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_set_title: NULL");
    size_t n = strlen(title);
    if (viz_utf8_valid_prefix(title, n) != n)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention capture: title is not valid UTF-8 (byte %zu)",
                         viz_utf8_valid_prefix(title, n));
    char *t = strdup(title);
    if (!t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
    free(v->title);
    v->title = t;
    return ATTN_STATUS_OK;
}

static attn_status copy_strings(const char *what, int n, const char *const *in, char ***out) {
    *out = NULL;
    if (n < 0 || n > ATTN_VIZ_MAX_TOKENS)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention capture: %s: %d tokens (expected 0 to %d)", what, n,
                         ATTN_VIZ_MAX_TOKENS);
    if (n > 0 && !in)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention capture: %s: NULL tokens", what);
    char **s = calloc((size_t)(n ? n : 1), sizeof *s);
    if (!s) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
    for (int i = 0; i < n; i++) {
        if (!in[i]) {
            free_strings(s, n);
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention capture: %s[%d] is NULL",
                             what, i);
        }
        size_t len = strlen(in[i]);
        if (len > ATTN_VIZ_MAX_TOKEN_BYTES) {
            free_strings(s, n);
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention capture: %s[%d] is longer than %d bytes", what, i,
                             ATTN_VIZ_MAX_TOKEN_BYTES);
        }
        if (viz_utf8_valid_prefix(in[i], len) != len) {
            free_strings(s, n);
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention capture: %s[%d] is not valid UTF-8 (byte %zu)", what, i,
                             viz_utf8_valid_prefix(in[i], len));
        }
        if (!(s[i] = strdup(in[i]))) {
            free_strings(s, n);
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
        }
    }
    *out = s;
    return ATTN_STATUS_OK;
}

static bool side_used(const attn_viz *v, attn_viz_side side) {
    for (int i = 0; i < v->n_maps; i++)
        if (attn_viz_query_side(v->maps[i].kind) == side ||
            attn_viz_key_side(v->maps[i].kind) == side)
            return true;
    return false;
}

attn_status attn_viz_set_tokens(attn_viz *v, attn_viz_side side, int n, const char *const *tokens) {
    if (!v || (side != ATTN_VIZ_SIDE_TOKENS && side != ATTN_VIZ_SIDE_TARGET))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_set_tokens: bad arguments");
    if (side_used(v, side) && viz_side_len(v, side) != n)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention capture: %s: %d tokens, but the maps already hold %d",
                         side_name(side), n, viz_side_len(v, side));
    char **s;
    attn_status st = copy_strings(side_name(side), n, tokens, &s);
    if (st) return st;
    if (side == ATTN_VIZ_SIDE_TOKENS) {
        free_strings(v->tokens, v->n_tokens);
        v->tokens = s, v->n_tokens = n;
    } else {
        free_strings(v->target, v->n_target);
        if (v->target_out && v->n_target != n) {
            free_strings(v->target_out, v->n_target);
            v->target_out = NULL;
        }
        v->target = s, v->n_target = n;
    }
    return ATTN_STATUS_OK;
}

attn_status attn_viz_set_target_out(attn_viz *v, int n, const char *const *tokens) {
    if (!v) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_set_target_out: NULL");
    if (n != v->n_target)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention capture: target_out has %d tokens, target has %d", n,
                         v->n_target);
    char **s;
    attn_status st = copy_strings("target_out", n, tokens, &s);
    if (st) return st;
    free_strings(v->target_out, v->n_target);
    v->target_out = s;
    return ATTN_STATUS_OK;
}

/* Labels of n ids (each ATTN_VIZ_MAX_TOKEN_BYTES / 4 bytes at most) as a string array: mt's
 * pieces (of the target side when target) when mt, else tok's. */
attn_status viz_labels(const attn_tok *tok, const attn_mt_tok *mt, bool target, const int32_t *ids,
                       int n, char ***out) {
    *out = NULL;
    if (n < 0 || n > ATTN_VIZ_MAX_TOKENS || (n > 0 && !ids))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention capture: %d ids", n);
    char **s = calloc((size_t)(n ? n : 1), sizeof *s);
    if (!s) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
    for (int i = 0; i < n; i++) {
        char buf[ATTN_VIZ_MAX_TOKEN_BYTES / 4];
        if (mt) attn_viz_mt_token_label(mt, ids[i], target, buf, sizeof buf);
        else attn_viz_token_label(tok, ids[i], buf, sizeof buf);
        if (!(s[i] = strdup(buf))) {
            free_strings(s, n);
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
        }
    }
    *out = s;
    return ATTN_STATUS_OK;
}

void viz_labels_free(char **labels, int n) { free_strings(labels, n); }

attn_status attn_viz_set_token_ids(attn_viz *v, attn_viz_side side, const attn_tok *tok,
                                   const int32_t *ids, int n) {
    char **s;
    attn_status st = viz_labels(tok, NULL, false, ids, n, &s);
    if (st) return st;
    st = attn_viz_set_tokens(v, side, n, (const char *const *)s);
    free_strings(s, n);
    return st;
}

attn_status attn_viz_add_map(attn_viz *v, attn_viz_kind kind, int layer, int H, int Tq, int Tk,
                             const float *p, float **data) {
    if (data) *data = NULL;
    if (!v || (unsigned)kind >= ATTN_VIZ_NUM_KINDS)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_add_map: bad arguments");
    const char *kn = attn_viz_kind_name(kind);
    if (layer < 0 || layer >= ATTN_VIZ_MAX_LAYERS || H <= 0 || H > ATTN_VIZ_MAX_HEADS)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention capture: %s.%d: layer must be in [0, %d) and heads in "
                         "[1, %d] (got layer %d, %d heads)",
                         kn, layer, ATTN_VIZ_MAX_LAYERS, ATTN_VIZ_MAX_HEADS, layer, H);
    attn_viz_side qs = attn_viz_query_side(kind), ks = attn_viz_key_side(kind);
    if (Tq != viz_side_len(v, qs) || Tk != viz_side_len(v, ks) || Tq <= 0 || Tk <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention capture: %s.%d is (%d, %d) but its queries (%s) have %d "
                         "tokens and its keys (%s) %d",
                         kn, layer, Tq, Tk, side_name(qs), viz_side_len(v, qs), side_name(ks),
                         viz_side_len(v, ks));
    if (attn_viz_find(v, kind, layer))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention capture: %s.%d added twice", kn,
                         layer);
    size_t n = (size_t)H * (size_t)Tq * (size_t)Tk, bytes;
    if (!attn_size_mul(n, sizeof(float), &bytes) || bytes > ATTN_MAX_BUFFER_BYTES)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "attention capture: %s.%d (%d, %d, %d) is too large", kn, layer, H, Tq,
                         Tk);
    if (v->n_maps == v->cap_maps) {
        int cap = v->cap_maps ? 2 * v->cap_maps : 8;
        attn_viz_map *m = realloc(v->maps, (size_t)cap * sizeof *m);
        if (!m) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
        v->maps = m, v->cap_maps = cap;
    }
    float *buf = p ? attn_alloc(bytes) : attn_calloc(bytes);
    if (!buf)
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY,
                         "attention capture: out of memory for %s.%d (%zu bytes)", kn, layer,
                         bytes);
    if (p) memcpy(buf, p, bytes);
    attn_viz_map *m = &v->maps[v->n_maps++];
    m->kind = kind, m->layer = layer, m->H = H, m->Tq = Tq, m->Tk = Tk, m->p = buf;
    if (data) *data = buf;
    return ATTN_STATUS_OK;
}

const attn_viz_map *attn_viz_find(const attn_viz *v, attn_viz_kind kind, int layer) {
    for (int i = 0; v && i < v->n_maps; i++)
        if (v->maps[i].kind == kind && v->maps[i].layer == layer) return &v->maps[i];
    return NULL;
}

int attn_viz_num_layers(const attn_viz *v, attn_viz_kind kind) {
    int n = 0;
    for (int i = 0; v && i < v->n_maps; i++)
        if (v->maps[i].kind == kind && v->maps[i].layer + 1 > n) n = v->maps[i].layer + 1;
    return n;
}

double attn_viz_row_sum_error(const attn_viz *v, size_t *zero_rows) {
    double worst = 0;
    size_t zeros = 0;
    for (int m = 0; v && m < v->n_maps; m++) {
        const attn_viz_map *M = &v->maps[m];
        for (size_t r = 0; r < (size_t)M->H * M->Tq; r++) {
            const float *row = M->p + r * M->Tk;
            double s = 0;
            bool any = false;
            for (int j = 0; j < M->Tk; j++) s += row[j], any |= row[j] != 0;
            if (!any) {
                zeros++;
                continue;
            }
            double e = fabs(s - 1.0);
            if (!(e <= worst)) worst = e; /* NaN propagates */
        }
    }
    if (zero_rows) *zero_rows = zeros;
    return worst;
}

/* ---- save / load -------------------------------------------------------------------------- */

attn_status attn_viz_json_path(const char *path, char *buf, size_t cap) {
    static const char ext[] = ".safetensors";
    size_t n = strlen(path), e = sizeof ext - 1;
    size_t stem = n >= e && !strcmp(path + n - e, ext) ? n - e : n;
    if (stem + 6 > cap) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: path too long", path);
    memcpy(buf, path, stem);
    memcpy(buf + stem, ".json", 6);
    return ATTN_STATUS_OK;
}

static json_t *json_strings(char **s, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_string(s[i]));
    return a;
}

static char *dump_strings(char **s, int n) {
    json_t *a = json_strings(s, n);
    char *t = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return t;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static attn_status write_json(const attn_viz *v, const char *st_path, const char *path) {
    json_t *root = json_object();
    if (!root) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    json_object_set_new(root, "format", json_string("attn-attention"));
    json_object_set_new(root, "version", json_integer(1));
    if (v->title) json_object_set_new(root, "title", json_string(v->title));
    json_object_set_new(root, "tokens", json_strings(v->tokens, v->n_tokens));
    if (v->n_target) json_object_set_new(root, "target", json_strings(v->target, v->n_target));
    if (v->target_out)
        json_object_set_new(root, "target_out", json_strings(v->target_out, v->n_target));
    json_object_set_new(root, "tensors", json_string(base_name(st_path)));
    json_t *maps = json_array();
    for (int i = 0; i < v->n_maps; i++) {
        const attn_viz_map *m = &v->maps[i];
        char name[64];
        snprintf(name, sizeof name, "%s.%d", attn_viz_kind_name(m->kind), m->layer);
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(name));
        json_object_set_new(o, "kind", json_string(attn_viz_kind_name(m->kind)));
        json_object_set_new(o, "layer", json_integer(m->layer));
        json_object_set_new(o, "queries", json_string(side_name(attn_viz_query_side(m->kind))));
        json_object_set_new(o, "keys", json_string(side_name(attn_viz_key_side(m->kind))));
        json_object_set_new(o, "shape", json_pack("[iii]", m->H, m->Tq, m->Tk));
        json_array_append_new(maps, o);
    }
    json_object_set_new(root, "maps", maps);
    char *text = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    if (!text) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    attn_atomic a;
    attn_status s = attn_atomic_begin(path, &a);
    if (!s) s = attn_atomic_write(&a, text, strlen(text));
    if (!s) s = attn_atomic_write(&a, "\n", 1);
    if (!s)
        s = attn_atomic_commit(&a);
    else
        attn_atomic_abort(&a);
    free(text);
    return s;
}

attn_status attn_viz_save(const attn_viz *v, const char *path) {
    if (!v || !path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_save: NULL");
    char jpath[4096];
    attn_status s = attn_viz_json_path(path, jpath, sizeof jpath);
    if (s) return s;
    if (v->n_maps == 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: the capture holds no attention maps",
                         path);
    attn_st_entry *e = calloc((size_t)v->n_maps, sizeof *e);
    char(*names)[64] = calloc((size_t)v->n_maps, sizeof *names);
    char *tok = dump_strings(v->tokens, v->n_tokens);
    char *tgt = v->n_target ? dump_strings(v->target, v->n_target) : NULL;
    char *tgo = v->target_out ? dump_strings(v->target_out, v->n_target) : NULL;
    if (!e || !names || !tok || (v->n_target && !tgt) || (v->target_out && !tgo)) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < v->n_maps; i++) {
        const attn_viz_map *m = &v->maps[i];
        snprintf(names[i], sizeof names[i], "%s.%d", attn_viz_kind_name(m->kind), m->layer);
        e[i].name = names[i];
        e[i].dtype = ATTN_DTYPE_F32;
        e[i].ndim = 3;
        e[i].shape[0] = m->H, e[i].shape[1] = m->Tq, e[i].shape[2] = m->Tk;
        e[i].data = m->p;
    }
    const char *meta[12];
    int k = 0;
    meta[k++] = "format", meta[k++] = "attn-attention";
    meta[k++] = "tokens", meta[k++] = tok;
    if (tgt) meta[k++] = "target", meta[k++] = tgt;
    if (tgo) meta[k++] = "target_out", meta[k++] = tgo;
    if (v->title) meta[k++] = "title", meta[k++] = v->title;
    meta[k] = NULL;
    s = attn_st_save(path, e, v->n_maps, meta);
    if (!s) s = write_json(v, path, jpath);
done:
    free(e), free(names), free(tok), free(tgt), free(tgo);
    return s;
}

/* A metadata array of strings into a side; absent: n = 0. */
static attn_status meta_strings(attn_st_file *f, const char *path, const char *key, int *n,
                                char ***out) {
    *n = 0, *out = NULL;
    const char *text = attn_st_metadata(f, key);
    if (!text) return ATTN_STATUS_OK;
    json_error_t err;
    json_t *a = json_loads(text, 0, &err);
    if (!json_is_array(a) || json_array_size(a) > ATTN_VIZ_MAX_TOKENS) {
        json_decref(a);
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: metadata '%s' must be a JSON array of at most %d strings", path, key,
                         ATTN_VIZ_MAX_TOKENS);
    }
    int cnt = (int)json_array_size(a);
    const char **s = calloc((size_t)(cnt ? cnt : 1), sizeof *s);
    if (!s) {
        json_decref(a);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    attn_status st = ATTN_STATUS_OK;
    for (int i = 0; i < cnt && !st; i++)
        if (!(s[i] = json_string_value(json_array_get(a, (size_t)i))))
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: metadata '%s'[%d] is not a string", path, key,
                           i);
    if (!st) {
        st = copy_strings(key, cnt, s, out);
        if (st)
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: metadata '%s': %s", path, key,
                           attn_last_error());
    }
    if (!st) *n = cnt;
    free(s);
    json_decref(a);
    return st;
}

/* "<kind>.<layer>" */
static bool parse_name(const char *name, attn_viz_kind *kind, int *layer) {
    const char *dot = strrchr(name, '.');
    if (!dot || !dot[1] || dot - name >= 32) return false;
    char k[32];
    memcpy(k, name, (size_t)(dot - name));
    k[dot - name] = '\0';
    int i;
    for (i = 0; i < ATTN_VIZ_NUM_KINDS && strcmp(k, kind_names[i]); i++) {
    }
    if (i == ATTN_VIZ_NUM_KINDS) return false;
    long l = 0;
    for (const char *p = dot + 1; *p; p++) {
        if (*p < '0' || *p > '9' || l >= ATTN_VIZ_MAX_LAYERS) return false;
        l = l * 10 + (*p - '0');
    }
    if (l >= ATTN_VIZ_MAX_LAYERS || (dot[1] == '0' && dot[2])) return false;
    *kind = (attn_viz_kind)i, *layer = (int)l;
    return true;
}

attn_status attn_viz_load(const char *path, attn_viz **out) {
    if (!path || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_load: NULL");
    *out = NULL;
    attn_st_file *f;
    attn_status s = attn_st_open(path, &f);
    if (s) return s;
    attn_viz *v = NULL;
    const char *fmt = attn_st_metadata(f, "format");
    if (!fmt || strcmp(fmt, "attn-attention")) {
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: metadata 'format' is %s%s%s, expected \"attn-attention\" (a file "
                      "written by 'attn attention --out')",
                      path, fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "");
        goto fail;
    }
    if ((s = attn_viz_init(&v))) goto fail;
    if ((s = meta_strings(f, path, "tokens", &v->n_tokens, &v->tokens))) goto fail;
    if ((s = meta_strings(f, path, "target", &v->n_target, &v->target))) goto fail;
    int n_out;
    if ((s = meta_strings(f, path, "target_out", &n_out, &v->target_out))) goto fail;
    if (v->target_out && n_out != v->n_target) {
        free_strings(v->target_out, n_out);
        v->target_out = NULL;
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: metadata 'target_out' has %d tokens, 'target' %d",
                      path, n_out, v->n_target);
        goto fail;
    }
    const char *title = attn_st_metadata(f, "title");
    if (title && (s = attn_viz_set_title(v, title))) goto fail;
    for (int i = 0; i < attn_st_count(f); i++) {
        const attn_st_tensor *t = attn_st_tensor_at(f, i);
        attn_viz_kind kind;
        int layer;
        if (!parse_name(t->name, &kind, &layer)) {
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: tensor '%s' is not named <kind>.<layer> with kind self, "
                          "encoder.self, decoder.self or decoder.cross",
                          path, t->name);
            goto fail;
        }
        int Tq = viz_side_len(v, attn_viz_query_side(kind));
        int Tk = viz_side_len(v, attn_viz_key_side(kind));
        if (t->ndim != 3 || t->shape[0] <= 0 || t->shape[0] > ATTN_VIZ_MAX_HEADS ||
            t->shape[1] != Tq || t->shape[2] != Tk) {
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: tensor '%s' must have shape (heads <= %d, %d, %d) to match the "
                          "tokens in the metadata",
                          path, t->name, ATTN_VIZ_MAX_HEADS, Tq, Tk);
            goto fail;
        }
        float *data;
        if ((s = attn_viz_add_map(v, kind, layer, (int)t->shape[0], Tq, Tk, NULL, &data)))
            goto fail;
        if ((s = attn_st_read_f32(f, t->name, 3, t->shape, data))) goto fail;
    }
    if (v->n_maps == 0) {
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: no attention maps in the file", path);
        goto fail;
    }
    attn_st_close(f);
    *out = v;
    return ATTN_STATUS_OK;
fail:
    attn_viz_free(v);
    attn_st_close(f);
    return s;
}

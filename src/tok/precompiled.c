/* precompiled.c — the Precompiled normalizer of tokenizer.json: {"type": "Precompiled",
 * "precompiled_charsmap": base64}, SentencePiece's compiled normalization rules
 * (NormalizerSpec.precompiled_charsmap) as tokenizers 0.21 applies them.
 *
 * The charsmap (SentencePiece's normalizer.cc) is: a little-endian u32 T, T bytes of a
 * double-array trie (darts-clone's units, little-endian u32 each), then the normalized strings,
 * each ended by a NUL byte. A trie unit u has: has_leaf = (u >> 8) & 1, value = u & 0x7fffffff,
 * label = u & 0x800000ff, offset = (u >> 10) << ((u & 0x200) >> 6). A common-prefix search of
 * key walks pos = offset(unit[0]); for each byte c (a NUL byte ends the key): pos ^= c, the unit
 * there must have label c, pos ^= its offset, and when it has a leaf, unit[pos]'s value is a
 * match: the offset of the replacement string.
 *
 * tokenizers applies it per extended grapheme cluster (utf8proc's segmentation): a cluster of
 * fewer than 6 bytes whose bytes have a prefix in the trie becomes the replacement of the
 * shortest such prefix (the whole cluster, as tokenizers does); otherwise each character is
 * looked up alone the same way and kept when it has none. Where tokenizers would panic on a
 * corrupt trie (an index outside the units, a replacement offset outside the strings or inside
 * a UTF-8 sequence) the lookup finds no match here. */
#include "tok-impl.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef struct {
    uint32_t *unit;
    size_t n_unit;
    char *norm; /* the strings; valid UTF-8 */
    size_t norm_len;
} tok_pc;

static int b64v(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 with padding (what serde's base64 writes); false when malformed. */
static bool b64_decode(const char *s, size_t n, unsigned char **out, size_t *len) {
    if (n % 4) return false;
    unsigned char *o = calloc(n / 4 * 3 + 4, 1);
    if (!o) return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            if (s[i + j] == '=' && i + 4 == n && j >= 2) {
                v[j] = 0, pad++;
            } else if (pad || (v[j] = b64v((unsigned char)s[i + j])) < 0) {
                free(o);
                return false;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        o[k++] = (unsigned char)(w >> 16);
        if (pad < 2) o[k++] = (unsigned char)(w >> 8);
        if (pad < 1) o[k++] = (unsigned char)w;
    }
    *out = o, *len = k;
    return true;
}

void tok_precompiled_free(void *p) {
    tok_pc *pc = p;
    if (!pc) return;
    free(pc->unit);
    free(pc->norm);
    free(pc);
}

attn_status tok_precompiled_parse(const char *b64, size_t n, const char *name, const char *path,
                                  void **out) {
    *out = NULL;
    unsigned char *raw = NULL;
    size_t len = 0;
    if (!b64_decode(b64, n, &raw, &len))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.precompiled_charsmap: not base64", name,
                         path);
    attn_status st = ATTN_STATUS_OK;
    tok_pc *pc = calloc(1, sizeof *pc);
    uint32_t T = 0;
    if (!pc) st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    if (!st && len < 4)
        st = attn_fail(ATTN_STATUS_FORMAT, "%s: %s.precompiled_charsmap: %zu bytes is too short",
                       name, path, len);
    if (!st) {
        T = (uint32_t)raw[0] | (uint32_t)raw[1] << 8 | (uint32_t)raw[2] << 16 |
            (uint32_t)raw[3] << 24;
        if (T > len - 4 || T % 4 || T == 0)
            st = attn_fail(ATTN_STATUS_FORMAT,
                           "%s: %s.precompiled_charsmap: trie size %lu does not fit its %zu bytes",
                           name, path, (unsigned long)T, len);
    }
    if (!st) {
        pc->n_unit = T / 4;
        pc->unit = malloc(T);
        pc->norm_len = len - 4 - T;
        pc->norm = malloc(pc->norm_len + 1);
        if (!pc->unit || !pc->norm) st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    if (!st) {
        for (size_t i = 0; i < pc->n_unit; i++) {
            const unsigned char *u = raw + 4 + 4 * i;
            pc->unit[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
                          (uint32_t)u[3] << 24;
        }
        memcpy(pc->norm, raw + 4 + T, pc->norm_len);
        pc->norm[pc->norm_len] = 0;
        if (tok_utf8_check(pc->norm, pc->norm_len) != pc->norm_len)
            st = attn_fail(ATTN_STATUS_FORMAT,
                           "%s: %s.precompiled_charsmap: the normalized strings are not UTF-8",
                           name, path);
    }
    free(raw);
    if (st) {
        tok_precompiled_free(pc);
        return st;
    }
    *out = pc;
    return ATTN_STATUS_OK;
}

/* The replacement of the shortest prefix of key[0..n) in the trie: *r, *rn; false when none. */
static bool transform(const tok_pc *pc, const char *key, size_t n, const char **r, size_t *rn) {
    size_t pos = 0;
    uint32_t u = pc->unit[0];
    pos ^= (size_t)(u >> 10) << ((u & 0x200u) >> 6);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)key[i];
        if (!c) break;
        pos ^= c;
        if (pos >= pc->n_unit) return false;
        u = pc->unit[pos];
        if ((u & 0x800000ffu) != c) return false;
        pos ^= (size_t)(u >> 10) << ((u & 0x200u) >> 6);
        if ((u >> 8) & 1) {
            if (pos >= pc->n_unit) return false;
            size_t v = pc->unit[pos] & 0x7fffffffu;
            if (v > pc->norm_len) return false;
            if (v < pc->norm_len && ((unsigned char)pc->norm[v] & 0xc0) == 0x80) return false;
            size_t e = v;
            while (e < pc->norm_len && pc->norm[e]) e++;
            *r = pc->norm + v, *rn = e - v;
            return true;
        }
    }
    return false;
}

bool tok_precompiled_apply(const void *p, const char *s, size_t n, tok_buf *out) {
    const tok_pc *pc = p;
    utf8proc_int32_t state = 0;
    size_t g = 0; /* start of the current grapheme cluster */
    uint32_t prev = 0;
    for (size_t i = 0; i <= n;) {
        uint32_t cp = 0;
        size_t l = 0;
        bool brk = i == n;
        if (!brk) {
            l = tok_utf8_decode((const unsigned char *)s + i, n - i, &cp);
            if (!l) l = 1, cp = 0xfffd; /* text is valid UTF-8; defensive */
            brk = i > g && utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev,
                                                            (utf8proc_int32_t)cp, &state);
        }
        if (brk && i > g) {
            const char *r;
            size_t rn;
            if (i - g < 6 && transform(pc, s + g, i - g, &r, &rn)) {
                tok_buf_put(out, r, rn);
            } else {
                for (size_t k = g; k < i;) {
                    uint32_t c2;
                    size_t l2 = tok_utf8_decode((const unsigned char *)s + k, i - k, &c2);
                    if (!l2) l2 = 1;
                    if (transform(pc, s + k, l2, &r, &rn))
                        tok_buf_put(out, r, rn);
                    else
                        tok_buf_put(out, s + k, l2);
                    k += l2;
                }
            }
            g = i;
        }
        if (i == n) break;
        prev = cp;
        i += l;
    }
    return !out->oom;
}

/* byte_level.c — GPT-2's byte-level BPE pieces: the byte-to-unicode alphabet, the ByteLevel
 * pre-tokenizer (GPT-2's pattern through PCRE2), the ByteLevel decoder, and loading GPT-2's
 * vocab.json + merges.txt.
 *
 * The pattern. tokenizers runs
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * through Oniguruma, whose \s is Unicode's White_Space property and whose tables are Unicode 16.
 * PCRE2's \s with PCRE2_UCP differs (it lacks U+0085, has U+180E) and Debian 12's PCRE2 has
 * Unicode 14 tables, so the classes are spelled out below (WS, NEW_L, NEW_N) to agree with
 * tokenizers on every code point (tested). The contractions
 * are case-sensitive, as in GPT-2 ("IT'S" splits as "IT" "'S"). Matches are taken left to right
 * from the end of the previous one (Split with behaviour Isolated: text between matches would be
 * a piece too, but every character matches one alternative). The subject is always valid UTF-8
 * (encode validates its input first), so PCRE2's own UTF check is skipped: PCRE2_NO_UTF_CHECK
 * keeps the scan linear.
 *
 * The alphabet. Bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF stand for themselves (as code
 * points); the 68 others become U+0100.. in byte order (space is U+0120 "Ġ", \n is U+010A "Ċ"). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tok-impl.h"

#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Letters and numbers that tokenizers' Oniguruma (Unicode 16) knows and PCRE2 10.42 (Debian 12,
 * Unicode 14) does not: those assigned in Unicode 15.0 to 16.0, listed explicitly so that the
 * classes agree whatever PCRE2's tables are (a newer PCRE2 already has them: no harm). Found by
 * tests/test_tokenizer_gpt2.c, which compares the class of every code point of planes 0-3 and 14
 * with tokenizers. */
const char tok_new_letters[] =
    "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}"
    "\\x{10D4A}-\\x{10D65}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}"
    "\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}"
    "\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}"
    "\\x{1342F}\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}\\x{16D40}-"
    "\\x{16D6C}\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}"
    "\\x{1E4D0}-\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}\\x{2EBF0}-\\x{2EE5D}"
    "\\x{31350}-\\x{323AF}";
const char tok_new_numbers[] =
    "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}"
    "\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}"
    "\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}";
/* Unicode's White_Space property (Oniguruma's \s): PCRE2's \s with UCP lacks U+0085 and has
 * U+180E, so the 25 characters are spelled out. */
static const char WS[] = "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
                         "\\x{205F}\\x{3000}";

#define BL_NCP 324 /* code points of the alphabet are below U+0144 */

static char bl_enc[256][2];  /* UTF-8 of each byte's character */
static uint8_t bl_len[256];  /* its length: 1 or 2 */
static int16_t bl_rev[BL_NCP]; /* code point -> byte, -1 outside the alphabet */

static void bl_init_tables(void) {
    int extra = 0;
    for (int cp = 0; cp < BL_NCP; cp++) bl_rev[cp] = -1;
    for (int b = 0; b < 256; b++) {
        bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        uint32_t cp = self ? (uint32_t)b : 256u + (uint32_t)extra++;
        char u[4];
        size_t k = tok_utf8_encode(cp, u);
        memcpy(bl_enc[b], u, k);
        bl_len[b] = (uint8_t)k;
        bl_rev[cp] = (int16_t)b;
    }
}

/* Tables are built once; the writes are identical whichever thread does them, but build them
 * under a once-guard anyway so that sanitizers and the memory model stay happy. */
#include <pthread.h>
static pthread_once_t bl_once = PTHREAD_ONCE_INIT;
static void bl_tables(void) { pthread_once(&bl_once, bl_init_tables); }

attn_status tok_byte_level_prepare(attn_tok *t, const char *name) {
    bl_tables();
    bool need = false;
    for (size_t i = 0; i < t->n_pre; i++)
        if (t->pre[i].kind == TOK_PRE_BYTE_LEVEL && t->pre[i].bl.use_regex) need = true;
    if (!need || t->byte_re) return ATTN_STATUS_OK;
    /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    tok_buf pat = {0};
    tok_buf_printf(&pat,
                   "'s|'t|'re|'ve|'m|'ll|'d| ?[\\p{L}%s]+| ?[\\p{N}%s]+| ?[^%s\\p{L}%s\\p{N}%s]+"
                   "|[%s]+(?![^%s])|[%s]+",
                   tok_new_letters, tok_new_numbers, WS, tok_new_letters, tok_new_numbers, WS,
                   WS, WS);
    if (pat.oom) {
        tok_buf_free(&pat);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat.p, pat.n, PCRE2_UTF | PCRE2_UCP, &err, &off,
                                   NULL);
    tok_buf_free(&pat);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: pre_tokenizer: ByteLevel: PCRE2 cannot compile GPT-2's pattern "
                         "(offset %zu): %s",
                         name, (size_t)off, (const char *)msg);
    }
    tok_regex_jit(re);
    t->byte_re = re;
    return ATTN_STATUS_OK;
}

void tok_byte_level_release(attn_tok *t) {
    if (t && t->byte_re) pcre2_code_free((pcre2_code *)t->byte_re);
    if (t) t->byte_re = NULL;
}

void tok_byte_level_md_free(void *md) {
    if (md) pcre2_match_data_free((pcre2_match_data *)md);
}

/* Map s[0..n) to the alphabet and push it as one piece. */
static bool push_mapped(tok_strlist *out, tok_buf *map, const char *s, size_t n, uint8_t flag) {
    map->n = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        tok_buf_put(map, bl_enc[b], bl_len[b]);
    }
    if (map->oom) return false;
    return tok_strlist_push(out, map->p ? map->p : "", map->n, flag);
}

bool tok_byte_level_split(const attn_tok *t, const tok_byte_level *bl, void **md, const char *s,
                          size_t n, uint8_t flag, tok_strlist *out) {
    bl_tables();
    tok_buf pre = {0}, map = {0};
    bool ok = true;
    if (bl->add_prefix_space && (n == 0 || s[0] != ' ')) {
        tok_buf_putc(&pre, ' ');
        tok_buf_put(&pre, s, n);
        if (pre.oom) {
            tok_buf_free(&pre);
            return false;
        }
        s = pre.p;
        n = pre.n;
    }
    if (!bl->use_regex || !t->byte_re) {
        ok = push_mapped(out, &map, s, n, flag);
        goto done;
    }
    const pcre2_code *re = t->byte_re;
    if (!*md) {
        *md = pcre2_match_data_create_from_pattern(re, NULL);
        if (!*md) {
            ok = false;
            goto done;
        }
    }
    pcre2_match_data *m = *md;
    size_t pos = 0;
    while (pos < n && ok) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, m, NULL);
        if (rc < 0) break; /* no match (or a matching limit): the rest is one piece */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m);
        size_t a = ov[0], b = ov[1];
        if (b <= a) break; /* the pattern has no empty match; stay safe */
        if (a > pos) ok = push_mapped(out, &map, s + pos, a - pos, pos == 0 ? flag : 0);
        if (ok) ok = push_mapped(out, &map, s + a, b - a, a == 0 ? flag : 0);
        pos = b;
    }
    if (ok && pos < n) ok = push_mapped(out, &map, s + pos, n - pos, pos == 0 ? flag : 0);
done:
    tok_buf_free(&pre);
    tok_buf_free(&map);
    return ok;
}

/* ---- decoding ---- */

void tok_utf8_lossy(tok_buf *out, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = tok_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (k) {
            tok_buf_put(out, s + i, k);
            i += k;
            continue;
        }
        /* the maximal prefix of a valid sequence, replaced by one U+FFFD */
        unsigned char c = (unsigned char)s[i];
        size_t width = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                       : c >= 0xF0 && c <= 0xF4 ? 4 : 1;
        size_t len = 1;
        if (width > 1 && i + 1 < n) {
            unsigned char c1 = (unsigned char)s[i + 1];
            unsigned lo = 0x80, hi = 0xBF;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
            if (c1 >= lo && c1 <= hi) {
                len = 2;
                if (width > 2 && i + 2 < n && ((unsigned char)s[i + 2] & 0xC0) == 0x80) {
                    len = 3; /* width 4 with a 4th continuation byte would have been valid */
                }
            }
        }
        tok_buf_put(out, "\xEF\xBF\xBD", 3);
        i += len;
    }
}

bool tok_byte_level_decode(const tok_strlist *in, tok_strlist *out) {
    bl_tables();
    tok_buf bytes = {0}, text = {0};
    for (size_t i = 0; i < in->n; i++) {
        const char *s = tok_strlist_at(in, i);
        size_t n = in->len[i], mark = bytes.n, j = 0;
        bool all = true;
        while (j < n) {
            uint32_t cp;
            size_t k = tok_utf8_decode((const unsigned char *)s + j, n - j, &cp);
            if (!k || cp >= BL_NCP || bl_rev[cp] < 0) {
                all = false;
                break;
            }
            tok_buf_putc(&bytes, (char)bl_rev[cp]);
            j += k;
        }
        if (!all) { /* a token outside the alphabet (an added token): its own bytes */
            bytes.n = mark;
            tok_buf_put(&bytes, s, n);
        }
    }
    tok_utf8_lossy(&text, bytes.p ? bytes.p : "", bytes.n);
    bool ok = !bytes.oom && !text.oom && tok_strlist_push(out, text.p ? text.p : "", text.n, 0);
    tok_buf_free(&bytes);
    tok_buf_free(&text);
    return ok;
}

/* ---- vocab.json + merges.txt ---- */

static attn_status read_file(const char *path, char **buf, size_t *n) {
    attn_reader r;
    attn_status st = attn_reader_open_file(path, &r);
    if (st) return st;
    if (r.size > TOK_MAX_FILE_BYTES) {
        attn_reader_close(&r);
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: %llu bytes is too large", path,
                         (unsigned long long)r.size);
    }
    *buf = malloc((size_t)r.size + 1);
    if (!*buf) {
        attn_reader_close(&r);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    size_t size = (size_t)r.size;
    st = size ? r.read(r.ctx, 0, *buf, size) : ATTN_STATUS_OK;
    attn_reader_close(&r);
    if (st) {
        free(*buf);
        *buf = NULL;
        return st;
    }
    (*buf)[size] = '\0';
    *n = size;
    return ATTN_STATUS_OK;
}

static const char EOT[] = "<|endoftext|>";

attn_status attn_tok_load_vocab_merges(const char *vocab_path, const char *merges_path,
                                       attn_tok **out) {
    if (!vocab_path || !merges_path || !out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_tok_load_vocab_merges: NULL path or out");
    *out = NULL;
    attn_status st = ATTN_STATUS_OK;
    char *vbuf = NULL, *mbuf = NULL;
    size_t vn = 0, mn = 0;
    json_t *root = NULL;
    tok_vocab V = {0};
    tok_ivec merges = {0};
    attn_tok *t = NULL;
    if ((st = read_file(vocab_path, &vbuf, &vn)) || (st = read_file(merges_path, &mbuf, &mn)))
        goto done;
    json_error_t err;
    root = json_loadb(vbuf, vn, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!root) {
        st = tok_json_error(&err, vocab_path);
        goto done;
    }
    if (!json_is_object(root)) {
        st = attn_fail(ATTN_STATUS_FORMAT, "%s: expected an object {token: id}", vocab_path);
        goto done;
    }
    int32_t max_id = -1;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 ||
            json_integer_value(val) > TOK_MAX_ID) {
            char q[64];
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: %s: expected an integer id in [0, %ld]",
                           vocab_path, tok_quote(q, sizeof q, key, strlen(key)), (long)TOK_MAX_ID);
            goto done;
        }
        if ((int32_t)json_integer_value(val) > max_id) max_id = (int32_t)json_integer_value(val);
    }
    if ((st = tok_vocab_init(&V, max_id + 1))) goto done;
    for (void *it = json_object_iter(root); it; it = json_object_iter_next(root, it)) {
        int32_t id = (int32_t)json_integer_value(json_object_iter_value(it));
        int r = tok_vocab_set(&V, id, json_object_iter_key(it), json_object_iter_key_len(it));
        if (r == 1 || r == 2) {
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: id %ld is given to two tokens", vocab_path,
                           (long)id);
            goto done;
        }
        if (r) {
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", vocab_path);
            goto done;
        }
    }
    /* merges.txt: "A B" per line, rank = order; "#version..." lines and empty lines skipped */
    size_t line = 0;
    for (size_t i = 0; i < mn;) {
        size_t e = i;
        while (e < mn && mbuf[e] != '\n') e++;
        line++;
        size_t len = e - i;
        if (len && mbuf[i + len - 1] == '\r') len--;
        const char *s = mbuf + i;
        i = e + 1;
        if (len == 0 || (len >= 8 && !memcmp(s, "#version", 8))) continue;
        const char *sp = memchr(s, ' ', len);
        if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)) || sp == s ||
            sp + 1 == s + len) {
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: line %zu: expected \"A B\" (one space)",
                           merges_path, line);
            goto done;
        }
        int32_t a = tok_vocab_find(&V, s, (size_t)(sp - s));
        int32_t b = tok_vocab_find(&V, sp + 1, len - (size_t)(sp + 1 - s));
        if (a < 0 || b < 0) {
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: line %zu: token '%.*s' is not in %s",
                           merges_path, line, (int)(a < 0 ? sp - s : (s + len) - (sp + 1)),
                           a < 0 ? s : sp + 1, vocab_path);
            goto done;
        }
        tok_buf ab = {0};
        tok_buf_put(&ab, V.str[a], V.len[a]);
        tok_buf_put(&ab, V.str[b], V.len[b]);
        bool have = !ab.oom && tok_vocab_find(&V, ab.p, ab.n) >= 0;
        if (!have && !ab.oom)
            st = attn_fail(ATTN_STATUS_FORMAT, "%s: line %zu: merged token '%.*s' is not in %s",
                           merges_path, line, (int)ab.n, ab.p, vocab_path);
        else if (ab.oom)
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", merges_path);
        tok_buf_free(&ab);
        if (st) goto done;
        if (!tok_ivec_push(&merges, a) || !tok_ivec_push(&merges, b)) {
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", merges_path);
            goto done;
        }
    }
    t = calloc(1, sizeof *t);
    if (!t) {
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", vocab_path);
        goto done;
    }
    int32_t eot = tok_vocab_find(&V, EOT, sizeof EOT - 1);
    tok_bpe_options opt = {0};
    st = tok_bpe_from_parts(&V, merges.v, merges.n / 2, &opt, &t->model);
    if (st) {
        /* tok_bpe_from_parts names "trainer" in its messages: say which files */
        char prev[512];
        snprintf(prev, sizeof prev, "%s", attn_last_error());
        st = attn_fail(st, "%s + %s: %s", vocab_path, merges_path, prev);
        goto done;
    }
    t->pre = calloc(1, sizeof *t->pre);
    t->dec = calloc(1, sizeof *t->dec);
    t->added = calloc(1, sizeof *t->added);
    if (!t->pre || !t->dec || !t->added) {
        st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", vocab_path);
        goto done;
    }
    t->n_pre = 1;
    t->pre[0].kind = TOK_PRE_BYTE_LEVEL;
    t->pre[0].bl = (tok_byte_level){false, true, true};
    t->n_dec = 1;
    t->has_decoder = true;
    t->dec[0].kind = TOK_DEC_BYTE_LEVEL;
    t->dec[0].bl = (tok_byte_level){true, true, true};
    t->post = TOK_POST_BYTE_LEVEL;
    t->post_bl = (tok_byte_level){true, false, true};
    if (eot >= 0) { /* GPT-2's end of text: a special token, split out before the regex */
        t->added[0].content = malloc(sizeof EOT);
        if (!t->added[0].content) {
            st = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", vocab_path);
            goto done;
        }
        memcpy(t->added[0].content, EOT, sizeof EOT);
        t->added[0].len = sizeof EOT - 1;
        t->added[0].id = eot;
        t->added[0].special = true;
        t->added[0].normalized = false;
        t->n_added = 1;
        t->any_added_raw = true;
    }
    if ((st = tok_finish(t, vocab_path)) || (st = tok_byte_level_prepare(t, vocab_path)))
        goto done;
    *out = t;
    t = NULL;
done:
    attn_tok_free(t);
    tok_vocab_free(&V);
    tok_ivec_free(&merges);
    json_decref(root);
    free(vbuf);
    free(mbuf);
    return st;
}

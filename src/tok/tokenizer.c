/* tokenizer.c — the tokenizer pipeline around a model: tokenizer.json loading (component by
 * component, see attn_tok.h for the accepted fields), added-token splitting, normalizers,
 * pre-tokenizers, decoders, encode, decode and atomic save.
 *
 * Fidelity notes (each checked against tokenizers 0.21.4 (and 0.22.1) by tests/test_tokenizer.c):
 *   - added tokens: leftmost match, longest among those starting there (aho-corasick
 *     LeftmostLongest); non-normalized ones on the raw text first, then each remaining segment is
 *     normalized on its own (so Prepend applies per segment: "a<s>b" -> "▁a", <s>, "▁b");
 *   - Metaspace pre-tokenizer: ' ' -> replacement, prepend per scheme ("first": only a segment at
 *     original offset 0), split with the replacement merged into the following piece;
 *   - decode: ids -> tokens (added vocabulary before the model), special tokens dropped unless
 *     asked, then the decoder chain, then concatenation. */
#include "tok-impl.h"
#include "../io/io-impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

/* ---- small helpers ---- */

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static attn_status oom(const char *what) {
    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", what);
}

/* Append s with every occurrence of pat replaced by rep (non-overlapping, left to right). */
static void replace_all(tok_buf *out, const char *s, size_t n, const char *pat, size_t plen,
                        const char *rep, size_t rlen) {
    size_t i = 0, run = 0;
    while (plen && i + plen <= n) {
        if (memcmp(s + i, pat, plen) == 0) {
            tok_buf_put(out, s + run, i - run);
            tok_buf_put(out, rep, rlen);
            i += plen;
            run = i;
        } else {
            i++;
        }
    }
    tok_buf_put(out, s + run, n - run);
}

/* ---- component parsing ---- */

/* A required string field of obj; path names obj for messages. */
static attn_status get_str(json_t *obj, const char *key, const char *name, const char *path,
                           const char **s, size_t *n) {
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.%s: %s", name, path, key,
                         v ? "expected a string" : "missing");
    *s = json_string_value(v);
    *n = json_string_length(v);
    char field[300];
    snprintf(field, sizeof field, "%s.%s", path, key);
    return tok_no_nul(*s, *n, name, field);
}

/* A string field holding exactly one character (not U+0000, see tok_no_nul). */
static attn_status get_char(json_t *obj, const char *key, const char *name, const char *path,
                            uint32_t *cp) {
    const char *s = NULL;
    size_t n = 0;
    attn_status st = get_str(obj, key, name, path, &s, &n);
    if (st) return st;
    size_t k = tok_utf8_decode((const unsigned char *)s, n, cp);
    if (!k || k != n)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.%s: expected a single character", name,
                         path, key);
    return ATTN_STATUS_OK;
}

/* {"String": S}, or with regex non-NULL also {"Regex": R} (*regex set). */
static attn_status get_pattern(json_t *obj, const char *name, const char *path, const char **s,
                               size_t *n, bool *regex) {
    json_t *p = json_object_get(obj, "pattern");
    if (regex && json_is_object(p) && json_is_string(json_object_get(p, "Regex")) &&
        !json_object_get(p, "String")) {
        *regex = true;
        *s = json_string_value(json_object_get(p, "Regex"));
        *n = json_string_length(json_object_get(p, "Regex"));
        if (*n == 0)
            return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: %s.pattern: empty pattern", name, path);
        char field[300];
        snprintf(field, sizeof field, "%s.pattern.Regex", path);
        return tok_no_nul(*s, *n, name, field);
    }
    if (json_is_object(p) && json_object_get(p, "Regex"))
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: %s.pattern: Regex patterns are not supported (only String)", name,
                         path);
    if (!json_is_object(p) || !json_is_string(json_object_get(p, "String")))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.pattern: expected {\"String\": ...}", name,
                         path);
    *s = json_string_value(json_object_get(p, "String"));
    *n = json_string_length(json_object_get(p, "String"));
    if (*n == 0)
        return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: %s.pattern: empty pattern", name, path);
    char field[300];
    snprintf(field, sizeof field, "%s.pattern.String", path);
    return tok_no_nul(*s, *n, name, field);
}

static attn_status get_type(json_t *obj, const char *name, const char *path, const char **type) {
    if (!json_is_object(obj))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s: expected an object or null", name, path);
    json_t *t = json_object_get(obj, "type");
    if (!json_is_string(t))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.type: %s", name, path,
                         t ? "expected a string" : "missing");
    *type = json_string_value(t);
    if (strlen(*type) != json_string_length(t)) { /* a NUL inside: no type has that name */
        char q[64];
        return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: %s.type: %s is not supported", name, path,
                         tok_quote(q, sizeof q, *type, json_string_length(t)));
    }
    return ATTN_STATUS_OK;
}

static attn_status get_scheme(json_t *obj, const char *name, const char *path,
                              tok_prepend_scheme *sc) {
    json_t *v = json_object_get(obj, "prepend_scheme");
    if (!v) { /* files from before tokenizers 0.14 say add_prefix_space instead */
        json_t *a = json_object_get(obj, "add_prefix_space");
        *sc = (!a || json_is_true(a)) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
        return ATTN_STATUS_OK;
    }
    if (tok_json_str_is(v, "always"))
        *sc = TOK_PREPEND_ALWAYS;
    else if (tok_json_str_is(v, "first"))
        *sc = TOK_PREPEND_FIRST;
    else if (tok_json_str_is(v, "never"))
        *sc = TOK_PREPEND_NEVER;
    else
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: %s.prepend_scheme: expected \"always\", \"first\" or \"never\"",
                         name, path);
    return ATTN_STATUS_OK;
}

static attn_status get_split(json_t *obj, const char *name, const char *path, bool *split) {
    json_t *v = json_object_get(obj, "split");
    *split = true;
    if (!v) return ATTN_STATUS_OK;
    if (!json_is_boolean(v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.split: expected true or false", name, path);
    *split = json_is_true(v);
    return ATTN_STATUS_OK;
}

/* An optional boolean field with a default. */
static attn_status get_bool(json_t *obj, const char *key, bool dflt, const char *name,
                            const char *path, bool *out) {
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v) return ATTN_STATUS_OK;
    if (!json_is_boolean(v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.%s: expected true or false", name, path, key);
    *out = json_is_true(v);
    return ATTN_STATUS_OK;
}

/* A split behaviour: "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
 * "Contiguous". */
static const char *const BEHAVIORS[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};

static attn_status get_behavior(json_t *obj, const char *name, const char *path, bool required,
                                tok_split_behavior *out) {
    json_t *v = json_object_get(obj, "behavior");
    if (!v && !required) return ATTN_STATUS_OK;
    for (int i = 0; i < 5; i++)
        if (tok_json_str_is(v, BEHAVIORS[i])) {
            *out = (tok_split_behavior)i;
            return ATTN_STATUS_OK;
        }
    return attn_fail(ATTN_STATUS_FORMAT,
                     "%s: %s.behavior: expected \"Removed\", \"Isolated\", \"MergedWithPrevious\", "
                     "\"MergedWithNext\" or \"Contiguous\"",
                     name, path);
}

/* The flags of a ByteLevel component; each defaults to true when absent (tokenizers' default). */
static attn_status get_byte_level(json_t *obj, const char *name, const char *path,
                                  tok_byte_level *bl) {
    static const char *const keys[] = {"add_prefix_space", "trim_offsets", "use_regex"};
    bool *dst[] = {&bl->add_prefix_space, &bl->trim_offsets, &bl->use_regex};
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(obj, keys[i]);
        *dst[i] = true;
        if (!v) continue;
        if (!json_is_boolean(v))
            return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.%s: expected true or false", name, path,
                             keys[i]);
        *dst[i] = json_is_true(v);
    }
    return ATTN_STATUS_OK;
}

/* Grow an array of structs by one; returns the new slot, zeroed, or NULL. */
static void *grow(void **arr, size_t *n, size_t size) {
    void *p = realloc(*arr, (*n + 1) * size);
    if (!p) return NULL;
    *arr = p;
    char *slot = (char *)p + *n * size;
    memset(slot, 0, size);
    (*n)++;
    return slot;
}

/* A tokenizer.json pipeline component (normalizer, pre-tokenizer or decoder) parser. */
typedef attn_status (*component_parser)(attn_tok *t, json_t *obj, const char *name,
                                        const char *path, int depth);

/* {"type": "Sequence", key: [...]}: parse each element with fn, one level deeper. */
static attn_status parse_sequence(attn_tok *t, json_t *obj, const char *key, const char *name,
                                  const char *path, int depth, component_parser fn) {
    json_t *list = json_object_get(obj, key);
    if (!json_is_array(list))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.%s: expected an array", name, path, key);
    if (depth > 8)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s: Sequence nested too deeply", name, path);
    char sub[256];
    for (size_t i = 0; i < json_array_size(list); i++) {
        snprintf(sub, sizeof sub, "%s.%s[%zu]", path, key, i);
        attn_status st = fn(t, json_array_get(list, i), name, sub, depth + 1);
        if (st) return st;
    }
    return ATTN_STATUS_OK;
}

static attn_status parse_normalizer(attn_tok *t, json_t *obj, const char *name,
                                    const char *path, int depth) {
    if (json_is_null(obj)) return ATTN_STATUS_OK;
    const char *type = NULL;
    attn_status st = get_type(obj, name, path, &type);
    if (st) return st;
    if (!strcmp(type, "Sequence"))
        return parse_sequence(t, obj, "normalizers", name, path, depth, parse_normalizer);
    const char *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    tok_norm proto;
    memset(&proto, 0, sizeof proto);
    static const struct {
        const char *name;
        tok_norm_kind kind;
    } simple[] = {{"Lowercase", TOK_NORM_LOWERCASE}, {"NFD", TOK_NORM_NFD},
                  {"NFKD", TOK_NORM_NFKD},           {"NFC", TOK_NORM_NFC},
                  {"NFKC", TOK_NORM_NFKC},           {"StripAccents", TOK_NORM_STRIP_ACCENTS}};
    size_t si = 0;
    while (si < sizeof simple / sizeof simple[0] && strcmp(type, simple[si].name)) si++;
    if (si < sizeof simple / sizeof simple[0]) {
        proto.kind = simple[si].kind;
    } else if (!strcmp(type, "Prepend")) {
        proto.kind = TOK_NORM_PREPEND;
        if ((st = get_str(obj, "prepend", name, path, &a, &alen))) return st;
    } else if (!strcmp(type, "Replace")) {
        proto.kind = TOK_NORM_REPLACE;
        if ((st = get_pattern(obj, name, path, &a, &alen, &proto.regex)) ||
            (st = get_str(obj, "content", name, path, &b, &blen)))
            return st;
    } else if (!strcmp(type, "BertNormalizer")) {
        proto.kind = TOK_NORM_BERT;
        bool dflt[3] = {true, true, true};
        bool *dst[3] = {&proto.clean, &proto.chinese, &proto.lower};
        static const char *const keys[3] = {"clean_text", "handle_chinese_chars", "lowercase"};
        for (int k = 0; k < 3; k++)
            if ((st = get_bool(obj, keys[k], dflt[k], name, path, dst[k]))) return st;
        json_t *sa = json_object_get(obj, "strip_accents");
        if (sa && !json_is_null(sa) && !json_is_boolean(sa))
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: %s.strip_accents: expected true, false or null", name, path);
        proto.strip_accents = (!sa || json_is_null(sa)) ? -1 : json_is_true(sa) ? 1 : 0;
    } else if (!strcmp(type, "Precompiled")) {
        proto.kind = TOK_NORM_PRECOMPILED;
        json_t *cm = json_object_get(obj, "precompiled_charsmap");
        if (!json_is_string(cm))
            return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.precompiled_charsmap: %s", name, path,
                             cm ? "expected a base64 string" : "missing");
        a = json_string_value(cm), alen = json_string_length(cm);
        if ((st = tok_precompiled_parse(a, alen, name, path, &proto.pc))) return st;
    } else if (!strcmp(type, "Strip")) {
        proto.kind = TOK_NORM_STRIP;
        if ((st = get_bool(obj, "strip_left", true, name, path, &proto.left)) ||
            (st = get_bool(obj, "strip_right", true, name, path, &proto.right)))
            return st;
    } else {
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: %s: normalizer type \"%s\" is not supported (supported: Sequence, "
                         "Prepend, Replace, BertNormalizer, Lowercase, NFD, NFKD, NFC, NFKC, "
                         "StripAccents, Strip, Precompiled)",
                         name, path, type);
    }
    if (proto.regex) {
        char what[300];
        snprintf(what, sizeof what, "%s.pattern", path);
        if ((st = tok_regex_compile(a, alen, name, what, &proto.re))) return st;
    }
    tok_norm *nm = grow((void **)&t->norm, &t->n_norm, sizeof *nm);
    if (!nm) {
        tok_precompiled_free(proto.pc);
        if (proto.re) tok_regex_free(proto.re);
        return oom(name);
    }
    *nm = proto;
    if (!a) return ATTN_STATUS_OK;
    nm->a = dup_n(a, alen);
    nm->alen = alen;
    nm->b = b ? dup_n(b, blen) : NULL;
    nm->blen = blen;
    if (!nm->a || (b && !nm->b)) return oom(name);
    return ATTN_STATUS_OK;
}

static attn_status parse_pre(attn_tok *t, json_t *obj, const char *name, const char *path,
                             int depth) {
    if (json_is_null(obj)) return ATTN_STATUS_OK;
    const char *type = NULL;
    attn_status st = get_type(obj, name, path, &type);
    if (st) return st;
    if (!strcmp(type, "Sequence"))
        return parse_sequence(t, obj, "pretokenizers", name, path, depth, parse_pre);
    if (!strcmp(type, "Punctuation")) {
        tok_split_behavior bh = TOK_SPLIT_ISOLATED;
        if ((st = get_behavior(obj, name, path, false, &bh))) return st;
        tok_pre *p = grow((void **)&t->pre, &t->n_pre, sizeof *p);
        if (!p) return oom(name);
        p->kind = TOK_PRE_PUNCTUATION;
        p->behavior = bh;
        return ATTN_STATUS_OK;
    }
    if (!strcmp(type, "Digits")) {
        bool individual = false;
        if ((st = get_bool(obj, "individual_digits", false, name, path, &individual))) return st;
        tok_pre *p = grow((void **)&t->pre, &t->n_pre, sizeof *p);
        if (!p) return oom(name);
        p->kind = TOK_PRE_DIGITS;
        p->behavior = individual ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS;
        return ATTN_STATUS_OK;
    }
    if (!strcmp(type, "BertPreTokenizer") || !strcmp(type, "Whitespace") ||
        !strcmp(type, "WhitespaceSplit")) {
        tok_pre *p = grow((void **)&t->pre, &t->n_pre, sizeof *p);
        if (!p) return oom(name);
        p->kind = type[0] == 'B' ? TOK_PRE_BERT
                  : !strcmp(type, "Whitespace") ? TOK_PRE_WHITESPACE
                                                : TOK_PRE_WHITESPACE_SPLIT;
        return ATTN_STATUS_OK;
    }
    if (!strcmp(type, "Split")) {
        json_t *pat = json_object_get(obj, "pattern");
        json_t *ps = json_object_get(pat, "String"), *pr = json_object_get(pat, "Regex");
        json_t *pv = ps ? ps : pr;
        if (!json_is_object(pat) || json_object_size(pat) != 1 || !json_is_string(pv))
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: %s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", name,
                             path);
        if (json_string_length(pv) == 0)
            return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: %s.pattern: empty pattern", name, path);
        char field[300];
        snprintf(field, sizeof field, "%s.pattern.%s", path, ps ? "String" : "Regex");
        if ((st = tok_no_nul(json_string_value(pv), json_string_length(pv), name, field)))
            return st;
        tok_split_behavior bh = TOK_SPLIT_ISOLATED;
        bool invert = false;
        if ((st = get_behavior(obj, name, path, true, &bh)) ||
            (st = get_bool(obj, "invert", false, name, path, &invert)))
            return st;
        tok_pre *p = grow((void **)&t->pre, &t->n_pre, sizeof *p);
        if (!p) return oom(name);
        p->kind = TOK_PRE_SPLIT;
        p->behavior = bh;
        p->invert = invert;
        p->regex = pr != NULL;
        p->patlen = json_string_length(pv);
        p->pat = dup_n(json_string_value(pv), p->patlen);
        if (!p->pat) return oom(name);
        return ATTN_STATUS_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        tok_byte_level bl;
        if ((st = get_byte_level(obj, name, path, &bl))) return st;
        tok_pre *p = grow((void **)&t->pre, &t->n_pre, sizeof *p);
        if (!p) return oom(name);
        p->kind = TOK_PRE_BYTE_LEVEL;
        p->bl = bl;
        return ATTN_STATUS_OK;
    }
    if (strcmp(type, "Metaspace"))
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: %s: pre_tokenizer type \"%s\" is not supported (supported: "
                         "Sequence, Metaspace, Punctuation, ByteLevel, BertPreTokenizer, "
                         "Whitespace, WhitespaceSplit, Split, Digits)",
                         name, path, type);
    uint32_t cp;
    tok_prepend_scheme sc;
    bool split;
    if ((st = get_char(obj, "replacement", name, path, &cp)) ||
        (st = get_scheme(obj, name, path, &sc)) || (st = get_split(obj, name, path, &split)))
        return st;
    tok_pre *p = grow((void **)&t->pre, &t->n_pre, sizeof *p);
    if (!p) return oom(name);
    p->kind = TOK_PRE_METASPACE;
    p->replen = tok_utf8_encode(cp, p->rep);
    p->scheme = sc;
    p->split = split;
    return ATTN_STATUS_OK;
}

static attn_status parse_decoder(attn_tok *t, json_t *obj, const char *name, const char *path,
                                 int depth) {
    if (json_is_null(obj)) return ATTN_STATUS_OK;
    const char *type = NULL;
    attn_status st = get_type(obj, name, path, &type);
    if (st) return st;
    if (!strcmp(type, "Sequence"))
        return parse_sequence(t, obj, "decoders", name, path, depth, parse_decoder);
    tok_dec d = {0};
    const char *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    if (!strcmp(type, "Replace")) {
        d.kind = TOK_DEC_REPLACE;
        if ((st = get_pattern(obj, name, path, &a, &alen, NULL)) ||
            (st = get_str(obj, "content", name, path, &b, &blen)))
            return st;
    } else if (!strcmp(type, "ByteFallback")) {
        d.kind = TOK_DEC_BYTE_FALLBACK;
    } else if (!strcmp(type, "Fuse")) {
        d.kind = TOK_DEC_FUSE;
    } else if (!strcmp(type, "ByteLevel")) {
        d.kind = TOK_DEC_BYTE_LEVEL;
        if ((st = get_byte_level(obj, name, path, &d.bl))) return st;
    } else if (!strcmp(type, "Strip")) {
        d.kind = TOK_DEC_STRIP;
        if ((st = get_char(obj, "content", name, path, &d.ch))) return st;
        json_t *s0 = json_object_get(obj, "start"), *s1 = json_object_get(obj, "stop");
        if (!json_is_integer(s0) || !json_is_integer(s1) || json_integer_value(s0) < 0 ||
            json_integer_value(s1) < 0 || json_integer_value(s0) > 1000000 ||
            json_integer_value(s1) > 1000000)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: %s: expected integer \"start\" and \"stop\" in [0, 1e6]", name,
                             path);
        d.start = (size_t)json_integer_value(s0);
        d.stop = (size_t)json_integer_value(s1);
    } else if (!strcmp(type, "WordPiece")) {
        d.kind = TOK_DEC_WORDPIECE;
        json_t *pf = json_object_get(obj, "prefix");
        if (pf && !json_is_string(pf))
            return attn_fail(ATTN_STATUS_FORMAT, "%s: %s.prefix: expected a string", name, path);
        a = pf ? json_string_value(pf) : "##";
        alen = pf ? json_string_length(pf) : 2;
        char field[300];
        snprintf(field, sizeof field, "%s.prefix", path);
        if ((st = tok_no_nul(a, alen, name, field))) return st;
        b = "";
        if ((st = get_bool(obj, "cleanup", true, name, path, &d.cleanup))) return st;
    } else if (!strcmp(type, "Metaspace")) {
        d.kind = TOK_DEC_METASPACE;
        if ((st = get_char(obj, "replacement", name, path, &d.ch)) ||
            (st = get_scheme(obj, name, path, &d.scheme)) ||
            (st = get_split(obj, name, path, &d.split)))
            return st;
    } else {
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: %s: decoder type \"%s\" is not supported (supported: Sequence, "
                         "Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel, WordPiece)",
                         name, path, type);
    }
    tok_dec *slot = grow((void **)&t->dec, &t->n_dec, sizeof *slot);
    if (!slot) return oom(name);
    *slot = d;
    if (a) {
        slot->a = dup_n(a, alen);
        slot->alen = alen;
        slot->b = dup_n(b, blen);
        slot->blen = blen;
        if (!slot->a || !slot->b) return oom(name);
    }
    return ATTN_STATUS_OK;
}

static attn_status parse_added(attn_tok *t, json_t *list, const char *name) {
    if (!list || json_is_null(list)) return ATTN_STATUS_OK;
    if (!json_is_array(list))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: added_tokens: expected an array", name);
    size_t n = json_array_size(list);
    if (n > (size_t)TOK_MAX_ID)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: added_tokens: %zu entries", name, n);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added) return oom(name);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(list, i);
        json_t *id = json_object_get(e, "id"), *c = json_object_get(e, "content");
        if (!json_is_object(e) || !json_is_integer(id) || !json_is_string(c))
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: added_tokens[%zu]: expected {\"id\": int, \"content\": string, "
                             "...}",
                             name, i);
        if (json_integer_value(id) < 0 || json_integer_value(id) > TOK_MAX_ID)
            return attn_fail(ATTN_STATUS_FORMAT, "%s: added_tokens[%zu].id: %lld is out of range",
                             name, i, (long long)json_integer_value(id));
        if (json_string_length(c) == 0)
            return attn_fail(ATTN_STATUS_FORMAT, "%s: added_tokens[%zu].content: empty", name, i);
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu].content", i);
        attn_status st = tok_no_nul(json_string_value(c), json_string_length(c), name, path);
        if (st) return st;
        /* the flags; missing ones take tokenizers' defaults (false, and normalized = !special) */
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        bool flag[4];
        static const char *const keys[4] = {"single_word", "lstrip", "rstrip", "special"};
        for (int k = 0; k < 4; k++)
            if ((st = get_bool(e, keys[k], false, name, path, &flag[k]))) return st;
        bool normalized;
        if ((st = get_bool(e, "normalized", !flag[3], name, path, &normalized))) return st;
        tok_added *a = &t->added[t->n_added++];
        a->len = json_string_length(c);
        a->content = dup_n(json_string_value(c), a->len);
        if (!a->content) return oom(name);
        a->id = (int32_t)json_integer_value(id);
        a->single_word = flag[0];
        a->lstrip = flag[1];
        a->rstrip = flag[2];
        a->special = flag[3];
        a->normalized = normalized;
        if (a->normalized)
            t->any_added_normalized = true;
        else
            t->any_added_raw = true;
    }
    return ATTN_STATUS_OK;
}

attn_status tok_finish(attn_tok *t, const char *name) {
    const tok_vocab *V = &t->model->vocab;
    int32_t n = V->n;
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].id >= n) n = t->added[i].id + 1;
    t->vocab_size = n;
    t->added_kind = calloc((size_t)n ? (size_t)n : 1, 1);
    t->added_index = malloc(((size_t)n ? (size_t)n : 1) * sizeof *t->added_index);
    if (!t->added_kind || !t->added_index) return oom(name);
    for (int32_t i = 0; i < n; i++) t->added_index[i] = -1;
    for (size_t i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        if (t->added_index[a->id] >= 0)
            return attn_fail(ATTN_STATUS_FORMAT, "%s: added_tokens[%zu]: id %ld is used twice",
                             name, i, (long)a->id);
        int32_t mid = tok_vocab_find(V, a->content, a->len);
        char q[64], q2[64];
        if (mid >= 0 && mid != a->id)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: added_tokens[%zu]: %s has id %ld but model.vocab says %ld",
                             name, i, tok_quote(q, sizeof q, a->content, a->len), (long)a->id,
                             (long)mid);
        if (mid < 0 && a->id < V->n && V->str[a->id])
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: added_tokens[%zu]: id %ld of %s belongs to %s in model.vocab",
                             name, i, (long)a->id, tok_quote(q, sizeof q, a->content, a->len),
                             tok_quote(q2, sizeof q2, V->str[a->id], V->len[a->id]));
        for (size_t j = 0; j < i; j++)
            if (t->added[j].len == a->len && !memcmp(t->added[j].content, a->content, a->len))
                return attn_fail(ATTN_STATUS_FORMAT, "%s: added_tokens[%zu]: %s is listed twice",
                                 name, i, tok_quote(q, sizeof q, a->content, a->len));
        t->added_index[a->id] = (int32_t)i;
        t->added_kind[a->id] = a->special ? 2 : 1;
    }
    return tok_added_prepare(t, name);
}

/* s[0..n) through the normalizer steps, with a and b as ping-pong buffers; the result is *out
 * (into a, b or s), *out_n bytes. False when out of memory. */
static bool normalize(const attn_tok *t, const char *s, size_t n, tok_buf *a, tok_buf *b,
                      const char **out, size_t *out_n) {
    const char *cur = s;
    size_t cn = n;
    tok_buf *dst = a, *other = b;
    for (size_t k = 0; k < t->n_norm; k++) {
        const tok_norm *nm = &t->norm[k];
        dst->n = 0;
        if (nm->kind == TOK_NORM_PREPEND) {
            if (cn) tok_buf_put(dst, nm->a, nm->alen);
            tok_buf_put(dst, cur, cn);
        } else if (nm->kind == TOK_NORM_REPLACE && nm->regex) {
            void *md = NULL;
            bool ok = tok_regex_replace(nm->re, &md, cur, cn, nm->b, nm->blen, dst);
            tok_byte_level_md_free(md);
            if (!ok) return false;
        } else if (nm->kind == TOK_NORM_REPLACE) {
            replace_all(dst, cur, cn, nm->a, nm->alen, nm->b, nm->blen);
        } else if (!tok_norm_apply(nm, cur, cn, dst)) {
            return false;
        }
        if (dst->oom) return false;
        cur = dst->p ? dst->p : "";
        cn = dst->n;
        tok_buf *sw = dst;
        dst = other;
        other = sw;
    }
    *out = cur;
    *out_n = cn;
    return true;
}

/* Index order of added tokens: longer patterns first, then tokenizers' precedence (its
 * aho-corasick automaton lists the special tokens first, then the others, each in file order;
 * LeftmostLongest prefers the earlier of two equally long matches). */
typedef struct {
    unsigned char first;
    bool special;
    size_t len;
    int32_t index;
} added_key;

static int cmp_added(const void *x, const void *y) {
    const added_key *A = x, *B = y;
    if (A->first != B->first) return A->first < B->first ? -1 : 1;
    if (A->len != B->len) return A->len > B->len ? -1 : 1;
    if (A->special != B->special) return A->special ? -1 : 1;
    return A->index < B->index ? -1 : 1;
}

attn_status tok_added_prepare(attn_tok *t, const char *name) {
    tok_buf a = {0}, b = {0};
    t->any_added_raw = t->any_added_normalized = false;
    for (size_t i = 0; i < t->n_added; i++) {
        tok_added *x = &t->added[i];
        if (x->pat && x->pat != x->content) free(x->pat);
        x->pat = x->content;
        x->pat_len = x->len;
        if (!x->normalized) {
            t->any_added_raw = true;
            continue;
        }
        t->any_added_normalized = true;
        const char *out;
        size_t on;
        if (!normalize(t, x->content, x->len, &a, &b, &out, &on)) {
            tok_buf_free(&a), tok_buf_free(&b);
            return oom(name);
        }
        if (on == 0) {
            char q[64];
            tok_buf_free(&a), tok_buf_free(&b);
            /* tokenizers' automaton would match the empty pattern between any two characters */
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: added_tokens[%zu]: %s is normalized and the normalizer makes it "
                             "empty (not supported)",
                             name, i, tok_quote(q, sizeof q, x->content, x->len));
        }
        if (on != x->len || memcmp(out, x->content, on)) {
            x->pat = malloc(on);
            if (!x->pat) {
                x->pat = x->content;
                tok_buf_free(&a), tok_buf_free(&b);
                return oom(name);
            }
            memcpy(x->pat, out, on);
            x->pat_len = on;
        }
    }
    tok_buf_free(&a);
    tok_buf_free(&b);
    added_key *keys = malloc((t->n_added ? t->n_added : 1) * sizeof *keys);
    if (!keys) return oom(name);
    for (int k = 0; k < 2; k++) {
        free(t->added_order[k]);
        t->added_order[k] = malloc((t->n_added ? t->n_added : 1) * sizeof *t->added_order[k]);
        if (!t->added_order[k]) {
            free(keys);
            return oom(name);
        }
        size_t m = 0;
        for (size_t i = 0; i < t->n_added; i++) {
            const tok_added *x = &t->added[i];
            if (x->normalized == (k == 1))
                keys[m++] = (added_key){(unsigned char)x->pat[0], x->special, x->pat_len,
                                        (int32_t)i};
        }
        qsort(keys, m, sizeof *keys, cmp_added);
        for (size_t j = 0; j < m; j++) t->added_order[k][j] = keys[j].index;
        memset(t->added_first[k], 0, sizeof t->added_first[k]);
        for (size_t j = 0; j < m; j++) /* counts, then running sums: bucket starts */
            t->added_first[k][(unsigned char)t->added[t->added_order[k][j]].pat[0] + 1]++;
        for (int c = 0; c < 256; c++) t->added_first[k][c + 1] += t->added_first[k][c];
    }
    free(keys);
    return ATTN_STATUS_OK;
}

void attn_tok_free(attn_tok *t) {
    if (!t) return;
    if (t->model) t->model->destroy(t->model);
    for (size_t i = 0; i < t->n_norm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
        tok_precompiled_free(t->norm[i].pc);
        if (t->norm[i].re) tok_regex_free(t->norm[i].re);
    }
    free(t->norm);
    tok_split_release(t);
    for (size_t i = 0; i < t->n_pre; i++) free(t->pre[i].pat);
    free(t->pre);
    for (size_t i = 0; i < t->n_dec; i++) {
        free(t->dec[i].a);
        free(t->dec[i].b);
    }
    free(t->dec);
    for (size_t i = 0; i < t->n_added; i++) {
        if (t->added[i].pat != t->added[i].content) free(t->added[i].pat);
        free(t->added[i].content);
    }
    free(t->added);
    free(t->added_order[0]);
    free(t->added_order[1]);
    free(t->added_kind);
    free(t->added_index);
    tok_post_free(t);
    tok_byte_level_release(t);
    free(t);
}

static attn_status parse_root(json_t *root, const char *name, attn_tok **out) {
    if (!json_is_object(root))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: expected a JSON object at the top level", name);
    json_t *model = json_object_get(root, "model");
    if (!model) return attn_fail(ATTN_STATUS_FORMAT, "%s: model: missing", name);
    const char *type = NULL;
    attn_status st = get_type(model, name, "model", &type);
    if (st) return st;
    attn_tok *t = calloc(1, sizeof *t);
    if (!t) return oom(name);
    if (!strcmp(type, "BPE")) {
        st = tok_bpe_from_json(model, name, &t->model);
    } else if (!strcmp(type, "WordPiece")) {
        st = tok_wordpiece_from_json(model, name, &t->model);
    } else if (!strcmp(type, "WordLevel")) {
        st = tok_wordlevel_from_json(model, name, &t->model);
    } else if (!strcmp(type, "Unigram")) {
        st = tok_unigram_from_json(model, name, &t->model);
    } else {
        st = attn_fail(ATTN_STATUS_UNSUPPORTED,
                       "%s: model.type: \"%s\" is not supported (supported: BPE, WordPiece, "
                       "WordLevel, Unigram)",
                       name, type);
    }
    json_t *dec = json_object_get(root, "decoder");
    if (!st) st = parse_added(t, json_object_get(root, "added_tokens"), name);
    if (!st && json_object_get(root, "normalizer"))
        st = parse_normalizer(t, json_object_get(root, "normalizer"), name, "normalizer", 0);
    if (!st && json_object_get(root, "pre_tokenizer"))
        st = parse_pre(t, json_object_get(root, "pre_tokenizer"), name, "pre_tokenizer", 0);
    if (!st && dec) st = parse_decoder(t, dec, name, "decoder", 0);
    t->has_decoder = dec && !json_is_null(dec);
    if (!st) st = tok_post_parse(t, json_object_get(root, "post_processor"), name);
    if (!st) st = tok_trunc_pad_parse(t, root, name);
    if (!st) st = tok_finish(t, name);
    if (!st) st = tok_byte_level_prepare(t, name);
    if (!st) st = tok_split_prepare(t, name);
    for (size_t i = 0; !st && i < t->n_tpl_special; i++)
        for (size_t k = 0; !st && k < t->tpl_special[i].n; k++)
            if (t->tpl_special[i].ids[k] >= t->vocab_size) {
                char q[64];
                st = attn_fail(ATTN_STATUS_FORMAT,
                               "%s: post_processor: special token %s has id %ld, outside the "
                               "vocabulary (0..%ld)",
                               name,
                               tok_quote(q, sizeof q, t->tpl_special[i].name,
                                         t->tpl_special[i].name_len),
                               (long)t->tpl_special[i].ids[k], (long)t->vocab_size - 1);
            }
    if (st) {
        attn_tok_free(t);
        return st;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

attn_status attn_tok_load_reader(attn_reader r, attn_tok **out) {
    const char *name = r.name ? r.name : "<reader>";
    attn_status st = ATTN_STATUS_OK;
    char *buf = NULL;
    json_t *root = NULL;
    if (!out) {
        st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_tok_load: out is NULL");
        goto done;
    }
    *out = NULL;
    if (r.size > TOK_MAX_FILE_BYTES) {
        st = attn_fail(ATTN_STATUS_TOO_LARGE, "%s: %llu bytes is too large for a tokenizer.json "
                                              "(max %llu)",
                       name, (unsigned long long)r.size, (unsigned long long)TOK_MAX_FILE_BYTES);
        goto done;
    }
    buf = malloc((size_t)r.size + 1);
    if (!buf) {
        st = oom(name);
        goto done;
    }
    if ((st = r.read(r.ctx, 0, buf, (size_t)r.size))) goto done;
    json_error_t err;
    root = json_loadb(buf, (size_t)r.size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!root) {
        st = tok_json_error(&err, name);
        goto done;
    }
    st = parse_root(root, name, out);
done:
    json_decref(root);
    free(buf);
    attn_reader_close(&r);
    return st;
}

attn_status attn_tok_load(const char *path, attn_tok **out) {
    if (!path || !*path || !out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_tok_load: empty path or NULL out");
    *out = NULL;
    struct stat sb;
    char *full = NULL;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        /* no tokenizer.json but GPT-2's vocab.json + merges.txt: load those */
        char *vj = malloc(n + 32), *mt = malloc(n + 32), *tj = malloc(n + 32);
        if (!vj || !mt || !tj) {
            free(vj), free(mt), free(tj);
            return oom(path);
        }
        snprintf(vj, n + 32, "%s/vocab.json", path);
        snprintf(mt, n + 32, "%s/merges.txt", path);
        snprintf(tj, n + 32, "%s/tokenizer.json", path);
        struct stat s1, s2, s3;
        bool use_vm = stat(tj, &s3) != 0 && stat(vj, &s1) == 0 && stat(mt, &s2) == 0;
        attn_status vst = use_vm ? attn_tok_load_vocab_merges(vj, mt, out) : ATTN_STATUS_OK;
        free(vj), free(mt), free(tj);
        if (use_vm) return vst;
        full = malloc(n + sizeof "/tokenizer.json");
        if (!full) return oom(path);
        memcpy(full, path, n);
        memcpy(full + n, "/tokenizer.json", sizeof "/tokenizer.json");
        path = full;
    }
    attn_reader r;
    attn_status st = attn_reader_open_file(path, &r);
    if (!st) st = attn_tok_load_reader(r, out);
    free(full);
    return st;
}

/* ---- saving ---- */

static void save_norm(const tok_norm *n, tok_buf *b) {
    switch (n->kind) {
    case TOK_NORM_PREPEND:
        tok_buf_puts(b, "{\"type\": \"Prepend\", \"prepend\": ");
        tok_buf_json_str(b, n->a, n->alen);
        break;
    case TOK_NORM_PRECOMPILED:
        tok_buf_puts(b, "{\"type\": \"Precompiled\", \"precompiled_charsmap\": ");
        tok_buf_json_str(b, n->a, n->alen);
        break;
    case TOK_NORM_REPLACE:
        tok_buf_puts(b, n->regex ? "{\"type\": \"Replace\", \"pattern\": {\"Regex\": "
                                 : "{\"type\": \"Replace\", \"pattern\": {\"String\": ");
        tok_buf_json_str(b, n->a, n->alen);
        tok_buf_puts(b, "}, \"content\": ");
        tok_buf_json_str(b, n->b, n->blen);
        break;
    case TOK_NORM_BERT:
        tok_buf_printf(b, "{\"type\": \"BertNormalizer\", \"clean_text\": %s, "
                          "\"handle_chinese_chars\": %s, \"strip_accents\": %s, \"lowercase\": %s",
                       n->clean ? "true" : "false", n->chinese ? "true" : "false",
                       n->strip_accents < 0 ? "null" : n->strip_accents ? "true" : "false",
                       n->lower ? "true" : "false");
        break;
    case TOK_NORM_STRIP:
        tok_buf_printf(b, "{\"type\": \"Strip\", \"strip_left\": %s, \"strip_right\": %s",
                       n->left ? "true" : "false", n->right ? "true" : "false");
        break;
    default: {
        static const char *const names[] = {"Lowercase", "NFD", "NFKD", "NFC", "NFKC",
                                            "StripAccents"};
        tok_buf_printf(b, "{\"type\": \"%s\"", names[n->kind - TOK_NORM_LOWERCASE]);
        break;
    }
    }
    tok_buf_putc(b, '}');
}

static const char *scheme_name(tok_prepend_scheme s) {
    return s == TOK_PREPEND_ALWAYS ? "always" : s == TOK_PREPEND_FIRST ? "first" : "never";
}

static void save_byte_level(const tok_byte_level *bl, tok_buf *b) {
    tok_buf_printf(b, "{\"type\": \"ByteLevel\", \"add_prefix_space\": %s, \"trim_offsets\": %s, "
                      "\"use_regex\": %s}",
                   bl->add_prefix_space ? "true" : "false", bl->trim_offsets ? "true" : "false",
                   bl->use_regex ? "true" : "false");
}

static void save_pre(const tok_pre *p, tok_buf *b) {
    if (p->kind == TOK_PRE_BYTE_LEVEL) {
        save_byte_level(&p->bl, b);
        return;
    }
    if (p->kind == TOK_PRE_DIGITS) {
        tok_buf_printf(b, "{\"type\": \"Digits\", \"individual_digits\": %s}",
                       p->behavior == TOK_SPLIT_ISOLATED ? "true" : "false");
        return;
    }
    if (p->kind == TOK_PRE_PUNCTUATION) {
        tok_buf_printf(b, "{\"type\": \"Punctuation\", \"behavior\": \"%s\"}",
                       BEHAVIORS[p->behavior]);
        return;
    }
    if (p->kind == TOK_PRE_BERT || p->kind == TOK_PRE_WHITESPACE ||
        p->kind == TOK_PRE_WHITESPACE_SPLIT) {
        tok_buf_printf(b, "{\"type\": \"%s\"}",
                       p->kind == TOK_PRE_BERT         ? "BertPreTokenizer"
                       : p->kind == TOK_PRE_WHITESPACE ? "Whitespace"
                                                       : "WhitespaceSplit");
        return;
    }
    if (p->kind == TOK_PRE_SPLIT) {
        tok_buf_printf(b, "{\"type\": \"Split\", \"pattern\": {\"%s\": ",
                       p->regex ? "Regex" : "String");
        tok_buf_json_str(b, p->pat, p->patlen);
        tok_buf_printf(b, "}, \"behavior\": \"%s\", \"invert\": %s}", BEHAVIORS[p->behavior],
                       p->invert ? "true" : "false");
        return;
    }
    tok_buf_puts(b, "{\"type\": \"Metaspace\", \"replacement\": ");
    tok_buf_json_str(b, p->rep, p->replen);
    tok_buf_printf(b, ", \"prepend_scheme\": \"%s\", \"split\": %s}", scheme_name(p->scheme),
                   p->split ? "true" : "false");
}

static void save_char(tok_buf *b, uint32_t cp) {
    char u[4];
    tok_buf_json_str(b, u, tok_utf8_encode(cp, u));
}

static void save_dec(const tok_dec *d, tok_buf *b) {
    switch (d->kind) {
    case TOK_DEC_REPLACE:
        tok_buf_puts(b, "{\"type\": \"Replace\", \"pattern\": {\"String\": ");
        tok_buf_json_str(b, d->a, d->alen);
        tok_buf_puts(b, "}, \"content\": ");
        tok_buf_json_str(b, d->b, d->blen);
        tok_buf_putc(b, '}');
        break;
    case TOK_DEC_BYTE_FALLBACK: tok_buf_puts(b, "{\"type\": \"ByteFallback\"}"); break;
    case TOK_DEC_FUSE: tok_buf_puts(b, "{\"type\": \"Fuse\"}"); break;
    case TOK_DEC_BYTE_LEVEL: save_byte_level(&d->bl, b); break;
    case TOK_DEC_STRIP:
        tok_buf_puts(b, "{\"type\": \"Strip\", \"content\": ");
        save_char(b, d->ch);
        tok_buf_printf(b, ", \"start\": %zu, \"stop\": %zu}", d->start, d->stop);
        break;
    case TOK_DEC_WORDPIECE:
        tok_buf_puts(b, "{\"type\": \"WordPiece\", \"prefix\": ");
        tok_buf_json_str(b, d->a, d->alen);
        tok_buf_printf(b, ", \"cleanup\": %s}", d->cleanup ? "true" : "false");
        break;
    case TOK_DEC_METASPACE:
        tok_buf_puts(b, "{\"type\": \"Metaspace\", \"replacement\": ");
        save_char(b, d->ch);
        tok_buf_printf(b, ", \"prepend_scheme\": \"%s\", \"split\": %s}", scheme_name(d->scheme),
                       d->split ? "true" : "false");
        break;
    }
}

/* One component: null, the single step, or a Sequence of the steps. */
#define SAVE_LIST(b, key, seqkey, arr, n, fn)                                                    \
    do {                                                                                         \
        tok_buf_puts(b, "  \"" key "\": ");                                                      \
        if ((n) == 0) {                                                                          \
            tok_buf_puts(b, "null");                                                             \
        } else if ((n) == 1) {                                                                   \
            fn(&(arr)[0], b);                                                                    \
        } else {                                                                                 \
            tok_buf_puts(b, "{\"type\": \"Sequence\", \"" seqkey "\": [");                       \
            for (size_t i_ = 0; i_ < (n); i_++) {                                                \
                tok_buf_puts(b, i_ ? ", " : "");                                                 \
                fn(&(arr)[i_], b);                                                               \
            }                                                                                    \
            tok_buf_puts(b, "]}");                                                               \
        }                                                                                        \
        tok_buf_puts(b, ",\n");                                                                  \
    } while (0)

attn_status attn_tok_save(const attn_tok *t, const char *path) {
    if (!t || !path || !*path)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_tok_save: NULL tokenizer or path");
    tok_buf b = {0};
    tok_buf_puts(&b, "{\n  \"version\": \"1.0\",\n");
    tok_trunc_pad_save(t, &b);
    tok_buf_puts(&b, "  \"added_tokens\": [");
    for (size_t i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        tok_buf_printf(&b, "%s\n    {\"id\": %ld, \"content\": ", i ? "," : "", (long)a->id);
        tok_buf_json_str(&b, a->content, a->len);
        tok_buf_printf(&b, ", \"single_word\": %s, \"lstrip\": %s, \"rstrip\": %s, "
                           "\"normalized\": %s, \"special\": %s}",
                       a->single_word ? "true" : "false", a->lstrip ? "true" : "false",
                       a->rstrip ? "true" : "false", a->normalized ? "true" : "false",
                       a->special ? "true" : "false");
    }
    tok_buf_puts(&b, t->n_added ? "\n  ],\n" : "],\n");
    SAVE_LIST(&b, "normalizer", "normalizers", t->norm, t->n_norm, save_norm);
    SAVE_LIST(&b, "pre_tokenizer", "pretokenizers", t->pre, t->n_pre, save_pre);
    tok_post_save(t, &b);
    if (t->has_decoder) {
        SAVE_LIST(&b, "decoder", "decoders", t->dec, t->n_dec, save_dec);
    } else {
        tok_buf_puts(&b, "  \"decoder\": null,\n");
    }
    tok_buf_puts(&b, "  \"model\": ");
    t->model->save(t->model, &b);
    tok_buf_puts(&b, "\n}\n");
    if (b.oom) {
        tok_buf_free(&b);
        return oom(path);
    }
    attn_atomic a;
    attn_status st = attn_atomic_begin(path, &a);
    if (!st) {
        st = attn_atomic_write(&a, b.p, b.n);
        if (st)
            attn_atomic_abort(&a);
        else
            st = attn_atomic_commit(&a);
    }
    tok_buf_free(&b);
    return st;
}

/* ---- encoding ---- */

/* The added token of kind k (0 raw, 1 normalized) whose pattern matches longest at s[i..n),
 * ties to tokenizers' precedence (the index's order), or -1. */
static int32_t match_added(const attn_tok *t, int k, const char *s, size_t i, size_t n,
                           size_t *len) {
    unsigned char c = (unsigned char)s[i];
    for (uint32_t j = t->added_first[k][c]; j < t->added_first[k][c + 1]; j++) {
        const tok_added *a = &t->added[t->added_order[k][j]];
        if (a->pat_len <= n - i && !memcmp(s + i, a->pat, a->pat_len)) {
            *len = a->pat_len;
            return t->added_order[k][j];
        }
    }
    return -1;
}

typedef struct {
    const attn_tok *t;
    tok_piece_fn cb;
    void *ctx;
    tok_buf n1, n2;        /* normalizer ping-pong buffers */
    tok_strlist p1, p2;    /* pre-tokenizer ping-pong lists */
    void *md;              /* PCRE2 match data of the ByteLevel regex (per call: thread-safe) */
    void *md_split;        /* PCRE2 match data for Split / Whitespace regexes */
    void *md_word;         /* PCRE2 match data of the single_word test */
} pipe_state;

/* A piece of text between added tokens: first = it starts at the text's offset 0. */
typedef attn_status (*piece_fn)(pipe_state *ps, const char *s, size_t n, bool first);

/* The character ending right before s[at] (at > 0): its offset. */
static size_t char_before(const char *s, size_t at) {
    size_t i = at - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    return i;
}

/* Whether the character at s[i..n) is whitespace (Rust regex \s: White_Space); *k its length. */
static bool space_at(const char *s, size_t i, size_t n, size_t *k) {
    uint32_t cp;
    *k = tok_utf8_decode((const unsigned char *)s + i, n - i, &cp);
    if (!*k) *k = 1, cp = 0xFFFD;
    return tok_uni_space(cp);
}

/* tokenizers' AddedVocabulary::find_matches over s[0..n) with the tokens of kind k: leftmost
 * longest matches, left to right, each search resuming after the previous match (a discarded
 * one included); a single_word match is discarded unless no word character touches it; lstrip
 * takes in the whitespace before the match (not before the previous split's end), rstrip the
 * whitespace after it. The text between matches goes to piece, each token's id to ps->cb. */
static attn_status split_added(pipe_state *ps, int k, const char *s, size_t n, bool first,
                               piece_fn piece) {
    const attn_tok *t = ps->t;
    size_t i = 0, done = 0; /* done: tokenizers' start_offset */
    attn_status st;
    while (i < n) {
        size_t len;
        int32_t m = match_added(t, k, s, i, n, &len);
        if (m < 0) {
            i++;
            continue;
        }
        size_t start = i, stop = i + len;
        i = stop;
        const tok_added *a = &t->added[m];
        if (a->single_word) {
            int wb = 0, wa = 0;
            if (start > 0) {
                size_t c = char_before(s, start);
                wb = tok_word_char(t, &ps->md_word, s + c, start - c);
            }
            if (stop < n) {
                uint32_t cp;
                size_t kk = tok_utf8_decode((const unsigned char *)s + stop, n - stop, &cp);
                wa = tok_word_char(t, &ps->md_word, s + stop, kk ? kk : 1);
            }
            if (wb < 0 || wa < 0) return oom("encode");
            if (wb || wa) continue;
        }
        if (a->lstrip) {
            size_t ns = start, kk;
            while (ns > 0) {
                size_t c = char_before(s, ns);
                if (!space_at(s, c, n, &kk)) break;
                ns = c;
            }
            start = ns > done ? ns : done;
        }
        if (a->rstrip) {
            size_t kk;
            while (stop < n && space_at(s, stop, n, &kk)) stop += kk;
        }
        if (done < start && (st = piece(ps, s + done, start - done, first && done == 0)))
            return st;
        /* a match left empty (its text all taken by the strips of the previous one) is dropped,
         * as tokenizers drops empty splits (reversed, it panics there) */
        if (stop > start && (st = ps->cb(ps->ctx, NULL, 0, a->id))) return st;
        done = stop;
    }
    if (done < n) return piece(ps, s + done, n - done, first && done == 0);
    return ATTN_STATUS_OK;
}

static attn_status pretok_segment(pipe_state *ps, const char *s, size_t n, bool first) {
    const attn_tok *t = ps->t;
    tok_strlist *cur = &ps->p1, *nxt = &ps->p2;
    tok_strlist_clear(cur);
    if (!tok_strlist_push(cur, s, n, first)) return oom("encode");
    tok_buf tmp = {0};
    for (size_t k = 0; k < t->n_pre; k++) {
        const tok_pre *p = &t->pre[k];
        tok_strlist_clear(nxt);
        for (size_t i = 0; i < cur->n; i++) {
            const char *ps_ = tok_strlist_at(cur, i);
            size_t pn = cur->len[i];
            if (pn == 0) continue;
            if (p->kind != TOK_PRE_METASPACE && p->kind != TOK_PRE_BYTE_LEVEL) {
                if (!tok_split_apply(p, &ps->md_split, ps_, pn, cur->flag[i], nxt)) goto fail;
                continue;
            }
            if (p->kind == TOK_PRE_BYTE_LEVEL) {
                if (!tok_byte_level_split(t, &p->bl, &ps->md, ps_, pn, cur->flag[i], nxt))
                    goto fail;
                continue;
            }
            tmp.n = 0;
            bool starts = false;
            /* spaces -> replacement, then prepend per scheme */
            tok_buf tmp2 = {0};
            replace_all(&tmp2, ps_, pn, " ", 1, p->rep, p->replen);
            starts = tmp2.n >= p->replen && !memcmp(tmp2.p, p->rep, p->replen);
            if (!starts && (p->scheme == TOK_PREPEND_ALWAYS ||
                            (p->scheme == TOK_PREPEND_FIRST && cur->flag[i])))
                tok_buf_put(&tmp, p->rep, p->replen);
            tok_buf_put(&tmp, tmp2.p, tmp2.n);
            tok_buf_free(&tmp2);
            if (tmp.oom) {
                tok_buf_free(&tmp);
                return oom("encode");
            }
            if (!p->split) {
                if (!tok_strlist_push(nxt, tmp.p, tmp.n, cur->flag[i])) goto fail;
                continue;
            }
            /* split, the replacement merged with the piece that follows it */
            size_t start = 0;
            for (size_t j = 1; j + p->replen <= tmp.n; j++) {
                if (memcmp(tmp.p + j, p->rep, p->replen) == 0) {
                    if (!tok_strlist_push(nxt, tmp.p + start, j - start,
                                          start == 0 ? cur->flag[i] : 0))
                        goto fail;
                    start = j;
                }
            }
            if (tmp.n > start &&
                !tok_strlist_push(nxt, tmp.p + start, tmp.n - start, start == 0 ? cur->flag[i] : 0))
                goto fail;
        }
        tok_strlist *sw = cur;
        cur = nxt;
        nxt = sw;
    }
    tok_buf_free(&tmp);
    for (size_t i = 0; i < cur->n; i++) {
        if (cur->len[i] == 0) continue;
        attn_status st = ps->cb(ps->ctx, tok_strlist_at(cur, i), cur->len[i], -1);
        if (st) return st;
    }
    return ATTN_STATUS_OK;
fail:
    tok_buf_free(&tmp);
    return oom("encode");
}

/* Normalize one raw segment, split out normalized added tokens, pre-tokenize the rest. */
static attn_status do_segment(pipe_state *ps, const char *s, size_t n, bool first) {
    const attn_tok *t = ps->t;
    const char *cur;
    size_t cn;
    if (!normalize(t, s, n, &ps->n1, &ps->n2, &cur, &cn)) return oom("encode");
    /* cur may point into n1/n2, which pretok_segment does not touch */
    if (!t->any_added_normalized) return pretok_segment(ps, cur, cn, first);
    return split_added(ps, 1, cur, cn, first, pretok_segment);
}

attn_status tok_pretokenize(const attn_tok *t, const char *text, size_t len, tok_piece_fn cb,
                            void *ctx) {
    size_t bad = tok_utf8_check(text, len);
    if (bad != len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encode: text is not valid UTF-8 (byte 0x%02X at offset %zu)",
                         (unsigned char)text[bad], bad);
    pipe_state ps = {.t = t, .cb = cb, .ctx = ctx};
    attn_status st = t->any_added_raw ? split_added(&ps, 0, text, len, true, do_segment)
                                      : do_segment(&ps, text, len, true);
    tok_buf_free(&ps.n1);
    tok_buf_free(&ps.n2);
    tok_strlist_free(&ps.p1);
    tok_strlist_free(&ps.p2);
    tok_byte_level_md_free(ps.md);
    tok_byte_level_md_free(ps.md_split);
    tok_byte_level_md_free(ps.md_word);
    return st;
}

/* A memo of piece -> ids: text repeats its words, and a model's ids for a piece depend on the
 * piece alone. It lives in a call (or a batch), not in the tokenizer, so that concurrent encodes
 * of one tokenizer stay safe. It starts after the first CACHE_AFTER pieces (short texts never
 * pay for it) and stops growing at CACHE_MAX entries. */
#define CACHE_AFTER 64
#define CACHE_SLOTS 16384 /* a power of two, 2 x CACHE_MAX */
#define CACHE_MAX 8192
#define CACHE_PIECE 64    /* longest piece cached, bytes */

typedef struct {
    uint64_t h;
    size_t key_off, key_len, ids_off, ids_n;
} cache_ent;

struct tok_memo {
    size_t pieces;
    int32_t *slot; /* CACHE_SLOTS indices into ents, -1 empty */
    cache_ent *ents;
    size_t n_ents;
    tok_buf keys;
    tok_ivec cids;
};

tok_memo *tok_memo_new(const attn_tok *t) {
    (void)t;
    return calloc(1, sizeof(tok_memo)); /* NULL (no memo) is fine too */
}

void tok_memo_free(tok_memo *c) {
    if (!c) return;
    free(c->slot);
    free(c->ents);
    tok_buf_free(&c->keys);
    tok_ivec_free(&c->cids);
    free(c);
}

typedef struct {
    const attn_tok *t;
    tok_memo *memo;
    tok_ivec *ids;
} enc_ctx;

static attn_status enc_piece(void *vctx, const char *s, size_t n, int32_t added_id) {
    enc_ctx *ec = vctx;
    tok_ivec *ids = ec->ids;
    if (added_id >= 0) return tok_ivec_push(ids, added_id) ? ATTN_STATUS_OK : oom("encode");
    const tok_model *m = ec->t->model;
    tok_memo *c = ec->memo;
    if (!c) return m->encode_piece(m, s, n, ids);
    if (++c->pieces == CACHE_AFTER && !c->slot) {
        c->slot = malloc(CACHE_SLOTS * sizeof *c->slot);
        c->ents = malloc(CACHE_MAX * sizeof *c->ents);
        if (!c->slot || !c->ents) return oom("encode");
        memset(c->slot, 0xff, CACHE_SLOTS * sizeof *c->slot);
    }
    if (!c->slot || n > CACHE_PIECE) return m->encode_piece(m, s, n, ids);
    uint64_t h = tok_hash(s, n);
    size_t i = (size_t)h & (CACHE_SLOTS - 1);
    for (; c->slot[i] >= 0; i = (i + 1) & (CACHE_SLOTS - 1)) {
        const cache_ent *e = &c->ents[c->slot[i]];
        if (e->h == h && e->key_len == n && !memcmp(c->keys.p + e->key_off, s, n)) {
            for (size_t j = 0; j < e->ids_n; j++)
                if (!tok_ivec_push(ids, c->cids.v[e->ids_off + j])) return oom("encode");
            return ATTN_STATUS_OK;
        }
    }
    size_t before = ids->n;
    attn_status st = m->encode_piece(m, s, n, ids);
    if (st || c->n_ents >= CACHE_MAX) return st;
    cache_ent e = {h, c->keys.n, n, c->cids.n, ids->n - before};
    tok_buf_put(&c->keys, s, n);
    for (size_t j = before; j < ids->n; j++)
        if (!tok_ivec_push(&c->cids, ids->v[j])) return oom("encode");
    if (c->keys.oom) return oom("encode");
    c->ents[c->n_ents] = e;
    c->slot[i] = (int32_t)c->n_ents++;
    return ATTN_STATUS_OK;
}

attn_status tok_encode_ids(const attn_tok *t, tok_memo *memo, const char *text, size_t len,
                           tok_ivec *out) {
    if (!t) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: tokenizer is NULL");
    if (!text && len) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: text is NULL");
    enc_ctx c = {t, memo, out};
    return len ? tok_pretokenize(t, text, len, enc_piece, &c) : ATTN_STATUS_OK;
}

/* attn_tok_encode's ids: the model's, then the post-processor's special tokens. */
static attn_status encode_vec(const attn_tok *t, const char *text, size_t len, tok_ivec *out) {
    memset(out, 0, sizeof *out);
    if (!t) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: tokenizer is NULL");
    if (!text && len) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: text is NULL");
    if (t->post == TOK_POST_TEMPLATE || t->post == TOK_POST_BERT) {
        attn_tok_encoding e;
        attn_status st = attn_tok_encode_ex(t, text, len, NULL, 0, NULL, &e);
        if (st) return st;
        for (size_t i = 0; i < e.n; i++)
            if (!tok_ivec_push(out, e.ids[i])) {
                attn_tok_encoding_free(&e);
                tok_ivec_free(out);
                return oom("encode");
            }
        attn_tok_encoding_free(&e);
        return ATTN_STATUS_OK;
    }
    tok_memo *memo = tok_memo_new(t);
    attn_status st = tok_encode_ids(t, memo, text, len, out);
    tok_memo_free(memo);
    if (st) tok_ivec_free(out);
    return st;
}

attn_status attn_tok_encode(const attn_tok *t, const char *text, size_t len, int32_t *ids,
                            size_t cap, size_t *n) {
    if (!n) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: n is NULL");
    tok_ivec v;
    attn_status st = encode_vec(t, text, len, &v);
    if (st) return st;
    *n = v.n;
    if (v.n > cap || (v.n && !ids)) {
        tok_ivec_free(&v);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encode: the ids buffer holds %zu ids, %zu are needed", cap, *n);
    }
    if (v.n) memcpy(ids, v.v, v.n * sizeof *ids);
    tok_ivec_free(&v);
    return ATTN_STATUS_OK;
}

attn_status attn_tok_encode_alloc(const attn_tok *t, const char *text, size_t len, int32_t **ids,
                                  size_t *n) {
    if (!ids || !n) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: NULL output");
    *ids = NULL;
    *n = 0;
    tok_ivec v;
    attn_status st = encode_vec(t, text, len, &v);
    if (st) return st;
    int32_t *out = attn_alloc(v.n * sizeof *out);
    if (!out) {
        tok_ivec_free(&v);
        return oom("encode");
    }
    if (v.n) memcpy(out, v.v, v.n * sizeof *out);
    *ids = out;
    *n = v.n;
    tok_ivec_free(&v);
    return ATTN_STATUS_OK;
}

/* ---- decoding ---- */

static const char *token_str(const attn_tok *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->vocab_size) return NULL;
    int32_t k = t->added_index[id];
    if (k >= 0) {
        *len = t->added[k].len;
        return t->added[k].content;
    }
    const tok_vocab *V = &t->model->vocab;
    if (id >= V->n || !V->str[id]) return NULL;
    *len = V->len[id];
    return V->str[id];
}

/* "<0xHH>" -> byte, as Rust's u8::from_str_radix(&token[3..5], 16) reads it (which also takes
 * a '+' sign before a single digit). */
static int byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0, digits = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else if (c == '+' && i == 3)
            continue;
        else
            return -1;
        v = v * 16 + d;
        digits++;
    }
    return digits ? v : -1;
}

/* tokenizers' WordPiece decoder on token i: the prefix removed from a continuation, a space
 * before any other token but the first; then, with cleanup, these replacements in order. */
static void wordpiece_token(const tok_dec *d, size_t i, const char *s, size_t n, tok_buf *out) {
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not",
                                       " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", " don't", "'s", "'ve",
                                     "'re"};
    tok_buf a = {0}, b = {0};
    if (i != 0) {
        if (n >= d->alen && !memcmp(s, d->a, d->alen)) {
            tok_buf_put(&a, s + d->alen, n - d->alen);
        } else {
            tok_buf_putc(&a, ' ');
            tok_buf_put(&a, s, n);
        }
    } else {
        tok_buf_put(&a, s, n);
    }
    if (d->cleanup) {
        for (size_t k = 0; k < sizeof from / sizeof from[0]; k++) {
            b.n = 0;
            replace_all(&b, a.p ? a.p : "", a.n, from[k], strlen(from[k]), to[k], strlen(to[k]));
            tok_buf sw = a;
            a = b;
            b = sw;
        }
    }
    tok_buf_put(out, a.p ? a.p : "", a.n);
    if (a.oom || b.oom) out->oom = true;
    tok_buf_free(&a);
    tok_buf_free(&b);
}

static attn_status apply_decoder(const tok_dec *d, const tok_strlist *in, tok_strlist *out) {
    tok_buf tmp = {0};
    tok_strlist_clear(out);
    bool ok = true;
    if (d->kind == TOK_DEC_FUSE) {
        for (size_t i = 0; i < in->n; i++) tok_buf_put(&tmp, tok_strlist_at(in, i), in->len[i]);
        ok = !tmp.oom && tok_strlist_push(out, tmp.p ? tmp.p : "", tmp.n, 0);
    } else if (d->kind == TOK_DEC_BYTE_LEVEL) {
        ok = tok_byte_level_decode(in, out);
    } else if (d->kind == TOK_DEC_BYTE_FALLBACK) {
        tok_buf bytes = {0};
        for (size_t i = 0; i <= in->n && ok; i++) {
            int v = i < in->n ? byte_token(tok_strlist_at(in, i), in->len[i]) : -1;
            if (v >= 0) {
                tok_buf_putc(&bytes, (char)v);
                continue;
            }
            if (bytes.n) { /* flush: the run as text if valid UTF-8, else U+FFFD per byte */
                if (tok_utf8_check(bytes.p, bytes.n) == bytes.n) {
                    ok = tok_strlist_push(out, bytes.p, bytes.n, 0);
                } else {
                    for (size_t j = 0; j < bytes.n && ok; j++)
                        ok = tok_strlist_push(out, "\xEF\xBF\xBD", 3, 0);
                }
                bytes.n = 0;
            }
            if (i < in->n) ok = ok && tok_strlist_push(out, tok_strlist_at(in, i), in->len[i], 0);
        }
        ok = ok && !bytes.oom;
        tok_buf_free(&bytes);
    } else {
        for (size_t i = 0; i < in->n && ok; i++) {
            const char *s = tok_strlist_at(in, i);
            size_t n = in->len[i];
            tmp.n = 0;
            if (d->kind == TOK_DEC_REPLACE) {
                replace_all(&tmp, s, n, d->a, d->alen, d->b, d->blen);
            } else if (d->kind == TOK_DEC_WORDPIECE) {
                wordpiece_token(d, i, s, n, &tmp);
            } else if (d->kind == TOK_DEC_METASPACE) {
                size_t j = 0;
                while (j < n) {
                    uint32_t cp;
                    size_t k = tok_utf8_decode((const unsigned char *)s + j, n - j, &cp);
                    if (!k) k = 1, cp = 0xFFFD;
                    if (cp == d->ch) {
                        if (!(i == 0 && d->scheme != TOK_PREPEND_NEVER)) tok_buf_putc(&tmp, ' ');
                    } else {
                        tok_buf_put(&tmp, s + j, k);
                    }
                    j += k;
                }
            } else { /* TOK_DEC_STRIP: up to start leading / stop trailing copies of ch */
                size_t a = 0, z = n;
                char u[4];
                size_t ul = tok_utf8_encode(d->ch, u);
                for (size_t k = 0; k < d->start && z - a >= ul && !memcmp(s + a, u, ul); k++)
                    a += ul;
                for (size_t k = 0; k < d->stop && z - a >= ul && !memcmp(s + z - ul, u, ul); k++)
                    z -= ul;
                tok_buf_put(&tmp, s + a, z - a);
            }
            ok = !tmp.oom && tok_strlist_push(out, tmp.p ? tmp.p : "", tmp.n, 0);
        }
    }
    tok_buf_free(&tmp);
    return ok ? ATTN_STATUS_OK : oom("decode");
}

static attn_status decode_buf(const attn_tok *t, const int32_t *ids, size_t n, unsigned flags,
                              tok_buf *out) {
    if (!t) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "decode: tokenizer is NULL");
    if (n && !ids) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "decode: ids is NULL");
    tok_strlist a = {0}, b = {0};
    attn_status st = ATTN_STATUS_OK;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = token_str(t, ids[i], &len);
        if (!s) {
            st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                           "decode: ids[%zu] = %ld is not in the vocabulary (0..%ld)", i,
                           (long)ids[i], (long)t->vocab_size - 1);
            goto done;
        }
        if (!(flags & ATTN_TOK_DECODE_KEEP_SPECIAL) && t->added_kind[ids[i]] == 2) continue;
        if (!tok_strlist_push(&a, s, len, 0)) {
            st = oom("decode");
            goto done;
        }
    }
    if (!t->has_decoder) {
        for (size_t i = 0; i < a.n; i++) {
            if (i) tok_buf_putc(out, ' ');
            tok_buf_put(out, tok_strlist_at(&a, i), a.len[i]);
        }
    } else {
        tok_strlist *cur = &a, *nxt = &b;
        for (size_t k = 0; k < t->n_dec; k++) {
            if ((st = apply_decoder(&t->dec[k], cur, nxt))) goto done;
            tok_strlist *sw = cur;
            cur = nxt;
            nxt = sw;
        }
        for (size_t i = 0; i < cur->n; i++) tok_buf_put(out, tok_strlist_at(cur, i), cur->len[i]);
    }
    tok_buf_put(out, "", 0); /* NUL-terminated even when empty */
    if (out->oom) st = oom("decode");
done:
    tok_strlist_free(&a);
    tok_strlist_free(&b);
    return st;
}

attn_status attn_tok_decode(const attn_tok *t, const int32_t *ids, size_t n, unsigned flags,
                            char *buf, size_t cap, size_t *len) {
    if (!len) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "decode: len is NULL");
    tok_buf b = {0};
    attn_status st = decode_buf(t, ids, n, flags, &b);
    if (st) {
        tok_buf_free(&b);
        return st;
    }
    *len = b.n;
    if (!buf || cap < b.n + 1) {
        tok_buf_free(&b);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "decode: the text buffer holds %zu bytes, %zu are needed", cap, *len + 1);
    }
    memcpy(buf, b.p, b.n + 1);
    tok_buf_free(&b);
    return ATTN_STATUS_OK;
}

size_t attn_tok_decode_pending(const attn_tok *t, const int32_t *ids, size_t n, unsigned flags) {
    if (!t || !ids || !t->has_decoder) return 0;
    bool fallback = false;
    for (size_t k = 0; k < t->n_dec; k++) fallback |= t->dec[k].kind == TOK_DEC_BYTE_FALLBACK;
    if (!fallback) return 0;
    size_t i = n, keep = n; /* keep: where the run starts */
    while (i > 0) {
        int32_t id = ids[i - 1];
        size_t len;
        const char *s = token_str(t, id, &len);
        if (!s) break;
        if (!(flags & ATTN_TOK_DECODE_KEEP_SPECIAL) && t->added_kind[id] == 2) {
            i--; /* dropped before the decoder: the run goes on through it */
            continue;
        }
        if (byte_token(s, len) < 0) break;
        keep = --i;
    }
    return n - keep;
}

attn_status attn_tok_decode_alloc(const attn_tok *t, const int32_t *ids, size_t n,
                                  unsigned flags, char **text, size_t *len) {
    if (!text) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "decode: text is NULL");
    *text = NULL;
    tok_buf b = {0};
    attn_status st = decode_buf(t, ids, n, flags, &b);
    if (!st) {
        char *s = attn_alloc(b.n + 1);
        if (!s) {
            st = oom("decode");
        } else {
            memcpy(s, b.p, b.n + 1);
            *text = s;
            if (len) *len = b.n;
        }
    }
    tok_buf_free(&b);
    return st;
}

/* ---- accessors ---- */

int32_t attn_tok_vocab_size(const attn_tok *t) { return t ? t->vocab_size : 0; }

int32_t attn_tok_token_to_id(const attn_tok *t, const char *token) {
    if (!t || !token) return -1;
    size_t n = strlen(token);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == n && !memcmp(t->added[i].content, token, n)) return t->added[i].id;
    return tok_vocab_find(&t->model->vocab, token, n);
}

const char *attn_tok_id_to_token(const attn_tok *t, int32_t id) {
    size_t len;
    return t ? token_str(t, id, &len) : NULL;
}

bool attn_tok_is_special(const attn_tok *t, int32_t id) {
    return t && id >= 0 && id < t->vocab_size && t->added_kind[id] == 2;
}

const char *attn_tok_model_type(const attn_tok *t) { return t ? t->model->type : ""; }

int32_t attn_tok_special_id(const attn_tok *t, attn_tok_special which) {
    /* the conventional names, in order of preference: SentencePiece's, GPT-2's, BERT's */
    static const char *const names[7][3] = {{"<pad>", "[PAD]", NULL},
                                            {"<unk>", "[UNK]", NULL},
                                            {"<s>", "<|endoftext|>", "[CLS]"},
                                            {"</s>", "<|endoftext|>", "[SEP]"},
                                            {"[MASK]", "<mask>", NULL},
                                            {"[CLS]", "<s>", NULL},
                                            {"[SEP]", "</s>", NULL}};
    if ((unsigned)which > ATTN_TOK_SEP) return -1;
    for (int i = 0; i < 3 && names[which][i]; i++) {
        int32_t id = attn_tok_token_to_id(t, names[which][i]);
        if (id >= 0) return id;
    }
    return -1;
}

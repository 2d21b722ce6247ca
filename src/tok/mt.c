/* mt.c — translation tokenizers (attn_tok.h, "translation tokenizers"): transformers'
 * MarianTokenizer over two SentencePiece models (spm_shim.cc) and vocab.json, and
 * NllbTokenizerFast over a tokenizer.json (the attn_tok pipeline) with its language tokens. */
#include "spm_shim.h"
#include "tok-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* vocab.json and tokenizer_config.json over this size are refused. */
#define MT_MAX_JSON_BYTES ((uint64_t)256 << 20)
#define MT_MAX_SPM_BYTES ((uint64_t)1 << 30)

enum { SP_UNK, SP_EOS, SP_PAD, SP_N };

struct attn_mt_tok {
    attn_mt_tok_kind kind;
    bool cleanup; /* clean_up_tokenization_spaces */
    /* Marian */
    tok_spm *spm[2];      /* source, target */
    tok_vocab voc[2];     /* vocab.json, target_vocab.json (separate) */
    bool separate;
    char *special[SP_N];  /* unk, eos, pad strings */
    size_t special_len[SP_N];
    int32_t special_id[SP_N]; /* in vocab.json (transformers' added tokens: both sides) */
    /* NLLB */
    attn_tok *tok;
    char *src_lang, *tgt_lang;
    bool legacy;
};

static attn_status oom(const char *what) {
    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", what);
}

/* ---- files ---- */

static attn_status read_file(const char *path, uint64_t max, char **out, size_t *n) {
    *out = NULL, *n = 0;
    attn_reader r;
    attn_status st = attn_reader_open_file(path, &r);
    if (st) return st;
    if (r.size > max) {
        attn_reader_close(&r);
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: %llu bytes is too large", path,
                         (unsigned long long)r.size);
    }
    char *b = malloc((size_t)r.size + 1);
    if (!b) {
        attn_reader_close(&r);
        return oom(path);
    }
    size_t size = (size_t)r.size;
    st = size ? r.read(r.ctx, 0, b, size) : ATTN_STATUS_OK;
    attn_reader_close(&r);
    if (st) {
        free(b);
        return st;
    }
    b[size] = 0;
    *out = b, *n = size;
    return ATTN_STATUS_OK;
}

static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, name, b + 1);
    }
    return p;
}

static bool file_exists(const char *dir, const char *name) {
    char *p = path_join(dir, name);
    struct stat sb;
    bool ok = p && stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
    free(p);
    return ok;
}

/* dir/name into *out (NULL when optional and absent). */
static attn_status read_in(const char *dir, const char *name, bool optional, uint64_t max,
                           char **out, size_t *n) {
    *out = NULL, *n = 0;
    if (optional && !file_exists(dir, name)) return ATTN_STATUS_OK;
    char *p = path_join(dir, name);
    if (!p) return oom(dir);
    attn_status st = read_file(p, max, out, n);
    free(p);
    return st;
}

/* ---- tokenizer_config.json ---- */

/* A special token's string in the config: "s" or {"content": "s", ...}. */
static const char *cfg_token(json_t *root, const char *key, const char *dflt) {
    json_t *v = root ? json_object_get(root, key) : NULL;
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? json_string_value(v) : dflt;
}

static attn_status parse_config(const char *cfg, size_t n, const char *name, json_t **out) {
    *out = NULL;
    if (!cfg) return ATTN_STATUS_OK;
    json_error_t err;
    json_t *root = json_loadb(cfg, n, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &err);
    if (!root)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: line %d column %d: %s", name, err.line,
                         err.column, err.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return attn_fail(ATTN_STATUS_FORMAT, "%s: not a JSON object", name);
    }
    *out = root;
    return ATTN_STATUS_OK;
}

static attn_status cfg_bool(json_t *root, const char *key, bool dflt, const char *name, bool *v) {
    json_t *j = root ? json_object_get(root, key) : NULL;
    *v = dflt;
    if (!j || json_is_null(j)) return ATTN_STATUS_OK;
    if (!json_is_boolean(j))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: \"%s\" is not true or false", name, key);
    *v = json_is_true(j);
    return ATTN_STATUS_OK;
}

static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n), p[n] = 0;
    return p;
}

/* ---- Marian ---- */

/* {token: id} (ids non-negative and distinct, at most TOK_MAX_ID) into v. */
static attn_status vocab_load(const char *txt, size_t n, const char *name, tok_vocab *v) {
    json_error_t err;
    json_t *root = json_loadb(txt, n, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        if (strstr(err.text, "NUL") || strstr(err.text, "\\u0000"))
            return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: line %d column %d: %s", name, err.line,
                             err.column, err.text);
        return attn_fail(ATTN_STATUS_FORMAT, "%s: line %d column %d: %s", name, err.line,
                         err.column, err.text);
    }
    attn_status st = ATTN_STATUS_OK;
    if (!json_is_object(root)) {
        st = attn_fail(ATTN_STATUS_FORMAT, "%s: not a JSON object {token: id}", name);
    } else {
        st = tok_vocab_from_json(root, name, "vocab", v);
    }
    json_decref(root);
    return st;
}

static attn_status spm_load(const void *b, size_t n, const char *name, tok_spm **out) {
    char err[256];
    if (tok_spm_load(b, n, out, err, sizeof err))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s", name, err);
    return ATTN_STATUS_OK;
}

attn_status attn_mt_tok_load_marian_mem(const void *source_spm, size_t source_spm_len,
                                        const void *target_spm, size_t target_spm_len,
                                        const char *vocab, size_t vocab_len,
                                        const char *target_vocab, size_t target_vocab_len,
                                        const char *config, size_t config_len,
                                        attn_mt_tok **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_mt_tok_load: out is NULL");
    *out = NULL;
    if (!source_spm || !target_spm || !vocab)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "Marian tokenizer: source.spm, target.spm and vocab.json are needed");
    attn_mt_tok *t = calloc(1, sizeof *t);
    if (!t) return oom("Marian tokenizer");
    t->kind = ATTN_MT_TOK_MARIAN;
    json_t *cfg = NULL;
    attn_status st = parse_config(config, config_len, "tokenizer_config.json", &cfg);
    if (!st) st = cfg_bool(cfg, "separate_vocabs", false, "tokenizer_config.json", &t->separate);
    if (!st)
        st = cfg_bool(cfg, "clean_up_tokenization_spaces", false, "tokenizer_config.json",
                      &t->cleanup);
    if (!st) {
        const char *keys[SP_N] = {"unk_token", "eos_token", "pad_token"};
        const char *dflt[SP_N] = {"<unk>", "</s>", "<pad>"};
        for (int k = 0; k < SP_N && !st; k++) {
            const char *s = cfg_token(cfg, keys[k], dflt[k]);
            if (!*s) {
                st = attn_fail(ATTN_STATUS_FORMAT, "tokenizer_config.json: %s is empty", keys[k]);
            } else if (!(t->special[k] = dup_n(s, strlen(s)))) {
                st = oom("Marian tokenizer");
            } else {
                t->special_len[k] = strlen(s);
            }
        }
    }
    json_t *extra = cfg ? json_object_get(cfg, "additional_special_tokens") : NULL;
    if (!st && extra && !json_is_null(extra) && json_array_size(extra))
        st = attn_fail(ATTN_STATUS_UNSUPPORTED, "tokenizer_config.json: additional_special_tokens "
                                                "of a Marian tokenizer are not supported");
    json_decref(cfg);
    if (!st && t->separate && !target_vocab)
        st = attn_fail(ATTN_STATUS_FORMAT, "Marian tokenizer: separate_vocabs is set but there is "
                                           "no target_vocab.json");
    if (!st) st = spm_load(source_spm, source_spm_len, "source.spm", &t->spm[0]);
    if (!st) st = spm_load(target_spm, target_spm_len, "target.spm", &t->spm[1]);
    if (!st) st = vocab_load(vocab, vocab_len, "vocab.json", &t->voc[0]);
    if (!st && t->separate)
        st = vocab_load(target_vocab, target_vocab_len, "target_vocab.json", &t->voc[1]);
    for (int k = 0; k < SP_N && !st; k++) {
        t->special_id[k] = tok_vocab_find(&t->voc[0], t->special[k], t->special_len[k]);
        if (t->special_id[k] < 0) {
            char q[96];
            st = attn_fail(ATTN_STATUS_FORMAT, "vocab.json: the special token %s is missing",
                           tok_quote(q, sizeof q, t->special[k], t->special_len[k]));
        }
        if (!st && t->separate && tok_vocab_find(&t->voc[1], t->special[k], t->special_len[k]) < 0) {
            char q[96];
            st = attn_fail(ATTN_STATUS_FORMAT, "target_vocab.json: the special token %s is missing",
                           tok_quote(q, sizeof q, t->special[k], t->special_len[k]));
        }
    }
    if (st) {
        attn_mt_tok_free(t);
        return st;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

static attn_status load_marian(const char *dir, attn_mt_tok **out) {
    char *f[5] = {0};
    size_t n[5] = {0};
    static const char *names[5] = {"source.spm", "target.spm", "vocab.json", "target_vocab.json",
                                   "tokenizer_config.json"};
    attn_status st = ATTN_STATUS_OK;
    for (int i = 0; i < 5 && !st; i++)
        st = read_in(dir, names[i], i >= 3, i < 2 ? MT_MAX_SPM_BYTES : MT_MAX_JSON_BYTES, &f[i],
                     &n[i]);
    if (!st)
        st = attn_mt_tok_load_marian_mem(f[0], n[0], f[1], n[1], f[2], n[2], f[3], n[3], f[4], n[4],
                                         out);
    for (int i = 0; i < 5; i++) free(f[i]);
    if (st && *attn_last_error() && strstr(attn_last_error(), dir) == NULL) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        return attn_fail(st, "%s: %s", dir, msg);
    }
    return st;
}

/* ---- NLLB ---- */

static attn_status load_nllb(const char *dir, attn_mt_tok **out) {
    attn_mt_tok *t = calloc(1, sizeof *t);
    if (!t) return oom(dir);
    t->kind = ATTN_MT_TOK_NLLB;
    char *cfgtxt = NULL;
    size_t cfgn = 0;
    json_t *cfg = NULL;
    attn_status st = attn_tok_load(dir, &t->tok);
    if (!st) st = read_in(dir, "tokenizer_config.json", true, MT_MAX_JSON_BYTES, &cfgtxt, &cfgn);
    if (!st) st = parse_config(cfgtxt, cfgn, "tokenizer_config.json", &cfg);
    if (!st) st = cfg_bool(cfg, "legacy_behaviour", false, "tokenizer_config.json", &t->legacy);
    if (!st)
        st = cfg_bool(cfg, "clean_up_tokenization_spaces", false, "tokenizer_config.json",
                      &t->cleanup);
    if (!st) {
        const char *s = cfg_token(cfg, "src_lang", "eng_Latn");
        const char *g = cfg_token(cfg, "tgt_lang", NULL);
        if (!(t->src_lang = dup_n(s, strlen(s))) || (g && !(t->tgt_lang = dup_n(g, strlen(g)))))
            st = oom(dir);
    }
    json_decref(cfg);
    free(cfgtxt);
    int32_t id;
    if (!st) st = attn_mt_tok_lang_id(t, t->src_lang, &id);
    if (!st && t->tgt_lang) st = attn_mt_tok_lang_id(t, t->tgt_lang, &id);
    if (!st && attn_tok_token_to_id(t->tok, "</s>") < 0)
        st = attn_fail(ATTN_STATUS_FORMAT, "%s: tokenizer.json has no \"</s>\"", dir);
    if (st) {
        attn_mt_tok_free(t);
        return st;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

attn_status attn_mt_tok_load(const char *dir, attn_mt_tok **out) {
    if (!dir || !*dir || !out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_mt_tok_load: empty path or NULL out");
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return attn_fail(ATTN_STATUS_IO, "%s: not a directory", dir);
    if (file_exists(dir, "source.spm")) return load_marian(dir, out);
    if (file_exists(dir, "tokenizer.json")) return load_nllb(dir, out);
    return attn_fail(ATTN_STATUS_IO, "%s: neither source.spm (Marian) nor tokenizer.json (NLLB)",
                     dir);
}

void attn_mt_tok_free(attn_mt_tok *t) {
    if (!t) return;
    for (int i = 0; i < 2; i++) {
        tok_spm_free(t->spm[i]);
        tok_vocab_free(&t->voc[i]);
    }
    for (int k = 0; k < SP_N; k++) free(t->special[k]);
    attn_tok_free(t->tok);
    free(t->src_lang);
    free(t->tgt_lang);
    free(t);
}

attn_mt_tok_kind attn_mt_tok_kind_of(const attn_mt_tok *t) { return t ? t->kind : 0; }

/* ---- encoding ---- */

/* Python's re.match(">>.+<<", s) at s[0..n): the match's length, 0 when none. */
static size_t lang_code_at(const char *s, size_t n) {
    if (n < 5 || s[0] != '>' || s[1] != '>') return 0;
    size_t end = 2;
    while (end < n && s[end] != '\n') end++; /* '.' stops at a newline */
    for (size_t q = end >= 2 ? end - 2 : 0; q >= 3 && q + 2 <= end; q--)
        if (s[q] == '<' && s[q + 1] == '<') return q + 2;
    return 0;
}

static attn_status marian_chunk(const attn_mt_tok *t, int side, const char *s, size_t n,
                                tok_ivec *out) {
    const tok_vocab *v = &t->voc[t->separate ? side : 0];
    int32_t unk = tok_vocab_find(v, t->special[SP_UNK], t->special_len[SP_UNK]);
    size_t code = lang_code_at(s, n);
    if (code) {
        int32_t id = tok_vocab_find(v, s, code);
        if (!tok_ivec_push(out, id >= 0 ? id : unk)) return oom("encode");
    }
    /* re.sub(">>.+<<", "", s): every match removed, scanning left to right */
    tok_buf rest = {0};
    for (size_t p = 0; p < n;) {
        size_t m = lang_code_at(s + p, n - p);
        if (m) {
            p += m;
        } else {
            tok_buf_putc(&rest, s[p]);
            p++;
        }
    }
    if (rest.oom) {
        tok_buf_free(&rest);
        return oom("encode");
    }
    int32_t *ids = NULL;
    char *pieces = NULL;
    size_t *off = NULL, k = 0;
    char err[256];
    attn_status st = ATTN_STATUS_OK;
    if (tok_spm_encode(t->spm[side], rest.p ? rest.p : "", rest.n, &ids, &pieces, &off, &k, err,
                       sizeof err))
        st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s", err);
    for (size_t i = 0; i < k && !st; i++) {
        int32_t id = tok_vocab_find(v, pieces + off[i], off[i + 1] - off[i]);
        if (!tok_ivec_push(out, id >= 0 ? id : unk)) st = oom("encode");
    }
    free(ids), free(pieces), free(off);
    tok_buf_free(&rest);
    return st;
}

static attn_status marian_encode(const attn_mt_tok *t, int side, const char *text, size_t len,
                                 tok_ivec *out) {
    size_t start = 0, p = 0;
    attn_status st = ATTN_STATUS_OK;
    while (p < len && !st) {
        int hit = -1;
        size_t hl = 0;
        for (int k = 0; k < SP_N; k++)
            if (t->special_len[k] > hl && t->special_len[k] <= len - p &&
                !memcmp(text + p, t->special[k], t->special_len[k]))
                hit = k, hl = t->special_len[k];
        if (hit < 0) {
            p++;
            continue;
        }
        if (p > start) st = marian_chunk(t, side, text + start, p - start, out);
        if (!st && !tok_ivec_push(out, t->special_id[hit])) st = oom("encode");
        p += hl;
        start = p;
    }
    if (!st && len > start) st = marian_chunk(t, side, text + start, len - start, out);
    if (!st && !tok_ivec_push(out, t->special_id[SP_EOS])) st = oom("encode");
    return st;
}

static attn_status nllb_encode(const attn_mt_tok *t, const char *lang, const char *text,
                               size_t len, tok_ivec *out) {
    int32_t code, eos = attn_tok_token_to_id(t->tok, "</s>");
    attn_status st = attn_mt_tok_lang_id(t, lang, &code);
    if (st) return st;
    attn_tok_encode_params p = attn_tok_encode_default_params();
    p.add_special_tokens = false;
    attn_tok_encoding e;
    if ((st = attn_tok_encode_ex(t->tok, text, len, NULL, 0, &p, &e))) return st;
    bool ok = t->legacy || tok_ivec_push(out, code);
    for (size_t i = 0; i < e.n && ok; i++) ok = tok_ivec_push(out, e.ids[i]);
    ok = ok && tok_ivec_push(out, eos) && (!t->legacy || tok_ivec_push(out, code));
    attn_tok_encoding_free(&e);
    return ok ? ATTN_STATUS_OK : oom("encode");
}

static attn_status encode(const attn_mt_tok *t, int side, const char *lang, const char *text,
                          size_t len, int32_t **ids, size_t *n) {
    if (!t || (!text && len) || !ids || !n)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_mt_tok_encode: NULL argument");
    *ids = NULL, *n = 0;
    size_t bad = attn_tok_utf8_check(text ? text : "", len, true);
    if (bad < len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encode: invalid UTF-8 at byte %zu", bad);
    tok_ivec v = {0};
    attn_status st;
    if (t->kind == ATTN_MT_TOK_MARIAN) {
        if (lang)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "a Marian tokenizer takes no language argument (got \"%.40s\"): its "
                             "target language token is \">>xx<<\" at the start of the text",
                             lang);
        st = marian_encode(t, side, text ? text : "", len, &v);
    } else {
        if (!lang) lang = side ? t->tgt_lang : t->src_lang;
        if (!lang)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "encode target: no target language (tgt_lang) given or configured");
        st = nllb_encode(t, lang, text ? text : "", len, &v);
    }
    if (!st) {
        *ids = attn_alloc(v.n * sizeof **ids);
        if (!*ids) st = oom("encode");
        else if (v.n) memcpy(*ids, v.v, v.n * sizeof **ids);
        *n = st ? 0 : v.n;
    }
    tok_ivec_free(&v);
    return st;
}

attn_status attn_mt_tok_encode_source(const attn_mt_tok *t, const char *src_lang,
                                      const char *text, size_t len, int32_t **ids, size_t *n) {
    return encode(t, 0, src_lang, text, len, ids, n);
}

attn_status attn_mt_tok_encode_target(const attn_mt_tok *t, const char *tgt_lang,
                                      const char *text, size_t len, int32_t **ids, size_t *n) {
    return encode(t, 1, tgt_lang, text, len, ids, n);
}

/* ---- decoding ---- */

/* Python's str.isspace() of the code point. */
static bool py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* transformers' clean_up_tokenization, its replacements in order. */
static bool cleanup(tok_buf *b) {
    static const char *const rep[][2] = {{" .", "."},     {" ?", "?"},     {" !", "!"},
                                         {" ,", ","},     {" ' ", "'"},    {" n't", "n't"},
                                         {" 'm", "'m"},   {" 's", "'s"},   {" 've", "'ve"},
                                         {" 're", "'re"}};
    for (size_t r = 0; r < sizeof rep / sizeof rep[0]; r++) {
        size_t an = strlen(rep[r][0]), bn = strlen(rep[r][1]);
        tok_buf o = {0};
        for (size_t i = 0; i < b->n;) {
            if (b->n - i >= an && !memcmp(b->p + i, rep[r][0], an)) {
                tok_buf_put(&o, rep[r][1], bn);
                i += an;
            } else {
                tok_buf_putc(&o, b->p[i++]);
            }
        }
        if (o.oom) {
            tok_buf_free(&o);
            return false;
        }
        tok_buf_free(b);
        *b = o;
        if (!b->p) tok_buf_put(b, "", 0);
    }
    return !b->oom;
}

static attn_status spm_flush(const attn_mt_tok *t, const char **ps, size_t *ls, size_t *k,
                             tok_buf *out) {
    if (!*k) return ATTN_STATUS_OK;
    char *s = NULL, err[256];
    size_t n = 0;
    if (tok_spm_decode_pieces(t->spm[1], ps, ls, *k, &s, &n, err, sizeof err))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s", err);
    tok_buf_put(out, s, n);
    free(s);
    *k = 0;
    return ATTN_STATUS_OK;
}

static attn_status marian_decode(const attn_mt_tok *t, const int32_t *ids, size_t n,
                                 unsigned flags, tok_buf *out) {
    const tok_vocab *v = &t->voc[t->separate ? 1 : 0];
    const char **ps = malloc((n + 1) * sizeof *ps);
    size_t *ls = malloc((n + 1) * sizeof *ls), k = 0;
    attn_status st = ATTN_STATUS_OK;
    if (!ps || !ls) st = oom("decode");
    bool keep = flags & ATTN_TOK_DECODE_KEEP_SPECIAL;
    for (size_t i = 0; i < n && !st; i++) {
        if (ids[i] < 0 || ids[i] >= v->n) {
            st = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                           "decode: id %d is outside the vocabulary (0..%d)", ids[i], v->n - 1);
            break;
        }
        const char *s;
        size_t sl;
        int sp = -1;
        for (int q = 0; q < SP_N; q++)
            if (ids[i] == t->special_id[q]) sp = q;
        if (sp >= 0) {
            s = t->special[sp], sl = t->special_len[sp];
        } else if (v->str[ids[i]]) {
            s = v->str[ids[i]], sl = v->len[ids[i]];
        } else {
            s = t->special[SP_UNK], sl = t->special_len[SP_UNK];
        }
        /* a token whose string is a special token's is one (transformers compares strings) */
        for (int q = 0; q < SP_N && sp < 0; q++)
            if (sl == t->special_len[q] && !memcmp(s, t->special[q], sl)) sp = q;
        if (sp < 0) {
            ps[k] = s, ls[k++] = sl;
        } else if (keep) {
            if ((st = spm_flush(t, ps, ls, &k, out))) break;
            tok_buf_put(out, s, sl);
            tok_buf_putc(out, ' ');
        }
    }
    if (!st) st = spm_flush(t, ps, ls, &k, out);
    free(ps), free(ls);
    if (st) return st;
    /* "▁" -> " ", then Python's strip() */
    tok_buf o = {0};
    for (size_t i = 0; i < out->n;) {
        if (out->n - i >= 3 && !memcmp(out->p + i, "\xe2\x96\x81", 3)) {
            tok_buf_putc(&o, ' ');
            i += 3;
        } else {
            tok_buf_putc(&o, out->p[i++]);
        }
    }
    size_t a = 0, b = o.n;
    uint32_t cp;
    size_t l;
    while (a < b && (l = tok_utf8_decode((const unsigned char *)o.p + a, b - a, &cp)) &&
           py_space(cp))
        a += l;
    while (a < b) {
        size_t s0 = b - 1;
        while (s0 > a && ((unsigned char)o.p[s0] & 0xc0) == 0x80) s0--;
        l = tok_utf8_decode((const unsigned char *)o.p + s0, b - s0, &cp);
        if (!l || !py_space(cp)) break;
        b = s0;
    }
    out->n = 0;
    tok_buf_put(out, o.p ? o.p + a : "", b - a);
    bool bad = o.oom;
    tok_buf_free(&o);
    return bad || out->oom ? oom("decode") : ATTN_STATUS_OK;
}

attn_status attn_mt_tok_decode(const attn_mt_tok *t, const int32_t *ids, size_t n,
                               unsigned flags, char **text, size_t *len) {
    if (!t || (!ids && n) || !text)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_mt_tok_decode: NULL argument");
    *text = NULL;
    tok_buf b = {0};
    tok_buf_put(&b, "", 0);
    attn_status st;
    if (t->kind == ATTN_MT_TOK_MARIAN) {
        st = marian_decode(t, ids, n, flags, &b);
    } else {
        char *s = NULL;
        size_t sl = 0;
        st = attn_tok_decode_alloc(t->tok, ids, n, flags, &s, &sl);
        if (!st) tok_buf_put(&b, s, sl);
        attn_free(s);
    }
    if (!st && t->cleanup && !cleanup(&b)) st = oom("decode");
    if (!st && b.oom) st = oom("decode");
    if (!st) {
        char *s = attn_alloc(b.n + 1);
        if (!s) {
            st = oom("decode");
        } else {
            memcpy(s, b.p, b.n);
            s[b.n] = 0;
            *text = s;
            if (len) *len = b.n;
        }
    }
    tok_buf_free(&b);
    return st;
}

/* ---- accessors ---- */

attn_status attn_mt_tok_lang_id(const attn_mt_tok *t, const char *lang, int32_t *id) {
    if (!t || !lang || !id)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_mt_tok_lang_id: NULL argument");
    *id = -1;
    char q[96];
    if (t->kind == ATTN_MT_TOK_MARIAN) {
        size_t n = strlen(lang);
        if (n >= 5 && !strncmp(lang, ">>", 2) && !strcmp(lang + n - 2, "<<"))
            *id = tok_vocab_find(&t->voc[t->separate ? 1 : 0], lang, n);
        if (*id < 0)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "unknown language code %s: not a \">>xx<<\" entry of vocab.json",
                             tok_quote(q, sizeof q, lang, strlen(lang)));
        return ATTN_STATUS_OK;
    }
    int32_t k = attn_tok_token_to_id(t->tok, lang);
    if (k < 0 || !attn_tok_is_special(t->tok, k) || !strcmp(lang, "</s>") ||
        !strcmp(lang, "<s>") || !strcmp(lang, "<pad>") || !strcmp(lang, "<unk>") ||
        !strcmp(lang, "<mask>"))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "unknown language code %s: not a special token of tokenizer.json",
                         tok_quote(q, sizeof q, lang, strlen(lang)));
    *id = k;
    return ATTN_STATUS_OK;
}

int32_t attn_mt_tok_special_id(const attn_mt_tok *t, attn_tok_special which) {
    if (!t) return -1;
    if (t->kind == ATTN_MT_TOK_MARIAN) {
        switch (which) {
        case ATTN_TOK_PAD: return t->special_id[SP_PAD];
        case ATTN_TOK_UNK: return t->special_id[SP_UNK];
        case ATTN_TOK_EOS: return t->special_id[SP_EOS];
        default: return -1;
        }
    }
    switch (which) {
    case ATTN_TOK_PAD: return attn_tok_token_to_id(t->tok, "<pad>");
    case ATTN_TOK_UNK: return attn_tok_token_to_id(t->tok, "<unk>");
    case ATTN_TOK_EOS: return attn_tok_token_to_id(t->tok, "</s>");
    case ATTN_TOK_BOS: return attn_tok_token_to_id(t->tok, "<s>");
    default: return -1;
    }
}

int32_t attn_mt_tok_vocab_size(const attn_mt_tok *t, bool target) {
    if (!t) return 0;
    if (t->kind == ATTN_MT_TOK_NLLB) return attn_tok_vocab_size(t->tok);
    return t->voc[target && t->separate ? 1 : 0].n;
}

const char *attn_mt_tok_id_to_token(const attn_mt_tok *t, int32_t id, bool target) {
    if (!t) return NULL;
    if (t->kind == ATTN_MT_TOK_NLLB) return attn_tok_id_to_token(t->tok, id);
    const tok_vocab *v = &t->voc[target && t->separate ? 1 : 0];
    return id >= 0 && id < v->n ? v->str[id] : NULL;
}

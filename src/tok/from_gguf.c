/* from_gguf.c — a tokenizer from a GGUF file's tokenizer.* metadata (attn_tok_from_gguf), built as
 * the family's Hugging Face tokenizer.json is: the model (BPE, SentencePiece-style BPE with merges
 * made from the scores, or WordPiece) from the file's arrays, the pipeline around it per
 * tokenizer.ggml.model and tokenizer.ggml.pre. include/attn_tok.h lists what is read and how each
 * family is built; docs/gguf.md says why.
 *
 * The pipeline (normalizer, pre-tokenizer, post-processor, decoder, added tokens) is written as
 * the JSON a tokenizer.json would hold and parsed by the same code (tok_from_json_model), so a GGUF
 * tokenizer is exactly a tokenizer.json tokenizer; only the model is built here, from the arrays,
 * without a detour through JSON (jansson cannot hold the 400k strings cheaply, nor a NUL). */
#include "tok-impl.h"
#include "attn_gguf.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GGUF token types (llama.cpp's llama_token_type). */
enum {
    TT_UNDEFINED = 0,
    TT_NORMAL = 1,
    TT_UNKNOWN = 2,
    TT_CONTROL = 3,
    TT_USER_DEFINED = 4,
    TT_UNUSED = 5,
    TT_BYTE = 6
};

/* The pre-tokenizer patterns of the byte-level families (their tokenizer.json's Split regexes). */
static const char LLAMA3_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char TEKKEN_PATTERN[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* tokenizer.ggml.pre values of tokenizer.ggml.model "gpt2" and the family each is built as. */
typedef enum { PRE_LLAMA3, PRE_QWEN2, PRE_SMOLLM, PRE_GPT2, PRE_TEKKEN } pre_kind;
static const struct {
    const char *name;
    pre_kind kind;
} PRES[] = {{"llama-bpe", PRE_LLAMA3}, {"llama3", PRE_LLAMA3}, {"llama-v3", PRE_LLAMA3},
            {"qwen2", PRE_QWEN2},      {"smollm", PRE_SMOLLM}, {"gpt-2", PRE_GPT2},
            {"tekken", PRE_TEKKEN}};
#define N_PRES (sizeof PRES / sizeof PRES[0])

typedef struct {
    const attn_gguf *g;
    const char *name; /* the file */
    const attn_gguf_str *tok; /* (n) */
    const int32_t *type;      /* (n) or NULL: all normal */
    const float *score;       /* (n) or NULL */
    int32_t n;
    bool *dropped;    /* (n) padding entries "[PAD<id>]" left out */
    int32_t n_model;  /* ids [0, n_model) form the model's vocabulary */
} gguf_vocab;

static attn_status oom(const char *name) {
    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
}

static int32_t type_of(const gguf_vocab *v, int32_t i) {
    return v->type ? v->type[i] : TT_NORMAL;
}

/* "[PAD<i>]": the padding convert_hf_to_gguf.py adds up to the model's embedding rows; no token of
 * the real tokenizer.json (Qwen2's [PAD151646]..., Phi-3's [PAD32011]...). */
static bool is_padding(const gguf_vocab *v, int32_t i) {
    char want[24];
    int k = snprintf(want, sizeof want, "[PAD%ld]", (long)i);
    return type_of(v, i) != TT_NORMAL && v->tok[i].len == (uint64_t)k &&
           !memcmp(v->tok[i].s, want, (size_t)k);
}

/* The arrays: tokens (strings without NUL, valid UTF-8), token_type and scores when present, both
 * as long as tokens. */
static attn_status read_vocab(const attn_gguf *g, bool need_scores, gguf_vocab *v) {
    const char *name = attn_gguf_name(g);
    const void *p;
    uint64_t n, m;
    ATTN_TRY(attn_gguf_get_arr(g, "tokenizer.ggml.tokens", ATTN_GGUF_TYPE_STRING, &p, &n));
    if (n == 0)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tokenizer.ggml.tokens is empty", name);
    if (n > (uint64_t)TOK_MAX_ID + 1)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: tokenizer.ggml.tokens has %llu tokens (max %ld)",
                         name, (unsigned long long)n, (long)TOK_MAX_ID + 1);
    v->tok = p;
    v->n = (int32_t)n;
    for (int32_t i = 0; i < v->n; i++) {
        char path[64];
        snprintf(path, sizeof path, "tokenizer.ggml.tokens[%ld]", (long)i);
        ATTN_TRY(tok_no_nul(v->tok[i].s, (size_t)v->tok[i].len, name, path));
        size_t bad = tok_utf8_check(v->tok[i].s, (size_t)v->tok[i].len);
        if (bad != v->tok[i].len)
            return attn_fail(ATTN_STATUS_FORMAT, "%s: %s is not valid UTF-8 (byte %zu is 0x%02x)",
                             name, path, bad, (unsigned char)v->tok[i].s[bad]);
    }
    if (attn_gguf_find(g, "tokenizer.ggml.token_type")) {
        ATTN_TRY(attn_gguf_get_arr(g, "tokenizer.ggml.token_type", ATTN_GGUF_TYPE_INT32, &p, &m));
        if (m != n)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: tokenizer.ggml.token_type has %llu entries, tokens %llu", name,
                             (unsigned long long)m, (unsigned long long)n);
        v->type = p;
        for (int32_t i = 0; i < v->n; i++)
            if (v->type[i] < TT_UNDEFINED || v->type[i] > TT_BYTE)
                return attn_fail(ATTN_STATUS_FORMAT,
                                 "%s: tokenizer.ggml.token_type[%ld] is %ld, expected 0..6", name,
                                 (long)i, (long)v->type[i]);
    }
    if (need_scores) {
        ATTN_TRY(attn_gguf_get_arr(g, "tokenizer.ggml.scores", ATTN_GGUF_TYPE_FLOAT32, &p, &m));
        if (m != n)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: tokenizer.ggml.scores has %llu entries, tokens %llu", name,
                             (unsigned long long)m, (unsigned long long)n);
        v->score = p;
        for (int32_t i = 0; i < v->n; i++)
            if (isnan(v->score[i]))
                return attn_fail(ATTN_STATUS_FORMAT, "%s: tokenizer.ggml.scores[%ld] is NaN",
                                 name, (long)i);
    }
    v->dropped = calloc((size_t)v->n, sizeof *v->dropped);
    if (!v->dropped) return oom(name);
    /* the model's vocabulary ends with its last normal (or byte, unused) token: SentencePiece
     * and BPE vocabularies put their own control tokens first, and the tokens after them come
     * from added_tokens (Llama 3's, Qwen2's and Phi-3's specials) */
    v->n_model = 0;
    for (int32_t i = 0; i < v->n; i++) {
        int32_t t = type_of(v, i);
        v->dropped[i] = is_padding(v, i);
        if (t == TT_NORMAL || t == TT_UNDEFINED || t == TT_UNUSED || t == TT_BYTE) v->n_model = i + 1;
    }
    return ATTN_STATUS_OK;
}

/* A special token id key: absent -> -1; else it must name a token. */
static attn_status special_id(const gguf_vocab *v, const char *key, int32_t *out) {
    *out = -1;
    if (!attn_gguf_find(v->g, key)) return ATTN_STATUS_OK;
    int64_t id;
    ATTN_TRY(attn_gguf_get_int(v->g, key, &id));
    if (id < 0 || id >= v->n)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s is %lld, not a token id (0..%ld)", v->name,
                         key, (long long)id, (long)v->n - 1);
    if (v->dropped[id])
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s is %lld, a padding entry (%s) that is no token",
                         v->name, key, (long long)id, v->tok[id].s);
    *out = (int32_t)id;
    return ATTN_STATUS_OK;
}

static attn_status opt_bool(const attn_gguf *g, const char *key, bool dflt, bool *out) {
    *out = dflt;
    if (!attn_gguf_find(g, key)) return ATTN_STATUS_OK;
    return attn_gguf_get_bool(g, key, out);
}

/* The model's vocabulary: ids [0, n_model), padding left out; wordpiece: llama.cpp's phantom-space
 * spelling undone ("▁x" -> "x", "x" -> "##x", "[X]" as it is). */
static attn_status build_vocab(const gguf_vocab *v, bool wordpiece, tok_vocab *out) {
    ATTN_TRY(tok_vocab_init(out, v->n_model));
    tok_buf b = {0};
    attn_status s = ATTN_STATUS_OK;
    for (int32_t i = 0; i < v->n_model && !s; i++) {
        if (v->dropped[i]) continue;
        const char *str = v->tok[i].s;
        size_t len = (size_t)v->tok[i].len;
        if (wordpiece) {
            b.n = 0;
            if (len >= 3 && !memcmp(str, "\xe2\x96\x81", 3)) {
                tok_buf_put(&b, str + 3, len - 3);
            } else if (len >= 2 && str[0] == '[' && str[len - 1] == ']') {
                tok_buf_put(&b, str, len);
            } else {
                tok_buf_put(&b, "##", 2);
                tok_buf_put(&b, str, len);
            }
            if (b.oom) {
                s = oom(v->name);
                break;
            }
            str = b.p ? b.p : "";
            len = b.n;
        }
        int r = tok_vocab_set(out, i, str, len);
        if (r == 2) {
            char q[64];
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: tokenizer.ggml.tokens[%ld] %s is token %ld already%s", v->name,
                          (long)i, tok_quote(q, sizeof q, str, len),
                          (long)tok_vocab_find(out, str, len),
                          wordpiece ? " (in WordPiece's spelling)" : "");
        } else if (r) {
            s = oom(v->name);
        }
    }
    tok_buf_free(&b);
    if (s) tok_vocab_free(out);
    return s;
}

/* ---- SentencePiece: merges from the scores ---- */

typedef struct {
    int32_t a, b; /* the two halves */
    float score;  /* of the piece they make */
    uint32_t la, lb; /* their lengths in characters */
    uint32_t order;  /* position before sorting: Python's sort is stable */
} spm_merge;

static int spm_cmp(const void *x, const void *y) {
    const spm_merge *p = x, *q = y;
    if (p->score != q->score) return p->score > q->score ? -1 : 1;
    if (p->la != q->la) return p->la > q->la ? -1 : 1;
    if (p->lb != q->lb) return p->lb > q->lb ? -1 : 1;
    return p->order < q->order ? -1 : p->order > q->order;
}

static int pair_cmp(const void *x, const void *y) {
    const spm_merge *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    return p->b < q->b ? -1 : p->b > q->b;
}

static uint32_t utf8_chars(const char *s, size_t n) {
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

/* transformers' generate_merges(vocab, vocab_scores), as LlamaConverter turns a SentencePiece
 * BPE model into tokenizers' BPE: for each piece in id order, every split into two pieces of the
 * vocabulary (sorted by their ids), then all of them sorted by the piece's score, the left and the
 * right half's lengths in characters, each descending, ties in that order. The first three pieces
 * count with score 0 (LlamaConverter's vocab()). */
static attn_status spm_merges(const gguf_vocab *v, const tok_vocab *V, int32_t **out, size_t *n_out) {
    size_t n = 0, cap = 1024;
    spm_merge *m = malloc(cap * sizeof *m);
    if (!m) return oom(v->name);
    for (int32_t i = 0; i < V->n; i++) {
        const char *s = V->str[i];
        if (!s) continue;
        size_t len = V->len[i], first = n;
        float score = i < 3 ? 0.0f : v->score[i];
        for (size_t k = 1; k < len; k++) {
            if (((unsigned char)s[k] & 0xc0) == 0x80) continue; /* inside a character */
            int32_t a = tok_vocab_find(V, s, k), b = tok_vocab_find(V, s + k, len - k);
            if (a < 0 || b < 0) continue;
            if (n == cap) {
                spm_merge *p = realloc(m, 2 * cap * sizeof *m);
                if (!p) {
                    free(m);
                    return oom(v->name);
                }
                m = p, cap *= 2;
            }
            m[n++] = (spm_merge){a, b, score, utf8_chars(s, k), utf8_chars(s + k, len - k), 0};
        }
        qsort(m + first, n - first, sizeof *m, pair_cmp);
    }
    for (size_t i = 0; i < n; i++) m[i].order = (uint32_t)i;
    qsort(m, n, sizeof *m, spm_cmp);
    int32_t *pairs = malloc((n ? n : 1) * 2 * sizeof *pairs);
    if (!pairs) {
        free(m);
        return oom(v->name);
    }
    for (size_t i = 0; i < n; i++) pairs[2 * i] = m[i].a, pairs[2 * i + 1] = m[i].b;
    free(m);
    *out = pairs;
    *n_out = n;
    return ATTN_STATUS_OK;
}

/* ---- BPE merges "A B" ---- */

static attn_status gguf_merges(const gguf_vocab *v, const tok_vocab *V, int32_t **out,
                               size_t *n_out) {
    const void *p;
    uint64_t n;
    ATTN_TRY(attn_gguf_get_arr(v->g, "tokenizer.ggml.merges", ATTN_GGUF_TYPE_STRING, &p, &n));
    if (n > (uint64_t)SIZE_MAX / (2 * sizeof(int32_t)))
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: too many merges", v->name);
    const attn_gguf_str *ms = p;
    int32_t *pairs = malloc((n ? (size_t)n : 1) * 2 * sizeof *pairs);
    if (!pairs) return oom(v->name);
    for (uint64_t r = 0; r < n; r++) {
        const char *s = ms[r].s;
        size_t len = (size_t)ms[r].len;
        /* split at the first space after the first byte, as llama.cpp does */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        char q[64];
        if (!sp) {
            free(pairs);
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: tokenizer.ggml.merges[%llu] %s is not two tokens joined by a "
                             "space",
                             v->name, (unsigned long long)r, tok_quote(q, sizeof q, s, len));
        }
        size_t la = (size_t)(sp - s);
        int32_t a = tok_vocab_find(V, s, la), b = tok_vocab_find(V, sp + 1, len - la - 1);
        if (a < 0 || b < 0) {
            free(pairs);
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: tokenizer.ggml.merges[%llu]: token %s is not in the vocabulary",
                             v->name, (unsigned long long)r,
                             a < 0 ? tok_quote(q, sizeof q, s, la)
                                   : tok_quote(q, sizeof q, sp + 1, len - la - 1));
        }
        pairs[2 * r] = a, pairs[2 * r + 1] = b;
    }
    *out = pairs;
    *n_out = (size_t)n;
    return ATTN_STATUS_OK;
}

/* ---- the pipeline as tokenizer.json ---- */

static json_t *byte_level(bool prefix, bool trim, bool regex) {
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", prefix,
                     "trim_offsets", trim, "use_regex", regex);
}

static json_t *split_regex(const char *pattern) {
    return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", pattern,
                     "behavior", "Isolated", "invert", 0);
}

static json_t *str_n(const char *s, size_t n) { return json_stringn(s, n); }

/* TemplateProcessing: [bos] $A [eos], and for pairs [bos] $A [eos] [bos]:1 $B:1 [eos]:1, as
 * transformers' LlamaTokenizerFast.update_post_processor and the families' files. */
static json_t *template(const gguf_vocab *v, int32_t first, int32_t last) {
    json_t *single = json_array(), *pair = json_array(), *sp = json_object();
    for (int half = 0; half < 2; half++) {
        json_t *arr = half ? pair : single;
        for (int seg = 0; seg <= half; seg++) {
            if (first >= 0)
                json_array_append_new(arr, json_pack("{s:{s:s%, s:i}}", "SpecialToken", "id",
                                                     v->tok[first].s, (size_t)v->tok[first].len,
                                                     "type_id", seg));
            json_array_append_new(arr, json_pack("{s:{s:s, s:i}}", "Sequence", "id",
                                                 seg ? "B" : "A", "type_id", seg));
            if (last >= 0)
                json_array_append_new(arr, json_pack("{s:{s:s%, s:i}}", "SpecialToken", "id",
                                                     v->tok[last].s, (size_t)v->tok[last].len,
                                                     "type_id", seg));
        }
    }
    int32_t ids[2] = {first, last};
    for (int k = 0; k < 2; k++)
        if (ids[k] >= 0) {
            const attn_gguf_str *t = &v->tok[ids[k]];
            json_t *e = json_pack("{s:s%, s:[i], s:[o]}", "id", t->s, (size_t)t->len, "ids",
                                  ids[k], "tokens", str_n(t->s, (size_t)t->len));
            /* keys are C strings: tokens hold no NUL (read_vocab) */
            if (e) json_object_set_new(sp, t->s, e);
        }
    return json_pack("{s:s, s:o, s:o, s:o}", "type", "TemplateProcessing", "single", single,
                     "pair", pair, "special_tokens", sp);
}

static bool name_has_phi3(const attn_gguf *g) {
    const char *arch = NULL, *nm = NULL;
    if (attn_gguf_find(g, "general.architecture"))
        attn_gguf_get_str(g, "general.architecture", &arch, NULL);
    if (arch && !strcmp(arch, "phi3")) return true;
    if (!attn_gguf_find(g, "general.name") || attn_gguf_get_str(g, "general.name", &nm, NULL))
        return false;
    char low[128];
    size_t k = 0;
    for (; nm[k] && k + 1 < sizeof low; k++) low[k] = (char)tolower((unsigned char)nm[k]);
    low[k] = '\0';
    return strstr(low, "phi3") || strstr(low, "phi-3");
}

/* The added tokens: control, unknown and user-defined tokens (user-defined ones not special),
 * matched in the raw text. Phi-3 (general.architecture phi3 or a general.name with phi3 / phi-3,
 * as llama.cpp decides): every one takes the whitespace after it (rstrip) except <unk>, <s> and
 * <|endoftext|>, as Phi-3's tokenizer.json says. */
static json_t *added_tokens(const gguf_vocab *v) {
    json_t *list = json_array();
    bool phi3 = name_has_phi3(v->g);
    for (int32_t i = 0; list && i < v->n; i++) {
        int32_t t = type_of(v, i);
        if (v->dropped[i] || (t != TT_CONTROL && t != TT_UNKNOWN && t != TT_USER_DEFINED &&
                              i < v->n_model))
            continue;
        const char *s = v->tok[i].s;
        bool rstrip = phi3 && strcmp(s, "<unk>") && strcmp(s, "<s>") && strcmp(s, "<|endoftext|>");
        json_array_append_new(list, json_pack("{s:i, s:s%, s:b, s:b, s:b, s:b, s:b}", "id", i,
                                              "content", s, (size_t)v->tok[i].len, "single_word", 0,
                                              "lstrip", 0, "rstrip", rstrip, "normalized", 0,
                                              "special", t != TT_USER_DEFINED));
    }
    return list;
}

attn_status attn_tok_from_gguf(const attn_gguf *g, attn_tok **out, attn_tok_gguf_info *info) {
    if (!g || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_tok_from_gguf: NULL argument");
    *out = NULL;
    const char *name = attn_gguf_name(g);
    if (info) {
        memset(info, 0, sizeof *info);
        info->bos_id = info->eos_id = info->unk_id = info->pad_id = info->sep_id = info->cls_id =
            info->mask_id = info->eot_id = -1;
    }
    const char *model = NULL, *pre = NULL;
    ATTN_TRY(attn_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL));
    bool bpe = !strcmp(model, "gpt2"), spm = !strcmp(model, "llama"), wpm = !strcmp(model, "bert");
    char q[64];
    if (!bpe && !spm && !wpm)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: tokenizer.ggml.model %s is not supported (gpt2, llama, bert)", name,
                         tok_quote(q, sizeof q, model, strlen(model)));
    if (attn_gguf_find(g, "tokenizer.ggml.pre"))
        ATTN_TRY(attn_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL));
    pre_kind pk = PRE_GPT2;
    if (bpe) {
        size_t k = 0;
        while (k < N_PRES && !(pre && !strcmp(pre, PRES[k].name))) k++;
        if (k == N_PRES)
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: tokenizer.ggml.pre %s is not supported with model gpt2 "
                             "(llama-bpe, llama3, llama-v3, qwen2, smollm, gpt-2, tekken)",
                             name, pre ? tok_quote(q, sizeof q, pre, strlen(pre)) : "(absent)");
        pk = PRES[k].kind;
    }
    gguf_vocab v = {g, name, NULL, NULL, NULL, 0, NULL, 0};
    attn_status s = read_vocab(g, spm, &v);
    int32_t bos = -1, eos = -1, unk = -1, pad = -1, sep = -1, cls = -1, mask = -1, eot = -1;
    bool add_bos = false, add_eos = false, add_space = true;
    if (!s) s = special_id(&v, "tokenizer.ggml.bos_token_id", &bos);
    if (!s) s = special_id(&v, "tokenizer.ggml.eos_token_id", &eos);
    if (!s) s = special_id(&v, "tokenizer.ggml.unknown_token_id", &unk);
    if (!s) s = special_id(&v, "tokenizer.ggml.padding_token_id", &pad);
    if (!s) s = special_id(&v, "tokenizer.ggml.seperator_token_id", &sep);
    if (!s && sep < 0) s = special_id(&v, "tokenizer.ggml.separator_token_id", &sep);
    if (!s) s = special_id(&v, "tokenizer.ggml.cls_token_id", &cls);
    if (!s) s = special_id(&v, "tokenizer.ggml.mask_token_id", &mask);
    if (!s) s = special_id(&v, "tokenizer.ggml.eot_token_id", &eot);
    /* llama.cpp's defaults: SentencePiece adds <s>; of the BPE families Llama 3 adds its
     * <|begin_of_text|>; BERT always [CLS] ... [SEP] */
    if (!s) s = opt_bool(g, "tokenizer.ggml.add_bos_token", spm || (bpe && pk == PRE_LLAMA3), &add_bos);
    if (!s) s = opt_bool(g, "tokenizer.ggml.add_eos_token", false, &add_eos);
    if (!s) s = opt_bool(g, "tokenizer.ggml.add_space_prefix", true, &add_space);
    if (s) {
        free(v.dropped);
        return s;
    }
    if (wpm) {
        if (cls < 0) cls = bos;
        if (sep < 0) sep = eos;
        if (cls < 0 || sep < 0) {
            free(v.dropped);
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: a bert tokenizer needs tokenizer.ggml.cls_token_id (or "
                             "bos_token_id) and seperator_token_id (or eos_token_id)",
                             name);
        }
    } else if ((add_bos && bos < 0) || (add_eos && eos < 0)) {
        free(v.dropped);
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tokenizer.ggml.add_%s_token is true but "
                         "tokenizer.ggml.%s_token_id is absent",
                         name, add_bos && bos < 0 ? "bos" : "eos", add_bos && bos < 0 ? "bos" : "eos");
    }
    if (spm && unk < 0) unk = 0; /* LlamaConverter: the unknown piece is id 0 */

    /* the model */
    tok_vocab V;
    tok_model *m = NULL;
    int32_t *merges = NULL;
    size_t n_merges = 0;
    for (int32_t i = 0; !s && i < v.n; i++) {
        int32_t t = type_of(&v, i);
        if (!v.tok[i].len && !v.dropped[i] &&
            (t == TT_CONTROL || t == TT_UNKNOWN || t == TT_USER_DEFINED || i >= v.n_model))
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: tokenizer.ggml.tokens[%ld] is empty, and an added token (type %ld) "
                          "needs text",
                          name, (long)i, (long)t);
    }
    if (!s) s = build_vocab(&v, wpm, &V);
    if (!s && wpm) {
        s = tok_wordpiece_from_parts(&V, unk >= 0 ? v.tok[unk].s : "[UNK]", 100, name, &m);
    } else if (!s) {
        s = spm ? spm_merges(&v, &V, &merges, &n_merges) : gguf_merges(&v, &V, &merges, &n_merges);
        tok_bpe_options o = {spm, spm, bpe && (pk == PRE_LLAMA3 || pk == PRE_TEKKEN), NULL};
        if (spm && unk >= 0) o.unk_token = v.tok[unk].s;
        if (s) tok_vocab_free(&V);
        else s = tok_bpe_from_parts(&V, merges, n_merges, &o, &m);
        if (s == ATTN_STATUS_FORMAT) { /* a merge whose two halves make no token */
            char why[256];
            snprintf(why, sizeof why, "%s", attn_last_error());
            const char *w = strstr(why, "merges[");
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: tokenizer.ggml.%s", name, w ? w : why);
        }
        free(merges);
    }
    if (s) {
        free(v.dropped);
        return s;
    }

    /* the pipeline */
    json_t *root = json_object(), *norm = json_null(), *pret = json_null(), *post = json_null(),
           *dec = json_null();
    if (bpe) {
        switch (pk) {
        case PRE_LLAMA3:
        case PRE_QWEN2:
        case PRE_TEKKEN:
            pret = json_pack("{s:s, s:[o, o]}", "type", "Sequence", "pretokenizers",
                             split_regex(pk == PRE_LLAMA3  ? LLAMA3_PATTERN
                                         : pk == PRE_QWEN2 ? QWEN2_PATTERN
                                                           : TEKKEN_PATTERN),
                             byte_level(false, true, false));
            break;
        case PRE_SMOLLM:
            pret = json_pack("{s:s, s:[{s:s, s:b}, o]}", "type", "Sequence", "pretokenizers",
                             "type", "Digits", "individual_digits", 1,
                             byte_level(false, true, true));
            break;
        case PRE_GPT2: pret = byte_level(false, true, true); break;
        }
        if (pk == PRE_QWEN2) norm = json_pack("{s:s}", "type", "NFC");
        dec = byte_level(true, true, true);
        post = byte_level(true, false, true);
        if (add_bos || add_eos)
            post = json_pack("{s:s, s:[o, o]}", "type", "Sequence", "processors", post,
                             template(&v, add_bos ? bos : -1, add_eos ? eos : -1));
    } else if (spm) {
        /* LlamaConverter, legacy (the Prepend normalizer applies to each piece between added
         * tokens, which is what llama.cpp does too) */
        json_t *steps = json_array();
        if (add_space) json_array_append_new(steps, json_pack("{s:s, s:s}", "type", "Prepend", "prepend", "\xe2\x96\x81"));
        json_array_append_new(steps, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern",
                                               "String", " ", "content", "\xe2\x96\x81"));
        norm = json_pack("{s:s, s:o}", "type", "Sequence", "normalizers", steps);
        json_t *ds = json_pack("[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}]", "type", "Replace", "pattern",
                               "String", "\xe2\x96\x81", "content", " ", "type", "ByteFallback",
                               "type", "Fuse");
        if (add_space && ds)
            json_array_append_new(ds, json_pack("{s:s, s:s, s:i, s:i}", "type", "Strip", "content",
                                                " ", "start", 1, "stop", 0));
        dec = json_pack("{s:s, s:o}", "type", "Sequence", "decoders", ds);
        if (add_bos || add_eos) post = template(&v, add_bos ? bos : -1, add_eos ? eos : -1);
    } else {
        norm = json_pack("{s:s, s:b, s:b, s:n, s:b}", "type", "BertNormalizer", "clean_text", 1,
                         "handle_chinese_chars", 1, "strip_accents", "lowercase", 1);
        pret = json_pack("{s:s}", "type", "BertPreTokenizer");
        dec = json_pack("{s:s, s:s, s:b}", "type", "WordPiece", "prefix", "##", "cleanup", 1);
        post = template(&v, cls, sep);
    }
    json_t *added = added_tokens(&v);
    if (!root || !norm || !pret || !post || !dec || !added ||
        json_object_set_new(root, "normalizer", norm) ||
        json_object_set_new(root, "pre_tokenizer", pret) ||
        json_object_set_new(root, "post_processor", post) ||
        json_object_set_new(root, "decoder", dec) ||
        json_object_set_new(root, "added_tokens", added)) {
        json_decref(root);
        m->destroy(m);
        free(v.dropped);
        return oom(name);
    }
    attn_tok *t = NULL;
    s = tok_from_json_model(root, m, name, &t);
    json_decref(root);
    free(v.dropped);
    if (s) return s;
    int32_t ids[7] = {pad, unk, bos, eos, mask, wpm ? cls : bos, wpm ? sep : eos};
    memcpy(t->special_ids, ids, sizeof ids);
    t->has_special_ids = true;
    if (info) {
        info->bos_id = bos, info->eos_id = eos, info->unk_id = unk, info->pad_id = pad;
        info->sep_id = sep, info->cls_id = cls, info->mask_id = mask, info->eot_id = eot;
        info->add_bos = wpm || add_bos;
        info->add_eos = wpm || add_eos;
        info->model = model;
        info->pre = pre;
        info->chat_template = NULL;
        if (attn_gguf_find(g, "tokenizer.chat_template") &&
            (s = attn_gguf_get_str(g, "tokenizer.chat_template", &info->chat_template,
                                   &info->chat_template_len))) {
            attn_tok_free(t);
            return s;
        }
    }
    *out = t;
    return ATTN_STATUS_OK;
}

/* hf_translator.c — a Hugging Face translation directory (Marian, M2M100 / NLLB, attn export's)
 * text in and text out: its tokenizer (attn_mt_tok, or a plain tokenizer.json), the language
 * tokens, attn_hf_generate with generation_config.json's defaults, and the decoding back to text.
 * What `attn translate --model DIR`, `attn attention` / `attn explain --model` and the Python
 * package share (attn_infer.h). */
#include "attn_infer.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct attn_hf_translator {
    const attn_encdec_model *m;
    attn_hf_generate_options o;
    attn_mt_tok *mt;     /* Marian / NLLB tokenizer */
    attn_tok *tok;       /* or a plain tokenizer.json (attn export) */
    char *src_lang;      /* NLLB's source code, or NULL */
    int32_t lang_prefix; /* Marian: the target language token put before the source, or -1 */
    int32_t cfg_forced_bos; /* generation_config.json's forced_bos_token_id (-1: none) */
    attn_translate_session *s;
    int max_sentences;
    int max_out; /* max_length: tokens after the decoder start, </s> included */
};

attn_hf_translator_params attn_hf_translator_default_params(void) {
    attn_hf_translator_params p;
    memset(&p, 0, sizeof p);
    p.max_sentences = 32;
    p.length_penalty = NAN;
    p.early_stopping = -1;
    p.need_tokenizer = true;
    return p;
}

/* A tokenizer_config.json naming an NLLB / M2M100 tokenizer class (else a plain tokenizer.json
 * is read as the `tokenizers` library reads it). */
static bool nllb_class(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_t *j = json_load_file(path, JSON_DECODE_INT_AS_REAL, NULL); /* model_max_length 1e30 */
    const char *c = j ? json_string_value(json_object_get(j, "tokenizer_class")) : NULL;
    const bool yes = c && (strncmp(c, "Nllb", 4) == 0 || strncmp(c, "M2M100", 6) == 0);
    json_decref(j);
    return yes;
}

static attn_status load_tokenizer(attn_hf_translator *t, const char *dir, bool need) {
    char path[4200];
    snprintf(path, sizeof path, "%s/source.spm", dir);
    const bool marian = access(path, R_OK) == 0;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    const bool tj = access(path, R_OK) == 0;
    if (marian || (tj && nllb_class(dir))) return attn_mt_tok_load(dir, &t->mt);
    if (tj) return attn_tok_load(dir, &t->tok);
    if (!need) return ATTN_STATUS_OK;
    return attn_set_error(ATTN_STATUS_IO,
                          "%s: no tokenizer (source.spm or tokenizer.json); give token ids "
                          "(--ids)",
                          dir);
}

static attn_status setup(attn_hf_translator *t, const char *dir, const attn_hf_translator_params *p) {
    attn_status s = attn_hf_generate_config_load(dir, &t->o);
    if (!s) s = load_tokenizer(t, dir, p->need_tokenizer);
    if (s && !p->need_tokenizer) { /* optional (ids): labels when there is one */
        attn_clear_error();
        s = ATTN_STATUS_OK;
    }
    if (s) return s;
    t->lang_prefix = -1;
    t->cfg_forced_bos = t->o.forced_bos_token_id;
    if ((s = attn_hf_translator_set_langs(t, p->src_lang, p->tgt_lang))) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        return attn_set_error(s, "%s: %s", dir, msg);
    }
    if (p->num_beams > 0) t->o.num_beams = p->num_beams;
    if (p->max_new_tokens > 0) t->o.max_new_tokens = p->max_new_tokens;
    if (!isnan(p->length_penalty)) t->o.length_penalty = p->length_penalty;
    if (p->early_stopping >= 0) t->o.early_stopping = (attn_hf_early_stopping)p->early_stopping;
    const int ml = t->o.max_new_tokens > 0 ? 1 + t->o.max_new_tokens : t->o.max_length;
    if (ml < 2 || ml > t->m->cfg.max_len + 1)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: max_length %d (generation_config.json or --max-tokens) must be "
                              "2 to the model's %d positions + 1",
                              dir, ml, t->m->cfg.max_len);
    t->max_out = ml;
    t->max_sentences = p->max_sentences;
    return attn_translate_session_init(t->m, p->max_sentences, t->o.num_beams, t->m->cfg.max_len,
                                       ml - 1, &t->s);
}

attn_status attn_hf_translator_check_langs(const attn_hf_translator *t, const char *src_lang,
                                           const char *tgt_lang, int32_t *tgt_id) {
    if (!t) return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "attn_hf_translator_check_langs: NULL");
    if (tgt_id) *tgt_id = -1;
    if ((src_lang || tgt_lang) && !t->mt)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "a source or target language needs a Marian or NLLB tokenizer "
                              "(source.spm, or tokenizer.json with an NLLB tokenizer_config.json)");
    const bool nllb = t->mt && attn_mt_tok_kind_of(t->mt) == ATTN_MT_TOK_NLLB;
    if (src_lang && !nllb)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "--src-lang: a Marian model has no source language token "
                              "(--tgt-lang puts its >>lang<< token first)");
    attn_status s;
    int32_t id;
    if (src_lang && (s = attn_mt_tok_lang_id(t->mt, src_lang, &id))) return s;
    if (tgt_lang) {
        char wrapped[300]; /* Marian's token of cmn_Hans is ">>cmn_Hans<<" */
        const char *lang = tgt_lang;
        if (!nllb && strncmp(lang, ">>", 2) != 0 && strlen(lang) < sizeof wrapped - 5)
            snprintf(wrapped, sizeof wrapped, ">>%s<<", lang), lang = wrapped;
        if ((s = attn_mt_tok_lang_id(t->mt, lang, &id))) return s;
        if (tgt_id) *tgt_id = id;
    }
    return ATTN_STATUS_OK;
}

attn_status attn_hf_translator_set_langs(attn_hf_translator *t, const char *src_lang,
                                         const char *tgt_lang) {
    int32_t tgt_id;
    const attn_status s = attn_hf_translator_check_langs(t, src_lang, tgt_lang, &tgt_id);
    if (s) return s;
    const bool nllb = attn_mt_tok_kind_of(t->mt) == ATTN_MT_TOK_NLLB;
    char *src_copy = NULL;
    if (src_lang && !(src_copy = strdup(src_lang)))
        return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    free(t->src_lang);
    t->src_lang = src_copy;
    t->o.forced_bos_token_id = nllb && tgt_id >= 0 ? tgt_id : t->cfg_forced_bos;
    t->lang_prefix = !nllb ? tgt_id : -1;
    return ATTN_STATUS_OK;
}

attn_status attn_hf_translator_init(const attn_encdec_model *m, const char *dir,
                                    const attn_hf_translator_params *p, attn_hf_translator **out) {
    if (!out) return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "attn_hf_translator_init: NULL out");
    *out = NULL;
    if (!m || !dir || !p)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "attn_hf_translator_init: NULL argument");
    if (m->cfg.arch == ATTN_ENCDEC_ARCH_ATTN)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: attn's own translator, not a Hugging Face directory (use "
                              "attn_translate)",
                              dir);
    if (p->max_sentences < 1 || p->max_sentences > 4096 || p->num_beams < 0 ||
        p->num_beams > 256 || p->early_stopping < -1 || p->early_stopping > ATTN_HF_EARLY_NEVER ||
        !(isnan(p->length_penalty) || isfinite(p->length_penalty)))
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "attn_hf_translator_init: max_sentences needs 1 to 4096, num_beams "
                              "0 to 256, early_stopping -1 to %d, length_penalty a number or NaN",
                              ATTN_HF_EARLY_NEVER);
    attn_hf_translator *t = calloc(1, sizeof *t);
    if (!t) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    t->m = m;
    attn_status s = setup(t, dir, p);
    if (s) {
        attn_hf_translator_free(t);
        return s;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

void attn_hf_translator_free(attn_hf_translator *t) {
    if (!t) return;
    attn_translate_session_free(t->s);
    attn_mt_tok_free(t->mt);
    attn_tok_free(t->tok);
    free(t->src_lang);
    free(t);
}

const attn_hf_generate_options *attn_hf_translator_options(const attn_hf_translator *t) {
    return &t->o;
}
int attn_hf_translator_max_out(const attn_hf_translator *t) { return t->max_out; }
const attn_mt_tok *attn_hf_translator_mt_tok(const attn_hf_translator *t) { return t->mt; }
const attn_tok *attn_hf_translator_tok(const attn_hf_translator *t) { return t->tok; }

attn_status attn_hf_translator_source_ids(const attn_hf_translator *t, const int32_t *raw,
                                          size_t k, bool add_eos, int32_t **ids, size_t *n) {
    const int V = t->m->cfg.src_vocab;
    const size_t extra = (t->lang_prefix >= 0) + add_eos;
    int32_t *v = attn_alloc((k + extra + 1) * sizeof *v);
    if (!v) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    size_t j = 0;
    if (t->lang_prefix >= 0) v[j++] = t->lang_prefix;
    if (k) memcpy(v + j, raw, k * sizeof *v), j += k;
    if (add_eos) v[j++] = t->o.eos_token_id;
    const size_t L = (size_t)t->m->cfg.max_len;
    if (j > L) j = L; /* the model's positions */
    for (size_t i = 0; i < j; i++)
        if (v[i] < 0 || v[i] >= V) {
            const int bad = (int)v[i];
            attn_free(v);
            return attn_set_error(ATTN_STATUS_FORMAT,
                                  "the tokenizer gave id %d, outside the model's vocabulary of %d "
                                  "(tokenizer and config.json disagree)",
                                  bad, V);
        }
    *ids = v, *n = j;
    return ATTN_STATUS_OK;
}

attn_status attn_hf_translator_encode(const attn_hf_translator *t, const char *text, size_t len,
                                      int32_t **ids, size_t *n) {
    if (!t->mt && !t->tok)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "this directory has no tokenizer: give source ids");
    int32_t *raw = NULL;
    size_t k = 0;
    attn_status s = t->mt ? attn_mt_tok_encode_source(t->mt, t->src_lang, text, len, &raw, &k)
                          : attn_tok_encode_alloc(t->tok, text, len, &raw, &k);
    if (s) return s;
    /* a plain tokenizer: attn's convention, </s> appended */
    s = attn_hf_translator_source_ids(t, raw, k, !t->mt, ids, n);
    attn_free(raw);
    return s;
}

attn_status attn_hf_translator_encode_target(const attn_hf_translator *t, const char *text,
                                             size_t len, int32_t **ids, size_t *n) {
    if (!t->mt && !t->tok)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "this directory has no tokenizer: give target ids");
    int32_t *raw = NULL;
    size_t k = 0;
    attn_status s = ATTN_STATUS_OK;
    if (t->mt) {
        const char *tl = NULL; /* NLLB: the code forced first (the configured one without) */
        char code[256];
        if (t->o.forced_bos_token_id >= 0 && attn_mt_tok_kind_of(t->mt) == ATTN_MT_TOK_NLLB) {
            const char *c = attn_mt_tok_id_to_token(t->mt, t->o.forced_bos_token_id, true);
            if (c && strlen(c) < sizeof code) tl = strcpy(code, c);
        }
        s = attn_mt_tok_encode_target(t->mt, tl, text, len, &raw, &k);
    } else {
        s = attn_tok_encode_alloc(t->tok, text, len, &raw, &k);
    }
    if (s) return s;
    const bool add_eos = !t->mt;
    const size_t L = (size_t)t->m->cfg.max_len + 1; /* decoder positions + the last prediction */
    int32_t *v = attn_alloc((k + 2) * sizeof *v);
    if (!v) {
        attn_free(raw);
        return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    size_t j = 0;
    v[j++] = t->o.decoder_start_token_id;
    if (k) memcpy(v + j, raw, k * sizeof *v), j += k;
    if (add_eos) v[j++] = t->o.eos_token_id;
    attn_free(raw);
    if (j > L) {
        attn_free(v);
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "the target has %zu tokens with the decoder start; the model takes "
                              "at most %zu",
                              j, L);
    }
    for (size_t i = 0; i < j; i++)
        if (v[i] < 0 || v[i] >= t->m->cfg.tgt_vocab) {
            const int bad = (int)v[i];
            attn_free(v);
            return attn_set_error(ATTN_STATUS_FORMAT,
                                  "the tokenizer gave target id %d, outside the model's vocabulary "
                                  "of %d (tokenizer and config.json disagree)",
                                  bad, t->m->cfg.tgt_vocab);
        }
    *ids = v, *n = j;
    return ATTN_STATUS_OK;
}

attn_status attn_hf_translator_generate(attn_hf_translator *t, int n, const int32_t *const *src,
                                        const size_t *src_len, int32_t *out_ids, int32_t *out_len,
                                        float *out_score) {
    if (n < 1 || n > t->max_sentences)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "translate: %d sentences in one batch; the translator takes 1 to %d",
                              n, t->max_sentences);
    int Ts = 1;
    for (int i = 0; i < n; i++) {
        if (src_len[i] == 0)
            return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "sentence %d: no source ids", i);
        if (src_len[i] > (size_t)t->m->cfg.max_len)
            return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                  "sentence %d: %zu source ids; the model takes at most %d", i,
                                  src_len[i], t->m->cfg.max_len);
        if ((int)src_len[i] > Ts) Ts = (int)src_len[i];
    }
    int32_t *flat = malloc((size_t)n * Ts * sizeof *flat), *sl = malloc((size_t)n * sizeof *sl);
    attn_status s = ATTN_STATUS_OK;
    if (!flat || !sl) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    for (int i = 0; i < n && !s; i++) {
        for (int k = 0; k < Ts; k++)
            flat[(size_t)i * Ts + k] = k < (int)src_len[i] ? src[i][k] : t->m->cfg.pad_id;
        sl[i] = (int32_t)src_len[i];
    }
    if (!s)
        s = attn_hf_generate(t->s, &t->o, n, Ts, flat, sl, t->max_out, out_ids, out_len, out_score);
    free(flat), free(sl);
    return s;
}

attn_status attn_hf_translator_decode(const attn_hf_translator *t, const int32_t *ids, size_t n,
                                      char **text, size_t *len) {
    if (n > 0 && ids[n - 1] == t->o.eos_token_id) n--; /* </s> */
    if (t->mt) return attn_mt_tok_decode(t->mt, ids, n, 0, text, len);
    if (t->tok) return attn_tok_decode_alloc(t->tok, ids, n, 0, text, len);
    return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                          "this directory has no tokenizer: the output is ids");
}

attn_status attn_hf_translator_translate(attn_hf_translator *t, const int32_t *src, size_t Ts,
                                         int32_t **tgt, int *n_tgt, float *score) {
    int32_t *out = malloc((size_t)t->max_out * sizeof *out), *seq = NULL;
    int32_t len = 0;
    attn_status s = out ? ATTN_STATUS_OK
                        : attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    if (!s) s = attn_hf_translator_generate(t, 1, &src, &Ts, out, &len, score);
    if (!s && !(seq = attn_alloc(((size_t)len + 1) * sizeof *seq)))
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    if (!s) {
        seq[0] = t->o.decoder_start_token_id;
        memcpy(seq + 1, out, (size_t)len * sizeof *seq);
        *tgt = seq, *n_tgt = len + 1;
    }
    free(out);
    return s;
}

attn_status attn_hf_translator_texts(attn_hf_translator *t, const char *const *texts, size_t n,
                                     char **out, float *scores) {
    for (size_t i = 0; i < n; i++) out[i] = NULL;
    const int B = t->max_sentences;
    int32_t **src = calloc((size_t)B, sizeof *src);
    size_t *len = calloc((size_t)B, sizeof *len);
    int32_t *ids = malloc((size_t)B * t->max_out * sizeof *ids), *olen = malloc((size_t)B * sizeof *olen);
    float *sc = malloc((size_t)B * sizeof *sc);
    attn_status s = ATTN_STATUS_OK;
    if (!src || !len || !ids || !olen || !sc)
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    for (size_t first = 0; first < n && !s; first += (size_t)B) {
        const int nb = n - first < (size_t)B ? (int)(n - first) : B;
        for (int i = 0; i < nb && !s; i++) {
            s = attn_hf_translator_encode(t, texts[first + i], strlen(texts[first + i]), &src[i],
                                          &len[i]);
            if (!s && len[i] == 0)
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "text %zu: no source ids",
                                   first + (size_t)i);
        }
        if (!s) s = attn_hf_translator_generate(t, nb, (const int32_t *const *)src, len, ids, olen, sc);
        for (int i = 0; i < nb && !s; i++) {
            size_t tl;
            s = attn_hf_translator_decode(t, ids + (size_t)i * t->max_out, (size_t)olen[i],
                                          &out[first + i], &tl);
            if (scores) scores[first + i] = sc[i];
        }
        for (int i = 0; i < B; i++) attn_free(src[i]), src[i] = NULL;
    }
    if (s)
        for (size_t i = 0; i < n; i++) attn_free(out[i]), out[i] = NULL;
    free(src), free(len), free(ids), free(olen), free(sc);
    return s;
}

attn_status attn_hf_translator_capture_input(attn_hf_translator *t, const char *text,
                                             const int32_t *ids, size_t n_ids, const char *target,
                                             const int32_t *tgt_ids, size_t n_tgt_ids,
                                             int32_t **src, size_t *Ts, int32_t **tgt,
                                             size_t *n_tgt, float *score) {
    *src = *tgt = NULL;
    if (score) *score = NAN;
    attn_status s = ATTN_STATUS_OK;
    if (ids) {
        if (n_ids == 0) return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "no source ids");
        if (!(*src = attn_alloc(n_ids * sizeof **src)))
            return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        memcpy(*src, ids, n_ids * sizeof **src), *Ts = n_ids;
    } else {
        s = attn_hf_translator_encode(t, text ? text : "", text ? strlen(text) : 0, src, Ts);
        if (!s && *Ts == 0) s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "the text has no tokens");
    }
    if (!s && *Ts > (size_t)t->m->cfg.max_len)
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "the source has %zu ids; the model takes at most %d", *Ts,
                           t->m->cfg.max_len);
    if (!s && tgt_ids) {
        if (!(*tgt = attn_alloc((n_tgt_ids ? n_tgt_ids : 1) * sizeof **tgt)))
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        else
            memcpy(*tgt, tgt_ids, n_tgt_ids * sizeof **tgt), *n_tgt = n_tgt_ids;
    } else if (!s && target) {
        s = attn_hf_translator_encode_target(t, target, strlen(target), tgt, n_tgt);
    } else if (!s) {
        int n = 0;
        float sc = 0;
        s = attn_hf_translator_translate(t, *src, *Ts, tgt, &n, &sc);
        if (!s) *n_tgt = (size_t)n;
        if (!s && score) *score = sc;
    }
    if (s) {
        attn_free(*src), attn_free(*tgt);
        *src = *tgt = NULL;
    }
    return s;
}

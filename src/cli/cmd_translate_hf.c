/* cmd_translate_hf.c — `attn translate --model DIR` on a Hugging Face translation directory
 * (MarianMTModel, M2M100ForConditionalGeneration / NLLB, or an `attn export` of attn's own model):
 * transformers' generate (attn_hf_generate) with the directory's generation_config.json defaults,
 * text through the directory's tokenizer (attn_mt_tok: Marian's .spm files, NLLB's tokenizer.json;
 * an export's plain tokenizer.json through attn_tok), or ids in and out (--ids). */
#include "cmd_translate_hf.h"

#include "cli.h"

#include "attn_infer.h"
#include "attn_tok.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const translate_hf_args *a;
    const attn_encdec_model *m;
    attn_hf_generate_options o;
    attn_mt_tok *mt;       /* Marian / NLLB tokenizer */
    attn_tok *tok;         /* or a plain tokenizer.json (attn export) */
    int32_t lang_prefix;   /* Marian: the target language token put before the source, or -1 */
    attn_translate_session *s;
    int max_out;
} hf_ctx;

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

static attn_status load_tokenizer(hf_ctx *c, const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/source.spm", dir);
    const bool marian = access(path, R_OK) == 0;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    const bool tj = access(path, R_OK) == 0;
    if (marian || (tj && nllb_class(dir))) return attn_mt_tok_load(dir, &c->mt);
    if (tj) return attn_tok_load(dir, &c->tok);
    if (c->a->ids) return ATTN_STATUS_OK;
    return attn_set_error(ATTN_STATUS_IO,
                          "%s: no tokenizer (source.spm or tokenizer.json); translate ids with "
                          "--ids",
                          dir);
}

static attn_status setup(hf_ctx *c, const char *dir) {
    const translate_hf_args *a = c->a;
    attn_status s = attn_hf_generate_config_load(dir, &c->o);
    if (!s && !a->ids) s = load_tokenizer(c, dir);
    else if (!s && (a->src_lang || a->tgt_lang)) s = load_tokenizer(c, dir);
    if (s) return s;
    c->lang_prefix = -1;
    const bool nllb = c->mt && attn_mt_tok_kind_of(c->mt) == ATTN_MT_TOK_NLLB;
    if ((a->src_lang || a->tgt_lang) && !c->mt)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: --src-lang / --tgt-lang need a Marian or NLLB tokenizer "
                              "(source.spm, or tokenizer.json with an NLLB tokenizer_config.json)",
                              dir);
    if (a->src_lang && !nllb)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: --src-lang: a Marian model has no source language token "
                              "(--tgt-lang puts its >>lang<< token first)",
                              dir);
    if (a->src_lang) { /* checked now: an unknown code is one error, not one per line */
        int32_t id;
        if ((s = attn_mt_tok_lang_id(c->mt, a->src_lang, &id))) return s;
    }
    if (a->tgt_lang) {
        int32_t id;
        char wrapped[300]; /* Marian's token of cmn_Hans is ">>cmn_Hans<<" */
        const char *lang = a->tgt_lang;
        if (!nllb && strncmp(lang, ">>", 2) != 0 && strlen(lang) < sizeof wrapped - 5)
            snprintf(wrapped, sizeof wrapped, ">>%s<<", lang), lang = wrapped;
        if ((s = attn_mt_tok_lang_id(c->mt, lang, &id))) return s;
        if (nllb) c->o.forced_bos_token_id = id;
        else c->lang_prefix = id;
    }
    if (a->beam > 0) c->o.num_beams = a->beam;
    if (a->max_tokens > 0) c->o.max_new_tokens = a->max_tokens;
    const int ml = c->o.max_new_tokens > 0 ? 1 + c->o.max_new_tokens : c->o.max_length;
    if (ml < 2 || ml > c->m->cfg.max_len + 1)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: max_length %d (generation_config.json or --max-tokens) must be "
                              "2 to the model's %d positions + 1",
                              dir, ml, c->m->cfg.max_len);
    c->max_out = ml;
    return attn_translate_session_init(c->m, a->batch, c->o.num_beams, c->m->cfg.max_len, ml - 1,
                                       &c->s);
}

/* "3 41 7 0" or "3,41,7,0" -> ids in [0, V) (a line of --ids input). */
static attn_status parse_ids(const char *line, int V, size_t lineno, int32_t **ids, size_t *n) {
    size_t cap = 16, k = 0;
    int32_t *v = attn_alloc(cap * sizeof *v);
    if (!v) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t') p++;
        if (!*p) break;
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 0 || x >= V) {
            attn_free(v);
            return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                  "<input>:%zu: expected source ids in [0, %d) separated by "
                                  "spaces or commas, got '%.20s'",
                                  lineno, V, p);
        }
        if (k == cap) {
            int32_t *w = attn_alloc(2 * cap * sizeof *w);
            if (!w) {
                attn_free(v);
                return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
            }
            memcpy(w, v, k * sizeof *v), attn_free(v), v = w, cap *= 2;
        }
        v[k++] = (int32_t)x;
        p = end;
    }
    *ids = v, *n = k;
    return ATTN_STATUS_OK;
}

/* A source line's ids (</s> included: the tokenizer's, or the caller's with --ids). */
static attn_status source_ids(const hf_ctx *c, const char *line, size_t lineno, int32_t **ids,
                              size_t *n) {
    const int V = c->m->cfg.src_vocab;
    attn_status s;
    int32_t *raw = NULL;
    size_t k = 0;
    if (c->a->ids) s = parse_ids(line, V, lineno, &raw, &k);
    else if (c->mt) s = attn_mt_tok_encode_source(c->mt, c->a->src_lang, line, strlen(line), &raw, &k);
    else s = attn_tok_encode_alloc(c->tok, line, strlen(line), &raw, &k);
    if (s) return s;
    const bool add_eos = !c->a->ids && !c->mt; /* a plain tokenizer: attn's convention */
    const size_t extra = (c->lang_prefix >= 0) + add_eos;
    int32_t *v = attn_alloc((k + extra + 1) * sizeof *v);
    if (!v) {
        attn_free(raw);
        return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    }
    size_t j = 0;
    if (c->lang_prefix >= 0) v[j++] = c->lang_prefix;
    memcpy(v + j, raw, k * sizeof *v), j += k;
    if (add_eos) v[j++] = c->o.eos_token_id;
    attn_free(raw);
    const size_t L = (size_t)c->m->cfg.max_len;
    if (j > L) j = L; /* the model's positions */
    for (size_t i = 0; i < j; i++)
        if (v[i] < 0 || v[i] >= V) {
            attn_free(v);
            return attn_set_error(ATTN_STATUS_FORMAT,
                                  "<input>:%zu: the tokenizer gave id %d, outside the model's "
                                  "vocabulary of %d (tokenizer and config.json disagree)",
                                  lineno, (int)v[i], V);
        }
    *ids = v, *n = j;
    return ATTN_STATUS_OK;
}

/* Print one result: ids, or text. */
static attn_status print_result(const hf_ctx *c, const int32_t *ids, int n, float score) {
    if (n > 0 && ids[n - 1] == c->o.eos_token_id) n--; /* </s> */
    if (c->a->scores) printf("%.4f\t", (double)score);
    if (c->a->ids) {
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        putchar('\n');
        return ATTN_STATUS_OK;
    }
    char *text = NULL;
    size_t len = 0;
    attn_status s = c->mt ? attn_mt_tok_decode(c->mt, ids, (size_t)n, 0, &text, &len)
                          : attn_tok_decode_alloc(c->tok, ids, (size_t)n, 0, &text, &len);
    if (s) return s;
    puts(text);
    attn_free(text);
    return ATTN_STATUS_OK;
}

/* Translate lines [0, n) (input line numbers from first) in batches, printing in order. */
static attn_status run_batch(hf_ctx *c, char **lines, int n, size_t first) {
    int32_t **src = calloc((size_t)n, sizeof *src);
    size_t *len = calloc((size_t)n, sizeof *len);
    int32_t *flat = NULL, *sl = malloc((size_t)n * sizeof *sl), *out_len = malloc((size_t)n * sizeof *out_len);
    int32_t *out = malloc((size_t)n * c->max_out * sizeof *out);
    float *score = malloc((size_t)n * sizeof *score);
    attn_status s = ATTN_STATUS_OK;
    if (!src || !len || !sl || !out_len || !out || !score)
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    int Ts = 1;
    for (int i = 0; i < n && !s; i++) {
        s = source_ids(c, lines[i], first + (size_t)i, &src[i], &len[i]);
        if (!s && len[i] == 0)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "<input>:%zu: no source ids",
                               first + (size_t)i);
        if (!s && (int)len[i] > Ts) Ts = (int)len[i];
    }
    if (!s && !(flat = malloc((size_t)n * Ts * sizeof *flat)))
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    for (int i = 0; i < n && !s; i++) {
        for (int t = 0; t < Ts; t++)
            flat[(size_t)i * Ts + t] = t < (int)len[i] ? src[i][t] : c->m->cfg.pad_id;
        sl[i] = (int32_t)len[i];
    }
    if (!s) s = attn_hf_generate(c->s, &c->o, n, Ts, flat, sl, c->max_out, out, out_len, score);
    for (int i = 0; i < n && !s; i++)
        s = print_result(c, out + (size_t)i * c->max_out, out_len[i], score[i]);
    fflush(stdout);
    for (int i = 0; src && i < n; i++) attn_free(src[i]);
    free(src), free(len), free(flat), free(sl), free(out_len), free(out), free(score);
    return s;
}

attn_status translate_hf(const translate_hf_args *a, const attn_encdec_model *m, char **texts,
                         int n_texts) {
    hf_ctx c;
    memset(&c, 0, sizeof c);
    c.a = a, c.m = m;
    attn_status s = setup(&c, a->dir);
    char **buf = s ? NULL : calloc((size_t)a->batch, sizeof *buf);
    if (!s && !buf) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    int n = 0;
    size_t lineno = 0, first = 1;
    char *line = NULL;
    size_t cap = 0;
    while (!s) {
        char *text = NULL;
        if (texts) {
            if ((int)lineno == n_texts) break;
            text = strdup(texts[lineno]);
        } else {
            ssize_t l = getline(&line, &cap, stdin);
            if (l < 0) break;
            while (l > 0 && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = 0;
            text = strdup(line);
        }
        lineno++;
        if (!text) {
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
            break;
        }
        size_t at = 0;
        const char *what = cli_text_problem(text, strlen(text), &at);
        if (what) {
            free(text);
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "<input>:%zu: %s at byte %zu",
                               lineno, what, at + 1);
            break;
        }
        buf[n++] = text;
        if (n == a->batch) {
            s = run_batch(&c, buf, n, first);
            for (int i = 0; i < n; i++) free(buf[i]);
            first += (size_t)n, n = 0;
        }
    }
    free(line);
    if (!s && n) s = run_batch(&c, buf, n, first);
    for (int i = 0; buf && i < n; i++) free(buf[i]);
    free(buf);
    attn_translate_session_free(c.s);
    attn_mt_tok_free(c.mt);
    attn_tok_free(c.tok);
    return s;
}

/* cmd_translate_hf.c — `attn translate --model DIR` on a Hugging Face translation directory
 * (MarianMTModel, M2M100ForConditionalGeneration / NLLB, or an `attn export` of attn's own model):
 * transformers' generate (attn_hf_generate) with the directory's generation_config.json defaults,
 * text through the directory's tokenizer (attn_mt_tok: Marian's .spm files, NLLB's tokenizer.json;
 * an export's plain tokenizer.json through attn_tok), or ids in and out (--ids). */
#include "cmd_translate_hf.h"

#include "cli.h"

#include "attn_infer.h"
#include "attn_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const translate_hf_args *a;
    const attn_encdec_model *m;
    attn_hf_translator *t;
} hf_ctx;

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
    attn_status s;
    if (c->a->ids) {
        int32_t *raw = NULL;
        size_t k = 0;
        s = parse_ids(line, c->m->cfg.src_vocab, lineno, &raw, &k);
        if (!s) s = attn_hf_translator_source_ids(c->t, raw, k, false, ids, n);
        attn_free(raw);
    } else {
        s = attn_hf_translator_encode(c->t, line, strlen(line), ids, n);
    }
    if (s == ATTN_STATUS_FORMAT) { /* the tokenizer and the model disagree: name the line */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        s = attn_set_error(s, "<input>:%zu: %s", lineno, msg);
    }
    return s;
}

/* Print one result: ids, or text. */
static attn_status print_result(const hf_ctx *c, const int32_t *ids, int n, float score) {
    if (c->a->scores) printf("%.4f\t", (double)score);
    if (c->a->ids) {
        if (n > 0 && ids[n - 1] == attn_hf_translator_options(c->t)->eos_token_id) n--; /* </s> */
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        putchar('\n');
        return ATTN_STATUS_OK;
    }
    char *text = NULL;
    size_t len = 0;
    attn_status s = attn_hf_translator_decode(c->t, ids, (size_t)n, &text, &len);
    if (s) return s;
    puts(text);
    attn_free(text);
    return ATTN_STATUS_OK;
}

/* Translate lines [0, n) (input line numbers from first) in one batch, printing in order. */
static attn_status run_batch(hf_ctx *c, char **lines, int n, size_t first) {
    const int max_out = attn_hf_translator_max_out(c->t);
    int32_t **src = calloc((size_t)n, sizeof *src);
    size_t *len = calloc((size_t)n, sizeof *len);
    int32_t *out_len = malloc((size_t)n * sizeof *out_len);
    int32_t *out = malloc((size_t)n * max_out * sizeof *out);
    float *score = malloc((size_t)n * sizeof *score);
    attn_status s = ATTN_STATUS_OK;
    if (!src || !len || !out_len || !out || !score)
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    for (int i = 0; i < n && !s; i++) {
        s = source_ids(c, lines[i], first + (size_t)i, &src[i], &len[i]);
        if (!s && len[i] == 0)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "<input>:%zu: no source ids",
                               first + (size_t)i);
    }
    if (!s)
        s = attn_hf_translator_generate(c->t, n, (const int32_t *const *)src, len, out, out_len,
                                        score);
    for (int i = 0; i < n && !s; i++)
        s = print_result(c, out + (size_t)i * max_out, out_len[i], score[i]);
    fflush(stdout);
    for (int i = 0; src && i < n; i++) attn_free(src[i]);
    free(src), free(len), free(out_len), free(out), free(score);
    return s;
}

attn_status translate_hf(const translate_hf_args *a, const attn_encdec_model *m, char **texts,
                         int n_texts) {
    hf_ctx c;
    memset(&c, 0, sizeof c);
    c.a = a, c.m = m;
    attn_hf_translator_params p = attn_hf_translator_default_params();
    p.src_lang = a->src_lang, p.tgt_lang = a->tgt_lang;
    p.num_beams = a->beam, p.max_new_tokens = a->max_tokens, p.max_sentences = a->batch;
    p.need_tokenizer = !a->ids;
    attn_status s = attn_hf_translator_init(m, a->dir, &p, &c.t);
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
    attn_hf_translator_free(c.t);
    return s;
}

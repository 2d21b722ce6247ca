/* cmd_translate_hf.c — `attn translate --model DIR` on a Hugging Face translation directory
 * (MarianMTModel, M2M100ForConditionalGeneration / NLLB, or an `attn export` of attn's own model):
 * transformers' generate (attn_hf_generate) with the directory's generation_config.json defaults,
 * text through the directory's tokenizer (attn_mt_tok: Marian's .spm files, NLLB's tokenizer.json;
 * an export's plain tokenizer.json through attn_tok), or ids in and out (--ids).
 *
 * As for attn's own models (cmd_translate.c): lines are read in windows of 16 batches, sorted by
 * source length, cut into batches of --batch sentences decoded one batch per thread (a translator
 * per thread; longest batches first), and written back in input order. */
#include "cmd_translate_hf.h"

#include "cli.h"

#include "attn_infer.h"
#include "attn_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define HF_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HF_MAX(a, b) ((a) > (b) ? (a) : (b))

typedef struct {
    const translate_hf_args *a;
    const attn_encdec_model *m;
    attn_hf_translator *t;    /* thread 0's (the tokenizer's) */
    attn_hf_translator **all; /* n_t of them, one per thread */
    int n_t;
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

/* A window of input lines: read, turned into source ids, sorted by length, cut into batches that
 * the threads decode one at a time each (longest first), printed back in input order. */
typedef struct {
    char *text;
    size_t lineno;
    int32_t *src;
    size_t len;
    int32_t *out; /* into the window's output buffer */
    int32_t out_len;
    float score;
} hf_item;

static int cmp_item_len(const void *x, const void *y) {
    const hf_item *const *a = x, *const *b = y;
    if ((*a)->len != (*b)->len) return (*a)->len < (*b)->len ? -1 : 1;
    return (*a)->lineno < (*b)->lineno ? -1 : (*a)->lineno > (*b)->lineno; /* stable */
}

typedef struct {
    hf_ctx *c;
    hf_item **sorted;
    int n, n_batches;
    attn_status first; /* the first failure and its message */
    char err[1024];
} hf_window;

/* Batch bb (longest first) on translator t. */
static void window_batch(hf_window *w, attn_hf_translator *t, long bb) {
    attn_status seen;
#ifdef _OPENMP
#pragma omp atomic read
#endif
    seen = w->first;
    if (seen) return;
    const int B = w->c->a->batch, b = w->n_batches - 1 - (int)bb, i0 = b * B;
    const int k = HF_MIN(B, w->n - i0), max_out = attn_hf_translator_max_out(t);
    const int32_t **src = malloc((size_t)k * sizeof *src);
    size_t *len = malloc((size_t)k * sizeof *len);
    int32_t *out = malloc((size_t)k * (size_t)max_out * sizeof *out);
    int32_t *out_len = malloc((size_t)k * sizeof *out_len);
    float *score = malloc((size_t)k * sizeof *score);
    attn_status e = ATTN_STATUS_OK;
    if (!src || !len || !out || !out_len || !score)
        e = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    for (int i = 0; i < k && !e; i++) src[i] = w->sorted[i0 + i]->src, len[i] = w->sorted[i0 + i]->len;
    if (!e) e = attn_hf_translator_generate(t, k, src, len, out, out_len, score);
    for (int i = 0; i < k && !e; i++) {
        hf_item *it = w->sorted[i0 + i];
        memcpy(it->out, out + (size_t)i * max_out, (size_t)out_len[i] * sizeof *out);
        it->out_len = out_len[i], it->score = score[i];
    }
    free(src), free(len), free(out), free(out_len), free(score);
    if (e) {
#ifdef _OPENMP
#pragma omp critical(attn_translate_hf_error)
#endif
        {
            if (!w->first) {
                snprintf(w->err, sizeof w->err, "%s", attn_last_error());
#ifdef _OPENMP
#pragma omp atomic write
#endif
                w->first = e;
            }
        }
    }
}

/* Translate the window's n lines (line numbers in the items), printing in input order. */
static attn_status run_window(hf_ctx *c, hf_item *items, int n) {
    const int max_out = attn_hf_translator_max_out(c->t);
    attn_status s = ATTN_STATUS_OK;
    for (int i = 0; i < n && !s; i++) {
        s = source_ids(c, items[i].text, items[i].lineno, &items[i].src, &items[i].len);
        if (!s && items[i].len == 0)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "<input>:%zu: no source ids",
                               items[i].lineno);
    }
    hf_item **sorted = malloc((size_t)n * sizeof *sorted);
    int32_t *outs = malloc((size_t)n * (size_t)max_out * sizeof *outs);
    if (!s && (!sorted || !outs))
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    if (!s) {
        for (int i = 0; i < n; i++) sorted[i] = &items[i], items[i].out = outs + (size_t)i * max_out;
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_item_len);
        hf_window w = {c, sorted, n, (n + c->a->batch - 1) / c->a->batch, ATTN_STATUS_OK, ""};
        const int nt = HF_MIN(c->n_t, w.n_batches);
        /* One thread: no region (the kernels then use the threads); more: one batch per thread,
         * each thread's kernels single-threaded inside the region. */
        if (nt > 1) {
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
            {
                attn_hf_translator *t = c->all[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
                for (long bb = 0; bb < w.n_batches; bb++) window_batch(&w, t, bb);
            }
#endif
        } else {
            for (long bb = 0; bb < w.n_batches; bb++) window_batch(&w, c->t, bb);
        }
        if (w.first) s = attn_set_error(w.first, "%s", w.err);
    }
    for (int i = 0; i < n && !s; i++) s = print_result(c, items[i].out, items[i].out_len, items[i].score);
    fflush(stdout);
    for (int i = 0; i < n; i++) attn_free(items[i].src), items[i].src = NULL;
    free(sorted), free(outs);
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
    p.length_penalty = a->length_penalty, p.early_stopping = a->early_stopping;
    p.need_tokenizer = !a->ids;
    /* one translator per thread (the workers without a tokenizer: text is thread 0's work) */
    int nt = 1;
#ifdef _OPENMP
    nt = HF_MAX(1, attn_get_num_threads());
#endif
    attn_hf_translator *all[64] = {NULL};
    nt = HF_MIN(nt, 64);
    attn_status s = attn_hf_translator_init(m, a->dir, &p, &all[0]);
    p.need_tokenizer = false;
    c.n_t = 1;
    for (int i = 1; i < nt && !s; i++, c.n_t++) s = attn_hf_translator_init(m, a->dir, &p, &all[i]);
    c.t = all[0], c.all = all;
    const int wcap = a->batch * 16;
    hf_item *w = s ? NULL : calloc((size_t)wcap, sizeof *w);
    if (!s && !w) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    int n = 0;
    size_t lineno = 0;
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
        w[n].text = text, w[n].lineno = lineno, n++;
        if (n == wcap) {
            s = run_window(&c, w, n);
            for (int i = 0; i < n; i++) free(w[i].text);
            n = 0;
        }
    }
    free(line);
    if (!s && n) s = run_window(&c, w, n);
    for (int i = 0; w && i < n; i++) free(w[i].text);
    free(w);
    for (int i = 0; i < nt; i++) attn_hf_translator_free(all[i]);
    return s;
}

/* embed.c — sentence embeddings as sentence-transformers computes them (attn_embed.h): the model
 * directory (modules.json, sentence_bert_config.json, the Pooling config), tokenization as
 * sentence-transformers 2.7 does it, length-sorted batches, pooling and normalization. */
#include "embed-impl.h"

#include "../core/core-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

attn_embed_options attn_embed_default_options(void) {
    attn_embed_options o;
    memset(&o, 0, sizeof o);
    o.max_seq_length = 0;
    o.pooling = -1;
    o.normalize = -1;
    o.batch_size = 32;
    o.precision = ATTN_PRECISION_F32;
    return o;
}

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 2);
    if (!p) return NULL;
    memcpy(p, a, la);
    size_t k = la;
    if (lb && la && a[la - 1] != '/') p[k++] = '/';
    memcpy(p + k, b, lb + 1);
    return p;
}

/* Parse a JSON file. optional: a missing file gives *out = NULL and OK. */
static attn_status load_json(const char *path, bool optional, json_t **out) {
    *out = NULL;
    if (access(path, F_OK) != 0) {
        if (optional) return ATTN_STATUS_OK;
        return attn_fail(ATTN_STATUS_IO, "%s: file not found", path);
    }
    json_error_t err;
    json_t *j = json_load_file(path, JSON_DECODE_INT_AS_REAL, &err);
    if (!j) {
        if (err.line < 0) return attn_fail(ATTN_STATUS_IO, "%s: cannot read: %s", path, err.text);
        return attn_fail(ATTN_STATUS_FORMAT, "%s:%d:%d: invalid JSON: %s", path, err.line,
                         err.column, err.text);
    }
    if (!json_is_object(j) && !json_is_array(j)) {
        json_decref(j);
        return attn_fail(ATTN_STATUS_FORMAT, "%s: expected a JSON object or array", path);
    }
    *out = j;
    return ATTN_STATUS_OK;
}

/* An optional boolean field (absent or null: keep *v). */
static attn_status get_bool(const json_t *o, const char *path, const char *key, bool *v) {
    json_t *x = json_object_get(o, key);
    if (!x || json_is_null(x)) return ATTN_STATUS_OK;
    if (!json_is_boolean(x))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: \"%s\" must be true or false", path, key);
    *v = json_is_true(x);
    return ATTN_STATUS_OK;
}

/* An integral JSON number (files are parsed with JSON_DECODE_INT_AS_REAL: tokenizer_config.json's
 * model_max_length can be 1e30, beyond a JSON integer), in [lo, hi]. */
static bool int_in(const json_t *x, double lo, double hi, int *v) {
    if (!json_is_number(x)) return false;
    double d = json_number_value(x);
    if (!(d >= lo && d <= hi) || d != floor(d)) return false;
    *v = (int)d;
    return true;
}

/* A special token's string from tokenizer_config.json: a string or {"content": string}. */
static const char *token_field(const json_t *cfg, const char *key, const char *dflt) {
    json_t *x = cfg ? json_object_get(cfg, key) : NULL;
    if (json_is_string(x)) return json_string_value(x);
    if (json_is_object(x) && json_is_string(json_object_get(x, "content")))
        return json_string_value(json_object_get(x, "content"));
    return dflt;
}

#define ST_PREFIX "sentence_transformers.models."

/* modules.json: Transformer, Pooling, then optionally Normalize. */
static attn_status read_modules(const char *dir, const json_t *mods, const char *path,
                                char **model_sub, char **pool_sub, bool *normalize) {
    if (!json_is_array(mods))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: expected a JSON array of modules", path);
    size_t n = json_array_size(mods);
    int have_tf = 0, have_pool = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(mods, i);
        const char *type = json_string_value(json_object_get(m, "type"));
        const char *sub = json_string_value(json_object_get(m, "path"));
        if (!json_is_object(m) || !type || !sub)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: module %zu needs string fields \"type\" and \"path\"", path, i);
        const char *t = strncmp(type, ST_PREFIX, strlen(ST_PREFIX)) ? type : type + strlen(ST_PREFIX);
        if (!strcmp(t, "Transformer") && i == 0) {
            have_tf = 1;
            *model_sub = join(dir, sub);
        } else if (!strcmp(t, "Pooling") && i == 1 && have_tf) {
            have_pool = 1;
            *pool_sub = join(dir, sub);
        } else if (!strcmp(t, "Normalize") && i == 2 && have_pool) {
            *normalize = true;
        } else {
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: module %zu (%s) is not supported: attn runs Transformer, "
                             "Pooling, then optionally Normalize",
                             path, i, type);
        }
        if ((have_tf && !*model_sub) || (have_pool && !*pool_sub))
            return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (!have_tf || !have_pool)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: needs a Transformer module followed by a Pooling module", path);
    return ATTN_STATUS_OK;
}

static attn_status read_pooling(const char *pool_dir, int hidden, attn_bert_pooling *mode) {
    char *path = join(pool_dir, "config.json");
    if (!path) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    json_t *j = NULL;
    attn_status s = load_json(path, false, &j);
    if (s) goto done;
    if (!json_is_object(j)) {
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: expected a JSON object", path);
        goto done;
    }
    static const struct {
        const char *key;
        attn_bert_pooling mode;
    } modes[] = {{"pooling_mode_cls_token", ATTN_BERT_POOL_CLS},
                 {"pooling_mode_mean_tokens", ATTN_BERT_POOL_MEAN},
                 {"pooling_mode_max_tokens", ATTN_BERT_POOL_MAX},
                 {"pooling_mode_mean_sqrt_len_tokens", ATTN_BERT_POOL_MEAN_SQRT_LEN}};
    int count = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        bool on = false;
        if ((s = get_bool(j, path, modes[i].key, &on))) goto done;
        if (on) *mode = modes[i].mode, count++;
    }
    const char *unsup[] = {"pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"};
    for (size_t i = 0; i < 2; i++) {
        bool on = false;
        if ((s = get_bool(j, path, unsup[i], &on))) goto done;
        if (on) {
            s = attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: %s is not supported (cls, mean, max and "
                          "mean_sqrt_len are)", path, unsup[i]);
            goto done;
        }
    }
    if (count != 1) {
        s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                      "%s: exactly one pooling mode must be true (got %d; several modes, which "
                      "sentence-transformers concatenates, are not supported)",
                      path, count);
        goto done;
    }
    json_t *d = json_object_get(j, "word_embedding_dimension");
    int dv = 0;
    if (d && !json_is_null(d) && (!int_in(d, 1, 1e9, &dv) || dv != hidden)) {
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: word_embedding_dimension must equal the model's hidden_size %d", path,
                      hidden);
        goto done;
    }
done:
    json_decref(j);
    free(path);
    return s;
}

void attn_embed_free(attn_embed *e) {
    if (!e) return;
    attn_bert_state_free(e->st);
    for (int i = 1; i < e->n_workers; i++) attn_bert_state_free(e->wst[i]);
    free(e->wst), free(e->wst_B), free(e->wst_T);
    attn_bert_model_free(e->model);
    attn_tok_free(e->tok);
    free(e->model_dir);
    free(e);
}

attn_status attn_embed_load(const char *dir, const attn_embed_options *opt_in, attn_embed **out) {
    if (!dir || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed: NULL argument");
    *out = NULL;
    attn_embed_options opt = opt_in ? *opt_in : attn_embed_default_options();
    ATTN_TRY(attn_precision_check((attn_precision)opt.precision, "embed"));
    if (opt.batch_size < 1 || opt.batch_size > 65536)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed: batch_size %d is not in [1, 65536]",
                         opt.batch_size);
    if (opt.pooling < -1 || opt.pooling > ATTN_BERT_POOL_MEAN_SQRT_LEN)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed: unknown pooling %d", opt.pooling);
    if (opt.max_seq_length < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed: max_seq_length %d < 0",
                         opt.max_seq_length);
    attn_embed *e = calloc(1, sizeof *e);
    if (!e) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    e->batch_size = opt.batch_size;
    attn_status s = ATTN_STATUS_OK;
    char *p_mod = join(dir, "modules.json"), *pool_dir = NULL, *p_stc = NULL, *p_tok = NULL,
         *p_tcfg = NULL;
    json_t *mods = NULL, *stc = NULL, *tcfg = NULL;
    bool normalize = false;
    attn_bert_pooling pooling = ATTN_BERT_POOL_MEAN;
    if (!p_mod) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if ((s = load_json(p_mod, true, &mods))) goto done;
    if (mods) {
        e->info.sentence_transformers = true;
        if ((s = read_modules(dir, mods, p_mod, &e->model_dir, &pool_dir, &normalize))) goto done;
    } else {
        e->model_dir = join(dir, "");
    }
    if (!e->model_dir) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    p_tok = join(e->model_dir, "tokenizer.json");
    p_stc = join(e->model_dir, "sentence_bert_config.json");
    p_tcfg = join(e->model_dir, "tokenizer_config.json");
    if (!p_tok || !p_stc || !p_tcfg) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    /* The tokenizer first: a directory without one is a common mistake, name it plainly. */
    if (access(p_tok, F_OK) != 0) {
        s = attn_fail(ATTN_STATUS_IO, "%s: the model directory has no tokenizer.json",
                      e->model_dir);
        goto done;
    }
    if ((s = attn_tok_load(p_tok, &e->tok))) goto done;
    if ((s = attn_bert_load_dir(e->model_dir, &e->model))) goto done;
    /* The layers' weights in the GEMM's panel layout, once (the handle never changes them).
     * F32: without memory for the copy the model simply runs unpacked (equal within ~2e-7).
     * BF16 was asked for explicitly: failing to provide it is an error. */
    if (opt.precision == ATTN_PRECISION_BF16) {
        if ((s = attn_bert_pack_weights_precision(e->model, ATTN_PRECISION_BF16))) goto done;
    } else {
        (void)attn_bert_pack_weights(e->model);
    }
    const attn_bert_config *cfg = &e->model->cfg;
    if (attn_tok_vocab_size(e->tok) > cfg->vocab_size) {
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: the tokenizer has %d ids but the model's vocab_size is %d", p_tok,
                      (int)attn_tok_vocab_size(e->tok), cfg->vocab_size);
        goto done;
    }
    if (pool_dir && (s = read_pooling(pool_dir, cfg->hidden_size, &pooling))) goto done;

    /* max_seq_length: sentence_bert_config.json, else min(P, tokenizer model_max_length). */
    int max_len = cfg->max_position_embeddings;
    if ((s = load_json(p_tcfg, true, &tcfg))) goto done;
    if (tcfg) {
        json_t *x = json_object_get(tcfg, "model_max_length");
        if (json_is_number(x) && json_number_value(x) >= 1 &&
            json_number_value(x) < (double)max_len)
            max_len = (int)json_number_value(x);
        if ((s = get_bool(tcfg, p_tcfg, "clean_up_tokenization_spaces",
                          &e->info.clean_up_tokenization_spaces)))
            goto done;
    }
    if (e->info.sentence_transformers) {
        if ((s = load_json(p_stc, true, &stc))) goto done;
        if (stc) {
            json_t *x = json_object_get(stc, "max_seq_length");
            if (x && !json_is_null(x)) {
                int v = 0;
                if (!int_in(x, 2, cfg->max_position_embeddings, &v)) {
                    s = attn_fail(ATTN_STATUS_FORMAT,
                                  "%s: max_seq_length must be an integer in [2, %d] "
                                  "(max_position_embeddings)",
                                  p_stc, cfg->max_position_embeddings);
                    goto done;
                }
                max_len = v;
            }
            if ((s = get_bool(stc, p_stc, "do_lower_case", &e->info.do_lower_case))) goto done;
        }
    }
    if (opt.max_seq_length > 0) {
        if (opt.max_seq_length < 2 || opt.max_seq_length > cfg->max_position_embeddings) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "embed: max_seq_length %d is not in [2, %d] (max_position_embeddings)",
                          opt.max_seq_length, cfg->max_position_embeddings);
            goto done;
        }
        max_len = opt.max_seq_length;
    }
    if (opt.pooling >= 0) pooling = (attn_bert_pooling)opt.pooling;
    if (opt.normalize >= 0) normalize = opt.normalize != 0;
    e->info.dim = cfg->hidden_size;
    e->info.max_seq_length = max_len;
    e->info.pooling = pooling;
    e->info.normalize = normalize;
    e->info.has_mlm = e->model->has_mlm;
    /* tokenizer_config.json names the special tokens; else the conventional ones. */
    static const struct {
        const char *key;
        attn_tok_special which;
    } sp[4] = {{"cls_token", ATTN_TOK_CLS}, {"sep_token", ATTN_TOK_SEP},
               {"pad_token", ATTN_TOK_PAD}, {"mask_token", ATTN_TOK_MASK}};
    int32_t *dst[4] = {&e->info.cls_id, &e->info.sep_id, &e->info.pad_id, &e->info.mask_id};
    for (int k = 0; k < 4; k++) {
        const char *name = token_field(tcfg, sp[k].key, NULL);
        *dst[k] = name ? attn_tok_token_to_id(e->tok, name) : -1;
        if (*dst[k] < 0) *dst[k] = attn_tok_special_id(e->tok, sp[k].which);
    }
done:
    json_decref(mods);
    json_decref(stc);
    json_decref(tcfg);
    free(p_mod), free(pool_dir), free(p_stc), free(p_tok), free(p_tcfg);
    if (s) {
        attn_embed_free(e);
        return s;
    }
    *out = e;
    return ATTN_STATUS_OK;
}

const attn_embed_info *attn_embed_get_info(const attn_embed *e) { return e ? &e->info : NULL; }
const attn_bert_model *attn_embed_model(const attn_embed *e) { return e ? e->model : NULL; }
const attn_tok *attn_embed_tokenizer(const attn_embed *e) { return e ? e->tok : NULL; }

/* ---- tokenization ---------------------------------------------------------------------------- */

attn_status embed_tokenize_text(const attn_embed *e, const char *text, size_t len, size_t max_len,
                                bool st_prep, size_t index, int32_t **ids_out, size_t *n_out) {
    *ids_out = NULL;
    *n_out = 0;
    if (!text && len) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed: NULL text");
    if (!text) text = "";
    size_t bad = embed_utf8_check(text, len);
    if (bad < len) {
        if (index == SIZE_MAX)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "the text is not valid UTF-8 (byte offset %zu)", bad);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "text %zu is not valid UTF-8 (byte offset %zu)", index, bad);
    }
    const char *t = text;
    size_t n = len;
    char *lowered = NULL;
    if (st_prep) {
        size_t b, en;
        embed_py_strip(text, len, &b, &en);
        t = text + b, n = en - b;
        if (e->info.do_lower_case) {
            lowered = embed_py_lower(t, n, &n);
            if (!lowered) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
            t = lowered;
        }
    }
    attn_tok_encode_params tp = attn_tok_encode_default_params();
    tp.add_special_tokens = true;
    if (max_len) {
        tp.truncation = ATTN_TOK_TRUNCATE_LONGEST_FIRST;
        tp.max_length = max_len;
    }
    attn_tok_encoding enc;
    attn_status s = attn_tok_encode_ex(e->tok, t, n, NULL, 0, &tp, &enc);
    free(lowered);
    if (s) return s;
    int32_t *ids = malloc((enc.n ? enc.n : 1) * sizeof *ids);
    if (!ids) {
        attn_tok_encoding_free(&enc);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (enc.n) memcpy(ids, enc.ids, enc.n * sizeof *ids);
    *ids_out = ids;
    *n_out = enc.n;
    attn_tok_encoding_free(&enc);
    if (*n_out == 0) {
        free(ids);
        *ids_out = NULL;
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "embed: the tokenizer gives no token for %s (a tokenizer without a "
                         "post-processor adding [CLS] / [SEP]?)",
                         index == SIZE_MAX ? "the text" : "a text");
    }
    return ATTN_STATUS_OK;
}

attn_status attn_embed_tokenize(const attn_embed *e, const char *text, size_t len, int32_t *ids,
                                size_t cap, size_t *n) {
    if (!e || !n || (!ids && cap))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed: NULL argument");
    int32_t *buf;
    size_t k;
    attn_status s =
        embed_tokenize_text(e, text, len, (size_t)e->info.max_seq_length, true, SIZE_MAX, &buf, &k);
    if (s) return s;
    *n = k;
    if (k > cap) {
        free(buf);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed: %zu ids do not fit in %zu", k, cap);
    }
    memcpy(ids, buf, k * sizeof *ids);
    free(buf);
    return ATTN_STATUS_OK;
}

/* ---- running the model ---------------------------------------------------------------------- */

attn_status embed_ensure_state(attn_embed *e, int B, int T) {
    if (e->st && B <= e->st_B && T <= e->st_T) return ATTN_STATUS_OK;
    attn_bert_state_free(e->st);
    e->st = NULL;
    int nB = ATTN_MAX(B, e->st_B), nT = ATTN_MAX(T, e->st_T);
    attn_status s = attn_bert_state_init(e->model, nB, nT, &e->st);
    if (s) {
        e->st_B = e->st_T = 0;
        return s;
    }
    e->st_B = nB, e->st_T = nT;
    return ATTN_STATUS_OK;
}

/* Run states for threads 1 .. nt-1 (thread 0 uses e->st). */
static attn_status embed_ensure_workers(attn_embed *e, int nt) {
    if (nt <= e->n_workers) return ATTN_STATUS_OK;
    attn_bert_state **w = calloc((size_t)nt, sizeof *w);
    int *wb = calloc((size_t)nt, sizeof *wb), *wt = calloc((size_t)nt, sizeof *wt);
    if (!w || !wb || !wt) {
        free(w), free(wb), free(wt);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 1; i < e->n_workers; i++) w[i] = e->wst[i], wb[i] = e->wst_B[i], wt[i] = e->wst_T[i];
    free(e->wst), free(e->wst_B), free(e->wst_T);
    e->wst = w, e->wst_B = wb, e->wst_T = wt, e->n_workers = nt;
    return ATTN_STATUS_OK;
}

/* Make worker t's state (e->st for t = 0) hold B sequences of T tokens. */
static attn_status embed_worker_state(attn_embed *e, int t, int B, int T, attn_bert_state **out) {
    if (t == 0) {
        ATTN_TRY(embed_ensure_state(e, B, T));
        *out = e->st;
        return ATTN_STATUS_OK;
    }
    if (!e->wst[t] || B > e->wst_B[t] || T > e->wst_T[t]) {
        attn_bert_state_free(e->wst[t]);
        e->wst[t] = NULL;
        const int nB = ATTN_MAX(B, e->wst_B[t]), nT = ATTN_MAX(T, e->wst_T[t]);
        e->wst_B[t] = e->wst_T[t] = 0;
        ATTN_TRY(attn_bert_state_init(e->model, nB, nT, &e->wst[t]));
        e->wst_B[t] = nB, e->wst_T[t] = nT;
    }
    *out = e->wst[t];
    return ATTN_STATUS_OK;
}

/* One forward of B sentences (order[0 .. B), the first the longest) on worker t's state, their
 * embeddings into out's rows. */
static attn_status embed_run_batch(attn_embed *e, int t, int32_t *const *ids, const size_t *len,
                                   const size_t *order, int B, float *out) {
    const int C = e->info.dim, T = (int)len[order[0]];
    attn_bert_state *st;
    ATTN_TRY(embed_worker_state(e, t, B, T, &st));
    int32_t *batch = malloc((size_t)B * (size_t)T * sizeof *batch);
    int32_t *blen = malloc((size_t)B * sizeof *blen);
    float *pooled = malloc((size_t)B * (size_t)C * sizeof *pooled);
    attn_status s = ATTN_STATUS_OK;
    if (!batch || !blen || !pooled) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    const int32_t pad = e->info.pad_id >= 0 ? e->info.pad_id : 0;
    for (int b = 0; b < B; b++) {
        const size_t k = order[b];
        memcpy(batch + (size_t)b * (size_t)T, ids[k], len[k] * sizeof *batch);
        for (size_t i = len[k]; i < (size_t)T; i++) batch[(size_t)b * (size_t)T + i] = pad;
        blen[b] = (int32_t)len[k];
    }
    s = attn_bert_forward(e->model, st, B, T, batch, NULL, blen, NULL);
    if (!s) s = attn_bert_pool(e->model, st, e->info.pooling, e->info.normalize, pooled);
    if (!s)
        for (int b = 0; b < B; b++)
            memcpy(out + order[b] * (size_t)C, pooled + (size_t)b * (size_t)C,
                   (size_t)C * sizeof *out);
done:
    free(batch), free(blen), free(pooled);
    return s;
}

/* (key, index) pairs: qsort has no context argument in C11, so the key travels with the index. */
typedef struct {
    double key;
    size_t idx;
} keyed;

/* Larger key first, equal keys by index. */
static int by_key_desc(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static attn_status sort_desc(size_t n, const double *key, size_t *order) {
    keyed *k = malloc((n ? n : 1) * sizeof *k);
    if (!k) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) k[i].key = key[i], k[i].idx = i;
    qsort(k, n, sizeof *k, by_key_desc);
    for (size_t i = 0; i < n; i++) order[i] = k[i].idx;
    free(k);
    return ATTN_STATUS_OK;
}

attn_status attn_embed_encode(attn_embed *e, size_t n, const char *const *texts,
                              const size_t *lens, float *out) {
    if (!e || (n && (!texts || !out)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed: NULL argument");
    if (n == 0) return ATTN_STATUS_OK;
    if (n > (size_t)1 << 40) return attn_fail(ATTN_STATUS_TOO_LARGE, "embed: %zu texts", n);
    int32_t **ids = calloc(n, sizeof *ids);
    size_t *len = calloc(n, sizeof *len), *order = malloc(n * sizeof *order);
    attn_status s = ATTN_STATUS_OK;
    if (!ids || !len || !order) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    /* Tokenize in parallel (the tokenizer is read-only); errors are re-raised on this thread so
     * that attn_last_error() holds the message. */
    const size_t max_len = (size_t)e->info.max_seq_length;
    long long first_bad = -1;
    for (size_t i = 0; i < n; i++)
        if (!texts[i]) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed: text %zu is NULL", i);
            goto done;
        }
#pragma omp parallel for schedule(dynamic, 16) if (n >= 64)
    for (long long i = 0; i < (long long)n; i++) {
        const char *t = texts[i];
        size_t l = lens ? lens[i] : strlen(t);
        if (embed_tokenize_text(e, t, l, max_len, true, (size_t)i, &ids[i], &len[i])) {
#pragma omp critical(embed_first_bad)
            if (first_bad < 0 || i < first_bad) first_bad = i;
        }
    }
    if (first_bad >= 0) {
        size_t i = (size_t)first_bad;
        int32_t *tmp = NULL;
        size_t k;
        s = embed_tokenize_text(e, texts[i], lens ? lens[i] : strlen(texts[i]), max_len, true, i,
                                &tmp, &k);
        free(tmp);
        if (!s) s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed: text %zu failed", i);
        goto done;
    }
    {
        double *key = malloc(n * sizeof *key);
        if (!key) {
            s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < n; i++) key[i] = (double)len[i];
        s = sort_desc(n, key, order);
        free(key);
        if (s) goto done;
    }
    {
        /* Batches of at most batch_size sentences, longest first. With several threads and
         * several batches, each thread runs whole batches on its own run state with one-thread
         * kernels (no barrier inside a forward, no GEMM split across threads: measured faster
         * than threading every kernel), and the batches are as many as a multiple of the
         * threads, equal in size but the last: every thread gets one, and none runs a last odd
         * batch while the others wait (a server's batch of 136 texts in 16s was 9 batches on 2
         * threads). The model computes every sentence's rows alone, so neither changes the
         * results. */
        int nt = 1;
#ifdef _OPENMP
        if (!omp_in_parallel()) nt = attn_get_num_threads();
#endif
        size_t bs = (size_t)e->batch_size, nb = (n + bs - 1) / bs;
        if (nt > 1 && n > 1) {
            nb = (nb + (size_t)nt - 1) / (size_t)nt * (size_t)nt;
            bs = (n + nb - 1) / nb;
            nb = (n + bs - 1) / bs;
        }
        if (nt > 1 && nb > 1) {
            if ((s = embed_ensure_workers(e, nt))) goto done;
            if (nt > (int)nb) nt = (int)nb;
            attn_status first = ATTN_STATUS_OK;
            long long first_at = -1;
            char msg[512] = "";
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
#endif
            for (long long bi = 0; bi < (long long)nb; bi++) {
                int t = 0;
#ifdef _OPENMP
                t = omp_get_thread_num();
#endif
                const size_t at = (size_t)bi * bs;
                const int B = (int)ATTN_MIN(bs, n - at);
                attn_status bs_s = embed_run_batch(e, t, ids, len, order + at, B, out);
                if (bs_s) {
#ifdef _OPENMP
#pragma omp critical(embed_batch_error)
#endif
                    if (first_at < 0 || bi < first_at) {
                        first_at = bi, first = bs_s;
                        snprintf(msg, sizeof msg, "%s", attn_last_error());
                    }
                }
            }
            /* The message was set on a worker: set it again on this thread. */
            if (first) s = attn_fail(first, "%s", msg);
        } else {
            for (size_t at = 0; at < n && !s; at += bs)
                s = embed_run_batch(e, 0, ids, len, order + at, (int)ATTN_MIN(bs, n - at), out);
        }
    }
done:
    if (ids)
        for (size_t i = 0; i < n; i++) free(ids[i]);
    free(ids), free(len), free(order);
    return s;
}

/* ---- similarity ----------------------------------------------------------------------------- */

float attn_embed_cosine(int dim, const float *a, const float *b) {
    if (dim <= 0 || !a || !b) return 0.0f;
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < dim; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    double d = sqrt(aa) * sqrt(bb);
    return (float)(ab / (d > 1e-12 ? d : 1e-12));
}

attn_status attn_embed_rank(int dim, const float *query, size_t n, const float *cands,
                            float *scores, size_t *order) {
    if (dim <= 0 || !query || (n && (!cands || !scores)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "embed_rank: bad arguments (dim %d)", dim);
    for (size_t i = 0; i < n; i++) {
        scores[i] = attn_embed_cosine(dim, query, cands + i * (size_t)dim);
        if (isnan(scores[i]))
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "embed_rank: candidate %zu has a non-finite embedding", i);
    }
    if (!order || !n) return ATTN_STATUS_OK;
    double *key = malloc(n * sizeof *key);
    if (!key) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) key[i] = scores[i];
    attn_status s = sort_desc(n, key, order);
    free(key);
    return s;
}

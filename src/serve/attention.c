/* attention.c — POST /v1/attention of `attn serve`: the attention maps of any served model on a
 * text, through the library's capture (attn_viz.h) as `attn attention` does it: a decoder on the
 * text (and, with "generate": N, on N greedy tokens after it), a BERT encoder on [CLS] text [SEP],
 * a translator on the source and its translation (or a given "target"). Answered as JSON (the
 * maps, optionally one layer) or as the self-contained HTML page of attn_viz_write_html. */
#include "serve.h"

#include "attn_viz.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ATTENTION_MAX_TOKENS 256 /* per sequence: maps grow as T^2 x layers x heads */
/* Most probabilities in one JSON answer (attn_viz_to_json, at most 14 bytes each: ~470 MB):
 * SmolLM2's 30 layers x 9 heads at 256 tokens are 17.7 M; a bigger model asks for one layer at a
 * time ("layer"). Before, the answer was a jansson tree, ~60 bytes a probability. */
#define ATTENTION_MAX_VALUES (1L << 25)

static attn_status html_of(const attn_viz *v, char **out, size_t *len) {
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/attn-serve-XXXXXX", dir && *dir ? dir : "/tmp");
    const int fd = mkstemp(path);
    if (fd < 0) return attn_set_error(ATTN_STATUS_IO, "cannot make a temporary file in %s", path);
    close(fd);
    attn_status s = attn_viz_write_html(v, path);
    FILE *fp = s ? NULL : fopen(path, "rb");
    if (!s && !fp) s = attn_set_error(ATTN_STATUS_IO, "cannot read %s back", path);
    if (fp) {
        fseek(fp, 0, SEEK_END);
        const long n = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        *out = n >= 0 ? malloc((size_t)n + 1) : NULL;
        if (*out && fread(*out, 1, (size_t)n, fp) == (size_t)n) {
            (*out)[n] = '\0';
            *len = (size_t)n;
        } else {
            free(*out), *out = NULL;
            s = attn_set_error(ATTN_STATUS_IO, "cannot read %s back", path);
        }
        fclose(fp);
    }
    unlink(path);
    return s;
}

/* text through tok into *ids (malloc'd, *n in [1, ATTENTION_MAX_TOKENS]); extra: room after. */
static attn_status encode(const attn_tok *tok, const char *text, size_t len, size_t extra,
                          int32_t **ids, int *n) {
    int32_t *enc = NULL;
    size_t k = 0;
    SERVE_TRY(attn_tok_encode_alloc(tok, text, len, &enc, &k));
    attn_status s = ATTN_STATUS_OK;
    if (k == 0 || k > ATTENTION_MAX_TOKENS)
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "the text is %zu tokens; /v1/attention takes 1 to %d", k,
                           ATTENTION_MAX_TOKENS);
    else if (!(*ids = malloc((k + extra + 2) * sizeof **ids)))
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    else
        memcpy(*ids + 1, enc, k * sizeof *enc), *n = (int)k;
    attn_free(enc);
    return s; /* ids[1 .. k]: room for a start token at 0 */
}

/* A translator for m's directory, as `attn attention --model DIR` makes it (one sentence a call),
 * the directory's path taken off the front of an error message (the client did not give it). */
static attn_status hf_viz_translator(const serve_model *m, attn_hf_translator **t) {
    attn_hf_translator_params p = attn_hf_translator_default_params();
    p.max_sentences = 1;
    attn_status s = attn_hf_translator_init(m->encdec, m->path, &p, t);
    const size_t pl = strlen(m->path);
    if (s && !strncmp(attn_last_error(), m->path, pl) && !strncmp(attn_last_error() + pl, ": ", 2)) {
        char msg[600]; /* the message without the server's path */
        snprintf(msg, sizeof msg, "%s", attn_last_error() + pl + 2);
        s = attn_set_error(s, "%s", msg);
    }
    return s;
}

/* A Hugging Face translator (Marian, M2M100 / NLLB) on text and its translation (or target), as
 * `attn attention --model DIR` captures it, with the request's "src_lang" / "tgt_lang" (NLLB
 * codes; Marian's target >>lang<<). The compute thread's translator is busy, so the route has
 * its own, made by the first request and kept (its tokenizers are loaded once: an NLLB
 * directory's tokenizer.json alone is ~17 MB of JSON); a request that finds it in use by another
 * makes one for itself, so concurrent requests do not wait for each other. */
static attn_status hf_capture(serve_model *m, json_t *root, const char *text, const char *target,
                              attn_viz **v) {
    const char *lang[2] = {NULL, NULL};
    static const char *const key[2] = {"src_lang", "tgt_lang"};
    for (int i = 0; i < 2; i++) {
        json_t *l = json_object_get(root, key[i]);
        if (l && !json_is_null(l) && (!json_is_string(l) || !json_string_length(l)))
            return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "'%s' must be a language code",
                                  key[i]);
        lang[i] = json_string_value(l);
    }
    attn_hf_translator *own = NULL, *t = NULL;
    const bool kept = pthread_mutex_trylock(&m->viz_mu) == 0;
    attn_status s = ATTN_STATUS_OK;
    if (kept) {
        if (!m->viz_hf) s = hf_viz_translator(m, &m->viz_hf);
        t = m->viz_hf;
    } else {
        s = hf_viz_translator(m, &own);
        t = own;
    }
    int32_t *src = NULL, *tgt = NULL;
    size_t Ts = 0, n_tgt = 0;
    if (!s) s = attn_hf_translator_set_langs(t, lang[0], lang[1]);
    if (!s)
        s = attn_hf_translator_capture_input(t, text, NULL, 0, target, NULL, 0, &src, &Ts, &tgt,
                                             &n_tgt, NULL);
    if (!s && (Ts > ATTENTION_MAX_TOKENS || n_tgt > ATTENTION_MAX_TOKENS))
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "the source is %zu tokens and the target %zu; /v1/attention takes up "
                           "to %d each",
                           Ts, n_tgt, ATTENTION_MAX_TOKENS);
    if (!s && attn_hf_translator_mt_tok(t))
        s = attn_viz_capture_encdec_mt(m->encdec, attn_hf_translator_mt_tok(t), src, (int)Ts, tgt,
                                       (int)n_tgt, v);
    else if (!s)
        s = attn_viz_capture_encdec(m->encdec, attn_hf_translator_tok(t), src, (int)Ts, tgt,
                                    (int)n_tgt, v);
    if (kept) pthread_mutex_unlock(&m->viz_mu);
    attn_free(src), attn_free(tgt);
    attn_hf_translator_free(own);
    return s;
}

void serve_attention(serve_engine *e, json_t *root, serve_response *r);
void serve_attention(serve_engine *e, json_t *root, serve_response *r) {
    json_t *in = json_object_get(root, "input"), *tg = json_object_get(root, "target");
    json_t *fmt = json_object_get(root, "format"), *ly = json_object_get(root, "layer");
    json_t *gen = json_object_get(root, "generate");
    const char *f = fmt && !json_is_null(fmt) ? json_string_value(fmt) : "json";
    if (!json_is_string(in) || json_string_length(in) == 0) {
        serve_error(r, 400, "invalid_request_error", "'input' must be a non-empty string");
        return;
    }
    if (!f || (strcmp(f, "json") && strcmp(f, "html"))) {
        serve_error(r, 400, "invalid_request_error", "'format' must be \"json\" or \"html\"");
        return;
    }
    if (tg && !json_is_null(tg) && !json_is_string(tg)) {
        serve_error(r, 400, "invalid_request_error", "'target' must be a string");
        return;
    }
    if (ly && !json_is_null(ly) && (!json_is_integer(ly) || json_integer_value(ly) < 0)) {
        serve_error(r, 400, "invalid_request_error", "'layer' must be an integer >= 0");
        return;
    }
    if (gen && !json_is_null(gen) &&
        (!json_is_integer(gen) || json_integer_value(gen) < 0 || json_integer_value(gen) > 64)) {
        serve_error(r, 400, "invalid_request_error", "'generate' must be an integer from 0 to 64");
        return;
    }
    serve_model *m = NULL;
    json_t *mv = json_object_get(root, "model");
    if (json_is_string(mv)) {
        m = serve_engine_find(e, json_string_value(mv));
        if (!m) {
            serve_error(r, 404, "not_found_error", "The model '%s' does not exist",
                        json_string_value(mv));
            return;
        }
    } else if (e->n_models == 1 && (!mv || json_is_null(mv))) {
        m = e->models[0];
    } else {
        serve_error(r, 400, "invalid_request_error", "'model' must name one of the served models");
        return;
    }
    const char *text = json_string_value(in);
    const size_t tlen = json_string_length(in);
    attn_viz *v = NULL;
    int32_t *ids = NULL, *tgt = NULL;
    int n = 0, n_tgt = 0;
    attn_status s;
    if (m->kind == SERVE_EMBED) {
        const int cap = attn_embed_get_info(m->embed)->max_seq_length;
        ids = malloc((size_t)cap * sizeof *ids);
        size_t k = 0;
        s = ids ? attn_embed_tokenize(m->embed, text, tlen, ids, (size_t)cap, &k)
                : attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        if (!s && k > ATTENTION_MAX_TOKENS)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "the text is %zu tokens; at most %d",
                               k, ATTENTION_MAX_TOKENS);
        if (!s) s = attn_viz_capture_bert(attn_embed_model(m->embed), m->tok, ids, NULL, (int)k, &v);
    } else if (m->kind == SERVE_GEN) {
        const int g = gen && json_is_integer(gen) ? (int)json_integer_value(gen) : 0;
        s = encode(m->gpt_tok, text, tlen, (size_t)g, &ids, &n);
        if (!s && g > 0) {
            attn_gen_params gp = attn_gen_default_params();
            gp.greedy = true;
            attn_gen_stats st;
            s = attn_gen_gpt(m->gpt, &gp, ids + 1, n, g, m->gpt->cfg.eos_token_id, ids + 1 + n,
                             NULL, NULL, &st);
            if (!s) n += st.n_generated;
            if (n > m->gpt->cfg.n_positions) n = m->gpt->cfg.n_positions;
        }
        if (!s) s = attn_viz_capture_gpt(m->gpt, m->gpt_tok, ids + 1, n, &v);
    } else if (m->hf) {
        /* NUL-terminated: the JSON parser refuses \u0000 */
        s = hf_capture(m, root, text, json_is_string(tg) ? json_string_value(tg) : NULL, &v);
    } else {
        s = encode(m->mt_tok, text, tlen, 0, &ids, &n);
        if (!s) ids[n + 1] = m->to.eos_id; /* the source: ids + </s> at ids[1 .. n + 1] */
        char *out = NULL;
        const char *target = json_is_string(tg) ? json_string_value(tg) : NULL;
        size_t target_len = json_is_string(tg) ? json_string_length(tg) : 0;
        if (!s && !target) { /* translate first (a session of its own: the worker's is busy) */
            const char *t1[1] = {text};
            const int L = m->encdec->cfg.max_len;
            attn_translate_session *ts = NULL;
            s = attn_translate_session_init(m->encdec, 1, m->to.beam_size, L, L, &ts);
            if (!s) s = attn_translate_texts(ts, &m->to, m->mt_tok, t1, 1, &out, NULL, NULL);
            attn_translate_session_free(ts);
            target = out, target_len = out ? strlen(out) : 0;
        }
        int32_t *enc = NULL;
        size_t k = 0;
        if (!s) s = attn_tok_encode_alloc(m->mt_tok, target, target_len, &enc, &k);
        if (!s && k + 2 > ATTENTION_MAX_TOKENS)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "the target is %zu tokens", k);
        if (!s && !(tgt = malloc((k + 2) * sizeof *tgt)))
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        if (!s) {
            tgt[0] = m->to.bos_id;
            memcpy(tgt + 1, enc, k * sizeof *enc);
            tgt[k + 1] = m->to.eos_id, n_tgt = (int)k + 2;
            s = attn_viz_capture_encdec(m->encdec, m->mt_tok, ids + 1, n + 1, tgt, n_tgt, &v);
        }
        attn_free(enc);
        attn_free(out);
    }
    free(ids);
    free(tgt);
    if (s) {
        serve_error(r, s == ATTN_STATUS_OUT_OF_MEMORY ? 500 : 400,
                    s == ATTN_STATUS_OUT_OF_MEMORY ? "server_error" : "invalid_request_error",
                    "%s", attn_last_error());
        attn_viz_free(v);
        return;
    }
    if (!strcmp(f, "html")) {
        char *page = NULL;
        size_t len = 0;
        if (html_of(v, &page, &len)) {
            serve_error(r, 500, "server_error", "%s", attn_last_error());
        } else {
            r->status = 200;
            r->type = "text/html; charset=utf-8";
            r->body = page;
            r->len = len;
        }
        attn_viz_free(v);
        return;
    }
    const int want = ly && json_is_integer(ly) ? (int)json_integer_value(ly) : -1;
    char *body = NULL;
    size_t len = 0;
    s = attn_viz_to_json(v, m->name, want, ATTENTION_MAX_VALUES, &body, &len);
    attn_viz_free(v);
    if (s) {
        serve_error(r, s == ATTN_STATUS_OUT_OF_MEMORY ? 500 : 400,
                    s == ATTN_STATUS_OUT_OF_MEMORY ? "server_error" : "invalid_request_error",
                    "%s%s", attn_last_error(), s == ATTN_STATUS_OUT_OF_MEMORY ? "" : " ('layer')");
        return;
    }
    r->status = 200;
    r->type = "application/json";
    r->body = body;
    r->len = len;
}

/* engine.c — the models `attn serve` serves and the compute thread that runs their work
 * (serve.h: serve_engine_run, on the program's first thread; each model's work one unit at a time
 * in turn: a generation step, an embedding or translation batch).
 *   embeddings   the texts of every waiting request, up to max_batch_tokens tokens, go through
 *                one attn_embed_encode call (sorted into batches there); each text's embedding
 *                does not depend on the others (attn_embed.h), so a batched request gets exactly
 *                what it would get alone;
 *   translation  the same with attn_translate_texts (attn_infer.h: results independent of the
 *                batch), or for a Hugging Face directory attn_hf_translator_texts, one language
 *                pair per batch (attn_hf_translator_set_langs);
 *   generation   continuous batching: `slots` slots, each a sequence of one shared ragged KV
 *                cache (attn_gpt_kv_init_slots) with its own sampler and streaming
 *                detokenizer. Each iteration of the scheduler admits waiting requests into free
 *                slots, then runs ONE pass (attn_gpt_decode_batch: (rows, C) products over the
 *                weights, attention per slot at its own position) that advances every running
 *                slot by one token and feeds new slots' prompts (up to the pass's rows: a long
 *                prompt continues in the next passes), so a request joins and leaves between
 *                two iterations and concurrent streams share the weights' reads. The sampler
 *                draws are attn_gen_session_generate's; a batched pass's logits equal a batch-1
 *                decode's to float rounding (tests/test_ragged.c: ~1e-7 relative), so a request
 *                gives what `attn generate` / `attn chat` give unless two candidates tie to
 *                that precision. */
#include "serve.h"

#include "../cli/gen_opts.h"
#include "attn_quant.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

serve_config serve_default_config(void) {
    serve_config c;
    memset(&c, 0, sizeof c);
    c.host = "127.0.0.1";
    c.port = 8080;
    c.max_body = (size_t)1 << 20;
    c.max_depth = 32;
    c.max_input_tokens = 8192;
    c.max_tokens = 4096;
    c.max_texts = 2048;
    c.max_batch_tokens = 16384;
    c.slots = 8;
    c.ctx = 0;
    c.quant_act = ATTN_QUANT_ACT_F32;
    c.prompt_cache = true;
    c.max_queue = 256;
    c.timeout = 30;
    return c;
}

const char *serve_kind_name(serve_kind k) {
    return k == SERVE_EMBED ? "embedding" : k == SERVE_GEN ? "generation" : "translation";
}

double serve_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- jobs ------------------------------------------------------------------------------------ */

void serve_job_release(serve_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    const int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) return;
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j->lens);
    free(j->texts);
    free(j->emb);
    if (j->out) {
        for (size_t i = 0; i < j->n; i++) attn_free(j->out[i]);
        free(j->out);
    }
    free(j->ids);
    free(j->text);
    free(j->sse);
    json_decref(j->json);
    for (int i = 0; i < j->n_stops; i++) free((char *)j->stops[i]);
    free(j);
}

static void finish_locked(serve_job *j, attn_status s, int http_status, const char *msg) {
    if (j->done) return;
    j->done = true;
    j->status = s;
    j->http_status = s ? (http_status ? http_status : 500) : 200;
    if (s) snprintf(j->msg, sizeof j->msg, "%s", msg && *msg ? msg : attn_status_str(s));
    pthread_cond_broadcast(&j->cv);
}

void serve_job_finish(serve_job *j, attn_status s, int http_status, const char *msg) {
    pthread_mutex_lock(&j->mu);
    finish_locked(j, s, http_status, msg);
    pthread_mutex_unlock(&j->mu);
}

/* ---- embeddings and translation: batches of whole requests ----------------------------------- */

static bool same_lang(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* Take the first waiting job and those after it that keep the batch within max_batch_tokens
 * (the first always goes) and, for a Hugging Face translator, ask for the first one's languages.
 * Under m->mu. */
static int take_batch(serve_model *m, serve_job **batch, int cap) {
    int k = 0, tokens = 0;
    while (k < cap && m->n_queue > 0) {
        serve_job *j = m->queue[0];
        if (k > 0 && tokens + j->n_tokens > m->eng->cfg.max_batch_tokens) break;
        if (k > 0 && m->hf &&
            !(same_lang(j->src_lang, batch[0]->src_lang) && same_lang(j->tgt_lang, batch[0]->tgt_lang)))
            break;
        tokens += j->n_tokens;
        batch[k++] = j;
        memmove(m->queue, m->queue + 1, (size_t)(m->n_queue - 1) * sizeof *m->queue);
        m->n_queue--;
    }
    return k;
}

static void run_text_batch(serve_model *m, serve_job **batch, int k) {
    size_t n = 0;
    for (int i = 0; i < k; i++)
        if (!atomic_load(&batch[i]->cancelled)) n += batch[i]->n;
    const char **texts = malloc((n ? n : 1) * sizeof *texts);
    size_t *lens = malloc((n ? n : 1) * sizeof *lens);
    float *emb = NULL;
    char **out = NULL;
    attn_status s = ATTN_STATUS_OK;
    if (m->kind == SERVE_EMBED) emb = malloc((n ? n : 1) * (size_t)m->dim * sizeof *emb);
    else out = calloc(n ? n : 1, sizeof *out);
    if (!texts || !lens || (!emb && !out))
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "serve: out of memory");
    size_t at = 0;
    for (int i = 0; i < k && !s; i++) {
        if (atomic_load(&batch[i]->cancelled)) continue;
        memcpy(texts + at, batch[i]->texts, batch[i]->n * sizeof *texts);
        memcpy(lens + at, batch[i]->lens, batch[i]->n * sizeof *lens);
        at += batch[i]->n;
    }
    if (!s && n) {
        if (m->kind == SERVE_EMBED) {
            s = attn_embed_encode(m->embed, n, texts, lens, emb);
        } else if (m->hf) {
            /* NUL-terminated texts (the request's JSON strings are), in batches of the
             * translator's max_sentences, as `attn translate --model DIR` runs them. */
            s = attn_hf_translator_set_langs(m->hf, batch[0]->src_lang, batch[0]->tgt_lang);
            if (!s) s = attn_hf_translator_texts(m->hf, texts, n, out, NULL);
        } else {
            /* attn_translate_texts takes NUL-terminated texts: the request's JSON strings are. */
            s = attn_translate_texts(m->ts, &m->to, m->mt_tok, texts, n, out, NULL, NULL);
        }
    }
    atomic_fetch_add(&m->eng->met.batches, 1);
    atomic_fetch_add(&m->eng->met.batch_items, (long long)n);
    const char *msg = s ? attn_last_error() : NULL;
    at = 0;
    for (int i = 0; i < k; i++) {
        serve_job *j = batch[i];
        if (atomic_load(&j->cancelled)) {
            serve_job_finish(j, ATTN_STATUS_INVALID_ARGUMENT, 499, "cancelled");
        } else if (s) {
            serve_job_finish(j, s, 500, msg);
            at += j->n;
        } else {
            if (emb) {
                j->emb = malloc((j->n ? j->n : 1) * (size_t)m->dim * sizeof *j->emb);
                if (j->emb) memcpy(j->emb, emb + at * (size_t)m->dim, j->n * (size_t)m->dim * sizeof *emb);
            } else {
                j->out = calloc(j->n ? j->n : 1, sizeof *j->out);
                if (j->out) memcpy(j->out, out + at, j->n * sizeof *out), memset(out + at, 0, j->n * sizeof *out);
            }
            at += j->n;
            if (emb ? !j->emb : !j->out)
                serve_job_finish(j, ATTN_STATUS_OUT_OF_MEMORY, 500, "serve: out of memory");
            else
                serve_job_finish(j, ATTN_STATUS_OK, 200, NULL);
        }
        serve_job_release(j);
    }
    if (out)
        for (size_t i = 0; i < n; i++) attn_free(out[i]);
    free(out);
    free(emb);
    free(texts);
    free(lens);
}

/* ---- generation: slots ---------------------------------------------------------------------- */

typedef struct {
    serve_job *job;          /* NULL: free */
    attn_gen_sampler *smp;
    attn_gen_stream *ts;
    const int32_t *stop_ids;
    int n_stop;
    int max_T;               /* positions this request may fill */
    int i;                   /* tokens generated so far */
    int32_t last;            /* the token to feed next */
    int fed;                 /* prompt tokens in the cache so far */
    bool prefilled;          /* the whole prompt is */
    int32_t *hist;           /* (cap_hist) the tokens whose keys / values the slot's sequence
                                holds, in order: what the next request may reuse */
    int n_hist, cap_hist;
    bool hist_ok;            /* hist is what the sequence holds (false after an error) */
    unsigned long long used; /* when its last request ended (the least recently used goes first) */
} slot;

/* A decoder model's scheduler state (serve_model.slots). */
typedef struct {
    slot *sl;                /* [slots] */
    attn_gpt_kv *kv;         /* every slot's cache: slot i is sequence i (made on first use) */
    float *logits;           /* (slots, V): a pass's rows, one per slot in it */
    int32_t *seqs, *counts;  /* (slots): the slots of a pass and how many tokens each feeds */
    int32_t *toks;           /* (rows): the tokens fed */
    int rows;                /* the most tokens one pass feeds (the cache's scratch rows) */
    unsigned long long clock; /* requests ended so far (slot.used) */
} gen_state;

static attn_status gen_state_new(serve_model *m) {
    const int n = m->eng->cfg.slots;
    gen_state *g = calloc(1, sizeof *g);
    if (!g) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "serve: out of memory");
    m->slots = g;
    g->sl = calloc((size_t)n, sizeof *g->sl);
    /* attn_gpt_kv_init_slots' scratch rows: max(slots, min(ctx, 256)) */
    g->rows = m->ctx < 256 ? m->ctx : 256;
    if (g->rows < n) g->rows = n;
    g->seqs = malloc((size_t)n * sizeof *g->seqs);
    g->counts = malloc((size_t)n * sizeof *g->counts);
    g->toks = malloc((size_t)g->rows * sizeof *g->toks);
    g->logits = malloc((size_t)n * m->gpt->cfg.vocab_size * sizeof *g->logits);
    if (!g->sl || !g->seqs || !g->counts || !g->toks || !g->logits)
        return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "serve: out of memory");
    /* The slots' shared cache, made now as llama-server makes its KV cache at load: a size the
     * machine cannot hold stops the server at its start with the reason, and the first request
     * does not wait for it (16 slots x 1024 positions of SmolLM2: 383 MB of transposed keys
     * written at once, ~1.5 s on a VM that backs fresh memory slowly). */
    attn_gpt_kv_params kp = attn_gpt_kv_default_params();
    kp.slots = true;
    kp.f16 = m->eng->cfg.kv_f16;
    SERVE_TRY(attn_gpt_kv_init_params(m->gpt, n, m->ctx, &kp, &g->kv));
    attn_gpt_kv_set_quant_act(g->kv, m->eng->cfg.quant_act);
    return ATTN_STATUS_OK;
}

static void gen_state_free(serve_model *m) {
    gen_state *g = m->slots;
    if (!g) return;
    attn_gpt_kv_free(g->kv);
    free(g->logits);
    for (int i = 0; g->sl && i < m->eng->cfg.slots; i++) free(g->sl[i].hist);
    free(g->sl);
    free(g->seqs);
    free(g->counts);
    free(g->toks);
    free(g);
    m->slots = NULL;
}

/* ---- the prompt cache: a slot keeps its sequence after a request (hist says what it holds);
 * the next request on it feeds only what follows the longest common prefix (llama-server's
 * cache_prompt). A row's numbers do not depend on the pass it is in (with --quant-act q8 every
 * product quantizes its rows, prompts too: attn_gpt_decode_seq), so the cached keys and values
 * are those `attn generate` computes. */

/* Tokens t (n) appended to the slot's history; out of memory, the history is dropped. */
static void hist_push(slot *sl, const int32_t *t, int n) {
    if (!sl->hist_ok || n <= 0) return;
    if (sl->n_hist > sl->cap_hist - n) {
        int cap = sl->cap_hist ? sl->cap_hist : 64;
        while (cap < sl->n_hist + n) cap *= 2;
        int32_t *h = realloc(sl->hist, (size_t)cap * sizeof *h);
        if (!h) {
            sl->hist_ok = false;
            return;
        }
        sl->hist = h, sl->cap_hist = cap;
    }
    memcpy(sl->hist + sl->n_hist, t, (size_t)n * sizeof *t);
    sl->n_hist += n;
}

/* The prompt tokens of job j that slot sl's cache can give: the longest common prefix of its
 * history and the prompt, less what must be computed again (the last prompt token, for its
 * logits). */
static int cached_prefix(const serve_model *m, const slot *sl, const serve_job *j) {
    if (!m->eng->cfg.prompt_cache || !sl->hist_ok) return 0;
    int l = 0;
    while (l < sl->n_hist && l < j->n_ids && sl->hist[l] == j->ids[l]) l++;
    const int keep = j->n_ids - 1;
    return l < keep ? l : keep > 0 ? keep : 0;
}

/* What slot c's cache can give job j: cached_prefix, when its cache holds its history (its
 * keys and values are those of hist's tokens). */
static int slot_prefix(const serve_model *m, const gen_state *g, int c, const serve_job *j) {
    return attn_gpt_kv_seq_len(g->kv, c) == g->sl[c].n_hist ? cached_prefix(m, &g->sl[c], j) : 0;
}

static void slot_end(serve_model *m, slot *sl, attn_status s, const char *finish) {
    serve_job *j = sl->job;
    gen_state *g = m->slots;
    if (s) sl->hist_ok = false; /* the sequence's state is not known: reuse nothing */
    sl->used = ++g->clock;
    const char *rest = "";
    size_t n_rest = 0;
    if (!s && sl->ts) s = attn_gen_stream_finish(sl->ts, &rest, &n_rest);
    pthread_mutex_lock(&j->mu);
    if (!s) {
        serve_gen_emit(j, rest, n_rest, finish);
        finish_locked(j, ATTN_STATUS_OK, 200, NULL);
    } else if (atomic_load(&j->cancelled)) {
        finish_locked(j, s, 499, "cancelled");
    } else {
        finish_locked(j, s, 500, attn_last_error());
    }
    pthread_mutex_unlock(&j->mu);
    atomic_fetch_add(&m->eng->met.tokens_out, sl->i);
    attn_gen_sampler_free(sl->smp);
    attn_gen_stream_free(sl->ts);
    sl->smp = NULL, sl->ts = NULL;
    serve_job_release(j);
    pthread_mutex_lock(&m->mu);
    sl->job = NULL;
    m->n_active--;
    pthread_mutex_unlock(&m->mu);
}

/* Set slot k up for its job: the slot's sequence emptied (every request starts from an empty
 * cache), its sampler and streaming detokenizer. */
static attn_status slot_begin(serve_model *m, gen_state *g, int k) {
    slot *sl = &g->sl[k];
    serve_job *j = sl->job;
    const int V = m->gpt->cfg.vocab_size;
    /* the cached prefix stays (its keys and values are those this prompt would compute) */
    const int own = slot_prefix(m, g, k, j);
    /* another slot, busy or free, holding more of the prompt (concurrent requests sharing a
     * prompt, or a conversation whose slot is taken): the rest of that prefix is copied from it
     * (attn_gpt_kv_seq_copy: its keys and values, those this prompt would compute) */
    int p = own, src = -1;
    for (int c = 0; c < m->eng->cfg.slots; c++) {
        const int l = c == k ? 0 : slot_prefix(m, g, c, j);
        if (l > p) p = l, src = c;
    }
    sl->hist_ok = false;
    SERVE_TRY(attn_gpt_kv_seq_truncate(g->kv, k, own));
    if (src >= 0) SERVE_TRY(attn_gpt_kv_seq_copy(g->kv, k, src, p));
    sl->n_hist = own, sl->hist_ok = true;
    hist_push(sl, j->ids + own, p - own); /* out of memory: hist_ok false, nothing reused later */
    atomic_fetch_add(&m->eng->met.prompt_cached, p);
    atomic_fetch_add(&m->eng->met.prompt_shared, p - own);
    sl->i = 0, sl->fed = p, sl->prefilled = false;
    /* The positions fed: the prompt and every generated token but the last (attn_gen_gpt). */
    const long long need = (long long)j->n_ids + j->max_new - 1;
    sl->max_T = (int)(need < m->ctx ? need : m->ctx);
    sl->stop_ids = j->chat ? m->chat_stop_ids : m->stop_ids;
    sl->n_stop = j->chat ? m->n_chat_stop_ids : m->n_stop_ids;
    SERVE_TRY(attn_gen_sampler_init(&j->gp, V, &sl->smp));
    if (j->gp.repetition_penalty != 1.0f)
        SERVE_TRY(attn_gen_sampler_observe(sl->smp, j->ids, (size_t)j->n_ids));
    /* The stream's context: the whole prompt (attn generate) or its last 16 tokens (attn chat). */
    const int ctxn = j->chat && j->n_ids > 16 ? 16 : j->n_ids;
    SERVE_TRY(attn_gen_stream_init(m->gpt_tok, j->ids + j->n_ids - ctxn, (size_t)ctxn, &sl->ts));
    return attn_gen_stream_set_stops(sl->ts, j->stops, (size_t)j->n_stops);
}

/* Slot k's next token from its logits (V): the rest of attn_gen_session_generate's loop body
 * (sample, stream, stop). */
static void slot_take(serve_model *m, gen_state *g, int k, const float *logits) {
    slot *sl = &g->sl[k];
    serve_job *j = sl->job;
    int32_t tok = 0;
    attn_status s = attn_gen_sampler_next(sl->smp, logits, (uint64_t)sl->i, &tok);
    if (s) {
        slot_end(m, sl, s, NULL);
        return;
    }
    sl->i++;
    if (j->gp.repetition_penalty != 1.0f) attn_gen_sampler_observe(sl->smp, &tok, 1);
    const char *piece;
    size_t n;
    s = attn_gen_stream_push(sl->ts, tok, &piece, &n);
    if (s) {
        slot_end(m, sl, s, NULL);
        return;
    }
    pthread_mutex_lock(&j->mu);
    j->n_gen = sl->i;
    serve_gen_emit(j, piece, n, NULL);
    pthread_mutex_unlock(&j->mu);
    bool eos = false;
    for (int q = 0; q < sl->n_stop; q++) eos |= sl->stop_ids[q] == tok;
    if (eos || attn_gen_stream_stopped(sl->ts)) {
        slot_end(m, sl, ATTN_STATUS_OK, "stop");
        return;
    }
    if (sl->i == j->max_new || attn_gpt_kv_seq_len(g->kv, k) >= sl->max_T) {
        slot_end(m, sl, ATTN_STATUS_OK, "length");
        return;
    }
    sl->last = tok;
}

/* Admit waiting jobs into free slots. Under m->mu; the slots' setup runs unlocked by the caller
 * (slot_begin), so this only moves jobs. Returns the slots to set up in `fresh`. */
static int admit(serve_model *m, int *fresh) {
    const gen_state *g = m->slots;
    slot *sl = g->sl;
    const int n_slots = m->eng->cfg.slots;
    int k = 0;
    while (m->n_queue > 0) {
        const serve_job *j = m->queue[0];
        /* the longest prefix of the prompt any slot's cache holds, busy slots included */
        int best = 0;
        for (int c = 0; c < n_slots; c++) {
            const int l = slot_prefix(m, g, c, j);
            if (l > best) best = l;
        }
        /* a free slot holding it, when taking it loses nothing the prompt does not have: its
         * whole history is a prefix of the prompt (a conversation's next turn, an empty slot)
         * or it holds all the prompt but its last token (the same prompt again); else the least
         * recently used free slot, which slot_begin fills from the slot holding that prefix (a
         * copy): taking the free slot with the most of the prompt instead (before) let two
         * questions after one system prompt evict each other's slot at every turn */
        int i = -1;
        for (int c = 0; c < n_slots; c++) {
            if (sl[c].job) continue;
            const int l = slot_prefix(m, g, c, j);
            if (l == best && (l >= sl[c].n_hist || l == j->n_ids - 1) &&
                (i < 0 || sl[c].used < sl[i].used))
                i = c;
        }
        if (i < 0) /* none: the least recently used free slot */
            for (int c = 0; c < n_slots; c++)
                if (!sl[c].job && (i < 0 || sl[c].used < sl[i].used)) i = c;
        if (i < 0) break;
        sl[i].job = m->queue[0];
        memmove(m->queue, m->queue + 1, (size_t)(m->n_queue - 1) * sizeof *m->queue);
        m->n_queue--;
        m->n_active++;
        fresh[k++] = i;
    }
    return k;
}

/* One scheduler iteration over the active slots (the compute thread, or inline): the slots the
 * client left are freed; then ONE pass (attn_gpt_decode_batch: the weights read once for all its
 * rows) advances every running slot by one token, each at its own position, and feeds the new
 * slots' prompts (in slot order, as many tokens as the pass has rows left: a long prompt goes on
 * in the next iterations); a slot whose prompt is complete takes its first token. Only the
 * compute thread changes slots, so it reads them without the lock. */
static void gen_iteration(serve_model *m, const int *fresh, int n_fresh) {
    gen_state *g = m->slots;
    slot *sl = g->sl;
    const int n_slots = m->eng->cfg.slots, V = m->gpt->cfg.vocab_size;
    for (int k = 0; k < n_fresh; k++) {
        attn_status s = slot_begin(m, g, fresh[k]);
        if (s) slot_end(m, &sl[fresh[k]], s, NULL);
    }
    for (int i = 0; i < n_slots; i++)
        if (sl[i].job && atomic_load(&sl[i].job->cancelled)) {
            atomic_fetch_add(&m->eng->met.cancelled, 1);
            slot_end(m, &sl[i], attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "cancelled"), NULL);
        }
    int n = 0, rows = 0;
    for (int i = 0; i < n_slots; i++)
        if (sl[i].job && sl[i].prefilled)
            g->seqs[n] = i, g->counts[n] = 1, g->toks[rows++] = sl[i].last, n++;
    const int stepped = n;
    for (int i = 0; i < n_slots && rows < g->rows; i++) {
        if (!sl[i].job || sl[i].prefilled) continue;
        const serve_job *j = sl[i].job;
        const int left = j->n_ids - sl[i].fed, room = g->rows - rows;
        const int c = left < room ? left : room;
        memcpy(g->toks + rows, j->ids + sl[i].fed, (size_t)c * sizeof *g->toks);
        g->seqs[n] = i, g->counts[n] = c, n++;
        rows += c;
    }
    if (!n) return;
    attn_status s = attn_gpt_decode_batch(m->gpt, g->kv, n, g->seqs, g->counts, g->toks,
                                          g->logits);
    for (int k = 0; k < n; k++) {
        slot *q = &sl[g->seqs[k]];
        if (s) {
            slot_end(m, q, s, NULL);
            continue;
        }
        if (k < stepped) {
            hist_push(q, &q->last, 1);
        } else { /* a prompt's tokens */
            hist_push(q, q->job->ids + q->fed, g->counts[k]);
            q->fed += g->counts[k];
            atomic_fetch_add(&m->eng->met.tokens_in, g->counts[k]);
            if (q->fed < q->job->n_ids) continue;
            q->prefilled = true;
        }
        slot_take(m, g, g->seqs[k], g->logits + (size_t)k * V);
    }
    atomic_fetch_add(&m->eng->met.gen_steps, 1);
    atomic_fetch_add(&m->eng->met.gen_step_slots, n);
}

/* ---- the compute thread ---------------------------------------------------------------------- */

/* One unit of m's work, if it has some: a generation step over its slots (new requests admitted
 * first) or one batch of its queue. Returns whether it did something. batch: (cap) jobs, fresh:
 * (slots) slot indices, scratch. */
static bool model_step(serve_model *m, serve_job **batch, int cap, int *fresh) {
    pthread_mutex_lock(&m->mu);
    if (m->stop) {
        pthread_mutex_unlock(&m->mu);
        return false;
    }
    if (m->kind == SERVE_GEN) {
        const int n_fresh = admit(m, fresh);
        if (m->n_active == 0) {
            pthread_mutex_unlock(&m->mu);
            return false;
        }
        pthread_mutex_unlock(&m->mu);
        gen_iteration(m, fresh, n_fresh);
        return true;
    }
    if (m->n_queue == 0) {
        pthread_mutex_unlock(&m->mu);
        return false;
    }
    const int k = take_batch(m, batch, cap);
    pthread_mutex_unlock(&m->mu);
    run_text_batch(m, batch, k);
    return true;
}

void serve_engine_run(serve_engine *e) {
    const int cap = e->cfg.max_queue;
    serve_job **batch = malloc((size_t)cap * sizeof *batch);
    int *fresh = malloc((size_t)e->cfg.slots * sizeof *fresh);
    pthread_mutex_lock(&e->mu);
    e->running = batch && fresh && !e->stop;
    bool go = e->running;
    pthread_mutex_unlock(&e->mu);
    while (go) {
        bool did = false;
        for (int i = 0; i < e->n_models; i++) did |= model_step(e->models[i], batch, cap, fresh);
        pthread_mutex_lock(&e->mu);
        /* nothing done: sleep until serve_submit queues work (wake) or serve_engine_stop */
        while (!did && !e->wake && !e->stop) pthread_cond_wait(&e->cv, &e->mu);
        e->wake = false;
        go = !e->stop;
        pthread_mutex_unlock(&e->mu);
    }
    pthread_mutex_lock(&e->mu);
    e->running = false;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    free(batch);
    free(fresh);
}

attn_status serve_submit(serve_engine *e, serve_job *j, int *http_status) {
    serve_model *m = j->model;
    *http_status = 200;
    if (atomic_load(&e->draining)) {
        *http_status = 503;
        return attn_set_error(ATTN_STATUS_UNSUPPORTED, "the server is shutting down");
    }
    pthread_mutex_lock(&m->mu);
    if (m->n_queue >= e->cfg.max_queue) {
        pthread_mutex_unlock(&m->mu);
        *http_status = 429;
        return attn_set_error(ATTN_STATUS_TOO_LARGE,
                              "too many waiting requests for model '%s' (%d): try again later",
                              m->name, e->cfg.max_queue);
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    j->t_start = serve_now();
    m->queue[m->n_queue++] = j;
    pthread_mutex_unlock(&m->mu);
    if (!e->cfg.inline_work) {
        pthread_mutex_lock(&e->mu);
        e->wake = true;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        return ATTN_STATUS_OK;
    }
    /* Inline: run until nothing waits or runs. */
    serve_job **batch = malloc((size_t)e->cfg.max_queue * sizeof *batch);
    int *fresh = malloc((size_t)e->cfg.slots * sizeof *fresh);
    attn_status s = ATTN_STATUS_OK;
    if (!batch || !fresh) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "serve: out of memory");
    while (!s && model_step(m, batch, e->cfg.max_queue, fresh)) {
    }
    free(batch);
    free(fresh);
    return s;
}

/* ---- models --------------------------------------------------------------------------------- */

attn_status serve_engine_init(const serve_config *cfg, serve_engine **out) {
    *out = NULL;
    serve_engine *e = calloc(1, sizeof *e);
    if (!e) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "serve: out of memory");
    e->cfg = *cfg;
    if (e->cfg.slots < 1) e->cfg.slots = 1;
    if (e->cfg.max_queue < 1) e->cfg.max_queue = 1;
    e->t_start = serve_now();
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    *out = e;
    return ATTN_STATUS_OK;
}

serve_model *serve_engine_find(serve_engine *e, const char *name) {
    for (int i = 0; i < e->n_models; i++)
        if (!strcmp(e->models[i]->name, name)) return e->models[i];
    return NULL;
}

/* End every job m holds (503); the compute thread has stopped. */
static void model_stop(serve_model *m) {
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < m->n_queue; i++) {
        serve_job_finish(m->queue[i], ATTN_STATUS_UNSUPPORTED, 503, "the server is shutting down");
        serve_job_release(m->queue[i]);
    }
    m->n_queue = 0;
    slot *sl = m->slots ? ((gen_state *)m->slots)->sl : NULL;
    for (int i = 0; sl && i < m->eng->cfg.slots; i++) {
        if (!sl[i].job) continue;
        attn_gen_sampler_free(sl[i].smp);
        attn_gen_stream_free(sl[i].ts);
        sl[i].smp = NULL, sl[i].ts = NULL;
        serve_job_finish(sl[i].job, ATTN_STATUS_UNSUPPORTED, 503, "the server is shutting down");
        serve_job_release(sl[i].job);
        sl[i].job = NULL;
    }
    m->n_active = 0;
}

void serve_engine_stop(serve_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_broadcast(&e->cv);
    while (e->running) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < e->n_models; i++) model_stop(e->models[i]);
}

static void model_free(serve_model *m) {
    if (!m) return;
    model_stop(m);
    gen_state_free(m);
    free(m->queue);
    pthread_mutex_destroy(&m->mu);
    attn_embed_free(m->embed);
    attn_chat_template_free(m->tpl);
    attn_tok_free(m->gpt_tok);
    attn_gpt_model_free(m->gpt);
    attn_translate_session_free(m->ts);
    attn_tok_free(m->mt_tok);
    attn_hf_translator_free(m->hf);
    attn_hf_translator_free(m->viz_hf);
    pthread_mutex_destroy(&m->viz_mu);
    attn_encdec_model_free(m->encdec);
    free(m->name);
    free(m->path);
    free(m);
}

void serve_engine_free(serve_engine *e) {
    if (!e) return;
    serve_engine_stop(e);
    for (int i = 0; i < e->n_models; i++) model_free(e->models[i]);
    free(e->models);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

static attn_status model_new(serve_engine *e, const char *name, const char *path,
                             serve_model **out) {
    *out = NULL;
    if (!*name || strlen(name) > 128)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "model name '%s': 1 to 128 bytes", name);
    for (const char *c = name; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == '"' || *c == '\\' || (unsigned char)*c >= 0x7f)
            return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                  "model name '%s': printable ASCII without spaces, quotes or "
                                  "backslashes",
                                  name);
    if (serve_engine_find(e, name))
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "model name '%s' given twice", name);
    serve_model *m = calloc(1, sizeof *m);
    if (!m) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "serve: out of memory");
    m->eng = e;
    m->name = strdup(name);
    m->path = strdup(path);
    m->queue = malloc((size_t)e->cfg.max_queue * sizeof *m->queue);
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->viz_mu, NULL);
    if (!m->name || !m->path || !m->queue) {
        model_free(m);
        return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "serve: out of memory");
    }
    *out = m;
    return ATTN_STATUS_OK;
}

/* Register m or free it on failure. */
static attn_status model_add(serve_engine *e, serve_model *m, attn_status s) {
    if (!s && m->kind == SERVE_GEN) s = gen_state_new(m);
    serve_model **grown = NULL;
    if (!s) {
        grown = realloc(e->models, (size_t)(e->n_models + 1) * sizeof *grown);
        if (!grown) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "serve: out of memory");
        else e->models = grown;
    }
    if (s) {
        model_free(m);
        return s;
    }
    e->models[e->n_models++] = m;
    return ATTN_STATUS_OK;
}

static void add_stop(int32_t *ids, int *n, int32_t id) {
    if (id < 0 || *n >= ATTN_GEN_MAX_STOP_IDS) return;
    for (int i = 0; i < *n; i++)
        if (ids[i] == id) return;
    ids[(*n)++] = id;
}

/* Generation defaults and stop ids, as `attn generate` / `attn chat` resolve them with no flags. */
static attn_status gen_setup(serve_model *m) {
    cli_gen_opts go;
    cli_gen_opts_init(&go);
    int max_tokens;
    SERVE_TRY(cli_gen_resolve(&go, m->path, m->gpt, m->gpt_tok, 16, &m->gp_default, m->stop_ids,
                             &m->n_stop_ids, &max_tokens));
    memcpy(m->chat_stop_ids, m->stop_ids, sizeof m->stop_ids);
    m->n_chat_stop_ids = m->n_stop_ids;
    if (m->tpl) { /* the template's end of turn, when it is a token (attn chat) */
        const char *eos = attn_chat_template_token(m->tpl, "eos_token");
        add_stop(m->chat_stop_ids, &m->n_chat_stop_ids, eos ? attn_tok_token_to_id(m->gpt_tok, eos) : -1);
    }
    const int P = m->gpt->cfg.n_positions;
    int ctx = m->eng->cfg.ctx ? m->eng->cfg.ctx : P < 4096 ? P : 4096;
    m->ctx = ctx < P ? ctx : P;
    m->tok = m->gpt_tok;
    m->kind = SERVE_GEN;
    return ATTN_STATUS_OK;
}

attn_status serve_engine_add_gpt(serve_engine *e, const char *name, attn_gpt_model *gm,
                                 attn_tok *tok, attn_chat_template *tpl) {
    serve_model *m;
    attn_status s = model_new(e, name, "", &m);
    if (s) {
        attn_gpt_model_free(gm), attn_tok_free(tok), attn_chat_template_free(tpl);
        return s;
    }
    m->gpt = gm, m->gpt_tok = tok, m->tpl = tpl;
    return model_add(e, m, gen_setup(m));
}

typedef enum { FAM_EMBED, FAM_GEN, FAM_ENCDEC } family;

static attn_status detect_family(const char *path, family *f) {
    if (attn_gpt_is_gguf_path(path)) {
        char arch[64];
        SERVE_TRY(cli_gguf_arch(path, arch, sizeof arch));
        if (!strcmp(arch, "bert"))
            return attn_set_error(ATTN_STATUS_UNSUPPORTED,
                                  "%s: BERT GGUF files are not served (use the Hugging Face "
                                  "directory)",
                                  path);
        *f = FAM_GEN;
        return ATTN_STATUS_OK;
    }
    char file[4096];
    snprintf(file, sizeof file, "%s/config.json", path);
    json_error_t err;
    json_t *root = json_load_file(file, 0, &err);
    if (!root)
        return attn_set_error(ATTN_STATUS_IO, "%s: cannot read the model's configuration (%s)",
                              file, err.text);
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    attn_status s = ATTN_STATUS_OK;
    if (json_object_get(root, "src_vocab") || (mt && (!strcmp(mt, "marian") || !strcmp(mt, "m2m_100"))))
        *f = FAM_ENCDEC;
    else if (mt && (!strcmp(mt, "gpt2") || !strcmp(mt, "llama") || !strcmp(mt, "mistral") ||
                    !strcmp(mt, "qwen2") || !strcmp(mt, "qwen3")))
        *f = FAM_GEN;
    else if (mt && !strcmp(mt, "bert"))
        *f = FAM_EMBED;
    else
        s = attn_set_error(ATTN_STATUS_UNSUPPORTED,
                           "%s: not a model attn serves (expected attn's translator with "
                           "\"src_vocab\", or \"model_type\" bert, gpt2, llama, mistral, qwen2 or "
                           "qwen3; got model_type %s)",
                           file, mt ? mt : "(none)");
    json_decref(root);
    return s;
}

/* A Hugging Face translation directory: one attn_hf_translator (the directory's tokenizer and
 * generation_config.json, as `attn translate --model DIR`), its languages set per batch. */
static attn_status hf_translate_setup(serve_model *m) {
    attn_hf_translator_params p = attn_hf_translator_default_params();
    SERVE_TRY(attn_hf_translator_init(m->encdec, m->path, &p, &m->hf));
    m->hf_mt = attn_hf_translator_mt_tok(m->hf);
    m->tok = attn_hf_translator_tok(m->hf);
    m->hf_nllb = m->hf_mt && attn_mt_tok_kind_of(m->hf_mt) == ATTN_MT_TOK_NLLB;
    if (m->hf_mt && !m->hf_nllb) { /* a multi-target Marian model has >>lang<< tokens */
        const int32_t V = attn_mt_tok_vocab_size(m->hf_mt, false);
        for (int32_t id = 0; id < V && !m->hf_multi; id++) {
            const char *t = attn_mt_tok_id_to_token(m->hf_mt, id, false);
            const size_t n = t ? strlen(t) : 0;
            m->hf_multi = n > 4 && !strncmp(t, ">>", 2) && !strcmp(t + n - 2, "<<");
        }
    }
    m->kind = SERVE_TRANSLATE;
    return ATTN_STATUS_OK;
}

static attn_status translate_setup(serve_model *m) {
    SERVE_TRY(attn_encdec_load_dir(m->path, &m->encdec));
    if (m->encdec->cfg.arch != ATTN_ENCDEC_ARCH_ATTN) return hf_translate_setup(m);
    SERVE_TRY(attn_tok_load(m->path, &m->mt_tok));
    m->to = attn_translate_default_options();
    const int32_t bos = attn_tok_special_id(m->mt_tok, ATTN_TOK_BOS);
    const int32_t eos = attn_tok_special_id(m->mt_tok, ATTN_TOK_EOS);
    const attn_encdec_config *c = &m->encdec->cfg;
    if (bos < 0 || eos < 0 || bos >= c->tgt_vocab || eos >= c->tgt_vocab ||
        attn_tok_vocab_size(m->mt_tok) != c->src_vocab)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s: the tokenizer does not match the model (no <s> / </s>, or a "
                              "vocabulary size other than %d)",
                              m->path, c->src_vocab);
    m->to.bos_id = bos, m->to.eos_id = eos;
    SERVE_TRY(attn_translate_session_init(m->encdec, 32, m->to.beam_size, c->max_len, c->max_len,
                                         &m->ts));
    m->tok = m->mt_tok;
    m->kind = SERVE_TRANSLATE;
    return ATTN_STATUS_OK;
}

attn_status serve_engine_load(serve_engine *e, const char *name, const char *path) {
    family f;
    SERVE_TRY(detect_family(path, &f));
    serve_model *m;
    SERVE_TRY(model_new(e, name, path, &m));
    attn_status s;
    if (f == FAM_EMBED) {
        /* Sub-batches of 16 sentences (attn embed's default is 32): a server batch (~16
         * requests' texts under load) then splits into twice as many pieces for the compute
         * threads' dynamic schedule, which balances better while the HTTP threads take turns on
         * the same cores. Measured (bench/serve_embed_wrk.sh's load, 32 clients x 8 texts, 2
         * threads, a Zen 3, four 8-s runs each): 69.5 requests/s against 60.6 with 32, 63.9
         * with 8. Results do not depend on it (attn_embed.h). */
        attn_embed_options eo = attn_embed_default_options();
        eo.batch_size = 16;
        s = attn_embed_load(path, &eo, &m->embed);
        if (!s) {
            m->kind = SERVE_EMBED;
            m->dim = attn_embed_get_info(m->embed)->dim;
            m->tok = attn_embed_tokenizer(m->embed);
        }
    } else if (f == FAM_GEN) {
        s = attn_gpt_load(path, &m->gpt);
        if (!s) s = attn_tok_load(path, &m->gpt_tok);
        if (!s) {
            s = cli_chat_template_load(path, NULL, m->gpt_tok, &m->tpl);
            if (s == ATTN_STATUS_NOT_FOUND) s = ATTN_STATUS_OK, m->tpl = NULL;
        }
        if (!s) s = gen_setup(m);
    } else {
        s = translate_setup(m);
    }
    return model_add(e, m, s);
}

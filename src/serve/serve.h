/* serve.h — `attn serve`, internal to the CLI: one HTTP server (libmicrohttpd) for all three model
 * families. No library part: the server composes the library's public APIs (attn_embed.h,
 * attn_gen.h, attn_chat.h, attn_infer.h, attn_viz.h) with the CLI's model-directory helpers
 * (gen_opts.h: generation defaults, GGUF chat templates), and keeps libmicrohttpd out of libattn.
 *
 * Layers:
 *   engine.c  models (NAME=PATH, the family found from the path), their queues and ONE compute
 *             thread (serve_engine_run) that takes each model's work in turn: embedding and
 *             translation batches (the texts of concurrent requests, by tokens), and a
 *             generation scheduler per decoder model whose slots (each with its own KV cache)
 *             advance one token per iteration (continuous batching: a request joins or leaves
 *             between two iterations);
 *   api.c     the HTTP API as functions of (method, path, headers, body) -> response: routing,
 *             authentication, limits, JSON parsing and validation, OpenAI / LibreTranslate /
 *             llama-server formats, errors, /metrics. No sockets: the fuzz target and the HTTP
 *             glue both call serve_handle;
 *   http.c    libmicrohttpd: bodies (bounded), responses, server-sent events, client disconnects.
 * docs/serve.md describes the API. */
#ifndef ATTN_SERVE_H
#define ATTN_SERVE_H

#include "attn_chat.h"
#include "attn_core.h"
#include "attn_embed.h"
#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_infer.h"
#include "attn_models.h"
#include "attn_tok.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Return the status of x when it failed. */
#define SERVE_TRY(x)                                                                             \
    do {                                                                                         \
        attn_status serve_s_ = (x);                                                              \
        if (serve_s_) return serve_s_;                                                           \
    } while (0)

/* ---- configuration ------------------------------------------------------------------------- */

typedef struct {
    const char *host;       /* bind address (default 127.0.0.1) */
    int port;               /* default 8080; 0: any free port (serve_http_port tells which) */
    const char *api_key;    /* NULL: no authentication */
    size_t max_body;        /* bytes of a request body (413 above) */
    int max_depth;          /* JSON nesting (400 above) */
    int max_input_tokens;   /* tokens of one prompt / text (400 above) */
    int max_tokens;         /* the largest max_tokens a request may ask for (400 above) */
    int max_texts;          /* strings in one embeddings / translate / tokenize request */
    int max_batch_tokens;   /* embedding / translation batches: tokens per forward batch */
    int slots;              /* concurrent generations per decoder model */
    int ctx;                /* KV-cache positions per slot (0: the model's, at most 4096) */
    attn_quant_act quant_act; /* products on quantized weights (attn_gpt_kv_set_quant_act) */
    bool kv_f16;              /* the slots' keys and values as binary16 (attn_gpt_kv_params.f16) */
    bool prompt_cache;      /* a new request reuses a free slot's cached prefix (default on) */
    int max_queue;          /* waiting requests per model (429 above) */
    double timeout;         /* seconds: a request's body upload and draining at shutdown */
    bool inline_work;       /* no compute thread: work runs in serve_submit's caller (fuzzing) */
    bool fixed_seed;        /* a request without "seed" samples with seed 0 (fuzzing) */
} serve_config;

serve_config serve_default_config(void);

/* ---- models --------------------------------------------------------------------------------- */

typedef enum { SERVE_EMBED = 0, SERVE_GEN, SERVE_TRANSLATE } serve_kind;

const char *serve_kind_name(serve_kind k); /* "embedding", "generation", "translation" */

typedef struct serve_engine serve_engine;
typedef struct serve_model serve_model;
typedef struct serve_job serve_job;

/* One request's work, shared by the connection (which waits on it or streams it) and the compute
 * thread (which fills it in). Reference-counted: the last of the two frees it. */
struct serve_job {
    serve_kind kind;
    serve_model *model;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    atomic_bool cancelled; /* the client went away: drop the work */
    bool done;
    attn_status status;    /* failure: msg holds the one-line message */
    int http_status;       /* failure's HTTP status (500 by default) */
    char msg[512];
    double t_start;        /* monotonic seconds at submission */
    void *json;            /* the request's parsed body (json_t, a reference): the texts below
                              point into it */
    /* embeddings / translation input: n texts (borrowed from the request's JSON, which outlives
     * the job's work) and their token counts */
    size_t n;
    const char **texts;
    size_t *lens;
    int n_tokens;          /* the texts' tokens in all (usage; batching budget) */
    const char *src_lang;  /* Hugging Face translators: the languages (NULL: the model's
                              default), borrowed from the request's JSON; one batch, one pair */
    const char *tgt_lang;
    float *emb;            /* output (n, dim) */
    char **out;            /* output translations (n), attn_alloc'd */
    /* generation */
    int32_t *ids;          /* the prompt (n_ids), owned */
    int n_ids;
    attn_gen_params gp;
    int max_new;
    const char *stops[16];
    int n_stops;
    bool stream;           /* emit server-sent events into sse as pieces arrive */
    bool chat;             /* chat.completion objects (else text_completion) */
    char id[40];           /* "chatcmpl-..." / "cmpl-..." */
    long long created;
    bool include_usage;    /* stream_options.include_usage */
    char *text;            /* the whole generated text (malloc'd, text_len bytes) */
    size_t text_len, text_cap;
    char *sse;             /* server-sent event bytes produced so far */
    size_t sse_len, sse_cap;
    int n_gen;             /* tokens generated */
    const char *finish;    /* "stop" / "length" once done */
};

/* Drop one reference (frees the job with the last one). */
void serve_job_release(serve_job *j);
/* Mark done with status / message (under j->mu) and wake the waiter. */
void serve_job_finish(serve_job *j, attn_status s, int http_status, const char *msg);

/* A model as the engine serves it. */
struct serve_model {
    char *name;
    char *path;
    serve_kind kind;
    serve_engine *eng;
    const attn_tok *tok;          /* its tokenizer (all kinds) */
    /* embeddings */
    attn_embed *embed;
    int dim;
    /* generation */
    attn_gpt_model *gpt;
    attn_tok *gpt_tok;
    attn_chat_template *tpl;      /* NULL: no chat template (chat completions refused) */
    attn_gen_params gp_default;   /* generation_config.json's, else attn's defaults */
    int32_t stop_ids[ATTN_GEN_MAX_STOP_IDS];
    int n_stop_ids;
    int32_t chat_stop_ids[ATTN_GEN_MAX_STOP_IDS]; /* plus the template's eos_token */
    int n_chat_stop_ids;
    int ctx;                      /* positions per slot */
    /* translation: attn's own model (mt_tok, ts, to) or a Hugging Face directory (hf) */
    attn_encdec_model *encdec;
    attn_tok *mt_tok;
    attn_translate_session *ts;
    attn_translate_options to;
    attn_hf_translator *hf;       /* Marian, M2M100 / NLLB: the compute thread's translator */
    const attn_mt_tok *hf_mt;     /* its Marian / NLLB tokenizer (read-only: any thread), or
                                     NULL (a plain tokenizer.json: tok) */
    attn_hf_translator *viz_hf;   /* /v1/attention's translator (its own: the compute thread's
                                     is busy), made by the first request, under viz_mu */
    pthread_mutex_t viz_mu;
    bool hf_nllb;                 /* languages are NLLB codes: source and target both count */
    bool hf_multi;                /* Marian with >>lang<< tokens: the target picks one */
    /* the queue (the engine's compute thread takes its work: serve_engine_run) */
    pthread_mutex_t mu;           /* the queue and the slots */
    serve_job **queue;            /* waiting jobs (FIFO), capacity max_queue */
    int n_queue;
    void *slots;                  /* generation: the slots (engine.c) */
    int n_active;
    bool stop;
};

/* ---- the engine ---------------------------------------------------------------------------- */

/* Prometheus metrics (engine-wide). */
#define SERVE_N_ROUTES 12
#define SERVE_N_LAT 12
typedef struct {
    atomic_llong requests[SERVE_N_ROUTES];
    atomic_llong errors[SERVE_N_ROUTES];
    atomic_llong lat_bucket[SERVE_N_ROUTES][SERVE_N_LAT + 1]; /* + the +Inf bucket */
    atomic_llong lat_sum_us[SERVE_N_ROUTES];
    atomic_llong tokens_in, tokens_out;
    atomic_llong batches, batch_items;       /* embedding / translation batches */
    atomic_llong gen_steps, gen_step_slots;  /* scheduler iterations and slots stepped */
    atomic_llong cancelled;
    atomic_llong prompt_cached;              /* prompt tokens taken from a slot's cache */
    atomic_llong prompt_shared;              /* of those, copied from another slot's cache */
    atomic_int in_flight;                    /* requests being handled now */
} serve_metrics;

struct serve_engine {
    serve_config cfg;
    serve_model **models;
    int n_models;
    serve_metrics met;
    atomic_bool draining;                    /* SIGTERM: refuse new work (503) */
    double t_start;
    /* the compute thread (serve_engine_run) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool wake;                               /* work was queued since the thread last looked */
    bool stop;                               /* serve_engine_stop: the thread returns */
    bool running;                            /* serve_engine_run is in its loop */
};

attn_status serve_engine_init(const serve_config *cfg, serve_engine **out);
/* The engine's compute thread: every model's work (generation steps, embedding and translation
 * batches) runs here, one unit at a time, until serve_engine_stop. Call it on the program's
 * first thread: OpenMP teams started from other threads add to the threads libgomp manages, and
 * with more of them than cores its idle threads sleep between parallel regions instead of
 * spinning (a decoding step then waits for the kernel to wake them: 2x slower on 2 cores). */
void serve_engine_run(serve_engine *e);
/* From another thread: serve_engine_run returns (after the unit in progress), then the jobs held
 * or waiting end with 503. */
void serve_engine_stop(serve_engine *e);
/* serve_engine_stop, then free everything. */
void serve_engine_free(serve_engine *e);

/* Load PATH under NAME: a GGUF file or a directory whose config.json says the family (attn's
 * translator: "src_vocab"; "model_type" bert / gpt2 / llama / mistral / qwen2 / qwen3; a
 * sentence-transformers directory: modules.json). */
attn_status serve_engine_load(serve_engine *e, const char *name, const char *path);
/* A decoder already in memory (the fuzz target): the engine takes m, tok and tpl (tpl may be
 * NULL). */
attn_status serve_engine_add_gpt(serve_engine *e, const char *name, attn_gpt_model *m,
                                 attn_tok *tok, attn_chat_template *tpl);
serve_model *serve_engine_find(serve_engine *e, const char *name);

/* Queue a job on its model (the model's kind): 429-style ATTN_STATUS_TOO_LARGE when the queue is
 * full, ATTN_STATUS_UNSUPPORTED-style 503 when draining (*http_status says which). The engine
 * takes a reference. With inline_work the job has run when this returns. */
attn_status serve_submit(serve_engine *e, serve_job *j, int *http_status);

/* Monotonic seconds. */
double serve_now(void);

/* ---- the API (api.c) ------------------------------------------------------------------------- */

typedef struct {
    int status;             /* HTTP status */
    const char *type;       /* Content-Type */
    char *body;             /* malloc'd (may be NULL for an empty body) */
    size_t len;
    serve_job *stream;      /* non-NULL: a server-sent-event stream of this job follows (the
                               response owns a reference); body is empty */
    int route;              /* metrics index */
} serve_response;

/* Hook for a waiting connection: returns true when the client has gone (poll on its socket). */
typedef bool (*serve_gone_fn)(void *ctx);

/* Answer one request. auth: the Authorization header or NULL. body: len bytes (may be NULL when
 * len is 0). For generation the call waits for the job (checking gone(gone_ctx) every 50 ms and
 * cancelling when the client has gone), unless the request streams. */
void serve_handle(serve_engine *e, const char *method, const char *path, const char *auth,
                  const char *body, size_t len, serve_gone_fn gone, void *gone_ctx,
                  serve_response *r);
/* An OpenAI-style JSON error response. */
void serve_error(serve_response *r, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void serve_response_free(serve_response *r);
/* Account a finished request in the metrics (route, status, seconds). */
void serve_account(serve_engine *e, int route, int status, double seconds);

/* The generation scheduler calls this for each new piece of text (len may be 0) and once at the
 * end (finish set): appends to j->text and, for streams, the server-sent events. Under j->mu. */
void serve_gen_emit(serve_job *j, const char *piece, size_t len, const char *finish);

/* ---- HTTP (http.c) ------------------------------------------------------------------------- */

typedef struct serve_http serve_http;
attn_status serve_http_start(serve_engine *e, serve_http **out);
int serve_http_port(const serve_http *h);
/* Stop accepting connections (in-flight ones go on). */
void serve_http_quiesce(serve_http *h);
void serve_http_stop(serve_http *h);

#endif

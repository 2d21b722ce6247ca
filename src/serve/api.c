/* api.c — the HTTP API of `attn serve` as a function of (method, path, Authorization, body)
 * (serve.h; docs/serve.md): routing, the API key, limits, JSON validation, the OpenAI,
 * LibreTranslate and llama-server formats, OpenAI-style errors, Prometheus metrics. */
#include "serve.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    R_HEALTH = 0, R_MODELS, R_METRICS, R_EMBED, R_COMPLETE, R_CHAT, R_TRANSLATE, R_TOKENIZE,
    R_DETOKENIZE, R_ATTENTION, R_OTHER
};
static const char *const route_name[SERVE_N_ROUTES] = {
    "/health", "/v1/models", "/metrics", "/v1/embeddings", "/v1/completions",
    "/v1/chat/completions", "/translate", "/tokenize", "/detokenize", "/v1/attention", "other",
    "unused"};
static const double lat_le[SERVE_N_LAT] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                           0.5,   1,    2.5,   5,    10,  30};

/* ---- responses ------------------------------------------------------------------------------ */

void serve_response_free(serve_response *r) {
    free(r->body);
    if (r->stream) serve_job_release(r->stream);
    memset(r, 0, sizeof *r);
}

static void set_json(serve_response *r, int status, json_t *o) {
    free(r->body);
    r->status = status;
    r->type = "application/json";
    r->body = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    r->len = r->body ? strlen(r->body) : 0;
    json_decref(o);
    if (!r->body) {
        r->status = 500;
        r->type = "text/plain";
    }
}

void serve_error(serve_response *r, int status, const char *type, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    /* The message may quote the request: keep it valid UTF-8 for jansson. */
    size_t n = strlen(msg), ok = attn_tok_utf8_check(msg, n, false);
    if (ok < n) msg[ok] = '\0';
    json_t *o = json_pack("{s:{s:s, s:s, s:n, s:i}}", "error", "message", msg, "type", type,
                          "param", "code", status);
    set_json(r, status, o);
}

static void fail_status(serve_response *r, int status) {
    const char *type = status == 401   ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 429 ? "rate_limit_error"
                       : status == 503 ? "unavailable_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    serve_error(r, status, type, "%s", attn_last_error());
}

void serve_account(serve_engine *e, int route, int status, double seconds) {
    if (route < 0 || route >= SERVE_N_ROUTES) route = R_OTHER;
    serve_metrics *m = &e->met;
    atomic_fetch_add(&m->requests[route], 1);
    if (status >= 400) atomic_fetch_add(&m->errors[route], 1);
    int b = 0;
    while (b < SERVE_N_LAT && seconds > lat_le[b]) b++;
    atomic_fetch_add(&m->lat_bucket[route][b], 1);
    atomic_fetch_add(&m->lat_sum_us[route], (long long)(seconds * 1e6));
}

/* ---- request checks ------------------------------------------------------------------------- */

/* Nesting depth of JSON text (brackets outside strings); stops counting past max. */
static int json_depth(const char *s, size_t n, int max) {
    int d = 0, worst = 0;
    bool str = false;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (str) {
            if (c == '\\') i++;
            else if (c == '"') str = false;
        } else if (c == '"') {
            str = true;
        } else if (c == '[' || c == '{') {
            if (++d > worst && (worst = d) > max) return worst;
        } else if (c == ']' || c == '}') {
            d--;
        }
    }
    return worst;
}

/* Constant-time comparison of the Authorization header with "Bearer KEY". */
static bool auth_ok(const char *key, const char *header) {
    if (!key) return true;
    if (!header || strncmp(header, "Bearer ", 7) != 0) return false;
    const char *got = header + 7;
    const size_t n = strlen(key), m = strlen(got);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)key[i] ^ (unsigned char)(i < m ? got[i] : 0);
    return diff == 0;
}

/* The request's model: the "model" field, or the only model of that kind when absent. */
static serve_model *pick_model(serve_engine *e, json_t *root, serve_kind kind, const char *route,
                               serve_response *r) {
    json_t *v = json_object_get(root, "model");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v)) {
            serve_error(r, 400, "invalid_request_error", "'model' must be a string");
            return NULL;
        }
        serve_model *m = serve_engine_find(e, json_string_value(v));
        if (!m) {
            serve_error(r, 404, "not_found_error", "The model '%s' does not exist",
                        json_string_value(v));
            return NULL;
        }
        if (m->kind != kind && (int)kind >= 0) {
            serve_error(r, 400, "invalid_request_error",
                        "The model '%s' is %s %s model; %s needs %s %s model", m->name,
                        m->kind == SERVE_EMBED ? "an" : "a", serve_kind_name(m->kind), route,
                        kind == SERVE_EMBED ? "an" : "a", serve_kind_name(kind));
            return NULL;
        }
        return m;
    }
    serve_model *found = NULL;
    int n = 0;
    for (int i = 0; i < e->n_models; i++)
        if ((int)kind < 0 || e->models[i]->kind == kind) found = e->models[i], n++;
    if (n == 1) return found;
    if (n)
        serve_error(r, 400, "invalid_request_error", "'model' is required (%d %smodels are served)",
                    n, (int)kind < 0 ? "" : kind == SERVE_EMBED ? "embedding " : kind == SERVE_GEN ? "generation " : "translation ");
    else
        serve_error(r, 404, "not_found_error", "no %s model is served", serve_kind_name(kind));
    return NULL;
}

/* texts: a string or an array of strings (1..max), into a new array; empty strings refused
 * unless allow_empty. */
static bool get_texts(serve_engine *e, json_t *v, const char *field, bool allow_empty,
                      const char ***texts, size_t **lens, size_t *n, serve_response *r) {
    *texts = NULL, *lens = NULL, *n = 0;
    size_t k = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!v || (!json_is_string(v) && !json_is_array(v))) {
        serve_error(r, 400, "invalid_request_error", "'%s' must be a string or an array of strings",
                    field);
        return false;
    }
    if (k == 0 || k > (size_t)e->cfg.max_texts) {
        serve_error(r, 400, "invalid_request_error", "'%s' must hold 1 to %d strings, got %zu",
                    field, e->cfg.max_texts, k);
        return false;
    }
    *texts = malloc(k * sizeof **texts);
    *lens = malloc(k * sizeof **lens);
    if (!*texts || !*lens) {
        serve_error(r, 500, "server_error", "out of memory");
        return false;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s)) {
            serve_error(r, 400, "invalid_request_error", "'%s[%zu]' must be a string", field, i);
            return false;
        }
        (*texts)[i] = json_string_value(s);
        (*lens)[i] = json_string_length(s);
        if (!allow_empty && (*lens)[i] == 0) {
            if (json_is_array(v))
                serve_error(r, 400, "invalid_request_error", "'%s[%zu]' is empty", field, i);
            else
                serve_error(r, 400, "invalid_request_error", "'%s' is empty", field);
            return false;
        }
    }
    *n = k;
    return true;
}

static serve_job *job_new(serve_kind kind, serve_model *m, json_t *root) {
    serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->kind = kind;
    j->model = m;
    j->refs = 1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    atomic_init(&j->cancelled, false);
    j->json = json_incref(root);
    j->created = (long long)time(NULL);
    return j;
}

/* Wait for the job; false (the job cancelled) when the client went away. */
static bool job_wait(serve_job *j, serve_gone_fn gone, void *ctx) {
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!j->done && gone && gone(ctx)) {
            atomic_store(&j->cancelled, true);
            pthread_mutex_unlock(&j->mu);
            return false;
        }
    }
    pthread_mutex_unlock(&j->mu);
    return true;
}

/* Submit and wait; on failure r holds the error. */
static bool run_job(serve_engine *e, serve_job *j, serve_gone_fn gone, void *ctx,
                    serve_response *r) {
    int http;
    if (serve_submit(e, j, &http)) {
        fail_status(r, http);
        return false;
    }
    if (!job_wait(j, gone, ctx)) {
        serve_error(r, 499, "invalid_request_error", "the client closed the connection");
        return false;
    }
    if (j->status) {
        serve_error(r, j->http_status, j->http_status >= 500 ? "server_error" : "invalid_request_error",
                    "%s", j->msg);
        return false;
    }
    return true;
}

/* ---- base64 (the openai client's default encoding_format) ---------------------------------- */

static char *base64(const unsigned char *p, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc((n + 2) / 3 * 4 + 1), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        const unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                           (i + 2 < n ? p[i + 2] : 0);
        *q++ = A[v >> 18 & 63];
        *q++ = A[v >> 12 & 63];
        *q++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? A[v & 63] : '=';
    }
    *q = '\0';
    return o;
}

/* ---- /v1/embeddings ------------------------------------------------------------------------- */

static void h_embeddings(serve_engine *e, json_t *root, serve_gone_fn gone, void *ctx,
                         serve_response *r) {
    const char **texts;
    size_t *lens, n;
    if (!get_texts(e, json_object_get(root, "input"), "input", false, &texts, &lens, &n, r)) {
        free(texts), free(lens);
        return;
    }
    bool b64 = false;
    json_t *fmt = json_object_get(root, "encoding_format");
    if (fmt && !json_is_null(fmt)) {
        const char *f = json_string_value(fmt);
        if (!f || (strcmp(f, "float") && strcmp(f, "base64"))) {
            free(texts), free(lens);
            serve_error(r, 400, "invalid_request_error",
                        "'encoding_format' must be \"float\" or \"base64\"");
            return;
        }
        b64 = !strcmp(f, "base64");
    }
    serve_model *m = pick_model(e, root, SERVE_EMBED, "/v1/embeddings", r);
    json_t *dims = json_object_get(root, "dimensions");
    if (m && dims && !json_is_null(dims) &&
        (!json_is_integer(dims) || json_integer_value(dims) != m->dim)) {
        serve_error(r, 400, "invalid_request_error", "'dimensions' must be %d for model '%s'",
                    m->dim, m->name);
        m = NULL;
    }
    serve_job *j = m ? job_new(SERVE_EMBED, m, root) : NULL;
    if (!j) {
        free(texts), free(lens);
        if (m) serve_error(r, 500, "server_error", "out of memory");
        return;
    }
    j->texts = texts, j->lens = lens, j->n = n;
    /* Tokens per text (after truncation to max_seq_length: what the model runs). */
    const int cap = attn_embed_get_info(m->embed)->max_seq_length;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    for (size_t i = 0; i < n && ids; i++) {
        size_t k = 0;
        if (attn_embed_tokenize(m->embed, texts[i], lens[i], ids, (size_t)cap, &k)) {
            serve_error(r, 400, "invalid_request_error", "'input': %s", attn_last_error());
            free(ids);
            serve_job_release(j);
            return;
        }
        j->n_tokens += (int)k;
    }
    free(ids);
    if (run_job(e, j, gone, ctx, r)) {
        json_t *data = json_array();
        for (size_t i = 0; i < n; i++) {
            const float *v = j->emb + i * (size_t)m->dim;
            json_t *emb;
            if (b64) {
                char *s = base64((const unsigned char *)v, (size_t)m->dim * sizeof *v);
                emb = json_string(s ? s : "");
                free(s);
            } else {
                emb = json_array();
                for (int d = 0; d < m->dim; d++) json_array_append_new(emb, json_real(v[d]));
            }
            json_array_append_new(data, json_pack("{s:s, s:I, s:o}", "object", "embedding",
                                                  "index", (json_int_t)i, "embedding", emb));
        }
        atomic_fetch_add(&e->met.tokens_in, j->n_tokens);
        set_json(r, 200,
                 json_pack("{s:s, s:o, s:s, s:{s:i, s:i}}", "object", "list", "data", data,
                           "model", m->name, "usage", "prompt_tokens", j->n_tokens,
                           "total_tokens", j->n_tokens));
    }
    serve_job_release(j);
}

/* ---- /v1/completions and /v1/chat/completions ---------------------------------------------- */

static json_t *usage_obj(const serve_job *j) {
    return json_pack("{s:i, s:i, s:i}", "prompt_tokens", j->n_ids, "completion_tokens", j->n_gen,
                     "total_tokens", j->n_ids + j->n_gen);
}

static void sse_add(serve_job *j, json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    const char *p = s ? s : "{}";
    const size_t n = strlen(p), need = j->sse_len + n + 9;
    if (need > j->sse_cap) {
        size_t cap = j->sse_cap ? j->sse_cap * 2 : 1024;
        while (cap < need) cap *= 2;
        char *g = realloc(j->sse, cap);
        if (!g) {
            free(s);
            return;
        }
        j->sse = g, j->sse_cap = cap;
    }
    memcpy(j->sse + j->sse_len, "data: ", 6);
    memcpy(j->sse + j->sse_len + 6, p, n);
    memcpy(j->sse + j->sse_len + 6 + n, "\n\n", 3);
    j->sse_len += n + 8;
    free(s);
}

static json_t *chunk(const serve_job *j, json_t *choice) {
    json_t *choices = json_array();
    if (choice) json_array_append_new(choices, choice);
    return json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", j->id, "object",
                     j->chat ? "chat.completion.chunk" : "text_completion", "created",
                     (json_int_t)j->created, "model", j->model->name, "choices", choices);
}

void serve_gen_emit(serve_job *j, const char *piece, size_t len, const char *finish) {
    if (len) {
        const size_t need = j->text_len + len + 1;
        if (need > j->text_cap) {
            size_t cap = j->text_cap ? j->text_cap * 2 : 256;
            while (cap < need) cap *= 2;
            char *g = realloc(j->text, cap);
            if (!g) return;
            j->text = g, j->text_cap = cap;
        }
        memcpy(j->text + j->text_len, piece, len);
        j->text_len += len;
        j->text[j->text_len] = '\0';
    }
    if (finish) j->finish = finish;
    if (!j->stream) return;
    if (j->chat && j->sse_len == 0) /* the first chunk names the role */
        sse_add(j, chunk(j, json_pack("{s:i, s:{s:s, s:s}, s:n}", "index", 0, "delta", "role",
                                      "assistant", "content", "", "finish_reason")));
    if (len) {
        json_t *t = json_stringn(piece, len);
        sse_add(j, chunk(j, j->chat ? json_pack("{s:i, s:{s:o}, s:n}", "index", 0, "delta",
                                                "content", t, "finish_reason")
                                    : json_pack("{s:i, s:o, s:n, s:n}", "index", 0, "text", t,
                                                "logprobs", "finish_reason")));
    }
    if (finish) {
        sse_add(j, chunk(j, j->chat ? json_pack("{s:i, s:{}, s:s}", "index", 0, "delta",
                                                "finish_reason", finish)
                                    : json_pack("{s:i, s:s, s:n, s:s}", "index", 0, "text", "",
                                                "logprobs", "finish_reason", finish)));
        if (j->include_usage) {
            json_t *c = chunk(j, NULL);
            json_object_set_new(c, "usage", usage_obj(j));
            sse_add(j, c);
        }
        const char done[] = "data: [DONE]\n\n";
        const size_t need = j->sse_len + sizeof done;
        if (need <= j->sse_cap || (j->sse = realloc(j->sse, j->sse_cap = need))) {
            memcpy(j->sse + j->sse_len, done, sizeof done);
            j->sse_len += sizeof done - 1;
        }
    }
}

/* Sampling fields: temperature, top_p, top_k, min_p, repetition_penalty, seed, max_tokens,
 * stop, n, stream. */
static bool gen_params(serve_engine *e, serve_model *m, json_t *root, serve_job *j,
                       int def_max, serve_response *r) {
    attn_gen_params p = m->gp_default;
    json_t *v;
    bool sample_flag = false;
#define NUM_FIELD(name, lo, hi, dst)                                                              \
    if ((v = json_object_get(root, name)) && !json_is_null(v)) {                                  \
        if (!json_is_number(v) || !(json_number_value(v) >= (lo) && json_number_value(v) <= (hi))) { \
            serve_error(r, 400, "invalid_request_error", "'%s' must be a number from %g to %g",   \
                        name, (double)(lo), (double)(hi));                                        \
            return false;                                                                         \
        }                                                                                         \
        dst = (float)json_number_value(v);                                                        \
        sample_flag = true;                                                                       \
    }
    NUM_FIELD("temperature", 0, 2, p.temperature)
    NUM_FIELD("top_p", 0, 1, p.top_p)
    NUM_FIELD("min_p", 0, 1, p.min_p)
#undef NUM_FIELD
    if ((v = json_object_get(root, "top_k")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1 << 24)) {
            serve_error(r, 400, "invalid_request_error", "'top_k' must be an integer >= 0");
            return false;
        }
        p.top_k = (int)json_integer_value(v);
        sample_flag = true;
    }
    if ((v = json_object_get(root, "repetition_penalty")) && !json_is_null(v)) {
        if (!json_is_number(v) || !(json_number_value(v) > 0 && json_number_value(v) <= 100)) {
            serve_error(r, 400, "invalid_request_error",
                        "'repetition_penalty' must be a number in (0, 100]");
            return false;
        }
        p.repetition_penalty = (float)json_number_value(v);
    }
    /* A sampling field asks for sampling (as the CLI's flags); temperature 0 is greedy. */
    if (sample_flag) p.greedy = p.temperature <= 0;
    static atomic_ullong counter;
    const unsigned long long k = atomic_fetch_add(&counter, 1);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    p.seed = e->cfg.fixed_seed ? 0 : (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^ (k << 40);
    if ((v = json_object_get(root, "seed")) && !json_is_null(v)) {
        if (!json_is_integer(v)) {
            serve_error(r, 400, "invalid_request_error", "'seed' must be an integer");
            return false;
        }
        p.seed = (uint64_t)json_integer_value(v);
    }
    j->gp = p;
    j->max_new = def_max;
    v = json_object_get(root, "max_completion_tokens");
    if (!v || json_is_null(v)) v = json_object_get(root, "max_tokens");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            serve_error(r, 400, "invalid_request_error", "'max_tokens' must be an integer >= 1");
            return false;
        }
        if (json_integer_value(v) > e->cfg.max_tokens) {
            serve_error(r, 400, "invalid_request_error",
                        "'max_tokens' is %lld, more than this server's limit of %d",
                        (long long)json_integer_value(v), e->cfg.max_tokens);
            return false;
        }
        j->max_new = (int)json_integer_value(v);
    }
    if (j->max_new > e->cfg.max_tokens) j->max_new = e->cfg.max_tokens;
    if ((v = json_object_get(root, "n")) && !json_is_null(v) &&
        (!json_is_integer(v) || json_integer_value(v) != 1)) {
        serve_error(r, 400, "invalid_request_error", "'n' must be 1 (one choice per request)");
        return false;
    }
    if ((v = json_object_get(root, "stream")) && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            serve_error(r, 400, "invalid_request_error", "'stream' must be true or false");
            return false;
        }
        j->stream = json_is_true(v);
    }
    json_t *so = json_object_get(root, "stream_options");
    if (so && json_is_object(so)) j->include_usage = json_is_true(json_object_get(so, "include_usage"));
    else if (so && !json_is_null(so)) {
        serve_error(r, 400, "invalid_request_error", "'stream_options' must be an object");
        return false;
    }
    if ((v = json_object_get(root, "stop")) && !json_is_null(v)) {
        const size_t k2 = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
        if ((!json_is_string(v) && !json_is_array(v)) || k2 > 16) {
            serve_error(r, 400, "invalid_request_error",
                        "'stop' must be a string or an array of up to 16 strings");
            return false;
        }
        for (size_t i = 0; i < k2; i++) {
            json_t *s = json_is_string(v) ? v : json_array_get(v, i);
            if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > 1024) {
                serve_error(r, 400, "invalid_request_error",
                            "'stop' strings must be 1 to 1024 bytes");
                return false;
            }
            if (!(j->stops[j->n_stops] = strdup(json_string_value(s)))) {
                serve_error(r, 500, "server_error", "out of memory");
                return false;
            }
            j->n_stops++;
        }
    }
    return true;
}

static void h_generate(serve_engine *e, json_t *root, bool chat, serve_gone_fn gone, void *ctx,
                       serve_response *r) {
    const char *route = chat ? "/v1/chat/completions" : "/v1/completions";
    json_t *input = json_object_get(root, chat ? "messages" : "prompt");
    if (!chat && json_is_array(input) && json_array_size(input) == 1)
        input = json_array_get(input, 0);
    if (chat ? !json_is_array(input) || json_array_size(input) == 0 : !json_is_string(input)) {
        serve_error(r, 400, "invalid_request_error",
                    chat ? "'messages' must be a non-empty array of messages"
                         : "'prompt' must be a string");
        return;
    }
    serve_model *m = pick_model(e, root, SERVE_GEN, route, r);
    if (!m) return;
    if (chat && !m->tpl) {
        serve_error(r, 400, "invalid_request_error",
                    "the model '%s' has no chat template: use /v1/completions", m->name);
        return;
    }
    serve_job *j = job_new(SERVE_GEN, m, root);
    if (!j) {
        serve_error(r, 500, "server_error", "out of memory");
        return;
    }
    j->chat = chat;
    snprintf(j->id, sizeof j->id, "%s-%016llx%08x", chat ? "chatcmpl" : "cmpl",
             (unsigned long long)(serve_now() * 1e9), (unsigned)rand());
    if (!gen_params(e, m, root, j, chat ? 512 : 16, r)) {
        serve_job_release(j);
        return;
    }
    attn_status s;
    size_t n = 0;
    if (chat) {
        /* The messages as the library's conversation parser takes them, rendered with the
         * model's template exactly as `attn chat` does. */
        char *msgs = json_dumps(input, JSON_COMPACT);
        attn_chat_conv *c = NULL;
        s = msgs ? attn_chat_conv_parse(msgs, strlen(msgs), &c)
                 : attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        free(msgs);
        json_t *kw = json_object_get(root, "chat_template_kwargs");
        char *extra = NULL;
        if (!s && kw && !json_is_null(kw)) {
            if (!json_is_object(kw) || json_object_get(kw, "messages") ||
                json_object_get(kw, "add_generation_prompt"))
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                   "'chat_template_kwargs' must be an object without 'messages' "
                                   "and 'add_generation_prompt'");
            else
                extra = json_dumps(kw, JSON_COMPACT);
        }
        char *text = NULL;
        size_t len = 0;
        if (!s) {
            attn_chat_render_params rp = attn_chat_default_render_params();
            rp.add_generation_prompt = true;
            rp.extra_json = extra;
            rp.max_output = e->cfg.max_body * 4 + 65536;
            rp.max_memory = (size_t)256 << 20;
            rp.max_steps = 1000000;
            s = attn_chat_render(m->tpl, c, &rp, &text, &len);
        }
        attn_chat_conv_free(c);
        free(extra);
        attn_tok_encoding enc;
        memset(&enc, 0, sizeof enc);
        if (!s) {
            attn_tok_encode_params ep = attn_tok_encode_default_params();
            ep.add_special_tokens = false; /* the template has them */
            s = attn_tok_encode_ex(m->gpt_tok, text, len, NULL, 0, &ep, &enc);
        }
        free(text);
        if (!s) {
            j->ids = malloc((enc.n ? enc.n : 1) * sizeof *j->ids);
            if (j->ids) memcpy(j->ids, enc.ids, enc.n * sizeof *j->ids);
            else s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
            n = enc.n;
        }
        attn_tok_encoding_free(&enc);
    } else {
        int32_t *ids = NULL;
        s = attn_tok_encode_alloc(m->gpt_tok, json_string_value(input), json_string_length(input),
                                  &ids, &n);
        if (!s && n == 0) { /* an empty prompt starts from bos (attn generate) */
            if (m->gpt->cfg.bos_token_id < 0)
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                   "'prompt' is empty and the model has no bos_token_id");
            else
                ids[0] = m->gpt->cfg.bos_token_id, n = 1;
        }
        if (!s) {
            j->ids = malloc(n * sizeof *j->ids);
            if (j->ids) memcpy(j->ids, ids, n * sizeof *ids);
            else s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        attn_free(ids);
    }
    if (s) {
        serve_error(r, s == ATTN_STATUS_OUT_OF_MEMORY ? 500 : 400,
                    s == ATTN_STATUS_OUT_OF_MEMORY ? "server_error" : "invalid_request_error",
                    "%s", attn_last_error());
        serve_job_release(j);
        return;
    }
    j->n_ids = (int)n;
    if (n == 0 || n > (size_t)e->cfg.max_input_tokens || n > (size_t)m->ctx) {
        serve_error(r, 400, "invalid_request_error",
                    "the prompt is %zu tokens; this server takes 1 to %d (the model's context "
                    "here is %d)",
                    n, e->cfg.max_input_tokens < m->ctx ? e->cfg.max_input_tokens : m->ctx, m->ctx);
        serve_job_release(j);
        return;
    }
    /* A chat reply fits the context (attn chat): at most ctx - n + 1 tokens. */
    if (j->max_new > m->ctx - j->n_ids + 1) j->max_new = m->ctx - j->n_ids + 1;
    if (j->stream) {
        int http;
        if (serve_submit(e, j, &http)) {
            fail_status(r, http);
            serve_job_release(j);
            return;
        }
        r->status = 200;
        r->type = "text/event-stream";
        r->stream = j; /* the response keeps our reference */
        return;
    }
    if (run_job(e, j, gone, ctx, r)) {
        const char *fin = j->finish ? j->finish : "stop";
        json_t *text = json_stringn(j->text ? j->text : "", j->text_len);
        json_t *choice = chat ? json_pack("{s:i, s:{s:s, s:o}, s:s}", "index", 0, "message", "role",
                                          "assistant", "content", text, "finish_reason", fin)
                              : json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "text", text,
                                          "logprobs", "finish_reason", fin);
        json_t *o = chunk(j, choice);
        json_object_set_new(o, "object", json_string(chat ? "chat.completion" : "text_completion"));
        json_object_set_new(o, "usage", usage_obj(j));
        set_json(r, 200, o);
    }
    serve_job_release(j);
}

/* ---- /translate (LibreTranslate) ------------------------------------------------------------ */

/* A Hugging Face translator's languages from LibreTranslate's source and target (strings,
 * checked): NLLB / M2M100 take both as the model's codes (eng_Latn, zho_Hans); a multi-target
 * Marian model takes the target as its >>lang<< token (cmn_Hans or >>cmn_Hans<<) and has no source
 * token; a one-pair Marian model or an export translates its one pair, as attn's own models do.
 * False: answered with 400. */
static bool translate_langs(serve_model *m, json_t *root, serve_job *j, serve_response *r) {
    const char *src = json_string_value(json_object_get(root, "source"));
    const char *tgt = json_string_value(json_object_get(root, "target"));
    if (m->hf_nllb && !strcmp(src, "auto")) {
        serve_error(r, 400, "invalid_request_error",
                    "'source': auto-detection is not supported; give the model's code of the "
                    "source language (e.g. eng_Latn)");
        return false;
    }
    if (m->hf_nllb) j->src_lang = src;
    if (m->hf_nllb || m->hf_multi) j->tgt_lang = tgt;
    /* the library's own check (read-only: the compute thread may be translating) */
    if (attn_hf_translator_check_langs(m->hf, j->src_lang, j->tgt_lang, NULL)) {
        serve_error(r, 400, "invalid_request_error", "'source' / 'target': %s", attn_last_error());
        return false;
    }
    return true;
}

static void h_translate(serve_engine *e, json_t *root, serve_gone_fn gone, void *ctx,
                        serve_response *r) {
    json_t *q = json_object_get(root, "q");
    const char **texts;
    size_t *lens, n;
    if (!get_texts(e, q, "q", true, &texts, &lens, &n, r)) {
        free(texts), free(lens);
        return;
    }
    static const char *const need[] = {"source", "target"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(root, need[i]);
        if (!json_is_string(v) || json_string_length(v) == 0) {
            free(texts), free(lens);
            serve_error(r, 400, "invalid_request_error", "'%s' must be a language code (a string)",
                        need[i]);
            return;
        }
    }
    json_t *fmt = json_object_get(root, "format");
    if (fmt && !json_is_null(fmt) && (!json_is_string(fmt) || strcmp(json_string_value(fmt), "text"))) {
        free(texts), free(lens);
        serve_error(r, 400, "invalid_request_error", "'format' must be \"text\"");
        return;
    }
    serve_model *m = pick_model(e, root, SERVE_TRANSLATE, "/translate", r);
    serve_job *j = m ? job_new(SERVE_TRANSLATE, m, root) : NULL;
    if (!j) {
        free(texts), free(lens);
        if (m) serve_error(r, 500, "server_error", "out of memory");
        return;
    }
    j->texts = texts, j->lens = lens, j->n = n;
    if (m->hf && !translate_langs(m, root, j, r)) {
        serve_job_release(j);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t *ids = NULL;
        size_t k = 0;
        if (m->hf_mt ? attn_mt_tok_encode_source(m->hf_mt, j->src_lang, texts[i], lens[i], &ids, &k)
                     : attn_tok_encode_alloc(m->tok, texts[i], lens[i], &ids, &k)) {
            serve_error(r, 400, "invalid_request_error", "'q': %s", attn_last_error());
            serve_job_release(j);
            return;
        }
        attn_free(ids);
        if (k > (size_t)e->cfg.max_input_tokens) {
            serve_error(r, 400, "invalid_request_error", "'q' text %zu is %zu tokens, more than %d",
                        i, k, e->cfg.max_input_tokens);
            serve_job_release(j);
            return;
        }
        j->n_tokens += (int)k + 1;
    }
    if (run_job(e, j, gone, ctx, r)) {
        json_t *out;
        if (json_is_string(q)) {
            out = json_string(j->out[0]);
        } else {
            out = json_array();
            for (size_t i = 0; i < n; i++) json_array_append_new(out, json_string(j->out[i]));
        }
        atomic_fetch_add(&e->met.tokens_in, j->n_tokens);
        set_json(r, 200, json_pack("{s:o}", "translatedText", out));
    }
    serve_job_release(j);
}

/* ---- /tokenize, /detokenize (llama-server's format) ---------------------------------------- */

/* ids[k0 .. k1) without the special tokens a Marian / NLLB tokenizer puts around a source (what
 * it gives for the empty text: [src_lang] </s>, </s> [src_lang] or </s>). */
static void mt_strip_special(const attn_mt_tok *mt, const int32_t *ids, size_t k, size_t *k0,
                             size_t *k1) {
    int32_t *e = NULL;
    size_t ne = 0;
    *k0 = 0, *k1 = k;
    if (attn_mt_tok_encode_source(mt, NULL, "", 0, &e, &ne) || ne > k) {
        attn_clear_error();
        attn_free(e);
        return;
    }
    size_t p = 0;
    while (p < ne && ids[p] == e[p]) p++;
    size_t q = 0; /* e[p ..] ends ids */
    while (p + q < ne && ids[k - (ne - p) + q] == e[p + q]) q++;
    if (p + q == ne) *k0 = p, *k1 = k - (ne - p);
    attn_free(e);
}

static void h_tokenize(serve_engine *e, json_t *root, serve_response *r) {
    json_t *c = json_object_get(root, "content");
    if (!json_is_string(c)) {
        serve_error(r, 400, "invalid_request_error", "'content' must be a string");
        return;
    }
    json_t *sp = json_object_get(root, "add_special");
    if (sp && !json_is_null(sp) && !json_is_boolean(sp)) {
        serve_error(r, 400, "invalid_request_error", "'add_special' must be true or false");
        return;
    }
    serve_model *m = pick_model(e, root, (serve_kind)-1, "/tokenize", r);
    if (!m) return;
    if (!m->tok) { /* a Marian / NLLB tokenizer: the source side, as tokenizer(text) */
        int32_t *mids = NULL;
        size_t k = 0;
        if (attn_mt_tok_encode_source(m->hf_mt, NULL, json_string_value(c), json_string_length(c),
                                      &mids, &k)) {
            serve_error(r, 400, "invalid_request_error", "'content': %s", attn_last_error());
            return;
        }
        size_t k0 = 0, k1 = k;
        if (json_is_false(sp)) mt_strip_special(m->hf_mt, mids, k, &k0, &k1);
        json_t *ids = json_array();
        for (size_t i = k0; i < k1; i++) json_array_append_new(ids, json_integer(mids[i]));
        attn_free(mids);
        set_json(r, 200, json_pack("{s:o, s:s}", "tokens", ids, "model", m->name));
        return;
    }
    attn_tok_encode_params ep = attn_tok_encode_default_params();
    ep.add_special_tokens = !json_is_false(sp);
    attn_tok_encoding enc;
    if (attn_tok_encode_ex(m->tok, json_string_value(c), json_string_length(c), NULL, 0, &ep, &enc)) {
        serve_error(r, 400, "invalid_request_error", "'content': %s", attn_last_error());
        return;
    }
    json_t *ids = json_array();
    for (size_t i = 0; i < enc.n; i++) json_array_append_new(ids, json_integer(enc.ids[i]));
    attn_tok_encoding_free(&enc);
    set_json(r, 200, json_pack("{s:o, s:s}", "tokens", ids, "model", m->name));
}

static void h_detokenize(serve_engine *e, json_t *root, serve_response *r) {
    json_t *t = json_object_get(root, "tokens");
    if (!json_is_array(t) || json_array_size(t) > (size_t)e->cfg.max_input_tokens) {
        serve_error(r, 400, "invalid_request_error", "'tokens' must be an array of up to %d ids",
                    e->cfg.max_input_tokens);
        return;
    }
    serve_model *m = pick_model(e, root, (serve_kind)-1, "/detokenize", r);
    if (!m) return;
    const size_t n = json_array_size(t);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        serve_error(r, 500, "server_error", "out of memory");
        return;
    }
    const int32_t V = m->tok ? attn_tok_vocab_size(m->tok) : attn_mt_tok_vocab_size(m->hf_mt, true);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(t, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= V) {
            free(ids);
            serve_error(r, 400, "invalid_request_error",
                        "'tokens[%zu]' must be an id from 0 to %d", i, (int)V - 1);
            return;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    char *text = NULL;
    size_t len = 0;
    attn_status s = m->tok ? attn_tok_decode_alloc(m->tok, ids, n, 0, &text, &len)
                           : attn_mt_tok_decode(m->hf_mt, ids, n, 0, &text, &len);
    free(ids);
    if (s) {
        serve_error(r, 400, "invalid_request_error", "'tokens': %s", attn_last_error());
        return;
    }
    set_json(r, 200, json_pack("{s:s%, s:s}", "content", text, len, "model", m->name));
    attn_free(text);
}

/* ---- GET routes ----------------------------------------------------------------------------- */

static void h_models(serve_engine *e, serve_response *r) {
    json_t *data = json_array();
    for (int i = 0; i < e->n_models; i++) {
        const serve_model *m = e->models[i];
        json_array_append_new(data, json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", m->name,
                                              "object", "model", "created",
                                              (json_int_t)0, "owned_by", "attn", "kind",
                                              serve_kind_name(m->kind)));
    }
    set_json(r, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

typedef struct {
    char *b;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        const int k = vsnprintf(s->b ? s->b + s->n : NULL, s->b ? s->cap - s->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (s->b && s->n + (size_t)k < s->cap) {
            s->n += (size_t)k;
            return;
        }
        size_t cap = s->cap ? s->cap * 2 : 4096;
        while (cap < s->n + (size_t)k + 1) cap *= 2;
        char *g = realloc(s->b, cap);
        if (!g) return;
        s->b = g, s->cap = cap;
    }
}

static void h_metrics(serve_engine *e, serve_response *r) {
    serve_metrics *m = &e->met;
    sbuf s = {0};
    sb_printf(&s, "# HELP attn_requests_total HTTP requests answered, by route.\n"
                  "# TYPE attn_requests_total counter\n");
    for (int i = 0; i <= R_OTHER; i++)
        sb_printf(&s, "attn_requests_total{route=\"%s\"} %lld\n", route_name[i],
                  (long long)atomic_load(&m->requests[i]));
    sb_printf(&s, "# HELP attn_errors_total Requests answered with a status >= 400.\n"
                  "# TYPE attn_errors_total counter\n");
    for (int i = 0; i <= R_OTHER; i++)
        sb_printf(&s, "attn_errors_total{route=\"%s\"} %lld\n", route_name[i],
                  (long long)atomic_load(&m->errors[i]));
    sb_printf(&s, "# HELP attn_request_seconds Request latency (until the last byte is produced).\n"
                  "# TYPE attn_request_seconds histogram\n");
    for (int i = 0; i <= R_OTHER; i++) {
        long long cum = 0;
        for (int b = 0; b <= SERVE_N_LAT; b++) {
            cum += atomic_load(&m->lat_bucket[i][b]);
            if (b < SERVE_N_LAT)
                sb_printf(&s, "attn_request_seconds_bucket{route=\"%s\",le=\"%g\"} %lld\n",
                          route_name[i], lat_le[b], cum);
            else
                sb_printf(&s, "attn_request_seconds_bucket{route=\"%s\",le=\"+Inf\"} %lld\n",
                          route_name[i], cum);
        }
        sb_printf(&s, "attn_request_seconds_sum{route=\"%s\"} %.6f\n", route_name[i],
                  (double)atomic_load(&m->lat_sum_us[i]) * 1e-6);
        sb_printf(&s, "attn_request_seconds_count{route=\"%s\"} %lld\n", route_name[i], cum);
    }
    sb_printf(&s, "# HELP attn_queue_length Requests waiting for a worker, by model.\n"
                  "# TYPE attn_queue_length gauge\n");
    for (int i = 0; i < e->n_models; i++) {
        serve_model *md = e->models[i];
        pthread_mutex_lock(&md->mu);
        const int q = md->n_queue, a = md->n_active;
        pthread_mutex_unlock(&md->mu);
        sb_printf(&s, "attn_queue_length{model=\"%s\"} %d\n", md->name, q);
        if (md->kind == SERVE_GEN)
            sb_printf(&s, "attn_slots_active{model=\"%s\"} %d\n", md->name, a);
    }
    sb_printf(&s,
              "# TYPE attn_tokens_in_total counter\nattn_tokens_in_total %lld\n"
              "# TYPE attn_tokens_out_total counter\nattn_tokens_out_total %lld\n"
              "# HELP attn_batches_total Embedding and translation batches run.\n"
              "# TYPE attn_batches_total counter\nattn_batches_total %lld\n"
              "# TYPE attn_batch_texts_total counter\nattn_batch_texts_total %lld\n"
              "# HELP attn_decode_iterations_total Scheduler iterations (one token per active slot).\n"
              "# TYPE attn_decode_iterations_total counter\nattn_decode_iterations_total %lld\n"
              "# TYPE attn_decode_slot_steps_total counter\nattn_decode_slot_steps_total %lld\n"
              "# TYPE attn_cancelled_total counter\nattn_cancelled_total %lld\n"
              "# HELP attn_prompt_tokens_cached_total Prompt tokens a slot's cache gave (not computed).\n"
              "# TYPE attn_prompt_tokens_cached_total counter\nattn_prompt_tokens_cached_total %lld\n"
              "# HELP attn_prompt_tokens_shared_total Of those, tokens copied from another slot's cache.\n"
              "# TYPE attn_prompt_tokens_shared_total counter\nattn_prompt_tokens_shared_total %lld\n"
              "# TYPE attn_requests_in_flight gauge\nattn_requests_in_flight %d\n"
              "# TYPE attn_uptime_seconds gauge\nattn_uptime_seconds %.3f\n",
              (long long)atomic_load(&m->tokens_in), (long long)atomic_load(&m->tokens_out),
              (long long)atomic_load(&m->batches), (long long)atomic_load(&m->batch_items),
              (long long)atomic_load(&m->gen_steps), (long long)atomic_load(&m->gen_step_slots),
              (long long)atomic_load(&m->cancelled), (long long)atomic_load(&m->prompt_cached),
              (long long)atomic_load(&m->prompt_shared),
              atomic_load(&m->in_flight),
              serve_now() - e->t_start);
    r->status = s.b ? 200 : 500;
    r->type = "text/plain; version=0.0.4";
    r->body = s.b;
    r->len = s.n;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

void serve_attention(serve_engine *e, json_t *root, serve_response *r); /* attention.c */

void serve_handle(serve_engine *e, const char *method, const char *path, const char *auth,
                  const char *body, size_t len, serve_gone_fn gone, void *gone_ctx,
                  serve_response *r) {
    memset(r, 0, sizeof *r);
    static const struct {
        const char *path;
        int route;
        bool post;
    } routes[] = {{"/health", R_HEALTH, false},         {"/v1/models", R_MODELS, false},
                  {"/metrics", R_METRICS, false},       {"/v1/embeddings", R_EMBED, true},
                  {"/v1/completions", R_COMPLETE, true}, {"/v1/chat/completions", R_CHAT, true},
                  {"/translate", R_TRANSLATE, true},    {"/tokenize", R_TOKENIZE, true},
                  {"/detokenize", R_DETOKENIZE, true},  {"/v1/attention", R_ATTENTION, true}};
    int route = R_OTHER;
    bool post = false;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(path, routes[i].path)) route = routes[i].route, post = routes[i].post;
    r->route = route;
    if (route == R_OTHER) {
        serve_error(r, 404, "not_found_error", "no route %s %s", method, path);
        return;
    }
    if (strcmp(method, post ? "POST" : "GET") != 0) {
        serve_error(r, 405, "invalid_request_error", "%s takes %s, not %s", path,
                    post ? "POST" : "GET", method);
        return;
    }
    if (route == R_HEALTH) {
        const bool drain = atomic_load(&e->draining);
        set_json(r, drain ? 503 : 200, json_pack("{s:s}", "status", drain ? "draining" : "ok"));
        return;
    }
    if (!auth_ok(e->cfg.api_key, auth)) {
        serve_error(r, 401, "authentication_error",
                    "Incorrect or missing API key (send 'Authorization: Bearer KEY')");
        return;
    }
    if (route == R_MODELS) return h_models(e, r);
    if (route == R_METRICS) return h_metrics(e, r);
    if (atomic_load(&e->draining)) {
        serve_error(r, 503, "unavailable_error", "the server is shutting down");
        return;
    }
    if (len > e->cfg.max_body) {
        serve_error(r, 413, "invalid_request_error", "the request body is %zu bytes, more than %zu",
                    len, e->cfg.max_body);
        return;
    }
    const size_t bad = attn_tok_utf8_check(body ? body : "", len, false);
    if (bad < len) {
        serve_error(r, 400, "invalid_request_error",
                    "the request body is not UTF-8 text: %s at byte %zu",
                    body[bad] ? "invalid UTF-8" : "a NUL byte", bad);
        return;
    }
    if (json_depth(body ? body : "", len, e->cfg.max_depth) > e->cfg.max_depth) {
        serve_error(r, 400, "invalid_request_error", "the JSON body is nested deeper than %d",
                    e->cfg.max_depth);
        return;
    }
    json_error_t err;
    json_t *root = json_loadb(body ? body : "", len, 0, &err);
    if (!root || !json_is_object(root)) {
        if (root)
            serve_error(r, 400, "invalid_request_error", "the JSON body must be an object");
        else
            serve_error(r, 400, "invalid_request_error",
                        "the body is not valid JSON: %s (line %d, column %d)", err.text, err.line,
                        err.column);
        json_decref(root);
        return;
    }
    switch (route) {
    case R_EMBED: h_embeddings(e, root, gone, gone_ctx, r); break;
    case R_COMPLETE: h_generate(e, root, false, gone, gone_ctx, r); break;
    case R_CHAT: h_generate(e, root, true, gone, gone_ctx, r); break;
    case R_TRANSLATE: h_translate(e, root, gone, gone_ctx, r); break;
    case R_TOKENIZE: h_tokenize(e, root, r); break;
    case R_DETOKENIZE: h_detokenize(e, root, r); break;
    default: serve_attention(e, root, r); break;
    }
    r->route = route;
    json_decref(root);
}

/* http.c — `attn serve` over libmicrohttpd (serve.h): a thread per connection, the body gathered
 * within max_body (413 at once from Content-Length, else when it grows past the limit), a body
 * upload that takes longer than the timeout closes the connection (a client sending a byte a
 * second), server-sent events read from the job as the scheduler fills it, and a client that
 * goes away (its socket hung up: poll's POLLRDHUP) cancels its job. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "serve.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct serve_http {
    serve_engine *e;
    struct MHD_Daemon *d;
    int port;
};

typedef struct {
    serve_http *h;
    struct MHD_Connection *conn;
    char *body;
    size_t n, cap;
    bool too_big;
    double t0;
} conn_ctx;

typedef struct {
    serve_http *h;
    struct MHD_Connection *conn;
    serve_job *job;
    double t0;
    bool error_sent;
    int route;
    size_t injected; /* bytes of keep-alive comments sent: MHD's pos counts them, j->sse not */
} stream_ctx;

/* An SSE comment (clients ignore lines that start with ':') sent when a stream has had nothing to
 * send for a third of --timeout (a queued request, a slow step): libmicrohttpd closes a
 * connection idle for --timeout, and a stream waiting its turn is not idle. */
static const char k_keepalive[] = ": keep-alive\n\n";

static bool client_gone(void *ctx) {
    struct MHD_Connection *c = ctx;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd p = {ci->connect_fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* r's body goes to libmicrohttpd, which frees it once sent (r->body is NULL after): a copy of a
 * 100 MB /v1/attention answer would double the server's memory for it. */
static enum MHD_Result send_response(struct MHD_Connection *c, serve_response *r) {
    struct MHD_Response *resp =
        r->body ? MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE)
                : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    r->body = NULL;
    MHD_add_response_header(resp, "Content-Type", r->type ? r->type : "application/json");
    const enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* The server-sent events of a streaming job, as the scheduler produces them. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_ctx *s = cls;
    serve_job *j = s->job;
    const double ka = s->h->e->cfg.timeout / 3.0;
    const double t_wait = serve_now();
    pthread_mutex_lock(&j->mu);
    for (;;) {
        const size_t jp = (size_t)pos - s->injected;
        if (j->sse_len > jp) {
            size_t n = j->sse_len - jp;
            if (n > max) n = max;
            memcpy(buf, j->sse + jp, n);
            pthread_mutex_unlock(&j->mu);
            return (ssize_t)n;
        }
        if (j->done) {
            if (j->status && !s->error_sent && !atomic_load(&j->cancelled)) {
                /* Failed after the headers went out: an error event, then the end. */
                s->error_sent = true;
                char ev[700];
                char msg[520];
                snprintf(msg, sizeof msg, "%s", j->msg);
                for (char *c = msg; *c; c++)
                    if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = ' ';
                const int k = snprintf(ev, sizeof ev,
                                       "data: {\"error\":{\"message\":\"%s\",\"type\":\"server_error\","
                                       "\"code\":%d}}\n\ndata: [DONE]\n\n",
                                       msg, j->http_status);
                char *g = realloc(j->sse, j->sse_len + (size_t)k + 1);
                if (g) {
                    memcpy(g + j->sse_len, ev, (size_t)k + 1);
                    j->sse = g, j->sse_len += (size_t)k, j->sse_cap = j->sse_len + 1;
                    continue;
                }
            }
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!j->done && j->sse_len <= jp && client_gone(s->conn)) {
            atomic_store(&j->cancelled, true);
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (!j->done && j->sse_len <= jp && ka > 0 && serve_now() - t_wait >= ka &&
            max >= sizeof k_keepalive - 1) {
            pthread_mutex_unlock(&j->mu);
            memcpy(buf, k_keepalive, sizeof k_keepalive - 1);
            s->injected += sizeof k_keepalive - 1;
            return (ssize_t)(sizeof k_keepalive - 1);
        }
    }
}

static void stream_free(void *cls) {
    stream_ctx *s = cls;
    serve_job *j = s->job;
    pthread_mutex_lock(&j->mu);
    const bool ok = j->done && !j->status;
    if (!j->done) atomic_store(&j->cancelled, true); /* the connection ended first */
    pthread_mutex_unlock(&j->mu);
    serve_account(s->h->e, s->route, ok ? 200 : 499, serve_now() - s->t0);
    serve_job_release(j);
    free(s);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    serve_http *h = cls;
    serve_engine *e = h->e;
    conn_ctx *cc = *con_cls;
    if (!cc) { /* the headers: a context, and an early 413 from Content-Length */
        cc = calloc(1, sizeof *cc);
        if (!cc) return MHD_NO;
        cc->h = h, cc->conn = c, cc->t0 = serve_now();
        *con_cls = cc;
        atomic_fetch_add(&e->met.in_flight, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > e->cfg.max_body) {
            serve_response r;
            memset(&r, 0, sizeof r);
            serve_error(&r, 413, "invalid_request_error",
                        "the request body is %s bytes, more than %zu", cl, e->cfg.max_body);
            const enum MHD_Result ok = send_response(c, &r);
            serve_account(e, 10, 413, serve_now() - cc->t0);
            serve_response_free(&r);
            return ok;
        }
        return MHD_YES;
    }
    if (*upload_data_size) { /* a piece of the body */
        const size_t k = *upload_data_size;
        *upload_data_size = 0;
        if (serve_now() - cc->t0 > e->cfg.timeout) return MHD_NO; /* too slow: close */
        if (cc->too_big || cc->n + k > e->cfg.max_body) {
            cc->too_big = true;
            free(cc->body);
            cc->body = NULL, cc->n = cc->cap = 0;
            return MHD_YES;
        }
        if (cc->n + k + 1 > cc->cap) {
            size_t cap = cc->cap ? cc->cap : 4096;
            while (cap < cc->n + k + 1) cap *= 2;
            char *g = realloc(cc->body, cap);
            if (!g) return MHD_NO;
            cc->body = g, cc->cap = cap;
        }
        memcpy(cc->body + cc->n, upload_data, k);
        cc->n += k;
        return MHD_YES;
    }
    serve_response r;
    memset(&r, 0, sizeof r);
    if (cc->too_big) {
        serve_error(&r, 413, "invalid_request_error", "the request body is more than %zu bytes",
                    e->cfg.max_body);
        r.route = 10;
    } else {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        serve_handle(e, method, url, auth, cc->body, cc->n, client_gone, c, &r);
    }
    enum MHD_Result ok;
    if (r.stream) {
        stream_ctx *s = calloc(1, sizeof *s);
        struct MHD_Response *resp = NULL;
        if (s) {
            s->h = h, s->conn = c, s->job = r.stream, s->t0 = cc->t0, s->route = r.route;
            resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s,
                                                     stream_free);
        }
        if (!resp) {
            free(s);
            serve_response_free(&r);
            return MHD_NO;
        }
        r.stream = NULL; /* the stream context owns the job's reference now */
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        ok = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
    } else {
        ok = send_response(c, &r);
        serve_account(e, r.route, r.status, serve_now() - cc->t0);
    }
    serve_response_free(&r);
    return ok;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why) {
    (void)c, (void)why;
    serve_http *h = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) return;
    free(cc->body);
    free(cc);
    *con_cls = NULL;
    atomic_fetch_sub(&h->e->met.in_flight, 1);
}

attn_status serve_http_start(serve_engine *e, serve_http **out) {
    *out = NULL;
    serve_http *h = calloc(1, sizeof *h);
    if (!h) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "serve: out of memory");
    h->e = e;
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    const struct sockaddr *addr;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_POLL;
    if (inet_pton(AF_INET, e->cfg.host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)e->cfg.port);
        addr = (const struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, e->cfg.host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)e->cfg.port);
        addr = (const struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        free(h);
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "--host '%s' is not an IPv4 or IPv6 address", e->cfg.host);
    }
    h->d = MHD_start_daemon(flags, (uint16_t)e->cfg.port, NULL, NULL, on_request, h,
                            MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                            h, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(e->cfg.max_queue + 64),
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(e->cfg.timeout + 0.999),
                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 * 1024), MHD_OPTION_END);
    if (!h->d) {
        free(h);
        return attn_set_error(ATTN_STATUS_IO, "cannot listen on %s port %d (in use?)", e->cfg.host,
                              e->cfg.port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : e->cfg.port;
    *out = h;
    return ATTN_STATUS_OK;
}

int serve_http_port(const serve_http *h) { return h->port; }

void serve_http_quiesce(serve_http *h) {
    if (h && h->d) {
        const MHD_socket fd = MHD_quiesce_daemon(h->d);
        if (fd != MHD_INVALID_SOCKET) close(fd);
    }
}

void serve_http_stop(serve_http *h) {
    if (!h) return;
    if (h->d) MHD_stop_daemon(h->d);
    free(h);
}

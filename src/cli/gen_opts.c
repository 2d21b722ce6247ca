/* gen_opts.c — sampling and stopping options shared by `attn generate` and `attn chat`
 * (gen_opts.h). */
#include "gen_opts.h"

#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char cli_gen_usage[] =
    "  --max-tokens N       new tokens at most (default: generation_config.json's max_new_tokens,\n"
    "                       else the command's default)\n"
    "  --temperature T      divide the logits by T (0 = greedy)\n"
    "  --top-k K            sample among the K most likely tokens (0 = all)\n"
    "  --top-p P            nucleus sampling: the most likely tokens up to mass P (1 = off)\n"
    "  --min-p P            drop tokens less likely than P x the most likely one (0 = off)\n"
    "  --repetition-penalty R  divide (multiply, if negative) the logits of every token already in\n"
    "                       the text by R (1 = off), as transformers' repetition_penalty\n"
    "  --seed S             the same seed gives the same text (default: from the clock; printed)\n"
    "  --greedy             always the most likely token (transformers' do_sample=False)\n"
    "  --sample             sample even when generation_config.json says do_sample: false\n"
    "  --stop TEXT          end the text before the first TEXT (repeatable, up to 16)\n"
    "  --ignore-eos         do not stop at the end-of-text token(s)\n"
    "  --quant-act f32|q8   products on quantized weights (GGUF Q8_0, Q4_K, ...) while generating:\n"
    "                       f32 (default) keeps the activations float32, exact to the dequantized\n"
    "                       weights (transformers' numbers on a GGUF file); q8 rounds them to int8\n"
    "                       per 32 for integer dot products as llama.cpp does: faster, ~1e-3\n"
    "                       relative error per product, and the text may differ (llama.cpp's)\n"
    "  --kv-type f32|f16    the cached keys and values: f32 (default) or f16, rounded to binary16\n"
    "                       as llama.cpp's default cache: decoding reads half the bytes; the text\n"
    "                       may differ from f32's (the rounding, ~1e-3)\n"
    "Defaults: the model directory's generation_config.json (do_sample, temperature, top_k, top_p,\n"
    "min_p, repetition_penalty, eos_token_id) when it has one — a model without do_sample: true\n"
    "decodes greedily, as transformers does — else sampling at temperature 1 with top-k 50.\n";

void cli_gen_opts_init(cli_gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->gp = attn_gen_default_params();
}

int cli_gen_opt(cli_gen_opts *o, const char *cmd, const char *a, const char *v, int *used) {
    *used = 1;
    if (!strcmp(a, "--greedy")) {
        o->gp.greedy = true, o->has_greedy = true;
        return CLI_EXIT_OK;
    }
    if (!strcmp(a, "--sample")) {
        o->gp.greedy = false, o->has_greedy = true;
        return CLI_EXIT_OK;
    }
    if (!strcmp(a, "--ignore-eos")) {
        o->ignore_eos = true;
        return CLI_EXIT_OK;
    }
    static const char *const with_value[] = {"--max-tokens", "--temperature", "--top-k",
                                             "--top-p", "--min-p", "--repetition-penalty",
                                             "--seed", "--stop", "--quant-act", "--kv-type"};
    bool known = false;
    for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++) known |= !strcmp(a, with_value[k]);
    if (!known) return -1;
    if (!v) return cli_usage_error("%s: %s needs a value", cmd, a);
    *used = 2;
    double d;
    if (!strcmp(a, "--max-tokens")) {
        if (!cli_parse_int(v, 1, 1 << 24, &o->max_tokens))
            return cli_usage_error("%s: --max-tokens needs an integer from 1 to %d, got '%s'", cmd,
                                   1 << 24, v);
    } else if (!strcmp(a, "--quant-act")) {
        if (!strcmp(v, "q8"))
            o->gp.quant_act = ATTN_QUANT_ACT_Q8;
        else if (!strcmp(v, "f32"))
            o->gp.quant_act = ATTN_QUANT_ACT_F32;
        else
            return cli_usage_error("%s: --quant-act needs q8 or f32, got '%s'", cmd, v);
    } else if (!strcmp(a, "--kv-type")) {
        if (!strcmp(v, "f16"))
            o->gp.kv_f16 = true;
        else if (!strcmp(v, "f32"))
            o->gp.kv_f16 = false;
        else
            return cli_usage_error("%s: --kv-type needs f16 or f32, got '%s'", cmd, v);
    } else if (!strcmp(a, "--temperature")) {
        if (!cli_parse_double(v, 0, 1e6, &d))
            return cli_usage_error("%s: --temperature needs a number >= 0, got '%s'", cmd, v);
        o->gp.temperature = (float)d, o->has_temperature = true;
    } else if (!strcmp(a, "--top-k")) {
        if (!cli_parse_int(v, 0, 1 << 24, &o->gp.top_k))
            return cli_usage_error("%s: --top-k needs an integer >= 0, got '%s'", cmd, v);
        o->has_top_k = true;
    } else if (!strcmp(a, "--top-p")) {
        if (!cli_parse_double(v, 0, 1, &d))
            return cli_usage_error("%s: --top-p needs a number from 0 to 1, got '%s'", cmd, v);
        o->gp.top_p = (float)d, o->has_top_p = true;
    } else if (!strcmp(a, "--min-p")) {
        if (!cli_parse_double(v, 0, 1, &d))
            return cli_usage_error("%s: --min-p needs a number from 0 to 1, got '%s'", cmd, v);
        o->gp.min_p = (float)d, o->has_min_p = true;
    } else if (!strcmp(a, "--repetition-penalty")) {
        if (!cli_parse_double(v, 1e-6, 1e6, &d))
            return cli_usage_error("%s: --repetition-penalty needs a number > 0, got '%s'", cmd, v);
        o->gp.repetition_penalty = (float)d, o->has_rep = true;
    } else if (!strcmp(a, "--seed")) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (errno || *end || !*v || *v == '-')
            return cli_usage_error("%s: --seed needs a non-negative integer, got '%s'", cmd, v);
        o->gp.seed = s, o->has_seed = true;
    } else { /* --stop */
        if (!*v) return cli_usage_error("%s: --stop needs a non-empty text", cmd);
        if (o->n_stops == CLI_GEN_MAX_STOPS)
            return cli_usage_error("%s: at most %d --stop strings", cmd, CLI_GEN_MAX_STOPS);
        o->stops[o->n_stops++] = v;
    }
    return CLI_EXIT_OK;
}

static void add_id(int32_t *ids, int *n, int32_t id) {
    if (id < 0 || *n >= ATTN_GEN_MAX_STOP_IDS) return;
    for (int i = 0; i < *n; i++)
        if (ids[i] == id) return;
    ids[(*n)++] = id;
}

attn_status cli_gguf_arch(const char *path, char *buf, size_t cap) {
    buf[0] = '\0';
    if (!attn_gpt_is_gguf_path(path)) return ATTN_STATUS_OK;
    attn_gguf *g;
    attn_status s = attn_gguf_open(path, &g);
    if (s) return s;
    const char *a;
    s = attn_gguf_get_str(g, "general.architecture", &a, NULL);
    if (!s) snprintf(buf, cap, "%s", a);
    attn_gguf_close(g);
    return s;
}

attn_status cli_chat_template_load(const char *path, const char *which, const attn_tok *tok,
                                   attn_chat_template **out) {
    if (!attn_gpt_is_gguf_path(path)) return attn_chat_template_load_dir(path, which, out);
    *out = NULL;
    attn_gguf *g;
    attn_status s = attn_gguf_open(path, &g);
    if (s) return s;
    char key[256];
    snprintf(key, sizeof key, "tokenizer.chat_template%s%s", which ? "." : "", which ? which : "");
    const char *src;
    uint64_t len;
    s = attn_gguf_get_str(g, key, &src, &len);
    if (s == ATTN_STATUS_NOT_FOUND)
        s = attn_set_error(ATTN_STATUS_NOT_FOUND, "%s: no chat template (no key '%s')", path,
                           key);
    if (!s) s = attn_chat_template_parse(src, (size_t)len, path, out);
    static const struct {
        const char *var;
        attn_tok_special which;
    } SPECIAL[] = {{"bos_token", ATTN_TOK_BOS}, {"eos_token", ATTN_TOK_EOS},
                   {"unk_token", ATTN_TOK_UNK}, {"pad_token", ATTN_TOK_PAD},
                   {"sep_token", ATTN_TOK_SEP}, {"cls_token", ATTN_TOK_CLS},
                   {"mask_token", ATTN_TOK_MASK}};
    for (size_t i = 0; i < sizeof SPECIAL / sizeof SPECIAL[0] && !s; i++) {
        const int32_t id = attn_tok_special_id(tok, SPECIAL[i].which);
        const char *t = id >= 0 ? attn_tok_id_to_token(tok, id) : NULL;
        if (t) s = attn_chat_template_set_token(*out, SPECIAL[i].var, t);
    }
    if (s) {
        attn_chat_template_free(*out);
        *out = NULL;
    }
    attn_gguf_close(g);
    return s;
}

attn_status cli_gen_resolve(cli_gen_opts *o, const char *dir, const attn_gpt_model *m,
                            const attn_tok *tok, int def_max_tokens, attn_gen_params *gp,
                            int32_t *stop_ids, int *n_stop, int *max_tokens) {
    attn_gen_config gc;
    attn_status st = attn_gen_config_load(dir, &gc);
    if (st) return st;
    attn_gen_params p = gc.found ? gc.params : attn_gen_default_params();
    if (o->has_greedy) p.greedy = o->gp.greedy;
    if (o->has_temperature) p.temperature = o->gp.temperature;
    if (o->has_top_k) p.top_k = o->gp.top_k;
    if (o->has_top_p) p.top_p = o->gp.top_p;
    if (o->has_min_p) p.min_p = o->gp.min_p;
    if (o->has_rep) p.repetition_penalty = o->gp.repetition_penalty;
    p.quant_act = o->gp.quant_act;
    p.kv_f16 = o->gp.kv_f16;
    /* A sampling flag asks for sampling, unless --greedy was given too. */
    if (!o->has_greedy && (o->has_temperature || o->has_top_k || o->has_top_p || o->has_min_p))
        p.greedy = false;
    if (o->has_seed) {
        p.seed = o->gp.seed;
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        p.seed = (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    }
    *gp = p;
    *max_tokens = o->max_tokens ? o->max_tokens : gc.max_new_tokens ? gc.max_new_tokens : def_max_tokens;
    *n_stop = 0;
    if (!o->ignore_eos) {
        add_id(stop_ids, n_stop, m->cfg.eos_token_id);
        for (int i = 0; i < m->cfg.n_more_eos; i++) add_id(stop_ids, n_stop, m->cfg.more_eos_token_ids[i]);
        for (int i = 0; i < gc.n_eos; i++) add_id(stop_ids, n_stop, gc.eos_token_ids[i]);
        if (*n_stop == 0) add_id(stop_ids, n_stop, attn_tok_token_to_id(tok, "<|endoftext|>"));
    }
    return ATTN_STATUS_OK;
}

bool cli_gen_on_token(void *ctx, int32_t id) {
    cli_gen_stream_ctx *g = ctx;
    const char *piece;
    size_t n;
    g->err = attn_gen_stream_push(g->ts, id, &piece, &n);
    if (g->err) return false;
    if (g->print && n) {
        fwrite(piece, 1, n, stdout);
        fflush(stdout);
    }
    return !attn_gen_stream_stopped(g->ts) && !(g->interrupt && *g->interrupt);
}

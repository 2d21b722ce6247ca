/* cmd_translate.c — `attn translate --model DIR [TEXT...]`: greedy or beam-search translation
 * (src/infer/translate.c) of each TEXT, or of each line of standard input, one output line per
 * input line.
 *
 * Speed comes from batching: lines are read in windows of 16 batches, sorted by token length
 * (so a batch pads little and its sentences finish at similar steps), translated batch by batch
 * and written back in input order, so the output is still one line per input line and streams
 * window by window. */
#include "cmd_translate.h"
#include "cmd_translate_hf.h"

#include "cli.h"
#include "train_common.h"

#include "attn_infer.h"
#include "attn_kernels.h"
#include "attn_models.h"
#include "attn_tok.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char translate_usage[] =
    "usage: attn translate --model DIR [--beam K] [--length-penalty A] [--max-len N]\n"
    "                      [--max-len-ratio R] [--batch N] [--heuristic-stop] [--scores]\n"
    "                      [--stats] [--early-stopping true|false|never]\n"
    "                      [--precision f32|bf16|int8|q8_0] [--int8-activations A] [TEXT...]\n"
    "\n"
    "Translates each TEXT, or each line of standard input, writing one line per input line\n"
    "(an empty line gives an empty line). DIR holds config.json, model.safetensors and\n"
    "tokenizer.json (as 'attn train' writes them). The source is the tokenizer's ids plus </s>;\n"
    "decoding starts from <s> and stops at </s>.\n"
    "\n"
    "options:\n"
    "  --beam K            beam size (default 4); 1 is greedy decoding\n"
    "  --length-penalty A  rank finished beams by logp / ((5 + L) / 6)^A, L = output tokens\n"
    "                      with </s> (GNMT; default 0.6; 0 = plain log-probability)\n"
    "  --max-len N         at most N output tokens (default: the model's max_len - 1)\n"
    "  --max-len-ratio R   at most R x source tokens + 10 (default 2; 0 = off)\n"
    "  --batch N           sentences decoded together (default 32)\n"
    "  --heuristic-stop    end a beam search once K beams finished and none of the live ones\n"
    "                      beats them at its current length (faster with A > 0; the default\n"
    "                      stops only when no live beam can win at any length)\n"
    "  --scores            prefix each line with its score and a tab\n"
    "  --stats             at the end, print to standard error the multiply-adds of the matrix\n"
    "                      products and the seconds the translation took (the load excluded):\n"
    "                      how far a run is from the products' arithmetic bound\n"
    "  --max-tokens N      the same as --max-len N\n"
    "  --precision P       f32 (default: transformers' numbers), bf16 (the matrix products in\n"
    "                      bfloat16; needs a CPU with AVX512-BF16), int8 (CTranslate2's int8:\n"
    "                      every linear map's weights, the output projection's included,\n"
    "                      quantized at load to int8 with one scale per output row, the\n"
    "                      activations to int8 with one scale per row, int32 sums; BLEU of the\n"
    "                      demo model within 0.3 of f32, see docs/translation.md) or q8_0 (the\n"
    "                      weights as GGUF's Q8_0: one scale per 32 weights of a row)\n"
    "  --int8-activations A  with q8_0: int8 (default) rounds the activations to int8 per 32\n"
    "                      for integer dot products: products of <= 8 rows always, larger\n"
    "                      ones (the encoder, beam steps) with AVX512-VNNI (else as\n"
    "                      int8-small); int8-small only products of <= 8 rows (the rest\n"
    "                      float32 on the dequantized weights); f32 keeps them float32\n"
    "\n"
    "Hugging Face translation directories (MarianMTModel / opus-mt, M2M100ForConditionalGeneration\n"
    "/ NLLB-200, and 'attn export' output) decode as transformers' generate does, with the\n"
    "directory's generation_config.json as defaults. Text goes through the directory's tokenizer\n"
    "(Marian: source.spm, target.spm, vocab.json; NLLB: tokenizer.json with an NLLB\n"
    "tokenizer_config.json; otherwise a plain tokenizer.json, </s> appended). Options there:\n"
    "  --beam K            num_beams (default: generation_config.json's)\n"
    "  --max-tokens N      max_new_tokens (default: generation_config.json's max_length)\n"
    "  --length-penalty A  transformers' length_penalty: finished beams rank by logp / L^A\n"
    "                      (default: generation_config.json's, else 1)\n"
    "  --early-stopping E  true: a sentence ends once num_beams hypotheses have finished (what\n"
    "                      CTranslate2 does with a length penalty); false: also until no live\n"
    "                      one beats them at its current length (transformers' default); never:\n"
    "                      until none can at any length (default: generation_config.json's)\n"
    "  --src-lang L        NLLB / M2M100: the source language code (e.g. eng_Latn; default the\n"
    "                      tokenizer's src_lang)\n"
    "  --tgt-lang L        NLLB / M2M100: the forced first token (e.g. zho_Hans); Marian: its\n"
    "                      >>L<< token put before the source (multi-target models)\n"
    "  --ids               input lines are source ids (space- or comma-separated, </s> included),\n"
    "                      output lines ids (without the decoder start and </s>)\n"
    "  --batch N, --scores as above (the score: transformers' sequences_scores for beams, the\n"
    "                      sum of log-probabilities for greedy)\n"
    "  --precision P, --int8-activations A  as above\n";

typedef struct {
    attn_encdec_model *m;
    attn_tok *tok;
    attn_translate_session *s;
    attn_translate_options o;
    int batch;
    bool scores;
    bool warned;
} ctx;

typedef struct {
    char *text;   /* input line (owned) */
    char *result; /* translation (owned, attn_alloc'd) */
    float score;
} item;

/* A one-line error for a bad input text: "<stdin>:LINE: ..." or "argument N: ...". */
static attn_status check_text(const char *text, size_t len, const char *where, size_t index) {
    size_t at = 0;
    const char *what = cli_text_problem(text, len, &at);
    if (!what) return ATTN_STATUS_OK;
    return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                          "%s%zu: %s at byte %zu (0x%02X): expected UTF-8 text without NUL bytes",
                          where, index, what, at + 1, (unsigned)(unsigned char)text[at]);
}

/* Translate and print a window of lines in input order. */
static attn_status run_window(ctx *c, item *w, int n) {
    const char **texts = malloc((size_t)(n ? n : 1) * sizeof *texts);
    char **out = malloc((size_t)(n ? n : 1) * sizeof *out);
    float *score = malloc((size_t)(n ? n : 1) * sizeof *score);
    attn_status s = ATTN_STATUS_OK;
    if (!texts || !out || !score) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    size_t cut = 0;
    if (!s) {
        for (int i = 0; i < n; i++) texts[i] = w[i].text;
        s = attn_translate_texts(c->s, &c->o, c->tok, texts, (size_t)n, out, score, &cut);
    }
    if (!s && cut && !c->warned) {
        fprintf(stderr, "attn: warning: sentences longer than the model's %d source tokens were "
                        "cut\n",
                c->m->cfg.max_len - 1);
        c->warned = true;
    }
    for (int i = 0; i < n && !s; i++) w[i].result = out[i], w[i].score = score[i];
    free(texts), free(out), free(score);
    if (s) return s;
    for (int i = 0; i < n; i++) {
        if (c->scores) printf("%.4f\t", (double)w[i].score);
        puts(w[i].result);
    }
    fflush(stdout);
    return ATTN_STATUS_OK;
}

/* --stats: the products' multiply-adds and the seconds since (t0, macs0). */
static void print_stats(double t0, uint64_t macs0) {
    const double dt = train_now_s() - t0, g = 1e-9 * (double)(attn_kernels_multiply_adds() - macs0);
    fprintf(stderr, "attn: stats: %.3f G multiply-adds in matrix products, %.3f s (%.1f G/s)\n", g,
            dt, dt > 0 ? g / dt : 0.0);
}

static void clear_window(item *w, int n) {
    for (int i = 0; i < n; i++) {
        free(w[i].text);
        attn_free(w[i].result);
        memset(&w[i], 0, sizeof w[i]);
    }
}

static attn_status setup(ctx *c, const char *dir) {
    attn_status s;
    if ((s = attn_tok_load(dir, &c->tok))) return s;
    const int32_t bos = attn_tok_special_id(c->tok, ATTN_TOK_BOS);
    const int32_t eos = attn_tok_special_id(c->tok, ATTN_TOK_EOS);
    if (bos < 0 || eos < 0)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/tokenizer.json: no <s> or </s> token (needed to decode)", dir);
    if (bos >= c->m->cfg.tgt_vocab || eos >= c->m->cfg.tgt_vocab)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s: <s>/</s> ids %d/%d outside the model's target vocabulary %d",
                              dir, (int)bos, (int)eos, c->m->cfg.tgt_vocab);
    const int32_t V = attn_tok_vocab_size(c->tok);
    if (V != c->m->cfg.src_vocab || V != c->m->cfg.tgt_vocab)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/tokenizer.json: %d ids, but %s/config.json has src_vocab %d and "
                              "tgt_vocab %d (the tokenizer and the model must match)",
                              dir, (int)V, dir, c->m->cfg.src_vocab, c->m->cfg.tgt_vocab);
    c->o.bos_id = bos, c->o.eos_id = eos;
    const int L = c->m->cfg.max_len;
    /* Decoder positions: the length limit + 1 for </s>; never more than the model has. */
    int max_tgt = c->o.max_len > 0 && c->o.max_len + 1 < L ? c->o.max_len + 1 : L;
    return attn_translate_session_init(c->m, c->batch, c->o.beam_size, L, max_tgt, &c->s);
}

static void teardown(ctx *c) {
    attn_translate_session_free(c->s);
    attn_tok_free(c->tok);
    attn_encdec_model_free(c->m);
}

static bool parse_float(const char *s, float lo, float hi, float *out) {
    if (!s || !*s) return false;
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v >= lo && v <= hi)) return false;
    *out = (float)v;
    return true;
}

int cmd_translate(int argc, char **argv) {
    ctx c;
    memset(&c, 0, sizeof c);
    c.o = attn_translate_default_options();
    c.batch = 32;
    const char *dir = NULL;
    int first_text = argc;
    translate_hf_args hf;
    memset(&hf, 0, sizeof hf);
    bool beam_set = false, lp_set = false;
    hf.early_stopping = -1;
    attn_encdec_precision prec = ATTN_ENCDEC_PRECISION_F32;
    attn_quant_act qact = ATTN_QUANT_ACT_Q8_ALL;
    bool qact_set = false, stats = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(translate_usage, stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--model")) {
            if (!v) return cli_usage_error("--model needs a directory");
            dir = v, i++;
        } else if (!strcmp(a, "--beam")) {
            if (!cli_parse_int(v, 1, 256, &c.o.beam_size))
                return cli_usage_error("--beam needs a number from 1 to 256");
            beam_set = true;
            i++;
        } else if (!strcmp(a, "--length-penalty")) {
            if (!parse_float(v, -10.0f, 10.0f, &c.o.length_penalty))
                return cli_usage_error("--length-penalty needs a number from -10 to 10");
            lp_set = true;
            i++;
        } else if (!strcmp(a, "--early-stopping")) {
            if (!v || (strcmp(v, "true") && strcmp(v, "false") && strcmp(v, "never")))
                return cli_usage_error("--early-stopping must be true, false or never");
            hf.early_stopping = !strcmp(v, "true")    ? ATTN_HF_EARLY_TRUE
                                : !strcmp(v, "false") ? ATTN_HF_EARLY_FALSE
                                                      : ATTN_HF_EARLY_NEVER;
            i++;
        } else if (!strcmp(a, "--ids")) {
            hf.ids = true;
        } else if (!strcmp(a, "--src-lang") || !strcmp(a, "--tgt-lang")) {
            if (!v || !*v) return cli_usage_error("%s needs a language code", a);
            *(a[2] == 's' ? &hf.src_lang : &hf.tgt_lang) = v, i++;
        } else if (!strcmp(a, "--max-len") || !strcmp(a, "--max-tokens")) {
            if (!cli_parse_int(v, 1, 1 << 20, &c.o.max_len))
                return cli_usage_error("--max-len needs a positive number");
            i++;
        } else if (!strcmp(a, "--max-len-ratio")) {
            if (!parse_float(v, 0.0f, 1000.0f, &c.o.max_len_a))
                return cli_usage_error("--max-len-ratio needs a number >= 0");
            i++;
        } else if (!strcmp(a, "--batch")) {
            if (!cli_parse_int(v, 1, 4096, &c.batch))
                return cli_usage_error("--batch needs a number from 1 to 4096");
            i++;
        } else if (!strcmp(a, "--precision")) {
            if (!v || attn_encdec_precision_parse(v, &prec))
                return cli_usage_error("--precision must be f32, bf16, int8 or q8_0");
            i++;
        } else if (!strcmp(a, "--int8-activations")) {
            if (!v || (strcmp(v, "int8") && strcmp(v, "int8-small") && strcmp(v, "f32")))
                return cli_usage_error("--int8-activations must be int8, int8-small or f32");
            qact = !strcmp(v, "f32")          ? ATTN_QUANT_ACT_F32
                   : !strcmp(v, "int8-small") ? ATTN_QUANT_ACT_Q8
                                              : ATTN_QUANT_ACT_Q8_ALL;
            qact_set = true;
            i++;
        } else if (!strcmp(a, "--heuristic-stop")) {
            c.o.stop = ATTN_TRANSLATE_STOP_HEURISTIC;
        } else if (!strcmp(a, "--scores")) {
            c.scores = true;
        } else if (!strcmp(a, "--stats")) {
            stats = true;
        } else if (!strcmp(a, "--")) {
            first_text = i + 1;
            break;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("translate: unknown option '%s'", a);
        } else {
            first_text = i;
            break;
        }
    }
    if (!dir) return cli_usage_error("translate needs --model DIR");
    if (qact_set && prec != ATTN_ENCDEC_PRECISION_Q8_0)
        return cli_usage_error("--int8-activations is for --precision q8_0 (int8 always rounds "
                               "the activations to int8, one scale per row)");
    attn_status s = attn_encdec_load_dir(dir, &c.m);
    if (!s && prec != ATTN_ENCDEC_PRECISION_F32) s = attn_encdec_set_precision(c.m, prec, qact);
    const double t0 = train_now_s();
    const uint64_t macs0 = attn_kernels_multiply_adds();
    if (!s && c.m->cfg.arch != ATTN_ENCDEC_ARCH_ATTN) {
        hf.dir = dir, hf.beam = beam_set ? c.o.beam_size : 0, hf.max_tokens = c.o.max_len;
        hf.batch = c.batch, hf.scores = c.scores;
        hf.length_penalty = lp_set ? c.o.length_penalty : NAN;
        s = translate_hf(&hf, c.m, first_text < argc ? argv + first_text : NULL,
                         first_text < argc ? argc - first_text : 0);
        if (!s && stats) print_stats(t0, macs0);
        attn_encdec_model_free(c.m);
        return s ? cli_fail(s) : CLI_EXIT_OK;
    }
    if (!s && (hf.ids || hf.src_lang || hf.tgt_lang || hf.early_stopping >= 0))
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "%s: --ids, --src-lang, --tgt-lang and --early-stopping are for Hugging "
                           "Face translation directories (Marian, M2M100 / NLLB); this is attn's "
                           "own model (--heuristic-stop)",
                           dir);
    if (!s) s = setup(&c, dir);
    const int wcap = c.batch * 16;
    item *w = calloc((size_t)wcap, sizeof *w);
    if (!s && !w) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
    int n = 0;
    if (!s && first_text < argc) {
        for (int i = first_text; i < argc && !s; i++) {
            if ((s = check_text(argv[i], strlen(argv[i]), "argument ", (size_t)(i - first_text + 1))))
                break;
            if (!(w[n++].text = strdup(argv[i])))
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
            if (!s && n == wcap) s = run_window(&c, w, n), clear_window(w, n), n = 0;
        }
    } else if (!s) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        size_t lineno = 0;
        while (!s && (len = getline(&line, &cap, stdin)) >= 0) {
            while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
            if ((s = check_text(line, (size_t)len, "<stdin>:", ++lineno))) break;
            if (!(w[n++].text = strdup(line)))
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "translate: out of memory");
            if (!s && n == wcap) s = run_window(&c, w, n), clear_window(w, n), n = 0;
        }
        free(line);
        if (!s && ferror(stdin))
            s = attn_set_error(ATTN_STATUS_IO, "<stdin>: read error after line %zu", lineno);
    }
    if (!s && n) s = run_window(&c, w, n);
    if (!s && stats) print_stats(t0, macs0);
    if (w) clear_window(w, n);
    free(w);
    teardown(&c);
    return s ? cli_fail(s) : CLI_EXIT_OK;
}

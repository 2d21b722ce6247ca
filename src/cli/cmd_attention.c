/* cmd_attention.c — `attn attention`: capture every attention map of a model on one input
 * (attn_viz.h) and export it (--out), view it (--html) or draw it (--png).
 *
 * The model directory decides the family: config.json with "src_vocab" is attn's encoder–decoder
 * translator, "model_type": "gpt2" a GPT-2, "model_type": "bert" a BERT. For the translator without
 * --target the source is translated first (greedy or beam search, attn_infer.h) and the attention
 * is then captured by one teacher-forced forward over exactly the tokens the search chose, so the
 * maps belong to the hypothesis that was output even when beam search reordered its hypotheses. */
#include "cmd_attention.h"

#include "cli.h"
#include "gen_opts.h"

#include "attn_bert.h"
#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_infer.h"
#include "attn_models.h"
#include "attn_tok.h"
#include "attn_viz.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char attention_usage[] =
    "usage: attn attention --model DIR|FILE.gguf (TEXT | --ids IDS) [--target TEXT | --target-ids IDS]\n"
    "                      [--beam K] [--length-penalty A] [--src-lang L] [--tgt-lang L]\n"
    "                      [--generate N]\n"
    "                      [--out FILE.safetensors] [--html FILE.html] [--png FILE.png]\n"
    "                      [--kind KIND] [--layer L] [--head H|mean|all] [--query I|TOKEN]\n"
    "                      [--cell PX] [--font FILE]\n"
    "       attn attention --from FILE.safetensors [--html ...] [--png ...] [drawing options]\n"
    "\n"
    "Captures the attention probabilities of every layer and head of the model in DIR on one\n"
    "input and exports, views or draws them. DIR is an encoder-decoder translator written by\n"
    "'attn train' or a Hugging Face Marian (opus-mt) or M2M100 / NLLB translation directory\n"
    "(maps encoder.self.L, decoder.self.L, decoder.cross.L), a decoder (GPT-2,\n"
    "the Llama family: one map per query head, the title says which key/value head each\n"
    "grouped-query head reads) or a BERT\n"
    "directory (maps self.L); or a decoder's GGUF file (gpt2, llama, qwen2, qwen3).\n"
    "\n"
    "input:\n"
    "  TEXT               the input text (translator: the source; the tokenizer's ids + </s>)\n"
    "  --ids IDS          token ids instead of TEXT, separated by commas or spaces, used as\n"
    "                     they are (add </s> or [CLS]/[SEP] yourself)\n"
    "  --target TEXT      translator: teacher-force this target (<s> + ids + </s>) instead of\n"
    "                     translating; --target-ids IDS the same from ids (<s>/</s> included)\n"
    "                     Marian / M2M100 / NLLB: TEXT through the directory's tokenizer as\n"
    "                     'attn translate --model DIR' reads it (</s> and language tokens\n"
    "                     included, labels from its SentencePiece pieces); --target TEXT is\n"
    "                     the decoder start + the tokenizer's target ids (NLLB: [tgt_lang] ..\n"
    "                     </s>); --target-ids IDS the whole decoder sequence, start included\n"
    "  --beam K           translator without --target: translate with beam size K (default 4;\n"
    "                     1 = greedy; Marian / M2M100 / NLLB: generation_config.json's, as\n"
    "                     'attn translate'), then capture over the tokens the search output\n"
    "  --length-penalty A as 'attn translate' (default 0.6; Hugging Face: the directory's)\n"
    "  --src-lang L       NLLB / M2M100: the source language code (e.g. eng_Latn)\n"
    "  --tgt-lang L       NLLB / M2M100: the target code, forced as the first generated token;\n"
    "                     Marian: its >>L<< token put before the source (multilingual models)\n"
    "  --generate N       decoders: first generate up to N tokens after the input (greedy unless\n"
    "                     --temperature T > 0; --top-k K, --top-p P, --seed S as 'attn\n"
    "                     generate'), then capture over the input and the generated tokens\n"
    "  --from FILE        draw a capture saved with --out instead of running a model\n"
    "\n"
    "output (without any, a summary of where each query attends is printed):\n"
    "  --out FILE.safetensors  one F32 tensor (heads, Tq, Tk) per layer and kind, named e.g.\n"
    "                     encoder.self.3 / decoder.cross.5 / self.0, token strings in the\n"
    "                     metadata; FILE.json beside it lists the same for other programs\n"
    "  --html FILE        one self-contained page: head view, model view, cross-attention\n"
    "  --png FILE         a heatmap (CJK-capable labels; font: $ATTN_FONT or fonts-noto-cjk)\n"
    "\n"
    "drawing (--png, and the printed summary):\n"
    "  --kind KIND        self | encoder | decoder | cross (default: cross for the translator,\n"
    "                     self otherwise)\n"
    "  --layer L          one layer (default: the last; with --head all or --query: every layer)\n"
    "  --head H|mean|all  one head, the mean over heads (default), or a grid of every head\n"
    "  --query I|TOKEN    where one query position (or the first query token with that label)\n"
    "                     attends: a panel per layer (or --layer L), a row per head, a column\n"
    "                     per key\n"
    "  --cell PX          pixels per cell (default: from the size)\n"
    "  --font FILE        TrueType/OpenType font for the labels\n";

typedef attention_opts opts;
typedef attention_family family;

enum { HEAD_MEAN = -1, HEAD_ALL = -2 };

/* ---- small parsers ------------------------------------------------------------------------ */

attn_status attention_parse_ids(const char *what, const char *s, int32_t **ids, int *n) {
    size_t cap = strlen(s) / 2 + 1, k = 0;
    int32_t *a = malloc(cap * sizeof *a);
    if (!a) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX ||
            (*end && *end != ' ' && *end != ',' && *end != '\t' && *end != '\n')) {
            free(a);
            return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                  "%s: '%.20s' is not a token id (non-negative integers separated "
                                  "by commas or spaces)",
                                  what, p);
        }
        if (k == cap) { /* cannot happen: each id takes at least 2 characters but the last */
            free(a);
            return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "%s: too many ids", what);
        }
        a[k++] = (int32_t)v;
        p = end;
    }
    if (k == 0) {
        free(a);
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "%s: no ids given", what);
    }
    *ids = a, *n = (int)k;
    return ATTN_STATUS_OK;
}

attn_status attention_detect_family(const char *dir, attention_family *f) {
    if (attn_gpt_is_gguf_path(dir)) { /* a GGUF file: bert or a decoder */
        char arch[64];
        attn_status s = cli_gguf_arch(dir, arch, sizeof arch);
        if (s) return s;
        *f = strcmp(arch, "bert") ? FAMILY_GPT : FAMILY_BERT;
        return ATTN_STATUS_OK;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root)
        return attn_set_error(ATTN_STATUS_IO, "%s: cannot read the model's configuration (%s)",
                              path, err.text);
    attn_status s = ATTN_STATUS_OK;
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    if (json_object_get(root, "src_vocab") ||
        (mt && (!strcmp(mt, "marian") || !strcmp(mt, "m2m_100"))))
        *f = FAMILY_ENCDEC;
    else if (mt && (!strcmp(mt, "gpt2") || !strcmp(mt, "llama") || !strcmp(mt, "mistral") ||
                    !strcmp(mt, "qwen2") || !strcmp(mt, "qwen3")))
        *f = FAMILY_GPT;
    else if (mt && !strcmp(mt, "bert"))
        *f = FAMILY_BERT;
    else
        s = attn_set_error(ATTN_STATUS_UNSUPPORTED,
                           "%s: not a model attn can capture (expected attn's encoder-decoder "
                           "configuration with \"src_vocab\", or \"model_type\" \"marian\", "
                           "\"m2m_100\", \"gpt2\", \"llama\", \"mistral\", \"qwen2\", "
                           "\"qwen3\" or \"bert\"; got model_type %s)",
                           path, mt ? mt : "(none)");
    json_decref(root);
    return s;
}

static attn_status encode_text(const attn_tok *tok, const char *text, int32_t **ids, size_t *n) {
    return attn_tok_encode_alloc(tok, text, strlen(text), ids, n);
}

/* ---- encoder-decoder ---------------------------------------------------------------------- */

attn_status attention_encdec_input(const attention_opts *o, const attn_encdec_model *m,
                                   const attn_tok *tok, int32_t **src_out, int *Ts_out,
                                   int32_t **tgt_out, int *n_tgt_out) {
    attn_translate_session *ts = NULL;
    int32_t *src = NULL, *tgt = NULL, *enc = NULL, *hyp = NULL;
    int Ts = 0, n_tgt = 0;
    attn_status s = ATTN_STATUS_OK;
    int32_t bos = -1, eos = -1;
    if (!s) {
        bos = attn_tok_special_id(tok, ATTN_TOK_BOS), eos = attn_tok_special_id(tok, ATTN_TOK_EOS);
        if (bos < 0 || eos < 0)
            s = attn_set_error(ATTN_STATUS_FORMAT, "%s/tokenizer.json: no <s> or </s> token",
                               o->dir);
    }
    const int L = m->cfg.max_len;
    /* source */
    if (!s && o->ids) {
        s = attention_parse_ids("--ids", o->ids, &src, &Ts);
    } else if (!s) {
        size_t n = 0;
        s = encode_text(tok, o->text, &enc, &n);
        if (!s && n + 1 > (size_t)L)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "the source has %zu tokens + </s>; the model takes at most %d", n,
                               L);
        if (!s && !(src = malloc((n + 1) * sizeof *src)))
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        if (!s) {
            memcpy(src, enc, n * sizeof *src);
            src[n] = eos, Ts = (int)n + 1;
        }
        attn_free(enc), enc = NULL;
    }
    /* target */
    if (!s && o->target_ids) {
        s = attention_parse_ids("--target-ids", o->target_ids, &tgt, &n_tgt);
    } else if (!s && o->target) {
        size_t n = 0;
        s = encode_text(tok, o->target, &enc, &n);
        if (!s && !(tgt = malloc((n + 2) * sizeof *tgt)))
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        if (!s) {
            tgt[0] = bos;
            memcpy(tgt + 1, enc, n * sizeof *tgt);
            tgt[n + 1] = eos, n_tgt = (int)n + 2;
        }
        attn_free(enc), enc = NULL;
    } else if (!s) {
        /* translate, then capture over the output */
        attn_translate_options to = attn_translate_default_options();
        if (o->beam_set) to.beam_size = o->beam;
        if (o->lp_set) to.length_penalty = o->length_penalty;
        to.bos_id = bos, to.eos_id = eos;
        if (Ts > L)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "the source has %d ids; the model takes at most %d", Ts, L);
        if (!s) s = attn_translate_session_init(m, 1, to.beam_size, Ts, L, &ts);
        if (!s && !(hyp = malloc((size_t)L * sizeof *hyp)))
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        int32_t len = 0, sl = Ts;
        float score = 0;
        if (!s) s = attn_translate(ts, &to, 1, Ts, src, &sl, L, hyp, &len, &score);
        if (!s && !(tgt = malloc(((size_t)len + 2) * sizeof *tgt)))
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        if (!s) {
            tgt[0] = bos;
            memcpy(tgt + 1, hyp, (size_t)len * sizeof *tgt);
            tgt[len + 1] = eos, n_tgt = len + 2;
            char *text = NULL;
            size_t tl;
            if (attn_tok_decode_alloc(tok, hyp, (size_t)len, 0, &text, &tl) == ATTN_STATUS_OK)
                printf("translation (%s %d, score %.4f): %s\n",
                       to.beam_size > 1 ? "beam" : "greedy, beam", to.beam_size, (double)score,
                       text);
            attn_free(text);
        }
    }
    attn_translate_session_free(ts);
    free(hyp);
    if (s) {
        free(src), free(tgt);
        return s;
    }
    *src_out = src, *Ts_out = Ts, *tgt_out = tgt, *n_tgt_out = n_tgt;
    return ATTN_STATUS_OK;
}

attn_status attention_check_langs(const attention_opts *o, const attn_encdec_model *m) {
    if ((o->src_lang || o->tgt_lang) && (!m || m->cfg.arch == ATTN_ENCDEC_ARCH_ATTN))
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: --src-lang and --tgt-lang are for Hugging Face translation "
                              "directories (Marian, M2M100 / NLLB)",
                              o->dir);
    return ATTN_STATUS_OK;
}

/* A copy of n attn_alloc'd ids in malloc'd memory (the callers free with free()); a frees. */
static attn_status ids_to_malloc(int32_t *a, size_t n, int32_t **out) {
    *out = malloc((n ? n : 1) * sizeof **out);
    if (*out) memcpy(*out, a, n * sizeof **out);
    attn_free(a);
    return *out ? ATTN_STATUS_OK : attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
}

attn_status attention_hf_input(const attention_opts *o, const attn_encdec_model *m,
                               attn_hf_translator **t, int32_t **src_out, int *Ts_out,
                               int32_t **tgt_out, int *n_tgt_out) {
    attn_hf_translator_params p = attn_hf_translator_default_params();
    p.src_lang = o->src_lang, p.tgt_lang = o->tgt_lang;
    p.num_beams = o->beam_set ? o->beam : 0;
    if (o->lp_set) p.length_penalty = o->length_penalty;
    p.max_sentences = 1;
    p.need_tokenizer = !o->ids || (o->target && !o->target_ids);
    int32_t *ids = NULL, *tids = NULL, *src = NULL, *tgt = NULL;
    int n_ids = 0, n_tids = 0;
    size_t Ts = 0, n_tgt = 0;
    float score = 0;
    attn_status s = attn_hf_translator_init(m, o->dir, &p, t);
    if (!s && o->ids) s = attention_parse_ids("--ids", o->ids, &ids, &n_ids);
    if (!s && o->target_ids) s = attention_parse_ids("--target-ids", o->target_ids, &tids, &n_tids);
    if (!s)
        s = attn_hf_translator_capture_input(*t, o->text, ids, (size_t)n_ids, o->target, tids,
                                             (size_t)n_tids, &src, &Ts, &tgt, &n_tgt, &score);
    free(ids), free(tids);
    if (!s && !o->target && !o->target_ids) { /* translated: say what */
        const int K = attn_hf_translator_options(*t)->num_beams;
        char *text = NULL;
        size_t tl;
        if (attn_hf_translator_decode(*t, tgt + 1, n_tgt - 1, &text, &tl) == ATTN_STATUS_OK)
            printf("translation (%s %d, score %.4f): %s\n", K > 1 ? "beam" : "greedy, beam", K,
                   (double)score, text);
        else
            attn_clear_error();
        attn_free(text);
    }
    *src_out = *tgt_out = NULL;
    if (!s) s = ids_to_malloc(src, Ts, src_out), src = NULL;
    if (!s) s = ids_to_malloc(tgt, n_tgt, tgt_out), tgt = NULL;
    attn_free(src), attn_free(tgt);
    if (s) {
        free(*src_out), free(*tgt_out);
        *src_out = *tgt_out = NULL;
        attn_hf_translator_free(*t), *t = NULL;
        return s;
    }
    *Ts_out = (int)Ts, *n_tgt_out = (int)n_tgt;
    return ATTN_STATUS_OK;
}

static attn_status run_encdec(const opts *o, attn_viz **out) {
    attn_encdec_model *m = NULL;
    attn_tok *tok = NULL;
    attn_hf_translator *t = NULL;
    int32_t *src = NULL, *tgt = NULL;
    int Ts = 0, n_tgt = 0;
    attn_status s = attn_encdec_load_dir(o->dir, &m);
    if (!s) s = attention_check_langs(o, m);
    if (!s && m->cfg.arch != ATTN_ENCDEC_ARCH_ATTN) { /* Marian, M2M100 / NLLB */
        s = attention_hf_input(o, m, &t, &src, &Ts, &tgt, &n_tgt);
        if (!s && attn_hf_translator_mt_tok(t))
            s = attn_viz_capture_encdec_mt(m, attn_hf_translator_mt_tok(t), src, Ts, tgt, n_tgt,
                                           out);
        else if (!s)
            s = attn_viz_capture_encdec(m, attn_hf_translator_tok(t), src, Ts, tgt, n_tgt, out);
        attn_hf_translator_free(t);
        free(src), free(tgt);
        attn_encdec_model_free(m);
        return s;
    }
    if (!s) s = attn_tok_load(o->dir, &tok);
    if (!s) s = attention_encdec_input(o, m, tok, &src, &Ts, &tgt, &n_tgt);
    if (!s) s = attn_viz_capture_encdec(m, tok, src, Ts, tgt, n_tgt, out);
    free(src), free(tgt);
    attn_tok_free(tok);
    attn_encdec_model_free(m);
    return s;
}

/* ---- GPT-2 and BERT ------------------------------------------------------------------------ */

/* The input ids: --ids as given, or TEXT through the directory's tokenizer (with its
 * post-processor: BERT's [CLS] ... [SEP]). The tokenizer (NULL when --ids and none loads) labels
 * the tokens. */
attn_status attention_single_input(const attention_opts *o, attn_tok **tok, int32_t **ids, int *n) {
    attn_status s = attn_tok_load(o->dir, tok);
    if (s && o->ids) { /* labels "#id" */
        *tok = NULL;
        s = ATTN_STATUS_OK;
    }
    if (s) return s;
    if (o->ids) return attention_parse_ids("--ids", o->ids, ids, n);
    int32_t *enc;
    size_t len;
    if ((s = encode_text(*tok, o->text, &enc, &len))) return s;
    if (len == 0) {
        attn_free(enc);
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "the text has no tokens");
    }
    if (len > ATTN_VIZ_MAX_TOKENS || !(*ids = malloc(len * sizeof **ids))) {
        attn_free(enc);
        return attn_set_error(ATTN_STATUS_TOO_LARGE, "the text has %zu tokens", len);
    }
    memcpy(*ids, enc, len * sizeof **ids);
    *n = (int)len;
    attn_free(enc);
    return ATTN_STATUS_OK;
}

static attn_status run_gpt(const opts *o, attn_viz **out) {
    attn_gpt_model *m = NULL;
    attn_tok *tok = NULL;
    int32_t *ids = NULL;
    int n = 0;
    attn_status s = attn_gpt_load(o->dir, &m); /* a directory or a GGUF file */
    if (!s) s = attention_single_input(o, &tok, &ids, &n);
    if (!s && o->generate > 0) {
        /* generate, then capture over the prompt and exactly the tokens generated */
        int32_t *all = realloc(ids, ((size_t)n + (size_t)o->generate) * sizeof *all);
        if (!all) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        attn_gen_stats st;
        if (!s) {
            ids = all;
            s = attn_gen_gpt(m, &o->gen, ids, n, o->generate, m->cfg.eos_token_id, ids + n, NULL,
                             NULL, &st);
        }
        if (!s) {
            char *text = NULL;
            size_t tl;
            if (tok && attn_tok_decode_alloc(tok, ids + n, (size_t)st.n_generated, 0, &text, &tl) ==
                           ATTN_STATUS_OK)
                printf("generated %d token%s (%s, %s): %s\n", st.n_generated,
                       st.n_generated == 1 ? "" : "s", o->gen.greedy ? "greedy" : "sampled",
                       attn_gen_stop_name(st.stop), text);
            else
                printf("generated %d token%s (%s)\n", st.n_generated,
                       st.n_generated == 1 ? "" : "s", attn_gen_stop_name(st.stop));
            attn_free(text);
            n += st.n_generated;
            /* a full context generates one token more than it can read back */
            if (n > m->cfg.n_positions) n = m->cfg.n_positions;
        }
    }
    if (!s) s = attn_viz_capture_gpt(m, tok, ids, n, out);
    free(ids);
    attn_tok_free(tok);
    attn_gpt_model_free(m);
    return s;
}

static attn_status run_bert(const opts *o, attn_viz **out) {
    attn_bert_model *m = NULL;
    attn_tok *tok = NULL;
    int32_t *ids = NULL;
    int n = 0;
    attn_status s = attn_bert_load(o->dir, &m); /* a directory or a GGUF file */
    if (!s) s = attention_single_input(o, &tok, &ids, &n);
    if (!s) s = attn_viz_capture_bert(m, tok, ids, NULL, n, out);
    free(ids);
    attn_tok_free(tok);
    attn_bert_model_free(m);
    return s;
}

/* ---- summary ------------------------------------------------------------------------------ */

static void print_tokens(const char *name, char **t, int n) {
    printf("%s (%d):", name, n);
    for (int i = 0; i < n; i++) printf(" %s", t[i]);
    putchar('\n');
}

/* For each query of a kind's layer, the key with the largest mean attention over heads. */
static void print_alignment(const attn_viz *v, attn_viz_kind kind, int layer) {
    const attn_viz_map *m = attn_viz_find(v, kind, layer);
    if (!m) return;
    char **ql = kind == ATTN_VIZ_CROSS && v->target_out             ? v->target_out
                : attn_viz_query_side(kind) == ATTN_VIZ_SIDE_TOKENS ? v->tokens
                                                                    : v->target;
    char **kl = attn_viz_key_side(kind) == ATTN_VIZ_SIDE_TOKENS ? v->tokens : v->target;
    printf("strongest key per query (%s, layer %d, mean of %d heads):\n", attn_viz_kind_name(kind),
           layer, m->H);
    for (int i = 0; i < m->Tq; i++) {
        int best = 0;
        double bv = -1;
        for (int j = 0; j < m->Tk; j++) {
            double a = 0;
            for (int h = 0; h < m->H; h++) a += m->p[((size_t)h * m->Tq + i) * m->Tk + j];
            if (a > bv) bv = a, best = j;
        }
        printf("  %3d %-16s -> %-16s %.3f\n", i, ql[i], kl[best], bv / m->H);
    }
}

static void print_summary(const attn_viz *v) {
    if (v->title) printf("%s\n", v->title);
    print_tokens(v->n_target ? "source" : "tokens", v->tokens, v->n_tokens);
    if (v->n_target) print_tokens("target", v->target, v->n_target);
    printf("maps:");
    for (int k = 0; k < ATTN_VIZ_NUM_KINDS; k++) {
        int L = attn_viz_num_layers(v, (attn_viz_kind)k);
        if (L)
            printf(" %s x %d layer%s", attn_viz_kind_name((attn_viz_kind)k), L, L > 1 ? "s" : "");
    }
    printf(" (%d heads)\n", v->n_maps ? v->maps[0].H : 0);
}

/* ---- main --------------------------------------------------------------------------------- */

static bool parse_float(const char *s, float lo, float hi, float *out) {
    if (!s || !*s) return false;
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v >= lo && v <= hi)) return false;
    *out = (float)v;
    return true;
}

static attn_status draw(const attn_viz *v, const opts *o, attn_viz_kind kind) {
    attn_status s = ATTN_STATUS_OK;
    if (o->out) {
        s = attn_viz_save(v, o->out);
        if (!s) {
            char j[4096];
            attn_viz_json_path(o->out, j, sizeof j);
            printf("wrote %s and %s\n", o->out, j);
        }
    }
    if (!s && o->html) {
        s = attn_viz_write_html(v, o->html);
        if (!s) printf("wrote %s\n", o->html);
    }
    if (!s && o->png) {
        attn_viz_png_options po = attn_viz_png_default_options();
        po.kind = kind;
        po.layer = o->layer;
        po.style.cell = o->cell;
        po.style.font = o->font;
        if (o->query) {
            po.mode = ATTN_VIZ_PNG_QUERY;
            int q;
            attn_viz_side qs = attn_viz_query_side(kind);
            int Tq = qs == ATTN_VIZ_SIDE_TOKENS ? v->n_tokens : v->n_target;
            char **ql = kind == ATTN_VIZ_CROSS && v->target_out ? v->target_out
                        : qs == ATTN_VIZ_SIDE_TOKENS            ? v->tokens
                                                                : v->target;
            if (!cli_parse_int(o->query, 0, Tq - 1, &q)) {
                q = -1;
                for (int i = 0; i < Tq && q < 0; i++)
                    if (!strcmp(ql[i], o->query)) q = i;
                if (q < 0)
                    return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                          "--query %s: not a position in [0, %d) nor a query "
                                          "token of %s",
                                          o->query, Tq, attn_viz_kind_name(kind));
            }
            po.query = q;
        } else if (o->head == HEAD_ALL) {
            po.mode = ATTN_VIZ_PNG_GRID;
        } else if (o->head == HEAD_MEAN) {
            po.mode = ATTN_VIZ_PNG_MEAN;
        } else {
            po.mode = ATTN_VIZ_PNG_HEAD;
            po.head = o->head;
        }
        attn_viz_png_layout lay;
        s = attn_viz_write_png(v, o->png, &po, &lay);
        if (!s) printf("wrote %s (%d x %d pixels)\n", o->png, lay.width, lay.height);
    }
    return s;
}

int cmd_attention(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    o.layer = -1, o.head = HEAD_MEAN, o.beam = 4;
    o.gen = attn_gen_default_params();
    o.gen.greedy = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        const char **str = !strcmp(a, "--model")        ? &o.dir
                           : !strcmp(a, "--from")       ? &o.from
                           : !strcmp(a, "--ids")        ? &o.ids
                           : !strcmp(a, "--target")     ? &o.target
                           : !strcmp(a, "--target-ids") ? &o.target_ids
                           : !strcmp(a, "--src-lang")   ? &o.src_lang
                           : !strcmp(a, "--tgt-lang")   ? &o.tgt_lang
                           : !strcmp(a, "--out")        ? &o.out
                           : !strcmp(a, "--html")       ? &o.html
                           : !strcmp(a, "--png")        ? &o.png
                           : !strcmp(a, "--font")       ? &o.font
                           : !strcmp(a, "--query")      ? &o.query
                           : !strcmp(a, "--kind")       ? &o.kind_s
                                                        : NULL;
        if (str) {
            if (!val) return cli_usage_error("attention: %s needs a value", a);
            *str = val, i++;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(attention_usage, stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--beam")) {
            if (!cli_parse_int(val, 1, 256, &o.beam))
                return cli_usage_error("attention: --beam needs a number from 1 to 256");
            o.beam_set = true, i++;
        } else if (!strcmp(a, "--length-penalty")) {
            if (!parse_float(val, -10.0f, 10.0f, &o.length_penalty))
                return cli_usage_error("attention: --length-penalty needs a number from -10 to 10");
            o.lp_set = true, i++;
        } else if (!strcmp(a, "--generate")) {
            if (!cli_parse_int(val, 1, 1 << 20, &o.generate))
                return cli_usage_error("attention: --generate needs a number of tokens >= 1");
            i++;
        } else if (!strcmp(a, "--temperature")) {
            if (!parse_float(val, 0.0f, 100.0f, &o.gen.temperature))
                return cli_usage_error("attention: --temperature needs a number from 0 to 100");
            o.gen.greedy = !(o.gen.temperature > 0);
            i++;
        } else if (!strcmp(a, "--top-k")) {
            if (!cli_parse_int(val, 0, 1 << 30, &o.gen.top_k))
                return cli_usage_error("attention: --top-k needs a number >= 0");
            i++;
        } else if (!strcmp(a, "--top-p")) {
            if (!parse_float(val, 0.0f, 1.0f, &o.gen.top_p))
                return cli_usage_error("attention: --top-p needs a number from 0 to 1");
            i++;
        } else if (!strcmp(a, "--seed")) {
            int seed;
            if (!cli_parse_int(val, 0, INT32_MAX, &seed))
                return cli_usage_error("attention: --seed needs a number >= 0");
            o.gen.seed = (uint64_t)seed;
            i++;
        } else if (!strcmp(a, "--layer")) {
            if (!cli_parse_int(val, 0, ATTN_VIZ_MAX_LAYERS - 1, &o.layer))
                return cli_usage_error("attention: --layer needs a layer number >= 0");
            i++;
        } else if (!strcmp(a, "--head")) {
            if (val && !strcmp(val, "mean"))
                o.head = HEAD_MEAN;
            else if (val && !strcmp(val, "all"))
                o.head = HEAD_ALL;
            else if (!cli_parse_int(val, 0, ATTN_VIZ_MAX_HEADS - 1, &o.head))
                return cli_usage_error("attention: --head needs a head number, 'mean' or 'all'");
            i++;
        } else if (!strcmp(a, "--cell")) {
            if (!cli_parse_int(val, 1, 256, &o.cell))
                return cli_usage_error("attention: --cell needs a number of pixels from 1 to 256");
            i++;
        } else if (!strcmp(a, "--")) {
            if (i + 1 < argc && !o.text) o.text = argv[++i];
            if (i + 1 < argc) return cli_usage_error("attention: more than one TEXT");
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("attention: unknown option '%s'", a);
        } else if (o.text) {
            return cli_usage_error("attention: more than one TEXT ('%s' and '%s'): quote the text",
                                   o.text, a);
        } else {
            o.text = a;
        }
    }
    if (!o.dir == !o.from)
        return cli_usage_error("attention needs --model DIR or --from FILE.safetensors (one)");
    if (o.dir && !o.text == !o.ids)
        return cli_usage_error("attention needs the input: TEXT or --ids (one of them)");
    if (o.from && (o.text || o.ids || o.target || o.target_ids || o.beam_set || o.generate ||
                   o.src_lang || o.tgt_lang))
        return cli_usage_error("attention: --from draws a saved capture and takes no input");
    if (o.target && o.target_ids)
        return cli_usage_error("attention: --target and --target-ids exclude each other");
    attn_viz_kind kind = ATTN_VIZ_SELF;
    if (o.kind_s && attn_viz_kind_parse(o.kind_s, &kind))
        return cli_usage_error("%s", attn_last_error());

    attn_viz *v = NULL;
    attn_status s = ATTN_STATUS_OK;
    if (o.from) {
        s = attn_viz_load(o.from, &v);
        if (!s && !o.kind_s)
            kind = attn_viz_num_layers(v, ATTN_VIZ_CROSS) ? ATTN_VIZ_CROSS : v->maps[0].kind;
    } else {
        family f;
        s = attention_detect_family(o.dir, &f);
        if (!s && f != FAMILY_ENCDEC && (o.src_lang || o.tgt_lang))
            s = attention_check_langs(&o, NULL);
        if (!s && f != FAMILY_ENCDEC && (o.target || o.target_ids))
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "%s: --target is for encoder-decoder models", o.dir);
        if (!s && f != FAMILY_GPT && o.generate)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "%s: --generate is for decoder models (the translator translates "
                               "when --target is absent)",
                               o.dir);
        if (!s) {
            switch (f) {
            case FAMILY_ENCDEC:
                if (!o.kind_s) kind = ATTN_VIZ_CROSS;
                s = run_encdec(&o, &v);
                break;
            case FAMILY_GPT:
                s = run_gpt(&o, &v);
                break;
            case FAMILY_BERT:
                s = run_bert(&o, &v);
                break;
            }
        }
    }
    if (!s && !attn_viz_num_layers(v, kind))
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "this capture has no %s attention",
                           attn_viz_kind_name(kind));
    if (!s) {
        print_summary(v);
        if (!o.out && !o.html && !o.png) {
            int L = attn_viz_num_layers(v, kind);
            print_alignment(v, kind, o.layer >= 0 && o.layer < L ? o.layer : L - 1);
        }
        s = draw(v, &o, kind);
    }
    attn_viz_free(v);
    return s ? cli_fail(s) : CLI_EXIT_OK;
}

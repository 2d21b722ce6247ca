/* cmd_explain_model.c — `attn explain --model`: the article's self-attention steps for one head of
 * a real model on the user's text (attn_explain.h), and --find: which heads link a token to
 * another. The input is read as `attn attention` reads it (cmd_attention.h). */
#include "cmd_explain_model.h"

#include "cli.h"
#include "cmd_attention.h"

#include "attn_bert.h"
#include "attn_explain.h"
#include "attn_gpt.h"
#include "attn_models.h"
#include "attn_tok.h"
#include "attn_viz.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char explain_model_usage[] =
    "usage: attn explain --model DIR|FILE.gguf (TEXT | --ids IDS) [--layer L] [--head H]\n"
    "                    [--query TOKEN|I] [--kind self|encoder|decoder|cross]\n"
    "                    [--target TEXT | --target-ids IDS] [--beam K] [--compare-masks]\n"
    "                    [--src-lang L] [--tgt-lang L]\n"
    "                    [--find TOKEN [--top N]] [--json] [--png OUT.png] [--html OUT.html]\n"
    "                    [--font FILE]\n"
    "       attn explain [FILE.safetensors] [--json] [--png OUT.png]   (the toy: see below)\n"
    "\n"
    "Self-attention step by step for one layer and head of a real model on your text, with the\n"
    "numbers the model computed: the layer's input rows x_i (after its norm), the head's slices of\n"
    "W_Q, W_K, W_V, q, k, v (before and after rotary embeddings where the model has them), the\n"
    "scores q_i.k_j, the scaled scores, the mask (causal for decoders, none for encoders and\n"
    "cross-attention), the softmax, the weighted sum of the values and the head's share of the\n"
    "output projection. DIR as for 'attn attention': a BERT, a decoder (GPT-2, Llama, Mistral,\n"
    "Qwen2/3; or its GGUF file), attn's encoder-decoder translator or a Hugging Face Marian /\n"
    "M2M100 / NLLB translation directory (input as 'attn attention' reads it: --src-lang,\n"
    "--tgt-lang; without --target the source is translated with generation_config.json's\n"
    "settings first).\n"
    "\n"
    "  TEXT / --ids IDS   the input, as 'attn attention' reads it (BERT: [CLS] ... [SEP] added)\n"
    "  --layer L          the layer (default 0; with --find: the best head's)\n"
    "  --head H           the head (default 0; with --find: the best head's)\n"
    "  --query TOKEN|I    the query token whose row is shown step by step: a position, or the\n"
    "                     first token with that label (default: the --find token, else the\n"
    "                     last token)\n"
    "  --kind KIND        translator: encoder, decoder or cross (default cross: target queries,\n"
    "                     source keys); --target TEXT / --target-ids IDS teacher-force a target,\n"
    "                     else the source is translated first (--beam K, default 4)\n"
    "  --compare-masks    also run the head with the other mask (an encoder's head made causal,\n"
    "                     a decoder's unmasked): the article's encoder/decoder difference\n"
    "  --find TOKEN       rank every (layer, head) by the largest weight the query TOKEN gives\n"
    "                     one other token (special tokens such as [CLS], [SEP] aside) and print\n"
    "                     the --top N (default 5) with their strongest keys; the walk-through\n"
    "                     then shows the best head. Then, for each other token, the two heads\n"
    "                     that attend most from TOKEN to it\n"
    "  --key TOKEN|J      with --find: rank the heads by the weight on that key only (which\n"
    "                     heads link TOKEN to it); the walk-through shows the best\n"
    "  --json             everything as JSON (complete vectors, the weights and x rows too)\n"
    "  --png OUT.png      the scores, scaled scores and softmax weights as heatmaps\n"
    "  --html OUT.html    a self-contained page of the walk-through: click a token to make it\n"
    "                     the query (q, k, v matrices, score table, softmax bars, weighted sum)\n"
    "  --font FILE        font for the PNG (default $ATTN_FONT or fonts-noto-cjk)\n";

typedef struct {
    attention_opts in; /* dir, text, ids, target, target_ids, beam */
    const char *query, *find, *key, *png, *html, *font, *kind_s;
    int layer, head, top;
    bool layer_set, head_set, json, compare;
} ex_opts;

/* A model of one of the three families and its input. */
typedef struct {
    attention_family fam;
    attn_bert_model *bert;
    attn_gpt_model *gpt;
    attn_encdec_model *ed;
    attn_tok *tok;
    attn_hf_translator *hf; /* Hugging Face translators (Marian, M2M100 / NLLB) */
    const attn_mt_tok *mt;  /* hf's SentencePiece tokenizer, or NULL */
    int32_t *ids, *tgt; /* tokens (n) / source; translator target (n_tgt) */
    int n, n_tgt;
    char **src_lab, **tgt_lab; /* labels of the token side (n) and the decoder inputs (n_tgt − 1) */
    char title[256];
} ex_model;

static void model_free(ex_model *m) {
    attn_bert_model_free(m->bert);
    attn_gpt_model_free(m->gpt);
    attn_encdec_model_free(m->ed);
    attn_tok_free(m->tok);
    attn_hf_translator_free(m->hf);
    free(m->ids), free(m->tgt);
    for (int i = 0; m->src_lab && i < m->n; i++) free(m->src_lab[i]);
    for (int i = 0; m->tgt_lab && i < m->n_tgt - 1; i++) free(m->tgt_lab[i]);
    free(m->src_lab), free(m->tgt_lab);
    memset(m, 0, sizeof *m);
}

/* Labels of ids: mt's pieces (its target side when target) when mt, else tok's. */
static attn_status make_labels(const attn_tok *tok, const attn_mt_tok *mt, bool target,
                               const int32_t *ids, int n, char ***out) {
    char **l = calloc((size_t)(n > 0 ? n : 1), sizeof *l);
    if (!l) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < n; i++) {
        char b[ATTN_VIZ_MAX_TOKEN_BYTES / 4];
        if (mt) attn_viz_mt_token_label(mt, ids[i], target, b, sizeof b);
        else attn_viz_token_label(tok, ids[i], b, sizeof b);
        if (!(l[i] = strdup(b))) {
            for (int k = 0; k < i; k++) free(l[k]);
            free(l);
            return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        }
    }
    *out = l;
    return ATTN_STATUS_OK;
}

static attn_status load_model(const ex_opts *o, ex_model *m) {
    attn_status s = attention_detect_family(o->in.dir, &m->fam);
    if (s) return s;
    if (m->fam != FAMILY_ENCDEC && (o->in.src_lang || o->in.tgt_lang))
        return attention_check_langs(&o->in, NULL);
    if (m->fam != FAMILY_ENCDEC && (o->in.target || o->in.target_ids))
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: --target is for encoder-decoder models", o->in.dir);
    switch (m->fam) {
    case FAMILY_BERT: {
        s = attn_bert_load(o->in.dir, &m->bert);
        if (!s) s = attention_single_input(&o->in, &m->tok, &m->ids, &m->n);
        if (!s) {
            const attn_bert_config *c = &m->bert->cfg;
            snprintf(m->title, sizeof m->title, "BERT, %d layers, %d heads, d_model %d",
                     c->num_hidden_layers, c->num_attention_heads, c->hidden_size);
        }
        break;
    }
    case FAMILY_GPT: {
        s = attn_gpt_load(o->in.dir, &m->gpt);
        if (!s) s = attention_single_input(&o->in, &m->tok, &m->ids, &m->n);
        if (!s) {
            const attn_gpt_config *c = &m->gpt->cfg;
            snprintf(m->title, sizeof m->title, "%s, %d layers, %d heads (%d key/value), d_model %d",
                     attn_gpt_is_llama(c) ? attn_gpt_arch_name(c->arch) : "GPT-2", c->n_layer,
                     c->n_head, attn_gpt_kv_heads(c), c->n_embd);
        }
        break;
    }
    case FAMILY_ENCDEC: {
        s = attn_encdec_load_dir(o->in.dir, &m->ed);
        if (!s) s = attention_check_langs(&o->in, m->ed);
        const bool hf = !s && m->ed->cfg.arch != ATTN_ENCDEC_ARCH_ATTN; /* Marian, M2M100 */
        if (hf) {
            s = attention_hf_input(&o->in, m->ed, &m->hf, &m->ids, &m->n, &m->tgt, &m->n_tgt);
            if (!s) m->mt = attn_hf_translator_mt_tok(m->hf);
        } else if (!s) {
            s = attn_tok_load(o->in.dir, &m->tok);
            if (!s)
                s = attention_encdec_input(&o->in, m->ed, m->tok, &m->ids, &m->n, &m->tgt,
                                           &m->n_tgt);
        }
        if (!s) {
            const attn_encdec_config *c = &m->ed->cfg;
            snprintf(m->title, sizeof m->title, "%s, %d+%d layers, %d heads, d_model %d",
                     c->arch == ATTN_ENCDEC_ARCH_MARIAN   ? "Marian encoder-decoder"
                     : c->arch == ATTN_ENCDEC_ARCH_M2M100 ? "M2M100 encoder-decoder"
                                                          : "encoder-decoder",
                     c->n_enc_layers, c->n_dec_layers, c->n_head, c->d_model);
        }
        if (!s)
            s = make_labels(hf ? attn_hf_translator_tok(m->hf) : m->tok, m->mt, true, m->tgt,
                            m->n_tgt - 1, &m->tgt_lab);
        break;
    }
    }
    if (!s)
        s = make_labels(m->hf ? attn_hf_translator_tok(m->hf) : m->tok, m->mt, false, m->ids, m->n,
                        &m->src_lab);
    return s;
}

/* Labels and lengths of a kind's query and key sides. */
static char **side_labels(const ex_model *m, attn_viz_side side, int *n) {
    if (side == ATTN_VIZ_SIDE_TARGET) {
        *n = m->n_tgt - 1;
        return m->tgt_lab;
    }
    *n = m->n;
    return m->src_lab;
}

/* A position in [0, n) or the first label equal to s (then ignoring case). */
static int find_token(const char *s, char **lab, int n) {
    int q;
    if (cli_parse_int(s, 0, n - 1, &q)) return q;
    for (int i = 0; i < n; i++)
        if (!strcmp(lab[i], s)) return i;
    for (int i = 0; i < n; i++)
        if (!strcasecmp(lab[i], s)) return i;
    return -1;
}

/* Whether id is a special token of the model's tokenizer, language codes included (--find leaves
 * them aside). */
static bool is_special(const ex_model *m, int32_t id) {
    if (m->mt) {
        const attn_tok_special sp[] = {ATTN_TOK_PAD, ATTN_TOK_UNK, ATTN_TOK_EOS, ATTN_TOK_BOS};
        for (size_t i = 0; i < sizeof sp / sizeof *sp; i++)
            if (attn_mt_tok_special_id(m->mt, sp[i]) == id) return true;
        for (int side = 0; side < 2; side++) { /* language codes (NLLB's, Marian's >>xx<<) */
            const char *t = attn_mt_tok_id_to_token(m->mt, id, side);
            int32_t lid = -1;
            if (t && attn_mt_tok_lang_id(m->mt, t, &lid) == ATTN_STATUS_OK && lid == id) return true;
            attn_clear_error();
        }
        return false;
    }
    const attn_tok *tok = m->hf ? attn_hf_translator_tok(m->hf) : m->tok;
    return tok && attn_tok_is_special(tok, id);
}

static attn_status capture_all(const ex_model *m, attn_viz **v) {
    switch (m->fam) {
    case FAMILY_BERT: return attn_viz_capture_bert(m->bert, m->tok, m->ids, NULL, m->n, v);
    case FAMILY_GPT: return attn_viz_capture_gpt(m->gpt, m->tok, m->ids, m->n, v);
    case FAMILY_ENCDEC:
        if (m->mt) return attn_viz_capture_encdec_mt(m->ed, m->mt, m->ids, m->n, m->tgt, m->n_tgt, v);
        return attn_viz_capture_encdec(m->ed, m->hf ? attn_hf_translator_tok(m->hf) : m->tok,
                                       m->ids, m->n, m->tgt, m->n_tgt, v);
    }
    return ATTN_STATUS_INVALID_ARGUMENT;
}

static attn_status capture_layer(const ex_model *m, attn_viz_kind kind, int layer,
                                 attn_explain_layer *l) {
    switch (m->fam) {
    case FAMILY_BERT: return attn_explain_layer_bert(m->bert, m->ids, m->n, layer, l);
    case FAMILY_GPT: return attn_explain_layer_gpt(m->gpt, m->ids, m->n, layer, l);
    case FAMILY_ENCDEC:
        return attn_explain_layer_encdec(m->ed, m->ids, m->n, m->tgt, m->n_tgt, kind, layer, l);
    }
    return ATTN_STATUS_INVALID_ARGUMENT;
}

/* ---- text --------------------------------------------------------------------------------- */

static double vnorm(const float *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

/* "[a, b, c, d, …]" of the first k of n values, then the norm. */
static void print_vec(const float *v, int n, int k) {
    putchar('[');
    for (int i = 0; i < n && i < k; i++) printf("%s%7.3f", i ? " " : "", v[i]);
    printf("%s] |%.3f|", n > k ? " …" : "", vnorm(v, n));
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > e || d != d) e = d;
    }
    return e;
}

static const char *mask_text(bool causal, int window) {
    return !causal ? "none (every query sees every key)"
           : window > 0 ? "sliding window (query i sees keys i-window+1 .. i)"
                        : "causal (query i sees keys j <= i)";
}

static void print_walk(const ex_model *m, const attn_explain_head *h, char **ql, char **kl, int q) {
    const int Tq = h->Tq, Tk = h->Tk, D = h->d_head;
    printf("%s: layer %d, head %d of %d", m->title, h->layer, h->head, h->H);
    if (h->H_kv != h->H) printf(" (reads key/value head %d of %d)", h->kv_head, h->H_kv);
    printf(", %s attention\n", attn_viz_kind_name(h->kind));
    printf("mask: %s; d_head %d; scale %.6g%s\n", mask_text(h->causal, h->window), D,
           (double)h->scale, fabs(h->scale * sqrt((double)D) - 1) < 1e-6 ? " = 1/sqrt(d_head)" : "");
    printf("query %d '%s'\n\n", q, ql[q]);

    printf("Step 0. The layer's input rows x_i (d_model %d): %s\n", h->d_model,
           h->pre_norm ? (h->norm_kind == ATTN_NORM_RMS ? "after its RMSNorm" : "after its LayerNorm")
                       : "the previous layer's output (post-norm: already normalized)");
    for (int i = 0; i < Tq; i++) {
        printf("  %3d %-14.14s x=", i, ql[i]);
        print_vec(h->x_q + (size_t)i * h->d_model, h->d_model, 5);
        putchar('\n');
    }
    if (h->kind == ATTN_VIZ_CROSS)
        printf("  (keys and values come from the encoder output, %d rows of %d)\n", Tk, h->d_kv);

    printf("\nStep 1. This head's slices of the projections, (%d x %d) each: |W_Q| %.3f, |W_K| %.3f, "
           "|W_V| %.3f%s\n",
           h->d_model, D, vnorm(h->w_q, h->d_model * D), vnorm(h->w_k, h->d_kv * D),
           vnorm(h->w_v, h->d_kv * D), h->b_q ? ", with biases b_Q, b_K, b_V" : ", no biases");
    printf("        q_i = x_i·W_Q%s   k_j = x_j·W_K%s   v_j = x_j·W_V%s\n", h->b_q ? " + b_Q" : "",
           h->b_k ? " + b_K" : "", h->b_v ? " + b_V" : "");
    if (h->qk_norm) printf("        then an RMSNorm over each head's q and k (the model's q/k norms)\n");
    if (h->rope_dim)
        printf("        then rotary embeddings turn q and k (%d of %d dims, %s pairs) by angles\n"
               "        that grow with the position: before -> after\n",
               h->rope_dim, D, attn_rope_mode_name(h->rope_mode));
    printf("  query %3d %-12.12s q=", q, ql[q]);
    print_vec(h->pass.q + (size_t)q * D, D, 6);
    if (h->rope_dim || h->qk_norm) {
        printf("\n  %30s before: ", "");
        print_vec(h->q_pre + (size_t)q * D, D, 6);
    }
    putchar('\n');
    for (int j = 0; j < Tk; j++) {
        printf("  key   %3d %-12.12s k=", j, kl[j]);
        print_vec(h->pass.k + (size_t)j * D, D, 4);
        printf("  v=");
        print_vec(h->pass.v + (size_t)j * D, D, 4);
        putchar('\n');
    }

    const float *sc = h->pass.scores + (size_t)q * Tk, *ss = h->pass.scaled + (size_t)q * Tk;
    const float *w = h->pass.weights + (size_t)q * Tk;
    printf("\nSteps 2-4. Scores q·k_j, scaled by %.4g, masked, softmax (query %d '%s'):\n",
           (double)h->scale, q, ql[q]);
    printf("  %3s %-14s %10s %10s %6s %8s%s\n", "j", "key", "q·k", "scaled", "mask", "softmax",
           h->compared ? (h->causal ? "  no mask" : "   causal") : "");
    int top = 0;
    for (int j = 0; j < Tk; j++)
        if (w[j] > w[top]) top = j;
    for (int j = 0; j < Tk; j++) {
        const bool hid = isinf(ss[j]);
        printf("  %3d %-14.14s %10.4f ", j, kl[j], (double)sc[j]);
        if (hid)
            printf("%10s %6s", "-inf", "hidden");
        else
            printf("%10.4f %6s", (double)ss[j], "");
        printf(" %8.4f", (double)w[j]);
        if (h->compared) printf(" %8.4f", (double)h->other.weights[(size_t)q * Tk + j]);
        printf("  ");
        for (int b = 0; b < (int)lrintf(w[j] * 40); b++) fputs("█", stdout);
        printf("%s\n", j == top ? "  <- strongest" : "");
    }
    printf("  the model's own probabilities (fused kernel) differ by at most %.2e\n",
           max_abs_diff(h->pass.weights, h->probs_model, (size_t)Tq * Tk));

    printf("\nStep 5. z_i = sum_j softmax(i, j)·v_j for query %d '%s':\n  z = ", q, ql[q]);
    const float *z = h->pass.output + (size_t)q * D;
    print_vec(z, D, 6);
    printf("\n  =");
    int shown = 0;
    /* contributions in decreasing weight, those of at least 1% */
    float last = INFINITY;
    int lastj = -1;
    for (int r = 0; r < Tk && shown < 6; r++) {
        int b = -1;
        for (int j = 0; j < Tk; j++) {
            const bool after = w[j] < last || (w[j] == last && j > lastj);
            if (after && (b < 0 || w[j] > w[b])) b = j;
        }
        if (b < 0 || w[b] < 0.01f) break;
        printf("%s %.3f·v(%s)", shown ? " +" : "", (double)w[b], kl[b]);
        last = w[b], lastj = b, shown++;
    }
    printf("%s\n", shown ? " + ..." : " (no key above 1%)");
    printf("  the model's own weighted sum for this head differs by at most %.2e\n",
           max_abs_diff(h->pass.output, h->ctx_model, (size_t)Tq * D));
    if (h->compared) {
        printf("  with the other mask (%s): z = ", h->causal ? "none" : "causal");
        print_vec(h->other.output + (size_t)q * D, D, 6);
        putchar('\n');
    }

    printf("\nStep 6. The head's share of the output projection: z·W_O[%d], W_O[%d] the (%d x %d)\n"
           "        rows of W_O that read this head; the layer adds all %d heads' shares and b_O:\n  ",
           h->head, h->head, D, h->d_model, h->H);
    print_vec(h->out_share + (size_t)q * h->d_model, h->d_model, 6);
    putchar('\n');

    printf("\nStrongest key of every query (this head):\n");
    for (int i = 0; i < Tq; i++) {
        const float *r = h->pass.weights + (size_t)i * Tk;
        int b = 0;
        for (int j = 0; j < Tk; j++)
            if (r[j] > r[b]) b = j;
        printf("  %3d %-14.14s -> %-14.14s %.3f\n", i, ql[i], kl[b], (double)r[b]);
    }
}

static void print_hits(const attn_explain_hit *hits, int n, char **ql, char **kl, int q, int key,
                       attn_viz_kind kind) {
    if (key >= 0)
        printf("heads ranked by the weight query %d '%s' gives key %d '%s' (%s):\n", q, ql[q], key,
               kl[key], attn_viz_kind_name(kind));
    else
        printf("heads ranked by the largest weight query %d '%s' gives one other token (%s; "
               "special tokens aside):\n",
               q, ql[q], attn_viz_kind_name(kind));
    for (int i = 0; i < n; i++) {
        const attn_explain_hit *e = &hits[i];
        printf("  %2d. layer %2d head %2d  %5.1f%% -> %-12s", i + 1, e->layer, e->head,
               100.0 * e->weight, kl[e->key]);
        if (e->keys[1] >= 0 && e->weights[1] > 0) {
            printf("  (then");
            for (int t = 1; t < 3; t++)
                if (e->keys[t] >= 0 && e->weights[t] > 0)
                    printf(" %s %.1f%%", kl[e->keys[t]], 100.0 * e->weights[t]);
            printf(")");
        }
        putchar('\n');
    }
    putchar('\n');
}

/* For each other key (special tokens aside), the two heads attending most from q to it. */
static attn_status print_per_key(const attn_viz *v, attn_viz_kind kind, int q, const bool *skip,
                                 char **ql, char **kl, int Tk) {
    printf("for each other token, the heads that attend most from '%s' to it:\n", ql[q]);
    for (int j = 0; j < Tk; j++) {
        if (skip[j] || (j == q && attn_viz_key_side(kind) == attn_viz_query_side(kind))) continue;
        attn_explain_hit h[2];
        int n = 0;
        attn_status s = attn_explain_find_key(v, kind, q, j, h, 2, &n);
        if (s) return s;
        if (n == 0 || h[0].weight <= 0) continue; /* masked (a decoder's later tokens) */
        printf("  %3d %-14.14s", j, kl[j]);
        for (int k = 0; k < n; k++)
            printf("  layer %2d head %2d %5.1f%%", h[k].layer, h[k].head, 100.0 * h[k].weight);
        putchar('\n');
    }
    putchar('\n');
    return ATTN_STATUS_OK;
}

/* ---- main --------------------------------------------------------------------------------- */

static json_t *hits_json(const attn_explain_hit *hits, int n, char **kl) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_object(), *keys = json_array();
        json_object_set_new(o, "layer", json_integer(hits[i].layer));
        json_object_set_new(o, "head", json_integer(hits[i].head));
        json_object_set_new(o, "weight", json_real(hits[i].weight));
        json_object_set_new(o, "key", json_integer(hits[i].key));
        json_object_set_new(o, "key_label", json_string(kl[hits[i].key]));
        for (int t = 0; t < 3; t++)
            if (hits[i].keys[t] >= 0) {
                json_t *k = json_object();
                json_object_set_new(k, "key", json_integer(hits[i].keys[t]));
                json_object_set_new(k, "label", json_string(kl[hits[i].keys[t]]));
                json_object_set_new(k, "weight", json_real(hits[i].weights[t]));
                json_array_append_new(keys, k);
            }
        json_object_set_new(o, "keys", keys);
        json_array_append_new(a, o);
    }
    return a;
}

static attn_status run(const ex_opts *o) {
    ex_model m;
    memset(&m, 0, sizeof m);
    attn_viz *v = NULL;
    attn_explain_layer L;
    attn_explain_head h;
    memset(&L, 0, sizeof L);
    memset(&h, 0, sizeof h);
    attn_explain_hit hits[64];
    int n_hits = 0, q = -1, key = -1, layer = o->layer, head = o->head;
    attn_status s = load_model(o, &m);
    attn_viz_kind kind = m.fam == FAMILY_ENCDEC ? ATTN_VIZ_CROSS : ATTN_VIZ_SELF;
    if (!s && o->kind_s) {
        s = attn_viz_kind_parse(o->kind_s, &kind);
        if (!s && (m.fam == FAMILY_ENCDEC) == (kind == ATTN_VIZ_SELF))
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "--kind %s: this model has %s attention", o->kind_s,
                               m.fam == FAMILY_ENCDEC ? "encoder, decoder and cross" : "self");
    }
    int Tq = 0, Tk = 0;
    char **ql = NULL, **kl = NULL;
    if (!s) {
        ql = side_labels(&m, attn_viz_query_side(kind), &Tq);
        kl = side_labels(&m, attn_viz_key_side(kind), &Tk);
        const char *want = o->find ? o->find : o->query;
        if (want && (q = find_token(want, ql, Tq)) < 0)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "'%s': not a position in [0, %d) nor a query token (%s)", want, Tq,
                               attn_viz_kind_name(kind));
        if (!s && o->find && o->query) {
            const int q2 = find_token(o->query, ql, Tq);
            if (q2 != q)
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                   "--find %s and --query %s name different tokens", o->find,
                                   o->query);
        }
        if (q < 0) q = Tq - 1;
    }
    if (!s && o->find) {
        s = capture_all(&m, &v);
        bool *skip = NULL;
        if (!s && !(skip = calloc((size_t)Tk, sizeof *skip)))
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        if (!s) {
            const int32_t *kid = attn_viz_key_side(kind) == ATTN_VIZ_SIDE_TOKENS ? m.ids : m.tgt;
            for (int j = 0; j < Tk; j++) skip[j] = is_special(&m, kid[j]);
            const int cap = o->top < 64 ? o->top : 64;
            if (o->key && (key = find_token(o->key, kl, Tk)) < 0)
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                   "--key %s: not a position in [0, %d) nor a key token", o->key,
                                   Tk);
            if (!s)
                s = key >= 0 ? attn_explain_find_key(v, kind, q, key, hits, cap, &n_hits)
                             : attn_explain_find(v, kind, q, skip, hits, cap, &n_hits);
            if (!s && !o->json) {
                print_hits(hits, n_hits, ql, kl, q, key, kind);
                s = print_per_key(v, kind, q, skip, ql, kl, Tk);
            }
        }
        free(skip);
        if (!s && n_hits == 0)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "--find %s: no head attends from it to another token", o->find);
        if (!s && !o->layer_set) layer = hits[0].layer;
        if (!s && !o->head_set) head = hits[0].head;
    }
    if (!s) s = capture_layer(&m, kind, layer, &L);
    if (!s) s = attn_explain_head_compute(&L, head, o->compare, &h);
    char title[512];
    snprintf(title, sizeof title, "%s", m.title);
    if (!s && o->png) {
        s = attn_explain_head_write_png(&h, (const char *const *)ql, (const char *const *)kl,
                                        title, o->png, o->font);
        if (!s && !o->json) printf("wrote %s\n", o->png);
    }
    if (!s && o->html) {
        s = attn_explain_head_write_html(&h, (const char *const *)ql, (const char *const *)kl,
                                         title, q, o->html);
        if (!s && !o->json) printf("wrote %s\n", o->html);
    }
    if (!s && o->json) {
        char *text = NULL;
        s = attn_explain_head_json(&h, (const char *const *)ql, (const char *const *)kl, title, q,
                                   true, &text);
        json_error_t err;
        json_t *root = text ? json_loads(text, 0, &err) : NULL;
        free(text);
        if (!s && !root) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        if (!s && o->find) json_object_set_new(root, "find", hits_json(hits, n_hits, kl));
        char *out = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
        json_decref(root);
        if (!s && !out) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        if (!s) puts(out);
        free(out);
    } else if (!s) {
        print_walk(&m, &h, ql, kl, q);
    }
    attn_explain_head_free(&h);
    attn_explain_layer_free(&L);
    attn_viz_free(v);
    model_free(&m);
    return s;
}

int cmd_explain_model(int argc, char **argv) {
    ex_opts o;
    memset(&o, 0, sizeof o);
    o.in.beam = 4;
    o.top = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        const char **str = !strcmp(a, "--model")        ? &o.in.dir
                           : !strcmp(a, "--ids")        ? &o.in.ids
                           : !strcmp(a, "--target")     ? &o.in.target
                           : !strcmp(a, "--target-ids") ? &o.in.target_ids
                           : !strcmp(a, "--src-lang")   ? &o.in.src_lang
                           : !strcmp(a, "--tgt-lang")   ? &o.in.tgt_lang
                           : !strcmp(a, "--query")      ? &o.query
                           : !strcmp(a, "--find")       ? &o.find
                           : !strcmp(a, "--key")        ? &o.key
                           : !strcmp(a, "--png")        ? &o.png
                           : !strcmp(a, "--html")       ? &o.html
                           : !strcmp(a, "--font")       ? &o.font
                           : !strcmp(a, "--kind")       ? &o.kind_s
                                                        : NULL;
        if (str) {
            if (!val) return cli_usage_error("explain: %s needs a value", a);
            *str = val, i++;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(explain_model_usage, stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            o.json = true;
        } else if (!strcmp(a, "--compare-masks")) {
            o.compare = true;
        } else if (!strcmp(a, "--layer")) {
            if (!cli_parse_int(val, 0, ATTN_VIZ_MAX_LAYERS - 1, &o.layer))
                return cli_usage_error("explain: --layer needs a layer number >= 0");
            o.layer_set = true, i++;
        } else if (!strcmp(a, "--head")) {
            if (!cli_parse_int(val, 0, ATTN_VIZ_MAX_HEADS - 1, &o.head))
                return cli_usage_error("explain: --head needs a head number >= 0");
            o.head_set = true, i++;
        } else if (!strcmp(a, "--top")) {
            if (!cli_parse_int(val, 1, 64, &o.top))
                return cli_usage_error("explain: --top needs a number from 1 to 64");
            i++;
        } else if (!strcmp(a, "--beam")) {
            if (!cli_parse_int(val, 1, 256, &o.in.beam))
                return cli_usage_error("explain: --beam needs a number from 1 to 256");
            o.in.beam_set = true, i++;
        } else if (!strcmp(a, "--")) {
            if (i + 1 < argc && !o.in.text) o.in.text = argv[++i];
            if (i + 1 < argc) return cli_usage_error("explain: more than one TEXT");
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("explain: unknown option '%s'", a);
        } else if (o.in.text) {
            return cli_usage_error("explain: more than one TEXT ('%s' and '%s'): quote the text",
                                   o.in.text, a);
        } else {
            o.in.text = a;
        }
    }
    if (!o.in.dir) return cli_usage_error("explain: --model DIR is missing");
    if (!o.in.text == !o.in.ids)
        return cli_usage_error("explain --model needs the input: TEXT or --ids (one of them)");
    if (o.in.target && o.in.target_ids)
        return cli_usage_error("explain: --target and --target-ids exclude each other");
    if (o.key && !o.find) return cli_usage_error("explain: --key goes with --find");
    attn_status s = run(&o);
    return s ? cli_fail(s) : CLI_EXIT_OK;
}

/* fill_mask.c — transformers' FillMaskPipeline (attn_embed.h): tokenize with the special tokens,
 * run the encoder, masked-LM logits at the mask positions only, softmax over the vocabulary,
 * top-k, and the filled sequences decoded as the pipeline decodes them. */
#include "embed-impl.h"

#include "../core/core-impl.h"
#include "attn_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void attn_embed_fill_result_free(attn_embed_fill_result *r) {
    if (!r) return;
    if (r->cands)
        for (int i = 0; i < r->n_masks * r->top_k; i++) {
            free(r->cands[i].token_str);
            free(r->cands[i].sequence);
        }
    free(r->cands);
    free(r->positions);
    memset(r, 0, sizeof *r);
}

/* decode as transformers' tokenizer.decode: the tokenizer's decoder, then clean_up_tokenization
 * when the tokenizer config asks for it. Returns a malloc'd string. */
static attn_status decode(const attn_embed *e, const int32_t *ids, size_t n, bool skip_special,
                          char **out) {
    char *t = NULL;
    size_t len = 0;
    attn_status s = attn_tok_decode_alloc(e->tok, ids, n, skip_special ? 0 : ATTN_TOK_DECODE_KEEP_SPECIAL,
                                          &t, &len);
    if (s) return s;
    char *c = malloc(len + 1);
    if (!c) {
        attn_free(t);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    memcpy(c, t, len + 1);
    attn_free(t);
    if (e->info.clean_up_tokenization_spaces) embed_clean_up_tokenization(c);
    *out = c;
    return ATTN_STATUS_OK;
}

typedef struct {
    float p;
    int32_t id;
} cand;

/* Higher probability first, then lower id. */
static int by_prob(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

attn_status attn_embed_fill_mask(attn_embed *e, const char *text, size_t len, int top_k,
                                 attn_embed_fill_result *out) {
    if (!e || !text || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "fill-mask: NULL argument");
    memset(out, 0, sizeof *out);
    if (len == SIZE_MAX) len = strlen(text);
    const attn_bert_config *cfg = &e->model->cfg;
    const int V = cfg->vocab_size;
    if (!e->info.has_mlm)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "fill-mask: %s has no masked-LM head (cls.predictions.*): it is not a "
                         "BertForMaskedLM model",
                         e->model_dir);
    if (e->info.mask_id < 0)
        return attn_fail(ATTN_STATUS_UNSUPPORTED, "fill-mask: the tokenizer has no mask token");
    if (top_k < 1 || top_k > V)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "fill-mask: top_k %d is not in [1, %d]",
                         top_k, V);
    int32_t *ids = NULL;
    size_t n = 0;
    attn_status s = embed_tokenize_text(e, text, len, 0, false, SIZE_MAX, &ids, &n);
    if (s) return s;
    int32_t *pos = NULL, *tmp = NULL;
    float *logits = NULL;
    cand *cs = NULL;
    const char *mask_str = attn_tok_id_to_token(e->tok, e->info.mask_id);
    int nm = 0;
    for (size_t t = 0; t < n; t++) nm += ids[t] == e->info.mask_id;
    if (nm == 0) {
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "fill-mask: no %s in the text",
                      mask_str ? mask_str : "mask token");
        goto done;
    }
    if (n > (size_t)cfg->max_position_embeddings) {
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                      "fill-mask: the text is %zu tokens, more than the model's "
                      "max_position_embeddings %d",
                      n, cfg->max_position_embeddings);
        goto done;
    }
    pos = malloc((size_t)nm * sizeof *pos);
    logits = malloc((size_t)nm * (size_t)V * sizeof *logits);
    cs = malloc((size_t)V * sizeof *cs);
    tmp = malloc(n * sizeof *tmp);
    out->positions = calloc((size_t)nm, sizeof *out->positions);
    out->cands = calloc((size_t)nm * (size_t)top_k, sizeof *out->cands);
    if (!pos || !logits || !cs || !tmp || !out->positions || !out->cands) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    out->n_masks = nm;
    out->top_k = top_k;
    nm = 0;
    for (size_t t = 0; t < n; t++)
        if (ids[t] == e->info.mask_id) pos[nm] = (int32_t)t, out->positions[nm++] = (int32_t)t;
    const int T = (int)n;
    const int32_t L = T;
    if ((s = embed_ensure_state(e, 1, T))) goto done;
    if ((s = attn_bert_forward(e->model, e->st, 1, T, ids, NULL, &L, NULL))) goto done;
    if ((s = attn_bert_mlm_logits(e->model, e->st, nm, pos, logits))) goto done;
    const bool single = nm == 1;
    for (int m = 0; m < nm; m++) {
        const float *z = logits + (size_t)m * (size_t)V;
        double mx = -INFINITY;
        for (int v = 0; v < V; v++)
            if (z[v] > mx) mx = z[v];
        if (!isfinite(mx)) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "fill-mask: the model produced non-finite logits");
            goto done;
        }
        double sum = 0;
        for (int v = 0; v < V; v++) sum += exp((double)z[v] - mx);
        for (int v = 0; v < V; v++) {
            cs[v].p = (float)(exp((double)z[v] - mx) / sum);
            cs[v].id = v;
        }
        qsort(cs, (size_t)V, sizeof *cs, by_prob);
        for (int k = 0; k < top_k; k++) {
            attn_embed_fill_candidate *c = &out->cands[(size_t)m * (size_t)top_k + (size_t)k];
            c->token = cs[k].id;
            c->score = cs[k].p;
            /* the filled ids, pad ids removed (as the pipeline) */
            size_t w = 0;
            for (size_t t = 0; t < n; t++) {
                int32_t id = (int)t == pos[m] ? cs[k].id : ids[t];
                if (id != e->info.pad_id) tmp[w++] = id;
            }
            if ((s = decode(e, tmp, w, single, &c->sequence))) goto done;
            if ((s = decode(e, &cs[k].id, 1, false, &c->token_str))) goto done;
        }
    }
done:
    free(ids), free(pos), free(logits), free(cs), free(tmp);
    if (s) attn_embed_fill_result_free(out);
    return s;
}

/* ---- masked-LM masking -------------------------------------------------------------------------- */

attn_embed_mlm_params attn_embed_mlm_default_params(void) {
    attn_embed_mlm_params p;
    memset(&p, 0, sizeof p);
    p.mlm_probability = 0.15f;
    p.mask_fraction = 0.8f;
    p.random_fraction = 0.1f;
    p.mask_id = -1;
    p.vocab_size = 0;
    p.no_mask = NULL;
    return p;
}

/* floor(x · 2^32) for x in [0, 1], as an exclusive threshold on a 32-bit word (2^32 for x = 1). */
static uint64_t threshold(double x) {
    if (!(x > 0)) return 0;
    if (x >= 1) return (uint64_t)1 << 32;
    return (uint64_t)floor(x * 4294967296.0);
}

attn_status attn_embed_mlm_mask(const attn_embed_mlm_params *p, uint64_t seed, uint64_t epoch,
                                uint64_t example, int n, const int32_t *ids, int32_t *masked,
                                int32_t *labels) {
    if (!p || (n > 0 && (!ids || !masked || !labels)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "mlm_mask: NULL argument");
    if (n < 0 || n > 4096 || example >= ((uint64_t)1 << 28) || epoch >= ((uint64_t)1 << 24))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "mlm_mask: n %d (<= 4096), example %llu (< 2^28) or epoch %llu (< 2^24) "
                         "out of range",
                         n, (unsigned long long)example, (unsigned long long)epoch);
    if (p->vocab_size < 1 || p->mask_id < 0 || p->mask_id >= p->vocab_size)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "mlm_mask: mask_id %d must be in [0, vocab_size %d)", p->mask_id,
                         p->vocab_size);
    if (!(p->mlm_probability >= 0 && p->mlm_probability <= 1) || !(p->mask_fraction >= 0) ||
        !(p->random_fraction >= 0) || !(p->mask_fraction + p->random_fraction <= 1.0f + 1e-6f))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "mlm_mask: probabilities %g / %g / %g are not valid",
                         (double)p->mlm_probability, (double)p->mask_fraction,
                         (double)p->random_fraction);
    const uint64_t t_sel = threshold(p->mlm_probability), t_mask = threshold(p->mask_fraction),
                   t_rand = threshold((double)p->mask_fraction + (double)p->random_fraction);
    for (int t = 0; t < n; t++) {
        int32_t id = ids[t];
        if (id < 0 || id >= p->vocab_size)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "mlm_mask: id %d at position %d is not in [0, %d)", id, t,
                             p->vocab_size);
        uint32_t u[4];
        attn_rng_block(seed, (epoch << 40) | (example << 12) | (uint64_t)t, u);
        bool chosen = u[0] < t_sel && !(p->no_mask && p->no_mask[id]);
        labels[t] = chosen ? id : ATTN_BERT_IGNORE_INDEX;
        if (!chosen) {
            masked[t] = id;
        } else if (u[1] < t_mask) {
            masked[t] = p->mask_id;
        } else if (u[1] < t_rand) {
            masked[t] = (int32_t)(((uint64_t)u[2] * (uint64_t)p->vocab_size) >> 32);
        } else {
            masked[t] = id;
        }
    }
    return ATTN_STATUS_OK;
}

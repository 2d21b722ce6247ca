/* capture_models.c — attention capture from the single-stack models: GPT-2 and the Llama family
 * (attn_gpt.h, causal; one map per query head, grouped-query heads named in the title) and BERT (attn_bert.h, bidirectional). Both write per-layer (B, H, T, T) probabilities from
 * their fused attention kernels when a capture is set; here B = 1 and the buffers are the maps
 * "self.L" of the container. */
#include "viz-impl.h"

#include <stdio.h>
#include <stdlib.h>

/* A container with the token labels of ids and L zeroed maps self.0 .. self.L-1 of (H, T, T);
 * bufs[l] points into map l. */
static attn_status self_container(const attn_tok *tok, const int32_t *ids, int T, int L, int H,
                                  float **bufs, attn_viz **out) {
    attn_viz *v;
    attn_status s = attn_viz_init(&v);
    if (s) return s;
    s = attn_viz_set_token_ids(v, ATTN_VIZ_SIDE_TOKENS, tok, ids, T);
    for (int l = 0; l < L && !s; l++)
        s = attn_viz_add_map(v, ATTN_VIZ_SELF, l, H, T, T, NULL, &bufs[l]);
    if (s) {
        attn_viz_free(v);
        return s;
    }
    *out = v;
    return ATTN_STATUS_OK;
}

static attn_status check_ids(const char *what, const int32_t *ids, int T, int max_T, int V) {
    if (!ids || T < 1 || T > max_T)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention capture: %d tokens; the %s model takes 1 to %d", T, what,
                         max_T);
    for (int i = 0; i < T; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention capture: id %ld at position %d is outside the %s "
                             "vocabulary [0, %d)",
                             (long)ids[i], i, what, V);
    return ATTN_STATUS_OK;
}

attn_status attn_viz_capture_gpt(const attn_gpt_model *m, const attn_tok *tok, const int32_t *ids,
                                 int T, attn_viz **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_capture_gpt: NULL out");
    *out = NULL;
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_capture_gpt: NULL model");
    const attn_gpt_config *c = &m->cfg;
    const char *arch = attn_gpt_is_llama(c) ? attn_gpt_arch_name(c->arch) : "GPT-2";
    attn_status s = check_ids(arch, ids, T, c->n_positions, c->vocab_size);
    if (s) return s;
    float **bufs = calloc((size_t)c->n_layer, sizeof *bufs);
    if (!bufs) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
    attn_viz *v = NULL;
    attn_gpt_state *st = NULL;
    s = self_container(tok, ids, T, c->n_layer, c->n_head, bufs, &v);
    if (!s) s = attn_gpt_state_init(m, 1, T, &st);
    if (!s) {
        attn_gpt_capture cap = {NULL, bufs};
        attn_gpt_set_capture(st, &cap);
        s = attn_gpt_forward(m, st, 1, T, ids, NULL);
        attn_gpt_set_capture(st, NULL);
    }
    if (!s) {
        char title[256];
        const int Hkv = attn_gpt_kv_heads(c);
        if (Hkv == c->n_head)
            snprintf(title, sizeof title, "%s, %d layers, %d heads, d_model %d: %d tokens", arch,
                     c->n_layer, c->n_head, c->n_embd, T);
        else /* grouped-query: which key/value head each query head reads */
            snprintf(title, sizeof title,
                     "%s, %d layers, %d query heads sharing %d key/value heads (heads %d·g .. "
                     "%d·g + %d read key/value head g), d_model %d: %d tokens",
                     arch, c->n_layer, c->n_head, Hkv, c->n_head / Hkv, c->n_head / Hkv,
                     c->n_head / Hkv - 1, c->n_embd, T);
        s = attn_viz_set_title(v, title);
    }
    attn_gpt_state_free(st);
    free(bufs);
    if (s) {
        attn_viz_free(v);
        return s;
    }
    *out = v;
    return ATTN_STATUS_OK;
}

attn_status attn_viz_capture_bert(const attn_bert_model *m, const attn_tok *tok, const int32_t *ids,
                                  const int32_t *type_ids, int T, attn_viz **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_capture_bert: NULL out");
    *out = NULL;
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_capture_bert: NULL model");
    const attn_bert_config *c = &m->cfg;
    attn_status s = check_ids("BERT", ids, T, c->max_position_embeddings, c->vocab_size);
    if (s) return s;
    float **bufs = calloc((size_t)c->num_hidden_layers, sizeof *bufs);
    if (!bufs) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
    attn_viz *v = NULL;
    attn_bert_state *st = NULL;
    s = self_container(tok, ids, T, c->num_hidden_layers, c->num_attention_heads, bufs, &v);
    if (!s) s = attn_bert_state_init(m, 1, T, &st);
    if (!s) {
        attn_bert_capture cap = {NULL, bufs};
        attn_bert_set_capture(st, &cap);
        s = attn_bert_forward(m, st, 1, T, ids, type_ids, NULL, NULL);
        attn_bert_set_capture(st, NULL);
    }
    if (!s) {
        char title[160];
        snprintf(title, sizeof title, "BERT, %d layers, %d heads, hidden %d: %d tokens",
                 c->num_hidden_layers, c->num_attention_heads, c->hidden_size, T);
        s = attn_viz_set_title(v, title);
    }
    attn_bert_state_free(st);
    free(bufs);
    if (s) {
        attn_viz_free(v);
        return s;
    }
    *out = v;
    return ATTN_STATUS_OK;
}

/* capture_encdec.c — attention capture from the encoder–decoder model (attn_models.h): one
 * teacher-forced forward with the model's capture buffers pointed into the maps. */
#include "viz-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The capture, its labels from tok or (when not NULL) mt's pieces. */
static attn_status capture(const attn_encdec_model *m, const attn_tok *tok, const attn_mt_tok *mt,
                           const int32_t *src, int Ts, const int32_t *tgt, int n_tgt,
                           attn_viz **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_capture_encdec: NULL out");
    *out = NULL;
    if (!m || !src || !tgt)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_capture_encdec: NULL argument");
    const attn_encdec_config *c = &m->cfg;
    const int Tt = n_tgt - 1;
    if (Ts < 1 || Ts > c->max_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention capture: the source has %d tokens; the model takes 1 to %d", Ts,
                         c->max_len);
    if (n_tgt < 2 || Tt > c->max_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention capture: the target sequence has %d tokens; it needs <s> ... "
                         "and at most %d decoder positions (the model's max_len)",
                         n_tgt, c->max_len);
    for (int i = 0; i < Ts; i++)
        if (src[i] < 0 || src[i] >= c->src_vocab)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention capture: source id %ld at position %d is outside the "
                             "source vocabulary [0, %d)",
                             (long)src[i], i, c->src_vocab);
    for (int i = 0; i < n_tgt; i++)
        if (tgt[i] < 0 || tgt[i] >= c->tgt_vocab)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention capture: target id %ld at position %d is outside the "
                             "target vocabulary [0, %d)",
                             (long)tgt[i], i, c->tgt_vocab);
    const int H = c->n_head, Le = c->n_enc_layers, Ld = c->n_dec_layers;
    attn_viz *v = NULL;
    attn_encdec_state *st = NULL;
    float **bufs = calloc((size_t)(Le + 2 * Ld), sizeof *bufs);
    char **lab = NULL, **outs = NULL;
    attn_status s = bufs ? attn_viz_init(&v)
                         : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention capture: out of memory");
    if (!s) s = viz_labels(tok, mt, false, src, Ts, &lab);
    if (!s) s = attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TOKENS, Ts, (const char *const *)lab);
    viz_labels_free(lab, Ts), lab = NULL;
    if (!s) s = viz_labels(tok, mt, true, tgt, Tt, &lab);
    if (!s) s = attn_viz_set_tokens(v, ATTN_VIZ_SIDE_TARGET, Tt, (const char *const *)lab);
    viz_labels_free(lab, Tt);
    if (!s) s = viz_labels(tok, mt, true, tgt + 1, Tt, &outs);
    if (!s) s = attn_viz_set_target_out(v, Tt, (const char *const *)outs);
    for (int l = 0; l < Le && !s; l++)
        s = attn_viz_add_map(v, ATTN_VIZ_ENC_SELF, l, H, Ts, Ts, NULL, &bufs[l]);
    for (int l = 0; l < Ld && !s; l++)
        s = attn_viz_add_map(v, ATTN_VIZ_DEC_SELF, l, H, Tt, Tt, NULL, &bufs[Le + l]);
    for (int l = 0; l < Ld && !s; l++)
        s = attn_viz_add_map(v, ATTN_VIZ_CROSS, l, H, Tt, Ts, NULL, &bufs[Le + Ld + l]);
    if (!s) s = attn_encdec_state_init(m, 1, Ts, Tt, &st);
    if (!s) {
        attn_encdec_capture cap = {bufs, bufs + Le, bufs + Le + Ld};
        attn_encdec_set_capture(st, &cap);
        const int32_t sl = Ts, tl = Tt;
        s = attn_encdec_forward(m, st, 1, Ts, Tt, src, &sl, tgt, &tl, NULL);
        attn_encdec_set_capture(st, NULL);
    }
    if (!s) {
        char title[160];
        snprintf(title, sizeof title,
                 "%s, %d+%d layers, %d heads, d_model %d: %d source tokens, %d "
                 "target positions",
                 c->arch == ATTN_ENCDEC_ARCH_MARIAN   ? "Marian encoder-decoder"
                 : c->arch == ATTN_ENCDEC_ARCH_M2M100 ? "M2M100 encoder-decoder"
                                                      : "encoder-decoder",
                 Le, Ld, H, c->d_model, Ts, Tt);
        s = attn_viz_set_title(v, title);
    }
    attn_encdec_state_free(st);
    viz_labels_free(outs, Tt);
    free(bufs);
    if (s) {
        attn_viz_free(v);
        return s;
    }
    *out = v;
    return ATTN_STATUS_OK;
}

attn_status attn_viz_capture_encdec(const attn_encdec_model *m, const attn_tok *tok,
                                    const int32_t *src, int Ts, const int32_t *tgt, int n_tgt,
                                    attn_viz **out) {
    return capture(m, tok, NULL, src, Ts, tgt, n_tgt, out);
}

attn_status attn_viz_capture_encdec_mt(const attn_encdec_model *m, const attn_mt_tok *tok,
                                       const int32_t *src, int Ts, const int32_t *tgt, int n_tgt,
                                       attn_viz **out) {
    return capture(m, NULL, tok, src, Ts, tgt, n_tgt, out);
}

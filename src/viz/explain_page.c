/* explain_page.c — one head's walk-through (attn_explain.h) as JSON, as a self-contained HTML page
 * (the page of explain_page_data.c, generated from tools/explain_page.html, around the JSON) and
 * as a PNG of its score matrices. */
#include "viz-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *matrix(const float *m, int rows, int cols) {
    if (!m) return json_null();
    json_t *a = json_array();
    for (int i = 0; a && i < rows; i++) {
        json_t *row = json_array();
        for (int j = 0; row && j < cols; j++) {
            const float v = m[(size_t)i * cols + j];
            json_array_append_new(row, isfinite(v) ? json_real(v) : json_null());
        }
        json_array_append_new(a, row);
    }
    return a;
}

static json_t *vector(const float *v, int n) {
    if (!v) return json_null();
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_real(v[i]));
    return a;
}

/* The Euclidean norm of each row of m (rows, cols). */
static json_t *row_norms(const float *m, int rows, int cols) {
    json_t *a = json_array();
    for (int i = 0; a && i < rows; i++) {
        double s = 0;
        for (int j = 0; j < cols; j++) s += (double)m[(size_t)i * cols + j] * m[(size_t)i * cols + j];
        json_array_append_new(a, json_real(sqrt(s)));
    }
    return a;
}

static json_t *labels(const char *const *l, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "#%d", i);
        json_array_append_new(a, json_string(l && l[i] ? l[i] : buf));
    }
    return a;
}

static const char *mask_name(bool causal, int window) {
    return !causal ? "none" : window > 0 ? "sliding window" : "causal";
}

static attn_status build(const attn_explain_head *h, const char *const *ql, const char *const *kl,
                         const char *title, int query, bool full, json_t **out) {
    if (!h || !h->pass.weights || h->Tq < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: no walk-through to write");
    const int Tq = h->Tq, Tk = h->Tk, D = h->d_head, C = h->d_model, Ckv = h->d_kv;
    json_t *o = json_object();
    json_object_set_new(o, "format", json_string("attn-explain"));
    json_object_set_new(o, "version", json_integer(1));
    json_object_set_new(o, "title", title ? json_string(title) : json_null());
    json_object_set_new(o, "kind", json_string(attn_viz_kind_name(h->kind)));
    json_object_set_new(o, "layer", json_integer(h->layer));
    json_object_set_new(o, "head", json_integer(h->head));
    json_object_set_new(o, "kv_head", json_integer(h->kv_head));
    json_object_set_new(o, "H", json_integer(h->H));
    json_object_set_new(o, "H_kv", json_integer(h->H_kv));
    json_object_set_new(o, "d_model", json_integer(C));
    json_object_set_new(o, "d_kv", json_integer(Ckv));
    json_object_set_new(o, "d_head", json_integer(D));
    json_object_set_new(o, "scale", json_real(h->scale));
    json_object_set_new(o, "mask", json_string(mask_name(h->causal, h->window)));
    json_object_set_new(o, "causal", json_boolean(h->causal));
    json_object_set_new(o, "window", json_integer(h->window));
    json_object_set_new(o, "rope_dim", json_integer(h->rope_dim));
    json_object_set_new(o, "rope_mode", json_string(attn_rope_mode_name(h->rope_mode)));
    json_object_set_new(o, "pre_norm", json_boolean(h->pre_norm));
    json_object_set_new(o, "norm", json_string(attn_norm_kind_name(h->norm_kind)));
    json_object_set_new(o, "qk_norm", json_boolean(h->qk_norm));
    json_object_set_new(o, "query", json_integer(query >= 0 && query < Tq ? query : -1));
    json_object_set_new(o, "q_labels", labels(ql, Tq));
    json_object_set_new(o, "k_labels", labels(kl, Tk));
    json_object_set_new(o, "q", matrix(h->pass.q, Tq, D));
    json_object_set_new(o, "k", matrix(h->pass.k, Tk, D));
    json_object_set_new(o, "v", matrix(h->pass.v, Tk, D));
    json_object_set_new(o, "scores", matrix(h->pass.scores, Tq, Tk));
    json_object_set_new(o, "scaled", matrix(h->pass.scaled, Tq, Tk));
    json_object_set_new(o, "weights", matrix(h->pass.weights, Tq, Tk));
    json_object_set_new(o, "output", matrix(h->pass.output, Tq, D));
    json_object_set_new(o, "q_pre", matrix(h->q_pre, Tq, D));
    json_object_set_new(o, "k_pre", matrix(h->k_pre, Tk, D));
    json_object_set_new(o, "probs_model", matrix(h->probs_model, Tq, Tk));
    json_object_set_new(o, "ctx_model", matrix(h->ctx_model, Tq, D));
    json_t *other = json_null();
    if (h->compared) {
        other = json_object();
        json_object_set_new(other, "mask", json_string(mask_name(!h->causal, 0)));
        json_object_set_new(other, "scaled", matrix(h->other.scaled, Tq, Tk));
        json_object_set_new(other, "weights", matrix(h->other.weights, Tq, Tk));
        json_object_set_new(other, "output", matrix(h->other.output, Tq, D));
    }
    json_object_set_new(o, "other", other);
    json_object_set_new(o, "x_norm", row_norms(h->x_q, Tq, C));
    json_object_set_new(o, "share_norm", row_norms(h->out_share, Tq, C));
    if (full) {
        json_object_set_new(o, "x_q", matrix(h->x_q, Tq, C));
        json_object_set_new(o, "x_kv", matrix(h->x_kv, Tk, Ckv));
        json_object_set_new(o, "w_q", matrix(h->w_q, C, D));
        json_object_set_new(o, "w_k", matrix(h->w_k, Ckv, D));
        json_object_set_new(o, "w_v", matrix(h->w_v, Ckv, D));
        json_object_set_new(o, "b_q", vector(h->b_q, D));
        json_object_set_new(o, "b_k", vector(h->b_k, D));
        json_object_set_new(o, "b_v", vector(h->b_v, D));
        json_object_set_new(o, "w_o", matrix(h->w_o, D, C));
        json_object_set_new(o, "share", matrix(h->out_share, Tq, C));
    }
    *out = o;
    return ATTN_STATUS_OK;
}

attn_status attn_explain_head_json(const attn_explain_head *h, const char *const *q_labels,
                                   const char *const *k_labels, const char *title, int query,
                                   bool full, char **json) {
    if (!json) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL output");
    *json = NULL;
    json_t *o;
    ATTN_TRY(build(h, q_labels, k_labels, title, query, full, &o));
    *json = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!*json) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory writing JSON");
    return ATTN_STATUS_OK;
}

attn_status attn_explain_head_write_html(const attn_explain_head *h, const char *const *q_labels,
                                         const char *const *k_labels, const char *title,
                                         int query, const char *path) {
    if (!path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: NULL path");
    json_t *o;
    ATTN_TRY(build(h, q_labels, k_labels, title, query, false, &o));
    viz_sbuf b = {NULL, 0, 0, false};
    for (int i = 0; explain_page_head[i]; i++) viz_sb_str(&b, explain_page_head[i]);
    viz_sb_json(&b, o);
    viz_sb_str(&b, "\n");
    for (int i = 0; explain_page_tail[i]; i++) viz_sb_str(&b, explain_page_tail[i]);
    return viz_sb_commit(&b, path);
}

attn_status attn_explain_head_write_png(const attn_explain_head *h, const char *const *q_labels,
                                        const char *const *k_labels, const char *title,
                                        const char *path, const char *font) {
    if (!h || !path || !h->pass.weights)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "explain: nothing to draw");
    const int Tq = h->Tq, Tk = h->Tk;
    char(*num)[16] = calloc((size_t)(Tq > Tk ? Tq : Tk), sizeof *num);
    const char **lab = calloc((size_t)(Tq > Tk ? Tq : Tk), sizeof *lab);
    if (!num || !lab) {
        free(num), free(lab);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "explain: out of memory");
    }
    for (int i = 0; i < (Tq > Tk ? Tq : Tk); i++) snprintf(num[i], sizeof num[i], "#%d", i), lab[i] = num[i];
    const char *const *ql = q_labels ? q_labels : lab, *const *kl = k_labels ? k_labels : lab;
    char t[4][128];
    snprintf(t[0], sizeof t[0], "scores q_i · k_j");
    snprintf(t[1], sizeof t[1], "scaled: scores × %.4g, mask: %s", (double)h->scale,
             mask_name(h->causal, h->window));
    snprintf(t[2], sizeof t[2], "weights = softmax (mask: %s)", mask_name(h->causal, h->window));
    snprintf(t[3], sizeof t[3], "weights with mask: %s", mask_name(!h->causal, 0));
    const attn_viz_panel p[4] = {{t[0], Tq, Tk, h->pass.scores, ql, kl, 0, 0},
                                 {t[1], Tq, Tk, h->pass.scaled, ql, kl, 0, 0},
                                 {t[2], Tq, Tk, h->pass.weights, ql, kl, 0, 1},
                                 {t[3], Tq, Tk, h->other.weights, ql, kl, 0, 1}};
    attn_viz_png_style st;
    memset(&st, 0, sizeof st);
    st.values = Tq <= 24 && Tk <= 24;
    st.font = font;
    char tt[512];
    snprintf(tt, sizeof tt, "%s%slayer %d, head %d (%s): rows = queries i, columns = keys j",
             title ? title : "", title ? ": " : "", h->layer, h->head, attn_viz_kind_name(h->kind));
    st.title = tt;
    const int n = h->compared ? 4 : 3;
    attn_status s = attn_viz_png_panels(path, p, n, n == 4 ? 2 : 3, &st, NULL);
    free(num), free(lab);
    return s;
}

/* cmd_forward_bert.c — the BERT branch of `attn forward` (src/cli/cmd_forward.c dispatches here
 * when config.json's model_type is "bert"): run an encoder (BertModel / BertForMaskedLM
 * directory) on one sequence of token ids and write its last hidden states (T, hidden_size) as a
 * float32 .npy; --hidden-out writes every layer's (num_hidden_layers + 1, T, hidden_size) as
 * transformers' output_hidden_states (the embeddings, then each layer's output), and
 * --compare-hidden checks them against a reference of that shape. Token types are all 0. */
#include "cmd_forward_bert.h"

#include "cli.h"

#include "attn_bert.h"
#include "attn_io.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "101,2023,102" -> ids (malloc'd). Syntax errors are usage errors (exit 2), -1 = ok. */
static int parse_ids(const char *s, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    if (!*s) return cli_usage_error("--ids: empty list (expected comma-separated token ids)");
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return cli_fail(attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "forward: out of memory"));
    int k = 0;
    for (const char *p = s;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        bool digits = len > 0 && len < 12;
        for (size_t i = 0; i < len && digits; i++) digits = p[i] >= '0' && p[i] <= '9';
        if (!digits) {
            free(v);
            return cli_usage_error("--ids: entry %d ('%.*s') is not a non-negative decimal id",
                                   k + 1, (int)(len < 24 ? len : 24), p);
        }
        long long x = strtoll(p, NULL, 10);
        if (x > INT32_MAX) {
            free(v);
            return cli_usage_error("--ids: entry %d (%lld) is too large", k + 1, x);
        }
        v[k++] = (int32_t)x;
        if (!e) break;
        p = e + 1;
    }
    *ids = v;
    *n = k;
    return -1;
}

static int compare(const char *path, const float *got, int nl, int T, int C) {
    float *ref = NULL;
    int ndim = 0;
    int64_t shape[ATTN_MAX_DIMS];
    attn_status s = attn_npy_load_f32(path, &ref, &ndim, shape);
    if (s) return cli_fail(s);
    if (ndim != 3 || shape[0] != nl || shape[1] != T || shape[2] != C) {
        attn_free(ref);
        return cli_fail(attn_set_error(ATTN_STATUS_FORMAT,
                                       "%s: expected shape (%d, %d, %d) = (num_hidden_layers + "
                                       "1, T, hidden_size), got %d dimensions (%lld, ...)",
                                       path, nl, T, C, ndim, (long long)(ndim ? shape[0] : 0)));
    }
    const double tol = 1e-4;
    const size_t per = (size_t)T * (size_t)C;
    int first_bad = -1;
    printf("hidden-state comparison with %s (tolerance %.0e x max|ref| per layer)\n", path, tol);
    for (int l = 0; l < nl; l++) {
        double err = 0, mx = 0;
        bool nonfinite = false;
        for (size_t i = 0; i < per; i++) {
            double g = got[(size_t)l * per + i], r = ref[(size_t)l * per + i];
            if (!isfinite(g) && isfinite(r)) nonfinite = true;
            double e = fabs(g - r);
            if (e > err || e != e) err = e;
            if (fabs(r) > mx) mx = fabs(r);
        }
        bool ok = !nonfinite && err <= tol * mx;
        printf("  layer %2d %-13s max_abs_err=%.3e max|ref|=%.3e rel=%.2e %s%s\n", l,
               l == 0 ? "embeddings" : "layer output", err, mx, mx > 0 ? err / mx : err,
               ok ? "ok" : "OVER", !ok && first_bad < 0 ? "  <- first layer over tolerance" : "");
        if (!ok && first_bad < 0) first_bad = l;
    }
    attn_free(ref);
    if (first_bad >= 0) {
        printf("FAIL: first layer over tolerance: %d\n", first_bad);
        return CLI_EXIT_FAIL;
    }
    printf("ok: every layer within tolerance\n");
    return CLI_EXIT_OK;
}

int cmd_forward_bert(const char *model, const char *ids_arg, const char *out,
                     const char *hidden_out, const char *compare_ref) {
    attn_bert_model *m = NULL;
    attn_bert_state *st = NULL;
    int32_t *ids = NULL;
    float *hidden = NULL, *layers = NULL;
    float **ptr = NULL;
    int T = 0;
    int rc = parse_ids(ids_arg, &ids, &T);
    if (rc >= 0) return rc;
    rc = CLI_EXIT_OK;
    attn_status s = attn_bert_load(model, &m); /* a directory or a GGUF file */
    if (s) {
        rc = cli_fail(s);
        goto done;
    }
    const attn_bert_config *c = &m->cfg;
    for (int t = 0; t < T; t++)
        if (ids[t] >= c->vocab_size) {
            rc = cli_fail(attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                         "--ids: id %d at position %d is outside the vocabulary "
                                         "[0, %d) of %s",
                                         (int)ids[t], t + 1, c->vocab_size, model));
            goto done;
        }
    if (T > c->max_position_embeddings) {
        rc = cli_fail(attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                     "--ids: %d ids exceed the model's max_position_embeddings %d",
                                     T, c->max_position_embeddings));
        goto done;
    }
    const int C = c->hidden_size, nl = c->num_hidden_layers + 1;
    const bool want_layers = hidden_out || compare_ref;
    hidden = malloc((size_t)T * (size_t)C * sizeof *hidden);
    if (want_layers) {
        layers = malloc((size_t)nl * (size_t)T * (size_t)C * sizeof *layers);
        ptr = malloc((size_t)nl * sizeof *ptr);
    }
    if (!hidden || (want_layers && (!layers || !ptr))) {
        rc = cli_fail(attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "forward: out of memory"));
        goto done;
    }
    s = attn_bert_state_init(m, 1, T, &st);
    if (!s && want_layers) {
        for (int l = 0; l < nl; l++) ptr[l] = layers + (size_t)l * (size_t)T * (size_t)C;
        attn_bert_capture cap = {(float *const *)ptr, NULL};
        attn_bert_set_capture(st, &cap);
    }
    const int32_t len = T;
    if (!s) s = attn_bert_forward(m, st, 1, T, ids, NULL, &len, hidden);
    if (!s && want_layers) attn_bert_set_capture(st, NULL);
    if (!s && out) {
        int64_t shape[2] = {T, C};
        s = attn_npy_save_f32(out, hidden, 2, shape);
    }
    if (!s && hidden_out) {
        int64_t shape[3] = {nl, T, C};
        s = attn_npy_save_f32(hidden_out, layers, 3, shape);
    }
    if (s) {
        rc = cli_fail(s);
        goto done;
    }
    if (!out && !compare_ref) {
        printf("model %s: bert, %d layers, hidden %d, %d heads, vocab %d\n", model,
               c->num_hidden_layers, C, c->num_attention_heads, c->vocab_size);
        printf("last hidden states: (%d, %d) float32\n", T, C);
        for (int t = 0; t < T; t++) {
            const float *row = hidden + (size_t)t * (size_t)C;
            double norm = 0;
            for (int k = 0; k < C; k++) norm += (double)row[k] * row[k];
            printf("  position %d: id %d |h| %.4f h[0..3] =", t, (int)ids[t], sqrt(norm));
            for (int k = 0; k < C && k < 4; k++) printf(" %.4f", (double)row[k]);
            printf("\n");
        }
    }
    if (compare_ref) rc = compare(compare_ref, layers, nl, T, C);
done:
    attn_bert_state_free(st);
    attn_bert_model_free(m);
    free(ids), free(hidden), free(layers), free(ptr);
    return rc;
}

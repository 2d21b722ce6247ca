/* cmd_forward.c — `attn forward --model DIR --ids 3,200,17 [--out FILE.npy] ...`: run a model
 * directory (Hugging Face layout: config.json + model.safetensors) on token ids and write its
 * output as a float32 C-order .npy, or print a summary.
 *
 * The model kind comes from config.json's "model_type"; each kind is one branch (run_gpt2 here,
 * cmd_forward_bert in cmd_forward_bert.c) taking the parsed options, so adding a model type is
 * one function and one line in cmd_forward(). */
#include "cmd_forward.h"

#include "cli.h"
#include "cmd_forward_bert.h"
#include "gen_opts.h"

#include "attn_gpt.h"
#include "attn_io.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char forward_usage[] =
    "usage: attn forward --model DIR|FILE.gguf --ids ID,ID,... [--out FILE.npy]\n"
    "                    [--hidden-out FILE.npy] [--compare-hidden REF.npy]\n"
    "\n"
    "Runs the model in DIR (config.json + model.safetensors, as Hugging Face's save_pretrained\n"
    "writes them; the kind comes from config.json's \"model_type\": gpt2 or bert), or the decoder\n"
    "in a GGUF file (general.architecture gpt2, llama, qwen2, qwen3; quantized weights kept\n"
    "quantized: docs/gguf.md), on one sequence of\n"
    "token ids and writes the output as a float32 C-order NumPy file: for a decoder (gpt2) the\n"
    "logits (T, vocab_size), for an encoder (bert) the last hidden states (T, hidden_size).\n"
    "Without --out it prints the shape, (gpt2:) the argmax token of each position, and a few\n"
    "values.\n"
    "\n"
    "options:\n"
    "  --ids LIST              comma-separated decimal token ids (1 to n_positions of them, each\n"
    "                          in [0, vocab_size))\n"
    "  --out FILE.npy          write the logits (T, vocab_size)\n"
    "  --hidden-out FILE.npy   write every layer's hidden states (n_layer + 1, T, n_embd) as\n"
    "                          transformers' output_hidden_states: the embeddings, each block's\n"
    "                          output, the last one after the final LayerNorm\n"
    "  --compare-hidden REF.npy  compare those hidden states with a reference of the same shape\n"
    "                          (e.g. from transformers): per layer the max abs error and max "
    "|ref|,\n"
    "                          the first layer over tolerance flagged; exit status 1 if any "
    "layer's\n"
    "                          error exceeds 1e-4 x its max |ref|\n";

typedef struct {
    const char *model, *ids, *out, *hidden_out, *compare;
} fwd_opts;

/* ---- ids --------------------------------------------------------------------------------- */

/* Parse "3,200,17" into *ids (malloc'd) and *n; syntax errors are usage errors (exit 2). */
static int parse_ids(const char *s, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    if (!*s) return cli_usage_error("--ids: empty list (expected comma-separated token ids)");
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return cli_fail(attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "forward: out of memory"));
    int k = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char tok[32];
        if (len == 0) {
            free(v);
            return cli_usage_error("--ids: empty entry at position %d", k + 1);
        }
        if (len >= sizeof tok) {
            free(v);
            return cli_usage_error("--ids: entry %d ('%.20s...') is not a token id", k + 1, p);
        }
        memcpy(tok, p, len);
        tok[len] = '\0';
        bool digits = true;
        for (size_t i = (tok[0] == '-' || tok[0] == '+') ? 1 : 0; i < len; i++)
            if (tok[i] < '0' || tok[i] > '9') digits = false;
        if (!digits || (len == 1 && (tok[0] == '-' || tok[0] == '+'))) {
            free(v);
            return cli_usage_error("--ids: entry %d ('%s') is not a decimal number", k + 1, tok);
        }
        errno = 0;
        long long x = strtoll(tok, NULL, 10);
        if (x < 0) {
            free(v);
            return cli_usage_error("--ids: entry %d is negative (%s)", k + 1, tok);
        }
        if (errno || x > INT32_MAX) {
            free(v);
            return cli_usage_error("--ids: entry %d (%s) is too large", k + 1, tok);
        }
        v[k++] = (int32_t)x;
        if (!e) break;
        p = e + 1;
    }
    *ids = v;
    *n = k;
    return CLI_EXIT_OK;
}

/* ---- hidden-state comparison -------------------------------------------------------------- */

/* Compare got (n_layers+1, T, C) with the reference file; prints one line per layer. */
static int compare_hidden(const char *path, const float *got, int nl, int T, int C) {
    float *ref = NULL;
    int ndim = 0;
    int64_t shape[ATTN_MAX_DIMS];
    attn_status s = attn_npy_load_f32(path, &ref, &ndim, shape);
    if (s) return cli_fail(s);
    if (ndim != 3 || shape[0] != nl || shape[1] != T || shape[2] != C) {
        char sh[128] = "";
        size_t u = 0;
        for (int i = 0; i < ndim && u < sizeof sh - 24; i++)
            u += (size_t)snprintf(sh + u, sizeof sh - u, "%s%lld", i ? ", " : "",
                                  (long long)shape[i]);
        attn_free(ref);
        return cli_fail(attn_set_error(ATTN_STATUS_FORMAT,
                                       "%s: shape (%s), expected (%d, %d, %d) = (n_layer + 1, T, "
                                       "n_embd)",
                                       path, sh, nl, T, C));
    }
    const double tol = 1e-4;
    int first_bad = -1;
    const size_t per = (size_t)T * C;
    printf("hidden-state comparison with %s (tolerance %.0e x max|ref| per layer)\n", path, tol);
    for (int l = 0; l < nl; l++) {
        double err = 0, mx = 0;
        bool nonfinite = false;
        for (size_t i = 0; i < per; i++) {
            double g = got[l * per + i], r = ref[l * per + i];
            if (!isfinite(g) && isfinite(r)) nonfinite = true;
            double e = fabs(g - r);
            if (e > err || e != e) err = e;
            if (fabs(r) > mx) mx = fabs(r);
        }
        bool ok = !nonfinite && err <= tol * mx;
        const char *what = l == 0        ? "embeddings"
                           : l == nl - 1 ? "ln_f(block output)"
                                         : "block output";
        printf("  layer %2d %-20s max_abs_err=%.3e max|ref|=%.3e rel=%.2e %s%s\n", l, what, err, mx,
               mx > 0 ? err / mx : err, ok ? "ok" : "OVER",
               !ok && first_bad < 0 ? "  <- first layer over tolerance" : "");
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

/* ---- gpt2 ----------------------------------------------------------------------------------- */

static int run_gpt2(const fwd_opts *o) {
    attn_gpt_model *m = NULL;
    attn_gpt_state *st = NULL;
    int32_t *ids = NULL;
    float *logits = NULL, *hidden = NULL;
    int rc = CLI_EXIT_OK, T = 0;
    attn_status s = attn_gpt_load(o->model, &m); /* a directory or a GGUF file */
    if (s) return cli_fail(s);
    const attn_gpt_config *c = &m->cfg;
    rc = parse_ids(o->ids, &ids, &T);
    if (rc) goto done;
    for (int t = 0; t < T; t++)
        if (ids[t] >= c->vocab_size) {
            rc = cli_fail(attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                         "--ids: id %d at position %d is outside the "
                                         "vocabulary [0, %d) of %s",
                                         (int)ids[t], t + 1, c->vocab_size, o->model));
            goto done;
        }
    if (T > c->n_positions) {
        rc = cli_fail(attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                     "--ids: %d ids exceed the model's n_positions %d", T,
                                     c->n_positions));
        goto done;
    }
    const int V = c->vocab_size, C = c->n_embd, nl = c->n_layer + 1;
    logits = malloc((size_t)T * V * sizeof(float));
    bool want_hidden = o->hidden_out || o->compare;
    if (want_hidden) hidden = malloc((size_t)nl * T * C * sizeof(float));
    if (!logits || (want_hidden && !hidden)) {
        rc = cli_fail(attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "forward: out of memory"));
        goto done;
    }
    s = attn_gpt_state_init(m, 1, T, &st);
    if (!s && want_hidden) {
        attn_gpt_capture cap = {hidden, NULL};
        attn_gpt_set_capture(st, &cap);
    }
    if (!s) s = attn_gpt_forward(m, st, 1, T, ids, logits);
    if (s) {
        rc = cli_fail(s);
        goto done;
    }
    if (o->out) {
        int64_t shape[2] = {T, V};
        s = attn_npy_save_f32(o->out, logits, 2, shape);
        if (s) {
            rc = cli_fail(s);
            goto done;
        }
    }
    if (o->hidden_out) {
        int64_t shape[3] = {nl, T, C};
        s = attn_npy_save_f32(o->hidden_out, hidden, 3, shape);
        if (s) {
            rc = cli_fail(s);
            goto done;
        }
    }
    if (!o->out && !o->compare) {
        printf("model %s: %s, %d layers, n_embd %d, %d heads, vocab %d\n", o->model,
               attn_gpt_arch_name(c->arch), c->n_layer, C, c->n_head, V);
        printf("logits: (%d, %d) float32\n", T, V);
        for (int t = 0; t < T; t++) {
            const float *row = logits + (size_t)t * V;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (row[v] > row[best]) best = v;
            printf("  position %d: id %d -> argmax %d (logit %.4f); logits[0..3] =", t, (int)ids[t],
                   best, (double)row[best]);
            for (int v = 0; v < V && v < 4; v++) printf(" %.4f", (double)row[v]);
            printf("\n");
        }
    }
    if (o->compare) rc = compare_hidden(o->compare, hidden, nl, T, C);
done:
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
    free(ids);
    free(logits);
    free(hidden);
    return rc;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

int cmd_forward(int argc, char **argv) {
    fwd_opts o;
    memset(&o, 0, sizeof o);
    for (int i = 1; i < argc;) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **dst = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(forward_usage, stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--model")) {
            dst = &o.model;
        } else if (!strcmp(a, "--ids")) {
            dst = &o.ids;
        } else if (!strcmp(a, "--out")) {
            dst = &o.out;
        } else if (!strcmp(a, "--hidden-out")) {
            dst = &o.hidden_out;
        } else if (!strcmp(a, "--compare-hidden")) {
            dst = &o.compare;
        } else {
            return cli_usage_error("forward: unknown option '%s'", a);
        }
        if (!v) return cli_usage_error("forward: %s needs a value", a);
        *dst = v;
        i += 2;
    }
    if (!o.model) return cli_usage_error("forward: --model DIR is required");
    if (!o.ids) return cli_usage_error("forward: --ids LIST is required");

    if (attn_gpt_is_gguf_path(o.model)) { /* a GGUF file: its general.architecture */
        char arch[64];
        attn_status s = cli_gguf_arch(o.model, arch, sizeof arch);
        if (s) return cli_fail(s);
        if (!strcmp(arch, "bert"))
            return cmd_forward_bert(o.model, o.ids, o.out, o.hidden_out, o.compare);
        return run_gpt2(&o);
    }
    char path[4096];
    int k = snprintf(path, sizeof path, "%s/config.json", o.model);
    if (k < 0 || (size_t)k >= sizeof path)
        return cli_fail(attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "--model: path too long"));
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root) {
        if (err.line < 0)
            return cli_fail(
                attn_set_error(ATTN_STATUS_IO, "%s: cannot read model config: %s", path, err.text));
        return cli_fail(attn_set_error(ATTN_STATUS_FORMAT, "%s:%d:%d: invalid JSON: %s", path,
                                       err.line, err.column, err.text));
    }
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    char type[64];
    snprintf(type, sizeof type, "%s", mt ? mt : "");
    json_decref(root);
    if (!*type)
        return cli_fail(attn_set_error(ATTN_STATUS_FORMAT,
                                       "%s: no \"model_type\" string (expected \"gpt2\")", path));
    if (!strcmp(type, "gpt2")) return run_gpt2(&o);
    if (!strcmp(type, "bert"))
        return cmd_forward_bert(o.model, o.ids, o.out, o.hidden_out, o.compare);
    return cli_fail(attn_set_error(ATTN_STATUS_UNSUPPORTED,
                                   "%s: model_type \"%s\" is not supported by attn forward "
                                   "(supported: gpt2, bert)",
                                   path, type));
}

/* cmd_explain.c — `attn explain`: the article's self-attention walk-through, for a person (text)
 * or a program (--json). */
#include "cli.h"
#include "cmd_explain_model.h"

#include "attn_explain.h"
#include "attn_io.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EX_MAX_T 4096

typedef struct {
    int T, dm, dk;
    float *x, *wq, *wk, *wv; /* (T, dm), (dm, dk) x3 */
    char **tokens;           /* T labels */
    char source[512];        /* what the input is, for the heading */
} ex_input;

static void input_free(ex_input *in) {
    attn_free(in->x), attn_free(in->wq), attn_free(in->wk), attn_free(in->wv);
    if (in->tokens)
        for (int i = 0; i < in->T; i++) free(in->tokens[i]);
    free(in->tokens);
    memset(in, 0, sizeof *in);
}

/* Fixed-seed uniform numbers in [-1, 1): the built-in example must print the same every time. */
static float ex_uniform(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((double)(*s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

enum { EX_SEED = 2017 };

static attn_status builtin_input(ex_input *in) {
    static const char *words[] = {"Knowledge", "is", "power"};
    in->T = 3, in->dm = 4, in->dk = 3;
    in->x = attn_alloc(sizeof(float) * 12);
    in->wq = attn_alloc(sizeof(float) * 12);
    in->wk = attn_alloc(sizeof(float) * 12);
    in->wv = attn_alloc(sizeof(float) * 12);
    in->tokens = calloc(3, sizeof(char *));
    if (!in->x || !in->wq || !in->wk || !in->wv || !in->tokens) return ATTN_STATUS_OUT_OF_MEMORY;
    /* splitmix64 of the seed, so xorshift does not start from a low-entropy state */
    uint64_t s = (uint64_t)EX_SEED + 0x9E3779B97F4A7C15ull;
    s = (s ^ (s >> 30)) * 0xBF58476D1CE4E5B9ull;
    s = (s ^ (s >> 27)) * 0x94D049BB133111EBull;
    s ^= s >> 31;
    float *all[] = {in->x, in->wq, in->wk, in->wv};
    for (int m = 0; m < 4; m++)
        for (int i = 0; i < 12; i++) all[m][i] = roundf(ex_uniform(&s) * 100.0f) / 100.0f;
    for (int i = 0; i < 3; i++)
        if (!(in->tokens[i] = strdup(words[i]))) return ATTN_STATUS_OUT_OF_MEMORY;
    snprintf(in->source, sizeof in->source,
             "built-in example \"Knowledge is power\": x = one made-up embedding per word, "
             "W_Q, W_K, W_V drawn with seed %d",
             EX_SEED);
    return ATTN_STATUS_OK;
}

static attn_status load_2d(attn_st_file *f, const char *path, const char *name, int *rows,
                           int *cols, float **data) {
    const attn_st_tensor *t = attn_st_find(f, name);
    if (!t)
        return attn_set_error(ATTN_STATUS_NOT_FOUND,
                         "%s: tensor '%s' not found (explain needs x (T, d_model) and w_q, w_k, "
                         "w_v (d_model, d_k))",
                         path, name);
    if (t->ndim != 2 || t->shape[0] <= 0 || t->shape[1] <= 0)
        return attn_set_error(ATTN_STATUS_FORMAT,
                         "%s: tensor '%s' must be 2-D with positive sizes, has %d dimension(s)",
                         path, name, t->ndim);
    if (t->shape[0] > 65536 || t->shape[1] > 65536)
        return attn_set_error(ATTN_STATUS_TOO_LARGE, "%s: tensor '%s' is too large for explain (%lld x %lld)",
                         path, name, (long long)t->shape[0], (long long)t->shape[1]);
    *rows = (int)t->shape[0], *cols = (int)t->shape[1];
    return attn_st_load_f32(f, name, data, NULL);
}

/* Token labels from the optional metadata "tokens" (JSON array of T strings). */
static attn_status file_tokens(attn_st_file *f, const char *path, ex_input *in) {
    in->tokens = calloc((size_t)in->T, sizeof(char *));
    if (!in->tokens) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    const char *meta = attn_st_metadata(f, "tokens");
    json_t *arr = NULL;
    if (meta) {
        json_error_t err;
        arr = json_loads(meta, 0, &err);
        if (!json_is_array(arr) || json_array_size(arr) != (size_t)in->T) {
            json_decref(arr);
            return attn_set_error(ATTN_STATUS_FORMAT,
                             "%s: metadata 'tokens' must be a JSON array of %d strings", path,
                             in->T);
        }
    }
    attn_status s = ATTN_STATUS_OK;
    for (int i = 0; i < in->T && !s; i++) {
        char buf[32];
        const char *label = buf;
        snprintf(buf, sizeof buf, "#%d", i);
        if (arr) {
            label = json_string_value(json_array_get(arr, (size_t)i));
            if (!label)
                s = attn_set_error(ATTN_STATUS_FORMAT, "%s: metadata 'tokens'[%d] is not a string",
                              path, i);
        }
        if (!s && !(in->tokens[i] = strdup(label)))
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    json_decref(arr);
    return s;
}

static attn_status file_input(const char *path, ex_input *in) {
    attn_st_file *f;
    attn_status s = attn_st_open(path, &f);
    if (s) return s;
    int r[4], c[4];
    s = load_2d(f, path, "x", &r[0], &c[0], &in->x);
    if (!s) s = load_2d(f, path, "w_q", &r[1], &c[1], &in->wq);
    if (!s) s = load_2d(f, path, "w_k", &r[2], &c[2], &in->wk);
    if (!s) s = load_2d(f, path, "w_v", &r[3], &c[3], &in->wv);
    if (!s) {
        in->T = r[0], in->dm = c[0], in->dk = c[1];
        if (in->T > EX_MAX_T)
            s = attn_set_error(ATTN_STATUS_TOO_LARGE, "%s: x has %d tokens; explain shows at most %d",
                          path, in->T, EX_MAX_T);
        for (int m = 1; m < 4 && !s; m++)
            if (r[m] != in->dm || c[m] != in->dk)
                s = attn_set_error(ATTN_STATUS_FORMAT,
                              "%s: tensor '%s' has shape (%d, %d), expected (d_model=%d, d_k=%d) "
                              "to match x and w_q",
                              path, m == 2 ? "w_k" : m == 3 ? "w_v" : "w_q", r[m], c[m], in->dm,
                              in->dk);
    }
    if (!s) s = file_tokens(f, path, in);
    if (!s)
        snprintf(in->source, sizeof in->source, "%s: T=%d tokens, d_model=%d, d_k=%d", path,
                 in->T, in->dm, in->dk);
    attn_st_close(f);
    return s;
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static json_t *json_matrix(const float *m, int rows, int cols) {
    json_t *a = json_array();
    for (int i = 0; i < rows; i++) {
        json_t *row = json_array();
        for (int j = 0; j < cols; j++) {
            float v = m[(size_t)i * cols + j];
            json_array_append_new(row, isfinite(v) ? json_real(v) : json_null());
        }
        json_array_append_new(a, row);
    }
    return a;
}

static json_t *json_pass(const attn_explain_pass *p, int T, int dk, const char *mask) {
    json_t *o = json_object();
    json_object_set_new(o, "mask", json_string(mask));
    json_object_set_new(o, "q", json_matrix(p->q, T, dk));
    json_object_set_new(o, "k", json_matrix(p->k, T, dk));
    json_object_set_new(o, "v", json_matrix(p->v, T, dk));
    json_object_set_new(o, "scores", json_matrix(p->scores, T, T));
    json_object_set_new(o, "scaled", json_matrix(p->scaled, T, T));
    json_object_set_new(o, "weights", json_matrix(p->weights, T, T));
    json_object_set_new(o, "output", json_matrix(p->output, T, dk));
    return o;
}

static int print_json(const ex_input *in, const attn_explain_result *r) {
    json_t *root = json_object();
    json_t *toks = json_array();
    for (int i = 0; i < in->T; i++) json_array_append_new(toks, json_string(in->tokens[i]));
    json_object_set_new(root, "tokens", toks);
    json_object_set_new(root, "d_model", json_integer(in->dm));
    json_object_set_new(root, "d_k", json_integer(in->dk));
    json_object_set_new(root, "x", json_matrix(in->x, in->T, in->dm));
    json_object_set_new(root, "encoder", json_pass(&r->encoder, in->T, in->dk, "none"));
    json_object_set_new(root, "decoder", json_pass(&r->decoder, in->T, in->dk, "causal"));
    char *text = json_dumps(root, JSON_REAL_PRECISION(9) | JSON_COMPACT);
    json_decref(root);
    if (!text) {
        fprintf(stderr, "attn: error: out of memory writing JSON\n");
        return CLI_EXIT_FAIL;
    }
    puts(text);
    free(text);
    return CLI_EXIT_OK;
}

/* ---- text ---------------------------------------------------------------------------------- */

static int label_width(const ex_input *in) {
    int w = 6;
    for (int i = 0; i < in->T; i++) {
        int n = (int)strlen(in->tokens[i]);
        if (n > w) w = n;
    }
    return w > 16 ? 16 : w;
}

static void print_vec(const float *v, int n) {
    putchar('[');
    for (int j = 0; j < n; j++) printf("%s%7.3f", j ? " " : "", v[j]);
    putchar(']');
}

/* Matrix cells are as wide as the longest token label, between 7 and 12 characters. */
static int cell_width(const ex_input *in) {
    int w = 7;
    for (int i = 0; i < in->T; i++) {
        int n = (int)strlen(in->tokens[i]);
        if (n > w) w = n;
    }
    return w > 12 ? 12 : w;
}

static void print_cols(const ex_input *in) {
    int cw = cell_width(in);
    for (int j = 0; j < in->T; j++) printf(" %*.*s", cw, cw, in->tokens[j]);
}

static void print_cell(const ex_input *in, float v) {
    int cw = cell_width(in);
    if (isinf(v) && v < 0)
        printf(" %*s", cw, "-inf");
    else
        printf(" %*.3f", cw, v);
}

/* Encoder and decoder matrices (T, T) side by side. */
static void print_pair(const ex_input *in, const float *enc, const float *dec) {
    int lw = label_width(in), T = in->T, cw = cell_width(in);
    printf("  %-*s  %-*s    %s\n", lw, "", T * (cw + 1), "encoder (all positions)",
           "decoder (positions <= i)");
    printf("  %-*s ", lw, "i \\ j");
    print_cols(in);
    printf("    ");
    print_cols(in);
    putchar('\n');
    for (int i = 0; i < T; i++) {
        printf("  %-*.*s ", lw, lw, in->tokens[i]);
        for (int j = 0; j < T; j++) print_cell(in, enc[(size_t)i * T + j]);
        printf("    ");
        for (int j = 0; j < T; j++) print_cell(in, dec[(size_t)i * T + j]);
        putchar('\n');
    }
}

static void print_mix(const ex_input *in, const float *w, int i, int upto) {
    int shown = 0;
    for (int j = 0; j <= upto; j++) {
        float a = w[(size_t)i * in->T + j];
        if (in->T > 8 && a < 0.01f) continue; /* long inputs: keep the line readable */
        printf("%s%.2f·v(%s)", shown++ ? " + " : "", a, in->tokens[j]);
    }
    if (!shown) printf("0");
}

static int print_text(const ex_input *in, const attn_explain_result *r) {
    const int T = in->T, dk = in->dk, lw = label_width(in);
    const attn_explain_pass *e = &r->encoder, *d = &r->decoder;
    printf("Self-attention, step by step\n%s\n\n", in->source);

    printf("Step 0. Each token is a vector x_i of d_model=%d numbers\n", in->dm);
    for (int i = 0; i < T; i++) {
        printf("  %-*.*s  ", lw, lw, in->tokens[i]);
        print_vec(in->x + (size_t)i * in->dm, in->dm);
        putchar('\n');
    }

    printf("\nStep 1. Query, key and value of each token, with trained matrices (d_model x d_k):\n"
           "        q_i = x_i·W_Q    k_i = x_i·W_K    v_i = x_i·W_V        (d_k=%d)\n",
           dk);
    for (int i = 0; i < T; i++) {
        printf("  %-*.*s  q=", lw, lw, in->tokens[i]);
        print_vec(e->q + (size_t)i * dk, dk);
        printf("  k=");
        print_vec(e->k + (size_t)i * dk, dk);
        printf("  v=");
        print_vec(e->v + (size_t)i * dk, dk);
        putchar('\n');
    }

    printf("\nStep 2. Score of position j for token i: score(i, j) = q_i · k_j\n"
           "        (the same numbers in both; the decoder will not use those with j > i)\n");
    print_pair(in, e->scores, d->scores);

    printf("\nStep 3. Divide by sqrt(d_k) = %.4f so large d_k does not saturate the softmax.\n"
           "        The decoder's causal mask sets every j > i to -inf: a token cannot look ahead.\n",
           sqrt((double)dk));
    print_pair(in, e->scaled, d->scaled);

    printf("\nStep 4. Softmax over each row: the attention weights (each row sums to 1)\n");
    print_pair(in, e->weights, d->weights);

    printf("\nStep 5. Output z_i = sum over j of weight(i, j) · v_j\n");
    for (int i = 0; i < T; i++) {
        printf("  %-*.*s  encoder z=", lw, lw, in->tokens[i]);
        print_vec(e->output + (size_t)i * dk, dk);
        printf("  = ");
        print_mix(in, e->weights, i, T - 1);
        printf("\n  %-*s  decoder z=", lw, "");
        print_vec(d->output + (size_t)i * dk, dk);
        printf("  = ");
        print_mix(in, d->weights, i, i);
        putchar('\n');
    }
    printf("\nThe encoder (BERT) lets every token attend to every other, in both directions;\n"
           "the decoder (GPT) lets token i attend only to tokens 1..i, so '%s' sees only itself\n"
           "while the last token sees the whole sentence in both. Distance does not weaken\n"
           "attention: any two positions are one dot product apart.\n",
           in->tokens[0]);
    return CLI_EXIT_OK;
}

int cmd_explain(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--model")) return cmd_explain_model(argc, argv);
    const char *path = NULL, *png = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--png")) {
            if (i + 1 >= argc) return cli_usage_error("explain: --png needs a file name");
            png = argv[++i];
        }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: attn explain [FILE.safetensors] [--json] [--png OUT.png]\n"
                 "       attn explain --model DIR|FILE.gguf TEXT [--layer L] [--head H] [--query T]\n"
                 "                    [--find TOKEN] [--compare-masks] [--json] [--png F] [--html F]\n"
                 "  (a real model: 'attn explain --model DIR --help')\n"
                 "  FILE: F32 tensors x (T, d_model), w_q, w_k, w_v (d_model, d_k); optional\n"
                 "  metadata \"tokens\": JSON array of T strings. Without FILE: \"Knowledge is "
                 "power\".\n"
                 "  --png OUT.png also draws the scores and softmax weights of the encoder and\n"
                 "  the decoder as heatmaps with their values (font: $ATTN_FONT or Debian's\n"
                 "  fonts-noto-cjk).");
            return CLI_EXIT_OK;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0')
            return cli_usage_error("explain: unknown option '%s'", argv[i]);
        else if (path)
            return cli_usage_error("explain: more than one FILE ('%s' and '%s')", path, argv[i]);
        else
            path = argv[i];
    }
    ex_input in;
    memset(&in, 0, sizeof in);
    attn_status s = path ? file_input(path, &in) : builtin_input(&in);
    if (s) {
        input_free(&in);
        return cli_fail(s);
    }
    attn_explain_result r;
    s = attn_explain_compute(in.T, in.dm, in.dk, in.x, in.wq, in.wk, in.wv, &r);
    if (s) {
        input_free(&in);
        return cli_fail(s);
    }
    if (png && (s = attn_explain_write_png(&r, (const char *const *)in.tokens, png, NULL))) {
        attn_explain_free(&r);
        input_free(&in);
        return cli_fail(s);
    }
    int rc = json ? print_json(&in, &r) : print_text(&in, &r);
    attn_explain_free(&r);
    input_free(&in);
    return rc;
}

/* cmd_embed.c — `attn embed`, `attn similarity` and `attn fill-mask`: the command-line side of
 * attn_embed.h (the library does the work; this file parses options, reads lines and prints). */
#include "cmd_embed.h"

#include "cli.h"

#include "attn_embed.h"
#include "attn_io.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char embed_usage[] =
    "usage: attn embed --model DIR [--out FILE.npy | --jsonl] [--batch N] [--precision P]\n"
    "                  [TEXT...]\n"
    "\n"
    "Sentence embeddings of each TEXT, or of each line of standard input, in input order.\n"
    "DIR is a sentence-transformers model directory (e.g. models/all-MiniLM-L6-v2: pooling and\n"
    "normalization as its modules.json and 1_Pooling/config.json say, max_seq_length from\n"
    "sentence_bert_config.json) or a plain Hugging Face BERT directory (config.json,\n"
    "model.safetensors, tokenizer.json: mean pooling, no normalization). Texts are stripped and\n"
    "truncated to max_seq_length tokens as sentence-transformers does; an empty line is embedded\n"
    "like the empty string (as sentence-transformers does), so output row i is input line i.\n"
    "\n"
    "options:\n"
    "  --out FILE       write a (N, dim) float32 .npy (default: JSON lines on standard output)\n"
    "  --jsonl          JSON lines {\"index\": i, \"embedding\": [...]} (to FILE with --out)\n"
    "  --batch N        sentences per forward pass (default 32; results do not depend on it)\n"
    "  --max-seq-length N   override the model's maximum tokens per sentence\n"
    "  --pooling MODE   override: mean, cls, max or mean_sqrt_len\n"
    "  --normalize / --no-normalize   override the L2 normalization\n"
    "  --precision P    f32 (default: sentence-transformers' numbers) or bf16: dense layers in\n"
    "                   bfloat16 (AVX512-BF16 CPUs; about 1.5-2x faster, cosine to f32 >= 0.9999)\n";

static const char similarity_usage[] =
    "usage: attn similarity --model DIR QUERY [--top-k K] [--jsonl] < CANDIDATES\n"
    "\n"
    "Ranks the lines of standard input (empty and blank lines are skipped) by the cosine\n"
    "similarity of their embeddings (as 'attn embed' computes them) to QUERY's, highest first,\n"
    "and prints rank, score and text separated by tabs.\n"
    "\n"
    "options:\n"
    "  --top-k K        print the K best (default 10; 0 = all)\n"
    "  --jsonl          JSON lines {\"rank\", \"index\" (0-based candidate line), \"score\", \"text\"}\n"
    "  --batch N        sentences per forward pass (default 32)\n"
    "  --precision P    f32 (default: sentence-transformers' numbers) or bf16: dense layers in\n"
    "                   bfloat16 (AVX512-BF16 CPUs; about 1.5-2x faster, cosine to f32 >= 0.9999)\n";

static const char fill_mask_usage[] =
    "usage: attn fill-mask --model DIR [--top-k K] [--jsonl] TEXT\n"
    "\n"
    "Predicts the token at each [MASK] of TEXT with a BertForMaskedLM directory (config.json,\n"
    "model.safetensors with the cls.predictions head, tokenizer.json), as transformers'\n"
    "fill-mask pipeline: for each mask the K most probable tokens (softmax over the vocabulary),\n"
    "with the token and the filled sentence.\n"
    "\n"
    "options:\n"
    "  --top-k K        candidates per mask (default 5)\n"
    "  --jsonl          JSON lines {\"mask\", \"position\", \"rank\", \"score\", \"token\",\n"
    "                   \"token_str\", \"sequence\"}\n"
    "  --precision P    f32 (default: transformers' numbers) or bf16: dense layers in\n"
    "                   bfloat16 (AVX512-BF16 CPUs; about 1.5-2x faster, probabilities differ from f32)\n";

/* ---- input lines ------------------------------------------------------------------------------ */

typedef struct {
    char *buf;
    char **line;
    size_t *len;
    size_t n;
} lines_t;

static void lines_free(lines_t *l) {
    free(l->buf), free(l->line), free(l->len);
    memset(l, 0, sizeof *l);
}

/* All of standard input, split on '\n' (a last line without '\n' counts; nothing after the last
 * '\n' is not a line). Each line must be valid UTF-8. */
static attn_status read_lines(FILE *fp, lines_t *l) {
    memset(l, 0, sizeof *l);
    size_t cap = 1 << 16, n = 0;
    l->buf = malloc(cap);
    if (!l->buf) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    for (;;) {
        if (n == cap) {
            char *nb = cap > ((size_t)1 << 40) ? NULL : realloc(l->buf, cap * 2);
            if (!nb) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "standard input: out of memory");
            l->buf = nb, cap *= 2;
        }
        size_t k = fread(l->buf + n, 1, cap - n, fp);
        n += k;
        if (k == 0) break;
    }
    if (ferror(fp)) return attn_set_error(ATTN_STATUS_IO, "standard input: read error");
    size_t count = 0;
    for (size_t i = 0; i < n; i++) count += l->buf[i] == '\n';
    if (n && l->buf[n - 1] != '\n') count++;
    l->line = malloc((count ? count : 1) * sizeof *l->line);
    l->len = malloc((count ? count : 1) * sizeof *l->len);
    if (!l->line || !l->len) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    size_t start = 0;
    for (size_t i = 0; i <= n && l->n < count; i++) {
        if (i == n || l->buf[i] == '\n') {
            l->line[l->n] = l->buf + start;
            l->len[l->n] = i - start;
            size_t bad = attn_embed_utf8_check(l->buf + start, i - start);
            if (bad < i - start)
                return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                      "<stdin>:%zu: invalid UTF-8 at byte %zu (0x%02X)", l->n + 1,
                                      bad + 1, (unsigned)(unsigned char)l->buf[start + bad]);
            l->n++;
            start = i + 1;
        }
    }
    return ATTN_STATUS_OK;
}

static attn_status check_arg(const char *s, int index) {
    size_t n = strlen(s), bad = attn_embed_utf8_check(s, n);
    if (bad < n)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "argument %d: invalid UTF-8 at byte %zu (0x%02X)", index, bad + 1,
                              (unsigned)(unsigned char)s[bad]);
    return ATTN_STATUS_OK;
}

/* ---- shared options ---------------------------------------------------------------------------- */

typedef struct {
    const char *model, *out;
    bool jsonl;
    int top_k;
    attn_embed_options eo;
    const char **pos; /* positional arguments */
    int npos;
} opts_t;

/* Returns -1 to go on, else the exit code. which: 0 embed, 1 similarity, 2 fill-mask. */
static int parse(int argc, char **argv, int which, opts_t *o) {
    static const char *const names[] = {"embed", "similarity", "fill-mask"};
    static const char *const usages[] = {embed_usage, similarity_usage, fill_mask_usage};
    const char *cmd = names[which];
    memset(o, 0, sizeof *o);
    o->eo = attn_embed_default_options();
    o->top_k = which == 2 ? 5 : 10;
    o->pos = malloc((size_t)argc * sizeof *o->pos);
    if (!o->pos) return cli_fail(attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory"));
    bool dashdash = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (dashdash || a[0] != '-' || !strcmp(a, "-")) {
            o->pos[o->npos++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            dashdash = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usages[which], stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--jsonl")) {
            o->jsonl = true;
            continue;
        }
        if (which == 0 && (!strcmp(a, "--normalize") || !strcmp(a, "--no-normalize"))) {
            o->eo.normalize = !strcmp(a, "--normalize");
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return cli_usage_error("%s: %s needs a value", cmd, a);
        i++;
        if (!strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "--out") && which == 0) {
            o->out = v;
        } else if (!strcmp(a, "--precision")) {
            attn_precision p;
            if (attn_precision_parse(v, &p))
                return cli_usage_error("%s: --precision must be f32 or bf16, got '%s'", cmd, v);
            o->eo.precision = (int)p;
        } else if (!strcmp(a, "--batch") && which != 2) {
            if (!cli_parse_int(v, 1, 65536, &o->eo.batch_size))
                return cli_usage_error("%s: --batch needs a number from 1 to 65536, got '%s'", cmd, v);
        } else if (!strcmp(a, "--top-k") && which != 0) {
            if (!cli_parse_int(v, which == 2 ? 1 : 0, 1000000000, &o->top_k))
                return cli_usage_error("%s: --top-k needs a whole number >= %d, got '%s'", cmd,
                                       which == 2 ? 1 : 0, v);
        } else if (!strcmp(a, "--max-seq-length") && which == 0) {
            if (!cli_parse_int(v, 2, 1000000, &o->eo.max_seq_length))
                return cli_usage_error("%s: --max-seq-length needs a number >= 2, got '%s'", cmd, v);
        } else if (!strcmp(a, "--pooling") && which == 0) {
            static const char *const pm[] = {"mean", "cls", "max", "mean_sqrt_len"};
            o->eo.pooling = -1;
            for (int k = 0; k < 4; k++)
                if (!strcmp(v, pm[k])) o->eo.pooling = k;
            if (o->eo.pooling < 0)
                return cli_usage_error("%s: --pooling must be mean, cls, max or mean_sqrt_len, "
                                       "got '%s'", cmd, v);
        } else {
            return cli_usage_error("%s: unknown option '%s'", cmd, a);
        }
    }
    if (!o->model) return cli_usage_error("%s: --model DIR is required", cmd);
    for (int i = 0; i < o->npos; i++) {
        attn_status s = check_arg(o->pos[i], i + 1);
        if (s) return cli_fail(s);
    }
    return -1;
}

/* ---- embed ------------------------------------------------------------------------------------- */

static int write_jsonl(FILE *fp, const float *emb, size_t n, int dim) {
    for (size_t i = 0; i < n; i++) {
        fprintf(fp, "{\"index\": %zu, \"embedding\": [", i);
        for (int d = 0; d < dim; d++)
            fprintf(fp, d ? ", %.9g" : "%.9g", (double)emb[i * (size_t)dim + (size_t)d]);
        fputs("]}\n", fp);
    }
    return ferror(fp) ? -1 : 0;
}

int cmd_embed(int argc, char **argv) {
    opts_t o;
    int rc = parse(argc, argv, 0, &o);
    lines_t in;
    memset(&in, 0, sizeof in);
    attn_embed *e = NULL;
    float *emb = NULL;
    if (rc >= 0) goto done;
    const char **texts = o.pos;
    size_t *lens = NULL, n = (size_t)o.npos;
    attn_status s = ATTN_STATUS_OK;
    if (!o.npos) {
        if ((s = read_lines(stdin, &in))) goto fail;
        texts = (const char **)in.line, lens = in.len, n = in.n;
    }
    if ((s = attn_embed_load(o.model, &o.eo, &e))) goto fail;
    const int dim = attn_embed_get_info(e)->dim;
    emb = malloc((n ? n : 1) * (size_t)dim * sizeof *emb);
    if (!emb) {
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    if ((s = attn_embed_encode(e, n, texts, lens, emb))) goto fail;
    if (o.out && !o.jsonl) {
        int64_t shape[2] = {(int64_t)n, dim};
        if ((s = attn_npy_save_f32(o.out, emb, 2, shape))) goto fail;
    } else {
        FILE *fp = o.out ? fopen(o.out, "w") : stdout;
        if (!fp) {
            s = attn_set_error(ATTN_STATUS_IO, "%s: cannot open for writing", o.out);
            goto fail;
        }
        int bad = write_jsonl(fp, emb, n, dim);
        if (o.out && fclose(fp) != 0) bad = -1;
        if (bad) {
            s = attn_set_error(ATTN_STATUS_IO, "%s: write error", o.out ? o.out : "standard output");
            goto fail;
        }
    }
    rc = CLI_EXIT_OK;
    goto done;
fail:
    rc = cli_fail(s);
done:
    free(emb);
    attn_embed_free(e);
    lines_free(&in);
    free(o.pos);
    return rc;
}

/* ---- similarity -------------------------------------------------------------------------------- */

int cmd_similarity(int argc, char **argv) {
    opts_t o;
    int rc = parse(argc, argv, 1, &o);
    lines_t in;
    memset(&in, 0, sizeof in);
    attn_embed *e = NULL;
    float *emb = NULL, *scores = NULL;
    size_t *order = NULL, *cidx = NULL;
    const char **texts = NULL;
    size_t *lens = NULL;
    if (rc >= 0) goto done;
    attn_status s = ATTN_STATUS_OK;
    if (o.npos != 1) {
        rc = cli_usage_error("similarity: exactly one QUERY argument is needed (got %d); the "
                             "candidates are read from standard input", o.npos);
        goto done;
    }
    if ((s = read_lines(stdin, &in))) goto fail;
    /* the query, then the non-empty candidate lines */
    texts = malloc((in.n + 1) * sizeof *texts);
    lens = malloc((in.n + 1) * sizeof *lens);
    cidx = malloc((in.n + 1) * sizeof *cidx);
    if (!texts || !lens || !cidx) {
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    size_t n = 0;
    texts[0] = o.pos[0], lens[0] = strlen(o.pos[0]);
    for (size_t i = 0; i < in.n; i++) {
        bool blank = true;
        for (size_t k = 0; k < in.len[i] && blank; k++)
            blank = in.line[i][k] == ' ' || in.line[i][k] == '\t' || in.line[i][k] == '\r';
        if (blank) continue;
        texts[1 + n] = in.line[i], lens[1 + n] = in.len[i], cidx[n] = i, n++;
    }
    if ((s = attn_embed_load(o.model, &o.eo, &e))) goto fail;
    const int dim = attn_embed_get_info(e)->dim;
    emb = malloc((n + 1) * (size_t)dim * sizeof *emb);
    scores = malloc((n ? n : 1) * sizeof *scores);
    order = malloc((n ? n : 1) * sizeof *order);
    if (!emb || !scores || !order) {
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    if ((s = attn_embed_encode(e, n + 1, texts, lens, emb))) goto fail;
    if ((s = attn_embed_rank(dim, emb, n, emb + dim, scores, order))) goto fail;
    size_t k = o.top_k == 0 || (size_t)o.top_k > n ? n : (size_t)o.top_k;
    for (size_t r = 0; r < k; r++) {
        size_t c = order[r];
        if (o.jsonl) {
            json_t *j = json_pack("{s:I, s:I, s:f, s:s%}", "rank", (json_int_t)(r + 1), "index",
                                  (json_int_t)cidx[c], "score", (double)scores[c], "text",
                                  texts[1 + c], lens[1 + c]);
            char *line = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
            json_decref(j);
            if (!line) {
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
                goto fail;
            }
            puts(line);
            free(line);
        } else {
            printf("%zu\t%.6f\t%.*s\n", r + 1, (double)scores[c], (int)lens[1 + c], texts[1 + c]);
        }
    }
    if (fflush(stdout) != 0) {
        s = attn_set_error(ATTN_STATUS_IO, "standard output: write error");
        goto fail;
    }
    rc = CLI_EXIT_OK;
    goto done;
fail:
    rc = cli_fail(s);
done:
    free(emb), free(scores), free(order), free(cidx), free(texts), free(lens);
    attn_embed_free(e);
    lines_free(&in);
    free(o.pos);
    return rc;
}

/* ---- fill-mask --------------------------------------------------------------------------------- */

int cmd_fill_mask(int argc, char **argv) {
    opts_t o;
    int rc = parse(argc, argv, 2, &o);
    attn_embed *e = NULL;
    attn_embed_fill_result r;
    memset(&r, 0, sizeof r);
    if (rc >= 0) goto done;
    attn_status s = ATTN_STATUS_OK;
    if (o.npos != 1) {
        rc = cli_usage_error("fill-mask: exactly one TEXT argument is needed (got %d)", o.npos);
        goto done;
    }
    if ((s = attn_embed_load(o.model, &o.eo, &e))) goto fail;
    if ((s = attn_embed_fill_mask(e, o.pos[0], SIZE_MAX, o.top_k, &r))) goto fail;
    for (int m = 0; m < r.n_masks; m++) {
        if (!o.jsonl && r.n_masks > 1)
            printf("%smask %d of %d (token %d):\n", m ? "\n" : "", m + 1, r.n_masks,
                   (int)r.positions[m]);
        for (int k = 0; k < r.top_k; k++) {
            const attn_embed_fill_candidate *c = &r.cands[(size_t)m * (size_t)r.top_k + (size_t)k];
            if (o.jsonl) {
                json_t *j = json_pack("{s:i, s:i, s:i, s:f, s:i, s:s, s:s}", "mask", m + 1,
                                      "position", (int)r.positions[m], "rank", k + 1, "score",
                                      (double)c->score, "token", (int)c->token, "token_str",
                                      c->token_str, "sequence", c->sequence);
                char *line = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
                json_decref(j);
                if (!line) {
                    s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
                    goto fail;
                }
                puts(line);
                free(line);
            } else {
                printf("%2d  %.6f  %-16s %s\n", k + 1, (double)c->score, c->token_str, c->sequence);
            }
        }
    }
    if (fflush(stdout) != 0) {
        s = attn_set_error(ATTN_STATUS_IO, "standard output: write error");
        goto fail;
    }
    rc = CLI_EXIT_OK;
    goto done;
fail:
    rc = cli_fail(s);
done:
    attn_embed_fill_result_free(&r);
    attn_embed_free(e);
    free(o.pos);
    return rc;
}

/* cmd_train_bert.c — `attn train --arch bert`: masked-LM pre-training of a BERT model
 * (attn_bert.h) on text lines, as BERT / transformers' DataCollatorForLanguageModeling do it:
 * 15% of the non-special tokens chosen, 80% of those replaced by [MASK], 10% by a random id, 10%
 * kept; cross-entropy on the chosen tokens; AdamW (no weight decay on biases and LayerNorm
 * weights, the 1-D tensors) with linear warmup and linear decay to 0
 * (get_linear_schedule_with_warmup), gradient clipping, dropout.
 *
 * Data: each line of FILE (split on '\n', a trailing '\r' dropped), or one TAB-separated column of
 * it (--column K), tokenized with the special tokens and truncated to --max-len tokens
 * ([CLS] ... [SEP], as tokenizer(line, truncation=True, max_length=N)); lines with no token
 * besides the specials are skipped. Example i is the i-th kept line. A seeded permutation holds
 * --valid-size examples out for a validation loss (fixed masks); each epoch shuffles the others
 * (Philox stream mix(seed, "shuffle"), words [epoch · 2^32, ...)) and cuts them into batches of
 * --batch sentences. Masks: attn_embed_mlm_mask(seed, epoch, example) (attn_embed.h), so they
 * depend on the sentence and the epoch only; dropout on (seed, step).
 *
 * The output directory:
 *   config.json, model.safetensors   a Hugging Face BertForMaskedLM (attn_bert_save_dir:
 *                                    transformers' from_pretrained and `attn fill-mask` load it)
 *   tokenizer.json (+ tokenizer_config.json, special_tokens_map.json, vocab.txt when the
 *                                    tokenizer directory has them), copied once at the start
 *   checkpoint/                      attn_ckpt_* (model, optimizer, training_state.json with the
 *                                    run's options), saved atomically BEFORE the Hugging Face
 *                                    files at every save; --resume reads it
 * so a resumed run repeats the uninterrupted run's losses bit for bit (same --threads). */
#include "cli.h"
#include "cmd_train_bert.h"
#include "train_common.h"

#include "attn_bert.h"
#include "attn_embed.h"
#include "attn_kernels.h"
#include "attn_tok.h"
#include "attn_train.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char cmd_train_bert_usage[] =
    "\n"
    "usage: attn train --arch bert --data FILE --tokenizer DIR --out DIR [--config FILE.json |\n"
    "                  --init DIR] [--batch N] [--max-steps N] [options]\n"
    "       attn train --arch bert --out DIR --resume [--max-steps N] [--time-budget S]\n"
    "\n"
    "Masked-LM training of a BERT encoder on the lines of a text file (15% of the tokens chosen;\n"
    "80% of them -> [MASK], 10% -> a random token, 10% kept). DIR becomes a Hugging Face\n"
    "BertForMaskedLM directory (config.json, model.safetensors, tokenizer.json) that 'attn\n"
    "fill-mask' and transformers load, plus DIR/checkpoint/ (optimizer and training state).\n"
    "Ctrl-C saves and exits; --resume continues exactly (the same losses with the same --threads).\n"
    "\n"
    "data and model:\n"
    "  --data FILE          UTF-8 text, one sentence per line\n"
    "  --column K           use TAB-separated column K (1-based; e.g. 1 = the English side of\n"
    "                       Tatoeba's cmn.txt); default: the whole line\n"
    "  --tokenizer PATH     a tokenizer.json or a directory with one (e.g. models/all-MiniLM-L6-v2)\n"
    "  --config FILE        BertConfig JSON (hidden_size, num_hidden_layers, ...; vocab_size is\n"
    "                       the tokenizer's); default: configs/bert-mlm-small.json's model\n"
    "  --init DIR           start from a Hugging Face BERT directory instead (a BertModel gets a\n"
    "                       new masked-LM head)\n"
    "  --max-len N          tokens per sentence with [CLS] and [SEP] (default 128, or the\n"
    "                       model's max_position_embeddings when smaller)\n"
    "  --valid-size N       held-out sentences for the validation loss (default min(500, 5%))\n"
    "  --seed N             initialization, split, batches, masks, dropout (default 1)\n"
    "optimization:\n"
    "  --batch N            sentences per step (default 32)\n"
    "  --lr X               peak learning rate (default 5e-4)\n"
    "  --warmup N           linear warmup steps (default 100)\n"
    "  --decay-steps N      the linear decay reaches 0 at step N (default: --max-steps, else\n"
    "                       --epochs x steps per epoch)\n"
    "  --weight-decay X     AdamW decoupled weight decay on matrices (default 0.01)\n"
    "  --beta1 X, --beta2 X, --adam-eps X   AdamW (default 0.9, 0.999, 1e-8)\n"
    "  --clip X             clip the global gradient norm (default 1.0; 0 = off)\n"
    "  --dropout X          hidden_dropout_prob (default: the config's)\n"
    "  --mlm-probability X  (default 0.15)\n"
    "stopping, logging, saving:\n"
    "  --max-steps N        stop after N steps\n"
    "  --epochs N           stop after N epochs (default 1 when neither is given)\n"
    "  --time-budget S      stop (and save) after S seconds\n"
    "  --eval-every N       validation loss every N steps (default 500)\n"
    "  --save-every N       checkpoint every N steps (default 1000)\n"
    "  --log-every N        progress line every N steps (default 20)\n";

/* ---- options -------------------------------------------------------------------------------- */

typedef struct {
    const char *data, *out, *config, *init, *tokenizer;
    int column, max_len, batch, warmup;
    long long valid_size; /* -1: default */
    uint64_t seed;
    double lr, weight_decay, beta1, beta2, eps, clip, dropout, mlm_p;
    int64_t max_steps, epochs, decay_steps;
    double time_budget;
    int eval_every, save_every, log_every;
    bool resume;
} bopts;

static bopts default_opts(void) {
    bopts o;
    memset(&o, 0, sizeof o);
    o.max_len = 0; /* min(128, max_position_embeddings) */
    o.batch = 32;
    o.warmup = 100;
    o.valid_size = -1;
    o.seed = 1;
    o.lr = 5e-4;
    o.weight_decay = 0.01;
    o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-8;
    o.clip = 1.0;
    o.dropout = -1;
    o.mlm_p = 0.15;
    o.eval_every = 500, o.save_every = 1000, o.log_every = 20;
    return o;
}

/* The value after `--out` in argv, or NULL. */
static const char *find_opt(int argc, char **argv, const char *name) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return NULL;
}

bool cmd_train_bert_wanted(int argc, char **argv) {
    const char *arch = find_opt(argc, argv, "--arch");
    if (arch) return !strcmp(arch, "bert");
    bool resume = false;
    for (int i = 1; i < argc; i++) resume |= !strcmp(argv[i], "--resume");
    const char *out = find_opt(argc, argv, "--out");
    if (!resume || !out) return false;
    /* --resume of a directory this trainer wrote: config.json says bert and checkpoint/ exists */
    char p[4096];
    snprintf(p, sizeof p, "%s/checkpoint/training_state.json", out);
    if (access(p, F_OK) != 0) return false;
    snprintf(p, sizeof p, "%s/config.json", out);
    json_t *j = json_load_file(p, 0, NULL);
    const char *mt = json_string_value(json_object_get(j, "model_type"));
    bool yes = mt && !strcmp(mt, "bert");
    json_decref(j);
    return yes;
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, bopts *o) {
    const char *const usage[] = {cmd_train_bert_usage + 1, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        int rc = train_next_arg(argc, argv, &i, usage, NULL, 0, &o->resume, &a, &v);
        if (rc >= 0) return rc;
        if (!a) continue; /* --resume */
#define INT_OPT(name, lo, hi, field) CLI_INT_OPT("train", name, lo, hi, o->field, )
#define REAL_OPT(name, lo, hi, field) CLI_REAL_OPT("train", name, lo, hi, o->field, )
        if (!strcmp(a, "--arch")) {
            if (strcmp(v, "bert") != 0) return cli_usage_error("train: --arch %s here", v);
            continue;
        }
        if (!strcmp(a, "--data")) { o->data = v; continue; }
        if (!strcmp(a, "--out")) { o->out = v; continue; }
        if (!strcmp(a, "--config")) { o->config = v; continue; }
        if (!strcmp(a, "--init")) { o->init = v; continue; }
        if (!strcmp(a, "--tokenizer")) { o->tokenizer = v; continue; }
        INT_OPT("--column", 1, 1000000, column)
        INT_OPT("--max-len", 3, 4096, max_len)
        INT_OPT("--valid-size", 0, 100000000, valid_size)
        INT_OPT("--batch", 1, 65536, batch)
        INT_OPT("--warmup", 0, 100000000, warmup)
        INT_OPT("--decay-steps", 1, INT64_MAX, decay_steps)
        REAL_OPT("--beta1", 0, 0.999999, beta1)
        REAL_OPT("--beta2", 0, 0.999999999, beta2)
        REAL_OPT("--adam-eps", 1e-30, 1, eps)
        REAL_OPT("--mlm-probability", 0.001, 1, mlm_p)
        TRAIN_SHARED_OPTS(o) /* --seed --lr --weight-decay --clip --dropout, stopping, logging */
#undef INT_OPT
#undef REAL_OPT
        return cli_usage_error("train: unknown option '%s'", a);
    }
    if (!o->out) return cli_usage_error("train: --out DIR is required");
    if (!o->resume) {
        if (!o->data) return cli_usage_error("train: --data FILE is required");
        if (!o->tokenizer && !o->init)
            return cli_usage_error("train: --tokenizer PATH is required (e.g. models/all-MiniLM-L6-v2)");
        if (o->config && o->init) return cli_usage_error("train: --config and --init exclude each other");
    }
    return -1;
}

/* The options that define the run (saved in the training state, restored by --resume). */
static json_t *opts_to_json(const bopts *o) {
    json_t *j = json_object();
    json_object_set_new(j, "arch", json_string("bert"));
    json_object_set_new(j, "data", json_string(o->data));
    json_object_set_new(j, "column", json_integer(o->column));
    json_object_set_new(j, "max_len", json_integer(o->max_len));
    json_object_set_new(j, "valid_size", json_integer(o->valid_size));
    char b[32]; /* the seed is a uint64: a string */
    snprintf(b, sizeof b, "%llu", (unsigned long long)o->seed);
    json_object_set_new(j, "seed", json_string(b));
    json_object_set_new(j, "batch", json_integer(o->batch));
    json_object_set_new(j, "lr", json_real(o->lr));
    json_object_set_new(j, "warmup", json_integer(o->warmup));
    json_object_set_new(j, "decay_steps", json_integer((json_int_t)o->decay_steps));
    json_object_set_new(j, "weight_decay", json_real(o->weight_decay));
    json_object_set_new(j, "beta1", json_real(o->beta1));
    json_object_set_new(j, "beta2", json_real(o->beta2));
    json_object_set_new(j, "adam_eps", json_real(o->eps));
    json_object_set_new(j, "clip", json_real(o->clip));
    json_object_set_new(j, "mlm_probability", json_real(o->mlm_p));
    return j;
}

static attn_status opts_from_json(const json_t *j, const char *path, bopts *o) {
    static char data_copy[4096];
    const char *data = json_string_value(json_object_get(j, "data"));
    const char *seed = json_string_value(json_object_get(j, "seed"));
    const char *arch = json_string_value(json_object_get(j, "arch"));
    if (!json_is_object(j) || !data || !seed || !arch || strcmp(arch, "bert") != 0)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s: \"extra\" lacks the run's options (not a checkpoint of "
                              "attn train --arch bert)",
                              path);
    snprintf(data_copy, sizeof data_copy, "%s", data);
    if (o->data && strcmp(o->data, data_copy) != 0)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "--resume: the checkpoint was trained on %s, not %s", data_copy,
                              o->data);
    o->data = data_copy;
    o->seed = strtoull(seed, NULL, 10);
    o->column = (int)json_integer_value(json_object_get(j, "column"));
    o->max_len = (int)json_integer_value(json_object_get(j, "max_len"));
    o->valid_size = json_integer_value(json_object_get(j, "valid_size"));
    o->batch = (int)json_integer_value(json_object_get(j, "batch"));
    o->lr = json_number_value(json_object_get(j, "lr"));
    o->warmup = (int)json_integer_value(json_object_get(j, "warmup"));
    o->decay_steps = json_integer_value(json_object_get(j, "decay_steps"));
    o->weight_decay = json_number_value(json_object_get(j, "weight_decay"));
    o->beta1 = json_number_value(json_object_get(j, "beta1"));
    o->beta2 = json_number_value(json_object_get(j, "beta2"));
    o->eps = json_number_value(json_object_get(j, "adam_eps"));
    o->clip = json_number_value(json_object_get(j, "clip"));
    o->mlm_p = json_number_value(json_object_get(j, "mlm_probability"));
    if (o->max_len < 3 || o->batch < 1 || o->warmup < 0 || o->decay_steps < 1 || o->column < 0 ||
        !(o->mlm_p > 0 && o->mlm_p <= 1) || !(o->eps > 0))
        return attn_set_error(ATTN_STATUS_FORMAT, "%s: \"extra\" holds invalid options", path);
    return ATTN_STATUS_OK;
}

/* ---- small helpers ----------------------------------------------------------------------------- */

/* Stream keys: train_mix64(seed ^ KEY_...). */
#define KEY_SHUFFLE 0x73687566666c65ull /* "shuffle" */
#define KEY_VALID 0x76616c6964ull       /* "valid" */
#define VALID_EPOCH ((1u << 24) - 1)    /* the validation set's fixed masks */

/* Copy a file (the tokenizer files) into dir; a missing source is fine when optional. */
static attn_status copy_file(const char *src, const char *dst, bool optional) {
    FILE *in = fopen(src, "rb");
    if (!in) {
        if (optional && errno == ENOENT) return ATTN_STATUS_OK;
        return attn_set_error(ATTN_STATUS_IO, "%s: cannot open: %s", src, strerror(errno));
    }
    size_t lt = strlen(dst) + 8;
    char *t2 = malloc(lt);
    if (t2) snprintf(t2, lt, "%s.tmp", dst);
    FILE *out = t2 ? fopen(t2, "wb") : NULL;
    attn_status s = ATTN_STATUS_OK;
    if (!out) {
        s = attn_set_error(ATTN_STATUS_IO, "%s: cannot write", dst);
    } else {
        char buf[1 << 16];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, in)) > 0)
            if (fwrite(buf, 1, k, out) != k) break;
        if (ferror(in) || ferror(out)) s = attn_set_error(ATTN_STATUS_IO, "%s: copy failed", dst);
        if (fclose(out) != 0 && !s) s = attn_set_error(ATTN_STATUS_IO, "%s: write failed", dst);
        if (!s && rename(t2, dst) != 0)
            s = attn_set_error(ATTN_STATUS_IO, "%s: cannot rename: %s", dst, strerror(errno));
        if (s) remove(t2);
    }
    fclose(in);
    free(t2);
    return s;
}

/* ---- the data ---------------------------------------------------------------------------------- */

typedef struct {
    int32_t *ids;    /* all examples' ids, concatenated */
    size_t *off;     /* (n + 1) example i is ids[off[i] .. off[i+1]) */
    size_t n;
    size_t n_lines;  /* lines read */
    size_t tokens;   /* total ids */
} corpus;

static void corpus_free(corpus *c) {
    free(c->ids), free(c->off);
    memset(c, 0, sizeof *c);
}

static attn_status load_corpus(const bopts *o, const attn_tok *tok, corpus *c) {
    memset(c, 0, sizeof *c);
    FILE *fp = fopen(o->data, "rb");
    if (!fp) return attn_set_error(ATTN_STATUS_IO, "%s: cannot open: %s", o->data, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    attn_status s = ATTN_STATUS_OK;
    for (;;) {
        if (len + 65536 > cap) {
            size_t nc = cap ? cap * 2 : 1 << 20;
            char *nb = realloc(buf, nc + 1);
            if (!nb) {
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", o->data);
                break;
            }
            buf = nb, cap = nc;
        }
        size_t k = fread(buf + len, 1, cap - len, fp);
        len += k;
        if (k == 0) break;
    }
    if (!s && ferror(fp)) s = attn_set_error(ATTN_STATUS_IO, "%s: read error", o->data);
    fclose(fp);
    if (s) {
        free(buf);
        return s;
    }
    /* lines -> (text, length) of the chosen column */
    size_t nl = 0;
    for (size_t i = 0; i < len; i++) nl += buf[i] == '\n';
    if (len && buf[len - 1] != '\n') nl++;
    const char **txt = malloc((nl ? nl : 1) * sizeof *txt);
    size_t *tl = malloc((nl ? nl : 1) * sizeof *tl);
    size_t cap_ids = 1 << 16;
    c->ids = malloc(cap_ids * sizeof *c->ids);
    c->off = malloc((nl + 1) * sizeof *c->off);
    if (!txt || !tl || !c->ids || !c->off) {
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    size_t start = 0, li = 0;
    for (size_t i = 0; i <= len && li < nl; i++) {
        if (i < len && buf[i] != '\n') continue;
        size_t b = start, e = i;
        start = i + 1;
        if (e > b && buf[e - 1] == '\r') e--;
        size_t bad = attn_embed_utf8_check(buf + b, e - b);
        if (bad < e - b) {
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "%s:%zu: invalid UTF-8 at byte %zu (0x%02X)", o->data, li + 1,
                               bad + 1, (unsigned)(unsigned char)buf[b + bad]);
            goto done;
        }
        if (o->column > 0) {
            int col = 1;
            size_t cb = b;
            for (size_t k = b; k < e && col < o->column; k++)
                if (buf[k] == '\t') col++, cb = k + 1;
            if (col < o->column) {
                s = attn_set_error(ATTN_STATUS_FORMAT, "%s:%zu: no column %d (the line has %d)",
                                   o->data, li + 1, o->column, col);
                goto done;
            }
            size_t ce = cb;
            while (ce < e && buf[ce] != '\t') ce++;
            b = cb, e = ce;
        }
        txt[li] = buf + b, tl[li] = e - b;
        li++;
    }
    c->n_lines = nl;
    attn_tok_encode_params tp = attn_tok_encode_default_params();
    tp.add_special_tokens = true;
    tp.truncation = ATTN_TOK_TRUNCATE_LONGEST_FIRST;
    tp.max_length = (size_t)o->max_len;
    enum { CHUNK = 4096 };
    attn_tok_encoding *enc = calloc(CHUNK, sizeof *enc);
    if (!enc) {
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    c->off[0] = 0;
    for (size_t at = 0; at < nl && !s; at += CHUNK) {
        size_t k = nl - at < CHUNK ? nl - at : CHUNK;
        s = attn_tok_encode_batch(tok, k, txt + at, tl + at, NULL, NULL, &tp, enc);
        if (s) {
            s = attn_set_error(s, "%s: %s", o->data, attn_last_error());
            break;
        }
        for (size_t i = 0; i < k && !s; i++) {
            size_t real = 0;
            for (size_t t = 0; t < enc[i].n; t++) real += !enc[i].special_mask[t];
            if (real > 0) {
                if (c->tokens + enc[i].n > cap_ids) {
                    while (c->tokens + enc[i].n > cap_ids) cap_ids *= 2;
                    int32_t *ni = realloc(c->ids, cap_ids * sizeof *ni);
                    if (!ni) {
                        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
                        break;
                    }
                    c->ids = ni;
                }
                memcpy(c->ids + c->tokens, enc[i].ids, enc[i].n * sizeof *c->ids);
                c->tokens += enc[i].n;
                c->off[++c->n] = c->tokens;
            }
        }
        for (size_t i = 0; i < k; i++) attn_tok_encoding_free(&enc[i]);
    }
    free(enc);
    if (!s && c->n == 0)
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "%s: no line has a token to train on",
                           o->data);
done:
    free(txt), free(tl), free(buf);
    if (s) corpus_free(c);
    return s;
}

/* ---- the run ----------------------------------------------------------------------------------- */

typedef struct {
    bopts o;
    attn_tok *tok;
    attn_bert_model *model;
    attn_bert_state *st;
    int capB, capT;
    corpus data;
    uint32_t *train, *valid; /* example indices */
    size_t n_train, n_valid;
    uint32_t *perm;          /* this epoch's order of train */
    int64_t perm_epoch;      /* the epoch perm belongs to (-1: none) */
    uint8_t *no_mask;        /* (V) special ids */
    attn_embed_mlm_params mp;
    attn_optim *opt;
    attn_optim_range *ranges;
    attn_ckpt_tensor *tensors;
    char *ckpt_dir;
    attn_ckpt_state cs;
    /* batch buffers */
    int32_t *b_ids, *b_labels, *b_len;
} run;

static void run_free(run *r) {
    attn_bert_state_free(r->st);
    attn_bert_model_free(r->model);
    attn_tok_free(r->tok);
    corpus_free(&r->data);
    free(r->train), free(r->valid), free(r->perm), free(r->no_mask);
    attn_optim_destroy(r->opt);
    free(r->ranges), free(r->tensors), free(r->ckpt_dir);
    free(r->b_ids), free(r->b_labels), free(r->b_len);
    if (r->cs.extra) json_decref(r->cs.extra);
}

static attn_status ensure_state(run *r, int B, int T) {
    if (r->st && B <= r->capB && T <= r->capT) return ATTN_STATUS_OK;
    attn_bert_state_free(r->st);
    r->st = NULL;
    if (B > r->capB) r->capB = B;
    if (T > r->capT) r->capT = T;
    return attn_bert_state_init(r->model, r->capB, r->capT, &r->st);
}

/* configs/bert-mlm-small.json's model, when no --config is given. */
static attn_bert_config small_config(void) {
    attn_bert_config c = attn_bert_default_config();
    c.hidden_size = 256;
    c.num_hidden_layers = 4;
    c.num_attention_heads = 4;
    c.intermediate_size = 1024;
    c.max_position_embeddings = 128;
    c.hidden_dropout_prob = 0.1f;
    c.attention_probs_dropout_prob = 0.0f;
    return c;
}

/* A model with an MLM head and no pooler holding `src`'s tensors where the names agree. */
static attn_status adopt(const attn_bert_model *src, uint64_t seed, attn_bert_model **out) {
    TRAIN_TRY(attn_bert_model_init(&src->cfg, seed, false, true, out));
    for (int i = 0; i < (*out)->n_tensors; i++) {
        const attn_bert_tensor *t = &(*out)->tensors[i];
        const attn_bert_tensor *u = attn_bert_find_tensor(src, t->name);
        if (u && u->numel == t->numel)
            memcpy((*out)->params + t->offset, src->params + u->offset, t->numel * sizeof(float));
    }
    return ATTN_STATUS_OK;
}

static attn_status setup(run *r) {
    bopts *o = &r->o;
    attn_status s = ATTN_STATUS_OK;
    char *p_cfg = train_path_in(o->out, "config.json"), *p_tok = train_path_in(o->out, "tokenizer.json");
    r->ckpt_dir = train_path_in(o->out, "checkpoint");
    if (!p_cfg || !p_tok || !r->ckpt_dir) {
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    attn_bert_config cfg;
    if (o->resume) {
        if (!attn_ckpt_exists(r->ckpt_dir)) {
            s = attn_set_error(ATTN_STATUS_NOT_FOUND, "--resume: %s holds no checkpoint",
                               r->ckpt_dir);
            goto done;
        }
        char *p_state = train_path_in(r->ckpt_dir, "training_state.json");
        json_t *j = NULL;
        s = train_load_state_json(p_state, &j);
        if (!s) s = opts_from_json(json_object_get(j, "extra"), p_state, o);
        json_decref(j);
        free(p_state);
        if (!s) s = attn_bert_config_load(p_cfg, &cfg);
        if (!s) s = attn_tok_load(p_tok, &r->tok);
        if (!s) s = attn_bert_model_init(&cfg, o->seed, false, true, &r->model);
        if (s) goto done;
    } else {
        if ((s = train_fresh_out(o->out, r->ckpt_dir))) goto done;
        const char *tok_src = o->tokenizer ? o->tokenizer : o->init;
        if ((s = attn_tok_load(tok_src, &r->tok))) goto done;
        /* copy the tokenizer files */
        struct stat sb;
        bool is_dir = stat(tok_src, &sb) == 0 && S_ISDIR(sb.st_mode);
        const char *names[] = {"tokenizer.json", "tokenizer_config.json",
                               "special_tokens_map.json", "vocab.txt"};
        for (int k = 0; k < 4 && !s; k++) {
            if (!is_dir && k > 0) break;
            char *src = is_dir ? train_path_in(tok_src, names[k]) : strdup(tok_src);
            char *dst = train_path_in(o->out, names[k]);
            s = src && dst ? copy_file(src, dst, k > 0)
                           : attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
            free(src), free(dst);
        }
        if (s) goto done;
        int32_t V = attn_tok_vocab_size(r->tok);
        if (o->init) {
            attn_bert_model *src = NULL;
            if ((s = attn_bert_load_dir(o->init, &src))) goto done;
            cfg = src->cfg;
            if (V > cfg.vocab_size) {
                attn_bert_model_free(src);
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                   "--init %s: vocab_size %d is smaller than the tokenizer's %d",
                                   o->init, cfg.vocab_size, (int)V);
                goto done;
            }
            if (o->dropout >= 0) src->cfg.hidden_dropout_prob = (float)o->dropout;
            s = adopt(src, o->seed, &r->model);
            attn_bert_model_free(src);
            if (s) goto done;
        } else {
            if (o->config) {
                if ((s = attn_bert_config_load(o->config, &cfg))) goto done;
            } else {
                cfg = small_config();
            }
            cfg.vocab_size = V;
            int32_t pad = attn_tok_special_id(r->tok, ATTN_TOK_PAD);
            cfg.pad_token_id = pad >= 0 && pad < V ? pad : -1;
            if (o->dropout >= 0) cfg.hidden_dropout_prob = (float)o->dropout;
            if ((s = attn_bert_config_check(&cfg))) goto done;
            if ((s = attn_bert_model_init(&cfg, o->seed, false, true, &r->model))) goto done;
        }
    }
    const int P = r->model->cfg.max_position_embeddings;
    if (!o->max_len) o->max_len = P < 128 ? P : 128;
    if (o->max_len > r->model->cfg.max_position_embeddings) {
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "--max-len %d exceeds the model's max_position_embeddings %d",
                           o->max_len, r->model->cfg.max_position_embeddings);
        goto done;
    }
    /* masking */
    const int32_t V = r->model->cfg.vocab_size, Vt = attn_tok_vocab_size(r->tok);
    r->no_mask = calloc((size_t)V, 1);
    if (!r->no_mask) {
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < Vt; i++) r->no_mask[i] = attn_tok_is_special(r->tok, i);
    r->mp = attn_embed_mlm_default_params();
    r->mp.mlm_probability = (float)o->mlm_p;
    r->mp.mask_id = attn_tok_special_id(r->tok, ATTN_TOK_MASK);
    r->mp.vocab_size = Vt;
    r->mp.no_mask = r->no_mask;
    if (r->mp.mask_id < 0) {
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "the tokenizer has no [MASK] token");
        goto done;
    }
done:
    free(p_cfg), free(p_tok);
    return s;
}

static attn_status setup_data(run *r) {
    bopts *o = &r->o;
    TRAIN_TRY(load_corpus(o, r->tok, &r->data));
    size_t n = r->data.n;
    size_t nv = o->valid_size >= 0 ? (size_t)o->valid_size : (n / 20 < 500 ? n / 20 : 500);
    if (nv >= n)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "--valid-size %zu leaves no training sentence (%zu in all)", nv, n);
    if (n >= ((size_t)1 << 28))
        return attn_set_error(ATTN_STATUS_TOO_LARGE, "%s: %zu sentences (at most 2^28)", o->data, n);
    o->valid_size = (long long)nv;
    uint32_t *perm = malloc(n * sizeof *perm);
    uint8_t *is_valid = calloc(n, 1);
    r->train = malloc((n - nv) * sizeof *r->train);
    r->valid = malloc((nv ? nv : 1) * sizeof *r->valid);
    r->perm = malloc((n - nv) * sizeof *r->perm);
    if (!perm || !is_valid || !r->train || !r->valid || !r->perm) {
        free(perm), free(is_valid);
        return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    attn_rng rng;
    attn_rng_init(&rng, train_mix64(o->seed ^ KEY_VALID));
    if (nv) attn_rng_shuffle(&rng, perm, n);
    for (size_t i = 0; i < nv; i++) is_valid[perm[i]] = 1;
    for (size_t i = 0; i < n; i++) {
        if (is_valid[i]) r->valid[r->n_valid++] = (uint32_t)i;
        else r->train[r->n_train++] = (uint32_t)i;
    }
    free(perm), free(is_valid);
    r->perm_epoch = -1;
    size_t T = (size_t)o->max_len, B = (size_t)o->batch;
    r->b_ids = malloc(B * T * sizeof *r->b_ids);
    r->b_labels = malloc(B * T * sizeof *r->b_labels);
    r->b_len = malloc(B * sizeof *r->b_len);
    if (!r->b_ids || !r->b_labels || !r->b_len)
        return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    return ATTN_STATUS_OK;
}

static size_t steps_per_epoch(const run *r) {
    return (r->n_train + (size_t)r->o.batch - 1) / (size_t)r->o.batch;
}

/* Fill the batch buffers with examples ex[0..B) masked for `epoch`; returns T. */
static attn_status make_batch(run *r, const uint32_t *ex, int B, uint64_t epoch, int *T_out,
                              int64_t *n_tokens) {
    int T = 0;
    for (int b = 0; b < B; b++) {
        size_t n = r->data.off[ex[b] + 1] - r->data.off[ex[b]];
        if ((int)n > T) T = (int)n;
    }
    *n_tokens = 0;
    for (int b = 0; b < B; b++) {
        const int32_t *ids = r->data.ids + r->data.off[ex[b]];
        int n = (int)(r->data.off[ex[b] + 1] - r->data.off[ex[b]]);
        int32_t *mi = r->b_ids + (size_t)b * (size_t)T, *ml = r->b_labels + (size_t)b * (size_t)T;
        TRAIN_TRY(attn_embed_mlm_mask(&r->mp, r->o.seed, epoch, ex[b], n, ids, mi, ml));
        for (int t = n; t < T; t++) mi[t] = 0, ml[t] = ATTN_BERT_IGNORE_INDEX;
        r->b_len[b] = n;
        *n_tokens += n;
    }
    *T_out = T;
    return ensure_state(r, B, T);
}

/* Mean cross-entropy over the validation set's masked tokens (fixed masks), evaluation mode. */
static attn_status valid_loss(run *r, double *out) {
    *out = NAN;
    if (!r->n_valid) return ATTN_STATUS_OK;
    const int V = r->model->cfg.vocab_size;
    double sum = 0, count = 0;
    attn_status s = ATTN_STATUS_OK;
    size_t cap = (size_t)r->o.batch * (size_t)r->o.max_len;
    int32_t *pos = malloc(cap * sizeof *pos), *tgt = malloc(cap * sizeof *tgt);
    float *logits = NULL;
    size_t cap_l = 0;
    if (!pos || !tgt) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t at = 0; at < r->n_valid && !s; at += (size_t)r->o.batch) {
        int B = (int)(r->n_valid - at < (size_t)r->o.batch ? r->n_valid - at : (size_t)r->o.batch);
        int T;
        int64_t nt;
        if ((s = make_batch(r, r->valid + at, B, VALID_EPOCH, &T, &nt))) break;
        int m = 0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < r->b_len[b]; t++)
                if (r->b_labels[(size_t)b * (size_t)T + (size_t)t] != ATTN_BERT_IGNORE_INDEX) {
                    pos[m] = b * T + t;
                    tgt[m++] = r->b_labels[(size_t)b * (size_t)T + (size_t)t];
                }
        if (!m) continue;
        if ((size_t)m * (size_t)V > cap_l) {
            free(logits);
            cap_l = (size_t)m * (size_t)V;
            logits = malloc(cap_l * sizeof *logits);
            if (!logits) {
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
                break;
            }
        }
        attn_bert_set_train(r->st, false, 0, 0);
        float l = 0;
        s = attn_bert_forward(r->model, r->st, B, T, r->b_ids, NULL, r->b_len, NULL);
        if (!s) s = attn_bert_mlm_logits(r->model, r->st, m, pos, logits);
        if (!s) s = attn_cross_entropy(m, V, logits, tgt, ATTN_BERT_IGNORE_INDEX, 0.0f, &l, NULL);
        sum += (double)l * m;
        count += m;
    }
    free(pos), free(tgt), free(logits);
    if (!s && count > 0) *out = sum / count;
    return s;
}

static attn_status setup_training(run *r) {
    attn_bert_model *m = r->model;
    TRAIN_TRY(train_tables_alloc(m->n_tensors, &r->tensors, &r->ranges));
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_bert_tensor *t = &m->tensors[i];
        train_table_set(&r->tensors[i], &r->ranges[i], t->name, t->ndim, t->shape, m->params,
                        t->offset, t->numel, t->ndim > 1);
    }
    attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    op.beta1 = r->o.beta1, op.beta2 = r->o.beta2, op.eps = r->o.eps;
    op.weight_decay = r->o.weight_decay;
    TRAIN_TRY(attn_optim_create(&op, m->num_params, r->ranges, m->n_tensors, &r->opt));
    r->cs = attn_ckpt_state_init();
    if (r->o.resume) {
        TRAIN_TRY(attn_ckpt_load(r->ckpt_dir, r->tensors, m->n_tensors, r->opt, &r->cs));
        printf("resumed %s at step %lld (epoch %lld, batch %lld)\n", r->o.out,
               (long long)r->cs.step, (long long)r->cs.epoch + 1, (long long)r->cs.data_position);
    }
    return ATTN_STATUS_OK;
}

static attn_status save(run *r, int64_t step, int64_t epoch, int64_t batch, double lr) {
    TRAIN_TRY(train_save(r->ckpt_dir, r->tensors, r->model->n_tensors, r->opt, &r->cs, step, epoch,
                   batch, lr, opts_to_json(&r->o)));
    return attn_bert_save_dir(r->model, r->o.out);
}

static int train_loop(run *r) {
    bopts *o = &r->o;
    const size_t spe = steps_per_epoch(r);
    int64_t step = r->cs.step, epoch = r->cs.epoch, batch = r->cs.data_position;
    if (!o->max_steps && !o->epochs && !o->time_budget) o->epochs = 1;
    int64_t end_step = o->max_steps ? o->max_steps : INT64_MAX;
    if (o->epochs && o->epochs * (int64_t)spe < end_step) end_step = o->epochs * (int64_t)spe;
    if (!o->decay_steps) o->decay_steps = end_step != INT64_MAX ? end_step : (int64_t)spe;
    const attn_bert_config *c = &r->model->cfg;
    printf("data: %zu lines of %s -> %zu sentences (%zu tokens, <= %d each): %zu train, %zu "
           "valid; %zu steps per epoch of %d sentences\n",
           r->data.n_lines, o->data, r->data.n, r->data.tokens, o->max_len, r->n_train,
           r->n_valid, spe, o->batch);
    printf("model: BERT %zu parameters (hidden %d, %d layers, %d heads, intermediate %d, vocab "
           "%d, dropout %.2f); masked LM %.0f%%; %d threads, %s kernels\n",
           r->model->num_params, c->hidden_size, c->num_hidden_layers, c->num_attention_heads,
           c->intermediate_size, c->vocab_size, (double)c->hidden_dropout_prob, 100 * o->mlm_p,
           attn_get_num_threads(), attn_backend_name(attn_get_backend()));
    fflush(stdout);
    train_catch_signals();

    const double t0 = train_now_s();
    double win_loss = 0, win_n = 0, total_tok = 0, lr = 0, last_loss = NAN;
    const int64_t first_step = step;
    attn_status s = ATTN_STATUS_OK;
    const char *why = "done";
    while (step < end_step) {
        const char *stop = train_stop_reason(t0, o->time_budget);
        if (stop) {
            why = stop;
            break;
        }
        if ((size_t)batch >= spe) epoch++, batch = 0;
        if (epoch >= (1 << 24) - 1) {
            s = attn_set_error(ATTN_STATUS_TOO_LARGE, "too many epochs");
            break;
        }
        if (r->perm_epoch != epoch) {
            memcpy(r->perm, r->train, r->n_train * sizeof *r->perm);
            attn_rng rng;
            attn_rng_set_state(&rng, train_mix64(o->seed ^ KEY_SHUFFLE), (uint64_t)epoch << 32);
            attn_rng_shuffle(&rng, r->perm, r->n_train);
            r->perm_epoch = epoch;
        }
        size_t at = (size_t)batch * (size_t)o->batch;
        int B = (int)(r->n_train - at < (size_t)o->batch ? r->n_train - at : (size_t)o->batch);
        int T;
        int64_t ntok;
        if ((s = make_batch(r, r->perm + at, B, (uint64_t)epoch, &T, &ntok))) break;
        attn_bert_set_train(r->st, true, o->seed, (uint64_t)step);
        float loss = 0;
        s = attn_bert_forward(r->model, r->st, B, T, r->b_ids, NULL, r->b_len, NULL);
        if (!s) s = attn_bert_mlm_loss(r->model, r->st, r->b_labels, &loss);
        if (!s) {
            attn_bert_zero_grad(r->model);
            s = attn_bert_backward(r->model, r->st);
        }
        if (s) break;
        const double step_lr = attn_lr_linear(step, o->lr, o->warmup, o->decay_steps);
        /* finiteness check, clipping (o->clip > 0) and the update in one */
        if ((s = attn_optim_clip_step(r->opt, r->model->params, r->model->grads, o->clip,
                                      step_lr, r->ranges, r->model->n_tensors, NULL)))
            break;
        lr = step_lr;
        step++, batch++;
        int64_t nl = 0;
        for (size_t k = 0; k < (size_t)B * (size_t)T; k++) nl += r->b_labels[k] != ATTN_BERT_IGNORE_INDEX;
        last_loss = loss;
        win_loss += (double)loss * (double)nl, win_n += (double)nl;
        total_tok += (double)ntok;
        if (step % o->log_every == 0 || step == end_step) {
            double el = train_now_s() - t0;
            double eta = train_eta(el / (double)(step - first_step),
                                   end_step != INT64_MAX ? end_step - step : -1, o->time_budget, el);
            char where[80];
            snprintf(where, sizeof where, "step %6lld | epoch %3lld", (long long)step,
                     (long long)epoch + 1);
            train_progress(where, win_n > 0 ? win_loss / win_n : 0.0, lr,
                           total_tok / (el > 0 ? el : 1), el, eta);
            win_loss = win_n = 0;
        }
        if (r->n_valid && step % o->eval_every == 0) {
            double vl;
            double tv = train_now_s();
            if ((s = valid_loss(r, &vl))) break;
            if (vl < r->cs.best_valid_loss) r->cs.best_valid_loss = vl;
            printf("valid  %6lld | loss %7.4f | ppl %8.2f | %.1f s\n", (long long)step, vl, exp(vl),
                   train_now_s() - tv);
            fflush(stdout);
        }
        if (step % o->save_every == 0 && (s = save(r, step, epoch, batch, lr))) break;
    }
    if (s) return cli_fail(s);
    if ((s = save(r, step, epoch, batch, lr))) return cli_fail(s);
    double el = train_now_s() - t0, vl = NAN;
    if (r->n_valid && (s = valid_loss(r, &vl))) return cli_fail(s);
    char vbuf[48] = "";
    if (r->n_valid) snprintf(vbuf, sizeof vbuf, ", valid loss %.4f", vl);
    printf("%s: step %lld, train loss %.4f%s, %.0f s, tokens/s=%.0f; saved %s\n", why,
           (long long)step, last_loss, vbuf, el, total_tok / (el > 0 ? el : 1), o->out);
    return CLI_EXIT_OK;
}

int cmd_train_bert(int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    r.o = default_opts();
    int rc = parse_args(argc, argv, &r.o);
    if (rc >= 0) return rc;
    attn_status s = setup(&r);
    if (!s) s = setup_data(&r);
    if (!s) s = setup_training(&r);
    if (s) {
        rc = cli_fail(s);
        run_free(&r);
        return rc;
    }
    rc = train_loop(&r);
    run_free(&r);
    return rc;
}

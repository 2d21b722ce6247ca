/* cmd_train_bert.c — `attn train --arch bert`: masked-LM pre-training of a BERT model
 * (attn_bert.h) on text lines, as BERT / transformers' DataCollatorForLanguageModeling do it:
 * 15% of the non-special tokens chosen, 80% of those replaced by [MASK], 10% by a random id, 10%
 * kept; cross-entropy on the chosen tokens; AdamW (no weight decay on biases and LayerNorm
 * weights, the 1-D tensors) with linear warmup and linear decay to 0
 * (get_linear_schedule_with_warmup), gradient clipping, dropout. The loop is train_loop.c's; this
 * file is BERT's model, step and validation.
 *
 * Data (src/data/mlm.c, attn_data_load_sentences and attn_data_mlm_*): each line of FILE, or one
 * TAB-separated column of it (--column K), tokenized with the special tokens and truncated to
 * --max-len tokens; lines with no token besides the specials are skipped. A seeded permutation
 * holds --valid-size sentences out for a validation loss (fixed masks); each epoch shuffles the
 * others and cuts them into batches of --batch sentences; masks are attn_embed_mlm_mask(seed,
 * epoch, sentence), so they depend on the sentence and the epoch only; dropout on (seed, step).
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
#include "train_loop.h"

#include "attn_bert.h"
#include "attn_data.h"
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

/* ---- options -------------------------------------------------------------------------------- */

static const char *const default_text[] = {
    "--epochs", "1 when neither --max-steps nor --time-budget is given", NULL};

const train_family_info cmd_train_bert_family = {
    .family = TRAIN_BERT,
    .arch = "bert",
    .usage =
        "usage: attn train --arch bert --data FILE --tokenizer DIR --out DIR\n"
        "                  [--config FILE.json | --init DIR] [--batch N] [--max-steps N] ...\n"
        "       attn train --arch bert --out DIR --resume [--max-steps N] [--time-budget S]\n"
        "\n"
        "Masked-LM training of a BERT encoder on the lines of a text file (15% of the tokens\n"
        "chosen; 80% of them -> [MASK], 10% -> a random token, 10% kept). DIR becomes a Hugging\n"
        "Face BertForMaskedLM directory (config.json, model.safetensors, tokenizer.json) that\n"
        "'attn fill-mask' and transformers load, plus DIR/checkpoint/ (optimizer and training\n"
        "state). Ctrl-C saves and exits; --resume continues exactly (the same losses with the\n"
        "same --threads).\n",
    .own_data =
        "  --data FILE          UTF-8 text, one sentence per line\n"
        "  --column K           use TAB-separated column K (1-based; e.g. 1 = the English side of\n"
        "                       Tatoeba's cmn.txt); default: the whole line\n"
        "  --tokenizer PATH     a tokenizer.json or a directory with one (e.g.\n"
        "                       models/all-MiniLM-L6-v2)\n"
        "  --config FILE        BertConfig JSON (hidden_size, num_hidden_layers, ...; vocab_size\n"
        "                       is the tokenizer's); default: configs/bert-mlm-small.json's model\n"
        "  --init DIR           start from a Hugging Face BERT directory instead (a BertModel\n"
        "                       gets a new masked-LM head)\n"
        "  --max-len N          tokens per sentence with [CLS] and [SEP] (default 128, or the\n"
        "                       model's max_position_embeddings when smaller)\n"
        "  --valid-size N       held-out sentences for the validation loss (default\n"
        "                       min(500, 5%))\n",
    .own_optimization =
        "  --batch N            sentences per step (default 32)\n"
        "  --lr-decay-steps N   the linear decay reaches 0 at step N (default: --max-steps, else\n"
        "                       --epochs x steps per epoch; also --decay-steps)\n"
        "  --mlm-probability X  (default 0.15)\n",
    .own_stopping = "",
    .notes =
        "A token, for tokens/s, is a real (non-pad) token of a batch, [CLS] and [SEP] included.\n"
        "Defaults that differ from the other families: betas (0.9, 0.999) and eps 1e-8 (torch's\n"
        "AdamW, as transformers' Trainer uses it), weight decay 0.01 (the BERT paper's),\n"
        "epochs 1 (run_mlm's unit of training), and lr 5e-4 with warmup 100 (the paper's 1e-4\n"
        "with 10000 warmup steps, scaled for the small default model and short runs).\n",
    .default_text = default_text,
    .defaults = {.seed = 1,
                 .lr = 5e-4,
                 .warmup = 100,
                 .decay_steps = -1,
                 .grad_clip = 1.0,
                 .weight_decay = 0.01,
                 .beta1 = 0.9,
                 .beta2 = 0.999,
                 .adam_eps = 1e-8,
                 .dropout = -1,
                 .batch = 32,
                 .max_steps = -1,
                 .eval_every = 500,
                 .save_every = 1000,
                 .log_every = 20},
};

typedef struct {
    train_opts c; /* the shared ones */
    const char *init;
    int column, max_len;  /* max_len 0: min(128, max_position_embeddings) */
    long long valid_size; /* -1: the default */
    double mlm_p;
} bopts;

/* The value after `name` in argv, or NULL. */
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
    o->c = cmd_train_bert_family.defaults;
    o->valid_size = -1;
    o->mlm_p = 0.15;
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        int rc = train_next_arg(argc, argv, &i, &cmd_train_bert_family, &o->c, &a, &v);
        if (rc >= 0) return rc;
        if (!a) continue; /* a shared option */
        if (!strcmp(a, "--init")) {
            o->init = v;
            TRAIN_FIXED(&o->c, "--init");
            continue;
        }
#define OPT(name, lo, hi, field)                                                                 \
    CLI_INT_OPT("train", name, lo, hi, o->field, TRAIN_FIXED(&o->c, name))
        OPT("--column", 1, 1000000, column)
        OPT("--max-len", 3, 4096, max_len)
        OPT("--valid-size", 0, 100000000, valid_size)
#undef OPT
        CLI_REAL_OPT("train", "--mlm-probability", 0.001, 1, o->mlm_p,
                     TRAIN_FIXED(&o->c, "--mlm-probability"))
        return train_unknown_option(&cmd_train_bert_family, a);
    }
    int rc = train_check_args(&cmd_train_bert_family, &o->c);
    if (rc >= 0) return rc;
    if (o->c.batch > 65536) /* rows of one forward pass */
        return cli_usage_error("train: --batch needs an integer from 1 to 65536 for --arch bert, "
                               "got %lld",
                               (long long)o->c.batch);
    if (o->c.decay_steps == 0)
        return cli_usage_error("train: --lr-decay-steps must be at least 1 (the linear decay)");
    if (!o->c.resume) {
        if (!o->c.tokenizer && !o->init)
            return cli_usage_error(
                "train: --tokenizer PATH is required (e.g. models/all-MiniLM-L6-v2)");
        if (o->c.config && o->init)
            return cli_usage_error("train: --config and --init exclude each other");
    }
    return -1;
}

/* The options that define the run (saved in the training state, restored by --resume). */
static json_t *opts_to_json(const bopts *o) {
    json_t *j = json_object();
    json_object_set_new(j, "arch", json_string("bert"));
    train_opts_to_json(&o->c, j);
    json_object_set_new(j, "column", json_integer(o->column));
    json_object_set_new(j, "max_len", json_integer(o->max_len));
    json_object_set_new(j, "valid_size", json_integer(o->valid_size));
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
    o->c.data = data_copy;
    train_opts_from_json(j, &o->c);
    o->column = (int)json_integer_value(json_object_get(j, "column"));
    o->max_len = (int)json_integer_value(json_object_get(j, "max_len"));
    o->valid_size = json_integer_value(json_object_get(j, "valid_size"));
    o->mlm_p = json_number_value(json_object_get(j, "mlm_probability"));
    if (o->max_len < 3 || o->c.batch < 1 || o->c.batch > 65536 || o->c.warmup < 0 ||
        o->c.decay_steps < 1 || o->column < 0 || o->valid_size < 0 ||
        !(o->mlm_p > 0 && o->mlm_p <= 1) || !(o->c.adam_eps > 0))
        return attn_set_error(ATTN_STATUS_FORMAT, "%s: \"extra\" holds invalid options", path);
    return ATTN_STATUS_OK;
}

/* ---- small helpers --------------------------------------------------------------------------- */

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

/* ---- the run --------------------------------------------------------------------------------- */

typedef struct {
    bopts o;
    attn_tok *tok;
    attn_bert_model *model;
    attn_bert_trainer *tr; /* data-parallel: one replica per thread */
    int capB, capT;
    attn_data_sentences data;
    attn_data_mlm *mlm;
    attn_data_mlm_batch batch;
    int64_t epoch, next; /* the batch after the steps so far: batch `next` of epoch `epoch` */
    char *ckpt_dir;
    train_loop L;
} run;

static void run_free(run *r) {
    attn_bert_trainer_free(r->tr);
    attn_bert_model_free(r->model);
    attn_tok_free(r->tok);
    attn_data_mlm_batch_free(&r->batch);
    attn_data_mlm_free(r->mlm);
    attn_data_sentences_free(&r->data);
    train_loop_free(&r->L);
    free(r->ckpt_dir);
}

/* A trainer for batches of up to B x T (grown, never shrunk). */
static attn_status ensure_trainer(run *r, int B, int T) {
    if (r->tr && B <= r->capB && T <= r->capT) return ATTN_STATUS_OK;
    attn_bert_trainer_free(r->tr);
    r->tr = NULL;
    if (B > r->capB) r->capB = B;
    if (T > r->capT) r->capT = T;
    TRAIN_TRY(attn_bert_trainer_init(r->model, r->capB, r->capT,
                                     train_loop_replicas(r->model->num_params), &r->tr));
    attn_bert_trainer_set_dist(r->tr, train_dist());
    attn_bert_trainer_set_overlap(r->tr, true); /* one batch per step */
    return ATTN_STATUS_OK;
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
    char *p_cfg = train_path_in(o->c.out, "config.json");
    char *p_tok = train_path_in(o->c.out, "tokenizer.json");
    r->ckpt_dir = train_path_in(o->c.out, "checkpoint");
    if (!p_cfg || !p_tok || !r->ckpt_dir) {
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    attn_bert_config cfg;
    if (o->c.resume) {
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
        if (!s) s = attn_bert_model_init(&cfg, o->c.seed, false, true, &r->model);
        if (s) goto done;
    } else {
        if ((s = train_fresh_out(o->c.out, r->ckpt_dir))) goto done;
        const char *tok_src = o->c.tokenizer ? o->c.tokenizer : o->init;
        if ((s = attn_tok_load(tok_src, &r->tok))) goto done;
        /* copy the tokenizer files */
        struct stat sb;
        bool is_dir = stat(tok_src, &sb) == 0 && S_ISDIR(sb.st_mode);
        const char *names[] = {"tokenizer.json", "tokenizer_config.json",
                               "special_tokens_map.json", "vocab.txt"};
        for (int k = 0; k < 4 && !s && train_writer(); k++) {
            if (!is_dir && k > 0) break;
            char *src = is_dir ? train_path_in(tok_src, names[k]) : strdup(tok_src);
            char *dst = train_path_in(o->c.out, names[k]);
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
            if (o->c.dropout >= 0) src->cfg.hidden_dropout_prob = (float)o->c.dropout;
            s = adopt(src, o->c.seed, &r->model);
            attn_bert_model_free(src);
            if (s) goto done;
        } else {
            if (o->c.config) {
                if ((s = attn_bert_config_load(o->c.config, &cfg))) goto done;
            } else {
                cfg = small_config();
            }
            cfg.vocab_size = V;
            int32_t pad = attn_tok_special_id(r->tok, ATTN_TOK_PAD);
            cfg.pad_token_id = pad >= 0 && pad < V ? pad : -1;
            if (o->c.dropout >= 0) cfg.hidden_dropout_prob = (float)o->c.dropout;
            if ((s = attn_bert_config_check(&cfg))) goto done;
            if ((s = attn_bert_model_init(&cfg, o->c.seed, false, true, &r->model))) goto done;
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
    /* the masks need a [MASK] (attn_data_mlm_new checks it too: here before reading the data) */
    if (attn_tok_special_id(r->tok, ATTN_TOK_MASK) < 0)
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "the tokenizer has no [MASK] token");
done:
    free(p_cfg), free(p_tok);
    return s;
}

static attn_status setup_data(run *r) {
    bopts *o = &r->o;
    attn_data_text_options to = {.column = o->column, .max_len = o->max_len};
    TRAIN_TRY(attn_data_load_sentences(o->c.data, r->tok, &to, &r->data));
    attn_data_mlm_options mo = attn_data_mlm_default_options();
    mo.seed = o->c.seed;
    mo.valid_size = o->valid_size >= 0 ? (size_t)o->valid_size : SIZE_MAX;
    mo.batch = (int)o->c.batch;
    mo.mlm_probability = (float)o->mlm_p;
    TRAIN_TRY(attn_data_mlm_new(&r->data, r->tok, &mo, &r->mlm));
    o->valid_size = (long long)attn_data_mlm_num_valid(r->mlm);
    return ATTN_STATUS_OK;
}

/* Mean cross-entropy over the validation set's masked tokens (fixed masks), evaluation mode. */
static attn_status valid_loss(run *r, double *out) {
    *out = NAN;
    double sum = 0, count = 0;
    attn_data_mlm_batch *b = &r->batch;
    for (size_t k = 0; k < attn_data_mlm_valid_batches(r->mlm); k++) {
        TRAIN_TRY(attn_data_mlm_valid_batch(r->mlm, k, b));
        if (!b->n_labels) continue;
        TRAIN_TRY(ensure_trainer(r, b->B, b->T));
        float l = 0;
        TRAIN_TRY(attn_bert_trainer_eval(r->tr, b->B, b->T, b->ids, NULL, b->len, b->labels, &l));
        sum += (double)l * (double)b->n_labels;
        count += (double)b->n_labels;
    }
    if (count > 0) *out = sum / count;
    return ATTN_STATUS_OK;
}

/* ---- the loop's hooks ------------------------------------------------------------------------ */

static attn_status next_batch(void *ctx, int64_t step) {
    (void)step; /* the position is (epoch, next) */
    run *r = ctx;
    if ((size_t)r->next >= attn_data_mlm_train_batches(r->mlm)) r->epoch++, r->next = 0;
    TRAIN_TRY(attn_data_mlm_train_batch(r->mlm, (uint64_t)r->epoch, (size_t)r->next, &r->batch));
    r->next++;
    return ensure_trainer(r, r->batch.B, r->batch.T);
}

static double lr_at(void *ctx, int64_t step) {
    const train_opts *c = &((const run *)ctx)->o.c;
    return attn_lr_linear(step, c->lr, c->warmup, c->decay_steps);
}

static attn_status train_step(void *ctx, int64_t step, train_step_out *out) {
    run *r = ctx;
    const attn_data_mlm_batch *b = &r->batch;
    float loss = 0;
    attn_bert_zero_grad(r->model);
    TRAIN_TRY(attn_bert_train_step(r->tr, true, r->o.c.seed, (uint64_t)step, b->B, b->T, b->ids,
                                   NULL, b->len, b->labels, 1.0f, &loss));
    out->loss = loss;
    out->weight = (double)b->n_labels; /* the loss is a mean over the chosen tokens */
    out->tokens = (double)b->n_tokens;
    return ATTN_STATUS_OK;
}

static attn_status evaluate(void *ctx, train_eval_out *out) { return valid_loss(ctx, &out->loss); }

static void position(void *ctx, int64_t *epoch, int64_t *pos, int64_t *shown) {
    const run *r = ctx;
    *epoch = r->epoch, *pos = r->next, *shown = r->epoch + 1;
}

static json_t *run_options(void *ctx) { return opts_to_json(&((run *)ctx)->o); }

static attn_status save_extra(void *ctx) {
    const run *r = ctx;
    return attn_bert_save_dir(r->model, r->o.c.out);
}

static attn_status setup_training(run *r) {
    bopts *o = &r->o;
    attn_bert_model *m = r->model;
    train_loop *L = &r->L;
    TRAIN_TRY(train_loop_tables(L, m->tensors, m->n_tensors, m->params));
    TRAIN_TRY(train_loop_optim(L, m->num_params, &o->c));
    L->ctx = r;
    L->ckpt_dir = r->ckpt_dir;
    L->out = o->c.out;
    L->resume = o->c.resume;
    TRAIN_TRY(train_loop_resume(L, true));
    r->epoch = L->cs.epoch, r->next = L->cs.data_position;
    L->next_batch = next_batch, L->lr_at = lr_at, L->train_step = train_step;
    L->evaluate = attn_data_mlm_num_valid(r->mlm) ? evaluate : NULL;
    L->position = position, L->run_options = run_options, L->save_extra = save_extra;
    L->params = m->params, L->grads = m->grads;
    train_loop_set(L, &o->c);
    const size_t spe = attn_data_mlm_train_batches(r->mlm);
    if (o->c.max_steps < 0 && !o->c.epochs && !o->c.time_budget) o->c.epochs = 1;
    if (o->c.epochs && o->c.epochs * (int64_t)spe < L->end_step)
        L->end_step = o->c.epochs * (int64_t)spe;
    if (o->c.decay_steps < 0)
        o->c.decay_steps = L->end_step != INT64_MAX && L->end_step > 0 ? L->end_step : (int64_t)spe;
    const attn_bert_config *c = &m->cfg;
    printf("data: %zu lines of %s -> %zu sentences (%zu tokens, <= %d each): %zu train, %zu "
           "valid; %zu steps per epoch of %lld sentences\n",
           r->data.n_lines, o->c.data, r->data.n, r->data.tokens, o->max_len,
           attn_data_mlm_num_train(r->mlm), attn_data_mlm_num_valid(r->mlm), spe,
           (long long)o->c.batch);
    printf("model: BERT %zu parameters (hidden %d, %d layers, %d heads, intermediate %d, vocab "
           "%d, dropout %.2f); masked LM %.0f%%; %d threads, %s kernels\n",
           m->num_params, c->hidden_size, c->num_hidden_layers, c->num_attention_heads,
           c->intermediate_size, c->vocab_size, (double)c->hidden_dropout_prob, 100 * o->mlm_p,
           attn_get_num_threads(), attn_backend_name(attn_get_backend()));
    fflush(stdout);
    return ATTN_STATUS_OK;
}

int cmd_train_bert(int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    int rc = parse_args(argc, argv, &r.o);
    if (rc >= 0) return rc;
    attn_status s = setup(&r);
    if (!s) s = setup_data(&r);
    if (!s) s = setup_training(&r);
    rc = s ? cli_fail(s) : train_run(&r.L);
    run_free(&r);
    return rc;
}

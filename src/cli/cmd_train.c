/* cmd_train.c — `attn train`: train the encoder–decoder translation model (issue 3) on a TSV
 * parallel corpus, with a progress line, periodic validation (loss and BLEU), crash-safe
 * checkpoints, exact resume, Ctrl-C and a time budget.
 *
 * The output directory is both the checkpoint and the model directory `attn translate` reads:
 *   config.json  tokenizer.json  model.safetensors  optimizer.safetensors  training_state.json
 *   split-{train,valid,test}.tsv (src<TAB>tgt<TAB>attribution: the deterministic split, kept with
 *   the Tatoeba attribution)  test.src, test.ref.0 … (test sources and reference streams, for
 *   `attn translate` and `attn bleu`).
 * The training state's "extra" echoes the options that define the run (data path, seeds, sizes,
 * schedule) so that --resume rebuilds exactly the same split, tokenizer, batches and schedule.
 *
 * Determinism: the batches are a function of (seed, epoch), dropout of (seed, step), the
 * optimizer state is saved bit for bit; so a resumed run repeats the uninterrupted run's losses
 * exactly, given the same thread count (sums over threads are ordered the same way). */
#include "cli.h"
#include "cmd_train.h"
#include "train_common.h"
#include "cmd_train_bert.h"
#include "cmd_train_gpt.h"

#include "attn_data.h"
#include "attn_eval.h"
#include "attn_infer.h"
#include "attn_kernels.h"
#include "attn_models.h"
#include "attn_tok.h"
#include "attn_train.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATTN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ATTN_MAX(a, b) ((a) > (b) ? (a) : (b))

static const char train_usage[] =
    "usage: attn train [--arch encdec] --data FILE.tsv --out DIR [options]\n"
    "       attn train --out DIR --resume [--max-steps N] [--time-budget SECONDS]\n"
    "\n"
    "Trains the encoder-decoder Transformer on a parallel corpus (source<TAB>target[<TAB>...],\n"
    "e.g. ../shared/data/tatoeba-eng-cmn/cmn.txt) and writes a model directory for\n"
    "'attn translate'. Ctrl-C saves a checkpoint and exits; --resume continues it exactly.\n"
    "\n"
    "data and model:\n"
    "  --config FILE        model configuration JSON (attn_models.h field names); default: a small\n"
    "                       model (d_model 256, 4 heads, d_ff 1024, 3+3 layers, pre-LN, shared\n"
    "                       and tied embeddings, max_len 64)\n"
    "  --tokenizer PATH     an existing tokenizer.json (default: train a BPE on the train split)\n"
    "  --vocab-size N       size of the trained tokenizer (default 8000)\n"
    "  --valid-size N       at least N pairs for validation (default 1000)\n"
    "  --test-size N        at least N pairs for test (default 1000)\n"
    "  --seed N             split, initialization, batches and dropout (default 1)\n"
    "optimization:\n"
    "  --max-tokens N       padded tokens per batch, B x max(Ts, Tt) (default 6000)\n"
    "  --lr X               peak learning rate (default 1e-3)\n"
    "  --warmup N           linear warmup steps, then inverse-sqrt decay (default 400)\n"
    "  --label-smoothing X  (default 0.1)\n"
    "  --clip X             gradient clipping by global norm (default 1.0; 0 = off)\n"
    "  --weight-decay X     AdamW decoupled weight decay on matrices (default 0.0)\n"
    "  --dropout X          override the configuration's dropout\n"
    "stopping, logging, saving:\n"
    "  --max-steps N        stop after N optimizer steps (default: none)\n"
    "  --time-budget S      stop (and save) after S seconds of training (default: none)\n"
    "  --epochs N           stop after N epochs (default 20 when nothing else is given)\n"
    "  --eval-every N       validation loss and BLEU every N steps (default 500)\n"
    "  --bleu-sentences N   validation sentences translated for BLEU (default 300; 0 = off)\n"
    "  --save-every N       checkpoint every N steps (default 1000)\n"
    "  --log-every N        progress line every N steps (default 20)\n"
    "  --resume             continue the checkpoint in DIR\n";

/* ---- options -------------------------------------------------------------------------------- */

typedef struct {
    const char *data, *out, *config, *tokenizer;
    int vocab_size;
    size_t valid_size, test_size;
    uint64_t seed;
    size_t max_tokens;
    double lr;
    int warmup;
    double label_smoothing, clip, weight_decay, dropout; /* dropout < 0: keep the config's */
    int64_t max_steps, epochs;
    double time_budget;
    int eval_every, bleu_sentences, save_every, log_every;
    bool resume;
} train_opts;

static train_opts default_opts(void) {
    train_opts o;
    memset(&o, 0, sizeof o);
    o.vocab_size = 8000;
    o.valid_size = 1000, o.test_size = 1000;
    o.seed = 1;
    o.max_tokens = 6000;
    o.lr = 1e-3;
    o.warmup = 400;
    o.label_smoothing = 0.1;
    o.clip = 1.0;
    o.weight_decay = 0.0;
    o.dropout = -1;
    o.eval_every = 500, o.bleu_sentences = 300, o.save_every = 1000, o.log_every = 20;
    return o;
}

/* Returns -1 on success, else the exit code. */
static int parse_args(int argc, char **argv, train_opts *o) {
    const char *const usage[] = {train_usage, cmd_train_gpt_usage, cmd_train_bert_usage, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        int rc = train_next_arg(argc, argv, &i, usage, NULL, 0, &o->resume, &a, &v);
        if (rc >= 0) return rc;
        if (!a) continue; /* --resume */
#define INT_OPT(name, lo, hi, field) CLI_INT_OPT("train", name, lo, hi, o->field, )
#define REAL_OPT(name, lo, hi, field) CLI_REAL_OPT("train", name, lo, hi, o->field, )
        if (!strcmp(a, "--arch")) {
            if (strcmp(v, "encdec") != 0)
                return cli_usage_error("train: --arch must be encdec or gpt, got '%s'", v);
            continue;
        }
        if (!strcmp(a, "--data")) { o->data = v; continue; }
        if (!strcmp(a, "--out")) { o->out = v; continue; }
        if (!strcmp(a, "--config")) { o->config = v; continue; }
        if (!strcmp(a, "--tokenizer")) { o->tokenizer = v; continue; }
        INT_OPT("--vocab-size", 300, 1000000, vocab_size)
        INT_OPT("--valid-size", 1, 100000000, valid_size)
        INT_OPT("--test-size", 1, 100000000, test_size)
        INT_OPT("--max-tokens", 16, 100000000, max_tokens)
        INT_OPT("--warmup", 1, 100000000, warmup)
        REAL_OPT("--label-smoothing", 0, 1, label_smoothing)
        INT_OPT("--bleu-sentences", 0, 100000000, bleu_sentences)
        TRAIN_SHARED_OPTS(o) /* --seed --lr --weight-decay --clip --dropout, stopping, logging */
#undef INT_OPT
#undef REAL_OPT
        return cli_usage_error("train: unknown option '%s'", a);
    }
    if (!o->out) return cli_usage_error("train: --out DIR is required");
    if (!o->resume && !o->data) return cli_usage_error("train: --data FILE is required");
    return -1;
}

/* The options that define the run, saved in the training state so --resume repeats it. */
static json_t *opts_to_json(const train_opts *o) {
    json_t *j = json_object();
    json_object_set_new(j, "data", json_string(o->data));
    json_object_set_new(j, "vocab_size", json_integer(o->vocab_size));
    json_object_set_new(j, "valid_size", json_integer((json_int_t)o->valid_size));
    json_object_set_new(j, "test_size", json_integer((json_int_t)o->test_size));
    json_object_set_new(j, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(j, "max_tokens", json_integer((json_int_t)o->max_tokens));
    json_object_set_new(j, "lr", json_real(o->lr));
    json_object_set_new(j, "warmup", json_integer(o->warmup));
    json_object_set_new(j, "label_smoothing", json_real(o->label_smoothing));
    json_object_set_new(j, "clip", json_real(o->clip));
    json_object_set_new(j, "weight_decay", json_real(o->weight_decay));
    return j;
}

static attn_status opts_from_json(const json_t *j, const char *dir, train_opts *o) {
    const char *data = json_string_value(json_object_get(j, "data"));
    if (!json_is_object(j) || !data)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/training_state.json: \"extra\" lacks the run's options "
                              "(not a checkpoint written by attn train)",
                              dir);
    static char data_copy[4096];
    snprintf(data_copy, sizeof data_copy, "%s", data);
    if (o->data && strcmp(o->data, data_copy) != 0)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "--resume: the checkpoint was trained on %s, not %s", data_copy,
                              o->data);
    o->data = data_copy;
    o->vocab_size = (int)json_integer_value(json_object_get(j, "vocab_size"));
    o->valid_size = (size_t)json_integer_value(json_object_get(j, "valid_size"));
    o->test_size = (size_t)json_integer_value(json_object_get(j, "test_size"));
    o->seed = (uint64_t)json_integer_value(json_object_get(j, "seed"));
    o->max_tokens = (size_t)json_integer_value(json_object_get(j, "max_tokens"));
    o->lr = json_number_value(json_object_get(j, "lr"));
    o->warmup = (int)json_integer_value(json_object_get(j, "warmup"));
    o->label_smoothing = json_number_value(json_object_get(j, "label_smoothing"));
    o->clip = json_number_value(json_object_get(j, "clip"));
    o->weight_decay = json_number_value(json_object_get(j, "weight_decay"));
    if (o->max_tokens < 16 || o->warmup < 1 || o->vocab_size < 300)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/training_state.json: \"extra\" holds invalid options", dir);
    return ATTN_STATUS_OK;
}

/* ---- the run ---------------------------------------------------------------------------------- */

typedef struct {
    train_opts o;
    attn_data_corpus corpus;
    attn_data_split split;
    attn_tok *tok;
    attn_encdec_config cfg;
    attn_encdec_model *model;
    attn_encdec_state *st;         /* evaluation (validation loss) */
    int capB, capTs, capTt;
    attn_encdec_trainer *tr;       /* training steps: data-parallel over the threads */
    int trB, trTs, trTt;
    attn_optim *opt;
    attn_optim_range *ranges;
    int nranges;
    attn_ckpt_tensor *tensors;
    attn_data_dataset *train, *valid;
    attn_data_loader *loader;
    attn_data_batch batch;
    attn_data_refs valid_refs;
    attn_ckpt_state cs;
} run;

static void run_free(run *r) {
    attn_data_batch_free(&r->batch);
    attn_data_loader_free(r->loader);
    attn_data_dataset_free(r->train);
    attn_data_dataset_free(r->valid);
    attn_data_refs_free(&r->valid_refs);
    attn_optim_destroy(r->opt);
    free(r->ranges);
    free(r->tensors);
    attn_encdec_state_free(r->st);
    attn_encdec_trainer_free(r->tr);
    attn_encdec_model_free(r->model);
    attn_tok_free(r->tok);
    attn_data_split_free(&r->split);
    attn_data_corpus_free(&r->corpus);
    if (r->cs.extra) json_decref(r->cs.extra);
}

static attn_status ensure_state(run *r, int B, int Ts, int Tt) {
    if (r->st && B <= r->capB && Ts <= r->capTs && Tt <= r->capTt) return ATTN_STATUS_OK;
    attn_encdec_state_free(r->st);
    r->st = NULL;
    r->capB = ATTN_MAX(r->capB, B), r->capTs = ATTN_MAX(r->capTs, Ts);
    r->capTt = ATTN_MAX(r->capTt, Tt);
    return attn_encdec_state_init(r->model, r->capB, r->capTs, r->capTt, &r->st);
}

/* The training step's trainer: one replica per thread (attn_encdec_train_step), so a run's
 * dropout masks depend on the thread count; --resume repeats a run exactly with the same one. */
static attn_status ensure_trainer(run *r, int B, int Ts, int Tt) {
    if (r->tr && B <= r->trB && Ts <= r->trTs && Tt <= r->trTt) return ATTN_STATUS_OK;
    attn_encdec_trainer_free(r->tr);
    r->tr = NULL;
    r->trB = ATTN_MAX(r->trB, B), r->trTs = ATTN_MAX(r->trTs, Ts);
    r->trTt = ATTN_MAX(r->trTt, Tt);
    return attn_encdec_trainer_init(r->model, r->trB, r->trTs, r->trTt, attn_get_num_threads(),
                                    &r->tr);
}

static attn_status default_config(attn_encdec_config *c) {
    *c = attn_encdec_default_config();
    c->d_model = 256, c->n_head = 4, c->d_ff = 1024;
    c->n_enc_layers = 3, c->n_dec_layers = 3;
    c->max_len = 64;
    c->dropout = 0.1f;
    c->share_embeddings = true, c->tie_output = true;
    c->pre_ln = true;
    return ATTN_STATUS_OK;
}

/* Split, tokenizer, configuration, model: from the options (fresh) or from DIR (resume). */
static attn_status setup(run *r) {
    train_opts *o = &r->o;
    char *p_cfg = train_path_in(o->out, "config.json"), *p_tok = train_path_in(o->out, "tokenizer.json");
    if (!p_cfg || !p_tok) {
        free(p_cfg), free(p_tok);
        return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    attn_status s = ATTN_STATUS_OK;
    if (o->resume) {
        if (!attn_ckpt_exists(o->out))
            s = attn_set_error(ATTN_STATUS_NOT_FOUND,
                               "--resume: %s holds no checkpoint (training_state.json)", o->out);
        /* Read the run's options first: the state's "extra". */
        if (!s) {
            char *p_state = train_path_in(o->out, "training_state.json");
            json_t *j = NULL;
            s = train_load_state_json(p_state, &j);
            if (!s) s = opts_from_json(json_object_get(j, "extra"), o->out, o);
            json_decref(j);
            free(p_state);
        }
        if (!s) s = attn_encdec_config_load(p_cfg, &r->cfg);
        if (!s) s = attn_tok_load(p_tok, &r->tok);
    } else {
        s = train_fresh_out(o->out, o->out);
        if (!s)
            s = o->config ? attn_encdec_config_load_template(o->config, &r->cfg)
                          : default_config(&r->cfg);
        if (!s && o->dropout >= 0) r->cfg.dropout = (float)o->dropout;
    }
    if (s) goto done;

    s = attn_data_load_tsv(o->data, NULL, &r->corpus);
    if (s) goto done;
    attn_data_split_options so = attn_data_split_default_options();
    so.seed = o->seed;
    so.min_valid_pairs = o->valid_size;
    so.min_test_pairs = o->test_size;
    s = attn_data_split_make(&r->corpus, &so, &r->split);
    if (s) goto done;

    if (!o->resume) {
        /* The split, with attribution, and the test set as files for translate and bleu. */
        const char *names[3] = {"split-train.tsv", "split-valid.tsv", "split-test.tsv"};
        const size_t *idx[3] = {r->split.train, r->split.valid, r->split.test};
        size_t n[3] = {r->split.n_train, r->split.n_valid, r->split.n_test};
        for (int k = 0; k < 3 && !s; k++) {
            char *p = train_path_in(o->out, names[k]);
            s = p ? attn_data_write_tsv(&r->corpus, idx[k], n[k], p)
                  : attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
            free(p);
        }
        if (!s) {
            attn_data_refs tr;
            s = attn_data_refs_make(&r->corpus, r->split.test, r->split.n_test, &tr);
            if (!s) {
                char *ps = train_path_in(o->out, "test.src"), *pr = train_path_in(o->out, "test.ref");
                s = attn_data_refs_write(&tr, ps, pr);
                free(ps), free(pr);
                attn_data_refs_free(&tr);
            }
        }
        if (s) goto done;
        printf("data: %zu pairs from %s -> train %zu, valid %zu, test %zu (split by English "
               "sentence, seed %llu)\n",
               r->corpus.n, o->data, r->split.n_train, r->split.n_valid, r->split.n_test,
               (unsigned long long)o->seed);

        if (o->tokenizer) {
            s = attn_tok_load(o->tokenizer, &r->tok);
        } else {
            /* A shared vocabulary learned from both sides of the train split. */
            size_t n2 = 2 * r->split.n_train;
            const char **lines = malloc(n2 * sizeof *lines);
            if (!lines) {
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
            for (size_t i = 0; i < r->split.n_train; i++) {
                lines[2 * i] = r->corpus.src[r->split.train[i]];
                lines[2 * i + 1] = r->corpus.tgt[r->split.train[i]];
            }
            attn_tok_train_params tp = attn_tok_train_default_params();
            tp.vocab_size = o->vocab_size;
            double t0 = train_now_s();
            s = attn_tok_train_bpe(&tp, lines, NULL, n2, &r->tok);
            free(lines);
            if (!s)
                printf("tokenizer: BPE with byte fallback, %d ids, trained on the train split "
                       "in %.1f s\n",
                       (int)attn_tok_vocab_size(r->tok), train_now_s() - t0);
        }
        if (!s) s = attn_tok_save(r->tok, p_tok);
        if (s) goto done;
        r->cfg.src_vocab = r->cfg.tgt_vocab = attn_tok_vocab_size(r->tok);
        r->cfg.pad_id = attn_tok_special_id(r->tok, ATTN_TOK_PAD);
        if (r->cfg.pad_id < 0) {
            s = attn_set_error(ATTN_STATUS_FORMAT, "the tokenizer has no <pad> token");
            goto done;
        }
        s = attn_encdec_config_check(&r->cfg);
        if (!s) s = attn_encdec_config_save(p_cfg, &r->cfg);
        if (s) goto done;
    }
    if (r->cfg.src_vocab != attn_tok_vocab_size(r->tok) ||
        r->cfg.tgt_vocab != attn_tok_vocab_size(r->tok)) {
        s = attn_set_error(ATTN_STATUS_FORMAT,
                           "%s: vocabulary sizes %d/%d differ from the tokenizer's %d", p_cfg,
                           r->cfg.src_vocab, r->cfg.tgt_vocab, (int)attn_tok_vocab_size(r->tok));
        goto done;
    }
    s = attn_encdec_model_init(&r->cfg, o->seed, &r->model);
done:
    free(p_cfg), free(p_tok);
    return s;
}

static attn_status setup_training(run *r) {
    train_opts *o = &r->o;
    attn_encdec_model *m = r->model;
    /* Checkpoint tensors and optimizer ranges from the model's tensor table. Vectors (biases,
     * LayerNorm) get no weight decay. */
    TRAIN_TRY(train_tables_alloc(m->n_tensors, &r->tensors, &r->ranges));
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_encdec_tensor *t = &m->tensors[i];
        train_table_set(&r->tensors[i], &r->ranges[i], t->name, t->ndim, t->shape, m->params,
                        t->offset, t->numel, t->ndim > 1);
    }
    r->nranges = m->n_tensors;
    attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    op.beta1 = 0.9, op.beta2 = 0.98, op.eps = 1e-9; /* the paper's Adam settings */
    op.weight_decay = o->weight_decay;
    TRAIN_TRY(attn_optim_create(&op, m->num_params, r->ranges, r->nranges, &r->opt));

    attn_data_encode_options eo = attn_data_encode_default_options();
    eo.max_len = r->cfg.max_len;
    TRAIN_TRY(attn_data_encode(&r->corpus, r->split.train, r->split.n_train, r->tok, &eo, &r->train));
    eo.truncate = true; /* validation keeps every pair */
    TRAIN_TRY(attn_data_encode(&r->corpus, r->split.valid, r->split.n_valid, r->tok, &eo, &r->valid));
    TRAIN_TRY(attn_data_refs_make(&r->corpus, r->split.valid, r->split.n_valid, &r->valid_refs));
    attn_data_batch_options bo = attn_data_batch_default_options();
    bo.max_tokens = o->max_tokens;
    bo.seed = o->seed;
    TRAIN_TRY(attn_data_loader_new(r->train, &bo, &r->loader));

    r->cs = attn_ckpt_state_init();
    if (o->resume) {
        TRAIN_TRY(attn_ckpt_load(o->out, r->tensors, r->nranges, r->opt, &r->cs));
        attn_data_pos pos = {(uint64_t)r->cs.epoch, (uint64_t)r->cs.data_position};
        TRAIN_TRY(attn_data_loader_seek(r->loader, pos));
        printf("resumed %s at step %lld (epoch %lld, batch %lld)\n", o->out,
               (long long)r->cs.step, (long long)r->cs.epoch, (long long)r->cs.data_position);
    }
    return ATTN_STATUS_OK;
}

static attn_status save(run *r, int64_t step, double lr) {
    attn_data_pos pos = attn_data_loader_tell(r->loader);
    return train_save(r->o.out, r->tensors, r->nranges, r->opt, &r->cs, step, (int64_t)pos.epoch,
                      (int64_t)pos.batch, lr, opts_to_json(&r->o));
}

/* Mean cross-entropy (no label smoothing) over the validation set, token-weighted. */
static attn_status valid_loss(run *r, double *out) {
    attn_data_range *ranges = NULL;
    size_t nr = 0;
    TRAIN_TRY(attn_data_dataset_plan_fixed(r->valid, 0, r->o.max_tokens, &ranges, &nr));
    double sum = 0, tokens = 0;
    attn_status s = ATTN_STATUS_OK;
    size_t *rows = malloc(r->valid->n * sizeof *rows);
    if (!rows) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < r->valid->n && rows; i++) rows[i] = i;
    attn_data_batch b;
    memset(&b, 0, sizeof b);
    for (size_t k = 0; k < nr && !s; k++) {
        s = attn_data_batch_fill(r->valid, rows + ranges[k].begin, ranges[k].end - ranges[k].begin,
                                 &b);
        if (!s) s = ensure_state(r, b.B, b.Ts, b.Tt);
        if (s) break;
        attn_encdec_set_train(r->st, false, 0, 0);
        s = attn_encdec_forward(r->model, r->st, b.B, b.Ts, b.Tt, b.src, b.src_len, b.tgt_in,
                                b.tgt_len, NULL);
        float l = 0;
        if (!s) s = attn_encdec_loss(r->model, r->st, b.tgt_out, 0.0f, &l);
        sum += (double)l * (double)b.n_tokens;
        tokens += (double)b.n_tokens;
    }
    attn_data_batch_free(&b);
    free(rows);
    attn_free(ranges);
    *out = tokens > 0 ? sum / tokens : 0;
    return s;
}

/* BLEU (sacreBLEU zh) of greedy translations of the first n validation sources. */
static attn_status valid_bleu(run *r, int n, double *out) {
    *out = 0;
    attn_data_refs *vr = &r->valid_refs;
    size_t ns = ATTN_MIN((size_t)n, vr->n);
    if (ns == 0) return ATTN_STATUS_OK;
    attn_translate_session *sess = NULL;
    TRAIN_TRY(attn_translate_session_init(r->model, 64, 1, r->cfg.max_len, r->cfg.max_len, &sess));
    attn_translate_options to = attn_translate_default_options();
    to.beam_size = 1;
    to.bos_id = attn_tok_special_id(r->tok, ATTN_TOK_BOS);
    to.eos_id = attn_tok_special_id(r->tok, ATTN_TOK_EOS);
    char **hyp = calloc(ns, sizeof *hyp);
    attn_status s = hyp ? attn_translate_texts(sess, &to, r->tok, vr->src, ns, hyp, NULL, NULL)
                        : attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    if (!s) {
        const char *const *refs[64];
        size_t R = ATTN_MIN(vr->n_refs, (size_t)64);
        for (size_t k = 0; k < R; k++) refs[k] = vr->refs[k];
        attn_bleu_result res;
        s = attn_bleu_corpus(ns, (const char *const *)hyp, R, refs, NULL, &res);
        if (!s) *out = res.score;
        for (size_t i = 0; i < ns; i++) attn_free(hyp[i]);
    }
    free(hyp);
    attn_translate_session_free(sess);
    return s;
}

static void progress(const run *r, int64_t step, double loss, double lr, double tok_s,
                     double elapsed, double eta) {
    attn_data_pos pos = attn_data_loader_tell(r->loader);
    char where[80];
    snprintf(where, sizeof where, "step %6lld | epoch %3llu", (long long)step,
             (unsigned long long)pos.epoch + 1);
    train_progress(where, loss, lr, tok_s, elapsed, eta);
}

static int train_loop(run *r) {
    train_opts *o = &r->o;
    int64_t step = r->cs.step;
    if (!o->max_steps && !o->time_budget && !o->epochs) o->epochs = 20;
    size_t per_epoch = attn_data_loader_num_batches(r->loader);
    printf("model: %zu parameters (d_model %d, %d heads, d_ff %d, %d+%d layers, %s, dropout %.2f)"
           "; %zu train pairs in %zu batches of <= %zu padded tokens; %d threads, %s kernels\n",
           r->model->num_params, r->cfg.d_model, r->cfg.n_head, r->cfg.d_ff, r->cfg.n_enc_layers,
           r->cfg.n_dec_layers, r->cfg.pre_ln ? "pre-LN" : "post-LN", (double)r->cfg.dropout,
           r->train->n, per_epoch, o->max_tokens, attn_get_num_threads(),
           attn_backend_name(attn_get_backend()));
    int64_t end_step = o->max_steps ? o->max_steps : INT64_MAX;
    if (o->epochs) {
        int64_t e = o->epochs * (int64_t)per_epoch; /* approximate: batches per epoch vary */
        if (e < end_step) end_step = e;
    }
    train_catch_signals();

    const double t_start = train_now_s();
    double t_log = t_start, win_loss = 0, win_tok = 0, total_tok = 0, lr = 0;
    double last_loss = NAN;
    attn_status s = ATTN_STATUS_OK;
    const char *why = "done";
    while (step < end_step) {
        const char *stop = train_stop_reason(t_start, o->time_budget);
        if (stop) {
            why = stop;
            break;
        }
        s = attn_data_loader_next(r->loader, &r->batch);
        attn_data_batch *b = &r->batch;
        if (!s) s = ensure_trainer(r, b->B, b->Ts, b->Tt);
        if (s) break;
        float loss = 0;
        attn_encdec_zero_grad(r->model);
        s = attn_encdec_train_step(r->tr, true, o->seed, (uint64_t)step, b->B, b->Ts, b->Tt,
                                   b->src, b->src_len, b->tgt_in, b->tgt_len, b->tgt_out,
                                   (float)o->label_smoothing, &loss);
        if (s) break;
        const double step_lr = attn_lr_inv_sqrt(step, o->lr, o->warmup);
        /* finiteness check, clipping (o->clip > 0) and the update in one */
        s = attn_optim_clip_step(r->opt, r->model->params, r->model->grads, o->clip, step_lr,
                                 r->ranges, r->nranges, NULL);
        if (s) break;
        lr = step_lr;
        step++;
        last_loss = loss;
        int64_t src_tok = 0;
        for (int i = 0; i < b->B; i++) src_tok += b->src_len[i];
        win_loss += (double)loss * (double)b->n_tokens;
        win_tok += (double)b->n_tokens;
        total_tok += (double)(b->n_tokens + src_tok);
        if (step % o->log_every == 0 || step == end_step) {
            double t = train_now_s(), el = t - t_start;
            double rate = total_tok / (el > 0 ? el : 1);
            double eta = train_eta(el / (double)(step - r->cs.step),
                                   end_step != INT64_MAX ? end_step - step : -1, o->time_budget, el);
            progress(r, step, win_loss / (win_tok > 0 ? win_tok : 1), lr, rate, el, eta);
            win_loss = win_tok = 0;
            t_log = t;
        }
        if (step % o->eval_every == 0) {
            double vl = 0, bleu = 0;
            double t0 = train_now_s();
            s = valid_loss(r, &vl);
            if (!s && o->bleu_sentences) s = valid_bleu(r, o->bleu_sentences, &bleu);
            if (s) break;
            if (vl < r->cs.best_valid_loss) r->cs.best_valid_loss = vl;
            printf("valid  %6lld | loss %7.4f | ppl %8.2f | BLEU %5.2f (greedy, %d sentences) | "
                   "%.1f s\n",
                   (long long)step, vl, exp(vl), bleu,
                   (int)ATTN_MIN((size_t)o->bleu_sentences, r->valid_refs.n), train_now_s() - t0);
            fflush(stdout);
        }
        if (step % o->save_every == 0) {
            s = save(r, step, lr);
            if (s) break;
        }
    }
    (void)t_log;
    if (s) {
        /* Keep what was learned if the failure was not the save itself. */
        fprintf(stderr, "attn: error: %s\n", attn_last_error());
        return CLI_EXIT_FAIL;
    }
    s = save(r, step, lr);
    if (s) return cli_fail(s);
    double el = train_now_s() - t_start;
    double vl = 0;
    if (valid_loss(r, &vl)) return cli_fail(ATTN_STATUS_IO);
    printf("%s: step %lld, train loss %.4f, valid loss %.4f, %.0f s, tokens/s=%.0f; saved %s\n",
           why, (long long)step, last_loss, vl, el, total_tok / (el > 0 ? el : 1), o->out);
    return CLI_EXIT_OK;
}

int cmd_train(int argc, char **argv) {
    if (cmd_train_gpt_wanted(argc, argv)) return cmd_train_gpt(argc, argv);
    if (cmd_train_bert_wanted(argc, argv)) return cmd_train_bert(argc, argv);
    run r;
    memset(&r, 0, sizeof r);
    r.o = default_opts();
    int rc = parse_args(argc, argv, &r.o);
    if (rc >= 0) return rc;
    attn_status s = setup(&r);
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

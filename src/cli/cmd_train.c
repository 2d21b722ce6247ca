/* cmd_train.c — `attn train`: train the encoder–decoder translation model (issue 3) on a TSV
 * parallel corpus, with a progress line, periodic validation (loss and BLEU), crash-safe
 * checkpoints, exact resume, Ctrl-C and a time budget. The loop itself is train_loop.c's; this file
 * is the translator's data, model, step and validation.
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
#include "cmd_train_bert.h"
#include "cmd_train_gpt.h"
#include "train_loop.h"

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

/* ---- options -------------------------------------------------------------------------------- */

static const char *const default_text[] = {
    "--epochs", "20 when neither --max-steps nor --time-budget is given", NULL};

static const train_family_info *const also_help[] = {&cmd_train_gpt_family, &cmd_train_llama_family,
                                                     &cmd_train_bert_family,
                                                     NULL};

static const train_family_info family = {
    .family = TRAIN_ENCDEC,
    .arch = "encdec",
    .usage =
        "usage: attn train [--arch encdec] --data FILE.tsv --out DIR [options]\n"
        "       attn train --out DIR --resume [--max-steps N] [--time-budget SECONDS]\n"
        "\n"
        "Trains the encoder-decoder Transformer on a parallel corpus\n"
        "(source<TAB>target[<TAB>...], e.g. ../shared/data/tatoeba-eng-cmn/cmn.txt) and writes a\n"
        "model directory for 'attn translate'. Ctrl-C saves a checkpoint and exits; --resume\n"
        "continues it exactly.\n",
    .own_data =
        "  --config FILE        model configuration JSON (attn_models.h field names); default: a\n"
        "                       small model (d_model 256, 4 heads, d_ff 1024, 3+3 layers, pre-LN,\n"
        "                       shared and tied embeddings, max_len 64)\n"
        "  --tokenizer PATH     an existing tokenizer.json (default: train a BPE on the train\n"
        "                       split)\n"
        "  --vocab-size N       size of the trained tokenizer (default 8000)\n"
        "  --valid-size N       at least N pairs for validation (default 1000)\n"
        "  --test-size N        at least N pairs for test (default 1000)\n",
    .own_optimization =
        "  --max-tokens N       padded tokens per batch, B x max(Ts, Tt) (default 6000)\n"
        "  --batch N            at most N sentence pairs per batch (default: no cap; --max-tokens\n"
        "                       cuts the batches)\n"
        "  --label-smoothing X  (default 0.1)\n"
        "  The schedule is linear warmup, then inverse-square-root decay.\n",
    .own_stopping =
        "  --bleu-sentences N   validation sentences translated (greedy) for BLEU at each\n"
        "                       validation (default 300; 0 = off)\n",
    .notes =
        "A token, for tokens/s, is a non-pad source or target token of a batch (source tokens\n"
        "with </s>, target tokens with </s>). Defaults that differ from the other families are\n"
        "the paper's (Vaswani et al. 2017): Adam betas (0.9, 0.98), eps 1e-9, no weight decay,\n"
        "label smoothing 0.1, warmup then 1/sqrt(step); its warmup 4000 and 25000-token batches\n"
        "are scaled down to warmup 400 and --max-tokens 6000 for the small default model.\n",
    .default_text = default_text,
    .more_help = also_help,
    .defaults = {.seed = 1,
                 .lr = 1e-3,
                 .warmup = 400,
                 .decay_steps = -1,
                 .grad_clip = 1.0,
                 .weight_decay = 0.0,
                 .beta1 = 0.9,
                 .beta2 = 0.98,
                 .adam_eps = 1e-9,
                 .dropout = -1,
                 .batch = 0,
                 .max_steps = -1,
                 .eval_every = 500,
                 .save_every = 1000,
                 .log_every = 20},
};

typedef struct {
    train_opts c; /* the shared ones */
    int vocab_size;
    size_t valid_size, test_size, max_tokens;
    double label_smoothing;
    int bleu_sentences;
} enc_opts;

/* Returns -1 on success, else the exit code. */
static int parse_args(int argc, char **argv, enc_opts *o) {
    /* `attn train --help` shows every family; `attn train --arch encdec --help` this one */
    train_family_info fam = family;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--arch")) fam.more_help = NULL;
    o->c = family.defaults;
    o->vocab_size = 8000;
    o->valid_size = 1000, o->test_size = 1000;
    o->max_tokens = 6000;
    o->label_smoothing = 0.1;
    o->bleu_sentences = 300;
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        int rc = train_next_arg(argc, argv, &i, &fam, &o->c, &a, &v);
        if (rc >= 0) return rc;
        if (!a) continue; /* a shared option */
#define OPT(name, lo, hi, field)                                                                 \
    CLI_INT_OPT("train", name, lo, hi, o->field, TRAIN_FIXED(&o->c, name))
        OPT("--vocab-size", 300, 1000000, vocab_size)
        OPT("--valid-size", 1, 100000000, valid_size)
        OPT("--test-size", 1, 100000000, test_size)
        OPT("--max-tokens", 16, 100000000, max_tokens)
        CLI_REAL_OPT("train", "--label-smoothing", 0, 1, o->label_smoothing,
                     TRAIN_FIXED(&o->c, "--label-smoothing"))
        CLI_INT_OPT("train", "--bleu-sentences", 0, 100000000, o->bleu_sentences, )
#undef OPT
        return train_unknown_option(&family, a);
    }
    int rc = train_check_args(&family, &o->c);
    if (rc >= 0) return rc;
    if (o->c.warmup < 1)
        return cli_usage_error("train: --warmup-steps must be at least 1 (inverse-square-root "
                               "schedule)");
    return -1;
}

/* The options that define the run, saved in the training state so --resume repeats it. */
static json_t *opts_to_json(const enc_opts *o) {
    json_t *j = json_object();
    json_object_set_new(j, "arch", json_string("encdec"));
    train_opts_to_json(&o->c, j);
    json_object_set_new(j, "vocab_size", json_integer(o->vocab_size));
    json_object_set_new(j, "valid_size", json_integer((json_int_t)o->valid_size));
    json_object_set_new(j, "test_size", json_integer((json_int_t)o->test_size));
    json_object_set_new(j, "max_tokens", json_integer((json_int_t)o->max_tokens));
    json_object_set_new(j, "label_smoothing", json_real(o->label_smoothing));
    return j;
}

static attn_status opts_from_json(const json_t *j, const char *dir, enc_opts *o) {
    const char *data = json_string_value(json_object_get(j, "data"));
    const char *arch = json_string_value(json_object_get(j, "arch"));
    if (!json_is_object(j) || !data || (arch && strcmp(arch, "encdec") != 0))
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/training_state.json: \"extra\" lacks the run's options "
                              "(not a checkpoint written by attn train)",
                              dir);
    static char data_copy[4096];
    snprintf(data_copy, sizeof data_copy, "%s", data);
    o->c.data = data_copy;
    train_opts_from_json(j, &o->c); /* older checkpoints: no betas, eps, batch (the defaults) */
    o->vocab_size = (int)json_integer_value(json_object_get(j, "vocab_size"));
    o->valid_size = (size_t)json_integer_value(json_object_get(j, "valid_size"));
    o->test_size = (size_t)json_integer_value(json_object_get(j, "test_size"));
    o->max_tokens = (size_t)json_integer_value(json_object_get(j, "max_tokens"));
    o->label_smoothing = json_number_value(json_object_get(j, "label_smoothing"));
    if (o->max_tokens < 16 || o->c.warmup < 1 || o->vocab_size < 300 || o->c.batch < 0)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/training_state.json: \"extra\" holds invalid options", dir);
    return ATTN_STATUS_OK;
}

/* ---- the run --------------------------------------------------------------------------------- */

typedef struct {
    enc_opts o;
    attn_data_corpus corpus;
    attn_data_split split;
    attn_tok *tok;
    attn_encdec_config cfg;
    attn_encdec_model *model;
    attn_encdec_state *st;         /* evaluation (validation loss) */
    int capB, capTs, capTt;
    attn_encdec_trainer *tr;       /* training steps: data-parallel over the threads */
    int trB, trTs, trTt;
    attn_data_dataset *train, *valid;
    attn_data_loader *loader;
    attn_data_batch batch;
    attn_data_refs valid_refs;
    train_loop L;
} run;

static void run_free(run *r) {
    attn_data_batch_free(&r->batch);
    attn_data_loader_free(r->loader);
    attn_data_dataset_free(r->train);
    attn_data_dataset_free(r->valid);
    attn_data_refs_free(&r->valid_refs);
    train_loop_free(&r->L);
    attn_encdec_state_free(r->st);
    attn_encdec_trainer_free(r->tr);
    attn_encdec_model_free(r->model);
    attn_tok_free(r->tok);
    attn_data_split_free(&r->split);
    attn_data_corpus_free(&r->corpus);
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
    TRAIN_TRY(attn_encdec_trainer_init(r->model, r->trB, r->trTs, r->trTt,
                                       train_loop_replicas(r->model->num_params), &r->tr));
    attn_encdec_trainer_set_dist(r->tr, train_dist());
    attn_encdec_trainer_set_overlap(r->tr, true); /* one batch per step */
    return ATTN_STATUS_OK;
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
    enc_opts *o = &r->o;
    char *p_cfg = train_path_in(o->c.out, "config.json");
    char *p_tok = train_path_in(o->c.out, "tokenizer.json");
    if (!p_cfg || !p_tok) {
        free(p_cfg), free(p_tok);
        return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    attn_status s = ATTN_STATUS_OK;
    if (o->c.resume) {
        if (!attn_ckpt_exists(o->c.out))
            s = attn_set_error(ATTN_STATUS_NOT_FOUND,
                               "--resume: %s holds no checkpoint (training_state.json)", o->c.out);
        /* Read the run's options first: the state's "extra". */
        if (!s) {
            char *p_state = train_path_in(o->c.out, "training_state.json");
            json_t *j = NULL;
            s = train_load_state_json(p_state, &j);
            if (!s) s = opts_from_json(json_object_get(j, "extra"), o->c.out, o);
            json_decref(j);
            free(p_state);
        }
        if (!s) s = attn_encdec_config_load(p_cfg, &r->cfg);
        if (!s) s = attn_tok_load(p_tok, &r->tok);
    } else {
        s = train_fresh_out(o->c.out, o->c.out);
        if (!s)
            s = o->c.config ? attn_encdec_config_load_template(o->c.config, &r->cfg)
                          : default_config(&r->cfg);
        if (!s && o->c.dropout >= 0) r->cfg.dropout = (float)o->c.dropout;
    }
    if (s) goto done;

    s = attn_data_load_tsv(o->c.data, NULL, &r->corpus);
    if (s) goto done;
    attn_data_split_options so = attn_data_split_default_options();
    so.seed = o->c.seed;
    so.min_valid_pairs = o->valid_size;
    so.min_test_pairs = o->test_size;
    s = attn_data_split_make(&r->corpus, &so, &r->split);
    if (s) goto done;

    if (!o->c.resume) {
        /* The split, with attribution, and the test set as files for translate and bleu. */
        const char *names[3] = {"split-train.tsv", "split-valid.tsv", "split-test.tsv"};
        const size_t *idx[3] = {r->split.train, r->split.valid, r->split.test};
        size_t n[3] = {r->split.n_train, r->split.n_valid, r->split.n_test};
        for (int k = 0; k < 3 && !s && train_writer(); k++) {
            char *p = train_path_in(o->c.out, names[k]);
            s = p ? attn_data_write_tsv(&r->corpus, idx[k], n[k], p)
                  : attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
            free(p);
        }
        if (!s && train_writer()) {
            attn_data_refs tr;
            s = attn_data_refs_make(&r->corpus, r->split.test, r->split.n_test, &tr);
            if (!s) {
                char *ps = train_path_in(o->c.out, "test.src");
                char *pr = train_path_in(o->c.out, "test.ref");
                s = attn_data_refs_write(&tr, ps, pr);
                free(ps), free(pr);
                attn_data_refs_free(&tr);
            }
        }
        if (s) goto done;
        printf("data: %zu pairs from %s -> train %zu, valid %zu, test %zu (split by English "
               "sentence, seed %llu)\n",
               r->corpus.n, o->c.data, r->split.n_train, r->split.n_valid, r->split.n_test,
               (unsigned long long)o->c.seed);

        if (o->c.tokenizer) {
            s = attn_tok_load(o->c.tokenizer, &r->tok);
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
        if (!s && train_writer()) s = attn_tok_save(r->tok, p_tok);
        if (s) goto done;
        r->cfg.src_vocab = r->cfg.tgt_vocab = attn_tok_vocab_size(r->tok);
        r->cfg.pad_id = attn_tok_special_id(r->tok, ATTN_TOK_PAD);
        if (r->cfg.pad_id < 0) {
            s = attn_set_error(ATTN_STATUS_FORMAT, "the tokenizer has no <pad> token");
            goto done;
        }
        s = attn_encdec_config_check(&r->cfg);
        if (!s && train_writer()) s = attn_encdec_config_save(p_cfg, &r->cfg);
        if (s) goto done;
    }
    if (r->cfg.src_vocab != attn_tok_vocab_size(r->tok) ||
        r->cfg.tgt_vocab != attn_tok_vocab_size(r->tok)) {
        s = attn_set_error(ATTN_STATUS_FORMAT,
                           "%s: vocabulary sizes %d/%d differ from the tokenizer's %d", p_cfg,
                           r->cfg.src_vocab, r->cfg.tgt_vocab, (int)attn_tok_vocab_size(r->tok));
        goto done;
    }
    s = attn_encdec_model_init(&r->cfg, o->c.seed, &r->model);
done:
    free(p_cfg), free(p_tok);
    return s;
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


/* ---- the loop's hooks ------------------------------------------------------------------------ */

static attn_status next_batch(void *ctx, int64_t step) {
    (void)step; /* the loader's position is the run's: (epoch, batch) */
    run *r = ctx;
    TRAIN_TRY(attn_data_loader_next(r->loader, &r->batch));
    return ensure_trainer(r, r->batch.B, r->batch.Ts, r->batch.Tt);
}

static double lr_at(void *ctx, int64_t step) {
    const run *r = ctx;
    return attn_lr_inv_sqrt(step, r->o.c.lr, r->o.c.warmup);
}

static attn_status train_step(void *ctx, int64_t step, train_step_out *out) {
    run *r = ctx;
    const attn_data_batch *b = &r->batch;
    float loss = 0;
    attn_encdec_zero_grad(r->model);
    TRAIN_TRY(attn_encdec_train_step(r->tr, true, r->o.c.seed, (uint64_t)step, b->B, b->Ts, b->Tt,
                                     b->src, b->src_len, b->tgt_in, b->tgt_len, b->tgt_out,
                                     (float)r->o.label_smoothing, &loss));
    int64_t src_tok = 0;
    for (int i = 0; i < b->B; i++) src_tok += b->src_len[i];
    out->loss = loss;
    out->weight = (double)b->n_tokens; /* the loss is a mean over the target tokens */
    out->tokens = (double)(b->n_tokens + src_tok);
    return ATTN_STATUS_OK;
}

static attn_status evaluate(void *ctx, train_eval_out *out) {
    run *r = ctx;
    TRAIN_TRY(valid_loss(r, &out->loss));
    if (r->o.bleu_sentences) {
        TRAIN_TRY(valid_bleu(r, r->o.bleu_sentences, &out->bleu));
        snprintf(out->detail, sizeof out->detail, "BLEU %5.2f (greedy, %d sentences)", out->bleu,
                 (int)ATTN_MIN((size_t)r->o.bleu_sentences, r->valid_refs.n));
    }
    return ATTN_STATUS_OK;
}

static void position(void *ctx, int64_t *epoch, int64_t *pos, int64_t *shown) {
    const run *r = ctx;
    attn_data_pos p = attn_data_loader_tell(r->loader);
    *epoch = (int64_t)p.epoch, *pos = (int64_t)p.batch, *shown = (int64_t)p.epoch + 1;
}

static json_t *run_options(void *ctx) { return opts_to_json(&((run *)ctx)->o); }

static attn_status setup_training(run *r) {
    enc_opts *o = &r->o;
    attn_encdec_model *m = r->model;
    train_loop *L = &r->L;
    /* Checkpoint tensors and optimizer ranges from the model's tensor table. Vectors (biases,
     * LayerNorm) get no weight decay. */
    TRAIN_TRY(train_loop_tables(L, m->tensors, m->n_tensors, m->params));
    TRAIN_TRY(train_loop_optim(L, m->num_params, &o->c));

    attn_data_encode_options eo = attn_data_encode_default_options();
    eo.max_len = r->cfg.max_len;
    TRAIN_TRY(
        attn_data_encode(&r->corpus, r->split.train, r->split.n_train, r->tok, &eo, &r->train));
    eo.truncate = true; /* validation keeps every pair */
    TRAIN_TRY(
        attn_data_encode(&r->corpus, r->split.valid, r->split.n_valid, r->tok, &eo, &r->valid));
    TRAIN_TRY(attn_data_refs_make(&r->corpus, r->split.valid, r->split.n_valid, &r->valid_refs));
    attn_data_batch_options bo = attn_data_batch_default_options();
    bo.max_tokens = o->max_tokens;
    bo.max_sentences = (size_t)o->c.batch;
    bo.seed = o->c.seed;
    TRAIN_TRY(attn_data_loader_new(r->train, &bo, &r->loader));

    L->ctx = r;
    L->ckpt_dir = o->c.out;
    L->resume = o->c.resume;
    L->out = o->c.out;
    TRAIN_TRY(train_loop_resume(L, true));
    if (o->c.resume) {
        attn_data_pos pos = {(uint64_t)L->cs.epoch, (uint64_t)L->cs.data_position};
        TRAIN_TRY(attn_data_loader_seek(r->loader, pos));
    }
    L->next_batch = next_batch, L->lr_at = lr_at, L->train_step = train_step;
    L->evaluate = evaluate, L->position = position, L->run_options = run_options;
    L->params = m->params, L->grads = m->grads;
    train_loop_set(L, &o->c);
    size_t per_epoch = attn_data_loader_num_batches(r->loader);
    if (o->c.max_steps < 0 && !o->c.time_budget && !o->c.epochs) o->c.epochs = 20;
    if (o->c.epochs) {
        int64_t e = o->c.epochs * (int64_t)per_epoch; /* approximate: batches per epoch vary */
        if (e < L->end_step) L->end_step = e;
    }
    printf("model: %zu parameters (d_model %d, %d heads, d_ff %d, %d+%d layers, %s, dropout %.2f)"
           "; %zu train pairs in %zu batches of <= %zu padded tokens; %d threads, %s kernels\n",
           r->model->num_params, r->cfg.d_model, r->cfg.n_head, r->cfg.d_ff, r->cfg.n_enc_layers,
           r->cfg.n_dec_layers, r->cfg.pre_ln ? "pre-LN" : "post-LN", (double)r->cfg.dropout,
           r->train->n, per_epoch, o->max_tokens, attn_get_num_threads(),
           attn_backend_name(attn_get_backend()));
    return ATTN_STATUS_OK;
}

static int train_encdec(int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    int rc = parse_args(argc, argv, &r.o);
    if (rc >= 0) return rc;
    attn_status s = setup(&r);
    if (!s) s = setup_training(&r);
    rc = s ? cli_fail(s) : train_run(&r.L);
    run_free(&r);
    return rc;
}

/* Every family, under `mpirun -np N` as one rank of N (train_dist_begin / train_dist_end). */
int cmd_train(int argc, char **argv) {
    int rc = train_dist_begin();
    if (rc >= 0) return rc;
    if (cmd_train_gpt_wanted(argc, argv)) rc = cmd_train_gpt(argc, argv);
    else if (cmd_train_bert_wanted(argc, argv)) rc = cmd_train_bert(argc, argv);
    else rc = train_encdec(argc, argv);
    return train_dist_end(rc);
}

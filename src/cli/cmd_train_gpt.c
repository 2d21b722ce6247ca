/* cmd_train_gpt.c — `attn train --arch gpt`: train a GPT-2 language model (attn_gpt.h) on a text
 * file, nanoGPT style: the first 90% of the tokens train, the last 10% validate; batches are
 * random windows of n_positions + 1 tokens (attn_data_lm_batch); AdamW with weight decay on the
 * 2-D tensors, linear warmup then cosine decay to min_lr, gradient clipping, gradient
 * accumulation, dropout. The loop (progress line, validation, crash-safe checkpoints, exact
 * resume) is train_loop.c's; this file is GPT's data, model, step and validation.
 *
 * The output directory is both the checkpoint and a model directory for `attn generate`:
 *   config.json (Hugging Face GPT2Config)  tokenizer.json  model.safetensors (the tensors under
 *   their Hugging Face names)  optimizer.safetensors  training_state.json
 * written by attn_ckpt_save's atomic directory swap (config.json and tokenizer.json are written
 * once at the start and carried over by every save).
 *
 * Determinism: micro-batch g = step · grad_accum + micro is window batch g of the run's training
 * stream and validation uses batches 0 .. K-1 of its validation stream (attn_data_lm_batch:
 * Philox streams of (seed, "train" / "valid"), nanoGPT's torch.randint(len(data) − T, (B,))),
 * dropout masks are a function of (seed, g), and the optimizer state is saved bit for bit — so a
 * resumed run repeats the uninterrupted run's losses exactly, given the same thread count.
 * tools/ref_gpt_train.py re-implements the sampler in Python (the PyTorch twin trains on the very
 * same batches). */
#include "cli.h"
#include "cmd_train_gpt.h"
#include "train_loop.h"

#include "attn_chat.h"
#include "attn_data.h"
#include "attn_gpt.h"
#include "attn_kernels.h"
#include "attn_tok.h"
#include "attn_train.h"

#include <errno.h>
#include <limits.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* nanoGPT's config/train_shakespeare_char.py with the README's CPU overrides. */
static const char default_config_json[] =
    "{\"n_layer\": 4, \"n_head\": 4, \"n_embd\": 128, \"n_positions\": 64, "
    "\"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0, \"attn_pdrop\": 0.0}";

/* A Llama of the same size class (4 layers, width 128, 4 query and 2 key/value heads, SwiGLU
 * width 344 ~ 8/3 · 128 rounded to 8, context 64). */
static const char default_llama_config_json[] =
    "{\"model_type\": \"llama\", \"num_hidden_layers\": 4, \"num_attention_heads\": 4, "
    "\"num_key_value_heads\": 2, \"hidden_size\": 128, \"intermediate_size\": 344, "
    "\"max_position_embeddings\": 64, \"rope_theta\": 10000.0}";

/* ---- options -------------------------------------------------------------------------------- */

/* Both decoder families' defaults: nanoGPT's shakespeare-char settings. */
#define NANOGPT_DEFAULTS                                                                          \
    .seed = 1337, .lr = 1e-3, .warmup = 100, .decay_steps = -1, .grad_clip = 1.0,                \
    .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.99, .adam_eps = 1e-8, .dropout = -1,           \
    .batch = 12, .max_steps = 2000, .eval_every = 250, .save_every = 1000, .log_every = 10

/* The optimization options both decoder families take. */
#define OWN_OPTIMIZATION \
    "  --batch N            sequences per micro-batch (default 12)\n" \
    "  --grad-accum N       micro-batches per optimizer step (default 1)\n" \
    "  --min-lr X           learning rate at the end of the cosine decay (default: --lr / 10)\n" \
    "  --lr-decay-steps N   the cosine reaches min-lr at this step, then stays there\n" \
    "                       (default: --max-steps of the first run; also --decay-steps)\n" \
    "  --precision f32|bf16 matrix products in float32 (default: PyTorch's numbers) or bf16:\n" \
    "                       operands rounded to bfloat16, float32 sums, as PyTorch's CPU\n" \
    "                       autocast (CPUs with AVX512-BF16; weights, gradients, optimizer\n" \
    "                       stay float32)\n"


static const char *const default_text[] = {
    "--max-steps", "2000; 0 = save the initial model, evaluate it and exit", NULL};

const train_family_info cmd_train_gpt_family = {
    .family = TRAIN_GPT,
    .arch = "gpt",
    .usage =
        "usage: attn train --arch gpt --data FILE --out DIR [--config FILE.json]\n"
        "                  [--tokenizer char|PATH] [--batch N] [--max-steps N] [options]\n"
        "       attn train --arch gpt --out DIR --resume [--max-steps N] [--time-budget S]\n"
        "\n"
        "Trains a GPT-2 language model (decoder only) on a UTF-8 text file, as nanoGPT does: the\n"
        "first 90% of the tokens train, the last 10% validate; each batch is N random windows of\n"
        "n_positions + 1 tokens. DIR becomes a Hugging Face model directory (config.json,\n"
        "model.safetensors, tokenizer.json) plus the optimizer and training state; 'attn generate\n"
        "--model DIR' samples from it. Ctrl-C saves a checkpoint and exits; --resume continues it\n"
        "exactly (the same losses, bit for bit, with the same --threads).\n",
    .own_data =
        "  --config FILE        GPT2Config JSON (n_layer, n_head, n_embd, n_positions = the\n"
        "                       context length, resid_pdrop, embd_pdrop, ...; see\n"
        "                       include/attn_gpt.h); vocab_size may be omitted (the tokenizer's\n"
        "                       size), attn_pdrop must be 0 or absent. Default: nanoGPT's\n"
        "                       shakespeare-char CPU model (4 layers, 4 heads, width 128, context\n"
        "                       64, no dropout) = configs/gpt-shakespeare-char.json\n"
        "  --tokenizer char|PATH  char (default): one id per character, the sorted characters of\n"
        "                       the file; or a tokenizer.json / a directory with one (or GPT-2's\n"
        "                       vocab.json + merges.txt)\n",
    .own_optimization = OWN_OPTIMIZATION,
    .own_stopping =
        "  --eval-iters K       validation batches per evaluation (default 20; the same K each\n"
        "                       time)\n",
    .notes =
        "A token, for tokens/s, is a position of a training window: B x n_positions x grad-accum\n"
        "per step. Defaults that differ from the other families are nanoGPT's shakespeare-char\n"
        "settings (config/train_shakespeare_char.py with its README's CPU overrides): seed 1337,\n"
        "batch 12, warmup 100, weight decay 0.1, beta2 0.99, eval every 250, log every 10,\n"
        "2000 steps.\n",
    .default_text = default_text,
    .defaults = {NANOGPT_DEFAULTS, .tokenizer = "char"},
};

const train_family_info cmd_train_llama_family = {
    .family = TRAIN_GPT,
    .arch = "llama",
    .usage =
        "usage: attn train --arch llama --data FILE --out DIR [--config FILE.json | --init DIR]\n"
        "                  [--tokenizer char|PATH] [--block-size N] [--batch N] [options]\n"
        "       attn train --arch llama --out DIR --resume [--max-steps N] [--time-budget S]\n"
        "\n"
        "Trains a Llama-family decoder (RMSNorm, rotary embeddings, grouped-query attention,\n"
        "SwiGLU; model_type llama, mistral, qwen2 or qwen3) on a UTF-8 text file with GPT's loop:\n"
        "the first 90% of the tokens train, the last 10% validate, each batch N random windows of\n"
        "block-size + 1 tokens. From scratch with --config, or fine-tuning a Hugging Face\n"
        "directory with --init DIR (its weights, configuration and tokenizer; tokenizer_config.json\n"
        "with the chat template and generation_config.json are copied along). DIR becomes a\n"
        "Hugging Face model directory that transformers, 'attn generate' and 'attn chat' load.\n"
        "Chat data: --data FILE.jsonl (one JSON message list per line, as 'attn chat --jsonl'\n"
        "reads) with --init DIR fine-tunes on conversations rendered by DIR's chat template, the\n"
        "loss only on the assistant's tokens (each reply and its end-of-turn marker); every\n"
        "conversation is one window (cut at --block-size), the last 10% validate.\n"
        "Ctrl-C saves a checkpoint and exits; --resume continues it exactly.\n",
    .own_data =
        "  --config FILE        the architecture's config.json (model_type llama when absent;\n"
        "                       hidden_size, num_hidden_layers, num_attention_heads,\n"
        "                       num_key_value_heads, intermediate_size, max_position_embeddings,\n"
        "                       rope_theta, ...; see include/attn_gpt.h); vocab_size may be omitted\n"
        "                       (the tokenizer's). Default: 4 layers, width 128, 4/2 heads,\n"
        "                       context 64. configs/llama-char-6l.json: 6 layers, width 384, 6/2\n"
        "                       heads, context 256\n"
        "  --init DIR           fine-tune the model of a Hugging Face directory instead\n"
        "  --block-size N       positions per training window (default: the context,\n"
        "                       max_position_embeddings; at most that)\n"
        "  --tokenizer char|PATH  char (default without --init): one id per character of the\n"
        "                       file; or a tokenizer.json / a directory with one (default with\n"
        "                       --init: DIR's)\n",
    .own_optimization = OWN_OPTIMIZATION,
    .own_stopping =
        "  --eval-iters K       validation batches per evaluation (default 20; the same K each\n"
        "                       time)\n",
    .notes =
        "A token, for tokens/s, is a position of a training window: B x block-size x grad-accum\n"
        "per step. The Llama family has no residual dropout: --dropout must be 0 or absent.\n"
        "Defaults are those of --arch gpt (nanoGPT's), except --lr: 1e-3 from scratch; for\n"
        "fine-tuning pass a smaller one (e.g. --lr 5e-5 --warmup-steps 10).\n",
    .default_text = default_text,
    .defaults = {NANOGPT_DEFAULTS, .tokenizer = NULL},
};

typedef struct {
    train_opts c; /* the shared ones */
    const train_family_info *fam; /* gpt or llama */
    attn_precision precision;
    int grad_accum, eval_iters;
    int block_size;   /* 0: the context */
    const char *init; /* --init DIR or NULL */
    double min_lr;
} gopts;

static bool is_llama_arch(const gopts *o) { return o->fam == &cmd_train_llama_family; }

/* Chat data: a file ending in .jsonl (one JSON message list per line). */
static bool is_chat_data(const char *path) {
    size_t n = path ? strlen(path) : 0;
    return n > 6 && !strcmp(path + n - 6, ".jsonl");
}

/* Returns -1 on success, else the exit code. */
static int parse_gargs(int argc, char **argv, const train_family_info *fam, gopts *o) {
    o->fam = fam;
    o->c = fam->defaults;
    o->grad_accum = 1, o->eval_iters = 20;
    o->min_lr = -1; /* not given: lr / 10 (nanoGPT's rule; 1e-4 for the default lr 1e-3) */
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        int rc = train_next_arg(argc, argv, &i, fam, &o->c, &a, &v);
        if (rc >= 0) return rc;
        if (!a) continue; /* a shared option */
        CLI_INT_OPT("train", "--block-size", 1, 1 << 20, o->block_size,
                    TRAIN_FIXED(&o->c, "--block-size"))
        if (!strcmp(a, "--init")) {
            o->init = v;
            TRAIN_FIXED(&o->c, "--init");
            continue;
        }
        CLI_INT_OPT("train", "--grad-accum", 1, 1000000, o->grad_accum,
                    TRAIN_FIXED(&o->c, "--grad-accum"))
        CLI_REAL_OPT("train", "--min-lr", 0, 10, o->min_lr, TRAIN_FIXED(&o->c, "--min-lr"))
        CLI_INT_OPT("train", "--eval-iters", 1, 1000000, o->eval_iters,
                    TRAIN_FIXED(&o->c, "--eval-iters"))
        if (!strcmp(a, "--precision")) {
            if (attn_precision_parse(v, &o->precision))
                return cli_usage_error("train: --precision must be f32 or bf16, got '%s'", v);
            TRAIN_FIXED(&o->c, "--precision");
            continue;
        }
        return train_unknown_option(fam, a);
    }
    if (!o->c.tokenizer) o->c.tokenizer = o->init ? o->init : "char";
    if (o->min_lr < 0) o->min_lr = o->c.lr / 10;
    if (o->init && o->c.config)
        return cli_usage_error("train: --init DIR takes DIR's configuration; --config cannot be "
                               "given with it");
    return train_check_args(fam, &o->c);
}

/* ---- the run's options in the checkpoint ----------------------------------------------------- */

static json_t *gopts_to_json(const gopts *o, uint64_t data_bytes, uint32_t data_crc) {
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", data_crc);
    json_t *j = json_object();
    json_object_set_new(j, "arch", json_string(o->fam->arch));
    train_opts_to_json(&o->c, j);
    json_object_set_new(j, "block_size", json_integer(o->block_size));
    if (o->init) json_object_set_new(j, "init", json_string(o->init));
    json_object_set_new(j, "data_bytes", json_integer((json_int_t)data_bytes));
    json_object_set_new(j, "data_crc32", json_string(crc));
    json_object_set_new(j, "tokenizer", json_string(o->c.tokenizer));
    json_object_set_new(j, "grad_accum", json_integer(o->grad_accum));
    json_object_set_new(j, "max_steps", json_integer((json_int_t)o->c.max_steps));
    json_object_set_new(j, "min_lr", json_real(o->min_lr));
    json_object_set_new(j, "eval_iters", json_integer(o->eval_iters));
    json_object_set_new(j, "precision", json_string(attn_precision_name(o->precision)));
    return j;
}

static attn_status gopts_from_json(const json_t *j, const char *dir, gopts *o, uint64_t *bytes,
                                   uint32_t *crc) {
    static char data_copy[4096], tok_copy[4096];
    const char *arch = json_string_value(json_object_get(j, "arch"));
    const char *data = json_string_value(json_object_get(j, "data"));
    const char *tok = json_string_value(json_object_get(j, "tokenizer"));
    const char *seed = json_string_value(json_object_get(j, "seed"));
    const char *crcs = json_string_value(json_object_get(j, "data_crc32"));
    if (!json_is_object(j) || !arch || strcmp(arch, o->fam->arch) != 0 || !data || !tok || !seed ||
        !crcs)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/training_state.json: \"extra\" lacks the %s run's options (not "
                              "a checkpoint written by attn train --arch %s)",
                              dir, o->fam->arch, o->fam->arch);
    o->block_size = (int)json_integer_value(json_object_get(j, "block_size"));
    snprintf(data_copy, sizeof data_copy, "%s", data);
    snprintf(tok_copy, sizeof tok_copy, "%s", tok);
    o->c.data = data_copy;
    o->c.tokenizer = tok_copy;
    *bytes = (uint64_t)json_integer_value(json_object_get(j, "data_bytes"));
    *crc = (uint32_t)strtoul(crcs, NULL, 16);
    train_opts_from_json(j, &o->c); /* older checkpoints: no adam_eps (the default 1e-8) */
    o->grad_accum = (int)json_integer_value(json_object_get(j, "grad_accum"));
    if (!o->c.max_steps_given) o->c.max_steps = json_integer_value(json_object_get(j, "max_steps"));
    o->min_lr = json_number_value(json_object_get(j, "min_lr"));
    o->eval_iters = (int)json_integer_value(json_object_get(j, "eval_iters"));
    /* absent in checkpoints written before --precision existed: float32 */
    const char *prec = json_string_value(json_object_get(j, "precision"));
    o->precision = ATTN_PRECISION_F32;
    if (prec && attn_precision_parse(prec, &o->precision))
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/training_state.json: unknown precision \"%s\"", dir, prec);
    if (o->c.batch < 1 || o->c.batch > 1000000 || o->grad_accum < 1 || o->eval_iters < 1 ||
        o->c.warmup < 0 || o->c.decay_steps < 0 || !(o->c.lr >= 0) || !(o->c.beta2 < 1) ||
        o->c.max_steps < 0)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/training_state.json: \"extra\" holds invalid options", dir);
    return ATTN_STATUS_OK;
}

/* ---- helpers --------------------------------------------------------------------------------- */

static attn_status read_file(const char *path, char **text, size_t *len) {
    *text = NULL, *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return attn_set_error(ATTN_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    attn_status s = ATTN_STATUS_OK;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap >= ((size_t)1 << 31)) {
                s = attn_set_error(ATTN_STATUS_TOO_LARGE, "%s: larger than 2 GiB", path);
                break;
            }
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
                break;
            }
            buf = nb, cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                s = attn_set_error(ATTN_STATUS_IO, "%s: cannot read: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (!buf && !s) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    if (s) {
        free(buf);
        return s;
    }
    buf[n] = '\0';
    *text = buf, *len = n;
    return ATTN_STATUS_OK;
}

/* ---- character tokenizer ---------------------------------------------------------------------
 * nanoGPT's shakespeare-char vocabulary (attn_tok_train_chars: the sorted distinct code points of
 * the whole text, one id each), saved as a tokenizer.json that Hugging Face tokenizers reads
 * too. */

static attn_status char_tokenizer(const char *path, const char *text, size_t len, attn_tok **out) {
    attn_status s = attn_tok_train_chars(text, len, out);
    if (s) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        return attn_set_error(s, "%s: %s (the character tokenizer needs UTF-8 text)", path, msg);
    }
    return ATTN_STATUS_OK;
}

/* ---- the run --------------------------------------------------------------------------------- */

typedef struct {
    gopts o;
    char *text;
    size_t text_len;
    uint32_t crc;
    attn_tok *tok;
    int32_t *ids; /* (n_ids) the whole file; train = [0, n_train), validation = [n_train, n_ids) */
    size_t n_ids, n_train;
    attn_data_chat *chat; /* chat data (.jsonl): examples [0, n_train) train, the rest validate */
    int32_t pad_id;
    attn_gpt_config cfg;
    attn_gpt_model *m;
    attn_gpt_trainer *tr; /* the data-parallel step: one replica per thread */
    int B, T;
    int32_t *x, *y; /* (grad_accum, B, T) the step's micro-batches: inputs and targets */
    train_loop L;
} grun;

static void grun_free(grun *r) {
    free(r->text);
    attn_tok_free(r->tok);
    attn_free(r->ids);
    attn_data_chat_free(r->chat);
    attn_gpt_trainer_free(r->tr);
    attn_gpt_model_free(r->m);
    free(r->x);
    free(r->y);
    train_loop_free(&r->L);
}

static attn_status check_train_config(const gopts *o, const char *name, int32_t V,
                                      attn_gpt_config *cfg);

/* The training configuration: the file (or the default) with the gaps a hand-written training
 * config may leave filled from the tokenizer: vocab_size, bos/eos_token_id ("<|endoftext|>" when
 * the tokenizer has it, else none), attn_pdrop 0. */
static attn_status load_train_config(const gopts *o, const attn_tok *tok, attn_gpt_config *cfg) {
    const char *name = o->c.config ? o->c.config : "<default config>";
    json_error_t err;
    json_t *root = o->c.config ? json_load_file(o->c.config, 0, &err)
                               : json_loads(is_llama_arch(o) ? default_llama_config_json
                                                             : default_config_json,
                                            0, &err);
    if (!root) {
        if (o->c.config && err.line < 1)
            return attn_set_error(ATTN_STATUS_IO, "%s: %s", name, err.text);
        return attn_set_error(ATTN_STATUS_FORMAT, "%s: %s (line %d)", name, err.text, err.line);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return attn_set_error(ATTN_STATUS_FORMAT, "%s: not a JSON object", name);
    }
    /* --arch llama: a config without model_type is a Llama; --arch gpt: GPT-2's (as before) */
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    if (is_llama_arch(o) && !mt) json_object_set_new(root, "model_type", json_string("llama"));
    if (mt && (strcmp(mt, "gpt2") != 0) != is_llama_arch(o)) {
        json_decref(root);
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: model_type \"%s\" is not a model of --arch %s (%s)", name, mt,
                              o->fam->arch,
                              is_llama_arch(o) ? "llama, mistral, qwen2 or qwen3" : "gpt2");
    }
    const int32_t V = attn_tok_vocab_size(tok);
    const int32_t eot = attn_tok_token_to_id(tok, "<|endoftext|>");
    if (!json_object_get(root, "vocab_size"))
        json_object_set_new(root, "vocab_size", json_integer(V));
    const char *ids[2] = {"bos_token_id", "eos_token_id"};
    for (int k = 0; k < 2; k++)
        if (!json_object_get(root, ids[k]))
            json_object_set_new(root, ids[k], eot >= 0 ? json_integer(eot) : json_null());
    if (!is_llama_arch(o) && !json_object_get(root, "attn_pdrop"))
        json_object_set_new(root, "attn_pdrop", json_real(0.0));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    attn_status s = attn_gpt_config_parse(text, name, cfg);
    free(text);
    if (s) return s;
    return check_train_config(o, name, V, cfg);
}

/* What training needs of a configuration (fresh, or --init's): dropout as --dropout says, no
 * attention-probability dropout, a vocabulary covering the tokenizer's. */
static attn_status check_train_config(const gopts *o, const char *name, int32_t V,
                                      attn_gpt_config *cfg) {
    if (o->c.dropout > 0 && attn_gpt_is_llama(cfg))
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "train: --dropout %g: the %s architecture has no residual dropout "
                              "(0 or absent)",
                              o->c.dropout, attn_gpt_arch_name(cfg->arch));
    if (o->c.dropout >= 0 && !attn_gpt_is_llama(cfg))
        cfg->resid_pdrop = cfg->embd_pdrop = (float)o->c.dropout;
    if (cfg->attn_pdrop != 0.0f)
        return attn_set_error(ATTN_STATUS_UNSUPPORTED,
                              "%s: %s is %g, but training needs 0 (the fused attention "
                              "kernel has no dropout on the attention probabilities): set "
                              "\"%s\": 0",
                              name, attn_gpt_is_llama(cfg) ? "attention_dropout" : "attn_pdrop",
                              (double)cfg->attn_pdrop,
                              attn_gpt_is_llama(cfg) ? "attention_dropout" : "attn_pdrop");
    if (cfg->vocab_size < V)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: vocab_size %d is smaller than the tokenizer's %d ids (omit "
                              "vocab_size to use the tokenizer's)",
                              name, cfg->vocab_size, (int)V);
    return attn_gpt_config_check(cfg);
}

/* The files of a Hugging Face directory that go with the model to the fine-tuned one (the chat
 * template, special tokens, generation defaults), when DIR has them. */
static attn_status copy_side_files(const char *from, const char *to) {
    static const char *const names[] = {"tokenizer_config.json", "special_tokens_map.json",
                                        "generation_config.json", "chat_template.jinja",
                                        "chat_template.json"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char *src = train_path_in(from, names[k]), *dst = train_path_in(to, names[k]);
        attn_status s = src && dst ? ATTN_STATUS_OK
                                   : attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        struct stat sb;
        if (!s && stat(src, &sb) == 0 && S_ISREG(sb.st_mode)) {
            char *text = NULL;
            size_t len = 0;
            s = read_file(src, &text, &len);
            FILE *f = s ? NULL : fopen(dst, "wb");
            if (!s && (!f || fwrite(text, 1, len, f) != len))
                s = attn_set_error(ATTN_STATUS_IO, "%s: cannot write: %s", dst, strerror(errno));
            if (f && fclose(f) != 0 && !s)
                s = attn_set_error(ATTN_STATUS_IO, "%s: cannot write: %s", dst, strerror(errno));
            free(text);
        }
        free(src), free(dst);
        if (s) return s;
    }
    return ATTN_STATUS_OK;
}

/* Chat data: the conversations of --data rendered with the chat template of the model directory
 * (--init DIR, or on --resume the run's own directory, which holds a copy of its
 * tokenizer_config.json), the assistant tokens the targets; the last 10% of the conversations
 * (at least one, when there are two or more) validate. The windows are the conversations: T is
 * the longest one's length − 1 (at most --block-size / the context), shorter ones padded. */
static attn_status setup_chat(grun *r, const char *p_cfg) {
    gopts *o = &r->o;
    (void)p_cfg;
    const char *tdir = o->c.resume ? o->c.out : o->init;
    if (!tdir)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: chat data (.jsonl) needs a model with a chat template: "
                              "--init DIR",
                              o->c.data);
    attn_chat_template *tpl = NULL;
    attn_status s = attn_chat_template_load_dir(tdir, NULL, &tpl);
    double t0 = train_now_s();
    if (!s) s = attn_data_chat_load(o->c.data, tpl, r->tok, NULL, r->T + 1, &r->chat);
    attn_chat_template_free(tpl);
    if (s) return s;
    const size_t n = attn_data_chat_count(r->chat);
    const size_t n_val = n >= 2 ? (n / 10 > 0 ? n / 10 : 1) : 0;
    r->n_train = n - n_val;
    const int longest = attn_data_chat_longest(r->chat);
    if (!o->block_size && longest - 1 < r->T) r->T = longest - 1 > 1 ? longest - 1 : 1;
    const char *eos = NULL;
    r->pad_id = r->cfg.eos_token_id >= 0 ? r->cfg.eos_token_id : 0;
    (void)eos;
    size_t targets = 0, tokens = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *mask;
        int len;
        attn_data_chat_example(r->chat, i, NULL, &mask, &len);
        tokens += (size_t)len;
        for (int t = 0; t < len; t++) targets += mask[t];
    }
    printf("data: %s: %zu conversations (%zu skipped: no assistant tokens) -> %zu tokens, %zu of "
           "them assistant targets, longest %d, in %.1f s; train %zu, validation %zu; windows of "
           "%d\n",
           o->c.data, n, attn_data_chat_skipped(r->chat), tokens, targets, longest,
           train_now_s() - t0, r->n_train, n_val, r->T);
    free(r->text);
    r->text = NULL;
    if (!r->m) s = attn_gpt_model_init(&r->cfg, r->o.c.seed, &r->m);
    return s;
}

/* Data, tokenizer, configuration and model — fresh from the options, or from DIR on resume. */
static attn_status setup(grun *r) {
    gopts *o = &r->o;
    attn_status s = ATTN_STATUS_OK;
    char *p_cfg = train_path_in(o->c.out, "config.json");
    char *p_tok = train_path_in(o->c.out, "tokenizer.json");
    char *p_state = train_path_in(o->c.out, "training_state.json");
    uint64_t want_bytes = 0;
    uint32_t want_crc = 0;
    if (!p_cfg || !p_tok || !p_state) {
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if (o->c.resume) {
        if (!attn_ckpt_exists(o->c.out)) {
            s = attn_set_error(ATTN_STATUS_NOT_FOUND,
                               "--resume: %s holds no checkpoint (training_state.json)", o->c.out);
            goto done;
        }
        /* The run's options first: the state's "extra". (After a crash between the two renames
         * of a save only DIR.prev exists; attn_ckpt_load handles that, and this falls back.) */
        struct stat sb;
        if (stat(o->c.out, &sb) != 0) {
            /* only DIR.prev: a save was interrupted between its two renames */
            char *prev = malloc(strlen(o->c.out) + 6);
            if (!prev) {
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
            sprintf(prev, "%s.prev", o->c.out);
            free(p_cfg), free(p_tok), free(p_state);
            p_cfg = train_path_in(prev, "config.json");
            p_tok = train_path_in(prev, "tokenizer.json");
            p_state = train_path_in(prev, "training_state.json");
            free(prev);
            if (!p_cfg || !p_tok || !p_state) {
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
        }
        json_t *j = NULL;
        if ((s = train_load_state_json(p_state, &j))) goto done;
        s = gopts_from_json(json_object_get(j, "extra"), o->c.out, o, &want_bytes, &want_crc);
        json_decref(j);
        if (!s) s = attn_gpt_config_load(p_cfg, &r->cfg);
        if (!s) s = attn_tok_load(p_tok, &r->tok);
        if (s) goto done;
    } else {
        if ((s = train_fresh_out(o->c.out, o->c.out))) goto done;
    }

    /* the text (its absolute path goes into the checkpoint, so --resume works from anywhere) */
    if (!o->c.resume) {
        static char abs_data[4096];
        char *rp = realpath(o->c.data, NULL);
        if (rp && strlen(rp) < sizeof abs_data) {
            snprintf(abs_data, sizeof abs_data, "%s", rp);
            o->c.data = abs_data;
        }
        free(rp);
    }
    s = read_file(o->c.data, &r->text, &r->text_len);
    if (s) goto done;
    r->crc = attn_crc32(0, r->text, r->text_len);
    if (o->c.resume && (want_bytes != r->text_len || want_crc != r->crc)) {
        s = attn_set_error(ATTN_STATUS_FORMAT,
                           "--resume: %s changed since the checkpoint was made (%llu bytes, CRC-32 "
                           "%08x; now %zu bytes, %08x)",
                           o->c.data, (unsigned long long)want_bytes, want_crc, r->text_len,
                           r->crc);
        goto done;
    }
    if (!o->c.resume) {
        if (!strcmp(o->c.tokenizer, "char"))
            s = char_tokenizer(o->c.data, r->text, r->text_len, &r->tok);
        else
            s = attn_tok_load(o->c.tokenizer, &r->tok);
        if (s) goto done;
    }
    double t0 = train_now_s();
    const bool chat = is_chat_data(o->c.data);
    if (!chat) s = attn_tok_encode_alloc(r->tok, r->text, r->text_len, &r->ids, &r->n_ids);
    if (s) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        s = attn_set_error(s, "%s: %s", o->c.data, msg);
        goto done;
    }
    double t_enc = train_now_s() - t0;

    if (!o->c.resume && o->init) {
        /* fine-tuning: DIR's model, configuration and (by default) tokenizer */
        if ((s = attn_gpt_load_dir(o->init, &r->m))) goto done;
        r->cfg = r->m->cfg;
        if (attn_gpt_is_llama(&r->cfg) != is_llama_arch(o)) {
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "--init %s: a %s model is not one of --arch %s (use --arch %s)",
                               o->init, attn_gpt_arch_name(r->cfg.arch), o->fam->arch,
                               attn_gpt_is_llama(&r->cfg) ? "llama" : "gpt");
            goto done;
        }
        s = check_train_config(o, o->init, attn_tok_vocab_size(r->tok), &r->cfg);
        if (!s) s = attn_gpt_alloc_grads(r->m);
        if (!s && train_writer()) s = attn_gpt_config_save(p_cfg, &r->cfg);
        if (!s && train_writer()) s = attn_tok_save(r->tok, p_tok);
        if (!s && train_writer()) s = copy_side_files(o->init, o->c.out);
        if (s) goto done;
    } else if (!o->c.resume) {
        s = load_train_config(o, r->tok, &r->cfg);
        if (!s && train_writer()) s = attn_gpt_config_save(p_cfg, &r->cfg);
        if (!s && train_writer()) s = attn_tok_save(r->tok, p_tok);
        if (s) goto done;
    } else if (r->cfg.vocab_size < attn_tok_vocab_size(r->tok)) {
        s = attn_set_error(ATTN_STATUS_FORMAT, "%s: vocab_size %d is smaller than %s's %d ids",
                           p_cfg, r->cfg.vocab_size, p_tok, (int)attn_tok_vocab_size(r->tok));
        goto done;
    }
    if (o->block_size > r->cfg.n_positions) {
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "--block-size %d is longer than the model's context (%d)",
                           o->block_size, r->cfg.n_positions);
        goto done;
    }
    r->T = o->block_size ? o->block_size : r->cfg.n_positions;
    r->B = (int)o->c.batch;
    if (chat) {
        s = setup_chat(r, p_cfg);
        goto done;
    }
    /* nanoGPT's prepare.py: train = data[:int(n * 0.9)], val = data[int(n * 0.9):] */
    r->n_train = (size_t)((double)r->n_ids * 0.9);
    size_t n_val = r->n_ids - r->n_train;
    if (r->n_train < (size_t)r->T + 1 || n_val < (size_t)r->T + 1) {
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "%s: %zu tokens split into %zu for training and %zu for validation; "
                           "each part needs at least %s + 1 = %d",
                           o->c.data, r->n_ids, r->n_train, n_val,
                           o->block_size ? "--block-size" : "n_positions", r->T + 1);
        goto done;
    }
    printf("data: %s: %zu bytes -> %zu tokens (%s tokenizer, %d ids) in %.1f s; train %zu, "
           "validation %zu\n",
           o->c.data, r->text_len, r->n_ids,
           strcmp(o->c.tokenizer, "char") ? o->c.tokenizer : "char",
           (int)attn_tok_vocab_size(r->tok), t_enc, r->n_train, n_val);
    free(r->text);
    r->text = NULL;
    if (!r->m) s = attn_gpt_model_init(&r->cfg, r->o.c.seed, &r->m);
done:
    free(p_cfg), free(p_tok), free(p_state);
    return s;
}

/* ---- the loop's hooks ------------------------------------------------------------------------ */

/* The step's grad_accum micro-batches: micro-batch g = step · grad_accum + micro of the training
 * stream. */
static attn_status next_batch(void *ctx, int64_t step) {
    grun *r = ctx;
    const int A = r->o.grad_accum;
    const size_t bt = (size_t)r->B * (size_t)r->T;
    for (int micro = 0; micro < A && r->chat; micro++) {
        /* B conversations drawn from the training ones: Philox stream of (seed, "train"), words
         * [g · 2^32, ...) for micro-batch g, as the text windows */
        uint64_t g = (uint64_t)step * (uint64_t)A + (uint64_t)micro;
        attn_rng rg;
        attn_rng_set_state(&rg, attn_data_lm_key(r->o.c.seed, ATTN_DATA_LM_TRAIN), g << 32);
        size_t idx[4096];
        if (r->B > 4096) return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "batch too large");
        for (int b = 0; b < r->B; b++) idx[b] = (size_t)attn_rng_below(&rg, r->n_train);
        TRAIN_TRY(attn_data_chat_batch(r->chat, idx, r->B, r->T, r->pad_id,
                                       r->x + (size_t)micro * bt, r->y + (size_t)micro * bt,
                                       NULL));
    }
    for (int micro = 0; micro < A && !r->chat; micro++) {
        uint64_t g = (uint64_t)step * (uint64_t)A + (uint64_t)micro;
        TRAIN_TRY(attn_data_lm_batch(r->ids, r->n_train, r->B, r->T, r->o.c.seed,
                                     ATTN_DATA_LM_TRAIN, g, r->x + (size_t)micro * bt,
                                     r->y + (size_t)micro * bt));
    }
    return ATTN_STATUS_OK;
}

static double lr_at(void *ctx, int64_t step) {
    const gopts *o = &((const grun *)ctx)->o;
    return attn_lr_cosine(step, o->c.lr, o->min_lr, o->c.warmup, o->c.decay_steps);
}

/* grad_accum micro-batches, each's gradient scaled by 1 / grad_accum into the sum. */
static attn_status train_step(void *ctx, int64_t step, train_step_out *out) {
    grun *r = ctx;
    const int B = r->B, T = r->T, A = r->o.grad_accum;
    const size_t bt = (size_t)B * (size_t)T;
    attn_gpt_zero_grad(r->m);
    double sum = 0;
    for (int micro = 0; micro < A; micro++) {
        uint64_t g = (uint64_t)step * (uint64_t)A + (uint64_t)micro;
        float l = 0;
        /* the last micro-batch's backward finishes the step's gradients: only it may hand
         * finished layers to the all-reduce over ranks */
        attn_gpt_trainer_set_overlap(r->tr, micro == A - 1);
        TRAIN_TRY(attn_gpt_train_step(r->tr, true, r->o.c.seed, g, B, T, r->x + (size_t)micro * bt,
                                      r->y + (size_t)micro * bt, 1.0f / (float)A, &l));
        sum += l;
    }
    out->loss = sum / A;
    out->weight = 1;
    out->tokens = (double)B * T * A;
    return ATTN_STATUS_OK;
}

/* Mean loss over the same eval_iters validation batches every time (evaluation mode). */
/* Chat data: every validation conversation once, in order, in batches of up to B; the mean loss
 * over all their assistant targets. */
static attn_status evaluate_chat(grun *r, train_eval_out *out) {
    const size_t n = attn_data_chat_count(r->chat), n_val = n - r->n_train;
    double sum = 0, count = 0;
    for (size_t i0 = r->n_train; i0 < n; i0 += (size_t)r->B) {
        const int b = (int)(n - i0 < (size_t)r->B ? n - i0 : (size_t)r->B);
        size_t idx[4096], targets;
        for (int k = 0; k < b; k++) idx[k] = i0 + (size_t)k;
        TRAIN_TRY(attn_data_chat_batch(r->chat, idx, b, r->T, r->pad_id, r->x, r->y, &targets));
        if (!targets) continue;
        float l = 0;
        TRAIN_TRY(attn_gpt_trainer_eval(r->tr, b, r->T, r->x, r->y, &l));
        sum += (double)l * (double)targets, count += (double)targets;
    }
    out->loss = count > 0 ? sum / count : NAN;
    snprintf(out->detail, sizeof out->detail, "%zu conversations", n_val);
    return ATTN_STATUS_OK;
}

static attn_status evaluate(void *ctx, train_eval_out *out) {
    grun *r = ctx;
    if (r->chat) return evaluate_chat(r, out);
    const int B = r->B, T = r->T;
    double sum = 0;
    for (int k = 0; k < r->o.eval_iters; k++) {
        TRAIN_TRY(attn_data_lm_batch(r->ids + r->n_train, r->n_ids - r->n_train, B, T,
                                     r->o.c.seed, ATTN_DATA_LM_VALID, (uint64_t)k, r->x, r->y));
        float l = 0;
        TRAIN_TRY(attn_gpt_trainer_eval(r->tr, B, T, r->x, r->y, &l));
        sum += l;
    }
    out->loss = sum / r->o.eval_iters;
    snprintf(out->detail, sizeof out->detail, "%d batches", r->o.eval_iters);
    return ATTN_STATUS_OK;
}

static json_t *run_options(void *ctx) {
    const grun *r = ctx;
    return gopts_to_json(&r->o, r->text_len, r->crc);
}

static attn_status setup_training(grun *r) {
    gopts *o = &r->o;
    attn_gpt_model *m = r->m;
    train_loop *L = &r->L;
    if (o->c.decay_steps < 0) o->c.decay_steps = o->c.max_steps;
    TRAIN_TRY(train_loop_tables(L, m->tensors, m->n_tensors, m->params));
    const size_t cells = (size_t)o->grad_accum * (size_t)r->B * (size_t)r->T;
    r->x = malloc(cells * sizeof *r->x);
    r->y = malloc(cells * sizeof *r->y);
    if (!r->x || !r->y) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    TRAIN_TRY(train_loop_optim(L, m->num_params, &o->c));
    TRAIN_TRY(attn_gpt_trainer_init(m, r->B, r->T, train_loop_replicas(m->num_params), &r->tr));
    TRAIN_TRY(attn_gpt_trainer_set_precision(r->tr, o->precision));
    attn_gpt_trainer_set_dist(r->tr, train_dist());
    L->ctx = r;
    L->ckpt_dir = L->out = o->c.out;
    L->resume = o->c.resume;
    TRAIN_TRY(train_loop_resume(L, false));
    L->next_batch = next_batch, L->lr_at = lr_at, L->train_step = train_step;
    L->evaluate = evaluate, L->run_options = run_options; /* position: (0, step), no epochs */
    if (r->chat && r->n_train == attn_data_chat_count(r->chat)) L->evaluate = NULL;
    L->params = m->params, L->grads = m->grads;
    train_loop_set(L, &o->c);
    const attn_gpt_config *c = &r->cfg;
    printf("model: %s%s%s, %zu parameters (%d layers, %d heads (%d key/value), width %d, "
           "context %d, vocabulary %d, dropout %.2f); batch %d x %d%s of %d tokens; %d threads, "
           "%s kernels\n",
           attn_gpt_arch_name(c->arch), o->init ? " from " : "", o->init ? o->init : "",
           m->num_params, c->n_layer, c->n_head, attn_gpt_kv_heads(c), c->n_embd, c->n_positions,
           c->vocab_size, (double)c->resid_pdrop, r->B, o->grad_accum,
           o->grad_accum > 1 ? " micro-batches" : "", r->T, attn_get_num_threads(),
           attn_backend_name(attn_get_backend()));
    fflush(stdout);
    return ATTN_STATUS_OK;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

/* The family of these arguments: --arch gpt or llama, or on --resume the model_type of --out's
 * config.json; NULL when neither. */
static const train_family_info *wanted_family(int argc, char **argv) {
    const char *out = NULL;
    bool resume = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--resume")) resume = true;
        if (i + 1 < argc && !strcmp(argv[i], "--arch"))
            return !strcmp(argv[i + 1], "gpt")     ? &cmd_train_gpt_family
                   : !strcmp(argv[i + 1], "llama") ? &cmd_train_llama_family
                                                   : NULL;
        if (i + 1 < argc && !strcmp(argv[i], "--out")) out = argv[i + 1];
    }
    if (!resume || !out) return NULL;
    char *p = train_path_in(out, "config.json");
    json_t *j = p ? json_load_file(p, 0, NULL) : NULL;
    if (!j && p) { /* a save interrupted between its renames leaves only DIR.prev */
        free(p);
        size_t n = strlen(out) + 32;
        p = malloc(n);
        if (p) snprintf(p, n, "%s.prev/config.json", out);
        j = p ? json_load_file(p, 0, NULL) : NULL;
    }
    const char *mt = json_string_value(json_object_get(j, "model_type"));
    const train_family_info *fam = NULL;
    if (mt && !strcmp(mt, "gpt2")) fam = &cmd_train_gpt_family;
    else if (mt && (!strcmp(mt, "llama") || !strcmp(mt, "mistral") || !strcmp(mt, "qwen2") ||
                    !strcmp(mt, "qwen3")))
        fam = &cmd_train_llama_family;
    json_decref(j);
    free(p);
    return fam;
}

bool cmd_train_gpt_wanted(int argc, char **argv) { return wanted_family(argc, argv) != NULL; }


int cmd_train_gpt(int argc, char **argv) {
    grun r;
    memset(&r, 0, sizeof r);
    const train_family_info *fam = wanted_family(argc, argv);
    int rc = parse_gargs(argc, argv, fam ? fam : &cmd_train_gpt_family, &r.o);
    if (rc >= 0) return rc;
    attn_status s = setup(&r);
    if (!s) s = setup_training(&r);
    rc = s ? cli_fail(s) : train_run(&r.L);
    grun_free(&r);
    return rc;
}

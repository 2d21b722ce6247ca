/* cmd_train_gpt.c — `attn train --arch gpt`: train a GPT-2 language model (attn_gpt.h) on a text
 * file, nanoGPT style: the first 90% of the tokens train, the last 10% validate; batches are
 * random windows of n_positions + 1 tokens; AdamW with weight decay on the 2-D tensors, linear
 * warmup then cosine decay to min_lr, gradient clipping, gradient accumulation, dropout; a
 * progress line, periodic validation loss, crash-safe checkpoints and exact resume.
 *
 * The output directory is both the checkpoint and a model directory for `attn generate`:
 *   config.json (Hugging Face GPT2Config)  tokenizer.json  model.safetensors (the tensors under
 *   their Hugging Face names)  optimizer.safetensors  training_state.json
 * written by attn_ckpt_save's atomic directory swap (config.json and tokenizer.json are written
 * once at the start and carried over by every save).
 *
 * Determinism: micro-batch g = step · grad_accum + micro draws its B window offsets from words
 * [g·2^32, ...) of Philox stream train_mix64(seed ^ "train") (attn_rng_below, nanoGPT's
 * torch.randint(len(data) − T, (B,))), dropout masks are a function of (seed, g), validation uses
 * the same K batches every time (batch k from words [k·2^32, ...) of stream train_mix64(seed ^ "valid")),
 * and the optimizer state is saved bit for bit — so a resumed run repeats the uninterrupted run's
 * losses exactly, given the same thread count. tools/ref_gpt_train.py re-implements the sampler
 * in Python (the PyTorch twin trains on the very same batches). */
#include "cli.h"
#include "cmd_train_gpt.h"
#include "train_common.h"

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

const char cmd_train_gpt_usage[] =
    "\n"
    "usage: attn train --arch gpt --data FILE --out DIR [--config FILE.json] [--tokenizer char|PATH]\n"
    "                  [--batch N] [--max-steps N] [options]\n"
    "       attn train --arch gpt --out DIR --resume [--max-steps N] [--time-budget S]\n"
    "\n"
    "Trains a GPT-2 language model (decoder only) on a UTF-8 text file, as nanoGPT does: the\n"
    "first 90% of the tokens train, the last 10% validate; each batch is N random windows of\n"
    "n_positions + 1 tokens. DIR becomes a Hugging Face model directory (config.json,\n"
    "model.safetensors, tokenizer.json) plus the optimizer and training state; 'attn generate\n"
    "--model DIR' samples from it. Ctrl-C saves a checkpoint and exits; --resume continues it\n"
    "exactly (the same losses, bit for bit, with the same --threads).\n"
    "\n"
    "data and model:\n"
    "  --config FILE        GPT2Config JSON (n_layer, n_head, n_embd, n_positions = the context\n"
    "                       length, resid_pdrop, embd_pdrop, ...; see include/attn_gpt.h);\n"
    "                       vocab_size may be omitted (the tokenizer's size), attn_pdrop must be\n"
    "                       0 or absent. Default: nanoGPT's shakespeare-char CPU model (4 layers,\n"
    "                       4 heads, width 128, context 64, no dropout) = configs/gpt-shakespeare-char.json\n"
    "  --tokenizer char|PATH  char (default): one id per character, the sorted characters of the\n"
    "                       file; or a tokenizer.json / a directory with one (or GPT-2's\n"
    "                       vocab.json + merges.txt)\n"
    "  --seed N             initialization, batches, dropout (default 1337)\n"
    "optimization (defaults: nanoGPT's shakespeare-char settings):\n"
    "  --batch N            sequences per micro-batch (default 12)\n"
    "  --grad-accum N       micro-batches per optimizer step (default 1)\n"
    "  --lr X               peak learning rate (default 1e-3)\n"
    "  --min-lr X           learning rate at the end of the cosine decay (default 1e-4)\n"
    "  --warmup-steps N     linear warmup steps (default 100)\n"
    "  --lr-decay-steps N   the cosine reaches min-lr at this step, then stays there (default:\n"
    "                       --max-steps of the first run)\n"
    "  --weight-decay X     AdamW decoupled weight decay on 2-D tensors (default 0.1)\n"
    "  --beta1 X, --beta2 X AdamW moment decay rates (default 0.9, 0.99)\n"
    "  --grad-clip X        clip the global gradient norm (default 1.0; 0 = off)\n"
    "  --dropout X          set resid_pdrop and embd_pdrop (default: the config's)\n"
    "  --precision f32|bf16 matrix products in float32 (default: PyTorch's numbers) or bf16:\n"
    "                       operands rounded to bfloat16, float32 sums, as PyTorch's CPU autocast\n"
    "                       (CPUs with AVX512-BF16; weights, gradients, optimizer stay float32)\n"
    "stopping, logging, saving:\n"
    "  --max-steps N        optimizer steps (default 2000; 0 = save the initial model and exit)\n"
    "  --time-budget S      stop (and save) after S seconds\n"
    "  --eval-every N       validation loss every N steps (default 250)\n"
    "  --eval-iters K       validation batches per evaluation (default 20; the same K each time)\n"
    "  --save-every N       checkpoint every N steps (default 1000)\n"
    "  --log-every N        progress line every N steps (default 10)\n"
    "  --metrics FILE       append JSON lines per step {step, loss, lr, grad_norm, tokens,\n"
    "                       seconds} and per evaluation {step, val_loss}\n"
    "  --resume             continue the checkpoint in DIR (only --max-steps, --time-budget,\n"
    "                       --eval-every, --save-every, --log-every, --metrics may be given)\n"
    "The last line is a summary with the final validation loss and tokens/s=N (training tokens\n"
    "B x n_positions x grad-accum per step, over the time spent in training steps).\n";

/* nanoGPT's config/train_shakespeare_char.py with the README's CPU overrides. */
static const char default_config_json[] =
    "{\"n_layer\": 4, \"n_head\": 4, \"n_embd\": 128, \"n_positions\": 64, "
    "\"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0, \"attn_pdrop\": 0.0}";

/* ---- options -------------------------------------------------------------------------------- */

typedef struct {
    const char *data, *out, *config, *tokenizer, *metrics;
    attn_precision precision;
    int batch, grad_accum;
    int64_t max_steps, warmup, lr_decay_steps; /* lr_decay_steps < 0: = max_steps */
    double lr, min_lr, weight_decay, beta1, beta2, grad_clip, dropout; /* dropout < 0: config's */
    uint64_t seed;
    double time_budget;
    int eval_every, eval_iters, save_every, log_every;
    bool resume;
    const char *fixed_opt; /* a run-defining option given (not allowed with --resume) */
    bool max_steps_given;
} gopts;

static gopts default_gopts(void) {
    gopts o;
    memset(&o, 0, sizeof o);
    o.tokenizer = "char";
    o.batch = 12, o.grad_accum = 1;
    o.max_steps = 2000, o.warmup = 100, o.lr_decay_steps = -1;
    o.lr = 1e-3, o.min_lr = 1e-4, o.weight_decay = 0.1, o.beta1 = 0.9, o.beta2 = 0.99;
    o.grad_clip = 1.0, o.dropout = -1;
    o.seed = 1337;
    o.eval_every = 250, o.eval_iters = 20, o.save_every = 1000, o.log_every = 10;
    return o;
}

/* Returns -1 on success, else the exit code. */
static int parse_gargs(int argc, char **argv, gopts *o) {
    const char *const usage[] = {cmd_train_gpt_usage + 1, NULL};
    static const char *const with_value[] = {
        "--arch", "--data", "--out", "--config", "--tokenizer", "--metrics", "--batch",
        "--grad-accum", "--seed", "--lr", "--min-lr", "--warmup-steps", "--lr-decay-steps",
        "--weight-decay", "--beta1", "--beta2", "--grad-clip", "--dropout", "--max-steps",
        "--time-budget", "--eval-every", "--eval-iters", "--save-every", "--log-every",
        "--precision"};
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        int rc = train_next_arg(argc, argv, &i, usage, with_value,
                                sizeof with_value / sizeof *with_value, &o->resume, &a, &v);
        if (rc >= 0) return rc;
        if (!a) continue; /* --resume */
        int64_t n;
        /* FIXED: the option defines the run (saved in the checkpoint, not changeable on resume) */
#define INT_OPT(name, lo, hi, field, fixed)                                                      \
    CLI_INT_OPT("train", name, lo, hi, o->field, if (fixed) o->fixed_opt = name)
#define REAL_OPT(name, lo, hi, field, fixed)                                                     \
    CLI_REAL_OPT("train", name, lo, hi, o->field, if (fixed) o->fixed_opt = name)
#define STR_OPT(name, field, fixed)                                                              \
    if (!strcmp(a, name)) {                                                                      \
        o->field = v;                                                                            \
        if (fixed) o->fixed_opt = name;                                                          \
        continue;                                                                                \
    }
        if (!strcmp(a, "--arch")) {
            if (strcmp(v, "gpt") != 0)
                return cli_usage_error("train: --arch must be encdec or gpt, got '%s'", v);
            continue;
        }
        STR_OPT("--data", data, true)
        STR_OPT("--out", out, false)
        STR_OPT("--config", config, true)
        STR_OPT("--tokenizer", tokenizer, true)
        STR_OPT("--metrics", metrics, false)
        INT_OPT("--batch", 1, 1000000, batch, true)
        INT_OPT("--grad-accum", 1, 1000000, grad_accum, true)
        INT_OPT("--seed", 0, INT64_MAX, seed, true)
        REAL_OPT("--lr", 0, 10, lr, true)
        REAL_OPT("--min-lr", 0, 10, min_lr, true)
        INT_OPT("--warmup-steps", 0, 1000000000, warmup, true)
        INT_OPT("--lr-decay-steps", 0, 1000000000000LL, lr_decay_steps, true)
        REAL_OPT("--weight-decay", 0, 10, weight_decay, true)
        REAL_OPT("--beta1", 0, 0.999999, beta1, true)
        REAL_OPT("--beta2", 0, 0.999999, beta2, true)
        REAL_OPT("--grad-clip", 0, 1e9, grad_clip, true)
        REAL_OPT("--dropout", 0, 0.99, dropout, true)
        if (!strcmp(a, "--precision")) {
            if (attn_precision_parse(v, &o->precision))
                return cli_usage_error("train: --precision must be f32 or bf16, got '%s'", v);
            o->fixed_opt = "--precision";
            continue;
        }
        if (!strcmp(a, "--max-steps")) {
            if (!cli_parse_i64(v, 0, 1000000000000LL, &n))
                return cli_usage_error("train: --max-steps needs an integer from 0 to 1e12, got '%s'", v);
            o->max_steps = n;
            o->max_steps_given = true;
            continue;
        }
        REAL_OPT("--time-budget", 0.001, 1e9, time_budget, false)
        INT_OPT("--eval-every", 1, 1000000000, eval_every, false)
        INT_OPT("--eval-iters", 1, 1000000, eval_iters, true)
        INT_OPT("--save-every", 1, 1000000000, save_every, false)
        INT_OPT("--log-every", 1, 1000000000, log_every, false)
#undef INT_OPT
#undef REAL_OPT
#undef STR_OPT
        return cli_usage_error("train: unknown option '%s'", a);
    }
    if (!o->out) return cli_usage_error("train: --out DIR is required");
    if (o->resume && o->fixed_opt)
        return cli_usage_error("train: --resume continues the run as it was saved; %s cannot be "
                               "changed (only --max-steps, --time-budget, --eval-every, "
                               "--save-every, --log-every, --metrics)",
                               o->fixed_opt);
    if (!o->resume && !o->data) return cli_usage_error("train: --data FILE is required");
    return -1;
}

/* ---- the run's options in the checkpoint ----------------------------------------------------- */

static json_t *gopts_to_json(const gopts *o, uint64_t data_bytes, uint32_t data_crc) {
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", data_crc);
    json_t *j = json_object();
    json_object_set_new(j, "arch", json_string("gpt"));
    json_object_set_new(j, "data", json_string(o->data));
    json_object_set_new(j, "data_bytes", json_integer((json_int_t)data_bytes));
    json_object_set_new(j, "data_crc32", json_string(crc));
    json_object_set_new(j, "tokenizer", json_string(o->tokenizer));
    json_object_set_new(j, "batch", json_integer(o->batch));
    json_object_set_new(j, "grad_accum", json_integer(o->grad_accum));
    json_object_set_new(j, "max_steps", json_integer((json_int_t)o->max_steps));
    char sb[32]; /* uint64 as a string, as the checkpoint's rng seeds */
    snprintf(sb, sizeof sb, "%llu", (unsigned long long)o->seed);
    json_object_set_new(j, "seed", json_string(sb));
    json_object_set_new(j, "lr", json_real(o->lr));
    json_object_set_new(j, "min_lr", json_real(o->min_lr));
    json_object_set_new(j, "warmup_steps", json_integer((json_int_t)o->warmup));
    json_object_set_new(j, "lr_decay_steps", json_integer((json_int_t)o->lr_decay_steps));
    json_object_set_new(j, "weight_decay", json_real(o->weight_decay));
    json_object_set_new(j, "beta1", json_real(o->beta1));
    json_object_set_new(j, "beta2", json_real(o->beta2));
    json_object_set_new(j, "grad_clip", json_real(o->grad_clip));
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
    if (!json_is_object(j) || !arch || strcmp(arch, "gpt") != 0 || !data || !tok || !seed || !crcs)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/training_state.json: \"extra\" lacks the gpt run's options (not "
                              "a checkpoint written by attn train --arch gpt)",
                              dir);
    snprintf(data_copy, sizeof data_copy, "%s", data);
    snprintf(tok_copy, sizeof tok_copy, "%s", tok);
    o->data = data_copy;
    o->tokenizer = tok_copy;
    *bytes = (uint64_t)json_integer_value(json_object_get(j, "data_bytes"));
    *crc = (uint32_t)strtoul(crcs, NULL, 16);
    o->seed = strtoull(seed, NULL, 10);
    o->batch = (int)json_integer_value(json_object_get(j, "batch"));
    o->grad_accum = (int)json_integer_value(json_object_get(j, "grad_accum"));
    if (!o->max_steps_given) o->max_steps = json_integer_value(json_object_get(j, "max_steps"));
    o->lr = json_number_value(json_object_get(j, "lr"));
    o->min_lr = json_number_value(json_object_get(j, "min_lr"));
    o->warmup = json_integer_value(json_object_get(j, "warmup_steps"));
    o->lr_decay_steps = json_integer_value(json_object_get(j, "lr_decay_steps"));
    o->weight_decay = json_number_value(json_object_get(j, "weight_decay"));
    o->beta1 = json_number_value(json_object_get(j, "beta1"));
    o->beta2 = json_number_value(json_object_get(j, "beta2"));
    o->grad_clip = json_number_value(json_object_get(j, "grad_clip"));
    o->eval_iters = (int)json_integer_value(json_object_get(j, "eval_iters"));
    /* absent in checkpoints written before --precision existed: float32 */
    const char *prec = json_string_value(json_object_get(j, "precision"));
    o->precision = ATTN_PRECISION_F32;
    if (prec && attn_precision_parse(prec, &o->precision))
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/training_state.json: unknown precision \"%s\"", dir, prec);
    if (o->batch < 1 || o->grad_accum < 1 || o->eval_iters < 1 || o->warmup < 0 ||
        o->lr_decay_steps < 0 || !(o->lr >= 0) || !(o->beta2 < 1))
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/training_state.json: \"extra\" holds invalid options", dir);
    return ATTN_STATUS_OK;
}

/* ---- helpers ---------------------------------------------------------------------------------- */

/* Stream keys train_mix64(seed ^ STREAM_...): decorrelate the seed's streams (batches, validation). */
#define STREAM_TRAIN 0x747261696EULL /* "train" */
#define STREAM_VALID 0x76616C6964ULL /* "valid" */

/* B windows of T + 1 tokens of ids[0..n) (n > T): x = ids[o .. o+T), y = ids[o+1 .. o+T] with
 * o uniform in [0, n − T), drawn from words [index·2^32, ...) of Philox stream key. */
static void sample_batch(const int32_t *ids, size_t n, int B, int T, uint64_t key, uint64_t index,
                         int32_t *x, int32_t *y) {
    attn_rng r;
    attn_rng_set_state(&r, key, index << 32);
    for (int b = 0; b < B; b++) {
        size_t o = (size_t)attn_rng_below(&r, (uint64_t)(n - (size_t)T));
        memcpy(x + (size_t)b * T, ids + o, (size_t)T * sizeof *x);
        memcpy(y + (size_t)b * T, ids + o + 1, (size_t)T * sizeof *y);
    }
}

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
            if (ferror(f)) s = attn_set_error(ATTN_STATUS_IO, "%s: cannot read: %s", path, strerror(errno));
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
 * the whole text, one id each), saved as a tokenizer.json that Hugging Face tokenizers reads too. */

static attn_status char_tokenizer(const char *path, const char *text, size_t len, attn_tok **out) {
    attn_status s = attn_tok_train_chars(text, len, out);
    if (s) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        return attn_set_error(s, "%s: %s (the character tokenizer needs UTF-8 text)", path, msg);
    }
    return ATTN_STATUS_OK;
}

/* ---- the run ------------------------------------------------------------------------------------ */

typedef struct {
    gopts o;
    char *text;
    size_t text_len;
    uint32_t crc;
    attn_tok *tok;
    int32_t *ids; /* (n_ids) the whole file; train = [0, n_train), validation = [n_train, n_ids) */
    size_t n_ids, n_train;
    attn_gpt_config cfg;
    attn_gpt_model *m;
    attn_gpt_trainer *tr; /* the data-parallel step: one replica per thread */
    int B, T;
    int32_t *x, *y; /* (B, T) */
    attn_optim *opt;
    attn_optim_range *ranges;
    attn_ckpt_tensor *tensors;
    attn_ckpt_state cs;
    FILE *metrics;
} grun;

static void grun_free(grun *r) {
    free(r->text);
    attn_tok_free(r->tok);
    attn_free(r->ids);
    attn_gpt_trainer_free(r->tr);
    attn_gpt_model_free(r->m);
    free(r->x);
    free(r->y);
    attn_optim_destroy(r->opt);
    free(r->ranges);
    free(r->tensors);
    if (r->cs.extra) json_decref(r->cs.extra);
    if (r->metrics) fclose(r->metrics);
}

/* The training configuration: the file (or the default) with the gaps a hand-written training
 * config may leave filled from the tokenizer: vocab_size, bos/eos_token_id ("<|endoftext|>" when
 * the tokenizer has it, else none), attn_pdrop 0. */
static attn_status load_train_config(const gopts *o, const attn_tok *tok, attn_gpt_config *cfg) {
    const char *name = o->config ? o->config : "<default config>";
    json_error_t err;
    json_t *root = o->config ? json_load_file(o->config, 0, &err) : json_loads(default_config_json, 0, &err);
    if (!root) {
        if (o->config && err.line < 1)
            return attn_set_error(ATTN_STATUS_IO, "%s: %s", name, err.text);
        return attn_set_error(ATTN_STATUS_FORMAT, "%s: %s (line %d)", name, err.text, err.line);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return attn_set_error(ATTN_STATUS_FORMAT, "%s: not a JSON object", name);
    }
    const int32_t V = attn_tok_vocab_size(tok);
    const int32_t eot = attn_tok_token_to_id(tok, "<|endoftext|>");
    if (!json_object_get(root, "vocab_size")) json_object_set_new(root, "vocab_size", json_integer(V));
    const char *ids[2] = {"bos_token_id", "eos_token_id"};
    for (int k = 0; k < 2; k++)
        if (!json_object_get(root, ids[k]))
            json_object_set_new(root, ids[k], eot >= 0 ? json_integer(eot) : json_null());
    if (!json_object_get(root, "attn_pdrop")) json_object_set_new(root, "attn_pdrop", json_real(0.0));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    attn_status s = attn_gpt_config_parse(text, name, cfg);
    free(text);
    if (s) return s;
    if (o->dropout >= 0) cfg->resid_pdrop = cfg->embd_pdrop = (float)o->dropout;
    if (cfg->attn_pdrop != 0.0f)
        return attn_set_error(ATTN_STATUS_UNSUPPORTED,
                              "%s: attn_pdrop is %g, but training needs 0 (the fused attention "
                              "kernel has no dropout on the attention probabilities): set "
                              "\"attn_pdrop\": 0",
                              name, (double)cfg->attn_pdrop);
    if (cfg->vocab_size < V)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: vocab_size %d is smaller than the tokenizer's %d ids (omit "
                              "vocab_size to use the tokenizer's)",
                              name, cfg->vocab_size, (int)V);
    return attn_gpt_config_check(cfg);
}

/* Data, tokenizer, configuration and model — fresh from the options, or from DIR on resume. */
static attn_status setup(grun *r) {
    gopts *o = &r->o;
    attn_status s = ATTN_STATUS_OK;
    char *p_cfg = train_path_in(o->out, "config.json"), *p_tok = train_path_in(o->out, "tokenizer.json");
    char *p_state = train_path_in(o->out, "training_state.json");
    uint64_t want_bytes = 0;
    uint32_t want_crc = 0;
    if (!p_cfg || !p_tok || !p_state) {
        s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if (o->resume) {
        if (!attn_ckpt_exists(o->out)) {
            s = attn_set_error(ATTN_STATUS_NOT_FOUND,
                               "--resume: %s holds no checkpoint (training_state.json)", o->out);
            goto done;
        }
        /* The run's options first: the state's "extra". (After a crash between the two renames
         * of a save only DIR.prev exists; attn_ckpt_load handles that, and this falls back.) */
        struct stat sb;
        if (stat(o->out, &sb) != 0) {
            /* only DIR.prev: a save was interrupted between its two renames */
            char *prev = malloc(strlen(o->out) + 6);
            if (!prev) {
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
            sprintf(prev, "%s.prev", o->out);
            free(p_cfg), free(p_tok), free(p_state);
            p_cfg = train_path_in(prev, "config.json"), p_tok = train_path_in(prev, "tokenizer.json");
            p_state = train_path_in(prev, "training_state.json");
            free(prev);
            if (!p_cfg || !p_tok || !p_state) {
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
        }
        json_t *j = NULL;
        if ((s = train_load_state_json(p_state, &j))) goto done;
        s = gopts_from_json(json_object_get(j, "extra"), o->out, o, &want_bytes, &want_crc);
        json_decref(j);
        if (!s) s = attn_gpt_config_load(p_cfg, &r->cfg);
        if (!s) s = attn_tok_load(p_tok, &r->tok);
        if (s) goto done;
    } else {
        if ((s = train_fresh_out(o->out, o->out))) goto done;
    }

    /* the text (its absolute path goes into the checkpoint, so --resume works from anywhere) */
    if (!o->resume) {
        static char abs_data[4096];
        char *rp = realpath(o->data, NULL);
        if (rp && strlen(rp) < sizeof abs_data) {
            snprintf(abs_data, sizeof abs_data, "%s", rp);
            o->data = abs_data;
        }
        free(rp);
    }
    s = read_file(o->data, &r->text, &r->text_len);
    if (s) goto done;
    r->crc = attn_crc32(0, r->text, r->text_len);
    if (o->resume && (want_bytes != r->text_len || want_crc != r->crc)) {
        s = attn_set_error(ATTN_STATUS_FORMAT,
                           "--resume: %s changed since the checkpoint was made (%llu bytes, CRC-32 "
                           "%08x; now %zu bytes, %08x)",
                           o->data, (unsigned long long)want_bytes, want_crc, r->text_len, r->crc);
        goto done;
    }
    if (!o->resume) {
        if (!strcmp(o->tokenizer, "char"))
            s = char_tokenizer(o->data, r->text, r->text_len, &r->tok);
        else
            s = attn_tok_load(o->tokenizer, &r->tok);
        if (s) goto done;
    }
    double t0 = train_now_s();
    s = attn_tok_encode_alloc(r->tok, r->text, r->text_len, &r->ids, &r->n_ids);
    if (s) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        s = attn_set_error(s, "%s: %s", o->data, msg);
        goto done;
    }
    double t_enc = train_now_s() - t0;

    if (!o->resume) {
        s = load_train_config(o, r->tok, &r->cfg);
        if (!s) s = attn_gpt_config_save(p_cfg, &r->cfg);
        if (!s) s = attn_tok_save(r->tok, p_tok);
        if (s) goto done;
    } else if (r->cfg.vocab_size < attn_tok_vocab_size(r->tok)) {
        s = attn_set_error(ATTN_STATUS_FORMAT, "%s: vocab_size %d is smaller than %s's %d ids",
                           p_cfg, r->cfg.vocab_size, p_tok, (int)attn_tok_vocab_size(r->tok));
        goto done;
    }
    r->T = r->cfg.n_positions;
    r->B = o->batch;
    /* nanoGPT's prepare.py: train = data[:int(n * 0.9)], val = data[int(n * 0.9):] */
    r->n_train = (size_t)((double)r->n_ids * 0.9);
    size_t n_val = r->n_ids - r->n_train;
    if (r->n_train < (size_t)r->T + 1 || n_val < (size_t)r->T + 1) {
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "%s: %zu tokens split into %zu for training and %zu for validation; "
                           "each part needs at least n_positions + 1 = %d",
                           o->data, r->n_ids, r->n_train, n_val, r->T + 1);
        goto done;
    }
    printf("data: %s: %zu bytes -> %zu tokens (%s tokenizer, %d ids) in %.1f s; train %zu, "
           "validation %zu\n",
           o->data, r->text_len, r->n_ids, strcmp(o->tokenizer, "char") ? o->tokenizer : "char",
           (int)attn_tok_vocab_size(r->tok), t_enc, r->n_train, n_val);
    free(r->text);
    r->text = NULL;
    s = attn_gpt_model_init(&r->cfg, r->o.seed, &r->m);
done:
    free(p_cfg), free(p_tok), free(p_state);
    return s;
}

static attn_status setup_training(grun *r) {
    gopts *o = &r->o;
    attn_gpt_model *m = r->m;
    if (o->lr_decay_steps < 0) o->lr_decay_steps = o->max_steps;
    TRAIN_TRY(train_tables_alloc(m->n_tensors, &r->tensors, &r->ranges));
    r->x = malloc((size_t)r->B * r->T * sizeof *r->x);
    r->y = malloc((size_t)r->B * r->T * sizeof *r->y);
    if (!r->x || !r->y) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        train_table_set(&r->tensors[i], &r->ranges[i], t->name, t->ndim, t->shape, m->params,
                        t->offset, t->numel, t->decay);
    }
    attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    op.beta1 = o->beta1, op.beta2 = o->beta2, op.eps = 1e-8;
    op.weight_decay = o->weight_decay;
    TRAIN_TRY(attn_optim_create(&op, m->num_params, r->ranges, m->n_tensors, &r->opt));
    /* One data-parallel replica per thread, each but the first with its own gradient buffer:
     * fewer when those buffers would pass 2 GiB (a large model's matrices keep every thread busy
     * inside the kernels anyway). */
    int replicas = attn_get_num_threads();
    const double grad_bytes = (double)m->num_params * sizeof(float);
    while (replicas > 1 && (replicas - 1) * grad_bytes > 2147483648.0) replicas--;
    TRAIN_TRY(attn_gpt_trainer_init(m, r->B, r->T, replicas, &r->tr));
    TRAIN_TRY(attn_gpt_trainer_set_precision(r->tr, r->o.precision));
    r->cs = attn_ckpt_state_init();
    if (o->resume) {
        TRAIN_TRY(attn_ckpt_load(o->out, r->tensors, m->n_tensors, r->opt, &r->cs));
        printf("resumed %s at step %lld\n", o->out, (long long)r->cs.step);
    }
    if (o->metrics) {
        r->metrics = fopen(o->metrics, o->resume ? "a" : "w");
        if (!r->metrics)
            return attn_set_error(ATTN_STATUS_IO, "%s: cannot open: %s", o->metrics, strerror(errno));
    }
    return ATTN_STATUS_OK;
}

static attn_status save(grun *r, int64_t step, double lr) {
    return train_save(r->o.out, r->tensors, r->m->n_tensors, r->opt, &r->cs, step, 0, step, lr,
                      gopts_to_json(&r->o, r->text_len, r->crc));
}

/* Mean loss over the same eval_iters validation batches every time (evaluation mode). */
static attn_status valid_loss(grun *r, double *out) {
    const int B = r->B, T = r->T;
    const int32_t *val = r->ids + r->n_train;
    const size_t n_val = r->n_ids - r->n_train;
    const uint64_t key = train_mix64(r->o.seed ^ STREAM_VALID);
    double sum = 0;
    for (int k = 0; k < r->o.eval_iters; k++) {
        sample_batch(val, n_val, B, T, key, (uint64_t)k, r->x, r->y);
        float l = 0;
        TRAIN_TRY(attn_gpt_trainer_eval(r->tr, B, T, r->x, r->y, &l));
        sum += l;
    }
    *out = sum / r->o.eval_iters;
    return ATTN_STATUS_OK;
}

/* One optimizer step: grad_accum micro-batches, clipping, AdamW. */
static attn_status train_step(grun *r, int64_t step, double lr, double *loss, double *norm) {
    attn_gpt_model *m = r->m;
    const int B = r->B, T = r->T, A = r->o.grad_accum;
    const uint64_t key = train_mix64(r->o.seed ^ STREAM_TRAIN);
    attn_gpt_zero_grad(m);
    double sum = 0;
    for (int micro = 0; micro < A; micro++) {
        uint64_t g = (uint64_t)step * (uint64_t)A + (uint64_t)micro;
        sample_batch(r->ids, r->n_train, B, T, key, g, r->x, r->y);
        float l = 0;
        TRAIN_TRY(attn_gpt_train_step(r->tr, true, r->o.seed, g, B, T, r->x, r->y, 1.0f / (float)A,
                                      &l));
        sum += l;
    }
    *loss = sum / A;
    /* finiteness check, clipping (grad_clip > 0) and AdamW in one pass fewer over the gradients */
    return attn_optim_clip_step(r->opt, m->params, m->grads, r->o.grad_clip, lr, r->ranges,
                                m->n_tensors, norm);
}

static int train_loop(grun *r) {
    gopts *o = &r->o;
    const attn_gpt_config *c = &r->cfg;
    int64_t step = r->cs.step;
    const int64_t end = o->max_steps;
    const double tokens_per_step = (double)r->B * r->T * o->grad_accum;
    printf("model: GPT-2, %zu parameters (%d layers, %d heads, width %d, context %d, vocabulary "
           "%d, dropout %.2f); batch %d x %d%s; %d threads, %s kernels\n",
           r->m->num_params, c->n_layer, c->n_head, c->n_embd, c->n_positions, c->vocab_size,
           (double)c->resid_pdrop, r->B, o->grad_accum, o->grad_accum > 1 ? " micro-batches" : "",
           attn_get_num_threads(), attn_backend_name(attn_get_backend()));
    fflush(stdout);
    train_catch_signals();

    const double t_start = train_now_s();
    double t_train = 0, win_loss = 0, lr = 0, last_loss = NAN, vl = NAN;
    int win_n = 0;
    int64_t done_steps = 0;
    attn_status s = ATTN_STATUS_OK;
    const char *why = "done";
    while (step < end) {
        const char *stop = train_stop_reason(t_start, o->time_budget);
        if (stop) {
            why = stop;
            break;
        }
        lr = attn_lr_cosine(step, o->lr, o->min_lr, o->warmup, o->lr_decay_steps);
        double loss = 0, norm = 0, t0 = train_now_s();
        s = train_step(r, step, lr, &loss, &norm);
        if (s) break;
        t_train += train_now_s() - t0;
        step++, done_steps++;
        last_loss = loss;
        win_loss += loss, win_n++;
        double tok_s = tokens_per_step * (double)done_steps / (t_train > 0 ? t_train : 1);
        if (r->metrics) {
            fprintf(r->metrics,
                    "{\"step\": %lld, \"loss\": %.17g, \"lr\": %.17g, \"grad_norm\": %.17g, "
                    "\"tokens\": %.0f, \"seconds\": %.6f}\n",
                    (long long)step, loss, lr, norm, tokens_per_step * (double)step, train_now_s() - t_start);
            fflush(r->metrics);
        }
        if (step % o->log_every == 0 || step == end) {
            double elapsed = train_now_s() - t_start;
            double eta = train_eta(t_train / (double)done_steps, end - step, o->time_budget, elapsed);
            char where[80];
            snprintf(where, sizeof where, "step %6lld/%lld", (long long)step, (long long)end);
            train_progress(where, win_loss / win_n, lr, tok_s, elapsed, eta);
            win_loss = 0, win_n = 0;
        }
        if (step % o->eval_every == 0 && step != end) {
            double t1 = train_now_s();
            s = valid_loss(r, &vl);
            if (s) break;
            if (vl < r->cs.best_valid_loss) r->cs.best_valid_loss = vl;
            printf("valid  %6lld | loss %7.4f (%d batches) | %.1f s\n", (long long)step, vl,
                   o->eval_iters, train_now_s() - t1);
            if (r->metrics) {
                fprintf(r->metrics, "{\"step\": %lld, \"val_loss\": %.17g}\n", (long long)step, vl);
                fflush(r->metrics);
            }
            fflush(stdout);
        }
        if (step % o->save_every == 0 && step != end) {
            s = save(r, step, lr);
            if (s) break;
        }
    }
    if (s) {
        fprintf(stderr, "attn: error: %s\n", attn_last_error());
        return CLI_EXIT_FAIL;
    }
    s = valid_loss(r, &vl);
    if (s) return cli_fail(s);
    if (vl < r->cs.best_valid_loss) r->cs.best_valid_loss = vl;
    if (r->metrics) {
        fprintf(r->metrics, "{\"step\": %lld, \"val_loss\": %.17g}\n", (long long)step, vl);
        fflush(r->metrics);
    }
    s = save(r, step, lr);
    if (s) return cli_fail(s);
    double el = train_now_s() - t_start;
    double tok_s = done_steps ? tokens_per_step * (double)done_steps / (t_train > 0 ? t_train : 1) : 0;
    char tl[32] = "n/a";
    if (!isnan(last_loss)) snprintf(tl, sizeof tl, "%.4f", last_loss);
    printf("%s: step %lld, train loss %s, val loss %.4f (%d batches), %.1f s, tokens/s=%.0f; "
           "saved %s\n",
           why, (long long)step, tl, vl, o->eval_iters, el, tok_s, o->out);
    return CLI_EXIT_OK;
}

/* ---- dispatch --------------------------------------------------------------------------------- */

bool cmd_train_gpt_wanted(int argc, char **argv) {
    const char *out = NULL;
    bool resume = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--resume")) resume = true;
        if (i + 1 < argc && !strcmp(argv[i], "--arch")) return !strcmp(argv[i + 1], "gpt");
        if (i + 1 < argc && !strcmp(argv[i], "--out")) out = argv[i + 1];
    }
    if (!resume || !out) return false;
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
    bool gpt = mt && !strcmp(mt, "gpt2");
    json_decref(j);
    free(p);
    return gpt;
}

int cmd_train_gpt(int argc, char **argv) {
    grun r;
    memset(&r, 0, sizeof r);
    r.o = default_gopts();
    int rc = parse_gargs(argc, argv, &r.o);
    if (rc >= 0) return rc;
    attn_status s = setup(&r);
    if (!s) s = setup_training(&r);
    if (s) {
        rc = cli_fail(s);
        grun_free(&r);
        return rc;
    }
    rc = train_loop(&r);
    grun_free(&r);
    return rc;
}

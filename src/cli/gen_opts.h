/* gen_opts.h — the sampling and stopping options `attn generate` and `attn chat` share, merged
 * with the model directory's generation_config.json (its values are the defaults; flags override
 * them) and its end-of-text ids. */
#ifndef ATTN_CLI_GEN_OPTS_H
#define ATTN_CLI_GEN_OPTS_H

#include "attn_chat.h"
#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_tok.h"

#include <signal.h>
#include <stdbool.h>

#define CLI_GEN_MAX_STOPS 16

typedef struct {
    attn_gen_params gp;     /* what the flags gave (merged by cli_gen_resolve) */
    bool has_temperature, has_top_k, has_top_p, has_min_p, has_rep, has_greedy, has_seed;
    int max_tokens;         /* 0: not given */
    const char *stops[CLI_GEN_MAX_STOPS]; /* --stop strings (argv's) */
    int n_stops;
    bool ignore_eos;
} cli_gen_opts;

void cli_gen_opts_init(cli_gen_opts *o);

/* The options' help text (for a command's usage). */
extern const char cli_gen_usage[];

/* When a is one of the options: parse it (v its value, or NULL), set *used to the arguments
 * consumed (1 or 2) and return CLI_EXIT_OK, or a usage error's exit code; returns -1 when a is
 * not one of them. */
int cli_gen_opt(cli_gen_opts *o, const char *cmd, const char *a, const char *v, int *used);

/* The final parameters and stop ids: generation_config.json of dir (when present) gives the
 * defaults, else attn's (sampling at temperature 1, top-k 50); flags override; a seed from the
 * clock unless given. Stop ids: every end-of-text id of the config and of generation_config.json
 * (none with --ignore-eos); when there are none, the tokenizer's <|endoftext|> if it has one.
 * *max_tokens: the flag, else generation_config's max_new_tokens, else def. */
attn_status cli_gen_resolve(cli_gen_opts *o, const char *dir, const attn_gpt_model *m,
                            const attn_tok *tok, int def_max_tokens, attn_gen_params *gp,
                            int32_t *stop_ids, int *n_stop, int *max_tokens);

/* The chat template of --model PATH: a directory's (attn_chat_template_load_dir), or a GGUF
 * file's tokenizer.chat_template (which: tokenizer.chat_template.WHICH) with the special-token
 * variables (bos_token, eos_token, unk_token, pad_token, sep_token, cls_token, mask_token) set
 * from the file's ids through tok, the tokenizer read from the same file. */
/* A GGUF file's general.architecture into buf ("" when path is a directory). */
attn_status cli_gguf_arch(const char *path, char *buf, size_t cap);

attn_status cli_chat_template_load(const char *path, const char *which, const attn_tok *tok,
                                   attn_chat_template **out);

/* The generation callback that pushes each token into a stream and, when print, writes the new
 * text to stdout at once; it stops generation at a stop string, at *interrupt (may be NULL), or
 * on an error (kept in err). */
typedef struct {
    attn_gen_stream *ts;
    bool print;
    volatile sig_atomic_t *interrupt;
    attn_status err;
} cli_gen_stream_ctx;
bool cli_gen_on_token(void *ctx, int32_t id);

#endif

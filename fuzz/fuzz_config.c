/* fuzz_config.c — the configuration readers on the input, written to a scratch file: the
 * encoder–decoder config.json loader (attn_encdec_config_load and the training template loader),
 * the decoders' config.json (attn_gpt_config_load: GPT-2 and the Llama family's model_types) and
 * generation_config.json (attn_gen_config_parse). An accepted configuration must pass its check,
 * save, and load back identical. */
#include "fuzz.h"

#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_models.h"

static bool same(const attn_encdec_config *a, const attn_encdec_config *b) {
    return a->src_vocab == b->src_vocab && a->tgt_vocab == b->tgt_vocab &&
           a->d_model == b->d_model && a->n_head == b->n_head && a->d_ff == b->d_ff &&
           a->n_enc_layers == b->n_enc_layers && a->n_dec_layers == b->n_dec_layers &&
           a->max_len == b->max_len && a->dropout == b->dropout &&
           a->share_embeddings == b->share_embeddings && a->tie_output == b->tie_output &&
           a->pre_ln == b->pre_ln && a->activation == b->activation &&
           a->positions == b->positions && a->pad_id == b->pad_id &&
           a->layer_norm_eps == b->layer_norm_eps;
}

/* The decoder and generation configurations of the same text. */
static void decoder_configs(const char *path, const uint8_t *data, size_t size) {
    attn_gpt_config g, back;
    if (attn_gpt_config_load(path, &g)) {
        fuzz_check_message(attn_last_error());
    } else {
        if (attn_gpt_config_check(&g) || attn_gpt_num_params(&g) == 0) abort();
        char out[600];
        snprintf(out, sizeof out, "%s/gpt.json", fuzz_scratch());
        if (attn_gpt_config_save(out, &g)) abort();
        if (attn_gpt_config_load(out, &back)) abort();
        if (memcmp(&g, &back, sizeof g) != 0) abort();
    }
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = '\0';
    attn_gen_config gc;
    if (attn_gen_config_parse(text, "generation_config.json", &gc)) {
        fuzz_check_message(attn_last_error());
    } else if (attn_gen_check_params(&gc.params) || gc.n_eos > ATTN_GEN_MAX_STOP_IDS) {
        abort(); /* what it accepts, a sampler accepts */
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file("config.json", data, size);
    decoder_configs(path, data, size);
    attn_encdec_config c, t;
    attn_status s = attn_encdec_config_load_template(path, &t);
    if (s) fuzz_check_message(attn_last_error());
    s = attn_encdec_config_load(path, &c);
    if (s) {
        fuzz_check_message(attn_last_error());
        if (!strstr(attn_last_error(), "config.json")) abort();
        return 0;
    }
    if (attn_encdec_config_check(&c) || attn_encdec_num_params(&c) == 0) abort();
    /* what attn_encdec_model_init relies on once the check passed: its tensor table count
     * (16 per encoder layer, 26 per decoder layer, in int) and every buffer within the limit */
    if (16.0 * c.n_enc_layers + 26.0 * c.n_dec_layers + 16 > 1e6) abort();
    if ((double)attn_encdec_num_params(&c) * 4 > (double)((size_t)1 << 38) ||
        (double)c.max_len * c.d_model * 4 > (double)((size_t)1 << 38))
        abort();
    if (!same(&c, &t)) abort(); /* the template parse is the same parse */
    char out[600];
    snprintf(out, sizeof out, "%s/saved.json", fuzz_scratch());
    if (attn_encdec_config_save(out, &c)) abort();
    attn_encdec_config back;
    if (attn_encdec_config_load(out, &back)) abort();
    if (!same(&c, &back)) abort();
    return 0;
}

/* fuzz_config.c — the encoder–decoder config.json loader (attn_encdec_config_load and the
 * training template loader) on the input, written to a scratch file. An accepted configuration
 * must pass attn_encdec_config_check, save, and load back identical. */
#include "fuzz.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file("config.json", data, size);
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

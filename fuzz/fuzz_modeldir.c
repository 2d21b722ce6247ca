/* fuzz_modeldir.c — loading a model directory (attn_encdec_load_dir: config.json, then
 * model.safetensors checked tensor by tensor against the configuration), then a forward pass and
 * a short greedy and beam translation with whatever weights loaded (NaN and inf included).
 *
 * Input: config.json FUZZ_SEP model.safetensors. Configurations that are valid but larger than
 * FUZZ_MAX_FLOATS are skipped before loading (a size policy of this harness, not a finding: the
 * library's own limit is far above the fuzzer's memory). */
#include "fuzz.h"

#include "attn_core.h"
#include "attn_infer.h"
#include "attn_models.h"

#define FUZZ_MAX_FLOATS (1 << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    attn_set_num_threads(1);
    return 0;
}

static void run_model(attn_encdec_model *m) {
    const attn_encdec_config *c = &m->cfg;
    int T = c->max_len < 3 ? c->max_len : 3;
    attn_encdec_state *st;
    if (attn_encdec_state_init(m, 2, T, T, &st)) {
        fuzz_check_message(attn_last_error());
        return;
    }
    int32_t src[6], tgt[6], sl[2] = {T, 1}, tl[2] = {1, T};
    for (int i = 0; i < 2 * T; i++) {
        src[i] = (i * 7 + 1) % c->src_vocab;
        tgt[i] = (i * 5 + 2) % c->tgt_vocab;
    }
    if (attn_encdec_forward(m, st, 2, T, T, src, sl, tgt, tl, NULL) == ATTN_STATUS_OK) {
        float loss;
        if (attn_encdec_loss(m, st, tgt, 0.1f, &loss) == ATTN_STATUS_OK)
            attn_encdec_backward(m, st);
    }
    attn_encdec_state_free(st);

    attn_translate_session *s;
    if (attn_translate_session_init(m, 2, 2, T, 4, &s)) {
        fuzz_check_message(attn_last_error());
        return;
    }
    attn_translate_options o = attn_translate_default_options();
    o.bos_id = 1 % c->tgt_vocab;
    o.eos_id = 2 % c->tgt_vocab;
    int32_t out[2 * 8], out_len[2];
    float score[2];
    for (int beam = 1; beam <= 2; beam++) {
        o.beam_size = beam;
        if (attn_translate(s, &o, 2, T, src, sl, 8, out, out_len, score) == ATTN_STATUS_OK) {
            for (int b = 0; b < 2; b++) {
                if (out_len[b] < 0 || out_len[b] > 8) abort();
                for (int i = 0; i < out_len[b]; i++)
                    if (out[b * 8 + i] < 0 || out[b * 8 + i] >= c->tgt_vocab) abort();
            }
        } else {
            fuzz_check_message(attn_last_error());
        }
    }
    attn_translate_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[2];
    size_t len[2];
    fuzz_split(data, size, 2, part, len);
    const char *dir = fuzz_subdir("model");
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    attn_encdec_config cfg;
    fuzz_file("model/config.json", part[0], len[0]);
    if (attn_encdec_config_load(path, &cfg) == ATTN_STATUS_OK) {
        double floats = (double)attn_encdec_num_params(&cfg) +
                        (double)cfg.max_len * cfg.d_model * 3 +
                        (double)cfg.n_enc_layers * 64 + (double)cfg.n_dec_layers * 64;
        if (floats > FUZZ_MAX_FLOATS) return 0;
    }
    fuzz_file("model/model.safetensors", part[1], len[1]);
    attn_encdec_model *m = NULL;
    if (attn_encdec_load_dir(dir, &m)) {
        fuzz_check_message(attn_last_error());
        if (!strstr(attn_last_error(), dir) && !strstr(attn_last_error(), "encdec")) abort();
        return 0;
    }
    run_model(m);
    attn_encdec_model_free(m);
    return 0;
}

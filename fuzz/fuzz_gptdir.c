/* fuzz_gptdir.c — loading a GPT-2 model directory (attn_gpt_load_dir: a Hugging Face config.json,
 * then model.safetensors, or a sharded checkpoint's model.safetensors.index.json and its shard),
 * then a forward pass and a few KV-cache decode steps with whatever weights loaded.
 *
 * Input: config.json FUZZ_SEP model.safetensors [FUZZ_SEP model.safetensors.index.json]; with
 * the third part the second is written as the shard "model-00001-of-00001.safetensors" and no
 * model.safetensors exists. Configurations larger than FUZZ_MAX_FLOATS are skipped (a policy of
 * this harness, not a finding). */
#include "fuzz.h"

#include "attn_gpt.h"

#define FUZZ_MAX_FLOATS (1 << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    attn_set_num_threads(1);
    return 0;
}

static void run_model(const attn_gpt_model *m) {
    const attn_gpt_config *c = &m->cfg;
    int T = c->n_positions < 3 ? c->n_positions : 3;
    int32_t ids[6];
    for (int i = 0; i < 6; i++) ids[i] = (i * 7 + 1) % c->vocab_size;
    attn_gpt_state *st;
    if (attn_gpt_state_init(m, 2, T, &st) == ATTN_STATUS_OK) {
        if (attn_gpt_forward(m, st, 2, T, ids, NULL)) fuzz_check_message(attn_last_error());
        attn_gpt_state_free(st);
    } else {
        fuzz_check_message(attn_last_error());
    }
    attn_gpt_kv *kv;
    if (attn_gpt_kv_init(m, 1, T, &kv)) {
        fuzz_check_message(attn_last_error());
        return;
    }
    float *logits = malloc((size_t)c->vocab_size * T * sizeof *logits);
    if (!logits) abort();
    if (attn_gpt_decode(m, kv, 1, T - 1 > 0 ? T - 1 : 1, ids, logits, true))
        fuzz_check_message(attn_last_error());
    if (attn_gpt_kv_len(kv) < T && attn_gpt_decode(m, kv, 1, 1, ids + 1, logits, false))
        fuzz_check_message(attn_last_error());
    /* past the cache: must be refused */
    if (attn_gpt_decode(m, kv, 1, T + 1, ids, logits, false) == ATTN_STATUS_OK) abort();
    free(logits);
    attn_gpt_kv_free(kv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[3];
    size_t len[3];
    int k = fuzz_split(data, size, 3, part, len);
    const char *dir = fuzz_subdir("gpt");
    /* the size guard, from the same parse the loader does */
    char *cfg_text = malloc(len[0] + 1);
    if (!cfg_text) abort();
    memcpy(cfg_text, part[0], len[0]);
    cfg_text[len[0]] = '\0';
    attn_gpt_config cfg;
    bool big = false;
    if (attn_gpt_config_parse(cfg_text, "<config>", &cfg) == ATTN_STATUS_OK) {
        double floats = (double)attn_gpt_num_params(&cfg) +
                        (double)cfg.n_positions * cfg.n_embd * 8 + (double)cfg.vocab_size * 6;
        big = floats > FUZZ_MAX_FLOATS;
    }
    free(cfg_text);
    if (big) return 0;
    fuzz_file("gpt/config.json", part[0], len[0]);
    if (k == 3) {
        fuzz_file("gpt/model-00001-of-00001.safetensors", part[1], len[1]);
        fuzz_file("gpt/model.safetensors.index.json", part[2], len[2]);
    } else {
        fuzz_file("gpt/model.safetensors", part[1], len[1]);
    }
    attn_gpt_model *m = NULL;
    if (attn_gpt_load_dir(dir, &m)) {
        fuzz_check_message(attn_last_error());
        return 0;
    }
    run_model(m);
    attn_gpt_model_free(m);
    return 0;
}

/* fuzz_bertdir.c — loading a BERT model directory (attn_bert_load_dir: a Hugging Face
 * config.json, then model.safetensors with or without the pooler and the masked-LM head), then a
 * forward pass over a padded batch, pooling, the pooler and masked-LM logits when present.
 *
 * Input: config.json FUZZ_SEP model.safetensors. Configurations larger than FUZZ_MAX_FLOATS are
 * skipped before loading (a policy of this harness, not a finding). */
#include "fuzz.h"

#include "attn_bert.h"

#define FUZZ_MAX_FLOATS (1 << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    attn_set_num_threads(1);
    return 0;
}

static void run_model(const attn_bert_model *m) {
    const attn_bert_config *c = &m->cfg;
    int T = c->max_position_embeddings < 3 ? c->max_position_embeddings : 3;
    int32_t ids[6], types[6], lengths[2] = {T, 1};
    for (int i = 0; i < 6; i++) ids[i] = (i * 7 + 1) % c->vocab_size, types[i] = i % c->type_vocab_size;
    attn_bert_state *st;
    if (attn_bert_state_init(m, 2, T, &st)) {
        fuzz_check_message(attn_last_error());
        return;
    }
    if (attn_bert_forward(m, st, 2, T, ids, types, lengths, NULL) == ATTN_STATUS_OK) {
        float *out = malloc((size_t)2 * c->hidden_size * sizeof *out);
        float *logits = malloc((size_t)2 * c->vocab_size * sizeof *logits);
        if (!out || !logits) abort();
        for (int mode = ATTN_BERT_POOL_MEAN; mode <= ATTN_BERT_POOL_MEAN_SQRT_LEN; mode++)
            if (attn_bert_pool(m, st, (attn_bert_pooling)mode, mode & 1, out))
                fuzz_check_message(attn_last_error());
        if (attn_bert_pooler(m, st, out) == ATTN_STATUS_OK) {
            if (!m->has_pooler) abort();
        } else {
            fuzz_check_message(attn_last_error());
        }
        int32_t pos[2] = {0, T};
        if (attn_bert_mlm_logits(m, st, 2, pos, logits) == ATTN_STATUS_OK) {
            if (!m->has_mlm) abort();
        } else {
            fuzz_check_message(attn_last_error());
        }
        free(out);
        free(logits);
    } else {
        fuzz_check_message(attn_last_error());
    }
    attn_bert_state_free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[2];
    size_t len[2];
    fuzz_split(data, size, 2, part, len);
    const char *dir = fuzz_subdir("bert");
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    fuzz_file("bert/config.json", part[0], len[0]);
    attn_bert_config cfg;
    if (attn_bert_config_load(path, &cfg) == ATTN_STATUS_OK) {
        double floats = (double)attn_bert_num_params(&cfg, true, true) +
                        (double)cfg.max_position_embeddings * cfg.hidden_size * 16 +
                        (double)cfg.vocab_size * 4;
        if (floats > FUZZ_MAX_FLOATS) return 0;
    }
    fuzz_file("bert/model.safetensors", part[1], len[1]);
    attn_bert_model *m = NULL;
    if (attn_bert_load_dir(dir, &m)) {
        fuzz_check_message(attn_last_error());
        return 0;
    }
    run_model(m);
    attn_bert_model_free(m);
    return 0;
}

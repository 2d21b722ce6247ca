/* gpt_io.c — GPT-2 and Llama-family model directories in Hugging Face's format (attn_gpt.h): config.json plus
 * model.safetensors (or a sharded model.safetensors.index.json), loaded strictly by name and
 * shape through GPT-2's name map, and written so that transformers' from_pretrained loads them. */
#include "attn_gpt.h"

#include "gpt-impl.h"
#include "models-impl.h"

#include <stdio.h>
#include <string.h>

/* The name map: the table holds GPT2LMHeadModel's names ("transformer.h.0..."); a file written by
 * GPT2Model has the trunk without the "transformer." prefix. */
typedef struct {
    const char *prefix; /* "transformer." or "" */
    bool tied;
} names;

static bool file_name(void *ctx, const attn_param_info *t, int k, char *buf, size_t cap) {
    const names *n = ctx;
    if (k > 0) return false;
    if (strncmp(t->name, "transformer.", 12) == 0)
        snprintf(buf, cap, "%s%s", n->prefix, t->name + 12);
    else
        snprintf(buf, cap, "%s", t->name);
    return true;
}

/* The Llama family's file names are the table's; the rotary inv_freq buffers of older
 * checkpoints (model.layers.N.self_attn.rotary_emb.inv_freq) and a tied model's lm_head.weight are
 * ignored. */
static bool llama_file_name(void *ctx, const attn_param_info *t, int k, char *buf, size_t cap) {
    (void)ctx;
    if (k > 0) return false;
    snprintf(buf, cap, "%s", t->name);
    return true;
}

static bool llama_ignorable(void *ctx, const char *name) {
    const names *n = ctx;
    if (strcmp(name, "lm_head.weight") == 0) return n->tied;
    const char *p = name;
    if (strncmp(p, "model.layers.", 13) != 0) return false;
    p += 13;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
    return strcmp(p, ".self_attn.rotary_emb.inv_freq") == 0;
}

/* Non-parameter buffers of older GPT-2 checkpoints ([transformer.]h.N.attn.bias and
 * h.N.attn.masked_bias: the causal mask and its fill value), and lm_head.weight of a tied model
 * (the embeddings are authoritative). */
static bool ignorable(void *ctx, const char *name) {
    const names *n = ctx;
    if (strcmp(name, "lm_head.weight") == 0) return n->tied;
    const char *p = name;
    if (strncmp(p, "transformer.", 12) == 0) p += 12;
    if (strncmp(p, "h.", 2) != 0) return false;
    p += 2;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
    return strcmp(p, ".attn.bias") == 0 || strcmp(p, ".attn.masked_bias") == 0;
}

/* The name map of an architecture (n: the GPT-2 prefix and tying). */
static mdl_name_map name_map(const attn_gpt_config *c, names *n) {
    mdl_name_map map = {file_name, ignorable, n};
    if (attn_gpt_is_llama(c)) map.file_name = llama_file_name, map.ignorable = llama_ignorable;
    return map;
}

attn_status attn_gpt_load_dir(const char *dir, attn_gpt_model **out) {
    if (!dir || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt load: NULL argument");
    *out = NULL;
    char path[4096];
    if (!mdl_dir_path(path, sizeof path, dir, "config.json", "gpt"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    attn_gpt_config cfg;
    ATTN_TRY(attn_gpt_config_load(path, &cfg)); /* names the file and the field */
    mdl_weights *w;
    ATTN_TRY(mdl_weights_open(dir, "gpt", &w));
    names n = {"transformer.", cfg.tie_word_embeddings};
    attn_status st = ATTN_STATUS_OK;
    if (!attn_gpt_is_llama(&cfg) && !mdl_weights_find(w, "transformer.wte.weight", NULL)) {
        if (mdl_weights_find(w, "wte.weight", NULL))
            n.prefix = "";
        else
            st = attn_fail(ATTN_STATUS_FORMAT,
                           "%s: tensor 'transformer.wte.weight' (or 'wte.weight') is missing "
                           "(expected shape (%d, %d))",
                           mdl_weights_path(w), cfg.vocab_size, cfg.n_embd);
    }
    attn_gpt_model *m = NULL;
    if (!st) st = gpt_model_alloc(&cfg, false, &m);
    if (!st) {
        const mdl_name_map map = name_map(&cfg, &n);
        st = mdl_load_params(w, m->tensors, m->n_tensors, m->params, &map);
    }
    mdl_weights_close(w);
    if (st) {
        attn_gpt_model_free(m);
        return st;
    }
    *out = m;
    return ATTN_STATUS_OK;
}

attn_status attn_gpt_save_dir(const attn_gpt_model *m, const char *dir) {
    if (!m || !dir || !*dir)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt save: NULL argument");
    if (!m->params)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "gpt save: the model was read from a GGUF file (its weights stay there, "
                         "some quantized): it cannot be saved as a directory");
    ATTN_TRY(mdl_make_dir(dir, "gpt save"));
    char path[4096];
    /* Weights first, then the config: a reader that finds a config beside an old weight file
     * fails its shape checks loudly rather than loading half-updated weights silently. */
    if (!mdl_dir_path(path, sizeof path, dir, "model.safetensors", "gpt save"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    /* transformers refuses a safetensors file whose metadata lacks format "pt". */
    static const char *const meta[] = {"format", "pt", NULL};
    names n = {"transformer.", m->cfg.tie_word_embeddings};
    const mdl_name_map map = name_map(&m->cfg, &n);
    ATTN_TRY(mdl_save_params(path, m->tensors, m->n_tensors, m->params, &map, meta));
    if (!mdl_dir_path(path, sizeof path, dir, "config.json", "gpt save"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    return attn_gpt_config_save(path, &m->cfg);
}

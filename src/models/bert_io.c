/* bert_io.c — BERT model directories in Hugging Face's format (attn_bert.h): config.json plus
 * model.safetensors (or a sharded index) as BertModel / BertForMaskedLM / BertForPreTraining
 * write them, through BERT's name map; written so that transformers' from_pretrained loads them. */
#include "attn_bert.h"

#include "bert-impl.h"
#include "models-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The name map: the table holds BertModel's names; the encoder may sit under "bert." (the heads,
 * "cls.*", never do); old checkpoints spell LayerNorm .gamma / .beta; cls.predictions.bias may be
 * stored as cls.predictions.decoder.bias. */
typedef struct {
    const char *prefix; /* "bert." or "" */
} names;

static bool file_name(void *ctx, const attn_param_info *t, int k, char *buf, size_t cap) {
    const names *n = ctx;
    const char *pre = strncmp(t->name, "cls.", 4) == 0 ? "" : n->prefix;
    static const struct {
        const char *now, *old;
    } alt[] = {{"LayerNorm.weight", "LayerNorm.gamma"}, {"LayerNorm.bias", "LayerNorm.beta"}};
    if (k == 0) {
        snprintf(buf, cap, "%s%s", pre, t->name);
        return true;
    }
    if (k == 1) {
        for (int i = 0; i < 2; i++)
            if (ends_with(t->name, alt[i].now)) {
                size_t len = strlen(t->name) - strlen(alt[i].now);
                snprintf(buf, cap, "%s%.*s%s", pre, (int)len, t->name, alt[i].old);
                return true;
            }
        if (strcmp(t->name, "cls.predictions.bias") == 0) {
            snprintf(buf, cap, "cls.predictions.decoder.bias");
            return true;
        }
    }
    return false;
}

/* Buffers (embeddings.position_ids), other heads (cls.seq_relationship.*, classifiers) and a tied
 * model's decoder weight are not the model's: ignored, as transformers does. A layer beyond
 * num_hidden_layers is refused before loading (attn_bert_load_dir). */
static bool ignorable(void *ctx, const char *name) {
    (void)ctx, (void)name;
    return true;
}

attn_status attn_bert_save_dir(const attn_bert_model *m, const char *dir) {
    if (!m || !dir || !*dir)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert save: NULL argument");
    ATTN_TRY(mdl_make_dir(dir, "bert save"));
    char path[4096];
    if (!mdl_dir_path(path, sizeof path, dir, "model.safetensors", "bert save"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    /* BertForMaskedLM nests the encoder under "bert."; its head is "cls.*". transformers refuses
     * safetensors files whose metadata format is not "pt". */
    names n = {m->has_mlm ? "bert." : ""};
    const mdl_name_map map = {file_name, ignorable, &n};
    static const char *const meta[] = {"format", "pt", NULL};
    ATTN_TRY(mdl_save_params(path, m->tensors, m->n_tensors, m->params, &map, meta));
    if (!mdl_dir_path(path, sizeof path, dir, "config.json", "bert save"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    return attn_bert_config_save(path, &m->cfg, m->has_mlm ? "BertForMaskedLM" : "BertModel");
}

attn_status attn_bert_load_dir(const char *dir, attn_bert_model **out) {
    if (!dir || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert load: NULL argument");
    *out = NULL;
    char path[4096];
    if (!mdl_dir_path(path, sizeof path, dir, "config.json", "bert load"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    attn_bert_config cfg;
    ATTN_TRY(attn_bert_config_load(path, &cfg));
    mdl_weights *w;
    ATTN_TRY(mdl_weights_open(dir, "bert load", &w));
    /* Which naming and which parts: "bert."-prefixed (BertForMaskedLM / BertForPreTraining) or
     * bare (BertModel); pooler and MLM head present or not. */
    names n = {mdl_weights_has_prefix(w, "bert.embeddings.") ? "bert." : ""};
    char buf[160];
    snprintf(buf, sizeof buf, "%spooler.", n.prefix);
    const bool pooler = mdl_weights_has_prefix(w, buf);
    const bool mlm = mdl_weights_has_prefix(w, "cls.predictions.");
    /* A layer beyond num_hidden_layers: the file belongs to another configuration. */
    attn_status s = ATTN_STATUS_OK;
    snprintf(buf, sizeof buf, "%sencoder.layer.", n.prefix);
    for (int i = 0; i < mdl_weights_count(w) && !s; i++) {
        const char *nm = mdl_weights_name(w, i);
        if (strncmp(nm, buf, strlen(buf)) != 0) continue;
        long k = strtol(nm + strlen(buf), NULL, 10);
        if (k < 0 || k >= cfg.num_hidden_layers)
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: tensor '%s' is a layer beyond num_hidden_layers = %d of "
                          "config.json",
                          mdl_weights_path(w), nm, cfg.num_hidden_layers);
    }
    attn_bert_model *m = NULL;
    if (!s) s = bert_model_alloc(&cfg, pooler, mlm, &m);
    if (!s) {
        const mdl_name_map map = {file_name, ignorable, &n};
        s = mdl_load_params(w, m->tensors, m->n_tensors, m->params, &map);
    }
    mdl_weights_close(w);
    if (s) {
        attn_bert_model_free(m);
        return s;
    }
    *out = m;
    return ATTN_STATUS_OK;
}

/* bert_config.c — BERT configuration (attn_bert.h): BertConfig's defaults, validation with sizes
 * refused before anything is allocated, and HF config.json load/save with jansson. */
#include "attn_bert.h"
#include "attn_nn.h"

#include "../core/core-impl.h"
#include "config-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

attn_bert_config attn_bert_default_config(void) {
    attn_bert_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = 30522;
    c.hidden_size = 768;
    c.num_hidden_layers = 12;
    c.num_attention_heads = 12;
    c.intermediate_size = 3072;
    c.hidden_act = ATTN_ACT_GELU_ERF;
    c.hidden_dropout_prob = 0.1f;
    c.attention_probs_dropout_prob = 0.1f;
    c.max_position_embeddings = 512;
    c.type_vocab_size = 2;
    c.initializer_range = 0.02f;
    c.layer_norm_eps = 1e-12f;
    c.pad_token_id = 0;
    c.tie_word_embeddings = true;
    return c;
}

/* Parameter count in double (exact below 2^53, no overflow). */
static double count_params(const attn_bert_config *c, bool pooler, bool mlm) {
    const double V = c->vocab_size, C = c->hidden_size, F = c->intermediate_size;
    double n = (V + c->max_position_embeddings + c->type_vocab_size) * C + 2 * C;
    const double layer = 4 * C * C + 4 * C + 2 * C + F * C + F + C * F + C + 2 * C;
    n += (double)c->num_hidden_layers * layer;
    if (pooler) n += C * C + C;
    if (mlm) n += C * C + C + 2 * C + V + (c->tie_word_embeddings ? 0 : V * C);
    return n;
}

attn_status attn_bert_config_check(const attn_bert_config *c) {
    if (!c) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert: NULL config");
    /* Each size: positive, and below a bound no real model comes near (an absurd value from a
     * corrupt config.json is refused here, naming the field, before any allocation). */
    const config_size sz[] = {{"vocab_size", c->vocab_size, 1 << 26},
              {"hidden_size", c->hidden_size, 1 << 16},
              {"num_hidden_layers", c->num_hidden_layers, 1 << 12},
              {"num_attention_heads", c->num_attention_heads, 1 << 16},
              {"intermediate_size", c->intermediate_size, 1 << 20},
              {"max_position_embeddings", c->max_position_embeddings, 1 << 20},
              {"type_vocab_size", c->type_vocab_size, 1 << 20}};
    attn_status s = config_check_sizes("bert", sz, sizeof sz / sizeof sz[0], "absurdly large");
    if (s) return s;
    if (c->hidden_size % c->num_attention_heads != 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert config: num_attention_heads (%d) must divide hidden_size (%d)",
                         c->num_attention_heads, c->hidden_size);
    if (c->hidden_act != ATTN_ACT_GELU_ERF && c->hidden_act != ATTN_ACT_GELU_TANH &&
        c->hidden_act != ATTN_ACT_RELU)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert config: hidden_act must be gelu, gelu_new or relu (got %d)",
                         (int)c->hidden_act);
    if ((s = config_check_prob("bert", "hidden_dropout_prob", c->hidden_dropout_prob)) ||
        (s = config_check_prob("bert", "attention_probs_dropout_prob",
                               c->attention_probs_dropout_prob)) ||
        (s = config_check_positive("bert", "layer_norm_eps", c->layer_norm_eps, false)) ||
        (s = config_check_positive("bert", "initializer_range", c->initializer_range, true)))
        return s;
    if (c->pad_token_id < -1 || c->pad_token_id >= c->vocab_size)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "bert config: pad_token_id %d must be in [0, vocab_size %d) or null",
                         c->pad_token_id, c->vocab_size);
    const double lim = (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float));
    double n = count_params(c, true, true);
    if (n > lim)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "bert config: %.3g parameters (vocab_size %d, hidden_size %d, "
                         "num_hidden_layers %d, intermediate_size %d, max_position_embeddings %d) "
                         "exceed the %zu GiB limit",
                         n, c->vocab_size, c->hidden_size, c->num_hidden_layers,
                         c->intermediate_size, c->max_position_embeddings,
                         (size_t)(ATTN_MAX_BUFFER_BYTES >> 30));
    return ATTN_STATUS_OK;
}

size_t attn_bert_num_params(const attn_bert_config *c, bool with_pooler, bool with_mlm_head) {
    if (!c || attn_bert_config_check(c)) return 0;
    return (size_t)count_params(c, with_pooler, with_mlm_head);
}

/* ---- JSON -------------------------------------------------------------------------------- */

enum { F_INT, F_FLOAT, F_BOOL, F_ACT, F_PAD };
typedef config_field field;

#define FLD(n, t) CONFIG_FIELD(attn_bert_config, n, t)
static const field FIELDS[] = {
    FLD(vocab_size, F_INT),
    FLD(hidden_size, F_INT),
    FLD(num_hidden_layers, F_INT),
    FLD(num_attention_heads, F_INT),
    FLD(intermediate_size, F_INT),
    FLD(hidden_act, F_ACT),
    FLD(hidden_dropout_prob, F_FLOAT),
    FLD(attention_probs_dropout_prob, F_FLOAT),
    FLD(max_position_embeddings, F_INT),
    FLD(type_vocab_size, F_INT),
    FLD(initializer_range, F_FLOAT),
    FLD(layer_norm_eps, F_FLOAT),
    FLD(pad_token_id, F_PAD),
    FLD(tie_word_embeddings, F_BOOL),
};
#define NFIELDS (sizeof FIELDS / sizeof FIELDS[0])

/* Flags of PretrainedConfig / BertConfig that would change the computation if set: refused when
 * true (a decoder / cross-attention BERT is another model). */
static const char *const UNSUPPORTED_TRUE[] = {"is_decoder", "add_cross_attention",
                                               "is_encoder_decoder"};

static attn_status parse_field(const char *path, const field *f, json_t *v, attn_bert_config *c) {
    char *dst = (char *)c + f->off;
    switch (f->type) {
    case F_INT:
    case F_PAD: {
        if (f->type == F_PAD && json_is_null(v)) {
            *(int *)dst = -1;
            return ATTN_STATUS_OK;
        }
        return config_read_int(path, f->name, v, CONFIG_INT_SIZE, (int *)dst);
    }
    case F_FLOAT: return config_read_float(path, f->name, v, false, (float *)dst);
    case F_BOOL: return config_read_bool(path, f->name, v, (bool *)dst);
    case F_ACT: {
        const char *t;
        attn_status s = config_read_string(path, f->name, v, &t);
        if (s) return s;
        /* transformers' ACT2FN names (attn_act_parse); BERT's FFN uses the GELUs or ReLU. */
        attn_act a = ATTN_ACT_NONE;
        s = attn_act_parse(t, "bert", &a);
        attn_clear_error();
        if (s || (a != ATTN_ACT_GELU_ERF && a != ATTN_ACT_GELU_TANH && a != ATTN_ACT_RELU))
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: hidden_act \"%.40s\" is not supported (gelu, gelu_python, "
                             "gelu_new, gelu_pytorch_tanh, gelu_fast, gelu_accurate or relu)",
                             path, t);
        c->hidden_act = a;
        return ATTN_STATUS_OK;
    }
    }
    return ATTN_STATUS_OK;
}

attn_status attn_bert_config_load(const char *path, attn_bert_config *out) {
    if (!path || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert: NULL argument");
    json_t *root;
    attn_status s = config_json_load(path, JSON_REJECT_DUPLICATES, &root);
    if (s) return s;
    attn_bert_config c = attn_bert_default_config();
    json_t *mt = json_object_get(root, "model_type");
    if (mt && (!json_is_string(mt) || strcmp(json_string_value(mt), "bert") != 0)) {
        s = attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: model_type %s%.40s%s is not \"bert\"", path,
                      json_is_string(mt) ? "\"" : "",
                      json_is_string(mt) ? json_string_value(mt) : "(not a string)",
                      json_is_string(mt) ? "\"" : "");
        goto done;
    }
    json_t *pe = json_object_get(root, "position_embedding_type");
    if (pe && !json_is_null(pe) &&
        (!json_is_string(pe) || strcmp(json_string_value(pe), "absolute") != 0)) {
        s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                      "%s: position_embedding_type %s%.40s%s is not supported (only "
                      "\"absolute\")",
                      path, json_is_string(pe) ? "\"" : "",
                      json_is_string(pe) ? json_string_value(pe) : "(not a string)",
                      json_is_string(pe) ? "\"" : "");
        goto done;
    }
    for (size_t i = 0; i < sizeof UNSUPPORTED_TRUE / sizeof UNSUPPORTED_TRUE[0]; i++) {
        json_t *v = json_object_get(root, UNSUPPORTED_TRUE[i]);
        if (v && json_is_true(v)) {
            s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                          "%s: \"%s\": true is not supported (encoder-only BERT)", path,
                          UNSUPPORTED_TRUE[i]);
            goto done;
        }
    }
    for (size_t i = 0; i < NFIELDS; i++) {
        json_t *v = json_object_get(root, FIELDS[i].name);
        if (!v) continue;
        s = parse_field(path, &FIELDS[i], v, &c);
        if (s) goto done;
    }
    s = attn_bert_config_check(&c);
    if (s) {
        s = config_prefix_error(s, path);
        goto done;
    }
    *out = c;
done:
    json_decref(root);
    return s;
}

attn_status attn_bert_config_save(const char *path, const attn_bert_config *c,
                                  const char *architecture) {
    if (!path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert: NULL path");
    attn_status s = attn_bert_config_check(c);
    if (s) return s;
    json_t *o = json_object();
    if (!o) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert: out of memory");
    if (architecture) {
        json_t *a = json_array();
        json_array_append_new(a, json_string(architecture));
        json_object_set_new(o, "architectures", a);
    }
    json_object_set_new(o, "model_type", json_string("bert"));
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *src = (const char *)c + FIELDS[i].off;
        json_t *v = NULL;
        switch (FIELDS[i].type) {
        case F_INT: v = json_integer(*(const int *)src); break;
        case F_PAD: v = c->pad_token_id < 0 ? json_null() : json_integer(c->pad_token_id); break;
        case F_FLOAT: v = config_json_float(*(const float *)src); break;
        case F_BOOL: v = json_boolean(*(const bool *)src); break;
        case F_ACT:
            v = json_string(attn_act_name(c->hidden_act));
            break;
        }
        json_object_set_new(o, FIELDS[i].name, v);
    }
    json_object_set_new(o, "position_embedding_type", json_string("absolute"));
    return config_json_save(o, path);
}

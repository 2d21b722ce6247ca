/* gpt_config.c — GPT-2 configuration (attn_gpt.h): GPT2Config's defaults, validation with the
 * sizes checked before anything is allocated, and Hugging Face config.json load/save (jansson). */
#include "attn_gpt.h"
#include "attn_nn.h"

#include "../core/core-impl.h"
#include "config-impl.h"
#include "gpt-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

attn_gpt_config attn_gpt_default_config(void) {
    attn_gpt_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = 50257;
    c.n_positions = 1024;
    c.n_embd = 768;
    c.n_layer = 12;
    c.n_head = 12;
    c.n_inner = 0;
    c.activation = ATTN_ACT_GELU_TANH;
    c.resid_pdrop = 0.1f;
    c.embd_pdrop = 0.1f;
    c.attn_pdrop = 0.1f;
    c.layer_norm_epsilon = 1e-5f;
    c.initializer_range = 0.02f;
    c.tie_word_embeddings = true;
    c.bos_token_id = 50256;
    c.eos_token_id = 50256;
    c.scale_attn_weights = true;
    c.scale_attn_by_inverse_layer_idx = false;
    c.reorder_and_upcast_attn = false;
    return c;
}

attn_gpt_config attn_gpt_arch_default_config(attn_gpt_arch arch) {
    if (arch == ATTN_GPT_ARCH_GPT2 || !attn_gpt_arch_name(arch)) return attn_gpt_default_config();
    return gpt_llama_defaults(arch);
}

int attn_gpt_inner(const attn_gpt_config *cfg) {
    if (!cfg) return 0;
    return cfg->n_inner > 0 ? cfg->n_inner : 4 * cfg->n_embd;
}

const char *attn_gpt_activation_name(attn_act act) {
    return act == ATTN_ACT_NONE ? "none" : attn_act_name(act);
}

/* Parameter count in double (exact below 2^53, no overflow), so the TOO_LARGE decision comes
 * before any size_t arithmetic. */
static double count_params(const attn_gpt_config *c) {
    double V = c->vocab_size, P = c->n_positions, C = c->n_embd, L = c->n_layer;
    double F = c->n_inner > 0 ? c->n_inner : 4.0 * C;
    double block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (C * F + F) + (F * C + C);
    double n = V * C + P * C + L * block + 2 * C;
    if (!c->tie_word_embeddings) n += V * C;
    return n;
}

/* Per-field limits: far beyond any real model, low enough that no product of two of them
 * overflows the kernels' int sizes by surprise (rows · cols stays below 2^53 in double). */
#define LIM_VOCAB (1 << 24)
#define LIM_POS (1 << 20)
#define LIM_EMBD (1 << 16)
#define LIM_INNER (1 << 20)
#define LIM_LAYER 1024

attn_status attn_gpt_config_check(const attn_gpt_config *c) {
    if (!c) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt config: NULL config");
    if (!attn_gpt_arch_name(c->arch))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt config: unknown architecture %d",
                         (int)c->arch);
    if (c->n_more_eos < 0 || c->n_more_eos > ATTN_GPT_MAX_EOS - 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: n_more_eos = %d outside [0, %d]", c->n_more_eos,
                         ATTN_GPT_MAX_EOS - 1);
    if (c->arch != ATTN_GPT_ARCH_GPT2) return gpt_llama_config_check(c);
    const config_size pos[] = {{"vocab_size", c->vocab_size, LIM_VOCAB},
               {"n_positions", c->n_positions, LIM_POS},
               {"n_embd", c->n_embd, LIM_EMBD},
               {"n_layer", c->n_layer, LIM_LAYER},
               {"n_head", c->n_head, LIM_EMBD}};
    attn_status s = config_check_sizes("gpt", pos, sizeof pos / sizeof pos[0], "too large");
    if (s) return s;
    if (c->n_inner < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: n_inner must be > 0, or 0/null for 4*n_embd (got %d)",
                         c->n_inner);
    if (c->n_inner > LIM_INNER)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "gpt config: n_inner = %d is too large (limit %d)",
                         c->n_inner, LIM_INNER);
    if (c->n_embd % c->n_head != 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: n_head (%d) must divide n_embd (%d)", c->n_head, c->n_embd);
    const struct {
        const char *name;
        float v;
    } drops[] = {{"resid_pdrop", c->resid_pdrop},
                 {"embd_pdrop", c->embd_pdrop},
                 {"attn_pdrop", c->attn_pdrop}};
    for (size_t i = 0; i < 3; i++)
        if ((s = config_check_prob("gpt", drops[i].name, drops[i].v))) return s;
    if ((s = config_check_positive("gpt", "layer_norm_epsilon", c->layer_norm_epsilon, false)) ||
        (s = config_check_positive("gpt", "initializer_range", c->initializer_range, true)))
        return s;
    if (c->activation != ATTN_ACT_GELU_TANH && c->activation != ATTN_ACT_GELU_ERF &&
        c->activation != ATTN_ACT_RELU)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: activation_function must be gelu_new, gelu or relu");
    /* bos/eos ids are not range-checked: GPT2Config's defaults (50256) are commonly kept for
     * small vocabularies, as transformers allows; an id outside [0, V) simply never occurs. */
    const double lim = (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float));
    double n = count_params(c);
    if (n > lim)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "gpt config: %.3g parameters (vocab_size %d, n_positions %d, n_embd %d, "
                         "n_layer %d, n_inner %d) exceed the %zu GiB limit",
                         n, c->vocab_size, c->n_positions, c->n_embd, c->n_layer, attn_gpt_inner(c),
                         (size_t)(ATTN_MAX_BUFFER_BYTES >> 30));
    return ATTN_STATUS_OK;
}

size_t attn_gpt_num_params(const attn_gpt_config *c) {
    if (!c || attn_gpt_config_check(c)) return 0;
    return (size_t)(c->arch == ATTN_GPT_ARCH_GPT2 ? count_params(c) : gpt_llama_count_params(c));
}

/* ---- JSON -------------------------------------------------------------------------------- */

enum { F_INT = CONFIG_T_INT, F_INT_OR_NULL = CONFIG_T_INT_OR_NULL, F_PROB = CONFIG_T_FLOAT,
       F_FLOAT = CONFIG_T_FLOAT, F_BOOL = CONFIG_T_BOOL };
typedef config_field field;

#define FLD(n, t) CONFIG_FIELD(attn_gpt_config, n, t)
static const field FIELDS[] = {
    FLD(vocab_size, F_INT),
    FLD(n_positions, F_INT),
    FLD(n_embd, F_INT),
    FLD(n_layer, F_INT),
    FLD(n_head, F_INT),
    FLD(n_inner, F_INT_OR_NULL),
    FLD(resid_pdrop, F_PROB),
    FLD(embd_pdrop, F_PROB),
    FLD(attn_pdrop, F_PROB),
    FLD(layer_norm_epsilon, F_FLOAT),
    FLD(initializer_range, F_FLOAT),
    FLD(tie_word_embeddings, F_BOOL),
    FLD(bos_token_id, F_INT_OR_NULL),
    FLD(eos_token_id, F_INT_OR_NULL),
    FLD(scale_attn_weights, F_BOOL),
    FLD(scale_attn_by_inverse_layer_idx, F_BOOL),
    FLD(reorder_and_upcast_attn, F_BOOL),
};
#define NFIELDS (sizeof FIELDS / sizeof FIELDS[0])

/* root: a JSON object (config_json_load / config_json_loads checked it). */
static attn_status parse_object(json_t *root, const char *name, attn_gpt_config *out) {
    attn_gpt_config c = attn_gpt_default_config();
    attn_status s;
    json_t *mt = json_object_get(root, "model_type");
    if (mt) {
        const char *t;
        if ((s = config_read_string(name, "model_type", mt, &t))) return s;
        attn_gpt_arch arch;
        if (!gpt_arch_parse(t, &arch))
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: model_type \"%s\" is not a decoder attn runs (expected gpt2, "
                             "llama, mistral, qwen2 or qwen3)",
                             name, t);
        if (arch != ATTN_GPT_ARCH_GPT2) return gpt_llama_config_parse(root, name, arch, out);
    }
    json_t *xa = json_object_get(root, "add_cross_attention");
    if (xa && !json_is_false(xa) && !json_is_null(xa))
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: add_cross_attention (GPT-2 with cross-attention layers) is not "
                         "supported",
                         name);
    for (size_t i = 0; i < NFIELDS; i++) {
        const field *f = &FIELDS[i];
        json_t *v = json_object_get(root, f->name);
        if (!v) continue;
        char *dst = (char *)&c + f->off;
        /* n_inner: null means 4·n_embd (stored as 0); token ids: null means none (-1). A list of
         * end-of-text ids (some configs): the first one is the one we stop on. */
        const bool n_inner = strcmp(f->name, "n_inner") == 0;
        if (f->type == F_INT_OR_NULL && !n_inner && json_is_array(v) && json_array_size(v) > 0)
            v = json_array_get(v, 0);
        s = config_read_typed(name, f->name, v, f->type, dst, n_inner ? 0 : -1);
        if (s) return s;
    }
    json_t *act = json_object_get(root, "activation_function");
    if (act) {
        const char *a;
        if ((s = config_read_string(name, "activation_function", act, &a))) return s;
        /* transformers' ACT2FN names (attn_act_parse); GPT-2's MLP uses the GELUs or ReLU. */
        attn_act pa = ATTN_ACT_NONE;
        attn_status ps = attn_act_parse(a, "gpt", &pa);
        attn_clear_error();
        if (!ps && (pa == ATTN_ACT_GELU_TANH || pa == ATTN_ACT_GELU_ERF || pa == ATTN_ACT_RELU))
            c.activation = pa;
        else
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: activation_function \"%s\" is not supported (expected gelu_new, "
                             "gelu_pytorch_tanh, gelu_fast, gelu or relu)",
                             name, a);
    }
    /* a negative token id means none (saved as null) */
    if (c.bos_token_id < 0) c.bos_token_id = -1;
    if (c.eos_token_id < 0) c.eos_token_id = -1;
    s = attn_gpt_config_check(&c);
    /* Prefix the source's name to the check's message, which names the field. */
    if (s) return config_prefix_error(s, name);
    *out = c;
    return ATTN_STATUS_OK;
}

attn_status attn_gpt_config_parse(const char *text, const char *name, attn_gpt_config *out) {
    if (!text || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt config: NULL argument");
    if (!name) name = "<config>";
    json_t *root;
    attn_status s = config_json_loads(text, name, &root);
    if (s) return s;
    s = parse_object(root, name, out);
    json_decref(root);
    return s;
}

attn_status attn_gpt_config_load(const char *path, attn_gpt_config *out) {
    if (!path || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt config: NULL argument");
    json_t *root;
    attn_status s = config_json_load(path, 0, &root);
    if (s) return s;
    s = parse_object(root, path, out);
    json_decref(root);
    return s;
}

static json_t *json_id(int id) { return id < 0 ? json_null() : json_integer(id); }

attn_status attn_gpt_config_save(const char *path, const attn_gpt_config *c) {
    if (!path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt config: NULL path");
    attn_status s = attn_gpt_config_check(c);
    if (s) return s;
    if (c->arch != ATTN_GPT_ARCH_GPT2) {
        json_t *lo = gpt_llama_config_json(c);
        if (!lo) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt config: out of memory");
        return config_json_save(lo, path);
    }
    json_t *o = json_object();
    json_t *arch = json_array();
    if (!o || !arch) {
        json_decref(o);
        json_decref(arch);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt config: out of memory");
    }
    json_array_append_new(arch, json_string("GPT2LMHeadModel"));
    json_object_set_new(o, "activation_function",
                        json_string(attn_gpt_activation_name(c->activation)));
    json_object_set_new(o, "architectures", arch);
    json_object_set_new(o, "attn_pdrop", config_json_float(c->attn_pdrop));
    json_object_set_new(o, "bos_token_id", json_id(c->bos_token_id));
    json_object_set_new(o, "embd_pdrop", config_json_float(c->embd_pdrop));
    json_object_set_new(o, "eos_token_id", json_id(c->eos_token_id));
    json_object_set_new(o, "initializer_range", config_json_float(c->initializer_range));
    json_object_set_new(o, "layer_norm_epsilon", config_json_float(c->layer_norm_epsilon));
    json_object_set_new(o, "model_type", json_string("gpt2"));
    json_object_set_new(o, "n_embd", json_integer(c->n_embd));
    json_object_set_new(o, "n_head", json_integer(c->n_head));
    json_object_set_new(o, "n_inner", c->n_inner > 0 ? json_integer(c->n_inner) : json_null());
    json_object_set_new(o, "n_layer", json_integer(c->n_layer));
    json_object_set_new(o, "n_positions", json_integer(c->n_positions));
    json_object_set_new(o, "reorder_and_upcast_attn", json_boolean(c->reorder_and_upcast_attn));
    json_object_set_new(o, "resid_pdrop", config_json_float(c->resid_pdrop));
    json_object_set_new(o, "scale_attn_by_inverse_layer_idx",
                        json_boolean(c->scale_attn_by_inverse_layer_idx));
    json_object_set_new(o, "scale_attn_weights", json_boolean(c->scale_attn_weights));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tie_word_embeddings));
    json_object_set_new(o, "torch_dtype", json_string("float32"));
    json_object_set_new(o, "use_cache", json_true());
    json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
    return config_json_save(o, path);
}

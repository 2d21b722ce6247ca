/* llama_config.c — the Llama family's configurations (attn_gpt.h: model_type "llama", "mistral",
 * "qwen2", "qwen3"): each transformers config class's defaults, validation with every size checked
 * before anything is allocated, config.json in each class's field names (transformers 4.x's
 * rope_theta + rope_scaling and 5.x's rope_parameters), and the rotary inverse frequencies with
 * their scaling, computed in float32 as transformers computes them. */
#include "attn_gpt.h"
#include "attn_nn.h"

#include "../core/core-impl.h"
#include "config-impl.h"
#include "gpt-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const ARCH_NAMES[] = {"gpt2", "llama", "mistral", "qwen2", "qwen3"};
static const char *const ARCH_CLASSES[] = {"GPT2LMHeadModel", "LlamaForCausalLM",
                                           "MistralForCausalLM", "Qwen2ForCausalLM",
                                           "Qwen3ForCausalLM"};

const char *attn_gpt_arch_name(attn_gpt_arch arch) {
    return (unsigned)arch < sizeof ARCH_NAMES / sizeof ARCH_NAMES[0] ? ARCH_NAMES[arch] : NULL;
}

bool gpt_arch_parse(const char *name, attn_gpt_arch *out) {
    for (size_t i = 0; i < sizeof ARCH_NAMES / sizeof ARCH_NAMES[0]; i++)
        if (strcmp(name, ARCH_NAMES[i]) == 0) {
            *out = (attn_gpt_arch)i;
            return true;
        }
    return false;
}

bool attn_gpt_is_llama(const attn_gpt_config *c) { return c && c->arch != ATTN_GPT_ARCH_GPT2; }

int attn_gpt_kv_heads(const attn_gpt_config *c) {
    if (!c) return 0;
    return c->arch != ATTN_GPT_ARCH_GPT2 && c->n_kv_head > 0 ? c->n_kv_head : c->n_head;
}

int attn_gpt_head_dim(const attn_gpt_config *c) {
    if (!c || c->n_head <= 0) return 0;
    return c->arch != ATTN_GPT_ARCH_GPT2 && c->head_dim > 0 ? c->head_dim : c->n_embd / c->n_head;
}

int attn_gpt_layer_window(const attn_gpt_config *c, int layer) {
    if (!c || c->sliding_window <= 0) return 0;
    switch (c->arch) {
    case ATTN_GPT_ARCH_MISTRAL: return c->sliding_window;
    case ATTN_GPT_ARCH_QWEN2:
    case ATTN_GPT_ARCH_QWEN3:
        return c->use_sliding_window && layer >= c->max_window_layers ? c->sliding_window : 0;
    default: return 0;
    }
}

attn_gpt_config gpt_llama_defaults(attn_gpt_arch arch) {
    attn_gpt_config c = attn_gpt_default_config();
    c.arch = arch;
    c.n_embd = 4096, c.n_layer = 32, c.n_head = 32;
    c.activation = ATTN_ACT_SILU;
    c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = 0.0f;
    c.layer_norm_epsilon = 1e-6f;
    c.initializer_range = 0.02f;
    c.tie_word_embeddings = false;
    c.scale_attn_weights = true;
    c.rope_theta = 10000.0f;
    c.rope_scaling.type = ATTN_GPT_ROPE_DEFAULT;
    c.rope_scaling.factor = 1.0f;
    c.bos_token_id = 1, c.eos_token_id = 2;
    switch (arch) {
    case ATTN_GPT_ARCH_MISTRAL:
        c.vocab_size = 32000, c.n_inner = 14336, c.n_kv_head = 8, c.n_positions = 4096 * 32;
        c.sliding_window = 4096;
        break;
    case ATTN_GPT_ARCH_QWEN2:
    case ATTN_GPT_ARCH_QWEN3:
        c.vocab_size = 151936, c.n_inner = 22016, c.n_kv_head = 32, c.n_positions = 32768;
        c.bos_token_id = c.eos_token_id = -1;
        c.sliding_window = 4096, c.max_window_layers = 28;
        if (arch == ATTN_GPT_ARCH_QWEN3) c.head_dim = 128;
        break;
    default: /* llama */
        c.vocab_size = 32000, c.n_inner = 11008, c.n_positions = 2048;
        break;
    }
    return c;
}

/* ---- checks ---------------------------------------------------------------------------------- */

double gpt_llama_count_params(const attn_gpt_config *c) {
    const double V = c->vocab_size, C = c->n_embd, L = c->n_layer, F = c->n_inner;
    const double H = c->n_head, Hkv = attn_gpt_kv_heads(c), D = attn_gpt_head_dim(c);
    const bool qkv_bias = c->arch == ATTN_GPT_ARCH_QWEN2 ||
                          (c->attention_bias && c->arch != ATTN_GPT_ARCH_MISTRAL);
    const bool o_bias = c->attention_bias && (c->arch == ATTN_GPT_ARCH_LLAMA ||
                                              c->arch == ATTN_GPT_ARCH_QWEN3);
    const bool mlp_bias = c->mlp_bias && c->arch == ATTN_GPT_ARCH_LLAMA;
    double block = 2 * C + (H + 2 * Hkv) * D * C + H * D * C + 3 * C * F;
    if (qkv_bias) block += (H + 2 * Hkv) * D;
    if (o_bias) block += C;
    if (mlp_bias) block += 2 * F + C;
    if (c->arch == ATTN_GPT_ARCH_QWEN3) block += 2 * D;
    double n = V * C + L * block + C;
    if (!c->tie_word_embeddings) n += V * C;
    return n;
}

#define LIM_VOCAB (1 << 24)
#define LIM_POS (1 << 20)
#define LIM_EMBD (1 << 16)
#define LIM_INNER (1 << 20)
#define LIM_LAYER 1024

/* Field names in messages: config.json's. */
attn_status gpt_llama_config_check(const attn_gpt_config *c) {
    const config_size pos[] = {{"vocab_size", c->vocab_size, LIM_VOCAB},
                               {"max_position_embeddings", c->n_positions, LIM_POS},
                               {"hidden_size", c->n_embd, LIM_EMBD},
                               {"num_hidden_layers", c->n_layer, LIM_LAYER},
                               {"num_attention_heads", c->n_head, LIM_EMBD},
                               {"intermediate_size", c->n_inner, LIM_INNER}};
    attn_status s = config_check_sizes("gpt", pos, sizeof pos / sizeof pos[0], "too large");
    if (s) return s;
    if (c->n_kv_head < 0 || c->n_kv_head > c->n_head || (c->n_kv_head > 0 && c->n_head % c->n_kv_head))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: num_key_value_heads (%d) must divide num_attention_heads (%d)",
                         c->n_kv_head, c->n_head);
    if (c->head_dim < 0 || c->head_dim > LIM_EMBD)
        return attn_fail(c->head_dim < 0 ? ATTN_STATUS_INVALID_ARGUMENT : ATTN_STATUS_TOO_LARGE,
                         "gpt config: head_dim = %d is out of range (0/null for "
                         "hidden_size / num_attention_heads, else 2..%d)",
                         c->head_dim, LIM_EMBD);
    const int D = attn_gpt_head_dim(c);
    if (D < 2 || D % 2)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: the head size (head_dim, or hidden_size / "
                         "num_attention_heads = %d / %d) must be even and >= 2 for rotary "
                         "embeddings (got %d)",
                         c->n_embd, c->n_head, D);
    if ((double)c->n_head * D > LIM_INNER)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "gpt config: num_attention_heads x head_dim = %d x %d is too large",
                         c->n_head, D);
    if ((s = config_check_prob("gpt", "attention_dropout", c->attn_pdrop))) return s;
    if (c->resid_pdrop != 0.0f || c->embd_pdrop != 0.0f)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: the %s architecture has no residual or embedding dropout",
                         attn_gpt_arch_name(c->arch));
    if ((s = config_check_positive("gpt", "rms_norm_eps", c->layer_norm_epsilon, false)) ||
        (s = config_check_positive("gpt", "initializer_range", c->initializer_range, true)) ||
        (s = config_check_positive("gpt", "rope_theta", c->rope_theta, false)))
        return s;
    if (c->activation == ATTN_ACT_NONE || (unsigned)c->activation > ATTN_ACT_SILU)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: hidden_act must be silu, gelu, gelu_pytorch_tanh or relu");
    const attn_gpt_rope_scaling *r = &c->rope_scaling;
    if (r->type != ATTN_GPT_ROPE_DEFAULT && r->type != ATTN_GPT_ROPE_LINEAR &&
        r->type != ATTN_GPT_ROPE_LLAMA3)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt config: unknown rope_scaling type %d",
                         (int)r->type);
    if (r->type != ATTN_GPT_ROPE_DEFAULT && (!(r->factor > 0.0f) || !isfinite(r->factor)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: rope_scaling factor must be > 0 (got %g)", (double)r->factor);
    if (r->type == ATTN_GPT_ROPE_LLAMA3) {
        if (!(r->low_freq_factor > 0.0f) || !(r->high_freq_factor > r->low_freq_factor) ||
            !isfinite(r->high_freq_factor))
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "gpt config: rope_scaling (llama3) needs 0 < low_freq_factor < "
                             "high_freq_factor (got %g, %g)",
                             (double)r->low_freq_factor, (double)r->high_freq_factor);
        if (r->original_max_position_embeddings < 1 ||
            r->original_max_position_embeddings > LIM_POS)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "gpt config: rope_scaling (llama3) original_max_position_embeddings "
                             "must be in [1, %d] (got %d)",
                             LIM_POS, r->original_max_position_embeddings);
    }
    if (c->sliding_window < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: sliding_window must be > 0, or null for none (got %d)",
                         c->sliding_window);
    if (c->max_window_layers < 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt config: max_window_layers must be >= 0 (got %d)",
                         c->max_window_layers);
    const double lim = (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float));
    const double n = gpt_llama_count_params(c);
    const double tables = (double)c->n_positions * D; /* cos and sin, (P, D/2) each */
    if (n > lim || tables > lim)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "gpt config: %.3g parameters (vocab_size %d, hidden_size %d, "
                         "num_hidden_layers %d, intermediate_size %d) exceed the %zu GiB limit",
                         n, c->vocab_size, c->n_embd, c->n_layer, c->n_inner,
                         (size_t)(ATTN_MAX_BUFFER_BYTES >> 30));
    return ATTN_STATUS_OK;
}

/* ---- rotary frequencies ---------------------------------------------------------------------- */

attn_status attn_gpt_rope_inv_freq(const attn_gpt_config *c, float *inv) {
    if (!c || !inv) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt rope: NULL argument");
    if (!attn_gpt_is_llama(c))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt rope: GPT-2 has no rotary embeddings");
    const int D = attn_gpt_head_dim(c), half = D / 2;
    const attn_gpt_rope_scaling *r = &c->rope_scaling;
    /* transformers: 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), all in float32. */
    for (int i = 0; i < half; i++) {
        const float e = (float)(2 * i) / (float)D;
        inv[i] = 1.0f / powf(c->rope_theta, e);
    }
    if (r->type == ATTN_GPT_ROPE_LINEAR) {
        for (int i = 0; i < half; i++) inv[i] = inv[i] / r->factor;
    } else if (r->type == ATTN_GPT_ROPE_LLAMA3) {
        /* _compute_llama3_parameters, step by step in float32. */
        const float old = (float)r->original_max_position_embeddings;
        const float lo_wl = old / r->low_freq_factor, hi_wl = old / r->high_freq_factor;
        const float two_pi = (float)(2.0 * 3.14159265358979323846);
        for (int i = 0; i < half; i++) {
            const float wl = two_pi / inv[i];
            float f = wl > lo_wl ? inv[i] / r->factor : inv[i];
            if (!(wl < hi_wl) && !(wl > lo_wl)) {
                const float smooth = (old / wl - r->low_freq_factor) /
                                     (r->high_freq_factor - r->low_freq_factor);
                f = (1.0f - smooth) * f / r->factor + smooth * f;
            }
            inv[i] = f;
        }
    }
    return ATTN_STATUS_OK;
}

/* ---- config.json ----------------------------------------------------------------------------- */

enum { F_INT = CONFIG_T_INT, F_INT_OR_NULL = CONFIG_T_INT_OR_NULL, F_PROB = CONFIG_T_FLOAT,
       F_FLOAT = CONFIG_T_FLOAT, F_BOOL = CONFIG_T_BOOL };

typedef struct {
    const char *key;
    int type;
    size_t off;
    unsigned archs; /* bit per attn_gpt_arch: the classes that have the field */
} llama_field;

#define A_LLAMA (1u << ATTN_GPT_ARCH_LLAMA)
#define A_MISTRAL (1u << ATTN_GPT_ARCH_MISTRAL)
#define A_QWEN2 (1u << ATTN_GPT_ARCH_QWEN2)
#define A_QWEN3 (1u << ATTN_GPT_ARCH_QWEN3)
#define A_ALL (A_LLAMA | A_MISTRAL | A_QWEN2 | A_QWEN3)
#define LF(key, member, type, archs) {key, type, offsetof(attn_gpt_config, member), archs}

static const llama_field FIELDS[] = {
    LF("vocab_size", vocab_size, F_INT, A_ALL),
    LF("hidden_size", n_embd, F_INT, A_ALL),
    LF("intermediate_size", n_inner, F_INT, A_ALL),
    LF("num_hidden_layers", n_layer, F_INT, A_ALL),
    LF("num_attention_heads", n_head, F_INT, A_ALL),
    LF("num_key_value_heads", n_kv_head, F_INT_OR_NULL, A_ALL),
    LF("head_dim", head_dim, F_INT_OR_NULL, A_ALL),
    LF("max_position_embeddings", n_positions, F_INT, A_ALL),
    LF("rms_norm_eps", layer_norm_epsilon, F_FLOAT, A_ALL),
    LF("initializer_range", initializer_range, F_FLOAT, A_ALL),
    LF("tie_word_embeddings", tie_word_embeddings, F_BOOL, A_ALL),
    LF("attention_dropout", attn_pdrop, F_PROB, A_ALL),
    LF("attention_bias", attention_bias, F_BOOL, A_LLAMA | A_QWEN3),
    LF("mlp_bias", mlp_bias, F_BOOL, A_LLAMA),
    LF("sliding_window", sliding_window, F_INT_OR_NULL, A_MISTRAL | A_QWEN2 | A_QWEN3),
    LF("use_sliding_window", use_sliding_window, F_BOOL, A_QWEN2 | A_QWEN3),
    LF("max_window_layers", max_window_layers, F_INT, A_QWEN2 | A_QWEN3),
    LF("bos_token_id", bos_token_id, F_INT_OR_NULL, A_ALL),
};
#define NFIELDS (sizeof FIELDS / sizeof FIELDS[0])

/* eos_token_id: an id, null, or a list of ids (every one ends generation). */
static attn_status read_eos(const char *name, json_t *v, attn_gpt_config *c) {
    c->n_more_eos = 0;
    c->eos_token_id = -1;
    if (json_is_null(v)) return ATTN_STATUS_OK;
    if (!json_is_array(v))
        return config_read_int(name, "eos_token_id", v, CONFIG_INT_INTEGRAL_OR_NULL,
                               &c->eos_token_id);
    if (json_array_size(v) > ATTN_GPT_MAX_EOS)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: eos_token_id lists %zu ids (attn keeps at most %d)", name,
                         json_array_size(v), ATTN_GPT_MAX_EOS);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        int *dst = i ? &c->more_eos_token_ids[i - 1] : &c->eos_token_id;
        ATTN_TRY(config_read_int(name, "eos_token_id", e, CONFIG_INT_INTEGRAL, dst));
    }
    c->n_more_eos = json_array_size(v) > 1 ? (int)json_array_size(v) - 1 : 0;
    return ATTN_STATUS_OK;
}

bool attn_gpt_is_eos(const attn_gpt_config *c, int32_t id) {
    if (!c || id < 0) return false;
    if (id == c->eos_token_id) return true;
    for (int i = 0; i < c->n_more_eos; i++)
        if (id == c->more_eos_token_ids[i]) return true;
    return false;
}

static attn_status read_num(const char *name, const char *key, json_t *obj, bool required,
                            float *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return attn_fail(ATTN_STATUS_FORMAT, "%s: rope_scaling needs \"%s\"", name, key);
        return ATTN_STATUS_OK;
    }
    return config_read_float(name, key, v, true, out);
}

/* rope_scaling (4.x) or rope_parameters (5.x): {"rope_type" | "type": T, "factor", ...}; 5.x
 * also carries "rope_theta" inside. */
static attn_status read_rope(const char *name, const char *key, json_t *v, attn_gpt_config *c) {
    attn_gpt_rope_scaling *r = &c->rope_scaling;
    memset(r, 0, sizeof *r); /* the last of rope_scaling / rope_parameters decides, whole */
    r->type = ATTN_GPT_ROPE_DEFAULT;
    r->factor = 1.0f;
    if (json_is_null(v)) return ATTN_STATUS_OK;
    if (!json_is_object(v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s must be an object or null", name, key);
    json_t *t = json_object_get(v, "rope_type");
    if (!t) t = json_object_get(v, "type");
    const char *type = "default";
    if (t) ATTN_TRY(config_read_string(name, "rope_scaling type", t, &type));
    json_t *theta = json_object_get(v, "rope_theta");
    if (theta) ATTN_TRY(config_read_float(name, "rope_theta", theta, true, &c->rope_theta));
    if (strcmp(type, "default") == 0) return ATTN_STATUS_OK;
    if (strcmp(type, "linear") == 0) {
        r->type = ATTN_GPT_ROPE_LINEAR;
        return read_num(name, "factor", v, true, &r->factor);
    }
    if (strcmp(type, "llama3") == 0) {
        r->type = ATTN_GPT_ROPE_LLAMA3;
        ATTN_TRY(read_num(name, "factor", v, true, &r->factor));
        ATTN_TRY(read_num(name, "low_freq_factor", v, true, &r->low_freq_factor));
        ATTN_TRY(read_num(name, "high_freq_factor", v, true, &r->high_freq_factor));
        json_t *o = json_object_get(v, "original_max_position_embeddings");
        if (!o)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: rope_scaling needs \"original_max_position_embeddings\"", name);
        return config_read_int(name, "original_max_position_embeddings", o, CONFIG_INT_INTEGRAL,
                               &r->original_max_position_embeddings);
    }
    return attn_fail(ATTN_STATUS_UNSUPPORTED,
                     "%s: %s type \"%s\" is not supported (expected default, linear or llama3)",
                     name, key, type);
}

attn_status gpt_llama_config_parse(json_t *root, const char *name, attn_gpt_arch arch,
                                   attn_gpt_config *out) {
    attn_gpt_config c = gpt_llama_defaults(arch);
    attn_status s;
    const unsigned bit = 1u << arch;
    for (size_t i = 0; i < NFIELDS; i++) {
        const llama_field *f = &FIELDS[i];
        if (!(f->archs & bit)) continue;
        json_t *v = json_object_get(root, f->key);
        if (!v) continue;
        char *dst = (char *)&c + f->off;
        /* null: sizes the default (0), token ids none (-1) */
        s = config_read_typed(name, f->key, v, f->type, dst,
                              strcmp(f->key, "bos_token_id") == 0 ? -1 : 0);
        if (s) return s;
    }
    json_t *v;
    if ((v = json_object_get(root, "eos_token_id")) && (s = read_eos(name, v, &c))) return s;
    if ((v = json_object_get(root, "rope_theta")) &&
        (s = config_read_float(name, "rope_theta", v, true, &c.rope_theta)))
        return s;
    if ((v = json_object_get(root, "rope_scaling")) && (s = read_rope(name, "rope_scaling", v, &c)))
        return s;
    if ((v = json_object_get(root, "rope_parameters")) &&
        (s = read_rope(name, "rope_parameters", v, &c)))
        return s;
    if ((v = json_object_get(root, "hidden_act"))) {
        const char *a;
        if ((s = config_read_string(name, "hidden_act", v, &a))) return s;
        char what[512];
        snprintf(what, sizeof what, "%s: hidden_act", name);
        if ((s = attn_act_parse(a, what, &c.activation))) return s;
        if (c.activation == ATTN_ACT_NONE)
            return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: hidden_act \"%s\" is not supported",
                             name, a);
    }
    if ((v = json_object_get(root, "partial_rotary_factor")) && !json_is_null(v)) {
        float prf = 1.0f;
        if ((s = config_read_float(name, "partial_rotary_factor", v, true, &prf))) return s;
        if (prf != 1.0f)
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: partial_rotary_factor %g is not supported by the %s "
                             "architecture (expected 1)",
                             name, (double)prf, attn_gpt_arch_name(arch));
    }
    if ((s = gpt_llama_config_check(&c))) return config_prefix_error(s, name);
    /* defaults resolved, so that a configuration reads back as it was saved (a negative token id
     * is none: -1) */
    if (c.bos_token_id < 0) c.bos_token_id = -1;
    if (c.eos_token_id < 0 && c.n_more_eos == 0) c.eos_token_id = -1;
    c.n_kv_head = attn_gpt_kv_heads(&c);
    c.head_dim = attn_gpt_head_dim(&c);
    /* transformers 5 spells the window layers out: they must be the ones use_sliding_window and
     * max_window_layers give (the only arrangement those classes make). */
    if ((v = json_object_get(root, "layer_types")) && !json_is_null(v)) {
        if (!json_is_array(v) || json_array_size(v) != (size_t)c.n_layer)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: layer_types must be a list of num_hidden_layers (%d) strings", name,
                             c.n_layer);
        for (int l = 0; l < c.n_layer; l++) {
            const char *t = json_string_value(json_array_get(v, (size_t)l));
            const bool sliding = t && !strcmp(t, "sliding_attention");
            if (!t || (!sliding && strcmp(t, "full_attention")))
                return attn_fail(ATTN_STATUS_UNSUPPORTED,
                                 "%s: layer_types[%d] must be \"full_attention\" or "
                                 "\"sliding_attention\"",
                                 name, l);
            if (sliding != (attn_gpt_layer_window(&c, l) > 0))
                return attn_fail(ATTN_STATUS_UNSUPPORTED,
                                 "%s: layer_types[%d] is \"%s\", which use_sliding_window and "
                                 "max_window_layers do not give (attn reads only that arrangement)",
                                 name, l, t);
        }
    }
    *out = c;
    return ATTN_STATUS_OK;
}

static json_t *json_id(int id) { return id < 0 ? json_null() : json_integer(id); }

json_t *gpt_llama_config_json(const attn_gpt_config *c) {
    json_t *o = json_object(), *arch = json_array();
    if (!o || !arch) {
        json_decref(o);
        json_decref(arch);
        return NULL;
    }
    json_array_append_new(arch, json_string(ARCH_CLASSES[c->arch]));
    json_object_set_new(o, "architectures", arch);
    json_object_set_new(o, "model_type", json_string(attn_gpt_arch_name(c->arch)));
    const unsigned bit = 1u << c->arch;
    for (size_t i = 0; i < NFIELDS; i++) {
        const llama_field *f = &FIELDS[i];
        if (!(f->archs & bit)) continue;
        const char *src = (const char *)c + f->off;
        const bool id = strcmp(f->key, "bos_token_id") == 0;
        json_t *v = config_json_typed(f->type, src, id ? -1 : 0);
        if (f->type == F_INT_OR_NULL && (id ? *(const int *)src < 0 : *(const int *)src <= 0))
            v = (json_decref(v), json_null());
        json_object_set_new(o, f->key, v);
    }
    /* num_key_value_heads and head_dim resolved (transformers writes them so) */
    json_object_set_new(o, "num_key_value_heads", json_integer(attn_gpt_kv_heads(c)));
    json_object_set_new(o, "head_dim", json_integer(attn_gpt_head_dim(c)));
    if (c->n_more_eos > 0) {
        json_t *e = json_array();
        json_array_append_new(e, json_integer(c->eos_token_id));
        for (int i = 0; i < c->n_more_eos; i++)
            json_array_append_new(e, json_integer(c->more_eos_token_ids[i]));
        json_object_set_new(o, "eos_token_id", e);
    } else {
        json_object_set_new(o, "eos_token_id", json_id(c->eos_token_id));
    }
    json_object_set_new(o, "hidden_act", json_string(attn_act_name(c->activation)));
    json_object_set_new(o, "rope_theta", config_json_float(c->rope_theta));
    const attn_gpt_rope_scaling *r = &c->rope_scaling;
    if (r->type == ATTN_GPT_ROPE_DEFAULT) {
        json_object_set_new(o, "rope_scaling", json_null());
    } else {
        json_t *rs = json_object();
        json_object_set_new(rs, "rope_type",
                            json_string(r->type == ATTN_GPT_ROPE_LINEAR ? "linear" : "llama3"));
        json_object_set_new(rs, "factor", config_json_float(r->factor));
        if (r->type == ATTN_GPT_ROPE_LLAMA3) {
            json_object_set_new(rs, "low_freq_factor", config_json_float(r->low_freq_factor));
            json_object_set_new(rs, "high_freq_factor", config_json_float(r->high_freq_factor));
            json_object_set_new(rs, "original_max_position_embeddings",
                                json_integer(r->original_max_position_embeddings));
        }
        json_object_set_new(o, "rope_scaling", rs);
    }
    json_object_set_new(o, "torch_dtype", json_string("float32"));
    json_object_set_new(o, "use_cache", json_true());
    return o;
}

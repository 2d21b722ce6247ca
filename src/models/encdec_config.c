/* encdec_config.c — the encoder–decoder configuration: defaults, validation (with sizes checked
 * before anything is allocated) and JSON load/save with jansson. */
#include "attn_models.h"

#include "../core/core-impl.h"
#include "config-impl.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATTN_ENCDEC_MAX_LAYERS 4096

attn_encdec_config attn_encdec_default_config(void) {
    attn_encdec_config c;
    memset(&c, 0, sizeof c);
    c.src_vocab = 0;
    c.tgt_vocab = 0;
    c.d_model = 512;
    c.n_head = 8;
    c.d_ff = 2048;
    c.n_enc_layers = 6;
    c.n_dec_layers = 6;
    c.max_len = 256;
    c.dropout = 0.1f;
    c.share_embeddings = false;
    c.tie_output = false;
    c.pre_ln = false;
    c.activation = ATTN_ENCDEC_RELU;
    c.positions = ATTN_ENCDEC_SINUSOIDAL;
    c.pad_id = 0;
    c.layer_norm_eps = 1e-5f;
    c.scale_embedding = true;
    c.logits_bias = true;
    c.arch = ATTN_ENCDEC_ARCH_ATTN;
    return c;
}

/* Parameter count in double: exact for every size that passes the limits below (< 2^53), and it
 * cannot overflow, so the TOO_LARGE decision is made before any size_t arithmetic. */
static double count_params(const attn_encdec_config *c) {
    double C = c->d_model, F = c->d_ff, Vs = c->src_vocab, Vt = c->tgt_vocab;
    double mha = 4 * C * C + 4 * C, ffn = 2 * C * F + F + C, ln = 2 * C;
    double n = c->share_embeddings ? Vt * C : (Vs + Vt) * C;
    if (c->positions == ATTN_ENCDEC_LEARNED) n += 2.0 * c->max_len * C;
    n += (double)c->n_enc_layers * (mha + ffn + 2 * ln);
    n += (double)c->n_dec_layers * (2 * mha + ffn + 3 * ln);
    if (c->pre_ln) n += 2 * ln;
    if (!c->tie_output) n += Vt * C;
    if (c->logits_bias) n += Vt;
    return n;
}

attn_status attn_encdec_config_check(const attn_encdec_config *c) {
    if (!c) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec: NULL config");
    /* sizes > 0 (no upper bound of their own: the parameter count below bounds them) */
    const config_size pos[] = {{"src_vocab", c->src_vocab, 0},       {"tgt_vocab", c->tgt_vocab, 0},
                               {"d_model", c->d_model, 0},           {"n_head", c->n_head, 0},
                               {"d_ff", c->d_ff, 0},                 {"n_enc_layers", c->n_enc_layers, 0},
                               {"n_dec_layers", c->n_dec_layers, 0}, {"max_len", c->max_len, 0}};
    attn_status s = config_check_sizes("encdec", pos, sizeof pos / sizeof pos[0], NULL);
    if (s) return s;
    /* Layer counts also size the tensor table (16 entries per encoder layer, 26 per decoder
     * layer, counted in int): tiny layers could otherwise pass the parameter limit in numbers
     * that overflow it. */
    if (c->n_enc_layers > ATTN_ENCDEC_MAX_LAYERS || c->n_dec_layers > ATTN_ENCDEC_MAX_LAYERS)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "encdec config: too large: %s %d (at most %d)",
                         c->n_enc_layers > ATTN_ENCDEC_MAX_LAYERS ? "n_enc_layers" : "n_dec_layers",
                         c->n_enc_layers > ATTN_ENCDEC_MAX_LAYERS ? c->n_enc_layers
                                                                  : c->n_dec_layers,
                         ATTN_ENCDEC_MAX_LAYERS);
    if (c->d_model % c->n_head != 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec config: n_head (%d) must divide d_model (%d)", c->n_head,
                         c->d_model);
    if (c->share_embeddings && c->src_vocab != c->tgt_vocab)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec config: share_embeddings needs src_vocab == tgt_vocab (got %d "
                         "and %d)",
                         c->src_vocab, c->tgt_vocab);
    if (c->pad_id < 0 || c->pad_id >= c->src_vocab || c->pad_id >= c->tgt_vocab)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec config: pad_id %d must be a valid id of both vocabularies "
                         "(src_vocab %d, tgt_vocab %d)",
                         c->pad_id, c->src_vocab, c->tgt_vocab);
    if ((s = config_check_prob("encdec", "dropout", c->dropout)) ||
        (s = config_check_positive("encdec", "layer_norm_eps", c->layer_norm_eps, false)))
        return s;
    if (c->activation != ATTN_ENCDEC_RELU && c->activation != ATTN_ENCDEC_GELU &&
        c->activation != ATTN_ENCDEC_SILU)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec config: unknown activation %d",
                         (int)c->activation);
    if ((unsigned)c->positions > ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec config: unknown positions %d",
                         (int)c->positions);
    if ((unsigned)c->arch > ATTN_ENCDEC_ARCH_M2M100)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec config: unknown arch %d",
                         (int)c->arch);
    if (c->arch == ATTN_ENCDEC_ARCH_MARIAN && (c->pre_ln || !c->logits_bias))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec config: a Marian model is post-LN with a logits bias (pre_ln, "
                         "logits_bias)");
    if (c->arch == ATTN_ENCDEC_ARCH_M2M100 && (!c->pre_ln || c->logits_bias))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec config: an M2M100 model is pre-LN without a logits bias (pre_ln, "
                         "logits_bias)");
    if (c->arch != ATTN_ENCDEC_ARCH_ATTN && !c->share_embeddings && c->src_vocab != c->tgt_vocab)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec config: separate Marian embeddings need equal vocabularies (got "
                         "%d and %d)",
                         c->src_vocab, c->tgt_vocab);
    /* Each single matrix must also stay below the int sizes the kernels take (rows · cols of one
     * GEMM operand), and the whole buffer below the library's sanity limit. */
    const double lim = (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float));
    double biggest = fmax(fmax((double)c->src_vocab, (double)c->tgt_vocab) * c->d_model,
                          (double)c->d_ff * c->d_model);
    biggest = fmax(biggest, 4.0 * c->d_model * c->d_model);
    /* the sinusoidal table (max_len, C) is allocated beside the parameters */
    if (((double)c->max_len + c->pad_id + 1) * c->d_model > lim)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "encdec config: too large: max_len %d x d_model %d positions exceed the "
                         "%zu GiB limit",
                         c->max_len, c->d_model, (size_t)(ATTN_MAX_BUFFER_BYTES >> 30));
    double n = count_params(c);
    if (n > lim || biggest > lim || 3.0 * c->d_model > INT32_MAX)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "encdec config: too large: %.3g parameters (d_model %d, d_ff %d, vocab "
                         "%d/%d, %d+%d layers) exceed the %zu GiB limit",
                         n, c->d_model, c->d_ff, c->src_vocab, c->tgt_vocab, c->n_enc_layers,
                         c->n_dec_layers, (size_t)(ATTN_MAX_BUFFER_BYTES >> 30));
    attn_mha_config mc = attn_mha_default_config(c->d_model, c->n_head);
    return attn_mha_config_check(&mc);
}

size_t attn_encdec_num_params(const attn_encdec_config *c) {
    if (attn_encdec_config_check(c)) return 0;
    return (size_t)count_params(c);
}

/* ---- JSON -------------------------------------------------------------------------------- */

enum { F_INT, F_FLOAT, F_BOOL, F_ACT, F_POS };
typedef config_field field;

#define FLD(n, t) CONFIG_FIELD(attn_encdec_config, n, t)
static const field FIELDS[] = {
    FLD(src_vocab, F_INT),        FLD(tgt_vocab, F_INT),      FLD(d_model, F_INT),
    FLD(n_head, F_INT),           FLD(d_ff, F_INT),           FLD(n_enc_layers, F_INT),
    FLD(n_dec_layers, F_INT),     FLD(max_len, F_INT),        FLD(dropout, F_FLOAT),
    FLD(share_embeddings, F_BOOL), FLD(tie_output, F_BOOL),   FLD(pre_ln, F_BOOL),
    FLD(activation, F_ACT),       FLD(positions, F_POS),      FLD(pad_id, F_INT),
    FLD(layer_norm_eps, F_FLOAT), FLD(scale_embedding, F_BOOL), FLD(logits_bias, F_BOOL),
};
#define NFIELDS (sizeof FIELDS / sizeof FIELDS[0])

static attn_status config_load(const char *path, attn_encdec_config *out, bool check) {
    if (!path || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec: NULL argument");
    json_t *root;
    attn_status s = config_json_load(path, 0, &root);
    if (s) return s;
    attn_encdec_config c = attn_encdec_default_config();
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        const field *f = NULL;
        for (size_t i = 0; i < NFIELDS; i++)
            if (strcmp(FIELDS[i].name, key) == 0) f = &FIELDS[i];
        if (!f) {
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: unknown field \"%s\" in model config", path,
                          key);
            goto done;
        }
        char *dst = (char *)&c + f->off;
        switch (f->type) {
        case F_INT: s = config_read_int(path, key, v, CONFIG_INT_STRICT, (int *)dst); break;
        case F_FLOAT: s = config_read_float(path, key, v, true, (float *)dst); break;
        case F_BOOL: s = config_read_bool(path, key, v, (bool *)dst); break;
        case F_ACT: {
            const char *t = json_string_value(v);
            if (t && strcmp(t, "relu") == 0) c.activation = ATTN_ENCDEC_RELU;
            else if (t && strcmp(t, "gelu") == 0) c.activation = ATTN_ENCDEC_GELU;
            else if (t && strcmp(t, "silu") == 0) c.activation = ATTN_ENCDEC_SILU;
            else {
                s = attn_fail(ATTN_STATUS_FORMAT,
                              "%s: field \"activation\" must be \"relu\", \"gelu\" or \"silu\"",
                              path);
                goto done;
            }
            break;
        }
        case F_POS: {
            const char *t = json_string_value(v);
            if (t && strcmp(t, "sinusoidal") == 0) c.positions = ATTN_ENCDEC_SINUSOIDAL;
            else if (t && strcmp(t, "learned") == 0) c.positions = ATTN_ENCDEC_LEARNED;
            else if (t && strcmp(t, "sinusoidal_halves") == 0)
                c.positions = ATTN_ENCDEC_SINUSOIDAL_HALVES;
            else if (t && strcmp(t, "sinusoidal_fairseq") == 0)
                c.positions = ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ;
            else {
                s = attn_fail(ATTN_STATUS_FORMAT,
                              "%s: field \"positions\" must be \"sinusoidal\", \"learned\", "
                              "\"sinusoidal_halves\" or \"sinusoidal_fairseq\"",
                              path);
                goto done;
            }
            break;
        }
        }
        if (s) goto done;
    }
    if (check) {
        s = attn_encdec_config_check(&c);
    } else {
        /* A template gets its vocabularies and pad_id later, from the tokenizer; everything else
         * is checked now, so that a bad value is reported with this file's name (and absurd sizes
         * before anything is trained or allocated: with one-token vocabularies the size is a
         * lower bound). */
        attn_encdec_config t = c;
        t.src_vocab = t.tgt_vocab = 1;
        t.pad_id = 0;
        s = attn_encdec_config_check(&t);
    }
    if (s) {
        /* Prefix the file name to the check's message, which names the field. */
        s = config_prefix_error(s, path);
        goto done;
    }
    *out = c;
done:
    json_decref(root);
    return s;
}

attn_status attn_encdec_config_load(const char *path, attn_encdec_config *out) {
    return config_load(path, out, true);
}

attn_status attn_encdec_config_load_template(const char *path, attn_encdec_config *out) {
    return config_load(path, out, false);
}

attn_status attn_encdec_config_save(const char *path, const attn_encdec_config *c) {
    if (!path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec: NULL path");
    attn_status s = attn_encdec_config_check(c);
    if (s) return s;
    json_t *o = json_object();
    if (!o) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec: out of memory");
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *src = (const char *)c + FIELDS[i].off;
        json_t *v = NULL;
        switch (FIELDS[i].type) {
        case F_INT: v = json_integer(*(const int *)src); break;
        case F_FLOAT: v = config_json_float(*(const float *)src); break;
        case F_BOOL: v = json_boolean(*(const bool *)src); break;
        case F_ACT: {
            static const char *const act[] = {"relu", "gelu", "silu"};
            v = json_string(act[c->activation]);
            break;
        }
        case F_POS: {
            static const char *const pos[] = {"sinusoidal", "learned", "sinusoidal_halves",
                                              "sinusoidal_fairseq"};
            v = json_string(pos[c->positions]);
            break;
        }
        }
        json_object_set_new(o, FIELDS[i].name, v);
    }
    return config_json_save(o, path);
}

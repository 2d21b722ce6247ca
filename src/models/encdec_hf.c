/* encdec_hf.c — Hugging Face translation directories on the encoder–decoder (attn_models.h):
 * MarianMTModel and M2M100ForConditionalGeneration (NLLB-200, M2M100). Their config.json in
 * transformers' field names becomes an attn_encdec_config (the same composition with the options
 * where these models differ: norm placement, position table, embedding scale, logits bias,
 * activation), and each architecture's name map reads the checkpoint into attn's parameter
 * table. No maths here: the model is encdec.c's. */
#include "attn_models.h"

#include "../core/core-impl.h"
#include "config-impl.h"
#include "encdec-impl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- config.json ------------------------------------------------------------------------- */

/* An integer field (absent or null: *out unchanged). */
static attn_status get_int(json_t *root, const char *path, const char *key, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return ATTN_STATUS_OK;
    return config_read_int(path, key, v, CONFIG_INT_INTEGRAL, out);
}

static attn_status get_bool(json_t *root, const char *path, const char *key, bool *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return ATTN_STATUS_OK;
    return config_read_bool(path, key, v, out);
}

static attn_status get_float(json_t *root, const char *path, const char *key, float *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return ATTN_STATUS_OK;
    return config_read_float(path, key, v, true, out);
}

/* Two fields transformers keeps apart that this model has once: they must agree. */
static attn_status same(const char *path, const char *a, int va, const char *b, int vb) {
    if (va == vb) return ATTN_STATUS_OK;
    return attn_fail(ATTN_STATUS_UNSUPPORTED,
                     "%s: \"%s\" (%d) differs from \"%s\" (%d): attn's encoder–decoder has one "
                     "value for both",
                     path, a, va, b, vb);
}

/* The architecture of an already loaded config.json: ATTN (no model_type), MARIAN, M2M100, or
 * an error naming model_type. */
static attn_status arch_of(json_t *root, const char *path, attn_encdec_arch *arch) {
    json_t *v = json_object_get(root, "model_type");
    *arch = ATTN_ENCDEC_ARCH_ATTN;
    if (!v) return ATTN_STATUS_OK;
    const char *t = json_string_value(v);
    if (t && strcmp(t, "marian") == 0) *arch = ATTN_ENCDEC_ARCH_MARIAN;
    else if (t && strcmp(t, "m2m_100") == 0) *arch = ATTN_ENCDEC_ARCH_M2M100;
    else
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: \"model_type\" %s%s%s is not a translation model attn reads "
                         "(\"marian\", \"m2m_100\")",
                         path, t ? "\"" : "", t ? t : "(not a string)", t ? "\"" : "");
    return ATTN_STATUS_OK;
}

static attn_status hf_config(json_t *root, const char *path, attn_encdec_arch arch,
                             attn_encdec_config *out) {
    const bool marian = arch == ATTN_ENCDEC_ARCH_MARIAN;
    attn_encdec_config c = attn_encdec_default_config();
    /* transformers' defaults for the fields a config.json may leave out */
    int vocab = marian ? 58101 : 128112, dec_vocab = -1, d_model = 1024, max_pos = 1024;
    int el = 12, dl = 12, eh = 16, dh = 16, ef = 4096, df = 4096, pad = marian ? 58100 : 1;
    bool scale = !marian, share = true, tie = true;
    float eps = 1e-5f;
    const char *act = marian ? "gelu" : "relu";
    attn_status s;
    if ((s = get_int(root, path, "vocab_size", &vocab)) ||
        (s = get_int(root, path, "d_model", &d_model)) ||
        (s = get_int(root, path, "max_position_embeddings", &max_pos)) ||
        (s = get_int(root, path, "encoder_layers", &el)) ||
        (s = get_int(root, path, "decoder_layers", &dl)) ||
        (s = get_int(root, path, "encoder_attention_heads", &eh)) ||
        (s = get_int(root, path, "decoder_attention_heads", &dh)) ||
        (s = get_int(root, path, "encoder_ffn_dim", &ef)) ||
        (s = get_int(root, path, "decoder_ffn_dim", &df)) ||
        (s = get_int(root, path, "pad_token_id", &pad)) ||
        (s = get_bool(root, path, "scale_embedding", &scale)) ||
        (s = get_bool(root, path, "tie_word_embeddings", &tie)) ||
        (s = get_float(root, path, "layer_norm_eps", &eps)))
        return s;
    if (marian) {
        if ((s = get_int(root, path, "decoder_vocab_size", &dec_vocab)) ||
            (s = get_bool(root, path, "share_encoder_decoder_embeddings", &share)))
            return s;
        if (dec_vocab >= 0 && (s = same(path, "decoder_vocab_size", dec_vocab, "vocab_size", vocab)))
            return s;
    }
    json_t *a = json_object_get(root, "activation_function");
    if (a && !json_is_null(a) && (s = config_read_string(path, "activation_function", a, &act)))
        return s;
    if (strcmp(act, "swish") == 0 || strcmp(act, "silu") == 0) c.activation = ATTN_ENCDEC_SILU;
    else if (strcmp(act, "gelu") == 0) c.activation = ATTN_ENCDEC_GELU;
    else if (strcmp(act, "relu") == 0) c.activation = ATTN_ENCDEC_RELU;
    else
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: \"activation_function\" \"%s\" is not one attn has (swish, silu, "
                         "gelu, relu)",
                         path, act);
    if ((s = same(path, "encoder_attention_heads", eh, "decoder_attention_heads", dh)) ||
        (s = same(path, "encoder_ffn_dim", ef, "decoder_ffn_dim", df)))
        return s;
    c.src_vocab = c.tgt_vocab = vocab;
    c.d_model = d_model, c.n_head = eh, c.d_ff = ef;
    c.n_enc_layers = el, c.n_dec_layers = dl;
    c.max_len = max_pos;
    c.dropout = 0.0f;
    c.share_embeddings = share;
    c.tie_output = tie;
    c.pre_ln = !marian;
    c.positions = marian ? ATTN_ENCDEC_SINUSOIDAL_HALVES : ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ;
    c.pad_id = pad;
    c.layer_norm_eps = eps;
    c.scale_embedding = scale;
    c.logits_bias = marian;
    c.arch = arch;
    if ((s = attn_encdec_config_check(&c))) return config_prefix_error(s, path);
    *out = c;
    return ATTN_STATUS_OK;
}

attn_status attn_encdec_hf_config_load(const char *path, attn_encdec_config *cfg) {
    if (!path || !cfg) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec: NULL argument");
    json_t *root;
    ATTN_TRY(config_json_load(path, 0, &root));
    attn_encdec_arch arch;
    attn_status s = arch_of(root, path, &arch);
    if (!s && arch == ATTN_ENCDEC_ARCH_ATTN)
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: no \"model_type\": not a Hugging Face translation config", path);
    if (!s) s = hf_config(root, path, arch, cfg);
    json_decref(root);
    return s;
}

attn_status encdec_config_load_any(const char *path, attn_encdec_config *cfg) {
    json_t *root;
    ATTN_TRY(config_json_load(path, 0, &root));
    attn_encdec_arch arch;
    attn_status s = arch_of(root, path, &arch);
    if (!s && arch != ATTN_ENCDEC_ARCH_ATTN) s = hf_config(root, path, arch, cfg);
    json_decref(root);
    if (!s && arch == ATTN_ENCDEC_ARCH_ATTN) s = attn_encdec_config_load(path, cfg);
    return s;
}

/* ---- the checkpoint's names ----------------------------------------------------------------- */

/* attn's sub-layer names and transformers' */
static const char *const SUBS[][2] = {
    {"self_attn.w_q", "self_attn.q_proj.weight"},   {"self_attn.b_q", "self_attn.q_proj.bias"},
    {"self_attn.w_k", "self_attn.k_proj.weight"},   {"self_attn.b_k", "self_attn.k_proj.bias"},
    {"self_attn.w_v", "self_attn.v_proj.weight"},   {"self_attn.b_v", "self_attn.v_proj.bias"},
    {"self_attn.w_o", "self_attn.out_proj.weight"}, {"self_attn.b_o", "self_attn.out_proj.bias"},
    {"cross_attn.w_q", "encoder_attn.q_proj.weight"},
    {"cross_attn.b_q", "encoder_attn.q_proj.bias"},
    {"cross_attn.w_k", "encoder_attn.k_proj.weight"},
    {"cross_attn.b_k", "encoder_attn.k_proj.bias"},
    {"cross_attn.w_v", "encoder_attn.v_proj.weight"},
    {"cross_attn.b_v", "encoder_attn.v_proj.bias"},
    {"cross_attn.w_o", "encoder_attn.out_proj.weight"},
    {"cross_attn.b_o", "encoder_attn.out_proj.bias"},
    {"ff1.w", "fc1.weight"},                        {"ff1.b", "fc1.bias"},
    {"ff2.w", "fc2.weight"},                        {"ff2.b", "fc2.bias"},
};

static const char *norm_name(bool enc, const char *ln) {
    if (strcmp(ln, "ln1") == 0) return "self_attn_layer_norm";
    if (enc ? strcmp(ln, "ln2") == 0 : strcmp(ln, "ln3") == 0) return "final_layer_norm";
    if (!enc && strcmp(ln, "ln2") == 0) return "encoder_attn_layer_norm";
    return NULL;
}

/* transformers' name of attn's table entry t (k = 0), or the other spellings a checkpoint may
 * use (k > 0: a shared table saved under an encoder or decoder name). */
static bool hf_name(void *ctx, const attn_param_info *t, int k, char *buf, size_t cap) {
    (void)ctx;
    const char *n = t->name;
    if (strcmp(n, "emb") == 0) {
        static const char *const alt[] = {"model.shared.weight", "model.encoder.embed_tokens.weight",
                                          "model.decoder.embed_tokens.weight"};
        if (k > 2) return false;
        snprintf(buf, cap, "%s", alt[k]);
        return true;
    }
    if (k > 0) return false;
    const char *fixed[][2] = {{"src_emb", "model.encoder.embed_tokens.weight"},
                              {"tgt_emb", "model.decoder.embed_tokens.weight"},
                              {"out.w", "lm_head.weight"},
                              {"out.b", "final_logits_bias"},
                              {"enc.ln_f.w", "model.encoder.layer_norm.weight"},
                              {"enc.ln_f.b", "model.encoder.layer_norm.bias"},
                              {"dec.ln_f.w", "model.decoder.layer_norm.weight"},
                              {"dec.ln_f.b", "model.decoder.layer_norm.bias"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(n, fixed[i][0]) == 0) {
            snprintf(buf, cap, "%s", fixed[i][1]);
            return true;
        }
    /* enc.L.REST / dec.L.REST */
    const bool enc = strncmp(n, "enc.", 4) == 0;
    if (!enc && strncmp(n, "dec.", 4) != 0) return false;
    char *end;
    const long l = strtol(n + 4, &end, 10);
    if (end == n + 4 || *end != '.') return false;
    const char *rest = end + 1, *side = enc ? "encoder" : "decoder";
    for (size_t i = 0; i < sizeof SUBS / sizeof SUBS[0]; i++)
        if (strcmp(rest, SUBS[i][0]) == 0) {
            snprintf(buf, cap, "model.%s.layers.%ld.%s", side, l, SUBS[i][1]);
            return true;
        }
    char ln[8];
    const char *dot = strchr(rest, '.');
    if (!dot || (size_t)(dot - rest) >= sizeof ln) return false;
    memcpy(ln, rest, (size_t)(dot - rest));
    ln[dot - rest] = 0;
    const char *nn = norm_name(enc, ln);
    if (!nn) return false;
    snprintf(buf, cap, "model.%s.layers.%ld.%s.%s", side, l, nn,
             strcmp(dot + 1, "w") == 0 ? "weight" : "bias");
    return true;
}

/* Tied copies and position buffers a checkpoint may also hold. */
static bool hf_ignorable(void *ctx, const char *name) {
    const attn_encdec_config *c = ctx;
    if (strcmp(name, "model.encoder.embed_positions.weight") == 0 ||
        strcmp(name, "model.decoder.embed_positions.weight") == 0 ||
        strcmp(name, "model.encoder.embed_positions.weights") == 0 ||
        strcmp(name, "model.decoder.embed_positions.weights") == 0)
        return true;
    if (c->share_embeddings && (strcmp(name, "model.encoder.embed_tokens.weight") == 0 ||
                                strcmp(name, "model.decoder.embed_tokens.weight") == 0 ||
                                strcmp(name, "model.shared.weight") == 0))
        return true;
    return c->tie_output && strcmp(name, "lm_head.weight") == 0;
}

mdl_name_map encdec_hf_name_map(const attn_encdec_config *c) {
    mdl_name_map m = {hf_name, hf_ignorable, (void *)c};
    return m;
}

/* encdec_hf_save.c — attn's encoder–decoder saved as a Hugging Face translation directory
 * (attn_models.h: attn_encdec_save_hf_dir): MarianMTModel for post-LN models, and
 * M2M100ForConditionalGeneration for pre-LN ones, each only when it is the same model. The
 * weights go through the architecture's name map (encdec_hf.c), the same one the loader reads
 * them back with; config.json and generation_config.json are written in transformers' fields. */
#include "attn_models.h"

#include "../core/core-impl.h"
#include "config-impl.h"
#include "encdec-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

attn_encdec_hf_export attn_encdec_hf_export_default(attn_encdec_arch arch) {
    attn_encdec_hf_export o;
    memset(&o, 0, sizeof o);
    o.arch = arch;
    o.bos_id = 2, o.eos_id = 3, o.decoder_start_id = 2;
    o.num_beams = 4;
    return o;
}

static attn_status refuse(const char *arch, const char *field, const char *have,
                          const char *needs) {
    return attn_fail(ATTN_STATUS_UNSUPPORTED,
                     "encdec export: %s is not the same model: the model has %s %s, %s", arch,
                     field, have, needs);
}

/* The configuration the export is, under arch's names; *permute: the C axis reordered (attn's
 * interleaved sinusoids as Marian's halves). */
static attn_status export_config(const attn_encdec_model *m, attn_encdec_arch arch,
                                 attn_encdec_config *out, bool *permute) {
    const attn_encdec_config *c = &m->cfg;
    attn_encdec_config t = *c;
    *permute = false;
    if (c->layer_norm_eps != 1e-5f) {
        char v[32];
        snprintf(v, sizeof v, "%g", (double)c->layer_norm_eps);
        return refuse(arch == ATTN_ENCDEC_ARCH_MARIAN ? "MarianMT" : "M2M100", "layer_norm_eps", v,
                      "transformers' LayerNorm has eps 1e-5");
    }
    if (c->positions == ATTN_ENCDEC_LEARNED)
        return refuse(arch == ATTN_ENCDEC_ARCH_MARIAN ? "MarianMT" : "M2M100", "positions",
                      "\"learned\"", "the architecture's positions are fixed sinusoids");
    if (arch == ATTN_ENCDEC_ARCH_MARIAN) {
        if (c->pre_ln)
            return refuse("MarianMT", "pre_ln", "true",
                          "MarianMT is post-LN only (export a pre-LN model as hf-m2m100)");
        if (c->positions == ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ)
            return refuse("MarianMT", "positions", "\"sinusoidal_fairseq\"",
                          "Marian's table is \"sinusoidal_halves\" (or attn's \"sinusoidal\")");
        if (c->src_vocab != c->tgt_vocab)
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "encdec export: MarianMT: the model has src_vocab %d and tgt_vocab "
                             "%d; attn reads Marian's separate embeddings only of equal size",
                             c->src_vocab, c->tgt_vocab);
        *permute = c->positions == ATTN_ENCDEC_SINUSOIDAL;
        t.positions = ATTN_ENCDEC_SINUSOIDAL_HALVES;
        t.logits_bias = true; /* final_logits_bias: zero when the model has none */
    } else if (arch == ATTN_ENCDEC_ARCH_M2M100) {
        if (!c->pre_ln)
            return refuse("M2M100", "pre_ln", "false",
                          "M2M100 is pre-LN with final norms (export a post-LN model as "
                          "hf-marian)");
        if (c->positions != ATTN_ENCDEC_SINUSOIDAL_FAIRSEQ)
            return refuse("M2M100", "positions",
                          c->positions == ATTN_ENCDEC_SINUSOIDAL ? "\"sinusoidal\""
                                                                 : "\"sinusoidal_halves\"",
                          "M2M100's table is \"sinusoidal_fairseq\" (other frequencies, positions "
                          "from pad_id + 1): train with that option");
        if (!c->share_embeddings)
            return refuse("M2M100", "share_embeddings", "false",
                          "M2M100 has one table for both sides");
        if (c->logits_bias) {
            for (int v = 0; v < c->tgt_vocab; v++)
                if (m->w.out_b[v] != 0.0f)
                    return refuse("M2M100", "logits_bias", "true (non-zero)",
                                  "M2M100's lm_head has no bias: train with \"logits_bias\": "
                                  "false");
            t.logits_bias = false;
        }
    } else {
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec export: arch must be Marian or M2M100 (got %d)", (int)arch);
    }
    t.arch = arch;
    ATTN_TRY(attn_encdec_config_check(&t));
    *out = t;
    return ATTN_STATUS_OK;
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Which axes of tensor `name` run over the model's C dimensions (the residual stream): bit 1 the
 * rows, bit 2 the columns (2-D), bit 1 alone for a 1-D one; 0 none. */
static int c_axes(const char *name) {
    static const char *const cols[] = {".w_q", ".w_k", ".w_v", ".ff1.w"};
    static const char *const rows[] = {".w_o", ".ff2.w"};
    static const char *const vec[] = {".b_o", ".ff2.b"};
    if (!strcmp(name, "emb") || !strcmp(name, "src_emb") || !strcmp(name, "tgt_emb") ||
        !strcmp(name, "out.w"))
        return 2;
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        if (ends_with(name, cols[i])) return 2;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (ends_with(name, rows[i])) return 1;
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++)
        if (ends_with(name, vec[i])) return 1;
    if (strstr(name, ".ln") && (ends_with(name, ".w") || ends_with(name, ".b"))) return 1;
    return 0;
}

/* dst = src with the C axes of every tensor in Marian's order: new column j < ns = ceil(C/2) is
 * attn's column 2j (a sine), new ns + j is attn's 2j + 1 (the cosine of the same angle). */
static attn_status permute_c(const attn_param_info *t, int n, int C, const float *src,
                             float *dst) {
    int *old = attn_alloc((size_t)C * sizeof *old);
    if (!old) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec export: out of memory");
    const int ns = (C + 1) / 2;
    for (int j = 0; j < C; j++) old[j] = j < ns ? 2 * j : 2 * (j - ns) + 1;
    for (int i = 0; i < n; i++) {
        const attn_param_info *e = &t[i];
        const float *s = src + e->offset;
        float *d = dst + e->offset;
        const int ax = c_axes(e->name);
        const int64_t R = e->shape[0], K = e->ndim == 2 ? e->shape[1] : 1;
        if ((ax == 2 && K != C) || (ax == 1 && R != C)) {
            attn_free(old);
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "encdec export: internal: tensor %s has no C axis where expected",
                             e->name);
        }
        for (int64_t r = 0; r < R; r++) {
            const int64_t rs = ax == 1 ? old[r] : r;
            for (int64_t k = 0; k < K; k++)
                d[r * K + k] = s[rs * K + (ax == 2 ? old[k] : k)];
        }
    }
    attn_free(old);
    return ATTN_STATUS_OK;
}

static void set_int(json_t *o, const char *k, long long v) { json_object_set_new(o, k, json_integer(v)); }
static void set_bool(json_t *o, const char *k, bool v) { json_object_set_new(o, k, json_boolean(v)); }

static attn_status write_config(const char *dir, const attn_encdec_config *c,
                                const attn_encdec_hf_export *o, float dropout) {
    const bool marian = c->arch == ATTN_ENCDEC_ARCH_MARIAN;
    json_t *j = json_object();
    if (!j) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec export: out of memory");
    json_t *arch = json_array();
    json_array_append_new(arch, json_string(marian ? "MarianMTModel"
                                                   : "M2M100ForConditionalGeneration"));
    json_object_set_new(j, "architectures", arch);
    json_object_set_new(j, "model_type", json_string(marian ? "marian" : "m2m_100"));
    set_int(j, "vocab_size", c->src_vocab);
    if (marian) {
        set_int(j, "decoder_vocab_size", c->tgt_vocab);
        set_bool(j, "share_encoder_decoder_embeddings", c->share_embeddings);
    }
    set_int(j, "d_model", c->d_model);
    set_int(j, "encoder_layers", c->n_enc_layers);
    set_int(j, "decoder_layers", c->n_dec_layers);
    set_int(j, "encoder_attention_heads", c->n_head);
    set_int(j, "decoder_attention_heads", c->n_head);
    set_int(j, "encoder_ffn_dim", c->d_ff);
    set_int(j, "decoder_ffn_dim", c->d_ff);
    static const char *const act[] = {"relu", "gelu", "swish"};
    json_object_set_new(j, "activation_function", json_string(act[c->activation]));
    set_int(j, "max_position_embeddings", c->max_len);
    set_bool(j, "scale_embedding", c->scale_embedding);
    set_bool(j, "tie_word_embeddings", c->tie_output);
    json_object_set_new(j, "dropout", config_json_float(dropout));
    json_object_set_new(j, "attention_dropout", json_real(0.0));
    json_object_set_new(j, "activation_dropout", json_real(0.0));
    json_object_set_new(j, "encoder_layerdrop", json_real(0.0));
    json_object_set_new(j, "decoder_layerdrop", json_real(0.0));
    json_object_set_new(j, "init_std", json_real(0.02));
    set_bool(j, "is_encoder_decoder", true);
    set_bool(j, "use_cache", true);
    set_int(j, "pad_token_id", c->pad_id);
    if (o->bos_id >= 0) set_int(j, "bos_token_id", o->bos_id);
    set_int(j, "eos_token_id", o->eos_id);
    set_int(j, "decoder_start_token_id", o->decoder_start_id);
    set_int(j, "forced_eos_token_id", o->eos_id);
    json_object_set_new(j, "torch_dtype", json_string("float32"));
    char path[4096];
    if (!mdl_dir_path(path, sizeof path, dir, "config.json", "encdec export")) {
        json_decref(j);
        return ATTN_STATUS_INVALID_ARGUMENT;
    }
    return config_json_save(j, path);
}

static attn_status write_generation_config(const char *dir, const attn_encdec_config *c,
                                           const attn_encdec_hf_export *o) {
    json_t *j = json_object();
    if (!j) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec export: out of memory");
    if (o->bos_id >= 0) set_int(j, "bos_token_id", o->bos_id);
    set_int(j, "decoder_start_token_id", o->decoder_start_id);
    set_int(j, "eos_token_id", o->eos_id);
    set_int(j, "forced_eos_token_id", o->eos_id);
    set_int(j, "pad_token_id", c->pad_id);
    json_t *bad = json_array();
    json_t *one = json_array();
    json_array_append_new(one, json_integer(c->pad_id));
    json_array_append_new(bad, one);
    if (o->bos_id >= 0 && o->bos_id != c->pad_id) {
        one = json_array();
        json_array_append_new(one, json_integer(o->bos_id));
        json_array_append_new(bad, one);
    }
    json_object_set_new(j, "bad_words_ids", bad);
    set_int(j, "max_length", c->max_len);
    set_int(j, "num_beams", o->num_beams);
    char path[4096];
    if (!mdl_dir_path(path, sizeof path, dir, "generation_config.json", "encdec export")) {
        json_decref(j);
        return ATTN_STATUS_INVALID_ARGUMENT;
    }
    return config_json_save(j, path);
}

attn_status attn_encdec_save_hf_dir(const attn_encdec_model *m, const char *dir,
                                    const attn_encdec_hf_export *o) {
    if (!m || !dir || !*dir || !o)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec export: NULL argument");
    const attn_encdec_config *c = &m->cfg;
    const int32_t ids[3] = {o->bos_id, o->eos_id, o->decoder_start_id};
    static const char *const id_names[3] = {"bos_id", "eos_id", "decoder_start_id"};
    for (int i = 0; i < 3; i++)
        if (ids[i] < (i == 0 ? -1 : 0) || ids[i] >= c->tgt_vocab)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "encdec export: %s %d is outside the target vocabulary [0, %d)",
                             id_names[i], (int)ids[i], c->tgt_vocab);
    if (o->eos_id == c->pad_id)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec export: eos_id %d is the padding id", (int)o->eos_id);
    if (o->num_beams < 1)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec export: num_beams %d < 1",
                         o->num_beams);
    attn_encdec_config t;
    bool permute;
    ATTN_TRY(export_config(m, o->arch, &t, &permute));
    attn_param_info *tab;
    int n;
    ATTN_TRY(encdec_table(&t, &tab, &n));
    /* The export's table has the model's layout (only names and out.b's shape may differ), so a
     * copy of the buffer (C axes reordered for Marian) is its parameter buffer. A model without a
     * logits bias exported as Marian gets a zero one at the end. */
    attn_status s = ATTN_STATUS_OK;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const attn_param_info *e = &tab[i], *f = attn_encdec_find_tensor(m, e->name);
        if (f ? f->numel != e->numel || f->offset != e->offset
              : strcmp(e->name, "out.b") != 0 || e->offset != m->num_params)
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "encdec export: internal: tensor %s does not match the model's table",
                          e->name);
        if (e->offset + e->numel > total) total = e->offset + e->numel;
    }
    /* (an all-zero logits bias left out of an M2M100 export stays at the buffer's end, unread) */
    if (total < m->num_params) total = m->num_params;
    float *buf = s ? NULL : attn_calloc(total * sizeof *buf);
    if (!s && !buf) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec export: out of memory");
    if (!s) {
        if (permute) s = permute_c(m->tensors, m->n_tensors, c->d_model, m->params, buf);
        else memcpy(buf, m->params, m->num_params * sizeof *buf);
    }
    if (!s) s = mdl_make_dir(dir, "encdec export");
    char path[4096];
    if (!s && !mdl_dir_path(path, sizeof path, dir, "model.safetensors", "encdec export"))
        s = ATTN_STATUS_INVALID_ARGUMENT;
    if (!s) {
        static const char *const meta[] = {"format", "pt", NULL};
        const mdl_name_map map = encdec_hf_name_map(&t);
        s = mdl_save_params(path, tab, n, buf, &map, meta);
    }
    attn_free(buf);
    attn_free(tab);
    if (!s) s = write_config(dir, &t, o, c->dropout);
    if (!s) s = write_generation_config(dir, &t, o);
    return s;
}

/* bert_gguf.c — BERT encoders from GGUF files (attn_bert.h: attn_bert_load_gguf, attn_bert_load):
 * general.architecture "bert" as convert_hf_to_gguf.py writes BertModel (sentence-transformers'
 * all-MiniLM-L6-v2, bge, ...), hyperparameters from the bert.* keys, tensors under llama.cpp's
 * names. Every tensor is converted to float32 into the model's one parameter buffer (F32 copied;
 * F16, BF16 and the quantized types dequantized with attn_quant_dequantize): BERT's encoder runs
 * on float weights, so a quantized file costs its weights' float32 size in memory (4 bytes per
 * weight; 90 MB for a 22 M-parameter MiniLM) and gives exactly the dequantized model. */
#include "attn_bert.h"
#include "attn_gguf.h"
#include "attn_gpt.h"
#include "attn_quant.h"

#include "bert-impl.h"
#include "models-impl.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* bert.key as an integer in [lo, hi] (absent: def, or the getter's "no key" when required). */
static attn_status key_int(const attn_gguf *g, const char *key, bool required, int64_t lo,
                           int64_t hi, int def, int *out) {
    char full[128];
    snprintf(full, sizeof full, "bert.%s", key);
    if (!attn_gguf_find(g, full) && !required) {
        *out = def;
        return ATTN_STATUS_OK;
    }
    int64_t v;
    ATTN_TRY(attn_gguf_get_int(g, full, &v));
    if (v < lo || v > hi)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s = %lld is outside [%lld, %lld]",
                         attn_gguf_name(g), full, (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return ATTN_STATUS_OK;
}

static attn_status read_config(const attn_gguf *g, attn_bert_config *c) {
    const char *name = attn_gguf_name(g), *arch;
    ATTN_TRY(attn_gguf_get_str(g, "general.architecture", &arch, NULL));
    if (strcmp(arch, "bert"))
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: general.architecture \"%.64s\" is not an encoder attn runs (bert)",
                         name, arch);
    *c = attn_bert_default_config();
    const int BIG = 1 << 24;
    ATTN_TRY(key_int(g, "block_count", true, 1, 4096, 0, &c->num_hidden_layers));
    ATTN_TRY(key_int(g, "embedding_length", true, 1, BIG, 0, &c->hidden_size));
    ATTN_TRY(key_int(g, "feed_forward_length", true, 1, BIG, 0, &c->intermediate_size));
    ATTN_TRY(key_int(g, "context_length", true, 1, BIG, 0, &c->max_position_embeddings));
    ATTN_TRY(key_int(g, "attention.head_count", true, 1, c->hidden_size, 0,
                     &c->num_attention_heads));
    if (c->hidden_size % c->num_attention_heads)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: bert.attention.head_count %d does not divide "
                         "bert.embedding_length %d",
                         name, c->num_attention_heads, c->hidden_size);
    double eps;
    ATTN_TRY(attn_gguf_get_float(g, "bert.attention.layer_norm_epsilon", &eps));
    if (!(eps > 0.0) || !isfinite(eps))
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: bert.attention.layer_norm_epsilon = %g must be a finite number > 0",
                         name, eps);
    c->layer_norm_eps = (float)eps;
    /* vocabulary and token types: the tables' rows (the tokenizer keys say the same) */
    const attn_gguf_tensor *e = attn_gguf_find_tensor(g, "token_embd.weight");
    const attn_gguf_tensor *t = attn_gguf_find_tensor(g, "token_types.weight");
    if (!e || !t)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' is missing", name,
                         e ? "token_types.weight" : "token_embd.weight");
    if (e->n_dims != 2 || e->ne[1] < 1 || e->ne[1] > BIG || t->n_dims != 2 || t->ne[1] < 1 ||
        t->ne[1] > BIG)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: token_embd.weight and token_types.weight must be (rows, %d) tables",
                         name, c->hidden_size);
    c->vocab_size = (int)e->ne[1];
    c->type_vocab_size = (int)t->ne[1];
    int64_t pad = -1;
    if (attn_gguf_find(g, "tokenizer.ggml.padding_token_id"))
        ATTN_TRY(attn_gguf_get_int(g, "tokenizer.ggml.padding_token_id", &pad));
    c->pad_token_id = pad >= 0 && pad < c->vocab_size ? (int)pad : -1;
    c->hidden_act = ATTN_ACT_GELU_ERF; /* BERT's "gelu", as llama.cpp computes it */
    c->hidden_dropout_prob = c->attention_probs_dropout_prob = 0.0f;
    return ATTN_STATUS_OK;
}

/* llama.cpp's name of BertModel's tensor hf. */
static bool gguf_name(const char *hf, char *out, size_t cap) {
    static const char *const TOP[][2] = {
        {"embeddings.word_embeddings.weight", "token_embd.weight"},
        {"embeddings.position_embeddings.weight", "position_embd.weight"},
        {"embeddings.token_type_embeddings.weight", "token_types.weight"},
        {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
        {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},
    };
    static const char *const LAYER[][2] = {
        {"attention.self.query", "attn_q"},          {"attention.self.key", "attn_k"},
        {"attention.self.value", "attn_v"},          {"attention.output.dense", "attn_output"},
        {"attention.output.LayerNorm", "attn_output_norm"}, {"intermediate.dense", "ffn_up"},
        {"output.dense", "ffn_down"},                {"output.LayerNorm", "layer_output_norm"},
    };
    for (size_t i = 0; i < sizeof TOP / sizeof TOP[0]; i++)
        if (!strcmp(hf, TOP[i][0])) {
            snprintf(out, cap, "%s", TOP[i][1]);
            return true;
        }
    if (strncmp(hf, "encoder.layer.", 14)) return false;
    const char *p = hf + 14, *l0 = p;
    while (isdigit((unsigned char)*p)) p++;
    if (p == l0 || *p != '.') return false;
    const int nl = (int)(p - l0);
    p++;
    const char *dot = strrchr(p, '.');
    if (!dot) return false;
    const size_t n = (size_t)(dot - p);
    for (size_t i = 0; i < sizeof LAYER / sizeof LAYER[0]; i++)
        if (strlen(LAYER[i][0]) == n && !strncmp(p, LAYER[i][0], n)) {
            snprintf(out, cap, "blk.%.*s.%s%s", nl, l0, LAYER[i][1], dot);
            return true;
        }
    return false;
}

attn_status attn_bert_from_gguf(const attn_gguf *g, attn_bert_model **out) {
    if (!g || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert gguf: NULL argument");
    *out = NULL;
    const char *name = attn_gguf_name(g);
    attn_bert_config cfg;
    ATTN_TRY(read_config(g, &cfg));
    attn_status cs = attn_bert_config_check(&cfg);
    if (cs) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        return attn_fail(cs, "%s: %s", name, msg);
    }
    /* Before the parameter buffer is allocated: the tables and layers the hyperparameters size it
     * by must be the file's (so a header alone never asks for a huge buffer). */
    const attn_gguf_tensor *pos = attn_gguf_find_tensor(g, "position_embd.weight");
    const attn_gguf_tensor *up = attn_gguf_find_tensor(g, "blk.0.ffn_up.weight");
    char last[64];
    snprintf(last, sizeof last, "blk.%d.layer_output_norm.weight", cfg.num_hidden_layers - 1);
    const attn_gguf_tensor *lt = attn_gguf_find_tensor(g, last);
    const attn_gguf_tensor *emb = attn_gguf_find_tensor(g, "token_embd.weight");
    if (!pos || pos->n_dims != 2 || pos->shape[0] != cfg.max_position_embeddings ||
        pos->shape[1] != cfg.hidden_size || emb->shape[1] != cfg.hidden_size || !up ||
        up->n_dims != 2 || up->shape[0] != cfg.intermediate_size ||
        up->shape[1] != cfg.hidden_size || !lt)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: the tensors do not match the hyperparameters: expected "
                         "position_embd.weight (%d, %d), blk.0.ffn_up.weight (%d, %d), "
                         "token_embd.weight (V, %d) and %s",
                         name, cfg.max_position_embeddings, cfg.hidden_size,
                         cfg.intermediate_size, cfg.hidden_size, cfg.hidden_size, last);
    attn_bert_model *m;
    ATTN_TRY(bert_model_alloc(&cfg, false, false, &m));
    const size_t nt = attn_gguf_tensor_count(g);
    bool *used = attn_calloc(nt + 1);
    attn_status s = used ? ATTN_STATUS_OK
                         : attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "bert gguf: out of memory");
    for (int i = 0; i < m->n_tensors && !s; i++) {
        const attn_param_info *e = &m->tensors[i];
        char gname[160];
        if (!gguf_name(e->name, gname, sizeof gname)) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert gguf: no GGUF name for '%s'",
                          e->name);
            break;
        }
        char want[64];
        if (e->ndim == 2)
            snprintf(want, sizeof want, "(%lld, %lld)", (long long)e->shape[0],
                     (long long)e->shape[1]);
        else
            snprintf(want, sizeof want, "(%lld)", (long long)e->shape[0]);
        const attn_gguf_tensor *t = attn_gguf_find_tensor(g, gname);
        if (!t) {
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' is missing (expected shape %s)",
                          name, gname, want);
            break;
        }
        for (size_t k = 0; k < nt; k++)
            if (attn_gguf_tensor_at(g, k) == t) used[k] = true;
        if (t->n_dims != e->ndim || t->shape[0] != e->shape[0] ||
            (e->ndim == 2 && t->shape[1] != e->shape[1])) {
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' has %d dimensions (%lld, %lld), "
                          "expected shape %s",
                          name, gname, t->n_dims, (long long)t->shape[0],
                          (long long)(t->n_dims > 1 ? t->shape[1] : 1), want);
            break;
        }
        const void *src = attn_gguf_tensor_data(g, t);
        float *dst = m->params + e->offset;
        if (!src) {
            s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                          "%s: a model needs the file's tensor data in memory", name);
        } else if (t->type == ATTN_GGUF_DTYPE_F32) {
            memcpy(dst, src, (size_t)e->numel * sizeof(float));
        } else if (attn_quant_type_known(t->type)) {
            s = attn_quant_dequantize((attn_qtype)t->type, (int64_t)e->numel, src, dst);
        } else {
            const char *tn = attn_gguf_dtype_name(t->type);
            s = attn_fail(ATTN_STATUS_UNSUPPORTED,
                          "%s: tensor '%s' has type %s, which attn does not read (F32, F16, BF16, "
                          "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)",
                          name, gname, tn ? tn : "?");
        }
    }
    for (size_t k = 0; k < nt && !s; k++)
        if (!used[k])
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: tensor '%s' is not part of a bert model with these "
                          "hyperparameters (%d layers)",
                          name, attn_gguf_tensor_at(g, k)->name, cfg.num_hidden_layers);
    attn_free(used);
    if (s) {
        attn_bert_model_free(m);
        return s;
    }
    *out = m;
    return ATTN_STATUS_OK;
}

attn_status attn_bert_load_gguf(const char *path, attn_bert_model **out) {
    if (!path || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "bert gguf: NULL argument");
    *out = NULL;
    attn_gguf *g;
    ATTN_TRY(attn_gguf_open(path, &g));
    attn_status s = attn_bert_from_gguf(g, out);
    attn_gguf_close(g); /* everything was converted: the model keeps nothing of the file */
    return s;
}

attn_status attn_bert_load(const char *path, attn_bert_model **out) {
    if (attn_gpt_is_gguf_path(path)) return attn_bert_load_gguf(path, out);
    return attn_bert_load_dir(path, out);
}

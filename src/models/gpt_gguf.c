/* gpt_gguf.c — decoders from GGUF files (attn_gpt.h: attn_gpt_load_gguf, attn_gpt_from_gguf,
 * attn_gpt_load): the Llama family (general.architecture "llama", "qwen2", "qwen3") and GPT-2
 * ("gpt2"), their hyperparameters from the ARCH.* metadata keys and their tensors under llama.cpp's
 * names, used where they lie in the mapped file.
 *
 * The model is the same attn_gpt_model as from a Hugging Face directory, built by the same layout
 * (gpt.c) over per-tensor sources (models-impl.h's mdl_src) instead of one parameter buffer:
 *   F32          the mapping itself (a copy only when the file's alignment leaves it misaligned
 *                for floats: general.alignment not a multiple of 4);
 *   F16, BF16    converted to float32 once (attn_quant_dequantize);
 *   quantized    (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) matrices stay quantized in the
 *                mapping: linear maps on attn_nn_linear.qw, the token embeddings as wte_q (a row
 *                dequantized per lookup: no float copy of the table), the untied head as
 *                lm_head_q; a quantized 1-D tensor (norm, bias) or GPT-2's position table is
 *                converted to float32;
 *   other types  ATTN_STATUS_UNSUPPORTED naming the tensor and its type.
 * Rotary embeddings: convert_hf_to_gguf.py permutes the rows of the llama architecture's q and k
 * weights per head so that llama.cpp rotates adjacent pairs (2i, 2i + 1); attn loads them as they
 * are and rotates with ATTN_ROPE_INTERLEAVED, which gives transformers' rotate_half results on the
 * unpermuted weights (the same scores: q and k are permuted alike; quantized rows never need to be
 * moved). qwen2 and qwen3 are not permuted: ATTN_ROPE_HALF, as from a directory. A rope_freqs
 * tensor (Llama 3.1's scaling as per-frequency divisors) divides the inverse frequencies. */
#include "attn_gguf.h"
#include "attn_gpt.h"
#include "attn_quant.h"

#include "gpt-impl.h"
#include "models-impl.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct attn_gpt_file {
    attn_gguf *g;  /* owned: closed with the model */
    float *conv;   /* the converted float32 tensors, one buffer */
    attn_quant_packed *packs; /* [n_packs] per table entry: its matrix repacked, or zeroed */
    bool *view;    /* [n_packs] or NULL: packs[i].data lies in a qkv[l] buffer (not its own) */
    int n_packs;
    attn_quant_packed *qkv; /* [n_qkv] per layer: its q, k and v packs fused (fuse_qkv), or zeroed */
    int n_qkv;
};

/* The packs and fused matrices of f (not f itself, nor its file). */
static void file_free_packs(struct attn_gpt_file *f) {
    for (int i = 0; i < f->n_packs; i++)
        if (!f->view || !f->view[i]) attn_quant_packed_free(&f->packs[i]);
    for (int l = 0; l < f->n_qkv; l++) attn_quant_packed_free(&f->qkv[l]);
    attn_free(f->packs);
    attn_free(f->view);
    attn_free(f->qkv);
    f->packs = NULL, f->view = NULL, f->qkv = NULL, f->n_packs = f->n_qkv = 0;
}

void gpt_file_free(struct attn_gpt_file *f) {
    if (!f) return;
    attn_gguf_close(f->g);
    attn_free(f->conv);
    file_free_packs(f);
    attn_free(f);
}

/* Llama family: each layer's q, k and v matrices, once repacked, moved into one buffer in that
 * order. The x8 panels of the three one after the other are the panels of the fused
 * (H·D + 2·H_kv·D, C) matrix, its rows in the proj layout's order, so a decoding step projects
 * with one product instead of three (gpt_use_packed): one parallel region, one quantization of
 * the activations, and the small k and v products' panels shared out with q's. (SmolLM2-135M
 * Q4_1, 16 rows, µs a product: q 29, k 16, v 16; the fused 35.) Each output column is computed
 * as in its own matrix: the same bits. The three packs stay usable as views into the buffer.
 * Only where the three have one type and K, row counts that are multiples of 8 (panels alone, no
 * row-layout tail) and no precomputed sums. */
static attn_status fuse_qkv(struct attn_gpt_file *f, const attn_param_info *tab, int n, int L,
                            const char *name) {
    if (!f->packs) return ATTN_STATUS_OK;
    f->qkv = attn_calloc((size_t)L * sizeof *f->qkv);
    f->view = attn_calloc((size_t)f->n_packs * sizeof *f->view);
    if (!f->qkv || !f->view) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    f->n_qkv = L;
    static const char *const part[3] = {"q", "k", "v"};
    for (int l = 0; l < L; l++) {
        attn_quant_packed *P[3] = {NULL, NULL, NULL};
        size_t bytes = 0;
        int ix[3];
        bool ok = true;
        for (int j = 0; j < 3 && ok; j++) {
            char want[96];
            snprintf(want, sizeof want, "model.layers.%d.self_attn.%s_proj.weight", l, part[j]);
            ix[j] = -1;
            for (int i = 0; i < n && ix[j] < 0; i++)
                if (!strcmp(tab[i].name, want)) ix[j] = i;
            P[j] = ix[j] >= 0 ? &f->packs[ix[j]] : NULL;
            ok = P[j] && P[j]->data && P[j]->type == P[0]->type && P[j]->K == P[0]->K &&
                 P[j]->N % 8 == 0 && !P[j]->nsum && !P[j]->scale;
            if (ok) bytes += P[j]->bytes;
        }
        if (!ok) continue;
        uint8_t *data = attn_alloc(bytes);
        if (!data) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
        attn_quant_packed F = {P[0]->type, 0, P[0]->K, bytes, data, NULL, NULL};
        for (int j = 0; j < 3; j++) {
            memcpy(data, P[j]->data, P[j]->bytes);
            attn_free(P[j]->data); /* its data only (nsum and scale are NULL) */
            P[j]->data = data;
            f->view[ix[j]] = true;
            F.N += P[j]->N;
            data += P[j]->bytes;
        }
        f->qkv[l] = F;
    }
    return ATTN_STATUS_OK;
}

/* ---- hyperparameters ------------------------------------------------------------------------ */

#define BIG (1 << 24) /* attn's limit on a size (attn_gpt.h) */

/* ARCH.key as an integer in [lo, hi] into *out; absent: *out = def when !required. Above hi is
 * ATTN_STATUS_TOO_LARGE when hi is attn's size limit (cap), else ATTN_STATUS_FORMAT. */
static attn_status meta_int(const attn_gguf *g, const char *arch, const char *key, bool required,
                            int64_t lo, int64_t hi, bool cap, int def, int *out) {
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!attn_gguf_find(g, full)) {
        if (required) return attn_gguf_get_int(g, full, &(int64_t){0}); /* "no key" */
        *out = def;
        return ATTN_STATUS_OK;
    }
    int64_t v;
    ATTN_TRY(attn_gguf_get_int(g, full, &v));
    if (v < lo || v > hi)
        return attn_fail(v > hi && cap ? ATTN_STATUS_TOO_LARGE : ATTN_STATUS_FORMAT,
                         "%s: %s = %lld is outside [%lld, %lld]", attn_gguf_name(g), full,
                         (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return ATTN_STATUS_OK;
}

/* ARCH.key as a finite float > 0 (absent: def when !required). */
static attn_status meta_pos(const attn_gguf *g, const char *arch, const char *key, bool required,
                            float def, float *out) {
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!attn_gguf_find(g, full) && !required) {
        *out = def;
        return ATTN_STATUS_OK;
    }
    double v;
    ATTN_TRY(attn_gguf_get_float(g, full, &v));
    if (!(v > 0.0) || !isfinite((float)v))
        return attn_fail(ATTN_STATUS_FORMAT, "%s: %s = %g must be a finite number > 0",
                         attn_gguf_name(g), full, v);
    *out = (float)v;
    return ATTN_STATUS_OK;
}

/* A token id key of tokenizer.ggml (absent: -1). */
static attn_status meta_id(const attn_gguf *g, const char *key, int *out) {
    *out = -1;
    if (!attn_gguf_find(g, key)) return ATTN_STATUS_OK;
    int64_t v;
    ATTN_TRY(attn_gguf_get_int(g, key, &v));
    if (v >= 0 && v <= INT32_MAX) *out = (int)v;
    return ATTN_STATUS_OK;
}

static bool has_tensor(const attn_gguf *g, const char *name) {
    return attn_gguf_find_tensor(g, name) != NULL;
}

/* The configuration from g's metadata (and, where GGUF has no key, from its tensors). */
static attn_status read_config(const attn_gguf *g, attn_gpt_config *c, bool *interleaved) {
    const char *name = attn_gguf_name(g), *arch;
    uint64_t alen;
    ATTN_TRY(attn_gguf_get_str(g, "general.architecture", &arch, &alen));
    attn_gpt_arch a;
    if (!strcmp(arch, "llama"))
        a = ATTN_GPT_ARCH_LLAMA;
    else if (!strcmp(arch, "qwen2"))
        a = ATTN_GPT_ARCH_QWEN2;
    else if (!strcmp(arch, "qwen3"))
        a = ATTN_GPT_ARCH_QWEN3;
    else if (!strcmp(arch, "gpt2"))
        a = ATTN_GPT_ARCH_GPT2;
    else
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: general.architecture \"%.64s\" is not a decoder attn runs (llama, "
                         "qwen2, qwen3, gpt2)",
                         name, arch);
    *c = attn_gpt_arch_default_config(a);
    *interleaved = a == ATTN_GPT_ARCH_LLAMA;
    ATTN_TRY(meta_int(g, arch, "block_count", true, 1, 4096, true, 0, &c->n_layer));
    ATTN_TRY(meta_int(g, arch, "embedding_length", true, 1, BIG, true, 0, &c->n_embd));
    ATTN_TRY(meta_int(g, arch, "context_length", true, 1, BIG, true, 0, &c->n_positions));
    ATTN_TRY(meta_int(g, arch, "feed_forward_length", true, 1, BIG, true, 0, &c->n_inner));
    ATTN_TRY(meta_int(g, arch, "attention.head_count", true, 1, c->n_embd, false, 0, &c->n_head));
    /* the vocabulary: ARCH.vocab_size, else the embedding table's rows */
    const attn_gguf_tensor *emb = attn_gguf_find_tensor(g, "token_embd.weight");
    if (!emb)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor 'token_embd.weight' is missing", name);
    const int64_t rows = emb->n_dims == 2 ? emb->ne[1] : 0;
    ATTN_TRY(meta_int(g, arch, "vocab_size", false, 1, BIG, true, rows > BIG ? BIG + 1 : (int)rows,
                      &c->vocab_size));
    if (c->vocab_size < 1 || c->vocab_size > BIG)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor 'token_embd.weight' has %d dimensions (ne[1] %lld): not a "
                         "(vocabulary, embedding) table",
                         name, emb->n_dims, (long long)rows);
    c->tie_word_embeddings = !has_tensor(g, "output.weight");
    ATTN_TRY(meta_id(g, "tokenizer.ggml.bos_token_id", &c->bos_token_id));
    ATTN_TRY(meta_id(g, "tokenizer.ggml.eos_token_id", &c->eos_token_id));
    int eot = -1;
    ATTN_TRY(meta_id(g, "tokenizer.ggml.eot_token_id", &eot));
    c->n_more_eos = 0;
    if (eot >= 0 && eot != c->eos_token_id) {
        if (c->eos_token_id < 0)
            c->eos_token_id = eot;
        else
            c->more_eos_token_ids[c->n_more_eos++] = eot;
    }
    c->resid_pdrop = c->embd_pdrop = c->attn_pdrop = 0.0f;
    if (a == ATTN_GPT_ARCH_GPT2) {
        if (c->n_embd % c->n_head)
            return attn_fail(ATTN_STATUS_FORMAT,
                             "%s: gpt2.attention.head_count %d does not divide "
                             "gpt2.embedding_length %d",
                             name, c->n_head, c->n_embd);
        ATTN_TRY(meta_pos(g, arch, "attention.layer_norm_epsilon", true, 0,
                          &c->layer_norm_epsilon));
        c->activation = ATTN_ACT_GELU_TANH; /* gelu_new: what llama.cpp computes for gpt2 */
        return ATTN_STATUS_OK;
    }
    ATTN_TRY(meta_int(g, arch, "attention.head_count_kv", false, 1, c->n_head, false, c->n_head,
                      &c->n_kv_head));
    if (c->n_head % c->n_kv_head)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: %s.attention.head_count_kv %d does not divide "
                         "%s.attention.head_count %d",
                         name, arch, c->n_kv_head, arch, c->n_head);
    int D = 0, Dv = 0, R = 0;
    ATTN_TRY(meta_int(g, arch, "attention.key_length", false, 2, 1 << 16, true,
                      c->n_embd / c->n_head, &D));
    ATTN_TRY(meta_int(g, arch, "attention.value_length", false, 2, 1 << 16, true, D, &Dv));
    if (Dv != D)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: %s.attention.key_length %d differs from value_length %d", name, arch,
                         D, Dv);
    if (D % 2)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: the head size %d (%s.attention.key_length, or embedding_length / "
                         "head_count) must be even for rotary embeddings",
                         name, D, arch);
    c->head_dim = D;
    ATTN_TRY(meta_int(g, arch, "rope.dimension_count", false, 2, 1 << 16, true, D, &R));
    if (R != D)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: %s.rope.dimension_count %d differs from the head size %d: "
                         "rotary embeddings on part of the head are not supported",
                         name, arch, R, D);
    ATTN_TRY(meta_pos(g, arch, "attention.layer_norm_rms_epsilon", true, 0,
                      &c->layer_norm_epsilon));
    ATTN_TRY(meta_pos(g, arch, "rope.freq_base", false, 10000.0f, &c->rope_theta));
    /* rope scaling: rope.scaling.type none / linear (rope.scaling.factor), or the older
     * rope.scale_linear */
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    const char *stype = NULL;
    if (attn_gguf_find(g, key)) ATTN_TRY(attn_gguf_get_str(g, key, &stype, NULL));
    float factor = 1.0f;
    if (stype && !strcmp(stype, "linear")) {
        ATTN_TRY(meta_pos(g, arch, "rope.scaling.factor", true, 1.0f, &factor));
    } else if (stype && strcmp(stype, "none")) {
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: %s = \"%.32s\" is not supported (none, linear)", name, key, stype);
    } else if (!stype) {
        ATTN_TRY(meta_pos(g, arch, "rope.scale_linear", false, 1.0f, &factor));
    }
    if (factor != 1.0f) {
        c->rope_scaling.type = ATTN_GPT_ROPE_LINEAR;
        c->rope_scaling.factor = factor;
    }
    c->activation = ATTN_ACT_SILU;
    c->attention_bias = a != ATTN_GPT_ARCH_QWEN2 && has_tensor(g, "blk.0.attn_q.bias");
    c->mlp_bias = a == ATTN_GPT_ARCH_LLAMA && has_tensor(g, "blk.0.ffn_gate.bias");
    /* a sliding window (Mistral's, when a converter writes ARCH.attention.sliding_window): every
     * layer sees its last W keys, as the directory's sliding_window does; none at or beyond
     * the context */
    int window = 0;
    ATTN_TRY(meta_int(g, arch, "attention.sliding_window", false, 0, BIG, false, 0, &window));
    /* (qwen2 / qwen3: transformers uses their sliding_window only with use_sliding_window, which
     * GGUF does not carry and their released models leave false: the key is not read) */
    c->sliding_window =
        a == ATTN_GPT_ARCH_LLAMA && window > 0 && window < c->n_positions ? window : 0;
    c->use_sliding_window = c->sliding_window > 0;
    if (c->sliding_window) { /* the llama architecture with a window: Mistral's composition */
        if (c->attention_bias || c->mlp_bias)
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "%s: a sliding window with q/k/v or MLP biases is not a model attn "
                             "runs (Mistral has neither)",
                             name);
        c->arch = ATTN_GPT_ARCH_MISTRAL;
    }
    return ATTN_STATUS_OK;
}

/* ---- tensor names --------------------------------------------------------------------------- */

/* llama.cpp's name of the table entry hf (attn's Hugging Face names), or false when the entry has
 * none. *conv1d: GPT-2's Conv1D weights, stored (in, out) in the table and (out, in) in GGUF. */
bool gpt_gguf_tensor_name(const char *hf, char *out, size_t cap, bool *conv1d) {
    static const char *const MAP[][2] = {
        /* the Llama family */
        {"input_layernorm", "attn_norm"},   {"self_attn.q_proj", "attn_q"},
        {"self_attn.k_proj", "attn_k"},     {"self_attn.v_proj", "attn_v"},
        {"self_attn.o_proj", "attn_output"}, {"self_attn.q_norm", "attn_q_norm"},
        {"self_attn.k_norm", "attn_k_norm"}, {"post_attention_layernorm", "ffn_norm"},
        {"mlp.gate_proj", "ffn_gate"},      {"mlp.up_proj", "ffn_up"},
        {"mlp.down_proj", "ffn_down"},
        /* GPT-2 */
        {"ln_1", "attn_norm"},              {"attn.c_attn", "attn_qkv"},
        {"attn.c_proj", "attn_output"},     {"ln_2", "ffn_norm"},
        {"mlp.c_fc", "ffn_up"},             {"mlp.c_proj", "ffn_down"},
    };
    static const char *const TOP[][2] = {
        {"model.embed_tokens", "token_embd"}, {"model.norm", "output_norm"},
        {"lm_head", "output"},                {"transformer.wte", "token_embd"},
        {"transformer.wpe", "position_embd"}, {"transformer.ln_f", "output_norm"},
    };
    *conv1d = false;
    const char *dot = strrchr(hf, '.');
    if (!dot) return false;
    const size_t stem = (size_t)(dot - hf);
    for (size_t i = 0; i < sizeof TOP / sizeof TOP[0]; i++)
        if (strlen(TOP[i][0]) == stem && !strncmp(hf, TOP[i][0], stem)) {
            snprintf(out, cap, "%s%s", TOP[i][1], dot);
            return true;
        }
    const char *p = hf;
    if (!strncmp(p, "model.layers.", 13))
        p += 13;
    else if (!strncmp(p, "transformer.h.", 14))
        p += 14;
    else
        return false;
    if (!isdigit((unsigned char)*p)) return false;
    const char *l0 = p;
    while (isdigit((unsigned char)*p)) p++;
    if (*p != '.') return false;
    const int nl = (int)(p - l0);
    p++;
    const size_t n = (size_t)(dot - p);
    for (size_t i = 0; i < sizeof MAP / sizeof MAP[0]; i++)
        if (strlen(MAP[i][0]) == n && !strncmp(p, MAP[i][0], n)) {
            snprintf(out, cap, "blk.%.*s.%s%s", nl, l0, MAP[i][1], dot);
            *conv1d = !strncmp(hf, "transformer.", 12) && !strcmp(dot, ".weight") &&
                      (!strncmp(p, "attn.c_", 7) || !strncmp(p, "mlp.c_", 6));
            return true;
        }
    return false;
}

/* ---- loading -------------------------------------------------------------------------------- */

static bool quant_kept(attn_gguf_dtype t) {
    switch (t) {
    case ATTN_GGUF_DTYPE_Q8_0:
    case ATTN_GGUF_DTYPE_Q4_0:
    case ATTN_GGUF_DTYPE_Q4_1:
    case ATTN_GGUF_DTYPE_Q5_0:
    case ATTN_GGUF_DTYPE_Q5_1:
    case ATTN_GGUF_DTYPE_Q4_K:
    case ATTN_GGUF_DTYPE_Q5_K:
    case ATTN_GGUF_DTYPE_Q6_K:
    case ATTN_GGUF_DTYPE_F16:  /* products on the half-precision values as stored: half the */
    case ATTN_GGUF_DTYPE_BF16: /* bytes of float32 per token, and no float32 copy in memory */
        return true;
    default: return false;
    }
}

/* What entry e becomes: a quantized matrix kept (*keep), or float32 data in place (*in_place)
 * or converted (neither). */
typedef struct {
    const attn_gguf_tensor *t;
    const void *data;
    bool keep, in_place, conv1d;
    size_t conv_off; /* floats into the conversion buffer */
} plan;

static attn_status plan_tensor(const attn_gguf *g, const attn_param_info *e, bool conv1d,
                               const char *gname, plan *p) {
    const char *name = attn_gguf_name(g);
    const attn_gguf_tensor *t = attn_gguf_find_tensor(g, gname);
    char want[64];
    if (e->ndim == 2)
        snprintf(want, sizeof want, "(%lld, %lld)", (long long)(conv1d ? e->shape[1] : e->shape[0]),
                 (long long)(conv1d ? e->shape[0] : e->shape[1]));
    else
        snprintf(want, sizeof want, "(%lld)", (long long)e->shape[0]);
    if (!t)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' is missing (expected shape %s)", name,
                         gname, want);
    /* GGUF's shape in PyTorch's order: (out, in) for every matrix */
    const int64_t s0 = e->ndim == 2 && conv1d ? e->shape[1] : e->shape[0];
    const int64_t s1 = e->ndim == 2 ? (conv1d ? e->shape[0] : e->shape[1]) : 0;
    if (t->n_dims != e->ndim || t->shape[0] != s0 || (e->ndim == 2 && t->shape[1] != s1)) {
        char got[96];
        if (t->n_dims == 1)
            snprintf(got, sizeof got, "(%lld)", (long long)t->shape[0]);
        else if (t->n_dims == 2)
            snprintf(got, sizeof got, "(%lld, %lld)", (long long)t->shape[0],
                     (long long)t->shape[1]);
        else
            snprintf(got, sizeof got, "%d dimensions", t->n_dims);
        return attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' has shape %s, expected %s", name,
                         gname, got, want);
    }
    memset(p, 0, sizeof *p);
    p->t = t, p->conv1d = conv1d;
    p->data = attn_gguf_tensor_data(g, t);
    if (!p->data)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: a model needs the file's tensor data in memory (attn_gguf_open or "
                         "attn_gguf_open_memory, not a reader)",
                         name);
    const bool mat = e->ndim == 2 && strcmp(gname, "position_embd.weight") != 0;
    if (t->type == ATTN_GGUF_DTYPE_F32) {
        p->in_place = ((uintptr_t)p->data & 3u) == 0;
    } else if (quant_kept(t->type)) {
        p->keep = mat;
    } else if (t->type != ATTN_GGUF_DTYPE_F16 && t->type != ATTN_GGUF_DTYPE_BF16) {
        const char *tn = attn_gguf_dtype_name(t->type);
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "%s: tensor '%s' has type %s, which attn does not compute with (F32, F16, "
                         "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)",
                         name, gname, tn ? tn : "?");
    }
    return ATTN_STATUS_OK;
}

/* The rotary tables again with inv_freq divided by rope_freqs (D/2 float32 factors). */
static attn_status apply_rope_freqs(attn_gpt_model *m, const attn_gguf *g,
                                    const attn_gguf_tensor *t) {
    const int D = attn_gpt_head_dim(&m->cfg), P = m->cfg.n_positions;
    if (t->type != ATTN_GGUF_DTYPE_F32 || t->n_dims != 1 || t->ne[0] != D / 2)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: tensor 'rope_freqs.weight' must be F32 of shape (%d)",
                         attn_gguf_name(g), D / 2);
    const uint8_t *src = attn_gguf_tensor_data(g, t);
    float *inv = attn_alloc((size_t)(D / 2) * sizeof(float));
    if (!inv || !src) {
        attn_free(inv);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gguf: out of memory");
    }
    attn_status s = attn_gpt_rope_inv_freq(&m->cfg, inv);
    for (int i = 0; i < D / 2 && !s; i++) {
        float f;
        memcpy(&f, src + 4 * (size_t)i, 4);
        if (!(f > 0.0f) || !isfinite(f))
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: rope_freqs.weight[%d] = %g must be a finite number > 0",
                          attn_gguf_name(g), i, (double)f);
        else
            inv[i] /= f;
    }
    if (!s) s = attn_rope_tables(P, D, inv, m->rope_cos, m->rope_sin);
    attn_free(inv);
    return s;
}

attn_status attn_gpt_from_gguf(attn_gguf *g, attn_gpt_model **out) {
    if (!g || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt gguf: NULL argument");
    *out = NULL;
    const char *name = attn_gguf_name(g);
    attn_gpt_config cfg;
    bool interleaved = false;
    ATTN_TRY(read_config(g, &cfg, &interleaved));
    attn_status cs = attn_gpt_config_check(&cfg);
    if (cs) { /* its message names config.json's fields: say which file */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        return attn_fail(cs, "%s: %s", name, msg);
    }
    attn_param_info *tab = NULL;
    int n = 0;
    ATTN_TRY(gpt_model_table(&cfg, &tab, &n));
    plan *pl = attn_calloc((size_t)n * sizeof *pl);
    mdl_src *src = attn_calloc((size_t)n * sizeof *src);
    bool *used = attn_calloc(attn_gguf_tensor_count(g) + 1);
    struct attn_gpt_file *file = attn_calloc(sizeof *file);
    attn_gpt_model *m = NULL;
    attn_status s = ATTN_STATUS_OK;
    if (!pl || !src || !used || !file)
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gguf: out of memory");
    /* every table entry's tensor, checked, and the floats to convert */
    size_t conv = 0;
    for (int i = 0; i < n && !s; i++) {
        char gname[160];
        bool conv1d;
        if (!gpt_gguf_tensor_name(tab[i].name, gname, sizeof gname, &conv1d)) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt gguf: no GGUF name for '%s'",
                          tab[i].name);
            break;
        }
        s = plan_tensor(g, &tab[i], conv1d, gname, &pl[i]);
        if (s) break;
        for (size_t k = 0; k < attn_gguf_tensor_count(g); k++)
            if (attn_gguf_tensor_at(g, k) == pl[i].t) used[k] = true;
        if (!pl[i].keep && !pl[i].in_place) {
            pl[i].conv_off = conv;
            conv += (size_t)tab[i].numel;
        }
    }
    /* tensors of the file the model does not have: an error, but for rope_freqs */
    const attn_gguf_tensor *freqs = NULL;
    for (size_t k = 0; k < attn_gguf_tensor_count(g) && !s; k++) {
        const attn_gguf_tensor *t = attn_gguf_tensor_at(g, k);
        if (used[k]) continue;
        if (!strcmp(t->name, "rope_freqs.weight") && attn_gpt_is_llama(&cfg)) {
            freqs = t;
            continue;
        }
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: tensor '%s' is not part of a %s model with these hyperparameters (%d "
                      "layer%s%s)",
                      name, t->name, attn_gpt_arch_name(cfg.arch), cfg.n_layer,
                      cfg.n_layer == 1 ? "" : "s", cfg.tie_word_embeddings ? ", tied embeddings" : "");
    }
    if (!s && conv) {
        file->conv = attn_alloc(conv * sizeof(float));
        if (!file->conv)
            s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY,
                          "%s: out of memory for %zu converted floats", name, conv);
    }
    for (int i = 0; i < n && !s; i++) {
        const plan *p = &pl[i];
        mdl_src *d = &src[i];
        d->transposed = p->conv1d;
        if (p->keep) {
            d->q = p->data, d->qtype = (attn_qtype)p->t->type;
            size_t rb;
            s = attn_quant_row_bytes(d->qtype, p->t->ne[0], &rb);
            /* Matrices of the types with an x8 layout are repacked (the products decode eight
             * rows at a time) and their pages in the mapping released: the copy replaces them
             * in memory. Not an untied embedding table: it is only looked up, row by row. */
            const bool table = !strcmp(tab[i].name, "model.embed_tokens.weight") ||
                               !strcmp(tab[i].name, "transformer.wte.weight");
            if (!s && attn_quant_pack_supported(d->qtype) && p->t->n_dims == 2 &&
                (!table || cfg.tie_word_embeddings)) {
                if (!file->packs) {
                    file->packs = attn_calloc((size_t)n * sizeof *file->packs);
                    if (!file->packs) {
                        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
                        break;
                    }
                    file->n_packs = n;
                }
                s = attn_quant_pack(d->qtype, (int)p->t->ne[1], (int)p->t->ne[0], d->q,
                                    &file->packs[i]);
                if (!s) {
                    d->qp = &file->packs[i];
                    attn_gguf_release_data(g, p->t);
                }
            }
        } else if (p->in_place) {
            d->f = (float *)(uintptr_t)p->data; /* read only: inference never writes weights */
        } else {
            d->f = file->conv + p->conv_off;
            if (p->t->type == ATTN_GGUF_DTYPE_F32)
                memcpy(d->f, p->data, (size_t)tab[i].numel * sizeof(float));
            else
                s = attn_quant_dequantize((attn_qtype)p->t->type, (int64_t)tab[i].numel, p->data,
                                          d->f);
        }
    }
    if (!s && attn_gpt_is_llama(&cfg)) s = fuse_qkv(file, tab, n, cfg.n_layer, name);
    if (!s) s = gpt_model_alloc_src(&cfg, src, &m);
    if (!s) {
        if (file->qkv) m->qkv_qp = file->qkv;
        /* quantized embeddings and head: not views (w.wte / w.lm_head are NULL) */
        const attn_gpt_tensor *te = attn_gpt_find_tensor(m, attn_gpt_is_llama(&cfg)
                                                                ? "model.embed_tokens.weight"
                                                                : "transformer.wte.weight");
        const attn_gpt_tensor *th = attn_gpt_find_tensor(m, "lm_head.weight");
        if (te && src[te - m->tensors].q)
            m->wte_q = src[te - m->tensors].q, m->wte_qtype = src[te - m->tensors].qtype;
        if (cfg.tie_word_embeddings) {
            m->lm_head_q = m->wte_q, m->lm_head_qtype = m->wte_qtype;
            if (te) m->lm_head_qp = m->wte_qp = src[te - m->tensors].qp;
        } else if (th && src[th - m->tensors].q) {
            m->lm_head_q = src[th - m->tensors].q, m->lm_head_qtype = src[th - m->tensors].qtype;
            m->lm_head_qp = src[th - m->tensors].qp;
        }
        for (int l = 0; l < cfg.n_layer && interleaved; l++)
            m->attn_cfg[l].rope_mode = ATTN_ROPE_INTERLEAVED;
        if (freqs) s = apply_rope_freqs(m, g, freqs);
    }
    attn_free(tab);
    attn_free(pl);
    attn_free(src);
    attn_free(used);
    if (s) {
        if (m) m->file = NULL;
        attn_gpt_model_free(m);
        if (file) {
            attn_free(file->conv);
            file_free_packs(file);
        }
        attn_free(file);
        return s;
    }
    file->g = g;
    m->file = file;
    *out = m;
    return ATTN_STATUS_OK;
}

attn_status attn_gpt_load_gguf(const char *path, attn_gpt_model **out) {
    if (!path || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt gguf: NULL argument");
    *out = NULL;
    attn_gguf *g;
    ATTN_TRY(attn_gguf_open(path, &g));
    attn_status s = attn_gpt_from_gguf(g, out);
    if (s) attn_gguf_close(g);
    return s;
}

bool attn_gpt_is_gguf_path(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

attn_status attn_gpt_load(const char *path, attn_gpt_model **out) {
    if (attn_gpt_is_gguf_path(path)) return attn_gpt_load_gguf(path, out);
    return attn_gpt_load_dir(path, out);
}

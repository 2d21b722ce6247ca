/* gpt.c — GPT-2 (attn_gpt.h) as a composition of the block layer (attn_nn.h): the parameter
 * table with Hugging Face names, GPT-2's initialization, the training run state, forward, loss
 * and backward.
 *
 * A block is two pre-norm sub-layers, x += drop(attn(ln_1(x))) and x += drop(mlp(ln_2(x))),
 * with GPT-2's Conv1D weights stored (in, out). The state keeps what the backward reads: every
 * block's input (the residual stream), the sub-layers' activations (norm outputs and statistics,
 * the fused QKV projection, the attention output and its log-sum-exp, the MLP pre-activation and
 * activation, the dropout keep bits). Rows are packed: a batch of B sequences of length T uses
 * the first B·T rows of every buffer whatever the state's capacity. */
#include "attn_gpt.h"

#include "attn_io.h"
#include "attn_train.h"
#include "gpt-impl.h"
#include "models-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- parameter layout ---------------------------------------------------------------------- */

#define NAME(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)

/* The views w over L's buffer, in GPT2LMHeadModel's tensor order (recording the table when L
 * records). Initialization as GPT-2 / nanoGPT: every matrix and both embeddings
 * normal(0, initializer_range), the two c_proj weights of each block with std / sqrt(2·n_layer),
 * biases 0, LayerNorm gains 1. */
static void layout_gpt2(const attn_gpt_config *c, mdl_layout *L, attn_gpt_weights *w) {
    const int C = c->n_embd, F = attn_gpt_inner(c), V = c->vocab_size;
    const double sd = c->initializer_range, proj_sd = sd / sqrt(2.0 * c->n_layer);
    const float eps = c->layer_norm_epsilon;
    char a[96], b[96];
    w->wte = mdl_take(L, 2, V, C, ATTN_INIT_NORMAL, sd, true, "transformer.wte.weight");
    w->wpe = mdl_take(L, 2, c->n_positions, C, ATTN_INIT_NORMAL, sd, true, "transformer.wpe.weight");
    for (int l = 0; l < c->n_layer; l++) {
        attn_gpt_block *B = &w->h[l];
        memset(B, 0, sizeof *B);
#define H(s) NAME(a, "transformer.h.%d.%s", l, s)
#define HB(s) NAME(b, "transformer.h.%d.%s", l, s)
        B->ln_1 = mdl_take_norm(L, ATTN_NORM_LAYER, C, eps, true, H("ln_1.weight"),
                                HB("ln_1.bias"));
        B->attn.qkv = mdl_take_linear(L, C, 3 * C, ATTN_NN_IN_OUT, true, ATTN_INIT_NORMAL, sd,
                                      H("attn.c_attn.weight"), HB("attn.c_attn.bias"));
        B->attn.o = mdl_take_linear(L, C, C, ATTN_NN_IN_OUT, true, ATTN_INIT_NORMAL, proj_sd,
                                    H("attn.c_proj.weight"), HB("attn.c_proj.bias"));
        B->ln_2 = mdl_take_norm(L, ATTN_NORM_LAYER, C, eps, true, H("ln_2.weight"),
                                HB("ln_2.bias"));
        B->mlp.kind = ATTN_FFN_PLAIN;
        B->mlp.act = c->activation;
        B->mlp.up = mdl_take_linear(L, C, F, ATTN_NN_IN_OUT, true, ATTN_INIT_NORMAL, sd,
                                    H("mlp.c_fc.weight"), HB("mlp.c_fc.bias"));
        B->mlp.down = mdl_take_linear(L, F, C, ATTN_NN_IN_OUT, true, ATTN_INIT_NORMAL, proj_sd,
                                      H("mlp.c_proj.weight"), HB("mlp.c_proj.bias"));
#undef H
#undef HB
    }
    w->ln_f = mdl_take_norm(L, ATTN_NORM_LAYER, C, eps, true, "transformer.ln_f.weight",
                            "transformer.ln_f.bias");
    w->lm_head = c->tie_word_embeddings
                     ? w->wte
                     : mdl_take(L, 2, V, C, ATTN_INIT_NORMAL, sd, true, "lm_head.weight");
}

/* The Llama family's views over L's buffer, in the order of attn_gpt.h's table: q, k, v adjacent
 * (one GEMM), gate before up (one GEMM). Initialization as transformers' _init_weights: every
 * matrix and the embeddings normal(0, initializer_range), biases 0, RMSNorm gains 1. */
static void layout_llama(const attn_gpt_config *c, mdl_layout *L, attn_gpt_weights *w) {
    const int C = c->n_embd, F = c->n_inner, V = c->vocab_size;
    const int HD = c->n_head * attn_gpt_head_dim(c), D = attn_gpt_head_dim(c);
    const int KD = attn_gpt_kv_heads(c) * D;
    const double sd = c->initializer_range;
    const float eps = c->layer_norm_epsilon;
    const attn_gpt_arch a = c->arch;
    const bool qkv_bias = a == ATTN_GPT_ARCH_QWEN2 || (c->attention_bias && a != ATTN_GPT_ARCH_MISTRAL);
    const bool o_bias = c->attention_bias && (a == ATTN_GPT_ARCH_LLAMA || a == ATTN_GPT_ARCH_QWEN3);
    const bool mlp_bias = c->mlp_bias && a == ATTN_GPT_ARCH_LLAMA;
    char n[112];
    w->wte = mdl_take(L, 2, V, C, ATTN_INIT_NORMAL, sd, true, "model.embed_tokens.weight");
    w->wpe = NULL;
    for (int l = 0; l < c->n_layer; l++) {
        attn_gpt_block *B = &w->h[l];
        memset(B, 0, sizeof *B);
#define W(s) NAME(n, "model.layers.%d.%s.weight", l, s)
#define LIN(in, out, s) \
    mdl_take_linear(L, in, out, ATTN_NN_OUT_IN, false, ATTN_INIT_NORMAL, sd, W(s), NULL)
#define BIAS(lin, s) \
    ((lin).b = mdl_take(L, 1, (lin).out, 0, ATTN_INIT_ZEROS, 0.0, false, \
                        "model.layers.%d.%s.bias", l, s))
        B->ln_1 = mdl_take_norm(L, ATTN_NORM_RMS, C, eps, false, W("input_layernorm"), NULL);
        /* q, k, v weights then their biases: adjacent weights (and biases) run as one GEMM */
        B->attn.q = LIN(C, HD, "self_attn.q_proj");
        B->attn.k = LIN(C, KD, "self_attn.k_proj");
        B->attn.v = LIN(C, KD, "self_attn.v_proj");
        if (qkv_bias) {
            BIAS(B->attn.q, "self_attn.q_proj");
            BIAS(B->attn.k, "self_attn.k_proj");
            BIAS(B->attn.v, "self_attn.v_proj");
        }
        if (a == ATTN_GPT_ARCH_QWEN3) {
            B->attn.q_norm = mdl_take_norm(L, ATTN_NORM_RMS, D, eps, false, W("self_attn.q_norm"),
                                           NULL);
            B->attn.k_norm = mdl_take_norm(L, ATTN_NORM_RMS, D, eps, false, W("self_attn.k_norm"),
                                           NULL);
        }
        B->attn.o = LIN(HD, C, "self_attn.o_proj");
        if (o_bias) BIAS(B->attn.o, "self_attn.o_proj");
        B->ln_2 = mdl_take_norm(L, ATTN_NORM_RMS, C, eps, false, W("post_attention_layernorm"),
                                NULL);
        B->mlp.kind = ATTN_FFN_GATED;
        B->mlp.act = c->activation;
        B->mlp.gate = LIN(C, F, "mlp.gate_proj"); /* gate then up: one GEMM */
        B->mlp.up = LIN(C, F, "mlp.up_proj");
        if (mlp_bias) {
            BIAS(B->mlp.gate, "mlp.gate_proj");
            BIAS(B->mlp.up, "mlp.up_proj");
        }
        B->mlp.down = LIN(F, C, "mlp.down_proj");
        if (mlp_bias) BIAS(B->mlp.down, "mlp.down_proj");
#undef W
#undef LIN
#undef BIAS
    }
    w->ln_f = mdl_take_norm(L, ATTN_NORM_RMS, C, eps, false, "model.norm.weight", NULL);
    w->lm_head = c->tie_word_embeddings
                     ? w->wte
                     : mdl_take(L, 2, V, C, ATTN_INIT_NORMAL, sd, true, "lm_head.weight");
}

static void layout(const attn_gpt_config *c, mdl_layout *L, attn_gpt_weights *w) {
    if (attn_gpt_is_llama(c))
        layout_llama(c, L, w);
    else
        layout_gpt2(c, L, w);
}

void gpt_layout_grads(const attn_gpt_model *m, float *grads, attn_gpt_weights *g) {
    mdl_layout L = mdl_layout_begin(grads, false);
    layout(&m->cfg, &L, g);
}

void attn_gpt_init_params(attn_gpt_model *m, uint64_t seed) {
    if (m && m->params) attn_params_init(m->tensors, m->n_tensors, m->params, seed);
}

void attn_gpt_zero_grad(attn_gpt_model *m) {
    if (m && m->grads) attn_params_zero(m->grads, m->num_params);
}

const attn_gpt_tensor *attn_gpt_find_tensor(const attn_gpt_model *m, const char *name) {
    if (!m || !name) return NULL;
    const attn_gpt_tensor *t = attn_params_find(m->tensors, m->n_tensors, name);
    if (t || strncmp(name, "transformer.", 12) == 0) return t;
    char full[128];
    snprintf(full, sizeof full, "transformer.%s", name);
    return attn_params_find(m->tensors, m->n_tensors, full);
}

void attn_gpt_model_free(attn_gpt_model *m) {
    if (!m) return;
    attn_gpt_unpack_weights(m);
    gpt_file_free(m->file);
    attn_free(m->params);
    attn_free(m->grads);
    attn_free(m->tensors);
    attn_free(m->w.h);
    attn_free(m->g.h);
    attn_free(m->attn_cfg);
    attn_free(m->rope_cos);
    attn_free(m->rope_sin);
    attn_free(m);
}

attn_status attn_gpt_alloc_grads(attn_gpt_model *m) {
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt: NULL model");
    if (m->grads) return ATTN_STATUS_OK;
    if (!m->params)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "gpt: the model was read from a GGUF file (its weights stay in the file, "
                         "some quantized): it is for inference only, no gradients");
    m->grads = attn_alloc(m->num_params * sizeof(float));
    if (m->grads) {
        attn_advise_huge_pages(m->grads, m->num_params * sizeof(float));
        memset(m->grads, 0, m->num_params * sizeof(float));
    }
    m->g.h = attn_calloc((size_t)m->cfg.n_layer * sizeof(attn_gpt_block));
    if (!m->grads || !m->g.h) {
        attn_free(m->grads);
        attn_free(m->g.h);
        m->grads = NULL;
        m->g.h = NULL;
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt: out of memory for %zu gradients",
                         m->num_params);
    }
    gpt_layout_grads(m, m->grads, &m->g);
    return ATTN_STATUS_OK;
}

/* The rotary tables of a Llama-family model: (n_positions, D/2) each. */
static attn_status gpt_rope_init(attn_gpt_model *m) {
    const attn_gpt_config *c = &m->cfg;
    if (!attn_gpt_is_llama(c)) return ATTN_STATUS_OK;
    const int D = attn_gpt_head_dim(c), P = c->n_positions;
    const size_t n = (size_t)P * (D / 2);
    float *inv = attn_alloc((size_t)(D / 2) * sizeof(float));
    m->rope_cos = attn_alloc(n * sizeof(float));
    m->rope_sin = attn_alloc(n * sizeof(float));
    attn_status s = ATTN_STATUS_OK;
    if (!inv || !m->rope_cos || !m->rope_sin)
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt: out of memory for the rotary tables");
    if (!s) s = attn_gpt_rope_inv_freq(c, inv);
    if (!s) s = attn_rope_tables(P, D, inv, m->rope_cos, m->rope_sin);
    attn_free(inv);
    return s;
}

float gpt_attn_scale(const attn_gpt_config *c, int layer) {
    if (attn_gpt_is_llama(c)) return (float)(1.0 / sqrt((double)attn_gpt_head_dim(c)));
    const int D = c->n_embd / c->n_head;
    double s = c->scale_attn_weights ? 1.0 / sqrt((double)D) : 1.0;
    if (c->scale_attn_by_inverse_layer_idx) s /= (double)(layer + 1);
    return (float)s;
}

/* gpt_model_alloc, or with src: the views over src (gpt_model_alloc_src) and no parameter
 * buffer. */
static attn_status model_alloc(const attn_gpt_config *cfg, bool grads, const mdl_src *src,
                               attn_gpt_model **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt: NULL output");
    *out = NULL;
    ATTN_TRY(attn_gpt_config_check(cfg)); /* TOO_LARGE happens here, before any allocation */
    attn_gpt_model *m = attn_calloc(sizeof *m);
    if (!m) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt: out of memory");
    m->cfg = *cfg;
    m->num_params = attn_gpt_num_params(cfg);
    const int L = cfg->n_layer;
    if (!src) m->params = attn_alloc(m->num_params * sizeof(float));
    if (m->params) attn_advise_huge_pages(m->params, m->num_params * sizeof(float));
    m->w.h = attn_calloc((size_t)L * sizeof(attn_gpt_block));
    m->attn_cfg = attn_calloc((size_t)L * sizeof *m->attn_cfg);
    mdl_layout lay = mdl_layout_begin(m->params, true);
    lay.src = src;
    if ((m->params || src) && m->w.h) layout(cfg, &lay, &m->w);
    m->tensors = lay.t, m->n_tensors = lay.n;
    if ((!m->params && !src) || !m->w.h || !m->attn_cfg || lay.oom) {
        attn_gpt_model_free(m);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt: out of memory for %zu parameters",
                         attn_gpt_num_params(cfg));
    }
    if (lay.cursor != m->num_params) { /* a layout/count mismatch is a bug; never write past */
        attn_gpt_model_free(m);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt: internal parameter count mismatch");
    }
    attn_status rs = gpt_rope_init(m);
    if (rs) {
        attn_gpt_model_free(m);
        return rs;
    }
    for (int l = 0; l < L; l++) {
        attn_nn_attn_cfg *a = &m->attn_cfg[l];
        *a = attn_nn_attn_default_cfg(cfg->n_embd, cfg->n_head);
        a->causal = true;
        a->scale = gpt_attn_scale(cfg, l);
        if (attn_gpt_is_llama(cfg)) {
            a->n_kv_head = attn_gpt_kv_heads(cfg);
            a->d_head = attn_gpt_head_dim(cfg);
            a->rope_dim = a->d_head;
            a->rope_mode = ATTN_ROPE_HALF;
            a->rope_P = cfg->n_positions;
            a->rope_cos = m->rope_cos, a->rope_sin = m->rope_sin;
            a->window = attn_gpt_layer_window(cfg, l);
        }
    }
    if (grads) {
        attn_status s = attn_gpt_alloc_grads(m);
        if (s) {
            attn_gpt_model_free(m);
            return s;
        }
    }
    *out = m;
    return ATTN_STATUS_OK;
}

attn_status gpt_model_alloc(const attn_gpt_config *cfg, bool grads, attn_gpt_model **out) {
    return model_alloc(cfg, grads, NULL, out);
}

attn_status gpt_model_table(const attn_gpt_config *cfg, attn_param_info **table, int *n) {
    *table = NULL, *n = 0;
    ATTN_TRY(attn_gpt_config_check(cfg));
    attn_gpt_weights w;
    memset(&w, 0, sizeof w);
    w.h = attn_calloc((size_t)cfg->n_layer * sizeof(attn_gpt_block));
    mdl_layout lay = mdl_layout_begin(NULL, true);
    if (w.h) layout(cfg, &lay, &w);
    attn_free(w.h);
    if (!w.h || lay.oom) {
        attn_free(lay.t);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt: out of memory for the tensor table");
    }
    *table = lay.t, *n = lay.n;
    return ATTN_STATUS_OK;
}

attn_status gpt_model_alloc_src(const attn_gpt_config *cfg, const mdl_src *src,
                                attn_gpt_model **out) {
    return model_alloc(cfg, false, src, out);
}

attn_nn_linear gpt_head(const attn_gpt_model *m, const attn_gpt_weights *w) {
    if (w == &m->w && m->lm_head_q) {
        attn_nn_linear h = attn_nn_linear_make_quant(m->lm_head_qtype, m->lm_head_q, NULL,
                                                     m->cfg.n_embd, m->cfg.vocab_size);
        h.qpacked = m->lm_head_qp;
        return h;
    }
    return attn_nn_linear_make(w->lm_head, NULL, m->cfg.n_embd, m->cfg.vocab_size,
                               ATTN_NN_OUT_IN);
}

attn_status attn_gpt_model_init(const attn_gpt_config *cfg, uint64_t seed, attn_gpt_model **out) {
    ATTN_TRY(gpt_model_alloc(cfg, true, out));
    attn_gpt_init_params(*out, seed);
    return ATTN_STATUS_OK;
}

/* ---- shared helpers ------------------------------------------------------------------------ */

void attn_gpt_dropout(uint64_t seed, uint64_t step, uint32_t site, float p, size_t n, float *x) {
    attn_encdec_dropout(seed, step, site, p, n, x);
}

attn_status gpt_check_ids(const char *what, const attn_gpt_config *c, int B, int T,
                          const int32_t *ids) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int32_t id = ids[(size_t)b * T + t];
            if (id < 0 || id >= c->vocab_size)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "%s: token id %d at (batch %d, position %d) is outside the "
                                 "vocabulary [0, %d)",
                                 what, (int)id, b, t, c->vocab_size);
        }
    return ATTN_STATUS_OK;
}

/* out (rows of B sequences, T positions each; row b·T + t) = wte[ids] + wpe[pos0 + t] (or
 * wpe[pos[r]] when pos is given). A
 * quantized table's rows are dequantized (attn_quant_dequantize: any bytes are valid blocks). */
static void embed_rows(const attn_gpt_model *m, long M, int T, int pos0, const int32_t *pos,
                       const int32_t *ids, float *out) {
    const int C = m->cfg.n_embd;
    size_t rb = 0;
    if (m->wte_q) (void)attn_quant_row_bytes(m->wte_qtype, C, &rb); /* checked at load */
#pragma omp parallel for schedule(static) if (M * C >= 65536)
    for (long r = 0; r < M; r++) {
        const int t = (int)(r % T);
        float *o = out + (size_t)r * C;
        const float *e = o;
        if (m->wte_qp) /* the packed copy: the mapping's pages stay out of memory */
            (void)attn_quant_packed_dequant_row(m->wte_qp, ids[r], o);
        else if (m->wte_q)
            (void)attn_quant_dequantize(m->wte_qtype, C,
                                        (const uint8_t *)m->wte_q + (size_t)ids[r] * rb, o);
        else
            e = m->w.wte + (size_t)ids[r] * C;
        if (!m->w.wpe) {
            if (e != o) memcpy(o, e, (size_t)C * sizeof(float));
            continue;
        }
        const float *p = m->w.wpe + (size_t)(pos ? pos[r] : pos0 + t) * C;
        for (int i = 0; i < C; i++) o[i] = e[i] + p[i];
    }
}

void gpt_embed(const attn_gpt_model *m, int B, int T, int pos0, const int32_t *ids, float *out) {
    embed_rows(m, (long)B * T, T, pos0, NULL, ids, out);
}

void gpt_embed_pos(const attn_gpt_model *m, int M, const int32_t *pos, const int32_t *ids,
                   float *out) {
    embed_rows(m, M, 1, 0, pos, ids, out);
}

/* Block l's two sub-layers over views W (weights or gradients). */
void gpt_sublayers(const attn_gpt_model *m, const attn_gpt_block *W, int l, float p_drop,
                   attn_nn_sublayer S[2]) {
    memset(S, 0, 2 * sizeof *S);
    S[0].kind = ATTN_SUB_ATTN;
    S[0].pre_norm = true;
    S[0].norm = W->ln_1;
    S[0].acfg = &m->attn_cfg[l];
    S[0].attn = W->attn;
    S[0].p_drop = p_drop;
    S[0].site = GPT_SITE_ATTN(l);
    S[1].kind = ATTN_SUB_FFN;
    S[1].pre_norm = true;
    S[1].norm = W->ln_2;
    S[1].ffn = W->mlp;
    S[1].p_drop = p_drop;
    S[1].site = GPT_SITE_MLP(l);
}

/* ---- run state ----------------------------------------------------------------------------- */

struct attn_gpt_state {
    const attn_gpt_model *model;
    attn_gpt_config cfg;
    int capB, capT;
    int B, T;
    bool has_fwd, has_loss;
    attn_nn_run run;            /* training, dropout key, precision */
    int row0;                   /* global index of the first sequence (dropout rows) */
    mdl_grad_hook grad_hook;    /* finished layers (data parallelism over ranks) */
    int32_t *ids;               /* (B, T) the last forward's ids */
    float **x;                  /* [L + 1] (M, C): x[l] block l's input, x[L] the last output */
    attn_nn_sub_acts *sub;      /* [2L] block l: 2l attention, 2l + 1 MLP */
    uint64_t *emb_mask;         /* embedding dropout keep bits */
    float *lnf, *meanf, *rstdf; /* (M, C), (M), (M) */
    float *logits;              /* (M, V); d loss / d logits after attn_gpt_loss */
    float *tmp;                 /* (M, C) branch output (dropout path) */
    float *g;                   /* (M, C) d loss / d stream */
    float *work;                /* backward scratch of a sub-layer (attn_nn_sub_work_floats) */
    attn_gpt_capture cap;
    attn_nn_attn_capture *acap; /* one layer's attention internals, or NULL */
    int acap_layer;
    attn_arena arena;           /* every buffer above */
};

static float *salloc(attn_gpt_state *st, size_t n) {
    return attn_arena_calloc(&st->arena, n * sizeof(float));
}

void attn_gpt_state_free(attn_gpt_state *st) {
    if (!st) return;
    attn_arena_free(&st->arena);
    attn_free(st);
}

attn_status attn_gpt_state_init(const attn_gpt_model *m, int B, int T, attn_gpt_state **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt state: NULL argument");
    *out = NULL;
    const attn_gpt_config *c = &m->cfg;
    if (B <= 0 || T <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt state: B and T must be > 0 (got %d, %d)", B, T);
    if (T > c->n_positions)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt state: T = %d exceeds n_positions %d",
                         T, c->n_positions);
    const int L = c->n_layer, C = c->n_embd, F = attn_gpt_inner(c), V = c->vocab_size;
    const double M = (double)B * T, D = attn_gpt_head_dim(c), H = c->n_head;
    const double W = (H + 2.0 * attn_gpt_kv_heads(c)) * D; /* q | k | v */
    const double Ff = (attn_gpt_is_llama(c) ? 3.0 : 2.0) * F;  /* the MLP's activations */
    /* An upper bound of what the state holds (before any allocation): per block the norm outputs,
     * statistics, residual streams, projections, attention output, log-sum-exp, MLP activations. */
    const double per_block = M * (C * 7.0 + 4 + W + H * D + Ff) + M * H;
    const double widest = fmax(fmax(W, Ff), (double)V);
    double total = M * C * (L + 1) + L * per_block + M * (C + 2) + M * V + M * C * 3 + M * widest;
    if (total > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)) || M * widest > INT32_MAX ||
        M > INT32_MAX)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "gpt state: B=%d T=%d needs %.3g floats, too large",
                         B, T, total);
    attn_gpt_state *st = attn_calloc(sizeof *st);
    if (!st) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt state: out of memory");
    st->model = m;
    st->cfg = *c;
    st->capB = B, st->capT = T;
    st->run = attn_nn_default_run();
    const int Mi = B * T;
    const size_t Mz = (size_t)Mi, Cz = (size_t)C;
    const size_t words = attn_nn_dropout_words(Mi, C);
    st->ids = attn_arena_calloc(&st->arena, Mz * sizeof(int32_t));
    st->x = attn_arena_calloc(&st->arena, (size_t)(L + 1) * sizeof(float *));
    st->sub = attn_arena_calloc(&st->arena, (size_t)2 * L * sizeof(attn_nn_sub_acts));
    if (st->arena.oom) goto oom;
    st->x[0] = salloc(st, Mz * Cz);
    size_t work = 0;
    for (int l = 0; l < L; l++) {
        attn_nn_sublayer S[2];
        gpt_sublayers(m, &m->w.h[l], l, c->resid_pdrop, S);
        for (int k = 0; k < 2; k++)
            mdl_sub_acts_alloc(&st->arena, &S[k], Mi, Mi, &st->sub[2 * l + k], &work);
        st->x[l + 1] = st->sub[2 * l + 1].res;
    }
    st->emb_mask = attn_arena_calloc(&st->arena, words * sizeof(uint64_t));
    st->lnf = salloc(st, Mz * Cz);
    st->meanf = salloc(st, Mz);
    st->rstdf = salloc(st, Mz);
    st->logits = salloc(st, Mz * (size_t)V);
    st->tmp = salloc(st, Mz * Cz);
    st->g = salloc(st, Mz * Cz);
    st->work = salloc(st, work);
    if (st->arena.oom) goto oom;
    *out = st;
    return ATTN_STATUS_OK;
oom:
    attn_gpt_state_free(st);
    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt state: out of memory for B=%d T=%d", B, T);
}

void attn_gpt_set_train(attn_gpt_state *st, bool training, uint64_t seed, uint64_t step) {
    if (!st) return;
    st->run.training = training;
    st->run.seed = seed;
    st->run.step = step;
}

void attn_gpt_set_capture(attn_gpt_state *st, const attn_gpt_capture *cap) {
    if (!st) return;
    if (cap)
        st->cap = *cap;
    else
        memset(&st->cap, 0, sizeof st->cap);
}

void attn_gpt_set_attn_capture(attn_gpt_state *st, int layer, attn_nn_attn_capture *cap) {
    if (!st) return;
    st->acap = cap;
    st->acap_layer = layer;
}

const float *attn_gpt_logits(const attn_gpt_state *st) {
    return st && st->has_fwd && !st->has_loss ? st->logits : NULL;
}

void gpt_state_set_grad_hook(attn_gpt_state *st, const mdl_grad_hook *h) {
    if (st && h) st->grad_hook = *h;
}

void gpt_state_set_row0(attn_gpt_state *st, int row0) {
    if (st) st->row0 = row0 > 0 ? row0 : 0;
}

attn_status attn_gpt_state_set_precision(attn_gpt_state *st, attn_precision precision) {
    if (!st) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt: NULL state");
    ATTN_TRY(attn_precision_check(precision, "gpt"));
    st->run.precision = precision;
    return ATTN_STATUS_OK;
}

/* The rows of the state's batch for dropout: sequences row0.. of T rows each. */
static attn_nn_rows rows(const attn_gpt_state *st) {
    attn_nn_rows r = {st->row0, st->T, st->T};
    return r;
}

/* The output head: logits = y · lm_headᵀ, an (V, C) nn.Linear without bias. */
static attn_nn_linear head(const attn_gpt_model *m, const attn_gpt_weights *w) {
    return gpt_head(m, w);
}

attn_status attn_gpt_forward(const attn_gpt_model *m, attn_gpt_state *st, int B, int T,
                             const int32_t *ids, float *logits_out) {
    if (!m || !st || !ids)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt forward: NULL argument");
    if (st->model != m)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt forward: the state was made for another model");
    if (B < 1 || T < 1 || B > st->capB || T > st->capT)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt forward: B=%d T=%d outside the state's capacity B<=%d T<=%d", B, T,
                         st->capB, st->capT);
    const attn_gpt_config *c = &m->cfg;
    if (st->run.training && c->attn_pdrop > 0.0f)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "gpt forward: attn_pdrop = %g (dropout on attention probabilities) is not "
                         "supported in training by the fused attention kernel; set \"attn_pdrop\": "
                         "0 in config.json",
                         (double)c->attn_pdrop);
    ATTN_TRY(gpt_check_ids("gpt forward", c, B, T, ids));
    st->has_fwd = st->has_loss = false;
    st->B = B, st->T = T;
    memcpy(st->ids, ids, (size_t)B * T * sizeof(int32_t));
    const int C = c->n_embd, V = c->vocab_size, L = c->n_layer, M = B * T;
    const size_t n = (size_t)M * C;
    const attn_nn_seqs s = attn_nn_seqs_dense(B, T, T);

    gpt_embed(m, B, T, 0, ids, st->x[0]);
    if (st->run.training && c->embd_pdrop > 0.0f)
        attn_nn_dropout_fwd(&st->run, GPT_SITE_EMB, c->embd_pdrop, rows(st), M, C, NULL, st->x[0],
                            st->x[0], st->emb_mask);
    for (int l = 0; l < L; l++) {
        attn_nn_sublayer S[2];
        gpt_sublayers(m, &m->w.h[l], l, c->resid_pdrop, S);
        float *probs = st->cap.attn_probs ? st->cap.attn_probs[l] : NULL;
        ATTN_TRY(attn_nn_sub_forward(&st->run, &S[0], &s, M, rows(st), st->x[l], NULL, NULL,
                                     &st->sub[2 * l], probs, st->tmp));
        if (st->acap && st->acap_layer == l)
            ATTN_TRY(attn_nn_attn_capture_take(st->acap, &S[0], M, M, st->x[l], NULL,
                                               &st->sub[2 * l]));
        ATTN_TRY(attn_nn_sub_forward(&st->run, &S[1], &s, M, rows(st), st->sub[2 * l].res, NULL,
                                     NULL, &st->sub[2 * l + 1], NULL, st->tmp));
    }
    ATTN_TRY(attn_nn_norm_forward(&m->w.ln_f, M, st->x[L], st->lnf, st->meanf, st->rstdf));
    const attn_nn_linear hd = head(m, &m->w);
    ATTN_TRY(attn_nn_linear_forward(&st->run, &hd, M, st->lnf, C, 0.0f, st->logits, V,
                                    ATTN_ACT_NONE));
    if (st->cap.hidden) {
        for (int l = 0; l < L; l++)
            memcpy(st->cap.hidden + (size_t)l * n, st->x[l], n * sizeof(float));
        memcpy(st->cap.hidden + (size_t)L * n, st->lnf, n * sizeof(float));
    }
    if (logits_out) memcpy(logits_out, st->logits, (size_t)M * V * sizeof(float));
    st->has_fwd = true;
    return ATTN_STATUS_OK;
}

attn_status attn_gpt_loss(const attn_gpt_model *m, attn_gpt_state *st, const int32_t *targets,
                          float grad_scale, float *loss) {
    if (!m || !st || !targets || !loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt loss: NULL argument");
    if (st->model != m || !st->has_fwd || st->has_loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt loss: needs a forward pass of this model on this state first");
    if (!isfinite(grad_scale))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt loss: grad_scale must be finite");
    const int M = st->B * st->T, V = m->cfg.vocab_size;
    ATTN_TRY(attn_cross_entropy(M, V, st->logits, targets, ATTN_GPT_IGNORE_INDEX, 0.0f, loss,
                                st->logits));
    if (grad_scale != 1.0f) {
        const size_t n = (size_t)M * V;
        float *g = st->logits;
#pragma omp parallel for schedule(static) if (n >= 65536)
        for (size_t i = 0; i < n; i++) g[i] *= grad_scale;
    }
    st->has_loss = true;
    return ATTN_STATUS_OK;
}

/* dwpe (P, C) += the sum over the batch of G (B·T, C) at each position. */
static void gpt_wpe_backward(int B, int T, int C, const float *G, float *gwpe) {
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= 65536)
    for (int t = 0; t < T; t++) {
        float *pg = gwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *row = G + ((size_t)b * T + t) * C;
            for (int i = 0; i < C; i++) pg[i] += row[i];
        }
    }
}

attn_status attn_gpt_backward(attn_gpt_model *m, attn_gpt_state *st) {
    if (!m || !st) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt backward: NULL argument");
    if (st->model != m || !st->has_loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt backward: needs attn_gpt_forward and attn_gpt_loss first");
    if (!m->grads)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "gpt backward: the model has no gradient buffer (attn_gpt_alloc_grads)");
    const attn_gpt_config *c = &m->cfg;
    const int B = st->B, T = st->T, C = c->n_embd, V = c->vocab_size, L = c->n_layer, M = B * T;
    const attn_nn_seqs s = attn_nn_seqs_dense(B, T, T);
    float *G = st->g;

    /* Logits = lnf · lm_headᵀ, then ln_f. */
    const attn_nn_linear hd = head(m, &m->w), hg = head(m, &m->g);
    ATTN_TRY(attn_nn_linear_backward(&st->run, &hd, M, st->lnf, C, st->logits, V, st->tmp, C,
                                     false, &hg));
    ATTN_TRY(attn_nn_norm_backward(&m->w.ln_f, &m->g.ln_f, M, st->x[L], st->meanf, st->rstdf,
                                   st->tmp, G, false, NULL));
    for (int l = L - 1; l >= 0; l--) {
        attn_nn_sublayer S[2], Sg[2];
        gpt_sublayers(m, &m->w.h[l], l, c->resid_pdrop, S);
        gpt_sublayers(m, &m->g.h[l], l, c->resid_pdrop, Sg);
        ATTN_TRY(attn_nn_sub_backward(&st->run, &S[1], &Sg[1], &s, M, st->sub[2 * l].res, NULL,
                                      &st->sub[2 * l + 1], G, NULL, st->work));
        ATTN_TRY(attn_nn_sub_backward(&st->run, &S[0], &Sg[0], &s, M, st->x[l], NULL,
                                      &st->sub[2 * l], G, NULL, st->work));
        /* layer l and everything after it in the buffer (ln_f, an untied head) are final */
        mdl_grad_ready(&st->grad_hook, m->g.h[l].ln_1.w);
    }
    /* Embeddings: x0 = drop(wte[id] + wpe[t]). */
    if (st->run.training && c->embd_pdrop > 0.0f)
        attn_nn_dropout_bwd(c->embd_pdrop, M, C, st->emb_mask, G, G);
    ATTN_TRY(attn_embedding_backward(M, V, C, st->ids, G, m->g.wte));
    if (m->g.wpe) gpt_wpe_backward(B, T, C, G, m->g.wpe);
    st->has_loss = false;
    st->has_fwd = false;
    return ATTN_STATUS_OK;
}

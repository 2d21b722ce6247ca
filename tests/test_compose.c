/* test_compose.c — a Llama-style decoder composed from the block layer (include/attn_nn.h) in a
 * few dozen lines of straight-line C, checked against transformers' LlamaForCausalLM
 * (tools/ref_compose.py: two tiny random models saved with save_pretrained, grouped-query and
 * multi-query heads, rope_theta 10000 and 500000, head_dim = and != hidden / heads):
 *   - the logits of a batch and the cross-entropy loss (attn_cross_entropy);
 *   - the gradient of every parameter, by the tensors' Hugging Face names;
 *   - incremental decoding with a KV cache (a prompt, then one token per call with pos0) equal to
 *     the full forward;
 * on every kernel backend this CPU can run (ref, avx2; avx512 where available).
 *
 * The composition is the section "the decoder" below: llama_blocks maps the Hugging Face tensor
 * names onto block views (weights or, with the gradient buffer, gradients), llama_forward and
 * llama_backward are the model. Loading (config.json, model.safetensors into one buffer) and the
 * activation buffers are helpers after it.
 *
 * Tolerances (float32 against the float64 model), as max|got − ref| <= rtol · max|ref| over a
 * whole tensor (worst measured over both models and the ref and avx2 backends):
 *   logits: 1e-5 (measured 4.8e-7; transformers' own float32 model: 4.0e-7);
 *   loss: 1e-5 (measured 0: the same float32 value);
 *   every parameter gradient: 1e-5 relative to its tensor's largest (measured 8.8e-7);
 *   cached decoding against the full forward of the same C model: 1e-5 (measured 3.2e-7 on avx2,
 *     0 on ref), and against the float64 model: 1e-5 (measured 4.8e-7);
 *   our rotary inv_freq against transformers' float32 one: 2.4e-7 (an ulp; measured 3.0e-8). */
#include "tu.h"

#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_nn.h"

#include <jansson.h>

#define TOL_LOGITS 1e-5
#define TOL_LOSS 1e-5
#define TOL_GRAD 1e-5
#define TOL_DECODE 1e-5

#define OK(call)                                                                                   \
    do {                                                                                           \
        attn_status st_ = (call);                                                                  \
        if (st_) fail_msg("%s: %s", #call, attn_last_error());                                     \
    } while (0)

/* Return a failed status (its message is in attn_last_error()). */
#define TRY(call)                                                                                  \
    do {                                                                                           \
        attn_status s_ = (call);                                                                   \
        if (s_) return s_;                                                                         \
    } while (0)

/* ---- a Hugging Face checkpoint in one buffer (helpers) --------------------------------------- */

typedef struct {
    int n_layer, d_model, n_head, n_kv_head, d_head, d_ff, vocab, max_pos;
    double rope_theta, rms_eps;
} llama_config;

typedef struct {
    llama_config cfg;
    int n;             /* tensors */
    char **name;       /* [n] Hugging Face names */
    size_t *off, *numel;
    int64_t (*shape)[2];
    size_t total;      /* floats of all tensors */
    float *params;     /* (total) every tensor, at off[i] */
} hf_model;

/* The tensor `name` of (out, in) (in = 0: a vector of out) inside base, a buffer laid out as
 * h->params (the parameters or their gradients). */
static float *tensor(const hf_model *h, float *base, const char *name, int out, int in) {
    for (int i = 0; i < h->n; i++)
        if (!strcmp(h->name[i], name)) {
            if (h->shape[i][0] != out || h->shape[i][1] != (in ? in : 1))
                fail_msg("%s is (%lld, %lld), expected (%d, %d)", name,
                         (long long)h->shape[i][0], (long long)h->shape[i][1], out, in);
            return base + h->off[i];
        }
    fail_msg("model.safetensors has no %s", name);
    return NULL;
}

/* ==== the decoder ============================================================================ */

typedef struct {
    int n_layer, vocab, d_model;
    float *embed;            /* (V, C) model.embed_tokens.weight */
    attn_nn_attn_cfg attn;   /* every layer's self-attention: causal, grouped-query, RoPE */
    attn_nn_sublayer *layer; /* [2L]: layer l's attention (2l) and SwiGLU (2l + 1) sub-layers */
    attn_nn_norm norm;       /* model.norm */
    attn_nn_linear lm_head;  /* (V, C), untied */
} llama;

/* What a forward keeps for the backward, over M rows. */
typedef struct {
    float *x;              /* (M, C) the embeddings: layer 0's input */
    attn_nn_sub_acts *sub; /* [2L] sub-layer i's activations; sub[i].res its output (M, C) */
    float *hn, *rstd;      /* (M, C), (M) the final norm's output and statistics */
    float *tmp, *G, *work; /* (M, C), (M, C) and sub-layer scratch for the backward */
} llama_acts;

/* Layer l's tensor "model.layers.L.WHAT.weight"; l < 0: "model.WHAT.weight". */
static const char *hf(int l, const char *what) {
    static char b[128];
    if (l < 0)
        snprintf(b, sizeof b, "model.%s.weight", what);
    else
        snprintf(b, sizeof b, "model.layers.%d.%s.weight", l, what);
    return b;
}
/* An nn.Linear without bias, in -> out, weight (out, in) named name. */
static attn_nn_linear linear(const hf_model *h, float *base, const char *name, int in, int out) {
    return attn_nn_linear_make(tensor(h, base, name, out, in), NULL, in, out, ATTN_NN_OUT_IN);
}
static attn_nn_norm rms(const hf_model *h, float *base, const char *name) {
    attn_nn_norm n = {ATTN_NORM_RMS, h->cfg.d_model, (float)h->cfg.rms_eps,
                      tensor(h, base, name, h->cfg.d_model, 0), NULL};
    return n;
}

/* The blocks over base: the parameters, or the gradient buffer for the gradients' views. */
static void llama_blocks(const hf_model *h, float *base, const attn_nn_attn_cfg *acfg, llama *m) {
    const llama_config *c = &h->cfg;
    const int C = c->d_model, F = c->d_ff, HD = c->n_head * c->d_head;
    const int KD = c->n_kv_head * c->d_head;
    m->n_layer = c->n_layer, m->vocab = c->vocab, m->d_model = C, m->attn = *acfg;
    m->embed = tensor(h, base, "model.embed_tokens.weight", c->vocab, C);
    for (int l = 0; l < c->n_layer; l++) {
        attn_nn_sublayer *a = &m->layer[2 * l], *f = &m->layer[2 * l + 1];
        memset(a, 0, 2 * sizeof *a);
        /* x + o(attention(q, k, v of RMSNorm(x))) */
        a->kind = ATTN_SUB_ATTN, a->pre_norm = true, a->acfg = &m->attn;
        a->norm = rms(h, base, hf(l, "input_layernorm"));
        a->attn.q = linear(h, base, hf(l, "self_attn.q_proj"), C, HD);
        a->attn.k = linear(h, base, hf(l, "self_attn.k_proj"), C, KD);
        a->attn.v = linear(h, base, hf(l, "self_attn.v_proj"), C, KD);
        a->attn.o = linear(h, base, hf(l, "self_attn.o_proj"), HD, C);
        /* x + down(silu(gate(n)) ⊙ up(n)), n = RMSNorm(x) */
        f->kind = ATTN_SUB_FFN, f->pre_norm = true;
        f->norm = rms(h, base, hf(l, "post_attention_layernorm"));
        f->ffn.kind = ATTN_FFN_GATED, f->ffn.act = ATTN_ACT_SILU;
        f->ffn.gate = linear(h, base, hf(l, "mlp.gate_proj"), C, F);
        f->ffn.up = linear(h, base, hf(l, "mlp.up_proj"), C, F);
        f->ffn.down = linear(h, base, hf(l, "mlp.down_proj"), F, C);
    }
    m->norm = rms(h, base, hf(-1, "norm"));
    m->lm_head = linear(h, base, "lm_head.weight", C, c->vocab);
}

/* logits (B·T, V) of ids (B, T) at positions pos0 .. pos0 + T − 1. cache NULL: a whole batch
 * (what the backward needs stays in a); else each layer appends its keys and values to
 * cache[l], which holds positions 0 .. pos0 − 1 already. */
static attn_status llama_forward(const llama *m, llama_acts *a, int B, int T, int pos0,
                                 const int32_t *ids, const attn_nn_kv *cache, float *logits) {
    const int M = B * T, C = m->d_model;
    const attn_nn_run run = attn_nn_default_run();
    attn_nn_seqs s = attn_nn_seqs_dense(B, T, T);
    s.pos0 = pos0;
    TRY(attn_embedding_forward(M, m->vocab, C, ids, m->embed, a->x));
    const float *h = a->x;
    for (int i = 0; i < 2 * m->n_layer; i++) {
        const attn_nn_kv *kv = cache && i % 2 == 0 ? &cache[i / 2] : NULL;
        TRY(attn_nn_sub_forward(&run, &m->layer[i], &s, M, attn_nn_rows_plain(T), h, NULL, kv,
                                &a->sub[i], NULL, NULL));
        h = a->sub[i].res;
    }
    TRY(attn_nn_norm_forward(&m->norm, M, h, a->hn, NULL, a->rstd));
    return attn_nn_linear_forward(&run, &m->lm_head, M, a->hn, C, 0.0f, logits, m->vocab,
                                  ATTN_ACT_NONE);
}

/* Accumulates into g's views the gradients of the last whole-batch llama_forward on a, given
 * dlogits (B·T, V) = d loss / d logits. */
static attn_status llama_backward(const llama *m, const llama *g, llama_acts *a, int B, int T,
                                  const int32_t *ids, const float *dlogits) {
    const int M = B * T, C = m->d_model, L2 = 2 * m->n_layer;
    const attn_nn_run run = attn_nn_default_run();
    const attn_nn_seqs s = attn_nn_seqs_dense(B, T, T);
    TRY(attn_nn_linear_backward(&run, &m->lm_head, M, a->hn, C, dlogits, m->vocab, a->tmp, C,
                                false, &g->lm_head));
    TRY(attn_nn_norm_backward(&m->norm, &g->norm, M, a->sub[L2 - 1].res, NULL, a->rstd, a->tmp,
                              a->G, false, NULL));
    for (int i = L2 - 1; i >= 0; i--) /* G: d loss / d sub-layer i's output, then its input */
        TRY(attn_nn_sub_backward(&run, &m->layer[i], &g->layer[i], &s, M,
                                 i ? a->sub[i - 1].res : a->x, NULL, &a->sub[i], a->G, NULL,
                                 a->work));
    return attn_embedding_backward(M, m->vocab, C, ids, a->G, g->embed);
}

/* ==== loading and buffers (helpers) ========================================================== */

static int jint(json_t *o, const char *k, int dflt) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

/* dir/config.json and dir/model.safetensors, every tensor read as float32 into one buffer. */
static void hf_load(const char *dir, hf_model *h) {
    memset(h, 0, sizeof *h);
    char path[4400];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t e;
    json_t *o = json_load_file(path, 0, &e);
    if (!o) fail_msg("%s: %s (run tools/ref_compose.py)", path, e.text);
    llama_config *c = &h->cfg;
    c->n_layer = jint(o, "num_hidden_layers", 0), c->d_model = jint(o, "hidden_size", 0);
    c->n_head = jint(o, "num_attention_heads", 0);
    c->n_kv_head = jint(o, "num_key_value_heads", c->n_head);
    c->d_head = jint(o, "head_dim", c->n_head ? c->d_model / c->n_head : 0);
    c->d_ff = jint(o, "intermediate_size", 0), c->vocab = jint(o, "vocab_size", 0);
    c->max_pos = jint(o, "max_position_embeddings", 0);
    c->rope_theta = json_number_value(json_object_get(o, "rope_theta"));
    c->rms_eps = json_number_value(json_object_get(o, "rms_norm_eps"));
    assert_true(json_is_null(json_object_get(o, "rope_scaling")));
    assert_false(json_is_true(json_object_get(o, "tie_word_embeddings")));
    json_decref(o);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    attn_st_file *f;
    OK(attn_st_open(path, &f));
    h->n = attn_st_count(f);
    h->name = calloc((size_t)h->n, sizeof *h->name);
    h->off = calloc((size_t)h->n, sizeof *h->off);
    h->numel = calloc((size_t)h->n, sizeof *h->numel);
    h->shape = calloc((size_t)h->n, sizeof *h->shape);
    for (int i = 0; i < h->n; i++) {
        const attn_st_tensor *t = attn_st_tensor_at(f, i);
        h->name[i] = strdup(t->name);
        h->off[i] = h->total, h->numel[i] = t->numel, h->total += t->numel;
        h->shape[i][0] = t->shape[0], h->shape[i][1] = t->ndim > 1 ? t->shape[1] : 1;
    }
    h->params = attn_alloc(h->total * sizeof(float));
    for (int i = 0; i < h->n; i++)
        OK(attn_st_read_f32(f, h->name[i], -1, NULL, h->params + h->off[i]));
    attn_st_close(f);
}
static void hf_free(hf_model *h) {
    for (int i = 0; i < h->n; i++) free(h->name[i]);
    free(h->name), free(h->off), free(h->numel), free(h->shape);
    attn_free(h->params);
}

/* The self-attention every layer shares; the rotary tables (max_pos, D/2) into cos_t, sin_t
 * from inv_freq[i] = 1 / theta^(2i / D), as transformers' default rope builds them. */
static attn_nn_attn_cfg llama_attn_cfg(const llama_config *c, float *inv, float *cos_t,
                                       float *sin_t) {
    attn_nn_attn_cfg a = attn_nn_attn_default_cfg(c->d_model, c->n_head);
    a.n_kv_head = c->n_kv_head, a.d_head = c->d_head, a.causal = true;
    a.rope_dim = c->d_head, a.rope_mode = ATTN_ROPE_HALF, a.rope_P = c->max_pos;
    for (int i = 0; i < c->d_head / 2; i++)
        inv[i] = (float)(1.0 / pow(c->rope_theta, 2.0 * i / c->d_head));
    OK(attn_rope_tables(c->max_pos, c->d_head, inv, cos_t, sin_t));
    a.rope_cos = cos_t, a.rope_sin = sin_t;
    OK(attn_nn_attn_cfg_check(&a, "llama"));
    return a;
}

static float *falloc(size_t n) {
    float *p = attn_calloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

/* Activations for M rows (a whole batch, or a decoding call of at most M rows). */
static void acts_init(const llama *m, int M, llama_acts *a) {
    const int C = m->d_model, L2 = 2 * m->n_layer;
    const size_t MC = (size_t)M * C;
    memset(a, 0, sizeof *a);
    a->x = falloc(MC), a->hn = falloc(MC), a->rstd = falloc(M);
    a->tmp = falloc(MC), a->G = falloc(MC);
    a->sub = calloc((size_t)L2, sizeof *a->sub);
    size_t work = 0;
    for (int i = 0; i < L2; i++) {
        const attn_nn_sublayer *S = &m->layer[i];
        attn_nn_sub_acts *A = &a->sub[i];
        A->ln = falloc(MC), A->res = falloc(MC), A->rstd = falloc(M);
        if (S->kind == ATTN_SUB_ATTN) {
            A->attn.proj = falloc(attn_nn_attn_proj_floats(S->acfg, M, M));
            A->attn.ctx = falloc((size_t)M * S->acfg->n_head * S->acfg->d_head);
            A->attn.lse = falloc((size_t)M * S->acfg->n_head);
        } else {
            attn_nn_ffn_acts_view(&S->ffn, M, true,
                                  falloc(attn_nn_ffn_acts_floats(&S->ffn, M, true)), &A->ffn);
        }
        const size_t w = attn_nn_sub_work_floats(S, M, M);
        work = w > work ? w : work;
    }
    a->work = falloc(work);
}
static void acts_free(const llama *m, llama_acts *a) {
    for (int i = 0; i < 2 * m->n_layer; i++) {
        attn_nn_sub_acts *A = &a->sub[i];
        attn_free(A->ln), attn_free(A->res), attn_free(A->rstd), attn_free(A->attn.proj);
        attn_free(A->attn.ctx), attn_free(A->attn.lse);
        if (m->layer[i].kind == ATTN_SUB_FFN) /* the buffer attn_nn_ffn_acts_view laid out */
            attn_free(m->layer[i].ffn.kind == ATTN_FFN_GATED ? A->ffn.g : A->ffn.h);
    }
    free(a->sub);
    attn_free(a->x), attn_free(a->hn), attn_free(a->rstd), attn_free(a->tmp), attn_free(a->G);
    attn_free(a->work);
}

/* ---- the reference ------------------------------------------------------------------------- */

static attn_st_file *REF;

static float *ref_f32(const char *model, const char *name, size_t *n) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", model, name);
    float *d = NULL;
    const attn_st_tensor *t;
    OK(attn_st_load_f32(REF, key, &d, &t));
    if (n) *n = t->numel;
    return d;
}
static int32_t *ref_i32(const char *model, const char *name) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", model, name);
    int32_t *d = NULL;
    OK(attn_st_load_i32(REF, key, &d, NULL));
    return d;
}

static const attn_backend ALL[] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX2, ATTN_BACKEND_AVX512};

/* One model on the current backend: forward, loss, every gradient, cached decoding. */
static void run_model(const char *name) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", tu_ref_path("compose"));
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%s", name);
    hf_model h;
    hf_load(dir, &h);
    const llama_config *c = &h.cfg;
    const int B = atoi(attn_st_metadata(REF, "B")), T = atoi(attn_st_metadata(REF, "T"));
    const int M = B * T, V = c->vocab, L2 = 2 * c->n_layer;
    const char *bn = attn_backend_name(attn_get_backend());

    float *inv = falloc((size_t)c->d_head / 2);
    float *cos_t = falloc((size_t)c->max_pos * c->d_head / 2);
    float *sin_t = falloc((size_t)c->max_pos * c->d_head / 2);
    const attn_nn_attn_cfg acfg = llama_attn_cfg(c, inv, cos_t, sin_t);
    {   /* our inv_freq against the rotary module's: within an ulp */
        float *ri = ref_f32(name, "inv_freq", NULL);
        tu_close("inv_freq vs transformers'", inv, ri, (size_t)c->d_head / 2, 2.4e-7, 0);
        attn_free(ri);
    }
    float *grads = falloc(h.total);
    llama m, g;
    m.layer = calloc((size_t)L2, sizeof *m.layer), g.layer = calloc((size_t)L2, sizeof *g.layer);
    llama_blocks(&h, h.params, &acfg, &m);
    llama_blocks(&h, grads, &acfg, &g);
    llama_acts a;
    acts_init(&m, M, &a);

    /* forward and loss */
    int32_t *ids = ref_i32(name, "ids"), *targets = ref_i32(name, "targets");
    float *logits = falloc((size_t)M * V), *full = falloc((size_t)M * V);
    OK(llama_forward(&m, &a, B, T, 0, ids, NULL, logits));
    memcpy(full, logits, (size_t)M * V * sizeof(float));
    float *rl = ref_f32(name, "logits", NULL), *rl32 = ref_f32(name, "logits_f32", NULL);
    char what[160];
    snprintf(what, sizeof what, "%s %s logits", name, bn);
    tu_close(what, logits, rl, (size_t)M * V, TOL_LOGITS, 0);
    tu_close("  (transformers' own float32 logits)", rl32, rl, (size_t)M * V, TOL_LOGITS, 0);
    float loss, *rloss = ref_f32(name, "loss", NULL);
    OK(attn_cross_entropy(M, V, logits, targets, -100, 0.0f, &loss, logits)); /* -> dlogits */
    snprintf(what, sizeof what, "%s %s loss", name, bn);
    tu_close(what, &loss, rloss, 1, TOL_LOSS, 0);

    /* backward: every parameter's gradient by its Hugging Face name */
    OK(llama_backward(&m, &g, &a, B, T, ids, logits));
    for (int i = 0; i < h.n; i++) {
        char key[200];
        snprintf(key, sizeof key, "grad.%s", h.name[i]);
        float *rg = ref_f32(name, key, NULL);
        snprintf(what, sizeof what, "%s %s d/d %s", name, bn, h.name[i]);
        tu_close(what, grads + h.off[i], rg, h.numel[i], TOL_GRAD, 0);
        attn_free(rg);
    }

    /* decoding: a prompt of 5 tokens, then one token per call, each layer's cache growing */
    const int P = 5, KD = c->n_kv_head * c->d_head;
    attn_nn_kv *kv = calloc((size_t)c->n_layer, sizeof *kv);
    for (int l = 0; l < c->n_layer; l++) {
        kv[l].B = B, kv[l].max_T = T;
        kv[l].k = falloc((size_t)B * T * KD), kv[l].v = falloc((size_t)B * T * KD);
    }
    float *dec = falloc((size_t)M * V), *step = falloc((size_t)M * V);
    int32_t *tok = calloc((size_t)M, sizeof *tok);
    for (int t0 = 0; t0 < T;) {
        const int n = t0 ? 1 : P;
        for (int b = 0; b < B; b++)
            memcpy(tok + (size_t)b * n, ids + (size_t)b * T + t0, (size_t)n * sizeof *tok);
        OK(llama_forward(&m, &a, B, n, t0, tok, kv, step));
        for (int b = 0; b < B; b++)
            memcpy(dec + ((size_t)b * T + t0) * V, step + (size_t)b * n * V,
                   (size_t)n * V * sizeof(float));
        t0 += n;
    }
    snprintf(what, sizeof what, "%s %s cached decoding vs full forward", name, bn);
    tu_close(what, dec, full, (size_t)M * V, TOL_DECODE, 0);
    snprintf(what, sizeof what, "%s %s cached decoding vs transformers", name, bn);
    tu_close(what, dec, rl, (size_t)M * V, TOL_DECODE, 0);

    for (int l = 0; l < c->n_layer; l++) attn_free(kv[l].k), attn_free(kv[l].v);
    free(kv), free(tok), attn_free(dec), attn_free(step);
    attn_free(ids), attn_free(targets), attn_free(logits), attn_free(full), attn_free(rl);
    attn_free(rl32), attn_free(rloss), attn_free(grads), attn_free(inv), attn_free(cos_t);
    attn_free(sin_t);
    acts_free(&m, &a);
    free(m.layer), free(g.layer);
    hf_free(&h);
}

static void test_llama(void **state) {
    (void)state;
    if (attn_st_open(tu_ref_path("compose.safetensors"), &REF))
        fail_msg("%s (run tools/ref_compose.py; tests/run.sh does)", attn_last_error());
    const char *models = attn_st_metadata(REF, "models");
    assert_non_null(models);
    int ran = 0;
    for (size_t bi = 0; bi < sizeof ALL / sizeof ALL[0]; bi++) {
        if (!attn_backend_available(ALL[bi])) {
            printf("  (backend %s not available on this CPU: skipped)\n",
                   attn_backend_name(ALL[bi]));
            continue;
        }
        assert_int_equal(attn_set_backend(ALL[bi]), ATTN_STATUS_OK);
        char list[512];
        snprintf(list, sizeof list, "%s", models);
        for (char *save = NULL, *nm = strtok_r(list, ",", &save); nm;
             nm = strtok_r(NULL, ",", &save))
            run_model(nm), ran++;
    }
    assert_true(ran >= 2);
    attn_set_backend(ATTN_BACKEND_AUTO);
    attn_st_close(REF);
    REF = NULL;
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llama)};
    return cmocka_run_group_tests_name("compose", tests, NULL, NULL);
}

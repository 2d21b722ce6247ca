/* encdec.c — the original Transformer encoder–decoder (attn_models.h): parameter layout, seeded
 * initialization, run state, forward, loss and backward.
 *
 * Every sub-layer (self-attention, cross-attention, feed-forward) is wrapped the same way, so the
 * forward and backward passes are two loops over a list of sub-layer descriptors (struct sublayer)
 * rather than hand-written per layer kind:
 *   post-LN:  res = x + drop(f(x));       out = ln = LN(res)
 *   pre-LN:   ln = LN(x); res = x + drop(f(ln));   out = res
 * The state keeps ln, res and the LN statistics of every sub-layer (plus what attn_mha_state and
 * the FFN need), which is everything backward reads; dropout masks are not stored but regenerated
 * from the counter-based generator. All rows are packed: a batch of B sequences of length T uses
 * the first B·T rows of each buffer whatever the state's capacity. */
#include "attn_models.h"

#include "attn_io.h"
#include "attn_kernels.h"
#include "../core/core-impl.h"

#include <errno.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- counter-based random numbers --------------------------------------------------------- */

/* SplitMix64's finalizer: a bijective 64-bit mixer. Hashing (key, index) instead of stepping a
 * sequential generator makes every draw independent of thread scheduling and of how many draws
 * came before, which is what exact resume needs. */
static inline uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t draw(uint64_t key, size_t i) {
    return mix64(key ^ ((uint64_t)i * 0xD6E8FEB86659FD93ull));
}

/* Uniform in [0, 1) with 24 random bits (all a float can hold). */
static inline double draw_unit(uint64_t key, size_t i) {
    return (double)(draw(key, i) >> 40) * (1.0 / 16777216.0);
}

/* ---- parameter layout ---------------------------------------------------------------------- */

typedef struct {
    attn_encdec_model *m;
    float *base;
    size_t cursor; /* floats used so far */
    bool record;   /* append to m->tensors (done once, for the parameter buffer) */
} builder;

static void record(builder *b, const char *name, int ndim, int64_t d0, int64_t d1, size_t off) {
    if (!b->record) return;
    attn_encdec_tensor *t = &b->m->tensors[b->m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = ndim == 2 ? d1 : 0;
    t->offset = off;
    t->numel = (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
}

static float *take(builder *b, const char *name, int ndim, int64_t d0, int64_t d1) {
    float *p = b->base + b->cursor;
    record(b, name, ndim, d0, d1, b->cursor);
    b->cursor += (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
    return p;
}

static void take_ln(builder *b, const char *prefix, float **w, float **bias) {
    char n[48];
    const int64_t C = b->m->cfg.d_model;
    snprintf(n, sizeof n, "%s.w", prefix);
    *w = take(b, n, 1, C, 0);
    snprintf(n, sizeof n, "%s.b", prefix);
    *bias = take(b, n, 1, C, 0);
}

static void take_ffn(builder *b, const char *prefix, float **w1, float **b1, float **w2,
                     float **b2) {
    char n[48];
    const int64_t C = b->m->cfg.d_model, F = b->m->cfg.d_ff;
    snprintf(n, sizeof n, "%s.ff1.w", prefix);
    *w1 = take(b, n, 2, F, C);
    snprintf(n, sizeof n, "%s.ff1.b", prefix);
    *b1 = take(b, n, 1, F, 0);
    snprintf(n, sizeof n, "%s.ff2.w", prefix);
    *w2 = take(b, n, 2, C, F);
    snprintf(n, sizeof n, "%s.ff2.b", prefix);
    *b2 = take(b, n, 1, C, 0);
}

/* One attention layer as attn_mha_weights_view lays it out (q, k, v adjacent, so the layer runs
 * a fused QKV projection), recorded as eight named tensors. */
static void take_mha(builder *b, const char *prefix, attn_mha_weights *w) {
    const int C = b->m->cfg.d_model;
    attn_mha_config mc = attn_mha_default_config(C, b->m->cfg.n_head);
    float *p = b->base + b->cursor;
    attn_mha_weights_view(&mc, p, w); /* cannot fail: the config was checked */
    static const char *const names[8] = {"w_q", "w_k", "w_v", "b_q", "b_k", "b_v", "w_o", "b_o"};
    float *ptrs[8] = {w->w_q, w->w_k, w->w_v, w->b_q, w->b_k, w->b_v, w->w_o, w->b_o};
    for (int i = 0; i < 8; i++) {
        char n[48];
        snprintf(n, sizeof n, "%s.%s", prefix, names[i]);
        bool mat = names[i][0] == 'w';
        record(b, n, mat ? 2 : 1, C, C, b->cursor + (size_t)(ptrs[i] - p));
    }
    b->cursor += attn_mha_num_params(&mc);
}

/* Lay out views w over base (recording the tensor table when rec); returns floats used. */
static size_t layout(attn_encdec_model *m, float *base, attn_encdec_weights *w, bool rec) {
    const attn_encdec_config *c = &m->cfg;
    builder b = {m, base, 0, rec};
    const int64_t C = c->d_model;
    if (c->share_embeddings) {
        w->tgt_emb = w->src_emb = take(&b, "emb", 2, c->tgt_vocab, C);
    } else {
        w->src_emb = take(&b, "src_emb", 2, c->src_vocab, C);
        w->tgt_emb = take(&b, "tgt_emb", 2, c->tgt_vocab, C);
    }
    w->enc_pos = w->dec_pos = NULL;
    if (c->positions == ATTN_ENCDEC_LEARNED) {
        w->enc_pos = take(&b, "enc_pos", 2, c->max_len, C);
        w->dec_pos = take(&b, "dec_pos", 2, c->max_len, C);
    }
    char p[16];
    for (int l = 0; l < c->n_enc_layers; l++) {
        attn_encdec_enc_layer *L = &w->enc[l];
        char n[32];
        snprintf(p, sizeof p, "enc.%d", l);
        snprintf(n, sizeof n, "%s.self_attn", p);
        take_mha(&b, n, &L->self_attn);
        snprintf(n, sizeof n, "%s.ln1", p);
        take_ln(&b, n, &L->ln1_w, &L->ln1_b);
        take_ffn(&b, p, &L->ff1_w, &L->ff1_b, &L->ff2_w, &L->ff2_b);
        snprintf(n, sizeof n, "%s.ln2", p);
        take_ln(&b, n, &L->ln2_w, &L->ln2_b);
    }
    for (int l = 0; l < c->n_dec_layers; l++) {
        attn_encdec_dec_layer *L = &w->dec[l];
        char n[32];
        snprintf(p, sizeof p, "dec.%d", l);
        snprintf(n, sizeof n, "%s.self_attn", p);
        take_mha(&b, n, &L->self_attn);
        snprintf(n, sizeof n, "%s.ln1", p);
        take_ln(&b, n, &L->ln1_w, &L->ln1_b);
        snprintf(n, sizeof n, "%s.cross_attn", p);
        take_mha(&b, n, &L->cross_attn);
        snprintf(n, sizeof n, "%s.ln2", p);
        take_ln(&b, n, &L->ln2_w, &L->ln2_b);
        take_ffn(&b, p, &L->ff1_w, &L->ff1_b, &L->ff2_w, &L->ff2_b);
        snprintf(n, sizeof n, "%s.ln3", p);
        take_ln(&b, n, &L->ln3_w, &L->ln3_b);
    }
    w->enc_ln_w = w->enc_ln_b = w->dec_ln_w = w->dec_ln_b = NULL;
    if (c->pre_ln) {
        take_ln(&b, "enc.ln_f", &w->enc_ln_w, &w->enc_ln_b);
        take_ln(&b, "dec.ln_f", &w->dec_ln_w, &w->dec_ln_b);
    }
    w->out_w = c->tie_output ? w->tgt_emb : take(&b, "out.w", 2, c->tgt_vocab, C);
    w->out_b = take(&b, "out.b", 1, c->tgt_vocab, 0);
    return b.cursor;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

void attn_encdec_init_params(attn_encdec_model *m, uint64_t seed) {
    if (!m) return;
    const double C = m->cfg.d_model;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_encdec_tensor *t = &m->tensors[i];
        float *x = m->params + t->offset;
        const char *last = strrchr(t->name, '.');
        last = last ? last + 1 : t->name;
        bool is_ln = strstr(t->name, ".ln") != NULL;
        if (t->ndim == 1) {
            /* Biases 0, LN gains 1: the usual start, identical to PyTorch's defaults. */
            float v = is_ln && strcmp(last, "w") == 0 ? 1.0f : 0.0f;
            for (size_t k = 0; k < t->numel; k++) x[k] = v;
            continue;
        }
        double bound;
        if (ends_with(t->name, "emb") || ends_with(t->name, "_pos"))
            bound = sqrt(3.0 / C); /* uniform with std 1/sqrt(C) */
        else
            bound = sqrt(6.0 / (double)(t->shape[0] + t->shape[1])); /* Xavier-uniform */
        const uint64_t key = mix64(mix64(seed) ^ (uint64_t)i);
        for (size_t k = 0; k < t->numel; k++)
            x[k] = (float)((2.0 * draw_unit(key, k) - 1.0) * bound);
    }
}

void attn_encdec_zero_grad(attn_encdec_model *m) {
    if (m && m->grads) memset(m->grads, 0, m->num_params * sizeof(float));
}

const attn_encdec_tensor *attn_encdec_find_tensor(const attn_encdec_model *m, const char *name) {
    if (!m || !name) return NULL;
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

void attn_encdec_model_free(attn_encdec_model *m) {
    if (!m) return;
    attn_free(m->params);
    attn_free(m->grads);
    attn_free(m->pos_table);
    attn_free(m->tensors);
    attn_free(m->w.enc);
    attn_free(m->w.dec);
    attn_free(m->g.enc);
    attn_free(m->g.dec);
    attn_free(m);
}

attn_status attn_encdec_model_init(const attn_encdec_config *cfg, uint64_t seed,
                                   attn_encdec_model **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec: NULL output");
    *out = NULL;
    ATTN_TRY(attn_encdec_config_check(cfg)); /* TOO_LARGE happens here, before any allocation */
    attn_encdec_model *m = attn_calloc(sizeof *m);
    if (!m) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec: out of memory");
    m->cfg = *cfg;
    m->num_params = attn_encdec_num_params(cfg);
    const int nE = cfg->n_enc_layers, nD = cfg->n_dec_layers, C = cfg->d_model;
    m->params = attn_alloc(m->num_params * sizeof(float));
    m->grads = attn_calloc(m->num_params * sizeof(float));
    m->tensors = attn_calloc((size_t)(16 * nE + 26 * nD + 16) * sizeof(attn_encdec_tensor));
    m->w.enc = attn_calloc((size_t)nE * sizeof(attn_encdec_enc_layer));
    m->g.enc = attn_calloc((size_t)nE * sizeof(attn_encdec_enc_layer));
    m->w.dec = attn_calloc((size_t)nD * sizeof(attn_encdec_dec_layer));
    m->g.dec = attn_calloc((size_t)nD * sizeof(attn_encdec_dec_layer));
    if (cfg->positions == ATTN_ENCDEC_SINUSOIDAL)
        m->pos_table = attn_alloc((size_t)cfg->max_len * C * sizeof(float));
    if (!m->params || !m->grads || !m->tensors || !m->w.enc || !m->g.enc || !m->w.dec ||
        !m->g.dec || (cfg->positions == ATTN_ENCDEC_SINUSOIDAL && !m->pos_table)) {
        attn_encdec_model_free(m);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec: out of memory for %zu parameters",
                         attn_encdec_num_params(cfg));
    }
    size_t n = layout(m, m->params, &m->w, true);
    size_t n2 = layout(m, m->grads, &m->g, false);
    if (n != m->num_params || n2 != n) { /* a layout/count mismatch is a bug; never write past */
        attn_encdec_model_free(m);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec: internal parameter count mismatch");
    }
    if (m->pos_table) {
        /* PE(t, 2i) = sin(t / 10000^(2i/C)), PE(t, 2i+1) = cos(same), in double. */
        for (int t = 0; t < cfg->max_len; t++)
            for (int i = 0; i < C; i++) {
                double ang = t / pow(10000.0, (double)(i - i % 2) / C);
                m->pos_table[(size_t)t * C + i] = (float)(i % 2 ? cos(ang) : sin(ang));
            }
    }
    attn_encdec_init_params(m, seed);
    *out = m;
    return ATTN_STATUS_OK;
}

/* ---- run state ----------------------------------------------------------------------------- */

typedef struct {
    float *ln;    /* (M, C) LN output */
    float *res;   /* (M, C) residual sum x + drop(f(.)) */
    float *mean;  /* (M) LN statistics for backward */
    float *rstd;  /* (M) */
} sub_acts;

struct attn_encdec_state {
    const attn_encdec_model *model; /* the model this state was sized for */
    attn_encdec_config cfg;
    /* The attention layers' config, built once with zeroed padding: attn_mha checks that calls
     * use the config its state was made with by comparing the bytes, padding included. */
    attn_mha_config mc;
    int capB, capTs, capTt;         /* capacity */
    int B, Ts, Tt;                  /* the last forward's sizes */
    bool has_fwd, has_loss;
    bool training;
    uint64_t seed, step;
    int32_t *src_ids, *tgt_ids;     /* (B, Ts), (B, Tt) copies of the last forward's ids */
    int32_t *src_len, *tgt_len;     /* (B) */
    float *enc_x0;                  /* (B·Ts, C) encoder input after embedding dropout */
    float *dec_x0;                  /* (B·Tt, C) decoder input */
    sub_acts *enc_sub;              /* [2·nE] */
    sub_acts *dec_sub;              /* [3·nD] */
    float **enc_u, **enc_h;         /* [nE] (B·Ts, F) FFN pre-activation (GELU only), output */
    float **dec_u, **dec_h;         /* [nD] (B·Tt, F) */
    attn_mha_state **enc_attn;      /* [nE] */
    attn_mha_state **dec_self;      /* [nD] */
    attn_mha_state **dec_cross;     /* [nD] */
    sub_acts enc_f, dec_f;          /* final LNs (pre-LN only; res unused) */
    float *logits;                  /* (B·Tt, Vt) */
    float *dlogits;                 /* (B·Tt, Vt) d loss / d logits */
    float *tmp;                     /* (max(B·Ts, B·Tt), C) sub-layer output */
    float *gbuf[4];                 /* (max(B·Ts, B·Tt), C) backward scratch; [0] is the stream */
    float *gh;                      /* (max(B·Ts, B·Tt), F) FFN backward scratch */
    float *g_enc;                   /* (B·Ts, C) d loss / d encoder output, summed over layers */
    float *g_kv;                    /* (B·Ts, C) one cross-attention's share of it */
    attn_encdec_capture cap;        /* caller's attention-capture buffers (all NULL: none) */
    attn_arena arena;               /* everything above that was attn_alloc'ed */
};

/* Allocate n floats owned by st (freed in attn_encdec_state_free). Failure sets st->arena.oom. */
static float *salloc(attn_encdec_state *st, size_t n) {
    return attn_arena_alloc(&st->arena, n * sizeof(float));
}

static void *salloc_bytes(attn_encdec_state *st, size_t nbytes) {
    return attn_arena_calloc(&st->arena, nbytes);
}

void attn_encdec_state_free(attn_encdec_state *st) {
    if (!st) return;
    const int nE = st->cfg.n_enc_layers, nD = st->cfg.n_dec_layers;
    for (int l = 0; st->enc_attn && l < nE; l++) attn_mha_state_free(st->enc_attn[l]);
    for (int l = 0; st->dec_self && l < nD; l++) attn_mha_state_free(st->dec_self[l]);
    for (int l = 0; st->dec_cross && l < nD; l++) attn_mha_state_free(st->dec_cross[l]);
    attn_arena_free(&st->arena);
    attn_free(st);
}

static void alloc_sub(attn_encdec_state *st, sub_acts *a, size_t M, size_t C, bool res) {
    a->ln = salloc(st, M * C);
    a->res = res ? salloc(st, M * C) : NULL;
    a->mean = salloc(st, M);
    a->rstd = salloc(st, M);
}

attn_status attn_encdec_state_init(const attn_encdec_model *m, int B, int Ts, int Tt,
                                   attn_encdec_state **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec: NULL argument");
    *out = NULL;
    const attn_encdec_config *c = &m->cfg;
    if (B <= 0 || Ts <= 0 || Tt <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec state: B, Ts, Tt must be > 0 (got %d, %d, %d)", B, Ts, Tt);
    if (Ts > c->max_len || Tt > c->max_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec state: lengths Ts=%d Tt=%d exceed max_len %d", Ts, Tt,
                         c->max_len);
    /* Total size in double (no overflow) before allocating anything. */
    const int nE = c->n_enc_layers, nD = c->n_dec_layers;
    const double C = c->d_model, F = c->d_ff, Ms = (double)B * Ts, Mt = (double)B * Tt;
    const double Mx = fmax(Ms, Mt);
    double total = Ms * C * (1 + 2.0 * nE * 2 + 2) + Mt * C * (1 + 3.0 * nD * 2 + 2) +
                   (Ms * nE + Mt * nD) * 2 * F + 2 * Mt * c->tgt_vocab + Mx * (5 * C + F) +
                   (Ms * nE + Mt * nD * 2) * 3 * C + Ms * 6 * C;
    if (total > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)) || Mx * fmax(C, F) > INT32_MAX ||
        Mt * c->tgt_vocab > (double)INT32_MAX * 64)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "encdec state: B=%d Ts=%d Tt=%d needs %.3g floats, too large", B, Ts, Tt,
                         total);
    attn_encdec_state *st = attn_calloc(sizeof *st);
    if (!st) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec: out of memory");
    st->model = m;
    st->cfg = *c;
    st->capB = B, st->capTs = Ts, st->capTt = Tt;
    const size_t ms = (size_t)B * Ts, mt = (size_t)B * Tt, mx = ms > mt ? ms : mt;
    const size_t Cz = (size_t)c->d_model, Fz = (size_t)c->d_ff;
    const bool gelu = c->activation == ATTN_ENCDEC_GELU;
    st->src_ids = salloc_bytes(st, ms * sizeof(int32_t));
    st->tgt_ids = salloc_bytes(st, mt * sizeof(int32_t));
    st->src_len = salloc_bytes(st, (size_t)B * sizeof(int32_t));
    st->tgt_len = salloc_bytes(st, (size_t)B * sizeof(int32_t));
    st->enc_x0 = salloc(st, ms * Cz);
    st->dec_x0 = salloc(st, mt * Cz);
    st->enc_sub = salloc_bytes(st, (size_t)2 * nE * sizeof(sub_acts));
    st->dec_sub = salloc_bytes(st, (size_t)3 * nD * sizeof(sub_acts));
    st->enc_u = salloc_bytes(st, (size_t)nE * sizeof(float *));
    st->enc_h = salloc_bytes(st, (size_t)nE * sizeof(float *));
    st->dec_u = salloc_bytes(st, (size_t)nD * sizeof(float *));
    st->dec_h = salloc_bytes(st, (size_t)nD * sizeof(float *));
    st->enc_attn = salloc_bytes(st, (size_t)nE * sizeof(attn_mha_state *));
    st->dec_self = salloc_bytes(st, (size_t)nD * sizeof(attn_mha_state *));
    st->dec_cross = salloc_bytes(st, (size_t)nD * sizeof(attn_mha_state *));
    if (st->arena.oom) goto oom;
    for (int i = 0; i < 2 * nE; i++) alloc_sub(st, &st->enc_sub[i], ms, Cz, true);
    for (int i = 0; i < 3 * nD; i++) alloc_sub(st, &st->dec_sub[i], mt, Cz, true);
    for (int l = 0; l < nE; l++) {
        st->enc_h[l] = salloc(st, ms * Fz);
        if (gelu) st->enc_u[l] = salloc(st, ms * Fz);
    }
    for (int l = 0; l < nD; l++) {
        st->dec_h[l] = salloc(st, mt * Fz);
        if (gelu) st->dec_u[l] = salloc(st, mt * Fz);
    }
    if (c->pre_ln) {
        alloc_sub(st, &st->enc_f, ms, Cz, false);
        alloc_sub(st, &st->dec_f, mt, Cz, false);
    }
    st->logits = salloc(st, mt * (size_t)c->tgt_vocab);
    st->dlogits = salloc(st, mt * (size_t)c->tgt_vocab);
    st->tmp = salloc(st, mx * Cz);
    for (int i = 0; i < 4; i++) st->gbuf[i] = salloc(st, mx * Cz);
    st->gh = salloc(st, mx * Fz);
    st->g_enc = salloc(st, ms * Cz);
    st->g_kv = salloc(st, ms * Cz);
    if (st->arena.oom) goto oom;
    memset(&st->mc, 0, sizeof st->mc);
    attn_mha_config mc = attn_mha_default_config(c->d_model, c->n_head);
    st->mc.d_model = mc.d_model, st->mc.d_kv = mc.d_kv, st->mc.n_head = mc.n_head;
    st->mc.d_head = mc.d_head, st->mc.bias = mc.bias;
    attn_status s = ATTN_STATUS_OK;
    for (int l = 0; l < nE && !s; l++)
        s = attn_mha_state_init(&st->mc, B, Ts, Ts, &st->enc_attn[l]);
    for (int l = 0; l < nD && !s; l++)
        s = attn_mha_state_init(&st->mc, B, Tt, Tt, &st->dec_self[l]);
    for (int l = 0; l < nD && !s; l++)
        s = attn_mha_state_init(&st->mc, B, Tt, Ts, &st->dec_cross[l]);
    if (s) {
        attn_encdec_state_free(st);
        return s;
    }
    *out = st;
    return ATTN_STATUS_OK;
oom:
    attn_encdec_state_free(st);
    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec state: out of memory for B=%d Ts=%d Tt=%d",
                     B, Ts, Tt);
}

void attn_encdec_set_train(attn_encdec_state *st, bool training, uint64_t seed, uint64_t step) {
    if (!st) return;
    st->training = training;
    st->seed = seed;
    st->step = step;
}

const float *attn_encdec_logits(const attn_encdec_state *st) {
    return st && st->has_fwd ? st->logits : NULL;
}

/* Dropout sites: 0 encoder embedding, 1 decoder embedding, then one per sub-layer. */
#define SITE_ENC_EMB 0u
#define SITE_DEC_EMB 1u

static bool dropping(const attn_encdec_state *st) {
    return st->training && st->cfg.dropout > 0.0f;
}

static void drop(const attn_encdec_state *st, uint32_t site, size_t n, float *x) {
    if (dropping(st)) attn_encdec_dropout(st->seed, st->step, site, st->cfg.dropout, n, x);
}

/* ---- sub-layers ------------------------------------------------------------------------- */

enum { SUB_SELF, SUB_CROSS, SUB_FFN };

typedef struct {
    int kind;
    const attn_mha_weights *aw; /* attention weights / grads */
    const attn_mha_weights *ag;
    attn_mha_state *ms;
    attn_mha_mask mask;
    int Tq, Tk;                 /* attention lengths */
    const float *ln_w, *ln_b;   /* (C) */
    float *gln_w, *gln_b;       /* (C) */
    const float *w1, *b1, *w2, *b2; /* FFN (F, C), (F), (C, F), (C) */
    float *gw1, *gb1, *gw2, *gb2;
    float *u, *h;               /* (M, F) pre-activation (GELU only) and activation */
    sub_acts *A;
    uint32_t site;
    float *probs;               /* (B, H, Tq, Tk) attention capture, or NULL */
} sublayer;

static sublayer enc_sub(const attn_encdec_model *m, attn_encdec_state *st, int l, int k) {
    sublayer S;
    memset(&S, 0, sizeof S);
    const attn_encdec_enc_layer *W = &m->w.enc[l], *G = &m->g.enc[l];
    S.A = &st->enc_sub[2 * l + k];
    S.site = 2u + (uint32_t)(2 * l + k);
    if (k == 0) {
        S.kind = SUB_SELF;
        S.aw = &W->self_attn, S.ag = &G->self_attn, S.ms = st->enc_attn[l];
        S.mask.kv_len = st->src_len; /* bidirectional, source padding hidden */
        S.Tq = S.Tk = st->Ts;
        S.probs = st->cap.enc_self ? st->cap.enc_self[l] : NULL;
        S.ln_w = W->ln1_w, S.ln_b = W->ln1_b, S.gln_w = G->ln1_w, S.gln_b = G->ln1_b;
    } else {
        S.kind = SUB_FFN;
        S.w1 = W->ff1_w, S.b1 = W->ff1_b, S.w2 = W->ff2_w, S.b2 = W->ff2_b;
        S.gw1 = G->ff1_w, S.gb1 = G->ff1_b, S.gw2 = G->ff2_w, S.gb2 = G->ff2_b;
        S.u = st->enc_u[l], S.h = st->enc_h[l];
        S.ln_w = W->ln2_w, S.ln_b = W->ln2_b, S.gln_w = G->ln2_w, S.gln_b = G->ln2_b;
    }
    return S;
}

static sublayer dec_sub(const attn_encdec_model *m, attn_encdec_state *st, int l, int k) {
    sublayer S;
    memset(&S, 0, sizeof S);
    const attn_encdec_dec_layer *W = &m->w.dec[l], *G = &m->g.dec[l];
    S.A = &st->dec_sub[3 * l + k];
    S.site = 2u + 2u * (uint32_t)st->cfg.n_enc_layers + (uint32_t)(3 * l + k);
    if (k == 0) {
        S.kind = SUB_SELF;
        S.aw = &W->self_attn, S.ag = &G->self_attn, S.ms = st->dec_self[l];
        S.mask.causal = true;
        S.mask.kv_len = st->tgt_len;
        S.Tq = S.Tk = st->Tt;
        S.probs = st->cap.dec_self ? st->cap.dec_self[l] : NULL;
        S.ln_w = W->ln1_w, S.ln_b = W->ln1_b, S.gln_w = G->ln1_w, S.gln_b = G->ln1_b;
    } else if (k == 1) {
        S.kind = SUB_CROSS;
        S.aw = &W->cross_attn, S.ag = &G->cross_attn, S.ms = st->dec_cross[l];
        S.mask.kv_len = st->src_len;
        S.Tq = st->Tt, S.Tk = st->Ts;
        S.probs = st->cap.dec_cross ? st->cap.dec_cross[l] : NULL;
        S.ln_w = W->ln2_w, S.ln_b = W->ln2_b, S.gln_w = G->ln2_w, S.gln_b = G->ln2_b;
    } else {
        S.kind = SUB_FFN;
        S.w1 = W->ff1_w, S.b1 = W->ff1_b, S.w2 = W->ff2_w, S.b2 = W->ff2_b;
        S.gw1 = G->ff1_w, S.gb1 = G->ff1_b, S.gw2 = G->ff2_w, S.gb2 = G->ff2_b;
        S.u = st->dec_u[l], S.h = st->dec_h[l];
        S.ln_w = W->ln3_w, S.ln_b = W->ln3_b, S.gln_w = G->ln3_w, S.gln_b = G->ln3_b;
    }
    return S;
}

/* y (M, C) = f(in), the sub-layer's function. kv (B·Ts, C) for cross-attention. */
static attn_status sub_run(const attn_encdec_state *st, const sublayer *S, int B, int M,
                           const float *in, const float *kv, float *y) {
    const int C = st->cfg.d_model, F = st->cfg.d_ff;
    if (S->kind != SUB_FFN)
        return attn_mha_forward(&st->mc, S->aw, S->ms, B, S->Tq, S->Tk, in,
                                S->kind == SUB_CROSS ? kv : NULL, &S->mask, y, S->probs);
    if (st->cfg.activation == ATTN_ENCDEC_RELU) {
        /* ReLU fused into the GEMM epilogue: backward recovers relu' from h (h > 0 iff u > 0). */
        ATTN_TRY(attn_gemm(false, true, M, F, C, 1.0f, in, C, S->w1, C, 0.0f, S->h, F, S->b1,
                           ATTN_ACT_RELU));
    } else {
        /* GELU's derivative needs the pre-activation, so keep u and activate separately. */
        ATTN_TRY(attn_gemm(false, true, M, F, C, 1.0f, in, C, S->w1, C, 0.0f, S->u, F, S->b1,
                           ATTN_ACT_NONE));
        ATTN_TRY(attn_act_forward(ATTN_ACT_GELU_ERF, (size_t)M * F, S->u, S->h));
    }
    return attn_gemm(false, true, M, C, F, 1.0f, S->h, F, S->w2, F, 0.0f, y, C, S->b2,
                     ATTN_ACT_NONE);
}

static attn_status sub_forward(attn_encdec_state *st, const sublayer *S, int B, int M,
                               const float *x, const float *kv) {
    const int C = st->cfg.d_model;
    const float eps = st->cfg.layer_norm_eps;
    const size_t n = (size_t)M * C;
    sub_acts *A = S->A;
    const float *in = x;
    if (st->cfg.pre_ln) {
        ATTN_TRY(attn_layernorm_forward(M, C, x, S->ln_w, S->ln_b, eps, A->ln, A->mean, A->rstd));
        in = A->ln;
    }
    ATTN_TRY(sub_run(st, S, B, M, in, kv, st->tmp));
    drop(st, S->site, n, st->tmp);
    for (size_t i = 0; i < n; i++) A->res[i] = x[i] + st->tmp[i];
    if (!st->cfg.pre_ln)
        ATTN_TRY(
            attn_layernorm_forward(M, C, A->res, S->ln_w, S->ln_b, eps, A->ln, A->mean, A->rstd));
    return ATTN_STATUS_OK;
}

/* out (cols) += column sums of a (rows, cols) */
static void colsum_add(int rows, int cols, const float *a, float *out) {
    for (int r = 0; r < rows; r++) {
        const float *row = a + (size_t)r * cols;
        for (int j = 0; j < cols; j++) out[j] += row[j];
    }
}

/* din (M, C) = d f / d in given dy (M, C); parameter gradients accumulated. */
static attn_status sub_grad(attn_encdec_state *st, const sublayer *S, int B, int M,
                            const float *in, const float *kv, const float *dy, float *din) {
    const int C = st->cfg.d_model, F = st->cfg.d_ff;
    if (S->kind == SUB_SELF)
        return attn_mha_backward(&st->mc, S->aw, S->ms, B, S->Tq, S->Tk, in, NULL, &S->mask, dy, din,
                                 NULL, S->ag);
    if (S->kind == SUB_CROSS) {
        ATTN_TRY(attn_mha_backward(&st->mc, S->aw, S->ms, B, S->Tq, S->Tk, in, kv, &S->mask, dy,
                                   din, st->g_kv, S->ag));
        /* Every decoder layer reads the same encoder output: its gradients add up. */
        const size_t n = (size_t)B * st->Ts * C;
        for (size_t i = 0; i < n; i++) st->g_enc[i] += st->g_kv[i];
        return ATTN_STATUS_OK;
    }
    float *gh = st->gh; /* (M, F) */
    ATTN_TRY(
        attn_gemm(false, false, M, F, C, 1.0f, dy, C, S->w2, F, 0.0f, gh, F, NULL, ATTN_ACT_NONE));
    ATTN_TRY(attn_gemm(true, false, C, F, M, 1.0f, dy, C, S->h, F, 1.0f, S->gw2, F, NULL,
                       ATTN_ACT_NONE));
    colsum_add(M, C, dy, S->gb2);
    if (st->cfg.activation == ATTN_ENCDEC_RELU)
        ATTN_TRY(attn_act_backward(ATTN_ACT_RELU, (size_t)M * F, S->h, gh, gh));
    else
        ATTN_TRY(attn_act_backward(ATTN_ACT_GELU_ERF, (size_t)M * F, S->u, gh, gh));
    ATTN_TRY(
        attn_gemm(true, false, F, C, M, 1.0f, gh, F, in, C, 1.0f, S->gw1, C, NULL, ATTN_ACT_NONE));
    colsum_add(M, F, gh, S->gb1);
    return attn_gemm(false, false, M, C, F, 1.0f, gh, F, S->w1, C, 0.0f, din, C, NULL,
                     ATTN_ACT_NONE);
}

/* G (M, C): in, d loss / d (sub-layer's stream output); out, d loss / d x (its stream input). */
static attn_status sub_backward(attn_encdec_state *st, const sublayer *S, int B, int M,
                                const float *x, const float *kv, float *G) {
    const int C = st->cfg.d_model;
    const size_t n = (size_t)M * C;
    const bool pre = st->cfg.pre_ln;
    sub_acts *A = S->A;
    float *s1 = st->gbuf[1], *s2 = st->gbuf[2], *s3 = st->gbuf[3];
    const float *in = pre ? A->ln : x;
    float *dres = G;
    if (!pre) {
        ATTN_TRY(attn_layernorm_backward(M, C, A->res, S->ln_w, A->mean, A->rstd, G, s1, S->gln_w,
                                         S->gln_b));
        dres = s1;
    }
    const float *dsub = dres;
    if (dropping(st)) {
        memcpy(s2, dres, n * sizeof(float));
        drop(st, S->site, n, s2); /* same mask as forward: the generator is a pure function */
        dsub = s2;
    }
    ATTN_TRY(sub_grad(st, S, B, M, in, kv, dsub, s3));
    if (!pre) {
        for (size_t i = 0; i < n; i++) G[i] = s1[i] + s3[i];
    } else {
        ATTN_TRY(attn_layernorm_backward(M, C, x, S->ln_w, A->mean, A->rstd, s3, s1, S->gln_w,
                                         S->gln_b));
        for (size_t i = 0; i < n; i++) G[i] += s1[i];
    }
    return ATTN_STATUS_OK;
}

/* ---- embeddings -------------------------------------------------------------------------- */

/* out (B·T, C) = drop(table[ids] · sqrt(C) + pos[t]). */
static attn_status embed(attn_encdec_state *st, const char *which, const float *table, int V,
                         const float *pos, const int32_t *ids, int B, int T, uint32_t site,
                         float *out) {
    const int C = st->cfg.d_model;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int32_t id = ids[(size_t)b * T + t];
            if (id < 0 || id >= V)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "encdec forward: %s id %d at (batch %d, position %d) is outside "
                                 "the vocabulary [0, %d)",
                                 which, (int)id, b, t, V);
        }
    ATTN_TRY(attn_embedding_forward(B * T, V, C, ids, table, out));
    const float scale = (float)sqrt((double)C);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *row = out + ((size_t)b * T + t) * C;
            const float *p = pos + (size_t)t * C;
            for (int i = 0; i < C; i++) row[i] = row[i] * scale + p[i];
        }
    drop(st, site, (size_t)B * T * C, out);
    return ATTN_STATUS_OK;
}

/* G (B·T, C) = d loss / d embed output (consumed). */
static attn_status embed_backward(attn_encdec_state *st, float *gtable, int V, float *gpos,
                                  const int32_t *ids, int B, int T, uint32_t site, float *G) {
    const int C = st->cfg.d_model;
    const size_t n = (size_t)B * T * C;
    drop(st, site, n, G);
    if (gpos)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const float *row = G + ((size_t)b * T + t) * C;
                float *p = gpos + (size_t)t * C;
                for (int i = 0; i < C; i++) p[i] += row[i];
            }
    const float scale = (float)sqrt((double)C);
    for (size_t i = 0; i < n; i++) G[i] *= scale;
    return attn_embedding_backward(B * T, V, C, ids, G, gtable);
}

/* ---- forward, loss, backward ----------------------------------------------------------- */

static const float *enc_input(const attn_encdec_state *st, int l, int k) {
    if (l == 0 && k == 0) return st->enc_x0;
    int i = 2 * l + k - 1;
    return st->cfg.pre_ln ? st->enc_sub[i].res : st->enc_sub[i].ln;
}

static const float *dec_input(const attn_encdec_state *st, int l, int k) {
    if (l == 0 && k == 0) return st->dec_x0;
    int i = 3 * l + k - 1;
    return st->cfg.pre_ln ? st->dec_sub[i].res : st->dec_sub[i].ln;
}

/* The encoder's output (B·Ts, C) after the last forward. */
static const float *enc_output(const attn_encdec_state *st) {
    return st->cfg.pre_ln ? st->enc_f.ln : enc_input(st, st->cfg.n_enc_layers, 0);
}

static const float *dec_output(const attn_encdec_state *st) {
    return st->cfg.pre_ln ? st->dec_f.ln : dec_input(st, st->cfg.n_dec_layers, 0);
}

static attn_status check_lens(const char *which, const int32_t *len, int B, int T) {
    for (int b = 0; b < B; b++)
        if (len[b] < 1 || len[b] > T)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "encdec forward: %s_len[%d] = %d outside [1, %d]", which, b,
                             (int)len[b], T);
    return ATTN_STATUS_OK;
}

/* The encoder over the ids and lengths already copied into st (st->B, st->Ts); the output is
 * enc_output(st). Shared by attn_encdec_forward and attn_encdec_encode so that decoding sees
 * exactly the memory training computes. */
static attn_status run_encoder(const attn_encdec_model *m, attn_encdec_state *st) {
    const attn_encdec_config *c = &m->cfg;
    const int B = st->B, Ts = st->Ts, C = c->d_model, Ms = B * Ts;
    ATTN_TRY(embed(st, "source", m->w.src_emb, c->src_vocab,
                   m->w.enc_pos ? m->w.enc_pos : m->pos_table, st->src_ids, B, Ts, SITE_ENC_EMB,
                   st->enc_x0));
    for (int l = 0; l < c->n_enc_layers; l++)
        for (int k = 0; k < 2; k++) {
            sublayer S = enc_sub(m, st, l, k);
            ATTN_TRY(sub_forward(st, &S, B, Ms, enc_input(st, l, k), NULL));
        }
    if (c->pre_ln)
        ATTN_TRY(attn_layernorm_forward(Ms, C, enc_input(st, c->n_enc_layers, 0), m->w.enc_ln_w,
                                        m->w.enc_ln_b, c->layer_norm_eps, st->enc_f.ln,
                                        st->enc_f.mean, st->enc_f.rstd));
    return ATTN_STATUS_OK;
}

attn_status attn_encdec_encode(const attn_encdec_model *m, attn_encdec_state *st, int B, int Ts,
                               const int32_t *src_ids, const int32_t *src_len, float *enc_out) {
    if (!m || !st || !src_ids || !src_len || !enc_out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec encode: NULL argument");
    if (st->model != m)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec encode: the state was made for another model");
    if (B < 1 || Ts < 1 || B > st->capB || Ts > st->capTs)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec encode: B=%d Ts=%d outside the state's capacity B<=%d Ts<=%d", B,
                         Ts, st->capB, st->capTs);
    ATTN_TRY(check_lens("src", src_len, B, Ts));
    /* The decoder half of the state no longer matches this encoder output: no loss/backward. */
    st->has_fwd = st->has_loss = false;
    st->B = B, st->Ts = Ts;
    memcpy(st->src_ids, src_ids, (size_t)B * Ts * sizeof(int32_t));
    memcpy(st->src_len, src_len, (size_t)B * sizeof(int32_t));
    ATTN_TRY(run_encoder(m, st));
    memcpy(enc_out, enc_output(st), (size_t)B * Ts * m->cfg.d_model * sizeof(float));
    return ATTN_STATUS_OK;
}

attn_status attn_encdec_forward(const attn_encdec_model *m, attn_encdec_state *st, int B, int Ts,
                                int Tt, const int32_t *src_ids, const int32_t *src_len,
                                const int32_t *tgt_in, const int32_t *tgt_len,
                                float *logits_out) {
    if (!m || !st || !src_ids || !src_len || !tgt_in || !tgt_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec forward: NULL argument");
    if (st->model != m)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec forward: the state was made for another model");
    const attn_encdec_config *c = &m->cfg;
    if (Ts > c->max_len || Tt > c->max_len)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec forward: lengths Ts=%d Tt=%d exceed max_len %d", Ts, Tt,
                         c->max_len);
    if (B < 1 || Ts < 1 || Tt < 1 || B > st->capB || Ts > st->capTs || Tt > st->capTt)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec forward: B=%d Ts=%d Tt=%d outside the state's capacity B<=%d "
                         "Ts<=%d Tt<=%d",
                         B, Ts, Tt, st->capB, st->capTs, st->capTt);
    ATTN_TRY(check_lens("src", src_len, B, Ts));
    ATTN_TRY(check_lens("tgt", tgt_len, B, Tt));
    st->has_fwd = st->has_loss = false;
    st->B = B, st->Ts = Ts, st->Tt = Tt;
    memcpy(st->src_ids, src_ids, (size_t)B * Ts * sizeof(int32_t));
    memcpy(st->tgt_ids, tgt_in, (size_t)B * Tt * sizeof(int32_t));
    memcpy(st->src_len, src_len, (size_t)B * sizeof(int32_t));
    memcpy(st->tgt_len, tgt_len, (size_t)B * sizeof(int32_t));
    const int C = c->d_model, Mt = B * Tt;
    const float eps = c->layer_norm_eps;

    ATTN_TRY(run_encoder(m, st));
    const float *memory = enc_output(st);

    /* Decoder. */
    ATTN_TRY(embed(st, "target", m->w.tgt_emb, c->tgt_vocab,
                   m->w.dec_pos ? m->w.dec_pos : m->pos_table, st->tgt_ids, B, Tt, SITE_DEC_EMB,
                   st->dec_x0));
    for (int l = 0; l < c->n_dec_layers; l++)
        for (int k = 0; k < 3; k++) {
            sublayer S = dec_sub(m, st, l, k);
            ATTN_TRY(sub_forward(st, &S, B, Mt, dec_input(st, l, k), memory));
        }
    if (c->pre_ln)
        ATTN_TRY(attn_layernorm_forward(Mt, C, dec_input(st, c->n_dec_layers, 0), m->w.dec_ln_w,
                                        m->w.dec_ln_b, eps, st->dec_f.ln, st->dec_f.mean,
                                        st->dec_f.rstd));

    /* Output projection (Mt, Vt). */
    ATTN_TRY(attn_gemm(false, true, Mt, c->tgt_vocab, C, 1.0f, dec_output(st), C, m->w.out_w, C,
                       0.0f, st->logits, c->tgt_vocab, m->w.out_b, ATTN_ACT_NONE));
    if (logits_out)
        memcpy(logits_out, st->logits, (size_t)Mt * c->tgt_vocab * sizeof(float));
    st->has_fwd = true;
    return ATTN_STATUS_OK;
}

attn_status attn_encdec_loss(const attn_encdec_model *m, attn_encdec_state *st,
                             const int32_t *targets, float label_smoothing, float *loss) {
    if (!m || !st || !targets || !loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec loss: NULL argument");
    if (st->model != m || !st->has_fwd)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec loss: no forward pass of this model on this state");
    ATTN_TRY(attn_cross_entropy(st->B * st->Tt, m->cfg.tgt_vocab, st->logits, targets,
                                m->cfg.pad_id, label_smoothing, loss, st->dlogits));
    st->has_loss = true;
    return ATTN_STATUS_OK;
}

attn_status attn_encdec_backward(attn_encdec_model *m, attn_encdec_state *st) {
    if (!m || !st) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec backward: NULL argument");
    if (st->model != m || !st->has_loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec backward: needs attn_encdec_forward and attn_encdec_loss first");
    const attn_encdec_config *c = &m->cfg;
    const int B = st->B, Ts = st->Ts, Tt = st->Tt, C = c->d_model, V = c->tgt_vocab;
    const int Ms = B * Ts, Mt = B * Tt;
    float *G = st->gbuf[0];

    /* Output projection: G = dlogits · W_out; dW_out += dlogitsᵀ · y; db_out += colsum. */
    const float *y = dec_output(st);
    ATTN_TRY(attn_gemm(false, false, Mt, C, V, 1.0f, st->dlogits, V, m->w.out_w, C, 0.0f, G, C,
                       NULL, ATTN_ACT_NONE));
    ATTN_TRY(attn_gemm(true, false, V, C, Mt, 1.0f, st->dlogits, V, y, C, 1.0f, m->g.out_w, C, NULL,
                       ATTN_ACT_NONE));
    colsum_add(Mt, V, st->dlogits, m->g.out_b);
    if (c->pre_ln) {
        ATTN_TRY(attn_layernorm_backward(Mt, C, dec_input(st, c->n_dec_layers, 0), m->w.dec_ln_w,
                                         st->dec_f.mean, st->dec_f.rstd, G, st->gbuf[1],
                                         m->g.dec_ln_w, m->g.dec_ln_b));
        memcpy(G, st->gbuf[1], (size_t)Mt * C * sizeof(float));
    }

    /* Decoder, last sub-layer first; the cross-attentions add into g_enc. */
    const float *memory = enc_output(st);
    memset(st->g_enc, 0, (size_t)Ms * C * sizeof(float));
    for (int l = c->n_dec_layers - 1; l >= 0; l--)
        for (int k = 2; k >= 0; k--) {
            sublayer S = dec_sub(m, st, l, k);
            ATTN_TRY(sub_backward(st, &S, B, Mt, dec_input(st, l, k), memory, G));
        }
    ATTN_TRY(
        embed_backward(st, m->g.tgt_emb, V, m->g.dec_pos, st->tgt_ids, B, Tt, SITE_DEC_EMB, G));

    /* Encoder. */
    if (c->pre_ln) {
        ATTN_TRY(attn_layernorm_backward(Ms, C, enc_input(st, c->n_enc_layers, 0), m->w.enc_ln_w,
                                         st->enc_f.mean, st->enc_f.rstd, st->g_enc, G,
                                         m->g.enc_ln_w, m->g.enc_ln_b));
    } else {
        memcpy(G, st->g_enc, (size_t)Ms * C * sizeof(float));
    }
    for (int l = c->n_enc_layers - 1; l >= 0; l--)
        for (int k = 1; k >= 0; k--) {
            sublayer S = enc_sub(m, st, l, k);
            ATTN_TRY(sub_backward(st, &S, B, Ms, enc_input(st, l, k), NULL, G));
        }
    ATTN_TRY(embed_backward(st, m->g.src_emb, c->src_vocab, m->g.enc_pos, st->src_ids, B, Ts,
                            SITE_ENC_EMB, G));
    st->has_loss = false;
    return ATTN_STATUS_OK;
}

/* ---- model directory ------------------------------------------------------------------------ */

/* DIR/name into buf; false (with an error recorded) when it does not fit. */
static bool dir_path(char *buf, size_t n, const char *dir, const char *name, const char *what) {
    int k = snprintf(buf, n, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= n) {
        attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec %s: directory path too long: %s", what,
                  dir);
        return false;
    }
    return true;
}

attn_status attn_encdec_save_dir(const attn_encdec_model *m, const char *dir) {
    if (!m || !dir || !*dir)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec save: NULL argument");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return attn_fail(ATTN_STATUS_IO, "encdec save: cannot create directory %s: %s", dir,
                         strerror(errno));
    char path[4096];
    /* Weights first, then the config: a reader that finds a config beside an old weight file
     * fails its shape checks loudly rather than loading half-updated weights silently. */
    if (!dir_path(path, sizeof path, dir, "model.safetensors", "save"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    attn_st_entry *e = attn_calloc((size_t)m->n_tensors * sizeof *e);
    if (!e) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec save: out of memory");
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_encdec_tensor *t = &m->tensors[i];
        e[i].name = t->name;
        e[i].dtype = ATTN_DTYPE_F32;
        e[i].ndim = t->ndim;
        e[i].shape[0] = t->shape[0];
        e[i].shape[1] = t->shape[1];
        e[i].data = m->params + t->offset;
    }
    static const char *const meta[] = {"format", "attn-encdec", NULL};
    attn_status s = attn_st_save(path, e, m->n_tensors, meta);
    attn_free(e);
    ATTN_TRY(s);
    if (!dir_path(path, sizeof path, dir, "config.json", "save"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    return attn_encdec_config_save(path, &m->cfg);
}

attn_status attn_encdec_load_dir(const char *dir, attn_encdec_model **out) {
    if (!dir || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec load: NULL argument");
    *out = NULL;
    char path[4096];
    if (!dir_path(path, sizeof path, dir, "config.json", "load"))
        return ATTN_STATUS_INVALID_ARGUMENT;
    attn_encdec_config cfg;
    ATTN_TRY(attn_encdec_config_load(path, &cfg)); /* names the file and field */
    attn_encdec_model *m;
    ATTN_TRY(attn_encdec_model_init(&cfg, 0, &m));
    if (!dir_path(path, sizeof path, dir, "model.safetensors", "load")) {
        attn_encdec_model_free(m);
        return ATTN_STATUS_INVALID_ARGUMENT;
    }
    attn_st_file *f;
    attn_status s = attn_st_open(path, &f);
    if (s) {
        attn_encdec_model_free(m);
        return s;
    }
    /* Every tensor of the table must be present with its exact shape ... */
    for (int i = 0; i < m->n_tensors && !s; i++) {
        const attn_encdec_tensor *t = &m->tensors[i];
        if (!attn_st_find(f, t->name)) {
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: tensor '%s' is missing (the model in config.json needs it)", path,
                          t->name);
            break;
        }
        s = attn_st_read_f32(f, t->name, t->ndim, t->shape, m->params + t->offset);
    }
    /* ... and nothing else may be there: a stray tensor means the file belongs to another
     * configuration (say, untied output weights loaded as tied), which must not pass silently. */
    if (!s) {
        char extra[512] = "";
        size_t used = 0;
        int n_extra = 0;
        for (int i = 0; i < attn_st_count(f); i++) {
            const char *name = attn_st_tensor_at(f, i)->name;
            if (attn_encdec_find_tensor(m, name)) continue;
            if (n_extra++ < 8 && used < sizeof extra - 1) {
                int k = snprintf(extra + used, sizeof extra - used, "%s'%s'", used ? ", " : "",
                                 name);
                if (k > 0) used = ATTN_MIN(sizeof extra - 1, used + (size_t)k);
            }
        }
        if (n_extra)
            s = attn_fail(ATTN_STATUS_FORMAT,
                          "%s: %d tensor(s) not in the model of config.json: %s%s", path, n_extra,
                          extra, n_extra > 8 ? ", ..." : "");
    }
    attn_st_close(f);
    if (s) {
        attn_encdec_model_free(m);
        return s;
    }
    *out = m;
    return ATTN_STATUS_OK;
}

void attn_encdec_set_capture(attn_encdec_state *st, const attn_encdec_capture *cap) {
    if (!st) return;
    if (cap)
        st->cap = *cap;
    else
        memset(&st->cap, 0, sizeof st->cap);
}

/* ---- data-parallel training step ------------------------------------------------------------- */

/* Replica r of a trainer: a shallow copy of the model that shares its parameters (and tables) but
 * accumulates gradients into its own buffer, plus a run state and its sub-batch. */
typedef struct {
    attn_encdec_model view;  /* params/w/tensors/pos_table borrowed; grads/g.enc/g.dec owned */
    attn_encdec_state *st;
    int32_t *src, *src_len;  /* (capB, capTs), (capB) */
    int32_t *tin, *tout;     /* (capB, capTt) */
    int32_t *tgt_len;        /* (capB) */
    int B, Ts, Tt;           /* this step's sub-batch */
    double weight;           /* its share of the batch's counted targets */
    float loss;
    attn_status status;
    char err[512];
} replica;

struct attn_encdec_trainer {
    attn_encdec_model *m;
    int n;                   /* replicas (threads) */
    int capB, capTs, capTt;
    replica *r;              /* [n]; unused when n == 1 (the model and st1 are used directly) */
    attn_encdec_state *st1;  /* n == 1: the plain path */
};

static void replica_free(replica *r) {
    attn_encdec_state_free(r->st);
    attn_free(r->view.grads);
    attn_free(r->view.g.enc);
    attn_free(r->view.g.dec);
    attn_free(r->src), attn_free(r->src_len), attn_free(r->tin), attn_free(r->tout);
    attn_free(r->tgt_len);
}

void attn_encdec_trainer_free(attn_encdec_trainer *t) {
    if (!t) return;
    attn_encdec_state_free(t->st1);
    for (int i = 0; t->r && i < t->n; i++) replica_free(&t->r[i]);
    attn_free(t->r);
    attn_free(t);
}

attn_status attn_encdec_trainer_init(attn_encdec_model *m, int B, int Ts, int Tt, int n_replicas,
                                     attn_encdec_trainer **out) {
    if (!m || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec trainer: NULL argument");
    *out = NULL;
    if (n_replicas < 1 || n_replicas > 256)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec trainer: replicas must be 1..256 (got %d)", n_replicas);
    if (n_replicas > B) n_replicas = B > 0 ? B : 1;
    attn_encdec_trainer *t = attn_calloc(sizeof *t);
    if (!t) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec trainer: out of memory");
    t->m = m, t->n = n_replicas, t->capB = B, t->capTs = Ts, t->capTt = Tt;
    attn_status s = ATTN_STATUS_OK;
    if (t->n == 1) {
        s = attn_encdec_state_init(m, B, Ts, Tt, &t->st1);
    } else {
        t->r = attn_calloc((size_t)t->n * sizeof *t->r);
        if (!t->r) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec trainer: out of memory");
        const int nE = m->cfg.n_enc_layers, nD = m->cfg.n_dec_layers;
        for (int i = 0; i < t->n && !s; i++) {
            replica *r = &t->r[i];
            r->view = *m;
            r->view.grads = attn_calloc(m->num_params * sizeof(float));
            r->view.g.enc = attn_calloc((size_t)nE * sizeof(attn_encdec_enc_layer));
            r->view.g.dec = attn_calloc((size_t)nD * sizeof(attn_encdec_dec_layer));
            /* A replica may get all rows but one's share; size it for the whole batch. */
            r->src = attn_alloc((size_t)B * Ts * sizeof(int32_t));
            r->src_len = attn_alloc((size_t)B * sizeof(int32_t));
            r->tin = attn_alloc((size_t)B * Tt * sizeof(int32_t));
            r->tout = attn_alloc((size_t)B * Tt * sizeof(int32_t));
            r->tgt_len = attn_alloc((size_t)B * sizeof(int32_t));
            if (!r->view.grads || !r->view.g.enc || !r->view.g.dec || !r->src || !r->src_len ||
                !r->tin || !r->tout || !r->tgt_len) {
                s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "encdec trainer: out of memory");
                break;
            }
            layout(&r->view, r->view.grads, &r->view.g, false);
            s = attn_encdec_state_init(&r->view, B, Ts, Tt, &r->st);
        }
    }
    if (s) {
        attn_encdec_trainer_free(t);
        return s;
    }
    *out = t;
    return ATTN_STATUS_OK;
}

int attn_encdec_trainer_replicas(const attn_encdec_trainer *t) { return t ? t->n : 0; }

/* Forward, loss and backward of replica r's sub-batch; errors stay in r. */
static void replica_step(replica *r, bool training, uint64_t seed, uint64_t step, int index,
                         float label_smoothing) {
    attn_encdec_model *v = &r->view;
    /* Each replica's dropout stream differs (replica 0 keeps the caller's seed). */
    attn_encdec_set_train(r->st, training, seed + (uint64_t)index * 0x9E3779B97F4A7C15ull, step);
    attn_status s = attn_encdec_forward(v, r->st, r->B, r->Ts, r->Tt, r->src, r->src_len, r->tin,
                                        r->tgt_len, NULL);
    if (!s) s = attn_encdec_loss(v, r->st, r->tout, label_smoothing, &r->loss);
    if (!s) {
        memset(v->grads, 0, v->num_params * sizeof(float));
        s = attn_encdec_backward(v, r->st);
    }
    r->status = s;
    if (s) snprintf(r->err, sizeof r->err, "%s", attn_last_error());
}

attn_status attn_encdec_train_step(attn_encdec_trainer *t, bool training, uint64_t seed,
                                   uint64_t step, int B, int Ts, int Tt, const int32_t *src_ids,
                                   const int32_t *src_len, const int32_t *tgt_in,
                                   const int32_t *tgt_len, const int32_t *targets,
                                   float label_smoothing, float *loss) {
    if (!t || !src_ids || !src_len || !tgt_in || !tgt_len || !targets || !loss)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "encdec train step: NULL argument");
    if (B < 1 || Ts < 1 || Tt < 1 || B > t->capB || Ts > t->capTs || Tt > t->capTt)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "encdec train step: batch %d x %d x %d exceeds the trainer's capacity "
                         "%d x %d x %d",
                         B, Ts, Tt, t->capB, t->capTs, t->capTt);
    attn_encdec_model *m = t->m;
    if (t->n == 1) {
        attn_encdec_set_train(t->st1, training, seed, step);
        ATTN_TRY(
            attn_encdec_forward(m, t->st1, B, Ts, Tt, src_ids, src_len, tgt_in, tgt_len, NULL));
        ATTN_TRY(attn_encdec_loss(m, t->st1, targets, label_smoothing, loss));
        return attn_encdec_backward(m, t->st1);
    }
    for (int b = 0; b < B; b++)
        if (src_len[b] < 1 || src_len[b] > Ts || tgt_len[b] < 1 || tgt_len[b] > Tt)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "encdec train step: row %d has lengths %d / %d outside 1..%d / 1..%d",
                             b, (int)src_len[b], (int)tgt_len[b], Ts, Tt);
    /* Split the rows into contiguous runs of about equal work (source + target tokens). */
    const int n = ATTN_MIN(t->n, B);
    /* Two replicas: the split point that minimizes the larger replica's padded work, a run of r
     * rows costing r·(a·max Ts + b·max Tt) with a, b the multiply-adds per source and per target
     * position (the attention's T² terms are a few percent here and left out). Splitting by
     * token counts alone left one replica idle up to ~20% of a step when the lengths differ. */
    int split2 = -1;
    if (n == 2 && B >= 2) {
        const attn_encdec_config *c = &m->cfg;
        const double C = c->d_model, F = c->d_ff;
        const double a = c->n_enc_layers * (4 * C * C + 2 * C * F) + c->n_dec_layers * 2 * C * C;
        const double bt = c->n_dec_layers * (6 * C * C + 2 * C * F) + C * c->tgt_vocab;
        /* Suffix maxima in replica 1's length arrays (capacity capB; filled later). */
        int32_t *sts = t->r[1].src_len, *stt = t->r[1].tgt_len;
        int32_t ms = 0, mt = 0;
        for (int b = B - 1; b >= 0; b--) {
            ms = ATTN_MAX(ms, src_len[b]), mt = ATTN_MAX(mt, tgt_len[b]);
            sts[b] = ms, stt[b] = mt;
        }
        double best = INFINITY;
        ms = 0, mt = 0;
        for (int b1 = 1; b1 < B; b1++) {
            ms = ATTN_MAX(ms, src_len[b1 - 1]), mt = ATTN_MAX(mt, tgt_len[b1 - 1]);
            const double c0 = b1 * (a * ms + bt * mt);
            const double c1 = (B - b1) * (a * sts[b1] + bt * stt[b1]);
            const double w = c0 > c1 ? c0 : c1;
            if (w < best) best = w, split2 = b1;
        }
    }
    double total = 0;
    for (int b = 0; b < B; b++) total += (double)src_len[b] + tgt_len[b];
    int b0 = 0;
    double acc = 0;
    const int32_t pad = m->cfg.pad_id;
    double counted = 0;
    for (int i = 0; i < n; i++) {
        replica *r = &t->r[i];
        int b1 = b0;
        if (i == n - 1) {
            b1 = B;
        } else if (split2 > 0) {
            b1 = split2;
        } else {
            const double goal = total * (i + 1) / n;
            while (b1 < B - (n - 1 - i) && (b1 == b0 || acc + (double)src_len[b1] + tgt_len[b1] <= goal)) {
                acc += (double)src_len[b1] + tgt_len[b1];
                b1++;
            }
        }
        r->B = b1 - b0, r->Ts = 1, r->Tt = 1;
        for (int b = b0; b < b1; b++) {
            r->Ts = ATTN_MAX(r->Ts, src_len[b]);
            r->Tt = ATTN_MAX(r->Tt, tgt_len[b]);
        }
        double cnt = 0;
        for (int b = b0; b < b1; b++) {
            const int j = b - b0;
            memcpy(r->src + (size_t)j * r->Ts, src_ids + (size_t)b * Ts,
                   (size_t)r->Ts * sizeof(int32_t));
            memcpy(r->tin + (size_t)j * r->Tt, tgt_in + (size_t)b * Tt,
                   (size_t)r->Tt * sizeof(int32_t));
            memcpy(r->tout + (size_t)j * r->Tt, targets + (size_t)b * Tt,
                   (size_t)r->Tt * sizeof(int32_t));
            r->src_len[j] = src_len[b], r->tgt_len[j] = tgt_len[b];
            for (int k = 0; k < r->Tt; k++) cnt += r->tout[(size_t)j * r->Tt + k] != pad;
        }
        r->weight = cnt;
        counted += cnt;
        b0 = b1;
    }
    for (int i = n; i < t->n; i++) t->r[i].B = 0;
    if (n == 1) {
        /* Not inside a one-thread region: the kernels' own regions nested in one would get a
         * fresh team of new threads on every call. */
        replica_step(&t->r[0], training, seed, step, 0, label_smoothing);
    } else {
#ifdef _OPENMP
#pragma omp parallel num_threads(n)
#endif
        {
            int i = 0;
#ifdef _OPENMP
            i = omp_get_thread_num();
#endif
            for (; i < n; i += n) replica_step(&t->r[i], training, seed, step, i, label_smoothing);
        }
    }
    for (int i = 0; i < n; i++)
        if (t->r[i].status) return attn_fail(t->r[i].status, "%s", t->r[i].err);
    /* The batch's mean loss and its gradient: replica i's mean weighted by its share of the
     * counted targets. */
    double l = 0;
    for (int i = 0; i < n; i++) {
        t->r[i].weight = counted > 0 ? t->r[i].weight / counted : 0;
        l += t->r[i].weight * t->r[i].loss;
    }
    *loss = (float)l;
    const size_t P = m->num_params;
    float *g = m->grads;
    const long nchunk = (long)((P + 16383) / 16384);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nchunk > 1)
#endif
    for (long c = 0; c < nchunk; c++) {
        const size_t a = (size_t)c * 16384, e = ATTN_MIN(P, a + 16384);
        for (int i = 0; i < n; i++) {
            const float w = (float)t->r[i].weight;
            const float *gi = t->r[i].view.grads;
            if (w == 0.0f) continue;
            for (size_t k = a; k < e; k++) g[k] += w * gi[k];
        }
    }
    return ATTN_STATUS_OK;
}

/* attention.c — the attention sub-layer's function (attn_nn.h): projections, per-head q/k
 * RMSNorms, rotary embeddings, the fused attention kernel (masks, sliding window, grouped-query
 * heads, score bias, KV cache), the output projection; and the backward pass.
 *
 * Buffer layout (why: the kernel reads heads straight out of the projection rows, so nothing is
 * ever transposed):
 *   self-attention:  proj (Mq, W), W = (H + 2·H_kv)·D, each row q | k | v; one GEMM when the
 *                    projections are one fused map or adjacent nn.Linear weights;
 *   cross-attention: proj = q (Mq, H·D) followed by k | v (Mk, 2·H_kv·D);
 *   ctx (Mq, H·D)    the attention output before the output projection.
 * With a KV cache the new keys and values are copied into the cache rows of their positions and
 * the queries attend over the cache (batch stride max_T rows), so a decoding step never copies
 * the past.
 * q/k norms run on the RMSNorm kernel over rows of D, which must be contiguous: each of q and k
 * is gathered out of proj into ctx (free until the kernel writes it; H_kv·D <= H·D), normalized
 * there and scattered back — so evaluation needs no memory beyond proj and ctx. Training keeps
 * the gathered pre-norm rows and their rstd (acts qk, qk_rstd); the backward gathers dq, dk the
 * same way into dctx (free once the kernel's backward has run).
 * Variable-length rows (BERT's packed sequences) run the kernel once per sequence, the sequences
 * spread over threads. */
#include "nn-impl.h"
#include "attn_quant.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

attn_nn_attn_cfg attn_nn_attn_default_cfg(int d_model, int n_head) {
    attn_nn_attn_cfg c;
    memset(&c, 0, sizeof c);
    c.d_model = c.d_kv = d_model;
    c.n_head = c.n_kv_head = n_head;
    c.d_head = n_head > 0 ? d_model / n_head : 0;
    return c;
}

attn_nn_seqs attn_nn_seqs_dense(int B, int Tq, int Tk) {
    attn_nn_seqs s;
    memset(&s, 0, sizeof s);
    s.B = B, s.Tq = Tq, s.Tk = Tk;
    return s;
}

attn_status attn_nn_attn_cfg_check(const attn_nn_attn_cfg *c, const char *what) {
    if (!what) what = "attention";
    if (!c) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: NULL configuration", what);
    if (c->d_model <= 0 || c->d_kv <= 0 || c->n_head <= 0 || c->d_head <= 0 || c->n_kv_head <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "%s: sizes must be > 0 (d_model=%d d_kv=%d n_head=%d n_kv_head=%d "
                         "d_head=%d)",
                         what, c->d_model, c->d_kv, c->n_head, c->n_kv_head, c->d_head);
    if (c->n_head % c->n_kv_head != 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "%s: n_kv_head = %d does not divide n_head = %d", what, c->n_kv_head,
                         c->n_head);
    const double W = ((double)c->n_head + 2.0 * c->n_kv_head) * c->d_head;
    if (W > INT32_MAX / 4 || W * ATTN_MAX(c->d_model, c->d_kv) > 1e12)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "%s: n_head=%d x d_head=%d is too large", what,
                         c->n_head, c->d_head);
    if (c->window < 0 || (c->window > 0 && (c->cross || !c->causal)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "%s: sliding window %d: must be >= 0, and > 0 only for causal "
                         "self-attention",
                         what, c->window);
    if (c->rope_dim) {
        if (c->cross)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "%s: rotary embeddings apply to self-attention only", what);
        if (c->rope_dim < 2 || c->rope_dim % 2 || c->rope_dim > c->d_head)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "%s: rotary dimension %d must be even and in [2, d_head = %d]", what,
                             c->rope_dim, c->d_head);
        if (c->rope_mode != ATTN_ROPE_HALF && c->rope_mode != ATTN_ROPE_INTERLEAVED)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: unknown rope mode %d", what,
                             (int)c->rope_mode);
        if (!c->rope_cos || !c->rope_sin || c->rope_P <= 0)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: rotary embeddings need tables",
                             what);
    }
    return ATTN_STATUS_OK;
}

typedef struct {
    int C, Ckv, H, Hk, D, HD, KD, W;
} geom;

static geom geometry(const attn_nn_attn_cfg *c) {
    geom g;
    g.C = c->d_model, g.Ckv = c->d_kv, g.H = c->n_head, g.Hk = c->n_kv_head, g.D = c->d_head;
    g.HD = g.H * g.D, g.KD = g.Hk * g.D;
    g.W = g.HD + 2 * g.KD;
    return g;
}

/* The row stride of a cache. */
static int kv_ld(const attn_nn_kv *c, const geom *g) { return c->ld > 0 ? c->ld : g->KD; }

int attn_nn_kv_ldkt(int max_T) { return (max_T + 16 + 15) / 16 * 16; }

/* Key row (KD) of position t of cache sequence b into the transposed keys, when kept. */
static void kt_put(const attn_nn_kv *c, const geom *g, int b, int t, const float *krow) {
    if (!c->kt) return;
    float *dst = c->kt + (size_t)b * g->KD * c->ldkt + t;
    for (int i = 0; i < g->KD; i++) dst[(size_t)i * c->ldkt] = krow[i];
}

/* Key row krow and value row vrow (KD floats each) of sequence b at position t, into the cache
 * (and its transposed keys); rounded to binary16 with their halves kept when the cache is f16. */
static void kv_put(const attn_nn_kv *c, const geom *g, int b, int t, const float *krow,
                   const float *vrow) {
    const size_t at = ((size_t)b * c->max_T + t) * kv_ld(c, g);
    float *kd = c->k + at, *vd = c->v + at;
    if (!c->f16) {
        memcpy(kd, krow, (size_t)g->KD * sizeof(float));
        memcpy(vd, vrow, (size_t)g->KD * sizeof(float));
        kt_put(c, g, b, t, krow);
        return;
    }
    uint16_t *kth = c->kt16 ? c->kt16 + (size_t)b * g->KD * c->ldkt + t : NULL;
    enum { CHUNK = 256 };
    uint16_t hk[CHUNK]; /* a chunk of the key's halves, for the transposed copy */
    for (int i0 = 0; i0 < g->KD; i0 += CHUNK) {
        const int nb = ATTN_MIN(CHUNK, g->KD - i0);
        attn_quant_f32_to_f16_n((size_t)nb, krow + i0, kth ? hk : NULL, kd + i0);
        for (int i = 0; kth && i < nb; i++) kth[(size_t)(i0 + i) * c->ldkt] = hk[i];
    }
    attn_quant_f32_to_f16_n((size_t)g->KD, vrow, c->v16 ? c->v16 + at : NULL, vd);
    kt_put(c, g, b, t, kd);
}

/* The kernel reads the cache's transposed keys, when kept, and its binary16 copies (sequence b0
 * first). */
static void kt_params(attn_attention_params *p, const attn_nn_kv *c, const geom *g, int b0) {
    if (c->f16 && c->v16) p->v16 = c->v16 + (size_t)b0 * c->max_T * kv_ld(c, g);
    if (!c->kt && !(c->f16 && c->kt16)) return;
    if (c->kt) p->kt = c->kt + (size_t)b0 * g->KD * c->ldkt;
    if (c->f16 && c->kt16) p->kt16 = c->kt16 + (size_t)b0 * g->KD * c->ldkt;
    p->ldkt = c->ldkt;
    p->sbkt = (ptrdiff_t)g->KD * c->ldkt;
}

size_t attn_nn_attn_proj_floats(const attn_nn_attn_cfg *c, int Mq, int Mk) {
    const geom g = geometry(c);
    if (c->cross) return (size_t)Mq * g.HD + (size_t)Mk * 2 * g.KD;
    return (size_t)Mq * g.W;
}

size_t attn_nn_attn_work_floats(const attn_nn_attn_cfg *c, int Mq, int Mk) {
    return (size_t)Mq * geometry(c).HD + attn_nn_attn_proj_floats(c, Mq, Mk);
}

size_t attn_nn_attn_qk_floats(const attn_nn_attn_cfg *c, int Mq) {
    const geom g = geometry(c);
    return (size_t)Mq * (size_t)(g.HD + g.KD);
}

/* Rows of the call's queries and keys. */
static int q_rows(const attn_nn_seqs *s) { return s->off ? s->off[s->B] : s->B * s->Tq; }
static int k_rows(const attn_nn_seqs *s) { return s->B * s->Tk; }

static attn_status check_proj(const attn_nn_linear *L, const char *name, int in, int out) {
    if (!nn_has_weight(L))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention: no %s projection", name);
    if (L->in != in || L->out != out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention: %s projection is (%d -> %d), expected (%d -> %d)", name,
                         L->in, L->out, in, out);
    return ATTN_STATUS_OK;
}

static bool has_qk_norm(const attn_nn_attn *w) { return w->q_norm.dim || w->k_norm.dim; }

static attn_status check_qk_norm(const attn_nn_norm *n, const char *name, int D) {
    if (!n->dim) return ATTN_STATUS_OK;
    if (n->kind != ATTN_NORM_RMS || n->dim != D || n->b)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention: %s must be an RMSNorm without bias over d_head = %d values "
                         "(kind %s, dim %d)",
                         name, D, attn_norm_kind_name(n->kind), n->dim);
    return ATTN_STATUS_OK;
}

static attn_status check_weights(const attn_nn_attn_cfg *c, const attn_nn_attn *w) {
    const geom g = geometry(c);
    if (!w) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention: NULL weights");
    ATTN_TRY(check_proj(&w->o, "output", g.HD, g.C));
    if (has_qk_norm(w)) {
        if (c->cross)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention: q/k norms apply to self-attention only");
        ATTN_TRY(check_qk_norm(&w->q_norm, "q_norm", g.D));
        ATTN_TRY(check_qk_norm(&w->k_norm, "k_norm", g.D));
    }
    if (!c->cross) {
        if (nn_has_weight(&w->qkv)) return check_proj(&w->qkv, "fused qkv", g.C, g.W);
        ATTN_TRY(check_proj(&w->q, "query", g.C, g.HD));
        ATTN_TRY(check_proj(&w->k, "key", g.C, g.KD));
        return check_proj(&w->v, "value", g.C, g.KD);
    }
    ATTN_TRY(check_proj(&w->q, "query", g.C, g.HD));
    if (nn_has_weight(&w->kv)) return check_proj(&w->kv, "fused key/value", g.Ckv, 2 * g.KD);
    ATTN_TRY(check_proj(&w->k, "key", g.Ckv, g.KD));
    return check_proj(&w->v, "value", g.Ckv, g.KD);
}

/* The self-attention projections of x (M, C) into proj (M, W). */
static attn_status project_self(const attn_nn_run *run, const geom *g, const attn_nn_attn *w,
                                int M, const float *x, float *proj) {
    attn_nn_linear f;
    if (nn_has_weight(&w->qkv))
        return attn_nn_linear_forward(run, &w->qkv, M, x, g->C, 0.0f, proj, g->W, ATTN_ACT_NONE);
    if (attn_nn_linear_fuse(&w->q, &w->k, &w->v, &f))
        return attn_nn_linear_forward(run, &f, M, x, g->C, 0.0f, proj, g->W, ATTN_ACT_NONE);
    ATTN_TRY(attn_nn_linear_forward(run, &w->q, M, x, g->C, 0.0f, proj, g->W, ATTN_ACT_NONE));
    ATTN_TRY(attn_nn_linear_forward(run, &w->k, M, x, g->C, 0.0f, proj + g->HD, g->W,
                                    ATTN_ACT_NONE));
    return attn_nn_linear_forward(run, &w->v, M, x, g->C, 0.0f, proj + g->HD + g->KD, g->W,
                                  ATTN_ACT_NONE);
}

/* Cross-attention keys | values of src (Mk, Ckv) into kv (Mk, 2·KD). */
static attn_status project_kv(const attn_nn_run *run, const geom *g, const attn_nn_attn *w,
                              int Mk, const float *src, float *kv) {
    attn_nn_linear f;
    if (nn_has_weight(&w->kv))
        return attn_nn_linear_forward(run, &w->kv, Mk, src, g->Ckv, 0.0f, kv, 2 * g->KD,
                                      ATTN_ACT_NONE);
    if (attn_nn_linear_fuse(&w->k, &w->v, NULL, &f))
        return attn_nn_linear_forward(run, &f, Mk, src, g->Ckv, 0.0f, kv, 2 * g->KD,
                                      ATTN_ACT_NONE);
    ATTN_TRY(attn_nn_linear_forward(run, &w->k, Mk, src, g->Ckv, 0.0f, kv, 2 * g->KD,
                                    ATTN_ACT_NONE));
    return attn_nn_linear_forward(run, &w->v, Mk, src, g->Ckv, 0.0f, kv + g->KD, 2 * g->KD,
                                  ATTN_ACT_NONE);
}

/* The q (part 0) or k (part 1) heads of a proj-layout buffer (M, W): the column where they
 * start, their width (H·D or H_kv·D), their norm, and where their rows of D sit in acts qk /
 * qk_rstd. */
typedef struct {
    int col, width, heads;
    const attn_nn_norm *norm, *grad;
    size_t qk_at, rstd_at;
} qk_part;

static qk_part qk_part_of(const geom *g, const attn_nn_attn *w, const attn_nn_attn *gr, int M,
                          int part) {
    qk_part q;
    q.col = part ? g->HD : 0;
    q.width = part ? g->KD : g->HD;
    q.heads = part ? g->Hk : g->H;
    q.norm = part ? &w->k_norm : &w->q_norm;
    q.grad = gr ? (part ? &gr->k_norm : &gr->q_norm) : NULL;
    q.qk_at = part ? (size_t)M * g->HD : 0;
    q.rstd_at = part ? (size_t)M * g->H : 0;
    return q;
}

/* dst (M, width) contiguous = columns [col, col + width) of src (M, ld), or the reverse. */
static void gather(int M, const float *src, int ld, int col, int width, float *dst) {
    for (int r = 0; r < M; r++)
        memcpy(dst + (size_t)r * width, src + (size_t)r * ld + col, (size_t)width * sizeof(float));
}
static void scatter(int M, const float *src, int width, float *dst, int ld, int col) {
    for (int r = 0; r < M; r++)
        memcpy(dst + (size_t)r * ld + col, src + (size_t)r * width, (size_t)width * sizeof(float));
}

/* The norm's row count M·heads must fit the kernels' int. */
static attn_status qk_rows(int M, int heads, int *out) {
    const long long n = (long long)M * heads;
    if (n > INT32_MAX)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "attention: %lld q/k norm rows are too many", n);
    *out = (int)n;
    return ATTN_STATUS_OK;
}

/* The q/k norms on proj (M, W) in place, through tmp (M, H·D) scratch; with a->qk the pre-norm
 * rows and their rstd are kept there for backward. */
static attn_status qk_norm_forward(const geom *g, const attn_nn_attn *w, int M, float *proj,
                                   const attn_nn_attn_acts *a, float *tmp) {
    const bool keep = a->qk && a->qk_rstd;
    for (int part = 0; part < 2; part++) {
        const qk_part q = qk_part_of(g, w, NULL, M, part);
        if (!q.norm->dim) continue;
        int rows = 0;
        ATTN_TRY(qk_rows(M, q.heads, &rows));
        float *in = keep ? a->qk + q.qk_at : tmp;
        gather(M, proj, g->W, q.col, q.width, in);
        ATTN_TRY(attn_nn_norm_forward(q.norm, rows, in, tmp, NULL, keep ? a->qk_rstd + q.rstd_at
                                                                         : NULL));
        scatter(M, tmp, q.width, proj, g->W, q.col);
    }
    return ATTN_STATUS_OK;
}

/* d loss / d (q, k before the norms) from d / d (after) in dP (M, W), in place, through tmp
 * (M, H·D) scratch; the norms' weight gradients accumulate into gr. */
static attn_status qk_norm_backward(const geom *g, const attn_nn_attn *w, const attn_nn_attn *gr,
                                    int M, const attn_nn_attn_acts *a, float *dP, float *tmp) {
    for (int part = 0; part < 2; part++) {
        const qk_part q = qk_part_of(g, w, gr, M, part);
        if (!q.norm->dim) continue;
        int rows = 0;
        ATTN_TRY(qk_rows(M, q.heads, &rows));
        gather(M, dP, g->W, q.col, q.width, tmp);
        ATTN_TRY(attn_nn_norm_backward(q.norm, q.grad, rows, a->qk + q.qk_at, NULL,
                                       a->qk_rstd + q.rstd_at, tmp, tmp, false, NULL));
        scatter(M, tmp, q.width, dP, g->W, q.col);
    }
    return ATTN_STATUS_OK;
}

/* Rows whose RoPE positions fit the caller's stack buffer (a decoding step's, a prompt's): no
 * allocation per layer and step. */
#define POS_STACK 512

/* Positions of the call's M query rows for RoPE: s->pos, else pos0 + t, in stack (POS_STACK
 * entries) when M fits, else in a buffer to free (*own true). */
static attn_status positions(const attn_nn_seqs *s, int M, int P, int32_t *stack, int32_t **out,
                             bool *own) {
    *own = false;
    if (s->pos) {
        *out = (int32_t *)s->pos;
        return ATTN_STATUS_OK;
    }
    int32_t *p = M <= POS_STACK ? stack : attn_alloc((size_t)ATTN_MAX(M, 1) * sizeof(int32_t));
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "attention: out of memory");
    if (s->off) {
        for (int b = 0; b < s->B; b++)
            for (int r = s->off[b]; r < s->off[b + 1]; r++)
                p[r] = (s->pos0s ? s->pos0s[b] : s->pos0) + (r - s->off[b]);
    } else if (s->pos0s) {
        for (int r = 0; r < M; r++) p[r] = s->pos0s[r / s->Tq] + r % s->Tq;
    } else {
        for (int r = 0; r < M; r++) p[r] = s->pos0 + r % s->Tq;
    }
    for (int r = 0; r < M; r++)
        if (p[r] < 0 || p[r] >= P) {
            const int bad = p[r];
            if (p != stack) attn_free(p);
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention: position %d is outside the rotary tables [0, %d)", bad,
                             P);
        }
    *out = p;
    *own = p != stack;
    return ATTN_STATUS_OK;
}

/* Rotate (or, inverse, rotate back: the backward) the q and k heads of proj (M, W). */
static attn_status rope(const attn_nn_attn_cfg *c, const geom *g, const attn_nn_seqs *s, int M,
                        float *proj, bool inverse) {
    int32_t stack[POS_STACK], *pos = NULL;
    bool own = false;
    ATTN_TRY(positions(s, M, c->rope_P, stack, &pos, &own));
    /* the k heads follow the q heads in each row (columns HD .. HD + KD): one call for both */
    attn_status st = attn_rope_apply(c->rope_mode, M, g->H + g->Hk, g->D, c->rope_dim, proj, g->W,
                                     pos, c->rope_P, c->rope_cos, c->rope_sin, inverse);
    if (own) attn_free(pos);
    return st;
}

/* The kernel's parameters common to every call. */
static attn_attention_params base_params(const attn_nn_attn_cfg *c, const geom *g, int B, int Tq,
                                         int Tk) {
    attn_attention_params p = attn_attention_default_params(B, g->H, Tq, Tk, g->D);
    if (c->scale != 0.0f) p.scale = c->scale;
    p.H_kv = g->Hk;
    p.ldo = g->HD;
    return p;
}

/* Variable-length self-attention: sequence b's rows off[b] .. attend over themselves. One
 * sequence per thread (the kernel's own threading stays inside one thread), unless there is
 * only one sequence or probabilities are captured: then the kernel's threads run. The
 * many-sequence case must not be wrapped in an inactive parallel region when it runs serially:
 * a kernel region nested in a one-thread region gets a fresh team of threads on every call
 * (docs/engine.md). */
typedef struct {
    const attn_nn_attn_cfg *c;
    const geom *g;
    const attn_nn_seqs *s;
    const float *proj, *ctx, *lse, *dctx;
    float *out_ctx, *out_lse, *dproj;
    float *probs, *tmp; /* capture: (B, H, T, T) and (H, T, T) scratch */
} varlen;

/* Sequence b's kernel parameters (its n rows attend over themselves, starting at row *o);
 * false for an empty sequence. */
static bool varlen_params(const varlen *v, int b, attn_attention_params *p, int *n, size_t *o) {
    *n = v->s->off[b + 1] - v->s->off[b];
    *o = (size_t)v->s->off[b];
    if (*n <= 0) return false;
    *p = base_params(v->c, v->g, 1, *n, *n);
    p->causal = v->c->causal;
    p->window = v->c->window;
    p->ldq = p->ldk = p->ldv = v->g->W;
    return true;
}

static int varlen_fwd_one(const varlen *v, int b) {
    const geom *g = v->g;
    attn_attention_params p;
    int n;
    size_t o;
    if (!varlen_params(v, b, &p, &n, &o)) return 0;
    const float *q = v->proj + o * g->W;
    float *pr = v->probs ? v->tmp : NULL;
    if (attn_attention_forward(&p, q, q + g->HD, q + g->HD + g->KD, v->out_ctx + o * g->HD,
                               v->out_lse ? v->out_lse + o * g->H : NULL, pr))
        return 1;
    if (pr) {
        const int T = v->s->Tq, H = g->H;
        float *dst = v->probs + (size_t)b * H * T * T;
        memset(dst, 0, (size_t)H * T * T * sizeof(float));
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n; i++)
                memcpy(dst + ((size_t)h * T + i) * T, pr + ((size_t)h * n + i) * n,
                       (size_t)n * sizeof(float));
    }
    return 0;
}

static int varlen_bwd_one(const varlen *v, int b) {
    const geom *g = v->g;
    attn_attention_params p;
    int n;
    size_t o;
    if (!varlen_params(v, b, &p, &n, &o)) return 0;
    const float *q = v->proj + o * g->W;
    float *dq = v->dproj + o * g->W;
    return attn_attention_backward(&p, q, q + g->HD, q + g->HD + g->KD, v->ctx + o * g->HD,
                                   v->lse + o * g->H, v->dctx + o * g->HD, dq, dq + g->HD,
                                   dq + g->HD + g->KD) != ATTN_STATUS_OK;
}

static attn_status varlen_run(const varlen *v, bool backward) {
    const int B = v->s->B;
    (void)attn_get_backend(); /* settle the dispatch before the threads start */
    int bad = 0;
    if (B > 1 && !v->probs) {
#pragma omp parallel for schedule(dynamic, 1) reduction(| : bad)
        for (int b = 0; b < B; b++) bad |= backward ? varlen_bwd_one(v, b) : varlen_fwd_one(v, b);
    } else {
        for (int b = 0; b < B; b++) bad |= backward ? varlen_bwd_one(v, b) : varlen_fwd_one(v, b);
    }
    if (bad)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention: %s over a sequence failed",
                         backward ? "backward" : "forward");
    return ATTN_STATUS_OK;
}

/* A ragged KV cache (attn_nn_seqs.pos0s / slot): each sequence's new keys and values into its
 * cache slot at its own positions, then one kernel call per sequence over its own cached keys
 * (causal_offset = its cache length), the sequences spread over threads as varlen_run does. */
static int ragged_one(const attn_nn_attn_cfg *c, const geom *g, const attn_nn_seqs *s,
                      const float *P, const attn_nn_kv *cache, attn_nn_attn_acts *a, int b) {
    const int sl = s->slot ? s->slot[b] : b;
    const int p0 = s->pos0s ? s->pos0s[b] : s->pos0;
    const int ld = kv_ld(cache, g);
    float *kc = cache->k + (size_t)sl * cache->max_T * ld;
    float *vc = cache->v + (size_t)sl * cache->max_T * ld;
    /* the sequence's rows: off[b] .. off[b + 1] (variable-length), else b·Tq .. */
    const size_t o = s->off ? (size_t)s->off[b] : (size_t)b * s->Tq;
    const int nq = s->off ? s->off[b + 1] - s->off[b] : s->Tq;
    if (nq <= 0) return 0;
    const float *q = P + o * g->W;
    for (int t = 0; t < nq; t++) {
        const float *row = q + (size_t)t * g->W;
        kv_put(cache, g, sl, p0 + t, row + g->HD, row + g->HD + g->KD);
    }
    attn_attention_params p = base_params(c, g, 1, nq, p0 + nq);
    kt_params(&p, cache, g, sl);
    p.causal = c->causal;
    p.window = c->window;
    p.causal_offset = p0;
    p.ldq = g->W;
    p.ldk = p.ldv = ld;
    return attn_attention_forward(&p, q, kc, vc, a->ctx + o * g->HD,
                                  a->lse ? a->lse + o * g->H : NULL, NULL) != ATTN_STATUS_OK;
}

/* Sequence b's keys after this call: its cached positions and its new rows. */
static int ragged_keys(const attn_nn_seqs *s, int b) {
    const int p0 = s->pos0s ? s->pos0s[b] : s->pos0;
    return p0 + (s->off ? s->off[b + 1] - s->off[b] : s->Tq);
}

static attn_status ragged_run(const attn_nn_attn_cfg *c, const geom *g, const attn_nn_seqs *s,
                              const float *P, const attn_nn_kv *cache, attn_nn_attn_acts *a) {
    const int B = s->B;
    (void)attn_get_backend(); /* settle the dispatch before the threads start */
    int bad = 0;
    if (B > 1) {
        /* the longest sequences first (a sequence's cost grows with its keys): taken in cache
         * order, the threads that drew the short ones waited at the end for the one with the
         * last, longest sequences (bench_ragged's prompts grow with the slot). Each sequence's
         * result does not depend on the order. */
        int ord_stack[256]; /* (more sequences: cache order) */
        int *ord = B <= 256 ? ord_stack : NULL;
        if (ord) {
            for (int b = 0; b < B; b++) {
                const int n = ragged_keys(s, b);
                int i = b;
                for (; i > 0 && ragged_keys(s, ord[i - 1]) < n; i--) ord[i] = ord[i - 1];
                ord[i] = b;
            }
        }
#pragma omp parallel for schedule(dynamic, 1) reduction(| : bad)
        for (int i = 0; i < B; i++) bad |= ragged_one(c, g, s, P, cache, a, ord ? ord[i] : i);
    } else {
        bad = ragged_one(c, g, s, P, cache, a, 0);
    }
    if (bad)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention: forward over a sequence of a ragged cache failed");
    return ATTN_STATUS_OK;
}

static attn_status check_seqs(const attn_nn_attn_cfg *c, const attn_nn_seqs *s,
                              const attn_nn_kv *cache) {
    if (cache && cache->f16 && c->cross)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "attention: a binary16 (f16) cache is for self-attention");
    if (!s || s->B <= 0 || s->Tq <= 0 || s->Tk <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention: bad sequence sizes (B=%d Tq=%d "
                         "Tk=%d)", s ? s->B : 0, s ? s->Tq : 0, s ? s->Tk : 0);
    if (cache && cache->kt && cache->ldkt < attn_nn_kv_ldkt(cache->max_T))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention: the cache's transposed keys need ldkt >= %d (ldkt=%d)",
                         attn_nn_kv_ldkt(cache->max_T), cache->ldkt);
    if (s->pos0s || s->slot) {
        if (c->cross || !cache)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention: per-sequence positions (pos0s, slot) are for "
                             "self-attention with a cache");
        if (s->kv_len || s->bias)
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "attention: per-sequence positions with key padding or a score bias");
        if (!cache->k || !cache->v)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention: NULL cache");
        if (!s->slot && cache->B != s->B)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention: the cache holds %d sequences, the call %d",
                             cache->B, s->B);
        for (int b = 0; b < s->B; b++) {
            const int sl = s->slot ? s->slot[b] : b;
            const long p0 = s->pos0s ? s->pos0s[b] : s->pos0;
            const long nq = s->off ? (long)s->off[b + 1] - s->off[b] : s->Tq;
            if (s->off && (nq < 0 || nq > s->Tq))
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "attention: sequence %d's rows %d..%d exceed T = %d", b,
                                 (int)s->off[b], (int)s->off[b + 1], s->Tq);
            if (sl < 0 || sl >= cache->B)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "attention: sequence %d's cache slot %d is outside [0, %d)", b,
                                 sl, cache->B);
            if (p0 < 0 || p0 + nq > cache->max_T)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "attention: sequence %d's positions up to %ld exceed the "
                                 "cache's %d",
                                 b, p0 + nq, cache->max_T);
        }
        return ATTN_STATUS_OK;
    }
    if (s->off) {
        if (c->cross || cache)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention: variable-length rows are for self-attention without a "
                             "cache");
        if (s->bias)
            return attn_fail(ATTN_STATUS_UNSUPPORTED,
                             "attention: a score bias needs the padded layout");
        for (int b = 0; b < s->B; b++)
            if (s->off[b + 1] < s->off[b] || s->off[b + 1] - s->off[b] > s->Tq)
                return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                 "attention: sequence %d's rows %d..%d exceed T = %d", b,
                                 (int)s->off[b], (int)s->off[b + 1], s->Tq);
    } else if (!c->cross && !cache && s->Tk != s->Tq) {
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention: self-attention needs Tk == Tq (Tq=%d Tk=%d)", s->Tq, s->Tk);
    }
    if (cache) {
        if (!cache->k || !cache->v || cache->B != s->B)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention: the cache holds %d sequences, the call %d",
                             cache->B, s->B);
        const long need = c->cross ? (long)s->Tk : (long)s->pos0 + s->Tq;
        if (s->pos0 < 0 || need > cache->max_T)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attention: positions up to %ld exceed the cache's %d", need,
                             cache->max_T);
    }
    return ATTN_STATUS_OK;
}

attn_status attn_nn_attention_forward(const attn_nn_run *run, const attn_nn_attn_cfg *cfg,
                                      const attn_nn_attn *w, const attn_nn_seqs *s,
                                      const float *x, const float *src, const attn_nn_kv *cache,
                                      attn_nn_attn_acts *a, float *probs, float beta, float *y) {
    ATTN_TRY(attn_nn_attn_cfg_check(cfg, "attention"));
    ATTN_TRY(check_weights(cfg, w));
    ATTN_TRY(check_seqs(cfg, s, cache));
    if (!x || !a || !a->proj || !a->ctx || !y)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention: NULL argument");
    if (cfg->cross && !cache && !src)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attention: cross-attention needs a source");
    const geom g = geometry(cfg);
    const int Mq = q_rows(s);
    float *P = a->proj;

    if (!cfg->cross) {
        ATTN_TRY(project_self(run, &g, w, Mq, x, P));
        if (has_qk_norm(w)) ATTN_TRY(qk_norm_forward(&g, w, Mq, P, a, a->ctx));
        if (cfg->rope_dim) ATTN_TRY(rope(cfg, &g, s, Mq, P, false));
        if (s->pos0s || s->slot) {
            if (probs)
                return attn_fail(ATTN_STATUS_UNSUPPORTED,
                                 "attention: no probabilities with per-sequence positions");
            ATTN_TRY(ragged_run(cfg, &g, s, P, cache, a));
        } else if (s->off) {
            varlen v = {cfg, &g, s, P, NULL, NULL, NULL, a->ctx, a->lse, NULL, probs, NULL};
            if (probs) {
                v.tmp = attn_alloc((size_t)g.H * s->Tq * s->Tq * sizeof(float));
                if (!v.tmp)
                    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY,
                                     "attention: out of memory for the capture");
            }
            attn_status st = varlen_run(&v, false);
            attn_free(v.tmp);
            ATTN_TRY(st);
        } else {
            attn_attention_params p = base_params(cfg, &g, s->B, s->Tq, s->Tk);
            p.causal = cfg->causal;
            p.window = cfg->window;
            p.kv_len = s->kv_len;
            p.bias = s->bias, p.bias_sb = s->bias_sb, p.bias_sh = s->bias_sh;
            p.bias_sq = s->bias_sq;
            p.ldq = g.W;
            const float *k = P + g.HD, *v = P + g.HD + g.KD;
            if (cache) {
                /* Append the new keys and values, then attend over the cache. */
                const int ld = kv_ld(cache, &g);
                for (int b = 0; b < s->B; b++)
                    for (int t = 0; t < s->Tq; t++) {
                        const float *row = P + ((size_t)b * s->Tq + t) * g.W;
                        kv_put(cache, &g, b, s->pos0 + t, row + g.HD, row + g.HD + g.KD);
                    }
                p.Tk = s->pos0 + s->Tq;
                kt_params(&p, cache, &g, 0);
                p.causal_offset = s->pos0;
                p.ldk = p.ldv = ld;
                p.sbk = p.sbv = (ptrdiff_t)cache->max_T * ld;
                k = cache->k, v = cache->v;
            } else {
                p.ldk = p.ldv = g.W;
            }
            ATTN_TRY(attn_attention_forward(&p, P, k, v, a->ctx, a->lse, probs));
        }
    } else {
        ATTN_TRY(attn_nn_linear_forward(run, &w->q, Mq, x, g.C, 0.0f, P, g.HD, ATTN_ACT_NONE));
        attn_attention_params p = base_params(cfg, &g, s->B, s->Tq, s->Tk);
        p.causal = cfg->causal;
        p.causal_offset = s->pos0;
        p.kv_len = s->kv_len;
        p.bias = s->bias, p.bias_sb = s->bias_sb, p.bias_sh = s->bias_sh, p.bias_sq = s->bias_sq;
        p.ldq = g.HD;
        const float *k, *v;
        if (cache) {
            const int ld = kv_ld(cache, &g);
            k = cache->k, v = cache->v;
            p.ldk = p.ldv = ld;
            p.sbk = p.sbv = (ptrdiff_t)cache->max_T * ld;
            kt_params(&p, cache, &g, 0);
        } else {
            float *kv = P + (size_t)Mq * g.HD;
            ATTN_TRY(project_kv(run, &g, w, k_rows(s), src, kv));
            k = kv, v = kv + g.KD;
            p.ldk = p.ldv = 2 * g.KD;
        }
        ATTN_TRY(attn_attention_forward(&p, P, k, v, a->ctx, a->lse, probs));
    }
    return attn_nn_linear_forward(run, &w->o, Mq, a->ctx, g.HD, beta, y, g.C, ATTN_ACT_NONE);
}

attn_status attn_nn_attention_cross_kv(const attn_nn_run *run, const attn_nn_attn_cfg *cfg,
                                       const attn_nn_attn *w, int B, int Tk, const float *src,
                                       const attn_nn_kv *cache) {
    ATTN_TRY(attn_nn_attn_cfg_check(cfg, "attention"));
    ATTN_TRY(check_weights(cfg, w));
    if (!cfg->cross || !src || !cache || !cache->k || !cache->v || B != cache->B || B < 1 ||
        Tk < 1 || Tk > cache->max_T)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention cross kv: needs cross-attention, a source and a cache of "
                         ">= %d positions for %d sequences",
                         Tk, B);
    if (cache->f16)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "attention cross kv: a binary16 (f16) cache is for self-attention");
    const geom g = geometry(cfg);
    const int ld = kv_ld(cache, &g);
    const bool shared = cache->v == cache->k + g.KD && ld == 2 * g.KD;
    /* Sequences one after the other in the cache: one product over all B·Tk rows. */
    const int nb = cache->max_T == Tk ? 1 : B, rows = cache->max_T == Tk ? B * Tk : Tk;
    for (int b = 0; b < nb; b++) {
        const float *sb = src + (size_t)b * Tk * g.Ckv;
        const size_t at = (size_t)b * cache->max_T * ld;
        if (shared) {
            ATTN_TRY(project_kv(run, &g, w, rows, sb, cache->k + at));
            continue;
        }
        /* Separate arrays: the key and value maps one at a time. */
        attn_nn_linear kf = w->k, vf = w->v;
        if (nn_has_weight(&w->kv)) {
            kf = attn_nn_linear_rows(&w->kv, 0, g.KD);
            vf = attn_nn_linear_rows(&w->kv, g.KD, g.KD);
        }
        ATTN_TRY(attn_nn_linear_forward(run, &kf, rows, sb, g.Ckv, 0.0f, cache->k + at, ld,
                                        ATTN_ACT_NONE));
        ATTN_TRY(attn_nn_linear_forward(run, &vf, rows, sb, g.Ckv, 0.0f, cache->v + at, ld,
                                        ATTN_ACT_NONE));
    }
    if (cache->kt)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tk; t++)
                kt_put(cache, &g, b, t, cache->k + ((size_t)b * cache->max_T + t) * ld);
    return ATTN_STATUS_OK;
}

/* Backward of the projections: dproj (rows of the proj layout) into dx / dsrc and the weight
 * gradients. A fused GEMM pair (weights and gradients both fused) runs as one map. */
static attn_status project_self_back(const attn_nn_run *run, const geom *g, const attn_nn_attn *w,
                                     const attn_nn_attn *gr, int M, const float *x,
                                     const float *dP, float *dx, bool acc) {
    attn_nn_linear fw, fg;
    if (nn_has_weight(&w->qkv))
        return attn_nn_linear_backward(run, &w->qkv, M, x, g->C, dP, g->W, dx, g->C, acc,
                                       gr ? &gr->qkv : NULL);
    if (attn_nn_linear_fuse(&w->q, &w->k, &w->v, &fw) &&
        (!gr || attn_nn_linear_fuse(&gr->q, &gr->k, &gr->v, &fg)))
        return attn_nn_linear_backward(run, &fw, M, x, g->C, dP, g->W, dx, g->C, acc,
                                       gr ? &fg : NULL);
    ATTN_TRY(attn_nn_linear_backward(run, &w->q, M, x, g->C, dP, g->W, dx, g->C, acc,
                                     gr ? &gr->q : NULL));
    ATTN_TRY(attn_nn_linear_backward(run, &w->k, M, x, g->C, dP + g->HD, g->W, dx, g->C, true,
                                     gr ? &gr->k : NULL));
    return attn_nn_linear_backward(run, &w->v, M, x, g->C, dP + g->HD + g->KD, g->W, dx, g->C,
                                   true, gr ? &gr->v : NULL);
}

static attn_status project_kv_back(const attn_nn_run *run, const geom *g, const attn_nn_attn *w,
                                   const attn_nn_attn *gr, int Mk, const float *src,
                                   const float *dkv, float *dsrc) {
    attn_nn_linear fw, fg;
    if (nn_has_weight(&w->kv))
        return attn_nn_linear_backward(run, &w->kv, Mk, src, g->Ckv, dkv, 2 * g->KD, dsrc, g->Ckv,
                                       true, gr ? &gr->kv : NULL);
    if (attn_nn_linear_fuse(&w->k, &w->v, NULL, &fw) &&
        (!gr || attn_nn_linear_fuse(&gr->k, &gr->v, NULL, &fg)))
        return attn_nn_linear_backward(run, &fw, Mk, src, g->Ckv, dkv, 2 * g->KD, dsrc, g->Ckv,
                                       true, gr ? &fg : NULL);
    ATTN_TRY(attn_nn_linear_backward(run, &w->k, Mk, src, g->Ckv, dkv, 2 * g->KD, dsrc, g->Ckv,
                                     true, gr ? &gr->k : NULL));
    return attn_nn_linear_backward(run, &w->v, Mk, src, g->Ckv, dkv + g->KD, 2 * g->KD, dsrc,
                                   g->Ckv, true, gr ? &gr->v : NULL);
}

attn_status attn_nn_attention_backward(const attn_nn_run *run, const attn_nn_attn_cfg *cfg,
                                       const attn_nn_attn *w, const attn_nn_attn *g,
                                       const attn_nn_seqs *s, const float *x, const float *src,
                                       const attn_nn_attn_acts *a, const float *dy, float *dx,
                                       bool accumulate, float *dsrc, float *work) {
    ATTN_TRY(attn_nn_attn_cfg_check(cfg, "attention backward"));
    ATTN_TRY(check_weights(cfg, w));
    ATTN_TRY(check_seqs(cfg, s, NULL));
    if (!x || !a || !a->proj || !a->ctx || !a->lse || !dy || !dx || !work)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention backward: NULL argument (or a forward without lse)");
    if (has_qk_norm(w) && (!a->qk || !a->qk_rstd))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention backward: q/k norms need the forward's acts qk and qk_rstd");
    if (cfg->cross != (dsrc != NULL) || (cfg->cross && !src))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attention backward: dsrc and src exactly for cross-attention");
    const geom G = geometry(cfg);
    const int Mq = q_rows(s), Mk = k_rows(s);
    const float *P = a->proj;
    float *dctx = work;                       /* (Mq, HD) */
    float *dP = work + (size_t)Mq * G.HD;     /* proj's layout */

    ATTN_TRY(attn_nn_linear_backward(run, &w->o, Mq, a->ctx, G.HD, dy, G.C, dctx, G.HD, false,
                                     g ? &g->o : NULL));
    if (!cfg->cross) {
        if (s->off) {
            varlen v = {cfg, &G, s, P, a->ctx, a->lse, dctx, NULL, NULL, dP, NULL, NULL};
            ATTN_TRY(varlen_run(&v, true));
        } else {
            attn_attention_params p = base_params(cfg, &G, s->B, s->Tq, s->Tk);
            p.causal = cfg->causal;
            p.window = cfg->window;
            p.kv_len = s->kv_len;
            p.bias = s->bias, p.bias_sb = s->bias_sb, p.bias_sh = s->bias_sh;
            p.bias_sq = s->bias_sq, p.dbias = s->dbias;
            p.ldq = p.ldk = p.ldv = G.W;
            ATTN_TRY(attn_attention_backward(&p, P, P + G.HD, P + G.HD + G.KD, a->ctx, a->lse,
                                             dctx, dP, dP + G.HD, dP + G.HD + G.KD));
        }
        /* The kernel's dq, dk are gradients of the rotated q, k: rotate them back, then through
         * the q/k norms (dctx is free now: scratch). */
        if (cfg->rope_dim) ATTN_TRY(rope(cfg, &G, s, Mq, dP, true));
        if (has_qk_norm(w)) ATTN_TRY(qk_norm_backward(&G, w, g, Mq, a, dP, dctx));
        return project_self_back(run, &G, w, g, Mq, x, dP, dx, accumulate);
    }
    attn_attention_params p = base_params(cfg, &G, s->B, s->Tq, s->Tk);
    p.causal = cfg->causal;
    p.causal_offset = s->pos0;
    p.kv_len = s->kv_len;
    p.bias = s->bias, p.bias_sb = s->bias_sb, p.bias_sh = s->bias_sh, p.bias_sq = s->bias_sq;
    p.dbias = s->dbias;
    p.ldq = G.HD;
    p.ldk = p.ldv = 2 * G.KD;
    const float *kv = P + (size_t)Mq * G.HD;
    float *dkv = dP + (size_t)Mq * G.HD;
    ATTN_TRY(attn_attention_backward(&p, P, kv, kv + G.KD, a->ctx, a->lse, dctx, dP, dkv,
                                     dkv + G.KD));
    ATTN_TRY(attn_nn_linear_backward(run, &w->q, Mq, x, G.C, dP, G.HD, dx, G.C, accumulate,
                                     g ? &g->q : NULL));
    return project_kv_back(run, &G, w, g, Mk, src, dkv, dsrc);
}

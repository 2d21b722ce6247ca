/* params.c — the parameter table every family's model is described by (attn_models.h): the
 * layout builder, seeded initialization, lookup. */
#include "models-impl.h"

#include "attn_train.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

mdl_layout mdl_layout_begin(float *base, bool record) {
    mdl_layout L;
    memset(&L, 0, sizeof L);
    L.base = base;
    if (record) {
        L.cap = 64;
        L.t = attn_calloc((size_t)L.cap * sizeof *L.t);
        if (!L.t) L.oom = true, L.cap = 0;
    }
    return L;
}

float *mdl_take(mdl_layout *L, int ndim, int64_t d0, int64_t d1, attn_init_kind init, double scale,
                bool decay, const char *fmt, ...) {
    const size_t numel = (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
    float *p = L->src ? L->src[L->idx].f : L->base ? L->base + L->cursor : NULL;
    L->idx++;
    if (L->t || L->oom) {
        if (L->n == L->cap && !L->oom) {
            attn_param_info *t = attn_calloc((size_t)L->cap * 2 * sizeof *t);
            if (t) {
                memcpy(t, L->t, (size_t)L->n * sizeof *t);
                attn_free(L->t);
                L->t = t, L->cap *= 2;
            } else {
                L->oom = true;
            }
        }
        if (!L->oom) {
            attn_param_info *e = &L->t[L->n++];
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(e->name, sizeof e->name, fmt, ap);
            va_end(ap);
            e->ndim = ndim;
            e->shape[0] = d0;
            e->shape[1] = ndim == 2 ? d1 : 0;
            e->offset = L->cursor;
            e->numel = numel;
            e->decay = decay;
            e->init = init;
            e->init_scale = scale;
            e->zero_row = -1;
        }
    }
    L->cursor += numel;
    return p;
}

attn_nn_norm mdl_take_norm(mdl_layout *L, attn_norm_kind kind, int dim, float eps, bool bias,
                           const char *wname, const char *bname) {
    attn_nn_norm n;
    memset(&n, 0, sizeof n);
    n.kind = kind, n.dim = dim, n.eps = eps;
    n.w = mdl_take(L, 1, dim, 0, ATTN_INIT_ONES, 0.0f, false, "%s", wname);
    if (bias) n.b = mdl_take(L, 1, dim, 0, ATTN_INIT_ZEROS, 0.0f, false, "%s", bname);
    return n;
}

attn_nn_linear mdl_take_linear(mdl_layout *L, int in, int out, attn_nn_layout layout, bool bias,
                               attn_init_kind init, double scale, const char *wname,
                               const char *bname) {
    const int64_t d0 = layout == ATTN_NN_OUT_IN ? out : in, d1 = layout == ATTN_NN_OUT_IN ? in : out;
    const mdl_src *s = L->src ? &L->src[L->idx] : NULL;
    float *w = mdl_take(L, 2, d0, d1, init, scale, true, "%s", wname);
    float *b = bias ? mdl_take(L, 1, out, 0, ATTN_INIT_ZEROS, 0.0f, false, "%s", bname) : NULL;
    if (s && s->q) {
        attn_nn_linear q = attn_nn_linear_make_quant(s->qtype, s->q, b, in, out);
        q.qpacked = s->qp;
        return q;
    }
    if (s && s->transposed) layout = layout == ATTN_NN_OUT_IN ? ATTN_NN_IN_OUT : ATTN_NN_OUT_IN;
    return attn_nn_linear_make(w, b, in, out, layout);
}

/* SplitMix64's finalizer: one Philox key per tensor from the seed. */
static inline uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Element k of a random tensor is drawn at word 4k of the tensor's own Philox stream, so chunks
 * can be filled in parallel with the same result on any thread count. */
#define INIT_CHUNK 65536

void attn_params_init(const attn_param_info *t, int n, float *params, uint64_t seed) {
    if (!t || !params) return;
    for (int i = 0; i < n; i++) {
        const attn_param_info *e = &t[i];
        float *x = params + e->offset;
        if (e->init == ATTN_INIT_ZEROS || e->init == ATTN_INIT_ONES) {
            const float v = e->init == ATTN_INIT_ONES ? 1.0f : 0.0f;
            for (size_t k = 0; k < e->numel; k++) x[k] = v;
        } else {
            const double sd = e->init_scale;
            const bool normal = e->init == ATTN_INIT_NORMAL;
            const uint64_t key = mix64(mix64(seed) ^ (uint64_t)(i + 1));
            const size_t nchunk = (e->numel + INIT_CHUNK - 1) / INIT_CHUNK;
#pragma omp parallel for schedule(static) if (nchunk > 1)
            for (size_t ch = 0; ch < nchunk; ch++) {
                const size_t k0 = ch * INIT_CHUNK, k1 = ATTN_MIN(e->numel, k0 + INIT_CHUNK);
                attn_rng r;
                attn_rng_set_state(&r, key, 4 * (uint64_t)k0);
                for (size_t k = k0; k < k1; k++) {
                    if (normal) {
                        x[k] = (float)(sd * attn_rng_normal(&r));
                    } else {
                        x[k] = (float)((2.0 * attn_rng_uniform_double(&r) - 1.0) * sd);
                        attn_rng_skip(&r, 2); /* keep element k at word 4k */
                    }
                }
            }
        }
        if (e->zero_row >= 0 && e->ndim == 2 && e->zero_row < e->shape[0])
            memset(x + (size_t)e->zero_row * (size_t)e->shape[1], 0,
                   (size_t)e->shape[1] * sizeof(float));
    }
}

const attn_param_info *attn_params_find(const attn_param_info *t, int n, const char *name) {
    if (!t || !name) return NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

void attn_params_zero(float *buf, size_t n) {
    if (!buf) return;
    /* Threaded over 64 KB chunks: a serial memset of a whole gradient buffer is a visible part
     * of a small model's step. */
    const size_t CH = 16384;
    const long nchunk = (long)((n + CH - 1) / CH);
#pragma omp parallel for schedule(static) if (nchunk > 4)
    for (long c = 0; c < nchunk; c++) {
        const size_t a = (size_t)c * CH;
        memset(buf + a, 0, ATTN_MIN(CH, n - a) * sizeof(float));
    }
}

void mdl_sub_acts_alloc(attn_arena *a, const attn_nn_sublayer *S, int M, int Mk,
                        attn_nn_sub_acts *A, size_t *work) {
    const size_t Mz = (size_t)M, Cz = (size_t)S->norm.dim, f = sizeof(float);
    memset(A, 0, sizeof *A);
    A->ln = attn_arena_alloc(a, Mz * Cz * f);
    A->res = attn_arena_alloc(a, Mz * Cz * f);
    A->mean = attn_arena_alloc(a, Mz * f);
    A->rstd = attn_arena_alloc(a, Mz * f);
    A->mask = attn_arena_alloc(a, attn_nn_dropout_words(M, (int)Cz) * sizeof(uint64_t));
    if (S->kind == ATTN_SUB_ATTN) {
        A->attn.proj = attn_arena_alloc(a, attn_nn_attn_proj_floats(S->acfg, M, Mk) * f);
        A->attn.ctx = attn_arena_alloc(a, Mz * (size_t)S->acfg->n_head * S->acfg->d_head * f);
        A->attn.lse = attn_arena_alloc(a, Mz * (size_t)S->acfg->n_head * f);
        if (S->attn.q_norm.dim || S->attn.k_norm.dim) { /* the q/k norms' backward */
            const size_t qk = attn_nn_attn_qk_floats(S->acfg, M);
            A->attn.qk = attn_arena_alloc(a, qk * f);
            A->attn.qk_rstd = attn_arena_alloc(a, qk / (size_t)S->acfg->d_head * f);
        }
    } else {
        float *b = attn_arena_alloc(a, attn_nn_ffn_acts_floats(&S->ffn, M, true) * f);
        if (b) attn_nn_ffn_acts_view(&S->ffn, M, true, b, &A->ffn);
    }
    const size_t w = attn_nn_sub_work_floats(S, M, Mk);
    if (w > *work) *work = w;
}

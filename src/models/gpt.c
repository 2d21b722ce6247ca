/* gpt.c — GPT-2 (attn_gpt.h): parameter layout with Hugging Face names, seeded GPT-2
 * initialization, the training run state, forward, loss and backward.
 *
 * The forward keeps, per block, exactly what the backward reads (llm.c style): the block input
 * (the residual stream), both LayerNorm outputs and statistics, the fused QKV projection, the
 * attention output and its log-sum-exp, the stream after the attention branch, the MLP
 * pre-activation (GELU only) and activation. Dropout masks are not stored: they are regenerated
 * from the counter-based generator. Rows are packed: a batch of B sequences of length T uses the
 * first B·T rows of every buffer whatever the state's capacity.
 *
 * Speed: every matrix product is one attn_gemm over all B·T rows with the bias (and for ReLU the
 * activation) fused into its epilogue; residual adds without dropout are GEMMs with beta = 1
 * into a copy of the stream; bias gradients are threaded column sums. */
#include "attn_gpt.h"

#include "../core/core-impl.h"
#include "attn_io.h"
#include "attn_models.h"
#include "attn_train.h"
#include "gpt-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- parameter layout ---------------------------------------------------------------------- */

typedef struct {
    attn_gpt_model *m;
    float *base;
    size_t cursor;
    bool record;
} builder;

static float *take(builder *b, const char *name, int ndim, int64_t d0, int64_t d1) {
    float *p = b->base + b->cursor;
    size_t numel = (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
    if (b->record) {
        attn_gpt_tensor *t = &b->m->tensors[b->m->n_tensors++];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ndim = ndim;
        t->shape[0] = d0;
        t->shape[1] = ndim == 2 ? d1 : 0;
        t->offset = b->cursor;
        t->numel = numel;
        t->decay = ndim == 2;
    }
    b->cursor += numel;
    return p;
}

/* Lay out views w over base (recording the tensor table when rec); returns floats used. */
static size_t layout(attn_gpt_model *m, float *base, attn_gpt_weights *w, bool rec) {
    const attn_gpt_config *c = &m->cfg;
    builder b = {m, base, 0, rec};
    const int64_t C = c->n_embd, F = attn_gpt_inner(c), V = c->vocab_size;
    w->wte = take(&b, "transformer.wte.weight", 2, V, C);
    w->wpe = take(&b, "transformer.wpe.weight", 2, c->n_positions, C);
    for (int l = 0; l < c->n_layer; l++) {
        attn_gpt_block *L = &w->h[l];
        char n[64];
#define T(field, suffix, nd, d0, d1)                                                               \
    snprintf(n, sizeof n, "transformer.h.%d.%s", l, suffix);                                       \
    L->field = take(&b, n, nd, d0, d1);
        T(ln_1_w, "ln_1.weight", 1, C, 0)
        T(ln_1_b, "ln_1.bias", 1, C, 0)
        T(attn_w, "attn.c_attn.weight", 2, C, 3 * C)
        T(attn_b, "attn.c_attn.bias", 1, 3 * C, 0)
        T(attn_proj_w, "attn.c_proj.weight", 2, C, C)
        T(attn_proj_b, "attn.c_proj.bias", 1, C, 0)
        T(ln_2_w, "ln_2.weight", 1, C, 0)
        T(ln_2_b, "ln_2.bias", 1, C, 0)
        T(fc_w, "mlp.c_fc.weight", 2, C, F)
        T(fc_b, "mlp.c_fc.bias", 1, F, 0)
        T(mlp_proj_w, "mlp.c_proj.weight", 2, F, C)
        T(mlp_proj_b, "mlp.c_proj.bias", 1, C, 0)
#undef T
    }
    w->ln_f_w = take(&b, "transformer.ln_f.weight", 1, C, 0);
    w->ln_f_b = take(&b, "transformer.ln_f.bias", 1, C, 0);
    w->lm_head = c->tie_word_embeddings ? w->wte : take(&b, "lm_head.weight", 2, V, C);
    return b.cursor;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* SplitMix64's finalizer, to derive one Philox key per tensor from the seed. */
static inline uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Element k of a normal tensor is attn_rng_normal at word 4k of the tensor's own Philox stream,
 * so chunks can be filled in parallel with the same result on any thread count. */
#define INIT_CHUNK 65536

void attn_gpt_init_params(attn_gpt_model *m, uint64_t seed) {
    if (!m || !m->params) return;
    const double std = m->cfg.initializer_range;
    const double proj_std = std / sqrt(2.0 * m->cfg.n_layer);
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        float *x = m->params + t->offset;
        if (t->ndim == 1) {
            /* Biases 0, LayerNorm weights 1. */
            float v = strstr(t->name, ".ln_") && ends_with(t->name, ".weight") ? 1.0f : 0.0f;
            for (size_t k = 0; k < t->numel; k++) x[k] = v;
            continue;
        }
        const double sd = ends_with(t->name, ".c_proj.weight") ? proj_std : std;
        const uint64_t key = mix64(mix64(seed) ^ (uint64_t)(i + 1));
        const size_t nchunk = (t->numel + INIT_CHUNK - 1) / INIT_CHUNK;
#pragma omp parallel for schedule(static) if (nchunk > 1)
        for (size_t ch = 0; ch < nchunk; ch++) {
            size_t k0 = ch * INIT_CHUNK, k1 = ATTN_MIN(t->numel, k0 + INIT_CHUNK);
            attn_rng r;
            attn_rng_set_state(&r, key, 4 * (uint64_t)k0);
            for (size_t k = k0; k < k1; k++) x[k] = (float)(sd * attn_rng_normal(&r));
        }
    }
}

/* Ask for transparent huge pages on a large buffer before it is first touched (where the
 * kernel leaves them to madvise): generation streams every weight once per token, and with 4 KB
 * pages the TLB misses cost ~10% of that stream (measured on the GPT-2-124M shapes). */
void gpt_advise_huge_pages(void *p, size_t nbytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)1 << 21;
    uintptr_t a0 = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t a1 = ((uintptr_t)p + nbytes) & ~(huge - 1);
    if (a1 > a0) (void)madvise((void *)a0, a1 - a0, MADV_HUGEPAGE);
#else
    (void)p, (void)nbytes;
#endif
}

void attn_gpt_zero_grad(attn_gpt_model *m) {
    if (!m || !m->grads) return;
    /* Threaded over 64 KB chunks: a serial memset of the whole buffer is a visible part of a
     * small model's step (between the threaded optimizer and the data-parallel pass). */
    const size_t P = m->num_params, CH = 16384;
    const long nchunk = (long)((P + CH - 1) / CH);
    float *g = m->grads;
#pragma omp parallel for schedule(static) if (nchunk > 4)
    for (long c = 0; c < nchunk; c++) {
        const size_t a = (size_t)c * CH;
        memset(g + a, 0, ATTN_MIN(CH, P - a) * sizeof(float));
    }
}

const attn_gpt_tensor *attn_gpt_find_tensor(const attn_gpt_model *m, const char *name) {
    if (!m || !name) return NULL;
    for (int i = 0; i < m->n_tensors; i++) {
        const char *t = m->tensors[i].name;
        if (strcmp(t, name) == 0) return &m->tensors[i];
        if (strncmp(t, "transformer.", 12) == 0 && strcmp(t + 12, name) == 0) return &m->tensors[i];
    }
    return NULL;
}

void attn_gpt_model_free(attn_gpt_model *m) {
    if (!m) return;
    attn_free(m->params);
    attn_free(m->grads);
    attn_free(m->tensors);
    attn_free(m->w.h);
    attn_free(m->g.h);
    attn_free(m);
}

attn_status attn_gpt_alloc_grads(attn_gpt_model *m) {
    if (!m) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt: NULL model");
    if (m->grads) return ATTN_STATUS_OK;
    m->grads = attn_alloc(m->num_params * sizeof(float));
    if (m->grads) {
        gpt_advise_huge_pages(m->grads, m->num_params * sizeof(float));
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
    size_t n = layout(m, m->grads, &m->g, false);
    (void)n; /* same configuration, same count as the parameter layout */
    return ATTN_STATUS_OK;
}

attn_status gpt_model_alloc(const attn_gpt_config *cfg, bool grads, attn_gpt_model **out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt: NULL output");
    *out = NULL;
    ATTN_TRY(attn_gpt_config_check(cfg)); /* TOO_LARGE happens here, before any allocation */
    attn_gpt_model *m = attn_calloc(sizeof *m);
    if (!m) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt: out of memory");
    m->cfg = *cfg;
    m->num_params = attn_gpt_num_params(cfg);
    const int L = cfg->n_layer;
    m->params = attn_alloc(m->num_params * sizeof(float));
    if (m->params) gpt_advise_huge_pages(m->params, m->num_params * sizeof(float));
    m->tensors = attn_calloc((size_t)(12 * L + 8) * sizeof(attn_gpt_tensor));
    m->w.h = attn_calloc((size_t)L * sizeof(attn_gpt_block));
    if (!m->params || !m->tensors || !m->w.h) {
        attn_gpt_model_free(m);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt: out of memory for %zu parameters",
                         attn_gpt_num_params(cfg));
    }
    size_t n = layout(m, m->params, &m->w, true);
    if (n != m->num_params) { /* a layout/count mismatch is a bug; never write past */
        attn_gpt_model_free(m);
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt: internal parameter count mismatch");
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

attn_status attn_gpt_model_init(const attn_gpt_config *cfg, uint64_t seed, attn_gpt_model **out) {
    ATTN_TRY(gpt_model_alloc(cfg, true, out));
    attn_gpt_init_params(*out, seed);
    return ATTN_STATUS_OK;
}

/* ---- shared helpers ------------------------------------------------------------------------ */

void attn_gpt_dropout(uint64_t seed, uint64_t step, uint32_t site, float p, size_t n, float *x) {
    attn_encdec_dropout(seed, step, site, p, n, x);
}

/* The same masks as attn_encdec_dropout (which attn_gpt_dropout is; tests/test_gpt.c checks them
 * bit for bit), kept as bits: element i of a site is dropped when the top 24 bits of
 * mix64(key ^ i·0xD6E8FEB86659FD93), key = mix64(mix64(mix64(seed) ^ step) ^ site), fall below
 * p·2^24. The forward computes each mask once, fused with its use, and the backward reads the
 * bits instead of hashing every element again. */
static inline uint64_t drop_key(uint64_t seed, uint64_t step, uint32_t site) {
    return mix64(mix64(mix64(seed) ^ step) ^ site);
}
static inline bool dropped(uint64_t key, uint64_t thr, size_t i) {
    return (mix64(key ^ ((uint64_t)i * 0xD6E8FEB86659FD93ull)) >> 40) < thr;
}

/* One 64-element word of a site: out[i] = base[i] + drop(y[i]) for i in [i0, i0 + cnt), the
 * mask element of i being off + i; returns the keep bits. The hash is three 64-bit multiplies per
 * element: with AVX-512DQ (vpmullq) the compiler vectorizes it, several times faster than the
 * baseline ISA the models are built for, so that version is chosen at run time on the AVX-512
 * backend. Integer hashing and the same float operations (no contraction: -std=c11): the same
 * bits either way. */
#define DROP_WORD_BODY                                                                             \
    uint32_t keep[64];                                                                             \
    for (size_t j = 0; j < cnt; j++) keep[j] = !dropped(key, thr, off + i0 + j);                   \
    uint64_t bits = 0;                                                                             \
    for (size_t j = 0; j < cnt; j++) {                                                             \
        const size_t i = i0 + j;                                                                   \
        const float d = keep[j] ? y[i] * scale : 0.0f;                                             \
        out[i] = base ? base[i] + d : d;                                                           \
        bits |= (uint64_t)keep[j] << j;                                                            \
    }                                                                                              \
    return bits;
#define DROP_WORD_ARGS                                                                             \
    uint64_t key, uint64_t thr, float scale, size_t off, size_t i0, size_t cnt,                    \
        const float *base, const float *y, float *out
static uint64_t drop_word(DROP_WORD_ARGS) { DROP_WORD_BODY }
/* The backward of one word: out = drop(g) from the bits. */
#define UNDROP_WORD_BODY                                                                           \
    for (size_t j = 0; j < cnt; j++) out[i0 + j] = (bits >> j) & 1 ? g[i0 + j] * scale : 0.0f;
#define UNDROP_WORD_ARGS                                                                           \
    uint64_t bits, float scale, size_t i0, size_t cnt, const float *g, float *out
static void undrop_word(UNDROP_WORD_ARGS) { UNDROP_WORD_BODY }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_DROP_512 1
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw"))) static uint64_t
drop_word_512(DROP_WORD_ARGS) { DROP_WORD_BODY }
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw"))) static void
undrop_word_512(UNDROP_WORD_ARGS) { UNDROP_WORD_BODY }
#endif

void gpt_dropout_fwd(uint64_t seed, uint64_t step, uint32_t site, float p, size_t off,
                     size_t n, const float *base, const float *y, float *out, uint64_t *mask) {
    const uint64_t key = drop_key(seed, step, site);
    const uint64_t thr = (uint64_t)((double)p * 16777216.0 + 0.5);
    const float scale = 1.0f / (1.0f - p);
    const size_t nw = (n + 63) / 64;
#ifdef HAVE_DROP_512
    const bool v512 = attn_get_backend() == ATTN_BACKEND_AVX512;
#endif
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t w = 0; w < nw; w++) {
        const size_t i0 = w * 64, cnt = ATTN_MIN(n - i0, (size_t)64);
#ifdef HAVE_DROP_512
        if (v512) {
            mask[w] = drop_word_512(key, thr, scale, off, i0, cnt, base, y, out);
            continue;
        }
#endif
        mask[w] = drop_word(key, thr, scale, off, i0, cnt, base, y, out);
    }
}

void gpt_dropout_bwd(float p, size_t n, const uint64_t *mask, const float *g, float *out) {
    const float scale = 1.0f / (1.0f - p);
    const size_t nw = (n + 63) / 64;
#ifdef HAVE_DROP_512
    const bool v512 = attn_get_backend() == ATTN_BACKEND_AVX512;
#endif
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t w = 0; w < nw; w++) {
        const size_t i0 = w * 64, cnt = ATTN_MIN(n - i0, (size_t)64);
#ifdef HAVE_DROP_512
        if (v512) {
            undrop_word_512(mask[w], scale, i0, cnt, g, out);
            continue;
        }
#endif
        undrop_word(mask[w], scale, i0, cnt, g, out);
    }
}

float gpt_attn_scale(const attn_gpt_config *c, int layer) {
    const int D = c->n_embd / c->n_head;
    double s = c->scale_attn_weights ? 1.0 / sqrt((double)D) : 1.0;
    if (c->scale_attn_by_inverse_layer_idx) s /= (double)(layer + 1);
    return (float)s;
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

/* out (rows of B sequences, T positions each; row b·T + t) = wte[ids] + wpe[pos0 + t]. */
void gpt_embed(const attn_gpt_model *m, int B, int T, int pos0, const int32_t *ids, float *out) {
    const int C = m->cfg.n_embd;
    const long M = (long)B * T;
#pragma omp parallel for schedule(static) if (M * C >= 65536)
    for (long r = 0; r < M; r++) {
        const int t = (int)(r % T);
        const float *e = m->w.wte + (size_t)ids[r] * C;
        const float *p = m->w.wpe + (size_t)(pos0 + t) * C;
        float *o = out + (size_t)r * C;
        for (int i = 0; i < C; i++) o[i] = e[i] + p[i];
    }
}

/* y (n) = a (n) + b (n), threaded. */
static void add_to(size_t n, const float *a, const float *b, float *y) {
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

/* out (cols) += column sums of a (rows, cols), threaded over column blocks. */
static void colsum_add(int rows, int cols, const float *a, float *out) {
    const int nblk = (cols + 63) / 64;
#pragma omp parallel for schedule(static) if ((long)rows * cols >= 65536 && nblk > 1)
    for (int blk = 0; blk < nblk; blk++) {
        const int j0 = blk * 64, j1 = ATTN_MIN(cols, j0 + 64);
        float acc[64];
        for (int j = j0; j < j1; j++) acc[j - j0] = 0.0f;
        for (int r = 0; r < rows; r++) {
            const float *row = a + (size_t)r * cols;
            for (int j = j0; j < j1; j++) acc[j - j0] += row[j];
        }
        for (int j = j0; j < j1; j++) out[j] += acc[j - j0];
    }
}

/* ---- run state ----------------------------------------------------------------------------- */

typedef struct {
    float *ln1, *mean1, *rstd1; /* (M, C), (M), (M) */
    float *qkv;                 /* (M, 3C) */
    float *att;                 /* (M, C) attention output, heads concatenated */
    float *lse;                 /* (B, H, T) */
    float *res1;                /* (M, C) stream after the attention branch */
    float *ln2, *mean2, *rstd2; /* (M, C), (M), (M) */
    float *u;                   /* (M, F) MLP pre-activation (GELU only; NULL for ReLU) */
    float *h;                   /* (M, F) MLP activation */
} block_acts;

struct attn_gpt_state {
    const attn_gpt_model *model;
    attn_gpt_config cfg;
    int capB, capT;
    int B, T;
    bool has_fwd, has_loss;
    bool training;
    uint64_t seed, step;
    int row0;                   /* global index of the first sequence (dropout element offset) */
    attn_precision precision;   /* of every matrix product (attn_gpt_state_set_precision) */
    int32_t *ids;               /* (B, T) the last forward's ids */
    float **x;                  /* [L + 1] (M, C): x[l] block l's input, x[L] the last output */
    block_acts *a;              /* [L] */
    float *lnf, *meanf, *rstdf; /* (M, C), (M), (M) */
    float *logits;              /* (M, V); d loss / d logits after attn_gpt_loss */
    float *tmp;                 /* (M, C) branch output (dropout path), backward scratch */
    float *g;                   /* (M, C) d loss / d stream */
    float *g2;                  /* (M, C) backward scratch */
    float *gbig;                /* (M, max(3C, F)) backward scratch */
    uint64_t *masks;            /* (2L + 1, mask_words) keep bits of each dropout site */
    size_t mask_words;          /* ceil(M·C / 64) */
    attn_gpt_capture cap;
    attn_arena arena;             /* every buffer above */
};

static void *salloc_bytes(attn_gpt_state *st, size_t nbytes) {
    return attn_arena_calloc(&st->arena, nbytes);
}

static float *salloc(attn_gpt_state *st, size_t n) { return salloc_bytes(st, n * sizeof(float)); }

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
    const bool gelu = c->activation != ATTN_ACT_RELU;
    const double M = (double)B * T;
    const double per_block = M * (C * 7.0 + 4 + (gelu ? 2.0 : 1.0) * F) + M * c->n_head;
    double total =
        M * C * (L + 1) + L * per_block + M * (C + 2) + M * V + M * C * 3 + M * fmax(3.0 * C, F);
    if (total > (double)(ATTN_MAX_BUFFER_BYTES / sizeof(float)) ||
        M * fmax(3.0 * C, F) > INT32_MAX || M > INT32_MAX)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "gpt state: B=%d T=%d needs %.3g floats, too large",
                         B, T, total);
    attn_gpt_state *st = attn_calloc(sizeof *st);
    if (!st) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt state: out of memory");
    st->model = m;
    st->cfg = *c;
    st->capB = B, st->capT = T;
    const size_t Mz = (size_t)B * T, Cz = (size_t)C, Fz = (size_t)F;
    st->ids = salloc_bytes(st, Mz * sizeof(int32_t));
    st->x = salloc_bytes(st, (size_t)(L + 1) * sizeof(float *));
    st->a = salloc_bytes(st, (size_t)L * sizeof(block_acts));
    if (st->arena.oom) goto oom;
    for (int l = 0; l <= L; l++) st->x[l] = salloc(st, Mz * Cz);
    for (int l = 0; l < L; l++) {
        block_acts *a = &st->a[l];
        a->ln1 = salloc(st, Mz * Cz);
        a->mean1 = salloc(st, Mz);
        a->rstd1 = salloc(st, Mz);
        a->qkv = salloc(st, Mz * 3 * Cz);
        a->att = salloc(st, Mz * Cz);
        a->lse = salloc(st, Mz * (size_t)c->n_head);
        a->res1 = salloc(st, Mz * Cz);
        a->ln2 = salloc(st, Mz * Cz);
        a->mean2 = salloc(st, Mz);
        a->rstd2 = salloc(st, Mz);
        a->u = gelu ? salloc(st, Mz * Fz) : NULL;
        a->h = salloc(st, Mz * Fz);
    }
    st->lnf = salloc(st, Mz * Cz);
    st->meanf = salloc(st, Mz);
    st->rstdf = salloc(st, Mz);
    st->logits = salloc(st, Mz * (size_t)V);
    st->tmp = salloc(st, Mz * Cz);
    st->g = salloc(st, Mz * Cz);
    st->g2 = salloc(st, Mz * Cz);
    st->gbig = salloc(st, Mz * ATTN_MAX(3 * Cz, Fz));
    st->mask_words = (Mz * Cz + 63) / 64;
    st->masks = salloc_bytes(st, (size_t)(2 * L + 1) * st->mask_words * sizeof(uint64_t));
    if (st->arena.oom) goto oom;
    *out = st;
    return ATTN_STATUS_OK;
oom:
    attn_gpt_state_free(st);
    return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "gpt state: out of memory for B=%d T=%d", B, T);
}

void attn_gpt_set_train(attn_gpt_state *st, bool training, uint64_t seed, uint64_t step) {
    if (!st) return;
    st->training = training;
    st->seed = seed;
    st->step = step;
}

void attn_gpt_set_capture(attn_gpt_state *st, const attn_gpt_capture *cap) {
    if (!st) return;
    if (cap)
        st->cap = *cap;
    else
        memset(&st->cap, 0, sizeof st->cap);
}

const float *attn_gpt_logits(const attn_gpt_state *st) {
    return st && st->has_fwd && !st->has_loss ? st->logits : NULL;
}

/* Dropout sites: 0 the embeddings, 1 + 2l block l's attention branch, 2 + 2l its MLP branch. */
#define SITE_EMB 0u
#define SITE_ATTN(l) (1u + 2u * (uint32_t)(l))
#define SITE_MLP(l) (2u + 2u * (uint32_t)(l))

static uint64_t *site_mask(const attn_gpt_state *st, uint32_t site) {
    return st->masks + (size_t)site * st->mask_words;
}

/* Element offset of this state's first row in the whole batch's dropout masks (row0 sequences of
 * the current T before it): a replica of a data-parallel step draws the whole-batch run's masks. */
static size_t drop_off(const attn_gpt_state *st) {
    return (size_t)st->row0 * (size_t)st->T * (size_t)st->cfg.n_embd;
}

void gpt_state_set_row0(attn_gpt_state *st, int row0) {
    if (st) st->row0 = row0 > 0 ? row0 : 0;
}

void gpt_layout_grads(attn_gpt_model *m, float *grads, attn_gpt_weights *g) {
    (void)layout(m, grads, g, false);
}

/* Every matrix product of the forward and backward: attn_gemm in the state's precision. */
static attn_status mm(const attn_gpt_state *st, bool trans_a, bool trans_b, int M, int N, int K,
                      float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                      float *C, int ldc, const float *bias, attn_act act) {
    return attn_gemm_precision(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                               bias, act, st->precision);
}

attn_status attn_gpt_state_set_precision(attn_gpt_state *st, attn_precision precision) {
    if (!st) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "gpt: NULL state");
    ATTN_TRY(attn_precision_check(precision, "gpt"));
    st->precision = precision;
    return ATTN_STATUS_OK;
}

/* out (M, C) = x + drop(A (M, K) · W (K, C) + bias): the residual add of a branch. Without
 * dropout the product is accumulated straight into a copy of the stream (beta = 1). */
static attn_status branch_out(attn_gpt_state *st, uint32_t site, int M, int K, const float *A,
                              const float *W, const float *bias, const float *x, float *out) {
    const int C = st->cfg.n_embd;
    const size_t n = (size_t)M * C;
    const float p = st->cfg.resid_pdrop;
    if (st->training && p > 0.0f) {
        ATTN_TRY(mm(st, false, false, M, C, K, 1.0f, A, K, W, C, 0.0f, st->tmp, C, bias,
                    ATTN_ACT_NONE));
        gpt_dropout_fwd(st->seed, st->step, site, p, drop_off(st), n, x, st->tmp, out,
                        site_mask(st, site));
        return ATTN_STATUS_OK;
    }
    memcpy(out, x, n * sizeof(float));
    return mm(st, false, false, M, C, K, 1.0f, A, K, W, C, 1.0f, out, C, bias, ATTN_ACT_NONE);
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
    if (st->training && c->attn_pdrop > 0.0f)
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "gpt forward: attn_pdrop = %g (dropout on attention probabilities) is not "
                         "supported in training by the fused attention kernel; set \"attn_pdrop\": "
                         "0 in config.json",
                         (double)c->attn_pdrop);
    ATTN_TRY(gpt_check_ids("gpt forward", c, B, T, ids));
    st->has_fwd = st->has_loss = false;
    st->B = B, st->T = T;
    memcpy(st->ids, ids, (size_t)B * T * sizeof(int32_t));
    const int C = c->n_embd, F = attn_gpt_inner(c), V = c->vocab_size, L = c->n_layer;
    const int M = B * T, H = c->n_head;
    const float eps = c->layer_norm_epsilon;
    const size_t n = (size_t)M * C;

    gpt_embed(m, B, T, 0, ids, st->x[0]);
    if (st->training && c->embd_pdrop > 0.0f)
        gpt_dropout_fwd(st->seed, st->step, SITE_EMB, c->embd_pdrop, drop_off(st), n, NULL,
                        st->x[0], st->x[0], site_mask(st, SITE_EMB));
    for (int l = 0; l < L; l++) {
        const attn_gpt_block *W = &m->w.h[l];
        block_acts *a = &st->a[l];
        ATTN_TRY(attn_layernorm_forward(M, C, st->x[l], W->ln_1_w, W->ln_1_b, eps, a->ln1, a->mean1,
                                        a->rstd1));
        ATTN_TRY(mm(st, false, false, M, 3 * C, C, 1.0f, a->ln1, C, W->attn_w, 3 * C, 0.0f,
                    a->qkv, 3 * C, W->attn_b, ATTN_ACT_NONE));
        attn_attention_params p = attn_attention_default_params(B, H, T, T, C / H);
        p.scale = gpt_attn_scale(c, l);
        p.causal = true;
        p.ldq = p.ldk = p.ldv = 3 * C;
        p.ldo = C;
        ATTN_TRY(attn_attention_forward(&p, a->qkv, a->qkv + C, a->qkv + 2 * C, a->att, a->lse,
                                        st->cap.attn_probs ? st->cap.attn_probs[l] : NULL));
        ATTN_TRY(branch_out(st, SITE_ATTN(l), M, C, a->att, W->attn_proj_w, W->attn_proj_b,
                            st->x[l], a->res1));
        ATTN_TRY(attn_layernorm_forward(M, C, a->res1, W->ln_2_w, W->ln_2_b, eps, a->ln2, a->mean2,
                                        a->rstd2));
        if (a->u) {
            /* GELU's derivative needs the pre-activation: keep u, activate separately. */
            ATTN_TRY(mm(st, false, false, M, F, C, 1.0f, a->ln2, C, W->fc_w, F, 0.0f, a->u, F,
                        W->fc_b, ATTN_ACT_NONE));
            ATTN_TRY(attn_act_forward(c->activation, (size_t)M * F, a->u, a->h));
        } else {
            /* ReLU fused into the epilogue; backward recovers relu' from h (h > 0 iff u > 0). */
            ATTN_TRY(mm(st, false, false, M, F, C, 1.0f, a->ln2, C, W->fc_w, F, 0.0f, a->h, F,
                        W->fc_b, ATTN_ACT_RELU));
        }
        ATTN_TRY(branch_out(st, SITE_MLP(l), M, F, a->h, W->mlp_proj_w, W->mlp_proj_b, a->res1,
                            st->x[l + 1]));
    }
    ATTN_TRY(attn_layernorm_forward(M, C, st->x[L], m->w.ln_f_w, m->w.ln_f_b, eps, st->lnf,
                                    st->meanf, st->rstdf));
    ATTN_TRY(mm(st, false, true, M, V, C, 1.0f, st->lnf, C, m->w.lm_head, C, 0.0f, st->logits, V,
                NULL, ATTN_ACT_NONE));
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

/* G (M, C) += d LN(x) / d x applied to dy (M, C), with the LN's parameter gradients accumulated;
 * tmp (M, C) is scratch. */
static attn_status ln_back_add(int M, int C, const float *x, const float *w, const float *mean,
                               const float *rstd, const float *dy, float *dw, float *db, float *tmp,
                               float *G) {
    ATTN_TRY(attn_layernorm_backward(M, C, x, w, mean, rstd, dy, tmp, dw, db));
    add_to((size_t)M * C, G, tmp, G);
    return ATTN_STATUS_OK;
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
    const int B = st->B, T = st->T, C = c->n_embd, F = attn_gpt_inner(c), V = c->vocab_size;
    const int L = c->n_layer, M = B * T, H = c->n_head;
    const size_t n = (size_t)M * C;
    const float pr = c->resid_pdrop;
    const bool dropping = st->training && pr > 0.0f;
    float *G = st->g, *dl = st->logits;

    /* Logits = lnf · lm_headᵀ: d lnf = dl · lm_head; d lm_head += dlᵀ · lnf. */
    ATTN_TRY(mm(st, false, false, M, C, V, 1.0f, dl, V, m->w.lm_head, C, 0.0f, st->tmp, C, NULL,
                ATTN_ACT_NONE));
    ATTN_TRY(mm(st, true, false, V, C, M, 1.0f, dl, V, st->lnf, C, 1.0f, m->g.lm_head, C, NULL,
                ATTN_ACT_NONE));
    ATTN_TRY(attn_layernorm_backward(M, C, st->x[L], m->w.ln_f_w, st->meanf, st->rstdf, st->tmp, G,
                                     m->g.ln_f_w, m->g.ln_f_b));

    for (int l = L - 1; l >= 0; l--) {
        const attn_gpt_block *W = &m->w.h[l];
        attn_gpt_block *Gw = &m->g.h[l];
        block_acts *a = &st->a[l];
        /* MLP branch: dy = drop(G). */
        const float *dy = G;
        if (dropping) {
            gpt_dropout_bwd(pr, n, site_mask(st, SITE_MLP(l)), G, st->tmp);
            dy = st->tmp;
        }
        float *dh = st->gbig; /* (M, F) */
        ATTN_TRY(mm(st, true, false, F, C, M, 1.0f, a->h, F, dy, C, 1.0f, Gw->mlp_proj_w, C,
                    NULL, ATTN_ACT_NONE));
        colsum_add(M, C, dy, Gw->mlp_proj_b);
        ATTN_TRY(mm(st, false, true, M, F, C, 1.0f, dy, C, W->mlp_proj_w, C, 0.0f, dh, F, NULL,
                    ATTN_ACT_NONE));
        if (a->u)
            ATTN_TRY(attn_act_backward(c->activation, (size_t)M * F, a->u, dh, dh));
        else
            ATTN_TRY(attn_act_backward(ATTN_ACT_RELU, (size_t)M * F, a->h, dh, dh));
        ATTN_TRY(mm(st, true, false, C, F, M, 1.0f, a->ln2, C, dh, F, 1.0f, Gw->fc_w, F, NULL,
                    ATTN_ACT_NONE));
        colsum_add(M, F, dh, Gw->fc_b);
        ATTN_TRY(mm(st, false, true, M, C, F, 1.0f, dh, F, W->fc_w, F, 0.0f, st->g2, C, NULL,
                    ATTN_ACT_NONE));
        /* G is now d/d res1: the skip path plus the LN's input gradient. tmp is free again. */
        ATTN_TRY(ln_back_add(M, C, a->res1, W->ln_2_w, a->mean2, a->rstd2, st->g2, Gw->ln_2_w,
                             Gw->ln_2_b, st->tmp, G));

        /* Attention branch. */
        dy = G;
        if (dropping) {
            gpt_dropout_bwd(pr, n, site_mask(st, SITE_ATTN(l)), G, st->tmp);
            dy = st->tmp;
        }
        ATTN_TRY(mm(st, true, false, C, C, M, 1.0f, a->att, C, dy, C, 1.0f, Gw->attn_proj_w, C,
                    NULL, ATTN_ACT_NONE));
        colsum_add(M, C, dy, Gw->attn_proj_b);
        float *datt = st->g2;
        ATTN_TRY(mm(st, false, true, M, C, C, 1.0f, dy, C, W->attn_proj_w, C, 0.0f, datt, C,
                    NULL, ATTN_ACT_NONE));
        float *dqkv = st->gbig; /* (M, 3C) */
        attn_attention_params p = attn_attention_default_params(B, H, T, T, C / H);
        p.scale = gpt_attn_scale(c, l);
        p.causal = true;
        p.ldq = p.ldk = p.ldv = 3 * C;
        p.ldo = C;
        ATTN_TRY(attn_attention_backward(&p, a->qkv, a->qkv + C, a->qkv + 2 * C, a->att, a->lse,
                                         datt, dqkv, dqkv + C, dqkv + 2 * C));
        ATTN_TRY(mm(st, true, false, C, 3 * C, M, 1.0f, a->ln1, C, dqkv, 3 * C, 1.0f, Gw->attn_w,
                    3 * C, NULL, ATTN_ACT_NONE));
        colsum_add(M, 3 * C, dqkv, Gw->attn_b);
        ATTN_TRY(mm(st, false, true, M, C, 3 * C, 1.0f, dqkv, 3 * C, W->attn_w, 3 * C, 0.0f,
                    st->g2, C, NULL, ATTN_ACT_NONE));
        ATTN_TRY(ln_back_add(M, C, st->x[l], W->ln_1_w, a->mean1, a->rstd1, st->g2, Gw->ln_1_w,
                             Gw->ln_1_b, st->tmp, G));
    }

    /* Embeddings: x0 = drop(wte[id] + wpe[t]). */
    if (st->training && c->embd_pdrop > 0.0f)
        gpt_dropout_bwd(c->embd_pdrop, n, site_mask(st, SITE_EMB), G, G);
    ATTN_TRY(attn_embedding_backward(M, V, C, st->ids, G, m->g.wte));
    float *gwpe = m->g.wpe;
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (int t = 0; t < T; t++) {
        float *pg = gwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *row = G + ((size_t)b * T + t) * C;
            for (int i = 0; i < C; i++) pg[i] += row[i];
        }
    }
    st->has_loss = false;
    st->has_fwd = false;
    return ATTN_STATUS_OK;
}

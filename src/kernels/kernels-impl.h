/* kernels-impl.h — the backend interface behind attn_kernels.h. Internal.
 *
 * A backend is a table of function pointers. The public functions in dispatch.c validate their
 * arguments once and then call the current table, so a backend function may assume valid input.
 * A CUDA backend later adds one more table; model code only calls attn_kernels.h.
 *
 * SIMD sources (*_simd.c) are compiled once per ISA: with -mavx2 -mfma -DATTN_ISA=2 and with
 * -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -DATTN_ISA=512; ATTN_FN(name) appends the ISA
 * suffix (_avx2 / _avx512) so both copies link into one library. Reference sources (*_ref.c) are
 * compiled once, without ISA flags, single-threaded. */
#ifndef ATTN_KERNELS_IMPL_H
#define ATTN_KERNELS_IMPL_H

#include "attn_kernels.h"
#include "../core/core-impl.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(ATTN_ISA) && ATTN_ISA == 512
#define ATTN_FN(name) name##_avx512
#elif defined(ATTN_ISA) && ATTN_ISA == 2
#define ATTN_FN(name) name##_avx2
#else
#define ATTN_FN(name) name##_ref
#endif

typedef void (*attn_gemm_fn)(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                             const float *A, int lda, const float *B, int ldb, float beta,
                             float *C, int ldc, const float *bias, attn_act act);
typedef void (*attn_softmax_forward_fn)(int N, int D, const float *x, float *y);
typedef void (*attn_log_softmax_forward_fn)(int N, int D, const float *x, float *y);
typedef void (*attn_softmax_backward_fn)(int N, int D, const float *y, const float *dy,
                                         float *dx);
typedef void (*attn_layernorm_forward_fn)(int N, int C, const float *x, const float *w,
                                          const float *b, float eps, float *y, float *mean,
                                          float *rstd);
typedef void (*attn_layernorm_backward_fn)(int N, int C, const float *x, const float *w,
                                           const float *mean, const float *rstd,
                                           const float *dy, float *dx, float *dw, float *db);
typedef void (*attn_act_forward_fn)(attn_act act, size_t n, const float *x, float *y);
typedef void (*attn_act_backward_fn)(attn_act act, size_t n, const float *x, const float *dy,
                                     float *dx);
typedef void (*attn_rmsnorm_forward_fn)(int N, int C, const float *x, const float *w, float eps,
                                        float *y, float *rstd);
typedef void (*attn_rmsnorm_backward_fn)(int N, int C, const float *x, const float *w,
                                         const float *rstd, const float *dy, float *dx,
                                         float *dw);
/* pos was checked against the tables' P in dispatch.c, which the kernels do not need. */
typedef void (*attn_rope_apply_fn)(attn_rope_mode mode, int N, int H, int D, int R, float *x,
                                   int ld, const int32_t *pos, const float *cos_t,
                                   const float *sin_t, bool inverse);
typedef void (*attn_glu_forward_fn)(attn_act act, int N, int F, const float *g, int ldg,
                                    const float *u, int ldu, float *h, int ldh);
typedef void (*attn_glu_backward_fn)(attn_act act, int N, int F, const float *g, int ldg,
                                     const float *u, int ldu, const float *dh, int ldh, float *dg,
                                     int lddg, float *du, int lddu);
typedef void (*attn_embedding_forward_fn)(int N, int V, int C, const int32_t *ids,
                                          const float *table, float *out);
typedef void (*attn_embedding_backward_fn)(int N, int V, int C, const int32_t *ids,
                                           const float *dout, float *dtable);
typedef void (*attn_cross_entropy_fn)(int N, int V, const float *logits, const int32_t *targets,
                                      int32_t ignore_index, float label_smoothing, float *loss,
                                      float *dlogits);
/* lse and probs may be NULL. */
typedef void (*attn_attention_forward_fn)(const attn_attention_params *p, const float *q,
                                          const float *k, const float *v, float *o, float *lse,
                                          float *probs);
typedef void (*attn_attention_backward_fn)(const attn_attention_params *p, const float *q,
                                           const float *k, const float *v, const float *o,
                                           const float *lse, const float *do_, float *dq,
                                           float *dk, float *dv);

typedef struct {
    attn_backend id;
    attn_gemm_fn gemm;
    attn_softmax_forward_fn softmax_forward;
    attn_softmax_backward_fn softmax_backward;
    attn_log_softmax_forward_fn log_softmax_forward;
    attn_layernorm_forward_fn layernorm_forward;
    attn_layernorm_backward_fn layernorm_backward;
    attn_act_forward_fn act_forward;
    attn_act_backward_fn act_backward;
    attn_rmsnorm_forward_fn rmsnorm_forward;
    attn_rmsnorm_backward_fn rmsnorm_backward;
    attn_rope_apply_fn rope_apply;
    attn_glu_forward_fn glu_forward;
    attn_glu_backward_fn glu_backward;
    attn_embedding_forward_fn embedding_forward;
    attn_embedding_backward_fn embedding_backward;
    attn_cross_entropy_fn cross_entropy;
    attn_attention_forward_fn attention_forward;
    attn_attention_backward_fn attention_backward;
} attn_kernel_table;

/* The table of the current backend (resolves ATTN_BACKEND on first use). */
const attn_kernel_table *attn_kernels_current(void);

/* Adds M·N·K to attn_kernels_multiply_adds()'s count (dispatch.c). */
void attn_kernels_count(int M, int N, int K);

/* Every kernel in three flavours. */
#define ATTN_DECLARE_KERNELS(sfx)                                                                 \
    void attn_gemm_##sfx(bool, bool, int, int, int, float, const float *, int, const float *,    \
                         int, float, float *, int, const float *, attn_act);                     \
    void attn_softmax_forward_##sfx(int, int, const float *, float *);                           \
    void attn_softmax_backward_##sfx(int, int, const float *, const float *, float *);           \
    void attn_log_softmax_forward_##sfx(int, int, const float *, float *);                       \
    void attn_layernorm_forward_##sfx(int, int, const float *, const float *, const float *,     \
                                      float, float *, float *, float *);                         \
    void attn_layernorm_backward_##sfx(int, int, const float *, const float *, const float *,    \
                                       const float *, const float *, float *, float *, float *); \
    void attn_act_forward_##sfx(attn_act, size_t, const float *, float *);                       \
    void attn_act_backward_##sfx(attn_act, size_t, const float *, const float *, float *);       \
    void attn_rmsnorm_forward_##sfx(int, int, const float *, const float *, float, float *,      \
                                    float *);                                                    \
    void attn_rmsnorm_backward_##sfx(int, int, const float *, const float *, const float *,      \
                                     const float *, float *, float *);                           \
    void attn_rope_apply_##sfx(attn_rope_mode, int, int, int, int, float *, int, const int32_t *, \
                               const float *, const float *, bool);                              \
    void attn_glu_forward_##sfx(attn_act, int, int, const float *, int, const float *, int,      \
                                float *, int);                                                   \
    void attn_glu_backward_##sfx(attn_act, int, int, const float *, int, const float *, int,     \
                                 const float *, int, float *, int, float *, int);                \
    void attn_embedding_forward_##sfx(int, int, int, const int32_t *, const float *, float *);   \
    void attn_embedding_backward_##sfx(int, int, int, const int32_t *, const float *, float *);  \
    void attn_cross_entropy_##sfx(int, int, const float *, const int32_t *, int32_t, float,      \
                                  float *, float *);                                             \
    void attn_attention_forward_##sfx(const attn_attention_params *, const float *,              \
                                      const float *, const float *, float *, float *, float *);  \
    void attn_attention_backward_##sfx(const attn_attention_params *, const float *,             \
                                       const float *, const float *, const float *,              \
                                       const float *, const float *, float *, float *, float *);

ATTN_DECLARE_KERNELS(ref)
ATTN_DECLARE_KERNELS(avx2)
ATTN_DECLARE_KERNELS(avx512)

/* attn_rope_tables' one implementation (elementwise_ref.c): libm's double cos and sin rounded to
 * float give the same tables on every backend, so there is no SIMD version (it runs once per
 * model load, P·R/2 values). */
void attn_rope_tables_impl(int P, int R, const float *inv_freq, float *cos_t, float *sin_t);

/* ---- BF16 pre-packed B (layout in attn_kernels.h, attn_gemm_pack_b_precision) ------------ */

#define ATTN_BF16_NR 32 /* columns per panel */

/* Rows of a K block: equal blocks of at most 512. */
static inline int attn_bf16_kb(int K) {
    int nk = (K + 511) / 512;
    return nk > 1 ? (K + nk - 1) / nk : K;
}
/* The activation of one float, in plain C: the reference GEMMs' epilogue (gemm_ref.c,
 * gemm_bf16.c). */
static inline float attn_act_scalar(float x, attn_act act) {
    switch (act) {
    case ATTN_ACT_RELU: return x > 0.0f ? x : (x == x ? 0.0f : x); /* NaN stays NaN */
    case ATTN_ACT_GELU_TANH:
        return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case ATTN_ACT_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case ATTN_ACT_SILU: {
        /* sigmoid from e = exp(−|x|) <= 1 (no overflow, no cancellation); −inf as −FLT_MAX so
         * that −inf·0 gives −0 (vmath.h's av_silu does the same). */
        float e = expf(-fabsf(x)), r = 1.0f / (1.0f + e);
        return (x == -INFINITY ? -FLT_MAX : x) * (x < 0.0f ? e * r : r);
    }
    case ATTN_ACT_NONE: break;
    }
    return x;
}

/* uint16 elements of the packed matrix (at least 2). */
static inline size_t attn_bf16_elems(int K, int N) {
    const int kb = attn_bf16_kb(K);
    const size_t nblk = kb > 0 ? ((size_t)K + kb - 1) / kb : 0;
    const size_t Np = ((size_t)N + ATTN_BF16_NR - 1) / ATTN_BF16_NR * ATTN_BF16_NR;
    const size_t n = nblk * (((size_t)kb + 1) / 2) * Np * 2;
    return n > 2 ? n : 2;
}
/* float32 -> bfloat16 as VCVTNEPS2BF16 does it: round to nearest even, subnormals to signed
 * zero, NaN kept quiet. */
static inline uint16_t attn_bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float attn_bf16_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* gemm_bf16.c: the portable packer and the reference product (double sums of the rounded
 * operands); gemm_simd.c (avx512 only): the VDPBF16PS product. */
void attn_gemm_bf16_pack(bool trans_b, int K, int N, const float *B, int ldb, uint16_t *P);
void attn_gemm_bf16_run_ref(bool trans_a, int M, int N, int K, float alpha, const float *A,
                            int lda, const uint16_t *P, float beta, float *C, int ldc,
                            const float *bias, attn_act act);
void attn_gemm_bf16_run_avx512(bool trans_a, int M, int N, int K, float alpha, const float *A,
                               int lda, const uint16_t *P, float beta, float *C, int ldc,
                               const float *bias, attn_act act);
/* The general BF16 product (attn_gemm_precision): gemm_bf16.c's reference (double sums of the
 * rounded operands) and gemm_simd.c's kernels with both operands packed per call. */
void attn_gemm_bf16_ref(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb, float beta, float *C,
                        int ldc, const float *bias, attn_act act);
void attn_gemm_bf16_avx512(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta, float *C,
                           int ldc, const float *bias, attn_act act);
/* Whether this CPU executes AVX512-BF16 (CPUID.(7,1):EAX bit 5). */
bool attn_cpu_has_avx512_bf16(void);

/* ---- GEMM pieces for other kernels (gemm_simd.c, per ISA) ---------------------------------- */

/* A matrix R (N, K) handed to the blocked GEMM a few rows at a time, e.g. dequantized on the
 * fly (quant_simd.c): rows(ctx, j0, n, k0, kc, out) writes out (n, kc) = R[j0 .. j0+n, k0 ..
 * k0+kc), n <= the ISA's vector length, k0 and kc multiples of kgrain (or kc = K − k0). */
typedef struct {
    void (*rows)(const void *ctx, int j0, int n, int k0, int kc, float *out);
    const void *ctx;
    int kgrain;
} attn_gemm_rowsrc;

/* C (M, N) = act(A (M, K; lda) · Rᵀ + beta·C + bias (N) or NULL) with R from src: attn_gemm's
 * blocked algorithm and microkernels, its B panels filled from src. false (nothing done) when out
 * of memory for the pack buffers. */
#define ATTN_GEMM_PIECES_DECLARE(sfx)                                                            \
    bool attn_gemm_rows_##sfx(int M, int N, int K, const float *A, int lda,                      \
                              const attn_gemm_rowsrc *src, float beta, float *C, int ldc,        \
                              const float *bias, attn_act act);                                  \
    void attn_gemm_store_row_##sfx(float *c, int n, const float *acc, float alpha, float beta,   \
                                   const float *bias, attn_act act);
/* attn_gemm_store_row: c (n) = act(alpha·acc (n) + beta·c + bias (n) or NULL), beta == 0 never
 * reading c (the small-M epilogue). */
ATTN_GEMM_PIECES_DECLARE(avx2)
ATTN_GEMM_PIECES_DECLARE(avx512)

#endif

/* quant-impl.h — internals of the quantized types (attn_quant.h) shared by quant.c (formats,
 * quantizers, validation), quant_ref.c (reference products) and quant_simd.c (SIMD products).
 *
 * Blocks are read through byte pointers and the offsets below, never through structs, so that
 * weights at any address (a mapped file) are read without misaligned accesses; half-precision
 * fields are little-endian. */
#ifndef ATTN_QUANT_IMPL_H
#define ATTN_QUANT_IMPL_H

#include "attn_quant.h"
#include "kernels-impl.h"

#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Byte offsets inside the blocks (attn_quant.h describes the fields). */
enum {
    QK_32 = 32,  /* elements of the small blocks */
    QK_K = 256,  /* elements of the k-quant super-blocks */
    Q8_0_QS = 2, /* d | qs[32] */
    Q4_0_QS = 2, /* d | qs[16] */
    Q4_1_M = 2,  /* d | m | qs[16] */
    Q4_1_QS = 4,
    Q5_0_QH = 2, /* d | qh[4] | qs[16] */
    Q5_0_QS = 6,
    Q5_1_M = 2, /* d | m | qh[4] | qs[16] */
    Q5_1_QH = 4,
    Q5_1_QS = 8,
    QK4_DMIN = 2, /* Q4_K, Q5_K: d | dmin | scales[12] | (qh[32] |) qs[128] */
    QK4_SC = 4,
    Q4_K_QS = 16,
    Q5_K_QH = 16,
    Q5_K_QS = 48,
    Q6_K_QH = 128, /* ql[128] | qh[64] | scales[16] | d */
    Q6_K_SC = 192,
    Q6_K_D = 208
};

static inline uint16_t q_rd16(const uint8_t *p) { return (uint16_t)(p[0] | (unsigned)p[1] << 8); }
static inline uint32_t q_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void q_wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* binary16 -> float32, exact (attn_quant_f16_to_f32). */
static inline float q_f16(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 31u, m = h & 0x3ffu, u;
    if (e == 31) {
        u = sign | 0x7f800000u | m << 13; /* inf, NaN (payload kept) */
    } else if (e) {
        u = sign | (e + 112u) << 23 | m << 13;
    } else if (m) { /* subnormal: normalize */
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        u = sign | e << 23 | (m & 0x3ffu) << 13;
    } else {
        u = sign;
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline float q_f16_at(const uint8_t *p) { return q_f16(q_rd16(p)); }

/* Element i of attn_quant_f32_to_f16_n: src[i] rounded to binary16 into dst[i] and back to float
 * into back[i] (either may be NULL). */
static inline void q_f16_round_at(const float *src, uint16_t *dst, float *back, size_t i) {
    const uint16_t h = attn_quant_f32_to_f16(src[i]);
    if (dst) dst[i] = h;
    if (back) back[i] = q_f16(h);
}

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block's scales[12]. */
static inline void q_k4_scale_min(int j, const uint8_t *s, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* One block's B elements dequantized into out (quant.c; the formats' exact float32 operations). */
void attn_quant_block_dequant(attn_qtype t, const uint8_t *blk, float *out);

/* y (M, N) of attn_quant_gemm, arguments validated (quant_ref.c, quant_simd.c). */
#define ATTN_QUANT_GEMM_DECLARE(sfx)                                                             \
    void attn_quant_gemm_##sfx(int M, int N, int K, const float *x, int ldx, attn_qtype t,       \
                               const void *w, size_t row_bytes, float beta, float *y, int ldy,   \
                               const float *bias, attn_act act, attn_quant_act qact);
ATTN_QUANT_GEMM_DECLARE(ref)
/* The SIMD ones: chunked (attn_quant_gemm_batch) runs any M on the decoding path, in chunks of 8
 * rows per strip of W. */
#define ATTN_QUANT_GEMM_SIMD_DECLARE(sfx)                                                        \
    void attn_quant_gemm_##sfx(int M, int N, int K, const float *x, int ldx, attn_qtype t,       \
                               const void *w, size_t row_bytes, float beta, float *y, int ldy,   \
                               const float *bias, attn_act act, attn_quant_act qact,             \
                               bool chunked);
ATTN_QUANT_GEMM_SIMD_DECLARE(avx2)
ATTN_QUANT_GEMM_SIMD_DECLARE(avx512)

/* ---- the x8 layout (attn_quant.h: attn_quant_pack) ---- */
/* Bytes of one panel group (8 blocks) and the offset of its codes; 0 for a type not packed. */
static inline size_t qx8_group_bytes(attn_qtype t) {
    return t == ATTN_QTYPE_Q8_0 ? 272 : t == ATTN_QTYPE_Q4_0 ? 144 : t == ATTN_QTYPE_Q4_1 ? 160 : 0;
}
static inline size_t qx8_codes_off(attn_qtype t) { return t == ATTN_QTYPE_Q4_1 ? 32 : 16; }
/* Row n (< N8) group g's block, in the row layout, into blk (attn_quant_block_bytes bytes). */
static inline void qx8_block(const attn_quant_packed *P, int n, int g, uint8_t *blk) {
    const attn_qtype t = P->type;
    const size_t S = qx8_group_bytes(t);
    const uint8_t *pg = (const uint8_t *)P->data + ((size_t)(n / 8) * (size_t)(P->K / 32) + (size_t)g) * S;
    const int r = n % 8, chunks = t == ATTN_QTYPE_Q8_0 ? 8 : 4;
    const uint8_t *codes = pg + qx8_codes_off(t);
    memcpy(blk, pg + 2 * r, 2); /* d */
    size_t qs = 2;
    if (t == ATTN_QTYPE_Q4_1) memcpy(blk + 2, pg + 16 + 2 * r, 2), qs = 4;
    for (int c = 0; c < chunks; c++) memcpy(blk + qs + 4 * c, codes + 32 * c + 4 * r, 4);
}
/* attn_quant_gemm_packed, arguments validated; false when out of memory (nothing written). */
#define ATTN_QUANT_GEMM_X8_DECLARE(sfx)                                                          \
    bool attn_quant_gemm_x8_##sfx(int M, const float *x, int ldx, const attn_quant_packed *P,    \
                                  float beta, float *y, int ldy, const float *bias,              \
                                  attn_act act, attn_quant_act qact, bool chunked);
ATTN_QUANT_GEMM_X8_DECLARE(avx2)
ATTN_QUANT_GEMM_X8_DECLARE(avx512)

/* ---- threads and CPU features, for every product file ---- */
#ifndef QUANT_PARALLEL_MIN
#define QUANT_PARALLEL_MIN (64 * 64 * 64) /* multiply-adds below which one thread runs it */
#endif

/* Threads for a product of M·N·K multiply-adds over `units` units of work (1 inside a parallel
 * region or below QUANT_PARALLEL_MIN). */
static inline int quant_team_for(int M, int N, int K, int units) {
    int nt = 1;
#ifdef _OPENMP
    if (!omp_in_parallel() && (double)M * N * K >= (double)QUANT_PARALLEL_MIN)
        nt = omp_get_max_threads();
#endif
    if (nt > units) nt = units;
    return nt < 1 ? 1 : nt;
}

/* This thread's contiguous share [*i0, *i1) of n units inside a parallel region (all of them
 * outside one); true for the team's last thread. */
static inline bool quant_thread_share(int n, int *i0, int *i1) {
    int t = 0, team = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    team = omp_get_num_threads();
#endif
    *i0 = (int)((long)n * t / team);
    *i1 = (int)((long)n * (t + 1) / team);
    return t == team - 1;
}

/* Whether this CPU has AVX512-VNNI (VPDPBUSD). */
static inline bool quant_cpu_vnni(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    return __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

/* ---- the i8 layout (attn_quant.h: ATTN_QTYPE_I8; quant_i8.c, quant_i8_simd.c) ---- */
typedef struct {
    int M, K, N;
    const int8_t *w;     /* (N16/16, K/4, 16, 4) the packed codes */
    const float *wd;     /* (N16) the rows' scales */
    const int32_t *nsum; /* (N16) −128 · Σ of each row's codes */
    const uint8_t *xu;   /* (M, K) the activations' codes + 128 */
    const float *xe;     /* (M) their scales */
    const int8_t *xs;    /* (M, K) the codes themselves (the AVX2 kernel; else NULL) */
    const uint8_t *xa;   /* (M, K) their absolute values (the AVX2 kernel; else NULL) */
    float beta;
    float *y; /* (M, N) row stride ldy */
    int ldy;
    const float *bias; /* (N) or NULL */
    attn_act act;
} i8_job;
/* y = the product on P (ATTN_QTYPE_I8), arguments validated; false when out of memory. */
bool attn_quant_i8_gemm(int M, const float *x, int ldx, const attn_quant_packed *P, float beta,
                        float *y, int ldy, const float *bias, attn_act act);
/* Row n of P (ATTN_QTYPE_I8) dequantized into out (K), arguments validated. */
attn_status attn_quant_i8_dequant_row(const attn_quant_packed *P, int n, float *out);
/* y's outputs n0 .. n0 + nc − 1 of row m from their scaled sums v (nc): fma(y, beta, v), bias,
 * act, one element at a time (the reference's epilogue; the VNNI kernel's vector one gives the
 * same bits for act NONE / RELU). */
static inline void i8_store_plain(const i8_job *j, int m, int n0, int nc, const float *v) {
    float *yr = j->y + (size_t)m * j->ldy + n0;
    for (int c = 0; c < nc; c++) {
        float u = v[c];
        if (j->beta != 0.0f) u = fmaf(yr[c], j->beta, u);
        if (j->bias) u += j->bias[n0 + c];
        yr[c] = attn_act_scalar(u, j->act);
    }
}
/* The AVX2 panels [p0, p1) (also AVX-512 CPUs without VNNI; quant_i8_simd.c). */
void attn_quant_i8_panels_avx2(const i8_job *j, int p0, int p1);
/* The AVX512-VNNI panels [p0, p1) of 16 rows of W (p0 even), every row of x (quant_i8_simd.c;
 * call only on a CPU with AVX512-VNNI). */
void attn_quant_i8_panels_avx512(const i8_job *j, int p0, int p1);
/* A row (n) of x quantized for the i8 product (*d its scale, q its codes + 128): quant_i8.c's
 * i8_row, the same bits, in AVX-512 (quant_i8_simd.c). */
void attn_quant_i8_row_avx512(int n, const float *x, float *d, uint8_t *q);
void attn_quant_i8_row_avx2(int n, const float *x, float *d, uint8_t *q); /* n % 4 == 0 */
/* The AVX2 kernel's planes of n codes + 128 (xu): the codes (xs) and their absolute values (xa). */
void attn_quant_i8_planes_avx2(size_t n, const uint8_t *xu, int8_t *xs, uint8_t *xa);
/* attn_quant_f32_to_f16_n's loop on F16C (quant_simd.c). */
void attn_quant_f16_round_avx2(size_t n, const float *src, uint16_t *dst, float *back);
void attn_quant_f16_round_avx512(size_t n, const float *src, uint16_t *dst, float *back);

#endif

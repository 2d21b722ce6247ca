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

/* ---- the i8 layout (attn_quant.h: ATTN_QTYPE_I8; quant_i8.c, quant_i8_simd.c) ---- */
typedef struct {
    int M, K, N;
    const int8_t *w;     /* (N16/16, K/4, 16, 4) the packed codes */
    const float *wd;     /* (N16) the rows' scales */
    const int32_t *nsum; /* (N16) −128 · Σ of each row's codes */
    const uint8_t *xu;   /* (M, K) the activations' codes + 128 */
    const float *xe;     /* (M) their scales */
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
/* The plain inner loops: panels [p0, p1) (of 16 rows of W) for every row of x. The ref backend
 * runs them as they are (quant_i8.c), the AVX2 one compiled with its flags (quant_i8_simd.c). */
static inline void i8_panels_plain(const i8_job *j, int p0, int p1) {
    const int K = j->K;
    for (int p = p0; p < p1; p++) {
        const int8_t *wp = j->w + (size_t)p * 16 * (size_t)K;
        const int n0 = 16 * p, nc = ATTN_MIN(16, j->N - n0);
        for (int m = 0; m < j->M; m++) {
            const uint8_t *xm = j->xu + (size_t)m * K;
            int32_t acc[16] = {0};
            for (int k4 = 0; k4 < K / 4; k4++)
                for (int c = 0; c < 16; c++)
                    for (int b = 0; b < 4; b++)
                        acc[c] += ((int32_t)xm[4 * k4 + b] - 128) * wp[64 * k4 + 4 * c + b];
            float *yr = j->y + (size_t)m * j->ldy + n0;
            for (int c = 0; c < nc; c++) {
                float v = (float)acc[c] * (j->xe[m] * j->wd[n0 + c]);
                if (j->beta != 0.0f) v = fmaf(yr[c], j->beta, v);
                if (j->bias) v += j->bias[n0 + c];
                yr[c] = attn_act_scalar(v, j->act);
            }
        }
    }
}

void attn_quant_i8_panels_ref(const i8_job *j, int p0, int p1);
void attn_quant_i8_panels_avx2(const i8_job *j, int p0, int p1);
/* The AVX512-VNNI panels [p0, p1) of 16 rows of W (p0 even), every row of x (quant_i8_simd.c;
 * call only on a CPU with AVX512-VNNI). */
void attn_quant_i8_panels_avx512(const i8_job *j, int p0, int p1);
/* A row (n) of x quantized for the i8 product (*d its scale, q its codes + 128): quant_i8.c's
 * i8_row, the same bits, in AVX-512 (quant_i8_simd.c). */
void attn_quant_i8_row_avx512(int n, const float *x, float *d, uint8_t *q);
void attn_quant_i8_row_avx2(int n, const float *x, float *d, uint8_t *q); /* n % 4 == 0 */

#endif

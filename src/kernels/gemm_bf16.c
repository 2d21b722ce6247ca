/* gemm_bf16.c — BF16 pre-packed GEMM (attn_gemm_pack_b_precision, ATTN_PRECISION_BF16): the
 * packer, which is the same for every backend (it runs once per weight matrix), the reference
 * product and the CPU check. The fast product is gemm_simd.c's attn_gemm_bf16_run_avx512.
 *
 * The reference sums the exact products of the rounded operands in double and rounds once, so
 * it is the exact value of what the SIMD kernel approximates with float32 sums: the two agree
 * to float32 accumulation error (tests/test_gemm_bf16.c). */
#include "kernels-impl.h"

#include <math.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

bool attn_cpu_has_avx512_bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a >> 5) & 1u;
#else
    return false;
#endif
}

/* op(B)(k, j) for B stored (K, N), or (N, K) if trans_b. */
static inline float opb(bool trans_b, const float *B, int ldb, int k, int j) {
    return trans_b ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
}

void attn_gemm_bf16_pack(bool trans_b, int K, int N, const float *B, int ldb, uint16_t *P) {
    const int kb = attn_bf16_kb(K);
    const size_t Np = ((size_t)N + ATTN_BF16_NR - 1) / ATTN_BF16_NR * ATTN_BF16_NR;
    memset(P, 0, attn_bf16_elems(K, N) * sizeof *P);
    for (int pc = 0, blk = 0; pc < K; pc += kb, blk++) {
        const int rows = ATTN_MIN(kb, K - pc), kp = (rows + 1) / 2;
        uint16_t *start = P + (size_t)blk * (((size_t)kb + 1) / 2) * Np * 2;
        for (int j = 0; j < N; j++) {
            uint16_t *col = start + (size_t)(j / ATTN_BF16_NR) * kp * 64 + (j % ATTN_BF16_NR) * 2;
            for (int k = 0; k < rows; k++)
                col[(size_t)(k / 2) * 64 + (k & 1)] = attn_bf16_round(opb(trans_b, B, ldb, pc + k, j));
        }
    }
}

void attn_gemm_bf16_run_ref(bool trans_a, int M, int N, int K, float alpha, const float *A,
                            int lda, const uint16_t *P, float beta, float *C, int ldc,
                            const float *bias, attn_act act) {
    const int kb = attn_bf16_kb(K);
    const size_t Np = ((size_t)N + ATTN_BF16_NR - 1) / ATTN_BF16_NR * ATTN_BF16_NR;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++) {
                const int blk = k / kb, pc = blk * kb, kp = (ATTN_MIN(kb, K - pc) + 1) / 2;
                const uint16_t *start = P + (size_t)blk * (((size_t)kb + 1) / 2) * Np * 2;
                const float b = attn_bf16_float(start[(size_t)(j / ATTN_BF16_NR) * kp * 64 +
                                                      (size_t)((k - pc) / 2) * 64 +
                                                      (j % ATTN_BF16_NR) * 2 + ((k - pc) & 1)]);
                const float a = attn_bf16_float(attn_bf16_round(
                    trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]));
                s += (double)a * b;
            }
            float *c = C + (size_t)i * ldc + j;
            float v = alpha * (float)s;
            if (beta != 0.0f) v += beta * *c;
            if (bias) v += bias[j];
            *c = attn_act_scalar(v, act);
        }
}

void attn_gemm_bf16_ref(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb, float beta, float *C,
                        int ldc, const float *bias, attn_act act) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++) {
                const float a = trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                s += (double)attn_bf16_float(attn_bf16_round(a)) *
                     attn_bf16_float(attn_bf16_round(opb(trans_b, B, ldb, k, j)));
            }
            float *c = C + (size_t)i * ldc + j;
            float v = alpha * (float)s;
            if (beta != 0.0f) v += beta * *c;
            if (bias) v += bias[j];
            *c = attn_act_scalar(v, act);
        }
}

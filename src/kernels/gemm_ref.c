/* gemm_ref.c — the reference GEMM: C = act(alpha·op(A)·op(B) + beta·C + bias) in plain loops,
 * single-threaded, no ISA flags. It is the yardstick the SIMD paths are tested against, so it
 * favours obviousness over speed; the loop order is only chosen so that the innermost loop walks
 * memory contiguously (which keeps the 2048-sized test cases to a few seconds). */
#include "kernels-impl.h"

#include <math.h>

/* Columns of C computed at a time into a stack buffer: the epilogue needs the old C (beta) and
 * the full dot products at once, and a strip keeps the buffer small. */
#define STRIP 256

void attn_gemm_ref(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                   const float *A, // (M, K), or (K, M) if trans_a; row stride lda
                   int lda,
                   const float *B, // (K, N), or (N, K) if trans_b; row stride ldb
                   int ldb, float beta,
                   float *C, // (M, N), row stride ldc
                   int ldc,
                   const float *bias, // (N) or NULL
                   attn_act act) {
    float acc[STRIP];
    for (int i = 0; i < M; i++) {
        for (int j0 = 0; j0 < N; j0 += STRIP) {
            int nj = N - j0 < STRIP ? N - j0 : STRIP;
            for (int j = 0; j < nj; j++) acc[j] = 0.0f;
            if (!trans_b) {
                /* acc[j] += a(i,k) · B[k][j]: the inner loop runs along a row of B. */
                for (int k = 0; k < K; k++) {
                    float a = trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                    const float *b = B + (size_t)k * ldb + j0;
                    for (int j = 0; j < nj; j++) acc[j] += a * b[j];
                }
            } else {
                /* B is stored (N, K): each acc[j] is a dot product along a row of B. */
                for (int j = 0; j < nj; j++) {
                    const float *b = B + (size_t)(j0 + j) * ldb;
                    float s = 0.0f;
                    for (int k = 0; k < K; k++)
                        s += (trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) * b[k];
                    acc[j] = s;
                }
            }
            float *c = C + (size_t)i * ldc + j0;
            for (int j = 0; j < nj; j++) {
                float v = alpha * acc[j];
                if (beta != 0.0f) v += beta * c[j]; /* beta == 0: C may hold NaN, never read */
                if (bias) v += bias[j0 + j];
                c[j] = attn_act_scalar(v, act);
            }
        }
    }
}

/* ---- pre-packed B (attn_kernels.h: attn_gemm_pack_b / attn_gemm_packed) -------------------- */

/* The reference layout is simply op(B)ᵀ, (N, K) row-major: the product is then attn_gemm_ref
 * with trans_b, which sums every element in the same order as the unpacked call. */
size_t attn_gemm_pb_floats_ref(int K, int N) {
    size_t n = (size_t)K * (size_t)N;
    return n ? n : 1;
}

void attn_gemm_pb_pack_ref(bool trans_b, int K, int N, const float *B, int ldb, float *P) {
    for (int j = 0; j < N; j++)
        for (int k = 0; k < K; k++)
            P[(size_t)j * K + k] = trans_b ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
}

void attn_gemm_pb_run_ref(bool trans_a, int M, int N, int K, float alpha, const float *A, int lda,
                          const float *P, float beta, float *C, int ldc, const float *bias,
                          attn_act act) {
    attn_gemm_ref(trans_a, true, M, N, K, alpha, A, lda, P, K > 0 ? K : 1, beta, C, ldc, bias,
                  act);
}

/* nn-impl.h — internals shared by the block layer's sources (src/nn). Not installed. */
#ifndef ATTN_NN_IMPL_H
#define ATTN_NN_IMPL_H

#include "attn_nn.h"

#include "../core/core-impl.h"

/* Every matrix product of the block layer: attn_gemm in the run's precision. */
static inline attn_status nn_gemm(const attn_nn_run *run, bool ta, bool tb, int M, int N, int K,
                                  float alpha, const float *A, int lda, const float *B, int ldb,
                                  float beta, float *C, int ldc, const float *bias, attn_act act) {
    const attn_precision p = run ? run->precision : ATTN_PRECISION_F32;
    if (p == ATTN_PRECISION_F32)
        return attn_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, act);
    return attn_gemm_precision(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, act,
                               p);
}

/* Whether a linear map has weights (float32 or quantized). */
static inline bool nn_has_weight(const attn_nn_linear *L) { return L->w || L->qw || L->qpacked; }

/* The row stride of a linear's weight. */
static inline int nn_ldw(const attn_nn_linear *L) {
    return L->ldw > 0 ? L->ldw : (L->layout == ATTN_NN_OUT_IN ? L->in : L->out);
}

/* y (n) = a (n) + b (n), threaded above 64 Ki elements; y may equal a or b. */
void nn_add(size_t n, const float *a, const float *b, float *y);

/* Whether dropout is on for probability p in this run. */
static inline bool nn_dropping(const attn_nn_run *run, float p) {
    return run && run->training && p > 0.0f;
}

#endif

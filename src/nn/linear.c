/* linear.c — the linear map of every family (attn_nn.h): forward with the bias and activation in
 * the GEMM's epilogue, backward, pre-packed weights, bias gradients.
 *
 * Which GEMM a forward runs:
 *   - quantized weights (qw, or qpacked alone: CTranslate2's int8, ATTN_QTYPE_I8):
 *     attn_quant_gemm(_packed), in the run's activation mode; with few_rows,
 *     9 .. FEW_ROWS_QF32 rows (int8 activations: any M) through attn_quant_gemm_batch (a
 *     batched decoding step: chunks of 8 rows on the decoding path, W streamed once);
 *   - pre-packed weights (inference, their backend current): attn_gemm_packed, no per-call
 *     packing of W;
 *   - a reduced precision (bf16): attn_gemm_precision;
 *   - few rows (a short sentence, the MLM head on a few positions) with nn.Linear weights, when
 *     the run asks for it (attn_nn_run.few_rows):
 *     attn_gemm's direct small-M path reads W without packing, which for a dozen rows is ~1.5×
 *     faster than its packed path, but it threads over the whole N. So the rows go through in
 *     chunks of SMALL_ROWS, over column blocks of W small enough to stay in L2 between the
 *     chunks, the blocks split across threads (each thread runs one-thread GEMMs on its share);
 *   - otherwise attn_gemm. */
#include "nn-impl.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define SMALL_ROWS 8  /* attn_gemm's direct path handles M <= 8 */
#define FEW_ROWS 48   /* up to this M, chunked rows beat the packed path (measured on MiniLM) */
/* Quantized weights: up to this M, attn_quant_gemm_batch (chunks of 8 rows on the decoding
 * path) beats the dequantized-panel GEMM. Measured on SmolLM2 Q4_1 (one thread, an AVX-512
 * Xeon, a busy machine), ms per row of a whole decoder pass: float32 activations, chunks 8.9 /
 * 8.7 / 10.1 at 9 / 16 / 32 rows against the panels' 13.7 / 11.5 / 6.8; int8 activations,
 * chunks ~4-6 at 8 to 24 rows. */
#define FEW_ROWS_QF32 24
/* With int8 activations every M: then every product of a batched pass, prompts included, is
 * int8 whatever the number of rows (not int8 for a small pass and float32 for a large one),
 * and the chunks cost about what the panels do over many rows. */
#define COL_BLOCK 128 /* columns of W per block: 128 x K floats stay in L2 for K <= 1024 */

attn_nn_linear attn_nn_linear_make(float *w, float *b, int in, int out, attn_nn_layout layout) {
    attn_nn_linear L;
    memset(&L, 0, sizeof L);
    L.w = w, L.b = b, L.in = in, L.out = out, L.layout = layout;
    return L;
}

attn_nn_linear attn_nn_linear_make_quant(attn_qtype qtype, const void *qw, float *b, int in,
                                         int out) {
    attn_nn_linear L = attn_nn_linear_make(NULL, b, in, out, ATTN_NN_OUT_IN);
    L.qtype = qtype, L.qw = qw;
    return L;
}

bool attn_nn_linear_quantized(const attn_nn_linear *L) { return L && (L->qw || L->qpacked); }

attn_nn_linear attn_nn_linear_rows(const attn_nn_linear *L, int r0, int n) {
    attn_nn_linear r = *L;
    r.out = n;
    r.packed = NULL;
    r.qpacked = NULL;
    if (L->b) r.b = L->b + r0;
    if (L->qw) {
        size_t rb = 0;
        if (attn_quant_row_bytes(L->qtype, L->in, &rb) == ATTN_STATUS_OK)
            r.qw = (const uint8_t *)L->qw + (size_t)r0 * rb;
    } else if (L->w) {
        r.w = L->layout == ATTN_NN_OUT_IN ? L->w + (size_t)r0 * nn_ldw(L) : L->w + r0;
        r.ldw = nn_ldw(L);
    }
    return r;
}

static void dense_block(int M, int n0, int n1, int K, const float *x, int ldx,
                        const float *W, int ldw, float beta, float *y, int ldy, const float *bias,
                        attn_act act, int *bad) {
    for (int j0 = n0; j0 < n1; j0 += COL_BLOCK) {
        const int nb = ATTN_MIN(COL_BLOCK, n1 - j0);
        for (int r0 = 0; r0 < M; r0 += SMALL_ROWS) {
            const int mr = ATTN_MIN(SMALL_ROWS, M - r0);
            if (attn_gemm(false, true, mr, nb, K, 1.0f, x + (size_t)r0 * ldx, ldx,
                          W + (size_t)j0 * ldw, ldw, beta, y + (size_t)r0 * ldy + j0, ldy,
                          bias ? bias + j0 : NULL, act))
                *bad = 1;
        }
    }
}

static bool in_parallel(void) {
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return false;
#endif
}

static attn_status few_rows(int M, int N, int K, const float *x, int ldx, const float *W, int ldw,
                            float beta, float *y, int ldy, const float *bias, attn_act act) {
    const int blocks = (N + COL_BLOCK - 1) / COL_BLOCK;
    /* Inside a parallel region (a data-parallel replica, a translation worker) one thread; the
     * column split changes no element's sums, so the result is the same either way. */
    const int nt = in_parallel() ? 1 : ATTN_MIN(attn_get_num_threads(), blocks);
    int bad = 0;
    if (nt <= 1) {
        dense_block(M, 0, N, K, x, ldx, W, ldw, beta, y, ldy, bias, act, &bad);
    } else {
#pragma omp parallel num_threads(nt) reduction(| : bad)
        {
            int t = 0, team = 1;
#ifdef _OPENMP
            t = omp_get_thread_num(), team = omp_get_num_threads();
#endif
            const int n0 = ATTN_MIN(N, (int)((long)blocks * t / team) * COL_BLOCK);
            const int n1 = ATTN_MIN(N, (int)((long)blocks * (t + 1) / team) * COL_BLOCK);
            dense_block(M, n0, n1, K, x, ldx, W, ldw, beta, y, ldy, bias, act, &bad);
        }
    }
    if (bad) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "linear: GEMM failed");
    return ATTN_STATUS_OK;
}


attn_status attn_nn_linear_forward(const attn_nn_run *run, const attn_nn_linear *L, int M,
                                   const float *x, int ldx, float beta, float *y, int ldy,
                                   attn_act act) {
    if (!L || !nn_has_weight(L) || (M > 0 && (!x || !y)))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "linear: NULL argument");
    if (attn_nn_linear_quantized(L)) {
        const attn_quant_act qa = run ? run->quant_act : ATTN_QUANT_ACT_F32;
        /* few_rows: a batched decoding step's rows in chunks of the kernels' decoding size */
        if (run && run->few_rows && M > SMALL_ROWS &&
            (qa == ATTN_QUANT_ACT_Q8 || M <= FEW_ROWS_QF32))
            return L->qpacked ? attn_quant_gemm_packed_batch(M, x, ldx, L->qpacked, beta, y, ldy,
                                                             L->b, act, qa)
                              : attn_quant_gemm_batch(M, L->out, L->in, x, ldx, L->qtype, L->qw,
                                                      beta, y, ldy, L->b, act, qa);
        return L->qpacked ? attn_quant_gemm_packed(M, x, ldx, L->qpacked, beta, y, ldy, L->b, act,
                                                   qa)
                          : attn_quant_gemm(M, L->out, L->in, x, ldx, L->qtype, L->qw, beta, y,
                                            ldy, L->b, act, qa);
    }
    const int K = L->in, N = L->out, ldw = nn_ldw(L);
    const bool training = run && run->training;
    const attn_gemm_packed_b *P = L->packed;
    /* Always the panels when there are some: each row's result is then the same however many
     * rows a call has (the translator's beams and batches rely on it). */
    if (P && !training && P->backend == attn_get_backend())
        return attn_gemm_packed(false, M, N, K, 1.0f, x, ldx, P, beta, y, ldy, L->b, act);
    const bool tb = L->layout == ATTN_NN_OUT_IN;
    const attn_precision prec = run ? run->precision : ATTN_PRECISION_F32;
    if (run && run->few_rows && prec == ATTN_PRECISION_F32 && tb && M > SMALL_ROWS &&
        M <= FEW_ROWS)
        return few_rows(M, N, K, x, ldx, L->w, ldw, beta, y, ldy, L->b, act);
    return nn_gemm(run, false, tb, M, N, K, 1.0f, x, ldx, L->w, ldw, beta, y, ldy, L->b, act);
}

attn_status attn_nn_linear_backward(const attn_nn_run *run, const attn_nn_linear *L, int M,
                                    const float *x, int ldx, const float *dy, int lddy, float *dx,
                                    int lddx, bool accumulate, const attn_nn_linear *g) {
    if (attn_nn_linear_quantized(L))
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "linear backward: the weights are quantized (%s), which is for inference "
                         "only: no gradients through them",
                         attn_quant_type_name(L->qtype));
    if (!L || !L->w) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "linear backward: NULL weight");
    const int K = L->in, N = L->out, ldw = nn_ldw(L);
    const bool oi = L->layout == ATTN_NN_OUT_IN;
    if (g && g->w) {
        if (g->layout != L->layout || g->in != K || g->out != N)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "linear backward: gradient view (%d, %d) does not match the weight "
                             "(%d, %d)",
                             g->in, g->out, K, N);
        const int ldg = nn_ldw(g);
        if (oi) /* gW (out, in) += dyᵀ · x */
            ATTN_TRY(nn_gemm(run, true, false, N, K, M, 1.0f, dy, lddy, x, ldx, 1.0f, g->w, ldg,
                             NULL, ATTN_ACT_NONE));
        else /* gW (in, out) += xᵀ · dy */
            ATTN_TRY(nn_gemm(run, true, false, K, N, M, 1.0f, x, ldx, dy, lddy, 1.0f, g->w, ldg,
                             NULL, ATTN_ACT_NONE));
    }
    if (g && g->b) attn_nn_colsum_add(M, N, dy, lddy, g->b);
    if (dx) /* dx (M, in) = dy · W */
        ATTN_TRY(nn_gemm(run, false, !oi, M, K, N, 1.0f, dy, lddy, L->w, ldw,
                         accumulate ? 1.0f : 0.0f, dx, lddx, NULL, ATTN_ACT_NONE));
    return ATTN_STATUS_OK;
}

bool attn_nn_linear_fuse(const attn_nn_linear *a, const attn_nn_linear *b, const attn_nn_linear *c,
                         attn_nn_linear *out) {
    if (!a || !b || !out) return false;
    const attn_nn_linear *L[3] = {a, b, c};
    const int n = c ? 3 : 2;
    int rows = 0;
    for (int i = 0; i < n; i++) {
        if (!L[i]->w || L[i]->layout != ATTN_NN_OUT_IN || L[i]->in != a->in ||
            nn_ldw(L[i]) != a->in || L[i]->packed)
            return false;
        if ((L[i]->b == NULL) != (a->b == NULL)) return false;
        if (i > 0) {
            if (L[i]->w != a->w + (size_t)rows * a->in) return false;
            if (a->b && L[i]->b != a->b + rows) return false;
        }
        rows += L[i]->out;
    }
    *out = attn_nn_linear_make(a->w, a->b, a->in, rows, ATTN_NN_OUT_IN);
    return true;
}

attn_status attn_nn_linear_pack(const attn_nn_linear *L, attn_precision precision,
                                attn_gemm_packed_b *out) {
    if (attn_nn_linear_quantized(L))
        return attn_fail(ATTN_STATUS_UNSUPPORTED,
                         "linear pack: the weights are quantized (%s): they are used as they are",
                         attn_quant_type_name(L->qtype));
    if (!L || !L->w || !out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "linear pack: NULL");
    return attn_gemm_pack_b_precision(L->layout == ATTN_NN_OUT_IN, L->in, L->out, L->w, nn_ldw(L),
                                      precision, out);
}

void attn_nn_colsum_add(int rows, int cols, const float *a, int lda, float *out) {
    if (rows <= 0 || cols <= 0) return;
    const int nblk = (cols + 63) / 64;
#pragma omp parallel for schedule(static) if ((long)rows * cols >= 65536 && nblk > 1)
    for (int blk = 0; blk < nblk; blk++) {
        const int j0 = blk * 64, j1 = ATTN_MIN(cols, j0 + 64);
        float acc[64];
        for (int j = j0; j < j1; j++) acc[j - j0] = 0.0f;
        for (int r = 0; r < rows; r++) {
            const float *row = a + (size_t)r * lda;
            for (int j = j0; j < j1; j++) acc[j - j0] += row[j];
        }
        for (int j = j0; j < j1; j++) out[j] += acc[j - j0];
    }
}

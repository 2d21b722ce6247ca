/* quant_ref.c — the reference product on quantized weights (attn_quant_gemm on the ref backend):
 * every block of W dequantized exactly as attn_quant_dequantize does it, each output element a
 * dot product summed in double in index order, rounded to float once, then the float epilogue
 * (beta·y, bias, activation) of attn_gemm_ref. Single thread, no ISA flags: the yardstick the
 * SIMD paths are tested against. The activation mode does not change it (it is the exact
 * product the Q8 activations approximate). */
#include "quant-impl.h"

#define ROWS 64 /* rows of x accumulated together per block of W */

void attn_quant_gemm_ref(int M, int N, int K,
                         const float *x, // (M, K), row stride ldx
                         int ldx, attn_qtype t,
                         const void *w, // (N, K) quantized, rows of row_bytes
                         size_t row_bytes, float beta,
                         float *y, // (M, N), row stride ldy
                         int ldy,
                         const float *bias, // (N) or NULL
                         attn_act act, attn_quant_act qact) {
    (void)qact;
    const int be = attn_quant_block_elems(t);
    const size_t bb = attn_quant_block_bytes(t);
    float blk[QK_K];
    double acc[ROWS];
    for (int n = 0; n < N; n++) {
        const uint8_t *wr = (const uint8_t *)w + (size_t)n * row_bytes;
        for (int m0 = 0; m0 < M; m0 += ROWS) {
            const int mr = ATTN_MIN(ROWS, M - m0);
            for (int i = 0; i < mr; i++) acc[i] = 0.0;
            for (int k0 = 0; k0 < K; k0 += be) {
                attn_quant_block_dequant(t, wr + (size_t)(k0 / be) * bb, blk);
                for (int i = 0; i < mr; i++) {
                    const float *xr = x + (size_t)(m0 + i) * ldx + k0;
                    double s = acc[i];
                    for (int k = 0; k < be; k++) s += (double)xr[k] * (double)blk[k];
                    acc[i] = s;
                }
            }
            for (int i = 0; i < mr; i++) {
                float *yv = y + (size_t)(m0 + i) * ldy + n;
                float v = (float)acc[i];
                if (beta != 0.0f) v += beta * *yv; /* beta == 0: y may hold NaN, never read */
                if (bias) v += bias[n];
                *yv = attn_act_scalar(v, act);
            }
        }
    }
}

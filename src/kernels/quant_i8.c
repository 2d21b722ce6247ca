/* quant_i8.c — CTranslate2's int8 (attn_quant.h: ATTN_QTYPE_I8): W (N, K) packed as int8 codes
 * with one float32 scale per row, the products on it (activations quantized per row, int32 sums
 * over the whole of K, one scale at the end), a row dequantized.
 *
 * attn_quant_i8_gemm picks one backend's pair of functions: a row quantizer (i8_row below, or
 * quant_i8_simd.c's AVX2 / AVX-512 ones: the same codes and scales, bit for bit) and a panel
 * function (i8_panels_plain below, or the AVX2 / AVX512-VNNI kernels), which computes the exact
 * int32 sums and the same float32 scaling; the panels are shared among the threads here. So every
 * backend gives the same bits for act NONE / RELU (tests/test_quant.c i8_products). */
#include "attn_quant.h"

#include "quant-impl.h"

#include <math.h>
#include <string.h>

/* A row (n) of x in the i8 scheme: *d = max|x| / 127, codes round(x · (1 / d)) to nearest even
 * (0 when d = 0), stored + bias (0: int8 codes; 128: the unsigned bytes VPDPBUSD takes). Plain
 * comparisons and the 1.5 · 2^23 rounding trick (exact for |v| <= 127), no libm calls: the loops
 * vectorize. NaN elements are skipped by the max and give code −127. */
static void i8_row(int n, const float *x, float *d, uint8_t *q, int bias) {
    float amax = 0.0f;
    for (int k = 0; k < n; k++) {
        const float a = fabsf(x[k]);
        amax = a > amax ? a : amax;
    }
    *d = amax / 127.0f;
    const float id = *d != 0.0f ? 1.0f / *d : 0.0f;
    for (int k = 0; k < n; k++) {
        float v = x[k] * id;
        v = v >= -127.0f ? v : -127.0f; /* NaN too */
        v = v <= 127.0f ? v : 127.0f;
        q[k] = (uint8_t)((int)((v + 12582912.0f) - 12582912.0f) + bias);
    }
}

attn_status attn_quant_pack_i8(int N, int K, const float *w, attn_quant_packed *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "quant pack i8: NULL argument");
    memset(out, 0, sizeof *out);
    if (N < 0 || K < 4 || K > 65536 || K % 4 != 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "quant pack i8: need N >= 0 and K a multiple of 4 from 4 to 65536 "
                         "(N=%d K=%d)",
                         N, K);
    if (!w && N > 0) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "quant pack i8: NULL weights");
    const size_t N16 = ((size_t)N + 15) / 16 * 16;
    if (N16 > ATTN_MAX_BUFFER_BYTES / (size_t)K)
        return attn_fail(ATTN_STATUS_TOO_LARGE, "quant pack i8: W (%d, %d) is too large", N, K);
    const size_t bytes = N16 * (size_t)K;
    int8_t *d = attn_calloc(bytes ? bytes : 1);
    float *scale = attn_calloc((N16 ? N16 : 1) * sizeof *scale);
    int32_t *nsum = attn_calloc((N16 ? N16 : 1) * sizeof *nsum);
    uint8_t *row = attn_alloc((size_t)K);
    if (!d || !scale || !nsum || !row) {
        attn_free(d), attn_free(scale), attn_free(nsum), attn_free(row);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "quant pack i8: out of memory for (%d, %d)",
                         N, K);
    }
    for (int n = 0; n < N; n++) {
        i8_row(K, w + (size_t)n * K, &scale[n], row, 0);
        int8_t *panel = d + (size_t)(n / 16) * 16 * (size_t)K;
        int32_t sum = 0;
        for (int k = 0; k < K; k++) {
            const int8_t c = (int8_t)row[k];
            panel[(size_t)(k / 4) * 64 + (size_t)(n % 16) * 4 + (size_t)(k % 4)] = c;
            sum += c;
        }
        nsum[n] = -128 * sum;
    }
    attn_free(row);
    out->type = ATTN_QTYPE_I8, out->N = N, out->K = K, out->bytes = bytes, out->data = d;
    out->scale = scale, out->nsum = nsum;
    return ATTN_STATUS_OK;
}

attn_status attn_quant_i8_dequant_row(const attn_quant_packed *P, int n, float *out) {
    const int8_t *panel = (const int8_t *)P->data + (size_t)(n / 16) * 16 * (size_t)P->K;
    for (int k = 0; k < P->K; k++)
        out[k] = (float)panel[(size_t)(k / 4) * 64 + (size_t)(n % 16) * 4 + (size_t)(k % 4)] *
                 P->scale[n];
    return ATTN_STATUS_OK;
}

/* The reference panels [p0, p1) (of 16 rows of W), every row of x: plain loops. */
static void i8_panels_plain(const i8_job *j, int p0, int p1) {
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
            float v[16];
            for (int c = 0; c < nc; c++) v[c] = (float)acc[c] * (j->xe[m] * j->wd[n0 + c]);
            i8_store_plain(j, m, n0, nc, v);
        }
    }
}

/* i8_row for the products: codes + 128. */
static void i8_row_u8(int n, const float *x, float *d, uint8_t *q) { i8_row(n, x, d, q, 128); }

bool attn_quant_i8_gemm(int M, const float *x, int ldx, const attn_quant_packed *P, float beta,
                        float *y, int ldy, const float *bias, attn_act act) {
    const int K = P->K, NP = (P->N + 15) / 16;
    /* the backend's row quantizer and panel function */
    const attn_backend be = attn_get_backend();
    void (*row)(int, const float *, float *, uint8_t *) = i8_row_u8;
    void (*panels)(const i8_job *, int, int) = i8_panels_plain;
    if (be == ATTN_BACKEND_AVX512)
        row = attn_quant_i8_row_avx512,
        panels = quant_cpu_vnni() ? attn_quant_i8_panels_avx512 : attn_quant_i8_panels_avx2;
    else if (be == ATTN_BACKEND_AVX2)
        row = attn_quant_i8_row_avx2, panels = attn_quant_i8_panels_avx2;
    const bool planes = panels == attn_quant_i8_panels_avx2;
    const size_t MK = (size_t)M * (size_t)K;
    /* codes + 128 (M, K), scales (M) (K % 4 == 0: aligned for float), the AVX2 planes (2, M, K) */
    uint8_t *xu = attn_alloc(MK + (size_t)M * sizeof(float) + (planes ? 2 * MK : 0));
    if (!xu) return false;
    float *xe = (float *)(void *)(xu + MK);
    for (int m = 0; m < M; m++) row(K, x + (size_t)m * ldx, &xe[m], xu + (size_t)m * K);
    i8_job j = {M, K, P->N, (const int8_t *)P->data, P->scale, P->nsum, xu, xe, NULL, NULL,
                beta, y, ldy, bias, act};
    if (planes) {
        int8_t *xs = (int8_t *)(void *)(xe + M);
        uint8_t *xa = (uint8_t *)(void *)(xs + MK);
        attn_quant_i8_planes_avx2(MK, xu, xs, xa);
        j.xs = xs, j.xa = xa;
    }
    /* units: pairs of panels (the VNNI kernel's step), shared among the threads; ref: one */
    const int pairs = (NP + 1) / 2;
    const int nt = be == ATTN_BACKEND_REF ? 1 : quant_team_for(M, P->N, K, pairs);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int q0, q1;
        quant_thread_share(pairs, &q0, &q1);
        if (q0 < q1) panels(&j, 2 * q0, ATTN_MIN(NP, 2 * q1));
    }
    attn_free(xu);
    return true;
}

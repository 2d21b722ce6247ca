/* quant_i8.c — CTranslate2's int8 (attn_quant.h: ATTN_QTYPE_I8): W (N, K) packed as int8 codes
 * with one float32 scale per row, the products on it (activations quantized per row, int32 sums
 * over the whole of K, one scale at the end), a row dequantized.
 *
 * The product's backends share everything but the inner loop over k: the activations are
 * quantized here (i8_acts, one plain loop for every backend: the codes are the same bits
 * everywhere), the panels are shared among the threads here, and each backend's panel function
 * (i8_panels_ref below; quant_i8_simd.c's AVX512-VNNI one) computes the exact int32 sums and
 * applies the same float32 epilogue: so every backend gives the same bits for act NONE / RELU. */
#include "attn_quant.h"

#include "quant-impl.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* multiply-adds below which one thread runs a product (quant_simd.c's QUANT_PARALLEL_MIN) */
#define I8_PARALLEL_MIN (64 * 64 * 64)

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

void attn_quant_i8_panels_ref(const i8_job *j, int p0, int p1) { i8_panels_plain(j, p0, p1); }

static bool cpu_vnni(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    return __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

bool attn_quant_i8_gemm(int M, const float *x, int ldx, const attn_quant_packed *P, float beta,
                        float *y, int ldy, const float *bias, attn_act act) {
    const int K = P->K, NP = (P->N + 15) / 16;
    uint8_t *xu = attn_alloc((size_t)M * (size_t)K + (size_t)M * sizeof(float));
    if (!xu) return false;
    float *xe = (float *)(void *)(xu + (size_t)M * K); /* K % 4 == 0: aligned for float */
    const attn_backend be = attn_get_backend();
    for (int m = 0; m < M; m++)
        if (be == ATTN_BACKEND_AVX512)
            attn_quant_i8_row_avx512(K, x + (size_t)m * ldx, &xe[m], xu + (size_t)m * K);
        else if (be == ATTN_BACKEND_AVX2)
            attn_quant_i8_row_avx2(K, x + (size_t)m * ldx, &xe[m], xu + (size_t)m * K);
        else
            i8_row(K, x + (size_t)m * ldx, &xe[m], xu + (size_t)m * K, 128);
    const i8_job j = {M, K, P->N, (const int8_t *)P->data, P->scale, P->nsum, xu, xe,
                      beta, y, ldy, bias, act};
    void (*fn)(const i8_job *, int, int) = attn_quant_i8_panels_ref;
    if (be == ATTN_BACKEND_AVX512 && cpu_vnni())
        fn = attn_quant_i8_panels_avx512;
    else if (be == ATTN_BACKEND_AVX2 || be == ATTN_BACKEND_AVX512)
        fn = attn_quant_i8_panels_avx2; /* the same loops, vectorized by the compiler */
    /* units: pairs of panels (the VNNI kernel's step), shared among the threads */
    const int pairs = (NP + 1) / 2;
    int nt = 1;
#ifdef _OPENMP
    if (be != ATTN_BACKEND_REF && !omp_in_parallel() &&
        (double)M * P->N * K >= (double)I8_PARALLEL_MIN)
        nt = ATTN_MIN(omp_get_max_threads(), pairs);
#endif
    if (nt <= 1) {
        fn(&j, 0, NP);
    } else {
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
        {
            const int t = omp_get_thread_num(), team = omp_get_num_threads();
            const int q0 = (int)((long)pairs * t / team), q1 = (int)((long)pairs * (t + 1) / team);
            if (q0 < q1) fn(&j, 2 * q0, ATTN_MIN(NP, 2 * q1));
        }
#endif
    }
    attn_free(xu);
    return true;
}

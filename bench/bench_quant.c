/* bench_quant.c — attn_quant_gemm, y (M, N) = x (M, K) · Wᵀ with W in each GGUF weight type, at
 * decoding (M = 1) and prompt (M = 512) sizes; bench/torch_quant.py runs PyTorch's float32
 * x·Wᵀ at the same shapes under the same case names, so bench/compare.py's ratio is attn on
 * quantized weights against PyTorch on float weights (sh bench/run.sh build quant).
 *
 * Output: JSON lines {"bench":"quant","case":"TYPE MxNxK[ q8act]","metric":...,"value":...}
 * with metric "GFLOP/s" (2·M·N·K per second) and, for M = 1, also "GB/s" (bytes of W per second:
 * decoding streams the weights once per token, so this is the bandwidth a token costs). "q8act"
 * marks ATTN_QUANT_ACT_Q8 (activations rounded to int8 per 32, integer dot products). W is 4×
 * larger than the last-level cache at the largest shape, so M = 1 reads it from memory; at the
 * smaller shapes (576×576 Q4: 200 KB) it may stay in the caches, as a real model's does not —
 * the bandwidth figures that matter are the large ones. Before the cases, a read-only stream
 * over 256 MB gives the machine's memory bandwidth at the same thread count.
 * Values are the best of several timed repeats (the machine's noise only slows runs down).
 * Threads: ATTN_BENCH_THREADS (default 2). Backend: ATTN_BACKEND (default: the best).
 * ATTN_BENCH_QUANT_TYPES=q4_1,q8_0 limits the types. */
#include "attn_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xalloc(size_t n) {
    void *p = attn_alloc(n);
    if (!p) {
        fprintf(stderr, "bench_quant: out of memory\n");
        exit(1);
    }
    return p;
}

static void fill(float *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static void check(attn_status s) {
    if (s != ATTN_STATUS_OK) {
        fprintf(stderr, "bench_quant: %s\n", attn_last_error());
        exit(1);
    }
}

/* Seconds per call, the best of 7 repeats of ~0.1 s. */
static double time_call(int M, int N, int K, const float *x, attn_qtype t, const void *w,
                        float *y, attn_quant_act qa) {
    double t0 = now();
    int calls = 0;
    do {
        check(attn_quant_gemm(M, N, K, x, K, t, w, 0.0f, y, N, NULL, ATTN_ACT_NONE, qa));
        calls++;
    } while (now() - t0 < 0.1);
    const int per = (int)ceil(0.1 * calls / (now() - t0));
    double best = 1e30;
    for (int rep = 0; rep < 7; rep++) {
        double t1 = now();
        for (int i = 0; i < per; i++)
            attn_quant_gemm(M, N, K, x, K, t, w, 0.0f, y, N, NULL, ATTN_ACT_NONE, qa);
        t1 = (now() - t1) / per;
        if (t1 < best) best = t1;
    }
    return best;
}

/* Seconds per M = 1 call cycling through `copies` copies of W, the best of 5 rounds of ~0.1 s. */
static double time_cycle(int N, int K, const float *x, attn_qtype t, const unsigned char *w,
                         size_t wbytes, int copies, float *y, attn_quant_act qa) {
    double best = 1e30;
    for (int rep = 0; rep < 6; rep++) { /* the first round is the warm-up */
        double t0 = now();
        int calls = 0;
        do {
            for (int c = 0; c < copies; c++, calls++)
                check(attn_quant_gemm(1, N, K, x, K, t, w + (size_t)c * wbytes, 0.0f, y, N, NULL,
                                      ATTN_ACT_NONE, qa));
        } while (now() - t0 < 0.1);
        const double s = (now() - t0) / calls;
        if (rep > 0 && s < best) best = s;
    }
    return best;
}

/* Read bandwidth of the team: sums of a 256 MB buffer, GB/s. */
static double stream_bw(int threads) {
    const size_t n = (size_t)64 << 20; /* floats */
    float *b = xalloc(n * sizeof(float));
    fill(b, n, 7);
    double best = 0, sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double s = 0, t = now();
#pragma omp parallel for num_threads(threads) reduction(+ : s) schedule(static)
        for (size_t i = 0; i < n; i += 16) {
            float a = 0;
            for (int j = 0; j < 16; j++) a += b[i + j];
            s += a;
        }
        t = now() - t;
        sink += s;
        if (n * sizeof(float) / t * 1e-9 > best) best = n * sizeof(float) / t * 1e-9;
    }
    if (sink == 1.2345) printf("#\n");
    attn_free(b);
    return best;
}

static bool wanted(const char *name) {
    const char *env = getenv("ATTN_BENCH_QUANT_TYPES");
    if (!env || !*env) return true;
    const size_t n = strlen(name);
    for (const char *p = env; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

int main(void) {
    const char *env = getenv("ATTN_BENCH_THREADS");
    int threads = env && *env ? atoi(env) : 2;
    if (threads < 1) threads = 1;
    attn_set_num_threads(threads);
    printf("attn backend %s, %d thread(s); memory read bandwidth %.1f GB/s\n",
           attn_backend_name(attn_get_backend()), threads, stream_bw(threads));
    static const attn_qtype types[] = {ATTN_QTYPE_F32,  ATTN_QTYPE_F16,  ATTN_QTYPE_BF16,
                                       ATTN_QTYPE_Q8_0, ATTN_QTYPE_Q4_0, ATTN_QTYPE_Q4_1,
                                       ATTN_QTYPE_Q5_0, ATTN_QTYPE_Q5_1, ATTN_QTYPE_Q4_K,
                                       ATTN_QTYPE_Q5_K, ATTN_QTYPE_Q6_K};
    /* SmolLM2-135M's projections (576 wide, FFN 1536) and a 2048-square one. */
    static const int shapes[][2] = {{576, 576}, {1536, 576}, {576, 1536}, {2048, 2048}};
    static const int Ms[] = {1, 512};
    const int maxM = 512, maxN = 2048, maxK = 2048;
    float *x = xalloc((size_t)maxM * maxK * sizeof(float));
    float *y = xalloc((size_t)maxM * maxN * sizeof(float));
    float *wf = xalloc((size_t)maxN * maxK * sizeof(float));
    fill(x, (size_t)maxM * maxK, 1);
    fill(wf, (size_t)maxN * maxK, 2);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const attn_qtype t = types[ti];
        if (!wanted(attn_quant_type_name(t))) continue;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int N = shapes[si][0], K = shapes[si][1];
            size_t rb;
            check(attn_quant_row_bytes(t, K, &rb));
            /* Several copies of W when it is small, cycled through, so that M = 1 reads them
             * from memory as a model's layers are, not from the cache. */
            const size_t wbytes = (size_t)N * rb;
            size_t nc = ((size_t)64 << 20) / wbytes;
            const int copies = nc < 1 ? 1 : nc > 16 ? 16 : (int)nc;
            unsigned char *w = xalloc(wbytes * copies);
            for (int c = 0; c < copies; c++) check(attn_quant_quantize(t, (int64_t)N * K, wf, w + c * wbytes));
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                const int M = Ms[mi];
                for (int q8 = 0; q8 < (M == 1 && attn_quant_block_elems(t) > 1 ? 2 : 1); q8++) {
                    const attn_quant_act qa = q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32;
                    /* M = 1 cycles through the copies (memory-bound, as decoding is) */
                    const double best = M == 1 ? time_cycle(N, K, x, t, w, wbytes, copies, y, qa)
                                               : time_call(M, N, K, x, t, w, y, qa);
                    const char *sfx = q8 ? " q8act" : "";
                    printf("{\"bench\":\"quant\",\"case\":\"%s %dx%dx%d%s\",\"metric\":\"GFLOP/s\","
                           "\"value\":%.2f}\n",
                           attn_quant_type_name(t), M, N, K, sfx, 2.0 * M * N * K / best * 1e-9);
                    if (M == 1)
                        printf("{\"bench\":\"quant\",\"case\":\"%s %dx%dx%d%s\",\"metric\":\"GB/s\","
                               "\"value\":%.2f}\n",
                               attn_quant_type_name(t), M, N, K, sfx, wbytes / best * 1e-9);
                    fflush(stdout);
                }
            }
            attn_free(w);
        }
    }
    attn_free(x);
    attn_free(y);
    attn_free(wf);
    return 0;
}

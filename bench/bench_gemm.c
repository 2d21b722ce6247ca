/* bench_gemm.c — GFLOP/s of attn_gemm on square and transformer-layer shapes, every transpose
 * combination training uses; bench/torch_gemm.py runs the same cases in PyTorch and
 * bench/compare.py prints the ratios (sh bench/run.sh build gemm).
 *
 * Output: one JSON line per case, {"bench":"gemm","case":"MxNxK OP","metric":"GFLOP/s",
 * "value":...}, where OP names op(A), op(B) (N = as stored, T = transposed), so "NT" is
 * nn.Linear's x·Wᵀ and "TN" a weight gradient xᵀ·dy. The value is the best of several timed
 * repeats after a warm-up (the best, not the mean, because this shared machine's noise only ever
 * slows a run down); torch_gemm.py measures the same way. Non-JSON lines report the machine's
 * peak: the nominal clock from /proc/cpuinfo and a measured FMA-throughput loop.
 * Threads: ATTN_BENCH_THREADS (default 2). Backend: ATTN_BACKEND (default: the best). */
#include "attn_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef struct {
    int M, N, K;
    bool ta, tb;
    bool bias; /* add a bias (N) */
    attn_act act;
    const char *extra; /* appended to the case name */
} gcase;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *rand_buf(size_t n, unsigned seed) {
    float *p = attn_alloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

static double run_case(const gcase *c) {
    size_t na = (size_t)c->M * c->K, nb = (size_t)c->K * c->N, nc = (size_t)c->M * c->N;
    float *A = rand_buf(na, 1), *B = rand_buf(nb, 2), *C = rand_buf(nc, 3);
    float *bias = c->bias ? rand_buf((size_t)c->N, 4) : NULL;
    int lda = c->ta ? c->M : c->K, ldb = c->tb ? c->K : c->N;
    double flop = 2.0 * c->M * c->N * c->K;
    /* Warm-up (page faults, OpenMP team start) and a calibration of the calls per repeat. */
    double t0 = now();
    int calls = 0;
    do {
        attn_status s = attn_gemm(c->ta, c->tb, c->M, c->N, c->K, 1.0f, A, lda, B, ldb, 0.0f, C,
                                  c->N, bias, c->act);
        if (s != ATTN_STATUS_OK) {
            fprintf(stderr, "bench_gemm: %s\n", attn_last_error());
            exit(1);
        }
        calls++;
    } while (now() - t0 < 0.1);
    int per = (int)ceil(0.1 * calls / (now() - t0)); /* ~0.1 s per repeat */
    double best = 0;
    for (int rep = 0; rep < 7; rep++) {
        double t = now();
        for (int i = 0; i < per; i++)
            attn_gemm(c->ta, c->tb, c->M, c->N, c->K, 1.0f, A, lda, B, ldb, 0.0f, C, c->N, bias,
                      c->act);
        t = now() - t;
        double g = flop * per / t * 1e-9;
        if (g > best) best = g;
    }
    attn_free(A);
    attn_free(B);
    attn_free(C);
    attn_free(bias);
    return best;
}

/* Nominal clock: the first "cpu MHz" of /proc/cpuinfo (0 if unknown). */
static double cpu_mhz(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[512];
    double mhz = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "cpu MHz", 7) == 0) {
            const char *colon = strchr(line, ':');
            if (colon) mhz = atof(colon + 1);
            break;
        }
    fclose(f);
    return mhz;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* FMA throughput of one thread: CHAINS independent accumulator chains (enough to cover the FMA
 * latency on two pipes) of LANES-lane FMAs, in GFLOP/s. */
#define FMA_PEAK(name, tgt, V, set1, fmadd, storeu, LANES, CHAINS, N)                             \
    __attribute__((target(tgt))) static double name(void) {                                      \
        V acc[CHAINS];                                                                           \
        for (int i = 0; i < CHAINS; i++) acc[i] = set1((float)i);                                \
        const V x = set1(0.999999f), y = set1(1e-7f);                                            \
        double t = now();                                                                        \
        for (long it = 0; it < (N); it++) {                                                      \
            _Pragma("GCC unroll 24") for (int i = 0; i < CHAINS; i++) acc[i] =                   \
                fmadd(acc[i], x, y);                                                             \
        }                                                                                        \
        t = now() - t;                                                                           \
        float lanes[LANES], s = 0;                                                               \
        for (int i = 0; i < CHAINS; i++) {                                                       \
            storeu(lanes, acc[i]);                                                               \
            for (int j = 0; j < LANES; j++) s += lanes[j];                                       \
        }                                                                                        \
        if (s == 12345.0f) printf("#\n"); /* keeps the loop alive */                             \
        return (double)(N) * CHAINS * 2 * LANES / t * 1e-9;                                      \
    }
FMA_PEAK(fma_peak_512, "avx512f,fma", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps,
         16, 24, 20000000L)
FMA_PEAK(fma_peak_256, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, 8,
         12, 40000000L)
#endif

int main(int argc, char **argv) {
    /* --peak: only the peak line (bench/ct2_export.py's arithmetic bound) */
    const bool peak_only = argc > 1 && !strcmp(argv[1], "--peak");
    const char *env = getenv("ATTN_BENCH_THREADS");
    int threads = env && *env ? atoi(env) : 2;
    if (threads < 1) threads = 1;
    attn_set_num_threads(threads);
    double mhz = cpu_mhz();
    printf("attn backend %s, %d thread(s)\n", attn_backend_name(attn_get_backend()), threads);
#if defined(__x86_64__) && defined(__GNUC__)
    const bool z = __builtin_cpu_supports("avx512f");
    if (z || (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
        double per_thread = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : per_thread)
#endif
        per_thread += z ? fma_peak_512() : fma_peak_256();
        const int lanes = z ? 16 : 8;
        printf("peak: nominal %.0f MHz x %d flop/cycle (2 x %d-lane FMA) x %d = %.1f GFLOP/s; "
               "measured FMA loop on %d thread(s): %.1f GFLOP/s\n",
               mhz, 4 * lanes, lanes, threads, mhz * 1e-3 * 4 * lanes * threads, threads,
               per_thread);
    }
#endif
    if (peak_only) return 0;
    const gcase cases[] = {
        {256, 256, 256, false, false, false, ATTN_ACT_NONE, ""},
        {512, 512, 512, false, false, false, ATTN_ACT_NONE, ""},
        {1024, 1024, 1024, false, false, false, ATTN_ACT_NONE, ""},
        {2048, 2048, 2048, false, false, false, ATTN_ACT_NONE, ""},
        {1024, 1024, 1024, false, true, false, ATTN_ACT_NONE, ""},
        {1024, 1024, 1024, true, false, false, ATTN_ACT_NONE, ""},
        {1024, 1024, 1024, true, true, false, ATTN_ACT_NONE, ""},
        /* A transformer layer with C = 384, 4C = 1536, 2048 tokens. */
        {2048, 1152, 384, false, false, false, ATTN_ACT_NONE, ""},  /* fused QKV */
        {2048, 384, 384, false, false, false, ATTN_ACT_NONE, ""},   /* attention out */
        {2048, 1536, 384, false, false, false, ATTN_ACT_NONE, ""},  /* MLP up */
        {2048, 384, 1536, false, false, false, ATTN_ACT_NONE, ""},  /* MLP down */
        {2048, 1152, 384, false, true, false, ATTN_ACT_NONE, ""},   /* nn.Linear: x·Wᵀ */
        {2048, 384, 384, false, true, false, ATTN_ACT_NONE, ""},
        {2048, 384, 1536, false, true, false, ATTN_ACT_NONE, ""},
        {2048, 384, 1152, false, false, false, ATTN_ACT_NONE, ""}, /* dx = dy·W */
        {384, 1152, 2048, true, false, false, ATTN_ACT_NONE, ""},  /* dW = xᵀ·dy (as (C, 3C)) */
        {1536, 384, 2048, true, false, false, ATTN_ACT_NONE, ""},
        {1152, 384, 2048, true, false, false, ATTN_ACT_NONE, ""},  /* dW = dyᵀ·x (as (3C, C)) */
        /* The fused epilogue against PyTorch's separate bias-add and GELU. */
        {2048, 1536, 384, false, true, true, ATTN_ACT_GELU_TANH, " +bias+gelu_tanh"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gcase *c = &cases[i];
        double g = run_case(c);
        printf("{\"bench\":\"gemm\",\"case\":\"%dx%dx%d %c%c%s\",\"metric\":\"GFLOP/s\","
               "\"value\":%.2f}\n",
               c->M, c->N, c->K, c->ta ? 'T' : 'N', c->tb ? 'T' : 'N', c->extra, g);
        fflush(stdout);
    }
    return 0;
}

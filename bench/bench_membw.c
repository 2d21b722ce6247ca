/* bench_membw.c — the memory bandwidth ceiling of token-by-token generation on this machine:
 * the best of 20 passes reading a buffer far larger than the caches (1 GiB by default),
 * split over ATTN_BENCH_THREADS (2) OpenMP threads in contiguous halves, as the decoders stream
 * their weights. Decoding one token reads every weight once, so tokens/s can be at most this
 * bandwidth / the weight bytes per token (bench/run_llamacpp.sh prints that ceiling per file).
 *
 *   build/bench/bench_membw [MiB]
 * prints one JSON line {"bench":"membw","threads":T,"mib":N,"gbps":best,"samples":[...]}. */
#include <immintrin.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sum of words [i0, i1): 256-bit loads where the CPU has AVX2 (as the kernels read), else 64-bit. */
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *a, size_t i0, size_t i1) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = i0;
    for (; i + 16 <= i1; i += 16) {
        s0 = _mm256_add_epi64(s0, _mm256_loadu_si256((const __m256i *)(const void *)(a + i)));
        s1 = _mm256_add_epi64(s1, _mm256_loadu_si256((const __m256i *)(const void *)(a + i + 4)));
        s2 = _mm256_add_epi64(s2, _mm256_loadu_si256((const __m256i *)(const void *)(a + i + 8)));
        s3 = _mm256_add_epi64(s3, _mm256_loadu_si256((const __m256i *)(const void *)(a + i + 12)));
    }
    uint64_t w[4];
    _mm256_storeu_si256((__m256i *)(void *)w,
                        _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
    uint64_t t = w[0] + w[1] + w[2] + w[3];
    for (; i < i1; i++) t += a[i];
    return t;
}

static uint64_t sum_plain(const uint64_t *a, size_t i0, size_t i1) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = i0;
    for (; i + 4 <= i1; i += 4) s0 += a[i], s1 += a[i + 1], s2 += a[i + 2], s3 += a[i + 3];
    for (; i < i1; i++) s0 += a[i];
    return s0 + s1 + s2 + s3;
}

int main(int argc, char **argv) {
    const long mib = argc > 1 ? atol(argv[1]) : 1024;
    const char *t = getenv("ATTN_BENCH_THREADS");
    const int threads = t && *t ? atoi(t) : 2;
    if (mib < 1 || mib > 65536 || threads < 1 || threads > 1024) {
        fprintf(stderr, "usage: bench_membw [MiB (1..65536)] (ATTN_BENCH_THREADS >= 1)\n");
        return 2;
    }
    const size_t n = (size_t)mib << 17; /* uint64 words */
    uint64_t *a = malloc(n * sizeof *a);
    if (!a) {
        fprintf(stderr, "bench_membw: out of memory\n");
        return 1;
    }
    memset(a, 1, n * sizeof *a);
    const bool avx2 = __builtin_cpu_supports("avx2");
    double gb[20], best = 0;
    uint64_t sink = 0;
    for (int r = 0; r < 20; r++) {
        const double t0 = now();
        uint64_t total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            const int th = omp_get_thread_num(), team = omp_get_num_threads();
            const size_t i0 = n * (size_t)th / (size_t)team, i1 = n * (size_t)(th + 1) / (size_t)team;
            total += avx2 ? sum_avx2(a, i0, i1) : sum_plain(a, i0, i1);
        }
        sink += total;
        gb[r] = (double)(n * sizeof *a) / (now() - t0) / 1e9;
        if (gb[r] > best) best = gb[r];
    }
    printf("{\"bench\":\"membw\",\"threads\":%d,\"mib\":%ld,\"gbps\":%.2f,\"samples\":[", threads, mib,
           best);
    for (int r = 0; r < 20; r++) printf("%s%.2f", r ? "," : "", gb[r]);
    printf("],\"sink\":%llu}\n", (unsigned long long)(sink & 1));
    free(a);
    return 0;
}

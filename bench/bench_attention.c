/* bench_attention.c — attn's attention kernels on the cases of bench/torch_attention.py, printing
 * one JSON line per case: {"bench":"attention","case":...,"metric":"iter/s","value":...} (higher
 * is better). Threads: ATTN_BENCH_THREADS (default 2).
 *
 * "fwd" cases time attn_attention_forward alone (inference: no lse, no probabilities); "fwd+bwd"
 * cases time a training step, forward with lse then backward, like PyTorch's
 * scaled_dot_product_attention + out.sum().backward(). "windowW" cases add a sliding window of W
 * keys (attn_attention_params.window; PyTorch gets the equivalent boolean mask), beside the same
 * case without one: the window's cost. Layout is attn's natural (B, T, H, D); the
 * PyTorch peer uses its natural (B, H, T, D). Timing method, the same on both sides: warm up, then
 * 7 rounds of at least 0.2 s each; the best round's rate is reported (the machine may be shared,
 * and the best round is the one least disturbed by other processes). */
#include "attn_core.h"
#include "attn_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    int B, H, T, D;
    bool causal, train;
    int window; /* 0: none */
} bcase;

/* Keep in sync with bench/torch_attention.py. */
static const bcase CASES[] = {
    {"fwd+bwd B8 H6 T256 D64 causal", 8, 6, 256, 64, true, true, 0},
    {"fwd B1 H12 T1024 D64", 1, 12, 1024, 64, false, false, 0},
    {"fwd+bwd B4 H12 T512 D64", 4, 12, 512, 64, false, true, 0},
    {"fwd B1 H12 T2048 D64 causal", 1, 12, 2048, 64, true, false, 0},
    {"fwd+bwd B2 H8 T1024 D128 causal", 2, 8, 1024, 128, true, true, 0},
    {"fwd B1 H8 T4096 D64 causal", 1, 8, 4096, 64, true, false, 0},
    {"fwd B1 H8 T4096 D64 causal window512", 1, 8, 4096, 64, true, false, 512},
    {"fwd+bwd B1 H8 T4096 D64 causal", 1, 8, 4096, 64, true, true, 0},
    {"fwd+bwd B1 H8 T4096 D64 causal window512", 1, 8, 4096, 64, true, true, 512},
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    attn_attention_params p;
    float *q, *k, *v, *o, *lse, *dO, *dq, *dk, *dv;
    bool train;
} bstate;

static int step(bstate *s) {
    if (!s->train) return attn_attention_forward(&s->p, s->q, s->k, s->v, s->o, NULL, NULL);
    attn_status st = attn_attention_forward(&s->p, s->q, s->k, s->v, s->o, s->lse, NULL);
    if (st) return st;
    return attn_attention_backward(&s->p, s->q, s->k, s->v, s->o, s->lse, s->dO, s->dq, s->dk,
                                   s->dv);
}

static float *randn_like(size_t n, uint64_t *seed) {
    float *x = attn_alloc(n * sizeof(float));
    if (!x) return NULL;
    for (size_t i = 0; i < n; i++) {
        /* Sum of uniforms: roughly normal, enough for timing. */
        double s = 0;
        for (int j = 0; j < 4; j++) {
            *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
            s += (double)(*seed >> 40) / 16777216.0 - 0.5;
        }
        x[i] = (float)(s * 1.7);
    }
    return x;
}

int main(void) {
    const char *env = getenv("ATTN_BENCH_THREADS");
    const int threads = env && *env ? atoi(env) : 2;
    attn_set_num_threads(threads);
    printf("attn threads=%d backend=%s\n", attn_get_num_threads(),
           attn_backend_name(attn_get_backend()));
    uint64_t seed = 42;
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        const bcase *bc = &CASES[c];
        bstate s;
        memset(&s, 0, sizeof s);
        s.p = attn_attention_default_params(bc->B, bc->H, bc->T, bc->T, bc->D);
        s.p.causal = bc->causal;
        s.p.window = bc->window;
        s.train = bc->train;
        const size_t n = (size_t)bc->B * bc->T * bc->H * bc->D;
        s.q = randn_like(n, &seed);
        s.k = randn_like(n, &seed);
        s.v = randn_like(n, &seed);
        s.dO = randn_like(n, &seed);
        s.o = attn_alloc(n * sizeof(float));
        s.dq = attn_alloc(n * sizeof(float));
        s.dk = attn_alloc(n * sizeof(float));
        s.dv = attn_alloc(n * sizeof(float));
        s.lse = attn_alloc((size_t)bc->B * bc->H * bc->T * sizeof(float));
        if (!s.q || !s.k || !s.v || !s.dO || !s.o || !s.dq || !s.dk || !s.dv || !s.lse) {
            fprintf(stderr, "bench_attention: out of memory\n");
            return 1;
        }
        for (int i = 0; i < 3; i++)
            if (step(&s)) {
                fprintf(stderr, "bench_attention: %s\n", attn_last_error());
                return 1;
            }
        double best = 0;
        for (int r = 0; r < 7; r++) {
            long iters = 0;
            double t0 = now(), dt;
            do {
                step(&s);
                iters++;
                dt = now() - t0;
            } while (dt < 0.2);
            if ((double)iters / dt > best) best = (double)iters / dt;
        }
        printf("{\"bench\": \"attention\", \"case\": \"%s\", \"metric\": \"iter/s\", "
               "\"value\": %.3f}\n",
               bc->name, best);
        fflush(stdout);
        float *bufs[] = {s.q, s.k, s.v, s.dO, s.o, s.dq, s.dk, s.dv, s.lse};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) attn_free(bufs[i]);
    }
    return 0;
}

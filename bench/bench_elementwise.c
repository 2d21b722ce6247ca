/* bench_elementwise.c — throughput of the row-wise and elementwise kernels (softmax, layer norm,
 * GELU, ReLU, embedding, cross-entropy) on transformer-sized shapes; bench/torch_elementwise.py
 * runs the same cases in PyTorch and bench/compare.py prints the ratios
 * (sh bench/run.sh build elementwise).
 *
 * Output: one JSON line per case, {"bench":"elementwise","case":"layernorm fwd 4096x768",
 * "metric":"GB/s","value":...}. GB/s is a nominal traffic count (each tensor the kernel must
 * read or write, counted once: softmax forward moves 2·N·D·4 bytes), identical in both
 * programs, so the ratio is a ratio of times. The value is the best of 5 timed repeats of ~0.1 s
 * after a ~0.1 s warm-up (the best, because machine noise only slows runs down); the PyTorch peer
 * measures the same way. Note that attn writes into preallocated outputs (and embedding backward
 * accumulates into an existing dtable) while the PyTorch operators allocate theirs on every call.
 * Threads: ATTN_BENCH_THREADS (default 2). Backend: ATTN_BACKEND (default: the best). */
#include "attn_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *rand_buf(size_t n, unsigned seed, float scale) {
    float *p = attn_alloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_elementwise: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = scale * ((float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f);
    }
    return p;
}

static void ok(attn_status s) {
    if (s != ATTN_STATUS_OK) {
        fprintf(stderr, "bench_elementwise: %s\n", attn_last_error());
        exit(1);
    }
}

/* The case's buffers; every kernel gets what it needs from here. */
typedef struct {
    int N, D, V;
    float *x, *y, *dy, *dx, *w, *b, *dw, *db, *mean, *rstd, *table;
    int32_t *ids;
} bufs;

typedef void (*kernel)(bufs *u);

static void k_softmax_fwd(bufs *u) { ok(attn_softmax_forward(u->N, u->D, u->x, u->y)); }
static void k_softmax_bwd(bufs *u) { ok(attn_softmax_backward(u->N, u->D, u->y, u->dy, u->dx)); }
static void k_ln_fwd(bufs *u) {
    ok(attn_layernorm_forward(u->N, u->D, u->x, u->w, u->b, 1e-5f, u->y, u->mean, u->rstd));
}
static void k_ln_bwd(bufs *u) {
    ok(attn_layernorm_backward(u->N, u->D, u->x, u->w, u->mean, u->rstd, u->dy, u->dx, u->dw,
                               u->db));
}
static void k_gelu_tanh_fwd(bufs *u) {
    ok(attn_act_forward(ATTN_ACT_GELU_TANH, (size_t)u->N * u->D, u->x, u->y));
}
static void k_gelu_tanh_bwd(bufs *u) {
    ok(attn_act_backward(ATTN_ACT_GELU_TANH, (size_t)u->N * u->D, u->x, u->dy, u->dx));
}
static void k_gelu_erf_fwd(bufs *u) {
    ok(attn_act_forward(ATTN_ACT_GELU_ERF, (size_t)u->N * u->D, u->x, u->y));
}
static void k_gelu_erf_bwd(bufs *u) {
    ok(attn_act_backward(ATTN_ACT_GELU_ERF, (size_t)u->N * u->D, u->x, u->dy, u->dx));
}
static void k_relu_fwd(bufs *u) {
    ok(attn_act_forward(ATTN_ACT_RELU, (size_t)u->N * u->D, u->x, u->y));
}
static void k_emb_fwd(bufs *u) {
    ok(attn_embedding_forward(u->N, u->V, u->D, u->ids, u->table, u->y));
}
static void k_emb_bwd(bufs *u) {
    ok(attn_embedding_backward(u->N, u->V, u->D, u->ids, u->dy, u->table));
}
static void k_ce(bufs *u) {
    float loss;
    ok(attn_cross_entropy(u->N, u->D, u->x, u->ids, -100, 0.1f, &loss, u->dx));
}

/* Keep in step with bench/torch_elementwise.py: name, N, D, V (embedding), tensors of N·D
 * floats moved per call (the GB/s numerator, besides the small per-row/per-column vectors). */
static const struct {
    const char *name;
    int N, D, V;
    double tensors;
    kernel fn;
} CASES[] = {
    {"softmax fwd", 4096, 1024, 0, 2, k_softmax_fwd},
    {"softmax bwd", 4096, 1024, 0, 3, k_softmax_bwd},
    {"layernorm fwd", 4096, 768, 0, 2, k_ln_fwd},
    {"layernorm bwd", 4096, 768, 0, 3, k_ln_bwd},
    {"gelu_tanh fwd", 4096, 3072, 0, 2, k_gelu_tanh_fwd},
    {"gelu_tanh bwd", 4096, 3072, 0, 3, k_gelu_tanh_bwd},
    {"gelu_erf fwd", 4096, 3072, 0, 2, k_gelu_erf_fwd},
    {"gelu_erf bwd", 4096, 3072, 0, 3, k_gelu_erf_bwd},
    {"relu fwd", 4096, 3072, 0, 2, k_relu_fwd},
    {"embedding fwd", 4096, 768, 50257, 2, k_emb_fwd},
    {"embedding bwd", 4096, 768, 50257, 3, k_emb_bwd},
    {"cross_entropy fwd+bwd", 512, 50257, 0, 2, k_ce},
};

int main(void) {
    const char *th = getenv("ATTN_BENCH_THREADS");
    int threads = th && atoi(th) > 0 ? atoi(th) : 2;
    attn_set_num_threads(threads);
    printf("attn backend %s, %d thread(s)\n", attn_backend_name(attn_get_backend()),
           attn_get_num_threads());
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        bufs u;
        memset(&u, 0, sizeof u);
        u.N = CASES[c].N, u.D = CASES[c].D, u.V = CASES[c].V;
        size_t n = (size_t)u.N * u.D;
        u.x = rand_buf(n, 1, CASES[c].fn == k_ce ? 5.0f : 3.0f);
        u.y = rand_buf(n, 2, 1), u.dy = rand_buf(n, 3, 1), u.dx = rand_buf(n, 4, 1);
        u.w = rand_buf((size_t)u.D, 5, 1), u.b = rand_buf((size_t)u.D, 6, 1);
        u.dw = rand_buf((size_t)u.D, 7, 1), u.db = rand_buf((size_t)u.D, 8, 1);
        u.mean = rand_buf((size_t)u.N, 9, 1), u.rstd = rand_buf((size_t)u.N, 10, 1);
        u.table = u.V ? rand_buf((size_t)u.V * u.D, 11, 1) : NULL;
        u.ids = attn_alloc(sizeof(int32_t) * (size_t)u.N);
        int classes = u.V ? u.V : u.D; /* token ids, or cross-entropy targets */
        unsigned s = 12;
        for (int i = 0; i < u.N; i++) {
            s = s * 1664525u + 1013904223u;
            u.ids[i] = (int32_t)((s >> 8) % (unsigned)classes);
        }
        if (CASES[c].fn == k_ln_bwd) k_ln_fwd(&u); /* a consistent mean and rstd */
        double bytes = CASES[c].tensors * (double)n * sizeof(float);
        double t0 = now();
        long calls = 0;
        do {
            CASES[c].fn(&u);
            calls++;
        } while (now() - t0 < 0.1);
        long per = (long)ceil(0.1 * (double)calls / (now() - t0));
        double best = 0;
        for (int rep = 0; rep < 5; rep++) {
            double t = now();
            for (long i = 0; i < per; i++) CASES[c].fn(&u);
            t = now() - t;
            double g = bytes * (double)per / t * 1e-9;
            if (g > best) best = g;
        }
        printf("{\"bench\":\"elementwise\",\"case\":\"%s %dx%d\",\"metric\":\"GB/s\","
               "\"value\":%.3f}\n",
               CASES[c].name, u.N, u.D, best);
        fflush(stdout);
        float *all[] = {u.x, u.y, u.dy, u.dx, u.w, u.b, u.dw, u.db, u.mean, u.rstd, u.table};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) attn_free(all[i]);
        attn_free(u.ids);
    }
    return 0;
}

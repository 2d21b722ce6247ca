/* bench_elementwise.c — throughput of the row-wise and elementwise kernels (softmax, layer norm,
 * GELU, ReLU, embedding, cross-entropy; SiLU, RMSNorm, SwiGLU, RoPE) on transformer-sized
 * shapes; bench/torch_elementwise.py runs the same cases in PyTorch and bench/compare.py prints
 * the ratios (sh bench/run.sh build elementwise).
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
    float *gu, *dgu;         /* (N, 2D): GLU's fused gate/up product and its gradient */
    float *cos_t, *sin_t;    /* (N, 32): RoPE tables (positions 0 .. N−1, head size 64) */
    int32_t *pos;            /* (N) */
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
static void k_silu_fwd(bufs *u) {
    ok(attn_act_forward(ATTN_ACT_SILU, (size_t)u->N * u->D, u->x, u->y));
}
static void k_silu_bwd(bufs *u) {
    ok(attn_act_backward(ATTN_ACT_SILU, (size_t)u->N * u->D, u->x, u->dy, u->dx));
}
static void k_rms_fwd(bufs *u) {
    ok(attn_rmsnorm_forward(u->N, u->D, u->x, u->w, 1e-6f, u->y, u->rstd));
}
static void k_rms_bwd(bufs *u) {
    ok(attn_rmsnorm_backward(u->N, u->D, u->x, u->w, u->rstd, u->dy, u->dx, u->dw));
}
/* SwiGLU over the two halves of one (N, 2D) product, as Llama's fused gate/up projection. */
static void k_swiglu_fwd(bufs *u) {
    ok(attn_glu_forward(ATTN_ACT_SILU, u->N, u->D, u->gu, 2 * u->D, u->gu + u->D, 2 * u->D, u->y,
                        u->D));
}
static void k_swiglu_bwd(bufs *u) {
    ok(attn_glu_backward(ATTN_ACT_SILU, u->N, u->D, u->gu, 2 * u->D, u->gu + u->D, 2 * u->D, u->dy,
                         u->D, u->dgu, 2 * u->D, u->dgu + u->D, 2 * u->D));
}
/* RoPE in place on (N, D) rows of 32 heads of 64 (the half-split layout of transformers). */
static void k_rope(bufs *u) {
    ok(attn_rope_apply(ATTN_ROPE_HALF, u->N, u->D / 64, 64, 64, u->x, u->D, u->pos, u->N,
                       u->cos_t, u->sin_t, false));
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
    /* the Llama family (TinyLlama's widths: hidden 2048, FFN 5632, 32 heads of 64) */
    {"silu fwd", 2048, 5632, 0, 2, k_silu_fwd},
    {"silu bwd", 2048, 5632, 0, 3, k_silu_bwd},
    {"rmsnorm fwd", 4096, 2048, 0, 2, k_rms_fwd},
    {"rmsnorm bwd", 4096, 2048, 0, 3, k_rms_bwd},
    {"swiglu fwd", 2048, 5632, 0, 3, k_swiglu_fwd},
    {"swiglu bwd", 2048, 5632, 0, 5, k_swiglu_bwd},
    {"rope fwd", 4096, 2048, 0, 2, k_rope},
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
        if (CASES[c].fn == k_rms_bwd) k_rms_fwd(&u);
        if (CASES[c].fn == k_swiglu_fwd || CASES[c].fn == k_swiglu_bwd) {
            u.gu = rand_buf(2 * n, 13, 4), u.dgu = rand_buf(2 * n, 14, 1);
        }
        if (CASES[c].fn == k_rope) {
            u.cos_t = rand_buf((size_t)u.N * 32, 15, 1);
            u.sin_t = rand_buf((size_t)u.N * 32, 16, 1);
            float inv[32];
            for (int i = 0; i < 32; i++) inv[i] = powf(10000.0f, -(float)i / 32.0f);
            ok(attn_rope_tables(u.N, 64, inv, u.cos_t, u.sin_t));
            u.pos = attn_alloc(sizeof(int32_t) * (size_t)u.N);
            for (int i = 0; i < u.N; i++) u.pos[i] = i;
        }
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
        float *all[] = {u.x,    u.y,    u.dy,    u.dx,  u.w,     u.b,    u.dw, u.db,
                        u.mean, u.rstd, u.table, u.gu,  u.dgu, u.cos_t, u.sin_t};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) attn_free(all[i]);
        attn_free(u.ids);
        attn_free(u.pos);
    }
    return 0;
}

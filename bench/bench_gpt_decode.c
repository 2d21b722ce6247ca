/* bench_gpt_decode.c — GPT-2 inference speed with the KV cache (attn_gpt_decode): a GPT-2-124M
 * shaped model (12 layers, 12 heads, width 768, vocab 50257, context 1024) with random weights in
 * float32, a 128-token prompt processed in one pass, then 128 new tokens one at a time (greedy),
 * batch 1 — the generation target. bench/torch_gpt_decode.py runs the same in PyTorch.
 *
 * Output: one JSON line per case, {"bench":"gpt_decode","case":...,"metric":"tokens/s",
 * "value":...}: "prompt 128" (prompt tokens per second of the one-pass prefill) and "generate 128"
 * (new tokens per second, each a full pass over the weights: memory-bandwidth bound). The value
 * is the best of ATTN_BENCH_REPEATS (default 3) runs. Non-JSON lines on stderr give the weight
 * bytes streamed per token and the implied bandwidth.
 * Threads: ATTN_BENCH_THREADS (default 2). ATTN_BENCH_GPT_LAYERS overrides the layer count (a
 * quicker smoke run). */
#include "attn_core.h"
#include "attn_gpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

int main(void) {
    attn_set_num_threads(env_int("ATTN_BENCH_THREADS", 2));
    (void)attn_set_flush_denormals(true); /* as the attn CLI does */
    const int reps = env_int("ATTN_BENCH_REPEATS", 3);
    const int Tp = 128, NG = 128;
    attn_gpt_config c = attn_gpt_default_config();
    c.n_layer = env_int("ATTN_BENCH_GPT_LAYERS", 12);
    attn_gpt_model *m;
    if (attn_gpt_model_init(&c, 1234, &m)) {
        fprintf(stderr, "bench_gpt_decode: %s\n", attn_last_error());
        return 1;
    }
    attn_gpt_kv *kv;
    if (attn_gpt_kv_init(m, 1, Tp + NG, &kv)) {
        fprintf(stderr, "bench_gpt_decode: %s\n", attn_last_error());
        return 1;
    }
    float *logits = malloc((size_t)c.vocab_size * sizeof(float));
    int32_t prompt[128];
    unsigned s = 7;
    for (int i = 0; i < Tp; i++)
        prompt[i] = (int32_t)((s = s * 1664525u + 1013904223u) >> 8) % c.vocab_size;
    double best_prompt = 0, best_gen = 0;
    for (int r = 0; r < reps + 1; r++) { /* the first run warms up (page faults, thread team) */
        attn_gpt_kv_reset(kv);
        double t0 = now();
        if (attn_gpt_decode(m, kv, 1, Tp, prompt, logits, false)) {
            fprintf(stderr, "bench_gpt_decode: %s\n", attn_last_error());
            return 1;
        }
        double t1 = now();
        for (int i = 0; i < NG; i++) {
            int32_t next = 0;
            for (int v = 1; v < c.vocab_size; v++)
                if (logits[v] > logits[next]) next = v;
            if (attn_gpt_decode(m, kv, 1, 1, &next, logits, false)) {
                fprintf(stderr, "bench_gpt_decode: %s\n", attn_last_error());
                return 1;
            }
        }
        double t2 = now();
        if (r == 0) continue;
        if (Tp / (t1 - t0) > best_prompt) best_prompt = Tp / (t1 - t0);
        if (NG / (t2 - t1) > best_gen) best_gen = NG / (t2 - t1);
    }
    /* Weights read per generated token: everything but the position table. */
    double bytes = (double)(m->num_params - (size_t)c.n_positions * c.n_embd) * sizeof(float);
    fprintf(stderr, "weights per token %.0f MB; generation streams %.1f GB/s\n", bytes / 1e6,
            bytes * best_gen / 1e9);
    printf("{\"bench\":\"gpt_decode\",\"case\":\"gpt2-124M L%d prompt %d\",\"metric\":\"tokens/s\","
           "\"value\":%.2f}\n",
           c.n_layer, Tp, best_prompt);
    printf("{\"bench\":\"gpt_decode\",\"case\":\"gpt2-124M L%d generate %d\",\"metric\":"
           "\"tokens/s\",\"value\":%.2f}\n",
           c.n_layer, NG, best_gen);
    free(logits);
    attn_gpt_kv_free(kv);
    attn_gpt_model_free(m);
    return 0;
}

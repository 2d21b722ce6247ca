/* bench_ragged.c — one batched decoding step (attn_gpt_decode_ragged) of n sequences at different
 * lengths against n single-sequence steps, on a model file or directory:
 *
 *   build/bench/bench_ragged MODEL [--threads N] [--batches 1,2,4,8,16,32,64] [--steps 16]
 *                            [--prompt 40] [--quant-act f32|q8] [--kv-type f32|f16] [--single on|off]
 *
 * Each of n slots first gets a prompt of --prompt + 7·i tokens (attn_gpt_decode_seq), then
 * --steps steps feed one token to every slot: once as one ragged call for all n, once as n
 * attn_gpt_decode_seq calls of one token. Prints ms per step and tokens/s of each and their
 * ratio: what continuous batching gains per step in `attn serve` (no HTTP, no sampling).
 * --single off skips the single steps (to profile the batched step alone). Each batched step's
 * matrix products are counted too (attn_kernels_multiply_adds): G multiply-adds a step and their
 * rate over the whole step, the arithmetic a step cannot do without. */
#include "attn_core.h"
#include "attn_gpt.h"
#include "attn_kernels.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK(x)                                                                                 \
    do {                                                                                         \
        if ((x) != ATTN_STATUS_OK) {                                                             \
            fprintf(stderr, "bench_ragged: %s\n", attn_last_error());                            \
            return 1;                                                                            \
        }                                                                                        \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_ragged MODEL [--threads N] [--batches 1,2,4] [--steps S] "
                        "[--prompt P] [--quant-act f32|q8] [--kv-type f32|f16] [--single on|off]\n");
        return 2;
    }
    const char *batches = "1,2,4,8,16,32,64";
    int steps = 16, prompt = 40;
    bool q8 = false, single = true, f16 = false;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) attn_set_num_threads(atoi(argv[i + 1]));
        else if (!strcmp(argv[i], "--batches")) batches = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt")) prompt = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--quant-act")) q8 = !strcmp(argv[i + 1], "q8");
        else if (!strcmp(argv[i], "--kv-type")) f16 = !strcmp(argv[i + 1], "f16");
        else if (!strcmp(argv[i], "--single")) single = strcmp(argv[i + 1], "off") != 0;
    }
    attn_gpt_model *m = NULL;
    CHECK(attn_gpt_load(argv[1], &m));
    const int V = m->cfg.vocab_size;
    printf("%s: %d threads, %d steps, prompts of %d + 7i tokens, %s activations, %s cache\n",
           argv[1], attn_get_num_threads(), steps, prompt, q8 ? "int8" : "float32",
           f16 ? "f16" : "f32");
    double base = 0;
    for (const char *p = batches; p && *p;) {
        const int n = atoi(p);
        p = strchr(p, ',');
        if (p) p++;
        const int maxT = prompt + 7 * n + 2 * steps + 2;
        attn_gpt_kv *kv = NULL;
        attn_gpt_kv_params kp = attn_gpt_kv_default_params();
        kp.slots = true, kp.f16 = f16;
        CHECK(attn_gpt_kv_init_params(m, n, maxT, &kp, &kv));
        attn_gpt_kv_set_quant_act(kv, q8 ? ATTN_QUANT_ACT_Q8 : ATTN_QUANT_ACT_F32);
        float *logits = malloc((size_t)n * V * sizeof *logits);
        int32_t *ids = malloc((size_t)maxT * sizeof *ids), *tok = malloc((size_t)n * sizeof *tok);
        for (int t = 0; t < maxT; t++) ids[t] = (t * 37 + 11) % V;
        for (int b = 0; b < n; b++) CHECK(attn_gpt_decode_seq(m, kv, b, prompt + 7 * b, ids, NULL, false));
        for (int b = 0; b < n; b++) tok[b] = (b * 13 + 5) % V;
        CHECK(attn_gpt_decode_ragged(m, kv, n, NULL, tok, logits)); /* warm-up */
        const uint64_t macs0 = attn_kernels_multiply_adds();
        double t0 = now();
        for (int s = 0; s < steps; s++) CHECK(attn_gpt_decode_ragged(m, kv, n, NULL, tok, logits));
        const double batched = (now() - t0) / steps;
        const double gmac = 1e-9 * (double)(attn_kernels_multiply_adds() - macs0) / steps;
        t0 = now();
        for (int s = 0; single && s < steps; s++)
            for (int b = 0; b < n; b++)
                CHECK(attn_gpt_decode_seq(m, kv, b, 1, &tok[b], logits, false));
        const double alone = single ? (now() - t0) / steps : 0.0;
        if (n == 1 || base == 0) base = 1.0 / batched;
        printf("  n=%3d: batched step %7.2f ms = %7.1f tokens/s (x%.2f of n=1); n single steps "
               "%7.2f ms = %7.1f tokens/s; batched/single x%.2f; products %.3f G multiply-adds "
               "a batched step (%.1f G/s over the step)\n",
               n, 1e3 * batched, n / batched, (n / batched) / base, 1e3 * alone, n / alone,
               alone / batched, gmac, gmac / batched);
        fflush(stdout);
        attn_gpt_kv_free(kv);
        free(logits), free(ids), free(tok);
    }
    attn_gpt_model_free(m);
    return 0;
}

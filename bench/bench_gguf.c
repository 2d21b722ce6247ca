/* bench_gguf.c — attn's side of issue 16's side-by-side with llama.cpp (bench/run_llamacpp.sh runs
 * it and llama-bench on the same GGUF files and prints the table). It measures what llama-bench
 * measures with `-p 512 -n 128`, the same way (tools/llama-bench/llama-bench.cpp of the
 * llama.cpp that bench/llamacpp_setup.sh builds):
 *
 *   pp512  a 512-token prompt in one pass (llama-bench's n_batch 2048 and n_ubatch 512 make it one
 *          llama_decode), from an empty cache, logits of the last position only (llama-bench's
 *          batch asks for no other); tokens/s = 512 / the pass.
 *   tg128  128 single-token passes from an empty cache (positions 0 .. 127), each with its logits;
 *          tokens/s = 128 / all 128 passes (llama-bench times the whole loop, the first token
 *          included; its next token is random, not sampled: so here too).
 *   ids    as llama-bench: the first is the BOS id when the file's tokenizer.ggml.add_bos_token
 *          is true, the others random in [0, vocabulary) (Philox seed 1 here, rand() there).
 *   warm-up: one pp512 run before the pp repetitions, one single-token pass before the tg ones
 *          (not timed); each repetition then starts from an emptied cache, as llama-bench's
 *          llama_memory_clear. A cache of 512 positions for pp, of 128 for tg (llama-bench's
 *          n_ctx = n_prompt + n_gen of each test).
 *   repetitions: ATTN_BENCH_REPS (5, llama-bench's -r default); the figure is the mean of the
 *          repetitions' tokens/s ± their sample standard deviation (llama-bench's avg_ts and
 *          stddev_ts, n − 1 in the denominator).
 *
 * The model is attn_gpt_load_gguf's (what `attn generate --model FILE.gguf` runs): F32 matrices
 * used in the mapping, F16/BF16 and quantized matrices kept as stored (Q8_0, Q4_0 and Q4_1 ones
 * repacked into attn_quant_pack's x8 layout at load, their pages in the mapping released);
 * ATTN_BENCH_THREADS (2) threads; ATTN_BENCH_PACK=1 also packs the float matrices for the GEMM
 * (attn_gpt_pack_weights: faster prompts, a second copy of those weights in memory; off by
 * default, as the CLI runs). Weight bytes per generated token: every tensor the model reads
 * once per token — all matrices, the output head (the tied embedding table when there is no
 * output.weight), norms, biases — plus one row of each table only looked up (token_embd when
 * untied, position_embd), at the bytes each side keeps them in: the file's for llama.cpp,
 * float32 for what attn converts (1-D tensors, the position table). Peak RSS: getrusage here; the run
 * script measures both sides with /usr/bin/time as well.
 *
 *   build/bench/bench_gguf FILE.gguf
 * prints note lines and JSON lines {"bench":"gguf","file":...,"case":"pp512"|"tg128",
 * "metric":"tokens/s","value":mean,"sd":...,"samples":[...]} and one {"case":"info",...} line
 * with the byte counts. Environment: ATTN_BENCH_THREADS, ATTN_BENCH_REPS, ATTN_BENCH_PP (512),
 * ATTN_BENCH_TG (128), ATTN_BENCH_PACK, ATTN_BENCH_QUANT_ACT (q8: activations of products on
 * quantized weights rounded to int8 per 32, llama.cpp's arithmetic, as `attn generate` runs
 * GGUF files; f32: float32 activations, the exact product with the dequantized weights). */
#include "attn_core.h"
#include "attn_gguf.h"
#include "attn_gpt.h"
#include "attn_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MAX_REPS 100

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_gguf: %s: %s\n", what, attn_last_error());
    return 1;
}

/* llama-bench's avg and stdev over the repetitions' tokens/s. */
static void mean_sd(const double *x, int n, double *mean, double *sd) {
    double s = 0, sq = 0;
    for (int i = 0; i < n; i++) s += x[i], sq += x[i] * x[i];
    *mean = s / n;
    *sd = n > 1 ? sqrt(fmax(0.0, sq / (n - 1) - *mean * *mean * n / (n - 1))) : 0.0;
}

/* Weight bytes read per generated token, as the file stores them (llama.cpp) and as attn keeps
 * them (float32 for 1-D tensors and the position table; matrices as stored). */
static int weight_bytes(const char *path, double *file_b, double *attn_b, double *file_total,
                        bool *add_bos, int64_t *bos) {
    attn_gguf *g;
    if (attn_gguf_open(path, &g)) return fail(path);
    const bool tied = attn_gguf_find_tensor(g, "output.weight") == NULL;
    *file_b = *attn_b = *file_total = 0;
    for (size_t i = 0; i < attn_gguf_tensor_count(g); i++) {
        const attn_gguf_tensor *t = attn_gguf_tensor_at(g, i);
        double fb = (double)t->nbytes;
        /* converted: 1-D tensors and the position table (attn_gpt_load_gguf) */
        const bool conv = t->type != ATTN_GGUF_DTYPE_F32 &&
                          (t->n_dims <= 1 || strcmp(t->name, "position_embd.weight") == 0);
        double ab = conv ? 4.0 * (double)t->n_elements : fb;
        *file_total += fb;
        const bool lookup = strcmp(t->name, "position_embd.weight") == 0 ||
                            (!tied && strcmp(t->name, "token_embd.weight") == 0);
        if (lookup && t->n_dims == 2) { /* one row per token: ne[1] rows */
            fb /= (double)t->ne[1];
            ab /= (double)t->ne[1];
        }
        *file_b += fb;
        *attn_b += ab;
    }
    bool b = false;
    *add_bos = attn_gguf_find(g, "tokenizer.ggml.add_bos_token") &&
               attn_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) == ATTN_STATUS_OK && b;
    *bos = -1;
    if (*add_bos && attn_gguf_get_int(g, "tokenizer.ggml.bos_token_id", bos)) *add_bos = false;
    attn_gguf_close(g);
    return 0;
}

static void print_case(const char *path, const char *name, const double *ts, int reps) {
    double mean, sd;
    mean_sd(ts, reps, &mean, &sd);
    printf("note: %s: %s %.2f ± %.2f tokens/s (%d repetitions)\n", path, name, mean, sd, reps);
    printf("{\"bench\":\"gguf\",\"file\":\"%s\",\"case\":\"%s\",\"metric\":\"tokens/s\","
           "\"value\":%.3f,\"sd\":%.3f,\"samples\":[",
           path, name, mean, sd);
    for (int i = 0; i < reps; i++) printf("%s%.3f", i ? "," : "", ts[i]);
    printf("]}\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bench_gguf FILE.gguf\n");
        return 2;
    }
    const char *path = argv[1];
    const int threads = env_int("ATTN_BENCH_THREADS", 2);
    const int reps = env_int("ATTN_BENCH_REPS", 5);
    const int n_pp = env_int("ATTN_BENCH_PP", 512), n_tg = env_int("ATTN_BENCH_TG", 128);
    if (reps < 1 || reps > MAX_REPS || n_pp < 1 || n_tg < 1) {
        fprintf(stderr, "bench_gguf: ATTN_BENCH_REPS must be 1..%d, ATTN_BENCH_PP/TG >= 1\n",
                MAX_REPS);
        return 2;
    }
    attn_set_num_threads(threads);
    (void)attn_set_flush_denormals(true); /* as the attn CLI does */

    double file_b = 0, attn_b = 0, file_total = 0;
    bool add_bos = false;
    int64_t bos = -1;
    if (weight_bytes(path, &file_b, &attn_b, &file_total, &add_bos, &bos)) return 1;

    double t0 = now();
    attn_gpt_model *m;
    if (attn_gpt_load_gguf(path, &m)) return fail(path);
    const double t_load = now() - t0;
    const bool pack = env_int("ATTN_BENCH_PACK", 0) != 0;
    const char *qa = getenv("ATTN_BENCH_QUANT_ACT");
    const attn_quant_act qact = qa && !strcmp(qa, "f32") ? ATTN_QUANT_ACT_F32 : ATTN_QUANT_ACT_Q8;
    if (pack && attn_gpt_pack_weights(m)) return fail("pack");
    const int V = m->cfg.vocab_size;
    if (n_pp > m->cfg.n_positions || n_tg > m->cfg.n_positions) {
        fprintf(stderr, "bench_gguf: %s: %d positions only\n", path, m->cfg.n_positions);
        return 1;
    }
    printf("note: %s: %d layers, width %d, vocabulary %d, loaded in %.2f s%s; %d threads; "
           "quantized products with %s activations\n",
           path, m->cfg.n_layer, m->cfg.n_embd, V, t_load, pack ? ", float matrices packed" : "",
           threads, qact == ATTN_QUANT_ACT_Q8 ? "int8" : "float32");

    int32_t *ids = malloc((size_t)(n_pp > n_tg ? n_pp : n_tg) * sizeof *ids);
    float *logits = malloc((size_t)V * sizeof *logits);
    double ts[MAX_REPS];
    if (!ids || !logits) {
        fprintf(stderr, "bench_gguf: out of memory\n");
        return 1;
    }
    attn_rng r;
    attn_rng_init(&r, 1);
#define NEXT_ID() ((int32_t)attn_rng_below(&r, (uint64_t)V))
#define FIRST_ID() (add_bos ? (int32_t)bos : NEXT_ID())

    /* pp: warm-up run, then the repetitions, each from an empty cache */
    attn_gpt_kv *kv;
    if (attn_gpt_kv_init(m, 1, n_pp, &kv)) return fail("kv cache");
    attn_gpt_kv_set_quant_act(kv, qact);
    for (int k = -1; k < reps; k++) {
        attn_gpt_kv_reset(kv);
        ids[0] = FIRST_ID();
        for (int i = 1; i < n_pp; i++) ids[i] = NEXT_ID();
        t0 = now();
        if (attn_gpt_decode(m, kv, 1, n_pp, ids, logits, false)) return fail("prompt");
        const double dt = now() - t0;
        if (k >= 0) ts[k] = n_pp / dt;
    }
    attn_gpt_kv_free(kv);
    char name[32];
    snprintf(name, sizeof name, "pp%d", n_pp);
    print_case(path, name, ts, reps);

    /* tg: warm-up of one token, then the repetitions of n_tg single-token passes */
    if (attn_gpt_kv_init(m, 1, n_tg, &kv)) return fail("kv cache");
    attn_gpt_kv_set_quant_act(kv, qact);
    int32_t tok = FIRST_ID();
    if (attn_gpt_decode(m, kv, 1, 1, &tok, logits, false)) return fail("warm-up token");
    for (int k = 0; k < reps; k++) {
        attn_gpt_kv_reset(kv);
        tok = FIRST_ID();
        t0 = now();
        for (int i = 0; i < n_tg; i++) {
            if (attn_gpt_decode(m, kv, 1, 1, &tok, logits, false)) return fail("token");
            tok = NEXT_ID();
        }
        ts[k] = n_tg / (now() - t0);
    }
    attn_gpt_kv_free(kv);
    snprintf(name, sizeof name, "tg%d", n_tg);
    print_case(path, name, ts, reps);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("note: %s: weights read per token: %.1f MB as attn keeps them, %.1f MB in the file; "
           "peak RSS %.1f MB\n",
           path, attn_b / 1e6, file_b / 1e6, (double)ru.ru_maxrss / 1024.0);
    printf("{\"bench\":\"gguf\",\"file\":\"%s\",\"case\":\"info\",\"threads\":%d,\"reps\":%d,"
           "\"packed\":%s,\"weight_bytes_attn\":%.0f,\"weight_bytes_file\":%.0f,"
           "\"tensor_bytes_file\":%.0f,\"maxrss_kb\":%ld,\"load_s\":%.3f}\n",
           path, threads, reps, pack ? "true" : "false", attn_b, file_b, file_total,
           (long)ru.ru_maxrss, t_load);
    free(ids), free(logits);
    attn_gpt_model_free(m);
    return 0;
}

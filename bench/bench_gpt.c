/* bench_gpt.c — attn's side of issue 4's GPT benchmarks, compared with PyTorch by
 * bench/torch_gpt.py (which runs bench/torch_gpt_generate.py for the generation cases). JSON lines
 * {"bench":"gpt","case":...,"metric":"tokens/s","value":...} (higher is better).
 *
 * (1) "train char 6L-384 ctx256 B8": training throughput of configs/gpt-char-6l.json (6 layers,
 *     6 heads, width 384, context 256; dropout 0.2 as nanoGPT's shakespeare-char, override with
 *     ATTN_BENCH_DROPOUT) on tinyshakespeare characters (65 ids), batch 8: WARMUP (3) then STEPS
 *     (20) optimizer steps exactly as `attn train --arch gpt` runs them (dropout masks, forward,
 *     loss, backward — data-parallel over one replica per thread, attn_gpt_trainer —, finiteness
 *     check, clipping at 1.0, AdamW(0.9, 0.99, wd 0.1 on 2-D tensors), lr 1e-3). tokens/s = B·T per step over the timed steps. The initial weights (seed 1337, by
 *     Hugging Face tensor name), the batches and the settings go to
 *     $ATTN_BENCH_DIR/gpt_train.safetensors so the PyTorch twin trains the same model from the same
 *     weights on the same batches; check: the loss of batch 0 at the initial weights without
 *     dropout ("first_loss"), which the twin recomputes.
 * (2) "generate 124M prompt 128" / "generate 124M new 128": a GPT-2-124M-shaped model (12 layers,
 *     12 heads, width 768, vocabulary 50257, context 1024; random weights, float32), a 128-token
 *     prompt then 128 new tokens through attn_gen_gpt (the loop `attn generate` runs: KV cache,
 *     greedy choice, no stop at end of text): prompt tokens/s (the one-pass prompt) and new
 *     tokens/s (the single-token passes: 127 decode steps / their time). Best of
 *     ATTN_BENCH_ROUNDS (2). The prompt ids go to $ATTN_BENCH_DIR/gpt_generate.safetensors.
 * Environment: ATTN_BENCH_THREADS (2), ATTN_BENCH_DIR, ATTN_BENCH_STEPS (20), ATTN_BENCH_WARMUP
 * (3), ATTN_BENCH_ROUNDS (2), ATTN_BENCH_DROPOUT, ATTN_BENCH_GEN_LAYERS (12; fewer for a smoke
 * run), ATTN_BENCH_GPT_CASES ("train,generate"). Run from the repository root. */
#include "attn_gen.h"
#include "bench_lm.h"

#define CONFIG_PATH "configs/gpt-char-6l.json"

static int bench_train(const char *dir) {
    const lm_train_case tc = {"gpt", "train char 6L-384 ctx256 B8", "train 6L", CONFIG_PATH,
                              "gpt_train", true};
    return lm_bench_train(&tc, dir);
}

static int bench_generate(const char *dir) {
    attn_gpt_config c = attn_gpt_default_config();
    c.n_layer = env_int("ATTN_BENCH_GEN_LAYERS", 12);
    const int Tp = 128, NG = 128, rounds = env_int("ATTN_BENCH_ROUNDS", 2);
    attn_gpt_model *m;
    if (attn_gpt_model_init(&c, 1234, &m)) return fail("gpt2 model");
    int32_t prompt[128];
    attn_rng r;
    attn_rng_init(&r, 7);
    for (int i = 0; i < Tp; i++) prompt[i] = (int32_t)attn_rng_below(&r, (uint64_t)c.vocab_size);
    if (dir) {
        char path[4096], v[16];
        snprintf(path, sizeof path, "%s/gpt_generate.safetensors", dir);
        snprintf(v, sizeof v, "%d", c.n_layer);
        attn_st_entry e = {"prompt", ATTN_DTYPE_I32, 1, {Tp}, prompt};
        const char *meta[] = {"n_layer", v, NULL};
        if (attn_st_save(path, &e, 1, meta)) return fail(path);
    }
    attn_gen_params gp = attn_gen_default_params();
    gp.greedy = true;
    double best_p = 0, best_g = 0;
    for (int k = 0; k < rounds; k++) {
        attn_gen_stats st;
        if (attn_gen_gpt(m, &gp, prompt, Tp, NG, -1, NULL, NULL, NULL, &st)) return fail("generate");
        double rp = st.n_prompt / st.prompt_seconds, rg = st.n_decode_steps / st.decode_seconds;
        if (rp > best_p) best_p = rp;
        if (rg > best_g) best_g = rg;
    }
    double gb = (double)m->num_params * 4 / 1e9;
    printf("note: generate: GPT-2-124M shape, %d layers, %.2f GB of float32 weights; new tokens at "
           "%.1f/s stream %.1f GB/s of weights\n",
           c.n_layer, gb, best_g, best_g * gb);
    printf("{\"bench\":\"gpt\",\"case\":\"generate 124M prompt 128\",\"metric\":\"tokens/s\","
           "\"value\":%.1f}\n",
           best_p);
    printf("{\"bench\":\"gpt\",\"case\":\"generate 124M new 128\",\"metric\":\"tokens/s\","
           "\"value\":%.1f}\n",
           best_g);
    fflush(stdout);
    attn_gpt_model_free(m);
    return 0;
}

int main(void) {
    lm_prog = "bench_gpt";
    attn_set_num_threads(env_int("ATTN_BENCH_THREADS", 2));
    (void)attn_set_flush_denormals(true); /* as the attn CLI does */
    const char *dir = getenv("ATTN_BENCH_DIR");
    if (dir && !*dir) dir = NULL;
    const char *cases = getenv("ATTN_BENCH_GPT_CASES");
    if (!cases || !*cases) cases = "train,generate";
    printf("note: %d threads, %s kernels\n", attn_get_num_threads(), attn_backend_name(attn_get_backend()));
    if (strstr(cases, "train") && bench_train(dir)) return 1;
    if (strstr(cases, "generate") && bench_generate(dir)) return 1;
    return 0;
}

/* bench_llama.c — attn's side of issue 15's speed targets for the Llama family, compared with
 * transformers / PyTorch by bench/torch_llama.py (sh bench/run.sh BUILD llama). JSON lines
 * {"bench":"llama","case":...,"metric":"tokens/s","value":...} (higher is better).
 *
 * (1) "smollm2 prompt 128" / "smollm2 generate 128": models/SmolLM2-135M-Instruct (real weights,
 *     float32; sh tools/get_smollm2.sh), batch 1: a 128-token prompt in one pass, then 128 new
 *     tokens, greedy, no stop at end of text, through attn_gen_session_generate (the loop `attn
 *     generate` and `attn chat` run; a session of 256 positions, reset before each round so the
 *     prompt runs every time), the layers' weights pre-packed for the GEMM once
 *     (attn_gpt_pack_weights: a second copy of them, 0.42 GB here; ATTN_BENCH_NO_PACK=1 runs
 *     without). prompt tokens/s = 128 / the prompt pass; new tokens/s = the 127
 *     single-token passes (with their greedy choices) / their time. Best of ATTN_BENCH_ROUNDS (2)
 *     rounds after a warm-up round (page faults, thread team). The prompt is 128 ids drawn with
 *     Philox (seed 7) from the vocabulary; it and attn's 128 generated ids go to
 *     $ATTN_BENCH_DIR/llama_smollm2.safetensors, so transformers runs the same prompt and says
 *     how many of its greedy tokens agree.
 * (2) "tinyllama-1.1b prompt 128" / "... generate 128": TinyLlama-1.1B's shape (22 layers, width
 *     2048, 32 heads, 4 key/value heads, intermediate 5632, vocabulary 32000, rope_theta 10000,
 *     rms_norm_eps 1e-5, 2048 positions, untied head) with random weights (attn_gpt_model_init,
 *     seed 1234: normal(0, 0.02)), saved with attn_gpt_save_dir into $ATTN_BENCH_DIR/tinyllama
 *     (4.4 GB) and loaded back from there, so both sides run the very same file; the same cases
 *     as (1), the handover in llama_tinyllama.safetensors. ATTN_BENCH_TINYLLAMA_LAYERS (22)
 *     makes a smaller model for a smoke run (it must match on both sides: the file carries it).
 * (3) "train llama 6L-384 ctx256 B8": configs/llama-char-6l.json (6 layers, width 384, 6 heads of
 *     which 2 key/value heads, intermediate 1024, context 256) on tinyshakespeare characters,
 *     batch 8, exactly as `attn train --arch llama` steps (bench_lm.h: data-parallel trainer,
 *     clip 1.0, AdamW): tokens/s over ATTN_BENCH_STEPS (20) timed steps after ATTN_BENCH_WARMUP
 *     (3); the initial weights, batches and the step-0 loss go to llama_train.safetensors for the
 *     PyTorch twin.
 * Environment: ATTN_BENCH_THREADS (2), ATTN_BENCH_DIR, ATTN_BENCH_ROUNDS (2), ATTN_BENCH_STEPS,
 * ATTN_BENCH_WARMUP, ATTN_BENCH_TINYLLAMA_LAYERS, ATTN_BENCH_NO_PACK, ATTN_BENCH_LLAMA_CASES
 * ("smollm2,tinyllama,train": any subset). Run from the repository root. */
#include "attn_gen.h"
#include "bench_lm.h"

#define SMOLLM2_DIR "models/SmolLM2-135M-Instruct"
#define TP 128 /* prompt tokens */
#define NG 128 /* new tokens */

/* Case (1)/(2) on a loaded model: label "smollm2" or "tinyllama-1.1b"; name the handover file's
 * base name. */
static int bench_generate(attn_gpt_model *m, const char *label, const char *name,
                          const char *dir) {
    const int V = m->cfg.vocab_size, rounds = env_int("ATTN_BENCH_ROUNDS", 2);
    int32_t prompt[TP], out[NG];
    attn_rng r;
    attn_rng_init(&r, 7);
    for (int i = 0; i < TP; i++) prompt[i] = (int32_t)attn_rng_below(&r, (uint64_t)V);
    attn_gen_session *s;
    if (attn_gen_session_init(m, TP + NG, &s)) return fail("session");
    if (getenv("ATTN_BENCH_NO_PACK") == NULL) {
        const double t0 = now();
        if (attn_gpt_pack_weights(m)) return fail("pack");
        printf("note: %s: weights packed for the GEMM in %.2f s (attn_gpt_pack_weights)\n", label,
               now() - t0);
    }
    attn_gen_params gp = attn_gen_default_params();
    gp.greedy = true;
    attn_gen_stats st;
    /* warm-up: page faults of the weights and the cache, the thread team */
    if (attn_gen_session_generate(s, &gp, prompt, TP, 4, NULL, 0, NULL, NULL, NULL, &st))
        return fail("generate");
    double best_p = 0, best_g = 0;
    for (int k = 0; k < rounds; k++) {
        attn_gen_session_reset(s);
        if (attn_gen_session_generate(s, &gp, prompt, TP, NG, NULL, 0, out, NULL, NULL, &st))
            return fail("generate");
        if (st.n_prompt != TP || st.n_generated != NG) {
            fprintf(stderr, "bench_llama: %s: ran %d prompt positions, generated %d\n", label,
                    st.n_prompt, st.n_generated);
            return 1;
        }
        const double rp = st.n_prompt / st.prompt_seconds;
        const double rg = st.n_decode_steps / st.decode_seconds;
        if (rp > best_p) best_p = rp;
        if (rg > best_g) best_g = rg;
    }
    attn_gen_session_free(s);
    if (dir) {
        char path[4096], nl[16];
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
        snprintf(nl, sizeof nl, "%d", m->cfg.n_layer);
        attn_st_entry e[2] = {{"prompt", ATTN_DTYPE_I32, 1, {TP}, prompt},
                              {"generated", ATTN_DTYPE_I32, 1, {NG}, out}};
        const char *meta[] = {"n_layer", nl, NULL};
        if (attn_st_save(path, e, 2, meta)) return fail(path);
    }
    const double gb = (double)m->num_params * sizeof(float) / 1e9;
    printf("note: %s: %d layers, %.2f GB of float32 weights; new tokens at %.1f/s stream "
           "%.1f GB/s of weights\n",
           label, m->cfg.n_layer, gb, best_g, best_g * gb);
    printf("{\"bench\":\"llama\",\"case\":\"%s prompt %d\",\"metric\":\"tokens/s\","
           "\"value\":%.1f}\n",
           label, TP, best_p);
    printf("{\"bench\":\"llama\",\"case\":\"%s generate %d\",\"metric\":\"tokens/s\","
           "\"value\":%.1f}\n",
           label, NG, best_g);
    fflush(stdout);
    return 0;
}

static int bench_smollm2(const char *dir) {
    attn_gpt_model *m;
    if (attn_gpt_load_dir(SMOLLM2_DIR, &m)) return fail(SMOLLM2_DIR " (sh tools/get_smollm2.sh)");
    int rc = bench_generate(m, "smollm2", "llama_smollm2", dir);
    attn_gpt_model_free(m);
    return rc;
}

/* TinyLlama-1.1B's configuration (its config.json's values). */
static attn_gpt_config tinyllama_config(void) {
    attn_gpt_config c = attn_gpt_arch_default_config(ATTN_GPT_ARCH_LLAMA);
    c.vocab_size = 32000;
    c.n_positions = 2048;
    c.n_embd = 2048;
    c.n_layer = env_int("ATTN_BENCH_TINYLLAMA_LAYERS", 22);
    c.n_head = 32;
    c.n_kv_head = 4;
    c.n_inner = 5632;
    c.rope_theta = 10000.0f;
    c.layer_norm_epsilon = 1e-5f;
    c.tie_word_embeddings = false;
    return c;
}

static int bench_tinyllama(const char *dir) {
    const attn_gpt_config c = tinyllama_config();
    attn_gpt_model *m;
    if (attn_gpt_model_init(&c, 1234, &m)) return fail("tinyllama model");
    if (dir) {
        /* through the file both sides read (and without the gradient buffer) */
        char path[4096];
        snprintf(path, sizeof path, "%s/tinyllama", dir);
        const double t0 = now();
        if (attn_gpt_save_dir(m, path)) return fail(path);
        attn_gpt_model_free(m);
        if (attn_gpt_load_dir(path, &m)) return fail(path);
        printf("note: tinyllama-1.1b: random weights saved to and loaded from %s in %.1f s\n",
               path, now() - t0);
    }
    int rc = bench_generate(m, "tinyllama-1.1b", "llama_tinyllama", dir);
    attn_gpt_model_free(m);
    return rc;
}

int main(void) {
    lm_prog = "bench_llama";
    attn_set_num_threads(env_int("ATTN_BENCH_THREADS", 2));
    (void)attn_set_flush_denormals(true); /* as the attn CLI does */
    const char *dir = getenv("ATTN_BENCH_DIR");
    if (dir && !*dir) dir = NULL;
    const char *cases = getenv("ATTN_BENCH_LLAMA_CASES");
    if (!cases || !*cases) cases = "smollm2,tinyllama,train";
    printf("note: %d threads, %s kernels\n", attn_get_num_threads(),
           attn_backend_name(attn_get_backend()));
    fflush(stdout);
    if (strstr(cases, "smollm2") && bench_smollm2(dir)) return 1;
    if (strstr(cases, "tinyllama") && bench_tinyllama(dir)) return 1;
    if (strstr(cases, "train")) {
        const lm_train_case tc = {"llama", "train llama 6L-384 ctx256 B8", "train llama 6L",
                                  "configs/llama-char-6l.json", "llama_train", false};
        if (lm_bench_train(&tc, dir)) return 1;
    }
    return 0;
}

/* test_llama.c — the Llama family (attn_gpt.h: model_type llama, mistral, qwen2) against
 * transformers, on tiny random models that tools/ref_llama.py makes with transformers and saves
 * as Hugging Face directories (F32, BF16, F16, sharded): grouped-query ratios 1, 3, 8, head_dim
 * equal to and different from hidden / heads, tied and untied embeddings, rope_scaling none,
 * linear and llama3, q/k/v/o/MLP biases, Mistral's sliding window shorter than the sequence.
 * Per model and backend:
 *   - rotary inv_freq against the rotary module's (an ulp: transformers computes it in float32);
 *   - logits, every layer's hidden states and every query head's attention probabilities
 *     (output_attentions; attn attention's capture) of a batch against the float64 model;
 *   - the loss and every parameter's gradient (by Hugging Face name) against float64 autograd;
 *   - KV-cache decoding (a prompt, then one token per call) against the full forward;
 *   - greedy decoding of 64 tokens token for token as transformers' own KV-cache greedy loop;
 *   - save_dir then load_dir gives the same model, and transformers loads attn's directory with
 *     the same logits (tools/check_gpt_hf.py).
 * Tolerances, relative to max|ref| of each quantity: logits and hidden states 1e-4 (the issue's
 * bound; measured: see the output, ~1e-6), loss 1e-5, gradients 1e-4, cached decoding 1e-5 of the
 * full forward. */
#include "attn_gpt.h"
#include "attn_io.h"
#include "tu.h"

#include <string.h>
#include <unistd.h>

#define TOL_LOGITS 1e-4
#define TOL_HIDDEN 1e-4
#define TOL_LOSS 1e-5
#define TOL_GRAD 1e-4
#define TOL_DECODE 1e-5
#define TOL_DECODE_KV16 1e-4 /* f16 cache vs the f16-rounded reference: a key or value whose float32
                              * and float64 values round to neighbouring halves (double rounding) */
#define KV16_APART 4.0 /* see run_model's f16-cache check */
#define TOL_INV_FREQ 2.4e-7 /* an ulp of 1 */

#define OK(x) assert_int_equal((x), ATTN_STATUS_OK)

static attn_st_file *REF;
static const char *REF_NAME; /* "llama" or "qwen3": the reference file and its models' folder */

/* The references of NAME.safetensors; false (REF NULL) when the file is absent. */
static bool ref_open(const char *name) {
    if (REF) attn_st_close(REF);
    REF = NULL;
    REF_NAME = name;
    char file[64];
    snprintf(file, sizeof file, "%s.safetensors", name);
    if (access(tu_ref_path(file), R_OK) != 0) return false;
    if (attn_st_open(tu_ref_path(file), &REF)) fail_msg("%s", attn_last_error());
    return true;
}

static float *ref_f32(const char *model, const char *name, size_t *n) {
    char key[300];
    snprintf(key, sizeof key, "%s.%s", model, name);
    float *d = NULL;
    const attn_st_tensor *t;
    if (attn_st_load_f32(REF, key, &d, &t)) fail_msg("%s", attn_last_error());
    if (n) *n = t->numel;
    return d;
}

static int32_t *ref_i32(const char *model, const char *name, size_t *n) {
    char key[300];
    snprintf(key, sizeof key, "%s.%s", model, name);
    int32_t *d = NULL;
    const attn_st_tensor *t;
    if (attn_st_load_i32(REF, key, &d, &t)) fail_msg("%s", attn_last_error());
    if (n) *n = t->numel;
    return d;
}

static const char *model_dir(const char *name) {
    static char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", tu_ref_path(REF_NAME), name);
    return dir;
}

/* transformers loads a directory attn wrote and gives the same logits. */
static void check_hf_loads(const char *dir, const attn_gpt_model *m) {
    const char *b = getenv("ATTN_BUILD");
    char py[4096], cmd[16384], out[4300];
    /* Qwen3 and transformers 5's files need the newest transformers (.venv-bench) */
    snprintf(py, sizeof py, "%s/../%s/bin/python", b && *b ? b : "build",
             strcmp(REF_NAME, "llama") ? ".venv-bench" : ".venv");
    if (access(py, X_OK) != 0) tu_skip("no %s (sh tools/install_deps.sh)", py);
    if (access("tools/check_gpt_hf.py", R_OK) != 0)
        tu_skip("tools/check_gpt_hf.py not found (run from the repository root)");
    snprintf(out, sizeof out, "%s/hf_logits.npy", dir);
    snprintf(cmd, sizeof cmd, "'%s' tools/check_gpt_hf.py '%s' 3,1,4,1,5,9,2,6 '%s'", py, dir,
             out);
    assert_int_equal(system(cmd), 0);
    float *hf = NULL;
    int64_t sh[ATTN_MAX_DIMS];
    int nd = 0;
    OK(attn_npy_load_f32(out, &hf, &nd, sh));
    const int V = m->cfg.vocab_size;
    assert_true(nd == 2 && sh[0] == 8 && sh[1] == V);
    int32_t ids[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    attn_gpt_state *st;
    OK(attn_gpt_state_init(m, 1, 8, &st));
    float *lg = attn_alloc((size_t)8 * V * sizeof(float));
    OK(attn_gpt_forward(m, st, 1, 8, ids, lg));
    tu_close("transformers on attn's save_dir: logits", lg, hf, (size_t)8 * V, TOL_LOGITS, 0);
    attn_free(lg);
    attn_free(hf);
    attn_gpt_state_free(st);
}

/* dec (B, T, V): the logits of ids (B, T) decoded with a KV cache, 5 positions in the first call
 * and then one per call; step (B·T·V) and tok (B·T) are scratch. */
static void decode_all(const attn_gpt_model *m, int B, int T, const int32_t *ids, float *dec,
                       float *step, int32_t *tok, bool f16) {
    const int V = m->cfg.vocab_size;
    attn_gpt_kv *kv;
    attn_gpt_kv_params kp = attn_gpt_kv_default_params();
    kp.f16 = f16;
    OK(attn_gpt_kv_init_params(m, B, T, &kp, &kv));
    assert_true(attn_gpt_kv_f16(kv) == f16);
    for (int t0 = 0; t0 < T;) {
        const int n = t0 ? 1 : 5;
        for (int b = 0; b < B; b++)
            memcpy(tok + (size_t)b * n, ids + (size_t)b * T + t0, (size_t)n * sizeof *tok);
        OK(attn_gpt_decode(m, kv, B, n, tok, step, true));
        for (int b = 0; b < B; b++)
            memcpy(dec + ((size_t)b * T + t0) * V, step + (size_t)b * n * V,
                   (size_t)n * V * sizeof(float));
        t0 += n;
    }
    attn_gpt_kv_free(kv);
}

static void run_model(const char *name, bool save) {
    const char *bn = attn_backend_name(attn_get_backend());
    char what[256];
    attn_gpt_model *m;
    if (attn_gpt_load_dir(model_dir(name), &m)) fail_msg("%s", attn_last_error());
    const attn_gpt_config *c = &m->cfg;
    const int B = atoi(attn_st_metadata(REF, "B")), T = atoi(attn_st_metadata(REF, "T"));
    const int M = B * T, V = c->vocab_size, C = c->n_embd, L = c->n_layer;
    const int D = attn_gpt_head_dim(c);

    float *inv = attn_alloc((size_t)D / 2 * sizeof(float)), *ri = ref_f32(name, "inv_freq", NULL);
    OK(attn_gpt_rope_inv_freq(c, inv));
    snprintf(what, sizeof what, "%s inv_freq vs transformers'", name);
    tu_close(what, inv, ri, (size_t)D / 2, TOL_INV_FREQ, 0);
    attn_free(inv), attn_free(ri);

    /* forward with every layer's hidden states */
    int32_t *ids = ref_i32(name, "ids", NULL), *targets = ref_i32(name, "targets", NULL);
    for (int i = 0; i < M; i++)
        if (targets[i] == -100) targets[i] = ATTN_GPT_IGNORE_INDEX;
    attn_gpt_state *st;
    OK(attn_gpt_state_init(m, B, T, &st));
    float *logits = attn_alloc((size_t)M * V * sizeof(float));
    float *hidden = attn_alloc((size_t)(L + 1) * M * C * sizeof(float));
    const size_t per_layer = (size_t)B * c->n_head * T * T;
    float *probs = attn_alloc((size_t)L * per_layer * sizeof(float));
    float *probs_l[64];
    assert_true(L <= 64);
    for (int l = 0; l < L; l++) probs_l[l] = probs + l * per_layer;
    const attn_gpt_capture cap = {hidden, probs_l};
    attn_gpt_set_capture(st, &cap);
    OK(attn_gpt_forward(m, st, B, T, ids, logits));
    attn_gpt_set_capture(st, NULL);
    float *rl = ref_f32(name, "logits", NULL), *rh = ref_f32(name, "hidden", NULL);
    snprintf(what, sizeof what, "%s %s logits", name, bn);
    tu_close(what, logits, rl, (size_t)M * V, TOL_LOGITS, 0);
    for (int l = 0; l <= L; l++) {
        snprintf(what, sizeof what, "  hidden state %d", l);
        const size_t n = (size_t)M * C;
        tu_close(what, hidden + l * n, rh + l * n, n, TOL_HIDDEN, 0);
    }
    /* every query head's attention probabilities (output_attentions), grouped heads included */
    float *ra = ref_f32(name, "attn", NULL);
    snprintf(what, sizeof what, "  attention probabilities (%d layers)", L);
    tu_close(what, probs, ra, (size_t)L * per_layer, TOL_HIDDEN, 0);
    attn_free(ra), attn_free(probs);

    /* loss and every gradient */
    OK(attn_gpt_alloc_grads(m));
    attn_gpt_zero_grad(m);
    float loss, *rloss = ref_f32(name, "loss", NULL);
    OK(attn_gpt_loss(m, st, targets, 1.0f, &loss));
    snprintf(what, sizeof what, "%s %s loss", name, bn);
    tu_close(what, &loss, rloss, 1, TOL_LOSS, 0);
    OK(attn_gpt_backward(m, st));
    int checked = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_gpt_tensor *t = &m->tensors[i];
        char key[200];
        snprintf(key, sizeof key, "grad.%s", t->name);
        size_t n;
        float *rg = ref_f32(name, key, &n);
        assert_int_equal(n, t->numel);
        snprintf(what, sizeof what, "  d/d %s", t->name);
        tu_close(what, m->grads + t->offset, rg, n, TOL_GRAD, 0);
        attn_free(rg);
        checked++;
    }
    assert_true(checked >= 2 + 9 * L);

    /* KV-cache decoding: 5 prompt positions, then one per call */
    attn_gpt_kv *kv;
    float *dec = attn_alloc((size_t)M * V * sizeof(float));
    float *step = attn_alloc((size_t)M * V * sizeof(float));
    int32_t *tok = attn_alloc((size_t)M * sizeof(int32_t));
    decode_all(m, B, T, ids, dec, step, tok, false);
    snprintf(what, sizeof what, "%s %s cached decoding vs forward", name, bn);
    tu_close(what, dec, logits, (size_t)M * V, TOL_DECODE, 0);
    /* the same with packed weights (the 2·5-row prompt pass on the panels): bit for bit */
    float *dec_packed = attn_alloc((size_t)M * V * sizeof(float));
    OK(attn_gpt_pack_weights(m));
    decode_all(m, B, T, ids, dec_packed, step, tok, false);
    assert_memory_equal(dec_packed, dec, (size_t)M * V * sizeof(float));
    attn_gpt_unpack_weights(m);
    attn_free(dec_packed);

    /* a float16 KV cache (--kv-type f16): transformers' float64 model with its keys (after the
     * rotary embedding) and values rounded to float16 (tools/ref_llama.py logits_kv16). The
     * rounding moves the logits by far more than attn's own error, so the check tells the two
     * caches apart: attn's f16 decoding must be within TOL_DECODE_KV16 of that reference and, in
     * root mean square, KV16_APART times closer to it than to the reference without the
     * rounding (measured: 7x to 340x). */
    float *dec16 = attn_alloc((size_t)M * V * sizeof(float));
    float *r16 = ref_f32(name, "logits_kv16", NULL);
    decode_all(m, B, T, ids, dec16, step, tok, true);
    snprintf(what, sizeof what, "%s %s f16-cache decoding vs its reference", name, bn);
    tu_close(what, dec16, r16, (size_t)M * V, TOL_DECODE_KV16, 0);
    double to16 = 0, to32 = 0; /* root mean square distances of attn's f16 logits */
    for (size_t i = 0; i < (size_t)M * V; i++) {
        to16 += ((double)dec16[i] - r16[i]) * ((double)dec16[i] - r16[i]);
        to32 += ((double)dec16[i] - rl[i]) * ((double)dec16[i] - rl[i]);
    }
    to16 = sqrt(to16 / ((double)M * V)), to32 = sqrt(to32 / ((double)M * V));
    if (!getenv("ATTN_TEST_QUIET"))
        printf("  %s %s f16 cache: rms distance to the f16 reference %.3e, to the float32 one %.3e\n",
               name, bn, to16, to32);
    assert_true(to32 > KV16_APART * to16);
    attn_free(dec16), attn_free(r16);

    /* greedy decoding, token for token as transformers' */
    size_t np, ng;
    int32_t *prompt = ref_i32(name, "prompt", &np), *greedy = ref_i32(name, "greedy", &ng);
    float *gap = ref_f32(name, "greedy_gap", NULL);
    OK(attn_gpt_kv_init(m, 1, (int)(np + ng), &kv));
    OK(attn_gpt_decode(m, kv, 1, (int)np, prompt, step, false));
    int same = 0;
    if (tu_valgrind() && ng > 12) ng = 12; /* the same paths, fewer steps */
    for (size_t i = 0; i < ng; i++) {
        int32_t next;
        int32_t best = 0;
        for (int v = 1; v < V; v++)
            if (step[v] > step[best]) best = v;
        next = best;
        if (next != greedy[i]) {
            printf("  %s %s greedy: token %zu is %d, transformers' %d (its top-2 gap %.3g)\n",
                   name, bn, i, (int)next, (int)greedy[i], (double)gap[i]);
            break;
        }
        same++;
        if (i + 1 < ng) OK(attn_gpt_decode(m, kv, 1, 1, &next, step, false));
    }
    if (!getenv("ATTN_TEST_QUIET"))
        printf("  %s %s greedy: %d of %zu tokens as transformers'\n", name, bn, same, ng);
    assert_int_equal(same, (int)ng);
    attn_gpt_kv_free(kv);

    if (save) { /* save, reload, and transformers on attn's directory */
        char dir[512];
        assert_int_equal(tu_mkdtemp(dir, sizeof dir, "llama-save"), 0);
        OK(attn_gpt_save_dir(m, dir));
        attn_gpt_model *back;
        if (attn_gpt_load_dir(dir, &back)) fail_msg("%s", attn_last_error());
        assert_int_equal(back->num_params, m->num_params);
        assert_memory_equal(back->params, m->params, m->num_params * sizeof(float));
        assert_memory_equal(&back->cfg, &m->cfg, sizeof m->cfg);
        attn_gpt_model_free(back);
        if (!tu_valgrind()) check_hf_loads(dir, m); /* python: untraced, only slower */
        tu_rm_tree(dir);
    }

    attn_free(prompt), attn_free(greedy), attn_free(gap), attn_free(tok), attn_free(step);
    attn_free(dec), attn_free(ids), attn_free(targets), attn_free(logits), attn_free(hidden);
    attn_free(rl), attn_free(rh), attn_free(rloss);
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
}

static void run_all(const char *ref, attn_backend be, bool save) {
    tu_need_backend(be);
    if (tu_valgrind() && be == ATTN_BACKEND_REF)
        tu_skip_env("under valgrind only the SIMD pass runs (the same code paths but the kernels)");
    if (!ref_open(ref)) {
        if (!strcmp(ref, "llama"))
            fail_msg("no %s (run tools/ref_llama.py; tests/run.sh does)",
                     tu_ref_path("llama.safetensors"));
        tu_skip("no %s: tools/refnew_qwen3.py needs the newest transformers (the .venv-bench "
                "venv: sh bench/setup.sh; tests/run.sh runs it when present)",
                tu_ref_path("qwen3.safetensors"));
    }
    OK(attn_set_backend(be));
    const char *models = attn_st_metadata(REF, "models");
    assert_non_null(models);
    char list[1024];
    snprintf(list, sizeof list, "%s", models);
    int ran = 0;
    for (char *sv = NULL, *nm = strtok_r(list, ",", &sv); nm; nm = strtok_r(NULL, ",", &sv))
        run_model(nm, save), ran++;
    assert_true(ran >= 3);
    attn_set_backend(ATTN_BACKEND_AUTO);
}

/* llama, mistral, qwen2 (transformers 4.49 in the project venv) */
static void test_llama_ref(void **state) {
    (void)state;
    run_all("llama", ATTN_BACKEND_REF, false);
}
static void test_llama_avx2(void **state) {
    (void)state;
    run_all("llama", ATTN_BACKEND_AVX2, true);
}
static void test_llama_avx512(void **state) {
    (void)state;
    run_all("llama", ATTN_BACKEND_AVX512, false);
}
/* qwen3 and transformers 5's configuration files (the newest transformers) */
static void test_qwen3_ref(void **state) {
    (void)state;
    run_all("qwen3", ATTN_BACKEND_REF, false);
}
static void test_qwen3_avx2(void **state) {
    (void)state;
    run_all("qwen3", ATTN_BACKEND_AVX2, true);
}
static void test_qwen3_avx512(void **state) {
    (void)state;
    run_all("qwen3", ATTN_BACKEND_AVX512, false);
}

/* ---- bad configurations and checkpoints: one-line errors naming the file and the field ---- */

static void expect_config_error(const char *json, attn_status want, const char *s1,
                                const char *s2) {
    attn_gpt_config c;
    tu_expect_fail3(attn_gpt_config_parse(json, "cfg.json", &c), want, "cfg.json", s1, s2);
}

static void test_bad_configs(void **state) {
    (void)state;
    attn_gpt_config c;
    /* a valid one first, with transformers' class defaults filled in */
    assert_int_equal(attn_gpt_config_parse("{\"model_type\": \"mistral\"}", "m", &c),
                     ATTN_STATUS_OK);
    assert_int_equal(c.n_kv_head, 8);
    assert_int_equal(c.sliding_window, 4096);
    assert_int_equal(attn_gpt_config_parse("{\"model_type\": \"qwen3\"}", "q", &c),
                     ATTN_STATUS_OK);
    assert_int_equal(c.head_dim, 128);
    assert_int_equal(attn_gpt_config_parse(
                         "{\"model_type\": \"llama\", \"eos_token_id\": [128001, 128008, 128009]}",
                         "l", &c),
                     ATTN_STATUS_OK);
    assert_true(attn_gpt_is_eos(&c, 128008) && attn_gpt_is_eos(&c, 128001));
    assert_false(attn_gpt_is_eos(&c, 2));
#define L(x) "{\"model_type\": \"llama\", " x "}"
    expect_config_error(L("\"num_attention_heads\": 6, \"num_key_value_heads\": 4"),
                        ATTN_STATUS_INVALID_ARGUMENT, "num_key_value_heads", "divide");
    expect_config_error(L("\"num_attention_heads\": 4, \"num_key_value_heads\": 8"),
                        ATTN_STATUS_INVALID_ARGUMENT, "num_key_value_heads", NULL);
    expect_config_error(L("\"head_dim\": 7"), ATTN_STATUS_INVALID_ARGUMENT, "head_dim", "even");
    expect_config_error(L("\"hidden_size\": 96, \"num_attention_heads\": 32"),
                        ATTN_STATUS_INVALID_ARGUMENT, "head", NULL);
    expect_config_error(L("\"head_dim\": -2"), ATTN_STATUS_INVALID_ARGUMENT, "head_dim", NULL);
    expect_config_error(L("\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}"),
                        ATTN_STATUS_UNSUPPORTED, "yarn", "rope_scaling");
    expect_config_error(L("\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}"),
                        ATTN_STATUS_FORMAT, "low_freq_factor", NULL);
    expect_config_error(L("\"rope_scaling\": {\"type\": \"linear\", \"factor\": 0}"),
                        ATTN_STATUS_INVALID_ARGUMENT, "factor", NULL);
    expect_config_error(L("\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
                          "\"low_freq_factor\": 4, \"high_freq_factor\": 1, "
                          "\"original_max_position_embeddings\": 8192}"),
                        ATTN_STATUS_INVALID_ARGUMENT, "high_freq_factor", NULL);
    expect_config_error(L("\"rope_scaling\": 3"), ATTN_STATUS_FORMAT, "rope_scaling", NULL);
    expect_config_error(L("\"rope_theta\": 0"), ATTN_STATUS_INVALID_ARGUMENT, "rope_theta", NULL);
    expect_config_error(L("\"hidden_act\": \"tanhshrink\""), ATTN_STATUS_UNSUPPORTED,
                        "hidden_act", "tanhshrink");
    expect_config_error(L("\"num_hidden_layers\": 0"), ATTN_STATUS_INVALID_ARGUMENT,
                        "num_hidden_layers", NULL);
    expect_config_error(L("\"vocab_size\": 2000000000"), ATTN_STATUS_TOO_LARGE, "vocab_size",
                        NULL);
    expect_config_error(L("\"hidden_size\": \"4096\""), ATTN_STATUS_FORMAT, "hidden_size", NULL);
    expect_config_error(L("\"partial_rotary_factor\": 0.5"), ATTN_STATUS_UNSUPPORTED,
                        "partial_rotary_factor", NULL);
    expect_config_error(L("\"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9]"),
                        ATTN_STATUS_UNSUPPORTED, "eos_token_id", NULL);
    expect_config_error("{\"model_type\": \"qwen3\", \"num_hidden_layers\": 2, "
                        "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
                        ATTN_STATUS_UNSUPPORTED, "layer_types[1]", NULL);
    expect_config_error("{\"model_type\": \"mistral\", \"sliding_window\": -3}",
                        ATTN_STATUS_INVALID_ARGUMENT, "sliding_window", NULL);
    expect_config_error("{\"model_type\": \"falcon\"}", ATTN_STATUS_UNSUPPORTED, "falcon",
                        "qwen3");
#undef L
}

/* Copy a reference model directory, then break it. */
static void copy_model(const char *name, const char *to) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, model_dir(name), to);
    assert_int_equal(system(cmd), 0);
}

static void test_bad_checkpoints(void **state) {
    (void)state;
    if (!ref_open("llama")) fail_msg("no llama.safetensors (run tools/ref_llama.py)");
    char dir[512], path[1024];
    assert_int_equal(tu_mkdtemp(dir, sizeof dir, "llama-bad"), 0);
    attn_gpt_model *m = NULL;
    /* a sharded checkpoint with a shard missing */
    copy_model("llama_mqa8_llama3_bias", dir);
    snprintf(path, sizeof path, "%s/model-00002-of-00003.safetensors", dir);
    if (access(path, F_OK) != 0) { /* the shard count may differ: remove the second listed */
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "ls '%s'/model-0000*-of-*.safetensors | sed -n 2p", dir);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        assert_non_null(fgets(path, sizeof path, p));
        path[strcspn(path, "\n")] = 0;
        pclose(p);
    }
    assert_int_equal(unlink(path), 0);
    attn_status s = attn_gpt_load_dir(dir, &m);
    assert_int_not_equal(s, ATTN_STATUS_OK);
    tu_expect_fail(s, s, "model-0000", NULL);
    /* a config that disagrees with the weights (head size): the tensor and its expected shape */
    copy_model("llama_mha_tied", dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t n;
    char *cfg = tu_read_all(path, &n);
    char *at = strstr(cfg, "\"num_key_value_heads\": 4");
    assert_non_null(at);
    memcpy(at, "\"num_key_value_heads\": 2", strlen("\"num_key_value_heads\": 2"));
    tu_write_all(path, cfg, n);
    free(cfg);
    tu_expect_fail3(attn_gpt_load_dir(dir, &m), ATTN_STATUS_FORMAT, "k_proj.weight", "shape",
                    NULL);
    /* a tensor the configuration does not have */
    copy_model("qwen2_gqa3_tied", dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    cfg = tu_read_all(path, &n);
    at = strstr(cfg, "\"num_hidden_layers\": 2");
    assert_non_null(at);
    memcpy(at, "\"num_hidden_layers\": 1", strlen("\"num_hidden_layers\": 1"));
    tu_write_all(path, cfg, n);
    free(cfg);
    tu_expect_fail(attn_gpt_load_dir(dir, &m), ATTN_STATUS_FORMAT, "model.layers.1", NULL);
    /* only PyTorch pickles */
    copy_model("llama_mha_tied", dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    char bin[1100];
    snprintf(bin, sizeof bin, "%s/pytorch_model.bin", dir);
    assert_int_equal(rename(path, bin), 0);
    tu_expect_fail(attn_gpt_load_dir(dir, &m), ATTN_STATUS_UNSUPPORTED, "safe_serialization",
                   NULL);
    tu_rm_tree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_ref),  cmocka_unit_test(test_llama_avx2),
        cmocka_unit_test(test_llama_avx512), cmocka_unit_test(test_qwen3_ref),
        cmocka_unit_test(test_qwen3_avx2), cmocka_unit_test(test_qwen3_avx512),
        cmocka_unit_test(test_bad_configs), cmocka_unit_test(test_bad_checkpoints),
    };
    int rc = cmocka_run_group_tests_name("llama", tests, NULL, NULL);
    if (REF) attn_st_close(REF);
    return rc;
}

/* test_gguf_models.c — decoders from GGUF files (attn_gpt.h: attn_gpt_load_gguf) against
 * transformers, on tiny random models that tools/ref_gguf_models.py (llama, qwen2, gpt2) and
 * tools/refnew_gguf_qwen3.py (qwen3) write with the gguf package's GGUFWriter as
 * convert_hf_to_gguf.py lays them out (the llama architecture's q/k rows permuted, GPT-2's Conv1D
 * weights transposed), in F32, F16, Q8_0, Q4_0 and Q4_1; the references are transformers' model on
 * exactly the weights each file holds (dequantized by gguf.quants). Per file:
 *   - where the tensors are: F16 and quantized matrices kept as stored (linear maps on qw, Q8_0 /
 *     Q4_0 / Q4_1 ones repacked as qpacked, the embedding table as wte_q), no parameter buffer;
 *   - logits of a batch (forward) and of KV-cache decoding (5 positions, then one per call)
 *     against the float64 model: within 1e-4 of max|logit| (measured: see the output);
 *   - greedy decoding of 32 tokens identical to transformers' KV-cache greedy loop;
 *   - the same after attn_gpt_pack_weights (float maps packed, quantized ones used as they are);
 *   - bad files: missing keys and tensors, wrong shapes and types, inconsistent head counts,
 *     stray tensors, unknown architectures: one-line errors naming the file and the key/tensor;
 *   - training and saving such a model are refused;
 *   - BERT (arch "bert", F32 and Q8_0 converted to float32): last hidden states of a padded batch
 *     with token types within 1e-5 of the float64 model's; forward and attention on the file;
 *   - the real SmolLM2-135M-Instruct Q4_1 file against transformers on its dequantized weights,
 *     and the CLI (chat, generate, forward, attention) on it. */
#include "attn_bert.h"
#include "attn_gguf.h"
#include "attn_gpt.h"
#include "attn_io.h"
#include "attn_tok.h"
#include "tu.h"
#include "tu_tok.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include <string.h>
#include <unistd.h>

#define TOL_LOGITS 1e-4

#define OK(x)                                                                                      \
    do {                                                                                           \
        attn_status s_ = (x);                                                                      \
        if (s_) fail_msg("%s: %s", #x, attn_last_error());                                         \
    } while (0)

static attn_st_file *REF;

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

/* (4 rotating buffers) */
static const char *gguf_path(const char *model) {
    static char p[4][4200];
    static int k;
    char *b = p[k++ & 3];
    snprintf(b, sizeof p[0], "%s/%s.gguf", tu_ref_path("gguf_models"), model);
    return b;
}

/* The greedy continuation (n tokens) of prompt (np) with a KV cache. */
static void greedy(const attn_gpt_model *m, const int32_t *prompt, int np, int n, int32_t *out) {
    const int V = m->cfg.vocab_size;
    attn_gpt_kv *kv;
    OK(attn_gpt_kv_init(m, 1, np + n, &kv));
    float *lg = attn_alloc((size_t)V * sizeof(float));
    OK(attn_gpt_decode(m, kv, 1, np, prompt, lg, false));
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (lg[v] > lg[best]) best = v;
        out[i] = best;
        if (i + 1 < n) OK(attn_gpt_decode(m, kv, 1, 1, &out[i], lg, false));
    }
    attn_free(lg);
    attn_gpt_kv_free(kv);
}

/* One model of a reference file: everything the header lists. */
static void check_model(const char *name, bool quantized) {
    attn_gpt_model *m;
    double t0 = tu_now();
    OK(attn_gpt_load_gguf(gguf_path(name), &m));
    const double t_load = tu_now() - t0;
    const attn_gpt_config *c = &m->cfg;
    assert_null(m->params);
    const attn_nn_linear *q = attn_gpt_is_llama(c) ? &m->w.h[0].attn.q : &m->w.h[0].attn.qkv;
    if (quantized) {
        assert_non_null(q->qw);
        assert_null(q->w);
        assert_non_null(m->wte_q);
        assert_null(m->w.wte);
        /* Q8_0, Q4_0 and Q4_1 matrices repacked (attn_quant_pack), no other type */
        if (attn_quant_pack_supported(q->qtype))
            assert_non_null(q->qpacked);
        else
            assert_null(q->qpacked);
    } else {
        assert_null(q->qw);
        assert_non_null(q->w);
        assert_null(m->wte_q);
    }
    size_t n_ids, n_ref, np, ng;
    int32_t *ids = ref_i32(name, "ids", &n_ids);
    float *ref = ref_f32(name, "logits", &n_ref);
    const int B = 2, T = (int)(n_ids / 2), V = c->vocab_size;
    assert_int_equal(n_ref, (size_t)B * T * V);
    float *lg = attn_alloc(n_ref * sizeof(float));
    attn_gpt_state *st;
    OK(attn_gpt_state_init(m, B, T, &st));
    OK(attn_gpt_forward(m, st, B, T, ids, lg));
    char what[160];
    snprintf(what, sizeof what, "%s: logits", name);
    assert_true(tu_close(what, lg, ref, n_ref, TOL_LOGITS, 0));
    attn_gpt_state_free(st);
    /* KV-cache decoding: 5 positions, then one per call */
    attn_gpt_kv *kv;
    OK(attn_gpt_kv_init(m, B, T, &kv));
    float *step = attn_alloc((size_t)B * 5 * V * sizeof(float));
    int32_t tok[10];
    for (int t = 0; t < T;) {
        const int n = t ? 1 : 5;
        for (int b = 0; b < B; b++)
            memcpy(tok + b * n, ids + (size_t)b * T + t, (size_t)n * sizeof *tok);
        OK(attn_gpt_decode(m, kv, B, n, tok, step, true));
        for (int b = 0; b < B; b++)
            memcpy(lg + ((size_t)b * T + t) * V, step + (size_t)b * n * V,
                   (size_t)n * V * sizeof(float));
        t += n;
    }
    snprintf(what, sizeof what, "%s: decoded logits", name);
    assert_true(tu_close(what, lg, ref, n_ref, TOL_LOGITS, 0));
    attn_gpt_kv_free(kv);
    attn_free(step);
    /* greedy, then the same packed */
    int32_t *prompt = ref_i32(name, "prompt", &np);
    int32_t *want = ref_i32(name, "greedy", &ng);
    int32_t got[64];
    assert_true(ng <= 64);
    greedy(m, prompt, (int)np, (int)ng, got);
    int agree = 0;
    while (agree < (int)ng && got[agree] == want[agree]) agree++;
    printf("  %s: greedy %d/%zu tokens as transformers; loaded in %.3f s\n", name, agree, ng,
           t_load);
    assert_int_equal(agree, (int)ng);
    OK(attn_gpt_pack_weights(m));
    greedy(m, prompt, (int)np, (int)ng, got);
    assert_memory_equal(got, want, ng * sizeof *got);
    /* inference only */
    tu_expect_fail(attn_gpt_alloc_grads(m), ATTN_STATUS_UNSUPPORTED, "GGUF", "inference");
    tu_expect_fail(attn_gpt_save_dir(m, tu_tmp("gguf-save")), ATTN_STATUS_UNSUPPORTED, "GGUF",
                   NULL);
    attn_gpt_model_free(m);
    attn_free(ids);
    attn_free(ref);
    attn_free(lg);
    attn_free(prompt);
    attn_free(want);
}

static bool open_ref(const char *file) {
    if (REF) attn_st_close(REF);
    REF = NULL;
    if (access(tu_ref_path(file), R_OK) != 0) return false;
    if (attn_st_open(tu_ref_path(file), &REF)) fail_msg("%s", attn_last_error());
    return true;
}

static void run_file(const char *file, const char *gen) {
    if (!open_ref(file)) tu_skip("no %s (%s)", tu_ref_path(file), gen);
    const char *models = attn_st_metadata(REF, "models");
    assert_non_null(models);
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", models);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        check_model(tok, strstr(tok, "_f32") == NULL); /* F16 and quantized: kept as stored */
        n++;
    }
    printf("  %d GGUF models as transformers\n", n);
    attn_st_close(REF);
    REF = NULL;
}

static void test_llama_qwen2_gpt2(void **state) {
    (void)state;
    run_file("gguf_models.safetensors", "tools/ref_gguf_models.py");
}

static void test_qwen3(void **state) {
    (void)state;
    run_file("gguf_qwen3.safetensors", "tools/refnew_gguf_qwen3.py in .venv-bench");
}

/* ---- bad files ------------------------------------------------------------------------------- */

/* A copy of src with one change: kv `drop` left out, kv `set` replacing its key's value (or
 * added), tensor `tdrop` left out, tensor `tname`'s type / ne changed, one tensor `extra` added
 * (a copy of the first tensor under that name). */
typedef struct {
    const char *drop;
    attn_gguf_kv set;
    const char *tdrop;
    const char *tname;
    attn_gguf_dtype ttype;
    int64_t tne0;
    const char *extra;
} mutation;

static const char *mutate(const char *src, const mutation *mu, const char *out_name) {
    attn_gguf *g;
    OK(attn_gguf_open(src, &g));
    const size_t nkv = attn_gguf_kv_count(g), nt = attn_gguf_tensor_count(g);
    attn_gguf_kv *kv = attn_calloc((nkv + 1) * sizeof *kv);
    attn_gguf_tensor_desc *td = attn_calloc((nt + 1) * sizeof *td);
    void *scratch = NULL;
    size_t k = 0, j = 0;
    bool set_done = false;
    for (size_t i = 0; i < nkv; i++) {
        const attn_gguf_kv *e = attn_gguf_kv_at(g, i);
        if (!strcmp(e->key, "general.alignment")) continue; /* the writer's default */
        if (mu->drop && !strcmp(e->key, mu->drop)) continue;
        if (mu->set.key && !strcmp(e->key, mu->set.key)) {
            kv[k++] = mu->set;
            set_done = true;
            continue;
        }
        kv[k++] = *e;
    }
    if (mu->set.key && !set_done) kv[k++] = mu->set;
    for (size_t i = 0; i < nt; i++) {
        const attn_gguf_tensor *t = attn_gguf_tensor_at(g, i);
        if (mu->tdrop && !strcmp(t->name, mu->tdrop)) continue;
        attn_gguf_tensor_desc *d = &td[j++];
        d->name = t->name, d->type = t->type, d->n_dims = t->n_dims;
        memcpy(d->ne, t->ne, sizeof d->ne);
        d->data = attn_gguf_tensor_data(g, t);
        if (mu->tname && !strcmp(t->name, mu->tname)) {
            if (mu->ttype != t->type) d->type = mu->ttype;
            if (mu->tne0) d->ne[0] = mu->tne0;
            uint64_t nb;
            assert_true(attn_gguf_nbytes(d->type, d->n_dims, d->ne, &nb));
            scratch = attn_calloc(nb ? nb : 1);
            d->data = scratch;
        }
    }
    if (mu->extra) {
        td[j] = td[0];
        td[j++].name = mu->extra;
    }
    const char *path = tu_tmp(out_name);
    OK(attn_gguf_save(path, kv, k, td, j));
    attn_free(kv);
    attn_free(td);
    attn_free(scratch);
    attn_gguf_close(g);
    return path;
}

static void expect_bad(const char *src, mutation mu, attn_status want, const char *s1,
                       const char *s2) {
    const char *p = mutate(src, &mu, "bad.gguf");
    attn_gpt_model *m = (attn_gpt_model *)1;
    tu_expect_fail(attn_gpt_load_gguf(p, &m), want, s1, s2);
    assert_null(m);
}

/* ---- BERT ------------------------------------------------------------------------------------ */

/* BertModel as convert_hf_to_gguf.py writes it, F32 and Q8_0 (converted to float32 at load): the
 * last hidden states of a batch with token types and padding against the float64 model on the
 * file's weights; the CLI's forward and attention on the file; bad files. */
static void test_bert(void **state) {
    (void)state;
    if (!open_ref("gguf_bert.safetensors"))
        tu_skip("no %s (tools/ref_gguf_models.py)", tu_ref_path("gguf_bert.safetensors"));
    static const char *const names[2] = {"bert_f32", "bert_q8_0"};
    for (int i = 0; i < 2; i++) {
        attn_bert_model *m;
        OK(attn_bert_load_gguf(gguf_path(names[i]), &m));
        size_t n_ids, n_h;
        int32_t *ids = ref_i32(names[i], "ids", &n_ids);
        int32_t *types = ref_i32(names[i], "types", NULL);
        int32_t *len = ref_i32(names[i], "lengths", NULL);
        float *ref = ref_f32(names[i], "hidden", &n_h);
        const int B = 2, T = (int)n_ids / 2;
        assert_int_equal(n_h, (size_t)B * T * m->cfg.hidden_size);
        float *h = attn_alloc(n_h * sizeof(float));
        attn_bert_state *st;
        OK(attn_bert_state_init(m, B, T, &st));
        OK(attn_bert_forward(m, st, B, T, ids, types, len, h));
        char what[96];
        snprintf(what, sizeof what, "%s: last hidden states", names[i]);
        assert_true(tu_close(what, h, ref, n_h, 1e-5, 0));
        attn_bert_state_free(st);
        attn_bert_model_free(m);
        attn_free(ids);
        attn_free(types);
        attn_free(len);
        attn_free(ref);
        attn_free(h);
    }
    attn_st_close(REF);
    REF = NULL;
    /* the CLI: forward's hidden states and attention's maps on the file */
    if (access(tu_attn_bin(), X_OK) == 0) {
        char cmd[8192], out[4096];
        const char *npy = tu_tmp("bert.npy");
        snprintf(cmd, sizeof cmd, "'%s' forward --model '%s' --ids 5,6,7,8 --out '%s'",
                 tu_attn_bin(), gguf_path("bert_q8_0"), npy);
        assert_int_equal(tu_sh_capture(cmd, 1, out, sizeof out), 0);
        float *h = NULL;
        int nd = 0;
        int64_t sh[ATTN_MAX_DIMS];
        OK(attn_npy_load_f32(npy, &h, &nd, sh));
        assert_true(nd == 2 && sh[0] == 4 && sh[1] == 64);
        attn_free(h);
        snprintf(cmd, sizeof cmd, "'%s' attention --model '%s' --ids 5,6,7,8 --out '%s'",
                 tu_attn_bin(), gguf_path("bert_f32"), tu_tmp("bert-att.json"));
        assert_int_equal(tu_sh_capture(cmd, 1, out, sizeof out), 0);
        printf("  attention on a BERT GGUF file: %s", out);
        assert_non_null(strstr(out, "2 layers"));
    }
    /* bad files */
    const char *f = gguf_path("bert_f32");
    attn_bert_model *m = (attn_bert_model *)1;
    const char *p = mutate(f, &(mutation){.tdrop = "blk.1.ffn_up.bias"}, "bad-bert.gguf");
    tu_expect_fail(attn_bert_load_gguf(p, &m), ATTN_STATUS_FORMAT,
                   "'blk.1.ffn_up.bias' is missing", "(128)");
    assert_null(m);
    p = mutate(f, &(mutation){.set = attn_gguf_kv_u32("bert.attention.head_count", 3)},
               "bad-bert.gguf");
    tu_expect_fail(attn_bert_load_gguf(p, &m), ATTN_STATUS_FORMAT, "head_count 3 does not divide",
                   NULL);
    p = mutate(f, &(mutation){.drop = "bert.attention.layer_norm_epsilon"}, "bad-bert.gguf");
    tu_expect_fail(attn_bert_load_gguf(p, &m), ATTN_STATUS_NOT_FOUND, "layer_norm_epsilon", NULL);
    p = mutate(f, &(mutation){.extra = "blk.2.attn_q.weight"}, "bad-bert.gguf");
    tu_expect_fail(attn_bert_load_gguf(p, &m), ATTN_STATUS_FORMAT,
                   "'blk.2.attn_q.weight' is not part", NULL);
    tu_expect_fail(attn_bert_load_gguf(gguf_path("llama_gqa_f32"), &m), ATTN_STATUS_UNSUPPORTED,
                   "\"llama\" is not an encoder", NULL);
    tu_expect_fail(attn_gpt_load_gguf(f, &(attn_gpt_model *){NULL}), ATTN_STATUS_UNSUPPORTED,
                   "\"bert\" is not a decoder", NULL);
}

/* ---- the real SmolLM2-135M-Instruct file ----------------------------------------------------- */

#define SMOLLM2 "models/SmolLM2-135M-Instruct.Q4_1.gguf"
/* attn on the quantized weights (float32 activations) against transformers on the same weights
 * dequantized to float32: only the order of float32 sums differs. Bound on |Δlogit| relative to
 * max|logit| of the prompt (measured: see the output). */
#define TOL_SMOLLM2 1e-4

static void test_smollm2_file(void **state) {
    (void)state;
    /* Under memcheck the real 135M-parameter model costs minutes of CI; its loading (repacking,
     * released pages) and decoding paths run there on the tiny Q8_0/Q4_0/Q4_1 files of
     * test_llama_qwen2_gpt2. make test and make san run it whole. */
    if (tu_valgrind()) tu_skip_env("valgrind: the real SmolLM2 file is checked by make test and make san");
    if (access(SMOLLM2, R_OK) != 0) tu_skip("%s missing (tools/get_smollm2.sh)", SMOLLM2);
    if (!open_ref("gguf_smollm2.safetensors"))
        tu_skip("no %s (tools/refnew_gguf_smollm2.py, .venv-bench)",
                tu_ref_path("gguf_smollm2.safetensors"));
    attn_gpt_model *m;
    attn_tok *tok;
    double t0 = tu_now();
    OK(attn_gpt_load_gguf(SMOLLM2, &m));
    const double t_load = tu_now() - t0;
    OK(attn_tok_load(SMOLLM2, &tok));
    const attn_gpt_config *c = &m->cfg;
    assert_int_equal(c->arch, ATTN_GPT_ARCH_LLAMA);
    assert_true(c->n_layer == 30 && c->n_embd == 576 && c->n_head == 9 && c->n_kv_head == 3);
    assert_true(c->tie_word_embeddings && m->wte_qtype == ATTN_QTYPE_Q8_0 && m->lm_head_q);
    assert_int_equal(m->w.h[0].attn.q.qtype, ATTN_QTYPE_Q4_1);
    assert_int_equal(c->eos_token_id, 2);
    printf("  %s: llama, %d layers, C %d, %d/%d heads, V %d, rope_theta %g; loaded in %.3f s\n",
           SMOLLM2, c->n_layer, c->n_embd, c->n_head, c->n_kv_head, c->vocab_size,
           (double)c->rope_theta, t_load);
    const int P_all = atoi(attn_st_metadata(REF, "prompts")), V = c->vocab_size;
#if defined(__SANITIZE_ADDRESS__)
    const int P = P_all > 5 ? 5 : P_all; /* ASan + UBSan (make san): 5 prompts, the same paths */
#else
    const int P = P_all;
#endif
    json_error_t jerr;
    json_t *texts = json_loads(attn_st_metadata(REF, "texts"), 0, &jerr);
    json_t *tf_gguf = json_loads(attn_st_metadata(REF, "tf_gguf_ids"), 0, &jerr);
    assert_true(texts && tf_gguf && (int)json_array_size(texts) == P_all);
    int ids_same = 0, tf_same = 0, greedy_same = 0;
    double worst = 0;
    for (int p = 0; p < P; p++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", p);
        const char *text = json_string_value(json_array_get(texts, (size_t)p));
        size_t n_ref, n_lg, ng;
        int32_t *want_ids = ref_i32(name, "ids", &n_ref);
        int32_t *ids;
        size_t n;
        OK(attn_tok_encode_alloc(tok, text, strlen(text), &ids, &n));
        ids_same += tu_tok_ids_eq(ids, n, want_ids, n_ref);
        /* transformers' tokenizer built from the same GGUF file */
        json_t *tg = json_array_get(tf_gguf, (size_t)p);
        bool same = json_array_size(tg) == n;
        for (size_t i = 0; same && i < n; i++)
            same = json_integer_value(json_array_get(tg, i)) == ids[i];
        tf_same += same;
        if (!same) printf("  p%d: transformers' GGUF tokenizer differs on %.40s...\n", p, text);
        /* logits at every position */
        float *ref = ref_f32(name, "logits", &n_lg);
        assert_int_equal(n_lg, n_ref * (size_t)V);
        float *lg = attn_alloc(n_lg * sizeof(float));
        attn_gpt_state *st;
        OK(attn_gpt_state_init(m, 1, (int)n_ref, &st));
        OK(attn_gpt_forward(m, st, 1, (int)n_ref, want_ids, lg));
        attn_gpt_state_free(st);
        double err = 0, scale = 0;
        for (size_t i = 0; i < n_lg; i++) {
            err = fmax(err, fabs((double)lg[i] - ref[i]));
            scale = fmax(scale, fabs((double)ref[i]));
        }
        worst = fmax(worst, err / scale);
        /* greedy 32 */
        int32_t *want = ref_i32(name, "greedy", &ng);
        float *gap = ref_f32(name, "greedy_gap", NULL);
        int32_t got[32];
        greedy(m, want_ids, (int)n_ref, (int)ng, got);
        int k = 0;
        while (k < (int)ng && got[k] == want[k]) k++;
        greedy_same += k == (int)ng;
        if (k < (int)ng)
            printf("  p%d: greedy parts at token %d of %zu (transformers' top-2 gap there %.3g): "
                   "%d vs %d\n",
                   p, k, ng, (double)gap[k], (int)got[k], (int)want[k]);
        attn_free(want_ids);
        attn_free(ids);
        attn_free(ref);
        attn_free(lg);
        attn_free(want);
        attn_free(gap);
    }
    printf("  SmolLM2 Q4_1 GGUF, %d prompts: token ids %d/%d identical to the real "
           "tokenizer.json's, "
           "%d/%d to transformers' tokenizer from the GGUF file; logits within %.2e of max|logit| "
           "(bound %.0e); greedy 32 tokens identical on %d/%d prompts\n",
           P, ids_same, P, tf_same, P, worst, TOL_SMOLLM2, greedy_same, P);
    assert_int_equal(ids_same, P);
    assert_true(worst <= TOL_SMOLLM2);
    assert_true(greedy_same >= P - 2);
    json_decref(texts);
    json_decref(tf_gguf);
    attn_tok_free(tok);
    attn_gpt_model_free(m);
    attn_st_close(REF);
    REF = NULL;
}

/* ---- the CLI on a GGUF file ------------------------------------------------------------------- */

/* attn chat / generate / forward / attention with --model FILE.gguf: chat and greedy generation
 * give the directory's answers on these prompts (the directory holds the same weights dequantized
 * to float32); forward writes the logits the library computes, bit for bit; attention captures
 * every layer; a bad file is one error line. */
static void test_cli(void **state) {
    (void)state;
    const char *dir = "models/SmolLM2-135M-Instruct";
    if (access(SMOLLM2, R_OK) != 0 || access("models/SmolLM2-135M-Instruct/config.json", R_OK))
        tu_skip("%s or %s missing (tools/get_smollm2.sh)", SMOLLM2, dir);
    if (access(tu_attn_bin(), X_OK)) tu_skip("no %s (make)", tu_attn_bin());
    static char a[8192], b[8192];
    char cmd[8192], q[4096];
    const char *chat = "[{\"role\": \"user\", \"content\": \"What is the capital of France?\"}]";
    const char *models[2] = {SMOLLM2, dir};
    char *outs[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "echo %s | '%s' --threads 1 chat --model '%s' --jsonl --greedy "
                 "--quiet", tu_shq(chat, q, sizeof q), tu_attn_bin(), models[i]);
        assert_int_equal(tu_sh_capture(cmd, 0, outs[i], sizeof a), 0);
    }
    printf("  chat on the GGUF file: %s", a);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "Paris"));
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "'%s' --threads 1 generate --model '%s' --prompt 'Once upon a "
                 "time' --max-tokens 16 --greedy --quiet --no-stream", tu_attn_bin(), models[i]);
        assert_int_equal(tu_sh_capture(cmd, 0, outs[i], sizeof a), 0);
    }
    printf("  generate on the GGUF file: %s\n", a);
    assert_string_equal(a, b);
    /* forward: the library's logits */
    const char *npy = tu_tmp("fwd.npy");
    snprintf(cmd, sizeof cmd, "'%s' forward --model '%s' --ids 1,2,3,4,5 --out '%s'",
             tu_attn_bin(), SMOLLM2, npy);
    assert_int_equal(tu_sh_capture(cmd, 1, a, sizeof a), 0);
    float *lg = NULL;
    int nd = 0;
    int64_t sh[ATTN_MAX_DIMS];
    OK(attn_npy_load_f32(npy, &lg, &nd, sh));
    assert_true(nd == 2 && sh[0] == 5 && sh[1] == 49152);
    attn_gpt_model *m;
    attn_gpt_state *st;
    OK(attn_gpt_load_gguf(SMOLLM2, &m));
    OK(attn_gpt_state_init(m, 1, 5, &st));
    float *want = attn_alloc((size_t)5 * 49152 * sizeof(float));
    const int32_t ids[5] = {1, 2, 3, 4, 5};
    OK(attn_gpt_forward(m, st, 1, 5, ids, want));
    assert_memory_equal(lg, want, (size_t)5 * 49152 * sizeof(float));
    attn_free(want);
    attn_free(lg);
    attn_gpt_state_free(st);
    attn_gpt_model_free(m);
    /* attention: every layer's maps */
    const char *json = tu_tmp("att.json");
    snprintf(cmd, sizeof cmd, "'%s' --threads 1 attention --model '%s' 'Knowledge is power.' "
             "--out '%s'", tu_attn_bin(), SMOLLM2, json);
    assert_int_equal(tu_sh_capture(cmd, 1, a, sizeof a), 0);
    printf("  attention on the GGUF file: %s", a);
    assert_non_null(strstr(a, "30 layers (9 heads)"));
    /* a bad file */
    const char *bad = tu_tmp("bad-cli.gguf");
    tu_write_all(bad, "GGUF\3\0\0\0", 8);
    snprintf(cmd, sizeof cmd, "'%s' generate --model '%s' --prompt hi", tu_attn_bin(), bad);
    const int rc = tu_sh_capture(cmd, 1, a, sizeof a);
    tu_expect_error_output(a, rc, 1, "bad-cli.gguf", cmd);
}

static void test_bad(void **state) {
    (void)state;
    const char *f32 = gguf_path("llama_gqa_f32"), *q8 = gguf_path("llama_gqa_q8_0");
    const char *gpt = gguf_path("gpt2_f32");
    if (access(f32, R_OK) || access(q8, R_OK) || access(gpt, R_OK))
        tu_skip("no %s (tools/ref_gguf_models.py)", f32);
    /* metadata */
    expect_bad(f32, (mutation){.drop = "llama.block_count"}, ATTN_STATUS_NOT_FOUND,
               "bad.gguf", "llama.block_count");
    expect_bad(f32, (mutation){.set = attn_gguf_kv_u32("llama.attention.head_count_kv", 3)},
               ATTN_STATUS_FORMAT, "head_count_kv 3 does not divide", NULL);
    expect_bad(f32, (mutation){.set = attn_gguf_kv_u32("llama.attention.head_count_kv", 9)},
               ATTN_STATUS_FORMAT, "llama.attention.head_count_kv = 9", NULL);
    expect_bad(f32, (mutation){.set = attn_gguf_kv_str("llama.block_count", "two")},
               ATTN_STATUS_FORMAT, "llama.block_count", NULL);
    expect_bad(f32, (mutation){.set = attn_gguf_kv_u32("llama.block_count", 3)},
               ATTN_STATUS_FORMAT, "'blk.2.attn_norm.weight' is missing", NULL);
    expect_bad(f32, (mutation){.set = attn_gguf_kv_u32("llama.block_count", 1)},
               ATTN_STATUS_FORMAT, "tensor 'blk.1.", "is not part of a llama model");
    expect_bad(f32, (mutation){.set = attn_gguf_kv_u32("llama.vocab_size", 50)},
               ATTN_STATUS_FORMAT, "token_embd.weight' has shape (97, 64), expected (50, 64)",
               NULL);
    expect_bad(f32, (mutation){.set = attn_gguf_kv_u32("llama.feed_forward_length", 64)},
               ATTN_STATUS_FORMAT, "has shape (96, 64), expected (64, 64)", NULL);
    expect_bad(f32, (mutation){.set = attn_gguf_kv_u32("llama.rope.dimension_count", 8)},
               ATTN_STATUS_UNSUPPORTED, "rope.dimension_count 8", NULL);
    expect_bad(f32, (mutation){.set = attn_gguf_kv_f32("llama.attention.layer_norm_rms_epsilon",
                                                       -1.0f)},
               ATTN_STATUS_FORMAT, "layer_norm_rms_epsilon", "> 0");
    expect_bad(f32, (mutation){.set = attn_gguf_kv_str("llama.rope.scaling.type", "yarn")},
               ATTN_STATUS_UNSUPPORTED, "\"yarn\"", NULL);
    expect_bad(f32, (mutation){.set = attn_gguf_kv_str("general.architecture", "falcon")},
               ATTN_STATUS_UNSUPPORTED, "\"falcon\"", NULL);
    expect_bad(f32, (mutation){.set = attn_gguf_kv_u32("llama.context_length", 1u << 30)},
               ATTN_STATUS_TOO_LARGE, "llama.context_length", NULL);
    /* tensors */
    expect_bad(f32, (mutation){.tdrop = "blk.1.ffn_up.weight"}, ATTN_STATUS_FORMAT,
               "'blk.1.ffn_up.weight' is missing", "(96, 64)");
    expect_bad(f32, (mutation){.tname = "blk.0.attn_k.weight", .ttype = ATTN_GGUF_DTYPE_F32,
                               .tne0 = 32},
               ATTN_STATUS_FORMAT, "'blk.0.attn_k.weight' has shape (32, 32), expected (32, 64)",
               NULL);
    expect_bad(q8, (mutation){.tname = "blk.0.ffn_gate.weight", .ttype = ATTN_GGUF_DTYPE_Q2_K,
                              .tne0 = 256},
               ATTN_STATUS_FORMAT, "ffn_gate.weight' has shape (96, 256)", NULL);
    expect_bad(f32, (mutation){.tname = "blk.0.ffn_gate.weight", .ttype = ATTN_GGUF_DTYPE_I32},
               ATTN_STATUS_UNSUPPORTED, "'blk.0.ffn_gate.weight' has type I32", NULL);
    expect_bad(f32, (mutation){.extra = "blk.0.attn_qkv.weight"}, ATTN_STATUS_FORMAT,
               "tensor 'blk.0.attn_qkv.weight' is not part", NULL);
    expect_bad(f32, (mutation){.tdrop = "token_embd.weight"}, ATTN_STATUS_FORMAT,
               "'token_embd.weight' is missing", NULL);
    expect_bad(gpt, (mutation){.tdrop = "blk.0.attn_qkv.bias"}, ATTN_STATUS_FORMAT,
               "'blk.0.attn_qkv.bias' is missing", "(192)");
    expect_bad(gpt, (mutation){.set = attn_gguf_kv_u32("gpt2.attention.head_count", 3)},
               ATTN_STATUS_FORMAT, "head_count 3 does not divide", NULL);
    /* not a GGUF file, and a directory is not one */
    const char *txt = tu_tmp("not.gguf");
    tu_write_all(txt, "hello", 5);
    attn_gpt_model *m;
    tu_expect_fail(attn_gpt_load_gguf(txt, &m), ATTN_STATUS_FORMAT, "not.gguf", NULL);
    tu_expect_fail(attn_gpt_load(txt, &m), ATTN_STATUS_FORMAT, "not.gguf", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_qwen2_gpt2),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_bert),
        cmocka_unit_test(test_smollm2_file),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_bad),
    };
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "ggufmodels")) return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rm_tree(tu_dir);
    return rc;
}

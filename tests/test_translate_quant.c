/* test_translate_quant.c — translation in reduced precision (attn_models.h:
 * attn_encdec_set_precision; attn translate --precision): int8 weights (CTranslate2's: one scale
 * per row, int8 activations; or GGUF's Q8_0, activations int8 or float32) and bfloat16 products,
 * against the same model in float32.
 *   - the API: names, bad arguments, bf16 refused where the CPU cannot run it, backward refused
 *     on int8 weights, F32 again after INT8 gives the float32 logits bit for bit, which maps are
 *     quantized (a width that is not a multiple of 4 for int8, of 32 for q8_0 stays float32);
 *   - random Hugging Face models made by tools/ref_seq2seq.py (Marian with swish, M2M100 with a
 *     feed-forward width of 48, whose down projection stays float32): teacher-forced logits within
 *     a bound of max|logit| of the float32 model's, and transformers-style generate (greedy and
 *     beam 4) outputs compared with float32's;
 *   - attn's demo translator (models/demo-en-zh, make demo; else tools/ref_tiny_translator.py's
 *     small one) on the first sentences of its test
 *     split: logits bound, outputs mostly identical to float32's, BLEU of the subset close (the
 *     whole split's BLEU: tools/translate_precision.sh, docs/translation.md);
 *   - the CLI: --precision int8 and q8_0 equal the library, bad values are one-line errors.
 * bf16 runs on the avx512 backend of a CPU with AVX512-BF16, else on the ref backend (plain loops:
 * the same arithmetic, slowly), on fewer sentences. */
#include "attn_eval.h"
#include "attn_infer.h"
#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_models.h"
#include "attn_quant.h"
#include "attn_tok.h"
#include "tu.h"

#include <string.h>
#include <unistd.h>

/* Logit error bounds relative to max|logit|: the demo model (measured int8 5.5e-3, bf16 2.7e-3),
 * the random models (Marian swish: int8 3.5e-2, bf16 1.8e-2; M2M100: 3.8e-3, 1.4e-3; attn's own
 * small one: int8 1.5e-2); int8 (f32 activations) against float32 on the dequantized weights
 * (measured ~1e-7: the same products). */
#define TOL_DEMO_INT8 1.5e-2
#define TOL_DEMO_BF16 1e-2
#define TOL_RAND_INT8 6e-2
#define TOL_RAND_BF16 4e-2
#define TOL_DEQUANT 2e-6

#define OK(x)                                                                                    \
    do {                                                                                         \
        attn_status ok_s_ = (x);                                                                 \
        if (ok_s_) fail_msg("%s: %s", #x, attn_last_error());                                    \
    } while (0)

/* The modes compared with float32. */
typedef struct {
    const char *name;
    attn_encdec_precision p;
    attn_quant_act act;
} mode;
/* (q8_0 with float32 activations is float32 on the dequantized weights: test_dequantized) */
static const mode MODES[] = {{"int8", ATTN_ENCDEC_PRECISION_INT8, ATTN_QUANT_ACT_F32},
                             {"q8_0", ATTN_ENCDEC_PRECISION_Q8_0, ATTN_QUANT_ACT_Q8_ALL},
                             {"bf16", ATTN_ENCDEC_PRECISION_BF16, ATTN_QUANT_ACT_F32}};
#define N_MODES (int)(sizeof MODES / sizeof MODES[0])

/* bf16 needs AVX512-BF16: elsewhere the ref backend runs it. Returns the backend to restore. */
static attn_backend enter_mode(const mode *md, bool *native) {
    const attn_backend prev = attn_get_backend();
    *native = true;
    if (md->p == ATTN_ENCDEC_PRECISION_BF16 && !attn_precision_available(ATTN_PRECISION_BF16)) {
        OK(attn_set_backend(ATTN_BACKEND_REF));
        *native = false;
    }
    return prev;
}

/* Logits (B, Tt, V) of m on (src, src_len, tgt), every target row of length Tt. */
static float *logits_of(const attn_encdec_model *m, int B, int Ts, int Tt, const int32_t *src,
                        const int32_t *src_len, const int32_t *tgt) {
    attn_encdec_state *st;
    OK(attn_encdec_state_init(m, B, Ts, Tt, &st));
    int32_t *tl = malloc((size_t)B * sizeof *tl);
    for (int b = 0; b < B; b++) tl[b] = Tt;
    float *lg = malloc((size_t)B * Tt * m->cfg.tgt_vocab * sizeof *lg);
    OK(attn_encdec_forward(m, st, B, Ts, Tt, src, src_len, tgt, tl, lg));
    attn_encdec_state_free(st);
    free(tl);
    return lg;
}

/* ---- the API ----------------------------------------------------------------------------------- */

static attn_encdec_config small_config(int V, int C, int F) {
    attn_encdec_config c = attn_encdec_default_config();
    c.src_vocab = c.tgt_vocab = V;
    c.d_model = C, c.n_head = 2, c.d_ff = F, c.n_enc_layers = 1, c.n_dec_layers = 2;
    c.max_len = 16;
    c.dropout = 0.0f;
    return c;
}

static void test_api(void **state) {
    (void)state;
    attn_encdec_precision p;
    const char *names[] = {"f32", "bf16", "int8", "q8_0"};
    for (int i = 0; i < 4; i++) {
        OK(attn_encdec_precision_parse(names[i], &p));
        assert_int_equal((int)p, i);
        assert_string_equal(attn_encdec_precision_name(p), names[i]);
    }
    OK(attn_encdec_precision_parse("float32", &p));
    assert_int_equal(p, ATTN_ENCDEC_PRECISION_F32);
    tu_expect_fail(attn_encdec_precision_parse("int4", &p), ATTN_STATUS_INVALID_ARGUMENT, "int4",
                   "int8");
    const attn_encdec_config c = small_config(40, 64, 96);
    attn_encdec_model *m;
    OK(attn_encdec_model_init(&c, 7, &m));
    tu_expect_fail(attn_encdec_set_precision(NULL, ATTN_ENCDEC_PRECISION_INT8, ATTN_QUANT_ACT_Q8),
                   ATTN_STATUS_INVALID_ARGUMENT, "NULL", NULL);
    tu_expect_fail(attn_encdec_set_precision(m, (attn_encdec_precision)9, ATTN_QUANT_ACT_Q8),
                   ATTN_STATUS_INVALID_ARGUMENT, "precision", NULL);
    tu_expect_fail(attn_encdec_set_precision(m, ATTN_ENCDEC_PRECISION_INT8, (attn_quant_act)5),
                   ATTN_STATUS_INVALID_ARGUMENT, "activation", NULL);
    if (!attn_precision_available(ATTN_PRECISION_BF16)) {
        tu_expect_fail(attn_encdec_set_precision(m, ATTN_ENCDEC_PRECISION_BF16, ATTN_QUANT_ACT_F32),
                       ATTN_STATUS_UNSUPPORTED, "AVX512-BF16", NULL);
        assert_int_equal(m->precision, ATTN_ENCDEC_PRECISION_F32);
    }
    /* a batch: logits in f32, int8 / q8_0, f32 again (bit for bit the first) */
    enum { B = 2, Ts = 5, Tt = 4 };
    const int32_t src[B * Ts] = {5, 9, 13, 8, 3, 7, 3, 0, 0, 0}, src_len[B] = {5, 2};
    const int32_t tgt[B * Tt] = {2, 11, 12, 30, 2, 6, 7, 8};
    float *f32 = logits_of(m, B, Ts, Tt, src, src_len, tgt);
    const size_t C = 64, F = 96, V = 40;
    const size_t weights = 1 * (4 * C * C + 2 * C * F) + 2 * (8 * C * C + 2 * C * F) + V * C;
    for (int q8 = 0; q8 < 2; q8++) {
        const attn_encdec_precision pr = q8 ? ATTN_ENCDEC_PRECISION_Q8_0 : ATTN_ENCDEC_PRECISION_INT8;
        OK(attn_encdec_set_precision(m, pr, ATTN_QUANT_ACT_Q8));
        assert_int_equal(m->precision, pr);
        /* every map quantized: encoder 4 + decoder 2 x 7 + the output projection. q8_0: Q8_0
         * rows (34 bytes per 32 weights) twice (rows and x8 layout), and the x8 layout's group
         * sums (4 bytes per 32 weights: attn_quant_pack_sums). int8: a byte per weight, rows
         * rounded up to 16 (the output projection's 40 to 48), and a scale and a sum (8 bytes)
         * per row: (5C + F) encoder rows, (9C + F) per decoder layer, 48 output rows. */
        const size_t rows16 = (5 * C + F) + 2 * (9 * C + F) + 48;
        assert_int_equal(attn_encdec_quant_bytes(m),
                         q8 ? 2 * weights / 32 * 34 + weights / 32 * 4
                            : weights + (48 - V) * C + 8 * rows16);
        assert_non_null(m->w.dec[1].self_attn.qkv.qpacked);
        assert_non_null(m->w.dec[1].cross_attn.kv.qpacked);
        assert_int_equal(m->w.dec[1].ffn.down.qpacked->type, q8 ? ATTN_QTYPE_Q8_0 : ATTN_QTYPE_I8);
        if (!q8) assert_null(m->w.dec[1].ffn.down.qw); /* no row layout */
        float *i8 = logits_of(m, B, Ts, Tt, src, src_len, tgt);
        tu_close(q8 ? "random model: q8_0 logits vs f32" : "random model: int8 logits vs f32", i8,
                 f32, (size_t)B * Tt * V, TOL_RAND_INT8, 0);
        free(i8);
        /* training needs float weights */
        attn_encdec_state *st;
        OK(attn_encdec_state_init(m, B, Ts, Tt, &st));
        int32_t tl[B] = {Tt, Tt};
        float loss;
        OK(attn_encdec_forward(m, st, B, Ts, Tt, src, src_len, tgt, tl, NULL));
        OK(attn_encdec_loss(m, st, tgt, 0.0f, &loss));
        tu_expect_fail(attn_encdec_backward(m, st), ATTN_STATUS_UNSUPPORTED, "int8", NULL);
        attn_encdec_state_free(st);
        OK(attn_encdec_set_precision(m, ATTN_ENCDEC_PRECISION_F32, ATTN_QUANT_ACT_F32));
        assert_null(m->quant);
        assert_int_equal(attn_encdec_quant_bytes(m), 0);
        float *again = logits_of(m, B, Ts, Tt, src, src_len, tgt);
        assert_memory_equal(again, f32, (size_t)B * Tt * V * sizeof(float));
        free(again);
    }
    free(f32);
    attn_encdec_model_free(m);
    /* widths that are not multiples of 32 stay float32 in q8_0: nothing but the FFN's down map
     * (in 64); int8 takes every width that is a multiple of 4 */
    const attn_encdec_config c2 = small_config(40, 24, 64);
    OK(attn_encdec_model_init(&c2, 8, &m));
    OK(attn_encdec_set_precision(m, ATTN_ENCDEC_PRECISION_Q8_0, ATTN_QUANT_ACT_Q8));
    assert_null(m->w.enc[0].self_attn.qkv.qw);
    assert_null(m->w.enc[0].ffn.up.qw);
    assert_non_null(m->w.enc[0].ffn.down.qw);
    assert_int_equal(attn_encdec_quant_bytes(m), 2 * 3 * (24 * 64) / 32 * 34 + 3 * (24 * 64) / 32 * 4);
    OK(attn_encdec_set_precision(m, ATTN_ENCDEC_PRECISION_INT8, ATTN_QUANT_ACT_Q8));
    assert_non_null(m->w.enc[0].self_attn.qkv.qpacked);
    assert_non_null(m->w.enc[0].ffn.up.qpacked);
    assert_non_null(m->w.dec[1].cross_attn.q.qpacked);
    attn_encdec_model_free(m);
}

/* q8_0 with float32 activations is float32 on the dequantized weights: m's every quantized matrix
 * (a linear map's, in-width a multiple of 32; not the embedding tables) replaced by its Q8_0
 * values, through the whole forward (products of > 8 rows) and the translator's decoding steps
 * (<= 8 rows: the integer path's float form). With int8 activations the steps are close. int8
 * (one scale per row) against float32 on its dequantized weights: only the activations' rounding
 * differs, the forward and the steps are close. */
static void dequantize_matrices(attn_encdec_model *m, attn_qtype qt) {
    static const char *const tables[] = {"emb", "src_emb", "tgt_emb", "enc_pos", "dec_pos"};
    for (int i = 0; i < m->n_tensors; i++) {
        const attn_encdec_tensor *t = &m->tensors[i];
        bool table = false;
        for (size_t k = 0; k < sizeof tables / sizeof tables[0]; k++)
            table = table || !strcmp(t->name, tables[k]);
        if (t->ndim != 2 || table || t->shape[1] % 32) continue;
        if (qt == ATTN_QTYPE_I8) {
            attn_quant_packed P;
            OK(attn_quant_pack_i8((int)t->shape[0], (int)t->shape[1], m->params + t->offset, &P));
            for (int r = 0; r < (int)t->shape[0]; r++)
                OK(attn_quant_packed_dequant_row(&P, r, m->params + t->offset + (size_t)r * t->shape[1]));
            attn_quant_packed_free(&P);
            continue;
        }
        size_t rb;
        OK(attn_quant_row_bytes(ATTN_QTYPE_Q8_0, t->shape[1], &rb));
        void *q = malloc(rb * (size_t)t->shape[0]);
        OK(attn_quant_quantize(ATTN_QTYPE_Q8_0, (int64_t)t->numel, m->params + t->offset, q));
        OK(attn_quant_dequantize(ATTN_QTYPE_Q8_0, (int64_t)t->numel, q, m->params + t->offset));
        free(q);
    }
}

/* Logits (N, V) of three decoding steps of the translator (greedy rows: N = B), one after the
 * other in out (3, B, V). */
static void step_logits(const attn_encdec_model *m, int B, int Ts, const int32_t *src,
                        const int32_t *src_len, const int32_t *tokens, float *out) {
    attn_translate_session *s;
    OK(attn_translate_session_init(m, B, 1, Ts, 8, &s));
    OK(attn_translate_begin(s, B, Ts, src, src_len, 1));
    const size_t V = (size_t)m->cfg.tgt_vocab;
    for (int t = 0; t < 3; t++) {
        OK(attn_translate_step(s, tokens + (size_t)t * B));
        memcpy(out + (size_t)t * B * V, attn_translate_logits(s), (size_t)B * V * sizeof(float));
    }
    attn_translate_session_free(s);
}

static void test_dequantized(void **state) {
    (void)state;
    for (int run = 0; run < 4; run++) {
        const int pre = run % 2;
        const bool i8 = run >= 2;
        attn_encdec_config c = small_config(48, 64, 96);
        c.share_embeddings = false, c.tie_output = false, c.pre_ln = pre;
        c.activation = pre ? ATTN_ENCDEC_GELU : ATTN_ENCDEC_RELU;
        attn_encdec_model *m, *d;
        OK(attn_encdec_model_init(&c, 11, &m));
        OK(attn_encdec_model_init(&c, 11, &d));
        for (size_t i = 0; i < m->num_params; i++) /* biases and norms away from 0 / 1 too */
            m->params[i] += 0.05f * (float)((i * 2654435761u) % 1000) / 1000.0f,
                d->params[i] = m->params[i];
        dequantize_matrices(d, i8 ? ATTN_QTYPE_I8 : ATTN_QTYPE_Q8_0);
        enum { B = 3, Ts = 6, Tt = 5 };
        const int32_t src[B * Ts] = {5, 9, 13, 8, 17, 3, 7, 30, 3, 0, 0, 0, 44, 3, 0, 0, 0, 0};
        const int32_t src_len[B] = {6, 3, 2}, tgt[B * Tt] = {2, 11, 12, 30, 5, 2, 6, 7, 8, 9,
                                                             2, 40, 41, 42, 43};
        const size_t V = 48, nl = (size_t)B * Tt * V, ns = 3 * (size_t)B * V;
        float *want = logits_of(d, B, Ts, Tt, src, src_len, tgt);
        float *sw = malloc(ns * sizeof *sw), *sg = malloc(ns * sizeof *sg);
        step_logits(d, B, Ts, src, src_len, tgt, sw); /* the step tokens: any ids */
        const char *ln = pre ? "pre" : "post";
        char what[128];
        if (i8) {
            OK(attn_encdec_set_precision(m, ATTN_ENCDEC_PRECISION_INT8, ATTN_QUANT_ACT_F32));
            float *got = logits_of(m, B, Ts, Tt, src, src_len, tgt);
            snprintf(what, sizeof what, "%s-LN: int8 forward ~ f32 on its values", ln);
            tu_close(what, got, want, nl, 2e-2, 0);
            step_logits(m, B, Ts, src, src_len, tgt, sg);
            snprintf(what, sizeof what, "%s-LN: int8 decoding steps ~ the same", ln);
            tu_close(what, sg, sw, ns, 2e-2, 0);
            free(got);
        } else {
            OK(attn_encdec_set_precision(m, ATTN_ENCDEC_PRECISION_Q8_0, ATTN_QUANT_ACT_F32));
            float *got = logits_of(m, B, Ts, Tt, src, src_len, tgt);
            snprintf(what, sizeof what, "%s-LN: q8_0 forward = f32 on Q8_0 values", ln);
            tu_close(what, got, want, nl, TOL_DEQUANT, 0);
            step_logits(m, B, Ts, src, src_len, tgt, sg);
            snprintf(what, sizeof what, "%s-LN: q8_0 decoding steps = the same", ln);
            tu_close(what, sg, sw, ns, TOL_DEQUANT, 0);
            OK(attn_encdec_set_precision(m, ATTN_ENCDEC_PRECISION_Q8_0, ATTN_QUANT_ACT_Q8));
            step_logits(m, B, Ts, src, src_len, tgt, sg);
            snprintf(what, sizeof what, "%s-LN: ... with int8 activations", ln);
            tu_close(what, sg, sw, ns, 2e-2, 0);
            free(got);
        }
        free(want), free(sw), free(sg);
        attn_encdec_model_free(m);
        attn_encdec_model_free(d);
    }
}

/* ---- random Hugging Face models (tools/ref_seq2seq.py) ------------------------------------------ */

static attn_st_file *REF; /* seq2seq.safetensors, opened on first use */

/* Whether tools/ref_seq2seq.py's references are there (REF then open). */
static bool ref_open(void) {
    const char *path = tu_ref_path("seq2seq.safetensors");
    if (!REF && access(path, R_OK) == 0) OK(attn_st_open(path, &REF));
    return REF != NULL;
}

static int32_t *ref_i32(const char *key, const attn_st_tensor **t) {
    int32_t *d = NULL;
    const attn_st_tensor *tt;
    if (attn_st_load_i32(REF, key, &d, &tt)) fail_msg("%s", attn_last_error());
    if (t) *t = tt;
    return d;
}

/* Generate on every reference source and on n_rand random ones (B rows at once): ids (B, max_out),
 * len (B). */
typedef struct {
    int B, Ts;
    int32_t *src, *src_len;
} batch;

static batch hf_batch(const attn_encdec_model *m, const char *name, int n_rand) {
    char key[128];
    const attn_st_tensor *t;
    snprintf(key, sizeof key, "%s.src", name);
    int32_t *rs = ref_i32(key, &t);
    snprintf(key, sizeof key, "%s.src_len", name);
    int32_t *rl = ref_i32(key, NULL);
    const int Br = (int)t->shape[0], Ts = (int)t->shape[1];
    batch b = {Br + n_rand, Ts, malloc((size_t)(Br + n_rand) * Ts * sizeof(int32_t)),
               malloc((size_t)(Br + n_rand) * sizeof(int32_t))};
    memcpy(b.src, rs, (size_t)Br * Ts * sizeof(int32_t));
    memcpy(b.src_len, rl, (size_t)Br * sizeof(int32_t));
    /* random sources like the reference's: ids 3 .. V − 2 (Marian: eos 0, pad V − 1; M2M100:
     * 0..2 special), the model's eos last, padded */
    attn_hf_generate_options o = attn_hf_generate_default_options();
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/%s", tu_ref_path("seq2seq"), name);
    OK(attn_hf_generate_config_load(dir, &o));
    tu_rng r = {0x5eed + (uint64_t)n_rand};
    for (int i = 0; i < n_rand; i++) {
        const int len = 2 + (int)(tu_uniform(&r, 0, 1) * (Ts - 1));
        int32_t *row = b.src + (size_t)(Br + i) * Ts;
        for (int k = 0; k < Ts; k++) {
            int32_t id = 3 + (int32_t)(tu_uniform(&r, 0, 1) * (m->cfg.src_vocab - 5));
            row[k] = k < len - 1 ? id : k == len - 1 ? o.eos_token_id : m->cfg.pad_id;
        }
        b.src_len[Br + i] = len;
    }
    free(rs), free(rl);
    return b;
}

/* The generate options of the model's directory with num_beams K and max_new_tokens 12. */
static attn_hf_generate_options hf_opts(const char *name, int K) {
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/%s", tu_ref_path("seq2seq"), name);
    attn_hf_generate_options o;
    OK(attn_hf_generate_config_load(dir, &o));
    o.num_beams = K, o.max_new_tokens = 12;
    return o;
}

/* Generate in batches of 2 sentences: at most 8 rows per decoding step (beam 4), the products
 * int8 runs on its integer path. */
static void hf_generate(const attn_encdec_model *m, const batch *b,
                        const attn_hf_generate_options *o, int32_t *ids, int32_t *len,
                        int max_out) {
    attn_translate_session *s;
    OK(attn_translate_session_init(m, 2, o->num_beams, b->Ts, m->cfg.max_len, &s));
    for (int i = 0; i < b->B; i += 2) {
        const int n = b->B - i < 2 ? b->B - i : 2;
        OK(attn_hf_generate(s, o, n, b->Ts, b->src + (size_t)i * b->Ts, b->src_len + i, max_out,
                            ids + (size_t)i * max_out, len + i, NULL));
    }
    attn_translate_session_free(s);
}

static int identical(int B, const int32_t *a, const int32_t *al, const int32_t *b,
                     const int32_t *bl, int max_out) {
    int same = 0;
    for (int i = 0; i < B; i++)
        same += al[i] == bl[i] &&
                !memcmp(a + (size_t)i * max_out, b + (size_t)i * max_out, (size_t)al[i] * 4);
    return same;
}

/* One model: teacher-forced logits of every mode within its bound of float32's; generate (greedy
 * and beam 4) on the reference sources and random ones, at least min_same of them identical. */
static void check_hf_model(const char *name, int n_rand, double min_same) {
    char dir[4300], key[128], what[200];
    snprintf(dir, sizeof dir, "%s/%s", tu_ref_path("seq2seq"), name);
    attn_encdec_model *m;
    OK(attn_encdec_load_dir(dir, &m));
    const attn_st_tensor *t;
    snprintf(key, sizeof key, "%s.tgt", name);
    int32_t *tgt = ref_i32(key, &t);
    const int Tt = (int)t->shape[1], V = m->cfg.tgt_vocab;
    batch b = hf_batch(m, name, n_rand);
    const int Br = b.B - n_rand, max_out = 14;
    float *f32 = logits_of(m, Br, b.Ts, Tt, b.src, b.src_len, tgt);
    int32_t *ref_ids[2], *ref_len[2], *ids = malloc((size_t)b.B * max_out * 4),
                                      *len = malloc((size_t)b.B * 4);
    for (int k = 0; k < 2; k++) {
        ref_ids[k] = malloc((size_t)b.B * max_out * 4), ref_len[k] = malloc((size_t)b.B * 4);
        const attn_hf_generate_options o = hf_opts(name, k ? 4 : 1);
        hf_generate(m, &b, &o, ref_ids[k], ref_len[k], max_out);
    }
    for (int i = 0; i < N_MODES; i++) {
        bool native;
        const attn_backend prev = enter_mode(&MODES[i], &native);
        OK(attn_encdec_set_precision(m, MODES[i].p, MODES[i].act));
        float *lg = logits_of(m, Br, b.Ts, Tt, b.src, b.src_len, tgt);
        snprintf(what, sizeof what, "%s %s%s: logits vs f32", name, MODES[i].name,
                 native ? "" : " (ref)");
        tu_close(what, lg, f32, (size_t)Br * Tt * V,
                 MODES[i].p == ATTN_ENCDEC_PRECISION_BF16 ? TOL_RAND_BF16 : TOL_RAND_INT8, 0);
        for (int k = 0; k < 2; k++) {
            const attn_hf_generate_options o = hf_opts(name, k ? 4 : 1);
            hf_generate(m, &b, &o, ids, len, max_out);
            const int same = identical(b.B, ids, len, ref_ids[k], ref_len[k], max_out);
            const bool ok = same >= min_same * b.B;
            printf("  %s %s%s %s: %d/%d outputs identical to f32%s\n", name, MODES[i].name,
                   native ? "" : " (ref)", k ? "beam 4" : "greedy", same, b.B, ok ? "" : " FAIL");
            tu_failures += !ok;
        }
        free(lg);
        OK(attn_encdec_set_precision(m, ATTN_ENCDEC_PRECISION_F32, ATTN_QUANT_ACT_F32));
        OK(attn_set_backend(prev));
    }
    for (int k = 0; k < 2; k++) free(ref_ids[k]), free(ref_len[k]);
    free(ids), free(len), free(f32), free(tgt), free(b.src), free(b.src_len);
    attn_encdec_model_free(m);
}

static void test_hf_models(void **state) {
    (void)state;
    if (!ref_open()) tu_skip("no seq2seq.safetensors (tools/ref_seq2seq.py, run by tests/run.sh)");
    /* under valgrind the 4 reference sentences alone */
    const int n_rand = tu_valgrind() ? 0 : 28;
    /* random weights: near-ties are common (measured 78-100% identical); the logit bounds above
     * are the sharper check */
    const double min_same = tu_valgrind() ? 0.5 : 0.6;
    check_hf_model("marian_swish_shared", n_rand, min_same);
    check_hf_model("m2m100_relu", n_rand, min_same);
}

/* ---- attn's demo translator -------------------------------------------------------------------- */

/* The demo translator: models/demo-en-zh when `make demo` trained it, else the small one
 * tools/ref_tiny_translator.py trains for the tests (a clean checkout, CI): the same checks, on a
 * weaker model (its outputs are short; BLEU near 0 on both sides). */
static const char *demo_dir(void) {
    static char dir[4096];
    if (!dir[0])
        snprintf(dir, sizeof dir, "%s",
                 access("models/demo-en-zh/config.json", R_OK) == 0 ? "models/demo-en-zh"
                                                                    : tu_ref_path("tiny-en-zh"));
    return dir;
}
#define DEMO demo_dir()

/* The first n lines of path (n = 0: as many as there are, *n set). */
static char **read_lines(const char *path, size_t *n) {
    size_t len;
    char *all = tu_read_all(path, &len);
    if (!all) return NULL;
    char **lines = calloc(*n ? *n : len + 1, sizeof *lines);
    size_t k = 0;
    for (char *save = NULL, *l = strtok_r(all, "\n", &save); l && (!*n || k < *n);
         l = strtok_r(NULL, "\n", &save))
        lines[k++] = strdup(l);
    free(all);
    *n = k;
    return lines;
}

static void free_lines(char **l, size_t n) {
    for (size_t i = 0; l && i < n; i++) free(l[i]);
    free(l);
}

static void free_texts(char **t, size_t n) {
    for (size_t i = 0; t && i < n; i++) attn_free(t[i]);
    free(t);
}

/* Translations of texts (n) by m at beam K: attn_translate_texts in batches of 16. */
static char **translate(const attn_encdec_model *m, const attn_tok *tok, char **texts, size_t n,
                        int K) {
    attn_translate_session *s;
    OK(attn_translate_session_init(m, 16, K, m->cfg.max_len, m->cfg.max_len, &s));
    attn_translate_options o = attn_translate_default_options();
    o.beam_size = K;
    o.bos_id = attn_tok_special_id(tok, ATTN_TOK_BOS), o.eos_id = attn_tok_special_id(tok, ATTN_TOK_EOS);
    char **out = calloc(n, sizeof *out);
    OK(attn_translate_texts(s, &o, tok, (const char *const *)texts, n, out, NULL, NULL));
    attn_translate_session_free(s);
    return out;
}

static double bleu(char **hyps, size_t n, char ***refs, size_t n_refs) {
    attn_bleu_options opt;
    memset(&opt, 0, sizeof opt);
    attn_bleu_result r;
    OK(attn_bleu_corpus(n, (const char *const *)hyps, n_refs, (const char *const *const *)refs,
                        &opt, &r));
    return r.score;
}

/* Teacher-forced: the decoder inputs <s> + each f32 output (ids), cut to Tt. */
static void forced_batch(const attn_tok *tok, char **src_texts, char **outs, int B, int Ts, int Tt,
                         int32_t *src, int32_t *src_len, int32_t *tgt) {
    const int32_t bos = attn_tok_special_id(tok, ATTN_TOK_BOS);
    const int32_t eos = attn_tok_special_id(tok, ATTN_TOK_EOS);
    for (int b = 0; b < B; b++) {
        int32_t *ids;
        size_t n;
        OK(attn_tok_encode_alloc(tok, src_texts[b], strlen(src_texts[b]), &ids, &n));
        if (n > (size_t)Ts - 1) n = (size_t)Ts - 1;
        for (int t = 0; t < Ts; t++)
            src[b * Ts + t] = t < (int)n ? ids[t] : t == (int)n ? eos : 0;
        src_len[b] = (int32_t)n + 1;
        attn_free(ids);
        OK(attn_tok_encode_alloc(tok, outs[b], strlen(outs[b]), &ids, &n));
        for (int t = 0; t < Tt; t++)
            tgt[b * Tt + t] = t == 0 ? bos : t - 1 < (int)n ? ids[t - 1] : t - 1 == (int)n ? eos : 0;
        attn_free(ids);
    }
}

/* The demo model and its tokenizer, or a skip. */
static void load_demo(attn_encdec_model **m, attn_tok **tok) {
    if (attn_encdec_load_dir(DEMO, m) != ATTN_STATUS_OK)
        tu_skip("%s missing (tools/ref_tiny_translator.py, run by tests/run.sh; or make demo): %s",
                DEMO, attn_last_error());
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", DEMO);
    OK(attn_tok_load(path, tok));
    printf("  translator: %s\n", DEMO);
}

static void test_demo(void **state) {
    (void)state;
    attn_encdec_model *m;
    attn_tok *tok;
    load_demo(&m, &tok);
    /* Under valgrind: 2 sentences, greedy, int8 alone (the activation modes, bf16 and beam search
     * are the same code here; their arithmetic is test_quant's, test_gemm_bf16's and
     * test_hf_models' above). */
    const bool vg = tu_valgrind() != 0;
    const int nk = vg ? 1 : 2; /* greedy, beam 4 */
    size_t n = vg ? 2 : 160;
    char srcp[4200];
    snprintf(srcp, sizeof srcp, "%s/test.src", DEMO);
    char **src = read_lines(srcp, &n);
    assert_non_null(src);
    char **refs[5];
    for (int r = 0; r < 5; r++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/test.ref.%d", DEMO, r);
        size_t nr = n;
        refs[r] = read_lines(path, &nr);
        assert_int_equal(nr, n);
    }
    char **f32[2] = {translate(m, tok, src, n, 1), vg ? NULL : translate(m, tok, src, n, 4)};
    /* teacher-forced logits on the f32 outputs (beam 4's) of the first sentences */
    const int B = vg ? 1 : 16, Ts = 24, Tt = vg ? 10 : 24, V = m->cfg.tgt_vocab;
    int32_t *fs = malloc((size_t)B * Ts * 4), *fl = malloc((size_t)B * 4),
            *ft = malloc((size_t)B * Tt * 4);
    forced_batch(tok, src, f32[nk - 1], B, Ts, Tt, fs, fl, ft);
    float *lf = logits_of(m, B, Ts, Tt, fs, fl, ft);
    double b32[2] = {bleu(f32[0], n, refs, 5), vg ? 0 : bleu(f32[1], n, refs, 5)};
    printf("  demo model, first %zu test sentences: f32 BLEU greedy %.2f, beam 4 %.2f\n", n, b32[0],
           b32[1]);
    for (int i = 0; i < (vg ? 1 : N_MODES); i++) {
        bool native;
        const attn_backend prev = enter_mode(&MODES[i], &native);
        /* bf16 on the ref backend (plain loops, one thread) is ~100x slower: fewer sentences */
        const size_t nm = native ? n : 4;
        const int Bm = native ? B : 4;
        OK(attn_encdec_set_precision(m, MODES[i].p, MODES[i].act));
        char what[128];
        snprintf(what, sizeof what, "demo %s%s: logits vs f32", MODES[i].name,
                 native ? "" : " (ref backend)");
        float *lg = logits_of(m, Bm, Ts, Tt, fs, fl, ft);
        tu_close(what, lg, lf, (size_t)Bm * Tt * V,
                 MODES[i].p == ATTN_ENCDEC_PRECISION_BF16 ? TOL_DEMO_BF16 : TOL_DEMO_INT8, 0);
        free(lg);
        for (int k = 0; k < nk; k++) {
            char **out = translate(m, tok, src, nm, k ? 4 : 1);
            int same = 0;
            for (size_t j = 0; j < nm; j++) same += !strcmp(out[j], f32[k][j]);
            /* measured: int8 ~90% identical on the whole split (912/1000 at beam 4) */
            const bool ok = same >= 0.75 * (double)nm;
            printf("  demo %-28s %s: %d/%zu outputs identical to f32%s", MODES[i].name,
                   k ? "beam 4" : "greedy", same, nm, ok ? "" : " FAIL");
            tu_failures += !ok;
            if (nm == n && !vg) {
                /* BLEU of the subset: within 1 of f32 (the whole split: within 0.3); not on
                 * valgrind's few sentences, where one word moves BLEU by several points */
                const double b = bleu(out, n, refs, 5);
                const bool bok = fabs(b - b32[k]) <= 1.0;
                printf(", BLEU %.2f (f32 %.2f)%s", b, b32[k], bok ? "" : " FAIL");
                tu_failures += !bok;
            }
            printf("\n");
            free_texts(out, nm);
        }
        OK(attn_encdec_set_precision(m, ATTN_ENCDEC_PRECISION_F32, ATTN_QUANT_ACT_F32));
        OK(attn_set_backend(prev));
    }
    free(lf), free(fs), free(fl), free(ft);
    free_texts(f32[0], n), free_texts(f32[1], vg ? 0 : n);
    for (int r = 0; r < 5; r++) free_lines(refs[r], n);
    free_lines(src, n);
    attn_tok_free(tok);
    attn_encdec_model_free(m);
}

/* ---- the CLI ------------------------------------------------------------------------------------ */

static void test_cli(void **state) {
    (void)state;
    attn_encdec_model *m;
    attn_tok *tok;
    load_demo(&m, &tok);
    char tmp[512], in[700], out[700], err[700], args[5000];
    assert_int_equal(tu_mkdtemp(tmp, sizeof tmp, "translate-quant"), 0);
    snprintf(in, sizeof in, "%s/in.txt", tmp);
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    snprintf(err, sizeof err, "%s/err.txt", tmp);
    char *texts[] = {"Knowledge is power.", "I like tea.", "Where is the station?"};
    tu_write_all(in, "Knowledge is power.\nI like tea.\nWhere is the station?\n", 54);
    /* (greedy under valgrind: the library's side is traced, the CLI's not) */
    const int K = tu_valgrind() ? 1 : 4;
    size_t len0;
    char *got;
    for (int q8 = 0; q8 < 2; q8++) {
        OK(attn_encdec_set_precision(m, q8 ? ATTN_ENCDEC_PRECISION_Q8_0 : ATTN_ENCDEC_PRECISION_INT8,
                                     ATTN_QUANT_ACT_Q8_ALL));
        char **want = translate(m, tok, texts, 3, K);
        snprintf(args, sizeof args, "translate --model '%s' --precision %s --beam %d", DEMO,
                 q8 ? "q8_0 --int8-activations int8" : "int8", K);
        assert_int_equal(tu_run_cli_files(args, in, out, err), 0);
        got = tu_read_all(out, &len0);
        char expect[2000];
        snprintf(expect, sizeof expect, "%s\n%s\n%s\n", want[0], want[1], want[2]);
        printf("  attn translate --precision %s:\n%s", q8 ? "q8_0" : "int8", got);
        assert_string_equal(got, expect);
        free(got);
        free_texts(want, 3);
    }
    /* the activation modes are q8_0's */
    snprintf(args, sizeof args, "translate --model '%s' --precision int8 --int8-activations f32",
             DEMO);
    assert_int_equal(tu_run_cli_files(args, in, out, err), 2);
    tu_expect_error_file(err, "q8_0");
    snprintf(args, sizeof args, "translate --model '%s' --precision int4", DEMO);
    assert_int_equal(tu_run_cli_files(args, in, out, err), 2);
    tu_expect_error_file(err, "--precision");
    snprintf(args, sizeof args, "translate --model '%s' --precision q8_0 --int8-activations int16",
             DEMO);
    assert_int_equal(tu_run_cli_files(args, in, out, err), 2);
    tu_expect_error_file(err, "--int8-activations");
    if (!attn_precision_available(ATTN_PRECISION_BF16)) {
        snprintf(args, sizeof args, "translate --model '%s' --precision bf16", DEMO);
        assert_int_equal(tu_run_cli_files(args, in, out, err), 1);
        tu_expect_error_file(err, "AVX512-BF16");
    }
    /* a Hugging Face directory: --ids --precision int8 equals attn_hf_generate on the int8 model */
    if (ref_open()) {
        const char *name = "marian_swish_shared";
        char dir[4300], line[64];
        snprintf(dir, sizeof dir, "%s/%s", tu_ref_path("seq2seq"), name);
        attn_encdec_model *hm;
        OK(attn_encdec_load_dir(dir, &hm));
        OK(attn_encdec_set_precision(hm, ATTN_ENCDEC_PRECISION_INT8, ATTN_QUANT_ACT_Q8));
        batch b = hf_batch(hm, name, 0);
        const attn_hf_generate_options o = hf_opts(name, 1);
        const int max_out = 14;
        int32_t *ids = malloc((size_t)b.B * max_out * 4), *len = malloc((size_t)b.B * 4);
        attn_translate_session *s;
        OK(attn_translate_session_init(hm, b.B, 1, b.Ts, hm->cfg.max_len, &s));
        OK(attn_hf_generate(s, &o, b.B, b.Ts, b.src, b.src_len, max_out, ids, len, NULL));
        attn_translate_session_free(s);
        char text[4000] = "", want_ids[4000] = "";
        for (int i = 0; i < b.B; i++) {
            for (int t = 0; t < b.src_len[i]; t++)
                snprintf(line, sizeof line, t ? " %d" : "%d", (int)b.src[i * b.Ts + t]),
                    strcat(text, line);
            strcat(text, "\n");
            int n = len[i];
            if (n > 0 && ids[(size_t)i * max_out + n - 1] == o.eos_token_id) n--;
            for (int t = 0; t < n; t++)
                snprintf(line, sizeof line, t ? " %d" : "%d", (int)ids[(size_t)i * max_out + t]),
                    strcat(want_ids, line);
            strcat(want_ids, "\n");
        }
        tu_write_all(in, text, strlen(text));
        snprintf(args, sizeof args,
                 "translate --model '%s' --ids --beam 1 --max-tokens 12 --precision int8", dir);
        assert_int_equal(tu_run_cli_files(args, in, out, err), 0);
        got = tu_read_all(out, &len0);
        printf("  attn translate --model %s --ids --precision int8:\n%s", name, got);
        assert_string_equal(got, want_ids);
        free(got), free(ids), free(len), free(b.src), free(b.src_len);
        attn_encdec_model_free(hm);
    }
    tu_rm_tree(tmp);
    attn_tok_free(tok);
    attn_encdec_model_free(m);
}

int main(void) {
    /* One thread: tiny products gain nothing from a team, and the CLI test runs --threads 1. */
    attn_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_dequantized),
        cmocka_unit_test(test_hf_models),
        cmocka_unit_test(test_demo),
        cmocka_unit_test(test_cli),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    attn_st_close(REF);
    return rc;
}

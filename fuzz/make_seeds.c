/* make_seeds.c — writes the seed corpus fuzz/corpus/<target>/ with the library's own writers
 * (so the seeds are exactly what attn produces), plus hand-made edge cases. Deterministic: running
 * it again rewrites the same bytes. `make fuzz-seeds` builds and runs it; the output is committed.
 *
 *   build/fuzz/make-seeds fuzz/corpus */
#include "fuzz.h"

#include <math.h>

#include "attn_bert.h"
#include "attn_gguf.h"
#include "attn_quant.h"
#include "attn_gpt.h"
#include "attn_io.h"
#include "attn_models.h"
#include "attn_tok.h"
#include "attn_train.h"

static const char *root;

static void die(const char *what) {
    fprintf(stderr, "make-seeds: %s: %s\n", what, attn_last_error());
    exit(1);
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "make-seeds: cannot read %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    if (!b || fread(b, 1, (size_t)sz, f) != (size_t)sz) exit(1);
    fclose(f);
    b[sz] = 0;
    *n = (size_t)sz;
    return b;
}

/* fuzz/corpus/target/name = the concatenation of up to 4 pieces (NULL ends; len -1 = strlen) */
static void seed(const char *target, const char *name, const void *p1, long n1, const void *p2,
                 long n2, const void *p3, long n3, const void *p4, long n4) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, target);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "make-seeds: cannot write %s\n", path);
        exit(1);
    }
    const void *p[4] = {p1, p2, p3, p4};
    long n[4] = {n1, n2, n3, n4};
    for (int i = 0; i < 4 && p[i]; i++)
        fwrite(p[i], 1, n[i] < 0 ? strlen(p[i]) : (size_t)n[i], f);
    fclose(f);
}
#define SEED1(t, nm, p, n) seed(t, nm, p, n, NULL, 0, NULL, 0, NULL, 0)

static const char *tmp(const char *name) {
    static char b[4][600];
    static int k;
    char *p = b[k++ & 3];
    snprintf(p, sizeof b[0], "%s/%s", fuzz_scratch(), name);
    return p;
}

static void file_seed(const char *target, const char *name, const char *from) {
    size_t n;
    char *b = slurp(from, &n);
    SEED1(target, name, b, (long)n);
    free(b);
}

/* ---- safetensors / npy ---- */

static void safetensors_seeds(void) {
    float a[6] = {1, -2, 3.5f, 0, 1e-40f, 6};
    uint16_t h[4] = {0x3c00, 0x7c00, 0x0001, 0xfc00};
    int64_t q[3] = {1, -1, 1LL << 40};
    int32_t i32[2] = {7, -7};
    int16_t i16[2] = {300, -300};
    int8_t i8[2] = {-128, 127};
    uint8_t u8[2] = {0, 255}, bl[2] = {1, 0};
    double d[2] = {1e300, -0.5};
    attn_st_entry e[] = {{"a", ATTN_DTYPE_F32, 2, {2, 3}, a},   {"h", ATTN_DTYPE_BF16, 1, {4}, h},
                         {"f16", ATTN_DTYPE_F16, 2, {2, 2}, h}, {"q", ATTN_DTYPE_I64, 1, {3}, q},
                         {"i32", ATTN_DTYPE_I32, 1, {2}, i32},  {"i16", ATTN_DTYPE_I16, 1, {2}, i16},
                         {"i8", ATTN_DTYPE_I8, 1, {2}, i8},     {"u8", ATTN_DTYPE_U8, 1, {2}, u8},
                         {"b", ATTN_DTYPE_BOOL, 1, {2}, bl},    {"d", ATTN_DTYPE_F64, 1, {2}, d},
                         {"scalar", ATTN_DTYPE_F32, 0, {0}, a}, {"empty", ATTN_DTYPE_F16, 2, {0, 5}, h}};
    const char *meta[] = {"format", "pt", "tokens", "[\"a\", \"b\"]", NULL};
    if (attn_st_save(tmp("all.safetensors"), e, 12, meta)) die("st_save");
    file_seed("safetensors", "all-dtypes", tmp("all.safetensors"));
    if (attn_st_save(tmp("one.safetensors"), e, 1, NULL)) die("st_save");
    file_seed("safetensors", "one-f32", tmp("one.safetensors"));
    if (attn_st_save(tmp("none.safetensors"), e, 0, meta)) die("st_save");
    file_seed("safetensors", "metadata-only", tmp("none.safetensors"));
    /* hand-made: padded header, offsets out of order, a zero-size tensor at the end */
    static const char hdr[] = "{\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                              "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                              "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,8]}}    ";
    unsigned char len[8] = {0};
    size_t hl = sizeof hdr - 1;
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(hl >> (8 * i));
    seed("safetensors", "hand-padded", len, 8, hdr, (long)hl, "\0\0\x80?\0\0\0@", 8, NULL, 0);
    /* explain's input: x, w_q, w_k, w_v and a tokens list */
    float x[3 * 4], w[4 * 2];
    for (int i = 0; i < 12; i++) x[i] = (float)(i % 5) - 2;
    for (int i = 0; i < 8; i++) w[i] = 0.25f * (float)(i % 3);
    attn_st_entry ex[] = {{"x", ATTN_DTYPE_F32, 2, {3, 4}, x},
                          {"w_q", ATTN_DTYPE_F32, 2, {4, 2}, w},
                          {"w_k", ATTN_DTYPE_F32, 2, {4, 2}, w},
                          {"w_v", ATTN_DTYPE_F32, 2, {4, 2}, w}};
    const char *em[] = {"tokens", "[\"Knowledge\", \"is\", \"power\"]", NULL};
    if (attn_st_save(tmp("explain.safetensors"), ex, 4, em)) die("st_save");
    file_seed("safetensors", "explain", tmp("explain.safetensors"));

    int64_t s23[2] = {2, 3}, s5[1] = {5};
    if (attn_npy_save_f32(tmp("a.npy"), a, 2, s23)) die("npy_save");
    file_seed("npy", "f4-2x3", tmp("a.npy"));
    if (attn_npy_save_f32(tmp("s.npy"), a, 0, NULL)) die("npy_save");
    file_seed("npy", "f4-scalar", tmp("s.npy"));
    float five[5] = {1, 2, 3, 4, 5};
    if (attn_npy_save_f32(tmp("v.npy"), five, 1, s5)) die("npy_save");
    file_seed("npy", "f4-vector", tmp("v.npy"));
    /* hand-made: version 2.0 '<f8', version 3.0, fortran order, big-endian */
    static const char h2[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
    char pad[128];
    size_t l2 = sizeof h2 - 1, total = 12 + l2 + 1;
    size_t np = (64 - total % 64) % 64;
    memset(pad, ' ', np);
    pad[np] = '\n';
    unsigned char pre2[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0,
                              (unsigned char)(l2 + np + 1), 0, 0, 0};
    seed("npy", "f8-v2", pre2, 12, h2, (long)l2, pad, (long)np + 1, d, 16);
    pre2[6] = 3;
    seed("npy", "f8-v3", pre2, 12, h2, (long)l2, pad, (long)np + 1, d, 16);
    static const char hf[] = "{'descr': '>f4', 'fortran_order': True, 'shape': (1, 2), }";
    size_t lf = sizeof hf - 1, tf = 10 + lf + 1, npf = (64 - tf % 64) % 64;
    memset(pad, ' ', npf);
    pad[npf] = '\n';
    unsigned char pre1[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(lf + npf + 1), 0};
    seed("npy", "be-fortran", pre1, 10, hf, (long)lf, pad, (long)npf + 1, a, 8);
}

/* ---- configs and model directories ---- */

static attn_encdec_config tiny(int variant) {
    attn_encdec_config c = attn_encdec_default_config();
    c.src_vocab = c.tgt_vocab = 12;
    c.d_model = 4, c.n_head = 2, c.d_ff = 8;
    c.n_enc_layers = c.n_dec_layers = 1;
    c.max_len = 6;
    c.dropout = 0.1f;
    if (variant == 1) c.share_embeddings = c.tie_output = true, c.pre_ln = true;
    if (variant == 2) {
        c.src_vocab = 10;
        c.positions = ATTN_ENCDEC_LEARNED, c.activation = ATTN_ENCDEC_GELU;
        c.n_dec_layers = 2;
        c.tie_output = true;
    }
    return c;
}

static void model_seeds(void) {
    for (int v = 0; v < 3; v++) {
        attn_encdec_config c = tiny(v);
        attn_encdec_model *m;
        if (attn_encdec_model_init(&c, 7 + (uint64_t)v, &m)) die("model_init");
        char dir[600], name[64];
        snprintf(dir, sizeof dir, "%s", tmp("model"));
        fuzz_rm_rf(dir, false);
        if (attn_encdec_save_dir(m, dir)) die("save_dir");
        size_t cn, mn;
        char p[700];
        snprintf(p, sizeof p, "%s/config.json", dir);
        char *cj = slurp(p, &cn);
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        char *mj = slurp(p, &mn);
        snprintf(name, sizeof name, "tiny-%d", v);
        seed("modeldir", name, cj, (long)cn, FUZZ_SEP, -1, mj, (long)mn, NULL, 0);
        SEED1("config", name, cj, (long)cn);
        if (v == 0) SEED1("safetensors", "tiny-model", mj, (long)mn);
        free(cj);
        free(mj);
        attn_encdec_model_free(m);
    }
    attn_encdec_config d = attn_encdec_default_config();
    d.src_vocab = d.tgt_vocab = 8000;
    if (attn_encdec_config_save(tmp("base.json"), &d)) die("config_save");
    file_seed("config", "paper-base", tmp("base.json"));
    SEED1("config", "template", "{\"d_model\": 32, \"n_head\": 2, \"d_ff\": 64, \"n_enc_layers\": 1, "
                                "\"n_dec_layers\": 1, \"max_len\": 48, \"dropout\": 0.1, "
                                "\"share_embeddings\": true, \"tie_output\": true, \"pre_ln\": false}\n",
          -1);
    SEED1("config", "absurd", "{\"src_vocab\": 2000000000, \"tgt_vocab\": 2000000000, "
                              "\"d_model\": 1048576, \"n_head\": 3, \"dropout\": 1e300, "
                              "\"layer_norm_eps\": -0.0, \"max_len\": 2147483647}", -1);
}

/* ---- GPT-2 and BERT model directories ---- */

static void dir_seed(const char *target, const char *name, const char *dir, const char *index) {
    size_t cn, mn;
    char p[700];
    snprintf(p, sizeof p, "%s/config.json", dir);
    char *cj = slurp(p, &cn);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    char *mj = slurp(p, &mn);
    if (index) {
        /* config, shard, index: seed() takes four pieces, the fifth is appended */
        seed(target, name, cj, (long)cn, FUZZ_SEP, -1, mj, (long)mn, FUZZ_SEP, -1);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
        FILE *f = fopen(path, "ab");
        fputs(index, f);
        fclose(f);
    } else {
        seed(target, name, cj, (long)cn, FUZZ_SEP, -1, mj, (long)mn, NULL, 0);
    }
    free(cj);
    free(mj);
}

static void gpt_bert_seeds(void) {
    for (int v = 0; v < 2; v++) {
        attn_gpt_config c = attn_gpt_default_config();
        c.vocab_size = 16, c.n_positions = 8, c.n_embd = 8, c.n_layer = 1 + v, c.n_head = 2;
        c.tie_word_embeddings = v == 0;
        attn_gpt_model *m;
        if (attn_gpt_model_init(&c, 5, &m)) die("gpt_init");
        char dir[600], name[32];
        snprintf(dir, sizeof dir, "%s", tmp("gpt"));
        fuzz_rm_rf(dir, false);
        if (attn_gpt_save_dir(m, dir)) die("gpt_save");
        snprintf(name, sizeof name, "tiny-%d", v);
        dir_seed("gptdir", name, dir, NULL);
        if (v == 1) {
            /* sharded: every tensor in the one shard */
            char index[8192];
            size_t n = (size_t)snprintf(index, sizeof index,
                                        "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {");
            for (int i = 0; i < m->n_tensors && n < sizeof index - 200; i++)
                n += (size_t)snprintf(index + n, sizeof index - n,
                                      "%s\"%s\": \"model-00001-of-00001.safetensors\"",
                                      i ? ", " : "", m->tensors[i].name);
            snprintf(index + n, sizeof index - n, "}}");
            dir_seed("gptdir", "sharded", dir, index);
        }
        attn_gpt_model_free(m);
    }
    /* the Llama family: GQA with linear rope scaling, Mistral's window, Qwen2's biases (tied),
     * Qwen3's q/k norms with llama3 scaling and a window layer */
    for (int v = 0; v < 4; v++) {
        static const attn_gpt_arch arch[4] = {ATTN_GPT_ARCH_LLAMA, ATTN_GPT_ARCH_MISTRAL,
                                              ATTN_GPT_ARCH_QWEN2, ATTN_GPT_ARCH_QWEN3};
        attn_gpt_config c = attn_gpt_arch_default_config(arch[v]);
        c.vocab_size = 16, c.n_positions = 8, c.n_embd = 8, c.n_layer = 2, c.n_head = 4;
        c.n_kv_head = 2, c.n_inner = 12, c.head_dim = v == 3 ? 6 : 2;
        c.tie_word_embeddings = v == 2;
        if (v == 0) c.rope_scaling.type = ATTN_GPT_ROPE_LINEAR, c.rope_scaling.factor = 2;
        if (v == 1) c.sliding_window = 3;
        if (v == 3) {
            c.rope_scaling = (attn_gpt_rope_scaling){ATTN_GPT_ROPE_LLAMA3, 8, 1, 4, 4};
            c.use_sliding_window = true, c.sliding_window = 2, c.max_window_layers = 1;
        }
        attn_gpt_model *m;
        if (attn_gpt_model_init(&c, 5, &m)) die("llama_init");
        char dir[600], name[32];
        snprintf(dir, sizeof dir, "%s", tmp("gpt"));
        fuzz_rm_rf(dir, false);
        if (attn_gpt_save_dir(m, dir)) die("llama_save");
        snprintf(name, sizeof name, "%s", attn_gpt_arch_name(arch[v]));
        dir_seed("gptdir", name, dir, NULL);
        attn_gpt_model_free(m);
    }
    for (int v = 0; v < 2; v++) {
        attn_bert_config c = attn_bert_default_config();
        c.vocab_size = 20, c.hidden_size = 8, c.num_hidden_layers = 1, c.num_attention_heads = 2;
        c.intermediate_size = 16, c.max_position_embeddings = 8, c.type_vocab_size = 2;
        c.tie_word_embeddings = v == 0;
        attn_bert_model *m;
        if (attn_bert_model_init(&c, 9, v == 0, true, &m)) die("bert_init");
        char dir[600], name[32];
        snprintf(dir, sizeof dir, "%s", tmp("bert"));
        fuzz_rm_rf(dir, false);
        if (attn_bert_save_dir(m, dir)) die("bert_save");
        snprintf(name, sizeof name, "tiny-%d", v);
        dir_seed("bertdir", name, dir, NULL);
        attn_bert_model_free(m);
    }
}

/* ---- tokenizers ---- */

static const char *const train_lines[] = {
    "Knowledge is power.", "知识就是力量。", "I think, therefore I am.", "我思故我在。",
    "Where there is a will, there is a way.", "有志者事竟成。", "the then there these those",
    "Time flies like an arrow.", "光阴似箭。", "123 456 7890"};

static void tokenizer_seeds(void) {
    attn_tok_train_params p = attn_tok_train_default_params();
    p.vocab_size = 300;
    p.min_frequency = 1;
    attn_tok *t;
    if (attn_tok_train_bpe(&p, train_lines, NULL, 10, &t)) die("train_bpe");
    if (attn_tok_save(t, tmp("bpe.json"))) die("tok_save");
    attn_tok_free(t);
    file_seed("tokenizer", "bpe-byte-fallback", tmp("bpe.json"));
    p.byte_fallback = false;
    p.vocab_size = 120;
    if (attn_tok_train_bpe(&p, train_lines, NULL, 10, &t)) die("train_bpe");
    if (attn_tok_save(t, tmp("bpe2.json"))) die("tok_save");
    attn_tok_free(t);
    file_seed("tokenizer", "bpe-no-fallback", tmp("bpe2.json"));
    /* GPT-2 style from vocab.json + merges.txt, saved as tokenizer.json */
    static const char vocab[] =
        "{\"!\": 0, \"a\": 1, \"b\": 2, \"h\": 3, \"e\": 4, \"t\": 5, \"\\u0120\": 6, "
        "\"\\u0120t\": 7, \"he\": 8, \"\\u0120the\": 9, \"<|endoftext|>\": 10}";
    static const char merges[] = "#version: 0.2\n\xC4\xA0 t\nh e\n\xC4\xA0t he\n";
    SEED1("tokenizer", "tiny-vocab", vocab, -1);
    FILE *f = fopen(tmp("vocab.json"), "w");
    fputs(vocab, f);
    fclose(f);
    f = fopen(tmp("merges.txt"), "w");
    fputs(merges, f);
    fclose(f);
    if (attn_tok_load_vocab_merges(tmp("vocab.json"), tmp("merges.txt"), &t)) die("vocab_merges");
    if (attn_tok_save(t, tmp("gpt2.json"))) die("tok_save");
    attn_tok_free(t);
    file_seed("tokenizer", "byte-level", tmp("gpt2.json"));
    SEED1("tokenizer", "minimal",
          "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"<unk>\": 3},"
          " \"merges\": [\"a b\"], \"unk_token\": \"<unk>\"}, \"added_tokens\": [{\"id\": 4, "
          "\"content\": \"<s>\", \"special\": true, \"single_word\": false, \"lstrip\": false, "
          "\"rstrip\": false, \"normalized\": false}], \"normalizer\": null, \"pre_tokenizer\": "
          "{\"type\": \"Whitespace\"}, \"decoder\": null}",
          -1);
    SEED1("tokenizer", "wordpiece",
          "{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", "
          "\"continuing_subword_prefix\": \"##\", \"max_input_chars_per_word\": 100, \"vocab\": "
          "{\"[PAD]\": 0, \"[UNK]\": 1, \"[CLS]\": 2, \"[SEP]\": 3, \"know\": 4, \"##ledge\": 5}}, "
          "\"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": true, "
          "\"handle_chinese_chars\": true, \"strip_accents\": null, \"lowercase\": true}, "
          "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, \"decoder\": {\"type\": "
          "\"WordPiece\", \"prefix\": \"##\", \"cleanup\": true}}",
          -1);
    /* the Llama family's structures: Digits + Split(Regex) + ByteLevel, a Sequence post-processor,
     * added tokens with lstrip / rstrip / single_word / normalized (tools/tok_families.py) */
    SEED1("tokenizer", "llama3-style",
          "{\"added_tokens\": [{\"id\": 9, \"content\": \"<|begin_of_text|>\", \"single_word\": fal"
          "se, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}, {\""
          "id\": 10, \"content\": \"<|eot_id|>\", \"single_word\": false, \"lstrip\": true, \"rstri"
          "p\": true, \"normalized\": false, \"special\": true}, {\"id\": 11, \"content\": \"ab\", "
          "\"single_word\": true, \"lstrip\": false, \"rstrip\": false, \"normalized\": true, \"spe"
          "cial\": false}], \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Sequence\", \"pre"
          "tokenizers\": [{\"type\": \"Digits\", \"individual_digits\": true}, {\"type\": \"Split\""
          ", \"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?"
          "\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s"
          "+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteL"
          "evel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]}, \""
          "post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\", \""
          "add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": true}, {\"type\": \"Te"
          "mplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|begin_of_text|>\", \"ty"
          "pe_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [{\"SpecialTok"
          "en\": {\"id\": \"<|begin_of_text|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \""
          "type_id\": 0}}, {\"SpecialToken\": {\"id\": \"<|begin_of_text|>\", \"type_id\": 1}}, {\""
          "Sequence\": {\"id\": \"B\", \"type_id\": 1}}], \"special_tokens\": {\"<|begin_of_text|>\""
          ": {\"id\": \"<|begin_of_text|>\", \"ids\": [9], \"tokens\": [\"<|begin_of_text|>\"]}}}]}"
          ", \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": t"
          "rue, \"use_regex\": true}, \"model\": {\"type\": \"BPE\", \"ignore_merges\": true, \"voc"
          "ab\": {\"a\": 0, \"b\": 1, \"Ġ\": 2, \"ab\": 3, \"Ġa\": 4, \"1\": 5, \"'\": 6, \"s\": 7,"
          " \"Ċ\": 8}, \"merges\": [[\"a\", \"b\"], [\"Ġ\", \"a\"]]}}",
          -1);
    SEED1("tokenizer", "spm-flags",
          "{\"added_tokens\": [{\"id\": 3, \"content\": \"<s>\", \"single_word\": false, \"lstrip\""
          ": false, \"rstrip\": false, \"normalized\": true, \"special\": true}, {\"id\": 4, \"cont"
          "ent\": \"</s>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": true, \"normaliz"
          "ed\": false, \"special\": false}, {\"id\": 5, \"content\": \"<|end|>\", \"single_word\":"
          " true, \"lstrip\": true, \"rstrip\": true, \"normalized\": false, \"special\": true}], \""
          "normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepe"
          "nd\": \"▁\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"▁"
          "\"}]}, \"pre_tokenizer\": null, \"post_processor\": {\"type\": \"TemplateProcessing\", \""
          "single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\""
          ": \"A\", \"type_id\": 0}}], \"pair\": [{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, "
          "{\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}], \"special_tokens\": {\"<s>\": {\"id\":"
          " \"<s>\", \"ids\": [3], \"tokens\": [\"<s>\"]}}}, \"decoder\": {\"type\": \"Sequence\", "
          "\"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": \"▁\"}, \"content\": \""
          " \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": \"Strip\", \"conten"
          "t\": \" \", \"start\": 1, \"stop\": 0}]}, \"model\": {\"type\": \"BPE\", \"unk_token\": "
          "\"<unk>\", \"fuse_unk\": true, \"byte_fallback\": true, \"vocab\": {\"<unk>\": 0, \"▁\":"
          " 1, \"a\": 2, \"<0x41>\": 6, \"<0xE4>\": 7, \"▁a\": 8}, \"merges\": [[\"▁\", \"a\"]]}}",
          -1);

    /* tokenize: mode byte + text / ids */
    static const struct {
        const char *name;
        unsigned char mode;
        const char *text;
    } tz[] = {{"enc-bpe", 0, "Knowledge is power. 知识就是力量。"},
              {"enc-bytelevel", 4, "The quick brown fox, the then. 1234 'll 've"},
              {"enc-special", 8, "<s>hello</s> <pad> <|endoftext|>x"},
              {"enc-small", 2, "there is a way"},
              {"enc-invalid", 0, "bad \xC3\x28 utf8 \xED\xA0\x80 \xF4\x90\x80\x80"},
              {"enc-nul", 4, "a\0b"},
              {"enc-llama-style", 24, "Hello  <|eot_id|>  world ab xab <s>1234 it's\n\n\nend sep"}};
    for (size_t i = 0; i < sizeof tz / sizeof tz[0]; i++) {
        size_t n = strlen(tz[i].text);
        if (!strcmp(tz[i].name, "enc-nul")) n = 3;
        seed("tokenize", tz[i].name, &tz[i].mode, 1, tz[i].text, (long)n, NULL, 0, NULL, 0);
    }
    /* toktrain: option byte + lines */
    static const struct {
        const char *name;
        unsigned char opt;
        const char *text;
    } tt[] = {{"lines", 0, "the cat\nthe hat\n知识就是力量。\nthe cat sat on the mat\n\n"},
              {"no-fallback", 1 | 8, "aaa bbb aaa\nab ab ab\n"},
              {"limit-alphabet", 0x40 | 0x80, "知识就是力量。我思故我在。\nhello world\n"},
              {"invalid", 0, "ok\n\xFF bad\n"},
              {"specials", 2, "<s> </s> <pad> <unk> \xE2\x96\x81 x\n"}};
    for (size_t i = 0; i < sizeof tt / sizeof tt[0]; i++)
        seed("toktrain", tt[i].name, &tt[i].opt, 1, tt[i].text, -1, NULL, 0, NULL, 0);
    int32_t ids[8] = {0, 1, 2, 3, 200, 299, 45, 67};
    unsigned char m1 = 1, m9 = 9 | 4;
    seed("tokenize", "dec-bpe", &m1, 1, ids, sizeof ids, NULL, 0, NULL, 0);
    seed("tokenize", "dec-bytelevel-keep", &m9, 1, ids, sizeof ids, NULL, 0, NULL, 0);
}

/* ---- checkpoints ---- */

static void ckpt_seeds(void) {
    float p[16];
    for (int i = 0; i < 16; i++) p[i] = 0.5f * (float)i - 3;
    attn_ckpt_tensor t[3] = {{"a", 2, {2, 3}, p}, {"b", 1, {4}, p + 6}, {"emb.w", 2, {3, 2}, p + 10}};
    attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    attn_optim *o;
    if (attn_optim_create(&op, 16, NULL, 0, &o)) die("optim");
    float g[16];
    for (int i = 0; i < 16; i++) g[i] = 0.1f * (float)(i % 5) - 0.2f;
    attn_optim_step(o, p, g, 1e-3);
    attn_optim_step(o, p, g, 1e-3);
    attn_ckpt_state st = attn_ckpt_state_init();
    st.step = 2, st.epoch = 1, st.data_position = 5, st.lr = 1e-3, st.best_valid_loss = 2.5;
    attn_rng r;
    attn_rng_init(&r, 42);
    attn_rng_skip(&r, 1000);
    attn_ckpt_state_set_rng(&st, "dropout", &r);
    attn_ckpt_state_set_rng(&st, "shuffle", &r);
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tmp("ckpt"));
    if (attn_ckpt_save(dir, t, 3, o, &st)) die("ckpt_save");
    size_t jn, mn, on;
    char pth[700];
    snprintf(pth, sizeof pth, "%s/training_state.json", dir);
    char *j = slurp(pth, &jn);
    snprintf(pth, sizeof pth, "%s/model.safetensors", dir);
    char *m = slurp(pth, &mn);
    snprintf(pth, sizeof pth, "%s/optimizer.safetensors", dir);
    char *ob = slurp(pth, &on);
    /* flags 0: as saved; 1: CRCs rewritten after mutation; 2: in DIR.prev; 12: no opt, no state */
    const unsigned char flags[4] = {0, 1, 2, 12};
    const char *names[4] = {"saved", "fix-crc", "prev-dir", "model-only"};
    for (int k = 0; k < 4; k++) {
        char *all = malloc(jn + mn + on + 2 * FUZZ_SEP_LEN + 1);
        size_t n = 0;
        all[n++] = (char)flags[k];
        memcpy(all + n, j, jn), n += jn;
        memcpy(all + n, FUZZ_SEP, FUZZ_SEP_LEN), n += FUZZ_SEP_LEN;
        memcpy(all + n, m, mn), n += mn;
        memcpy(all + n, FUZZ_SEP, FUZZ_SEP_LEN), n += FUZZ_SEP_LEN;
        memcpy(all + n, ob, on), n += on;
        SEED1("ckpt", names[k], all, (long)n);
        free(all);
    }
    free(j), free(m), free(ob);
    attn_optim_destroy(o);
}

/* ---- command lines and text data ---- */

static void cli_seeds(void) {
    static const char *const argvs[][12] = {
        {"--help"},
        {"--version"},
        {"--threads", "2", "info"},
        {"--backend", "ref", "help"},
        {"--threads", "x", "info"},
        {"explain", "--json"},
        {"explain", "missing.safetensors"},
        {"train", "--data", "x.tsv", "--out", "o", "--max-steps", "3", "--lr", "1e-3"},
        {"train", "--out", "o", "--resume", "--time-budget", "5"},
        {"train", "--arch", "gpt", "--data", "y", "--out", "o"},
        {"translate", "--model", "m", "--beam", "5", "--length-penalty", "0.6", "hello"},
        {"translate", "--model", "m", "--max-len", "0", "--", "-x"},
        {"bleu", "h.txt", "r.txt", "--tokenize", "13a", "--lowercase", "--json"},
        {"bleu", "-", "r0", "r1", "-tok", "none"},
        {"tokenizer", "encode", "--tokenizer", "t", "hello", "world"},
        {"tokenizer", "decode", "--tokenizer", "t", "--keep-special", "1,2 3"},
        {"tokenizer", "train", "--data", "-", "--out", "o", "--vocab-size", "300"},
        {"tokenizer", "train", "--data", "-", "--out", "o", "--column", "2"},
        {"tokenizer", "bogus"},
        {"nonsense", "--x"},
    };
    for (size_t i = 0; i < sizeof argvs / sizeof argvs[0]; i++) {
        char buf[1024];
        size_t n = 0;
        for (int k = 0; k < 12 && argvs[i][k]; k++) {
            if (k) buf[n++] = '\0';
            size_t l = strlen(argvs[i][k]);
            memcpy(buf + n, argvs[i][k], l);
            n += l;
        }
        char name[32];
        snprintf(name, sizeof name, "argv-%02zu", i);
        SEED1("cli", name, buf, (long)n);
    }
}

static void data_seeds(void) {
    static const char tsv[] = "Hi.\t嗨。\tattr\nRun.\t你用跑的。\nWait!\t等等！\n\nI try.\t我试试。\t\n"
                              "I won!\t我赢了。\nHe ran.\t他跑了。\nHe ran.\t他跑。\n";
    unsigned char modes[4] = {0, 3, 8 | 16, 32 | 64 | 4};
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "pairs-%d", k);
        seed("data", name, &modes[k], 1, tsv, -1, NULL, 0, NULL, 0);
    }
    seed("data", "tatoeba", &modes[0], 1,
         "Hi.\t嗨。\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & #891077 (Martha)\n"
         "Run.\t你用跑的。\tCC-BY 2.0 (France) Attribution: tatoeba.org #4008918 (JSakuragi)\n"
         "Wait!\t等等！\tCC-BY 2.0 (France)\nWait!\t等一下！\tCC-BY 2.0 (France)\n"
         "I try.\t我试试。\tCC-BY 2.0 (France)\nI won!\t我赢了。\tCC-BY 2.0 (France)\n"
         "Knowledge is power.\t知识就是力量。\n",
         -1, NULL, 0, NULL, 0);
    seed("data", "bom-crlf", &modes[0], 1, "\xEF\xBB\xBFOne.\t一。\r\nTwo.\t二。\r\nThree.\t三。\r\n", -1,
         NULL, 0, NULL, 0);
    seed("data", "bad", &modes[1], 1, "ok\tok\nno tab here\n\tempty source\nx\t\xC3\x28\n", -1, NULL,
         0, NULL, 0);
    /* masked-LM lines: words of fuzz_data.c's WordPiece vocabulary, a [MASK], blank lines, a
     * line longer than max_len, a second column */
    static const unsigned char mlm_mode[1] = {1 | 8 | 32};
    seed("data", "mlm-lines", mlm_mode, 1,
         "Knowledge is power.\tthe knowledge\n\nthe powers [MASK] a power\t知识\n \t \r\n"
         "the the the the the the the the the the the the the the the the the the the the the the "
         "the the the\ta\nis\tknows.\n",
         -1, NULL, 0, NULL, 0);
}

/* ---- gguf ---- */

/* One GGUF seed: kv + tensors through the library's writer. */
static void gguf_seed(const char *name, const attn_gguf_kv *kv, size_t nkv,
                      const attn_gguf_tensor_desc *t, size_t nt) {
    if (attn_gguf_save(tmp("seed.gguf"), kv, nkv, t, nt)) die(name);
    file_seed("gguf", name, tmp("seed.gguf"));
}

static attn_gguf_str gstr(const char *s) { return (attn_gguf_str){s, strlen(s)}; }

/* A tokenizer's keys: model, pre (NULL: none), tokens with their types and scores. */
static size_t tok_kv(attn_gguf_kv *kv, const char *model, const char *pre, const attn_gguf_str *toks,
                     const int32_t *types, const float *scores, size_t n) {
    size_t k = 0;
    kv[k++] = attn_gguf_kv_str("general.architecture", "llama");
    kv[k++] = attn_gguf_kv_str("tokenizer.ggml.model", model);
    if (pre) kv[k++] = attn_gguf_kv_str("tokenizer.ggml.pre", pre);
    kv[k++] = attn_gguf_kv_arr("tokenizer.ggml.tokens", ATTN_GGUF_TYPE_STRING, n, toks);
    kv[k++] = attn_gguf_kv_arr("tokenizer.ggml.token_type", ATTN_GGUF_TYPE_INT32, n, types);
    if (scores) kv[k++] = attn_gguf_kv_arr("tokenizer.ggml.scores", ATTN_GGUF_TYPE_FLOAT32, n, scores);
    return k;
}

/* The first n tokens of a real vocabulary (models/llamacpp, when present) with their types and
 * scores, and the merges among them: real keys and strings, small enough for the fuzzer. */
static void real_vocab_seed(const char *file, const char *name, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "models/llamacpp/vocab/%s", file);
    attn_gguf *g;
    if (access(path, R_OK) || attn_gguf_open(path, &g)) return;
    attn_gguf_kv kv[16];
    size_t k = 0;
    attn_gguf_str *merges = NULL;
    for (size_t i = 0; i < attn_gguf_kv_count(g) && k < 16; i++) {
        attn_gguf_kv e = *attn_gguf_kv_at(g, i);
        if (strncmp(e.key, "tokenizer.", 10) && strcmp(e.key, "general.architecture")) continue;
        if (!strcmp(e.key, "tokenizer.ggml.merges")) {
            /* the merges of two kept tokens into a kept token */
            const attn_gguf_str *m = e.val.v.arr.data, *toks = attn_gguf_find(g, "tokenizer.ggml.tokens")->v.arr.data;
            merges = malloc(e.val.v.arr.n * sizeof *merges);
            size_t nm = 0;
            for (uint64_t r = 0; r < e.val.v.arr.n; r++) {
                const char *sp = strchr(m[r].s + 1, ' ');
                char joined[256];
                if (!sp || m[r].len >= sizeof joined) continue;
                size_t la = (size_t)(sp - m[r].s);
                memcpy(joined, m[r].s, la);
                memcpy(joined + la, sp + 1, m[r].len - la - 1);
                joined[m[r].len - 1] = 0;
                bool found = false;
                for (size_t t = 0; t < n && !found; t++) found = !strcmp(toks[t].s, joined);
                if (found) merges[nm++] = m[r];
            }
            e.val.v.arr.n = nm;
            e.val.v.arr.data = merges;
        } else if (e.val.type == ATTN_GGUF_TYPE_ARRAY && e.val.v.arr.n > n) {
            e.val.v.arr.n = n;
        } else if (!strcmp(e.key, "tokenizer.ggml.eos_token_id") ||
                   !strcmp(e.key, "tokenizer.ggml.bos_token_id")) {
            if (e.val.v.u32 >= n) e.val.v.u32 = 2;
        }
        kv[k++] = e;
    }
    gguf_seed(name, kv, k, NULL, 0);
    free(merges);
    attn_gguf_close(g);
}

static void gguf_seeds(void) {
    /* every metadata type, tensors of several types and shapes */
    static const uint8_t u8[3] = {0, 1, 255};
    static const int64_t i64[2] = {-1, INT64_MAX};
    static const double f64[2] = {0.5, -1e300};
    static const bool bools[2] = {true, false};
    const attn_gguf_str strs[3] = {gstr("a"), gstr(""), gstr("\xe7\x9f\xa5 b")};
    int32_t inner[2] = {1, 2};
    attn_gguf_value nested[2] = {attn_gguf_kv_arr("", ATTN_GGUF_TYPE_INT32, 2, inner).val,
                                 attn_gguf_kv_arr("", ATTN_GGUF_TYPE_INT32, 1, inner).val};
    attn_gguf_kv kv[24] = {
        attn_gguf_kv_str("general.architecture", "llama"),
        attn_gguf_kv_u32("llama.block_count", 2),
        attn_gguf_kv_f32("llama.rope.freq_base", 10000.0f),
        attn_gguf_kv_bool("x.bool", true),
        attn_gguf_kv_u64("x.u64", 1ull << 40),
        attn_gguf_kv_i32("x.i32", -5),
        {"x.i8", {ATTN_GGUF_TYPE_INT8, {.i8 = -3}}},
        {"x.u16", {ATTN_GGUF_TYPE_UINT16, {.u16 = 65535}}},
        {"x.i16", {ATTN_GGUF_TYPE_INT16, {.i16 = -300}}},
        {"x.f64", {ATTN_GGUF_TYPE_FLOAT64, {.f64 = 2.5}}},
        {"x.i64", {ATTN_GGUF_TYPE_INT64, {.i64 = -7}}},
        attn_gguf_kv_arr("x.arr_u8", ATTN_GGUF_TYPE_UINT8, 3, u8),
        attn_gguf_kv_arr("x.arr_i64", ATTN_GGUF_TYPE_INT64, 2, i64),
        attn_gguf_kv_arr("x.arr_f64", ATTN_GGUF_TYPE_FLOAT64, 2, f64),
        attn_gguf_kv_arr("x.arr_bool", ATTN_GGUF_TYPE_BOOL, 2, bools),
        attn_gguf_kv_arr("x.arr_str", ATTN_GGUF_TYPE_STRING, 3, strs),
        attn_gguf_kv_arr("x.arr_arr", ATTN_GGUF_TYPE_ARRAY, 2, nested),
        attn_gguf_kv_str("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}"),
    };
    static float f32[8] = {1, -2, 3.5f, 0, 1e-40f, 6, 7, 8};
    static uint8_t blocks[2 * 144];
    for (size_t i = 0; i < sizeof blocks; i++) blocks[i] = (uint8_t)(i * 37 + 11);
    attn_gguf_tensor_desc t[6] = {
        {"token_embd.weight", ATTN_GGUF_DTYPE_F32, 2, {4, 2}, f32},
        {"blk.0.attn_norm.weight", ATTN_GGUF_DTYPE_F16, 1, {4}, f32},
        {"blk.0.ffn_up.weight", ATTN_GGUF_DTYPE_Q8_0, 2, {32, 2}, blocks},
        {"blk.0.ffn_down.weight", ATTN_GGUF_DTYPE_Q4_K, 1, {256}, blocks},
        {"blk.0.empty", ATTN_GGUF_DTYPE_Q4_1, 2, {32, 0}, NULL},
        {"output.weight", ATTN_GGUF_DTYPE_BF16, 3, {2, 1, 2}, f32},
    };
    gguf_seed("types", kv, 18, t, 6);
    gguf_seed("no-tensors", kv, 4, NULL, 0);
    gguf_seed("empty", NULL, 0, NULL, 0);
    kv[0] = attn_gguf_kv_u32("general.alignment", 64);
    gguf_seed("align64", kv, 3, t, 3);

    /* tokenizers: byte-level BPE (each supported pre), SentencePiece, WordPiece */
    attn_gguf_str toks[300];
    int32_t types[300];
    float scores[300];
    static const char *const bpe[] = {"<|endoftext|>", "H", "e", "l", "o", "\xc4\xa0", "w", "r",
                                      "d", "!", "1", "2", "He", "ll", "Hell", "Hello", "\xc4\xa0w",
                                      "or", "\xc4\xa0wor", "\xc4\xa0world", "ld", "12", "[PAD22]"};
    size_t nb = sizeof bpe / sizeof bpe[0];
    for (size_t i = 0; i < nb; i++) {
        toks[i] = gstr(bpe[i]);
        types[i] = i == 0 ? 3 : i == nb - 1 ? 4 : 1;
    }
    const attn_gguf_str merges[] = {gstr("H e"), gstr("l l"), gstr("He ll"), gstr("Hell o"),
                                    gstr("\xc4\xa0 w"), gstr("o r"), gstr("\xc4\xa0w or"),
                                    gstr("l d"), gstr("\xc4\xa0wor ld"), gstr("1 2")};
    static const char *const pres[] = {"gpt-2", "llama-bpe", "qwen2", "smollm", "tekken"};
    for (int p = 0; p < 5; p++) {
        attn_gguf_kv tk[12];
        size_t k = tok_kv(tk, "gpt2", pres[p], toks, types, NULL, nb);
        tk[k++] = attn_gguf_kv_arr("tokenizer.ggml.merges", ATTN_GGUF_TYPE_STRING, 10, merges);
        tk[k++] = attn_gguf_kv_u32("tokenizer.ggml.bos_token_id", 0);
        tk[k++] = attn_gguf_kv_u32("tokenizer.ggml.eos_token_id", 0);
        if (p == 1) tk[k++] = attn_gguf_kv_bool("tokenizer.ggml.add_eos_token", true);
        char nm[64];
        snprintf(nm, sizeof nm, "tok-gpt2-%s", pres[p]);
        gguf_seed(nm, tk, k, NULL, 0);
    }
    /* SentencePiece: <unk> <s> </s>, the 256 byte pieces, a few words */
    static char bytes_[256][8];
    size_t n = 0;
    toks[n] = gstr("<unk>"), types[n] = 2, scores[n++] = 0;
    toks[n] = gstr("<s>"), types[n] = 3, scores[n++] = 0;
    toks[n] = gstr("</s>"), types[n] = 3, scores[n++] = 0;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes_[b], sizeof bytes_[b], "<0x%02X>", b);
        toks[n] = gstr(bytes_[b]), types[n] = 6, scores[n++] = 0;
    }
    static const char *const spm[] = {"\xe2\x96\x81", "H", "e", "l", "o", "\xe2\x96\x81H", "ll",
                                      "\xe2\x96\x81He", "\xe2\x96\x81Hell", "\xe2\x96\x81Hello",
                                      "w", "\xe2\x96\x81w", "<|end|>"};
    for (size_t i = 0; i < sizeof spm / sizeof spm[0]; i++)
        toks[n] = gstr(spm[i]), types[n] = i == 12 ? 3 : 1, scores[n++] = -(float)i;
    attn_gguf_kv sk[12];
    size_t k = tok_kv(sk, "llama", "default", toks, types, scores, n);
    sk[k++] = attn_gguf_kv_u32("tokenizer.ggml.bos_token_id", 1);
    sk[k++] = attn_gguf_kv_u32("tokenizer.ggml.eos_token_id", 2);
    sk[k++] = attn_gguf_kv_u32("tokenizer.ggml.unknown_token_id", 0);
    gguf_seed("tok-llama", sk, k, NULL, 0);
    sk[0] = attn_gguf_kv_str("general.architecture", "phi3");
    sk[k++] = attn_gguf_kv_bool("tokenizer.ggml.add_space_prefix", false);
    gguf_seed("tok-llama-phi3", sk, k, NULL, 0);
    /* WordPiece in llama.cpp's spelling */
    static const char *const wp[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                     "\xe2\x96\x81hello", "\xe2\x96\x81world", "llo",
                                     "\xe2\x96\x81he", "\xe2\x96\x81,", "\xe2\x96\x81!", "s"};
    size_t nw = sizeof wp / sizeof wp[0];
    for (size_t i = 0; i < nw; i++) toks[i] = gstr(wp[i]), types[i] = i < 5 ? 3 : 1;
    attn_gguf_kv wk[12];
    k = tok_kv(wk, "bert", "bert-bge", toks, types, NULL, nw);
    wk[k++] = attn_gguf_kv_u32("tokenizer.ggml.unknown_token_id", 1);
    wk[k++] = attn_gguf_kv_u32("tokenizer.ggml.cls_token_id", 2);
    wk[k++] = attn_gguf_kv_u32("tokenizer.ggml.seperator_token_id", 3);
    wk[k++] = attn_gguf_kv_u32("tokenizer.ggml.mask_token_id", 4);
    gguf_seed("tok-bert", wk, k, NULL, 0);
    real_vocab_seed("ggml-vocab-gpt-2.gguf", "tok-real-gpt-2", 600);
    real_vocab_seed("ggml-vocab-llama-spm.gguf", "tok-real-llama-spm", 700);
}

/* Models in GGUF (fuzz_gguf.c's attn_gpt_from_gguf, attn_bert_from_gguf): tiny llama (Q8_0
 * matrices, the embeddings and tied head quantized), qwen3 (F16 matrices, q/k norms, an untied F32
 * head), gpt2 (F32, biases, position table, Conv1D weights as (out, in)) and bert (Q8_0). C 32, 2 heads of 16, 1 key/value
 * head, FFN 32, one layer, 5 tokens, context 8. */
typedef struct {
    const char *name;
    int n_dims;
    int64_t ne0, ne1;
} seed_tensor;

static void model_seed(const char *seed, const char *arch, attn_gguf_dtype mat,
                       const seed_tensor *st, size_t nt, const attn_gguf_kv *extra, size_t nextra) {
    attn_gguf_kv kv[24];
    size_t k = 0;
    char keys[10][64];
#define KEY(i, s) (snprintf(keys[i], sizeof keys[i], "%s.%s", arch, s), keys[i])
    kv[k++] = attn_gguf_kv_str("general.architecture", arch);
    kv[k++] = attn_gguf_kv_u32(KEY(0, "block_count"), 1);
    kv[k++] = attn_gguf_kv_u32(KEY(1, "context_length"), 8);
    kv[k++] = attn_gguf_kv_u32(KEY(2, "embedding_length"), 32);
    kv[k++] = attn_gguf_kv_u32(KEY(3, "feed_forward_length"), 32);
    kv[k++] = attn_gguf_kv_u32(KEY(4, "attention.head_count"), 2);
    if (strcmp(arch, "gpt2") && strcmp(arch, "bert")) {
        kv[k++] = attn_gguf_kv_u32(KEY(5, "attention.head_count_kv"), 1);
        kv[k++] = attn_gguf_kv_f32(KEY(6, "attention.layer_norm_rms_epsilon"), 1e-6f);
        kv[k++] = attn_gguf_kv_f32(KEY(7, "rope.freq_base"), 10000.0f);
        kv[k++] = attn_gguf_kv_u32(KEY(8, "rope.dimension_count"), 16);
    } else {
        kv[k++] = attn_gguf_kv_f32(KEY(5, "attention.layer_norm_epsilon"), 1e-5f);
    }
#undef KEY
    for (size_t i = 0; i < nextra; i++) kv[k++] = extra[i];
    kv[k++] = attn_gguf_kv_u32("tokenizer.ggml.eos_token_id", 4);
    attn_gguf_tensor_desc t[24];
    void *bufs[24];
    for (size_t i = 0; i < nt; i++) {
        const int64_t n = st[i].ne0 * (st[i].n_dims == 2 ? st[i].ne1 : 1);
        float *f = malloc((size_t)n * sizeof(float));
        if (!f) die(seed);
        for (int64_t j = 0; j < n; j++)
            f[j] = st[i].n_dims == 1 ? 1.0f + 0.01f * (float)(j % 7) : 0.05f * sinf((float)(j * 7 + (int64_t)i));
        const attn_gguf_dtype ty = st[i].n_dims == 2 ? mat : ATTN_GGUF_DTYPE_F32;
        uint64_t nb;
        int64_t ne[4] = {st[i].ne0, st[i].ne1, 1, 1};
        if (!attn_gguf_nbytes(ty, st[i].n_dims, ne, &nb)) die(seed);
        bufs[i] = malloc((size_t)nb);
        if (!bufs[i] || attn_quant_quantize((attn_qtype)ty, n, f, bufs[i])) die(seed);
        free(f);
        t[i] = (attn_gguf_tensor_desc){st[i].name, ty, st[i].n_dims, {st[i].ne0, st[i].ne1}, bufs[i]};
    }
    gguf_seed(seed, kv, k, t, nt);
    for (size_t i = 0; i < nt; i++) free(bufs[i]);
}

static void gguf_model_seeds(void) {
    static const seed_tensor llama[] = {
        {"token_embd.weight", 2, 32, 5},       {"blk.0.attn_norm.weight", 1, 32, 0},
        {"blk.0.attn_q.weight", 2, 32, 32},    {"blk.0.attn_k.weight", 2, 32, 16},
        {"blk.0.attn_v.weight", 2, 32, 16},    {"blk.0.attn_output.weight", 2, 32, 32},
        {"blk.0.ffn_norm.weight", 1, 32, 0},   {"blk.0.ffn_gate.weight", 2, 32, 32},
        {"blk.0.ffn_up.weight", 2, 32, 32},    {"blk.0.ffn_down.weight", 2, 32, 32},
        {"output_norm.weight", 1, 32, 0},
    };
    model_seed("model-llama-q8_0", "llama", ATTN_GGUF_DTYPE_Q8_0, llama, 11, NULL, 0);
    static const seed_tensor qwen3[] = {
        {"token_embd.weight", 2, 32, 5},       {"blk.0.attn_norm.weight", 1, 32, 0},
        {"blk.0.attn_q.weight", 2, 32, 32},    {"blk.0.attn_k.weight", 2, 32, 16},
        {"blk.0.attn_v.weight", 2, 32, 16},    {"blk.0.attn_q_norm.weight", 1, 16, 0},
        {"blk.0.attn_k_norm.weight", 1, 16, 0}, {"blk.0.attn_output.weight", 2, 32, 32},
        {"blk.0.ffn_norm.weight", 1, 32, 0},   {"blk.0.ffn_gate.weight", 2, 32, 32},
        {"blk.0.ffn_up.weight", 2, 32, 32},    {"blk.0.ffn_down.weight", 2, 32, 32},
        {"output_norm.weight", 1, 32, 0},      {"output.weight", 2, 32, 5},
    };
    const attn_gguf_kv lin[] = {attn_gguf_kv_str("qwen3.rope.scaling.type", "linear"),
                                attn_gguf_kv_f32("qwen3.rope.scaling.factor", 2.0f)};
    model_seed("model-qwen3-f16", "qwen3", ATTN_GGUF_DTYPE_F16, qwen3, 14, lin, 2);
    static const seed_tensor gpt2[] = {
        {"token_embd.weight", 2, 32, 5},       {"position_embd.weight", 2, 32, 8},
        {"blk.0.attn_norm.weight", 1, 32, 0},  {"blk.0.attn_norm.bias", 1, 32, 0},
        {"blk.0.attn_qkv.weight", 2, 32, 96},  {"blk.0.attn_qkv.bias", 1, 96, 0},
        {"blk.0.attn_output.weight", 2, 32, 32}, {"blk.0.attn_output.bias", 1, 32, 0},
        {"blk.0.ffn_norm.weight", 1, 32, 0},   {"blk.0.ffn_norm.bias", 1, 32, 0},
        {"blk.0.ffn_up.weight", 2, 32, 32},    {"blk.0.ffn_up.bias", 1, 32, 0},
        {"blk.0.ffn_down.weight", 2, 32, 32},  {"blk.0.ffn_down.bias", 1, 32, 0},
        {"output_norm.weight", 1, 32, 0},      {"output_norm.bias", 1, 32, 0},
    };
    model_seed("model-gpt2-f32", "gpt2", ATTN_GGUF_DTYPE_F32, gpt2, 16, NULL, 0);
    static const seed_tensor bert[] = {
        {"token_embd.weight", 2, 32, 5},       {"position_embd.weight", 2, 32, 8},
        {"token_types.weight", 2, 32, 2},      {"token_embd_norm.weight", 1, 32, 0},
        {"token_embd_norm.bias", 1, 32, 0},    {"blk.0.attn_q.weight", 2, 32, 32},
        {"blk.0.attn_q.bias", 1, 32, 0},       {"blk.0.attn_k.weight", 2, 32, 32},
        {"blk.0.attn_k.bias", 1, 32, 0},       {"blk.0.attn_v.weight", 2, 32, 32},
        {"blk.0.attn_v.bias", 1, 32, 0},       {"blk.0.attn_output.weight", 2, 32, 32},
        {"blk.0.attn_output.bias", 1, 32, 0},  {"blk.0.attn_output_norm.weight", 1, 32, 0},
        {"blk.0.attn_output_norm.bias", 1, 32, 0}, {"blk.0.ffn_up.weight", 2, 32, 32},
        {"blk.0.ffn_up.bias", 1, 32, 0},       {"blk.0.ffn_down.weight", 2, 32, 32},
        {"blk.0.ffn_down.bias", 1, 32, 0},     {"blk.0.layer_output_norm.weight", 1, 32, 0},
        {"blk.0.layer_output_norm.bias", 1, 32, 0},
    };
    model_seed("model-bert-q8_0", "bert", ATTN_GGUF_DTYPE_Q8_0, bert, 21, NULL, 0);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make-seeds DIR (fuzz/corpus)\n");
        return 2;
    }
    root = argv[1];
    mkdir(root, 0755);
    attn_set_num_threads(1);
    safetensors_seeds();
    model_seeds();
    gpt_bert_seeds();
    tokenizer_seeds();
    ckpt_seeds();
    cli_seeds();
    data_seeds();
    gguf_seeds();
    gguf_model_seeds();
    return 0;
}

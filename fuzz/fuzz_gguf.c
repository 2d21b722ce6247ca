/* fuzz_gguf.c — the GGUF reader (attn_gguf_open_memory on the input: header, metadata of every
 * type, tensor infos, data bounds), every lookup and typed getter on what it accepts, every
 * tensor's bytes, and the tokenizer built from the metadata (attn_tok_from_gguf: vocabulary,
 * merges, scores, token types, special ids), which then encodes and decodes a fixed text, and the
 * model the file describes (attn_gpt_from_gguf or, for "bert", attn_bert_from_gguf), which then
 * decodes a few tokens (runs a forward). A
 * rejected input must leave a one-line message naming the input; an accepted one must stay
 * within the input and read consistently. */
#include "fuzz.h"

#include "attn_bert.h"
#include "attn_gguf.h"
#include "attn_gpt.h"
#include "attn_tok.h"

static const char TEXT[] = " Hello, world! 123 café 知识 😀\n\t<s>[CLS]<|endoftext|>";

static void check_getters(const attn_gguf *g, const char *key) {
    uint32_t u32;
    int32_t i32;
    uint64_t u64, n;
    float f32;
    bool b;
    int64_t i64;
    double d;
    const char *s;
    const void *data;
    attn_status st[9] = {
        attn_gguf_get_u32(g, key, &u32),  attn_gguf_get_i32(g, key, &i32),
        attn_gguf_get_u64(g, key, &u64),  attn_gguf_get_f32(g, key, &f32),
        attn_gguf_get_bool(g, key, &b),   attn_gguf_get_str(g, key, &s, &n),
        attn_gguf_get_int(g, key, &i64),  attn_gguf_get_float(g, key, &d),
        attn_gguf_get_arr(g, key, ATTN_GGUF_TYPE_STRING, &data, &n),
    };
    for (int i = 0; i < 9; i++)
        if (st[i]) fuzz_check_message(attn_last_error());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_gguf *g;
    if (attn_gguf_open_memory(data, size, "fuzz.gguf", &g)) {
        fuzz_check_message(attn_last_error());
        if (!strstr(attn_last_error(), "fuzz.gguf")) abort();
        return 0;
    }
    for (size_t i = 0; i < attn_gguf_kv_count(g); i++) {
        const attn_gguf_kv *kv = attn_gguf_kv_at(g, i);
        if (!kv || attn_gguf_find(g, kv->key) != &kv->val) abort();
        check_getters(g, kv->key);
    }
    uint64_t base = attn_gguf_data_offset(g);
    if (attn_gguf_tensor_count(g) && base % attn_gguf_alignment(g)) abort();
    unsigned char *buf = NULL;
    for (size_t i = 0; i < attn_gguf_tensor_count(g); i++) {
        const attn_gguf_tensor *t = attn_gguf_tensor_at(g, i);
        if (!t || attn_gguf_find_tensor(g, t->name) != t) abort();
        /* offsets were validated: the data lies within the input */
        if (t->offset < base || t->offset > size || t->nbytes > size - t->offset) abort();
        uint64_t nb;
        if (!attn_gguf_nbytes(t->type, t->n_dims, t->ne, &nb) || nb != t->nbytes) abort();
        const void *p = attn_gguf_tensor_data(g, t);
        if (p != data + t->offset) abort();
        buf = realloc(buf, (size_t)t->nbytes + 1);
        if (!buf) abort();
        if (attn_gguf_read_tensor(g, t, buf) || memcmp(buf, p, (size_t)t->nbytes)) abort();
    }
    free(buf);
    attn_gguf_find(g, "");
    attn_gguf_find_tensor(g, "");
    attn_tok *tok;
    attn_tok_gguf_info info;
    if (attn_tok_from_gguf(g, &tok, &info)) {
        fuzz_check_message(attn_last_error());
    } else {
        int32_t *ids;
        size_t n;
        if (!attn_tok_encode_alloc(tok, TEXT, sizeof TEXT - 1, &ids, &n)) {
            char *text;
            size_t len;
            if (attn_tok_decode_alloc(tok, ids, n, 0, &text, &len))
                fuzz_check_message(attn_last_error());
            else
                attn_free(text);
            attn_free(ids);
        } else {
            fuzz_check_message(attn_last_error());
        }
        int32_t v = attn_tok_vocab_size(tok);
        int32_t some[4] = {0, v - 1, v / 2, info.bos_id < 0 ? 0 : info.bos_id};
        char *text;
        size_t len;
        if (!attn_tok_decode_alloc(tok, some, 4, ATTN_TOK_DECODE_KEEP_SPECIAL, &text, &len))
            attn_free(text);
        for (int k = ATTN_TOK_PAD; k <= ATTN_TOK_SEP; k++)
            if (attn_tok_special_id(tok, (attn_tok_special)k) >= v) abort();
        attn_tok_free(tok);
    }
    /* the decoder the file describes (attn_gpt_from_gguf: hyperparameters, tensor names, shapes,
     * types), then a few decoding steps on it. Contexts are capped here (the rotary tables and
     * the cache grow with them, not with the input). */
    const char *arch;
    char key[96];
    int64_t ctx = 0;
    bool small = !attn_gguf_get_str(g, "general.architecture", &arch, NULL) &&
                 snprintf(key, sizeof key, "%.40s.context_length", arch) > 0 &&
                 !attn_gguf_get_int(g, key, &ctx) && ctx <= 4096;
    attn_gpt_model *m = NULL;
    if (!small) {
        attn_gguf_close(g);
        return 0;
    }
    if (!strcmp(arch, "bert")) { /* the encoder (attn_bert_from_gguf), then a forward */
        attn_bert_model *b;
        if (attn_bert_from_gguf(g, &b)) {
            fuzz_check_message(attn_last_error());
        } else {
            attn_bert_state *st;
            const int V = b->cfg.vocab_size, T = b->cfg.max_position_embeddings < 3 ? 1 : 3;
            int32_t ids[3] = {0, V - 1, V / 2};
            if (!attn_bert_state_init(b, 1, T, &st)) {
                if (attn_bert_forward(b, st, 1, T, ids, NULL, NULL, NULL))
                    fuzz_check_message(attn_last_error());
                attn_bert_state_free(st);
            }
            attn_bert_model_free(b);
        }
        attn_gguf_close(g);
        return 0;
    }
    if (attn_gpt_from_gguf(g, &m)) {
        fuzz_check_message(attn_last_error());
        attn_gguf_close(g);
        return 0;
    }
    /* the model owns g now */
    attn_gpt_kv *kv;
    const int V = m->cfg.vocab_size, T = m->cfg.n_positions < 4 ? m->cfg.n_positions : 4;
    if (!attn_gpt_kv_init(m, 1, T, &kv)) {
        float *lg = malloc((size_t)V * sizeof(float));
        int32_t ids[4] = {0, V - 1, V / 2, 1 % V};
        if (!lg) abort();
        if (attn_gpt_decode(m, kv, 1, T > 1 ? T - 1 : 1, ids, lg, false))
            fuzz_check_message(attn_last_error());
        else if (T > 1 && attn_gpt_decode(m, kv, 1, 1, ids + 3, lg, false))
            fuzz_check_message(attn_last_error());
        free(lg);
        attn_gpt_kv_free(kv);
    } else {
        fuzz_check_message(attn_last_error());
    }
    attn_gpt_model_free(m);
    return 0;
}

/* fuzz_tokenizer.c — loading a tokenizer.json (attn_tok_load_reader on the input, from memory).
 * An accepted tokenizer must encode and decode a few fixed texts and ids without failing in any
 * way but a clean error, and survive a save + reload with the same ids. */
#include "fuzz.h"

#include "attn_tok.h"

static const char *const texts[] = {
    "Knowledge is power.", " x  y\t\n", "知识就是力量。", "<s> </s> <pad> [CLS] [SEP]", "",
    "naïve café ▁ 123 4567 !!! ??", "\xF0\x9F\x98\x80 emoji",
};
#define NTEXTS (sizeof texts / sizeof texts[0])

/* ids of every text (concatenated, -1 after each), or NULL on an encode error */
static int32_t *encode_all(const attn_tok *t, size_t *total) {
    size_t cap = 64, n = 0;
    int32_t *all = malloc(cap * sizeof *all);
    if (!all) abort();
    for (size_t i = 0; i < NTEXTS; i++) {
        int32_t *ids;
        size_t k;
        if (attn_tok_encode_alloc(t, texts[i], strlen(texts[i]), &ids, &k)) {
            fuzz_check_message(attn_last_error());
            free(all);
            return NULL;
        }
        for (size_t j = 0; j < k; j++)
            if (ids[j] < 0 || ids[j] >= attn_tok_vocab_size(t)) abort();
        while (n + k + 1 > cap) {
            cap *= 2;
            all = realloc(all, cap * sizeof *all);
            if (!all) abort();
        }
        memcpy(all + n, ids, k * sizeof *ids);
        n += k;
        all[n++] = -1;
        /* decode what was encoded: ids are in range, so only a clean error may happen */
        char *text;
        size_t len;
        if (attn_tok_decode_alloc(t, ids, k, 0, &text, &len) == ATTN_STATUS_OK) {
            if (text[len] != '\0') abort(); /* NUL-terminated */
            attn_free(text);
        } else {
            fuzz_check_message(attn_last_error());
        }
        attn_free(ids);
    }
    *total = n;
    return all;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_reader r;
    if (attn_reader_open_memory(data, size, "fuzz-tokenizer.json", &r)) abort();
    attn_tok *t;
    if (attn_tok_load_reader(r, &t)) {
        fuzz_check_message(attn_last_error());
        return 0;
    }
    int32_t V = attn_tok_vocab_size(t);
    if (V < 0) abort();
    for (int32_t id = -2; id < V + 2 && id < 4000; id++) {
        const char *s = attn_tok_id_to_token(t, id);
        if ((id < 0 || id >= V) && s) abort();
        if (s && attn_tok_token_to_id(t, s) < 0) abort();
        attn_tok_is_special(t, id);
    }
    for (int w = ATTN_TOK_PAD; w <= ATTN_TOK_EOS; w++) {
        int32_t id = attn_tok_special_id(t, (attn_tok_special)w);
        if (id < -1 || id >= V) abort();
    }
    attn_tok_model_type(t);
    size_t n1 = 0;
    int32_t *ids1 = encode_all(t, &n1);
    int32_t some[6] = {0, 1, V - 1, V / 2, V, -1};
    char *text;
    size_t len;
    for (int k = 1; k <= 6; k++)
        if (attn_tok_decode_alloc(t, some, (size_t)k, ATTN_TOK_DECODE_KEEP_SPECIAL, &text, &len) ==
            ATTN_STATUS_OK) {
            if (k >= 5) abort(); /* V and -1 are not ids */
            attn_free(text);
        } else {
            fuzz_check_message(attn_last_error());
        }
    /* save and reload: the same ids */
    char path[600];
    snprintf(path, sizeof path, "%s/tokenizer.json", fuzz_scratch());
    if (attn_tok_save(t, path) == ATTN_STATUS_OK) {
        attn_tok *t2;
        if (attn_tok_load(path, &t2)) {
            fprintf(stderr, "fuzz: a saved tokenizer does not load: %s\n", attn_last_error());
            abort();
        }
        if (attn_tok_vocab_size(t2) != V) abort();
        size_t n2 = 0;
        int32_t *ids2 = encode_all(t2, &n2);
        if (!ids1 != !ids2 || n1 != n2 || (ids1 && memcmp(ids1, ids2, n1 * sizeof *ids1))) {
            fprintf(stderr, "fuzz: a saved and reloaded tokenizer encodes differently\n");
            abort();
        }
        free(ids2);
        attn_tok_free(t2);
    } else {
        fuzz_check_message(attn_last_error());
    }
    free(ids1);
    attn_tok_free(t);
    return 0;
}

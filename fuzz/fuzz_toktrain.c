/* fuzz_toktrain.c — training a BPE tokenizer (attn_tok_train_bpe) on the lines of the input,
 * arbitrary bytes: invalid UTF-8 must be a clean error naming the line; a trained tokenizer must
 * encode every valid line of its training text to ids in range and decode them back (the
 * trainer's configuration round-trips every UTF-8 text without U+2581 or a special token), and
 * survive a save and reload. The first byte picks vocabulary size, frequencies, byte fallback. */
#include "fuzz.h"

#include "attn_tok.h"

static bool has(const char *s, size_t n, const char *what) {
    size_t w = strlen(what);
    for (size_t i = 0; i + w <= n; i++)
        if (!memcmp(s + i, what, w)) return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned opt = data[0];
    const char *lines[256];
    size_t lens[256], k = 0;
    const uint8_t *p = data + 1, *end = data + size;
    while (p < end && k < 256) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        const uint8_t *e = nl ? nl : end;
        lines[k] = (const char *)p, lens[k++] = (size_t)(e - p);
        p = nl ? nl + 1 : end;
    }
    attn_tok_train_params prm = attn_tok_train_default_params();
    prm.byte_fallback = !(opt & 1);
    prm.vocab_size = (prm.byte_fallback ? 270 : 8) + (int32_t)(opt >> 1 & 63);
    prm.min_frequency = 1 + (int32_t)(opt >> 7);
    prm.limit_alphabet = opt & 0x40 ? 20 : 0;
    attn_tok *t;
    if (attn_tok_train_bpe(&prm, lines, lens, k, &t)) {
        fuzz_check_message(attn_last_error());
        return 0;
    }
    int32_t V = attn_tok_vocab_size(t);
    if (V < 1 || V > prm.vocab_size) abort();
    for (size_t i = 0; i < k; i++) {
        int32_t *ids;
        size_t n;
        if (attn_tok_encode_alloc(t, lines[i], lens[i], &ids, &n)) {
            fprintf(stderr, "fuzz_toktrain: a training line does not encode: %s\n",
                    attn_last_error());
            abort();
        }
        for (size_t j = 0; j < n; j++)
            if (ids[j] < 0 || ids[j] >= V) abort();
        char *text;
        size_t len;
        if (attn_tok_decode_alloc(t, ids, n, ATTN_TOK_DECODE_KEEP_SPECIAL, &text, &len)) abort();
        /* with byte fallback every character is representable */
        if (prm.byte_fallback && !has(lines[i], lens[i], "\xE2\x96\x81") &&
            !has(lines[i], lens[i], "<") && (len != lens[i] || memcmp(text, lines[i], len))) {
            fprintf(stderr, "fuzz_toktrain: line %zu does not decode back to itself\n", i);
            abort();
        }
        attn_free(text);
        attn_free(ids);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/tokenizer.json", fuzz_scratch());
    if (attn_tok_save(t, path)) abort();
    attn_tok *t2;
    if (attn_tok_load(path, &t2)) {
        /* A trained tokenizer must reload (fuzz/regress/toktrain/nul-in-vocab once broke this:
         * NUL bytes are now refused by the trainer). */
        fprintf(stderr, "fuzz_toktrain: a trained tokenizer does not reload: %s\n",
                attn_last_error());
        abort();
    }
    if (attn_tok_vocab_size(t2) != V) abort();
    attn_tok_free(t2);
    attn_tok_free(t);
    return 0;
}

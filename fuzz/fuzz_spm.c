/* fuzz_spm.c — a Marian tokenizer from memory (attn_mt_tok_load_marian_mem): the input is
 * source.spm, target.spm, vocab.json, target_vocab.json and tokenizer_config.json split at
 * FUZZ_SEP (missing parts are absent files; an empty 4th / 5th part is no file). The .spm parts go
 * through SentencePiece's own parser (libsentencepiece, via src/tok/spm_shim.cc). An accepted
 * tokenizer must encode fixed texts on both sides and decode ids of the target vocabulary
 * (in range: only clean errors) without failing in any other way. */
#include "fuzz.h"

#include "attn_tok.h"

static const char *const texts[] = {
    "Knowledge is power.", " x  y\t\n", "知识就是力量。", "</s> <unk> <pad>", "",
    ">>fra<< bonjour >>x<<", "ＡＢ ﬁ ① \xe3\x80\x80 naïve", "\xF0\x9F\x98\x80 emoji 12345",
};
#define NTEXTS (sizeof texts / sizeof texts[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[5];
    size_t len[5];
    int k = fuzz_split(data, size, 5, part, len);
    attn_mt_tok *t;
    attn_status st = attn_mt_tok_load_marian_mem(
        part[0], len[0], part[1], len[1], (const char *)part[2], len[2],
        k > 3 && len[3] ? (const char *)part[3] : NULL, k > 3 ? len[3] : 0,
        k > 4 && len[4] ? (const char *)part[4] : NULL, k > 4 ? len[4] : 0, &t);
    if (st) {
        fuzz_check_message(attn_last_error());
        return 0;
    }
    int32_t Vt = attn_mt_tok_vocab_size(t, true), Vs = attn_mt_tok_vocab_size(t, false);
    for (size_t i = 0; i < NTEXTS; i++) {
        for (int side = 0; side < 2; side++) {
            int32_t *ids;
            size_t n;
            st = side ? attn_mt_tok_encode_target(t, NULL, texts[i], strlen(texts[i]), &ids, &n)
                      : attn_mt_tok_encode_source(t, NULL, texts[i], strlen(texts[i]), &ids, &n);
            if (st) {
                fuzz_check_message(attn_last_error());
                continue;
            }
            for (size_t j = 0; j < n; j++)
                if (ids[j] < 0 || ids[j] >= (side ? (Vt > Vs ? Vt : Vs) : Vs)) abort();
            if (side) {
                for (size_t j = 0; j < n; j++)
                    if (ids[j] >= Vt) ids[j] = Vt - 1; /* special ids come from vocab.json */
                for (unsigned fl = 0; fl < 2; fl++) {
                    char *text;
                    size_t tl;
                    if (attn_mt_tok_decode(t, ids, n, fl, &text, &tl) == ATTN_STATUS_OK) {
                        if (text[tl] != '\0') abort();
                        attn_free(text);
                    } else {
                        fuzz_check_message(attn_last_error());
                    }
                }
            }
            attn_free(ids);
        }
    }
    /* every id of the target vocabulary, a few at a time */
    for (int32_t a = 0; a < Vt && a < 4096; a += 7) {
        int32_t ids[7];
        size_t n = 0;
        for (int32_t b = a; b < Vt && b < a + 7; b++) ids[n++] = b;
        char *text;
        size_t tl;
        if (attn_mt_tok_decode(t, ids, n, 0, &text, &tl) == ATTN_STATUS_OK) attn_free(text);
        else fuzz_check_message(attn_last_error());
    }
    int32_t id;
    if (attn_mt_tok_lang_id(t, ">>fra<<", &id)) fuzz_check_message(attn_last_error());
    attn_mt_tok_free(t);
    return 0;
}

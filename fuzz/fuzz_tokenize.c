/* fuzz_tokenize.c — tokenizers at work on arbitrary input, with three fixed tokenizers built at
 * start-up: a SentencePiece-style BPE with byte fallback (attn_tok_train_bpe on a built-in text),
 * a GPT-2-style byte-level BPE (attn_tok_load_vocab_merges on a small vocab.json and merges.txt
 * written here) and a Llama-3-style one (Digits + Split(Regex) + ByteLevel, added tokens with the
 * single_word / lstrip / rstrip / normalized flags: a tokenizer.json written here). The first
 * input byte picks the work:
 *   bit 0     0: encode the rest as text        1: decode the rest as little-endian int32 ids
 *   bit 1     encode: first into a too-small id buffer (must ask for the size)
 *   bit 2     which of the first two tokenizers
 *   bit 3     decode flag ATTN_TOK_DECODE_KEEP_SPECIAL
 *   bit 4     the Llama-3-style tokenizer instead
 * Encode: invalid UTF-8 must be a clean INVALID_ARGUMENT; valid text must encode to ids in range,
 * and decode back to itself (byte-level always; the byte-fallback BPE when the text has no U+2581
 * and no special-token string; the Llama-3-style one up to whitespace, which lstrip / rstrip
 * tokens take in, when decoded with special tokens kept). Decode: succeeds exactly when every id
 * is in range. Training on arbitrary text is fuzz_toktrain.c. */
#include "fuzz.h"

#include "attn_tok.h"

#include <utf8proc.h>

static attn_tok *tok[3];

static const char corpus[] =
    "Knowledge is power.\nThe quick brown fox jumps over the lazy dog.\n"
    "I think, therefore I am.\nWhere there is a will, there is a way.\n"
    "知识就是力量。\n我思故我在。\n有志者事竟成。\nthe the the then there these those\n"
    "Time flies like an arrow; fruit flies like a banana.\n123 4567 89.0 -1e9\n";

/* Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF); NUL is allowed. The
 * oracle is utf8proc's decoder, not the library's own check (attn_tok_utf8_check), so that a bug
 * there cannot hide itself: for every string of up to 3 bytes and every 4-byte one led by
 * 0xF0..0xFF it agrees with a byte-range table of RFC 3629 (checked exhaustively). */
static bool valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

static void put_utf8(char **p, unsigned cp) {
    unsigned char *o = (unsigned char *)*p;
    if (cp < 0x80) *o++ = (unsigned char)cp;
    else if (cp < 0x800) *o++ = (unsigned char)(0xC0 | cp >> 6), *o++ = (unsigned char)(0x80 | (cp & 63));
    else *o++ = (unsigned char)(0xE0 | cp >> 12), *o++ = (unsigned char)(0x80 | ((cp >> 6) & 63)),
         *o++ = (unsigned char)(0x80 | (cp & 63));
    *p = (char *)o;
}

/* GPT-2's byte -> character table (bytes_to_unicode). */
static unsigned byte_char(int b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (unsigned)b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) n++;
    return 256u + (unsigned)n;
}

static attn_tok *make_byte_level(void) {
    static char vocab[16384], merges[512];
    char *p = vocab;
    *p++ = '{';
    int id = 0;
    for (int b = 0; b < 256; b++) {
        *p++ = '"';
        if (b == '"' || b == '\\') *p++ = '\\';
        put_utf8(&p, byte_char(b));
        p += sprintf(p, "\": %d, ", id++);
    }
    static const char *const merged[] = {"\xC4\xA0t", "he", "\xC4\xA0the", "in", "\xC4\xA0" "a",
                                         "er", "\xC4\xA0" "an"};
    for (size_t i = 0; i < sizeof merged / sizeof merged[0]; i++)
        p += sprintf(p, "\"%s\": %d, ", merged[i], id++);
    p += sprintf(p, "\"<|endoftext|>\": %d}", id++);
    snprintf(merges, sizeof merges,
             "#version: 0.2\n\xC4\xA0 t\nh e\n\xC4\xA0t he\ni n\n\xC4\xA0 a\ne r\n\xC4\xA0" "a n\n");
    const char *vp = fuzz_file("vocab.json", vocab, strlen(vocab));
    char vpath[600];
    snprintf(vpath, sizeof vpath, "%s", vp);
    const char *mp = fuzz_file("merges.txt", merges, strlen(merges));
    attn_tok *t;
    if (attn_tok_load_vocab_merges(vpath, mp, &t)) {
        fprintf(stderr, "fuzz_tokenize: %s\n", attn_last_error());
        abort();
    }
    return t;
}

/* Llama 3's structure over the same byte alphabet, with added tokens carrying every flag. */
static attn_tok *make_llama_style(void) {
    static char js[32768];
    char *p = js;
    p += sprintf(p, "{\"added_tokens\": ["
                    "{\"id\": 300, \"content\": \"<|eot_id|>\", \"lstrip\": true, \"rstrip\": true,"
                    " \"normalized\": false, \"special\": true},"
                    " {\"id\": 301, \"content\": \"ab\", \"single_word\": true, \"normalized\": true},"
                    " {\"id\": 302, \"content\": \" sep\", \"rstrip\": true, \"normalized\": false},"
                    " {\"id\": 303, \"content\": \"\\n\\n\", \"lstrip\": true, \"normalized\": false},"
                    " {\"id\": 304, \"content\": \"<s>\", \"single_word\": true, \"lstrip\": true,"
                    " \"normalized\": true, \"special\": true}],"
                    " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
                    "{\"type\": \"Digits\", \"individual_digits\": true},"
                    " {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|"
                    "[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}"
                    "\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
                    " \"behavior\": \"Isolated\", \"invert\": false},"
                    " {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]},"
                    " \"post_processor\": {\"type\": \"ByteLevel\"},"
                    " \"decoder\": {\"type\": \"ByteLevel\"},"
                    " \"model\": {\"type\": \"BPE\", \"ignore_merges\": true, \"vocab\": {");
    for (int b = 0; b < 256; b++) {
        *p++ = '"';
        if (b == '"' || b == '\\') *p++ = '\\';
        put_utf8(&p, byte_char(b));
        p += sprintf(p, "\": %d, ", b);
    }
    p += sprintf(p, "\"\xC4\xA0t\": 256, \"he\": 257, \"\xC4\xA0the\": 258}, \"merges\": "
                    "[\"\xC4\xA0 t\", \"h e\", \"\xC4\xA0t he\"]}}");
    attn_reader r;
    attn_tok *t;
    if (attn_reader_open_memory(js, (size_t)(p - js), "llama-style.json", &r) ||
        attn_tok_load_reader(r, &t)) {
        fprintf(stderr, "fuzz_tokenize: %s\n", attn_last_error());
        abort();
    }
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *lines[64];
    size_t n = 0;
    static char buf[sizeof corpus];
    memcpy(buf, corpus, sizeof corpus);
    for (char *s = buf, *nl; (nl = strchr(s, '\n')); s = nl + 1) *nl = 0, lines[n++] = s;
    attn_tok_train_params p = attn_tok_train_default_params();
    p.vocab_size = 400;
    p.min_frequency = 1;
    if (attn_tok_train_bpe(&p, lines, NULL, n, &tok[0])) {
        fprintf(stderr, "fuzz_tokenize: %s\n", attn_last_error());
        abort();
    }
    tok[1] = make_byte_level();
    tok[2] = make_llama_style();
    return 0;
}

static bool contains(const uint8_t *s, size_t n, const char *what) {
    size_t w = strlen(what);
    for (size_t i = 0; i + w <= n; i++)
        if (!memcmp(s + i, what, w)) return true;
    return false;
}

/* s[0..n) without Rust's White_Space characters (valid UTF-8 assumed), into out. */
static size_t strip_space(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t l = utf8proc_iterate((const uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (l <= 0) l = 1, cp = 0xFFFD;
        bool sp = (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
                  (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
                  cp == 0x202F || cp == 0x205F || cp == 0x3000;
        if (!sp) memcpy(out + k, s + i, (size_t)l), k += (size_t)l;
        i += (size_t)l;
    }
    return k;
}

static void do_encode(const attn_tok *t, int which, const uint8_t *s, size_t n, unsigned flags,
                      bool small_first) {
    bool valid = valid_utf8(s, n);
    int32_t *ids = NULL;
    size_t k = 0;
    if (small_first && valid) {
        int32_t few[2];
        size_t need = 0;
        attn_status st = attn_tok_encode(t, (const char *)s, n, few, 2, &need);
        if (st && (st != ATTN_STATUS_INVALID_ARGUMENT || need <= 2)) abort();
        if (!st && need > 2) abort();
    }
    attn_status st = attn_tok_encode_alloc(t, (const char *)s, n, &ids, &k);
    if (!valid) {
        if (st != ATTN_STATUS_INVALID_ARGUMENT || !strstr(attn_last_error(), "UTF-8")) abort();
        fuzz_check_message(attn_last_error());
        return;
    }
    if (st) {
        fprintf(stderr, "fuzz_tokenize: valid text failed to encode: %s\n", attn_last_error());
        abort();
    }
    int32_t V = attn_tok_vocab_size(t);
    for (size_t i = 0; i < k; i++)
        if (ids[i] < 0 || ids[i] >= V) abort();
    char *text;
    size_t len;
    if (attn_tok_decode_alloc(t, ids, k, flags, &text, &len)) {
        fprintf(stderr, "fuzz_tokenize: encoded ids failed to decode: %s\n", attn_last_error());
        abort();
    }
    if (which == 2) { /* lstrip / rstrip tokens take whitespace in: equal without it */
        if (flags) {
            char *a = malloc(n + 1), *b = malloc(len + 1);
            if (!a || !b) abort();
            size_t an = strip_space((const char *)s, n, a), bn = strip_space(text, len, b);
            if (an != bn || memcmp(a, b, an)) {
                fprintf(stderr, "fuzz_tokenize: tokenizer 2: decode(encode(x)) differs from x "
                                "beyond whitespace\n");
                abort();
            }
            free(a);
            free(b);
        }
        attn_free(text);
        attn_free(ids);
        return;
    }
    bool exact = which == 1 ? (flags || !contains(s, n, "<|endoftext|>"))
                            : !contains(s, n, "\xE2\x96\x81") && !contains(s, n, "<") &&
                                  !memchr(s, 0, n);
    if (exact && (len != n || memcmp(text, s, n))) {
        fprintf(stderr, "fuzz_tokenize: tokenizer %d: decode(encode(x)) != x for %zu bytes\n",
                which, n);
        abort();
    }
    attn_free(text);
    attn_free(ids);
}

static void do_decode(const attn_tok *t, const uint8_t *s, size_t n, unsigned flags) {
    size_t k = n / 4;
    int32_t *ids = malloc((k ? k : 1) * sizeof *ids);
    if (!ids) abort();
    bool in_range = true;
    int32_t V = attn_tok_vocab_size(t);
    for (size_t i = 0; i < k; i++) {
        uint32_t u = (uint32_t)s[4 * i] | (uint32_t)s[4 * i + 1] << 8 |
                     (uint32_t)s[4 * i + 2] << 16 | (uint32_t)s[4 * i + 3] << 24;
        /* mostly small ids, so decoding gets exercised, and now and then anything */
        ids[i] = (u >> 31) ? (int32_t)u : (int32_t)(u % (uint32_t)(V + 3));
        /* in range: an id the vocabulary holds (a vocabulary may leave ids unassigned below its
         * size, e.g. added tokens past a gap; decoding those is a clean error too) */
        if (ids[i] < 0 || ids[i] >= V || !attn_tok_id_to_token(t, ids[i])) in_range = false;
    }
    char *text;
    size_t len;
    attn_status st = attn_tok_decode_alloc(t, ids, k, flags, &text, &len);
    if (!st != in_range) {
        fprintf(stderr, "fuzz_tokenize: decode of %zu ids (in range: %d) gave status %d: %s\n", k,
                (int)in_range, (int)st, st ? attn_last_error() : "");
        abort();
    }
    if (st) {
        fuzz_check_message(attn_last_error());
    } else {
        if (text[len]) abort();
        attn_free(text);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned which = data[0] & 16 ? 2 : (data[0] >> 2) & 1;
    unsigned flags = data[0] & 8 ? ATTN_TOK_DECODE_KEEP_SPECIAL : 0;
    const uint8_t *s = data + 1;
    size_t n = size - 1;
    if (data[0] & 1) do_decode(tok[which], s, n, flags);
    else do_encode(tok[which], (int)which, s, n, flags, (data[0] & 2) != 0);
    return 0;
}

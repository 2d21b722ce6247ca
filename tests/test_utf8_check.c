/* test_utf8_check.c — attn_tok_utf8_check (include/attn_tok.h), the one UTF-8 rule the CLI's
 * input checks, the corpus reader and the tokenizer share: against utf8proc's decoder as an
 * independent oracle on every string of 1 to 3 bytes and on 4-byte strings (every lead 0xF0..0xF5
 * and second byte, boundary values after), plus the offsets it reports and the NUL-byte switch. Exact: no tolerance. */
#include "tu.h"

#include "attn_tok.h"

#include <utf8proc.h>

/* utf8proc's verdict: offset of the first sequence it refuses, or n. NUL passes. */
static size_t oracle(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return i;
        i += (size_t)k;
    }
    return n;
}

static long g_mismatches, g_valid;

static void check_one(const unsigned char *b, size_t len) {
    size_t want = oracle(b, len);
    size_t got = attn_tok_utf8_check((const char *)b, len, true);
    g_valid += got == len;
    if (got != want && g_mismatches++ < 5)
        print_error("len %zu bytes %02x %02x %02x %02x: got %zu, utf8proc %zu\n", len, b[0],
                    len > 1 ? b[1] : 0, len > 2 ? b[2] : 0, len > 3 ? b[3] : 0, got, want);
}

static void test_exhaustive(void **state) {
    (void)state;
    unsigned char b[4];
    g_mismatches = g_valid = 0;
    for (size_t len = 1; len <= 3; len++) {
        uint32_t total = (uint32_t)1 << (8 * len);
        for (uint32_t x = 0; x < total; x++) {
            for (size_t j = 0; j < len; j++) b[j] = (unsigned char)(x >> (8 * (len - 1 - j)));
            check_one(b, len);
        }
    }
    /* 4 bytes: every lead 0xF0..0xF5 and second byte, the boundary values for the last two */
    static const unsigned char edge[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90,
                                         0x9F, 0xA0, 0xBF, 0xC0, 0xF4, 0xFF};
    const size_t ne = sizeof edge;
    for (unsigned lead = 0xF0; lead <= 0xF5; lead++)
        for (unsigned c1 = 0; c1 < 256; c1++)
            for (size_t i = 0; i < ne; i++)
                for (size_t j = 0; j < ne; j++) {
                    b[0] = (unsigned char)lead, b[1] = (unsigned char)c1;
                    b[2] = edge[i], b[3] = edge[j];
                    check_one(b, 4);
                }
    assert_int_equal(g_mismatches, 0);
    /* ASCII (incl. NUL) alone gives 128 + 128^2 + 128^3 valid strings: more means multi-byte
     * sequences were accepted too */
    assert_true(g_valid > 128 + 128 * 128 + 128 * 128 * 128);
}

static void test_offsets_and_nul(void **state) {
    (void)state;
    const char ok[] = "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80z"; /* a é 中 😀 z */
    size_t n = sizeof ok - 1;
    assert_int_equal(attn_tok_utf8_check(ok, n, false), n);
    assert_int_equal(attn_tok_utf8_check(ok, 0, false), 0);
    /* a truncated sequence reports its first byte */
    assert_int_equal(attn_tok_utf8_check(ok, 5, false), 3);
    assert_int_equal(attn_tok_utf8_check("ab\xed\xa0\x80", 5, false), 2);  /* surrogate */
    assert_int_equal(attn_tok_utf8_check("\xc0\xaf", 2, false), 0);        /* overlong */
    assert_int_equal(attn_tok_utf8_check("xy\xf4\x90\x80\x80", 6, false), 2); /* > U+10FFFF */
    assert_int_equal(attn_tok_utf8_check("x\x80", 2, true), 1);           /* lone continuation */
    /* NUL: refused unless allowed; a NUL inside a sequence is invalid UTF-8 either way */
    assert_int_equal(attn_tok_utf8_check("ab\0c", 4, false), 2);
    assert_int_equal(attn_tok_utf8_check("ab\0c", 4, true), 4);
    assert_int_equal(attn_tok_utf8_check("a\xc3\0", 3, true), 1);
    assert_int_equal(attn_tok_utf8_check(NULL, 3, false), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exhaustive),
        cmocka_unit_test(test_offsets_and_nul),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

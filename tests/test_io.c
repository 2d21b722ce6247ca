/* test_io.c — the I/O layer: readers, safetensors read/write, .npy save/load, Python interop and
 * a bad-input suite. Every bad input must fail with the right status and a one-line message that
 * names the file and the problem (checked by substring); run under ASan/UBSan for memory safety.
 *
 * Interop: tools/ref_io.py (run by tests/run.sh into $ATTN_REF_DIR) writes files with numpy and
 * tools/stfile.py that are read here; files written here are compared byte for byte with numpy's
 * output (.npy) and, when the project venv exists, verified by tools/check_io.py (.safetensors).
 * Scratch files go to a fresh mkdtemp directory that is removed at the end. */
#include "attn_io.h"
#include "tu.h"

#include "../src/io/io-impl.h" /* attn_npy_load_f32_reader, for the mutation test */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void write_file(const char *path, const void *buf, size_t n) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (n) assert_int_equal(fwrite(buf, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)sz, fp), (size_t)sz);
    fclose(fp);
    *n = (size_t)sz;
    return b;
}

/* Scratch-directory entries whose name contains ".tmp." (left-over temporaries). */
static int count_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- in-memory safetensors builder ---- */

/* An exact-size heap buffer (so ASan sees any overread): 8-byte length hlen, the header text,
 * then dn data bytes (zeros if data is NULL). */
static unsigned char *st_blob(const char *json, uint64_t hlen, const void *data, size_t dn,
                              size_t *n) {
    size_t jl = strlen(json);
    *n = 8 + jl + dn;
    unsigned char *b = malloc(*n ? *n : 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, json, jl);
    if (data) memcpy(b + 8 + jl, data, dn);
    else memset(b + 8 + jl, 0, dn);
    return b;
}

/* Open bytes through the memory reader (name "bad.safetensors") and, written to a scratch file,
 * through attn_st_open; both must fail with `want` and a message naming the file and `sub`. */
static void bad_bytes(const unsigned char *b, size_t n, attn_status want, const char *sub,
                      const char *sub2) {
    attn_reader r;
    attn_st_file *f = (attn_st_file *)1;
    assert_int_equal(attn_reader_open_memory(b, n, "bad.safetensors", &r), ATTN_STATUS_OK);
    tu_expect_fail3(attn_st_open_reader(r, &f), want, "bad.safetensors", sub, sub2);
    assert_null(f);
    const char *p = tu_tmp("bad.safetensors");
    write_file(p, b, n);
    f = (attn_st_file *)1;
    tu_expect_fail3(attn_st_open(p, &f), want, p, sub, sub2);
    assert_null(f);
}

static void bad_st(const char *json, size_t dn, attn_status want, const char *sub,
                   const char *sub2) {
    size_t n;
    unsigned char *b = st_blob(json, strlen(json), NULL, dn, &n);
    bad_bytes(b, n, want, sub, sub2);
    free(b);
}

/* ---- readers ---- */

static void test_reader_memory(void **state) {
    (void)state;
    const char src[10] = "0123456789";
    attn_reader r;
    assert_int_equal(attn_reader_open_memory(src, 10, "buf", &r), ATTN_STATUS_OK);
    assert_int_equal(r.size, 10);
    assert_string_equal(r.name, "buf");
    char d[11] = {0};
    assert_int_equal(r.read(r.ctx, 2, d, 8), ATTN_STATUS_OK);
    assert_memory_equal(d, "23456789", 8);
    assert_int_equal(r.read(r.ctx, 10, d, 0), ATTN_STATUS_OK);
    tu_expect_fail3(r.read(r.ctx, 3, d, 8), ATTN_STATUS_FORMAT, "buf", "past the end", NULL);
    tu_expect_fail3(r.read(r.ctx, 11, d, 0), ATTN_STATUS_FORMAT, "buf", NULL, NULL);
    tu_expect_fail3(r.read(r.ctx, UINT64_MAX, d, 2), ATTN_STATUS_FORMAT, "buf", NULL, NULL);
    attn_reader_close(&r);
    attn_reader_close(&r); /* harmless */
    assert_int_equal(attn_reader_open_memory(src, 4, NULL, &r), ATTN_STATUS_OK);
    assert_string_equal(r.name, "<memory>");
    attn_reader_close(&r);
    assert_int_equal(attn_reader_open_memory(NULL, 0, "empty", &r), ATTN_STATUS_OK);
    assert_int_equal(r.size, 0);
    attn_reader_close(&r);
}

static void test_reader_file(void **state) {
    (void)state;
    const char *p = tu_tmp("reader.bin");
    write_file(p, "abcdefgh", 8);
    attn_reader r;
    assert_int_equal(attn_reader_open_file(p, &r), ATTN_STATUS_OK);
    assert_int_equal(r.size, 8);
    assert_string_equal(r.name, p);
    char d[8];
    assert_int_equal(r.read(r.ctx, 5, d, 3), ATTN_STATUS_OK);
    assert_memory_equal(d, "fgh", 3);
    tu_expect_fail3(r.read(r.ctx, 6, d, 3), ATTN_STATUS_FORMAT, p, "past the end", NULL);
    attn_reader_close(&r);
    tu_expect_fail3(attn_reader_open_file(tu_tmp("nonexistent.bin"), &r), ATTN_STATUS_IO,
                "nonexistent.bin", "No such file", NULL);
    tu_expect_fail3(attn_reader_open_file(tu_dir, &r), ATTN_STATUS_IO, tu_dir, "directory", NULL);
}

/* ---- safetensors round trip ---- */

static const uint16_t k_f16_bits[] = {0x0000, 0x8000, 0x3c00, 0xc000, 0x7bff, 0x0001,
                                      0x03ff, 0x0400, 0x7c00, 0xfc00, 0x7e00, 0x3555};
static const uint32_t k_f16_want[] = {0x00000000, 0x80000000, 0x3f800000, 0xc0000000,
                                      0x477fe000, 0x33800000, 0x387fc000, 0x38800000,
                                      0x7f800000, 0xff800000, 0x7fc00000, 0x3eaaa000};
static const uint16_t k_bf16_bits[] = {0x0000, 0x8000, 0x3f80, 0x4049, 0x0001,
                                       0x7f80, 0xff80, 0x7fc0, 0xc2f7};
static const uint32_t k_bf16_want[] = {0x00000000, 0x80000000, 0x3f800000, 0x40490000, 0x00010000,
                                       0x7f800000, 0xff800000, 0x7fc00000, 0xc2f70000};

static void check_bits(const char *what, const float *got, const uint32_t *want, int n) {
    for (int i = 0; i < n; i++)
        if (f32_bits(got[i]) != want[i])
            fail_msg("%s[%d]: got bits 0x%08x (%g), expected 0x%08x", what, i, f32_bits(got[i]),
                     (double)got[i], want[i]);
}

static void test_st_roundtrip(void **state) {
    (void)state;
    float f32[12];
    for (int i = 0; i < 12; i++) f32[i] = (float)i * 0.25f - 1.0f;
    double f64[5] = {0.1, -1e300, 1e-320, 0x1.fffffefp127, 0x1.ffffffp127};
    int64_t i64[4] = {0, -1, INT32_MAX, INT32_MIN};
    int32_t i32[3] = {7, -8, INT32_MAX};
    int16_t i16[2] = {-32768, 32767};
    int8_t i8[3] = {-128, 0, 127};
    uint8_t u8[2] = {0, 255};
    uint8_t bl[3] = {1, 0, 1};
    float scalar = 3.5f;
    attn_st_entry e[] = {
        {"f32", ATTN_DTYPE_F32, 2, {3, 4}, f32},
        {"f16", ATTN_DTYPE_F16, 1, {12}, k_f16_bits},
        {"bf16", ATTN_DTYPE_BF16, 2, {3, 3}, k_bf16_bits},
        {"f64", ATTN_DTYPE_F64, 1, {5}, f64},
        {"i64", ATTN_DTYPE_I64, 2, {2, 2}, i64},
        {"i32", ATTN_DTYPE_I32, 1, {3}, i32},
        {"i16", ATTN_DTYPE_I16, 1, {2}, i16},
        {"i8", ATTN_DTYPE_I8, 1, {3}, i8},
        {"u8", ATTN_DTYPE_U8, 1, {2}, u8},
        {"bool", ATTN_DTYPE_BOOL, 1, {3}, bl},
        {"scalar", ATTN_DTYPE_F32, 0, {0}, &scalar},
        {"empty", ATTN_DTYPE_F32, 2, {0, 5}, NULL},
        {"h.0.attn.c_attn.weight \"quoted\" ünï", ATTN_DTYPE_F32, 1, {1}, &scalar},
    };
    const int n = (int)(sizeof e / sizeof e[0]);
    const char *meta[] = {"format", "pt", "note", "a \"quoted\"\nvalue", NULL};
    const char *p = tu_tmp("rt.safetensors");
    assert_int_equal(attn_st_save(p, e, n, meta), ATTN_STATUS_OK);
    assert_int_equal(count_temporaries(tu_dir), 0);

    /* header: 8-byte LE length, a multiple of 8, JSON padded with spaces */
    size_t fn;
    unsigned char *raw = read_all(p, &fn);
    assert_non_null(raw);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)raw[i] << (8 * i);
    assert_int_equal(hl % 8, 0);
    assert_true(8 + hl <= fn);
    assert_int_equal(raw[8], '{');

    /* both readers */
    for (int pass = 0; pass < 2; pass++) {
        attn_st_file *f;
        if (pass == 0) assert_int_equal(attn_st_open(p, &f), ATTN_STATUS_OK);
        else {
            attn_reader r;
            assert_int_equal(attn_reader_open_memory(raw, fn, "rt-mem", &r), ATTN_STATUS_OK);
            assert_int_equal(attn_st_open_reader(r, &f), ATTN_STATUS_OK);
        }
        assert_int_equal(attn_st_count(f), n);
        uint64_t end = 8 + hl;
        for (int i = 0; i < n; i++) {
            const attn_st_tensor *t = attn_st_tensor_at(f, i);
            assert_non_null(t);
            assert_string_equal(t->name, e[i].name); /* file order */
            assert_ptr_equal(attn_st_find(f, e[i].name), t);
            assert_int_equal(t->dtype, e[i].dtype);
            assert_int_equal(t->ndim, e[i].ndim);
            size_t numel = 1;
            for (int d = 0; d < t->ndim; d++) {
                assert_int_equal(t->shape[d], e[i].shape[d]);
                numel *= (size_t)e[i].shape[d];
            }
            assert_int_equal(t->numel, numel);
            assert_int_equal(t->nbytes, numel * attn_dtype_size(e[i].dtype));
            assert_int_equal(t->offset, end); /* contiguous, absolute */
            end += t->nbytes;
            assert_memory_equal(raw + t->offset, e[i].data ? e[i].data : "", t->nbytes);
        }
        assert_int_equal(end, fn);
        assert_null(attn_st_tensor_at(f, n));
        assert_null(attn_st_tensor_at(f, -1));
        assert_null(attn_st_find(f, "nope"));
        assert_string_equal(attn_st_metadata(f, "format"), "pt");
        assert_string_equal(attn_st_metadata(f, "note"), "a \"quoted\"\nvalue");
        assert_null(attn_st_metadata(f, "absent"));

        float got[12];
        int64_t sh[2] = {3, 4};
        assert_int_equal(attn_st_read_f32(f, "f32", 2, sh, got), ATTN_STATUS_OK);
        assert_memory_equal(got, f32, sizeof f32);
        assert_int_equal(attn_st_read_f32(f, "f16", -1, NULL, got), ATTN_STATUS_OK);
        check_bits("f16", got, k_f16_want, 12);
        assert_int_equal(attn_st_read_f32(f, "bf16", -1, NULL, got), ATTN_STATUS_OK);
        check_bits("bf16", got, k_bf16_want, 9);
        assert_int_equal(attn_st_read_f32(f, "f64", -1, NULL, got), ATTN_STATUS_OK);
        assert_true(got[0] == 0.1f);
        assert_true(isinf(got[1]) && got[1] < 0);
        assert_true(got[2] == 0.0f);
        assert_true(got[3] == 0x1.fffffep127f);
        assert_true(isinf(got[4]) && got[4] > 0);
        assert_int_equal(attn_st_read_f32(f, "scalar", 0, NULL, got), ATTN_STATUS_OK);
        assert_true(got[0] == 3.5f);

        float *pf;
        const attn_st_tensor *t;
        assert_int_equal(attn_st_load_f32(f, "bf16", &pf, &t), ATTN_STATUS_OK);
        assert_string_equal(t->name, "bf16");
        check_bits("bf16 load", pf, k_bf16_want, 9);
        attn_free(pf);
        assert_int_equal(attn_st_load_f32(f, "empty", &pf, NULL), ATTN_STATUS_OK);
        assert_non_null(pf);
        attn_free(pf);

        int32_t *pi;
        assert_int_equal(attn_st_load_i32(f, "i64", &pi, &t), ATTN_STATUS_OK);
        assert_int_equal(t->dtype, ATTN_DTYPE_I64);
        for (int i = 0; i < 4; i++) assert_int_equal(pi[i], (int32_t)i64[i]);
        attn_free(pi);
        const struct {
            const char *name;
            int n;
            int32_t v[3];
        } ints[] = {{"i32", 3, {7, -8, INT32_MAX}}, {"i16", 2, {-32768, 32767}},
                    {"i8", 3, {-128, 0, 127}},      {"u8", 2, {0, 255}},
                    {"bool", 3, {1, 0, 1}}};
        for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
            assert_int_equal(attn_st_load_i32(f, ints[k].name, &pi, NULL), ATTN_STATUS_OK);
            for (int i = 0; i < ints[k].n; i++) assert_int_equal(pi[i], ints[k].v[i]);
            attn_free(pi);
        }

        /* wrong use: each fails with a message naming the file and tensor */
        const char *fname = pass == 0 ? p : "rt-mem";
        int64_t wrong[2] = {4, 3};
        tu_expect_fail3(attn_st_read_f32(f, "f32", 2, wrong, got), ATTN_STATUS_FORMAT, fname,
                    "[3, 4]", "[4, 3]");
        tu_expect_fail3(attn_st_read_f32(f, "f32", 1, wrong, got), ATTN_STATUS_FORMAT, fname,
                    "'f32'", "[4]");
        tu_expect_fail3(attn_st_read_f32(f, "missing.weight", -1, NULL, got),
                    ATTN_STATUS_NOT_FOUND, fname, "missing.weight", NULL);
        pf = (float *)1;
        tu_expect_fail3(attn_st_load_f32(f, "missing.weight", &pf, NULL), ATTN_STATUS_NOT_FOUND,
                    fname, "missing.weight", NULL);
        assert_null(pf);
        tu_expect_fail3(attn_st_load_i32(f, "nope", &pi, NULL), ATTN_STATUS_NOT_FOUND, fname,
                    "'nope'", NULL);
        tu_expect_fail3(attn_st_load_f32(f, "i64", &pf, NULL), ATTN_STATUS_UNSUPPORTED, fname,
                    "'i64'", "I64");
        assert_null(pf);
        tu_expect_fail3(attn_st_load_i32(f, "f16", &pi, NULL), ATTN_STATUS_UNSUPPORTED, fname,
                    "'f16'", "F16");
        assert_null(pi);
        attn_st_close(f);
    }
    free(raw);
    attn_st_close(NULL);
}

/* A float16/bfloat16 sweep: every one of the 65536 patterns against an independent formula. */
static void test_half_sweep(void **state) {
    (void)state;
    uint16_t *h = malloc(65536 * 2);
    assert_non_null(h);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    attn_st_entry e[] = {{"h", ATTN_DTYPE_F16, 1, {65536}, h},
                         {"b", ATTN_DTYPE_BF16, 2, {256, 256}, h}};
    const char *p = tu_tmp("sweep.safetensors");
    assert_int_equal(attn_st_save(p, e, 2, NULL), ATTN_STATUS_OK);
    attn_st_file *f;
    assert_int_equal(attn_st_open(p, &f), ATTN_STATUS_OK);
    float *x;
    assert_int_equal(attn_st_load_f32(f, "h", &x, NULL), ATTN_STATUS_OK);
    for (uint32_t i = 0; i < 65536; i++) {
        int ex = (int)(i >> 10 & 31), man = (int)(i & 1023);
        double v = ex == 0 ? ldexp(man, -24) : ldexp(1024 + man, ex - 25);
        if (i & 0x8000) v = -v;
        if (ex == 31) {
            if (man == 0) assert_true(isinf(x[i]) && !!signbit(x[i]) == !!(i & 0x8000));
            else assert_true(isnan(x[i]));
            /* payload and sign kept */
            assert_int_equal(f32_bits(x[i]), ((i & 0x8000u) << 16) | 0x7f800000u | (uint32_t)man << 13);
        } else if ((double)x[i] != v || !!signbit(x[i]) != !!(i & 0x8000)) {
            fail_msg("f16 0x%04x: got %a, expected %a", i, (double)x[i], v);
        }
    }
    attn_free(x);
    assert_int_equal(attn_st_load_f32(f, "b", &x, NULL), ATTN_STATUS_OK);
    for (uint32_t i = 0; i < 65536; i++) assert_int_equal(f32_bits(x[i]), i << 16);
    attn_free(x);
    attn_st_close(f);
    free(h);
}

/* Integer conversions: out-of-range I64 and non-0/1 BOOL bytes are rejected. */
static void test_st_int_range(void **state) {
    (void)state;
    int64_t big[3] = {1, (int64_t)INT32_MAX + 1, 0};
    int64_t neg[1] = {(int64_t)INT32_MIN - 1};
    uint8_t b2[2] = {0, 2};
    attn_st_entry e[] = {{"big", ATTN_DTYPE_I64, 1, {3}, big},
                         {"neg", ATTN_DTYPE_I64, 1, {1}, neg},
                         {"b2", ATTN_DTYPE_BOOL, 1, {2}, b2}};
    const char *p = tu_tmp("range.safetensors");
    assert_int_equal(attn_st_save(p, e, 3, NULL), ATTN_STATUS_OK);
    attn_st_file *f;
    assert_int_equal(attn_st_open(p, &f), ATTN_STATUS_OK);
    int32_t *x = (int32_t *)1;
    tu_expect_fail3(attn_st_load_i32(f, "big", &x, NULL), ATTN_STATUS_TOO_LARGE, p, "'big'",
                "2147483648");
    assert_null(x);
    tu_expect_fail3(attn_st_load_i32(f, "neg", &x, NULL), ATTN_STATUS_TOO_LARGE, p, "-2147483649",
                "int32");
    tu_expect_fail3(attn_st_load_i32(f, "b2", &x, NULL), ATTN_STATUS_FORMAT, p, "'b2'", "BOOL");
    attn_st_close(f);
}

/* Large tensors convert in chunks: values past the first chunk are right. */
static void test_st_chunked(void **state) {
    (void)state;
    const size_t n = 300000; /* > 256 KiB of F16 and of F64 */
    uint16_t *h = malloc(n * 2);
    double *d = malloc(n * 8);
    int64_t *q = malloc(n * 8);
    assert_true(h && d && q);
    for (size_t i = 0; i < n; i++) {
        h[i] = (uint16_t)(0x3c00 + (i % 1024)); /* 1 + k/1024 */
        d[i] = (double)i * 0.5;
        q[i] = (int64_t)i - 7;
    }
    attn_st_entry e[] = {{"h", ATTN_DTYPE_F16, 1, {(int64_t)n}, h},
                         {"d", ATTN_DTYPE_F64, 2, {(int64_t)n / 100, 100}, d},
                         {"q", ATTN_DTYPE_I64, 1, {(int64_t)n}, q}};
    const char *p = tu_tmp("chunk.safetensors");
    assert_int_equal(attn_st_save(p, e, 3, NULL), ATTN_STATUS_OK);
    attn_st_file *f;
    assert_int_equal(attn_st_open(p, &f), ATTN_STATUS_OK);
    float *x;
    assert_int_equal(attn_st_load_f32(f, "h", &x, NULL), ATTN_STATUS_OK);
    for (size_t i = 0; i < n; i++)
        if (x[i] != 1.0f + (float)(i % 1024) / 1024.0f) fail_msg("h[%zu] = %g", i, (double)x[i]);
    attn_free(x);
    assert_int_equal(attn_st_load_f32(f, "d", &x, NULL), ATTN_STATUS_OK);
    for (size_t i = 0; i < n; i++)
        if (x[i] != (float)i * 0.5f) fail_msg("d[%zu] = %g", i, (double)x[i]);
    attn_free(x);
    int32_t *y;
    assert_int_equal(attn_st_load_i32(f, "q", &y, NULL), ATTN_STATUS_OK);
    for (size_t i = 0; i < n; i++)
        if (y[i] != (int32_t)i - 7) fail_msg("q[%zu] = %d", i, y[i]);
    attn_free(y);
    attn_st_close(f);
    free(h);
    free(d);
    free(q);
}

/* ---- safetensors bad input ---- */

#define T4 "\"dtype\":\"F32\",\"shape\":[4]"

static void test_st_bad_length(void **state) {
    (void)state;
    unsigned char b[16] = {0};
    bad_bytes(b, 0, ATTN_STATUS_FORMAT, "0 bytes", "too short");
    bad_bytes(b, 5, ATTN_STATUS_FORMAT, "5 bytes", "too short");
    size_t n;
    unsigned char *x = st_blob("{}", 1000, NULL, 90, &n);
    bad_bytes(x, n, ATTN_STATUS_FORMAT, "header length 1000", "past the end");
    free(x);
    x = st_blob("{}", UINT64_MAX, NULL, 0, &n);
    bad_bytes(x, n, ATTN_STATUS_FORMAT, "18446744073709551615", "past the end");
    free(x);
    x = st_blob("{}", (uint64_t)1 << 63, NULL, 0, &n);
    bad_bytes(x, n, ATTN_STATUS_FORMAT, "9223372036854775808", "past the end");
    free(x);
    x = st_blob("{}", 0, NULL, 0, &n);
    bad_bytes(x, n, ATTN_STATUS_FORMAT, "header length 0", "too small");
    free(x);
    x = st_blob("{}", 1, NULL, 0, &n);
    bad_bytes(x, n, ATTN_STATUS_FORMAT, "header length 1", "too small");
    free(x);
}

/* A reader that claims a huge size and serves a header length of 100 MB + 8 followed by zeros:
 * the length limit is checked before anything is read or allocated. */
static attn_status huge_read(void *ctx, uint64_t off, void *dst, size_t n) {
    uint64_t hl = *(const uint64_t *)ctx;
    unsigned char *d = dst;
    for (size_t i = 0; i < n; i++) d[i] = off + i < 8 ? (unsigned char)(hl >> (8 * (off + i))) : 0;
    return ATTN_STATUS_OK;
}

static void test_st_bad_huge_header(void **state) {
    (void)state;
    static uint64_t hl = 100u * 1000 * 1000 + 8;
    attn_reader r = {&hl, (uint64_t)1 << 40, "huge.safetensors", huge_read, NULL};
    attn_st_file *f;
    tu_expect_fail3(attn_st_open_reader(r, &f), ATTN_STATUS_TOO_LARGE, "huge.safetensors",
                "100000008", "too large");
    /* the same through a sparse file */
    const char *p = tu_tmp("sparse.safetensors");
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(hl >> (8 * i));
    assert_int_equal(write(fd, lb, 8), 8);
    assert_int_equal(ftruncate(fd, (off_t)hl + 100), 0);
    close(fd);
    tu_expect_fail3(attn_st_open(p, &f), ATTN_STATUS_TOO_LARGE, p, "too large", NULL);
    unlink(p);
}

static void test_st_bad_json(void **state) {
    (void)state;
    bad_st("this is not json", 0, ATTN_STATUS_FORMAT, "not valid JSON", NULL);
    bad_st("{\"a\": {" T4 ",\"data_offsets\":[0,16]}", 16, ATTN_STATUS_FORMAT, "not valid JSON",
           NULL); /* unterminated */
    bad_st("[1, 2, 3]   ", 0, ATTN_STATUS_FORMAT, "must be a JSON object", "array");
    bad_st("\"str\"   ", 0, ATTN_STATUS_FORMAT, "must be a JSON object", "string");
    bad_st("{} {}   ", 0, ATTN_STATUS_FORMAT, "not valid JSON", NULL);
    bad_st("{\"a\":{" T4 ",\"data_offsets\":[0,16]},\"a\":{" T4 ",\"data_offsets\":[16,32]}}",
           32, ATTN_STATUS_FORMAT, "duplicate object key", "\"a\"");
    bad_st("{\"\xff\xfe\":1}  ", 0, ATTN_STATUS_FORMAT, "not valid JSON", NULL); /* bad UTF-8 */
    /* a NUL byte inside the header (jansson must not stop there) */
    static const char nul[16] = "{\"a\":\"x\0y\"}    ";
    unsigned char b[8 + sizeof nul] = {sizeof nul};
    memcpy(b + 8, nul, sizeof nul);
    bad_bytes(b, sizeof b, ATTN_STATUS_FORMAT, "not valid JSON", NULL);
}

static void test_st_bad_entries(void **state) {
    (void)state;
    bad_st("{\"w\": 5}", 0, ATTN_STATUS_FORMAT, "'w'", "must be an object");
    bad_st("{\"w\": [1,2]}", 0, ATTN_STATUS_FORMAT, "'w'", "must be an object");
    bad_st("{\"w\": {\"shape\":[4],\"data_offsets\":[0,16]}}", 16, ATTN_STATUS_FORMAT, "'w'",
           "missing \"dtype\"");
    bad_st("{\"w\": {\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", 16, ATTN_STATUS_FORMAT, "'w'",
           "missing \"shape\"");
    bad_st("{\"w\": {" T4 "}}", 16, ATTN_STATUS_FORMAT, "'w'", "missing \"data_offsets\"");
    bad_st("{\"w\": {\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4,
           ATTN_STATUS_FORMAT, "'w'", "unknown dtype \"F8_E4M3\"");
    bad_st("{\"w\": {\"dtype\":\"f32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16,
           ATTN_STATUS_FORMAT, "unknown dtype", NULL);
    bad_st("{\"w\": {\"dtype\":32,\"shape\":[4],\"data_offsets\":[0,16]}}", 16,
           ATTN_STATUS_FORMAT, "'w'", "dtype must be a string");
    bad_st("{\"w\": {\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]}}", 16,
           ATTN_STATUS_FORMAT, "shape[1]", "-2");
    bad_st("{\"w\": {\"dtype\":\"F32\",\"shape\":[4.0],\"data_offsets\":[0,16]}}", 16,
           ATTN_STATUS_FORMAT, "shape[0]", "floating-point");
    bad_st("{\"w\": {\"dtype\":\"F32\",\"shape\":[\"4\"],\"data_offsets\":[0,16]}}", 16,
           ATTN_STATUS_FORMAT, "shape[0]", "a string");
    bad_st("{\"w\": {\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16,
           ATTN_STATUS_FORMAT, "'w'", "shape must be an array");
    bad_st("{\"w\": {\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
           "\"data_offsets\":[0,16]}}",
           16, ATTN_STATUS_FORMAT, "'w'", "overflows");
    bad_st("{\"w\": {\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,16]}}",
           16, ATTN_STATUS_FORMAT, "'w'", "overflows"); /* 2^61 * 8 bytes */
    bad_st("{\"w\": {\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,16]}}",
           16, ATTN_STATUS_FORMAT, "not valid JSON", NULL); /* beyond int64 */
    bad_st("{\"w\": {\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
           ATTN_STATUS_FORMAT, "9 dimensions", "at most 8");
    bad_st("{\"wte.weight\": {\"dtype\":\"F32\",\"shape\":[10,4],\"data_offsets\":[0,100]}}", 100,
           ATTN_STATUS_FORMAT, "'wte.weight'",
           "data_offsets [0, 100] do not match shape [10, 4] of F32 (160 bytes)");
    bad_st("{\"w\": {" T4 ",\"data_offsets\":[0,16]}}", 12, ATTN_STATUS_FORMAT, "'w'",
           "past the end of the data buffer (12 bytes; file truncated?)");
    bad_st("{\"w\": {" T4 ",\"data_offsets\":[100,116]}}", 16, ATTN_STATUS_FORMAT, "'w'",
           "[100, 116] are past the end");
    bad_st("{\"w\": {" T4 ",\"data_offsets\":[16,0]}}", 16, ATTN_STATUS_FORMAT, "'w'",
           "begin after end");
    bad_st("{\"w\": {" T4 ",\"data_offsets\":[0]}}", 16, ATTN_STATUS_FORMAT, "'w'",
           "[begin, end]");
    bad_st("{\"w\": {" T4 ",\"data_offsets\":[0,16,32]}}", 32, ATTN_STATUS_FORMAT, "'w'",
           "[begin, end]");
    bad_st("{\"w\": {" T4 ",\"data_offsets\":[-16,0]}}", 16, ATTN_STATUS_FORMAT,
           "data_offsets[0]", "-16");
    bad_st("{\"w\": {" T4 ",\"data_offsets\":[0,16.0]}}", 16, ATTN_STATUS_FORMAT,
           "data_offsets[1]", "floating-point");
    bad_st("{\"w\": {" T4 ",\"data_offsets\":{\"a\":0}}}", 16, ATTN_STATUS_FORMAT, "'w'",
           "an object");
    bad_st("{\"w\": {" T4 ",\"data_offsets\":[18446744073709551600,18446744073709551616]}}", 16,
           ATTN_STATUS_FORMAT, "not valid JSON", NULL);
    bad_st("{\"w\": {" T4 ",\"data_offsets\":[9223372036854775791,9223372036854775807]}}", 16,
           ATTN_STATUS_FORMAT, "'w'", "past the end");
    /* overlap (partial and containment), naming both tensors */
    bad_st("{\"a\": {" T4 ",\"data_offsets\":[0,16]},\"b\": {" T4 ",\"data_offsets\":[8,24]}}",
           24, ATTN_STATUS_FORMAT, "'a'", "'b'");
    bad_st("{\"a\": {\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
           "\"b\": {\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[31,32]},"
           "\"c\": {\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[32,34]}}",
           34, ATTN_STATUS_FORMAT, "overlap", NULL);
    bad_st("{\"a\": {" T4 ",\"data_offsets\":[0,16]},\"b\": {" T4 ",\"data_offsets\":[0,16]}}", 16,
           ATTN_STATUS_FORMAT, "overlap", NULL);
    /* metadata */
    bad_st("{\"__metadata__\": {\"k\": 1}}", 0, ATTN_STATUS_FORMAT, "__metadata__", "'k'");
    bad_st("{\"__metadata__\": {\"k\": \"v\", \"n\": null}}", 0, ATTN_STATUS_FORMAT,
           "__metadata__", "'n'");
    bad_st("{\"__metadata__\": [\"k\"]}", 0, ATTN_STATUS_FORMAT, "__metadata__",
           "must be an object");
}

/* Valid edge cases that must open: empty header object, zero-size tensors anywhere, gaps,
 * trailing bytes, extra keys, a header padded with spaces, null metadata, tensors out of order. */
static void test_st_edge_ok(void **state) {
    (void)state;
    const char *ok[] = {
        "{}      ",
        "{\"__metadata__\": null}",
        "{\"e\": {\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
        " \"a\": {" T4 ",\"data_offsets\":[0,16]}}",
        "{\"b\": {" T4 ",\"data_offsets\":[24,40]}, \"a\": {" T4 ",\"data_offsets\":[0,16]},"
        " \"x\": {\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[16,17], \"extra\": 1}}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t n;
        unsigned char *b = st_blob(ok[i], strlen(ok[i]), NULL, 48, &n);
        attn_reader r;
        attn_st_file *f;
        assert_int_equal(attn_reader_open_memory(b, n, "ok", &r), ATTN_STATUS_OK);
        attn_status s = attn_st_open_reader(r, &f);
        if (s) fail_msg("case %zu: %s", i, attn_last_error());
        if (i == 3) {
            float x[4];
            assert_int_equal(attn_st_read_f32(f, "b", 1, (int64_t[]){4}, x), ATTN_STATUS_OK);
            assert_int_equal(attn_st_tensor_at(f, 0)->offset, 8 + strlen(ok[i]) + 24);
            int32_t *y;
            assert_int_equal(attn_st_load_i32(f, "x", &y, NULL), ATTN_STATUS_OK);
            assert_int_equal(y[0], 0);
            attn_free(y);
        }
        attn_st_close(f);
        free(b);
    }
}

/* A file truncated after its header was written (a crashed non-atomic writer). */
static void test_st_truncated_file(void **state) {
    (void)state;
    float v[64] = {0};
    attn_st_entry e = {"v", ATTN_DTYPE_F32, 2, {8, 8}, v};
    const char *p = tu_tmp("full.safetensors");
    assert_int_equal(attn_st_save(p, &e, 1, NULL), ATTN_STATUS_OK);
    size_t n;
    unsigned char *b = read_all(p, &n);
    assert_non_null(b);
    bad_bytes(b, n - 1, ATTN_STATUS_FORMAT, "'v'", "truncated");
    bad_bytes(b, 12, ATTN_STATUS_FORMAT, "past the end of the file", NULL);
    free(b);
    attn_st_file *f;
    tu_expect_fail3(attn_st_open(tu_tmp("missing.safetensors"), &f), ATTN_STATUS_IO,
                "missing.safetensors", "cannot open", NULL);
}


/* Names from the file are shown with control bytes escaped (no terminal escapes in messages). */
static void test_st_names_escaped(void **state) {
    (void)state;
    bad_st("{\"\\u001b[31mevil\\ttab\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}",
           4, ATTN_STATUS_FORMAT, "'\\x1b[31mevil\\x09tab'", "do not match");
    for (const char *m = attn_last_error(); *m; m++) assert_true((unsigned char)*m >= 0x20);
    char longname[3000];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    char json[3200];
    snprintf(json, sizeof json, "{\"%s\": 1}", longname);
    bad_st(json, 0, ATTN_STATUS_FORMAT, "nnn...'", "must be an object");
}

/* Every truncation and a few thousand random byte mutations of valid files, through the memory
 * reader: each either fails with a message naming the input or opens and reads consistently.
 * Under ASan/UBSan this is a small built-in fuzzer. */
static void load_everything(attn_st_file *f) {
    for (int i = 0; i < attn_st_count(f); i++) {
        const attn_st_tensor *t = attn_st_tensor_at(f, i);
        float *x;
        int32_t *y;
        if (attn_st_load_f32(f, t->name, &x, NULL) == ATTN_STATUS_OK) attn_free(x);
        else assert_true(strstr(attn_last_error(), "mut") != NULL);
        if (attn_st_load_i32(f, t->name, &y, NULL) == ATTN_STATUS_OK) attn_free(y);
        assert_ptr_equal(attn_st_find(f, t->name), t);
    }
}

static void test_mutations(void **state) {
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t h[4] = {0x3c00, 0x7c00, 0x0001, 0xfc00};
    int64_t q[3] = {1, -1, 1LL << 40};
    uint8_t bl[2] = {1, 0};
    attn_st_entry e[] = {{"a", ATTN_DTYPE_F32, 2, {2, 3}, a}, {"h", ATTN_DTYPE_BF16, 1, {4}, h},
                         {"q", ATTN_DTYPE_I64, 1, {3}, q},    {"b", ATTN_DTYPE_BOOL, 1, {2}, bl},
                         {"s", ATTN_DTYPE_F16, 0, {0}, h}};
    const char *meta[] = {"k", "v", NULL};
    const char *p = tu_tmp("mut.safetensors");
    assert_int_equal(attn_st_save(p, e, 5, meta), ATTN_STATUS_OK);
    const char *np = tu_tmp("mut.npy");
    int64_t sh[2] = {2, 3};
    assert_int_equal(attn_npy_save_f32(np, a, 2, sh), ATTN_STATUS_OK);
    size_t n, nn;
    unsigned char *orig = read_all(p, &n), *norig = read_all(np, &nn);
    assert_true(orig && norig);
    tu_rng rng = {0x9e3779b97f4a7c15ull};
    int opened = 0, total = 0;
    for (int round = 0; round < 2; round++) {
        const unsigned char *src = round ? norig : orig;
        size_t len = round ? nn : n;
        for (int it = 0; it < (int)len + 4000; it++, total++) {
            size_t m = len;
            unsigned char *b = malloc(len);
            assert_non_null(b);
            memcpy(b, src, len);
            if (it < (int)len) m = (size_t)it; /* every truncation */
            else {
                int flips = 1 + (int)(tu_uniform(&rng, 0, 4));
                for (int k = 0; k < flips; k++) {
                    size_t pos = (size_t)tu_uniform(&rng, 0, (float)len) % len;
                    /* bias towards the header, where the structure is */
                    if (k == 0 && tu_uniform(&rng, 0, 1) < 0.7f) pos %= ATTN_MIN(len, (size_t)160);
                    static const unsigned char interesting[] = {'0', '9', '-', '.', '"', ',',
                                                                ']', '}', '[', 0, 0xff, ' ', 'e'};
                    b[pos] = tu_uniform(&rng, 0, 1) < 0.5f
                                 ? interesting[(size_t)tu_uniform(&rng, 0, 13) % 13]
                                 : (unsigned char)tu_uniform(&rng, 0, 256);
                }
            }
            attn_reader r;
            assert_int_equal(attn_reader_open_memory(b, m, "mut", &r), ATTN_STATUS_OK);
            attn_clear_error();
            if (round == 0) {
                attn_st_file *f;
                if (attn_st_open_reader(r, &f) == ATTN_STATUS_OK) {
                    opened++;
                    load_everything(f);
                    attn_st_close(f);
                } else if (!strstr(attn_last_error(), "mut")) {
                    fail_msg("iteration %d: message without the name: %s", it, attn_last_error());
                }
            } else {
                float *x;
                int nd;
                int64_t shp[ATTN_MAX_DIMS];
                if (attn_npy_load_f32_reader(r, &x, &nd, shp) == ATTN_STATUS_OK) {
                    opened++;
                    attn_free(x);
                } else if (!strstr(attn_last_error(), "mut")) {
                    fail_msg("npy iteration %d: message without the name: %s", it,
                             attn_last_error());
                }
            }
            free(b);
        }
    }
    printf("  mutations: %d inputs, %d opened\n", total, opened);
    free(orig);
    free(norig);
}

/* ---- safetensors writing: argument errors and atomicity ---- */

static void test_st_save_errors(void **state) {
    (void)state;
    float v[4] = {1, 2, 3, 4};
    attn_st_entry e[2] = {{"a", ATTN_DTYPE_F32, 1, {4}, v}, {"a", ATTN_DTYPE_F32, 1, {4}, v}};
    const char *p = tu_tmp("dup.safetensors");
    tu_expect_fail3(attn_st_save(p, e, 2, NULL), ATTN_STATUS_INVALID_ARGUMENT, p, "duplicate", "'a'");
    e[1].name = "__metadata__";
    tu_expect_fail3(attn_st_save(p, e, 2, NULL), ATTN_STATUS_INVALID_ARGUMENT, p, "reserved", NULL);
    e[1].name = "b";
    e[1].shape[0] = -4;
    tu_expect_fail3(attn_st_save(p, e, 2, NULL), ATTN_STATUS_INVALID_ARGUMENT, p, "'b'", "[-4]");
    e[1].shape[0] = 4;
    e[1].ndim = 9;
    tu_expect_fail3(attn_st_save(p, e, 2, NULL), ATTN_STATUS_INVALID_ARGUMENT, p, "'b'", "ndim 9");
    e[1].ndim = 1;
    e[1].dtype = (attn_dtype)42;
    tu_expect_fail3(attn_st_save(p, e, 2, NULL), ATTN_STATUS_INVALID_ARGUMENT, p, "'b'", "dtype");
    e[1].dtype = ATTN_DTYPE_F32;
    e[1].data = NULL;
    tu_expect_fail3(attn_st_save(p, e, 2, NULL), ATTN_STATUS_INVALID_ARGUMENT, p, "'b'", "NULL");
    e[1].data = v;
    e[1].name = "bad\xff";
    tu_expect_fail3(attn_st_save(p, e, 2, NULL), ATTN_STATUS_INVALID_ARGUMENT, p, "UTF-8", NULL);
    e[1].name = "b";
    const char *odd[] = {"k", NULL};
    tu_expect_fail3(attn_st_save(p, e, 2, odd), ATTN_STATUS_INVALID_ARGUMENT, p, "'k'", "no value");
    const char *badv[] = {"k", "\xc3(", NULL};
    tu_expect_fail3(attn_st_save(p, e, 2, badv), ATTN_STATUS_INVALID_ARGUMENT, p, "'k'", "UTF-8");
    const char *badk[] = {"\xff", "v", NULL};
    tu_expect_fail3(attn_st_save(p, e, 2, badk), ATTN_STATUS_INVALID_ARGUMENT, p, "'\\xff'",
                "UTF-8");
    const char *dupm[] = {"k", "1", "k", "2", NULL};
    tu_expect_fail3(attn_st_save(p, e, 2, dupm), ATTN_STATUS_INVALID_ARGUMENT, p, "duplicate",
                "'k'");
    tu_expect_fail3(attn_st_save(p, e, -1, NULL), ATTN_STATUS_INVALID_ARGUMENT, p, NULL, NULL);
    struct stat st;
    assert_int_equal(stat(p, &st), -1); /* nothing was written */
    assert_int_equal(count_temporaries(tu_dir), 0);
    /* no tensors at all is a valid file */
    assert_int_equal(attn_st_save(p, NULL, 0, NULL), ATTN_STATUS_OK);
    attn_st_file *f;
    assert_int_equal(attn_st_open(p, &f), ATTN_STATUS_OK);
    assert_int_equal(attn_st_count(f), 0);
    attn_st_close(f);

    /* a nonexistent directory */
    const char *q = tu_tmp("no/such/dir/x.safetensors");
    tu_expect_fail3(attn_st_save(q, e, 2, NULL), ATTN_STATUS_IO, q, "No such file", NULL);
    assert_int_equal(count_temporaries(tu_dir), 0);
}

/* The old file survives every failure, and no temporary is left behind. */
static void test_st_save_atomic(void **state) {
    (void)state;
    float old[4] = {1, 2, 3, 4};
    attn_st_entry e = {"w", ATTN_DTYPE_F32, 1, {4}, old};
    char p[1024]; /* tu_tmp() buffers rotate: keep copies of paths used throughout */
    snprintf(p, sizeof p, "%s", tu_tmp("atomic.safetensors"));
    assert_int_equal(attn_st_save(p, &e, 1, NULL), ATTN_STATUS_OK);
    size_t n0;
    unsigned char *before = read_all(p, &n0);
    assert_non_null(before);

    /* 1. a write that fails midway (file size limit: EFBIG, like ENOSPC) */
    const size_t big = (size_t)1 << 20;
    float *nw = calloc(big, sizeof(float));
    assert_non_null(nw);
    attn_st_entry e2 = {"w", ATTN_DTYPE_F32, 1, {(int64_t)big}, nw};
    struct rlimit old_lim, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
    lim = old_lim;
    lim.rlim_cur = 65536;
    fflush(stdout); /* stdout may be a file: nothing may be written to it under the limit */
    fflush(stderr);
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    attn_status s = attn_st_save(p, &e2, 1, NULL); /* nothing printed while the limit holds */
    setrlimit(RLIMIT_FSIZE, &old_lim);
    signal(SIGXFSZ, old_sig);
    tu_expect_fail3(s, ATTN_STATUS_IO, p, "write", "File too large");
    size_t n1;
    unsigned char *after = read_all(p, &n1);
    assert_non_null(after);
    assert_int_equal(n1, n0);
    assert_memory_equal(after, before, n0);
    free(after);
    assert_int_equal(count_temporaries(tu_dir), 0);

    /* 2. the rename fails (the destination is a non-empty directory): data was written in full,
     * then the commit must clean up */
    const char *d = tu_tmp("adir");
    assert_int_equal(mkdir(d, 0755), 0);
    const char *inner = tu_tmp("adir/keep");
    write_file(inner, "x", 1);
    tu_expect_fail3(attn_st_save(d, &e, 1, NULL), ATTN_STATUS_IO, d, "rename", NULL);
    assert_int_equal(count_temporaries(tu_dir), 0);
    struct stat st;
    assert_int_equal(stat(inner, &st), 0);
    unlink(inner);
    rmdir(d);

    /* 3. a read-only directory: test_st_save_readonly_dir */

    /* 4. the new content replaces the old one on success */
    assert_int_equal(attn_st_save(p, &e2, 1, NULL), ATTN_STATUS_OK);
    attn_st_file *f;
    assert_int_equal(attn_st_open(p, &f), ATTN_STATUS_OK);
    assert_int_equal(attn_st_find(f, "w")->numel, big);
    attn_st_close(f);
    assert_int_equal(count_temporaries(tu_dir), 0);

    /* 5. npy: same guarantees */
    char np[1024];
    snprintf(np, sizeof np, "%s", tu_tmp("atomic.npy"));
    int64_t sh1[1] = {4};
    assert_int_equal(attn_npy_save_f32(np, old, 1, sh1), ATTN_STATUS_OK);
    int64_t shb[1] = {(int64_t)big};
    fflush(stdout);
    fflush(stderr);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    old_sig = signal(SIGXFSZ, SIG_IGN);
    s = attn_npy_save_f32(np, nw, 1, shb);
    setrlimit(RLIMIT_FSIZE, &old_lim);
    signal(SIGXFSZ, old_sig);
    tu_expect_fail3(s, ATTN_STATUS_IO, np, "File too large", NULL);
    float *x;
    int nd;
    int64_t sh[ATTN_MAX_DIMS];
    assert_int_equal(attn_npy_load_f32(np, &x, &nd, sh), ATTN_STATUS_OK);
    assert_int_equal(nd, 1);
    assert_int_equal(sh[0], 4);
    assert_memory_equal(x, old, sizeof old);
    attn_free(x);
    const char *nq = tu_tmp("nodir/x.npy");
    tu_expect_fail3(attn_npy_save_f32(nq, old, 1, sh1), ATTN_STATUS_IO, nq, "No such file", NULL);
    assert_int_equal(count_temporaries(tu_dir), 0);
    free(nw);
    free(before);
}

/* ---- .npy ---- */

static void test_npy_roundtrip(void **state) {
    (void)state;
    float v[24];
    for (int i = 0; i < 24; i++) v[i] = (float)i * 1.5f - 7.0f;
    struct {
        int nd;
        int64_t sh[ATTN_MAX_DIMS];
        size_t numel;
    } cases[] = {{0, {0}, 1},          {1, {5}, 5},          {2, {2, 3}, 6},
                 {1, {0}, 0},          {3, {2, 0, 3}, 0},    {3, {2, 3, 4}, 24},
                 {8, {1, 1, 1, 2, 1, 1, 3, 1}, 6}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *p = tu_tmp("rt.npy");
        assert_int_equal(attn_npy_save_f32(p, v, cases[k].nd, cases[k].sh), ATTN_STATUS_OK);
        size_t n;
        unsigned char *raw = read_all(p, &n);
        assert_non_null(raw);
        size_t hl = raw[8] | (size_t)raw[9] << 8;
        assert_int_equal((10 + hl) % 64, 0);
        assert_int_equal(raw[10 + hl - 1], '\n');
        assert_int_equal(n, 10 + hl + 4 * cases[k].numel);
        free(raw);
        float *x;
        int nd = -1;
        int64_t sh[ATTN_MAX_DIMS];
        assert_int_equal(attn_npy_load_f32(p, &x, &nd, sh), ATTN_STATUS_OK);
        assert_int_equal(nd, cases[k].nd);
        for (int d = 0; d < nd; d++) assert_int_equal(sh[d], cases[k].sh[d]);
        if (cases[k].numel) assert_memory_equal(x, v, 4 * cases[k].numel);
        attn_free(x);
    }
    /* the exact bytes numpy 1.24 writes for a (2, 3) float32 array */
    const char *p = tu_tmp("exact.npy");
    int64_t sh23[2] = {2, 3};
    assert_int_equal(attn_npy_save_f32(p, v, 2, sh23), ATTN_STATUS_OK);
    size_t n;
    unsigned char *raw = read_all(p, &n);
    const char want[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (2, 3), }";
    assert_int_equal(n, 128 + 24);
    assert_memory_equal(raw, want, sizeof want - 1);
    for (size_t i = sizeof want - 1; i < 127; i++) assert_int_equal(raw[i], ' ');
    assert_int_equal(raw[127], '\n');
    assert_memory_equal(raw + 128, v, 24);
    free(raw);
    int64_t neg[1] = {-1};
    tu_expect_fail3(attn_npy_save_f32(p, v, 1, neg), ATTN_STATUS_INVALID_ARGUMENT, p, "shape", NULL);
    tu_expect_fail3(attn_npy_save_f32(p, v, 9, sh23), ATTN_STATUS_INVALID_ARGUMENT, p, "ndim 9",
                NULL);
}

/* Write a .npy with a given version and header text (padding added) and data bytes. */
static void npy_raw(const char *path, int major, const char *dict, const void *data, size_t dn,
                    int pad) {
    size_t dl = strlen(dict), pre = major == 1 ? 10 : 12;
    size_t hl = dl + (size_t)(pad ? (64 - (pre + dl + 1) % 64) % 64 + 1 : 0);
    unsigned char *b = malloc(pre + hl + dn + 1);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(b + pre, dict, dl);
    for (size_t i = dl; i < hl; i++) b[pre + i] = i + 1 == hl ? '\n' : ' ';
    if (dn) memcpy(b + pre + hl, data, dn);
    write_file(path, b, pre + hl + dn);
    free(b);
}

static void npy_bad(const char *dict, size_t dn, attn_status want, const char *s1,
                    const char *s2) {
    const char *p = tu_tmp("bad.npy");
    unsigned char zeros[64] = {0};
    assert_true(dn <= sizeof zeros);
    npy_raw(p, 1, dict, zeros, dn, 1);
    float *x = (float *)1;
    int nd;
    int64_t sh[ATTN_MAX_DIMS];
    tu_expect_fail3(attn_npy_load_f32(p, &x, &nd, sh), want, p, s1, s2);
    assert_null(x);
}

static void test_npy_variants(void **state) {
    (void)state;
    /* hand-written but valid: v2/v3, '<f8', other key order, double quotes, no trailing comma,
     * no padding, a 1-tuple without space */
    double d[3] = {0.5, -1e300, 1e40};
    const char *p = tu_tmp("v.npy");
    npy_raw(p, 2, "{\"shape\":(3,),\"fortran_order\":False,\"descr\":\"<f8\"}", d, 24, 0);
    float *x;
    int nd;
    int64_t sh[ATTN_MAX_DIMS];
    assert_int_equal(attn_npy_load_f32(p, &x, &nd, sh), ATTN_STATUS_OK);
    assert_int_equal(nd, 1);
    assert_int_equal(sh[0], 3);
    assert_true(x[0] == 0.5f && isinf(x[1]) && x[1] < 0 && isinf(x[2]) && x[2] > 0);
    attn_free(x);
    float f[2] = {1, 2};
    npy_raw(p, 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2)}", f, 8, 1);
    assert_int_equal(attn_npy_load_f32(p, &x, &nd, sh), ATTN_STATUS_OK);
    assert_true(nd == 2 && sh[0] == 1 && sh[1] == 2 && x[1] == 2.0f);
    attn_free(x);
}

static void test_npy_bad(void **state) {
    (void)state;
    const char *p = tu_tmp("bad.npy");
    float *x;
    int nd;
    int64_t sh[ATTN_MAX_DIMS];
    write_file(p, "", 0);
    tu_expect_fail3(attn_npy_load_f32(p, &x, &nd, sh), ATTN_STATUS_FORMAT, p, "too short", NULL);
    write_file(p, "\x93NUMPX\x01\x00\x10\x00{}              ", 26);
    tu_expect_fail3(attn_npy_load_f32(p, &x, &nd, sh), ATTN_STATUS_FORMAT, p, "bad magic", NULL);
    write_file(p, "\x93NUMPY\x04\x00\x10\x00{}              ", 26);
    tu_expect_fail3(attn_npy_load_f32(p, &x, &nd, sh), ATTN_STATUS_UNSUPPORTED, p, "version 4.0",
                NULL);
    write_file(p, "\x93NUMPY\x01\x00\xff\x00{}", 12);
    tu_expect_fail3(attn_npy_load_f32(p, &x, &nd, sh), ATTN_STATUS_FORMAT, p, "header length 255",
                "past the end");
    write_file(p, "\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14);
    tu_expect_fail3(attn_npy_load_f32(p, &x, &nd, sh), ATTN_STATUS_FORMAT, p, "4294967295",
                "past the end");
    write_file(p, "\x93NUMPY\x02\x00\xff", 9);
    tu_expect_fail3(attn_npy_load_f32(p, &x, &nd, sh), ATTN_STATUS_FORMAT, p, "too short", NULL);
    tu_expect_fail3(attn_npy_load_f32(tu_tmp("absent.npy"), &x, &nd, sh), ATTN_STATUS_IO, "absent.npy",
                "No such file", NULL);

#define DICT(descr, fo, shape) "{'descr': " descr ", 'fortran_order': " fo ", 'shape': " shape ", }"
    npy_bad(DICT("'<i4'", "False", "(2,)"), 8, ATTN_STATUS_UNSUPPORTED, "'<i4'", "'<f4'");
    npy_bad(DICT("'>f4'", "False", "(2,)"), 8, ATTN_STATUS_UNSUPPORTED, "'>f4'", NULL);
    npy_bad(DICT("'<f2'", "False", "(2,)"), 4, ATTN_STATUS_UNSUPPORTED, "'<f2'", NULL);
    npy_bad(DICT("[('a', '<f4')]", "False", "(2,)"), 8, ATTN_STATUS_UNSUPPORTED, "structured",
            NULL);
    npy_bad(DICT("'<f4'", "True", "(2, 2)"), 16, ATTN_STATUS_UNSUPPORTED, "Fortran", NULL);
    npy_bad(DICT("'<f4'", "0", "(2,)"), 8, ATTN_STATUS_FORMAT, "fortran_order must be", NULL);
    npy_bad(DICT("'<f4'", "False", "(3,)"), 8, ATTN_STATUS_FORMAT, "12 bytes", "truncated");
    npy_bad(DICT("'<f4'", "False", "(1,)"), 8, ATTN_STATUS_FORMAT, "4 bytes", "trailing");
    npy_bad(DICT("'<f4'", "False", "(1000000000000,)"), 8, ATTN_STATUS_FORMAT, "truncated",
            NULL);
    npy_bad(DICT("'<f4'", "False", "(4294967296, 4294967296, 4294967296)"), 8,
            ATTN_STATUS_FORMAT, "absurd", "overflows");
    npy_bad(DICT("'<f4'", "False", "(99999999999999999999999,)"), 8, ATTN_STATUS_FORMAT,
            "absurdly large", NULL);
    npy_bad(DICT("'<f4'", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 4, ATTN_STATUS_FORMAT,
            "more than 8", NULL);
    npy_bad(DICT("'<f4'", "False", "(-1,)"), 4, ATTN_STATUS_FORMAT, "non-negative", NULL);
    npy_bad(DICT("'<f4'", "False", "(2.5,)"), 8, ATTN_STATUS_FORMAT, "expected ','", NULL);
    npy_bad(DICT("'<f4'", "False", "(2)"), 8, ATTN_STATUS_FORMAT, "not a tuple", NULL);
    npy_bad(DICT("'<f4'", "False", "[2]"), 8, ATTN_STATUS_FORMAT, "must be a tuple", NULL);
    npy_bad(DICT("'<f4'", "False", "(2,,)"), 8, ATTN_STATUS_FORMAT, "non-negative", NULL);
    npy_bad("{'descr': '<f4', 'shape': (2,), }", 8, ATTN_STATUS_FORMAT, "lacks", "fortran_order");
    npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8,
            ATTN_STATUS_FORMAT, "unexpected key 'x'", NULL);
    npy_bad("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8,
            ATTN_STATUS_FORMAT, "duplicate key 'descr'", NULL);
    npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", 8,
            ATTN_STATUS_FORMAT, "after the header dict", NULL);
    npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", 8, ATTN_STATUS_FORMAT,
            "expected ',' or '}'", NULL);
    npy_bad("not a dict", 8, ATTN_STATUS_FORMAT, "expected '{'", NULL);
    npy_bad("{'descr': '<f4\\x', 'fortran_order': False, 'shape': (2,)}", 8, ATTN_STATUS_FORMAT,
            "descr must be", NULL);
    npy_bad("{descr: '<f4'}", 8, ATTN_STATUS_FORMAT, "quoted key", NULL);
    npy_bad("{'descr': '<f4\x1b', 'fortran_order': False, 'shape': (2,)}", 8,
            ATTN_STATUS_FORMAT, "descr must be", NULL);
}

/* ---- interop with Python ---- */

static void need_ref(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0)
        fail_msg("%s is missing: run '.venv/bin/python tools/ref_io.py DIR' with ATTN_REF_DIR=DIR "
                 "(tests/run.sh does)",
                 path);
}

static void test_interop_python_to_c(void **state) {
    (void)state;
    const char *p = tu_ref_path("io_py.safetensors");
    need_ref(p);
    attn_st_file *f;
    if (attn_st_open(p, &f)) fail_msg("%s", attn_last_error());
    assert_string_equal(attn_st_metadata(f, "format"), "pt");
    assert_string_equal(attn_st_metadata(f, "source"), "tools/ref_io.py");
    float *x;
    const attn_st_tensor *t;
    assert_int_equal(attn_st_load_f32(f, "f32", &x, &t), ATTN_STATUS_OK);
    assert_int_equal(t->ndim, 2);
    assert_true(t->shape[0] == 3 && t->shape[1] == 4);
    for (int i = 0; i < 12; i++) assert_true(x[i] == (float)i / 8.0f);
    attn_free(x);
    static const uint32_t f16_want[] = {0x3f800000, 0xc0000000, 0x477fe000,
                                        0x33800000, 0x7f800000, 0x3eaaa000};
    assert_int_equal(attn_st_load_f32(f, "f16", &x, &t), ATTN_STATUS_OK);
    assert_int_equal(t->dtype, ATTN_DTYPE_F16);
    check_bits("py f16", x, f16_want, 6);
    attn_free(x);
    static const uint32_t bf16_want[] = {0x3f800000, 0x40490000, 0xc0200000, 0x7f800000,
                                         0x80000000};
    assert_int_equal(attn_st_load_f32(f, "bf16", &x, &t), ATTN_STATUS_OK);
    assert_int_equal(t->dtype, ATTN_DTYPE_BF16);
    check_bits("py bf16", x, bf16_want, 5);
    attn_free(x);
    assert_int_equal(attn_st_load_f32(f, "f64", &x, &t), ATTN_STATUS_OK);
    assert_int_equal(t->dtype, ATTN_DTYPE_F64);
    assert_true(x[0] == 0.1f && isinf(x[1]) && x[1] < 0 && x[2] == 0.0f);
    attn_free(x);
    int32_t *y;
    assert_int_equal(attn_st_load_i32(f, "i64", &y, &t), ATTN_STATUS_OK);
    assert_int_equal(t->dtype, ATTN_DTYPE_I64);
    int32_t i64w[4] = {0, -1, INT32_MAX, INT32_MIN};
    assert_memory_equal(y, i64w, sizeof i64w);
    attn_free(y);
    tu_expect_fail3(attn_st_load_i32(f, "i64_big", &y, NULL), ATTN_STATUS_TOO_LARGE, p, "i64_big",
                "1099511627776");
    assert_int_equal(attn_st_load_i32(f, "bool", &y, &t), ATTN_STATUS_OK);
    assert_int_equal(t->dtype, ATTN_DTYPE_BOOL);
    assert_true(y[0] == 1 && y[1] == 0 && y[2] == 1);
    attn_free(y);
    assert_int_equal(attn_st_load_i32(f, "u8", &y, NULL), ATTN_STATUS_OK);
    assert_true(y[0] == 0 && y[1] == 200 && y[2] == 255);
    attn_free(y);
    /* (no 0-d tensor here: tools/stfile.py turns shape () into [1] via np.ascontiguousarray) */
    attn_st_close(f);

    /* numpy files: the C-written (2, 3) array must be byte-identical to np.save's */
    const char *np = tu_ref_path("io_numpy.npy");
    need_ref(np);
    int nd;
    int64_t sh[ATTN_MAX_DIMS];
    if (attn_npy_load_f32(np, &x, &nd, sh)) fail_msg("%s", attn_last_error());
    assert_int_equal(nd, 2);
    assert_true(sh[0] == 2 && sh[1] == 3);
    for (int i = 0; i < 6; i++) assert_true(x[i] == (float)i * 0.5f - 1.0f);
    const char *mine = tu_tmp("mine.npy");
    assert_int_equal(attn_npy_save_f32(mine, x, nd, sh), ATTN_STATUS_OK);
    attn_free(x);
    size_t n1, n2;
    unsigned char *a = read_all(np, &n1), *b = read_all(mine, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);
    free(a);
    free(b);
    static const struct {
        const char *file;
        int nd;
        int64_t sh[3];
        float first, last;
    } others[] = {{"io_numpy_f8.npy", 1, {3}, 1.0f / 3.0f, INFINITY},
                  {"io_numpy_scalar.npy", 0, {0}, 7.25f, 7.25f},
                  {"io_numpy_v2.npy", 1, {4}, 0.0f, 3.0f},
                  {"io_numpy_v3.npy", 2, {1, 2}, -1.0f, 1.0f},
                  {"io_numpy_1d.npy", 1, {70}, 0.0f, 69.0f},
                  {"io_numpy_empty.npy", 2, {0, 3}, 0, 0}};
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
        const char *q = tu_ref_path(others[k].file);
        need_ref(q);
        if (attn_npy_load_f32(q, &x, &nd, sh)) fail_msg("%s", attn_last_error());
        assert_int_equal(nd, others[k].nd);
        size_t numel = 1;
        for (int i = 0; i < nd; i++) {
            assert_int_equal(sh[i], others[k].sh[i]);
            numel *= (size_t)sh[i];
        }
        if (numel && (x[0] != others[k].first || x[numel - 1] != others[k].last))
            fail_msg("%s: got %g .. %g", q, (double)x[0], (double)x[numel - 1]);
        /* re-saved from C: identical to numpy's bytes for float32 v1.0 files */
        if (k >= 1 && k != 2 && k != 3) {
            assert_int_equal(attn_npy_save_f32(mine, x, nd, sh), ATTN_STATUS_OK);
            a = read_all(q, &n1);
            b = read_all(mine, &n2);
            if (n1 != n2 || memcmp(a, b, n1)) fail_msg("%s: C output differs from numpy's", q);
            free(a);
            free(b);
        }
        attn_free(x);
    }
}

/* attn_st_save(rp, e) must fail with ATTN_STATUS_IO and "Permission denied"; 0 if it did. */
static int save_refused(const char *rp, const attn_st_entry *e) {
    const attn_status st = attn_st_save(rp, e, 1, NULL);
    const char *msg = attn_last_error();
    if (!tu_quiet()) printf("  [%s] %s\n", attn_status_str(st), msg);
    fflush(stdout); /* a child leaves by _exit */
    return st == ATTN_STATUS_IO && strstr(msg, rp) && strstr(msg, "Permission denied") ? 0 : 1;
}

/* test_st_save_atomic's case 3: saving into a read-only directory fails cleanly, leaving no
 * temporary. Root ignores directory permissions, so as root the save runs in a child process
 * that has given up root for the unprivileged uid and gid 65534 (nobody). */
static void test_st_save_readonly_dir(void **state) {
    (void)state;
    float old[4] = {1, 2, 3, 4};
    attn_st_entry e = {"w", ATTN_DTYPE_F32, 1, {4}, old};
    const char *ro = tu_tmp("ro");
    assert_int_equal(mkdir(ro, 0555), 0);
    char rp[1024];
    snprintf(rp, sizeof rp, "%s", tu_tmp("ro/x.safetensors"));
    if (geteuid() != 0) {
        assert_int_equal(save_refused(rp, &e), 0);
    } else {
        struct stat sb;
        assert_int_equal(stat(tu_dir, &sb), 0);
        assert_int_equal(chmod(tu_dir, 0711), 0); /* nobody may pass through to ro */
        fflush(NULL);
        const pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) _exit(setgid(65534) || setuid(65534) || geteuid() == 0 ? 2 : save_refused(rp, &e));
        int ws = 0;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        chmod(tu_dir, sb.st_mode & 07777);
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            fail_msg("the unprivileged save into %s: %s", ro,
                     WIFEXITED(ws) && WEXITSTATUS(ws) == 2 ? "could not drop root"
                                                           : "did not fail with a permission error");
    }
    assert_int_equal(count_temporaries(ro), 0);
    chmod(ro, 0755);
    rmdir(ro);
}

/* C-written files read back by Python (tools/check_io.py), when the project venv is present. */
static void test_interop_c_to_python(void **state) {
    (void)state;
    const char *py = ".venv/bin/python";
    if (access(py, X_OK) != 0 || access("tools/check_io.py", R_OK) != 0)
        tu_skip("%s or tools/check_io.py not found (run from the repository root)", py);
    float f32[6] = {0.5f, -1.25f, 3.0f, 1e-3f, -0.0f, 65504.0f};
    uint16_t f16[3] = {0x3c00, 0xc000, 0x7c00};
    uint16_t bf16[3] = {0x3f80, 0x4049, 0xff80};
    double f64[2] = {0.1, -2.5};
    int64_t i64[3] = {1, -2, (int64_t)1 << 40};
    attn_st_entry e[] = {{"f32", ATTN_DTYPE_F32, 2, {2, 3}, f32},
                         {"f16", ATTN_DTYPE_F16, 1, {3}, f16},
                         {"bf16", ATTN_DTYPE_BF16, 1, {3}, bf16},
                         {"f64", ATTN_DTYPE_F64, 2, {1, 2}, f64},
                         {"i64", ATTN_DTYPE_I64, 1, {3}, i64},
                         {"scalar", ATTN_DTYPE_F32, 0, {0}, f32}};
    const char *meta[] = {"writer", "attn", "format", "pt", NULL};
    char st[1024], np[1024];
    snprintf(st, sizeof st, "%s", tu_tmp("io_c.safetensors"));
    snprintf(np, sizeof np, "%s", tu_tmp("io_c.npy"));
    assert_int_equal(attn_st_save(st, e, 6, meta), ATTN_STATUS_OK);
    int64_t sh[2] = {2, 3};
    assert_int_equal(attn_npy_save_f32(np, f32, 2, sh), ATTN_STATUS_OK);
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "%s tools/check_io.py '%s' '%s'", py, st, np);
    fflush(stdout);
    int rc = system(cmd);
    if (rc != 0) fail_msg("tools/check_io.py failed (status %d)", rc);
}

/* ---- driver ---- */


int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "io")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_memory),
        cmocka_unit_test(test_reader_file),
        cmocka_unit_test(test_st_roundtrip),
        cmocka_unit_test(test_half_sweep),
        cmocka_unit_test(test_st_int_range),
        cmocka_unit_test(test_st_chunked),
        cmocka_unit_test(test_st_bad_length),
        cmocka_unit_test(test_st_bad_huge_header),
        cmocka_unit_test(test_st_bad_json),
        cmocka_unit_test(test_st_bad_entries),
        cmocka_unit_test(test_st_edge_ok),
        cmocka_unit_test(test_st_truncated_file),
        cmocka_unit_test(test_st_names_escaped),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_st_save_errors),
        cmocka_unit_test(test_st_save_atomic),
        cmocka_unit_test(test_st_save_readonly_dir),
        cmocka_unit_test(test_npy_roundtrip),
        cmocka_unit_test(test_npy_variants),
        cmocka_unit_test(test_npy_bad),
        cmocka_unit_test(test_interop_python_to_c),
        cmocka_unit_test(test_interop_c_to_python),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}

/* test_gguf.c — the GGUF reader and writer (include/attn_gguf.h) against the `gguf` Python
 * package (llama.cpp's own reader and writer, 0.17.1):
 *
 *   read_python    files GGUFWriter wrote (tools/ref_gguf.py, into $ATTN_REF_DIR/gguf/): every
 *                  metadata value (every type, arrays of every type, arrays of arrays, NUL bytes
 *                  in strings, inf / NaN / -0 / denormal floats, bit for bit) and every tensor
 *                  (17 ggml types, 1-4 dimensions, alignment 32 and 64: name, type, ne, offset,
 *                  size, bytes), through the mapping, a memory buffer and a plain file reader;
 *                  the same file as version 2; the typed getters and their errors.
 *   write_python   attn writes the same metadata and tensors: the bytes are identical to
 *                  GGUFWriter's, whole and when streamed in pieces, and GGUFReader reads the file
 *                  back as expected (ref_gguf.py --check).
 *   roundtrip      what the Python writer cannot make: empty arrays, no tensors, empty tensors,
 *                  0 dimensions, alignments 1 and 4096, three levels of nested arrays; the
 *                  writer's argument checks and its atomicity (a failed write leaves the old file).
 *   bad_input      hand-built corrupt files: wrong magic, versions 1, 4 and big-endian, counts
 *                  and string lengths past the end, unknown and removed types, too many
 *                  dimensions, shape overflow, ne[0] not a multiple of the block, duplicate keys
 *                  and tensor names, a bad general.alignment, misaligned, overlapping and
 *                  out-of-file tensors, a bool of 2, arrays nested too deep, empty and NUL keys:
 *                  each its status and a one-line message naming the file and the field.
 *   truncated      every prefix of a real file (the Python-written one) fails cleanly.
 *   real_files     llama.cpp's vocabulary GGUFs (versions 2 and 3) open; the real
 *                  SmolLM2-135M-Instruct Q4_1 file's 272 tensor infos and first bytes equal
 *                  GGUFReader's.
 * Under valgrind the truncation sweep takes every 13th prefix. */
#include "attn_gguf.h"
#include "tu.h"

#include <jansson.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the expectation JSON of tools/ref_gguf.py ---- */

static json_t *g_expect;

static json_t *expect(void) {
    if (g_expect) return g_expect;
    size_t n;
    char *txt = tu_read_all(tu_ref_path("gguf_expect.json"), &n);
    if (!txt) tu_skip("%s missing (tools/ref_gguf.py)", tu_ref_path("gguf_expect.json"));
    json_error_t err;
    g_expect = json_loadb(txt, n, 0, &err);
    free(txt);
    if (!g_expect) fail_msg("gguf_expect.json: %s", err.text);
    return g_expect;
}

static json_t *expect_file(const char *name) {
    json_t *f = json_object_get(json_object_get(expect(), "files"), name);
    if (!f) fail_msg("gguf_expect.json has no file %s", name);
    return f;
}

static int hexval(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

/* A hex string as bytes (malloc'd, *n of them). */
static unsigned char *unhex(const char *h, size_t *n) {
    size_t k = strlen(h) / 2;
    unsigned char *b = malloc(k + 1);
    assert_non_null(b);
    for (size_t i = 0; i < k; i++) b[i] = (unsigned char)(hexval(h[2 * i]) << 4 | hexval(h[2 * i + 1]));
    *n = k;
    return b;
}

static int type_by_name(const char *s) {
    for (int t = 0; t <= ATTN_GGUF_TYPE_FLOAT64; t++)
        if (!strcmp(attn_gguf_type_name((attn_gguf_type)t), s)) return t;
    fail_msg("unknown type name %s", s);
    return -1;
}

/* A value's leaf as JSON compares equal to the value at p (host layout) of type t. */
static bool leaf_eq(int t, const void *p, json_t *j) {
    switch (t) {
    case ATTN_GGUF_TYPE_UINT8: return *(const uint8_t *)p == json_integer_value(j);
    case ATTN_GGUF_TYPE_INT8: return *(const int8_t *)p == json_integer_value(j);
    case ATTN_GGUF_TYPE_UINT16: return *(const uint16_t *)p == json_integer_value(j);
    case ATTN_GGUF_TYPE_INT16: return *(const int16_t *)p == json_integer_value(j);
    case ATTN_GGUF_TYPE_UINT32: return *(const uint32_t *)p == json_integer_value(j);
    case ATTN_GGUF_TYPE_INT32: return *(const int32_t *)p == json_integer_value(j);
    case ATTN_GGUF_TYPE_BOOL: return *(const bool *)p == json_is_true(j);
    case ATTN_GGUF_TYPE_UINT64: return *(const uint64_t *)p == strtoull(json_string_value(j), NULL, 10);
    case ATTN_GGUF_TYPE_INT64: return *(const int64_t *)p == strtoll(json_string_value(j), NULL, 10);
    case ATTN_GGUF_TYPE_FLOAT32: {
        uint32_t u;
        memcpy(&u, p, 4);
        return u == (uint32_t)strtoul(json_string_value(j), NULL, 16);
    }
    case ATTN_GGUF_TYPE_FLOAT64: {
        uint64_t u;
        memcpy(&u, p, 8);
        return u == strtoull(json_string_value(j), NULL, 16);
    }
    case ATTN_GGUF_TYPE_STRING: {
        const attn_gguf_str *s = p;
        size_t n;
        unsigned char *b = unhex(json_string_value(j), &n);
        bool ok = s->len == n && !memcmp(s->s, b, n) && s->s[n] == '\0';
        free(b);
        return ok;
    }
    default: return false;
    }
}

static size_t leaf_size(int t) {
    return t == ATTN_GGUF_TYPE_STRING  ? sizeof(attn_gguf_str)
           : t == ATTN_GGUF_TYPE_ARRAY ? sizeof(attn_gguf_value)
           : t == ATTN_GGUF_TYPE_BOOL  ? sizeof(bool)
           : t == ATTN_GGUF_TYPE_UINT8 || t == ATTN_GGUF_TYPE_INT8     ? 1
           : t == ATTN_GGUF_TYPE_UINT16 || t == ATTN_GGUF_TYPE_INT16   ? 2
           : t == ATTN_GGUF_TYPE_UINT32 || t == ATTN_GGUF_TYPE_INT32 ||
                   t == ATTN_GGUF_TYPE_FLOAT32                          ? 4
                                                                        : 8;
}

static bool value_eq(const attn_gguf_value *v, int type, json_t *j) {
    if ((int)v->type != type) return false;
    if (type != ATTN_GGUF_TYPE_ARRAY) return leaf_eq(type, &v->v, j);
    int et = type_by_name(json_string_value(json_object_get(j, "elem")));
    json_t *items = json_object_get(j, "value");
    if ((int)v->v.arr.type != et || v->v.arr.n != json_array_size(items)) return false;
    for (size_t i = 0; i < v->v.arr.n; i++) {
        const void *p = (const char *)v->v.arr.data + i * leaf_size(et);
        bool ok = et == ATTN_GGUF_TYPE_ARRAY ? value_eq(p, et, json_array_get(items, i))
                                             : leaf_eq(et, p, json_array_get(items, i));
        if (!ok) return false;
    }
    return true;
}

/* ---- building values from the expectation (for the writer) ---- */

typedef struct {
    void *p[4096];
    int n;
} pool;

static void *pool_alloc(pool *pl, size_t n) {
    assert_true(pl->n < 4096);
    void *p = calloc(1, n ? n : 1);
    assert_non_null(p);
    return pl->p[pl->n++] = p;
}

static void pool_free(pool *pl) {
    for (int i = 0; i < pl->n; i++) free(pl->p[i]);
    pl->n = 0;
}

static void leaf_from(pool *pl, int t, json_t *j, void *out) {
    switch (t) {
    case ATTN_GGUF_TYPE_UINT8: *(uint8_t *)out = (uint8_t)json_integer_value(j); break;
    case ATTN_GGUF_TYPE_INT8: *(int8_t *)out = (int8_t)json_integer_value(j); break;
    case ATTN_GGUF_TYPE_UINT16: *(uint16_t *)out = (uint16_t)json_integer_value(j); break;
    case ATTN_GGUF_TYPE_INT16: *(int16_t *)out = (int16_t)json_integer_value(j); break;
    case ATTN_GGUF_TYPE_UINT32: *(uint32_t *)out = (uint32_t)json_integer_value(j); break;
    case ATTN_GGUF_TYPE_INT32: *(int32_t *)out = (int32_t)json_integer_value(j); break;
    case ATTN_GGUF_TYPE_BOOL: *(bool *)out = json_is_true(j); break;
    case ATTN_GGUF_TYPE_UINT64: *(uint64_t *)out = strtoull(json_string_value(j), NULL, 10); break;
    case ATTN_GGUF_TYPE_INT64: *(int64_t *)out = strtoll(json_string_value(j), NULL, 10); break;
    case ATTN_GGUF_TYPE_FLOAT32: {
        uint32_t u = (uint32_t)strtoul(json_string_value(j), NULL, 16);
        memcpy(out, &u, 4);
        break;
    }
    case ATTN_GGUF_TYPE_FLOAT64: {
        uint64_t u = strtoull(json_string_value(j), NULL, 16);
        memcpy(out, &u, 8);
        break;
    }
    case ATTN_GGUF_TYPE_STRING: {
        size_t n;
        unsigned char *b = unhex(json_string_value(j), &n);
        char *c = pool_alloc(pl, n + 1);
        memcpy(c, b, n);
        free(b);
        ((attn_gguf_str *)out)->s = c;
        ((attn_gguf_str *)out)->len = n;
        break;
    }
    default: fail_msg("leaf type %d", t);
    }
}

static void value_from(pool *pl, int type, json_t *j, attn_gguf_value *v) {
    memset(v, 0, sizeof *v);
    v->type = (attn_gguf_type)type;
    if (type != ATTN_GGUF_TYPE_ARRAY) {
        leaf_from(pl, type, j, &v->v);
        return;
    }
    int et = type_by_name(json_string_value(json_object_get(j, "elem")));
    json_t *items = json_object_get(j, "value");
    size_t n = json_array_size(items);
    char *data = pool_alloc(pl, n * leaf_size(et));
    for (size_t i = 0; i < n; i++) {
        if (et == ATTN_GGUF_TYPE_ARRAY)
            value_from(pl, et, json_array_get(items, i), (attn_gguf_value *)(data + i * leaf_size(et)));
        else
            leaf_from(pl, et, json_array_get(items, i), data + i * leaf_size(et));
    }
    v->v.arr.type = (attn_gguf_type)et;
    v->v.arr.n = n;
    v->v.arr.data = data;
}

/* The metadata and tensors of an expectation, for attn_gguf_save. */
static void from_expect(pool *pl, json_t *f, attn_gguf_kv **kv, size_t *nkv,
                        attn_gguf_tensor_desc **t, size_t *nt) {
    json_t *kvs = json_object_get(f, "kv"), *ts = json_object_get(f, "tensors");
    *nkv = json_array_size(kvs);
    *nt = json_array_size(ts);
    *kv = pool_alloc(pl, *nkv * sizeof **kv);
    *t = pool_alloc(pl, *nt * sizeof **t);
    for (size_t i = 0; i < *nkv; i++) {
        json_t *e = json_array_get(kvs, i);
        (*kv)[i].key = json_string_value(json_object_get(e, "key"));
        value_from(pl, type_by_name(json_string_value(json_object_get(e, "type"))),
                   json_object_get(e, "value"), &(*kv)[i].val);
    }
    for (size_t i = 0; i < *nt; i++) {
        json_t *e = json_array_get(ts, i), *ne = json_object_get(e, "ne");
        attn_gguf_tensor_desc *d = &(*t)[i];
        d->name = json_string_value(json_object_get(e, "name"));
        d->type = (attn_gguf_dtype)json_integer_value(json_object_get(e, "type"));
        d->n_dims = (int)json_array_size(ne);
        for (int k = 0; k < d->n_dims; k++) d->ne[k] = json_integer_value(json_array_get(ne, k));
        size_t n;
        unsigned char *b = unhex(json_string_value(json_object_get(e, "hex")), &n);
        void *c = pool_alloc(pl, n);
        memcpy(c, b, n);
        free(b);
        d->data = c;
    }
}

/* ---- reading what Python wrote ---- */

/* g holds exactly the expectation f; mapped: tensor data has a pointer. */
static void check_against(const attn_gguf *g, json_t *f, bool mapped) {
    json_t *kvs = json_object_get(f, "kv"), *ts = json_object_get(f, "tensors");
    assert_int_equal(attn_gguf_version(g), 3);
    assert_int_equal(attn_gguf_alignment(g), json_integer_value(json_object_get(f, "alignment")));
    assert_int_equal(attn_gguf_kv_count(g), json_array_size(kvs));
    for (size_t i = 0; i < json_array_size(kvs); i++) {
        json_t *e = json_array_get(kvs, i);
        const attn_gguf_kv *kv = attn_gguf_kv_at(g, i);
        const char *key = json_string_value(json_object_get(e, "key"));
        assert_string_equal(kv->key, key);
        assert_ptr_equal(attn_gguf_find(g, key), &kv->val);
        if (!value_eq(&kv->val, type_by_name(json_string_value(json_object_get(e, "type"))),
                      json_object_get(e, "value")))
            fail_msg("%s: key %s differs from what GGUFWriter was given", attn_gguf_name(g), key);
    }
    assert_null(attn_gguf_kv_at(g, json_array_size(kvs)));
    assert_int_equal(attn_gguf_tensor_count(g), json_array_size(ts));
    uint64_t base = attn_gguf_data_offset(g);
    assert_int_equal(base % attn_gguf_alignment(g), 0);
    for (size_t i = 0; i < json_array_size(ts); i++) {
        json_t *e = json_array_get(ts, i), *ne = json_object_get(e, "ne");
        const attn_gguf_tensor *t = attn_gguf_tensor_at(g, i);
        assert_string_equal(t->name, json_string_value(json_object_get(e, "name")));
        assert_ptr_equal(attn_gguf_find_tensor(g, t->name), t);
        assert_int_equal(t->type, json_integer_value(json_object_get(e, "type")));
        assert_int_equal(t->n_dims, json_array_size(ne));
        uint64_t n = 1;
        for (int k = 0; k < t->n_dims; k++) {
            assert_int_equal(t->ne[k], json_integer_value(json_array_get(ne, k)));
            assert_int_equal(t->shape[t->n_dims - 1 - k], t->ne[k]);
            n *= (uint64_t)t->ne[k];
        }
        for (int k = t->n_dims; k < ATTN_GGUF_MAX_DIMS; k++) assert_int_equal(t->ne[k], 1);
        assert_int_equal(t->n_elements, n);
        assert_int_equal(t->offset, base + (uint64_t)json_integer_value(json_object_get(e, "offset")));
        assert_int_equal(t->nbytes, json_integer_value(json_object_get(e, "nbytes")));
        size_t nb;
        unsigned char *want = unhex(json_string_value(json_object_get(e, "hex")), &nb);
        unsigned char *got = malloc(nb + 1);
        assert_int_equal(attn_gguf_read_tensor(g, t, got), ATTN_STATUS_OK);
        assert_memory_equal(got, want, nb);
        const void *p = attn_gguf_tensor_data(g, t);
        if (mapped) assert_memory_equal(p, want, nb);
        else assert_null(p);
        free(got);
        free(want);
    }
    assert_null(attn_gguf_tensor_at(g, json_array_size(ts)));
    assert_null(attn_gguf_find_tensor(g, "no such tensor"));
    assert_null(attn_gguf_find(g, "no.such.key"));
}

static void test_read_python(void **state) {
    (void)state;
    const char *names[2] = {"types", "align64"};
    for (int k = 0; k < 2; k++) {
        json_t *f = expect_file(names[k]);
        const char *path = json_string_value(json_object_get(f, "path"));
        attn_gguf *g;
        if (attn_gguf_open(path, &g)) fail_msg("%s", attn_last_error());
        check_against(g, f, true);
        attn_gguf_close(g);
        attn_reader r;
        assert_int_equal(attn_reader_open_file(path, &r), ATTN_STATUS_OK);
        if (attn_gguf_open_reader(r, &g)) fail_msg("%s", attn_last_error());
        check_against(g, f, false);
        attn_gguf_close(g);
        size_t n;
        char *buf = tu_read_all(path, &n);
        if (attn_gguf_open_memory(buf, n, "mem.gguf", &g)) fail_msg("%s", attn_last_error());
        assert_string_equal(attn_gguf_name(g), "mem.gguf");
        check_against(g, f, true);
        attn_gguf_close(g);
        /* version 2 has the same layout */
        buf[4] = 2;
        assert_int_equal(attn_gguf_open_memory(buf, n, "v2.gguf", &g), ATTN_STATUS_OK);
        assert_int_equal(attn_gguf_version(g), 2);
        assert_int_equal(attn_gguf_kv_count(g), json_array_size(json_object_get(f, "kv")));
        attn_gguf_close(g);
        free(buf);
        printf("  %s: %zu keys and %zu tensors as GGUFWriter wrote them (mapped, file reader, "
               "memory, as version 2)\n",
               names[k], json_array_size(json_object_get(f, "kv")),
               json_array_size(json_object_get(f, "tensors")));
    }
    /* the typed getters */
    attn_gguf *g;
    assert_int_equal(attn_gguf_open(json_string_value(json_object_get(expect_file("types"), "path")), &g),
                     ATTN_STATUS_OK);
    uint32_t u32;
    int32_t i32;
    uint64_t u64, len;
    float f32;
    bool b;
    int64_t i64;
    double d;
    const char *s;
    const void *data;
    assert_int_equal(attn_gguf_get_u32(g, "test.u32", &u32), ATTN_STATUS_OK);
    assert_int_equal(u32, 4294967295u);
    assert_int_equal(attn_gguf_get_i32(g, "test.i32", &i32), ATTN_STATUS_OK);
    assert_int_equal(i32, INT32_MIN);
    assert_int_equal(attn_gguf_get_u64(g, "test.u64", &u64), ATTN_STATUS_OK);
    assert_true(u64 == UINT64_MAX);
    assert_int_equal(attn_gguf_get_f32(g, "test.f32", &f32), ATTN_STATUS_OK);
    assert_true(f32 == -1.5f);
    assert_int_equal(attn_gguf_get_bool(g, "test.bool_true", &b), ATTN_STATUS_OK);
    assert_true(b);
    assert_int_equal(attn_gguf_get_str(g, "test.string_nul", &s, &len), ATTN_STATUS_OK);
    assert_int_equal(len, 4);
    assert_memory_equal(s, "a\0b\0", 5);
    assert_int_equal(attn_gguf_get_int(g, "test.i8", &i64), ATTN_STATUS_OK);
    assert_int_equal(i64, -128);
    assert_int_equal(attn_gguf_get_int(g, "test.u32", &i64), ATTN_STATUS_OK);
    assert_int_equal(i64, 4294967295LL);
    assert_int_equal(attn_gguf_get_int(g, "test.i64", &i64), ATTN_STATUS_OK);
    assert_true(i64 == INT64_MIN);
    assert_int_equal(attn_gguf_get_float(g, "test.f64", &d), ATTN_STATUS_OK);
    assert_true(d == 3.141592653589793);
    assert_int_equal(attn_gguf_get_float(g, "test.f32_inf", &d), ATTN_STATUS_OK);
    assert_true(isinf(d));
    assert_int_equal(attn_gguf_get_arr(g, "test.arr_i32", ATTN_GGUF_TYPE_INT32, &data, &u64),
                     ATTN_STATUS_OK);
    assert_int_equal(u64, 3);
    assert_int_equal(((const int32_t *)data)[1], INT32_MAX);
    tu_expect_fail(attn_gguf_get_str(g, "test.u32", &s, NULL), ATTN_STATUS_FORMAT,
                   "key 'test.u32' is u32, expected string", "types.gguf");
    tu_expect_fail(attn_gguf_get_u32(g, "llama.block_count", &u32), ATTN_STATUS_NOT_FOUND,
                   "no key 'llama.block_count'", "types.gguf");
    tu_expect_fail(attn_gguf_get_int(g, "test.u64", &i64), ATTN_STATUS_TOO_LARGE, "test.u64",
                   "too large");
    tu_expect_fail(attn_gguf_get_int(g, "test.f32", &i64), ATTN_STATUS_FORMAT,
                   "is f32, expected an integer", NULL);
    tu_expect_fail(attn_gguf_get_float(g, "test.string", &d), ATTN_STATUS_FORMAT,
                   "is string, expected f32 or f64", NULL);
    tu_expect_fail(attn_gguf_get_arr(g, "test.arr_i32", ATTN_GGUF_TYPE_UINT32, &data, &u64),
                   ATTN_STATUS_FORMAT, "is an array of i32, expected an array of u32", NULL);
    tu_expect_fail(attn_gguf_get_arr(g, "test.u8", ATTN_GGUF_TYPE_UINT8, &data, &u64),
                   ATTN_STATUS_FORMAT, "is u8, expected an array of u8", NULL);
    attn_gguf_close(g);
}

/* ---- writing what Python reads ---- */

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read_all(a, &na), *y = tu_read_all(b, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    if (!same && x && y) {
        size_t i = 0;
        while (i < na && i < nb && x[i] == y[i]) i++;
        printf("  %s and %s differ at byte %zu (sizes %zu, %zu)\n", a, b, i, na, nb);
    }
    free(x);
    free(y);
    return same;
}

static void test_write_python(void **state) {
    (void)state;
    const char *names[2] = {"types", "align64"};
    const char *py = ".venv/bin/python";
    bool have_py = access(py, X_OK) == 0 && access("tools/ref_gguf.py", R_OK) == 0;
    for (int k = 0; k < 2; k++) {
        json_t *f = expect_file(names[k]);
        pool pl = {{0}, 0};
        attn_gguf_kv *kv;
        attn_gguf_tensor_desc *t;
        size_t nkv, nt;
        from_expect(&pl, f, &kv, &nkv, &t, &nt);
        char path[1024], path2[1024];
        snprintf(path, sizeof path, "%s", tu_tmp("c.gguf"));
        snprintf(path2, sizeof path2, "%s", tu_tmp("c_streamed.gguf"));
        if (attn_gguf_save(path, kv, nkv, t, nt)) fail_msg("%s", attn_last_error());
        const char *pyfile = json_string_value(json_object_get(f, "path"));
        if (!same_file(path, pyfile)) fail_msg("attn's %s is not GGUFWriter's byte for byte", names[k]);
        /* streamed in pieces of 7 bytes */
        attn_gguf_writer *w;
        if (attn_gguf_writer_open(path2, kv, nkv, t, nt, &w)) fail_msg("%s", attn_last_error());
        for (size_t i = 0; i < nt; i++) {
            uint64_t nb;
            assert_true(attn_gguf_nbytes(t[i].type, t[i].n_dims, t[i].ne, &nb));
            for (uint64_t o = 0; o < nb; o += 7)
                assert_int_equal(attn_gguf_writer_write(w, (const char *)t[i].data + o,
                                                        (size_t)(nb - o < 7 ? nb - o : 7)),
                                 ATTN_STATUS_OK);
        }
        assert_int_equal(attn_gguf_writer_finish(w), ATTN_STATUS_OK);
        if (!same_file(path2, pyfile)) fail_msg("the streamed %s differs", names[k]);
        printf("  %s: attn's file is GGUFWriter's, byte for byte (%zu keys, %zu tensors; also "
               "streamed)\n", names[k], nkv, nt);
        if (have_py) {
            char cmd[8192];
            snprintf(cmd, sizeof cmd, "%s tools/ref_gguf.py --check '%s' '%s' %s", py, path,
                     tu_ref_path("gguf_expect.json"), names[k]);
            int rc = tu_sh_indented(cmd, "  ");
            if (rc) fail_msg("GGUFReader disagrees with attn's %s (status %d)", names[k], rc);
        }
        pool_free(&pl);
    }
    if (!have_py) tu_skip("%s or tools/ref_gguf.py not found (run from the repository root)", py);
}

/* ---- round trips of what Python cannot write ---- */

static attn_gguf *reopen(const char *path) {
    attn_gguf *g;
    if (attn_gguf_open(path, &g)) fail_msg("%s", attn_last_error());
    return g;
}

static void test_roundtrip(void **state) {
    (void)state;
    const char *path = tu_tmp("rt.gguf");
    /* empty arrays, nested three deep, NaN bits, no tensors */
    int32_t none[1] = {0};
    int32_t in1[2] = {5, -6};
    attn_gguf_value lvl2[1], lvl1[2];
    lvl2[0] = attn_gguf_kv_arr("", ATTN_GGUF_TYPE_INT32, 2, in1).val;
    lvl1[0] = attn_gguf_kv_arr("", ATTN_GGUF_TYPE_ARRAY, 1, lvl2).val;
    lvl1[1] = attn_gguf_kv_arr("", ATTN_GGUF_TYPE_ARRAY, 0, NULL).val;
    uint32_t nan_bits = 0x7fc00001u;
    float nanf_;
    memcpy(&nanf_, &nan_bits, 4);
    bool bools[3] = {true, false, true};
    attn_gguf_kv kv[] = {
        attn_gguf_kv_arr("empty.i32", ATTN_GGUF_TYPE_INT32, 0, none),
        attn_gguf_kv_arr("empty.str", ATTN_GGUF_TYPE_STRING, 0, NULL),
        attn_gguf_kv_arr("nested", ATTN_GGUF_TYPE_ARRAY, 2, lvl1),
        attn_gguf_kv_f32("nan", nanf_),
        attn_gguf_kv_arr("bools", ATTN_GGUF_TYPE_BOOL, 3, bools),
        attn_gguf_kv_str("s", ""),
        attn_gguf_kv_u64("u", 1),
        attn_gguf_kv_i32("i", -1),
        attn_gguf_kv_bool("b", false),
    };
    size_t nkv = sizeof kv / sizeof kv[0];
    assert_int_equal(attn_gguf_save(path, kv, nkv, NULL, 0), ATTN_STATUS_OK);
    attn_gguf *g = reopen(path);
    assert_int_equal(attn_gguf_kv_count(g), nkv);
    assert_int_equal(attn_gguf_tensor_count(g), 0);
    const attn_gguf_value *v = attn_gguf_find(g, "nested");
    assert_non_null(v);
    assert_int_equal(v->v.arr.n, 2);
    const attn_gguf_value *a1 = v->v.arr.data;
    assert_int_equal(a1[0].v.arr.type, ATTN_GGUF_TYPE_ARRAY);
    const attn_gguf_value *a2 = a1[0].v.arr.data;
    assert_int_equal(a2[0].v.arr.n, 2);
    assert_int_equal(((const int32_t *)a2[0].v.arr.data)[1], -6);
    assert_int_equal(a1[1].v.arr.n, 0);
    assert_int_equal(attn_gguf_find(g, "empty.str")->v.arr.n, 0);
    uint32_t got_bits;
    memcpy(&got_bits, &attn_gguf_find(g, "nan")->v.f32, 4);
    assert_int_equal(got_bits, nan_bits);
    assert_true(((const bool *)attn_gguf_find(g, "bools")->v.arr.data)[2]);
    attn_gguf_close(g);

    /* tensors: empty, 0 dimensions, alignments 1 and 4096 */
    static const uint32_t aligns[2] = {1, 4096};
    for (int k = 0; k < 2; k++) {
        float x[5] = {1, 2, 3, 4, 5}, one = 7;
        int8_t q8[34 * 2] = {0};
        attn_gguf_kv akv[1] = {attn_gguf_kv_u32("general.alignment", aligns[k])};
        attn_gguf_tensor_desc t[4] = {
            {"x", ATTN_GGUF_DTYPE_F32, 1, {5}, x},
            {"empty", ATTN_GGUF_DTYPE_F16, 2, {0, 3}, NULL},
            {"scalar", ATTN_GGUF_DTYPE_F32, 0, {0}, &one},
            {"q", ATTN_GGUF_DTYPE_Q8_0, 2, {32, 2}, q8},
        };
        assert_int_equal(attn_gguf_save(path, akv, 1, t, 4), ATTN_STATUS_OK);
        g = reopen(path);
        assert_int_equal(attn_gguf_alignment(g), aligns[k]);
        assert_int_equal(attn_gguf_data_offset(g) % aligns[k], 0);
        const attn_gguf_tensor *e = attn_gguf_find_tensor(g, "empty");
        assert_int_equal(e->nbytes, 0);
        assert_int_equal(e->n_elements, 0);
        const attn_gguf_tensor *sc = attn_gguf_find_tensor(g, "scalar");
        assert_int_equal(sc->n_dims, 0);
        assert_int_equal(sc->n_elements, 1);
        float got; /* with alignment 1 the data may sit at any address */
        memcpy(&got, attn_gguf_tensor_data(g, sc), sizeof got);
        assert_true(got == 7.0f);
        const attn_gguf_tensor *q = attn_gguf_find_tensor(g, "q");
        assert_int_equal(q->nbytes, 68);
        assert_int_equal(q->shape[0], 2);
        assert_int_equal(q->shape[1], 32);
        for (size_t i = 0; i < 4; i++)
            assert_int_equal((attn_gguf_tensor_at(g, i)->offset - attn_gguf_data_offset(g)) %
                                 aligns[k], 0);
        assert_memory_equal(attn_gguf_tensor_data(g, attn_gguf_find_tensor(g, "x")), x, sizeof x);
        attn_gguf_close(g);
    }

    /* the writer's argument checks; the file written first stays */
    float x[2] = {1, 2};
    attn_gguf_tensor_desc good = {"x", ATTN_GGUF_DTYPE_F32, 1, {2}, x};
    assert_int_equal(attn_gguf_save(path, kv, 1, &good, 1), ATTN_STATUS_OK);
    size_t n0;
    char *before = tu_read_all(path, &n0);
    attn_gguf_kv dup[2] = {attn_gguf_kv_u32("a", 1), attn_gguf_kv_str("a", "x")};
    tu_expect_fail(attn_gguf_save(path, dup, 2, NULL, 0), ATTN_STATUS_INVALID_ARGUMENT,
                   "duplicate key 'a'", NULL);
    attn_gguf_tensor_desc two[2] = {good, good};
    tu_expect_fail(attn_gguf_save(path, NULL, 0, two, 2), ATTN_STATUS_INVALID_ARGUMENT,
                   "duplicate tensor name 'x'", NULL);
    attn_gguf_kv badal = attn_gguf_kv_u32("general.alignment", 48);
    tu_expect_fail(attn_gguf_save(path, &badal, 1, NULL, 0), ATTN_STATUS_INVALID_ARGUMENT,
                   "general.alignment", "power of two");
    badal = attn_gguf_kv_u64("general.alignment", 64);
    tu_expect_fail(attn_gguf_save(path, &badal, 1, NULL, 0), ATTN_STATUS_INVALID_ARGUMENT,
                   "general.alignment", NULL);
    attn_gguf_kv empty_key = attn_gguf_kv_u32("", 1);
    tu_expect_fail(attn_gguf_save(path, &empty_key, 1, NULL, 0), ATTN_STATUS_INVALID_ARGUMENT,
                   "key 0 is empty", NULL);
    attn_gguf_tensor_desc bad = {"q", ATTN_GGUF_DTYPE_Q4_0, 1, {33}, x};
    tu_expect_fail(attn_gguf_save(path, NULL, 0, &bad, 1), ATTN_STATUS_INVALID_ARGUMENT,
                   "tensor 'q': ne[0] 33 is not a multiple of the block size 32 of Q4_0", NULL);
    bad = (attn_gguf_tensor_desc){"r", (attn_gguf_dtype)4, 1, {32}, x};
    tu_expect_fail(attn_gguf_save(path, NULL, 0, &bad, 1), ATTN_STATUS_INVALID_ARGUMENT,
                   "tensor 'r'", "not a ggml type");
    bad = (attn_gguf_tensor_desc){"n", ATTN_GGUF_DTYPE_F32, 5, {1, 1, 1, 1}, x};
    tu_expect_fail(attn_gguf_save(path, NULL, 0, &bad, 1), ATTN_STATUS_INVALID_ARGUMENT,
                   "tensor 'n': 5 dimensions", NULL);
    bad = (attn_gguf_tensor_desc){"big", ATTN_GGUF_DTYPE_F32, 2, {INT64_MAX / 2, 4}, x};
    tu_expect_fail(attn_gguf_save(path, NULL, 0, &bad, 1), ATTN_STATUS_INVALID_ARGUMENT,
                   "tensor 'big': its byte size overflows", NULL);
    bad = (attn_gguf_tensor_desc){"neg", ATTN_GGUF_DTYPE_F32, 2, {2, -1}, x};
    tu_expect_fail(attn_gguf_save(path, NULL, 0, &bad, 1), ATTN_STATUS_INVALID_ARGUMENT,
                   "tensor 'neg': ne[1] is -1", NULL);
    bad = (attn_gguf_tensor_desc){"nodata", ATTN_GGUF_DTYPE_F32, 1, {2}, NULL};
    tu_expect_fail(attn_gguf_save(path, NULL, 0, &bad, 1), ATTN_STATUS_INVALID_ARGUMENT,
                   "tensor 'nodata'", "NULL");
    attn_gguf_kv badv = {"t", {(attn_gguf_type)13, {.u32 = 0}}};
    tu_expect_fail(attn_gguf_save(path, &badv, 1, NULL, 0), ATTN_STATUS_INVALID_ARGUMENT,
                   "key 't'", "not a GGUF type");
    bool two_[1];
    memset(two_, 2, sizeof two_);
    attn_gguf_kv badb = attn_gguf_kv_arr("bb", ATTN_GGUF_TYPE_BOOL, 1, two_);
    tu_expect_fail(attn_gguf_save(path, &badb, 1, NULL, 0), ATTN_STATUS_INVALID_ARGUMENT,
                   "key 'bb'", "bool element 0");
    /* the streaming writer: too many bytes, too few */
    attn_gguf_writer *w;
    assert_int_equal(attn_gguf_writer_open(path, NULL, 0, &good, 1, &w), ATTN_STATUS_OK);
    tu_expect_fail(attn_gguf_writer_write(w, x, 12), ATTN_STATUS_INVALID_ARGUMENT,
                   "tensor 'x' is 8 bytes, 0 written, 12 more given", NULL);
    assert_int_equal(attn_gguf_writer_open(path, NULL, 0, &good, 1, &w), ATTN_STATUS_OK);
    assert_int_equal(attn_gguf_writer_write(w, x, 4), ATTN_STATUS_OK);
    tu_expect_fail(attn_gguf_writer_finish(w), ATTN_STATUS_INVALID_ARGUMENT,
                   "tensor 'x' got 4 of its 8 bytes, 0 tensors after it none", NULL);
    assert_int_equal(attn_gguf_writer_open(path, NULL, 0, &good, 1, &w), ATTN_STATUS_OK);
    attn_gguf_writer_abort(w);
    size_t n1;
    char *after = tu_read_all(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
    /* no temporary file left behind */
    DIR *d = opendir(tu_dir);
    struct dirent *de;
    while ((de = readdir(d))) assert_null(strstr(de->d_name, ".tmp."));
    closedir(d);
    tu_expect_fail(attn_gguf_save("/nonexistent-dir/x.gguf", NULL, 0, NULL, 0), ATTN_STATUS_IO,
                   "/nonexistent-dir/x.gguf", NULL);
}

/* ---- corrupt files, built by hand ---- */

typedef struct {
    unsigned char b[8192];
    size_t n;
} bytes;

static void put(bytes *f, const void *p, size_t n) {
    assert_true(f->n + n <= sizeof f->b);
    memcpy(f->b + f->n, p, n);
    f->n += n;
}
static void put32(bytes *f, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(f, b, 4);
}
static void put64(bytes *f, uint64_t v) {
    put32(f, (uint32_t)v);
    put32(f, (uint32_t)(v >> 32));
}
static void putstr(bytes *f, const char *s) {
    put64(f, strlen(s));
    put(f, s, strlen(s));
}
static void header(bytes *f, uint32_t version, uint64_t nt, uint64_t nkv) {
    f->n = 0;
    put(f, "GGUF", 4);
    put32(f, version);
    put64(f, nt);
    put64(f, nkv);
}
static void kv_u32(bytes *f, const char *key, uint32_t v) {
    putstr(f, key);
    put32(f, ATTN_GGUF_TYPE_UINT32);
    put32(f, v);
}
static void tinfo(bytes *f, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type,
                  uint64_t off) {
    putstr(f, name);
    put32(f, nd);
    for (uint32_t i = 0; i < nd; i++) put64(f, ne[i]);
    put32(f, type);
    put64(f, off);
}
static void pad(bytes *f, size_t a) {
    while (f->n % a) f->b[f->n++] = 0;
}
static void zeros(bytes *f, size_t n) {
    while (n--) f->b[f->n++] = 0;
}

static void expect_bad(const bytes *f, attn_status want, const char *s1, const char *s2) {
    attn_gguf *g = (attn_gguf *)1;
    attn_status s = attn_gguf_open_memory(f->b, f->n, "bad.gguf", &g);
    assert_null(g);
    tu_expect_fail3(s, want, "bad.gguf: ", s1, s2);
}

static void test_bad_input(void **state) {
    (void)state;
    bytes f;
    uint64_t ne4[1] = {4};
    /* a valid base: 1 key, 1 tensor */
    header(&f, 3, 1, 1);
    kv_u32(&f, "a.b", 7);
    tinfo(&f, "t", 1, ne4, ATTN_GGUF_DTYPE_F32, 0);
    pad(&f, 32);
    zeros(&f, 16);
    attn_gguf *g;
    assert_int_equal(attn_gguf_open_memory(f.b, f.n, "ok.gguf", &g), ATTN_STATUS_OK);
    attn_gguf_close(g);

    bytes e = f;
    memcpy(e.b, "GGUG", 4);
    expect_bad(&e, ATTN_STATUS_FORMAT, "not a GGUF file", "'GGUG'");
    e = f;
    e.b[4] = 1;
    expect_bad(&e, ATTN_STATUS_UNSUPPORTED, "version 1", NULL);
    e = f;
    e.b[4] = 4;
    expect_bad(&e, ATTN_STATUS_FORMAT, "GGUF version 4", NULL);
    e = f;
    e.b[4] = 0, e.b[7] = 3;
    expect_bad(&e, ATTN_STATUS_UNSUPPORTED, "big-endian", NULL);
    e.n = 3;
    expect_bad(&e, ATTN_STATUS_FORMAT, "3 bytes, too short", NULL);
    header(&e, 3, 0, (uint64_t)1 << 60);
    expect_bad(&e, ATTN_STATUS_FORMAT, "1152921504606846976 metadata entries cannot fit", NULL);
    header(&e, 3, (uint64_t)-1, 0);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor infos cannot fit", NULL);
    header(&e, 3, 0, 1);
    put64(&e, 1000);
    put(&e, "abcdefghijklmnopqrstuvwxyz", 26);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 0: the name has length 1000", "26 bytes left");
    header(&e, 3, 0, 1);
    putstr(&e, "k");
    put32(&e, 13);
    put32(&e, 0);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 'k': value type 13 is not a GGUF value type", NULL);
    header(&e, 3, 0, 1);
    putstr(&e, "k");
    put32(&e, ATTN_GGUF_TYPE_ARRAY);
    put32(&e, 99);
    put64(&e, 0);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 'k': array element type 99", NULL);
    header(&e, 3, 0, 1);
    putstr(&e, "k");
    put32(&e, ATTN_GGUF_TYPE_ARRAY);
    put32(&e, ATTN_GGUF_TYPE_UINT64);
    put64(&e, (uint64_t)1 << 62);
    zeros(&e, 64);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 'k': an array of 4611686018427387904 u64 values", "64 bytes left");
    header(&e, 3, 0, 1);
    putstr(&e, "k");
    put32(&e, ATTN_GGUF_TYPE_ARRAY);
    put32(&e, ATTN_GGUF_TYPE_STRING);
    put64(&e, 2);
    putstr(&e, "x");
    put64(&e, 1 << 20);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 'k': a string element has length 1048576", NULL);
    header(&e, 3, 0, 1);
    putstr(&e, "k");
    put32(&e, ATTN_GGUF_TYPE_UINT64);
    put32(&e, 5);
    expect_bad(&e, ATTN_STATUS_FORMAT, "truncated: key 'k': the value needs 8 bytes", NULL);
    header(&e, 3, 0, 1);
    putstr(&e, "k");
    put32(&e, ATTN_GGUF_TYPE_BOOL);
    put(&e, "\x02", 1);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 'k': bool value is 2", NULL);
    header(&e, 3, 0, 1);
    putstr(&e, "k");
    put32(&e, ATTN_GGUF_TYPE_ARRAY);
    put32(&e, ATTN_GGUF_TYPE_BOOL);
    put64(&e, 3);
    put(&e, "\x01\x00\x07", 3);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 'k': bool element 2 is 7", NULL);
    header(&e, 3, 0, 1);
    putstr(&e, "deep");
    put32(&e, ATTN_GGUF_TYPE_ARRAY);
    for (int i = 0; i < 40; i++) {
        put32(&e, ATTN_GGUF_TYPE_ARRAY);
        put64(&e, 1);
    }
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 'deep': arrays nested more than 16 levels", NULL);
    header(&e, 3, 0, 2);
    kv_u32(&e, "a.b", 1);
    kv_u32(&e, "a.b", 2);
    expect_bad(&e, ATTN_STATUS_FORMAT, "duplicate key 'a.b'", NULL);
    header(&e, 3, 0, 1);
    kv_u32(&e, "", 1);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 0: the name is empty", NULL);
    header(&e, 3, 0, 1);
    put64(&e, 3);
    put(&e, "a\0b", 3);
    put32(&e, ATTN_GGUF_TYPE_UINT8);
    put(&e, "x", 1);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 0: the name holds a NUL byte", NULL);
    header(&e, 3, 0, 1);
    putstr(&e, "ctrl\x1b[2J\nkey");
    put32(&e, 77);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 'ctrl\\x1b[2J\\x0akey'", NULL);
    header(&e, 3, 0, 1);
    putstr(&e, "general.alignment");
    put32(&e, ATTN_GGUF_TYPE_UINT64);
    put64(&e, 64);
    expect_bad(&e, ATTN_STATUS_FORMAT, "key 'general.alignment' is u64, expected u32", NULL);
    header(&e, 3, 0, 1);
    kv_u32(&e, "general.alignment", 48);
    expect_bad(&e, ATTN_STATUS_FORMAT, "'general.alignment' is 48, expected a power of two", NULL);
    header(&e, 3, 0, 1);
    kv_u32(&e, "general.alignment", 0);
    expect_bad(&e, ATTN_STATUS_FORMAT, "is 0, expected a power of two", NULL);

    /* tensor infos */
    uint64_t ne5[5] = {1, 1, 1, 1, 1};
    header(&e, 3, 1, 0);
    tinfo(&e, "t5", 5, ne5, 0, 0);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor 't5' has 5 dimensions, at most 4", NULL);
    uint64_t neg[2] = {4, (uint64_t)1 << 63};
    header(&e, 3, 1, 0);
    tinfo(&e, "neg", 2, neg, 0, 0);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor 'neg': dimension 1 is 9223372036854775808", NULL);
    uint64_t ovf[3] = {1u << 31, 1u << 31, 1u << 31};
    header(&e, 3, 1, 0);
    tinfo(&e, "ovf", 3, ovf, 0, 0);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor 'ovf': the element count", "overflows");
    uint64_t bytes_ovf[2] = {(uint64_t)1 << 61, 2};
    header(&e, 3, 1, 0);
    tinfo(&e, "big", 2, bytes_ovf, ATTN_GGUF_DTYPE_F64, 0);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor 'big': the byte size of ne [2305843009213693952, 2] of F64 overflows", NULL);
    header(&e, 3, 1, 0);
    tinfo(&e, "t", 1, ne4, 99, 0);
    expect_bad(&e, ATTN_STATUS_UNSUPPORTED, "tensor 't' has type 99, which ggml does not know", NULL);
    header(&e, 3, 1, 0);
    tinfo(&e, "t", 1, ne4, 4, 0);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor 't' has type 4, which ggml removed", NULL);
    uint64_t ne33[1] = {33};
    header(&e, 3, 1, 0);
    tinfo(&e, "q", 1, ne33, ATTN_GGUF_DTYPE_Q4_0, 0);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor 'q': ne [33] does not fit type Q4_0",
               "block of 32");
    header(&e, 3, 2, 0);
    tinfo(&e, "t", 1, ne4, 0, 0);
    tinfo(&e, "t", 1, ne4, 0, 32);
    pad(&e, 32);
    zeros(&e, 64);
    expect_bad(&e, ATTN_STATUS_FORMAT, "duplicate tensor name 't'", NULL);
    header(&e, 3, 1, 0);
    put64(&e, 2);
    put(&e, "t\0", 2);
    zeros(&e, 24);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor 0: the name 't\\x00' holds a NUL byte", NULL);
    header(&e, 3, 1, 0);
    tinfo(&e, "t", 1, ne4, 0, 8);
    pad(&e, 32);
    zeros(&e, 64);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor 't': offset 8 is not a multiple of the alignment 32", NULL);
    header(&e, 3, 1, 0);
    tinfo(&e, "t", 1, ne4, 0, 0);
    pad(&e, 32);
    zeros(&e, 15);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor 't': its 16 bytes at offset 0", "past the end of the file");
    header(&e, 3, 1, 0);
    tinfo(&e, "t", 1, ne4, 0, (uint64_t)-32);
    pad(&e, 32);
    zeros(&e, 16);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensor 't'", "past the end of the file");
    uint64_t ne16[1] = {16};
    header(&e, 3, 2, 0);
    tinfo(&e, "a", 1, ne16, 0, 0);
    tinfo(&e, "b", 1, ne4, 0, 32);
    pad(&e, 32);
    zeros(&e, 64);
    expect_bad(&e, ATTN_STATUS_FORMAT, "tensors 'a' (bytes 0..64) and 'b' (32..48) overlap", NULL);
    header(&e, 3, 1, 0);
    tinfo(&e, "t", 1, ne4, 0, 0);
    e.n -= 3;
    expect_bad(&e, ATTN_STATUS_FORMAT, "truncated: tensor 't': the offset needs 8 bytes", NULL);
    /* the same bytes from a file: the message names the path */
    const char *p = tu_tmp("bad.gguf");
    tu_write_all(p, (const char *)e.b, e.n);
    tu_expect_fail(attn_gguf_open(p, &g), ATTN_STATUS_FORMAT, p, "truncated");
    tu_expect_fail(attn_gguf_open(tu_dir, &g), ATTN_STATUS_IO, "a directory", NULL);
    tu_expect_fail(attn_gguf_open(tu_tmp("missing.gguf"), &g), ATTN_STATUS_IO, "cannot open", NULL);
    tu_write_all(p, "", 0);
    tu_expect_fail(attn_gguf_open(p, &g), ATTN_STATUS_FORMAT, "0 bytes, too short", NULL);
}

/* Every prefix of the Python-written file fails with a one-line message (the whole file opens). */
static void test_truncated(void **state) {
    (void)state;
    size_t n;
    char *buf = tu_read_all(json_string_value(json_object_get(expect_file("types"), "path")), &n);
    assert_non_null(buf);
    size_t step = tu_valgrind() ? 13 : 1, failures = 0;
    for (size_t k = 0; k < n; k += step) {
        attn_gguf *g;
        attn_status s = attn_gguf_open_memory(buf, k, "cut.gguf", &g);
        if (s == ATTN_STATUS_OK) {
            /* the padding after the last tensor is optional: the file may end before it */
            assert_true(k >= n - 32);
            attn_gguf_close(g);
            continue;
        }
        failures++;
        const char *msg = attn_last_error();
        if (s != ATTN_STATUS_FORMAT || strncmp(msg, "cut.gguf: ", 10) || strchr(msg, '\n'))
            fail_msg("prefix of %zu bytes: [%s] %s", k, attn_status_str(s), msg);
    }
    attn_gguf *g;
    assert_int_equal(attn_gguf_open_memory(buf, n, "whole.gguf", &g), ATTN_STATUS_OK);
    attn_gguf_close(g);
    printf("  %zu prefixes of %zu bytes refused with one-line messages\n", failures, n);
    free(buf);
}

/* ---- real files ---- */

static void test_real_files(void **state) {
    (void)state;
    static const char *const vocabs[] = {"llama-spm", "llama-bpe", "qwen2", "phi-3", "gpt-2",
                                         "bert-bge", "aquila", "command-r"};
    size_t opened = 0;
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "models/llamacpp/vocab/ggml-vocab-%s.gguf", vocabs[i]);
        if (access(path, R_OK)) continue;
        attn_gguf *g;
        if (attn_gguf_open(path, &g)) fail_msg("%s", attn_last_error());
        const void *toks;
        uint64_t nt;
        assert_int_equal(attn_gguf_get_arr(g, "tokenizer.ggml.tokens", ATTN_GGUF_TYPE_STRING,
                                           &toks, &nt),
                         ATTN_STATUS_OK);
        assert_true(nt > 1000);
        printf("  %s: version %u, %zu keys, %llu tokens\n", path, attn_gguf_version(g),
               attn_gguf_kv_count(g), (unsigned long long)nt);
        attn_gguf_close(g);
        opened++;
    }
    json_t *sm = json_object_get(expect(), "smollm2");
    if (!sm || json_is_null(sm)) {
        tu_skip("models/SmolLM2-135M-Instruct.Q4_1.gguf missing (tools/get_smollm2.sh)%s",
                opened ? "" : "; models/llamacpp missing too (tools/get_llamacpp_assets.sh)");
    }
    attn_gguf *g;
    if (attn_gguf_open(json_string_value(json_object_get(sm, "path")), &g))
        fail_msg("%s", attn_last_error());
    json_t *ts = json_object_get(sm, "tensors");
    assert_int_equal(attn_gguf_tensor_count(g), json_array_size(ts));
    assert_int_equal(attn_gguf_kv_count(g), json_integer_value(json_object_get(sm, "n_kv")));
    size_t types[ATTN_GGUF_DTYPE_COUNT] = {0};
    for (size_t i = 0; i < json_array_size(ts); i++) {
        json_t *e = json_array_get(ts, i), *ne = json_object_get(e, "ne");
        const attn_gguf_tensor *t = attn_gguf_tensor_at(g, i);
        assert_string_equal(t->name, json_string_value(json_object_get(e, "name")));
        assert_int_equal(t->type, json_integer_value(json_object_get(e, "type")));
        assert_int_equal(t->n_dims, json_array_size(ne));
        for (int k = 0; k < t->n_dims; k++)
            assert_int_equal(t->ne[k], json_integer_value(json_array_get(ne, k)));
        assert_int_equal(t->offset, json_integer_value(json_object_get(e, "offset")));
        assert_int_equal(t->nbytes, json_integer_value(json_object_get(e, "nbytes")));
        size_t hn;
        unsigned char *head = unhex(json_string_value(json_object_get(e, "head")), &hn);
        assert_memory_equal(attn_gguf_tensor_data(g, t), head, hn);
        free(head);
        types[t->type]++;
    }
    printf("  SmolLM2-135M-Instruct.Q4_1.gguf: %zu tensors as GGUFReader sees them (%zu Q4_1, "
           "%zu Q8_0, %zu F32)\n",
           attn_gguf_tensor_count(g), types[ATTN_GGUF_DTYPE_Q4_1], types[ATTN_GGUF_DTYPE_Q8_0],
           types[ATTN_GGUF_DTYPE_F32]);
    attn_gguf_close(g);
}

static void test_dtypes(void **state) {
    (void)state;
    /* ggml's table, as the gguf package's GGML_QUANT_SIZES and ggml-common.h give it */
    static const struct {
        int t;
        uint32_t bs, ts;
        const char *name;
    } want[] = {{0, 1, 4, "F32"},       {1, 1, 2, "F16"},       {2, 32, 18, "Q4_0"},
                {3, 32, 20, "Q4_1"},    {6, 32, 22, "Q5_0"},    {7, 32, 24, "Q5_1"},
                {8, 32, 34, "Q8_0"},    {9, 32, 36, "Q8_1"},    {10, 256, 84, "Q2_K"},
                {11, 256, 110, "Q3_K"}, {12, 256, 144, "Q4_K"}, {13, 256, 176, "Q5_K"},
                {14, 256, 210, "Q6_K"}, {15, 256, 292, "Q8_K"}, {16, 256, 66, "IQ2_XXS"},
                {17, 256, 74, "IQ2_XS"}, {18, 256, 98, "IQ3_XXS"}, {19, 256, 50, "IQ1_S"},
                {20, 32, 18, "IQ4_NL"}, {21, 256, 110, "IQ3_S"}, {22, 256, 82, "IQ2_S"},
                {23, 256, 136, "IQ4_XS"}, {24, 1, 1, "I8"},     {25, 1, 2, "I16"},
                {26, 1, 4, "I32"},      {27, 1, 8, "I64"},      {28, 1, 8, "F64"},
                {29, 256, 56, "IQ1_M"}, {30, 1, 2, "BF16"},     {34, 256, 54, "TQ1_0"},
                {35, 256, 66, "TQ2_0"}, {39, 32, 17, "MXFP4"},  {40, 64, 36, "NVFP4"},
                {41, 128, 18, "Q1_0"},  {42, 64, 18, "Q2_0"}};
    size_t known = 0;
    for (int t = 0; t < 64; t++) {
        uint32_t bs, ts;
        bool ok = attn_gguf_dtype_block((attn_gguf_dtype)t, &bs, &ts);
        size_t k = 0;
        while (k < sizeof want / sizeof want[0] && want[k].t != t) k++;
        if (k == sizeof want / sizeof want[0]) {
            assert_false(ok);
            assert_null(attn_gguf_dtype_name((attn_gguf_dtype)t));
            continue;
        }
        assert_true(ok);
        assert_int_equal(bs, want[k].bs);
        assert_int_equal(ts, want[k].ts);
        assert_string_equal(attn_gguf_dtype_name((attn_gguf_dtype)t), want[k].name);
        known++;
    }
    assert_int_equal(known, 35);
    uint64_t nb;
    int64_t ne[2] = {256, 3};
    assert_true(attn_gguf_nbytes(ATTN_GGUF_DTYPE_Q4_K, 2, ne, &nb));
    assert_int_equal(nb, 3 * 144);
    ne[0] = 255;
    assert_false(attn_gguf_nbytes(ATTN_GGUF_DTYPE_Q4_K, 2, ne, &nb));
    assert_string_equal(attn_gguf_type_name(ATTN_GGUF_TYPE_FLOAT64), "f64");
    assert_string_equal(attn_gguf_type_name((attn_gguf_type)13), "?");
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "gguf")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtypes),       cmocka_unit_test(test_read_python),
        cmocka_unit_test(test_write_python), cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_bad_input),    cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_real_files),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(g_expect);
    tu_rm_tree(tu_dir);
    return failed ? 1 : 0;
}
